/* `tessera bench gemm`: tessera, CLBlast (its default parameters) and OpenBLAS
 * (CPU devices) on the same inputs, in one process and one run. With --dtype IN[/OUT] (16-bit
 * storage): tessera's 16-bit row timed in alternation with its fp32 row, and CLBlast's HGEMM
 * beside them where the device can run it (cl_khr_fp16, everything f16). */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TSR_HAVE_CLBLAST
#include <clblast_c.h>
#endif
#ifdef TSR_HAVE_OPENBLAS
#include <cblas.h>
#endif

typedef struct gemm_shape {
    size_t batch, m, n, k;
} gemm_shape;

#define GEMM_DIM_MAX 2147483647u /* OpenBLAS and CLBlast take int extents */

/* "1024", "512x768x3072" or "64@128x128x128", comma separated; every number from 1 to
 * GEMM_DIM_MAX, digits only (a sign or a wrapped value is refused). */
static tsr_status parse_shapes(const char *text, gemm_shape **out, size_t *count) {
    size_t cap = 1;
    for (const char *p = text; *p; ++p) cap += *p == ',';
    gemm_shape *s = calloc(cap, sizeof *s);
    if (!s) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    size_t n = 0;
    const char *p = text;
    while (*p) {
        uint64_t v[4] = {1, 0, 0, 0};
        int got = 0;
        bool ok = util_scan_uint(&p, GEMM_DIM_MAX, &v[1]) && v[1] > 0;
        if (ok && *p == '@') { /* that was the batch */
            ++p;
            v[0] = v[1];
            ok = util_scan_uint(&p, GEMM_DIM_MAX, &v[1]) && v[1] > 0;
        }
        got = 1;
        while (ok && *p == 'x' && got < 3) {
            ++p;
            ok = util_scan_uint(&p, GEMM_DIM_MAX, &v[1 + got]) && v[1 + got] > 0;
            ++got;
        }
        if (!ok || got == 2 || (v[0] != 1 && got != 3)) break;
        if (got == 1) v[2] = v[3] = v[1];
        s[n++] = (gemm_shape){v[0], v[1], v[2], v[3]};
        if (*p == ',' && p[1]) ++p;
        else if (*p) break;
    }
    if (*p || n == 0) {
        free(s);
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "--sizes: cannot read '%s' (use N, MxNxK or B@MxNxK, comma separated, each from 1 to %u)", p,
                        GEMM_DIM_MAX);
    }
    *out = s;
    *count = n;
    return TSR_SUCCESS;
}

/* Element counts of A, B and C, or a refusal naming the shape when they (or their bytes, for
 * the device and the host together) overflow or do not fit the device and the host. */
static tsr_status shape_sizes(tsr_device *dev, const gemm_shape *s, size_t *na, size_t *nb, size_t *nc) {
    char name[96];
    snprintf(name, sizeof name, "gemm %zu@%zux%zux%zu", s->batch, s->m, s->n, s->k);
    size_t a, b, c, bytes[3], total;
    tsr_status st;
    if ((st = tsr_size_mad(name, s->batch * s->m, s->k, 0, &a)) != TSR_SUCCESS || /* each below 2^31: pairs fit */
        (st = tsr_size_mad(name, s->batch * s->k, s->n, 0, &b)) != TSR_SUCCESS ||
        (st = tsr_size_mad(name, s->batch * s->m, s->n, 0, &c)) != TSR_SUCCESS ||
        (st = tsr_size_mad(name, a, sizeof(float), 0, &bytes[0])) != TSR_SUCCESS ||
        (st = tsr_size_mad(name, b, sizeof(float), 0, &bytes[1])) != TSR_SUCCESS ||
        (st = tsr_size_mad(name, c, sizeof(float), 0, &bytes[2])) != TSR_SUCCESS ||
        (st = tsr_size_mad(name, bytes[0], 1, bytes[1], &total)) != TSR_SUCCESS ||
        (st = tsr_size_mad(name, total, 1, bytes[2], &total)) != TSR_SUCCESS ||
        (st = util_check_memory(dev, name, bytes, 3, total)) != TSR_SUCCESS)
        return st;
    *na = a, *nb = b, *nc = c;
    return TSR_SUCCESS;
}

typedef struct gemm_run {
    tsr_device *dev;
    gemm_shape s;
    cl_mem a, b, c;
    float *ha, *hb;
    tsr_dtype in, out; /* storage of A and B, and of C */
} gemm_run;

static tsr_status run_tessera_typed(void *ctx) {
    gemm_run *r = ctx;
    const gemm_shape *s = &r->s;
    const tsr_matmul_desc desc = {.m = s->m,
                                  .n = s->n,
                                  .k = s->k,
                                  .batch = s->batch,
                                  .alpha = 1.0f,
                                  .a = {r->in, 0, s->k, s->m * s->k},
                                  .b = {r->in, 0, s->n, s->k * s->n},
                                  .c = {r->out, 0, s->n, s->m * s->n}};
    tsr_status st = tsr_matmul(r->dev, &desc, r->a, r->b, r->c, NULL, NULL);
    if (st == TSR_SUCCESS) clFinish(tsr_device_queue(r->dev));
    return st;
}

static tsr_status run_tessera(void *ctx) {
    gemm_run *r = ctx;
    const gemm_shape *s = &r->s;
    tsr_status st = tsr_sgemm_strided_batched(r->dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, s->m, s->n, s->k, 1.0f,
                                              r->a, 0, s->k, s->m * s->k, r->b, 0, s->n, s->k * s->n, 0.0f, r->c, 0,
                                              s->n, s->m * s->n, s->batch, NULL, NULL);
    if (st == TSR_SUCCESS) clFinish(tsr_device_queue(r->dev));
    return st;
}

#ifdef TSR_HAVE_CLBLAST
static tsr_status run_clblast(void *ctx) {
    gemm_run *r = ctx;
    const gemm_shape *s = &r->s;
    cl_command_queue q = tsr_device_queue(r->dev);
    CLBlastStatusCode cs;
    if (s->batch == 1)
        cs = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, s->m, s->n, s->k, 1.0f, r->a,
                          0, s->k, r->b, 0, s->n, 0.0f, r->c, 0, s->n, &q, NULL);
    else
        cs = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, s->m, s->n,
                                        s->k, 1.0f, r->a, 0, s->k, s->m * s->k, r->b, 0, s->n, s->k * s->n, 0.0f, r->c,
                                        0, s->n, s->m * s->n, s->batch, &q, NULL);
    if (cs != CLBlastSuccess) return tsr_fail(TSR_ERR_OPENCL, "CLBlast sgemm failed with status %d", (int)cs);
    clFinish(q);
    return TSR_SUCCESS;
}

/* CLBlast's HGEMM: fp16 storage and fp16 arithmetic, so only on devices with cl_khr_fp16. */
static tsr_status run_clblast_half(void *ctx) {
    gemm_run *r = ctx;
    const gemm_shape *s = &r->s;
    cl_command_queue q = tsr_device_queue(r->dev);
    const cl_half one = 0x3c00, zero = 0;
    CLBlastStatusCode cs;
    if (s->batch == 1)
        cs = CLBlastHgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, s->m, s->n, s->k, one, r->a, 0,
                          s->k, r->b, 0, s->n, zero, r->c, 0, s->n, &q, NULL);
    else
        cs = CLBlastHgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, s->m, s->n, s->k,
                                        one, r->a, 0, s->k, s->m * s->k, r->b, 0, s->n, s->k * s->n, zero, r->c, 0,
                                        s->n, s->m * s->n, s->batch, &q, NULL);
    if (cs != CLBlastSuccess) return tsr_fail(TSR_ERR_OPENCL, "CLBlast hgemm failed with status %d", (int)cs);
    clFinish(q);
    return TSR_SUCCESS;
}
#endif

/* bench_checked_run for an output stored in `type`: poisoned, run, read back widened to fp32. */
static tsr_status checked_run_typed(bench_fn fn, void *ctx, tsr_device *dev, cl_mem out, tsr_dtype type, float *host,
                                    size_t n) {
    for (size_t i = 0; i < n; ++i)
        host[i] = NAN;
    tsr_status st = tsr_upload_typed(dev, out, type, host, n);
    if (st == TSR_SUCCESS) st = fn(ctx);
    if (st == TSR_SUCCESS) st = tsr_download_typed(dev, out, type, host, n);
    return st;
}

#ifdef TSR_HAVE_OPENBLAS
typedef struct host_run {
    gemm_shape s;
    const float *a, *b;
    float *c;
} host_run;

static tsr_status run_openblas(void *ctx) {
    host_run *r = ctx;
    const gemm_shape *s = &r->s;
    for (size_t i = 0; i < s->batch; ++i)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s->m, (int)s->n, (int)s->k, 1.0f,
                    r->a + i * s->m * s->k, (int)s->k, r->b + i * s->k * s->n, (int)s->n, 0.0f,
                    r->c + i * s->m * s->n, (int)s->n);
    return TSR_SUCCESS;
}
#endif

double bench_gemm_error(size_t batch, size_t m, size_t n, size_t k, const float *a, const float *b, const float *c) {
    enum { PROBES = 2 };
    bool exact = (double)batch * m * n * k <= (double)(1 << 27);
    /* exact: one row of A B at a time (n values); else the probes and A (B t) for each */
    double *scratch = malloc((exact ? n : PROBES * n + PROBES * batch * m) * sizeof *scratch);
    if (!scratch) return NAN; /* unchecked: NaN fails every tolerance */
    double error;
    if (exact) {
        tsr_error_sum sum = {0, 0};
        for (size_t row = 0; row < batch * m; ++row) {
            size_t bi = row / m;
            tsr_gemm_reference(1, 1, n, k, a + row * k, b + bi * k * n, scratch);
            for (size_t j = 0; j < n; ++j) tsr_error_add(&sum, c[row * n + j], scratch[j]);
        }
        error = tsr_error_value(&sum);
    } else {
        double *probes = scratch, *reference = scratch + PROBES * n;
        uint64_t seed = 0x9E3779B97F4A7C15ull; /* the same probes every call */
        for (size_t j = 0; j < PROBES * n; ++j) probes[j] = tsr_random_float(&seed, -1.0f, 1.0f);
        error = tsr_gemm_probe_reference(batch, m, n, k, a, b, probes, PROBES, reference) == TSR_SUCCESS
                    ? tsr_gemm_probe_error(batch, m, n, c, probes, PROBES, reference)
                    : NAN;
    }
    free(scratch);
    return error;
}

static void shape_name(const gemm_shape *s, char *out, size_t size) {
    if (s->batch > 1) snprintf(out, size, "%zux%zux%zux%zu", s->batch, s->m, s->n, s->k);
    else snprintf(out, size, "%zux%zux%zu", s->m, s->n, s->k);
}

/* A row; in and out: the storage of A and B, and of C (a, b: the values as stored, widened). */
static tsr_status add_row_typed(bench_report *report, const gemm_shape *s, const char *impl, bench_row *row,
                                tsr_dtype in, tsr_dtype out, const float *a, const float *b, const float *c) {
    strcpy(row->op, "gemm");
    shape_name(s, row->shape, sizeof row->shape);
    tsr_strlcpy(row->impl, impl, sizeof row->impl);
    tsr_dtype_spec_format(in, out, row->dtype, sizeof row->dtype);
    row->gflops = 2.0 * s->batch * s->m * s->n * s->k / (row->time_ms * 1e6);
    row->gbps = (double)s->batch *
                ((double)tsr_dtype_size(in) * (s->m * s->k + s->k * s->n) + (double)tsr_dtype_size(out) * s->m * s->n) /
                (row->time_ms * 1e6);
    row->rel_err = bench_gemm_error(s->batch, s->m, s->n, s->k, a, b, c);
    return bench_add(report, row);
}

static tsr_status add_row(bench_report *report, const gemm_shape *s, const char *impl, bench_row *row, const float *a,
                          const float *b, const float *c) {
    return add_row_typed(report, s, impl, row, TSR_F32, TSR_F32, a, b, c);
}

#ifdef TSR_HAVE_CLBLAST
/* Hand CLBlast the Xgemm parameters its own tuner found ("GEMMK=0 MWG=64 ..."). */
static tsr_status clblast_override(tsr_device *dev, const char *params) {
    char buf[1024];
    if (strlen(params) >= sizeof buf) return tsr_fail(TSR_ERR_INVALID_ARG, "--clblast-xgemm: longer than %zu characters", sizeof buf - 1);
    tsr_strlcpy(buf, params, sizeof buf);
    const char *names[32];
    size_t values[32], n = 0;
    char *cursor = buf, *name, *value;
    while (tsr_next_pair(&cursor, " ,", &name, &value)) {
        if (!value || n == 32)
            return tsr_fail(TSR_ERR_INVALID_ARG, "--clblast-xgemm: cannot read '%s%s%s' (NAME=VALUE ...)", name,
                            value ? "=" : "", value ? value : "");
        const char *num = value;
        uint64_t v = 0;
        if (!util_scan_uint(&num, 1u << 20, &v) || *num)
            return tsr_fail(TSR_ERR_INVALID_ARG, "--clblast-xgemm: %s needs a whole number from 0 to 1048576", name);
        if (strcmp(name, "PRECISION") == 0) continue;
        names[n] = name;
        values[n++] = (size_t)v;
    }
    CLBlastStatusCode cs =
        CLBlastOverrideParameters(tsr_device_id(dev), "Xgemm", CLBlastPrecisionSingle, n, names, values);
    if (cs != CLBlastSuccess)
        return tsr_fail(TSR_ERR_INVALID_ARG, "CLBlastOverrideParameters(Xgemm) failed with status %d", (int)cs);
    return TSR_SUCCESS;
}
#endif

/* One shape with 16-bit storage: tessera's 16-bit row and its fp32 row, timed in alternation
 * (the ratio is the point: same machine, same moment), both written; CLBlast's HGEMM beside
 * them where the device has cl_khr_fp16 and everything is f16, else a line saying why not. */
static tsr_status typed_shape(tsr_device *dev, const bench_options *opt, bench_report *report, const gemm_shape *s,
                              size_t index, size_t na, size_t nb, size_t nc) {
    gemm_run r32 = {.dev = dev, .s = *s, .in = TSR_F32, .out = TSR_F32};
    gemm_run r16 = {.dev = dev, .s = *s, .in = opt->in_type, .out = opt->out_type};
    float *ha = malloc(na * 4), *hb = malloc(nb * 4), *hc = malloc(nc * 4);
    tsr_status st = TSR_SUCCESS;
    cl_int err = CL_SUCCESS;
    cl_context ctx = tsr_device_context(dev);
    char name[64], spec[32];
    shape_name(s, name, sizeof name);
    tsr_dtype_spec_format(r16.in, r16.out, spec, sizeof spec);
    if (!ha || !hb || !hc) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory for shape %zu", index);
        goto out;
    }
    uint64_t seed = 0x2545F4914F6CDD1Dull ^ index;
    /* the inputs as the 16-bit type holds them, so both rows multiply the same numbers */
    tsr_random_fill(ha, na, &seed, -0.5f, 0.5f);
    tsr_random_fill(hb, nb, &seed, -0.5f, 0.5f);
    tsr_dtype_round_array(r16.in, ha, na);
    tsr_dtype_round_array(r16.in, hb, nb);
    gemm_run *runs[2] = {&r32, &r16};
    size_t counts[3] = {na, nb, nc};
    for (int w = 0; w < 2 && err == CL_SUCCESS; ++w) {
        cl_mem *mems[3] = {&runs[w]->a, &runs[w]->b, &runs[w]->c};
        tsr_dtype types[3] = {runs[w]->in, runs[w]->in, runs[w]->out};
        for (int i = 0; i < 3 && err == CL_SUCCESS; ++i)
            *mems[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, counts[i] * tsr_dtype_size(types[i]), NULL, &err);
    }
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
        goto out;
    }
    if ((st = tsr_upload(dev, r32.a, ha, na)) != TSR_SUCCESS || (st = tsr_upload(dev, r32.b, hb, nb)) != TSR_SUCCESS ||
        (st = tsr_upload_typed(dev, r16.a, r16.in, ha, na)) != TSR_SUCCESS ||
        (st = tsr_upload_typed(dev, r16.b, r16.in, hb, nb)) != TSR_SUCCESS)
        goto out;
    bench_row row16 = {0}, row32 = {0};
    double ratio[3];
    if ((st = bench_time_paired(run_tessera_typed, &r16, run_tessera, &r32, opt->budget_s, 3, 400, &row16, &row32,
                                ratio)) != TSR_SUCCESS)
        goto out;
    if ((st = checked_run_typed(run_tessera, &r32, dev, r32.c, TSR_F32, hc, nc)) != TSR_SUCCESS ||
        (st = add_row(report, s, "tessera", &row32, ha, hb, hc)) != TSR_SUCCESS ||
        (st = checked_run_typed(run_tessera_typed, &r16, dev, r16.c, r16.out, hc, nc)) != TSR_SUCCESS ||
        (st = add_row_typed(report, s, "tessera", &row16, r16.in, r16.out, ha, hb, hc)) != TSR_SUCCESS)
        goto out;
    if (!opt->quiet) {
        printf("%-18s %10.3f %9.1f %9.1f %10.1e %10.1e   %s/fp32 %.2fx (paired median, %.2f-%.2f)\n", name,
               row16.time_ms, row16.gflops, row32.gflops, row16.rel_err, row32.rel_err, spec, 1.0 / ratio[0],
               1.0 / ratio[2], 1.0 / ratio[1]);
        fflush(stdout);
    }
    if (!opt->peers) goto out;
    const tsr_device_info *info = tsr_device_get_info(dev);
    bool all_f16 = r16.in == TSR_F16 && r16.out == TSR_F16;
#ifdef TSR_HAVE_CLBLAST
    if (all_f16 && info->fp16) {
        bench_row hrow = {0};
        if ((st = bench_time(run_clblast_half, &r16, opt->budget_s, 3, 50, &hrow)) != TSR_SUCCESS ||
            (st = checked_run_typed(run_clblast_half, &r16, dev, r16.c, TSR_F16, hc, nc)) != TSR_SUCCESS ||
            (st = add_row_typed(report, s, "clblast-hgemm", &hrow, TSR_F16, TSR_F16, ha, hb, hc)) != TSR_SUCCESS)
            goto out;
        if (!opt->quiet)
            printf("%-18s %10.3f %9.1f   CLBlast HGEMM, rel_err %.1e\n", name, hrow.time_ms, hrow.gflops, hrow.rel_err);
        goto out;
    }
#endif
    if (!opt->quiet && index == 0) {
        if (!all_f16)
            printf("CLBlast has no GEMM for %s storage (its HGEMM is f16 throughout): no peer row\n", spec);
        else if (!info->fp16)
            printf("CLBlast's HGEMM cannot run on this device: %s lacks cl_khr_fp16, and HGEMM computes in half "
                   "(tessera only stores in it, computing in fp32)\n",
                   info->name);
        else
            printf("CLBlast's HGEMM: this build has no CLBlast\n");
    }
out:
    for (int w = 0; w < 2; ++w) {
        if (runs[w]->a) clReleaseMemObject(runs[w]->a);
        if (runs[w]->b) clReleaseMemObject(runs[w]->b);
        if (runs[w]->c) clReleaseMemObject(runs[w]->c);
    }
    free(ha);
    free(hb);
    free(hc);
    return st;
}

tsr_status bench_gemm(tsr_device *dev, const bench_options *opt, bench_report *report) {
    gemm_shape *shapes = NULL;
    size_t nshapes = 0;
    tsr_status st = TSR_SUCCESS;
    const char *clblast_impl = "clblast";
    (void)clblast_impl; /* unused without CLBlast */
    if (opt->layers) return tsr_fail(TSR_ERR_INVALID_ARG, "--layers: only conv2d has layers");
    if (opt->max_unfused) return tsr_fail(TSR_ERR_INVALID_ARG, "--max-unfused: only attention has unfused pipelines");
    if (opt->clblast_xgemm) {
#ifdef TSR_HAVE_CLBLAST
        if ((st = clblast_override(dev, opt->clblast_xgemm)) != TSR_SUCCESS) return st;
        clblast_impl = "clblast-tuned";
#else
        return tsr_fail(TSR_ERR_UNSUPPORTED, "--clblast-xgemm: built without CLBlast");
#endif
    }
    if ((st = parse_shapes(opt->sizes, &shapes, &nshapes)) != TSR_SUCCESS) return st;
    /* Every shape checked before the first one runs. */
    for (size_t i = 0; i < nshapes && st == TSR_SUCCESS; ++i) {
        size_t na, nb, nc;
        st = shape_sizes(dev, &shapes[i], &na, &nb, &nc);
    }
    if (st != TSR_SUCCESS) {
        free(shapes);
        return st;
    }
    bool cpu = tsr_device_get_info(dev)->type == TSR_DEVICE_CPU;
    bool typed = opt->in_type != TSR_F32 || opt->out_type != TSR_F32;
    if (!opt->quiet && typed) {
        char spec[32];
        tsr_dtype_spec_format(opt->in_type, opt->out_type, spec, sizeof spec);
        printf("%-18s %10s %9s %9s %10s %10s   %s\n", "shape", "ms", spec, "fp32", "rel_err", "rel_err", "rate ratio");
        printf("%-18s %10s %9s %9s %10s %10s\n", "", spec, "GFLOP/s", "GFLOP/s", spec, "fp32");
    } else if (!opt->quiet) {
        printf("%-18s %10s %9s %9s %9s %11s %12s %10s\n", "shape", "tessera ms", "tessera", "clblast", "openblas",
               "tsr/clblast", "tsr/openblas", "rel_err");
        printf("%-18s %10s %9s %9s %9s %11s %12s %10s\n", "", "", "GFLOP/s", "GFLOP/s", "GFLOP/s", "", "", "tessera");
    }
    for (size_t i = 0; i < nshapes && st == TSR_SUCCESS; ++i) {
        const gemm_shape *s = &shapes[i];
        size_t na = 0, nb = 0, nc = 0;
        gemm_run r = {.dev = dev, .s = *s};
        float *ha = NULL, *hb = NULL, *hc = NULL;
        cl_int err = CL_SUCCESS;
        if ((st = shape_sizes(dev, s, &na, &nb, &nc)) != TSR_SUCCESS) goto next;
        if (typed) {
            st = typed_shape(dev, opt, report, s, i, na, nb, nc);
            goto next;
        }
        char why[256];
        if (!opt->sizes && bench_predicted_too_slow(report, "gemm", "tessera", 2.0 * s->batch * s->m * s->n * s->k, 3,
                                                    why, sizeof why)) {
            char name[64];
            shape_name(s, name, sizeof name);
            if (!opt->quiet) printf("%-18s %s\n", name, why);
            goto next;
        }
        ha = malloc(na * 4), hb = malloc(nb * 4), hc = malloc(nc * 4);
        if (!ha || !hb || !hc) {
            st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory for shape %zu", i);
            goto next;
        }
        uint64_t seed = 0x2545F4914F6CDD1Dull ^ i;
        tsr_random_fill(ha, na, &seed, -0.5f, 0.5f);
        tsr_random_fill(hb, nb, &seed, -0.5f, 0.5f);
        r.a = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, na * 4, ha, &err);
        if (err == CL_SUCCESS)
            r.b = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, nb * 4, hb, &err);
        if (err == CL_SUCCESS) r.c = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, nc * 4, NULL, &err);
        if (err != CL_SUCCESS) {
            st = tsr_fail_cl(err, "clCreateBuffer", __FILE__, __LINE__);
            goto next;
        }
        double gf[3] = {0, 0, 0};
        bench_row row = {0};
        if ((st = bench_time(run_tessera, &r, opt->budget_s, 3, 50, &row)) != TSR_SUCCESS) goto next;
        if ((st = bench_checked_run(run_tessera, &r, dev, r.c, hc, nc)) != TSR_SUCCESS) goto next;
        if ((st = add_row(report, s, "tessera", &row, ha, hb, hc)) != TSR_SUCCESS) goto next;
        gf[0] = row.gflops;
        double err_tsr = row.rel_err;
#ifdef TSR_HAVE_CLBLAST
        if (opt->peers) {
            bench_row crow = {0};
            if ((st = bench_time(run_clblast, &r, opt->budget_s, 3, 50, &crow)) != TSR_SUCCESS) goto next;
            if ((st = bench_checked_run(run_clblast, &r, dev, r.c, hc, nc)) != TSR_SUCCESS) goto next;
            if ((st = add_row(report, s, clblast_impl, &crow, ha, hb, hc)) != TSR_SUCCESS) goto next;
            gf[1] = crow.gflops;
        }
#endif
#ifdef TSR_HAVE_OPENBLAS
        if (opt->peers && cpu) {
            host_run hr = {.s = *s, .a = ha, .b = hb, .c = hc};
            bench_row orow = {0};
            if ((st = bench_time(run_openblas, &hr, opt->budget_s, 3, 50, &orow)) != TSR_SUCCESS) goto next;
            if ((st = bench_checked_run(run_openblas, &hr, dev, NULL, hc, nc)) != TSR_SUCCESS) goto next;
            if ((st = add_row(report, s, "openblas", &orow, ha, hb, hc)) != TSR_SUCCESS) goto next;
            gf[2] = orow.gflops;
            bench_settle_host_threads();
        }
#endif
        (void)cpu;
        if (!opt->quiet) {
            char name[64], c1[16] = "-", c2[16] = "-", r1[16] = "-", r2[16] = "-";
            shape_name(s, name, sizeof name);
            if (gf[1] > 0) snprintf(c1, sizeof c1, "%.1f", gf[1]), snprintf(r1, sizeof r1, "%.2fx", gf[0] / gf[1]);
            if (gf[2] > 0) snprintf(c2, sizeof c2, "%.1f", gf[2]), snprintf(r2, sizeof r2, "%.2f", gf[0] / gf[2]);
            printf("%-18s %10.3f %9.1f %9s %9s %11s %12s %10.1e\n", name, row.time_ms, gf[0], c1, c2, r1, r2, err_tsr);
            fflush(stdout);
        }
    next:
        if (r.a) clReleaseMemObject(r.a);
        if (r.b) clReleaseMemObject(r.b);
        if (r.c) clReleaseMemObject(r.c);
        free(ha);
        free(hb);
        free(hc);
    }
    free(shapes);
    return st;
}
