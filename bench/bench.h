/* The benchmark harness shared by every op: one row format, timing, output. */
#ifndef TSR_BENCH_H
#define TSR_BENCH_H

#include "internal.h"

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
} bench_row;

typedef struct bench_report {
    char device[2 * TSR_INFO_STR];
    bench_row *rows;
    size_t nrows, cap;
} bench_report;

/* Something to time: runs the work once and waits for it. */
typedef tsr_status (*bench_fn)(void *ctx);

/* Warm up once, then time runs until `budget_s` seconds are spent (at least
 * min_runs, at most max_runs) with a wall clock around each call; fills the
 * time fields of `row`. */
tsr_status bench_time(bench_fn fn, void *ctx, double budget_s, int min_runs, int max_runs, bench_row *row);

tsr_status bench_add(bench_report *report, const bench_row *row);
void bench_report_free(bench_report *report);
/* Write rows as a JSON array of objects (op, shape, impl, device, time_ms, gflops, gbps, rel_err, ...). */
tsr_status bench_write_json(const bench_report *report, const char *path);

double bench_now_s(void);

/* Pause after timing a host library (OpenBLAS): its worker threads spin for about 2^28 cycles
 * after each call before they sleep, and would take cores from the next measurement. */
void bench_settle_host_threads(void);

/* "1024,2048" or "1M,16M" (K and M are powers of two), positive counts; `what` names them in
 * the error message. */
tsr_status bench_parse_counts(const char *text, const char *what, size_t **out, size_t *count);

/* Per-op benchmarks: options come from the CLI. */
typedef struct bench_options {
    const char *sizes;   /* op-specific list, NULL for the defaults */
    double budget_s;     /* timing budget per row */
    bool peers;          /* run CLBlast / OpenBLAS too */
    bool quiet;
    const char *part;    /* an op's part of its benchmark (gelu: "elementwise", "epilogue"), NULL: all */
    const char *clblast_xgemm; /* "NAME=V ..." for CLBlast's Xgemm kernel (from its tuner), NULL: its defaults */
    size_t max_unfused;  /* attention: longest sequence the unfused pipelines run (0: 2048) */
    const char *layers;  /* conv2d: ResNet-50 layer names, comma separated, or "all"; NULL: a selection */
} bench_options;

tsr_status bench_gemm(tsr_device *device, const bench_options *options, bench_report *report);
tsr_status bench_gelu(tsr_device *device, const bench_options *options, bench_report *report);
tsr_status bench_attention(tsr_device *device, const bench_options *options, bench_report *report);
tsr_status bench_conv2d(tsr_device *device, const bench_options *options, bench_report *report);

#endif
