/* ResNet-50's 3x3 convolutions under several kernel sources and configurations, side by side in
 * one process:
 *   conv3x3_ab [--device SEL] [--rounds N] [--calls N] [--batch N] [--layers LIST]
 *              [--weights kept|per-call] [--var LABEL=DIR|CONFIG]...
 * A --var opens its own device with TSR_KERNEL_DIR=DIR (DIR empty: the embedded kernel sources)
 * and sets CONFIG with tsr_config_override("conv2d", ...) ("" or "builtin": none); so old and new
 * kernel text (a copy of the old cl/ directory against the build's) run alternately in one
 * process. For each layer and round the variants run in rotating order: a warm-up call, then N
 * calls back to back and one clFinish. Each call has the runner's epilogue (scale, bias, ReLU).
 * --weights kept marks each weight buffer constant (tsr_buffer_set_constant: STAGE 5's packing and
 * the Winograd transform made once, as `tessera bench` and the tuner's fixtures run them; the
 * default, per-call, pays them on every call).
 * Prints one JSON line per layer with, per variant, the medians over the rounds of the wall time
 * and the process CPU time per call (the CPU time counts PoCL's worker threads: less sensitive to
 * other processes on a shared machine) and GFLOP/s by each (by CPU time: per core).
 * A --var LABEL=DIR|CONFIG|GEMM also overrides that variant's GEMM configuration (im2col's GEMMs).
 * Layers: l1.3x3 l2.3x3s2 l2.3x3 l3.3x3s2 l3.3x3 l4.3x3s2 l4.3x3, or "all" (the default). */
#include "ab_harness.h"
#include "tessera.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef ab_layer layer; /* count: how often the network runs it */

static const layer layers[] = {
    {"l1.3x3", 64, 56, 64, 1, 3},    {"l2.3x3s2", 128, 56, 128, 2, 1}, {"l2.3x3", 128, 28, 128, 1, 3},
    {"l3.3x3s2", 256, 28, 256, 2, 1}, {"l3.3x3", 256, 14, 256, 1, 5},  {"l4.3x3s2", 512, 14, 512, 2, 1},
    {"l4.3x3", 512, 7, 512, 1, 2},
};
#define NLAYERS (sizeof layers / sizeof *layers)
#define MAXVAR 8

int main(int argc, char **argv) {
    ab_opts o = {.rounds = 7, .calls = 5, .batch = 1};
    ab_var var[MAXVAR];
    int nvar = ab_var_args("conv3x3_ab", argc, argv, &o, var, MAXVAR);
    if (nvar < 0) return 2;
    if (!ab_layers_known("conv3x3_ab", o.list, layers, sizeof layers / sizeof *layers, sizeof *layers)) return 2;
    if (!ab_open_vars("conv3x3_ab", o.selector, "conv2d", var, nvar, o.rounds)) return 1;
    const int rounds = o.rounds, calls = o.calls;
    const size_t batch = o.batch;
    for (size_t l = 0; l < NLAYERS; ++l) {
        const layer *L = &layers[l];
        if (!util_in_list(o.list, L->name)) continue;
        size_t p = L->h / L->stride, pq = p * p;
        size_t nx = batch * L->c * L->h * L->h, nw = L->k * L->c * 9, ny = batch * L->k * pq;
        const tsr_conv2d_desc cd = {.batch = batch, .in_channels = L->c, .in_height = L->h, .in_width = L->h,
                                    .out_channels = L->k, .kernel_h = 3, .kernel_w = 3, .stride_h = L->stride,
                                    .stride_w = L->stride, .pad_h = 1, .pad_w = 1,
                                    .epilogue = {.activation = TSR_ACT_RELU}};
        ab_conv_bufs b[MAXVAR];
        for (int v = 0; v < nvar; ++v) /* each device its own buffers (its own context) */
            if (!ab_conv_bufs_new(var[v].dev, nx, nw, ny, L->k, &b[v])) return 1;
        /* --weights kept: as an inference run's (packed, transformed or widened weights made once) */
        for (int v = 0; o.kept && v < nvar; ++v)
            if (tsr_buffer_set_constant(b[v].w, true) != TSR_SUCCESS) {
                fprintf(stderr, "conv3x3_ab: %s\n", tsr_last_error());
                return 1;
            }
        for (int r = 0; r < rounds; ++r) {
            for (int j = 0; j < nvar; ++j) {
                int v = (r + j) % nvar; /* rotate which goes first */
                tsr_conv2d_desc d = cd;
                d.epilogue.bias = b[v].bias, d.epilogue.scale = b[v].scale;
                if (!ab_time_conv2d(var[v].dev, &d, b[v].x, b[v].w, b[v].y, calls, &var[v].wall[r], &var[v].cpu[r])) {
                    fprintf(stderr, "conv3x3_ab: %s [%s]: %s\n", L->name, var[v].label, tsr_last_error());
                    return 1;
                }
            }
        }
        double flop = 2.0 * L->k * pq * batch * L->c * 9;
        printf("{\"layer\": \"%s\", \"shape\": \"%zux%zux%zux%zu k%zu 3x3/%zu p1\", \"batch\": %zu, \"count\": %zu, "
               "\"weights\": \"%s\"",
               L->name, batch, L->c, L->h, L->h, L->k, L->stride, batch, L->count, o.kept ? "kept" : "per-call");
        for (int v = 0; v < nvar; ++v) {
            double mw = util_median(var[v].wall, rounds), mc = util_median(var[v].cpu, rounds);
            printf(", \"%s\": {\"wall_us\": %.1f, \"cpu_us\": %.1f, \"gflops\": %.1f, \"cpu_gflops_per_core\": %.1f}",
                   var[v].label, mw, mc, flop / mw * 1e-3, flop / mc * 1e-3);
        }
        printf("}\n");
        fflush(stdout);
        for (int v = 0; v < nvar; ++v) ab_conv_bufs_release(&b[v]);
    }
    ab_print_vars(&o, var, nvar);
    ab_close_vars("conv2d", var, nvar);
    return 0;
}
