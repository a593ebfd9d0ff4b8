/* The conv2d op: descriptor validation, the three paths of cl/conv.cl (im2col + tessera GEMM,
 * implicit GEMM, naive direct), per-class choice between them, and tuning. */
#include "internal.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The tuning parameters, X(NAME, KIND, DEFAULT, values...): see TSR_PARAM_DEF. ALGO selects the
 * implementation TSR_CONV_AUTO takes (conv_implementations); the rest shape the implicit kernel
 * (the im2col path's GEMM has its own tuned configuration). */
#define CONV_PARAMS(X)                                                                          \
    X(ALGO, HOST, TSR_CONV_IM2COL, TSR_CONV_IM2COL, TSR_CONV_IMPLICIT, TSR_CONV_DIRECT)         \
    X(MWI, DEFINE, 1, 1, 2, 4, 6, 8)  /* output channels per work-item (STAGE 3: output rows) */                      \
    X(VW, DEFINE, 1, 1, 2, 4, 8, 16)  /* pixels per work-item (a vector) */                    \
    X(STAGE, DEFINE, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9) /* 1: local-memory tiles, 2: padded input, 3: row per item, 4: depthwise tiles, 5: channel vectors, 6, 7: Winograd F(2x2, 3x3), F(4x4, 3x3), 8: depthwise 3x3 row strips, 9: Winograd F(2x2) fused */ \
    X(WGM, DEFINE, 1, 1, 2, 3, 4, 6, 8, 12, 16) /* work-group size along channels; STAGE 2: vectors per item, 5: pixels */ \
    X(WGN, DEFINE, 1, 1, 2, 4, 8, 16) /* work-group size along pixels */                       \
    X(KWG, DEFINE, 8, 8, 16, 32)      /* reduction steps per staged tile (only with STAGE) */

enum { CONV_PARAMS(TSR_PARAM_INDEX) CONV_NPARAMS };
static const tsr_param_def conv_params[] = {CONV_PARAMS(TSR_PARAM_DEF)};

/* The CPU forms (padded implicit, depthwise) are built from conv_cpu.cl, the Winograd form (STAGE 6)
 * from conv_winograd.cl. */
static const char *const conv_more_sources[] = {"conv_cpu", "conv_winograd", NULL};
/* The fp32 classes; each has its 16-bit twins ("3x3-f16", TSR_CLASSES_PER_TYPE: by x, w and y's
 * types), which take their fp32 class's configuration until tuned themselves. */
static const char *const conv_classes[] = {"3x3",   "1x1",         "strided",   "depthwise", "other",
                                           "1x1-strided", "1x1-small", "1x1-expand", "stem",     "3x3-small",
                                           "strided-small", "1x1-strided-small", "1x1-mid", "3x3-wide",
                                           "3x3-mid", "strided-mid", "1x1-strided-mid", "3x3-small-wino", NULL};

/* Column matrices tessera's own workspace holds at most: on CPUs what stays in a last-level
 * cache between the im2col and the GEMM that reads it back (ResNet-50's 56x56 3x3 at batch 8 on
 * PoCL, three interleaved runs each: 85-98 GFLOP/s in 8 MiB chunks, 73-84 with the whole
 * batch's 58 MB at once); on GPUs enough images for one GEMM to fill the device. */
static size_t workspace_cap(const tsr_device *dev) {
    return dev->info.type == TSR_DEVICE_CPU ? (size_t)8 << 20 : (size_t)64 << 20;
}

/* A validated call. */
typedef struct conv_problem {
    size_t N, C, H, W, K, R, S, P, Q, sh, sw, ph, pw, dh, dw, G;
    size_t Cg, Kg, CRS, PQ;
    int act;
    size_t x_off, w_off, b_off, y_off; /* in elements of each tensor's type */
    size_t s_off, r_off;               /* the scale's (floats) and the residual's (its type) */
    tsr_dtype types[3];                /* x, w, y (the bias and scale are fp32) */
    tsr_dtype r_type;                  /* the residual's */
    cl_mem x, w, bias, y;
    cl_mem scale, res;                 /* NULL: none */
    cl_mem ws;          /* the caller's workspace, or NULL */
    size_t ws_bytes;
    tsr_conv_algo algo; /* as asked: AUTO or a forced path */
    tsr_tensor_layout layout; /* of x, y and the residual (the kernels see NCHW: conv_channels_last) */
} conv_problem;

/* A 1x1 convolution with unit stride and no padding reads x as it is: the GEMM's B. */
static bool is_pointwise(const conv_problem *p) {
    return p->R == 1 && p->S == 1 && p->sh == 1 && p->sw == 1 && p->ph == 0 && p->pw == 0;
}

/* A 1x1 call small enough for the 1x1-small classes: at most 512 output pixels, or planes of at most
 * 256 output pixels up to 2048 in the call (14x14 up to batch 10, 7x7 up to 41). On a Zen 5 EPYC
 * STAGE 5's 4 x 16 x 6 tile took 3-15% less CPU time than im2col on ResNet-50's 14x14 1x1 layers at
 * batch 4 and 8 (784 and 1568 pixels) and 20-50% less on the 7x7 ones up to batch 16 (784), but up
 * to 1.7x more at batch 16 on 14x14 (3136), where each block of output channels streams x again
 * from the last-level cache (session 26, docs/conv.md). */
static bool small_pointwise_call(const conv_problem *p) {
    return p->N * p->PQ <= 512 || (p->PQ <= 256 && p->N * p->PQ <= 2048);
}

/* The stride-1 part of those above 512 pixels (ResNet-50's 14x14 layers at batch 3-10), a class of
 * its own since session 27 (1x1-mid, tuned on 8x1024x14x14 k256, taking 1x1-small's entry until a
 * database has one): the two AVX-512 CPUs we measured disagree there. On the Zen 5 STAGE 5's tile
 * took 3-15% less CPU time than im2col at batch 4 and 8; on a 2-core Cascade Lake Xeon it took
 * 1.4-2.7x im2col's at batch 8 (l3.reduce1024, l4.reduce1024, l3.expand: 65-137 against 175-185
 * GFLOP/s, docs/conv.md "Session 27") while still winning at 7x7 and at batch 1. */
static bool mid_pointwise_call(const conv_problem *p) { return p->N * p->PQ > 512 && small_pointwise_call(p); }

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* Tiles (wm x wm output blocks: 2 for F(2x2, 3x3), 4 for F(4x4, 3x3)) of one image. */
static size_t winograd_tiles(const conv_problem *p, size_t wm) { return ceil_div(p->P, wm) * ceil_div(p->Q, wm); }

/* F(4x4) takes planes with at least this many of its tiles per image (ResNet-50's 56x56 layers:
 * 196), F(2x2) the others. Where the configuration's WGN is not 1, a chunk's GEMMs (their n
 * columns) need at least WINO_MIN_TILES tiles, else the built-in STAGE 2 form runs: the weights'
 * transform (16 or 36 K C values written per call) and GEMMs of few columns cost more than the
 * products saved. On the loaded 2-core Zen 5 of session 19 (docs/conv.md) F(2x2) won on the 28x28
 * layer (196 tiles) and the 14x14 one at batch 8 in chunks of 2 images (98 tiles: 1.15-1.35x the
 * STAGE 2 form), lost on 14x14 at batch 1 (49 tiles: 0.91-0.99x) and 7x7 (16-48: 0.27-0.88x);
 * F(4x4) won on 56x56 (196 tiles an image) and lost on 28x28 (49 an image) at either batch.
 * conv_base_index's 3x3-wide class is the planes of at least WINO_F4_TILES F(4x4) tiles, its 3x3-mid
 * the small calls of at least WINO_MIN_TILES F(2x2) tiles (launch_winograd's own tests). */
#define WINO_F4_TILES 192
#define WINO_MIN_TILES 96
/* conv_base_index's 3x3-small-wino class: the small calls of at least this many F(2x2) tiles (two
 * of the fused form's 16-tile blocks: ResNet-50's 14x14 layer at batch 1, 7x7 from batch 2). */
#define WINO_SMALL_TILES 32

/* Index of the layer's fp32 class in conv_classes. */
static int conv_base_index(const conv_problem *p) {
    if (p->Cg == 1 && p->G > 1) return 3;
    /* 1x1: a GEMM on x itself; strided, a GEMM on a subsample of x, a class of its own: the
     * implicit STAGE=0 form a stride-1 1x1 layer tunes to ran ResNet-50's downsample layers at
     * batch 8 at 0.19-0.40x PyTorch on a Zen 5 EPYC, im2col at 0.92-1.01x (docs/conv.md). */
    /* Small calls (small_pointwise_call: ResNet-50's 28x28/2 downsample up to batch 10, 14x14/2 up to
     * batch 41), a class of their own tuned on 1x1024x14x14 k2048 1x1/2: on a Zen 5 EPYC the
     * channel-vector form (STAGE 5, 4 x 16 channels x 6 pixels, x read in place at the strides) ran
     * them with 6-50% less CPU time than im2col at batch 1, 4 and 8 (session 26, docs/conv.md). */
    /* Those of them with more than 512 output pixels in the call (28x28/2 from batch 3, 14x14/2 from
     * batch 11), a class of their own since session 36 (1x1-strided-mid, tuned on 8x512x28x28 k1024
     * 1x1/2, taking 1x1-strided-small's entry until a database has one), as 1x1-mid is for stride 1:
     * on a 2-core Zen 4 (conv1x1_gemm, one process, 9 rounds) im2col ran 8x512x28x28/2 at 1.12x
     * STAGE 5's rate and 16x1024x14x14/2 at 1.26x, while STAGE 5 kept the 14x14/2 layer at batch 4
     * and 8 (1.2x, 1.13x: 196 and 392 pixels). */
    if (p->R == 1 && p->S == 1 && (p->sh > 1 || p->sw > 1))
        return mid_pointwise_call(p) ? 16 : small_pointwise_call(p) ? 11 : 5;
    /* Stride-1 1x1 layers with few output pixels in the call (small_pointwise_call since session 26;
     * before, at most 512: ResNet-50's 14x14 layers at batch 1 and 2, 7x7 up to batch 10), a class of
     * their own tuned on 1x2048x7x7 k512
     * (1x1024x14x14 k256 until session 26: the same work, but its tune could not see that a tile
     * of 6 x 16 channels x 3 pixels reads the 2048-deep layer's 4 MB of weights twice as often as
     * 4 x 16 x 6 and took 1.6x its CPU time at batch 1, 2.4x at batch 8). On a Zen 5 EPYC im2col (the GEMM on x itself, across the images' pixels for a batch)
     * ran them 1.1-1.4x faster than the implicit STAGE=0 form at batch 1 and 1.15-1.4x at batch 8.
     * Until session 22 the class took every plane of at most 256 pixels at any batch; its entry on
     * the Zen 5 is the channel-vector form (STAGE 5) tuned at batch 1, which at batch 8 took
     * 1.3-1.6x im2col's CPU time on the 14x14 layers (docs/conv.md, "Session 22"): the GEMM's rows
     * are the call's pixels, so the call's pixel count, not the plane's, sorts the layer. Larger
     * calls: the layers with at least as many output as input channels (1x1-expand, tuned on
     * 1x128x28x28 k512: im2col 1.1-1.6x faster than STAGE=0 at batch 1 and 8) apart from the
     * reducing ones (1x1, tuned on 1x512x28x28 k128, where STAGE=0 won or tied at 56x56 and
     * 28x28); docs/conv.md. */
    if (p->R == 1 && p->S == 1) return mid_pointwise_call(p) ? 12 : small_pointwise_call(p) ? 6 : p->Kg >= p->Cg ? 7 : 1;
    /* Strided layers on at most 4 input channels a group (a network's first layer on an RGB or
     * grey image: ResNet-50's conv1, 7x7/2 on 3 channels), tuned on that layer: the 3x3/2
     * layers' tuned tile (4 channels x 3 vectors, one tile a work-group on the Zen 5) ran it at
     * 0.86x the AVX-512 default's 8 x 3, 16 tiles a group (session 19, docs/conv.md). */
    if ((p->sh > 1 || p->sw > 1) && p->Cg <= 4) return 8;
    /* The other strided layers with at most 512 output pixels in the call (ResNet-50's 28x28/2 at
     * batch 1 and 2, 14x14/2 up to batch 10), a class of their own tuned on 1x256x28x28 k256 3x3/2:
     * on a Zen 5 EPYC the channel-vector form (STAGE 5, 4 x 16 channels x 6 pixels, weights kept)
     * ran them with 3-8% less CPU time than the padded form's 8 x 3 tile the strided class tunes to
     * (session 25, docs/conv.md). Since session 26 also output planes of at most 256 pixels at any
     * batch (28x28/2 at batch 3 and up, 14x14/2 at 11 and up): its entry's tile (4 tiles a
     * work-group) ran the 28x28/2 layer at batch 2, 4 and 8 with 0.89-0.93x the strided entry's CPU
     * time, where the tile session 25 tried there (16 tiles a group) lost. */
    /* Those of them with more than 256 output pixels in the call (28x28/2 from batch 2, 14x14/2 from
     * batch 6) are a class of their own since session 34 (strided-mid, tuned on 8x512x14x14 k512 3x3/2,
     * taking strided-small's entry until a database has one): the batch-1 fixture cannot see that
     * im2col + GEMM pays there. On the 2-core Cascade Lake Xeon (conv3x3_ab, both in one process,
     * 9 rounds) im2col ran 28x28/2 and 14x14/2 at batch 4, 8 and 16 at 1.08-1.26x the speed of the
     * padded form strided-small tunes to, level with it at batch 1 (docs/conv.md "Session 34"). */
    if (p->sh > 1 || p->sw > 1) {
        if (p->N * p->PQ <= 256) return 10;
        return p->N * p->PQ <= 512 || p->PQ <= 256 ? 15 : 2;
    }
    if (p->R == 3 && p->S == 3) {
        if (p->dh != 1 || p->dw != 1) return 0;
        /* Stride-1 3x3 layers with at most 512 output pixels in the call (ResNet-50's 14x14 at batch 1
         * and 2, 7x7 up to batch 8), a class of their own tuned on 1x512x7x7 k512 (1x256x14x14 k256
         * until session 25): the Winograd
         * forms the 3x3 class tunes to on an AVX-512 Zen 5 have too few tiles there to pay, and
         * before this class such layers fell back to the untuned built-in STAGE 2 form (session 19).
         * Those with at least 96 F(2x2) tiles in the call (WINO_MIN_TILES: 7x7 from batch 6, 14x14 from
         * batch 2) are a class of their own since session 28 (3x3-mid, tuned on 8x512x7x7 k512, taking
         * 3x3-small's entry until a database has one): the batch-1 fixture cannot see that Winograd
         * F(2x2) pays there, and on a 2-core Cascade Lake Xeon it ran 8x512x7x7 k512 at 118 GFLOP/s
         * against 92 for the STAGE 2 tile 3x3-small tunes to (docs/conv.md "Session 28"). */
        /* The rest of them with at least 32 F(2x2) tiles (WINO_SMALL_TILES: 14x14 at batch 1, 7x7 from
         * batch 2) are a class of their own since session 37 (3x3-small-wino, tuned on 1x256x14x14
         * k256, taking 3x3-small's entry until a database has one): with kept weights the fused
         * Winograd form (STAGE 9) ran 1x256x14x14 at 1.30x and 2x512x7x7 at 1.17x 3x3-small's STAGE 5
         * entry on a 2-core Zen 4, and 1x512x7x7 (16 tiles: one work-item) at 0.55x (docs/conv.md). */
        if (p->N * p->PQ <= 512) {
            const size_t tiles = p->N * winograd_tiles(p, 2);
            return tiles >= WINO_MIN_TILES ? 14 : tiles >= WINO_SMALL_TILES ? 17 : 9;
        }
        /* Stride-1 3x3 layers on planes of at least 192 F(4x4) tiles (56x56 and up: ResNet-50's first
         * stage), a class of their own since session 28 (3x3-wide, tuned on 1x64x56x56 k64, taking
         * 3x3's entry until a database has one): the Winograd entry 3x3 tunes to on AVX-512 runs F(4x4)
         * there (launch_winograd) and F(2x2) on the 28x28 layer it is tuned on. On a 2-core Cascade
         * Lake Xeon F(4x4) ran the 56x56 layer at 69-78 GFLOP/s against 89-100 for the padded form's
         * 4 x 6 tile its tune picked (batch 1 and 8), while Winograd F(2x2) kept the 28x28 and 14x14
         * layers at batch 8 (141 and 127 against 112-122 for the direct forms; docs/conv.md "Session 28"). */
        return winograd_tiles(p, 4) >= WINO_F4_TILES ? 13 : 0;
    }
    return 4;
}

static const char *conv_base_class(const conv_problem *p) { return conv_classes[conv_base_index(p)]; }

/* Classes split from an older one take its entry until a database has one of their own, so a
 * device tuned before the split (the H100's and the AVX2 EPYC's 1x1 and strided entries) keeps the
 * configuration it ran those layers with rather than falling to an untuned default: 1x1-expand
 * came out of 1x1, stem out of strided and 3x3-small out of 3x3 (session 19), strided-small out of
 * strided (session 25), 1x1-strided-small out of 1x1-strided (session 26), 1x1-mid out of 1x1-small
 * (session 27), 3x3-wide out of 3x3 and 3x3-mid out of 3x3-small (session 28), strided-mid out of
 * strided-small (session 34), 1x1-strided-mid out of 1x1-strided-small (session 36), 3x3-small-wino out
 * of 3x3-small (session 37). */
static const char *conv_nearest_class(const char *cls) {
    if (strcmp(cls, "1x1-expand") == 0) return "1x1";
    if (strcmp(cls, "3x3-small") == 0) return "3x3";
    if (strcmp(cls, "1x1-strided-small") == 0) return "1x1-strided";
    if (strcmp(cls, "1x1-mid") == 0) return "1x1-small";
    if (strcmp(cls, "3x3-wide") == 0) return "3x3";
    if (strcmp(cls, "3x3-mid") == 0) return "3x3-small";
    if (strcmp(cls, "strided-mid") == 0) return "strided-small";
    if (strcmp(cls, "1x1-strided-mid") == 0) return "1x1-strided-small";
    if (strcmp(cls, "3x3-small-wino") == 0) return "3x3-small";
    return strcmp(cls, "stem") == 0 || strcmp(cls, "strided-small") == 0 ? "strided" : NULL;
}

static const char *conv_problem_class(const void *problem) {
    const conv_problem *p = problem;
    return tsr_op_class(&tsr_op_conv, conv_base_index(p), p->types, 3);
}

/* Built-in configurations. CPUs: the GEMM behind im2col is tessera's best-tuned kernel; depthwise
 * layers have one channel per group, far too little work per GEMM, so they go implicit. GPUs:
 * implicit, which saves the column matrix's round trip through memory. The implicit kernel's
 * shape on CPUs: one work-item per group, a register tile of channels x pixels along an output
 * row (one float per pixel for depthwise layers, which have a single channel per group); on
 * GPUs: 16x16 work-groups sharing staged tiles. ALGO: 1 im2col, 2 implicit, 3 direct. */
static const tsr_default conv_defaults[] = {
    /* CPUs that vectorize across work-items (llvmpipe): the direct kernel, one light work-item
     * per output, compiles fastest there and ran 16-channel 16x16 layers fastest (0.1 s against
     * 0.2-0.5 s for im2col + GEMM). The two rows after it shape the other paths when forced. */
    {TSR_DEVICE_CPU, TSR_LANES_ACROSS_ITEMS, NULL, "ALGO=3"},
    {TSR_DEVICE_CPU, TSR_LANES_ACROSS_ITEMS, NULL, "ALGO=2 MWI=2 VW=1 STAGE=0 WGM=8 WGN=8 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_ACROSS_ITEMS, NULL, "ALGO=1"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "depthwise", "ALGO=2 MWI=4 VW=16 STAGE=8 WGM=1 WGN=16 KWG=8"},
    /* 16-float vectors (AVX-512: 32 registers): the padded form with 8 channels x 3 vectors of
     * pixels per work-item (24 accumulators, 8 FMA chains per weight; STAGE 2's WGM is its vectors
     * per item), against one vector on AVX2's 16 registers. On a loaded 2-core Skylake-AVX512
     * (process CPU time, side by side) it ran ResNet-50's 3x3 layers at 0.9-1.6x the 6 x 1 tile
     * depending on the load: not settled; a quiet tune (its space holds WGM 1-4) decides. */
    /* The stride-1 3x3 layers of the 3x3 and 3x3-wide classes (28x28 and 56x56 planes, or calls
     * of more than 512 pixels): the fused Winograd F(2x2) form, 8 output channels x 16 tiles a
     * register tile. On a 2-core AVX-512 Zen 4 (session 37's tune, the class's fixture and its
     * batch-8 second problem) it ran 1x128x28x28 at 3.1x this STAGE 2 tile and 1x64x56x56 at 2.5x;
     * layers whose V does not fit local memory run 3x3-small's STAGE 2 tile (launch_winograd). */
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "3x3", "ALGO=2 MWI=8 STAGE=9 WGM=1 WGN=1"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "3x3-small", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=3 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "3x3-wide", "ALGO=2 MWI=8 STAGE=9 WGM=1 WGN=1"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "3x3-mid", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=3 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "strided", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=3 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "stem", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=3 WGN=16 KWG=8"},
    /* strided-small: the strided class's tile until tuned (its Zen 5 winner, STAGE 5's 4 x 16 x 6, leaves a
     * partial override such as MWI=8 illegal: 48 accumulators) */
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "strided-small", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=3 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "strided-mid", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=3 WGN=16 KWG=8"},
    /* 1x1 layers with few output pixels in the call (small_pointwise_call): STAGE 5's 4 x 16 channels x
     * 6 pixels (24 accumulators), which on a Zen 5 EPYC took 6-50% less CPU time than im2col or the
     * 6 x 16 x 3 tile at batch 1, 2, 4 and 8, the 2048-deep 7x7 layer most (session 26, docs/conv.md).
     * A partial override such as MWI=8 then needs its WGM too (48 accumulators are illegal), as on a
     * device whose tuned entry is this tile. */
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "1x1-small", "ALGO=2 MWI=4 VW=16 STAGE=5 WGM=6 WGN=1 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "1x1-strided-small", "ALGO=2 MWI=4 VW=16 STAGE=5 WGM=6 WGN=1 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "1x1-strided-mid", "ALGO=2 MWI=4 VW=16 STAGE=5 WGM=6 WGN=1 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "3x3", "ALGO=2 MWI=6 VW=16 STAGE=2 WGM=1 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "3x3-small", "ALGO=2 MWI=6 VW=16 STAGE=2 WGM=1 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "3x3-wide", "ALGO=2 MWI=6 VW=16 STAGE=2 WGM=1 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "3x3-mid", "ALGO=2 MWI=6 VW=16 STAGE=2 WGM=1 WGN=16 KWG=8"},
    /* Strided layers (conv1's 7x7/2, 3x3/2): the padded form's polyphase copy, eight channels a
     * tile (32 vector registers on AVX-512; conv1's 64 channels in whole tiles). Kernel sizes it
     * does not compile in take im2col + GEMM. 1x1 layers (any stride): im2col + GEMM below. */
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "strided", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=1 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "stem", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=1 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "strided-small", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=1 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "strided-mid", "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=1 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, NULL, "ALGO=1"},
    /* Never a CPU default (the row above matches first): the implicit path's shape there when
     * a call forces it or a search seeds it. */
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, NULL, "ALGO=2 MWI=8 VW=16 STAGE=2 WGM=3 WGN=16 KWG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, NULL, "ALGO=2 MWI=6 VW=16 STAGE=2 WGM=1 WGN=16 KWG=8"},
    {0, TSR_LANES_ANY, NULL, "ALGO=2 MWI=4 VW=4 STAGE=1 WGM=16 WGN=16 KWG=16"},
};

/* The implicit kernel's shape when its built-in one is not legal on a device (e.g. one with a
 * small work-group limit). */
static const char implicit_fallback[] = "MWI=4 VW=4 STAGE=0 WGM=1 WGN=1 KWG=8";

/* Within the implicit kernel KWG only shapes staging: one value without it, so searches see no
 * duplicates. (The parameters the other paths do not read are reset generically.) */
static void conv_normalize(tsr_config *cfg) {
    if (cfg->values[P_ALGO] == TSR_CONV_IMPLICIT && cfg->values[P_STAGE] != 1)
        cfg->values[P_KWG] = conv_params[P_KWG].default_value;
    /* The row forms have no work-group extent along channels (the padded form, STAGE 2, reads
     * WGM as its pixel vectors per work-item). */
    if (cfg->values[P_ALGO] == TSR_CONV_IMPLICIT &&
        (cfg->values[P_STAGE] == 3 || cfg->values[P_STAGE] == 4 || cfg->values[P_STAGE] == 8))
        cfg->values[P_WGM] = conv_params[P_WGM].default_value;
    /* The Winograd forms' tiles are fixed (their GEMMs take GEMM's own configuration); WGN says
     * whether a layer with few tiles runs them anyway (1) or not (16: launch_winograd). */
    if (cfg->values[P_ALGO] == TSR_CONV_IMPLICIT && (cfg->values[P_STAGE] == 6 || cfg->values[P_STAGE] == 7))
        for (int i = 0; i < CONV_NPARAMS; ++i) {
            if (i == P_WGN) cfg->values[i] = cfg->values[i] == 1 ? 1 : 16;
            else if (i != P_ALGO && i != P_STAGE) cfg->values[i] = conv_params[i].default_value;
        }
    /* The fused form (STAGE 9) reads MWI (output channels in registers), WGM (vectors of 16 tiles)
     * and WGN (work-items sharing a block's output channels) only. */
    if (cfg->values[P_ALGO] == TSR_CONV_IMPLICIT && cfg->values[P_STAGE] == 9)
        cfg->values[P_VW] = conv_params[P_VW].default_value, cfg->values[P_KWG] = conv_params[P_KWG].default_value;
}

static bool conv_config_ok(const tsr_device *dev, const void *problem, const tsr_config *cfg) {
    const int *v = cfg->values;
    /* Parameters a path does not read hold their declared default: one configuration per behaviour. */
    if (!tsr_op_is_normal(&tsr_op_conv, cfg)) return false;
    if (v[P_ALGO] != TSR_CONV_IMPLICIT) return true;
    if (v[P_MWI] * v[P_VW] > 128) return false; /* beyond this the tile spills on every device we know */
    /* The padded and row-per-item forms are written for CPUs that vectorize within a work-item. */
    if (v[P_STAGE] >= 2 &&
        (dev->info.type != TSR_DEVICE_CPU || tsr_device_lanes(&dev->info) == TSR_LANES_ACROSS_ITEMS))
        return false;
    const conv_problem *p = problem;
    if ((v[P_STAGE] == 3 || v[P_STAGE] == 4 || v[P_STAGE] == 8) && p && p->N * p->K > INT_MAX)
        return false; /* the kernel's plane index is an int */
    /* llvmpipe-like CPUs (lanes across work-items) compile big per-item tiles for minutes. */
    if (dev->info.type == TSR_DEVICE_CPU && tsr_device_lanes(&dev->info) == TSR_LANES_ACROSS_ITEMS &&
        v[P_MWI] * v[P_VW] > 16)
        return false;
    /* STAGE 2's WGM is its tile's pixel vectors: MWI WGM vector accumulators (32 vector registers
     * on AVX-512 hold 24 and the loads); elsewhere a work-group extent, never 3. */
    /* STAGE 5's WGM is its pixels per work-item: WGM x MWI vector accumulators, as many. */
    /* STAGE 9's WGM is its vectors of 16 tiles (1 or 2): MWI WGM accumulators (tile_wgm below). */
    if (v[P_STAGE] == 9 && v[P_WGM] > 2) return false;
    const bool tile_wgm = v[P_STAGE] == 2 || v[P_STAGE] == 5 || v[P_STAGE] == 9;
    if (tile_wgm && v[P_MWI] * v[P_WGM] > 24) return false;
    if (!tile_wgm && (v[P_WGM] == 3 || v[P_WGM] == 6 || v[P_WGM] == 12)) return false;
    size_t wgm = tile_wgm ? 1 : (size_t)v[P_WGM], wg = wgm * (size_t)v[P_WGN];
    if (wg > dev->info.max_work_group_size || wgm > dev->info.max_work_item_sizes[0] ||
        (size_t)v[P_WGN] > dev->info.max_work_item_sizes[1])
        return false;
    if (v[P_STAGE] != 1) return true;
    size_t local = (size_t)v[P_KWG] * ((size_t)v[P_WGM] * v[P_MWI] + (size_t)v[P_WGN] * v[P_VW]) * sizeof(float);
    return local <= dev->info.local_mem_bytes;
}

/* Program variants: the CPU forms (STAGE 2, 3) are also built with the kernel size compiled in
 * for square kernels up to 3x3 (kernel_size_options): variant % 4 = k in 1..3 is KR = KS = k, 0
 * none. variant / 4 picks the storage set of x, w (its inputs) and y (tsr_dtype_storage_set): the
 * ones build-binaries prepares (fp32, each 16-bit type throughout, 16-bit inputs with an fp32
 * output); other combinations build on first use. */
#define CONV_KERNEL_SIZE_VARIANTS 4
#define CONV_PROGRAM_VARIANTS (CONV_KERNEL_SIZE_VARIANTS * TSR_STORAGE_SETS)

static void conv_variant_types(int program_variant, tsr_dtype types[3]) {
    tsr_dtype_storage_set(program_variant / CONV_KERNEL_SIZE_VARIANTS, &types[0], &types[2]);
    types[1] = types[0];
}

/* -DX_TYPE=... for the tensors that are not fp32 (fp32 programs keep their options). The im2col
 * path's program runs only the im2col kernel, which reads x alone: X_TYPE only. */
static void type_options(const tsr_config *cfg, const tsr_dtype types[3], char *out, size_t size) {
    static const char *const names[3] = {"X_TYPE", "W_TYPE", "Y_TYPE"};
    for (int i = 0; i < (cfg->values[P_ALGO] == TSR_CONV_IM2COL ? 1 : 3); ++i) {
        size_t len = strlen(out);
        if (types[i] != TSR_F32 && len < size) snprintf(out + len, size - len, " -D%s=%d", names[i], (int)types[i]);
    }
}

static void conv_build_options(const tsr_config *cfg, int program_variant, char *out, size_t size) {
    int ks = program_variant % CONV_KERNEL_SIZE_VARIANTS;
    /* The Winograd forms have no kernel-size variants; theirs are the two tiles a STAGE 7
     * configuration runs (F(4x4), and F(2x2) on planes with few of F(4x4)'s tiles:
     * launch_winograd): variant 1 is the F(2x2) program, the others the configuration's own. */
    tsr_config form = *cfg;
    if (cfg->values[P_ALGO] == TSR_CONV_IMPLICIT && (cfg->values[P_STAGE] == 6 || cfg->values[P_STAGE] == 7)) {
        if (ks == 1) form.values[P_STAGE] = 6;
        ks = 0;
    }
    if (cfg->values[P_ALGO] == TSR_CONV_IMPLICIT && cfg->values[P_STAGE] == 9) ks = 0;
    cfg = &form;
    tsr_config_defines(&tsr_op_conv, cfg, out, size);
    size_t len = strlen(out);
    if (cfg->values[P_ALGO] == TSR_CONV_IMPLICIT && cfg->values[P_STAGE] >= 2 && ks > 0 && len < size)
        snprintf(out + len, size - len, " -DKR=%d -DKS=%d", ks, ks);
    tsr_dtype types[3];
    conv_variant_types(program_variant, types);
    type_options(cfg, types, out, size);
}

/* The Winograd forms (conv_winograd.cl, launch_winograd): F(2x2), F(4x4), F(2x2) fused. */
static bool winograd_stage(int stage) { return stage == 6 || stage == 7 || stage == 9; }

static const char *conv_program_source(const tsr_config *cfg) {
    if (cfg->values[P_ALGO] != TSR_CONV_IMPLICIT || cfg->values[P_STAGE] < 2) return "conv";
    return winograd_stage(cfg->values[P_STAGE]) ? "conv_winograd" : "conv_cpu";
}

/* ---- validation ---- */

static size_t or_one(size_t v) { return v ? v : 1; }

/* Sizes and defaults of a descriptor, without buffers: shared by output_size, workspace_size and
 * the launch. */
static tsr_status conv_shape(const tsr_conv2d_desc *d, conv_problem *p) {
    if (!d) return tsr_fail(TSR_ERR_INVALID_ARG, "conv2d descriptor is NULL");
    memset(p, 0, sizeof *p);
    const struct { const char *name; size_t value; } sizes[] = {
        {"batch", d->batch},           {"in_channels", d->in_channels}, {"in_height", d->in_height},
        {"in_width", d->in_width},     {"out_channels", d->out_channels}, {"kernel_h", d->kernel_h},
        {"kernel_w", d->kernel_w}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i)
        if (sizes[i].value == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "conv2d: %s must be at least 1", sizes[i].name);
    p->N = d->batch, p->C = d->in_channels, p->H = d->in_height, p->W = d->in_width;
    p->K = d->out_channels, p->R = d->kernel_h, p->S = d->kernel_w;
    p->sh = or_one(d->stride_h), p->sw = or_one(d->stride_w);
    p->dh = or_one(d->dilation_h), p->dw = or_one(d->dilation_w);
    p->ph = d->pad_h, p->pw = d->pad_w;
    p->G = or_one(d->groups);
    /* Everything inside one image must fit the kernels' int arithmetic. */
    const size_t lim = INT_MAX;
    if (p->C > lim || p->H > lim || p->W > lim || p->K > lim || p->R > lim || p->S > lim || p->sh > lim ||
        p->sw > lim || p->dh > lim || p->dw > lim || p->ph > lim / 4 || p->pw > lim / 4 || p->G > lim)
        return tsr_fail(TSR_ERR_OVERFLOW, "conv2d: a size, stride, padding or dilation is too large");
    if (p->C % p->G || p->K % p->G)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "conv2d: groups = %zu must divide in_channels = %zu and out_channels = %zu", p->G, p->C, p->K);
    p->Cg = p->C / p->G, p->Kg = p->K / p->G;
    /* The kernel's extent with dilation, against the padded input. */
    size_t ext_h = p->dh * (p->R - 1) + 1, ext_w = p->dw * (p->S - 1) + 1;
    if (p->dh > lim / p->R || p->dw > lim / p->S)
        return tsr_fail(TSR_ERR_OVERFLOW, "conv2d: the dilated kernel's extent overflows");
    size_t in_h = p->H + 2 * p->ph, in_w = p->W + 2 * p->pw;
    if (ext_h > in_h || ext_w > in_w)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "conv2d: the output would be empty: the %zux%zu kernel spans %zux%zu with dilation, more than "
                        "the %zux%zu padded input", p->R, p->S, ext_h, ext_w, in_h, in_w);
    p->P = (in_h - ext_h) / p->sh + 1, p->Q = (in_w - ext_w) / p->sw + 1;
    size_t hw, pq, crs, chw, kpq, col;
    if (__builtin_mul_overflow(p->H, p->W, &hw) || __builtin_mul_overflow(p->P, p->Q, &pq) ||
        __builtin_mul_overflow(p->Cg, p->R * p->S, &crs) || __builtin_mul_overflow(p->C, hw, &chw) ||
        __builtin_mul_overflow(p->K, pq, &kpq) || __builtin_mul_overflow(crs, pq, &col) ||
        __builtin_mul_overflow(col, p->G, &col) || chw > lim || kpq > lim || col > lim || p->R * p->S > lim)
        return tsr_fail(TSR_ERR_OVERFLOW, "conv2d: one image's tensors exceed %zu elements", lim);
    p->CRS = crs, p->PQ = pq;
    if ((int)d->epilogue.activation < TSR_ACT_NONE || d->epilogue.activation > TSR_ACT_GELU_ERF)
        return tsr_fail(TSR_ERR_INVALID_ARG, "conv2d: epilogue activation must be a tsr_activation (got %d)",
                        (int)d->epilogue.activation);
    if (d->epilogue.norm_gamma || d->epilogue.norm_beta)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "conv2d: the epilogue takes no LayerNorm (norm_gamma, norm_beta: GEMM only)");
    if (d->epilogue.bias_stride)
        return tsr_fail(TSR_ERR_INVALID_ARG, "conv2d: epilogue.bias_stride must be 0 (one bias vector; got %zu)",
                        d->epilogue.bias_stride);
    if (d->epilogue.scale_stride)
        return tsr_fail(TSR_ERR_INVALID_ARG, "conv2d: epilogue.scale_stride must be 0 (one scale vector; got %zu)",
                        d->epilogue.scale_stride);
    if ((int)d->algo < TSR_CONV_AUTO || d->algo > TSR_CONV_DIRECT)
        return tsr_fail(TSR_ERR_INVALID_ARG, "conv2d: algo must be a tsr_conv_algo (got %d)", (int)d->algo);
    if ((int)d->layout != TSR_NCHW && d->layout != TSR_NHWC)
        return tsr_fail(TSR_ERR_INVALID_ARG, "conv2d: layout must be TSR_NCHW or TSR_NHWC (got %d)", (int)d->layout);
    p->act = (int)d->epilogue.activation;
    p->algo = d->algo;
    p->layout = d->layout;
    tsr_status st = TSR_SUCCESS;
    TSR_CHECK(st, tsr_dtype_check("conv2d: x_type", d->x_type), done);
    TSR_CHECK(st, tsr_dtype_check("conv2d: w_type", d->w_type), done);
    TSR_CHECK(st, tsr_dtype_check("conv2d: y_type", d->y_type), done);
    p->types[0] = d->x_type, p->types[1] = d->w_type, p->types[2] = d->y_type;
    if (d->epilogue.residual) TSR_CHECK(st, tsr_dtype_check("conv2d: epilogue.residual_type", d->epilogue.residual_type), done);
    p->r_type = d->epilogue.residual_type;
    p->x_off = d->x_offset, p->w_off = d->w_offset, p->b_off = d->epilogue.bias_offset, p->y_off = d->y_offset;
    p->s_off = d->epilogue.scale_offset, p->r_off = d->epilogue.residual_offset;
    p->ws = d->workspace, p->ws_bytes = d->workspace_bytes;
done:
    return st;
}

/* offset + count elements, with overflow checks (of the byte count too). */
static tsr_status span(const char *name, size_t off, size_t a, size_t b, size_t *end) {
    if (!tsr_strided_extent(off, 1, &a, &b, b, end)) /* a rows of b: off + (a - 1) b + b */
        return tsr_fail(TSR_ERR_OVERFLOW, "conv2d: the extent of %s overflows", name);
    return TSR_SUCCESS;
}

static tsr_status conv_validate(const tsr_device *dev, const tsr_conv2d_desc *d, cl_mem x, cl_mem w, cl_mem y,
                                conv_problem *p) {
    if (!dev) return tsr_fail(TSR_ERR_INVALID_ARG, "device is NULL");
    tsr_status st = conv_shape(d, p);
    if (st != TSR_SUCCESS) return st;
    cl_mem bias = d->epilogue.bias, scale = d->epilogue.scale, res = d->epilogue.residual;
    size_t x_end = 0, w_end = 0, b_end = 0, y_end = 0, s_end = 0, r_end = 0;
    TSR_CHECK(st, span("x", p->x_off, p->N, p->C * p->H * p->W, &x_end), done);
    TSR_CHECK(st, span("w", p->w_off, p->K, p->CRS, &w_end), done);
    TSR_CHECK(st, span("y", p->y_off, p->N, p->K * p->PQ, &y_end), done);
    if (bias) TSR_CHECK(st, span("bias", p->b_off, 1, p->K, &b_end), done);
    if (scale) TSR_CHECK(st, span("scale", p->s_off, 1, p->K, &s_end), done);
    if (res) TSR_CHECK(st, span("residual", p->r_off, p->N, p->K * p->PQ, &r_end), done);
    const tsr_dtype xt = p->types[0], wt = p->types[1], yt = p->types[2];
    TSR_CHECK(st, tsr_check_buffer_typed(dev, x, "x", x_end, xt), done);
    TSR_CHECK(st, tsr_check_buffer_typed(dev, w, "w", w_end, wt), done);
    TSR_CHECK(st, tsr_check_buffer_typed(dev, y, "y", y_end, yt), done);
    if (bias) TSR_CHECK(st, tsr_check_buffer(dev, bias, "bias", b_end), done);
    if (scale) TSR_CHECK(st, tsr_check_buffer(dev, scale, "epilogue scale", s_end), done);
    if (res) TSR_CHECK(st, tsr_check_buffer_typed(dev, res, "epilogue residual", r_end, p->r_type), done);
    /* By memory, not handle: sub-buffers of one parent (or a sub-buffer and its parent) alias;
     * ranges in bytes of each tensor's type. */
    size_t ny = y_end - p->y_off;
    TSR_CHECK(
        st, tsr_check_disjoint_typed("conv2d", y, "y", p->y_off, ny, yt, x, "x", p->x_off, x_end - p->x_off, xt, false),
        done);
    TSR_CHECK(
        st, tsr_check_disjoint_typed("conv2d", y, "y", p->y_off, ny, yt, w, "w", p->w_off, w_end - p->w_off, wt, false),
        done);
    if (bias)
        TSR_CHECK(st,
                  tsr_check_disjoint_typed("conv2d", y, "y", p->y_off, ny, yt, bias, "bias", p->b_off, b_end - p->b_off,
                                           TSR_F32, false),
                  done);
    if (scale)
        TSR_CHECK(st,
                  tsr_check_disjoint_typed("conv2d", y, "y", p->y_off, ny, yt, scale, "the epilogue scale", p->s_off,
                                           s_end - p->s_off, TSR_F32, false),
                  done);
    if (res) {
        /* The residual may be y itself (same bytes, same type: each element is read by the
         * work-item that then writes it), nothing else of y, x or w. */
        const size_t nr = r_end - p->r_off;
        TSR_CHECK(st,
                  tsr_check_disjoint_typed("conv2d", y, "y", p->y_off, ny, yt, res, "the epilogue residual", p->r_off,
                                           nr, p->r_type, p->r_type == yt),
                  done);
        TSR_CHECK(st,
                  tsr_check_disjoint_typed("conv2d", res, "the epilogue residual", p->r_off, nr, p->r_type, x, "x",
                                           p->x_off, x_end - p->x_off, xt, false),
                  done);
        TSR_CHECK(st,
                  tsr_check_disjoint_typed("conv2d", res, "the epilogue residual", p->r_off, nr, p->r_type, w, "w",
                                           p->w_off, w_end - p->w_off, wt, false),
                  done);
    }
    if (p->ws) {
        size_t real = 0;
        if (clGetMemObjectInfo(p->ws, CL_MEM_SIZE, sizeof real, &real, NULL) != CL_SUCCESS)
            return tsr_fail(TSR_ERR_INVALID_ARG, "conv2d: workspace is not a valid cl_mem");
        TSR_CHECK(st, tsr_check_buffer(dev, p->ws, "workspace", 0), done);
        if (p->ws_bytes > real)
            return tsr_fail(TSR_ERR_BUFFER_TOO_SMALL, "conv2d: workspace_bytes = %zu but the workspace holds %zu bytes",
                            p->ws_bytes, real);
        /* The column matrices are written while x is read and before y is: they must not share memory
         * with any of them (whole floats covering workspace_bytes). */
        size_t ws_floats = p->ws_bytes / sizeof(float) + (p->ws_bytes % sizeof(float) != 0);
        const struct {
            cl_mem mem;
            const char *name;
            size_t off, end;
            tsr_dtype type;
        } others[] = {{x, "x", p->x_off, x_end, xt},
                      {w, "w", p->w_off, w_end, wt},
                      {y, "y", p->y_off, y_end, yt},
                      {bias, "bias", p->b_off, b_end, TSR_F32},
                      {scale, "the epilogue scale", p->s_off, s_end, TSR_F32},
                      {res, "the epilogue residual", p->r_off, r_end, p->r_type}};
        for (size_t i = 0; i < sizeof others / sizeof others[0]; ++i)
            if (others[i].mem)
                TSR_CHECK(st,
                          tsr_check_disjoint_typed("conv2d", p->ws, "the workspace", 0, ws_floats, TSR_F32,
                                                   others[i].mem, others[i].name, others[i].off,
                                                   others[i].end - others[i].off, others[i].type, false),
                          done);
    }
    p->x = x, p->w = w, p->bias = bias, p->y = y, p->scale = scale, p->res = res;
done:
    return st;
}

/* ---- paths ---- */

static void geometry(const conv_problem *p, cl_int geo[16]) {
    const size_t v[15] = {p->C, p->H, p->W, p->K, p->R, p->S, p->P, p->Q, p->sh, p->sw, p->ph, p->pw, p->dh, p->dw, p->G};
    for (int i = 0; i < 15; ++i) geo[i] = (cl_int)v[i];
    geo[15] = 0;
    if (is_pointwise(p)) { /* one long row: vector loads never meet a row's end */
        geo[1] = 1, geo[2] = (cl_int)(p->H * p->W), geo[6] = 1, geo[7] = (cl_int)p->PQ;
    }
}

/* The geometry as the layer states it (no pointwise flattening). */
static void geometry_plain(const conv_problem *p, cl_int geo[16]) {
    const size_t v[15] = {p->C, p->H, p->W, p->K, p->R, p->S, p->P, p->Q, p->sh, p->sw, p->ph, p->pw, p->dh, p->dw, p->G};
    for (int i = 0; i < 15; ++i) geo[i] = (cl_int)v[i];
    geo[15] = 0;
}

/* The weights, the output and the epilogue's arguments (conv_access.cl's CONV_EPILOGUE_PARAMS)
 * every path's kernel shares. */
static tsr_status set_common_args(cl_kernel kernel, const conv_problem *p, cl_uint first) {
    tsr_status status = TSR_SUCCESS;
    cl_ulong w_off = p->w_off, b_off = p->b_off, y_off = p->y_off, s_off = p->s_off, r_off = p->r_off;
    cl_int flags = (p->scale ? 1 : 0) | (p->bias ? 2 : 0), r_type = p->res ? (cl_int)p->r_type : -1, act = p->act;
    /* any valid buffer where a part is absent: the kernel does not read it */
    cl_mem bias = p->bias ? p->bias : p->w, scale = p->scale ? p->scale : p->w, res = p->res ? p->res : p->w;
    cl_uint arg = first;
#define SET(v) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(v), &(v)), done)
    SET(p->w); SET(w_off); SET(p->y); SET(y_off);
    SET(scale); SET(s_off); SET(bias); SET(b_off); SET(res); SET(r_off); SET(flags); SET(r_type); SET(act);
#undef SET
done:
    return status;
}

/* The kernel size at compile time for the STAGE 2 and 3 forms (taps unroll) when it is one of
 * the common ones (square up to 3x3); strided square kernels up to 7x7 (conv1) too, since
 * STAGE 2's polyphase taps are only cheap unrolled (their divisions fold). Others read it from
 * the geometry. */
static bool kernel_size_compiled(const conv_problem *p) {
    return p->R == p->S && (p->R <= 3 || ((p->sh > 1 || p->sw > 1) && p->R <= 7));
}

static void kernel_size_options(const conv_problem *p, char *options, size_t size) {
    size_t len = strlen(options);
    if (kernel_size_compiled(p) && len < size) snprintf(options + len, size - len, " -DKR=%zu -DKS=%zu", p->R, p->S);
    len = strlen(options);
    /* STAGE 2's polyphase taps: strides and dilations compiled in too (their phases fold) */
    if ((p->sh > 1 || p->sw > 1) && kernel_size_compiled(p) && len < size)
        snprintf(options + len, size - len, " -DCSH=%zu -DCSW=%zu -DCDH=%zu -DCDW=%zu", p->sh, p->sw, p->dh, p->dw);
}

/* A launch's program options: as conv_build_options' variant for the layer's kernel size (the
 * CPU forms) and storage types. */
static void program_options(const conv_problem *p, const tsr_config *cfg, bool kernel_size, char *options,
                            size_t size) {
    conv_build_options(cfg, 0, options, size);
    if (kernel_size) kernel_size_options(p, options, size);
    type_options(cfg, p->types, options, size);
}

/* ---- the programs of a call, remembered (issue #36: no fixed work once a shape was seen) ----
 * Each launch site keys a launch record (tsr_launch_find) by what decides its program's option
 * text: its configuration (the form it launches), the storage types, the compiled kernel size,
 * strides and dilations where they enter the options, and the site's own choices (`bits`). A
 * call that has seen its key takes the program's kernels from the record: no option text, no
 * program look-up, no allocation. Records go with tsr_launch_invalidate (an override set or
 * cleared, a re-tune, a program dropped, the device closed), as the other ops'. With
 * $TSR_KERNEL_DIR set nothing is remembered (an edited file reaches the next call). */
static const char conv_direct_tag, conv_padded_tag, conv_winograd_tag, conv_im2col_tag, conv_dw_nhwc_tag,
    conv_widen_tag, conv_transpose_tag;

/* The key of a launch site `tag` for p under cfg; kernel_size: the options carry the compiled
 * kernel size (kernel_size_options, and launch_kernel's unstrided CSH/CDH). */
static void conv_key(tsr_launch_key *key, const void *tag, const conv_problem *p, const tsr_config *cfg,
                     bool kernel_size, uint32_t bits) {
    _Static_assert(TSR_MAX_PARAMS + 8 <= TSR_LAUNCH_KEY_WORDS, "a configuration and 8 words fit a launch key");
    memset(key, 0, sizeof *key);
    key->tag = tag;
    if (cfg) memcpy(key->words, cfg->values, sizeof cfg->values);
    uint32_t *w = key->words + TSR_MAX_PARAMS;
    w[0] = bits;
    if (p) {
        w[1] = (uint32_t)p->types[0] | (uint32_t)p->types[1] << 8 | (uint32_t)p->types[2] << 16;
        if (kernel_size && kernel_size_compiled(p)) { /* validated geometry: each fits an int */
            w[2] = (uint32_t)p->R, w[3] = (uint32_t)p->S, w[4] = (uint32_t)p->sh, w[5] = (uint32_t)p->sw;
            w[6] = (uint32_t)p->dh, w[7] = (uint32_t)p->dw;
        }
    }
}

/* The record's kernels for `key` into k (true); false when there is none (*generation for
 * conv_kernels_make). */
static bool conv_kernels_find(tsr_device *dev, const tsr_launch_key *key, tsr_kernel *k[TSR_LAUNCH_KERNELS],
                              uint64_t *generation) {
    tsr_launch rec;
    *generation = 0;
    if (dev->kernel_dir[0] || !tsr_launch_find(dev, key, &rec, generation)) return false;
    memcpy(k, rec.kernels, sizeof rec.kernels);
    return true;
}

/* The kernels `list` names (';'-separated, at most TSR_LAUNCH_KERNELS) of `source` built with
 * `options`, into k in the list's order, kept under `key` (first call of a key only). */
static tsr_status conv_kernels_make(tsr_device *dev, const tsr_launch_key *key, uint64_t generation,
                                    const char *source, const char *options, const char *list,
                                    tsr_kernel *k[TSR_LAUNCH_KERNELS]) {
    tsr_status status = TSR_SUCCESS;
    tsr_launch rec;
    memset(&rec, 0, sizeof rec);
    TSR_CHECK(status, tsr_program_for(dev, source, options, list, &rec.program), done);
    int i = 0;
    for (const char *s = list; *s && i < TSR_LAUNCH_KERNELS; ++i) {
        char name[48];
        size_t n = strcspn(s, ";");
        if (n >= sizeof name) return tsr_fail(TSR_ERR_NOT_FOUND, "conv2d: kernel name '%.*s' too long", (int)n, s);
        memcpy(name, s, n);
        name[n] = '\0';
        TSR_CHECK(status, tsr_program_kernel(dev, rec.program, name, &rec.kernels[i]), done);
        s += n;
        if (*s == ';') ++s;
    }
    if (!dev->kernel_dir[0]) tsr_launch_store(dev, key, generation, &rec);
    memcpy(k, rec.kernels, sizeof rec.kernels);
done:
    return status;
}

/* STAGE 8's vector width on a layer: the configuration's; at stride 1 on rows narrower than it
 * but wider than half of it (14x14 planes at 16 lanes, 7x7 at 8), on planes of 2 rows or more,
 * without a residual, one vector a row (*wide: its last lanes past the row, zeroed); else halved
 * down to the output row's width (two tiles overlapping). 0 where the form does not apply (the
 * layer is not a 3x3 depthwise one with padding 1, dilation 1 and stride 1, or 2 on an even
 * width, or its rows, or the configuration's vectors, are narrower than 4), and STAGE 4 runs instead. */
static int dw_rows_width(const conv_problem *p, int vw, bool *wide) {
    *wide = false;
    if (p->C != p->G || p->K != p->G || p->R != 3 || p->S != 3 || p->ph != 1 || p->pw != 1 || p->dh != 1 ||
        p->dw != 1 || p->sh != p->sw || (p->sw != 1 && (p->sw != 2 || p->W % 2)))
        return 0;
    if (p->sw == 1 && vw >= 8 && p->Q < (size_t)vw && 2 * p->Q > (size_t)vw && p->H >= 2 && !p->res) {
        *wide = true;
        return vw;
    }
    while (vw >= 4 && (size_t)vw > p->Q) vw /= 2;
    return vw >= 4 ? vw : 0;
}

/* STAGE 8's whole-plane form (cl/conv_cpu.cl's DW8_PLANES) on a layer: the planes a vector holds
 * (2: two 8-lane slots, 1: one plane of 16 lanes), 0 where it does not apply: 3x3 depthwise
 * layers with padding 1 and dilation 1 whose input rows fit a slot (stride 1: W <= 16, two planes
 * a vector up to W = 8) or two (stride 2 on an even W <= 32, two planes up to W = 16; stride 1 with
 * 16 < W <= 32, one plane, a row as two vectors), under a configuration of 16 lanes. */
static int dw_planes(const conv_problem *p, int vw) {
    if (vw != 16 || p->C != p->G || p->K != p->G || p->R != 3 || p->S != 3 || p->ph != 1 || p->pw != 1 ||
        p->dh != 1 || p->dw != 1 || p->sh != p->sw)
        return 0;
    /* H compiled in (rows unrolled): up to 32; a plane holds a row's load (read past the row) */
    int npl = 0;
    if (p->sw == 1 && p->W <= 16) npl = p->W <= 8 ? 2 : 1;
    if (p->sw == 1 && p->W > 16 && p->W <= 32) npl = 1; /* a row two vectors (session 26) */
    if (p->sw == 2 && p->W % 2 == 0 && p->W <= 32) npl = p->W <= 16 ? 2 : 1;
    size_t load = (p->sw == 1 ? 16 : 32) / (size_t)(npl ? npl : 1);
    return npl && p->H <= 32 && p->H * p->W >= load ? npl : 0;
}

/* STAGE 8's row bands per plane: whole planes, unless fewer than 32 work-items a compute unit
 * would do (the 112x112 and 56x56 layers at batch 1); each band at least MWI rows. */
static size_t dw_rows_bands(const tsr_device *dev, const conv_problem *p, int mwi) {
    size_t want = 32 * (size_t)(dev->info.compute_units ? dev->info.compute_units : 1), planes = p->N * p->K;
    size_t bands = planes >= want ? 1 : ceil_div(want, planes), most = ceil_div(p->P, (size_t)mwi);
    if (bands > most) bands = most;
    /* the kernel's rows per band, ceil(P / bands) rounded up to MWI: drop bands it leaves empty */
    size_t rows = ceil_div(ceil_div(p->P, bands), (size_t)mwi) * (size_t)mwi;
    return ceil_div(p->P, rows);
}

static tsr_status launch_kernel(tsr_device *dev, const conv_problem *p, const tsr_config *cfg, bool implicit,
                                cl_command_queue queue, cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    tsr_config form;
    bool dw_wide = false;
    int dw_npl = 0;
    if (implicit && cfg->values[P_STAGE] == 8) { /* its vector width for the layer, or STAGE 4 */
        form = *cfg;
        dw_npl = dw_planes(p, cfg->values[P_VW]);
        int vw = dw_npl ? cfg->values[P_VW] : dw_rows_width(p, cfg->values[P_VW], &dw_wide);
        if (vw) form.values[P_VW] = vw;
        else form.values[P_STAGE] = 4;
        cfg = &form;
    }
    const int *v = cfg->values;
    int stage = implicit ? v[P_STAGE] : 0;
    /* STAGE 4 flattened over the plane where output rows are as wide as input rows (stride 1)
     * and no wider than a vector (row tiles would leave lanes idle) */
    const bool flat = stage == 4 && p->sh == 1 && p->sw == 1 && p->Q == p->W && p->Q <= (size_t)v[P_VW];
    tsr_kernel *cached = NULL, *k[TSR_LAUNCH_KERNELS];
    tsr_launch_key key;
    uint64_t generation;
    conv_key(&key, &conv_direct_tag, p, cfg, stage >= 2, (uint32_t)implicit | (uint32_t)flat << 1 | (uint32_t)dw_wide << 2 |
                 (uint32_t)dw_npl << 3 | (uint32_t)(dw_npl ? p->W : 0) << 8 | (uint32_t)(dw_npl ? p->H : 0) << 16 |
                 (uint32_t)(dw_npl ? p->sw : 0) << 24);
    if (!conv_kernels_find(dev, &key, k, &generation)) {
        char options[256];
        program_options(p, cfg, stage >= 2, options, sizeof options);
        /* STAGE 4 and 8 fold their taps' strides and dilations unstrided too (strided layers have them already) */
        size_t olen = strlen(options);
        if ((stage == 4 || stage == 8) && p->sh == 1 && p->sw == 1 && kernel_size_compiled(p) && olen < sizeof options)
            snprintf(options + olen, sizeof options - olen, " -DCSH=1 -DCSW=1 -DCDH=%zu -DCDW=%zu", p->dh, p->dw);
        olen = strlen(options);
        if (flat && olen < sizeof options) snprintf(options + olen, sizeof options - olen, " -DDW_FLAT=1");
        olen = strlen(options);
        if (stage == 8 && dw_wide && olen < sizeof options)
            snprintf(options + olen, sizeof options - olen, " -DDW8_WIDE=1");
        olen = strlen(options);
        if (stage == 8 && dw_npl && olen < sizeof options)
            snprintf(options + olen, sizeof options - olen, " -DDW8_PLANES=%zu -DDW8_H=%zu -DDW8_NPL=%d -DDW8_STRIDE=%zu",
                     p->W, p->H, dw_npl, p->sw);
        /* The CPU forms live in conv_cpu.cl (conv.cl, and the entries tuned against its hash, unchanged). */
        TSR_CHECK(status,
                  conv_kernels_make(dev, &key, generation, stage >= 2 ? "conv_cpu" : "conv", options,
                                    implicit ? "conv_implicit" : "conv_direct", k),
                  done);
    }
    cached = k[0];
    cl_kernel kernel = cached->kernel;
    tsr_kernel_lock(cached); /* the cached kernel's arguments are this call's until the enqueue */
    cl_int geo[16];
    geometry(p, geo);
    if (stage >= 2) geometry_plain(p, geo); /* these forms take the true rows */
    cl_ulong x_off = p->x_off;
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 0, sizeof geo, geo), done);
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 1, sizeof p->x, &p->x), done);
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 2, sizeof x_off, &x_off), done);
    TSR_CHECK(status, set_common_args(kernel, p, 3), done);
    size_t global[3], local[3] = {(size_t)v[P_WGM], (size_t)v[P_WGN], 1};
    if (!implicit) {
        global[0] = (size_t)geo[7], global[1] = (size_t)geo[6], global[2] = p->N * p->K;
    } else if (stage == 3) { /* MWI rows per item, up to WGN items per work-group */
        size_t items = ceil_div(p->P, (size_t)v[P_MWI]);
        local[0] = items < (size_t)v[P_WGN] ? items : (size_t)v[P_WGN], local[1] = (size_t)v[P_WGN] / local[0];
        global[0] = ceil_div(items, local[0]) * local[0], global[1] = ceil_div(p->N * p->K, local[1]) * local[1];
        global[2] = 1;
        geo[15] = (cl_int)(p->N * p->K);
        TSR_CL_CHECK(status, tsr_set_arg(kernel, 0, sizeof geo, geo), done);
    } else if (flat) {
        /* MWI VW consecutive pixels per item; up to WGN items of a plane, then planes, per work-group */
        size_t items = ceil_div(p->PQ, (size_t)v[P_MWI] * (size_t)v[P_VW]), wgn = (size_t)v[P_WGN];
        local[0] = items < wgn ? items : wgn, local[1] = 1;
        local[2] = local[0] >= wgn ? 1 : wgn / local[0];
        if (local[2] > dev->info.max_work_item_sizes[2]) local[2] = 1;
        global[0] = ceil_div(items, local[0]) * local[0], global[1] = 1;
        global[2] = ceil_div(p->N * p->K, local[2]) * local[2];
        geo[15] = (cl_int)(p->N * p->K);
        TSR_CL_CHECK(status, tsr_set_arg(kernel, 0, sizeof geo, geo), done);
    } else if (stage == 8 && dw_npl) {
        /* dw_npl planes an item (all images' planes in a row); up to WGN items a work-group, fewer
         * where that would leave under 8 work-groups a compute unit */
        size_t items = ceil_div(p->N * p->K, (size_t)dw_npl), wg = (size_t)v[P_WGN];
        size_t cu = dev->info.compute_units ? dev->info.compute_units : 1;
        while (wg > 1 && ceil_div(items, wg) < 8 * cu) wg /= 2;
        if (wg > dev->info.max_work_item_sizes[0] || wg > dev->info.max_work_group_size) wg = 1;
        local[0] = wg, local[1] = 1, local[2] = 1;
        global[0] = ceil_div(items, wg) * wg, global[1] = 1, global[2] = 1;
        geo[15] = (cl_int)(p->N * p->K);
        TSR_CL_CHECK(status, tsr_set_arg(kernel, 0, sizeof geo, geo), done);
    } else if (stage == 8) {
        /* row bands x channels x images; up to WGN channels a work-group, fewer where that would
         * leave under 8 work-groups a compute unit */
        size_t bands = dw_rows_bands(dev, p, v[P_MWI]), wgn = (size_t)v[P_WGN];
        size_t cu = dev->info.compute_units ? dev->info.compute_units : 1;
        while (wgn > 1 && ceil_div(p->K, wgn) * p->N * bands < 8 * cu) wgn /= 2;
        if (wgn > dev->info.max_work_item_sizes[1] || wgn > dev->info.max_work_group_size) wgn = 1;
        local[0] = 1, local[1] = wgn, local[2] = 1;
        global[0] = bands, global[1] = ceil_div(p->K, wgn) * wgn, global[2] = p->N;
    } else if (stage == 4) {
        /* a whole output row's tiles per work-group, then row blocks, then planes: about WGN items */
        size_t tiles = ceil_div(p->Q, (size_t)v[P_VW]), blocks = ceil_div(p->P, (size_t)v[P_MWI]), wgn = (size_t)v[P_WGN];
        local[0] = tiles;
        local[1] = tiles >= wgn ? 1 : (wgn / tiles < blocks ? wgn / tiles : blocks);
        local[2] = local[0] * local[1] >= wgn ? 1 : wgn / (local[0] * local[1]);
        if (local[0] * local[1] * local[2] > dev->info.max_work_group_size || local[0] > dev->info.max_work_item_sizes[0])
            local[0] = local[1] = local[2] = 1; /* a row wider than the device's work-group: one item each */
        if (local[1] > dev->info.max_work_item_sizes[1]) local[1] = 1;
        if (local[2] > dev->info.max_work_item_sizes[2]) local[2] = 1;
        global[0] = ceil_div(tiles, local[0]) * local[0], global[1] = ceil_div(blocks, local[1]) * local[1];
        global[2] = ceil_div(p->N * p->K, local[2]) * local[2];
        geo[15] = (cl_int)(p->N * p->K);
        TSR_CL_CHECK(status, tsr_set_arg(kernel, 0, sizeof geo, geo), done);
    } else if (stage == 0) {
        size_t rows = (size_t)geo[6], qt = ceil_div((size_t)geo[7], (size_t)v[P_VW]);
        global[0] = ceil_div(ceil_div(p->Kg, (size_t)v[P_MWI]), local[0]) * local[0];
        global[1] = ceil_div(rows * qt, local[1]) * local[1];
        global[2] = p->N * p->G;
    } else {
        global[0] = ceil_div(p->Kg, (size_t)v[P_MWI] * local[0]) * local[0];
        global[1] = ceil_div(p->PQ, (size_t)v[P_VW] * local[1]) * local[1];
        global[2] = p->N * p->G;
    }
    TSR_CL_CHECK(status,
                 tsr_enqueue_kernel(queue, kernel, 3, NULL, global, implicit ? local : NULL, 0, NULL, event), done);
done:
    if (cached) tsr_kernel_unlock(cached);
    return status;
}

static bool im2col_accepts(const tsr_device *dev, const void *problem);
static tsr_status launch_im2col(tsr_device *dev, const void *problem, const tsr_config *cfg, cl_command_queue queue,
                                cl_event *event);

/* The copy of x the STAGE 2 kernel reads: zero-padded, and for strided layers split into phase
 * planes (cl/conv_cpu.cl's pad_input): phh x phw planes of Hq rows of Wq per channel. Hq holds
 * every row a tap reads plus enough zero rows after them that the last pixel tile's vector loads
 * stay inside each plane (they only feed dropped columns). Unstrided fp32 layers without padding
 * read x as it is (copy false: Hq = H, Wq = W, one phase). */
typedef struct padded_copy {
    bool copy, poly;
    size_t phh, phw, Hq, Wq, plane, channel; /* plane = Hq Wq, channel = phh phw plane */
    size_t max_off;                           /* the largest tap offset inside a channel */
} padded_copy;

static padded_copy padded_geometry(const conv_problem *p, int vw) {
    padded_copy c = {.poly = p->sh > 1 || p->sw > 1};
    c.copy = c.poly || p->ph || p->pw || p->types[0] != TSR_F32; /* a 16-bit x is widened once */
    c.phh = c.poly && p->R > 1 ? p->sh : 1, c.phw = c.poly && p->S > 1 ? p->sw : 1;
    size_t Wp = p->W + 2 * p->pw;
    c.Wq = ceil_div(Wp, p->sw);
    size_t ro = (p->R - 1) * p->dh / p->sh, co = (p->S - 1) * p->dw / p->sw;
    c.Hq = c.copy ? p->P + ro + ceil_div((size_t)vw - 1 + co, c.Wq) : p->H;
    if (!c.copy) c.Wq = p->W;
    c.plane = c.Hq * c.Wq, c.channel = c.phh * c.phw * c.plane;
    if (!c.poly) {
        c.max_off = (p->R - 1) * p->dh * c.Wq + (p->S - 1) * p->dw;
    } else if (kernel_size_compiled(p)) { /* the kernel's POLY_OFF over its taps (at most 7x7) */
        for (size_t r = 0; r < p->R; ++r)
            for (size_t s = 0; s < p->S; ++s) {
                size_t a = r * p->dh % p->sh, b = s * p->dw % p->sw;
                size_t off = (a * c.phw + b) * c.plane + r * p->dh / p->sh * c.Wq + s * p->dw / p->sw;
                if (off > c.max_off) c.max_off = off;
            }
    }
    return c;
}

/* Bytes of one image's copy (STAGE 2), 0 when the kernel reads x itself. */
static size_t padded_bytes_per_image(const conv_problem *p, const padded_copy *c) {
    return c->copy ? p->C * c->channel * sizeof(float) : 0;
}

/* STAGE 2's pixel vectors per work-item on a layer: WGM at most, and from ceil(WGM / 2) up the
 * count whose tiles waste the fewest vectors on the flattened plane (span pixels; ties to the
 * larger), e.g. WGM = 4 takes 2 on a 14x14 plane (14 vectors of 16), 3 on 28x28 (53), 4 on 7x7. */
static int padded_vectors(size_t span, int vw, int wgm) {
    size_t vecs = ceil_div(span, (size_t)vw), best = 0;
    int nv = wgm;
    for (int t = wgm; t >= (wgm + 1) / 2; --t) {
        size_t cover = ceil_div(vecs, (size_t)t) * (size_t)t;
        if (best == 0 || cover < best) best = cover, nv = t;
    }
    return nv;
}

static tsr_status derive_weights(tsr_device *dev, const conv_problem *p, const char *key, size_t bytes,
                                 tsr_derive_fn fill, void *ctx, cl_command_queue queue, cl_mem *out, cl_event *ready);

/* STAGE 5's pack_weights launch into `packed` (kpad = the padded output channels of a group). */
typedef struct pack_job {
    const conv_problem *p;
    tsr_kernel *kernel;
    const cl_int *geo;
    size_t kpad;
} pack_job;

static tsr_status pack_into(tsr_device *dev, void *ctx, cl_mem packed, cl_command_queue queue, cl_event *done) {
    (void)dev;
    const pack_job *j = ctx;
    tsr_status status = TSR_SUCCESS;
    const size_t wglobal[3] = {j->kpad, ceil_div(j->p->CRS, 16), j->p->G};
    size_t wlocal[3];
    const cl_ulong w_off = j->p->w_off;
    *done = NULL;
    tsr_kernel_lock(j->kernel);
    TSR_CL_CHECK(status, tsr_set_arg(j->kernel->kernel, 0, 16 * sizeof(cl_int), j->geo), unlock);
    TSR_CL_CHECK(status, tsr_set_arg(j->kernel->kernel, 1, sizeof j->p->w, &j->p->w), unlock);
    TSR_CL_CHECK(status, tsr_set_arg(j->kernel->kernel, 2, sizeof w_off, &w_off), unlock);
    TSR_CL_CHECK(status, tsr_set_arg(j->kernel->kernel, 3, sizeof packed, &packed), unlock);
    TSR_CL_CHECK(status, tsr_enqueue_kernel(queue, j->kernel->kernel, 3, NULL, wglobal, tsr_spread_local(dev, 3, wglobal, wlocal), 0, NULL, done), unlock);
unlock:
    tsr_kernel_unlock(j->kernel);
    return status;
}

/* The STAGE 2 form: x copied into zero-padded fp32 planes (phase planes for strides) in
 * tessera's workspace, in chunks of images that stay in the last-level cache (as im2col's), then
 * the kernel over each chunk with the copy's geometry. Unstrided unpadded fp32 layers read x as
 * it is. Strided layers whose kernel size is not compiled in run the STAGE 0 form. */
static tsr_status launch_padded(tsr_device *dev, const conv_problem *p, const tsr_config *cfg,
                                cl_command_queue queue, cl_event *event) {
    tsr_config c0 = *cfg; /* the STAGE 0 form: same tile, no workspace, any stride and size */
    c0.values[P_STAGE] = 0;
    c0.values[P_WGM] = conv_params[P_WGM].default_value;
    /* a tile is nv vectors of VW pixels (the program's WGM): the copy's slack rows cover its last
     * tile's loads */
    const bool kvec = cfg->values[P_STAGE] == 5; /* channel vectors: single pixels read, no slack */
    tsr_config cn = *cfg;
    if (!kvec)
        cn.values[P_WGM] = padded_vectors(p->P * padded_geometry(p, cfg->values[P_VW]).Wq, cfg->values[P_VW],
                                          cfg->values[P_WGM]);
    cfg = &cn;
    padded_copy pc = padded_geometry(p, kvec ? 1 : cfg->values[P_VW] * cfg->values[P_WGM]);
    /* STAGE 5 reads one pixel at a time: on a 1x1 layer without padding it reads x in place, a
     * strided one at its strides (KV_STRIDED_X, the plain geometry), a 16-bit one widening each
     * pixel it broadcasts (KV_X16), so no copy and no copy launch: ResNet-50's downsample layers
     * and its 16-bit 14x14 and 7x7 layers at batch 1 (session 26) */
    bool in_place = kvec && p->R == 1 && p->S == 1 && p->ph == 0 && p->pw == 0;
    /* (past int indices over the whole x, a strided or 16-bit layer keeps its copy, made in chunks) */
    if (in_place && (pc.poly || p->types[0] != TSR_F32) && p->N * p->C * p->H * p->W > INT_MAX) in_place = false;
    const bool strided_in_place = in_place && pc.poly, x16_in_place = in_place && p->types[0] != TSR_F32;
    size_t per = in_place ? 0 : padded_bytes_per_image(p, &pc);
    const size_t channel = in_place ? p->H * p->W : pc.channel; /* what the kernel indexes per channel */
    /* Strided layers whose taps would divide at run time, copies whose index math would leave
     * int, and images whose copy one allocation cannot hold all run the STAGE 0 form, which needs
     * none of it. */
    if ((pc.poly && !kernel_size_compiled(p)) || pc.channel > INT_MAX || p->P * pc.Wq > INT_MAX ||
        per > dev->info.max_alloc_bytes || (kvec && (per ? 1 : p->N) * p->C * channel > INT_MAX)) {
        /* An automatic choice takes im2col + GEMM there when it can (STAGE 0 is far slower on
         * strided layers); a forced implicit path, or a caller's workspace sized for it, STAGE 0. */
        if (p->algo == TSR_CONV_AUTO && !p->ws && im2col_accepts(dev, p)) {
            tsr_config c1;
            tsr_config_declared(&tsr_op_conv, &c1); /* the declared values: the im2col path's */
            c1.values[P_ALGO] = TSR_CONV_IM2COL;
            return launch_im2col(dev, p, &c1, queue, event);
        }
        return launch_kernel(dev, p, &c0, true, queue, event);
    }
    tsr_status status = TSR_SUCCESS;
    const int *v = cfg->values;
    tsr_kernel *kernel = NULL, *pad = NULL, *held = NULL; /* held: the cached kernel this call has locked */
    cl_event last = NULL;
    bool locked = false, holding = false; /* holding: the workspace is ours, `last` its newest user */
    cl_mem packed = NULL, kept = NULL; /* kept: the packed weights of a constant weight buffer */
    cl_event wlast = NULL;
    bool wholding = false, wlocked = false; /* STAGE 5's packed weights: held, locked */
    /* the program's kernels: conv_implicit, then pad_input (a copy), then pack_weights (STAGE 5) */
    tsr_kernel *k[TSR_LAUNCH_KERNELS];
    {
        tsr_launch_key key;
        uint64_t generation;
        conv_key(&key, &conv_padded_tag, p, cfg, true,
                 (uint32_t)(per != 0) | (uint32_t)kvec << 1 | (uint32_t)strided_in_place << 2 |
                     (uint32_t)x16_in_place << 3);
        if (!conv_kernels_find(dev, &key, k, &generation)) {
            char options[256];
            program_options(p, cfg, true, options, sizeof options);
            size_t len = strlen(options);
            if (in_place && len < sizeof options)
                snprintf(options + len, sizeof options - len, "%s%s", strided_in_place ? " -DKV_STRIDED_X" : "",
                         x16_in_place ? " -DKV_X16" : "");
            TSR_CHECK(status,
                      conv_kernels_make(dev, &key, generation, "conv_cpu", options,
                                        kvec ? (per ? "conv_implicit;pad_input;pack_weights" : "conv_implicit;pack_weights")
                                             : (per ? "conv_implicit;pad_input" : "conv_implicit"),
                                        k),
                      done);
        }
    }
    kernel = k[0];
    cl_int geo[16], pgeo[16];
    geometry_plain(p, geo);
    memcpy(pgeo, geo, sizeof geo);
    /* the kernel sees the copy: its rows per channel and width, phases along a row (PH's slot),
     * one phase plane's size (PW's), the largest tap offset (the 16th) */
    pgeo[1] = (cl_int)(pc.phh * pc.phw * pc.Hq), pgeo[2] = (cl_int)pc.Wq;
    pgeo[10] = (cl_int)pc.phw, pgeo[11] = (cl_int)pc.plane, pgeo[15] = (cl_int)pc.max_off;
    size_t span = p->P * pc.Wq, tiles = ceil_div(span, (size_t)v[P_VW] * (size_t)v[P_WGM]);
    if (kvec) tiles = ceil_div(p->PQ, (size_t)v[P_WGM]); /* one image's pixel tiles (a chunk's: below) */
    /* WGN tiles per work-group at most: fewer when the plane has fewer (small layers keep both
     * cores busy), and fewer while the rows of x's copy a work-group reads (every input channel
     * of its group, every phase) would pass half a core's L2: the work-groups after it (the next
     * output channels over the same tiles) then find them there. ResNet-50's 56x56/2 layer
     * (1.8 MB of copy per image): 16 tiles a group ran at 0.7x of 1 or 2 on a 2-core Skylake.
     * Polyphase copies keep to a quarter of that L2 (256 KiB): on the 2-core Zen 5 (1 MiB L2 a
     * core; session 20, load 3-6) that layer's 2 tiles a group (415 KB of rows) took 1.07-1.09x
     * the CPU time of 1 tile at batch 8 (three runs) and 1.08-1.09x at batch 1; the other 3x3/2
     * layers were at 1 tile already, and conv1 (3 channels) reads 39 KB. The tuner's 28x28/2
     * fixture runs 1 tile whatever WGN, so it cannot see this. */
    size_t wgn = tiles < (size_t)v[P_WGN] ? tiles : (size_t)v[P_WGN];
    size_t row_bytes = p->Cg * pc.phh * pc.phw * pc.Wq * sizeof(float),
           tile = kvec ? (size_t)v[P_WGM] : (size_t)v[P_VW] * v[P_WGM];
    size_t extra_rows = (p->R - 1) * p->dh / p->sh + 2, row_budget = (size_t)(pc.poly ? 256 : 512) << 10;
    while (wgn > 1 && (ceil_div(wgn * tile, pc.Wq) + extra_rows) * row_bytes > row_budget) wgn /= 2;
    size_t local[3] = {1, wgn, 1};
    size_t kb = (size_t)v[P_MWI] * (kvec ? (size_t)v[P_VW] : 1); /* output channels per work-item */
    size_t global[3] = {ceil_div(p->Kg, kb), ceil_div(tiles, local[1]) * local[1], 0};
    conv_problem q = *p;
    if (kvec) {
        /* STAGE 5: the weights packed (and widened) once per call into tessera's workspace, KB
         * output channels per tap (pack_weights), or once per content for a weight buffer marked
         * constant (derive_weights); every launch below reads the packed copy. */
        tsr_kernel *pk = NULL;
        size_t nkb = ceil_div(p->Kg, kb);
        pk = k[per ? 2 : 1];
        pthread_mutex_lock(&dev->lock);
        wlocked = true;
        {
            char key[96];
            snprintf(key, sizeof key, "conv2d packed w %s G %zu K %zu CRS %zu KB %zu", tsr_dtype_str(p->types[1]),
                     p->G, p->Kg, p->CRS, kb);
            pack_job job = {p, pk, geo, nkb * kb};
            TSR_CHECK(status,
                      derive_weights(dev, p, key, p->G * nkb * kb * p->CRS * sizeof(float), pack_into, &job, queue,
                                     &kept, &wlast),
                      done);
        }
        if (kept) {
            packed = kept; /* wlast: the command that made it, when it may still run (ours to release) */
        } else {
            if (tsr_workspace_get(dev, TSR_WS_CONV_W, p->G * nkb * kb * p->CRS * sizeof(float), &packed, &wlast) !=
                TSR_SUCCESS) {
                /* no room for the packed weights: the STAGE 0 form needs none */
                tsr_clear_diagnostics();
                pthread_mutex_unlock(&dev->lock);
                return launch_kernel(dev, p, &c0, true, queue, event);
            }
            wholding = true;
            size_t wglobal[3] = {nkb * kb, ceil_div(p->CRS, 16), p->G}, wlocal[3];
            cl_ulong w_off = p->w_off;
            tsr_kernel_lock(held = pk);
            TSR_CL_CHECK(status, tsr_set_arg(pk->kernel, 0, sizeof geo, geo), done);
            TSR_CL_CHECK(status, tsr_set_arg(pk->kernel, 1, sizeof p->w, &p->w), done);
            TSR_CL_CHECK(status, tsr_set_arg(pk->kernel, 2, sizeof w_off, &w_off), done);
            TSR_CL_CHECK(status, tsr_set_arg(pk->kernel, 3, sizeof packed, &packed), done);
            cl_event prior = wlast;
            wlast = NULL;
            cl_int err = tsr_enqueue_kernel(queue, pk->kernel, 3, NULL, wglobal, tsr_spread_local(dev, 3, wglobal, wlocal), prior ? 1 : 0,
                                            prior ? &prior : NULL, &wlast);
            if (err != CL_SUCCESS) { /* (prior is the workspace's to release, not ours) */
                status = tsr_fail_cl(err, "tsr_enqueue_kernel(pack_weights)", __FILE__, __LINE__);
                goto done;
            }
            tsr_kernel_unlock(pk);
            held = NULL;
        }
        q.w = packed, q.w_off = 0;
    }
    /* Each cached kernel is locked from its first argument to its enqueue, one at a time (a leaf
     * lock): the arguments of both kernels are set again before each of their launches. */
    if (!per) { /* no padding, fp32, no stride (or STAGE 5's 1x1, any stride or type): x is what the kernel reads */
        global[2] = p->N * p->G;
        if (in_place) memcpy(pgeo, geo, sizeof geo); /* x's own rows and strides */
        if (kvec) {
            pgeo[15] = (cl_int)(p->N * p->PQ);
            local[0] = local[1], local[1] = 1; /* pixel tiles first (see the kernel) */
            global[1] = global[0];
            global[0] = ceil_div(ceil_div(p->N * p->PQ, (size_t)v[P_WGM]), local[0]) * local[0];
            global[2] = p->G; /* the pixels span the images */
        }
        tsr_kernel_lock(held = kernel);
        TSR_CL_CHECK(status, tsr_set_arg(kernel->kernel, 0, sizeof pgeo, pgeo), done);
        TSR_CL_CHECK(status, tsr_set_arg(kernel->kernel, 1, sizeof p->x, &p->x), done);
        cl_ulong x_off = p->x_off;
        TSR_CL_CHECK(status, tsr_set_arg(kernel->kernel, 2, sizeof x_off, &x_off), done);
        TSR_CHECK(status, set_common_args(kernel->kernel, &q, 3), done);
        TSR_CL_CHECK(status,
                     tsr_enqueue_kernel(queue, kernel->kernel, 3, NULL, global, local, wlast ? 1 : 0,
                                        wlast ? &wlast : NULL, &last),
                     done);
        goto done;
    }
    pad = k[1];
    pthread_mutex_lock(&dev->lock); /* tessera's workspace is shared by every call on the device */
    locked = true;
    /* Polyphase copies (strided layers) on CPUs go in chunks of at most 2 MiB (one image of
     * ResNet-50's 56x56/2 and 28x28/2 layers, two of its 14x14/2): the kernel then reads a copy
     * just written, still in the caches, and the copy itself ran faster. On the 2-core Zen 5
     * (session 19, batch 8, load 8-13, PoCL's CPU samples of both kernels) the 3x3/2 layers took
     * 1-8% less CPU time than with 8 MiB chunks (the copy 3-22% less). */
    size_t cap = pc.poly && dev->info.type == TSR_DEVICE_CPU ? (size_t)2 << 20 : workspace_cap(dev);
    if (cap < per) cap = per;
    size_t chunk = cap / per < p->N ? cap / per : p->N;
    cl_mem xp = NULL;
    if (tsr_workspace_get(dev, TSR_WS_CONV_COL, chunk * per, &xp, &last) != TSR_SUCCESS) {
        /* no room for the padded copy: the STAGE 0 form needs none */
        pthread_mutex_unlock(&dev->lock);
        return launch_kernel(dev, p, &c0, true, queue, event);
    }
    holding = true;
    if (last) clRetainEvent(last);
    cl_int hq = (cl_int)pc.Hq, phw = (cl_int)pc.phw, wq = (cl_int)pc.Wq;
    /* pad_input's whole-plane copies, one work-item per channel and image: a 16-bit x's unpadded
     * unstrided planes, and an fp32 x's phase planes (strided layers: the row form's per-row setup
     * dominated the copy on rows of 28 and 14 columns, session 26) */
    const bool whole_planes = (p->types[0] != TSR_F32 && !pc.poly && p->ph == 0 && p->pw == 0 && pc.Wq == p->W &&
                               pc.phh == 1 && pc.phw == 1) ||
                              (p->types[0] == TSR_F32 && pc.poly);
    cl_ulong zero = 0;
    for (size_t n0 = 0; n0 < p->N; n0 += chunk) {
        size_t nc = p->N - n0 < chunk ? p->N - n0 : chunk;
        cl_ulong x_off = p->x_off + n0 * p->C * p->H * p->W;
        /* a whole-plane copy: one work-item per channel and image (pad_input reads the size 1) */
        size_t pglobal[3] = {whole_planes ? 1 : pc.phh * pc.Hq, p->C, nc}, plocal[3];
        /* `last` is always the newest command that touches the workspace (recorded at done:,
         * also on an error, so the next user waits for whatever was enqueued). The previous
         * chunk's kernel (or the workspace's last user) must be done with it before the pad. */
        cl_event padded = NULL, done = NULL;
        tsr_kernel_lock(held = pad);
        TSR_CL_CHECK(status, tsr_set_arg(pad->kernel, 0, sizeof geo, geo), done);
        TSR_CL_CHECK(status, tsr_set_arg(pad->kernel, 1, sizeof p->x, &p->x), done);
        TSR_CL_CHECK(status, tsr_set_arg(pad->kernel, 2, sizeof x_off, &x_off), done);
        TSR_CL_CHECK(status, tsr_set_arg(pad->kernel, 3, sizeof xp, &xp), done);
        TSR_CL_CHECK(status, tsr_set_arg(pad->kernel, 4, sizeof hq, &hq), done);
        TSR_CL_CHECK(status, tsr_set_arg(pad->kernel, 5, sizeof phw, &phw), done);
        TSR_CL_CHECK(status, tsr_set_arg(pad->kernel, 6, sizeof wq, &wq), done);
        TSR_CL_CHECK(status,
                     tsr_enqueue_kernel(queue, pad->kernel, 3, NULL, pglobal, tsr_spread_local(dev, 3, pglobal, plocal), last ? 1 : 0, last ? &last : NULL,
                                        &padded),
                     done);
        tsr_kernel_unlock(pad);
        held = NULL;
        if (last) clReleaseEvent(last);
        last = padded;
        q.y_off = p->y_off + n0 * p->K * p->PQ;
        q.r_off = p->r_off + n0 * p->K * p->PQ; /* the residual has y's shape */
        global[2] = nc * p->G;
        cl_event waits[2] = {last, wlast}; /* the copy and, for STAGE 5, the packed weights */
        if (kvec) { /* the chunk's pixel tiles (images crossed), channel blocks, groups */
            pgeo[15] = (cl_int)(nc * p->PQ);
            local[0] = wgn, local[1] = 1;
            global[1] = ceil_div(p->Kg, kb);
            global[0] = ceil_div(ceil_div(nc * p->PQ, (size_t)v[P_WGM]), local[0]) * local[0];
            global[2] = p->G;
        }
        tsr_kernel_lock(held = kernel);
        TSR_CL_CHECK(status, tsr_set_arg(kernel->kernel, 0, sizeof pgeo, pgeo), done);
        TSR_CL_CHECK(status, tsr_set_arg(kernel->kernel, 1, sizeof xp, &xp), done);
        TSR_CL_CHECK(status, tsr_set_arg(kernel->kernel, 2, sizeof zero, &zero), done);
        TSR_CHECK(status, set_common_args(kernel->kernel, &q, 3), done);
        TSR_CL_CHECK(status,
                     tsr_enqueue_kernel(queue, kernel->kernel, 3, NULL, global, local, wlast ? 2 : 1, waits, &done),
                     done);
        tsr_kernel_unlock(kernel);
        held = NULL;
        clReleaseEvent(last);
        last = done;
    }
done:
    if (held) tsr_kernel_unlock(held);
    if (holding) tsr_workspace_set_last_use(dev, TSR_WS_CONV_COL, last);
    if (locked) pthread_mutex_unlock(&dev->lock);
    if (wholding || kept) {
        if (status != TSR_SUCCESS) clFinish(queue); /* nothing enqueued may still read the packed weights */
        if (wholding) tsr_workspace_set_last_use(dev, TSR_WS_CONV_W, status == TSR_SUCCESS ? last : NULL);
        tsr_derived_done(kept, NULL, status == TSR_SUCCESS ? last : NULL);
    }
    if (wlast) clReleaseEvent(wlast);
    if (wlocked) pthread_mutex_unlock(&dev->lock);
    if (last) {
        if (event && status == TSR_SUCCESS) *event = last;
        else clReleaseEvent(last);
    }
    return status;
}

/* Bytes of column matrices per image (all groups; fp32 whatever x's type), 0 when the layer
 * needs none. */
static size_t col_bytes_per_image(const conv_problem *p) {
    return is_pointwise(p) ? 0 : p->G * p->CRS * p->PQ * sizeof(float);
}

/* im2col needs one image's column matrices in one allocation when they go to tessera's own
 * workspace (a caller's workspace is checked against its size; pointwise layers need none). */
static bool im2col_accepts(const tsr_device *dev, const void *problem) {
    const conv_problem *p = problem;
    return p->ws || col_bytes_per_image(p) <= dev->info.max_alloc_bytes;
}

/* STAGE 2 on a small plane: its flattened rows (P x the copy's width, in tiles of VW-pixel vectors)
 * leave at least 1/8 of the lanes on padded columns or past the plane (ResNet-50's 14x14 layers
 * 12.5%, 7x7 23%), where STAGE 5's channel vectors waste none. It runs STAGE 5's kernel instead
 * (2 x 16 channels x 8 pixels, 16 tiles a work-group) when the vectors are 16 floats wide (the
 * tile fills AVX-512's 32 registers) and the call has at least 1024 output pixels (images x P
 * x Q) to share each packed weight: on the 2-core Zen 5 of session 18 it ran ResNet-50's 14x14
 * layers at batch 8 1.2x faster, and lost on 7x7 at batch 8 (392 pixels: the per-call packing
 * and the weights' stream from L2 outweigh the lanes) and on everything at batch 1. Not on strided
 * layers: their polyphase copy is four times the output plane, and STAGE 5's single-pixel reads
 * over every channel's phase planes ran ResNet-50's 28x28/2 layer at batch 8 at 0.69x STAGE 2
 * (17.8 against 12.3 ms of CPU time, load 8; session 19). */
static bool channel_vectors_instead(const conv_problem *p, const tsr_config *cfg) {
    const int *v = cfg->values;
    if (v[P_ALGO] != TSR_CONV_IMPLICIT || v[P_STAGE] != 2 || v[P_VW] != 16 || p->N * p->PQ < 1024) return false;
    if (p->sh > 1 || p->sw > 1) return false;
    size_t wq = padded_geometry(p, 16).Wq, span = p->P * wq;
    int nv = padded_vectors(span, 16, v[P_WGM]);
    size_t lanes = ceil_div(span, (size_t)16 * nv) * nv * 16;
    return 8 * (lanes - p->PQ) >= lanes;
}

/* ---- the Winograd form (STAGE 6, cl/conv_winograd.cl) ---- */

/* Channels per work-group of the input and output transforms. */
#define WINO_CH 8
/* Floats M holds past the GEMMs' products (wino_output's reads past a chunk's last tile). */
#define WINO_M_SLACK 8

/* Layers F(2x2, 3x3) computes: 3x3 kernels, stride 1, no dilation, one group. */
static bool winograd_fits(const conv_problem *p) {
    return p->R == 3 && p->S == 3 && p->sh == 1 && p->sw == 1 && p->dh == 1 && p->dw == 1 && p->G == 1;
}

/* Bytes of the transformed input V and the GEMMs' products M of one image ((wm + 2)^2 fp32 per
 * tile and channel each). */
static size_t winograd_bytes_per_image(const conv_problem *p, size_t wm) {
    return (wm + 2) * (wm + 2) * winograd_tiles(p, wm) * (p->C + p->K) * sizeof(float);
}

/* Bytes of local memory the fused F(2x2) form (STAGE 9, conv_winograd.cl's wino_fused) takes: V
 * for its 16 WGM tiles and every input channel, M for MWI output channels, one channel's outputs. */
static size_t wino_fused_local(const conv_problem *p, const tsr_config *cfg) {
    const size_t t = 16 * (size_t)cfg->values[P_WGM];
    return (16 * p->C * t + 16 * (size_t)cfg->values[P_MWI] * t + 4 * (t + 8)) * sizeof(float);
}

/* The CPU form's 16-bit weights widened into `wide` (K Cg R S floats) by conv_cpu.cl's
 * widen_weights, in a program of its own (only W_TYPE set): 16 elements a vector conversion,
 * where tsr_convert's f16 widening is integer code that keeps signalling NaNs' bits (1.5x its
 * bf16 shift's time on ResNet-50's 7x7 layer, a third of the fp32 convolution's at batch 1);
 * the convolution quiets such a NaN either way, so y's bits are the same. In the queue's order,
 * as tsr_convert's was. Nothing is enqueued unless it returns TSR_SUCCESS. */
static tsr_status widen_weights(tsr_device *dev, const conv_problem *p, cl_mem wide, cl_command_queue queue,
                                cl_event *done) {
    tsr_status status = TSR_SUCCESS;
    tsr_kernel *k = NULL, *ks[TSR_LAUNCH_KERNELS];
    tsr_launch_key key;
    uint64_t generation;
    conv_key(&key, &conv_widen_tag, NULL, NULL, false, (uint32_t)p->types[1]);
    if (!conv_kernels_find(dev, &key, ks, &generation)) {
        char options[32];
        snprintf(options, sizeof options, "-DW_TYPE=%d", (int)p->types[1]);
        TSR_CHECK(status, conv_kernels_make(dev, &key, generation, "conv_cpu", options, "widen_weights", ks), done);
    }
    k = ks[0];
    const cl_ulong w_off = p->w_off, n = p->K * p->CRS;
    const size_t global = ceil_div(p->K * p->CRS, 64);
    size_t local[3];
    tsr_kernel_lock(k);
    TSR_CL_CHECK(status, tsr_set_arg(k->kernel, 0, sizeof p->w, &p->w), unlock);
    TSR_CL_CHECK(status, tsr_set_arg(k->kernel, 1, sizeof w_off, &w_off), unlock);
    TSR_CL_CHECK(status, tsr_set_arg(k->kernel, 2, sizeof wide, &wide), unlock);
    TSR_CL_CHECK(status, tsr_set_arg(k->kernel, 3, sizeof n, &n), unlock);
    TSR_CL_CHECK(status, tsr_enqueue_kernel(queue, k->kernel, 1, NULL, &global, tsr_spread_local(dev, 1, &global, local), 0, NULL, done), unlock);
unlock:
    tsr_kernel_unlock(k);
done:
    return status;
}

/* p's weights widened into `wide`: by widen_weights where the STAGE 2 program's kernel is asked
 * for and can be had, else by tsr_convert's kernel (a device without that program, e.g. one
 * running ahead-of-time binaries only, as other forms do). *done (when not NULL) receives the
 * event of the command. Nothing is enqueued unless it returns TSR_SUCCESS. */
typedef struct widen_job {
    const conv_problem *p;
    bool own_kernel; /* widen_weights first */
} widen_job;

static tsr_status widen_into(tsr_device *dev, void *ctx, cl_mem wide, cl_command_queue queue, cl_event *done) {
    const widen_job *j = ctx;
    const conv_problem *p = j->p;
    if (done) *done = NULL;
    if (j->own_kernel && widen_weights(dev, p, wide, queue, done) == TSR_SUCCESS) return TSR_SUCCESS;
    tsr_clear_diagnostics();
    return tsr_convert(dev, p->types[1], p->w, p->w_off, TSR_F32, wide, 0, p->K * p->CRS, queue, done);
}

static tsr_status launch_implicit(tsr_device *dev, const void *problem, const tsr_config *cfg, cl_command_queue queue,
                                  cl_event *event);

/* Bytes of V and M a chunk of images keeps to on CPUs (more where one image needs more). On the
 * Zen 5 (2 x 1 MiB L2, 32 MiB L3, shared with other machines' work) the input transform slowed
 * with the chunk: the 56x56 layer at batch 8 in F(4x4), 190 us of it per image in chunks of 3.6
 * MB, 425 in 7.2 MB, 925 in 29 MB. In F(2x2) at batch 8 (three alternating runs, loaded) the
 * 28x28 layer ran 1.39-1.46x the STAGE 2 form in chunks of 1 image (3.2 MB), 0.92-1.09x in 2 to
 * 8; the 14x14 one 1.15-1.35x in 2 images (3.2 MB), 0.84-0.90x in 4, 1.14-1.20x in 6, 0.91-0.93x
 * in 8 (GEMM shapes as much as the cache). GPUs: im2col's cap. */
static size_t winograd_cap(const tsr_device *dev) {
    return dev->info.type == TSR_DEVICE_CPU ? (size_t)4 << 20 : workspace_cap(dev);
}

/* Images per chunk for wm x wm tiles: V and M within winograd_cap, at least one image, at most
 * the batch. */
static size_t winograd_chunk(const tsr_device *dev, const conv_problem *p, size_t wm) {
    size_t per = winograd_bytes_per_image(p, wm), n = winograd_cap(dev) / per;
    if (n < 1) n = 1;
    return n < p->N ? n : p->N;
}

/* tsr_derived_get for data derived from p's weights (a weight buffer marked constant:
 * tsr_buffer_set_constant), except while the calling thread records a graph, whose replays derive
 * it again (they read the weights as they are then). */
static tsr_status derive_weights(tsr_device *dev, const conv_problem *p, const char *key, size_t bytes,
                                 tsr_derive_fn fill, void *ctx, cl_command_queue queue, cl_mem *out, cl_event *ready) {
    *out = NULL, *ready = NULL;
    if (tsr_graph_capturing()) return TSR_SUCCESS;
    return tsr_derived_get(dev, p->w, p->w_off * tsr_dtype_size(p->types[1]), key, bytes, fill, ctx, queue, out, ready);
}

/* A kernel argument of launch_after: its size, value and whether it is a buffer (a recording
 * graph retains those). */
typedef struct conv_arg {
    size_t size;
    const void *value;
    bool buffer;
} conv_arg;
#define CONV_ARG(v) {sizeof(v), &(v), _Generic(&(v), cl_mem *: true, const cl_mem *: true, default: false)}

/* One launch of a cached kernel: locked from its first argument to its enqueue (a leaf lock),
 * arguments 0 .. n-1 from `args` (then, with `common`, set_common_args' from n), enqueued after
 * *last (none when NULL), whose reference it then trades for the launch's event. On failure
 * *last is left as it was. */
static tsr_status launch_after(tsr_kernel *k, const conv_arg *args, cl_uint n, const conv_problem *common,
                               cl_command_queue queue, const size_t global[3], const size_t *local, cl_event *last) {
    tsr_status status = TSR_SUCCESS;
    cl_event ev = NULL;
    tsr_kernel_lock(k);
    for (cl_uint i = 0; i < n; ++i)
        TSR_CL_CHECK(status, tsr_kernel_arg(k->kernel, i, args[i].size, args[i].value, args[i].buffer), done);
    if (common) TSR_CHECK(status, set_common_args(k->kernel, common, n), done);
    TSR_CL_CHECK(status,
                 tsr_enqueue_kernel(queue, k->kernel, 3, NULL, global, local, *last ? 1 : 0, *last ? last : NULL, &ev),
                 done);
done:
    tsr_kernel_unlock(k);
    if (status == TSR_SUCCESS) {
        if (*last) clReleaseEvent(*last);
        *last = ev;
    }
    return status;
}

/* wino_weights' launch: U = the transformed weights of p (nxi x K x C floats) into u. */
typedef struct wino_weights_job {
    const conv_problem *p;
    tsr_kernel *kernel;
    const cl_int *geo;
} wino_weights_job;

static tsr_status wino_weights_into(tsr_device *dev, void *ctx, cl_mem u, cl_command_queue queue, cl_event *done) {
    (void)dev;
    const wino_weights_job *j = ctx;
    const cl_ulong w_off = j->p->w_off;
    const conv_arg args[] = {{16 * sizeof(cl_int), j->geo, false}, CONV_ARG(j->p->w), CONV_ARG(w_off), CONV_ARG(u)};
    const size_t global[3] = {j->p->C, j->p->K, 1};
    *done = NULL;
    size_t local[3];
    return launch_after(j->kernel, args, 4, NULL, queue, global, tsr_spread_local(dev, 3, global, local), done);
}

/* The transforms around one batched GEMM per chunk of images: the weights' transform U (in
 * tessera's TSR_WS_CONV_W slot, made on every call; for a weight buffer marked constant, kept
 * per device and made once per content: tsr_derived_get), then per chunk wino_input (V, in
 * TSR_WS_CONV_COL), tsr_matmul_pipeline's batch of 16 or 36 GEMMs (M, in TSR_WS_CONV_M; GEMM's
 * own configuration for the shape), and wino_output with the epilogue. Row-major, each GEMM xi
 * computes M[xi] (K x T) = U[xi] (K x C) times V[xi] (C x T). Layers it does not fit, and images
 * whose V and M one allocation cannot hold, run the implicit path's built-in form for the class,
 * and so do layers with too few tiles (WINO_MIN_TILES) unless WGN is 1. */
static tsr_status launch_winograd(tsr_device *dev, const conv_problem *p, const tsr_config *cfg,
                                  cl_command_queue queue, cl_event *event) {
    const bool fused = cfg->values[P_STAGE] == 9;
    size_t wm = cfg->values[P_STAGE] == 7 ? 4 : 2; /* the output tile */
    const bool guard = cfg->values[P_WGN] != 1 && !fused;
    const size_t min_tiles = guard ? WINO_MIN_TILES : 0;
    /* F(4x4) on planes with too few of its tiles per image takes F(2x2)'s, four times as many */
    if (wm == 4 && guard && winograd_tiles(p, 4) < WINO_F4_TILES) wm = 2;
    const size_t nxi = (wm + 2) * (wm + 2), tiles1 = winograd_tiles(p, wm);
    const size_t chunk = fused ? p->N : winograd_chunk(dev, p, wm); /* the fused form: the batch at once */
    /* V's and M's bytes per chunk, U's: checked, as every size derived from the caller's */
    size_t big = 0, ubytes = 0;
    bool wraps = __builtin_mul_overflow(nxi * sizeof(float), tiles1, &big) || __builtin_mul_overflow(big, chunk, &big) ||
                 __builtin_mul_overflow(big, p->C > p->K ? p->C : p->K, &big) ||
                 __builtin_mul_overflow(nxi * sizeof(float), p->K, &ubytes) || __builtin_mul_overflow(ubytes, p->C, &ubytes);
    /* (tile indices are ints in the kernels, up to a block of 32 past the last tile) */
    if (!winograd_fits(p) || wraps || tiles1 * chunk < min_tiles ||
        (fused && wino_fused_local(p, cfg) > dev->info.local_mem_bytes) ||
        (!fused && big > dev->info.max_alloc_bytes - WINO_M_SLACK * sizeof(float)) ||
        ubytes > dev->info.max_alloc_bytes || tiles1 * chunk > INT_MAX - 32) {
        tsr_config c = {.values = {[P_ALGO] = TSR_CONV_IMPLICIT}};
        tsr_op_implementation_default(&tsr_op_conv, tsr_op_implementation(&tsr_op_conv, &c), dev, conv_base_class(p), &c);
        /* a class whose default is a Winograd form (the AVX-512 3x3 and 3x3-wide: STAGE 9) takes
         * the small 3x3 calls' direct form */
        if (winograd_stage(c.values[P_STAGE]))
            tsr_op_implementation_default(&tsr_op_conv, tsr_op_implementation(&tsr_op_conv, &c), dev, "3x3-small", &c);
        if (winograd_stage(c.values[P_STAGE]) || !conv_config_ok(dev, p, &c))
            tsr_config_parse(&tsr_op_conv, implicit_fallback, "conv2d's fallback", &c);
        return launch_implicit(dev, p, &c, queue, event);
    }
    tsr_status status = TSR_SUCCESS;
    tsr_config form = *cfg; /* the program of the tile taken */
    form.values[P_STAGE] = fused ? 9 : wm == 4 ? 7 : 6;
    tsr_kernel *kw = NULL, *kin = NULL, *kout = NULL;
    cl_event last = NULL;
    bool locked = false, holding = false;
    cl_mem u = NULL, vb = NULL, mb = NULL, kept = NULL; /* kept: U derived once (tsr_derived_get) */
    cl_event pu = NULL, pv = NULL, pm = NULL, ready = NULL;
    {
        tsr_kernel *k[TSR_LAUNCH_KERNELS];
        tsr_launch_key key;
        uint64_t generation;
        conv_key(&key, &conv_winograd_tag, p, &form, false, 0);
        if (!conv_kernels_find(dev, &key, k, &generation)) {
            char options[256];
            program_options(p, &form, false, options, sizeof options);
            TSR_CHECK(status,
                      conv_kernels_make(dev, &key, generation, "conv_winograd", options,
                                        fused ? "wino_weights;wino_fused" : "wino_weights;wino_input;wino_output", k),
                      done);
        }
        kw = k[0], kin = k[1], kout = fused ? NULL : k[2];
    }
    cl_int geo[16];
    geometry_plain(p, geo);
    pthread_mutex_lock(&dev->lock); /* tessera's workspace is shared by every call on the device */
    locked = true;
    {
        char key[96];
        snprintf(key, sizeof key, "conv2d winograd F(%zux%zu) w %s K %zu C %zu", wm, wm, tsr_dtype_str(p->types[1]),
                 p->K, p->C);
        wino_weights_job job = {p, kw, geo};
        TSR_CHECK(status,
                  derive_weights(dev, p, key, ubytes, wino_weights_into,
                                  &job, queue, &kept, &ready),
                  done);
    }
    if (kept) u = kept;
    else TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_CONV_W, ubytes, &u, &pu), done);
    if (!fused)
        TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_CONV_COL, nxi * tiles1 * chunk * p->C * sizeof(float), &vb, &pv),
                  done);
    /* M with WINO_M_SLACK floats past its end: F(2x2)'s output transform reads a row's last tiles
     * 8 at a time (conv_winograd.cl) */
    if (!fused)
        TSR_CHECK(status,
                  tsr_workspace_get(dev, TSR_WS_CONV_M, (nxi * tiles1 * chunk * p->K + WINO_M_SLACK) * sizeof(float), &mb,
                                    &pm),
                  done);
    holding = true;
    /* The slots' last users (maybe on other queues) must be done before anything here writes
     * them, and a kept U made (maybe on another queue) before it is read. */
    cl_event priors[4];
    cl_uint np = 0;
    if (pu) priors[np++] = pu;
    if (pv) priors[np++] = pv;
    if (pm) priors[np++] = pm;
    if (ready) priors[np++] = ready;
    TSR_CL_CHECK(status, clEnqueueMarkerWithWaitList(queue, np, np ? priors : NULL, &last), done);
    if (!kept) {
        wino_weights_job job = {p, kw, geo};
        const cl_ulong w_off = p->w_off;
        const conv_arg args[] = {CONV_ARG(geo), CONV_ARG(job.p->w), CONV_ARG(w_off), CONV_ARG(u)};
        const size_t global[3] = {p->C, p->K, 1};
        size_t local[3];
        TSR_CHECK(status, launch_after(kw, args, 4, NULL, queue, global, tsr_spread_local(dev, 3, global, local), &last),
                  done);
    }
    if (fused) { /* one launch: a work-item per block of tiles and of output channels */
        const cl_int tiles = (cl_int)(tiles1 * p->N);
        /* WGN work-items share a block's output channels, MWI at a time (cl/conv_winograd.cl) */
        const size_t wf_t = 16 * (size_t)cfg->values[P_WGM], mwi = (size_t)cfg->values[P_MWI];
        const size_t kper = ceil_div(ceil_div(p->K, (size_t)cfg->values[P_WGN]), mwi) * mwi;
        const size_t gf[3] = {ceil_div(tiles1 * p->N, wf_t), ceil_div(p->K, kper), 1}, lf[3] = {1, 1, 1};
        const cl_ulong x_off = p->x_off;
        const conv_arg f_args[] = {CONV_ARG(geo), CONV_ARG(p->x), CONV_ARG(x_off), CONV_ARG(u),
                                   {wino_fused_local(p, cfg), NULL, false}, CONV_ARG(tiles)};
        TSR_CHECK(status, launch_after(kin, f_args, 6, p, queue, gf, lf, &last), done);
    }
    const size_t TP = ceil_div(p->P, wm);
    for (size_t n0 = 0; !fused && n0 < p->N; n0 += chunk) {
        size_t nc = p->N - n0 < chunk ? p->N - n0 : chunk, T = tiles1 * nc;
        cl_int tiles = (cl_int)T;
        cl_ulong x_off = p->x_off + n0 * p->C * p->H * p->W;
        cl_event gemm = NULL;
        /* WINO_CH channels of a tile row per work-group (dimension 0 holds one item, so PoCL does not
         * vectorize across work-items: the kernels carry their own vectors) */
        const size_t gin[3] = {TP, ceil_div(p->C, WINO_CH) * WINO_CH, nc}, lin[3] = {1, WINO_CH, 1};
        const conv_arg in_args[] = {CONV_ARG(geo), CONV_ARG(p->x), CONV_ARG(x_off), CONV_ARG(vb), CONV_ARG(tiles)};
        TSR_CHECK(status, launch_after(kin, in_args, 5, NULL, queue, gin, lin, &last), done);
        const tsr_matmul_desc desc = {.layout = TSR_ROW_MAJOR,
                                      .trans_a = TSR_NO_TRANS,
                                      .trans_b = TSR_NO_TRANS,
                                      .m = p->K,
                                      .n = T,
                                      .k = p->C,
                                      .batch = nxi,
                                      .alpha = 1.0f,
                                      .beta = 0.0f,
                                      .a = {TSR_F32, 0, p->C, p->K * p->C},
                                      .b = {TSR_F32, 0, T, T * p->C},
                                      .c = {TSR_F32, 0, T, T * p->K}};
        const tsr_matmul_extras extras = {.class_by_shape = true, .input_ready = last};
        status = tsr_matmul_pipeline(dev, &desc, &extras, u, vb, mb, queue, &gemm);
        if (status != TSR_SUCCESS) goto done;
        clReleaseEvent(last);
        last = gemm;
        conv_problem q = *p;
        q.y_off = p->y_off + n0 * p->K * p->PQ;
        q.r_off = p->r_off + n0 * p->K * p->PQ; /* the residual has y's shape */
        const size_t gout[3] = {TP, ceil_div(p->K, WINO_CH) * WINO_CH, nc}, lout[3] = {1, WINO_CH, 1};
        const conv_arg out_args[] = {CONV_ARG(geo), CONV_ARG(mb), CONV_ARG(tiles)};
        TSR_CHECK(status, launch_after(kout, out_args, 3, &q, queue, gout, lout, &last), done);
    }
done:
    if (holding || kept) {
        if (status != TSR_SUCCESS) clFinish(queue); /* nothing enqueued may still use the workspace */
        cl_event use = status == TSR_SUCCESS ? last : NULL;
        if (holding) {
            if (!kept) tsr_workspace_set_last_use(dev, TSR_WS_CONV_W, use);
            if (!fused) {
                tsr_workspace_set_last_use(dev, TSR_WS_CONV_COL, use);
                tsr_workspace_set_last_use(dev, TSR_WS_CONV_M, use);
            }
        }
        tsr_derived_done(kept, ready, use);
    }
    if (locked) pthread_mutex_unlock(&dev->lock);
    if (last) {
        if (event && status == TSR_SUCCESS) *event = last;
        else clReleaseEvent(last);
    }
    return status;
}

/* The end of a launch under dev->lock that may have read kept weights (`kept`, made ready by
 * `ready`; NULL: none): the copy handed back with the launch's last event (after a failure, once
 * nothing enqueued can still read it), the lock released, and `last` given to the caller's `event`
 * on success (else released). Returns `status`. */
static tsr_status end_kept_launch(tsr_device *dev, tsr_status status, cl_command_queue queue, cl_mem kept,
                                  cl_event ready, cl_event last, cl_event *event) {
    if (kept) {
        if (status != TSR_SUCCESS) clFinish(queue); /* nothing enqueued may still read the copy */
        tsr_derived_done(kept, ready, status == TSR_SUCCESS ? last : NULL);
    }
    pthread_mutex_unlock(&dev->lock);
    if (last) {
        if (event && status == TSR_SUCCESS) *event = last;
        else clReleaseEvent(last);
    }
    return status;
}

/* The implicit kernel: the padded-input CPU form (STAGE 2) has its own launch. 16-bit weights
 * are widened into an fp32 copy (kept per device for a weight buffer marked constant,
 * tsr_derived_get; else once per call, in tessera's workspace) (tsr_convert's kernel over K Cg
 * R S elements: small beside the convolution except where the weights outweigh the pixels, as
 * ResNet-50's 7x7 and 14x14 3x3 layers at batch 1) and the kernel is the fp32-weights
 * variant, so no tap converts a weight (issue #35: widening at every tap made 16-bit conv2d 2-5x
 * slower than fp32). Without room for the copy the kernel reads the 16-bit weights itself. */
static tsr_status launch_implicit(tsr_device *dev, const void *problem, const tsr_config *cfg, cl_command_queue queue,
                                  cl_event *event) {
    const conv_problem *p = problem;
    tsr_config kv;
    if (channel_vectors_instead(p, cfg)) {
        kv = *cfg;
        kv.values[P_STAGE] = 5, kv.values[P_MWI] = 2, kv.values[P_WGM] = 8, kv.values[P_WGN] = 16;
        cfg = &kv;
    }
    conv_problem q = *p;
    tsr_status status = TSR_SUCCESS;
    cl_event last = NULL, prior = NULL, ready = NULL;
    cl_mem wide = NULL, kept = NULL;
    pthread_mutex_lock(&dev->lock); /* tessera's workspace is shared by every call on the device */
    /* The Winograd form transforms the weights in their own type; it has its own launch. */
    if (winograd_stage(cfg->values[P_STAGE])) {
        pthread_mutex_unlock(&dev->lock);
        return launch_winograd(dev, p, cfg, queue, event);
    }
    /* STAGE 5 packs (and widens) the weights itself */
    /* STAGE 8 reads its nine weights a plane once, in their own type */
    const bool widen = p->types[1] != TSR_F32 && cfg->values[P_STAGE] != 5 && cfg->values[P_STAGE] != 8;
    if (widen) { /* a weight buffer marked constant: its widened copy is kept (tsr_derived_get) */
        char key[96];
        snprintf(key, sizeof key, "conv2d widened w %s %zu", tsr_dtype_str(p->types[1]), p->K * p->CRS);
        widen_job job = {p, cfg->values[P_STAGE] == 2};
        TSR_CHECK(status,
                  derive_weights(dev, p, key, p->K * p->CRS * sizeof(float),
                                  widen_into, &job, queue, &kept, &ready),
                  done);
    }
    if (kept) {
        /* made on another queue maybe: ordered before the kernel */
        if (ready) TSR_CL_CHECK(status, clEnqueueBarrierWithWaitList(queue, 1, &ready, NULL), done);
        q.w = kept, q.w_off = 0, q.types[1] = TSR_F32;
    } else if (widen &&
               tsr_workspace_get(dev, TSR_WS_CONV_W, p->K * p->CRS * sizeof(float), &wide, &prior) == TSR_SUCCESS) {
        /* its last user (maybe on another queue) must be done with it before the copy is written */
        if (prior) TSR_CL_CHECK(status, clEnqueueBarrierWithWaitList(queue, 1, &prior, NULL), done);
        widen_job job = {p, cfg->values[P_STAGE] == 2};
        TSR_CHECK(status, widen_into(dev, &job, wide, queue, NULL), done);
        q.w = wide, q.w_off = 0, q.types[1] = TSR_F32;
    } else {
        if (p->types[1] != TSR_F32) tsr_clear_diagnostics(); /* no room for the copy is no error */
        wide = NULL;
    }
    status = cfg->values[P_STAGE] == 2 || cfg->values[P_STAGE] == 5 ? launch_padded(dev, &q, cfg, queue, &last)
                                       : launch_kernel(dev, &q, cfg, true, queue, &last);
done:
    if (wide) {
        if (status != TSR_SUCCESS) clFinish(queue); /* nothing enqueued may still read the copy */
        tsr_workspace_set_last_use(dev, TSR_WS_CONV_W, status == TSR_SUCCESS ? last : NULL);
    }
    return end_kept_launch(dev, status, queue, kept, ready, last, event);
}

static tsr_status launch_direct(tsr_device *dev, const void *problem, const tsr_config *cfg, cl_command_queue queue,
                                cl_event *event) {
    return launch_kernel(dev, problem, cfg, false, queue, event);
}

/* The paths ALGO selects (tsr_conv_algo values): only the implicit kernel has a shape to tune. */
static const tsr_implementation conv_implementations[] = {
    {.name = "im2col", .value = TSR_CONV_IM2COL, .params = "", .accepts = im2col_accepts, .launch = launch_im2col},
    {.name = "implicit", .value = TSR_CONV_IMPLICIT, .params = "MWI VW STAGE WGM WGN KWG", .launch = launch_implicit},
    {.name = "direct", .value = TSR_CONV_DIRECT, .params = "", .launch = launch_direct},
};

/* Images per im2col chunk for a workspace of `bytes`. */
static size_t chunk_images(const conv_problem *p, size_t bytes) {
    size_t per = col_bytes_per_image(p);
    size_t n = per ? bytes / per : p->N;
    return n < p->N ? n : p->N;
}

/* The GEMMs of one chunk of images [n0, n0 + nc) reading column matrices from `col` (or x
 * itself for pointwise layers), after `ready`; *last receives the final GEMM's event. In
 * column-major terms each image and group computes y (PQ x Kg, ld PQ) = col (PQ x CRS, ld PQ)
 * times w^T (CRS x Kg, ld CRS): the call's columns are output channels, so the epilogue's
 * per-column bias is the per-channel bias. */
static tsr_status chunk_gemms(tsr_device *dev, const conv_problem *p, cl_mem col, size_t col_off, size_t n0,
                              size_t nc, cl_command_queue queue, cl_event ready, cl_event *last) {
    tsr_status status = TSR_SUCCESS;
    bool direct_x = col == p->x;
    size_t img_b = direct_x ? p->C * p->H * p->W : p->G * p->CRS * p->PQ; /* B per image */
    size_t grp_b = direct_x ? p->Cg * p->H * p->W : p->CRS * p->PQ;       /* B per group */
    size_t img_y = p->K * p->PQ;
    /* A = the column matrices (fp32) or x itself (x's type), B = w, C = y; offsets, leading
     * dimensions and strides count elements of each. */
    cl_event prev = ready;
    if (prev) clRetainEvent(prev);
    /* One group: a batch of images. Several: per image, a batch of groups. */
    size_t launches = p->G == 1 ? 1 : nc, batch = p->G == 1 ? nc : p->G;
    for (size_t l = 0; l < launches && status == TSR_SUCCESS; ++l) {
        size_t i = p->G == 1 ? 0 : l; /* image within the chunk */
        const tsr_matmul_desc desc = {
            .layout = TSR_COL_MAJOR,
            .trans_a = TSR_NO_TRANS,
            .trans_b = TSR_NO_TRANS,
            .m = p->PQ,
            .n = p->Kg,
            .k = p->CRS,
            .batch = batch,
            .alpha = 1.0f,
            .beta = 0.0f,
            .a = {direct_x ? p->types[0] : TSR_F32, col_off + i * img_b, p->PQ, p->G == 1 ? img_b : grp_b},
            .b = {p->types[1], p->w_off, p->CRS, p->G == 1 ? 0 : p->Kg * p->CRS},
            .c = {p->types[2], p->y_off + (n0 + i) * img_y, p->PQ, p->G == 1 ? img_y : p->Kg * p->PQ},
            .epilogue = {.bias = p->bias,
                         .bias_offset = p->b_off,
                         .bias_stride = p->G == 1 ? 0 : p->Kg,
                         .activation = (tsr_activation)p->act,
                         .scale = p->scale,
                         .scale_offset = p->s_off,
                         .scale_stride = p->G == 1 ? 0 : p->Kg,
                         .residual = p->res,
                         .residual_offset = p->r_off + (n0 + i) * img_y, /* y's shape: C's layout */
                         .residual_type = p->r_type}};
        const tsr_matmul_extras extras = {.class_by_shape = true, .input_ready = prev,
                                          .image_columns = p->G == 1 ? p->PQ : 0}; /* one GEMM across images */
        cl_event done = NULL;
        status = tsr_matmul_pipeline(dev, &desc, &extras, col, p->w, p->y, queue, &done);
        if (prev) clReleaseEvent(prev);
        prev = done;
    }
    *last = prev;
    return status;
}

static tsr_status launch_im2col_gemms(tsr_device *dev, const conv_problem *p, const tsr_config *cfg,
                                      cl_command_queue queue, cl_event *event);

/* im2col + GEMM. 16-bit weights in a buffer marked constant: the GEMM reads their fp32 copy, kept
 * per device as the implicit path's (the same key: one copy serves both paths), so its weight
 * panels are packed from fp32 like the fp32 layer's instead of being widened again on every call
 * (session 22: pack_b on f16 weights took 1.6x its fp32 samples on ResNet-50's 64->256 layer).
 * Unmarked weights (and a copy that cannot be kept) are widened by the GEMM's packing as before:
 * a copy made per call would be one more pass over them. */
static tsr_status launch_im2col(tsr_device *dev, const void *problem, const tsr_config *cfg, cl_command_queue queue,
                                cl_event *event) {
    const conv_problem *p = problem;
    if (p->types[1] == TSR_F32) return launch_im2col_gemms(dev, p, cfg, queue, event);
    conv_problem q = *p;
    tsr_status status = TSR_SUCCESS;
    cl_mem kept = NULL;
    cl_event ready = NULL, last = NULL;
    pthread_mutex_lock(&dev->lock); /* as launch_implicit's: the derived copy's registry and workspace */
    char key[96];
    snprintf(key, sizeof key, "conv2d widened w %s %zu", tsr_dtype_str(p->types[1]), p->K * p->CRS);
    /* conv_cpu.cl's widen_weights on the CPUs that run the CPU forms (vectors in a work-item), else
     * tsr_convert's kernel */
    widen_job job = {p, dev->info.type == TSR_DEVICE_CPU && tsr_device_lanes(&dev->info) == TSR_LANES_IN_ITEM};
    TSR_CHECK(status, derive_weights(dev, p, key, p->K * p->CRS * sizeof(float), widen_into, &job, queue, &kept, &ready),
              done);
    if (kept) {
        /* made on another queue maybe: ordered before the GEMMs */
        if (ready) TSR_CL_CHECK(status, clEnqueueBarrierWithWaitList(queue, 1, &ready, NULL), done);
        q.w = kept, q.w_off = 0, q.types[1] = TSR_F32;
    }
    status = launch_im2col_gemms(dev, &q, cfg, queue, &last);
done:
    return end_kept_launch(dev, status, queue, kept, ready, last, event);
}

static tsr_status launch_im2col_gemms(tsr_device *dev, const conv_problem *p, const tsr_config *cfg,
                                      cl_command_queue queue, cl_event *event) {
    if (is_pointwise(p)) {
        cl_event last = NULL;
        tsr_status st = chunk_gemms(dev, p, p->x, p->x_off, 0, p->N, queue, NULL, &last);
        if (event && st == TSR_SUCCESS) *event = last;
        else if (last) clReleaseEvent(last);
        return st;
    }
    tsr_status status = TSR_SUCCESS;
    size_t per = col_bytes_per_image(p);
    tsr_kernel *kernel = NULL, *k[TSR_LAUNCH_KERNELS];
    cl_int err;
    cl_event last = NULL;
    {
        tsr_launch_key key;
        uint64_t generation;
        conv_key(&key, &conv_im2col_tag, p, cfg, false, 0);
        if (!conv_kernels_find(dev, &key, k, &generation)) {
            char options[256];
            program_options(p, cfg, false, options, sizeof options);
            TSR_CHECK(status, conv_kernels_make(dev, &key, generation, "conv", options, "im2col", k), done);
        }
        kernel = k[0];
    }
    /* Tessera's own workspace is shared by every call on this device: hold the (recursive) lock
     * for the whole pipeline. */
    pthread_mutex_lock(&dev->lock);
    cl_mem col = p->ws;
    size_t chunk;
    if (col) {
        chunk = chunk_images(p, p->ws_bytes);
    } else {
        chunk = chunk_images(p, workspace_cap(dev) > per ? workspace_cap(dev) : per);
        if (!tsr_implementation_accepts(&conv_implementations[0], dev, p)) {
            status = tsr_fail(TSR_ERR_OUT_OF_MEMORY,
                              "conv2d: one image's column matrices need %zu bytes, more than one allocation may hold on "
                              "this device (%llu); use TSR_CONV_IMPLICIT", per,
                              (unsigned long long)dev->info.max_alloc_bytes);
            goto unlock;
        }
        TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_CONV_COL, chunk * per, &col, &last), unlock);
        if (last) clRetainEvent(last);
    }
    cl_int geo[16];
    geometry(p, geo);
    for (size_t n0 = 0; n0 < p->N && status == TSR_SUCCESS; n0 += chunk) {
        size_t nc = p->N - n0 < chunk ? p->N - n0 : chunk;
        cl_ulong x_off = p->x_off + n0 * p->C * p->H * p->W;
        /* CPUs: an input channel's whole planes an item; GPUs: a row of one tap (cl/conv.cl) */
        const bool cpu = dev->info.type == TSR_DEVICE_CPU;
        size_t global[3] = {cpu ? 1 : p->P, cpu ? p->Cg : p->CRS, nc * p->G}, local[3];
        cl_event written = NULL;
        /* the cached kernel's arguments are this chunk's until its enqueue (not across the
         * GEMMs, which lock their own kernels) */
        tsr_kernel_lock(kernel);
        err = tsr_set_arg(kernel->kernel, 0, sizeof geo, geo);
        if (err == CL_SUCCESS) err = tsr_set_arg(kernel->kernel, 1, sizeof p->x, &p->x);
        if (err == CL_SUCCESS) err = tsr_set_arg(kernel->kernel, 2, sizeof x_off, &x_off);
        if (err == CL_SUCCESS) err = tsr_set_arg(kernel->kernel, 3, sizeof col, &col);
        /* The previous chunk's GEMMs (or the workspace's last reader) must be done with it. */
        if (err == CL_SUCCESS)
            err = tsr_enqueue_kernel(queue, kernel->kernel, 3, NULL, global, tsr_spread_local(dev, 3, global, local), last ? 1 : 0, last ? &last : NULL,
                                     &written);
        tsr_kernel_unlock(kernel);
        if (last) clReleaseEvent(last);
        last = NULL;
        TSR_CL_CHECK(status, err, unlock);
        status = chunk_gemms(dev, p, col, 0, n0, nc, queue, written, &last);
        clReleaseEvent(written);
    }
    if (!p->ws) tsr_workspace_set_last_use(dev, TSR_WS_CONV_COL, last);
unlock:
    pthread_mutex_unlock(&dev->lock);
done:
    if (last) {
        if (event && status == TSR_SUCCESS) *event = last;
        else clReleaseEvent(last);
    }
    return status;
}

/* The configuration a call runs with: AUTO takes the resolved one; a forced path takes it when
 * it is that path, else the built-in shape of that path for the class. */
static tsr_status conv_config(tsr_device *dev, const conv_problem *p, tsr_config *cfg, tsr_config_info *info) {
    tsr_status st = tsr_op_config(dev, &tsr_op_conv, p, cfg);
    if (st == TSR_SUCCESS && info) st = tsr_op_config_lookup(dev, &tsr_op_conv, conv_problem_class(p), info);
    if (st != TSR_SUCCESS) return st;
    if (p->algo != TSR_CONV_AUTO && cfg->values[P_ALGO] != (int)p->algo) {
        tsr_config forced = {.values = {[P_ALGO] = (int)p->algo}};
        tsr_op_implementation_default(&tsr_op_conv, tsr_op_implementation(&tsr_op_conv, &forced), dev,
                                      conv_base_class(p), cfg); /* the built-in rows name fp32 classes */
        if (!conv_config_ok(dev, p, cfg))                       /* e.g. a device with a small work-group limit */
            st = tsr_config_parse(&tsr_op_conv, implicit_fallback, "conv2d's fallback", cfg);
    }
    return st;
}

/* ---- channels-last (TSR_NHWC): computed in NCHW between two transposes (cl/conv_layout.cl) ---- */

/* Each of `images` A x B matrices of src (elements of type t from src_off) transposed into dst
 * (from dst_off). */
static tsr_status transpose_images(tsr_device *dev, cl_command_queue queue, tsr_dtype t, size_t A, size_t B,
                                   size_t images, cl_mem src, size_t src_off, cl_mem dst, size_t dst_off,
                                   cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    tsr_kernel *cached = NULL, *k[TSR_LAUNCH_KERNELS];
    tsr_launch_key key;
    uint64_t generation;
    conv_key(&key, &conv_transpose_tag, NULL, NULL, false, (uint32_t)tsr_dtype_size(t));
    if (!conv_kernels_find(dev, &key, k, &generation)) {
        char options[32];
        snprintf(options, sizeof options, "-DELT_BYTES=%zu", tsr_dtype_size(t));
        TSR_CHECK(status, conv_kernels_make(dev, &key, generation, "conv_layout", options, "transpose_images", k), done);
    }
    cached = k[0];
    cl_kernel kernel = cached->kernel;
    tsr_kernel_lock(cached); /* the cached kernel's arguments are this call's until the enqueue */
    cl_int a = (cl_int)A, b = (cl_int)B;
    cl_ulong so = src_off, dof = dst_off;
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 0, sizeof a, &a), done);
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 1, sizeof b, &b), done);
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 2, sizeof src, &src), done);
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 3, sizeof so, &so), done);
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 4, sizeof dst, &dst), done);
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 5, sizeof dof, &dof), done);
    size_t global[3] = {ceil_div(B, 16), ceil_div(A, 16), images}, local[3];
    TSR_CL_CHECK(status, tsr_enqueue_kernel(queue, kernel, 3, NULL, global, tsr_spread_local(dev, 3, global, local), 0, NULL, event), done);
done:
    if (cached) tsr_kernel_unlock(cached);
    return status;
}

/* Channels-last depthwise layers under a STAGE 8 configuration (one channel per group, C = K = G;
 * any kernel size, padding, stride and dilation): cl/conv_cpu.cl's conv_dw_nhwc on x and y as they
 * lie, vectors along the channels (VW the largest of the configuration's width, 8, 4, 2, 1 that
 * divides C), no transposes. */
static bool dw_nhwc_fits(const conv_problem *p, const tsr_config *cfg) {
    return cfg->values[P_ALGO] == TSR_CONV_IMPLICIT && cfg->values[P_STAGE] == 8 && p->C == p->G && p->K == p->G &&
           p->C <= INT_MAX / 2 && p->N <= INT_MAX && p->P <= INT_MAX;
}

static tsr_status launch_dw_nhwc(tsr_device *dev, const conv_problem *p, const tsr_config *cfg,
                                 cl_command_queue queue, cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    tsr_config form = *cfg;
    int vw = form.values[P_VW];
    while (vw > 1 && p->C % (size_t)vw) vw /= 2;
    form.values[P_VW] = vw;
    tsr_kernel *cached = NULL, *k[TSR_LAUNCH_KERNELS];
    tsr_launch_key key;
    uint64_t generation;
    conv_key(&key, &conv_dw_nhwc_tag, p, &form, true, 0);
    if (!conv_kernels_find(dev, &key, k, &generation)) {
        char options[256];
        program_options(p, &form, true, options, sizeof options);
        TSR_CHECK(status, conv_kernels_make(dev, &key, generation, "conv_cpu", options, "conv_dw_nhwc", k), done);
    }
    cached = k[0];
    cl_kernel kernel = cached->kernel;
    tsr_kernel_lock(cached); /* the cached kernel's arguments are this call's until the enqueue */
    cl_int geo[16];
    geometry_plain(p, geo);
    cl_ulong x_off = p->x_off;
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 0, sizeof geo, geo), done);
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 1, sizeof p->x, &p->x), done);
    TSR_CL_CHECK(status, tsr_set_arg(kernel, 2, sizeof x_off, &x_off), done);
    TSR_CHECK(status, set_common_args(kernel, p, 3), done);
    /* up to WGN output rows of a channel block a work-group */
    size_t rows = (size_t)cfg->values[P_WGN] < p->P ? (size_t)cfg->values[P_WGN] : p->P;
    if (rows > dev->info.max_work_item_sizes[1] || rows > dev->info.max_work_group_size) rows = 1;
    size_t local[3] = {1, rows, 1}, global[3] = {p->C / (size_t)vw, ceil_div(p->P, rows) * rows, p->N};
    TSR_CL_CHECK(status, tsr_enqueue_kernel(queue, kernel, 3, NULL, global, local, 0, NULL, event), done);
done:
    if (cached) tsr_kernel_unlock(cached);
    return status;
}

/* The NHWC call's temporaries, released when its last command completes. */
typedef struct nhwc_temps {
    cl_mem mem[3];
} nhwc_temps;

static void CL_CALLBACK release_temps(cl_event event, cl_int status, void *data) {
    (void)event, (void)status;
    nhwc_temps *t = data;
    for (int i = 0; i < 3; ++i)
        if (t->mem[i]) clReleaseMemObject(t->mem[i]);
    free(t);
}

/* A validated NHWC call: x (and the residual) transposed into NCHW temporaries, the NCHW
 * convolution into a third, and that transposed into y. The temporaries are released by a
 * callback on the last transpose's completion (not at once: some implementations, Oclgrind's,
 * free a released buffer before the queued commands that use it ran); a recording graph retains
 * them itself. Commands follow each other on the queue (in order, as every multi-kernel op here). */
static tsr_status conv_channels_last(tsr_device *dev, const tsr_conv2d_desc *desc, const conv_problem *p,
                                     tsr_config *cfg, cl_command_queue queue, cl_event *event) {
    if (dw_nhwc_fits(p, cfg)) return launch_dw_nhwc(dev, p, cfg, queue, event);
    tsr_status status = TSR_SUCCESS;
    cl_mem xt = NULL, yt = NULL, rt = NULL;
    cl_event last = NULL;
    cl_int err;
    size_t hw = p->H * p->W, nx = p->N * p->C * hw, ny = p->N * p->K * p->PQ;
    xt = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, nx * tsr_dtype_size(p->types[0]), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    yt = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, ny * tsr_dtype_size(p->types[2]), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    conv_problem c = *p;
    c.layout = TSR_NCHW;
    c.x = xt, c.x_off = 0, c.y = yt, c.y_off = 0;
    TSR_CHECK(status, transpose_images(dev, queue, p->types[0], hw, p->C, p->N, p->x, p->x_off, xt, 0, NULL), done);
    if (p->res) {
        rt = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, ny * tsr_dtype_size(p->r_type), NULL, &err);
        TSR_CL_CHECK(status, err, done);
        TSR_CHECK(status, transpose_images(dev, queue, p->r_type, p->PQ, p->K, p->N, p->res, p->r_off, rt, 0, NULL),
                  done);
        c.res = rt, c.r_off = 0;
    }
    status = tsr_op_launch(&tsr_op_conv, dev, &c, cfg, queue, NULL);
    if (desc->algo == TSR_CONV_AUTO && !p->ws && tsr_op_build_fallback(dev, &tsr_op_conv, &c, status, cfg))
        status = tsr_op_launch(&tsr_op_conv, dev, &c, cfg, queue, NULL);
    if (status != TSR_SUCCESS) goto done;
    TSR_CHECK(status, transpose_images(dev, queue, p->types[2], p->K, p->PQ, p->N, yt, 0, p->y, p->y_off, &last),
              done);
    nhwc_temps *t = malloc(sizeof *t);
    if (t) {
        t->mem[0] = xt, t->mem[1] = yt, t->mem[2] = rt;
        if (clSetEventCallback(last, CL_COMPLETE, release_temps, t) == CL_SUCCESS) {
            xt = yt = rt = NULL; /* the callback's now */
        } else {
            free(t);
            clWaitForEvents(1, &last); /* no callback: released below once the commands are done */
        }
    } else {
        clWaitForEvents(1, &last);
    }
done:
    if (status != TSR_SUCCESS) clFinish(queue); /* nothing enqueued may still use the temporaries */
    if (xt) clReleaseMemObject(xt);
    if (yt) clReleaseMemObject(yt);
    if (rt) clReleaseMemObject(rt);
    if (last) {
        if (event && status == TSR_SUCCESS) *event = last;
        else clReleaseEvent(last);
    }
    return status;
}

tsr_status tsr_conv2d(tsr_device *dev, const tsr_conv2d_desc *desc, cl_mem x, cl_mem w, cl_mem y,
                      cl_command_queue queue, cl_event *event) {
    tsr_clear_diagnostics();
    if (event) *event = NULL;
    conv_problem p;
    tsr_status st = conv_validate(dev, desc, x, w, y, &p);
    if (st != TSR_SUCCESS) return st;
    tsr_op_output(y);
    cl_command_queue q;
    TSR_CHECK(st, tsr_resolve_queue(dev, queue, &q), done);
    tsr_config cfg;
    TSR_CHECK(st, conv_config(dev, &p, &cfg, NULL), done);
    if (p.ws && cfg.values[P_ALGO] == TSR_CONV_IM2COL && col_bytes_per_image(&p) > p.ws_bytes)
        return tsr_fail(TSR_ERR_BUFFER_TOO_SMALL,
                        "conv2d: the workspace holds %zu bytes, less than one image's column matrices (%zu bytes)",
                        p.ws_bytes, col_bytes_per_image(&p));
    if (p.layout == TSR_NHWC) return conv_channels_last(dev, desc, &p, &cfg, q, event);
    st = tsr_op_launch(&tsr_op_conv, dev, &p, &cfg, q, event);
    /* Only an automatic choice falls back: a forced path is the caller's contract, and a caller's
     * workspace was sized for the path chosen. */
    if (desc->algo == TSR_CONV_AUTO && !p.ws && tsr_op_build_fallback(dev, &tsr_op_conv, &p, st, &cfg))
        st = tsr_op_launch(&tsr_op_conv, dev, &p, &cfg, q, event);
done:
    return st;
}

tsr_status tsr_conv2d_output_size(const tsr_conv2d_desc *desc, size_t *out_h, size_t *out_w) {
    tsr_clear_diagnostics();
    if (!out_h || !out_w) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_conv2d_output_size: out_h and out_w must be set");
    conv_problem p;
    tsr_status st = conv_shape(desc, &p);
    if (st != TSR_SUCCESS) return st;
    *out_h = p.P, *out_w = p.Q;
    return TSR_SUCCESS;
}

tsr_status tsr_conv2d_workspace_size(tsr_device *dev, const tsr_conv2d_desc *desc, size_t *bytes, size_t *min_bytes) {
    tsr_clear_diagnostics();
    if (!dev || !bytes) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_conv2d_workspace_size: device and bytes must be set");
    *bytes = 0;
    if (min_bytes) *min_bytes = 0;
    conv_problem p;
    tsr_status st = conv_shape(desc, &p);
    if (st != TSR_SUCCESS) return st;
    tsr_config cfg;
    TSR_CHECK(st, conv_config(dev, &p, &cfg, NULL), done);
    if (cfg.values[P_ALGO] != TSR_CONV_IM2COL) return TSR_SUCCESS;
    size_t per = col_bytes_per_image(&p);
    *bytes = chunk_images(&p, workspace_cap(dev) > per ? workspace_cap(dev) : per) * per;
    if (min_bytes) *min_bytes = per;
done:
    return st;
}

tsr_status tsr_conv2d_plan(tsr_device *dev, const tsr_conv2d_desc *desc, tsr_conv_algo *algo, tsr_config_info *info) {
    tsr_clear_diagnostics();
    if (!dev || !algo || !info) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_conv2d_plan: device, algo and info must be set");
    conv_problem p;
    tsr_status st = conv_shape(desc, &p);
    if (st != TSR_SUCCESS) return st;
    tsr_config cfg;
    TSR_CHECK(st, conv_config(dev, &p, &cfg, info), done);
    *algo = (tsr_conv_algo)cfg.values[P_ALGO];
    tsr_config_format(&tsr_op_conv, &cfg, info->config, sizeof info->config);
done:
    return st;
}

/* ---- the fixture: one layer, "NxCxHxW kK RxS" with optional " pPAD sSTRIDE gGROUPS nhwc +bias DTYPE"
 * (DTYPE as tsr_dtype_spec_parse: "f16" x, w and y f16; "bf16/f32" x and w bf16, y fp32) ---- */

typedef struct conv_fixture {
    tsr_conv2d_desc d;
    conv_problem p;
    float *hy;
    /* The inputs as the device reads them, kept until the first check computes the reference from
     * them: a fixture that is never checked (a tuner's worker compiling ahead, a second problem the
     * tuner finds too costly) never pays for it (a batch-8 layer's takes a second of host time). */
    float *hx, *hw, *hb; /* hb NULL: no bias */
    double *ref;         /* NULL until then */
} conv_fixture;

/* The layer each class is tuned on (ResNet-50 shapes at batch 1, a MobileNet-style depthwise
 * layer, a 5x5 for the rest, ResNet-50's second downsample layer, a 7x7 1x1 layer, a 28x28
 * expanding one, conv1, a 7x7 3x3, the 28x28/2 3x3, the 14x14/2 1x1, a 14x14 1x1 at batch 8, the 56x56 3x3, the 7x7 3x3 at batch 8 and the
 * 14x14/2 3x3 at batch 8, the 28x28/2 1x1 at batch 8, the 14x14 3x3), in the order of conv_classes. 3x3-small: the
 * 7x7 layer (the same work as the 14x14 one it was tuned on until session 25, where STAGE 5's tiles
 * of 4 x 4, 6 and 8 pixels tied within 3%, while on the 7x7 layer 6 and 8 pixels took 15% less CPU
 * time than 4 at batch 1 and 8, and 1-7% less on the 14x14 one). strided:
 * ResNet-50's 56x56/2 layer (784 output pixels; the 28x28/2 one at batch 1, this class's layer until
 * session 25, has 196 and is strided-small's), the same work: the one where two vectors a tile
 * (WGM=2) cost 20-35% (session 19), and where 4 and 8 channels a tile tied at batch 1 while 8 ran
 * the 28x28/2 layer at batch 8 with 10-16% less CPU time (docs/conv.md). 1x1-small: the 2048-deep 7x7
 * layer (1x1024x14x14 k256 until session 26, the same work), whose 4 MB of weights make a tile
 * that reads them for few pixels (STAGE 5's 6 x 16 channels x 3 pixels) cost 1.6x at batch 1 and
 * 2.4x at batch 8, while the 14x14 layer's tune could not tell them apart. */
static const char *const conv_class_shapes[] = {"1x128x28x28 k128 3x3 p1 +bias", "1x512x28x28 k128 1x1 +bias",
                                                "1x128x56x56 k128 3x3 p1 s2 +bias", "1x256x28x28 k256 3x3 p1 g256 +bias",
                                                "1x64x28x28 k64 5x5 p2 +bias", "1x256x56x56 k512 1x1 s2 +bias",
                                                "1x2048x7x7 k512 1x1 +bias", "1x128x28x28 k512 1x1 +bias",
                                                "1x3x224x224 k64 7x7 p3 s2 +bias", "1x512x7x7 k512 3x3 p1 +bias",
                                                "1x256x28x28 k256 3x3 p1 s2 +bias", "1x1024x14x14 k2048 1x1 s2 +bias",
                                                "8x1024x14x14 k256 1x1 +bias", "1x64x56x56 k64 3x3 p1 +bias",
                                                "8x512x7x7 k512 3x3 p1 +bias", "8x512x14x14 k512 3x3 p1 s2 +bias",
                                                "8x512x28x28 k1024 1x1 s2 +bias", "1x256x14x14 k256 3x3 p1 +bias"};
/* Smaller problems of the same classes for slow devices (tsr_op.class_shapes_reduced), about an
 * eighth and a sixty-fourth of the work (and less for the slowest classes); fixture.problem_class
 * checks each stays in its class. */
static const char *const conv_class_shapes_reduced[] = {
    "1x64x28x28 k64 3x3 p1 +bias;1x32x28x28 k32 3x3 p1 +bias;1x16x28x28 k16 3x3 p1 +bias",
    "1x256x28x28 k64 1x1 +bias;1x128x28x28 k32 1x1 +bias",
    "1x64x56x56 k64 3x3 p1 s2 +bias;1x32x56x56 k32 3x3 p1 s2 +bias;1x16x56x56 k16 3x3 p1 s2 +bias",
    "1x64x28x28 k64 3x3 p1 g64 +bias;1x16x28x28 k16 3x3 p1 g16 +bias",
    "1x32x28x28 k32 5x5 p2 +bias;1x16x28x28 k16 5x5 p2 +bias",
    "1x128x56x56 k256 1x1 s2 +bias;1x64x56x56 k128 1x1 s2 +bias;1x32x56x56 k64 1x1 s2 +bias",
    "1x1024x7x7 k128 1x1 +bias;1x512x7x7 k32 1x1 +bias",
    "1x64x28x28 k256 1x1 +bias;1x32x28x28 k128 1x1 +bias",
    "1x3x112x112 k64 7x7 p3 s2 +bias;1x3x56x56 k32 7x7 p3 s2 +bias",
    "1x256x7x7 k256 3x3 p1 +bias;1x128x7x7 k128 3x3 p1 +bias;1x64x7x7 k64 3x3 p1 +bias",
    "1x128x28x28 k128 3x3 p1 s2 +bias;1x64x28x28 k64 3x3 p1 s2 +bias;1x32x28x28 k32 3x3 p1 s2 +bias",
    "1x512x14x14 k512 1x1 s2 +bias;1x256x14x14 k128 1x1 s2 +bias",
    "8x256x14x14 k128 1x1 +bias;4x128x14x14 k64 1x1 +bias",
    "1x32x56x56 k32 3x3 p1 +bias;1x16x56x56 k16 3x3 p1 +bias",
    "8x128x7x7 k128 3x3 p1 +bias;8x32x7x7 k32 3x3 p1 +bias",
    "8x128x14x14 k128 3x3 p1 s2 +bias;8x32x14x14 k32 3x3 p1 s2 +bias",
    "4x256x28x28 k512 1x1 s2 +bias;4x128x28x28 k256 1x1 s2 +bias",
    "1x128x14x14 k128 3x3 p1 +bias;1x64x14x14 k64 3x3 p1 +bias;1x32x14x14 k32 3x3 p1 +bias"};
/* Each class's second problem (tsr_op.class_shapes_check): another plane, or another batch, of a
 * ResNet-50 or MobileNet-V2 layer of the class, most at batch 8 (the fixtures are at batch 1 but
 * for 1x1-mid, 3x3-mid, strided-mid and 1x1-strided-mid), where a pick must not lose what it wins on the fixture. On
 * the Zen 4 of session 35 the 1x1 class's pick (STAGE 5) won its 28x28 fixture by 7-11% and ran the
 * 56x56 layers at batch 8 1.17-1.30x slower than the entry it replaced (docs/tuning.md). */
static const char *const conv_class_shapes_check[] = {
    "8x128x28x28 k128 3x3 p1 +bias",     "8x256x56x56 k64 1x1 +bias",          "8x128x56x56 k128 3x3 p1 s2 +bias",
    "8x144x56x56 k144 3x3 p1 g144 +bias", "8x32x28x28 k64 5x5 p2 +bias",       "8x256x56x56 k512 1x1 s2 +bias",
    "1x256x14x14 k1024 1x1 +bias",        "8x64x56x56 k256 1x1 +bias",          "8x3x224x224 k64 7x7 p3 s2 +bias",
    "1x256x7x7 k256 3x3 p1 +bias",        "4x512x14x14 k512 3x3 p1 s2 +bias",   "2x512x28x28 k1024 1x1 s2 +bias",
    "4x256x14x14 k1024 1x1 +bias",        "8x64x56x56 k64 3x3 p1 +bias",        "2x256x14x14 k256 3x3 p1 +bias",
    "8x256x28x28 k256 3x3 p1 s2 +bias",   "4x512x28x28 k1024 1x1 s2 +bias",     "2x512x7x7 k512 3x3 p1 +bias"};
_Static_assert(sizeof conv_class_shapes_check / sizeof *conv_class_shapes_check ==
                   sizeof conv_classes / sizeof *conv_classes - 1,
               "a second problem for each conv2d class");
_Static_assert(sizeof conv_class_shapes / sizeof *conv_class_shapes == sizeof conv_classes / sizeof *conv_classes - 1,
               "a shape for each conv2d class");
_Static_assert(sizeof conv_class_shapes_reduced / sizeof *conv_class_shapes_reduced ==
                   sizeof conv_classes / sizeof *conv_classes - 1,
               "smaller problems for each conv2d class");
static const tsr_report_shape conv_report_shapes[] = {
    {"conv-resnet50-3x3", "1x128x28x28 k128 3x3 p1", "1x8x10x10 k8 3x3 p1"},
    {"conv-resnet50-3x3-f16", "1x128x28x28 k128 3x3 p1 f16", "1x8x10x10 k8 3x3 p1 f16"},
    {NULL, NULL, NULL},
};

static void conv_fixture_free(void *ctx) {
    conv_fixture *t = ctx;
    if (!t) return;
    cl_mem mems[4] = {t->p.x, t->p.w, t->p.bias, t->p.y};
    for (int i = 0; i < 4; ++i)
        if (mems[i]) clReleaseMemObject(mems[i]);
    free(t->hy), free(t->ref);
    free(t->hx), free(t->hw), free(t->hb);
    free(t);
}

/* " f16" or " bf16/f32" at `at`: x and w take the first type, y the second. */
static bool dtype_token(const char *at, tsr_conv2d_desc *d, int *len) {
    char word[24];
    tsr_dtype in, out;
    if (sscanf(at, " %23s%n", word, len) != 1 || !tsr_dtype_spec_parse(word, &in, &out)) return false;
    d->x_type = d->w_type = in, d->y_type = out;
    return true;
}

static bool parse_layer(const char *shape, tsr_conv2d_desc *d, bool *bias) {
    memset(d, 0, sizeof *d);
    *bias = false;
    int used = 0;
    if (sscanf(shape, "%zux%zux%zux%zu k%zu %zux%zu%n", &d->batch, &d->in_channels, &d->in_height, &d->in_width,
               &d->out_channels, &d->kernel_h, &d->kernel_w, &used) != 7)
        return false;
    for (const char *at = shape + used; *at;) {
        size_t v = 0;
        int len = 0;
        if (strncmp(at, " +bias", 6) == 0) *bias = true, len = 6;
        else if (sscanf(at, " p%zu%n", &v, &len) == 1) d->pad_h = d->pad_w = v;
        else if (sscanf(at, " s%zu%n", &v, &len) == 1) d->stride_h = d->stride_w = v;
        else if (sscanf(at, " g%zu%n", &v, &len) == 1) d->groups = v;
        else if (strncmp(at, " nhwc", 5) == 0) d->layout = TSR_NHWC, len = 5;
        else if (!dtype_token(at, d, &len))
            return false;
        at += len;
    }
    return true;
}

static tsr_status conv_fixture_setup(tsr_device *dev, const char *shape, uint64_t seed, void **out) {
    conv_fixture *t = calloc(1, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    tsr_status status = TSR_SUCCESS;
    float *hx = NULL, *hw = NULL, *hb = NULL;
    bool bias = false;
    if (!parse_layer(shape, &t->d, &bias)) {
        status = tsr_fail(TSR_ERR_INVALID_ARG,
                          "conv2d: shape '%s' is not 'NxCxHxW kK RxS [pP] [sS] [gG] [nhwc] [+bias] [DTYPE]'", shape);
        goto done;
    }
    TSR_CHECK(status, conv_shape(&t->d, &t->p), done);
    conv_problem *p = &t->p;
    size_t nx = p->N * p->C * p->H * p->W, nw = p->K * p->CRS, ny = p->N * p->K * p->PQ;
    hx = malloc(nx * sizeof *hx), hw = malloc(nw * sizeof *hw), hb = malloc(p->K * sizeof *hb);
    t->hy = malloc(ny * sizeof *t->hy);
    if (!hx || !hw || !hb || !t->hy) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    tsr_random_fill(hx, nx, &seed, -1.0f, 1.0f);
    tsr_random_fill(hw, nw, &seed, -1.0f, 1.0f);
    tsr_random_fill(hb, p->K, &seed, -1.0f, 1.0f);
    /* The reference sees exactly what the device reads: the inputs rounded to their types. */
    tsr_dtype_round_array(p->types[0], hx, nx);
    tsr_dtype_round_array(p->types[1], hw, nw);
    for (size_t i = 0; i < ny; ++i) t->hy[i] = NAN; /* poisoned: a run must write every element */
    cl_int err;
    p->x = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, nx * tsr_dtype_size(p->types[0]), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    p->w = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, nw * tsr_dtype_size(p->types[1]), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    TSR_CHECK(status, tsr_upload_typed(dev, p->x, p->types[0], hx, nx), done);
    TSR_CHECK(status, tsr_upload_typed(dev, p->w, p->types[1], hw, nw), done);
    /* fixed weights, as an inference run's: the Winograd transform and the 16-bit widening are
     * made once (tsr_buffer_set_constant), so tuning and the demo time what such a run pays */
    TSR_CHECK(status, tsr_buffer_set_constant(p->w, true), done);
    if (bias) {
        p->bias = clCreateBuffer(dev->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, p->K * 4, hb, &err);
        TSR_CL_CHECK(status, err, done);
        t->d.epilogue.bias = p->bias;
    }
    p->y = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, ny * tsr_dtype_size(p->types[2]), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    status = tsr_upload_typed(dev, p->y, p->types[2], t->hy, ny);
done:
    /* kept for the reference (conv_fixture_check) */
    t->hx = hx, t->hw = hw;
    if (bias) t->hb = hb;
    else free(hb);
    if (status != TSR_SUCCESS) {
        conv_fixture_free(t);
        return status;
    }
    *out = t;
    return TSR_SUCCESS;
}

static tsr_status conv_fixture_run(tsr_device *dev, void *ctx, const tsr_config *cfg, cl_command_queue queue,
                                   cl_event *first, cl_event *last) {
    conv_fixture *t = ctx;
    /* im2col's GEMMs enqueue after the im2col: time from a marker before it to the last GEMM */
    cl_event start = NULL;
    if (first) {
        cl_int err = clEnqueueMarkerWithWaitList(queue, 0, NULL, &start);
        if (err != CL_SUCCESS) return tsr_fail_cl(err, "clEnqueueMarkerWithWaitList", __FILE__, __LINE__);
    }
    tsr_config c = cfg ? *cfg : (tsr_config){0};
    tsr_status st = !cfg ? tsr_conv2d(dev, &t->d, t->p.x, t->p.w, t->p.y, queue, last)
                    : t->p.layout == TSR_NHWC ? conv_channels_last(dev, &t->d, &t->p, &c, queue, last)
                                              : tsr_op_launch(&tsr_op_conv, dev, &t->p, cfg, queue, last);
    if (st != TSR_SUCCESS) {
        if (start) clReleaseEvent(start);
        return st;
    }
    if (first) *first = start;
    return TSR_SUCCESS;
}

static tsr_status conv_fixture_check(tsr_device *dev, void *ctx, double *rel_err) {
    conv_fixture *t = ctx;
    size_t ny = t->p.N * t->p.K * t->p.PQ;
    tsr_dtype yt = t->p.types[2];
    if (!t->ref) { /* the first check: the reference, from the inputs the device holds */
        if (!(t->ref = malloc(ny * sizeof *t->ref))) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        tsr_conv2d_reference(&t->d, t->hx, t->hw, t->hb, t->ref);
        free(t->hx), free(t->hw), free(t->hb);
        t->hx = t->hw = t->hb = NULL;
    }
    tsr_status st = tsr_download_typed(dev, t->p.y, yt, t->hy, ny);
    if (st != TSR_SUCCESS) return st;
    *rel_err = tsr_rel_error(t->hy, t->ref, ny);
    /* the next run cannot pass on this one's output */
    for (size_t i = 0; i < ny; ++i)
        t->hy[i] = NAN;
    return tsr_upload_typed(dev, t->p.y, yt, t->hy, ny);
}

/* A 16-bit y's own rounding exceeds the fp32 tolerance: it is held to its type's bound over the
 * reduction (Cg R S terms) instead. */
static double conv_fixture_tolerance(const void *ctx) {
    const conv_fixture *t = ctx;
    double bound = tsr_dtype_error_bound(t->p.types[2], (double)t->p.CRS);
    return bound > tsr_op_conv.tolerance ? bound : tsr_op_conv.tolerance;
}

double tsr_conv2d_flops(const tsr_conv2d_desc *desc) {
    conv_problem p;
    if (conv_shape(desc, &p) != TSR_SUCCESS) return 0;
    return 2.0 * p.N * p.K * p.PQ * p.CRS;
}

static void conv_fixture_work(const void *ctx, double *flops, double *bytes) {
    const conv_fixture *t = ctx;
    const conv_problem *p = &t->p;
    *flops = tsr_conv2d_flops(&t->d);
    *bytes = (double)tsr_dtype_size(p->types[0]) * p->N * p->C * p->H * p->W +
             (double)tsr_dtype_size(p->types[1]) * p->K * p->CRS +
             (double)tsr_dtype_size(p->types[2]) * p->N * p->K * p->PQ + (p->bias ? 4.0 * p->K : 0.0);
}

static void conv_fixture_describe(const void *ctx, char *out, size_t size) {
    const conv_problem *p = &((const conv_fixture *)ctx)->p;
    char dt[24];
    tsr_dtype_spec_format(p->types[0], p->types[2], dt, sizeof dt); /* x and w share a type in fixtures */
    snprintf(out, size, "%zux%zux%zux%zu k%zu %zux%zu/%zu g%zu%s%s%s", p->N, p->C, p->H, p->W, p->K, p->R, p->S, p->sh,
             p->G, dt[0] ? " " : "", dt, p->layout == TSR_NHWC ? " nhwc" : "");
}

/* "tessera(im2col)": the path the public call takes for this layer */
static void conv_fixture_impl(tsr_device *dev, const void *ctx, char *out, size_t size) {
    static const char *const names[] = {"auto", "im2col", "implicit", "direct"};
    tsr_conv_algo algo;
    tsr_config_info info;
    snprintf(out, size, "tessera");
    if (tsr_conv2d_plan(dev, &((const conv_fixture *)ctx)->d, &algo, &info) == TSR_SUCCESS)
        snprintf(out, size, "tessera(%s)", names[algo]);
}

static int conv_fixture_buffers(const void *ctx, cl_mem *buffers, int max) {
    const conv_problem *p = &((const conv_fixture *)ctx)->p;
    cl_mem all[4] = {p->x, p->w, p->bias, p->y};
    for (int i = 0; i < 4 && i < max; ++i) buffers[i] = all[i];
    return 4;
}

static const char *conv_tuning_space(const tsr_device *dev, const char *problem_class) {
    /* CPUs: no local-memory staging (barriers only cost on PoCL): the path, the form and the
     * register tile. CPUs that vectorize across work-items (llvmpipe): small tiles in GPU-like groups. */
    if (dev->info.type == TSR_DEVICE_CPU && tsr_device_lanes(&dev->info) == TSR_LANES_ACROSS_ITEMS)
        return "MWI=1,2,4 VW=1,2,4 STAGE=0,1 WGM=4,8,16 WGN=4,8,16 KWG=8,16";
    /* Other CPUs: the row forms (STAGE 0), the padded form (2), the depthwise forms (3, 4), the
     * channel vectors (5) and Winograd (7), with one work-item or a few per work-group. STAGE 6
     * (F(2x2) alone) is left out: every shape the 3x3 class is tuned on runs F(2x2) under STAGE 7
     * too, and a tie stored as 6 would run F(2x2) on 56x56 planes, where F(4x4) won (docs/conv.md).
     * WGM 6 and 8: STAGE 5's pixels a work-item (4 x 16 channels x 6 pixels, 2 x 16 x 8), which ran
     * ResNet-50's 7x7 3x3 layer 1.15-1.24x faster than the 4 x 4 tile a space without them found
     * (session 25). */
    /* The depthwise forms only for the depthwise class: no other class's entry on any CPU we tuned
     * took one, and STAGE 4 on conv1's 7x7 taps (the stem class) took 113-129 s to compile on a
     * Zen 4 (session 36), twice the class's share of a default tune. */
    /* The fused Winograd form (9) only for the stride-1 3x3 classes, the only layers it computes
     * (elsewhere it runs the implicit path's built-in form). */
    if (dev->info.type == TSR_DEVICE_CPU && problem_class && strncmp(problem_class, "3x3", 3) == 0)
        return "MWI=1,2,4,6,8 VW=4,8,16 STAGE=0,2,5,7,9 WGM=1,2,3,4,6,8 WGN=1,4,16 KWG=8";
    if (dev->info.type == TSR_DEVICE_CPU && problem_class && strncmp(problem_class, "depthwise", 9) != 0)
        return "MWI=1,2,4,6,8 VW=4,8,16 STAGE=0,2,5,7 WGM=1,2,3,4,6,8 WGN=1,4,16 KWG=8";
    if (dev->info.type == TSR_DEVICE_CPU)
        return "MWI=1,2,4,6,8 VW=4,8,16 STAGE=0,2,3,4,5,7,8 WGM=1,2,3,4,6,8 WGN=1,4,16 KWG=8";
    return NULL;
}

/* A class's programs are in its own storage types (fp32 classes fp32, "-f16" ones the f16 sets). */
static bool conv_variant_serves_class(const char *problem_class, int variant) {
    tsr_dtype types[3];
    conv_variant_types(variant, types);
    return tsr_dtype_types_serve_class(types, 3, problem_class);
}

static const char *conv_fixture_class(const void *fixture) {
    return conv_problem_class(&((const conv_fixture *)fixture)->p);
}

const tsr_op tsr_op_conv = {
    .name = "conv2d",
    .source_name = "conv",
    .more_sources = conv_more_sources,
    .params = conv_params,
    .nparams = CONV_NPARAMS,
    .classes = conv_classes,
    .nearest_class = conv_nearest_class,
    .problem_class = conv_problem_class,
    .defaults = conv_defaults,
    .ndefaults = TSR_COUNT(conv_defaults),
    .implementations = conv_implementations,
    .nimplementations = TSR_COUNT(conv_implementations),
    .implementation_param = "ALGO",
    .normalize = conv_normalize,
    .config_ok = conv_config_ok,
    .program_variants = CONV_PROGRAM_VARIANTS,
    .variant_serves_class = conv_variant_serves_class,
    .build_options = conv_build_options,
    .program_source = conv_program_source,
    .tuning_space = conv_tuning_space,
    .tolerance = 1e-5,
    .class_shapes = conv_class_shapes,
    .class_shapes_reduced = conv_class_shapes_reduced,
    .class_shapes_check = conv_class_shapes_check,
    .class_storage = TSR_CLASSES_PER_TYPE,
    .fixture = {.setup = conv_fixture_setup, .run = conv_fixture_run, .check = conv_fixture_check,
                .work = conv_fixture_work, .describe = conv_fixture_describe, .impl = conv_fixture_impl,
                .buffers = conv_fixture_buffers, .free = conv_fixture_free, .problem_class = conv_fixture_class, .tolerance = conv_fixture_tolerance},
    .demo = {.title = "conv2d 1x128x28x28 k128 3x3", .shapes = {"1x128x28x28 k128 3x3 p1 +bias"}, .runs = 2},
    .report_shapes = conv_report_shapes,
};
