/* One call split across a device group: GEMM, strided-batched GEMM and attention against double
 * references, every tile bitwise equal to the same tile run alone on the device that computed it,
 * guards and poisoned outputs, the split's weights and statistics, and refusals that leave the
 * output untouched. Devices: $TSR_MULTI_DEVICES ("pthread,basic" in the suite: PoCL's two CPU
 * devices), else the default device twice. */
#include "harness.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 4
static tsr_device *devices[MAX_DEVICES];
static size_t ndevices;
static tsr_device_group *group;

static int open_group(void **state) {
    (void)state;
    const char *list = getenv("TSR_MULTI_DEVICES");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list && *list ? list : ",");
    char *save = NULL;
    for (char *sel = strtok_r(buf, ",", &save); sel && ndevices < MAX_DEVICES; sel = strtok_r(NULL, ",", &save))
        if (tsr_device_open(sel, &devices[ndevices]) == TSR_SUCCESS) ndevices++;
    while (ndevices < 2 && tsr_device_open(NULL, &devices[ndevices]) == TSR_SUCCESS)
        ndevices++;
    if (ndevices < 2) return -1;
    for (size_t d = 0; d < ndevices; d++)
        printf("# device %zu: %s\n", d, tsr_device_get_info(devices[d])->name);
    return tsr_group_create(devices, ndevices, &group) == TSR_SUCCESS ? 0 : -1;
}

static int close_group(void **state) {
    (void)state;
    tsr_group_destroy(group);
    for (size_t d = 0; d < ndevices; d++)
        tsr_device_close(devices[d]);
    return 0;
}

static size_t rand_in(size_t lo, size_t hi) { return lo + th_rand() % (hi - lo + 1); }

static float *random_floats(size_t n) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(x);
    th_fill_uniform(x, n, -1, 1);
    return x;
}

/* The tiles of g's last call cover [0, units) exactly once, and every device's counts add up. */
static void check_tiles_of(tsr_device_group *g, size_t members, size_t units) {
    tsr_group_stats st;
    TH_ASSERT_OK(tsr_group_last_stats(g, &st));
    unsigned char *seen = calloc(units, 1);
    assert_non_null(seen);
    size_t per_device[MAX_DEVICES + 1] = {0};
    for (size_t t = 0; t < st.tile_count; t++) {
        const tsr_group_tile *tile = &st.tiles[t];
        assert_true(tile->device < members && tile->count > 0 && tile->first + tile->count <= units);
        per_device[tile->device] += tile->count;
        for (size_t u = tile->first; u < tile->first + tile->count; u++) {
            if (seen[u]) fail_msg("unit %zu computed twice", u);
            seen[u] = 1;
        }
    }
    for (size_t u = 0; u < units; u++)
        if (!seen[u]) fail_msg("unit %zu never computed", u);
    double weights = 0;
    for (size_t d = 0; d < members; d++) {
        assert_int_equal(per_device[d], st.devices[d].units);
        weights += st.devices[d].weight;
    }
    assert_true(fabs(weights - 1) < 1e-9);
    free(seen);
}

static void check_tiles(size_t units) { check_tiles_of(group, ndevices, units); }

/* ---- GEMM ---- */

typedef struct gemm_case {
    int row_major, ta, tb;
    size_t m, n, k, lda, ldb, ldc;
    float alpha, beta;
    float *a, *b, *c;
    size_t a_n, b_n, c_n; /* floats of each array, guards included */
} gemm_case;

static size_t stored_rows(int row_major, int trans, size_t r, size_t c) {
    return row_major ? (trans ? c : r) : (trans ? r : c);
}
static size_t stored_cols(int row_major, int trans, size_t r, size_t c) {
    return row_major ? (trans ? r : c) : (trans ? c : r);
}

static gemm_case random_gemm(int row_major, int ta, int tb, float beta) {
    gemm_case g = {
        .row_major = row_major, .ta = ta, .tb = tb, .beta = beta, .alpha = 0.5f + (float)(th_rand() % 100) / 100};
    g.m = rand_in(40, 200), g.n = rand_in(20, 150), g.k = rand_in(10, 120);
    g.lda = stored_cols(row_major, ta, g.m, g.k) + rand_in(0, 5);
    g.ldb = stored_cols(row_major, tb, g.k, g.n) + rand_in(0, 5);
    g.ldc = stored_cols(row_major, 0, g.m, g.n) + rand_in(0, 5);
    g.a_n = stored_rows(row_major, ta, g.m, g.k) * g.lda;
    g.b_n = stored_rows(row_major, tb, g.k, g.n) * g.ldb;
    g.c_n = stored_rows(row_major, 0, g.m, g.n) * g.ldc + 7; /* 7 guard floats past the end */
    g.a = random_floats(g.a_n), g.b = random_floats(g.b_n), g.c = random_floats(g.c_n);
    if (beta == 0) th_poison(g.c, g.c_n - 7); /* beta 0 never reads C: NaN must not come through */
    return g;
}

static void free_gemm(gemm_case *g) { free(g->a), free(g->b), free(g->c); }

/* The group GEMM through its descriptor, from the CLBlast-style argument lists the cases are written
 * in (offsets 0): one product, and a strided batch. */
static tsr_status group_gemm(tsr_device_group *g, tsr_layout layout, tsr_transpose ta, tsr_transpose tb, size_t m,
                             size_t n, size_t k, float alpha, const float *a, size_t lda, const float *b, size_t ldb,
                             float beta, float *c, size_t ldc) {
    const tsr_matmul_desc desc = {.layout = layout,
                                  .trans_a = ta,
                                  .trans_b = tb,
                                  .m = m,
                                  .n = n,
                                  .k = k,
                                  .alpha = alpha,
                                  .beta = beta,
                                  .a = {.ld = lda},
                                  .b = {.ld = ldb},
                                  .c = {.ld = ldc}};
    return tsr_matmul_multi(g, &desc, a, b, c);
}

static tsr_status group_batched(tsr_device_group *g, tsr_layout layout, tsr_transpose ta, tsr_transpose tb, size_t m,
                                size_t n, size_t k, float alpha, const float *a, size_t lda, size_t sa, const float *b,
                                size_t ldb, size_t sb, float beta, float *c, size_t ldc, size_t sc, size_t batch) {
    const tsr_matmul_desc desc = {.layout = layout,
                                  .trans_a = ta,
                                  .trans_b = tb,
                                  .m = m,
                                  .n = n,
                                  .k = k,
                                  .batch = batch,
                                  .alpha = alpha,
                                  .beta = beta,
                                  .a = {.ld = lda, .batch_stride = sa},
                                  .b = {.ld = ldb, .batch_stride = sb},
                                  .c = {.ld = ldc, .batch_stride = sc}};
    return tsr_matmul_multi(g, &desc, a, b, c);
}

static void run_gemm_case(int row_major, int ta, int tb, float beta) {
    gemm_case g = random_gemm(row_major, ta, tb, beta);
    tsr_layout layout = row_major ? TSR_ROW_MAJOR : TSR_COL_MAJOR;
    tsr_transpose tra = ta ? TSR_TRANS : TSR_NO_TRANS, trb = tb ? TSR_TRANS : TSR_NO_TRANS;
    float *before = malloc(g.c_n * sizeof(float));
    double *ref = malloc(g.c_n * sizeof(double));
    assert_non_null(before), assert_non_null(ref);
    memcpy(before, g.c, g.c_n * sizeof(float));
    th_ref_sgemm(row_major, ta, tb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, ref, g.ldc);
    TH_ASSERT_OK(
        group_gemm(group, layout, tra, trb, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc));
    double err = th_rel_error_matrix(row_major, g.m, g.n, g.c, ref, g.ldc);
    if (!(err < 2e-6))
        fail_msg("relative error %.3g (%s, ta %d, tb %d, %zux%zux%zu)", err, row_major ? "row" : "col", ta, tb, g.m,
                 g.n, g.k);
    /* padding between lines and the guard past the end are untouched (NaN-safe: compare bits) */
    size_t lines = row_major ? g.m : g.n, line = row_major ? g.n : g.m;
    for (size_t i = 0; i < lines; i++)
        for (size_t j = line; j < g.ldc; j++)
            assert_memory_equal(&g.c[i * g.ldc + j], &before[i * g.ldc + j], sizeof(float));
    assert_memory_equal(g.c + g.c_n - 7, before + g.c_n - 7, 7 * sizeof(float));
    check_tiles(row_major ? g.m : g.n);

    /* every tile equals the same tile run alone on its device, bit for bit */
    tsr_group_stats st;
    TH_ASSERT_OK(tsr_group_last_stats(group, &st));
    for (size_t t = 0; t < st.tile_count; t++) {
        tsr_group_tile tile = st.tiles[t];
        tsr_device *dev = devices[tile.device];
        cl_mem a = th_buffer_from(dev, g.a, g.a_n), b = th_buffer_from(dev, g.b, g.b_n),
               c = th_buffer_from(dev, before, g.c_n);
        size_t f = tile.first, cnt = tile.count;
        if (row_major) /* rows of C; rows of op(A) */
            TH_ASSERT_OK(tsr_sgemm(dev, layout, tra, trb, cnt, g.n, g.k, g.alpha, a, ta ? f : f * g.lda, g.lda, b, 0,
                                   g.ldb, g.beta, c, f * g.ldc, g.ldc, NULL, NULL));
        else /* columns of C; columns of op(B) */
            TH_ASSERT_OK(tsr_sgemm(dev, layout, tra, trb, g.m, cnt, g.k, g.alpha, a, 0, g.lda, b, tb ? f : f * g.ldb,
                                   g.ldb, g.beta, c, f * g.ldc, g.ldc, NULL, NULL));
        float *alone = malloc(g.c_n * sizeof(float));
        assert_non_null(alone);
        th_read(dev, c, alone, g.c_n);
        for (size_t u = f; u < f + cnt; u++)
            if (memcmp(alone + u * g.ldc, g.c + u * g.ldc, line * sizeof(float)))
                fail_msg("tile %zu (device %zu, units %zu+%zu): line %zu differs from the device's own run", t,
                         tile.device, f, cnt, u);
        free(alone);
        clReleaseMemObject(a), clReleaseMemObject(b), clReleaseMemObject(c);
    }
    free(before), free(ref);
    free_gemm(&g);
}

static void gemm_every_layout(void **state) {
    (void)state;
    for (int row_major = 0; row_major < 2; row_major++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                run_gemm_case(row_major, ta, tb, (ta ^ tb) ? 0.0f : 0.75f);
}

static void gemm_weights_and_stats(void **state) {
    (void)state;
    gemm_case g = random_gemm(1, 0, 0, 0.0f);
    tsr_group_stats st;
    TH_ASSERT_OK(tsr_group_set_weights(group, NULL));
    /* a shape class of its own: the first call splits equally, the second by measured rates */
    g.m = 333;
    free(g.a), free(g.c);
    g.a_n = g.m * g.lda, g.c_n = g.m * g.ldc;
    g.a = random_floats(g.a_n), g.c = random_floats(g.c_n);
    /* a call in which a device compiled teaches nothing about its rate; tiles of new heights can
     * compile again, so allow a few calls before the split must run on measured rates */
    for (int call = 0; call < 6; call++) {
        TH_ASSERT_OK(group_gemm(group, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, g.m, g.n, g.k, 1, g.a, g.lda, g.b,
                                g.ldb, 0, g.c, g.ldc));
        TH_ASSERT_OK(tsr_group_last_stats(group, &st));
        printf("# call %d: weights %s, %.1f ms;", call, st.weights_from, st.seconds * 1e3);
        for (size_t d = 0; d < ndevices; d++)
            printf(" device %zu: %.2f planned, %zu rows, %.2f GFLOP/s;", d, st.devices[d].weight, st.devices[d].units,
                   st.devices[d].gflops);
        printf("\n");
        assert_true(st.seconds > 0);
        check_tiles(g.m);
        if (call && strcmp(st.weights_from, "equal")) break;
    }
    assert_true(!strcmp(st.weights_from, "measured") || !strcmp(st.weights_from, "tuning database"));
    double w[MAX_DEVICES] = {0};
    w[ndevices - 1] = 2.5; /* everything on the last device */
    TH_ASSERT_OK(tsr_group_set_weights(group, w));
    TH_ASSERT_OK(group_gemm(group, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, g.m, g.n, g.k, 1, g.a, g.lda, g.b, g.ldb,
                            0, g.c, g.ldc));
    TH_ASSERT_OK(tsr_group_last_stats(group, &st));
    assert_string_equal(st.weights_from, "given");
    assert_int_equal(st.devices[ndevices - 1].units, g.m);
    for (size_t d = 0; d + 1 < ndevices; d++)
        assert_int_equal(st.devices[d].units, 0);
    check_tiles(g.m);
    /* bad weights are refused and leave the given ones in place */
    double zeros[MAX_DEVICES] = {0}, bad[MAX_DEVICES] = {1, 1, 1, 1};
    TH_ASSERT_STATUS(tsr_group_set_weights(group, zeros), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "every weight is 0");
    bad[0] = NAN;
    TH_ASSERT_STATUS(tsr_group_set_weights(group, bad), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "weights[0]");
    bad[0] = -1;
    TH_ASSERT_STATUS(tsr_group_set_weights(group, bad), TSR_ERR_INVALID_ARG);
    TH_ASSERT_OK(tsr_group_set_weights(group, NULL));
    free_gemm(&g);
}

/* alpha = 0 and k = 0: C <- beta C without reading A and B */
static void gemm_degenerate(void **state) {
    (void)state;
    size_t m = 37, n = 19;
    float *c = random_floats(m * n), *want = malloc(m * n * sizeof(float));
    assert_non_null(want);
    for (size_t i = 0; i < m * n; i++)
        want[i] = 0.5f * c[i];
    float one = 1;
    TH_ASSERT_OK(
        group_gemm(group, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, n, 0, 1, &one, 1, &one, n, 0.5f, c, n));
    assert_memory_equal(c, want, m * n * sizeof(float));
    /* alpha = 0 reads neither A nor B, so C may overlap them (tsr_sgemm allows it too) */
    float *ab = random_floats(m * n + 8);
    memcpy(want, ab, m * n * sizeof(float));
    for (size_t i = 0; i < m * n; i++)
        want[i] *= 2;
    TH_ASSERT_OK(group_gemm(group, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, n, 4, 0, ab + 1, 4, ab, n, 2, ab, n));
    assert_memory_equal(ab, want, m * n * sizeof(float));
    /* batched, k = 0: every entry C <- beta C */
    float *cb = random_floats(3 * m * n);
    memcpy(want, cb, m * n * sizeof(float)); /* the first entry */
    TH_ASSERT_OK(group_batched(group, TSR_ROW_MAJOR, TSR_TRANS, TSR_NO_TRANS, m, n, 0, 1, &one, m, 0, &one, n, 0, 0.25f,
                               cb, n, m * n, 3));
    for (size_t i = 0; i < m * n; i++)
        assert_true(cb[i] == 0.25f * want[i]);
    free(c), free(want), free(ab), free(cb);
}

/* The group calls take tsr_matmul's and tsr_attention's argument rules: every case below gets the
 * same status from the single-device call (on buffers as large as the host arrays) and from the
 * group call, whose output stays untouched when it refuses. */
typedef struct rule_case {
    const char *what;
    int layout, ta, tb;
    size_t m, n, k, lda, ldb, ldc, sa, sb, sc, batch;
    bool null_a;
} rule_case;

static void group_calls_follow_the_single_device_rules(void **state) {
    (void)state;
    enum { F = 4096 };
    const rule_case cases[] = {
        {"m = 0", TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, 0, 8, 4, 4, 8, 8, 32, 32, 64, 2, false},
        {"n = 0", TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, 8, 0, 4, 4, 8, 8, 32, 32, 64, 2, false},
        {"batch = 0 (one product)", TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, 8, 8, 4, 4, 8, 8, 32, 32, 64, 0, false},
        {"m = 0, k = 0", TSR_COL_MAJOR, TSR_TRANS, TSR_NO_TRANS, 0, 8, 0, 4, 8, 8, 32, 32, 64, 2, false},
        {"k = 0 with A NULL", TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, 8, 8, 0, 4, 8, 8, 32, 32, 64, 2, true},
        {"layout 7", 7, TSR_NO_TRANS, TSR_NO_TRANS, 8, 8, 4, 4, 8, 8, 32, 32, 64, 2, false},
        {"trans_b 5", TSR_ROW_MAJOR, TSR_NO_TRANS, 5, 8, 8, 4, 4, 8, 8, 32, 32, 64, 2, false},
        {"defaults: no transposes, packed (k = 0: ld 1)", 0, 0, 0, 8, 8, 0, 0, 0, 0, 0, 0, 64, 2, false},
        {"lda short", TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, 8, 8, 4, 3, 8, 8, 32, 32, 64, 2, false},
        {"ldc short, column-major", TSR_COL_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, 8, 6, 4, 8, 4, 7, 32, 32, 64, 2, false},
        {"m past INT_MAX", TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, (size_t)INT_MAX + 1, 8, 4, 4, 8, 8, 32, 32, 64, 1,
         false},
        {"k past INT_MAX", TSR_ROW_MAJOR, TSR_TRANS, TSR_NO_TRANS, 8, 8, (size_t)INT_MAX + 1, 8, 8, 8, 32, 32, 64, 1,
         false},
        {"ldb past INT_MAX", TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, 8, 8, 4, 4, (size_t)INT_MAX + 1, 8, 32, 0, 64,
         1, false},
        {"C matrices overlap", TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, 8, 8, 4, 4, 8, 8, 32, 32, 63, 2, false},
        {"extent overflows", TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, 8, 8, 4, 4, 8, 8, SIZE_MAX / 4, 32, 64, 3,
         false},
        {"valid (the control)", TSR_COL_MAJOR, TSR_TRANS, TSR_TRANS, 8, 6, 5, 5, 6, 9, 40, 30, 54, 2, false},
    };
    float *a = random_floats(F), *b = random_floats(F), *c = random_floats(F), *kept = malloc(F * sizeof(float));
    assert_non_null(kept);
    memcpy(kept, c, F * sizeof(float));
    cl_mem da = th_buffer_from(devices[0], a, F), db = th_buffer_from(devices[0], b, F),
           dc = th_buffer_from(devices[0], c, F);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const rule_case *r = &cases[i];
        for (int batched = 0; batched < 2; batched++) {
            if (!batched && r->batch != 1 && r->batch != 2) continue; /* a batch rule */
            tsr_status single, multi;
            char single_error[512];
            /* one descriptor for both: the group's rules are tsr_matmul's (batch 1 in the unbatched pass) */
            const tsr_matmul_desc desc = {.layout = (tsr_layout)r->layout,
                                          .trans_a = (tsr_transpose)r->ta,
                                          .trans_b = (tsr_transpose)r->tb,
                                          .m = r->m,
                                          .n = r->n,
                                          .k = r->k,
                                          .batch = batched ? r->batch : 1,
                                          .alpha = 1,
                                          .beta = 0.5f,
                                          .a = {.ld = r->lda, .batch_stride = batched ? r->sa : 0},
                                          .b = {.ld = r->ldb, .batch_stride = batched ? r->sb : 0},
                                          .c = {.ld = r->ldc, .batch_stride = batched ? r->sc : 0}};
            single = tsr_matmul(devices[0], &desc, r->null_a ? NULL : da, db, dc, NULL, NULL);
            snprintf(single_error, sizeof single_error, "%s", tsr_last_error());
            multi = tsr_matmul_multi(group, &desc, r->null_a ? NULL : a, b, c);
            printf("# %s%s: single %s, group %s\n", r->what, batched ? " (batched)" : "", tsr_status_str(single),
                   tsr_status_str(multi));
            if (single != multi)
                fail_msg("%s%s: tsr_matmul says %s (%s), the group call %s (%s)", r->what, batched ? " (batched)" : "",
                         tsr_status_str(single), single_error, tsr_status_str(multi), tsr_last_error());
            if (multi != TSR_SUCCESS) {
                TH_ASSERT_CONTAINS(tsr_last_error(), "tsr_matmul_multi");
                assert_memory_equal(c, kept, F * sizeof(float));
            } else {
                memcpy(c, kept, F * sizeof(float));
            }
        }
    }
    assert_int_equal(clFinish(tsr_device_queue(devices[0])), CL_SUCCESS);
    clReleaseMemObject(da), clReleaseMemObject(db), clReleaseMemObject(dc);

    /* attention: a type outside the enum is an invalid argument (not "unsupported"), and
     * batch * heads past INT_MAX is refused as tsr_attention refuses it */
    float *o = malloc(F * sizeof(float));
    assert_non_null(o);
    th_poison(o, F);
    memcpy(kept, o, F * sizeof(float));
    tsr_attention_desc d = {.batch = 2, .heads = 2, .q_len = 4, .kv_len = 4, .head_dim = 8, .k_type = (tsr_dtype)(TSR_DTYPE_COUNT + 4)};
    cl_mem dq = th_buffer_from(devices[0], a, F), dout = th_buffer(devices[0], F);
    TH_ASSERT_STATUS(tsr_attention(devices[0], &d, dq, dq, dq, dout, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_attention_multi(group, &d, a, a, a, o), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "k_type");
    d.k_type = TSR_F32, d.batch = 65536, d.heads = 65536, d.q_len = d.kv_len = 1, d.head_dim = 1;
    d.q_strides[0] = d.k_strides[0] = d.v_strides[0] = d.o_strides[0] = 0; /* contiguous: heads overlap-free */
    TH_ASSERT_STATUS(tsr_attention(devices[0], &d, dq, dq, dq, dout, NULL, NULL), TSR_ERR_OVERFLOW);
    TH_ASSERT_STATUS(tsr_attention_multi(group, &d, a, a, a, o), TSR_ERR_OVERFLOW);
    TH_ASSERT_CONTAINS(tsr_last_error(), "batch*heads");
    assert_memory_equal(o, kept, F * sizeof(float));
    clReleaseMemObject(dq), clReleaseMemObject(dout);
    free(a), free(b), free(c), free(kept), free(o);
}

static void gemm_refusals(void **state) {
    (void)state;
    size_t m = 20, n = 10, k = 8;
    float *a = random_floats(m * k), *b = random_floats(k * n), *c = malloc(m * n * sizeof(float));
    float *poisoned = malloc(m * n * sizeof(float));
    assert_non_null(c), assert_non_null(poisoned);
    th_poison(c, m * n);
    memcpy(poisoned, c, m * n * sizeof(float));
    TH_ASSERT_STATUS(group_gemm(NULL, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, n, k, 1, a, k, b, n, 0, c, n),
                     TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(group_gemm(group, (tsr_layout)7, TSR_NO_TRANS, TSR_NO_TRANS, m, n, k, 1, a, k, b, n, 0, c, n),
                     TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "layout");
    TH_ASSERT_STATUS(group_gemm(group, TSR_ROW_MAJOR, (tsr_transpose)5, TSR_NO_TRANS, m, n, k, 1, a, k, b, n, 0, c, n),
                     TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(group_gemm(group, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, n, k, 1, a, k - 1, b, n, 0, c, n),
                     TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "lda");
    TH_ASSERT_STATUS(group_gemm(group, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, n, k, 1, NULL, k, b, n, 0, c, n),
                     TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "A is NULL");
    /* C overlapping A */
    TH_ASSERT_STATUS(group_gemm(group, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, k, k, 1, a, k, b, n, 0, a + 3, k),
                     TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "shares memory");
    /* the descriptor's own rules: a NULL one, fp32 only, no epilogue, each refused by name */
    TH_ASSERT_STATUS(tsr_matmul_multi(group, NULL, a, b, c), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "desc is NULL");
    const tsr_matmul_desc base = {.m = m, .n = n, .k = k, .alpha = 1};
    tsr_matmul_desc d = base;
    d.b.dtype = TSR_F16;
    TH_ASSERT_STATUS(tsr_matmul_multi(group, &d, a, b, c), TSR_ERR_UNSUPPORTED);
    TH_ASSERT_CONTAINS(tsr_last_error(), "b.dtype is f16");
    d = base, d.c.dtype = (tsr_dtype)9;
    TH_ASSERT_STATUS(tsr_matmul_multi(group, &d, a, b, c), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "c.dtype");
    d = base, d.epilogue.activation = TSR_ACT_RELU;
    TH_ASSERT_STATUS(tsr_matmul_multi(group, &d, a, b, c), TSR_ERR_UNSUPPORTED);
    TH_ASSERT_CONTAINS(tsr_last_error(), "epilogue");
    /* C overlapping A only through A's offset */
    d = base, d.n = k, d.a.offset = 3;
    TH_ASSERT_STATUS(tsr_matmul_multi(group, &d, a, b, a + 3 + m * k - 1), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "shares memory");
    TH_ASSERT_STATUS(
        group_gemm(group, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, SIZE_MAX / 2, n, k, 1, a, k, b, n, 0, c, n),
        TSR_ERR_OVERFLOW);
    assert_memory_equal(c, poisoned, m * n * sizeof(float));
    tsr_device_group *g2 = NULL;
    TH_ASSERT_STATUS(tsr_group_create(devices, 0, &g2), TSR_ERR_INVALID_ARG);
    tsr_device *with_null[2] = {devices[0], NULL};
    TH_ASSERT_STATUS(tsr_group_create(with_null, 2, &g2), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "devices[1]");
    assert_null(g2);
    /* the same device twice: allowed, with a warning */
    tsr_device *twice[2] = {devices[0], devices[0]};
    TH_ASSERT_OK(tsr_group_create(twice, 2, &g2));
    TH_ASSERT_CONTAINS(tsr_last_warning(), "same device");
    tsr_group_destroy(g2);
    g2 = NULL;
    assert_int_equal(tsr_group_size(NULL), 0);
    assert_int_equal(tsr_group_size(group), ndevices);
    tsr_group_destroy(NULL);
    free(a), free(b), free(c), free(poisoned);
}


/* ---- weights of 0 ---- */

/* After a call with `weights`: every unit computed once, none by a device of weight 0. */
static void check_zero_weights(tsr_device_group *g, size_t members, const double *weights, size_t units,
                               const char *what) {
    check_tiles_of(g, members, units);
    tsr_group_stats st;
    TH_ASSERT_OK(tsr_group_last_stats(g, &st));
    for (size_t d = 0; d < members; d++)
        if (weights[d] == 0 && st.devices[d].units)
            fail_msg("%s: device %zu has weight 0 but computed %zu units", what, d, st.devices[d].units);
}

/* A device of weight 0 takes no units, and every unit is computed by a device of positive weight,
 * whatever the rounding of share edges (GEMM's are on 64 rows): weights {1, 0}, {0, 1} and, in a
 * group holding device 0 twice, {1, 0, 1}; GEMM with m below the group's size, at and around 64
 * and not a multiple of it, in both layouts; batches and attention with fewer units than devices. */
static void zero_weight_devices_take_no_work(void **state) {
    (void)state;
    tsr_device *three[3] = {devices[0], devices[1], devices[0]};
    tsr_device_group *g3 = NULL;
    TH_ASSERT_OK(tsr_group_create(three, 3, &g3));
    double w10[MAX_DEVICES] = {1}, w01[MAX_DEVICES] = {0}, w101[3] = {1, 0, 1};
    w01[ndevices - 1] = 1;
    const struct {
        tsr_device_group *g;
        size_t members;
        const double *w;
        const char *name;
    } splits[] = {{group, ndevices, w10, "{1, 0}"}, {group, ndevices, w01, "{0, 1}"}, {g3, 3, w101, "{1, 0, 1}"}};
    const size_t ms[] = {1, 2, 63, 64, 65, 70, 129};
    for (size_t sp = 0; sp < sizeof splits / sizeof splits[0]; sp++) {
        tsr_device_group *g = splits[sp].g;
        TH_ASSERT_OK(tsr_group_set_weights(g, splits[sp].w));
        char what[96];
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
            const int row_major = i % 2 == 0;
            const size_t m = ms[i], n = 9, k = 7, lines = row_major ? m : n, line = row_major ? n : m;
            float *a = random_floats(m * k), *b = random_floats(k * n), *c = random_floats(m * n);
            double *ref = malloc(m * n * sizeof(double));
            assert_non_null(ref);
            th_ref_sgemm(row_major, 0, 0, m, n, k, 1, a, row_major ? k : m, b, row_major ? n : k, 0.5, c, ref, line);
            snprintf(what, sizeof what, "GEMM m = %zu (%s), weights %s", m, row_major ? "row-major" : "column-major",
                     splits[sp].name);
            tsr_status st = group_gemm(g, row_major ? TSR_ROW_MAJOR : TSR_COL_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, n,
                                       k, 1, a, row_major ? k : m, b, row_major ? n : k, 0.5f, c, line);
            if (st != TSR_SUCCESS) fail_msg("%s: %s: %s", what, tsr_status_str(st), tsr_last_error());
            double err = th_rel_error_matrix(row_major, m, n, c, ref, line);
            if (!(err < 2e-6)) fail_msg("%s: relative error %.3g", what, err);
            check_zero_weights(g, splits[sp].members, splits[sp].w, row_major ? m : n, what);
            (void)lines;
            free(a), free(b), free(c), free(ref);
        }
        for (size_t batch = 1; batch <= 3; batch++) {
            const size_t m = 5, n = 6, k = 4;
            float *a = random_floats(batch * m * k), *b = random_floats(k * n), *c = random_floats(batch * m * n);
            double *ref = malloc(batch * m * n * sizeof(double));
            assert_non_null(ref);
            for (size_t e = 0; e < batch; e++)
                th_ref_sgemm(1, 0, 0, m, n, k, 1, a + e * m * k, k, b, n, 0.5, c + e * m * n, ref + e * m * n, n);
            snprintf(what, sizeof what, "batched GEMM, batch %zu, weights %s", batch, splits[sp].name);
            tsr_status st = group_batched(g, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, n, k, 1, a, k, m * k, b, n,
                                          0, 0.5f, c, n, m * n, batch);
            if (st != TSR_SUCCESS) fail_msg("%s: %s: %s", what, tsr_status_str(st), tsr_last_error());
            for (size_t e = 0; e < batch; e++)
                if (!(th_rel_error_matrix(1, m, n, c + e * m * n, ref + e * m * n, n) < 2e-6))
                    fail_msg("%s: entry %zu is wrong", what, e);
            /* a batch of one is one product: its units are rows */
            check_zero_weights(g, splits[sp].members, splits[sp].w, batch > 1 ? batch : m, what);
            free(a), free(b), free(c), free(ref);
        }
        const size_t shapes[][2] = {{1, 1}, {1, 2}, {1, 3}, {2, 3}}; /* (batch, heads) */
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const size_t B = shapes[i][0], H = shapes[i][1], L = 5, D = 8, total = B * H * L * D;
            float *q = random_floats(total), *kk = random_floats(total), *v = random_floats(total),
                  *o = malloc(total * sizeof(float));
            double *scores = malloc(L * sizeof(double)), *want = malloc(D * sizeof(double));
            assert_non_null(o), assert_non_null(scores), assert_non_null(want);
            th_poison(o, total);
            tsr_attention_desc d = {.batch = B, .heads = H, .q_len = L, .kv_len = L, .head_dim = D};
            snprintf(what, sizeof what, "attention %zu x %zu, weights %s", B, H, splits[sp].name);
            tsr_status st = tsr_attention_multi(g, &d, q, kk, v, o);
            if (st != TSR_SUCCESS) fail_msg("%s: %s: %s", what, tsr_status_str(st), tsr_last_error());
            for (size_t bh = 0; bh < B * H; bh++) /* contiguous [B, H, L, D]: head bh's rows follow each other */
                for (size_t r = 0; r < L; r++) {
                    tsr_attention_reference_row(q + (bh * L + r) * D, kk + bh * L * D, v + bh * L * D, L, D,
                                                1.0 / sqrt((double)D), scores, want);
                    for (size_t x = 0; x < D; x++)
                        if (!(fabs(o[(bh * L + r) * D + x] - want[x]) < 1e-5 + 1e-5 * fabs(want[x])))
                            fail_msg("%s: O[pair %zu, row %zu, %zu] = %g, reference %g", what, bh, r, x,
                                     (double)o[(bh * L + r) * D + x], want[x]);
                }
            check_zero_weights(g, splits[sp].members, splits[sp].w, B * H, what);
            free(q), free(kk), free(v), free(o), free(scores), free(want);
        }
        TH_ASSERT_OK(tsr_group_set_weights(g, NULL));
    }
    tsr_group_destroy(g3);
}

/* The units a failed call reports as written (the tiles tsr_group_last_stats lists after it): a
 * mask over [0, units), each unit listed once, by a device of the group. */
static unsigned char *written_units(tsr_device_group *g, size_t members, size_t units) {
    tsr_group_stats st;
    TH_ASSERT_OK(tsr_group_last_stats(g, &st));
    unsigned char *mask = calloc(units, 1);
    assert_non_null(mask);
    size_t total = 0;
    for (size_t t = 0; t < st.tile_count; t++) {
        const tsr_group_tile *tile = &st.tiles[t];
        assert_true(tile->device < members && tile->count > 0 && tile->first + tile->count <= units);
        for (size_t u = tile->first; u < tile->first + tile->count; u++) {
            if (mask[u]) fail_msg("unit %zu reported written twice", u);
            mask[u] = 1;
        }
        total += tile->count;
    }
    size_t per_device = 0;
    for (size_t d = 0; d < members; d++)
        per_device += st.devices[d].units;
    assert_int_equal(per_device, total);
    assert_true(st.seconds == 0);
    return mask;
}

/* One GEMM call under TSR_TEST_MULTI_FAIL=`hook` on g: it fails naming the device and saying what it
 * wrote; each row it reports written holds its result, every other row is as it was. Returns whether
 * the injected failure was reached (false: the call succeeded, another device took the tile). */
static bool gemm_fails_and_says_what_it_wrote(tsr_device_group *g, size_t members, tsr_device *failing,
                                             const char *hook, size_t *rows_written) {
    const size_t m = 300, n = 40, k = 30;
    float *a = random_floats(m * k), *b = random_floats(k * n), *c = random_floats(m * n);
    float *before = malloc(m * n * sizeof(float));
    double *ref = malloc(m * n * sizeof(double));
    assert_non_null(before), assert_non_null(ref);
    memcpy(before, c, m * n * sizeof(float));
    th_ref_sgemm(1, 0, 0, m, n, k, 1, a, k, b, n, 0.5, c, ref, n);
    setenv("TSR_TEST_MULTI_FAIL", hook, 1);
    tsr_status st = group_gemm(g, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, n, k, 1, a, k, b, n, 0.5f, c, n);
    unsetenv("TSR_TEST_MULTI_FAIL");
    if (st == TSR_SUCCESS) {
        free(a), free(b), free(c), free(before), free(ref);
        return false;
    }
    TH_ASSERT_STATUS(st, TSR_ERR_OPENCL);
    char error[2048]; /* tsr_group_last_stats clears it */
    snprintf(error, sizeof error, "%s", tsr_last_error());
    printf("# TSR_TEST_MULTI_FAIL=%s: %s\n", hook, error);
    TH_ASSERT_CONTAINS(error, tsr_device_get_info(failing)->name);
    TH_ASSERT_CONTAINS(error, "injected");
    unsigned char *mask = written_units(g, members, m);
    size_t count = 0;
    for (size_t i = 0; i < m; i++) {
        count += mask[i];
        if (mask[i]) {
            for (size_t j = 0; j < n; j++)
                if (!(fabs(c[i * n + j] - ref[i * n + j]) <= 1e-5 * (1 + fabs(ref[i * n + j]))))
                    fail_msg("%s: row %zu is reported written but C[%zu][%zu] = %g, reference %g", hook, i, i, j,
                             (double)c[i * n + j], ref[i * n + j]);
        } else if (memcmp(c + i * n, before + i * n, n * sizeof(float))) {
            fail_msg("%s: row %zu is not reported written but changed", hook, i);
        }
    }
    /* the message says the same: the written rows as ranges, or that C was not written */
    if (count) {
        TH_ASSERT_CONTAINS(error, "rows of C written: ");
        TH_ASSERT_CONTAINS(error, "every other row of C is as it was");
        char first_range[64];
        size_t lo = 0;
        while (!mask[lo])
            lo++;
        size_t hi = lo;
        while (hi + 1 < m && mask[hi + 1])
            hi++;
        snprintf(first_range, sizeof first_range, "written: %zu-%zu", lo, hi);
        TH_ASSERT_CONTAINS(error, first_range);
    } else {
        TH_ASSERT_CONTAINS(error, "C was not written");
    }
    *rows_written = count;
    free(mask);
    free(a), free(b), free(c), free(before), free(ref);
    return true;
}

/* A device that fails mid-call (by the test hook TSR_TEST_MULTI_FAIL=DEVICE[:TILE], while the others
 * compute): the error names it, the other devices stop, the call says exactly which rows of C it
 * wrote (tsr_group_last_stats lists those tiles) and leaves every other row as it was, and the group
 * works afterwards. A hook that is not DEVICE[:TILE] with DEVICE in the group is refused. */
static void gemm_failure_names_device(void **state) {
    (void)state;
    char hook[32];
    size_t rows = 0;
    /* a group of its own, so the failure leaves the shared group's learned rates alone */
    tsr_device_group *fresh = NULL;
    TH_ASSERT_OK(tsr_group_create(devices, ndevices, &fresh));
    snprintf(hook, sizeof hook, "%zu", ndevices - 1); /* its first tile: always reached */
    assert_true(gemm_fails_and_says_what_it_wrote(fresh, ndevices, devices[ndevices - 1], hook, &rows));
    /* device 0's second tile (equal weights: a CPU device cuts its share in two), so its first one is
     * written; another device may take that second tile before device 0 claims it, so tries until
     * one reaches it (on a loaded 2-core machine four tries all lost the race once) */
    bool reached = false;
    for (int attempt = 0; attempt < 16 && !reached; attempt++) {
        tsr_device_group *g = NULL;
        TH_ASSERT_OK(tsr_group_create(devices, ndevices, &g));
        reached = gemm_fails_and_says_what_it_wrote(g, ndevices, devices[0], "0:1", &rows);
        tsr_group_destroy(g);
    }
    assert_true(reached);
    assert_true(rows > 0);

    /* the hook is read strictly: anything but DEVICE[:TILE] with DEVICE in the group is refused
     * before anything runs */
    const size_t m = 70, n = 5, k = 3;
    float *a = random_floats(m * k), *b = random_floats(k * n), *c = random_floats(m * n);
    float *before = malloc(m * n * sizeof(float));
    assert_non_null(before);
    memcpy(before, c, m * n * sizeof(float));
    const char *bad[] = {"", "x", "1x", "-1", " 1", "1:", ":1", "0:x", "99", "0:1:2", "18446744073709551616"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("TSR_TEST_MULTI_FAIL", bad[i], 1);
        tsr_status st =
            group_gemm(fresh, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, n, k, 1, a, k, b, n, 0.5f, c, n);
        unsetenv("TSR_TEST_MULTI_FAIL");
        if (st != TSR_ERR_INVALID_ARG)
            fail_msg("TSR_TEST_MULTI_FAIL='%s': %s (%s)", bad[i], tsr_status_str(st), tsr_last_error());
        TH_ASSERT_CONTAINS(tsr_last_error(), "TSR_TEST_MULTI_FAIL");
        assert_memory_equal(c, before, m * n * sizeof(float));
    }
    /* and the group still works */
    double *ref = malloc(m * n * sizeof(double));
    assert_non_null(ref);
    th_ref_sgemm(1, 0, 0, m, n, k, 1, a, k, b, n, 0.5, c, ref, n);
    TH_ASSERT_OK(group_gemm(fresh, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, n, k, 1, a, k, b, n, 0.5f, c, n));
    assert_true(th_rel_error_matrix(1, m, n, c, ref, n) < 2e-6);
    check_tiles_of(fresh, ndevices, m);
    tsr_group_destroy(fresh);
    free(ref), free(a), free(b), free(c), free(before);
}

/* The same for batch entries and (batch, head) pairs: a failed call's written units hold their
 * results, every other one is as it was, and the message names the units. */
static void batched_and_attention_failures_say_what_they_wrote(void **state) {
    (void)state;
    tsr_device_group *fresh = NULL;
    TH_ASSERT_OK(tsr_group_create(devices, ndevices, &fresh));
    char hook[32];
    snprintf(hook, sizeof hook, "%zu", ndevices - 1);
    const size_t batch = 9, m = 6, n = 7, k = 5;
    float *a = random_floats(batch * m * k), *b = random_floats(batch * k * n), *c = random_floats(batch * m * n);
    float *before = malloc(batch * m * n * sizeof(float));
    double *ref = malloc(batch * m * n * sizeof(double));
    assert_non_null(before), assert_non_null(ref);
    memcpy(before, c, batch * m * n * sizeof(float));
    for (size_t e = 0; e < batch; e++)
        th_ref_sgemm(1, 0, 0, m, n, k, 1, a + e * m * k, k, b + e * k * n, n, 0.5, c + e * m * n, ref + e * m * n, n);
    setenv("TSR_TEST_MULTI_FAIL", hook, 1);
    tsr_status st = group_batched(fresh, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, m, n, k, 1, a, k, m * k, b, n,
                                  k * n, 0.5f, c, n, m * n, batch);
    unsetenv("TSR_TEST_MULTI_FAIL");
    TH_ASSERT_STATUS(st, TSR_ERR_OPENCL);
    printf("# batched: %s\n", tsr_last_error());
    TH_ASSERT_CONTAINS(tsr_last_error(), "batch entr");
    unsigned char *mask = written_units(fresh, ndevices, batch);
    for (size_t e = 0; e < batch; e++)
        if (mask[e] ? !(th_rel_error_matrix(1, m, n, c + e * m * n, ref + e * m * n, n) < 2e-6)
                    : memcmp(c + e * m * n, before + e * m * n, m * n * sizeof(float)) != 0)
            fail_msg("batch entry %zu (%s written) is wrong", e, mask[e] ? "reported" : "not reported");
    free(mask), free(a), free(b), free(c), free(before), free(ref);

    const size_t B = 2, H = 4, L = 6, D = 8, total = B * H * L * D;
    float *q = random_floats(total), *kk = random_floats(total), *v = random_floats(total);
    float *o = malloc(total * sizeof(float)), *o_before = malloc(total * sizeof(float));
    double *scores = malloc(L * sizeof(double)), *want = malloc(D * sizeof(double));
    assert_non_null(o), assert_non_null(o_before), assert_non_null(scores), assert_non_null(want);
    th_poison(o, total);
    memcpy(o_before, o, total * sizeof(float));
    tsr_attention_desc d = {.batch = B, .heads = H, .q_len = L, .kv_len = L, .head_dim = D};
    setenv("TSR_TEST_MULTI_FAIL", hook, 1);
    st = tsr_attention_multi(fresh, &d, q, kk, v, o);
    unsetenv("TSR_TEST_MULTI_FAIL");
    TH_ASSERT_STATUS(st, TSR_ERR_OPENCL);
    printf("# attention: %s\n", tsr_last_error());
    TH_ASSERT_CONTAINS(tsr_last_error(), "(batch, head) pair");
    mask = written_units(fresh, ndevices, B * H);
    for (size_t bh = 0; bh < B * H; bh++) {
        if (!mask[bh]) {
            if (memcmp(o + bh * L * D, o_before + bh * L * D, L * D * sizeof(float)))
                fail_msg("(batch, head) pair %zu is not reported written but changed", bh);
            continue;
        }
        for (size_t r = 0; r < L; r++) {
            tsr_attention_reference_row(q + (bh * L + r) * D, kk + bh * L * D, v + bh * L * D, L, D,
                                        1.0 / sqrt((double)D), scores, want);
            for (size_t x = 0; x < D; x++)
                if (!(fabs(o[(bh * L + r) * D + x] - want[x]) < 1e-5 + 1e-5 * fabs(want[x])))
                    fail_msg("(batch, head) pair %zu is reported written but wrong", bh);
        }
    }
    free(mask), free(q), free(kk), free(v), free(o), free(o_before), free(scores), free(want);
    tsr_group_destroy(fresh);
}

/* ---- strided-batched GEMM ---- */

static void batched_matches(void **state) {
    (void)state;
    for (int shared_b = 0; shared_b < 2; shared_b++) {
        size_t batch = rand_in(5, 11), m = rand_in(8, 40), n = rand_in(8, 40), k = rand_in(4, 40);
        size_t lda = k + rand_in(0, 3), ldb = k + rand_in(0, 3), ldc = n + rand_in(0, 3); /* A m x k, B^T: n x k */
        size_t sa = m * lda + rand_in(0, 9), sb = shared_b ? 0 : n * ldb + rand_in(0, 9), sc = m * ldc + rand_in(0, 9);
        size_t a_n = batch * sa, b_n = shared_b ? n * ldb : batch * sb, c_n = batch * sc;
        float *a = random_floats(a_n), *b = random_floats(b_n), *c = random_floats(c_n);
        float *before = malloc(c_n * sizeof(float));
        double *ref = malloc(c_n * sizeof(double));
        assert_non_null(before), assert_non_null(ref);
        memcpy(before, c, c_n * sizeof(float));
        float alpha = 0.75f, beta = shared_b ? 0.5f : 0.0f;
        if (beta == 0) th_poison(c, c_n), memcpy(before, c, c_n * sizeof(float));
        TH_ASSERT_OK(group_batched(group, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_TRANS, m, n, k, alpha, a, lda, sa, b, ldb,
                                   sb, beta, c, ldc, sc, batch));
        for (size_t e = 0; e < batch; e++) {
            th_ref_sgemm(1, 0, 1, m, n, k, alpha, a + e * sa, lda, b + e * sb, ldb, beta, before + e * sc, ref, ldc);
            double err = th_rel_error_matrix(1, m, n, c + e * sc, ref, ldc);
            if (!(err < 2e-6)) fail_msg("batch entry %zu: relative error %.3g", e, err);
            for (size_t i = 0; i < m; i++) /* padding untouched */
                assert_memory_equal(c + e * sc + i * ldc + n, before + e * sc + i * ldc + n, (ldc - n) * sizeof(float));
            size_t gap_start = e * sc + (m - 1) * ldc + ldc, gap_end = (e + 1) * sc;
            if (gap_end > gap_start)
                assert_memory_equal(c + gap_start, before + gap_start, (gap_end - gap_start) * sizeof(float));
        }
        check_tiles(batch);
        tsr_group_stats st;
        TH_ASSERT_OK(tsr_group_last_stats(group, &st));
        for (size_t t = 0; t < st.tile_count; t++) {
            tsr_group_tile tile = st.tiles[t];
            tsr_device *dev = devices[tile.device];
            cl_mem da = th_buffer_from(dev, a, a_n), db = th_buffer_from(dev, b, b_n),
                   dc = th_buffer_from(dev, before, c_n);
            TH_ASSERT_OK(tsr_sgemm_strided_batched(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_TRANS, m, n, k, alpha, da,
                                                   tile.first * sa, lda, sa, db, tile.first * sb, ldb, sb, beta, dc,
                                                   tile.first * sc, ldc, sc, tile.count, NULL, NULL));
            float *alone = malloc(c_n * sizeof(float));
            assert_non_null(alone);
            th_read(dev, dc, alone, c_n);
            for (size_t e = tile.first; e < tile.first + tile.count; e++)
                for (size_t i = 0; i < m; i++)
                    if (memcmp(alone + e * sc + i * ldc, c + e * sc + i * ldc, n * sizeof(float)))
                        fail_msg("batch entry %zu row %zu differs from device %zu's own run", e, i, tile.device);
            free(alone);
            clReleaseMemObject(da), clReleaseMemObject(db), clReleaseMemObject(dc);
        }
        TH_ASSERT_STATUS(group_batched(group, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_TRANS, m, n, k, alpha, a, lda, sa, b,
                                       ldb, sb, beta, c, ldc, 1, batch),
                         TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "c_stride");
        free(a), free(b), free(c), free(before), free(ref);
    }
}

/* ---- attention ---- */

static void attention_matches(void **state) {
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        bool causal = variant == 1;
        size_t B = 2, H = rand_in(2, 5), Lq = rand_in(5, 24), Lk = causal ? Lq + rand_in(0, 6) : rand_in(5, 30),
               D = rand_in(4, 40);
        /* [B, L, H, D] rows, as projections produce them */
        size_t qs[3] = {Lq * H * D, D, H * D}, ks[3] = {Lk * H * D, D, H * D};
        size_t q_n = B * Lq * H * D, k_n = B * Lk * H * D;
        float *q = random_floats(q_n), *k = random_floats(k_n), *v = random_floats(k_n);
        float *o = malloc((q_n + 5) * sizeof(float));
        assert_non_null(o);
        th_poison(o, q_n + 5);
        int kv_lengths[2] = {(int)Lk, (int)rand_in(1, Lk)};
        tsr_attention_desc d = {.batch = B,
                                .heads = H,
                                .q_len = Lq,
                                .kv_len = Lk,
                                .head_dim = D,
                                .causal = causal,
                                .kv_lengths = variant ? kv_lengths : NULL};
        memcpy(d.q_strides, qs, sizeof qs), memcpy(d.k_strides, ks, sizeof ks), memcpy(d.v_strides, ks, sizeof ks),
            memcpy(d.o_strides, qs, sizeof qs);
        TH_ASSERT_OK(tsr_attention_multi(group, &d, q, k, v, o));
        float guard[5];
        th_poison(guard, 5);
        assert_memory_equal(o + q_n, guard, sizeof guard);
        double *scores = malloc(Lk * sizeof(double)), *want = malloc(D * sizeof(double));
        float *kh = malloc(Lk * D * sizeof(float)), *vh = malloc(Lk * D * sizeof(float));
        assert_non_null(scores), assert_non_null(want), assert_non_null(kh), assert_non_null(vh);
        double worst = 0;
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < H; h++) {
                for (size_t j = 0; j < Lk; j++)
                    for (size_t x = 0; x < D; x++) {
                        kh[j * D + x] = k[b * ks[0] + h * ks[1] + j * ks[2] + x];
                        vh[j * D + x] = v[b * ks[0] + h * ks[1] + j * ks[2] + x];
                    }
                for (size_t i = 0; i < Lq; i++) {
                    long visible = d.kv_lengths ? kv_lengths[b] : (long)Lk;
                    if (causal && (long)(i + Lk - Lq + 1) < visible) visible = (long)(i + Lk - Lq + 1);
                    if (visible > 0)
                        tsr_attention_reference_row(q + b * qs[0] + h * qs[1] + i * qs[2], kh, vh, (size_t)visible, D,
                                                    1.0 / sqrt((double)D), scores, want);
                    else
                        memset(want, 0, D * sizeof(double));
                    for (size_t x = 0; x < D; x++) {
                        double got = o[b * qs[0] + h * qs[1] + i * qs[2] + x], e = fabs(got - want[x]);
                        if (!(e <= worst)) worst = e; /* NaN lands here too */
                        if (!(e < 1e-5 + 1e-5 * fabs(want[x])))
                            fail_msg("O[%zu,%zu,%zu,%zu] = %.9g, reference %.9g", b, i, h, x, got, want[x]);
                    }
                }
            }
        printf("# attention %zux%zux%zux%zux%zu%s: max error %.3g\n", B, H, Lq, Lk, D, causal ? " causal" : "", worst);
        check_tiles(B * H);
        tsr_group_stats st;
        TH_ASSERT_OK(tsr_group_last_stats(group, &st));
        for (size_t t = 0; t < st.tile_count; t++) {
            tsr_group_tile tile = st.tiles[t];
            tsr_device *dev = devices[tile.device];
            size_t b = tile.first / H, h = tile.first % H;
            assert_true(h + tile.count <= H); /* tiles stay inside one batch entry */
            cl_mem dq = th_buffer_from(dev, q, q_n), dk = th_buffer_from(dev, k, k_n), dv = th_buffer_from(dev, v, k_n);
            cl_mem dout = th_buffer(dev, q_n);
            tsr_attention_desc one = d;
            one.batch = 1, one.heads = tile.count;
            one.q_offset = one.o_offset = b * qs[0] + h * qs[1];
            one.k_offset = one.v_offset = b * ks[0] + h * ks[1];
            one.kv_lengths = d.kv_lengths ? d.kv_lengths + b : NULL;
            TH_ASSERT_OK(tsr_attention(dev, &one, dq, dk, dv, dout, NULL, NULL));
            float *alone = malloc(q_n * sizeof(float));
            assert_non_null(alone);
            th_read(dev, dout, alone, q_n);
            for (size_t hh = h; hh < h + tile.count; hh++)
                for (size_t i = 0; i < Lq; i++) {
                    size_t at = b * qs[0] + hh * qs[1] + i * qs[2];
                    if (memcmp(alone + at, o + at, D * sizeof(float)))
                        fail_msg("head %zu row %zu differs from device %zu's own run", hh, i, tile.device);
                }
            free(alone);
            clReleaseMemObject(dq), clReleaseMemObject(dk), clReleaseMemObject(dv), clReleaseMemObject(dout);
        }
        /* refusals leave O alone */
        float *kept = malloc(q_n * sizeof(float));
        assert_non_null(kept);
        memcpy(kept, o, q_n * sizeof(float));
        tsr_attention_desc bad = d;
        bad.lse = (cl_mem)1;
        TH_ASSERT_STATUS(tsr_attention_multi(group, &bad, q, k, v, o), TSR_ERR_UNSUPPORTED);
        TH_ASSERT_CONTAINS(tsr_last_error(), "lse");
        bad = d, bad.o_type = TSR_F16;
        TH_ASSERT_STATUS(tsr_attention_multi(group, &bad, q, k, v, o), TSR_ERR_UNSUPPORTED);
        bad = d, bad.head_dim = 0;
        TH_ASSERT_STATUS(tsr_attention_multi(group, &bad, q, k, v, o), TSR_ERR_INVALID_ARG);
        int too_long[2] = {(int)Lk + 1, 1};
        bad = d, bad.kv_lengths = too_long;
        TH_ASSERT_STATUS(tsr_attention_multi(group, &bad, q, k, v, o), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "kv_lengths[0]");
        bad = d, bad.o_strides[0] = 0, bad.o_strides[1] = 0; /* every head writing the same rows */
        TH_ASSERT_STATUS(tsr_attention_multi(group, &bad, q, k, v, o), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "overlap");
        bad = d, bad.kv_len = 0, bad.kv_lengths = NULL;
        TH_ASSERT_STATUS(tsr_attention_multi(group, &bad, q, k, v, o), TSR_ERR_INVALID_ARG);
        bad = d, bad.head_dim = 300;
        TH_ASSERT_STATUS(tsr_attention_multi(group, &bad, q, k, v, o), TSR_ERR_UNSUPPORTED);
        TH_ASSERT_STATUS(tsr_attention_multi(group, &d, q, k, v, q), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "shares memory");
        TH_ASSERT_STATUS(tsr_attention_multi(group, &d, q, NULL, v, o), TSR_ERR_INVALID_ARG);
        assert_memory_equal(o, kept, q_n * sizeof(float));
        free(kept), free(scores), free(want), free(kh), free(vh), free(q), free(k), free(v), free(o);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_every_layout),         cmocka_unit_test(gemm_weights_and_stats),
        cmocka_unit_test(gemm_degenerate),           cmocka_unit_test(gemm_refusals),
        cmocka_unit_test(group_calls_follow_the_single_device_rules),
        cmocka_unit_test(zero_weight_devices_take_no_work),
        cmocka_unit_test(gemm_failure_names_device), cmocka_unit_test(batched_and_attention_failures_say_what_they_wrote), cmocka_unit_test(batched_matches),
        cmocka_unit_test(attention_matches),
    };
    return TH_RUN_GROUP(tests, open_group, close_group);
}
