/* `tessera bench attention`: B=1, H=8, D=64 over sequence lengths, causal and not: the
 * blocked kernel, tessera's unfused pipeline (GEMM, softmax, GEMM) and the same pipeline on
 * CLBlast's strided-batched GEMM with tessera's softmax; time, GFLOP/s (4 B H Lq Lk D, halved
 * when causal), device memory each allocates, and the error against the blocked result. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TSR_HAVE_CLBLAST
#include <clblast_c.h>
#endif

enum { BENCH_H = 8, BENCH_D = 64 };
#define ATT_MAX_LENGTH ((uint64_t)1 << 24) /* sequence lengths; the memory checks refuse long before */
#define UNFUSED_MAX_DEFAULT 2048 /* above this the unfused pipelines take minutes per row here */

typedef enum { ATT_BLOCKED, ATT_UNFUSED, ATT_CLBLAST, ATT_GEMMS } att_kind;

typedef struct att_run {
    tsr_device *dev;
    att_kind kind;
    tsr_attention_desc d;
    cl_mem q, k, v, o, scores;
} att_run;

static tsr_status run_attention(void *ctx) {
    att_run *r = ctx;
    tsr_status st = TSR_SUCCESS;
    cl_command_queue queue = tsr_device_queue(r->dev);
    switch (r->kind) {
    case ATT_BLOCKED: st = tsr_attention(r->dev, &r->d, r->q, r->k, r->v, r->o, NULL, NULL); break;
    case ATT_UNFUSED: st = tsr_attention_unfused(r->dev, &r->d, r->q, r->k, r->v, r->o, NULL, NULL); break;
    case ATT_GEMMS: { /* the equivalent matrix shapes alone: S = Q K^T and O = S V, no softmax */
        size_t L = r->d.q_len, D = r->d.head_dim, H = r->d.heads;
        st = tsr_sgemm_strided_batched(r->dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_TRANS, L, L, D, 0.125f, r->q, 0, D,
                                       L * D, r->k, 0, D, L * D, 0.0f, r->scores, 0, L, L * L, H, queue, NULL);
        if (st == TSR_SUCCESS)
            st = tsr_sgemm_strided_batched(r->dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, L, D, L, 1.0f, r->scores,
                                           0, L, L * L, r->v, 0, D, L * D, 0.0f, r->o, 0, D, L * D, H, queue, NULL);
        break;
    }
    case ATT_CLBLAST: {
#ifdef TSR_HAVE_CLBLAST
        const tsr_attention_desc *d = &r->d;
        size_t L = d->q_len, D = d->head_dim, H = d->heads;
        float scale = 1.0f / sqrtf((float)D);
        CLBlastStatusCode cs = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes,
                                                          L, L, D, scale, r->q, 0, D, L * D, r->k, 0, D, L * D, 0.0f,
                                                          r->scores, 0, L, L * L, H, &queue, NULL);
        if (cs != CLBlastSuccess) return tsr_fail(TSR_ERR_OPENCL, "CLBlast QK^T failed with status %d", (int)cs);
        tsr_attention_desc scaled = *d;
        scaled.scale = scale;
        if ((st = tsr_attention_softmax(r->dev, &scaled, 0, r->scores, queue, NULL, NULL)) != TSR_SUCCESS) return st;
        cs = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, L, D, L, 1.0f,
                                        r->scores, 0, L, L * L, r->v, 0, D, L * D, 0.0f, r->o, 0, D, L * D, H, &queue,
                                        NULL);
        if (cs != CLBlastSuccess) return tsr_fail(TSR_ERR_OPENCL, "CLBlast PV failed with status %d", (int)cs);
#else
        return tsr_fail(TSR_ERR_UNSUPPORTED, "built without CLBlast");
#endif
        break;
    }
    }
    if (st == TSR_SUCCESS) clFinish(queue);
    return st;
}

/* The relative error of a against another implementation's result (floats, not a double reference). */
static double rel_diff(const float *a, const float *ref, size_t n) {
    tsr_error_sum sum = {0, 0};
    for (size_t i = 0; i < n; ++i) tsr_error_add(&sum, a[i], ref[i]);
    return tsr_error_value(&sum);
}

static tsr_status bench_length(tsr_device *dev, const bench_options *opt, bench_report *report, size_t L, bool causal) {
    size_t n = BENCH_H * L * BENCH_D;
    tsr_status st = TSR_SUCCESS;
    float *hq = malloc(n * 4), *ho = malloc(n * 4), *ref = malloc(n * 4);
    att_run r = {.dev = dev, .d = {.batch = 1, .heads = BENCH_H, .q_len = L, .kv_len = L, .head_dim = BENCH_D,
                                   .causal = causal}};
    cl_int err = CL_SUCCESS;
    if (!hq || !ho || !ref) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
        goto out;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ L;
    cl_mem *mems[3] = {&r.q, &r.k, &r.v};
    for (int t = 0; t < 3 && err == CL_SUCCESS; ++t) {
        tsr_random_fill(hq, n, &seed, -1.0f, 1.0f);
        *mems[t] = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 4, hq, &err);
    }
    if (err == CL_SUCCESS) r.o = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, n * 4, NULL, &err);
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        goto out;
    }
    size_t unfused_max = opt->max_unfused ? opt->max_unfused : UNFUSED_MAX_DEFAULT;
    static const struct {
        const char *impl;
        att_kind kind;
    } impls[] = {{"tessera-blocked", ATT_BLOCKED},
                 {"tessera-unfused", ATT_UNFUSED},
                 {"clblast-unfused", ATT_CLBLAST},
                 {"tessera-gemms-only", ATT_GEMMS}};
    double ms[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4 && st == TSR_SUCCESS; ++i) {
        if (impls[i].kind != ATT_BLOCKED && L > unfused_max) continue;
        if (impls[i].kind == ATT_CLBLAST) {
#ifndef TSR_HAVE_CLBLAST
            continue;
#endif
            if (!opt->peers || causal) continue; /* CLBlast's pipeline here has no causal variant */
        }
        if (impls[i].kind == ATT_GEMMS && causal) continue; /* the yardstick for full attention */
        if (impls[i].kind == ATT_CLBLAST || impls[i].kind == ATT_GEMMS) {
            if ((double)BENCH_H * L * L * 4 > (double)tsr_device_get_info(dev)->max_alloc_bytes) {
                if (!opt->quiet)
                    printf("%-6zu %-7s %-16s does not run: the scores need %.0f MiB, more than one allocation may "
                           "hold here (%.0f MiB)\n",
                           L, causal ? "causal" : "full", impls[i].impl, (double)BENCH_H * L * L * 4 / 1048576.0,
                           (double)tsr_device_get_info(dev)->max_alloc_bytes / 1048576.0);
                continue;
            }
            r.scores = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, BENCH_H * L * L * 4, NULL, &err);
            if (err != CL_SUCCESS) {
                st = tsr_fail_cl(err, "clCreateBuffer(scores)", __FILE__, __LINE__);
                break;
            }
        }
        r.kind = impls[i].kind;
        bench_row row = {0};
        if ((st = bench_time(run_attention, &r, opt->budget_s, 3, 50, &row)) != TSR_SUCCESS) {
            if (st != TSR_ERR_OUT_OF_MEMORY || r.kind == ATT_BLOCKED) break;
            /* the scores do not fit this device: report it and go on */
            if (!opt->quiet) printf("%-6zu %-7s %-16s does not run: %s\n", L, causal ? "causal" : "full", impls[i].impl,
                                    tsr_last_error());
            st = TSR_SUCCESS;
            if (r.scores) clReleaseMemObject(r.scores), r.scores = NULL;
            continue;
        }
        if ((st = tsr_download(dev, r.o, i == 0 ? ref : ho, n)) != TSR_SUCCESS) break;
        strcpy(row.op, causal ? "attention-causal" : "attention");
        snprintf(row.shape, sizeof row.shape, "1x%dx%zux%d", BENCH_H, L, BENCH_D);
        tsr_strlcpy(row.impl, impls[i].impl, sizeof row.impl);
        row.gflops = 4.0 * BENCH_H * L * L * BENCH_D / (causal ? 2.0 : 1.0) / (row.time_ms * 1e6);
        /* device memory the implementation allocates: Q, K, V, O plus its scratch */
        double mib = 4.0 * n * 4 / 1048576.0;
        if (r.kind == ATT_BLOCKED) mib += (double)n * 4 / 1048576.0 + 4.0 / 1048576.0; /* transposed K, key lengths */
        else mib += (double)BENCH_H * L * L * 4 / 1048576.0;                          /* the scores */
        row.gbps = 0;
        row.rel_err = i == 0 || r.kind == ATT_GEMMS ? -1 : rel_diff(ho, ref, n); /* against the blocked result */
        row.mem_mib = mib;
        ms[i] = row.time_ms;
        if ((st = bench_add(report, &row)) != TSR_SUCCESS) break;
        if (!opt->quiet) {
            char diff[16] = "-";
            if (row.rel_err >= 0) snprintf(diff, sizeof diff, "%.1e", row.rel_err);
            printf("%-6zu %-7s %-16s %10.2f %8.1f %10.1f %10s\n", L, causal ? "causal" : "full", row.impl, row.time_ms,
                   row.gflops, mib, diff);
            fflush(stdout);
        }
        if (r.scores) clReleaseMemObject(r.scores), r.scores = NULL;
    }
    if (st == TSR_SUCCESS && !opt->quiet && ms[0] > 0 && (ms[1] > 0 || ms[2] > 0)) {
        printf("%-6zu %-7s blocked is", L, causal ? "causal" : "full");
        if (ms[1] > 0) printf(" %.2fx tessera-unfused", ms[1] / ms[0]);
        if (ms[2] > 0) printf(", %.2fx clblast-unfused", ms[2] / ms[0]);
        if (ms[3] > 0) printf(", %.2f of the GEMM-only rate", ms[3] / ms[0]);
        printf("\n");
    }
out:
    if (r.q) clReleaseMemObject(r.q);
    if (r.k) clReleaseMemObject(r.k);
    if (r.v) clReleaseMemObject(r.v);
    if (r.o) clReleaseMemObject(r.o);
    if (r.scores) clReleaseMemObject(r.scores);
    free(hq), free(ho), free(ref);
    return st;
}

tsr_status bench_attention(tsr_device *dev, const bench_options *opt, bench_report *report) {
    size_t *lengths = NULL, count = 0;
    tsr_status st = TSR_SUCCESS;
    if ((st = bench_parse_counts(bench_sizes_or_default("attention", opt->sizes), "sequence lengths", ATT_MAX_LENGTH,
                                 &lengths, &count)) != TSR_SUCCESS)
        return st;
    st = bench_check_part("attention", opt->part);
    if (st == TSR_SUCCESS && opt->layers)
        st = tsr_fail(TSR_ERR_INVALID_ARG, "--layers: only conv2d has layers");
    else if (st == TSR_SUCCESS && opt->clblast_xgemm)
        st = tsr_fail(TSR_ERR_INVALID_ARG, "--clblast-xgemm: only for the gemm benchmark");
    /* Q, K, V, O and the blocked kernel's transposed K, for every length before the first runs
     * (the unfused pipelines' scores are checked where they run: they are skipped, not fatal). */
    for (size_t i = 0; i < count && st == TSR_SUCCESS; ++i) {
        char what[64];
        snprintf(what, sizeof what, "attention at L=%zu", lengths[i]);
        size_t b = (size_t)BENCH_H * lengths[i] * BENCH_D * 4; /* lengths <= 2^24: no wrap */
        size_t bytes[5] = {b, b, b, b, b};
        st = bench_check_memory(dev, what, bytes, 5, 3 * b);
    }
    if (st != TSR_SUCCESS) {
        free(lengths);
        return st;
    }
    if (!opt->quiet)
        printf("%-6s %-7s %-16s %10s %8s %10s %10s\n", "L", "mask", "impl", "ms", "GFLOP/s", "dev MiB", "rel_diff");
    for (size_t i = 0; i < count && st == TSR_SUCCESS; ++i)
        for (int causal = 0; causal < 2 && st == TSR_SUCCESS; ++causal)
            st = bench_length(dev, opt, report, lengths[i], causal);
    free(lengths);
    return st;
}
