/* Measurement shared by the tuner and the benchmarks: the monotonic clock, device time from
 * profiling events with their timestamps checked, each device's timing method (decided once by a
 * probe kernel: profiling events, or the host clock over batches of launches where the driver's
 * timestamps cannot be trusted), timers that measure by that method, repetitions under a time
 * budget, and the median, quartile and spread of what was measured. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double tsr_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

tsr_status tsr_timestamps_check(cl_ulong start, cl_ulong end, tsr_event_clock *clock, const char *what,
                                double *seconds) {
    /* A driver that leaves timestamps unset, stands them still or runs them backwards would
     * otherwise produce an absurd time that a tuner or benchmark takes for the truth. */
    if (start == 0 || end == 0)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: unusable timestamps: the device reported %s 0 for a profiled command",
                        what, start == 0 ? "a start of" : "an end of");
    if (end < start)
        return tsr_fail(TSR_ERR_UNSUPPORTED,
                        "%s: unusable timestamps: the command ended (%llu ns) before it started (%llu ns)",
                        what, (unsigned long long)end, (unsigned long long)start);
    if (end == start) /* a time of 0 is never a result */
        return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: unusable timestamps: the command took 0 ns (start = end = %llu ns)",
                        what, (unsigned long long)start);
    if (clock && clock->last_end) {
        if (start < clock->last_end)
            return tsr_fail(TSR_ERR_UNSUPPORTED,
                            "%s: unusable timestamps: a command started (%llu ns) before the one before it on the "
                            "same in-order queue ended (%llu ns)",
                            what, (unsigned long long)start, (unsigned long long)clock->last_end);
    }
    if (clock) clock->last_start = start, clock->last_end = end;
    *seconds = (double)(end - start) * 1e-9;
    return TSR_SUCCESS;
}

tsr_status tsr_event_seconds(cl_event first, cl_event last, const char *what, tsr_event_clock *clock,
                             double *seconds) {
    cl_ulong start = 0, end = 0;
    cl_int err = clWaitForEvents(1, &last);
    if (err == CL_SUCCESS) err = clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL);
    if (err == CL_SUCCESS) err = clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
    /* A queue without profiling: no timestamps at all, which host timing can replace. */
    if (err == CL_PROFILING_INFO_NOT_AVAILABLE)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: unusable timestamps: profiling information is not available "
                        "(CL_PROFILING_INFO_NOT_AVAILABLE: a queue created without CL_QUEUE_PROFILING_ENABLE?)", what);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, what, __FILE__, __LINE__);
    return tsr_timestamps_check(start, end, clock, what, seconds);
}

/* ---- the device's timing method ---- */

const char *tsr_timing_name(tsr_timing_method method) {
    return method == TSR_TIMING_DEVICE ? "device" : method == TSR_TIMING_HOST ? "host" : "undecided";
}

/* The probe: a dependent multiply-add chain per work-item, cheap to compile, its length set by the
 * number of work-items: llvmpipe (Mesa) silently ends any loop after about 65535 iterations, so
 * a longer loop would not make a longer kernel there. The store never happens (the chain tends
 * to 1) but keeps the loop from being dropped. And an empty kernel for the launch cost. */
static const char probe_source[] =
    "kernel void tsr_timing_probe(global float *out, float m, float c) {\n"
    "    float a = (float)(get_global_id(0) & 1023) * 1e-3f;\n"
    "    for (int i = 0; i < 16384; ++i) a = mad(a, m, c);\n"
    "    if (a == -1.0f) out[0] = a;\n"
    "}\n"
    "kernel void tsr_timing_empty(global float *out) { (void)out; }\n";

#define PROBE_ITEMS 32          /* work-items of the first calibration run */
#define PROBE_TARGET_S 0.02     /* one probe run: long against any launch cost */
#define PROBE_RUNS 5
#define PROBE_MAX_ITEMS ((size_t)1 << 26)
#define EMPTY_RUNS 15

typedef struct probe {
    cl_command_queue queue;
    cl_program program;
    cl_kernel spin, empty;
    cl_mem out;
} probe;

static void probe_release(probe *p) {
    if (p->spin) clReleaseKernel(p->spin);
    if (p->empty) clReleaseKernel(p->empty);
    if (p->program) clReleaseProgram(p->program);
    if (p->out) clReleaseMemObject(p->out);
}

/* A probe's program, built straight from its source: probes sit below the program cache (they
 * decide how that layer's users are timed), and are small enough to build each time. */
static tsr_status probe_program(tsr_device *dev, const char *source, cl_program *program) {
    cl_int err;
    *program = clCreateProgramWithSource(dev->context, 1, &source, NULL, &err);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "clCreateProgramWithSource(a probe)", __FILE__, __LINE__);
    err = clBuildProgram(*program, 1, &dev->id, "", NULL, NULL);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "clBuildProgram(a probe)", __FILE__, __LINE__);
    return TSR_SUCCESS;
}

static tsr_status probe_build(tsr_device *dev, probe *p) {
    tsr_status status = TSR_SUCCESS;
    cl_int err;
    p->queue = dev->queue;
    TSR_CHECK(status, probe_program(dev, probe_source, &p->program), done);
    p->spin = clCreateKernel(p->program, "tsr_timing_probe", &err);
    TSR_CL_CHECK(status, err, done);
    p->empty = clCreateKernel(p->program, "tsr_timing_empty", &err);
    TSR_CL_CHECK(status, err, done);
    p->out = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, sizeof(float), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    float m = 0.999f, c = 1e-3f;
    TSR_CL_CHECK(status, clSetKernelArg(p->spin, 0, sizeof p->out, &p->out), done);
    TSR_CL_CHECK(status, clSetKernelArg(p->spin, 1, sizeof m, &m), done);
    TSR_CL_CHECK(status, clSetKernelArg(p->spin, 2, sizeof c, &c), done);
    TSR_CL_CHECK(status, clSetKernelArg(p->empty, 0, sizeof p->out, &p->out), done);
done:
    if (status != TSR_SUCCESS) tsr_error_append(" (building the timing probe on '%s')", dev->info.name);
    return status;
}

/* One probe run of `items` work-items: host seconds around enqueue + clFinish, and its event. */
static tsr_status probe_run(probe *p, size_t items, double *host_s, cl_event *event) {
    double t0 = tsr_now_s();
    cl_int err = clEnqueueNDRangeKernel(p->queue, p->spin, 1, NULL, &items, NULL, 0, NULL, event);
    if (err == CL_SUCCESS) err = clFinish(p->queue);
    *host_s = tsr_now_s() - t0;
    if (err != CL_SUCCESS) {
        if (event && *event) clReleaseEvent(*event), *event = NULL;
        return tsr_fail_cl(err, "running the timing probe", __FILE__, __LINE__);
    }
    return TSR_SUCCESS;
}

static int compare_doubles(const void *a, const void *b);

/* Median enqueue + clFinish of the empty kernel (after warm-ups: the first launch may compile). */
static tsr_status probe_empty_launch(probe *p, double *seconds) {
    double t[EMPTY_RUNS];
    size_t one = 1;
    for (int i = -3; i < EMPTY_RUNS; ++i) {
        double t0 = tsr_now_s();
        cl_int err = clEnqueueNDRangeKernel(p->queue, p->empty, 1, NULL, &one, NULL, 0, NULL, NULL);
        if (err == CL_SUCCESS) err = clFinish(p->queue);
        if (err != CL_SUCCESS) return tsr_fail_cl(err, "timing an empty launch", __FILE__, __LINE__);
        if (i >= 0) t[i] = tsr_now_s() - t0;
    }
    qsort(t, EMPTY_RUNS, sizeof t[0], compare_doubles);
    *seconds = t[EMPTY_RUNS / 2];
    return TSR_SUCCESS;
}

/* Are the device's timestamps usable? Fills `why` when they are not; an OpenCL failure of the
 * probe itself is returned. */
static tsr_status probe_timestamps(tsr_device *dev, probe *p, bool *usable, char *why, size_t size) {
    *usable = false;
    /* Calibrate on the host clock (the device's is what is on trial): the first run also compiles
     * (rusticl compiles at the first enqueue). */
    size_t items = PROBE_ITEMS;
    double host_s = 0;
    tsr_status st = probe_run(p, items, &host_s, NULL);
    for (int step = 0; st == TSR_SUCCESS && step < 16; ++step) {
        st = probe_run(p, items, &host_s, NULL);
        if (st != TSR_SUCCESS) break;
        if (host_s >= PROBE_TARGET_S || items >= PROBE_MAX_ITEMS) break;
        double grow = host_s > 0 ? 1.25 * PROBE_TARGET_S / host_s : 16;
        grow = grow < 2 ? 2 : grow > 16 ? 16 : grow;
        items = (size_t)fmin((double)PROBE_MAX_ITEMS, ceil(items * grow / 32) * 32);
    }
    if (st != TSR_SUCCESS) return st;
    const char *device = dev->info.name, *platform = dev->info.platform_name;
    double ratios[PROBE_RUNS], host[PROBE_RUNS];
    tsr_event_clock clock = {0};
    for (int run = 0; run < PROBE_RUNS; ++run) {
        cl_event ev = NULL;
        TSR_CHECK(st, probe_run(p, items, &host[run], &ev), done);
        double device_s = 0;
        char what[TSR_INFO_STR * 2 + 64];
        snprintf(what, sizeof what, "%s (%s)", platform, device);
        st = tsr_event_seconds(ev, ev, what, &clock, &device_s);
        clReleaseEvent(ev);
        if (st == TSR_ERR_UNSUPPORTED) {
            snprintf(why, size, "%s, in a %.1f ms probe kernel (host clock)", tsr_last_error(), host[run] * 1e3);
            tsr_clear_error();
            return TSR_SUCCESS;
        }
        if (st != TSR_SUCCESS) return st;
        ratios[run] = device_s / host[run];
    }
    qsort(ratios, PROBE_RUNS, sizeof ratios[0], compare_doubles);
    qsort(host, PROBE_RUNS, sizeof host[0], compare_doubles);
    double ratio = ratios[PROBE_RUNS / 2], h = host[PROBE_RUNS / 2];
    /* The command runs inside enqueue .. clFinish: its device time cannot exceed the host's (2%
     * and 0.2 ms for clocks read at different moments), and with a ~20 ms kernel the launch
     * cost is small, so it is most of it (half leaves room for a busy machine). */
    if (ratio > 1.02 + 2e-4 / h)
        snprintf(why, size, "%.100s (%.100s): unusable timestamps: a %.2f ms probe kernel (host clock around clFinish) "
                 "reported %.2f ms of device time, more than the host saw", platform, device, h * 1e3, ratio * h * 1e3);
    else if (ratio < 0.5)
        snprintf(why, size, "%.100s (%.100s): unusable timestamps: a %.2f ms probe kernel (host clock around clFinish) "
                 "reported %.4g ms of device time, %.2g%% of it", platform, device, h * 1e3, ratio * h * 1e3,
                 100 * ratio);
    else *usable = true;
done:
    return st;
}

tsr_status tsr_device_timing(tsr_device *dev, tsr_timing_method *method, const char **reason) {
    pthread_mutex_lock(&dev->lock);
    tsr_status st = TSR_SUCCESS;
    struct tsr_timing_state *t = &dev->timing;
    if (t->method == TSR_TIMING_UNDECIDED) {
        const char *env = getenv("TSR_TIMING");
        bool force_device = env && strcmp(env, "device") == 0, force_host = env && strcmp(env, "host") == 0;
        if (env && *env && !force_device && !force_host && strcmp(env, "auto") != 0) {
            st = tsr_fail(TSR_ERR_INVALID_ARG, "TSR_TIMING='%.64s': expected device, host or auto", env);
            goto done;
        }
        probe p = {0};
        bool usable = force_device;
        char why[sizeof t->reason] = "";
        st = probe_build(dev, &p);
        if (st == TSR_SUCCESS) st = probe_empty_launch(&p, &t->empty_launch_s);
        if (st == TSR_SUCCESS && !force_device && !force_host) st = probe_timestamps(dev, &p, &usable, why, sizeof why);
        probe_release(&p);
        if (st != TSR_SUCCESS) goto done;
        if (force_host) snprintf(why, sizeof why, "TSR_TIMING=host");
        t->forced = force_device || force_host;
        t->method = usable ? TSR_TIMING_DEVICE : TSR_TIMING_HOST;
        tsr_strlcpy(t->reason, usable ? "" : why, sizeof t->reason);
    }
done:
    if (method) *method = (tsr_timing_method)t->method;
    if (reason) *reason = t->reason;
    pthread_mutex_unlock(&dev->lock);
    return st;
}

double tsr_device_empty_launch_s(tsr_device *dev) {
    pthread_mutex_lock(&dev->lock);
    double s = dev->timing.empty_launch_s;
    pthread_mutex_unlock(&dev->lock);
    return s;
}

/* After a timing whose events failed the checks: host timing from now on, said once. */
static void fall_back_to_host(tsr_device *dev, const char *why) {
    pthread_mutex_lock(&dev->lock);
    if (dev->timing.method != TSR_TIMING_HOST) {
        dev->timing.method = TSR_TIMING_HOST;
        tsr_strlcpy(dev->timing.reason, why, sizeof dev->timing.reason);
        tsr_warn("%s; timing '%s' with the host clock from now on", why, dev->info.name);
    }
    pthread_mutex_unlock(&dev->lock);
}

/* ---- the device's loop limit ---- */

#define LOOP_PROBE_ITERATIONS 1000000u

/* A linear congruential step per iteration: no compiler folds the loop into a closed form, and
 * the host finds how many steps ran from the value left. */
static const char loop_probe_source[] =
    "kernel void tsr_loop_probe(global uint *out, uint n) {\n"
    "    uint x = 1u;\n"
    "    for (uint i = 0; i < n; ++i) x = x * 1103515245u + 12345u;\n"
    "    out[0] = x;\n"
    "}\n";

static tsr_status probe_loop_limit(tsr_device *dev, uint64_t *limit) {
    tsr_status status = TSR_SUCCESS;
    cl_int err;
    cl_program program = NULL;
    cl_kernel kernel = NULL;
    cl_mem out = NULL;
    cl_uint n = LOOP_PROBE_ITERATIONS, x = 0;
    size_t one = 1;
    TSR_CHECK(status, probe_program(dev, loop_probe_source, &program), done);
    kernel = clCreateKernel(program, "tsr_loop_probe", &err);
    TSR_CL_CHECK(status, err, done);
    out = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, sizeof x, NULL, &err);
    TSR_CL_CHECK(status, err, done);
    TSR_CL_CHECK(status, clSetKernelArg(kernel, 0, sizeof out, &out), done);
    TSR_CL_CHECK(status, clSetKernelArg(kernel, 1, sizeof n, &n), done);
    TSR_CL_CHECK(status, clEnqueueNDRangeKernel(dev->queue, kernel, 1, NULL, &one, NULL, 0, NULL, NULL), done);
    TSR_CL_CHECK(status, clEnqueueReadBuffer(dev->queue, out, CL_TRUE, 0, sizeof x, &x, 0, NULL, NULL), done);
    /* The number of steps that leaves x: all of them, or where the device stopped. */
    *limit = UINT64_MAX;
    cl_uint h = 1u;
    for (cl_uint steps = 0; steps < n; ++steps) {
        if (h == x) {
            *limit = steps ? steps : 1; /* 0 means "not probed" */
            break;
        }
        h = h * 1103515245u + 12345u;
    }
done:
    if (status != TSR_SUCCESS) tsr_error_append(" (probing the loop limit of '%s')", dev->info.name);
    if (out) clReleaseMemObject(out);
    if (kernel) clReleaseKernel(kernel);
    if (program) clReleaseProgram(program);
    return status;
}

tsr_status tsr_device_loop_limit(tsr_device *dev, uint64_t *limit) {
    pthread_mutex_lock(&dev->lock);
    tsr_status st = TSR_SUCCESS;
    if (dev->loop_limit == 0) st = probe_loop_limit(dev, &dev->loop_limit);
    *limit = dev->loop_limit;
    pthread_mutex_unlock(&dev->lock);
    return st;
}

/* ---- timers ---- */

#define HOST_BATCH_MIN_S 0.005 /* a host-timed batch lasts at least this... */
#define HOST_BATCH_EMPTY 50    /* ...and this many empty-launch costs, so subtracting one is a small correction */
#define HOST_MAX_BATCH 4096

static tsr_status host_batch(tsr_timer *timer, tsr_device *dev, tsr_launch_fn launch, void *ctx, double *seconds) {
    double empty = tsr_device_empty_launch_s(dev);
    double target = fmax(HOST_BATCH_MIN_S, HOST_BATCH_EMPTY * empty);
    if (timer->batch < 1) { /* the timer's first launch builds programs and touches memory: not timed */
        tsr_status st = launch(ctx, NULL, NULL);
        cl_int err = clFinish(dev->queue);
        if (st != TSR_SUCCESS) return st;
        if (err != CL_SUCCESS) return tsr_fail_cl(err, "clFinish(a first launch)", __FILE__, __LINE__);
        timer->batch = 1;
    }
    for (int attempt = 0;; ++attempt) {
        int n = timer->batch;
        double t0 = tsr_now_s();
        for (int i = 0; i < n; ++i) {
            tsr_status st = launch(ctx, NULL, NULL);
            if (st != TSR_SUCCESS) {
                clFinish(dev->queue);
                return st;
            }
        }
        cl_int err = clFinish(dev->queue);
        double wall = tsr_now_s() - t0;
        if (err != CL_SUCCESS) return tsr_fail_cl(err, "clFinish(timing a batch of launches)", __FILE__, __LINE__);
        if (wall < target && n < HOST_MAX_BATCH && attempt < 8) { /* too short to time: a longer batch, this one discarded */
            double grow = wall > 0 ? 1.2 * target / wall : 16;
            timer->batch = (int)fmin(HOST_MAX_BATCH, ceil(n * fmin(fmax(grow, 2), 64)));
            continue;
        }
        if (wall > 8 * target && n > 1) /* the next one need not be this long */
            timer->batch = (int)fmax(1, floor(n * 2 * target / wall));
        double net = wall - empty;
        if (!(net > 0.5 * wall))
            return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: a batch of %d launches took %.3f ms on the host clock, hardly more "
                            "than one empty launch (%.3f ms): too short to time", timer->what ? timer->what : "timing",
                            n, wall * 1e3, empty * 1e3);
        *seconds = net / n;
        return TSR_SUCCESS;
    }
}

tsr_status tsr_timer_run(tsr_timer *timer, tsr_device *dev, tsr_launch_fn launch, void *ctx, double *seconds) {
    *seconds = 0;
    tsr_timing_method method;
    tsr_status st = tsr_device_timing(dev, &method, NULL);
    if (st != TSR_SUCCESS) return st;
    const char *what = timer->what ? timer->what : "timing a launch";
    double s = 0;
    if (method == TSR_TIMING_DEVICE) {
        cl_event first = NULL, last = NULL;
        TSR_CHECK(st, launch(ctx, &first, &last), done);
        st = tsr_event_seconds(first, last, what, &timer->clock, &s);
        if (first) clReleaseEvent(first);
        if (last) clReleaseEvent(last);
        if (st == TSR_ERR_UNSUPPORTED && !dev->timing.forced) {
            char why[sizeof dev->timing.reason];
            tsr_strlcpy(why, tsr_last_error(), sizeof why);
            tsr_clear_error();
            fall_back_to_host(dev, why);
            method = TSR_TIMING_HOST;
        } else if (st != TSR_SUCCESS) {
            return st;
        } else {
            timer->device_runs++;
        }
    }
    if (method == TSR_TIMING_HOST) {
        TSR_CHECK(st, host_batch(timer, dev, launch, ctx, &s), done);
        timer->host_runs++;
    }
    if (!(s > 0) || !isfinite(s)) /* the checks above make this unreachable; a zero is never a result */
        return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: the measured time %g s is not a positive number", what, s);
    *seconds = s;
done:
    return st;
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

bool tsr_quantile_known(const double *values, int n, double p, double precision, double *scratch) {
    if (n < 1) return false;
    memcpy(scratch, values, (size_t)n * sizeof *values);
    tsr_stats stats;
    tsr_stats_of(scratch, n, &stats); /* sorts scratch */
    double low, high, at = p == 0.5 ? stats.median : scratch[(int)floor(p * (n - 1))]; /* the quantile tsr_stats_of reports */
    bool enough = tsr_quantile_bounds(scratch, n, p, &low, &high);
    return enough && 0.5 * (high - low) <= precision * at;
}

tsr_status tsr_repeat(tsr_measure_fn fn, void *ctx, double budget_s, int min_runs, int max_runs, double precision,
                      double *values, int *n) {
    *n = 0;
    double warm;
    tsr_status st = fn(ctx, &warm); /* warm-up: compilation, first touch, caches */
    if (st != TSR_SUCCESS) return st;
    double *scratch = precision > 0 ? malloc((size_t)max_runs * sizeof *scratch) : NULL;
    if (precision > 0 && !scratch) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    double start = tsr_now_s();
    while (*n < max_runs && (*n < min_runs || (tsr_now_s() - start < budget_s &&
                                               !(scratch && tsr_quantile_known(values, *n, 0.5, precision, scratch))))) {
        st = fn(ctx, &values[*n]);
        if (st != TSR_SUCCESS) break;
        ++*n;
    }
    free(scratch);
    return st;
}
