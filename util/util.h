/* The helpers every product tool shares (the CLI, the benchmarks, the report and tessera-mpi):
 * time and medians, strict numbers and the option loop, growing text, JSON members, a string
 * index, host memory and output checks. A layer above runtime/ (it may use runtime internals)
 * and below bench/, report/, mpi/'s tool and tools/ (tests/check_layers.py). Not installed. */
#ifndef TSR_UTIL_H
#define TSR_UTIL_H

#include "internal.h"

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ---- time and medians (system.c) ---- */

/* Monotonic wall-clock seconds (the runtime's clock). */
double util_now_s(void);
/* The median of n >= 1 values (the mean of the middle two for even n), by the runtime's one
 * summary (tsr_stats_of); sorts `values` in place. */
double util_median(double *values, int n);

/* Pushes `bytes` of buf (more than the last-level cache) through the host's caches: a read and an
 * ordinary store per 64-byte line, not memset (glibc's memset of this size stores non-temporally,
 * past the caches, and leaves their contents in place). */
void util_touch_lines(unsigned char *buf, size_t bytes);

/* Microseconds on clock `id` (CLOCK_MONOTONIC for wall time, CLOCK_PROCESS_CPUTIME_ID for the
 * process's CPU time over all its threads). */
double util_clock_us(clockid_t id);
/* A read-write buffer of n floats in `context`, filled with a fixed pattern in [-0.5, 0.5) (for
 * timing runs, where the values do not matter); NULL if it cannot be made. */
cl_mem util_pattern_buffer(cl_context context, size_t n);

/* Is this a simulated device (Oclgrind)? Peaks and reports give it reduced, flagged runs. */
bool util_is_simulator(const tsr_device_info *info);

/* Memory the host can still hand out (MemAvailable, else free pages), in bytes; 0 when unknown. */
uint64_t util_host_available(void);
/* Before allocating for `what`: each device buffer within CL_DEVICE_MAX_MEM_ALLOC_SIZE, all of them
 * within the device's global memory, host_bytes within the host's available memory; a refusal
 * (TSR_ERR_OUT_OF_MEMORY) names `what` and the sizes. */
tsr_status util_check_memory(const tsr_device *device, const char *what, const size_t *buffer_bytes, size_t nbuffers,
                             size_t host_bytes);
/* Can `path` be written (its directory exists and takes a new file; it is not a directory)? Checked
 * before a benchmark runs so that a bad --json fails at once, not after minutes of timing. */
tsr_status util_check_output(const char *path);

/* ---- strict numbers and the option loop (parse.c): one set for every command-line tool ---- */

/* Digits only (no sign, space or suffix), no wrap, min <= value <= max; the error names `option`. */
tsr_status util_parse_count(const char *text, const char *option, uint64_t min, uint64_t max, uint64_t *out);
/* Decimal or 0x-hexadecimal digits (no sign or space) that fit in 64 bits. */
tsr_status util_parse_u64(const char *text, const char *option, uint64_t *out);
/* Seconds: plain decimal (digits, '.', exponent; no sign, inf, nan or hex), finite, > 0 (>= 0
 * with allow_zero), at most max. */
tsr_status util_parse_seconds(const char *text, const char *option, bool allow_zero, double max, double *out);
#define UTIL_MAX_SECONDS 86400.0 /* one day: any budget above it is a typo */
/* Reads a run of digits at *p (advancing it) into *out: false without digits, on overflow or above max. */
bool util_scan_uint(const char **p, uint64_t max, uint64_t *out);

/* Whether `name` is one of the comma-separated items of `list` (NULL or "all": every name). */
bool util_in_list(const char *list, const char *name);

/* "1024,2048" or "1M,16M" (K and M are powers of two), counts from 1 to max; `what` names them
 * in the error message. */
tsr_status util_parse_counts(const char *text, const char *what, uint64_t max, size_t **out, size_t *count);

/* The option loop of every command-line tool: getopt_long over `short_options` (without a
 * leading ':') and `long_options`. Returns the next option's letter (its value in optarg), -1
 * after the last option (operands from optind), or a misuse: UTIL_OPTION_UNKNOWN (an option the
 * tool does not take) or UTIL_OPTION_MISSING (an option without its value), with *bad set to the
 * argument that was refused. With `quiet` the tool words the misuse itself (tessera-mpi: rank 0
 * only); otherwise getopt has already named it on stderr. */
enum { UTIL_OPTION_UNKNOWN = -3, UTIL_OPTION_MISSING = -4 };
int util_next_option(int argc, char **argv, const char *short_options, const struct option *long_options, bool quiet,
                     const char **bad);

/* ---- text (text.c) ---- */

/* Growing text (report.md, SVG): appends never fail loudly; util_text_finish returns NULL (and
 * frees) when an append ran out of memory. */
typedef struct util_text {
    char *data;
    size_t len, cap;
    bool failed;
} util_text;
void util_text_printf(util_text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A string from a report (possibly from another machine) as inert markdown text: <, >, & and |
 * become entities, markdown punctuation is backslash-escaped, control characters become spaces;
 * safe in table cells, headings, image alt text and paragraphs. */
void util_text_md(util_text *b, const char *foreign);
char *util_text_finish(util_text *b);

/* A rate for tables and charts: whole numbers from 1000, one decimal from 10, else 3 digits. */
const char *util_format_rate(double value, char *out, size_t size);

/* A number or string member of a JSON object: 0 or "" when absent or of another type. */
struct cJSON;
double util_json_num(const struct cJSON *object, const char *key);
const char *util_json_text(const struct cJSON *object, const char *key);

/* ---- a string-keyed index (index.c) ---- */

/* A string-keyed hash map (open addressing, XXH3) from a key to a pointer; keys are copied. */
typedef struct util_index {
    struct util_index_slot *slots;
    size_t cap, count;
} util_index;
/* The value slot of key (inserted as NULL when absent, *found false); NULL when out of memory. */
void **util_index_get(util_index *index, const char *key, size_t key_len, bool *found);
void util_index_free(util_index *index);

#endif
