/* The tuner and the tuning database: constraint filtering, a planted wrong-result
 * configuration, build failures, strategies and budgets, database round trip, merge,
 * damaged and foreign files, the fallback chain over fake fingerprints, stale
 * entries, and concurrent writers. */
#define _GNU_SOURCE
#include "harness.h"
#include "tuner/tuner.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

extern char **environ;

/* ---- a planted op: X scales the work, MODE 1 computes a wrong result, MODE 2 does not build ---- */

static const char planted_source[] =
    "__kernel void planted(__global const float *x, __global float *y) {\n"
    "    const size_t i = get_global_id(0);\n"
    "#if MODE == 2\n"
    "#error planted build failure\n"
    "#endif\n"
    "    float v = x[i];\n"
    "    for (int r = 0; r < X; ++r) v = v * 1.0f;\n"
    "    y[i] = 2.0f * v + (MODE == 1 ? 1.0f : 0.0f);\n"
    "}\n";

/* X=4 is the default: correct but the slowest. (The list macro takes P: X is a parameter here.) */
#define PLANTED_PARAMS(P) P(X, DEFINE, 4, 1, 2, 3, 4) P(MODE, DEFINE, 0, 0, 1, 2)
enum { PLANTED_PARAMS(TSR_PARAM_INDEX) PLANTED_NPARAMS };
static const tsr_param_def planted_params[] = {PLANTED_PARAMS(TSR_PARAM_DEF)};
static const char *const planted_classes[] = {"only", "other", NULL};
static const tsr_implementation planted_implementations[] = {{.name = "planted"}};
static bool planted_ok(const tsr_device *dev, const void *problem, const tsr_config *cfg) {
    (void)dev;
    (void)problem;
    return cfg->values[P_X] != 3; /* an illegal value: must never be built */
}
static const tsr_op planted_op;
static void planted_options(const tsr_config *cfg, int program_variant, char *out, size_t size) {
    (void)program_variant;
    tsr_config_defines(&planted_op, cfg, out, size);
}

enum { PLANTED_N = 1 << 14 };
typedef struct planted_ctx {
    cl_mem x, y;
    float host[PLANTED_N];
} planted_ctx;

static int illegal_builds;

static int planted_setups; /* how many class searches began */
static const char *planted_fail_shape; /* a class shape whose setup fails (NULL: none) */

/* The planted op's fixture: PLANTED_N elements whatever the shape (its classes share one). */
static tsr_status planted_setup(tsr_device *dev, const char *shape, uint64_t seed, void **out) {
    (void)seed;
    if (planted_fail_shape && strcmp(shape, planted_fail_shape) == 0)
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "planted: no memory for '%s'", shape);
    ++planted_setups;
    planted_ctx *c = calloc(1, sizeof *c);
    th_fill_uniform(c->host, PLANTED_N, -1, 1);
    c->x = th_buffer_from(dev, c->host, PLANTED_N);
    c->y = th_buffer(dev, PLANTED_N);
    *out = c;
    return TSR_SUCCESS;
}
static tsr_status planted_run(tsr_device *dev, void *vctx, const tsr_config *cfg, cl_command_queue queue,
                              cl_event *first, cl_event *last) {
    planted_ctx *c = vctx;
    if (cfg->values[P_X] == 3) ++illegal_builds;
    char options[64];
    planted_options(cfg, 0, options, sizeof options);
    cl_program program = NULL;
    tsr_status st = tsr_program_from_text(dev, "planted", planted_source, strlen(planted_source), options, &program);
    if (st != TSR_SUCCESS) return st;
    cl_int err;
    cl_kernel k = clCreateKernel(program, "planted", &err);
    clSetKernelArg(k, 0, sizeof c->x, &c->x);
    clSetKernelArg(k, 1, sizeof c->y, &c->y);
    size_t global = PLANTED_N;
    cl_event done = NULL;
    err = clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, NULL, 0, NULL, &done);
    clReleaseKernel(k);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "planted", __FILE__, __LINE__);
    tsr_fixture_single_event(done, first, last);
    return TSR_SUCCESS;
}
static tsr_status planted_check(tsr_device *dev, void *vctx, double *rel_err) {
    planted_ctx *c = vctx;
    static float y[PLANTED_N];
    th_read(dev, c->y, y, PLANTED_N);
    tsr_error_sum sum = {0, 0};
    for (int i = 0; i < PLANTED_N; ++i) tsr_error_add(&sum, y[i], 2.0 * c->host[i]);
    *rel_err = tsr_error_value(&sum);
    float nan[1] = {NAN};
    for (int i = 0; i < PLANTED_N; ++i) y[i] = nan[0];
    return tsr_upload(dev, c->y, y, PLANTED_N);
}
static void planted_work(const void *ctx, double *flops, double *bytes) {
    (void)ctx;
    *flops = 2.0 * PLANTED_N;
    *bytes = 8.0 * PLANTED_N;
}
static void planted_describe(const void *ctx, char *out, size_t size) {
    (void)ctx;
    snprintf(out, size, "%d", PLANTED_N);
}
static void planted_free(void *vctx) {
    planted_ctx *c = vctx;
    clReleaseMemObject(c->x);
    clReleaseMemObject(c->y);
    free(c);
}

static const char *const planted_shapes[] = {"16384", "16384 other"}; /* the same problem (the shape is ignored) */
static const tsr_op planted_op = {
    .name = "planted",
    .source_name = "gemm", /* only hashed, to tell stale entries */
    .params = planted_params,
    .nparams = PLANTED_NPARAMS,
    .classes = planted_classes,
    .class_shapes = planted_shapes,
    .implementations = planted_implementations,
    .nimplementations = 1,
    .config_ok = planted_ok,
    .program_variants = 1,
    .build_options = planted_options,
    .fixture = {.setup = planted_setup, .run = planted_run, .check = planted_check, .work = planted_work,
                .describe = planted_describe, .free = planted_free},
};

/* ---- a sized op: the planted parameters on a problem of the shape's size, whose runs take time in
 * proportion (for the smaller problems slow devices are measured on) ---- */

static const char sized_source[] =
    "__kernel void sized(__global const float *x, __global float *y) {\n"
    "    const size_t i = get_global_id(0);\n"
    "#if MODE == 2\n"
    "#error sized build failure\n"
    "#endif\n"
    "    float v = x[i], a = 0.0f;\n"
    "    for (int r = 0; r < 64 * X; ++r) a = fma(a, 0.5f, v); /* converges to 2v */\n"
    "    y[i] = a + (MODE == 1 ? 1.0f : 0.0f);\n"
    "}\n";

typedef struct sized_ctx {
    size_t n;
    cl_mem x, y;
    float *host, *out;
} sized_ctx;

static tsr_status sized_setup(tsr_device *dev, const char *shape, uint64_t seed, void **out) {
    (void)seed;
    sized_ctx *c = calloc(1, sizeof *c);
    c->n = strtoul(shape, NULL, 10);
    c->host = malloc(c->n * sizeof *c->host);
    c->out = malloc(c->n * sizeof *c->out);
    th_fill_uniform(c->host, c->n, -1, 1);
    c->x = th_buffer_from(dev, c->host, c->n);
    c->y = th_buffer(dev, c->n);
    *out = c;
    return TSR_SUCCESS;
}
/* One launch over c->n items of kernel `name` in `source` (built with the configuration's defines),
 * x and y its first arguments, then an int and a float when `more` (the second op's). */
static tsr_status sized_launch(tsr_device *dev, const sized_ctx *c, const char *name, const char *source,
                               const tsr_config *cfg, const cl_int *more_int, const cl_float *more_float,
                               cl_command_queue queue, cl_event *first, cl_event *last) {
    char options[64];
    planted_options(cfg, 0, options, sizeof options);
    cl_program program = NULL;
    tsr_status st = tsr_program_from_text(dev, name, source, strlen(source), options, &program);
    if (st != TSR_SUCCESS) return st;
    cl_int err;
    cl_kernel k = clCreateKernel(program, name, &err);
    clSetKernelArg(k, 0, sizeof c->x, &c->x);
    clSetKernelArg(k, 1, sizeof c->y, &c->y);
    if (more_int) clSetKernelArg(k, 2, sizeof *more_int, more_int);
    if (more_float) clSetKernelArg(k, 3, sizeof *more_float, more_float);
    size_t global = c->n;
    cl_event done = NULL;
    err = clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, NULL, 0, NULL, &done);
    clReleaseKernel(k);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, name, __FILE__, __LINE__);
    tsr_fixture_single_event(done, first, last);
    return TSR_SUCCESS;
}
static tsr_status sized_run(tsr_device *dev, void *vctx, const tsr_config *cfg, cl_command_queue queue,
                            cl_event *first, cl_event *last) {
    return sized_launch(dev, vctx, "sized", sized_source, cfg, NULL, NULL, queue, first, last);
}
static tsr_status sized_check(tsr_device *dev, void *vctx, double *rel_err) {
    sized_ctx *c = vctx;
    th_read(dev, c->y, c->out, c->n);
    tsr_error_sum sum = {0, 0};
    for (size_t i = 0; i < c->n; ++i) tsr_error_add(&sum, c->out[i], 2.0 * c->host[i]);
    *rel_err = tsr_error_value(&sum);
    for (size_t i = 0; i < c->n; ++i) c->out[i] = NAN;
    return tsr_upload(dev, c->y, c->out, c->n);
}
static void sized_work(const void *ctx, double *flops, double *bytes) {
    const sized_ctx *c = ctx;
    *flops = 2.0 * 256 * (double)c->n; /* at the default X=4 */
    *bytes = 8.0 * (double)c->n;
}
static void sized_describe(const void *ctx, char *out, size_t size) {
    snprintf(out, size, "%zu", ((const sized_ctx *)ctx)->n);
}
static void sized_free(void *vctx) {
    sized_ctx *c = vctx;
    clReleaseMemObject(c->x);
    clReleaseMemObject(c->y);
    free(c->host);
    free(c->out);
    free(c);
}
/* "big" from 4096 elements on */
static const char *sized_class(const void *ctx) { return ((const sized_ctx *)ctx)->n >= 4096 ? "big" : "tiny"; }

static const char *const sized_classes[] = {"big", "tiny", NULL};
static const char *const sized_shapes[] = {"262144", "1024"};
/* big: an eighth and a sixty-fourth; tiny's "smaller" problem is a big one, which must be refused */
static const char *const sized_reduced[] = {"32768;4096", "8192"};
static const tsr_op sized_op = {
    .name = "sized",
    .source_name = "gemm", /* only hashed, to tell stale entries */
    .params = planted_params,
    .nparams = PLANTED_NPARAMS,
    .classes = sized_classes,
    .class_shapes = sized_shapes,
    .class_shapes_reduced = sized_reduced,
    .implementations = planted_implementations,
    .nimplementations = 1,
    .config_ok = planted_ok,
    .program_variants = 1,
    .build_options = planted_options,
    .fixture = {.setup = sized_setup, .run = sized_run, .check = sized_check, .work = sized_work,
                .describe = sized_describe, .free = sized_free, .problem_class = sized_class},
};

/* ---- a two-problem op: the planted parameters on chains whose length X sets, one way on each class's
 * own problem and another on its second problem ---- */

static const char second_source[] =
    "__kernel void second(__global const float *x, __global float *y, int reps, float wrong) {\n"
    "    const size_t i = get_global_id(0);\n"
    "#if MODE == 2\n"
    "#error second build failure\n"
    "#endif\n"
    "    float v = x[i], a = 0.0f;\n"
    "    for (int r = 0; r < reps; ++r) a = fma(a, 0.5f, v); /* converges to 2v */\n"
    "    y[i] = a + wrong + (MODE == 1 ? 1.0f : 0.0f);\n"
    "}\n";

enum { SECOND_N = 1 << 16 };
/* The classes: "contrary" (on its second problem chains run 64 (5 - X) steps: the pick X=1, fastest
 * on the class's problem, slowest there), "agree" (64 X steps on both) and "wrong" (X=1 gives a wrong
 * result on the second problem). The problem is the sized op's, of SECOND_N elements. */
typedef struct second_ctx {
    char cls[16]; /* from the shape's word; "" on a class's own problem */
    void *sized;  /* a sized_ctx */
} second_ctx;

static tsr_status second_setup(tsr_device *dev, const char *shape, uint64_t seed, void **out) {
    second_ctx *c = calloc(1, sizeof *c);
    const char *word = strchr(shape, ' ');
    if (word) tsr_strlcpy(c->cls, word + 1, sizeof c->cls);
    char n[16];
    snprintf(n, sizeof n, "%d", SECOND_N);
    tsr_status st = sized_setup(dev, n, seed, &c->sized);
    if (st != TSR_SUCCESS) free(c), c = NULL;
    *out = c;
    return st;
}
static tsr_status second_run(tsr_device *dev, void *vctx, const tsr_config *cfg, cl_command_queue queue,
                             cl_event *first, cl_event *last) {
    second_ctx *c = vctx;
    const int x = (int)cfg->values[P_X];
    const cl_int reps = 64 * (strcmp(c->cls, "contrary") == 0 ? 5 - x : x);
    const cl_float wrong = strcmp(c->cls, "wrong") == 0 && x == 1 ? 1.0f : 0.0f;
    return sized_launch(dev, c->sized, "second", second_source, cfg, &reps, &wrong, queue, first, last);
}
static tsr_status second_check(tsr_device *dev, void *vctx, double *rel_err) {
    return sized_check(dev, ((second_ctx *)vctx)->sized, rel_err);
}
static void second_work(const void *ctx, double *flops, double *bytes) {
    sized_work(((const second_ctx *)ctx)->sized, flops, bytes);
}
static void second_describe(const void *ctx, char *out, size_t size) {
    const second_ctx *c = ctx;
    snprintf(out, size, "%d%s%s", SECOND_N, *c->cls ? " " : "", c->cls);
}
static void second_free(void *vctx) {
    second_ctx *c = vctx;
    sized_free(c->sized);
    free(c);
}
static const char *second_class(const void *ctx) { return ((const second_ctx *)ctx)->cls; }

/* stray: its second problem is of another class (agree), which the tuner must refuse */
static const char *const second_classes[] = {"contrary", "agree", "wrong", "none", "stray", NULL};
static const char *const second_shapes[] = {"65536", "65536", "65536", "65536", "65536"};
static const char *const second_checks[] = {"65536 contrary", "65536 agree", "65536 wrong", NULL, "65536 agree"};
/* The class "none" searches X 1 and 2 alone (a space of its own, as conv2d's classes have) */
static const char *second_space(const tsr_device *device, const char *problem_class) {
    (void)device;
    return problem_class && strcmp(problem_class, "none") == 0 ? "X=1,2" : NULL;
}
static const tsr_op second_op = {
    .name = "second",
    .tuning_space = second_space,
    .source_name = "gemm", /* only hashed, to tell stale entries */
    .params = planted_params,
    .nparams = PLANTED_NPARAMS,
    .classes = second_classes,
    .class_shapes = second_shapes,
    .class_shapes_check = second_checks,
    .implementations = planted_implementations,
    .nimplementations = 1,
    .config_ok = planted_ok,
    .program_variants = 1,
    .build_options = planted_options,
    .fixture = {.setup = second_setup, .run = second_run, .check = second_check, .work = second_work,
                .describe = second_describe, .free = second_free, .problem_class = second_class},
};

static tsr_device *dev;
static char dir[512], db_path[600];

static int setup(void **state) {
    (void)state;
    th_tempdir(dir, sizeof dir);
    snprintf(db_path, sizeof db_path, "%s/tuning.json", dir);
    setenv("TSR_TUNING_DB", db_path, 1);
    unsetenv("TSR_CONFIG_GEMM");
    dev = th_open_device();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tsr_device_close(dev);
    th_remove_tree(dir);
    return 0;
}

static cJSON *load(const char *path) {
    cJSON *root = NULL;
    TH_ASSERT_OK(tsr_db_load(path, &root));
    return root;
}

static void exhaustive_filters_rejects_and_records(void **state) {
    (void)state;
    illegal_builds = 0;
    tsr_tune_options o = {.strategy = TSR_TUNE_EXHAUSTIVE, .budget_seconds = 120, .classes = "only", .seed = 7};
    tsr_tune_result r[2];
    size_t n = 0;
    TH_ASSERT_OK(tsr_tune_op(dev, &planted_op, &o, r, 2, &n));
    assert_int_equal(n, 1);
    assert_int_equal(illegal_builds, 0);          /* X=3 never compiled */
    assert_int_equal(r[0].evaluated, 9);          /* 3 legal X values x 3 modes */
    assert_int_equal(r[0].build_failures, 3);     /* MODE=2 */
    /* MODE=1 is found wrong where it could be chosen; elsewhere it is stopped as slower, never kept. */
    assert_true(r[0].wrong_results <= 3 && r[0].wrong_results + r[0].abandoned >= 3);
    TH_ASSERT_CONTAINS(r[0].best_config, "MODE=0");
    assert_true(r[0].best_gflops > 0);
    assert_true(r[0].default_gflops > 0);
    /* The database holds the best, with its provenance. */
    cJSON *root = load(db_path);
    cJSON *devs = cJSON_GetObjectItem(root, "devices");
    assert_int_equal(cJSON_GetArraySize(devs), 1);
    cJSON *e = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(devs->child, "ops"), "planted"), "only");
    assert_non_null(e);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(e, "config"), "MODE")->valueint, 0);
    static const char *const fields[] = {"gflops", "runners_up", "tessera_version", "source_hash", "build_options",
                                         "date", "problem", "strategy", "evaluations"};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; ++f)
        if (!cJSON_GetObjectItem(e, fields[f])) fail_msg("entry lacks %s", fields[f]);
    cJSON *ru;
    cJSON_ArrayForEach(ru, cJSON_GetObjectItem(e, "runners_up"))
        assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(ru, "config"), "MODE")->valueint, 0);
    cJSON_Delete(root);
}

static void strategies_respect_budgets(void **state) {
    (void)state;
    const tsr_tune_strategy strategies[] = {TSR_TUNE_RANDOM, TSR_TUNE_ANNEAL, TSR_TUNE_CLIMB};
    for (int s = 0; s < 3; ++s) {
        tsr_tune_options o = {.strategy = strategies[s], .budget_evaluations = 4, .classes = "only", .seed = 3,
                              .dry_run = true};
        tsr_tune_result r[1];
        size_t n = 0;
        TH_ASSERT_OK(tsr_tune_op(dev, &planted_op, &o, r, 1, &n));
        assert_true(r[0].evaluated <= 4);
        assert_true(r[0].evaluated >= 2);
        TH_ASSERT_CONTAINS(r[0].best_config, "MODE=0");
    }
    assert_int_equal(access(db_path, F_OK), -1); /* dry runs write nothing */
    /* A time budget ends the search. */
    tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_seconds = 0.2, .classes = "only", .dry_run = true};
    tsr_tune_result r[1];
    size_t n = 0;
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    TH_ASSERT_OK(tsr_tune_op(dev, &planted_op, &o, r, 1, &n));
    (void)t0;
    assert_true(r[0].seconds < 10.0);
}

static void bad_options(void **state) {
    (void)state;
    tsr_tune_result r[1];
    size_t n = 0;
    tsr_tune_options o = {.strategy = (tsr_tune_strategy)99};
    TH_ASSERT_STATUS(tsr_tune(dev, "gemm", &o, r, 1, &n), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "strategy");
    o = (tsr_tune_options){.budget_seconds = -1};
    TH_ASSERT_STATUS(tsr_tune(dev, "gemm", &o, r, 1, &n), TSR_ERR_INVALID_ARG);
    o = (tsr_tune_options){.budget_seconds = INFINITY};
    TH_ASSERT_STATUS(tsr_tune(dev, "gemm", &o, r, 1, &n), TSR_ERR_INVALID_ARG);
    o = (tsr_tune_options){.budget_seconds = NAN};
    TH_ASSERT_STATUS(tsr_tune(dev, "gemm", &o, r, 1, &n), TSR_ERR_INVALID_ARG);
    o = (tsr_tune_options){.classes = "large,nonsense"};
    TH_ASSERT_STATUS(tsr_tune(dev, "gemm", &o, r, 1, &n), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "nonsense");
    o = (tsr_tune_options){.space = "MWI=3"};
    TH_ASSERT_STATUS(tsr_tune(dev, "gemm", &o, r, 1, &n), TSR_ERR_INVALID_ARG);
    o = (tsr_tune_options){.space = "FOO=1"};
    TH_ASSERT_STATUS(tsr_tune(dev, "gemm", &o, r, 1, &n), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_tune(dev, "nosuchop", &o, r, 1, &n), TSR_ERR_NOT_FOUND);
    TH_ASSERT_STATUS(tsr_tune(NULL, "gemm", &o, r, 1, &n), TSR_ERR_INVALID_ARG);
    tsr_config_info ci;
    TH_ASSERT_STATUS(tsr_config_lookup(dev, "gemm", "nonsense", &ci), TSR_ERR_NOT_FOUND);
    TH_ASSERT_STATUS(tsr_config_lookup(dev, "nosuchop", NULL, &ci), TSR_ERR_NOT_FOUND);
}

/* ---- a database over fake fingerprints ---- */

static void add_entry(cJSON *root, const char *key, const char *platform, const char *vendor, const char *name,
                      const char *driver, const char *type, const char *cls, int mwi, double gflops, const char *hash,
                      const char *date) {
    cJSON *devs = cJSON_GetObjectItem(root, "devices");
    cJSON *d = cJSON_GetObjectItem(devs, key);
    if (!d) {
        d = cJSON_AddObjectToObject(devs, key);
        cJSON_AddStringToObject(d, "platform", platform);
        cJSON_AddStringToObject(d, "vendor", vendor);
        cJSON_AddStringToObject(d, "name", name);
        cJSON_AddStringToObject(d, "driver", driver);
        cJSON_AddStringToObject(d, "opencl_c", tsr_device_get_info(dev)->opencl_c_version);
        cJSON_AddStringToObject(d, "type", type);
        cJSON_AddObjectToObject(cJSON_AddObjectToObject(d, "ops"), "gemm");
    }
    cJSON *gemm = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "ops"), "gemm");
    cJSON *e = cJSON_CreateObject();
    cJSON *c = cJSON_AddObjectToObject(e, "config");
    const char *names[] = {"MWI", "VW", "NVW", "KU",    "WGM",    "WGN", "KWG", "SA", "SB",
                           "PACKA", "PACKB", "KC", "PK", "NT", "KERNEL", "PAD", "DB"};
    const int values[] = {mwi, 8, 1, 2, 1, 1, 8, 0, 0, 1, 1, 0, 16, 1, 0, 0, 0};
    for (int i = 0; i < 17; ++i) cJSON_AddNumberToObject(c, names[i], values[i]);
    cJSON_AddNumberToObject(e, "gflops", gflops);
    cJSON_AddStringToObject(e, "source_hash", hash);
    cJSON_AddStringToObject(e, "date", date);
    cJSON_AddStringToObject(e, "problem", "test");
    if (cJSON_GetObjectItem(gemm, cls)) cJSON_ReplaceItemInObject(gemm, cls, e);
    else cJSON_AddItemToObject(gemm, cls, e);
}

/* The tree as it is (checksum or not). */
static void write_db_as_is(const cJSON *root, const char *path) {
    char *text = cJSON_Print(root);
    th_write_file(path, text, strlen(text));
    free(text);
}

/* The tree sealed, as tessera writes every database. */
static void write_db(cJSON *root, const char *path) {
    TH_ASSERT_OK(tsr_db_seal(root));
    write_db_as_is(root, path);
}

static tsr_config_info lookup_fresh(const char *cls) {
    tsr_device_close(dev);
    dev = th_open_device();
    tsr_config_info ci;
    TH_ASSERT_OK(tsr_config_lookup(dev, "gemm", cls, &ci));
    return ci;
}

/* An entry tuned on this very device and processor is taken before one tuned elsewhere, whichever
 * database holds each: a built-in entry for this device beats the user's entry for the same device
 * name on another processor (a Zen 5's tune in a home directory a Zen 4 shares), and the user's
 * own entry for this device beats both. Needs a current built-in entry for this device (the
 * machines the built-in database was tuned on); elsewhere it says so and checks the rest. */
static void own_entries_before_siblings_across_databases(void **state) {
    (void)state;
    const tsr_device_info info = *tsr_device_get_info(dev);
    cJSON *builtin = cJSON_Parse(tsr_builtin_tuning_json);
    assert_non_null(builtin);
    const tsr_op *op = NULL;
    const char *cls = NULL;
    const cJSON *entry = NULL;
    char hash[17];
    for (const tsr_op *const *o = tsr_ops; *o && !entry; ++o) {
        TH_ASSERT_OK(tsr_op_source_hash(*o, hash));
        for (const char *const *c = tsr_op_class_list(*o); *c && !entry; ++c) {
            const char *key;
            char notes[256] = "";
            if (tsr_db_find_tiers(builtin, &info, 1, TSR_DB_OWN_TIERS, (*o)->name, *c, hash, &entry, &key, notes,
                                  sizeof notes, NULL)) {
                op = *o;
                cls = *c;
            }
        }
    }
    if (!entry) {
        printf("# no current built-in entry for '%s' here: the cross-database order is not checked\n", info.name);
        cJSON_Delete(builtin);
        return;
    }
    printf("# built-in %s/%s for this device\n", op->name, cls);
    /* the user's database: this device name on another processor, the built-in entry's configuration */
    cJSON *root = tsr_db_new();
    cJSON *node = cJSON_AddObjectToObject(cJSON_GetObjectItem(root, "devices"), "elsewhere");
    cJSON_AddStringToObject(node, "platform", info.platform_name);
    cJSON_AddStringToObject(node, "vendor", info.vendor);
    cJSON_AddStringToObject(node, "name", info.name);
    cJSON_AddStringToObject(node, "driver", info.driver_version);
    cJSON_AddStringToObject(node, "opencl_c", info.opencl_c_version);
    cJSON_AddStringToObject(node, "type", tsr_device_type_str(info.type));
    cJSON_AddStringToObject(node, "cpu", "SomeVendor family 1 model 1");
    cJSON *e = cJSON_Duplicate(entry, true);
    cJSON_ReplaceItemInObject(e, "problem", cJSON_CreateString("elsewhere"));
    cJSON_AddItemToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(node, "ops"), op->name), cls, e);
    write_db(root, db_path);
    tsr_device_close(dev);
    dev = th_open_device();
    tsr_config_info ci;
    TH_ASSERT_OK(tsr_config_lookup(dev, op->name, cls, &ci));
    assert_int_equal(ci.source, TSR_CONFIG_BUILTIN_TUNED);
    assert_null(strstr(ci.origin, "elsewhere"));
    /* without the built-in entries the other processor's is taken, and named as such */
    setenv("TSR_BUILTIN_TUNING", "off", 1);
    tsr_device_close(dev);
    dev = th_open_device();
    TH_ASSERT_OK(tsr_config_lookup(dev, op->name, cls, &ci));
    unsetenv("TSR_BUILTIN_TUNING");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED_SAME_VENDOR);
    TH_ASSERT_CONTAINS(ci.origin, "on SomeVendor family 1 model 1, another processor");
    /* the user's own entry for this device comes first */
    cJSON *own = cJSON_Duplicate(node, true);
    cJSON_DeleteItemFromObject(own, "cpu");
    if (info.host_cpu[0]) cJSON_AddStringToObject(own, "cpu", info.host_cpu);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(own, "ops"), op->name), cls),
                              "problem", cJSON_CreateString("mine"));
    cJSON_AddItemToObject(cJSON_GetObjectItem(root, "devices"), "mine", own);
    write_db(root, db_path);
    tsr_device_close(dev);
    dev = th_open_device();
    TH_ASSERT_OK(tsr_config_lookup(dev, op->name, cls, &ci));
    assert_int_equal(ci.source, TSR_CONFIG_TUNED);
    TH_ASSERT_CONTAINS(ci.origin, "on mine");
    cJSON_Delete(root);
    cJSON_Delete(builtin);
}

static void fallback_chain(void **state) {
    (void)state;
    const tsr_device_info info = *tsr_device_get_info(dev), *i = &info; /* dev is reopened below */
    char hash[17];
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_gemm, hash));
    const char *type = tsr_device_type_str(i->type);
    cJSON *root = tsr_db_new();
    add_entry(root, "exact", i->platform_name, i->vendor, i->name, i->driver_version, type, "large", 2, 10, hash, "2026-01-01");
    add_entry(root, "otherdriver", i->platform_name, i->vendor, i->name, "0.9-old", type, "large", 4, 20, hash, "2026-01-01");
    add_entry(root, "sibling", i->platform_name, i->vendor, "a sibling device", "1.0", type, "large", 8, 30, hash, "2026-01-01");
    add_entry(root, "stranger", "Other", "OtherVendor", "x", "1", type, "large", 6, 99, hash, "2026-01-01");
    write_db(root, db_path);
    tsr_config_info ci = lookup_fresh("large");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED);
    TH_ASSERT_CONTAINS(ci.config, "MWI=2");
    TH_ASSERT_CONTAINS(ci.origin, db_path);

    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(root, "devices"), "exact");
    write_db(root, db_path);
    ci = lookup_fresh("large");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED_OTHER_DRIVER);
    TH_ASSERT_CONTAINS(ci.config, "MWI=4");
    TH_ASSERT_CONTAINS(ci.origin, "0.9-old");

    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(root, "devices"), "otherdriver");
    write_db(root, db_path);
    /* (a built-in entry for this very device would come first: own_entries_before_siblings_across_databases) */
    setenv("TSR_BUILTIN_TUNING", "off", 1);
    ci = lookup_fresh("large");
    unsetenv("TSR_BUILTIN_TUNING");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED_SAME_VENDOR);
    TH_ASSERT_CONTAINS(ci.origin, "a sibling device");

    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(root, "devices"), "sibling");
    write_db(root, db_path);
    ci = lookup_fresh("large");
    assert_true(ci.source == TSR_CONFIG_BUILTIN_TUNED || ci.source == TSR_CONFIG_BUILTIN_DEFAULT);

    /* Nearest class: batched falls back to a tuned small entry (with no built-in entry in the way). */
    setenv("TSR_BUILTIN_TUNING", "off", 1);
    add_entry(root, "exact", i->platform_name, i->vendor, i->name, i->driver_version, type, "small", 2, 10, hash, "2026-01-01");
    write_db(root, db_path);
    ci = lookup_fresh("batched");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED);
    assert_string_equal(ci.used_class, "small");
    assert_string_equal(ci.problem_class, "batched");
    /* small-m16, split from small-m: a database with a small-m entry only serves it from that */
    add_entry(root, "exact", i->platform_name, i->vendor, i->name, i->driver_version, type, "small-m", 6, 10, hash,
              "2026-01-01");
    write_db(root, db_path);
    ci = lookup_fresh("small-m16");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED);
    assert_string_equal(ci.used_class, "small-m");
    TH_ASSERT_CONTAINS(ci.config, "MWI=6");
    add_entry(root, "exact", i->platform_name, i->vendor, i->name, i->driver_version, type, "small-m16", 4, 10, hash,
              "2026-01-01");
    write_db(root, db_path);
    ci = lookup_fresh("small-m16"); /* and from its own once it has one */
    assert_string_equal(ci.used_class, "small-m16");
    TH_ASSERT_CONTAINS(ci.config, "MWI=4");
    /* conv2d's 1x1-expand, stem and 3x3-small, split from 1x1, strided and 3x3 in session 19, strided-small, split
     * from strided in session 25, 1x1-strided-small, split from 1x1-strided in session 26, 1x1-mid, split from
     * 1x1-small in session 27, 3x3-wide and 3x3-mid, split from 3x3 and 3x3-small in session 28, and strided-mid, split
     * from strided-small in session 34: a database with only
     * the older classes' entries serves them from those; an entry of their own wins once there */
    char conv_hash[17];
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_conv, conv_hash));
    cJSON *conv_ops = cJSON_AddObjectToObject(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "devices"), "exact"), "ops"), "conv2d");
    const char *const conv_parents[][2] = {{"1x1", "1x1-expand"},
                                           {"strided", "stem"},
                                           {"3x3", "3x3-small"},
                                           {"1x1-strided", "1x1-strided-small"},
                                           {"1x1-small", "1x1-mid"},
                                           {"3x3", "3x3-wide"},
                                           {"strided", "strided-small"}};
    for (int c = 0; c < 5; ++c) { /* the parents (3x3 and strided once) */
        cJSON *e = cJSON_AddObjectToObject(conv_ops, conv_parents[c][0]);
        cJSON *cfg = cJSON_AddObjectToObject(e, "config");
        const char *names[] = {"ALGO", "MWI", "VW", "STAGE", "WGM", "WGN", "KWG"};
        const int values[] = {1, 1, 1, 0, 1, 1, 8};
        for (int k = 0; k < 7; ++k) cJSON_AddNumberToObject(cfg, names[k], values[k]);
        cJSON_AddNumberToObject(e, "gflops", 10);
        cJSON_AddStringToObject(e, "source_hash", conv_hash);
        cJSON_AddStringToObject(e, "date", "2026-01-01");
        cJSON_AddStringToObject(e, "problem", "test");
    }
    write_db(root, db_path);
    for (int c = 0; c < 7; ++c) {
        tsr_device_close(dev);
        dev = th_open_device();
        TH_ASSERT_OK(tsr_config_lookup(dev, "conv2d", conv_parents[c][1], &ci));
        assert_int_equal(ci.source, TSR_CONFIG_TUNED);
        assert_string_equal(ci.used_class, conv_parents[c][0]);
        assert_string_equal(ci.problem_class, conv_parents[c][1]);
    }
    cJSON_AddItemToObject(conv_ops, "stem", cJSON_Duplicate(cJSON_GetObjectItem(conv_ops, "strided"), true));
    write_db(root, db_path);
    tsr_device_close(dev);
    dev = th_open_device();
    TH_ASSERT_OK(tsr_config_lookup(dev, "conv2d", "stem", &ci));
    assert_string_equal(ci.used_class, "stem");
    /* 3x3-mid and 3x3-small-wino (session 37) come from 3x3-small, strided-mid (session 34) from
     * strided-small and 1x1-strided-mid (session 36) from 1x1-strided-small, each itself a child above:
     * given an entry of its own (a copy of its parent's), it serves the grandchild */
    const char *const grandchildren[][3] = {{"3x3", "3x3-small", "3x3-mid"},
                                            {"strided", "strided-small", "strided-mid"},
                                            {"1x1-strided", "1x1-strided-small", "1x1-strided-mid"},
                                            {"3x3", "3x3-small", "3x3-small-wino"}};
    for (int c = 0; c < 4; ++c) {
        if (!cJSON_GetObjectItem(conv_ops, grandchildren[c][1]))
            cJSON_AddItemToObject(conv_ops, grandchildren[c][1],
                                  cJSON_Duplicate(cJSON_GetObjectItem(conv_ops, grandchildren[c][0]), true));
        write_db(root, db_path);
        tsr_device_close(dev);
        dev = th_open_device();
        TH_ASSERT_OK(tsr_config_lookup(dev, "conv2d", grandchildren[c][2], &ci));
        assert_int_equal(ci.source, TSR_CONFIG_TUNED);
        assert_string_equal(ci.used_class, grandchildren[c][1]);
        assert_string_equal(ci.problem_class, grandchildren[c][2]);
    }
    unsetenv("TSR_BUILTIN_TUNING");
    ci = lookup_fresh("batched"); /* this machine's built-in batched entry (if any) comes before the nearest class */
    assert_true(ci.source == TSR_CONFIG_BUILTIN_TUNED || strcmp(ci.used_class, "small") == 0);

    /* An override wins over everything, and says so. */
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", "MWI=1"));
    TH_ASSERT_OK(tsr_config_lookup(dev, "gemm", "small", &ci));
    assert_int_equal(ci.source, TSR_CONFIG_API_OVERRIDE);
    TH_ASSERT_CONTAINS(ci.config, "MWI=1");
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
    /* a GEMM plan names the class of its shape (and of its storage types) */
    const tsr_matmul_desc shapes[] = {
        {.m = 2048, .n = 8, .k = 512},
        {.m = 64, .n = 64, .k = 64, .batch = 10, .c.batch_stride = 64 * 64},
        {.m = 64, .n = 64, .k = 64, .a.dtype = TSR_F16, .b.dtype = TSR_F16},
    };
    const char *const classes[] = {"small-n", "batched", "small-f16"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
        tsr_matmul_plan *plan = NULL;
        TH_ASSERT_OK(tsr_matmul_plan_create(dev, &shapes[i], &plan));
        TH_ASSERT_OK(tsr_matmul_plan_info(plan, &ci));
        assert_string_equal(ci.problem_class, classes[i]);
        tsr_matmul_plan_destroy(plan);
    }
    cJSON_Delete(root);
}

/* tsr_config_override: for every class of its op and no other, checked when it is set (a refused
 * text leaves the override as it was), replaced and cleared; $TSR_CONFIG_<OP> is the override a
 * device starts with, read when it opens and not at launch. */
static void config_overrides(void **state) {
    (void)state;
    tsr_config_info ci;
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", "MWI=1"));
    const char *const *classes = tsr_op_classes("gemm");
    for (int c = 0; classes[c]; ++c) {
        TH_ASSERT_OK(tsr_config_lookup(dev, "gemm", classes[c], &ci));
        assert_int_equal(ci.source, TSR_CONFIG_API_OVERRIDE);
        TH_ASSERT_CONTAINS(ci.config, "MWI=1");
        TH_ASSERT_CONTAINS(ci.origin, "tsr_config_override");
    }
    assert_string_equal(tsr_config_source_str(ci.source), "override set through tsr_config_override");
    TH_ASSERT_OK(tsr_config_lookup(dev, "gelu", NULL, &ci));
    assert_true(ci.source != TSR_CONFIG_API_OVERRIDE && ci.source != TSR_CONFIG_ENV_OVERRIDE);

    TH_ASSERT_OK(tsr_config_override(dev, "gemm", "MWI=2"));
    static const struct { const char *op, *config, *needle; tsr_status status; } bad[] = {
        {"nosuchop", "MWI=1", "no op named 'nosuchop'", TSR_ERR_NOT_FOUND},
        {"gemm", "FOO=1", "no parameter 'FOO'", TSR_ERR_INVALID_ARG},
        {"gemm", "MWI=3", "MWI=3 is not in the parameter space", TSR_ERR_INVALID_ARG},
        {"gemm", "MWI", "not NAME=VALUE", TSR_ERR_INVALID_ARG},
        {"gemm", "SA=1 PACKA=1", "is not legal on device", TSR_ERR_UNSUPPORTED},
        {"gemm", "MWI=0", "MWI=0 is not in the parameter space", TSR_ERR_INVALID_ARG},
        {"gemm", "MWI=-1", "MWI=-1 is not in the parameter space", TSR_ERR_INVALID_ARG},
        {"gemm", "MWI=18446744073709551622", "is not in the parameter space", TSR_ERR_INVALID_ARG}, /* 2^64 + 6 */
        {"gemm", "MWI=6x", "MWI=6x is not in the parameter space", TSR_ERR_INVALID_ARG},
        {"gemm", "<b>MWI</b>=6", "no parameter '<b>MWI</b>'", TSR_ERR_INVALID_ARG},
    };
    /* longer than any configuration: refused whole, never cut to a different configuration */
    static char long_text[700];
    memset(long_text, ' ', sizeof long_text - 8);
    memcpy(long_text + sizeof long_text - 8, "MWI=1", 6);
    TH_ASSERT_STATUS(tsr_config_override(dev, "gemm", long_text), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "characters long");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        TH_ASSERT_STATUS(tsr_config_override(dev, bad[i].op, bad[i].config), bad[i].status);
        TH_ASSERT_CONTAINS(tsr_last_error(), bad[i].needle);
        TH_ASSERT_OK(tsr_config_lookup(dev, "gemm", "small", &ci));
        assert_int_equal(ci.source, TSR_CONFIG_API_OVERRIDE);
        TH_ASSERT_CONTAINS(ci.config, "MWI=2");
    }
    TH_ASSERT_STATUS(tsr_config_override(NULL, "gemm", "MWI=1"), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_config_override(dev, NULL, "MWI=1"), TSR_ERR_INVALID_ARG);

    /* NULL and "" clear it (clearing none is fine too). */
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
    TH_ASSERT_OK(tsr_config_lookup(dev, "gemm", "small", &ci));
    assert_true(ci.source != TSR_CONFIG_API_OVERRIDE && ci.source != TSR_CONFIG_ENV_OVERRIDE);
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", "MWI=2"));
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", ""));
    TH_ASSERT_OK(tsr_config_lookup(dev, "gemm", "small", &ci));
    assert_true(ci.source != TSR_CONFIG_API_OVERRIDE && ci.source != TSR_CONFIG_ENV_OVERRIDE);
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));

    /* The environment: a device opened before the variable was set does not see it. */
    setenv("TSR_CONFIG_GEMM", "MWI=1", 1);
    TH_ASSERT_OK(tsr_config_lookup(dev, "gemm", "small", &ci));
    assert_int_not_equal(ci.source, TSR_CONFIG_ENV_OVERRIDE);
    tsr_device *opened = th_open_device();
    unsetenv("TSR_CONFIG_GEMM");
    TH_ASSERT_OK(tsr_config_lookup(opened, "gemm", "small", &ci));
    assert_int_equal(ci.source, TSR_CONFIG_ENV_OVERRIDE);
    TH_ASSERT_CONTAINS(ci.config, "MWI=1");
    TH_ASSERT_CONTAINS(ci.origin, "$TSR_CONFIG_GEMM");
    TH_ASSERT_OK(tsr_config_override(opened, "gemm", "MWI=2"));
    TH_ASSERT_OK(tsr_config_lookup(opened, "gemm", "small", &ci));
    assert_int_equal(ci.source, TSR_CONFIG_API_OVERRIDE);
    TH_ASSERT_CONTAINS(ci.config, "MWI=2");
    tsr_device_close(opened);
}

/* Resolved configurations are cached for every (op, class) pair, however many there are. */
static void resolved_cache_grows(void **state) {
    (void)state;
    for (int pass = 0; pass < 2; ++pass) {
        for (int i = 0; i < 100; ++i) {
            char cls[32];
            snprintf(cls, sizeof cls, "class-%d", i);
            tsr_config cfg;
            TH_ASSERT_OK(tsr_resolve_config(dev, &tsr_op_gemm, cls, &cfg, NULL));
        }
        assert_int_equal(dev->nresolved, 100); /* the second pass found every one cached */
    }
}

/* The gemm fixture's "+tb": B stored transposed ([N][K]) and read with trans_b, right through the
 * public call and through launches of a given configuration (the smallm kernel's K-vectors form
 * and the tiled kernel's packed B); its description names it; misplaced words are refused. */
static void gemm_fixture_transposed_b(void **state) {
    (void)state;
    static const char *const shapes[] = {"16x40x24 +tb", "12x37x29 +tb", "3x16x40x24 +tb"};
    static const char *const configs[] = {NULL, "KERNEL=2 MWI=8 VW=16 NVW=2 KU=4", "KERNEL=2 MWI=4 VW=8 NVW=1 KU=2",
                                          "MWI=4 VW=4 NVW=1 KU=2 PACKB=1"};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; ++s) {
        void *fx = NULL;
        TH_ASSERT_OK(tsr_op_gemm.fixture.setup(dev, shapes[s], 7 + s, &fx));
        char text[64];
        tsr_op_tuning_describe(&tsr_op_gemm, fx, text, sizeof text);
        assert_string_equal(text, shapes[s]);
        for (size_t c = 0; c < sizeof configs / sizeof *configs; ++c) {
            tsr_config cfg;
            tsr_config_declared(&tsr_op_gemm, &cfg);
            if (configs[c]) TH_ASSERT_OK(tsr_config_parse(&tsr_op_gemm, configs[c], "test", &cfg));
            cl_event last = NULL;
            TH_ASSERT_OK(tsr_op_tuning_run(&tsr_op_gemm, dev, fx, configs[c] ? &cfg : NULL, NULL, &last));
            if (last) clReleaseEvent(last);
            double err = 1.0;
            TH_ASSERT_OK(tsr_op_tuning_check(&tsr_op_gemm, dev, fx, &err));
            if (!(err < 1e-5)) fail_msg("%s, %s: relative error %g", shapes[s], configs[c] ? configs[c] : "the call", err);
        }
        tsr_op_tuning_free(&tsr_op_gemm, fx);
    }
    void *fx = NULL;
    TH_ASSERT_OK(tsr_op_gemm.fixture.setup(dev, "16x40x24 +tb f16", 1, &fx));
    char text[64];
    tsr_op_tuning_describe(&tsr_op_gemm, fx, text, sizeof text);
    assert_string_equal(text, "16x40x24 +tb f16");
    tsr_op_tuning_free(&tsr_op_gemm, fx);
    static const char *const bad[] = {"16x40x24 f16 +tb", "16x40x24 +tb +tb", "16x40x24 +tb f16 x", "16x40x24 tb",
                                      "+tb 16x40x24"};
    for (size_t b = 0; b < sizeof bad / sizeof *bad; ++b) {
        fx = NULL;
        assert_int_equal(tsr_op_gemm.fixture.setup(dev, bad[b], 1, &fx), TSR_ERR_INVALID_ARG);
        assert_null(fx);
        TH_ASSERT_CONTAINS(tsr_last_error(), "+tb");
    }
}

/* small-m16 (9-16 rows) was split from small-m: a call's class follows M, and a database with a
 * small-m entry only serves small-m16 from it. */
static void small_m16_falls_back_to_small_m(void **state) {
    (void)state;
    tsr_config_info ci;
    TH_ASSERT_OK(tsr_gemm_config_info(dev, 16, 384, 384, 1, &ci));
    assert_string_equal(ci.problem_class, "small-m16");
    TH_ASSERT_OK(tsr_gemm_config_info(dev, 9, 384, 384, 1, &ci));
    assert_string_equal(ci.problem_class, "small-m16");
    TH_ASSERT_OK(tsr_gemm_config_info(dev, 8, 384, 384, 1, &ci));
    assert_string_equal(ci.problem_class, "small-m");
    TH_ASSERT_OK(tsr_gemm_config_info(dev, 17, 384, 384, 1, &ci));
    assert_string_not_equal(ci.problem_class, "small-m16");
    assert_string_equal(tsr_op_nearest_class(&tsr_op_gemm, "small-m16"), "small-m");
    assert_string_equal(tsr_op_nearest_class(&tsr_op_gemm, "small-m16-f16"), "small-m-f16");
    assert_string_equal(tsr_op_class_shape(&tsr_op_gemm, "small-m16"), "16x4096x4096");
}

static void stale_entries_are_passed_over(void **state) {
    (void)state;
    const tsr_device_info info = *tsr_device_get_info(dev), *i = &info; /* dev is reopened below */
    char hash[17];
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_gemm, hash));
    const char *type = tsr_device_type_str(i->type);
    cJSON *root = tsr_db_new();
    /* Tuned for an older kernel source on this exact device and driver... */
    add_entry(root, "exact", i->platform_name, i->vendor, i->name, i->driver_version, type, "large", 2, 50,
              "0123456789abcdef", "2025-01-01");
    write_db(root, db_path);
    tsr_config_info ci = lookup_fresh("large");
    assert_true(ci.source == TSR_CONFIG_BUILTIN_TUNED || ci.source == TSR_CONFIG_BUILTIN_DEFAULT);
    TH_ASSERT_CONTAINS(ci.origin, "kernel source changed");
    TH_ASSERT_CONTAINS(tsr_last_warning(), "kernel source changed"); /* the user's own entry: a warning too */
    /* ...while a current entry for the same device under another driver is used, and named. */
    add_entry(root, "otherdriver", i->platform_name, i->vendor, i->name, "0.9-old", type, "large", 4, 20, hash, "2026-01-01");
    write_db(root, db_path);
    ci = lookup_fresh("large");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED_OTHER_DRIVER);
    TH_ASSERT_CONTAINS(ci.origin, "kernel source changed");
    /* An entry whose configuration is outside this build's space is passed over too. */
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(root, "devices"), "otherdriver");
    add_entry(root, "exact", i->platform_name, i->vendor, i->name, i->driver_version, type, "large", 3, 50, hash, "2026-01-01");
    write_db(root, db_path);
    ci = lookup_fresh("large");
    assert_true(ci.source == TSR_CONFIG_BUILTIN_TUNED || ci.source == TSR_CONFIG_BUILTIN_DEFAULT);
    TH_ASSERT_CONTAINS(ci.origin, "outside the parameter space");
    /* A parameter the entry's implementation does not read may be missing (add_entry's tiled
     * entries name no SPLIT, gpu-only), one it reads may not: a gpu entry without SPLIT is passed
     * over, and used once it names it. */
    add_entry(root, "exact", i->platform_name, i->vendor, i->name, i->driver_version, type, "large", 4, 50, hash, "2026-01-01");
    cJSON *cfg = cJSON_GetObjectItem(
        cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "devices"), "exact"), "ops"),
                                "gemm"),
            "large"),
        "config");
    assert_non_null(cfg);
    cJSON_ReplaceItemInObject(cfg, "KERNEL", cJSON_CreateNumber(1));
    write_db(root, db_path);
    ci = lookup_fresh("large");
    assert_true(ci.source == TSR_CONFIG_BUILTIN_TUNED || ci.source == TSR_CONFIG_BUILTIN_DEFAULT);
    TH_ASSERT_CONTAINS(ci.origin, "parameter SPLIT missing");
    cJSON_AddNumberToObject(cfg, "SPLIT", 0);
    write_db(root, db_path);
    ci = lookup_fresh("large");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED);
    TH_ASSERT_CONTAINS(ci.config, "KERNEL=1");
    cJSON_Delete(root);
}

/* An entry of the planted op for this device (under `driver`: its own or another one), its
 * configuration given as JSON text. */
static void add_planted_entry(cJSON *root, const char *driver, const char *cls, const char *config, const char *hash) {
    const tsr_device_info *i = tsr_device_get_info(dev);
    cJSON *devs = cJSON_GetObjectItem(root, "devices");
    cJSON *d = cJSON_GetObjectItem(devs, driver);
    if (!d) {
        d = cJSON_AddObjectToObject(devs, driver);
        cJSON_AddStringToObject(d, "platform", i->platform_name);
        cJSON_AddStringToObject(d, "vendor", i->vendor);
        cJSON_AddStringToObject(d, "name", i->name);
        cJSON_AddStringToObject(d, "driver", driver);
        cJSON_AddStringToObject(d, "opencl_c", i->opencl_c_version);
        cJSON_AddStringToObject(d, "type", tsr_device_type_str(i->type));
        cJSON_AddObjectToObject(cJSON_AddObjectToObject(d, "ops"), "planted");
    }
    cJSON *op = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "ops"), "planted");
    cJSON *e = cJSON_CreateObject();
    cJSON *c = cJSON_Parse(config);
    assert_non_null(c);
    cJSON_AddItemToObject(e, "config", c);
    cJSON_AddNumberToObject(e, "gflops", 1);
    cJSON_AddStringToObject(e, "source_hash", hash);
    cJSON_AddStringToObject(e, "date", "2025-01-01");
    if (cJSON_GetObjectItem(op, cls)) cJSON_ReplaceItemInObject(op, cls, e);
    else cJSON_AddItemToObject(op, cls, e);
}

/* The log lines of a tuning run that carry both texts. */
static int log_lines_with(const char *log, const char *a, const char *b) {
    char *text = NULL;
    size_t size = 0;
    TH_ASSERT_OK(tsr_read_file(log, &text, &size));
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) n += strstr(line, a) && strstr(line, b);
    free(text);
    return n;
}

/* Stale entries are never launched, but a re-tune starts from them (after the default); so does
 * the current entry. Entries whose configuration this build cannot read are skipped. */
static void stale_entries_seed_a_retune(void **state) {
    (void)state;
    const char *driver = tsr_device_get_info(dev)->driver_version;
    char hash[17], log[700];
    TH_ASSERT_OK(tsr_source_hash("gemm", hash)); /* the planted op hashes gemm's source */
    snprintf(log, sizeof log, "%s/tune.jsonl", dir);
    cJSON *root = tsr_db_new();
    add_planted_entry(root, driver, "only", "{\"X\": 1, \"MODE\": 0}", "0123456789abcdef");
    add_planted_entry(root, "0.9-old", "only", "{\"X\": 2, \"MODE\": 0, \"RENAMED\": 1}", "0123456789abcdef");
    add_planted_entry(root, "0.8-old", "only", "{\"X\": 2}", "0123456789abcdef");           /* MODE missing */
    add_planted_entry(root, "0.7-old", "only", "{\"X\": 7, \"MODE\": 0}", "0123456789abcdef"); /* not in the space */
    add_planted_entry(root, "0.6-old", "only", "{\"X\": 3, \"MODE\": 0}", "0123456789abcdef"); /* not legal */
    write_db(root, db_path);

    /* Lookups pass every one over and say the class runs untuned because of them. */
    tsr_device_close(dev);
    dev = th_open_device();
    tsr_config cfg;
    tsr_config_info ci;
    TH_ASSERT_OK(tsr_resolve_config(dev, &planted_op, "only", &cfg, &ci));
    assert_int_equal(ci.source, TSR_CONFIG_BUILTIN_DEFAULT);
    assert_int_equal(ci.stale_passed_over, 5);
    assert_int_equal(cfg.values[P_X], 4);
    TH_ASSERT_CONTAINS(ci.origin, "kernel source changed since");
    TH_ASSERT_OK(tsr_resolve_config(dev, &planted_op, "other", &cfg, &ci)); /* never tuned: no stale entry */
    assert_int_equal(ci.source, TSR_CONFIG_BUILTIN_DEFAULT);
    assert_int_equal(ci.stale_passed_over, 0);

    /* A re-tune measures the default, then the one stale configuration that still fits. */
    illegal_builds = 0;
    tsr_tune_options o = {.strategy = TSR_TUNE_CLIMB, .budget_evaluations = 2, .classes = "only", .seed = 11,
                          .dry_run = true, .log_path = log};
    tsr_tune_result r[1];
    size_t n = 0;
    TH_ASSERT_OK(tsr_tune_op(dev, &planted_op, &o, r, 1, &n));
    assert_int_equal(n, 1);
    assert_int_equal(r[0].evaluated, 2);
    assert_int_equal(r[0].stale_seeds, 1);
    assert_int_equal(illegal_builds, 0);
    assert_int_equal(log_lines_with(log, "\"config\": \"X=4 MODE=0\"", "\"seed\": \"default\""), 1);
    assert_int_equal(log_lines_with(log, "\"config\": \"X=1 MODE=0\"", "\"seed\": \"stale entry\""), 1);
    assert_int_equal(log_lines_with(log, "\"seed\": \"stale entry\"", "\"class\": \"only\""), 1);

    /* The current entry starts a re-tune too, before the stale ones; a stale entry of the same
     * configuration adds nothing. */
    unlink(log);
    add_planted_entry(root, driver, "only", "{\"X\": 2, \"MODE\": 0}", hash);
    add_planted_entry(root, "0.5-old", "only", "{\"X\": 1, \"MODE\": 0}", "fedcba9876543210");
    add_planted_entry(root, "0.4-old", "only", "{\"X\": 2, \"MODE\": 0}", "fedcba9876543210");
    write_db(root, db_path);
    o.budget_evaluations = 3;
    TH_ASSERT_OK(tsr_tune_op(dev, &planted_op, &o, r, 1, &n));
    assert_int_equal(r[0].evaluated, 3);
    assert_int_equal(r[0].stale_seeds, 1);
    assert_int_equal(log_lines_with(log, "\"config\": \"X=2 MODE=0\"", "\"seed\": \"current entry\""), 1);
    assert_int_equal(log_lines_with(log, "\"config\": \"X=1 MODE=0\"", "\"seed\": \"stale entry\""), 1);
    assert_int_equal(log_lines_with(log, "\"seed\": \"stale entry\"", "\"class\": \"only\""), 1);
    assert_int_equal(illegal_builds, 0);
    /* The lookup takes the current entry; the stale ones stay starts. */
    tsr_device_close(dev);
    dev = th_open_device();
    TH_ASSERT_OK(tsr_resolve_config(dev, &planted_op, "only", &cfg, &ci));
    assert_int_equal(ci.source, TSR_CONFIG_TUNED);
    assert_int_equal(cfg.values[P_X], 2);
    cJSON_Delete(root);
}

/* A re-tune of a class starts from what the class runs now: its own entries, else those it falls
 * back to (GEMM: batched -> small; a 16-bit class -> its fp32 class), current ones first. */
static void seeds_follow_the_class_chain(void **state) {
    (void)state;
    const tsr_device_info *i = tsr_device_get_info(dev);
    const char *type = tsr_device_type_str(i->type);
    char hash[17];
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_gemm, hash));
    cJSON *root = tsr_db_new();
    add_entry(root, "exact", i->platform_name, i->vendor, i->name, i->driver_version, type, "small", 2, 10, hash,
              "2026-01-01");
    add_entry(root, "exact", i->platform_name, i->vendor, i->name, i->driver_version, type, "batched", 4, 10,
              "0123456789abcdef", "2025-01-01");
    add_entry(root, "exact", i->platform_name, i->vendor, i->name, i->driver_version, type, "large", 4, 10,
              "0123456789abcdef", "2025-01-01");
    setenv("TSR_BUILTIN_TUNING", "off", 1); /* this machine's built-in entries aside */
    tsr_tuning_seed seeds[8];
    int mwi = tsr_param_index(&tsr_op_gemm, "MWI");
    int n = tsr_tuning_seeds(dev, &tsr_op_gemm, root, "batched", hash, seeds, 8);
    assert_int_equal(n, 2);
    assert_false(seeds[0].stale); /* small's current entry, which batched runs now */
    assert_int_equal(seeds[0].config.values[mwi], 2);
    assert_true(seeds[1].stale);
    assert_int_equal(seeds[1].config.values[mwi], 4);
    n = tsr_tuning_seeds(dev, &tsr_op_gemm, root, "large-f16", hash, seeds, 8);
    assert_int_equal(n, 1); /* large's stale entry */
    assert_true(seeds[0].stale);
    assert_int_equal(tsr_tuning_seeds(dev, &tsr_op_gemm, root, "batched", hash, seeds, 1), 1); /* at most max */
    assert_int_equal(tsr_tuning_seeds(dev, &tsr_op_gemm, NULL, "batched", hash, seeds, 8), 0);
    unsetenv("TSR_BUILTIN_TUNING");
    cJSON_Delete(root);
}

static void damaged_files(void **state) {
    (void)state;
    static const struct { const char *text, *reason; } cases[] = {
        {"{\"format\": \"tessera-tuning-db\", \"schema_version\": 1, \"devi", "not valid JSON"},
        {"{\"hello\": 1}", "not a tessera tuning database"},
        {"{\"format\": \"tessera-tuning-db\", \"schema_version\": 99, \"devices\": {}}", "schema version 99"},
        {"{\"format\": \"tessera-tuning-db\", \"schema_version\": 1, \"devices\": {\"d\": {\"platform\": 1}}}", "lacks"},
        {"{\"format\": \"tessera-tuning-db\", \"schema_version\": 1, \"devices\": {}} trailing", "not valid JSON"},
        {"", "not valid JSON"},
        {"{\"format\": \"tessera-tuning-db\", \"schema_version\": 1.5, \"devices\": {}}", "schema version 1.5"},
        {"{\"format\": \"tessera-tuning-db\", \"schema_version\": 1, \"devices\": {}, \"checksum\": \"0123456789abcdef\"}",
         "checksum mismatch"},
        {"{\"format\": \"tessera-tuning-db\", \"schema_version\": 1, \"devices\": {}, \"checksum\": 5}", "checksum"},
        {"{\"format\": \"tessera-tuning-db\", \"schema_version\": 1, \"devices\": {}, \"note\": \"a\\u0001b\"}",
         "control character"},
        {"{\"format\": \"tessera-tuning-db\", \"schema_version\": 1, \"devices\": {}, \"note\": \"a\x01b\"}",
         "control character"},
        {"{\"format\": \"tessera-tuning-db\", \"schema_version\": 1, \"devices\": {}, \"note\": \"caf\xc3\"}",
         "invalid UTF-8"},
        {"{\"format\": \"tessera-tuning-db\", \"schema_version\": 1, \"devices\": {}, \"n\xed\xa0\x80\": 1}",
         "invalid UTF-8"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        th_write_file(db_path, cases[c].text, strlen(cases[c].text));
        /* Lookups ignore it and say why. */
        tsr_device_close(dev);
        dev = th_open_device();
        tsr_config_info ci;
        TH_ASSERT_OK(tsr_config_lookup(dev, "gemm", "large", &ci));
        TH_ASSERT_CONTAINS(ci.origin, "unusable");
        TH_ASSERT_CONTAINS(ci.origin, cases[c].reason);
        /* A tuner writing to it keeps the original aside, byte for byte. */
        tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 1, .classes = "only"};
        TH_ASSERT_OK(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL));
        TH_ASSERT_CONTAINS(tsr_last_warning(), "moved it to");
        DIR *d = opendir(dir);
        struct dirent *e;
        int asides = 0;
        while ((e = readdir(d)) != NULL) {
            if (!strstr(e->d_name, ".damaged-")) continue;
            ++asides;
            char path[900], *data = NULL;
            size_t size = 0;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            TH_ASSERT_OK(tsr_read_file(path, &data, &size));
            assert_int_equal(size, strlen(cases[c].text));
            assert_memory_equal(data, cases[c].text, size);
            free(data);
            unlink(path);
        }
        closedir(d);
        assert_int_equal(asides, 1);
        cJSON_Delete(load(db_path)); /* the new file is valid */
        unlink(db_path);
    }
}

static void import_export_merge(void **state) {
    (void)state;
    char hash[17];
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_gemm, hash));
    cJSON *a = tsr_db_new(), *b = tsr_db_new();
    add_entry(a, "dev1", "P", "V", "one", "1", "GPU", "large", 2, 10, hash, "2026-01-01");
    add_entry(a, "dev1", "P", "V", "one", "1", "GPU", "small", 2, 50, hash, "2026-01-01");
    add_entry(b, "dev1", "P", "V", "one", "1", "GPU", "large", 4, 20, hash, "2026-01-02");  /* faster: wins */
    add_entry(b, "dev1", "P", "V", "one", "1", "GPU", "small", 4, 5, hash, "2026-01-02");   /* slower: loses */
    add_entry(b, "dev2", "P", "V", "two", "1", "GPU", "large", 8, 1, hash, "2026-01-02");   /* new device */
    write_db(a, db_path);
    char other[700], exported[700];
    snprintf(other, sizeof other, "%s/other.json", dir);
    snprintf(exported, sizeof exported, "%s/exported.json", dir);
    write_db(b, other);
    size_t merged = 0;
    TH_ASSERT_OK(tsr_tuning_db_import(NULL, other, &merged));
    assert_int_equal(merged, 2);
    TH_ASSERT_OK(tsr_tuning_db_export(NULL, exported));
    cJSON *m = load(exported);
    cJSON *devs = cJSON_GetObjectItem(m, "devices");
    assert_int_equal(cJSON_GetArraySize(devs), 2);
    cJSON *g1 = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(devs, "dev1"), "ops"), "gemm");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(g1, "large"), "config"), "MWI")->valueint, 4);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(g1, "small"), "config"), "MWI")->valueint, 2);
    cJSON_Delete(m);
    /* An entry for a newer kernel source replaces an older one even when slower. */
    cJSON *c = tsr_db_new();
    add_entry(c, "dev1", "P", "V", "one", "1", "GPU", "small", 6, 1, "fedcba9876543210", "2027-01-01");
    write_db(c, other);
    TH_ASSERT_OK(tsr_tuning_db_import(NULL, other, &merged));
    assert_int_equal(merged, 1);
    /* A damaged import file is refused and changes nothing. */
    th_write_file(other, "{", 1);
    TH_ASSERT_STATUS(tsr_tuning_db_import(NULL, other, &merged), TSR_ERR_CORRUPT);
    cJSON *after = load(db_path);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(after, "devices")), 2);
    cJSON_Delete(after);
    snprintf(other, sizeof other, "%s/missing.json", dir);
    TH_ASSERT_STATUS(tsr_tuning_db_import(NULL, other, &merged), TSR_ERR_NOT_FOUND);
    /* An empty name is refused, not taken as the default database. */
    TH_ASSERT_STATUS(tsr_tuning_db_import("", exported, &merged), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_tuning_db_import(NULL, "", &merged), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_tuning_db_export("", exported), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_tuning_db_export(NULL, ""), TSR_ERR_INVALID_ARG);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(c);
}

/* Child process: add `count` entries named PREFIX-i, one locked update each. */
typedef struct child_ctx {
    const char *prefix;
    int i;
} child_ctx;

static tsr_status child_update(cJSON *root, void *vctx) {
    child_ctx *c = vctx;
    char key[64];
    snprintf(key, sizeof key, "%s-%d", c->prefix, c->i);
    tsr_device_info info;
    memset(&info, 0, sizeof info);
    snprintf(info.platform_name, sizeof info.platform_name, "P");
    snprintf(info.vendor, sizeof info.vendor, "V");
    snprintf(info.name, sizeof info.name, "%s", key);
    info.type = TSR_DEVICE_GPU;
    cJSON *d = tsr_db_device_node(root, &info);
    usleep(2000); /* widen the read-modify-write window */
    return d ? TSR_SUCCESS : TSR_ERR_OUT_OF_MEMORY;
}

static int child_writes(const char *path, const char *prefix, int count) {
    for (int i = 0; i < count; ++i) {
        child_ctx c = {prefix, i};
        if (tsr_db_update(path, child_update, &c) != TSR_SUCCESS) return 1;
    }
    return 0;
}

static void concurrent_writers_lose_nothing(void **state) {
    (void)state;
    pid_t pids[3];
    const char *prefixes[3] = {"alpha", "beta", "gamma"};
    for (int i = 0; i < 3; ++i) {
        char *argv[] = {(char *)"test_tuner", (char *)"--child-writes", db_path, (char *)prefixes[i], NULL};
        assert_int_equal(posix_spawn(&pids[i], "/proc/self/exe", NULL, NULL, argv, environ), 0);
    }
    for (int i = 0; i < 3; ++i) {
        int ws = 0;
        assert_int_equal(waitpid(pids[i], &ws, 0), pids[i]);
        assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    }
    cJSON *root = load(db_path);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "devices")), 3 * 25);
    cJSON_Delete(root);
}

static void builtin_database_is_valid(void **state) {
    (void)state;
    cJSON *root = cJSON_Parse(tsr_builtin_tuning_json);
    assert_non_null(root);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(root, "checksum"))); /* sealed: checked like user files */
    char path[700];
    snprintf(path, sizeof path, "%s/builtin.json", dir);
    write_db_as_is(root, path); /* its own checksum, not a fresh one */
    cJSON_Delete(root);
    cJSON_Delete(load(path)); /* passes the same validation as user files */
}

/* The tuned entries shipped for the device under test were tuned against today's kernels: an
 * edit to a kernel source (or to a file it includes) stales them, and must come with a re-tune
 * (`tessera tune --op OP --db F`, then `tessera tune --import F --db data/builtin_tuning.json`).
 * A device with no shipped entries has nothing to check. */
static void builtin_entries_for_this_device_are_current(void **state) {
    (void)state;
    int classes = 0;
    for (const tsr_op *const *op = tsr_ops; *op; ++op)
        for (const char *const *cls = tsr_op_class_list(*op); *cls; ++cls, ++classes) {
            tsr_config_info ci;
            TH_ASSERT_OK(tsr_config_lookup(dev, (*op)->name, *cls, &ci));
            if (strstr(ci.origin, "kernel source changed"))
                fail_msg("built-in entry %s/%s is stale: %s", (*op)->name, *cls, ci.origin);
        }
    assert_true(classes >= 4);
}


/* ---- integrity: checksums, clean strings ---- */

static tsr_status merge_tree(cJSON *root, void *ctx) {
    tsr_db_merge(root, ctx);
    return TSR_SUCCESS;
}

/* A database for this device written by tessera (so with its checksum), as text. */
static char *sealed_db_text(double gflops) {
    const tsr_device_info *i = tsr_device_get_info(dev);
    char hash[17];
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_gemm, hash));
    cJSON *root = tsr_db_new();
    add_entry(root, "exact", i->platform_name, i->vendor, i->name, i->driver_version, tsr_device_type_str(i->type),
              "large", 2, gflops, hash, "2026-01-01");
    unlink(db_path);
    TH_ASSERT_OK(tsr_db_update(db_path, merge_tree, root));
    cJSON_Delete(root);
    char *text = NULL;
    size_t size = 0;
    TH_ASSERT_OK(tsr_read_file(db_path, &text, &size));
    TH_ASSERT_CONTAINS(text, "\"checksum\"");
    return text;
}

static int warnings_seen;
static char last_seen[4096];
static void count_warning(const char *message, void *user) {
    (void)user;
    ++warnings_seen;
    snprintf(last_seen, sizeof last_seen, "%s", message);
}

static void checksum_guards_entries(void **state) {
    (void)state;
    char name[TSR_INFO_STR]; /* a copy: dev is reopened below */
    snprintf(name, sizeof name, "%s", tsr_device_get_info(dev)->name);
    char *text = sealed_db_text(12.5);
    tsr_config_info ci = lookup_fresh("large");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED); /* sealed and intact */
    assert_true(ci.tuned_gflops == 12.5);
    /* Each change keeps the JSON valid and the schema intact: only the checksum tells. */
    char *flips[2] = {strdup(text), strdup(text)};
    char *digit = strstr(flips[0], "12.5");
    assert_non_null(digit);
    digit[1] = '3'; /* 13.5 GFLOP/s */
    char quoted[300];
    snprintf(quoted, sizeof quoted, "\"name\":\t\"%s\"", name);
    char *at = strstr(flips[1], quoted);
    assert_non_null(at);
    at[strlen(quoted) - 2] ^= 0x01; /* one bit of the device name's last character */
    tsr_set_warning_handler(count_warning, NULL);
    for (int f = 0; f < 2; ++f) {
        th_write_file(db_path, flips[f], strlen(flips[f]));
        warnings_seen = 0;
        ci = lookup_fresh("large");
        assert_int_not_equal(ci.source, TSR_CONFIG_TUNED); /* the entry is not used */
        TH_ASSERT_CONTAINS(ci.origin, "checksum mismatch");
        TH_ASSERT_CONTAINS(tsr_last_warning(), "checksum mismatch");
        assert_int_equal(warnings_seen, 1); /* the handler sees it too */
        TH_ASSERT_CONTAINS(last_seen, "checksum mismatch");
        /* A writer does not overwrite it silently: it is moved aside, and the new file is sealed. */
        tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 1, .classes = "only"};
        TH_ASSERT_OK(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL));
        TH_ASSERT_CONTAINS(tsr_last_warning(), "moved it to");
        cJSON_Delete(load(db_path));
        free(flips[f]);
    }
    tsr_set_warning_handler(NULL, NULL);
    /* Exports are sealed too, and an intact sealed file still loads. */
    char exported[700];
    snprintf(exported, sizeof exported, "%s/exported.json", dir);
    TH_ASSERT_OK(tsr_tuning_db_export(NULL, exported));
    cJSON *e = load(exported);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "checksum")));
    cJSON_Delete(e);
    th_write_file(db_path, text, strlen(text));
    ci = lookup_fresh("large");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED);
    free(text);
}

/* Two bit flips used to defeat the checksum: one in the key "checksum" (the file read as one from
 * before checksums), one in a rate. Every file tessera writes carries its checksum, so a file
 * without one is damaged; the top level holds only its four keys; and every number of an entry is
 * finite and in range (1e999 reads as infinity). */
static void checksum_cannot_be_flipped_away(void **state) {
    (void)state;
    char *text = sealed_db_text(12.5);
    static const struct {
        const char *from, *to, *reason;
    } edits[] = {
        {"\"checksum\"", "\"checksuo\"", "unknown top-level key \"checksuo\""}, /* one flip: the key */
        {"\"checksum\"", "\"chucksum\"", "unknown top-level key"},
        {"\"format\"", "\"formaT\"", "not a tessera tuning database"},
        {"\"devices\"", "\"devicas\"", "\"devices\" is not an object"},
    };
    for (size_t e = 0; e < sizeof edits / sizeof edits[0]; ++e) {
        for (int digit = 0; digit < 2; ++digit) { /* the key alone, and with a second flip in the rate */
            char *t = strdup(text);
            char *at = strstr(t, edits[e].from);
            assert_non_null(at);
            memcpy(at, edits[e].to, strlen(edits[e].to));
            if (digit) strstr(t, "12.5")[1] = '3'; /* 13.5 GFLOP/s */
            th_write_file(db_path, t, strlen(t));
            tsr_config_info ci = lookup_fresh("large");
            assert_int_not_equal(ci.source, TSR_CONFIG_TUNED);
            TH_ASSERT_CONTAINS(ci.origin, edits[e].reason);
            cJSON *root = (cJSON *)1;
            TH_ASSERT_STATUS(tsr_db_load(db_path, &root), TSR_ERR_CORRUPT);
            free(t);
        }
    }
    /* No checksum at all (the line lost, or a hand-made file): damaged, not "from before checksums". */
    cJSON *root = cJSON_Parse(text);
    cJSON_DeleteItemFromObject(root, "checksum");
    write_db_as_is(root, db_path);
    tsr_config_info ci = lookup_fresh("large");
    assert_int_not_equal(ci.source, TSR_CONFIG_TUNED);
    TH_ASSERT_CONTAINS(ci.origin, "no \"checksum\"");
    /* A key of another program at the top level, sealed or not. */
    cJSON_AddStringToObject(root, "comment", "mine");
    TH_ASSERT_OK(tsr_db_seal(root));
    write_db_as_is(root, db_path);
    ci = lookup_fresh("large");
    assert_int_not_equal(ci.source, TSR_CONFIG_TUNED);
    TH_ASSERT_CONTAINS(ci.origin, "unknown top-level key \"comment\"");
    cJSON_Delete(root);
    /* Numbers out of range, each in a file sealed over it (a checksum is computable by anyone). */
    static const struct {
        const char *field, *value, *reason;
    } numbers[] = {
        {"gflops", "1e999", "\"gflops\" is inf"},
        {"gflops", "-1e999", "\"gflops\" is -inf"},
        {"gflops", "-2", "\"gflops\" is -2"},
        {"gflops", "1e13", "\"gflops\" is 1e+13"},
        {"gflops_q25", "1e999", "\"gflops_q25\" is inf"},
        {"spread", "-1", "\"spread\" is -1"},
        {"evaluations", "1.5", "\"evaluations\" is 1.5"},
        {"MWI", "1e999", "\"MWI\" is inf"},
        {"MWI", "4294967296", "\"MWI\" is 4.29497e+09"},
        {"float_width", "1e999", "\"float_width\" is inf"},
        {"runner", "1e999", "a runner-up: \"gflops\" is inf"},
    };
    for (size_t n = 0; n < sizeof numbers / sizeof numbers[0]; ++n) {
        root = cJSON_Parse(text);
        cJSON *node = cJSON_GetObjectItem(root, "devices")->child;
        cJSON *entry = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(node, "ops"), "gemm"), "large");
        cJSON *at = strcmp(numbers[n].field, "MWI") == 0 ? cJSON_GetObjectItem(entry, "config")
                    : strcmp(numbers[n].field, "float_width") == 0 ? node : entry;
        const char *key = numbers[n].field;
        if (strcmp(key, "runner") == 0) {
            cJSON *ru = cJSON_CreateObject();
            cJSON_AddItemToObject(ru, "config", cJSON_Duplicate(cJSON_GetObjectItem(entry, "config"), true));
            cJSON_AddItemToArray(cJSON_AddArrayToObject(entry, "runners_up"), ru);
            at = ru, key = "gflops";
        }
        cJSON_DeleteItemFromObject(at, key);
        cJSON_AddNumberToObject(at, key, 424242.0); /* a placeholder the text form replaces */
        char *t = cJSON_Print(root);
        cJSON_Delete(root);
        char *mark = strstr(t, "424242");
        assert_non_null(mark);
        char edited[65536];
        snprintf(edited, sizeof edited, "%.*s%s%s", (int)(mark - t), t, numbers[n].value, mark + 6);
        free(t);
        /* seal the edited text for real: parse it (cJSON reads 1e999 as inf) and stamp the checksum
         * that text's tree gives, so only the range check can refuse it */
        cJSON *edited_root = cJSON_Parse(edited);
        assert_non_null(edited_root);
        char *sum_text = cJSON_PrintUnformatted(cJSON_GetObjectItem(edited_root, "devices"));
        char sum[17];
        snprintf(sum, sizeof sum, "%016llx", (unsigned long long)XXH3_64bits(sum_text, strlen(sum_text)));
        free(sum_text);
        cJSON_Delete(edited_root);
        char *old_sum = strstr(edited, "\"checksum\":");
        assert_non_null(old_sum);
        old_sum = strchr(old_sum + 11, '"');
        memcpy(old_sum + 1, sum, 16);
        th_write_file(db_path, edited, strlen(edited));
        ci = lookup_fresh("large");
        assert_int_not_equal(ci.source, TSR_CONFIG_TUNED);
        TH_ASSERT_CONTAINS(ci.origin, numbers[n].reason);
    }
    /* What tessera writes stays valid, and so does the shipped database (builtin_database_is_valid). */
    th_write_file(db_path, text, strlen(text));
    ci = lookup_fresh("large");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED);
    assert_string_equal(tsr_last_warning(), "");
    free(text);
}

/* A dangling --db link is written through, but tessera creates no directory for its target (it
 * used to create the target's parents anywhere the link pointed); a plain path's parents are
 * created as before. */
static void dangling_link_creates_no_directories(void **state) {
    (void)state;
    char link_path[800], nowhere[800], plain[800];
    snprintf(nowhere, sizeof nowhere, "%s/not/yet/there", dir);
    snprintf(link_path, sizeof link_path, "%s/dangling.json", dir);
    char target[900];
    snprintf(target, sizeof target, "%s/db.json", nowhere);
    assert_int_equal(symlink(target, link_path), 0);
    cJSON *root = tsr_db_new();
    add_entry(root, "k", "P", "V", "one", "1", "GPU", "large", 2, 10, "0123456789abcdef", "2026-01-01");
    TH_ASSERT_STATUS(tsr_db_update(link_path, merge_tree, root), TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "symbolic link");
    TH_ASSERT_CONTAINS(tsr_last_error(), "does not exist");
    TH_ASSERT_STATUS(tsr_db_check_writable(link_path), TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "creates no directories");
    char top[800];
    snprintf(top, sizeof top, "%s/not", dir);
    assert_int_not_equal(access(top, F_OK), 0); /* nothing created */
    /* The tuner refuses it before measuring. */
    tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 1, .classes = "only", .db_path = link_path};
    planted_setups = 0;
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL), TSR_ERR_IO);
    assert_int_equal(planted_setups, 0);
    assert_int_not_equal(access(top, F_OK), 0);
    /* Once its directory exists, the link is written through. */
    TH_ASSERT_OK(tsr_make_dirs(nowhere));
    TH_ASSERT_OK(tsr_db_update(link_path, merge_tree, root));
    cJSON_Delete(load(target));
    struct stat sb;
    assert_int_equal(lstat(link_path, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    /* A plain path still gets its directories. */
    snprintf(plain, sizeof plain, "%s/made/for/it/db.json", dir);
    TH_ASSERT_OK(tsr_db_update(plain, merge_tree, root));
    cJSON_Delete(load(plain));
    cJSON_Delete(root);
}

/* Damaged files moved aside in the same second never replace each other (nor anything else). */
static void asides_are_never_replaced(void **state) {
    (void)state;
    long now = (long)time(NULL);
    char keep[3][800];
    for (int i = 0; i < 3; ++i) { /* whatever second the moves happen in, its name is taken */
        snprintf(keep[i], sizeof keep[i], "%s.damaged-%ld", db_path, now + i);
        th_write_file(keep[i], "keep", 4);
    }
    static const char *const damaged[2] = {"{\"first", "{\"second"};
    for (int d = 0; d < 2; ++d) {
        th_write_file(db_path, damaged[d], strlen(damaged[d]));
        tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 1, .classes = "only"};
        TH_ASSERT_OK(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL));
        TH_ASSERT_CONTAINS(tsr_last_warning(), "moved it to");
    }
    int found[2] = {0, 0}, kept = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strstr(e->d_name, ".damaged-")) continue;
        char path[900], *data = NULL;
        size_t size = 0;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        TH_ASSERT_OK(tsr_read_file(path, &data, &size));
        if (strcmp(data, "keep") == 0) ++kept;
        for (int k = 0; k < 2; ++k) found[k] += strcmp(data, damaged[k]) == 0;
        free(data);
    }
    closedir(d);
    assert_int_equal(kept, 3);
    assert_int_equal(found[0], 1);
    assert_int_equal(found[1], 1);
}

/* A symlinked database is written through to its target; temp files of a killed writer go. */
static void updates_follow_links_and_clean_temps(void **state) {
    (void)state;
    char real_dir[700], target[800], link_path[800], stale[900], other[900];
    snprintf(real_dir, sizeof real_dir, "%s/real", dir);
    TH_ASSERT_OK(tsr_make_dirs(real_dir));
    snprintf(target, sizeof target, "%s/db.json", real_dir);
    snprintf(link_path, sizeof link_path, "%s/link.json", dir);
    assert_int_equal(symlink("real/db.json", link_path), 0); /* relative, and dangling until written */
    snprintf(stale, sizeof stale, "%s.tmp.999999.3", target);
    snprintf(other, sizeof other, "%s.tmp.notours", target);
    th_write_file(stale, "{\"torn", 6);
    th_write_file(other, "x", 1);
    cJSON *root = tsr_db_new();
    add_entry(root, "k", "P", "V", "one", "1", "GPU", "large", 2, 10, "0123456789abcdef", "2026-01-01");
    TH_ASSERT_OK(tsr_db_update(link_path, merge_tree, root));
    TH_ASSERT_OK(tsr_db_update(link_path, merge_tree, root)); /* the second through an existing target */
    cJSON_Delete(root);
    struct stat sb;
    assert_int_equal(lstat(link_path, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    root = load(target);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "devices")), 1);
    cJSON_Delete(root);
    assert_int_not_equal(access(stale, F_OK), 0);
    assert_int_equal(access(other, F_OK), 0); /* not tessera's name pattern: left alone */
    TH_ASSERT_STATUS(tsr_db_update("", merge_tree, NULL), TSR_ERR_INVALID_ARG);
}

/* No writable destination: the tuner says so before it measures anything. */
static void tune_checks_destination_first(void **state) {
    (void)state;
    char file[700], bad[800];
    snprintf(file, sizeof file, "%s/a-file", dir);
    th_write_file(file, "x", 1);
    snprintf(bad, sizeof bad, "%s/sub/tuning.json", file); /* a parent is a regular file (root ignores modes) */
    tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 1, .classes = "only", .db_path = bad};
    planted_setups = 0;
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL), TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "not a directory");
    o.db_path = NULL;
    setenv("TSR_TUNING_DB", bad, 1);
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL), TSR_ERR_IO);
    snprintf(bad, sizeof bad, "%s", dir); /* a directory where the file should be */
    o.db_path = bad;
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL), TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "not a regular file");
    o.db_path = "";
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL), TSR_ERR_INVALID_ARG);
    /* No path at all. */
    o.db_path = NULL;
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    unsetenv("TSR_TUNING_DB");
    unsetenv("XDG_DATA_HOME");
    unsetenv("HOME");
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL), TSR_ERR_NOT_FOUND);
    if (home) setenv("HOME", home, 1);
    free(home);
    setenv("TSR_TUNING_DB", db_path, 1);
    assert_int_equal(planted_setups, 0);
    /* A dry run needs no destination. */
    o.dry_run = true;
    o.db_path = file;
    TH_ASSERT_OK(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL));
    assert_int_equal(planted_setups, 1);
    /* A log that is a FIFO nobody reads: refused at once (fopen used to wait for a reader forever),
     * before any candidate is measured. */
    char fifo[700];
    snprintf(fifo, sizeof fifo, "%s/log.fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    o.log_path = fifo;
    planted_setups = 0;
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL), TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "not a regular file");
    assert_int_equal(planted_setups, 0);
    o.log_path = dir; /* a directory */
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL), TSR_ERR_IO);
    unlink(fifo);
}

/* Class lists are taken whole or refused: never cut at 255 characters or 16 classes. */
static void class_lists_are_not_truncated(void **state) {
    (void)state;
    char many[400] = "";
    for (int i = 0; i < 70; ++i) strcat(many, i ? ",only" : "only"); /* 349 characters */
    tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 1, .classes = many, .dry_run = true};
    planted_setups = 0;
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "longer than");
    o.classes = "only,other,only";
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "twice");
    o.classes = ",,,";
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, NULL, 0, NULL), TSR_ERR_INVALID_ARG);
    assert_int_equal(planted_setups, 0);
    /* At most 32 classes a run: an op with 33 is refused by count when they are named (under the
     * list's length limit), and its default list is refused too, not tuned on its first 32 */
    static char crowded_names[33][8];
    static const char *crowded_classes[34], *crowded_shapes[33];
    char named[256] = "";
    for (int i = 0; i < 33; ++i) {
        snprintf(crowded_names[i], sizeof crowded_names[i], "c%d", i);
        crowded_classes[i] = crowded_names[i];
        crowded_shapes[i] = "16384";
        snprintf(named + strlen(named), sizeof named - strlen(named), "%s%s", i ? "," : "", crowded_names[i]);
    }
    tsr_op crowded = planted_op;
    crowded.name = "crowded";
    crowded.classes = crowded_classes;
    crowded.class_shapes = crowded_shapes;
    o.classes = named;
    TH_ASSERT_STATUS(tsr_tune_op(dev, &crowded, &o, NULL, 0, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "classes: more than 32");
    o.classes = NULL;
    TH_ASSERT_STATUS(tsr_tune_op(dev, &crowded, &o, NULL, 0, NULL), TSR_ERR_UNSUPPORTED);
    TH_ASSERT_CONTAINS(tsr_last_error(), "crowded has more than 32 problem classes");
    assert_int_equal(planted_setups, 0);
}

/* Every op's smaller problems (for slow devices) set up, stay in their class (16-bit twins too) and
 * do less work than the class's own; one that falls in another class is refused, naming both. */
static void smaller_problems_stay_in_their_class(void **state) {
    (void)state;
    for (const tsr_op *const *op = tsr_ops; *op; ++op)
        for (const char *const *c = tsr_op_class_list(*op); *c; ++c) {
            int nsteps = tsr_op_class_shape_steps(*op, *c);
            double work_before = INFINITY;
            for (int step = 1; step <= nsteps; ++step) {
                void *fx = NULL;
                tsr_status st = tsr_op_tuning_setup_step(*op, dev, *c, step, &fx);
                if (st != TSR_SUCCESS)
                    fail_msg("%s %s step %d (%s): %s", (*op)->name, *c, step, tsr_op_class_shape_step(*op, *c, step),
                             tsr_last_error());
                assert_non_null((*op)->fixture.problem_class);
                assert_string_equal((*op)->fixture.problem_class(fx), *c);
                double work = tsr_op_tuning_work(*op, fx);
                assert_true(work > 0 && work < work_before); /* largest first */
                work_before = work;
                tsr_op_tuning_free(*op, fx);
            }
            assert_null(tsr_op_class_shape_step(*op, *c, nsteps + 1));
        }
    /* ...and so do their second problems (conv2d's every class). The 16-bit twins' are their listed
     * class's with the storage token (one set up: each setup computes a batch-8 reference on the host). */
    int checked = 0;
    for (const tsr_op *const *op = tsr_ops; *op; ++op) {
        const char *const *list = tsr_op_class_list(*op);
        int nlisted = 0;
        while ((*op)->classes[nlisted]) ++nlisted;
        for (int i = 0; list[i]; ++i) {
            const char *shape = tsr_op_class_check_shape(*op, list[i]);
            if (!shape) continue;
            if (i >= nlisted) {
                const char *own = tsr_op_class_check_shape(*op, list[i % nlisted]);
                assert_non_null(own);
                assert_true(strncmp(shape, own, strlen(own)) == 0 && shape[strlen(own)] == ' ');
                if (strcmp(list[i], "1x1-bf16") != 0) continue;
            }
            void *fx = NULL;
            if (tsr_op_tuning_setup_check(*op, dev, list[i], &fx) != TSR_SUCCESS)
                fail_msg("%s %s second problem (%s): %s", (*op)->name, list[i], shape, tsr_last_error());
            assert_string_equal((*op)->fixture.problem_class(fx), list[i]);
            tsr_op_tuning_free(*op, fx);
            ++checked;
        }
    }
    assert_true(checked >= 17 + 1 + 7); /* conv2d's 17 classes, and one twin; GEMM's 7 */
    assert_string_equal(tsr_op_class_check_shape(&tsr_op_conv, "1x1-bf16"), "8x256x56x56 k64 1x1 +bias bf16");
    /* the big classes have them (GEMM `large` ran 30 s a run on llvmpipe), with their storage token */
    assert_int_equal(tsr_op_class_shape_steps(&tsr_op_gemm, "large"), 3);
    assert_string_equal(tsr_op_class_shape_step(&tsr_op_gemm, "large-f16", 1), "1024x1024x1024 f16/f32");
    assert_string_equal(tsr_op_class_shape_step(&tsr_op_gemm, "large", 0), "2048x2048x2048");
    void *fx = (void *)1;
    TH_ASSERT_STATUS(tsr_op_tuning_setup_step(&sized_op, dev, "tiny", 1, &fx), TSR_ERR_UNSUPPORTED);
    TH_ASSERT_CONTAINS(tsr_last_error(), "'8192' of class 'tiny' is of class 'big'");
    assert_null(fx);
    TH_ASSERT_STATUS(tsr_op_tuning_setup_step(&sized_op, dev, "tiny", 2, &fx), TSR_ERR_INVALID_ARG);
}

/* A class whose own problem would eat its budget share is measured on a smaller one, said in its
 * result (and kept for both passes); with budget to spare it keeps its own. Workers compiling ahead
 * set the same smaller problem up. (A run of its own problem is 262144 chains of 256 dependent
 * multiply-adds (the default X=4; 0.2-0.8 s on a loaded 2-core Zen 5): well over a tenth of a
 * 0.1 s share on any CPU, far under a tenth of 600 s.) */
static void slow_classes_tune_a_smaller_problem(void **state) {
    (void)state;
    char log[700];
    snprintf(log, sizeof log, "%s/smaller.jsonl", dir);
    setenv("TSR_TUNE_AHEAD", "1", 1);
    tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_seconds = 0.1, .classes = "big", .seed = 3,
                          .dry_run = true, .log_path = log};
    tsr_tune_result r[1];
    size_t n = 0;
    TH_ASSERT_OK(tsr_tune_op(dev, &sized_op, &o, r, 1, &n));
    unsetenv("TSR_TUNE_AHEAD");
    assert_int_equal(n, 1);
    assert_string_equal(r[0].reduced_from, "262144");
    if (strcmp(r[0].problem, "32768") != 0 && strcmp(r[0].problem, "4096") != 0)
        fail_msg("measured on '%s'", r[0].problem);
    assert_true(r[0].evaluated >= 1);
    assert_true(r[0].best_gflops > 0);
    char *text = NULL;
    size_t length = 0;
    TH_ASSERT_OK(tsr_read_file(log, &text, &length));
    TH_ASSERT_CONTAINS(text, "\"outcome\": \"smaller problem\"");
    TH_ASSERT_CONTAINS(text, "\"own_problem\": \"262144\"");
    free(text);
    unlink(log);
    tsr_tune_options roomy = {.strategy = TSR_TUNE_RANDOM, .budget_seconds = 600, .budget_evaluations = 1,
                              .classes = "big", .seed = 3, .dry_run = true, .log_path = log};
    TH_ASSERT_OK(tsr_tune_op(dev, &sized_op, &roomy, r, 1, &n));
    assert_string_equal(r[0].reduced_from, "");
    assert_string_equal(r[0].problem, "262144");
}

/* A pick that beats what the device ran before (here the default, X=4) on the class's problem is run
 * beside it on the class's second problem before it is saved: kept where it gains there too, not
 * where it loses there (4x slower) or gives a wrong result there; the result and the database say
 * which. A class without a second problem, or whose second problem is of another class, is not
 * checked. */
static void picks_are_checked_on_a_second_problem(void **state) {
    (void)state;
    char log[700];
    snprintf(log, sizeof log, "%s/second.jsonl", dir);
    tsr_tune_options o = {.strategy = TSR_TUNE_EXHAUSTIVE, .budget_seconds = 120, .seed = 5, .log_path = log};
    tsr_tune_result r[5];
    size_t n = 0;
    TH_ASSERT_OK(tsr_tune_op(dev, &second_op, &o, r, 5, &n));
    assert_int_equal(n, 5);
    /* contrary: X=1 runs the class's problem ~4x faster and its second problem ~4x slower */
    assert_string_equal(r[0].problem_class, "contrary");
    assert_string_equal(r[0].second_problem, "65536 contrary");
    if (!(r[0].second_gain > 0 && r[0].second_gain < 0.8)) fail_msg("contrary: second gain %.3f", r[0].second_gain);
    assert_int_equal(r[0].kept_before, 1);
    assert_int_equal(r[0].second_wrong, 0);
    TH_ASSERT_CONTAINS(r[0].best_config, "X=4");
    /* agree: the pick gains there too, and stays */
    assert_string_equal(r[1].second_problem, "65536 agree");
    if (!(r[1].second_gain > 1.5)) fail_msg("agree: second gain %.3f", r[1].second_gain);
    assert_int_equal(r[1].kept_before, 0);
    TH_ASSERT_CONTAINS(r[1].best_config, "X=1");
    /* wrong: X=1's result there is wrong, so X=4 stays (X=2, the runner-up, lost its duel with X=1) */
    assert_string_equal(r[2].second_problem, "65536 wrong");
    assert_int_equal(r[2].second_wrong, 1);
    assert_int_equal(r[2].kept_before, 1);
    TH_ASSERT_CONTAINS(r[2].best_config, "X=4");
    /* none: no second problem, no check */
    assert_string_equal(r[3].second_problem, "");
    assert_int_equal(r[3].kept_before, 0);
    TH_ASSERT_CONTAINS(r[3].best_config, "X=1");
    assert_string_equal(r[4].second_problem, ""); /* stray */
    TH_ASSERT_CONTAINS(r[4].best_config, "X=1");
    /* what was saved is what the result says */
    cJSON *root = load(db_path);
    cJSON *ops = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "devices")->child, "ops");
    static const char *const cls[] = {"contrary", "agree", "wrong", "none", "stray"};
    static const int saved_x[] = {4, 1, 4, 1, 1};
    for (int c = 0; c < 5; ++c) {
        cJSON *e = cJSON_GetObjectItem(cJSON_GetObjectItem(ops, "second"), cls[c]);
        assert_non_null(e);
        assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(e, "config"), "X")->valueint, saved_x[c]);
    }
    cJSON_Delete(root);
    assert_int_equal(log_lines_with(log, "\"outcome\": \"second problem\"", "\"kept\": \"before\""), 2);
    assert_int_equal(log_lines_with(log, "\"outcome\": \"second problem\"", "\"kept\": \"pick\""), 1);
    assert_int_equal(log_lines_with(log, "\"outcome\": \"second problem\"",
                                    "\"error\": \"second: the second problem '65536 agree' of class 'stray' is of class 'agree'\""),
                     1);
    /* each class searched its own space: "none" 2 X values x 3 modes, the others 4 x 3 */
    assert_int_equal(log_lines_with(log, "\"outcome\": \"space\", \"points\": 12, \"class_space\": false", "second"), 4);
    assert_int_equal(log_lines_with(log, "\"class\": \"none\", \"outcome\": \"space\", \"points\": 6, \"class_space\": true", "second"), 1);
    void *fx = (void *)1;
    TH_ASSERT_STATUS(tsr_op_tuning_setup_check(&second_op, dev, "none", &fx), TSR_ERR_NOT_FOUND);
    assert_null(fx);
    fx = (void *)1;
    TH_ASSERT_STATUS(tsr_op_tuning_setup_check(&second_op, dev, "stray", &fx), TSR_ERR_UNSUPPORTED);
    assert_null(fx);
}

/* Every op's space for each of its classes on this device parses (the tuner searches each class in
 * its own: picks_are_checked_on_a_second_problem sees a class's own in the log); on a CPU that vectorizes within a work-item conv2d's depthwise forms (STAGE 3, 4, 8) are
 * in the depthwise classes' spaces alone (STAGE 4 on conv1's 7x7 taps compiled for two minutes),
 * the fused Winograd form (STAGE 9) in the stride-1 3x3 classes' alone. */
static void class_spaces(void **state) {
    (void)state;
    for (const tsr_op *const *op = tsr_ops; *op; ++op) {
        if (!(*op)->tuning_space) continue;
        for (const char *const *c = tsr_op_class_list(*op); *c; ++c) {
            const char *text = (*op)->tuning_space(dev, *c);
            tsr_space space;
            if (text && tsr_space_make(*op, text, &space) != TSR_SUCCESS)
                fail_msg("%s %s: '%s': %s", (*op)->name, *c, text, tsr_last_error());
        }
    }
    const tsr_device_info *info = tsr_device_get_info(dev);
    if (info->type != TSR_DEVICE_CPU || tsr_device_lanes(info) == TSR_LANES_ACROSS_ITEMS) return;
    /* the fused Winograd form (STAGE 9) in the stride-1 3x3 classes' spaces alone */
    static const struct {
        const char *cls, *stages;
    } spaces[] = {{"stem", "STAGE=0,2,5,7 "},          {"1x1-mid", "STAGE=0,2,5,7 "},
                  {"3x3-bf16", "STAGE=0,2,5,7,9 "},    {"3x3-wide", "STAGE=0,2,5,7,9 "},
                  {"depthwise", "STAGE=0,2,3,4,5,7,8 "}, {"depthwise-f16", "STAGE=0,2,3,4,5,7,8 "}};
    for (size_t i = 0; i < sizeof spaces / sizeof spaces[0]; ++i) {
        const char *text = tsr_op_conv.tuning_space(dev, spaces[i].cls);
        assert_non_null(text);
        if (!strstr(text, spaces[i].stages)) fail_msg("conv2d %s's space: '%s'", spaces[i].cls, text);
    }
    assert_non_null(strstr(tsr_op_conv.tuning_space(dev, NULL), "STAGE=0,2,3,4,5,7,8"));
}

/* ---- compiling ahead on the device ---- */

/* tsr_tune_serve, the far end of a process worker, over a socket: it says which device it opened,
 * runs a valid request, answers bad ones with "fail" and a reason (and goes on), and returns at the
 * end of input; bad arguments are refused. */
typedef struct serve_arg {
    int fd;
    tsr_status st;
} serve_arg;

static void *serve_thread(void *p) {
    serve_arg *a = p;
    a->st = tsr_tune_serve(dev, a->fd);
    return NULL;
}

static void serve_line(int fd, char *line, size_t size) {
    size_t used = 0;
    char c;
    while (used + 1 < size && read(fd, &c, 1) == 1 && c != '\n') line[used++] = c;
    line[used] = '\0';
}

static void tune_serve_answers_requests(void **state) {
    (void)state;
    TH_ASSERT_STATUS(tsr_tune_serve(NULL, 3), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_tune_serve(dev, -1), TSR_ERR_INVALID_ARG);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    serve_arg arg = {.fd = sv[1], .st = TSR_ERR_OPENCL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, serve_thread, &arg), 0);
    char line[1024], want[700], request[600];
    const tsr_device_info *info = tsr_device_get_info(dev);
    snprintf(want, sizeof want, "ready %s\t%s", info->platform_name, info->name);
    serve_line(sv[0], line, sizeof line);
    assert_string_equal(line, want);
    tsr_config_info ci;
    TH_ASSERT_OK(tsr_config_lookup(dev, "gelu", "small", &ci));
    static const char *bad[][2] = {{"nosuchop\tsmall\tVW=4\n", "no op 'nosuchop'"},
                                   {"gelu small VW=4\n", "<op>\\t<class>"},
                                   {"gelu\tsmall\tNOSUCH=3\n", "NOSUCH"},
                                   {"gelu\tnosuchclass\t%s\n", "nosuchclass"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        snprintf(request, sizeof request, bad[i][0], ci.config);
        assert_int_equal(write(sv[0], request, strlen(request)), (ssize_t)strlen(request));
        serve_line(sv[0], line, sizeof line);
        if (strncmp(line, "fail ", 5) != 0 || !strstr(line, bad[i][1]))
            fail_msg("request %zu: answer '%s', expected a failure naming '%s'", i, line, bad[i][1]);
    }
    /* a line too long for the buffer: answered, dropped to its newline, and the loop goes on */
    char long_request[3000];
    memset(long_request, 'x', sizeof long_request - 1);
    long_request[sizeof long_request - 1] = '\n';
    assert_int_equal(write(sv[0], long_request, sizeof long_request), (ssize_t)sizeof long_request);
    serve_line(sv[0], line, sizeof line);
    if (strncmp(line, "fail ", 5) != 0 || !strstr(line, "at most 1023 bytes"))
        fail_msg("an over-long request: answer '%s'", line);
    snprintf(request, sizeof request, "gelu\tsmall\t%s\n", ci.config);
    for (int twice = 0; twice < 2; ++twice) { /* the second reuses the class's fixture */
        assert_int_equal(write(sv[0], request, strlen(request)), (ssize_t)strlen(request));
        serve_line(sv[0], line, sizeof line);
        assert_string_equal(line, "ok");
    }
    /* a smaller problem of the class (a slow device's): its step; a bad step, or one the class has not */
    snprintf(request, sizeof request, "gelu\tlarge\t%s\t2\n", ci.config);
    assert_int_equal(write(sv[0], request, strlen(request)), (ssize_t)strlen(request));
    serve_line(sv[0], line, sizeof line);
    assert_string_equal(line, "ok");
    static const char *bad_steps[][2] = {{"gelu\tlarge\t%s\tx\n", "step 'x'"},
                                         {"gelu\tsmall\t%s\t1\n", "no smaller problem 1"}};
    for (size_t i = 0; i < sizeof bad_steps / sizeof bad_steps[0]; ++i) {
        snprintf(request, sizeof request, bad_steps[i][0], ci.config);
        assert_int_equal(write(sv[0], request, strlen(request)), (ssize_t)strlen(request));
        serve_line(sv[0], line, sizeof line);
        if (strncmp(line, "fail ", 5) != 0 || !strstr(line, bad_steps[i][1]))
            fail_msg("step request %zu: answer '%s', expected a failure naming '%s'", i, line, bad_steps[i][1]);
    }
    close(sv[0]); /* the end of input ends it */
    pthread_join(t, NULL);
    TH_ASSERT_OK(arg.st);
    close(sv[1]);
}

/* Workers compile what the search asks for next on private devices: the planted op's candidates
 * that do not build fail there too, and the search is the one without workers (random search's
 * guesses are exact: of each three draws the workers compiled two). */
static void compiling_ahead_keeps_the_search(void **state) {
    (void)state;
    char log[700];
    snprintf(log, sizeof log, "%s/ahead.jsonl", dir);
    tsr_tune_result with[1], without[1];
    size_t n = 0;
    for (int pass = 0; pass < 2; ++pass) {
        setenv("TSR_TUNE_AHEAD", pass == 0 ? "2" : "0", 1);
        tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 9, .classes = "only", .seed = 11,
                              .dry_run = true, .log_path = pass == 0 ? log : NULL};
        TH_ASSERT_OK(tsr_tune_op(dev, &planted_op, &o, pass == 0 ? with : without, 1, &n));
        assert_int_equal(n, 1);
    }
    /* not a count of threads: refused, naming the variable, before anything runs */
    setenv("TSR_TUNE_AHEAD", "two", 1);
    tsr_tune_options bad = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 2, .classes = "only", .dry_run = true};
    planted_setups = 0;
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &bad, NULL, 0, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "TSR_TUNE_AHEAD='two'");
    assert_int_equal(planted_setups, 0);
    unsetenv("TSR_TUNE_AHEAD");
    assert_int_equal(with[0].evaluated, 9);
    assert_int_equal(with[0].evaluated, without[0].evaluated);
    assert_int_equal(with[0].build_failures, 3); /* MODE=2, whoever compiled it first */
    assert_int_equal(with[0].build_failures, without[0].build_failures);
    TH_ASSERT_CONTAINS(with[0].best_config, "MODE=0");
    const th_ahead_counts ahead = th_read_ahead_line(log);
    const int workers = ahead.workers, submitted = ahead.submitted, compiled = ahead.compiled,
              failed = ahead.failed, dropped = ahead.dropped, used = ahead.used;
    assert_int_equal(workers, 2);
    assert_int_equal(submitted, used);   /* exact guesses: every one evaluated */
    /* the default, then 8 draws in batches of three: the tuner compiles the first of each itself */
    if (used != 5) fail_msg("compiled ahead: %d used of %d submitted", used, submitted);
    assert_int_equal(compiled + failed, submitted);
    assert_true(failed <= 3);
    assert_int_equal(dropped, 0);
}

/* While tuning, GEMM takes its pack kernels from programs keyed by what they read (not from the
 * candidate's program): the candidates' results still match the reference, fp32 and 16-bit (whose
 * packs widen), and a launch outside the tune uses the one program as always. */
static void gemm_candidates_with_shared_packs_are_right(void **state) {
    (void)state;
    char dir[512], log[600];
    th_tempdir(dir, sizeof dir);
    snprintf(log, sizeof log, "%s/log.jsonl", dir);
    /* 3 evaluations: the default, the entry in use, then a seed would come (none here) */
    tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 3, .classes = "medium,medium-f16",
                          .seed = 9, .dry_run = true, .space = "PACKA=1 PACKB=1 KERNEL=0", .log_path = log};
    tsr_tune_result r[2];
    size_t n = 0;
    TH_ASSERT_OK(tsr_tune(dev, "gemm", &o, r, 2, &n));
    assert_int_equal(n, 2);
    /* A space narrowed to the tiled kernel measures no seed of the others (gpu, smallm). */
    char *text = NULL;
    size_t length = 0;
    TH_ASSERT_OK(tsr_read_file(log, &text, &length));
    assert_null(strstr(text, "KERNEL=1"));
    assert_null(strstr(text, "KERNEL=2"));
    free(text);
    th_remove_tree(dir);
    for (size_t i = 0; i < n; ++i) {
        assert_int_equal(r[i].wrong_results, 0);
        assert_int_equal(r[i].build_failures + r[i].launch_failures, 0);
        assert_true(r[i].best_gflops > 0);
        /* the default (the yardstick, which may win: on AVX-512 the medium one reads A in place)
         * and at least one candidate of the restricted space, which packs both */
        assert_true(r[i].evaluated >= 2);
        TH_ASSERT_CONTAINS(r[i].best_config, "PACKB=1");
    }
}

/* A tune that fails in its second class while a worker compiles ahead (the first class's
 * candidates were given to it) stops the worker and writes nothing: no entry for the class that
 * finished, no temporary file; the error is the class's. */
static void failed_tune_with_workers_writes_nothing(void **state) {
    (void)state;
    char db[700], log[700];
    snprintf(db, sizeof db, "%s/failed.json", dir);
    snprintf(log, sizeof log, "%s/failed.jsonl", dir);
    setenv("TSR_TUNE_AHEAD", "1", 1);
    planted_fail_shape = "16384 other";
    tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 6, .classes = "only,other", .seed = 4,
                          .db_path = db, .log_path = log};
    tsr_tune_result r[2];
    size_t n = 0;
    TH_ASSERT_STATUS(tsr_tune_op(dev, &planted_op, &o, r, 2, &n), TSR_ERR_OUT_OF_MEMORY);
    TH_ASSERT_CONTAINS(tsr_last_error(), "no memory for '16384 other'");
    planted_fail_shape = NULL;
    unsetenv("TSR_TUNE_AHEAD");
    assert_int_equal(n, 1); /* the class that finished, in the results only */
    const th_ahead_counts ahead = th_read_ahead_line(log);
    assert_true(ahead.submitted >= 1); /* the worker had work */
    assert_int_equal(access(db, F_OK), -1);
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strstr(e->d_name, "failed.json") == e->d_name && strcmp(e->d_name, "failed.jsonl") != 0)
            fail_msg("left behind: %s/%s", dir, e->d_name);
    closedir(d);
}

/* The child of interrupted_tune_writes_nothing: a real tune, with workers, into `db`. */
static int child_tunes(const char *db, const char *log) {
    tsr_device *d = NULL;
    if (tsr_device_open(NULL, &d) != TSR_SUCCESS) return 2;
    tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 40, .classes = "small,medium",
                          .seed = 5, .db_path = db, .log_path = log};
    tsr_status st = tsr_tune(d, "gemm", &o, NULL, 0, NULL);
    tsr_device_close(d);
    return st == TSR_SUCCESS ? 0 : 1;
}

/* Ctrl-C while workers compile ahead leaves no entry and no temporary file: the database is
 * written once, after the last class, and the workers write nothing at all. */
static void interrupted_tune_writes_nothing(void **state) {
    (void)state;
    char db[700], log[700];
    snprintf(db, sizeof db, "%s/interrupted.json", dir);
    snprintf(log, sizeof log, "%s/interrupted.jsonl", dir);
    setenv("TSR_TUNE_AHEAD", "1", 1);
    char *argv[] = {(char *)"test_tuner", (char *)"--child-tunes", db, log, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ), 0);
    unsetenv("TSR_TUNE_AHEAD");
    /* until two candidates were measured: the worker has been given the next ones by then */
    int lines = 0;
    for (int waited = 0; waited < 1200 && lines < 2; ++waited) {
        struct timespec t = {0, 100 * 1000 * 1000};
        nanosleep(&t, NULL);
        FILE *f = fopen(log, "r");
        lines = 0;
        for (int c; f && (c = fgetc(f)) != EOF;) lines += c == '\n';
        if (f) fclose(f);
    }
    assert_true(lines >= 2);
    assert_int_equal(kill(pid, SIGINT), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT);
    assert_int_equal(access(db, F_OK), -1);
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strstr(e->d_name, "interrupted.json") == e->d_name && strcmp(e->d_name, "interrupted.jsonl") != 0)
            fail_msg("left behind: %s/%s", dir, e->d_name);
    closedir(d);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--child-writes") == 0) return child_writes(argv[2], argv[3], 25);
    if (argc == 4 && strcmp(argv[1], "--child-tunes") == 0) return child_tunes(argv[2], argv[3]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(exhaustive_filters_rejects_and_records, setup, teardown),
        cmocka_unit_test_setup_teardown(smaller_problems_stay_in_their_class, setup, teardown),
        cmocka_unit_test_setup_teardown(slow_classes_tune_a_smaller_problem, setup, teardown),
        cmocka_unit_test_setup_teardown(strategies_respect_budgets, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_options, setup, teardown),
        cmocka_unit_test_setup_teardown(fallback_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(own_entries_before_siblings_across_databases, setup, teardown),
        cmocka_unit_test_setup_teardown(gemm_fixture_transposed_b, setup, teardown),
        cmocka_unit_test_setup_teardown(small_m16_falls_back_to_small_m, setup, teardown),
        cmocka_unit_test_setup_teardown(config_overrides, setup, teardown),
        cmocka_unit_test_setup_teardown(resolved_cache_grows, setup, teardown),
        cmocka_unit_test_setup_teardown(stale_entries_are_passed_over, setup, teardown),
        cmocka_unit_test_setup_teardown(stale_entries_seed_a_retune, setup, teardown),
        cmocka_unit_test_setup_teardown(seeds_follow_the_class_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(damaged_files, setup, teardown),
        cmocka_unit_test_setup_teardown(import_export_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(concurrent_writers_lose_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(builtin_database_is_valid, setup, teardown),
        cmocka_unit_test_setup_teardown(compiling_ahead_keeps_the_search, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_tune_with_workers_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(tune_serve_answers_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(gemm_candidates_with_shared_packs_are_right, setup, teardown),
        cmocka_unit_test_setup_teardown(interrupted_tune_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(builtin_entries_for_this_device_are_current, setup, teardown),
        cmocka_unit_test_setup_teardown(checksum_guards_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(checksum_cannot_be_flipped_away, setup, teardown),
        cmocka_unit_test_setup_teardown(dangling_link_creates_no_directories, setup, teardown),
        cmocka_unit_test_setup_teardown(asides_are_never_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(updates_follow_links_and_clean_temps, setup, teardown),
        cmocka_unit_test_setup_teardown(tune_checks_destination_first, setup, teardown),
        cmocka_unit_test_setup_teardown(class_lists_are_not_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(picks_are_checked_on_a_second_problem, setup, teardown),
        cmocka_unit_test_setup_teardown(class_spaces, setup, teardown),
    };
    return TH_RUN(tests);
}
