/* The arithmetic cost of cl/gelu.cl's GELU16 tanh form, f16 -> f16, without PoCL and without DRAM:
 * the kernel's loop body written again with AVX-512 intrinsics (eight vectors a step, each
 * statement over the eight in turn, as G16_FORMN), over N f16 elements in the caches (default 8192:
 * L1), in TSC ticks per 16 elements (the minimum of 15 alternated rounds, each N * reps = 64M
 * elements): session 23's form (2^t by vreduceps, a degree-3 polynomial and vscalefps, vrcp14ps,
 * vfixupimmps), session 24's (max(-0, x) - a max(q(a), 0)^4, q of degree 5) and the f16 copy
 * (vcvtph2ps, vcvtps2ph) as the yardstick. Inputs uniform in [-R, R] (default 6; beyond about 9
 * session 23's form takes microcode assists on underflowing products). docs/dtypes.md, "Session 24".
 * Pin it to one core (taskset -c 1); the TSC runs at its nominal rate whatever the core's clock.
 *
 *     build/bench/gelu16_cycles [N [R]]
 *
 * Built where the compiler takes -mavx512f -mavx512dq; runs on CPUs with AVX-512F and DQ. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

#define NV 8
#define EACH(stmt) _Pragma("GCC unroll 8") for (int l = 0; l < NV; ++l) { stmt; }
#define LOAD(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define STORE(v, p) _mm256_storeu_si256((__m256i *)(p), _mm512_cvtps_ph((v), 0))
#define SET(c) _mm512_set1_ps(c)

__attribute__((noinline)) static void form23(const unsigned short *in, unsigned short *out, long n) {
    const __m512i minus_inf_to_minus_zero = _mm512_set1_epi32(0x70000);
    for (long i = 0; i < n; i += 16 * NV) {
        __m512 x[NV], t[NV], f[NV], q[NV];
        EACH(x[l] = LOAD(in + i + 16 * l))
        EACH(t[l] = _mm512_mul_ps(x[l], x[l]))
        EACH(t[l] = _mm512_fmadd_ps(t[l], SET(-0.1029432395800235f), SET(-2.3022081981443248f)))
        EACH(t[l] = _mm512_mul_ps(x[l], t[l]))
        EACH(f[l] = _mm512_reduce_ps(t[l], 9))
        EACH(q[l] = _mm512_fmadd_ps(f[l], SET(0.07802427478740856f), SET(0.22606726670731025f)))
        EACH(q[l] = _mm512_fmadd_ps(f[l], q[l], SET(0.6958336268679407f)))
        EACH(q[l] = _mm512_fmadd_ps(f[l], q[l], SET(0.999925194576748f)))
        EACH(q[l] = _mm512_scalef_ps(q[l], t[l]))
        EACH(q[l] = _mm512_rcp14_ps(_mm512_add_ps(q[l], SET(1.0f))))
        EACH(q[l] = _mm512_fixupimm_ps(_mm512_mul_ps(x[l], q[l]), x[l], minus_inf_to_minus_zero, 0))
        EACH(STORE(q[l], out + i + 16 * l))
    }
}

__attribute__((noinline)) static void form24(const unsigned short *in, unsigned short *out, long n) {
    for (long i = 0; i < n; i += 16 * NV) {
        __m512 x[NV], a[NV], q[NV];
        EACH(x[l] = LOAD(in + i + 16 * l))
        EACH(a[l] = _mm512_range_ps(x[l], SET(5.0f), 10))
        EACH(q[l] = _mm512_fmadd_ps(a[l], SET(-0.00046918058f), SET(0.0026518707f)))
        EACH(q[l] = _mm512_fmadd_ps(q[l], a[l], SET(0.008424275f)))
        EACH(q[l] = _mm512_fmadd_ps(q[l], a[l], SET(-0.053640302f)))
        EACH(q[l] = _mm512_fmadd_ps(q[l], a[l], SET(-0.16644283f)))
        EACH(q[l] = _mm512_fmadd_ps(q[l], a[l], SET(0.8407481f)))
        EACH(q[l] = _mm512_max_ps(SET(-0.0f), q[l]))
        EACH(q[l] = _mm512_mul_ps(q[l], q[l]))
        EACH(q[l] = _mm512_mul_ps(q[l], q[l]))
        EACH(q[l] = _mm512_fnmadd_ps(a[l], q[l], _mm512_max_ps(SET(-0.0f), x[l])))
        EACH(STORE(q[l], out + i + 16 * l))
    }
}

/* session 26's tables: h = c0 + a (c1 + a c2), entry round(3.2 a) */
#include "gelu16_tables.h"

__attribute__((noinline)) static void form26(const unsigned short *in, unsigned short *out, long n) {
    const __m512 c0 = _mm512_loadu_ps(TANH_C0), c1 = _mm512_loadu_ps(TANH_C1), c2 = _mm512_loadu_ps(TANH_C2);
    for (long i = 0; i < n; i += 16 * NV) {
        __m512 x[NV], a[NV], h[NV];
        __m512i t[NV];
        EACH(x[l] = LOAD(in + i + 16 * l))
        EACH(a[l] = _mm512_range_ps(x[l], SET(4.6f), 10))
        EACH(t[l] = _mm512_castps_si512(_mm512_fmadd_ps(a[l], SET(3.2f), SET(12582912.0f))))
        EACH(h[l] = _mm512_fmadd_ps(_mm512_permutexvar_ps(t[l], c2), a[l], _mm512_permutexvar_ps(t[l], c1)))
        EACH(h[l] = _mm512_fmadd_ps(h[l], a[l], _mm512_permutexvar_ps(t[l], c0)))
        EACH(h[l] = _mm512_fnmadd_ps(a[l], h[l], _mm512_max_ps(SET(-0.0f), x[l])))
        EACH(STORE(h[l], out + i + 16 * l))
    }
}

__attribute__((noinline)) static void copy(const unsigned short *in, unsigned short *out, long n) {
    for (long i = 0; i < n; i += 16 * NV) {
        __m512 x[NV];
        EACH(x[l] = LOAD(in + i + 16 * l))
        EACH(STORE(x[l], out + i + 16 * l))
    }
}

int main(int argc, char **argv) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512dq")) {
        printf("gelu16_cycles: this CPU has no AVX-512F and DQ (the GELU16 forms run only there)\n");
        return 0;
    }
    const long n = argc > 1 ? atol(argv[1]) : 8192;
    const float range = argc > 2 ? (float)atof(argv[2]) : 6.0f;
    if (n < 16 * NV || n % (16 * NV) || n > (1l << 26) || !(range > 0)) {
        fprintf(stderr, "usage: gelu16_cycles [N, a multiple of 128 up to 2^26 [R > 0]]\n");
        return 2;
    }
    unsigned short *in = aligned_alloc(64, (size_t)n * 2), *out = aligned_alloc(64, (size_t)n * 2);
    srand(1);
    for (long i = 0; i < n; ++i)
        in[i] = _cvtss_sh((2.0f * (float)rand() / (float)RAND_MAX - 1.0f) * range, 0);
    void (*const fns[])(const unsigned short *, unsigned short *, long) = {form23, form24, form26, copy};
    const char *const names[] = {"session 23 tanh form", "session 24 tanh form", "session 26 tanh form", "f16 copy"};
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    const long reps = (1l << 26) / n;
    for (int r = 0; r < 15; ++r)
        for (int k = 0; k < 4; ++k) {
            unsigned aux;
            const double t0 = (double)__rdtscp(&aux);
            for (long j = 0; j < reps; ++j)
                fns[k](in, out, n);
            const double ticks = ((double)__rdtscp(&aux) - t0) / ((double)reps * (double)n / 16);
            if (ticks < best[k]) best[k] = ticks;
        }
    printf("f16 -> f16, %ld elements, inputs in [-%g, %g]; TSC ticks per 16 elements (min of 15 rounds):\n", n,
           (double)range, (double)range);
    for (int k = 0; k < 4; ++k)
        printf("  %-22s %6.3f\n", names[k], best[k]);
    free(in), free(out);
    return 0;
}
