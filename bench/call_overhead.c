/* The cost of one tessera call from C, the baseline of the Python package's overhead
 * (bench/python_overhead.py runs this and the same calls from Python, alternating):
 *   call_overhead [--device SEL] [--size N] [--calls N]
 * times N row-major N x N x N tsr_matmul calls two ways, after warm-up calls:
 *   synchronous: each call followed by clFinish (what one blocking call costs);
 *   pipelined:   the calls enqueued back to back, one clFinish at the end.
 * Prints one JSON object with the microseconds per call of each.
 *
 *   call_overhead --ops [--device SEL] [--calls N]
 * the fixed cost of every op at its smallest useful shape (docs/ARCHITECTURE.md, "Small calls"),
 * beside an empty kernel's enqueue and enqueue + clFinish, on one in-order profiling queue. Per
 * row: host_us (the call's own time, calls back to back: the median of 5 rounds), sync_us (call
 * + clFinish), pipelined_us (calls back to back and one wait), device_us (the kernels' profiled
 * time per call), launches, host_waits (clFinish, clWaitForEvents and blocking transfers inside
 * the call) and transfers per call, and host_vs_empty (the median over the rounds of host_us over
 * the empty kernel's enqueue timed right before it: the number to compare across machines and
 * loads; the "layer" row is 7 calls, "op_calls"). Launches and waits are counted by bench/launch_counter.c, which the program preloads
 * by running itself again with LD_PRELOAD (not under a sanitizer; then those fields are null).
 * The row "layer" is a transformer layer's seven calls at 1 x 16 tokens, back to back.
 * Also per row: gated_us / gated_cpu_us (wall and thread-CPU microseconds per call while the queue
 * is held behind a user event, so no kernel runs meanwhile: the call's host work alone),
 * gated_vs_empty (over the empty kernel's gated enqueue), replay_cpu_us (the same launches
 * replayed from a graph recorded once: the driver's share; null for the empty kernel and
 * embedding), arg_sets and kernels_created (clSetKernelArg and clCreateKernel per call, counted).
 * CALL_OVERHEAD_LOOP=I (an op's index in the rows) runs only that op's gated calls, 51 rounds,
 * and prints their medians: for a profiler, or old and new builds alternated.
 *
 *   call_overhead --waits [--device SEL] [--calls N]
 * the driver's own launch and wait primitives (see run_waits), medians of 7 rounds of N steps. */
#include "tessera.h"
#include "util.h"

#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int fail(const char *what, tsr_status st) {
    fprintf(stderr, "call_overhead: %s: %s: %s\n", what, tsr_status_str(st), tsr_last_error());
    return 1;
}


/* ---- --ops: the per-op rows ---- */

typedef void (*counter_read_fn)(uint64_t out[5]);
typedef void (*counter_record_fn)(int on);
typedef size_t (*counter_events_fn)(cl_event **list);
typedef void (*counter_clear_fn)(void);
static struct {
    counter_read_fn read;
    counter_record_fn record;
    counter_events_fn events;
    counter_clear_fn clear;
} counter;

static bool counter_load(void) {
    counter.read = (counter_read_fn)dlsym(RTLD_DEFAULT, "launch_counter_read");
    counter.record = (counter_record_fn)dlsym(RTLD_DEFAULT, "launch_counter_record");
    counter.events = (counter_events_fn)dlsym(RTLD_DEFAULT, "launch_counter_events");
    counter.clear = (counter_clear_fn)dlsym(RTLD_DEFAULT, "launch_counter_clear");
    return counter.read && counter.record && counter.events && counter.clear;
}

/* Run this program again with the counter preloaded (found beside it); returns only on failure. */
static void reexec_with_counter(char **argv) {
#if defined(__SANITIZE_ADDRESS__)
    (void)argv; /* the sanitizer's runtime must come first: no preload, no counts */
#else
    if (getenv("CALL_OVERHEAD_PRELOADED")) return;
    char self[PATH_MAX], preload[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return;
    snprintf(preload, sizeof preload, "%.*s/launch_counter.so", (int)(slash - self), self);
    if (access(preload, R_OK) != 0) return;
    setenv("CALL_OVERHEAD_PRELOADED", "1", 1);
    setenv("LD_PRELOAD", preload, 1);
    execv(self, argv);
#endif
}

enum { OP_EMPTY, OP_GEMM16, OP_GEMM1, OP_GELU, OP_LAYERNORM, OP_ATTENTION, OP_CONV, OP_EMBEDDING, OP_LAYER, OP_CONV3, NOPS };
static const char *const op_names[NOPS] = {"empty-kernel",   "gemm 16x384x384", "gemm 1x384x384",
                                           "gelu 4096",      "layernorm 16x384", "attention 1x12x16x16x32",
                                           "conv2d 1x1 512->512 7x7", "embedding 16 ids", "layer 1x16 (7 calls)",
                                           "conv2d 3x3 p1 64->64 14x14"};

#define HIDDEN 384
#define TOKENS 16
#define FFN 1536

typedef struct ops_ctx {
    tsr_device *dev;
    cl_command_queue q;
    cl_kernel empty;
    /* the layer's buffers: x and h [16, 384], qkv [16, 1152], ctx [16, 384], ffn [16, 1536] */
    cl_mem x, h, qkv, att, ffn, w_qkv, w_o, w_1, w_2, b_qkv, b_o, b_1, b_2, gamma, beta;
    cl_mem conv_x, conv_w, conv_y, gelu_x, gelu_y, table, positions, types, emb_y;
    int32_t ids[TOKENS], type_ids[TOKENS];
    tsr_graph *graph[NOPS]; /* each op's launches recorded once (none for the empty kernel and embedding) */
    int replaying;          /* op_call replays graph[op] instead of calling */
} ops_ctx;

static cl_mem random_buffer(cl_context ctx, size_t n, uint32_t *seed) {
    float *host = malloc(n * sizeof *host);
    if (!host) return NULL;
    for (size_t i = 0; i < n; ++i) {
        *seed = *seed * 1664525u + 1013904223u;
        host[i] = ((float)(*seed >> 8) / 16777216.0f - 0.5f) * 0.2f;
    }
    cl_int err;
    cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof *host, host, &err);
    free(host);
    return err == CL_SUCCESS ? m : NULL;
}

static tsr_status gemm_call(ops_ctx *c, size_t m, size_t n, size_t k, cl_mem a, cl_mem b, cl_mem out, cl_mem bias,
                            tsr_activation act) {
    const tsr_matmul_desc d = {.m = m, .n = n, .k = k, .alpha = 1.0f, .epilogue = {.bias = bias, .activation = act}};
    return tsr_matmul(c->dev, &d, a, b, out, c->q, NULL);
}

static tsr_status attention_call(ops_ctx *c) {
    /* the packed QKV of the projection, [B, L, H, D] with rows of 3 x 384 */
    const tsr_attention_desc d = {.batch = 1, .heads = 12, .q_len = TOKENS, .kv_len = TOKENS, .head_dim = 32,
                                  .k_offset = HIDDEN, .v_offset = 2 * HIDDEN,
                                  .q_strides = {TOKENS * 3 * HIDDEN, 32, 3 * HIDDEN},
                                  .k_strides = {TOKENS * 3 * HIDDEN, 32, 3 * HIDDEN},
                                  .v_strides = {TOKENS * 3 * HIDDEN, 32, 3 * HIDDEN},
                                  .o_strides = {TOKENS * HIDDEN, 32, HIDDEN}};
    return tsr_attention(c->dev, &d, c->qkv, c->qkv, c->qkv, c->att, c->q, NULL);
}

static tsr_status layernorm_call(ops_ctx *c, cl_mem x, cl_mem residual, cl_mem y) {
    const tsr_layernorm_desc d = {.rows = TOKENS, .cols = HIDDEN, .eps = 1e-12f};
    return tsr_layernorm(c->dev, &d, x, residual, c->gamma, c->beta, y, c->q, NULL);
}

static tsr_status op_call(ops_ctx *c, int op) {
    tsr_status st = TSR_SUCCESS;
    if (c->replaying) return tsr_graph_launch(c->graph[op], c->q, NULL);
    switch (op) {
    case OP_EMPTY: {
        size_t one = 1;
        return clEnqueueNDRangeKernel(c->q, c->empty, 1, NULL, &one, NULL, 0, NULL, NULL) == CL_SUCCESS
                   ? TSR_SUCCESS
                   : TSR_ERR_OPENCL;
    }
    case OP_GEMM16: return gemm_call(c, TOKENS, HIDDEN, HIDDEN, c->x, c->w_o, c->h, NULL, TSR_ACT_NONE);
    case OP_GEMM1: return gemm_call(c, 1, HIDDEN, HIDDEN, c->x, c->w_o, c->h, NULL, TSR_ACT_NONE);
    case OP_GELU: {
        const tsr_gelu_desc d = {.mode = TSR_GELU_TANH, .n = 4096};
        return tsr_gelu(c->dev, &d, c->gelu_x, c->gelu_y, c->q, NULL);
    }
    case OP_LAYERNORM: return layernorm_call(c, c->x, NULL, c->h);
    case OP_ATTENTION: return attention_call(c);
    case OP_CONV: {
        const tsr_conv2d_desc d = {.batch = 1, .in_channels = 512, .in_height = 7, .in_width = 7, .out_channels = 512,
                                   .kernel_h = 1, .kernel_w = 1};
        return tsr_conv2d(c->dev, &d, c->conv_x, c->conv_w, c->conv_y, c->q, NULL);
    }
    case OP_CONV3: { /* runs its own kernel (not a GEMM) */
        const tsr_conv2d_desc d = {.batch = 1, .in_channels = 64, .in_height = 14, .in_width = 14, .out_channels = 64,
                                   .kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
        return tsr_conv2d(c->dev, &d, c->conv_x, c->conv_w, c->conv_y, c->q, NULL);
    }
    case OP_EMBEDDING: {
        const tsr_embedding_desc d = {.tokens = TOKENS, .seq_len = TOKENS, .hidden = HIDDEN, .vocab = 1000,
                                      .max_positions = 512, .type_vocab = 2};
        return tsr_embedding(c->dev, &d, c->ids, c->type_ids, c->table, c->positions, c->types, c->emb_y, c->q, NULL);
    }
    case OP_LAYER: /* BERT's layer: QKV, attention, output projection, add & norm, FFN with GELU, add & norm */
        if ((st = gemm_call(c, TOKENS, 3 * HIDDEN, HIDDEN, c->x, c->w_qkv, c->qkv, c->b_qkv, TSR_ACT_NONE)) ||
            (st = attention_call(c)) ||
            (st = gemm_call(c, TOKENS, HIDDEN, HIDDEN, c->att, c->w_o, c->h, c->b_o, TSR_ACT_NONE)) ||
            (st = layernorm_call(c, c->h, c->x, c->h)) ||
            (st = gemm_call(c, TOKENS, FFN, HIDDEN, c->h, c->w_1, c->ffn, c->b_1, TSR_ACT_GELU_TANH)) ||
            (st = gemm_call(c, TOKENS, HIDDEN, FFN, c->ffn, c->w_2, c->att, c->b_2, TSR_ACT_NONE)) ||
            (st = layernorm_call(c, c->att, c->h, c->att)))
            return st;
        return TSR_SUCCESS;
    }
    return TSR_ERR_INVALID_ARG;
}

typedef struct op_row {
    double gated_us, gated_cpu_us, gated_vs_empty, replay_cpu_us;
    bool replayed;
    double host_us, host_vs_empty, sync_us, pipelined_us, device_us, launches, waits, transfers, arg_sets,
        kernels_created;
    bool counted, timed;
} op_row;

/* Host microseconds per call of `calls` calls back to back (the queue runs them meanwhile), then
 * one wait outside the timing. */
static tsr_status host_per_call(ops_ctx *c, int op, long calls, double *us) {
    tsr_status st = TSR_SUCCESS;
    double t0 = now_us();
    for (long i = 0; i < calls && st == TSR_SUCCESS; ++i) st = op_call(c, op);
    *us = (now_us() - t0) / (double)calls;
    clFinish(c->q);
    return st;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double thread_cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* The call's host work alone: the queue is held behind a user event while `calls` calls are
 * enqueued, so no kernel runs meanwhile (on a 2-core CPU device the kernels of earlier calls
 * otherwise compete with the calling thread for the cores); wall and thread-CPU microseconds per
 * call, then the gate opens and the queue drains outside the timing. */
static tsr_status gated_per_call(ops_ctx *c, int op, long calls, double *wall_us, double *cpu_us) {
    cl_int err;
    cl_event gate = clCreateUserEvent(tsr_device_context(c->dev), &err);
    if (err != CL_SUCCESS) return TSR_ERR_OPENCL;
    tsr_status st = clEnqueueBarrierWithWaitList(c->q, 1, &gate, NULL) == CL_SUCCESS ? TSR_SUCCESS : TSR_ERR_OPENCL;
    double t0 = now_us(), c0 = thread_cpu_us();
    for (long i = 0; i < calls && st == TSR_SUCCESS; ++i) st = op_call(c, op);
    *cpu_us = (thread_cpu_us() - c0) / (double)calls;
    *wall_us = (now_us() - t0) / (double)calls;
    clSetUserEventStatus(gate, CL_COMPLETE);
    clFinish(c->q);
    clReleaseEvent(gate);
    return st;
}

#define ROUNDS 5
/* host_us and host_vs_empty of every row: ROUNDS rounds, each timing the empty kernel's enqueue
 * right before the op, so a ratio compares two numbers taken under the same load; medians. */
static tsr_status host_rounds(ops_ctx *c, long calls, op_row *rows) {
    double host[NOPS][ROUNDS], ratio[NOPS][ROUNDS], gated[NOPS][ROUNDS], gated_cpu[NOPS][ROUNDS],
        gated_ratio[NOPS][ROUNDS], replay[NOPS][ROUNDS];
    for (int r = 0; r < ROUNDS; ++r)
        for (int op = 0; op < NOPS; ++op) {
            double empty, us, gempty, gempty_cpu, gus, gcpu;
            tsr_status st = host_per_call(c, OP_EMPTY, calls, &empty);
            if (st == TSR_SUCCESS) st = host_per_call(c, op, calls, &us);
            if (st == TSR_SUCCESS) st = gated_per_call(c, OP_EMPTY, calls, &gempty, &gempty_cpu);
            if (st == TSR_SUCCESS) st = gated_per_call(c, op, calls, &gus, &gcpu);
            if (st == TSR_SUCCESS && c->graph[op]) {
                double rus;
                c->replaying = 1;
                st = gated_per_call(c, op, calls, &rus, &replay[op][r]);
                c->replaying = 0;
            }
            if (st != TSR_SUCCESS) return st;
            host[op][r] = us;
            ratio[op][r] = us / empty;
            gated[op][r] = gus;
            gated_cpu[op][r] = gcpu;
            gated_ratio[op][r] = gus / gempty;
        }
    for (int op = 0; op < NOPS; ++op) {
        qsort(host[op], ROUNDS, sizeof(double), by_value);
        qsort(ratio[op], ROUNDS, sizeof(double), by_value);
        qsort(gated[op], ROUNDS, sizeof(double), by_value);
        qsort(gated_cpu[op], ROUNDS, sizeof(double), by_value);
        qsort(gated_ratio[op], ROUNDS, sizeof(double), by_value);
        rows[op].host_us = host[op][ROUNDS / 2];
        rows[op].host_vs_empty = ratio[op][ROUNDS / 2];
        rows[op].gated_us = gated[op][ROUNDS / 2];
        rows[op].gated_cpu_us = gated_cpu[op][ROUNDS / 2];
        rows[op].gated_vs_empty = gated_ratio[op][ROUNDS / 2];
        if (c->graph[op]) {
            qsort(replay[op], ROUNDS, sizeof(double), by_value);
            rows[op].replay_cpu_us = replay[op][ROUNDS / 2];
            rows[op].replayed = true;
        }
    }
    return TSR_SUCCESS;
}

static tsr_status measure_op(ops_ctx *c, int op, long calls, op_row *r) {
    tsr_status st = TSR_SUCCESS;
    memset(r, 0, sizeof *r);
    for (int i = 0; i < 5; ++i)
        if ((st = op_call(c, op)) != TSR_SUCCESS) return st;
    clFinish(c->q);
    /* pipelined: the calls back to back and the wait for them */
    double t0 = now_us();
    for (long i = 0; i < calls; ++i)
        if ((st = op_call(c, op)) != TSR_SUCCESS) return st;
    clFinish(c->q);
    r->pipelined_us = (now_us() - t0) / (double)calls;
    t0 = now_us();
    for (long i = 0; i < calls; ++i) {
        if ((st = op_call(c, op)) != TSR_SUCCESS) return st;
        clFinish(c->q);
    }
    r->sync_us = (now_us() - t0) / (double)calls;
    if (!counter.read) return TSR_SUCCESS;
    /* counted and profiled: fewer calls, each kernel's event kept by the preload */
    long counted = calls < 50 ? calls : 50;
    uint64_t before[5], after[5];
    counter.clear();
    counter.read(before);
    counter.record(1);
    for (long i = 0; i < counted; ++i)
        if ((st = op_call(c, op)) != TSR_SUCCESS) break;
    counter.record(0);
    counter.read(after);
    clFinish(c->q);
    cl_event *events = NULL;
    size_t nevents = counter.events(&events);
    double device_ns = 0;
    bool timed = true;
    for (size_t i = 0; i < nevents; ++i) {
        cl_ulong start = 0, end = 0;
        timed &= clGetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_START, sizeof start, &start, NULL) ==
                     CL_SUCCESS &&
                 clGetEventProfilingInfo(events[i], CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) == CL_SUCCESS &&
                 end >= start;
        device_ns += (double)(end - start);
        clReleaseEvent(events[i]);
    }
    counter.clear();
    if (st != TSR_SUCCESS) return st;
    r->counted = true;
    r->timed = timed;
    r->launches = (double)(after[0] - before[0]) / (double)counted;
    r->waits = (double)(after[1] - before[1]) / (double)counted;
    r->transfers = (double)(after[2] - before[2]) / (double)counted;
    r->arg_sets = (double)(after[3] - before[3]) / (double)counted;
    r->kernels_created = (double)(after[4] - before[4]) / (double)counted;
    r->device_us = device_ns / 1e3 / (double)counted;
    return TSR_SUCCESS;
}

static int ops_fail(const char *what, tsr_status st) {
    fprintf(stderr, "call_overhead --ops: %s: %s: %s\n", what, tsr_status_str(st), tsr_last_error());
    return 1;
}

static int run_ops(const char *selector, long calls) {
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(selector, &dev);
    if (st != TSR_SUCCESS) return ops_fail("device", st);
    ops_ctx c;
    memset(&c, 0, sizeof c);
    c.dev = dev;
    cl_context ctx = tsr_device_context(dev);
    cl_device_id id = tsr_device_id(dev);
    cl_int err;
    c.q = clCreateCommandQueue(ctx, id, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) return ops_fail("clCreateCommandQueue", TSR_ERR_OPENCL);
    static const char *empty_src = "kernel void empty(void) {}\n";
    cl_program prog = clCreateProgramWithSource(ctx, 1, &empty_src, NULL, &err);
    if (err != CL_SUCCESS || clBuildProgram(prog, 1, &id, "", NULL, NULL) != CL_SUCCESS)
        return ops_fail("the empty kernel", TSR_ERR_BUILD);
    c.empty = clCreateKernel(prog, "empty", &err);
    if (err != CL_SUCCESS) return ops_fail("the empty kernel", TSR_ERR_OPENCL);
    uint32_t seed = 12345;
    cl_mem *bufs[] = {&c.x, &c.h, &c.qkv, &c.att, &c.ffn, &c.w_qkv, &c.w_o, &c.w_1, &c.w_2, &c.b_qkv, &c.b_o,
                      &c.b_1, &c.b_2, &c.gamma, &c.beta, &c.conv_x, &c.conv_w, &c.conv_y, &c.gelu_x, &c.gelu_y,
                      &c.table, &c.positions, &c.types, &c.emb_y};
    const size_t sizes[] = {TOKENS * HIDDEN, TOKENS * HIDDEN, TOKENS * 3 * HIDDEN, TOKENS * HIDDEN, TOKENS * FFN,
                            HIDDEN * 3 * HIDDEN, HIDDEN * HIDDEN, HIDDEN * FFN, FFN * HIDDEN, 3 * HIDDEN, HIDDEN,
                            FFN, HIDDEN, HIDDEN, HIDDEN, 512 * 49, 512 * 512, 512 * 49, 4096, 4096,
                            1000 * HIDDEN, 512 * HIDDEN, 2 * HIDDEN, TOKENS * HIDDEN};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; ++i)
        if (!(*bufs[i] = random_buffer(ctx, sizes[i], &seed))) return ops_fail("clCreateBuffer", TSR_ERR_OPENCL);
    for (int t = 0; t < TOKENS; ++t) c.ids[t] = (t * 37 + 11) % 1000, c.type_ids[t] = t >= TOKENS / 2;
    if (getenv("CALL_OVERHEAD_LOOP")) { /* for a profiler: one op's gated calls, nothing else */
        int op = atoi(getenv("CALL_OVERHEAD_LOOP"));
        if (op < 0 || op >= NOPS) return ops_fail("CALL_OVERHEAD_LOOP (an op's index)", TSR_ERR_INVALID_ARG);
        enum { LR = 51 };
        double wall[LR], cpu[LR];
        for (int r = 0; r < LR; ++r)
            if ((st = gated_per_call(&c, op, calls, &wall[r], &cpu[r])) != TSR_SUCCESS) return ops_fail(op_names[op], st);
        qsort(wall, LR, sizeof(double), by_value);
        qsort(cpu, LR, sizeof(double), by_value);
        printf("{\"op\": \"%s\", \"gated_us\": %.3f, \"gated_cpu_us\": %.3f}\n", op_names[op], wall[LR / 2],
               cpu[LR / 2]);
        return 0;
    }
    op_row rows[NOPS];
    for (int op = 0; op < NOPS; ++op)
        if ((st = measure_op(&c, op, calls, &rows[op])) != TSR_SUCCESS) return ops_fail(op_names[op], st);
    for (int op = OP_GEMM16; op < NOPS; ++op) { /* the same launches, replayed: the driver's share alone */
        if (op == OP_EMBEDDING) continue;          /* uploads its ids: not recordable */
        if ((st = tsr_graph_begin(dev, NULL)) != TSR_SUCCESS) return ops_fail("tsr_graph_begin", st);
        tsr_status call_st = op_call(&c, op);
        if (call_st != TSR_SUCCESS) return ops_fail(op_names[op], call_st);
        if ((st = tsr_graph_end(dev, &c.graph[op])) != TSR_SUCCESS) /* no replay row, the call's rows stay */
            fprintf(stderr, "call_overhead --ops: %s: not recordable: %s\n", op_names[op], tsr_last_error());
    }
    clFinish(c.q);
    if ((st = host_rounds(&c, calls, rows)) != TSR_SUCCESS) return ops_fail("host rounds", st);
    const double empty = rows[OP_EMPTY].host_us;
    fprintf(stderr, "%-26s %9s %9s %9s %9s %8s %6s %8s %9s %9s %8s %9s %6s %7s\n", "op", "host_us", "sync_us", "device_us",
            "pipe_us", "launches", "waits", "x_empty", "gated_us", "gated_cpu", "gx_empty", "replay_cpu", "sets",
            "created");
    printf("{\"device\": \"%s\", \"calls\": %ld, \"counted\": %s, \"empty_enqueue_us\": %.3f, "
           "\"empty_enqueue_finish_us\": %.3f, \"rows\": [",
           tsr_device_get_info(dev)->name, calls, rows[0].counted ? "true" : "false", empty, rows[OP_EMPTY].sync_us);
    for (int op = 0; op < NOPS; ++op) {
        const op_row *r = &rows[op];
        fprintf(stderr, "%-26s %9.1f %9.1f %9.1f %9.1f %8.2f %6.2f %8.2f %9.2f %9.2f %8.2f %9.2f %6.1f %7.2f\n", op_names[op],
                r->host_us, r->sync_us, r->counted && r->timed ? r->device_us : NAN, r->pipelined_us,
                r->counted ? r->launches : NAN, r->counted ? r->waits : NAN, r->host_vs_empty, r->gated_us,
                r->gated_cpu_us, r->gated_vs_empty, r->replayed ? r->replay_cpu_us : NAN, r->counted ? r->arg_sets : NAN,
                r->counted ? r->kernels_created : NAN);
        char replay[32] = "null";
        if (r->replayed) snprintf(replay, sizeof replay, "%.3f", r->replay_cpu_us);
        char launches[32] = "null", waits[32] = "null", transfers[32] = "null", device[32] = "null",
             arg_sets[32] = "null", created[32] = "null";
        if (r->counted) {
            snprintf(launches, sizeof launches, "%.2f", r->launches);
            snprintf(waits, sizeof waits, "%.2f", r->waits);
            snprintf(transfers, sizeof transfers, "%.2f", r->transfers);
            snprintf(arg_sets, sizeof arg_sets, "%.2f", r->arg_sets);
            snprintf(created, sizeof created, "%.2f", r->kernels_created);
            if (r->timed) snprintf(device, sizeof device, "%.3f", r->device_us);
        }
        printf("%s{\"op\": \"%s\", \"host_us\": %.3f, \"sync_us\": %.3f, \"pipelined_us\": %.3f, \"device_us\": %s, "
               "\"launches\": %s, \"host_waits\": %s, \"transfers\": %s, \"host_vs_empty\": %.3f, \"gated_us\": %.3f, "
               "\"gated_cpu_us\": %.3f, \"gated_vs_empty\": %.3f, \"replay_cpu_us\": %s, \"arg_sets\": %s, "
               "\"kernels_created\": %s, \"op_calls\": %d}",
               op ? ", " : "", op_names[op], r->host_us, r->sync_us, r->pipelined_us, device, launches, waits,
               transfers, r->host_vs_empty, r->gated_us, r->gated_cpu_us, r->gated_vs_empty, replay, arg_sets, created,
               op == OP_LAYER ? 7 : 1);
    }
    printf("]}\n");
    for (int op = 0; op < NOPS; ++op) tsr_graph_destroy(c.graph[op]);
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; ++i) clReleaseMemObject(*bufs[i]);
    clReleaseKernel(c.empty);
    clReleaseProgram(prog);
    clReleaseCommandQueue(c.q);
    tsr_device_close(dev);
    return 0;
}

/* ---- --waits: what PoCL (or any driver) charges for a launch and for a host wait ---- */

static const char *waits_src =
    "kernel void empty(void) {}\n"
    "kernel void args30(int m, int n, int k, int kp, float al, float be, global const float *a, ulong ao, int lda,\n"
    "  ulong as, global const float *b, ulong bo, int ldb, ulong bs, global float *c, ulong co, int ldc, ulong cs,\n"
    "  global const float *bias, ulong bo2, ulong bst, int bax, int act, global const float *sc, ulong so, ulong ss,\n"
    "  int sax, global const uchar *res, ulong ro, int rt) {}\n"
    "kernel void args2(global float *p, int16 geo) {}\n"
    "kernel void args8(int16 iv, ulong16 uv, global const float *a, global const float *b, global float *c,\n"
    "  global const float *bias, global const float *sc, global const uchar *res) {}\n"
    "kernel void busy(global float *p, int n) {\n"
    "  float x = p[get_global_id(0)]; for (int i = 0; i < n; ++i) x = x * 0.999f + 0.5f; p[get_global_id(0)] = x; }\n";

typedef struct waits_ctx {
    cl_command_queue q;
    cl_kernel empty, args30, args30b, args2, args8, busy;
} waits_ctx;

enum { W_ENQ, W_ENQ_EVENT, W_ARGS30_SET, W_ARGS30_ENQ, W_ARGS30_BUF, W_ARGS8_BUF, W_ARGS2, W_FINISH, W_WAIT_EVENT, W_POLL_EVENT, W_TWO_FINISH,
       W_TWO_WAIT_BETWEEN, W_BUSY_TWO, W_BUSY_TWO_WAIT, W_IDLE2_FINISH, W_IDLE20_FINISH, NWAITS };
static const char *const wait_names[NWAITS] = {
    "enqueue empty (no event)",        "enqueue empty + event release",  "set 30 args + enqueue",
    "enqueue 30-arg kernel (args set)", "same, 6 buffers + event",      "8 args: int16, ulong16, 6 buffers",
    "enqueue 2-arg kernel (int16)",  "enqueue + clFinish",
    "enqueue + clWaitForEvents",       "enqueue + flush + poll status",  "2 enqueues + clFinish",
    "enqueue, finish, enqueue, finish", "2 busy(~20us) + clFinish",      "busy, finish, busy, finish",
    "idle 2 ms, enqueue + clFinish",   "idle 20 ms, enqueue + clFinish"};

static void idle_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static cl_int waits_step(waits_ctx *w, int kind, int *idle) {
    const size_t one = 1, sixteen = 16;
    cl_event ev = NULL;
    cl_int err = CL_SUCCESS;
    *idle = 0;
    switch (kind) {
    case W_ENQ: return clEnqueueNDRangeKernel(w->q, w->empty, 1, NULL, &one, NULL, 0, NULL, NULL);
    case W_ENQ_EVENT:
        err = clEnqueueNDRangeKernel(w->q, w->empty, 1, NULL, &one, NULL, 0, NULL, &ev);
        if (ev) clReleaseEvent(ev);
        return err;
    case W_ARGS30_SET: {
        int iv = 3;
        float fv = 1.0f;
        cl_ulong uv = 0;
        cl_mem nul = NULL;
        static const char kinds[] = "iiiiffmuiumuiumuiumuuiimuuimui"; /* i int, f float, u ulong, m buffer */
        for (cl_uint a = 0; a < 30 && err == CL_SUCCESS; ++a) {
            char t = a < sizeof kinds - 1 ? kinds[a] : 'i';
            err = t == 'i'   ? clSetKernelArg(w->args30, a, sizeof iv, &iv)
                  : t == 'f' ? clSetKernelArg(w->args30, a, sizeof fv, &fv)
                  : t == 'u' ? clSetKernelArg(w->args30, a, sizeof uv, &uv)
                             : clSetKernelArg(w->args30, a, sizeof nul, &nul);
        }
        return err ? err : clEnqueueNDRangeKernel(w->q, w->args30, 1, NULL, &one, NULL, 0, NULL, NULL);
    }
    case W_ARGS30_ENQ: return clEnqueueNDRangeKernel(w->q, w->args30, 1, NULL, &one, NULL, 0, NULL, NULL);
    case W_ARGS30_BUF:
    case W_ARGS8_BUF:
        err = clEnqueueNDRangeKernel(w->q, kind == W_ARGS30_BUF ? w->args30b : w->args8, 1, NULL, &one, NULL, 0, NULL,
                                     &ev);
        if (ev) clReleaseEvent(ev);
        return err;
    case W_ARGS2: return clEnqueueNDRangeKernel(w->q, w->args2, 1, NULL, &one, NULL, 0, NULL, NULL);
    case W_FINISH:
        err = clEnqueueNDRangeKernel(w->q, w->empty, 1, NULL, &one, NULL, 0, NULL, NULL);
        return err ? err : clFinish(w->q);
    case W_WAIT_EVENT:
        err = clEnqueueNDRangeKernel(w->q, w->empty, 1, NULL, &one, NULL, 0, NULL, &ev);
        if (!err) err = clWaitForEvents(1, &ev);
        if (ev) clReleaseEvent(ev);
        return err;
    case W_POLL_EVENT: {
        err = clEnqueueNDRangeKernel(w->q, w->empty, 1, NULL, &one, NULL, 0, NULL, &ev);
        if (!err) err = clFlush(w->q);
        cl_int state = CL_QUEUED;
        while (!err && state > CL_COMPLETE)
            err = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL);
        if (ev) clReleaseEvent(ev);
        return err;
    }
    case W_TWO_FINISH:
        err = clEnqueueNDRangeKernel(w->q, w->empty, 1, NULL, &one, NULL, 0, NULL, NULL);
        if (!err) err = clEnqueueNDRangeKernel(w->q, w->empty, 1, NULL, &one, NULL, 0, NULL, NULL);
        return err ? err : clFinish(w->q);
    case W_TWO_WAIT_BETWEEN:
        err = clEnqueueNDRangeKernel(w->q, w->empty, 1, NULL, &one, NULL, 0, NULL, NULL);
        if (!err) err = clFinish(w->q);
        if (!err) err = clEnqueueNDRangeKernel(w->q, w->empty, 1, NULL, &one, NULL, 0, NULL, NULL);
        return err ? err : clFinish(w->q);
    case W_BUSY_TWO:
        err = clEnqueueNDRangeKernel(w->q, w->busy, 1, NULL, &sixteen, &sixteen, 0, NULL, NULL);
        if (!err) err = clEnqueueNDRangeKernel(w->q, w->busy, 1, NULL, &sixteen, &sixteen, 0, NULL, NULL);
        return err ? err : clFinish(w->q);
    case W_BUSY_TWO_WAIT:
        err = clEnqueueNDRangeKernel(w->q, w->busy, 1, NULL, &sixteen, &sixteen, 0, NULL, NULL);
        if (!err) err = clFinish(w->q);
        if (!err) err = clEnqueueNDRangeKernel(w->q, w->busy, 1, NULL, &sixteen, &sixteen, 0, NULL, NULL);
        return err ? err : clFinish(w->q);
    case W_IDLE2_FINISH:
    case W_IDLE20_FINISH:
        idle_ms(kind == W_IDLE2_FINISH ? 2 : 20);
        *idle = 1;
        err = clEnqueueNDRangeKernel(w->q, w->empty, 1, NULL, &one, NULL, 0, NULL, NULL);
        return err ? err : clFinish(w->q);
    }
    return CL_INVALID_VALUE;
}

/* Medians over rounds of `reps` steps each: wall and thread-CPU microseconds per step (the idle
 * steps time only what follows the sleep). Printed as a table on stderr and JSON on stdout. */
static int run_waits(const char *selector, long reps) {
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(selector, &dev);
    if (st != TSR_SUCCESS) return ops_fail("device", st);
    cl_context ctx = tsr_device_context(dev);
    cl_device_id id = tsr_device_id(dev);
    cl_int err;
    waits_ctx w;
    w.q = clCreateCommandQueue(ctx, id, 0, &err);
    if (err != CL_SUCCESS) return ops_fail("clCreateCommandQueue", TSR_ERR_OPENCL);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &waits_src, NULL, &err);
    if (err != CL_SUCCESS || clBuildProgram(prog, 1, &id, "", NULL, NULL) != CL_SUCCESS)
        return ops_fail("the probe kernels", TSR_ERR_BUILD);
    w.empty = clCreateKernel(prog, "empty", &err);
    w.args30 = clCreateKernel(prog, "args30", &err);
    w.args2 = clCreateKernel(prog, "args2", &err);
    w.args8 = clCreateKernel(prog, "args8", &err);
    w.args30b = clCreateKernel(prog, "args30", &err);
    w.busy = clCreateKernel(prog, "busy", &err);
    uint32_t seed = 7;
    cl_mem buf = random_buffer(ctx, 64, &seed);
    if (!w.empty || !w.args30 || !w.args30b || !w.args2 || !w.args8 || !w.busy || !buf) return ops_fail("the probe kernels", TSR_ERR_OPENCL);
    int iters = 4000;
    cl_int16 geo = {{0}};
    clSetKernelArg(w.busy, 0, sizeof buf, &buf);
    clSetKernelArg(w.busy, 1, sizeof iters, &iters);
    clSetKernelArg(w.args2, 0, sizeof buf, &buf);
    clSetKernelArg(w.args2, 1, sizeof geo, &geo);
    cl_ulong16 uv = {{0}};
    clSetKernelArg(w.args8, 0, sizeof geo, &geo);
    clSetKernelArg(w.args8, 1, sizeof uv, &uv);
    for (cl_uint a = 2; a < 8; ++a) clSetKernelArg(w.args8, a, sizeof buf, &buf);
    {
        int iv = 3;
        float fv = 1.0f;
        cl_ulong u = 0;
        static const char kinds[] = "iiiiffmuiumuiumuiumuuiimuuimui";
        for (cl_uint a = 0; a < 30; ++a)
            clSetKernelArg(w.args30b, a, kinds[a] == 'i' ? sizeof iv : kinds[a] == 'f' ? sizeof fv : kinds[a] == 'u' ? sizeof u : sizeof buf,
                           kinds[a] == 'i' ? (void *)&iv : kinds[a] == 'f' ? (void *)&fv : kinds[a] == 'u' ? (void *)&u : (void *)&buf);
    }
    int idle = 0; /* set by the idle steps: their sleep is subtracted below */
    if (waits_step(&w, W_ARGS30_SET, &idle) != CL_SUCCESS) return ops_fail("the 30-argument kernel", TSR_ERR_OPENCL);
    clFinish(w.q);
    enum { WR = 7 };
    double wall[NWAITS][WR], cpu[NWAITS][WR];
    for (int r = 0; r < WR; ++r)
        for (int k = 0; k < NWAITS; ++k) {
            long n = k >= W_IDLE2_FINISH ? (reps < 20 ? reps : 20) : reps;
            double tw = 0, tc = 0;
            /* the enqueue-only steps run gated: held behind a user event, so no kernel runs meanwhile */
            cl_event gate = k <= W_ARGS2 ? clCreateUserEvent(ctx, &err) : NULL;
            if (gate && clEnqueueBarrierWithWaitList(w.q, 1, &gate, NULL) != CL_SUCCESS)
                return ops_fail("the gate", TSR_ERR_OPENCL);
            for (long i = 0; i < n; ++i) {
                double w0 = now_us(), c0 = thread_cpu_us();
                if (waits_step(&w, k, &idle) != CL_SUCCESS) return ops_fail(wait_names[k], TSR_ERR_OPENCL);
                double w1 = now_us(), c1 = thread_cpu_us();
                tw += w1 - w0, tc += c1 - c0;
            }
            if (gate) clSetUserEventStatus(gate, CL_COMPLETE), clReleaseEvent(gate);
            clFinish(w.q);
            wall[k][r] = tw / (double)n;
            cpu[k][r] = tc / (double)n;
            if (k >= W_IDLE2_FINISH) wall[k][r] -= k == W_IDLE2_FINISH ? 2000.0 : 20000.0;
        }
    fprintf(stderr, "%-34s %10s %10s\n", "step", "wall_us", "cpu_us");
    printf("{\"device\": \"%s\", \"reps\": %ld, \"rows\": [", tsr_device_get_info(dev)->name, reps);
    for (int k = 0; k < NWAITS; ++k) {
        qsort(wall[k], WR, sizeof(double), by_value);
        qsort(cpu[k], WR, sizeof(double), by_value);
        fprintf(stderr, "%-34s %10.2f %10.2f\n", wait_names[k], wall[k][WR / 2], cpu[k][WR / 2]);
        printf("%s{\"step\": \"%s\", \"wall_us\": %.3f, \"cpu_us\": %.3f}", k ? ", " : "", wait_names[k],
               wall[k][WR / 2], cpu[k][WR / 2]);
    }
    printf("]}\n");
    clReleaseMemObject(buf);
    clReleaseKernel(w.empty);
    clReleaseKernel(w.args30);
    clReleaseKernel(w.args2);
    clReleaseKernel(w.args8);
    clReleaseKernel(w.args30b);
    clReleaseKernel(w.busy);
    clReleaseProgram(prog);
    clReleaseCommandQueue(w.q);
    tsr_device_close(dev);
    return 0;
}

int main(int argc, char **argv) {
    static const struct option options[] = {{"device", required_argument, NULL, 'd'},
                                            {"size", required_argument, NULL, 's'},
                                            {"calls", required_argument, NULL, 'c'},
                                            {"ops", no_argument, NULL, 'o'},
                                            {"waits", no_argument, NULL, 'w'},
                                            {0}};
    bool ops = false, waits = false;
    const char *selector = NULL, *bad = NULL;
    uint64_t size_arg = 256, calls_arg = 200;
    int opt;
    while ((opt = util_next_option(argc, argv, "", options, true, &bad)) != -1) {
        if (opt == 'd') selector = optarg;
        else if ((opt == 's' && util_parse_count(optarg, "--size", 1, 8192, &size_arg) != TSR_SUCCESS) ||
                 (opt == 'c' && util_parse_count(optarg, "--calls", 1, 1000000, &calls_arg) != TSR_SUCCESS)) {
            fprintf(stderr, "call_overhead: --size 1..8192, --calls 1..1000000\n");
            return 2;
        } else if (opt == 'o') {
            ops = true;
        } else if (opt == 'w') {
            waits = true;
        } else if (opt != 's' && opt != 'c') {
            fprintf(stderr, "usage: call_overhead [--device SEL] [--size N] [--calls N] [--ops | --waits]\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "usage: call_overhead [--device SEL] [--size N] [--calls N]\n");
        return 2;
    }
    long calls = (long)calls_arg;
    if (waits) return run_waits(selector, calls);
    if (ops) {
        if (!counter_load()) {
            reexec_with_counter(argv);
            if (!counter_load()) fprintf(stderr, "call_overhead --ops: no launch counter: launches and waits not counted\n");
        }
        return run_ops(selector, calls);
    }
    size_t n = (size_t)size_arg;
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(selector, &dev);
    if (st != TSR_SUCCESS) return fail("device", st);
    cl_context ctx = tsr_device_context(dev);
    cl_command_queue q = tsr_device_queue(dev);
    float *host = malloc(n * n * sizeof(float));
    if (!host) return 1;
    for (size_t i = 0; i < n * n; ++i) host[i] = (float)(i % 17) * 0.125f - 1.0f;
    cl_int err_a, err_b, err_c;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * n * sizeof(float), host, &err_a);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * n * sizeof(float), host, &err_b);
    cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * n * sizeof(float), NULL, &err_c);
    if (err_a != CL_SUCCESS || err_b != CL_SUCCESS || err_c != CL_SUCCESS) {
        fprintf(stderr, "call_overhead: clCreateBuffer failed\n");
        return 1;
    }
    const tsr_matmul_desc desc = {.m = n, .n = n, .k = n, .alpha = 1.0f};
#define GEMM() tsr_matmul(dev, &desc, a, b, c, NULL, NULL)
    for (int i = 0; i < 10; ++i)
        if ((st = GEMM()) != TSR_SUCCESS) return fail("tsr_matmul", st);
    clFinish(q);
    double t0 = now_us();
    for (long i = 0; i < calls; ++i) {
        if ((st = GEMM()) != TSR_SUCCESS) return fail("tsr_matmul", st);
        clFinish(q);
    }
    double t1 = now_us();
    for (long i = 0; i < calls; ++i)
        if ((st = GEMM()) != TSR_SUCCESS) return fail("tsr_matmul", st);
    clFinish(q);
    double t2 = now_us();
    printf("{\"size\": %zu, \"calls\": %ld, \"device\": \"%s\", \"synchronous_us\": %.3f, \"pipelined_us\": %.3f}\n", n,
           calls, tsr_device_get_info(dev)->name, (t1 - t0) / (double)calls, (t2 - t1) / (double)calls);
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseMemObject(c);
    free(host);
    tsr_device_close(dev);
    return 0;
}
