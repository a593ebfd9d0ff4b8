/* conv2d against a double-precision direct convolution: ResNet-50's distinct layers at batch 1
 * (every output) and batch 8 (a random sample of outputs, every output checked as written),
 * through each path (tuned choice, im2col + GEMM, implicit GEMM, naive direct); 1x1, 7x7 stride
 * 2, odd sizes, padding beyond the kernel, dilation, asymmetric strides, grouped and depthwise
 * layers, with bias and every activation; offsets and guard zones; caller workspaces; CLBlast's
 * convgemm; kernel configurations; the tuner's choice between paths; every invalid descriptor.
 * Relative error (norm over the output) <= 1e-5. 16-bit storage (x, w, y each f32, f16 or bf16)
 * on every path, against the reference from the rounded inputs, within max(1e-5,
 * tsr_dtype_error_bound(y_type, Cg R S)). TSR_TEST_MODE=oclgrind runs a small subset. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TSR_HAVE_CLBLAST
#include <clblast_c.h>
#endif

#define dev th_dev /* the group's device (harness) */
#define TOLERANCE 1e-5

static bool small_mode(void) { return th_small_mode(); }
/* The default tier gives the sweeps fewer draws (every kind still runs); TSR_TEST_LONG=1 runs all. */
static bool default_tier(void) { return !th_small_mode() && !th_long_mode(); }
/* Under Oclgrind (a call costs seconds in its checkers) the default tier leaves out what runs a
 * kernel again without a new shape for it; TSR_TEST_LONG=1 runs the whole small set there. */
static bool grind_thin(void) { return th_oclgrind_mode() && th_small_thinned(); }

typedef struct conv_case {
    size_t N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, G;
    bool bias;
    int act;
    size_t off; /* offset of x, w, bias and y, with guard zones on both sides of y */
} conv_case;

static tsr_conv2d_desc case_desc(const conv_case *c, tsr_conv_algo algo) {
    tsr_conv2d_desc d = {.batch = c->N,
                         .in_channels = c->C,
                         .in_height = c->H,
                         .in_width = c->W,
                         .out_channels = c->K,
                         .kernel_h = c->R,
                         .kernel_w = c->S,
                         .stride_h = c->sh,
                         .stride_w = c->sw,
                         .pad_h = c->ph,
                         .pad_w = c->pw,
                         .dilation_h = c->dh,
                         .dilation_w = c->dw,
                         .groups = c->G,
                         .epilogue.activation = (tsr_activation)c->act,
                         .x_offset = c->off,
                         .w_offset = c->off,
                         .epilogue.bias_offset = c->off,
                         .y_offset = c->off,
                         .algo = algo};
    return d;
}

/* tsr_conv2d with `bias` as desc's epilogue bias (NULL: none): the cases keep their buffers apart
 * from their descriptors. */
static tsr_status conv_bias(tsr_device *device, const tsr_conv2d_desc *desc, cl_mem x, cl_mem w, cl_mem bias, cl_mem y,
                            cl_command_queue queue, cl_event *event) {
    if (!desc) return tsr_conv2d(device, NULL, x, w, y, queue, event);
    tsr_conv2d_desc with = *desc;
    with.epilogue.bias = bias;
    return tsr_conv2d(device, &with, x, w, y, queue, event);
}

static size_t or1(size_t v) { return v ? v : 1; }

static void out_size(const conv_case *c, size_t *P, size_t *Q) {
    *P = (c->H + 2 * c->ph - or1(c->dh) * (c->R - 1) - 1) / or1(c->sh) + 1;
    *Q = (c->W + 2 * c->pw - or1(c->dw) * (c->S - 1) - 1) / or1(c->sw) + 1;
}

/* One output element in double, from the definition (x, w, bias without the case's offset). */
static double ref_at(const conv_case *c, const float *x, const float *w, const float *bias, size_t n, size_t k,
                     size_t oh, size_t ow) {
    size_t G = or1(c->G), Cg = c->C / G, Kg = c->K / G, g = k / Kg;
    double acc = c->bias ? bias[k] : 0.0;
    for (size_t ci = 0; ci < Cg; ++ci)
        for (size_t r = 0; r < c->R; ++r) {
            long ih = (long)(oh * or1(c->sh) + r * or1(c->dh)) - (long)c->ph;
            if (ih < 0 || ih >= (long)c->H) continue;
            for (size_t s = 0; s < c->S; ++s) {
                long iw = (long)(ow * or1(c->sw) + s * or1(c->dw)) - (long)c->pw;
                if (iw < 0 || iw >= (long)c->W) continue;
                acc += (double)w[((k * Cg + ci) * c->R + r) * c->S + s] *
                       x[((n * c->C + g * Cg + ci) * c->H + (size_t)ih) * c->W + (size_t)iw];
            }
        }
    return th_ref_activation(c->act, acc);
}

/* The whole output in double, plane by plane (fast enough for ResNet-50's layers). */
static void ref_all(const conv_case *c, const float *x, const float *w, const float *bias, double *y) {
    size_t P, Q;
    out_size(c, &P, &Q);
    size_t G = or1(c->G), Cg = c->C / G, Kg = c->K / G;
    for (size_t n = 0; n < c->N; ++n)
        for (size_t k = 0; k < c->K; ++k) {
            double *plane = y + (n * c->K + k) * P * Q;
            for (size_t i = 0; i < P * Q; ++i) plane[i] = c->bias ? bias[k] : 0.0;
            for (size_t ci = 0; ci < Cg; ++ci)
                for (size_t r = 0; r < c->R; ++r)
                    for (size_t s = 0; s < c->S; ++s) {
                        double wv = w[((k * Cg + ci) * c->R + r) * c->S + s];
                        const float *xc = x + (n * c->C + (k / Kg) * Cg + ci) * c->H * c->W;
                        for (size_t oh = 0; oh < P; ++oh) {
                            long ih = (long)(oh * or1(c->sh) + r * or1(c->dh)) - (long)c->ph;
                            if (ih < 0 || ih >= (long)c->H) continue;
                            for (size_t ow = 0; ow < Q; ++ow) {
                                long iw = (long)(ow * or1(c->sw) + s * or1(c->dw)) - (long)c->pw;
                                if (iw >= 0 && iw < (long)c->W) plane[oh * Q + ow] += wv * xc[ih * (long)c->W + iw];
                            }
                        }
                    }
            for (size_t i = 0; i < P * Q; ++i) plane[i] = th_ref_activation(c->act, plane[i]);
        }
}

typedef struct conv_data {
    float *x, *w, *bias, *y;
    size_t nx, nw, ny, P, Q;
    cl_mem dx, dw, db, dy;
} conv_data;

#define GUARD 5 /* floats after y that must stay untouched */

static void data_make(const conv_case *c, conv_data *d) {
    memset(d, 0, sizeof *d);
    out_size(c, &d->P, &d->Q);
    d->nx = c->N * c->C * c->H * c->W, d->nw = c->K * (c->C / or1(c->G)) * c->R * c->S;
    d->ny = c->N * c->K * d->P * d->Q;
    d->x = malloc((c->off + d->nx) * 4), d->w = malloc((c->off + d->nw) * 4), d->bias = malloc((c->off + c->K) * 4);
    d->y = malloc((c->off + d->ny + GUARD) * 4);
    th_fill_uniform(d->x, c->off + d->nx, -1, 1);
    th_fill_uniform(d->w, c->off + d->nw, -1, 1);
    th_fill_uniform(d->bias, c->off + c->K, -1, 1);
    d->dx = th_buffer_from(dev, d->x, c->off + d->nx);
    d->dw = th_buffer_from(dev, d->w, c->off + d->nw);
    d->db = th_buffer_from(dev, d->bias, c->off + c->K);
    d->dy = th_buffer(dev, c->off + d->ny + GUARD);
}

static void data_free(conv_data *d) {
    clReleaseMemObject(d->dx), clReleaseMemObject(d->dw), clReleaseMemObject(d->db), clReleaseMemObject(d->dy);
    free(d->x), free(d->w), free(d->bias), free(d->y);
}

/* Guards hold 777, the output NaN: anything unwritten or written out of place shows. */
static void poison_output(const conv_case *c, conv_data *d) {
    for (size_t i = 0; i < c->off + d->ny + GUARD; ++i) d->y[i] = 777.0f;
    th_poison(d->y + c->off, d->ny);
    TH_ASSERT_OK(tsr_upload(dev, d->dy, d->y, c->off + d->ny + GUARD));
}

static void run(const conv_case *c, conv_data *d, tsr_conv_algo algo, const char *what) {
    poison_output(c, d);
    tsr_conv2d_desc desc = case_desc(c, algo);
    cl_event ev = NULL;
    tsr_status st = conv_bias(dev, &desc, d->dx, d->dw, c->bias ? d->db : NULL, d->dy, NULL, &ev);
    if (st != TSR_SUCCESS) fail_msg("%s algo %d: %s: %s", what, (int)algo, tsr_status_str(st), tsr_last_error());
    assert_non_null(ev);
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    th_read(dev, d->dy, d->y, c->off + d->ny + GUARD);
    for (size_t i = 0; i < c->off; ++i)
        if (d->y[i] != 777.0f) fail_msg("%s algo %d: guard before y[%zu] overwritten", what, (int)algo, i);
    for (size_t i = 0; i < GUARD; ++i)
        if (d->y[c->off + d->ny + i] != 777.0f) fail_msg("%s algo %d: guard after y overwritten", what, (int)algo);
}

static const char *case_name(const conv_case *c, char *buf, size_t size) {
    snprintf(buf, size, "N%zu C%zu %zux%zu K%zu %zux%zu s%zu,%zu p%zu,%zu d%zu,%zu g%zu bias%d act%d off%zu", c->N,
             c->C, c->H, c->W, c->K, c->R, c->S, or1(c->sh), or1(c->sw), c->ph, c->pw, or1(c->dh), or1(c->dw),
             or1(c->G), c->bias, c->act, c->off);
    return buf;
}

static double rel_error_full(const conv_data *d, const double *ref, size_t off) {
    return tsr_rel_error(d->y + off, ref, d->ny);
}

static const tsr_conv_algo all_algos[] = {TSR_CONV_AUTO, TSR_CONV_IM2COL, TSR_CONV_IMPLICIT, TSR_CONV_DIRECT};

/* Every output against the full reference, for each path in `algos`. */
static void expect_accurate(const conv_case *c, const tsr_conv_algo *algos, size_t nalgos) {
    char name[256];
    case_name(c, name, sizeof name);
    conv_data d;
    data_make(c, &d);
    double *ref = malloc(d.ny * sizeof *ref);
    ref_all(c, d.x + c->off, d.w + c->off, d.bias + c->off, ref);
    for (size_t a = 0; a < nalgos; ++a) {
        run(c, &d, algos[a], name);
        double e = rel_error_full(&d, ref, c->off);
        if (!(e <= TOLERANCE)) fail_msg("%s algo %d: relative error %.3e", name, (int)algos[a], e);
    }
    free(ref);
    data_free(&d);
}

/* Every output written and finite; a random sample (plus the corners of the first and last
 * image) against the per-element reference. */
static void expect_accurate_sampled(const conv_case *c, const tsr_conv_algo *algos, size_t nalgos, size_t samples) {
    char name[256];
    case_name(c, name, sizeof name);
    conv_data d;
    data_make(c, &d);
    size_t *idx = malloc((samples + 8) * sizeof *idx);
    double *ref = malloc((samples + 8) * sizeof *ref);
    size_t ns = 0, per_image = c->K * d.P * d.Q;
    size_t corners[8] = {0, d.Q - 1, (d.P - 1) * d.Q, d.P * d.Q - 1, per_image - 1, per_image - d.P * d.Q,
                         (c->N - 1) * per_image, d.ny - 1};
    for (int i = 0; i < 8; ++i) idx[ns++] = corners[i];
    while (ns < samples + 8) idx[ns++] = th_rand() % d.ny;
    for (size_t i = 0; i < ns; ++i) {
        size_t e = idx[i], ow = e % d.Q, oh = (e / d.Q) % d.P, k = (e / (d.P * d.Q)) % c->K, n = e / per_image;
        ref[i] = ref_at(c, d.x + c->off, d.w + c->off, d.bias + c->off, n, k, oh, ow);
    }
    for (size_t a = 0; a < nalgos; ++a) {
        run(c, &d, algos[a], name);
        for (size_t i = 0; i < d.ny; ++i)
            if (!isfinite(d.y[c->off + i])) fail_msg("%s algo %d: y[%zu] = %g", name, (int)algos[a], i, d.y[c->off + i]);
        tsr_error_sum sum = {0, 0};
        for (size_t i = 0; i < ns; ++i) tsr_error_add(&sum, d.y[c->off + idx[i]], ref[i]);
        double e = tsr_error_value(&sum);
        if (!(e <= TOLERANCE)) fail_msg("%s algo %d: relative error %.3e over %zu samples", name, (int)algos[a], e, ns);
    }
    free(idx), free(ref);
    data_free(&d);
}

/* ResNet-50's distinct layers (torchvision: stride in the 3x3), square: C, H, K, R, stride, pad. */
static const int resnet50[][6] = {
    {3, 224, 64, 7, 2, 3},     {64, 56, 64, 1, 1, 0},     {256, 56, 64, 1, 1, 0},    {64, 56, 64, 3, 1, 1},
    {64, 56, 256, 1, 1, 0},    {256, 56, 128, 1, 1, 0},   {128, 56, 128, 3, 2, 1},   {128, 28, 512, 1, 1, 0},
    {256, 56, 512, 1, 2, 0},   {512, 28, 128, 1, 1, 0},   {128, 28, 128, 3, 1, 1},   {512, 28, 256, 1, 1, 0},
    {256, 28, 256, 3, 2, 1},   {256, 14, 1024, 1, 1, 0},  {512, 28, 1024, 1, 2, 0},  {1024, 14, 256, 1, 1, 0},
    {256, 14, 256, 3, 1, 1},   {1024, 14, 512, 1, 1, 0},  {512, 14, 512, 3, 2, 1},   {512, 7, 2048, 1, 1, 0},
    {1024, 14, 2048, 1, 2, 0}, {2048, 7, 512, 1, 1, 0},   {512, 7, 512, 3, 1, 1},
};
#define NRESNET (sizeof resnet50 / sizeof resnet50[0])

static conv_case resnet_case(size_t i, size_t batch) {
    const int *l = resnet50[i];
    conv_case c = {.N = batch, .C = (size_t)l[0], .H = (size_t)l[1], .W = (size_t)l[1], .K = (size_t)l[2],
                   .R = (size_t)l[3], .S = (size_t)l[3], .sh = (size_t)l[4], .sw = (size_t)l[4],
                   .ph = (size_t)l[5], .pw = (size_t)l[5]};
    /* epilogues on real shapes too: bias on every other layer, the activations in turn */
    c.bias = i % 2 == 0;
    c.act = (int)(i % 4);
    return c;
}

/* The sanitizer tier (th_sanitizer_tier: the ASan+UBSan build, whose instrumented double
 * reference took most of the 36 s of these three cases) runs one layer of each kind at batch 1:
 * conv1 (7x7/2), 3x3, 3x3/2 (part a, with the naive direct path), 1x1 and a 3x3 on 7x7 (part b),
 * 1x1/2 (part c); the plain build runs every layer, the long tier every path on each. */
static bool resnet50_sanitizer_layer(size_t i) {
    static const size_t layers[] = {0, 3, 6, 1, 22, 8};
    for (size_t j = 0; j < sizeof layers / sizeof layers[0]; ++j)
        if (layers[j] == i) return true;
    return false;
}

/* The ResNet-50 sweeps run as three cases each (layers i mod 3), so shards spread them. */
static void resnet50_batch1_part(size_t part) {
    for (size_t i = part; i < NRESNET; i += 3) {
        if (th_sanitizer_tier() && !resnet50_sanitizer_layer(i)) continue;
        conv_case c = resnet_case(i, 1);
        /* the naive direct path takes seconds a layer: the default tier runs it on every third
         * layer (conv1, 3x3, 3x3/2 and 1x1 among them) */
        expect_accurate(&c, all_algos, default_tier() && i % 3 ? 3 : 4);
    }
}

static void resnet50_batch8_part(size_t part) {
    for (size_t i = part; i < NRESNET; i += 3) {
        if (default_tier() && i % 2) continue; /* every kind of layer is among the even ones */
        conv_case c = resnet_case(i, 8);
        expect_accurate_sampled(&c, all_algos, 3, 3000); /* the naive direct path only at batch 1: it takes seconds */
    }
}

static void resnet50_batch1_a(void **state) { (void)state, resnet50_batch1_part(0); }
static void resnet50_batch1_b(void **state) { (void)state, resnet50_batch1_part(1); }
static void resnet50_batch1_c(void **state) { (void)state, resnet50_batch1_part(2); }
static void resnet50_batch8_a(void **state) { (void)state, resnet50_batch8_part(0); }
static void resnet50_batch8_b(void **state) { (void)state, resnet50_batch8_part(1); }
static void resnet50_batch8_c(void **state) { (void)state, resnet50_batch8_part(2); }

/* 1x1 layers whose per-image GEMMs read x in place (gemm.c's unpacked_b_for_images: CPU, at most
 * 128 output channels, at least 2048 pixels an image), at its bounds and beside them: the
 * im2col path (the GEMM) and the call's own choice, offsets and guard zones, epilogues. */
static void pointwise_unpacked_b(void **state) {
    (void)state;
    const conv_case cases[] = {
        {.N = 2, .C = 24, .H = 48, .W = 48, .K = 20, .R = 1, .S = 1, .off = 5, .bias = true, .act = 1},
        {.N = 1, .C = 10, .H = 45, .W = 47, .K = 9, .R = 1, .S = 1, .off = 3},         /* ragged row of tiles */
        {.N = 1, .C = 33, .H = 64, .W = 64, .K = 128, .R = 1, .S = 1, .bias = true, .act = 2}, /* m = 128 */
        {.N = 3, .C = 16, .H = 64, .W = 32, .K = 7, .R = 1, .S = 1, .act = 3},          /* n = 2048 */
        {.N = 2, .C = 8, .H = 48, .W = 48, .K = 129, .R = 1, .S = 1, .bias = true},     /* m = 129: packed */
        {.N = 2, .C = 12, .H = 45, .W = 45, .K = 16, .R = 1, .S = 1, .act = 1},         /* across images */
    };
    const tsr_conv_algo algos[] = {TSR_CONV_IM2COL, TSR_CONV_AUTO};
    size_t n = small_mode() ? 2 : sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; ++i) {
        conv_case c = cases[i];
        if (small_mode()) c.N = 1, c.C = 3;
        expect_accurate(&c, algos, small_mode() ? 1 : 2);
    }
}

static void shapes(void **state) {
    (void)state;
    const conv_case cases[] = {
        {.N = 2, .C = 3, .H = 9, .W = 11, .K = 5, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true},
        {.N = 1, .C = 8, .H = 13, .W = 17, .K = 7, .R = 1, .S = 1},                              /* 1x1 */
        {.N = 3, .C = 6, .H = 15, .W = 15, .K = 4, .R = 1, .S = 1, .sh = 2, .sw = 2, .act = 1},  /* 1x1 stride 2 */
        {.N = 1, .C = 3, .H = 37, .W = 41, .K = 8, .R = 7, .S = 7, .sh = 2, .sw = 2, .ph = 3, .pw = 3, .bias = true,
         .act = 2},                                                                              /* 7x7/2 pad 3 */
        {.N = 2, .C = 5, .H = 6, .W = 5, .K = 3, .R = 3, .S = 3, .ph = 4, .pw = 5, .act = 3},    /* padding > kernel */
        {.N = 1, .C = 4, .H = 19, .W = 23, .K = 6, .R = 3, .S = 3, .ph = 2, .pw = 2, .dh = 2, .dw = 2, .bias = true},
        {.N = 2, .C = 4, .H = 12, .W = 31, .K = 5, .R = 3, .S = 5, .sh = 2, .sw = 1, .ph = 1, .pw = 2, .act = 1},
        {.N = 2, .C = 8, .H = 10, .W = 10, .K = 12, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 4, .bias = true, .act = 2},
        {.N = 2, .C = 16, .H = 14, .W = 14, .K = 16, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 16, .bias = true,
         .act = 1},                                                                              /* depthwise */
        {.N = 1, .C = 6, .H = 9, .W = 9, .K = 12, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .G = 6,
         .act = 3},                                                                              /* depthwise x2, strided */
        {.N = 1, .C = 1, .H = 1, .W = 1, .K = 1, .R = 1, .S = 1, .bias = true},                  /* one element */
        {.N = 2, .C = 3, .H = 5, .W = 7, .K = 2, .R = 5, .S = 7},                                /* kernel = input */
        {.N = 1, .C = 9, .H = 33, .W = 70, .K = 13, .R = 3, .S = 3, .sh = 3, .sw = 3, .ph = 1, .pw = 0, .bias = true},
        {.N = 2, .C = 4, .H = 8, .W = 8, .K = 4, .R = 2, .S = 2, .sh = 2, .sw = 2, .G = 2, .off = 7, .bias = true,
         .act = 2},                                                                              /* offsets */
    };
    size_t n = small_mode() ? 5 : sizeof cases / sizeof cases[0];
    /* thinned Oclgrind set: the three kernels, not TSR_CONV_AUTO (host logic, one of them again) */
    const tsr_conv_algo *algos = grind_thin() ? all_algos + 1 : all_algos;
    size_t nalgos = grind_thin() ? 3 : 4;
    for (size_t i = 0; i < n; ++i) {
        conv_case c = cases[i];
        if (small_mode()) c.N = 1;
        expect_accurate(&c, algos, nalgos);
    }
    if (small_mode()) { /* the offsets case too, with the grouped GEMMs of the im2col path */
        conv_case c = cases[13];
        c.N = 1;
        expect_accurate(&c, algos, nalgos);
    }
}

/* Outputs of a 3x3, pad-2, stride-1 layer whose windows do not hold input (ih, iw) of image 0,
 * channel 0, yet are not finite: an Inf placed there must reach none of them. */
static size_t nonfinite_away_from(const conv_case *c, const conv_data *d, size_t ih, size_t iw) {
    size_t bad = 0;
    for (size_t k = 0; k < c->K; ++k)
        for (size_t oh = 0; oh < d->P; ++oh)
            for (size_t ow = 0; ow < d->Q; ++ow) {
                float v = d->y[(k * d->P + oh) * d->Q + ow];
                long ih0 = (long)oh - 2, iw0 = (long)ow - 2;
                bool covers = ih0 <= (long)ih && ih0 + 2 >= (long)ih && iw0 <= (long)iw && iw0 + 2 >= (long)iw;
                if (!covers && !isfinite(v)) ++bad;
            }
    return bad;
}

/* Extreme inputs: NaN and Inf in x reach only the outputs whose windows contain them, never
 * through padding. */
static void padding_never_reads(void **state) {
    (void)state;
    conv_case c = {.N = 1, .C = 2, .H = 6, .W = 20, .K = 3, .R = 3, .S = 3, .ph = 2, .pw = 2};
    for (size_t a = 0; a < 4; ++a) {
        conv_data d;
        data_make(&c, &d);
        /* Inf in the last column of row 0: only outputs whose window covers it may be non-finite. */
        d.x[c.W - 1] = INFINITY;
        TH_ASSERT_OK(tsr_upload(dev, d.dx, d.x, d.nx));
        run(&c, &d, all_algos[a], "inf input");
        size_t bad = nonfinite_away_from(&c, &d, 0, c.W - 1);
        if (bad) fail_msg("algo %d: %zu outputs away from the Inf became non-finite", (int)all_algos[a], bad);
        data_free(&d);
    }
}

static void workspace(void **state) {
    (void)state;
    conv_case c = {.N = 3, .C = 4, .H = 10, .W = 9, .K = 6, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 1};
    tsr_conv2d_desc desc = case_desc(&c, TSR_CONV_IM2COL);
    size_t bytes = 0, min_bytes = 0;
    TH_ASSERT_OK(tsr_conv2d_workspace_size(dev, &desc, &bytes, &min_bytes));
    size_t per_image = 4 * 9 * 10 * 9 * sizeof(float); /* Cg R S x P Q floats */
    assert_int_equal(min_bytes, per_image);
    assert_int_equal(bytes, 3 * per_image);
    desc.algo = TSR_CONV_IMPLICIT;
    TH_ASSERT_OK(tsr_conv2d_workspace_size(dev, &desc, &bytes, &min_bytes));
    assert_int_equal(bytes, 0);
    assert_int_equal(min_bytes, 0);
    conv_case pw = {.N = 2, .C = 4, .H = 5, .W = 5, .K = 3, .R = 1, .S = 1};
    desc = case_desc(&pw, TSR_CONV_IM2COL); /* pointwise: x is the matrix */
    TH_ASSERT_OK(tsr_conv2d_workspace_size(dev, &desc, &bytes, &min_bytes));
    assert_int_equal(bytes, 0);

    conv_data d;
    data_make(&c, &d);
    double *ref = malloc(d.ny * sizeof *ref);
    ref_all(&c, d.x, d.w, d.bias, ref);
    /* A workspace for one and a half images: the batch runs in chunks of one image. */
    cl_mem ws = th_buffer(dev, per_image * 3 / 2 / sizeof(float));
    desc = case_desc(&c, TSR_CONV_IM2COL);
    desc.workspace = ws;
    desc.workspace_bytes = per_image * 3 / 2;
    poison_output(&c, &d);
    TH_ASSERT_OK(conv_bias(dev, &desc, d.dx, d.dw, d.db, d.dy, NULL, NULL));
    th_read(dev, d.dy, d.y, d.ny);
    double e = rel_error_full(&d, ref, 0);
    if (!(e <= TOLERANCE)) fail_msg("chunked workspace: relative error %.3e", e);
    /* Less than one image: refused, nothing written. */
    poison_output(&c, &d);
    desc.workspace_bytes = per_image - 4;
    TH_ASSERT_STATUS(conv_bias(dev, &desc, d.dx, d.dw, d.db, d.dy, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "workspace");
    /* More than the buffer holds, or an input as workspace: refused. */
    desc.workspace_bytes = per_image * 2;
    TH_ASSERT_STATUS(conv_bias(dev, &desc, d.dx, d.dw, d.db, d.dy, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    desc.workspace = d.dx, desc.workspace_bytes = 16;
    TH_ASSERT_STATUS(conv_bias(dev, &desc, d.dx, d.dw, d.db, d.dy, NULL, NULL), TSR_ERR_INVALID_ARG);
    th_read(dev, d.dy, d.y, d.ny);
    for (size_t i = 0; i < d.ny; ++i) assert_true(isnan(d.y[i]));
    clReleaseMemObject(ws);
    free(ref);
    data_free(&d);
}

/* Implicit kernel shapes through tsr_config_override, the staged (GPU) form included. */
static void configurations(void **state) {
    (void)state;
    const char *configs[] = {"ALGO=2 MWI=1 VW=1",
                             "ALGO=2 MWI=8 VW=16",
                             "ALGO=2 MWI=6 VW=4",
                             "ALGO=2 MWI=2 VW=2 STAGE=1 WGM=4 WGN=4 KWG=8",
                             "ALGO=2 MWI=4 VW=8 STAGE=1 WGM=2 WGN=8 KWG=32",
                             "ALGO=2 MWI=1 VW=16 STAGE=1 WGM=16 WGN=1 KWG=16",
                             "ALGO=1",
                             "ALGO=3"};
    const conv_case cases[] = {
        {.N = 2, .C = 5, .H = 11, .W = 27, .K = 10, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 1},
        {.N = 1, .C = 6, .H = 13, .W = 40, .K = 7, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .G = 1},
        {.N = 1, .C = 6, .H = 9, .W = 9, .K = 6, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 6, .bias = true},
    };
    size_t nconfigs = sizeof configs / sizeof configs[0];
    for (size_t i = 0; i < nconfigs; ++i) {
        if (small_mode() && i % 2) continue;
        if (!th_try_override(dev, "conv2d", configs[i])) continue;
        for (size_t j = 0; j < sizeof cases / sizeof cases[0]; ++j) {
            if (grind_thin() && (j + i / 2) % 3 == 2) continue; /* 2 of the 3 layers, rotating */
            tsr_conv_algo auto_only[1] = {TSR_CONV_AUTO};
            expect_accurate(&cases[j], auto_only, 1);
        }
    }
    /* An override outside the space, or illegal, is refused with its name. */
    TH_ASSERT_STATUS(tsr_config_override(dev, "conv2d", "ALGO=7"), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "tsr_config_override(conv2d)");
    TH_ASSERT_STATUS(tsr_config_override(dev, "conv2d", "ALGO=2 MWI=8 VW=32"), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "VW=32");
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
}

/* The CPU forms of the implicit kernel (STAGE 2: padded input, flattened pixels; STAGE 3: rows
 * of one channel, masked edge vectors) exist only on CPUs that vectorize within a work-item. */
static bool cpu_forms_here(void) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    return info->type == TSR_DEVICE_CPU && (info->preferred_vector_width[4] > 1 || info->native_vector_width[4] > 1);
}

/* Inf in x reaches only the outputs whose windows hold it (the padded copy, the masked edge
 * loads and the dropped columns must not carry it elsewhere), under the current override. */
static void expect_inf_contained(const char *what) {
    conv_case c = {.N = 1, .C = 2, .H = 6, .W = 20, .K = 3, .R = 3, .S = 3, .ph = 2, .pw = 2};
    for (int where = 0; where < 3; ++where) {
        conv_data d;
        data_make(&c, &d);
        /* the last column of row 0, the first column of row 3, the last element of the plane */
        size_t ih = where == 0 ? 0 : where == 1 ? 3 : c.H - 1, iw = where == 1 ? 0 : c.W - 1;
        d.x[ih * c.W + iw] = INFINITY;
        TH_ASSERT_OK(tsr_upload(dev, d.dx, d.x, d.nx));
        run(&c, &d, TSR_CONV_AUTO, what);
        size_t bad = nonfinite_away_from(&c, &d, ih, iw);
        if (bad) fail_msg("%s: Inf at (%zu, %zu): %zu outputs away from it became non-finite", what, ih, iw, bad);
        data_free(&d);
    }
}

/* STAGE 2, 3, 4 and 5 in several shapes (tiles, rows per item, work-group sizes) on layers that reach
 * every branch: padded and unpadded, tiles crossing rows and planes, planes narrower than a
 * vector, kernels other than 3x3 (taps from the geometry), dilation, strides 1, 2 and 3 (STAGE 2
 * falls back to STAGE 0 for strides above 1), groups, channel multipliers, offsets with guards. */
static void cpu_forms_stage(int stage, size_t part, size_t parts) {
    if (!cpu_forms_here()) {
        printf("# the STAGE 2, 3, 4 and 5 forms are CPU-only: passed over\n");
        return;
    }
    /* STAGE 2's WGM: pixel vectors per work-item (the launch takes ceil(WGM / 2) to WGM) */
    const char *configs[] = {"ALGO=2 MWI=6 VW=16 STAGE=2 WGM=2 WGN=16", "ALGO=2 MWI=4 VW=8 STAGE=2 WGN=4",
                             "ALGO=2 MWI=1 VW=4 STAGE=2 WGN=1",   "ALGO=2 MWI=8 VW=2 STAGE=2 WGM=3 WGN=2",
                             "ALGO=2 MWI=2 VW=8 STAGE=3 WGN=16",  "ALGO=2 MWI=1 VW=16 STAGE=3 WGN=4",
                             "ALGO=2 MWI=8 VW=1 STAGE=3 WGN=1",   "ALGO=2 MWI=4 VW=4 STAGE=3 WGN=8",
                             "ALGO=2 MWI=4 VW=16 STAGE=4 WGN=16", "ALGO=2 MWI=1 VW=8 STAGE=4 WGN=4",
                             "ALGO=2 MWI=8 VW=4 STAGE=4 WGN=1",   "ALGO=2 MWI=2 VW=1 STAGE=4 WGN=16",
                             /* STAGE 5's WGM: pixels per work-item, MWI vectors of VW channels */
                             "ALGO=2 MWI=2 VW=16 STAGE=5 WGM=8 WGN=16", "ALGO=2 MWI=1 VW=8 STAGE=5 WGM=3 WGN=4",
                             "ALGO=2 MWI=4 VW=4 STAGE=5 WGM=6 WGN=1",   "ALGO=2 MWI=1 VW=1 STAGE=5 WGM=12 WGN=2"};
    const conv_case cases[] = {
        {.N = 2, .C = 5, .H = 11, .W = 27, .K = 10, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 1},
        {.N = 3, .C = 9, .H = 7, .W = 7, .K = 13, .R = 3, .S = 3, .ph = 1, .pw = 1, .act = 2, .off = 3},
        {.N = 1, .C = 4, .H = 14, .W = 14, .K = 7, .R = 3, .S = 3, .bias = true},                 /* unpadded */
        {.N = 2, .C = 6, .H = 9, .W = 13, .K = 5, .R = 1, .S = 1, .act = 1},                      /* 1x1 */
        {.N = 1, .C = 3, .H = 19, .W = 23, .K = 6, .R = 5, .S = 3, .ph = 4, .pw = 2, .dh = 2, .dw = 2, .bias = true},
        {.N = 1, .C = 6, .H = 13, .W = 40, .K = 7, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .act = 3},
        {.N = 2, .C = 8, .H = 10, .W = 10, .K = 12, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 4, .bias = true},
        {.N = 2, .C = 16, .H = 14, .W = 14, .K = 16, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 16, .bias = true,
         .act = 1},                                                                              /* depthwise */
        {.N = 1, .C = 5, .H = 13, .W = 29, .K = 5, .R = 3, .S = 3, .ph = 2, .pw = 2, .dh = 2, .dw = 2, .G = 5,
         .act = 2},                                                                              /* dilated */
        {.N = 1, .C = 6, .H = 9, .W = 9, .K = 12, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .G = 6,
         .bias = true},                                                                          /* x2, stride 2 */
        {.N = 2, .C = 7, .H = 23, .W = 57, .K = 7, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .G = 7,
         .act = 1, .off = 7},                                                                    /* stride 2, odd */
        {.N = 1, .C = 4, .H = 17, .W = 31, .K = 4, .R = 3, .S = 3, .sh = 3, .sw = 3, .ph = 1, .pw = 1, .G = 4},
        {.N = 1, .C = 3, .H = 12, .W = 3, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 3, .bias = true},
        {.N = 1, .C = 4, .H = 9, .W = 1, .K = 8, .R = 3, .S = 1, .ph = 1, .G = 4, .act = 1},     /* one column */
        {.N = 1, .C = 6, .H = 21, .W = 35, .K = 6, .R = 5, .S = 5, .ph = 2, .pw = 2, .G = 6, .bias = true},
        {.N = 3, .C = 8, .H = 16, .W = 16, .K = 8, .R = 3, .S = 3, .G = 8, .off = 5},             /* unpadded */
        /* STAGE 2's polyphase copy: conv1's shape, odd sizes, a 1x1 subsample, stride 2 with
         * dilation 3 (taps in both phases), stride 3 by 2, groups; a 5x3 strided kernel (not
         * compiled in: im2col or STAGE 0) */
        {.N = 2, .C = 3, .H = 23, .W = 21, .K = 10, .R = 7, .S = 7, .sh = 2, .sw = 2, .ph = 3, .pw = 3, .bias = true,
         .act = 1, .off = 2},
        {.N = 2, .C = 7, .H = 15, .W = 17, .K = 9, .R = 1, .S = 1, .sh = 2, .sw = 2, .bias = true},
        {.N = 1, .C = 5, .H = 20, .W = 26, .K = 6, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 2, .pw = 4, .dh = 3,
         .dw = 3, .act = 2},
        {.N = 2, .C = 4, .H = 17, .W = 19, .K = 8, .R = 2, .S = 2, .sh = 3, .sw = 2, .ph = 1, .pw = 0, .G = 2,
         .bias = true, .off = 1},
        {.N = 1, .C = 4, .H = 16, .W = 18, .K = 5, .R = 5, .S = 3, .sh = 2, .sw = 2, .ph = 2, .pw = 1, .act = 1},
    };
    size_t nconfigs = sizeof configs / sizeof configs[0], ncases = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < nconfigs; ++i) {
        /* small sets (Oclgrind, rusticl): every second configuration, STAGE 5 its first only */
        if (small_mode() && (i % 2 || i == 14)) continue;
        if (i / 4 + 2 != (size_t)stage) continue; /* four configurations per form, in order */
        if (i % parts != part) continue;
        TH_ASSERT_OK(tsr_config_override(dev, "conv2d", configs[i]));
        for (size_t j = 0; j < ncases; ++j) {
            /* default tier: 6 of the layers per configuration, rotating, so each form (STAGE 2, 3
             * and 4, four configurations each) still sees every layer */
            if (default_tier() && (j + ncases - (6 * i) % ncases) % ncases >= 6) continue;
            tsr_conv_algo auto_only[1] = {TSR_CONV_AUTO};
            expect_accurate(&cases[j], auto_only, 1);
        }
        expect_inf_contained(configs[i]);
    }
    /* A ResNet-50 layer with a 7x7 plane and many channels (tiles span rows; the last tile's loads
     * need the slack rows), and a MobileNet-sized depthwise layer, sampled. */
    conv_case big[] = {{.N = 2, .C = 64, .H = 7, .W = 7, .K = 70, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true},
                       {.N = 2, .C = 32, .H = 56, .W = 56, .K = 32, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 32,
                        .bias = true, .act = 1}};
    if (stage == 2 && part == 0) {
        TH_ASSERT_OK(tsr_config_override(dev, "conv2d", configs[0]));
        expect_accurate(&big[0], (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
        /* a polyphase copy whose rows outgrow the work-group budget (fewer tiles per work-group) */
        conv_case wide = {.N = 1, .C = 64, .H = 56, .W = 56, .K = 9, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1,
                          .pw = 1, .bias = true, .act = 1};
        expect_accurate(&wide, (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
        /* ResNet-50's 56x56/2 on 128 channels (K cut to 10) at the AVX-512 default's tile: two
         * tiles' rows (415 KB) fit the unstrided 512 KiB budget, not the polyphase 256 KiB one
         * (one tile a work-group), the plane's 17 tiles in 17 work-groups */
        TH_ASSERT_OK(tsr_config_override(dev, "conv2d", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=3 WGN=16"));
        conv_case poly = {.N = 1, .C = 128, .H = 56, .W = 56, .K = 10, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1,
                          .pw = 1, .bias = true, .act = 1, .off = 5};
        expect_accurate(&poly, (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
    }
    if (stage == 3 && part == 0) {
        TH_ASSERT_OK(tsr_config_override(dev, "conv2d", configs[4]));
        expect_accurate(&big[1], (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
    }
    if (stage == 4 && part == 0) {
        TH_ASSERT_OK(tsr_config_override(dev, "conv2d", configs[8]));
        expect_accurate(&big[1], (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
    }
    if (stage == 5 && part == 0) {
        TH_ASSERT_OK(tsr_config_override(dev, "conv2d", configs[12]));
        expect_accurate(&big[0], (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
        /* STAGE 2 with 16-float vectors hands small planes with enough pixels to STAGE 5's kernel
         * (channel_vectors_instead): 14x14 at 6 images, unstrided and from 28x28 with stride 2,
         * K not a multiple of its 32 channels */
        TH_ASSERT_OK(tsr_config_override(dev, "conv2d", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=3 WGN=16"));
        conv_case small[] = {{.N = 6, .C = 16, .H = 14, .W = 14, .K = 40, .R = 3, .S = 3, .ph = 1, .pw = 1,
                              .bias = true, .act = 1, .off = 3},
                             {.N = 6, .C = 8, .H = 28, .W = 28, .K = 33, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1,
                              .pw = 1, .bias = true}};
        for (size_t j = 0; j < 2; ++j) expect_accurate(&small[j], (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
        /* strided-small's AVX-512 default (4 x 16 channels x 6 pixels, one tile a work-group) on a
         * ResNet-50-like 14x14/2 layer at 2 images (98 pixels: 17 tiles of 6, the last partial),
         * K not a multiple of 64, an offset; and on an odd plane with a 5x5 kernel */
        TH_ASSERT_OK(tsr_config_override(dev, "conv2d", "ALGO=2 MWI=4 VW=16 STAGE=5 WGM=6 WGN=1"));
        conv_case ss[] = {{.N = 2, .C = 64, .H = 14, .W = 14, .K = 70, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1,
                           .pw = 1, .bias = true, .act = 1, .off = 3},
                          {.N = 3, .C = 9, .H = 15, .W = 13, .K = 20, .R = 5, .S = 5, .sh = 2, .sw = 2, .ph = 2,
                           .pw = 2, .act = 2}};
        for (size_t j = 0; j < 2; ++j) expect_accurate(&ss[j], (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
        /* the same tile, 1x1-small's and 1x1-strided-small's AVX-512 default, on 1x1 layers: a
         * ResNet-50-like 14x14/2 downsample at 2 images (K not a multiple of 64, an offset), a deep
         * 7x7 one (C = 300: no multiple of anything), and an odd plane strided along rows only */
        conv_case pw[] = {{.N = 2, .C = 64, .H = 14, .W = 14, .K = 70, .R = 1, .S = 1, .sh = 2, .sw = 2,
                           .bias = true, .act = 1, .off = 3},
                          {.N = 1, .C = 300, .H = 7, .W = 7, .K = 70, .R = 1, .S = 1, .bias = true, .act = 2},
                          {.N = 3, .C = 9, .H = 15, .W = 13, .K = 20, .R = 1, .S = 1, .sh = 2, .sw = 1, .off = 1}};
        for (size_t j = 0; j < 3; ++j) expect_accurate(&pw[j], (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
    }
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
    if (stage != 4 || part != 0) return;
    /* The built-in choice for depthwise layers (and the forced implicit path) takes a depthwise
     * form: STAGE 8 by default, STAGE 4 where a tuned entry took it. */
    tsr_conv2d_desc desc = case_desc(&cases[7], TSR_CONV_IMPLICIT);
    tsr_conv_algo algo;
    tsr_config_info info;
    TH_ASSERT_OK(tsr_conv2d_plan(dev, &desc, &algo, &info));
    if (!strstr(info.config, "STAGE=8")) TH_ASSERT_CONTAINS(info.config, "STAGE=4");
}

/* STAGE 8 (depthwise 3x3 row strips) in several shapes on the layers it computes and on layers it
 * hands to STAGE 4: rows of exactly one vector, wider rows whose last tile overlaps the one
 * before, rows narrower than the configured vector (8 and 4 lanes taken, or one vector a row with
 * its last lanes zeroed where the row is wider than half of it), one-row and two-row
 * planes, stride 2 on even widths (first tiles shifting in the padding's zero, later ones a
 * column of the row), bands of rows (planes fewer than the work-items wanted: the last band's
 * last strip partly past the plane), offsets with guards, bias and each activation; then layers
 * outside the form (odd width at stride 2, a channel multiplier, padding 0 and 2, dilation,
 * stride 3, rows narrower than 4, 5x5), which must run STAGE 4 as exactly. */
static void cpu_forms_stage8(void **state) {
    (void)state;
    if (!cpu_forms_here()) {
        printf("# the STAGE 8 form is CPU-only: passed over\n");
        return;
    }
    const char *configs[] = {"ALGO=2 MWI=4 VW=16 STAGE=8 WGN=16", "ALGO=2 MWI=1 VW=8 STAGE=8 WGN=4",
                             "ALGO=2 MWI=6 VW=4 STAGE=8 WGN=1", "ALGO=2 MWI=8 VW=16 STAGE=8 WGN=2"};
    const conv_case cases[] = {
        {.N = 2, .C = 16, .H = 14, .W = 14, .K = 16, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 16, .bias = true,
         .act = 1},
        {.N = 1, .C = 5, .H = 9, .W = 20, .K = 5, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 5, .act = 2, .off = 3},
        {.N = 3, .C = 3, .H = 7, .W = 7, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 3, .bias = true, .off = 1},
        {.N = 1, .C = 4, .H = 4, .W = 4, .K = 4, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 4, .act = 3},
        {.N = 2, .C = 3, .H = 1, .W = 33, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 3, .bias = true},
        {.N = 1, .C = 2, .H = 2, .W = 16, .K = 2, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 2, .act = 1, .off = 2},
        /* rows between half a vector and a vector wide: one vector a row, its last lanes zeroed */
        {.N = 2, .C = 3, .H = 5, .W = 11, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 3, .bias = true, .act = 1,
         .off = 1},
        {.N = 1, .C = 5, .H = 2, .W = 12, .K = 5, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 5, .act = 2},
        {.N = 2, .C = 6, .H = 15, .W = 30, .K = 6, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .G = 6,
         .act = 2, .off = 7},
        {.N = 1, .C = 7, .H = 14, .W = 8, .K = 7, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .G = 7,
         .bias = true},
        {.N = 1, .C = 4, .H = 13, .W = 64, .K = 4, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .G = 4,
         .bias = true, .act = 1},
        {.N = 1, .C = 3, .H = 2, .W = 40, .K = 3, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .G = 3},
        {.N = 3, .C = 3, .H = 37, .W = 17, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 3, .bias = true,
         .act = 1, .off = 5},                                                                    /* bands */
        {.N = 1, .C = 5, .H = 50, .W = 36, .K = 5, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .G = 5,
         .act = 3},                                                                              /* bands */
        /* a height of whole strips (MWI 4 and 8): the strips inside the image without row tests */
        {.N = 2, .C = 3, .H = 24, .W = 40, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 3, .bias = true,
         .act = 1, .off = 1},
        /* STAGE 4's */
        {.N = 1, .C = 6, .H = 9, .W = 9, .K = 6, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .G = 6,
         .bias = true},
        {.N = 2, .C = 6, .H = 9, .W = 12, .K = 12, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 6, .act = 1},
        {.N = 1, .C = 4, .H = 10, .W = 18, .K = 4, .R = 3, .S = 3, .G = 4, .off = 2},
        {.N = 1, .C = 4, .H = 10, .W = 18, .K = 4, .R = 3, .S = 3, .ph = 2, .pw = 2, .dh = 2, .dw = 2, .G = 4},
        {.N = 1, .C = 3, .H = 17, .W = 31, .K = 3, .R = 3, .S = 3, .sh = 3, .sw = 3, .ph = 1, .pw = 1, .G = 3},
        {.N = 1, .C = 3, .H = 12, .W = 3, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 3, .bias = true},
        {.N = 1, .C = 4, .H = 11, .W = 21, .K = 4, .R = 5, .S = 5, .ph = 2, .pw = 2, .G = 4, .act = 1},
    };
    size_t nconfigs = sizeof configs / sizeof configs[0], ncases = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < nconfigs; ++i) {
        if (small_mode() && i % 2) continue;
        TH_ASSERT_OK(tsr_config_override(dev, "conv2d", configs[i]));
        for (size_t j = 0; j < ncases; ++j) {
            /* default tier: the form's own layers with every configuration, STAGE 4's with one each */
            if (default_tier() && j >= 15 && j % nconfigs != i) continue;
            tsr_conv_algo auto_only[1] = {TSR_CONV_AUTO};
            expect_accurate(&cases[j], auto_only, 1);
        }
        expect_inf_contained(configs[i]);
    }
    /* MobileNet-V2's 56x56 layers' shapes, sampled: 3 planes at stride 1 and 2 (bands) */
    conv_case big[] = {{.N = 1, .C = 3, .H = 56, .W = 56, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 3,
                        .bias = true, .act = 1},
                       {.N = 1, .C = 3, .H = 56, .W = 56, .K = 3, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1,
                        .G = 3, .bias = true, .act = 1}};
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", configs[0]));
    for (size_t j = 0; j < 2; ++j) expect_accurate(&big[j], (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
}

/* Two cases per form (two configurations each), so shards spread them (each compiles a program per
 * configuration and layer shape: the three forms together took 230 s of a cold run on a 2-core
 * Xeon). */
static void cpu_forms_stage2_1of2(void **state) { (void)state, cpu_forms_stage(2, 0, 2); }
static void cpu_forms_stage2_2of2(void **state) { (void)state, cpu_forms_stage(2, 1, 2); }
static void cpu_forms_stage3_1of2(void **state) { (void)state, cpu_forms_stage(3, 0, 2); }
static void cpu_forms_stage3_2of2(void **state) { (void)state, cpu_forms_stage(3, 1, 2); }
static void cpu_forms_stage4_1of2(void **state) { (void)state, cpu_forms_stage(4, 0, 2); }
static void cpu_forms_stage4_2of2(void **state) { (void)state, cpu_forms_stage(4, 1, 2); }
static void cpu_forms_stage5_1of2(void **state) { (void)state, cpu_forms_stage(5, 0, 2); }
static void cpu_forms_stage5_2of2(void **state) { (void)state, cpu_forms_stage(5, 1, 2); }
/* The three in one case (the small sets' list). */
static void cpu_forms(void **state) {
    (void)state;
    if (!cpu_forms_here()) {
        printf("# the STAGE 2, 3, 4 and 5 forms are CPU-only: passed over\n");
        return;
    }
    for (int stage = 2; stage <= 5; ++stage) cpu_forms_stage(stage, 0, 1);
}

/* The Winograd F(2x2, 3x3) form (STAGE 6: input transform, a batch of 16 GEMMs, output transform
 * with the epilogue) against the double reference, TOLERANCE (1e-5 relative, the fp32 bound of
 * every path) on every output: planes whose height and width are odd (the last tile row and column
 * half outside y), smaller than a tile, one row or column; padding 0, 1, 2 and unequal along the
 * axes; channel counts that are no multiple of a vector; batches; offsets with guard zones; bias
 * and each activation. Layers it does not compute (other kernel sizes, strides, dilation, groups)
 * run the implicit path's built-in form and must be as exact. A ResNet-50 56x56 layer at batch 3
 * (images in chunks: several GEMM batches), sampled. */
static void cpu_forms_winograd(const char *config) {
    if (!cpu_forms_here()) {
        printf("# the Winograd forms are CPU-only: passed over\n");
        return;
    }
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", config));
    const conv_case cases[] = {
        {.N = 2, .C = 5, .H = 11, .W = 27, .K = 10, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 1},
        {.N = 3, .C = 9, .H = 7, .W = 7, .K = 13, .R = 3, .S = 3, .ph = 1, .pw = 1, .act = 2, .off = 3},
        {.N = 1, .C = 4, .H = 14, .W = 14, .K = 7, .R = 3, .S = 3, .bias = true},                 /* unpadded */
        {.N = 1, .C = 17, .H = 13, .W = 9, .K = 33, .R = 3, .S = 3, .ph = 2, .pw = 0, .bias = true, .act = 3},
        {.N = 2, .C = 3, .H = 1, .W = 6, .K = 2, .R = 3, .S = 3, .ph = 1, .pw = 1, .act = 1, .off = 1}, /* one row */
        {.N = 1, .C = 6, .H = 9, .W = 1, .K = 5, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true},     /* one column */
        {.N = 4, .C = 31, .H = 5, .W = 6, .K = 47, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 1, .off = 5},
        {.N = 1, .C = 3, .H = 3, .W = 3, .K = 4, .R = 3, .S = 3},                               /* one output */
        /* F(2x2)'s vector edges (conv_winograd.cl's wino_row16/8): rows of 8 or more tiles (the last
         * 8 moved back) and of 4 to 7, their padding's zeros shifted in by 1, 2 or 3 lanes, or
         * gathered (4), rows shorter than a vector */
        {.N = 2, .C = 5, .H = 6, .W = 28, .K = 9, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 1, .off = 2},
        {.N = 1, .C = 4, .H = 5, .W = 21, .K = 6, .R = 3, .S = 3, .ph = 1, .pw = 2, .act = 2},
        {.N = 1, .C = 3, .H = 7, .W = 30, .K = 5, .R = 3, .S = 3, .ph = 0, .pw = 3, .bias = true},
        {.N = 1, .C = 3, .H = 6, .W = 11, .K = 4, .R = 3, .S = 3, .ph = 1, .pw = 4, .act = 1},
        {.N = 3, .C = 7, .H = 14, .W = 14, .K = 11, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 3, .off = 1},
        {.N = 1, .C = 2, .H = 4, .W = 16, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1},
        {.N = 1, .C = 2, .H = 5, .W = 8, .K = 3, .R = 3, .S = 3, .ph = 2, .pw = 3, .act = 1},
        /* not Winograd's: the built-in implicit form runs */
        {.N = 1, .C = 6, .H = 13, .W = 40, .K = 7, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .act = 3},
        {.N = 2, .C = 8, .H = 10, .W = 10, .K = 12, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 4, .bias = true},
        {.N = 1, .C = 5, .H = 13, .W = 29, .K = 5, .R = 3, .S = 3, .ph = 2, .pw = 2, .dh = 2, .dw = 2, .act = 2},
        {.N = 2, .C = 6, .H = 9, .W = 13, .K = 5, .R = 1, .S = 1, .act = 1},
        {.N = 1, .C = 3, .H = 19, .W = 23, .K = 6, .R = 5, .S = 5, .ph = 2, .pw = 2, .bias = true},
    };
    for (size_t j = 0; j < sizeof cases / sizeof cases[0]; ++j) {
        if (small_mode() && j % 3) continue;
        expect_accurate(&cases[j], (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
    }
    /* F(2x2)'s transforms keep an Inf in its windows (a patch column reaches only the outputs whose
     * windows hold it); F(4x4)'s spread it over its 4x4 tile (its exact cancellations are lost). */
    if (strstr(config, "STAGE=6") || strstr(config, "STAGE=9")) expect_inf_contained(config);
    if (!small_mode()) {
        conv_case big = {.N = 3, .C = 64, .H = 56, .W = 56, .K = 64, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true,
                         .act = 1, .off = 2};
        expect_accurate_sampled(&big, (tsr_conv_algo[]){TSR_CONV_AUTO}, 1, 3000);
        /* 512 channels (the longest sums of ResNet-50's 3x3 layers): the largest rounding error */
        conv_case deep = {.N = 2, .C = 512, .H = 7, .W = 7, .K = 40, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true};
        expect_accurate(&deep, (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
    }
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
}
/* With WGN other than 1, layers with fewer than 192 tiles per GEMM take F(2x2) instead of
 * F(4x4) (28x28: 49 of F(4x4)'s, 196 of F(2x2)'s), or the built-in STAGE 2 form (7x7); 56x56
 * keeps F(4x4) (196 tiles). */
static void winograd_few_tiles(void **state) {
    (void)state;
    if (!cpu_forms_here()) return;
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", "ALGO=2 STAGE=7"));
    const conv_case cases[] = {
        {.N = 1, .C = 8, .H = 28, .W = 28, .K = 9, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 1},
        {.N = 1, .C = 5, .H = 56, .W = 56, .K = 6, .R = 3, .S = 3, .ph = 1, .pw = 1, .act = 2, .off = 1},
        {.N = 2, .C = 7, .H = 7, .W = 7, .K = 5, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true},
    };
    for (size_t j = 0; j < sizeof cases / sizeof cases[0]; ++j)
        expect_accurate(&cases[j], (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
}
static void cpu_forms_winograd2(void **state) { (void)state, cpu_forms_winograd("ALGO=2 STAGE=6 WGN=1"); }
static void cpu_forms_winograd4(void **state) { (void)state, cpu_forms_winograd("ALGO=2 STAGE=7 WGN=1"); }
/* The fused F(2x2) form (STAGE 9): blocks of 16 and 32 tiles across tile rows and images, output
 * channel blocks of 16 (4 x 4) and 6 (K not a multiple: the last block's channels past K dropped). */
static void cpu_forms_winograd_fused(void **state) {
    (void)state, cpu_forms_winograd("ALGO=2 STAGE=9 MWI=4 WGM=1 WGN=4");
    cpu_forms_winograd("ALGO=2 STAGE=9 MWI=6 WGM=2 WGN=1");
    if (!cpu_forms_here()) return;
    /* a layer whose V (16 x C x 32 floats at WGM=2) exceeds the device's local memory runs the
     * small 3x3 calls' direct form */
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", "ALGO=2 STAGE=9 MWI=8 WGM=2 WGN=1"));
    const size_t local = tsr_device_get_info(dev)->local_mem_bytes;
    conv_case deep = {.N = 1, .C = local / (16 * 32 * sizeof(float)) + 1, .H = 4, .W = 5, .K = 3, .R = 3, .S = 3,
                      .ph = 1, .pw = 1, .bias = true, .act = 1};
    expect_accurate(&deep, (tsr_conv_algo[]){TSR_CONV_AUTO}, 1);
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
}

#ifdef TSR_HAVE_CLBLAST
/* CLBlast's convgemm computes the same layers (no groups, no bias or activation). */
static void matches_clblast(void **state) {
    (void)state;
    const conv_case cases[] = {
        {.N = 2, .C = 16, .H = 14, .W = 14, .K = 24, .R = 3, .S = 3, .ph = 1, .pw = 1},
        {.N = 1, .C = 3, .H = 31, .W = 29, .K = 8, .R = 7, .S = 7, .sh = 2, .sw = 2, .ph = 3, .pw = 3},
        {.N = 3, .C = 32, .H = 7, .W = 7, .K = 16, .R = 1, .S = 1},
        {.N = 1, .C = 4, .H = 17, .W = 13, .K = 5, .R = 3, .S = 3, .ph = 2, .pw = 2, .dh = 2, .dw = 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        const conv_case *c = &cases[i];
        conv_data d;
        data_make(c, &d);
        float *theirs = malloc(d.ny * 4);
        cl_command_queue q = tsr_device_queue(dev);
        CLBlastStatusCode cs = CLBlastSconvgemm(CLBlastKernelModeCrossCorrelation, c->C, c->H, c->W, c->R, c->S, c->ph,
                                                c->pw, or1(c->sh), or1(c->sw), or1(c->dh), or1(c->dw), c->K, c->N,
                                                d.dx, 0, d.dw, 0, d.dy, 0, &q, NULL);
        assert_int_equal(cs, CLBlastSuccess);
        th_read(dev, d.dy, theirs, d.ny);
        for (size_t a = 0; a < 4; ++a) {
            run(c, &d, all_algos[a], "clblast agreement");
            tsr_error_sum sum = {0, 0};
            for (size_t j = 0; j < d.ny; ++j) tsr_error_add(&sum, d.y[j], theirs[j]);
            double e = tsr_error_value(&sum);
            if (!(e <= TOLERANCE)) fail_msg("case %zu algo %d: %.3e from CLBlast's convgemm", i, (int)all_algos[a], e);
        }
        free(theirs);
        data_free(&d);
    }
}
#endif

/* The plan names a path per class; the tuner measures every path (its seeds) and stores the
 * winner for the class. */
static void plan_and_tune(void **state) {
    (void)state;
    conv_case c3 = {.N = 1, .C = 64, .H = 28, .W = 28, .K = 64, .R = 3, .S = 3, .ph = 1, .pw = 1};
    conv_case dw = {.N = 1, .C = 32, .H = 28, .W = 28, .K = 32, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 32};
    conv_case pw = {.N = 1, .C = 128, .H = 28, .W = 28, .K = 64, .R = 1, .S = 1}; /* fewer outputs than inputs */
    conv_case ex = {.N = 1, .C = 64, .H = 28, .W = 28, .K = 64, .R = 1, .S = 1};  /* as many or more: 1x1-expand */
    conv_case st = {.N = 1, .C = 64, .H = 48, .W = 48, .K = 64, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1}; /* 576 */
    conv_case ss = {.N = 1, .C = 64, .H = 32, .W = 32, .K = 64, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1}; /* 256 */
    /* 1568 pixels, 196 an image: strided-small's by its plane (session 26), strided-mid since session 34
     * (more than 256 pixels in the call); 4 x 8 x 8 = 256 pixels strided-small, 1 x 17 x 17 = 289 (a
     * plane above 256, the call at most 512) strided-mid */
    conv_case ss8 = {.N = 8, .C = 64, .H = 28, .W = 28, .K = 64, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1};
    conv_case ss4 = {.N = 4, .C = 64, .H = 16, .W = 16, .K = 64, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1};
    conv_case sm17 = {.N = 1, .C = 64, .H = 34, .W = 34, .K = 64, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1};
    /* 17 x 17 = 289 an image at batch 2: strided */
    conv_case st2 = {.N = 2, .C = 64, .H = 34, .W = 34, .K = 64, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1};
    conv_case ot = {.N = 1, .C = 64, .H = 28, .W = 28, .K = 64, .R = 5, .S = 5, .ph = 2, .pw = 2};
    conv_case ds = {.N = 1, .C = 64, .H = 48, .W = 48, .K = 128, .R = 1, .S = 1, .sh = 2, .sw = 2}; /* 576 */
    conv_case dss = {.N = 2, .C = 64, .H = 32, .W = 32, .K = 128, .R = 1, .S = 1, .sh = 2, .sw = 2}; /* 512 */
    conv_case sm = {.N = 2, .C = 64, .H = 14, .W = 14, .K = 64, .R = 1, .S = 1};  /* 392 pixels */
    conv_case sm8 = {.N = 11, .C = 64, .H = 14, .W = 14, .K = 64, .R = 1, .S = 1};  /* 2156 (196 an image): 1x1-expand */
    conv_case sm8r = {.N = 11, .C = 128, .H = 14, .W = 14, .K = 64, .R = 1, .S = 1}; /* 2156, reducing: 1x1 */
    conv_case sm10 = {.N = 10, .C = 128, .H = 14, .W = 14, .K = 64, .R = 1, .S = 1}; /* 1960, planes of 196: 1x1-mid */
    conv_case sm2 = {.N = 2, .C = 128, .H = 16, .W = 16, .K = 64, .R = 1, .S = 1};   /* 512, planes of 256: 1x1-small */
    conv_case md3 = {.N = 3, .C = 128, .H = 16, .W = 16, .K = 64, .R = 1, .S = 1};   /* 768, planes of 256: 1x1-mid */
    conv_case sm16 = {.N = 16, .C = 64, .H = 16, .W = 16, .K = 64, .R = 1, .S = 1};  /* 4096, planes of 256: 1x1-expand */
    conv_case sm1p = {.N = 2, .C = 64, .H = 17, .W = 15, .K = 64, .R = 1, .S = 1};   /* 510: 1x1-small */
    conv_case dsb = {.N = 20, .C = 64, .H = 20, .W = 20, .K = 128, .R = 1, .S = 1, .sh = 2, .sw = 2}; /* 2000: mid */
    /* 1x1-strided-mid: above 512 pixels in the call (3 x 196 = 588); 2 x 196 = 392 is 1x1-strided-small */
    conv_case dsm = {.N = 3, .C = 64, .H = 28, .W = 28, .K = 128, .R = 1, .S = 1, .sh = 2, .sw = 2};
    conv_case dsn = {.N = 2, .C = 64, .H = 28, .W = 28, .K = 128, .R = 1, .S = 1, .sh = 2, .sw = 2};
    conv_case dsc = {.N = 21, .C = 64, .H = 20, .W = 20, .K = 128, .R = 1, .S = 1, .sh = 2, .sw = 2}; /* 2100 */
    conv_case sm7 = {.N = 10, .C = 64, .H = 7, .W = 7, .K = 64, .R = 1, .S = 1};   /* 490: 1x1-small */
    conv_case md8 = {.N = 8, .C = 128, .H = 17, .W = 17, .K = 64, .R = 1, .S = 1}; /* 289 an image: 1x1 */
    conv_case sn = {.N = 1, .C = 3, .H = 32, .W = 32, .K = 16, .R = 7, .S = 7, .sh = 2, .sw = 2, .ph = 3, .pw = 3};
    conv_case s3 = {.N = 2, .C = 64, .H = 16, .W = 16, .K = 64, .R = 3, .S = 3, .ph = 1, .pw = 1}; /* 512, 128 F(2x2) tiles: 3x3-mid */
    conv_case b3 = {.N = 3, .C = 64, .H = 14, .W = 14, .K = 64, .R = 3, .S = 3, .ph = 1, .pw = 1}; /* 588: 3x3 */
    /* 3x3-wide: planes of at least 192 F(4x4) tiles (12 x 16 here), at batch 1; one column fewer of
     * them (12 x 15) is 3x3, and so is a dilated layer on the wide plane */
    conv_case w3 = {.N = 1, .C = 8, .H = 48, .W = 64, .K = 8, .R = 3, .S = 3, .ph = 1, .pw = 1};
    conv_case w3n = {.N = 1, .C = 8, .H = 48, .W = 60, .K = 8, .R = 3, .S = 3, .ph = 1, .pw = 1};
    /* 3x3-mid: small calls (at most 512 pixels) of at least 96 F(2x2) tiles: 6 x 4 x 4 here, 5 x 4 x 4
     * is 3x3-small-wino (at least 32 tiles), 1 x 4 x 4 and 1 x 5 x 6 (10 x 11) 3x3-small, 1 x 6 x 6
     * (11 x 11) 3x3-small-wino */
    conv_case m3 = {.N = 6, .C = 8, .H = 7, .W = 7, .K = 8, .R = 3, .S = 3, .ph = 1, .pw = 1};
    conv_case m3n = {.N = 5, .C = 8, .H = 7, .W = 7, .K = 8, .R = 3, .S = 3, .ph = 1, .pw = 1};
    conv_case s7 = {.N = 1, .C = 8, .H = 7, .W = 7, .K = 8, .R = 3, .S = 3, .ph = 1, .pw = 1};
    conv_case s10 = {.N = 1, .C = 8, .H = 10, .W = 11, .K = 8, .R = 3, .S = 3, .ph = 1, .pw = 1};
    conv_case s11 = {.N = 1, .C = 8, .H = 11, .W = 11, .K = 8, .R = 3, .S = 3, .ph = 1, .pw = 1};
    conv_case w3d = {.N = 1, .C = 8, .H = 56, .W = 56, .K = 8, .R = 3, .S = 3, .ph = 2, .pw = 2, .dh = 2, .dw = 2};
    const struct { const conv_case *c; const char *cls; } expect[] = {
        {&c3, "3x3"},         {&dw, "depthwise"}, {&pw, "1x1"},       {&ex, "1x1-expand"}, {&st, "strided"},
        {&ot, "other"},       {&ds, "1x1-strided"}, {&sm, "1x1-small"}, {&sm8, "1x1-expand"}, {&md8, "1x1"},
        {&sn, "stem"},        {&s3, "3x3-mid"},   {&b3, "3x3"},       {&sm8r, "1x1"},      {&sm7, "1x1-small"},
        {&ss, "strided-small"}, {&ss8, "strided-mid"}, {&ss4, "strided-small"}, {&sm17, "strided-mid"}, {&st2, "strided"}, {&dss, "1x1-strided-small"},
        {&sm10, "1x1-mid"},     {&sm16, "1x1-expand"},      {&sm1p, "1x1-small"}, {&dsb, "1x1-strided-mid"}, {&dsm, "1x1-strided-mid"}, {&dsn, "1x1-strided-small"},
        {&dsc, "1x1-strided"},  {&sm2, "1x1-small"},        {&md3, "1x1-mid"},   {&w3, "3x3-wide"},
        {&w3n, "3x3"},          {&w3d, "3x3"},             {&m3, "3x3-mid"},     {&m3n, "3x3-small-wino"},
        {&s7, "3x3-small"},     {&s10, "3x3-small"},       {&s11, "3x3-small-wino"}};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; ++i) {
        tsr_conv2d_desc desc = case_desc(expect[i].c, TSR_CONV_AUTO);
        tsr_conv_algo algo = TSR_CONV_AUTO;
        tsr_config_info info;
        TH_ASSERT_OK(tsr_conv2d_plan(dev, &desc, &algo, &info));
        assert_string_equal(info.problem_class, expect[i].cls);
        assert_true(algo == TSR_CONV_IM2COL || algo == TSR_CONV_IMPLICIT || algo == TSR_CONV_DIRECT);
        char want[16];
        snprintf(want, sizeof want, "ALGO=%d", (int)algo);
        TH_ASSERT_CONTAINS(info.config, want);
    }
    char dir[512], db[600], log[600];
    th_tempdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/tuning.json", dir);
    snprintf(log, sizeof log, "%s/log.jsonl", dir);
    tsr_tune_options opt = {.budget_evaluations = 4, .classes = "depthwise", .db_path = db, .log_path = log,
                            .seed = 7};
    tsr_tune_result res[1];
    size_t n = 0;
    TH_ASSERT_OK(tsr_tune(dev, "conv2d", &opt, res, 1, &n));
    assert_int_equal(n, 1);
    assert_true(res[0].evaluated >= 3);
    assert_int_equal(res[0].wrong_results, 0);
    char *text = NULL;
    size_t size = 0;
    TH_ASSERT_OK(tsr_read_file(log, &text, &size));
    TH_ASSERT_CONTAINS(text, "ALGO=1"); /* every path was measured */
    TH_ASSERT_CONTAINS(text, "ALGO=2");
    TH_ASSERT_CONTAINS(text, "ALGO=3");
    free(text);
    /* The stored winner is what the plan now reports for the class. */
    setenv("TSR_TUNING_DB", db, 1);
    tsr_tuning_invalidate(dev);
    tsr_conv2d_desc desc = case_desc(&dw, TSR_CONV_AUTO);
    tsr_conv_algo algo;
    tsr_config_info info;
    TH_ASSERT_OK(tsr_conv2d_plan(dev, &desc, &algo, &info));
    assert_int_equal(info.source, TSR_CONFIG_TUNED);
    assert_string_equal(info.config, res[0].best_config);
    expect_accurate(&dw, all_algos, 1);
    unsetenv("TSR_TUNING_DB");
    tsr_tuning_invalidate(dev);
    th_remove_tree(dir);
}

static void invalid_descriptors(void **state) {
    (void)state;
    conv_case c = {.N = 1, .C = 4, .H = 6, .W = 6, .K = 4, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true};
    conv_data d;
    data_make(&c, &d);
    poison_output(&c, &d);
    cl_mem small = th_buffer(dev, 3); /* less than any of x, w, bias (4 values) and y */
    const tsr_conv2d_desc ok = case_desc(&c, TSR_CONV_AUTO);
    tsr_conv2d_desc e;
#define EXPECT(desc, x, w, b, y, status, text)                                                                         \
    do {                                                                                                               \
        TH_ASSERT_STATUS(conv_bias(dev, (desc), (x), (w), (b), (y), NULL, NULL), (status));                            \
        if (*(text)) TH_ASSERT_CONTAINS(tsr_last_error(), (text));                                                     \
    } while (0)
    EXPECT(NULL, d.dx, d.dw, d.db, d.dy, TSR_ERR_INVALID_ARG, "NULL");
    TH_ASSERT_STATUS(conv_bias(NULL, &ok, d.dx, d.dw, d.db, d.dy, NULL, NULL), TSR_ERR_INVALID_ARG);
    const char *fields[] = {"batch", "in_channels", "in_height", "in_width", "out_channels", "kernel_h", "kernel_w"};
    for (int f = 0; f < 7; ++f) {
        e = ok;
        size_t *p[] = {&e.batch, &e.in_channels, &e.in_height, &e.in_width, &e.out_channels, &e.kernel_h, &e.kernel_w};
        *p[f] = 0;
        EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_INVALID_ARG, fields[f]);
    }
    e = ok, e.groups = 3;
    EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_INVALID_ARG, "groups");
    e = ok, e.pad_h = 0, e.kernel_h = 7;
    EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_INVALID_ARG, "output would be empty");
    e = ok, e.dilation_w = 4;
    EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_INVALID_ARG, "output would be empty");
    e = ok, e.epilogue.activation = (tsr_activation)9;
    EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_INVALID_ARG, "activation");
    e = ok, e.epilogue.bias_stride = 4; /* one bias vector per layer */
    EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_INVALID_ARG, "bias_stride");
    e = ok, e.algo = (tsr_conv_algo)9;
    EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_INVALID_ARG, "algo");
    e = ok, e.in_height = (size_t)1 << 40;
    EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_OVERFLOW, "");
    e = ok, e.in_height = e.in_width = 50000;
    EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_OVERFLOW, "exceed");
    e = ok, e.batch = SIZE_MAX / 8;
    EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_OVERFLOW, "");
    EXPECT(&ok, small, d.dw, d.db, d.dy, TSR_ERR_BUFFER_TOO_SMALL, "buffer x");
    EXPECT(&ok, d.dx, small, d.db, d.dy, TSR_ERR_BUFFER_TOO_SMALL, "buffer w");
    EXPECT(&ok, d.dx, d.dw, small, d.dy, TSR_ERR_BUFFER_TOO_SMALL, "buffer bias");
    EXPECT(&ok, d.dx, d.dw, d.db, small, TSR_ERR_BUFFER_TOO_SMALL, "buffer y");
    EXPECT(&ok, NULL, d.dw, d.db, d.dy, TSR_ERR_INVALID_ARG, "buffer x");
    e = ok, e.y_offset = GUARD + 1; /* past the end by one */
    EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_BUFFER_TOO_SMALL, "buffer y");
    e = ok, e.x_offset = SIZE_MAX - 3;
    EXPECT(&e, d.dx, d.dw, d.db, d.dy, TSR_ERR_OVERFLOW, "x");
    /* y overlapping an input in the same buffer */
    cl_mem both = th_buffer(dev, d.nx + d.ny);
    e = ok, e.y_offset = d.nx - 1;
    EXPECT(&e, both, d.dw, d.db, both, TSR_ERR_INVALID_ARG, "overlaps");
    e = ok, e.y_offset = d.nx; /* adjacent, not overlapping: fine */
    TH_ASSERT_OK(conv_bias(dev, &e, both, d.dw, d.db, both, NULL, NULL));
    clFinish(tsr_device_queue(dev));
    size_t h, w;
    TH_ASSERT_OK(tsr_conv2d_output_size(&ok, &h, &w));
    assert_int_equal(h, 6);
    assert_int_equal(w, 6);
    e = ok, e.stride_h = 2, e.dilation_w = 2;
    TH_ASSERT_OK(tsr_conv2d_output_size(&e, &h, &w));
    assert_int_equal(h, 3);
    assert_int_equal(w, 4);
    TH_ASSERT_STATUS(tsr_conv2d_output_size(NULL, &h, &w), TSR_ERR_INVALID_ARG);
    size_t bytes;
    TH_ASSERT_STATUS(tsr_conv2d_workspace_size(dev, NULL, &bytes, NULL), TSR_ERR_INVALID_ARG);
    tsr_conv_algo algo;
    tsr_config_info info;
    e = ok, e.groups = 3;
    TH_ASSERT_STATUS(tsr_conv2d_plan(dev, &e, &algo, &info), TSR_ERR_INVALID_ARG);
#undef EXPECT
    /* Nothing was written by any rejected call. */
    th_read(dev, d.dy, d.y, d.ny);
    for (size_t i = 0; i < d.ny; ++i) assert_true(isnan(d.y[i]));
    clReleaseMemObject(small), clReleaseMemObject(both);
    data_free(&d);
}

static size_t round_to(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* Overlap is judged by memory, not by handle: x, w, bias, y and the workspace as sub-buffers of
 * one parent (sub-buffer origins aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN). y overlapping x, w or
 * bias, a sub-buffer overlapping its parent, and a workspace overlapping an input are refused
 * with nothing written; disjoint sub-buffers run on every path and compute the reference. */
static void sub_buffers_overlap_by_memory(void **state) {
    (void)state;
    conv_case c = {.N = 1, .C = 2, .H = 5, .W = 5, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 1};
    size_t P, Q;
    out_size(&c, &P, &Q);
    const size_t nx = c.N * c.C * c.H * c.W, nw = c.K * c.C * c.R * c.S, nb = c.K, ny = c.N * c.K * P * Q;
    const size_t ws_floats = c.C * c.R * c.S * P * Q; /* one image's column matrix */
    const size_t A = th_sub_buffer_align(dev);
    const size_t X = 0, Wo = round_to(nx, A), B = Wo + round_to(nw, A), Y = B + round_to(nb, A);
    const size_t WS = Y + round_to(ny, A), total = WS + round_to(ws_floats, A) + A;
    float *host = malloc(total * sizeof *host), *got = malloc(total * sizeof *got);
    th_fill_uniform(host, total, -1, 1);
    double *ref = malloc(ny * sizeof *ref);
    ref_all(&c, host + X, host + Wo, host + B, ref);
    cl_mem parent = th_buffer_from(dev, host, total);
    cl_mem sx = th_sub_buffer(parent, X, nx), sw = th_sub_buffer(parent, Wo, nw), sb = th_sub_buffer(parent, B, nb);
    cl_mem sy = th_sub_buffer(parent, Y, ny), sws = th_sub_buffer(parent, WS, ws_floats);
    cl_mem y_on_x = th_sub_buffer(parent, X, ny), y_on_w = th_sub_buffer(parent, Wo, ny), y_on_b = th_sub_buffer(parent, B, ny);
    cl_mem ws_on_x = th_sub_buffer(parent, X, ws_floats);
    tsr_conv2d_desc d = case_desc(&c, TSR_CONV_AUTO);
    tsr_conv2d_desc with_parent_x = d, with_parent_y = d, im2col_ws = case_desc(&c, TSR_CONV_IM2COL);
    with_parent_x.x_offset = X;
    with_parent_y.y_offset = Wo;
    im2col_ws.workspace = ws_on_x, im2col_ws.workspace_bytes = ws_floats * sizeof(float);
    const struct { const tsr_conv2d_desc *d; cl_mem x, w, b, y; const char *text; } bad[] = {
        {&d, sx, sw, sb, y_on_x, "y overlaps x"},
        {&d, sx, sw, sb, y_on_w, "y overlaps w"},
        {&d, sx, sw, sb, y_on_b, "y overlaps bias"},
        {&with_parent_x, parent, sw, sb, y_on_x, "y overlaps x"}, /* a sub-buffer and its parent */
        {&with_parent_y, sx, sw, sb, parent, "y overlaps w"},
        {&im2col_ws, sx, sw, sb, sy, "the workspace overlaps x"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        tsr_status st = conv_bias(dev, bad[i].d, bad[i].x, bad[i].w, bad[i].b, bad[i].y, NULL, NULL);
        if (st != TSR_ERR_INVALID_ARG)
            fail_msg("overlap case %zu: %s (expected TSR_ERR_INVALID_ARG): %s", i, tsr_status_str(st), tsr_last_error());
        TH_ASSERT_CONTAINS(tsr_last_error(), bad[i].text);
    }
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    th_read(dev, parent, got, total);
    assert_memory_equal(got, host, total * sizeof *host);

    /* Disjoint: every path, then the parent itself as x and a workspace from the same parent. */
    tsr_conv2d_desc own_ws = im2col_ws;
    own_ws.workspace = sws;
    for (size_t run_i = 0; run_i < 6; ++run_i) {
        tsr_conv2d_desc e = run_i < 4 ? case_desc(&c, all_algos[run_i]) : run_i == 4 ? with_parent_x : own_ws;
        cl_mem x = run_i == 4 ? parent : sx;
        for (size_t i = 0; i < ny; ++i) host[Y + i] = NAN;
        TH_ASSERT_OK(tsr_upload(dev, parent, host, total));
        TH_ASSERT_OK(conv_bias(dev, &e, x, sw, sb, sy, NULL, NULL));
        assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
        th_read(dev, parent, got, total);
        for (size_t i = 0; i < total; ++i)
            if ((i < Y || i >= Y + ny) && i < WS && got[i] != host[i]) fail_msg("run %zu wrote outside y at %zu", run_i, i);
        double error = tsr_rel_error(got + Y, ref, ny);
        if (!(error <= TOLERANCE)) fail_msg("run %zu: relative error %.3e", run_i, error);
    }
    cl_mem subs[] = {sx, sw, sb, sy, sws, y_on_x, y_on_w, y_on_b, ws_on_x};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; ++i) clReleaseMemObject(subs[i]);
    clReleaseMemObject(parent);
    free(host), free(got), free(ref);
}

/* Huge sizes: every wrapped product is TSR_ERR_OVERFLOW before anything runs, y untouched. */
static void huge_sizes_overflow(void **state) {
    (void)state;
    conv_case c = {.N = 1, .C = 4, .H = 6, .W = 6, .K = 4, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true};
    conv_data d;
    data_make(&c, &d);
    poison_output(&c, &d);
    const tsr_conv2d_desc ok = case_desc(&c, TSR_CONV_AUTO);
    tsr_conv2d_desc cases[8];
    for (int i = 0; i < 8; ++i) cases[i] = ok;
    cases[0].batch = SIZE_MAX / 2;           /* batch * C*H*W */
    cases[1].y_offset = SIZE_MAX - 10;       /* y_offset + extent */
    cases[2].w_offset = SIZE_MAX / 4;        /* (w_offset + extent) * sizeof(float) */
    cases[3].epilogue.bias_offset = SIZE_MAX - 1;
    cases[4].batch = ((size_t)1 << 62) / 36; /* x's floats fit, its bytes do not */
    cases[5].out_channels = cases[5].groups = (size_t)1 << 31; /* beyond the kernels' int */
    cases[6].pad_h = SIZE_MAX / 2;           /* padded height */
    cases[7].stride_w = SIZE_MAX;            /* beyond the kernels' int, though the output is 1 wide */
    for (int i = 0; i < 7; ++i) {
        tsr_status st = conv_bias(dev, &cases[i], d.dx, d.dw, d.db, d.dy, NULL, NULL);
        if (st != TSR_ERR_OVERFLOW) fail_msg("case %d: %s (expected TSR_ERR_OVERFLOW): %s", i, tsr_status_str(st), tsr_last_error());
    }
    size_t h = 0, w = 0;
    TH_ASSERT_STATUS(tsr_conv2d_output_size(&cases[7], &h, &w), TSR_ERR_OVERFLOW);
    th_read(dev, d.dy, d.y, d.ny);
    for (size_t i = 0; i < d.ny; ++i) assert_true(isnan(d.y[i]));
    data_free(&d);
}

/* ---- storage types (fp16 / bf16) ---- */

/* The run through typed buffers: x, w and y in types[0..2] (bias fp32), inputs rounded to their
 * types (th_fill_uniform_typed) so the double reference sees what the device reads; y poisoned
 * with NaN between guard zones (777 as y's type rounds it). */
typedef struct typed_data {
    float *x, *w, *bias, *y;
    double *ref;
    size_t nx, nw, ny, P, Q;
    cl_mem dx, dw, db, dy;
} typed_data;

static void typed_make(const conv_case *c, const tsr_dtype t[3], typed_data *d) {
    memset(d, 0, sizeof *d);
    out_size(c, &d->P, &d->Q);
    d->nx = c->N * c->C * c->H * c->W, d->nw = c->K * (c->C / or1(c->G)) * c->R * c->S;
    d->ny = c->N * c->K * d->P * d->Q;
    d->x = malloc((c->off + d->nx) * 4), d->w = malloc((c->off + d->nw) * 4), d->bias = malloc((c->off + c->K) * 4);
    d->y = malloc((c->off + d->ny + GUARD) * 4), d->ref = malloc(d->ny * sizeof *d->ref);
    th_fill_uniform_typed(t[0], d->x, c->off + d->nx, -1, 1);
    th_fill_uniform_typed(t[1], d->w, c->off + d->nw, -1, 1);
    th_fill_uniform(d->bias, c->off + c->K, -1, 1);
    ref_all(c, d->x + c->off, d->w + c->off, d->bias + c->off, d->ref);
    d->dx = th_buffer_from_typed(dev, t[0], d->x, c->off + d->nx);
    d->dw = th_buffer_from_typed(dev, t[1], d->w, c->off + d->nw);
    d->db = th_buffer_from(dev, d->bias, c->off + c->K);
    d->dy = th_buffer_typed(dev, t[2], c->off + d->ny + GUARD);
}

static void typed_free(typed_data *d) {
    clReleaseMemObject(d->dx), clReleaseMemObject(d->dw), clReleaseMemObject(d->db), clReleaseMemObject(d->dy);
    free(d->x), free(d->w), free(d->bias), free(d->y), free(d->ref);
}

static tsr_conv2d_desc typed_desc(const conv_case *c, const tsr_dtype t[3], tsr_conv_algo algo) {
    tsr_conv2d_desc desc = case_desc(c, algo);
    desc.x_type = t[0], desc.w_type = t[1], desc.y_type = t[2];
    return desc;
}

/* The 16-bit tolerance: the fp32 one, or the output's rounding plus fp32 accumulation over the
 * reduction (Cg R S) when larger (tsr_dtype_error_bound). */
static double typed_tolerance(const conv_case *c, tsr_dtype y_type) {
    double bound = tsr_dtype_error_bound(y_type, (double)(c->C / or1(c->G) * c->R * c->S));
    return bound > TOLERANCE ? bound : TOLERANCE;
}

/* One call under the current override (algo AUTO) or a forced path, checked against the
 * reference and the guards. */
static void typed_check(const conv_case *c, const tsr_dtype t[3], tsr_conv_algo algo, const char *what) {
    char name[256], full[400];
    case_name(c, name, sizeof name);
    snprintf(full, sizeof full, "%s [x %s w %s y %s] %s", name, tsr_dtype_str(t[0]), tsr_dtype_str(t[1]),
             tsr_dtype_str(t[2]), what);
    typed_data d;
    typed_make(c, t, &d);
    const float guard = tsr_dtype_round(t[2], 777.0f);
    for (size_t i = 0; i < c->off + d.ny + GUARD; ++i)
        d.y[i] = guard;
    th_poison(d.y + c->off, d.ny);
    TH_ASSERT_OK(tsr_upload_typed(dev, d.dy, t[2], d.y, c->off + d.ny + GUARD));
    tsr_conv2d_desc desc = typed_desc(c, t, algo);
    tsr_status st = conv_bias(dev, &desc, d.dx, d.dw, c->bias ? d.db : NULL, d.dy, NULL, NULL);
    if (st != TSR_SUCCESS) fail_msg("%s: %s: %s", full, tsr_status_str(st), tsr_last_error());
    clFinish(tsr_device_queue(dev));
    th_read_typed(dev, t[2], d.dy, d.y, c->off + d.ny + GUARD);
    for (size_t i = 0; i < c->off; ++i)
        if (d.y[i] != guard) fail_msg("%s: guard before y[%zu] overwritten", full, i);
    for (size_t i = 0; i < GUARD; ++i)
        if (d.y[c->off + d.ny + i] != guard) fail_msg("%s: guard after y overwritten", full);
    double e = tsr_rel_error(d.y + c->off, d.ref, d.ny), tol = typed_tolerance(c, t[2]);
    if (!(e <= tol)) fail_msg("%s: relative error %.3e > %.3e", full, e, tol);
    typed_free(&d);
}

/* Small layers reaching each path's branches: padding with bias and an activation (tiles
 * crossing the row's end), stride 2 (the strided vector loads), grouped, depthwise with a
 * channel multiplier... and an unpadded 1x1 (im2col hands x itself to the GEMM). */
static const conv_case typed_cases[] = {
    {.N = 2, .C = 5, .H = 7, .W = 19, .K = 6, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 1, .off = 3},
    {.N = 1, .C = 4, .H = 9, .W = 37, .K = 5, .R = 3, .S = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .act = 2},
    {.N = 1, .C = 8, .H = 6, .W = 10, .K = 8, .R = 3, .S = 3, .ph = 1, .pw = 1, .G = 4, .bias = true},
    {.N = 2,
     .C = 6,
     .H = 9,
     .W = 21,
     .K = 12,
     .R = 3,
     .S = 3,
     .ph = 1,
     .pw = 1,
     .G = 6,
     .bias = true,
     .act = 1,
     .off = 2},
    {.N = 2, .C = 6, .H = 5, .W = 7, .K = 4, .R = 1, .S = 1, .bias = true, .act = 3, .off = 1},
};

/* The configurations each storage-type test forces: implicit STAGE 0, a GPU-shaped STAGE 1,
 * the CPU forms (STAGE 2 padded, STAGE 3 rows; CPUs that vectorize in a work-item only), direct. */
static const char *const typed_configs[] = {"ALGO=2 MWI=2 VW=4", "ALGO=2 MWI=2 VW=4 STAGE=1 WGM=4 WGN=4 KWG=8",
                                            "ALGO=2 MWI=2 VW=8 STAGE=2 WGM=2 WGN=4", "ALGO=2 MWI=2 VW=4 STAGE=3 WGN=4",
                                            "ALGO=3", "ALGO=2 MWI=2 VW=8 STAGE=5 WGM=4 WGN=4",
                                            "ALGO=2 MWI=4 VW=8 STAGE=8 WGN=4"};

/* The forms of typed_configs that only CPUs which vectorize in a work-item run. */
static bool typed_cpu_form(const char *config) {
    return strstr(config, "STAGE=2") || strstr(config, "STAGE=3") || strstr(config, "STAGE=5") ||
           strstr(config, "STAGE=8");
}

static void type_combo(int i, tsr_dtype t[3]) {
    t[0] = (tsr_dtype)(i % 3), t[1] = (tsr_dtype)(i / 3 % 3), t[2] = (tsr_dtype)(i / 9);
}

/* Small mode (Oclgrind, rusticl): fp32, all f16, all bf16, bf16 in with f32 out, f16 x with bf16 w. */
static bool combo_in_small_set(int i) { return i == 0 || i == 13 || i == 26 || i == 8 || i == 7; }
/* The thinned small set (th_small_thinned) through the forms other than STAGE 0 and direct: the
 * three 16-bit ones (all f16, all bf16, f16 x with bf16 w); fp32 and bf16 in with f32 out run
 * through STAGE 0 and direct (each combination a program of its own: seconds on rusticl). */
static bool combo_in_thinned_small_set(int i) { return i == 13 || i == 26 || i == 7; }

/* Every combination builds its own programs (a second or more each on PoCL), so STAGE 1, 2 and 3
 * take a covering set: y = 2 (x + w) mod 3 gives every pair of tensors every pair of types (a
 * Latin square) with the uniform f32, f16 and bf16 among them, plus f16/f32 and bf16/f32. */
static bool combo_in_covering_set(int i) {
    tsr_dtype t[3];
    type_combo(i, t);
    return (int)t[2] == 2 * ((int)t[0] + (int)t[1]) % 3 || i == 4 || i == 8;
}

/* All 27 (x, w, y) combinations through the implicit kernel's STAGE 0 form and the direct
 * kernel; the covering set through STAGE 1 (GPU-shaped) and the CPU forms. */
static void storage_types_configs_part(size_t first, size_t last, size_t part, size_t parts) {
    size_t nconfigs = sizeof typed_configs / sizeof typed_configs[0],
           ncases = sizeof typed_cases / sizeof typed_cases[0];
    for (size_t k = first; k < nconfigs && k <= last; ++k) {
        if (typed_cpu_form(typed_configs[k]) && !cpu_forms_here()) continue;
        if (th_oclgrind_mode() && k != 0 && k != 1 && k != 4) continue;
        if (!th_try_override(dev, "conv2d", typed_configs[k])) continue;
        /* STAGE 0 and direct: every combination (the default tier: the covering set, as the other
         * forms; storage_types_im2col still runs all 27) */
        bool every = strstr(typed_configs[k], "STAGE") == NULL && !default_tier();
        bool thinned = th_small_thinned() && strstr(typed_configs[k], "STAGE") != NULL;
        const bool cpu_form = typed_cpu_form(typed_configs[k]);
        size_t taken = 0; /* the combinations this form runs, counted for the parts */
        for (int i = 0; i < 27; ++i) {
            if (th_small_mode() ? !combo_in_small_set(i) : !every && !combo_in_covering_set(i)) continue;
            if (thinned && !combo_in_thinned_small_set(i)) continue;
            if (taken++ % parts != part) continue;
            tsr_dtype t[3];
            type_combo(i, t);
            const bool uniform = t[0] == t[1] && t[1] == t[2];
            for (size_t j = 0; j < ncases; ++j) {
                /* the CPU forms compile a program per layer shape (kernel size and strides) as well:
                 * by default the uniform sets take every layer, the others one each, rotating (each
                 * combination through the form, each layer in 16 bits; long: every layer) */
                if (cpu_form && default_tier() && !uniform && j != (size_t)i % ncases) continue;
                if (th_oclgrind_mode() && j != 0 && j != 3) continue;
                /* the thinned Oclgrind set (each call 3-4 s in its checkers): one of the two layers per
                 * combination, alternating, so each form runs both (long: both for every one) */
                if (grind_thin() && j != (i % 2 ? 0u : 3u)) continue;
                typed_check(&typed_cases[j], t, TSR_CONV_AUTO, typed_configs[k]);
            }
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
}

static void storage_types_configs(size_t first, size_t last) { storage_types_configs_part(first, last, 0, 1); }

/* Split in three cases so shards spread them: STAGE 0 and 1, the CPU forms, direct; then the
 * forced paths. */
static void storage_types(void **state) {
    (void)state;
    storage_types_configs(0, th_small_mode() ? 0 : 1);
}
/* In the small sets (each combination a program of its own: seconds on rusticl, tens of seconds of
 * checking on Oclgrind) STAGE 1 is a case of its own, last in the list, so shards spread them. */
static void storage_types_stage1(void **state) {
    (void)state;
    storage_types_configs(1, 1);
}
static void storage_types_cpu_forms(void **state) {
    (void)state;
    storage_types_configs(2, 3);
}
/* The same, one form per case, STAGE 0 (its combinations) in halves (the default device's list:
 * STAGE 2 and 3 took 290 s of a cold run, STAGE 0 and 1 260 s). */
static void storage_types_stage0_1of2(void **state) {
    (void)state;
    storage_types_configs_part(0, 0, 0, 2);
}
static void storage_types_stage0_2of2(void **state) {
    (void)state;
    storage_types_configs_part(0, 0, 1, 2);
}
static void storage_types_stage2(void **state) {
    (void)state;
    storage_types_configs(2, 2);
}
static void storage_types_stage3(void **state) {
    (void)state;
    storage_types_configs(3, 3);
}
/* STAGE 5: the weights packed (and widened) by its own kernel. Unpadded 1x1 layers read a 16-bit x
 * in place, each pixel widened as it is broadcast (KV_X16, session 26): the AVX-512 default's tile
 * on a deep 7x7 layer, a 14x14/2 downsample (KV_STRIDED_X too) and a plane strided along rows only,
 * in f16 and bf16 throughout and with fp32 weights and output. */
static void storage_types_stage5(void **state) {
    (void)state;
    storage_types_configs(5, 5);
    if (!cpu_forms_here() || th_small_mode()) return;
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", "ALGO=2 MWI=4 VW=16 STAGE=5 WGM=6 WGN=1"));
    const conv_case pw[] = {{.N = 1, .C = 300, .H = 7, .W = 7, .K = 70, .R = 1, .S = 1, .bias = true, .act = 2},
                            {.N = 2, .C = 64, .H = 14, .W = 14, .K = 70, .R = 1, .S = 1, .sh = 2, .sw = 2,
                             .bias = true, .act = 1, .off = 3},
                            {.N = 3, .C = 9, .H = 15, .W = 13, .K = 20, .R = 1, .S = 1, .sh = 2, .sw = 1, .off = 1},
                            /* 25-pixel planes, two groups, an offset: runs of 6 pixels in one plane (the
                             * vector widening), across an image's end and short of 8 in a plane (scalar) */
                            {.N = 3, .C = 8, .H = 5, .W = 5, .K = 10, .R = 1, .S = 1, .G = 2, .bias = true, .off = 1}};
    const tsr_dtype types[][3] = {
        {TSR_F16, TSR_F16, TSR_F16}, {TSR_BF16, TSR_BF16, TSR_BF16}, {TSR_F16, TSR_F32, TSR_F32}, {TSR_BF16, TSR_F32, TSR_F32}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i)
        for (size_t j = 0; j < sizeof pw / sizeof pw[0]; ++j)
            typed_check(&pw[j], types[i], TSR_CONV_AUTO, "1x1 in place, STAGE 5 4x16x6");
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
}
/* An f16 x's rows shorter than 16 columns in a padded copy at least 16 wide (ResNet-50's 14x14
 * planes: pad_input's permuted vector on AVX-512, session 22): 14x14 p1 (the plane's last rows
 * take the plane's last 16 elements), 12 wide p2 (16 exactly), 13 wide p2 (17: the row's last 16
 * columns), a plane under 16 elements (the gather), each through STAGE 2 and STAGE 5, f16
 * throughout and f16 x with fp32 w and y; bf16 alongside (the same copy's other branch); the 3x3
 * ones (and a 13-wide one) through both Winograd forms too. */
static void storage_types_short_rows(void **state) {
    (void)state;
    if (!cpu_forms_here()) skip();
    static const conv_case cases[] = {
        {.N = 2, .C = 3, .H = 14, .W = 14, .K = 5, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 1, .off = 3},
        {.N = 1, .C = 2, .H = 3, .W = 12, .K = 4, .R = 5, .S = 5, .ph = 2, .pw = 2, .off = 1},
        {.N = 1, .C = 2, .H = 5, .W = 13, .K = 3, .R = 5, .S = 5, .ph = 2, .pw = 2, .bias = true},
        {.N = 2, .C = 2, .H = 1, .W = 14, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1, .off = 2},
        {.N = 1, .C = 2, .H = 5, .W = 13, .K = 3, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true, .act = 1},
    };
    /* F(2x2), F(4x4) and the fused F(2x2) on the 3x3 cases: rows of 14 and 13 outputs end in a
     * partial vector of y (conv_store: an f16 y's lanes stored 8, 4, 2 and 1 at a time on AVX-512,
     * session 22) */
    static const char *const configs[] = {"ALGO=2 MWI=2 VW=8 STAGE=2 WGM=2 WGN=4", "ALGO=2 MWI=2 VW=8 STAGE=5 WGM=4 WGN=4",
                                          "ALGO=2 STAGE=6 WGN=1", "ALGO=2 STAGE=7 WGN=1",
                                          "ALGO=2 STAGE=9 MWI=4 WGM=1 WGN=2"};
    static const int combos[] = {13, 1, 26}; /* all f16; f16 x, fp32 w and y; all bf16 */
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; ++k) {
        if (!th_try_override(dev, "conv2d", configs[k])) continue;
        for (size_t i = 0; i < sizeof combos / sizeof combos[0]; ++i) {
            tsr_dtype t[3];
            type_combo(combos[i], t);
            for (size_t j = 0; j < sizeof cases / sizeof cases[0]; ++j)
                if (k < 2 || cases[j].R == 3) typed_check(&cases[j], t, TSR_CONV_AUTO, configs[k]);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
}
static void storage_types_stage8(void **state) {
    (void)state;
    storage_types_configs(6, 6);
}
static void storage_types_direct(void **state) {
    (void)state;
    storage_types_configs(4, 4);
    /* Forced paths with their built-in shapes, and the automatic choice. */
    for (int i = 0; i < 27; ++i) {
        if (th_small_mode() ? i != 13 : i != 13 && i != 8) continue;
        tsr_dtype t[3];
        type_combo(i, t);
        typed_check(&typed_cases[0], t, TSR_CONV_IMPLICIT, "forced implicit");
        typed_check(&typed_cases[3], t, TSR_CONV_DIRECT, "forced direct");
        typed_check(&typed_cases[3], t, TSR_CONV_AUTO, "auto");
    }
}

/* 16-bit weights are widened once per call into one fp32 copy in tessera's workspace (the
 * implicit path): two calls on two queues, enqueued back to back with different weights (and
 * weight counts) before either finishes, must each compute with their own weights, and a third
 * call on the first queue reuses the copy after both. */
static void staged_weights_run(const char *config) {
    if (config) TH_ASSERT_OK(tsr_config_override(dev, "conv2d", config));
    const tsr_dtype t[2][3] = {{TSR_F16, TSR_F16, TSR_F16}, {TSR_BF16, TSR_BF16, TSR_F32}};
    const conv_case *cases[2] = {&typed_cases[0], &typed_cases[1]};
    cl_int err;
    cl_command_queue q2 = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev), 0, &err);
    assert_int_equal(err, CL_SUCCESS);
    cl_command_queue queues[2] = {tsr_device_queue(dev), q2};
    typed_data d[2];
    for (int round = 0; round < 2; ++round) {
        for (int i = 0; i < 2; ++i) {
            if (round == 0) typed_make(cases[i], t[i], &d[i]);
            th_poison(d[i].y, cases[i]->off + d[i].ny + GUARD);
            TH_ASSERT_OK(tsr_upload_typed(dev, d[i].dy, t[i][2], d[i].y, cases[i]->off + d[i].ny + GUARD));
        }
        for (int i = 0; i < 2; ++i) {
            tsr_conv2d_desc desc = typed_desc(cases[i], t[i], TSR_CONV_IMPLICIT);
            /* round 1: both on the device's queue */
            TH_ASSERT_OK(conv_bias(dev, &desc, d[i].dx, d[i].dw, cases[i]->bias ? d[i].db : NULL, d[i].dy,
                                   round ? queues[0] : queues[i], NULL));
        }
        clFinish(queues[0]), clFinish(queues[1]);
        for (int i = 0; i < 2; ++i) {
            th_read_typed(dev, t[i][2], d[i].dy, d[i].y, cases[i]->off + d[i].ny);
            double e = tsr_rel_error(d[i].y + cases[i]->off, d[i].ref, d[i].ny), tol = typed_tolerance(cases[i], t[i][2]);
            if (!(e <= tol))
                fail_msg("staged weights [%s], round %d, call %d: relative error %.3e > %.3e", config ? config : "built-in",
                         round, i, e, tol);
        }
    }
    typed_free(&d[0]), typed_free(&d[1]);
    clReleaseCommandQueue(q2);
    if (config) TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
}

/* The same with STAGE 5, whose packed weights take the same workspace slot (CPUs only). */
static void storage_types_staged_weights(void **state) {
    (void)state;
    staged_weights_run(NULL);
    if (cpu_forms_here()) staged_weights_run("ALGO=2 MWI=2 VW=8 STAGE=5 WGM=4 WGN=4");
}

/* The im2col path's default tier: fp32 and the three combinations whose tensors all differ in
 * type, (x, w, y) = (f32, f16, bf16), (f16, bf16, f32) and (bf16, f32, f16): every tensor in every
 * type, and a type handed to the wrong tensor changes the result. Each (x, w, y) is a GEMM program
 * of its own for the 1x1 case, (f32, w, y) one for the others (the im2col columns are fp32), and
 * each of them compiles for seconds (the 27 combinations took 200 s of a cold run on a 2-core
 * Xeon): 2 im2col and 5 GEMM programs instead of 2 and 26. TSR_TEST_LONG=1 runs all 27. */
static bool combo_in_im2col_set(int i) { return i == 0 || i == 21 || i == 7 || i == 11; }

/* The im2col path: im2col reads x in its type into fp32 column matrices, the GEMM reads them with
 * w and writes y in theirs; the 1x1 case hands x itself to the GEMM in x's type. */
static void storage_types_im2col(void **state) {
    (void)state;
    size_t ncases = sizeof typed_cases / sizeof typed_cases[0];
    for (int i = 0; i < 27; ++i) {
        if (th_small_mode() && !combo_in_small_set(i)) continue;
        if (default_tier() && !combo_in_im2col_set(i)) continue;
        tsr_dtype t[3];
        type_combo(i, t);
        for (size_t j = 0; j < ncases; ++j) {
            if (th_oclgrind_mode() && j != 0 && j != 4) continue;
            typed_check(&typed_cases[j], t, TSR_CONV_IM2COL, "im2col");
        }
    }
}

/* pointwise_unpacked_b's layers in every storage combination: 16-bit x read in place by the GEMM
 * (no packing pass to widen it). */
static void storage_types_unpacked_b(void **state) {
    (void)state;
    const conv_case cases[] = {
        {.N = 2, .C = 24, .H = 48, .W = 48, .K = 20, .R = 1, .S = 1, .off = 5, .bias = true, .act = 1},
        {.N = 1, .C = 10, .H = 45, .W = 47, .K = 9, .R = 1, .S = 1, .off = 3}, /* ragged row of tiles */
    };
    for (int i = 0; i < 27; ++i) {
        if (th_small_mode() && !combo_in_small_set(i)) continue;
        if (default_tier() && !combo_in_im2col_set(i)) continue;
        tsr_dtype t[3];
        type_combo(i, t);
        for (size_t j = 0; j < sizeof cases / sizeof cases[0]; ++j) {
            conv_case c = cases[j];
            if (th_small_mode()) c.N = 1, c.C = 3;
            typed_check(&c, t, TSR_CONV_IM2COL, "im2col");
            if (th_small_mode()) break;
        }
    }
}

/* The NaN and Inf of a 16-bit x stay out of padding and of the outputs their windows miss, in
 * every form (a padded 16-bit copy, masked edge vectors, strided loads). */
static void storage_types_inf_contained(void **state) {
    (void)state;
    conv_case c = {.N = 1, .C = 2, .H = 6, .W = 20, .K = 3, .R = 3, .S = 3, .ph = 2, .pw = 2};
    const tsr_dtype types[][3] = {{TSR_F16, TSR_F16, TSR_F16}, {TSR_BF16, TSR_BF16, TSR_F32}};
    for (size_t k = 0; k < sizeof typed_configs / sizeof typed_configs[0]; ++k) {
        if (typed_cpu_form(typed_configs[k]) && !cpu_forms_here()) continue;
        if (th_small_mode() && k != 0) continue;
        if (!th_try_override(dev, "conv2d", typed_configs[k])) continue;
        for (size_t ti = 0; ti < 2; ++ti)
            for (int where = 0; where < 3; ++where) {
                typed_data d;
                typed_make(&c, types[ti], &d);
                size_t ih = where == 0 ? 0 : where == 1 ? 3 : c.H - 1, iw = where == 1 ? 0 : c.W - 1;
                d.x[ih * c.W + iw] = INFINITY;
                TH_ASSERT_OK(tsr_upload_typed(dev, d.dx, types[ti][0], d.x, d.nx));
                tsr_conv2d_desc desc = typed_desc(&c, types[ti], TSR_CONV_AUTO);
                TH_ASSERT_OK(conv_bias(dev, &desc, d.dx, d.dw, NULL, d.dy, NULL, NULL));
                th_read_typed(dev, types[ti][2], d.dy, d.y, d.ny);
                conv_data view = {.y = d.y, .ny = d.ny, .P = d.P, .Q = d.Q};
                size_t bad = nonfinite_away_from(&c, &view, ih, iw);
                if (bad)
                    fail_msg("%s %s: Inf at (%zu, %zu): %zu outputs away from it became non-finite", typed_configs[k],
                             tsr_dtype_str(types[ti][0]), ih, iw, bad);
                typed_free(&d);
            }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
}

/* Invalid types are refused naming the tensor, sizes count each tensor's own elements, and y
 * overlapping x is judged in bytes across types; nothing is written by a rejected call. */
static void storage_types_invalid(void **state) {
    (void)state;
    conv_case c = {.N = 1, .C = 4, .H = 6, .W = 6, .K = 4, .R = 3, .S = 3, .ph = 1, .pw = 1, .bias = true};
    const tsr_dtype t[3] = {TSR_F16, TSR_BF16, TSR_F16};
    typed_data d;
    typed_make(&c, t, &d);
    th_poison(d.y, d.ny);
    TH_ASSERT_OK(tsr_upload_typed(dev, d.dy, t[2], d.y, d.ny));
    const tsr_conv2d_desc ok = typed_desc(&c, t, TSR_CONV_AUTO);
    tsr_conv2d_desc e;
    const char *names[3] = {"x_type", "w_type", "y_type"};
    for (int i = 0; i < 3; ++i) {
        e = ok;
        tsr_dtype *field[3] = {&e.x_type, &e.w_type, &e.y_type};
        *field[i] = (tsr_dtype)TSR_DTYPE_COUNT;
        TH_ASSERT_STATUS(conv_bias(dev, &e, d.dx, d.dw, d.db, d.dy, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), names[i]);
        *field[i] = (tsr_dtype)-1;
        size_t h, w;
        TH_ASSERT_STATUS(tsr_conv2d_output_size(&e, &h, &w), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), names[i]);
    }
    /* One element short in 16-bit elements (an fp32 count would have passed: twice the bytes). */
    cl_mem x_short = th_buffer_typed(dev, TSR_F16, d.nx - 1), w_short = th_buffer_typed(dev, TSR_BF16, d.nw - 1),
           y_short = th_buffer_typed(dev, TSR_F16, d.ny - 1);
    TH_ASSERT_STATUS(conv_bias(dev, &ok, x_short, d.dw, d.db, d.dy, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "buffer x");
    TH_ASSERT_STATUS(conv_bias(dev, &ok, d.dx, w_short, d.db, d.dy, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "buffer w");
    TH_ASSERT_STATUS(conv_bias(dev, &ok, d.dx, d.dw, d.db, y_short, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "buffer y");
    e = ok, e.y_offset = GUARD + 1; /* one half past the end */
    TH_ASSERT_STATUS(conv_bias(dev, &e, d.dx, d.dw, d.db, d.dy, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    /* An fp32 x and an f16 y in one buffer: y's offset counts halves. x takes bytes [0, 4 nx). */
    cl_mem both = th_buffer(dev, d.nx + d.ny); /* room for x (fp32) and y (f16) with slack */
    tsr_dtype t32[3] = {TSR_F32, TSR_BF16, TSR_F16};
    e = typed_desc(&c, t32, TSR_CONV_AUTO);
    e.y_offset = 2 * d.nx - 1; /* y's first half is x's last float's upper half */
    TH_ASSERT_STATUS(conv_bias(dev, &e, both, d.dw, d.db, both, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlap");
    e.y_offset = 2 * d.nx; /* adjacent in bytes: fine */
    TH_ASSERT_OK(conv_bias(dev, &e, both, d.dw, d.db, both, NULL, NULL));
    clFinish(tsr_device_queue(dev));
    th_read_typed(dev, t[2], d.dy, d.y, d.ny);
    for (size_t i = 0; i < d.ny; ++i)
        assert_true(isnan(d.y[i]));
    clReleaseMemObject(x_short), clReleaseMemObject(w_short), clReleaseMemObject(y_short), clReleaseMemObject(both);
    typed_free(&d);
}

/* 16-bit layers have their own problem classes (falling back to the fp32 class's configuration). */
static void storage_types_classes(void **state) {
    (void)state;
    const tsr_dtype t[3] = {TSR_F32, TSR_BF16, TSR_F32};
    tsr_conv2d_desc desc = typed_desc(&typed_cases[0], t, TSR_CONV_AUTO);
    tsr_conv_algo algo;
    tsr_config_info info;
    TH_ASSERT_OK(tsr_conv2d_plan(dev, &desc, &algo, &info));
    assert_string_equal(info.problem_class, "3x3-small-wino-bf16"); /* 266 output pixels, 72 F(2x2) tiles */
    desc.x_type = TSR_F16;
    TH_ASSERT_OK(tsr_conv2d_plan(dev, &desc, &algo, &info));
    assert_string_equal(info.problem_class, "3x3-small-wino-f16");
    desc = typed_desc(&typed_cases[3], (tsr_dtype[]){TSR_F32, TSR_F32, TSR_F32}, TSR_CONV_AUTO);
    TH_ASSERT_OK(tsr_conv2d_plan(dev, &desc, &algo, &info));
    assert_string_equal(info.problem_class, "depthwise");
}

int main(void) {
    if (small_mode()) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(shapes),
            cmocka_unit_test(configurations),
            cmocka_unit_test(cpu_forms),
            cmocka_unit_test(storage_types),
            cmocka_unit_test(storage_types_cpu_forms),
            cmocka_unit_test(cpu_forms_stage8),
            cmocka_unit_test(storage_types_direct),
            cmocka_unit_test(storage_types_im2col),
            cmocka_unit_test(storage_types_inf_contained),
            cmocka_unit_test(storage_types_stage1),
            cmocka_unit_test(pointwise_unpacked_b),
            cmocka_unit_test(storage_types_unpacked_b),
        };
        return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
    }
    /* The long cases (with empty caches) first, in an order that deals them across tests/meson.build's
     * 10 shards (case i runs in shard i mod N): row by row, each case to the shard with the least so
     * far (seconds of a cold run on a loaded 2-core Xeon; without CLBlast the cases after its
     * comparison move up one shard). */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(storage_types_stage0_1of2),
        cmocka_unit_test(storage_types_stage0_2of2),
        cmocka_unit_test(resnet50_batch1_a),
        cmocka_unit_test(configurations),
        cmocka_unit_test(cpu_forms_stage2_1of2),
        cmocka_unit_test(cpu_forms_stage2_2of2),
        cmocka_unit_test(storage_types_direct),
        cmocka_unit_test(cpu_forms_stage4_1of2),
        cmocka_unit_test(cpu_forms_stage4_2of2),
#ifdef TSR_HAVE_CLBLAST
        cmocka_unit_test(matches_clblast),
#endif
        cmocka_unit_test(storage_types_inf_contained),
        cmocka_unit_test(resnet50_batch1_c),
        cmocka_unit_test(storage_types_im2col),
        cmocka_unit_test(resnet50_batch1_b),
        cmocka_unit_test(storage_types_stage1),
        cmocka_unit_test(cpu_forms_stage3_1of2),
        cmocka_unit_test(cpu_forms_stage3_2of2),
        cmocka_unit_test(storage_types_stage2),
        cmocka_unit_test(shapes),
        cmocka_unit_test(storage_types_stage3),
        cmocka_unit_test(padding_never_reads),
        cmocka_unit_test(resnet50_batch8_a),
        cmocka_unit_test(storage_types_staged_weights),
        cmocka_unit_test(resnet50_batch8_c),
        cmocka_unit_test(sub_buffers_overlap_by_memory),
        cmocka_unit_test(plan_and_tune),
        cmocka_unit_test(storage_types_invalid),
        cmocka_unit_test(invalid_descriptors),
        cmocka_unit_test(resnet50_batch8_b),
        cmocka_unit_test(workspace),
        cmocka_unit_test(storage_types_classes),
        cmocka_unit_test(huge_sizes_overflow),
        cmocka_unit_test(cpu_forms_stage5_1of2),
        cmocka_unit_test(cpu_forms_stage5_2of2),
        cmocka_unit_test(storage_types_stage5), cmocka_unit_test(storage_types_short_rows),
        cmocka_unit_test(cpu_forms_winograd2),
        cmocka_unit_test(cpu_forms_winograd4),
        cmocka_unit_test(cpu_forms_winograd_fused),
        cmocka_unit_test(winograd_few_tiles),
        cmocka_unit_test(cpu_forms_stage8),
        cmocka_unit_test(storage_types_stage8),
        cmocka_unit_test(pointwise_unpacked_b),
        cmocka_unit_test(storage_types_unpacked_b),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
