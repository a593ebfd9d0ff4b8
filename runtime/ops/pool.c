/* The pool2d op (cl/pool.cl): max and average pooling as PyTorch's max_pool2d / avg_pool2d, NCHW or
 * NHWC, x and y stored as f32, f16 or bf16 each (fp32 arithmetic). Two kernel forms: windows (one
 * work-item a few outputs, vectorized along the contiguous dimension) and the global reduction
 * (kernel = the whole input: a work-group a plane in NCHW). The vector width and the reduction's
 * work-group size are tunable; classes "window" and "global" with 16-bit twins. */
#include "internal.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tuning parameters, X(NAME, KIND, DEFAULT, values...): see TSR_PARAM_DEF. */
#define POOL_PARAMS(X)                                                                                                 \
    X(VW, DEFINE, 8, 1, 2, 4, 8, 16)                 /* vector width along the contiguous dimension */                \
    X(WG, DEFINE, 1, 1, 2, 4, 8, 16, 32, 64, 128, 256) /* the global NCHW reduction's work-items a plane */    \
    X(WI, HOST, 64, 16, 32, 64, 128, 256)            /* work-items a group of the other kernels (WG 1: planes) */

enum { POOL_PARAMS(TSR_PARAM_INDEX) POOL_NPARAMS };
static const tsr_param_def pool_params[] = {POOL_PARAMS(TSR_PARAM_DEF)};

static const tsr_implementation pool_implementations[] = {{.name = "direct"}};

/* Program variants: the kind (max, average) times the storage types of x and y. The layout and the
 * form (window or global) are kernels of the same program. */
#define POOL_TYPES TSR_DTYPE_COUNT
#define POOL_VARIANTS (2 * POOL_TYPES * POOL_TYPES)

static int pool_variant(tsr_pool_kind kind, tsr_dtype x_type, tsr_dtype y_type) {
    return (int)kind + 2 * ((int)x_type * POOL_TYPES + (int)y_type);
}

static void pool_variant_types(int variant, int *kind, tsr_dtype types[2]) {
    *kind = variant % 2;
    types[0] = (tsr_dtype)(variant / 2 / POOL_TYPES);
    types[1] = (tsr_dtype)(variant / 2 % POOL_TYPES);
}

/* "window": any pooling with windows; "global": kernel = the whole input (one output a plane). */
static const char *const pool_classes[] = {"window", "global", NULL};

/* A validated problem: the descriptor with its defaults made explicit, and the output size. */
typedef struct pool_problem {
    tsr_pool2d_desc d;
    size_t out_h, out_w;
    bool global;
    cl_mem x, y;
} pool_problem;

static const char *pool_problem_class(const void *problem) {
    const pool_problem *p = problem;
    const tsr_dtype types[2] = {p->d.x_type, p->d.y_type};
    return tsr_op_class(&tsr_op_pool2d, p->global ? 1 : 0, types, 2);
}

static bool pool_variant_serves_class(const char *problem_class, int variant) {
    int kind;
    tsr_dtype types[2];
    pool_variant_types(variant, &kind, types);
    return tsr_dtype_types_serve_class(types, 2, problem_class);
}

/* PoCL-like CPUs (vectors inside a work-item): wide vectors, a plane per work-item for the global
 * form. CPUs that vectorize across items (llvmpipe) and GPUs: scalar items, adjacent items
 * adjacent outputs, a work-group per plane. Not tuned (see docs/ARCHITECTURE.md, "Pooling"). */
static const tsr_default pool_defaults[] = {
    {TSR_DEVICE_CPU, TSR_LANES_ACROSS_ITEMS, NULL, "VW=1 WG=16 WI=64"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, NULL, "VW=8 WG=1 WI=64"},
    {0, TSR_LANES_ANY, NULL, "VW=1 WG=64 WI=128"},
};

static bool pool_config_ok(const tsr_device *dev, const void *problem, const tsr_config *cfg) {
    (void)problem;
    const size_t wg = (size_t)cfg->values[P_WG], wi = (size_t)cfg->values[P_WI];
    return wg <= dev->info.max_work_group_size && wg <= dev->info.max_work_item_sizes[0] &&
           wi <= dev->info.max_work_group_size && wi <= dev->info.max_work_item_sizes[0] &&
           (wg > 1 || wi <= dev->info.max_work_item_sizes[1]);
}

/* fp32 programs carry no type defines (the kernel's types default to 0). */
static void pool_build_options(const tsr_config *cfg, int variant, char *out, size_t size) {
    int kind;
    tsr_dtype types[2];
    pool_variant_types(variant, &kind, types);
    tsr_config_defines(&tsr_op_pool2d, cfg, out, size);
    size_t used = strlen(out);
    used += (size_t)snprintf(out + used, size - used, " -DKIND=%d", kind);
    if (used < size && (types[0] || types[1]))
        snprintf(out + used, size - used, " -DX_TYPE=%d -DY_TYPE=%d", (int)types[0], (int)types[1]);
}

/* Sizes the kernels index with 32-bit integers: every extent of a window's arithmetic stays below
 * this (their sums and products with strides included), so nothing wraps. */
#define POOL_MAX_EXTENT ((size_t)INT_MAX / 4)

/* The descriptor's rules that need no buffer, its defaults made explicit into *out, and the output
 * size: PyTorch's pooling_output_shape and pool2d_shape_check. */
static tsr_status pool_check_desc(const tsr_pool2d_desc *desc, tsr_pool2d_desc *out, size_t *out_h, size_t *out_w) {
    if (!desc) return tsr_fail(TSR_ERR_INVALID_ARG, "pool2d: desc is NULL");
    tsr_pool2d_desc d = *desc;
    if (d.kind != TSR_POOL_MAX && d.kind != TSR_POOL_AVG)
        return tsr_fail(TSR_ERR_INVALID_ARG, "pool2d: kind must be TSR_POOL_MAX or TSR_POOL_AVG (got %d)", (int)d.kind);
    if (d.layout != TSR_NCHW && d.layout != TSR_NHWC)
        return tsr_fail(TSR_ERR_INVALID_ARG, "pool2d: layout must be TSR_NCHW or TSR_NHWC (got %d)", (int)d.layout);
    tsr_status st = TSR_SUCCESS;
    TSR_CHECK(st, tsr_dtype_check("pool2d: x_type", d.x_type), done);
    TSR_CHECK(st, tsr_dtype_check("pool2d: y_type", d.y_type), done);
    const struct {
        const char *name;
        size_t value;
    } positive[] = {{"batch", d.batch},         {"channels", d.channels}, {"in_height", d.in_height},
                    {"in_width", d.in_width},   {"kernel_h", d.kernel_h}, {"kernel_w", d.kernel_w}};
    for (int i = 0; i < TSR_COUNT(positive); ++i)
        if (positive[i].value == 0)
            return tsr_fail(TSR_ERR_INVALID_ARG, "pool2d: %s must be at least 1 (got 0)", positive[i].name);
    if (d.stride_h == 0) d.stride_h = d.kernel_h;
    if (d.stride_w == 0) d.stride_w = d.kernel_w;
    if (d.dilation_h == 0) d.dilation_h = 1;
    if (d.dilation_w == 0) d.dilation_w = 1;
    if (d.kind == TSR_POOL_AVG && (d.dilation_h != 1 || d.dilation_w != 1))
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "pool2d: average pooling has no dilation (dilation_h and dilation_w must be 0 or 1, got %zu "
                        "and %zu)",
                        d.dilation_h, d.dilation_w);
    if (d.pad_h > d.kernel_h / 2 || d.pad_w > d.kernel_w / 2)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "pool2d: padding must be at most half the kernel, as PyTorch's (pad_h %zu, pad_w %zu with a "
                        "%zux%zu kernel)",
                        d.pad_h, d.pad_w, d.kernel_h, d.kernel_w);
    const struct {
        const char *name;
        size_t value;
    } bounded[] = {{"in_height", d.in_height},   {"in_width", d.in_width},     {"kernel_h", d.kernel_h},
                   {"kernel_w", d.kernel_w},     {"stride_h", d.stride_h},     {"stride_w", d.stride_w},
                   {"dilation_h", d.dilation_h}, {"dilation_w", d.dilation_w}};
    for (int i = 0; i < TSR_COUNT(bounded); ++i)
        if (bounded[i].value > POOL_MAX_EXTENT)
            return tsr_fail(TSR_ERR_INVALID_ARG, "pool2d: %s is %zu, above the largest supported (%zu)",
                            bounded[i].name, bounded[i].value, POOL_MAX_EXTENT);
    const size_t n[2] = {d.in_height, d.in_width}, k[2] = {d.kernel_h, d.kernel_w}, s[2] = {d.stride_h, d.stride_w},
                 p[2] = {d.pad_h, d.pad_w}, dl[2] = {d.dilation_h, d.dilation_w};
    size_t o[2];
    for (int i = 0; i < 2; ++i) {
        /* The dilated kernel's extent and the padded input's (each below 2^31: no wrap in size_t). */
        const size_t extent = dl[i] * (k[i] - 1) + 1, padded = n[i] + 2 * p[i];
        if (extent > POOL_MAX_EXTENT)
            return tsr_fail(TSR_ERR_INVALID_ARG, "pool2d: the dilated kernel's %s (%zu) is above the largest supported",
                            i ? "width" : "height", extent);
        if (extent > padded)
            return tsr_fail(TSR_ERR_INVALID_ARG,
                            "pool2d: the output is empty: the %s kernel spans %zu (kernel %zu, dilation %zu) but the "
                            "padded input only %zu (%zu + 2 x %zu)",
                            i ? "width's" : "height's", extent, k[i], dl[i], padded, n[i], p[i]);
        size_t count = (padded - extent + (d.ceil_mode ? s[i] - 1 : 0)) / s[i] + 1;
        /* ceil_mode: the last window must start inside the input or its left padding. */
        if (d.ceil_mode && (count - 1) * s[i] >= n[i] + p[i]) --count;
        o[i] = count;
    }
    if (out_h) *out_h = o[0];
    if (out_w) *out_w = o[1];
    size_t planes, elements;
    TSR_CHECK(st, tsr_size_mad("pool2d: batch x channels", d.batch, d.channels, 0, &planes), done);
    TSR_CHECK(st, tsr_size_mad("pool2d: x's elements", d.in_height * d.in_width, planes, 0, &elements), done);
    TSR_CHECK(st, tsr_size_mad("pool2d: x_offset + x's elements", elements, 1, d.x_offset, &elements), done);
    TSR_CHECK(st, tsr_size_mad("pool2d: x's bytes", elements, tsr_dtype_size(d.x_type), 0, &elements), done);
    TSR_CHECK(st, tsr_size_mad("pool2d: y's elements", o[0] * o[1], planes, 0, &elements), done);
    TSR_CHECK(st, tsr_size_mad("pool2d: y_offset + y's elements", elements, 1, d.y_offset, &elements), done);
    TSR_CHECK(st, tsr_size_mad("pool2d: y's bytes", elements, tsr_dtype_size(d.y_type), 0, &elements), done);
    if (d.in_height * d.in_width > UINT32_MAX || planes > UINT32_MAX || d.channels > UINT32_MAX)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "pool2d: planes (%zu), channels (%zu) and a plane's elements (%zu) must each be below 2^32",
                        planes, d.channels, d.in_height * d.in_width);
    if (out) *out = d;
done:
    return st;
}

tsr_status tsr_pool2d_output_size(const tsr_pool2d_desc *desc, size_t *out_h, size_t *out_w) {
    tsr_clear_diagnostics();
    if (!out_h || !out_w) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_pool2d_output_size: out_h and out_w must be set");
    return pool_check_desc(desc, NULL, out_h, out_w);
}

/* Kernel = the whole input with no padding: one output a plane, any stride. */
static bool pool_is_global(const tsr_pool2d_desc *d) {
    return d->kernel_h == d->in_height && d->kernel_w == d->in_width && d->pad_h == 0 && d->pad_w == 0 &&
           d->dilation_h == 1 && d->dilation_w == 1;
}

static tsr_status pool_validate(const tsr_device *dev, const tsr_pool2d_desc *desc, cl_mem x, cl_mem y,
                                pool_problem *p) {
    if (!dev) return tsr_fail(TSR_ERR_INVALID_ARG, "device is NULL");
    tsr_status st = TSR_SUCCESS;
    memset(p, 0, sizeof *p);
    TSR_CHECK(st, pool_check_desc(desc, &p->d, &p->out_h, &p->out_w), done);
    if (!x) return tsr_fail(TSR_ERR_INVALID_ARG, "pool2d: buffer x is NULL");
    if (!y) return tsr_fail(TSR_ERR_INVALID_ARG, "pool2d: buffer y is NULL");
    p->x = x, p->y = y;
    p->global = pool_is_global(&p->d);
    const tsr_pool2d_desc *d = &p->d;
    /* pool_check_desc checked these products for overflow. */
    const size_t planes = d->batch * d->channels, x_count = planes * d->in_height * d->in_width,
                 y_count = planes * p->out_h * p->out_w;
    TSR_CHECK(st, tsr_check_buffer_typed(dev, x, "x", d->x_offset + x_count, d->x_type), done);
    TSR_CHECK(st, tsr_check_buffer_typed(dev, y, "y", d->y_offset + y_count, d->y_type), done);
    TSR_CHECK(st, tsr_check_disjoint_typed("pool2d", x, "x", d->x_offset, x_count, d->x_type, y, "y", d->y_offset,
                                           y_count, d->y_type, false),
              done);
done:
    return st;
}

static size_t ceil_div(size_t x, size_t to) { return (x + to - 1) / to; }

static tsr_status pool_launch(tsr_device *dev, const pool_problem *p, const tsr_config *cfg, cl_command_queue queue,
                              cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    const tsr_pool2d_desc *d = &p->d;
    char options[256];
    pool_build_options(cfg, pool_variant(d->kind, d->x_type, d->y_type), options, sizeof options);
    const bool nhwc = d->layout == TSR_NHWC;
    const char *name = p->global ? (nhwc ? "pool2d_global_nhwc" : "pool2d_global_nchw")
                                 : (nhwc ? "pool2d_nhwc" : "pool2d_nchw");
    cl_program program = NULL;
    cl_kernel kernel = NULL;
    cl_int err;
    const size_t vw = (size_t)cfg->values[P_VW], wg = (size_t)cfg->values[P_WG];
    TSR_CHECK(status, tsr_program_for(dev, "pool", options, "pool2d_nchw;pool2d_nhwc;pool2d_global_nchw;pool2d_global_nhwc", &program), done);
    kernel = clCreateKernel(program, name, &err);
    TSR_CL_CHECK(status, err, done);
    cl_uint arg = 0;
#define SET(value) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(value), &(value)), done)
    cl_ulong x_off = d->x_offset, y_off = d->y_offset;
    const size_t wi = (size_t)cfg->values[P_WI];
    size_t global[2], local[2] = {wi, 1};
    cl_uint dims = 1;
    cl_ulong planes = d->batch * d->channels, batch = d->batch;
    if (p->global) {
        cl_ulong size = d->in_height * d->in_width;
        if (nhwc) {
            cl_uint c = (cl_uint)d->channels;
            SET(c);
            SET(batch);
            TSR_CHECK(status, tsr_size_mad("pool2d: the work-items", ceil_div(d->channels, vw), d->batch, 0, &global[0]),
                      done);
        } else {
            /* WG items a plane; with WG 1, WI planes a group */
            SET(planes);
            local[0] = wg, local[1] = wg > 1 ? 1 : wi, dims = 2;
            global[0] = wg, global[1] = ceil_div(planes, local[1]) * local[1];
        }
        SET(size);
    } else {
        cl_uint geometry[13] = {(cl_uint)d->channels, (cl_uint)d->in_height, (cl_uint)d->in_width,
                                (cl_uint)p->out_h,    (cl_uint)p->out_w,     (cl_uint)d->kernel_h,
                                (cl_uint)d->kernel_w, (cl_uint)d->stride_h,  (cl_uint)d->stride_w,
                                (cl_uint)d->pad_h,    (cl_uint)d->pad_w,     (cl_uint)d->dilation_h,
                                (cl_uint)d->dilation_w};
        for (int i = 0; i < 13; ++i) SET(geometry[i]); /* PH and PW are int in the kernel: same bits */
        cl_int include_pad = d->exclude_pad ? 0 : 1;
        SET(include_pad);
        /* an item an output row (NCHW) or pixel (NHWC) */
        cl_ulong items = nhwc ? d->batch * p->out_h * p->out_w : planes * p->out_h;
        SET(items);
        global[0] = items;
    }
    if (dims == 1) global[0] = ceil_div(global[0], wi) * wi;
    SET(p->x);
    SET(x_off);
    SET(p->y);
    SET(y_off);
#undef SET
    TSR_CL_CHECK(status,
                 tsr_enqueue_kernel(queue, kernel, dims, NULL, global, local, 0, NULL, event),
                 done);
done:
    if (kernel) clReleaseKernel(kernel);
    return status;
}

tsr_status tsr_pool2d(tsr_device *dev, const tsr_pool2d_desc *desc, cl_mem x, cl_mem y, cl_command_queue queue,
                      cl_event *event) {
    tsr_clear_diagnostics();
    if (event) *event = NULL;
    pool_problem p;
    tsr_status status = pool_validate(dev, desc, x, y, &p);
    if (status != TSR_SUCCESS) return status;
    tsr_op_output(y);
    cl_command_queue q;
    TSR_CHECK(status, tsr_resolve_queue(dev, queue, &q), done);
    tsr_config cfg;
    TSR_CHECK(status, tsr_op_config(dev, &tsr_op_pool2d, &p, &cfg), done);
    status = pool_launch(dev, &p, &cfg, q, event);
    if (tsr_op_build_fallback(dev, &tsr_op_pool2d, &p, status, &cfg)) status = pool_launch(dev, &p, &cfg, q, event);
done:
    return status;
}

/* ---- the fixture: "NxCxHxW max|avg kK[xK] [sS[xS]] [pP[xP]] [dD[xD]] [ceil] [exclude] [nhwc] [DTYPE]" ---- */

/* "3" or "3x2" after a one-letter prefix into a (h, w) pair. */
static bool parse_pair(const char *word, char prefix, size_t *h, size_t *w) {
    if (word[0] != prefix || !isdigit((unsigned char)word[1])) return false;
    size_t a = 0, b = 0;
    int used = 0;
    if (sscanf(word + 1, "%zux%zu%n", &a, &b, &used) == 2 && word[1 + used] == '\0' &&
        isdigit((unsigned char)word[1 + strcspn(word + 1, "x") + 1])) {
        *h = a, *w = b;
        return true;
    }
    if (sscanf(word + 1, "%zu%n", &a, &used) == 1 && word[1 + used] == '\0') {
        *h = *w = a;
        return true;
    }
    return false;
}

tsr_status tsr_pool2d_shape_parse(const char *shape, tsr_pool2d_desc *desc) {
    tsr_pool2d_desc d = {0};
    char words[12][32];
    int count = 0, used = 0, length = 0;
    const char *rest = shape;
    while (count < 12 && sscanf(rest, "%31s%n", words[count], &used) == 1) rest += used, ++count;
    bool ok = count >= 3 && sscanf(rest, " %n", &length) >= 0 && rest[length] == '\0';
    if (ok) {
        int digits = 0;
        ok = isdigit((unsigned char)words[0][0]) &&
             sscanf(words[0], "%zux%zux%zux%zu%n", &d.batch, &d.channels, &d.in_height, &d.in_width, &digits) == 4 &&
             words[0][digits] == '\0' && !strstr(words[0], "x-") && !strstr(words[0], "x+") &&
             !strstr(words[0], "x ");
    }
    if (ok) {
        if (strcmp(words[1], "max") == 0) d.kind = TSR_POOL_MAX;
        else if (strcmp(words[1], "avg") == 0) d.kind = TSR_POOL_AVG;
        else ok = false;
    }
    ok = ok && parse_pair(words[2], 'k', &d.kernel_h, &d.kernel_w);
    bool seen[7] = {false};
    for (int w = 3; ok && w < count; ++w) {
        tsr_dtype in = TSR_F32, out = TSR_F32;
        const char *word = words[w];
        int which = -1;
        if (parse_pair(word, 's', &d.stride_h, &d.stride_w)) which = 0;
        else if (parse_pair(word, 'p', &d.pad_h, &d.pad_w)) which = 1;
        else if (parse_pair(word, 'd', &d.dilation_h, &d.dilation_w)) which = 2;
        else if (strcmp(word, "ceil") == 0) d.ceil_mode = 1, which = 3;
        else if (strcmp(word, "exclude") == 0) d.exclude_pad = 1, which = 4;
        else if (strcmp(word, "nhwc") == 0) d.layout = TSR_NHWC, which = 5;
        else if (tsr_dtype_spec_parse(word, &in, &out)) d.x_type = in, d.y_type = out, which = 6;
        ok = which >= 0 && !seen[which];
        if (ok) seen[which] = true;
    }
    if (ok && pool_check_desc(&d, NULL, &(size_t){0}, &(size_t){0}) == TSR_SUCCESS) {
        *desc = d;
        return TSR_SUCCESS;
    }
    if (!ok)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "pool2d: shape '%s' is not 'NxCxHxW max|avg kK[xK] [sS[xS]] [pP[xP]] [dD[xD]] [ceil] [exclude] "
                        "[nhwc] [DTYPE]' (DTYPE f16, bf16 or IN/OUT of f32, f16, bf16, e.g. f16/f32)",
                        shape);
    char why[512];
    tsr_strlcpy(why, tsr_last_error(), sizeof why);
    return tsr_fail(TSR_ERR_INVALID_ARG, "shape '%s': %s", shape, why);
}

/* " s3" or " s3x2" (a leading space), appended to out at *used. */
static void format_pair(char *out, size_t size, size_t *used, const char *prefix, size_t h, size_t w) {
    if (*used >= size) return;
    const int n = h == w ? snprintf(out + *used, size - *used, "%s%zu", prefix, h)
                         : snprintf(out + *used, size - *used, "%s%zux%zu", prefix, h, w);
    if (n > 0) *used += (size_t)n;
}

void tsr_pool2d_shape_format(const tsr_pool2d_desc *desc, char *out, size_t size) {
    tsr_pool2d_desc d;
    if (pool_check_desc(desc, &d, NULL, NULL) != TSR_SUCCESS) d = *desc;
    char types[16];
    tsr_dtype_spec_format(d.x_type, d.y_type, types, sizeof types);
    size_t used = 0;
    int n = snprintf(out, size, "%zux%zux%zux%zu %s", d.batch, d.channels, d.in_height, d.in_width,
                     d.kind == TSR_POOL_MAX ? "max" : "avg");
    if (n < 0) return;
    used = (size_t)n;
    format_pair(out, size, &used, " k", d.kernel_h, d.kernel_w);
    if (d.stride_h != d.kernel_h || d.stride_w != d.kernel_w) format_pair(out, size, &used, " s", d.stride_h, d.stride_w);
    if (d.pad_h || d.pad_w) format_pair(out, size, &used, " p", d.pad_h, d.pad_w);
    if (d.dilation_h > 1 || d.dilation_w > 1) format_pair(out, size, &used, " d", d.dilation_h, d.dilation_w);
    if (used < size)
        snprintf(out + used, size - used, "%s%s%s%s%s", d.ceil_mode ? " ceil" : "",
                 d.kind == TSR_POOL_AVG && d.exclude_pad ? " exclude" : "", d.layout == TSR_NHWC ? " nhwc" : "",
                 types[0] ? " " : "", types);
}

typedef struct pool_fixture {
    pool_problem p;
    size_t x_count, y_count;
    float *x, *y; /* host copies in fp32: x as rounded to its type */
    double *reference;
} pool_fixture;

static const char *const pool_class_shapes[] = {"8x64x112x112 max k3 s2 p1", "8x2048x7x7 avg k7"};
/* Smaller problems of the same classes for slow devices (tsr_op.class_shapes_reduced), about an
 * eighth and a sixty-fourth of the work; fixture.problem_class checks each stays in its class. */
static const char *const pool_class_shapes_reduced[] = {
    "1x64x112x112 max k3 s2 p1;1x16x56x56 max k3 s2 p1",
    "1x2048x7x7 avg k7;1x256x7x7 avg k7"};
static const tsr_report_shape pool_report_shapes[] = {
    {"pool-resnet50-max", "8x64x112x112 max k3 s2 p1", "1x8x17x17 max k3 s2 p1"},
    {"pool-resnet50-gap", "8x2048x7x7 avg k7", "1x64x7x7 avg k7"},
    {NULL, NULL, NULL},
};

static void pool_fixture_free(void *ctx) {
    pool_fixture *t = ctx;
    if (!t) return;
    if (t->p.x) clReleaseMemObject(t->p.x);
    if (t->p.y) clReleaseMemObject(t->p.y);
    free(t->x);
    free(t->y);
    free(t->reference);
    free(t);
}

static tsr_status pool_fixture_poison(tsr_device *dev, pool_fixture *t) {
    for (size_t i = 0; i < t->y_count; ++i) t->y[i] = NAN;
    return tsr_upload_typed(dev, t->p.y, t->p.d.y_type, t->y, t->y_count);
}

static tsr_status pool_fixture_setup(tsr_device *dev, const char *shape, uint64_t seed, void **out) {
    tsr_pool2d_desc desc;
    tsr_status status = tsr_pool2d_shape_parse(shape, &desc);
    if (status != TSR_SUCCESS) return status;
    pool_fixture *t = calloc(1, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    TSR_CHECK(status, pool_check_desc(&desc, &t->p.d, &t->p.out_h, &t->p.out_w), done);
    const tsr_pool2d_desc *d = &t->p.d;
    t->p.global = pool_is_global(d);
    const size_t planes = d->batch * d->channels;
    t->x_count = planes * d->in_height * d->in_width;
    t->y_count = planes * t->p.out_h * t->p.out_w;
    if (t->x_count > SIZE_MAX / sizeof(double) || t->y_count > SIZE_MAX / sizeof(double)) {
        status = tsr_fail(TSR_ERR_OVERFLOW, "pool2d: shape '%s' is too large", shape);
        goto done;
    }
    t->x = malloc(t->x_count * sizeof(float));
    t->y = malloc(t->y_count * sizeof(float));
    t->reference = malloc(t->y_count * sizeof(double));
    if (!t->x || !t->y || !t->reference) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    tsr_random_fill(t->x, t->x_count, &seed, -2.0f, 2.0f);
    tsr_dtype_round_array(d->x_type, t->x, t->x_count);
    tsr_pool2d_reference(d, t->x, t->reference);
    cl_int err;
    t->p.x = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, t->x_count * tsr_dtype_size(d->x_type), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    t->p.y = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, t->y_count * tsr_dtype_size(d->y_type), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    TSR_CHECK(status, tsr_upload_typed(dev, t->p.x, d->x_type, t->x, t->x_count), done);
    TSR_CHECK(status, pool_fixture_poison(dev, t), done);
done:
    if (status != TSR_SUCCESS) {
        pool_fixture_free(t);
        return status;
    }
    *out = t;
    return TSR_SUCCESS;
}

static tsr_status pool_fixture_run(tsr_device *dev, void *ctx, const tsr_config *cfg, cl_command_queue queue,
                                   cl_event *first, cl_event *last) {
    pool_fixture *t = ctx;
    cl_event done = NULL;
    tsr_status st = cfg ? pool_launch(dev, &t->p, cfg, queue, first || last ? &done : NULL)
                        : tsr_pool2d(dev, &t->p.d, t->p.x, t->p.y, queue, first || last ? &done : NULL);
    if (st != TSR_SUCCESS) return st;
    tsr_fixture_single_event(done, first, last);
    return TSR_SUCCESS;
}

static tsr_status pool_fixture_check(tsr_device *dev, void *ctx, double *rel_err) {
    pool_fixture *t = ctx;
    tsr_status st = tsr_download_typed(dev, t->p.y, t->p.d.y_type, t->y, t->y_count);
    if (st != TSR_SUCCESS) return st;
    *rel_err = tsr_rel_error(t->y, t->reference, t->y_count);
    return pool_fixture_poison(dev, t); /* the next run cannot pass on this one's output */
}

/* One operation a window element; the bytes that must move: x and y once each in their types. */
static void pool_fixture_work(const void *ctx, double *flops, double *bytes) {
    const pool_fixture *t = ctx;
    const tsr_pool2d_desc *d = &t->p.d;
    *flops = (double)t->y_count * (double)d->kernel_h * (double)d->kernel_w;
    *bytes = (double)t->x_count * (double)tsr_dtype_size(d->x_type) +
             (double)t->y_count * (double)tsr_dtype_size(d->y_type);
}

static void pool_fixture_describe(const void *ctx, char *out, size_t size) {
    tsr_pool2d_shape_format(&((const pool_fixture *)ctx)->p.d, out, size);
}

static int pool_fixture_buffers(const void *ctx, cl_mem *buffers, int max) {
    const pool_problem *p = &((const pool_fixture *)ctx)->p;
    if (max > 0) buffers[0] = p->x;
    if (max > 1) buffers[1] = p->y;
    return 2;
}

/* fp32 sums over the window (max: exact), and the 16-bit output's own rounding. */
static double pool_fixture_tolerance(const void *ctx) {
    const tsr_pool2d_desc *d = &((const pool_fixture *)ctx)->p.d;
    const double bound = tsr_dtype_error_bound(d->y_type, (double)d->kernel_h * (double)d->kernel_w);
    return bound > tsr_op_pool2d.tolerance ? bound : tsr_op_pool2d.tolerance;
}

static const char *pool_tuning_space(const tsr_device *dev, const char *problem_class) {
    (void)problem_class; /* one space for every class */
    if (dev->info.type == TSR_DEVICE_CPU && tsr_device_lanes(&dev->info) != TSR_LANES_ACROSS_ITEMS)
        return "VW=4,8,16 WG=1,2,4,8 WI=16,64,256";
    return "VW=1,2,4 WG=16,32,64,128,256 WI=32,64,128,256";
}

static const char *pool_fixture_class(const void *fixture) {
    return pool_problem_class(&((const pool_fixture *)fixture)->p);
}

const tsr_op tsr_op_pool2d = {
    .name = "pool2d",
    .source_name = "pool",
    .params = pool_params,
    .nparams = POOL_NPARAMS,
    .classes = pool_classes,
    .problem_class = pool_problem_class,
    .defaults = pool_defaults,
    .ndefaults = TSR_COUNT(pool_defaults),
    .implementations = pool_implementations,
    .nimplementations = TSR_COUNT(pool_implementations),
    .config_ok = pool_config_ok,
    .program_variants = POOL_VARIANTS,
    .variant_serves_class = pool_variant_serves_class,
    .build_options = pool_build_options,
    .tuning_space = pool_tuning_space,
    .rate_unit = "GB/s",
    .tolerance = 1e-5,
    .class_shapes = pool_class_shapes,
    .class_shapes_reduced = pool_class_shapes_reduced,
    .class_storage = TSR_CLASSES_PER_TYPE,
    .fixture = {.setup = pool_fixture_setup, .run = pool_fixture_run, .check = pool_fixture_check,
                .work = pool_fixture_work, .describe = pool_fixture_describe, .buffers = pool_fixture_buffers,
                .free = pool_fixture_free, .problem_class = pool_fixture_class, .tolerance = pool_fixture_tolerance},
    .demo = {.title = "pool2d (ResNet-50)",
             .shapes = {"1x64x112x112 max k3 s2 p1", "1x2048x7x7 avg k7"},
             .labels = {"max 3x3/2 on 1x64x112x112", "global avg on 1x2048x7x7"},
             .runs = 5},
    .report_shapes = pool_report_shapes,
};
