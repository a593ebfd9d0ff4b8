/* `tessera bench pool2d`: tsr_pool2d on pooling shapes (the fixture's grammar, "NxCxHxW max|avg kK
 * [sS] [pP] [dD] [ceil] [exclude] [nhwc] [DTYPE]"), against GELU's copy kernel over x's elements
 * (the achievable bandwidth: 8 bytes an element). GB/s count the bytes that must move: x and y once
 * each in their types. --dtype sets the storage of shapes that name none. Each row is checked
 * against the double-precision reference. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pool_run {
    tsr_device *dev;
    bool copy;
    tsr_pool2d_desc d;
    cl_mem x, y, copy_out;
    size_t nx;
} pool_run;

static tsr_status pool_once(void *ctx) {
    pool_run *t = ctx;
    tsr_status st = t->copy ? tsr_gelu_copy(t->dev, TSR_F32, t->copy_out, 0, TSR_F32, t->y, 0, t->nx, NULL, NULL)
                            : tsr_pool2d(t->dev, &t->d, t->x, t->y, NULL, NULL);
    if (st == TSR_SUCCESS) clFinish(tsr_device_queue(t->dev));
    return st;
}

static tsr_status pool_bench_shape(tsr_device *dev, const bench_options *opt, bench_report *report,
                                   const tsr_pool2d_desc *desc) {
    pool_run t = {.dev = dev, .d = *desc};
    size_t oh, ow;
    tsr_status st = tsr_pool2d_output_size(&t.d, &oh, &ow);
    if (st != TSR_SUCCESS) return st;
    const size_t planes = t.d.batch * t.d.channels, ny = planes * oh * ow;
    t.nx = planes * t.d.in_height * t.d.in_width;
    float *hx = malloc(t.nx * sizeof *hx), *hy = malloc((ny > t.nx ? ny : t.nx) * sizeof *hy);
    double *ref = malloc(ny * sizeof *ref);
    cl_int err = CL_SUCCESS;
    if (!hx || !hy || !ref) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory for pool2d");
        goto out;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ t.nx;
    tsr_random_fill(hx, t.nx, &seed, -2.0f, 2.0f);
    tsr_dtype_round_array(t.d.x_type, hx, t.nx);
    tsr_pool2d_desc rd = t.d; /* the reference takes stride and dilation explicit */
    if (!rd.stride_h) rd.stride_h = rd.kernel_h;
    if (!rd.stride_w) rd.stride_w = rd.kernel_w;
    if (!rd.dilation_h) rd.dilation_h = 1;
    if (!rd.dilation_w) rd.dilation_w = 1;
    tsr_pool2d_reference(&rd, hx, ref);
    cl_context ctx = tsr_device_context(dev);
    t.x = clCreateBuffer(ctx, CL_MEM_READ_WRITE, t.nx * tsr_dtype_size(t.d.x_type), NULL, &err);
    if (err == CL_SUCCESS) t.y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ny * tsr_dtype_size(t.d.y_type), NULL, &err);
    if (err == CL_SUCCESS) t.copy_out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, t.nx * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        goto out;
    }
    if ((st = tsr_upload_typed(dev, t.x, t.d.x_type, hx, t.nx)) != TSR_SUCCESS ||
        (st = tsr_upload(dev, t.copy_out, hx, t.nx)) != TSR_SUCCESS)
        goto out;
    char shape[64];
    tsr_pool2d_shape_format(&t.d, shape, sizeof shape);
    for (int k = 0; k < 2 && st == TSR_SUCCESS; ++k) {
        pool_run r = t;
        r.copy = k == 1;
        if (r.copy) { /* the copy reads copy_out's fp32 x and writes a buffer of nx floats */
            r.y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, t.nx * sizeof(float), NULL, &err);
            if (err != CL_SUCCESS) {
                st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
                break;
            }
        } else {
            for (size_t i = 0; i < ny; ++i) hy[i] = NAN;
            st = tsr_upload_typed(dev, r.y, r.d.y_type, hy, ny);
        }
        bench_row row = {0};
        if (st == TSR_SUCCESS) st = bench_time(pool_once, &r, opt->budget_s, 5, 500, &row);
        if (st == TSR_SUCCESS && !r.copy) st = tsr_download_typed(dev, r.y, r.d.y_type, hy, ny);
        if (r.copy) clReleaseMemObject(r.y);
        if (st != TSR_SUCCESS) break;
        strcpy(row.op, "pool2d");
        tsr_strlcpy(row.shape, shape, sizeof row.shape);
        tsr_strlcpy(row.impl, r.copy ? "copy-kernel" : "tessera", sizeof row.impl);
        if (!r.copy) tsr_dtype_spec_format(r.d.x_type, r.d.y_type, row.dtype, sizeof row.dtype);
        const double bytes = r.copy ? 8.0 * (double)t.nx
                                    : (double)t.nx * (double)tsr_dtype_size(r.d.x_type) +
                                          (double)ny * (double)tsr_dtype_size(r.d.y_type);
        row.gbps = bytes / (row.time_ms * 1e6);
        row.rel_err = r.copy ? -1 : tsr_rel_error(hy, ref, ny);
        if ((st = bench_add(report, &row)) != TSR_SUCCESS) break;
        if (!opt->quiet) {
            char err_text[16] = "-";
            if (row.rel_err >= 0) snprintf(err_text, sizeof err_text, "%.1e", row.rel_err);
            printf("%-34s %-12s %-8s %10.4f %8.1f %9s\n", row.shape, row.impl, row.dtype[0] ? row.dtype : "f32",
                   row.time_ms, row.gbps, err_text);
            fflush(stdout);
        }
    }
out:
    if (t.x) clReleaseMemObject(t.x);
    if (t.y) clReleaseMemObject(t.y);
    if (t.copy_out) clReleaseMemObject(t.copy_out);
    free(hx);
    free(hy);
    free(ref);
    return st;
}

tsr_status bench_pool2d(tsr_device *dev, const bench_options *opt, bench_report *report) {
    tsr_status st = TSR_SUCCESS;
    if (opt->layers) return tsr_fail(TSR_ERR_INVALID_ARG, "--layers: only conv2d has layers");
    if (opt->max_unfused) return tsr_fail(TSR_ERR_INVALID_ARG, "--max-unfused: only attention has unfused pipelines");
    if (opt->clblast_xgemm) return tsr_fail(TSR_ERR_INVALID_ARG, "--clblast-xgemm: only for the gemm benchmark");
    /* Every shape parsed and checked against the device before the first one runs. */
    char *list = strdup(opt->sizes);
    if (!list) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    size_t count = 1;
    for (const char *c = list; *c; ++c) count += *c == ',';
    tsr_pool2d_desc *descs = calloc(count, sizeof *descs);
    if (!descs) {
        free(list);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    }
    char *cursor = list;
    for (size_t i = 0; i < count && st == TSR_SUCCESS; ++i) {
        char *item = cursor, *comma = strchr(cursor, ',');
        if (comma) *comma = '\0', cursor = comma + 1;
        if ((st = tsr_pool2d_shape_parse(item, &descs[i])) != TSR_SUCCESS) {
            char why[512];
            tsr_strlcpy(why, tsr_last_error(), sizeof why);
            st = tsr_fail(TSR_ERR_INVALID_ARG, "--sizes: %s", why);
            break;
        }
        /* --dtype for a shape that names no storage */
        if (descs[i].x_type == TSR_F32 && descs[i].y_type == TSR_F32)
            descs[i].x_type = opt->in_type, descs[i].y_type = opt->out_type;
        size_t oh, ow;
        if ((st = tsr_pool2d_output_size(&descs[i], &oh, &ow)) != TSR_SUCCESS) break;
        const size_t planes = descs[i].batch * descs[i].channels, nx = planes * descs[i].in_height * descs[i].in_width,
                     ny = planes * oh * ow;
        if (nx > SIZE_MAX / 32 || ny > SIZE_MAX / 32) {
            st = tsr_fail(TSR_ERR_OVERFLOW, "--sizes: '%s' is too large", item);
            break;
        }
        const size_t bytes[4] = {nx * tsr_dtype_size(descs[i].x_type), ny * tsr_dtype_size(descs[i].y_type), 4 * nx,
                                 4 * nx};
        st = util_check_memory(dev, item, bytes, 4, 4 * nx + 8 * ny + 4 * (nx > ny ? nx : ny));
    }
    if (st == TSR_SUCCESS && !opt->quiet)
        printf("%-34s %-12s %-8s %10s %8s %9s\n", "shape", "impl", "dtype", "ms", "GB/s", "rel_err");
    for (size_t i = 0; i < count && st == TSR_SUCCESS; ++i) st = pool_bench_shape(dev, opt, report, &descs[i]);
    free(descs);
    free(list);
    return st;
}
