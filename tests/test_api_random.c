/* A seeded randomized differential test of the public API: tsr_sgemm(_ex),
 * tsr_sgemm_strided_batched(_ex), tsr_gelu (fused and unfused), tsr_conv2d, tsr_attention,
 * tsr_layernorm and tsr_embedding on random arguments, against a double-precision reference and,
 * where CLBlast has the same call, against CLBlast (results, and whether invalid argument sets are
 * refused).
 *
 * Every iteration draws: shapes (1, primes, tile edges 15/16/17, 31/32/33, 63/64/65), every
 * layout and transposition, leading dimensions and strides above the minimum, offsets,
 * plain buffers or sub-buffers (origins aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN) of exactly
 * the needed size or larger, batches (stride 0 for A or B), bias per column (shared or per
 * batch entry), every activation, beta = 0 over NaN, NaN/Inf inputs, NaN in every element an
 * op must not read (padding, masked keys), the NULL / device / in-order / out-of-order queue,
 * with or without an event. LayerNorm adds rows of any length (BERT's 384/768/1024 often), row
 * strides, the residual or none, in place on x or on the residual, eps from 1e-12 to 1 and fp32,
 * fp16 or bf16 storage for x, the residual and y, checked per element with the header's error
 * bound; the embedding gather adds optional position and token-type tables, position_start,
 * partial sequences, y's stride and type, and, one call in six, a bad id, type id or position
 * that must be refused naming it, with y untouched. 16-bit tensors are compared by their stored
 * bits. Outputs are poisoned first and every byte of every buffer outside what the op may write
 * is compared before and after.
 *
 * Seeds: $TSR_TEST_SEED (default: a fixed seed, so CI is reproducible); each iteration has its
 * own stream derived from the seed, the op and the iteration, so a failure prints its full
 * arguments and a replay line: TSR_TEST_SEED=S TSR_TEST_FILTER=op TSR_RANDOM_API_ITER=i.
 * $TSR_RANDOM_API_ITERS: iterations per op (default 40; the ASan and Oclgrind runs use fewer).
 * TSR_TEST_MODE=oclgrind: a handful of tiny cases (no CLBlast). */
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

static int iterations(int fallback_small) {
    const char *e = getenv("TSR_RANDOM_API_ITERS");
    if (e && *e) return atoi(e);
    return small_mode() ? fallback_small : 40;
}

/* Run body(iteration) for each iteration (or only $TSR_RANDOM_API_ITER). */
#define FOR_ITERATIONS(test_name, small_count, r)                                                             \
    cur_test = test_name;                                                                                     \
    const char *only_ = getenv("TSR_RANDOM_API_ITER");                                                        \
    int count_ = iterations(small_count);                                                                     \
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

static int teardown(void **state) {
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
    int api; /* 0 sgemm, 1 sgemm_ex, 2 strided_batched, 3 strided_batched_ex */
    tsr_layout layout;
    tsr_transpose ta, tb;
    size_t m, n, k, lda, ldb, ldc, a_off, b_off, c_off, a_stride, b_stride, c_stride, batch;
    size_t a_span, b_span, c_span;
    float alpha, beta;
    bool epi_null, bias;
    tsr_activation act;
    size_t bias_off, bias_stride;
} gemm_args;

static tsr_status call_gemm(const gemm_args *g, cl_mem a, cl_mem b, cl_mem c, cl_mem bias, cl_command_queue q,
                            cl_event *ev) {
    tsr_epilogue epi = {bias, g->bias_off, g->bias_stride, g->act};
    const tsr_epilogue *e = g->epi_null ? NULL : &epi;
    switch (g->api) {
    case 0:
        return tsr_sgemm(dev, g->layout, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, g->a_off, g->lda, b, g->b_off,
                         g->ldb, g->beta, c, g->c_off, g->ldc, q, ev);
    case 1:
        return tsr_sgemm_ex(dev, g->layout, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, g->a_off, g->lda, b, g->b_off,
                            g->ldb, g->beta, c, g->c_off, g->ldc, e, q, ev);
    case 2:
        return tsr_sgemm_strided_batched(dev, g->layout, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, g->a_off, g->lda,
                                         g->a_stride, b, g->b_off, g->ldb, g->b_stride, g->beta, c, g->c_off, g->ldc,
                                         g->c_stride, g->batch, q, ev);
    default:
        return tsr_sgemm_strided_batched_ex(dev, g->layout, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, g->a_off,
                                            g->lda, g->a_stride, b, g->b_off, g->ldb, g->b_stride, g->beta, c, g->c_off,
                                            g->ldc, g->c_stride, g->batch, e, q, ev);
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
    if (g->api == 1 || g->api == 3) {
        g->epi_null = rchance(r, 5);
        g->bias = !g->epi_null && rchance(r, 3) != 0;
        g->act = g->epi_null ? TSR_ACT_NONE : (tsr_activation)rpick(r, 4);
        g->bias_off = rpick(r, 6);
        g->bias_stride = g->api == 3 && !rchance(r, 3) ? g->n + rpick(r, 4) : 0;
    }
}

static void gemm_describe(const gemm_args *g) {
    static const char *apis[] = {"tsr_sgemm", "tsr_sgemm_ex", "tsr_sgemm_strided_batched", "tsr_sgemm_strided_batched_ex"};
    DESC("%s(%s, ta=%d, tb=%d, m=%zu, n=%zu, k=%zu, alpha=%g, a_off=%zu, lda=%zu, a_stride=%zu, b_off=%zu, ldb=%zu, "
         "b_stride=%zu, beta=%g, c_off=%zu, ldc=%zu, c_stride=%zu, batch=%zu, epilogue=%s bias=%d bias_off=%zu "
         "bias_stride=%zu act=%d)",
         apis[g->api], g->layout == TSR_ROW_MAJOR ? "row" : "col", (int)g->ta, (int)g->tb, g->m, g->n, g->k,
         (double)g->alpha, g->a_off, g->lda, g->a_stride, g->b_off, g->ldb, g->b_stride, (double)g->beta, g->c_off,
         g->ldc, g->c_stride, g->batch, g->epi_null ? "NULL" : "set", g->bias, g->bias_off, g->bias_stride,
         (int)g->act);
}

/* Mark an m x n window (or the used elements of a stored matrix) in a tbuf. */
static void mark_matrix(char *mask, size_t base, bool row_major, size_t rows, size_t cols, size_t ld) {
    for (size_t i = 0; i < rows; ++i)
        for (size_t j = 0; j < cols; ++j) mask[base + (row_major ? i * ld + j : j * ld + i)] = 1;
}

static void gemm_iteration(rng *r, int api, size_t max) {
    gemm_args g;
    gemm_draw(r, &g, api, max);
    cur_desc[0] = 0;
    gemm_describe(&g);
    bool row = g.layout == TSR_ROW_MAJOR, ta = g.ta != TSR_NO_TRANS, tb = g.tb != TSR_NO_TRANS;
    bool bg_nan = rchance(r, 2), inject = rchance(r, 5);
    DESC(" background=%s inject=%d", bg_nan ? "NaN" : "random", inject);
    tbuf A, B, C, Bias = {0};
    size_t na = g.a_off + (g.batch - 1) * g.a_stride + g.a_span, nb = g.b_off + (g.batch - 1) * g.b_stride + g.b_span;
    size_t nc = g.c_off + (g.batch - 1) * g.c_stride + g.c_span;
    tb_make(r, &A, na, bg_nan, "a");
    tb_make(r, &B, nb, bg_nan, "b");
    tb_make(r, &C, nc, rchance(r, 2), "c");
    if (g.bias) tb_make(r, &Bias, g.bias_off + (g.batch - 1) * g.bias_stride + g.n, bg_nan, "bias");
    qchoice qc = pick_queue(r, true);
    /* The elements each op reads get finite values (a few specials when injecting). */
    size_t al, alen, bl, blen;
    stored(row, ta, g.m, g.k, &al, &alen);
    stored(row, tb, g.k, g.n, &bl, &blen);
    for (size_t bi = 0; bi < g.batch; ++bi) {
        for (size_t l = 0; l < al; ++l)
            for (size_t e = 0; e < alen; ++e) *tb_at(&A, g.a_off + bi * g.a_stride + l * g.lda + e) = runi(r, -1, 1);
        for (size_t l = 0; l < bl; ++l)
            for (size_t e = 0; e < blen; ++e) *tb_at(&B, g.b_off + bi * g.b_stride + l * g.ldb + e) = runi(r, -1, 1);
        mark_matrix(C.writable, C.origin + g.c_off + bi * g.c_stride, row, g.m, g.n, g.ldc);
        for (size_t i = 0; i < g.m; ++i)
            for (size_t j = 0; j < g.n; ++j) {
                float *c = tb_at(&C, g.c_off + bi * g.c_stride + (row ? i * g.ldc + j : j * g.ldc + i));
                /* beta = 0: C's old contents (NaN, Inf) must not leak */
                *c = g.beta == 0.0f ? ((i + j) % 2 ? NAN : INFINITY) : runi(r, -1, 1);
            }
        for (size_t j = 0; g.bias && j < g.n; ++j) *tb_at(&Bias, g.bias_off + bi * g.bias_stride + j) = runi(r, -1, 1);
    }
    if (inject && g.k && g.alpha != 0.0f) {
        tbuf *t = rchance(r, 2) ? &A : &B;
        size_t lines = t == &A ? al : bl, len = t == &A ? alen : blen, ld = t == &A ? g.lda : g.ldb;
        size_t off = t == &A ? g.a_off : g.b_off, stride = t == &A ? g.a_stride : g.b_stride;
        size_t at = off + rpick(r, g.batch) * stride + rpick(r, lines) * ld + rpick(r, len);
        *tb_at(t, at) = special(r);
        DESC(" special %s at %zu = %g", t == &A ? "a" : "b", at, (double)*tb_at(t, at));
    }
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

    double *ref = malloc((g.c_span ? g.c_span : 1) * sizeof *ref);
    tsr_error_sum e = {0, 0};
    for (size_t bi = 0; bi < g.batch; ++bi) {
        size_t cb = C.origin + g.c_off + bi * g.c_stride;
        th_ref_sgemm(row, ta, tb, g.m, g.n, g.k, g.alpha, tb_at(&A, g.a_off + bi * g.a_stride), g.lda,
                     tb_at(&B, g.b_off + bi * g.b_stride), g.ldb, g.beta, &C.init[cb], ref, g.ldc);
        for (size_t i = 0; i < g.m; ++i)
            for (size_t j = 0; j < g.n; ++j) {
                size_t idx = row ? i * g.ldc + j : j * g.ldc + i;
                double v = ref[idx] + (g.bias ? *tb_at(&Bias, g.bias_off + bi * g.bias_stride + j) : 0.0);
                compare_value(&e, C.host[cb + idx], th_ref_activation((int)g.act, v), "c", cb + idx - C.origin);
            }
    }
    if (!(tsr_error_value(&e) <= 1e-5)) FAIL("relative error %.3e (tolerance 1e-5)", tsr_error_value(&e));

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
    free(ref);
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

/* Invalid argument sets: one perturbation of a valid call. tessera refuses it without writing
 * anything, and CLBlast refuses it too (k = 0, which tessera defines as C <- beta C and
 * CLBlast refuses, is the one documented difference). */
static void random_gemm_invalid(void **state) {
    (void)state;
    clblast_compared = 0;
    FOR_ITERATIONS("random_gemm_invalid", 2, r) {
        gemm_args g;
        int api = rchance(&r, 2) ? 0 : 2;
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
        int kind = (int)rpick(&r, 8);
        static const char *kinds[] = {"lda too small", "ldb too small", "ldc too small", "a buffer one float short",
                                      "b offset beyond the buffer", "c buffer one float short", "m or n = 0", "k = 0"};
        bool tessera_accepts = false;
        switch (kind) {
        case 0: if (alen < 2) { kind = 6; break; } g.lda = alen - 1; break;
        case 1: if (blen < 2) { kind = 6; break; } g.ldb = blen - 1; break;
        case 2: if (clen < 2) { kind = 6; break; } g.ldc = clen - 1; break;
        default: break;
        }
        if (kind == 6) { if (rchance(&r, 2)) g.m = 0; else g.n = 0; }
        if (kind == 7) g.k = 0, tessera_accepts = true;
        /* alpha = 0 reads neither A nor B, but their buffers must still hold the shapes given (as in CLBlast) */
        cur_desc[0] = 0;
        DESC("[%s] ", kinds[kind]);
        gemm_describe(&g);
        tbuf A, B, C;
        tb_make(&r, &A, na, false, "a");
        tb_make(&r, &B, nb, false, "b");
        tb_make(&r, &C, nc, false, "c");
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
        tsr_status st = call_gemm(&g, A.mem, B.mem, C.mem, NULL, NULL, NULL);
        if (tessera_accepts && st != TSR_SUCCESS) FAIL("tessera refused k = 0: %s", tsr_last_error());
        if (!tessera_accepts && st == TSR_SUCCESS) FAIL("tessera accepted an invalid call");
        if (!tessera_accepts && !*tsr_last_error()) FAIL("tessera refused without a message");
        clFinish(tsr_device_queue(dev));
        tb_download(&C);
        tb_check_untouched(&C, "c");
#ifdef TSR_HAVE_CLBLAST
        if (!small_mode()) {
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

typedef tsr_status (*gelu_fn)(tsr_device *, tsr_gelu_mode, cl_mem, size_t, cl_mem, size_t, size_t, cl_command_queue,
                              cl_event *);

static void random_gelu(void **state) {
    (void)state;
    FOR_ITERATIONS("random_gelu", 4, r) {
        size_t n = rchance(&r, 4) ? 1 + rpick(&r, small_mode() ? 300 : 20000) : rsize(&r, 65);
        tsr_gelu_mode mode = rchance(&r, 2) ? TSR_GELU_TANH : TSR_GELU_ERF;
        bool unfused = rchance(&r, 3), in_place = rchance(&r, 3);
        size_t x_off = rchance(&r, 2) ? 0 : rpick(&r, 50), y_off = in_place ? x_off : (rchance(&r, 2) ? 0 : rpick(&r, 50));
        cur_desc[0] = 0;
        DESC("%s(%s, x_off=%zu, y_off=%zu, n=%zu, in_place=%d)", unfused ? "tsr_gelu_unfused" : "tsr_gelu",
             mode == TSR_GELU_TANH ? "tanh" : "erf", x_off, y_off, n, in_place);
        tbuf X, Y;
        tb_make(&r, &X, x_off + n, rchance(&r, 2), "x");
        if (!in_place) tb_make(&r, &Y, y_off + n, rchance(&r, 2), "y");
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
        cl_event ev = NULL;
        trace();
        tsr_status st = (unfused ? tsr_gelu_unfused : tsr_gelu)(dev, mode, X.mem, x_off, out->mem, y_off, n, qc.q,
                                                                qc.event ? &ev : NULL);
        if (st != TSR_SUCCESS) FAIL("refused a valid call: %s: %s", tsr_status_str(st), tsr_last_error());
        finish(&qc, ev);
        tb_download(&X);
        tb_check_untouched(&X, "x");
        if (!in_place) tb_download(&Y), tb_check_untouched(&Y, "y");
        for (size_t i = 0; i < n; ++i) {
            double ref = th_ref_activation((int)mode, x[i]), got = out->host[out->origin + y_off + i];
            bool ok = isnan(ref) ? isnan(got) : got == ref || fabs(got - ref) <= 1e-6 * fmax(1.0, fabs((double)x[i]));
            if (!ok) FAIL("y[%zu] = GELU(%.9g) = %.9g, reference %.9g", i, (double)x[i], got, ref);
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
    tsr_conv2d_desc d = {.batch = c.N, .in_channels = c.C, .in_height = c.H, .in_width = c.W, .out_channels = c.K,
                         .kernel_h = c.R, .kernel_w = c.S, .stride_h = c.sh, .stride_w = c.sw, .pad_h = c.ph,
                         .pad_w = c.pw, .dilation_h = c.dh, .dilation_w = c.dw, .groups = c.G,
                         .activation = (tsr_activation)rpick(r, 4), .algo = algos[rpick(r, 4)]};
    d.x_offset = rchance(r, 2) ? 0 : rpick(r, 30), d.w_offset = rchance(r, 2) ? 0 : rpick(r, 30);
    d.y_offset = rchance(r, 2) ? 0 : rpick(r, 30), d.bias_offset = rpick(r, 10);
    bool bias = rchance(r, 3) != 0, own_ws = d.algo == TSR_CONV_IM2COL && rchance(r, 3);
    size_t nx = c.N * c.C * c.H * c.W, nw = c.K * (c.C / or1(c.G)) * c.R * c.S, ny = c.N * c.K * P * Q;
    cur_desc[0] = 0;
    DESC("tsr_conv2d(N=%zu C=%zu H=%zu W=%zu K=%zu R=%zu S=%zu stride=%zu,%zu pad=%zu,%zu dil=%zu,%zu groups=%zu act=%d "
         "algo=%d offsets x=%zu w=%zu bias=%zu y=%zu bias=%d own_workspace=%d)",
         c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, c.G, (int)d.activation, (int)d.algo,
         d.x_offset, d.w_offset, d.bias_offset, d.y_offset, bias, own_ws);
    bool inject = rchance(r, 6);
    tbuf X, Wt, Bs = {0}, Y;
    tb_make(r, &X, d.x_offset + nx, rchance(r, 2), "x");
    tb_make(r, &Wt, d.w_offset + nw, rchance(r, 2), "w");
    if (bias) tb_make(r, &Bs, d.bias_offset + c.K, rchance(r, 2), "bias");
    tb_make(r, &Y, d.y_offset + ny, rchance(r, 2), "y");
    qchoice qc = pick_queue(r, true);
    for (size_t i = 0; i < nx; ++i) *tb_at(&X, d.x_offset + i) = runi(r, -1, 1);
    for (size_t i = 0; i < nw; ++i) *tb_at(&Wt, d.w_offset + i) = runi(r, -1, 1);
    for (size_t i = 0; bias && i < c.K; ++i) *tb_at(&Bs, d.bias_offset + i) = runi(r, -1, 1);
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
            tsr_status st = tsr_conv2d(dev, &d, sx, Wt.mem, bias ? Bs.mem : NULL, sy, NULL, NULL);
            clFinish(tsr_device_queue(dev));
            if (st == TSR_SUCCESS) FAIL("tsr_conv2d accepted x and y sub-buffers of one parent that overlap");
        }
        clReleaseMemObject(sx), clReleaseMemObject(sy), clReleaseMemObject(parent);
    } else {
        cl_event ev = NULL;
        trace();
        tsr_status st = tsr_conv2d(dev, &d, X.mem, Wt.mem, bias ? Bs.mem : NULL, Y.mem, qc.q, qc.event ? &ev : NULL);
        if (st != TSR_SUCCESS) FAIL("refused a valid call: %s: %s", tsr_status_str(st), tsr_last_error());
        finish(&qc, ev);
        tb_download(&X), tb_download(&Wt), tb_download(&Y);
        tb_check_untouched(&X, "x");
        tb_check_untouched(&Wt, "w");
        tb_check_untouched(&Y, "y");
        if (bias) tb_download(&Bs), tb_check_untouched(&Bs, "bias");
        double *ref = malloc(ny * sizeof *ref);
        conv_ref(&c, tb_at(&X, d.x_offset), tb_at(&Wt, d.w_offset), bias ? tb_at(&Bs, d.bias_offset) : NULL,
                 (int)d.activation, P, Q, ref);
        tsr_error_sum e = {0, 0};
        for (size_t i = 0; i < ny; ++i) compare_value(&e, Y.host[Y.origin + d.y_offset + i], ref[i], "y", i);
        if (!(tsr_error_value(&e) <= 1e-5)) FAIL("relative error %.3e (tolerance 1e-5)", tsr_error_value(&e));
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

/* One random attention call through fn; `stress_unfused` draws the cases the unfused path
 * mishandled (L = 1 strides, NaN in masked rows, kv_lengths 0, out-of-order queue) more often. */
static void attention_iteration(rng *r, attention_fn fn, const char *fn_name) {
    static const size_t lens[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 65};
    static const size_t dims[] = {1, 2, 3, 8, 16, 17, 32, 64, 80, 128};
    size_t B = 1 + rpick(r, 2), H = 1 + rpick(r, 3);
    size_t Lq = lens[rpick(r, small_mode() ? 5 : 11)], Lk = lens[rpick(r, small_mode() ? 5 : 11)];
    size_t D = dims[rpick(r, small_mode() ? 5 : (rchance(r, 8) ? 10 : 8))];
    tsr_attention_desc d = {.batch = B, .heads = H, .q_len = Lq, .kv_len = Lk, .head_dim = D};
    d.causal = rchance(r, 2);
    d.scale = rchance(r, 2) ? 0.0f : runi(r, 0.05f, 1.0f);
    int kvl[2];
    bool use_kvl = rchance(r, 2);
    for (size_t b = 0; b < B; ++b) kvl[b] = rchance(r, 5) ? 0 : (int)rpick(r, Lk + 1);
    if (use_kvl) d.kv_lengths = kvl;
    cur_desc[0] = 0;
    DESC("%s(B=%zu H=%zu Lq=%zu Lk=%zu D=%zu causal=%d scale=%g kv_lengths=", fn_name, B, H, Lq, Lk, D, d.causal,
         (double)d.scale);
    if (use_kvl) for (size_t b = 0; b < B; ++b) DESC("%d%s", kvl[b], b + 1 < B ? "," : "");
    else DESC("NULL");
    draw_strides(r, H, Lq, D, d.q_strides, "q");
    draw_strides(r, H, Lk, D, d.k_strides, "k");
    draw_strides(r, H, Lk, D, d.v_strides, "v");
    draw_strides(r, H, Lq, D, d.o_strides, "o");
    d.q_offset = rpick(r, 9), d.k_offset = rpick(r, 9), d.v_offset = rpick(r, 9), d.o_offset = rpick(r, 9);
    bool lse = rchance(r, 2);
    d.lse_offset = lse ? rpick(r, 6) : 0;
    DESC(" offsets q=%zu k=%zu v=%zu o=%zu lse=%d lse_offset=%zu)", d.q_offset, d.k_offset, d.v_offset, d.o_offset, lse,
         d.lse_offset);
    tbuf Q, K, V, O, LS = {0};
    bool nan_bg = rchance(r, 2);
    tb_make(r, &Q, d.q_offset + extent(d.q_strides, B, H, Lq, D), nan_bg, "q");
    tb_make(r, &K, d.k_offset + extent(d.k_strides, B, H, Lk, D), nan_bg, "k");
    tb_make(r, &V, d.v_offset + extent(d.v_strides, B, H, Lk, D), nan_bg, "v");
    tb_make(r, &O, d.o_offset + extent(d.o_strides, B, H, Lq, D), rchance(r, 2), "o");
    if (lse) tb_make(r, &LS, d.lse_offset + B * H * Lq, rchance(r, 2), "lse"), d.lse = LS.mem;
    qchoice qc = pick_queue(r, true);
    bool masked_nan = rchance(r, 2); /* keys beyond kv_lengths hold NaN: the mask hides them */
    DESC(" masked_nan=%d background=%s", masked_nan, nan_bg ? "NaN" : "random");
    for (size_t b = 0; b < B; ++b) {
        size_t kv = use_kvl ? (size_t)kvl[b] : Lk;
        for (size_t h = 0; h < H; ++h) {
            for (size_t i = 0; i < Lq; ++i)
                for (size_t e = 0; e < D; ++e) {
                    *tb_at(&Q, d.q_offset + elem(d.q_strides, H, Lq, D, b, h, i) + e) = runi(r, -1.5f, 1.5f);
                    size_t o = O.origin + d.o_offset + elem(d.o_strides, H, Lq, D, b, h, i) + e;
                    O.init[o] = NAN, O.writable[o] = 1;
                }
            for (size_t j = 0; j < Lk; ++j)
                for (size_t e = 0; e < D; ++e) {
                    bool hidden = masked_nan && j >= kv;
                    *tb_at(&K, d.k_offset + elem(d.k_strides, H, Lk, D, b, h, j) + e) = hidden ? NAN : runi(r, -1.5f, 1.5f);
                    *tb_at(&V, d.v_offset + elem(d.v_strides, H, Lk, D, b, h, j) + e) = hidden ? NAN : runi(r, -1, 1);
                }
            for (size_t i = 0; lse && i < Lq; ++i) {
                size_t at = LS.origin + d.lse_offset + (b * H + h) * Lq + i;
                LS.init[at] = NAN, LS.writable[at] = 1;
            }
        }
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
    double scale = d.scale ? d.scale : 1.0 / sqrt((double)D);
    double *s = malloc(Lk * sizeof *s);
    tsr_error_sum e = {0, 0};
    for (size_t b = 0; b < B; ++b) {
        size_t kv = use_kvl ? (size_t)kvl[b] : Lk;
        for (size_t h = 0; h < H; ++h)
            for (size_t i = 0; i < Lq; ++i) {
                size_t limit = kv;
                if (d.causal) {
                    long long last = (long long)i + (long long)Lk - (long long)Lq;
                    limit = last < 0 ? 0 : (size_t)last + 1 < limit ? (size_t)last + 1 : limit;
                }
                const float *qi = tb_at(&Q, d.q_offset + elem(d.q_strides, H, Lq, D, b, h, i));
                const float *oi = &O.host[O.origin + d.o_offset + elem(d.o_strides, H, Lq, D, b, h, i)];
                double m = -INFINITY, sum = 0;
                for (size_t j = 0; j < limit; ++j) {
                    const float *kj = tb_at(&K, d.k_offset + elem(d.k_strides, H, Lk, D, b, h, j));
                    double dot = 0;
                    for (size_t x = 0; x < D; ++x) dot += (double)qi[x] * kj[x];
                    s[j] = dot * scale;
                    m = fmax(m, s[j]);
                }
                for (size_t j = 0; j < limit; ++j) sum += (s[j] = exp(s[j] - m));
                for (size_t x = 0; x < D; ++x) {
                    double ref = 0;
                    for (size_t j = 0; j < limit; ++j)
                        ref += s[j] * *tb_at(&V, d.v_offset + elem(d.v_strides, H, Lk, D, b, h, j) + x);
                    compare_value(&e, oi[x], limit ? ref / sum : 0.0, "o row", (b * H + h) * Lq + i);
                }
                if (lse) {
                    float got = LS.host[LS.origin + d.lse_offset + (b * H + h) * Lq + i];
                    double want = limit ? m + log(sum) : -INFINITY;
                    if (!(got == want || fabs(got - want) <= 1e-5 * fmax(1.0, fabs(want))))
                        FAIL("lse of row %zu/%zu/%zu = %.9g, reference %.9g", b, h, i, (double)got, want);
                }
            }
    }
    if (!(tsr_error_value(&e) <= 1e-5)) FAIL("relative error %.3e (tolerance 1e-5)", tsr_error_value(&e));
    free(s);
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
        tsr_status st = tsr_gelu(dev, TSR_GELU_TANH, sx, 0, sy, 0, n, NULL, NULL);
        clFinish(tsr_device_queue(dev));
        if (st == TSR_SUCCESS) FAIL("tsr_gelu accepted x and y sub-buffers of one parent that overlap");
        st = tsr_gelu(dev, TSR_GELU_ERF, parent, 0, sy, 0, n, NULL, NULL); /* the parent itself and a sub-buffer */
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

static const tsr_dtype storage_types[] = {TSR_F32, TSR_F16, TSR_BF16};

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
        d.residual_type = (tsr_dtype)(3 + rpick(r, 5));
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
                                       cmocka_unit_test(random_embedding)};
    return TH_RUN_GROUP(tests, setup, teardown);
}
