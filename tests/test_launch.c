/* The fixed cost of a call, cached (runtime/program.c, "kernel objects and launch records"): a
 * repeated call looks nothing up and builds nothing; tsr_config_override, clearing it and a re-tune
 * after a cached call take effect on the next call; a plan whose device was closed errors; and two
 * threads calling the same shapes on one device (so the same cached kernel objects) on in-order
 * and out-of-order queues each get their own results; embedding calls in flight beyond its id
 * slots keep their own ids; a cached kernel's unchanged by-value arguments are not set again and
 * changed ones are. Every result is checked against a
 * double-precision reference on fresh random inputs. */
#include "harness.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A small-m GEMM (16 rows: on PoCL's AVX-512 defaults it packs A, so both the pack and the GEMM
 * kernel objects are shared) with alpha `alpha`, checked against the reference. */
#define M 16
#define N 40
#define K 24

typedef struct gemm_case {
    float a[M * K], b[K * N];
    cl_mem da, db;
} gemm_case;

static void case_make(tsr_device *dev, gemm_case *g) {
    th_fill_uniform(g->a, M * K, -1.0f, 1.0f);
    th_fill_uniform(g->b, K * N, -1.0f, 1.0f);
    g->da = th_buffer_from(dev, g->a, M * K);
    g->db = th_buffer_from(dev, g->b, K * N);
}

static void case_free(gemm_case *g) {
    clReleaseMemObject(g->da);
    clReleaseMemObject(g->db);
}

/* ||C - alpha A B|| / ||alpha A B|| for C read from `dc`. */
static double case_error(tsr_device *dev, const gemm_case *g, cl_mem dc, float alpha) {
    float c[M * N];
    double ref[M * N];
    th_read(dev, dc, c, M * N);
    th_ref_sgemm(1, 0, 0, M, N, K, alpha, g->a, K, g->b, N, 0.0, NULL, ref, N);
    return th_rel_error_matrix(1, M, N, c, ref, N);
}

static tsr_status case_call(tsr_device *dev, const gemm_case *g, cl_mem dc, float alpha, cl_command_queue q,
                            cl_event *event) {
    const tsr_matmul_desc d = {.m = M, .n = N, .k = K, .alpha = alpha};
    return tsr_matmul(dev, &d, g->da, g->db, dc, q, event);
}

static void poison_buffer_n(tsr_device *dev, cl_mem mem, size_t n) {
    float *c = malloc(n * sizeof *c);
    assert_non_null(c);
    th_poison(c, n);
    TH_ASSERT_OK(tsr_upload(dev, mem, c, n));
    free(c);
}

static void poison_buffer(tsr_device *dev, cl_mem dc) { poison_buffer_n(dev, dc, M * N); }

static uint64_t lookups(tsr_device *dev) {
    tsr_cache_info info;
    TH_ASSERT_OK(tsr_cache_get_info(dev, &info));
    return info.memory_hits + info.disk_hits + info.builds + info.binary_loads;
}

/* A call whose shape was seen looks up no program (and builds none); a new configuration after
 * tsr_config_override is looked up on the next call, and so is the old one once the override is
 * cleared. */
static void cached_calls_skip_lookups_and_follow_overrides(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    gemm_case g;
    case_make(dev, &g);
    cl_mem dc = th_buffer(dev, M * N);
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
    TH_ASSERT_OK(case_call(dev, &g, dc, 1.0f, NULL, NULL));
    assert_true(tsr_launch_count(dev) >= 2); /* the shape's configuration and its kernels */
    uint64_t seen = lookups(dev);
    poison_buffer(dev, dc);
    TH_ASSERT_OK(case_call(dev, &g, dc, 0.5f, NULL, NULL));
    assert_int_equal(lookups(dev), seen);
    assert_true(case_error(dev, &g, dc, 0.5f) < 1e-5);

    /* Another configuration (another program): the next call must use it. */
    tsr_config_info before;
    TH_ASSERT_OK(tsr_config_lookup(dev, "gemm", "small-m", &before));
    const char *other = strstr(before.config, "MWI=2 ") ? "MWI=4 VW=8 NVW=1 KU=2 PACKA=0 PACKB=0"
                                                        : "MWI=2 VW=8 NVW=1 KU=2 PACKA=0 PACKB=0";
    if (!th_try_override(dev, "gemm", other)) goto out;
    assert_int_equal(tsr_launch_count(dev), 0); /* forgotten as the override was set */
    poison_buffer(dev, dc);
    TH_ASSERT_OK(case_call(dev, &g, dc, 2.0f, NULL, NULL));
    assert_true(lookups(dev) > seen); /* the override's program was looked up */
    assert_true(case_error(dev, &g, dc, 2.0f) < 1e-5);
    tsr_config_info now;
    TH_ASSERT_OK(tsr_config_lookup(dev, "gemm", "small-m", &now));
    assert_int_equal(now.source, TSR_CONFIG_API_OVERRIDE);
    seen = lookups(dev);
    TH_ASSERT_OK(case_call(dev, &g, dc, 2.0f, NULL, NULL));
    assert_int_equal(lookups(dev), seen); /* and kept from then on */

    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
    poison_buffer(dev, dc);
    TH_ASSERT_OK(case_call(dev, &g, dc, -1.0f, NULL, NULL));
    assert_true(lookups(dev) > seen); /* the class's own configuration again */
    assert_true(case_error(dev, &g, dc, -1.0f) < 1e-5);
out:
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
    clReleaseMemObject(dc);
    case_free(&g);
}

/* A re-tune's new database (tsr_tuning_invalidate, as tuner/persist.c does) forgets the records;
 * the calls after it resolve again and are right. */
static void a_retune_forgets_the_records(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    gemm_case g;
    case_make(dev, &g);
    cl_mem dc = th_buffer(dev, M * N);
    TH_ASSERT_OK(case_call(dev, &g, dc, 1.0f, NULL, NULL));
    assert_true(tsr_launch_count(dev) > 0);
    tsr_tuning_invalidate(dev);
    assert_int_equal(tsr_launch_count(dev), 0);
    poison_buffer(dev, dc);
    TH_ASSERT_OK(case_call(dev, &g, dc, 3.0f, NULL, NULL));
    assert_true(tsr_launch_count(dev) > 0);
    assert_true(case_error(dev, &g, dc, 3.0f) < 1e-5);
    clReleaseMemObject(dc);
    case_free(&g);
}

/* A plan keeps its device after tsr_device_close, but executing it then is an error, never a
 * launch from the closed device's caches (ASan sees any use of what close freed). */
static void a_closed_device_errors(void **state) {
    (void)state;
    tsr_device *dev = th_open_device();
    gemm_case g;
    case_make(dev, &g);
    cl_mem dc = th_buffer(dev, M * N);
    const tsr_matmul_desc d = {.m = M, .n = N, .k = K, .alpha = 1.0f};
    tsr_matmul_plan *plan = NULL;
    TH_ASSERT_OK(tsr_matmul_plan_create(dev, &d, &plan));
    TH_ASSERT_OK(tsr_matmul_execute(plan, g.da, g.db, dc, NULL, NULL));
    TH_ASSERT_OK(tsr_matmul_execute(plan, g.da, g.db, dc, NULL, NULL)); /* cached */
    assert_true(case_error(dev, &g, dc, 1.0f) < 1e-5);
    tsr_device_close(dev);
    TH_ASSERT_STATUS(tsr_matmul_execute(plan, g.da, g.db, dc, NULL, NULL), TSR_ERR_INVALID_ARG);
    assert_non_null(strstr(tsr_last_error(), "closed"));
    tsr_matmul_plan_destroy(plan); /* frees the device */
    clReleaseMemObject(dc);
    case_free(&g);
}

/* ---- conv2d: its programs' kernels remembered per configuration, form, types and size ---- */

/* A 3x3 pad-1 convolution of CC x CH x CW into CK channels (one image), checked against a double
 * reference. */
#define CC 3
#define CH 7
#define CW 9
#define CK 4

typedef struct conv_case {
    float x[CC * CH * CW], w[CK * CC * 9];
    cl_mem dx, dw, dy;
} conv_case;

static tsr_status conv_call(tsr_device *dev, const conv_case *c) {
    const tsr_conv2d_desc d = {.batch = 1, .in_channels = CC, .in_height = CH, .in_width = CW, .out_channels = CK,
                               .kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
    return tsr_conv2d(dev, &d, c->dx, c->dw, c->dy, NULL, NULL);
}

static double conv_error(tsr_device *dev, const conv_case *c) {
    float y[CK * CH * CW];
    th_read(dev, c->dy, y, CK * CH * CW);
    double num = 0, den = 0;
    for (int k = 0; k < CK; ++k)
        for (int i = 0; i < CH; ++i)
            for (int j = 0; j < CW; ++j) {
                double ref = 0;
                for (int ch = 0; ch < CC; ++ch)
                    for (int r = 0; r < 3; ++r)
                        for (int s = 0; s < 3; ++s) {
                            int yi = i + r - 1, xj = j + s - 1;
                            if (yi < 0 || yi >= CH || xj < 0 || xj >= CW) continue;
                            ref += (double)c->w[(k * CC + ch) * 9 + r * 3 + s] * c->x[(ch * CH + yi) * CW + xj];
                        }
                double d = y[(k * CH + i) * CW + j] - ref;
                num += d * d, den += ref * ref;
            }
    return isfinite(num) ? sqrt(num / (den > 0 ? den : 1)) : INFINITY;
}

/* A conv2d call whose shape was seen looks up no program; an override between two calls of the
 * same shape (another form: another program) is looked up and runs on the next call, and so is
 * the class's own configuration again once it is cleared. */
static void conv_calls_skip_lookups_and_follow_overrides(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    conv_case c;
    th_fill_uniform(c.x, CC * CH * CW, -1.0f, 1.0f);
    th_fill_uniform(c.w, CK * CC * 9, -1.0f, 1.0f);
    c.dx = th_buffer_from(dev, c.x, CC * CH * CW);
    c.dw = th_buffer_from(dev, c.w, CK * CC * 9);
    c.dy = th_buffer(dev, CK * CH * CW);
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
    TH_ASSERT_OK(conv_call(dev, &c));
    uint64_t seen = lookups(dev);
    poison_buffer_n(dev, c.dy, CK * CH * CW);
    TH_ASSERT_OK(conv_call(dev, &c));
    assert_int_equal(lookups(dev), seen);
    assert_true(conv_error(dev, &c) < 1e-5);
    /* each form in turn: the first call looks its program up, the second none */
    const char *const forms[] = {"ALGO=2 MWI=2 VW=4", "ALGO=2 MWI=2 VW=8 STAGE=2 WGM=2 WGN=4",
                                 "ALGO=2 MWI=2 VW=4 STAGE=3 WGN=4", "ALGO=2 MWI=2 VW=8 STAGE=5 WGM=4 WGN=4",
                                 "ALGO=1", "ALGO=3"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; ++i) {
        if (!th_try_override(dev, "conv2d", forms[i])) continue;
        poison_buffer_n(dev, c.dy, CK * CH * CW);
        TH_ASSERT_OK(conv_call(dev, &c));
        assert_true(lookups(dev) > seen); /* the override's program was looked up */
        assert_true(conv_error(dev, &c) < 1e-5);
        seen = lookups(dev);
        poison_buffer_n(dev, c.dy, CK * CH * CW);
        TH_ASSERT_OK(conv_call(dev, &c));
        assert_int_equal(lookups(dev), seen);
        assert_true(conv_error(dev, &c) < 1e-5);
        seen = lookups(dev);
    }
    TH_ASSERT_OK(tsr_config_override(dev, "conv2d", NULL));
    poison_buffer_n(dev, c.dy, CK * CH * CW);
    TH_ASSERT_OK(conv_call(dev, &c));
    assert_true(lookups(dev) > seen); /* the class's own configuration again */
    assert_true(conv_error(dev, &c) < 1e-5);
    clReleaseMemObject(c.dx);
    clReleaseMemObject(c.dw);
    clReleaseMemObject(c.dy);
}

/* ---- two threads, one device ---- */

#define ROUNDS 64

typedef struct worker {
    tsr_device *dev;
    cl_command_queue queue;
    gemm_case g;
    cl_mem out[ROUNDS];
    float gelu_x[1000];
    cl_mem gx, gy[ROUNDS];
    tsr_status status;
    char error[256];
} worker;

static pthread_barrier_t start_together;

static void *work(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(&start_together);
    cl_event events[2 * ROUNDS];
    int nevents = 0;
    const tsr_gelu_desc gd = {.mode = TSR_GELU_TANH, .n = 1000};
    for (int r = 0; r < ROUNDS && w->status == TSR_SUCCESS; ++r) {
        /* the same shapes in both threads: the same cached kernels, arguments set concurrently */
        w->status = case_call(w->dev, &w->g, w->out[r], (float)(r + 1), w->queue, &events[nevents]);
        if (w->status == TSR_SUCCESS) ++nevents;
        /* GELU holds no device lock while it enqueues: only the kernel's own lock keeps the two
         * threads' arguments apart */
        if (w->status == TSR_SUCCESS) {
            w->status = tsr_gelu(w->dev, &gd, w->gx, w->gy[r], w->queue, &events[nevents]);
            if (w->status == TSR_SUCCESS) ++nevents;
        }
    }
    if (w->status != TSR_SUCCESS) snprintf(w->error, sizeof w->error, "%s", tsr_last_error());
    if (nevents) clWaitForEvents((cl_uint)nevents, events);
    for (int i = 0; i < nevents; ++i) clReleaseEvent(events[i]);
    return NULL;
}

static void two_threads(bool out_of_order_first) {
    tsr_device *dev = th_dev;
    worker w[2];
    memset(w, 0, sizeof w);
    for (int t = 0; t < 2; ++t) {
        w[t].dev = dev;
        cl_int err;
        const bool ooo = (t == 0) == out_of_order_first;
        w[t].queue = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev),
                                          ooo ? CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE : 0, &err);
        if (err != CL_SUCCESS && ooo) { /* no out-of-order queues here: both in order */
            w[t].queue = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev), 0, &err);
            print_message("# out-of-order queues unsupported: thread %d uses an in-order one\n", t);
        }
        assert_int_equal(err, CL_SUCCESS);
        case_make(dev, &w[t].g);
        for (int r = 0; r < ROUNDS; ++r) {
            w[t].out[r] = th_buffer(dev, M * N);
            poison_buffer(dev, w[t].out[r]);
        }
        th_fill_uniform(w[t].gelu_x, 1000, -4.0f, 4.0f);
        w[t].gx = th_buffer_from(dev, w[t].gelu_x, 1000);
        for (int r = 0; r < ROUNDS; ++r) w[t].gy[r] = th_buffer(dev, 1000);
    }
    pthread_t threads[2];
    assert_int_equal(pthread_barrier_init(&start_together, NULL, 2), 0);
    for (int t = 0; t < 2; ++t) assert_int_equal(pthread_create(&threads[t], NULL, work, &w[t]), 0);
    for (int t = 0; t < 2; ++t) pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&start_together);
    for (int t = 0; t < 2; ++t) {
        if (w[t].status != TSR_SUCCESS) fail_msg("thread %d: %s: %s", t, tsr_status_str(w[t].status), w[t].error);
        for (int r = 0; r < ROUNDS; ++r) {
            double e = case_error(dev, &w[t].g, w[t].out[r], (float)(r + 1));
            if (!(e < 1e-5)) fail_msg("thread %d, call %d: relative error %g", t, r, e);
        }
        for (int r = 0; r < ROUNDS; ++r) {
            float y[1000];
            th_read(dev, w[t].gy[r], y, 1000);
            for (int i = 0; i < 1000; ++i) {
                double ref = th_ref_activation(TSR_ACT_GELU_TANH, w[t].gelu_x[i]);
                if (!(fabs(y[i] - ref) <= 1e-5 * fmax(1.0, fabs(w[t].gelu_x[i]))))
                    fail_msg("thread %d, call %d: gelu(%g) = %g, want %g", t, r, w[t].gelu_x[i], y[i], ref);
            }
        }
        for (int r = 0; r < ROUNDS; ++r) clReleaseMemObject(w[t].out[r]);
        clReleaseMemObject(w[t].gx);
        for (int r = 0; r < ROUNDS; ++r) clReleaseMemObject(w[t].gy[r]);
        case_free(&w[t].g);
        clReleaseCommandQueue(w[t].queue);
    }
}

static void two_threads_share_cached_kernels(void **state) {
    (void)state;
    for (int round = 0; round < 2; ++round) two_threads(round == 1);
}


/* tsr_embedding back to back, more calls than its id slots and no wait between them: the calls
 * past the slots in flight take buffers of their own; every call's ids are its own (each call's
 * host arrays are overwritten as soon as it returns). */
static void embedding_calls_in_flight_keep_their_ids(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    enum { CALLS = 3 * TSR_IDS_SLOTS, TOKENS = 12, HIDDEN = 20, VOCAB = 50, POS = 16, TYPES = 2 };
    float word[VOCAB * HIDDEN], pos[POS * HIDDEN], typ[TYPES * HIDDEN];
    th_fill_uniform(word, VOCAB * HIDDEN, -1.0f, 1.0f);
    th_fill_uniform(pos, POS * HIDDEN, -1.0f, 1.0f);
    th_fill_uniform(typ, TYPES * HIDDEN, -1.0f, 1.0f);
    cl_mem dw = th_buffer_from(dev, word, VOCAB * HIDDEN), dp = th_buffer_from(dev, pos, POS * HIDDEN),
           dt = th_buffer_from(dev, typ, TYPES * HIDDEN);
    int32_t ids[CALLS][TOKENS], types[CALLS][TOKENS];
    cl_mem out[CALLS];
    const tsr_embedding_desc d = {.tokens = TOKENS, .seq_len = TOKENS, .hidden = HIDDEN, .vocab = VOCAB,
                                  .max_positions = POS, .type_vocab = TYPES};
    for (int c = 0; c < CALLS; ++c) {
        out[c] = th_buffer(dev, TOKENS * HIDDEN);
        poison_buffer_n(dev, out[c], TOKENS * HIDDEN);
    }
    for (int c = 0; c < CALLS; ++c) {
        int32_t host_ids[TOKENS], host_types[TOKENS];
        for (int t = 0; t < TOKENS; ++t) {
            ids[c][t] = host_ids[t] = (int32_t)(th_rand() % VOCAB);
            types[c][t] = host_types[t] = (int32_t)(th_rand() % TYPES);
        }
        TH_ASSERT_OK(tsr_embedding(dev, &d, host_ids, host_types, dw, dp, dt, out[c], NULL, NULL));
        memset(host_ids, 0xff, sizeof host_ids); /* the call must have copied them */
        memset(host_types, 0xff, sizeof host_types);
    }
    for (int c = 0; c < CALLS; ++c) {
        float y[TOKENS * HIDDEN];
        th_read(dev, out[c], y, TOKENS * HIDDEN);
        for (int t = 0; t < TOKENS; ++t)
            for (int j = 0; j < HIDDEN; ++j) {
                double ref = (double)word[ids[c][t] * HIDDEN + j] + pos[t * HIDDEN + j] + typ[types[c][t] * HIDDEN + j];
                if (!(fabs(y[t * HIDDEN + j] - ref) <= 1e-6 * (1.0 + fabs(ref))))
                    fail_msg("call %d, token %d, column %d: %g, want %g", c, t, j, y[t * HIDDEN + j], ref);
            }
        clReleaseMemObject(out[c]);
    }
    clReleaseMemObject(dw);
    clReleaseMemObject(dp);
    clReleaseMemObject(dt);
}

/* A cached kernel's by-value arguments are set only when they change (tsr_kernel's shadow): a
 * call that sets the value the object holds skips clSetKernelArg, one that sets another value
 * sets it, and a recording thread always sets (its graph records every argument). Shown with a
 * kernel that writes its scalar: an argument changed behind the shadow's back (which no tessera
 * code does) stays when the same value is set again, and is replaced when a different one is. */
static int32_t put_value(tsr_device *dev, tsr_kernel *k, cl_mem out, int32_t v, bool behind) {
    const size_t one = 1;
    if (behind) {
        const int32_t other = 777;
        assert_int_equal(clSetKernelArg(k->kernel, 1, sizeof other, &other), CL_SUCCESS);
    }
    tsr_kernel_lock(k);
    assert_int_equal(tsr_set_arg(k->kernel, 0, sizeof out, &out), CL_SUCCESS);
    assert_int_equal(tsr_set_arg(k->kernel, 1, sizeof v, &v), CL_SUCCESS);
    cl_int err = tsr_enqueue_kernel(tsr_device_queue(dev), k->kernel, 1, NULL, &one, &one, 0, NULL, NULL);
    tsr_kernel_unlock(k);
    assert_int_equal(err, CL_SUCCESS);
    int32_t got = 0;
    assert_int_equal(clEnqueueReadBuffer(tsr_device_queue(dev), out, CL_TRUE, 0, sizeof got, &got, 0, NULL, NULL),
                     CL_SUCCESS);
    return got;
}

static void unchanged_arguments_are_not_set_again(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    static const char *src = "kernel void put(global int *o, int v) { o[0] = v; }\n";
    cl_int err;
    cl_device_id id = tsr_device_id(dev);
    cl_program prog = clCreateProgramWithSource(tsr_device_context(dev), 1, &src, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(clBuildProgram(prog, 1, &id, "", NULL, NULL), CL_SUCCESS);
    tsr_kernel k;
    memset(&k, 0, sizeof k);
    k.kernel = clCreateKernel(prog, "put", &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(pthread_mutex_init(&k.lock, NULL), 0);
    cl_mem out = clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, sizeof(int32_t), NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(put_value(dev, &k, out, 5, false), 5);
    assert_int_equal(put_value(dev, &k, out, 5, true), 777); /* 5 is what the shadow holds: not set */
    assert_int_equal(put_value(dev, &k, out, 6, true), 6);   /* a new value is set */
    assert_int_equal(put_value(dev, &k, out, 6, false), 6);
    /* while recording, every argument is set (and recorded) */
    TH_ASSERT_OK(tsr_graph_begin(dev, NULL));
    const int32_t got = put_value(dev, &k, out, 6, true);
    tsr_graph *g = NULL;
    (void)tsr_graph_end(dev, &g); /* a kernel outside tessera's cache may not be recordable: not the point */
    tsr_graph_destroy(g);
    assert_int_equal(got, 6);
    /* a set the shadow cannot keep (no value: an error for a scalar, whatever the driver says)
     * forgets the argument: the next call sets it */
    tsr_kernel_lock(&k);
    (void)tsr_set_arg(k.kernel, 1, sizeof(int32_t), NULL);
    tsr_kernel_unlock(&k);
    assert_int_equal(put_value(dev, &k, out, 6, true), 6);
    clReleaseMemObject(out);
    pthread_mutex_destroy(&k.lock);
    clReleaseKernel(k.kernel);
    clReleaseProgram(prog);
}

/* GEMM calls on one shape that change only alpha, or only their buffers, between calls: each
 * result is its own (the shadow sets what changed and keeps what did not). */
static void changed_scalars_and_buffers_reach_the_kernel(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    gemm_case g[2];
    cl_mem out[6];
    const float alphas[6] = {1.0f, 1.0f, 2.0f, 2.0f, -0.5f, 1.0f};
    for (int i = 0; i < 2; ++i) case_make(dev, &g[i]);
    for (int c = 0; c < 6; ++c) {
        out[c] = th_buffer(dev, M * N);
        poison_buffer(dev, out[c]);
        TH_ASSERT_OK(case_call(dev, &g[c % 2], out[c], alphas[c], NULL, NULL));
    }
    for (int c = 0; c < 6; ++c) {
        double e = case_error(dev, &g[c % 2], out[c], alphas[c]);
        if (!(e < 1e-5)) fail_msg("call %d (alpha %g): relative error %g", c, alphas[c], e);
        clReleaseMemObject(out[c]);
    }
    for (int i = 0; i < 2; ++i) case_free(&g[i]);
}

int main(void) {
    th_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cached_calls_skip_lookups_and_follow_overrides),
        cmocka_unit_test(a_retune_forgets_the_records),
        cmocka_unit_test(conv_calls_skip_lookups_and_follow_overrides),
        cmocka_unit_test(a_closed_device_errors),
        cmocka_unit_test(two_threads_share_cached_kernels),
        cmocka_unit_test(embedding_calls_in_flight_keep_their_ids),
        cmocka_unit_test(unchanged_arguments_are_not_set_again),
        cmocka_unit_test(changed_scalars_and_buffers_reach_the_kernel),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
