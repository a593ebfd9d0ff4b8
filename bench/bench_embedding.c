/* `tessera bench embedding`: BERT's embedding gather (tsr_embedding) on shapes TOKENSxHIDDEN with
 * BERT-base's tables (vocab 30522, 512 positions, 2 token types) and random ids. GB/s counts the
 * bytes that must move: the three rows read per token and y written once (the ids' upload is
 * part of the call and its time). With a 16-bit --dtype IN[/OUT] the tables are stored as IN and
 * y as OUT, and the typed gather is timed in alternation with the fp32 gather (rows
 * "gather-paired", with the caches emptied before every call, and "gather-paired-hot", plain
 * alternation; the ratio of tokens per second the 16-bit storage buys). Every row is checked
 * against a double-precision sum of the tables' stored values. */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { EMB_VOCAB = 30522, EMB_POSITIONS = 512, EMB_TYPES = 2, EMB_SEQ = 128 };

typedef struct emb_run {
    tsr_device *dev;
    tsr_embedding_desc d;
    const int32_t *ids, *type_ids;
    cl_mem word, position, token_type, y;
} emb_run;

static tsr_status emb_once(void *ctx) {
    emb_run *r = ctx;
    cl_event ev = NULL;
    tsr_status st =
        tsr_embedding(r->dev, &r->d, r->ids, r->type_ids, r->word, r->position, r->token_type, r->y, NULL, &ev);
    if (st == TSR_SUCCESS && clWaitForEvents(1, &ev) != CL_SUCCESS)
        st = tsr_fail(TSR_ERR_OPENCL, "bench embedding: waiting for the gather failed");
    if (ev) clReleaseEvent(ev);
    return st;
}

/* The caches emptied on the device: its copy kernel (tsr_convert, fp32 to fp32) from one half of
 * bench_evict_bytes() to the other, ordinary loads and stores. */
typedef struct emb_evict_ctx {
    tsr_device *dev;
    cl_mem src, dst;
    size_t n;
} emb_evict_ctx;

static tsr_status emb_evict(void *ctx) {
    emb_evict_ctx *e = ctx;
    cl_event ev = NULL;
    tsr_status st = tsr_convert(e->dev, TSR_F32, e->src, 0, TSR_F32, e->dst, 0, e->n, NULL, &ev);
    if (st == TSR_SUCCESS && clWaitForEvents(1, &ev) != CL_SUCCESS)
        st = tsr_fail(TSR_ERR_OPENCL, "bench embedding: waiting for the cache-emptying copy failed");
    if (ev) clReleaseEvent(ev);
    return st;
}

static tsr_status emb_table(tsr_device *dev, tsr_dtype type, float *host, size_t n, cl_mem *out) {
    cl_int err;
    *out = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY, n * tsr_dtype_size(type), NULL, &err);
    if (err != CL_SUCCESS) return tsr_fail(TSR_ERR_OPENCL, "bench embedding: clCreateBuffer failed (%d)", (int)err);
    return tsr_upload_typed(dev, *out, type, host, n);
}

/* The run's tables of `type` and its y of `y_type`, from the fp32 host tables. */
static tsr_status emb_setup(emb_run *r, tsr_dtype type, tsr_dtype y_type, float *const host[3], const size_t rows[3]) {
    cl_mem *tables[3] = {&r->word, &r->position, &r->token_type};
    tsr_status st = TSR_SUCCESS;
    r->d.table_type = type, r->d.y_type = y_type;
    for (int i = 0; i < 3 && st == TSR_SUCCESS; ++i)
        st = emb_table(r->dev, type, host[i], rows[i] * r->d.hidden, tables[i]);
    cl_int err = CL_SUCCESS;
    if (st == TSR_SUCCESS)
        r->y = clCreateBuffer(tsr_device_context(r->dev), CL_MEM_READ_WRITE,
                              r->d.tokens * r->d.hidden * tsr_dtype_size(y_type), NULL, &err);
    if (st == TSR_SUCCESS && err != CL_SUCCESS)
        st = tsr_fail(TSR_ERR_OPENCL, "bench embedding: clCreateBuffer failed (%d)", (int)err);
    return st;
}

static void emb_release(emb_run *r) {
    cl_mem all[] = {r->word, r->position, r->token_type, r->y};
    for (size_t i = 0; i < 4; ++i)
        if (all[i]) clReleaseMemObject(all[i]);
}

/* y against the double sum of the stored (rounded) tables, as a relative error. */
static double emb_error(const emb_run *r, float *const host[3], tsr_dtype type, float *got) {
    const size_t T = r->d.tokens, H = r->d.hidden;
    if (tsr_download_typed(r->dev, r->y, r->d.y_type, got, T * H) != TSR_SUCCESS) return INFINITY;
    double *ref = malloc(T * H * sizeof *ref);
    if (!ref) return INFINITY;
    for (size_t t = 0; t < T; ++t)
        for (size_t j = 0; j < H; ++j) {
            float v[3] = {host[0][(size_t)r->ids[t] * H + j], host[1][(t % r->d.seq_len) * H + j],
                          host[2][(size_t)r->type_ids[t] * H + j]};
            tsr_dtype_round_array(type, v, 3);
            ref[t * H + j] = (double)v[0] + (double)v[1] + (double)v[2];
        }
    const double e = tsr_rel_error(got, ref, T * H);
    free(ref);
    return e;
}

static void emb_row(bench_row *row, const emb_run *r, const char *impl, double err) {
    strcpy(row->op, "embedding");
    snprintf(row->shape, sizeof row->shape, "%zux%zu", r->d.tokens, r->d.hidden);
    tsr_strlcpy(row->impl, impl, sizeof row->impl);
    tsr_dtype_spec_format(r->d.table_type, r->d.y_type, row->dtype, sizeof row->dtype);
    const double bytes = (double)r->d.tokens * (double)r->d.hidden *
                         (double)(3 * tsr_dtype_size(r->d.table_type) + tsr_dtype_size(r->d.y_type));
    row->gbps = bytes / (row->time_ms * 1e6);
    row->rel_err = err;
}

static void emb_print(const bench_options *opt, const bench_row *row) {
    if (opt->quiet) return;
    printf("%-14s %-14s %-9s %10.3f %8.1f %9.1e\n", row->shape, row->impl, row->dtype[0] ? row->dtype : "f32",
           row->time_ms, row->gbps, row->rel_err);
    fflush(stdout);
}

static tsr_status emb_shape(tsr_device *dev, const bench_options *opt, size_t tokens, size_t hidden,
                            bench_report *report) {
    const size_t rows[3] = {EMB_VOCAB, EMB_POSITIONS, EMB_TYPES};
    float *host[3] = {NULL, NULL, NULL}, *got = malloc(tokens * hidden * sizeof *got);
    int32_t *ids = malloc(tokens * sizeof *ids), *types = malloc(tokens * sizeof *types);
    tsr_status st = TSR_SUCCESS;
    emb_run a, b;
    emb_evict_ctx evict = {0};
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    for (int i = 0; i < 3; ++i)
        host[i] = malloc(rows[i] * hidden * sizeof *host[i]);
    if (!got || !ids || !types || !host[0] || !host[1] || !host[2]) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "bench embedding: out of host memory for %zux%zu", tokens, hidden);
        goto done;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (tokens * hidden);
    for (int i = 0; i < 3; ++i)
        tsr_random_fill(host[i], rows[i] * hidden, &seed, -0.1f, 0.1f);
    float *draw = got; /* scratch: tokens <= tokens * hidden */
    tsr_random_fill(draw, tokens, &seed, 0.0f, (float)EMB_VOCAB);
    for (size_t t = 0; t < tokens; ++t) {
        ids[t] = (int32_t)draw[t] % EMB_VOCAB;
        types[t] = (int32_t)(t * 7 / 3) % EMB_TYPES;
    }
    const tsr_embedding_desc d = {.tokens = tokens,
                                  .seq_len = tokens < EMB_SEQ ? tokens : EMB_SEQ,
                                  .hidden = hidden,
                                  .vocab = EMB_VOCAB,
                                  .max_positions = EMB_POSITIONS,
                                  .type_vocab = EMB_TYPES};
    a = (emb_run){.dev = dev, .d = d, .ids = ids, .type_ids = types};
    b = a;
    const bool typed = opt->in_type != TSR_F32 || opt->out_type != TSR_F32;
    TSR_CHECK(st, emb_setup(&b, TSR_F32, TSR_F32, host, rows), done);
    bench_row row = {0};
    TSR_CHECK(st, bench_time(emb_once, &b, opt->budget_s, 5, 400, &row), done);
    emb_row(&row, &b, "gather", emb_error(&b, host, TSR_F32, got));
    TSR_CHECK(st, bench_add(report, &row), done);
    emb_print(opt, &row);
    if (typed) {
        /* The 16-bit gather in alternation with the fp32 one: both see the same machine. Twice:
         * "gather-paired" with the caches emptied before every call (bench_time_paired_cold), the
         * ratio of record: a model's gather reads rows that other work has evicted, and in plain
         * alternation the fp32 call (twice the bytes) evicts the 16-bit call's rows and leaves its
         * dirty y to write back more than the reverse, which favours fp32; then
         * "gather-paired-hot", plain alternation (each call after the other type's), the earlier
         * records' method. */
        TSR_CHECK(st, emb_setup(&a, opt->in_type, opt->out_type, host, rows), done);
        evict.dev = dev;
        evict.n = bench_evict_bytes() / 8;
        cl_int err = CL_SUCCESS;
        evict.src = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, evict.n * 4, NULL, &err);
        if (err == CL_SUCCESS)
            evict.dst = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, evict.n * 4, NULL, &err);
        if (err != CL_SUCCESS) {
            st = tsr_fail(TSR_ERR_OPENCL, "bench embedding: clCreateBuffer failed (%d)", (int)err);
            goto done;
        }
        static const struct {
            const char *impl, *how;
            bool cold;
        } ways[2] = {{"gather-paired", "caches emptied before each call", true},
                     {"gather-paired-hot", "each call after the other type's", false}};
        for (int w = 0; w < 2; ++w) {
            bench_row two[2];
            memset(two, 0, sizeof two);
            double ratio[3] = {0};
            TSR_CHECK(st,
                      ways[w].cold ? bench_time_paired_cold(emb_once, &a, emb_once, &b, emb_evict, &evict,
                                                            opt->budget_s, 5, 400, &two[0], &two[1], ratio)
                                   : bench_time_paired(emb_once, &a, emb_once, &b, opt->budget_s, 5, 400, &two[0],
                                                       &two[1], ratio),
                      done);
            emb_row(&two[0], &a, ways[w].impl, emb_error(&a, host, opt->in_type, got));
            emb_row(&two[1], &b, ways[w].impl, emb_error(&b, host, TSR_F32, got));
            for (int k = 0; k < 2; ++k) {
                TSR_CHECK(st, bench_add(report, &two[k]), done);
                emb_print(opt, &two[k]);
            }
            if (!opt->quiet)
                printf("%zux%zu timed in alternation (%d pairs, %s): gather %s = %.2f x the tokens/s of fp32 (pairs: "
                       "median; %.2f to %.2f)\n",
                       tokens, hidden, two[0].runs, ways[w].how, two[0].dtype, 1.0 / ratio[0], 1.0 / ratio[2],
                       1.0 / ratio[1]);
        }
    }
done:
    if (evict.src) clReleaseMemObject(evict.src);
    if (evict.dst) clReleaseMemObject(evict.dst);
    emb_release(&a);
    emb_release(&b);
    for (int i = 0; i < 3; ++i)
        free(host[i]);
    free(got);
    free(ids);
    free(types);
    return st;
}

tsr_status bench_embedding(tsr_device *dev, const bench_options *opt, bench_report *report) {
    if (!opt->quiet) {
        printf("embedding gather, BERT-base tables (vocab %d, %d positions, %d types), seq_len %d\n", EMB_VOCAB,
               EMB_POSITIONS, EMB_TYPES, EMB_SEQ);
        printf("%-14s %-14s %-9s %10s %8s %9s\n", "shape", "impl", "dtype", "ms", "GB/s", "rel_err");
    }
    const char *s = opt->sizes;
    while (*s) {
        char *end;
        const unsigned long long tokens = strtoull(s, &end, 10);
        unsigned long long hidden = 0;
        if (end != s && *end == 'x') {
            const char *h = end + 1;
            hidden = strtoull(h, &end, 10);
            if (end == h) hidden = 0;
        }
        if (tokens == 0 || hidden == 0 || (*end && *end != ','))
            return tsr_fail(TSR_ERR_INVALID_ARG, "--sizes: embedding takes TOKENSxHIDDEN shapes, comma separated (got '%s')",
                            opt->sizes);
        tsr_status st = emb_shape(dev, opt, (size_t)tokens, (size_t)hidden, report);
        if (st != TSR_SUCCESS) return st;
        s = *end ? end + 1 : end;
    }
    return TSR_SUCCESS;
}
