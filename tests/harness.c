#define _GNU_SOURCE
#include "harness.h"

#include <fnmatch.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state;
static uint64_t base_seed;

void th_seed(void) {
    const char *env = getenv("TSR_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    fprintf(stderr, "# TSR_TEST_SEED=%llu\n", (unsigned long long)seed);
    base_seed = seed;
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
}

/* Each case draws from its own stream: the run's seed mixed with the case's name (FNV-1a). A case
 * then draws the same shapes, configurations and values whichever shard, filter or build runs it
 * and whatever ran before it, so one TSR_TEST_SEED reproduces it alone (TSR_TEST_FILTER=name), and
 * ./run test's plain and sanitizer builds, given one seed, compile the same kernel variants (the
 * second finds them in the OpenCL driver's cache). */
static const struct CMUnitTest *case_list;
static size_t case_next, case_count;
static double group_started; /* seconds (monotonic) when the group began: each case's start is logged against it */
static double group_cpu;     /* CPU seconds at that moment (cpu_s) */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU seconds of this process (every thread: a driver's compiler threads too) and of its children
 * that were waited for (the CLI the cli test runs): on a loaded machine a case's wall time says
 * little about its cost, its CPU time does. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    struct rusage ru;
    double children = 0;
    if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
        children = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9 + children;
}

/* A kernel that does not build is a defect the tests must see even where the op still runs (an
 * automatic choice then falls back to the plainest configuration with a warning:
 * tsr_op_build_fallback): each case counts such warnings through its own warning handler (set
 * again before every case: a case may set one of its own) and fails at its end if one came,
 * unless it said it expects one (th_expect_build_fallback). */
static atomic_int build_fallbacks;
static bool build_fallback_expected;
static char first_fallback[512];
static pthread_mutex_t fallback_lock = PTHREAD_MUTEX_INITIALIZER;

static void count_build_fallback(const char *message, void *user) {
    (void)user;
    if (!strstr(message, "does not build on device")) return;
    pthread_mutex_lock(&fallback_lock);
    if (atomic_fetch_add(&build_fallbacks, 1) == 0) snprintf(first_fallback, sizeof first_fallback, "%s", message);
    pthread_mutex_unlock(&fallback_lock);
}

void th_expect_build_fallback(void) { build_fallback_expected = true; }

static int case_teardown(void **state) {
    const struct CMUnitTest *t = &case_list[case_next - 1];
    int result = t->teardown_func ? t->teardown_func(state) : 0;
    if (atomic_load(&build_fallbacks) > 0 && !build_fallback_expected) {
        printf("# %s: %d configuration(s) did not build and fell back; the first: %s\n", t->name,
               atomic_load(&build_fallbacks), first_fallback);
        result = -1;
    }
    return result;
}

static int case_setup(void **state) {
    if (case_next >= case_count) return -1;
    const struct CMUnitTest *t = &case_list[case_next++];
    atomic_store(&build_fallbacks, 0);
    build_fallback_expected = false;
    first_fallback[0] = '\0';
    tsr_set_warning_handler(count_build_fallback, NULL);
    /* where the time goes, for sizing the suite (each case's length is the gap to the next line) */
    printf("# %.1f s (%.1f CPU-s): %s\n", now_s() - group_started, cpu_s() - group_cpu, t->name);
    uint64_t h = 1469598103934665603ull;
    for (const char *p = t->name; *p; ++p) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    rng_state = (base_seed ^ h) * 0x9E3779B97F4A7C15ull + 1;
    return t->setup_func ? t->setup_func(state) : 0;
}

/* The runtime's seeded generator (reference.c), so tests and fixtures draw inputs one way. */
uint32_t th_rand(void) { return (uint32_t)(tsr_random_next(&rng_state) >> 32); }

void th_fill_uniform(float *x, size_t n, float lo, float hi) { tsr_random_fill(x, n, &rng_state, lo, hi); }

void th_poison(float *x, size_t n) {
    for (size_t i = 0; i < n; ++i) x[i] = NAN;
}

tsr_device *th_open_device(void) {
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(NULL, &dev);
    if (st != TSR_SUCCESS) fail_msg("tsr_device_open: %s: %s", tsr_status_str(st), tsr_last_error());
    return dev;
}

cl_mem th_buffer(tsr_device *dev, size_t floats) {
    cl_int err;
    cl_mem m = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, (floats ? floats : 1) * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) fail_msg("clCreateBuffer(%zu floats): %s", floats, tsr_cl_error_name(err));
    return m;
}

cl_mem th_buffer_from(tsr_device *dev, const float *host, size_t floats) {
    cl_mem m = th_buffer(dev, floats);
    if (floats) TH_ASSERT_OK(tsr_upload(dev, m, host, floats));
    return m;
}

void th_read(tsr_device *dev, cl_mem mem, float *host, size_t floats) {
    TH_ASSERT_OK(tsr_download(dev, mem, host, floats));
}

void th_fill_uniform_typed(tsr_dtype dtype, float *x, size_t n, float lo, float hi) {
    th_fill_uniform(x, n, lo, hi);
    tsr_dtype_round_array(dtype, x, n);
}

cl_mem th_buffer_typed(tsr_device *dev, tsr_dtype dtype, size_t n) {
    cl_int err;
    const size_t bytes = (n ? n : 1) * tsr_dtype_size(dtype);
    cl_mem m = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) fail_msg("clCreateBuffer(%zu %s): %s", n, tsr_dtype_str(dtype), tsr_cl_error_name(err));
    return m;
}

cl_mem th_buffer_from_typed(tsr_device *dev, tsr_dtype dtype, const float *host, size_t n) {
    cl_mem m = th_buffer_typed(dev, dtype, n);
    if (n) TH_ASSERT_OK(tsr_upload_typed(dev, m, dtype, host, n));
    return m;
}

void th_read_typed(tsr_device *dev, tsr_dtype dtype, cl_mem mem, float *host, size_t n) {
    TH_ASSERT_OK(tsr_download_typed(dev, mem, dtype, host, n));
}

size_t th_sub_buffer_align(tsr_device *dev) {
    cl_uint bits = 0;
    assert_int_equal(clGetDeviceInfo(tsr_device_id(dev), CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL),
                     CL_SUCCESS);
    size_t floats = bits / 8 / sizeof(float);
    return floats ? floats : 1;
}

cl_mem th_sub_buffer(cl_mem parent, size_t origin, size_t floats) {
    cl_buffer_region r = {origin * sizeof(float), floats * sizeof(float)};
    cl_int err;
    cl_mem m = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    if (err != CL_SUCCESS) fail_msg("clCreateSubBuffer(%zu, %zu floats): %s", origin, floats, tsr_cl_error_name(err));
    return m;
}

void th_tempdir(char *path, size_t size) {
    const char *base = getenv("TMPDIR");
    snprintf(path, size, "%s/tessera-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(path)) fail_msg("mkdtemp failed");
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

void th_remove_tree(const char *path) { nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

void th_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("cannot write %s", path);
    if (size) assert_int_equal(fwrite(data, 1, size, f), size);
    fclose(f);
}

/* Element (i,j) of a stored matrix under BLAS layout rules. */
static double at(int row_major, const float *x, size_t ld, size_t i, size_t j) {
    return row_major ? x[i * ld + j] : x[j * ld + i];
}

void th_ref_sgemm(int row_major, int ta, int tb, size_t m, size_t n, size_t k, double alpha, const float *a,
                  size_t lda, const float *b, size_t ldb, double beta, const float *c_in, double *c_out, size_t ldc) {
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
            double s = 0;
            for (size_t l = 0; l < k; ++l) {
                double av = ta ? at(row_major, a, lda, l, i) : at(row_major, a, lda, i, l);
                double bv = tb ? at(row_major, b, ldb, j, l) : at(row_major, b, ldb, l, j);
                s += av * bv;
            }
            size_t idx = row_major ? i * ldc + j : j * ldc + i;
            double prior = beta == 0.0 ? 0.0 : beta * (double)c_in[idx];
            c_out[idx] = (k == 0 || alpha == 0.0 ? 0.0 : alpha * s) + prior;
        }
}

double th_rel_error_matrix(int row_major, size_t m, size_t n, const float *got, const double *ref, size_t ld) {
    tsr_error_sum sum = {0, 0};
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
            size_t idx = row_major ? i * ld + j : j * ld + i;
            tsr_error_add(&sum, got[idx], ref[idx]);
        }
    return tsr_error_value(&sum);
}

double th_ref_activation(int act, double x) {
    switch (act) {
    case TSR_ACT_RELU: return x < 0 ? 0.0 : x;
    case TSR_ACT_GELU_TANH:
    case TSR_ACT_GELU_ERF:
        if (isnan(x)) return x;
        if (isinf(x)) return x > 0 ? x : -0.0;
        if (act == TSR_ACT_GELU_ERF) return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    default: return x;
    }
}

uint32_t th_element_bits(tsr_dtype t, const void *a, size_t i) {
    if (t == TSR_F32) {
        uint32_t u;
        memcpy(&u, (const char *)a + 4 * i, 4);
        return u;
    }
    uint16_t h;
    memcpy(&h, (const char *)a + 2 * i, 2);
    return h;
}

bool th_oclgrind_mode(void) {
    const char *m = getenv("TSR_TEST_MODE");
    return m && strcmp(m, "oclgrind") == 0;
}

bool th_rusticl_mode(void) {
    const char *m = getenv("TSR_TEST_MODE");
    return m && strcmp(m, "rusticl") == 0;
}

bool th_small_mode(void) { return th_oclgrind_mode() || th_rusticl_mode(); }

static bool long_requested(void) {
    const char *m = getenv("TSR_TEST_LONG");
    return m && strcmp(m, "1") == 0;
}

bool th_long_mode(void) { return long_requested() && !th_small_mode(); }

bool th_small_thinned(void) { return th_small_mode() && !long_requested(); }

bool th_sanitizer_tier(void) {
    const char *m = getenv("TSR_TEST_SANITIZED");
    return m && strcmp(m, "1") == 0 && !long_requested() && !th_small_mode();
}

int th_run_group(const char *name, const struct CMUnitTest *tests, size_t count, CMFixtureFunction setup,
                 CMFixtureFunction teardown) {
    th_seed();
    /* line by line, so a test killed by its timeout leaves the cases it finished in the log */
    setvbuf(stdout, NULL, _IOLBF, 0);
    cmocka_set_message_output(CM_OUTPUT_TAP);
    const char *shard = getenv("TSR_TEST_SHARD");
    unsigned index = 0, total = 1;
    char tail;
    if (shard && (sscanf(shard, "%u/%u%c", &index, &total, &tail) != 2 || total == 0 || index >= total)) {
        fprintf(stderr, "TSR_TEST_SHARD='%s': expected I/N with 0 <= I < N\n", shard);
        return 1;
    }
    /* The shard's cases, then the filter (a shell pattern, as cmocka's own filter takes), chosen
     * here so that case_setup knows which case cmocka runs next: it runs them in this order. */
    const char *filter = getenv("TSR_TEST_FILTER");
    struct CMUnitTest *mine = calloc(count ? count : 1, sizeof *mine);
    struct CMUnitTest *orig = calloc(count ? count : 1, sizeof *orig);
    if (!mine || !orig) {
        free(mine);
        free(orig);
        return 1;
    }
    size_t n = 0, in_shard = 0;
    for (size_t i = 0; i < count; ++i) {
        if (i % total != index) continue;
        ++in_shard;
        if (filter && fnmatch(filter, tests[i].name, 0) != 0) continue;
        orig[n] = tests[i];
        mine[n] = tests[i];
        mine[n].setup_func = case_setup;
        mine[n].teardown_func = case_teardown;
        ++n;
    }
    if (shard) printf("# shard %u/%u: %zu of %zu cases\n", index, total, in_shard, count);
    case_list = orig;
    case_count = n;
    case_next = 0;
    group_started = now_s();
    group_cpu = cpu_s();
    int failed = n ? _cmocka_run_group_tests(name, mine, n, setup, teardown)
                   : (printf("1..0 # SKIP %s\n", filter ? "no case matches TSR_TEST_FILTER" : "empty shard"), 0);
    if (n) printf("# %.1f s (%.1f CPU-s): end\n", now_s() - group_started, cpu_s() - group_cpu);
    free(mine);
    free(orig);
    return failed;
}

const char *th_mode_unavailable(void) {
    if (!th_rusticl_mode()) return NULL;
    static char why[512];
    tsr_device_info *infos = NULL;
    size_t n = 0;
    tsr_status st = tsr_discover(&infos, &n);
    bool found = false;
    for (size_t i = 0; st == TSR_SUCCESS && i < n && !found; ++i)
        found = strstr(infos[i].platform_name, "rusticl") && !infos[i].unusable[0];
    tsr_free(infos);
    if (found) return NULL;
    snprintf(why, sizeof why, "no usable Mesa rusticl device (install mesa-opencl-icd; RUSTICL_ENABLE=%s): %s",
             getenv("RUSTICL_ENABLE") ? getenv("RUSTICL_ENABLE") : "unset",
             st == TSR_SUCCESS ? "discovery found none" : tsr_last_error());
    return why;
}

bool th_try_override(tsr_device *dev, const char *op, const char *config) {
    tsr_status st = tsr_config_override(dev, op, config);
    /* Most forced configurations are CPU-shaped (register tiles of 16-float vectors, work-groups
     * of one): a GPU's legality rules refuse some (an H200 refused five, session 21), which says
     * nothing about the kernels. On the PoCL CPU device every one must be accepted. */
    if (st == TSR_ERR_UNSUPPORTED && (th_rusticl_mode() || tsr_device_get_info(dev)->type != TSR_DEVICE_CPU)) {
        printf("# %s '%s' passed over: %s\n", op, config, tsr_last_error());
        return false;
    }
    if (st != TSR_SUCCESS) fail_msg("tsr_config_override(%s, %s) -> %s: %s", op, config, tsr_status_str(st), tsr_last_error());
    return true;
}

int th_skip_all(const char *why) {
    printf("1..0 # SKIP %s\n", why);
    return 0;
}

tsr_device *th_dev;

int th_group_setup(void **state) {
    (void)state;
    th_dev = th_open_device();
    const char *want = th_oclgrind_mode() ? "Oclgrind" : th_rusticl_mode() ? "rusticl" : NULL;
    if (want && !strstr(tsr_device_get_info(th_dev)->platform_name, want)) {
        fprintf(stderr, "TSR_TEST_MODE=%s but the device is %s\n", getenv("TSR_TEST_MODE"),
                tsr_device_get_info(th_dev)->name);
        return -1;
    }
    return 0;
}

int th_group_teardown(void **state) {
    (void)state;
    tsr_device_close(th_dev);
    th_dev = NULL;
    return 0;
}

th_ahead_counts th_read_ahead_line(const char *path) {
    th_ahead_counts c = {0};
    char *text = NULL;
    size_t size = 0;
    if (tsr_read_file(path, &text, &size) != TSR_SUCCESS) fail_msg("%s: %s", path, tsr_last_error());
    const char *line = strstr(text, "\"outcome\": \"ahead\"");
    if (!line) fail_msg("%s has no \"ahead\" line", path);
    int n = sscanf(line, "\"outcome\": \"ahead\", \"workers\": %d, \"submitted\": %d, \"compiled\": %d, "
                         "\"failed\": %d, \"dropped\": %d, \"used\": %d, \"in\": \"%15[a-z]\"",
                   &c.workers, &c.submitted, &c.compiled, &c.failed, &c.dropped, &c.used, c.in);
    if (n < 6) fail_msg("ahead line: %.300s", line);
    free(text);
    return c;
}
