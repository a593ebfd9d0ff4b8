/* The smallm GEMM implementation (cl/gemm_smallm.cl, KERNEL=2) against the tiled kernel's small-m
 * configuration it replaces as the default, side by side on MiniLM's batch-1 shapes:
 *   smallm_gemm [--device SEL] [--rounds N] [--calls N] [--old CONFIG] [--new CONFIG]
 * For each shape (16 tokens: 16x384x384, QKV 16x1152x384 + bias, FFN 16x1536x384 + bias + GELU,
 * 16x384x1536 + bias; row-major A, B as nn.Linear's weight [N][K], i.e. transposed, and the
 * same shapes with row-major B) and each round, the two configurations in alternating order: a
 * warm-up call, then N calls back to back and one clFinish. Prints one JSON line per shape with
 * the medians over the rounds of wall and process-CPU microseconds per call (the CPU time counts
 * PoCL's worker threads, so it is the less load-sensitive of the two). */
#include "tessera.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


int main(int argc, char **argv) {
    const char *selector = NULL;
    const char *cfg[2] = {"MWI=8 VW=16 NVW=2 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=0",
                          "KERNEL=2 MWI=8 VW=16 NVW=2 KU=4"};
    int rounds = 15, calls = 20;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) selector = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--old") && i + 1 < argc) cfg[0] = argv[++i];
        else if (!strcmp(argv[i], "--new") && i + 1 < argc) cfg[1] = argv[++i];
        else {
            fprintf(stderr, "usage: smallm_gemm [--device SEL] [--rounds N] [--calls N] [--old CONFIG] [--new CONFIG]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 1000 || calls < 1 || calls > 100000) {
        fprintf(stderr, "smallm_gemm: --rounds 1..1000, --calls 1..100000\n");
        return 2;
    }
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(selector, &dev);
    if (st != TSR_SUCCESS) {
        fprintf(stderr, "smallm_gemm: device: %s\n", tsr_last_error());
        return 1;
    }
    cl_context ctx = tsr_device_context(dev);
    cl_command_queue q = tsr_device_queue(dev);
    static const struct { size_t m, n, k; int bias; tsr_activation act; } shapes[] = {
        {16, 384, 384, 0, TSR_ACT_NONE}, {16, 1152, 384, 1, TSR_ACT_NONE},
        {16, 1536, 384, 1, TSR_ACT_GELU_TANH}, {16, 384, 1536, 1, TSR_ACT_NONE}};
    cl_mem a = util_pattern_buffer(ctx, 16 * 1536), b = util_pattern_buffer(ctx, 1536 * 1536), c = util_pattern_buffer(ctx, 16 * 1536),
           bias = util_pattern_buffer(ctx, 1536);
    double *wall[2], *cpu[2];
    for (int v = 0; v < 2; ++v) wall[v] = malloc((size_t)rounds * sizeof(double)), cpu[v] = malloc((size_t)rounds * sizeof(double));
    if (!a || !b || !c || !bias || !wall[0] || !wall[1] || !cpu[0] || !cpu[1]) return 1;
    for (int tb = 1; tb >= 0; --tb) {
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; ++s) {
            const tsr_matmul_desc d = {.m = shapes[s].m, .n = shapes[s].n, .k = shapes[s].k, .alpha = 1.0f,
                                       .trans_b = tb ? TSR_TRANS : TSR_NO_TRANS,
                                       .epilogue = {.bias = shapes[s].bias ? bias : NULL, .activation = shapes[s].act}};
            for (int r = 0; r < rounds; ++r) {
                for (int o = 0; o < 2; ++o) {
                    int v = (r + o) % 2; /* alternate which goes first */
                    if ((st = tsr_config_override(dev, "gemm", cfg[v])) != TSR_SUCCESS ||
                        (st = tsr_matmul(dev, &d, a, b, c, q, NULL)) != TSR_SUCCESS) {
                        fprintf(stderr, "smallm_gemm: %s: %s\n", cfg[v], tsr_last_error());
                        return 1;
                    }
                    clFinish(q);
                    double w0 = util_clock_us(CLOCK_MONOTONIC), c0 = util_clock_us(CLOCK_PROCESS_CPUTIME_ID);
                    for (int i = 0; i < calls; ++i)
                        if ((st = tsr_matmul(dev, &d, a, b, c, q, NULL)) != TSR_SUCCESS) {
                            fprintf(stderr, "smallm_gemm: %s\n", tsr_last_error());
                            return 1;
                        }
                    clFinish(q);
                    wall[v][r] = (util_clock_us(CLOCK_MONOTONIC) - w0) / calls;
                    cpu[v][r] = (util_clock_us(CLOCK_PROCESS_CPUTIME_ID) - c0) / calls;
                }
            }
            double w_old = util_median(wall[0], rounds), w_new = util_median(wall[1], rounds);
            double c_old = util_median(cpu[0], rounds), c_new = util_median(cpu[1], rounds);
            double flop = 2.0 * shapes[s].m * shapes[s].n * shapes[s].k;
            printf("{\"shape\": \"%zux%zux%zu\", \"trans_b\": %d, \"epilogue\": \"%s\", \"old_us\": %.1f, \"new_us\": %.1f, "
                   "\"speedup\": %.2f, \"old_cpu_us\": %.1f, \"new_cpu_us\": %.1f, \"cpu_ratio\": %.2f, "
                   "\"new_gflops\": %.1f}\n",
                   shapes[s].m, shapes[s].n, shapes[s].k, tb, shapes[s].act ? "bias+gelu" : shapes[s].bias ? "bias" : "none",
                   w_old, w_new, w_old / w_new, c_old, c_new, c_old / c_new, flop / w_new * 1e-3);
            fflush(stdout);
        }
    }
    tsr_config_override(dev, "gemm", NULL);
    printf("{\"old\": \"%s\", \"new\": \"%s\", \"rounds\": %d, \"calls\": %d}\n", cfg[0], cfg[1], rounds, calls);
    clReleaseMemObject(a), clReleaseMemObject(b), clReleaseMemObject(c), clReleaseMemObject(bias);
    tsr_device_close(dev);
    return 0;
}
