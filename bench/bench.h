/* The benchmark harness shared by every op: one row format, timing, output. */
#ifndef TSR_BENCH_H
#define TSR_BENCH_H

#include "internal.h"
#include "util.h"

#include <stdio.h>

typedef struct bench_row {
    char op[32];
    char shape[64];
    char impl[32];       /* "tessera", "clblast", "openblas", ... */
    double time_ms;      /* median */
    double time_min_ms, time_max_ms;
    int runs;
    double gflops;       /* from the op's FLOP count; 0 when not meaningful */
    double gbps;         /* bytes that must move / time; 0 when not meaningful */
    double rel_err;      /* against a double-precision reference; < 0 when not checked */
    double mem_mib;      /* device memory the implementation allocates (0: not reported) */
    char timing[8];      /* how time_ms was measured: "device" (profiling events) or "host" (wall clock);
                          * "" is "host": bench_time's wall clock around each call */
    char mask[16];       /* attention: "none" or "causal"; "" (not written) for other ops */
    char variant[64];    /* what exactly ran, when impl alone does not say; "" (not written) otherwise */
    char dtype[16];      /* storage types when not fp32 throughout: "f16" (inputs and output), "bf16/f32"
                          * (inputs / output), as tsr_dtype_spec_format; "" (not written) for fp32 */
    double paired_rate_ratio; /* a row timed in alternation with a twin (bench_time_paired): the median over
                               * the pairs of its rate over the twin's in the same pair (the twin's time over
                               * its own; the same work per call on both sides); 0 (not written) otherwise */
} bench_row;

typedef struct bench_report {
    char device[2 * TSR_INFO_STR];
    bench_row *rows;
    size_t nrows, cap;
} bench_report;

/* Something to time: runs the work once and waits for it. */
typedef tsr_status (*bench_fn)(void *ctx);

/* Poison an output with NaN, run fn once and read the output back into host[0..n): the check
 * that follows sees only what this run wrote (a peer that writes nothing reads as NaN, not as
 * the previous implementation's result). out NULL: fn writes host itself (a host library). */
tsr_status bench_checked_run(bench_fn fn, void *ctx, tsr_device *dev, cl_mem out, float *host, size_t n);

/* Half the median's ~95% confidence interval, relative, below which timing a row stops. */
#define BENCH_PRECISION 0.02

/* Warm up once, then time runs with a wall clock around each call: at least min_runs, then
 * until the median is known within BENCH_PRECISION or `budget_s` seconds are spent, at most
 * max_runs; fills the time fields of `row`. */
tsr_status bench_time(bench_fn fn, void *ctx, double budget_s, int min_runs, int max_runs, bench_row *row);

/* A and B timed in alternation (A, B, A, B, ...) after a warm-up of each, at least min_pairs,
 * then until the medians of both and of their ratio are known within BENCH_PRECISION or
 * `budget_s` is spent, at most max_pairs, so that both see the same machine: on a shared
 * machine the load moves on a scale of seconds and rows timed one after the other can differ by
 * 20% for that alone. Fills the time fields of row_a and row_b, and *ratio (and its extremes)
 * with the median over pairs of time(A) / time(B). */
tsr_status bench_time_paired(bench_fn fn_a, void *ctx_a, bench_fn fn_b, void *ctx_b, double budget_s, int min_pairs,
                             int max_pairs, bench_row *row_a, bench_row *row_b, double ratio[3]);

/* bench_time_paired with the caches emptied before every timed call by evict(evict_ctx) (not
 * timed; NULL: bench_evict_caches), so neither call finds what the other left in the last-level
 * cache, nor pays for writing back the other's dirty lines. For memory-bound ops whose two sides'
 * working sets differ and fit, in part, in the LLC (the embedding gather: an fp32 call touches
 * twice the 16-bit call's bytes and evicts the 16-bit rows more than the reverse, so plain
 * alternation favours fp32). On a CPU device, evict on the device (a copy kernel over
 * bench_evict_bytes()): host work between the calls lets the OpenCL runtime's worker threads
 * sleep, and under load their wake-up costs milliseconds a call. */
tsr_status bench_time_paired_cold(bench_fn fn_a, void *ctx_a, bench_fn fn_b, void *ctx_b, bench_fn evict,
                                  void *evict_ctx, double budget_s, int min_pairs, int max_pairs, bench_row *row_a,
                                  bench_row *row_b, double ratio[3]);

/* 4x the last-level cache (glibc's sysconf), at least 64 MiB; 128 MiB when its size is unknown. */
size_t bench_evict_bytes(void);

/* Read and write (ordinary stores) a host buffer of bench_evict_bytes(): afterwards no earlier
 * data of this process is left in the caches. Allocated on first use and kept. A bench_fn. */
tsr_status bench_evict_caches(void *unused);

tsr_status bench_add(bench_report *report, const bench_row *row);

/* Default shapes on a slow device (llvmpipe runs GEMM at 0.1 GFLOP/s: 4096^3 would take 20 minutes
 * a run): would a row of `flops` for `impl` take more than BENCH_MAX_PREDICTED_S seconds for its
 * warm-up and minimum runs, at the fastest rate `impl` reached on an earlier row of `op` in this
 * report? Then true, with the reason in `why`. False without an earlier row to go by. */
#define BENCH_MAX_PREDICTED_S 120.0
bool bench_predicted_too_slow(const bench_report *report, const char *op, const char *impl, double flops,
                              int min_runs, char *why, size_t size);
void bench_report_free(bench_report *report);
/* Write rows as a JSON array of objects (op, shape, impl, device, time_ms, gflops, gbps, rel_err, timing, ...). */
tsr_status bench_write_json(const bench_report *report, const char *path);

/* Pause after timing a host library (OpenBLAS): its worker threads spin for about 2^28 cycles
 * after each call before they sleep, and would take cores from the next measurement. */
void bench_settle_host_threads(void);

/* Per-op benchmarks: options come from the CLI. */
typedef struct bench_options {
    const char *sizes;   /* op-specific list; NULL: the op's defaults (bench_run fills them in) */
    double budget_s;     /* timing budget per row */
    bool peers;          /* run CLBlast / OpenBLAS too */
    bool quiet;
    const char *part;    /* an op's part of its benchmark (gelu: "elementwise", "epilogue"), NULL: all */
    const char *clblast_xgemm; /* "NAME=V ..." for CLBlast's Xgemm kernel (from its tuner), NULL: its defaults */
    size_t max_unfused;  /* attention: longest sequence the unfused pipelines run (0: 2048) */
    const char *layers;  /* conv2d: ResNet-50 layer names, comma separated, or "all"; NULL: a selection */
    /* --dtype IN[/OUT]: the storage of the op's inputs and output (f32 when not given). With a 16-bit
     * type each shape's tessera row is timed in alternation with the same shape in fp32, and both
     * rows are written (the ratio is the point: same machine, same moment). */
    tsr_dtype in_type, out_type;
    /* conv2d --weights per-call: the weight buffers are not marked constant, so every call
     * transforms or widens its weights again (the default, "kept", marks them:
     * tsr_buffer_set_constant) */
    bool per_call_weights;
    /* conv2d --forms chosen: only the path the call itself takes (and the peers), not each path
     * forced in turn (im2col, implicit, the naive direct kernel): what a measurement of the call needs,
     * without the direct kernel's seconds a layer */
    bool chosen_form_only;
} bench_options;

tsr_status bench_gemm(tsr_device *device, const bench_options *options, bench_report *report);

/* One GELU-benchmark run (bench_gelu.c), shared with the report's GELU case: a bench_fn. */
typedef enum { GELU_RUN_FUSED, GELU_RUN_UNFUSED, GELU_RUN_COPY_KERNEL, GELU_RUN_COPY_BUFFER } gelu_run_kind;
typedef struct gelu_run {
    tsr_device *dev;
    gelu_run_kind kind;
    tsr_gelu_mode mode;
    cl_mem x, y;
    size_t n;
    tsr_dtype x_type, y_type; /* fused and copy kernel: storage of x and y (zero: fp32) */
    int calls;                /* calls back to back before the one clFinish (0: one) */
} gelu_run;
tsr_status bench_gelu_once(void *gelu_run_ctx);
tsr_status bench_gelu(tsr_device *device, const bench_options *options, bench_report *report);
tsr_status bench_attention(tsr_device *device, const bench_options *options, bench_report *report);
tsr_status bench_conv2d(tsr_device *device, const bench_options *options, bench_report *report);
tsr_status bench_layernorm(tsr_device *device, const bench_options *options, bench_report *report);
tsr_status bench_pool2d(tsr_device *device, const bench_options *options, bench_report *report);
tsr_status bench_embedding(tsr_device *device, const bench_options *options, bench_report *report);

/* ---- the benchmark registry (registry.c): one entry per `tessera bench OP` ---- */

/* A part of an op's benchmark (--part NAME), with what it times when the name does not say. */
typedef struct bench_part {
    const char *name;
    const char *what; /* NULL: the name says it */
} bench_part;

typedef struct bench_entry {
    const char *op; /* its name in the runtime's op table, and in the bench rows */
    tsr_status (*run)(tsr_device *device, const bench_options *options, bench_report *report);
    const char *sizes;         /* what --sizes lists for it, for the usage */
    const char *default_sizes; /* the --sizes it runs without one */
    const bench_part *parts;   /* ended by a NULL name; NULL: no parts */
    const char *options;       /* its own options and what they do, for the usage; NULL: none */
} bench_entry;

/* Every entry, in the order the usage lists them. */
const bench_entry *bench_registry(size_t *count);
/* The entry for `op`; NULL when no benchmark has that name. */
const bench_entry *bench_find(const char *op);
/* "gemm, gelu, conv2d, attention" into out (truncated to size); returns out. */
const char *bench_op_list(char *out, size_t size);
/* Runs the entry's benchmark: its --part checked first (NULL: every part; otherwise one of the
 * op's parts, else a TSR_ERR_INVALID_ARG naming them), its default --sizes where options->sizes
 * is NULL. The op's own file never reaches back into this table. */
tsr_status bench_run(const bench_entry *entry, tsr_device *device, const bench_options *options, bench_report *report);

/* ||C - A B|| / ||A B|| for row-major A (m x k), B (k x n), C (m x n), batch entries one after
 * another: exact up to 2^27 multiply-adds, above that estimated with two probe vectors t
 * (C t against A (B t)), which still catches any wrong or unwritten element. */
double bench_gemm_error(size_t batch, size_t m, size_t n, size_t k, const float *a, const float *b, const float *c);

#endif
