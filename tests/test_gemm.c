/* SGEMM and strided-batched SGEMM against a double-precision reference:
 * every layout x transpose combination, odd sizes, padding, offsets, alpha/beta
 * edge cases, batches, guard zones around C, and every invalid argument; tsr_matmul with
 * every combination of fp32/fp16/bf16 storage for A, B and C, its descriptor's defaults and rules,
 * and its plans (reuse, lifetime, concurrent executes).
 * TSR_TEST_MODE=oclgrind runs a small subset (for `oclgrind --data-races --uninitialized`). */
#include "harness.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TSR_HAVE_CLBLAST
#include <clblast_c.h>
#endif

#define dev th_dev /* the group's device (harness) */

static bool small_mode(void) { return th_small_mode(); }
/* The sweeps over configurations and type sets: every member in every tier; the default tier gives
 * each member fewer draws, rotating the case kinds across members so every kind still runs
 * (TSR_TEST_LONG=1: every member sees every kind). */
static bool long_mode(void) { return th_long_mode(); }
/* Case kind `j` of `per` drawn for member `c` of a sweep whose members take `kinds` kinds each. */
static int rotated_kind(size_t c, int j, int per, int kinds) { return (int)(((size_t)per * c + (size_t)j) % (size_t)kinds); }
/* The sanitizer tier (th_sanitizer_tier: the ASan+UBSan build) runs half of a sweep's default
 * draws: draw j of member c when j and c / 2 agree in parity. The two sweeps below still see
 * every kind (configurations: 6 over 11 members; GPU kernel: 12 over 8; the types sweep takes one
 * draw per member in both builds), and
 * each member's kinds are among the plain build's, whose compiled programs the device's cache
 * then holds. */
static bool sanitizer_skips(size_t c, int j) { return th_sanitizer_tier() && (size_t)j % 2 != c / 2 % 2; }

/* The configuration override the cases run under (NULL: none), named in verbose output. */
static const char *gemm_override;

static void set_gemm_override(const char *config) {
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", config));
    gemm_override = config;
}

/* set_gemm_override for a configurations test: false when rusticl mode passes it over. */
static bool try_gemm_override(const char *config) {
    if (!th_try_override(dev, "gemm", config)) return false;
    gemm_override = config;
    return true;
}

typedef struct gemm_case {
    int row_major, ta, tb;
    size_t m, n, k;
    size_t lda_pad, ldb_pad, ldc_pad; /* added to the minimum leading dimension */
    size_t a_off, b_off, c_off;
    float alpha, beta;
    size_t batch;
    size_t a_gap, b_gap, c_gap;       /* added to each matrix's span to get its stride */
    bool a_shared;                    /* a_stride = 0: one A for the whole batch */
    /* epilogue: act(... + bias[j]); bias per batch entry (stride n + bias_gap) or shared */
    tsr_activation act;
    bool bias, bias_shared;
    size_t bias_off, bias_gap;
    /* storage types (zero: fp32, through the tsr_sgemm shims unless an epilogue; otherwise through tsr_matmul) */
    tsr_dtype at, bt, ct;
    /* the epilogue's scale (per column, its stride and sharing as the bias's) and residual (res 0:
     * none, 1: a matrix of its own in C's layout, type rt, at r_off; 2: C itself) */
    bool scale;
    size_t scale_off;
    int res;
    tsr_dtype rt;
    size_t r_off;
} gemm_case;

static bool typed_case(const gemm_case *g) { return g->at != TSR_F32 || g->bt != TSR_F32 || g->ct != TSR_F32; }

/* The bound a case is held to: the fp32 tolerance, or for 16-bit storage the rounding of C plus
 * fp32 accumulation over K (tsr_dtype_error_bound; the reference is computed from the inputs as
 * rounded to their types, so their own rounding is not part of the error). */
static double case_tolerance(const gemm_case *g) {
    double bound = tsr_dtype_error_bound(g->ct, (double)(g->k ? g->k : 1));
    return bound > 1e-5 ? bound : 1e-5;
}

/* Stored shape of op(X) (rows x cols of the logical matrix) under a layout: lines, line length. */
static void stored(int row_major, int trans, size_t rows, size_t cols, size_t *lines, size_t *len) {
    bool by_rows = row_major != trans;
    *lines = by_rows ? rows : cols;
    *len = by_rows ? cols : rows;
}

/* Run one case; returns the worst relative error over the batch and checks guard zones. */
static double run_case(const gemm_case *g) {
    size_t a_lines, a_len, b_lines, b_len, c_lines, c_len;
    stored(g->row_major, g->ta, g->m, g->k, &a_lines, &a_len);
    stored(g->row_major, g->tb, g->k, g->n, &b_lines, &b_len);
    stored(g->row_major, 0, g->m, g->n, &c_lines, &c_len);
    size_t lda = (a_len ? a_len : 1) + g->lda_pad, ldb = (b_len ? b_len : 1) + g->ldb_pad, ldc = c_len + g->ldc_pad;
    size_t a_span = a_lines * lda, b_span = b_lines * ldb, c_span = c_lines * ldc;
    size_t a_stride = g->a_shared ? 0 : a_span + g->a_gap, b_stride = b_span + g->b_gap, c_stride = c_span + g->c_gap;
    size_t na = g->a_off + (g->batch - 1) * a_stride + a_span + 3; /* + a tail guard zone */
    size_t nb = g->b_off + (g->batch - 1) * b_stride + b_span + 3;
    size_t nc = g->c_off + (g->batch - 1) * c_stride + c_span + 5;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c0 = malloc(nc * sizeof *c0),
          *c = malloc(nc * sizeof *c);
    double *ref = malloc(c_span * sizeof *ref);
    /* inputs rounded to their types: the reference sees exactly what the device reads */
    th_fill_uniform_typed(g->at, a, na, -1, 1);
    th_fill_uniform_typed(g->bt, b, nb, -1, 1);
    th_fill_uniform_typed(g->ct, c0, nc, -1, 1);
    if (g->beta == 0.0f && g->res != 2) /* C's old contents must not leak into the result, not even NaN */
        for (size_t i = 0; i < nc; ++i) c0[i] = (i % 3 == 0) ? NAN : INFINITY;
    cl_mem da = th_buffer_from_typed(dev, g->at, a, na), db = th_buffer_from_typed(dev, g->bt, b, nb),
           dc = th_buffer_from_typed(dev, g->ct, c0, nc);
    th_read_typed(dev, g->ct, dc, c0, nc); /* C as stored (NaN as its type keeps it), for the guard zones */
    if (getenv("TSR_TEST_VERBOSE"))
        fprintf(stderr,
                "# case %s ta=%d tb=%d %zux%zux%zu batch %zu pads %zu/%zu/%zu offs %zu/%zu/%zu beta %g types "
                "%s/%s/%s [%s]\n",
                g->row_major ? "row" : "col", g->ta, g->tb, g->m, g->n, g->k, g->batch, g->lda_pad, g->ldb_pad,
                g->ldc_pad, g->a_off, g->b_off, g->c_off, g->beta, tsr_dtype_str(g->at), tsr_dtype_str(g->bt),
                tsr_dtype_str(g->ct), gemm_override ? gemm_override : "default");
    size_t bias_stride = g->bias_shared ? 0 : g->n + g->bias_gap;
    size_t nbias = g->bias_off + (g->batch - 1) * bias_stride + g->n;
    float *bias = malloc(nbias * sizeof *bias);
    th_fill_uniform(bias, nbias, -1, 1);
    cl_mem dbias = g->bias ? th_buffer_from(dev, bias, nbias) : NULL;
    size_t nscale = g->scale_off + (g->batch - 1) * bias_stride + g->n;
    float *scale = malloc(nscale * sizeof *scale);
    th_fill_uniform(scale, nscale, -2, 2);
    cl_mem dscale = g->scale ? th_buffer_from(dev, scale, nscale) : NULL;
    /* the residual: C's shape, layout and strides; C's own values when it is C */
    size_t nres = g->r_off + (g->batch - 1) * c_stride + c_span;
    float *res = malloc(nres * sizeof *res);
    th_fill_uniform_typed(g->rt, res, nres, -1, 1);
    cl_mem dres = g->res == 1 ? th_buffer_from_typed(dev, g->rt, res, nres) : g->res == 2 ? dc : NULL;
    const float *res_base = g->res == 1 ? res + g->r_off : c0 + g->c_off;
    tsr_epilogue epi = {.bias = dbias,
                        .bias_offset = g->bias_off,
                        .bias_stride = bias_stride,
                        .activation = g->act,
                        .scale = dscale,
                        .scale_offset = g->scale_off,
                        .scale_stride = bias_stride,
                        .residual = dres,
                        .residual_offset = g->res == 2 ? g->c_off : g->r_off,
                        .residual_type = g->res == 2 ? g->ct : g->rt};
    bool with_epilogue = g->bias || g->act != TSR_ACT_NONE || g->scale || g->res;
    cl_event ev = NULL;
    tsr_layout layout = g->row_major ? TSR_ROW_MAJOR : TSR_COL_MAJOR;
    tsr_transpose ta = g->ta ? TSR_TRANS : TSR_NO_TRANS, tb = g->tb ? TSR_TRANS : TSR_NO_TRANS;
    /* fp32 without an epilogue: the CLBlast shim (every value literal); otherwise the descriptor, with
     * its zero defaults wherever they mean the same (row-major, no transpose, one product, packed) */
    tsr_status st;
    if (!typed_case(g) && !with_epilogue) {
        st = tsr_sgemm_strided_batched(dev, layout, ta, tb, g->m, g->n, g->k, g->alpha, da, g->a_off, lda, a_stride, db,
                                       g->b_off, ldb, b_stride, g->beta, dc, g->c_off, ldc, c_stride, g->batch, NULL,
                                       &ev);
    } else {
        tsr_matmul_desc desc = {.layout = g->row_major ? (tsr_layout)0 : layout,
                                .trans_a = g->ta ? ta : (tsr_transpose)0,
                                .trans_b = g->tb ? tb : (tsr_transpose)0,
                                .m = g->m,
                                .n = g->n,
                                .k = g->k,
                                .batch = g->batch == 1 ? 0 : g->batch,
                                .alpha = g->alpha,
                                .beta = g->beta,
                                .a = {g->at, g->a_off, g->lda_pad ? lda : 0, a_stride},
                                .b = {g->bt, g->b_off, g->ldb_pad ? ldb : 0, b_stride},
                                .c = {g->ct, g->c_off, g->ldc_pad ? ldc : 0, c_stride}};
        if (with_epilogue) desc.epilogue = epi;
        st = tsr_matmul(dev, &desc, da, db, dc, NULL, &ev);
    }
    if (st != TSR_SUCCESS)
        fail_msg("gemm %zux%zux%zu (%s/%s/%s): %s: %s", g->m, g->n, g->k, tsr_dtype_str(g->at), tsr_dtype_str(g->bt),
                 tsr_dtype_str(g->ct), tsr_status_str(st), tsr_last_error());
    assert_non_null(ev);
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    th_read_typed(dev, g->ct, dc, c, nc);

    /* Guard zones: nothing outside the batch's m x n windows may change. */
    char *inside = calloc(nc, 1);
    for (size_t bi = 0; bi < g->batch; ++bi)
        for (size_t i = 0; i < g->m; ++i)
            for (size_t j = 0; j < g->n; ++j)
                inside[g->c_off + bi * c_stride + (g->row_major ? i * ldc + j : j * ldc + i)] = 1;
    for (size_t i = 0; i < nc; ++i)
        if (!inside[i] && memcmp(&c[i], &c0[i], sizeof(float)) != 0)
            fail_msg("sgemm %zux%zux%zu wrote outside C at element %zu", g->m, g->n, g->k, i);

    double worst = 0;
    for (size_t bi = 0; bi < g->batch; ++bi) {
        const float *ab = a + g->a_off + bi * a_stride, *bb = b + g->b_off + bi * b_stride;
        const float *cin = c0 + g->c_off + bi * c_stride;
        /* alpha A B, then the epilogue in the header's order: scale, beta C, bias, residual, act */
        th_ref_sgemm(g->row_major, g->ta, g->tb, g->m, g->n, g->k, g->alpha, ab, lda, bb, ldb, 0.0, cin, ref, ldc);
        for (size_t i = 0; i < g->m; ++i)
            for (size_t j = 0; j < g->n; ++j) {
                size_t idx = g->row_major ? i * ldc + j : j * ldc + i;
                double v = ref[idx] * (g->scale ? scale[g->scale_off + bi * bias_stride + j] : 1.0);
                v += g->beta == 0.0f ? 0.0 : (double)g->beta * cin[idx];
                v += g->bias ? bias[g->bias_off + bi * bias_stride + j] : 0.0;
                v += g->res ? res_base[bi * c_stride + idx] : 0.0;
                ref[idx] = with_epilogue ? th_ref_activation(g->act, v) : v;
            }
        double e = th_rel_error_matrix(g->row_major, g->m, g->n, c + g->c_off + bi * c_stride, ref, ldc);
        if (e > worst || isnan(e)) worst = isnan(e) ? INFINITY : e;
    }
    clReleaseMemObject(da);
    clReleaseMemObject(db);
    clReleaseMemObject(dc);
    if (dbias) clReleaseMemObject(dbias);
    if (dscale) clReleaseMemObject(dscale);
    if (g->res == 1) clReleaseMemObject(dres);
    free(bias);
    free(scale);
    free(res);
    free(inside);
    free(a);
    free(b);
    free(c0);
    free(c);
    free(ref);
    return worst;
}

static void expect_accurate(const gemm_case *g) {
    double e = run_case(g), tolerance = case_tolerance(g);
    if (!(e <= tolerance))
        fail_msg("%s ta=%d tb=%d %zux%zux%zu batch %zu alpha %g beta %g bias %d act %d types %s/%s/%s: relative "
                 "error %.3e exceeds %.3e",
                 g->row_major ? "row" : "col", g->ta, g->tb, g->m, g->n, g->k, g->batch, g->alpha, g->beta, g->bias,
                 (int)g->act, tsr_dtype_str(g->at), tsr_dtype_str(g->bt), tsr_dtype_str(g->ct), e, tolerance);
}

static size_t rand_size(size_t max) { return 1 + th_rand() % max; }

static void all_layouts_and_transposes(void **state) {
    (void)state;
    static const size_t shapes[][3] = {{1, 1, 1}, {1, 37, 5}, {29, 1, 13}, {7, 11, 1}, {31, 37, 41},
                                       {64, 64, 64}, {97, 61, 83}, {128, 33, 200}, {6, 16, 300}};
    size_t nshapes = small_mode() ? 5 : sizeof shapes / sizeof shapes[0];
    for (int combo = 0; combo < 8; ++combo)
        for (size_t s = 0; s < nshapes; ++s) {
            /* default tier: the degenerate shapes on every combination, the rest on alternate ones */
            if (!long_mode() && s >= 4 && (s + (size_t)combo) % 2) continue;
            gemm_case g = {.row_major = combo & 1, .ta = (combo >> 1) & 1, .tb = (combo >> 2) & 1,
                           .m = shapes[s][0], .n = shapes[s][1], .k = shapes[s][2],
                           .alpha = 1.0f, .beta = 0.0f, .batch = 1};
            expect_accurate(&g);
        }
}

static void random_shapes_padding_offsets(void **state) {
    (void)state;
    int cases = small_mode() ? 8 : 48;
    for (int t = 0; t < cases; ++t) {
        size_t max = small_mode() ? 24 : 150;
        gemm_case g = {.row_major = (int)(th_rand() & 1), .ta = (int)(th_rand() & 1), .tb = (int)(th_rand() & 1),
                       .m = rand_size(max), .n = rand_size(max), .k = rand_size(max),
                       .lda_pad = th_rand() % 5, .ldb_pad = th_rand() % 5, .ldc_pad = th_rand() % 5,
                       .a_off = th_rand() % 9, .b_off = th_rand() % 9, .c_off = th_rand() % 9,
                       .alpha = (float)(th_rand() % 5) * 0.5f - 1.0f, .beta = (float)(th_rand() % 3) * 0.75f - 0.5f,
                       .batch = 1};
        if (g.alpha == 0.0f) g.alpha = 1.5f;
        expect_accurate(&g);
    }
}

static void alpha_beta_edge_cases(void **state) {
    (void)state;
    const float alphas[] = {1.0f, -1.0f, 0.5f, 0.0f, 2.0f};
    const float betas[] = {0.0f, 1.0f, -1.0f, 0.25f};
    for (size_t i = 0; i < 5; ++i)
        for (size_t j = 0; j < 4; ++j) {
            gemm_case g = {.row_major = 1, .m = 19, .n = 35, .k = 23, .alpha = alphas[i], .beta = betas[j], .batch = 1,
                           .ldc_pad = 2, .c_off = 1};
            expect_accurate(&g);
        }
}

/* beta = 0 overwrites NaN/Inf in C; alpha = 0 and k = 0 never read A and B. */
static void blas_semantics(void **state) {
    (void)state;
    enum { M = 13, N = 17, K = 9 };
    float a[M * K], b[K * N], c[M * N];
    for (int i = 0; i < M * K; ++i) a[i] = NAN;
    for (int i = 0; i < K * N; ++i) b[i] = INFINITY;
    th_fill_uniform(c, M * N, -1, 1);
    float c_before[M * N];
    memcpy(c_before, c, sizeof c);
    cl_mem da = th_buffer_from(dev, a, M * K), db = th_buffer_from(dev, b, K * N), dc = th_buffer_from(dev, c, M * N);
    /* alpha = 0: C <- beta*C, A and B (NaN, Inf) unread */
    TH_ASSERT_OK(tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, M, N, K, 0.0f, da, 0, K, db, 0, N, 2.0f, dc, 0,
                           N, NULL, NULL));
    th_read(dev, dc, c, M * N);
    for (int i = 0; i < M * N; ++i) assert_float_equal(c[i], 2.0f * c_before[i], 0.0f);
    /* k = 0: the same, with any alpha */
    TH_ASSERT_OK(tsr_sgemm(dev, TSR_COL_MAJOR, TSR_TRANS, TSR_NO_TRANS, M, N, 0, 3.0f, da, 0, 1, db, 0, 1, 0.5f, dc, 0,
                           M, NULL, NULL));
    th_read(dev, dc, c, M * N);
    for (int i = 0; i < M * N; ++i) assert_float_equal(c[i], c_before[i], 0.0f);
    /* k = 0, beta = 0: C <- 0 even over NaN */
    float nan_c[M * N];
    for (int i = 0; i < M * N; ++i) nan_c[i] = NAN;
    TH_ASSERT_OK(tsr_upload(dev, dc, nan_c, M * N));
    TH_ASSERT_OK(tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, M, N, 0, 1.0f, da, 0, 1, db, 0, N, 0.0f, dc, 0,
                           N, NULL, NULL));
    th_read(dev, dc, c, M * N);
    for (int i = 0; i < M * N; ++i) assert_true(c[i] == 0.0f);
    clReleaseMemObject(da);
    clReleaseMemObject(db);
    clReleaseMemObject(dc);
}

static void tall_and_skinny(void **state) {
    (void)state;
    static const size_t shapes[][3] = {{4096, 8, 4096}, {8, 4096, 4096}, {4096, 4096, 8}, {1, 4096, 1024}};
    for (int row = 0; row < 2; ++row)
        for (size_t s = 0; s < 4; ++s) {
            /* the sanitizer tier: each shape in one layout, each layout on two shapes (the double
             * reference of these 134M multiply-adds, instrumented, took most of the case's 14 s) */
            if (th_sanitizer_tier() && (size_t)row != s % 2) continue;
            gemm_case g = {.row_major = row, .m = shapes[s][0], .n = shapes[s][1], .k = shapes[s][2],
                           .alpha = 1.0f, .beta = 0.0f, .batch = 1, .tb = row};
            expect_accurate(&g);
        }
}

static void large_square(void **state) {
    (void)state;
    gemm_case g = {.row_major = 1, .m = 511, .n = 513, .k = 512, .alpha = 1.0f, .beta = 0.5f, .batch = 1};
    expect_accurate(&g);
    g.ta = 1;
    g.tb = 1;
    expect_accurate(&g);
}

static void batched(void **state) {
    (void)state;
    int cases = small_mode() ? 3 : 16;
    for (int t = 0; t < cases; ++t) {
        size_t max = small_mode() ? 12 : 70;
        gemm_case g = {.row_major = (int)(th_rand() & 1), .ta = (int)(th_rand() & 1), .tb = (int)(th_rand() & 1),
                       .m = rand_size(max), .n = rand_size(max), .k = rand_size(max), .ldc_pad = th_rand() % 3,
                       .a_off = th_rand() % 4, .c_off = th_rand() % 4, .alpha = 1.25f,
                       .beta = (t % 2) ? 0.0f : -0.5f, .batch = 1 + th_rand() % 7, .a_gap = th_rand() % 5,
                       .b_gap = th_rand() % 5, .c_gap = th_rand() % 5, .a_shared = (t % 3) == 0};
        expect_accurate(&g);
    }
    if (!small_mode()) {
        gemm_case g = {.row_major = 1, .m = 128, .n = 128, .k = 128, .alpha = 1.0f, .beta = 0.0f, .batch = 64};
        expect_accurate(&g);
    }
}

/* The epilogue act(alpha A B + beta C + bias[j]) on every layout and transposition, each
 * activation (GELU in both forms, named), with and without bias, odd sizes, offsets. */
static void epilogue_all_layouts_and_activations(void **state) {
    (void)state;
    static const tsr_activation acts[] = {TSR_ACT_NONE, TSR_ACT_RELU, TSR_ACT_GELU_TANH, TSR_ACT_GELU_ERF};
    size_t max = small_mode() ? 20 : 90;
    for (int combo = 0; combo < 8; ++combo)
        for (int a = 0; a < 4; ++a) {
            gemm_case g = {.row_major = combo & 1, .ta = (combo >> 1) & 1, .tb = (combo >> 2) & 1,
                           .m = rand_size(max), .n = rand_size(max), .k = rand_size(max),
                           .ldc_pad = th_rand() % 3, .c_off = th_rand() % 4, .a_off = th_rand() % 3,
                           .alpha = (combo & 1) ? -0.7f : 1.3f, .beta = (a & 1) ? 0.6f : 0.0f, .batch = 1,
                           .act = acts[a], .bias = a != 0 || combo % 2 == 0, .bias_off = th_rand() % 5};
            expect_accurate(&g);
        }
}

/* Batches with a bias per entry and one shared bias; k = 0 and alpha = 0 still apply the
 * epilogue to beta * C. */
static void epilogue_batched_and_degenerate(void **state) {
    (void)state;
    int cases = small_mode() ? 2 : 8;
    for (int t = 0; t < cases; ++t) {
        gemm_case g = {.row_major = (int)(th_rand() & 1), .ta = (int)(th_rand() & 1), .tb = (int)(th_rand() & 1),
                       .m = rand_size(40), .n = rand_size(40), .k = rand_size(40), .alpha = 1.0f,
                       .beta = (t % 2) ? 0.5f : 0.0f, .batch = 2 + th_rand() % 4, .c_gap = th_rand() % 3,
                       .act = (tsr_activation)(1 + t % 3), .bias = true, .bias_shared = t % 3 == 0,
                       .bias_gap = th_rand() % 4, .bias_off = th_rand() % 3};
        expect_accurate(&g);
    }
    gemm_case k0 = {.row_major = 1, .m = 9, .n = 21, .k = 0, .alpha = 1.0f, .beta = 0.75f, .batch = 1,
                    .act = TSR_ACT_GELU_ERF, .bias = true};
    expect_accurate(&k0);
    gemm_case a0 = {.row_major = 0, .m = 17, .n = 5, .k = 8, .alpha = 0.0f, .beta = -1.0f, .batch = 1,
                    .act = TSR_ACT_GELU_TANH, .bias = true};
    expect_accurate(&a0);
}

/* The epilogue's scale and residual: act(scale[j] alpha A B + beta C + bias[j] + R(i, j)) with R a
 * matrix of its own in each storage type, or C itself (beta + 1 inside; beta = 0 there reads C),
 * on every layout and transposition, batches with shared and per-entry scales, offsets; through
 * the default configuration, K blocking (the scale in every block, the rest once: C itself as the
 * residual must not be read after the first block wrote it), staged tiles and the GPU kernel. */
static void epilogue_scale_residual(void **state) {
    (void)state;
    static const char *const configs[] = {
        NULL,
        "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1 KC=128 NT=2",
        "MWI=2 VW=2 NVW=4 KU=2 WGM=4 WGN=8 KWG=8 SA=1 SB=1 PACKA=0 PACKB=0 KC=128",
        "KERNEL=1 MWI=4 VW=4 NVW=1 KU=2 WGM=8 WGN=8 KWG=8 PAD=0 DB=0",
    };
    static const tsr_activation acts[] = {TSR_ACT_NONE, TSR_ACT_RELU, TSR_ACT_GELU_TANH, TSR_ACT_GELU_ERF};
    int per = small_mode() ? 2 : 5;
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; ++c) {
        if (small_mode() && c % 2) continue;
        if (!configs[c]) set_gemm_override(NULL);
        else if (!try_gemm_override(configs[c])) continue;
        for (int j = 0; j < per; ++j) {
            int t = rotated_kind(c, j, per, 5);
            gemm_case g = {.row_major = (int)(th_rand() & 1), .ta = (int)(th_rand() & 1), .tb = (int)(th_rand() & 1),
                           .m = rand_size(40), .n = rand_size(40), .k = c == 1 ? 129 + th_rand() % 200 : rand_size(40),
                           .ldc_pad = th_rand() % 3, .c_off = th_rand() % 4, .alpha = (t & 1) ? -0.9f : 1.0f,
                           .beta = (t % 3 == 0) ? 0.0f : 0.5f, .batch = 1 + (size_t)(t >= 3) * (1 + th_rand() % 2),
                           .c_gap = th_rand() % 3, .act = acts[(t + (int)c) % 4], .bias = t != 2,
                           .bias_shared = t == 4, .bias_off = th_rand() % 3, .scale = t != 1,
                           .scale_off = th_rand() % 3, .res = t == 0 ? 2 : 1, .rt = (tsr_dtype)(t % 3),
                           .r_off = th_rand() % 4};
            if (t == 4) g.res = 2, g.ct = TSR_F16; /* a 16-bit C that is its own residual */
            expect_accurate(&g);
        }
    }
    set_gemm_override(NULL);
}

/* A bad scale or residual is refused, naming it, before anything is enqueued: C keeps its contents. */
static void epilogue_residual_invalid(void **state) {
    (void)state;
    enum { M = 8, N = 12, K = 4 };
    float a[M * K], b[K * N], c[M * N], after[M * N];
    th_fill_uniform(a, M * K, -1, 1);
    th_fill_uniform(b, K * N, -1, 1);
    th_fill_uniform(c, M * N, -1, 1);
    cl_mem da = th_buffer_from(dev, a, M * K), db = th_buffer_from(dev, b, K * N), dc = th_buffer_from(dev, c, M * N);
    cl_mem small = th_buffer(dev, M * N - 1), scale = th_buffer(dev, N), big = th_buffer(dev, 2 * M * N);
    const tsr_matmul_desc ok = {.m = M, .n = N, .k = K, .alpha = 1.0f};
    tsr_matmul_desc desc = ok;
    desc.epilogue = (tsr_epilogue){.scale = small, .scale_offset = M * N - N};
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "scale");
    desc.epilogue = (tsr_epilogue){.residual = small};
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "residual");
    desc.epilogue = (tsr_epilogue){.residual = big, .residual_type = (tsr_dtype)7};
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "residual_type");
    /* C one element into the residual: a partial overlap */
    desc.c.offset = 1;
    desc.epilogue = (tsr_epilogue){.residual = big};
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, big, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "residual");
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlap");
    /* the same bytes in another type (C f16, the residual bf16) */
    desc.c = (tsr_matrix){.dtype = TSR_F16};
    desc.epilogue = (tsr_epilogue){.residual = big, .residual_type = TSR_BF16};
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, big, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlap");
    /* the residual over A, and the scale over C */
    desc = ok;
    desc.epilogue = (tsr_epilogue){.residual = big, .residual_offset = 16};
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, big, db, dc, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "residual");
    desc.epilogue = (tsr_epilogue){.scale = dc, .scale_offset = 3};
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "scale");
    /* a plan checks its scale when made */
    desc.epilogue = (tsr_epilogue){.scale = scale, .scale_stride = N};
    desc.batch = 2, desc.c.batch_stride = M * N;
    tsr_matmul_plan *plan = NULL;
    TH_ASSERT_STATUS(tsr_matmul_plan_create(dev, &desc, &plan), TSR_ERR_BUFFER_TOO_SMALL);
    assert_null(plan);
    th_read(dev, dc, after, M * N);
    assert_memory_equal(after, c, sizeof c);
    /* a plan retains its scale and residual: released here, used after */
    desc = ok;
    cl_mem res = th_buffer_from(dev, c, M * N), sc = th_buffer_from(dev, b, N);
    desc.epilogue = (tsr_epilogue){.scale = sc, .residual = res, .activation = TSR_ACT_RELU};
    TH_ASSERT_OK(tsr_matmul_plan_create(dev, &desc, &plan));
    clReleaseMemObject(res), clReleaseMemObject(sc);
    TH_ASSERT_OK(tsr_matmul_execute(plan, da, db, dc, NULL, NULL));
    th_read(dev, dc, after, M * N);
    for (size_t i = 0; i < M; ++i)
        for (size_t j = 0; j < N; ++j) {
            double s = 0;
            for (size_t l = 0; l < K; ++l) s += (double)a[i * K + l] * b[l * N + j];
            double want = fmax(0.0, s * b[j] + c[i * N + j]);
            if (fabs(after[i * N + j] - want) > 1e-5 * (1 + fabs(want)))
                fail_msg("plan: C(%zu, %zu) = %g, want %g", i, j, after[i * N + j], want);
        }
    tsr_matmul_plan_destroy(plan);
    clReleaseMemObject(da), clReleaseMemObject(db), clReleaseMemObject(dc);
    clReleaseMemObject(small), clReleaseMemObject(scale), clReleaseMemObject(big);
}

/* A bad epilogue is rejected before anything is enqueued: C keeps its contents. */
static void epilogue_invalid(void **state) {
    (void)state;
    enum { M = 8, N = 12, K = 4 };
    float a[M * K], b[K * N], c[M * N], after[M * N];
    th_fill_uniform(a, M * K, -1, 1);
    th_fill_uniform(b, K * N, -1, 1);
    th_fill_uniform(c, M * N, -1, 1);
    cl_mem da = th_buffer_from(dev, a, M * K), db = th_buffer_from(dev, b, K * N), dc = th_buffer_from(dev, c, M * N);
    cl_mem small_bias = th_buffer(dev, N - 1);
    tsr_matmul_desc desc = {.m = M, .n = N, .k = K, .alpha = 1.0f, .epilogue = {.activation = (tsr_activation)9}};
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "activation");
    desc.epilogue = (tsr_epilogue){.bias = small_bias, .activation = TSR_ACT_RELU};
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "bias");
    desc.epilogue = (tsr_epilogue){.bias = small_bias, .bias_stride = N, .activation = TSR_ACT_NONE};
    desc.batch = 1;
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    /* a plan checks its epilogue when made */
    tsr_matmul_plan *plan = NULL;
    TH_ASSERT_STATUS(tsr_matmul_plan_create(dev, &desc, &plan), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "bias");
    assert_null(plan);
    th_read(dev, dc, after, M * N);
    assert_memory_equal(after, c, sizeof c);
    clReleaseMemObject(da);
    clReleaseMemObject(db);
    clReleaseMemObject(dc);
    clReleaseMemObject(small_bias);
}

/* Every configuration family member computes the same thing: tiles that do and do
 * not divide the sizes, vector widths, work-group shapes. */
static void configurations_part(size_t part, size_t parts) {
    static const char *const configs[] = {
        /* the CPU default (packed panels), then staged local-memory tiles (the GPU path) */
        "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1",
        "MWI=2 VW=2 NVW=4 KU=2 WGM=4 WGN=8 KWG=8 SA=1 SB=1 PACKA=0 PACKB=0",
        "MWI=4 VW=4 NVW=1 KU=4 WGM=8 WGN=16 KWG=16 SA=1 SB=0 PACKA=0 PACKB=0",
        "MWI=1 VW=16 NVW=1 KU=1 WGM=2 WGN=2 KWG=32 SA=0 SB=1 PACKA=0 PACKB=0",
        "MWI=1 VW=4 NVW=1 KU=1 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0",
        "MWI=4 VW=16 NVW=2 KU=8 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=1",
        "MWI=8 VW=8 NVW=2 KU=2 WGM=4 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=0",
        "MWI=6 VW=1 NVW=4 KU=4 WGM=1 WGN=2 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1",
        /* several column tiles per work-item, the last ones past the edge of N */
        "MWI=4 VW=8 NVW=1 KU=2 WGM=2 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=0 NT=4",
        "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=1 PK=64 NT=8",
        /* AVX-512's medium default (1x1 convolutions): A read in place, B packed, four column tiles */
        "MWI=8 VW=16 NVW=2 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=1 NT=4",
        /* AVX-512's widest tile (28 accumulators; refused, so skipped, where vectors are narrower) */
        "MWI=14 VW=16 NVW=2 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1 PK=64 NT=2",
    };
    size_t nconfigs = small_mode() ? 4 : sizeof configs / sizeof configs[0];
    for (size_t c = part; c < nconfigs; c += parts) {
        if (!try_gemm_override(configs[c])) continue;
        int per = small_mode() ? 2 : long_mode() ? 6 : 2;
        for (int j = 0; j < per; ++j) {
            if (sanitizer_skips(c, j)) continue;
            int t = small_mode() || long_mode() ? j : rotated_kind(c, j, per, 6);
            size_t max = small_mode() ? 20 : 90;
            gemm_case g = {.row_major = (int)(th_rand() & 1), .ta = t & 1, .tb = (t >> 1) & 1, .m = rand_size(max),
                           .n = rand_size(max), .k = rand_size(max), .alpha = 1.0f, .beta = 0.5f,
                           .batch = 1 + (size_t)(t == 5)};
            expect_accurate(&g);
        }
    }
    set_gemm_override(NULL);
}

/* The medium class as 1x1 convolutions call it, on the AVX-512 medium default (A read in place,
 * B packed, four column tiles): one image's GEMM with a 49-column edge and rows that are no
 * multiple of the tile (A's rows clamped), the epilogue, and batches sharing A, which the launch
 * packs once although the configuration reads A in place (gemm.c's packs_shared_a), with A
 * transposed too. Each shape is above 128^3 so that it is a medium problem. */
static void medium_conv_shapes(void **state) {
    (void)state;
    if (!try_gemm_override("MWI=8 VW=16 NVW=2 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=1 NT=4")) return;
    const gemm_case cases[] = {
        {.row_major = 1, .m = 262, .n = 49, .k = 200, .alpha = 1.0f, .batch = 1, .act = TSR_ACT_RELU, .bias = true},
        {.row_major = 1, .m = 70, .n = 200, .k = 160, .alpha = 1.0f, .beta = 0.5f, .batch = 3, .a_shared = true,
         .c_gap = 3},
        {.row_major = 1, .ta = 1, .m = 72, .n = 196, .k = 152, .alpha = 1.0f, .batch = 2, .a_shared = true,
         .act = TSR_ACT_RELU, .bias = true, .bias_shared = true},
        {.row_major = 0, .m = 196, .n = 72, .k = 152, .alpha = 1.0f, .batch = 2, .lda_pad = 1, .ldc_pad = 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) expect_accurate(&cases[i]);
    /* a plan of a batch sharing A reports what its launch runs: on PoCL's CPU device the shared A
     * is packed once for the batch, whatever PACKA the configuration says */
    tsr_matmul_desc d = {.m = 70, .n = 200, .k = 160, .batch = 3, .alpha = 1.0f,
                         .b = {.batch_stride = 160 * 200}, .c = {.batch_stride = 70 * 200}};
    tsr_matmul_plan *plan = NULL;
    TH_ASSERT_OK(tsr_matmul_plan_create(dev, &d, &plan));
    tsr_config_info info;
    TH_ASSERT_OK(tsr_matmul_plan_info(plan, &info));
    const bool packed = strstr(info.config, "PACKA=1") != NULL;
    if (packed != (strstr(info.origin, "packed once") != NULL)) fail_msg("plan: %s (%s)", info.config, info.origin);
    if (strstr(tsr_device_get_info(dev)->platform_name, "Portable Computing Language") && !packed)
        fail_msg("a batch sharing A on PoCL: %s (%s)", info.config, info.origin);
    tsr_matmul_plan_destroy(plan);
    d.batch = 1; /* one product: as configured */
    TH_ASSERT_OK(tsr_matmul_plan_create(dev, &d, &plan));
    TH_ASSERT_OK(tsr_matmul_plan_info(plan, &info));
    TH_ASSERT_CONTAINS(info.config, "PACKA=0");
    tsr_matmul_plan_destroy(plan);
    set_gemm_override(NULL);
}

/* The gpu implementation (cl/gemm_gpu.cl) forced on the device under test, GPU-shaped: 8x8 and
 * rectangular register tiles, groups whose staging loads do and do not divide evenly, every k-tile
 * size, with and without padding and double buffering. Each configuration sees every layout and
 * transposition, sizes below, at and across tile edges (so edge tiles are zero-filled and stores
 * guarded), odd leading dimensions and offsets (unaligned vector loads), batches with a shared A,
 * K = 0 and K shorter than a k-tile, alpha = 0, beta = 0 over a NaN C, the epilogue, and 16-bit
 * storage of each operand. */
static void gpu_kernel_part(size_t part, size_t parts) {
    static const char *const configs[] = {
        /* 128x128 tiles, double-buffered: KWG=8 so the small (Oclgrind) subset fits its 32 KiB */
        "KERNEL=1 MWI=8 VW=4 NVW=2 KU=4 WGM=16 WGN=16 KWG=8 PAD=1 DB=1",
        "KERNEL=1 MWI=4 VW=4 NVW=1 KU=2 WGM=8 WGN=8 KWG=8 PAD=0 DB=0",
        "KERNEL=1 MWI=2 VW=4 NVW=1 KU=4 WGM=8 WGN=32 KWG=16 PAD=1 DB=1",
        "KERNEL=1 MWI=4 VW=2 NVW=4 KU=8 WGM=32 WGN=4 KWG=32 PAD=0 DB=1",
        "KERNEL=1 MWI=1 VW=4 NVW=1 KU=1 WGM=4 WGN=4 KWG=8 PAD=1 DB=0",
        "KERNEL=1 MWI=8 VW=8 NVW=1 KU=4 WGM=4 WGN=8 KWG=16 PAD=1 DB=1",
        "KERNEL=1 MWI=4 VW=1 NVW=4 KU=4 WGM=8 WGN=16 KWG=8 PAD=1 DB=1",
        "KERNEL=1 MWI=8 VW=4 NVW=2 KU=4 WGM=16 WGN=16 KWG=16 PAD=1 DB=1", /* the H100's shape: 33 KiB */
    };
    static const tsr_activation acts[] = {TSR_ACT_NONE, TSR_ACT_RELU, TSR_ACT_GELU_TANH, TSR_ACT_GELU_ERF};
    size_t nconfigs = small_mode() ? 3 : sizeof configs / sizeof configs[0];
    /* Oclgrind and rusticl without TSR_TEST_LONG=1 (a compile per epilogue): two of the four kinds
     * per configuration, rotating */
    int cases = th_small_thinned() ? 2 : small_mode() ? 4 : long_mode() ? 12 : 4;
    for (size_t c = part; c < nconfigs; c += parts) {
        if (!try_gemm_override(configs[c])) continue;
        for (int j = 0; j < cases; ++j) {
            if (sanitizer_skips(c, j)) continue;
            int t = th_small_thinned() ? rotated_kind(c, j, cases, 4)
                    : small_mode() || long_mode() ? j : rotated_kind(c, j, cases, 12);
            size_t max = small_mode() ? 40 : 300;
            gemm_case g = {.row_major = (int)(th_rand() & 1), .ta = t & 1, .tb = (t >> 1) & 1, .m = rand_size(max),
                           .n = rand_size(max), .k = rand_size(max), .lda_pad = th_rand() % 3,
                           .ldb_pad = th_rand() % 3, .ldc_pad = th_rand() % 3, .a_off = th_rand() % 5,
                           .b_off = th_rand() % 5, .c_off = th_rand() % 5, .alpha = 1.25f,
                           .beta = (t % 3 == 0) ? 0.0f : -0.5f, .batch = 1 + (size_t)(t % 4 == 3) * (1 + th_rand() % 3),
                           .act = acts[t % 4], .bias = t % 3 == 1};
            if (!long_mode() && t == 9) g.batch = 2 + th_rand() % 2;
            g.a_shared = g.batch > 1 && (t % 8 == 7 || (!long_mode() && t == 9));
            if (t == 4) g.k = 0;                      /* C = beta C (+ epilogue) */
            if (t == 5) g.k = 1 + th_rand() % 7;      /* shorter than any k-tile */
            if (t == 6) g.alpha = 0.0f;               /* A and B not read */
            if (t >= 8) {                             /* 16-bit storage, one operand at a time or all */
                g.at = (t == 8 || t == 11) ? TSR_F16 : TSR_F32;
                g.bt = (t == 9 || t == 11) ? TSR_BF16 : TSR_F32;
                g.ct = (t == 10 || t == 11) ? TSR_F16 : TSR_F32;
            }
            expect_accurate(&g);
        }
    }
    set_gemm_override(NULL);
}

/* The smallm implementation (cl/gemm_smallm.cl) forced: few rows (M = 1..33, across its MWI
 * tiles), N off the vector width, K off the vector width (the scalar K tail of the B-transposed
 * form), odd leading dimensions and offsets, beta = 0 over a NaN C, the epilogue (bias, GELU,
 * scale, residual) and 16-bit storage of an operand, read in place.
 * Default tier (a few seconds: each kind is a program to compile): the first configuration the
 * device takes, two kinds, one per inner form (B transposed with A not: vectors along K, once
 * with K past 512; A transposed: vectors along N, on a batch sharing A and a bf16 B); K = 0, column-major calls and
 * the other transpositions and types in the long tier.
 * TSR_TEST_LONG=1: every configuration, every layout (row- and column-major calls) and
 * transposition, 12 kinds each. Oclgrind: the smaller tiles (the first two are past its
 * 128-float limit), three kinds on sizes up to 40. */
static void smallm_kernel(void **state) {
    (void)state;
    static const char *const configs[] = {
        "KERNEL=2 MWI=16 VW=16 NVW=1 KU=4", /* 16 x 1 K-vector blocks, reduced together (MiniLM at 16 tokens) */
        "KERNEL=2 MWI=8 VW=16 NVW=2 KU=4",  /* 8 x 2 blocks, two column tiles (both past Oclgrind's limit) */
        "KERNEL=2 MWI=6 VW=4 NVW=2 KU=2",   /* 2-row blocks, two vectors per row */
        "KERNEL=2 MWI=6 VW=8 NVW=1 KU=2",   /* VW 8: 2 x 4 blocks, reduced together */
        "KERNEL=2 MWI=1 VW=1 NVW=1 KU=1",   /* scalar */
    };
    static const tsr_activation acts[] = {TSR_ACT_NONE, TSR_ACT_RELU, TSR_ACT_GELU_TANH, TSR_ACT_GELU_ERF};
    /* kinds t (bit 0: ta, bit 1: tb; the rest below) of the default and Oclgrind tiers, row-major:
     * 2 K form (bias, scale, fp16 residual, GELU); 9 A transposed, bf16 B, a batch sharing A,
     * over a NaN C (ReLU). Oclgrind runs both in the N form (below). */
    static const int short_kinds[] = {2, 2, 9};
    int cases = long_mode() ? 12 : 3;
    int taken = 0;
    for (size_t c = small_mode() ? 2 : 0; c < sizeof configs / sizeof configs[0]; ++c) {
        if (!long_mode() && taken) break; /* one configuration outside the long tier */
        if (!try_gemm_override(configs[c])) continue;
        ++taken;
        for (int j = 0; j < cases; ++j) {
            int t = long_mode() ? j : short_kinds[j];
            size_t max = small_mode() ? 40 : 200;
            gemm_case g = {.row_major = long_mode() ? (int)(th_rand() & 1) : 1, .ta = t & 1, .tb = (t >> 1) & 1,
                           .m = 1 + th_rand() % 33, .n = rand_size(max), .k = rand_size(max),
                           .lda_pad = th_rand() % 3, .ldb_pad = th_rand() % 3, .ldc_pad = th_rand() % 3,
                           .a_off = th_rand() % 5, .b_off = th_rand() % 5, .c_off = th_rand() % 5, .alpha = 1.25f,
                           .beta = (t % 3 == 0) ? 0.0f : -0.5f, .batch = 1 + (size_t)(t % 4 == 3) * (1 + th_rand() % 3),
                           .act = acts[t % 4], .bias = t % 3 == 1 || t == 2};
            if (!long_mode() && t == 9) g.batch = 2 + th_rand() % 2;
            g.a_shared = g.batch > 1 && (t % 8 == 7 || (!long_mode() && t == 9));
            if (t == 4) g.k = 0;
            /* K past 512: the K form's tall blocks (16 rows of A) give way to 4-row ones there */
            if (!small_mode() && (long_mode() ? t == 10 : j == 1)) g.k = 513 + th_rand() % 300;
            if (t == 5 || (!long_mode() && t == 2)) g.scale = true, g.res = 1, g.rt = TSR_F16;
            /* Oclgrind's --uninitialized checker aborts (no report, exit 255) on the vectors-along-K
             * form (canonical B transposed, A not): under Oclgrind both operands go transposed,
             * which the vectors-along-N form runs; PoCL covers the K form. */
            if (small_mode() && (g.row_major ? g.tb && !g.ta : g.ta && !g.tb)) g.ta = g.tb = 1;
            if (t >= 8) {
                g.at = (t == 8 || t == 11) ? TSR_F16 : TSR_F32;
                g.bt = (t == 9 || t == 11) ? TSR_BF16 : TSR_F32;
                g.ct = (t == 10 || t == 11) ? TSR_F16 : TSR_F32;
            }
            expect_accurate(&g);
        }
    }
    assert_true(taken > 0); /* some configuration must run */
    set_gemm_override(NULL);
}

/* The epilogue's LayerNorm (tsr_epilogue.norm_gamma): s = act(alpha A B + beta C + bias + residual)
 * per row, then (s - mean) / sqrt(var + eps) * gamma + beta_n, against a double reference from the
 * same inputs, with C's old contents poisoned (beta 0, no residual C), guard zones around C's
 * window, the residual separate or C itself, offsets and padded rows. Forms: the smallm kernel's
 * fused epilogue (tiles that do and do not divide N; M past one row tile; rows near 1e19 and 1e-20,
 * whose squares overflow or underflow fp32 unscaled), and the LayerNorm launch after the GEMM (B
 * transposed: smallm's vectors-along-K form; a 16-bit C; the tiled kernel; K = 0). Each case runs
 * twice on the same inputs and must give the same bits (the fused form's row-tile counts are back
 * to zero after a launch), and once more from a graph replay. */
typedef struct norm_case {
    const char *config; /* NULL: the device's choice */
    size_t m, n, k, ldc_pad, c_off, g_off;
    int tb, res;        /* res 0: none, 1: a buffer, 2: C itself */
    bool no_bias;
    float alpha, beta, eps; /* eps 0: 1e-5 */
    tsr_activation act;
    tsr_dtype ct;
} norm_case;

static void run_norm_case(const norm_case *nc) {
    const size_t m = nc->m, n = nc->n, k = nc->k, ldc = n + nc->ldc_pad, lda = k ? k : 1, ldb = nc->tb ? lda : n;
    const size_t na = m * lda, nb = nc->tb ? n * lda : (k ? k : 1) * n, ncf = nc->c_off + (m - 1) * ldc + n + 5;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c0 = malloc(ncf * sizeof *c0),
          *c = malloc(ncf * sizeof *c), *again = malloc(ncf * sizeof *again), *res = malloc(ncf * sizeof *res);
    float *bias = malloc(n * sizeof *bias), *gb = malloc((nc->g_off + 2 * n) * sizeof *gb);
    double *ref = malloc(m * ldc * sizeof *ref);
    th_fill_uniform(a, na, -1, 1);
    th_fill_uniform(b, nb, -1, 1);
    th_fill_uniform_typed(nc->ct, c0, ncf, -1, 1);
    th_fill_uniform_typed(nc->ct, res, ncf, -1, 1);
    th_fill_uniform(bias, n, -1, 1);
    th_fill_uniform(gb, nc->g_off + 2 * n, -2, 2); /* gamma at g_off, beta after it */
    if (nc->beta == 0.0f && nc->res != 2)
        for (size_t i = 0; i < ncf; ++i) c0[i] = i % 3 ? NAN : INFINITY;
    cl_mem da = th_buffer_from(dev, a, na), db = th_buffer_from(dev, b, nb), dbias = th_buffer_from(dev, bias, n);
    cl_mem dgb = th_buffer_from(dev, gb, nc->g_off + 2 * n);
    cl_mem dc = th_buffer_from_typed(dev, nc->ct, c0, ncf), dres = th_buffer_from_typed(dev, nc->ct, res, ncf);
    th_read_typed(dev, nc->ct, dc, c0, ncf); /* as stored */
    const float *rbase = nc->res == 2 ? c0 + nc->c_off : res + nc->c_off;
    const float eps = nc->eps > 0.0f ? nc->eps : 1e-5f;
    tsr_matmul_desc desc = {.m = m, .n = n, .k = k, .alpha = nc->alpha, .beta = nc->beta,
                            .trans_b = nc->tb ? TSR_TRANS : TSR_NO_TRANS,
                            .c = {.dtype = nc->ct, .offset = nc->c_off, .ld = ldc},
                            .epilogue = {.bias = nc->no_bias ? NULL : dbias, .activation = nc->act,
                                         .residual = nc->res == 1 ? dres : nc->res == 2 ? dc : NULL,
                                         .residual_offset = nc->c_off, .residual_type = nc->ct,
                                         .norm_gamma = dgb, .norm_beta = dgb, .norm_gamma_offset = nc->g_off,
                                         .norm_beta_offset = nc->g_off + n, .norm_eps = eps}};
    if (nc->config) set_gemm_override(nc->config);
    if (getenv("TSR_TEST_VERBOSE"))
        fprintf(stderr, "# norm %zux%zux%zu tb %d res %d beta %g alpha %g act %d C %s [%s]\n", m, n, k, nc->tb, nc->res,
                nc->beta, nc->alpha, (int)nc->act, tsr_dtype_str(nc->ct), nc->config ? nc->config : "default");
    /* runs 1 and 2: the same inputs again, on the device's queue and on an out-of-order one (the
     * LayerNorm launch after the GEMM waits for it there): the same bits */
    cl_int err;
    cl_command_queue ooo = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev),
                                                CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    if (err != CL_SUCCESS) ooo = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev), 0, &err);
    assert_int_equal(err, CL_SUCCESS);
    for (int run = 0; run < 3; ++run) {
        if (run) {
            clReleaseMemObject(dc);
            dc = th_buffer_from_typed(dev, nc->ct, c0, ncf);
            if (nc->res == 2) desc.epilogue.residual = dc;
        }
        cl_event ev = NULL;
        TH_ASSERT_OK(tsr_matmul(dev, &desc, da, db, dc, run == 2 ? ooo : NULL, &ev));
        assert_non_null(ev);
        assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
        clReleaseEvent(ev);
        th_read_typed(dev, nc->ct, dc, run ? again : c, ncf);
        if (run && memcmp(c, again, ncf * sizeof *c) != 0)
            fail_msg("norm %zux%zux%zu: call %d (%s queue) differs from the first", m, n, k, run + 1,
                     run == 2 ? "out-of-order" : "the device's");
    }
    clReleaseCommandQueue(ooo);
    /* a graph of the call, replayed on fresh C */
    {
        clReleaseMemObject(dc);
        dc = th_buffer_from_typed(dev, nc->ct, c0, ncf);
        if (nc->res == 2) desc.epilogue.residual = dc;
        tsr_graph *graph = NULL;
        TH_ASSERT_OK(tsr_graph_begin(dev, NULL));
        TH_ASSERT_OK(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL));
        TH_ASSERT_OK(tsr_graph_end(dev, &graph));
        /* the same GEMM's launches where the smallm kernel normalises (PoCL's CPU device), else
         * one more (the LayerNorm): counted against a graph of the call without the LayerNorm, on a
         * scratch C (the configuration the device resolves may pack an operand first) */
        size_t launches = 0, plain_launches = 0;
        TH_ASSERT_OK(tsr_graph_info(graph, &launches, NULL));
        {
            cl_mem scratch = th_buffer_from_typed(dev, nc->ct, c0, ncf);
            tsr_matmul_desc plain = desc;
            plain.epilogue.norm_gamma = plain.epilogue.norm_beta = NULL;
            if (nc->res == 2) plain.epilogue.residual = scratch;
            tsr_graph *pg = NULL;
            TH_ASSERT_OK(tsr_graph_begin(dev, NULL));
            TH_ASSERT_OK(tsr_matmul(dev, &plain, da, db, scratch, NULL, NULL));
            TH_ASSERT_OK(tsr_graph_end(dev, &pg));
            TH_ASSERT_OK(tsr_graph_info(pg, &plain_launches, NULL));
            tsr_graph_destroy(pg);
            clReleaseMemObject(scratch);
        }
        const tsr_device_info *info = tsr_device_get_info(dev);
        const bool pocl = info->type == TSR_DEVICE_CPU && strstr(info->platform_name, "Portable Computing Language");
        const bool fused = nc->config && !nc->tb && nc->ct == TSR_F32 && k > 0 && pocl;
        if (launches != plain_launches + (fused ? 0u : 1u))
            fail_msg("norm %zux%zux%zu: %zu launches, %zu expected (the GEMM alone %zu%s)", m, n, k, launches,
                     plain_launches + (fused ? 0u : 1u), plain_launches, fused ? "" : ", then a LayerNorm");
        cl_mem fresh = th_buffer_from_typed(dev, nc->ct, c0, ncf); /* C's inputs again, into the recorded buffer */
        assert_int_equal(clEnqueueCopyBuffer(tsr_device_queue(dev), fresh, dc, 0, 0, ncf * tsr_dtype_size(nc->ct), 0,
                                             NULL, NULL),
                         CL_SUCCESS);
        clReleaseMemObject(fresh);
        cl_event ev = NULL;
        TH_ASSERT_OK(tsr_graph_launch(graph, NULL, &ev));
        assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
        clReleaseEvent(ev);
        tsr_graph_destroy(graph);
        th_read_typed(dev, nc->ct, dc, again, ncf);
        if (memcmp(c, again, ncf * sizeof *c) != 0) fail_msg("norm %zux%zux%zu: the graph's replay differs", m, n, k);
    }
    if (nc->config) set_gemm_override(NULL);
    /* guard zones */
    for (size_t i = 0; i < ncf; ++i) {
        bool inside = i >= nc->c_off && (i - nc->c_off) / ldc < m && (i - nc->c_off) % ldc < n;
        if (!inside && memcmp(&c[i], &c0[i], sizeof(float)) != 0)
            fail_msg("norm %zux%zux%zu wrote outside C at element %zu", m, n, k, i);
    }
    th_ref_sgemm(1, 0, nc->tb, m, n, k, nc->alpha, a, lda, b, ldb, 0.0, NULL, ref, ldc);
    const float *gamma = gb + nc->g_off, *beta_n = gb + nc->g_off + n;
    const double u = 1.0 / 16777216.0, tol = 64 * u * (8 + sqrt((double)k) + sqrt((double)n));
    for (size_t i = 0; i < m; ++i) {
        double *r = ref + i * ldc, mean = 0, var = 0, big = 0;
        for (size_t j = 0; j < n; ++j) {
            double v = r[j];
            if (nc->beta != 0.0f) v += (double)nc->beta * c0[nc->c_off + i * ldc + j];
            v += nc->no_bias ? 0.0 : bias[j];
            if (nc->res) v += rbase[i * ldc + j];
            r[j] = th_ref_activation(nc->act, v);
            mean += r[j];
            big = fmax(big, fabs(r[j]));
        }
        mean /= (double)n;
        for (size_t j = 0; j < n; ++j) var += (r[j] - mean) * (r[j] - mean);
        const double sd = sqrt(var / (double)n + (double)eps);
        for (size_t j = 0; j < n; ++j) {
            const double want = (r[j] - mean) / sd * gamma[j] + beta_n[j];
            const float got = c[nc->c_off + i * ldc + j];
            /* the GEMM's and the norm's roundings, relative to the row's scale (|gamma| max|s| / sd) */
            /* a 16-bit C: s is stored in C's type before the LayerNorm launch reads it, and y again */
            const double u16 = nc->ct == TSR_F16 ? 1.0 / 2048 : nc->ct == TSR_BF16 ? 1.0 / 256 : 0.0;
            const double bound = (tol + 2 * u16) * (fabs(gamma[j]) * (big / sd + 1) + fabs(beta_n[j]) + fabs(want));
            if (!(fabs(got - want) <= bound))
                fail_msg("norm %zux%zux%zu (tb %d res %d alpha %g, C %s, %s): C(%zu, %zu) = %.9g, want %.9g (bound %.3g)",
                         m, n, k, nc->tb, nc->res, nc->alpha, tsr_dtype_str(nc->ct),
                         nc->config ? nc->config : "default", i, j, got, want, bound);
        }
    }
    clReleaseMemObject(da), clReleaseMemObject(db), clReleaseMemObject(dbias), clReleaseMemObject(dgb);
    clReleaseMemObject(dc), clReleaseMemObject(dres);
    free(a), free(b), free(c0), free(c), free(again), free(res), free(bias), free(gb), free(ref);
}

static void epilogue_layernorm(void **state) {
    (void)state;
    static const char *const fused[] = {"KERNEL=2 MWI=8 VW=16 NVW=2 KU=4", "KERNEL=2 MWI=6 VW=4 NVW=2 KU=2",
                                        "KERNEL=2 MWI=1 VW=1 NVW=1 KU=1"};
    static const tsr_activation acts[] = {TSR_ACT_NONE, TSR_ACT_RELU, TSR_ACT_GELU_TANH, TSR_ACT_GELU_ERF};
    const size_t max = small_mode() ? 40 : 200;
    const int cases = small_mode() ? 6 : 12;
    for (int t = 0; t < cases; ++t) {
        const char *config = fused[t % 3];
        if (th_rusticl_mode() || small_mode()) config = t % 3 == 2 ? fused[2] : fused[1]; /* small tiles */
        norm_case nc = {.config = config, .m = 1 + th_rand() % 33, .n = 1 + th_rand() % max,
                        .k = 1 + th_rand() % max, .ldc_pad = th_rand() % 3, .c_off = th_rand() % 5,
                        .g_off = th_rand() % 4, .res = t % 3, .alpha = 1.0f, .beta = t % 4 == 1 ? -0.5f : 0.0f,
                        .act = acts[t % 4]};
        if (t == 0 && !small_mode()) nc.m = 16, nc.n = 384, nc.k = 384; /* MiniLM's Add & Norm */
        /* rows whose squares overflow (s near 1e19) or underflow (near 1e-20, eps 1e-30) fp32 unscaled */
        if (t == 3) nc.alpha = 1e18f;
        if (t == 4) nc.alpha = 1e-20f, nc.eps = 1e-30f, nc.act = TSR_ACT_NONE;
        if (t == 4 || t == 3) nc.res = 0, nc.beta = 0.0f, nc.no_bias = true;
        if (t == 5) nc.tb = 1;                                /* smallm's K form: a LayerNorm launch */
        if (t == 6) nc.ct = TSR_F16, nc.res = 2;              /* a 16-bit C: a LayerNorm launch */
        if (t == 7) nc.config = NULL, nc.m = 40 + th_rand() % 30; /* past small-m: the device's kernel */
        if (t == 8) nc.k = 0, nc.beta = 0.5f;                 /* K = 0: C's epilogue alone, then the norm */
        if (nc.config && !th_try_override(dev, "gemm", nc.config)) continue;
        if (nc.config) set_gemm_override(NULL);
        run_norm_case(&nc);
    }
}

/* A bad epilogue LayerNorm is refused, naming what is wrong, before anything is enqueued: C keeps
 * its contents. */
static void epilogue_layernorm_invalid(void **state) {
    (void)state;
    enum { M = 8, N = 12, K = 4 };
    float a[M * K], b[K * N], c[2 * M * N], after[2 * M * N];
    th_fill_uniform(a, M * K, -1, 1);
    th_fill_uniform(b, K * N, -1, 1);
    th_fill_uniform(c, 2 * M * N, -1, 1);
    cl_mem da = th_buffer_from(dev, a, M * K), db = th_buffer_from(dev, b, K * N),
           dc = th_buffer_from(dev, c, 2 * M * N);
    cl_mem g = th_buffer(dev, N), small = th_buffer(dev, N - 1);
    const tsr_matmul_desc ok = {.m = M, .n = N, .k = K, .alpha = 1.0f,
                                .epilogue = {.norm_gamma = g, .norm_beta = g, .norm_eps = 1e-5f}};
    tsr_matmul_desc desc = ok;
    desc.epilogue.norm_beta = NULL;
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "norm_beta");
    desc = ok;
    desc.epilogue.norm_gamma = NULL;
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "norm_gamma");
    const float bad_eps[] = {0.0f, -1e-5f, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad_eps / sizeof *bad_eps; ++i) {
        desc = ok;
        desc.epilogue.norm_eps = bad_eps[i];
        TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "norm_eps");
    }
    desc = ok;
    desc.layout = TSR_COL_MAJOR;
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_UNSUPPORTED);
    TH_ASSERT_CONTAINS(tsr_last_error(), "row-major");
    desc = ok;
    desc.batch = 2, desc.c.batch_stride = M * N;
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_UNSUPPORTED);
    TH_ASSERT_CONTAINS(tsr_last_error(), "batch");
    desc = ok;
    desc.epilogue.norm_gamma = small;
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "norm_gamma");
    desc = ok;
    desc.epilogue.norm_beta_offset = 1;
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "norm_beta");
    /* gamma, then beta, inside C */
    desc = ok;
    desc.epilogue.norm_gamma = dc, desc.epilogue.norm_gamma_offset = M * N - 1;
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlap");
    desc = ok;
    desc.epilogue.norm_beta = dc;
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "norm_beta");
    /* past C: allowed (the second half of the buffer) */
    desc = ok;
    desc.epilogue.norm_beta = dc, desc.epilogue.norm_beta_offset = M * N;
    th_read(dev, dc, after, 2 * M * N);
    assert_memory_equal(after, c, sizeof c); /* nothing refused above wrote C */
    TH_ASSERT_OK(tsr_matmul(dev, &desc, da, db, dc, NULL, NULL));
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    /* plans take no LayerNorm */
    tsr_matmul_plan *plan = NULL;
    TH_ASSERT_STATUS(tsr_matmul_plan_create(dev, &ok, &plan), TSR_ERR_UNSUPPORTED);
    TH_ASSERT_CONTAINS(tsr_last_error(), "LayerNorm");
    assert_null(plan);
    clReleaseMemObject(da), clReleaseMemObject(db), clReleaseMemObject(dc);
    clReleaseMemObject(g), clReleaseMemObject(small);
}

/* The two sweeps above as two cases each (even and odd members), so shards spread them. */
static void configurations_even(void **state) { (void)state, configurations_part(0, 2); }
static void configurations_odd(void **state) { (void)state, configurations_part(1, 2); }
static void gpu_kernel_even(void **state) { (void)state, gpu_kernel_part(0, 2); }
static void gpu_kernel_odd(void **state) { (void)state, gpu_kernel_part(1, 2); }
/* The default device's list: the sweeps in smaller parts, so that the shards spread them (every
 * member compiles a program per kind for seconds with an empty driver cache; the GPU kernel's odd
 * members took 270 s of a cold run on a 2-core Xeon): the configurations in quarters, the GPU
 * kernel one member per case. */
static void configurations_1of4(void **state) { (void)state, configurations_part(0, 4); }
static void configurations_2of4(void **state) { (void)state, configurations_part(1, 4); }
static void configurations_3of4(void **state) { (void)state, configurations_part(2, 4); }
static void configurations_4of4(void **state) { (void)state, configurations_part(3, 4); }
static void gpu_kernel_1of8(void **state) { (void)state, gpu_kernel_part(0, 8); }
static void gpu_kernel_2of8(void **state) { (void)state, gpu_kernel_part(1, 8); }
static void gpu_kernel_3of8(void **state) { (void)state, gpu_kernel_part(2, 8); }
static void gpu_kernel_4of8(void **state) { (void)state, gpu_kernel_part(3, 8); }
static void gpu_kernel_5of8(void **state) { (void)state, gpu_kernel_part(4, 8); }
static void gpu_kernel_6of8(void **state) { (void)state, gpu_kernel_part(5, 8); }
static void gpu_kernel_7of8(void **state) { (void)state, gpu_kernel_part(6, 8); }
static void gpu_kernel_8of8(void **state) { (void)state, gpu_kernel_part(7, 8); }

/* The K-blocking tests' tiled configurations (KC=128): packed, unpacked and staged. */
static const char *const kc128_configs[] = {
    "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1 KC=128 NT=2",
    "MWI=4 VW=8 NVW=1 KU=2 WGM=2 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0 KC=128",
    "MWI=2 VW=2 NVW=4 KU=2 WGM=4 WGN=8 KWG=8 SA=1 SB=1 PACKA=0 PACKB=0 KC=128",
};

/* K blocking (KC): K split into launches that accumulate into C. The first block alone may
 * apply beta (with beta = 0 C's NaN must not leak in), later ones add to it, and the epilogue
 * (bias, activation: neither commutes with a second application) runs once, after the last
 * block. Packed, unpacked and staged kernels, every transposition, batches, K below, at and
 * past multiples of KC, odd edges. */
static void k_blocked_accumulation(void **state) {
    (void)state;
    const char *const *configs = kc128_configs;
    static const tsr_activation acts[] = {TSR_ACT_NONE, TSR_ACT_RELU, TSR_ACT_GELU_TANH, TSR_ACT_GELU_ERF};
    static const size_t ks[] = {128, 129, 256, 300, 385, 77};
    int per = long_mode() ? 8 : 4;
    for (size_t c = 0; c < sizeof kc128_configs / sizeof kc128_configs[0]; ++c) {
        if (!try_gemm_override(configs[c])) continue;
        for (int j = 0; j < per; ++j) {
            int t = rotated_kind(c, j, per, 8);
            gemm_case g = {.row_major = (int)(th_rand() & 1), .ta = t & 1, .tb = (t >> 1) & 1, .m = rand_size(45),
                           .n = rand_size(45), .k = t < 6 ? ks[t] : 130 + th_rand() % 300, .lda_pad = th_rand() % 3,
                           .ldb_pad = th_rand() % 3, .ldc_pad = th_rand() % 3, .a_off = th_rand() % 4,
                           .b_off = th_rand() % 4, .c_off = th_rand() % 4, .alpha = (t & 2) ? -0.8f : 1.1f,
                           .beta = (t % 3 == 0) ? 0.0f : 0.7f, .batch = 1 + th_rand() % 3, .c_gap = th_rand() % 3,
                           .act = acts[t % 4], .bias = t % 4 != 1, .bias_shared = t == 6, .bias_off = th_rand() % 3};
            expect_accurate(&g);
        }
    }
    set_gemm_override(NULL);
}

/* K blocking never rounds a 16-bit C's partial sums: its blocks would each round them to C's type
 * and read them back (K/KC roundings; 2.5x one rounding's error at K = 1090 with KC = 128). Where
 * beta reads C (as here) a 16-bit C takes one launch, rounded once; the same configuration with and
 * without KC=128 writes the same bits (f16 and bf16), within the usual bound. (Beta 0: the sums
 * stay in fp32 between the blocks, k_blocked_16bit_c_sums_in_fp32.) */
static void k_blocked_16bit_c_rounds_once(void **state) {
    (void)state;
    static const char *const configs[] = {
        "MWI=4 VW=8 NVW=1 KU=2 WGM=2 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0 KC=128",
        "MWI=4 VW=8 NVW=1 KU=2 WGM=2 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0",
    };
    static const tsr_dtype types[] = {TSR_F16, TSR_BF16};
    enum { M = 9, N = 33, K = 1090 };
    for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t) {
        tsr_dtype ty = types[t];
        float *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b), *c0 = malloc(M * N * sizeof *c0);
        th_fill_uniform_typed(ty, a, M * K, -1, 1);
        th_fill_uniform_typed(ty, b, K * N, -1, 1);
        th_fill_uniform_typed(ty, c0, M * N, -1, 1);
        cl_mem da = th_buffer_from_typed(dev, ty, a, M * K), db = th_buffer_from_typed(dev, ty, b, K * N);
        uint16_t bits[2][M * N];
        for (int v = 0; v < 2; ++v) {
            if (!try_gemm_override(configs[v])) goto next;
            cl_mem dc = th_buffer_from_typed(dev, ty, c0, M * N);
            const tsr_matmul_desc d = {.m = M, .n = N, .k = K, .alpha = -0.75f, .beta = 0.5f, .a = {.dtype = ty},
                                       .b = {.dtype = ty}, .c = {.dtype = ty}};
            TH_ASSERT_OK(tsr_matmul(dev, &d, da, db, dc, NULL, NULL));
            assert_int_equal(clEnqueueReadBuffer(tsr_device_queue(dev), dc, CL_TRUE, 0, sizeof bits[v], bits[v], 0, NULL, NULL),
                             CL_SUCCESS);
            clReleaseMemObject(dc);
        }
        for (size_t i = 0; i < M * N; ++i)
            if (bits[0][i] != bits[1][i])
                fail_msg("%s C, K = %d: KC=128 wrote 0x%04x at element %zu, one launch 0x%04x", tsr_dtype_str(ty), K,
                         bits[0][i], i, bits[1][i]);
        set_gemm_override(configs[0]);
        gemm_case g = {.row_major = 1, .m = M, .n = N, .k = K, .alpha = -0.75f, .beta = 0.5f, .batch = 2,
                       .at = ty, .bt = ty, .ct = ty};
        expect_accurate(&g);
    next:
        clReleaseMemObject(da);
        clReleaseMemObject(db);
        free(a);
        free(b);
        free(c0);
    }
    set_gemm_override(NULL);
}

/* K blocking with a 16-bit C, beta 0 and no residual: the blocks but the last add into fp32 sums
 * (runtime/ops/gemm.c, gemm_launch's acc32) and the last reads them as its residual and stores C,
 * rounded once. Without an epilogue C holds, bit for bit, the fp32-C run of the same
 * configuration (the same K blocks summed in the same order) rounded as the host rounds; C's old
 * contents are NaN and must not leak in. With bias, scale and activations, transposes, batches,
 * offsets and padding: within the usual bound of the double reference (run_case's guard zones). */
static void k_blocked_16bit_c_sums_in_fp32(void **state) {
    (void)state;
    const char *const *configs = kc128_configs;
    static const tsr_dtype types[] = {TSR_F16, TSR_BF16};
    static const tsr_activation acts[] = {TSR_ACT_NONE, TSR_ACT_RELU, TSR_ACT_GELU_TANH, TSR_ACT_GELU_ERF};
    enum { M = 9, N = 33, BATCH = 2 };
    const size_t K = small_mode() ? 300 : 1090, nc = BATCH * M * N; /* Oclgrind, rusticl: 3 blocks */
    for (size_t c = 0; c < sizeof kc128_configs / sizeof kc128_configs[0]; ++c) {
        if (!try_gemm_override(configs[c])) continue;
        for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t) {
            if (small_mode() && c % 2 != t) continue; /* there: two of the six pairs */
            const tsr_dtype ty = types[t];
            float *a = malloc(BATCH * M * K * sizeof *a), *b = malloc(BATCH * K * N * sizeof *b);
            float *nan = malloc(nc * sizeof *nan), *got = malloc(nc * sizeof *got), *want = malloc(nc * sizeof *want);
            th_fill_uniform_typed(ty, a, BATCH * M * K, -1, 1);
            th_fill_uniform_typed(ty, b, BATCH * K * N, -1, 1);
            for (size_t i = 0; i < nc; ++i) nan[i] = NAN;
            cl_mem da = th_buffer_from_typed(dev, ty, a, BATCH * M * K), db = th_buffer_from_typed(dev, ty, b, BATCH * K * N);
            cl_mem d16 = th_buffer_from_typed(dev, ty, nan, nc), d32 = th_buffer_from_typed(dev, TSR_F32, nan, nc);
            tsr_matmul_desc d = {.m = M, .n = N, .k = K, .batch = BATCH, .alpha = -0.75f,
                                 .a = {.dtype = ty, .batch_stride = M * K}, .b = {.dtype = ty, .batch_stride = K * N},
                                 .c = {.dtype = ty, .batch_stride = M * N}};
            TH_ASSERT_OK(tsr_matmul(dev, &d, da, db, d16, NULL, NULL));
            d.c.dtype = TSR_F32;
            TH_ASSERT_OK(tsr_matmul(dev, &d, da, db, d32, NULL, NULL));
            th_read_typed(dev, ty, d16, got, nc);
            th_read_typed(dev, TSR_F32, d32, want, nc);
            for (size_t i = 0; i < nc; ++i) {
                uint16_t bits;
                float rounded;
                TH_ASSERT_OK(tsr_convert_host(TSR_F32, &want[i], ty, &bits, 1));
                TH_ASSERT_OK(tsr_convert_host(ty, &bits, TSR_F32, &rounded, 1));
                if (memcmp(&rounded, &got[i], sizeof rounded) != 0)
                    fail_msg("%s, %s C, K = %zu: element %zu is %a, the fp32-C run rounded once %a", configs[c],
                             tsr_dtype_str(ty), K, i, (double)got[i], (double)rounded);
            }
            clReleaseMemObject(da);
            clReleaseMemObject(db);
            clReleaseMemObject(d16);
            clReleaseMemObject(d32);
            free(a);
            free(b);
            free(nan);
            free(got);
            free(want);
            for (int j = 0; j < (long_mode() ? 4 : small_mode() ? 1 : 2); ++j) {
                const int kind = rotated_kind(c * 2 + t, j, 4, 8);
                gemm_case g = {.row_major = (int)(th_rand() & 1), .ta = kind & 1, .tb = (kind >> 1) & 1,
                               .m = rand_size(30), .n = rand_size(40), .k = 129 + th_rand() % 500,
                               .lda_pad = th_rand() % 3, .ldb_pad = th_rand() % 3, .ldc_pad = th_rand() % 3,
                               .a_off = th_rand() % 4, .b_off = th_rand() % 4, .c_off = th_rand() % 4,
                               .alpha = (kind & 2) ? -0.8f : 1.1f, .batch = 1 + th_rand() % 3, .c_gap = th_rand() % 3,
                               .act = acts[kind % 4], .bias = kind % 4 != 1, .bias_off = th_rand() % 3,
                               .scale = kind % 3 == 0, .at = kind & 4 ? ty : TSR_F32, .bt = ty, .ct = ty};
                expect_accurate(&g);
            }
        }
    }
    set_gemm_override(NULL);
}

/* Split-K (the gpu implementation's SPLIT, runtime/ops/gemm.c's gemm_split): K cut into slices
 * whose fp32 products a second kernel sums, then applies alpha, beta C and the epilogue. Forced
 * slice counts (2, 4, 8) and auto (on this device's few compute units a few-tile problem with a
 * long K splits), every layout and transposition, K off multiples of KWG and shorter than the
 * slices asked for (fewer slices, none empty), beta over a known C and 0 over a NaN C, bias,
 * scale, a residual of its own (any type) or C itself, each activation, 16-bit A, B and C, odd
 * leading dimensions and offsets, guard zones around C (run_case), and a batch (never split). */
static void split_k(void **state) {
    (void)state;
    static const char *const configs[] = {
        "KERNEL=1 MWI=4 VW=4 NVW=1 KU=2 WGM=8 WGN=8 KWG=8 PAD=0 DB=0 SPLIT=2",
        "KERNEL=1 MWI=2 VW=4 NVW=1 KU=4 WGM=8 WGN=32 KWG=16 PAD=1 DB=1 SPLIT=8",
        "KERNEL=1 MWI=8 VW=4 NVW=2 KU=4 WGM=16 WGN=16 KWG=8 PAD=1 DB=1 SPLIT=0", /* auto: 2 slices here */
        "KERNEL=1 MWI=4 VW=2 NVW=4 KU=8 WGM=32 WGN=4 KWG=32 PAD=0 DB=1 SPLIT=4",
        "KERNEL=1 MWI=1 VW=1 NVW=4 KU=1 WGM=4 WGN=4 KWG=8 PAD=1 DB=0 SPLIT=8",
    };
    static const tsr_activation acts[] = {TSR_ACT_NONE, TSR_ACT_RELU, TSR_ACT_GELU_TANH, TSR_ACT_GELU_ERF};
    /* default tier: the first three configurations, four kinds each (every kind once: a program
     * per configuration, transposition and type set is most of the time) */
    const size_t nconfigs = small_mode() ? 2 : long_mode() ? sizeof configs / sizeof configs[0] : 3;
    const int per = small_mode() ? 2 : long_mode() ? 12 : 4;
    for (size_t c = 0; c < nconfigs; ++c) {
        if (!try_gemm_override(configs[c])) continue;
        for (int j = 0; j < per; ++j) {
            const int t = small_mode() ? (int)(c * 2) + j : rotated_kind(c, j, per, 12);
            const size_t max = small_mode() ? 24 : 90;
            gemm_case g = {.row_major = (int)(th_rand() & 1), .ta = t & 1, .tb = (t >> 1) & 1, .m = rand_size(max),
                           .n = rand_size(max), .k = small_mode() ? 40 + th_rand() % 60 : 256 + th_rand() % 900,
                           .lda_pad = th_rand() % 3, .ldb_pad = th_rand() % 3, .ldc_pad = th_rand() % 3,
                           .a_off = th_rand() % 5, .b_off = th_rand() % 5, .c_off = th_rand() % 5,
                           .alpha = (t & 4) ? -0.8f : 1.25f, .beta = (t % 3 == 0) ? 0.0f : 0.5f, .batch = 1,
                           .act = acts[t % 4], .bias = t % 3 != 2, .bias_off = th_rand() % 3, .scale = t % 2 == 0,
                           .scale_off = th_rand() % 3, .res = t % 5 == 1 ? 1 : t % 5 == 3 ? 2 : 0,
                           .rt = (tsr_dtype)(t % 3), .r_off = th_rand() % 4};
            if (t == 5) g.k = 1 + th_rand() % 30;   /* fewer k-steps than the slices asked for */
            if (t == 7) g.k = 512 + 8 * (th_rand() % 16); /* a multiple of every KWG (8) */
            if (t == 9) g.batch = 2;                /* a batch: never split */
            if (t >= 8) {                           /* 16-bit storage, one operand at a time or all */
                g.at = (t == 8 || t == 11) ? TSR_F16 : TSR_F32;
                g.bt = (t == 10 || t == 11) ? TSR_BF16 : TSR_F32;
                g.ct = t == 11 ? TSR_F16 : t == 10 ? TSR_BF16 : TSR_F32;
            }
            expect_accurate(&g);
        }
    }
    set_gemm_override(NULL);
}

/* Split-K rounds a 16-bit C once, in its reduce step: the split product's error against the
 * double reference stays that of the unsplit kernel (SPLIT=1), within 1.25x, where rounding the
 * slices' partial sums to C's type would add up to one rounding per slice. */
static void split_k_16bit_c_rounds_once(void **state) {
    (void)state;
    static const char *const configs[] = {
        "KERNEL=1 MWI=4 VW=4 NVW=1 KU=2 WGM=8 WGN=8 KWG=8 PAD=0 DB=0 SPLIT=8",
        "KERNEL=1 MWI=4 VW=4 NVW=1 KU=2 WGM=8 WGN=8 KWG=8 PAD=0 DB=0 SPLIT=1",
    };
    static const tsr_dtype types[] = {TSR_F16, TSR_BF16};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t) {
        double err[2];
        for (int v = 0; v < 2; ++v) {
            if (!try_gemm_override(configs[v])) goto next;
            gemm_case g = {.row_major = 1, .m = 37, .n = 45, .k = 1090, .alpha = -0.75f, .beta = 0.5f, .batch = 1,
                           .at = types[t], .bt = types[t], .ct = types[t], .bias = true};
            err[v] = run_case(&g);
            if (getenv("TSR_TEST_VERBOSE")) fprintf(stderr, "# %s C, %s: relative error %.3e\n",
                                                    tsr_dtype_str(types[t]), configs[v], err[v]);
            if (!(err[v] <= case_tolerance(&g)))
                fail_msg("%s, %s: relative error %.3e exceeds %.3e", tsr_dtype_str(types[t]), configs[v], err[v],
                         case_tolerance(&g));
        }
        if (!(err[0] <= 1.25 * err[1]))
            fail_msg("%s C: split-K's error %.3e against one launch's %.3e", tsr_dtype_str(types[t]), err[0], err[1]);
    next:;
    }
    set_gemm_override(NULL);
}

/* Packed panels are written in full before they are read: fill the workspaces with NaN
 * (it would show in C), then run packed GEMMs of every shape class into them. */
static void packed_panels_are_fully_written(void **state) {
    (void)state;
    set_gemm_override("MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1");
    gemm_case big = {.row_major = 1, .m = 200, .n = 190, .k = 180, .alpha = 1, .beta = 0, .batch = 2};
    expect_accurate(&big); /* grows both workspaces */
    for (int t = 0; t < 12; ++t) {
        for (int w = 0; w < 2; ++w) {
            size_t floats = dev->workspace[w].bytes / sizeof(float);
            float *nan = malloc(floats * sizeof *nan);
            th_poison(nan, floats);
            TH_ASSERT_OK(tsr_upload(dev, dev->workspace[w].buffer, nan, floats));
            free(nan);
        }
        gemm_case g = {.row_major = (int)(th_rand() & 1), .ta = t & 1, .tb = (t >> 1) & 1, .m = rand_size(120),
                       .n = rand_size(120), .k = rand_size(120), .alpha = 1, .beta = 0.5f, .batch = 1 + (size_t)(t % 3 == 0)};
        expect_accurate(&g);
    }
    set_gemm_override(NULL);
}

/* A bad override is refused by tsr_config_override with its reason, and leaves launches as they were. */
static void bad_configuration_overrides(void **state) {
    (void)state;
    cl_mem a = th_buffer(dev, 16), b = th_buffer(dev, 16), c = th_buffer(dev, 16);
    static const struct { const char *config, *needle; tsr_status status; } bad[] = {
        {"MWI=3", "not in the parameter space", TSR_ERR_INVALID_ARG},
        {"FOO=1", "no parameter 'FOO'", TSR_ERR_INVALID_ARG},
        {"MWI", "NAME=VALUE", TSR_ERR_INVALID_ARG},
        {"MWI=x", "not in the parameter space", TSR_ERR_INVALID_ARG},
        {"NWI=4", "no parameter 'NWI'", TSR_ERR_INVALID_ARG},
        {"SA=1 PACKA=1", "not legal", TSR_ERR_UNSUPPORTED},
        {"MWI=8 VW=16 NVW=4", "not legal", TSR_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        TH_ASSERT_STATUS(tsr_config_override(dev, "gemm", bad[i].config), bad[i].status);
        TH_ASSERT_CONTAINS(tsr_last_error(), "tsr_config_override(gemm)");
        TH_ASSERT_CONTAINS(tsr_last_error(), bad[i].needle);
        TH_ASSERT_OK(tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, 4, 4, 4, 1, a, 0, 4, b, 0, 4, 0, c, 0, 4,
                               NULL, NULL));
    }
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseMemObject(c);
}

/* ---- 16-bit storage: tsr_matmul with every (a, b, c) type combination ---- */

static const tsr_dtype all_types[3] = {TSR_F32, TSR_F16, TSR_BF16};

/* The 27 combinations of A, B and C types (index a + 3 b + 9 c), two cases each: one GEMM (beta = 0
 * over NaN in C; every other combination with the epilogue, bias and GELU, rounded once to C's
 * type) and a strided batch with beta != 0 reading C in its type. Layouts and transpositions
 * rotate over the combinations (each combination sees both layouts and two transpositions, the
 * column-major one swapped onto the other operand); sizes are not multiples
 * of any tile, with padding and offsets. Sizes stay in one problem class ("small", or "batched"),
 * so the programs compiled are few per combination. Error bound: max(1e-5,
 * tsr_dtype_error_bound(c_type, k)), against a double reference from the inputs as rounded to
 * their types. */
/* The default tier's (A, B, C) storage types: the nine with C's type -(A + B) mod 3 (indices into
 * all_types), a Latin square: every pair of types on every two of the three tensors once, the
 * three uniform sets and the six with all three types different (a type handed to the wrong
 * tensor changes the result). Each combination is a program of its own (seconds to compile with
 * an empty driver cache: the 27 took most of gemm-1of6's cold time); the 16-bit inputs with an
 * fp32 output are types_larger_shapes' too. The long tier runs all 27. */
static bool combo_in_covering_set(int combo) {
    int a = combo % 3, b = combo / 3 % 3, c = combo / 9;
    return (2 * a + 2 * b) % 3 == c;
}

/* The i-th combination (mod 9) of the covering set, in combination order. */
static int covering_combo(size_t i) {
    int seen = 0;
    for (int combo = 0; combo < 27; ++combo)
        if (combo_in_covering_set(combo) && (size_t)seen++ == i % 9) return combo;
    return 0;
}

static void type_combinations(void **state) {
    (void)state;
    size_t max = small_mode() ? 13 : 40;
    for (int combo = 0; combo < 27; ++combo) {
        /* Oclgrind and rusticl (slow compiles): seven combinations, all-f16 among them */
        if (small_mode() && combo % 4 != 1) continue;
        if (!small_mode() && !long_mode() && !combo_in_covering_set(combo)) continue;
        tsr_dtype at = all_types[combo % 3], bt = all_types[combo / 3 % 3], ct = all_types[combo / 9];
        for (int t = 0; t < 2; ++t) {
            /* default tier: one of the two cases per combination, alternating */
            if (!small_mode() && !long_mode() && t != combo % 2) continue;
            /* Oclgrind and rusticl without TSR_TEST_LONG=1: one case each, alternating over the seven */
            if (th_small_thinned() && t != combo / 4 % 2) continue;
            int shape = combo + t; /* layout and transpositions rotate through the combinations */
            gemm_case g = {.row_major = (combo + t) & 1,
                           .ta = (shape >> 1) & 1,
                           .tb = ((shape >> 2) ^ t) & 1,
                           .m = 16 + rand_size(max),
                           .n = 16 + rand_size(max),
                           .k = rand_size(max + 20),
                           .lda_pad = th_rand() % 3,
                           .ldb_pad = th_rand() % 3,
                           .ldc_pad = th_rand() % 3,
                           .a_off = th_rand() % 5,
                           .b_off = th_rand() % 5,
                           .c_off = th_rand() % 5,
                           .alpha = combo % 3 ? -0.75f : 1.25f,
                           .beta = t ? 0.5f : 0.0f,
                           .batch = 1,
                           .at = at,
                           .bt = bt,
                           .ct = ct};
            if (t == 1) { /* a strided batch, beta reading C in its type */
                g.batch = 2 + th_rand() % 3;
                g.a_gap = th_rand() % 4, g.b_gap = th_rand() % 4, g.c_gap = th_rand() % 4;
                g.a_shared = combo % 5 == 0;
            }
            if (t == 0 && combo % 2) { /* the epilogue, rounded once to C's type */
                g.act = combo % 4 == 1 ? TSR_ACT_GELU_TANH : TSR_ACT_GELU_ERF;
                g.bias = true;
                g.bias_off = th_rand() % 3;
            }
            expect_accurate(&g);
        }
    }
}

/* The uniform 16-bit sets on larger shapes (full tiles, vector loads and stores of C) and on the
 * batched class's shape, beta != 0 and an epilogue. */
static void types_larger_shapes(void **state) {
    (void)state;
    static const tsr_dtype sets[][3] = {{TSR_F16, TSR_F16, TSR_F16},
                                        {TSR_BF16, TSR_BF16, TSR_BF16},
                                        {TSR_F16, TSR_F16, TSR_F32},
                                        {TSR_BF16, TSR_BF16, TSR_F32}};
    for (size_t s = 0; s < 4; ++s) {
        gemm_case g = {.row_major = 1,
                       .m = 193,
                       .n = 257,
                       .k = 300,
                       .alpha = 1.0f,
                       .beta = 0.25f,
                       .batch = 1,
                       .at = sets[s][0],
                       .bt = sets[s][1],
                       .ct = sets[s][2],
                       .act = TSR_ACT_GELU_TANH,
                       .bias = true};
        expect_accurate(&g);
        gemm_case batch = {.row_major = (int)(s & 1),
                           .tb = 1,
                           .m = 64,
                           .n = 48,
                           .k = 72,
                           .alpha = 1.0f,
                           .beta = 0.0f,
                           .batch = 9,
                           .at = sets[s][0],
                           .bt = sets[s][1],
                           .ct = sets[s][2]};
        expect_accurate(&batch);
    }
}

/* Every configuration family member with 16-bit storage: packed panels (written fp32 from 16-bit
 * operands), unpacked vector loads (B) and widened chunks of A (gemm.cl's A_WIDEN, 64 k-steps at
 * a time: K past 130 in kind 3 crosses chunks and ends in a partial one), and the GPU-shaped
 * staged tiles (SA, SB) loading 16-bit values into local memory. */
static void types_configurations(void **state) {
    (void)state;
    static const char *const configs[] = {
        "MWI=2 VW=2 NVW=4 KU=2 WGM=4 WGN=8 KWG=8 SA=1 SB=1 PACKA=0 PACKB=0",
        "MWI=4 VW=4 NVW=1 KU=4 WGM=16 WGN=16 KWG=16 SA=1 SB=1 PACKA=0 PACKB=0",
        "MWI=4 VW=4 NVW=1 KU=4 WGM=8 WGN=16 KWG=16 SA=1 SB=0 PACKA=0 PACKB=0",
        "MWI=1 VW=16 NVW=1 KU=1 WGM=2 WGN=2 KWG=32 SA=0 SB=1 PACKA=0 PACKB=0",
        "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1 NT=4",
        "MWI=1 VW=4 NVW=1 KU=1 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0",
        "MWI=4 VW=16 NVW=2 KU=8 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=1",
        "MWI=6 VW=1 NVW=4 KU=4 WGM=1 WGN=2 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1",
        "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1 KC=128",
    };
    size_t nconfigs = small_mode() ? 2 : sizeof configs / sizeof configs[0];
    for (size_t c = 0; c < nconfigs; ++c) {
        if (!try_gemm_override(configs[c])) continue;
        /* one draw per member by default (the kinds rotate over the members: each of the four
         * on two or three of them; every draw a typed program of its own to compile), two in the
         * small modes, four (every kind on every member) in the long tier */
        int per = small_mode() ? 2 : long_mode() ? 4 : 1;
        for (int j = 0; j < per; ++j) {
            int t = small_mode() || long_mode() ? j : rotated_kind(c, j, per, 4);
            size_t max = small_mode() ? 20 : 90;
            /* the type set: a random one in the long tier and the small modes; by default member c
             * takes the covering set's c-th (type_combinations' nine), the same in every run, so a
             * warm driver cache holds its program (a random set compiled anew in every run) */
            int combo = small_mode() || long_mode() ? (int)(th_rand() % 27) : covering_combo(c);
            gemm_case g = {.row_major = (int)(th_rand() & 1),
                           .ta = t & 1,
                           .tb = (t >> 1) & 1,
                           .m = rand_size(max),
                           .n = rand_size(max),
                           .k = t == 3 ? 130 + th_rand() % 200 : rand_size(max),
                           .c_off = th_rand() % 3,
                           .alpha = 1.0f,
                           .beta = 0.5f,
                           .batch = 1 + (size_t)(t == 2),
                           .at = t == 0 ? TSR_F16 : all_types[combo % 3],
                           .bt = t == 0 ? TSR_F16 : all_types[combo / 3 % 3],
                           .ct = t == 0 ? TSR_F16 : all_types[combo / 9],
                           .act = t == 3 ? TSR_ACT_GELU_ERF : TSR_ACT_NONE,
                           .bias = t == 3};
            if (!typed_case(&g)) g.ct = TSR_BF16;
            expect_accurate(&g);
        }
    }
    set_gemm_override(NULL);
}

/* ---- gemm.cl's GEMM_B_SPLIT, pinned: a bf16 B read in place (row-major in the kernel, not packed,
 * 16-float vectors, an even NVW) on AVX-512 loads each pair of a row's vectors as one 64-byte load
 * split into even and odd elements, so a full tile's accumulators hold its columns in even/odd
 * order until they are put back before the store; edge tiles load in place. Tiles of 2 and 4
 * vectors (32 and 64 columns), NT=4 (each work-item's tiles in turn, most calls ending inside
 * them), K blocking (KC=128, fp32 C: the later launches read the earlier ones' sums as the
 * residual), packed and widened A (NT=2 with K past 1024: A_WIDEN_TILES, every tile's accumulators
 * kept between chunks); every call with full tiles and a ragged last one, an epilogue
 * whose bias and scale are per column (a column out of place gets another column's bias), a
 * residual of its own or C itself, beta over C, batches, offsets, both layouts (a column-major
 * call's kernel B is the caller's A). Elsewhere (no AVX-512) the same configurations take the
 * plain loads: the test still holds them to the reference. */
static void bf16_b_even_odd(void **state) {
    (void)state;
    static const char *const configs[] = {
        "MWI=8 VW=16 NVW=2 KU=2 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0",
        "MWI=4 VW=16 NVW=4 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=0 NT=4",
        "MWI=6 VW=16 NVW=2 KU=4 WGM=2 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0 NT=4 KC=128",
        "MWI=8 VW=16 NVW=2 KU=2 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0 NT=2",
    };
    static const tsr_dtype a_types[] = {TSR_F32, TSR_BF16, TSR_F16};
    size_t nconfigs = small_mode() ? 1 : sizeof configs / sizeof configs[0];
    for (size_t c = 0; c < nconfigs; ++c) {
        if (!try_gemm_override(configs[c])) continue;
        for (int t = 0; t < (small_mode() ? 2 : 4); ++t) {
            int row_major = t != 3; /* t 3: column-major, the caller's A is the kernel's B */
            tsr_dtype bf = TSR_BF16, other = a_types[(c + (size_t)t) % 3];
            size_t tile = c == 1 ? 64 : 32;
            gemm_case g = {.row_major = row_major,
                           .m = 5 + th_rand() % 40,
                           .n = tile * (1 + th_rand() % 3) + th_rand() % tile, /* full tiles, a ragged one */
                           .k = c == 2 ? 130 + th_rand() % 200 : c == 3 ? 1030 + th_rand() % 100 : 1 + th_rand() % 150,
                           .ldb_pad = th_rand() % 3,
                           .a_off = th_rand() % 5,
                           .b_off = th_rand() % 5,
                           .c_off = th_rand() % 5,
                           .alpha = 0.75f,
                           .beta = t == 1 ? 0.5f : 0.0f,
                           .batch = t == 2 ? 3 : 1,
                           .at = row_major ? other : bf,
                           .bt = row_major ? bf : other,
                           .ct = c == 2 || t == 0 ? TSR_F32 : TSR_BF16,
                           .act = t == 0 ? TSR_ACT_RELU : TSR_ACT_NONE,
                           .bias = true,
                           .bias_off = th_rand() % 3,
                           .scale = t != 2,
                           .res = t == 1 ? 2 : t == 3 ? 1 : 0,
                           .rt = TSR_F16};
            if (!row_major) { /* the kernel's N is the caller's M: ragged tiles along it */
                size_t n = g.n;
                g.n = g.m, g.m = n;
            }
            expect_accurate(&g);
        }
    }
    set_gemm_override(NULL);
}

/* ---- gemm.cl's A_WIDEN path, pinned: a 16-bit A that is neither packed nor staged nor
 * transposed widens in the kernel 64 k-steps of the tile's rows at a time into a private fp32
 * chunk (a full chunk by 16-element vector conversions, on AVX-512 one vcvtph2ps per 16 f16; a
 * partial last chunk element by element), and an unpacked 16-bit B widens as each vector loads.
 * The configurations force PACKA=0 PACKB=0 SA=0 SB=0: AVX-512's 6x16 tile (B's 16-element loads
 * through the same conversion) and a 2x4 one legal on rusticl, with K blocking (KC=128, fp32 C:
 * K = 130's second launch starts A 128 elements into each row), each also with NT=4, where the work-item's
 * column tiles share each widened chunk (A_WIDEN_TILES: chunks outermost, every tile's
 * accumulators kept between them; most N end inside a work-item's 4 tiles). A row-major call
 * widens the caller's A, a column-major one (C^T = B^T A^T) the caller's B. */
static const char *const widen_configs[] = {
    "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0",
    "MWI=2 VW=4 NVW=1 KU=2 WGM=4 WGN=4 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0 KC=128",
    "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0 NT=4",
    "MWI=2 VW=4 NVW=1 KU=2 WGM=4 WGN=4 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0 NT=4 KC=128",
};
/* (A, B, C) types: the uniform 16-bit sets and a mixed one (both layouts: kernel types f16/bf16
 * and bf16/f16), and for the K-blocked tiles one with an fp32 C (a 16-bit C takes one launch:
 * k_blocked_16bit_c_rounds_once). */
static const tsr_dtype widen_types[][3] = {{TSR_F16, TSR_F16, TSR_F16},
                                           {TSR_BF16, TSR_BF16, TSR_BF16},
                                           {TSR_F16, TSR_BF16, TSR_BF16},
                                           {TSR_BF16, TSR_F16, TSR_F32}};

/* The forced configuration reaches the launch as it was given (row-major, nothing transposed,
 * nothing shared: no packing forced by the host), so the kernel compiles A_WIDEN. */
static void expect_widening_plan(const char *config, tsr_dtype at, tsr_dtype bt) {
    tsr_matmul_desc d = {
        .m = 13, .n = 37, .k = 65, .alpha = 1.0f, .a = {.dtype = at}, .b = {.dtype = bt}, .c = {.dtype = at}};
    tsr_matmul_plan *plan = NULL;
    TH_ASSERT_OK(tsr_matmul_plan_create(dev, &d, &plan));
    tsr_config_info info;
    TH_ASSERT_OK(tsr_matmul_plan_info(plan, &info));
    if (getenv("TSR_TEST_VERBOSE")) fprintf(stderr, "# plan: %s (%s)\n", info.config, info.origin);
    if (!strstr(info.config, "SA=0 SB=0 PACKA=0 PACKB=0"))
        fail_msg("forced %s, the plan runs %s (%s)", config, info.config, info.origin);
    tsr_matmul_plan_destroy(plan);
}

/* K of 1, 63, 64, 65 and 130 (below, at and past one chunk; two full chunks and a partial one)
 * and 1090 (past A_WIDEN_K's 1024 k-steps: NT=4 takes the chunks-outermost path, 17 full chunks
 * and a partial one; work-items of 4 tiles and a last one of 1 or 2),
 * M and N off every tile and vector width (one row, an edge column tile of 1 to 5), odd element
 * offsets, odd leading dimensions with lda > K and odd batch strides (the vector loads of A and B
 * start at odd 16-bit elements: dtype.cl's loads need element alignment only), batches, alpha,
 * beta reading a 16-bit C and beta = 0 over NaN. Each shape's inputs are fresh random values. */
static void widened_a_shapes(void **state) {
    (void)state;
    static const size_t ks[] = {1, 63, 64, 65, 130, 1090}, ms[] = {13, 7, 1, 25, 19, 7}, ns[] = {37, 17, 3, 50, 33, 70};
    for (size_t c = 0; c < sizeof widen_configs / sizeof widen_configs[0]; ++c) {
        if (!try_gemm_override(widen_configs[c])) continue;
        expect_widening_plan(widen_configs[c], TSR_F16, TSR_F16);
        for (size_t s = 0; s < sizeof widen_types / sizeof widen_types[0]; ++s) {
            /* the mixed 16-bit set on the 6x16 tiles only, the fp32 C on the K-blocked 2x4 ones */
            if ((s == 2 && c % 2 == 1) || (s == 3 && c % 2 == 0)) continue;
            for (size_t i = 0; i < sizeof ks / sizeof ks[0]; ++i) {
                /* Oclgrind and rusticl: K past a chunk only (63, 65, 130) */
                if (small_mode() && (i == 0 || i == 2)) continue;
                gemm_case g = {.row_major = (int)((i + s) & 1),
                               .m = ms[i],
                               .n = ns[i],
                               .k = ks[i],
                               .lda_pad = 7,
                               .ldb_pad = 3,
                               .ldc_pad = 2,
                               .a_off = 3,
                               .b_off = 5,
                               .c_off = 1,
                               .alpha = -0.75f,
                               .beta = i == 2 ? 0.0f : 0.5f,
                               .batch = i % 2 && i < 5 ? 3 : 1,
                               .a_gap = 5,
                               .b_gap = 3,
                               .c_gap = 1,
                               .at = widen_types[s][0],
                               .bt = widen_types[s][1],
                               .ct = widen_types[s][2]};
                expect_accurate(&g);
            }
        }
    }
    set_gemm_override(NULL);
}

/* The 16-bit encodings of NaN (quiet, negative, and one with only the lowest mantissa bit, a
 * signaling NaN once widened), +Inf and -Inf. */
static uint16_t special_bits(tsr_dtype t, int which) {
    static const uint16_t f16[] = {0x7e00, 0xfe00, 0x7c01, 0x7c00, 0xfc00};
    static const uint16_t bf16[] = {0x7fc0, 0xffc0, 0x7f81, 0x7f80, 0xff80};
    return t == TSR_F16 ? f16[which] : bf16[which];
}
static float special_value(int which) { return which < 3 ? NAN : which == 3 ? INFINITY : -INFINITY; }

/* A buffer of n elements of 16-bit type t: host's values (already rounded to t), then the
 * specials (*specials)[4] at element (*at)(specials[i]) as their exact bits (a payload NaN would
 * not survive a float's rounding), which host then holds as floats for the reference. One write
 * of the whole buffer: Oclgrind takes what a 2-byte clEnqueueWriteBuffer into a buffer wrote for
 * uninitialized memory. */
static cl_mem typed_buffer_with_specials(tsr_dtype t, float *host, size_t n, const int (*specials)[4], size_t count,
                                         size_t (*at)(const int *special)) {
    uint16_t *bits = malloc(n * sizeof *bits);
    TH_ASSERT_OK(tsr_convert_host(TSR_F32, host, t, bits, n));
    for (size_t i = 0; i < count; ++i) {
        size_t e = at(specials[i]);
        bits[e] = special_bits(t, specials[i][3]);
        host[e] = special_value(specials[i][3]);
    }
    cl_mem m = th_buffer_typed(dev, t, n);
    assert_int_equal(clEnqueueWriteBuffer(tsr_device_queue(dev), m, CL_TRUE, 0, n * sizeof *bits, bits, 0, NULL, NULL),
                     CL_SUCCESS);
    free(bits);
    return m;
}

/* widened_a_nonfinite's layout: A's (batch, row, k, special) and B's (batch, k, column, special)
 * as element indices */
enum { NF_M = 9, NF_N = 20, NF_K = 130, NF_LDA = NF_K + 7, NF_LDB = NF_N + 3, NF_LDC = NF_N + 2, NF_BATCH = 2 };
enum {
    NF_A_OFF = 3,
    NF_B_OFF = 5,
    NF_C_OFF = 1,
    NF_A_STRIDE = NF_M * NF_LDA + 5,
    NF_B_STRIDE = NF_K * NF_LDB + 3,
    NF_C_STRIDE = NF_M * NF_LDC + 1
};
static size_t nf_a_at(const int *sp) {
    return NF_A_OFF + (size_t)sp[0] * NF_A_STRIDE + (size_t)sp[1] * NF_LDA + (size_t)sp[2];
}
static size_t nf_b_at(const int *sp) {
    return NF_B_OFF + (size_t)sp[0] * NF_B_STRIDE + (size_t)sp[1] * NF_LDB + (size_t)sp[2];
}

/* NaN and Inf in a widened A (and in an unpacked B) propagate as fp32 arithmetic does: each
 * result is NaN, the same infinity or finite where the double reference over the same values is,
 * the finite ones within the usual bound. The specials sit in a full chunk's vector loads (k = 5,
 * 64, 127), a second chunk (70, 100) and the partial last one (129); a row with two infinities
 * gives Inf or NaN by the signs of B; B's special is in a full vector of columns. The second
 * batch entry (A finite) must stay finite but for B's special's column. */
static void widened_a_nonfinite(void **state) {
    (void)state;
    enum { M = NF_M, N = NF_N, K = NF_K, LDA = NF_LDA, LDB = NF_LDB, LDC = NF_LDC, BATCH = NF_BATCH };
    const size_t a_off = NF_A_OFF, b_off = NF_B_OFF, c_off = NF_C_OFF, a_stride = NF_A_STRIDE, b_stride = NF_B_STRIDE,
                 c_stride = NF_C_STRIDE;
    const size_t na = a_off + BATCH * a_stride, nb = b_off + BATCH * b_stride, nc = c_off + BATCH * c_stride;
    /* (batch, row, k, which special) in A; (batch, k, column, which) in B */
    static const int a_specials[][4] = {{0, 0, 5, 0},   {0, 1, 70, 3},  {0, 2, 129, 4}, {0, 3, 10, 3},
                                        {0, 3, 100, 3}, {0, 4, 127, 2}, {0, 6, 64, 1},  {0, 7, 63, 4}};
    static const int b_specials[][4] = {{1, 66, 3, 4}};
    for (size_t c = 0; c < sizeof widen_configs / sizeof widen_configs[0]; ++c) {
        if (!try_gemm_override(widen_configs[c])) continue;
        for (size_t s = 0; s < 2; ++s) { /* the uniform sets: the programs widened_a_shapes compiles */
            const tsr_dtype t = widen_types[s][0];
            float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c0 = malloc(nc * sizeof *c0),
                  *got = malloc(nc * sizeof *got);
            double *ref = malloc(M * LDC * sizeof *ref);
            th_fill_uniform_typed(t, a, na, -1, 1);
            th_fill_uniform_typed(t, b, nb, -1, 1);
            th_fill_uniform_typed(t, c0, nc, -1, 1);
            cl_mem da = typed_buffer_with_specials(t, a, na, a_specials, sizeof a_specials / sizeof a_specials[0],
                                                   nf_a_at),
                   db = typed_buffer_with_specials(t, b, nb, b_specials, sizeof b_specials / sizeof b_specials[0],
                                                   nf_b_at),
                   dc = th_buffer_from_typed(dev, t, c0, nc);
            tsr_matmul_desc d = {.m = M,
                                 .n = N,
                                 .k = K,
                                 .batch = BATCH,
                                 .alpha = -0.75f,
                                 .beta = 0.5f,
                                 .a = {t, a_off, LDA, a_stride},
                                 .b = {t, b_off, LDB, b_stride},
                                 .c = {t, c_off, LDC, c_stride}};
            TH_ASSERT_OK(tsr_matmul(dev, &d, da, db, dc, NULL, NULL));
            th_read_typed(dev, t, dc, got, nc);
            /* The finite results here are few (batch 0: the one row of M without a special), so
             * their normwise error is a handful of 16-bit roundings at their worst rather than an
             * average, plus fp32 sums that may cancel in a row: twice the bound widened_a_shapes
             * holds the full matrices to (a session-19 clean-clone run on rusticl measured 1.05x
             * the bound, seed 15177925682091); a wrong or stale element is off by O(1). */
            double tolerance = 2 * tsr_dtype_error_bound(t, K);
            for (size_t bi = 0; bi < BATCH; ++bi) {
                const float *cin = c0 + c_off + bi * c_stride, *cg = got + c_off + bi * c_stride;
                th_ref_sgemm(1, 0, 0, M, N, K, -0.75, a + a_off + bi * a_stride, LDA, b + b_off + bi * b_stride, LDB,
                             0.5, cin, ref, LDC);
                double err = 0, norm = 0;
                size_t specials = 0;
                for (size_t i = 0; i < M; ++i)
                    for (size_t j = 0; j < N; ++j) {
                        double r = ref[i * LDC + j], v = cg[i * LDC + j];
                        if (isnan(r) || isinf(r)) {
                            ++specials;
                            if (isnan(r) ? !isnan(v) : v != r)
                                fail_msg("%s [%s] batch %zu C[%zu][%zu] = %g, the fp32 arithmetic's %g",
                                         tsr_dtype_str(t), widen_configs[c], bi, i, j, v, r);
                        } else {
                            if (!isfinite(v))
                                fail_msg("%s [%s] batch %zu C[%zu][%zu] = %g, expected finite %g", tsr_dtype_str(t),
                                         widen_configs[c], bi, i, j, v, r);
                            err += (v - r) * (v - r), norm += r * r;
                        }
                    }
                /* every A special reaches its row (batch 0), B's its column (batch 1) */
                if (specials != (bi == 0 ? 7u * N : (size_t)M))
                    fail_msg("%s batch %zu: %zu non-finite results", tsr_dtype_str(t), bi, specials);
                if (!(sqrt(err / norm) <= tolerance))
                    fail_msg("%s [%s] batch %zu: finite results' relative error %.3e exceeds %.3e", tsr_dtype_str(t),
                             widen_configs[c], bi, sqrt(err / norm), tolerance);
            }
            /* guard zones: before the first C, between batch entries, after the last */
            for (size_t i = 0; i < nc; ++i) {
                size_t rel = i < c_off ? SIZE_MAX : (i - c_off) % c_stride, bi = i < c_off ? 0 : (i - c_off) / c_stride;
                bool inside = rel != SIZE_MAX && bi < BATCH && rel / LDC < M && rel % LDC < N;
                if (!inside && memcmp(&got[i], &c0[i], sizeof(float)) != 0)
                    fail_msg("%s: wrote outside C at element %zu", tsr_dtype_str(t), i);
            }
            clReleaseMemObject(da);
            clReleaseMemObject(db);
            clReleaseMemObject(dc);
            free(a);
            free(b);
            free(c0);
            free(got);
            free(ref);
        }
    }
    set_gemm_override(NULL);
}

/* 16-bit arguments checked in their own element sizes: an invalid type names its operand, buffer
 * sizes count 16-bit elements, and C may not overlap A or B whatever their types. C untouched. */
static void types_invalid_arguments(void **state) {
    (void)state;
    enum { M = 8, N = 6, K = 5 };
    const tsr_layout R = TSR_ROW_MAJOR;
    const tsr_transpose NT = TSR_NO_TRANS;
    const tsr_dtype H = TSR_F16, BF = TSR_BF16, F = TSR_F32;
    float c_init[M * N], c_after[M * N];
    th_fill_uniform_typed(H, c_init, M * N, -1, 1);
    cl_mem a = th_buffer_typed(dev, H, M * K), b = th_buffer_typed(dev, BF, K * N),
           c = th_buffer_from_typed(dev, H, c_init, M * N);
    cl_mem short_c = th_buffer_typed(dev, H, M * N - 1);
#define BAD(expected, needle, call)                                                                                    \
    do {                                                                                                               \
        TH_ASSERT_STATUS(call, expected);                                                                              \
        TH_ASSERT_CONTAINS(tsr_last_error(), needle);                                                                  \
    } while (0)
    const tsr_matmul_desc base = {.layout = R,
                                  .trans_a = NT,
                                  .trans_b = NT,
                                  .m = M,
                                  .n = N,
                                  .k = K,
                                  .alpha = 1,
                                  .a = {H, 0, K, 0},
                                  .b = {BF, 0, N, 0},
                                  .c = {H, 0, N, 0}};
    tsr_matmul_desc d;
    BAD(TSR_ERR_INVALID_ARG, "a.dtype", (d = base, d.a.dtype = (tsr_dtype)3, tsr_matmul(dev, &d, a, b, c, NULL, NULL)));
    BAD(TSR_ERR_INVALID_ARG, "b.dtype",
        (d = base, d.b.dtype = (tsr_dtype)-1, tsr_matmul(dev, &d, a, b, c, NULL, NULL)));
    BAD(TSR_ERR_INVALID_ARG, "c.dtype", (d = base, d.c.dtype = (tsr_dtype)7, tsr_matmul(dev, &d, a, b, c, NULL, NULL)));
    /* sizes in elements of each operand's type: M*K halves fit A in f16, not in f32 */
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer a holds",
        (d = base, d.a.dtype = F, tsr_matmul(dev, &d, a, b, c, NULL, NULL)));
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer a holds",
        (d = base, d.a.offset = 1, tsr_matmul(dev, &d, a, b, c, NULL, NULL)));
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer b holds",
        (d = base, d.b.ld = N + 1, tsr_matmul(dev, &d, a, b, c, NULL, NULL)));
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer c holds", tsr_matmul(dev, &base, a, b, short_c, NULL, NULL));
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer c holds",
        (d = base, d.c.dtype = F, tsr_matmul(dev, &d, a, b, c, NULL, NULL)));
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer c holds",
        (d = base, d.beta = 0.5f, d.c.batch_stride = M * N, d.batch = 2, tsr_matmul(dev, &d, a, b, c, NULL, NULL)));
    /* C overlapping A across types: one buffer, A in f16 at [0, 2 M K) bytes, C in f32 after it */
    size_t a_halves = M * K, c_floats = M * N;
    cl_mem shared = th_buffer_typed(dev, F, a_halves / 2 + 1 + c_floats);
    BAD(TSR_ERR_INVALID_ARG, "overlaps",
        (d = base, d.c = (tsr_matrix){F, a_halves / 2 - 1, N, 0}, tsr_matmul(dev, &d, shared, b, shared, NULL, NULL)));
    BAD(TSR_ERR_INVALID_ARG, "overlaps", /* the same bytes seen the other way round: C in bf16 inside an f32 A */
        (d = base, d.a.dtype = F, d.c = (tsr_matrix){BF, 2 * M * K - 2, N, 0},
         tsr_matmul(dev, &d, shared, b, shared, NULL, NULL)));
    BAD(TSR_ERR_INVALID_ARG, "overlaps",
        (d = base, d.b.dtype = H, d.c = (tsr_matrix){F, 1, N, 0}, tsr_matmul(dev, &d, a, shared, shared, NULL, NULL)));
    /* right after A's last byte: no overlap */
    d = base, d.c = (tsr_matrix){F, (a_halves + 1) / 2, N, 0};
    TH_ASSERT_OK(tsr_matmul(dev, &d, shared, b, shared, NULL, NULL));
#undef BAD
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    th_read_typed(dev, H, c, c_after, M * N);
    assert_memory_equal(c_after, c_init, sizeof c_init);
    clReleaseMemObject(a), clReleaseMemObject(b), clReleaseMemObject(c), clReleaseMemObject(short_c);
    clReleaseMemObject(shared);
}

/* The tsr_sgemm calls are tsr_matmul with fp32 throughout: the same bits. */
static void sgemm_is_gemm_f32(void **state) {
    (void)state;
    enum { M = 37, N = 29, K = 41 };
    float a[M * K], b[K * N], c[M * N], c1[M * N], c2[M * N];
    th_fill_uniform(a, M * K, -1, 1);
    th_fill_uniform(b, K * N, -1, 1);
    th_fill_uniform(c, M * N, -1, 1);
    cl_mem da = th_buffer_from(dev, a, M * K), db = th_buffer_from(dev, b, K * N);
    cl_mem dc1 = th_buffer_from(dev, c, M * N), dc2 = th_buffer_from(dev, c, M * N);
    TH_ASSERT_OK(tsr_sgemm(dev, TSR_COL_MAJOR, TSR_TRANS, TSR_NO_TRANS, M, N, K, 0.5f, da, 0, K, db, 0, K, 0.25f, dc1,
                           0, M, NULL, NULL));
    const tsr_matmul_desc desc = {.layout = TSR_COL_MAJOR,
                                  .trans_a = TSR_TRANS,
                                  .m = M,
                                  .n = N,
                                  .k = K,
                                  .alpha = 0.5f,
                                  .beta = 0.25f,
                                  .a = {.ld = K},
                                  .b = {.ld = K},
                                  .c = {.ld = M}};
    TH_ASSERT_OK(tsr_matmul(dev, &desc, da, db, dc2, NULL, NULL));
    th_read(dev, dc1, c1, M * N);
    th_read(dev, dc2, c2, M * N);
    assert_memory_equal(c1, c2, sizeof c1);
    clReleaseMemObject(da), clReleaseMemObject(db), clReleaseMemObject(dc1), clReleaseMemObject(dc2);
}

/* ---- invalid arguments: a status, a message naming the argument, and C untouched ---- */

static void invalid_arguments(void **state) {
    (void)state;
    enum { M = 8, N = 6, K = 5 };
    float c_init[M * N];
    th_fill_uniform(c_init, M * N, -1, 1);
    cl_mem a = th_buffer(dev, M * K), b = th_buffer(dev, K * N), c = th_buffer_from(dev, c_init, M * N);
    cl_mem small = th_buffer(dev, M * N - 1);
    const tsr_layout R = TSR_ROW_MAJOR, C = TSR_COL_MAJOR;
    const tsr_transpose NT = TSR_NO_TRANS, T = TSR_TRANS;
#define BAD(expected, needle, call)                                                                                    \
    do {                                                                                                               \
        TH_ASSERT_STATUS(call, expected);                                                                              \
        TH_ASSERT_CONTAINS(tsr_last_error(), needle);                                                                  \
    } while (0)
    BAD(TSR_ERR_INVALID_ARG, "m must", tsr_sgemm(dev, R, NT, NT, 0, N, K, 1, a, 0, K, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "n must", tsr_sgemm(dev, R, NT, NT, M, 0, K, 1, a, 0, K, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "lda", tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K - 1, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "lda", tsr_sgemm(dev, R, T, NT, M, N, K, 1, a, 0, M - 1, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "lda", tsr_sgemm(dev, C, NT, NT, M, N, K, 1, a, 0, M - 1, b, 0, K, 0, c, 0, M, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "ldb", tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, b, 0, N - 1, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "ldb", tsr_sgemm(dev, R, NT, T, M, N, K, 1, a, 0, K, b, 0, K - 1, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "ldc", tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, b, 0, N, 0, c, 0, N - 1, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "ldc", tsr_sgemm(dev, C, NT, NT, M, N, K, 1, a, 0, M, b, 0, K, 0, c, 0, M - 1, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "buffer a is NULL",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 1, NULL, 0, K, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "buffer b is NULL",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, NULL, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "buffer c is NULL",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, b, 0, N, 0, NULL, 0, N, NULL, NULL));
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer c holds",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, b, 0, N, 0, small, 0, N, NULL, NULL));
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer a holds",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 1, K, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer b holds",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, b, 0, N + 1, 0, c, 0, N, NULL, NULL));
    /* alpha = 0 does not read A or B, but their buffers must still hold the shapes given */
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer a holds",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 0, a, 1, K, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer b holds",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 0, a, 0, K, b, 0, N + 1, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer c holds",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, b, 0, N, 0, c, 3, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "layout",
        tsr_sgemm(dev, (tsr_layout)7, NT, NT, M, N, K, 1, a, 0, K, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "trans_a",
        tsr_sgemm(dev, R, (tsr_transpose)0, NT, M, N, K, 1, a, 0, K, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "trans_b",
        tsr_sgemm(dev, R, NT, (tsr_transpose)200, M, N, K, 1, a, 0, K, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_OVERFLOW, "at most",
        tsr_sgemm(dev, R, NT, NT, (size_t)1 << 40, N, K, 1, a, 0, K, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_OVERFLOW, "overflows",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, SIZE_MAX - 4, K, b, 0, N, 0, c, 0, N, NULL, NULL));
    BAD(TSR_ERR_OVERFLOW, "overflows",
        tsr_sgemm_strided_batched(dev, R, NT, NT, M, N, K, 1, a, 0, K, SIZE_MAX / 2, b, 0, N, 0, 0, c, 0, N, M * N, 3,
                                  NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "batch_count",
        tsr_sgemm_strided_batched(dev, R, NT, NT, M, N, K, 1, a, 0, K, 0, b, 0, N, 0, 0, c, 0, N, M * N, 0, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "overlap",
        tsr_sgemm_strided_batched(dev, R, NT, NT, M, N, K, 1, a, 0, K, 0, b, 0, N, 0, 0, c, 0, N, 1, 2, NULL, NULL));
    BAD(TSR_ERR_BUFFER_TOO_SMALL, "buffer c holds",
        tsr_sgemm_strided_batched(dev, R, NT, NT, M, N, K, 1, a, 0, K, 0, b, 0, N, 0, 0, c, 0, N, M * N, 2, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "device", tsr_sgemm(NULL, R, NT, NT, M, N, K, 1, a, 0, K, b, 0, N, 0, c, 0, N, NULL, NULL));
    /* A buffer and a queue from another context. */
    tsr_device *other = th_open_device();
    cl_mem foreign = th_buffer(other, M * N);
    BAD(TSR_ERR_INVALID_ARG, "another OpenCL context",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, b, 0, N, 0, foreign, 0, N, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "queue",
        tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, b, 0, N, 0, c, 0, N, tsr_device_queue(other), NULL));
    clReleaseMemObject(foreign);
    tsr_device_close(other);
    /* An image is not a buffer. */
    cl_image_format fmt = {CL_R, CL_FLOAT};
    cl_int err;
    cl_image_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = 8;
    desc.image_height = 8;
    cl_mem image = clCreateImage(tsr_device_context(dev), CL_MEM_READ_WRITE, &fmt, &desc, NULL, &err);
    if (err == CL_SUCCESS) {
        BAD(TSR_ERR_INVALID_ARG, "image", tsr_sgemm(dev, R, NT, NT, M, N, K, 1, image, 0, K, b, 0, N, 0, c, 0, N, NULL, NULL));
        clReleaseMemObject(image);
    }
#undef BAD
    /* Nothing was written by any rejected call. */
    float c_after[M * N];
    th_read(dev, c, c_after, M * N);
    assert_memory_equal(c_after, c_init, sizeof c_init);
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseMemObject(c);
    clReleaseMemObject(small);
}

/* Huge sizes, offsets, strides and batch counts: TSR_ERR_OVERFLOW before anything runs, C untouched
 * (a shared A and B, stride 0, do not bound the batch: C's extent must). */
static void huge_sizes_overflow(void **state) {
    (void)state;
    enum { M = 4, N = 3, K = 2 };
    float c_init[M * N], c_after[M * N];
    th_fill_uniform(c_init, M * N, -1, 1);
    cl_mem a = th_buffer(dev, M * K), b = th_buffer(dev, K * N), c = th_buffer_from(dev, c_init, M * N);
    const tsr_layout R = TSR_ROW_MAJOR;
    const tsr_transpose NT = TSR_NO_TRANS;
    const size_t batches[] = {SIZE_MAX, SIZE_MAX / 2 + 1, SIZE_MAX / (M * N) + 1, ((size_t)1 << 62) / (M * N) + 1};
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; ++i)
        TH_ASSERT_STATUS(tsr_sgemm_strided_batched(dev, R, NT, NT, M, N, K, 1, a, 0, K, 0, b, 0, N, 0, 0, c, 0, N, M * N,
                                                   batches[i], NULL, NULL), TSR_ERR_OVERFLOW);
    TH_ASSERT_STATUS(tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, b, 0, N, 0, c, SIZE_MAX - 1, N, NULL, NULL),
                     TSR_ERR_OVERFLOW);
    TH_ASSERT_STATUS(tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, b, SIZE_MAX / 4, N, 0, c, 0, N, NULL, NULL),
                     TSR_ERR_OVERFLOW);
    TH_ASSERT_STATUS(tsr_sgemm(dev, R, NT, NT, M, N, K, 1, a, 0, K, b, 0, N, 0, c, 0, SIZE_MAX, NULL, NULL),
                     TSR_ERR_OVERFLOW);
    TH_ASSERT_STATUS(tsr_sgemm(dev, R, NT, NT, M, N, SIZE_MAX, 1, a, 0, K, b, 0, N, 0, c, 0, N, NULL, NULL),
                     TSR_ERR_OVERFLOW);
    tsr_matmul_desc desc = {.m = M,
                            .n = N,
                            .k = K,
                            .alpha = 1,
                            .epilogue = {.bias = a, .bias_offset = SIZE_MAX - 2, .activation = TSR_ACT_RELU}};
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, a, b, c, NULL, NULL), TSR_ERR_OVERFLOW);
    desc.m = 1, desc.batch = 3, desc.c.batch_stride = N;
    desc.epilogue.bias_offset = 0, desc.epilogue.bias_stride = SIZE_MAX / 2;
    TH_ASSERT_STATUS(tsr_matmul(dev, &desc, a, b, c, NULL, NULL), TSR_ERR_OVERFLOW);
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    th_read(dev, c, c_after, M * N);
    assert_memory_equal(c_after, c_init, sizeof c_init);
    clReleaseMemObject(a), clReleaseMemObject(b), clReleaseMemObject(c);
}

/* The caller's queue is used and the returned event belongs to it. */
static void caller_queue_and_event(void **state) {
    (void)state;
    cl_int err;
    cl_command_queue q = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev), 0, &err);
    assert_int_equal(err, CL_SUCCESS);
    enum { M = 9, N = 10, K = 11 };
    float a[M * K], b[K * N], c[M * N];
    double ref[M * N];
    th_fill_uniform(a, M * K, -2, 2);
    th_fill_uniform(b, K * N, -2, 2);
    th_poison(c, M * N);
    cl_mem da = th_buffer_from(dev, a, M * K), db = th_buffer_from(dev, b, K * N), dc = th_buffer_from(dev, c, M * N);
    cl_event ev = NULL;
    TH_ASSERT_OK(tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, M, N, K, 1, da, 0, K, db, 0, N, 0, dc, 0, N,
                           q, &ev));
    cl_command_queue evq = NULL;
    clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof evq, &evq, NULL);
    assert_ptr_equal(evq, q);
    clWaitForEvents(1, &ev);
    clReleaseEvent(ev);
    clEnqueueReadBuffer(q, dc, CL_TRUE, 0, sizeof c, c, 0, NULL, NULL);
    th_ref_sgemm(1, 0, 0, M, N, K, 1, a, K, b, N, 0, c, ref, N);
    assert_true(th_rel_error_matrix(1, M, N, c, ref, N) <= 1e-6);
    clReleaseMemObject(da);
    clReleaseMemObject(db);
    clReleaseMemObject(dc);
    clReleaseCommandQueue(q);
}

/* ---- the descriptor: its zero defaults, and its rules ---- */

/* Zero fields mean row-major, no transposes, one product and packed leading dimensions: the same
 * bits as the CLBlast shim with those values spelled out; a NULL or bad descriptor is refused by
 * name, with C untouched. */
static void descriptor_defaults_and_rules(void **state) {
    (void)state;
    enum { M = 13, N = 11, K = 7 };
    float a[M * K], b[K * N], c[M * N], c1[M * N], c2[M * N];
    th_fill_uniform(a, M * K, -1, 1);
    th_fill_uniform(b, K * N, -1, 1);
    th_fill_uniform(c, M * N, -1, 1);
    cl_mem da = th_buffer_from(dev, a, M * K), db = th_buffer_from(dev, b, K * N);
    cl_mem dc1 = th_buffer_from(dev, c, M * N), dc2 = th_buffer_from(dev, c, M * N);
    TH_ASSERT_OK(tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_TRANS, M, N, K, 0.5f, da, 0, K, db, 0, K, 0.25f, dc1,
                           0, N, NULL, NULL));
    const tsr_matmul_desc base = {.trans_b = TSR_TRANS, .m = M, .n = N, .k = K, .alpha = 0.5f, .beta = 0.25f};
    TH_ASSERT_OK(tsr_matmul(dev, &base, da, db, dc2, NULL, NULL));
    th_read(dev, dc1, c1, M * N);
    th_read(dev, dc2, c2, M * N);
    assert_memory_equal(c1, c2, sizeof c1);
#define BAD(expected, needle, call)                                                                                    \
    do {                                                                                                               \
        TH_ASSERT_STATUS(call, expected);                                                                              \
        TH_ASSERT_CONTAINS(tsr_last_error(), needle);                                                                  \
    } while (0)
    tsr_matmul_desc d;
    BAD(TSR_ERR_INVALID_ARG, "desc is NULL", tsr_matmul(dev, NULL, da, db, dc2, NULL, NULL));
    BAD(TSR_ERR_INVALID_ARG, "layout",
        (d = base, d.layout = (tsr_layout)7, tsr_matmul(dev, &d, da, db, dc2, NULL, NULL)));
    BAD(TSR_ERR_INVALID_ARG, "trans_a",
        (d = base, d.trans_a = (tsr_transpose)5, tsr_matmul(dev, &d, da, db, dc2, NULL, NULL)));
    BAD(TSR_ERR_INVALID_ARG, "trans_b",
        (d = base, d.trans_b = (tsr_transpose)200, tsr_matmul(dev, &d, da, db, dc2, NULL, NULL)));
    BAD(TSR_ERR_INVALID_ARG, "m must", (d = base, d.m = 0, tsr_matmul(dev, &d, da, db, dc2, NULL, NULL)));
    BAD(TSR_ERR_INVALID_ARG, "lda", (d = base, d.a.ld = K - 1, tsr_matmul(dev, &d, da, db, dc2, NULL, NULL)));
    BAD(TSR_ERR_INVALID_ARG, "ldb", (d = base, d.b.ld = K - 1, tsr_matmul(dev, &d, da, db, dc2, NULL, NULL)));
    BAD(TSR_ERR_INVALID_ARG, "ldc", (d = base, d.c.ld = N - 1, tsr_matmul(dev, &d, da, db, dc2, NULL, NULL)));
    /* C's batch_stride 0 with a batch: every product would write one C */
    BAD(TSR_ERR_INVALID_ARG, "overlap", (d = base, d.batch = 2, tsr_matmul(dev, &d, da, db, dc2, NULL, NULL)));
    BAD(TSR_ERR_INVALID_ARG, "a.dtype",
        (d = base, d.a.dtype = (tsr_dtype)9, tsr_matmul(dev, &d, da, db, dc2, NULL, NULL)));
    cl_mem both = th_buffer(dev, M * K + M * N); /* A at 0, C right before A's end */
    BAD(TSR_ERR_INVALID_ARG, "overlaps",
        (d = base, d.c.offset = M * K - 1, tsr_matmul(dev, &d, both, db, both, NULL, NULL)));
    clReleaseMemObject(both);
    BAD(TSR_ERR_INVALID_ARG, "device", tsr_matmul(NULL, &base, da, db, dc2, NULL, NULL));
    /* the shims take zeros literally, as CLBlast does */
    BAD(TSR_ERR_INVALID_ARG, "lda = 0",
        tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_TRANS, M, N, K, 1, da, 0, 0, db, 0, K, 0, dc2, 0, N, NULL,
                  NULL));
    BAD(TSR_ERR_INVALID_ARG, "layout",
        tsr_sgemm(dev, (tsr_layout)0, TSR_NO_TRANS, TSR_TRANS, M, N, K, 1, da, 0, K, db, 0, K, 0, dc2, 0, N, NULL,
                  NULL));
#undef BAD
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    th_read(dev, dc2, c2, M * N);
    assert_memory_equal(c1, c2, sizeof c1);
    clReleaseMemObject(da), clReleaseMemObject(db), clReleaseMemObject(dc1), clReleaseMemObject(dc2);
}

/* ---- plans ---- */

/* A plan executed many times gives tsr_matmul's bits every time, on any buffers that fit it, and
 * keeps the configuration it was made with. */
static void plan_reuse(void **state) {
    (void)state;
    enum { M = 33, N = 29, K = 17, BATCH = 2, RUNS = 6 };
    const size_t na = BATCH * M * K, nb = K * N, nc = BATCH * M * N;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *bias = malloc(N * sizeof *bias);
    float *want = malloc(nc * sizeof *want), *got = malloc(nc * sizeof *got);
    th_fill_uniform(a, na, -1, 1);
    th_fill_uniform(b, nb, -1, 1);
    th_fill_uniform(bias, N, -1, 1);
    cl_mem da = th_buffer_from(dev, a, na), db = th_buffer_from(dev, b, nb), dbias = th_buffer_from(dev, bias, N);
    cl_mem want_c = th_buffer(dev, nc);
    const tsr_matmul_desc desc = {.m = M,
                                  .n = N,
                                  .k = K,
                                  .batch = BATCH,
                                  .alpha = 1.0f,
                                  .a = {.batch_stride = M * K},
                                  .c = {.batch_stride = M * N},
                                  .epilogue = {.bias = dbias, .activation = TSR_ACT_GELU_TANH}};
    TH_ASSERT_OK(tsr_matmul(dev, &desc, da, db, want_c, NULL, NULL));
    th_read(dev, want_c, want, nc);
    tsr_matmul_plan *plan = NULL;
    TH_ASSERT_OK(tsr_matmul_plan_create(dev, &desc, &plan));
    assert_non_null(plan);
    tsr_config_info made;
    TH_ASSERT_OK(tsr_matmul_plan_info(plan, &made));
    assert_string_equal(made.op, "gemm");
    assert_string_equal(made.problem_class, "batched");
    for (int r = 0; r < RUNS; ++r) {
        cl_mem c = th_buffer(dev, nc); /* a fresh C each time: the plan holds no buffer but the bias */
        cl_event ev = NULL;
        TH_ASSERT_OK(tsr_matmul_execute(plan, da, db, c, NULL, &ev));
        assert_non_null(ev);
        assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
        clReleaseEvent(ev);
        th_read(dev, c, got, nc);
        if (memcmp(got, want, nc * sizeof *got) != 0) fail_msg("plan execute %d differs from tsr_matmul", r);
        clReleaseMemObject(c);
    }
    /* each execute checks its buffers, and a refused one enqueues nothing */
    cl_mem small = th_buffer(dev, nc - 1);
    TH_ASSERT_STATUS(tsr_matmul_execute(plan, da, db, small, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "buffer c holds");
    cl_mem both = th_buffer(dev, nc); /* A and C at its start */
    TH_ASSERT_STATUS(tsr_matmul_execute(plan, both, db, both, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlaps");
    clReleaseMemObject(both);
    TH_ASSERT_STATUS(tsr_matmul_execute(NULL, da, db, small, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_matmul_plan_info(plan, NULL), TSR_ERR_INVALID_ARG);
    clReleaseMemObject(small);
    /* an override set after the plan was made does not change it; a new plan takes it */
    const char *other = "MWI=2 VW=2 NVW=1 KU=1 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0";
    if (th_try_override(dev, "gemm", other)) {
        tsr_config_info info;
        TH_ASSERT_OK(tsr_matmul_plan_info(plan, &info));
        assert_int_equal(info.source, made.source);
        assert_string_equal(info.config, made.config);
        tsr_matmul_plan *overridden = NULL;
        TH_ASSERT_OK(tsr_matmul_plan_create(dev, &desc, &overridden));
        TH_ASSERT_OK(tsr_matmul_plan_info(overridden, &info));
        assert_int_equal(info.source, TSR_CONFIG_API_OVERRIDE);
        tsr_matmul_plan_destroy(overridden);
        TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
    }
    /* bad descriptors are refused when the plan is made, *plan NULL */
    tsr_matmul_plan *bad = (tsr_matmul_plan *)&made;
    TH_ASSERT_STATUS(tsr_matmul_plan_create(dev, NULL, &bad), TSR_ERR_INVALID_ARG);
    assert_null(bad);
    TH_ASSERT_STATUS(tsr_matmul_plan_create(dev, &(tsr_matmul_desc){.m = 1, .n = 1, .batch = 2}, &bad),
                     TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlap");
    TH_ASSERT_STATUS(tsr_matmul_plan_create(dev, &desc, NULL), TSR_ERR_INVALID_ARG);
    tsr_matmul_plan_destroy(plan);
    tsr_matmul_plan_destroy(NULL);
    clReleaseMemObject(da), clReleaseMemObject(db), clReleaseMemObject(dbias), clReleaseMemObject(want_c);
    free(a), free(b), free(bias), free(want), free(got);
}

/* A plan holds its device: closed under it, the device lives on until the plan goes, and an
 * execute says the device was closed instead of touching freed memory. */
static void plan_outlives_device_close(void **state) {
    (void)state;
    enum { M = 8, N = 8, K = 8 };
    tsr_device *other = th_open_device();
    cl_mem a = th_buffer(other, M * K), b = th_buffer(other, K * N), c = th_buffer(other, M * N);
    tsr_matmul_plan *plan = NULL, *second = NULL;
    const tsr_matmul_desc desc = {.m = M, .n = N, .k = K, .alpha = 1};
    TH_ASSERT_OK(tsr_matmul_plan_create(other, &desc, &plan));
    TH_ASSERT_OK(tsr_matmul_plan_create(other, &desc, &second));
    TH_ASSERT_OK(tsr_matmul_execute(plan, a, b, c, NULL, NULL));
    tsr_device_close(other); /* finishes its queue; two plans still hold it */
    TH_ASSERT_STATUS(tsr_matmul_execute(plan, a, b, c, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "the plan's device was closed");
    tsr_config_info info;
    TH_ASSERT_OK(tsr_matmul_plan_info(plan, &info)); /* the plan's own record stays readable */
    tsr_matmul_plan_destroy(plan);
    TH_ASSERT_STATUS(tsr_matmul_execute(second, a, b, c, NULL, NULL), TSR_ERR_INVALID_ARG);
    tsr_matmul_plan_destroy(second); /* the last one: frees the device (ASan and LSan would see a leak) */
    clReleaseMemObject(a), clReleaseMemObject(b), clReleaseMemObject(c);
}

/* A plan is read-only once made: executes from several threads at once, each on its own C and its
 * own queue, all give tsr_matmul's bits. */
enum { PT_M = 40, PT_N = 24, PT_K = 32, PT_THREADS = 4, PT_RUNS = 3 };
typedef struct plan_thread {
    tsr_matmul_plan *plan;
    cl_mem a, b, c;
    cl_command_queue queue;
    tsr_status status;
    char error[256];
} plan_thread;

static void *plan_thread_main(void *arg) {
    plan_thread *t = arg;
    for (int r = 0; r < PT_RUNS && t->status == TSR_SUCCESS; ++r) {
        t->status = tsr_matmul_execute(t->plan, t->a, t->b, t->c, t->queue, NULL);
        if (t->status != TSR_SUCCESS)
            snprintf(t->error, sizeof t->error, "%s", tsr_last_error());
        else if (clFinish(t->queue) != CL_SUCCESS)
            t->status = TSR_ERR_OPENCL;
    }
    return NULL;
}

static void plan_concurrent_executes(void **state) {
    (void)state;
    float a[PT_M * PT_K], b[PT_K * PT_N], want[PT_M * PT_N], got[PT_M * PT_N];
    th_fill_uniform(a, PT_M * PT_K, -1, 1);
    th_fill_uniform(b, PT_K * PT_N, -1, 1);
    cl_mem da = th_buffer_from(dev, a, PT_M * PT_K), db = th_buffer_from(dev, b, PT_K * PT_N);
    cl_mem dw = th_buffer(dev, PT_M * PT_N);
    /* transposed B: the CPU path packs it into the device's shared workspace on every execute */
    const tsr_matmul_desc desc = {
        .trans_b = TSR_TRANS, .m = PT_M, .n = PT_N / 2, .k = PT_K, .alpha = 1, .b = {.ld = PT_K}};
    TH_ASSERT_OK(tsr_matmul(dev, &desc, da, db, dw, NULL, NULL));
    th_read(dev, dw, want, PT_M * PT_N / 2);
    tsr_matmul_plan *plan = NULL;
    TH_ASSERT_OK(tsr_matmul_plan_create(dev, &desc, &plan));
    plan_thread threads[PT_THREADS];
    pthread_t ids[PT_THREADS];
    for (int i = 0; i < PT_THREADS; ++i) {
        cl_int err;
        threads[i] = (plan_thread){.plan = plan, .a = da, .b = db, .c = th_buffer(dev, PT_M * PT_N / 2)};
        threads[i].queue = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev), 0, &err);
        assert_int_equal(err, CL_SUCCESS);
    }
    for (int i = 0; i < PT_THREADS; ++i)
        assert_int_equal(pthread_create(&ids[i], NULL, plan_thread_main, &threads[i]), 0);
    for (int i = 0; i < PT_THREADS; ++i)
        assert_int_equal(pthread_join(ids[i], NULL), 0);
    for (int i = 0; i < PT_THREADS; ++i) {
        if (threads[i].status != TSR_SUCCESS)
            fail_msg("thread %d: %s: %s", i, tsr_status_str(threads[i].status), threads[i].error);
        th_read(dev, threads[i].c, got, PT_M * PT_N / 2);
        if (memcmp(got, want, PT_M * PT_N / 2 * sizeof(float)) != 0) fail_msg("thread %d's C differs", i);
        clReleaseMemObject(threads[i].c);
        clReleaseCommandQueue(threads[i].queue);
    }
    tsr_matmul_plan_destroy(plan);
    clReleaseMemObject(da), clReleaseMemObject(db), clReleaseMemObject(dw);
}

#ifdef TSR_HAVE_CLBLAST
/* tessera and CLBlast agree on the same inputs (both also checked against the reference). */
static void matches_clblast(void **state) {
    (void)state;
    static const size_t shapes[][3] = {{64, 48, 80}, {127, 61, 33}, {256, 256, 256}};
    for (int combo = 0; combo < 8; ++combo)
        for (size_t s = 0; s < 3; ++s) {
            int row = combo & 1, ta = (combo >> 1) & 1, tb = (combo >> 2) & 1;
            size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            size_t lda = (row != ta) ? k : m, ldb = (row != tb) ? n : k, ldc = row ? n : m;
            float *a = malloc(m * k * 4), *b = malloc(k * n * 4), *c1 = malloc(m * n * 4), *c2 = malloc(m * n * 4);
            th_fill_uniform(a, m * k, -1, 1);
            th_fill_uniform(b, k * n, -1, 1);
            th_fill_uniform(c1, m * n, -1, 1);
            cl_mem da = th_buffer_from(dev, a, m * k), db = th_buffer_from(dev, b, k * n);
            cl_mem dc1 = th_buffer_from(dev, c1, m * n), dc2 = th_buffer_from(dev, c1, m * n);
            TH_ASSERT_OK(tsr_sgemm(dev, row ? TSR_ROW_MAJOR : TSR_COL_MAJOR, ta ? TSR_TRANS : TSR_NO_TRANS,
                                   tb ? TSR_TRANS : TSR_NO_TRANS, m, n, k, 0.75f, da, 0, lda, db, 0, ldb, 0.5f, dc1, 0,
                                   ldc, NULL, NULL));
            cl_command_queue q = tsr_device_queue(dev);
            assert_int_equal(CLBlastSgemm(row ? CLBlastLayoutRowMajor : CLBlastLayoutColMajor,
                                          ta ? CLBlastTransposeYes : CLBlastTransposeNo,
                                          tb ? CLBlastTransposeYes : CLBlastTransposeNo, m, n, k, 0.75f, da, 0, lda, db,
                                          0, ldb, 0.5f, dc2, 0, ldc, &q, NULL),
                             CLBlastSuccess);
            th_read(dev, dc1, c1, m * n);
            th_read(dev, dc2, c2, m * n);
            tsr_error_sum diff = {0, 0};
            for (size_t i = 0; i < m * n; ++i) tsr_error_add(&diff, c1[i], c2[i]);
            double e = tsr_error_value(&diff);
            if (!(e <= 1e-5)) fail_msg("tessera and CLBlast differ by %.3e (combo %d, %zux%zux%zu)", e, combo, m, n, k);
            clReleaseMemObject(da);
            clReleaseMemObject(db);
            clReleaseMemObject(dc1);
            clReleaseMemObject(dc2);
            free(a);
            free(b);
            free(c1);
            free(c2);
        }
}
#endif

int main(void) {
    if (small_mode()) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(all_layouts_and_transposes),
            cmocka_unit_test(random_shapes_padding_offsets),
            cmocka_unit_test(batched),
            cmocka_unit_test(epilogue_all_layouts_and_activations),
            cmocka_unit_test(epilogue_batched_and_degenerate),
            cmocka_unit_test(epilogue_scale_residual),
            cmocka_unit_test(epilogue_layernorm),
            cmocka_unit_test(configurations_even),
            cmocka_unit_test(configurations_odd),
            cmocka_unit_test(gpu_kernel_even),
            cmocka_unit_test(gpu_kernel_odd),
            cmocka_unit_test(smallm_kernel),
            cmocka_unit_test(type_combinations),
            cmocka_unit_test(types_configurations),
            cmocka_unit_test(widened_a_shapes),
            cmocka_unit_test(widened_a_nonfinite),
            cmocka_unit_test(bf16_b_even_odd),
            cmocka_unit_test(k_blocked_16bit_c_rounds_once),
            cmocka_unit_test(k_blocked_16bit_c_sums_in_fp32),
            cmocka_unit_test(split_k),
        };
        return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
    }
    /* The long cases (with empty caches) first, in an order that deals them across tests/meson.build's
     * 10 shards (case i runs in shard i mod N): row by row, each case to the shard with the least so
     * far (seconds of a cold run on a loaded 2-core Xeon; without CLBlast the cases after its
     * comparison move up one shard). */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_layouts_and_transposes),
        cmocka_unit_test(gpu_kernel_4of8),
        cmocka_unit_test(gpu_kernel_8of8),
        cmocka_unit_test(type_combinations),
        cmocka_unit_test(types_larger_shapes),
#ifdef TSR_HAVE_CLBLAST
        cmocka_unit_test(matches_clblast),
#endif
        cmocka_unit_test(types_configurations),
        cmocka_unit_test(gpu_kernel_1of8),
        cmocka_unit_test(gpu_kernel_5of8),
        cmocka_unit_test(configurations_2of4),
        cmocka_unit_test(gpu_kernel_3of8),
        cmocka_unit_test(configurations_3of4),
        cmocka_unit_test(tall_and_skinny),
        cmocka_unit_test(configurations_1of4),
        cmocka_unit_test(batched),
        cmocka_unit_test(epilogue_scale_residual),
        cmocka_unit_test(k_blocked_accumulation),
        cmocka_unit_test(k_blocked_16bit_c_rounds_once),
        cmocka_unit_test(k_blocked_16bit_c_sums_in_fp32),
        cmocka_unit_test(split_k),
        cmocka_unit_test(split_k_16bit_c_rounds_once),
        cmocka_unit_test(gpu_kernel_2of8),
        cmocka_unit_test(gpu_kernel_6of8),
        cmocka_unit_test(configurations_4of4),
        cmocka_unit_test(types_invalid_arguments),
        cmocka_unit_test(medium_conv_shapes),
        cmocka_unit_test(widened_a_shapes),
        cmocka_unit_test(widened_a_nonfinite),
        cmocka_unit_test(bf16_b_even_odd),
        cmocka_unit_test(gpu_kernel_7of8),
        cmocka_unit_test(packed_panels_are_fully_written),
        cmocka_unit_test(large_square),
        cmocka_unit_test(random_shapes_padding_offsets),
        cmocka_unit_test(plan_reuse),
        cmocka_unit_test(epilogue_all_layouts_and_activations),
        cmocka_unit_test(epilogue_batched_and_degenerate),
        cmocka_unit_test(smallm_kernel),
        cmocka_unit_test(alpha_beta_edge_cases),
        cmocka_unit_test(bad_configuration_overrides),
        cmocka_unit_test(epilogue_invalid),
        cmocka_unit_test(epilogue_residual_invalid),
        cmocka_unit_test(blas_semantics),
        cmocka_unit_test(caller_queue_and_event),
        cmocka_unit_test(plan_outlives_device_close),
        cmocka_unit_test(plan_concurrent_executes),
        cmocka_unit_test(sgemm_is_gemm_f32),
        cmocka_unit_test(descriptor_defaults_and_rules),
        cmocka_unit_test(invalid_arguments),
        cmocka_unit_test(huge_sizes_overflow),
        cmocka_unit_test(epilogue_layernorm),
        cmocka_unit_test(epilogue_layernorm_invalid),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
