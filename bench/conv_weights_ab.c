/* ResNet-50's 3x3 stride-1 convolutions with their weights kept (the buffer marked constant:
 * tsr_buffer_set_constant, so the Winograd transform or the 16-bit widening is made once) and
 * per call (unmarked), in fp32, f16 and bf16 storage (x, w and y), side by side in one process:
 *   conv_weights_ab [--device SEL] [--rounds N] [--calls N] [--batch N] [--layers LIST]
 *                   [--dtypes f32,f16,bf16] [--weights kept,per-call] [--as-f32]
 * For each layer and round the variants run in rotating order: a warm-up call, then N calls back
 * to back and one clFinish. Each call has the runner's epilogue (scale, bias, ReLU) and the
 * configuration tessera chooses (built-in or tuned). Prints one JSON line per layer with, per
 * variant, the medians over the rounds of the wall time and the process CPU time per call (PoCL's
 * worker threads included: less sensitive to other processes on a shared machine), GFLOP/s by
 * each, and each variant's CPU-time ratio to the fp32 variant of the same weights mode. --as-f32
 * runs the 16-bit variants under the fp32 layer's configuration (tsr_config_override around their
 * calls) instead of their own classes'.
 * Layers: l1.3x3 l2.3x3 l3.3x3 l4.3x3 (the default), and the rest of `tessera bench conv2d`'s
 * default ResNet-50 layers: conv1 l2.3x3s2 l1.reduce256 l1.expand l3.reduce1024 l3.expand, and the
 * 7x7 1x1 layers and the last downsample: l4.reduce2048 l4.expand l4.down (--layers all: the 13). */
#include "ab_harness.h"
#include "tessera.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct layer {
    const char *name;
    size_t c, h, k, r, stride, pad;
} layer;

static const layer layers[] = {
    {"l1.3x3", 64, 56, 64, 3, 1, 1},        {"l2.3x3", 128, 28, 128, 3, 1, 1},
    {"l3.3x3", 256, 14, 256, 3, 1, 1},      {"l4.3x3", 512, 7, 512, 3, 1, 1},
    {"conv1", 3, 224, 64, 7, 2, 3},         {"l2.3x3s2", 128, 56, 128, 3, 2, 1},
    {"l1.reduce256", 256, 56, 64, 1, 1, 0}, {"l1.expand", 64, 56, 256, 1, 1, 0},
    {"l3.reduce1024", 1024, 14, 256, 1, 1, 0}, {"l3.expand", 256, 14, 1024, 1, 1, 0},
    {"l4.reduce2048", 2048, 7, 512, 1, 1, 0},  {"l4.expand", 512, 7, 2048, 1, 1, 0},
    {"l4.down", 1024, 14, 2048, 1, 2, 0}};
static const char default_layers[] = "l1.3x3,l2.3x3,l3.3x3,l4.3x3";
#define NLAYERS (sizeof layers / sizeof *layers)
#define MAXVAR 6

typedef struct variant {
    char label[32];
    tsr_dtype t;
    bool kept;
    cl_mem x, w, y;
    double *wall, *cpu;
} variant;

int main(int argc, char **argv) {
    const char *dtypes = "f32,f16,bf16", *modes = "per-call,kept";
    ab_opts o = {.rounds = 7, .calls = 5, .batch = 1};
    bool as_f32 = false; /* 16-bit variants under the fp32 variant's configuration */
    for (int i = 1; i < argc; ++i) {
        if (ab_arg(argc, argv, &i, &o, AB_BATCH | AB_LAYERS)) continue;
        if (!strcmp(argv[i], "--dtypes") && i + 1 < argc) dtypes = argv[++i];
        else if (!strcmp(argv[i], "--weights") && i + 1 < argc) modes = argv[++i];
        else if (!strcmp(argv[i], "--as-f32")) as_f32 = true;
        else {
            fprintf(stderr, "usage: conv_weights_ab [--device SEL] [--rounds N] [--calls N] [--batch N] [--layers LIST] "
                            "[--dtypes f32,f16,bf16] [--weights kept,per-call] [--as-f32]\n");
            return 2;
        }
    }
    if (!ab_check("conv_weights_ab", &o)) return 2;
    if (!ab_layers_known("conv_weights_ab", o.list, layers, sizeof layers / sizeof *layers, sizeof *layers)) return 2;
    const int rounds = o.rounds, calls = o.calls;
    const size_t batch = o.batch;
    tsr_device *dev = NULL;
    if (!ab_open("conv_weights_ab", o.selector, NULL, &dev)) return 1;
    variant var[MAXVAR];
    int nvar = 0;
    static const struct {
        const char *name;
        tsr_dtype t;
    } types[] = {{"f32", TSR_F32}, {"f16", TSR_F16}, {"bf16", TSR_BF16}};
    for (int m = 0; m < 2; ++m)
        for (int t = 0; t < 3; ++t) {
            const char *mode = m ? "kept" : "per-call";
            if (!util_in_list(modes, mode) || !util_in_list(dtypes, types[t].name)) continue;
            variant *v = &var[nvar++];
            memset(v, 0, sizeof *v);
            snprintf(v->label, sizeof v->label, "%s %s", types[t].name, mode);
            v->t = types[t].t, v->kept = m == 1;
            if (!ab_rounds_alloc(rounds, &v->wall, &v->cpu)) return 1;
        }
    for (size_t l = 0; l < NLAYERS; ++l) {
        const layer *L = &layers[l];
        if (!util_in_list(o.list ? o.list : default_layers, L->name)) continue;
        const size_t p = (L->h + 2 * L->pad - L->r) / L->stride + 1;
        size_t pq = p * p, nx = batch * L->c * L->h * L->h, nw = L->k * L->c * L->r * L->r, ny = batch * L->k * pq;
        cl_context ctx = tsr_device_context(dev);
        cl_mem bias = util_pattern_buffer(ctx, L->k), scale = util_pattern_buffer(ctx, L->k);
        if (!bias || !scale) return 1;
        for (int v = 0; v < nvar; ++v) {
            var[v].x = ab_typed_pattern(dev, var[v].t, nx), var[v].w = ab_typed_pattern(dev, var[v].t, nw);
            var[v].y = ab_typed_pattern(dev, var[v].t, ny);
            if (!var[v].x || !var[v].w || !var[v].y) return 1;
            if (var[v].kept && tsr_buffer_set_constant(var[v].w, true) != TSR_SUCCESS) {
                fprintf(stderr, "conv_weights_ab: %s\n", tsr_last_error());
                return 1;
            }
        }
        char impl[MAXVAR][320], f32config[256] = "";
        for (int r = 0; r < rounds; ++r) {
            for (int j = 0; j < nvar; ++j) {
                int v = (r + j) % nvar; /* rotate which goes first */
                const tsr_conv2d_desc d = {.batch = batch, .in_channels = L->c, .in_height = L->h, .in_width = L->h,
                                           .out_channels = L->k, .kernel_h = L->r, .kernel_w = L->r,
                                           .stride_h = L->stride, .stride_w = L->stride, .pad_h = L->pad,
                                           .pad_w = L->pad, .x_type = var[v].t, .w_type = var[v].t, .y_type = var[v].t,
                                           .epilogue = {.activation = TSR_ACT_RELU, .bias = bias, .scale = scale}};
                if (r == 0) {
                    tsr_conv_algo algo;
                    tsr_config_info info;
                    tsr_conv2d_desc d32 = d;
                    d32.x_type = d32.w_type = d32.y_type = TSR_F32;
                    if (tsr_conv2d_plan(dev, &d32, &algo, &info) != TSR_SUCCESS) goto fail;
                    snprintf(f32config, sizeof f32config, "%s", info.config);
                    if (tsr_conv2d_plan(dev, &d, &algo, &info) != TSR_SUCCESS) goto fail;
                    snprintf(impl[v], sizeof impl[v], "%s: %s", info.problem_class,
                             as_f32 && var[v].t != TSR_F32 ? f32config : info.config);
                }
                const bool over = as_f32 && var[v].t != TSR_F32;
                if (over && tsr_config_override(dev, "conv2d", f32config) != TSR_SUCCESS) goto fail;
                if (!ab_time_conv2d(dev, &d, var[v].x, var[v].w, var[v].y, calls, &var[v].wall[r], &var[v].cpu[r]))
                    goto fail;
                if (over && tsr_config_override(dev, "conv2d", NULL) != TSR_SUCCESS) goto fail;
                continue;
            fail:
                fprintf(stderr, "conv_weights_ab: %s [%s]: %s\n", L->name, var[v].label, tsr_last_error());
                return 1;
            }
        }
        double flop = 2.0 * L->k * pq * batch * L->c * L->r * L->r;
        printf("{\"layer\": \"%s\", \"shape\": \"%zux%zux%zux%zu k%zu %zux%zu/%zu p%zu\", \"batch\": %zu", L->name,
               batch, L->c, L->h, L->h, L->k, L->r, L->r, L->stride, L->pad, batch);
        double f32cpu[2] = {0, 0};
        for (int v = 0; v < nvar; ++v)
            if (var[v].t == TSR_F32) f32cpu[var[v].kept] = util_median(var[v].cpu, rounds);
        for (int v = 0; v < nvar; ++v) {
            double mw = util_median(var[v].wall, rounds), mc = util_median(var[v].cpu, rounds);
            printf(", \"%s\": {\"wall_us\": %.1f, \"cpu_us\": %.1f, \"gflops\": %.1f, \"cpu_gflops_per_core\": %.1f, "
                   "\"rate_vs_f32_by_cpu\": %.3f, \"config\": \"%s\"}",
                   var[v].label, mw, mc, flop / mw * 1e-3, flop / mc * 1e-3,
                   f32cpu[var[v].kept] > 0 ? f32cpu[var[v].kept] / mc : 0.0, impl[v]);
        }
        printf("}\n");
        fflush(stdout);
        for (int v = 0; v < nvar; ++v) {
            clReleaseMemObject(var[v].x), clReleaseMemObject(var[v].w), clReleaseMemObject(var[v].y);
        }
        clReleaseMemObject(bias), clReleaseMemObject(scale);
    }
    printf("{\"rounds\": %d, \"calls\": %d, \"batch\": %zu}\n", rounds, calls, batch);
    for (int v = 0; v < nvar; ++v) free(var[v].wall), free(var[v].cpu);
    tsr_device_close(dev);
    return 0;
}
