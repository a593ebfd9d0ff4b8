/* `tessera report`: every selected device's measured peaks, a budgeted tune where nothing is
 * tuned for it yet, and a suite of ops at standard shapes (with CLBlast alongside where it has
 * the op), written as report.json, report.md and SVG charts; `--merge` combines reports made on
 * different machines. The report lives as one JSON tree: a fresh run and a merge render the
 * same way. */
#define _GNU_SOURCE
#include "report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef TSR_HAVE_CLBLAST
#include <clblast_c.h>
#endif

extern char **environ;

#define REPORT_FORMAT "tessera-report"
#define REPORT_SCHEMA 1
#define TOLERANCE 1e-5

static void attach_comparison(cJSON *root);
static bool valid_result(const cJSON *r, char *why, size_t size);
static bool validate_report(const cJSON *root, char *why, size_t size);

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
    if (!valid_result(r, why, sizeof why)) {
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
static tsr_status run_case(tsr_device *dev, const report_case *c, const char *shape, const report_options *opt,
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
                (report_case){r->id, (*op)->name, r->shape, r->simulator_shape, run_case};
}

const report_case *report_standard_suite(size_t *n) {
    pthread_once(&standard_once, build_standard_suite);
    *n = standard_count;
    return standard_suite;
}

/* ---- running a report ---- */

static void now_iso(char *out, size_t size) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

cJSON *report_new(const char *created) {
    char now[32];
    if (!created) now_iso(now, sizeof now), created = now;
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "format", REPORT_FORMAT);
    cJSON_AddNumberToObject(root, "schema_version", REPORT_SCHEMA);
    cJSON_AddStringToObject(root, "tessera_version", TSR_VERSION_STRING);
    cJSON_AddStringToObject(root, "created", created);
    cJSON_AddArrayToObject(root, "devices");
    if (!cJSON_AddArrayToObject(root, "notes")) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* A device that could not be used at all: "skipped" with the reason. */
static void skip_device(cJSON *entry, const char *what, tsr_status status) {
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "status", cJSON_CreateString("skipped"));
    char msg[1200];
    snprintf(msg, sizeof msg, "%s: %s: %s", what, tsr_status_str(status), tsr_last_error());
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "error", cJSON_CreateString(msg));
}

/* One part of a device's run that failed or did not run ("peaks", or a case at its shape): listed
 * in the device's "failures"; the rest of the device's run goes on. */
static void add_failure(cJSON *entry, const char *part, const char *op, const char *shape, const char *error) {
    cJSON *failures = cJSON_GetObjectItemCaseSensitive(entry, "failures");
    if (!failures) failures = cJSON_AddArrayToObject(entry, "failures");
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "case", part);
    if (op) cJSON_AddStringToObject(f, "op", op);
    if (shape) cJSON_AddStringToObject(f, "shape", shape);
    cJSON_AddStringToObject(f, "error", error);
    cJSON_AddItemToArray(failures, f);
}

static void add_failed_status(cJSON *entry, const char *part, const char *op, const char *shape, tsr_status status) {
    char msg[1200];
    snprintf(msg, sizeof msg, "%s: %s", tsr_status_str(status), tsr_last_error());
    add_failure(entry, part, op, shape, msg);
}

static void step(const report_options *opt) {
    if (opt->progress) opt->progress(opt->progress_user);
}

static void tune_step(const tsr_tune_progress *progress, void *user) {
    (void)progress;
    step(user);
}

/* Tune the device when neither the user's database nor tessera's built-in one has an entry for
 * it (any driver); say what was done. */
static void maybe_tune(tsr_device *dev, const report_options *opt, bool simulator, cJSON *entry) {
    char text[256];
    size_t entries = tsr_tuning_entries_for_device(dev);
    if (simulator) {
        snprintf(text, sizeof text, "not tuned: a simulator");
    } else if (entries) {
        snprintf(text, sizeof text, "%zu tuned entries for this device in the database or built in", entries);
    } else if (opt->tune_budget_s <= 0) {
        snprintf(text, sizeof text, "nothing tuned for this device; tuning skipped (--tune-budget 0): built-in defaults");
    } else {
        int nops = 0;
        for (const char *const *o = tsr_op_names(); *o; ++o) ++nops;
        tsr_tune_options to = {.budget_seconds = opt->tune_budget_s / nops,
                               .progress = opt->progress ? tune_step : NULL,
                               .user = (void *)opt};
        int ok = 0;
        for (const char *const *o = tsr_op_names(); *o; ++o) {
            if (!opt->quiet) fprintf(stderr, "report: tuning %s on %s (%.0f s)\n", *o, tsr_device_get_info(dev)->name, to.budget_seconds);
            size_t n = 0;
            ok += tsr_tune(dev, *o, &to, NULL, 0, &n) == TSR_SUCCESS;
        }
        snprintf(text, sizeof text, "tuned now: %d of %d ops in %.0f s (nothing was tuned for this device)", ok, nops,
                 opt->tune_budget_s);
    }
    cJSON_AddStringToObject(entry, "tuning", text);
}

/* Where each op's configuration comes from on this device, per class ("configs": op -> class ->
 * state): "tuned" (the database or built in, this device or a matching one), "override", "default"
 * (never tuned), or "default-stale": tuned entries exist, but every one for a kernel source that
 * has changed since, so the class runs the built-in default until it is re-tuned. */
static void record_configs(tsr_device *dev, cJSON *entry) {
    cJSON *configs = cJSON_AddObjectToObject(entry, "configs");
    for (const char *const *op = tsr_op_names(); *op; ++op) {
        cJSON *classes = cJSON_AddObjectToObject(configs, *op);
        for (const char *const *cls = tsr_op_classes(*op); *cls; ++cls) {
            tsr_config_info ci;
            if (tsr_config_lookup(dev, *op, *cls, &ci) != TSR_SUCCESS) {
                tsr_clear_error(); /* the suite's own rows report what fails */
                continue;
            }
            const char *state = ci.source == TSR_CONFIG_BUILTIN_DEFAULT
                                    ? (ci.stale_passed_over > 0 ? "default-stale" : "default")
                                : ci.source == TSR_CONFIG_ENV_OVERRIDE || ci.source == TSR_CONFIG_API_OVERRIDE
                                    ? "override"
                                    : "tuned";
            cJSON_AddStringToObject(classes, *cls, state);
        }
    }
}

/* A rate this far above the device's measured roof is a measurement error, not a result: the
 * roof and the row are measured minutes apart on a machine whose load moves rows by up to 20%
 * (bench.h), so 1.25 leaves room for that and for a peak test that misses a little; any driver
 * clock that runs slow or stops (rusticl's timestamps) is off by far more. Rows with FLOPs are
 * checked against the fp32 roof, rows without (copies) against the bandwidth roof: a row with
 * FLOPs may rightly beat the memory roof from cache. */
#define ROOF_MARGIN 1.25
/* Where the measured value is no roof, only orders of magnitude are an error (what a clock that
 * stands still produces): the reduced peak set (one width and layout: a floor that a good kernel
 * may beat several times over), and a copy whose bytes are fewer than the bandwidth test's
 * buffers (it may run from cache, at several times the memory's rate: a 1M-float copy moved
 * 42 GB/s on PoCL against a 21 GB/s roof measured on 128 MiB). */
#define LOOSE_ROOF_MARGIN 100.0

static void check_roofs(cJSON *entry) {
    const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(entry, "peaks");
    bool reduced = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(peaks, "reduced"));
    double compute = bench_json_num(peaks, "compute_gflops"), bandwidth = bench_json_num(peaks, "bandwidth_gbps");
    double peak_buffer = bench_json_num(peaks, "buffer_bytes");
    cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(entry, "results")) {
        bool flops = bench_json_num(row, "flops") > 0;
        double rate = bench_json_num(row, flops ? "gflops" : "gbps"), roof = flops ? compute : bandwidth;
        bool from_cache = !flops && bench_json_num(row, "bytes") < peak_buffer;
        double margin = reduced || from_cache ? LOOSE_ROOF_MARGIN : ROOF_MARGIN;
        if (!(roof > 0) || rate <= margin * roof) continue;
        char msg[256];
        snprintf(msg, sizeof msg, "measurement error: %.4g %s is above the measured roof (%.4g %s, with a %.4gx margin%s)",
                 rate, flops ? "GFLOP/s" : "GB/s", roof, flops ? "GFLOP/s" : "GB/s", margin,
                 reduced ? " for the reduced peak set" : from_cache ? " for a copy that may run from cache" : "");
        cJSON_AddStringToObject(row, "error", msg);
        cJSON_ReplaceItemInObjectCaseSensitive(row, "gflops", cJSON_CreateNumber(0)); /* never shown as a rate */
        cJSON_ReplaceItemInObjectCaseSensitive(row, "gbps", cJSON_CreateNumber(0));
    }
}

/* Quick shapes, by case id: the same on every device (so devices compare), a few to tens of
 * milliseconds per run on a 2-core CPU device, small enough for a slow implementation (llvmpipe
 * runs GEMM at well under 1 GFLOP/s with a configuration that compiles in reasonable time). */
static const struct {
    const char *id, *shape;
} quick_shapes[] = {
    {"gemm-square", "256x256x256"},
    {"gemm-bert", "128x768x192"},
    {"gelu-16M", "1048576"},
    {"gelu-f16", "1048576 f16"},
    {"conv-resnet50-3x3", "1x32x28x28 k32 3x3 p1"},
    {"conv-resnet50-3x3-f16", "1x32x28x28 k32 3x3 p1 f16"},
    {"attention-2048", "B1 H2 L256 D64"},
};

const char *report_quick_shape(const report_case *c) {
    for (size_t i = 0; i < sizeof quick_shapes / sizeof quick_shapes[0]; ++i)
        if (strcmp(quick_shapes[i].id, c->id) == 0) return quick_shapes[i].shape;
    return c->simulator_shape;
}

/* A device's status from what ran: "ok", "partial" (some part failed or did not run: listed in
 * "failures", summarized in "error"), or "skipped" (nothing was measured). */
static void settle_status(cJSON *entry) {
    const cJSON *failures = cJSON_GetObjectItemCaseSensitive(entry, "failures");
    int nfail = cJSON_GetArraySize(failures);
    if (nfail == 0) return;
    bool measured = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(entry, "results")) > 0 ||
                    cJSON_GetObjectItemCaseSensitive(entry, "peaks");
    const cJSON *first = cJSON_GetArrayItem(failures, 0);
    char msg[1400];
    if (measured)
        snprintf(msg, sizeof msg, "%d part%s failed or not run (first: %s: %s)", nfail, nfail == 1 ? "" : "s",
                 bench_json_text(first, "case"), bench_json_text(first, "error"));
    else
        snprintf(msg, sizeof msg, "nothing could be measured (first: %s: %s)", bench_json_text(first, "case"),
                 bench_json_text(first, "error"));
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "status", cJSON_CreateString(measured ? "partial" : "skipped"));
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "error", cJSON_CreateString(msg));
}

static tsr_status run_device(tsr_device *dev, const report_options *opt, cJSON *entry) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    bool sim = bench_is_simulator(info);
    double started = bench_now_s();
    cJSON_AddBoolToObject(entry, "simulator", sim);
    if (!opt->quiet) fprintf(stderr, "report: %s (%s)%s\n", info->name, info->platform_name, sim ? ", simulated" : "");
    peak_options po = opt->peak;
    po.simulator = sim;
    po.quiet = opt->quiet;
    po.progress = opt->progress;
    po.progress_user = opt->progress_user;
    if (sim) po.budget_s = 0.0; /* three runs: simulated time says nothing */
    peak_result pr;
    tsr_clear_diagnostics();
    tsr_status st = peak_measure(dev, &po, &pr);
    /* without peaks there is no roofline, but the suite's rows still say how fast each op runs */
    cJSON *peaks = st == TSR_SUCCESS ? peak_to_json(&pr) : NULL;
    if (st == TSR_SUCCESS && !peaks) st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == TSR_SUCCESS) st = peak_from_json(peaks, &pr); /* they must read back as any report's would */
    if (st == TSR_SUCCESS) cJSON_AddItemToObject(entry, "peaks", peaks);
    else cJSON_Delete(peaks), add_failed_status(entry, "peaks", NULL, NULL, st);
    step(opt);
    maybe_tune(dev, opt, sim, entry);
    record_configs(dev, entry);
    cJSON *results = cJSON_AddArrayToObject(entry, "results");
    size_t n = opt->nsuite;
    const report_case *suite = opt->suite ? opt->suite : report_standard_suite(&n);
    report_options local = *opt;
    if (sim) local.peers = false, local.budget_s = 0.0; /* three runs each: simulated time says nothing */
    for (size_t i = 0; i < n; ++i) {
        const char *shape = sim ? suite[i].simulator_shape : opt->quick ? report_quick_shape(&suite[i]) : suite[i].shape;
        double spent = bench_now_s() - started;
        if (opt->device_budget_s > 0 && spent >= opt->device_budget_s) {
            char why[160];
            snprintf(why, sizeof why, "not run: %.0f s of the device's %.0f s budget (--device-budget) were spent", spent,
                     opt->device_budget_s);
            add_failure(entry, suite[i].id, suite[i].op, shape, why);
            continue;
        }
        step(opt);
        if (!opt->quiet) fprintf(stderr, "report:   %s %s\n", suite[i].id, shape);
        tsr_clear_diagnostics();
        tsr_status (*run)(tsr_device *, const report_case *, const char *, const report_options *, cJSON *) =
            suite[i].run ? suite[i].run : run_case;
        st = run(dev, &suite[i], shape, &local, results);
        if (st != TSR_SUCCESS) { /* this case only: the next one may well run */
            if (!opt->quiet) fprintf(stderr, "report:   %s failed: %s\n", suite[i].id, tsr_last_error());
            add_failed_status(entry, suite[i].id, suite[i].op, shape, st);
        }
    }
    check_roofs(entry);
    cJSON_AddNumberToObject(entry, "seconds", bench_now_s() - started);
    settle_status(entry);
    return TSR_SUCCESS;
}

tsr_status report_run(const char *const *selectors, size_t nselectors, const report_options *opt, cJSON **out) {
    *out = NULL;
    tsr_device_info *infos = NULL;
    size_t count = 0;
    tsr_status st = tsr_discover(&infos, &count);
    if (st != TSR_SUCCESS) return st;
    char created[32], host[256] = "";
    now_iso(created, sizeof created);
    gethostname(host, sizeof host - 1);
    cJSON *root = report_new(created);
    if (!root) {
        tsr_free(infos);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    }
    cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    /* The selected devices, in discovery order, each once. */
    size_t nsel = selectors ? nselectors : count;
    for (size_t s = 0; s < nsel; ++s) {
        char sel[32];
        if (!selectors) snprintf(sel, sizeof sel, "%d:%d", infos[s].platform_index, infos[s].device_index);
        const char *selector = selectors ? selectors[s] : sel;
        step(opt);
        tsr_device *dev = NULL;
        cJSON *entry = cJSON_CreateObject();
        cJSON_AddStringToObject(entry, "selector", selector);
        cJSON_AddStringToObject(entry, "host", host);
        cJSON_AddStringToObject(entry, "created", created);
        cJSON_AddStringToObject(entry, "status", "ok");
        cJSON_AddStringToObject(entry, "error", "");
        tsr_status ost = tsr_device_open(selector, &dev);
        if (ost != TSR_SUCCESS) {
            cJSON_AddStringToObject(entry, "fingerprint", "");
            /* what discovery knows of it names it in the report (by selector alone otherwise) */
            if (!selectors) cJSON_AddItemToObject(entry, "info", tsr_device_info_to_json(&infos[s]));
            if (!opt->quiet) fprintf(stderr, "report: %s skipped: %s\n", selector, tsr_last_error());
            skip_device(entry, "open", ost);
            cJSON_AddItemToArray(devices, entry);
            continue;
        }
        cJSON_AddStringToObject(entry, "fingerprint", tsr_device_fingerprint(dev));
        cJSON_AddItemToObject(entry, "info", tsr_device_info_to_json(tsr_device_get_info(dev)));
        cJSON_AddItemToArray(devices, entry);
        run_device(dev, opt, entry);
        tsr_device_close(dev);
    }
    tsr_free(infos);
    attach_comparison(root);
    *out = root;
    return TSR_SUCCESS;
}

/* ---- derived numbers: roofline and peers ---- */


/* The roofline's attainable GFLOP/s at an intensity (FLOP per byte), 0 without peaks. */
static double attainable(const cJSON *device, double intensity) {
    const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(device, "peaks");
    double bw = bench_json_num(peaks, "bandwidth_gbps"), fl = bench_json_num(peaks, "compute_gflops");
    if (bw <= 0 || fl <= 0) return 0;
    return fmin(fl, bw * intensity);
}

/* Fraction of the roofline a row reaches (memory-bound rows without FLOPs: of the bandwidth). */
static double roofline_fraction(const cJSON *device, const cJSON *row) {
    double flops = bench_json_num(row, "flops"), bytes = bench_json_num(row, "bytes");
    if (bytes <= 0) return 0;
    if (flops <= 0) {
        double bw = bench_json_num(cJSON_GetObjectItemCaseSensitive(device, "peaks"), "bandwidth_gbps");
        return bw > 0 ? bench_json_num(row, "gbps") / bw : 0;
    }
    double roof = attainable(device, flops / bytes);
    return roof > 0 ? bench_json_num(row, "gflops") / roof : 0;
}

size_t report_failed_devices(const cJSON *root) {
    size_t n = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "devices")) n += strcmp(bench_json_text(d, "status"), "ok") != 0;
    return n;
}

/* ---- the devices side by side ---- */

static const char *device_name(const cJSON *d);
static const char *op_unit(const cJSON *row);
static double op_rate(const cJSON *row);

/* A row's implementation family: tessera's rows compare across devices whatever path each took
 * ("tessera(im2col)" on one, "tessera(direct)" on another); a peer's by its name. */
static const char *impl_family(const char *impl) { return strncmp(impl, "tessera", 7) == 0 ? "tessera" : impl; }

/* (case, shape, family) as one index key, each part with its length so no two triples collide. */
static char *comparison_key(const char *id, const char *shape, const char *family, size_t *len) {
    size_t a = strlen(id), b = strlen(shape), c = strlen(family);
    char *key = malloc(a + b + c + 64);
    if (!key) return NULL;
    int n = snprintf(key, 64, "%zu:%zu:", a, b);
    memcpy(key + n, id, a);
    memcpy(key + n + a, shape, b);
    memcpy(key + n + a + b, family, c);
    *len = (size_t)n + a + b + c;
    return key;
}

static bool is_cpu(const cJSON *d) {
    const char *type = bench_json_text(cJSON_GetObjectItemCaseSensitive(d, "info"), "type");
    return tsr_contains_nocase(type, "cpu");
}

/* The comparison row of (case, shape, family), made with an empty entry per participant. */
static cJSON *comparison_row(bench_index *ix, cJSON *rows, const char *id, const char *op, const char *shape,
                             const char *family, int participants) {
    size_t len = 0;
    char *key = comparison_key(id, shape, family, &len);
    bool found = false;
    void **slot = key ? bench_index_get(ix, key, len, &found) : NULL;
    free(key);
    if (!slot) return NULL;
    if (found) return *slot;
    cJSON *row = cJSON_CreateObject();
    cJSON_AddStringToObject(row, "case", id);
    if (op) cJSON_AddStringToObject(row, "op", op);
    cJSON_AddStringToObject(row, "shape", shape);
    cJSON_AddStringToObject(row, "impl", family);
    cJSON *entries = cJSON_AddArrayToObject(row, "entries");
    for (int i = 0; i < participants; ++i) cJSON_AddItemToArray(entries, cJSON_CreateNull());
    cJSON_AddItemToArray(rows, row);
    *slot = row;
    return row;
}

/* Sets the participant's entry if it is still empty (a device's first row of a key counts). */
static void set_entry(cJSON *row, int participant, cJSON *entry) {
    cJSON *entries = cJSON_GetObjectItemCaseSensitive(row, "entries");
    if (cJSON_IsNull(cJSON_GetArrayItem(entries, participant))) cJSON_ReplaceItemInArray(entries, participant, entry);
    else cJSON_Delete(entry);
}

cJSON *report_compare(const cJSON *root) {
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices"), *d, *r;
    /* participants: devices with a result or a failed case; the baseline: the first with a result */
    int ndev = cJSON_GetArraySize(devices), nparts = 0, baseline = -1;
    bool baseline_sim = false;
    int *part_of = calloc(ndev ? (size_t)ndev : 1, sizeof *part_of);
    if (!part_of) return NULL;
    int di = 0;
    cJSON_ArrayForEach(d, devices) {
        bool results = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "results")) > 0, failed_case = false;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "failures")) failed_case |= strcmp(bench_json_text(r, "case"), "peaks") != 0;
        part_of[di] = results || failed_case ? nparts++ : -1;
        /* a simulator's times say nothing about hardware: the baseline only where all are */
        bool sim = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "simulator"));
        if (results && (baseline < 0 || (baseline_sim && !sim))) baseline = di, baseline_sim = sim;
        ++di;
    }
    if (nparts < 2 || baseline < 0) {
        free(part_of);
        return NULL;
    }
    cJSON *cmp = cJSON_CreateObject();
    cJSON_AddNumberToObject(cmp, "baseline", baseline);
    cJSON_AddStringToObject(cmp, "ratio", "the baseline's median time over the device's, at the same case, shape and "
                                          "implementation: above 1 is faster than the baseline");
    cJSON *parts = cJSON_AddArrayToObject(cmp, "devices");
    cJSON *rows = cJSON_AddArrayToObject(cmp, "rows");
    const cJSON *base = cJSON_GetArrayItem(devices, baseline);
    bench_index ix = {0};
    bool oom = false;
    di = 0;
    cJSON_ArrayForEach(d, devices) {
        int p = part_of[di];
        if (p < 0) {
            ++di;
            continue;
        }
        cJSON *pd = cJSON_CreateObject();
        cJSON_AddNumberToObject(pd, "device", di);
        cJSON_AddStringToObject(pd, "name", device_name(d));
        cJSON_AddStringToObject(pd, "platform", bench_json_text(cJSON_GetObjectItemCaseSensitive(d, "info"), "platform_name"));
        cJSON_AddStringToObject(pd, "host", bench_json_text(d, "host"));
        /* Same hardware only where it is certain: CPU devices on one host run on that host's
         * processor. Identical names on one host may be two cards, so GPUs are never assumed. */
        bool same = di != baseline && is_cpu(d) && is_cpu(base) && *bench_json_text(d, "host") &&
                    strcmp(bench_json_text(d, "host"), bench_json_text(base, "host")) == 0;
        if (di != baseline) cJSON_AddBoolToObject(pd, "same_hardware_as_baseline", same);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "simulator"))) cJSON_AddTrueToObject(pd, "simulator");
        cJSON_AddItemToArray(parts, pd);
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "results")) {
            const char *impl = bench_json_text(r, "impl");
            cJSON *row = comparison_row(&ix, rows, bench_json_text(r, "case"), cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "op")),
                                        bench_json_text(r, "shape"), impl_family(impl), nparts);
            if (!row) {
                oom = true;
                break;
            }
            if (!cJSON_GetObjectItemCaseSensitive(row, "unit")) cJSON_AddStringToObject(row, "unit", op_unit(r));
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "device", di);
            cJSON_AddStringToObject(e, "impl", impl);
            cJSON_AddNumberToObject(e, "time_ms", bench_json_num(r, "time_ms"));
            cJSON_AddNumberToObject(e, "rate", op_rate(r));
            const cJSON *timing = cJSON_GetObjectItemCaseSensitive(r, "timing");
            if (cJSON_IsString(timing)) cJSON_AddStringToObject(e, "timing", timing->valuestring);
            set_entry(row, p, e);
        }
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "failures")) {
            if (oom || strcmp(bench_json_text(r, "case"), "peaks") == 0) continue;
            cJSON *row = comparison_row(&ix, rows, bench_json_text(r, "case"), cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "op")),
                                        bench_json_text(r, "shape"), "tessera", nparts);
            if (!row) {
                oom = true;
                break;
            }
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "device", di);
            cJSON_AddStringToObject(e, "error", bench_json_text(r, "error"));
            set_entry(row, p, e);
        }
        ++di;
    }
    bench_index_free(&ix);
    /* Rows at least two devices have; each measured entry's ratio to the baseline's. */
    int bp = part_of[baseline];
    free(part_of);
    cJSON *row = rows->child;
    while (row) {
        cJSON *next = row->next, *entries = cJSON_GetObjectItemCaseSensitive(row, "entries"), *e;
        int present = 0;
        cJSON_ArrayForEach(e, entries) present += !cJSON_IsNull(e);
        if (present < 2) {
            cJSON_Delete(cJSON_DetachItemViaPointer(rows, row));
        } else {
            double base_ms = bench_json_num(cJSON_GetArrayItem(entries, bp), "time_ms");
            cJSON_ArrayForEach(e, entries) {
                double ms = bench_json_num(e, "time_ms");
                if (cJSON_IsObject(e) && base_ms > 0 && ms > 0) cJSON_AddNumberToObject(e, "ratio", base_ms / ms);
            }
        }
        row = next;
    }
    if (oom || cJSON_GetArraySize(rows) == 0) {
        cJSON_Delete(cmp);
        return NULL;
    }
    return cmp;
}

/* root["comparison"], replaced by a fresh one (or removed where there is nothing to compare). */
static void attach_comparison(cJSON *root) {
    cJSON_DeleteItemFromObjectCaseSensitive(root, "comparison");
    cJSON *cmp = report_compare(root);
    if (cmp) cJSON_AddItemToObject(root, "comparison", cmp);
}

/* ---- validation, loading and merging ---- */

/* A device's "mpi" record (`report --mpi`): which rank of which run measured it. */
static bool valid_mpi_record(const cJSON *mpi) {
    const cJSON *rank = cJSON_GetObjectItemCaseSensitive(mpi, "rank"),
                *ranks = cJSON_GetObjectItemCaseSensitive(mpi, "ranks");
    if (!cJSON_IsObject(mpi) || !cJSON_IsNumber(rank) || !cJSON_IsNumber(ranks) ||
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(mpi, "run")))
        return false;
    double r = rank->valuedouble, n = ranks->valuedouble;
    return r >= 0 && r < n && n <= 1e7 && r == floor(r) && n == floor(n);
}

/* Bounds on the numbers of a report from elsewhere (cJSON reads 1e999 as infinity and 1e-999 as
 * 0): generous for any real device, narrow enough that every rate, ratio and chart range derived
 * from them (a time over a time, a rate over a roof, FLOPs over bytes) is finite. */
#define REPORT_MAX_RATE 1e12  /* GFLOP/s or GB/s (a zettaflop) */
#define REPORT_MIN_MS 1e-9    /* milliseconds (a picosecond) */
#define REPORT_MAX_MS 1e12    /* milliseconds (about 30 years) */
#define REPORT_MAX_WORK 1e30  /* FLOPs or bytes of one run */
#define REPORT_MAX_COUNT 1e9  /* repetitions */
#define REPORT_MAX_SECONDS 1e9

enum { NUM_REQUIRED = 1, NUM_INTEGER = 2, NUM_ZERO = 4 /* 0 too, besides [lo, hi] */ };

/* The number `key` of `o`: absent (unless NUM_REQUIRED), or finite and in [lo, hi] (or 0 with
 * NUM_ZERO), integral with NUM_INTEGER. False with the field and the rule in why. */
static bool report_number(const cJSON *o, const char *key, unsigned rules, double lo, double hi, char *why,
                          size_t size) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        if (!(rules & NUM_REQUIRED)) return true;
        return snprintf(why, size, "\"%s\" is missing", key), false;
    }
    if (!cJSON_IsNumber(v)) return snprintf(why, size, "\"%s\" is not a number", key), false;
    double x = v->valuedouble;
    if (isfinite(x) && ((x >= lo && x <= hi) || (rules & NUM_ZERO && x == 0)) && (!(rules & NUM_INTEGER) || x == floor(x)))
        return true;
    char range[96];
    if (hi == DBL_MAX) snprintf(range, sizeof range, "%s >= %g", rules & NUM_INTEGER ? "an integer" : "a finite number", lo);
    else snprintf(range, sizeof range, "%s%s in [%g, %g]", rules & NUM_ZERO ? "0 or " : "",
                  rules & NUM_INTEGER ? "an integer" : "a number", lo, hi);
    snprintf(why, size, "\"%s\" is %g: it must be %s", key, x, range);
    return false;
}

/* The first number under `node` that is not finite (a report's own numbers always are), or NULL. */
static const cJSON *non_finite(const cJSON *node) {
    if (cJSON_IsNumber(node)) return isfinite(node->valuedouble) ? NULL : node;
    for (const cJSON *c = node ? node->child : NULL; c; c = c->next) {
        const cJSON *bad = non_finite(c);
        if (bad) return bad;
    }
    return NULL;
}

/* A result row: the strings the report shows, and every number finite and in range (the rates and
 * ratios report.md and the charts derive from them are then finite too). */
static bool valid_result(const cJSON *r, char *why, size_t size) {
    if (!cJSON_IsObject(r)) return snprintf(why, size, "not an object"), false;
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(r, "case")) ||
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(r, "impl")))
        return snprintf(why, size, "case, impl, time_ms or gflops missing"), false;
    static const char *const texts[] = {"op", "shape", "timing", "error"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; ++i) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, texts[i]);
        if (t && !cJSON_IsString(t)) return snprintf(why, size, "\"%s\" is not a string", texts[i]), false;
    }
    if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r, "time_ms")) ||
        !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r, "gflops")))
        return snprintf(why, size, "case, impl, time_ms or gflops missing"), false;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "rel_err");
    bool ok = report_number(r, "time_ms", NUM_REQUIRED, REPORT_MIN_MS, REPORT_MAX_MS, why, size) &&
              report_number(r, "time_min_ms", NUM_ZERO, REPORT_MIN_MS, REPORT_MAX_MS, why, size) &&
              report_number(r, "time_max_ms", NUM_ZERO, REPORT_MIN_MS, REPORT_MAX_MS, why, size) &&
              report_number(r, "runs", NUM_INTEGER, 0, REPORT_MAX_COUNT, why, size) &&
              report_number(r, "flops", NUM_ZERO, 1, REPORT_MAX_WORK, why, size) &&
              report_number(r, "bytes", bench_json_num(r, "flops") > 0 ? NUM_REQUIRED : NUM_ZERO, 1, REPORT_MAX_WORK, why,
                            size) && /* 0 only where there is no intensity to take */
              report_number(r, "gflops", NUM_REQUIRED, 0, REPORT_MAX_RATE, why, size) &&
              report_number(r, "gbps", 0, 0, REPORT_MAX_RATE, why, size);
    return ok && (!e || cJSON_IsNull(e) || report_number(r, "rel_err", 0, 0, DBL_MAX, why, size));
}

static bool validate_report(const cJSON *root, char *why, size_t size) {
    if (!cJSON_IsObject(root)) return snprintf(why, size, "not a JSON object"), false;
    if (strcmp(bench_json_text(root, "format"), REPORT_FORMAT) != 0)
        return snprintf(why, size, "\"format\" is not \"%s\"", REPORT_FORMAT), false;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "schema_version");
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)REPORT_SCHEMA) /* 1.5 is not 1: valueint would truncate */
        return snprintf(why, size, "unsupported schema_version (this tessera reads the integer %d)", REPORT_SCHEMA),
               false;
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    if (!cJSON_IsArray(devices)) return snprintf(why, size, "\"devices\" is not an array"), false;
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(root, "notes"), *note;
    if (notes && !cJSON_IsArray(notes)) return snprintf(why, size, "\"notes\" is not an array"), false;
    cJSON_ArrayForEach(note, notes) if (!cJSON_IsString(note)) return snprintf(why, size, "a note is not a string"),
        false;
    int i = 0;
    const cJSON *d;
    char detail[200];
    cJSON_ArrayForEach(d, devices) {
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(d, "fingerprint")) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(d, "status")) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(d, "host")))
            return snprintf(why, size, "device %d lacks fingerprint, status or host", i), false;
        const cJSON *mpi = cJSON_GetObjectItemCaseSensitive(d, "mpi");
        if (mpi && !valid_mpi_record(mpi))
            return snprintf(why, size, "device %d: \"mpi\" is not {rank, ranks, run} with 0 <= rank < ranks", i), false;
        if (!report_number(d, "seconds", 0, 0, REPORT_MAX_SECONDS, detail, sizeof detail))
            return snprintf(why, size, "device %d: %s", i, detail), false;
        const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(d, "peaks");
        peak_result pr;
        if (peaks && !cJSON_IsNull(peaks) && peak_from_json(peaks, &pr) != TSR_SUCCESS)
            return snprintf(why, size, "device %d: %s", i, tsr_last_error()), false;
        const cJSON *results = cJSON_GetObjectItemCaseSensitive(d, "results");
        if (results && !cJSON_IsArray(results)) return snprintf(why, size, "device %d: results is not an array", i), false;
        int j = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, results) {
            if (!valid_result(r, detail, sizeof detail))
                return snprintf(why, size, "device %d, result %d: %s", i, j, detail), false;
            ++j;
        }
        ++i;
    }
    /* Numbers nothing above checks (the device's "info", a "comparison" an older tessera wrote, ...):
     * finite, as every report tessera writes has them. */
    const cJSON *bad = non_finite(root);
    if (bad)
        return snprintf(why, size, "\"%s\" is %g: not a finite number", bad->string ? bad->string : "(array item)",
                        bad->valuedouble), false;
    return true;
}

tsr_status report_load(const char *path, cJSON **root) {
    cJSON *r = NULL;
    *root = NULL;
    tsr_status st = tsr_read_json(path, "report", &r);
    if (st != TSR_SUCCESS) return st;
    char why[256];
    if (!validate_report(r, why, sizeof why)) {
        cJSON_Delete(r);
        return tsr_fail(TSR_ERR_CORRUPT, "%s is not a tessera report: %s", path, why);
    }
    *root = r;
    return TSR_SUCCESS;
}

tsr_status report_parse(const char *text, size_t size, const char *name, cJSON **root) {
    *root = NULL;
    if (!text || memchr(text, '\0', size) || text[size] != '\0')
        return tsr_fail(TSR_ERR_CORRUPT, "report %s is unusable: not NUL-terminated text of %zu bytes", name, size);
    const char *end = NULL;
    /* As tsr_read_json: the NUL is part of the input, so trailing garbage is an error too. */
    cJSON *r = cJSON_ParseWithLengthOpts(text, size + 1, &end, true);
    if (!r)
        return tsr_fail(TSR_ERR_CORRUPT, "report %s is unusable: not valid JSON (truncated or damaged near byte %ld)",
                        name, end ? (long)(end - text) : -1L);
    char why[256];
    if (!validate_report(r, why, sizeof why)) {
        cJSON_Delete(r);
        return tsr_fail(TSR_ERR_CORRUPT, "%s is not a tessera report: %s", name, why);
    }
    *root = r;
    return TSR_SUCCESS;
}

/* The key of (a, b) for a bench_index: both strings with the first one's length, so no two pairs
 * collide. malloc'ed (NULL when out of memory); *len receives its length. */
static char *pair_key(const char *a, const char *b, size_t *len) {
    size_t la = strlen(a), lb = strlen(b);
    char *key = malloc(la + lb + 32);
    if (!key) return NULL;
    int n = snprintf(key, 32, "%zu:", la);
    memcpy(key + n, a, la);
    memcpy(key + n + la, b, lb);
    *len = (size_t)n + la + lb;
    return key;
}

/* A note, unless the merged report has it already (merging a report twice, or a merged report
 * with one of its sources, says it once). */
static void add_note(cJSON *notes, const char *text) {
    const cJSON *n;
    cJSON_ArrayForEach(n, notes) if (strcmp(cJSON_GetStringValue(n), text) == 0) return;
    cJSON_AddItemToArray(notes, cJSON_CreateString(text));
}

/* Ranks of one MPI run (`report --mpi`) that measured on one host did so at the same time: a
 * note per such host, from the devices' "mpi" records. `hosts` holds, per (run, host) in the
 * order first seen, an object {"run", "host", "ranks": [...]}. */
static tsr_status note_rank_host(bench_index *ix, cJSON *hosts, const cJSON *device) {
    const cJSON *mpi = cJSON_GetObjectItemCaseSensitive(device, "mpi");
    if (!mpi) return TSR_SUCCESS;
    const char *run = bench_json_text(mpi, "run"), *host = bench_json_text(device, "host");
    int rank = (int)bench_json_num(mpi, "rank");
    size_t len = 0;
    bool found = false;
    char *key = pair_key(run, host, &len);
    void **slot = key ? bench_index_get(ix, key, len, &found) : NULL;
    free(key);
    if (!slot) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory merging reports");
    cJSON *group = found ? *slot : NULL;
    if (!group) {
        group = cJSON_CreateObject();
        cJSON_AddStringToObject(group, "run", run);
        cJSON_AddStringToObject(group, "host", host);
        cJSON_AddArrayToObject(group, "ranks");
        cJSON_AddItemToArray(hosts, group);
        *slot = group;
    }
    cJSON *ranks = cJSON_GetObjectItemCaseSensitive(group, "ranks"), *r;
    cJSON_ArrayForEach(r, ranks) if (r->valueint == rank) return TSR_SUCCESS;
    cJSON_AddItemToArray(ranks, cJSON_CreateNumber(rank));
    return TSR_SUCCESS;
}

static void add_shared_host_notes(cJSON *notes, const cJSON *hosts) {
    const cJSON *group;
    cJSON_ArrayForEach(group, hosts) {
        const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(group, "ranks"), *r;
        int n = cJSON_GetArraySize(ranks), i = 0;
        if (n < 2) continue;
        char list[512] = "";
        size_t used = 0;
        cJSON_ArrayForEach(r, ranks) {
            const char *sep = i == 0 ? "" : i == n - 1 ? " and " : ", ";
            int w = snprintf(list + used, sizeof list - used, "%s%d", sep, r->valueint);
            if (w < 0 || (size_t)w >= sizeof list - used) break;
            used += (size_t)w, ++i;
        }
        char note[1200];
        snprintf(note, sizeof note,
                 "ranks %s of MPI run %s measured on one host, '%s', at the same time: their timings competed for "
                 "its processors and memory",
                 list, bench_json_text(group, "run"), bench_json_text(group, "host"));
        add_note(notes, note);
    }
}

tsr_status report_merge_roots(cJSON **roots, const char *const *names, size_t n, cJSON **out) {
    *out = NULL;
    tsr_status st = TSR_SUCCESS;
    if (n == 0) st = tsr_fail(TSR_ERR_INVALID_ARG, "--merge needs at least one report");
    /* "created": the newest source's, so merging the same reports again gives the same bytes. */
    const char *created = NULL;
    for (size_t f = 0; f < n; ++f) {
        const char *c = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(roots[f], "created"));
        if (c && (!created || strcmp(c, created) > 0)) created = c;
    }
    cJSON *merged = st == TSR_SUCCESS ? report_new(created) : NULL;
    cJSON *sources = merged ? cJSON_AddArrayToObject(merged, "merged_from") : NULL;
    cJSON *hosts = cJSON_CreateArray();
    if (st == TSR_SUCCESS && (!sources || !hosts))
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory merging reports");
    cJSON *devices = cJSON_GetObjectItemCaseSensitive(merged, "devices");
    cJSON *notes = cJSON_GetObjectItemCaseSensitive(merged, "notes");
    /* (fingerprint, host) -> the kept device entry: one lookup per device, not a scan. */
    bench_index kept = {0}, rank_hosts = {0};
    for (size_t f = 0; f < n && st == TSR_SUCCESS; ++f) {
        cJSON *root = roots[f];
        cJSON_AddItemToArray(sources, cJSON_CreateString(names[f]));
        const cJSON *note;
        cJSON_ArrayForEach(note, cJSON_GetObjectItemCaseSensitive(root, "notes")) add_note(notes, note->valuestring);
        cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "devices")->child;
        while (d && st == TSR_SUCCESS) {
            cJSON *next = d->next;
            cJSON_DetachItemViaPointer(cJSON_GetObjectItemCaseSensitive(root, "devices"), d);
            cJSON_DeleteItemFromObjectCaseSensitive(d, "source"); /* ours, not a copy's */
            cJSON_AddStringToObject(d, "source", names[f]);
            st = note_rank_host(&rank_hosts, hosts, d);
            /* The same device on the same host twice: keep the newer measurement. Identical
             * devices on different hosts are different machines and both stay. A device that
             * could not be opened has no fingerprint to say which it is: each such entry stays. */
            size_t len = 0;
            bool found = false, unknown = bench_json_text(d, "fingerprint")[0] == '\0';
            char *key = unknown ? NULL : pair_key(bench_json_text(d, "fingerprint"), bench_json_text(d, "host"), &len);
            void **slot = key ? bench_index_get(&kept, key, len, &found) : NULL;
            free(key);
            if (st == TSR_SUCCESS && !unknown && !slot)
                st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory merging reports");
            if (st != TSR_SUCCESS) {
                cJSON_Delete(d);
                break;
            }
            cJSON *dup = found ? *slot : NULL;
            if (!dup) {
                cJSON_AddItemToArray(devices, d);
                if (slot) *slot = d;
            } else {
                bool newer = strcmp(bench_json_text(d, "created"), bench_json_text(dup, "created")) > 0;
                char text[1024];
                snprintf(text, sizeof text, "duplicate: '%s' on host '%s' is in %s and %s; kept the %s one (%s)",
                         cJSON_GetStringValue(
                             cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "info"), "name"))
                             ?: bench_json_text(d, "fingerprint"),
                         bench_json_text(d, "host"), bench_json_text(dup, "source"), names[f],
                         newer ? "newer" : "earlier",
                         newer ? bench_json_text(d, "created") : bench_json_text(dup, "created"));
                cJSON_AddItemToArray(notes, cJSON_CreateString(text));
                if (newer) {
                    cJSON_ReplaceItemViaPointer(devices, dup, d);
                    *slot = d;
                } else {
                    cJSON_Delete(d);
                }
            }
            d = next;
        }
    }
    for (size_t f = 0; f < n; ++f)
        cJSON_Delete(roots[f]), roots[f] = NULL;
    bench_index_free(&kept);
    bench_index_free(&rank_hosts);
    if (st == TSR_SUCCESS) add_shared_host_notes(notes, hosts);
    cJSON_Delete(hosts);
    if (st != TSR_SUCCESS) {
        cJSON_Delete(merged);
        return st;
    }
    attach_comparison(merged);
    *out = merged;
    return TSR_SUCCESS;
}

tsr_status report_merge(const char *const *paths, size_t npaths, cJSON **out) {
    *out = NULL;
    if (npaths == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "--merge needs at least one report");
    cJSON **roots = calloc(npaths, sizeof *roots);
    if (!roots) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory merging reports");
    tsr_status st = TSR_SUCCESS;
    for (size_t f = 0; f < npaths && st == TSR_SUCCESS; ++f)
        st = report_load(paths[f], &roots[f]);
    if (st == TSR_SUCCESS) st = report_merge_roots(roots, paths, npaths, out);
    for (size_t f = 0; f < npaths; ++f)
        cJSON_Delete(roots[f]);
    free(roots);
    return st;
}

/* ---- writing ---- */

static const char *op_unit(const cJSON *row) { return bench_json_num(row, "flops") > 0 ? "GFLOP/s" : "GB/s"; }
static double op_rate(const cJSON *row) { return bench_json_num(row, "flops") > 0 ? bench_json_num(row, "gflops") : bench_json_num(row, "gbps"); }

static const char *device_name(const cJSON *d) {
    const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "info"), "name"));
    return n ? n : bench_json_text(d, "selector");
}

/* A file-name-safe slug of the device: index and name. */
static void device_slug(const cJSON *d, int index, char *out, size_t size) {
    snprintf(out, size, "%d-", index + 1);
    size_t used = strlen(out);
    for (const char *c = device_name(d); *c && used + 1 < size; ++c) {
        char ch = *c;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (!ok && used > 0 && out[used - 1] == '-') continue;
        out[used++] = ok ? (char)(ch | (ch >= 'A' && ch <= 'Z' ? 0x20 : 0)) : '-';
    }
    while (used > 0 && out[used - 1] == '-') --used;
    out[used] = '\0';
}

/* Every row of every device, grouped by case (cases in first-seen order; within a case, device
 * order then row order), with each device's first CLBlast row per case: built with indexes, so
 * that a report of millions of rows renders in linear time. */
typedef struct md_row {
    const cJSON *device, *row, *peer;
    size_t device_index, case_index;
    bool failure; /* row is one of the device's "failures": a case that failed or did not run */
} md_row;

typedef struct md_rows {
    md_row *rows;       /* grouped by case */
    const char **cases; /* case ids, first-seen order */
    size_t *starts;     /* rows of case c: starts[c] .. starts[c + 1] - 1 */
    size_t nrows, ncases;
} md_rows;

static void md_rows_free(md_rows *m) {
    free(m->rows), free(m->cases), free(m->starts);
    memset(m, 0, sizeof *m);
}

/* The index of case `id` in `cases`, appended (with the next index) when it is new. */
static tsr_status case_index(bench_index *ix, const char *id, const char **cases, size_t *ncases, size_t *index) {
    bool found = false;
    void **slot = bench_index_get(ix, id, strlen(id), &found);
    if (!slot) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    if (!found) *slot = (void *)(uintptr_t)*ncases, cases[(*ncases)++] = id;
    *index = (size_t)(uintptr_t)*slot;
    return TSR_SUCCESS;
}

static tsr_status md_rows_build(const cJSON *root, md_rows *out) {
    memset(out, 0, sizeof *out);
    size_t total = 0;
    const cJSON *d, *r;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        total += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "results"));
        total += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "failures"));
    }
    md_row *flat = calloc(total ? total : 1, sizeof *flat);
    const char **cases = calloc(total ? total : 1, sizeof *cases);
    bench_index case_ix = {0}, peer_ix = {0};
    tsr_status st = flat && cases ? TSR_SUCCESS : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    size_t n = 0, ncases = 0, di = 0;
    char key[64];
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "results")) {
            if (st != TSR_SUCCESS) break;
            size_t ci = 0;
            if ((st = case_index(&case_ix, bench_json_text(r, "case"), cases, &ncases, &ci)) != TSR_SUCCESS) break;
            bool found = false;
            flat[n++] = (md_row){.device = d, .row = r, .device_index = di, .case_index = ci};
            if (strncmp(bench_json_text(r, "impl"), "clblast", 7) == 0) { /* the first one per device and case */
                int len = snprintf(key, sizeof key, "%zu/%zu", di, ci);
                void **p = bench_index_get(&peer_ix, key, (size_t)len, &found);
                if (!p) st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
                else if (!found) *p = (void *)r;
            }
        }
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "failures")) { /* after the device's rows */
            const char *id = bench_json_text(r, "case");
            if (st != TSR_SUCCESS || strcmp(id, "peaks") == 0) continue; /* peaks: in the device table */
            size_t ci = 0;
            if ((st = case_index(&case_ix, id, cases, &ncases, &ci)) != TSR_SUCCESS) break;
            flat[n++] = (md_row){.device = d, .row = r, .device_index = di, .case_index = ci, .failure = true};
        }
        ++di;
    }
    /* Counting sort by case, stable: the order within a case stays device order, row order. */
    size_t *starts = st == TSR_SUCCESS ? calloc(ncases + 1, sizeof *starts) : NULL;
    md_row *rows = st == TSR_SUCCESS ? calloc(total ? total : 1, sizeof *rows) : NULL;
    if (st == TSR_SUCCESS && (!starts || !rows)) st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == TSR_SUCCESS) {
        for (size_t i = 0; i < n; ++i) ++starts[flat[i].case_index + 1];
        for (size_t c = 0; c < ncases; ++c) starts[c + 1] += starts[c];
        size_t *next = calloc(ncases + 1, sizeof *next);
        if (!next) {
            st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        } else {
            memcpy(next, starts, (ncases + 1) * sizeof *next);
            for (size_t i = 0; i < n; ++i) {
                md_row row = flat[i];
                if (!row.failure && strncmp(bench_json_text(row.row, "impl"), "tessera", 7) == 0) {
                    bool found = false;
                    int len = snprintf(key, sizeof key, "%zu/%zu", row.device_index, row.case_index);
                    void **p = bench_index_get(&peer_ix, key, (size_t)len, &found);
                    if (!p) {
                        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
                        break;
                    }
                    row.peer = found ? *p : NULL;
                }
                rows[next[row.case_index]++] = row;
            }
            free(next);
        }
    }
    bench_index_free(&case_ix);
    bench_index_free(&peer_ix);
    free(flat);
    if (st != TSR_SUCCESS) {
        free(cases), free(starts), free(rows);
        return st;
    }
    *out = (md_rows){rows, cases, starts, n, ncases};
    return TSR_SUCCESS;
}

/* A PNG that rsvg-convert did not make: report.md lists it as missing. */
typedef struct png_result {
    char name[160];
    char why[96]; /* "" when written */
} png_result;

/* How a device's rows were timed, from their "timing" fields (device: profiling events; host:
 * the host clock): one method, "mixed", or "-" where the rows do not say. */
static const char *timing_method(const cJSON *d) {
    const char *seen = NULL;
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "results")) {
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "timing"));
        if (!t) continue;
        const char *method = strcmp(t, "device") == 0 ? "device" : strcmp(t, "host") == 0 ? "host" : "other";
        if (seen && strcmp(seen, method) != 0) return "mixed";
        seen = method;
    }
    return seen ? seen : "-";
}

/* A line per device some of whose classes run untuned because their tuned entries are stale:
 * never tuned is a device's ordinary start, tuned for an older kernel source a silent loss. */
static void stale_markdown(bench_text *b, const cJSON *d) {
    int ops_listed = 0;
    const cJSON *op;
    cJSON_ArrayForEach(op, cJSON_GetObjectItemCaseSensitive(d, "configs")) {
        bool listed = false;
        const cJSON *cls;
        cJSON_ArrayForEach(cls, op) {
            const char *state = cJSON_GetStringValue(cls);
            if (!op->string || !cls->string || !state || strcmp(state, "default-stale") != 0) continue;
            if (!ops_listed && !listed) {
                bench_text_printf(b, "\n**Untuned because stale** on ");
                bench_text_md(b, device_name(d));
                bench_text_printf(b, " (tuned entries exist, for a kernel source that has changed since: these run the "
                                     "built-in default until `tessera tune` re-tunes them):");
            }
            if (!listed) {
                bench_text_printf(b, "%s", ops_listed ? "; " : " ");
                bench_text_md(b, op->string);
                bench_text_printf(b, " ");
            } else {
                bench_text_printf(b, ", ");
            }
            bench_text_md(b, cls->string);
            listed = true;
        }
        ops_listed += listed;
    }
    if (ops_listed) bench_text_printf(b, ".\n");
}

/* "#2 name (platform)": a device as the comparison names it. */
static void comparison_device(bench_text *b, const cJSON *pd) {
    bench_text_printf(b, "#%d ", (int)bench_json_num(pd, "device") + 1);
    bench_text_md(b, bench_json_text(pd, "name"));
    const char *platform = bench_json_text(pd, "platform");
    if (*platform) {
        bench_text_printf(b, " (");
        bench_text_md(b, platform);
        bench_text_printf(b, ")");
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pd, "simulator"))) bench_text_printf(b, " (simulator)");
}

/* The "Side by side" section: a column per device, a ratio column per device after the baseline. */
static void comparison_markdown(bench_text *b, const cJSON *cmp) {
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(cmp, "devices"), *pd, *row, *e;
    int base = (int)bench_json_num(cmp, "baseline"), bp = 0, np = cJSON_GetArraySize(parts), k = 0;
    const cJSON *bdev = NULL;
    cJSON_ArrayForEach(pd, parts) {
        if ((int)bench_json_num(pd, "device") == base) bp = k, bdev = pd;
        ++k;
    }
    bench_text_printf(b, "\n## Side by side\n\nBaseline: ");
    comparison_device(b, bdev);
    bench_text_printf(b, ", the first device with results in the report's order (the order of `--device`; with "
                         "`--merge`, the order of the files), passing over simulators. Each ratio is the baseline's median time over the device's at the same case, "
                         "shape and implementation: above 1 is faster than the baseline.\n\n");
    cJSON_ArrayForEach(pd, parts) {
        const cJSON *same = cJSON_GetObjectItemCaseSensitive(pd, "same_hardware_as_baseline");
        if (!same) continue;
        bench_text_printf(b, "- ");
        comparison_device(b, pd);
        if (cJSON_IsTrue(same)) {
            bool same_platform = strcmp(bench_json_text(pd, "platform"), bench_json_text(bdev, "platform")) == 0;
            bench_text_printf(b, ": the same processor as the baseline (CPU devices of host ");
            bench_text_md(b, bench_json_text(pd, "host"));
            bench_text_printf(b, "), %s: the ratio compares software on one CPU.\n",
                              same_platform ? "another device of the same OpenCL implementation"
                                            : "through another OpenCL implementation");
        } else {
            bench_text_printf(b, ": not known to be the same hardware as the baseline: the ratio compares devices%s.\n",
                              cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pd, "simulator"))
                                  ? " (a simulator's times say nothing about hardware)" : "");
        }
    }
    bench_text_printf(b, "\n| case | shape | impl |");
    cJSON_ArrayForEach(pd, parts) {
        bench_text_printf(b, " ");
        comparison_device(b, pd);
        bench_text_printf(b, " |");
    }
    cJSON_ArrayForEach(pd, parts) if ((int)bench_json_num(pd, "device") != base) bench_text_printf(b, " #%d / #%d |", (int)bench_json_num(pd, "device") + 1, base + 1);
    bench_text_printf(b, "\n|---|---|---|");
    for (int i = 0; i < 2 * np - 1; ++i) bench_text_printf(b, "---:|");
    bench_text_printf(b, "\n");
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(cmp, "rows")) {
        static const char *const fields[] = {"case", "shape", "impl"};
        for (size_t f = 0; f < 3; ++f) {
            bench_text_printf(b, "| ");
            bench_text_md(b, bench_json_text(row, fields[f]));
            bench_text_printf(b, " ");
        }
        const cJSON *entries = cJSON_GetObjectItemCaseSensitive(row, "entries");
        cJSON_ArrayForEach(e, entries) {
            char rate[32];
            if (cJSON_IsNull(e)) {
                bench_text_printf(b, "| - ");
            } else if (cJSON_GetObjectItemCaseSensitive(e, "error")) {
                const char *error = bench_json_text(e, "error");
                bench_text_printf(b, "| %s", strncmp(error, "not run", 7) == 0 ? "" : "failed: ");
                bench_text_md(b, error);
                bench_text_printf(b, " ");
            } else {
                bench_text_printf(b, "| %s %s (%.3f ms", bench_format_rate(bench_json_num(e, "rate"), rate, sizeof rate),
                                  bench_json_text(row, "unit"), bench_json_num(e, "time_ms"));
                const char *impl = bench_json_text(e, "impl");
                if (strcmp(impl, bench_json_text(row, "impl")) != 0) { /* tessera's path on this device */
                    bench_text_printf(b, ", ");
                    bench_text_md(b, impl);
                }
                bench_text_printf(b, ") ");
            }
        }
        k = 0;
        cJSON_ArrayForEach(e, entries) {
            if (k++ == bp) continue;
            const cJSON *ratio = cJSON_GetObjectItemCaseSensitive(e, "ratio");
            if (!cJSON_IsNumber(ratio)) bench_text_printf(b, "| - ");
            else if (ratio->valuedouble >= 100) bench_text_printf(b, "| **%.0f** ", ratio->valuedouble);
            else bench_text_printf(b, "| **%.3g** ", ratio->valuedouble); /* 0.0412 as such, not 0.04 */
        }
        bench_text_printf(b, "|\n");
    }
}

/* report.md, built in memory (written atomically by the caller). Every string that came from a
 * report (names, hosts, shapes, notes, errors, case ids, alt texts) goes through bench_text_md. */
static char *build_markdown(const cJSON *root, const png_result *pngs, size_t npngs, bool png_tool, tsr_status *st) {
    *st = TSR_SUCCESS;
    md_rows m;
    if ((*st = md_rows_build(root, &m)) != TSR_SUCCESS) return NULL;
    bench_text b = {0};
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    int ndev = cJSON_GetArraySize(devices);
    bench_text_printf(&b, "# tessera report\n\nCreated ");
    bench_text_md(&b, bench_json_text(root, "created"));
    bench_text_printf(&b, " by tessera ");
    bench_text_md(&b, bench_json_text(root, "tessera_version"));
    bench_text_printf(&b, ": %d device%s, %zu failed.\n", ndev, ndev == 1 ? "" : "s", report_failed_devices(root));
    const cJSON *src;
    cJSON_ArrayForEach(src, cJSON_GetObjectItemCaseSensitive(root, "merged_from")) {
        bench_text_printf(&b, "Merged from ");
        bench_text_md(&b, cJSON_GetStringValue(src));
        bench_text_printf(&b, ".\n");
    }
    const cJSON *note;
    cJSON_ArrayForEach(note, cJSON_GetObjectItemCaseSensitive(root, "notes")) {
        bench_text_printf(&b, "\nNote: ");
        bench_text_md(&b, cJSON_GetStringValue(note));
        bench_text_printf(&b, "\n");
    }
    bench_text_printf(&b, "\n## Devices\n\n| # | device | type | platform | driver | host | memory roof GB/s | fp32 roof GFLOP/s | "
                          "launch round trip µs | tuning | timing | status |\n|---|---|---|---|---|---|---:|---:|---:|---|---|---|\n");
    int i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, devices) {
        const cJSON *info = cJSON_GetObjectItemCaseSensitive(d, "info"), *peaks = cJSON_GetObjectItemCaseSensitive(d, "peaks");
        const cJSON *rt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(peaks, "launch_us"), "round_trip");
        char bw[32], fl[32], lat[32];
        bench_text_printf(&b, "| %d | ", ++i);
        bench_text_md(&b, device_name(d));
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "simulator")))
            bench_text_printf(&b, " (simulator: times say nothing about hardware)");
        static const char *const fields[] = {"type", "platform_name", "driver_version"};
        for (size_t f = 0; f < 3; ++f) {
            bench_text_printf(&b, " | ");
            bench_text_md(&b, bench_json_text(info, fields[f]));
        }
        bench_text_printf(&b, " | ");
        bench_text_md(&b, bench_json_text(d, "host"));
        bench_text_printf(&b, " | %s | %s | %s | ", bench_format_rate(bench_json_num(peaks, "bandwidth_gbps"), bw, sizeof bw),
                          bench_format_rate(bench_json_num(peaks, "compute_gflops"), fl, sizeof fl),
                          bench_format_rate(bench_json_num(rt, "median"), lat, sizeof lat));
        bench_text_md(&b, bench_json_text(d, "tuning"));
        bench_text_printf(&b, " | %s", timing_method(d));
        const char *status = bench_json_text(d, "status");
        if (strcmp(status, "ok") == 0) {
            bench_text_printf(&b, " | ok |\n");
        } else {
            bench_text_printf(&b, " | **");
            bench_text_md(&b, *status ? status : "failed"); /* skipped, partial; failed in older reports */
            bench_text_printf(&b, "**: ");
            bench_text_md(&b, bench_json_text(d, "error"));
            bench_text_printf(&b, " |\n");
        }
    }
    cJSON_ArrayForEach(d, devices) { /* where the driver's timestamps could not be used */
        const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(d, "peaks");
        if (strcmp(bench_json_text(peaks, "timing"), "host") != 0) continue;
        bench_text_printf(&b, "\nTiming on ");
        bench_text_md(&b, device_name(d));
        bench_text_printf(&b, ": host clock (batches of launches less the %.0f µs empty-launch cost) for its peaks and "
                              "tuning: ", bench_json_num(peaks, "empty_launch_us"));
        bench_text_md(&b, bench_json_text(peaks, "timing_reason"));
        bench_text_printf(&b, "\n");
    }
    cJSON_ArrayForEach(d, devices) stale_markdown(&b, d);
    cJSON *cmp = report_compare(root); /* recomputed: report.json's copy may come from an older tessera */
    if (cmp) comparison_markdown(&b, cmp);
    cJSON_Delete(cmp);
    bench_text_printf(&b, "\n## Results\n\nMedian time of repeated runs; the rate counts each op's arithmetic (GELU: 8 operations "
                          "per element) or, for the copy kernel, bytes moved; %% of roofline is the rate over min(fp32 roof, "
                          "intensity × memory roof) with this device's measured roofs; \"vs CLBlast\" is CLBlast's time over "
                          "tessera's in the same run.\n");
    for (size_t c = 0; c < m.ncases; ++c) {
        bench_text_printf(&b, "\n### ");
        bench_text_md(&b, m.cases[c]);
        bench_text_printf(&b, "\n\n| device | shape | impl | ms | rate | intensity FLOP/B | %% of roofline | vs CLBlast | rel_err |\n"
                              "|---|---|---|---:|---:|---:|---:|---:|---:|\n");
        for (size_t k = m.starts[c]; k < m.starts[c + 1]; ++k) {
            const md_row *w = &m.rows[k];
            const cJSON *r = w->row;
            if (w->failure) { /* the error in the impl column, the numbers empty */
                const char *error = bench_json_text(r, "error");
                bench_text_printf(&b, "| ");
                bench_text_md(&b, device_name(w->device));
                bench_text_printf(&b, " | ");
                bench_text_md(&b, bench_json_text(r, "shape"));
                bench_text_printf(&b, " | %s", strncmp(error, "not run", 7) == 0 ? "" : "**failed**: ");
                bench_text_md(&b, error);
                bench_text_printf(&b, " | - | - | - | - | | - |\n");
                continue;
            }
            char vs[32] = "", err[32] = "-", inten[32] = "-", rate[32];
            if (w->peer) snprintf(vs, sizeof vs, "%.2fx", bench_json_num(w->peer, "time_ms") / bench_json_num(r, "time_ms"));
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "rel_err");
            if (cJSON_IsNumber(e)) snprintf(err, sizeof err, "%.1e", e->valuedouble);
            if (bench_json_num(r, "flops") > 0)
                snprintf(inten, sizeof inten, "%.2f", bench_json_num(r, "flops") / bench_json_num(r, "bytes"));
            bench_text_printf(&b, "| ");
            bench_text_md(&b, device_name(w->device));
            bench_text_printf(&b, " | ");
            bench_text_md(&b, bench_json_text(r, "shape"));
            bench_text_printf(&b, " | ");
            bench_text_md(&b, bench_json_text(r, "impl"));
            const char *error = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "error"));
            if (error) { /* a measurement error in place of the rate */
                bench_text_printf(&b, " | %.3f | **", bench_json_num(r, "time_ms"));
                bench_text_md(&b, error);
                bench_text_printf(&b, "** | %s | - | %s | %s |\n", inten, vs, err);
                continue;
            }
            bench_text_printf(&b, " | %.3f | %s %s | %s | %.0f%% | %s | %s |\n", bench_json_num(r, "time_ms"),
                              bench_format_rate(op_rate(r), rate, sizeof rate), op_unit(r), inten,
                              100.0 * roofline_fraction(w->device, r), vs, err);
        }
    }
    md_rows_free(&m);
    const cJSON *pytorch = cJSON_GetObjectItemCaseSensitive(root, "pytorch");
    if (pytorch) report_pytorch_markdown(&b, pytorch);
    bench_text_printf(&b, "\n## Charts\n\nOne roofline per device (log-log: x is arithmetic intensity in FLOP per byte that must "
                          "move, y is GFLOP/s). The slanted line is the measured memory roof (bandwidth × intensity), the flat "
                          "one the measured fp32 roof; where they meet is the ridge point. An op left of the ridge is bound by "
                          "memory, right of it by arithmetic; its height under the roof is what is left on the table. Filled "
                          "circles are tessera, hollow squares CLBlast.\n\n");
    i = 0;
    cJSON_ArrayForEach(d, devices) {
        char slug[128];
        device_slug(d, i++, slug, sizeof slug);
        if (!cJSON_GetObjectItemCaseSensitive(d, "peaks")) continue;
        bench_text_printf(&b, "![roofline of ");
        bench_text_md(&b, device_name(d));
        bench_text_printf(&b, "](roofline-%s.svg)\n\n", slug);
    }
    bench_text_printf(&b, "Devices side by side, op by op (tessera's rate; the tables above give the %% of each device's "
                          "roofline):\n\n![devices per op](bars.svg)\n");
    /* The PNG copies: made, missing (and why), or not attempted. */
    if (!png_tool) {
        bench_text_printf(&b, "\nPNG copies: none (no rsvg-convert on PATH).\n");
    } else {
        bench_text_printf(&b, "\nPNG copies (rsvg-convert):\n\n");
        for (size_t p = 0; p < npngs; ++p) {
            bench_text_printf(&b, "- ");
            bench_text_md(&b, pngs[p].name);
            if (*pngs[p].why) {
                bench_text_printf(&b, ": **missing** (");
                bench_text_md(&b, pngs[p].why);
                bench_text_printf(&b, ")");
            }
            bench_text_printf(&b, "\n");
        }
    }
    char *text = bench_text_finish(&b);
    if (!text) *st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory building report.md");
    return text;
}

static bool have_program(const char *name) {
    const char *path = getenv("PATH");
    if (!path) return false;
    char buf[4096];
    tsr_strlcpy(buf, path, sizeof buf);
    char *save = NULL;
    for (char *dir = strtok_r(buf, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char full[4200];
        snprintf(full, sizeof full, "%s/%s", dir, name);
        if (access(full, X_OK) == 0) return true;
    }
    return false;
}

/* svg -> png with rsvg-convert, no shell in between, into a temporary file renamed on success
 * (a failed conversion leaves no partial PNG); *why says what went wrong. */
static bool to_png(const char *svg, const char *png, char *why, size_t why_size) {
    char tmp[TSR_PATH_MAX + 300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", png, (long)getpid());
    char *argv[] = {"rsvg-convert", "-b", "white", "-o", tmp, (char *)svg, NULL};
    pid_t pid;
    int err = posix_spawnp(&pid, "rsvg-convert", NULL, NULL, argv, environ);
    if (err != 0) {
        snprintf(why, why_size, "cannot run rsvg-convert: %s", strerror(err));
        return false;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        unlink(tmp);
        if (WIFEXITED(status)) snprintf(why, why_size, "rsvg-convert exited with status %d", WEXITSTATUS(status));
        else snprintf(why, why_size, "rsvg-convert was killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        return false;
    }
    if (rename(tmp, png) != 0) {
        snprintf(why, why_size, "cannot rename its output: %s", strerror(errno));
        unlink(tmp);
        return false;
    }
    return true;
}

static tsr_status write_text(const char *dir, const char *name, const char *content) {
    char path[TSR_PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return tsr_write_file_atomic(path, content, strlen(content));
}

/* The PNG of dir/<base>.svg, recorded in pngs[*n]. */
static void add_png(const char *dir, const char *base, png_result *pngs, size_t *n, bool quiet) {
    png_result *p = &pngs[(*n)++];
    char in[TSR_PATH_MAX + 256], out[TSR_PATH_MAX + 256];
    snprintf(p->name, sizeof p->name, "%s.png", base);
    snprintf(in, sizeof in, "%s/%s.svg", dir, base);
    snprintf(out, sizeof out, "%s/%s", dir, p->name);
    p->why[0] = '\0';
    if (!to_png(in, out, p->why, sizeof p->why) && !quiet)
        fprintf(stderr, "tessera report: error: %s not made: %s\n", p->name, p->why);
}

/* Every output is written atomically (temporary file, fsync, rename) from text built in memory:
 * a full disk or an unwritable path fails the command and leaves no partial file. A PNG that
 * rsvg-convert fails to make is listed in report.md as missing, printed as an error line, and
 * fails the call (TSR_ERR_IO) after everything else has been written. */
tsr_status report_write(const cJSON *root, const char *dir, bool quiet) {
    /* What is written must load back (report --merge of it): a tree that would not is refused
     * before anything is written, whoever made it. */
    char why[512];
    if (!validate_report(root, why, sizeof why))
        return tsr_fail(TSR_ERR_INVALID_ARG, "report_write: the report is not valid: %s", why);
    tsr_status st = tsr_make_dirs(dir);
    if (st != TSR_SUCCESS) return st;
    char *json = cJSON_Print(root);
    if (!json) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    st = write_text(dir, "report.json", json);
    free(json);
    if (st != TSR_SUCCESS) return st;
    bool png = have_program("rsvg-convert");
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    size_t npngs = 0, cap = (size_t)cJSON_GetArraySize(devices) + 1;
    png_result *pngs = calloc(cap, sizeof *pngs);
    if (!pngs) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    int i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, devices) {
        char slug[128], base[160];
        device_slug(d, i++, slug, sizeof slug);
        if (st != TSR_SUCCESS || !cJSON_GetObjectItemCaseSensitive(d, "peaks")) continue;
        char *svg = chart_roofline_svg(d);
        if (!svg) {
            st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        snprintf(base, sizeof base, "roofline-%s", slug);
        char name[170];
        snprintf(name, sizeof name, "%s.svg", base);
        st = write_text(dir, name, svg);
        free(svg);
        if (st == TSR_SUCCESS && png) add_png(dir, base, pngs, &npngs, quiet);
    }
    if (st == TSR_SUCCESS) {
        char *svg = chart_bars_svg(root);
        st = svg ? write_text(dir, "bars.svg", svg) : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        free(svg);
        if (st == TSR_SUCCESS && png) add_png(dir, "bars", pngs, &npngs, quiet);
    }
    char *md = NULL;
    if (st == TSR_SUCCESS) md = build_markdown(root, pngs, npngs, png, &st);
    if (st == TSR_SUCCESS) st = write_text(dir, "report.md", md);
    free(md);
    size_t missing = 0;
    const char *first = NULL;
    for (size_t p = 0; p < npngs; ++p)
        if (*pngs[p].why) first = first ? first : pngs[p].name, ++missing;
    if (st == TSR_SUCCESS && missing)
        st = tsr_fail(TSR_ERR_IO, "%zu PNG chart%s not made by rsvg-convert (first: %s/%s); see %s/report.md", missing,
                      missing == 1 ? "" : "s", dir, first, dir);
    free(pngs);
    if (st == TSR_SUCCESS && !quiet)
        printf("wrote %s/report.json, report.md and the charts (SVG%s)\n", dir, png ? " and PNG" : "; no rsvg-convert for PNG");
    return st;
}
