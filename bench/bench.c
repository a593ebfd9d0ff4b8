/* Row collection, timing and JSON output for every op's benchmark. */
#define _GNU_SOURCE
#include "bench.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    double t0 = util_now_s();
    tsr_status st = w->fn(w->ctx);
    *ms = (util_now_s() - t0) * 1e3;
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

/* Bytes that bench_evict_caches walks: 4x the last-level cache (glibc's sysconf), at least 64 MiB;
 * 128 MiB when the size is not known. */
size_t bench_evict_bytes(void) {
    long llc = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    size_t bytes = llc > 0 ? 4 * (size_t)llc : (size_t)128 << 20;
    return bytes < ((size_t)64 << 20) ? (size_t)64 << 20 : bytes;
}

static unsigned char *evict_buf;
static size_t evict_size;

tsr_status bench_evict_caches(void *unused) {
    (void)unused;
    if (!evict_buf) {
        evict_size = bench_evict_bytes();
        evict_buf = calloc(evict_size, 1);
        if (!evict_buf) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory for the %zu-byte cache eviction buffer",
                                        evict_size);
    }
    util_touch_lines(evict_buf, evict_size);
    return TSR_SUCCESS;
}

static tsr_status time_paired(bench_fn fn_a, void *ctx_a, bench_fn fn_b, void *ctx_b, bench_fn evict, void *evict_ctx,
                              double budget_s, int min_pairs, int max_pairs, bench_row *row_a, bench_row *row_b,
                              double ratio[3]) {
    tsr_status st = fn_a(ctx_a);
    if (st == TSR_SUCCESS) st = fn_b(ctx_b);
    if (st != TSR_SUCCESS) return st;
    double *t = calloc(4 * (size_t)max_pairs, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    double *ta = t, *tb = t + max_pairs, *r = t + 2 * max_pairs, *scratch = t + 3 * max_pairs;
    int n = 0;
    /* With evict the budget counts the timed calls alone (the emptying takes several times their
     * time), within 4 budgets of wall time. */
    double start = util_now_s(), timed = 0;
    while (st == TSR_SUCCESS && n < max_pairs &&
           (n < min_pairs || ((evict ? timed < budget_s && util_now_s() - start < 4 * budget_s
                                     : util_now_s() - start < budget_s) &&
                              !(tsr_quantile_known(r, n, 0.5, BENCH_PRECISION, scratch) &&
                                tsr_quantile_known(ta, n, 0.5, BENCH_PRECISION, scratch) &&
                                tsr_quantile_known(tb, n, 0.5, BENCH_PRECISION, scratch))))) {
        if (evict && (st = evict(evict_ctx)) != TSR_SUCCESS) break;
        double t0 = util_now_s();
        if ((st = fn_a(ctx_a)) != TSR_SUCCESS) break;
        double t1 = util_now_s();
        if (evict && (st = evict(evict_ctx)) != TSR_SUCCESS) break;
        double t2 = util_now_s();
        if ((st = fn_b(ctx_b)) != TSR_SUCCESS) break;
        ta[n] = (t1 - t0) * 1e3;
        tb[n] = (util_now_s() - t2) * 1e3;
        r[n] = ta[n] / tb[n];
        timed += (ta[n] + tb[n]) * 1e-3;
        ++n;
    }
    if (st == TSR_SUCCESS) {
        row_a->runs = row_b->runs = n;
        summarize(ta, n, &row_a->time_ms, &row_a->time_min_ms, &row_a->time_max_ms);
        summarize(tb, n, &row_b->time_ms, &row_b->time_min_ms, &row_b->time_max_ms);
        summarize(r, n, &ratio[0], &ratio[1], &ratio[2]);
        /* each row's rate over its twin's, median over the pairs (r is then overwritten) */
        double lo, hi;
        for (int i = 0; i < n; ++i) r[i] = tb[i] / ta[i];
        summarize(r, n, &row_a->paired_rate_ratio, &lo, &hi);
        for (int i = 0; i < n; ++i) r[i] = ta[i] / tb[i];
        summarize(r, n, &row_b->paired_rate_ratio, &lo, &hi);
    }
    free(t);
    return st;
}

tsr_status bench_time_paired(bench_fn fn_a, void *ctx_a, bench_fn fn_b, void *ctx_b, double budget_s, int min_pairs,
                             int max_pairs, bench_row *row_a, bench_row *row_b, double ratio[3]) {
    return time_paired(fn_a, ctx_a, fn_b, ctx_b, NULL, NULL, budget_s, min_pairs, max_pairs, row_a, row_b, ratio);
}

tsr_status bench_time_paired_cold(bench_fn fn_a, void *ctx_a, bench_fn fn_b, void *ctx_b, bench_fn evict,
                                  void *evict_ctx, double budget_s, int min_pairs, int max_pairs, bench_row *row_a,
                                  bench_row *row_b, double ratio[3]) {
    return time_paired(fn_a, ctx_a, fn_b, ctx_b, evict ? evict : bench_evict_caches, evict_ctx, budget_s, min_pairs,
                       max_pairs, row_a, row_b, ratio);
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
        if (w->paired_rate_ratio > 0) cJSON_AddNumberToObject(o, "paired_rate_ratio", w->paired_rate_ratio);
        cJSON_AddItemToArray(arr, o);
    }
    char *text = cJSON_Print(arr);
    cJSON_Delete(arr);
    if (!text) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    tsr_status st = tsr_write_file_atomic(path, text, strlen(text));
    free(text);
    return st;
}

