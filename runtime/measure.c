/* Measurement shared by the tuner and the benchmarks: the monotonic clock, device time from
 * profiling events with their timestamps checked, repetitions under a time budget, and the
 * median, quartile and spread of what was measured. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

double tsr_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

tsr_status tsr_event_seconds(cl_event first, cl_event last, const char *what, tsr_event_clock *clock,
                             double *seconds) {
    cl_ulong start = 0, end = 0;
    cl_int err = clWaitForEvents(1, &last);
    if (err == CL_SUCCESS) err = clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL);
    if (err == CL_SUCCESS) err = clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, what, __FILE__, __LINE__);
    /* A driver that leaves timestamps unset, or whose clock runs backwards, would otherwise
     * produce an absurd time that a tuner or benchmark takes for the truth. */
    if (start == 0 || end == 0)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: unusable timestamps: the device reported %s 0 for a profiled command",
                        what, start == 0 ? "a start of" : "an end of");
    if (end < start)
        return tsr_fail(TSR_ERR_UNSUPPORTED,
                        "%s: unusable timestamps: the command ended (%llu ns) before it started (%llu ns)",
                        what, (unsigned long long)end, (unsigned long long)start);
    if (clock) {
        if (start < clock->last_start)
            return tsr_fail(TSR_ERR_UNSUPPORTED,
                            "%s: unusable timestamps: the device clock went back (a command started at %llu ns after "
                            "an earlier one started at %llu ns)",
                            what, (unsigned long long)start, (unsigned long long)clock->last_start);
        clock->last_start = start;
    }
    /* Equal timestamps are legal (a coarse clock): one nanosecond keeps rates finite. */
    *seconds = end > start ? (double)(end - start) * 1e-9 : 1e-9;
    return TSR_SUCCESS;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void tsr_stats_of(double *values, int n, tsr_stats *stats) {
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    stats->n = n;
    stats->median = (n % 2) ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
    stats->q25 = values[(n - 1) / 4];
    stats->min = values[0];
    stats->max = values[n - 1];
    stats->spread = (stats->max - stats->min) / stats->median;
}

bool tsr_quantile_bounds(const double *sorted, int n, double p, double *lo, double *hi) {
    double center = n * p, half = 1.96 * sqrt(n * p * (1.0 - p));
    int low = (int)floor(center - half), high = (int)ceil(center + half); /* 0-based ranks */
    *lo = sorted[low < 0 ? 0 : low > n - 1 ? n - 1 : low];
    *hi = sorted[high < 0 ? 0 : high > n - 1 ? n - 1 : high];
    return low >= 0 && high <= n - 1;
}

tsr_status tsr_repeat(tsr_measure_fn fn, void *ctx, double budget_s, int min_runs, int max_runs, double *values,
                      int *n) {
    *n = 0;
    double warm;
    tsr_status st = fn(ctx, &warm); /* warm-up: compilation, first touch, caches */
    if (st != TSR_SUCCESS) return st;
    double start = tsr_now_s();
    while (*n < max_runs && (*n < min_runs || tsr_now_s() - start < budget_s)) {
        if ((st = fn(ctx, &values[*n])) != TSR_SUCCESS) return st;
        ++*n;
    }
    return TSR_SUCCESS;
}
