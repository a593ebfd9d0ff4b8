/* A seeded randomized differential test of the public API: tsr_sgemm,
 * tsr_sgemm_strided_batched, tsr_matmul, tsr_gelu (fused, unfused and typed), tsr_conv2d,
 * tsr_attention (fused and unfused), tsr_layernorm, tsr_embedding and the device-group calls
 * (tsr_matmul_multi, one product and batched, tsr_attention_multi) on random arguments,
 * against a double-precision reference and, where CLBlast has the same call, against CLBlast
 * (results, and whether invalid argument sets are refused).
 *
 * Every iteration draws: shapes (1, primes, tile edges 15/16/17, 31/32/33, 63/64/65), every
 * layout and transposition, leading dimensions and strides above the minimum, offsets,
 * plain buffers or sub-buffers (origins aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN) of exactly
 * the needed size or larger, batches (stride 0 for A or B), bias per column (shared or per
 * batch entry), every activation, beta = 0 over NaN, NaN/Inf inputs, NaN in every element an
 * op must not read (padding, masked keys), the NULL / device / in-order / out-of-order queue,
 * with or without an event. Storage types: tsr_matmul's A, B and C (any of the 27 combinations of
 * f32, f16 and bf16), one conv2d layer in eight (x, w, y), one attention call in eight (q, k, v, o;
 * the unfused path in sweeps only), one fused GELU in six (tsr_gelu's x_type and y_type), each checked against the
 * reference from the inputs as stored with the header's bound for a 16-bit output (tsr_dtype_error_bound in the op's
 * norm; GELU's per-element bound); the types come from a second stream of the iteration, so every other argument is
 * what the fp32 draws make it. LayerNorm adds rows of any length (BERT's 384/768/1024 often), row strides, the residual
 * or none, in place on x or on the residual, eps from 1e-12 to 1 and fp32, fp16 or bf16 storage for x, the residual and
 * y, checked per element with the header's error bound; the embedding gather adds optional position and token-type
 * tables, position_start, partial sequences, y's stride and type, and, one call in six, a bad id,
 * type id or position that must be refused naming it, with y untouched. 16-bit tensors are
 * compared by their stored bits. Outputs are poisoned first and every byte of every buffer outside
 * what the op may write is compared before and after.
 *
 * Device groups: 1 to 3 members drawn from the suite's device and two more handles opened on it
 * (one handle may repeat), weights measured, equal, unequal or with zeros; host arrays with guard
 * elements on both sides; the split's tiles must cover every unit once and leave a device of
 * weight 0 idle. Invalid sets (m, n or batch_count 0, leading dimensions and c_stride too small,
 * NULL arrays, C or O inside an input, overlapping output rows, bad enums, kv_lengths, lse or 16-bit
 * types, head_dim, scale, bad weights and group creations) must be refused with the header's status
 * and a message, every array untouched.
 *
 * Seeds: $TSR_TEST_SEED (default: a fixed seed, so CI is reproducible); each iteration has its
 * own stream derived from the seed, the op and the iteration, so a failure prints its full
 * arguments and a replay line: TSR_TEST_SEED=S TSR_TEST_FILTER=op TSR_RANDOM_API_ITER=i.
 * $TSR_RANDOM_API_ITERS: iterations per op (default 40; the tests with fewer by default, tsr_matmul's
 * types (3) and the groups (12, 24), scale with it; the ASan and rusticl runs use fewer). Above 40 it
 * is a sweep, which also gives tsr_attention_unfused its storage types. TSR_TEST_MODE=oclgrind: a
 * handful of tiny cases (no CLBlast). */
#include "harness.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TSR_HAVE_CLBLAST
#include <clblast_c.h>
#endif

#define dev th_dev /* the group's device (harness) */
#define DEFAULT_SEED 20240611ull

static bool small_mode(void) { return th_small_mode(); }

/* ------------------------------------------------------------ seeds, iterations, failures */

static uint64_t base_seed;
static int clblast_compared; /* iterations also run through CLBlast */
static const char *cur_test = "";
static int cur_iter;
static char cur_desc[2048]; /* the iteration's full arguments */

typedef struct rng { uint64_t s; } rng;

static uint32_t rr(rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return (uint32_t)((r->s * 2685821657736338717ull) >> 32);
}
static size_t rpick(rng *r, size_t n) { return n ? rr(r) % n : 0; }
static bool rchance(rng *r, unsigned one_in) { return rr(r) % one_in == 0; }
static float runi(rng *r, float lo, float hi) { return lo + (hi - lo) * (float)(rr(r) >> 8) / 16777216.0f; }

static rng iter_rng(const char *test, int iter) {
    uint64_t h = base_seed * 0x9E3779B97F4A7C15ull;
    for (const char *c = test; *c; ++c) h = (h ^ (uint8_t)*c) * 0x100000001B3ull;
    h ^= (uint64_t)(iter + 1) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    rng r = {h ? h : 1};
    for (int i = 0; i < 4; ++i) rr(&r);
    return r;
}

/* The iteration's second stream, for the storage types of ops that also run in fp32: drawing them
 * there leaves every other argument of the iteration as the fp32 draws make it (so adding the
 * types changed no fp32 case, and compiled no new fp32 program). */
static rng types_rng(void) {
    char name[96];
    snprintf(name, sizeof name, "%s/types", cur_test);
    return iter_rng(name, cur_iter);
}

/* Iterations of a test whose default is `fallback` (40 for most): $TSR_RANDOM_API_ITERS scaled by
 * fallback / 40 (at least 1), so the tests with fewer iterations keep their share of a smaller or
 * larger run; else the default, or in the small modes `fallback_small`. */
static int iterations(int fallback_small, int fallback) {
    const char *e = getenv("TSR_RANDOM_API_ITERS");
    if (e && *e) {
        long n = atol(e) * fallback / 40;
        return atol(e) <= 0 ? 0 : n < 1 ? 1 : (int)n;
    }
    return small_mode() ? fallback_small : fallback;
}

/* A sweep: $TSR_RANDOM_API_ITERS above the default 40. */
static bool sweep(void) { return iterations(0, 40) > 40; }

/* Run body(iteration) for each iteration (or only $TSR_RANDOM_API_ITER): `count` (40 for
 * FOR_ITERATIONS; fewer for the tests whose programs are many and compile slowly), as iterations()
 * scales it. */
#define FOR_ITERATIONS(test_name, small_count, r) FOR_ITERATIONS_N(test_name, small_count, 40, r)
#define FOR_ITERATIONS_N(test_name, small_count, count, r)                                                    \
    cur_test = test_name;                                                                                     \
    const char *only_ = getenv("TSR_RANDOM_API_ITER");                                                        \
    int count_ = iterations(small_count, count);                                                              \
    fprintf(stderr, "# %s: %d iterations, seed %" PRIu64 "\n", test_name, only_ ? 1 : count_, base_seed);     \
    for (cur_iter = only_ ? atoi(only_) : 0; cur_iter < (only_ ? atoi(only_) + 1 : count_); ++cur_iter)       \
        for (rng r = iter_rng(test_name, cur_iter), *once_ = &r; once_; once_ = NULL)

#define FAIL(...)                                                                                             \
    do {                                                                                                      \
        char msg_[1024];                                                                                      \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                                                             \
        fail_msg("%s\n# iteration %d: %s\n# replay: TSR_TEST_SEED=%" PRIu64 " TSR_TEST_FILTER=%s TSR_RANDOM_API_ITER=%d", \
                 msg_, cur_iter, cur_desc, base_seed, cur_test, cur_iter);                                    \
    } while (0)

/* $TSR_TEST_VERBOSE: print each iteration's arguments just before its call. */
static void trace(void) {
    if (getenv("TSR_TEST_VERBOSE")) fprintf(stderr, "# %s iteration %d: %s\n", cur_test, cur_iter, cur_desc);
}

#define DESC(...) snprintf(cur_desc + strlen(cur_desc), sizeof cur_desc - strlen(cur_desc), __VA_ARGS__)

/* Sizes: 1, small primes, tile edges, and a few random ones. */
static size_t rsize(rng *r, size_t max) {
    static const size_t picks[] = {1, 2, 3, 5, 7, 13, 15, 16, 17, 31, 32, 33, 63, 64, 65};
    size_t v;
    do v = rchance(r, 4) ? 1 + rpick(r, max) : picks[rpick(r, sizeof picks / sizeof picks[0])];
    while (v > max);
    return v;
}

/* --------------------------------------------------------------------------- queues */

static cl_command_queue q_in_order, q_out_of_order;
static size_t align_floats = 1; /* CL_DEVICE_MEM_BASE_ADDR_ALIGN in floats */

/* Under Oclgrind, parents of released sub-buffers stay alive until the group ends: once such a
 * parent is freed, Oclgrind (21.10) can hand its memory to a later buffer with stale
 * uninitialized-value shadow, and reports a freshly uploaded buffer as uninitialized (seen as
 * "Uninitialized value written to local memory" in a GEMM reading weights uploaded a moment
 * before; keeping the parents alive, or never using sub-buffers, makes it go away). */
static cl_mem oclgrind_parents[512];
static size_t n_oclgrind_parents;

static int setup(void **state) {
    if (th_group_setup(state) != 0) return -1;
    cl_int err;
    cl_uint bits = 0;
    clGetDeviceInfo(tsr_device_id(dev), CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL);
    align_floats = bits >= 32 ? bits / 32 : 1;
    q_in_order = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev), 0, &err);
    if (err != CL_SUCCESS) q_in_order = NULL;
    q_out_of_order = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev),
                                          CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    if (err != CL_SUCCESS) q_out_of_order = NULL; /* the device has none: that choice falls back to in-order */
    return 0;
}

static void close_pool(void);

static int teardown(void **state) {
    close_pool();
    for (size_t i = 0; i < n_oclgrind_parents; ++i) clReleaseMemObject(oclgrind_parents[i]);
    n_oclgrind_parents = 0;
    if (q_in_order) clReleaseCommandQueue(q_in_order);
    if (q_out_of_order) clReleaseCommandQueue(q_out_of_order);
    q_in_order = q_out_of_order = NULL;
    return th_group_teardown(state);
}

typedef struct qchoice {
    cl_command_queue q; /* passed to the op (NULL: the device's queue) */
    bool event;
} qchoice;

static qchoice pick_queue(rng *r, bool allow_out_of_order) {
    qchoice c = {NULL, rchance(r, 2)};
    size_t kind = rpick(r, allow_out_of_order ? 4 : 3);
    const char *names[] = {"NULL", "device", "in-order", "out-of-order"};
    if (kind == 1) c.q = tsr_device_queue(dev);
    if (kind == 2) c.q = q_in_order;
    if (kind == 3) c.q = q_out_of_order ? q_out_of_order : q_in_order;
    DESC(" queue=%s event=%d", names[kind], c.event);
    return c;
}

/* After a successful call: wait for its event (which must belong to the queue used) or finish the queue. */
static void finish(const qchoice *c, cl_event ev) {
    cl_command_queue used = c->q ? c->q : tsr_device_queue(dev);
    if (c->event) {
        if (!ev) FAIL("the call returned no event");
        cl_command_queue evq = NULL;
        clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof evq, &evq, NULL);
        if (evq != used) FAIL("the event belongs to another queue");
        if (clWaitForEvents(1, &ev) != CL_SUCCESS) FAIL("clWaitForEvents failed");
        clReleaseEvent(ev);
    }
    if (clFinish(used) != CL_SUCCESS) FAIL("clFinish failed");
}

/* --------------------------------------------------------------------------- buffers */

/* A tensor's buffer: a plain buffer, or a sub-buffer of a larger parent. Indices into `init`
 * and `host` are parent indices; element i of the op's view is parent index origin + i. */
typedef struct tbuf {
    cl_mem parent, mem;
    tsr_dtype dtype;               /* storage; init and host hold the values widened to fp32 */
    size_t origin, size, total;    /* elements of dtype */
    float *init, *host;            /* the parent before and after */
    uint16_t *init_raw, *host_raw; /* 16-bit storage: the stored bits before and after */
    char *writable;                /* per parent element: the op may write it */
} tbuf;

/* A buffer of `dtype` elements holding at least `need`, its background `bg_nan` ? NaN : random. */
static void tb_make_typed(rng *r, tbuf *t, size_t need, bool bg_nan, const char *name, tsr_dtype dtype) {
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    const size_t esize = tsr_dtype_size(dtype), align = align_floats * sizeof(float) / esize;
    bool sub = rchance(r, 3);
    t->size = need + (rchance(r, 2) ? 0 : 1 + rpick(r, 7));
    if (!t->size) t->size = 1;
    t->origin = sub ? align * (1 + rpick(r, 2)) : 0;
    t->total = t->origin + t->size + (sub ? rpick(r, 9) : 0);
    t->init = malloc(t->total * sizeof(float));
    t->host = malloc(t->total * sizeof(float));
    if (dtype != TSR_F32) {
        t->init_raw = malloc(t->total * sizeof(uint16_t));
        t->host_raw = malloc(t->total * sizeof(uint16_t));
    }
    t->writable = calloc(t->total, 1);
    for (size_t i = 0; i < t->total; ++i)
        t->init[i] = bg_nan ? NAN : runi(r, -1, 1);
    t->parent = dtype == TSR_F32 ? th_buffer(dev, t->total) : th_buffer_typed(dev, dtype, t->total);
    t->mem = t->parent;
    if (sub) {
        cl_buffer_region reg = {t->origin * esize, t->size * esize};
        cl_int err;
        t->mem = clCreateSubBuffer(t->parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &reg, &err);
        if (err != CL_SUCCESS) FAIL("clCreateSubBuffer: %s", tsr_cl_error_name(err));
    }
    DESC(" %s=%s(%zu of %zu at %zu%s%s)", name, sub ? "sub" : "buf", t->size, t->total, t->origin,
         dtype == TSR_F32 ? "" : " ", dtype == TSR_F32 ? "" : tsr_dtype_str(dtype));
}

/* A buffer of floats holding at least `need`. */
static void tb_make(rng *r, tbuf *t, size_t need, bool bg_nan, const char *name) {
    tb_make_typed(r, t, need, bg_nan, name, TSR_F32);
}

static float *tb_at(tbuf *t, size_t i) { return &t->init[t->origin + i]; }

/* Uploads init; a 16-bit buffer's init is first rounded to its type, so a reference computed from
 * init afterwards sees exactly what the device reads. */
static void tb_upload(tbuf *t) {
    if (t->dtype == TSR_F32) {
        TH_ASSERT_OK(tsr_upload(dev, t->parent, t->init, t->total));
        return;
    }
    tsr_dtype_round_array(t->dtype, t->init, t->total);
    TH_ASSERT_OK(tsr_convert_host(TSR_F32, t->init, t->dtype, t->init_raw, t->total));
    cl_int err = clEnqueueWriteBuffer(tsr_device_queue(dev), t->parent, CL_TRUE, 0, t->total * sizeof(uint16_t),
                                      t->init_raw, 0, NULL, NULL);
    if (err != CL_SUCCESS) FAIL("clEnqueueWriteBuffer: %s", tsr_cl_error_name(err));
}

static void tb_download(tbuf *t) {
    if (t->dtype == TSR_F32) {
        TH_ASSERT_OK(tsr_download(dev, t->parent, t->host, t->total));
        return;
    }
    cl_int err = clEnqueueReadBuffer(tsr_device_queue(dev), t->parent, CL_TRUE, 0, t->total * sizeof(uint16_t),
                                     t->host_raw, 0, NULL, NULL);
    if (err != CL_SUCCESS) FAIL("clEnqueueReadBuffer: %s", tsr_cl_error_name(err));
    TH_ASSERT_OK(tsr_convert_host(t->dtype, t->host_raw, TSR_F32, t->host, t->total));
}

/* Every element the op may not write is bit for bit what it was (the stored bits for 16-bit types). */
static void tb_check_untouched(tbuf *t, const char *name) {
    for (size_t i = 0; i < t->total; ++i) {
        if (t->writable[i]) continue;
        bool same = t->dtype == TSR_F32 ? memcmp(&t->host[i], &t->init[i], sizeof(float)) == 0
                                        : t->host_raw[i] == t->init_raw[i];
        if (!same)
            FAIL("%s: element %zu of the buffer (view element %lld) changed from %g to %g: written outside the output",
                 name, i, (long long)i - (long long)t->origin, (double)t->init[i], (double)t->host[i]);
    }
}

static void tb_free(tbuf *t) {
    if (t->mem && t->mem != t->parent) {
        clReleaseMemObject(t->mem);
        if (small_mode() && n_oclgrind_parents < sizeof oclgrind_parents / sizeof *oclgrind_parents) {
            oclgrind_parents[n_oclgrind_parents++] = t->parent;
            t->parent = NULL;
        }
    }
    if (t->parent) clReleaseMemObject(t->parent);
    free(t->init), free(t->host), free(t->init_raw), free(t->host_raw), free(t->writable);
    memset(t, 0, sizeof *t);
}

static const tsr_dtype storage_types[] = {TSR_F32, TSR_F16, TSR_BF16};

static tsr_dtype draw_type(rng *r) { return storage_types[rpick(r, 3)]; }

/* The bound of a 16-bit output in the ops' relative norm, as the op tests and fixtures hold it
 * (tsr_dtype_error_bound: the output's rounding plus fp32 accumulation over `reduction` terms), and
 * never below the fp32 tolerance 1e-5 of this file. */
static double typed_tolerance(tsr_dtype out, double reduction) { return fmax(1e-5, tsr_dtype_error_bound(out, reduction)); }

/* A NaN or an infinity for an input element. */
static float special(rng *r) {
    switch (rpick(r, 3)) {
    case 0: return NAN;
    case 1: return INFINITY;
    default: return -INFINITY;
    }
}

/* Compare got with ref: NaN where ref is NaN, equal infinities, the finite rest by relative norm. */
static void compare_value(tsr_error_sum *e, float got, double ref, const char *what, size_t index) {
    if (isnan(ref)) {
        if (!isnan(got)) FAIL("%s[%zu] = %g, reference NaN", what, index, (double)got);
        return;
    }
    if (isinf(ref)) {
        if ((double)got != ref) FAIL("%s[%zu] = %g, reference %g", what, index, (double)got, ref);
        return;
    }
    if (!isfinite(got)) FAIL("%s[%zu] = %g, reference %.9g", what, index, (double)got, ref);
    tsr_error_add(e, got, ref);
}

/* ------------------------------------------------------------------------------ GEMM */

static void stored(bool row_major, bool trans, size_t rows, size_t cols, size_t *lines, size_t *len) {
    bool by_rows = row_major != trans;
    *lines = by_rows ? rows : cols;
    *len = by_rows ? cols : rows;
}

typedef struct gemm_args {
    int api; /* 0 tsr_sgemm, 1 tsr_matmul (epilogue), 2 tsr_sgemm_strided_batched, 3 tsr_matmul (batch, epilogue),
              * 4 tsr_matmul (typed, batch, epilogue), 5 tsr_matmul_multi, 6 tsr_matmul_multi (batch) */
    tsr_layout layout;
    tsr_transpose ta, tb;
    size_t m, n, k, lda, ldb, ldc, a_off, b_off, c_off, a_stride, b_stride, c_stride, batch;
    size_t a_span, b_span, c_span;
    float alpha, beta;
    bool epi_null, bias;
    tsr_activation act;
    size_t bias_off, bias_stride;
    tsr_dtype at, bt, ct; /* storage of A, B and C (api 4; fp32 otherwise) */
} gemm_args;

/* The descriptor of a tsr_matmul api's call. Every other shape (by the parity of m + n + k, so the
 * draws stay what they were) spells its defaults as zeros: layout row-major, no transposes, one
 * product, and leading dimensions at their minimum (packed). */
static tsr_matmul_desc gemm_desc(const gemm_args *g) {
    const bool batched = g->api != 1 && g->api != 5;
    tsr_matmul_desc d = {.layout = g->layout,
                         .trans_a = g->ta,
                         .trans_b = g->tb,
                         .m = g->m,
                         .n = g->n,
                         .k = g->k,
                         .batch = batched ? g->batch : 1,
                         .alpha = g->alpha,
                         .beta = g->beta,
                         .a = {g->at, g->a_off, g->lda, batched ? g->a_stride : 0},
                         .b = {g->bt, g->b_off, g->ldb, batched ? g->b_stride : 0},
                         .c = {g->ct, g->c_off, g->ldc, batched ? g->c_stride : 0}};
    if ((g->m + g->n + g->k) % 2 == 0 && g->m && g->n) {
        bool row = g->layout == TSR_ROW_MAJOR;
        size_t lines, alen, blen, clen;
        stored(row, g->ta != TSR_NO_TRANS, g->m, g->k, &lines, &alen);
        stored(row, g->tb != TSR_NO_TRANS, g->k, g->n, &lines, &blen);
        stored(row, false, g->m, g->n, &lines, &clen);
        if (row) d.layout = (tsr_layout)0;
        if (g->ta == TSR_NO_TRANS) d.trans_a = (tsr_transpose)0;
        if (g->tb == TSR_NO_TRANS) d.trans_b = (tsr_transpose)0;
        if (d.batch == 1) d.batch = 0;
        if (g->lda == (alen ? alen : 1)) d.a.ld = 0;
        if (g->ldb == (blen ? blen : 1)) d.b.ld = 0;
        if (g->ldc == clen) d.c.ld = 0;
    }
    return d;
}

static tsr_status call_gemm(const gemm_args *g, cl_mem a, cl_mem b, cl_mem c, cl_mem bias, cl_command_queue q,
                            cl_event *ev) {
    switch (g->api) {
    case 0:
        return tsr_sgemm(dev, g->layout, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, g->a_off, g->lda, b, g->b_off,
                         g->ldb, g->beta, c, g->c_off, g->ldc, q, ev);
    case 2:
        return tsr_sgemm_strided_batched(dev, g->layout, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, g->a_off, g->lda,
                                         g->a_stride, b, g->b_off, g->ldb, g->b_stride, g->beta, c, g->c_off, g->ldc,
                                         g->c_stride, g->batch, q, ev);
    default: {
        tsr_matmul_desc d = gemm_desc(g);
        if (!g->epi_null)
            d.epilogue = (tsr_epilogue){
                .bias = bias, .bias_offset = g->bias_off, .bias_stride = g->bias_stride, .activation = g->act};
        return tsr_matmul(dev, &d, a, b, c, q, ev);
    }
    }
}

#ifdef TSR_HAVE_CLBLAST
static CLBlastTranspose cb_trans(tsr_transpose t) {
    return t == TSR_NO_TRANS ? CLBlastTransposeNo : t == TSR_TRANS ? CLBlastTransposeYes : CLBlastTransposeConjugate;
}

static CLBlastStatusCode call_clblast(const gemm_args *g, cl_mem a, cl_mem b, cl_mem c) {
    cl_command_queue q = tsr_device_queue(dev);
    CLBlastLayout l = g->layout == TSR_ROW_MAJOR ? CLBlastLayoutRowMajor : CLBlastLayoutColMajor;
    CLBlastStatusCode s;
    if (g->api == 0)
        s = CLBlastSgemm(l, cb_trans(g->ta), cb_trans(g->tb), g->m, g->n, g->k, g->alpha, a, g->a_off, g->lda, b,
                         g->b_off, g->ldb, g->beta, c, g->c_off, g->ldc, &q, NULL);
    else
        s = CLBlastSgemmStridedBatched(l, cb_trans(g->ta), cb_trans(g->tb), g->m, g->n, g->k, g->alpha, a, g->a_off,
                                       g->lda, g->a_stride, b, g->b_off, g->ldb, g->b_stride, g->beta, c, g->c_off,
                                       g->ldc, g->c_stride, g->batch, &q, NULL);
    clFinish(q);
    return s;
}
#endif

/* Draw the arguments of a valid GEMM call (api < 0: any). */
static void gemm_draw(rng *r, gemm_args *g, int api, size_t max) {
    memset(g, 0, sizeof *g);
    static const tsr_transpose tr[] = {TSR_NO_TRANS, TSR_TRANS, TSR_CONJ_TRANS};
    g->api = api >= 0 ? api : (int)rpick(r, 4);
    g->layout = rchance(r, 2) ? TSR_ROW_MAJOR : TSR_COL_MAJOR;
    g->ta = tr[rpick(r, 3)], g->tb = tr[rpick(r, 3)];
    g->m = rsize(r, max), g->n = rsize(r, max), g->k = rchance(r, 25) ? 0 : rsize(r, max);
    bool row = g->layout == TSR_ROW_MAJOR;
    size_t al, alen, bl, blen, cl, clen;
    stored(row, g->ta != TSR_NO_TRANS, g->m, g->k, &al, &alen);
    stored(row, g->tb != TSR_NO_TRANS, g->k, g->n, &bl, &blen);
    stored(row, false, g->m, g->n, &cl, &clen);
    g->lda = (alen ? alen : 1) + (rchance(r, 2) ? 0 : 1 + rpick(r, 6));
    g->ldb = (blen ? blen : 1) + (rchance(r, 2) ? 0 : 1 + rpick(r, 6));
    g->ldc = clen + (rchance(r, 2) ? 0 : 1 + rpick(r, 6));
    g->a_span = al ? (al - 1) * g->lda + alen : 0;
    g->b_span = bl ? (bl - 1) * g->ldb + blen : 0;
    g->c_span = (cl - 1) * g->ldc + clen;
    g->a_off = rchance(r, 2) ? 0 : rpick(r, 40);
    g->b_off = rchance(r, 2) ? 0 : rpick(r, 40);
    g->c_off = rchance(r, 2) ? 0 : rpick(r, 40);
    static const float alphas[] = {1.0f, -1.0f, 0.5f, 1.75f, 0.0f, -0.3f};
    static const float betas[] = {0.0f, 0.0f, 1.0f, -0.5f, 0.25f};
    g->alpha = alphas[rpick(r, 6)], g->beta = betas[rpick(r, 5)];
    g->batch = g->api >= 2 ? 1 + rpick(r, 4) : 1;
    g->a_stride = g->api >= 2 && rchance(r, 4) ? 0 : g->a_span + (rchance(r, 2) ? 0 : rpick(r, 9));
    g->b_stride = g->api >= 2 && rchance(r, 4) ? 0 : g->b_span + (rchance(r, 2) ? 0 : rpick(r, 9));
    g->c_stride = g->c_span + (rchance(r, 2) ? 0 : rpick(r, 9));
    if (g->api == 1 || g->api >= 3) {
        g->epi_null = rchance(r, 5);
        g->bias = !g->epi_null && rchance(r, 3) != 0;
        g->act = g->epi_null ? TSR_ACT_NONE : (tsr_activation)rpick(r, 4);
        g->bias_off = rpick(r, 6);
        g->bias_stride = g->api >= 3 && !rchance(r, 3) ? g->n + rpick(r, 4) : 0;
    }
    if (g->api == 4) g->at = draw_type(r), g->bt = draw_type(r), g->ct = draw_type(r); /* any of the 27 */
}

static void gemm_describe(const gemm_args *g) {
    static const char *apis[] = {
        "tsr_sgemm",          "tsr_matmul",       "tsr_sgemm_strided_batched", "tsr_matmul (batch)",
        "tsr_matmul (typed)", "tsr_matmul_multi", "tsr_matmul_multi (batch)"};
    DESC("%s(%s, ta=%d, tb=%d, m=%zu, n=%zu, k=%zu, alpha=%g, a_off=%zu, lda=%zu, a_stride=%zu, b_off=%zu, ldb=%zu, "
         "b_stride=%zu, beta=%g, c_off=%zu, ldc=%zu, c_stride=%zu, batch=%zu",
         apis[g->api], g->layout == TSR_ROW_MAJOR ? "row" : "col", (int)g->ta, (int)g->tb, g->m, g->n, g->k,
         (double)g->alpha, g->a_off, g->lda, g->a_stride, g->b_off, g->ldb, g->b_stride, (double)g->beta, g->c_off,
         g->ldc, g->c_stride, g->batch);
    if (g->api < 5) /* the multi calls have no epilogue */
        DESC(", epilogue=%s bias=%d bias_off=%zu bias_stride=%zu act=%d", g->epi_null ? "NULL" : "set", g->bias,
             g->bias_off, g->bias_stride, (int)g->act);
    DESC(")");
    if (g->api == 4) DESC(" types a=%s b=%s c=%s", tsr_dtype_str(g->at), tsr_dtype_str(g->bt), tsr_dtype_str(g->ct));
}

/* Mark an m x n window (or the used elements of a stored matrix) in a tbuf. */
static void mark_matrix(char *mask, size_t base, bool row_major, size_t rows, size_t cols, size_t ld) {
    for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < cols; ++j) mask[base + (row_major ? i * ld + j : j * ld + i)] = 1;
}

/* The elements a GEMM reads get finite values (a special one when injecting), C's windows are
 * marked writable and, for beta = 0, poisoned with NaN and Inf, which must not leak. Each pointer is
 * its operand's element 0 (offset applied); bias may be NULL. */
static void gemm_fill(rng *r, const gemm_args *g, float *a, float *b, float *c, char *c_writable, float *bias,
                      bool inject) {
    bool row = g->layout == TSR_ROW_MAJOR;
    size_t al, alen, bl, blen;
    stored(row, g->ta != TSR_NO_TRANS, g->m, g->k, &al, &alen);
    stored(row, g->tb != TSR_NO_TRANS, g->k, g->n, &bl, &blen);
    for (size_t bi = 0; bi < g->batch; ++bi) {
        for (size_t l = 0; l < al; ++l)
            for (size_t e = 0; e < alen; ++e) a[bi * g->a_stride + l * g->lda + e] = runi(r, -1, 1);
        for (size_t l = 0; l < bl; ++l)
            for (size_t e = 0; e < blen; ++e) b[bi * g->b_stride + l * g->ldb + e] = runi(r, -1, 1);
        mark_matrix(c_writable, bi * g->c_stride, row, g->m, g->n, g->ldc);
        for (size_t i = 0; i < g->m; ++i)
            for (size_t j = 0; j < g->n; ++j)
                c[bi * g->c_stride + (row ? i * g->ldc + j : j * g->ldc + i)] =
                    g->beta == 0.0f ? ((i + j) % 2 ? NAN : INFINITY) : runi(r, -1, 1);
        for (size_t j = 0; bias && j < g->n; ++j) bias[bi * g->bias_stride + j] = runi(r, -1, 1);
    }
    if (inject && g->k && g->alpha != 0.0f) {
        bool on_a = rchance(r, 2);
        size_t lines = on_a ? al : bl, len = on_a ? alen : blen, ld = on_a ? g->lda : g->ldb;
        size_t stride = on_a ? g->a_stride : g->b_stride;
        size_t at = rpick(r, g->batch) * stride;
        at += rpick(r, lines) * ld;
        at += rpick(r, len);
        float *x = (on_a ? a : b) + at;
        *x = special(r);
        DESC(" special %s at %zu = %g", on_a ? "a" : "b", (on_a ? g->a_off : g->b_off) + at, (double)*x);
    }
}

/* C's m x n windows against a double reference computed from A, B and C as they were (each pointer at
 * its view's first element, offsets applied; bias NULL: none), the epilogue's activation applied:
 * NaN and infinities exactly, the finite rest within `tol` in relative norm. */
static void gemm_check(const gemm_args *g, const float *a, const float *b, const float *c_init, const float *c_got,
                       const float *bias, double tol) {
    bool row = g->layout == TSR_ROW_MAJOR, ta = g->ta != TSR_NO_TRANS, tb = g->tb != TSR_NO_TRANS;
    double *ref = malloc((g->c_span ? g->c_span : 1) * sizeof *ref);
    tsr_error_sum e = {0, 0};
    for (size_t bi = 0; bi < g->batch; ++bi) {
        th_ref_sgemm(row, ta, tb, g->m, g->n, g->k, g->alpha, a + bi * g->a_stride, g->lda, b + bi * g->b_stride,
                     g->ldb, g->beta, c_init + bi * g->c_stride, ref, g->ldc);
        for (size_t i = 0; i < g->m; ++i)
            for (size_t j = 0; j < g->n; ++j) {
                size_t idx = row ? i * g->ldc + j : j * g->ldc + i;
                double v = ref[idx] + (bias ? bias[bi * g->bias_stride + j] : 0.0);
                compare_value(&e, c_got[bi * g->c_stride + idx], th_ref_activation((int)g->act, v), "c",
                              g->c_off + bi * g->c_stride + idx);
            }
    }
    free(ref);
    if (!(tsr_error_value(&e) <= tol)) FAIL("relative error %.3e (tolerance %.3g)", tsr_error_value(&e), tol);
}

static void gemm_iteration(rng *r, int api, size_t max) {
    gemm_args g;
    gemm_draw(r, &g, api, max);
    cur_desc[0] = 0;
    gemm_describe(&g);
    bool bg_nan = rchance(r, 2), inject = rchance(r, 5);
    DESC(" background=%s inject=%d", bg_nan ? "NaN" : "random", inject);
    tbuf A, B, C, Bias = {0};
    size_t na = g.a_off + (g.batch - 1) * g.a_stride + g.a_span, nb = g.b_off + (g.batch - 1) * g.b_stride + g.b_span;
    size_t nc = g.c_off + (g.batch - 1) * g.c_stride + g.c_span;
    tb_make_typed(r, &A, na, bg_nan, "a", g.at);
    tb_make_typed(r, &B, nb, bg_nan, "b", g.bt);
    tb_make_typed(r, &C, nc, rchance(r, 2), "c", g.ct);
    if (g.bias) tb_make(r, &Bias, g.bias_off + (g.batch - 1) * g.bias_stride + g.n, bg_nan, "bias");
    qchoice qc = pick_queue(r, true);
    gemm_fill(r, &g, tb_at(&A, g.a_off), tb_at(&B, g.b_off), tb_at(&C, g.c_off), &C.writable[C.origin + g.c_off],
              g.bias ? tb_at(&Bias, g.bias_off) : NULL, inject);
    tb_upload(&A), tb_upload(&B), tb_upload(&C);
    if (g.bias) tb_upload(&Bias);
    cl_event ev = NULL;
    trace();
    tsr_status st = call_gemm(&g, A.mem, B.mem, C.mem, g.bias ? Bias.mem : NULL, qc.q, qc.event ? &ev : NULL);
    if (st != TSR_SUCCESS) FAIL("refused a valid call: %s: %s", tsr_status_str(st), tsr_last_error());
    finish(&qc, ev);
    tb_download(&A), tb_download(&B), tb_download(&C);
    tb_check_untouched(&A, "a");
    tb_check_untouched(&B, "b");
    tb_check_untouched(&C, "c");
    if (g.bias) tb_download(&Bias), tb_check_untouched(&Bias, "bias");

    /* inputs as tb_upload rounded them to their types; a 16-bit C within the header's bound for its type */
    gemm_check(&g, tb_at(&A, g.a_off), tb_at(&B, g.b_off), tb_at(&C, g.c_off), &C.host[C.origin + g.c_off],
               g.bias ? tb_at(&Bias, g.bias_off) : NULL, typed_tolerance(g.ct, (double)(g.k ? g.k : 1)));

#ifdef TSR_HAVE_CLBLAST
    /* CLBlast on the same buffers (its C finite: it computes beta * C even for beta = 0). */
    if (!small_mode() && (g.api == 0 || g.api == 2) && g.k && !bg_nan && !inject) {
        float *tessera_c = malloc(C.total * sizeof(float));
        memcpy(tessera_c, C.host, C.total * sizeof(float));
        for (size_t i = 0; i < C.total; ++i)
            if (!isfinite(C.init[i])) C.init[i] = 0.0f;
        tb_upload(&C);
        CLBlastStatusCode cs = call_clblast(&g, A.mem, B.mem, C.mem);
        if (cs != CLBlastSuccess) FAIL("CLBlast refused a call tessera ran: status %d", (int)cs);
        ++clblast_compared;
        tb_download(&C);
        tsr_error_sum d = {0, 0};
        for (size_t i = 0; i < C.total; ++i)
            if (C.writable[i]) compare_value(&d, C.host[i], tessera_c[i], "clblast c", i);
        if (!(tsr_error_value(&d) <= 1e-5)) FAIL("tessera and CLBlast differ by %.3e", tsr_error_value(&d));
        free(tessera_c);
    }
#endif
    tb_free(&A), tb_free(&B), tb_free(&C);
    if (g.bias) tb_free(&Bias);
}

static void random_sgemm(void **state) {
    (void)state;
    clblast_compared = 0;
    FOR_ITERATIONS("random_sgemm", 5, r) gemm_iteration(&r, (int)rpick(&r, 2), small_mode() ? 17 : 70);
    fprintf(stderr, "# %d iterations also compared with CLBlast\n", clblast_compared);
}

static void random_sgemm_strided_batched(void **state) {
    (void)state;
    clblast_compared = 0;
    FOR_ITERATIONS("random_sgemm_strided_batched", 4, r) gemm_iteration(&r, 2 + (int)rpick(&r, 2), small_mode() ? 9 : 40);
    fprintf(stderr, "# %d iterations also compared with CLBlast\n", clblast_compared);
}

/* tsr_matmul: the strided-batched GEMM with the epilogue and A, B and C each stored as f32, f16 or bf16
 * (any of the 27 combinations), drawn like every other argument. Three iterations by default: each
 * combination, transposition and class is a program of its own, compiled on first use (PoCL took
 * 15 to 30 s for an iteration's programs on a loaded 2-core machine); sweeps scale them. */
static void random_gemm_typed(void **state) {
    (void)state;
    FOR_ITERATIONS_N("random_gemm_typed", 2, 3, r) gemm_iteration(&r, 4, small_mode() ? 13 : 48);
}

/* Invalid argument sets: one perturbation of a valid call. tessera refuses it without writing
 * anything, and CLBlast refuses it too (k = 0, which tessera defines as C <- beta C and
 * CLBlast refuses, is the one documented difference). One call in four goes through tsr_matmul with
 * random storage types (sizes then count elements of each operand's type), where a type outside the
 * enum must be refused too, naming the operand. */
static void random_gemm_invalid(void **state) {
    (void)state;
    clblast_compared = 0;
    FOR_ITERATIONS("random_gemm_invalid", 2, r) {
        gemm_args g;
        rng tr = types_rng();
        int api = rchance(&r, 2) ? 0 : 2;
        if (rchance(&tr, 4)) api = 4;
        gemm_draw(&r, &g, api, 20);
        if (g.k == 0) g.k = 1 + rpick(&r, 5);
        /* redo the spans for the new k */
        bool row = g.layout == TSR_ROW_MAJOR, ta = g.ta != TSR_NO_TRANS, tb = g.tb != TSR_NO_TRANS;
        size_t al, alen, bl, blen, cl, clen;
        stored(row, ta, g.m, g.k, &al, &alen);
        stored(row, tb, g.k, g.n, &bl, &blen);
        stored(row, false, g.m, g.n, &cl, &clen);
        g.lda = alen, g.ldb = blen, g.ldc = clen;
        g.a_span = (al - 1) * g.lda + alen, g.b_span = (bl - 1) * g.ldb + blen, g.c_span = (cl - 1) * g.ldc + clen;
        if (g.a_stride) g.a_stride = g.a_span;
        if (g.b_stride) g.b_stride = g.b_span;
        g.c_stride = g.c_span;
        size_t na = g.a_off + (g.batch - 1) * g.a_stride + g.a_span, nb = g.b_off + (g.batch - 1) * g.b_stride + g.b_span;
        size_t nc = g.c_off + (g.batch - 1) * g.c_stride + g.c_span;
        int kind = (int)rpick(&r, api == 4 ? 9 : 8);
        static const char *kinds[] = {"lda too small", "ldb too small", "ldc too small", "a buffer one element short",
                                      "b offset beyond the buffer", "c buffer one element short", "m or n = 0", "k = 0",
                                      "a type outside the enum"};
        bool tessera_accepts = false;
        switch (kind) {
        case 0: if (alen < 2) { kind = 6; break; } g.lda = alen - 1; break;
        case 1: if (blen < 2) { kind = 6; break; } g.ldb = blen - 1; break;
        case 2: if (clen < 2) { kind = 6; break; } g.ldc = clen - 1; break;
        default: break;
        }
        if (kind == 6) { if (rchance(&r, 2)) g.m = 0; else g.n = 0; }
        if (kind == 7) g.k = 0, tessera_accepts = true;
        static const char *type_names[] = {"a.dtype", "b.dtype", "c.dtype"};
        size_t bad_which = 0;
        tsr_dtype bad_value = TSR_F32;
        if (kind == 8) {
            bad_which = rpick(&r, 3);
            bad_value = rchance(&r, 2) ? (tsr_dtype)-1 : (tsr_dtype)(3 + rpick(&r, 4));
        }
        /* alpha = 0 reads neither A nor B, but their buffers must still hold the shapes given (as in CLBlast) */
        cur_desc[0] = 0;
        DESC("[%s] ", kinds[kind]);
        gemm_describe(&g);
        if (kind == 8) DESC(" then %s=%d", type_names[bad_which], (int)bad_value);
        tbuf A, B, C;
        tb_make_typed(&r, &A, na, false, "a", g.at);
        tb_make_typed(&r, &B, nb, false, "b", g.bt);
        tb_make_typed(&r, &C, nc, false, "c", g.ct);
        /* exact sizes for the short-buffer cases */
        if (kind == 3) g.a_off += A.size - na + 1;
        if (kind == 4) g.b_off = B.size + rpick(&r, 5);
        if (kind == 5) g.c_off += C.size - nc + 1;
        DESC(" offsets now a=%zu b=%zu c=%zu", g.a_off, g.b_off, g.c_off);
        tb_upload(&A), tb_upload(&B), tb_upload(&C);
        if (tessera_accepts) mark_matrix(C.writable, C.origin + g.c_off, row, g.m, g.n, g.ldc);
        for (size_t bi = 1; tessera_accepts && bi < g.batch; ++bi)
            mark_matrix(C.writable, C.origin + g.c_off + bi * g.c_stride, row, g.m, g.n, g.ldc);
        trace();
        gemm_args called = g; /* the buffers above are of the valid types */
        if (kind == 8) *(bad_which == 0 ? &called.at : bad_which == 1 ? &called.bt : &called.ct) = bad_value;
        tsr_status st = call_gemm(&called, A.mem, B.mem, C.mem, NULL, NULL, NULL);
        if (tessera_accepts && st != TSR_SUCCESS) FAIL("tessera refused k = 0: %s", tsr_last_error());
        if (!tessera_accepts && st == TSR_SUCCESS) FAIL("tessera accepted an invalid call");
        if (!tessera_accepts && !*tsr_last_error()) FAIL("tessera refused without a message");
        if (kind == 8 && (st != TSR_ERR_INVALID_ARG || !strstr(tsr_last_error(), type_names[bad_which])))
            FAIL("%s: %s, not TSR_ERR_INVALID_ARG naming %s: %s", kinds[kind], tsr_status_str(st),
                 type_names[bad_which], tsr_last_error());
        clFinish(tsr_device_queue(dev));
        tb_download(&C);
        tb_check_untouched(&C, "c");
#ifdef TSR_HAVE_CLBLAST
        if (!small_mode() && api != 4) {
            CLBlastStatusCode cs = call_clblast(&g, A.mem, B.mem, C.mem);
            if (cs == CLBlastSuccess) FAIL("CLBlast accepted what tessera %s", tessera_accepts ? "accepts (k = 0)" : "refuses");
            ++clblast_compared;
        }
#endif
        tb_free(&A), tb_free(&B), tb_free(&C);
    }
    fprintf(stderr, "# %d refusals also compared with CLBlast\n", clblast_compared);
}

/* ------------------------------------------------------------------------------ GELU */

/* tsr_gelu, tsr_gelu_unfused and, one fused call in six, tsr_gelu with x and y stored in any pair of
 * types (in place: one type), held to the header's bound 1e-6 max(1, |x|) + u |GELU(x)| (+ (1 + u)
 * 2^-13 max(1, |x|) for a 16-bit y) from x as stored (an f16 y whose GELU rounds beyond 65504 holds Inf). */
static void random_gelu(void **state) {
    (void)state;
    FOR_ITERATIONS("random_gelu", 4, r) {
        size_t n = rchance(&r, 4) ? 1 + rpick(&r, small_mode() ? 300 : 20000) : rsize(&r, 65);
        tsr_gelu_mode mode = rchance(&r, 2) ? TSR_GELU_TANH : TSR_GELU_ERF;
        bool unfused = rchance(&r, 3), in_place = rchance(&r, 3);
        size_t x_off = rchance(&r, 2) ? 0 : rpick(&r, 50), y_off = in_place ? x_off : (rchance(&r, 2) ? 0 : rpick(&r, 50));
        rng tr = types_rng();
        bool typed = !unfused && rchance(&tr, 6);
        tsr_dtype x_type = typed ? draw_type(&tr) : TSR_F32, y_type = typed && !in_place ? draw_type(&tr) : x_type;
        cur_desc[0] = 0;
        DESC("%s(%s, x_off=%zu, y_off=%zu, n=%zu, in_place=%d",
             unfused ? "tsr_gelu_unfused"
             : typed ? "tsr_gelu (typed)"
                     : "tsr_gelu",
             mode == TSR_GELU_TANH ? "tanh" : "erf", x_off, y_off, n, in_place);
        if (typed) DESC(", x_type=%s, y_type=%s", tsr_dtype_str(x_type), tsr_dtype_str(y_type));
        DESC(")");
        tbuf X, Y;
        tb_make_typed(&r, &X, x_off + n, rchance(&r, 2), "x", x_type);
        if (!in_place) tb_make_typed(&r, &Y, y_off + n, rchance(&r, 2), "y", y_type);
        qchoice qc = pick_queue(&r, true);
        float *x = malloc(n * sizeof *x);
        for (size_t i = 0; i < n; ++i) {
            switch (rpick(&r, 12)) {
            case 0: x[i] = special(&r); break;
            case 1: x[i] = runi(&r, -1e30f, 1e30f); break;
            case 2: x[i] = rchance(&r, 2) ? 0.0f : -0.0f; break;
            case 3: x[i] = runi(&r, -1e-30f, 1e-30f); break;
            default: x[i] = runi(&r, -30, 30); break;
            }
            *tb_at(&X, x_off + i) = x[i];
        }
        tbuf *out = in_place ? &X : &Y;
        for (size_t i = 0; i < n; ++i) {
            out->writable[out->origin + y_off + i] = 1;
            if (!in_place) *tb_at(out, y_off + i) = NAN;
        }
        tb_upload(&X);
        if (!in_place) tb_upload(&Y);
        for (size_t i = 0; i < n; ++i) x[i] = *tb_at(&X, x_off + i); /* as stored in x_type */
        cl_event ev = NULL;
        trace();
        const tsr_gelu_desc gd = {
            .mode = mode, .n = n, .x_type = x_type, .y_type = y_type, .x_offset = x_off, .y_offset = y_off};
        tsr_status st = (unfused ? tsr_gelu_unfused : tsr_gelu)(dev, &gd, X.mem, out->mem, qc.q, qc.event ? &ev : NULL);
        if (st != TSR_SUCCESS) FAIL("refused a valid call: %s: %s", tsr_status_str(st), tsr_last_error());
        finish(&qc, ev);
        tb_download(&X);
        tb_check_untouched(&X, "x");
        if (!in_place) tb_download(&Y), tb_check_untouched(&Y, "y");
        const double u_y = y_type == TSR_F32 ? 0.0 : tsr_dtype_unit_roundoff(y_type);
        for (size_t i = 0; i < n; ++i) {
            double ref = th_ref_activation((int)mode, x[i]), got = out->host[out->origin + y_off + i];
            /* a 16-bit y: (1 + u) TSR_GELU16_ERROR max(1, |x|) more (the AVX-512 forms, docs/dtypes.md) */
            double bound = (1e-6 + (y_type == TSR_F32 ? 0.0 : (1.0 + u_y) * TSR_GELU16_ERROR)) * fmax(1.0, fabs((double)x[i])) +
                           u_y * fabs(ref);
            bool ok = isnan(ref) ? isnan(got) : got == ref || fabs(got - ref) <= bound;
            /* a finite result beyond y's range is stored as Inf of its sign */
            if (!ok && isfinite(ref) && isinf(tsr_dtype_round(y_type, (float)ref)))
                ok = got == (double)tsr_dtype_round(y_type, (float)ref);
            if (!ok) FAIL("y[%zu] = GELU(%.9g) = %.9g, reference %.9g (bound %.3g)", i, (double)x[i], got, ref, bound);
        }
        free(x);
        tb_free(&X);
        if (!in_place) tb_free(&Y);
    }
}

/* ------------------------------------------------------------------------------ conv2d */

typedef struct conv_case {
    size_t N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, G;
} conv_case;

static size_t or1(size_t v) { return v ? v : 1; }

static void conv_ref(const conv_case *c, const float *x, const float *w, const float *bias, int act, size_t P, size_t Q,
                     double *y) {
    size_t G = or1(c->G), Cg = c->C / G, Kg = c->K / G;
    for (size_t n = 0; n < c->N; ++n)
        for (size_t k = 0; k < c->K; ++k)
            for (size_t oh = 0; oh < P; ++oh)
                for (size_t ow = 0; ow < Q; ++ow) {
                    double acc = bias ? bias[k] : 0.0;
                    for (size_t ci = 0; ci < Cg; ++ci)
                        for (size_t rr_ = 0; rr_ < c->R; ++rr_) {
                            long ih = (long)(oh * or1(c->sh) + rr_ * or1(c->dh)) - (long)c->ph;
                            if (ih < 0 || ih >= (long)c->H) continue;
                            for (size_t s = 0; s < c->S; ++s) {
                                long iw = (long)(ow * or1(c->sw) + s * or1(c->dw)) - (long)c->pw;
                                if (iw < 0 || iw >= (long)c->W) continue;
                                acc += (double)w[((k * Cg + ci) * c->R + rr_) * c->S + s] *
                                       x[((n * c->C + (k / Kg) * Cg + ci) * c->H + (size_t)ih) * c->W + (size_t)iw];
                            }
                        }
                    y[((n * c->K + k) * P + oh) * Q + ow] = th_ref_activation(act, acc);
                }
}

static void conv_iteration(rng *r, bool overlapping_subbuffers) {
    conv_case c;
    size_t P, Q;
    size_t lim = small_mode() ? 7 : 14;
    do {
        memset(&c, 0, sizeof c);
        c.G = rchance(r, 3) ? 1 + rpick(r, 3) : 0;
        c.N = 1 + rpick(r, 2);
        c.C = or1(c.G) * (1 + rpick(r, 3));
        c.K = or1(c.G) * (1 + rpick(r, 3));
        if (rchance(r, 5)) c.G = c.C; /* depthwise */
        if (c.K % or1(c.G)) c.K = or1(c.G) * (1 + rpick(r, 2));
        c.H = 1 + rpick(r, lim), c.W = 1 + rpick(r, lim);
        c.R = 1 + rpick(r, 4), c.S = 1 + rpick(r, 4);
        c.sh = rpick(r, 4), c.sw = rpick(r, 4), c.ph = rpick(r, 3), c.pw = rpick(r, 3);
        c.dh = rpick(r, 3), c.dw = rpick(r, 3);
    } while (c.H + 2 * c.ph < or1(c.dh) * (c.R - 1) + 1 || c.W + 2 * c.pw < or1(c.dw) * (c.S - 1) + 1);
    P = (c.H + 2 * c.ph - or1(c.dh) * (c.R - 1) - 1) / or1(c.sh) + 1;
    Q = (c.W + 2 * c.pw - or1(c.dw) * (c.S - 1) - 1) / or1(c.sw) + 1;
    static const tsr_conv_algo algos[] = {TSR_CONV_AUTO, TSR_CONV_IM2COL, TSR_CONV_IMPLICIT, TSR_CONV_DIRECT};
    tsr_conv2d_desc d = {.batch = c.N,
                         .in_channels = c.C,
                         .in_height = c.H,
                         .in_width = c.W,
                         .out_channels = c.K,
                         .kernel_h = c.R,
                         .kernel_w = c.S,
                         .stride_h = c.sh,
                         .stride_w = c.sw,
                         .pad_h = c.ph,
                         .pad_w = c.pw,
                         .dilation_h = c.dh,
                         .dilation_w = c.dw,
                         .groups = c.G,
                         .epilogue.activation = (tsr_activation)rpick(r, 4),
                         .algo = algos[rpick(r, 4)]};
    d.x_offset = rchance(r, 2) ? 0 : rpick(r, 30), d.w_offset = rchance(r, 2) ? 0 : rpick(r, 30);
    d.y_offset = rchance(r, 2) ? 0 : rpick(r, 30), d.epilogue.bias_offset = rpick(r, 10);
    bool bias = rchance(r, 3) != 0, own_ws = d.algo == TSR_CONV_IM2COL && rchance(r, 3);
    rng tr = types_rng();
    if (!overlapping_subbuffers && rchance(&tr, 8)) /* one layer in eight stores x, w and y in any types */
        d.x_type = draw_type(&tr), d.w_type = draw_type(&tr), d.y_type = draw_type(&tr);
    size_t nx = c.N * c.C * c.H * c.W, nw = c.K * (c.C / or1(c.G)) * c.R * c.S, ny = c.N * c.K * P * Q;
    cur_desc[0] = 0;
    DESC(
        "tsr_conv2d(N=%zu C=%zu H=%zu W=%zu K=%zu R=%zu S=%zu stride=%zu,%zu pad=%zu,%zu dil=%zu,%zu groups=%zu act=%d "
        "algo=%d offsets x=%zu w=%zu bias=%zu y=%zu bias=%d own_workspace=%d types x=%s w=%s y=%s)",
        c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, c.G, (int)d.epilogue.activation,
        (int)d.algo, d.x_offset, d.w_offset, d.epilogue.bias_offset, d.y_offset, bias, own_ws, tsr_dtype_str(d.x_type),
        tsr_dtype_str(d.w_type), tsr_dtype_str(d.y_type));
    bool inject = rchance(r, 6);
    tbuf X, Wt, Bs = {0}, Y;
    tb_make_typed(r, &X, d.x_offset + nx, rchance(r, 2), "x", d.x_type);
    tb_make_typed(r, &Wt, d.w_offset + nw, rchance(r, 2), "w", d.w_type);
    if (bias) tb_make(r, &Bs, d.epilogue.bias_offset + c.K, rchance(r, 2), "bias");
    tb_make_typed(r, &Y, d.y_offset + ny, rchance(r, 2), "y", d.y_type);
    qchoice qc = pick_queue(r, true);
    for (size_t i = 0; i < nx; ++i) *tb_at(&X, d.x_offset + i) = runi(r, -1, 1);
    for (size_t i = 0; i < nw; ++i) *tb_at(&Wt, d.w_offset + i) = runi(r, -1, 1);
    for (size_t i = 0; bias && i < c.K; ++i)
        *tb_at(&Bs, d.epilogue.bias_offset + i) = runi(r, -1, 1);
    for (size_t i = 0; i < ny; ++i) *tb_at(&Y, d.y_offset + i) = NAN, Y.writable[Y.origin + d.y_offset + i] = 1;
    if (inject) {
        size_t at = rpick(r, nx);
        *tb_at(&X, d.x_offset + at) = special(r);
        DESC(" special x[%zu] = %g", at, (double)*tb_at(&X, d.x_offset + at));
    }
    cl_mem ws = NULL;
    if (own_ws) {
        size_t bytes = 0, min_bytes = 0;
        TH_ASSERT_OK(tsr_conv2d_workspace_size(dev, &d, &bytes, &min_bytes));
        d.workspace_bytes = min_bytes + (bytes > min_bytes ? rpick(r, bytes - min_bytes + 1) : 0);
        if (d.workspace_bytes) {
            ws = th_buffer(dev, (d.workspace_bytes + 3) / 4 + rpick(r, 8));
            d.workspace = ws;
        }
        DESC(" workspace_bytes=%zu (min %zu, own %zu)", d.workspace_bytes, min_bytes, bytes);
    }
    tb_upload(&X), tb_upload(&Wt), tb_upload(&Y);
    if (bias) tb_upload(&Bs);
    if (overlapping_subbuffers) {
        /* x and y are sub-buffers of one parent whose regions overlap: must be refused. */
        size_t a = align_floats, span_x = d.x_offset + nx, span_y = d.y_offset + ny;
        size_t parent_floats = a + span_x + span_y + a;
        cl_mem parent = th_buffer(dev, parent_floats);
        cl_int err;
        cl_buffer_region rx = {0, span_x * 4}, ry = {a * 4, span_y * 4};
        cl_mem sx = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &rx, &err);
        cl_mem sy = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &ry, &err);
        if (span_x > a + d.y_offset) { /* x's elements [x_offset, span_x) reach into y's, which start at a + y_offset */
            d.epilogue.bias = bias ? Bs.mem : NULL;
            tsr_status st = tsr_conv2d(dev, &d, sx, Wt.mem, sy, NULL, NULL);
            clFinish(tsr_device_queue(dev));
            if (st == TSR_SUCCESS) FAIL("tsr_conv2d accepted x and y sub-buffers of one parent that overlap");
        }
        clReleaseMemObject(sx), clReleaseMemObject(sy), clReleaseMemObject(parent);
    } else {
        cl_event ev = NULL;
        trace();
        d.epilogue.bias = bias ? Bs.mem : NULL;
        tsr_status st = tsr_conv2d(dev, &d, X.mem, Wt.mem, Y.mem, qc.q, qc.event ? &ev : NULL);
        if (st != TSR_SUCCESS) FAIL("refused a valid call: %s: %s", tsr_status_str(st), tsr_last_error());
        finish(&qc, ev);
        tb_download(&X), tb_download(&Wt), tb_download(&Y);
        tb_check_untouched(&X, "x");
        tb_check_untouched(&Wt, "w");
        tb_check_untouched(&Y, "y");
        if (bias) tb_download(&Bs), tb_check_untouched(&Bs, "bias");
        double *ref = malloc(ny * sizeof *ref);
        conv_ref(&c, tb_at(&X, d.x_offset), tb_at(&Wt, d.w_offset), bias ? tb_at(&Bs, d.epilogue.bias_offset) : NULL,
                 (int)d.epilogue.activation, P, Q, ref);
        tsr_error_sum e = {0, 0};
        for (size_t i = 0; i < ny; ++i) compare_value(&e, Y.host[Y.origin + d.y_offset + i], ref[i], "y", i);
        const double tol = typed_tolerance(d.y_type, (double)(c.C / or1(c.G) * c.R * c.S));
        if (!(tsr_error_value(&e) <= tol)) FAIL("relative error %.3e (tolerance %.3g)", tsr_error_value(&e), tol);
        free(ref);
    }
    if (ws) clReleaseMemObject(ws);
    tb_free(&X), tb_free(&Wt), tb_free(&Y);
    if (bias) tb_free(&Bs);
}

static void random_conv2d(void **state) {
    (void)state;
    FOR_ITERATIONS("random_conv2d", 5, r) conv_iteration(&r, false);
}

/* ------------------------------------------------------------------------------ attention */

typedef tsr_status (*attention_fn)(tsr_device *, const tsr_attention_desc *, cl_mem, cl_mem, cl_mem, cl_mem,
                                   cl_command_queue, cl_event *);

/* Strides of one tensor: contiguous (zeros), [B, H, L, D] or [B, L, H, D] with padding. */
static void draw_strides(rng *r, size_t H, size_t L, size_t D, size_t s[3], const char *name) {
    size_t kind = rpick(r, 3);
    if (kind == 0) {
        s[0] = s[1] = s[2] = 0;
    } else if (kind == 1) {
        s[2] = D + (rchance(r, 2) ? 0 : rpick(r, 5));
        s[1] = L * s[2] + (rchance(r, 2) ? 0 : rpick(r, 7));
        s[0] = H * s[1] + (rchance(r, 2) ? 0 : rpick(r, 7));
    } else {
        s[1] = D + (rchance(r, 2) ? 0 : rpick(r, 5));
        s[2] = H * s[1] + (rchance(r, 2) ? 0 : rpick(r, 5));
        s[0] = L * s[2] + (rchance(r, 2) ? 0 : rpick(r, 7));
    }
    DESC(" %s_strides={%zu,%zu,%zu}", name, s[0], s[1], s[2]);
}

static size_t elem(const size_t s[3], size_t H, size_t L, size_t D, size_t b, size_t h, size_t i) {
    if (!s[0] && !s[1] && !s[2]) return ((b * H + h) * L + i) * D;
    return b * s[0] + h * s[1] + i * s[2];
}

static size_t extent(const size_t s[3], size_t B, size_t H, size_t L, size_t D) {
    return elem(s, H, L, D, B - 1, H - 1, L - 1) + D;
}

/* Draw an attention call's shape, mask, strides and offsets into d (fp32 unless types are drawn
 * later); kvl holds kv_lengths (up to 4 batch entries) when d->kv_lengths is set. */
static void attention_draw(rng *r, tsr_attention_desc *d, int kvl[4], size_t max_batch, const char *fn_name) {
    static const size_t lens[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 65};
    static const size_t dims[] = {1, 2, 3, 8, 16, 17, 32, 64, 80, 128};
    size_t B = 1 + rpick(r, max_batch), H = 1 + rpick(r, 3);
    size_t Lq = lens[rpick(r, small_mode() ? 5 : 11)], Lk = lens[rpick(r, small_mode() ? 5 : 11)];
    size_t D = dims[rpick(r, small_mode() ? 5 : (rchance(r, 8) ? 10 : 8))];
    memset(d, 0, sizeof *d);
    d->batch = B, d->heads = H, d->q_len = Lq, d->kv_len = Lk, d->head_dim = D;
    d->causal = rchance(r, 2);
    d->scale = rchance(r, 2) ? 0.0f : runi(r, 0.05f, 1.0f);
    bool use_kvl = rchance(r, 2);
    for (size_t b = 0; b < B; ++b) kvl[b] = rchance(r, 5) ? 0 : (int)rpick(r, Lk + 1);
    if (use_kvl) d->kv_lengths = kvl;
    DESC("%s(B=%zu H=%zu Lq=%zu Lk=%zu D=%zu causal=%d scale=%g kv_lengths=", fn_name, B, H, Lq, Lk, D, d->causal,
         (double)d->scale);
    if (use_kvl) for (size_t b = 0; b < B; ++b) DESC("%d%s", kvl[b], b + 1 < B ? "," : "");
    else DESC("NULL");
    draw_strides(r, H, Lq, D, d->q_strides, "q");
    draw_strides(r, H, Lk, D, d->k_strides, "k");
    draw_strides(r, H, Lk, D, d->v_strides, "v");
    draw_strides(r, H, Lq, D, d->o_strides, "o");
    d->q_offset = rpick(r, 9), d->k_offset = rpick(r, 9), d->v_offset = rpick(r, 9), d->o_offset = rpick(r, 9);
}

/* Q, K and V get random rows (keys past kv_lengths NaN when masked_nan: the mask must hide them),
 * O's rows NaN and writable. Each pointer is its tensor's element 0 (offset applied). */
static void attention_fill(rng *r, const tsr_attention_desc *d, bool masked_nan, float *q, float *k, float *v,
                           float *o, char *o_writable) {
    const size_t B = d->batch, H = d->heads, Lq = d->q_len, Lk = d->kv_len, D = d->head_dim;
    for (size_t b = 0; b < B; ++b) {
        size_t kv = d->kv_lengths ? (size_t)d->kv_lengths[b] : Lk;
        for (size_t h = 0; h < H; ++h) {
            for (size_t i = 0; i < Lq; ++i)
                for (size_t e = 0; e < D; ++e) {
                    q[elem(d->q_strides, H, Lq, D, b, h, i) + e] = runi(r, -1.5f, 1.5f);
                    size_t at = elem(d->o_strides, H, Lq, D, b, h, i) + e;
                    o[at] = NAN, o_writable[at] = 1;
                }
            for (size_t j = 0; j < Lk; ++j)
                for (size_t e = 0; e < D; ++e) {
                    bool hidden = masked_nan && j >= kv;
                    k[elem(d->k_strides, H, Lk, D, b, h, j) + e] = hidden ? NAN : runi(r, -1.5f, 1.5f);
                    v[elem(d->v_strides, H, Lk, D, b, h, j) + e] = hidden ? NAN : runi(r, -1, 1);
                }
        }
    }
}

/* O (and lse unless NULL) against a double reference from Q, K and V as stored (each pointer its
 * tensor's element 0): O within `tol` in relative norm, lse within 1e-5 relative. */
static void attention_check(const tsr_attention_desc *d, const float *q, const float *k, const float *v,
                            const float *o, const float *lse, double tol) {
    const size_t B = d->batch, H = d->heads, Lq = d->q_len, Lk = d->kv_len, D = d->head_dim;
    double scale = d->scale ? d->scale : 1.0 / sqrt((double)D);
    double *s = malloc(Lk * sizeof *s);
    tsr_error_sum e = {0, 0};
    for (size_t b = 0; b < B; ++b) {
        size_t kv = d->kv_lengths ? (size_t)d->kv_lengths[b] : Lk;
        for (size_t h = 0; h < H; ++h)
            for (size_t i = 0; i < Lq; ++i) {
                size_t limit = kv;
                if (d->causal) {
                    long long last = (long long)i + (long long)Lk - (long long)Lq;
                    limit = last < 0 ? 0 : (size_t)last + 1 < limit ? (size_t)last + 1 : limit;
                }
                const float *qi = q + elem(d->q_strides, H, Lq, D, b, h, i);
                const float *oi = o + elem(d->o_strides, H, Lq, D, b, h, i);
                double m = -INFINITY, sum = 0;
                for (size_t j = 0; j < limit; ++j) {
                    const float *kj = k + elem(d->k_strides, H, Lk, D, b, h, j);
                    double dot = 0;
                    for (size_t x = 0; x < D; ++x) dot += (double)qi[x] * kj[x];
                    s[j] = dot * scale;
                    m = fmax(m, s[j]);
                }
                for (size_t j = 0; j < limit; ++j) sum += (s[j] = exp(s[j] - m));
                for (size_t x = 0; x < D; ++x) {
                    double ref = 0;
                    for (size_t j = 0; j < limit; ++j) ref += s[j] * v[elem(d->v_strides, H, Lk, D, b, h, j) + x];
                    compare_value(&e, oi[x], limit ? ref / sum : 0.0, "o row", (b * H + h) * Lq + i);
                }
                if (lse) {
                    float got = lse[(b * H + h) * Lq + i];
                    double want = limit ? m + log(sum) : -INFINITY;
                    if (!(got == want || fabs(got - want) <= 1e-5 * fmax(1.0, fabs(want))))
                        FAIL("lse of row %zu/%zu/%zu = %.9g, reference %.9g", b, h, i, (double)got, want);
                }
            }
    }
    free(s);
    if (!(tsr_error_value(&e) <= tol)) FAIL("relative error %.3e (tolerance %.3g)", tsr_error_value(&e), tol);
}

/* One random attention call through fn. One call in eight stores Q, K, V and O in any types (the
 * unfused path: in sweeps only), O held to the header's 16-bit bound (lse stays fp32). */
static void attention_iteration(rng *r, attention_fn fn, const char *fn_name) {
    tsr_attention_desc d;
    int kvl[4];
    cur_desc[0] = 0;
    attention_draw(r, &d, kvl, 2, fn_name);
    const size_t B = d.batch, H = d.heads, Lq = d.q_len, Lk = d.kv_len, D = d.head_dim;
    bool lse = rchance(r, 2);
    d.lse_offset = lse ? rpick(r, 6) : 0;
    /* tsr_attention_unfused runs two typed GEMMs a call, whose programs compile slowly: typed only in sweeps */
    rng tr = types_rng();
    if ((fn != tsr_attention_unfused || sweep()) && rchance(&tr, 8))
        d.q_type = draw_type(&tr), d.k_type = draw_type(&tr), d.v_type = draw_type(&tr), d.o_type = draw_type(&tr);
    DESC(" offsets q=%zu k=%zu v=%zu o=%zu lse=%d lse_offset=%zu types q=%s k=%s v=%s o=%s)", d.q_offset, d.k_offset,
         d.v_offset, d.o_offset, lse, d.lse_offset, tsr_dtype_str(d.q_type), tsr_dtype_str(d.k_type),
         tsr_dtype_str(d.v_type), tsr_dtype_str(d.o_type));
    tbuf Q, K, V, O, LS = {0};
    bool nan_bg = rchance(r, 2);
    tb_make_typed(r, &Q, d.q_offset + extent(d.q_strides, B, H, Lq, D), nan_bg, "q", d.q_type);
    tb_make_typed(r, &K, d.k_offset + extent(d.k_strides, B, H, Lk, D), nan_bg, "k", d.k_type);
    tb_make_typed(r, &V, d.v_offset + extent(d.v_strides, B, H, Lk, D), nan_bg, "v", d.v_type);
    tb_make_typed(r, &O, d.o_offset + extent(d.o_strides, B, H, Lq, D), rchance(r, 2), "o", d.o_type);
    if (lse) tb_make(r, &LS, d.lse_offset + B * H * Lq, rchance(r, 2), "lse"), d.lse = LS.mem;
    qchoice qc = pick_queue(r, true);
    bool masked_nan = rchance(r, 2); /* keys beyond kv_lengths hold NaN: the mask hides them */
    DESC(" masked_nan=%d background=%s", masked_nan, nan_bg ? "NaN" : "random");
    attention_fill(r, &d, masked_nan, tb_at(&Q, d.q_offset), tb_at(&K, d.k_offset), tb_at(&V, d.v_offset),
                   tb_at(&O, d.o_offset), &O.writable[O.origin + d.o_offset]);
    for (size_t i = 0; lse && i < B * H * Lq; ++i) {
        size_t at = LS.origin + d.lse_offset + i;
        LS.init[at] = NAN, LS.writable[at] = 1;
    }
    tb_upload(&Q), tb_upload(&K), tb_upload(&V), tb_upload(&O);
    if (lse) tb_upload(&LS);
    cl_event ev = NULL;
    trace();
    tsr_status st = fn(dev, &d, Q.mem, K.mem, V.mem, O.mem, qc.q, qc.event ? &ev : NULL);
    if (st != TSR_SUCCESS) FAIL("refused a valid call: %s: %s", tsr_status_str(st), tsr_last_error());
    finish(&qc, ev);
    tb_download(&Q), tb_download(&K), tb_download(&V), tb_download(&O);
    tb_check_untouched(&Q, "q");
    tb_check_untouched(&K, "k");
    tb_check_untouched(&V, "v");
    tb_check_untouched(&O, "o");
    if (lse) tb_download(&LS), tb_check_untouched(&LS, "lse");
    /* inputs as tb_upload rounded them to their types */
    attention_check(&d, tb_at(&Q, d.q_offset), tb_at(&K, d.k_offset), tb_at(&V, d.v_offset),
                    &O.host[O.origin + d.o_offset], lse ? &LS.host[LS.origin + d.lse_offset] : NULL,
                    typed_tolerance(d.o_type, (double)Lk));
    tb_free(&Q), tb_free(&K), tb_free(&V), tb_free(&O);
    if (lse) tb_free(&LS);
}

static void random_attention(void **state) {
    (void)state;
    FOR_ITERATIONS("random_attention", 5, r) attention_iteration(&r, tsr_attention, "tsr_attention");
}

/* ------------------------------------------------- aliasing and the unfused attention path */

/* Sub-buffers of one parent whose regions overlap, as x and y of gelu (not the same view)
 * and of conv2d: both must be refused, as overlapping ranges of one buffer are. */
static void random_overlapping_subbuffers(void **state) {
    (void)state;
    FOR_ITERATIONS("random_overlapping_subbuffers", 1, r) {
        size_t n = 2 * align_floats + rpick(&r, 100);
        cur_desc[0] = 0;
        DESC("tsr_gelu(x = sub-buffer [0, %zu), y = sub-buffer [%zu, %zu) of one parent)", n, align_floats,
             align_floats + n);
        cl_mem parent = th_buffer(dev, 2 * n + 2 * align_floats);
        float *zeros = calloc(2 * n + 2 * align_floats, sizeof(float));
        TH_ASSERT_OK(tsr_upload(dev, parent, zeros, 2 * n + 2 * align_floats));
        free(zeros);
        cl_int err;
        cl_buffer_region rx = {0, n * 4}, ry = {align_floats * 4, n * 4};
        cl_mem sx = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &rx, &err);
        cl_mem sy = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &ry, &err);
        tsr_status st = tsr_gelu(dev, &(tsr_gelu_desc){.mode = TSR_GELU_TANH, .n = n}, sx, sy, NULL, NULL);
        clFinish(tsr_device_queue(dev));
        if (st == TSR_SUCCESS) FAIL("tsr_gelu accepted x and y sub-buffers of one parent that overlap");
        /* the parent itself and a sub-buffer */
        st = tsr_gelu(dev, &(tsr_gelu_desc){.mode = TSR_GELU_ERF, .n = n}, parent, sy, NULL, NULL);
        clFinish(tsr_device_queue(dev));
        if (st == TSR_SUCCESS) FAIL("tsr_gelu accepted a parent and its sub-buffer as x and y");
        clReleaseMemObject(sx), clReleaseMemObject(sy), clReleaseMemObject(parent);
        conv_iteration(&r, true);
    }
}

/* tsr_attention_unfused on the same random descriptors as tsr_attention. */
static void random_attention_unfused(void **state) {
    (void)state;
    FOR_ITERATIONS("random_attention_unfused", 2, r) attention_iteration(&r, tsr_attention_unfused, "tsr_attention_unfused");
}

/* ------------------------------------------------------------------------------ LayerNorm */

/* The absolute rounding a 16-bit y may add beyond u(y) |ref|: half of f16's subnormal spacing
 * (bf16 has fp32's range, so its subnormals are fp32's and below every bound here). */
static double y_subnormal_floor(tsr_dtype y_type) { return y_type == TSR_F16 ? ldexp(1.0, -25) : 0.0; }

/* One random tsr_layernorm call: any rows and cols (BERT's 384, 768, 1024 often), strides and
 * offsets, residual or not, in place on x or on the residual, eps from 1e-12 to 1, every storage
 * combination, a NaN/Inf in a row of x or the residual or a NaN in gamma now and then. Checked
 * per element against a double reference with the header's bound, and every guard. */
static void layernorm_iteration(rng *r) {
    static const size_t bert_cols[] = {384, 768, 768, 1024};
    enum { NOT_IN_PLACE, ON_X, ON_RESIDUAL };
    static const char *in_place_names[] = {"no", "x", "residual"};
    size_t cols;
    switch (rpick(r, 3)) {
    case 0:
        cols = small_mode() ? rsize(r, 65) : bert_cols[rpick(r, 4)];
        break;
    case 1:
        cols = rsize(r, 65);
        break;
    default:
        cols = 1 + rpick(r, small_mode() ? 100 : (rchance(r, 3) ? 4200 : 1100));
        break;
    }
    size_t rows = small_mode() ? 1 + rpick(r, 4) : rchance(r, 3) ? rsize(r, 65) : 1 + rpick(r, 8);
    if (rows * cols > 100000) rows = 1 + 100000 / cols; /* keeps the host reference quick */
    tsr_layernorm_desc d = {.rows = rows, .cols = cols};
    bool residual = !rchance(r, 3);
    int in_place = (int)rpick(r, 4);
    if (in_place > ON_RESIDUAL || (in_place == ON_RESIDUAL && !residual)) in_place = NOT_IN_PLACE;
    switch (rpick(r, 4)) {
    case 0:
        d.eps = 1e-12f;
        break;
    case 1:
        d.eps = 1e-5f;
        break;
    default:
        d.eps = powf(10.0f, runi(r, -12.0f, 0.0f));
        break;
    }
    d.x_type = storage_types[rpick(r, 3)];
    d.residual_type = residual ? storage_types[rpick(r, 3)] : (tsr_dtype)rpick(r, 3); /* not read without one */
    d.y_type = storage_types[rpick(r, 3)];
    d.x_offset = rchance(r, 2) ? 0 : rpick(r, 40), d.residual_offset = rchance(r, 2) ? 0 : rpick(r, 40);
    d.gamma_offset = rchance(r, 2) ? 0 : rpick(r, 40), d.beta_offset = rchance(r, 2) ? 0 : rpick(r, 40);
    d.y_offset = rchance(r, 2) ? 0 : rpick(r, 40);
    d.x_stride = rchance(r, 2) ? 0 : cols + rpick(r, 9);
    d.residual_stride = rchance(r, 2) ? 0 : cols + rpick(r, 9);
    d.y_stride = rchance(r, 2) ? 0 : cols + rpick(r, 9);
    if (!residual && rchance(r, 2)) { /* not read without a residual, so not checked either */
        d.residual_type = (tsr_dtype)(TSR_DTYPE_COUNT + rpick(r, 5));
        d.residual_stride = rpick(r, cols);
        d.residual_offset = SIZE_MAX - rpick(r, 9);
    }
    if (in_place == ON_X) d.y_offset = d.x_offset, d.y_stride = d.x_stride, d.y_type = d.x_type;
    if (in_place == ON_RESIDUAL)
        d.y_offset = d.residual_offset, d.y_stride = d.residual_stride, d.y_type = d.residual_type;
    static const float centers[] = {0.0f, 0.0f, 1.0f, -3.0f, 300.0f, -1000.0f};
    const float center = centers[rpick(r, 6)],
                width = center > 100 || center < -100 ? runi(r, 0.5f, 10.0f) : runi(r, 0.01f, 4.0f);
    const size_t xs = d.x_stride ? d.x_stride : cols, rs = d.residual_stride ? d.residual_stride : cols;
    const size_t ys = d.y_stride ? d.y_stride : cols;
    cur_desc[0] = 0;
    DESC("tsr_layernorm(rows=%zu cols=%zu eps=%.9g residual=%d in_place=%s types x=%s r=%s y=%s offsets x=%zu r=%zu "
         "gamma=%zu beta=%zu y=%zu strides x=%zu r=%zu y=%zu) x in %g +- %g",
         rows, cols, (double)d.eps, residual, in_place_names[in_place], tsr_dtype_str(d.x_type),
         tsr_dtype_str(d.residual_type), tsr_dtype_str(d.y_type), d.x_offset, d.residual_offset, d.gamma_offset,
         d.beta_offset, d.y_offset, d.x_stride, d.residual_stride, d.y_stride, (double)center, (double)width);
    bool bg_nan = rchance(r, 2);
    tbuf X, R = {0}, G, B, Y = {0};
    tb_make_typed(r, &X, d.x_offset + (rows - 1) * xs + cols, bg_nan, "x", d.x_type);
    if (residual) tb_make_typed(r, &R, d.residual_offset + (rows - 1) * rs + cols, bg_nan, "r", d.residual_type);
    tb_make(r, &G, d.gamma_offset + cols, bg_nan, "gamma");
    tb_make(r, &B, d.beta_offset + cols, bg_nan, "beta");
    tbuf *out = in_place == ON_X ? &X : in_place == ON_RESIDUAL ? &R : &Y;
    if (in_place == NOT_IN_PLACE)
        tb_make_typed(r, &Y, d.y_offset + (rows - 1) * ys + cols, rchance(r, 2), "y", d.y_type);
    /* In place through another handle: a second sub-buffer on exactly x's region (an x that is a
     * sub-buffer already, so its parent outlives the handle; see oclgrind_parents). */
    cl_mem y_alias = NULL;
    if (in_place == ON_X && X.mem != X.parent && rchance(r, 2)) {
        const size_t esize = tsr_dtype_size(X.dtype);
        cl_buffer_region reg = {X.origin * esize, X.size * esize};
        cl_int err;
        y_alias = clCreateSubBuffer(X.parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &reg, &err);
        if (err != CL_SUCCESS) FAIL("clCreateSubBuffer: %s", tsr_cl_error_name(err));
        DESC(" y=another sub-buffer on x's region");
    }
    qchoice qc = pick_queue(r, true);
    for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < cols; ++j) {
            *tb_at(&X, d.x_offset + i * xs + j) = center + runi(r, -width, width);
            if (residual) *tb_at(&R, d.residual_offset + i * rs + j) = runi(r, -2, 2);
        }
    for (size_t j = 0; j < cols; ++j) {
        *tb_at(&G, d.gamma_offset + j) = (rchance(r, 2) ? 1 : -1) * runi(r, 0.25f, 1.5f);
        *tb_at(&B, d.beta_offset + j) = runi(r, -1, 1);
    }
    for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < cols; ++j) {
            size_t at = out->origin + d.y_offset + i * ys + j;
            out->writable[at] = 1;
            if (in_place == NOT_IN_PLACE) out->init[at] = NAN;
        }
    if (rchance(r, 6)) { /* PyTorch's rule: a NaN or Inf makes its row NaN, a NaN in gamma its column */
        size_t where = rpick(r, residual ? 3 : 2), row = rpick(r, rows), col = rpick(r, cols);
        float v = special(r);
        if (where == 0) *tb_at(&X, d.x_offset + row * xs + col) = v;
        if (where == 1) *tb_at(&G, d.gamma_offset + col) = NAN;
        if (where == 2) *tb_at(&R, d.residual_offset + row * rs + col) = v;
        if (where == 1)
            DESC(" special gamma[%zu] = NaN", col);
        else
            DESC(" special %s row %zu col %zu = %g", where == 0 ? "x" : "r", row, col, (double)v);
    }
    tb_upload(&X), tb_upload(&G), tb_upload(&B);
    if (residual) tb_upload(&R);
    if (in_place == NOT_IN_PLACE) tb_upload(&Y);
    cl_event ev = NULL;
    trace();
    tsr_status st = tsr_layernorm(dev, &d, X.mem, residual ? R.mem : NULL, G.mem, B.mem, y_alias ? y_alias : out->mem,
                                  qc.q, qc.event ? &ev : NULL);
    if (st != TSR_SUCCESS) FAIL("refused a valid call: %s: %s", tsr_status_str(st), tsr_last_error());
    finish(&qc, ev);
    tb_download(&X), tb_download(&G), tb_download(&B);
    tb_check_untouched(&X, "x");
    tb_check_untouched(&G, "gamma");
    tb_check_untouched(&B, "beta");
    if (residual) tb_download(&R), tb_check_untouched(&R, "residual");
    if (in_place == NOT_IN_PLACE) tb_download(&Y), tb_check_untouched(&Y, "y");
    /* The header's bound: 2^-24 (32 + 4 sqrt(cols)) (|gamma| M / sd + |beta| + |ref|), plus a 16-bit y's rounding. */
    const double u = ldexp(1.0, -24), u_y = d.y_type == TSR_F32 ? 0 : tsr_dtype_unit_roundoff(d.y_type);
    double *s = malloc(cols * sizeof *s), worst = 0;
    for (size_t i = 0; i < rows; ++i) {
        double largest = 0, sum = 0, squares = 0;
        for (size_t j = 0; j < cols; ++j) {
            s[j] = (double)*tb_at(&X, d.x_offset + i * xs + j) +
                   (residual ? (double)*tb_at(&R, d.residual_offset + i * rs + j) : 0.0);
            largest = fmax(largest, fabs(s[j]));
            sum += s[j];
        }
        const double mean = sum / (double)cols;
        for (size_t j = 0; j < cols; ++j)
            squares += (s[j] - mean) * (s[j] - mean);
        const double sd = sqrt(squares / (double)cols + (double)d.eps);
        for (size_t j = 0; j < cols; ++j) {
            const double g = *tb_at(&G, d.gamma_offset + j), b = *tb_at(&B, d.beta_offset + j);
            const double ref = (s[j] - mean) / sd * g + b;
            const float got = out->host[out->origin + d.y_offset + i * ys + j];
            if (isnan(ref) || isinf(ref)) {
                if (!isnan(got) && (double)got != ref) FAIL("y[%zu][%zu] = %.9g, reference %g", i, j, (double)got, ref);
                continue;
            }
            const double bound = u * (32 + 4 * sqrt((double)cols)) * (fabs(g) * largest / sd + fabs(b) + fabs(ref)) +
                                 u_y * fabs(ref) + y_subnormal_floor(d.y_type);
            const double err = fabs((double)got - ref);
            if (!(err <= bound))
                FAIL("y[%zu][%zu] = %.9g, reference %.9g (error %.3g, bound %.3g; row mean %.9g sd %.9g max|s| %g)", i,
                     j, (double)got, ref, err, bound, mean, sd, largest);
            worst = fmax(worst, err / bound);
        }
    }
    if (getenv("TSR_TEST_VERBOSE")) fprintf(stderr, "# worst error / bound %.3f\n", worst);
    free(s);
    if (y_alias) clReleaseMemObject(y_alias);
    tb_free(&X), tb_free(&G), tb_free(&B);
    if (residual) tb_free(&R);
    if (in_place == NOT_IN_PLACE) tb_free(&Y);
}

static void random_layernorm(void **state) {
    (void)state;
    FOR_ITERATIONS("random_layernorm", 3, r) layernorm_iteration(&r);
}

/* ------------------------------------------------------------------------------ embedding */

/* y's rows against the double sum of the table rows ids and type_ids pick (P, T, type_ids NULL:
 * absent). The device adds two or three fp32 values: 2^-23 (|word| + |position| + |token_type|),
 * plus a 16-bit y's rounding. */
static void embedding_check(const tsr_embedding_desc *d, tbuf *W, tbuf *P, tbuf *T, tbuf *Y, const int32_t *ids,
                            const int32_t *type_ids, const char *name) {
    const size_t H = d->hidden, ys = d->y_stride ? d->y_stride : H;
    const double u = ldexp(1.0, -23), u_y = d->y_type == TSR_F32 ? 0 : tsr_dtype_unit_roundoff(d->y_type);
    for (size_t t = 0; t < d->tokens; ++t) {
        const float *wr = tb_at(W, d->word_offset + (size_t)ids[t] * H);
        const float *pr = P ? tb_at(P, d->position_offset + (d->position_start + t % d->seq_len) * H) : NULL;
        const float *tr = T ? tb_at(T, d->token_type_offset + (size_t)(type_ids ? type_ids[t] : 0) * H) : NULL;
        for (size_t j = 0; j < H; ++j) {
            const double ref = (double)wr[j] + (pr ? (double)pr[j] : 0.0) + (tr ? (double)tr[j] : 0.0);
            const double size = fabs(wr[j]) + (pr ? fabs(pr[j]) : 0.0) + (tr ? fabs(tr[j]) : 0.0);
            const double got = Y->host[Y->origin + d->y_offset + t * ys + j];
            const double bound = u * size + u_y * fabs(ref) + y_subnormal_floor(d->y_type);
            if (!(fabs(got - ref) <= bound))
                FAIL("%s[%zu][%zu] = %.9g, reference %.9g (id %d, error %.3g, bound %.3g)", name, t, j, got, ref,
                     (int)ids[t], fabs(got - ref), bound);
        }
    }
}

/* y's rows poisoned and writable. */
static void embedding_prepare_y(const tsr_embedding_desc *d, tbuf *Y) {
    const size_t ys = d->y_stride ? d->y_stride : d->hidden;
    for (size_t t = 0; t < d->tokens; ++t)
        for (size_t j = 0; j < d->hidden; ++j) {
            size_t at = Y->origin + d->y_offset + t * ys + j;
            Y->init[at] = NAN, Y->writable[at] = 1;
        }
}

/* One random tsr_embedding call: tokens (whole sequences or not), seq_len, hidden (BERT's 384 and
 * 768 often), vocab, optional position and token_type tables, position_start, type ids or NULL,
 * offsets, y_stride and y_type. One call in six gets one bad id, type id or position instead: it
 * must be TSR_ERR_INVALID_ARG naming the token and the value, with no event, leaving y as it was.
 * One valid call in three is followed at once, before either is waited for, by a second gather
 * with other ids into another y on another random queue: both pass through tessera's one ids
 * scratch buffer, so the second write must wait for the first kernel. */
static void embedding_iteration(rng *r) {
    static const size_t bert_hidden[] = {384, 768};
    enum { VALID, BAD_ID, BAD_TYPE_ID, BAD_POSITION };
    static const char *kinds[] = {"valid", "bad id", "bad type id", "bad position"};
    tsr_embedding_desc d = {0};
    d.seq_len = rsize(r, small_mode() ? 9 : 65);
    d.tokens = rchance(r, 4) ? 1 + rpick(r, 3 * d.seq_len) : d.seq_len * (1 + rpick(r, 3));
    d.hidden = small_mode()    ? 1 + rpick(r, 70)
               : rchance(r, 3) ? bert_hidden[rpick(r, 2)]
               : rchance(r, 2) ? rsize(r, 65)
                               : 1 + rpick(r, 1100);
    d.vocab = 1 + rpick(r, small_mode() ? 20 : 100);
    bool position = !rchance(r, 3), token_type = !rchance(r, 3), with_type_ids = !rchance(r, 3);
    const size_t used_positions = d.tokens < d.seq_len ? d.tokens : d.seq_len;
    d.position_start = rchance(r, 2) ? 0 : rpick(r, 5);
    d.max_positions = d.position_start + used_positions + rpick(r, 5);
    d.type_vocab = 1 + rpick(r, 3);
    d.word_offset = rchance(r, 2) ? 0 : rpick(r, 40);
    d.position_offset = rchance(r, 2) ? 0 : rpick(r, 40);
    d.token_type_offset = rchance(r, 2) ? 0 : rpick(r, 40);
    d.y_offset = rchance(r, 2) ? 0 : rpick(r, 40);
    d.y_stride = rchance(r, 2) ? 0 : d.hidden + rpick(r, 9);
    d.y_type = storage_types[rpick(r, 3)];
    int kind = rchance(r, 6) ? 1 + (int)rpick(r, 3) : VALID;
    if (kind == BAD_TYPE_ID && !(token_type && with_type_ids)) kind = BAD_ID;
    if (kind == BAD_POSITION && !position) kind = BAD_ID;
    int32_t *ids = malloc(d.tokens * sizeof *ids), *type_ids = malloc(d.tokens * sizeof *type_ids);
    int32_t *kept = malloc(d.tokens * sizeof *kept);
    for (size_t t = 0; t < d.tokens; ++t) {
        ids[t] = (int32_t)rpick(r, d.vocab);
        type_ids[t] = (int32_t)rpick(r, d.type_vocab);
    }
    size_t bad_token = rpick(r, d.tokens);
    int32_t bad_value = 0;
    if (kind == BAD_ID) {
        bad_value = rchance(r, 2) ? -1 - (int32_t)rpick(r, 3) : (int32_t)(d.vocab + rpick(r, 3));
        if (rchance(r, 8)) bad_value = INT32_MIN;
        ids[bad_token] = bad_value;
    }
    if (kind == BAD_TYPE_ID) {
        bad_value = rchance(r, 2) ? -1 : (int32_t)(d.type_vocab + rpick(r, 3));
        type_ids[bad_token] = bad_value;
    }
    if (kind == BAD_POSITION) { /* the table one row short of the last position, or starting past it */
        if (rchance(r, 2) && d.position_start + used_positions > 1) {
            d.max_positions = d.position_start + used_positions - 1;
        } else {
            d.max_positions = 1 + rpick(r, 4);
            d.position_start = d.max_positions + rpick(r, 3);
        }
    }
    cur_desc[0] = 0;
    DESC("tsr_embedding([%s] tokens=%zu seq_len=%zu hidden=%zu vocab=%zu max_positions=%zu type_vocab=%zu "
         "position_start=%zu offsets word=%zu position=%zu token_type=%zu y=%zu y_stride=%zu y_type=%s position=%d "
         "token_type=%d type_ids=%s",
         kinds[kind], d.tokens, d.seq_len, d.hidden, d.vocab, d.max_positions, d.type_vocab, d.position_start,
         d.word_offset, d.position_offset, d.token_type_offset, d.y_offset, d.y_stride, tsr_dtype_str(d.y_type),
         position, token_type, with_type_ids ? "set" : "NULL");
    if (kind == BAD_ID || kind == BAD_TYPE_ID) DESC(" bad token %zu = %d", bad_token, (int)bad_value);
    DESC(")");
    const size_t H = d.hidden, ys = d.y_stride ? d.y_stride : H;
    bool bg_nan = rchance(r, 2);
    tbuf W, P = {0}, T = {0}, Y;
    tb_make(r, &W, d.word_offset + d.vocab * H, bg_nan, "word");
    if (position) tb_make(r, &P, d.position_offset + d.max_positions * H, bg_nan, "position");
    if (token_type) tb_make(r, &T, d.token_type_offset + d.type_vocab * H, bg_nan, "token_type");
    tb_make_typed(r, &Y, d.y_offset + (d.tokens - 1) * ys + H, rchance(r, 2), "y", d.y_type);
    qchoice qc = pick_queue(r, true), qc2 = {0};
    const bool twice = kind == VALID && rchance(r, 3);
    tbuf Y2 = {0};
    int32_t *ids2 = NULL, *type_ids2 = NULL, *kept2 = NULL;
    if (twice) {
        DESC(" then a second call:");
        tb_make_typed(r, &Y2, d.y_offset + (d.tokens - 1) * ys + H, rchance(r, 2), "y2", d.y_type);
        qc2 = pick_queue(r, true);
        ids2 = malloc(d.tokens * sizeof *ids2), type_ids2 = malloc(d.tokens * sizeof *type_ids2);
        kept2 = malloc(d.tokens * sizeof *kept2);
        for (size_t t = 0; t < d.tokens; ++t) {
            kept2[t] = ids2[t] = (int32_t)rpick(r, d.vocab);
            type_ids2[t] = (int32_t)rpick(r, d.type_vocab);
        }
        embedding_prepare_y(&d, &Y2);
        tb_upload(&Y2);
    }
    for (size_t i = 0; i < d.vocab * H; ++i)
        *tb_at(&W, d.word_offset + i) = runi(r, -2, 2);
    for (size_t i = 0; position && i < d.max_positions * H; ++i)
        *tb_at(&P, d.position_offset + i) = runi(r, -2, 2);
    for (size_t i = 0; token_type && i < d.type_vocab * H; ++i)
        *tb_at(&T, d.token_type_offset + i) = runi(r, -2, 2);
    if (kind == VALID) embedding_prepare_y(&d, &Y);
    tb_upload(&W), tb_upload(&Y);
    if (position) tb_upload(&P);
    if (token_type) tb_upload(&T);
    memcpy(kept, ids, d.tokens * sizeof *ids);
    cl_event ev = NULL;
    trace();
    tsr_status st = tsr_embedding(dev, &d, ids, with_type_ids ? type_ids : NULL, W.mem, position ? P.mem : NULL,
                                  token_type ? T.mem : NULL, Y.mem, qc.q, qc.event ? &ev : NULL);
    if (kind == VALID) {
        if (st != TSR_SUCCESS) FAIL("refused a valid call: %s: %s", tsr_status_str(st), tsr_last_error());
        memset(ids, 0xff, d.tokens * sizeof *ids); /* the caller's again on return: nothing may read them later */
        if (twice) {
            cl_event ev2 = NULL;
            st = tsr_embedding(dev, &d, ids2, with_type_ids ? type_ids2 : NULL, W.mem, position ? P.mem : NULL,
                               token_type ? T.mem : NULL, Y2.mem, qc2.q, qc2.event ? &ev2 : NULL);
            if (st != TSR_SUCCESS) FAIL("refused the second call: %s: %s", tsr_status_str(st), tsr_last_error());
            memset(ids2, 0xff, d.tokens * sizeof *ids2);
            finish(&qc2, ev2);
        }
        finish(&qc, ev);
    } else {
        if (st != TSR_ERR_INVALID_ARG)
            FAIL("%s: %s (expected TSR_ERR_INVALID_ARG): %s", kinds[kind], tsr_status_str(st), tsr_last_error());
        if (ev) FAIL("a refused call returned an event");
        char named[96];
        if (kind == BAD_POSITION) { /* the first token whose position reaches max_positions */
            size_t t = d.position_start >= d.max_positions ? 0 : d.max_positions - d.position_start;
            snprintf(named, sizeof named, "token %zu is at position %zu", t, d.position_start + t);
        } else {
            snprintf(named, sizeof named, "%s[%zu] = %d", kind == BAD_ID ? "ids" : "type_ids", bad_token,
                     (int)bad_value);
        }
        if (!strstr(tsr_last_error(), named)) FAIL("the refusal does not name \"%s\": %s", named, tsr_last_error());
        if (clFinish(qc.q ? qc.q : tsr_device_queue(dev)) != CL_SUCCESS) FAIL("clFinish failed");
    }
    tb_download(&W), tb_download(&Y);
    tb_check_untouched(&W, "word");
    tb_check_untouched(&Y, "y");
    if (position) tb_download(&P), tb_check_untouched(&P, "position");
    if (token_type) tb_download(&T), tb_check_untouched(&T, "token_type");
    if (kind == VALID)
        embedding_check(&d, &W, position ? &P : NULL, token_type ? &T : NULL, &Y, kept,
                        token_type && with_type_ids ? type_ids : NULL, "y");
    if (twice) {
        tb_download(&Y2), tb_check_untouched(&Y2, "y2");
        embedding_check(&d, &W, position ? &P : NULL, token_type ? &T : NULL, &Y2, kept2,
                        token_type && with_type_ids ? type_ids2 : NULL, "y2");
        tb_free(&Y2);
    }
    free(ids2), free(type_ids2), free(kept2);
    free(ids), free(type_ids), free(kept);
    tb_free(&W), tb_free(&Y);
    if (position) tb_free(&P);
    if (token_type) tb_free(&T);
}

static void random_embedding(void **state) {
    (void)state;
    FOR_ITERATIONS("random_embedding", 4, r) embedding_iteration(&r);
}

/* ------------------------------------------------------------------------------ device groups */

/* The groups' devices: the suite's device and two more handles opened on the same selector
 * ($TSR_DEVICE or the default, as tests/test_multi.c does without $TSR_MULTI_DEVICES), so a group of
 * 1 to 3 members mixes one handle given several times with distinct handles of one device. */
static tsr_device *pool[3];

static void open_pool(void) {
    pool[0] = dev;
    for (size_t i = 1; i < 3; ++i)
        if (!pool[i]) pool[i] = th_open_device();
}

/* Oclgrind simulates one kernel at a time per process: a group's devices launching from their own
 * threads abort it (Context::notifyKernelBegin asserts no kernel is running), so the group tests skip
 * there (tests/test_multi.c has no Oclgrind run either). */

static void close_pool(void) {
    for (size_t i = 1; i < 3; ++i) tsr_device_close(pool[i]), pool[i] = NULL;
    pool[0] = NULL;
}

typedef struct group_draw {
    tsr_device_group *group;
    size_t count;
    double weights[3];
    bool given; /* weights set: the split must follow them (weight 0: no work) */
} group_draw;

/* A group of 1 to 3 pool members (repeats allowed) and its weights: measured (none given), equal,
 * unequal, or unequal with zeros (at least one positive). */
static void group_make(rng *r, group_draw *g) {
    open_pool();
    memset(g, 0, sizeof *g);
    g->count = 1 + rpick(r, 3);
    tsr_device *members[3];
    DESC(" group=[");
    for (size_t i = 0; i < g->count; ++i) {
        size_t p = rpick(r, 3);
        members[i] = pool[p];
        DESC("%shandle %zu", i ? ", " : "", p);
    }
    tsr_status st = tsr_group_create(members, g->count, &g->group);
    if (st != TSR_SUCCESS) FAIL("tsr_group_create: %s: %s", tsr_status_str(st), tsr_last_error());
    size_t kind = rpick(r, 4);
    g->given = kind != 0;
    for (size_t i = 0; i < g->count; ++i)
        g->weights[i] = kind == 1 ? 1.0 : kind == 2 ? runi(r, 0.1f, 4.0f) : rchance(r, 2) ? 0.0 : runi(r, 0.1f, 4.0f);
    if (kind == 3) {
        bool any = false;
        for (size_t i = 0; i < g->count; ++i) any = any || g->weights[i] > 0;
        if (!any) g->weights[rpick(r, g->count)] = runi(r, 0.5f, 3.0f);
    }
    if (!g->given) {
        DESC("] weights=measured");
        return;
    }
    DESC("] weights={");
    for (size_t i = 0; i < g->count; ++i) DESC("%s%.9g", i ? ", " : "", g->weights[i]);
    DESC("}");
    st = tsr_group_set_weights(g->group, g->weights);
    if (st != TSR_SUCCESS) FAIL("tsr_group_set_weights: %s: %s", tsr_status_str(st), tsr_last_error());
}

/* The last call's tiles cover units [0, units) exactly once, each device's count adds up, a device
 * of weight 0 computed nothing, and given weights are reported as such. */
static void group_check_tiles(const group_draw *g, size_t units) {
    tsr_group_stats st;
    tsr_status status = tsr_group_last_stats(g->group, &st);
    if (status != TSR_SUCCESS) FAIL("tsr_group_last_stats: %s: %s", tsr_status_str(status), tsr_last_error());
    unsigned char *seen = calloc(units ? units : 1, 1);
    size_t per_device[3] = {0};
    for (size_t t = 0; t < st.tile_count; ++t) {
        const tsr_group_tile *tile = &st.tiles[t];
        if (tile->device >= g->count || !tile->count || tile->first > units || tile->count > units - tile->first)
            FAIL("tile %zu (device %zu, units %zu+%zu) is not within the %zu units of the %zu devices", t, tile->device,
                 tile->first, tile->count, units, g->count);
        per_device[tile->device] += tile->count;
        for (size_t u = tile->first; u < tile->first + tile->count; ++u) {
            if (seen[u]) FAIL("unit %zu computed twice (tile %zu, device %zu)", u, t, tile->device);
            seen[u] = 1;
        }
    }
    for (size_t u = 0; u < units; ++u)
        if (!seen[u]) FAIL("unit %zu of %zu never computed (%zu tiles)", u, units, st.tile_count);
    free(seen);
    for (size_t d = 0; d < g->count; ++d) {
        if (per_device[d] != st.devices[d].units)
            FAIL("device %zu: its tiles hold %zu units, its statistics say %zu", d, per_device[d], st.devices[d].units);
        if (g->given && g->weights[d] == 0 && per_device[d])
            FAIL("device %zu has weight 0 but computed %zu units", d, per_device[d]);
    }
    if (g->given && strcmp(st.weights_from, "given")) FAIL("weights were given, the split says \"%s\"", st.weights_from);
}

/* A host array: guard elements before and after the data, its contents before the call kept. */
typedef struct harr {
    float *mem, *init;   /* what the call sees; the contents before */
    size_t lo, total;    /* guard elements before the data; all elements */
    char *writable;      /* per element: the call may write it */
} harr;

static void ha_make(rng *r, harr *h, size_t n, bool bg_nan, const char *name) {
    h->lo = rpick(r, 5);
    h->total = h->lo + n + 1 + rpick(r, 7);
    h->mem = malloc(h->total * sizeof(float));
    h->init = malloc(h->total * sizeof(float));
    h->writable = calloc(h->total, 1);
    for (size_t i = 0; i < h->total; ++i) h->init[i] = bg_nan ? NAN : runi(r, -1, 1);
    DESC(" %s=host(%zu, guards %zu + %zu)", name, n, h->lo, h->total - h->lo - n);
}

static float *ha_at(harr *h, size_t i) { return &h->init[h->lo + i]; } /* before the call */
static float *ha_data(harr *h) { return h->mem + h->lo; }              /* what the call gets */
static void ha_ready(harr *h) { memcpy(h->mem, h->init, h->total * sizeof(float)); }

static void ha_check_untouched(const harr *h, const char *name) {
    for (size_t i = 0; i < h->total; ++i)
        if (!h->writable[i] && memcmp(&h->mem[i], &h->init[i], sizeof(float)))
            FAIL("%s: element %lld changed from %g to %g: written outside the output", name,
                 (long long)i - (long long)h->lo, (double)h->init[i], (double)h->mem[i]);
}

static void ha_free(harr *h) {
    free(h->mem), free(h->init), free(h->writable);
    memset(h, 0, sizeof *h);
}

static tsr_status call_gemm_multi(tsr_device_group *group, const gemm_args *g, const float *a, const float *b,
                                  float *c) {
    tsr_matmul_desc d = gemm_desc(g);
    d.a.offset = d.b.offset = d.c.offset = 0; /* the arrays are passed at their offsets */
    return tsr_matmul_multi(group, &d, a, b, c);
}

/* One valid tsr_matmul_multi call on a group, one product or a batch: the arguments of
 * the single-device draws (every layout and transposition, k = 0, alpha = 0, leading dimensions and
 * strides above the minimum, stride 0 for A or B), host arrays with guards (the offsets drawn are
 * more leading guard), beta = 0 over NaN/Inf in C, NaN/Inf in A or B now and then. */
static void group_gemm_run(rng *r, group_draw *grp, bool batched) {
    gemm_args g;
    gemm_draw(r, &g, batched ? 2 : 0, !batched && rchance(r, 3) ? 200 : 64);
    g.api = batched ? 6 : 5;
    gemm_describe(&g);
    bool bg_nan = rchance(r, 2), inject = rchance(r, 5);
    DESC(" background=%s", bg_nan ? "NaN" : "random");
    harr A, B, C;
    ha_make(r, &A, g.a_off + (g.batch - 1) * g.a_stride + g.a_span, bg_nan, "a");
    ha_make(r, &B, g.b_off + (g.batch - 1) * g.b_stride + g.b_span, bg_nan, "b");
    ha_make(r, &C, g.c_off + (g.batch - 1) * g.c_stride + g.c_span, rchance(r, 2), "c");
    gemm_fill(r, &g, ha_at(&A, g.a_off), ha_at(&B, g.b_off), ha_at(&C, g.c_off), &C.writable[C.lo + g.c_off], NULL,
              inject);
    ha_ready(&A), ha_ready(&B), ha_ready(&C);
    trace();
    tsr_status st = call_gemm_multi(grp->group, &g, ha_data(&A) + g.a_off, ha_data(&B) + g.b_off, ha_data(&C) + g.c_off);
    if (st != TSR_SUCCESS) FAIL("refused a valid call: %s: %s", tsr_status_str(st), tsr_last_error());
    ha_check_untouched(&A, "a");
    ha_check_untouched(&B, "b");
    ha_check_untouched(&C, "c");
    gemm_check(&g, ha_at(&A, g.a_off), ha_at(&B, g.b_off), ha_at(&C, g.c_off), ha_data(&C) + g.c_off, NULL, 1e-5);
    /* a batch of one is one product: its units are rows of C (columns when column-major) */
    group_check_tiles(grp, batched && g.batch > 1 ? g.batch : g.layout == TSR_ROW_MAJOR ? g.m : g.n);
    ha_free(&A), ha_free(&B), ha_free(&C);
}

static void group_gemm_iteration(rng *r, bool batched) {
    group_draw grp;
    cur_desc[0] = 0;
    group_make(r, &grp);
    DESC(": ");
    group_gemm_run(r, &grp, batched);
    tsr_group_destroy(grp.group);
}

static void random_group_sgemm(void **state) {
    (void)state;
    FOR_ITERATIONS_N("random_group_sgemm", 2, 12, r) group_gemm_iteration(&r, false);
}

static void random_group_sgemm_strided_batched(void **state) {
    (void)state;
    FOR_ITERATIONS_N("random_group_sgemm_strided_batched", 2, 12, r) group_gemm_iteration(&r, true);
}

/* One valid tsr_attention_multi call: the single-device draws (fp32, no lse; up to 4 batch entries),
 * host arrays with guards, O poisoned. */
static void random_group_attention(void **state) {
    (void)state;
    FOR_ITERATIONS_N("random_group_attention", 2, 12, r) {
        group_draw grp;
        cur_desc[0] = 0;
        group_make(&r, &grp);
        DESC(": ");
        tsr_attention_desc d;
        int kvl[4];
        attention_draw(&r, &d, kvl, 4, "tsr_attention_multi");
        const size_t B = d.batch, H = d.heads, Lq = d.q_len, Lk = d.kv_len, D = d.head_dim;
        DESC(" offsets q=%zu k=%zu v=%zu o=%zu)", d.q_offset, d.k_offset, d.v_offset, d.o_offset);
        bool nan_bg = rchance(&r, 2), masked_nan = rchance(&r, 2);
        DESC(" masked_nan=%d background=%s", masked_nan, nan_bg ? "NaN" : "random");
        harr Q, K, V, O;
        ha_make(&r, &Q, d.q_offset + extent(d.q_strides, B, H, Lq, D), nan_bg, "q");
        ha_make(&r, &K, d.k_offset + extent(d.k_strides, B, H, Lk, D), nan_bg, "k");
        ha_make(&r, &V, d.v_offset + extent(d.v_strides, B, H, Lk, D), nan_bg, "v");
        ha_make(&r, &O, d.o_offset + extent(d.o_strides, B, H, Lq, D), rchance(&r, 2), "o");
        attention_fill(&r, &d, masked_nan, ha_at(&Q, d.q_offset), ha_at(&K, d.k_offset), ha_at(&V, d.v_offset),
                       ha_at(&O, d.o_offset), &O.writable[O.lo + d.o_offset]);
        ha_ready(&Q), ha_ready(&K), ha_ready(&V), ha_ready(&O);
        trace();
        tsr_status st = tsr_attention_multi(grp.group, &d, ha_data(&Q), ha_data(&K), ha_data(&V), ha_data(&O));
        if (st != TSR_SUCCESS) FAIL("refused a valid call: %s: %s", tsr_status_str(st), tsr_last_error());
        ha_check_untouched(&Q, "q");
        ha_check_untouched(&K, "k");
        ha_check_untouched(&V, "v");
        ha_check_untouched(&O, "o");
        attention_check(&d, ha_at(&Q, d.q_offset), ha_at(&K, d.k_offset), ha_at(&V, d.v_offset),
                        ha_data(&O) + d.o_offset, NULL, 1e-5);
        group_check_tiles(&grp, B * H);
        ha_free(&Q), ha_free(&K), ha_free(&V), ha_free(&O);
        tsr_group_destroy(grp.group);
    }
}

/* Invalid GEMM calls on a group: one perturbation of a valid call (k >= 1), refused with
 * TSR_ERR_INVALID_ARG and a message, every array untouched. */
static void group_gemm_invalid(rng *r, group_draw *grp, bool batched) {
    enum { M0, N0, BATCH0, LDA, LDB, LDC, NULL_A, NULL_B, NULL_C, C_ON_A, C_ON_B, C_STRIDE, LAYOUT, TRANS, NULL_GROUP,
           KINDS };
    static const char *kinds[] = {"m = 0",        "n = 0",        "batch_count = 0",
                                  "lda too small", "ldb too small", "ldc too small",
                                  "a NULL",       "b NULL",       "c NULL",
                                  "c inside a",   "c inside b",   "c_stride makes C's matrices overlap",
                                  "bad layout",   "bad transpose", "group NULL"};
    gemm_args g;
    do gemm_draw(r, &g, batched ? 2 : 0, 40);
    while (!g.k);
    g.api = batched ? 6 : 5;
    int kind = (int)rpick(r, KINDS);
    /* tsr_matmul_desc.batch 0 means one product (the header), so it is no invalid kind here */
    if (kind == BATCH0) kind = M0;
    if (kind == C_STRIDE && g.batch < 2) kind = LDC;
    if (g.alpha == 0.0f) g.alpha = 1.0f; /* A and B are read: C may share no memory with them */
    bool row = g.layout == TSR_ROW_MAJOR;
    size_t al, alen, bl, blen, cl, clen;
    stored(row, g.ta != TSR_NO_TRANS, g.m, g.k, &al, &alen);
    stored(row, g.tb != TSR_NO_TRANS, g.k, g.n, &bl, &blen);
    stored(row, false, g.m, g.n, &cl, &clen);
    /* a leading dimension one less than a row of 1 is 0, which the descriptor reads as "tight" */
    if ((kind == LDA && alen < 2) || (kind == LDB && blen < 2) || (kind == LDC && clen < 2)) kind = N0;
    DESC("[%s] ", kinds[kind]);
    gemm_describe(&g);
    size_t na = g.a_off + (g.batch - 1) * g.a_stride + g.a_span, nb = g.b_off + (g.batch - 1) * g.b_stride + g.b_span;
    size_t nc = g.c_off + (g.batch - 1) * g.c_stride + g.c_span;
    /* C placed inside A's (B's) data: that array holds all of C too, so even a wrongly accepted
     * call stays within memory */
    size_t c_at = kind == C_ON_A ? g.a_off + rpick(r, g.a_span) : kind == C_ON_B ? g.b_off + rpick(r, g.b_span) : 0;
    harr A, B, C;
    ha_make(r, &A, kind == C_ON_A && c_at + nc > na ? c_at + nc : na, false, "a");
    ha_make(r, &B, kind == C_ON_B && c_at + nc > nb ? c_at + nc : nb, false, "b");
    ha_make(r, &C, nc, rchance(r, 2), "c");
    ha_ready(&A), ha_ready(&B), ha_ready(&C);
    float *a = ha_data(&A) + g.a_off, *b = ha_data(&B) + g.b_off, *c = ha_data(&C) + g.c_off;
    tsr_device_group *group = grp->group;
    switch (kind) {
    case M0: g.m = 0; break;
    case N0: g.n = 0; break;
    case BATCH0: g.batch = 0; break;
    case LDA: g.lda = alen - 1; break;
    case LDB: g.ldb = blen - 1; break;
    case LDC: g.ldc = clen - 1; break;
    case NULL_A: a = NULL; break;
    case NULL_B: b = NULL; break;
    case NULL_C: c = NULL; break;
    case C_ON_A: c = ha_data(&A) + c_at; break;
    case C_ON_B: c = ha_data(&B) + c_at; break;
    case C_STRIDE: g.c_stride = rpick(r, g.c_span); break;
    /* 0 is no invalid layout or transpose: the descriptor reads it as row-major, not transposed */
    case LAYOUT: g.layout = rchance(r, 2) ? (tsr_layout)100 : (tsr_layout)(103 + rpick(r, 5)); break;
    case TRANS:
        if (rchance(r, 2)) g.ta = (tsr_transpose)(114 + rpick(r, 5));
        else g.tb = rchance(r, 2) ? (tsr_transpose)110 : (tsr_transpose)(114 + rpick(r, 5));
        break;
    default: group = NULL; break;
    }
    DESC(" -> layout=%d ta=%d tb=%d m=%zu n=%zu lda=%zu ldb=%zu ldc=%zu c_stride=%zu batch=%zu c at %s%zu",
         (int)g.layout, (int)g.ta, (int)g.tb, g.m, g.n, g.lda, g.ldb, g.ldc, g.c_stride, g.batch,
         kind == C_ON_A ? "a+" : kind == C_ON_B ? "b+" : "c+", kind == C_ON_A || kind == C_ON_B ? c_at : g.c_off);
    trace();
    tsr_status st = call_gemm_multi(group, &g, a, b, c);
    if (st != TSR_ERR_INVALID_ARG)
        FAIL("%s: %s (expected TSR_ERR_INVALID_ARG): %s", kinds[kind], tsr_status_str(st), tsr_last_error());
    if (!*tsr_last_error()) FAIL("%s: refused without a message", kinds[kind]);
    ha_check_untouched(&A, "a");
    ha_check_untouched(&B, "b");
    ha_check_untouched(&C, "c");
    ha_free(&A), ha_free(&B), ha_free(&C);
}

/* Invalid attention calls on a group: one perturbation of a valid call; the status the header gives
 * (TSR_ERR_UNSUPPORTED for lse, a 16-bit type, head_dim over 256; TSR_ERR_INVALID_ARG otherwise)
 * and a message, every array untouched. */
static void group_attention_invalid(rng *r, group_draw *grp) {
    enum { BATCH0, HEADS0, QLEN0, KVLEN0, DIM0, NULL_Q, NULL_K, NULL_V, NULL_O, O_ON_Q, O_ON_KV, O_ROWS, KV_LENGTHS,
           LSE, TYPE16, DIM_BIG, SCALE, NULL_DESC, NULL_GROUP, KINDS };
    static const char *kinds[] = {"batch = 0",     "heads = 0",          "q_len = 0",   "kv_len = 0",
                                  "head_dim = 0",  "q NULL",             "k NULL",      "v NULL",
                                  "o NULL",        "o inside q",         "o inside k or v", "o rows overlap",
                                  "kv_lengths out of range", "lse set", "a 16-bit type", "head_dim over 256",
                                  "scale not finite", "desc NULL",       "group NULL"};
    tsr_attention_desc d;
    int kvl[4];
    attention_draw(r, &d, kvl, 4, "tsr_attention_multi");
    DESC(" offsets q=%zu k=%zu v=%zu o=%zu)", d.q_offset, d.k_offset, d.v_offset, d.o_offset);
    const size_t B = d.batch, H = d.heads, Lq = d.q_len, Lk = d.kv_len, D = d.head_dim;
    int kind = (int)rpick(r, KINDS);
    if (kind == O_ROWS && B * H == 1 && (Lq == 1)) kind = KV_LENGTHS;
    DESC(" [%s]", kinds[kind]);
    size_t nq = d.q_offset + extent(d.q_strides, B, H, Lq, D), nk = d.k_offset + extent(d.k_strides, B, H, Lk, D);
    size_t nv = d.v_offset + extent(d.v_strides, B, H, Lk, D), no = d.o_offset + extent(d.o_strides, B, H, Lq, D);
    tsr_attention_desc bad = d;
    if (kind == DIM_BIG) { /* contiguous tensors of the larger rows, so even a wrong acceptance stays in memory */
        bad.head_dim = 257 + rpick(r, 100);
        memset(bad.q_strides, 0, sizeof bad.q_strides), memset(bad.k_strides, 0, sizeof bad.k_strides);
        memset(bad.v_strides, 0, sizeof bad.v_strides), memset(bad.o_strides, 0, sizeof bad.o_strides);
        nq = d.q_offset + B * H * Lq * bad.head_dim, nk = d.k_offset + B * H * Lk * bad.head_dim;
        nv = d.v_offset + B * H * Lk * bad.head_dim, no = d.o_offset + B * H * Lq * bad.head_dim;
    }
    bool on_k = rchance(r, 2);
    size_t o_at = kind == O_ON_Q ? rpick(r, nq) : kind == O_ON_KV ? rpick(r, on_k ? nk : nv) : 0;
    harr Q, K, V, O;
    ha_make(r, &Q, kind == O_ON_Q && o_at + no > nq ? o_at + no : nq, false, "q");
    ha_make(r, &K, kind == O_ON_KV && on_k && o_at + no > nk ? o_at + no : nk, false, "k");
    ha_make(r, &V, kind == O_ON_KV && !on_k && o_at + no > nv ? o_at + no : nv, false, "v");
    ha_make(r, &O, no, rchance(r, 2), "o");
    ha_ready(&Q), ha_ready(&K), ha_ready(&V), ha_ready(&O);
    const float *q = ha_data(&Q), *k = ha_data(&K), *v = ha_data(&V);
    float *o = ha_data(&O);
    tsr_device_group *group = grp->group;
    const tsr_attention_desc *desc = &bad;
    cl_mem lse = NULL;
    tsr_status expected = TSR_ERR_INVALID_ARG;
    switch (kind) {
    case BATCH0: bad.batch = 0; break;
    case HEADS0: bad.heads = 0; break;
    case QLEN0: bad.q_len = 0; break;
    case KVLEN0: bad.kv_len = 0, bad.kv_lengths = NULL; break;
    case DIM0: bad.head_dim = 0; break;
    case NULL_Q: q = NULL; break;
    case NULL_K: k = NULL; break;
    case NULL_V: v = NULL; break;
    case NULL_O: o = NULL; break;
    case O_ON_Q: o = ha_data(&Q) + o_at, bad.o_offset = 0; break;
    case O_ON_KV: o = (on_k ? ha_data(&K) : ha_data(&V)) + o_at, bad.o_offset = 0; break;
    case O_ROWS: /* every head's rows on the same elements, or rows closer than head_dim */
        if (B * H > 1) bad.o_strides[0] = 0, bad.o_strides[1] = 0, bad.o_strides[2] = D + rpick(r, 3);
        else bad.o_strides[0] = bad.o_strides[1] = Lq * D, bad.o_strides[2] = D - 1;
        break;
    case KV_LENGTHS: {
        size_t b = rpick(r, B);
        kvl[b] = rchance(r, 2) ? -1 - (int)rpick(r, 3) : (int)(Lk + 1 + rpick(r, 3));
        bad.kv_lengths = kvl;
        break;
    }
    case LSE:
        lse = th_buffer(dev, B * H * Lq);
        bad.lse = lse, expected = TSR_ERR_UNSUPPORTED;
        break;
    case TYPE16: {
        tsr_dtype t = rchance(r, 2) ? TSR_F16 : TSR_BF16;
        switch (rpick(r, 4)) {
        case 0: bad.q_type = t; break;
        case 1: bad.k_type = t; break;
        case 2: bad.v_type = t; break;
        default: bad.o_type = t; break;
        }
        expected = TSR_ERR_UNSUPPORTED;
        break;
    }
    case DIM_BIG: expected = TSR_ERR_UNSUPPORTED; break;
    case SCALE: bad.scale = rchance(r, 2) ? NAN : rchance(r, 2) ? INFINITY : -INFINITY; break;
    case NULL_DESC: desc = NULL; break;
    default: group = NULL; break;
    }
    DESC(" -> B=%zu H=%zu Lq=%zu Lk=%zu D=%zu o_strides={%zu,%zu,%zu} scale=%g types %s %s %s %s o at %zu",
         bad.batch, bad.heads, bad.q_len, bad.kv_len, bad.head_dim, bad.o_strides[0], bad.o_strides[1],
         bad.o_strides[2], (double)bad.scale, tsr_dtype_str(bad.q_type), tsr_dtype_str(bad.k_type),
         tsr_dtype_str(bad.v_type), tsr_dtype_str(bad.o_type), o_at);
    trace();
    tsr_status st = tsr_attention_multi(group, desc, q, k, v, o);
    if (st != expected)
        FAIL("%s: %s (expected %s): %s", kinds[kind], tsr_status_str(st), tsr_status_str(expected), tsr_last_error());
    if (!*tsr_last_error()) FAIL("%s: refused without a message", kinds[kind]);
    ha_check_untouched(&Q, "q");
    ha_check_untouched(&K, "k");
    ha_check_untouched(&V, "v");
    ha_check_untouched(&O, "o");
    if (lse) clReleaseMemObject(lse);
    ha_free(&Q), ha_free(&K), ha_free(&V), ha_free(&O);
}

/* Invalid weights and group creations: refused with TSR_ERR_INVALID_ARG and a message; a refused
 * tsr_group_set_weights keeps the weights in force (a valid GEMM follows and must split by them),
 * a refused tsr_group_create leaves *group NULL. */
static void group_setup_invalid(rng *r, group_draw *grp) {
    enum { ALL_ZERO, NEGATIVE, NOT_A_NUMBER, INFINITE, WEIGHTS_NULL_GROUP, CREATE_COUNT0, CREATE_NULL_MEMBER,
           CREATE_NULL_DEVICES, CREATE_NULL_OUT, KINDS };
    static const char *kinds[] = {"every weight 0", "a negative weight", "a NaN weight", "an infinite weight",
                                  "set_weights on a NULL group", "create with count 0",
                                  "create with a NULL member", "create with devices NULL", "create with group NULL"};
    int kind = (int)rpick(r, KINDS);
    DESC(" [%s]", kinds[kind]);
    tsr_status st;
    if (kind <= WEIGHTS_NULL_GROUP) {
        double w[3];
        size_t at = rpick(r, grp->count);
        for (size_t i = 0; i < grp->count; ++i) w[i] = kind == ALL_ZERO ? 0.0 : runi(r, 0.1f, 3.0f);
        if (kind == NEGATIVE) w[at] = -runi(r, 0.001f, 2.0f);
        if (kind == NOT_A_NUMBER) w[at] = NAN;
        if (kind == INFINITE) w[at] = INFINITY;
        DESC(" weights[%zu] = %g", at, w[at]);
        trace();
        st = tsr_group_set_weights(kind == WEIGHTS_NULL_GROUP ? NULL : grp->group, w);
    } else {
        tsr_device *members[2] = {dev, dev}; /* one NULL member, or members that are fine */
        if (kind == CREATE_NULL_MEMBER) members[rpick(r, 2)] = NULL;
        size_t count = kind == CREATE_COUNT0 ? 0 : 2;
        tsr_device_group *made = (tsr_device_group *)(uintptr_t)1; /* must come back NULL */
        trace();
        st = tsr_group_create(kind == CREATE_NULL_DEVICES ? NULL : members, count,
                              kind == CREATE_NULL_OUT ? NULL : &made);
        if (kind != CREATE_NULL_OUT && made) {
            if (st == TSR_SUCCESS) tsr_group_destroy(made);
            FAIL("%s: *group is %p after the call, not NULL", kinds[kind], (void *)made);
        }
    }
    if (st != TSR_ERR_INVALID_ARG)
        FAIL("%s: %s (expected TSR_ERR_INVALID_ARG): %s", kinds[kind], tsr_status_str(st), tsr_last_error());
    if (!*tsr_last_error()) FAIL("%s: refused without a message", kinds[kind]);
    if (kind <= INFINITE) { /* the weights in force are still the ones drawn */
        DESC(" then: ");
        group_gemm_run(r, grp, rchance(r, 2));
    }
}

/* One invalid call an iteration, on a fresh random group: a GEMM, a batched GEMM, an attention, or
 * the group's own setup calls. */
static void random_group_invalid(void **state) {
    (void)state;
    FOR_ITERATIONS_N("random_group_invalid", 4, 24, r) {
        group_draw grp;
        cur_desc[0] = 0;
        group_make(&r, &grp);
        DESC(": ");
        switch (rpick(&r, 4)) {
        case 0: group_gemm_invalid(&r, &grp, false); break;
        case 1: group_gemm_invalid(&r, &grp, true); break;
        case 2: group_attention_invalid(&r, &grp); break;
        default: group_setup_invalid(&r, &grp); break;
        }
        tsr_group_destroy(grp.group);
    }
}

int main(void) {
    const char *seed = getenv("TSR_TEST_SEED");
    if (!seed || !*seed) { /* a fixed default, so CI runs are reproducible; any seed by hand */
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", DEFAULT_SEED);
        setenv("TSR_TEST_SEED", buf, 1);
    }
    base_seed = strtoull(getenv("TSR_TEST_SEED"), NULL, 0);
    const struct CMUnitTest tests[] = {cmocka_unit_test(random_sgemm),
                                       cmocka_unit_test(random_sgemm_strided_batched),
                                       cmocka_unit_test(random_gemm_invalid),
                                       cmocka_unit_test(random_gelu),
                                       cmocka_unit_test(random_conv2d),
                                       cmocka_unit_test(random_attention),
                                       cmocka_unit_test(random_attention_unfused),
                                       cmocka_unit_test(random_overlapping_subbuffers),
                                       cmocka_unit_test(random_layernorm),
                                       cmocka_unit_test(random_embedding),
                                       cmocka_unit_test(random_gemm_typed),
                                       cmocka_unit_test(random_group_sgemm),
                                       cmocka_unit_test(random_group_sgemm_strided_batched),
                                       cmocka_unit_test(random_group_attention),
                                       cmocka_unit_test(random_group_invalid)};
    /* Oclgrind runs one kernel at a time, and a group launches from several threads (its assertion
     * in Context::notifyKernelBegin aborts): the four group tests, last in the list, are left out. */
    size_t count = sizeof tests / sizeof tests[0];
    if (th_oclgrind_mode()) {
        printf("# the device-group tests are left out under Oclgrind (it runs one kernel at a time)\n");
        count -= 4;
    }
    return th_mode_unavailable() ? th_skip_all(th_mode_unavailable())
                                 : th_run_group("tests", tests, count, setup, teardown);
}
