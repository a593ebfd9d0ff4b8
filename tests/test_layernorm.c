/* LayerNorm with the fused residual add (tsr_layernorm) against a double-precision reference
 * from the same stored inputs, on fresh random data (TSR_TEST_SEED replays a run).
 * Tolerance per element, for an fp32 y: 2^-24 (32 + 4 sqrt(cols)) (|gamma| M / sd + |beta| + |ref|),
 * M the row's largest |s|, sd = sqrt(var + eps): s = x + r is rounded once (u M), the fp32 sums over
 * cols terms lose a random walk's sqrt(cols) roundings of M, and the normalized value carries them
 * times |gamma| / sd; the scale and shift add a few ulps of |ref|. It still catches a variance
 * divided by cols - 1 (a relative 1 / (2 cols): 6.5e-4 at 768 against a bound near 3e-5), a
 * missing eps (the eps cases below make it matter) or a lost residual. A 16-bit y adds its own
 * rounding, u(y) |ref|, and every y half the smallest subnormal of its type (a value below y's
 * normal range). The bound holds for rows of any magnitude (extreme_row_magnitudes). Every case poisons y, surrounds every tensor with guard values (also
 * between strided rows) and checks that nothing outside y's rows changed.
 * TSR_TEST_MODE=oclgrind runs a small subset. */
#include "harness.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define dev th_dev /* the group's device (harness) */
/* Exact in f32, f16 and bf16, and far from any output of the inputs below. */
static const float guard_value = 1536.0f;
enum { GUARD = 3 }; /* guard elements after each tensor */
enum { IN_PLACE_NONE, IN_PLACE_X, IN_PLACE_RESIDUAL };

typedef struct ln_case {
    size_t rows, cols;
    float eps;
    bool residual;
    tsr_dtype x_type, r_type, y_type;
    size_t x_off, r_off, g_off, b_off, y_off;
    size_t x_stride, r_stride, y_stride; /* 0: contiguous */
    int in_place;
    float x_center, x_width; /* x uniform in center +- width */
    float x_big;             /* nonzero: about every other x replaced by +-x_big times U(0.5, 1) */
    const char *config;      /* for messages */
} ln_case;

static size_t resolved(size_t stride, size_t cols) { return stride ? stride : cols; }

/* A host tensor of `rows` rows of `cols` values at `off` with `stride`, guard values everywhere
 * else (before, between rows and GUARD after); returns its element count. */
static size_t ln_layout(size_t rows, size_t cols, size_t off, size_t stride, float **host) {
    const size_t total = off + (rows - 1) * stride + cols + GUARD;
    *host = malloc(total * sizeof **host);
    for (size_t i = 0; i < total; ++i)
        (*host)[i] = guard_value;
    return total;
}

static void run_case(const ln_case *c) {
    const size_t rows = c->rows, cols = c->cols;
    ln_case k = *c;
    if (k.in_place == IN_PLACE_X) k.y_off = k.x_off, k.y_stride = k.x_stride, k.y_type = k.x_type;
    if (k.in_place == IN_PLACE_RESIDUAL) k.y_off = k.r_off, k.y_stride = k.r_stride, k.y_type = k.r_type;
    const size_t xs = resolved(k.x_stride, cols), rs = resolved(k.r_stride, cols), ys = resolved(k.y_stride, cols);
    float *hx, *hr = NULL, *hg, *hb, *hy;
    const size_t nx = ln_layout(rows, cols, k.x_off, xs, &hx);
    const size_t nr = k.residual ? ln_layout(rows, cols, k.r_off, rs, &hr) : 0;
    const size_t ng = ln_layout(1, cols, k.g_off, cols, &hg), nb = ln_layout(1, cols, k.b_off, cols, &hb);
    const size_t n = rows * cols;
    float *x = malloc(n * sizeof *x), *r = malloc(n * sizeof *r), *g = malloc(cols * sizeof *g),
          *b = malloc(cols * sizeof *b), *got = malloc(n * sizeof *got);
    double *ref = malloc(n * sizeof *ref);
    th_fill_uniform_typed(k.x_type, x, n, k.x_center - k.x_width, k.x_center + k.x_width);
    if (k.x_big != 0)
        for (size_t i = 0; i < n; ++i)
            if (th_rand() & 1)
                x[i] = tsr_dtype_round(k.x_type, (th_rand() & 2 ? 1.0f : -1.0f) * k.x_big *
                                                     (0.5f + 0.5f * (float)(th_rand() % 4096) / 4096.0f));
    th_fill_uniform_typed(k.r_type, r, n, -2, 2);
    th_fill_uniform(g, cols, 0.25f, 1.5f);
    for (size_t j = 0; j < cols; ++j)
        if (th_rand() & 1) g[j] = -g[j];
    th_fill_uniform(b, cols, -1, 1);
    for (size_t i = 0; i < rows; ++i) {
        memcpy(hx + k.x_off + i * xs, x + i * cols, cols * sizeof *x);
        if (k.residual) memcpy(hr + k.r_off + i * rs, r + i * cols, cols * sizeof *r);
    }
    memcpy(hg + k.g_off, g, cols * sizeof *g);
    memcpy(hb + k.b_off, b, cols * sizeof *b);
    tsr_layernorm_reference(rows, cols, k.eps, x, k.residual ? r : NULL, g, b, ref);

    cl_mem dx = th_buffer_from_typed(dev, k.x_type, hx, nx);
    cl_mem dr = k.residual ? th_buffer_from_typed(dev, k.r_type, hr, nr) : NULL;
    cl_mem dg = th_buffer_from(dev, hg, ng), db = th_buffer_from(dev, hb, nb), dy;
    size_t ny;
    float *expect_y; /* what y's buffer must hold afterwards outside y's rows */
    if (k.in_place == IN_PLACE_X)
        dy = dx, ny = nx, expect_y = hx;
    else if (k.in_place == IN_PLACE_RESIDUAL)
        dy = dr, ny = nr, expect_y = hr;
    else {
        ny = ln_layout(rows, cols, k.y_off, ys, &hy);
        for (size_t i = 0; i < rows; ++i)
            th_poison(hy + k.y_off + i * ys, cols);
        dy = th_buffer_from_typed(dev, k.y_type, hy, ny);
        expect_y = hy;
    }
    const tsr_layernorm_desc d = {.rows = rows,
                                  .cols = cols,
                                  .eps = k.eps,
                                  .x_offset = k.x_off,
                                  .residual_offset = k.r_off,
                                  .gamma_offset = k.g_off,
                                  .beta_offset = k.b_off,
                                  .y_offset = k.y_off,
                                  .x_stride = k.x_stride,
                                  .residual_stride = k.r_stride,
                                  .y_stride = k.y_stride,
                                  .x_type = k.x_type,
                                  .residual_type = k.r_type,
                                  .y_type = k.y_type};
    char what[256];
    snprintf(what, sizeof what,
             "%s %zux%zu eps %g%s x %s r %s y %s offsets %zu/%zu/%zu/%zu/%zu strides %zu/%zu/%zu in place %d",
             k.config ? k.config : "default", rows, cols, (double)k.eps, k.residual ? " +res" : "",
             tsr_dtype_str(k.x_type), tsr_dtype_str(k.r_type), tsr_dtype_str(k.y_type), k.x_off, k.r_off, k.g_off,
             k.b_off, k.y_off, k.x_stride, k.r_stride, k.y_stride, k.in_place);
    cl_event ev = NULL;
    tsr_status st = tsr_layernorm(dev, &d, dx, k.residual ? dr : NULL, dg, db, dy, NULL, &ev);
    if (st != TSR_SUCCESS) fail_msg("%s: %s: %s", what, tsr_status_str(st), tsr_last_error());
    assert_non_null(ev);
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    float *after = malloc(ny * sizeof *after);
    th_read_typed(dev, k.y_type, dy, after, ny);
    /* Guards: everything outside y's rows is as it was (inputs in place included). */
    for (size_t i = 0, row = 0; i < ny; ++i) {
        while (row < rows && i >= k.y_off + row * ys + cols)
            ++row;
        const bool inside = row < rows && i >= k.y_off + row * ys;
        if (!inside && !(after[i] == expect_y[i]))
            fail_msg("%s: wrote outside y's rows at element %zu (%g, was %g)", what, i, (double)after[i],
                     (double)expect_y[i]);
    }
    const double u = ldexp(1.0, -24), u_y = k.y_type == TSR_F32 ? 0 : tsr_dtype_unit_roundoff(k.y_type);
    /* half the smallest subnormal of y's type: rounding a value below its normal range */
    const double t_y = ldexp(1.0, k.y_type == TSR_F32 ? -150 : k.y_type == TSR_F16 ? -25 : -134);
    for (size_t i = 0; i < rows; ++i) {
        double largest = 0, sum = 0, squares = 0;
        for (size_t j = 0; j < cols; ++j) {
            const double s = (double)x[i * cols + j] + (k.residual ? (double)r[i * cols + j] : 0.0);
            largest = fmax(largest, fabs(s));
            sum += s;
        }
        for (size_t j = 0; j < cols; ++j) {
            const double dv =
                (double)x[i * cols + j] + (k.residual ? (double)r[i * cols + j] : 0.0) - sum / (double)cols;
            squares += dv * dv;
        }
        const double sd = sqrt(squares / (double)cols + (double)k.eps);
        for (size_t j = 0; j < cols; ++j) {
            const double want = ref[i * cols + j], have = after[k.y_off + i * ys + j];
            const double bound =
                u * (32 + 4 * sqrt((double)cols)) * (fabs(g[j]) * largest / sd + fabs(b[j]) + fabs(want)) +
                u_y * fabs(want) + t_y;
            if (!(fabs(have - want) <= bound))
                fail_msg("%s: y[%zu][%zu] = %.9g, reference %.9g (error %.3g, bound %.3g)", what, i, j, have, want,
                         fabs(have - want), bound);
        }
    }
    clReleaseMemObject(dx);
    if (dr) clReleaseMemObject(dr);
    clReleaseMemObject(dg);
    clReleaseMemObject(db);
    if (k.in_place == IN_PLACE_NONE) {
        clReleaseMemObject(dy);
        free(hy);
    }
    free(after);
    free(hx);
    free(hr);
    free(hg);
    free(hb);
    free(x);
    free(r);
    free(g);
    free(b);
    free(got);
    free(ref);
}

static size_t rand_below(size_t n) { return (size_t)th_rand() % n; }
static const float eps_choices[] = {1e-12f, 1e-5f, 0.25f};

/* The main case (BERT's rows) and odd lengths, with and without the residual, fp32. */
static void bert_rows_and_odd_lengths(void **state) {
    (void)state;
    const size_t all[] = {768, 384, 1024, 1, 3, 1000, 4097, 67, 2049};
    const size_t count = th_small_mode() ? 5 : sizeof all / sizeof all[0];
    for (size_t i = 0; i < count; ++i)
        for (int residual = 0; residual < 2; ++residual) {
            const ln_case c = {.rows = th_small_mode() ? 3 : 5 + rand_below(40),
                               .cols = all[i],
                               .eps = all[i] == 768 ? 1e-12f : 1e-5f,
                               .residual = residual,
                               .x_center = 1.0f,
                               .x_width = 2.0f};
            run_case(&c);
        }
}

/* eps that matters (a row's variance below it) and rows with a large mean next to their spread,
 * where E[s^2] - mean^2 would cancel to nothing. */
static void eps_and_large_means(void **state) {
    (void)state;
    const ln_case cases[] = {
        {.rows = 7, .cols = 768, .eps = 0.25f, .residual = false, .x_center = 0.5f, .x_width = 0.05f},
        {.rows = 4, .cols = 129, .eps = 1.0f, .residual = false, .x_center = -3.0f, .x_width = 0.5f},
        {.rows = 6, .cols = 1024, .eps = 1e-12f, .residual = false, .x_center = 300.0f, .x_width = 1.0f},
        {.rows = 3, .cols = 777, .eps = 1e-5f, .residual = true, .x_center = -1000.0f, .x_width = 10.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        run_case(&cases[i]);
}


/* Rows of any finite magnitude, against the same bound: around 1e30 (the fp32 sum of squares would
 * overflow: every y came out as beta), values near FLT_MAX mixed with small ones (the plain sum
 * overflows too), a constant row of 1e20 (variance 0, eps far below the row's scale), and rows
 * near 1e-22 with the smallest eps (squares below FLT_MIN, where they lost their digits) and with
 * BERT's eps; in fp32 and 16-bit storage (bf16 has fp32's range), across configurations. */
static void extreme_row_magnitudes(void **state) {
    (void)state;
    const size_t wide = th_small_mode() ? 67 : 771;
    const ln_case cases[] = {
        {.rows = 5, .cols = 768, .eps = 1e-12f, .residual = true, .x_width = 1e30f},
        {.rows = 4, .cols = 1000, .eps = 1e-5f, .x_width = 1.0f, .x_big = 3e38f},
        {.rows = 3, .cols = 64, .eps = 1e-5f, .x_center = 1e20f, .x_width = 0.0f},
        {.rows = 4, .cols = 384, .eps = 0x1p-149f, .x_width = 1e-22f},
        {.rows = 3, .cols = 130, .eps = 1e-12f, .x_width = 1e-22f},
        {.rows = 4, .cols = wide, .eps = 1e-12f, .residual = true, .x_type = TSR_BF16, .y_type = TSR_F16,
         .x_width = 1e30f},
        {.rows = 3, .cols = wide, .eps = 1e-5f, .x_type = TSR_BF16, .y_type = TSR_BF16, .x_width = 1.0f,
         .x_big = 3e38f},
        {.rows = 3, .cols = 130, .eps = 0x1p-149f, .x_type = TSR_BF16, .y_type = TSR_BF16, .x_width = 1e-22f},
        {.rows = 3, .cols = wide, .eps = 1e-5f, .residual = true, .x_type = TSR_F16, .r_type = TSR_BF16,
         .x_width = 6e4f, .in_place = IN_PLACE_RESIDUAL},
    };
    /* small mode: the default and a group of 64 (the group reductions, the second sum's barriers) */
    const char *configs[] = {NULL, "WG=64 VW=4 RPG=2", "WG=1 VW=1 RPG=1", "WG=256 VW=16 RPG=1"};
    const size_t nconfigs = th_small_mode() ? 2 : sizeof configs / sizeof configs[0];
    for (size_t c = 0; c < nconfigs; ++c) {
        if (configs[c] && !th_try_override(dev, "layernorm", configs[c])) continue;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
            ln_case k = cases[i];
            k.config = configs[c];
            if (k.in_place == IN_PLACE_RESIDUAL) k.r_type = TSR_BF16; /* y = the residual: bf16 holds 1e30 */
            run_case(&k);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "layernorm", NULL));
}

/* y = x and y = residual, exactly (same buffer, offset, stride and type), in every storage type. */
static void in_place_on_x_and_residual(void **state) {
    (void)state;
    const tsr_dtype types[] = {TSR_F32, TSR_F16, TSR_BF16};
    for (int t = 0; t < 3; ++t)
        for (int mode = IN_PLACE_X; mode <= IN_PLACE_RESIDUAL; ++mode) {
            const ln_case c = {.rows = 9,
                               .cols = th_small_mode() ? 37 : 768,
                               .eps = 1e-5f,
                               .residual = true,
                               .x_type = types[t],
                               .r_type = types[t],
                               .x_off = 2,
                               .r_off = 5,
                               .x_stride = th_small_mode() ? 40 : 770,
                               .r_stride = th_small_mode() ? 37 : 768,
                               .in_place = mode,
                               .x_center = 0,
                               .x_width = 3};
            run_case(&c);
        }
    /* In place without a residual. */
    const ln_case c = {.rows = 4, .cols = 100, .eps = 1e-5f, .x_off = 1, .in_place = IN_PLACE_X, .x_width = 2};
    run_case(&c);
}

/* Every combination of storage types of x, residual and y. */
static void every_type_combination(void **state) {
    (void)state;
    const tsr_dtype types[] = {TSR_F32, TSR_F16, TSR_BF16};
    for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b)
            for (int c = 0; c < 3; ++c) {
                if (th_small_mode() && !(a == b && b == c) && !(a == 1 && b == 2 && c == 0)) continue;
                const ln_case k = {.rows = 5,
                                   .cols = th_small_mode() ? 19 : 771,
                                   .eps = 1e-5f,
                                   .residual = true,
                                   .x_type = types[a],
                                   .r_type = types[b],
                                   .y_type = types[c],
                                   .x_off = 1,
                                   .r_off = 3,
                                   .y_off = 7,
                                   .x_width = 2};
                run_case(&k);
            }
}

/* Random shapes, offsets, strides, types, residual or not, in place or not, eps. */
static void random_shapes(void **state) {
    (void)state;
    const int count = th_small_mode() ? 4 : 40;
    const tsr_dtype types[] = {TSR_F32, TSR_F16, TSR_BF16};
    for (int i = 0; i < count; ++i) {
        ln_case c = {.rows = 1 + rand_below(th_small_mode() ? 4 : 33),
                     .cols = 1 + rand_below(th_small_mode() ? 70 : (i % 4 == 0 ? 5000 : 1100)),
                     .eps = eps_choices[rand_below(3)],
                     .residual = th_rand() & 1,
                     .x_type = types[rand_below(3)],
                     .r_type = types[rand_below(3)],
                     .y_type = types[rand_below(3)],
                     .x_off = rand_below(9),
                     .r_off = rand_below(9),
                     .g_off = rand_below(9),
                     .b_off = rand_below(9),
                     .y_off = rand_below(9),
                     .in_place = (int)rand_below(3),
                     .x_center = (float)rand_below(7) - 3.0f,
                     .x_width = 0.1f + (float)rand_below(4)};
        c.x_stride = rand_below(2) ? 0 : c.cols + rand_below(5);
        c.r_stride = rand_below(2) ? 0 : c.cols + rand_below(5);
        c.y_stride = rand_below(2) ? 0 : c.cols + rand_below(5);
        if (!c.residual && c.in_place == IN_PLACE_RESIDUAL) c.in_place = IN_PLACE_NONE;
        run_case(&c);
    }
}

/* Configurations across the space: one item a row, groups up to 256, every vector width, rows per
 * group, on lengths below, at and above a group's vector span. */
static void configurations(void **state) {
    (void)state;
    const char *configs[] = {"WG=1 VW=1 RPG=1", "WG=256 VW=4 RPG=2", "WG=8 VW=16 RPG=16", "WG=1 VW=16 RPG=4",
                             "WG=64 VW=8 RPG=1", "WG=2 VW=2 RPG=8", "WG=32 VW=1 RPG=4", "WG=128 VW=16 RPG=1",
                             /* loops long enough to be checked against the device's loop limit */
                             "WG=1 VW=1 RPG=16"};
    const size_t lengths[] = {1, 7, 768, 4097};
    const size_t nconfigs = th_small_mode() ? 3 : sizeof configs / sizeof configs[0];
    const size_t nlengths = th_small_mode() ? 3 : 4;
    for (size_t i = 0; i < nconfigs; ++i) {
        if (!th_try_override(dev, "layernorm", configs[i])) continue;
        for (size_t l = 0; l < nlengths; ++l) {
            const ln_case c = {.rows = th_small_mode() ? 3 : 17,
                               .cols = th_small_mode() && lengths[l] == 768 ? 100 : lengths[l],
                               .eps = 1e-5f,
                               .residual = l % 2 == 0,
                               .x_type = l == 1 ? TSR_F16 : TSR_F32,
                               .r_type = TSR_F32,
                               .y_type = l == 2 ? TSR_BF16 : TSR_F32,
                               .x_off = 1,
                               .y_off = 2,
                               .y_stride = lengths[l] + 1,
                               .in_place = l == 3 ? IN_PLACE_X : IN_PLACE_NONE,
                               .x_center = 1,
                               .x_width = 2,
                               .config = configs[i]};
            run_case(&c);
        }
    }
    TH_ASSERT_STATUS(tsr_config_override(dev, "layernorm", "WG=3"), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "WG");
    TH_ASSERT_OK(tsr_config_override(dev, "layernorm", NULL));
}

/* Every refusal names what is wrong, returns before anything is enqueued, and leaves y as it was. */
static void invalid_arguments(void **state) {
    (void)state;
    enum { R = 4, C = 16, N = R * C };
    float hx[N], hy[N], hg[C], after[N];
    th_fill_uniform(hx, N, -1, 1);
    th_fill_uniform(hg, C, 0.5f, 1);
    for (int i = 0; i < N; ++i)
        hy[i] = guard_value;
    cl_mem x = th_buffer_from(dev, hx, N), r = th_buffer_from(dev, hx, N), y = th_buffer_from(dev, hy, N);
    cl_mem g = th_buffer_from(dev, hg, C), b = th_buffer_from(dev, hg, C), small = th_buffer(dev, N - 1);
    cl_mem gsmall = th_buffer(dev, C - 1);
    const tsr_layernorm_desc ok = {.rows = R, .cols = C, .eps = 1e-5f};
    tsr_layernorm_desc d;
    cl_event ev = (cl_event)1;
#define EXPECT(expr, status, text)                                                                                     \
    do {                                                                                                               \
        TH_ASSERT_STATUS(expr, status);                                                                                \
        TH_ASSERT_CONTAINS(tsr_last_error(), text);                                                                    \
    } while (0)
    EXPECT(tsr_layernorm(NULL, &ok, x, r, g, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "device");
    EXPECT(tsr_layernorm(dev, NULL, x, r, g, b, y, NULL, &ev), TSR_ERR_INVALID_ARG, "desc");
    assert_null(ev); /* cleared on a refusal */
    EXPECT(tsr_layernorm(dev, &ok, NULL, r, g, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "buffer x");
    EXPECT(tsr_layernorm(dev, &ok, x, r, NULL, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "buffer gamma");
    EXPECT(tsr_layernorm(dev, &ok, x, r, g, NULL, y, NULL, NULL), TSR_ERR_INVALID_ARG, "buffer beta");
    EXPECT(tsr_layernorm(dev, &ok, x, r, g, b, NULL, NULL, NULL), TSR_ERR_INVALID_ARG, "buffer y");
    d = ok, d.rows = 0;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "rows and cols");
    d = ok, d.cols = 0;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "rows and cols");
    const float bad_eps[] = {0.0f, -1e-5f, NAN, INFINITY, -0.0f};
    for (size_t i = 0; i < sizeof bad_eps / sizeof bad_eps[0]; ++i) {
        d = ok, d.eps = bad_eps[i];
        EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "eps");
    }
    d = ok, d.x_type = (tsr_dtype)(TSR_DTYPE_COUNT + 4);
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "x_type");
    d = ok, d.residual_type = (tsr_dtype)-1;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "residual_type");
    d = ok, d.y_type = (tsr_dtype)TSR_DTYPE_COUNT;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "y_type");
    d = ok, d.x_stride = C - 1;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "x_stride");
    d = ok, d.residual_stride = 1;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "residual_stride");
    d = ok, d.y_stride = C - 1;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_INVALID_ARG, "y_stride");
    /* Too small, by one element, each tensor in turn (an offset, a stride or the buffer). */
    EXPECT(tsr_layernorm(dev, &ok, small, r, g, b, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer x");
    EXPECT(tsr_layernorm(dev, &ok, x, small, g, b, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer residual");
    EXPECT(tsr_layernorm(dev, &ok, x, r, gsmall, b, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer gamma");
    EXPECT(tsr_layernorm(dev, &ok, x, r, g, gsmall, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer beta");
    EXPECT(tsr_layernorm(dev, &ok, x, r, g, b, small, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer y");
    d = ok, d.x_offset = 1;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer x");
    d = ok, d.residual_offset = 1;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer residual");
    d = ok, d.gamma_offset = 1;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer gamma");
    d = ok, d.beta_offset = 1;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer beta");
    d = ok, d.y_stride = C + 1;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer y");
    /* Sizes that wrap: refused as overflows, not as small buffers. */
    d = ok, d.rows = SIZE_MAX / 2;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_OVERFLOW, "overflows");
    d = ok, d.x_offset = SIZE_MAX - 8;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_OVERFLOW, "overflows");
    d = ok, d.y_stride = SIZE_MAX / 2;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, y, NULL, NULL), TSR_ERR_OVERFLOW, "overflows");
    /* Overlaps: y partly over x or the residual, y on gamma or beta, in place in another layout. */
    d = ok, d.rows = R - 1, d.y_offset = 1;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, x, NULL, NULL), TSR_ERR_INVALID_ARG, "overlaps");
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, r, NULL, NULL), TSR_ERR_INVALID_ARG, "overlaps");
    d = ok, d.rows = 1, d.cols = 8;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, g, NULL, NULL), TSR_ERR_INVALID_ARG, "gamma");
    d = ok, d.rows = 1, d.cols = 8, d.y_offset = 4;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, b, NULL, NULL), TSR_ERR_INVALID_ARG, "beta");
    d = ok, d.rows = 2, d.cols = 8, d.y_stride = 9;
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, x, NULL, NULL), TSR_ERR_INVALID_ARG, "overlaps");
    d = ok, d.rows = 2, d.cols = 8, d.x_stride = 16, d.y_stride = 16;
    d.y_type = TSR_F16; /* the same first byte, another type */
    EXPECT(tsr_layernorm(dev, &d, x, r, g, b, x, NULL, NULL), TSR_ERR_INVALID_ARG, "x");
#undef EXPECT
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    th_read(dev, y, after, N);
    for (int i = 0; i < N; ++i)
        if (after[i] != guard_value) fail_msg("a refused call wrote y[%d]", i);
    cl_mem all[] = {x, r, y, g, b, small, gsmall};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        clReleaseMemObject(all[i]);
}

/* Sub-buffers of one parent alias: y's sub-buffer over x's is refused, one exactly on x's bytes
 * through another handle is in place and allowed. */
static void sub_buffers_overlap_by_memory(void **state) {
    (void)state;
    const size_t A = th_sub_buffer_align(dev), C = A < 8 ? 8 : A;
    float *host = malloc(4 * C * sizeof *host), *g = malloc(C * sizeof *g);
    th_fill_uniform(host, 4 * C, -2, 2);
    th_fill_uniform(g, C, 0.5f, 1);
    cl_mem parent = th_buffer_from(dev, host, 4 * C), gamma = th_buffer_from(dev, g, C),
           beta = th_buffer_from(dev, g, C);
    cl_mem first = th_sub_buffer(parent, 0, 2 * C), second = th_sub_buffer(parent, C, 2 * C);
    cl_mem same = th_sub_buffer(parent, 0, 2 * C);
    const tsr_layernorm_desc d = {.rows = 2, .cols = C, .eps = 1e-5f};
    TH_ASSERT_STATUS(tsr_layernorm(dev, &d, first, NULL, gamma, beta, second, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlaps");
    const tsr_layernorm_desc shifted = {.rows = 2, .cols = C, .eps = 1e-5f, .y_offset = 1};
    TH_ASSERT_STATUS(tsr_layernorm(dev, &shifted, first, NULL, gamma, beta, parent, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "overlaps");
    TH_ASSERT_OK(tsr_layernorm(dev, &d, first, NULL, gamma, beta, same, NULL, NULL));
    /* ... and computed what an out-of-place call does. */
    float *got = malloc(2 * C * sizeof *got);
    double *ref = malloc(2 * C * sizeof *ref);
    tsr_layernorm_reference(2, C, 1e-5, host, NULL, g, g, ref);
    th_read(dev, same, got, 2 * C);
    for (size_t i = 0; i < 2 * C; ++i)
        if (!(fabs(got[i] - ref[i]) <= 1e-5 * (1 + fabs(ref[i]))))
            fail_msg("in place through a sub-buffer: y[%zu] = %g, reference %g", i, (double)got[i], ref[i]);
    cl_mem all[] = {first, second, same, parent, gamma, beta};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        clReleaseMemObject(all[i]);
    free(host);
    free(g);
    free(got);
    free(ref);
}

/* NaN and Inf stay in their rows (a NaN in gamma in its column), as in PyTorch. The calls run on
 * the caller's queue, in-order or out-of-order, their events from that queue; a second pair of
 * calls, y = LN(x) and then in place y = LN(y + x), gives the double result of the two. */
static void special_values_and_queues(void **state) {
    (void)state;
    enum { R = 6, C = 40 };
    float x[R * C], xs[R * C], g[C], gs[C], b[C], got[R * C], first[R * C];
    double ref[R * C], once[R * C], twice[R * C];
    th_fill_uniform(x, R * C, -2, 2);
    th_fill_uniform(g, C, 0.5f, 1.5f);
    th_fill_uniform(b, C, -1, 1);
    memcpy(xs, x, sizeof x);
    memcpy(gs, g, sizeof g);
    xs[1 * C + 7] = NAN;
    xs[2 * C + 0] = INFINITY;
    xs[3 * C + 39] = -INFINITY;
    gs[5] = NAN;
    tsr_layernorm_reference(R, C, 1e-5, xs, NULL, gs, b, ref);
    tsr_layernorm_reference(R, C, 1e-5, x, NULL, g, b, once);
    for (int i = 0; i < R * C; ++i)
        first[i] = (float)once[i];
    tsr_layernorm_reference(R, C, 1e-5, first, x, g, b, twice);
    const cl_command_queue_properties props[2] = {0, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE};
    const tsr_layernorm_desc d = {.rows = R, .cols = C, .eps = 1e-5f};
    for (int k = 0; k < 2; ++k) {
        cl_int err;
        cl_command_queue q = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev), props[k], &err);
        if (err != CL_SUCCESS) continue; /* out-of-order queues are optional */
        cl_mem dxs = th_buffer_from(dev, xs, R * C), dgs = th_buffer_from(dev, gs, C), db = th_buffer_from(dev, b, C);
        cl_mem dx = th_buffer_from(dev, x, R * C), dg = th_buffer_from(dev, g, C), dy = th_buffer(dev, R * C);
        cl_event ev = NULL;
        TH_ASSERT_OK(tsr_layernorm(dev, &d, dxs, NULL, dgs, db, dy, q, &ev));
        cl_command_queue evq = NULL;
        assert_int_equal(clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof evq, &evq, NULL), CL_SUCCESS);
        assert_ptr_equal(evq, q);
        assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
        clReleaseEvent(ev);
        th_read(dev, dy, got, R * C);
        for (int i = 0; i < R * C; ++i) {
            const bool nan_expected = (i / C >= 1 && i / C <= 3) || i % C == 5;
            if (nan_expected ? !isnan(got[i]) : !(fabs(got[i] - ref[i]) <= 1e-5 * (1 + fabs(ref[i]))))
                fail_msg("queue %d: y[%d][%d] = %.9g, reference %.9g", k, i / C, i % C, (double)got[i], ref[i]);
        }
        TH_ASSERT_OK(tsr_layernorm(dev, &d, dx, NULL, dg, db, dy, q, &ev));
        assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
        clReleaseEvent(ev);
        TH_ASSERT_OK(tsr_layernorm(dev, &d, dy, dx, dg, db, dy, q, &ev));
        assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
        clReleaseEvent(ev);
        th_read(dev, dy, got, R * C);
        for (int i = 0; i < R * C; ++i)
            if (!(fabs(got[i] - twice[i]) <= 1e-5 * (1 + fabs(twice[i]))))
                fail_msg("queue %d, twice: y[%d][%d] = %.9g, reference %.9g", k, i / C, i % C, (double)got[i],
                         twice[i]);
        assert_int_equal(clFinish(q), CL_SUCCESS);
        cl_mem all[] = {dxs, dgs, db, dx, dg, dy};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
            clReleaseMemObject(all[i]);
        clReleaseCommandQueue(q);
    }
}

/* The fixture's shape texts (tuner, report, bench): "ROWSxCOLS [+res] [DTYPE]", nothing else. */
static void shape_texts(void **state) {
    (void)state;
    size_t rows, cols;
    bool residual;
    tsr_dtype in, out;
    TH_ASSERT_OK(tsr_layernorm_shape_parse("4096x768 +res bf16/f32", &rows, &cols, &residual, &in, &out));
    assert_true(rows == 4096 && cols == 768 && residual && in == TSR_BF16 && out == TSR_F32);
    TH_ASSERT_OK(tsr_layernorm_shape_parse("3x1", &rows, &cols, &residual, &in, &out));
    assert_true(rows == 3 && cols == 1 && !residual && in == TSR_F32 && out == TSR_F32);
    const char *const bad[] = {"",          "768",    "0x768",          "4x0", "4x-5", "-4x5", "4x5x6",
                               "4x5 +bias", "4x5 f8", "4x5 +res f16 x", "x5",  "4x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        if (tsr_layernorm_shape_parse(bad[i], &rows, &cols, &residual, &in, &out) != TSR_ERR_INVALID_ARG)
            fail_msg("shape '%s' was accepted", bad[i]);
        TH_ASSERT_CONTAINS(tsr_last_error(), "ROWSxCOLS");
    }
}

/* The tuner searches the op's space like any op's, validating every candidate. */
static void tuner_tunes_layernorm(void **state) {
    (void)state;
    tsr_tune_options o = {.strategy = TSR_TUNE_CLIMB,
                          .budget_evaluations = 3,
                          .classes = "narrow,medium-f16",
                          .dry_run = true,
                          .seed = 5};
    tsr_tune_result r[2];
    size_t n = 0;
    TH_ASSERT_OK(tsr_tune(dev, "layernorm", &o, r, 2, &n));
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; ++i) {
        assert_true(r[i].best_gflops > 0);
        assert_string_equal(r[i].unit, "GB/s");
        assert_int_equal(r[i].wrong_results, 0);
    }
}

int main(void) {
    if (th_small_mode()) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(bert_rows_and_odd_lengths),
            cmocka_unit_test(eps_and_large_means),
            cmocka_unit_test(extreme_row_magnitudes),
            cmocka_unit_test(in_place_on_x_and_residual),
            cmocka_unit_test(every_type_combination),
            cmocka_unit_test(random_shapes),
            cmocka_unit_test(configurations),
        };
        return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
    }
    /* The long cases (with empty caches) first, dealt across tests/meson.build's two shards (case i
     * runs in shard i mod 2). */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(configurations),
        cmocka_unit_test(extreme_row_magnitudes),
        cmocka_unit_test(tuner_tunes_layernorm),
        cmocka_unit_test(every_type_combination),
        cmocka_unit_test(random_shapes),
        cmocka_unit_test(bert_rows_and_odd_lengths),
        cmocka_unit_test(in_place_on_x_and_residual),
        cmocka_unit_test(eps_and_large_means),
        cmocka_unit_test(invalid_arguments),
        cmocka_unit_test(sub_buffers_overlap_by_memory),
        cmocka_unit_test(shape_texts),
        cmocka_unit_test(special_values_and_queues),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
