/* `tessera bench attention`: B=1, H=8, D=64 over sequence lengths, causal and not: the
 * blocked kernel, tessera's unfused pipeline (GEMM, softmax, GEMM) and the same pipeline on
 * CLBlast's strided-batched GEMM with tessera's softmax; time, GFLOP/s (4 B H Lq Lk D, halved
 * when causal), device memory each allocates, and each one's own error against a double-precision
 * reference (its output poisoned before the checked run).
 * With --dtype IN[/OUT] (f16, bf16, f16/f32 ...): per length and mask, the blocked kernel with Q,
 * K and V stored in IN and O in OUT, timed in alternation with the same problem in fp32 (the same
 * values: the inputs are rounded to IN for both), both rows written and the rate ratio printed. */
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

/* Rows of each head checked against the double-precision reference: all of them up to this
 * length, else this many spread evenly, first and last included (the reference costs
 * O(L D) per row in double precision on one host thread: every row at L = 16384 would take
 * minutes per implementation). */
#define CHECKED_ROWS 128

static size_t checked_row(size_t L, size_t r) {
    size_t rows = L < CHECKED_ROWS ? L : CHECKED_ROWS;
    return rows == 1 ? 0 : r * (L - 1) / (rows - 1);
}

/* The double-precision reference on the checked rows: softmax attention (with the causal mask
 * when asked: Lq == Lk here, so row i sees keys 0..i) or, for the GEMM-only yardstick,
 * (scale Q K^T) V without a softmax. ref holds H x rows x D values. */
static void attention_reference(const float *q, const float *k, const float *v, size_t L, bool causal, bool softmax,
                                double *ref, double *scratch) {
    size_t rows = L < CHECKED_ROWS ? L : CHECKED_ROWS, D = BENCH_D;
    double scale = 1.0 / sqrt((double)D);
    for (size_t h = 0; h < BENCH_H; ++h)
        for (size_t r = 0; r < rows; ++r) {
            size_t i = checked_row(L, r);
            const float *qh = q + h * L * D, *kh = k + h * L * D, *vh = v + h * L * D;
            double *out = ref + (h * rows + r) * D;
            if (softmax) {
                tsr_attention_reference_row(qh + i * D, kh, vh, causal ? i + 1 : L, D, scale, scratch, out);
                continue;
            }
            for (size_t d = 0; d < D; ++d) out[d] = 0;
            for (size_t j = 0; j < L; ++j) {
                double s = 0;
                for (size_t d = 0; d < D; ++d) s += (double)qh[i * D + d] * kh[j * D + d];
                s *= (float)scale; /* the yardstick's GEMM takes alpha = 0.125f */
                for (size_t d = 0; d < D; ++d) out[d] += s * vh[j * D + d];
            }
        }
}

/* Relative error of an implementation's output on the checked rows; an unwritten (still
 * poisoned) element makes it infinite. */
static double checked_error(const float *o, const double *ref, size_t L) {
    size_t rows = L < CHECKED_ROWS ? L : CHECKED_ROWS, D = BENCH_D;
    tsr_error_sum sum = {0, 0};
    for (size_t h = 0; h < BENCH_H; ++h)
        for (size_t r = 0; r < rows; ++r)
            for (size_t d = 0; d < D; ++d)
                tsr_error_add(&sum, o[(h * L + checked_row(L, r)) * D + d], ref[(h * rows + r) * D + d]);
    return tsr_error_value(&sum);
}

static const char *att_variant(att_kind kind) {
    switch (kind) {
    case ATT_BLOCKED: return "blocked, online softmax";
    case ATT_UNFUSED: return "tessera GEMM, row softmax, tessera GEMM";
    case ATT_CLBLAST: return "CLBlast GEMM, tessera row softmax, CLBlast GEMM";
    case ATT_GEMMS: return "the two GEMMs alone, no softmax (yardstick)";
    }
    return "";
}

/* The checked run of a 16-bit output: poisoned, run once, read back widened to fp32. */
static tsr_status checked_run_typed(att_run *r, tsr_dtype o_type, float *host, size_t n) {
    for (size_t i = 0; i < n; ++i) host[i] = NAN;
    tsr_status st = tsr_upload_typed(r->dev, r->o, o_type, host, n);
    if (st == TSR_SUCCESS) st = run_attention(r);
    if (st == TSR_SUCCESS) st = tsr_download_typed(r->dev, r->o, o_type, host, n);
    return st;
}

/* --dtype: the blocked kernel in 16-bit storage against itself in fp32, timed in alternation. */
static tsr_status bench_length_dtype(tsr_device *dev, const bench_options *opt, bench_report *report, size_t L,
                                     bool causal) {
    size_t n = BENCH_H * L * BENCH_D, rows = L < CHECKED_ROWS ? L : CHECKED_ROWS;
    tsr_dtype in = opt->in_type, out_type = opt->out_type;
    tsr_status st = TSR_SUCCESS;
    float *host[3] = {malloc(n * 4), malloc(n * 4), malloc(n * 4)}, *ho = malloc(n * 4);
    double *ref = malloc(BENCH_H * rows * BENCH_D * sizeof(double)), *scratch = malloc(L * sizeof(double));
    tsr_attention_desc d = {.batch = 1, .heads = BENCH_H, .q_len = L, .kv_len = L, .head_dim = BENCH_D,
                            .causal = causal};
    att_run r32 = {.dev = dev, .kind = ATT_BLOCKED, .d = d}, r16 = r32;
    r16.d.q_type = r16.d.k_type = r16.d.v_type = in;
    r16.d.o_type = out_type;
    att_run *runs[2] = {&r16, &r32};
    if (!host[0] || !host[1] || !host[2] || !ho || !ref || !scratch) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
        goto out;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ L;
    for (int t = 0; t < 3; ++t) {
        tsr_random_fill(host[t], n, &seed, -1.0f, 1.0f);
        tsr_dtype_round_array(in, host[t], n); /* both rows compute on the values IN holds */
    }
    for (int i = 0; i < 2 && st == TSR_SUCCESS; ++i) {
        att_run *r = runs[i];
        const tsr_dtype types[4] = {r->d.q_type, r->d.k_type, r->d.v_type, r->d.o_type};
        cl_mem *mems[4] = {&r->q, &r->k, &r->v, &r->o};
        cl_int err = CL_SUCCESS;
        for (int t = 0; t < 4 && st == TSR_SUCCESS; ++t) {
            *mems[t] = clCreateBuffer(tsr_device_context(dev), t < 3 ? CL_MEM_READ_ONLY : CL_MEM_READ_WRITE,
                                      n * tsr_dtype_size(types[t]), NULL, &err);
            if (err != CL_SUCCESS) st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
            else if (t < 3) st = tsr_upload_typed(dev, *mems[t], types[t], host[t], n);
        }
    }
    if (st != TSR_SUCCESS) goto out;
    attention_reference(host[0], host[1], host[2], L, causal, true, ref, scratch);
    bench_row rows16 = {0}, rows32 = {0};
    bench_row *row[2] = {&rows16, &rows32};
    double ratio[3];
    if ((st = bench_time_paired(run_attention, &r16, run_attention, &r32, opt->budget_s, 3, 50, &rows16, &rows32,
                                ratio)) != TSR_SUCCESS)
        goto out;
    char dtype[16];
    tsr_dtype_spec_format(in, out_type, dtype, sizeof dtype);
    double rate_ratio = 1.0 / ratio[0]; /* 16-bit rate / fp32 rate: the median of time32 / time16 */
    for (int i = 0; i < 2 && st == TSR_SUCCESS; ++i) {
        if ((st = checked_run_typed(runs[i], runs[i]->d.o_type, ho, n)) != TSR_SUCCESS) break;
        strcpy(row[i]->op, causal ? "attention-causal" : "attention");
        snprintf(row[i]->shape, sizeof row[i]->shape, "1x%dx%zux%d%s", BENCH_H, L, BENCH_D, causal ? " causal" : "");
        tsr_strlcpy(row[i]->impl, "tessera-blocked", sizeof row[i]->impl);
        strcpy(row[i]->mask, causal ? "causal" : "none");
        if (i == 0) {
            tsr_strlcpy(row[i]->dtype, dtype, sizeof row[i]->dtype);
            snprintf(row[i]->variant, sizeof row[i]->variant, "blocked, online softmax; %.2fx the fp32 rate",
                     rate_ratio);
        } else {
            tsr_strlcpy(row[i]->variant, "blocked, online softmax (fp32 pair)", sizeof row[i]->variant);
        }
        row[i]->gflops = 4.0 * BENCH_H * L * L * BENCH_D / (causal ? 2.0 : 1.0) / (row[i]->time_ms * 1e6);
        double element_bytes = 3.0 * tsr_dtype_size(runs[i]->d.q_type) + tsr_dtype_size(runs[i]->d.o_type);
        row[i]->mem_mib = (element_bytes + 4.0) * n / 1048576.0; /* and K packed in fp32 */
        row[i]->rel_err = checked_error(ho, ref, L);
        if ((st = bench_add(report, row[i])) != TSR_SUCCESS) break;
        if (!opt->quiet)
            printf("%-6zu %-7s %-18s %-8s %10.2f %8.1f %10.1f %9.1e\n", L, causal ? "causal" : "full", row[i]->impl,
                   i == 0 ? dtype : "f32", row[i]->time_ms, row[i]->gflops, row[i]->mem_mib, row[i]->rel_err);
    }
    if (st == TSR_SUCCESS && !opt->quiet) {
        printf("%-6zu %-7s %s is %.2fx the fp32 rate (pairs: %.2f..%.2f)\n", L, causal ? "causal" : "full", dtype,
               rate_ratio, 1.0 / ratio[2], 1.0 / ratio[1]);
        fflush(stdout);
    }
out:
    for (int i = 0; i < 2; ++i) {
        cl_mem mems[4] = {runs[i]->q, runs[i]->k, runs[i]->v, runs[i]->o};
        for (int t = 0; t < 4; ++t)
            if (mems[t]) clReleaseMemObject(mems[t]);
    }
    for (int t = 0; t < 3; ++t) free(host[t]);
    free(ho), free(ref), free(scratch);
    return st;
}

static tsr_status bench_length(tsr_device *dev, const bench_options *opt, bench_report *report, size_t L, bool causal) {
    if (opt->in_type != TSR_F32 || opt->out_type != TSR_F32) return bench_length_dtype(dev, opt, report, L, causal);
    size_t n = BENCH_H * L * BENCH_D, rows = L < CHECKED_ROWS ? L : CHECKED_ROWS;
    tsr_status st = TSR_SUCCESS;
    float *host[3] = {malloc(n * 4), malloc(n * 4), malloc(n * 4)}, *ho = malloc(n * 4);
    double *ref_softmax = malloc(BENCH_H * rows * BENCH_D * sizeof(double));
    double *ref_gemms = malloc(BENCH_H * rows * BENCH_D * sizeof(double)), *scratch = malloc(L * sizeof(double));
    bool have_gemms_ref = false;
    att_run r = {.dev = dev, .d = {.batch = 1, .heads = BENCH_H, .q_len = L, .kv_len = L, .head_dim = BENCH_D,
                                   .causal = causal}};
    cl_int err = CL_SUCCESS;
    if (!host[0] || !host[1] || !host[2] || !ho || !ref_softmax || !ref_gemms || !scratch) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
        goto out;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ L;
    cl_mem *mems[3] = {&r.q, &r.k, &r.v};
    for (int t = 0; t < 3 && err == CL_SUCCESS; ++t) {
        tsr_random_fill(host[t], n, &seed, -1.0f, 1.0f);
        *mems[t] = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 4, host[t], &err);
    }
    if (err == CL_SUCCESS) r.o = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, n * 4, NULL, &err);
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        goto out;
    }
    attention_reference(host[0], host[1], host[2], L, causal, true, ref_softmax, scratch);
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
        if ((st = bench_checked_run(run_attention, &r, dev, r.o, ho, n)) != TSR_SUCCESS) break;
        if (r.kind == ATT_GEMMS && !have_gemms_ref) {
            attention_reference(host[0], host[1], host[2], L, false, false, ref_gemms, scratch);
            have_gemms_ref = true;
        }
        strcpy(row.op, causal ? "attention-causal" : "attention");
        snprintf(row.shape, sizeof row.shape, "1x%dx%zux%d%s", BENCH_H, L, BENCH_D, causal ? " causal" : "");
        tsr_strlcpy(row.impl, impls[i].impl, sizeof row.impl);
        strcpy(row.mask, causal ? "causal" : "none");
        tsr_strlcpy(row.variant, att_variant(r.kind), sizeof row.variant);
        row.gflops = 4.0 * BENCH_H * L * L * BENCH_D / (causal ? 2.0 : 1.0) / (row.time_ms * 1e6);
        /* device memory the implementation allocates: Q, K, V, O plus its scratch */
        double mib = 4.0 * n * 4 / 1048576.0;
        if (r.kind == ATT_BLOCKED) mib += (double)n * 4 / 1048576.0 + 4.0 / 1048576.0; /* transposed K, key lengths */
        else mib += (double)BENCH_H * L * L * 4 / 1048576.0;                          /* the scores */
        row.gbps = 0;
        row.rel_err = checked_error(ho, r.kind == ATT_GEMMS ? ref_gemms : ref_softmax, L);
        row.mem_mib = mib;
        ms[i] = row.time_ms;
        if ((st = bench_add(report, &row)) != TSR_SUCCESS) break;
        if (!opt->quiet) {
            printf("%-6zu %-7s %-18s %10.2f %8.1f %10.1f %9.1e\n", L, causal ? "causal" : "full", row.impl, row.time_ms,
                   row.gflops, mib, row.rel_err);
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
    for (int t = 0; t < 3; ++t) free(host[t]);
    free(ho), free(ref_softmax), free(ref_gemms), free(scratch);
    return st;
}

tsr_status bench_attention(tsr_device *dev, const bench_options *opt, bench_report *report) {
    size_t *lengths = NULL, count = 0;
    tsr_status st = TSR_SUCCESS;
    if ((st = util_parse_counts(opt->sizes, "sequence lengths", ATT_MAX_LENGTH, &lengths, &count)) != TSR_SUCCESS)
        return st;
    if (opt->layers)
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
        st = util_check_memory(dev, what, bytes, 5, 3 * b);
    }
    if (st != TSR_SUCCESS) {
        free(lengths);
        return st;
    }
    if (!opt->quiet && (opt->in_type != TSR_F32 || opt->out_type != TSR_F32))
        printf("%-6s %-7s %-18s %-8s %10s %8s %10s %9s\n", "L", "mask", "impl", "dtype", "ms", "GFLOP/s", "dev MiB",
               "rel_err");
    else if (!opt->quiet)
        printf("%-6s %-7s %-18s %10s %8s %10s %9s\n", "L", "mask", "impl", "ms", "GFLOP/s", "dev MiB", "rel_err");
    for (size_t i = 0; i < count && st == TSR_SUCCESS; ++i)
        for (int causal = 0; causal < 2 && st == TSR_SUCCESS; ++causal)
            st = bench_length(dev, opt, report, lengths[i], causal);
    free(lengths);
    return st;
}
