/* `tessera bench gelu`: the fused GELU kernel, the unfused baseline and a copy kernel of the
 * same size (the achievable bandwidth), in GB/s counted as the bytes that must move (read x
 * once, write y once); then GEMM's bias + GELU epilogue against a separate GELU pass and
 * against CLBlast's sgemm followed by tessera's GELU, at a BERT feed-forward shape. With a
 * 16-bit --dtype the elementwise part times the 16-bit fused GELU in alternation with the fp32
 * one and with the 16-bit copy kernel instead; the epilogue stays fp32. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TSR_HAVE_CLBLAST
#include <clblast_c.h>
#endif

#define GELU_MAX_ELEMENTS ((uint64_t)1 << 40) /* 4 TiB per buffer: the memory checks refuse long before */

tsr_status bench_gelu_once(void *ctx) {
    gelu_run *r = ctx;
    tsr_status st = TSR_SUCCESS;
    for (int call = 0; call < (r->calls > 1 ? r->calls : 1) && st == TSR_SUCCESS; ++call) switch (r->kind) {
    case GELU_RUN_FUSED:
        st = tsr_gelu(r->dev, &(tsr_gelu_desc){.mode = r->mode, .n = r->n, .x_type = r->x_type, .y_type = r->y_type},
                      r->x, r->y, NULL, NULL);
        break;
    case GELU_RUN_UNFUSED:
        st = tsr_gelu_unfused(r->dev, &(tsr_gelu_desc){.mode = r->mode, .n = r->n}, r->x, r->y, NULL, NULL);
        break;
    case GELU_RUN_COPY_KERNEL:
        st = tsr_gelu_copy(r->dev, r->x_type, r->x, 0, r->y_type, r->y, 0, r->n, NULL, NULL);
        break;
    case GELU_RUN_COPY_BUFFER: {
        cl_int err = clEnqueueCopyBuffer(tsr_device_queue(r->dev), r->x, r->y, 0, 0, r->n * tsr_dtype_size(r->x_type),
                                         0, NULL, NULL);
        if (err != CL_SUCCESS) st = tsr_fail_cl(err, "clEnqueueCopyBuffer", __FILE__, __LINE__);
        break;
    }
    }
    if (st == TSR_SUCCESS) clFinish(tsr_device_queue(r->dev));
    return st;
}

/* GELU's metric, max |y - GELU(x)| / max(1, |x|) (with a 16-bit y its rounding included), or for
 * copies max |y - x| / max(1, |x|) with x rounded to y's type (a copy must be exact). */
static double gelu_max_error(const gelu_run *r, const float *x, const float *y) {
    if (r->kind == GELU_RUN_FUSED || r->kind == GELU_RUN_UNFUSED) return tsr_gelu_max_error(r->mode, x, y, r->n);
    double worst = 0;
    for (size_t i = 0; i < r->n; ++i) {
        double e = fabs((double)y[i] - tsr_dtype_round(r->y_type, x[i])) / fmax(1.0, fabs((double)x[i]));
        worst = isnan(e) ? INFINITY : fmax(worst, e);
    }
    return worst;
}

static tsr_status bench_elementwise(tsr_device *dev, const bench_options *opt, bench_report *report, size_t n) {
    tsr_status st = TSR_SUCCESS;
    float *hx = malloc(n * sizeof *hx), *hy = malloc(n * sizeof *hy);
    cl_mem x = NULL, y = NULL;
    cl_int err = CL_SUCCESS;
    if (!hx || !hy) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory for %zu elements", n);
        goto out;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ n;
    tsr_random_fill(hx, n, &seed, -5.0f, 5.0f);
    x = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 4, hx, &err);
    if (err == CL_SUCCESS) y = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, n * 4, NULL, &err);
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        goto out;
    }
    static const struct {
        const char *impl;
        gelu_run_kind kind;
        tsr_gelu_mode mode;
    } impls[] = {
        {"copy-kernel", GELU_RUN_COPY_KERNEL, TSR_GELU_TANH},   {"clEnqueueCopyBuffer", GELU_RUN_COPY_BUFFER, TSR_GELU_TANH},
        {"fused-tanh", GELU_RUN_FUSED, TSR_GELU_TANH},          {"unfused-tanh", GELU_RUN_UNFUSED, TSR_GELU_TANH},
        {"fused-erf", GELU_RUN_FUSED, TSR_GELU_ERF},            {"unfused-erf", GELU_RUN_UNFUSED, TSR_GELU_ERF},
    };
    double gbps[6] = {0};
    for (size_t k = 0; k < 6 && st == TSR_SUCCESS; ++k) {
        gelu_run r = {.dev = dev, .kind = impls[k].kind, .mode = impls[k].mode, .x = x, .y = y, .n = n};
        for (size_t i = 0; i < n; ++i) hy[i] = NAN;
        if ((st = tsr_upload(dev, y, hy, n)) != TSR_SUCCESS) break;
        bench_row row = {0};
        if ((st = bench_time(bench_gelu_once, &r, opt->budget_s, 5, 200, &row)) != TSR_SUCCESS) break;
        if ((st = tsr_download(dev, y, hy, n)) != TSR_SUCCESS) break;
        strcpy(row.op, "gelu");
        snprintf(row.shape, sizeof row.shape, "%zu", n);
        tsr_strlcpy(row.impl, impls[k].impl, sizeof row.impl);
        row.gbps = 8.0 * n / (row.time_ms * 1e6);
        row.rel_err = gelu_max_error(&r, hx, hy);
        gbps[k] = row.gbps;
        if ((st = bench_add(report, &row)) != TSR_SUCCESS) break;
        if (!opt->quiet) {
            printf("%-10zu %-20s %10.3f %8.1f %9.1e\n", n, row.impl, row.time_ms, row.gbps, row.rel_err);
            fflush(stdout);
        }
    }
    if (st == TSR_SUCCESS && !opt->quiet)
        printf("%-10zu fused-tanh = %.2f x copy-kernel, %.2f x unfused-tanh; fused-erf = %.2f x copy-kernel, %.2f x "
               "unfused-erf\n", n, gbps[2] / gbps[0], gbps[2] / gbps[3], gbps[4] / gbps[0], gbps[4] / gbps[5]);
    /* The copy kernel and each fused form once more, in alternation: their ratio, the GELU
     * target, with both timed under the same load. Each is checked once more afterwards on a
     * poisoned output. */
    static const struct {
        tsr_gelu_mode mode;
        const char *copy_name, *fused_name, *form;
    } paired[] = {{TSR_GELU_TANH, "copy-kernel-paired", "fused-tanh-paired", "fused-tanh"},
                  {TSR_GELU_ERF, "copy-kernel-paired-erf", "fused-erf-paired", "fused-erf"}};
    for (size_t f = 0; f < sizeof paired / sizeof paired[0] && st == TSR_SUCCESS; ++f) {
        gelu_run pair[2] = {{.dev = dev, .kind = GELU_RUN_COPY_KERNEL, .mode = paired[f].mode, .x = x, .y = y, .n = n},
                            {.dev = dev, .kind = GELU_RUN_FUSED, .mode = paired[f].mode, .x = x, .y = y, .n = n}};
        bench_row rows[2];
        memset(rows, 0, sizeof rows);
        double ratio[3];
        st = bench_time_paired(bench_gelu_once, &pair[0], bench_gelu_once, &pair[1], opt->budget_s, 5, 400, &rows[0],
                               &rows[1], ratio);
        const char *const names[2] = {paired[f].copy_name, paired[f].fused_name};
        for (int k = 0; k < 2 && st == TSR_SUCCESS; ++k) {
            for (size_t i = 0; i < n; ++i) hy[i] = NAN;
            if ((st = tsr_upload(dev, y, hy, n)) != TSR_SUCCESS) break;
            if ((st = bench_gelu_once(&pair[k])) != TSR_SUCCESS) break;
            if ((st = tsr_download(dev, y, hy, n)) != TSR_SUCCESS) break;
            strcpy(rows[k].op, "gelu");
            snprintf(rows[k].shape, sizeof rows[k].shape, "%zu", n);
            tsr_strlcpy(rows[k].impl, names[k], sizeof rows[k].impl);
            rows[k].gbps = 8.0 * n / (rows[k].time_ms * 1e6);
            rows[k].rel_err = gelu_max_error(&pair[k], hx, hy);
            if ((st = bench_add(report, &rows[k])) != TSR_SUCCESS) break;
            if (!opt->quiet)
                printf("%-10zu %-22s %10.3f %8.1f %9.1e\n", n, rows[k].impl, rows[k].time_ms, rows[k].gbps,
                       rows[k].rel_err);
        }
        if (st == TSR_SUCCESS && !opt->quiet)
            printf("%-10zu timed in alternation (%d pairs): %s = %.2f x copy-kernel (pairs: median; %.2f to %.2f)\n", n,
                   rows[0].runs, paired[f].form, ratio[0], ratio[1], ratio[2]);
    }
out:
    if (x) clReleaseMemObject(x);
    if (y) clReleaseMemObject(y);
    free(hx);
    free(hy);
    return st;
}

/* The calls back to back per sample of the "convert-paired" rows: about 16M elements' worth, at
 * most 64 (at 16M and beyond one call: the fixed cost is then under 1% of the call). */
static int convert_calls(size_t n) {
    size_t k = ((size_t)16 << 20) / n;
    return k < 1 ? 1 : k > 64 ? 64 : (int)k;
}

/* A paired row checked once more on a poisoned output, named, with the dtype its types make. */
static tsr_status add_checked_row(tsr_device *dev, bench_report *report, const bench_options *opt, const gelu_run *r,
                                  const char *impl, bench_row *row, const float *hx, float *hy) {
    for (size_t i = 0; i < r->n; ++i)
        hy[i] = NAN;
    tsr_status st = tsr_upload_typed(dev, r->y, r->y_type, hy, r->n);
    if (st == TSR_SUCCESS) st = bench_gelu_once((void *)r);
    if (st == TSR_SUCCESS) st = tsr_download_typed(dev, r->y, r->y_type, hy, r->n);
    if (st != TSR_SUCCESS) return st;
    strcpy(row->op, "gelu");
    snprintf(row->shape, sizeof row->shape, "%zu", r->n);
    tsr_strlcpy(row->impl, impl, sizeof row->impl);
    tsr_dtype_spec_format(r->x_type, r->y_type, row->dtype, sizeof row->dtype);
    row->gbps = (double)r->n * (double)(tsr_dtype_size(r->x_type) + tsr_dtype_size(r->y_type)) / (row->time_ms * 1e6);
    row->rel_err = gelu_max_error(r, hx, hy);
    if ((st = bench_add(report, row)) != TSR_SUCCESS) return st;
    if (!opt->quiet) {
        printf("%-10zu %-22s %-8s %10.3f %8.1f %9.1e\n", r->n, row->impl, row->dtype[0] ? row->dtype : "f32",
               row->time_ms, row->gbps, row->rel_err);
        fflush(stdout);
    }
    return TSR_SUCCESS;
}

/* --dtype with a 16-bit type: per form, the 16-bit fused GELU in alternation with the fp32 one
 * (the ratio of elements per second is what 16-bit storage buys), then in alternation with the
 * 16-bit copy kernel (the bandwidth yardstick at the same bytes); for bf16 alone also its copy
 * kernel in alternation with f16's, and for one 16-bit type tsr_convert from fp32 in alternation
 * with the fp32 copy. hx: fp32 inputs rounded to the input type, so both rows read
 * the same values. */
static tsr_status bench_elementwise_typed(tsr_device *dev, const bench_options *opt, bench_report *report, size_t n) {
    const tsr_dtype xt = opt->in_type, yt = opt->out_type;
    tsr_status st = TSR_SUCCESS;
    float *hx = malloc(n * sizeof *hx), *hy = malloc(n * sizeof *hy);
    cl_mem x = NULL, y = NULL, x16 = NULL, y16 = NULL;
    cl_int err = CL_SUCCESS;
    if (!hx || !hy) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory for %zu elements", n);
        goto out;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ n;
    tsr_random_fill(hx, n, &seed, -5.0f, 5.0f);
    tsr_dtype_round_array(xt, hx, n);
    cl_context ctx = tsr_device_context(dev);
    x = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * 4, NULL, &err);
    if (err == CL_SUCCESS) y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 4, NULL, &err);
    if (err == CL_SUCCESS) x16 = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * tsr_dtype_size(xt), NULL, &err);
    if (err == CL_SUCCESS) y16 = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * tsr_dtype_size(yt), NULL, &err);
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        goto out;
    }
    if ((st = tsr_upload(dev, x, hx, n)) != TSR_SUCCESS || (st = tsr_upload_typed(dev, x16, xt, hx, n)) != TSR_SUCCESS)
        goto out;
    char types[16];
    tsr_dtype_spec_format(xt, yt, types, sizeof types);
    static const struct {
        tsr_gelu_mode mode;
        const char *form;
    } forms[] = {{TSR_GELU_TANH, "tanh"}, {TSR_GELU_ERF, "erf"}};
    for (size_t f = 0; f < 2 && st == TSR_SUCCESS; ++f) {
        const tsr_gelu_mode mode = forms[f].mode;
        const gelu_run fused16 = {
            .dev = dev, .kind = GELU_RUN_FUSED, .mode = mode, .x = x16, .y = y16, .n = n, .x_type = xt, .y_type = yt};
        const gelu_run fused32 = {.dev = dev, .kind = GELU_RUN_FUSED, .mode = mode, .x = x, .y = y, .n = n};
        const gelu_run copy16 = {.dev = dev,
                                 .kind = GELU_RUN_COPY_KERNEL,
                                 .mode = mode,
                                 .x = x16,
                                 .y = y16,
                                 .n = n,
                                 .x_type = xt,
                                 .y_type = yt};
        char names[4][32];
        snprintf(names[0], sizeof names[0], "fused-%s-paired", forms[f].form);
        snprintf(names[1], sizeof names[1], "fused-%s-paired", forms[f].form);
        snprintf(names[2], sizeof names[2], "fused-%s-paired-copy", forms[f].form);
        snprintf(names[3], sizeof names[3], "copy-kernel-paired-%s", forms[f].form);
        /* 16-bit against fp32: time(16) / time(32) is the inverse of the elements-per-second ratio. */
        bench_row rows[4];
        memset(rows, 0, sizeof rows);
        double vs32[3], vscopy[3];
        gelu_run a = fused16, b = fused32, c = fused16, d = copy16;
        st = bench_time_paired(bench_gelu_once, &a, bench_gelu_once, &b, opt->budget_s, 5, 400, &rows[0], &rows[1],
                               vs32);
        if (st == TSR_SUCCESS) st = add_checked_row(dev, report, opt, &a, names[0], &rows[0], hx, hy);
        if (st == TSR_SUCCESS) st = add_checked_row(dev, report, opt, &b, names[1], &rows[1], hx, hy);
        if (st == TSR_SUCCESS && !opt->quiet)
            printf("%-10zu timed in alternation (%d pairs): fused-%s %s = %.2f x the elements/s of fp32 (pairs: "
                   "median; %.2f to %.2f)\n",
                   n, rows[0].runs, forms[f].form, types, 1.0 / vs32[0], 1.0 / vs32[2], 1.0 / vs32[1]);
        /* 16-bit against the 16-bit copy: time(copy) / time(fused) is the share of the copy's rate. */
        if (st == TSR_SUCCESS)
            st = bench_time_paired(bench_gelu_once, &c, bench_gelu_once, &d, opt->budget_s, 5, 400, &rows[2], &rows[3],
                                   vscopy);
        if (st == TSR_SUCCESS) st = add_checked_row(dev, report, opt, &c, names[2], &rows[2], hx, hy);
        if (st == TSR_SUCCESS) st = add_checked_row(dev, report, opt, &d, names[3], &rows[3], hx, hy);
        if (st == TSR_SUCCESS && !opt->quiet)
            printf("%-10zu timed in alternation (%d pairs): fused-%s %s = %.2f x the %s copy-kernel (pairs: median; "
                   "%.2f to %.2f)\n",
                   n, rows[2].runs, forms[f].form, types, 1.0 / vscopy[0], types, 1.0 / vscopy[2], 1.0 / vscopy[1]);
    }
    /* A 16-bit type alone: tsr_convert from fp32 (its copy kernel, 6 bytes an element) in
     * alternation with the fp32 copy kernel (8 bytes): at the byte limit both move bytes at one
     * rate (rows "convert-paired"; the ratio printed is of GB/s). A GB/s ratio is the byte limit's
     * only while the streaming dominates: a fixed cost per call, the same for both (PoCL's enqueue
     * and clFinish, some 20-25 us on the Zen 5 under load, tessera's own part under 1 us:
     * docs/dtypes.md, session 22), pulls it towards 6/8 at 1M elements. So each sample of
     * "convert-paired" is convert_calls(n) calls back to back and one clFinish (time_ms per call),
     * both sides alike; "convert-paired-sync" times one call and its wait, as every other pair
     * (where the back-to-back samples are one call, at 16M elements and more, it is that pair). */
    for (int sync = 0; sync < (convert_calls(n) > 1 ? 2 : 1) && st == TSR_SUCCESS && xt == yt; ++sync) {
        const int calls = sync ? 1 : convert_calls(n);
        gelu_run a = {.dev = dev, .kind = GELU_RUN_COPY_KERNEL, .mode = TSR_GELU_TANH, .x = x, .y = y16, .n = n,
                      .x_type = TSR_F32, .y_type = yt, .calls = calls};
        gelu_run b = {.dev = dev, .kind = GELU_RUN_COPY_KERNEL, .mode = TSR_GELU_TANH, .x = x, .y = y, .n = n,
                      .calls = calls};
        bench_row rows[2];
        memset(rows, 0, sizeof rows);
        double ratio[3];
        st = bench_time_paired(bench_gelu_once, &a, bench_gelu_once, &b, opt->budget_s, 5, 400, &rows[0], &rows[1],
                               ratio);
        for (int k = 0; k < 2; ++k) { /* per call */
            rows[k].time_ms /= calls, rows[k].time_min_ms /= calls, rows[k].time_max_ms /= calls;
            if (calls > 1) snprintf(rows[k].variant, sizeof rows[k].variant, "%d calls back to back, one clFinish", calls);
        }
        /* the poisoned-output check runs one call */
        a.calls = b.calls = 1;
        const char *name = sync ? "convert-paired-sync" : "convert-paired";
        if (st == TSR_SUCCESS) st = add_checked_row(dev, report, opt, &a, name, &rows[0], hx, hy);
        if (st == TSR_SUCCESS) st = add_checked_row(dev, report, opt, &b, name, &rows[1], hx, hy);
        const double bytes = 4.0 + (double)tsr_dtype_size(yt); /* per element: 4 read, 2 written */
        if (st == TSR_SUCCESS && !opt->quiet)
            printf("%-10zu timed in alternation (%d pairs of %d call%s and one wait): tsr_convert f32 to %s = %.2f x "
                   "the fp32 copy-kernel's GB/s (pairs: median; %.2f to %.2f)\n",
                   n, rows[0].runs, calls, calls > 1 ? "s" : "", tsr_dtype_str(yt), bytes / 8.0 / ratio[0],
                   bytes / 8.0 / ratio[2], bytes / 8.0 / ratio[1]);
    }
    /* bf16 alone: its copy kernel in alternation with the f16 copy kernel on the same values
     * (rows "copy-kernel-vs-f16"): the two types move the same bytes, so bf16 should not lag. */
    if (st == TSR_SUCCESS && xt == TSR_BF16 && yt == TSR_BF16) {
        cl_mem xh = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * 2, NULL, &err), yh = NULL;
        if (err == CL_SUCCESS) yh = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 2, NULL, &err);
        if (err != CL_SUCCESS) st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        if (st == TSR_SUCCESS) st = tsr_upload_typed(dev, xh, TSR_F16, hx, n);
        gelu_run a = {.dev = dev, .kind = GELU_RUN_COPY_KERNEL, .mode = TSR_GELU_TANH, .x = x16, .y = y16, .n = n,
                      .x_type = TSR_BF16, .y_type = TSR_BF16};
        gelu_run b = {.dev = dev, .kind = GELU_RUN_COPY_KERNEL, .mode = TSR_GELU_TANH, .x = xh, .y = yh, .n = n,
                      .x_type = TSR_F16, .y_type = TSR_F16};
        bench_row rows[2];
        memset(rows, 0, sizeof rows);
        double ratio[3];
        if (st == TSR_SUCCESS)
            st = bench_time_paired(bench_gelu_once, &a, bench_gelu_once, &b, opt->budget_s, 5, 400, &rows[0], &rows[1],
                                   ratio);
        if (st == TSR_SUCCESS) st = add_checked_row(dev, report, opt, &a, "copy-kernel-vs-f16", &rows[0], hx, hy);
        if (st == TSR_SUCCESS) st = add_checked_row(dev, report, opt, &b, "copy-kernel-vs-f16", &rows[1], hx, hy);
        if (st == TSR_SUCCESS && !opt->quiet)
            printf("%-10zu timed in alternation (%d pairs): bf16 copy-kernel = %.2f x the f16 copy-kernel's elements/s "
                   "(pairs: median; %.2f to %.2f)\n",
                   n, rows[0].runs, 1.0 / ratio[0], 1.0 / ratio[2], 1.0 / ratio[1]);
        if (xh) clReleaseMemObject(xh);
        if (yh) clReleaseMemObject(yh);
    }
out:
    if (x) clReleaseMemObject(x);
    if (y) clReleaseMemObject(y);
    if (x16) clReleaseMemObject(x16);
    if (y16) clReleaseMemObject(y16);
    free(hx);
    free(hy);
    return st;
}

/* ---- GEMM epilogue: a linear layer y = gelu(x W^T + b) ---- */

typedef enum { EPI_PLAIN, EPI_FUSED, EPI_SEPARATE, EPI_CLBLAST } epi_kind;

typedef struct epi_run {
    tsr_device *dev;
    epi_kind kind;
    size_t m, n, k;
    cl_mem x, w, bias, y;
} epi_run;

static tsr_status run_epilogue(void *ctx) {
    epi_run *r = ctx;
    tsr_status st = TSR_SUCCESS;
    tsr_epilogue fused = {.bias = r->bias, .activation = TSR_ACT_GELU_TANH};
    tsr_epilogue bias_only = {.bias = r->bias, .activation = TSR_ACT_NONE};
    switch (r->kind) {
    case EPI_PLAIN:
    case EPI_FUSED:
    case EPI_SEPARATE:
        st = tsr_matmul(r->dev,
                        &(tsr_matmul_desc){.trans_b = TSR_TRANS,
                                           .m = r->m,
                                           .n = r->n,
                                           .k = r->k,
                                           .alpha = 1.0f,
                                           .epilogue = r->kind == EPI_PLAIN   ? (tsr_epilogue){0}
                                                       : r->kind == EPI_FUSED ? fused
                                                                              : bias_only},
                        r->x, r->w, r->y, NULL, NULL);
        if (st == TSR_SUCCESS && r->kind == EPI_SEPARATE)
            st = tsr_gelu(r->dev, &(tsr_gelu_desc){.mode = TSR_GELU_TANH, .n = r->m * r->n}, r->y, r->y, NULL, NULL);
        break;
    case EPI_CLBLAST: {
#ifdef TSR_HAVE_CLBLAST
        cl_command_queue q = tsr_device_queue(r->dev);
        CLBlastStatusCode cs = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, r->m, r->n,
                                            r->k, 1.0f, r->x, 0, r->k, r->w, 0, r->k, 0.0f, r->y, 0, r->n, &q, NULL);
        if (cs != CLBlastSuccess) return tsr_fail(TSR_ERR_OPENCL, "CLBlast sgemm failed with status %d", (int)cs);
        st = tsr_gelu(r->dev, &(tsr_gelu_desc){.mode = TSR_GELU_TANH, .n = r->m * r->n}, r->y, r->y, NULL, NULL);
#else
        st = tsr_fail(TSR_ERR_UNSUPPORTED, "built without CLBlast");
#endif
        break;
    }
    }
    if (st == TSR_SUCCESS) clFinish(tsr_device_queue(r->dev));
    return st;
}

/* Relative error over 16 sampled rows against act(x W^T + b) in double. */
static double epilogue_error(const epi_run *r, const float *x, const float *w, const float *b, const float *y) {
    tsr_error_sum sum = {0, 0};
    for (size_t s = 0; s < 16; ++s) {
        size_t i = (s * 7919) % r->m;
        for (size_t j = 0; j < r->n; ++j) {
            double v = 0;
            for (size_t l = 0; l < r->k; ++l) v += (double)x[i * r->k + l] * w[j * r->k + l];
            if (r->kind != EPI_PLAIN && r->kind != EPI_CLBLAST) v += b[j];
            if (r->kind != EPI_PLAIN) v = tsr_gelu_reference(TSR_GELU_TANH, v);
            tsr_error_add(&sum, y[i * r->n + j], v);
        }
    }
    return tsr_error_value(&sum);
}

static tsr_status bench_epilogue(tsr_device *dev, const bench_options *opt, bench_report *report) {
    const size_t m = 512, n = 3072, k = 768; /* BERT-base feed-forward up-projection, 512 tokens */
    tsr_status st = TSR_SUCCESS;
    float *hx = malloc(m * k * 4), *hw = malloc(n * k * 4), *hb = malloc(n * 4), *hy = malloc(m * n * 4);
    cl_mem x = NULL, w = NULL, b = NULL, y = NULL;
    cl_int err = CL_SUCCESS;
    if (!hx || !hw || !hb || !hy) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
        goto out;
    }
    uint64_t seed = 0xD1B54A32D192ED03ull;
    tsr_random_fill(hx, m * k, &seed, -1.0f, 1.0f);
    tsr_random_fill(hw, n * k, &seed, -0.5f, 0.5f);
    tsr_random_fill(hb, n, &seed, -1.0f, 1.0f);
    x = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, m * k * 4, hx, &err);
    if (err == CL_SUCCESS)
        w = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * k * 4, hw, &err);
    if (err == CL_SUCCESS)
        b = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 4, hb, &err);
    if (err == CL_SUCCESS) y = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, m * n * 4, NULL, &err);
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        goto out;
    }
    static const struct {
        const char *impl;
        epi_kind kind;
    } impls[] = {{"tessera-plain-gemm", EPI_PLAIN},
                 {"tessera-fused", EPI_FUSED},
                 {"tessera+gelu-pass", EPI_SEPARATE},
                 {"clblast+tessera-gelu", EPI_CLBLAST}};
    double ms[4] = {0};
    for (size_t i = 0; i < 4 && st == TSR_SUCCESS; ++i) {
#ifndef TSR_HAVE_CLBLAST
        if (impls[i].kind == EPI_CLBLAST) continue;
#endif
        if (impls[i].kind == EPI_CLBLAST && !opt->peers) continue;
        epi_run r = {.dev = dev, .kind = impls[i].kind, .m = m, .n = n, .k = k, .x = x, .w = w, .bias = b, .y = y};
        bench_row row = {0};
        if ((st = bench_time(run_epilogue, &r, opt->budget_s, 5, 100, &row)) != TSR_SUCCESS) break;
        if ((st = tsr_download(dev, y, hy, m * n)) != TSR_SUCCESS) break;
        strcpy(row.op, "gemm-bias-gelu");
        snprintf(row.shape, sizeof row.shape, "%zux%zux%zu", m, n, k);
        tsr_strlcpy(row.impl, impls[i].impl, sizeof row.impl);
        row.gflops = 2.0 * m * n * k / (row.time_ms * 1e6);
        row.rel_err = epilogue_error(&r, hx, hw, hb, hy);
        ms[i] = row.time_ms;
        if ((st = bench_add(report, &row)) != TSR_SUCCESS) break;
        if (!opt->quiet) {
            printf("%-14s %-26s %10.3f %8.1f GFLOP/s %9.1e\n", row.shape, row.impl, row.time_ms, row.gflops,
                   row.rel_err);
            fflush(stdout);
        }
    }
    if (st == TSR_SUCCESS && !opt->quiet) {
        printf("fused bias+GELU costs %+.1f%% over the plain GEMM; a separate pass costs %+.1f%%", 100 * (ms[1] / ms[0] - 1),
               100 * (ms[2] / ms[0] - 1));
        if (ms[3] > 0) printf("; fused is %.2fx CLBlast sgemm + tessera GELU (no bias)", ms[3] / ms[1]);
        printf("\n");
    }
    /* The fused layer and the plain GEMM once more, in alternation (the epilogue target), each
     * checked once more afterwards on a poisoned output. */
    if (st == TSR_SUCCESS) {
        epi_run pair[2] = {{.dev = dev, .kind = EPI_FUSED, .m = m, .n = n, .k = k, .x = x, .w = w, .bias = b, .y = y},
                           {.dev = dev, .kind = EPI_PLAIN, .m = m, .n = n, .k = k, .x = x, .w = w, .bias = b, .y = y}};
        bench_row rows[2];
        memset(rows, 0, sizeof rows);
        double ratio[3];
        st = bench_time_paired(run_epilogue, &pair[0], run_epilogue, &pair[1], opt->budget_s, 5, 100, &rows[0], &rows[1],
                               ratio);
        static const char *const names[2] = {"tessera-fused-paired", "tessera-plain-gemm-paired"};
        for (int i = 0; i < 2 && st == TSR_SUCCESS; ++i) {
            for (size_t e = 0; e < m * n; ++e) hy[e] = NAN;
            if ((st = tsr_upload(dev, y, hy, m * n)) != TSR_SUCCESS) break;
            if ((st = run_epilogue(&pair[i])) != TSR_SUCCESS) break;
            if ((st = tsr_download(dev, y, hy, m * n)) != TSR_SUCCESS) break;
            strcpy(rows[i].op, "gemm-bias-gelu");
            snprintf(rows[i].shape, sizeof rows[i].shape, "%zux%zux%zu", m, n, k);
            tsr_strlcpy(rows[i].impl, names[i], sizeof rows[i].impl);
            rows[i].gflops = 2.0 * m * n * k / (rows[i].time_ms * 1e6);
            rows[i].rel_err = epilogue_error(&pair[i], hx, hw, hb, hy);
            if ((st = bench_add(report, &rows[i])) != TSR_SUCCESS) break;
            if (!opt->quiet)
                printf("%-14s %-26s %10.3f %8.1f GFLOP/s %9.1e\n", rows[i].shape, rows[i].impl, rows[i].time_ms,
                       rows[i].gflops, rows[i].rel_err);
        }
        if (st == TSR_SUCCESS && !opt->quiet)
            printf("timed in alternation (%d pairs): fused bias+GELU costs %+.1f%% over the plain GEMM (pairs: median; "
                   "%+.1f%% to %+.1f%%)\n", rows[0].runs, 100 * (ratio[0] - 1), 100 * (ratio[1] - 1),
                   100 * (ratio[2] - 1));
    }
out:
    if (x) clReleaseMemObject(x);
    if (w) clReleaseMemObject(w);
    if (b) clReleaseMemObject(b);
    if (y) clReleaseMemObject(y);
    free(hx);
    free(hw);
    free(hb);
    free(hy);
    return st;
}

tsr_status bench_gelu(tsr_device *dev, const bench_options *opt, bench_report *report) {
    size_t *sizes = NULL, nsizes = 0;
    tsr_status st = TSR_SUCCESS;
    if ((st = util_parse_counts(opt->sizes, "elements", GELU_MAX_ELEMENTS, &sizes, &nsizes)) != TSR_SUCCESS)
        return st;
    bool elementwise = !opt->part || strcmp(opt->part, "elementwise") == 0;
    bool epilogue = !opt->part || strcmp(opt->part, "epilogue") == 0;
    if (opt->layers)
        st = tsr_fail(TSR_ERR_INVALID_ARG, "--layers: only conv2d has layers");
    else if (st == TSR_SUCCESS && opt->max_unfused)
        st = tsr_fail(TSR_ERR_INVALID_ARG, "--max-unfused: only attention has unfused pipelines");
    else if (st == TSR_SUCCESS && opt->clblast_xgemm)
        st = tsr_fail(TSR_ERR_INVALID_ARG, "--clblast-xgemm: only for the gemm benchmark");
    const bool typed = opt->in_type != TSR_F32 || opt->out_type != TSR_F32;
    /* Every size checked against the device and the host before the first one runs. */
    for (size_t i = 0; elementwise && i < nsizes && st == TSR_SUCCESS; ++i) {
        char what[64];
        snprintf(what, sizeof what, "gelu of %zu elements", sizes[i]);
        /* sizes[i] <= 2^40: no wrap; with --dtype the fp32 pair and the typed pair */
        size_t bytes[4] = {sizes[i] * 4, sizes[i] * 4, sizes[i] * tsr_dtype_size(opt->in_type),
                           sizes[i] * tsr_dtype_size(opt->out_type)};
        st = util_check_memory(dev, what, bytes, typed ? 4 : 2, 2 * bytes[0]);
    }
    if (st != TSR_SUCCESS) {
        free(sizes);
        return st;
    }
    if (elementwise && !opt->quiet) {
        if (typed)
            printf("%-10s %-22s %-8s %10s %8s %9s\n", "elements", "impl", "dtype", "ms", "GB/s", "max_err");
        else
            printf("%-10s %-20s %10s %8s %9s\n", "elements", "impl", "ms", "GB/s", "max_err");
    }
    for (size_t i = 0; elementwise && i < nsizes && st == TSR_SUCCESS; ++i)
        st =
            typed ? bench_elementwise_typed(dev, opt, report, sizes[i]) : bench_elementwise(dev, opt, report, sizes[i]);
    free(sizes);
    if (st == TSR_SUCCESS && epilogue && typed && !opt->quiet)
        printf("epilogue: fp32 only (GEMM's bias + GELU epilogue; --dtype applies to the elementwise part)\n");
    if (st == TSR_SUCCESS && epilogue) st = bench_epilogue(dev, opt, report);
    return st;
}
