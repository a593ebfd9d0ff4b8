/* GELU, fused and unfused, against a double-precision reference written from the
 * definitions. Every test names the form it checks: the tanh approximation and the erf
 * form differ by up to 4.7e-4 near |x| = 2.7.
 * Tolerance: |y - GELU(x)| <= 1e-6 * max(1, |x|). An fp32 result carries a rounding error of
 * up to half an ulp of |y| <= |x| (6e-8 |x|) and the kernels' exp and erfc fits add a few
 * more ulps; 1e-6 leaves room for devices whose builtins are at OpenCL's limits (division
 * 2.5 ulp, exp 3 ulp) and still catches any wrong coefficient (the two forms differ by
 * 4.7e-4) or lost digits (the textbook 1 + tanh loses all of them for x < -5).
 * 16-bit storage (tsr_gelu with typed descriptors, tsr_convert): conversions bit for bit against tsr_convert_host;
 * GELU within max(1e-6, tsr_dtype_error_bound(y_type, 1)) in the same metric, from inputs rounded
 * to x's type (the output's rounding, 2^-11 for f16 and 2^-8 for bf16, is the larger), plus
 * TSR_GELU16_ERROR for a 16-bit y (the AVX-512 forms that compute it to the accuracy y keeps).
 * TSR_TEST_MODE=oclgrind runs a small subset. */
#include "harness.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define dev th_dev /* the group's device (harness) */
static const float guard_value = 12345.0f; /* outside [y_off, y_off + n): must survive */

static bool small_mode(void) { return th_small_mode(); }

static const char *form_name(tsr_gelu_mode mode) { return mode == TSR_GELU_ERF ? "erf form" : "tanh form"; }

/* tsr_gelu and tsr_gelu_unfused from the positional lists the cases are written in: the
 * descriptor's zero types (fp32) for the first two, the given types for gelu_typed. */
static tsr_status gelu_fused(tsr_device *d, tsr_gelu_mode mode, cl_mem x, size_t x_off, cl_mem y, size_t y_off,
                             size_t n, cl_command_queue q, cl_event *ev) {
    return tsr_gelu(d, &(tsr_gelu_desc){.mode = mode, .n = n, .x_offset = x_off, .y_offset = y_off}, x, y, q, ev);
}
static tsr_status gelu_unfused(tsr_device *d, tsr_gelu_mode mode, cl_mem x, size_t x_off, cl_mem y, size_t y_off,
                               size_t n, cl_command_queue q, cl_event *ev) {
    return tsr_gelu_unfused(d, &(tsr_gelu_desc){.mode = mode, .n = n, .x_offset = x_off, .y_offset = y_off}, x, y, q,
                            ev);
}
static tsr_status gelu_typed(tsr_device *d, tsr_gelu_mode mode, tsr_dtype x_type, cl_mem x, size_t x_off,
                             tsr_dtype y_type, cl_mem y, size_t y_off, size_t n, cl_command_queue q, cl_event *ev) {
    const tsr_gelu_desc desc = {
        .mode = mode, .n = n, .x_type = x_type, .y_type = y_type, .x_offset = x_off, .y_offset = y_off};
    return tsr_gelu(d, &desc, x, y, q, ev);
}

typedef tsr_status (*gelu_fn)(tsr_device *, tsr_gelu_mode, cl_mem, size_t, cl_mem, size_t, size_t, cl_command_queue,
                              cl_event *);

/* Run fn on x (n values) at the given offsets (in place when in_place), check every
 * output against the reference and the guard zones around it. */
static void check_run(gelu_fn fn, const char *fn_name, tsr_gelu_mode mode, const float *x, size_t n, size_t x_off,
                      size_t y_off, bool in_place) {
    if (in_place) y_off = x_off;
    size_t nx = x_off + n + 3, ny = y_off + n + 3;
    float *hx = malloc(nx * sizeof *hx), *hy = malloc(ny * sizeof *hy);
    for (size_t i = 0; i < nx; ++i) hx[i] = guard_value;
    memcpy(hx + x_off, x, n * sizeof *x);
    cl_mem dx = th_buffer_from(dev, hx, nx), dy = dx;
    if (!in_place) {
        for (size_t i = 0; i < ny; ++i) hy[i] = guard_value;
        th_poison(hy + y_off, n); /* anything left unwritten stays NaN */
        dy = th_buffer_from(dev, hy, ny);
    }
    cl_event ev = NULL;
    tsr_status st = fn(dev, mode, dx, x_off, dy, y_off, n, NULL, &ev);
    if (st != TSR_SUCCESS) fail_msg("%s (%s) n=%zu: %s: %s", fn_name, form_name(mode), n, tsr_status_str(st), tsr_last_error());
    assert_non_null(ev);
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    th_read(dev, dy, hy, ny);
    for (size_t i = 0; i < ny; ++i) {
        if (i >= y_off && i < y_off + n) continue;
        if (hy[i] != guard_value) fail_msg("%s (%s) n=%zu wrote outside y at %zu", fn_name, form_name(mode), n, i);
    }
    for (size_t i = 0; i < n; ++i) {
        double r = th_ref_activation((int)mode, x[i]), got = hy[y_off + i];
        bool ok = isnan(r) ? isnan(got) : got == r || fabs(got - r) <= 1e-6 * fmax(1.0, fabs((double)x[i]));
        if (!ok)
            fail_msg("%s (%s) n=%zu: GELU(%.9g) = %.9g, reference %.9g (error %.3g, tolerance %.3g)", fn_name,
                     form_name(mode), n, (double)x[i], got, r, fabs(got - r), 1e-6 * fmax(1.0, fabs((double)x[i])));
        if (r == 0 && got == 0 && x[i] == 0 && !signbit(r) != !signbit(got))
            fail_msg("%s (%s): GELU(%g) has the wrong sign of zero", fn_name, form_name(mode), (double)x[i]);
    }
    if (!in_place) clReleaseMemObject(dy);
    clReleaseMemObject(dx);
    free(hx);
    free(hy);
}

static const tsr_gelu_mode modes[] = {TSR_GELU_TANH, TSR_GELU_ERF};

/* Fresh uniform inputs from the usual [-5, 5] and from [-150, 150], where x^3 is large and
 * half of the outputs are negligible next to x. */
static void fused_random_inputs_both_forms(void **state) {
    (void)state;
    size_t n = small_mode() ? 999 : (1u << 20) + 3;
    float *x = malloc(n * sizeof *x);
    const float ranges[][2] = {{-5, 5}, {-150, 150}};
    for (int m = 0; m < 2; ++m)
        for (int r = 0; r < 2; ++r) {
            th_fill_uniform(x, n, ranges[r][0], ranges[r][1]);
            check_run(gelu_fused, "tsr_gelu", modes[m], x, n, 0, 0, false);
        }
    free(x);
}

/* Overflow and special values: the textbook tanh through exp gives NaN at +-100. The tanh form
 * returns -0 below x = -9 and the erf form below -20; near x = 9.95 the tanh form's 2^t reaches
 * its floor 2^-125. */
static void fused_edge_values_both_forms(void **state) {
    (void)state;
    const float edges[] = {10.0f, -10.0f, 100.0f, -100.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN, -0.0f, 0.0f,
                           1e-40f, -1e-40f, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, 20.0f, -20.0f, -19.999f, -20.001f,
                           7e12f, -7e12f, 2.7f, -2.7f, 88.0f, -88.0f, 1.0f, -1.0f, -0.75f, 3e-20f, -3e-20f,
                           9.0f, -9.0f, -8.999f, -9.001f, 9.9f, 9.95f, 10.05f, 1e-3f, -1e-3f, 0.5f, -0.5f};
    size_t n = sizeof edges / sizeof edges[0];
    for (int m = 0; m < 2; ++m)
        check_run(gelu_fused, "tsr_gelu", modes[m], edges, n, 0, 0, false);
}

/* Sizes around every vector width and tile, offsets on both sides, and in place. */
static void fused_odd_sizes_offsets_in_place(void **state) {
    (void)state;
    const size_t sizes[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 65, 255, 257, 1000, 4099, 65537};
    size_t count = small_mode() ? 8 : sizeof sizes / sizeof sizes[0];
    float *x = malloc(65537 * sizeof *x);
    for (size_t s = 0; s < count; ++s) {
        th_fill_uniform(x, sizes[s], -6, 6);
        tsr_gelu_mode mode = modes[s % 2];
        check_run(gelu_fused, "tsr_gelu", mode, x, sizes[s], 0, 0, false);
        check_run(gelu_fused, "tsr_gelu", mode, x, sizes[s], 1 + th_rand() % 7, th_rand() % 9, false);
        check_run(gelu_fused, "tsr_gelu (in place)", mode, x, sizes[s], th_rand() % 5, 0, true);
    }
    free(x);
}

/* Every shape of the kernel family gives the same answers: vector widths, runs per
 * work-item, work-group sizes, contiguous and interleaved layouts. */
static void fused_configurations(void **state) {
    (void)state;
    const char *configs[] = {"VW=1 VPT=1 WG=1 INTERLEAVE=0",  "VW=2 VPT=32 WG=4 INTERLEAVE=0",
                             "VW=4 VPT=8 WG=16 INTERLEAVE=1", "VW=16 VPT=16 WG=64 INTERLEAVE=0",
                             "VW=8 VPT=2 WG=256 INTERLEAVE=1", "VW=16 VPT=1 WG=32 INTERLEAVE=1"};
    size_t count = small_mode() ? 3 : sizeof configs / sizeof configs[0];
    size_t n = small_mode() ? 1001 : 100003;
    float *x = malloc(n * sizeof *x);
    th_fill_uniform(x, n, -8, 8);
    for (size_t c = 0; c < count; ++c) {
        if (!th_try_override(dev, "gelu", configs[c])) continue;
        for (int m = 0; m < 2; ++m) {
            check_run(gelu_fused, configs[c], modes[m], x, n, 3, 1, false);
            check_run(gelu_fused, configs[c], modes[m], x, 5, 0, 2, false);
        }
    }
    /* A value outside the space is refused with its name, before anything runs. */
    TH_ASSERT_STATUS(tsr_config_override(dev, "gelu", "VW=2 VPT=3"), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "VPT");
    TH_ASSERT_OK(tsr_config_override(dev, "gelu", NULL));
    free(x);
}

/* The baseline computes the same function, one kernel per elementary operation. */
static void unfused_baseline_both_forms(void **state) {
    (void)state;
    size_t n = small_mode() ? 333 : 100003;
    float *x = malloc(n * sizeof *x);
    for (int m = 0; m < 2; ++m) {
        th_fill_uniform(x, n, -5, 5);
        check_run(gelu_unfused, "tsr_gelu_unfused", modes[m], x, n, 2, 5, false);
        check_run(gelu_unfused, "tsr_gelu_unfused (in place)", modes[m], x, n, 1, 0, true);
    }
    free(x);
}

/* The same edge values through the baseline: -inf and large negative x give -0 (the gate
 * 1 + tanh or 1 + erf is exactly 0 there; 0 * -inf used to give NaN). Only |x| near FLT_MAX
 * is left out: the baseline multiplies (1 + tanh) by x before halving, so 2x overflows. */
static void unfused_edge_values_both_forms(void **state) {
    (void)state;
    const float edges[] = {10.0f, -10.0f, 100.0f, -100.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN, -0.0f, 0.0f,
                           1e-40f, -1e-40f, FLT_MIN, -FLT_MIN, 20.0f, -20.0f, -19.999f, -20.001f, 7e12f, -7e12f,
                           2.7f, -2.7f, 88.0f, -88.0f, 1.0f, -1.0f, 3e-20f, -3e-20f, 9.0f, -9.0f, -9.001f};
    size_t n = sizeof edges / sizeof edges[0];
    for (int m = 0; m < 2; ++m)
        check_run(gelu_unfused, "tsr_gelu_unfused", modes[m], edges, n, 0, 0, false);
}

/* Every invalid argument: a status, a message naming the problem, and y untouched. */
static void invalid_arguments(void **state) {
    (void)state;
    enum { N = 64 };
    float hx[N], hy[N], after[N];
    th_fill_uniform(hx, N, -1, 1);
    for (int i = 0; i < N; ++i) hy[i] = guard_value;
    cl_mem x = th_buffer_from(dev, hx, N), y = th_buffer_from(dev, hy, N);
    const gelu_fn fns[] = {gelu_fused, gelu_unfused};
    for (int f = 0; f < 2; ++f) {
        gelu_fn fn = fns[f];
        TH_ASSERT_STATUS(fn(NULL, TSR_GELU_TANH, x, 0, y, 0, N, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_STATUS(fn(dev, (tsr_gelu_mode)0, x, 0, y, 0, N, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "mode");
        TH_ASSERT_STATUS(fn(dev, TSR_GELU_ERF, x, 0, y, 0, 0, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "n must be");
        TH_ASSERT_STATUS(fn(dev, TSR_GELU_TANH, NULL, 0, y, 0, N, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "x");
        TH_ASSERT_STATUS(fn(dev, TSR_GELU_TANH, x, 1, y, 0, N, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
        TH_ASSERT_CONTAINS(tsr_last_error(), "buffer x");
        TH_ASSERT_STATUS(fn(dev, TSR_GELU_TANH, x, 0, y, 2, N - 1, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
        TH_ASSERT_CONTAINS(tsr_last_error(), "buffer y");
        TH_ASSERT_STATUS(fn(dev, TSR_GELU_TANH, x, SIZE_MAX - 2, y, 0, 4, NULL, NULL), TSR_ERR_OVERFLOW);
        TH_ASSERT_STATUS(fn(dev, TSR_GELU_TANH, x, 0, x, 8, 16, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "overlap");
    }
    TH_ASSERT_STATUS(tsr_gelu(dev, NULL, x, y, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "desc is NULL");
    TH_ASSERT_STATUS(tsr_gelu_unfused(dev, NULL, x, y, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "desc is NULL");
    /* the unfused baseline is fp32 only: a 16-bit type is refused by name, an invalid one as tsr_gelu does */
    TH_ASSERT_STATUS(
        tsr_gelu_unfused(dev, &(tsr_gelu_desc){.mode = TSR_GELU_TANH, .n = 8, .y_type = TSR_BF16}, x, y, NULL, NULL),
        TSR_ERR_UNSUPPORTED);
    TH_ASSERT_CONTAINS(tsr_last_error(), "y is bf16");
    TH_ASSERT_STATUS(tsr_gelu_unfused(dev, &(tsr_gelu_desc){.mode = TSR_GELU_TANH, .n = 8, .x_type = (tsr_dtype)5}, x,
                                      y, NULL, NULL),
                     TSR_ERR_INVALID_ARG);
    th_read(dev, y, after, N);
    for (int i = 0; i < N; ++i) assert_true(after[i] == guard_value);
    clReleaseMemObject(x);
    clReleaseMemObject(y);
}

/* Sizes whose ends or byte counts wrap: TSR_ERR_OVERFLOW before anything runs, y untouched.
 * {8, 8, SIZE_MAX - 3} wraps offset + n to 4, which used to pass the buffer checks and launch
 * ~2^62 work-items. */
static void huge_sizes_overflow(void **state) {
    (void)state;
    enum { N = 16 };
    float hy[N], after[N];
    for (int i = 0; i < N; ++i) hy[i] = guard_value;
    cl_mem x = th_buffer(dev, N), y = th_buffer_from(dev, hy, N);
    const struct { size_t x_off, y_off, n; } cases[] = {
        {8, 8, SIZE_MAX - 3},   /* offset + n wraps to 4 */
        {0, 0, SIZE_MAX / 2},   /* n * sizeof(float) wraps */
        {0, 0, SIZE_MAX},
        {SIZE_MAX / 4, 0, 1},   /* (offset + n) * sizeof(float) wraps */
        {0, SIZE_MAX - 1, 4},   /* y_offset + n wraps */
        {SIZE_MAX, SIZE_MAX, 1},
    };
    const gelu_fn fns[] = {gelu_fused, gelu_unfused};
    for (int f = 0; f < 2; ++f)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
            tsr_status st = fns[f](dev, TSR_GELU_TANH, x, cases[c].x_off, y, cases[c].y_off, cases[c].n, NULL, NULL);
            if (st != TSR_ERR_OVERFLOW)
                fail_msg("fn %d case %zu (x_off %zu, y_off %zu, n %zu): %s (expected TSR_ERR_OVERFLOW): %s", f, c,
                         cases[c].x_off, cases[c].y_off, cases[c].n, tsr_status_str(st), tsr_last_error());
            TH_ASSERT_CONTAINS(tsr_last_error(), "overflows");
        }
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    th_read(dev, y, after, N);
    for (int i = 0; i < N; ++i) assert_true(after[i] == guard_value);
    clReleaseMemObject(x);
    clReleaseMemObject(y);
}

/* $TSR_CONFIG_GELU, read when the device opens, longer than the parser's 511 characters is
 * refused at launch, not truncated: here the cut would drop "VPT=3" (outside the space) and
 * silently run VW=4 alone. The same text through tsr_config_override is refused at the call. */
static void config_override_too_long(void **state) {
    (void)state;
    enum { N = 8 };
    float hy[N], after[N];
    for (int i = 0; i < N; ++i) hy[i] = guard_value;
    char value[700];
    memset(value, ' ', sizeof value);
    memcpy(value, "VW=4", 4);
    memcpy(value + 600, "VPT=3", 6);
    setenv("TSR_CONFIG_GELU", value, 1);
    tsr_device *opened = th_open_device();
    unsetenv("TSR_CONFIG_GELU"); /* read at open: unsetting it now changes nothing for `opened` */
    cl_mem x = th_buffer(opened, N), y = th_buffer_from(opened, hy, N);
    TH_ASSERT_STATUS(gelu_fused(opened, TSR_GELU_TANH, x, 0, y, 0, N, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "TSR_CONFIG_GELU is 605 characters long");
    tsr_config_info info;
    TH_ASSERT_STATUS(tsr_config_lookup(opened, "gelu", NULL, &info), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_config_override(dev, "gelu", value), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "tsr_config_override(gelu) is 605 characters long");
    th_read(opened, y, after, N);
    for (int i = 0; i < N; ++i) assert_true(after[i] == guard_value);
    clReleaseMemObject(x);
    clReleaseMemObject(y);
    /* Clearing the override clears the environment's too. */
    TH_ASSERT_OK(tsr_config_override(opened, "gelu", NULL));
    TH_ASSERT_OK(tsr_config_lookup(opened, "gelu", NULL, &info));
    assert_int_not_equal(info.source, TSR_CONFIG_ENV_OVERRIDE);
    tsr_device_close(opened);
    /* 511 characters still parse in full. */
    value[511] = '\0';
    setenv("TSR_CONFIG_GELU", value, 1);
    opened = th_open_device();
    unsetenv("TSR_CONFIG_GELU");
    TH_ASSERT_OK(tsr_config_lookup(opened, "gelu", NULL, &info));
    TH_ASSERT_CONTAINS(info.config, "VW=4");
    assert_int_equal(info.source, TSR_CONFIG_ENV_OVERRIDE);
    TH_ASSERT_CONTAINS(info.origin, "$TSR_CONFIG_GELU");
    tsr_device_close(opened);
    TH_ASSERT_OK(tsr_config_override(dev, "gelu", value));
    TH_ASSERT_OK(tsr_config_lookup(dev, "gelu", NULL, &info));
    TH_ASSERT_CONTAINS(info.config, "VW=4");
    TH_ASSERT_OK(tsr_config_override(dev, "gelu", NULL));
}


/* Overlap is judged by memory, not by handle: overlapping sub-buffers of one parent (or a
 * sub-buffer and its parent) are refused, naming x and y, with nothing written; disjoint ones,
 * and in place through two sub-buffers of the same origin, run and compute the right values. */
static void sub_buffers_overlap_by_memory(void **state) {
    (void)state;
    const size_t A = th_sub_buffer_align(dev), total = 4 * A;
    float *host = malloc(total * sizeof *host), *expect = malloc(total * sizeof *expect);
    float *got = malloc(total * sizeof *got);
    th_fill_uniform(host, total, -4, 4);
    memcpy(expect, host, total * sizeof *host);
    cl_mem parent = th_buffer_from(dev, host, total);
    cl_mem s0 = th_sub_buffer(parent, 0, 2 * A), s1 = th_sub_buffer(parent, A, 2 * A);
    cl_mem s3a = th_sub_buffer(parent, 3 * A, A), s3b = th_sub_buffer(parent, 3 * A, A);
    cl_mem d0 = th_sub_buffer(parent, 0, A), d2 = th_sub_buffer(parent, 2 * A, A);
    const struct { cl_mem x; size_t xo; cl_mem y; size_t yo; size_t n; } bad[] = {
        {s0, 0, s1, 0, 2 * A},     /* [0, 2A) and [A, 3A) of the parent */
        {s1, 0, s0, 0, 2 * A},
        {s0, 1, s0, 0, A},         /* one sub-buffer, shifted offsets */
        {s0, A, s1, 1, A},         /* x [A, 2A), y [A + 1, 2A + 1) */
        {parent, 0, s1, 0, 2 * A}, /* the parent against its sub-buffer */
        {s1, 0, parent, 0, 2 * A},
        {parent, A + 1, s1, 0, A}, /* y at A, x at A + 1 */
    };
    const gelu_fn fns[] = {gelu_fused, gelu_unfused};
    for (int f = 0; f < 2; ++f)
        for (size_t c = 0; c < sizeof bad / sizeof bad[0]; ++c) {
            tsr_status st = fns[f](dev, TSR_GELU_TANH, bad[c].x, bad[c].xo, bad[c].y, bad[c].yo, bad[c].n, NULL, NULL);
            if (st != TSR_ERR_INVALID_ARG)
                fail_msg("fn %d overlap case %zu: %s (expected TSR_ERR_INVALID_ARG): %s", f, c, tsr_status_str(st),
                         tsr_last_error());
            TH_ASSERT_CONTAINS(tsr_last_error(), "x overlaps y");
        }
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    th_read(dev, parent, got, total);
    assert_memory_equal(got, host, total * sizeof *host);

    /* Accepted: disjoint sub-buffers, adjacent parent and sub-buffer, and exactly in place. */
    const struct { cl_mem x; size_t xo; cl_mem y; size_t yo; size_t in, out; } good[] = {
        {d0, 0, d2, 0, 0, 2 * A},        /* [0, A) -> [2A, 3A) */
        {parent, 2 * A, d0, 0, 2 * A, 0}, /* parent [2A, 3A) -> sub-buffer [0, A) */
        {s3a, 0, s3b, 0, 3 * A, 3 * A},  /* two handles, one origin: in place */
        {parent, 3 * A, s3a, 0, 3 * A, 3 * A}, /* parent and sub-buffer, the same bytes */
    };
    for (size_t c = 0; c < sizeof good / sizeof good[0]; ++c) {
        tsr_gelu_mode mode = modes[c % 2];
        cl_event ev = NULL;
        tsr_status st = gelu_fused(dev, mode, good[c].x, good[c].xo, good[c].y, good[c].yo, A, NULL, &ev);
        if (st != TSR_SUCCESS) fail_msg("disjoint case %zu: %s: %s", c, tsr_status_str(st), tsr_last_error());
        assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
        clReleaseEvent(ev);
        for (size_t i = 0; i < A; ++i)
            expect[good[c].out + i] = (float)th_ref_activation((int)mode, expect[good[c].in + i]);
        th_read(dev, parent, got, total);
        for (size_t i = 0; i < total; ++i)
            if (!(fabs((double)got[i] - expect[i]) <= 1e-6 * fmax(1.0, fabs((double)expect[i]))))
                fail_msg("case %zu: parent[%zu] = %.9g, expected %.9g", c, i, (double)got[i], (double)expect[i]);
    }
    cl_mem subs[] = {s0, s1, s3a, s3b, d0, d2};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; ++i) clReleaseMemObject(subs[i]);
    clReleaseMemObject(parent);
    free(host), free(expect), free(got);
}

/* ---------------------------------------------------------------- 16-bit storage and tsr_convert */

static const tsr_dtype all_types[3] = {TSR_F32, TSR_F16, TSR_BF16};


static cl_mem raw_buffer(const void *host, size_t bytes) {
    cl_int err;
    cl_mem m =
        clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, (void *)host, &err);
    if (err != CL_SUCCESS) fail_msg("clCreateBuffer(%zu bytes): %s", bytes, tsr_cl_error_name(err));
    return m;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Source values of a conversion test, as bits of src_type (*count of them, malloc'd): for 16-bit
 * sources every one of the 65536 patterns; for f32 the edges (NaN, +-Inf, +-0, FLT_MAX, f32 and
 * f16 subnormals, 65504, 65520 and its neighbours), the midpoint between every two adjacent
 * finite f16 and every two adjacent bf16 values of both signs (ties at each rounding boundary),
 * and random bit patterns. `stride` > 1 keeps every stride-th tie and pattern (small mode). */
static void *conversion_sources(tsr_dtype src_type, size_t stride, size_t *count) {
    if (src_type != TSR_F32) {
        const size_t n = 65536 / stride;
        uint16_t *v = malloc(n * 2);
        for (size_t i = 0; i < n; ++i)
            v[i] = (uint16_t)(i * stride + (stride > 1 ? th_rand() % stride : 0));
        *count = n;
        return v;
    }
    const float edges[] = {NAN,       -NAN,           INFINITY,       -INFINITY,       0.0f,
                           -0.0f,     FLT_MAX,        -FLT_MAX,       FLT_MIN,         -FLT_MIN,
                           1e-40f,    -1e-40f,        0x1p-149f,      -0x1p-149f,      0x1p-24f,
                           -0x1p-24f, 0x1p-25f,       -0x1p-25f,      0x1.000002p-25f, 0x1.8p-24f,
                           0x1p-14f,  0x1.ff8p-15f,   65504.0f,       -65504.0f,       65519.996f,
                           65520.0f,  -65520.0f,      65536.0f,       1e30f,           1.0f,
                           -1.0f,     1.00048828125f, 1.00146484375f, 3.14159265f,     0.1f,
                           -2.5f};
    const size_t nedges = sizeof edges / sizeof edges[0];
    const size_t f16_ties = 0x7c00 / stride, bf16_ties = 0x7f80 / stride, random = 20000 / stride;
    const size_t n = nedges + 2 * f16_ties + 2 * bf16_ties + random + 6;
    uint32_t *v = malloc(n * 4);
    size_t k = 0;
    for (size_t i = 0; i < nedges; ++i)
        v[k++] = f32_bits(edges[i]);
    v[k++] = 0x7f800001u; /* a signalling NaN, NaNs with payloads of both signs */
    v[k++] = 0xffc12345u;
    v[k++] = 0x7fbfffffu;
    v[k++] = 0x3f808000u; /* bf16 ties: to even below, to even above, and up to Inf */
    v[k++] = 0x3f818000u;
    v[k++] = 0x7f7f8000u;
    for (size_t i = 0; i < f16_ties; ++i) { /* the midpoint above finite positive f16 h, exact in f32 */
        const uint16_t h = (uint16_t)(i * stride + (stride > 1 ? th_rand() % stride : 0));
        const float mid = (float)(((double)tsr_f16_to_f32(h) + (double)tsr_f16_to_f32((uint16_t)(h + 1))) / 2);
        v[k++] = f32_bits(mid);
        v[k++] = f32_bits(-mid);
    }
    for (size_t i = 0; i < bf16_ties; ++i) {
        const uint32_t h = (uint32_t)(i * stride + (stride > 1 ? th_rand() % stride : 0));
        v[k++] = (h << 16) | 0x8000u;
        v[k++] = (h << 16) | 0x80008000u;
    }
    for (size_t i = 0; i < random; ++i)
        v[k++] = th_rand();
    *count = k;
    return v;
}

/* tsr_convert of src (n elements of src_type) at src_off into dst_type at dst_off, with guard
 * zones both sides of each, against tsr_convert_host bit for bit (NaN payloads and signalling
 * NaNs included, as the header promises). */
static void check_convert(tsr_dtype src_type, const void *src, size_t n, tsr_dtype dst_type, size_t src_off,
                          size_t dst_off, const char *what) {
    const size_t ss = tsr_dtype_size(src_type), ds = tsr_dtype_size(dst_type);
    const size_t ns = src_off + n + 3, nd = dst_off + n + 3;
    unsigned char *hs = malloc(ns * ss), *hd = malloc(nd * ds), *expect = malloc(n * ds);
    memset(hs, 0x5a, ns * ss);
    memcpy(hs + src_off * ss, src, n * ss);
    memset(hd, 0xa5, nd * ds); /* guard zones and a poisoned output (0xa5a5: a finite value in every type) */
    TH_ASSERT_OK(tsr_convert_host(src_type, src, dst_type, expect, n));
    cl_mem ds_mem = raw_buffer(hs, ns * ss), dd_mem = raw_buffer(hd, nd * ds);
    cl_event ev = NULL;
    tsr_status st = tsr_convert(dev, src_type, ds_mem, src_off, dst_type, dd_mem, dst_off, n, NULL, &ev);
    if (st != TSR_SUCCESS)
        fail_msg("%s: tsr_convert %s -> %s, n=%zu: %s: %s", what, tsr_dtype_str(src_type), tsr_dtype_str(dst_type), n,
                 tsr_status_str(st), tsr_last_error());
    assert_non_null(ev);
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    assert_int_equal(clEnqueueReadBuffer(tsr_device_queue(dev), dd_mem, CL_TRUE, 0, nd * ds, hd, 0, NULL, NULL),
                     CL_SUCCESS);
    for (size_t i = 0; i < nd; ++i) {
        if (i >= dst_off && i < dst_off + n) continue;
        for (size_t b = 0; b < ds; ++b)
            if (hd[i * ds + b] != 0xa5)
                fail_msg("%s: tsr_convert %s -> %s wrote outside dst at element %zu", what, tsr_dtype_str(src_type),
                         tsr_dtype_str(dst_type), i);
    }
    for (size_t i = 0; i < n; ++i) {
        const uint32_t got = th_element_bits(dst_type, hd, dst_off + i), want = th_element_bits(dst_type, expect, i);
        if (got != want)
            fail_msg("%s: tsr_convert %s -> %s, element %zu (source bits 0x%x): got 0x%x, tsr_convert_host 0x%x", what,
                     tsr_dtype_str(src_type), tsr_dtype_str(dst_type), i, th_element_bits(src_type, src, i), got, want);
    }
    clReleaseMemObject(ds_mem);
    clReleaseMemObject(dd_mem);
    free(hs), free(hd), free(expect);
}

/* Every (src, dst) pair of types on the special values, every tie and random patterns, at odd
 * offsets with n not a multiple of any vector width. */
static void convert_every_pair_bit_for_bit(void **state) {
    (void)state;
    const size_t stride = small_mode() ? 61 : 1;
    for (int s = 0; s < 3; ++s) {
        size_t n = 0;
        void *src = conversion_sources(all_types[s], stride, &n);
        n -= (n % 16 == 0); /* never a whole number of vectors */
        for (int d = 0; d < 3; ++d) {
            check_convert(all_types[s], src, n, all_types[d], 3, 5, "special values");
            check_convert(all_types[s], src, 1 + th_rand() % 40, all_types[d], th_rand() % 9, th_rand() % 9, "short");
        }
        free(src);
    }
}

/* Every vector width, both layouts: the same bits. Each configuration converts from every type
 * and into every type (three pairs, rotating with the configuration, so each program is built once
 * and the ten configurations cover every pair), through vector loads and stores and the tail. */
static void convert_configurations(void **state) {
    (void)state;
    const int widths[] = {1, 2, 4, 8, 16};
    const size_t stride = small_mode() ? 257 : 7;
    for (int c = 0; c < 10; ++c) {
        const int vw = widths[c / 2], interleave = c % 2;
        if (small_mode() && c != 3 && c != 8) continue; /* VW=2 interleaved, VW=16 contiguous */
        char config[96];
        snprintf(config, sizeof config, "VW=%d VPT=%d WG=%d INTERLEAVE=%d", vw, vw == 16 ? 2 : 4, interleave ? 16 : 4,
                 interleave);
        if (!th_try_override(dev, "gelu", config)) continue;
        for (int s = 0; s < 3; ++s) {
            size_t n = 0;
            void *src = conversion_sources(all_types[s], stride, &n);
            n -= (n % 16 == 0);
            check_convert(all_types[s], src, n, all_types[(s + c) % 3], 1, 7, config);
            free(src);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "gelu", NULL));
}

/* The bound a 16-bit GELU is held to: the fp32 kernel's tolerance or y's own rounding, and for a
 * 16-bit y the error of the value it rounds (TSR_GELU16_ERROR: the AVX-512 forms of cl/gelu.cl). */
static double typed_bound(tsr_dtype y_type) {
    return fmax(1e-6, tsr_dtype_error_bound(y_type, 1)) + (y_type == TSR_F32 ? 0.0 : 1.01 * TSR_GELU16_ERROR);
}

/* tsr_gelu with x_type and y_type (or, with x and y f32, the zero types) on x (n values, already rounded to x_type) at
 * the given offsets, in place when asked: every output against the double reference from the rounded input within
 * typed_bound (GELU's metric); a value whose rounding to y_type overflows or is special must be exactly that; guard
 * zones intact. */
static void check_typed_run(tsr_gelu_mode mode, tsr_dtype x_type, tsr_dtype y_type, const float *x, size_t n,
                            size_t x_off, size_t y_off, bool in_place, bool shorthand) {
    if (in_place) y_off = x_off;
    const size_t nx = x_off + n + 3, ny = y_off + n + 3;
    float *hx = malloc(nx * sizeof *hx), *hy = malloc(ny * sizeof *hy);
    for (size_t i = 0; i < nx; ++i)
        hx[i] = guard_value;
    memcpy(hx + x_off, x, n * sizeof *x);
    cl_mem dx = th_buffer_from_typed(dev, x_type, hx, nx), dy = dx;
    if (!in_place) {
        for (size_t i = 0; i < ny; ++i)
            hy[i] = guard_value;
        th_poison(hy + y_off, n);
        dy = th_buffer_from_typed(dev, y_type, hy, ny);
    }
    char what[96];
    snprintf(what, sizeof what, "%s %s (x %s, y %s)%s", shorthand ? "tsr_gelu" : "tsr_gelu (typed)", form_name(mode),
             tsr_dtype_str(x_type), tsr_dtype_str(y_type), in_place ? " in place" : "");
    cl_event ev = NULL;
    tsr_status st = shorthand ? gelu_fused(dev, mode, dx, x_off, dy, y_off, n, NULL, &ev)
                              : gelu_typed(dev, mode, x_type, dx, x_off, y_type, dy, y_off, n, NULL, &ev);
    if (st != TSR_SUCCESS) fail_msg("%s n=%zu: %s: %s", what, n, tsr_status_str(st), tsr_last_error());
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    th_read_typed(dev, y_type, dy, hy, ny);
    for (size_t i = 0; i < ny; ++i) {
        if (i >= y_off && i < y_off + n) continue;
        if (hy[i] != tsr_dtype_round(y_type, guard_value)) fail_msg("%s n=%zu wrote outside y at %zu", what, n, i);
    }
    const double bound = typed_bound(y_type);
    for (size_t i = 0; i < n; ++i) {
        const double r = th_ref_activation((int)mode, x[i]), got = hy[y_off + i];
        const float stored = tsr_dtype_round(y_type, (float)r); /* what y_type holds of the exact result */
        bool ok;
        if (isnan(r))
            ok = isnan(got);
        else if (isinf(stored))
            ok = got == stored; /* +-Inf, and finite results beyond y_type's range */
        else
            ok = got == r || fabs(got - r) <= bound * fmax(1.0, fabs((double)x[i]));
        if (!ok)
            fail_msg("%s n=%zu: GELU(%.9g) = %.9g, reference %.9g (error %.3g, bound %.3g x max(1, |x|))", what, n,
                     (double)x[i], got, r, fabs(got - r), bound);
        if (r == 0 && got == 0 && x[i] == 0 && !signbit(r) != !signbit(got))
            fail_msg("%s: GELU(%g) has the wrong sign of zero", what, (double)x[i]);
    }
    if (!in_place) clReleaseMemObject(dy);
    clReleaseMemObject(dx);
    free(hx);
    free(hy);
}

/* Both forms for all 9 (x, y) pairs of types, on fresh inputs rounded to x's type, at offsets and
 * in place (same type), and tsr_gelu as the f32 shorthand of the same path. */
static void gelu_every_type_pair(void **state) {
    (void)state;
    const size_t n = small_mode() ? 203 : 40009;
    float *x = malloc(n * sizeof *x);
    for (int xt = 0; xt < 3; ++xt)
        for (int yt = 0; yt < 3; ++yt)
            for (int m = 0; m < 2; ++m) {
                if (small_mode() && m != (xt + yt) % 2) continue; /* each pair once, both forms among them */
                th_fill_uniform_typed(all_types[xt], x, n, -6, 6);
                check_typed_run(modes[m], all_types[xt], all_types[yt], x, n, 1 + th_rand() % 7, th_rand() % 9, false,
                                false);
                if (xt == yt)
                    check_typed_run(modes[m], all_types[xt], all_types[yt], x, n, th_rand() % 5, 0, true, false);
            }
    th_fill_uniform_typed(TSR_F32, x, n, -6, 6);
    check_typed_run(TSR_GELU_TANH, TSR_F32, TSR_F32, x, n, 2, 3, false, true);
    free(x);
}

/* Every f16 and every bf16 value as x (NaNs, Infs, subnormals, the largest finite values), into a
 * y of either 16-bit type, both forms: within typed_bound everywhere, at VW=16 (where a 16-bit y
 * runs the AVX-512 forms of cl/gelu.cl on such CPUs), VPT=4 and VPT=8 (GELU16's four- and
 * eight-vector steps; bf16 -> bf16 takes its 32-element pairs at both). Oclgrind and rusticl:
 * every 61st, VPT=4 only. */
static void gelu_every_16_bit_input(void **state) {
    (void)state;
    const uint32_t stride = small_mode() ? 61 : 1;
    const size_t n = 65536 / stride;
    const char *const configs[] = {"VW=16 VPT=4 WG=16 INTERLEAVE=0", "VW=16 VPT=8 WG=4 INTERLEAVE=0"};
    float *x = malloc(n * sizeof *x);
    for (size_t c = 0; c < (small_mode() ? 1 : 2); ++c) {
        if (!th_try_override(dev, "gelu", configs[c])) continue;
        for (int xi = 1; xi < 3; ++xi)
            for (int yi = 1; yi < 3; ++yi)
                for (int m = 0; m < 2; ++m) {
                    for (size_t i = 0; i < n; ++i) {
                        const uint16_t h = (uint16_t)(i * stride);
                        x[i] = all_types[xi] == TSR_F16 ? tsr_f16_to_f32(h) : tsr_bf16_to_f32(h);
                    }
                    check_typed_run(modes[m], all_types[xi], all_types[yi], x, n, 0, 0, false, false);
                }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "gelu", NULL));
    free(x);
}

/* NaN, +-Inf, +-0, subnormals and values at the edge of f16's range through 16-bit storage: NaN
 * stays NaN, GELU(+Inf) = +Inf, GELU(-Inf) = -0, results beyond 65504 are Inf in an f16 y, and
 * FLT_MAX is Inf in a bf16 y (it rounds past bf16's largest value). */
static void gelu_special_values_through_16_bit(void **state) {
    (void)state;
    const float edges[] = {NAN,       -NAN,     INFINITY, -INFINITY, 0.0f,     -0.0f,  65504.0f, -65504.0f,
                           1e5f,      -1e5f,    65536.0f, FLT_MAX,   -FLT_MAX, 1e30f,  -1e30f,   0x1p-24f,
                           -0x1p-24f, 0x1p-14f, 1e-40f,   -1e-40f,   10.0f,    -10.0f, 20.0f,    -20.0f,
                           2.7f,      -2.7f,    1.0f,     -1.0f,     0.5f};
    const size_t n = sizeof edges / sizeof edges[0];
    float x[sizeof edges / sizeof edges[0]];
    for (int xt = 0; xt < 3; ++xt)
        for (int yt = 0; yt < 3; ++yt) {
            if (xt == 0 && yt == 0) continue; /* fused_edge_values_both_forms */
            memcpy(x, edges, sizeof edges);
            tsr_dtype_round_array(all_types[xt], x, n); /* what x_type stores of them (f16: 1e5 is Inf) */
            for (int m = 0; m < 2; ++m)
                check_typed_run(modes[m], all_types[xt], all_types[yt], x, n, 1, 2, false, false);
        }
}

/* Inputs for gelu_stores_round_like_the_host, as f32 bits (*count of them, malloc'd). GELU gives
 * x back exactly from x = 10 on (x / (1 + 2^t), 2^t below 2^-125) and -0 below x = -9, so most
 * of these reach y's store as they are: every bf16 rounding tie in one binade and ties in every
 * binade from 16 up (with the patterns one below and one above each), the largest finite floats
 * (0x7f7f8000 and up round to Inf in bf16), NaNs whose top 16 bits overflow when rounded, +-0,
 * subnormals, and random values and bit patterns of both signs. */
static uint32_t *store_sources(size_t stride, size_t *count) {
    const uint32_t fixed[] = {0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x7f7e8000u, 0x7f800000u,
                              0xff800000u, 0x7fffffffu, 0xffffffffu, 0x7fff8000u, 0x7fc00000u, 0x00000000u,
                              0x80000000u, 0x00000001u, 0x80000001u, 0x00018000u, 0x007fffffu, 0x00808000u,
                              0x41200000u, 0x41208000u, 0x41218000u, 0x477fe000u, 0x477ff000u, 0x47800000u};
    const size_t nfixed = sizeof fixed / sizeof fixed[0], binade = 128 / stride, exps = 254 - 131 + 1,
                 random = 8000 / stride;
    uint32_t *v = malloc((nfixed + 3 * binade + 3 * exps + 2 * random) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; i < nfixed; ++i)
        v[k++] = fixed[i];
    for (size_t i = 0; i < binade; ++i) { /* every 7-bit bf16 mantissa of [1024, 2048), odd and even */
        const uint32_t hi = 0x4480u + (uint32_t)(i * stride);
        v[k++] = (hi << 16) | 0x8000u;
        v[k++] = (hi << 16) | 0x7fffu;
        v[k++] = (hi << 16) | 0x8001u;
    }
    for (uint32_t e = 131; e <= 254; ++e) { /* 16 and up: a tie in each binade, to both neighbours */
        const uint32_t hi = (e << 7) | (th_rand() & 0x7fu);
        v[k++] = (hi << 16) | 0x8000u;
        v[k++] = (hi << 16) | (th_rand() % 2 ? 0x7fffu : 0x8001u);
        v[k++] = ((hi | 0x8000u) << 16) | 0x8000u; /* negative: GELU is -0 there */
    }
    for (size_t i = 0; i < random; ++i) {
        const float f = (float)(th_rand() % 240001) / 10000.0f - 12.0f; /* GELU's whole curve */
        memcpy(&v[k++], &f, 4);
        v[k++] = th_rand();
    }
    *count = k - (k % 16 == 0); /* never a whole number of vectors */
    return v;
}

/* Whether y bits g (a 16-bit y_type) may stand for GELU tanh of x where they differ from the
 * rounding of the fp32 kernel's result: on AVX-512 CPUs a 16-bit y rounds cl/gelu.cl's GELU16
 * value, within TSR_GELU16_ERROR max(1, |x|) of GELU(x), so g must lie between the roundings of
 * the two ends of that interval around the double reference (rounding is monotone). Only where
 * GELU computes something: from x = 10.9 on (x itself), below -9 (-0), at +-Inf and NaN both
 * forms give the same bits. */
static bool gelu16_rounding_of_bound(tsr_dtype y_type, float x, uint32_t g) {
    if (y_type == TSR_F32 || !(x >= -9.0f && x < 10.9f)) return false;
    const double r = th_ref_activation(TSR_GELU_TANH, x), d = (TSR_GELU16_ERROR + 1e-6) * fmax(1.0, fabs(x));
    const float lo = tsr_dtype_round(y_type, (float)(r - d)), hi = tsr_dtype_round(y_type, (float)(r + d));
    const float got = y_type == TSR_F16 ? tsr_f16_to_f32((uint16_t)g) : tsr_bf16_to_f32((uint16_t)g);
    return got >= lo && got <= hi;
}

/* The stores of GELU itself (dtype.cl's TSR_ST/TSR_VST, apart from tsr_convert's copy): y in f16
 * or bf16 holds the device's own fp32 result rounded by the host's conversion, bit for bit (bf16
 * NaNs too; an f16 NaN must be a NaN), at every vector width and in the tail; likewise with the
 * input in f16 or bf16 (widened on the device, exactly) and y in any type. The fp32 -> fp32 run
 * on the same (rounded) inputs is the reference, so GELU's arithmetic is out of the comparison,
 * except for a 16-bit y where GELU computes (gelu16_rounding_of_bound): every rounding tie, the
 * largest floats, NaNs, zeros and subnormal inputs stay bit for bit. */
static void gelu_stores_round_like_the_host(void **state) {
    (void)state;
    const size_t stride = small_mode() ? 9 : 1;
    size_t n = 0;
    uint32_t *src = store_sources(stride, &n);
    float *xf = malloc(n * sizeof *xf), *ref = malloc(n * sizeof *ref);
    unsigned char *xt = malloc(n * 4), *expect = malloc(n * 4), *got = malloc((n + 2) * 4);
    /* VW=16 at VPT=2, 4 and 8: GELU16's two-, four- and eight-vector steps on AVX-512 CPUs */
    const char *const configs[] = {"VW=1 VPT=4 WG=4 INTERLEAVE=0", "VW=4 VPT=2 WG=16 INTERLEAVE=1",
                                   "VW=16 VPT=2 WG=4 INTERLEAVE=0", "VW=8 VPT=1 WG=16 INTERLEAVE=0",
                                   "VW=16 VPT=4 WG=4 INTERLEAVE=0", "VW=16 VPT=8 WG=4 INTERLEAVE=0"};
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; ++c) {
        if (small_mode() && c != 2 && c != 1) continue;
        if (!th_try_override(dev, "gelu", configs[c])) continue;
        for (int xi = 0; xi < 3; ++xi) {
            const tsr_dtype x_type = all_types[xi];
            /* x as x_type stores it, and those values in f32 for the reference run */
            TH_ASSERT_OK(tsr_convert_host(TSR_F32, src, x_type, xt, n));
            TH_ASSERT_OK(tsr_convert_host(x_type, xt, TSR_F32, xf, n));
            cl_mem dx = raw_buffer(xt, n * tsr_dtype_size(x_type)), dxf = raw_buffer(xf, n * 4);
            cl_mem dref = raw_buffer(xf, n * 4);
            TH_ASSERT_OK(gelu_typed(dev, TSR_GELU_TANH, TSR_F32, dxf, 0, TSR_F32, dref, 0, n, NULL, NULL));
            assert_int_equal(clEnqueueReadBuffer(tsr_device_queue(dev), dref, CL_TRUE, 0, n * 4, ref, 0, NULL, NULL),
                             CL_SUCCESS);
            for (int yi = 0; yi < 3; ++yi) {
                const tsr_dtype y_type = all_types[yi];
                if (x_type == TSR_F32 && y_type == TSR_F32) continue;
                /* rusticl's thinned set (th_small_thinned; llvmpipe compiles each pair's program under
                 * an override for seconds): a covering set, every load type and every store type once
                 * (f32 -> f16, f16 -> bf16, bf16 -> f32); every pair still runs there at the default
                 * configuration (gelu_every_type_pair), here on PoCL and Oclgrind, and with TSR_TEST_LONG=1 */
                if (th_rusticl_mode() && th_small_thinned() && yi != (xi + 1) % 3) continue;
                const size_t ys = tsr_dtype_size(y_type), y_off = 1 + c % 2;
                memset(got, 0xa5, (n + 2) * ys);
                cl_mem dy = raw_buffer(got, (n + 2) * ys);
                TH_ASSERT_OK(gelu_typed(dev, TSR_GELU_TANH, x_type, dx, 0, y_type, dy, y_off, n, NULL, NULL));
                assert_int_equal(
                    clEnqueueReadBuffer(tsr_device_queue(dev), dy, CL_TRUE, 0, (n + 2) * ys, got, 0, NULL, NULL),
                    CL_SUCCESS);
                TH_ASSERT_OK(tsr_convert_host(TSR_F32, ref, y_type, expect, n));
                for (size_t i = 0; i < n; ++i) {
                    const uint32_t g = th_element_bits(y_type, got, y_off + i), w = th_element_bits(y_type, expect, i);
                    const bool nan_ok = y_type != TSR_BF16 && isnan(ref[i]) &&
                                        isnan(y_type == TSR_F16 ? tsr_f16_to_f32((uint16_t)g) : ((float *)got)[y_off + i]);
                    if (g != w && !nan_ok && !gelu16_rounding_of_bound(y_type, xf[i], g))
                        fail_msg("%s: GELU x %s -> y %s, element %zu (x bits 0x%08x, fp32 GELU bits 0x%08x): y bits "
                                 "0x%x, the host's rounding 0x%x",
                                 configs[c], tsr_dtype_str(x_type), tsr_dtype_str(y_type), i,
                                 th_element_bits(TSR_F32, xf, i), th_element_bits(TSR_F32, ref, i), g, w);
                }
                clReleaseMemObject(dy);
            }
            clReleaseMemObject(dx);
            clReleaseMemObject(dxf);
            clReleaseMemObject(dref);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "gelu", NULL));
    free(src), free(xf), free(ref), free(xt), free(expect), free(got);
}

/* Wrong types, buffers too small in 16-bit elements, overlaps across types: refused with the
 * name and the numbers, nothing written; in place in one 16-bit type runs. */
static void typed_invalid_arguments(void **state) {
    (void)state;
    enum { N = 64 };
    uint16_t guard[4 * N];
    for (size_t i = 0; i < 4 * N; ++i)
        guard[i] = 0x3c00;                      /* 1.0 in f16 */
    cl_mem a = raw_buffer(guard, sizeof guard); /* 256 16-bit elements, 128 floats */
    cl_mem b = raw_buffer(guard, N * 2);        /* 64 16-bit elements, 32 floats */
    /* Invalid types name the tensor. */
    TH_ASSERT_STATUS(gelu_typed(dev, TSR_GELU_TANH, (tsr_dtype)TSR_DTYPE_COUNT, a, 0, TSR_F16, b, 0, N, NULL, NULL),
                     TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "gelu: x");
    TH_ASSERT_STATUS(gelu_typed(dev, TSR_GELU_ERF, TSR_F16, a, 0, (tsr_dtype)-1, b, 0, N, NULL, NULL),
                     TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "gelu: y");
    TH_ASSERT_STATUS(tsr_convert(dev, (tsr_dtype)7, a, 0, TSR_F16, b, 0, N, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "tsr_convert: src");
    TH_ASSERT_STATUS(tsr_convert(dev, TSR_BF16, a, 0, (tsr_dtype)TSR_DTYPE_COUNT, b, 0, N, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "tsr_convert: dst");
    TH_ASSERT_STATUS(tsr_convert(NULL, TSR_F32, a, 0, TSR_F16, b, 0, N, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_convert(dev, TSR_F32, a, 0, TSR_F16, b, 0, 0, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "n must be");
    /* Sizes count each buffer's own elements: b holds 64 f16 but only 32 floats. */
    TH_ASSERT_OK(tsr_convert(dev, TSR_F16, a, 0, TSR_BF16, b, 0, N, NULL, NULL));
    TH_ASSERT_STATUS(tsr_convert(dev, TSR_F16, a, 0, TSR_BF16, b, 1, N, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "buffer dst holds 64 bf16 elements but the call needs 65");
    TH_ASSERT_STATUS(tsr_convert(dev, TSR_F16, a, 0, TSR_F32, b, 0, N, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "buffer dst holds 32 floats but the call needs 64");
    TH_ASSERT_STATUS(gelu_typed(dev, TSR_GELU_TANH, TSR_F16, b, 1, TSR_F16, a, 0, N, NULL, NULL),
                     TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "buffer x holds 64 f16 elements but the call needs 65");
    TH_ASSERT_STATUS(gelu_typed(dev, TSR_GELU_TANH, TSR_F32, b, 0, TSR_F16, a, 0, N, NULL, NULL),
                     TSR_ERR_BUFFER_TOO_SMALL);
    TH_ASSERT_CONTAINS(tsr_last_error(), "buffer x holds 32 floats");
    TH_ASSERT_STATUS(tsr_convert(dev, TSR_F16, a, SIZE_MAX / 2, TSR_F32, b, 0, 4, NULL, NULL), TSR_ERR_OVERFLOW);
    /* Overlaps in bytes across types: f32 x over bytes [0, 64), f16 y over [16, 48). */
    TH_ASSERT_STATUS(gelu_typed(dev, TSR_GELU_TANH, TSR_F32, a, 0, TSR_F16, a, 8, 16, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "bytes [0, 64) and [16, 48)");
    TH_ASSERT_STATUS(tsr_convert(dev, TSR_BF16, a, 8, TSR_F32, a, 4, 16, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "bytes [16, 48) and [16, 80)");
    /* The same bytes in two 16-bit types is not in place. */
    TH_ASSERT_STATUS(tsr_convert(dev, TSR_F16, a, 4, TSR_BF16, a, 4, 16, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "in place needs one type");
    TH_ASSERT_STATUS(gelu_typed(dev, TSR_GELU_ERF, TSR_BF16, a, 4, TSR_F16, a, 4, 16, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "in place needs one type");
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    uint16_t after[4 * N];
    assert_int_equal(clEnqueueReadBuffer(tsr_device_queue(dev), a, CL_TRUE, 0, sizeof after, after, 0, NULL, NULL),
                     CL_SUCCESS);
    assert_memory_equal(after, guard, sizeof guard);
    /* In place in one 16-bit type: GELU(1) = 0.841 in f16 (0x3abb / 0x3aba, tanh form) over the
     * first 16 elements, the rest untouched. */
    TH_ASSERT_OK(gelu_typed(dev, TSR_GELU_TANH, TSR_F16, a, 0, TSR_F16, a, 0, 16, NULL, NULL));
    float back[4 * N];
    th_read_typed(dev, TSR_F16, a, back, 4 * N);
    for (size_t i = 0; i < 4 * N; ++i) {
        const double want = i < 16 ? th_ref_activation(TSR_GELU_TANH, 1.0) : 1.0;
        if (!(fabs(back[i] - want) <= typed_bound(TSR_F16))) fail_msg("in place f16: element %zu = %g", i, back[i]);
    }
    clReleaseMemObject(a);
    clReleaseMemObject(b);
}

/* The tuner searches GELU's space like any op's and validates every candidate. */
static void tuner_tunes_gelu(void **state) {
    (void)state;
    tsr_tune_options o = {.strategy = TSR_TUNE_CLIMB, .budget_evaluations = 3, .classes = "small,small-erf",
                          .dry_run = true, .seed = 5};
    tsr_tune_result r[2];
    size_t n = 0;
    TH_ASSERT_OK(tsr_tune(dev, "gelu", &o, r, 2, &n));
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; ++i) {
        assert_true(r[i].best_gflops > 0);
        assert_string_equal(r[i].unit, "GB/s");
        assert_int_equal(r[i].wrong_results, 0);
    }
}

int main(void) {
    if (small_mode()) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(fused_random_inputs_both_forms),
            cmocka_unit_test(fused_edge_values_both_forms),
            cmocka_unit_test(fused_odd_sizes_offsets_in_place),
            cmocka_unit_test(fused_configurations),
            cmocka_unit_test(unfused_baseline_both_forms),
            cmocka_unit_test(unfused_edge_values_both_forms),
            cmocka_unit_test(convert_every_pair_bit_for_bit),
            cmocka_unit_test(convert_configurations),
            cmocka_unit_test(gelu_every_type_pair),
            cmocka_unit_test(gelu_special_values_through_16_bit),
            cmocka_unit_test(gelu_every_16_bit_input),
            cmocka_unit_test(gelu_stores_round_like_the_host),
        };
        return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
    }
    /* The long cases (with empty caches) first, dealt across tests/meson.build's two shards (case i
     * runs in shard i mod 2). */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gelu_stores_round_like_the_host),
        cmocka_unit_test(convert_configurations),
        cmocka_unit_test(fused_configurations),
        cmocka_unit_test(gelu_every_type_pair),
        cmocka_unit_test(fused_random_inputs_both_forms),
        cmocka_unit_test(fused_edge_values_both_forms),
        cmocka_unit_test(fused_odd_sizes_offsets_in_place),
        cmocka_unit_test(unfused_baseline_both_forms),
        cmocka_unit_test(unfused_edge_values_both_forms),
        cmocka_unit_test(invalid_arguments),
        cmocka_unit_test(huge_sizes_overflow),
        cmocka_unit_test(config_override_too_long),
        cmocka_unit_test(sub_buffers_overlap_by_memory),
        cmocka_unit_test(tuner_tunes_gelu),
        cmocka_unit_test(convert_every_pair_bit_for_bit),
        cmocka_unit_test(gelu_special_values_through_16_bit),
        cmocka_unit_test(gelu_every_16_bit_input),
        cmocka_unit_test(typed_invalid_arguments),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
