/* `tessera bench conv2d`: ResNet-50's convolution layers at several batch sizes: tessera's
 * chosen path and each path alone (im2col + GEMM, implicit GEMM, naive direct), CLBlast's
 * convgemm, and OpenBLAS on the equivalent GEMM shape (CPU devices); then the whole ResNet-50
 * conv stack (53 layers) end to end. GFLOP/s count 2 N K P Q Cg R S; rel_err is against a
 * double-precision direct convolution of the first and last image. With --dtype IN[/OUT] (16-bit
 * storage) each layer's tessera row runs in those types, timed in alternation with the same layer
 * in fp32; CLBlast's convgemm and OpenBLAS are fp32-only and do not run. The block part: a ResNet-50
 * bottleneck block with its BatchNorms, residual and ReLUs fused into the convolutions'
 * epilogues, timed in alternation with the same block run as convolutions plus separate
 * elementwise passes (bench_block). */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TSR_HAVE_CLBLAST
#include <clblast_c.h>
#endif
#ifdef TSR_HAVE_OPENBLAS
#include <cblas.h>
#endif

/* ResNet-50 (torchvision, stride in the 3x3): every distinct layer, and how often the network
 * runs it. Square inputs and kernels. */
typedef struct resnet_layer {
    const char *name;
    int c, h, k, r, stride, pad, count;
    int groups; /* 0: 1 */
} resnet_layer;

static const resnet_layer resnet50[] = {
    {"conv1", 3, 224, 64, 7, 2, 3, 1, 1},
    {"l1.reduce64", 64, 56, 64, 1, 1, 0, 1, 1},     {"l1.reduce256", 256, 56, 64, 1, 1, 0, 2, 1},
    {"l1.3x3", 64, 56, 64, 3, 1, 1, 3, 1},          {"l1.expand", 64, 56, 256, 1, 1, 0, 4, 1},
    {"l2.reduce256", 256, 56, 128, 1, 1, 0, 1, 1},  {"l2.3x3s2", 128, 56, 128, 3, 2, 1, 1, 1},
    {"l2.expand", 128, 28, 512, 1, 1, 0, 4, 1},     {"l2.down", 256, 56, 512, 1, 2, 0, 1, 1},
    {"l2.reduce512", 512, 28, 128, 1, 1, 0, 3, 1},  {"l2.3x3", 128, 28, 128, 3, 1, 1, 3, 1},
    {"l3.reduce512", 512, 28, 256, 1, 1, 0, 1, 1},  {"l3.3x3s2", 256, 28, 256, 3, 2, 1, 1, 1},
    {"l3.expand", 256, 14, 1024, 1, 1, 0, 6, 1},    {"l3.down", 512, 28, 1024, 1, 2, 0, 1, 1},
    {"l3.reduce1024", 1024, 14, 256, 1, 1, 0, 5, 1}, {"l3.3x3", 256, 14, 256, 3, 1, 1, 5, 1},
    {"l4.reduce1024", 1024, 14, 512, 1, 1, 0, 1, 1}, {"l4.3x3s2", 512, 14, 512, 3, 2, 1, 1, 1},
    {"l4.expand", 512, 7, 2048, 1, 1, 0, 3, 1},     {"l4.down", 1024, 14, 2048, 1, 2, 0, 1, 1},
    {"l4.reduce2048", 2048, 7, 512, 1, 1, 0, 2, 1}, {"l4.3x3", 512, 7, 512, 3, 1, 1, 2, 1},
    /* Not ResNet-50: MobileNet-style depthwise 3x3 layers (one channel per group), --part depthwise. */
    {"dw.56", 256, 56, 256, 3, 1, 1, 0, 256},    {"dw.56s2", 256, 56, 256, 3, 2, 1, 0, 256},
    {"dw.14", 512, 14, 512, 3, 1, 1, 0, 512},
    /* MobileNet-V2's depthwise 3x3 layers (224x224 input; counts: how often the network runs each),
     * --layers mobilenet. */
    {"mb2.112x32", 32, 112, 32, 3, 1, 1, 1, 32},       {"mb2.112x96s2", 96, 112, 96, 3, 2, 1, 1, 96},
    {"mb2.56x144", 144, 56, 144, 3, 1, 1, 1, 144},     {"mb2.56x144s2", 144, 56, 144, 3, 2, 1, 1, 144},
    {"mb2.28x192", 192, 28, 192, 3, 1, 1, 2, 192},     {"mb2.28x192s2", 192, 28, 192, 3, 2, 1, 1, 192},
    {"mb2.14x384", 384, 14, 384, 3, 1, 1, 4, 384},     {"mb2.14x576", 576, 14, 576, 3, 1, 1, 2, 576},
    {"mb2.14x576s2", 576, 14, 576, 3, 2, 1, 1, 576},   {"mb2.7x960", 960, 7, 960, 3, 1, 1, 3, 960},
};
#define NLAYERS (sizeof resnet50 / sizeof resnet50[0])

/* The default selection: conv1, a 3x3 from each stage, the strided 3x3 of stage 2, the 1x1
 * bottleneck convs of stages 1 and 3. */
static const char default_layers[] =
    "conv1,l1.3x3,l2.3x3,l3.3x3,l4.3x3,l2.3x3s2,l1.reduce256,l1.expand,l3.reduce1024,l3.expand";
static const char default_depthwise[] = "dw.56,dw.56s2,dw.14";
static const char mobilenet_depthwise[] = "mb2.112x32,mb2.112x96s2,mb2.56x144,mb2.56x144s2,mb2.28x192,mb2.28x192s2,"
                                          "mb2.14x384,mb2.14x576,mb2.14x576s2,mb2.7x960";
#define CONV_MAX_BATCH 65536u /* keeps every count below in size_t; the memory checks refuse long before */

static tsr_conv2d_desc layer_desc(const resnet_layer *l, size_t batch) {
    tsr_conv2d_desc d = {.batch = batch, .in_channels = (size_t)l->c, .in_height = (size_t)l->h,
                         .in_width = (size_t)l->h, .out_channels = (size_t)l->k, .kernel_h = (size_t)l->r,
                         .kernel_w = (size_t)l->r, .stride_h = (size_t)l->stride, .stride_w = (size_t)l->stride,
                         .pad_h = (size_t)l->pad, .pad_w = (size_t)l->pad, .groups = (size_t)(l->groups ? l->groups : 1)};
    return d;
}

typedef enum { IMPL_TESSERA, IMPL_IM2COL, IMPL_IMPLICIT, IMPL_DIRECT, IMPL_CLBLAST, IMPL_OPENBLAS, NIMPLS } impl_kind;
static const char *const impl_names[NIMPLS] = {"tessera",         "tessera-im2col",   "tessera-implicit",
                                               "tessera-direct",  "clblast-convgemm", "openblas-gemm"};

typedef struct conv_run {
    tsr_device *dev;
    tsr_conv2d_desc d;
    size_t P, Q;
    cl_mem x, w, y;
    /* OpenBLAS on the equivalent GEMM: K x (N P Q) x (Cg R S), inputs from the host */
    float *ga, *gb, *gc;
} conv_run;

/* The weights of a benchmark marked constant (tsr_buffer_set_constant: conv2d then makes their
 * Winograd transform or 16-bit widening once, as an inference run with fixed weights does),
 * unless --weights per-call. */
static tsr_status keep_weights(const bench_options *opt, cl_mem w) {
    return opt->per_call_weights || !w ? TSR_SUCCESS : tsr_buffer_set_constant(w, true);
}

static tsr_status run_tessera(void *ctx) {
    conv_run *r = ctx;
    tsr_status st = tsr_conv2d(r->dev, &r->d, r->x, r->w, r->y, NULL, NULL);
    if (st == TSR_SUCCESS) clFinish(tsr_device_queue(r->dev));
    return st;
}

#ifdef TSR_HAVE_CLBLAST
static tsr_status run_clblast(void *ctx) {
    conv_run *r = ctx;
    const tsr_conv2d_desc *d = &r->d;
    cl_command_queue q = tsr_device_queue(r->dev);
    CLBlastStatusCode cs = CLBlastSconvgemm(CLBlastKernelModeCrossCorrelation, d->in_channels, d->in_height,
                                            d->in_width, d->kernel_h, d->kernel_w, d->pad_h, d->pad_w, d->stride_h,
                                            d->stride_w, 1, 1, d->out_channels, d->batch, r->x, 0, r->w, 0, r->y, 0,
                                            &q, NULL);
    if (cs != CLBlastSuccess) return tsr_fail(TSR_ERR_OPENCL, "CLBlastSconvgemm failed with status %d", (int)cs);
    clFinish(q);
    return TSR_SUCCESS;
}
#endif

#ifdef TSR_HAVE_OPENBLAS
static tsr_status run_openblas(void *ctx) {
    conv_run *r = ctx;
    const tsr_conv2d_desc *d = &r->d;
    int m = (int)d->out_channels, n = (int)(d->batch * r->P * r->Q), k = (int)(d->in_channels * d->kernel_h * d->kernel_w);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, r->ga, k, r->gb, n, 0.0f, r->gc, n);
    return TSR_SUCCESS;
}
#endif

/* ||y - ref|| / ||ref|| over the images the reference holds (the first and the last). */
static double conv_error(const float *y, const double *ref, size_t per_image, size_t batch) {
    tsr_error_sum sum = {0, 0};
    for (size_t part = 0; part < (batch > 1 ? 2u : 1u); ++part) {
        const float *yy = y + (part ? (batch - 1) * per_image : 0);
        const double *rr = ref + part * per_image;
        for (size_t i = 0; i < per_image; ++i) tsr_error_add(&sum, yy[i], rr[i]);
    }
    return tsr_error_value(&sum);
}

/* Reference of the first and last image: one-image descriptors over their slices of x. */
static void reference_ends(const tsr_conv2d_desc *d, const float *hx, const float *hw, double *ref, size_t per_image) {
    tsr_conv2d_desc one = *d;
    one.batch = 1;
    size_t in_image = d->in_channels * d->in_height * d->in_width;
    tsr_conv2d_reference(&one, hx, hw, NULL, ref);
    if (d->batch > 1) tsr_conv2d_reference(&one, hx + (d->batch - 1) * in_image, hw, NULL, ref + per_image);
}

/* A layer at a batch size: its buffers against the device's limits and the host's memory (the
 * OpenBLAS GEMM's im2col copy too, when it runs), before anything is allocated. */
static tsr_status layer_check(tsr_device *dev, const bench_options *opt, const resnet_layer *l, size_t batch) {
    tsr_conv2d_desc d = layer_desc(l, batch);
    size_t P, Q;
    tsr_status st = tsr_conv2d_output_size(&d, &P, &Q);
    if (st != TSR_SUCCESS) return st;
    size_t k = d.in_channels / d.groups * d.kernel_h * d.kernel_w, n = batch * P * Q, per_image = d.out_channels * P * Q;
    size_t bytes[3] = {batch * d.in_channels * d.in_height * d.in_width * 4, d.out_channels * k * 4,
                       batch * per_image * 4};
    size_t host = bytes[0] + bytes[1] + bytes[2] + 2 * per_image * sizeof(double);
    if (opt->peers && tsr_device_get_info(dev)->type == TSR_DEVICE_CPU) host += (k + d.out_channels) * n * 4;
    char what[96];
    snprintf(what, sizeof what, "conv2d %s at batch %zu", l->name, batch);
    return util_check_memory(dev, what, bytes, 3, host);
}

/* A 16-bit layer (--dtype): tessera's chosen path in the given storage types, timed in alternation
 * with the same layer in fp32 (bench_time_paired: both see the same machine), both rows written;
 * the inputs are rounded to the 16-bit types for both, so one reference checks both. */
static tsr_status bench_layer_typed(tsr_device *dev, const bench_options *opt, bench_report *report,
                                    const resnet_layer *l, size_t batch) {
    conv_run r[2] = {{.dev = dev, .d = layer_desc(l, batch)}, {.dev = dev, .d = layer_desc(l, batch)}};
    r[0].d.x_type = r[0].d.w_type = opt->in_type, r[0].d.y_type = opt->out_type; /* r[1]: fp32 */
    tsr_status st = layer_check(dev, opt, l, batch);
    if (st == TSR_SUCCESS) st = tsr_conv2d_output_size(&r[0].d, &r[0].P, &r[0].Q);
    if (st != TSR_SUCCESS) return st;
    const tsr_conv2d_desc *d = &r[1].d;
    size_t in_image = d->in_channels * d->in_height * d->in_width, per_image = d->out_channels * r[0].P * r[0].Q;
    size_t nx = batch * in_image, nw = d->out_channels * (d->in_channels / d->groups) * d->kernel_h * d->kernel_w;
    size_t ny = batch * per_image;
    float *hx = malloc(nx * 4), *hw = malloc(nw * 4), *hy = malloc(ny * 4);
    double *ref = malloc(2 * per_image * sizeof *ref);
    if (!hx || !hw || !hy || !ref) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
        goto out;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)l->c * 131 ^ batch;
    tsr_random_fill(hx, nx, &seed, -1.0f, 1.0f);
    tsr_random_fill(hw, nw, &seed, -1.0f, 1.0f);
    tsr_dtype_round_array(opt->in_type, hx, nx);
    tsr_dtype_round_array(opt->in_type, hw, nw);
    reference_ends(d, hx, hw, ref, per_image);
    cl_context ctx = tsr_device_context(dev);
    for (int i = 0; i < 2 && st == TSR_SUCCESS; ++i) {
        cl_int err = CL_SUCCESS;
        const tsr_conv2d_desc *di = &r[i].d;
        r[i].x = clCreateBuffer(ctx, CL_MEM_READ_ONLY, nx * tsr_dtype_size(di->x_type), NULL, &err);
        if (err == CL_SUCCESS)
            r[i].w = clCreateBuffer(ctx, CL_MEM_READ_ONLY, nw * tsr_dtype_size(di->w_type), NULL, &err);
        if (err == CL_SUCCESS)
            r[i].y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ny * tsr_dtype_size(di->y_type), NULL, &err);
        if (err != CL_SUCCESS) st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        if (st == TSR_SUCCESS) st = tsr_upload_typed(dev, r[i].x, di->x_type, hx, nx);
        if (st == TSR_SUCCESS) st = tsr_upload_typed(dev, r[i].w, di->w_type, hw, nw);
        if (st == TSR_SUCCESS) st = keep_weights(opt, r[i].w);
    }
    if (st != TSR_SUCCESS) goto out;
    char shape[64];
    snprintf(shape, sizeof shape, "%zux%dx%dx%d k%d %dx%d/%d p%d", batch, l->c, l->h, l->h, l->k, l->r, l->r, l->stride,
             l->pad);
    if (d->groups > 1) {
        size_t len = strlen(shape);
        snprintf(shape + len, sizeof shape - len, " g%zu", d->groups);
    }
    bench_row rows[2];
    memset(rows, 0, sizeof rows);
    double ratio[3];
    if ((st = bench_time_paired(run_tessera, &r[0], run_tessera, &r[1], opt->budget_s, 3, 50, &rows[0], &rows[1],
                                ratio)) != TSR_SUCCESS)
        goto out;
    static const char *const algos[] = {"auto", "im2col", "implicit", "direct"};
    for (int i = 0; i < 2 && st == TSR_SUCCESS; ++i) {
        const tsr_conv2d_desc *di = &r[i].d;
        tsr_conv_algo chosen = TSR_CONV_AUTO;
        tsr_config_info plan;
        if ((st = tsr_conv2d_plan(dev, di, &chosen, &plan)) != TSR_SUCCESS) break;
        /* one more checked run: the output is this configuration's */
        for (size_t e = 0; e < ny; ++e)
            hy[e] = NAN;
        if ((st = tsr_upload_typed(dev, r[i].y, di->y_type, hy, ny)) != TSR_SUCCESS ||
            (st = run_tessera(&r[i])) != TSR_SUCCESS ||
            (st = tsr_download_typed(dev, r[i].y, di->y_type, hy, ny)) != TSR_SUCCESS)
            break;
        strcpy(rows[i].op, "conv2d");
        tsr_strlcpy(rows[i].shape, shape, sizeof rows[i].shape);
        snprintf(rows[i].impl, sizeof rows[i].impl, "tessera(%s)", algos[chosen]);
        tsr_dtype_spec_format(di->x_type, di->y_type, rows[i].dtype, sizeof rows[i].dtype);
        snprintf(rows[i].variant, sizeof rows[i].variant, "paired with the %s row, weights %s", i ? "16-bit" : "fp32",
                 opt->per_call_weights ? "per call" : "kept");
        rows[i].gflops = tsr_conv2d_flops(di) / (rows[i].time_ms * 1e6);
        rows[i].gbps = ((double)tsr_dtype_size(di->x_type) * nx + (double)tsr_dtype_size(di->w_type) * nw +
                        (double)tsr_dtype_size(di->y_type) * ny) /
                       (rows[i].time_ms * 1e6);
        rows[i].rel_err = conv_error(hy, ref, per_image, batch);
        if ((st = bench_add(report, &rows[i])) != TSR_SUCCESS) break;
        if (!opt->quiet) {
            printf("%-14s %-30s %-20s %10.3f %9.1f %9.1e %s\n", l->name, shape, rows[i].impl, rows[i].time_ms,
                   rows[i].gflops, rows[i].rel_err, rows[i].dtype[0] ? rows[i].dtype : "f32");
            fflush(stdout);
        }
    }
    if (st == TSR_SUCCESS && !opt->quiet)
        printf("%-14s %-30s timed in alternation (%d pairs): %s runs at %.2fx the fp32 rate (pairs: median; %.2f to "
               "%.2f)\n",
               l->name, shape, rows[0].runs, rows[0].dtype, 1.0 / ratio[0], 1.0 / ratio[2], 1.0 / ratio[1]);
out:
    for (int i = 0; i < 2; ++i) {
        if (r[i].x) clReleaseMemObject(r[i].x);
        if (r[i].w) clReleaseMemObject(r[i].w);
        if (r[i].y) clReleaseMemObject(r[i].y);
    }
    free(hx), free(hw), free(hy), free(ref);
    return st;
}

static tsr_status bench_layer(tsr_device *dev, const bench_options *opt, bench_report *report,
                              const resnet_layer *l, size_t batch) {
    if (opt->in_type != TSR_F32 || opt->out_type != TSR_F32) return bench_layer_typed(dev, opt, report, l, batch);
    conv_run r = {.dev = dev, .d = layer_desc(l, batch)};
    tsr_status st = layer_check(dev, opt, l, batch);
    if (st == TSR_SUCCESS) st = tsr_conv2d_output_size(&r.d, &r.P, &r.Q);
    if (st != TSR_SUCCESS) return st;
    const tsr_conv2d_desc *d = &r.d;
    size_t in_image = d->in_channels * d->in_height * d->in_width, per_image = d->out_channels * r.P * r.Q;
    size_t nx = batch * in_image, nw = d->out_channels * (d->in_channels / d->groups) * d->kernel_h * d->kernel_w;
    size_t ny = batch * per_image;
    float *hx = malloc(nx * 4), *hw = malloc(nw * 4), *hy = malloc(ny * 4);
    double *ref = malloc(2 * per_image * sizeof *ref);
    cl_int err = CL_SUCCESS;
    if (!hx || !hw || !hy || !ref) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
        goto out;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)l->c * 131 ^ batch;
    tsr_random_fill(hx, nx, &seed, -1.0f, 1.0f);
    tsr_random_fill(hw, nw, &seed, -1.0f, 1.0f);
    reference_ends(d, hx, hw, ref, per_image);
    r.x = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nx * 4, hx, &err);
    if (err == CL_SUCCESS)
        r.w = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nw * 4, hw, &err);
    if (err == CL_SUCCESS) r.y = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, ny * 4, NULL, &err);
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        goto out;
    }
    if ((st = keep_weights(opt, r.w)) != TSR_SUCCESS) goto out;
    char shape[64];
    snprintf(shape, sizeof shape, "%zux%dx%dx%d k%d %dx%d/%d p%d", batch, l->c, l->h, l->h, l->k, l->r, l->r,
             l->stride, l->pad);
    bool grouped = d->groups > 1; /* CLBlast's convgemm and the GEMM peer have no groups */
    if (grouped) {
        size_t len = strlen(shape);
        snprintf(shape + len, sizeof shape - len, " g%zu", d->groups);
    }
    double gf[NIMPLS] = {0};
    tsr_conv_algo chosen = TSR_CONV_AUTO;
    tsr_config_info plan;
    if ((st = tsr_conv2d_plan(dev, d, &chosen, &plan)) != TSR_SUCCESS) goto out;
    bool cpu = tsr_device_get_info(dev)->type == TSR_DEVICE_CPU;
    for (int impl = 0; impl < NIMPLS && st == TSR_SUCCESS; ++impl) {
        bench_fn fn = run_tessera;
        if (opt->chosen_form_only && (impl == IMPL_IM2COL || impl == IMPL_IMPLICIT || impl == IMPL_DIRECT)) continue;
        r.d.algo = impl == IMPL_IM2COL ? TSR_CONV_IM2COL : impl == IMPL_IMPLICIT ? TSR_CONV_IMPLICIT
                   : impl == IMPL_DIRECT ? TSR_CONV_DIRECT : TSR_CONV_AUTO;
        if (impl == IMPL_CLBLAST) {
#ifdef TSR_HAVE_CLBLAST
            if (!opt->peers || grouped) continue;
            fn = run_clblast;
#else
            continue;
#endif
        }
        if (impl == IMPL_OPENBLAS) {
#ifdef TSR_HAVE_OPENBLAS
            if (!opt->peers || !cpu || grouped) continue;
            fn = run_openblas;
            size_t k = d->in_channels * d->kernel_h * d->kernel_w, n = batch * r.P * r.Q;
            r.ga = hw; /* the weights are the GEMM's A as they are */
            r.gb = malloc(k * n * 4), r.gc = malloc(d->out_channels * n * 4);
            if (!r.gb || !r.gc) {
                st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
                break;
            }
            for (size_t i = 0; i < k * n; ++i) r.gb[i] = hx[i % nx];
#else
            continue;
#endif
        }
        (void)cpu;
        float *poison = hy;
        for (size_t i = 0; i < ny; ++i) poison[i] = NAN;
        if (impl != IMPL_OPENBLAS && (st = tsr_upload(dev, r.y, hy, ny)) != TSR_SUCCESS) break;
        bench_row row = {0};
        if ((st = bench_time(fn, &r, opt->budget_s, 3, 50, &row)) != TSR_SUCCESS) break;
        strcpy(row.op, "conv2d");
        tsr_strlcpy(row.shape, shape, sizeof row.shape);
        if (impl == IMPL_TESSERA) {
            static const char *const algos[] = {"auto", "im2col", "implicit", "direct"};
            snprintf(row.impl, sizeof row.impl, "tessera(%s)", algos[chosen]);
        } else {
            tsr_strlcpy(row.impl, impl_names[impl], sizeof row.impl);
        }
        row.gflops = tsr_conv2d_flops(d) / (row.time_ms * 1e6);
        /* x read once, weights, y written once */
        row.gbps = 4.0 * (double)(nx + nw + ny) / (row.time_ms * 1e6);
        if (impl == IMPL_OPENBLAS) {
            row.rel_err = -1; /* a GEMM of the same shape, not this convolution */
        } else {
            if ((st = tsr_download(dev, r.y, hy, ny)) != TSR_SUCCESS) break;
            row.rel_err = conv_error(hy, ref, per_image, batch);
        }
        if (impl == IMPL_IM2COL || (impl == IMPL_TESSERA && chosen == TSR_CONV_IM2COL)) {
            size_t ws = 0;
            tsr_conv2d_desc wd = *d;
            wd.algo = TSR_CONV_IM2COL;
            if (tsr_conv2d_workspace_size(dev, &wd, &ws, NULL) == TSR_SUCCESS) row.mem_mib = (double)ws / 1048576.0;
        }
        gf[impl] = row.gflops;
        if ((st = bench_add(report, &row)) != TSR_SUCCESS) break;
        if (!opt->quiet) {
            char e[16] = "-";
            if (row.rel_err >= 0) snprintf(e, sizeof e, "%.1e", row.rel_err);
            printf("%-14s %-30s %-20s %10.3f %9.1f %9s", l->name, shape, row.impl, row.time_ms, row.gflops, e);
            if (grouped) printf(" %6.2f GB/s", row.gbps);
            printf("\n");
            fflush(stdout);
        }
        if (impl == IMPL_OPENBLAS) {
            free(r.gb), free(r.gc), r.gb = r.gc = NULL;
            bench_settle_host_threads();
        }
    }
    /* (with --forms chosen and no peers there is nothing to compare) */
    if (st == TSR_SUCCESS && !opt->quiet && (gf[IMPL_CLBLAST] > 0 || gf[IMPL_OPENBLAS] > 0 || gf[IMPL_DIRECT] > 0)) {
        printf("%-14s %-30s tessera is", l->name, shape);
        const char *sep = "";
        if (gf[IMPL_CLBLAST] > 0) printf(" %.1fx clblast-convgemm", gf[IMPL_TESSERA] / gf[IMPL_CLBLAST]), sep = ",";
        if (gf[IMPL_OPENBLAS] > 0)
            printf("%s %.2f of openblas-gemm", sep, gf[IMPL_TESSERA] / gf[IMPL_OPENBLAS]), sep = ",";
        if (gf[IMPL_DIRECT] > 0) printf("%s %.1fx the naive direct kernel", sep, gf[IMPL_TESSERA] / gf[IMPL_DIRECT]);
        printf("\n");
    }
out:
    free(r.gb), free(r.gc);
    if (r.x) clReleaseMemObject(r.x);
    if (r.w) clReleaseMemObject(r.w);
    if (r.y) clReleaseMemObject(r.y);
    free(hx), free(hw), free(hy), free(ref);
    return st;
}

/* ---- the whole ResNet-50 conv stack: its 53 convolutions in order ---- */

typedef struct stack_run {
    tsr_device *dev;
    size_t batch;
    bool clblast;
    cl_mem x, y, w, bias;
} stack_run;

/* The network's order: conv1, then per stage its blocks (reduce, 3x3, expand, and the
 * downsample in the first block). */
static const char *const stack_order[] = {
    "conv1",
    "l1.reduce64", "l1.3x3", "l1.expand", "l1.expand", "l1.reduce256", "l1.3x3", "l1.expand", "l1.reduce256", "l1.3x3",
    "l1.expand",
    "l2.reduce256", "l2.3x3s2", "l2.expand", "l2.down", "l2.reduce512", "l2.3x3", "l2.expand", "l2.reduce512",
    "l2.3x3", "l2.expand", "l2.reduce512", "l2.3x3", "l2.expand",
    "l3.reduce512", "l3.3x3s2", "l3.expand", "l3.down", "l3.reduce1024", "l3.3x3", "l3.expand", "l3.reduce1024",
    "l3.3x3", "l3.expand", "l3.reduce1024", "l3.3x3", "l3.expand", "l3.reduce1024", "l3.3x3", "l3.expand",
    "l3.reduce1024", "l3.3x3", "l3.expand",
    "l4.reduce1024", "l4.3x3s2", "l4.expand", "l4.down", "l4.reduce2048", "l4.3x3", "l4.expand", "l4.reduce2048",
    "l4.3x3", "l4.expand",
};

static const resnet_layer *find_layer(const char *name) {
    for (size_t i = 0; i < NLAYERS; ++i)
        if (strcmp(resnet50[i].name, name) == 0) return &resnet50[i];
    return NULL;
}

static tsr_status run_stack(void *ctx) {
    stack_run *s = ctx;
    for (size_t i = 0; i < sizeof stack_order / sizeof stack_order[0]; ++i) {
        tsr_conv2d_desc d = layer_desc(find_layer(stack_order[i]), s->batch);
        if (!s->clblast) {
            /* inference: batch norm folded into the bias, then ReLU */
            d.epilogue = (tsr_epilogue){.bias = s->bias, .activation = TSR_ACT_RELU};
            tsr_status st = tsr_conv2d(s->dev, &d, s->x, s->w, s->y, NULL, NULL);
            if (st != TSR_SUCCESS) return st;
            continue;
        }
#ifdef TSR_HAVE_CLBLAST
        cl_command_queue q = tsr_device_queue(s->dev);
        CLBlastStatusCode cs = CLBlastSconvgemm(CLBlastKernelModeCrossCorrelation, d.in_channels, d.in_height,
                                                d.in_width, d.kernel_h, d.kernel_w, d.pad_h, d.pad_w, d.stride_h,
                                                d.stride_w, 1, 1, d.out_channels, d.batch, s->x, 0, s->w, 0, s->y, 0,
                                                &q, NULL);
        if (cs != CLBlastSuccess) return tsr_fail(TSR_ERR_OPENCL, "CLBlastSconvgemm failed with status %d", (int)cs);
#endif
    }
    clFinish(tsr_device_queue(s->dev));
    return TSR_SUCCESS;
}

/* The stack's buffers (largest input, weights, bias, output, in elements) and its FLOP count at a
 * batch size, checked against the device and the host. */
typedef struct stack_sizes {
    size_t x, w, k, y;
    double flops;
} stack_sizes;

static tsr_status stack_check(tsr_device *dev, size_t batch, stack_sizes *out) {
    size_t max_x = 0, max_y = 0, max_w = 0, max_k = 0;
    double flops = 0;
    for (size_t i = 0; i < sizeof stack_order / sizeof stack_order[0]; ++i) {
        const resnet_layer *l = find_layer(stack_order[i]);
        tsr_conv2d_desc d = layer_desc(l, batch);
        size_t P, Q;
        tsr_conv2d_output_size(&d, &P, &Q);
        size_t nx = batch * (size_t)l->c * l->h * l->h, ny = batch * (size_t)l->k * P * Q;
        size_t nw = (size_t)l->k * l->c * l->r * l->r;
        max_x = nx > max_x ? nx : max_x, max_y = ny > max_y ? ny : max_y, max_w = nw > max_w ? nw : max_w;
        max_k = (size_t)l->k > max_k ? (size_t)l->k : max_k;
        flops += tsr_conv2d_flops(&d);
    }
    size_t bytes[4] = {max_x * 4, max_w * 4, max_k * 4, max_y * 4};
    char what[64];
    snprintf(what, sizeof what, "the conv2d stack at batch %zu", batch);
    tsr_status st = util_check_memory(dev, what, bytes, 4, (max_x > max_w ? max_x : max_w) * 4);
    if (st == TSR_SUCCESS && out) *out = (stack_sizes){max_x, max_w, max_k, max_y, flops};
    return st;
}

static tsr_status bench_stack(tsr_device *dev, const bench_options *opt, bench_report *report, size_t batch) {
    /* One input, one output, one weight buffer, each as large as the largest layer needs; the
     * layers read whatever the buffers hold (timing, not a real network's activations). */
    stack_sizes sz;
    tsr_status st = stack_check(dev, batch, &sz);
    if (st != TSR_SUCCESS) return st;
    size_t max_x = sz.x, max_y = sz.y, max_w = sz.w, max_k = sz.k;
    double flops = sz.flops;
    stack_run s = {.dev = dev, .batch = batch};
    cl_int err = CL_SUCCESS;
    size_t fill = max_x > max_w ? max_x : max_w;
    float *h = malloc(fill * 4);
    if (!h) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
    uint64_t seed = 0x853C49E6748FEA9Bull;
    tsr_random_fill(h, fill, &seed, -1.0f, 1.0f);
    s.x = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, max_x * 4, h, &err);
    if (err == CL_SUCCESS)
        s.w = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, max_w * 4, h, &err);
    if (err == CL_SUCCESS)
        s.bias = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, max_k * 4, h, &err);
    if (err == CL_SUCCESS) s.y = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, max_y * 4, NULL, &err);
    free(h);
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        goto out;
    }
    if ((st = keep_weights(opt, s.w)) != TSR_SUCCESS) goto out;
    double ms[2] = {0, 0};
    for (int peer = 0; peer < 2 && st == TSR_SUCCESS; ++peer) {
        if (peer) {
#ifdef TSR_HAVE_CLBLAST
            if (!opt->peers) break;
#else
            break;
#endif
        }
        s.clblast = peer;
        bench_row row = {0};
        if ((st = bench_time(run_stack, &s, opt->budget_s, 3, 20, &row)) != TSR_SUCCESS) break;
        strcpy(row.op, "conv2d-stack");
        snprintf(row.shape, sizeof row.shape, "resnet50 53 convs, batch %zu", batch);
        tsr_strlcpy(row.impl, peer ? "clblast-convgemm" : "tessera(+bias+relu)", sizeof row.impl);
        row.gflops = flops / (row.time_ms * 1e6);
        row.rel_err = -1;
        ms[peer] = row.time_ms;
        if ((st = bench_add(report, &row)) != TSR_SUCCESS) break;
        if (!opt->quiet) {
            printf("%-14s %-30s %-20s %10.3f %9.1f %9s\n", "stack", row.shape, row.impl, row.time_ms, row.gflops, "-");
            fflush(stdout);
        }
    }
    if (st == TSR_SUCCESS && !opt->quiet && ms[1] > 0)
        printf("%-14s batch %zu: tessera (with bias and ReLU) is %.1fx CLBlast convgemm (without)\n", "stack", batch,
               ms[1] / ms[0]);
out:
    if (s.x) clReleaseMemObject(s.x);
    if (s.w) clReleaseMemObject(s.w);
    if (s.bias) clReleaseMemObject(s.bias);
    if (s.y) clReleaseMemObject(s.y);
    return st;
}

/* ---- a ResNet-50 bottleneck block, BatchNorm folded into per-channel scales and biases ----
 * x [N, C, H, H] -> 1x1 C->mid +BN +ReLU -> 3x3 mid->mid +BN +ReLU -> 1x1 mid->C +BN +x +ReLU -> y.
 * Fused: three tsr_conv2d calls, each with its whole epilogue in the convolution's pass over its
 * output. Unfused, as a framework without fusion runs it: each convolution alone, then one pass
 * per elementwise step, built from tessera's own ops as there is no elementwise op: the BatchNorm
 * as a depthwise 1x1 convolution (weights = the scales, bias = the biases: y -> u), the residual
 * add and the ReLU each a GEMM with k = 0 and beta = 1 over the tensor viewed as an (N C) x (H W)
 * matrix, in place (C <- C + x through the epilogue's residual; C <- relu(C)). */
typedef struct block_run {
    tsr_device *dev;
    bool fused;
    tsr_conv2d_desc conv[3]; /* no epilogue */
    cl_mem x, w[3], scale[3], bias[3], t[2], u, y;
} block_run;

/* One elementwise pass over the tensor `c` of rows x cols: relu(c) or c + residual, in place. */
static tsr_status block_pass(block_run *b, cl_mem c, size_t rows, size_t cols, cl_mem residual) {
    tsr_matmul_desc g = {.m = rows, .n = cols, .k = 0, .alpha = 0.0f, .beta = 1.0f};
    if (residual) g.epilogue.residual = residual;
    else g.epilogue.activation = TSR_ACT_RELU;
    return tsr_matmul(b->dev, &g, b->x, b->x, c, NULL, NULL);
}

static tsr_status run_block(void *ctx) {
    block_run *b = ctx;
    tsr_status st = TSR_SUCCESS;
    for (int i = 0; i < 3 && st == TSR_SUCCESS; ++i) {
        tsr_conv2d_desc d = b->conv[i];
        cl_mem in = i == 0 ? b->x : b->t[i - 1], out = i == 2 ? b->y : b->t[i];
        size_t rows = d.batch * d.out_channels, cols = d.in_height * d.in_width; /* stride 1, same size */
        if (b->fused) {
            d.epilogue = (tsr_epilogue){.scale = b->scale[i], .bias = b->bias[i], .activation = TSR_ACT_RELU,
                                        .residual = i == 2 ? b->x : NULL};
            st = tsr_conv2d(b->dev, &d, in, b->w[i], out, NULL, NULL);
            continue;
        }
        st = tsr_conv2d(b->dev, &d, in, b->w[i], b->u, NULL, NULL);
        tsr_conv2d_desc bn = {.batch = d.batch, .in_channels = d.out_channels, .in_height = d.in_height,
                              .in_width = d.in_width, .out_channels = d.out_channels, .kernel_h = 1, .kernel_w = 1,
                              .groups = d.out_channels, .epilogue = {.bias = b->bias[i]}};
        if (st == TSR_SUCCESS) st = tsr_conv2d(b->dev, &bn, b->u, b->scale[i], out, NULL, NULL);
        if (st == TSR_SUCCESS && i == 2) st = block_pass(b, out, rows, cols, b->x);
        if (st == TSR_SUCCESS) st = block_pass(b, out, rows, cols, NULL);
    }
    if (st == TSR_SUCCESS) clFinish(tsr_device_queue(b->dev));
    return st;
}

/* The stage-1 and stage-3 blocks of ResNet-50 (identity shortcut): C, H, mid. */
static const int blocks[][3] = {{256, 56, 64}, {1024, 14, 256}};

/* A block's buffers (x, two bottleneck temporaries, the unfused pass's temporary, y) against the
 * device and the host (x and y there, with the reference's planes). */
static tsr_status block_check(tsr_device *dev, size_t batch, const int *shape) {
    const size_t C = (size_t)shape[0], H = (size_t)shape[1], mid = (size_t)shape[2];
    size_t nx = batch * C * H * H, nt = batch * mid * H * H;
    size_t sizes[] = {nx * 4, nt * 4, nt * 4, nx * 4, nx * 4};
    char what[64];
    snprintf(what, sizeof what, "the bottleneck block %zux%zu at batch %zu", C, H, batch);
    return util_check_memory(dev, what, sizes, 5, 2 * nx * 4 + 2 * C * H * H * (sizeof(double) + 4));
}

static tsr_status bench_block(tsr_device *dev, const bench_options *opt, bench_report *report, size_t batch,
                              const int *shape) {
    const size_t C = (size_t)shape[0], H = (size_t)shape[1], mid = (size_t)shape[2];
    const size_t kin[3] = {C, mid, mid}, kout[3] = {mid, mid, C}, ks[3] = {1, 3, 1};
    block_run r[2];
    memset(r, 0, sizeof r);
    size_t nx = batch * C * H * H, nt = batch * mid * H * H, nw[3];
    tsr_status st = block_check(dev, batch, shape);
    if (st != TSR_SUCCESS) return st;
    float *h = malloc(nx * 4), *hy = malloc(nx * 4);
    double *ref[2] = {malloc(C * H * H * sizeof(double)), malloc(C * H * H * sizeof(double))};
    float *href[2] = {malloc(C * H * H * 4), malloc(C * H * H * 4)};
    float *hw[3] = {NULL, NULL, NULL}, hs[3][1024], hb[3][1024];
    cl_context ctx = tsr_device_context(dev);
    cl_int err = CL_SUCCESS;
    if (!h || !hy || !ref[0] || !ref[1] || !href[0] || !href[1]) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
        goto out;
    }
    uint64_t seed = 0x2545F4914F6CDD1Dull ^ C ^ batch;
    tsr_random_fill(h, nx, &seed, -1.0f, 1.0f);
    r[0].x = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nx * 4, h, &err);
    for (int i = 0; i < 3 && err == CL_SUCCESS; ++i) {
        nw[i] = kout[i] * kin[i] * ks[i] * ks[i];
        hw[i] = malloc(nw[i] * 4);
        if (!hw[i]) {
            st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
            goto out;
        }
        /* He-like weights and a BatchNorm's folded scale and bias keep the activations O(1) */
        float a = (float)sqrt(3.0 / (double)(kin[i] * ks[i] * ks[i]));
        tsr_random_fill(hw[i], nw[i], &seed, -a, a);
        tsr_random_fill(hs[i], kout[i], &seed, 0.5f, 1.5f);
        tsr_random_fill(hb[i], kout[i], &seed, -0.5f, 0.5f);
        r[0].w[i] = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nw[i] * 4, hw[i], &err);
        if (err == CL_SUCCESS)
            r[0].scale[i] = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, kout[i] * 4, hs[i], &err);
        if (err == CL_SUCCESS)
            r[0].bias[i] = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, kout[i] * 4, hb[i], &err);
        r[0].conv[i] = (tsr_conv2d_desc){.batch = batch, .in_channels = kin[i], .in_height = H, .in_width = H,
                                         .out_channels = kout[i], .kernel_h = ks[i], .kernel_w = ks[i],
                                         .pad_h = ks[i] / 2, .pad_w = ks[i] / 2};
    }
    for (int i = 0; i < 2 && err == CL_SUCCESS; ++i)
        r[0].t[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, nt * 4, NULL, &err);
    if (err == CL_SUCCESS) r[0].u = clCreateBuffer(ctx, CL_MEM_READ_WRITE, nx * 4, NULL, &err);
    if (err == CL_SUCCESS) r[0].y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, nx * 4, NULL, &err);
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        goto out;
    }
    for (int i = 0; i < 3 && st == TSR_SUCCESS; ++i) st = keep_weights(opt, r[0].w[i]);
    if (st != TSR_SUCCESS) goto out;
    r[0].dev = dev, r[0].fused = true;
    r[1] = r[0], r[1].fused = false;
    /* the reference of the first image: the three layers in double, each fed the last one's output
     * rounded to fp32 (what the device stores) */
    const float *in = h;
    for (int i = 0; i < 3; ++i) {
        tsr_conv2d_desc one = r[0].conv[i];
        one.batch = 1, one.epilogue.activation = TSR_ACT_RELU;
        tsr_conv2d_reference_fused(&one, in, hw[i], hs[i], hb[i], i == 2 ? h : NULL, ref[i % 2]);
        size_t n = kout[i] * H * H;
        for (size_t e = 0; e < n; ++e) href[i % 2][e] = (float)ref[i % 2][e];
        in = href[i % 2];
    }
    bench_row rows[2];
    memset(rows, 0, sizeof rows);
    double ratio[3];
    if ((st = bench_time_paired(run_block, &r[0], run_block, &r[1], opt->budget_s, 3, 50, &rows[0], &rows[1],
                                ratio)) != TSR_SUCCESS)
        goto out;
    double flops = 0;
    for (int i = 0; i < 3; ++i) flops += tsr_conv2d_flops(&r[0].conv[i]);
    for (int i = 0; i < 2 && st == TSR_SUCCESS; ++i) {
        for (size_t e = 0; e < nx; ++e) hy[e] = NAN;
        if ((st = tsr_upload(dev, r[i].y, hy, nx)) != TSR_SUCCESS || (st = run_block(&r[i])) != TSR_SUCCESS ||
            (st = tsr_download(dev, r[i].y, hy, nx)) != TSR_SUCCESS)
            break;
        strcpy(rows[i].op, "conv2d-block");
        snprintf(rows[i].shape, sizeof rows[i].shape, "%zux%zux%zux%zu bottleneck %zu", batch, C, H, H, mid);
        tsr_strlcpy(rows[i].impl, i ? "tessera-unfused" : "tessera-fused", sizeof rows[i].impl);
        tsr_strlcpy(rows[i].variant,
                    i ? "3 convs + 7 passes (BN: depthwise 1x1; add, ReLU: k=0 GEMM)"
                      : "3 convs, BN+residual+ReLU in their epilogues",
                    sizeof rows[i].variant);
        rows[i].gflops = flops / (rows[i].time_ms * 1e6);
        rows[i].rel_err = tsr_rel_error(hy, ref[0], C * H * H); /* the first image */
        if ((st = bench_add(report, &rows[i])) != TSR_SUCCESS) break;
        if (!opt->quiet) {
            printf("%-14s %-30s %-20s %10.3f %9.1f %9.1e\n", "block", rows[i].shape, rows[i].impl, rows[i].time_ms,
                   rows[i].gflops, rows[i].rel_err);
            fflush(stdout);
        }
    }
    if (st == TSR_SUCCESS && !opt->quiet)
        printf("%-14s %-30s timed in alternation (%d pairs): fused is %.2fx unfused (pairs: median; %.2f to %.2f)\n",
               "block", rows[0].shape, rows[0].runs, 1.0 / ratio[0], 1.0 / ratio[2], 1.0 / ratio[1]);
out:
    {
        cl_mem all[] = {r[0].x, r[0].w[0], r[0].w[1], r[0].w[2], r[0].scale[0], r[0].scale[1], r[0].scale[2],
                        r[0].bias[0], r[0].bias[1], r[0].bias[2], r[0].t[0], r[0].t[1], r[0].u, r[0].y};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
            if (all[i]) clReleaseMemObject(all[i]);
    }
    for (int i = 0; i < 3; ++i) free(hw[i]);
    free(h), free(hy), free(ref[0]), free(ref[1]), free(href[0]), free(href[1]);
    return st;
}

tsr_status bench_conv2d(tsr_device *dev, const bench_options *opt, bench_report *report) {
    size_t *batches = NULL, nbatches = 0;
    tsr_status st = TSR_SUCCESS;
    bool depthwise = opt->part && strcmp(opt->part, "depthwise") == 0;
    bool layers = !opt->part || strcmp(opt->part, "layers") == 0 || depthwise;
    bool stack = !opt->part || strcmp(opt->part, "stack") == 0;
    bool block = !opt->part || strcmp(opt->part, "block") == 0;
    if (opt->max_unfused) return tsr_fail(TSR_ERR_INVALID_ARG, "--max-unfused: only attention has unfused pipelines");
    if (opt->clblast_xgemm) return tsr_fail(TSR_ERR_INVALID_ARG, "--clblast-xgemm: only for the gemm benchmark");
    /* Check the layer names before anything runs. */
    const char *names = opt->layers ? opt->layers : depthwise ? default_depthwise : default_layers;
    if (strcmp(names, "mobilenet") == 0) names = mobilenet_depthwise; /* MobileNet-V2's depthwise layers */
    const resnet_layer *chosen[NLAYERS];
    size_t nchosen = 0;
    char buf[1024];
    tsr_strlcpy(buf, strcmp(names, "all") == 0 ? "" : names, sizeof buf);
    if (strcmp(names, "all") == 0) {
        for (size_t i = 0; i < NLAYERS; ++i) chosen[nchosen++] = &resnet50[i];
    } else {
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            const resnet_layer *l = find_layer(tok);
            if (!l) {
                char list[512] = "";
                for (size_t i = 0; i < NLAYERS; ++i) {
                    strncat(list, resnet50[i].name, sizeof list - strlen(list) - 1);
                    if (i + 1 < NLAYERS) strncat(list, ", ", sizeof list - strlen(list) - 1);
                }
                return tsr_fail(TSR_ERR_INVALID_ARG, "--layers: no ResNet-50 layer '%s' (all, or some of: %s)", tok,
                                list);
            }
            if (nchosen < NLAYERS) chosen[nchosen++] = l;
        }
    }
    if ((st = util_parse_counts(opt->sizes, "batch sizes", CONV_MAX_BATCH, &batches,
                                &nbatches)) != TSR_SUCCESS)
        return st;
    bool typed = opt->in_type != TSR_F32 || opt->out_type != TSR_F32;
    /* Every layer and batch checked before the first one runs. */
    for (size_t b = 0; b < nbatches && st == TSR_SUCCESS && layers; ++b)
        for (size_t i = 0; i < nchosen && st == TSR_SUCCESS; ++i) st = layer_check(dev, opt, chosen[i], batches[b]);
    for (size_t b = 0; b < nbatches && st == TSR_SUCCESS && stack; ++b) st = stack_check(dev, batches[b], NULL);
    for (size_t b = 0; b < nbatches && st == TSR_SUCCESS && block && !typed; ++b)
        for (size_t i = 0; i < sizeof blocks / sizeof blocks[0] && st == TSR_SUCCESS; ++i)
            st = block_check(dev, batches[b], blocks[i]);
    if (st != TSR_SUCCESS) {
        free(batches);
        return st;
    }
    if (!opt->quiet)
        printf("%-14s %-30s %-20s %10s %9s %9s\n", "layer", "shape (NxCxHxW kK RxS/stride pad)", "impl", "ms",
               "GFLOP/s", "rel_err");
    if (typed && !opt->quiet)
        printf("# 16-bit storage: only tessera runs (each layer paired with fp32); CLBlast's convgemm "
               "(CLBlastSconvgemm) and OpenBLAS are fp32-only, so they do not run on these buffers%s\n",
               stack || block ? "; the ResNet-50 stack and bottleneck block run in fp32 only and are passed over"
                              : "");
    for (size_t b = 0; b < nbatches && st == TSR_SUCCESS && layers; ++b)
        for (size_t i = 0; i < nchosen && st == TSR_SUCCESS; ++i) st = bench_layer(dev, opt, report, chosen[i], batches[b]);
    for (size_t b = 0; b < nbatches && st == TSR_SUCCESS && stack && !typed; ++b)
        st = bench_stack(dev, opt, report, batches[b]);
    for (size_t b = 0; b < nbatches && st == TSR_SUCCESS && block && !typed; ++b)
        for (size_t i = 0; i < sizeof blocks / sizeof blocks[0] && st == TSR_SUCCESS; ++i)
            st = bench_block(dev, opt, report, batches[b], blocks[i]);
    free(batches);
    return st;
}
