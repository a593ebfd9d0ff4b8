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
    qsort(t, (size_t)n, sizeof *t, compare_doubles);
    row->runs = n;
    row->time_ms = (n % 2) ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    row->time_min_ms = t[0];
    row->time_max_ms = t[n - 1];
    free(t);
    return TSR_SUCCESS;
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
