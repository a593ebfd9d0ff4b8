/* The error of cl/gelu.cl's GELU16 forms (GELU with a 16-bit y on AVX-512 CPUs) before the
 * store, against the double reference: the kernel's code written again with AVX-512 intrinsics
 * (the same operations in the same order, the same constants: keep them in step with gelu.cl),
 * run over every bf16 and every f16 input and every STRIDE-th fp32 bit pattern (default 64, with
 * random low bits). Prints the largest |y - GELU(x)| / max(1, |x|) of each form, the largest
 * relative error on |x| <= 5, and counts of limits that are not exact (y = x from x = 10.9 on, -0
 * below -9 / -20, Inf and NaN; since session 26 both forms are exact from |x| = 4.21875 on); exits 1
 * when a count is not 0 or an error exceeds TSR_GELU16_ERROR (2^-13). docs/dtypes.md ("Error bounds") quotes its output.
 *
 *     build/bench/gelu16_error [STRIDE]
 *
 * Built where the compiler takes -mavx512f; runs on CPUs with AVX-512F (it says so elsewhere). */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GELU16_ERROR 0x1p-13 /* TSR_GELU16_ERROR, runtime/internal.h */
#include "gelu16_tables.h"

/* G16_FORMN on one vector: max(-0, x) - a h(a), a = min(|x|, 4.6) */
static __m512 gelu16_form(__m512 x, const float *c0, const float *c1, const float *c2) {
    const __m512 a = _mm512_range_ps(x, _mm512_set1_ps(4.6f), 10); /* min(|x|, 4.6); a quiet NaN x: 4.6 */
    /* round(3.2 a) in the low bits */
    const __m512i t = _mm512_castps_si512(_mm512_fmadd_ps(a, _mm512_set1_ps(3.2f), _mm512_set1_ps(12582912.0f)));
#define PERM(c) _mm512_permutexvar_ps(t, _mm512_loadu_ps(c))
    __m512 h = _mm512_fmadd_ps(PERM(c2), a, PERM(c1));
    h = _mm512_fmadd_ps(h, a, PERM(c0));
#undef PERM
    return _mm512_fnmadd_ps(a, h, _mm512_max_ps(_mm512_set1_ps(-0.0f), x));
}

/* f16: the y type (both take the same form since session 24) */
static __m512 gelu16_tanh(__m512 x, int f16) {
    (void)f16;
    return gelu16_form(x, TANH_C0, TANH_C1, TANH_C2);
}

static __m512 gelu16_erf(__m512 x, int f16) {
    (void)f16;
    return gelu16_form(x, ERF_C0, ERF_C1, ERF_C2);
}

/* runtime/reference.c's tsr_gelu_reference */
static double reference(int erf_form, double x) {
    if (isnan(x)) return x;
    if (isinf(x)) return x > 0 ? x : -0.0;
    if (erf_form) return 0.5 * x * erfc(-x / sqrt(2.0));
    const double u = sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + tanh(u));
}

/* forms: 0 tanh (bf16 y), 1 erf (bf16 y), 2 tanh (f16 y), 3 erf (f16 y) */
static double worst[4], worst_x[4], worst_rel[4], worst_rel_x[4];
static long wrong_limits[4];

static void check(const float *xs, size_t vectors) {
    for (int form = 0; form < 4; ++form)
        for (size_t b = 0; b < vectors; ++b) {
            float y[16];
            const __m512 x = _mm512_loadu_ps(xs + 16 * b);
            _mm512_storeu_ps(y, form % 2 ? gelu16_erf(x, form == 3) : gelu16_tanh(x, form == 2));
            for (int i = 0; i < 16; ++i) {
                const float xi = xs[16 * b + i];
                const double r = reference(form % 2, xi);
                /* the f16 forms' -0: a negative y that f16 rounds to -0 */
                const bool minus_zero = signbit(y[i]) && (y[i] == 0 || (form >= 2 && fabsf(y[i]) < 0x1p-25f));
                if (isnan(r) ? !isnan(y[i])
                             : isinf(r) ? y[i] != r
                                        : (xi >= 10.9f && y[i] != xi) || (xi < (form % 2 ? -20.0f : -9.0f) && !minus_zero))
                    wrong_limits[form]++;
                if (isnan(r) || isinf(r)) continue;
                const double e = fabs(y[i] - r), abs_e = e / fmax(1.0, fabs(xi));
                if (!(abs_e <= worst[form])) worst[form] = abs_e, worst_x[form] = xi;
                if (fabs(xi) <= 5.0f && fabs(xi) >= 0x1p-100f && e / fabs(r) > worst_rel[form])
                    worst_rel[form] = e / fabs(r), worst_rel_x[form] = xi;
            }
        }
}

static float f16_value(uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const float v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

static void report(const char *what) {
    printf("%-24s tanh %.3g at x = %.9g (relative, |x| <= 5: %.3g at %.9g), limits wrong %ld | erf %.3g at x = %.9g, "
           "limits wrong %ld | f16 y's forms: tanh %.3g, erf %.3g at x = %.9g, limits wrong %ld, %ld\n",
           what, worst[0], worst_x[0], worst_rel[0], worst_rel_x[0], wrong_limits[0], worst[1], worst_x[1],
           wrong_limits[1], worst[2], worst[3], worst_x[3], wrong_limits[2], wrong_limits[3]);
}

int main(int argc, char **argv) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512dq")) {
        printf("gelu16_error: this CPU has no AVX-512F and DQ (the GELU16 forms run only there)\n");
        return 0;
    }
    const long stride = argc > 1 ? strtol(argv[1], NULL, 10) : 64;
    if (stride < 1 || stride > (1l << 30) || (stride & (stride - 1))) {
        fprintf(stderr, "usage: gelu16_error [STRIDE, a power of 2 up to 2^30]\n");
        return 2;
    }
    static float buf[1 << 16];
    for (uint32_t h = 0; h < 65536; ++h) {
        const uint32_t u = h << 16;
        memcpy(&buf[h], &u, 4);
    }
    check(buf, 4096);
    report("every bf16 input:");
    for (uint32_t h = 0; h < 65536; ++h)
        buf[h] = f16_value((uint16_t)h);
    check(buf, 4096);
    report("and every f16 input:");
    uint32_t seed = 12345;
    size_t k = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += (uint64_t)stride) {
        seed = seed * 1664525u + 1013904223u;
        const uint32_t v = (uint32_t)u | ((seed >> 8) & (uint32_t)(stride - 1));
        memcpy(&buf[k++], &v, 4);
        if (k == 65536) check(buf, 4096), k = 0;
    }
    char what[64];
    snprintf(what, sizeof what, "and fp32 (1 in %ld):", stride);
    report(what);
    int bad = 0;
    for (int form = 0; form < 4; ++form)
        bad |= wrong_limits[form] != 0 || !(worst[form] <= GELU16_ERROR);
    return bad;
}
