/* GEMM in several storage types and configurations, side by side in one process (16-bit GEMM
 * against its fp32 twin, docs/gemm.md "16-bit storage"):
 *   gemm_dtype_ab [--device SEL] [--rounds N] [--calls N] [--min-ms MS] [--shapes LIST]
 *                 --var DTYPE[/OUT][:CONFIG][@DIR] ...
 * DTYPE is f32, f16, bf16 (A, B and C in it) or IN/OUT (A and B in IN, C in OUT: f16/f32);
 * CONFIG a GEMM configuration set with tsr_config_override ("MWI=8 PACKA=1 ..."; none: the
 * tuned entry or the default the call takes); DIR a kernel directory (TSR_KERNEL_DIR: old kernel
 * text against new; none: the built-in sources). Each variant opens its own device. Shapes:
 * MxNxK or B@MxNxK, row-major, alpha 1, beta 0, no epilogue (what `tessera bench gemm` times).
 * For each shape and round the variants run in rotating order: a warm-up call, then N calls back
 * to back and one clFinish, repeated until they took MS milliseconds (default 30) in all. Prints
 * one JSON line per shape with, per variant, the medians over the rounds of wall and process CPU
 * microseconds per call, GFLOP/s by wall time, and the median over the rounds of the variant's
 * rate over the first variant's (CPU time and wall time: paired ratios); on stderr the class and
 * configuration each variant resolved to. */
#include "ab_harness.h"
#include "tessera.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXVAR 8

typedef struct variant {
    char text[300], config[256], dir[512];
    tsr_dtype in, out;
    tsr_device *dev;
    double *wall, *cpu;
    cl_mem a, b, c;
} variant;

static int parse_variant(const char *s, variant *v) {
    memset(v, 0, sizeof *v);
    snprintf(v->text, sizeof v->text, "%s", s);
    char buf[sizeof v->text], *types = buf;
    snprintf(buf, sizeof buf, "%s", s);
    char *at = strchr(buf, '@');
    if (at) *at = 0, snprintf(v->dir, sizeof v->dir, "%s", at + 1);
    char *colon = strchr(buf, ':');
    if (colon) *colon = 0, snprintf(v->config, sizeof v->config, "%s", colon + 1);
    char *slash = strchr(types, '/');
    if (slash) *slash = 0;
    if (tsr_dtype_parse(types, &v->in) != TSR_SUCCESS) return -1;
    v->out = v->in;
    if (slash && tsr_dtype_parse(slash + 1, &v->out) != TSR_SUCCESS) return -1;
    return 0;
}

int main(int argc, char **argv) {
    const char *shapes = "256,512,1024,2048,512x768x768,512x3072x768,512x768x3072,64@128x128x128";
    variant var[MAXVAR];
    ab_opts o = {.rounds = 7, .calls = 5};
    int nvar = 0;
    double min_ms = 30;
    for (int i = 1; i < argc; ++i) {
        if (ab_arg(argc, argv, &i, &o, 0)) continue;
        if (!strcmp(argv[i], "--min-ms") && i + 1 < argc) min_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else if (!strcmp(argv[i], "--var") && i + 1 < argc && nvar < MAXVAR) {
            if (!ab_json_safe("gemm_dtype_ab", "--var", argv[i + 1])) return 2;
            if (parse_variant(argv[++i], &var[nvar]) != 0) {
                fprintf(stderr, "gemm_dtype_ab: --var takes DTYPE[/OUT][:CONFIG][@DIR], not '%s'\n", argv[i]);
                return 2;
            }
            ++nvar;
        } else {
            fprintf(stderr, "usage: gemm_dtype_ab [--device SEL] [--rounds N] [--calls N] [--min-ms MS] [--shapes LIST] "
                            "--var DTYPE[/OUT][:CONFIG][@DIR] ...\n");
            return 2;
        }
    }
    const int rounds = o.rounds, calls = o.calls;
    if (rounds < 1 || rounds > 1000 || calls < 1 || calls > 100000 || !(min_ms >= 0 && min_ms <= 60000) || nvar < 1) {
        fprintf(stderr, "gemm_dtype_ab: --rounds 1..1000, --calls 1..100000, --min-ms 0..60000, at least one --var\n");
        return 2;
    }
    for (int v = 0; v < nvar; ++v)
        if (!ab_open("gemm_dtype_ab", o.selector, var[v].dir, &var[v].dev)) return 1;
    double *ratio_cpu, *ratio_wall;
    if (!ab_rounds_alloc(rounds, &ratio_wall, &ratio_cpu)) return 1;
    for (int v = 0; v < nvar; ++v)
        if (!ab_rounds_alloc(rounds, &var[v].wall, &var[v].cpu)) return 1;
    char *list = strdup(shapes);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned long bt = 1, m, n, k;
        char *at = strchr(tok, '@');
        const char *dims = tok;
        if (at) bt = strtoul(tok, NULL, 10), dims = at + 1;
        int got = sscanf(dims, "%lux%lux%lu", &m, &n, &k);
        if (got == 1) n = k = m;
        else if (got != 3) {
            fprintf(stderr, "gemm_dtype_ab: bad shape '%s'\n", tok);
            return 2;
        }
        tsr_matmul_desc d = {.m = m, .n = n, .k = k, .batch = bt, .alpha = 1.0f};
        if (bt > 1) d.a.batch_stride = m * k, d.b.batch_stride = k * n, d.c.batch_stride = m * n;
        for (int v = 0; v < nvar; ++v) {
            var[v].a = ab_typed_pattern(var[v].dev, var[v].in, bt * m * k);
            var[v].b = ab_typed_pattern(var[v].dev, var[v].in, bt * k * n);
            var[v].c = ab_typed_pattern(var[v].dev, var[v].out, bt * m * n);
            if (!var[v].a || !var[v].b || !var[v].c) {
                fprintf(stderr, "gemm_dtype_ab: buffers: %s\n", tsr_last_error());
                return 1;
            }
        }
        char used[MAXVAR][320];
        for (int r = 0; r < rounds; ++r) {
            for (int j = 0; j < nvar; ++j) {
                int v = (r + j) % nvar; /* rotate which goes first */
                variant *V = &var[v];
                tsr_device *dev = V->dev;
                cl_command_queue q = tsr_device_queue(dev);
                tsr_status st = tsr_config_override(dev, "gemm", V->config);
                d.a.dtype = d.b.dtype = V->in, d.c.dtype = V->out;
                if (st == TSR_SUCCESS && r == 0) {
                    tsr_config_info info;
                    tsr_matmul_plan *plan = NULL;
                    st = tsr_matmul_plan_create(dev, &d, &plan);
                    if (st == TSR_SUCCESS) st = tsr_matmul_plan_info(plan, &info);
                    tsr_matmul_plan_destroy(plan);
                    if (st == TSR_SUCCESS) snprintf(used[v], sizeof used[v], "%s: %s", info.used_class, info.config);
                }
                if (st == TSR_SUCCESS) st = tsr_matmul(dev, &d, V->a, V->b, V->c, q, NULL);
                clFinish(q);
                /* N calls at least, more until they took min_ms (short calls: a few scheduler
                 * slices of a loaded machine would be all of the sample) */
                double w0 = util_clock_us(CLOCK_MONOTONIC), c0 = util_clock_us(CLOCK_PROCESS_CPUTIME_ID), w1 = w0;
                int done = 0;
                while (st == TSR_SUCCESS && (done < calls || w1 - w0 < min_ms * 1e3)) {
                    for (int i = 0; i < calls && st == TSR_SUCCESS; ++i) st = tsr_matmul(dev, &d, V->a, V->b, V->c, q, NULL);
                    clFinish(q);
                    done += calls;
                    w1 = util_clock_us(CLOCK_MONOTONIC);
                }
                if (st != TSR_SUCCESS) {
                    fprintf(stderr, "gemm_dtype_ab: %s [%s]: %s\n", tok, V->text, tsr_last_error());
                    return 1;
                }
                V->wall[r] = (w1 - w0) / done;
                V->cpu[r] = (util_clock_us(CLOCK_PROCESS_CPUTIME_ID) - c0) / done;
            }
        }
        double flop = 2.0 * bt * m * n * k;
        printf("{\"shape\": \"%s\"", tok);
        for (int v = 0; v < nvar; ++v) {
            for (int r = 0; r < rounds; ++r)
                ratio_cpu[r] = var[0].cpu[r] / var[v].cpu[r], ratio_wall[r] = var[0].wall[r] / var[v].wall[r];
            double rc = util_median(ratio_cpu, rounds), rw = util_median(ratio_wall, rounds);
            double mw = util_median(var[v].wall, rounds), mc = util_median(var[v].cpu, rounds);
            printf(", \"%s\": {\"us\": %.1f, \"cpu_us\": %.1f, \"gflops\": %.1f, \"ratio_cpu\": %.3f, \"ratio_wall\": %.3f}",
                   var[v].text, mw, mc, flop / mw * 1e-3, rc, rw);
        }
        printf("}\n");
        for (int v = 0; v < nvar; ++v) fprintf(stderr, "  %s -> %s\n", var[v].text, used[v]);
        fflush(stdout);
        for (int v = 0; v < nvar; ++v) clReleaseMemObject(var[v].a), clReleaseMemObject(var[v].b), clReleaseMemObject(var[v].c);
    }
    free(list);
    printf("{\"rounds\": %d, \"calls\": %d, \"min_ms\": %g}\n", rounds, calls, min_ms);
    for (int v = 0; v < nvar; ++v) tsr_device_close(var[v].dev);
    return 0;
}
