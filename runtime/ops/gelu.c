/* The GELU op: the fused single-pass kernel of cl/gelu.cl (tunable), the unfused baseline
 * that runs one kernel per elementary operation, and a copy kernel of the same geometry as
 * the bandwidth yardstick, which with typed loads and stores is also tsr_convert. x and y may
 * be stored as f32, f16 or bf16 each; the arithmetic is fp32. */
#include "internal.h"

#include <ctype.h>
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

/* Program variants: what the kernel computes, times the storage types of x and y (every pair of
 * f32, f16, bf16: GELU and tsr_convert take any). The configuration is the same for all. */
enum { FORM_TANH, FORM_ERF, FORM_COPY, GELU_FORMS };
#define GELU_TYPES TSR_DTYPE_COUNT /* tsr_dtype's values 0 .. count - 1 */
#define GELU_VARIANTS (GELU_FORMS * GELU_TYPES * GELU_TYPES)

static int gelu_variant(int form, tsr_dtype x_type, tsr_dtype y_type) {
    return form + GELU_FORMS * ((int)x_type * GELU_TYPES + (int)y_type);
}

/* Per form and size: the erf form does more arithmetic per element, so on CPUs its best
 * vector width differs (float16 spills AVX2's 16 registers there). 16-bit storage halves the
 * bytes per element and changes the loads (vload_halfN, the bf16 shifts), so each of these fp32
 * classes has its 16-bit twins ("large-f16", TSR_CLASSES_PER_TYPE), which use the fp32 class's
 * entry until they are tuned themselves. */
static const char *const gelu_classes[] = {"large", "small", "large-erf", "small-erf", NULL};
#define GELU_SMALL_LIMIT (1u << 18) /* elements; below this launch overhead dominates */

typedef struct gelu_problem {
    int mode; /* TSR_GELU_TANH or TSR_GELU_ERF (the copy uses the tanh form's classes) */
    size_t n;
    cl_mem x, y;
    size_t x_off, y_off; /* in elements of x's and y's own type */
    tsr_dtype x_type, y_type;
} gelu_problem;

static const char *gelu_problem_class(const void *problem) {
    const gelu_problem *p = problem;
    const tsr_dtype types[2] = {p->x_type, p->y_type};
    int base = (p->mode == TSR_GELU_ERF ? 2 : 0) + (p->n <= GELU_SMALL_LIMIT ? 1 : 0);
    return tsr_op_class(&tsr_op_gelu, base, types, 2);
}

/* A class launches its own form (the tanh form's classes the copy too, for tsr_gelu_copy and
 * tsr_convert) and the type pairs whose class suffix it carries. */
static bool gelu_variant_serves_class(const char *problem_class, int variant) {
    const int form = variant % GELU_FORMS, types = variant / GELU_FORMS;
    for (int large = 0; large < 2; ++large) {
        const gelu_problem p = {.mode = form == FORM_ERF ? TSR_GELU_ERF : TSR_GELU_TANH,
                                .n = large ? GELU_SMALL_LIMIT + 1 : 1,
                                .x_type = (tsr_dtype)(types / GELU_TYPES),
                                .y_type = (tsr_dtype)(types % GELU_TYPES)};
        if (strcmp(gelu_problem_class(&p), problem_class) == 0) return true;
    }
    return false;
}

/* CPUs: each work-item streams a contiguous run with wide vectors; GPUs: consecutive work-items
 * read consecutive vectors, so a work-group's accesses coalesce. */
static const tsr_default gelu_defaults[] = {
    /* CPUs that vectorize across work-items (llvmpipe): scalar items in groups of 64, adjacent
     * items reading adjacent floats, as on a GPU. */
    {TSR_DEVICE_CPU, TSR_LANES_ACROSS_ITEMS, NULL, "VW=1 VPT=4 WG=64 INTERLEAVE=1"},
    /* 16-bit storage: the erf form is compute-bound once its bytes halve, and VW=8 (the fp32
     * erf's tuned width on AVX-512, where fp32 is memory-bound either way) compiles to 256-bit
     * vectors: half the lanes per instruction of VW=16 (zmm on AVX-512). These rows come before
     * the plain-named ones (which match the 16-bit classes by their base name too), and they keep
     * the 16-bit erf classes off the fp32 classes' tuned entries (op.c, config.c). */
    {TSR_DEVICE_CPU, TSR_LANES_ANY, TSR_TWINS_16("large-erf"), "VW=16 VPT=8 WG=16 INTERLEAVE=0"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, TSR_TWINS_16("small-erf"), "VW=16 VPT=8 WG=16 INTERLEAVE=0"},
    /* and both forms at VPT=8: GELU16's eight-vector step (cl/gelu.cl, AVX-512; 7-10% less CPU
     * time than four for an f16 y), which the fp32 classes' tuned entries (VPT=4) would not take */
    {TSR_DEVICE_CPU, TSR_LANES_ANY, TSR_TWINS_16("large"), "VW=16 VPT=8 WG=16 INTERLEAVE=0"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, TSR_TWINS_16("small"), "VW=16 VPT=8 WG=16 INTERLEAVE=0"},
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

/* fp32 programs keep the options they always had (the kernel's types default to 0). */
static void gelu_build_options(const tsr_config *cfg, int variant, char *out, size_t size) {
    static const int modes[GELU_FORMS] = {2, 3, 0}; /* activation.cl's codes; 0: copy */
    const int form = variant % GELU_FORMS, types = variant / GELU_FORMS;
    const int x_type = types / GELU_TYPES, y_type = types % GELU_TYPES;
    tsr_config_defines(&tsr_op_gelu, cfg, out, size);
    size_t used = strlen(out);
    if (x_type == 0 && y_type == 0)
        snprintf(out + used, size - used, " -DMODE=%d", modes[form]);
    else
        snprintf(out + used, size - used, " -DMODE=%d -DX_TYPE=%d -DY_TYPE=%d", modes[form], x_type, y_type);
}

static size_t ceil_div(size_t x, size_t to) { return (x + to - 1) / to; }

/* The names a call's messages use: GELU's x and y, or tsr_convert's src and dst. */
/* The labels its checks use are spelled out here, so a call formats no text unless it fails. */
typedef struct gelu_names {
    const char *op, *x, *y;
    const char *x_label, *y_label, *x_end, *y_end, *x_bytes, *y_bytes;
} gelu_names;
#define GELU_NAMES(OP, X, Y) \
    {OP, X, Y, OP ": " X, OP ": " Y, OP ": " X "_offset + n", OP ": " Y "_offset + n", OP ": the bytes " X " spans", \
     OP ": the bytes " Y " spans"}
static const gelu_names gelu_call = GELU_NAMES("gelu", "x", "y");
static const gelu_names convert_call = GELU_NAMES("tsr_convert", "src", "dst");

static tsr_status gelu_validate(const tsr_device *dev, const gelu_names *names, int mode, tsr_dtype x_type, cl_mem x,
                                size_t x_off, tsr_dtype y_type, cl_mem y, size_t y_off, size_t n, gelu_problem *p) {
    if (!dev) return tsr_fail(TSR_ERR_INVALID_ARG, "device is NULL");
    if (mode != TSR_GELU_TANH && mode != TSR_GELU_ERF)
        return tsr_fail(TSR_ERR_INVALID_ARG, "mode must be TSR_GELU_TANH or TSR_GELU_ERF (got %d)", mode);
    tsr_status st = TSR_SUCCESS;
    TSR_CHECK(st, tsr_dtype_check(names->x_label, x_type), done);
    TSR_CHECK(st, tsr_dtype_check(names->y_label, y_type), done);
    if (n == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: n must be at least 1", names->op);
    /* Ends and their byte counts, checked: a wrapped end would pass the buffer checks. */
    size_t x_end, y_end, bytes;
    TSR_CHECK(st, tsr_size_mad(names->x_end, n, 1, x_off, &x_end), done);
    TSR_CHECK(st, tsr_size_mad(names->y_end, n, 1, y_off, &y_end), done);
    TSR_CHECK(st, tsr_size_mad(names->x_bytes, x_end, tsr_dtype_size(x_type), 0, &bytes), done);
    TSR_CHECK(st, tsr_size_mad(names->y_bytes, y_end, tsr_dtype_size(y_type), 0, &bytes), done);
    TSR_CHECK(st, tsr_check_buffer_typed(dev, x, names->x, x_end, x_type), done);
    TSR_CHECK(st, tsr_check_buffer_typed(dev, y, names->y, y_end, y_type), done);
    /* By memory, not handle: sub-buffers of one parent alias too. In place only on the same bytes
     * in the same type: an f16 x read as it is overwritten with bf16 would be another call. */
    tsr_ranges relation;
    TSR_CHECK(st, tsr_ranges_relate_typed(x, x_off, n, x_type, y, y_off, n, y_type, &relation), done);
    if (relation == TSR_RANGES_SAME && x_type != y_type)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: %s (%s) and %s (%s) are the same bytes: in place needs one type",
                        names->op, names->x, tsr_dtype_str(x_type), names->y, tsr_dtype_str(y_type));
    TSR_CHECK(st,
              tsr_check_disjoint_typed(names->op, x, names->x, x_off, n, x_type, y, names->y, y_off, n, y_type,
                                       x_type == y_type),
              done);
    *p = (gelu_problem){
        .mode = mode, .n = n, .x = x, .y = y, .x_off = x_off, .y_off = y_off, .x_type = x_type, .y_type = y_type};
done:
    return st;
}

/* Enqueue the fused kernel (or, with FORM_COPY, the copy of the same geometry) for p's types. */
static const char gelu_kernels_tag;

static tsr_status gelu_launch(tsr_device *dev, const gelu_problem *p, const tsr_config *cfg, int form,
                              cl_command_queue queue, cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    static const char *const names[] = {"gelu", NULL};
    tsr_kernel *k[TSR_LAUNCH_KERNELS];
    TSR_CHECK(status,
              tsr_launch_kernels(dev, &gelu_kernels_tag, cfg, gelu_variant(form, p->x_type, p->y_type), 0, "gelu",
                                 gelu_build_options, names, k),
              done);
    cl_kernel kernel = k[0]->kernel;
    cl_ulong n = p->n, xo = p->x_off, yo = p->y_off;
    const int *v = cfg->values;
    size_t local = (size_t)v[P_WG], vectors = ceil_div(p->n, (size_t)v[P_VW]);
    size_t global = v[P_INTERLEAVE] ? ceil_div(vectors, (size_t)v[P_VPT] * local) * local
                                    : ceil_div(ceil_div(vectors, (size_t)v[P_VPT]), local) * local;
    cl_uint arg = 0;
    tsr_kernel_lock(k[0]); /* the cached kernel's arguments are this call's until the enqueue */
#define SET(v) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(v), &(v)), unlock)
    SET(n); SET(p->x); SET(xo); SET(p->y); SET(yo);
#undef SET
    TSR_CL_CHECK(status, tsr_enqueue_kernel(queue, kernel, 1, NULL, &global, &local, 0, NULL, event), unlock);
unlock:
    tsr_kernel_unlock(k[0]);
done:
    return status;
}

static tsr_status gelu_run(tsr_device *dev, const gelu_names *names, int mode, tsr_dtype x_type, cl_mem x, size_t x_off,
                           tsr_dtype y_type, cl_mem y, size_t y_off, size_t n, cl_command_queue queue, cl_event *event,
                           int form_override) {
    tsr_clear_diagnostics();
    if (event) *event = NULL;
    gelu_problem p;
    tsr_status status = gelu_validate(dev, names, mode, x_type, x, x_off, y_type, y, y_off, n, &p);
    if (status != TSR_SUCCESS) return status;
    tsr_op_output(y);
    cl_command_queue q;
    TSR_CHECK(status, tsr_resolve_queue(dev, queue, &q), done);
    tsr_config cfg;
    /* the fields its class reads (the legality check reads none) */
    const uint32_t shape[] = {(uint32_t)p.mode, p.n <= GELU_SMALL_LIMIT, (uint32_t)p.x_type, (uint32_t)p.y_type};
    TSR_CHECK(status, tsr_op_config_shape(dev, &tsr_op_gelu, &p, shape, sizeof shape / sizeof *shape, &cfg), done);
    int form = form_override >= 0 ? form_override : mode == TSR_GELU_ERF ? FORM_ERF : FORM_TANH;
    status = gelu_launch(dev, &p, &cfg, form, q, event);
    if (tsr_op_build_fallback(dev, &tsr_op_gelu, &p, status, &cfg)) status = gelu_launch(dev, &p, &cfg, form, q, event);
done:
    return status;
}

tsr_status tsr_gelu(tsr_device *dev, const tsr_gelu_desc *desc, cl_mem x, cl_mem y, cl_command_queue queue,
                    cl_event *event) {
    if (!desc) {
        tsr_clear_diagnostics();
        if (event) *event = NULL;
        return tsr_fail(TSR_ERR_INVALID_ARG, "gelu: desc is NULL");
    }
    return gelu_run(dev, &gelu_call, (int)desc->mode, desc->x_type, x, desc->x_offset, desc->y_type, y, desc->y_offset,
                    desc->n, queue, event, -1);
}

tsr_status tsr_gelu_copy(tsr_device *dev, tsr_dtype x_type, cl_mem x, size_t x_off, tsr_dtype y_type, cl_mem y,
                         size_t y_off, size_t n, cl_command_queue queue, cl_event *event) {
    return gelu_run(dev, &gelu_call, TSR_GELU_TANH, x_type, x, x_off, y_type, y, y_off, n, queue, event, FORM_COPY);
}

tsr_status tsr_convert(tsr_device *dev, tsr_dtype src_type, cl_mem src, size_t src_off, tsr_dtype dst_type, cl_mem dst,
                       size_t dst_off, size_t n, cl_command_queue queue, cl_event *event) {
    return gelu_run(dev, &convert_call, TSR_GELU_TANH, src_type, src, src_off, dst_type, dst, dst_off, n, queue, event,
                    FORM_COPY);
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

tsr_status tsr_gelu_unfused(tsr_device *dev, const tsr_gelu_desc *desc, cl_mem x, cl_mem y, cl_command_queue queue,
                            cl_event *event) {
    tsr_clear_diagnostics();
    if (event) *event = NULL;
    if (!desc) return tsr_fail(TSR_ERR_INVALID_ARG, "gelu: desc is NULL");
    const tsr_gelu_mode mode = desc->mode;
    const size_t x_off = desc->x_offset, y_off = desc->y_offset, n = desc->n;
    gelu_problem p;
    tsr_status status =
        gelu_validate(dev, &gelu_call, (int)mode, desc->x_type, x, x_off, desc->y_type, y, y_off, n, &p);
    if (status != TSR_SUCCESS) return status;
    tsr_op_output(y);
    if (desc->x_type != TSR_F32 || desc->y_type != TSR_F32)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "tsr_gelu_unfused: fp32 only (%s is %s)",
                        desc->x_type != TSR_F32 ? "x" : "y",
                        tsr_dtype_str(desc->x_type != TSR_F32 ? desc->x_type : desc->y_type));
    cl_event prev = NULL;
    cl_kernel kernel = NULL;
    cl_command_queue q;
    TSR_CHECK(status, tsr_resolve_queue(dev, queue, &q), done);
    const ew_step *steps = mode == TSR_GELU_ERF ? erf_steps : tanh_steps;
    size_t nsteps = mode == TSR_GELU_ERF ? sizeof erf_steps / sizeof *erf_steps : sizeof tanh_steps / sizeof *tanh_steps;
    cl_program program = NULL;
    tsr_config cfg;
    tsr_op_default_config(&tsr_op_gelu, dev, "large", &cfg);
    char options[256];
    gelu_build_options(&cfg, gelu_variant(FORM_TANH, TSR_F32, TSR_F32), options, sizeof options);
    cl_int err;
    char kernels[256] = ""; /* every step's kernel: a binary without one is dropped and rebuilt */
    for (size_t i = 0, used = 0; i < nsteps && used < sizeof kernels; ++i)
        used += (size_t)snprintf(kernels + used, sizeof kernels - used, "%s%s", i ? ";" : "", steps[i].kernel);
    TSR_CHECK(status, tsr_program_for(dev, "gelu", options, kernels, &program), done);
    /* The temporaries are device workspaces, like a framework's caching allocator hands out. */
    pthread_mutex_lock(&dev->lock);
    cl_mem temp[2];
    cl_event wait[2];
    size_t temp_bytes;
    TSR_CHECK(status, tsr_size_mad("gelu: the unfused temporaries", n, sizeof(float), 0, &temp_bytes), unlock);
    TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_TEMP0, temp_bytes, &temp[0], &wait[0]), unlock);
    TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_TEMP1, temp_bytes, &temp[1], &wait[1]), unlock);
    for (size_t i = 0; i < nsteps; ++i) {
        const ew_step *st = &steps[i];
        cl_mem mems[4] = {x, temp[0], temp[1], y};
        cl_ulong offs[4] = {x_off, 0, 0, y_off};
        cl_ulong count = n;
        kernel = clCreateKernel(program, st->kernel, &err);
        TSR_CL_CHECK(status, err, unlock);
        cl_uint arg = 0;
#define SET(v) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(v), &(v)), unlock)
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
        TSR_CL_CHECK(status,
                     tsr_enqueue_kernel(q, kernel, 1, NULL, &global, NULL, nwaits, nwaits ? waits : NULL, &done),
                     unlock);
        if (prev) clReleaseEvent(prev);
        prev = done;
        clReleaseKernel(kernel);
        kernel = NULL;
    }
    tsr_workspace_set_last_use(dev, TSR_WS_TEMP0, prev);
    tsr_workspace_set_last_use(dev, TSR_WS_TEMP1, prev);
unlock:
    pthread_mutex_unlock(&dev->lock);
done:
    if (kernel) clReleaseKernel(kernel);
    if (prev) {
        if (event && status == TSR_SUCCESS) *event = prev;
        else clReleaseEvent(prev);
    }
    return status;
}

/* ---- the fixture: GELU of "N" elements (tanh form), "N erf", either with a dtype token ---- */

tsr_status tsr_gelu_shape_parse(const char *shape, size_t *n, int *mode, tsr_dtype *x_type, tsr_dtype *y_type) {
    *n = 0, *mode = TSR_GELU_TANH, *x_type = *y_type = TSR_F32;
    char words[3][32];
    int count = 0, used = 0, length = 0;
    const char *rest = shape;
    while (count < 3 && sscanf(rest, "%31s%n", words[count], &used) == 1)
        rest += used, ++count;
    if (count > 0 && sscanf(rest, " %n", &length) >= 0 && rest[length] == '\0') {
        size_t value = 0;
        int digits = 0;
        bool ok = isdigit((unsigned char)words[0][0]) && sscanf(words[0], "%zu%n", &value, &digits) == 1 &&
                  words[0][digits] == '\0' && value > 0;
        int w = 1;
        if (ok && w < count && strcmp(words[w], "erf") == 0) *mode = TSR_GELU_ERF, ++w;
        if (ok && w < count && tsr_dtype_spec_parse(words[w], x_type, y_type)) ++w;
        if (ok && w == count) {
            *n = value;
            return TSR_SUCCESS;
        }
    }
    *mode = TSR_GELU_TANH, *x_type = *y_type = TSR_F32;
    return tsr_fail(TSR_ERR_INVALID_ARG,
                    "gelu: shape '%s' is not 'N [erf] [DTYPE]' (N >= 1; DTYPE f16, bf16 or "
                    "IN/OUT of f32, f16, bf16, e.g. f16/f32)",
                    shape);
}

typedef struct gelu_fixture {
    gelu_problem p;
    float *x, *y; /* host copies, in fp32: x as rounded to x_type (what the device reads) */
} gelu_fixture;

/* not a multiple of any vector width: the tail path is checked too; in the order of gelu_classes */
static const char *const gelu_class_shapes[] = {"16777219", "65539", "16777219 erf", "65539 erf"};
/* Smaller problems of the same classes for slow devices (tsr_op.class_shapes_reduced), about an
 * eighth and a sixty-fourth of the work; fixture.problem_class checks each stays in its class. */
static const char *const gelu_class_shapes_reduced[] = {
    "2097155;524291",
    "",
    "2097155 erf;524291 erf",
    ""};
static const tsr_report_shape gelu_report_shapes[] = {
    {"gelu-16M", "16777216", "65536"},
    {"gelu-f16", "16777216 f16", "65536 f16"},
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

/* y poisoned with NaN (stored in y's type): a run must write every element */
static tsr_status gelu_fixture_poison(tsr_device *dev, gelu_fixture *t) {
    for (size_t i = 0; i < t->p.n; ++i)
        t->y[i] = NAN;
    return tsr_upload_typed(dev, t->p.y, t->p.y_type, t->y, t->p.n);
}

static tsr_status gelu_fixture_setup(tsr_device *dev, const char *shape, uint64_t seed, void **out) {
    size_t n = 0;
    int mode = 0;
    tsr_dtype x_type, y_type;
    tsr_status status = tsr_gelu_shape_parse(shape, &n, &mode, &x_type, &y_type);
    if (status != TSR_SUCCESS) return status;
    if (n > SIZE_MAX / sizeof(float)) return tsr_fail(TSR_ERR_OVERFLOW, "gelu: shape '%s' is too large", shape);
    gelu_fixture *t = calloc(1, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    t->p = (gelu_problem){.mode = mode, .n = n, .x_type = x_type, .y_type = y_type};
    t->x = malloc(n * sizeof(float));
    t->y = malloc(n * sizeof(float));
    cl_int err;
    if (!t->x || !t->y) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    /* Rounded to x's type: the reference is computed from exactly what the device reads. */
    tsr_random_fill(t->x, n, &seed, -5.0f, 5.0f);
    tsr_dtype_round_array(x_type, t->x, n);
    t->p.x = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, n * tsr_dtype_size(x_type), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    t->p.y = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, n * tsr_dtype_size(y_type), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    TSR_CHECK(status, tsr_upload_typed(dev, t->p.x, x_type, t->x, n), done);
    TSR_CHECK(status, gelu_fixture_poison(dev, t), done);
done:
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
    const gelu_problem *p = &t->p;
    cl_event done = NULL;
    tsr_status st =
        cfg ? gelu_launch(dev, p, cfg, p->mode == TSR_GELU_ERF ? FORM_ERF : FORM_TANH, queue,
                          first || last ? &done : NULL)
            : tsr_gelu(
                  dev,
                  &(tsr_gelu_desc){.mode = (tsr_gelu_mode)p->mode, .n = p->n, .x_type = p->x_type, .y_type = p->y_type},
                  p->x, p->y, queue, first || last ? &done : NULL);
    if (st != TSR_SUCCESS) return st;
    tsr_fixture_single_event(done, first, last);
    return TSR_SUCCESS;
}

static tsr_status gelu_fixture_check(tsr_device *dev, void *ctx, double *rel_err) {
    gelu_fixture *t = ctx;
    tsr_status st = tsr_download_typed(dev, t->p.y, t->p.y_type, t->y, t->p.n);
    if (st != TSR_SUCCESS) return st;
    /* The tuner rejects above 1e-4; a correct candidate is within 1e-6 (docs/gelu.md) beyond the
     * rounding of a 16-bit y. */
    *rel_err = tsr_gelu_max_error_stored(t->p.mode, t->p.y_type, t->x, t->y, t->p.n);
    return gelu_fixture_poison(dev, t); /* the next run cannot pass on this one's output */
}

/* 8 elementary operations per element (the unfused baseline's kernels); the bytes that must move
 * are x read once and y written once, each in its own type (8 per element in fp32) */
static void gelu_fixture_work(const void *ctx, double *flops, double *bytes) {
    const gelu_problem *p = &((const gelu_fixture *)ctx)->p;
    *flops = 8.0 * p->n;
    *bytes = (double)p->n * (double)(tsr_dtype_size(p->x_type) + tsr_dtype_size(p->y_type));
}

static void gelu_fixture_describe(const void *ctx, char *out, size_t size) {
    const gelu_problem *p = &((const gelu_fixture *)ctx)->p;
    char types[16];
    tsr_dtype_spec_format(p->x_type, p->y_type, types, sizeof types);
    snprintf(out, size, "%zu%s%s%s", p->n, p->mode == TSR_GELU_ERF ? " erf" : "", types[0] ? " " : "", types);
}

static int gelu_fixture_buffers(const void *ctx, cl_mem *buffers, int max) {
    const gelu_problem *p = &((const gelu_fixture *)ctx)->p;
    if (max > 0) buffers[0] = p->x;
    if (max > 1) buffers[1] = p->y;
    return 2;
}

static const char *gelu_tuning_space(const tsr_device *dev, const char *problem_class) {
    (void)problem_class; /* one space for every class */
    /* On CPUs interleaving only scatters each thread's stream. */
    /* CPUs that vectorize across work-items (llvmpipe): scalar or short vectors, GPU-like groups. */
    if (dev->info.type == TSR_DEVICE_CPU && tsr_device_lanes(&dev->info) == TSR_LANES_ACROSS_ITEMS)
        return "VW=1,2,4 VPT=1,2,4,8 WG=16,64,256 INTERLEAVE=0,1";
    if (dev->info.type == TSR_DEVICE_CPU) return "VW=4,8,16 VPT=1,2,4,8,16 WG=1,4,16,64,256 INTERLEAVE=0";
    return NULL;
}

static const char *gelu_fixture_class(const void *fixture) {
    return gelu_problem_class(&((const gelu_fixture *)fixture)->p);
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
    .program_variants = GELU_VARIANTS,
    .variant_serves_class = gelu_variant_serves_class,
    .build_options = gelu_build_options,
    .tuning_space = gelu_tuning_space,
    .rate_unit = "GB/s",
    .tolerance = 1e-6,
    .class_shapes = gelu_class_shapes,
    .class_shapes_reduced = gelu_class_shapes_reduced,
    .class_storage = TSR_CLASSES_PER_TYPE,
    .fixture = {.setup = gelu_fixture_setup, .run = gelu_fixture_run, .check = gelu_fixture_check,
                .work = gelu_fixture_work, .describe = gelu_fixture_describe, .buffers = gelu_fixture_buffers,
                .free = gelu_fixture_free, .problem_class = gelu_fixture_class},
    .demo = {.title = "gelu 1048576 elements", .shapes = {"1048576", "1048576 erf"}, .labels = {"tanh", "erf"},
             .runs = 3, .metric = "max error"},
    .report_shapes = gelu_report_shapes,
};
