/* The error of cl/gelu.cl's GELU16 forms (GELU with a 16-bit y on AVX-512 CPUs) before the
 * store, against the double reference: the kernel's code written again with AVX-512 intrinsics
 * (the same operations in the same order, the same constants: keep them in step with gelu.cl),
 * run over every bf16 and every f16 input and every STRIDE-th fp32 bit pattern (default 64, with
 * random low bits). Prints the largest |y - GELU(x)| / max(1, |x|) of each form, the largest
 * relative error on |x| <= 5, and counts of limits that are not exact (y = x from x = 10.9 on, -0
 * below -9 / -20, Inf and NaN; since session 26 both forms are exact from |x| = 4.375 on); exits 1
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
/* cl/gelu.cl's G16_T0L..G16_T2H: h(a) = c0 + a (c1 + a c2) with each coefficient from a table of 32
 * (entry round(4 a); 18 and up are 0), fitted per form, for both y types: bench/gelu16_fit.py --c */
static const float TANH_C0[32] = {
    0.500023961f, 0.50092113f, 0.506392717f, 0.515598774f, 0.520942867f, 0.511572838f,
    0.479386538f, 0.423172563f, 0.349149674f, 0.267926157f, 0.190495059f, 0.124952793f,
    0.0752831995f, 0.0413947627f, 0.0206944328f, 0.00933308154f, 0.00378233776f, 0.00136300584f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f};
static const float TANH_C1[32] = {
    -0.400104374f, -0.411140978f, -0.439929932f, -0.469725162f, -0.48249346f, -0.466327995f,
    -0.419819266f, -0.350737363f, -0.271732152f, -0.195154607f, -0.129791081f, -0.0797085091f,
    -0.0450421833f, -0.023275964f, -0.0109624192f, -0.00466827676f, -0.00179062027f, -0.000612024509f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f};
static const float TANH_C2[32] = {
    0.0160392337f, 0.0503879748f, 0.0885603428f, 0.112735972f, 0.120359294f, 0.113386646f,
    0.0965755582f, 0.0753419474f, 0.0542538762f, 0.0361996703f, 0.0224025529f, 0.0128335506f,
    0.00678395573f, 0.00328849209f, 0.00145714544f, 0.000585343398f, 0.000212355109f, 6.88071159e-05f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f};
static const float ERF_C0[32] = {
    0.500029922f, 0.500917733f, 0.50638938f, 0.515682042f, 0.52129519f, 0.512155414f,
    0.479853839f, 0.422880322f, 0.347693443f, 0.265591055f, 0.18817459f, 0.123582631f,
    0.0752809644f, 0.0425223149f, 0.0223376807f, 0.0109056961f, 0.00496320939f, 0.00210038223f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f};
static const float ERF_C1[32] = {
    -0.400232315f, -0.411093563f, -0.43987447f, -0.469936371f, -0.483308554f, -0.467555583f,
    -0.42089048f, -0.350880206f, -0.270631582f, -0.193219587f, -0.127861142f, -0.0784992203f,
    -0.0447851457f, -0.0237446111f, -0.0117391357f, -0.00540739531f, -0.00232788199f, -0.000934034178f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f};
static const float ERF_C2[32] = {
    0.0166566838f, 0.0501741618f, 0.088324748f, 0.11270608f, 0.120669201f, 0.113881446f,
    0.097017549f, 0.0755001456f, 0.054079894f, 0.0358275771f, 0.0220300034f, 0.0125976466f,
    0.00671379594f, 0.00333487568f, 0.0015495402f, 0.000672741269f, 0.000273747894f, 0.000104079809f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f};

/* G16_FORMN on one vector: max(-0, x) - a h(a), a = min(|x|, 5) */
static __m512 gelu16_form(__m512 x, const float *c0, const float *c1, const float *c2) {
    const __m512 a = _mm512_range_ps(x, _mm512_set1_ps(5.0f), 10); /* min(|x|, 5); a quiet NaN x: 5 */
    const __m512i t = _mm512_castps_si512(_mm512_add_ps(a, _mm512_set1_ps(3145728.0f))); /* round(4 a) */
#define PERM(c) _mm512_permutex2var_ps(_mm512_loadu_ps(c), t, _mm512_loadu_ps((c) + 16))
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
