/* tsr_convert from fp32 (to f16 and bf16) against the fp32 copy kernel (tsr_gelu_copy, the
 * yardstick of `tessera bench gelu --dtype D`'s "convert-paired" rows), side by side in one process:
 *   convert_ab [--device SEL] [--rounds N] [--calls N] [--n N] [--config16 "VW=.. VPT=.. WG=.."]
 *              [--no-warmup] [--fixed-order]
 * Each round runs the three in rotating order (so none is always first or always after the
 * same other; --fixed-order: copy, f16, bf16 every round), each as `calls` calls back to back and
 * one clFinish, after one untimed call of its own (--no-warmup: none, so the call before is the
 * previous variant's). --calls 1 is the bench's protocol (one call and its wait). --config16: the 16-bit
 * conversions launch with this gelu configuration (tsr_config_override, set and cleared around
 * their calls, untimed), the fp32 copy with its own. Prints per variant the medians of wall and
 * process CPU microseconds per call, and the medians of the rounds' GB/s ratios (16-bit's over
 * the copy's: 6 bytes an element against 8). */
#include "ab_harness.h"
#include "tessera.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    ab_opts o = {.rounds = 21, .calls = 1, .batch = 1};
    size_t n = 1u << 20;
    const char *config16 = NULL;
    int warmup = 1, rotate = 1;
    for (int i = 1; i < argc; ++i) {
        if (ab_arg(argc, argv, &i, &o, 0)) continue;
        if (!strcmp(argv[i], "--n") && i + 1 < argc) n = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--config16") && i + 1 < argc) config16 = argv[++i];
        else if (!strcmp(argv[i], "--no-warmup")) warmup = 0;
        else if (!strcmp(argv[i], "--fixed-order")) rotate = 0;
        else {
            fprintf(stderr, "usage: convert_ab [--device SEL] [--rounds N] [--calls N] [--n N] [--config16 CONFIG] [--no-warmup] [--fixed-order]\n");
            return 2;
        }
    }
    if (!ab_check("convert_ab", &o) || n < 1 || n > (1u << 28)) {
        fprintf(stderr, "convert_ab: --n 1..268435456\n");
        return 2;
    }
    const int rounds = o.rounds, calls = o.calls;
    tsr_device *dev = NULL;
    if (!ab_open("convert_ab", o.selector, NULL, &dev)) return 1;
    cl_context ctx = tsr_device_context(dev);
    cl_int err = CL_SUCCESS;
    cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * 4, NULL, &err);
    cl_mem y = err == CL_SUCCESS ? clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 4, NULL, &err) : NULL;
    cl_mem y16 = err == CL_SUCCESS ? clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * 2, NULL, &err) : NULL;
    float *hx = malloc(n * sizeof *hx);
    if (err != CL_SUCCESS || !hx) {
        fprintf(stderr, "convert_ab: out of memory\n");
        return 1;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ n;
    tsr_random_fill(hx, n, &seed, -5.0f, 5.0f);
    if (tsr_upload(dev, x, hx, n) != TSR_SUCCESS) return 1;
    static const char *const names[3] = {"f32 copy", "f32->f16", "f32->bf16"};
    static const tsr_dtype dst[3] = {TSR_F32, TSR_F16, TSR_BF16};
    double *wall[3], *cpu[3], *rw[2], *rc[2];
    for (int v = 0; v < 3; ++v)
        if (!ab_rounds_alloc(rounds, &wall[v], &cpu[v])) return 1;
    for (int v = 0; v < 2; ++v)
        if (!ab_rounds_alloc(rounds, &rw[v], &rc[v])) return 1;
    for (int r = 0; r < rounds; ++r) {
        for (int k = 0; k < 3; ++k) {
            const int v = rotate ? (r + k) % 3 : k;
            if (v && config16 && tsr_config_override(dev, "gelu", config16) != TSR_SUCCESS) {
                fprintf(stderr, "convert_ab: %s\n", tsr_last_error());
                return 1;
            }
            cl_mem out = v ? y16 : y;
            tsr_status st = TSR_SUCCESS;
            if (warmup) st = tsr_convert(dev, TSR_F32, x, 0, dst[v], out, 0, n, NULL, NULL);
            clFinish(tsr_device_queue(dev));
            ab_mark m = ab_start();
            for (int c = 0; c < calls && st == TSR_SUCCESS; ++c)
                st = tsr_convert(dev, TSR_F32, x, 0, dst[v], out, 0, n, NULL, NULL);
            clFinish(tsr_device_queue(dev));
            ab_per_call(m, calls, &wall[v][r], &cpu[v][r]);
            if (st != TSR_SUCCESS) {
                fprintf(stderr, "convert_ab: %s\n", tsr_last_error());
                return 1;
            }
            if (v && config16) tsr_config_override(dev, "gelu", NULL);
        }
        for (int v = 0; v < 2; ++v) { /* GB/s ratio: (6 / t16) / (8 / t32) */
            rw[v][r] = 0.75 * wall[0][r] / wall[v + 1][r];
            rc[v][r] = 0.75 * cpu[0][r] / cpu[v + 1][r];
        }
    }
    printf("{\"n\": %zu, \"rounds\": %d, \"calls\": %d, \"config16\": \"%s\"", n, rounds, calls, config16 ? config16 : "");
    for (int v = 0; v < 3; ++v)
        printf(", \"%s\": {\"wall_us\": %.1f, \"cpu_us\": %.1f}", names[v], median(wall[v], rounds), median(cpu[v], rounds));
    for (int v = 0; v < 2; ++v)
        printf(", \"%s GB/s over the copy's\": {\"wall\": %.3f, \"cpu\": %.3f}", names[v + 1], median(rw[v], rounds),
               median(rc[v], rounds));
    printf("}\n");
    return 0;
}
