/* Row collection, timing and JSON output for every op's benchmark. */
#define _GNU_SOURCE
#include "bench.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

double bench_now_s(void) { return tsr_now_s(); }

bool bench_is_simulator(const tsr_device_info *info) {
    return tsr_contains_nocase(info->platform_name, "oclgrind") || tsr_contains_nocase(info->name, "oclgrind");
}

double bench_json_num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

const char *bench_json_text(const cJSON *o, const char *key) {
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
    return s ? s : "";
}

const char *bench_format_rate(double v, char *out, size_t size) {
    if (v >= 1000) snprintf(out, size, "%.0f", v);
    else if (v >= 10) snprintf(out, size, "%.1f", v);
    else snprintf(out, size, "%.3g", v);
    return out;
}

void bench_settle_host_threads(void) {
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
}

/* Median, min and max of n values (sorts them in place). */
static void summarize(double *v, int n, double *median, double *min, double *max) {
    tsr_stats stats;
    tsr_stats_of(v, n, &stats);
    *median = stats.median;
    *min = stats.min;
    *max = stats.max;
}

typedef struct wall_timed {
    bench_fn fn;
    void *ctx;
} wall_timed;

/* One call of a benchmark's function, in wall-clock milliseconds. */
static tsr_status wall_ms(void *vctx, double *ms) {
    wall_timed *w = vctx;
    double t0 = bench_now_s();
    tsr_status st = w->fn(w->ctx);
    *ms = (bench_now_s() - t0) * 1e3;
    return st;
}

tsr_status bench_time(bench_fn fn, void *ctx, double budget_s, int min_runs, int max_runs, bench_row *row) {
    double *t = calloc((size_t)max_runs, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    wall_timed w = {fn, ctx};
    int n = 0;
    tsr_status st = tsr_repeat(wall_ms, &w, budget_s, min_runs, max_runs, BENCH_PRECISION, t, &n); /* after a warm-up call */
    if (st == TSR_SUCCESS) {
        row->runs = n;
        summarize(t, n, &row->time_ms, &row->time_min_ms, &row->time_max_ms);
    }
    free(t);
    return st;
}

tsr_status bench_time_paired(bench_fn fn_a, void *ctx_a, bench_fn fn_b, void *ctx_b, double budget_s, int min_pairs,
                             int max_pairs, bench_row *row_a, bench_row *row_b, double ratio[3]) {
    tsr_status st = fn_a(ctx_a);
    if (st == TSR_SUCCESS) st = fn_b(ctx_b);
    if (st != TSR_SUCCESS) return st;
    double *t = calloc(4 * (size_t)max_pairs, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    double *ta = t, *tb = t + max_pairs, *r = t + 2 * max_pairs, *scratch = t + 3 * max_pairs;
    int n = 0;
    double start = bench_now_s();
    while (st == TSR_SUCCESS && n < max_pairs &&
           (n < min_pairs || (bench_now_s() - start < budget_s &&
                              !(tsr_quantile_known(r, n, 0.5, BENCH_PRECISION, scratch) &&
                                tsr_quantile_known(ta, n, 0.5, BENCH_PRECISION, scratch) &&
                                tsr_quantile_known(tb, n, 0.5, BENCH_PRECISION, scratch))))) {
        double t0 = bench_now_s();
        if ((st = fn_a(ctx_a)) != TSR_SUCCESS) break;
        double t1 = bench_now_s();
        if ((st = fn_b(ctx_b)) != TSR_SUCCESS) break;
        ta[n] = (t1 - t0) * 1e3;
        tb[n] = (bench_now_s() - t1) * 1e3;
        r[n] = ta[n] / tb[n];
        ++n;
    }
    if (st == TSR_SUCCESS) {
        row_a->runs = row_b->runs = n;
        summarize(ta, n, &row_a->time_ms, &row_a->time_min_ms, &row_a->time_max_ms);
        summarize(tb, n, &row_b->time_ms, &row_b->time_min_ms, &row_b->time_max_ms);
        summarize(r, n, &ratio[0], &ratio[1], &ratio[2]);
    }
    free(t);
    return st;
}

tsr_status bench_checked_run(bench_fn fn, void *ctx, tsr_device *dev, cl_mem out, float *host, size_t n) {
    for (size_t i = 0; i < n; ++i) host[i] = NAN;
    tsr_status st = out ? tsr_upload(dev, out, host, n) : TSR_SUCCESS;
    if (st == TSR_SUCCESS) st = fn(ctx);
    if (st == TSR_SUCCESS && out) st = tsr_download(dev, out, host, n);
    return st;
}

tsr_status bench_add(bench_report *r, const bench_row *row) {
    if (r->nrows == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 32;
        bench_row *grown = realloc(r->rows, cap * sizeof *grown);
        if (!grown) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        r->rows = grown;
        r->cap = cap;
    }
    r->rows[r->nrows++] = *row;
    return TSR_SUCCESS;
}

bool bench_predicted_too_slow(const bench_report *r, const char *op, const char *impl, double flops, int min_runs,
                              char *why, size_t size) {
    const bench_row *fastest = NULL;
    for (size_t i = 0; i < r->nrows; ++i) {
        const bench_row *w = &r->rows[i];
        if (strcmp(w->op, op) == 0 && strcmp(w->impl, impl) == 0 && w->gflops > 0 &&
            (!fastest || w->gflops > fastest->gflops))
            fastest = w;
    }
    if (!fastest) return false;
    double per_run = flops / (fastest->gflops * 1e9);
    if (per_run * (min_runs + 1) <= BENCH_MAX_PREDICTED_S) return false;
    snprintf(why, size, "not run: about %.0f s per run at the %.3g GFLOP/s %s reached on %s (name it in --sizes to run it)",
             per_run, fastest->gflops, impl, fastest->shape);
    return true;
}

void bench_report_free(bench_report *r) {
    free(r->rows);
    r->rows = NULL;
    r->nrows = r->cap = 0;
}

tsr_status bench_write_json(const bench_report *r, const char *path) {
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < r->nrows; ++i) {
        const bench_row *w = &r->rows[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", w->op);
        cJSON_AddStringToObject(o, "shape", w->shape);
        cJSON_AddStringToObject(o, "impl", w->impl);
        cJSON_AddStringToObject(o, "device", r->device);
        cJSON_AddNumberToObject(o, "time_ms", w->time_ms);
        cJSON_AddNumberToObject(o, "time_min_ms", w->time_min_ms);
        cJSON_AddNumberToObject(o, "time_max_ms", w->time_max_ms);
        cJSON_AddNumberToObject(o, "runs", w->runs);
        cJSON_AddNumberToObject(o, "gflops", w->gflops);
        cJSON_AddNumberToObject(o, "gbps", w->gbps);
        if (w->mem_mib > 0) cJSON_AddNumberToObject(o, "device_mib", w->mem_mib);
        if (w->rel_err >= 0) cJSON_AddNumberToObject(o, "rel_err", w->rel_err);
        else cJSON_AddNullToObject(o, "rel_err");
        cJSON_AddStringToObject(o, "timing", w->timing[0] ? w->timing : "host");
        if (w->mask[0]) cJSON_AddStringToObject(o, "mask", w->mask);
        if (w->variant[0]) cJSON_AddStringToObject(o, "variant", w->variant);
        if (w->dtype[0]) cJSON_AddStringToObject(o, "dtype", w->dtype);
        cJSON_AddItemToArray(arr, o);
    }
    char *text = cJSON_Print(arr);
    cJSON_Delete(arr);
    if (!text) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    tsr_status st = tsr_write_file_atomic(path, text, strlen(text));
    free(text);
    return st;
}

/* ---- strict parsing ---- */

bool bench_scan_uint(const char **p, uint64_t max, uint64_t *out) {
    const char *s = *p;
    uint64_t v = 0;
    if (*s < '0' || *s > '9') return false;
    for (; *s >= '0' && *s <= '9'; ++s) {
        unsigned d = (unsigned)(*s - '0');
        if (d > max || v > (max - d) / 10) return false; /* v * 10 + d > max, without wrapping */
        v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return true;
}

tsr_status bench_parse_count(const char *text, const char *option, uint64_t min, uint64_t max, uint64_t *out) {
    const char *p = text;
    uint64_t v = 0;
    if (!bench_scan_uint(&p, max, &v) || *p || v < min)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: '%s' is not a whole number from %llu to %llu", option, text,
                        (unsigned long long)min, (unsigned long long)max);
    *out = v;
    return TSR_SUCCESS;
}

tsr_status bench_parse_u64(const char *text, const char *option, uint64_t *out) {
    /* Decimal, or hexadecimal after "0x"; digits only, so no sign can wrap to 2^64 - 1. */
    bool hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    const char *p = hex ? text + 2 : text;
    uint64_t v = 0;
    bool ok = isxdigit((unsigned char)*p) != 0;
    for (; ok && *p; ++p) {
        unsigned d;
        if (*p >= '0' && *p <= '9') d = (unsigned)(*p - '0');
        else if (hex && isxdigit((unsigned char)*p)) d = (unsigned)(tolower((unsigned char)*p) - 'a' + 10);
        else break;
        unsigned base = hex ? 16 : 10;
        ok = v <= (UINT64_MAX - d) / base;
        v = v * base + d;
    }
    if (!ok || *p)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: '%s' is not an unsigned 64-bit integer (decimal or 0x-hexadecimal)",
                        option, text);
    *out = v;
    return TSR_SUCCESS;
}

tsr_status bench_parse_seconds(const char *text, const char *option, bool allow_zero, double max, double *out) {
    /* strtod alone takes " 1", "+1", "-0", "inf", "nan" and "0x1p4": only plain decimals here. */
    bool plain = (*text >= '0' && *text <= '9') || *text == '.';
    for (const char *c = text; plain && *c; ++c)
        plain = strchr("0123456789.eE", *c) || ((*c == '+' || *c == '-') && (c[-1] == 'e' || c[-1] == 'E'));
    char *end = NULL;
    double v = plain ? strtod(text, &end) : NAN;
    if (!plain || *end || !isfinite(v) || !(allow_zero ? v >= 0 : v > 0) || v > max)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: '%s' is not a number of seconds %s 0 and at most %g", option, text,
                        allow_zero ? "from" : "above", max);
    *out = v;
    return TSR_SUCCESS;
}

tsr_status bench_parse_counts(const char *text, const char *what, uint64_t max, size_t **out, size_t *count) {
    size_t cap = 1, n = 0;
    for (const char *p = text; *p; ++p) cap += *p == ',';
    size_t *s = calloc(cap, sizeof *s);
    if (!s) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    const char *p = text;
    bool too_large = false;
    const char *token = p;
    while (*p) {
        uint64_t v = 0;
        token = p;
        if (!bench_scan_uint(&p, max, &v)) {
            too_large = *p >= '0' && *p <= '9';
            break;
        }
        unsigned shift = (*p == 'K' || *p == 'k') ? 10 : (*p == 'M' || *p == 'm') ? 20 : 0;
        if (shift) {
            if (v > (max >> shift)) {
                too_large = true;
                break;
            }
            v <<= shift, ++p;
        }
        if (v == 0) break;
        s[n++] = (size_t)v;
        if (*p == ',' && p[1]) ++p;
        else if (*p) break;
    }
    if (*p || n == 0) {
        free(s);
        if (too_large)
            return tsr_fail(TSR_ERR_INVALID_ARG, "--sizes: '%s' is too large (%s: at most %llu)", token, what,
                            (unsigned long long)max);
        return tsr_fail(TSR_ERR_INVALID_ARG, "--sizes: cannot read '%s' (%s: N, NK or NM from 1 to %llu, comma separated)",
                        p, what, (unsigned long long)max);
    }
    *out = s;
    *count = n;
    return TSR_SUCCESS;
}

/* ---- memory and output checks ---- */

uint64_t bench_host_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kib = 0;
        bool found = false;
        while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
        fclose(f);
        if (found) return (uint64_t)kib * 1024;
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

static double mib(uint64_t bytes) { return (double)bytes / 1048576.0; }

tsr_status bench_check_memory(const tsr_device *dev, const char *what, const size_t *buffers, size_t n,
                              size_t host_bytes) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
        if (buffers[i] > info->max_alloc_bytes)
            return tsr_fail(TSR_ERR_OUT_OF_MEMORY,
                            "%s: a buffer of %.0f MiB is more than one allocation may hold on '%s' (%.0f MiB)", what,
                            mib(buffers[i]), info->name, mib(info->max_alloc_bytes));
        total += buffers[i]; /* each is below max_alloc_bytes (a uint64_t): a few cannot wrap */
    }
    if (total > info->global_mem_bytes)
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "%s: needs %.0f MiB of device memory, more than '%s' has (%.0f MiB)",
                        what, mib(total), info->name, mib(info->global_mem_bytes));
    uint64_t avail = bench_host_available();
    if (avail && host_bytes > avail)
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "%s: needs %.0f MiB of host memory, more than is available (%.0f MiB)",
                        what, mib(host_bytes), mib(avail));
    return TSR_SUCCESS;
}

tsr_status bench_check_output(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return tsr_fail(TSR_ERR_IO, "cannot write '%s': it is a directory", path);
    /* A probe beside it, as the atomic write will create its temporary file there. */
    char probe[TSR_PATH_MAX + 64];
    int n = snprintf(probe, sizeof probe, "%s.probe.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof probe) return tsr_fail(TSR_ERR_INVALID_ARG, "path too long: '%s'", path);
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return tsr_fail(TSR_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    close(fd);
    unlink(probe);
    return TSR_SUCCESS;
}

/* ---- text ---- */

void bench_text_printf(bench_text *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if (b->data && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
}

void bench_text_md(bench_text *b, const char *s) {
    for (; s && *s; ++s) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '<': bench_text_printf(b, "&lt;"); break;
        case '>': bench_text_printf(b, "&gt;"); break;
        case '&': bench_text_printf(b, "&amp;"); break;
        case '|': bench_text_printf(b, "&#124;"); break; /* an entity never splits a table cell */
        case '\\': case '`': case '*': case '_': case '[': case ']': case '(': case ')': case '#': case '!':
        case '~': case '{': case '}': case '$':
            bench_text_printf(b, "\\%c", c);
            break;
        default: bench_text_printf(b, "%c", c < 0x20 || c == 0x7f ? ' ' : c); /* no line breaks, no controls */
        }
    }
}

char *bench_text_finish(bench_text *b) {
    if (b->failed || !b->data) {
        free(b->data);
        b->data = NULL;
        return NULL;
    }
    return b->data;
}

/* ---- a string-keyed index ---- */

struct bench_index_slot {
    char *key;
    size_t len;
    uint64_t hash;
    void *value;
};

static bool index_grow(bench_index *ix) {
    size_t cap = ix->cap ? 2 * ix->cap : 64;
    struct bench_index_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < ix->cap; ++i) {
        if (!ix->slots[i].key) continue;
        size_t j = (size_t)ix->slots[i].hash & (cap - 1);
        while (slots[j].key) j = (j + 1) & (cap - 1);
        slots[j] = ix->slots[i];
    }
    free(ix->slots);
    ix->slots = slots;
    ix->cap = cap;
    return true;
}

void **bench_index_get(bench_index *ix, const char *key, size_t len, bool *found) {
    *found = false;
    if (2 * (ix->count + 1) > ix->cap && !index_grow(ix)) return NULL; /* at most half full */
    uint64_t h = XXH3_64bits(key, len);
    size_t j = (size_t)h & (ix->cap - 1);
    for (; ix->slots[j].key; j = (j + 1) & (ix->cap - 1)) {
        struct bench_index_slot *s = &ix->slots[j];
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) {
            *found = true;
            return &s->value;
        }
    }
    char *copy = malloc(len + 1);
    if (!copy) return NULL;
    memcpy(copy, key, len);
    copy[len] = '\0';
    ix->slots[j] = (struct bench_index_slot){copy, len, h, NULL};
    ++ix->count;
    return &ix->slots[j].value;
}

void bench_index_free(bench_index *ix) {
    for (size_t i = 0; i < ix->cap; ++i) free(ix->slots[i].key);
    free(ix->slots);
    memset(ix, 0, sizeof *ix);
}
