/* Row collection, timing and JSON output for every op's benchmark. */
#include "bench.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median, min and max of n values (sorts them in place). */
static void summarize(double *v, int n, double *median, double *min, double *max) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    *median = (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *min = v[0];
    *max = v[n - 1];
}

tsr_status bench_time(bench_fn fn, void *ctx, double budget_s, int min_runs, int max_runs, bench_row *row) {
    tsr_status st = fn(ctx); /* warm-up: compilation, first-touch, caches */
    if (st != TSR_SUCCESS) return st;
    double *t = calloc((size_t)max_runs, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    int n = 0;
    double start = bench_now_s();
    while (n < max_runs && (n < min_runs || bench_now_s() - start < budget_s)) {
        double t0 = bench_now_s();
        st = fn(ctx);
        if (st != TSR_SUCCESS) {
            free(t);
            return st;
        }
        t[n++] = (bench_now_s() - t0) * 1e3;
    }
    row->runs = n;
    summarize(t, n, &row->time_ms, &row->time_min_ms, &row->time_max_ms);
    free(t);
    return TSR_SUCCESS;
}

tsr_status bench_time_paired(bench_fn fn_a, void *ctx_a, bench_fn fn_b, void *ctx_b, double budget_s, int min_pairs,
                             int max_pairs, bench_row *row_a, bench_row *row_b, double ratio[3]) {
    tsr_status st = fn_a(ctx_a);
    if (st == TSR_SUCCESS) st = fn_b(ctx_b);
    if (st != TSR_SUCCESS) return st;
    double *t = calloc(3 * (size_t)max_pairs, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    double *ta = t, *tb = t + max_pairs, *r = t + 2 * max_pairs;
    int n = 0;
    double start = bench_now_s();
    while (st == TSR_SUCCESS && n < max_pairs && (n < min_pairs || bench_now_s() - start < budget_s)) {
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
        cJSON_AddItemToArray(arr, o);
    }
    char *text = cJSON_Print(arr);
    cJSON_Delete(arr);
    if (!text) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    tsr_status st = tsr_write_file_atomic(path, text, strlen(text));
    free(text);
    return st;
}

tsr_status bench_parse_counts(const char *text, const char *what, size_t **out, size_t *count) {
    size_t cap = 1, n = 0;
    for (const char *p = text; *p; ++p) cap += *p == ',';
    size_t *s = calloc(cap, sizeof *s);
    if (!s) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    const char *p = text;
    while (*p) {
        char *end = NULL;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || v == 0) break;
        if (*end == 'K' || *end == 'k') v <<= 10, ++end;
        else if (*end == 'M' || *end == 'm') v <<= 20, ++end;
        s[n++] = (size_t)v;
        p = end;
        if (*p == ',') ++p;
        else if (*p) break;
    }
    if (*p || n == 0) {
        free(s);
        return tsr_fail(TSR_ERR_INVALID_ARG, "--sizes: cannot read '%s' (%s: N, NK or NM, comma separated)", p, what);
    }
    *out = s;
    *count = n;
    return TSR_SUCCESS;
}
