/* The generic parts of the op fixtures: the tuner's calls on them, the demo's timing and
 * the poisoning of outputs. Each op's fixture (in its file) knows its problem; this does not. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

tsr_status tsr_op_tuning_setup(const tsr_op *op, tsr_device *dev, const char *cls, void **out) {
    if (op->tuning_setup) return op->tuning_setup(dev, cls, out);
    if (!op->fixture_setup || !op->class_shapes) return tsr_fail(TSR_ERR_UNSUPPORTED, "op %s cannot be tuned", op->name);
    int index = tsr_op_class_index(op, cls);
    if (index < 0) return tsr_fail(TSR_ERR_INVALID_ARG, "no %s class '%s'", op->name, cls);
    return op->fixture_setup(dev, op->class_shapes[index], tsr_random_fresh_seed(), out);
}

tsr_status tsr_op_tuning_run(const tsr_op *op, tsr_device *dev, void *ctx, const tsr_config *config, cl_event *first,
                             cl_event *last) {
    if (op->tuning_run) return op->tuning_run(dev, ctx, config, first, last);
    return op->fixture_run(dev, ctx, config, tsr_device_queue(dev), first, last);
}

double tsr_op_tuning_tolerance(const tsr_op *op, const void *ctx, double tolerance) {
    if (op->tuning_check || !op->fixture_tolerance) return tolerance;
    double own = op->fixture_tolerance(ctx);
    return own > tolerance ? own : tolerance;
}

tsr_status tsr_op_tuning_check(const tsr_op *op, tsr_device *dev, void *ctx, double *rel_err) {
    return op->tuning_check ? op->tuning_check(dev, ctx, rel_err) : op->fixture_check(dev, ctx, rel_err);
}

double tsr_op_tuning_work(const tsr_op *op, const void *ctx) {
    if (op->tuning_flops) return op->tuning_flops(ctx);
    double flops = 0, bytes = 0;
    op->fixture_work(ctx, &flops, &bytes);
    return op->rate_unit && strcmp(op->rate_unit, "GB/s") == 0 ? bytes : flops;
}

void tsr_op_tuning_describe(const tsr_op *op, const void *ctx, char *out, size_t size) {
    if (op->tuning_describe) op->tuning_describe(ctx, out, size);
    else op->fixture_describe(ctx, out, size);
}

void tsr_op_tuning_free(const tsr_op *op, void *ctx) {
    if (op->tuning_free) op->tuning_free(ctx);
    else op->fixture_free(ctx);
}

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
    return d->op->fixture_run(d->device, d->fixture, NULL, tsr_device_queue(d->device), first, last);
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
    return op->fixture_check(dev, fx, rel_err);
}

tsr_status tsr_fixture_poison(tsr_device *dev, cl_mem mem, float *host, size_t count) {
    for (size_t i = 0; i < count; ++i) host[i] = NAN;
    return tsr_upload(dev, mem, host, count);
}
