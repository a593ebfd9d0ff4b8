/* GEMM with and without its fused epilogue under several kernel directories, side by side in one
 * process (old kernel text against new; docs/tuning.md, "What a candidate compiles"):
 *   gemm_epilogue_ab [--device SEL] [--rounds N] [--calls N] [--shapes MxNxK,...]
 *                    [--epilogues LIST] --var LABEL=DIR ...
 * Each --var opens its own device with TSR_KERNEL_DIR=DIR (give every variant a directory, so
 * each pays the same per-call source look-up). Epilogues: none, relu (bias + ReLU), gelu (bias +
 * GELU tanh), res (residual + ReLU). For each shape, epilogue and round the variants run in
 * rotating order: a warm-up call, then N calls back to back and one clFinish. Prints one JSON line
 * per shape and epilogue with, per variant, the medians over the rounds of wall and process CPU
 * microseconds per call and GFLOP/s by wall time. The built-in configuration of each shape. */
#include "ab_harness.h"
#include "tessera.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXVAR 4

typedef struct variant {
    char label[64], dir[512];
    tsr_device *dev;
    double *wall, *cpu;
} variant;

int main(int argc, char **argv) {
    const char *selector = NULL, *shapes = "1024x1024x1024,512x3072x768,3136x64x64,784x256x128",
               *epilogues = "none,relu,gelu,res";
    variant var[MAXVAR];
    int nvar = 0, rounds = 7, calls = 5;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) selector = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else if (!strcmp(argv[i], "--epilogues") && i + 1 < argc) epilogues = argv[++i];
        else if (!strcmp(argv[i], "--var") && i + 1 < argc && nvar < MAXVAR) {
            const char *s = argv[++i], *eq = strchr(s, '=');
            if (!ab_json_safe("gemm_epilogue_ab", "--var", s)) return 2;
            if (!eq || eq == s || (size_t)(eq - s) >= sizeof var[0].label || strlen(eq + 1) >= sizeof var[0].dir) {
                fprintf(stderr, "gemm_epilogue_ab: --var takes LABEL=DIR, not '%s'\n", s);
                return 2;
            }
            variant *v = &var[nvar++];
            memset(v, 0, sizeof *v);
            memcpy(v->label, s, (size_t)(eq - s));
            snprintf(v->dir, sizeof v->dir, "%s", eq + 1);
        } else {
            fprintf(stderr, "usage: gemm_epilogue_ab [--device SEL] [--rounds N] [--calls N] [--shapes MxNxK,...] "
                            "[--epilogues LIST] --var LABEL=DIR ...\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 1000 || calls < 1 || calls > 100000 || nvar < 1) {
        fprintf(stderr, "gemm_epilogue_ab: --rounds 1..1000, --calls 1..100000, at least one --var\n");
        return 2;
    }
    for (int v = 0; v < nvar; ++v) {
        if (var[v].dir[0]) setenv("TSR_KERNEL_DIR", var[v].dir, 1);
        else unsetenv("TSR_KERNEL_DIR");
        if (tsr_device_open(selector, &var[v].dev) != TSR_SUCCESS) {
            fprintf(stderr, "gemm_epilogue_ab: device: %s\n", tsr_last_error());
            return 1;
        }
        var[v].wall = malloc((size_t)rounds * sizeof(double)), var[v].cpu = malloc((size_t)rounds * sizeof(double));
        if (!var[v].wall || !var[v].cpu) return 1;
    }
    unsetenv("TSR_KERNEL_DIR");
    char shape_list[512];
    snprintf(shape_list, sizeof shape_list, "%s", shapes);
    for (char *save = NULL, *sh = strtok_r(shape_list, ",", &save); sh; sh = strtok_r(NULL, ",", &save)) {
        size_t m = 0, n = 0, k = 0;
        if (sscanf(sh, "%zux%zux%zu", &m, &n, &k) != 3 || !m || !n || !k) {
            fprintf(stderr, "gemm_epilogue_ab: bad shape '%s'\n", sh);
            return 2;
        }
        cl_mem a[MAXVAR], b[MAXVAR], c[MAXVAR], bias[MAXVAR], res[MAXVAR];
        for (int v = 0; v < nvar; ++v) {
            cl_context ctx = tsr_device_context(var[v].dev);
            a[v] = util_pattern_buffer(ctx, m * k), b[v] = util_pattern_buffer(ctx, k * n);
            c[v] = util_pattern_buffer(ctx, m * n), bias[v] = util_pattern_buffer(ctx, n);
            res[v] = util_pattern_buffer(ctx, m * n);
            if (!a[v] || !b[v] || !c[v] || !bias[v] || !res[v]) return 1;
        }
        char epi_list[128];
        snprintf(epi_list, sizeof epi_list, "%s", epilogues);
        for (char *save2 = NULL, *e = strtok_r(epi_list, ",", &save2); e; e = strtok_r(NULL, ",", &save2)) {
            for (int r = 0; r < rounds; ++r) {
                for (int o = 0; o < nvar; ++o) {
                    int v = (r + o) % nvar;
                    tsr_device *dev = var[v].dev;
                    cl_command_queue q = tsr_device_queue(dev);
                    tsr_matmul_desc d = {.m = m, .n = n, .k = k, .alpha = 1.0f, .beta = 0.0f};
                    if (!strcmp(e, "relu")) d.epilogue = (tsr_epilogue){.bias = bias[v], .activation = TSR_ACT_RELU};
                    else if (!strcmp(e, "gelu"))
                        d.epilogue = (tsr_epilogue){.bias = bias[v], .activation = TSR_ACT_GELU_TANH};
                    else if (!strcmp(e, "res"))
                        d.epilogue = (tsr_epilogue){.residual = res[v], .activation = TSR_ACT_RELU};
                    else if (strcmp(e, "none")) {
                        fprintf(stderr, "gemm_epilogue_ab: unknown epilogue '%s'\n", e);
                        return 2;
                    }
                    if (tsr_matmul(dev, &d, a[v], b[v], c[v], q, NULL) != TSR_SUCCESS) goto fail;
                    clFinish(q);
                    double w0 = util_clock_us(CLOCK_MONOTONIC), c0 = util_clock_us(CLOCK_PROCESS_CPUTIME_ID);
                    for (int i = 0; i < calls; ++i)
                        if (tsr_matmul(dev, &d, a[v], b[v], c[v], q, NULL) != TSR_SUCCESS) goto fail;
                    clFinish(q);
                    var[v].wall[r] = (util_clock_us(CLOCK_MONOTONIC) - w0) / calls;
                    var[v].cpu[r] = (util_clock_us(CLOCK_PROCESS_CPUTIME_ID) - c0) / calls;
                    continue;
                fail:
                    fprintf(stderr, "gemm_epilogue_ab: %s %s [%s]: %s\n", sh, e, var[v].label, tsr_last_error());
                    return 1;
                }
            }
            double flop = 2.0 * m * n * k;
            printf("{\"shape\": \"%s\", \"epilogue\": \"%s\"", sh, e);
            for (int v = 0; v < nvar; ++v) {
                double mw = util_median(var[v].wall, rounds), mc = util_median(var[v].cpu, rounds);
                printf(", \"%s\": {\"wall_us\": %.1f, \"cpu_us\": %.1f, \"gflops\": %.1f}", var[v].label, mw, mc,
                       flop / mw * 1e-3);
            }
            printf("}\n");
            fflush(stdout);
        }
        for (int v = 0; v < nvar; ++v) {
            clReleaseMemObject(a[v]), clReleaseMemObject(b[v]), clReleaseMemObject(c[v]);
            clReleaseMemObject(bias[v]), clReleaseMemObject(res[v]);
        }
    }
    for (int v = 0; v < nvar; ++v) {
        tsr_device_close(var[v].dev);
        free(var[v].wall), free(var[v].cpu);
    }
    return 0;
}
