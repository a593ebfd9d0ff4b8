/* Shared helpers for tessera's tests: devices, fresh random data, poisoning,
 * double-precision references and temporary directories. */
#ifndef TSR_TEST_HARNESS_H
#define TSR_TEST_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "internal.h"

/* Seed from $TSR_TEST_SEED or the clock, printed once so a failure can be replayed. */
void th_seed(void);
uint32_t th_rand(void);
/* Uniform floats in [lo, hi). */
void th_fill_uniform(float *x, size_t n, float lo, float hi);
/* Fill with a quiet NaN: anything a kernel fails to write stays visibly wrong. */
/* The current case expects a configuration that does not build to fall back (a case that does
 * not call this fails at its end if any did: harness.c). */
void th_expect_build_fallback(void);
void th_poison(float *x, size_t n);

/* TSR_TEST_MODE=oclgrind: the run is the small subset under Oclgrind's checkers. */
bool th_oclgrind_mode(void);
/* TSR_TEST_MODE=rusticl: the small subset on Mesa rusticl (llvmpipe), whose every new kernel
 * compiles for seconds. */
bool th_rusticl_mode(void);
/* Either mode: tests pick small shapes and few configurations. */
bool th_small_mode(void);
/* tsr_config_override for a configurations test: true when the configuration is set. In rusticl
 * mode, and on a device that is not a CPU, one that the device's legality rules refuse
 * (TSR_ERR_UNSUPPORTED: tiles too big for llvmpipe, CPU-shaped tiles on a GPU) is passed over with
 * a note and false; any other failure fails the test. */
bool th_try_override(tsr_device *dev, const char *op, const char *config);
/* Why this mode's platform is missing (rusticl mode without a rusticl device), or NULL. */
const char *th_mode_unavailable(void);
/* Report the whole program as skipped, with the reason, in TAP ("1..0 # SKIP why"). */
int th_skip_all(const char *why);
/* The device of a kernel suite's group: th_group_setup opens it (in Oclgrind mode it refuses,
 * returning -1, unless the device really is Oclgrind), th_group_teardown closes it. */
extern tsr_device *th_dev;
int th_group_setup(void **state);
int th_group_teardown(void **state);

/* Open the device the tests run on ($TSR_DEVICE or the default); fails the test on error. */
tsr_device *th_open_device(void);
cl_mem th_buffer(tsr_device *dev, size_t floats);
cl_mem th_buffer_from(tsr_device *dev, const float *host, size_t floats);
void th_read(tsr_device *dev, cl_mem mem, float *host, size_t floats);
/* Tensors stored in a dtype: th_fill_uniform then rounding to `dtype` (so a reference computed from
 * the host values sees exactly what the device reads); a buffer of n elements of the type, one
 * uploaded from fp32 host values (converted, nearest even), and a read widened to fp32. */
void th_fill_uniform_typed(tsr_dtype dtype, float *x, size_t n, float lo, float hi);
cl_mem th_buffer_typed(tsr_device *dev, tsr_dtype dtype, size_t n);
cl_mem th_buffer_from_typed(tsr_device *dev, tsr_dtype dtype, const float *host, size_t n);
void th_read_typed(tsr_device *dev, tsr_dtype dtype, cl_mem mem, float *host, size_t n);
/* Element i of a host array stored as type t, as its bits (16 or 32 of them). */
uint32_t th_element_bits(tsr_dtype t, const void *a, size_t i);
/* Floats per CL_DEVICE_MEM_BASE_ADDR_ALIGN (at least 1): sub-buffer origins are multiples of it. */
size_t th_sub_buffer_align(tsr_device *dev);
/* A sub-buffer of `floats` floats at float `origin` of `parent`; fails the test on error. */
cl_mem th_sub_buffer(cl_mem parent, size_t origin, size_t floats);

/* A new empty directory under $TMPDIR (or /tmp); path receives it. */
void th_tempdir(char *path, size_t size);
/* rm -rf of a directory made by th_tempdir. */
void th_remove_tree(const char *path);
/* Write a file (not atomically: tests use it to damage things). */
void th_write_file(const char *path, const void *data, size_t size);

/* Reference SGEMM in double: C = alpha*op(A)*op(B) + beta*C with BLAS layout rules. */
void th_ref_sgemm(int row_major, int ta, int tb, size_t m, size_t n, size_t k, double alpha, const float *a,
                  size_t lda, const float *b, size_t ldb, double beta, const float *c_in, double *c_out, size_t ldc);
/* Activations in double, written from their definitions (tsr_activation codes; GELU's
 * limits: +Inf -> +Inf, -Inf -> -0, NaN -> NaN). */
double th_ref_activation(int act, double x);

/* ||got - ref|| / ||ref|| over the m x n window of a matrix with leading dimension ld. */
double th_rel_error_matrix(int row_major, size_t m, size_t n, const float *got, const double *ref, size_t ld);

/* Run a cmocka group with TAP output (so meson counts each test case).
 * $TSR_TEST_FILTER (a shell pattern such as "config*") runs a subset; $TSR_TEST_SHARD="I/N" runs
 * the cases whose index is I modulo N (tests/meson.build splits the long suites into shards that run
 * in parallel, each case in exactly one of them). Each case draws from its own stream, the seed
 * ($TSR_TEST_SEED, else the clock and the process) mixed with the case's name. */
#define TH_RUN(tests) TH_RUN_GROUP(tests, NULL, NULL)
#define TH_RUN_GROUP(tests, setup, teardown)                                                          \
    (th_mode_unavailable() ? th_skip_all(th_mode_unavailable())                                       \
                           : th_run_group(#tests, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown))
int th_run_group(const char *name, const struct CMUnitTest *tests, size_t count, CMFixtureFunction setup,
                 CMFixtureFunction teardown);
/* True with $TSR_TEST_LONG=1: the long tier (every configuration, transposition and type set of
 * the sweeps, larger random counts). The default tier keeps every case class, with fewer draws. */
bool th_long_mode(void);
/* True under Oclgrind or rusticl without $TSR_TEST_LONG=1: their sweeps take a covering subset of
 * the small set (every case kind, fewer draws); TSR_TEST_LONG=1 runs the whole small set. */
bool th_small_thinned(void);

/* The counts of a tuning log's "ahead" line (compiling ahead): read from the log file at `path`;
 * `in` is "processes" or "threads" ("" in logs without it). Fails the test when the file or the
 * line is missing or malformed. */
typedef struct th_ahead_counts {
    int workers, submitted, compiled, failed, dropped, used;
    char in[16];
} th_ahead_counts;
th_ahead_counts th_read_ahead_line(const char *path);
/* True with $TSR_TEST_SANITIZED=1 (tests/meson.build sets it in the ASan+UBSan build) without
 * $TSR_TEST_LONG=1, on the default device: some kernel sweeps (GEMM's configuration sweeps,
 * attention's blocked micro-kernel sweep and out-of-order rounds) take fewer draws, every member
 * and every case kind still run: they mostly exercise kernels and the double-precision references,
 * not the library's host code; the plain build runs the default tier's draws. */
bool th_sanitizer_tier(void);

#define TH_ASSERT_OK(expr)                                                                            \
    do {                                                                                              \
        tsr_status th_st_ = (expr);                                                                   \
        if (th_st_ != TSR_SUCCESS) fail_msg("%s -> %s: %s", #expr, tsr_status_str(th_st_), tsr_last_error()); \
    } while (0)

#define TH_ASSERT_STATUS(expr, expected)                                                              \
    do {                                                                                              \
        tsr_status th_st_ = (expr);                                                                   \
        if (th_st_ != (expected))                                                                     \
            fail_msg("%s -> %s (expected %s): %s", #expr, tsr_status_str(th_st_), tsr_status_str(expected), \
                     tsr_last_error());                                                               \
    } while (0)

#define TH_ASSERT_CONTAINS(haystack, needle)                                                          \
    do {                                                                                              \
        if (!strstr((haystack), (needle))) fail_msg("expected \"%s\" in: %s", (needle), (haystack));  \
    } while (0)

#endif
