/* The GEMM op: parameter space, defaults, argument checks and launch of cl/gemm.cl. */
#include "internal.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { P_MWI, P_NWI, P_VW, P_WGM, P_WGN, P_KU, GEMM_NPARAMS };

static const int mwi_values[] = {1, 2, 4, 6, 8};
static const int nwi_values[] = {4, 8, 16, 32};
static const int vw_values[] = {1, 2, 4, 8, 16};
static const int wg_values[] = {1, 2, 4, 8, 16};
static const int ku_values[] = {1, 2, 4, 8};

static const tsr_param_def gemm_params[GEMM_NPARAMS] = {
    {"MWI", mwi_values, 5}, {"NWI", nwi_values, 4}, {"VW", vw_values, 5},
    {"WGM", wg_values, 5},  {"WGN", wg_values, 5},  {"KU", ku_values, 4},
};

/* Variant bits: which program a launch needs besides the tile configuration. */
enum { VARIANT_TA = 1, VARIANT_TB = 2, VARIANT_BETA0 = 4, GEMM_NVARIANTS = 8 };

static void gemm_default_config(const tsr_device *dev, tsr_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    int *v = cfg->values;
    if (dev->info.type == TSR_DEVICE_CPU) {
        /* PoCL runs one work-group per thread and loops over its items: one item per group
         * with a large register tile and wide vectors lets its compiler keep the tile in registers. */
        v[P_MWI] = 6; v[P_NWI] = 16; v[P_VW] = 8; v[P_WGM] = 1; v[P_WGN] = 1; v[P_KU] = 4;
    } else {
        v[P_MWI] = 4; v[P_NWI] = 4; v[P_VW] = 4; v[P_WGM] = 8; v[P_WGN] = 16; v[P_KU] = 4;
    }
}

static bool gemm_config_ok(const tsr_device *dev, const void *problem, const tsr_config *cfg) {
    (void)problem;
    const int *v = cfg->values;
    if (v[P_NWI] % v[P_VW] != 0) return false;
    if (v[P_MWI] * v[P_NWI] > 128) return false; /* beyond this the tile spills on every device we know */
    size_t wg = (size_t)v[P_WGM] * (size_t)v[P_WGN];
    if (wg > dev->info.max_work_group_size) return false;
    if ((size_t)v[P_WGN] > dev->info.max_work_item_sizes[0] || (size_t)v[P_WGM] > dev->info.max_work_item_sizes[1])
        return false;
    return true;
}

static void gemm_build_options(const tsr_config *cfg, int variant, char *out, size_t size) {
    const int *v = cfg->values;
    snprintf(out, size, "-DMWI=%d -DNWI=%d -DVW=%d -DWGM=%d -DWGN=%d -DKU=%d -DTA=%d -DTB=%d -DBETA0=%d", v[P_MWI],
             v[P_NWI], v[P_VW], v[P_WGM], v[P_WGN], v[P_KU], (variant & VARIANT_TA) ? 1 : 0,
             (variant & VARIANT_TB) ? 1 : 0, (variant & VARIANT_BETA0) ? 1 : 0);
}

static bool is_trans(tsr_transpose t) { return t == TSR_TRANS || t == TSR_CONJ_TRANS; }

/* A GEMM in the kernel's canonical form: row-major C, A and B possibly transposed. */
typedef struct gemm_problem {
    size_t m, n, k, batch;
    bool ta, tb;
    float alpha, beta;
    cl_mem a, b, c;
    size_t a_off, b_off, c_off, lda, ldb, ldc, a_stride, b_stride, c_stride;
} gemm_problem;

static tsr_status check_transpose(tsr_transpose t, const char *name) {
    if (t == TSR_NO_TRANS || t == TSR_TRANS || t == TSR_CONJ_TRANS) return TSR_SUCCESS;
    return tsr_fail(TSR_ERR_INVALID_ARG, "%s must be TSR_NO_TRANS, TSR_TRANS or TSR_CONJ_TRANS (got %d)", name, (int)t);
}

/* Check every argument against the real buffers, then describe the call in canonical form. */
static tsr_status gemm_validate(const tsr_device *dev, tsr_layout layout, tsr_transpose ta, tsr_transpose tb, size_t m,
                                size_t n, size_t k, float alpha, cl_mem a, size_t a_off, size_t lda, size_t a_stride,
                                cl_mem b, size_t b_off, size_t ldb, size_t b_stride, float beta, cl_mem c, size_t c_off,
                                size_t ldc, size_t c_stride, size_t batch, gemm_problem *p) {
    tsr_status status;
    if (!dev) return tsr_fail(TSR_ERR_INVALID_ARG, "device is NULL");
    if (layout != TSR_ROW_MAJOR && layout != TSR_COL_MAJOR)
        return tsr_fail(TSR_ERR_INVALID_ARG, "layout must be TSR_ROW_MAJOR or TSR_COL_MAJOR (got %d)", (int)layout);
    if ((status = check_transpose(ta, "trans_a")) != TSR_SUCCESS) return status;
    if ((status = check_transpose(tb, "trans_b")) != TSR_SUCCESS) return status;
    if (m == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "m must be at least 1");
    if (n == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "n must be at least 1");
    if (batch == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "batch_count must be at least 1");
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return tsr_fail(TSR_ERR_OVERFLOW, "m, n and k must each be at most %d", INT_MAX);

    bool row = layout == TSR_ROW_MAJOR;
    /* Stored shapes: lines x line_length with the leading dimension along lines. */
    size_t a_lines = (row != is_trans(ta)) ? m : k, a_len = (row != is_trans(ta)) ? k : m;
    size_t b_lines = (row != is_trans(tb)) ? k : n, b_len = (row != is_trans(tb)) ? n : k;
    size_t c_lines = row ? m : n, c_len = row ? n : m;
    bool reads_ab = k > 0 && alpha != 0.0f;
    if (lda < (a_len ? a_len : 1))
        return tsr_fail(TSR_ERR_INVALID_ARG, "lda = %zu is smaller than the %zu it must be at least", lda, a_len ? a_len : 1);
    if (ldb < (b_len ? b_len : 1))
        return tsr_fail(TSR_ERR_INVALID_ARG, "ldb = %zu is smaller than the %zu it must be at least", ldb, b_len ? b_len : 1);
    if (ldc < c_len)
        return tsr_fail(TSR_ERR_INVALID_ARG, "ldc = %zu is smaller than the %zu it must be at least", ldc, c_len);
    if (lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
        return tsr_fail(TSR_ERR_OVERFLOW, "leading dimensions must be at most %d", INT_MAX);
    size_t a_need, b_need, c_need;
    if ((status = tsr_matrix_extent("a", a_off, a_lines, a_len, lda, a_stride, batch, &a_need)) != TSR_SUCCESS ||
        (status = tsr_matrix_extent("b", b_off, b_lines, b_len, ldb, b_stride, batch, &b_need)) != TSR_SUCCESS ||
        (status = tsr_matrix_extent("c", c_off, c_lines, c_len, ldc, c_stride, batch, &c_need)) != TSR_SUCCESS)
        return status;
    if (batch > 1) {
        /* Overlapping outputs would race; inputs may alias (a shared weight, stride 0). */
        size_t c_span = (c_lines - 1) * ldc + c_len;
        if (c_stride < c_span)
            return tsr_fail(TSR_ERR_INVALID_ARG, "c_stride = %zu makes the batch's C matrices overlap (each spans %zu)",
                            c_stride, c_span);
    }
    if ((status = tsr_check_buffer(dev, a, "a", reads_ab ? a_need : 0)) != TSR_SUCCESS ||
        (status = tsr_check_buffer(dev, b, "b", reads_ab ? b_need : 0)) != TSR_SUCCESS ||
        (status = tsr_check_buffer(dev, c, "c", c_need)) != TSR_SUCCESS)
        return status;

    /* Column-major C is row-major C^T = op(B)^T op(A)^T: swap the operands. */
    memset(p, 0, sizeof *p);
    p->batch = batch;
    p->alpha = reads_ab ? alpha : 0.0f;
    p->beta = beta;
    p->k = reads_ab ? k : 0;
    p->c = c; p->c_off = c_off; p->ldc = ldc; p->c_stride = c_stride;
    if (row) {
        p->m = m; p->n = n; p->ta = is_trans(ta); p->tb = is_trans(tb);
        p->a = a; p->a_off = a_off; p->lda = lda; p->a_stride = a_stride;
        p->b = b; p->b_off = b_off; p->ldb = ldb; p->b_stride = b_stride;
    } else {
        p->m = n; p->n = m; p->ta = is_trans(tb); p->tb = is_trans(ta);
        p->a = b; p->a_off = b_off; p->lda = ldb; p->a_stride = b_stride;
        p->b = a; p->b_off = a_off; p->ldb = lda; p->b_stride = a_stride;
    }
    return TSR_SUCCESS;
}

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

static tsr_status gemm_launch(tsr_device *dev, const gemm_problem *p, const tsr_config *cfg, cl_command_queue queue,
                              cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    const int *v = cfg->values;
    int variant = (p->ta ? VARIANT_TA : 0) | (p->tb ? VARIANT_TB : 0) | (p->beta == 0.0f ? VARIANT_BETA0 : 0);
    char options[512];
    gemm_build_options(cfg, variant, options, sizeof options);
    cl_kernel kernel = NULL;
    TSR_CHECK(tsr_get_kernel(dev, "gemm", options, "gemm", &kernel), out);
    cl_int M = (cl_int)p->m, N = (cl_int)p->n, K = (cl_int)p->k;
    cl_int lda = (cl_int)p->lda, ldb = (cl_int)p->ldb, ldc = (cl_int)p->ldc;
    cl_ulong ao = p->a_off, bo = p->b_off, co = p->c_off, as = p->a_stride, bs = p->b_stride, cs = p->c_stride;
    cl_uint arg = 0;
#define SET(x) TSR_CL_CHECK(clSetKernelArg(kernel, arg++, sizeof(x), &(x)), out)
    SET(M); SET(N); SET(K); SET(p->alpha); SET(p->beta);
    SET(p->a); SET(ao); SET(lda); SET(as);
    SET(p->b); SET(bo); SET(ldb); SET(bs);
    SET(p->c); SET(co); SET(ldc); SET(cs);
#undef SET
    size_t local[3] = {(size_t)v[P_WGN], (size_t)v[P_WGM], 1};
    size_t global[3] = {round_up((p->n + v[P_NWI] - 1) / v[P_NWI], local[0]),
                        round_up((p->m + v[P_MWI] - 1) / v[P_MWI], local[1]), p->batch};
    TSR_CL_CHECK(clEnqueueNDRangeKernel(queue, kernel, 3, NULL, global, local, 0, NULL, event), out);
out:
    if (kernel) clReleaseKernel(kernel);
    return status;
}

tsr_status tsr_sgemm_strided_batched(tsr_device *dev, tsr_layout layout, tsr_transpose ta, tsr_transpose tb, size_t m,
                                     size_t n, size_t k, float alpha, cl_mem a, size_t a_off, size_t lda,
                                     size_t a_stride, cl_mem b, size_t b_off, size_t ldb, size_t b_stride, float beta,
                                     cl_mem c, size_t c_off, size_t ldc, size_t c_stride, size_t batch,
                                     cl_command_queue queue, cl_event *event) {
    tsr_clear_diagnostics();
    if (event) *event = NULL;
    gemm_problem p;
    tsr_status status = gemm_validate(dev, layout, ta, tb, m, n, k, alpha, a, a_off, lda, a_stride, b, b_off, ldb,
                                      b_stride, beta, c, c_off, ldc, c_stride, batch, &p);
    if (status != TSR_SUCCESS) return status;
    cl_command_queue q;
    if ((status = tsr_resolve_queue(dev, queue, &q)) != TSR_SUCCESS) return status;
    tsr_config cfg;
    if ((status = tsr_op_config(dev, &tsr_op_gemm, &cfg)) != TSR_SUCCESS) return status;
    return gemm_launch(dev, &p, &cfg, q, event);
}

tsr_status tsr_sgemm(tsr_device *dev, tsr_layout layout, tsr_transpose ta, tsr_transpose tb, size_t m, size_t n,
                     size_t k, float alpha, cl_mem a, size_t a_off, size_t lda, cl_mem b, size_t b_off, size_t ldb,
                     float beta, cl_mem c, size_t c_off, size_t ldc, cl_command_queue queue, cl_event *event) {
    return tsr_sgemm_strided_batched(dev, layout, ta, tb, m, n, k, alpha, a, a_off, lda, 0, b, b_off, ldb, 0, beta, c,
                                     c_off, ldc, 0, 1, queue, event);
}

/* ---- demo: one GEMM on random data, checked against a double-precision reference ---- */

static tsr_status gemm_demo(tsr_device *dev, char *summary, size_t size) {
    const size_t M = 256, N = 256, K = 256;
    tsr_status status = TSR_SUCCESS;
    float *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b), *c = malloc(M * N * sizeof *c);
    cl_mem da = NULL, db = NULL, dc = NULL;
    cl_event ev = NULL;
    if (!a || !b || !c) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    unsigned seed = 12345u;
    for (size_t i = 0; i < M * K; ++i) a[i] = (float)((seed = seed * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
    for (size_t i = 0; i < K * N; ++i) b[i] = (float)((seed = seed * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
    cl_int err;
    da = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, M * K * sizeof(float), NULL, &err);
    TSR_CL_CHECK(err, out);
    db = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, K * N * sizeof(float), NULL, &err);
    TSR_CL_CHECK(err, out);
    dc = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, M * N * sizeof(float), NULL, &err);
    TSR_CL_CHECK(err, out);
    TSR_CHECK(tsr_upload(dev, da, a, M * K), out);
    TSR_CHECK(tsr_upload(dev, db, b, K * N), out);
    double best_ms = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
        TSR_CHECK(tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, M, N, K, 1.0f, da, 0, K, db, 0, N, 0.0f, dc,
                            0, N, NULL, &ev), out);
        TSR_CL_CHECK(clWaitForEvents(1, &ev), out);
        cl_ulong t0 = 0, t1 = 0;
        if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
            clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS && t1 > t0)
            best_ms = fmin(best_ms, (double)(t1 - t0) * 1e-6);
        clReleaseEvent(ev);
        ev = NULL;
    }
    TSR_CHECK(tsr_download(dev, dc, c, M * N), out);
    double num = 0, den = 0;
    for (size_t i = 0; i < M; ++i)
        for (size_t j = 0; j < N; ++j) {
            double r = 0;
            for (size_t l = 0; l < K; ++l) r += (double)a[i * K + l] * b[l * N + j];
            num += (c[i * N + j] - r) * (c[i * N + j] - r);
            den += r * r;
        }
    double rel = sqrt(num / den);
    snprintf(summary, size, "sgemm %zux%zux%zu: %.3f ms, %.1f GFLOP/s, relative error %.2e%s", M, N, K, best_ms,
             2.0 * M * N * K / (best_ms * 1e6), rel, rel <= 1e-5 ? "" : "  (WRONG)");
    if (!(rel <= 1e-5)) status = tsr_fail(TSR_ERR_OPENCL, "gemm demo: relative error %.3e exceeds 1e-5", rel);
out:
    if (ev) clReleaseEvent(ev);
    if (da) clReleaseMemObject(da);
    if (db) clReleaseMemObject(db);
    if (dc) clReleaseMemObject(dc);
    free(a);
    free(b);
    free(c);
    return status;
}

const tsr_op tsr_op_gemm = {
    .name = "gemm",
    .source_name = "gemm",
    .params = gemm_params,
    .nparams = GEMM_NPARAMS,
    .default_config = gemm_default_config,
    .config_ok = gemm_config_ok,
    .nvariants = GEMM_NVARIANTS,
    .build_options = gemm_build_options,
    .demo = gemm_demo,
};
