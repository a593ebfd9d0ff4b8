/* The LayerNorm op with a fused residual add (cl/layernorm.cl): per row, s = x + residual (or x),
 * y = (s - mean) / sqrt(var + eps) * gamma + beta with the biased variance. x, residual and y may
 * be stored as f32, f16 or bf16 each (gamma and beta fp32); the arithmetic is fp32. Tuned: the
 * work-group size, the rows a group takes and the vector width, with classes by row length. */
#include "internal.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tuning parameters, X(NAME, KIND, DEFAULT, values...): see TSR_PARAM_DEF. */
#define LAYERNORM_PARAMS(X)                                                                                            \
    X(WG, DEFINE, 1, 1, 2, 4, 8, 16, 32, 64, 128, 256) /* work-items per row (the reduction's size) */                 \
    X(VW, DEFINE, 8, 1, 2, 4, 8, 16)                   /* vector width */                                              \
    X(RPG, HOST, 1, 1, 2, 4, 8, 16)                    /* rows a work-group takes, one after the other */

enum { LAYERNORM_PARAMS(TSR_PARAM_INDEX) LAYERNORM_NPARAMS };
static const tsr_param_def layernorm_params[] = {LAYERNORM_PARAMS(TSR_PARAM_DEF)};

static const tsr_implementation layernorm_implementations[] = {{.name = "fused"}};

/* Program variants: the residual (none, or its storage type) times the storage types of x and y. */
#define LN_TYPES TSR_DTYPE_COUNT /* tsr_dtype's values 0 .. count - 1 */
#define LN_RESIDUALS (1 + LN_TYPES)
#define LN_VARIANTS (LN_RESIDUALS * LN_TYPES * LN_TYPES)

static int layernorm_variant(bool residual, tsr_dtype x_type, tsr_dtype r_type, tsr_dtype y_type) {
    return (residual ? 1 + (int)r_type : 0) + LN_RESIDUALS * ((int)x_type * LN_TYPES + (int)y_type);
}

/* types[1] is f32 without a residual (the kernel does not read it). */
static void layernorm_variant_types(int variant, bool *residual, tsr_dtype types[3]) {
    const int r = variant % LN_RESIDUALS, t = variant / LN_RESIDUALS;
    *residual = r > 0;
    types[0] = (tsr_dtype)(t / LN_TYPES);
    types[1] = (tsr_dtype)(r > 0 ? r - 1 : 0);
    types[2] = (tsr_dtype)(t % LN_TYPES);
}

/* By row length: short rows want several rows per work-group (and on GPUs few items a row), long
 * ones a whole group a row; BERT's 384, 768 and 1024 are "medium". Each has 16-bit twins
 * ("medium-f16", TSR_CLASSES_PER_TYPE) that use the fp32 class's entry until tuned themselves. */
static const char *const layernorm_classes[] = {"medium", "narrow", "wide", NULL};
#define LN_NARROW_BELOW 256 /* cols */
#define LN_WIDE_ABOVE 2048

typedef struct layernorm_problem {
    size_t rows, cols;
    float eps;
    cl_mem x, r, gamma, beta, y; /* r NULL: no residual */
    size_t x_off, r_off, gamma_off, beta_off, y_off;
    size_t x_stride, r_stride, y_stride; /* resolved: at least cols */
    tsr_dtype types[3];                  /* x, residual (f32 when there is none), y */
} layernorm_problem;

static int layernorm_base_class(size_t cols) { return cols < LN_NARROW_BELOW ? 1 : cols > LN_WIDE_ABOVE ? 2 : 0; }

static const char *layernorm_problem_class(const void *problem) {
    const layernorm_problem *p = problem;
    return tsr_op_class(&tsr_op_layernorm, layernorm_base_class(p->cols), p->types, 3);
}

static bool layernorm_variant_serves_class(const char *problem_class, int variant) {
    bool residual;
    tsr_dtype types[3];
    layernorm_variant_types(variant, &residual, types);
    return tsr_dtype_types_serve_class(types, 3, problem_class);
}

/* PoCL-like CPUs (vectors inside a work-item): one item a row, long vectors, a few rows per group
 * so a group is worth its scheduling. CPUs that vectorize across items (llvmpipe) and GPUs: a
 * group per row, adjacent items reading adjacent vectors. */
static const tsr_default layernorm_defaults[] = {
    {TSR_DEVICE_CPU, TSR_LANES_ACROSS_ITEMS, NULL, "WG=64 VW=1 RPG=1"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "narrow", "WG=1 VW=8 RPG=8"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, NULL, "WG=1 VW=16 RPG=2"},
    {0, TSR_LANES_ANY, "narrow", "WG=32 VW=1 RPG=4"},
    {0, TSR_LANES_ANY, "wide", "WG=256 VW=4 RPG=1"},
    {0, TSR_LANES_ANY, NULL, "WG=128 VW=2 RPG=1"},
};

static bool layernorm_config_ok(const tsr_device *dev, const void *problem, const tsr_config *cfg) {
    (void)problem;
    const int *v = cfg->values;
    return (size_t)v[P_WG] <= dev->info.max_work_group_size && (size_t)v[P_WG] <= dev->info.max_work_item_sizes[0];
}

/* fp32 programs carry no type defines (the kernel's types default to 0). */
static void layernorm_build_options(const tsr_config *cfg, int variant, char *out, size_t size) {
    bool residual;
    tsr_dtype types[3];
    layernorm_variant_types(variant, &residual, types);
    tsr_config_defines(&tsr_op_layernorm, cfg, out, size);
    size_t used = strlen(out);
    used += (size_t)snprintf(out + used, size - used, " -DRESIDUAL=%d", residual ? 1 : 0);
    if (used < size && (types[0] || types[1] || types[2]))
        snprintf(out + used, size - used, " -DX_TYPE=%d -DR_TYPE=%d -DY_TYPE=%d", (int)types[0], (int)types[1],
                 (int)types[2]);
}

static size_t ceil_div(size_t x, size_t to) { return (x + to - 1) / to; }

/* Elements a strided tensor spans from its first element: (rows - 1) * stride + cols. */
static tsr_status layernorm_span(const char *what, const layernorm_problem *p, size_t stride, size_t *span) {
    return tsr_size_mad(what, p->rows - 1, stride, p->cols, span);
}

/* y against an input: disjoint, or (allow_same) exactly the same elements in the same type. */
static tsr_status layernorm_check_output(const layernorm_problem *p, cl_mem in, const char *in_name, size_t in_off,
                                         size_t in_span, tsr_dtype in_type, size_t in_stride, size_t y_span,
                                         bool allow_same) {
    tsr_ranges relation;
    tsr_status st =
        tsr_ranges_relate_typed(in, in_off, in_span, in_type, p->y, p->y_off, y_span, p->types[2], &relation);
    if (st != TSR_SUCCESS) return st;
    if (relation == TSR_RANGES_SAME && allow_same) {
        if (in_type != p->types[2])
            return tsr_fail(TSR_ERR_INVALID_ARG,
                            "layernorm: y (%s) and %s (%s) are the same bytes: in place needs one type",
                            tsr_dtype_str(p->types[2]), in_name, tsr_dtype_str(in_type));
        if (p->rows > 1 && in_stride != p->y_stride)
            return tsr_fail(TSR_ERR_INVALID_ARG,
                            "layernorm: y and %s start at the same byte but their strides differ (%zu and %zu): in "
                            "place needs the same layout",
                            in_name, p->y_stride, in_stride);
        return TSR_SUCCESS;
    }
    return tsr_check_disjoint_typed("layernorm", in, in_name, in_off, in_span, in_type, p->y, "y", p->y_off, y_span,
                                    p->types[2], allow_same);
}

static tsr_status layernorm_validate(const tsr_device *dev, const tsr_layernorm_desc *d, cl_mem x, cl_mem r,
                                     cl_mem gamma, cl_mem beta, cl_mem y, layernorm_problem *p) {
    if (!dev) return tsr_fail(TSR_ERR_INVALID_ARG, "device is NULL");
    if (!d) return tsr_fail(TSR_ERR_INVALID_ARG, "layernorm: desc is NULL");
    tsr_status st = TSR_SUCCESS;
    TSR_CHECK(st, tsr_dtype_check("layernorm: x_type", d->x_type), done);
    TSR_CHECK(st, tsr_dtype_check("layernorm: y_type", d->y_type), done);
    if (r) TSR_CHECK(st, tsr_dtype_check("layernorm: residual_type", d->residual_type), done);
    if (d->rows == 0 || d->cols == 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "layernorm: rows and cols must be at least 1 (got %zu x %zu)", d->rows,
                        d->cols);
    if (!(d->eps > 0.0f) || !isfinite(d->eps))
        return tsr_fail(TSR_ERR_INVALID_ARG, "layernorm: eps must be positive and finite (got %g)", (double)d->eps);
    if (!x) return tsr_fail(TSR_ERR_INVALID_ARG, "layernorm: buffer x is NULL");
    if (!gamma) return tsr_fail(TSR_ERR_INVALID_ARG, "layernorm: buffer gamma is NULL");
    if (!beta) return tsr_fail(TSR_ERR_INVALID_ARG, "layernorm: buffer beta is NULL");
    if (!y) return tsr_fail(TSR_ERR_INVALID_ARG, "layernorm: buffer y is NULL");
    const struct {
        const char *name;
        size_t stride;
    } strides[3] = {
        {"x_stride", d->x_stride}, {"residual_stride", r ? d->residual_stride : 0}, {"y_stride", d->y_stride}};
    for (int i = 0; i < 3; ++i)
        if (strides[i].stride != 0 && strides[i].stride < d->cols)
            return tsr_fail(TSR_ERR_INVALID_ARG,
                            "layernorm: %s must be 0 (contiguous) or at least cols (got %zu < %zu)", strides[i].name,
                            strides[i].stride, d->cols);
    *p = (layernorm_problem){.rows = d->rows,
                             .cols = d->cols,
                             .eps = d->eps,
                             .x = x,
                             .r = r,
                             .gamma = gamma,
                             .beta = beta,
                             .y = y,
                             .x_off = d->x_offset,
                             .r_off = r ? d->residual_offset : 0,
                             .gamma_off = d->gamma_offset,
                             .beta_off = d->beta_offset,
                             .y_off = d->y_offset,
                             .x_stride = d->x_stride ? d->x_stride : d->cols,
                             .r_stride = r && d->residual_stride ? d->residual_stride : d->cols,
                             .y_stride = d->y_stride ? d->y_stride : d->cols,
                             .types = {d->x_type, r ? d->residual_type : TSR_F32, d->y_type}};
    /* Spans and ends, checked: a wrapped end would pass the buffer checks. */
    size_t x_span, r_span = 0, y_span, x_end, r_end = 0, y_end, gamma_end, beta_end, bytes;
    TSR_CHECK(st, layernorm_span("layernorm: the elements x spans", p, p->x_stride, &x_span), done);
    TSR_CHECK(st, layernorm_span("layernorm: the elements y spans", p, p->y_stride, &y_span), done);
    if (r) TSR_CHECK(st, layernorm_span("layernorm: the elements residual spans", p, p->r_stride, &r_span), done);
    TSR_CHECK(st, tsr_size_mad("layernorm: x_offset + x's span", x_span, 1, p->x_off, &x_end), done);
    TSR_CHECK(st, tsr_size_mad("layernorm: y_offset + y's span", y_span, 1, p->y_off, &y_end), done);
    if (r)
        TSR_CHECK(st, tsr_size_mad("layernorm: residual_offset + residual's span", r_span, 1, p->r_off, &r_end), done);
    TSR_CHECK(st, tsr_size_mad("layernorm: gamma_offset + cols", p->cols, 1, p->gamma_off, &gamma_end), done);
    TSR_CHECK(st, tsr_size_mad("layernorm: beta_offset + cols", p->cols, 1, p->beta_off, &beta_end), done);
    TSR_CHECK(st, tsr_size_mad("layernorm: the bytes x spans", x_end, tsr_dtype_size(p->types[0]), 0, &bytes), done);
    TSR_CHECK(st, tsr_size_mad("layernorm: the bytes y spans", y_end, tsr_dtype_size(p->types[2]), 0, &bytes), done);
    if (r)
        TSR_CHECK(st,
                  tsr_size_mad("layernorm: the bytes residual spans", r_end, tsr_dtype_size(p->types[1]), 0, &bytes),
                  done);
    TSR_CHECK(st, tsr_size_mad("layernorm: the bytes gamma spans", gamma_end, sizeof(float), 0, &bytes), done);
    TSR_CHECK(st, tsr_size_mad("layernorm: the bytes beta spans", beta_end, sizeof(float), 0, &bytes), done);
    TSR_CHECK(st, tsr_check_buffer_typed(dev, x, "x", x_end, p->types[0]), done);
    if (r) TSR_CHECK(st, tsr_check_buffer_typed(dev, r, "residual", r_end, p->types[1]), done);
    TSR_CHECK(st, tsr_check_buffer_typed(dev, gamma, "gamma", gamma_end, TSR_F32), done);
    TSR_CHECK(st, tsr_check_buffer_typed(dev, beta, "beta", beta_end, TSR_F32), done);
    TSR_CHECK(st, tsr_check_buffer_typed(dev, y, "y", y_end, p->types[2]), done);
    /* By memory, not handle (sub-buffers of one parent alias too): y may be x or the residual
     * exactly, and may not touch gamma or beta. */
    TSR_CHECK(st, layernorm_check_output(p, x, "x", p->x_off, x_span, p->types[0], p->x_stride, y_span, true), done);
    if (r)
        TSR_CHECK(st,
                  layernorm_check_output(p, r, "residual", p->r_off, r_span, p->types[1], p->r_stride, y_span, true),
                  done);
    TSR_CHECK(st, layernorm_check_output(p, gamma, "gamma", p->gamma_off, p->cols, TSR_F32, 0, y_span, false), done);
    TSR_CHECK(st, layernorm_check_output(p, beta, "beta", p->beta_off, p->cols, TSR_F32, 0, y_span, false), done);
done:
    return st;
}

static const char layernorm_kernels_tag;

static tsr_status layernorm_launch(tsr_device *dev, const layernorm_problem *p, const tsr_config *cfg,
                                   cl_command_queue queue, cl_event input_ready, cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    const int *v = cfg->values;
    const size_t local = (size_t)v[P_WG], groups = ceil_div(p->rows, (size_t)v[P_RPG]);
    size_t global;
    TSR_CHECK(status, tsr_size_mad("layernorm: the work-items", groups, local, 0, &global), done);
    /* A device that silently ends long loops (llvmpipe, tsr_device_loop_limit) would leave rows
     * half normalized: refuse instead. Probed only for loops this long (a probe costs a compile). */
    const uint64_t per_pass = ceil_div(p->cols / (size_t)v[P_VW], local) + ceil_div(p->cols % (size_t)v[P_VW], local);
    const uint64_t loops = (uint64_t)v[P_RPG] * (3 * per_pass + 2 * 9);
    if (loops > 30000u) {
        uint64_t limit = UINT64_MAX;
        TSR_CHECK(status, tsr_device_loop_limit(dev, &limit), done);
        if ((double)loops > 0.9 * (double)limit) {
            status = tsr_fail(TSR_ERR_UNSUPPORTED,
                              "layernorm: '%s' ends a work-item's loops after %llu iterations without an error "
                              "(llvmpipe does), and rows of %zu with WG=%d VW=%d RPG=%d need about %llu: the result "
                              "would be wrong; a configuration with a larger WG or VW stays within it",
                              dev->info.name, (unsigned long long)limit, p->cols, v[P_WG], v[P_VW], v[P_RPG],
                              (unsigned long long)loops);
            goto done;
        }
    }
    static const char *const names[] = {"layernorm", NULL};
    tsr_kernel *k[TSR_LAUNCH_KERNELS];
    TSR_CHECK(status,
              tsr_launch_kernels(dev, &layernorm_kernels_tag, cfg,
                                 layernorm_variant(p->r != NULL, p->types[0], p->types[1], p->types[2]), 0, "layernorm",
                                 layernorm_build_options, names, k),
              done);
    cl_kernel kernel = k[0]->kernel;
    /* Without a residual the kernel does not read r; x stands in for the argument. */
    cl_mem r = p->r ? p->r : p->x;
    cl_ulong rows = p->rows, cols = p->cols, xo = p->x_off, xs = p->x_stride, ro = p->r_off, rs = p->r_stride,
             go = p->gamma_off, bo = p->beta_off, yo = p->y_off, ys = p->y_stride;
    cl_uint rows_per_group = (cl_uint)v[P_RPG];
    cl_float eps = p->eps;
    cl_uint arg = 0;
    tsr_kernel_lock(k[0]); /* the cached kernel's arguments are this call's until the enqueue */
#define SET(value) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(value), &(value)), unlock)
    SET(rows);
    SET(cols);
    SET(eps);
    SET(rows_per_group);
    SET(p->x);
    SET(xo);
    SET(xs);
    SET(r);
    SET(ro);
    SET(rs);
    SET(p->gamma);
    SET(go);
    SET(p->beta);
    SET(bo);
    SET(p->y);
    SET(yo);
    SET(ys);
#undef SET
    TSR_CL_CHECK(status,
                 tsr_enqueue_kernel(queue, kernel, 1, NULL, &global, &local, input_ready ? 1 : 0,
                                    input_ready ? &input_ready : NULL, event),
                 unlock);
unlock:
    tsr_kernel_unlock(k[0]);
done:
    return status;
}

tsr_status tsr_layernorm(tsr_device *dev, const tsr_layernorm_desc *desc, cl_mem x, cl_mem residual, cl_mem gamma,
                         cl_mem beta, cl_mem y, cl_command_queue queue, cl_event *event) {
    tsr_clear_diagnostics();
    return tsr_layernorm_pipeline(dev, desc, x, residual, gamma, beta, y, queue, NULL, event);
}

tsr_status tsr_layernorm_pipeline(tsr_device *dev, const tsr_layernorm_desc *desc, cl_mem x, cl_mem residual,
                                  cl_mem gamma, cl_mem beta, cl_mem y, cl_command_queue queue, cl_event input_ready,
                                  cl_event *event) {
    if (event) *event = NULL;
    layernorm_problem p;
    tsr_status status = layernorm_validate(dev, desc, x, residual, gamma, beta, y, &p);
    if (status != TSR_SUCCESS) return status;
    tsr_op_output(y);
    cl_command_queue q;
    TSR_CHECK(status, tsr_resolve_queue(dev, queue, &q), done);
    tsr_config cfg;
    /* the fields its class reads (the legality check reads none) */
    const uint32_t shape[] = {(uint32_t)layernorm_base_class(p.cols), (uint32_t)p.types[0], (uint32_t)p.types[1],
                              (uint32_t)p.types[2]};
    TSR_CHECK(status,
              tsr_op_config_shape(dev, &tsr_op_layernorm, &p, shape, sizeof shape / sizeof *shape, &cfg), done);
    status = layernorm_launch(dev, &p, &cfg, q, input_ready, event);
    if (tsr_op_build_fallback(dev, &tsr_op_layernorm, &p, status, &cfg))
        status = layernorm_launch(dev, &p, &cfg, q, input_ready, event);
done:
    return status;
}

/* ---- the host reference ---- */

void tsr_layernorm_reference(size_t rows, size_t cols, double eps, const float *x, const float *r, const float *gamma,
                             const float *beta, double *y) {
    for (size_t i = 0; i < rows; ++i) {
        const float *xr = x + i * cols, *rr = r ? r + i * cols : NULL;
        double sum = 0, squares = 0;
        for (size_t j = 0; j < cols; ++j)
            sum += (double)xr[j] + (rr ? (double)rr[j] : 0.0);
        const double mean = sum / (double)cols;
        for (size_t j = 0; j < cols; ++j) {
            const double d = (double)xr[j] + (rr ? (double)rr[j] : 0.0) - mean;
            squares += d * d;
        }
        const double inv_sd = 1.0 / sqrt(squares / (double)cols + eps);
        for (size_t j = 0; j < cols; ++j) {
            const double s = (double)xr[j] + (rr ? (double)rr[j] : 0.0);
            y[i * cols + j] = (s - mean) * inv_sd * (double)gamma[j] + (double)beta[j];
        }
    }
}

/* ---- the fixture: "ROWSxCOLS [+res] [DTYPE]" (DTYPE: x and residual / y) ---- */

tsr_status tsr_layernorm_shape_parse(const char *shape, size_t *rows, size_t *cols, bool *residual, tsr_dtype *in_type,
                                     tsr_dtype *out_type) {
    *rows = *cols = 0, *residual = false, *in_type = *out_type = TSR_F32;
    char words[3][32];
    int count = 0, used = 0, length = 0;
    const char *rest = shape;
    while (count < 3 && sscanf(rest, "%31s%n", words[count], &used) == 1)
        rest += used, ++count;
    if (count > 0 && sscanf(rest, " %n", &length) >= 0 && rest[length] == '\0') {
        size_t r = 0, c = 0;
        int digits = 0;
        bool ok = isdigit((unsigned char)words[0][0]) && sscanf(words[0], "%zux%zu%n", &r, &c, &digits) == 2 &&
                  words[0][digits] == '\0' && r > 0 && c > 0 &&
                  isdigit((unsigned char)words[0][strcspn(words[0], "x") + 1]);
        int w = 1;
        if (ok && w < count && strcmp(words[w], "+res") == 0) *residual = true, ++w;
        if (ok && w < count && tsr_dtype_spec_parse(words[w], in_type, out_type)) ++w;
        if (ok && w == count) {
            *rows = r, *cols = c;
            return TSR_SUCCESS;
        }
    }
    *residual = false, *in_type = *out_type = TSR_F32;
    return tsr_fail(TSR_ERR_INVALID_ARG,
                    "layernorm: shape '%s' is not 'ROWSxCOLS [+res] [DTYPE]' (each at least 1; DTYPE f16, bf16 or "
                    "IN/OUT of f32, f16, bf16, e.g. f16/f32)",
                    shape);
}

typedef struct layernorm_fixture {
    layernorm_problem p;
    float *x, *r, *gamma, *beta, *y; /* host copies in fp32: x and r as rounded to their type */
    double *reference;
} layernorm_fixture;

/* Not multiples of any vector width, so the tails run too; in the order of layernorm_classes. */
static const char *const layernorm_class_shapes[] = {"4099x768 +res", "16387x67 +res", "259x16389 +res"};
/* Smaller problems of the same classes for slow devices (tsr_op.class_shapes_reduced), about an
 * eighth and a sixty-fourth of the work; fixture.problem_class checks each stays in its class. */
static const char *const layernorm_class_shapes_reduced[] = {
    "515x768 +res;67x768 +res",
    "2051x67 +res;259x67 +res",
    "35x16389 +res;5x16389 +res"};
static const tsr_report_shape layernorm_report_shapes[] = {
    {"layernorm-bert", "4096x768 +res", "64x768 +res"},
    {NULL, NULL, NULL},
};

static void layernorm_fixture_free(void *ctx) {
    layernorm_fixture *t = ctx;
    if (!t) return;
    cl_mem mems[] = {t->p.x, t->p.r, t->p.gamma, t->p.beta, t->p.y};
    for (size_t i = 0; i < TSR_COUNT(mems); ++i)
        if (mems[i]) clReleaseMemObject(mems[i]);
    free(t->x);
    free(t->r);
    free(t->gamma);
    free(t->beta);
    free(t->y);
    free(t->reference);
    free(t);
}

static tsr_status layernorm_fixture_poison(tsr_device *dev, layernorm_fixture *t) {
    const size_t n = t->p.rows * t->p.cols;
    for (size_t i = 0; i < n; ++i)
        t->y[i] = NAN;
    return tsr_upload_typed(dev, t->p.y, t->p.types[2], t->y, n);
}

static tsr_status layernorm_fixture_setup(tsr_device *dev, const char *shape, uint64_t seed, void **out) {
    size_t rows, cols;
    bool residual;
    tsr_dtype in_type, out_type;
    tsr_status status = tsr_layernorm_shape_parse(shape, &rows, &cols, &residual, &in_type, &out_type);
    if (status != TSR_SUCCESS) return status;
    size_t n;
    if (tsr_size_mad("layernorm: the fixture's elements", rows, cols, 0, &n) != TSR_SUCCESS ||
        n > SIZE_MAX / sizeof(double))
        return tsr_fail(TSR_ERR_OVERFLOW, "layernorm: shape '%s' is too large", shape);
    layernorm_fixture *t = calloc(1, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    t->p = (layernorm_problem){.rows = rows,
                               .cols = cols,
                               .eps = 1e-5f,
                               .x_stride = cols,
                               .r_stride = cols,
                               .y_stride = cols,
                               .types = {in_type, residual ? in_type : TSR_F32, out_type}};
    t->x = malloc(n * sizeof(float));
    t->r = residual ? malloc(n * sizeof(float)) : NULL;
    t->gamma = malloc(cols * sizeof(float));
    t->beta = malloc(cols * sizeof(float));
    t->y = malloc(n * sizeof(float));
    t->reference = malloc(n * sizeof(double));
    cl_int err;
    if (!t->x || (residual && !t->r) || !t->gamma || !t->beta || !t->y || !t->reference) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    /* A mean away from zero, as activations have: the two-pass variance must not lose it. */
    tsr_random_fill(t->x, n, &seed, -1.0f, 3.0f);
    tsr_dtype_round_array(in_type, t->x, n);
    if (residual) {
        tsr_random_fill(t->r, n, &seed, -2.0f, 2.0f);
        tsr_dtype_round_array(in_type, t->r, n);
    }
    tsr_random_fill(t->gamma, cols, &seed, 0.5f, 1.5f);
    tsr_random_fill(t->beta, cols, &seed, -0.5f, 0.5f);
    tsr_layernorm_reference(rows, cols, t->p.eps, t->x, t->r, t->gamma, t->beta, t->reference);
    t->p.x = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, n * tsr_dtype_size(in_type), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    if (residual) {
        t->p.r = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, n * tsr_dtype_size(in_type), NULL, &err);
        TSR_CL_CHECK(status, err, done);
        TSR_CHECK(status, tsr_upload_typed(dev, t->p.r, in_type, t->r, n), done);
    }
    t->p.gamma = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, cols * sizeof(float), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    t->p.beta = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, cols * sizeof(float), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    t->p.y = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, n * tsr_dtype_size(out_type), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    TSR_CHECK(status, tsr_upload_typed(dev, t->p.x, in_type, t->x, n), done);
    TSR_CHECK(status, tsr_upload(dev, t->p.gamma, t->gamma, cols), done);
    TSR_CHECK(status, tsr_upload(dev, t->p.beta, t->beta, cols), done);
    TSR_CHECK(status, layernorm_fixture_poison(dev, t), done);
done:
    if (status != TSR_SUCCESS) {
        layernorm_fixture_free(t);
        return status;
    }
    *out = t;
    return TSR_SUCCESS;
}

static tsr_status layernorm_fixture_run(tsr_device *dev, void *ctx, const tsr_config *cfg, cl_command_queue queue,
                                        cl_event *first, cl_event *last) {
    layernorm_fixture *t = ctx;
    const layernorm_problem *p = &t->p;
    cl_event done = NULL;
    tsr_status st;
    if (cfg)
        st = layernorm_launch(dev, p, cfg, queue, NULL, first || last ? &done : NULL);
    else {
        const tsr_layernorm_desc d = {.rows = p->rows,
                                      .cols = p->cols,
                                      .eps = p->eps,
                                      .x_type = p->types[0],
                                      .residual_type = p->types[1],
                                      .y_type = p->types[2]};
        st = tsr_layernorm(dev, &d, p->x, p->r, p->gamma, p->beta, p->y, queue, first || last ? &done : NULL);
    }
    if (st != TSR_SUCCESS) return st;
    tsr_fixture_single_event(done, first, last);
    return TSR_SUCCESS;
}

static tsr_status layernorm_fixture_check(tsr_device *dev, void *ctx, double *rel_err) {
    layernorm_fixture *t = ctx;
    const size_t n = t->p.rows * t->p.cols;
    tsr_status st = tsr_download_typed(dev, t->p.y, t->p.types[2], t->y, n);
    if (st != TSR_SUCCESS) return st;
    *rel_err = tsr_rel_error(t->y, t->reference, n);
    return layernorm_fixture_poison(dev, t); /* the next run cannot pass on this one's output */
}

/* About 8 operations an element (add, two sums, a square, normalize, scale and shift); the bytes
 * that must move: x, the residual and y once each in their types, gamma and beta once. */
static void layernorm_fixture_work(const void *ctx, double *flops, double *bytes) {
    const layernorm_problem *p = &((const layernorm_fixture *)ctx)->p;
    const double n = (double)p->rows * (double)p->cols;
    *flops = 8.0 * n;
    *bytes = n * (double)(tsr_dtype_size(p->types[0]) + (p->r ? tsr_dtype_size(p->types[1]) : 0) +
                          tsr_dtype_size(p->types[2])) +
             8.0 * (double)p->cols;
}

static void layernorm_fixture_describe(const void *ctx, char *out, size_t size) {
    const layernorm_problem *p = &((const layernorm_fixture *)ctx)->p;
    char types[16];
    tsr_dtype_spec_format(p->types[0], p->types[2], types, sizeof types);
    snprintf(out, size, "%zux%zu%s%s%s", p->rows, p->cols, p->r ? " +res" : "", types[0] ? " " : "", types);
}

static int layernorm_fixture_buffers(const void *ctx, cl_mem *buffers, int max) {
    const layernorm_problem *p = &((const layernorm_fixture *)ctx)->p;
    const cl_mem mems[5] = {p->x, p->r, p->gamma, p->beta, p->y};
    for (int i = 0; i < 5 && i < max; ++i)
        buffers[i] = mems[i];
    return 5;
}

/* fp32 sums over cols terms, and the 16-bit output's own rounding. */
static double layernorm_fixture_tolerance(const void *ctx) {
    const layernorm_problem *p = &((const layernorm_fixture *)ctx)->p;
    const double bound = tsr_dtype_error_bound(p->types[2], (double)p->cols);
    return bound > tsr_op_layernorm.tolerance ? bound : tsr_op_layernorm.tolerance;
}

static const char *layernorm_tuning_space(const tsr_device *dev, const char *problem_class) {
    (void)problem_class; /* one space for every class */
    /* CPUs that vectorize across work-items (llvmpipe): GPU-like groups of scalar items. */
    if (dev->info.type == TSR_DEVICE_CPU && tsr_device_lanes(&dev->info) == TSR_LANES_ACROSS_ITEMS)
        return "WG=16,32,64,128 VW=1,2,4 RPG=1,2,4";
    /* Other CPUs: a work-item (a thread's stream) a row or a few; wide vectors. */
    if (dev->info.type == TSR_DEVICE_CPU) return "WG=1,2,4,8 VW=4,8,16 RPG=1,2,4,8,16";
    return "WG=16,32,64,128,256 VW=1,2,4,8 RPG=1,2,4,8";
}

static const char *layernorm_fixture_class(const void *fixture) {
    return layernorm_problem_class(&((const layernorm_fixture *)fixture)->p);
}

const tsr_op tsr_op_layernorm = {
    .name = "layernorm",
    .source_name = "layernorm",
    .params = layernorm_params,
    .nparams = LAYERNORM_NPARAMS,
    .classes = layernorm_classes,
    .problem_class = layernorm_problem_class,
    .defaults = layernorm_defaults,
    .ndefaults = TSR_COUNT(layernorm_defaults),
    .implementations = layernorm_implementations,
    .nimplementations = TSR_COUNT(layernorm_implementations),
    .config_ok = layernorm_config_ok,
    .program_variants = LN_VARIANTS,
    .variant_serves_class = layernorm_variant_serves_class,
    .build_options = layernorm_build_options,
    .tuning_space = layernorm_tuning_space,
    .rate_unit = "GB/s",
    .tolerance = 1e-5,
    .class_shapes = layernorm_class_shapes,
    .class_shapes_reduced = layernorm_class_shapes_reduced,
    .class_storage = TSR_CLASSES_PER_TYPE,
    .fixture = {.setup = layernorm_fixture_setup, .run = layernorm_fixture_run, .check = layernorm_fixture_check,
                .work = layernorm_fixture_work, .describe = layernorm_fixture_describe,
                .buffers = layernorm_fixture_buffers, .free = layernorm_fixture_free, .problem_class = layernorm_fixture_class,
                .tolerance = layernorm_fixture_tolerance},
    .demo = {.title = "layernorm 4096x768 + residual", .shapes = {"4096x768 +res"}, .runs = 3},
    .report_shapes = layernorm_report_shapes,
};
