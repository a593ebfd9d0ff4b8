/* Storage types on the host: names, sizes, parsing, and the fp32 <-> f16/bf16 conversions that
 * fixtures, references and tsr_convert_host use, against independent references: GCC's _Float16
 * (IEEE conversion, to nearest even) for f16, and the nearer of the two bf16 neighbours (ties to
 * the even one) computed in double for bf16. The device side (cl/dtype.cl) is checked against
 * these in test_gelu through tsr_convert. */
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
    assert_int_equal(tsr_convert_host((tsr_dtype)3, in, TSR_F16, h, 1), TSR_ERR_INVALID_ARG);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_sizes_and_parsing),
        cmocka_unit_test(shape_tokens_and_classes),
        cmocka_unit_test(f16_every_value_round_trips),
        cmocka_unit_test(f32_to_f16_rounds_to_nearest_even),
        cmocka_unit_test(f32_to_bf16_rounds_to_nearest_even),
        cmocka_unit_test(convert_host_checks_and_converts),
        cmocka_unit_test(error_bounds_scale_with_the_reduction),
    };
    return TH_RUN(tests);
}
