/* The generic parts of the op fixtures: the tuner's calls on them, the demo's timing and
 * the poisoning of outputs. Each op's fixture (in its file) knows its problem; this does not. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

tsr_status tsr_op_tuning_setup(const tsr_op *op, tsr_device *dev, const char *cls, void **out) {
    if (!op->fixture.setup || !op->class_shapes) return tsr_fail(TSR_ERR_UNSUPPORTED, "op %s cannot be tuned", op->name);
    const char *shape = tsr_op_class_shape(op, cls);
    if (!shape) return tsr_fail(TSR_ERR_INVALID_ARG, "no %s class '%s'", op->name, cls);
    return op->fixture.setup(dev, shape, tsr_random_fresh_seed(), out);
}

/* The fixture at `shape`, a problem of class `cls` other than its own (`what` it is), refused when it
 * is of another class. */
static tsr_status setup_in_class(const tsr_op *op, tsr_device *dev, const char *cls, const char *shape, const char *what,
                                 void **out) {
    tsr_status st = op->fixture.setup(dev, shape, tsr_random_fresh_seed(), out);
    if (st != TSR_SUCCESS || !op->fixture.problem_class) return st;
    const char *got = op->fixture.problem_class(*out); /* may point into the fixture: said before it is freed */
    if (strcmp(got, cls) == 0) return TSR_SUCCESS;
    st = tsr_fail(TSR_ERR_UNSUPPORTED, "%s: the %s '%s' of class '%s' is of class '%s'", op->name, what, shape, cls, got);
    op->fixture.free(*out);
    *out = NULL;
    return st;
}

tsr_status tsr_op_tuning_setup_step(const tsr_op *op, tsr_device *dev, const char *cls, int step, void **out) {
    if (step == 0) return tsr_op_tuning_setup(op, dev, cls, out);
    *out = NULL;
    if (!op->fixture.setup || !op->class_shapes) return tsr_fail(TSR_ERR_UNSUPPORTED, "op %s cannot be tuned", op->name);
    const char *shape = tsr_op_class_shape_step(op, cls, step);
    if (!shape) return tsr_fail(TSR_ERR_INVALID_ARG, "%s class '%s' has no smaller problem %d", op->name, cls, step);
    return setup_in_class(op, dev, cls, shape, "smaller problem", out);
}

tsr_status tsr_op_tuning_setup_check(const tsr_op *op, tsr_device *dev, const char *cls, void **out) {
    *out = NULL;
    if (!op->fixture.setup || !op->class_shapes) return tsr_fail(TSR_ERR_UNSUPPORTED, "op %s cannot be tuned", op->name);
    const char *shape = tsr_op_class_check_shape(op, cls);
    if (!shape) return tsr_fail(TSR_ERR_NOT_FOUND, "%s class '%s' has no second problem", op->name, cls);
    return setup_in_class(op, dev, cls, shape, "second problem", out);
}

tsr_status tsr_op_tuning_run(const tsr_op *op, tsr_device *dev, void *ctx, const tsr_config *config, cl_event *first,
                             cl_event *last) {
    return op->fixture.run(dev, ctx, config, tsr_device_queue(dev), first, last);
}

double tsr_op_tuning_tolerance(const tsr_op *op, const void *ctx, double tolerance) {
    if (!op->fixture.tolerance) return tolerance;
    double own = op->fixture.tolerance(ctx);
    return own > tolerance ? own : tolerance;
}

tsr_status tsr_op_tuning_check(const tsr_op *op, tsr_device *dev, void *ctx, double *rel_err) {
    return op->fixture.check(dev, ctx, rel_err);
}

double tsr_op_tuning_work(const tsr_op *op, const void *ctx) {
    double flops = 0, bytes = 0;
    op->fixture.work(ctx, &flops, &bytes);
    return op->rate_unit && strcmp(op->rate_unit, "GB/s") == 0 ? bytes : flops;
}

void tsr_op_tuning_describe(const tsr_op *op, const void *ctx, char *out, size_t size) {
    op->fixture.describe(ctx, out, size);
}

void tsr_op_tuning_free(const tsr_op *op, void *ctx) { op->fixture.free(ctx); }

void tsr_fixture_single_event(cl_event done, cl_event *first, cl_event *last) {
    if (first) *first = done, clRetainEvent(done);
    if (last) *last = done;
    else if (done) clReleaseEvent(done);
}

typedef struct demo_launch {
    tsr_device *device;
    const tsr_op *op;
    void *fixture;
} demo_launch;

static tsr_status launch_demo_run(void *vctx, cl_event *first, cl_event *last) {
    demo_launch *d = vctx;
    return d->op->fixture.run(d->device, d->fixture, NULL, tsr_device_queue(d->device), first, last);
}

tsr_status tsr_fixture_measure(tsr_device *dev, const tsr_op *op, void *fx, int runs, double *best_ms,
                               double *rel_err) {
    *best_ms = 0;
    *rel_err = INFINITY;
    double best = INFINITY;
    tsr_timer timer = {.what = "timing a demo run"}; /* by the device's method: events, or the host clock */
    demo_launch d = {dev, op, fx};
    for (int rep = 0; rep < runs; ++rep) {
        double seconds = 0;
        tsr_status st = tsr_timer_run(&timer, dev, launch_demo_run, &d, &seconds);
        if (st != TSR_SUCCESS) return st;
        best = fmin(best, seconds * 1e3);
    }
    *best_ms = isinf(best) ? 0 : best;
    if (timer.host_runs) { /* a time the demo prints says how it was measured */
        const char *why = "";
        tsr_device_timing(dev, NULL, &why);
        tsr_warn("the %s demo was timed with the host clock over batches of runs (%s)", op->name, why);
    }
    return op->fixture.check(dev, fx, rel_err);
}

tsr_status tsr_fixture_poison(tsr_device *dev, cl_mem mem, float *host, size_t count) {
    for (size_t i = 0; i < count; ++i) host[i] = NAN;
    return tsr_upload(dev, mem, host, count);
}

/* One shape of the demo: its best time, rate (in the op's unit), error and implementation. */
typedef struct demo_result {
    double ms, rate, err;
    char impl[32];
} demo_result;

static tsr_status demo_shape(tsr_device *dev, const tsr_op *op, const char *shape, demo_result *r) {
    void *fx = NULL;
    tsr_status status = op->fixture.setup(dev, shape, tsr_random_fresh_seed(), &fx);
    if (status != TSR_SUCCESS) return status;
    double flops = 0, bytes = 0;
    status = tsr_fixture_measure(dev, op, fx, op->demo.runs > 0 ? op->demo.runs : 1, &r->ms, &r->err);
    if (status == TSR_SUCCESS) {
        op->fixture.work(fx, &flops, &bytes);
        double work = op->rate_unit && strcmp(op->rate_unit, "GB/s") == 0 ? bytes : flops;
        r->rate = r->ms > 0 ? work / (r->ms * 1e6) : 0;
        if (op->fixture.impl) { /* "tessera(im2col)" -> "im2col" */
            char label[64];
            op->fixture.impl(dev, fx, label, sizeof label);
            const char *open = strchr(label, '('), *close = open ? strchr(open, ')') : NULL;
            if (open && close) snprintf(r->impl, sizeof r->impl, "%.*s", (int)(close - open - 1), open + 1);
        }
    }
    op->fixture.free(fx);
    return status;
}

tsr_status tsr_op_demo(tsr_device *dev, const tsr_op *op, char *summary, size_t size) {
    if (!op->fixture.setup || !op->demo.shapes[0])
        return tsr_fail(TSR_ERR_UNSUPPORTED, "op %s has no demo", op->name);
    demo_result r[2];
    memset(r, 0, sizeof r);
    const int nshapes = op->demo.shapes[1] ? 2 : 1;
    double worst = 0;
    for (int s = 0; s < nshapes; ++s) {
        tsr_status status = demo_shape(dev, op, op->demo.shapes[s], &r[s]);
        if (status != TSR_SUCCESS) return status;
        worst = r[s].err > worst || isnan(r[s].err) ? r[s].err : worst;
    }
    const bool ok = worst <= op->tolerance;
    const bool bandwidth = op->rate_unit && strcmp(op->rate_unit, "GB/s") == 0;
    size_t used = (size_t)snprintf(summary, size, "%s", op->demo.title);
    for (int s = 0; s < nshapes && used < size; ++s) {
        const char *label = nshapes > 1 && op->demo.labels[s] ? op->demo.labels[s] : NULL;
        int n;
        if (bandwidth)
            n = snprintf(summary + used, size - used, "%s%s%s%.3f ms (%.1f GB/s, %s %.1e)", s ? ", " : ": ",
                         label ? label : "", label ? " " : "", r[s].ms, r[s].rate,
                         op->demo.metric ? op->demo.metric : "relative error", r[s].err);
        else
            n = snprintf(summary + used, size - used, "%s%s%s%s%s: %.3f ms, %.1f GFLOP/s, %s %.2e", s ? ", " : "",
                         label ? label : "", *r[s].impl ? " (" : "", r[s].impl, *r[s].impl ? ")" : "", r[s].ms,
                         r[s].rate, op->demo.metric ? op->demo.metric : "relative error", r[s].err);
        if (n < 0) break;
        used += (size_t)n;
    }
    if (used < size) snprintf(summary + used, size - used, "%s", ok ? "" : "  (WRONG)");
    if (!ok) return tsr_fail(TSR_ERR_OPENCL, "%s demo: error %.3e exceeds %.0e", op->name, worst, op->tolerance);
    return TSR_SUCCESS;
}

/* The fixtures' and tests' host-to-device writes (checks.c held them until derived.c needed to
 * hear of them: tessera's own writes advance a marked buffer's generation). */
tsr_status tsr_upload(tsr_device *dev, cl_mem mem, const float *host, size_t count) {
    tsr_status status = TSR_SUCCESS;
    TSR_CL_CHECK(status, clEnqueueWriteBuffer(dev->queue, mem, CL_TRUE, 0, count * sizeof(float), host, 0, NULL, NULL),
                 done);
done:
    if (status == TSR_SUCCESS) tsr_buffer_written(mem); /* a write tessera made: derived data goes */
    return status;
}

tsr_status tsr_upload_typed(tsr_device *dev, cl_mem mem, tsr_dtype dtype, const float *host, size_t count) {
    if (dtype == TSR_F32) return tsr_upload(dev, mem, host, count);
    tsr_status status = TSR_SUCCESS;
    uint16_t *packed = malloc(count ? count * sizeof *packed : 1);
    if (!packed) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "no host memory for %zu 16-bit elements", count);
    TSR_CHECK(status, tsr_convert_host(TSR_F32, host, dtype, packed, count), done);
    TSR_CL_CHECK(
        status, clEnqueueWriteBuffer(dev->queue, mem, CL_TRUE, 0, count * sizeof *packed, packed, 0, NULL, NULL), done);
done:
    if (status == TSR_SUCCESS) tsr_buffer_written(mem); /* a write tessera made: derived data goes */
    free(packed);
    return status;
}
