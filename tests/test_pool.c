/* 2-D pooling (tsr_pool2d) against the double-precision reference (tsr_pool2d_reference, written
 * from PyTorch's definition) on fresh random data (TSR_TEST_SEED replays a run): both kinds, both
 * layouts, stride, padding, dilation, ceil_mode, exclude_pad, 16-bit storage, offsets, the
 * global form and its configurations. Max must equal the reference rounded to y's type exactly;
 * average is held to 2^-24 (window + 2) max|x| plus y's own rounding. Every case poisons y,
 * surrounds x and y with guard values and checks that nothing outside y's elements changed.
 * Output sizes are checked against values worked out by hand from PyTorch's rule, and every bad
 * input against its message. TSR_TEST_MODE=oclgrind runs a small subset. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define dev th_dev
static const float guard_value = 1536.0f; /* exact in every type, outside the inputs' range */
enum { GUARD = 5 };

static size_t rand_below(size_t n) { return (size_t)th_rand() % n; }

/* Run desc (offsets as given) on x (its batch x channels x H x W values in desc's layout); checks
 * guards and the result; returns nothing, fails the test on any difference. */
static void run_desc(const tsr_pool2d_desc *desc, const float *x, const char *config) {
    tsr_pool2d_desc d = *desc;
    size_t oh, ow;
    TH_ASSERT_OK(tsr_pool2d_output_size(&d, &oh, &ow));
    const size_t planes = d.batch * d.channels, nx = planes * d.in_height * d.in_width, ny = planes * oh * ow;
    const size_t tx = d.x_offset + nx + GUARD, ty = d.y_offset + ny + GUARD;
    float *hx = malloc(tx * sizeof *hx), *hy = malloc(ty * sizeof *hy), *after = malloc(ty * sizeof *after);
    double *ref = malloc(ny * sizeof *ref);
    for (size_t i = 0; i < tx; ++i) hx[i] = guard_value;
    for (size_t i = 0; i < ty; ++i) hy[i] = guard_value;
    memcpy(hx + d.x_offset, x, nx * sizeof *x);
    th_poison(hy + d.y_offset, ny);
    tsr_pool2d_desc rd = d;
    if (!rd.stride_h) rd.stride_h = rd.kernel_h;
    if (!rd.stride_w) rd.stride_w = rd.kernel_w;
    if (!rd.dilation_h) rd.dilation_h = 1;
    if (!rd.dilation_w) rd.dilation_w = 1;
    tsr_pool2d_reference(&rd, x, ref);
    cl_mem dx = th_buffer_from_typed(dev, d.x_type, hx, tx), dy = th_buffer_from_typed(dev, d.y_type, hy, ty);
    char what[256];
    char shape[160];
    tsr_pool2d_shape_format(&d, shape, sizeof shape);
    snprintf(what, sizeof what, "%s [%s] offsets x %zu y %zu", shape, config ? config : "default", d.x_offset,
             d.y_offset);
    cl_event ev = NULL;
    tsr_status st = tsr_pool2d(dev, &d, dx, dy, NULL, &ev);
    if (st != TSR_SUCCESS) fail_msg("%s: %s: %s", what, tsr_status_str(st), tsr_last_error());
    assert_non_null(ev);
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    th_read_typed(dev, d.y_type, dy, after, ty);
    for (size_t i = 0; i < ty; ++i)
        if ((i < d.y_offset || i >= d.y_offset + ny) && after[i] != guard_value)
            fail_msg("%s: wrote outside y at element %zu (%g)", what, i, (double)after[i]);
    float *check_x = malloc(tx * sizeof *check_x);
    th_read_typed(dev, d.x_type, dx, check_x, tx);
    for (size_t i = 0; i < tx; ++i)
        if (!(check_x[i] == hx[i]) && !(isnan(check_x[i]) && isnan(hx[i]))) fail_msg("%s: x changed at %zu", what, i);
    free(check_x);
    double largest = 0;
    for (size_t i = 0; i < nx; ++i)
        if (isfinite(x[i])) largest = fmax(largest, fabs((double)x[i]));
    const double u = ldexp(1.0, -24), u_y = d.y_type == TSR_F32 ? 0 : tsr_dtype_unit_roundoff(d.y_type);
    const double bound_avg = u * (double)(d.kernel_h * d.kernel_w + 2) * largest;
    for (size_t i = 0; i < ny; ++i) {
        const double want = ref[i], have = after[d.y_offset + i];
        if (d.kind == TSR_POOL_MAX) {
            const float rounded = tsr_dtype_round(d.y_type, (float)want);
            if (!(have == rounded) && !(isnan(have) && isnan(rounded)))
                fail_msg("%s: y[%zu] = %.9g, reference %.9g", what, i, have, want);
        } else {
            const double bound = bound_avg + u_y * fabs(want) + ldexp(1.0, -133);
            if (!isfinite(want) ? !(have == want || (isnan(have) && isnan(want))) : !(fabs(have - want) <= bound))
                fail_msg("%s: y[%zu] = %.9g, reference %.9g (error %.3g, bound %.3g)", what, i, have, want,
                         fabs(have - want), bound);
        }
    }
    clReleaseMemObject(dx);
    clReleaseMemObject(dy);
    free(hx);
    free(hy);
    free(after);
    free(ref);
}

/* desc with random inputs in [-2, 2), rounded to x's type. */
static void run_random(const tsr_pool2d_desc *d, const char *config) {
    const size_t nx = d->batch * d->channels * d->in_height * d->in_width;
    float *x = malloc(nx * sizeof *x);
    th_fill_uniform_typed(d->x_type, x, nx, -2, 2);
    run_desc(d, x, config);
    free(x);
}

/* ResNet-50's two pools in both layouts and kinds' natural forms, fp32 and 16-bit. */
static void resnet_pools(void **state) {
    (void)state;
    const size_t c_max = th_small_mode() ? 8 : 64, hw = th_small_mode() ? 20 : 112, c_gap = th_small_mode() ? 37 : 2048;
    for (int layout = 0; layout < 2; ++layout)
        for (int t = 0; t < (th_small_mode() ? 2 : 3); ++t) {
            const tsr_dtype type = (tsr_dtype)t;
            const tsr_pool2d_desc maxpool = {.kind = TSR_POOL_MAX, .layout = (tsr_tensor_layout)layout, .batch = 1,
                                             .channels = c_max, .in_height = hw, .in_width = hw, .kernel_h = 3,
                                             .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1,
                                             .x_type = type, .y_type = type};
            run_random(&maxpool, NULL);
            const tsr_pool2d_desc gap = {.kind = TSR_POOL_AVG, .layout = (tsr_tensor_layout)layout, .batch = 2,
                                         .channels = c_gap, .in_height = 7, .in_width = 7, .kernel_h = 7,
                                         .kernel_w = 7, .x_type = type, .y_type = type};
            run_random(&gap, NULL);
        }
}

/* A random valid descriptor: sizes small enough for the reference, every option drawn. */
static tsr_pool2d_desc random_desc(void) {
    for (;;) {
        tsr_pool2d_desc d = {.kind = (tsr_pool_kind)(th_rand() & 1), .layout = (tsr_tensor_layout)(th_rand() & 1)};
        d.batch = 1 + rand_below(3), d.channels = 1 + rand_below(th_small_mode() ? 6 : 24);
        d.in_height = 1 + rand_below(th_small_mode() ? 12 : 40), d.in_width = 1 + rand_below(th_small_mode() ? 12 : 40);
        d.kernel_h = 1 + rand_below(5), d.kernel_w = 1 + rand_below(5);
        d.stride_h = rand_below(4), d.stride_w = rand_below(4); /* 0: the kernel */
        d.pad_h = rand_below(d.kernel_h / 2 + 1), d.pad_w = rand_below(d.kernel_w / 2 + 1);
        if (d.kind == TSR_POOL_MAX) d.dilation_h = rand_below(4), d.dilation_w = rand_below(4);
        d.ceil_mode = th_rand() & 1, d.exclude_pad = th_rand() & 1;
        /* fp32, each 16-bit type throughout, bf16 into fp32: every program a compile (seconds), so
         * not all nine pairs (configurations and special_values add f16 into fp32) */
        static const tsr_dtype pairs[4][2] = {{TSR_F32, TSR_F32}, {TSR_F16, TSR_F16}, {TSR_BF16, TSR_BF16},
                                              {TSR_BF16, TSR_F32}};
        const size_t pair = rand_below(4);
        d.x_type = pairs[pair][0], d.y_type = pairs[pair][1];
        if (th_rand() & 1) d.x_offset = rand_below(9), d.y_offset = rand_below(9);
        size_t oh, ow;
        if (tsr_pool2d_output_size(&d, &oh, &ow) == TSR_SUCCESS) return d;
    }
}

static void random_shapes(void **state) {
    (void)state;
    const int count = th_small_mode() ? 12 : 150;
    for (int i = 0; i < count; ++i) {
        const tsr_pool2d_desc d = random_desc();
        run_random(&d, NULL);
    }
}

/* The cases PyTorch's rules single out: ceil mode's dropped last window, count_include_pad with
 * the overhang, padding at half the kernel, dilation reaching past the input, stride 1 and 2 on
 * wide rows (the vector paths), windows wider than the vector. */
static void edge_rules(void **state) {
    (void)state;
    const char *const shapes[] = {
        "1x3x5x5 avg k2 s2 p1 ceil",        "1x3x5x5 avg k2 s2 p1 ceil exclude", "2x3x6x6 max k3 s2 ceil",
        "1x2x7x9 avg k3 s2 p1 ceil",        "1x2x7x9 avg k3 s2 p1 ceil exclude", "1x2x1x1 max k2 p1 d2",
        "1x2x3x3 max k2 s1 p1 d3",          "1x4x9x53 max k3 s1 p1",             "1x4x9x53 avg k3 s1 p1 exclude",
        "1x4x9x67 max k3 s2 p1",            "2x5x11x70 avg k5 s2 p2",            "1x3x4x40 max k1",
        "1x3x4x40 max k2x5 s1x2 p1x2 d1x2", "1x17x7x7 max k7",                   "1x17x7x7 avg k7 nhwc",
        "3x19x5x6 avg k5x6 s3",             "1x33x8x8 max k3 s2 p1 nhwc ceil",   "1x9x13x13 avg k4 s3 p2 ceil nhwc",
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        tsr_pool2d_desc d;
        if (tsr_pool2d_shape_parse(shapes[i], &d) != TSR_SUCCESS) fail_msg("%s: %s", shapes[i], tsr_last_error());
        run_random(&d, NULL);
        d.x_type = d.y_type = TSR_BF16;
        run_random(&d, NULL);
    }
}

/* Output sizes worked out by hand from PyTorch's pooling_output_shape. */
static void output_sizes(void **state) {
    (void)state;
    static const struct {
        const char *shape;
        size_t oh, ow;
    } cases[] = {
        {"1x1x112x112 max k3 s2 p1", 56, 56}, {"1x1x7x7 avg k7", 1, 1},           {"1x1x6x6 max k3 s2", 2, 2},
        {"1x1x6x6 max k3 s2 ceil", 3, 3},     {"1x1x5x5 avg k2 s2 p1", 3, 3},     {"1x1x5x5 avg k2 s2 p1 ceil", 3, 3},
        {"1x1x4x4 max k3 s2 p1", 2, 2},       {"1x1x4x4 max k3 s2 p1 ceil", 3, 3}, {"1x1x10x10 max k3 s1 d2", 6, 6},
        {"1x1x10x7 max k3x2", 3, 3},          {"1x1x1x1 max k2 p1 d2", 1, 1},     {"1x1x8x9 avg k3 s2 ceil", 4, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        tsr_pool2d_desc d;
        size_t oh = 0, ow = 0;
        if (tsr_pool2d_shape_parse(cases[i].shape, &d) != TSR_SUCCESS) fail_msg("%s: %s", cases[i].shape, tsr_last_error());
        TH_ASSERT_OK(tsr_pool2d_output_size(&d, &oh, &ow));
        if (oh != cases[i].oh || ow != cases[i].ow)
            fail_msg("%s: %zux%zu, want %zux%zu", cases[i].shape, oh, ow, cases[i].oh, cases[i].ow);
    }
}

/* NaN propagates through max (wherever it sits in the window, in every type and layout), -Inf and
 * +Inf are ordinary values; average of an Inf is Inf, and of a NaN NaN. */
static void special_values(void **state) {
    (void)state;
    for (int layout = 0; layout < 2; ++layout)
        for (int t = 0; t < 3; ++t)
            for (int kind = 0; kind < 2; ++kind) {
                tsr_pool2d_desc d = {.kind = (tsr_pool_kind)kind, .layout = (tsr_tensor_layout)layout, .batch = 1,
                                     .channels = 11, .in_height = 9, .in_width = 37, .kernel_h = 3, .kernel_w = 3,
                                     .stride_h = 2, .stride_w = kind ? 1 : 2, .pad_h = 1, .pad_w = 1,
                                     .x_type = (tsr_dtype)t, .y_type = (tsr_dtype)t};
                const size_t n = d.channels * d.in_height * d.in_width;
                float *x = malloc(n * sizeof *x);
                th_fill_uniform_typed(d.x_type, x, n, -2, 2);
                for (int s = 0; s < 12; ++s) {
                    const float v = s % 3 == 0 ? NAN : s % 3 == 1 ? -INFINITY : INFINITY;
                    x[rand_below(n)] = v;
                }
                run_desc(&d, x, NULL);
                /* NaN at every row's end: max pooling's left-edge vectors load from the row before
                 * and must drop it (only the windows that hold it are NaN) */
                for (size_t r = 0; r < d.channels * d.in_height; ++r) x[r * d.in_width + d.in_width - 1] = NAN;
                run_desc(&d, x, NULL);
                /* the global form */
                d.in_height = 5, d.in_width = 6, d.kernel_h = 5, d.kernel_w = 6, d.stride_h = d.stride_w = 0;
                d.pad_h = d.pad_w = 0;
                const size_t m = d.channels * 30;
                th_fill_uniform_typed(d.x_type, x, m, -2, 2);
                x[rand_below(m)] = NAN;
                x[rand_below(m)] = -INFINITY;
                run_desc(&d, x, NULL);
                free(x);
            }
}

/* Every configuration of the op's space (vector widths, the global reduction's group sizes) on the
 * window and global forms, both layouts. */
static void configurations(void **state) {
    (void)state;
    /* every vector width (8 is the CPU default the other cases run), reductions of 1 to 256 items;
     * each configuration is two programs (max, average) to compile, so not the whole space */
    const char *const configs[] = {"VW=1 WG=1 WI=16", "VW=4 WG=64 WI=128", "VW=16 WG=256 WI=32", "VW=2 WG=4 WI=256"};
    const char *const shapes[] = {"2x5x13x41 max k3 s2 p1", "1x3x9x50 avg k3 s1 p1 exclude", "2x13x7x7 avg k7",
                                  "2x13x7x7 max k7 nhwc",   "1x21x11x11 max k3 s2 p1 nhwc",  "1x6x40x40 max k2",
                                  "2x13x7x7 avg k7 f16/f32"};
    const size_t nconfigs = th_small_mode() ? 3 : sizeof configs / sizeof configs[0];
    for (size_t c = 0; c < nconfigs; ++c) {
        if (!th_try_override(dev, "pool2d", configs[c])) continue;
        /* the 16-bit shape (one more program) under the first configuration only */
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] - (c ? 1 : 0); ++s) {
            tsr_pool2d_desc d;
            TH_ASSERT_OK(tsr_pool2d_shape_parse(shapes[s], &d));
            d.x_offset = rand_below(5), d.y_offset = rand_below(5);
            run_random(&d, configs[c]);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "pool2d", NULL));
}

static void invalid_arguments(void **state) {
    (void)state;
    enum { N = 2 * 3 * 8 * 8 };
    float hx[N], hy[N], after[N];
    th_fill_uniform(hx, N, -1, 1);
    for (int i = 0; i < N; ++i) hy[i] = guard_value;
    cl_mem x = th_buffer_from(dev, hx, N), y = th_buffer_from(dev, hy, N), small = th_buffer(dev, 2 * 3 * 4 * 4 - 1);
    const tsr_pool2d_desc ok = {.batch = 2, .channels = 3, .in_height = 8, .in_width = 8, .kernel_h = 2, .kernel_w = 2};
    tsr_pool2d_desc d;
    size_t oh, ow;
    cl_event ev = (cl_event)1;
#define EXPECT(expr, status, text)                                                                                     \
    do {                                                                                                               \
        TH_ASSERT_STATUS(expr, status);                                                                                \
        TH_ASSERT_CONTAINS(tsr_last_error(), text);                                                                    \
    } while (0)
#define BAD_AS(field_expr, status, text)                                                                               \
    do {                                                                                                               \
        d = ok;                                                                                                        \
        field_expr;                                                                                                    \
        EXPECT(tsr_pool2d(dev, &d, x, y, NULL, NULL), status, text);                                                  \
        EXPECT(tsr_pool2d_output_size(&d, &oh, &ow), status, text);                                                   \
    } while (0)
#define BAD(field_expr, text) BAD_AS(field_expr, TSR_ERR_INVALID_ARG, text)
    EXPECT(tsr_pool2d(NULL, &ok, x, y, NULL, NULL), TSR_ERR_INVALID_ARG, "device");
    EXPECT(tsr_pool2d(dev, NULL, x, y, NULL, &ev), TSR_ERR_INVALID_ARG, "desc");
    assert_null(ev);
    EXPECT(tsr_pool2d(dev, &ok, NULL, y, NULL, NULL), TSR_ERR_INVALID_ARG, "buffer x");
    EXPECT(tsr_pool2d(dev, &ok, x, NULL, NULL, NULL), TSR_ERR_INVALID_ARG, "buffer y");
    EXPECT(tsr_pool2d_output_size(NULL, &oh, &ow), TSR_ERR_INVALID_ARG, "desc");
    EXPECT(tsr_pool2d_output_size(&ok, NULL, &ow), TSR_ERR_INVALID_ARG, "out_h");
    BAD(d.kind = (tsr_pool_kind)2, "kind");
    BAD(d.layout = (tsr_tensor_layout)-1, "layout");
    BAD(d.x_type = (tsr_dtype)TSR_DTYPE_COUNT, "x_type");
    BAD(d.y_type = (tsr_dtype)-1, "y_type");
    BAD(d.batch = 0, "batch");
    BAD(d.channels = 0, "channels");
    BAD(d.in_height = 0, "in_height");
    BAD(d.in_width = 0, "in_width");
    BAD(d.kernel_h = 0, "kernel_h");
    BAD(d.kernel_w = 0, "kernel_w");
    BAD((d.kind = TSR_POOL_AVG, d.dilation_h = 2), "dilation");
    BAD((d.kind = TSR_POOL_AVG, d.dilation_w = 3), "dilation");
    BAD(d.pad_h = 2, "half the kernel");
    BAD((d.kernel_w = 3, d.pad_w = 2), "half the kernel");
    BAD(d.kernel_h = 9, "output is empty");
    BAD((d.kernel_w = 3, d.dilation_w = 4), "output is empty");
    BAD(d.stride_h = (size_t)1 << 40, "stride_h");
    BAD(d.in_width = (size_t)1 << 40, "in_width");
    BAD_AS((d.batch = (size_t)1 << 40, d.channels = (size_t)1 << 40), TSR_ERR_OVERFLOW, "batch x channels");
    BAD((d.batch = (size_t)1 << 31, d.channels = 4), "below 2^32");
    /* buffers too small for the tensors (offsets included), y overlapping x */
    d = ok, d.x_offset = 1;
    EXPECT(tsr_pool2d(dev, &d, x, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "x");
    d = ok;
    EXPECT(tsr_pool2d(dev, &d, x, small, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "y");
    d = ok, d.y_offset = N - 2 * 3 * 4 * 4 + 1;
    EXPECT(tsr_pool2d(dev, &d, x, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "y");
    d = ok, d.y_type = TSR_F16, d.y_offset = 2 * N - 2 * 3 * 4 * 4; /* fits in f16: N floats hold 2N halves */
    TH_ASSERT_OK(tsr_pool2d(dev, &d, x, y, NULL, NULL));
    d = ok;
    EXPECT(tsr_pool2d(dev, &d, x, x, NULL, NULL), TSR_ERR_INVALID_ARG, "overlap");
    d = ok, d.y_offset = N - 2 * 3 * 4 * 4; /* x's last elements */
    EXPECT(tsr_pool2d(dev, &d, x, x, NULL, NULL), TSR_ERR_INVALID_ARG, "overlap");
    /* sub-buffers of one parent overlap by memory */
    const size_t align = th_sub_buffer_align(dev);
    const size_t y_origin = align * ((N / 2 + align - 1) / align);
    cl_mem parent = th_buffer(dev, y_origin + N);
    cl_mem sx = th_sub_buffer(parent, 0, N), sy = th_sub_buffer(parent, y_origin, N);
    EXPECT(tsr_pool2d(dev, &ok, sx, sy, NULL, NULL), TSR_ERR_INVALID_ARG, "overlap");
    cl_mem sy2 = th_sub_buffer(parent, align * ((N + align - 1) / align), 2 * 3 * 4 * 4);
    TH_ASSERT_OK(tsr_pool2d(dev, &ok, sx, sy2, NULL, NULL)); /* disjoint: fine */
    clReleaseMemObject(sx);
    clReleaseMemObject(sy);
    clReleaseMemObject(sy2);
    clReleaseMemObject(parent);
    /* nothing was written by a refused call */
    TH_ASSERT_OK(tsr_download(dev, y, after, N));
    for (int i = 0; i < N - 2 * 3 * 4 * 4 / 2; ++i)
        if (after[i] != guard_value) fail_msg("a refused call wrote y[%d]", i);
    clReleaseMemObject(x);
    clReleaseMemObject(y);
    clReleaseMemObject(small);
#undef BAD
#undef BAD_AS
#undef EXPECT
}

static void shape_texts(void **state) {
    (void)state;
    const char *const good[] = {"8x64x112x112 max k3 s2 p1", "8x2048x7x7 avg k7", "1x2x3x4 avg k2x3 s1x2 p1 ceil exclude",
                                "1x2x9x9 max k3 d2 nhwc f16", "1x2x9x9 max k3 bf16/f32"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; ++i) {
        tsr_pool2d_desc d;
        char back[160];
        if (tsr_pool2d_shape_parse(good[i], &d) != TSR_SUCCESS) fail_msg("%s: %s", good[i], tsr_last_error());
        tsr_pool2d_shape_format(&d, back, sizeof back);
        assert_string_equal(back, good[i]);
    }
    const char *const bad[] = {"",
                               "1x2x3 max k2",
                               "1x2x3x4 min k2",
                               "1x2x3x4 max",
                               "1x2x3x4 max k0",
                               "1x2x3x4 max k2 p2",
                               "1x2x3x4 max k2 s1 s1",
                               "1x2x3x4 max k2 f16 f16",
                               "1x2x3x4 avg k2 d2",
                               "1x2x3x-4 max k2",
                               "1x2x3x4 max k2 nonsense",
                               "0x2x3x4 max k2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        tsr_pool2d_desc d;
        if (tsr_pool2d_shape_parse(bad[i], &d) == TSR_SUCCESS) fail_msg("'%s' parsed", bad[i]);
        TH_ASSERT_CONTAINS(tsr_last_error(), "shape");
    }
}

int main(void) {
    if (th_small_mode()) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(resnet_pools),   cmocka_unit_test(random_shapes),  cmocka_unit_test(edge_rules),
            cmocka_unit_test(special_values), cmocka_unit_test(configurations),
        };
        return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(output_sizes),   cmocka_unit_test(shape_texts),    cmocka_unit_test(resnet_pools),
        cmocka_unit_test(random_shapes),  cmocka_unit_test(edge_rules),     cmocka_unit_test(special_values),
        cmocka_unit_test(configurations), cmocka_unit_test(invalid_arguments),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
