/* The product side of tessera's measurements: `tessera peak` (device peaks) and `tessera report`
 * (cross-device reports with a roofline, report.md and charts), built on the benchmark harness. */
#ifndef TSR_REPORT_H
#define TSR_REPORT_H

#include "bench.h"

/* ---- device peaks (peak.c) ---- */

#define PEAK_WIDTHS 5 /* float1, 2, 4, 8, 16 */

typedef struct peak_stat {
    double median, min, max;
    int runs;
} peak_stat;

/* The parts of `tessera peak`, as bits; names for --tests: bandwidth, compute, launch, transfers,
 * host (the host's own read and memcpy, CPU devices only). */
enum { PEAK_BANDWIDTH = 1, PEAK_COMPUTE = 2, PEAK_LAUNCH = 4, PEAK_TRANSFERS = 8, PEAK_HOST = 16, PEAK_ALL = 31 };

/* "bandwidth,host" -> bits; false (with *bad at the unknown name) for an unknown or empty name. */
bool peak_parse_tests(const char *list, unsigned *tests, char *bad, size_t bad_size);
/* "bandwidth, compute, launch, transfers, host": the names peak_parse_tests takes, for messages
 * (truncated to size); returns out. */
const char *peak_test_list(char *out, size_t size);

typedef struct peak_options {
    double budget_s;     /* per test */
    unsigned tests;      /* PEAK_* bits; 0: all */
    size_t buffer_bytes; /* 0: 128 MiB on CPUs, 512 MiB elsewhere (halved until one allocation holds it) */
    bool reduced;        /* one vector width, layout and chain count (simulators, quick checks) */
    bool simulator;      /* reduced, on small buffers, with short runs: a simulated device finishes */
    bool quiet;
    void (*progress)(void *user); /* called (when not NULL) before each measurement: report_options' */
    void *progress_user;
} peak_options;

typedef struct peak_result {
    unsigned tests; /* PEAK_* bits: what was measured (the rest is zero) */
    size_t buffer_bytes;
    double budget_s;
    bool reduced; /* the reduced set: one width, layout and chain count, a floor of the limits rather than a roof */
    peak_stat read[PEAK_WIDTHS], write[PEAK_WIDTHS], copy[PEAK_WIDTHS]; /* GB/s, the better layout */
    int layout[3][PEAK_WIDTHS];                                           /* 1: interleaved, 0: contiguous */
    double bandwidth_gbps;                                                /* the best of them */
    char bandwidth_best[64];
    peak_stat compute[PEAK_WIDTHS]; /* GFLOP/s, the best chain count */
    int chains[PEAK_WIDTHS];
    bool compute_mad[PEAK_WIDTHS]; /* the best run used mad() rather than fma() */
    double compute_gflops;
    char compute_best[64];
    peak_stat dispatch_us, round_trip_us;
    peak_stat write_gbps, read_gbps, map_read_gbps, map_write_gbps;
    peak_stat host_copy_gbps; /* CPU devices: the host's multi-threaded copy (read + write) */
    peak_stat host_read_gbps; /* and its multi-threaded read */
    int host_threads;
    int host_copy_streams, host_read_streams; /* concurrent streams per thread of the better run */
    /* How the kernel tests were timed (tsr_device_timing): profiling events, or the host clock
     * over batches of launches less the empty-launch cost (host_timed, with the reason). Launch
     * latency and transfers are host wall-clock either way. */
    bool host_timed;
    char timing_reason[512];
    double empty_launch_us; /* the empty-launch cost host timing subtracts */
} peak_result;

/* The report's kernel source "peak" (cl/peak.cl, built into the report's library rather than
 * libtessera) added to the runtime's sources (tsr_add_kernel_source): peak_measure does it
 * itself; code that builds from "peak" otherwise (tests through tsr_get_kernel) calls it first. */
tsr_status peak_add_source(void);
tsr_status peak_measure(tsr_device *device, const peak_options *options, peak_result *result);
struct cJSON *peak_to_json(const peak_result *result);
tsr_status peak_from_json(const struct cJSON *json, peak_result *result);
void peak_print(FILE *out, const peak_result *result);

/* ---- cross-device reports (run.c, load.c, compare.c, write.c, charts.c, markdown.c) ---- */

struct report_case;
typedef struct report_options {
    const char *out_dir;
    double budget_s;       /* timing per row */
    peak_options peak;     /* budget per peak test, buffer size, reduced set */
    double tune_budget_s;  /* per device with nothing tuned for it; 0: never tune */
    bool peers;            /* CLBlast alongside, where it has the op */
    bool quick;            /* every device runs each case at its quick shape (report_quick_shape) */
    double device_budget_s; /* per device: no case starts once this much wall time went on it; 0: no limit */
    bool quiet;
    const struct report_case *suite; /* NULL: the standard suite (tests pass their own) */
    size_t nsuite;
    /* Called (when not NULL) at each step of report_run: each device, after its peaks, each tuning
     * candidate and each case; `report --mpi` sends MPI heartbeats from it so that ranks waiting for
     * this one do not time out while it works. */
    void (*progress)(void *user);
    void *progress_user;
} report_options;

/* One entry of a suite: runs on a device and appends result rows (JSON objects) to `results`;
 * a failure status marks the device failed. shape: the op fixture's shape text for this device. */
typedef struct report_case {
    const char *id;     /* "gemm-square" */
    const char *op;
    const char *shape;            /* "2048x2048x2048": the op's fixture grammar, the rows' "shape" */
    const char *simulator_shape;  /* smaller, for simulated devices */
    /* NULL: the generic runner (the op's fixture, then its peers); tests pass their own */
    tsr_status (*run)(tsr_device *device, const struct report_case *c, const char *shape,
                      const report_options *options, struct cJSON *results);
} report_case;

/* The standard suite: every op's report cases from the op table (each descriptor declares its
 * cases with shapes for real and for simulated devices). */
const report_case *report_standard_suite(size_t *n);
/* The shape a case runs at under --quick on every device: a mid-size shape (tens of
 * milliseconds on a 2-core CPU device) where the report knows the case, else its simulator shape. */
const char *report_quick_shape(const report_case *c);
/* Peaks, a budgeted tune where nothing is tuned, and the suite on every device of `devices`
 * (selectors, NULL: every device); *root receives the report tree (free with cJSON_Delete).
 * A device that cannot be opened or measured at all is recorded as "skipped" with the reason;
 * a case that fails (or is not run for lack of time) is listed in the device's "failures" and
 * the device is "partial"; the other cases and devices still run. The tree holds the
 * comparison of the devices (report_compare). */
tsr_status report_run(const char *const *devices, size_t ndevices, const report_options *options,
                      struct cJSON **root);
/* report.json, report.md and the charts (SVG; PNG too when rsvg-convert is on PATH) into dir. */
tsr_status report_write(const struct cJSON *root, const char *dir, bool quiet);
/* Load and validate a report.json. */
tsr_status report_load(const char *path, struct cJSON **root);
/* An empty report tree (format, versions, "created" (NULL: now), no devices, no notes); NULL when
 * out of memory. */
struct cJSON *report_new(const char *created);
/* report_load for text in memory (say, a report another MPI rank sent): `text` holds `size` bytes
 * and a NUL after them; `name` names it in messages. */
tsr_status report_parse(const char *text, size_t size, const char *name, struct cJSON **root);
/* Combine reports: every device of every report, in order, each marked with the name of its
 * report ("source"); the same device of the same host in two reports is kept once (the newer)
 * and noted. The reports' notes are kept (each once); ranks of one `report --mpi` run that shared
 * a host are noted (they measured at the same time). "created" is the newest report's, so the
 * same reports merge to the same bytes. Takes the trees (validated, as report_load and
 * report_parse give them): every roots[i] is freed and set to NULL, also on failure. */
tsr_status report_merge_roots(struct cJSON **roots, const char *const *names, size_t n, struct cJSON **root);
/* report_merge_roots over report.json files (report_load), each named by its path. */
tsr_status report_merge(const char *const *paths, size_t npaths, struct cJSON **root);
/* `--pytorch FILE`: load and check the output of bench/pytorch_peer.py (foreign input: only known
 * fields of the right type and range are copied; anything malformed is TSR_ERR_CORRUPT naming
 * the row and field). The caller puts *out into the report as root["pytorch"]. */
tsr_status report_load_pytorch(const char *path, struct cJSON **out);
/* report.md's "Against PyTorch" section from root["pytorch"]. */
void report_pytorch_markdown(util_text *b, const struct cJSON *pytorch);
/* Devices whose status is not "ok" (skipped, partial, or failed in a schema-1 report made
 * before "partial" existed). */
size_t report_failed_devices(const struct cJSON *root);
/* The devices side by side: the baseline (the first device with results), and per case, shape
 * and implementation each device's median time and rate with its ratio to the baseline (the
 * baseline's time over the device's: above 1 is faster), as root["comparison"] (replaced if
 * present). NULL without two devices with results. */
struct cJSON *report_compare(const struct cJSON *root);

/* Charts: a roofline per device and a bar chart per op across devices, as SVG text (malloc'ed). */
char *chart_roofline_svg(const struct cJSON *device);
char *chart_bars_svg(const struct cJSON *root);

#endif
