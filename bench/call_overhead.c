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
 * The row "layer" is a transformer layer's seven calls at 1 x 16 tokens, back to back. */
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

typedef void (*counter_read_fn)(uint64_t out[3]);
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

enum { OP_EMPTY, OP_GEMM16, OP_GEMM1, OP_GELU, OP_LAYERNORM, OP_ATTENTION, OP_CONV, OP_EMBEDDING, OP_LAYER, NOPS };
static const char *const op_names[NOPS] = {"empty-kernel",   "gemm 16x384x384", "gemm 1x384x384",
                                           "gelu 4096",      "layernorm 16x384", "attention 1x12x16x16x32",
                                           "conv2d 1x1 512->512 7x7", "embedding 16 ids", "layer 1x16 (7 calls)"};

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
    double host_us, host_vs_empty, sync_us, pipelined_us, device_us, launches, waits, transfers;
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

#define ROUNDS 5
/* host_us and host_vs_empty of every row: ROUNDS rounds, each timing the empty kernel's enqueue
 * right before the op, so a ratio compares two numbers taken under the same load; medians. */
static tsr_status host_rounds(ops_ctx *c, long calls, op_row *rows) {
    double host[NOPS][ROUNDS], ratio[NOPS][ROUNDS];
    for (int r = 0; r < ROUNDS; ++r)
        for (int op = 0; op < NOPS; ++op) {
            double empty, us;
            tsr_status st = host_per_call(c, OP_EMPTY, calls, &empty);
            if (st == TSR_SUCCESS) st = host_per_call(c, op, calls, &us);
            if (st != TSR_SUCCESS) return st;
            host[op][r] = us;
            ratio[op][r] = us / empty;
        }
    for (int op = 0; op < NOPS; ++op) {
        qsort(host[op], ROUNDS, sizeof(double), by_value);
        qsort(ratio[op], ROUNDS, sizeof(double), by_value);
        rows[op].host_us = host[op][ROUNDS / 2];
        rows[op].host_vs_empty = ratio[op][ROUNDS / 2];
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
    uint64_t before[3], after[3];
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
    op_row rows[NOPS];
    for (int op = 0; op < NOPS; ++op)
        if ((st = measure_op(&c, op, calls, &rows[op])) != TSR_SUCCESS) return ops_fail(op_names[op], st);
    if ((st = host_rounds(&c, calls, rows)) != TSR_SUCCESS) return ops_fail("host rounds", st);
    const double empty = rows[OP_EMPTY].host_us;
    fprintf(stderr, "%-26s %9s %9s %9s %9s %8s %6s %8s\n", "op", "host_us", "sync_us", "device_us", "pipe_us",
            "launches", "waits", "x_empty");
    printf("{\"device\": \"%s\", \"calls\": %ld, \"counted\": %s, \"empty_enqueue_us\": %.3f, "
           "\"empty_enqueue_finish_us\": %.3f, \"rows\": [",
           tsr_device_get_info(dev)->name, calls, rows[0].counted ? "true" : "false", empty, rows[OP_EMPTY].sync_us);
    for (int op = 0; op < NOPS; ++op) {
        const op_row *r = &rows[op];
        fprintf(stderr, "%-26s %9.1f %9.1f %9.1f %9.1f %8.2f %6.2f %8.2f\n", op_names[op], r->host_us, r->sync_us,
                r->counted && r->timed ? r->device_us : NAN, r->pipelined_us, r->counted ? r->launches : NAN,
                r->counted ? r->waits : NAN, r->host_vs_empty);
        char launches[32] = "null", waits[32] = "null", transfers[32] = "null", device[32] = "null";
        if (r->counted) {
            snprintf(launches, sizeof launches, "%.2f", r->launches);
            snprintf(waits, sizeof waits, "%.2f", r->waits);
            snprintf(transfers, sizeof transfers, "%.2f", r->transfers);
            if (r->timed) snprintf(device, sizeof device, "%.3f", r->device_us);
        }
        printf("%s{\"op\": \"%s\", \"host_us\": %.3f, \"sync_us\": %.3f, \"pipelined_us\": %.3f, \"device_us\": %s, "
               "\"launches\": %s, \"host_waits\": %s, \"transfers\": %s, \"host_vs_empty\": %.3f, \"op_calls\": %d}",
               op ? ", " : "", op_names[op], r->host_us, r->sync_us, r->pipelined_us, device, launches, waits,
               transfers, r->host_vs_empty, op == OP_LAYER ? 7 : 1);
    }
    printf("]}\n");
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; ++i) clReleaseMemObject(*bufs[i]);
    clReleaseKernel(c.empty);
    clReleaseProgram(prog);
    clReleaseCommandQueue(c.q);
    tsr_device_close(dev);
    return 0;
}

int main(int argc, char **argv) {
    static const struct option options[] = {{"device", required_argument, NULL, 'd'},
                                            {"size", required_argument, NULL, 's'},
                                            {"calls", required_argument, NULL, 'c'},
                                            {"ops", no_argument, NULL, 'o'},
                                            {0}};
    bool ops = false;
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
        } else if (opt != 's' && opt != 'c') {
            fprintf(stderr, "usage: call_overhead [--device SEL] [--size N] [--calls N] [--ops]\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "usage: call_overhead [--device SEL] [--size N] [--calls N]\n");
        return 2;
    }
    long calls = (long)calls_arg;
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
