/* conv2d's fused epilogue, y = act(scale[k] sum + bias[k] + residual), against the double host
 * reference (tsr_conv2d_reference_fused) on fresh seeded inputs: every path (the automatic choice,
 * im2col + GEMM, direct) and every implicit form (STAGE 0 and 1; the CPU forms 2, 3 and 4 where the
 * device vectorizes within a work-item), with a residual of its own in each storage type or y
 * itself (read before written: the depthwise form's overlapping last tile, GEMM's beta), 16-bit
 * x, w and y, groups, strides, pointwise layers, offsets with guard zones on both sides of y,
 * outputs poisoned with NaN; the same in channels-last (TSR_NHWC) with dilation and depthwise
 * layers; and the refusals (sizes, types, overlaps, layouts), which write nothing.
 * Tolerance: max(1e-5, tsr_dtype_error_bound(y_type, Cg R S)). TSR_TEST_MODE=oclgrind or rusticl
 * runs a small subset. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define dev th_dev
#define GUARD 5

typedef struct epi_case {
    size_t N, C, H, W, K, R, S, st, pad, G;
    tsr_activation act;
    bool scale, bias;
    int res;                   /* 0: none, 1: a tensor of its own (type rt), 2: y itself */
    tsr_dtype xt, wt, yt, rt;
    size_t off;                /* offset of every tensor, in its own elements */
    size_t dil;                /* dilation (0: 1) */
    tsr_tensor_layout layout;  /* of x, y and the residual */
} epi_case;

static tsr_conv2d_desc case_desc(const epi_case *c) {
    tsr_conv2d_desc d = {.batch = c->N, .in_channels = c->C, .in_height = c->H, .in_width = c->W,
                         .out_channels = c->K, .kernel_h = c->R, .kernel_w = c->S, .stride_h = c->st,
                         .stride_w = c->st, .pad_h = c->pad, .pad_w = c->pad, .groups = c->G,
                         .x_offset = c->off, .w_offset = c->off, .y_offset = c->off,
                         .x_type = c->xt, .w_type = c->wt, .y_type = c->yt, .dilation_h = c->dil,
                         .dilation_w = c->dil, .layout = c->layout};
    d.epilogue.activation = c->act;
    d.epilogue.scale_offset = d.epilogue.bias_offset = d.epilogue.residual_offset = c->off;
    d.epilogue.residual_type = c->res == 2 ? c->yt : c->rt;
    return d;
}

typedef struct epi_data {
    tsr_conv2d_desc d;
    size_t nx, nw, ny;
    float *x, *w, *scale, *bias, *res, *y;
    double *ref;
    cl_mem dx, dw, ds, db, dr, dy;
} epi_data;

static void data_make(const epi_case *c, epi_data *e) {
    memset(e, 0, sizeof *e);
    e->d = case_desc(c);
    size_t P, Q;
    TH_ASSERT_OK(tsr_conv2d_output_size(&e->d, &P, &Q));
    size_t G = c->G ? c->G : 1, off = c->off;
    e->nx = c->N * c->C * c->H * c->W, e->nw = c->K * (c->C / G) * c->R * c->S, e->ny = c->N * c->K * P * Q;
    e->x = malloc((off + e->nx) * 4), e->w = malloc((off + e->nw) * 4), e->scale = malloc((off + c->K) * 4);
    e->bias = malloc((off + c->K) * 4), e->res = malloc((off + e->ny + GUARD) * 4);
    e->y = malloc((off + e->ny + GUARD) * 4), e->ref = malloc(e->ny * sizeof *e->ref);
    th_fill_uniform_typed(c->xt, e->x, off + e->nx, -1, 1);
    th_fill_uniform_typed(c->wt, e->w, off + e->nw, -1, 1);
    th_fill_uniform(e->scale, off + c->K, -2, 2);
    th_fill_uniform(e->bias, off + c->K, -1, 1);
    tsr_dtype rt = c->res == 2 ? c->yt : c->rt;
    th_fill_uniform_typed(rt, e->res, off + e->ny + GUARD, -2, 2);
    tsr_conv2d_reference_fused(&e->d, e->x + off, e->w + off, c->scale ? e->scale + off : NULL,
                               c->bias ? e->bias + off : NULL, c->res ? e->res + off : NULL, e->ref);
    e->dx = th_buffer_from_typed(dev, c->xt, e->x, off + e->nx);
    e->dw = th_buffer_from_typed(dev, c->wt, e->w, off + e->nw);
    e->ds = th_buffer_from(dev, e->scale, off + c->K);
    e->db = th_buffer_from(dev, e->bias, off + c->K);
    e->dr = th_buffer_from_typed(dev, c->rt, e->res, off + e->ny + GUARD);
    e->dy = th_buffer_typed(dev, c->yt, off + e->ny + GUARD);
    if (c->scale) e->d.epilogue.scale = e->ds;
    if (c->bias) e->d.epilogue.bias = e->db;
    if (c->res) e->d.epilogue.residual = c->res == 2 ? e->dy : e->dr;
}

static void data_free(epi_data *e) {
    cl_mem m[6] = {e->dx, e->dw, e->ds, e->db, e->dr, e->dy};
    for (int i = 0; i < 6; ++i) clReleaseMemObject(m[i]);
    free(e->x), free(e->w), free(e->scale), free(e->bias), free(e->res), free(e->y), free(e->ref);
}

static const char *case_name(const epi_case *c, char *buf, size_t size) {
    snprintf(buf, size,
             "N%zu C%zu %zux%zu K%zu %zux%zu s%zu p%zu d%zu g%zu act%d scale%d bias%d res%d x %s w %s y %s r %s %s",
             c->N, c->C, c->H, c->W, c->K, c->R, c->S, c->st ? c->st : 1, c->pad, c->dil ? c->dil : 1,
             c->G ? c->G : 1, (int)c->act, c->scale, c->bias, c->res, tsr_dtype_str(c->xt), tsr_dtype_str(c->wt),
             tsr_dtype_str(c->yt), tsr_dtype_str(c->rt), c->layout == TSR_NHWC ? "NHWC" : "NCHW");
    return buf;
}

/* One call (algo, under the current override): y poisoned with NaN between guard zones, or holding
 * the residual when it is y; then the guards, and every output against the reference. */
static void check(const epi_case *c, epi_data *e, tsr_conv_algo algo, const char *form) {
    char name[300];
    case_name(c, name, sizeof name);
    const size_t off = c->off, total = off + e->ny + GUARD;
    const float guard = tsr_dtype_round(c->yt, 777.0f);
    for (size_t i = 0; i < total; ++i) e->y[i] = guard;
    if (c->res == 2) memcpy(e->y + off, e->res + off, e->ny * sizeof *e->y);
    else th_poison(e->y + off, e->ny);
    TH_ASSERT_OK(tsr_upload_typed(dev, e->dy, c->yt, e->y, total));
    tsr_conv2d_desc d = e->d;
    d.algo = algo;
    cl_event ev = NULL;
    tsr_status st = tsr_conv2d(dev, &d, e->dx, e->dw, e->dy, NULL, &ev);
    if (st != TSR_SUCCESS) fail_msg("%s [%s]: %s: %s", name, form, tsr_status_str(st), tsr_last_error());
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    th_read_typed(dev, c->yt, e->dy, e->y, total);
    for (size_t i = 0; i < off; ++i)
        if (e->y[i] != guard) fail_msg("%s [%s]: guard before y[%zu] overwritten", name, form, i);
    for (size_t i = 0; i < GUARD; ++i)
        if (e->y[off + e->ny + i] != guard) fail_msg("%s [%s]: guard after y overwritten", name, form);
    double err = tsr_rel_error(e->y + off, e->ref, e->ny);
    double tol = tsr_dtype_error_bound(c->yt, (double)(c->C / (c->G ? c->G : 1) * c->R * c->S));
    if (tol < 1e-5) tol = 1e-5;
    if (!(err <= tol)) fail_msg("%s [%s]: relative error %.3e > %.3e", name, form, err, tol);
}

/* Layers reaching each form's branches, in storage sets the conv tests build anyway (fp32, f16,
 * bf16, bf16 inputs with an fp32 output). Q = 19 and 21 leave the depthwise form an overlapping
 * last tile, which must not read a residual that is y after its neighbour wrote it. */
static const epi_case cases[] = {
    {.N = 2, .C = 5, .H = 7, .W = 19, .K = 6, .R = 3, .S = 3, .pad = 1, .act = TSR_ACT_RELU, .scale = true,
     .bias = true, .res = 1, .off = 3},
    {.N = 2, .C = 5, .H = 7, .W = 19, .K = 6, .R = 3, .S = 3, .pad = 1, .act = TSR_ACT_GELU_TANH, .scale = true,
     .bias = true, .res = 2, .off = 1},
    {.N = 2, .C = 6, .H = 5, .W = 7, .K = 4, .R = 1, .S = 1, .scale = true, .res = 1, .xt = TSR_F16, .wt = TSR_F16,
     .yt = TSR_F16, .rt = TSR_BF16, .off = 2},                                              /* pointwise */
    {.N = 1, .C = 4, .H = 9, .W = 37, .K = 5, .R = 3, .S = 3, .st = 2, .pad = 1, .act = TSR_ACT_RELU, .scale = true,
     .bias = true, .res = 2, .xt = TSR_BF16, .wt = TSR_BF16, .yt = TSR_BF16},               /* strided */
    {.N = 2, .C = 8, .H = 6, .W = 10, .K = 8, .R = 3, .S = 3, .pad = 1, .G = 2, .act = TSR_ACT_GELU_ERF,
     .scale = true, .bias = true, .res = 1, .xt = TSR_BF16, .wt = TSR_BF16, .rt = TSR_F16, .off = 1}, /* grouped */
    {.N = 2, .C = 6, .H = 9, .W = 21, .K = 6, .R = 3, .S = 3, .pad = 1, .G = 6, .act = TSR_ACT_RELU, .scale = true,
     .res = 2, .off = 2},                                                                   /* depthwise */
    {.N = 2, .C = 5, .H = 11, .W = 36, .K = 5, .R = 3, .S = 3, .st = 2, .pad = 1, .G = 5, .act = TSR_ACT_RELU,
     .scale = true, .bias = true, .res = 2, .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16, .off = 1}, /* depthwise /2 */
    {.N = 2, .C = 4, .H = 6, .W = 14, .K = 4, .R = 3, .S = 3, .pad = 1, .G = 4, .act = TSR_ACT_RELU, .scale = true,
     .bias = true, .xt = TSR_BF16, .wt = TSR_BF16, .yt = TSR_BF16, .off = 2}, /* depthwise, one 16-lane vector a row */
};
#define NCASES (sizeof cases / sizeof cases[0])

/* The forms: forced paths with their built-in shapes, and the implicit kernel's forms by override
 * (the configurations the storage-type tests use). */
static const struct {
    const char *config; /* NULL: no override */
    tsr_conv_algo algo;
    bool cpu_only;
} forms[] = {
    {NULL, TSR_CONV_AUTO, false},
    {NULL, TSR_CONV_IM2COL, false},
    {NULL, TSR_CONV_DIRECT, false},
    {"ALGO=2 MWI=2 VW=4", TSR_CONV_AUTO, false},
    {"ALGO=2 MWI=2 VW=4 STAGE=1 WGM=4 WGN=4 KWG=8", TSR_CONV_AUTO, false},
    {"ALGO=2 MWI=2 VW=8 STAGE=2 WGM=3 WGN=4", TSR_CONV_AUTO, true},
    {"ALGO=2 MWI=2 VW=4 STAGE=3 WGN=4", TSR_CONV_AUTO, true},
    {"ALGO=2 MWI=2 VW=8 STAGE=4 WGN=8", TSR_CONV_AUTO, true},
    {"ALGO=2 MWI=2 VW=16 STAGE=8 WGN=4", TSR_CONV_AUTO, true}, /* depthwise row strips (others: STAGE 4) */
    /* channel vectors: a pixel's VW channels stored as one vector's lanes (full vectors and the
     * channels' partial last one) */
    {"ALGO=2 MWI=2 VW=4 STAGE=5 WGM=3 WGN=4", TSR_CONV_AUTO, true},
    {"ALGO=2 MWI=1 VW=16 STAGE=5 WGM=2 WGN=1", TSR_CONV_AUTO, true},
    {"ALGO=2 STAGE=6 WGN=1", TSR_CONV_AUTO, true}, /* Winograd F(2x2, 3x3) on every layer it fits */
    {"ALGO=2 STAGE=7 WGN=1", TSR_CONV_AUTO, true}, /* F(4x4, 3x3) */
    {"ALGO=2 STAGE=9 MWI=8 WGM=2 WGN=2", TSR_CONV_AUTO, true}, /* F(2x2) fused */
};

/* The Winograd forms' own 3x3 layers in 16-bit storage: f16 throughout with a bf16 residual,
 * bf16 inputs with an fp32 y that is its own residual; odd planes (tiles half outside y), 56x56
 * with 4 images for the vector blocks and several chunks; 28x28 in bf16 (F(2x2)'s and F(4x4)'s
 * row ends: 6 and 3 tiles of 7 and 14); 14x14 in f16 (the padded copy's rows of 16, one vector).
 * The channel-vector form (STAGE 5) runs them too (K = 24: a 16-channel vector and a partial one). */
static const epi_case winograd_cases[] = {
    {.N = 2, .C = 9, .H = 9, .W = 11, .K = 7, .R = 3, .S = 3, .pad = 1, .act = TSR_ACT_RELU, .scale = true,
     .bias = true, .res = 1, .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16, .rt = TSR_BF16, .off = 2},
    {.N = 3, .C = 6, .H = 13, .W = 21, .K = 10, .R = 3, .S = 3, .pad = 1, .act = TSR_ACT_GELU_TANH, .bias = true,
     .res = 2, .xt = TSR_BF16, .wt = TSR_BF16, .yt = TSR_F32, .off = 1},
    {.N = 4, .C = 16, .H = 56, .W = 56, .K = 24, .R = 3, .S = 3, .pad = 1, .act = TSR_ACT_RELU, .scale = true,
     .bias = true, .res = 1, .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16, .rt = TSR_F16, .off = 3},
    {.N = 1, .C = 8, .H = 28, .W = 28, .K = 17, .R = 3, .S = 3, .pad = 1, .act = TSR_ACT_RELU, .bias = true,
     .res = 2, .xt = TSR_BF16, .wt = TSR_BF16, .yt = TSR_BF16, .off = 1},
    {.N = 2, .C = 8, .H = 14, .W = 14, .K = 20, .R = 3, .S = 3, .pad = 1, .act = TSR_ACT_RELU, .scale = true,
     .bias = true, .res = 1, .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16, .rt = TSR_F16, .off = 2},
    /* unpadded unstrided 16-bit layers: the copy widens whole planes (12 elements: under one
     * vector; 20: a vector and an overlapping last one; 3x3 unpadded: the copy's slack rows) */
    {.N = 3, .C = 5, .H = 3, .W = 4, .K = 18, .R = 1, .S = 1, .act = TSR_ACT_RELU, .bias = true, .res = 1,
     .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16, .rt = TSR_BF16, .off = 1},
    {.N = 2, .C = 7, .H = 4, .W = 5, .K = 17, .R = 1, .S = 1, .scale = true, .res = 2, .xt = TSR_BF16,
     .wt = TSR_BF16, .yt = TSR_BF16, .off = 3},
    {.N = 2, .C = 4, .H = 9, .W = 10, .K = 16, .R = 3, .S = 3, .act = TSR_ACT_GELU_TANH, .bias = true,
     .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F32, .off = 2},
    /* f16 rows of 8 to 15 columns in the copy (13 wide at stride 2: phase planes of 8) */
    {.N = 1, .C = 6, .H = 13, .W = 13, .K = 18, .R = 3, .S = 3, .st = 2, .pad = 1, .act = TSR_ACT_RELU,
     .bias = true, .res = 1, .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16, .rt = TSR_F16, .off = 1},
};

static bool cpu_forms_here(void) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    return info->type == TSR_DEVICE_CPU && (info->preferred_vector_width[4] > 1 || info->native_vector_width[4] > 1);
}

static void every_form(void **state) {
    (void)state;
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; ++f) {
        if (forms[f].cpu_only && !cpu_forms_here()) continue;
        /* small mode (Oclgrind, rusticl): the automatic path, im2col and the STAGE 0 form */
        if (th_small_mode() && f != 0 && f != 1 && f != 3) continue;
        if (forms[f].config && !th_try_override(dev, "conv2d", forms[f].config)) continue;
        for (size_t i = 0; i < NCASES; ++i) {
            if (th_small_mode() && i != (f % 2 ? 1 : 3)) continue; /* y itself as the residual: fp32, bf16 */
            epi_data e;
            data_make(&cases[i], &e);
            check(&cases[i], &e, forms[f].algo, forms[f].config ? forms[f].config : "built-in");
            data_free(&e);
        }
        if (forms[f].config && (strstr(forms[f].config, "STAGE=5") || strstr(forms[f].config, "STAGE=6") ||
                                strstr(forms[f].config, "STAGE=7") || strstr(forms[f].config, "STAGE=9")))
            for (size_t i = 0; i < sizeof winograd_cases / sizeof winograd_cases[0]; ++i) {
                epi_data e;
                data_make(&winograd_cases[i], &e);
                check(&winograd_cases[i], &e, forms[f].algo, forms[f].config);
                data_free(&e);
            }
        if (forms[f].config) TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
    }
}

/* STAGE 8's whole-plane form (cl/conv_cpu.cl's DW8_PLANES: 3x3 depthwise layers, padding 1, whose
 * input rows fit 16 lanes at stride 1 or 32 at stride 2, H <= 32) under 16-lane STAGE 8
 * configurations: 7x7 and 5x5 planes two a vector (an odd plane count: the last item's second slot
 * empty), 14x14, 9x9 and 13-wide planes one a vector, stride 2 on 14, 10 (two a vector) and 28
 * (one, two loads a row) wide planes with odd and even heights, tall and flat planes, stride 1 on
 * 17, 20, 25, 28, 30 and 32 wide planes (two vectors a row; one-row and 32-row planes); every
 * storage set, scale, bias, each activation, no residual (the fast rows, ReLU or none as a max),
 * a residual of its own and y itself; offsets with guard zones, x's buffer ending at the tensor's
 * end (the last plane's last rows read lane by lane); a 2x3 plane (too small for a row's load:
 * STAGE 8's rows instead). TSR_TEST_MODE=oclgrind or rusticl: a subset, one configuration. */
static const epi_case plane_cases[] = {
    {.N = 3, .C = 5, .H = 7, .W = 7, .K = 5, .R = 3, .S = 3, .pad = 1, .G = 5, .act = TSR_ACT_RELU, .scale = true,
     .bias = true, .off = 3},
    {.N = 2, .C = 3, .H = 14, .W = 14, .K = 3, .R = 3, .S = 3, .st = 2, .pad = 1, .G = 3, .act = TSR_ACT_RELU,
     .bias = true, .res = 2, .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16, .off = 1},
    {.N = 2, .C = 3, .H = 14, .W = 14, .K = 3, .R = 3, .S = 3, .pad = 1, .G = 3, .scale = true, .bias = true,
     .xt = TSR_BF16, .wt = TSR_BF16, .yt = TSR_BF16, .off = 2},
    {.N = 2, .C = 4, .H = 7, .W = 7, .K = 4, .R = 3, .S = 3, .pad = 1, .G = 4, .act = TSR_ACT_GELU_TANH,
     .scale = true, .res = 2, .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16},
    {.N = 2, .C = 5, .H = 14, .W = 14, .K = 5, .R = 3, .S = 3, .st = 2, .pad = 1, .G = 5, .act = TSR_ACT_RELU,
     .scale = true, .bias = true, .res = 1, .rt = TSR_F16, .off = 2},
    {.N = 1, .C = 3, .H = 13, .W = 14, .K = 3, .R = 3, .S = 3, .st = 2, .pad = 1, .G = 3, .xt = TSR_BF16,
     .wt = TSR_BF16, .off = 1},
    {.N = 2, .C = 3, .H = 9, .W = 9, .K = 3, .R = 3, .S = 3, .pad = 1, .G = 3, .bias = true, .yt = TSR_F16},
    {.N = 1, .C = 7, .H = 5, .W = 5, .K = 7, .R = 3, .S = 3, .pad = 1, .G = 7, .act = TSR_ACT_GELU_ERF, .scale = true,
     .off = 2},
    {.N = 2, .C = 3, .H = 10, .W = 10, .K = 3, .R = 3, .S = 3, .st = 2, .pad = 1, .G = 3, .act = TSR_ACT_RELU,
     .scale = true, .bias = true, .xt = TSR_BF16, .wt = TSR_BF16, .yt = TSR_BF16},
    {.N = 1, .C = 3, .H = 28, .W = 28, .K = 3, .R = 3, .S = 3, .st = 2, .pad = 1, .G = 3, .act = TSR_ACT_RELU,
     .scale = true, .bias = true, .res = 2, .off = 1},
    {.N = 2, .C = 3, .H = 11, .W = 6, .K = 3, .R = 3, .S = 3, .pad = 1, .G = 3, .act = TSR_ACT_RELU, .bias = true,
     .res = 1, .rt = TSR_BF16, .off = 2},
    {.N = 1, .C = 3, .H = 3, .W = 16, .K = 3, .R = 3, .S = 3, .pad = 1, .G = 3, .act = TSR_ACT_RELU, .scale = true,
     .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F32},
    {.N = 3, .C = 3, .H = 32, .W = 13, .K = 3, .R = 3, .S = 3, .pad = 1, .G = 3, .bias = true, .off = 1},
    {.N = 2, .C = 3, .H = 2, .W = 3, .K = 3, .R = 3, .S = 3, .pad = 1, .G = 3, .act = TSR_ACT_RELU, .bias = true},
    /* stride 1, rows of 17 to 32 columns: two vectors a row (session 26) */
    {.N = 2, .C = 3, .H = 28, .W = 28, .K = 3, .R = 3, .S = 3, .pad = 1, .G = 3, .act = TSR_ACT_RELU, .scale = true,
     .bias = true, .off = 1},
    {.N = 1, .C = 5, .H = 5, .W = 17, .K = 5, .R = 3, .S = 3, .pad = 1, .G = 5, .act = TSR_ACT_GELU_TANH,
     .bias = true, .res = 2, .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16, .off = 2},
    {.N = 3, .C = 3, .H = 32, .W = 32, .K = 3, .R = 3, .S = 3, .pad = 1, .G = 3, .bias = true, .xt = TSR_BF16,
     .wt = TSR_BF16, .yt = TSR_BF16, .off = 2},
    {.N = 2, .C = 3, .H = 3, .W = 20, .K = 3, .R = 3, .S = 3, .pad = 1, .G = 3, .act = TSR_ACT_RELU, .scale = true,
     .res = 1, .rt = TSR_F32, .off = 1},
    {.N = 2, .C = 3, .H = 1, .W = 30, .K = 3, .R = 3, .S = 3, .pad = 1, .G = 3},
    {.N = 1, .C = 4, .H = 9, .W = 25, .K = 4, .R = 3, .S = 3, .pad = 1, .G = 4, .act = TSR_ACT_GELU_ERF, .scale = true,
     .bias = true, .yt = TSR_F16},
};

static void depthwise_planes(void **state) {
    (void)state;
    static const char *const configs[] = {"ALGO=2 MWI=4 VW=16 STAGE=8 WGM=1 WGN=16 KWG=8",
                                          "ALGO=2 MWI=2 VW=16 STAGE=8 WGN=4"};
    const size_t ncases = sizeof plane_cases / sizeof plane_cases[0];
    for (size_t f = 0; f < 2; ++f) {
        if (th_small_mode() && f) continue;
        if (!th_try_override(dev, "conv2d", configs[f])) continue;
        for (size_t i = 0; i < ncases; ++i) {
            if (th_small_mode() && i != 0 && i != 1 && i != 3 && i != 9 && i != 14 && i != 15) continue;
            epi_data e;
            data_make(&plane_cases[i], &e);
            check(&plane_cases[i], &e, TSR_CONV_AUTO, configs[f]);
            data_free(&e);
        }
        TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
    }
}

/* STAGE 2 with 16-float vectors: on AVX-512 a vector whose lanes cross a row end of the flattened
 * copy is stored as runs of lanes, one a row (session 24: an fp32 y by one masked store, a 16-bit
 * one rounded and stored 8, 4, 2, 1 lanes at a time), and its residual gathered run by run;
 * elsewhere the lanes one by one. Layers whose vectors hold 2 and 3 runs (copy rows of 19, 7 and 8
 * for 16, 5 and 7 outputs), start on the copy's padded columns, end past the plane's last row;
 * conv1's 7x7/2 shape, a 3x3/2 one, an unpadded 3x3 layer (rows of W read in place, Q = W - 2) and
 * a 1x1 one (no padded columns at all); y in fp32, f16 and bf16; a residual of its own (fp32, f16,
 * fp32 for a bf16 y) and y itself; offsets with guard zones; MWI 8 (nv 2 or 3 vectors) and 6 (rows
 * past K). */
static const epi_case run_cases[] = {
    {.N = 2, .C = 3, .H = 29, .W = 31, .K = 9, .R = 7, .S = 7, .st = 2, .pad = 3, .act = TSR_ACT_RELU,
     .scale = true, .bias = true, .res = 1, .off = 3},                                      /* conv1-like */
    {.N = 1, .C = 3, .H = 29, .W = 31, .K = 10, .R = 7, .S = 7, .st = 2, .pad = 3, .act = TSR_ACT_GELU_TANH,
     .bias = true, .res = 2, .off = 1},
    {.N = 2, .C = 5, .H = 5, .W = 5, .K = 11, .R = 3, .S = 3, .pad = 1, .act = TSR_ACT_RELU, .scale = true,
     .res = 1, .rt = TSR_F16, .off = 2},                                                    /* 3 runs a vector */
    {.N = 2, .C = 6, .H = 13, .W = 13, .K = 9, .R = 3, .S = 3, .st = 2, .pad = 1, .act = TSR_ACT_RELU,
     .bias = true, .res = 2, .off = 5},                                                     /* 7x7 out of 13x13 */
    {.N = 1, .C = 4, .H = 9, .W = 21, .K = 7, .R = 3, .S = 3, .scale = true, .bias = true, .res = 1,
     .off = 1},                                                                             /* unpadded */
    {.N = 3, .C = 4, .H = 3, .W = 5, .K = 7, .R = 1, .S = 1, .act = TSR_ACT_RELU, .res = 2},  /* 1x1 */
    /* 16-bit y: each run rounded and stored 8, 4, 2, 1 lanes at a time */
    {.N = 2, .C = 3, .H = 29, .W = 31, .K = 9, .R = 7, .S = 7, .st = 2, .pad = 3, .act = TSR_ACT_RELU,
     .scale = true, .bias = true, .res = 1, .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16, .rt = TSR_F16, .off = 3},
    {.N = 1, .C = 3, .H = 29, .W = 31, .K = 10, .R = 7, .S = 7, .st = 2, .pad = 3, .bias = true, .res = 2,
     .xt = TSR_BF16, .wt = TSR_BF16, .yt = TSR_BF16, .off = 1},
    {.N = 2, .C = 5, .H = 5, .W = 5, .K = 11, .R = 3, .S = 3, .pad = 1, .act = TSR_ACT_RELU, .scale = true,
     .res = 1, .xt = TSR_BF16, .wt = TSR_BF16, .yt = TSR_BF16, .rt = TSR_F32, .off = 2},
    {.N = 2, .C = 6, .H = 13, .W = 13, .K = 9, .R = 3, .S = 3, .st = 2, .pad = 1, .act = TSR_ACT_RELU,
     .bias = true, .res = 2, .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16, .off = 5},
};

static void stage2_row_runs(void **state) {
    (void)state;
    if (!cpu_forms_here()) {
        printf("# STAGE 2 is a CPU form: passed over\n");
        return;
    }
    const char *configs[] = {"ALGO=2 MWI=8 VW=16 STAGE=2 WGM=3 WGN=16", "ALGO=2 MWI=6 VW=16 STAGE=2 WGM=1 WGN=1"};
    for (size_t f = 0; f < 2; ++f) {
        if (th_small_mode() && f) break;
        if (!th_try_override(dev, "conv2d", configs[f])) continue;
        for (size_t i = 0; i < sizeof run_cases / sizeof run_cases[0]; ++i) {
            if (th_small_mode() && i % 3) continue;
            epi_data e;
            data_make(&run_cases[i], &e);
            check(&run_cases[i], &e, TSR_CONV_AUTO, configs[f]);
            check(&run_cases[i], &e, TSR_CONV_IMPLICIT, configs[f]);
            data_free(&e);
        }
        TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
    }
}

/* 1x1 layers over a batch, which the CPU's tiled GEMM runs as one GEMM across the images' columns
 * (cl/gemm_images.cl): images of 35, 49 and 25 pixels, so column tiles and vectors of 16 or 8 end
 * one image and start the next, and the last tile runs past the last column; the epilogue with y
 * itself or a residual of its own, 16-bit storage, a strided layer (its subsample is B), offsets
 * with guard zones. The automatic path and im2col + GEMM (the same GEMM). */
static const epi_case batch_cases[] = {
    {.N = 3, .C = 9, .H = 5, .W = 7, .K = 20, .R = 1, .S = 1, .act = TSR_ACT_RELU, .scale = true, .bias = true,
     .res = 2, .off = 3},
    {.N = 3, .C = 9, .H = 5, .W = 7, .K = 20, .R = 1, .S = 1, .act = TSR_ACT_GELU_TANH, .bias = true, .res = 1,
     .xt = TSR_F16, .wt = TSR_F16, .yt = TSR_F16, .rt = TSR_BF16, .off = 2},
    {.N = 4, .C = 16, .H = 7, .W = 7, .K = 40, .R = 1, .S = 1, .scale = true, .res = 1, .off = 1},
    {.N = 2, .C = 7, .H = 9, .W = 9, .K = 24, .R = 1, .S = 1, .st = 2, .act = TSR_ACT_RELU, .scale = true,
     .bias = true, .res = 1, .xt = TSR_BF16, .wt = TSR_BF16, .yt = TSR_F32, .rt = TSR_F16},
};

static void pointwise_batch(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof batch_cases / sizeof batch_cases[0]; ++i) {
        if (th_small_mode() && i > 0) break;
        epi_data e;
        data_make(&batch_cases[i], &e);
        check(&batch_cases[i], &e, TSR_CONV_AUTO, "built-in");
        check(&batch_cases[i], &e, TSR_CONV_IM2COL, "im2col");
        data_free(&e);
    }
}

/* The same GEMM across images with K in blocks (gemm_launch_images: a launch per KC = 128 k-steps,
 * each adding into y, the epilogue in the last): deep 1x1 layers (K = 300) and a 3x3 one by im2col
 * (K = 180), with y itself as the residual, a residual of its own, the scale in every block, and a
 * 16-bit y (one launch: no 16-bit partial sums), under forced GEMM configurations (16- and
 * 4-float vectors). */
static const epi_case deep_cases[] = {
    {.N = 3, .C = 300, .H = 5, .W = 7, .K = 20, .R = 1, .S = 1, .act = TSR_ACT_RELU, .scale = true, .bias = true,
     .res = 2, .off = 3},
    {.N = 2, .C = 20, .H = 7, .W = 7, .K = 24, .R = 3, .S = 3, .pad = 1, .act = TSR_ACT_GELU_TANH, .scale = true,
     .bias = true, .res = 1, .off = 1},
    {.N = 2, .C = 300, .H = 5, .W = 5, .K = 12, .R = 1, .S = 1, .bias = true, .res = 1, .xt = TSR_F16,
     .wt = TSR_F16, .yt = TSR_F16, .off = 2},
};

static void deep_k_blocks(void **state) {
    (void)state;
    static const char *const gemm_configs[] = {
        "MWI=8 VW=16 NVW=2 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1 NT=2 KC=128",
        "MWI=6 VW=4 NVW=2 KU=2 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1 NT=4 KC=128",
    };
    for (size_t g = 0; g < sizeof gemm_configs / sizeof *gemm_configs; ++g) {
        if (th_small_mode() && g > 0) break;
        if (!th_try_override(dev, "gemm", gemm_configs[g])) continue;
        for (size_t i = 0; i < sizeof deep_cases / sizeof deep_cases[0]; ++i) {
            if (th_small_mode() && i > 0) break;
            epi_data e;
            data_make(&deep_cases[i], &e);
            check(&deep_cases[i], &e, TSR_CONV_IM2COL, gemm_configs[g]);
            data_free(&e);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
}

/* Channels-last (TSR_NHWC x, y and residual; the reference reads the descriptor's layout): every
 * case above in NHWC, plus dilation, a strided depthwise layer and an odd batch, through the
 * automatic path, im2col, direct and the CPU forms (the NHWC call transposes around whichever
 * NCHW path runs). Small mode: one case on the automatic path. TSR_TEST_LONG=1 adds larger layers. */
static void channels_last(void **state) {
    (void)state;
    epi_case all[NCASES + 5];
    for (size_t i = 0; i < NCASES; ++i) all[i] = cases[i];
    all[NCASES] = (epi_case){.N = 3, .C = 4, .H = 9, .W = 11, .K = 6, .R = 3, .S = 3, .pad = 2, .dil = 2,
                             .act = TSR_ACT_RELU, .bias = true, .res = 1, .off = 2}; /* dilated */
    all[NCASES + 1] = (epi_case){.N = 2, .C = 12, .H = 13, .W = 17, .K = 12, .R = 3, .S = 3, .st = 2, .pad = 1,
                                 .G = 12, .scale = true, .bias = true, .res = 2, .xt = TSR_F16, .wt = TSR_F16,
                                 .yt = TSR_F16, .off = 3}; /* depthwise /2, 16-bit */
    all[NCASES + 2] = (epi_case){.N = 1, .C = 16, .H = 7, .W = 7, .K = 32, .R = 3, .S = 3, .pad = 1, .G = 16,
                                 .bias = true, .act = TSR_ACT_RELU, .off = 1}; /* depthwise multiplier 2 */
    /* STAGE 8's own NHWC kernel (vectors along channels): 16-channel vectors, and a 5x5 dilated
     * layer with 8-channel vectors and padding other than 1 */
    all[NCASES + 3] = (epi_case){.N = 2, .C = 32, .H = 7, .W = 9, .K = 32, .R = 3, .S = 3, .pad = 1, .G = 32,
                                 .scale = true, .bias = true, .act = TSR_ACT_RELU, .res = 1, .rt = TSR_BF16, .off = 2};
    all[NCASES + 4] = (epi_case){.N = 1, .C = 8, .H = 12, .W = 10, .K = 8, .R = 5, .S = 5, .pad = 3, .dil = 2,
                                 .G = 8, .bias = true, .act = TSR_ACT_GELU_TANH, .res = 2, .off = 1};
    const size_t nall = sizeof all / sizeof all[0];
    for (size_t i = 0; i < nall; ++i) all[i].layout = TSR_NHWC;
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; ++f) {
        if (forms[f].cpu_only && !cpu_forms_here()) continue;
        if (th_small_mode() && f != 0) continue;
        if (forms[f].config && !th_try_override(dev, "conv2d", forms[f].config)) continue;
        for (size_t i = 0; i < nall; ++i) {
            /* small mode: the strided 16-bit depthwise layer with y as its residual (under
             * Oclgrind this case and case 1 each run clean alone; run one after the other,
             * Oclgrind reports uninitialized loads of the NCHW copy in the second) */
            if (th_small_mode() && i != NCASES + 1) continue;
            epi_data e;
            data_make(&all[i], &e);
            check(&all[i], &e, forms[f].algo, forms[f].config ? forms[f].config : "built-in");
            data_free(&e);
        }
        if (forms[f].config) TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
    }
    if (!th_long_mode()) return;
    /* TSR_TEST_LONG=1: MobileNet-sized depthwise layers and a ResNet-like 3x3 in NHWC, batch 1
     * and 4, on the automatic path */
    const epi_case big[] = {
        {.N = 4, .C = 96, .H = 28, .W = 28, .K = 96, .R = 3, .S = 3, .st = 2, .pad = 1, .G = 96, .bias = true,
         .act = TSR_ACT_RELU, .res = 0, .layout = TSR_NHWC},
        {.N = 1, .C = 144, .H = 56, .W = 56, .K = 144, .R = 3, .S = 3, .pad = 1, .G = 144, .scale = true,
         .bias = true, .res = 2, .layout = TSR_NHWC, .off = 3},
        {.N = 4, .C = 32, .H = 14, .W = 14, .K = 48, .R = 3, .S = 3, .pad = 1, .bias = true, .res = 1,
         .rt = TSR_BF16, .xt = TSR_BF16, .wt = TSR_BF16, .layout = TSR_NHWC},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; ++i) {
        epi_data e;
        data_make(&big[i], &e);
        check(&big[i], &e, TSR_CONV_AUTO, "built-in (long)");
        data_free(&e);
    }
}

/* Refusals name what is wrong and write nothing. */
static void refusals(void **state) {
    (void)state;
    const epi_case c = {.N = 1, .C = 4, .H = 6, .W = 6, .K = 4, .R = 3, .S = 3, .pad = 1, .scale = true,
                        .bias = true, .res = 1, .yt = TSR_F16, .rt = TSR_F16};
    epi_data e;
    data_make(&c, &e);
    th_poison(e.y, e.ny);
    TH_ASSERT_OK(tsr_upload_typed(dev, e.dy, c.yt, e.y, e.ny));
    const tsr_conv2d_desc ok = e.d;
    tsr_conv2d_desc d = ok;
    /* a residual one element short, in its own type's elements (f16: fp32's count would pass) */
    cl_mem short_res = th_buffer_typed(dev, TSR_F16, e.ny - 1);
    d.epilogue.residual = short_res, d.epilogue.residual_offset = 0;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, e.dw, e.dy, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "residual");
    d = ok, d.epilogue.residual_type = (tsr_dtype)5;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, e.dw, e.dy, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "residual_type");
    size_t h, w;
    TH_ASSERT_STATUS(tsr_conv2d_output_size(&d, &h, &w), TSR_ERR_INVALID_ARG);
    d = ok, d.epilogue.scale_offset = 1; /* K + 1 floats past the start of a K-float buffer */
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, e.dw, e.dy, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "scale");
    d = ok, d.epilogue.scale_stride = 4;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, e.dw, e.dy, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "scale_stride");
    /* the epilogue's LayerNorm is GEMM's only */
    d = ok, d.epilogue.norm_gamma = d.epilogue.norm_beta = e.dw, d.epilogue.norm_eps = 1e-5f;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, e.dw, e.dy, NULL, NULL), TSR_ERR_UNSUPPORTED);
    TH_ASSERT_CONTAINS(tsr_last_error(), "LayerNorm");
    /* the residual partly over y (one element on), over y in another type, over x, over w */
    cl_mem both = th_buffer_typed(dev, TSR_F16, 2 * e.ny + 8);
    d = ok, d.y_offset = 0, d.epilogue.residual = both, d.epilogue.residual_offset = 1;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, e.dw, both, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "residual");
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlap");
    d.epilogue.residual_offset = 0, d.epilogue.residual_type = TSR_BF16;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, e.dw, both, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlap");
    cl_mem big_x = th_buffer(dev, e.nx + e.ny); /* x and an fp32 residual in one buffer, one float shared */
    d = ok, d.x_offset = 0, d.epilogue.residual = big_x, d.epilogue.residual_type = TSR_F32;
    d.epilogue.residual_offset = e.nx - 1;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, big_x, e.dw, e.dy, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlaps x");
    cl_mem big_w = th_buffer(dev, e.nw + e.ny);
    d = ok, d.w_offset = 0, d.epilogue.residual = big_w, d.epilogue.residual_type = TSR_F32;
    d.epilogue.residual_offset = 0;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, big_w, e.dy, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlaps w");
    /* a layout outside tsr_tensor_layout */
    d = ok, d.layout = (tsr_tensor_layout)2;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, e.dw, e.dy, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "layout");
    TH_ASSERT_STATUS(tsr_conv2d_output_size(&d, &h, &w), TSR_ERR_INVALID_ARG);
    d.layout = (tsr_tensor_layout)-1;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, e.dw, e.dy, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "layout");
    /* NHWC: the same size checks (a residual one element short) */
    d = ok, d.layout = TSR_NHWC, d.epilogue.residual = short_res, d.epilogue.residual_offset = 0;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, e.dw, e.dy, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    /* the scale over y */
    d = ok, d.epilogue.scale = e.dy, d.epilogue.scale_offset = 0;
    TH_ASSERT_STATUS(tsr_conv2d(dev, &d, e.dx, e.dw, e.dy, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "scale");
    clFinish(tsr_device_queue(dev));
    th_read_typed(dev, c.yt, e.dy, e.y, e.ny);
    for (size_t i = 0; i < e.ny; ++i)
        if (!isnan(e.y[i])) fail_msg("a refused call wrote y[%zu] = %g", i, e.y[i]);
    /* y at exactly the residual's bytes in its type: in place, accepted, and y = the epilogue over
     * the residual that was there */
    TH_ASSERT_OK(tsr_upload_typed(dev, both, TSR_F16, e.res + c.off, e.ny));
    d = ok, d.y_offset = 0, d.epilogue.residual = both, d.epilogue.residual_offset = 0;
    TH_ASSERT_OK(tsr_conv2d(dev, &d, e.dx, e.dw, both, NULL, NULL));
    th_read_typed(dev, TSR_F16, both, e.y, e.ny);
    double err = tsr_rel_error(e.y, e.ref, e.ny), tol = tsr_dtype_error_bound(TSR_F16, 36.0);
    if (!(err <= tol)) fail_msg("in place: relative error %.3e > %.3e", err, tol);
    clReleaseMemObject(short_res), clReleaseMemObject(both), clReleaseMemObject(big_x), clReleaseMemObject(big_w);
    data_free(&e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_form),
        cmocka_unit_test(depthwise_planes),
        cmocka_unit_test(stage2_row_runs),
        cmocka_unit_test(channels_last),
        cmocka_unit_test(pointwise_batch),
        cmocka_unit_test(deep_k_blocks),
        cmocka_unit_test(refusals),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
