/* `tessera peak`: a device's measured limits. Global-memory bandwidth (read, write, copy; per
 * vector width; both access layouts, the better one kept), fp32 multiply-add throughput (per
 * vector width and number of independent chains), kernel launch latency (dispatch and round
 * trip), host <-> device transfers (read, write, map), and on CPU devices the host's own
 * multi-threaded memcpy for comparison. Every test repeats until its time budget is spent (at
 * least 3 runs) and reports the median and the spread. */
#include "report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int widths[PEAK_WIDTHS] = {1, 2, 4, 8, 16};
static const int chain_counts[] = {4, 8, 16};

/* A reduced run (simulated devices, quick checks) covers one vector width (float4), one layout
 * and one chain count. */
static bool reduced(const peak_options *opt) { return opt->reduced || opt->simulator; }
static bool wanted_width(const peak_options *opt, int w) { return !reduced(opt) || widths[w] == 4; }

/* One run of a test: fills *rate (GB/s, GFLOP/s or microseconds). */
typedef tsr_status (*peak_fn)(void *ctx, double *rate);

/* fn with opt->progress called before every run: one run of a slow layout can take a second or
 * more, and a fleet's ranks count a gap in progress longer than TSR_MPI_TIMEOUT as a stall. */
typedef struct stepped_ctx {
    const peak_options *opt;
    peak_fn fn;
    void *ctx;
} stepped_ctx;

static tsr_status stepped_run(void *vctx, double *rate) {
    stepped_ctx *c = vctx;
    c->opt->progress(c->opt->progress_user);
    return c->fn(c->ctx, rate);
}

/* Repeat fn until the budget is spent (at least 3, at most 2000 runs) after one warm-up; each
 * run is a step of progress for opt->progress (opt may be NULL). */
static tsr_status repeat(const peak_options *opt, peak_fn fn, void *ctx, double budget_s, peak_stat *out) {
    stepped_ctx stepped = {.opt = opt, .fn = fn, .ctx = ctx};
    if (opt && opt->progress) {
        fn = stepped_run;
        ctx = &stepped;
    }
    enum { MAX_RUNS = 2000 };
    double *v = malloc(MAX_RUNS * sizeof *v);
    if (!v) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    int n = 0;
    tsr_status st = tsr_repeat(fn, ctx, budget_s, 3, MAX_RUNS, 0, v, &n);
    if (st == TSR_SUCCESS) {
        tsr_stats stats;
        tsr_stats_of(v, n, &stats);
        out->median = stats.median;
        out->min = stats.min;
        out->max = stats.max;
        out->runs = n;
    }
    free(v);
    return st;
}

/* ---- bandwidth ---- */

typedef struct bw_ctx {
    tsr_device *dev;
    cl_kernel kernel;
    size_t global, local; /* local 0: the runtime's choice */
    double bytes;         /* that must move per run */
    tsr_timer timer;      /* by the device's timing method */
} bw_ctx;

static tsr_status launch_kernel(void *vctx, cl_event *first, cl_event *last) {
    bw_ctx *c = vctx;
    cl_event ev = NULL;
    cl_int err = clEnqueueNDRangeKernel(tsr_device_queue(c->dev), c->kernel, 1, NULL, &c->global,
                                        c->local ? &c->local : NULL, 0, NULL, first || last ? &ev : NULL);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "clEnqueueNDRangeKernel(peak)", __FILE__, __LINE__);
    if (first) *first = ev, clRetainEvent(ev);
    if (last) *last = ev;
    else if (ev) clReleaseEvent(ev);
    return TSR_SUCCESS;
}

static tsr_status run_kernel_rate(void *vctx, double *rate) {
    bw_ctx *c = vctx;
    double s = 0;
    if (!c->timer.what) c->timer.what = "timing a peak kernel";
    tsr_status st = tsr_timer_run(&c->timer, c->dev, launch_kernel, c, &s);
    if (st == TSR_SUCCESS) *rate = c->bytes / s * 1e-9;
    return st;
}

/* Host timing as soon as any measurement of the tests used it. */
static void note_timing(peak_result *r, const bw_ctx *c) {
    if (c->timer.host_runs) r->host_timed = true;
}

/* Work-items for a layout: grid-stride loops want many (each GPU core busy), contiguous runs
 * want a few per compute unit, each its own work-group (no work-item vectorization that would
 * turn a run into strided gathers). */
/* Devices that run one work-item per SIMD lane (GPUs, Mesa's llvmpipe) want many light work-items:
 * a CPU-shaped kernel there leaves lanes idle, and llvmpipe also ends any loop after 65535
 * iterations without a word, so a long per-item loop would count work that never ran. */
static bool lanes_across_items(const tsr_device *dev) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    return info->type != TSR_DEVICE_CPU || tsr_device_lanes(info) == TSR_LANES_ACROSS_ITEMS;
}

#define PEAK_MAX_LOOP 65535 /* iterations per work-item on devices that run items across lanes */

/* The layouts a bandwidth test tries, [first, last] of 0 (contiguous) and 1 (interleaved): both on a
 * full run, the one that fits how the device fills its lanes on a reduced one; only interleaved
 * on a CPU that runs items across lanes, where a contiguous range per item is a long loop. */
static void bandwidth_layouts(const tsr_device *dev, const peak_options *opt, int *first, int *last) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    bool simt_cpu = info->type == TSR_DEVICE_CPU && tsr_device_lanes(info) == TSR_LANES_ACROSS_ITEMS;
    bool vector_cpu = info->type == TSR_DEVICE_CPU && !simt_cpu;
    *first = simt_cpu || (reduced(opt) && !vector_cpu) ? 1 : 0;
    *last = reduced(opt) || simt_cpu ? *first : 1;
}

static void layout_geometry(const tsr_device *dev, int interleave, size_t vectors, size_t *global, size_t *local) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    size_t cu = info->compute_units ? info->compute_units : 1;
    if (interleave) {
        size_t g = cu * 4096 > 1024 ? cu * 4096 : 1024;
        *global = g < vectors ? g : vectors;
        *local = 0;
    } else {
        *global = cu * 8 < vectors ? cu * 8 : vectors;
        *local = 1;
    }
}

static tsr_status measure_bandwidth(tsr_device *dev, const peak_options *opt, peak_result *r, cl_mem a, cl_mem b,
                                    cl_mem sink, size_t bytes) {
    tsr_status st = TSR_SUCCESS;
    static const char *const names[3] = {"bw_read", "bw_write", "bw_copy"};
    for (int w = 0; w < PEAK_WIDTHS && st == TSR_SUCCESS; ++w) {
        if (!wanted_width(opt, w)) continue;
        cl_uint vectors = (cl_uint)(bytes / sizeof(float) / (size_t)widths[w]);
        for (int kind = 0; kind < 3 && st == TSR_SUCCESS; ++kind) {
            int first_layout, last_layout;
            bandwidth_layouts(dev, opt, &first_layout, &last_layout);
            for (int interleave = first_layout; interleave <= last_layout && st == TSR_SUCCESS; ++interleave) {
                char options[64];
                snprintf(options, sizeof options, "-DVW=%d -DINTERLEAVE=%d", widths[w], interleave);
                cl_program program;
                if ((st = tsr_program_for(dev, "peak", options, names[kind], &program)) != TSR_SUCCESS) break;
                cl_int err;
                bw_ctx c = {.dev = dev};
                c.kernel = clCreateKernel(program, names[kind], &err);
                if (err != CL_SUCCESS) {
                    st = tsr_fail_cl(err, "clCreateKernel(peak)", __FILE__, __LINE__);
                    break;
                }
                cl_uint seed = 12345u;
                if (kind == 0) {
                    err = clSetKernelArg(c.kernel, 0, sizeof a, &a);
                    err |= clSetKernelArg(c.kernel, 1, sizeof vectors, &vectors);
                    err |= clSetKernelArg(c.kernel, 2, sizeof sink, &sink);
                } else if (kind == 1) {
                    err = clSetKernelArg(c.kernel, 0, sizeof b, &b);
                    err |= clSetKernelArg(c.kernel, 1, sizeof vectors, &vectors);
                    err |= clSetKernelArg(c.kernel, 2, sizeof seed, &seed);
                } else {
                    err = clSetKernelArg(c.kernel, 0, sizeof a, &a);
                    err |= clSetKernelArg(c.kernel, 1, sizeof b, &b);
                    err |= clSetKernelArg(c.kernel, 2, sizeof vectors, &vectors);
                }
                layout_geometry(dev, interleave, vectors, &c.global, &c.local);
                c.bytes = (double)vectors * widths[w] * sizeof(float) * (kind == 2 ? 2 : 1);
                peak_stat s = {0};
                if (err != CL_SUCCESS) st = tsr_fail_cl(err, "clSetKernelArg(peak)", __FILE__, __LINE__);
                else st = repeat(opt, run_kernel_rate, &c, opt->budget_s, &s);
                note_timing(r, &c);
                clReleaseKernel(c.kernel);
                peak_stat *dst = kind == 0 ? &r->read[w] : kind == 1 ? &r->write[w] : &r->copy[w];
                int *lay = &r->layout[kind][w];
                if (st == TSR_SUCCESS && s.median > dst->median) *dst = s, *lay = interleave;
            }
            const peak_stat *got = kind == 0 ? &r->read[w] : kind == 1 ? &r->write[w] : &r->copy[w];
            if (st == TSR_SUCCESS && got->median > r->bandwidth_gbps) {
                r->bandwidth_gbps = got->median;
                snprintf(r->bandwidth_best, sizeof r->bandwidth_best, "%s, float%d, %s", names[kind] + 3, widths[w],
                         r->layout[kind][w] ? "interleaved" : "contiguous");
            }
        }
    }
    return st;
}

/* ---- compute ---- */

static tsr_status measure_compute(tsr_device *dev, const peak_options *opt, peak_result *r, cl_mem sink,
                                  size_t sink_floats) {
    tsr_status st = TSR_SUCCESS;
    const tsr_device_info *info = tsr_device_get_info(dev);
    size_t cu = info->compute_units ? info->compute_units : 1;
    bool across = lanes_across_items(dev);
    size_t global = opt->simulator ? 64 : across ? cu * 2048 : cu * 8;
    if (global > sink_floats) global = sink_floats;
    int max_iters = across ? PEAK_MAX_LOOP : 1 << 22;
    enum { NCHAINS = sizeof chain_counts / sizeof chain_counts[0] };
    for (int w = 0; w < PEAK_WIDTHS && st == TSR_SUCCESS; ++w) {
        if (!wanted_width(opt, w)) continue;
        /* Every chain count with fma(), then the best one with mad(): where fma() is not one
         * instruction (llvmpipe computes it exactly in software) mad() is the device's fastest
         * multiply-add, and what kernels built with -cl-mad-enable get. */
        for (size_t ci = 0; ci <= NCHAINS && st == TSR_SUCCESS; ++ci) {
            bool mad = ci == NCHAINS;
            int chains = mad ? r->chains[w] : chain_counts[ci];
            if (mad && chains == 0) break; /* no fma run succeeded */
            if (reduced(opt) && chains != 8) continue;
            char options[64];
            snprintf(options, sizeof options, "-DVW=%d -DCHAINS=%d%s", widths[w], chains, mad ? " -DPEAK_MAD" : "");
            cl_program program;
            if ((st = tsr_program_for(dev, "peak", options, "fma_peak", &program)) != TSR_SUCCESS) break;
            cl_int err;
            bw_ctx c = {.dev = dev, .global = global, .local = across ? 0 : 1};
            c.kernel = clCreateKernel(program, "fma_peak", &err);
            if (err != CL_SUCCESS) {
                st = tsr_fail_cl(err, "clCreateKernel(fma_peak)", __FILE__, __LINE__);
                break;
            }
            float m = 0.999f, add = 1e-3f;
            cl_int iters = 64;
            err = clSetKernelArg(c.kernel, 0, sizeof sink, &sink);
            err |= clSetKernelArg(c.kernel, 1, sizeof m, &m);
            err |= clSetKernelArg(c.kernel, 2, sizeof add, &add);
            /* Calibrate: a run of about 20 ms (simulators: a few iterations). */
            double seconds = 0;
            for (int cal = 0; cal < 8 && err == CL_SUCCESS && st == TSR_SUCCESS; ++cal) {
                err = clSetKernelArg(c.kernel, 3, sizeof iters, &iters);
                c.bytes = 2.0 * chains * widths[w] * (double)iters * (double)global; /* FLOPs */
                double rate;
                if (err == CL_SUCCESS && (st = run_kernel_rate(&c, &rate)) == TSR_SUCCESS) {
                    seconds = c.bytes * 1e-9 / rate;
                    if (seconds > 0.01 || opt->simulator || iters >= max_iters) break;
                    iters = iters * (seconds < 0.0005 ? 16 : 4) > max_iters ? max_iters : iters * (seconds < 0.0005 ? 16 : 4);
                }
            }
            peak_stat s = {0};
            if (err != CL_SUCCESS) st = tsr_fail_cl(err, "clSetKernelArg(fma_peak)", __FILE__, __LINE__);
            else if (st == TSR_SUCCESS) st = repeat(opt, run_kernel_rate, &c, opt->budget_s, &s);
            note_timing(r, &c);
            clReleaseKernel(c.kernel);
            if (st == TSR_SUCCESS && s.median > r->compute[w].median)
                r->compute[w] = s, r->chains[w] = chains, r->compute_mad[w] = mad;
        }
        if (st == TSR_SUCCESS && r->compute[w].median > r->compute_gflops) {
            r->compute_gflops = r->compute[w].median;
            snprintf(r->compute_best, sizeof r->compute_best, "float%d, %d chains, %s", widths[w], r->chains[w],
                     r->compute_mad[w] ? "mad" : "fma");
        }
    }
    return st;
}

/* ---- launch latency ---- */

typedef struct launch_ctx {
    tsr_device *dev;
    cl_kernel kernel;
    int batch; /* launches per run; 1: wait for each */
} launch_ctx;

static tsr_status run_launches(void *vctx, double *us) {
    launch_ctx *c = vctx;
    size_t one = 1;
    double t0 = util_now_s();
    for (int i = 0; i < c->batch; ++i) {
        cl_int err = clEnqueueNDRangeKernel(tsr_device_queue(c->dev), c->kernel, 1, NULL, &one, NULL, 0, NULL, NULL);
        if (err != CL_SUCCESS) return tsr_fail_cl(err, "clEnqueueNDRangeKernel(empty)", __FILE__, __LINE__);
        if (c->batch == 1) clFinish(tsr_device_queue(c->dev));
    }
    clFinish(tsr_device_queue(c->dev));
    *us = (util_now_s() - t0) * 1e6 / c->batch;
    return TSR_SUCCESS;
}

static tsr_status measure_launch(tsr_device *dev, const peak_options *opt, peak_result *r) {
    cl_program program;
    tsr_status st = tsr_program_for(dev, "peak", "-DVW=1", "empty", &program);
    if (st != TSR_SUCCESS) return st;
    cl_int err;
    launch_ctx c = {.dev = dev, .batch = opt->simulator ? 8 : 100};
    c.kernel = clCreateKernel(program, "empty", &err);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "clCreateKernel(empty)", __FILE__, __LINE__);
    st = repeat(opt, run_launches, &c, opt->budget_s, &r->dispatch_us);
    c.batch = 1;
    if (st == TSR_SUCCESS) st = repeat(opt, run_launches, &c, opt->budget_s, &r->round_trip_us);
    clReleaseKernel(c.kernel);
    return st;
}

/* ---- transfers ---- */

typedef struct xfer_ctx {
    tsr_device *dev;
    cl_mem buf;
    float *host;
    size_t bytes;
    int kind; /* 0 write (host to device), 1 read, 2 map for reading, 3 map for writing */
} xfer_ctx;

static tsr_status run_transfer(void *vctx, double *gbps) {
    xfer_ctx *c = vctx;
    cl_command_queue q = tsr_device_queue(c->dev);
    cl_int err = CL_SUCCESS;
    double t0 = util_now_s();
    if (c->kind == 0) {
        err = clEnqueueWriteBuffer(q, c->buf, CL_TRUE, 0, c->bytes, c->host, 0, NULL, NULL);
    } else if (c->kind == 1) {
        err = clEnqueueReadBuffer(q, c->buf, CL_TRUE, 0, c->bytes, c->host, 0, NULL, NULL);
    } else {
        cl_map_flags flags = c->kind == 2 ? CL_MAP_READ : CL_MAP_WRITE_INVALIDATE_REGION;
        void *p = clEnqueueMapBuffer(q, c->buf, CL_TRUE, flags, 0, c->bytes, 0, NULL, NULL, &err);
        if (err == CL_SUCCESS) {
            if (c->kind == 2) memcpy(c->host, p, c->bytes);
            else memcpy(p, c->host, c->bytes);
            err = clEnqueueUnmapMemObject(q, c->buf, p, 0, NULL, NULL);
            if (err == CL_SUCCESS) err = clFinish(q);
        }
    }
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "a host-device transfer", __FILE__, __LINE__);
    *gbps = (double)c->bytes / (util_now_s() - t0) * 1e-9;
    return TSR_SUCCESS;
}

/* ---- the host's own bandwidth (CPU devices) ----
 * Each thread takes one slice and walks it as `streams` equal parts in lockstep, 64 bytes of each
 * in turn. One stream is what memcpy and a plain loop do; several concurrent streams per core
 * are what a CPU OpenCL driver produces when it runs a work-group's items side by side, and on
 * some machines they draw noticeably more bandwidth (here about 20% more for reading), so the
 * host's figure is the better of 1 and HOST_STREAMS streams, like the device's better layout. */

#define HOST_STREAMS 4
#define HOST_BLOCK 64 /* bytes */

typedef struct host_part {
    const char *src;
    char *dst; /* NULL: read only */
    size_t bytes; /* a multiple of streams * HOST_BLOCK */
    int streams;
    uint64_t sum;
} host_part;

static void *host_slice(void *arg) {
    host_part *h = arg;
    if (h->streams == 1 && h->dst) {
        memcpy(h->dst, h->src, h->bytes);
        return NULL;
    }
    const size_t part = h->bytes / (size_t)h->streams;
    /* Reading: XOR of 64-bit words, exact, so the compiler may vectorize it freely. */
    uint64_t acc[HOST_STREAMS][HOST_BLOCK / 8] = {{0}};
    for (size_t i = 0; i < part; i += HOST_BLOCK)
        for (int k = 0; k < h->streams; ++k) {
            const char *from = h->src + (size_t)k * part + i;
            if (h->dst) {
                memcpy(h->dst + (size_t)k * part + i, from, HOST_BLOCK);
            } else {
                uint64_t words[HOST_BLOCK / 8];
                memcpy(words, from, HOST_BLOCK);
                for (int e = 0; e < HOST_BLOCK / 8; ++e) acc[k][e] ^= words[e];
            }
        }
    for (int k = 0; k < h->streams; ++k)
        for (int e = 0; e < HOST_BLOCK / 8; ++e) h->sum ^= acc[k][e];
    return NULL;
}

typedef struct host_ctx {
    const char *src;
    char *dst;
    size_t bytes;
    int threads, streams;
    bool read_only;
    uint64_t sink;
} host_ctx;

static tsr_status run_host_copy(void *vctx, double *gbps) {
    host_ctx *c = vctx;
    pthread_t tid[64];
    host_part part[64];
    const size_t unit = (size_t)HOST_STREAMS * HOST_BLOCK;
    size_t per = c->bytes / (size_t)c->threads / unit * unit;
    double t0 = util_now_s();
    for (int i = 0; i < c->threads; ++i) {
        part[i] = (host_part){c->src + (size_t)i * per, c->read_only ? NULL : c->dst + (size_t)i * per, per,
                              c->streams, 0};
        if (pthread_create(&tid[i], NULL, host_slice, &part[i]) != 0) {
            for (int j = 0; j < i; ++j) pthread_join(tid[j], NULL);
            return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "cannot start a host memory thread");
        }
    }
    for (int i = 0; i < c->threads; ++i) pthread_join(tid[i], NULL);
    double s = util_now_s() - t0;
    for (int i = 0; i < c->threads; ++i) c->sink ^= part[i].sum;
    /* copy: read + written, as the copy kernel counts */
    *gbps = (c->read_only ? 1.0 : 2.0) * (double)per * c->threads / s * 1e-9;
    return TSR_SUCCESS;
}

/* The better (by median) of one stream and HOST_STREAMS streams per thread. */
static tsr_status measure_host(host_ctx *hc, double budget_s, peak_stat *best, int *best_streams) {
    const int choices[2] = {1, HOST_STREAMS};
    memset(best, 0, sizeof *best);
    for (int i = 0; i < 2; ++i) {
        peak_stat st;
        hc->streams = choices[i];
        tsr_status status = repeat(NULL, run_host_copy, hc, budget_s, &st);
        if (status != TSR_SUCCESS) return status;
        if (st.median > best->median) {
            *best = st;
            *best_streams = choices[i];
        }
    }
    return TSR_SUCCESS;
}

/* ---- all of it ---- */

tsr_status peak_measure(tsr_device *dev, const peak_options *opt, peak_result *r) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    memset(r, 0, sizeof *r);
    size_t bytes = opt->buffer_bytes;
    if (bytes) {
        /* A size the user asked for is measured as asked or refused, never quietly shrunk: two
         * device buffers of it, and one (two for the host test) on the host. */
        char what[64];
        snprintf(what, sizeof what, "peak buffers of %zu MiB", bytes >> 20);
        size_t pair[2] = {bytes, bytes};
        tsr_status st = util_check_memory(dev, what, pair, 2, bytes <= SIZE_MAX / 2 ? 2 * bytes : SIZE_MAX);
        if (st != TSR_SUCCESS) return st;
    } else {
        bytes = opt->simulator                 ? (size_t)64 << 10
                : info->type == TSR_DEVICE_CPU ? (size_t)128 << 20
                                               : (size_t)512 << 20;
        uint64_t host = util_host_available();
        while (bytes > info->max_alloc_bytes || 2 * (uint64_t)bytes > info->global_mem_bytes ||
               (host && 2 * (uint64_t)bytes > host))
            bytes /= 2;
    }
    bytes = bytes / 64 * 64;
    if (bytes < 4096) return tsr_fail(TSR_ERR_UNSUPPORTED, "device '%s' cannot allocate a peak buffer", info->name);
    r->buffer_bytes = bytes;
    r->budget_s = opt->budget_s;
    r->reduced = reduced(opt);
    const unsigned tests = opt->tests ? opt->tests & PEAK_ALL : PEAK_ALL;
    r->tests = tests;
    tsr_status st = TSR_SUCCESS;
    cl_int err;
    cl_mem a = NULL, b = NULL, sink = NULL;
    float *host = malloc(bytes);
    size_t sink_floats = (size_t)(info->compute_units ? info->compute_units : 1) * 4096;
    if (!host) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory for %zu bytes", bytes);
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    tsr_random_fill(host, bytes / sizeof(float), &seed, 0.0f, 1.0f); /* random: incompressible */
    a = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, host, &err);
    if (err == CL_SUCCESS) b = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err == CL_SUCCESS)
        sink = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, sink_floats * 4, NULL, &err);
    if (err != CL_SUCCESS) {
        st = tsr_fail_cl(err, "clCreateBuffer(peak)", __FILE__, __LINE__);
        goto out;
    }
    if (tests & (PEAK_BANDWIDTH | PEAK_COMPUTE)) { /* decided once per device; kept in the result */
        tsr_timing_method method;
        const char *why = "";
        if ((st = tsr_device_timing(dev, &method, &why)) != TSR_SUCCESS) goto out;
        r->host_timed = method == TSR_TIMING_HOST;
        if (!opt->quiet && r->host_timed) fprintf(stderr, "peak: timing with the host clock: %s\n", why);
    }
    if (tests & PEAK_BANDWIDTH) {
        if (!opt->quiet) fprintf(stderr, "peak: bandwidth ...\n");
        if ((st = measure_bandwidth(dev, opt, r, a, b, sink, bytes)) != TSR_SUCCESS) goto out;
    }
    if (tests & PEAK_COMPUTE) {
        if (!opt->quiet) fprintf(stderr, "peak: compute ...\n");
        if ((st = measure_compute(dev, opt, r, sink, sink_floats)) != TSR_SUCCESS) goto out;
    }
    if (tests & PEAK_LAUNCH) {
        if (!opt->quiet) fprintf(stderr, "peak: launches ...\n");
        if ((st = measure_launch(dev, opt, r)) != TSR_SUCCESS) goto out;
    }
    if (tests & PEAK_TRANSFERS) {
        if (!opt->quiet) fprintf(stderr, "peak: transfers ...\n");
        peak_stat *xfers[4] = {&r->write_gbps, &r->read_gbps, &r->map_read_gbps, &r->map_write_gbps};
        for (int kind = 0; kind < 4 && st == TSR_SUCCESS; ++kind) {
            xfer_ctx c = {.dev = dev, .buf = a, .host = host, .bytes = bytes, .kind = kind};
            st = repeat(opt, run_transfer, &c, opt->budget_s, xfers[kind]);
        }
    }
    if (st == TSR_SUCCESS && (tests & PEAK_HOST) && info->type == TSR_DEVICE_CPU && !opt->simulator) {
        char *dst = malloc(bytes);
        if (!dst) {
            st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory");
            goto out;
        }
        memset(dst, 1, bytes); /* first touch outside the timing */
        host_ctx hc = {.src = (const char *)host,
                       .dst = dst,
                       .bytes = bytes,
                       .threads = info->compute_units > 64 ? 64 : (int)info->compute_units};
        if (hc.threads < 1) hc.threads = 1;
        st = measure_host(&hc, opt->budget_s, &r->host_copy_gbps, &r->host_copy_streams);
        hc.read_only = true;
        if (st == TSR_SUCCESS) st = measure_host(&hc, opt->budget_s, &r->host_read_gbps, &r->host_read_streams);
        r->host_threads = hc.threads;
        free(dst);
    }
out:
    if (r->host_timed) { /* a test may have switched the device to host timing mid-way */
        const char *why = "";
        tsr_device_timing(dev, NULL, &why);
        tsr_strlcpy(r->timing_reason, why, sizeof r->timing_reason);
    }
    r->empty_launch_us = tsr_device_empty_launch_s(dev) * 1e6;
    if (a) clReleaseMemObject(a);
    if (b) clReleaseMemObject(b);
    if (sink) clReleaseMemObject(sink);
    free(host);
    return st;
}

/* ---- which tests ---- */

static const char *const test_names[] = {"bandwidth", "compute", "launch", "transfers", "host"};
#define PEAK_TEST_COUNT (int)(sizeof test_names / sizeof test_names[0])

const char *peak_test_list(char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < PEAK_TEST_COUNT && used < size; ++i) {
        int n = snprintf(out + used, size - used, "%s%s", i ? ", " : "", test_names[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
    return out;
}

bool peak_parse_tests(const char *list, unsigned *tests, char *bad, size_t bad_size) {
    *tests = 0;
    const char *p = list;
    do {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < PEAK_TEST_COUNT; ++i)
            if (len == strlen(test_names[i]) && strncmp(p, test_names[i], len) == 0) found = i;
        if (found < 0) {
            snprintf(bad, bad_size, "%.*s", (int)len, p);
            return false;
        }
        *tests |= 1u << found;
        p += len;
    } while (*p++ == ',');
    return true;
}

/* ---- output ---- */

static cJSON *stat_json(const peak_stat *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "median", s->median);
    cJSON_AddNumberToObject(o, "min", s->min);
    cJSON_AddNumberToObject(o, "max", s->max);
    cJSON_AddNumberToObject(o, "runs", s->runs);
    return o;
}

/* Bounds on the numbers of a peaks section read back (a report from elsewhere): generous for any
 * device, and finite, so nothing derived from them (roofs, ridges, chart ranges) is not. */
#define PEAK_MAX_RATE 1e12  /* GB/s, GFLOP/s, microseconds */
#define PEAK_MAX_COUNT 1e9  /* runs, chains, threads, streams, vector widths */
#define PEAK_MIN_ROOF 1e-9  /* GB/s or GFLOP/s: the smallest roof other than 0 (not measured) */

/* The number at `o`[key] (absent: *out unchanged): finite, in [0, hi], an integer where asked;
 * TSR_ERR_CORRUPT naming the field (`where`.key) otherwise. */
static tsr_status peak_number(const cJSON *o, const char *where, const char *key, double hi, bool integer,
                              double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return TSR_SUCCESS;
    if (!cJSON_IsNumber(v)) return tsr_fail(TSR_ERR_CORRUPT, "peaks: %s%s%s is not a number", where, *where ? "." : "", key);
    double x = v->valuedouble;
    if (!isfinite(x) || x < 0 || x > hi || (integer && x != floor(x)))
        return tsr_fail(TSR_ERR_CORRUPT, "peaks: %s%s%s is %g: it must be %s in [0, %g]", where, *where ? "." : "", key,
                        x, integer ? "an integer" : "a finite number", hi);
    *out = x;
    return TSR_SUCCESS;
}

static tsr_status peak_int(const cJSON *o, const char *where, const char *key, int *out) {
    double x = *out;
    tsr_status st = peak_number(o, where, key, PEAK_MAX_COUNT, true, &x);
    *out = (int)x;
    return st;
}

/* A measurement {median, min, max, runs}; `where` names it in messages. */
static tsr_status stat_from(const cJSON *o, const char *where, peak_stat *s) {
    memset(s, 0, sizeof *s);
    tsr_status st = peak_number(o, where, "median", PEAK_MAX_RATE, false, &s->median);
    if (st == TSR_SUCCESS) st = peak_number(o, where, "min", PEAK_MAX_RATE, false, &s->min);
    if (st == TSR_SUCCESS) st = peak_number(o, where, "max", PEAK_MAX_RATE, false, &s->max);
    if (st == TSR_SUCCESS) st = peak_int(o, where, "runs", &s->runs);
    return st;
}

cJSON *peak_to_json(const peak_result *r) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON *tests = cJSON_AddArrayToObject(o, "tests");
    for (int i = 0; i < PEAK_TEST_COUNT; ++i)
        if (r->tests & (1u << i)) cJSON_AddItemToArray(tests, cJSON_CreateString(test_names[i]));
    if (r->reduced) cJSON_AddBoolToObject(o, "reduced", true); /* a floor of the device's limits, not a roof */
    if (r->tests & (PEAK_BANDWIDTH | PEAK_COMPUTE)) {
        cJSON_AddStringToObject(o, "timing", r->host_timed ? "host" : "device");
        if (r->host_timed) cJSON_AddStringToObject(o, "timing_reason", r->timing_reason);
        cJSON_AddNumberToObject(o, "empty_launch_us", r->empty_launch_us);
    }
    cJSON_AddNumberToObject(o, "buffer_bytes", (double)r->buffer_bytes);
    cJSON_AddNumberToObject(o, "budget_s", r->budget_s);
    cJSON_AddNumberToObject(o, "bandwidth_gbps", r->bandwidth_gbps);
    cJSON_AddStringToObject(o, "bandwidth_best", r->bandwidth_best);
    cJSON_AddNumberToObject(o, "compute_gflops", r->compute_gflops);
    cJSON_AddStringToObject(o, "compute_best", r->compute_best);
    static const char *const kinds[3] = {"read", "write", "copy"};
    cJSON *bw = cJSON_AddObjectToObject(o, "bandwidth");
    for (int k = 0; k < 3; ++k) {
        cJSON *arr = cJSON_AddArrayToObject(bw, kinds[k]);
        for (int w = 0; w < PEAK_WIDTHS; ++w) {
            const peak_stat *s = k == 0 ? &r->read[w] : k == 1 ? &r->write[w] : &r->copy[w];
            cJSON *e = stat_json(s);
            cJSON_AddNumberToObject(e, "vector_width", widths[w]);
            cJSON_AddStringToObject(e, "layout", r->layout[k][w] ? "interleaved" : "contiguous");
            cJSON_AddItemToArray(arr, e);
        }
    }
    cJSON *comp = cJSON_AddArrayToObject(o, "compute");
    for (int w = 0; w < PEAK_WIDTHS; ++w) {
        cJSON *e = stat_json(&r->compute[w]);
        cJSON_AddNumberToObject(e, "vector_width", widths[w]);
        cJSON_AddNumberToObject(e, "chains", r->chains[w]);
        cJSON_AddStringToObject(e, "form", r->compute_mad[w] ? "mad" : "fma");
        cJSON_AddItemToArray(comp, e);
    }
    cJSON *launch = cJSON_AddObjectToObject(o, "launch_us");
    cJSON_AddStringToObject(launch, "timing", "host"); /* enqueue to clFinish on the host clock, always */
    cJSON_AddItemToObject(launch, "dispatch", stat_json(&r->dispatch_us));
    cJSON_AddItemToObject(launch, "round_trip", stat_json(&r->round_trip_us));
    cJSON *xfer = cJSON_AddObjectToObject(o, "transfer_gbps");
    cJSON_AddItemToObject(xfer, "write", stat_json(&r->write_gbps));
    cJSON_AddItemToObject(xfer, "read", stat_json(&r->read_gbps));
    cJSON_AddItemToObject(xfer, "map_read", stat_json(&r->map_read_gbps));
    cJSON_AddItemToObject(xfer, "map_write", stat_json(&r->map_write_gbps));
    if (r->host_copy_gbps.runs) {
        cJSON *h = stat_json(&r->host_copy_gbps);
        cJSON_AddNumberToObject(h, "threads", r->host_threads);
        cJSON_AddNumberToObject(h, "streams_per_thread", r->host_copy_streams);
        cJSON_AddItemToObject(o, "host_copy_gbps", h);
        h = stat_json(&r->host_read_gbps);
        cJSON_AddNumberToObject(h, "streams_per_thread", r->host_read_streams);
        cJSON_AddItemToObject(o, "host_read_gbps", h);
    }
    return o;
}

/* Every number is checked (a report from elsewhere may hold anything cJSON parses, 1e999 as
 * infinity): the first bad one is TSR_ERR_CORRUPT naming its field. */
tsr_status peak_from_json(const cJSON *o, peak_result *r) {
    memset(r, 0, sizeof *r);
    const cJSON *bw = cJSON_GetObjectItemCaseSensitive(o, "bandwidth_gbps");
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(o, "compute_gflops");
    if (!cJSON_IsNumber(bw) || !cJSON_IsNumber(fl))
        return tsr_fail(TSR_ERR_CORRUPT, "peaks: bandwidth_gbps and compute_gflops must be numbers");
    /* 0 is meaningful (not measured: --tests left it out); below 0, beyond a double or so small that
     * a rate over the roof overflows is not. */
    for (int i = 0; i < 2; ++i) {
        double x = (i ? fl : bw)->valuedouble;
        if (!(x == 0 || (x >= PEAK_MIN_ROOF && x <= PEAK_MAX_RATE)))
            return tsr_fail(TSR_ERR_CORRUPT, "peaks: bandwidth_gbps (%g) and compute_gflops (%g) must be >= 0 and finite "
                            "(0: not measured; otherwise in [%g, %g])", bw->valuedouble, fl->valuedouble,
                            PEAK_MIN_ROOF, PEAK_MAX_RATE);
    }
    r->bandwidth_gbps = bw->valuedouble;
    r->compute_gflops = fl->valuedouble;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "tests"), *t;
    r->tests = v ? 0 : PEAK_ALL; /* files from before --tests measured everything */
    cJSON_ArrayForEach(t, v) {
        for (int i = 0; i < PEAK_TEST_COUNT; ++i)
            if (cJSON_IsString(t) && strcmp(t->valuestring, test_names[i]) == 0) r->tests |= 1u << i;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "timing")) && cJSON_IsString(v))
        r->host_timed = strcmp(v->valuestring, "host") == 0;
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "timing_reason")) && cJSON_IsString(v))
        tsr_strlcpy(r->timing_reason, v->valuestring, sizeof r->timing_reason);
    tsr_status st = peak_number(o, "", "empty_launch_us", PEAK_MAX_RATE, false, &r->empty_launch_us);
    if (st != TSR_SUCCESS) return st;
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "bandwidth_best")) && cJSON_IsString(v))
        tsr_strlcpy(r->bandwidth_best, v->valuestring, sizeof r->bandwidth_best);
    r->reduced = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "reduced"));
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "compute_best")) && cJSON_IsString(v))
        tsr_strlcpy(r->compute_best, v->valuestring, sizeof r->compute_best);
    /* A foreign file: a negative or huge count would make the cast undefined. */
    double buffer = 0;
    if ((st = peak_number(o, "", "buffer_bytes", 9007199254740992.0, true, &buffer)) != TSR_SUCCESS) return st;
    r->buffer_bytes = (size_t)buffer;
    if ((st = peak_number(o, "", "budget_s", PEAK_MAX_RATE, false, &r->budget_s)) != TSR_SUCCESS) return st;
    static const char *const kinds[3] = {"read", "write", "copy"};
    const cJSON *bws = cJSON_GetObjectItemCaseSensitive(o, "bandwidth");
    char where[64];
    for (int k = 0; k < 3; ++k) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(bws, kinds[k]);
        int w = 0;
        for (const cJSON *e = arr ? arr->child : NULL; e && w < PEAK_WIDTHS; e = e->next, ++w) {
            snprintf(where, sizeof where, "bandwidth.%s[%d]", kinds[k], w);
            if ((st = stat_from(e, where, k == 0 ? &r->read[w] : k == 1 ? &r->write[w] : &r->copy[w])) != TSR_SUCCESS)
                return st;
            const cJSON *l = cJSON_GetObjectItemCaseSensitive(e, "layout");
            r->layout[k][w] = cJSON_IsString(l) && strcmp(l->valuestring, "interleaved") == 0;
        }
    }
    int w = 0;
    const cJSON *comp = cJSON_GetObjectItemCaseSensitive(o, "compute");
    for (const cJSON *e = comp ? comp->child : NULL; e && w < PEAK_WIDTHS; e = e->next, ++w) {
        snprintf(where, sizeof where, "compute[%d]", w);
        if ((st = stat_from(e, where, &r->compute[w])) != TSR_SUCCESS) return st;
        if ((st = peak_int(e, where, "chains", &r->chains[w])) != TSR_SUCCESS) return st;
        const cJSON *form = cJSON_GetObjectItemCaseSensitive(e, "form");
        r->compute_mad[w] = cJSON_IsString(form) && strcmp(form->valuestring, "mad") == 0;
    }
    static const struct {
        const char *section, *key;
        size_t offset;
    } stats[] = {
        {"launch_us", "dispatch", offsetof(peak_result, dispatch_us)},
        {"launch_us", "round_trip", offsetof(peak_result, round_trip_us)},
        {"transfer_gbps", "write", offsetof(peak_result, write_gbps)},
        {"transfer_gbps", "read", offsetof(peak_result, read_gbps)},
        {"transfer_gbps", "map_read", offsetof(peak_result, map_read_gbps)},
        {"transfer_gbps", "map_write", offsetof(peak_result, map_write_gbps)},
    };
    for (size_t i = 0; i < sizeof stats / sizeof stats[0]; ++i) {
        snprintf(where, sizeof where, "%s.%s", stats[i].section, stats[i].key);
        const cJSON *sec = cJSON_GetObjectItemCaseSensitive(o, stats[i].section);
        if ((st = stat_from(cJSON_GetObjectItemCaseSensitive(sec, stats[i].key), where,
                            (peak_stat *)((char *)r + stats[i].offset))) != TSR_SUCCESS)
            return st;
    }
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "host_copy_gbps");
    if (h) {
        if ((st = stat_from(h, "host_copy_gbps", &r->host_copy_gbps)) != TSR_SUCCESS) return st;
        if ((st = peak_int(h, "host_copy_gbps", "threads", &r->host_threads)) != TSR_SUCCESS) return st;
        r->host_copy_streams = 1; /* older files: memcpy */
        if ((st = peak_int(h, "host_copy_gbps", "streams_per_thread", &r->host_copy_streams)) != TSR_SUCCESS) return st;
        const cJSON *hr = cJSON_GetObjectItemCaseSensitive(o, "host_read_gbps");
        if ((st = stat_from(hr, "host_read_gbps", &r->host_read_gbps)) != TSR_SUCCESS) return st;
        r->host_read_streams = 1;
        if ((st = peak_int(hr, "host_read_gbps", "streams_per_thread", &r->host_read_streams)) != TSR_SUCCESS) return st;
    }
    return TSR_SUCCESS;
}

static void spread(const peak_stat *s, char *out, size_t size) {
    if (s->runs == 0) snprintf(out, size, "-");
    else snprintf(out, size, "%.1f [%.1f, %.1f] n=%d", s->median, s->min, s->max, s->runs);
}

void peak_print(FILE *f, const peak_result *r) {
    char t[3][64];
    if (r->host_timed)
        fprintf(f, "timing: host clock (batches of launches, less the %.1f us empty-launch cost, per launch): %s\n",
                r->empty_launch_us, r->timing_reason);
    else if (r->tests & (PEAK_BANDWIDTH | PEAK_COMPUTE))
        fprintf(f, "timing: device (profiling events, checked against the host clock)\n");
    if (r->tests & PEAK_BANDWIDTH) {
        fprintf(f, "global memory bandwidth, GB/s (median [min, max] n=runs; %.0f MiB buffers of random data; copy "
                   "counts bytes read + written)\n", (double)r->buffer_bytes / 1048576.0);
        fprintf(f, "  %-8s %-38s %-38s %-38s\n", "width", "read", "write", "copy");
        for (int w = 0; w < PEAK_WIDTHS; ++w) {
            spread(&r->read[w], t[0], sizeof t[0]);
            spread(&r->write[w], t[1], sizeof t[1]);
            spread(&r->copy[w], t[2], sizeof t[2]);
            fprintf(f, "  float%-3d %-38s %-38s %-38s\n", widths[w], t[0], t[1], t[2]);
        }
        fprintf(f, "  best: %.1f GB/s (%s)\n", r->bandwidth_gbps, r->bandwidth_best);
    }
    if (r->host_copy_gbps.runs) {
        spread(&r->host_read_gbps, t[0], sizeof t[0]);
        spread(&r->host_copy_gbps, t[1], sizeof t[1]);
        fprintf(f, "the host itself, %d threads, GB/s: read %s (%d stream%s per thread); copy %s (%d stream%s per "
                   "thread%s)\n", r->host_threads, t[0], r->host_read_streams, r->host_read_streams == 1 ? "" : "s", t[1],
                r->host_copy_streams, r->host_copy_streams == 1 ? "" : "s", r->host_copy_streams == 1 ? ": memcpy" : "");
    }
    if (r->tests & PEAK_COMPUTE) {
        fprintf(f, "fp32 multiply-add throughput, GFLOP/s\n");
        for (int w = 0; w < PEAK_WIDTHS; ++w) {
            spread(&r->compute[w], t[0], sizeof t[0]);
            fprintf(f, "  float%-3d %-38s (%d chains, %s)\n", widths[w], t[0], r->chains[w], r->compute_mad[w] ? "mad" : "fma");
        }
        fprintf(f, "  best: %.1f GFLOP/s (%s)\n", r->compute_gflops, r->compute_best);
    }
    if (r->tests & PEAK_LAUNCH) {
        spread(&r->dispatch_us, t[0], sizeof t[0]);
        spread(&r->round_trip_us, t[1], sizeof t[1]);
        fprintf(f, "kernel launch, microseconds on the host clock: dispatch %s; round trip (enqueue to clFinish) %s\n",
                t[0], t[1]);
    }
    if (r->tests & PEAK_TRANSFERS) {
        fprintf(f, "host <-> device, GB/s\n");
        spread(&r->write_gbps, t[0], sizeof t[0]);
        spread(&r->read_gbps, t[1], sizeof t[1]);
        fprintf(f, "  write %s; read %s\n", t[0], t[1]);
        spread(&r->map_read_gbps, t[0], sizeof t[0]);
        spread(&r->map_write_gbps, t[1], sizeof t[1]);
        fprintf(f, "  map+read %s; map+write %s\n", t[0], t[1]);
    }
}
