/* The generic parts of the op fixtures: the tuning hooks' setup by class, the demo's timing and
 * the poisoning of outputs. Each op's fixture (in its file) knows its problem; this does not. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

tsr_status tsr_fixture_tuning_setup(tsr_device *dev, const tsr_op *op, const char *cls, const char *label, void **out) {
    int index = tsr_op_class_index(op, cls);
    if (index < 0 || !op->class_shapes) return tsr_fail(TSR_ERR_INVALID_ARG, "no %s class '%s'", label, cls);
    return op->fixture_setup(dev, op->class_shapes[index], tsr_random_fresh_seed(), out);
}

static double event_ms(cl_event first, cl_event last) {
    cl_ulong t0 = 0, t1 = 0;
    if (clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) != CL_SUCCESS || t1 <= t0)
        return 0;
    return (double)(t1 - t0) * 1e-6;
}

tsr_status tsr_fixture_measure(tsr_device *dev, const tsr_op *op, void *fx, int runs, double *best_ms,
                               double *rel_err) {
    *best_ms = 0;
    *rel_err = INFINITY;
    double best = INFINITY;
    for (int rep = 0; rep < runs; ++rep) {
        cl_event first = NULL, last = NULL;
        tsr_status st = op->fixture_run(dev, fx, NULL, tsr_device_queue(dev), &first, &last);
        cl_int err = st == TSR_SUCCESS ? clWaitForEvents(1, &last) : CL_SUCCESS;
        double ms = st == TSR_SUCCESS && err == CL_SUCCESS ? event_ms(first, last) : 0;
        if (first) clReleaseEvent(first);
        if (last) clReleaseEvent(last);
        if (st != TSR_SUCCESS) return st;
        if (err != CL_SUCCESS) return tsr_fail_cl(err, "clWaitForEvents", __FILE__, __LINE__);
        if (ms > 0) best = fmin(best, ms);
    }
    *best_ms = isinf(best) ? 0 : best;
    return op->fixture_check(dev, fx, rel_err);
}

double tsr_fixture_rate_work(const tsr_op *op, const void *fx) {
    double flops = 0, bytes = 0;
    op->fixture_work(fx, &flops, &bytes);
    return op->rate_unit && strcmp(op->rate_unit, "GB/s") == 0 ? bytes : flops;
}

tsr_status tsr_fixture_poison(tsr_device *dev, cl_mem mem, float *host, size_t count) {
    for (size_t i = 0; i < count; ++i) host[i] = NAN;
    return tsr_upload(dev, mem, host, count);
}
