/* `tessera bench layernorm`: the fused LayerNorm with its residual add against an unfused
 * baseline written the way a framework without fusion runs it (four kernels through global
 * memory: s = x + r, the row means, the row variances, the normalization; the reductions one
 * work-item a row) and against GELU's copy kernel (the
 * achievable bandwidth; its row copies rows x cols floats, 8 bytes an element). GB/s count the bytes that must move: x,
 * r and y once each, gamma and beta once. With a 16-bit --dtype, x and r are stored in the input type and y in the
 * output type for the fused rows (the baseline stays fp32), and the typed fused op is timed once more in
 * alternation with the fp32 fused op (rows "fused-paired"; the ratio of rows per second). */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LN_MAX_SIDE ((uint64_t)1 << 32)

/* The unfused baseline's kernels: one elementwise add, two per-row reductions, one elementwise
 * normalization, each a launch of its own. */
static const char unfused_source[] =
    "__kernel void ln_add(__global const float *x, __global const float *r, __global float *s) {\n"
    "    const size_t i = get_global_id(0);\n"
    "    s[i] = x[i] + r[i];\n"
    "}\n"
    "__kernel void ln_row_mean(__global const float *s, const ulong cols, __global float *mean) {\n"
    "    const size_t row = get_global_id(0);\n"
    "    float sum = 0.0f;\n"
    "    for (ulong j = 0; j < cols; ++j) sum += s[row * cols + j];\n"
    "    mean[row] = sum / (float)cols;\n"
    "}\n"
    "__kernel void ln_row_var(__global const float *s, const ulong cols, __global const float *mean,\n"
    "                      __global float *var) {\n"
    "    const size_t row = get_global_id(0);\n"
    "    float sum = 0.0f;\n"
    "    for (ulong j = 0; j < cols; ++j) { const float d = s[row * cols + j] - mean[row]; sum += d * d; }\n"
    "    var[row] = sum / (float)cols;\n"
    "}\n"
    "__kernel void ln_normalize(__global const float *s, const ulong cols, __global const float *mean,\n"
    "                        __global const float *var, const float eps, __global const float *gamma,\n"
    "                        __global const float *beta, __global float *y) {\n"
    "    const size_t i = get_global_id(0), row = i / cols, j = i % cols;\n"
    "    y[i] = (s[i] - mean[row]) * rsqrt(var[row] + eps) * gamma[j] + beta[j];\n"
    "}\n";

typedef enum { LN_FUSED, LN_UNFUSED, LN_COPY } ln_kind;

typedef struct ln_run {
    tsr_device *dev;
    ln_kind kind;
    size_t rows, cols;
    tsr_dtype in_type, out_type; /* fused: x and r, y */
    cl_mem x, r, gamma, beta, y;
    cl_mem s, mean, var;  /* the baseline's temporaries */
    cl_kernel kernels[4]; /* ln_add, ln_row_mean, ln_row_var, ln_normalize */
} ln_run;

static tsr_status ln_once(void *ctx) {
    ln_run *t = ctx;
    cl_command_queue q = tsr_device_queue(t->dev);
    tsr_status st = TSR_SUCCESS;
    const size_t n = t->rows * t->cols;
    if (t->kind == LN_FUSED) {
        const tsr_layernorm_desc d = {.rows = t->rows,
                                      .cols = t->cols,
                                      .eps = 1e-12f,
                                      .x_type = t->in_type,
                                      .residual_type = t->in_type,
                                      .y_type = t->out_type};
        st = tsr_layernorm(t->dev, &d, t->x, t->r, t->gamma, t->beta, t->y, NULL, NULL);
    } else if (t->kind == LN_COPY) {
        /* the bandwidth yardstick: n floats read and written */
        st = tsr_gelu_copy(t->dev, TSR_F32, t->x, 0, TSR_F32, t->s, 0, n, NULL, NULL);
    } else {
        const size_t sizes[4] = {n, t->rows, t->rows, n};
        for (int k = 0; k < 4 && st == TSR_SUCCESS; ++k) {
            cl_int err = clEnqueueNDRangeKernel(q, t->kernels[k], 1, NULL, &sizes[k], NULL, 0, NULL, NULL);
            if (err != CL_SUCCESS)
                st = tsr_fail_cl(err, "clEnqueueNDRangeKernel(unfused layernorm)", __FILE__, __LINE__);
        }
    }
    if (st == TSR_SUCCESS) clFinish(q);
    return st;
}

static tsr_status ln_unfused_setup(ln_run *t) {
    cl_int err;
    cl_context ctx = tsr_device_context(t->dev);
    cl_program program = clCreateProgramWithSource(ctx, 1, (const char *[]){unfused_source}, NULL, &err);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "clCreateProgramWithSource(unfused layernorm)", __FILE__, __LINE__);
    cl_device_id id = NULL;
    err = clGetCommandQueueInfo(tsr_device_queue(t->dev), CL_QUEUE_DEVICE, sizeof id, &id, NULL);
    if (err == CL_SUCCESS) err = clBuildProgram(program, 1, &id, "", NULL, NULL);
    static const char *const names[4] = {"ln_add", "ln_row_mean", "ln_row_var", "ln_normalize"};
    for (int k = 0; k < 4 && err == CL_SUCCESS; ++k)
        t->kernels[k] = clCreateKernel(program, names[k], &err);
    clReleaseProgram(program);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "building the unfused layernorm baseline", __FILE__, __LINE__);
    cl_ulong cols = t->cols;
    cl_float eps = 1e-12f;
#define ARG(k, i, v) (err == CL_SUCCESS ? (err = clSetKernelArg(t->kernels[k], i, sizeof(v), &(v))) : err)
    ARG(0, 0, t->x), ARG(0, 1, t->r), ARG(0, 2, t->s);
    ARG(1, 0, t->s), ARG(1, 1, cols), ARG(1, 2, t->mean);
    ARG(2, 0, t->s), ARG(2, 1, cols), ARG(2, 2, t->mean), ARG(2, 3, t->var);
    ARG(3, 0, t->s), ARG(3, 1, cols), ARG(3, 2, t->mean), ARG(3, 3, t->var), ARG(3, 4, eps), ARG(3, 5, t->gamma);
    ARG(3, 6, t->beta), ARG(3, 7, t->y);
#undef ARG
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "clSetKernelArg(unfused layernorm)", __FILE__, __LINE__);
    return TSR_SUCCESS;
}

/* "ROWSxCOLS,ROWSxCOLS,...", each side 1..2^32. */
static tsr_status ln_parse_sizes(const char *text, size_t (**out)[2], size_t *count) {
    *out = NULL, *count = 0;
    size_t cap = 0;
    const char *p = text;
    while (true) {
        uint64_t rows, cols;
        if (!util_scan_uint(&p, LN_MAX_SIDE, &rows) || *p++ != 'x' || !util_scan_uint(&p, LN_MAX_SIDE, &cols) ||
            rows == 0 || cols == 0 || (*p != ',' && *p != '\0')) {
            free(*out);
            *out = NULL;
            return tsr_fail(TSR_ERR_INVALID_ARG,
                            "--sizes: '%s' is not a list of ROWSxCOLS (each 1 to 2^32, e.g. 4096x768)", text);
        }
        if (*count == cap) {
            cap = cap ? 2 * cap : 8;
            size_t(*grown)[2] = realloc(*out, cap * sizeof **out);
            if (!grown) {
                free(*out);
                *out = NULL;
                return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
            }
            *out = grown;
        }
        (*out)[*count][0] = (size_t)rows, (*out)[*count][1] = (size_t)cols, ++*count;
        if (*p == '\0') return TSR_SUCCESS;
        ++p;
    }
}

static tsr_status ln_bench_shape(tsr_device *dev, const bench_options *opt, bench_report *report, size_t rows,
                                 size_t cols) {
    const size_t n = rows * cols;
    const tsr_dtype it = opt->in_type, ot = opt->out_type;
    tsr_status st = TSR_SUCCESS;
    float *hx = malloc(n * sizeof *hx), *hr = malloc(n * sizeof *hr), *hg = malloc(cols * sizeof *hg),
          *hb = malloc(cols * sizeof *hb), *hy = malloc(n * sizeof *hy);
    double *ref = malloc(n * sizeof *ref);
    ln_run t = {.dev = dev, .rows = rows, .cols = cols, .in_type = it, .out_type = ot};
    cl_mem x32 = NULL, r32 = NULL, y32 = NULL;
    cl_int err = CL_SUCCESS;
    if (!hx || !hr || !hg || !hb || !hy || !ref) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory for %zu x %zu", rows, cols);
        goto out;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ n;
    tsr_random_fill(hx, n, &seed, -1.0f, 3.0f);
    tsr_random_fill(hr, n, &seed, -2.0f, 2.0f);
    tsr_random_fill(hg, cols, &seed, 0.5f, 1.5f);
    tsr_random_fill(hb, cols, &seed, -0.5f, 0.5f);
    tsr_dtype_round_array(it, hx, n);
    tsr_dtype_round_array(it, hr, n);
    tsr_layernorm_reference(rows, cols, 1e-12, hx, hr, hg, hb, ref);
    cl_context ctx = tsr_device_context(dev);
    const size_t floats[8] = {n, n, cols, cols, n, n, rows, rows};
    cl_mem *mems[8] = {&x32, &r32, &t.gamma, &t.beta, &y32, &t.s, &t.mean, &t.var};
    for (int i = 0; i < 8 && err == CL_SUCCESS; ++i)
        *mems[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, floats[i] * sizeof(float), NULL, &err);
    if (err == CL_SUCCESS && (it != TSR_F32 || ot != TSR_F32)) {
        t.x = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * tsr_dtype_size(it), NULL, &err);
        if (err == CL_SUCCESS) t.r = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * tsr_dtype_size(it), NULL, &err);
        if (err == CL_SUCCESS) t.y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * tsr_dtype_size(ot), NULL, &err);
    }
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        goto out;
    }
    const bool typed = t.x != NULL;
    if ((st = tsr_upload(dev, x32, hx, n)) != TSR_SUCCESS || (st = tsr_upload(dev, r32, hr, n)) != TSR_SUCCESS ||
        (st = tsr_upload(dev, t.gamma, hg, cols)) != TSR_SUCCESS ||
        (st = tsr_upload(dev, t.beta, hb, cols)) != TSR_SUCCESS ||
        (typed && ((st = tsr_upload_typed(dev, t.x, it, hx, n)) != TSR_SUCCESS ||
                   (st = tsr_upload_typed(dev, t.r, it, hr, n)) != TSR_SUCCESS)))
        goto out;
    /* Rows: the fused op in the asked types, fp32 fused when those are 16-bit, the baseline, the copy. */
    typedef struct {
        const char *impl;
        ln_kind kind;
        bool typed;
    } ln_impl;
    ln_impl impls[4];
    int nimpls = 0;
    if (typed) impls[nimpls++] = (ln_impl){"fused", LN_FUSED, true};
    impls[nimpls++] = (ln_impl){"fused", LN_FUSED, false};
    impls[nimpls++] = (ln_impl){"unfused", LN_UNFUSED, false};
    impls[nimpls++] = (ln_impl){"copy-kernel", LN_COPY, false};
    double gbps[4] = {0};
    for (int k = 0; k < nimpls && st == TSR_SUCCESS; ++k) {
        ln_run r = t;
        r.kind = impls[k].kind;
        if (!impls[k].typed) r.x = x32, r.r = r32, r.y = y32, r.in_type = r.out_type = TSR_F32;
        if (r.kind == LN_UNFUSED && (st = ln_unfused_setup(&r)) != TSR_SUCCESS) break;
        for (size_t i = 0; i < n; ++i)
            hy[i] = NAN;
        bench_row row = {0};
        if ((st = tsr_upload_typed(dev, r.y, r.out_type, hy, n)) == TSR_SUCCESS &&
            (st = bench_time(ln_once, &r, opt->budget_s, 5, 200, &row)) == TSR_SUCCESS && r.kind != LN_COPY)
            st = tsr_download_typed(dev, r.y, r.out_type, hy, n);
        for (int i = 0; i < 4; ++i)
            if (r.kernels[i]) clReleaseKernel(r.kernels[i]);
        if (st != TSR_SUCCESS) break;
        strcpy(row.op, "layernorm");
        snprintf(row.shape, sizeof row.shape, "%zux%zu +res", rows, cols);
        tsr_strlcpy(row.impl, impls[k].impl, sizeof row.impl);
        tsr_dtype_spec_format(r.in_type, r.out_type, row.dtype, sizeof row.dtype);
        const double bytes =
            (double)n * (double)(2 * tsr_dtype_size(r.in_type) + tsr_dtype_size(r.out_type)) + 8.0 * (double)cols;
        row.gbps = (r.kind == LN_COPY ? 8.0 * (double)n : bytes) / (row.time_ms * 1e6);
        row.rel_err = r.kind == LN_COPY ? -1 : tsr_rel_error(hy, ref, n);
        gbps[k] = row.gbps;
        if ((st = bench_add(report, &row)) != TSR_SUCCESS) break;
        if (!opt->quiet) {
            char err_text[16] = "-"; /* the copy is not checked */
            if (row.rel_err >= 0) snprintf(err_text, sizeof err_text, "%.1e", row.rel_err);
            printf("%-14s %-12s %-8s %10.3f %8.1f %9s\n", row.shape, row.impl, row.dtype[0] ? row.dtype : "f32",
                   row.time_ms, row.gbps, err_text);
            fflush(stdout);
        }
    }
    /* 16-bit storage: the typed fused op once more in alternation with the fp32 fused op (both
     * see the same machine), the ratio of rows per second the 16-bit storage buys. */
    double paired_ratio[3] = {0};
    if (st == TSR_SUCCESS && typed) {
        ln_run a = t, b = t;
        a.kind = b.kind = LN_FUSED;
        b.x = x32, b.r = r32, b.y = y32, b.in_type = b.out_type = TSR_F32;
        bench_row rows2[2];
        memset(rows2, 0, sizeof rows2);
        for (int k = 0; k < 2 && st == TSR_SUCCESS; ++k) {
            ln_run *r = k ? &b : &a;
            for (size_t i = 0; i < n; ++i)
                hy[i] = NAN;
            st = tsr_upload_typed(dev, r->y, r->out_type, hy, n);
        }
        if (st == TSR_SUCCESS)
            st = bench_time_paired(ln_once, &a, ln_once, &b, opt->budget_s, 5, 400, &rows2[0], &rows2[1], paired_ratio);
        for (int k = 0; k < 2 && st == TSR_SUCCESS; ++k) {
            ln_run *r = k ? &b : &a;
            bench_row *row = &rows2[k];
            if ((st = tsr_download_typed(dev, r->y, r->out_type, hy, n)) != TSR_SUCCESS) break;
            strcpy(row->op, "layernorm");
            snprintf(row->shape, sizeof row->shape, "%zux%zu +res", rows, cols);
            tsr_strlcpy(row->impl, "fused-paired", sizeof row->impl);
            tsr_dtype_spec_format(r->in_type, r->out_type, row->dtype, sizeof row->dtype);
            row->gbps = ((double)n * (double)(2 * tsr_dtype_size(r->in_type) + tsr_dtype_size(r->out_type)) +
                         8.0 * (double)cols) /
                        (row->time_ms * 1e6);
            row->rel_err = tsr_rel_error(hy, ref, n);
            if ((st = bench_add(report, row)) != TSR_SUCCESS) break;
            if (!opt->quiet)
                printf("%-14s %-12s %-8s %10.3f %8.1f %9.1e\n", row->shape, row->impl, row->dtype[0] ? row->dtype : "f32",
                       row->time_ms, row->gbps, row->rel_err);
        }
        if (st == TSR_SUCCESS && !opt->quiet)
            printf("%zux%zu timed in alternation (%d pairs): fused %s = %.2f x the rows/s of fp32 (pairs: median; %.2f to "
                   "%.2f)\n",
                   rows, cols, rows2[0].runs, rows2[0].dtype, 1.0 / paired_ratio[0], 1.0 / paired_ratio[2], 1.0 / paired_ratio[1]);
    }
    if (st == TSR_SUCCESS && !opt->quiet) {
        const int f = typed ? 1 : 0;
        printf("%zux%zu fused = %.2f x unfused, %.2f x copy-kernel (fp32)\n", rows, cols, gbps[f] / gbps[f + 1],
               gbps[f] / gbps[f + 2]);
    }
out:
    cl_mem all[] = {x32, r32, y32, t.gamma, t.beta, t.s, t.mean, t.var, t.x, t.r, t.y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        if (all[i]) clReleaseMemObject(all[i]);
    free(hx);
    free(hr);
    free(hg);
    free(hb);
    free(hy);
    free(ref);
    return st;
}

tsr_status bench_layernorm(tsr_device *dev, const bench_options *opt, bench_report *report) {
    size_t(*sizes)[2] = NULL, nsizes = 0;
    tsr_status st = TSR_SUCCESS;
    if (opt->layers)
        st = tsr_fail(TSR_ERR_INVALID_ARG, "--layers: only conv2d has layers");
    else if (st == TSR_SUCCESS && opt->max_unfused)
        st = tsr_fail(TSR_ERR_INVALID_ARG, "--max-unfused: only attention has unfused pipelines");
    else if (st == TSR_SUCCESS && opt->clblast_xgemm)
        st = tsr_fail(TSR_ERR_INVALID_ARG, "--clblast-xgemm: only for the gemm benchmark");
    if (st == TSR_SUCCESS) st = ln_parse_sizes(opt->sizes, &sizes, &nsizes);
    /* Every shape checked against the device and the host before the first one runs. */
    for (size_t i = 0; i < nsizes && st == TSR_SUCCESS; ++i) {
        size_t n;
        char what[64];
        snprintf(what, sizeof what, "layernorm of %zu x %zu", sizes[i][0], sizes[i][1]);
        if ((st = tsr_size_mad(what, sizes[i][0], sizes[i][1], 0, &n)) != TSR_SUCCESS) break;
        if (n > SIZE_MAX / 16) {
            st = tsr_fail(TSR_ERR_OVERFLOW, "--sizes: %s is too large", what);
            break;
        }
        const size_t bytes[6] = {
            4 * n, 4 * n, 4 * n, 4 * n, n * tsr_dtype_size(opt->in_type) * 2, n * tsr_dtype_size(opt->out_type)};
        st = util_check_memory(dev, what, bytes, 6, 5 * 4 * n + 8 * n);
    }
    if (st == TSR_SUCCESS && !opt->quiet)
        printf("%-14s %-12s %-8s %10s %8s %9s\n", "shape", "impl", "dtype", "ms", "GB/s", "rel_err");
    for (size_t i = 0; i < nsizes && st == TSR_SUCCESS; ++i)
        st = ln_bench_shape(dev, opt, report, sizes[i][0], sizes[i][1]);
    free(sizes);
    return st;
}
