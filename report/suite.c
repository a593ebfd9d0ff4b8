/* The standard suite: every op's report cases, each run on the op's fixture (with its peers,
 * CLBlast where it has the op), and the result rows they add. */
#define _GNU_SOURCE
#include "report_parts.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef TSR_HAVE_CLBLAST
#include <clblast_c.h>
#endif

/* A result row: the bench row plus what the roofline needs (work and bytes that must move). */
static tsr_status add_result(cJSON *results, const char *id, const char *op, const char *shape, const char *impl,
                             const bench_row *row, double flops, double bytes, double rel_err) {
    cJSON *r = cJSON_CreateObject();
    if (!r) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    cJSON_AddStringToObject(r, "case", id);
    cJSON_AddStringToObject(r, "op", op);
    cJSON_AddStringToObject(r, "shape", shape);
    cJSON_AddStringToObject(r, "impl", impl);
    cJSON_AddNumberToObject(r, "time_ms", row->time_ms);
    cJSON_AddNumberToObject(r, "time_min_ms", row->time_min_ms);
    cJSON_AddNumberToObject(r, "time_max_ms", row->time_max_ms);
    cJSON_AddNumberToObject(r, "runs", row->runs);
    cJSON_AddNumberToObject(r, "flops", flops);
    cJSON_AddNumberToObject(r, "bytes", bytes);
    cJSON_AddNumberToObject(r, "gflops", flops / (row->time_ms * 1e6));
    cJSON_AddNumberToObject(r, "gbps", bytes / (row->time_ms * 1e6));
    if (rel_err >= 0 && isfinite(rel_err)) cJSON_AddNumberToObject(r, "rel_err", rel_err);
    else cJSON_AddNullToObject(r, "rel_err"); /* none, or a check that failed (check_error says so) */
    cJSON_AddStringToObject(r, "timing", row->timing[0] ? row->timing : "host"); /* bench_time: wall clock */
    /* The row must read back as any other report's would: a time of 0 (an infinite rate) fails
     * the case here rather than the charts later. */
    char why[200];
    if (!report_valid_result(r, why, sizeof why)) {
        cJSON_Delete(r);
        return tsr_fail(TSR_ERR_OPENCL, "%s at %s: the measurement is unusable: %s", impl, shape, why);
    }
    cJSON_AddItemToArray(results, r);
    return TSR_SUCCESS;
}

static tsr_status check_error(const char *what, double rel_err, double tolerance) {
    if (rel_err <= tolerance) return TSR_SUCCESS;
    return tsr_fail(TSR_ERR_OPENCL, "%s: relative error %.3e against the double-precision reference exceeds %.0e", what,
                    rel_err, tolerance);
}

/* ---- the suite: every op's report cases, each run on the op's fixture ---- */

/* Something else that runs a fixture's problem on the same buffers, shown beside tessera's row:
 * CLBlast where it has the op, and GELU's copy kernel (the bandwidth yardstick). */
typedef struct report_peer {
    const char *op, *impl;
    bool library;    /* a peer library: only with peers on, and its failure is not tessera's */
    bool counts_op;  /* its row counts the op's FLOPs (the copy kernel's does not) */
    tsr_status (*run)(tsr_device *device, const char *shape, const cl_mem *buffers, cl_command_queue queue);
    /* NULL: the op's own check against the reference; else its own (rel_err, tolerance) */
    tsr_status (*check)(tsr_device *device, const char *shape, const cl_mem *buffers, double *rel_err,
                        double *tolerance);
} report_peer;

#ifdef TSR_HAVE_CLBLAST
/* CLBlast's GEMM on the fixture's buffers: SGEMM for fp32, HGEMM for f16 throughout where the
 * device has cl_khr_fp16 (HGEMM computes in half); anything else it cannot run is refused with
 * TSR_ERR_UNSUPPORTED and the reason (never SGEMM on 16-bit buffers). */
static tsr_status clblast_gemm(tsr_device *dev, const char *shape, const cl_mem *b, cl_command_queue q) {
    size_t m, n, k;
    char token[32] = "", extra[2];
    tsr_dtype in = TSR_F32, out = TSR_F32;
    int got = sscanf(shape, "%zux%zux%zu %31s %1s", &m, &n, &k, token, extra);
    /* a batched "BxMxNxK" leaves "xK" as the token: refused below */
    if (got < 3 || got > 4 || (got == 4 && !tsr_dtype_spec_parse(token, &in, &out)))
        return tsr_fail(TSR_ERR_UNSUPPORTED, "no CLBlast peer for gemm shape '%s'", shape);
    if (in == TSR_F32 && out == TSR_F32) {
        CLBlastStatusCode cs = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, n, k,
                                            1.0f, b[0], 0, k, b[1], 0, n, 0.0f, b[2], 0, n, &q, NULL);
        if (cs != CLBlastSuccess) return tsr_fail(TSR_ERR_OPENCL, "CLBlastSgemm failed with status %d", (int)cs);
        return TSR_SUCCESS;
    }
    if (in != TSR_F16 || out != TSR_F16)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "CLBlast has no GEMM for %s/%s storage (HGEMM is f16 throughout)",
                        tsr_dtype_str(in), tsr_dtype_str(out));
    if (!tsr_device_get_info(dev)->fp16)
        return tsr_fail(TSR_ERR_UNSUPPORTED,
                        "CLBlast's HGEMM cannot run on device '%s': it lacks cl_khr_fp16 (HGEMM computes in half)",
                        tsr_device_get_info(dev)->name);
    const cl_half one = 0x3c00, zero = 0;
    CLBlastStatusCode cs = CLBlastHgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, n, k, one,
                                        b[0], 0, k, b[1], 0, n, zero, b[2], 0, n, &q, NULL);
    if (cs != CLBlastSuccess) return tsr_fail(TSR_ERR_OPENCL, "CLBlastHgemm failed with status %d", (int)cs);
    return TSR_SUCCESS;
}

static tsr_status clblast_conv(tsr_device *dev, const char *shape, const cl_mem *b, cl_command_queue q) {
    size_t N, C, H, W, K, R, S, pad;
    char extra;
    (void)dev;
    /* A shape's last word may be its storage types ("... p1 f16"): CLBlastSconvgemm reads fp32 only. */
    const char *last = strrchr(shape, ' ');
    tsr_dtype in = TSR_F32, out = TSR_F32;
    if (last && tsr_dtype_spec_parse(last + 1, &in, &out) && (in != TSR_F32 || out != TSR_F32))
        return tsr_fail(TSR_ERR_UNSUPPORTED,
                        "CLBlastSconvgemm is fp32-only: no CLBlast peer for the 16-bit conv2d "
                        "shape '%s'",
                        shape);
    if (sscanf(shape, "%zux%zux%zux%zu k%zu %zux%zu p%zu%c", &N, &C, &H, &W, &K, &R, &S, &pad, &extra) != 8 || b[2])
        return tsr_fail(TSR_ERR_UNSUPPORTED, "no CLBlast peer for conv2d shape '%s'", shape);
    CLBlastStatusCode cs = CLBlastSconvgemm(CLBlastKernelModeCrossCorrelation, C, H, W, R, S, pad, pad, 1, 1, 1, 1, K,
                                            N, b[0], 0, b[1], 0, b[3], 0, &q, NULL);
    if (cs != CLBlastSuccess) return tsr_fail(TSR_ERR_OPENCL, "CLBlastSconvgemm failed with status %d", (int)cs);
    return TSR_SUCCESS;
}
#endif

/* GELU's copy kernel on the case's elements, with its storage types of x and y. */
static tsr_status copy_kernel(tsr_device *dev, const char *shape, const cl_mem *b, cl_command_queue q) {
    size_t n;
    int mode;
    tsr_dtype x_type, y_type;
    tsr_status st = tsr_gelu_shape_parse(shape, &n, &mode, &x_type, &y_type);
    return st == TSR_SUCCESS ? tsr_gelu_copy(dev, x_type, b[0], 0, y_type, b[1], 0, n, q, NULL) : st;
}

/* The copy must return its input exactly (rounded to y's type when that is another): sampled
 * elements, in GELU's metric. */
static tsr_status copy_check(tsr_device *dev, const char *shape, const cl_mem *b, double *rel_err, double *tolerance) {
    size_t n;
    int mode;
    tsr_dtype x_type, y_type;
    tsr_status st = tsr_gelu_shape_parse(shape, &n, &mode, &x_type, &y_type);
    if (st != TSR_SUCCESS) return st;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    st = x && y ? tsr_download_typed(dev, b[0], x_type, x, n) : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
    if (st == TSR_SUCCESS) st = tsr_download_typed(dev, b[1], y_type, y, n);
    double worst = 0;
    for (size_t i = 0; st == TSR_SUCCESS && i < n; i += 1 + n / 4096) {
        double expect = tsr_dtype_round(y_type, x[i]);
        double e = fabs((double)y[i] - expect) / fmax(1.0, fabs((double)x[i]));
        worst = isnan(e) ? INFINITY : fmax(worst, e);
    }
    free(x), free(y);
    *rel_err = worst;
    *tolerance = 0.0;
    return st;
}

static const report_peer peers[] = {
#ifdef TSR_HAVE_CLBLAST
    {"gemm", "clblast", true, true, clblast_gemm, NULL},
    {"conv2d", "clblast", true, true, clblast_conv, NULL},
#endif
    {"gelu", "copy-kernel", false, false, copy_kernel, copy_check},
};

typedef struct fixture_timing {
    tsr_device *dev;
    const tsr_op *op;
    void *fixture;
    const report_peer *peer; /* NULL: tessera */
    const char *shape;
    cl_mem buffers[8];
} fixture_timing;

static tsr_status run_fixture_once(void *vctx) {
    fixture_timing *f = vctx;
    cl_command_queue q = tsr_device_queue(f->dev);
    tsr_status st = f->peer ? f->peer->run(f->dev, f->shape, f->buffers, q)
                            : f->op->fixture.run(f->dev, f->fixture, NULL, q, NULL, NULL);
    if (st == TSR_SUCCESS) clFinish(q);
    return st;
}

/* One row: tessera's (peer NULL) or a peer's, timed, checked, appended; a tessera result or a
 * yardstick beyond its tolerance fails the case. */
static tsr_status measure_row(fixture_timing *f, const report_case *c, const char *shape, const report_options *opt,
                              cJSON *results) {
    const tsr_op *op = f->op;
    bench_row row = {0};
    /* memory-bound ops run short: more repetitions fit the budget */
    int max_runs = op->rate_unit && strcmp(op->rate_unit, "GB/s") == 0 ? 200 : 100;
    tsr_status st = bench_time(run_fixture_once, f, opt->budget_s, 3, max_runs, &row);
    if (st != TSR_SUCCESS) return st;
    double e = INFINITY, flops = 0, bytes = 0;
    double tolerance = op->fixture.tolerance ? op->fixture.tolerance(f->fixture) : op->tolerance;
    if (f->peer && f->peer->check) st = f->peer->check(f->dev, f->shape, f->buffers, &e, &tolerance);
    else st = op->fixture.check(f->dev, f->fixture, &e);
    if (st != TSR_SUCCESS) return st;
    op->fixture.work(f->fixture, &flops, &bytes);
    char impl[64] = "tessera";
    if (f->peer) snprintf(impl, sizeof impl, "%s", f->peer->impl);
    else if (op->fixture.impl) op->fixture.impl(f->dev, f->fixture, impl, sizeof impl);
    if ((st = add_result(results, c->id, c->op, shape, impl, &row, !f->peer || f->peer->counts_op ? flops : 0, bytes,
                         e)) != TSR_SUCCESS)
        return st;
    if (f->peer && f->peer->library) return TSR_SUCCESS;
    return check_error(f->peer ? f->peer->impl : op->name, e, tolerance);
}

/* The generic case: the op's fixture at `shape` (fixed inputs), tessera's row, then its peers. */
tsr_status report_run_case(tsr_device *dev, const report_case *c, const char *shape, const report_options *opt,
                           cJSON *results) {
    const tsr_op *op = tsr_find_op(c->op);
    if (!op || !op->fixture.setup) return tsr_fail(TSR_ERR_INVALID_ARG, "report case %s: op '%s' has no fixture", c->id, c->op);
    fixture_timing f = {.dev = dev, .op = op, .shape = shape};
    tsr_status st = op->fixture.setup(dev, shape, 42, &f.fixture);
    if (st != TSR_SUCCESS) return st;
    if (op->fixture.buffers) op->fixture.buffers(f.fixture, f.buffers, (int)(sizeof f.buffers / sizeof f.buffers[0]));
    st = measure_row(&f, c, shape, opt, results);
    for (size_t i = 0; st == TSR_SUCCESS && i < sizeof peers / sizeof peers[0]; ++i) {
        if (strcmp(peers[i].op, op->name) != 0 || (peers[i].library && !opt->peers)) continue;
        f.peer = &peers[i];
        st = measure_row(&f, c, shape, opt, results);
        if (st != TSR_SUCCESS && peers[i].library) st = TSR_SUCCESS; /* a peer that fails is not tessera's failure */
    }
    op->fixture.free(f.fixture);
    return st;
}

/* The standard suite: every op's report cases in table order (GEMM square and BERT, GELU 16M,
 * ResNet-50's 3x3 at 28x28, attention L = 2048 D = 64); simulated devices run their small shapes. */
#define SUITE_MAX 64
static report_case standard_suite[SUITE_MAX];
static size_t standard_count;
static pthread_once_t standard_once = PTHREAD_ONCE_INIT;

static void build_standard_suite(void) {
    for (const tsr_op *const *op = tsr_ops; *op; ++op)
        for (const tsr_report_shape *r = (*op)->report_shapes; r && r->id && standard_count < SUITE_MAX; ++r)
            standard_suite[standard_count++] =
                (report_case){r->id, (*op)->name, r->shape, r->simulator_shape, report_run_case};
}

const report_case *report_standard_suite(size_t *n) {
    pthread_once(&standard_once, build_standard_suite);
    *n = standard_count;
    return standard_suite;
}

