/* GELU, fused and unfused, against a double-precision reference written from the
 * definitions. Every test names the form it checks: the tanh approximation and the erf
 * form differ by up to 4.7e-4 near |x| = 2.7.
 * Tolerance: |y - GELU(x)| <= 1e-6 * max(1, |x|). An fp32 result carries a rounding error of
 * up to half an ulp of |y| <= |x| (6e-8 |x|) and the kernels' exp and erfc fits add a few
 * more ulps; 1e-6 leaves room for devices whose builtins are at OpenCL's limits (division
 * 2.5 ulp, exp 3 ulp) and still catches any wrong coefficient (the two forms differ by
 * 4.7e-4) or lost digits (the textbook 1 + tanh loses all of them for x < -5).
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
            check_run(tsr_gelu, "tsr_gelu", modes[m], x, n, 0, 0, false);
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
    for (int m = 0; m < 2; ++m) check_run(tsr_gelu, "tsr_gelu", modes[m], edges, n, 0, 0, false);
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
        check_run(tsr_gelu, "tsr_gelu", mode, x, sizes[s], 0, 0, false);
        check_run(tsr_gelu, "tsr_gelu", mode, x, sizes[s], 1 + th_rand() % 7, th_rand() % 9, false);
        check_run(tsr_gelu, "tsr_gelu (in place)", mode, x, sizes[s], th_rand() % 5, 0, true);
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
            check_run(tsr_gelu, configs[c], modes[m], x, n, 3, 1, false);
            check_run(tsr_gelu, configs[c], modes[m], x, 5, 0, 2, false);
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
        check_run(tsr_gelu_unfused, "tsr_gelu_unfused", modes[m], x, n, 2, 5, false);
        check_run(tsr_gelu_unfused, "tsr_gelu_unfused (in place)", modes[m], x, n, 1, 0, true);
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
    for (int m = 0; m < 2; ++m) check_run(tsr_gelu_unfused, "tsr_gelu_unfused", modes[m], edges, n, 0, 0, false);
}

/* Every invalid argument: a status, a message naming the problem, and y untouched. */
static void invalid_arguments(void **state) {
    (void)state;
    enum { N = 64 };
    float hx[N], hy[N], after[N];
    th_fill_uniform(hx, N, -1, 1);
    for (int i = 0; i < N; ++i) hy[i] = guard_value;
    cl_mem x = th_buffer_from(dev, hx, N), y = th_buffer_from(dev, hy, N);
    const gelu_fn fns[] = {tsr_gelu, tsr_gelu_unfused};
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
    const gelu_fn fns[] = {tsr_gelu, tsr_gelu_unfused};
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
    TH_ASSERT_STATUS(tsr_gelu(opened, TSR_GELU_TANH, x, 0, y, 0, N, NULL, NULL), TSR_ERR_INVALID_ARG);
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
    const gelu_fn fns[] = {tsr_gelu, tsr_gelu_unfused};
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
        tsr_status st = tsr_gelu(dev, mode, good[c].x, good[c].xo, good[c].y, good[c].yo, A, NULL, &ev);
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
            cmocka_unit_test(unfused_edge_values_both_forms),
        };
        return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fused_random_inputs_both_forms),
        cmocka_unit_test(fused_edge_values_both_forms),
        cmocka_unit_test(fused_odd_sizes_offsets_in_place),
        cmocka_unit_test(fused_configurations),
        cmocka_unit_test(unfused_baseline_both_forms),
        cmocka_unit_test(unfused_edge_values_both_forms),
        cmocka_unit_test(invalid_arguments),
        cmocka_unit_test(huge_sizes_overflow),
        cmocka_unit_test(config_override_too_long),
        cmocka_unit_test(sub_buffers_overlap_by_memory),
        cmocka_unit_test(tuner_tunes_gelu),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
