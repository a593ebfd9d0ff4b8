/* ResNet-50's 1x1 convolutions (the "medium" GEMMs they are) under several GEMM configurations,
 * side by side in one process:
 *   conv1x1_gemm [--device SEL] [--rounds N] [--calls N] [--batch N] [--layers LIST] [--gemm]
 *                [--cfg CONFIG]...
 * Each --cfg is a GEMM configuration set with tsr_config_override ("" or "builtin": none, the
 * tuned entry or the default the call would take); with no --cfg the built-in one alone. For
 * each layer and round the configurations run in rotating order: a warm-up call, then N calls
 * back to back and one clFinish. --gemm times the plain GEMM the layer amounts to (row-major
 * m = out channels, n = output pixels x batch, k = in channels) instead of tsr_conv2d. Prints
 * one JSON line per layer with, per configuration, the medians over the rounds of GFLOP/s by
 * wall clock and by process CPU time (the CPU time counts PoCL's worker threads: less sensitive
 * to other processes on a shared machine; GFLOP/s by CPU time are per-all-cores).
 * A CONFIG that starts with "conv:" overrides the conv2d configuration instead (the call's own
 * form: "conv:ALGO=2 STAGE=5 MWI=2 VW=16 WGM=8 WGN=1 KWG=8"), the GEMM's left as tuned. --weights
 * kept marks the weight buffer constant (STAGE 5's packing made once, as a network runs it).
 * A CONFIG may start with a storage type and a bar ("f16|", "bf16|", "f16|conv:..."): that
 * variant's conv2d has x, w and y in that type (not with --gemm), so a 16-bit call and its fp32
 * twin alternate in one process; "per-call|" is fp32 with weights of its own that are never marked
 * constant (with --weights kept: what keeping them saves, in one process).
 * Layers: l1.reduce64 ... l4.reduce2048 (ResNet-50's 1x1 layers; the .down ones stride 2), or
 * "all" (the default). */
#include "ab_harness.h"
#include "tessera.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


typedef ab_layer layer; /* count: how often the network runs it */

static const layer layers[] = {
    {"l1.reduce64", 64, 56, 64, 1, 1},     {"l1.reduce256", 256, 56, 64, 1, 2},   {"l1.expand", 64, 56, 256, 1, 4},
    {"l2.reduce256", 256, 56, 128, 1, 1},  {"l2.expand", 128, 28, 512, 1, 4},     {"l2.down", 256, 56, 512, 2, 1},
    {"l2.reduce512", 512, 28, 128, 1, 3},  {"l3.reduce512", 512, 28, 256, 1, 1},  {"l3.expand", 256, 14, 1024, 1, 6},
    {"l3.down", 512, 28, 1024, 2, 1},      {"l3.reduce1024", 1024, 14, 256, 1, 5}, {"l4.reduce1024", 1024, 14, 512, 1, 1},
    {"l4.expand", 512, 7, 2048, 1, 3},     {"l4.down", 1024, 14, 2048, 2, 1},     {"l4.reduce2048", 2048, 7, 512, 1, 2},
};
#define NLAYERS (sizeof layers / sizeof *layers)
#define MAXCFG 16
#define NSLOTS 4 /* the variants' buffers: f32, f16, bf16 (tsr_dtype order), f32 with w unmarked */
#define PER_CALL_SLOT 3

int main(int argc, char **argv) {
    ab_opts o = {.rounds = 7, .calls = 10, .batch = 1};
    const char *cfg[MAXCFG];
    int ncfg = 0, gemm = 0;
    for (int i = 1; i < argc; ++i) {
        if (ab_arg(argc, argv, &i, &o, AB_BATCH | AB_LAYERS | AB_WEIGHTS)) continue;
        if (!strcmp(argv[i], "--gemm")) gemm = 1;
        else if (!strcmp(argv[i], "--cfg") && i + 1 < argc && ncfg < MAXCFG) cfg[ncfg++] = argv[++i];
        else {
            fprintf(stderr, "usage: conv1x1_gemm [--device SEL] [--rounds N] [--calls N] [--batch N] [--layers LIST] "
                            "[--gemm] [--weights kept|per-call] [--cfg CONFIG|conv:CONFIG]...\n");
            return 2;
        }
    }
    if (!ab_check("conv1x1_gemm", &o)) return 2;
    if (!ab_layers_known("conv1x1_gemm", o.list, layers, sizeof layers / sizeof *layers, sizeof *layers)) return 2;
    if (!ncfg) cfg[ncfg++] = "";
    int var_slot[MAXCFG];
    const char *var_cfg[MAXCFG];
    for (int v = 0; v < ncfg; ++v) {
        const char *bar = strchr(cfg[v], '|');
        var_slot[v] = TSR_F32, var_cfg[v] = cfg[v];
        if (!bar) continue;
        const size_t len = (size_t)(bar - cfg[v]);
        if (len == 3 && !strncmp(cfg[v], "f16", 3)) var_slot[v] = TSR_F16;
        else if (len == 4 && !strncmp(cfg[v], "bf16", 4)) var_slot[v] = TSR_BF16;
        else if (len == 8 && !strncmp(cfg[v], "per-call", 8)) var_slot[v] = PER_CALL_SLOT;
        else if (!(len == 3 && !strncmp(cfg[v], "f32", 3))) {
            fprintf(stderr, "conv1x1_gemm: --cfg %s: before '|' comes f32, f16, bf16 or per-call\n", cfg[v]);
            return 2;
        }
        if (gemm && var_slot[v] != TSR_F32) {
            fprintf(stderr, "conv1x1_gemm: --cfg %s: typed and per-call variants time conv2d, not --gemm\n", cfg[v]);
            return 2;
        }
        var_cfg[v] = bar + 1;
    }
    const int rounds = o.rounds, calls = o.calls;
    const size_t batch = o.batch;
    tsr_device *dev = NULL;
    if (!ab_open("conv1x1_gemm", o.selector, NULL, &dev)) return 1;
    tsr_status st;
    cl_context ctx = tsr_device_context(dev);
    cl_command_queue q = tsr_device_queue(dev);
    double *wall[MAXCFG], *cpu[MAXCFG];
    for (int v = 0; v < ncfg; ++v) {
        if (!ab_rounds_alloc(rounds, &wall[v], &cpu[v])) return 1;
    }
    for (size_t l = 0; l < NLAYERS; ++l) {
        const layer *L = &layers[l];
        if (!util_in_list(o.list, L->name)) continue;
        size_t p = L->h / L->stride, pq = p * p;
        size_t nx = batch * L->c * L->h * L->h, nw = L->k * L->c, ny = batch * L->k * pq;
        if (gemm) nx = batch * pq * L->c;
        cl_mem x = util_pattern_buffer(ctx, nx), w = util_pattern_buffer(ctx, nw), y = util_pattern_buffer(ctx, ny), bias = util_pattern_buffer(ctx, L->k);
        if (!x || !w || !y || !bias) return 1;
        cl_mem xt[NSLOTS] = {0}, wt[NSLOTS] = {0}, yt[NSLOTS] = {0};
        for (int v = 0; v < ncfg; ++v) {
            const int t = var_slot[v];
            const tsr_dtype dt = t == PER_CALL_SLOT ? TSR_F32 : (tsr_dtype)t;
            if (t == TSR_F32 || xt[t]) continue;
            xt[t] = ab_typed_pattern(dev, dt, nx), wt[t] = ab_typed_pattern(dev, dt, nw), yt[t] = ab_typed_pattern(dev, dt, ny);
            if (!xt[t] || !wt[t] || !yt[t]) return 1;
            if (o.kept && t != PER_CALL_SLOT && tsr_buffer_set_constant(wt[t], true) != TSR_SUCCESS) {
                fprintf(stderr, "conv1x1_gemm: %s\n", tsr_last_error());
                return 1;
            }
        }
        xt[TSR_F32] = x, wt[TSR_F32] = w, yt[TSR_F32] = y;
        if (o.kept && tsr_buffer_set_constant(w, true) != TSR_SUCCESS) {
            fprintf(stderr, "conv1x1_gemm: %s\n", tsr_last_error());
            return 1;
        }
        const tsr_conv2d_desc cd32 = {.batch = batch, .in_channels = L->c, .in_height = L->h, .in_width = L->h,
                                    .out_channels = L->k, .kernel_h = 1, .kernel_w = 1, .stride_h = L->stride,
                                    .stride_w = L->stride, .epilogue = {.bias = bias, .activation = TSR_ACT_RELU}};
        /* the conv's GEMM as one wide matrix, as conv2d calls it: column-major y (n x k) = x (n x c)
         * w^T (c x k), n = pixels x batch; the per-column bias is the per-channel one */
        const tsr_matmul_desc md = {.layout = TSR_COL_MAJOR, .m = pq * batch, .n = L->k, .k = L->c, .alpha = 1.0f,
                                    .epilogue = {.bias = bias, .activation = TSR_ACT_RELU}};
        char used[MAXCFG][300];
        for (int r = 0; r < rounds; ++r) {
            for (int j = 0; j < ncfg; ++j) {
                int v = (r + j) % ncfg; /* rotate which goes first */
                const char *c = strcmp(var_cfg[v], "builtin") ? var_cfg[v] : "";
                tsr_conv2d_desc cd = cd32;
                cd.x_type = cd.w_type = cd.y_type = var_slot[v] == PER_CALL_SLOT ? TSR_F32 : (tsr_dtype)var_slot[v];
                cl_mem vx = xt[var_slot[v]], vw = wt[var_slot[v]], vy = yt[var_slot[v]];
                const bool conv_cfg = !strncmp(c, "conv:", 5);
                if ((st = tsr_config_override(dev, "gemm", conv_cfg ? "" : c)) != TSR_SUCCESS ||
                    (st = tsr_config_override(dev, "conv2d", conv_cfg ? c + 5 : "")) != TSR_SUCCESS)
                    goto fail;
                if (r == 0) {
                    /* the class and configuration the call resolves to (conv2d's; with --gemm, one
                     * image's GEMM) */
                    tsr_config_info info;
                    if (gemm) {
                        tsr_matmul_plan *plan = NULL;
                        tsr_matmul_desc one = md;
                        one.m = pq;
                        st = tsr_matmul_plan_create(dev, &one, &plan);
                        if (st == TSR_SUCCESS) st = tsr_matmul_plan_info(plan, &info);
                        tsr_matmul_plan_destroy(plan);
                    } else {
                        tsr_conv_algo algo = TSR_CONV_AUTO;
                        st = tsr_conv2d_plan(dev, &cd, &algo, &info);
                    }
                    snprintf(used[v], sizeof used[v], "%s: %s", st == TSR_SUCCESS ? info.used_class : tsr_last_error(),
                             st == TSR_SUCCESS ? info.config : "?");
                }
                st = gemm ? tsr_matmul(dev, &md, x, w, y, q, NULL) : tsr_conv2d(dev, &cd, vx, vw, vy, q, NULL);
                if (st != TSR_SUCCESS) goto fail;
                clFinish(q);
                ab_mark m = ab_start();
                for (int i = 0; i < calls; ++i) {
                    st = gemm ? tsr_matmul(dev, &md, x, w, y, q, NULL) : tsr_conv2d(dev, &cd, vx, vw, vy, q, NULL);
                    if (st != TSR_SUCCESS) goto fail;
                }
                clFinish(q);
                ab_per_call(m, calls, &wall[v][r], &cpu[v][r]);
                continue;
            fail:
                fprintf(stderr, "conv1x1_gemm: %s [%s]: %s\n", L->name, cfg[v], tsr_last_error());
                return 1;
            }
        }
        double flop = 2.0 * L->k * pq * batch * L->c;
        printf("{\"layer\": \"%s\", \"gemm\": \"%zux%zux%zu\", \"batch\": %zu, \"count\": %zu, \"mode\": \"%s\"", L->name,
               L->k, pq * batch, L->c, batch, L->count, gemm ? "gemm" : "conv2d");
        for (int v = 0; v < ncfg; ++v) {
            double mw = util_median(wall[v], rounds), mc = util_median(cpu[v], rounds);
            printf(", \"c%d\": {\"us\": %.1f, \"cpu_us\": %.1f, \"gflops\": %.1f, \"cpu_gflops_2\": %.1f}", v, mw, mc,
                   flop / mw * 1e-3, 2.0 * flop / mc * 1e-3);
        }
        printf("}\n");
        for (int v = 0; v < ncfg; ++v) fprintf(stderr, "  c%d = [%s] -> %s\n", v, cfg[v], used[v]);
        fflush(stdout);
        for (int t = 1; t < NSLOTS; ++t) {
            if (xt[t]) clReleaseMemObject(xt[t]), clReleaseMemObject(wt[t]), clReleaseMemObject(yt[t]);
        }
        clReleaseMemObject(x), clReleaseMemObject(w), clReleaseMemObject(y), clReleaseMemObject(bias);
    }
    tsr_config_override(dev, "gemm", NULL);
    tsr_config_override(dev, "conv2d", NULL);
    printf("{\"rounds\": %d, \"calls\": %d, \"batch\": %zu}\n", rounds, calls, batch);
    tsr_device_close(dev);
    return 0;
}
