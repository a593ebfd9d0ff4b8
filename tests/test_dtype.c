/* Storage types on the host: names, sizes, parsing, and the fp32 <-> f16/bf16 conversions that
 * fixtures, references and tsr_convert_host use, against independent references: GCC's _Float16
 * (IEEE conversion, to nearest even) for f16, and the nearer of the two bf16 neighbours (ties to
 * the even one) computed in double for bf16. tsr_convert (the device side, cl/dtype.cl's integer
 * conversions in GELU's copy kernel) is checked bit for bit against tsr_convert_host: every 16-bit
 * pattern in every pair of types, f32 edges (signalling and quiet NaNs with payloads, zeros,
 * subnormals, the f16 range's edges, ties), alone (n = 1) and in long runs with odd tails, in the
 * default configuration and at vector widths 1 and 16 (test_gelu sweeps the configurations).
 * TSR_TEST_MODE=oclgrind runs a small subset of the device cases. */
#include "harness.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t reference_f16(float f) {
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

/* The bf16 nearest to f, ties to even, in double; NaN is handled by the caller. */
static uint16_t reference_bf16(float f) {
    const uint32_t u = bits_of(f);
    const uint16_t down = (uint16_t)(u >> 16);
    if ((u & 0xffffu) == 0) return down;
    const uint16_t up = (uint16_t)(down + 1); /* the next magnitude (Inf past the largest) */
    /* Past the largest finite bf16 the next step is 2^128 (IEEE rounds as if the exponent were
     * unbounded, then overflows to Inf). */
    const double x = fabs((double)f), lo = fabs((double)float_of((uint32_t)down << 16));
    const double hi = (up & 0x7f80u) == 0x7f80u ? ldexp(1.0, 128) : fabs((double)float_of((uint32_t)up << 16));
    if (x - lo < hi - x) return down;
    if (hi - x < x - lo) return up;
    return (down & 1u) ? up : down;
}

static void names_sizes_and_parsing(void **state) {
    (void)state;
    assert_string_equal(tsr_dtype_str(TSR_F32), "f32");
    assert_string_equal(tsr_dtype_str(TSR_F16), "f16");
    assert_string_equal(tsr_dtype_str(TSR_BF16), "bf16");
    assert_string_equal(tsr_dtype_str((tsr_dtype)7), "?");
    assert_int_equal(tsr_dtype_size(TSR_F32), 4);
    assert_int_equal(tsr_dtype_size(TSR_F16), 2);
    assert_int_equal(tsr_dtype_size(TSR_BF16), 2);
    assert_int_equal(tsr_dtype_size((tsr_dtype)-1), 0);
    const struct {
        const char *name;
        tsr_dtype dtype;
    } ok[] = {{"f32", TSR_F32},  {"FP32", TSR_F32},  {"float", TSR_F32},     {"half", TSR_F16},
              {"fp16", TSR_F16}, {"bf16", TSR_BF16}, {"BFloat16", TSR_BF16}, {"float16", TSR_F16}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
        tsr_dtype d = (tsr_dtype)99;
        assert_int_equal(tsr_dtype_parse(ok[i].name, &d), TSR_SUCCESS);
        assert_int_equal(d, ok[i].dtype);
    }
    const char *bad[] = {"", "f8", "fp16 ", "f16/f32", "int8", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        tsr_dtype d = TSR_BF16;
        assert_int_equal(tsr_dtype_parse(bad[i], &d), TSR_ERR_INVALID_ARG);
        assert_int_equal(d, TSR_BF16); /* untouched */
        assert_non_null(strstr(tsr_last_error(), "expected f32"));
    }
    assert_int_equal(tsr_dtype_parse("f16", NULL), TSR_ERR_INVALID_ARG);
}

static void shape_tokens_and_classes(void **state) {
    (void)state;
    tsr_dtype in = TSR_F32, out = TSR_F32;
    assert_true(tsr_dtype_spec_parse("f16", &in, &out));
    assert_true(in == TSR_F16 && out == TSR_F16);
    assert_true(tsr_dtype_spec_parse("bf16/f32", &in, &out));
    assert_true(in == TSR_BF16 && out == TSR_F32);
    const char *not_specs[] = {"1024x1024x1024", "f16/", "/f16", "f16/f16/f16", "erf", "k3", ""};
    for (size_t i = 0; i < sizeof not_specs / sizeof not_specs[0]; ++i) {
        in = out = TSR_BF16;
        assert_false(tsr_dtype_spec_parse(not_specs[i], &in, &out));
        assert_true(in == TSR_BF16 && out == TSR_BF16);
    }
    char buf[16];
    assert_string_equal(tsr_dtype_spec_format(TSR_F32, TSR_F32, buf, sizeof buf), "");
    assert_string_equal(tsr_dtype_spec_format(TSR_F16, TSR_F16, buf, sizeof buf), "f16");
    assert_string_equal(tsr_dtype_spec_format(TSR_BF16, TSR_F32, buf, sizeof buf), "bf16/f32");
    assert_string_equal(tsr_dtype_class_suffix((const tsr_dtype[]){TSR_F32, TSR_F32, TSR_F32}, 3), "");
    assert_string_equal(tsr_dtype_class_suffix((const tsr_dtype[]){TSR_BF16, TSR_BF16, TSR_F32}, 3), "-bf16");
    assert_string_equal(tsr_dtype_class_suffix((const tsr_dtype[]){TSR_BF16, TSR_F16, TSR_F32}, 3), "-f16");
    assert_string_equal(tsr_dtype_class_base("large-f16", buf, sizeof buf), "large");
    assert_string_equal(tsr_dtype_class_base("large-erf-bf16", buf, sizeof buf), "large-erf");
    assert_null(tsr_dtype_class_base("large", buf, sizeof buf));
    assert_null(tsr_dtype_class_base("-f16", buf, sizeof buf));
    /* the storage sets ops build ahead of time: fp32, each 16-bit type throughout, then with an fp32
     * output; and every combination of three tensors' types numbered once, those sets first */
    tsr_dtype_storage_set(0, &in, &out);
    assert_true(in == TSR_F32 && out == TSR_F32);
    tsr_dtype_storage_set(TSR_BF16, &in, &out);
    assert_true(in == TSR_BF16 && out == TSR_BF16);
    tsr_dtype_storage_set(TSR_DTYPE_COUNT, &in, &out);
    assert_true(in == TSR_F16 && out == TSR_F32);
    const int total = TSR_DTYPE_COUNT * TSR_DTYPE_COUNT * TSR_DTYPE_COUNT;
    bool seen[TSR_DTYPE_COUNT * TSR_DTYPE_COUNT * TSR_DTYPE_COUNT] = {false};
    for (int index = 0; index < total; ++index) {
        tsr_dtype t[3];
        tsr_dtype_combination(index, 3, t);
        int code = ((int)t[0] * TSR_DTYPE_COUNT + (int)t[1]) * TSR_DTYPE_COUNT + (int)t[2];
        assert_false(seen[code]);
        seen[code] = true;
        assert_int_equal(tsr_dtype_combination_index(3, t), index);
        if (index < TSR_STORAGE_SETS) {
            tsr_dtype_storage_set(index, &in, &out);
            assert_true(t[0] == in && t[1] == in && t[2] == out);
        }
    }
}

/* Every f16 value widens exactly and narrows back to itself (NaNs to a quiet NaN of the same sign). */
static void f16_every_value_round_trips(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = tsr_f16_to_f32((uint16_t)h);
        _Float16 ref;
        const uint16_t h16 = (uint16_t)h;
        memcpy(&ref, &h16, 2);
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) {
            assert_true(isnan(f));
            const uint16_t back = tsr_f32_to_f16(f);
            assert_int_equal(back & 0x7e00u, 0x7e00u);
            assert_int_equal(back & 0x8000u, h & 0x8000u);
            continue;
        }
        assert_true(bits_of(f) == bits_of((float)ref));
        assert_int_equal(tsr_f32_to_f16(f), h);
    }
}

/* Random floats over the whole range, halfway points between neighbours (ties), and the edges. */
static void f32_to_f16_rounds_to_nearest_even(void **state) {
    (void)state;
    for (int i = 0; i < 2000000; ++i) {
        uint32_t u = th_rand();
        if (i % 2) u = (u & 0x8fffffffu) | 0x30000000u; /* exponents around f16's range */
        const float f = float_of(u);
        if (isnan(f)) continue;
        if (tsr_f32_to_f16(f) != reference_f16(f))
            fail_msg("%a -> %04x, want %04x", (double)f, tsr_f32_to_f16(f), reference_f16(f));
    }
    for (uint32_t h = 0; h < 0x7c00u; ++h) { /* the midpoint above each finite positive f16 */
        const double mid = ((double)tsr_f16_to_f32((uint16_t)h) + (double)tsr_f16_to_f32((uint16_t)(h + 1))) / 2;
        const float f = (float)mid; /* exact: a midpoint of f16 neighbours has few bits */
        assert_int_equal(tsr_f32_to_f16(f), reference_f16(f));
        assert_int_equal(tsr_f32_to_f16(-f), reference_f16(-f));
        assert_int_equal(tsr_f32_to_f16(f) & 1u, 0u); /* ties go to even (Inf's code is even) */
    }
    assert_int_equal(tsr_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(tsr_f32_to_f16(65519.996f), 0x7bff);
    assert_int_equal(tsr_f32_to_f16(65520.0f), 0x7c00);  /* saturates to Inf, as IEEE rounds */
    assert_int_equal(tsr_f32_to_f16(-1e30f), 0xfc00);
    assert_int_equal(tsr_f32_to_f16(0x1p-25f), 0x0000);  /* a tie with zero: even */
    assert_int_equal(tsr_f32_to_f16(0x1.000002p-25f), 0x0001);
    assert_int_equal(tsr_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(tsr_f32_to_f16(INFINITY), 0x7c00);
}

static void f32_to_bf16_rounds_to_nearest_even(void **state) {
    (void)state;
    for (int i = 0; i < 2000000; ++i) {
        uint32_t u = th_rand();
        if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u; /* a tie */
        const float f = float_of(u);
        if (isnan(f)) {
            const uint16_t b = tsr_f32_to_bf16(f);
            assert_true(isnan(tsr_bf16_to_f32(b)));
            assert_int_equal(b & 0x40u, 0x40u);
            continue;
        }
        if (tsr_f32_to_bf16(f) != reference_bf16(f))
            fail_msg("%a -> %04x, want %04x", (double)f, tsr_f32_to_bf16(f), reference_bf16(f));
        assert_true(bits_of(tsr_bf16_to_f32(tsr_f32_to_bf16(f))) == ((uint32_t)reference_bf16(f) << 16));
    }
    assert_int_equal(tsr_f32_to_bf16(FLT_MAX), 0x7f80); /* rounds past the largest bf16: Inf */
    assert_int_equal(tsr_f32_to_bf16(-FLT_MAX), 0xff80);
    assert_int_equal(tsr_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(tsr_f32_to_bf16(float_of(0x3f808000u)), 0x3f80); /* tie, even below */
    assert_int_equal(tsr_f32_to_bf16(float_of(0x3f818000u)), 0x3f82); /* tie, even above */
}

static void convert_host_checks_and_converts(void **state) {
    (void)state;
    const float in[6] = {1.0f, -2.5f, 65520.0f, NAN, 1e-8f, 3.14159265f};
    uint16_t h[6], b[6];
    float back[6];
    assert_int_equal(tsr_convert_host(TSR_F32, in, TSR_F16, h, 6), TSR_SUCCESS);
    assert_int_equal(tsr_convert_host(TSR_F32, in, TSR_BF16, b, 6), TSR_SUCCESS);
    for (int i = 0; i < 6; ++i) {
        if (isnan(in[i])) continue;
        assert_int_equal(h[i], reference_f16(in[i]));
        assert_int_equal(b[i], reference_bf16(in[i]));
    }
    assert_int_equal(tsr_convert_host(TSR_F16, h, TSR_F32, back, 6), TSR_SUCCESS);
    assert_true(back[2] == INFINITY && isnan(back[3]) && back[0] == 1.0f);
    uint16_t hb[6];
    assert_int_equal(tsr_convert_host(TSR_F16, h, TSR_BF16, hb, 6), TSR_SUCCESS); /* through fp32 */
    assert_int_equal(hb[1], tsr_f32_to_bf16(-2.5f));
    assert_int_equal(tsr_convert_host(TSR_F32, in, TSR_F32, back, 6), TSR_SUCCESS);
    assert_true(back[5] == in[5]);
    assert_int_equal(tsr_convert_host(TSR_F32, in, TSR_F16, h, 0), TSR_SUCCESS);
    assert_int_equal(tsr_convert_host(TSR_F32, NULL, TSR_F16, h, 1), TSR_ERR_INVALID_ARG);
    assert_int_equal(tsr_convert_host(TSR_F32, in, TSR_F16, NULL, 1), TSR_ERR_INVALID_ARG);
    assert_int_equal(tsr_convert_host((tsr_dtype)TSR_DTYPE_COUNT, in, TSR_F16, h, 1), TSR_ERR_INVALID_ARG);
    assert_non_null(strstr(tsr_last_error(), "src_type"));
    assert_int_equal(tsr_convert_host(TSR_F32, in, (tsr_dtype)-1, h, 1), TSR_ERR_INVALID_ARG);
    uint16_t overlap[8] = {0};
    assert_int_equal(tsr_convert_host(TSR_F16, overlap, TSR_F32, overlap + 1, 2), TSR_ERR_INVALID_ARG);
    assert_int_equal(tsr_convert_host(TSR_F16, h, TSR_F32, back, SIZE_MAX / 2), TSR_ERR_OVERFLOW);
}

static void error_bounds_scale_with_the_reduction(void **state) {
    (void)state;
    assert_true(tsr_dtype_error_bound(TSR_F16, 1) > 0x1p-11);
    assert_true(tsr_dtype_error_bound(TSR_BF16, 1) > 0x1p-8);
    assert_true(tsr_dtype_error_bound(TSR_F32, 1) < 1e-6);
    assert_true(tsr_dtype_error_bound(TSR_F32, 4096) > 4 * tsr_dtype_error_bound(TSR_F32, 64));
    assert_true(tsr_dtype_error_bound(TSR_F16, 0) == tsr_dtype_error_bound(TSR_F16, 1));
}

/* ---------------------------------------------------------------- tsr_convert on the device */

static const tsr_dtype every_type[3] = {TSR_F32, TSR_F16, TSR_BF16};


/* Patterns each conversion must keep bit for bit: NaNs signalling and quiet with payloads of both
 * signs, infinities, zeros, subnormals, the largest finite values, the edges of f16's normal and
 * subnormal ranges and of its overflow (65504, 65520), and bf16 ties. */
static const uint16_t f16_specials[] = {0x7c01, 0xfc01, 0x7dff, 0x7e00, 0x7e01, 0x7fff, 0xffff, 0x7c00, 0xfc00,
                                        0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0x3c00};
static const uint16_t bf16_specials[] = {0x7f81, 0xff81, 0x7fbf, 0x7fc0, 0x7fc1, 0xffff, 0x7f80, 0xff80,
                                         0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x7f7f, 0x3f80};
static const uint32_t f32_specials[] = {
    0x7f800001u, 0x7fbfffffu, 0xff800001u, 0x7f802000u, 0x7fc00000u, 0x7fc12345u, 0xffffffffu, 0x7f800000u,
    0xff800000u, 0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x80000001u, 0x7f7fffffu, 0xff7fffffu,
    0x477fe000u, 0x477fefffu, 0x477ff000u, 0xc77ff000u, 0x38800000u, 0x387fffffu, 0x33000000u, 0x33000001u,
    0x337fffffu, 0x33800000u, 0x33c00000u, 0x3f808000u, 0x3f818000u, 0x7f7f8000u, 0x3f800000u};

static const void *specials_of(tsr_dtype t, size_t *n) {
    if (t == TSR_F16) return *n = sizeof f16_specials / sizeof f16_specials[0], (const void *)f16_specials;
    if (t == TSR_BF16) return *n = sizeof bf16_specials / sizeof bf16_specials[0], (const void *)bf16_specials;
    return *n = sizeof f32_specials / sizeof f32_specials[0], (const void *)f32_specials;
}

/* A long run of source patterns (malloc'd, *n of them, never a multiple of a vector width): for
 * 16-bit types every one of the 65536 patterns, then the specials again; for f32 the specials, every
 * f16 value widened and its two f32 neighbours (the rounding boundaries), and random patterns. In
 * small mode every 97th pattern. */
static void *long_run(tsr_dtype t, size_t *n) {
    const size_t step = th_small_mode() ? 97 : 1;
    size_t ns;
    const void *sp = specials_of(t, &ns);
    if (t != TSR_F32) {
        const size_t all = 65536 / step;
        uint16_t *v = malloc((all + ns) * 2);
        assert_non_null(v);
        for (size_t i = 0; i < all; ++i)
            v[i] = (uint16_t)(i * step);
        memcpy(v + all, sp, ns * 2);
        *n = all + ns;
        return v;
    }
    const size_t widened = 65536 / step, random = 20000 / step;
    uint32_t *v = malloc((ns + 3 * widened + random) * 4);
    assert_non_null(v);
    memcpy(v, sp, ns * 4);
    size_t k = ns;
    for (size_t i = 0; i < widened; ++i) {
        const uint32_t u = bits_of(tsr_f16_to_f32((uint16_t)(i * step)));
        v[k++] = u, v[k++] = u + 1, v[k++] = u - 1;
    }
    for (size_t i = 0; i < random; ++i)
        v[k++] = th_rand();
    *n = k - (k % 16 == 0);
    return v;
}

/* tsr_convert of n elements of src (src_type) at element src_off of a buffer into dst_type at
 * dst_off, guard bytes around both; every element bit for bit tsr_convert_host's, nothing outside
 * dst's elements written. */
static void device_convert(tsr_device *dev, tsr_dtype src_type, const void *src, size_t n, tsr_dtype dst_type,
                           size_t src_off, size_t dst_off, const char *what) {
    const size_t ss = tsr_dtype_size(src_type), ds = tsr_dtype_size(dst_type);
    const size_t ns = src_off + n + 3, nd = dst_off + n + 3;
    unsigned char *hs = malloc(ns * ss), *hd = malloc(nd * ds), *expect = malloc(n * ds);
    assert_non_null(hs), assert_non_null(hd), assert_non_null(expect);
    memset(hs, 0x5a, ns * ss);
    memcpy(hs + src_off * ss, src, n * ss);
    memset(hd, 0xa5, nd * ds);
    TH_ASSERT_OK(tsr_convert_host(src_type, src, dst_type, expect, n));
    cl_int err;
    cl_mem dsrc = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, ns * ss, hs, &err);
    assert_int_equal(err, CL_SUCCESS);
    cl_mem ddst = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, nd * ds, hd, &err);
    assert_int_equal(err, CL_SUCCESS);
    tsr_status st = tsr_convert(dev, src_type, dsrc, src_off, dst_type, ddst, dst_off, n, NULL, NULL);
    if (st != TSR_SUCCESS) fail_msg("%s: tsr_convert: %s: %s", what, tsr_status_str(st), tsr_last_error());
    assert_int_equal(clEnqueueReadBuffer(tsr_device_queue(dev), ddst, CL_TRUE, 0, nd * ds, hd, 0, NULL, NULL),
                     CL_SUCCESS);
    for (size_t i = 0; i < nd * ds; ++i)
        if ((i < dst_off * ds || i >= (dst_off + n) * ds) && hd[i] != 0xa5)
            fail_msg("%s: %s -> %s wrote outside dst (byte %zu)", what, tsr_dtype_str(src_type),
                     tsr_dtype_str(dst_type), i);
    for (size_t i = 0; i < n; ++i) {
        const uint32_t got = th_element_bits(dst_type, hd, dst_off + i), want = th_element_bits(dst_type, expect, i);
        if (got != want)
            fail_msg("%s: %s -> %s, n = %zu, element %zu (source 0x%x): device 0x%x, tsr_convert_host 0x%x", what,
                     tsr_dtype_str(src_type), tsr_dtype_str(dst_type), n, i, th_element_bits(src_type, src, i), got, want);
    }
    clReleaseMemObject(dsrc), clReleaseMemObject(ddst);
    free(hs), free(hd), free(expect);
}

/* Each special pattern alone (n = 1: the kernel's tail path) in every pair of types, at offset 0
 * and at odd offsets. */
static void device_convert_single_elements(void **state) {
    (void)state;
    tsr_device *dev = th_open_device();
    printf("# device: %s\n", tsr_device_get_info(dev)->name);
    for (int s = 0; s < 3; ++s) {
        size_t ns;
        const unsigned char *sp = specials_of(every_type[s], &ns);
        const size_t size = tsr_dtype_size(every_type[s]);
        for (int d = 0; d < 3; ++d) {
            if (th_small_mode() && d != (s + 1) % 3 && d != s) continue;
            for (size_t i = 0; i < ns; ++i)
                device_convert(dev, every_type[s], sp + i * size, 1, every_type[d], i % 2 ? 3 : 0, i % 2 ? 0 : 5,
                               "one element");
        }
    }
    tsr_device_close(dev);
}

/* Long runs (vector loads and stores, then a tail) in every pair of types, in the default
 * configuration and with one element per vector (VW=1) and sixteen, interleaved. */
static void device_convert_every_pattern(void **state) {
    (void)state;
    tsr_device *dev = th_open_device();
    const char *configs[] = {NULL, "VW=1 VPT=4 WG=16 INTERLEAVE=0", "VW=16 VPT=2 WG=16 INTERLEAVE=1"};
    const int nconfigs = th_small_mode() ? 1 : 3;
    for (int c = 0; c < nconfigs; ++c) {
        if (configs[c] && !th_try_override(dev, "gelu", configs[c])) continue;
        for (int s = 0; s < 3; ++s) {
            size_t n;
            void *src = long_run(every_type[s], &n);
            for (int d = 0; d < 3; ++d)
                device_convert(dev, every_type[s], src, n, every_type[d], 1 + (size_t)d, 2 + (size_t)s,
                               configs[c] ? configs[c] : "default configuration");
            free(src);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "gelu", NULL));
    tsr_device_close(dev);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_sizes_and_parsing),
        cmocka_unit_test(shape_tokens_and_classes),
        cmocka_unit_test(f16_every_value_round_trips),
        cmocka_unit_test(f32_to_f16_rounds_to_nearest_even),
        cmocka_unit_test(f32_to_bf16_rounds_to_nearest_even),
        cmocka_unit_test(convert_host_checks_and_converts),
        cmocka_unit_test(error_bounds_scale_with_the_reduction),
        cmocka_unit_test(device_convert_single_elements),
        cmocka_unit_test(device_convert_every_pattern),
    };
    if (th_small_mode()) { /* under Oclgrind: the device cases, small */
        const struct CMUnitTest device_tests[] = {
            cmocka_unit_test(device_convert_single_elements),
            cmocka_unit_test(device_convert_every_pattern),
        };
        return TH_RUN(device_tests);
    }
    return TH_RUN(tests);
}
