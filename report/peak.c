/* `tessera peak`: a device's measured limits. Global-memory bandwidth (read, write, copy; per
 * vector width; both access layouts, the better one kept), fp32 multiply-add throughput (per
 * vector width and number of independent chains), kernel launch latency (dispatch and round
 * trip), host <-> device transfers (read, write, map), and on CPU devices the host's own
 * multi-threaded memcpy for comparison. Every test repeats until its time budget is spent (at
 * least 3 runs) and reports the median and the spread. */
#include "report_parts.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int chain_counts[] = {4, 8, 16};

extern const char peak_cl_source[]; /* cl/peak.cl, embedded by tools/embed_cl.py (embedded_peak.c) */

tsr_status peak_add_source(void) { return tsr_add_kernel_source("peak", peak_cl_source, strlen(peak_cl_source)); }

/* A reduced run (simulated devices, quick checks) covers one vector width (float4), one layout
 * and one chain count. */
static bool reduced(const peak_options *opt) { return opt->reduced || opt->simulator; }
static bool wanted_width(const peak_options *opt, int w) { return !reduced(opt) || peak_widths[w] == 4; }

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
        cl_uint vectors = (cl_uint)(bytes / sizeof(float) / (size_t)peak_widths[w]);
        for (int kind = 0; kind < 3 && st == TSR_SUCCESS; ++kind) {
            int first_layout, last_layout;
            bandwidth_layouts(dev, opt, &first_layout, &last_layout);
            for (int interleave = first_layout; interleave <= last_layout && st == TSR_SUCCESS; ++interleave) {
                char options[64];
                snprintf(options, sizeof options, "-DVW=%d -DINTERLEAVE=%d", peak_widths[w], interleave);
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
                c.bytes = (double)vectors * peak_widths[w] * sizeof(float) * (kind == 2 ? 2 : 1);
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
                snprintf(r->bandwidth_best, sizeof r->bandwidth_best, "%s, float%d, %s", names[kind] + 3, peak_widths[w],
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
            snprintf(options, sizeof options, "-DVW=%d -DCHAINS=%d%s", peak_widths[w], chains, mad ? " -DPEAK_MAD" : "");
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
                c.bytes = 2.0 * chains * peak_widths[w] * (double)iters * (double)global; /* FLOPs */
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
            snprintf(r->compute_best, sizeof r->compute_best, "float%d, %d chains, %s", peak_widths[w], r->chains[w],
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
    tsr_status added = peak_add_source();
    if (added != TSR_SUCCESS) return added;
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
