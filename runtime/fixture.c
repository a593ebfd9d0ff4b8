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

tsr_status tsr_fixture_measure(tsr_device *dev, const tsr_op *op, void *fx, int runs, double *best_ms,
                               double *rel_err) {
    *best_ms = 0;
    *rel_err = INFINITY;
    double best = INFINITY;
    tsr_event_clock clock = {0}; /* the runs share one in-order queue */
    bool host_clock = false;
    for (int rep = 0; rep < runs; ++rep) {
        cl_event first = NULL, last = NULL;
        double seconds = 0, t0 = tsr_now_s();
        tsr_status st = op->fixture_run(dev, fx, NULL, tsr_device_queue(dev), &first, &last);
        if (st == TSR_SUCCESS && !host_clock) {
            st = tsr_event_seconds(first, last, "timing a demo run", &clock, &seconds);
            if (st == TSR_ERR_UNSUPPORTED) { /* timestamps unusable: the host clock from here on */
                tsr_warn("%s; the %s demo is timed with the host clock", tsr_last_error(), op->name);
                tsr_clear_error();
                host_clock = true;
                st = TSR_SUCCESS;
            }
        }
        if (st == TSR_SUCCESS && host_clock) {
            cl_int err = clWaitForEvents(1, &last);
            if (err != CL_SUCCESS) st = tsr_fail_cl(err, "clWaitForEvents(demo run)", __FILE__, __LINE__);
            seconds = tsr_now_s() - t0;
        }
        if (first) clReleaseEvent(first);
        if (last) clReleaseEvent(last);
        if (st != TSR_SUCCESS) return st;
        best = fmin(best, seconds * 1e3);
    }
    *best_ms = isinf(best) ? 0 : best;
    return op->fixture_check(dev, fx, rel_err);
}

tsr_status tsr_fixture_poison(tsr_device *dev, cl_mem mem, float *host, size_t count) {
    for (size_t i = 0; i < count; ++i) host[i] = NAN;
    return tsr_upload(dev, mem, host, count);
}
