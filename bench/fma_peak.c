// One core's fp32 FMA peak with AVX-512: 12 independent chains of 16-lane FMAs (no memory
// traffic), timed on the calling thread's CPU clock, so the machine's load moves it little.
// Not part of the build (x86-64 with AVX-512 only):
//     cc -O2 -mavx512f -o /tmp/fma_peak bench/fma_peak.c && /tmp/fma_peak
// Prints GFLOP per CPU-second: what a GEMM's "GFLOP per CPU-second" is to be compared with.
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

int main(int argc, char **argv) {
    (void)argv;
    const __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f * (float)argc);
#define DECL(i) __m512 a##i = _mm512_set1_ps((float)(i));
    CHAINS(DECL)
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    const long n = 200000000;
    for (long k = 0; k < n; ++k) {
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, b, c);
        CHAINS(STEP)
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    __m512 t = _mm512_setzero_ps();
#define SUM(i) t = _mm512_add_ps(t, a##i);
    CHAINS(SUM)
    printf("%.1f GFLOP per CPU-second, %.2f G 16-lane FMAs per CPU-second (checksum %g)\n",
           (double)n * 12 * 32 / s / 1e9, (double)n * 12 / s / 1e9, (double)_mm512_reduce_add_ps(t));
    return 0;
}
