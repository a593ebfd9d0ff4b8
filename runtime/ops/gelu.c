/* The GELU op: the fused single-pass kernel of cl/gelu.cl (tunable), the unfused baseline
 * that runs one kernel per elementary operation, and a copy kernel of the same geometry as
 * the bandwidth yardstick. */
#include "internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The tuning parameters, X(NAME, KIND, DEFAULT, values...): see TSR_PARAM_DEF. */
#define GELU_PARAMS(X)                                                                          \
    X(VW, DEFINE, 1, 1, 2, 4, 8, 16)          /* vector width */                               \
    X(VPT, DEFINE, 1, 1, 2, 4, 8, 16, 32)     /* vectors per work-item */                      \
    X(WG, HOST, 1, 1, 4, 16, 32, 64, 128, 256) /* work-group size: launch geometry only */      \
    X(INTERLEAVE, DEFINE, 0, 0, 1)            /* work-items of a group read adjacent vectors */

enum { GELU_PARAMS(TSR_PARAM_INDEX) GELU_NPARAMS };
static const tsr_param_def gelu_params[] = {GELU_PARAMS(TSR_PARAM_DEF)};

/* The unfused baseline (tsr_gelu_unfused) is a separate entry point, not a choice of this one. */
static const tsr_implementation gelu_implementations[] = {{.name = "fused"}};

/* Program variants: what the kernel computes (the configuration is the same for all three). */
enum { FORM_TANH, FORM_ERF, FORM_COPY, GELU_FORMS };

/* Per form and size: the erf form does more arithmetic per element, so on CPUs its best
 * vector width differs (float16 spills AVX2's 16 registers there). */
static const char *const gelu_classes[] = {"large", "small", "large-erf", "small-erf", NULL};
#define GELU_SMALL_LIMIT (1u << 18) /* elements; below this launch overhead dominates */

typedef struct gelu_problem {
    int mode; /* TSR_GELU_TANH or TSR_GELU_ERF */
    size_t n;
    cl_mem x, y;
    size_t x_off, y_off;
} gelu_problem;

static const char *gelu_problem_class(const void *problem) {
    const gelu_problem *p = problem;
    if (p->mode == TSR_GELU_ERF) return p->n <= GELU_SMALL_LIMIT ? "small-erf" : "large-erf";
    return p->n <= GELU_SMALL_LIMIT ? "small" : "large";
}

/* CPUs: each work-item streams a contiguous run with wide vectors; GPUs: consecutive work-items
 * read consecutive vectors, so a work-group's accesses coalesce. */
static const tsr_default gelu_defaults[] = {
    /* CPUs that vectorize across work-items (llvmpipe): scalar items in groups of 64, adjacent
     * items reading adjacent floats, as on a GPU. */
    {TSR_DEVICE_CPU, TSR_LANES_ACROSS_ITEMS, NULL, "VW=1 VPT=4 WG=64 INTERLEAVE=1"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "large-erf", "VW=8 VPT=8 WG=16 INTERLEAVE=0"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "small-erf", "VW=8 VPT=8 WG=16 INTERLEAVE=0"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, NULL, "VW=16 VPT=4 WG=16 INTERLEAVE=0"},
    {0, TSR_LANES_ANY, NULL, "VW=4 VPT=4 WG=256 INTERLEAVE=1"},
};

static bool gelu_config_ok(const tsr_device *dev, const void *problem, const tsr_config *cfg) {
    (void)problem;
    const int *v = cfg->values;
    if ((size_t)v[P_WG] > dev->info.max_work_group_size || (size_t)v[P_WG] > dev->info.max_work_item_sizes[0])
        return false;
    /* A CPU that vectorizes across work-items (llvmpipe) wants groups of light items: long
     * vector runs per item only lengthen its slow compiles. */
    if (dev->info.type == TSR_DEVICE_CPU && tsr_device_lanes(&dev->info) == TSR_LANES_ACROSS_ITEMS &&
        (v[P_WG] < 16 || v[P_VW] * v[P_VPT] > 32))
        return false;
    return v[P_VW] * v[P_VPT] <= 256; /* longer runs per work-item only unbalance the tail */
}

static void gelu_build_options(const tsr_config *cfg, int form, char *out, size_t size) {
    static const int modes[GELU_FORMS] = {2, 3, 0}; /* activation.cl's codes; 0: copy */
    tsr_config_defines(&tsr_op_gelu, cfg, out, size);
    size_t used = strlen(out);
    snprintf(out + used, size - used, " -DMODE=%d", modes[form]);
}

static size_t ceil_div(size_t x, size_t to) { return (x + to - 1) / to; }

static tsr_status gelu_validate(const tsr_device *dev, int mode, cl_mem x, size_t x_off, cl_mem y, size_t y_off,
                                size_t n, gelu_problem *p) {
    if (!dev) return tsr_fail(TSR_ERR_INVALID_ARG, "device is NULL");
    if (mode != TSR_GELU_TANH && mode != TSR_GELU_ERF)
        return tsr_fail(TSR_ERR_INVALID_ARG, "mode must be TSR_GELU_TANH or TSR_GELU_ERF (got %d)", mode);
    if (n == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "n must be at least 1");
    /* Ends and their byte counts, checked: a wrapped end would pass the buffer checks. */
    size_t x_end, y_end, bytes;
    tsr_status st;
    if ((st = tsr_size_mad("gelu: x_offset + n", n, 1, x_off, &x_end)) != TSR_SUCCESS ||
        (st = tsr_size_mad("gelu: y_offset + n", n, 1, y_off, &y_end)) != TSR_SUCCESS ||
        (st = tsr_size_mad("gelu: the bytes x spans", x_end, sizeof(float), 0, &bytes)) != TSR_SUCCESS ||
        (st = tsr_size_mad("gelu: the bytes y spans", y_end, sizeof(float), 0, &bytes)) != TSR_SUCCESS)
        return st;
    if ((st = tsr_check_buffer(dev, x, "x", x_end)) != TSR_SUCCESS ||
        (st = tsr_check_buffer(dev, y, "y", y_end)) != TSR_SUCCESS)
        return st;
    /* By memory, not handle: sub-buffers of one parent alias too. */
    if ((st = tsr_check_disjoint("gelu", x, "x", x_off, n, y, "y", y_off, n, true)) != TSR_SUCCESS) return st;
    *p = (gelu_problem){.mode = mode, .n = n, .x = x, .y = y, .x_off = x_off, .y_off = y_off};
    return TSR_SUCCESS;
}

/* Enqueue the fused kernel (or, with FORM_COPY, the copy of the same geometry). */
static tsr_status gelu_launch(tsr_device *dev, const gelu_problem *p, const tsr_config *cfg, int form,
                              cl_command_queue queue, cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    char options[256];
    gelu_build_options(cfg, form, options, sizeof options);
    cl_program program = NULL;
    cl_kernel kernel = NULL;
    cl_int err;
    TSR_CHECK(tsr_program_get(dev, "gelu", options, &program), out);
    kernel = clCreateKernel(program, "gelu", &err);
    TSR_CL_CHECK(err, out);
    cl_ulong n = p->n, xo = p->x_off, yo = p->y_off;
    cl_uint arg = 0;
#define SET(v) TSR_CL_CHECK(clSetKernelArg(kernel, arg++, sizeof(v), &(v)), out)
    SET(n); SET(p->x); SET(xo); SET(p->y); SET(yo);
#undef SET
    const int *v = cfg->values;
    size_t local = (size_t)v[P_WG], vectors = ceil_div(p->n, (size_t)v[P_VW]);
    size_t global = v[P_INTERLEAVE] ? ceil_div(vectors, (size_t)v[P_VPT] * local) * local
                                    : ceil_div(ceil_div(vectors, (size_t)v[P_VPT]), local) * local;
    TSR_CL_CHECK(clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, &local, 0, NULL, event), out);
out:
    if (kernel) clReleaseKernel(kernel);
    return status;
}

static tsr_status gelu_run(tsr_device *dev, int mode, cl_mem x, size_t x_off, cl_mem y, size_t y_off, size_t n,
                           cl_command_queue queue, cl_event *event, int form_override) {
    tsr_clear_diagnostics();
    if (event) *event = NULL;
    gelu_problem p;
    tsr_status status = gelu_validate(dev, mode, x, x_off, y, y_off, n, &p);
    if (status != TSR_SUCCESS) return status;
    cl_command_queue q;
    if ((status = tsr_resolve_queue(dev, queue, &q)) != TSR_SUCCESS) return status;
    tsr_config cfg;
    if ((status = tsr_op_config(dev, &tsr_op_gelu, &p, &cfg)) != TSR_SUCCESS) return status;
    int form = form_override >= 0 ? form_override : mode == TSR_GELU_ERF ? FORM_ERF : FORM_TANH;
    status = gelu_launch(dev, &p, &cfg, form, q, event);
    if (tsr_op_build_fallback(dev, &tsr_op_gelu, &p, status, &cfg)) status = gelu_launch(dev, &p, &cfg, form, q, event);
    return status;
}

tsr_status tsr_gelu(tsr_device *dev, tsr_gelu_mode mode, cl_mem x, size_t x_off, cl_mem y, size_t y_off, size_t n,
                    cl_command_queue queue, cl_event *event) {
    return gelu_run(dev, (int)mode, x, x_off, y, y_off, n, queue, event, -1);
}

tsr_status tsr_gelu_copy(tsr_device *dev, cl_mem x, size_t x_off, cl_mem y, size_t y_off, size_t n,
                         cl_command_queue queue, cl_event *event) {
    return gelu_run(dev, TSR_GELU_TANH, x, x_off, y, y_off, n, queue, event, FORM_COPY);
}

/* ---- the unfused baseline ---- */

typedef struct ew_step {
    const char *kernel;
    int a, b;       /* operands: 0 x, 1 temp0, 2 temp1, 3 y (b only for binary kernels) */
    float s;
    int out;
} ew_step;

enum { OPD_X, OPD_T0, OPD_T1, OPD_Y };

static const ew_step tanh_steps[] = {
    {"ew_cube", OPD_X, OPD_X, 0, OPD_T0},
    {"ew_scale", OPD_T0, OPD_X, 0.044715f, OPD_T1},
    {"ew_add", OPD_T1, OPD_X, 0, OPD_T0},
    {"ew_scale", OPD_T0, OPD_X, 0.7978845608028654f, OPD_T1},
    {"ew_tanh", OPD_T1, OPD_X, 0, OPD_T0},
    {"ew_add_scalar", OPD_T0, OPD_X, 1.0f, OPD_T1},
    {"ew_gate", OPD_T1, OPD_X, 0, OPD_T0},
    {"ew_scale", OPD_T0, OPD_X, 0.5f, OPD_Y},
};
static const ew_step erf_steps[] = {
    {"ew_scale", OPD_X, OPD_X, 0.7071067811865476f, OPD_T0},
    {"ew_erf", OPD_T0, OPD_X, 0, OPD_T1},
    {"ew_add_scalar", OPD_T1, OPD_X, 1.0f, OPD_T0},
    {"ew_gate", OPD_T0, OPD_X, 0, OPD_T1},
    {"ew_scale", OPD_T1, OPD_X, 0.5f, OPD_Y},
};

tsr_status tsr_gelu_unfused(tsr_device *dev, tsr_gelu_mode mode, cl_mem x, size_t x_off, cl_mem y, size_t y_off,
                            size_t n, cl_command_queue queue, cl_event *event) {
    tsr_clear_diagnostics();
    if (event) *event = NULL;
    gelu_problem p;
    tsr_status status = gelu_validate(dev, (int)mode, x, x_off, y, y_off, n, &p);
    if (status != TSR_SUCCESS) return status;
    cl_command_queue q;
    if ((status = tsr_resolve_queue(dev, queue, &q)) != TSR_SUCCESS) return status;
    const ew_step *steps = mode == TSR_GELU_ERF ? erf_steps : tanh_steps;
    size_t nsteps = mode == TSR_GELU_ERF ? sizeof erf_steps / sizeof *erf_steps : sizeof tanh_steps / sizeof *tanh_steps;
    cl_program program = NULL;
    tsr_config cfg;
    tsr_op_default_config(&tsr_op_gelu, dev, "large", &cfg);
    char options[256];
    gelu_build_options(&cfg, FORM_TANH, options, sizeof options);
    cl_event prev = NULL;
    cl_kernel kernel = NULL;
    cl_int err;
    TSR_CHECK(tsr_program_get(dev, "gelu", options, &program), out_unlocked);
    /* The temporaries are device workspaces, like a framework's caching allocator hands out. */
    pthread_mutex_lock(&dev->lock);
    cl_mem temp[2];
    cl_event wait[2];
    size_t temp_bytes;
    TSR_CHECK(tsr_size_mad("gelu: the unfused temporaries", n, sizeof(float), 0, &temp_bytes), out);
    TSR_CHECK(tsr_workspace_get(dev, TSR_WS_TEMP0, temp_bytes, &temp[0], &wait[0]), out);
    TSR_CHECK(tsr_workspace_get(dev, TSR_WS_TEMP1, temp_bytes, &temp[1], &wait[1]), out);
    for (size_t i = 0; i < nsteps; ++i) {
        const ew_step *st = &steps[i];
        cl_mem mems[4] = {x, temp[0], temp[1], y};
        cl_ulong offs[4] = {x_off, 0, 0, y_off};
        cl_ulong count = n;
        kernel = clCreateKernel(program, st->kernel, &err);
        TSR_CL_CHECK(err, out);
        cl_uint arg = 0;
#define SET(v) TSR_CL_CHECK(clSetKernelArg(kernel, arg++, sizeof(v), &(v)), out)
        SET(count); SET(mems[st->a]); SET(offs[st->a]); SET(mems[st->b]); SET(offs[st->b]); SET(st->s);
        SET(mems[st->out]); SET(offs[st->out]);
#undef SET
        /* Each step waits for the previous one (the caller's queue may be out of order); the
         * first also for earlier readers of the temporaries. */
        cl_event waits[2];
        cl_uint nwaits = 0;
        if (prev) waits[nwaits++] = prev;
        else
            for (int w = 0; w < 2; ++w)
                if (wait[w]) waits[nwaits++] = wait[w];
        cl_event done = NULL;
        size_t global = n;
        TSR_CL_CHECK(clEnqueueNDRangeKernel(q, kernel, 1, NULL, &global, NULL, nwaits, nwaits ? waits : NULL, &done),
                     out);
        if (prev) clReleaseEvent(prev);
        prev = done;
        clReleaseKernel(kernel);
        kernel = NULL;
    }
    tsr_workspace_set_last_use(dev, TSR_WS_TEMP0, prev);
    tsr_workspace_set_last_use(dev, TSR_WS_TEMP1, prev);
out:
    pthread_mutex_unlock(&dev->lock);
out_unlocked:
    if (kernel) clReleaseKernel(kernel);
    if (prev) {
        if (event && status == TSR_SUCCESS) *event = prev;
        else clReleaseEvent(prev);
    }
    return status;
}

/* ---- the fixture: GELU of "N" elements (tanh form) or "N erf" ---- */

typedef struct gelu_fixture {
    gelu_problem p;
    float *x, *y;
} gelu_fixture;

/* not a multiple of any vector width: the tail path is checked too */
static const char *const gelu_class_shapes[] = {"16777219", "65539", "16777219 erf", "65539 erf"};
static const tsr_report_shape gelu_report_shapes[] = {
    {"gelu-16M", "16777216", "65536"},
    {NULL, NULL, NULL},
};

static void gelu_fixture_free(void *ctx) {
    gelu_fixture *t = ctx;
    if (!t) return;
    if (t->p.x) clReleaseMemObject(t->p.x);
    if (t->p.y) clReleaseMemObject(t->p.y);
    free(t->x);
    free(t->y);
    free(t);
}

static tsr_status gelu_fixture_setup(tsr_device *dev, const char *shape, uint64_t seed, void **out) {
    size_t n = 0;
    int used = 0;
    if (sscanf(shape, "%zu%n", &n, &used) != 1 || n == 0 || (strcmp(shape + used, "") != 0 && strcmp(shape + used, " erf") != 0))
        return tsr_fail(TSR_ERR_INVALID_ARG, "gelu: shape '%s' is not N or 'N erf' (N >= 1)", shape);
    if (n > SIZE_MAX / sizeof(float)) return tsr_fail(TSR_ERR_OVERFLOW, "gelu: shape '%s' is too large", shape);
    gelu_fixture *t = calloc(1, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    t->p.mode = strstr(shape, "erf") ? TSR_GELU_ERF : TSR_GELU_TANH;
    t->p.n = n;
    t->x = malloc(n * sizeof(float));
    t->y = malloc(n * sizeof(float));
    tsr_status status = TSR_SUCCESS;
    cl_int err;
    if (!t->x || !t->y) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    tsr_random_fill(t->x, n, &seed, -5.0f, 5.0f);
    for (size_t i = 0; i < n; ++i) t->y[i] = NAN; /* poisoned: a run must write every element */
    t->p.x = clCreateBuffer(dev->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof(float), t->x, &err);
    TSR_CL_CHECK(err, out);
    t->p.y = clCreateBuffer(dev->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(float), t->y, &err);
    TSR_CL_CHECK(err, out);
out:
    if (status != TSR_SUCCESS) {
        gelu_fixture_free(t);
        return status;
    }
    *out = t;
    return TSR_SUCCESS;
}

static tsr_status gelu_fixture_run(tsr_device *dev, void *ctx, const tsr_config *cfg, cl_command_queue queue,
                                   cl_event *first, cl_event *last) {
    gelu_fixture *t = ctx;
    cl_event done = NULL;
    tsr_status st = cfg ? gelu_launch(dev, &t->p, cfg, t->p.mode == TSR_GELU_ERF ? FORM_ERF : FORM_TANH, queue,
                                      first || last ? &done : NULL)
                        : tsr_gelu(dev, (tsr_gelu_mode)t->p.mode, t->p.x, 0, t->p.y, 0, t->p.n, queue,
                                   first || last ? &done : NULL);
    if (st != TSR_SUCCESS) return st;
    tsr_fixture_single_event(done, first, last);
    return TSR_SUCCESS;
}

static tsr_status gelu_fixture_check(tsr_device *dev, void *ctx, double *rel_err) {
    gelu_fixture *t = ctx;
    tsr_status st = tsr_download(dev, t->p.y, t->y, t->p.n);
    if (st != TSR_SUCCESS) return st;
    /* The tuner rejects above 1e-4; a correct candidate is within 1e-6 (docs/gelu.md). */
    *rel_err = tsr_gelu_max_error(t->p.mode, t->x, t->y, t->p.n);
    return tsr_fixture_poison(dev, t->p.y, t->y, t->p.n); /* the next run cannot pass on this one's output */
}

/* 8 elementary operations per element (the unfused baseline's kernels); 8 bytes must move */
static void gelu_fixture_work(const void *ctx, double *flops, double *bytes) {
    *flops = *bytes = 8.0 * ((const gelu_fixture *)ctx)->p.n;
}

static void gelu_fixture_describe(const void *ctx, char *out, size_t size) {
    snprintf(out, size, "%zu", ((const gelu_fixture *)ctx)->p.n);
}

static int gelu_fixture_buffers(const void *ctx, cl_mem *buffers, int max) {
    const gelu_problem *p = &((const gelu_fixture *)ctx)->p;
    if (max > 0) buffers[0] = p->x;
    if (max > 1) buffers[1] = p->y;
    return 2;
}

/* ---- demo ---- */

static tsr_status gelu_demo(tsr_device *dev, char *summary, size_t size) {
    static const char *const shapes[2] = {"1048576", "1048576 erf"};
    const size_t n = (size_t)1 << 20;
    double err_by_mode[2] = {0, 0}, ms_by_mode[2] = {0, 0};
    for (int m = 0; m < 2; ++m) {
        void *fx = NULL;
        tsr_status status = gelu_fixture_setup(dev, shapes[m], tsr_random_fresh_seed(), &fx);
        if (status == TSR_SUCCESS)
            status = tsr_fixture_measure(dev, &tsr_op_gelu, fx, 3, &ms_by_mode[m], &err_by_mode[m]);
        gelu_fixture_free(fx);
        if (status != TSR_SUCCESS) return status;
    }
    bool ok = err_by_mode[0] <= tsr_op_gelu.tolerance && err_by_mode[1] <= tsr_op_gelu.tolerance;
    snprintf(summary, size, "gelu %zu elements: tanh %.3f ms (%.1f GB/s, max error %.1e), erf %.3f ms (%.1f GB/s, "
             "max error %.1e)%s", n, ms_by_mode[0], 8.0 * n / (ms_by_mode[0] * 1e6), err_by_mode[0], ms_by_mode[1],
             8.0 * n / (ms_by_mode[1] * 1e6), err_by_mode[1], ok ? "" : "  (WRONG)");
    if (!ok) return tsr_fail(TSR_ERR_OPENCL, "gelu demo: error %.2e / %.2e exceeds 1e-6", err_by_mode[0], err_by_mode[1]);
    return TSR_SUCCESS;
}

static const char *gelu_tuning_space(const tsr_device *dev) {
    /* On CPUs interleaving only scatters each thread's stream. */
    /* CPUs that vectorize across work-items (llvmpipe): scalar or short vectors, GPU-like groups. */
    if (dev->info.type == TSR_DEVICE_CPU && tsr_device_lanes(&dev->info) == TSR_LANES_ACROSS_ITEMS)
        return "VW=1,2,4 VPT=1,2,4,8 WG=16,64,256 INTERLEAVE=0,1";
    if (dev->info.type == TSR_DEVICE_CPU) return "VW=4,8,16 VPT=1,2,4,8,16 WG=1,4,16,64,256 INTERLEAVE=0";
    return NULL;
}

const tsr_op tsr_op_gelu = {
    .name = "gelu",
    .source_name = "gelu",
    .params = gelu_params,
    .nparams = GELU_NPARAMS,
    .classes = gelu_classes,
    .problem_class = gelu_problem_class,
    .defaults = gelu_defaults,
    .ndefaults = TSR_COUNT(gelu_defaults),
    .implementations = gelu_implementations,
    .nimplementations = TSR_COUNT(gelu_implementations),
    .config_ok = gelu_config_ok,
    .program_variants = GELU_FORMS,
    .program_variant = "form (tanh, erf, copy)",
    .build_options = gelu_build_options,
    .demo = gelu_demo,
    .nearest_class = NULL,
    .tuning_space = gelu_tuning_space,
    .rate_unit = "GB/s",
    .fixture_setup = gelu_fixture_setup,
    .fixture_run = gelu_fixture_run,
    .fixture_check = gelu_fixture_check,
    .fixture_work = gelu_fixture_work,
    .fixture_describe = gelu_fixture_describe,
    .fixture_buffers = gelu_fixture_buffers,
    .fixture_free = gelu_fixture_free,
    .tolerance = 1e-6,
    .class_shapes = gelu_class_shapes,
    .report_shapes = gelu_report_shapes,
};
