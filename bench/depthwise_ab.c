/* MobileNet-V2's depthwise 3x3 layers under several kernel sources and configurations, side by
 * side in one process (depthwise_ab's method):
 *   depthwise_ab [--device SEL] [--rounds N] [--calls N] [--batch N] [--layers LIST]
 *                [--var LABEL=DIR|CONFIG]...
 * A --var opens its own device with TSR_KERNEL_DIR=DIR (empty: the embedded kernel sources) and
 * sets CONFIG with tsr_config_override("conv2d", ...) ("" or "builtin": none); a LABEL starting with
 * "nhwc" runs the layers channels-last (desc.layout = TSR_NHWC), one starting with "plain" without
 * the epilogue. For each layer and
 * round the variants run in rotating order (a warm-up call, then N calls back to back and one
 * clFinish), each call with the runner's epilogue (BatchNorm folded: scale, bias, ReLU), and after
 * them a copy yardstick: clEnqueueCopyBuffer of 1M floats (8 MB moved, as `tessera bench gelu
 * --part elementwise --sizes 1M`'s copy kernel). Prints one JSON line per layer with, per variant,
 * the medians over the rounds of the wall time and the process CPU time per call and GB/s by each
 * (x read once, weights, y written once; by CPU time: per core), and the copy's GB/s by wall time.
 * Layers: mb2.112x32 mb2.112x96s2 mb2.56x144 mb2.56x144s2 mb2.28x192 mb2.28x192s2 mb2.14x384
 * mb2.14x576 mb2.14x576s2 mb2.7x960, tiny.8x7 (8 channels of 7x7: what a call costs beside its
 * work), or "all" (the default). */
#include "ab_harness.h"
#include "tessera.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef ab_layer layer; /* count: how often the network runs it */

static const layer layers[] = {
    {"mb2.112x32", 32, 112, 32, 1, 1},    {"mb2.112x96s2", 96, 112, 96, 2, 1}, {"mb2.56x144", 144, 56, 144, 1, 1},
    {"mb2.56x144s2", 144, 56, 144, 2, 1}, {"mb2.28x192", 192, 28, 192, 1, 2},  {"mb2.28x192s2", 192, 28, 192, 2, 1},
    {"mb2.14x384", 384, 14, 384, 1, 4},   {"mb2.14x576", 576, 14, 576, 1, 2},  {"mb2.14x576s2", 576, 14, 576, 2, 1},
    {"mb2.7x960", 960, 7, 960, 1, 3},
    {"tiny.8x7", 8, 7, 8, 1, 0}, /* not MobileNet-V2's: a call's fixed cost */
};
#define NLAYERS (sizeof layers / sizeof *layers)
#define MAXVAR 8

int main(int argc, char **argv) {
    ab_opts o = {.rounds = 7, .calls = 5, .batch = 1};
    ab_var var[MAXVAR];
    int nvar = ab_var_args("depthwise_ab", argc, argv, &o, var, MAXVAR);
    if (nvar < 0) return 2;
    if (!ab_layers_known("depthwise_ab", o.list, layers, sizeof layers / sizeof *layers, sizeof *layers)) return 2;
    if (o.kept) { /* the depthwise forms derive nothing from the weights */
        fprintf(stderr, "depthwise_ab: --weights kept is conv3x3_ab's; depthwise layers keep nothing\n");
        return 2;
    }
    if (!ab_open_vars("depthwise_ab", o.selector, "conv2d", var, nvar, o.rounds)) return 1;
    const int rounds = o.rounds, calls = o.calls;
    const size_t batch = o.batch;
    const size_t ncopy = 1u << 20;
    cl_mem cx = util_pattern_buffer(tsr_device_context(var[0].dev), ncopy),
           cy = util_pattern_buffer(tsr_device_context(var[0].dev), ncopy);
    if (!cx || !cy) return 1;
    for (size_t l = 0; l < NLAYERS; ++l) {
        const layer *L = &layers[l];
        if (!util_in_list(o.list, L->name)) continue;
        size_t p = (L->h - 1) / L->stride + 1, pq = p * p;
        size_t nx = batch * L->c * L->h * L->h, nw = L->k * 9, ny = batch * L->k * pq;
        const tsr_conv2d_desc cd = {.batch = batch, .in_channels = L->c, .in_height = L->h, .in_width = L->h,
                                    .out_channels = L->k, .kernel_h = 3, .kernel_w = 3, .stride_h = L->stride,
                                    .stride_w = L->stride, .pad_h = 1, .pad_w = 1, .groups = L->c,
                                    .epilogue = {.activation = TSR_ACT_RELU}};
        ab_conv_bufs b[MAXVAR];
        for (int v = 0; v < nvar; ++v) /* each device its own buffers (its own context) */
            if (!ab_conv_bufs_new(var[v].dev, nx, nw, ny, L->k, &b[v])) return 1;
        double *copy = malloc((size_t)rounds * sizeof(double));
        if (!copy) return 1;
        for (int r = 0; r < rounds; ++r) {
            {
                cl_command_queue q = tsr_device_queue(var[0].dev);
                clEnqueueCopyBuffer(q, cx, cy, 0, 0, ncopy * 4, 0, NULL, NULL);
                clFinish(q);
                double w0 = util_clock_us(CLOCK_MONOTONIC);
                for (int i = 0; i < 20; ++i) clEnqueueCopyBuffer(q, cx, cy, 0, 0, ncopy * 4, 0, NULL, NULL);
                clFinish(q);
                copy[r] = (util_clock_us(CLOCK_MONOTONIC) - w0) / 20;
            }
            for (int j = 0; j < nvar; ++j) {
                int v = (r + j) % nvar; /* rotate which goes first */
                tsr_conv2d_desc d = cd;
                if (strncmp(var[v].label, "nhwc", 4) == 0) d.layout = TSR_NHWC; /* same bytes, channels last */
                if (strncmp(var[v].label, "plain", 5) == 0) memset(&d.epilogue, 0, sizeof d.epilogue); /* none */
                d.epilogue.bias = b[v].bias, d.epilogue.scale = b[v].scale;
                if (!ab_time_conv2d(var[v].dev, &d, b[v].x, b[v].w, b[v].y, calls, &var[v].wall[r], &var[v].cpu[r])) {
                    fprintf(stderr, "depthwise_ab: %s [%s]: %s\n", L->name, var[v].label, tsr_last_error());
                    return 1;
                }
            }
        }
        double bytes = 4.0 * (nx + nw + ny), mcopy = util_median(copy, rounds), copy_gbps = 8.0 * ncopy / mcopy * 1e-3;
        free(copy);
        printf("{\"layer\": \"%s\", \"shape\": \"%zux%zux%zux%zu k%zu 3x3/%zu p1 g%zu\", \"batch\": %zu, \"count\": %zu, \"copy_gbps\": %.1f",
               L->name, batch, L->c, L->h, L->h, L->k, L->stride, L->c, batch, L->count, copy_gbps);
        for (int v = 0; v < nvar; ++v) {
            double mw = util_median(var[v].wall, rounds), mc = util_median(var[v].cpu, rounds);
            printf(", \"%s\": {\"wall_us\": %.1f, \"cpu_us\": %.1f, \"gbps\": %.1f, \"of_copy\": %.2f, \"cpu_gbps_per_core\": %.1f}",
                   var[v].label, mw, mc, bytes / mw * 1e-3, bytes / mw * 1e-3 / copy_gbps, bytes / mc * 1e-3);
        }
        printf("}\n");
        fflush(stdout);
        for (int v = 0; v < nvar; ++v) ab_conv_bufs_release(&b[v]);
    }
    ab_print_vars(&o, var, nvar);
    ab_close_vars("conv2d", var, nvar);
    return 0;
}
