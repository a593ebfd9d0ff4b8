/* GEMM's kept strip weights (runtime/ops/gemm.c, gemm_strips): where B's buffer is marked constant
 * (tsr_buffer_set_constant) and the smallm kernel's pointer loop reads it (B and A plain, one batch
 * entry), B's columns are copied once into strips of NWI columns (the last zero-padded) and the
 * kernel built with SM_BSTRIP reads them. Every check compares C with a double-precision reference
 * from the B the buffer holds at that time, C poisoned before each call and guard zones around its
 * window: M 1..16, N that NWI does not divide, K tails, B at an offset with padded rows, the
 * epilogues MiniLM uses (bias, GELU, residual with the LayerNorm, in place on C), 16-bit A and B.
 * Also: the copy is really used (a write tessera is not told of keeps the old product, as
 * documented; tsr_buffer_changed brings the new one in), unmarking drops it, plans use it, a copy
 * over the kept data's cap is not made (B read as stored), two threads share it (and see it
 * dropped under them), B transposed runs as
 * stored, and graphs: a call recorded while the strips are current replays on them and the replay
 * fails ("record the graph again") once B changed or was unmarked, never reading a stale copy; a
 * call recorded before any strips exist records the plain path and derives nothing.
 * TSR_TEST_MODE=oclgrind: four values of M (Oclgrind's checkers read the strip kernel's bounds). */
#include "harness.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define dev th_dev

#define GUARD 7
#define SENTINEL 12345.0f

/* The smallm configurations (NWI 32, MiniLM's default here, and NWI 8). */
static const char *const configs[] = {"KERNEL=2 MWI=8 VW=16 NVW=2 KU=4", "KERNEL=2 MWI=6 VW=4 NVW=2 KU=2"};
#define NCONFIGS (sizeof configs / sizeof configs[0])

typedef struct wcase {
    size_t m, n, k, b_off, ldb_pad;
    int epi;        /* 0 none, 1 bias, 2 bias + GELU (erf), 3 bias + residual C + LayerNorm, 4 bias + GELU tanh */
    tsr_dtype ab;   /* A's and B's type (C fp32) */
    int tb;         /* B stored transposed ([n, k]) */
} wcase;

/* One problem: host data, device buffers. B's buffer is what gets marked. */
typedef struct prob {
    wcase w;
    size_t ldb, nb, nc;
    float *a, *b, *c0, *bias, *gb, *c;
    double *ref;
    cl_mem da, db, dc, dbias, dgb;
    tsr_matmul_desc desc;
} prob;

static void prob_make(prob *P, const wcase *w) {
    memset(P, 0, sizeof *P);
    P->w = *w;
    const size_t m = w->m, n = w->n, k = w->k;
    P->ldb = (w->tb ? k : n) + w->ldb_pad;
    P->nb = w->b_off + (w->tb ? n : k) * P->ldb + 3;
    P->nc = GUARD + m * n + GUARD;
    P->a = malloc(m * k * sizeof(float));
    P->b = malloc(P->nb * sizeof(float));
    P->c0 = malloc(P->nc * sizeof(float));
    P->c = malloc(P->nc * sizeof(float));
    P->bias = malloc(n * sizeof(float));
    P->gb = malloc(2 * n * sizeof(float));
    P->ref = malloc(m * n * sizeof(double));
    th_fill_uniform_typed(w->ab, P->a, m * k, -1, 1);
    th_fill_uniform_typed(w->ab, P->b, P->nb, -1, 1);
    th_fill_uniform(P->c0, P->nc, -1, 1);
    th_fill_uniform(P->bias, n, -1, 1);
    th_fill_uniform(P->gb, 2 * n, -2, 2);
    P->da = th_buffer_from_typed(dev, w->ab, P->a, m * k);
    P->db = th_buffer_from_typed(dev, w->ab, P->b, P->nb);
    P->dc = th_buffer(dev, P->nc);
    P->dbias = th_buffer_from(dev, P->bias, n);
    P->dgb = th_buffer_from(dev, P->gb, 2 * n);
    P->desc = (tsr_matmul_desc){.m = m, .n = n, .k = k, .alpha = 1.0f, .beta = 0.0f,
                                .trans_b = w->tb ? TSR_TRANS : TSR_NO_TRANS,
                                .a = {.dtype = w->ab}, .b = {.dtype = w->ab, .offset = w->b_off, .ld = P->ldb},
                                .c = {.offset = GUARD}};
    tsr_epilogue *e = &P->desc.epilogue;
    if (w->epi >= 1) e->bias = P->dbias;
    if (w->epi == 2) e->activation = TSR_ACT_GELU_ERF;
    if (w->epi == 4) e->activation = TSR_ACT_GELU_TANH;
    if (w->epi == 3) {
        e->residual = P->dc, e->residual_offset = GUARD;
        e->norm_gamma = P->dgb, e->norm_beta = P->dgb, e->norm_beta_offset = n, e->norm_eps = 1e-5f;
    }
}

static void prob_free(prob *P) {
    free(P->a), free(P->b), free(P->c0), free(P->c), free(P->bias), free(P->gb), free(P->ref);
    clReleaseMemObject(P->da), clReleaseMemObject(P->db), clReleaseMemObject(P->dc);
    clReleaseMemObject(P->dbias), clReleaseMemObject(P->dgb);
}

/* The reference from the host's B (P->b, as the device holds it when in step). */
static void prob_reference(prob *P) {
    const wcase *w = &P->w;
    const size_t m = w->m, n = w->n, k = w->k;
    for (size_t i = 0; i < m; ++i) {
        double *row = P->ref + i * n;
        for (size_t j = 0; j < n; ++j) {
            double s = 0;
            for (size_t l = 0; l < k; ++l) {
                double bv = w->tb ? P->b[w->b_off + j * P->ldb + l] : P->b[w->b_off + l * P->ldb + j];
                s += (double)P->a[i * k + l] * bv;
            }
            if (w->epi >= 1) s += P->bias[j];
            if (w->epi == 3) s += P->c0[GUARD + i * n + j];
            if (w->epi == 2) s = th_ref_activation(TSR_ACT_GELU_ERF, s);
            if (w->epi == 4) s = th_ref_activation(TSR_ACT_GELU_TANH, s);
            row[j] = s;
        }
        if (w->epi == 3) {
            double mean = 0, var = 0;
            for (size_t j = 0; j < n; ++j) mean += row[j];
            mean /= (double)n;
            for (size_t j = 0; j < n; ++j) var += (row[j] - mean) * (row[j] - mean);
            var /= (double)n;
            for (size_t j = 0; j < n; ++j)
                row[j] = (row[j] - mean) / sqrt(var + 1e-5) * P->gb[j] + P->gb[n + j];
        }
    }
}

/* C's window poisoned (its residual values, for the Add & Norm, where C is the residual) and the
 * guards set, on the device. */
static void prob_reset_c(prob *P) {
    float *init = malloc(P->nc * sizeof(float));
    memcpy(init, P->c0, P->nc * sizeof(float));
    for (size_t i = 0; i < GUARD; ++i) init[i] = init[P->nc - 1 - i] = SENTINEL;
    if (P->w.epi != 3) th_poison(init + GUARD, P->w.m * P->w.n);
    TH_ASSERT_OK(tsr_upload(dev, P->dc, init, P->nc));
    free(init);
}

/* C against the reference; guards intact. */
static void prob_expect(prob *P, const char *what) {
    th_read(dev, P->dc, P->c, P->nc);
    const wcase *w = &P->w;
    for (size_t i = 0; i < GUARD; ++i)
        if (P->c[i] != SENTINEL || P->c[P->nc - 1 - i] != SENTINEL)
            fail_msg("%s: %zux%zux%zu: a guard around C was written", what, w->m, w->n, w->k);
    const double tol = w->epi == 3 ? 2e-4 : 1e-4;
    for (size_t i = 0; i < w->m * w->n; ++i) {
        double got = P->c[GUARD + i], want = P->ref[i];
        if (!(fabs(got - want) <= tol * (1.0 + fabs(want))))
            fail_msg("%s: %zux%zux%zu epi %d %s tb %d b_off %zu ldb %zu: C[%zu][%zu] = %.9g, expected %.9g", what,
                     w->m, w->n, w->k, w->epi, tsr_dtype_str(w->ab), w->tb, w->b_off, P->ldb, i / w->n, i % w->n, got,
                     want);
    }
}

static void prob_run(prob *P, const char *what) {
    prob_reset_c(P);
    TH_ASSERT_OK(tsr_matmul(dev, &P->desc, P->da, P->db, P->dc, NULL, NULL));
    prob_expect(P, what);
}

/* New values for B on the host and the device, written behind tessera's back (not told). */
static void prob_rewrite_b(prob *P) {
    th_fill_uniform_typed(P->w.ab, P->b, P->nb, -1, 1);
    cl_mem fresh = th_buffer_from_typed(dev, P->w.ab, P->b, P->nb);
    size_t bytes = P->nb * tsr_dtype_size(P->w.ab);
    cl_command_queue q = tsr_device_queue(dev);
    assert_int_equal(clEnqueueCopyBuffer(q, fresh, P->db, 0, 0, bytes, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(clFinish(q), CL_SUCCESS);
    clReleaseMemObject(fresh);
}

/* Warnings about strips not kept (counted by a case's own handler). */
static atomic_int strip_warnings;
static void count_strip_warning(const char *message, void *user) {
    (void)user;
    if (strstr(message, "kept strips cannot be used")) atomic_fetch_add(&strip_warnings, 1);
}

/* The first configuration the device takes (forced), or false. */
static bool force_a_config(void) {
    for (size_t c = 0; c < NCONFIGS; ++c)
        if (th_try_override(dev, "gemm", configs[c])) return true;
    return false;
}

static size_t rand_in(size_t lo, size_t hi) { return lo + th_rand() % (hi - lo + 1); }

/* Every M from 1 to 16 under each configuration, with N that NWI does not divide, K tails, B at an
 * offset with padded rows and each epilogue; the strips made once and then reused. */
static void accuracy(void **state) {
    (void)state;
    for (size_t c = 0; c < NCONFIGS; ++c) {
        if (!th_try_override(dev, "gemm", configs[c])) continue;
        for (size_t m = 1; m <= 16; ++m) {
            if (th_oclgrind_mode() && m != 1 && m != 3 && m != 7 && m != 16) continue; /* (slow there) */
            wcase w = {.m = m, .n = rand_in(1, 100), .k = rand_in(1, 140), .b_off = th_rand() % 5,
                       .ldb_pad = th_rand() % 3, .epi = (int)(m % 5), .ab = TSR_F32};
            if (m == 3) w.n = 70, w.k = 129; /* two strips and a padded one, a K tail past KU */
            if (m % 8 == 7) w.ab = th_rand() & 1 ? TSR_F16 : TSR_BF16;
            prob P;
            prob_make(&P, &w);
            prob_reference(&P);
            TH_ASSERT_OK(tsr_buffer_set_constant(P.db, true));
            prob_run(&P, configs[c]);
            assert_int_equal(tsr_derived_count_of(P.db, NULL), 1);
            prob_run(&P, "the strips again"); /* made once */
            assert_int_equal(tsr_derived_count_of(P.db, NULL), 1);
            prob_free(&P);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
}

/* The strip copy is what runs: a write tessera is not told of keeps the old product; the caller's
 * tsr_buffer_changed brings the new B in; unmarking drops the copy and reads B as stored. */
static void copy_is_used(void **state) {
    (void)state;
    if (!force_a_config()) return;
    wcase w = {.m = 16, .n = 45, .k = 37, .b_off = 3, .ldb_pad = 1, .epi = 1, .ab = TSR_F32};
    prob P;
    prob_make(&P, &w);
    TH_ASSERT_OK(tsr_buffer_set_constant(P.db, true));
    prob_reference(&P);
    prob_run(&P, "marked");
    prob_rewrite_b(&P); /* not told: the kept strips still hold the old B */
    prob_run(&P, "B written behind tessera's back (the old B's product, as documented)");
    TH_ASSERT_OK(tsr_buffer_changed(P.db));
    assert_int_equal(tsr_derived_count_of(P.db, NULL), 0);
    prob_reference(&P);
    prob_run(&P, "after tsr_buffer_changed");
    assert_int_equal(tsr_derived_count_of(P.db, NULL), 1);
    TH_ASSERT_OK(tsr_buffer_set_constant(P.db, false));
    assert_int_equal(tsr_derived_count_of(P.db, NULL), 0);
    prob_rewrite_b(&P);
    prob_reference(&P);
    prob_run(&P, "unmarked, B rewritten");
    prob_free(&P);
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
}

/* What the strips do not serve runs as stored, marked or not: B transposed. */
static void not_served(void **state) {
    (void)state;
    if (th_oclgrind_mode()) { /* its --uninitialized checker aborts on the K form (test_gemm.c, smallm_kernel) */
        printf("# B transposed (the vectors-along-K form) passed over under Oclgrind\n");
        return;
    }
    if (!force_a_config()) return;
    wcase w = {.m = 9, .n = 45, .k = 37, .b_off = 1, .epi = 2, .ab = TSR_F32, .tb = 1};
    prob P;
    prob_make(&P, &w);
    TH_ASSERT_OK(tsr_buffer_set_constant(P.db, true));
    prob_reference(&P);
    prob_run(&P, "B transposed, marked");
    assert_int_equal(tsr_derived_count_of(P.db, NULL), 0);
    prob_free(&P);
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
}

/* A plan executes on the strips too; strips larger than the kept data's cap are not kept, and the
 * call runs on B as stored. */
static void plans_and_cap(void **state) {
    (void)state;
    if (!force_a_config()) return;
    wcase w = {.m = 5, .n = 70, .k = 41, .b_off = 1, .epi = 2, .ab = TSR_F32};
    prob P;
    prob_make(&P, &w);
    TH_ASSERT_OK(tsr_buffer_set_constant(P.db, true));
    prob_reference(&P);
    tsr_matmul_plan *plan = NULL;
    TH_ASSERT_OK(tsr_matmul_plan_create(dev, &P.desc, &plan));
    for (int r = 0; r < 2; ++r) {
        prob_reset_c(&P);
        TH_ASSERT_OK(tsr_matmul_execute(plan, P.da, P.db, P.dc, NULL, NULL));
        prob_expect(&P, "a plan's execute");
        assert_int_equal(tsr_derived_count_of(P.db, NULL), 1);
    }
    prob_rewrite_b(&P);
    TH_ASSERT_OK(tsr_buffer_changed(P.db));
    prob_reference(&P);
    prob_reset_c(&P);
    TH_ASSERT_OK(tsr_matmul_execute(plan, P.da, P.db, P.dc, NULL, NULL));
    prob_expect(&P, "a plan's execute after tsr_buffer_changed");
    tsr_matmul_plan_destroy(plan);
    TH_ASSERT_OK(tsr_buffer_changed(P.db)); /* drops the copy */
    tsr_derived_test_cap(64);               /* bytes: smaller than any strip copy here */
    atomic_store(&strip_warnings, 0);
    tsr_set_warning_handler(count_strip_warning, NULL);
    prob_run(&P, "strips over the cap");
    assert_int_equal(tsr_derived_count_of(P.db, NULL), 0);
    assert_int_equal(atomic_load(&strip_warnings), 1); /* said, and only once per buffer */
    TH_ASSERT_CONTAINS(tsr_last_warning(), "cap");
    prob_run(&P, "strips over the cap again");
    assert_int_equal(atomic_load(&strip_warnings), 1);
    /* a B that is not marked says nothing */
    wcase w2 = {.m = 3, .n = 40, .k = 17, .ab = TSR_F32};
    prob Q;
    prob_make(&Q, &w2);
    prob_reference(&Q);
    prob_run(&Q, "an unmarked B");
    prob_free(&Q);
    assert_int_equal(atomic_load(&strip_warnings), 1);
    /* marked again: a new marking, said again */
    TH_ASSERT_OK(tsr_buffer_set_constant(P.db, false));
    TH_ASSERT_OK(tsr_buffer_set_constant(P.db, true));
    prob_run(&P, "strips over the cap, marked again");
    assert_int_equal(atomic_load(&strip_warnings), 2);
    tsr_set_warning_handler(NULL, NULL);
    tsr_derived_test_cap(0);
    prob_free(&P);
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
}

/* Two threads on one device, each on its own queue with its own C, on one marked B: the strips made
 * by whichever comes first and read by both, and dropped under them (tsr_buffer_changed, B's
 * contents the same) every third round by thread 1 while the other may still be reading them. */
typedef struct worker {
    prob *P;
    int index, failures;
    char message[256];
} worker;

static void *work(void *arg) {
    worker *wk = arg;
    prob *P = wk->P;
    cl_int err;
    cl_command_queue q = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev), 0, &err);
    if (err != CL_SUCCESS) {
        wk->failures++;
        snprintf(wk->message, sizeof wk->message, "clCreateCommandQueue: %d", (int)err);
        return NULL;
    }
    const size_t mn = P->w.m * P->w.n;
    float *got = malloc(mn * sizeof(float));
    cl_mem c = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, mn * sizeof(float), NULL, &err);
    tsr_matmul_desc d = P->desc;
    d.c.offset = 0;
    for (int round = 0; round < 8 && !wk->failures && err == CL_SUCCESS; ++round) {
        if (wk->index == 1 && round % 3 == 2 && tsr_buffer_changed(P->db) != TSR_SUCCESS) {
            wk->failures++;
            snprintf(wk->message, sizeof wk->message, "tsr_buffer_changed: %s", tsr_last_error());
            break;
        }
        cl_event ev = NULL;
        tsr_status st = tsr_matmul(dev, &d, P->da, P->db, c, q, &ev);
        if (st == TSR_SUCCESS) {
            clReleaseEvent(ev);
            err = clEnqueueReadBuffer(q, c, CL_TRUE, 0, mn * sizeof(float), got, 0, NULL, NULL);
        }
        for (size_t i = 0; st == TSR_SUCCESS && err == CL_SUCCESS && i < mn; ++i)
            if (!(fabs(got[i] - P->ref[i]) <= 1e-4 * (1.0 + fabs(P->ref[i])))) {
                wk->failures++;
                snprintf(wk->message, sizeof wk->message, "round %d: C[%zu] = %.9g, expected %.9g", round, i,
                         (double)got[i], P->ref[i]);
                break;
            }
        if (st != TSR_SUCCESS || err != CL_SUCCESS) {
            wk->failures++;
            snprintf(wk->message, sizeof wk->message, "round %d: %s (%d): %s", round, tsr_status_str(st), (int)err,
                     tsr_last_error());
        }
    }
    if (c) clReleaseMemObject(c);
    free(got);
    clReleaseCommandQueue(q);
    return NULL;
}

static void two_threads(void **state) {
    (void)state;
    if (th_oclgrind_mode()) { /* its simulator runs one kernel at a time (test_conv_weights.c) */
        printf("# under Oclgrind: passed over (one kernel at a time)\n");
        return;
    }
    if (!force_a_config()) return;
    wcase w = {.m = 16, .n = 100, .k = 77, .b_off = 4, .ldb_pad = 2, .epi = 2, .ab = TSR_F32};
    prob P;
    prob_make(&P, &w);
    TH_ASSERT_OK(tsr_buffer_set_constant(P.db, true));
    prob_reference(&P);
    worker wk[2];
    memset(wk, 0, sizeof wk);
    pthread_t th[2];
    for (int i = 0; i < 2; ++i) {
        wk[i].P = &P, wk[i].index = i;
        assert_int_equal(pthread_create(&th[i], NULL, work, &wk[i]), 0);
    }
    for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; ++i)
        if (wk[i].failures) fail_msg("thread %d: %s", i, wk[i].message);
    assert_true(tsr_derived_count_of(P.db, NULL) <= 1);
    prob_free(&P);
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
}

/* Graphs: recorded with the strips current, a replay reads them and fails once B changed (told),
 * was unmarked or an op wrote it; recorded with no strips yet, it records the plain path. */
static void graphs(void **state) {
    (void)state;
    if (!force_a_config()) return;
    for (int how = 0; how < 3; ++how) { /* 0: tsr_buffer_changed, 1: unmarked, 2: an op wrote B */
        wcase w = {.m = 16, .n = 70, .k = 45, .b_off = 2, .epi = 3, .ab = TSR_F32};
        prob P;
        prob_make(&P, &w);
        TH_ASSERT_OK(tsr_buffer_set_constant(P.db, true));
        prob_reference(&P);
        prob_run(&P, "the warm call");
        assert_int_equal(tsr_derived_count_of(P.db, NULL), 1);
        prob_reset_c(&P);
        tsr_graph *g = NULL;
        TH_ASSERT_OK(tsr_graph_begin(dev, NULL));
        TH_ASSERT_OK(tsr_matmul(dev, &P.desc, P.da, P.db, P.dc, NULL, NULL));
        TH_ASSERT_OK(tsr_graph_end(dev, &g));
        prob_expect(&P, "the recording call");
        for (int r = 0; r < 2; ++r) {
            prob_reset_c(&P);
            TH_ASSERT_OK(tsr_graph_launch(g, NULL, NULL));
            assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
            prob_expect(&P, "a replay");
        }
        if (how == 0) {
            prob_rewrite_b(&P);
            TH_ASSERT_OK(tsr_buffer_changed(P.db));
        } else if (how == 1) {
            TH_ASSERT_OK(tsr_buffer_set_constant(P.db, false));
        } else { /* tsr_convert writes B (the same values): an op's output */
            TH_ASSERT_OK(tsr_convert(dev, TSR_F32, P.db, 0, TSR_F32, P.db, 0, P.nb, NULL, NULL));
        }
        prob_reset_c(&P);
        TH_ASSERT_STATUS(tsr_graph_launch(g, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "record the graph again");
        th_read(dev, P.dc, P.c, P.nc);
        for (size_t i = GUARD; i < P.nc - GUARD; ++i) /* nothing ran: C still holds its residual */
            if (P.c[i] != P.c0[i]) fail_msg("a refused replay wrote C[%zu]", i - GUARD);
        tsr_graph_destroy(g);
        if (how != 1) {
            /* a new warm call and a new recording follow B again */
            prob_reference(&P);
            prob_run(&P, "the warm call after the change");
            prob_reset_c(&P);
            TH_ASSERT_OK(tsr_graph_begin(dev, NULL));
            TH_ASSERT_OK(tsr_matmul(dev, &P.desc, P.da, P.db, P.dc, NULL, NULL));
            TH_ASSERT_OK(tsr_graph_end(dev, &g));
            prob_reset_c(&P);
            TH_ASSERT_OK(tsr_graph_launch(g, NULL, NULL));
            assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
            prob_expect(&P, "a replay of the new recording");
            tsr_graph_destroy(g);
        }
        prob_free(&P);
    }
    /* recorded before any strips exist: the plain path, nothing derived, replays follow B */
    wcase w = {.m = 8, .n = 45, .k = 33, .epi = 2, .ab = TSR_F32};
    prob P;
    prob_make(&P, &w);
    TH_ASSERT_OK(tsr_buffer_set_constant(P.db, true));
    tsr_graph *g = NULL;
    prob_reset_c(&P);
    TH_ASSERT_OK(tsr_graph_begin(dev, NULL));
    TH_ASSERT_OK(tsr_matmul(dev, &P.desc, P.da, P.db, P.dc, NULL, NULL));
    TH_ASSERT_CONTAINS(tsr_last_warning(), "recorded them before they were made");
    TH_ASSERT_OK(tsr_graph_end(dev, &g));
    assert_int_equal(tsr_derived_count_of(P.db, NULL), 0);
    prob_reference(&P);
    prob_expect(&P, "recorded with no strips");
    prob_rewrite_b(&P);
    TH_ASSERT_OK(tsr_buffer_changed(P.db));
    prob_reference(&P);
    prob_reset_c(&P);
    TH_ASSERT_OK(tsr_graph_launch(g, NULL, NULL));
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    prob_expect(&P, "a replay of the plain path after B changed");
    tsr_graph_destroy(g);
    prob_free(&P);
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
}

/* Kept packed A: the tiled kernel with A packed (PACKA=1) and A's buffer marked constant makes its
 * packed panels once per content where one A serves the call (batch 1, or a shared A: stride 0),
 * and packs per call otherwise (A per batch entry) or while a graph records. Each call against the
 * double reference, C poisoned, guards checked: M that MWI does not divide, K tails and K blocks
 * (KC), A transposed, at an offset with padded rows, 16-bit A, batches. */
static const char *const packed_configs[] = {
    "MWI=8 VW=16 NVW=2 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1 NT=4 KC=0",
    "MWI=6 VW=4 NVW=2 KU=2 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=0 NT=2 KC=128",
};

typedef struct pa_prob {
    size_t m, n, k, batch, a_off, lda, a_stride, na, nb, nc;
    int ta;
    tsr_dtype at;
    float *a, *b, *c;
    double *ref;
    cl_mem da, db, dc;
    tsr_matmul_desc desc;
} pa_prob;

static float pa_a(const pa_prob *P, size_t e, size_t i, size_t l) {
    return P->a[P->a_off + e * P->a_stride + (P->ta ? l * P->lda + i : i * P->lda + l)];
}

static void pa_reference(pa_prob *P) {
    for (size_t e = 0; e < P->batch; ++e)
        for (size_t i = 0; i < P->m; ++i)
            for (size_t j = 0; j < P->n; ++j) {
                double s = 0;
                for (size_t l = 0; l < P->k; ++l)
                    s += (double)pa_a(P, e, i, l) * P->b[e * P->k * P->n + l * P->n + j];
                P->ref[(e * P->m + i) * P->n + j] = s;
            }
}

static void pa_make(pa_prob *P, size_t m, size_t n, size_t k, size_t batch, int ta, int shared, tsr_dtype at) {
    memset(P, 0, sizeof *P);
    P->m = m, P->n = n, P->k = k, P->batch = batch, P->ta = ta, P->at = at;
    P->a_off = th_rand() % 4, P->lda = (ta ? m : k) + th_rand() % 3;
    P->a_stride = shared ? 0 : (ta ? k : m) * P->lda;
    P->na = P->a_off + (shared ? 1 : batch) * (ta ? k : m) * P->lda + 2;
    P->nb = batch * k * n, P->nc = GUARD + batch * m * n + GUARD;
    P->a = malloc(P->na * sizeof(float)), P->b = malloc(P->nb * sizeof(float));
    P->c = malloc(P->nc * sizeof(float)), P->ref = malloc(batch * m * n * sizeof(double));
    th_fill_uniform_typed(at, P->a, P->na, -1, 1);
    th_fill_uniform(P->b, P->nb, -1, 1);
    P->da = th_buffer_from_typed(dev, at, P->a, P->na);
    P->db = th_buffer_from(dev, P->b, P->nb);
    P->dc = th_buffer(dev, P->nc);
    P->desc = (tsr_matmul_desc){.m = m, .n = n, .k = k, .batch = batch, .alpha = 1.0f, .beta = 0.0f,
                                .trans_a = ta ? TSR_TRANS : TSR_NO_TRANS,
                                .a = {.dtype = at, .offset = P->a_off, .ld = P->lda, .batch_stride = P->a_stride},
                                .b = {.batch_stride = k * n}, .c = {.offset = GUARD, .batch_stride = m * n}};
    pa_reference(P);
}

static void pa_free(pa_prob *P) {
    free(P->a), free(P->b), free(P->c), free(P->ref);
    clReleaseMemObject(P->da), clReleaseMemObject(P->db), clReleaseMemObject(P->dc);
}

static void pa_reset_c(pa_prob *P) {
    for (size_t i = 0; i < P->nc; ++i) P->c[i] = SENTINEL;
    th_poison(P->c + GUARD, P->batch * P->m * P->n);
    TH_ASSERT_OK(tsr_upload(dev, P->dc, P->c, P->nc));
}

static void pa_expect(pa_prob *P, const char *what) {
    th_read(dev, P->dc, P->c, P->nc);
    for (size_t i = 0; i < GUARD; ++i)
        if (P->c[i] != SENTINEL || P->c[P->nc - 1 - i] != SENTINEL)
            fail_msg("%s: %zux%zux%zu: a guard around C was written", what, P->m, P->n, P->k);
    for (size_t i = 0; i < P->batch * P->m * P->n; ++i) {
        double got = P->c[GUARD + i], want = P->ref[i];
        if (!(fabs(got - want) <= 1e-4 * (1.0 + fabs(want))))
            fail_msg("%s: %zux%zux%zu batch %zu ta %d %s a_off %zu lda %zu stride %zu: C[%zu] = %.9g, expected %.9g",
                     what, P->m, P->n, P->k, P->batch, P->ta, tsr_dtype_str(P->at), P->a_off, P->lda, P->a_stride, i,
                     got, want);
    }
}

static void pa_run(pa_prob *P, const char *what) {
    pa_reset_c(P);
    TH_ASSERT_OK(tsr_matmul(dev, &P->desc, P->da, P->db, P->dc, NULL, NULL));
    pa_expect(P, what);
}

/* New values for A on the host and the device, written behind tessera's back (not told). */
static void pa_rewrite_a(pa_prob *P) {
    th_fill_uniform_typed(P->at, P->a, P->na, -1, 1);
    /* the stored bytes through the host and a plain write (Oclgrind's --uninitialized checker
     * does not carry the initialized state through clEnqueueCopyBuffer) */
    const size_t bytes = P->na * tsr_dtype_size(P->at);
    cl_mem fresh = th_buffer_from_typed(dev, P->at, P->a, P->na);
    unsigned char *raw = malloc(bytes);
    cl_command_queue q = tsr_device_queue(dev);
    assert_int_equal(clEnqueueReadBuffer(q, fresh, CL_TRUE, 0, bytes, raw, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(clEnqueueWriteBuffer(q, P->da, CL_TRUE, 0, bytes, raw, 0, NULL, NULL), CL_SUCCESS);
    free(raw);
    clReleaseMemObject(fresh);
}

/* Warnings about packed A panels not kept. */
static atomic_int panel_warnings;
static void count_panel_warning(const char *message, void *user) {
    (void)user;
    if (strstr(message, "kept packed panels cannot be used")) atomic_fetch_add(&panel_warnings, 1);
}

static void packed_a_kept(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof packed_configs / sizeof *packed_configs; ++c) {
        if (!th_try_override(dev, "gemm", packed_configs[c])) continue;
        const int cases = th_oclgrind_mode() ? 3 : 10;
        for (int t = 0; t < cases; ++t) {
            const size_t batch = t % 3 == 2 ? 3 : 1;
            const int shared = t % 2, ta = (t / 2) % 2;
            const bool kept = batch == 1 || shared;
            const tsr_dtype at = t % 5 == 4 ? (th_rand() & 1 ? TSR_F16 : TSR_BF16) : TSR_F32;
            pa_prob P;
            pa_make(&P, rand_in(1, 40), rand_in(1, 70), t % 4 == 1 ? rand_in(129, 300) : rand_in(1, 90), batch, ta, shared, at);
            TH_ASSERT_OK(tsr_buffer_set_constant(P.da, true));
            pa_run(&P, packed_configs[c]);
            assert_int_equal(tsr_derived_count_of(P.da, NULL), kept ? 1 : 0);
            pa_run(&P, "the packed panels again"); /* made once */
            assert_int_equal(tsr_derived_count_of(P.da, NULL), kept ? 1 : 0);
            if (kept) {
                /* a write tessera is not told of keeps the old product (the documented contract:
                 * the kept panels really serve the calls); tsr_buffer_changed brings the new A in */
                pa_rewrite_a(&P);
                pa_run(&P, "A written behind tessera's back (the old A's product, as documented)");
                TH_ASSERT_OK(tsr_buffer_changed(P.da));
                pa_reference(&P);
                pa_run(&P, "after tsr_buffer_changed");
                assert_int_equal(tsr_derived_count_of(P.da, NULL), 1);
            }
            /* unmarked: packed per call again, following A */
            TH_ASSERT_OK(tsr_buffer_set_constant(P.da, false));
            assert_int_equal(tsr_derived_count_of(P.da, NULL), 0);
            pa_rewrite_a(&P);
            pa_reference(&P);
            pa_run(&P, "unmarked, A rewritten");
            pa_free(&P);
        }
        /* panels over the kept data's cap: not kept, packed per call, said once per marking */
        {
            pa_prob P;
            pa_make(&P, 13, 20, 30, 1, 0, 0, TSR_F32);
            TH_ASSERT_OK(tsr_buffer_set_constant(P.da, true));
            tsr_derived_test_cap(64); /* bytes: smaller than any panels here */
            atomic_store(&panel_warnings, 0);
            tsr_set_warning_handler(count_panel_warning, NULL);
            pa_run(&P, "packed panels over the cap");
            assert_int_equal(tsr_derived_count_of(P.da, NULL), 0);
            TH_ASSERT_CONTAINS(tsr_last_warning(), "cap");
            pa_run(&P, "packed panels over the cap again");
            assert_int_equal(atomic_load(&panel_warnings), 1);
            tsr_set_warning_handler(NULL, NULL);
            tsr_derived_test_cap(0);
            pa_run(&P, "under the default cap");
            assert_int_equal(tsr_derived_count_of(P.da, NULL), 1);
            pa_free(&P);
        }
        /* a graph recorded with the panels kept packs in the recording: each replay follows A */
        pa_prob P;
        pa_make(&P, 19, 33, 47, 1, 0, 0, TSR_F32);
        TH_ASSERT_OK(tsr_buffer_set_constant(P.da, true));
        pa_run(&P, "the warm call");
        assert_int_equal(tsr_derived_count_of(P.da, NULL), 1);
        tsr_graph *g = NULL;
        pa_reset_c(&P);
        TH_ASSERT_OK(tsr_graph_begin(dev, NULL));
        TH_ASSERT_OK(tsr_matmul(dev, &P.desc, P.da, P.db, P.dc, NULL, NULL));
        TH_ASSERT_OK(tsr_graph_end(dev, &g));
        pa_expect(&P, "the recording call");
        pa_rewrite_a(&P);
        TH_ASSERT_OK(tsr_buffer_changed(P.da));
        pa_reference(&P);
        pa_reset_c(&P);
        TH_ASSERT_OK(tsr_graph_launch(g, NULL, NULL));
        assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
        pa_expect(&P, "a replay after A changed");
        tsr_graph_destroy(g);
        pa_free(&P);
    }
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accuracy),
        cmocka_unit_test(copy_is_used),
        cmocka_unit_test(not_served),
        cmocka_unit_test(plans_and_cap),
        cmocka_unit_test(two_threads),
        cmocka_unit_test(graphs),
        cmocka_unit_test(packed_a_kept),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
