/* Recorded launch sequences (runtime/graph.c, docs/graph.md): a GEMM + GELU + LayerNorm +
 * attention sequence recorded once and replayed with new input contents matches a
 * double-precision reference of the whole chain (fresh seeded inputs, poisoned output), on the
 * device's in-order queue and on an out-of-order queue, and from two threads replaying one graph;
 * a configuration override after the recording, a closed device and a recorded tsr_embedding are
 * clear errors, never a stale launch, and so is a replay on a GEMM's kept strip weights after they
 * changed or were unmarked; a convolution of each form (a batch of 1x1 layers among them)
 * replays new inputs. */
#include "harness.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T 8   /* tokens */
#define KD 24 /* input width */
#define HD 64 /* hidden: 2 heads of 32 */
#define HEADS 2
#define DH 32

typedef struct chain {
    float x[T * KD], w[KD * HD], gamma[HD], beta[HD];
    cl_mem dx, dw, dh, dg, dy, dgamma, dbeta, dout;
} chain;

static void chain_make(tsr_device *dev, chain *c) {
    th_fill_uniform(c->x, T * KD, -1.0f, 1.0f);
    th_fill_uniform(c->w, KD * HD, -0.5f, 0.5f);
    th_fill_uniform(c->gamma, HD, 0.5f, 1.5f);
    th_fill_uniform(c->beta, HD, -0.2f, 0.2f);
    c->dx = th_buffer_from(dev, c->x, T * KD);
    c->dw = th_buffer_from(dev, c->w, KD * HD);
    c->dgamma = th_buffer_from(dev, c->gamma, HD);
    c->dbeta = th_buffer_from(dev, c->beta, HD);
    c->dh = th_buffer(dev, T * HD);
    c->dg = th_buffer(dev, T * HD);
    c->dy = th_buffer(dev, T * HD);
    c->dout = th_buffer(dev, T * HD);
}

static void chain_free(chain *c) {
    cl_mem *m[] = {&c->dx, &c->dw, &c->dh, &c->dg, &c->dy, &c->dgamma, &c->dbeta, &c->dout};
    for (size_t i = 0; i < sizeof m / sizeof *m; ++i) clReleaseMemObject(*m[i]);
}

/* h = x W; g = GELU(h); y = LayerNorm(g); out = attention(y, y, y) over 2 heads ([L, H, D]). */
static tsr_status chain_call(tsr_device *dev, chain *c) {
    const tsr_matmul_desc mm = {.m = T, .n = HD, .k = KD, .alpha = 1.0f};
    tsr_status s = tsr_matmul(dev, &mm, c->dx, c->dw, c->dh, NULL, NULL);
    if (s != TSR_SUCCESS) return s;
    const tsr_gelu_desc gd = {.mode = TSR_GELU_ERF, .n = T * HD};
    if ((s = tsr_gelu(dev, &gd, c->dh, c->dg, NULL, NULL)) != TSR_SUCCESS) return s;
    const tsr_layernorm_desc ln = {.rows = T, .cols = HD, .eps = 1e-5f};
    if ((s = tsr_layernorm(dev, &ln, c->dg, NULL, c->dgamma, c->dbeta, c->dy, NULL, NULL)) != TSR_SUCCESS) return s;
    const size_t st[3] = {T * HD, DH, HD};
    tsr_attention_desc at = {.batch = 1, .heads = HEADS, .q_len = T, .kv_len = T, .head_dim = DH};
    memcpy(at.q_strides, st, sizeof st);
    memcpy(at.k_strides, st, sizeof st);
    memcpy(at.v_strides, st, sizeof st);
    memcpy(at.o_strides, st, sizeof st);
    return tsr_attention(dev, &at, c->dy, c->dy, c->dy, c->dout, NULL, NULL);
}

static void chain_reference(const chain *c, double *out) {
    static double y[T * HD];
    for (int t = 0; t < T; ++t) {
        double g[HD], mean = 0, var = 0;
        for (int j = 0; j < HD; ++j) {
            double h = 0;
            for (int k = 0; k < KD; ++k) h += (double)c->x[t * KD + k] * c->w[k * HD + j];
            g[j] = 0.5 * h * (1.0 + erf(h / sqrt(2.0)));
            mean += g[j];
        }
        mean /= HD;
        for (int j = 0; j < HD; ++j) var += (g[j] - mean) * (g[j] - mean);
        var /= HD;
        for (int j = 0; j < HD; ++j) y[t * HD + j] = (g[j] - mean) / sqrt(var + 1e-5) * c->gamma[j] + c->beta[j];
    }
    for (int h = 0; h < HEADS; ++h)
        for (int i = 0; i < T; ++i) {
            double s[T], mx = -INFINITY, sum = 0;
            for (int j = 0; j < T; ++j) {
                s[j] = 0;
                for (int d = 0; d < DH; ++d) s[j] += y[i * HD + h * DH + d] * y[j * HD + h * DH + d];
                s[j] /= sqrt((double)DH);
                mx = fmax(mx, s[j]);
            }
            for (int j = 0; j < T; ++j) sum += (s[j] = exp(s[j] - mx));
            for (int d = 0; d < DH; ++d) {
                double o = 0;
                for (int j = 0; j < T; ++j) o += s[j] / sum * y[j * HD + h * DH + d];
                out[i * HD + h * DH + d] = o;
            }
        }
}

static double chain_error(tsr_device *dev, const chain *c) {
    float got[T * HD];
    double ref[T * HD];
    th_read(dev, c->dout, got, T * HD);
    chain_reference(c, ref);
    return tsr_rel_error(got, ref, T * HD);
}

static void poison(tsr_device *dev, cl_mem mem) {
    float p[T * HD];
    th_poison(p, T * HD);
    TH_ASSERT_OK(tsr_upload(dev, mem, p, T * HD));
}

/* New contents of x, poisoned output, one replay on `queue`, checked. */
static void replay_checked(tsr_device *dev, chain *c, tsr_graph *g, cl_command_queue queue) {
    th_fill_uniform(c->x, T * KD, -1.0f, 1.0f);
    TH_ASSERT_OK(tsr_upload(dev, c->dx, c->x, T * KD));
    poison(dev, c->dout);
    cl_event ev = NULL;
    TH_ASSERT_OK(tsr_graph_launch(g, queue, &ev));
    assert_non_null(ev);
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    double err = chain_error(dev, c);
    print_message("# replay error %.3g\n", err);
    assert_true(err < 1e-4);
}

static tsr_graph *record(tsr_device *dev, chain *c) {
    const tsr_graph_desc gd = {.name = "chain"};
    TH_ASSERT_OK(tsr_graph_begin(dev, &gd));
    TH_ASSERT_OK(chain_call(dev, c));
    tsr_graph *g = NULL;
    TH_ASSERT_OK(tsr_graph_end(dev, &g));
    assert_non_null(g);
    return g;
}

static void recorded_chain_replays_new_inputs(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    chain c;
    chain_make(dev, &c);
    poison(dev, c.dout);
    tsr_graph *g = record(dev, &c);
    assert_true(chain_error(dev, &c) < 1e-4); /* the recorded calls ran */
    size_t launches = 0, buffers = 0;
    TH_ASSERT_OK(tsr_graph_info(g, &launches, &buffers));
    print_message("# %zu launches, %zu buffers\n", launches, buffers);
    assert_true(launches >= 4);
    assert_true(buffers >= 8);
    for (int r = 0; r < 3; ++r) replay_checked(dev, &c, g, NULL);
    /* an out-of-order queue: chained by events */
    cl_int err;
    cl_command_queue ooo = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev),
                                                CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    if (err != CL_SUCCESS) {
        print_message("# out-of-order queues unsupported: a second in-order queue\n");
        ooo = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev), 0, &err);
    }
    assert_int_equal(err, CL_SUCCESS);
    for (int r = 0; r < 2; ++r) replay_checked(dev, &c, g, ooo);
    replay_checked(dev, &c, g, NULL); /* back on the device's queue: waits for the other queue's replay */
    clReleaseCommandQueue(ooo);
    /* the graph keeps its buffers: released by their owner, the replay still runs on them */
    chain_free(&c);
    TH_ASSERT_OK(tsr_graph_launch(g, NULL, NULL));
    clFinish(tsr_device_queue(dev));
    tsr_graph_destroy(g);
    tsr_graph_destroy(NULL);
}

typedef struct replayer {
    tsr_graph *g;
    tsr_status status;
    char error[512];
} replayer;

static void *replay_thread(void *arg) {
    replayer *r = arg;
    for (int i = 0; i < 10 && r->status == TSR_SUCCESS; ++i) {
        cl_event ev = NULL;
        r->status = tsr_graph_launch(r->g, NULL, &ev);
        if (r->status == TSR_SUCCESS) {
            clWaitForEvents(1, &ev);
            clReleaseEvent(ev);
        }
    }
    if (r->status != TSR_SUCCESS) snprintf(r->error, sizeof r->error, "%s", tsr_last_error());
    return NULL;
}

static void two_threads_replay_one_graph(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    chain c;
    chain_make(dev, &c);
    tsr_graph *g = record(dev, &c);
    poison(dev, c.dout);
    replayer r[2] = {{.g = g}, {.g = g}};
    pthread_t t[2];
    for (int i = 0; i < 2; ++i) assert_int_equal(pthread_create(&t[i], NULL, replay_thread, &r[i]), 0);
    for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; ++i)
        if (r[i].status != TSR_SUCCESS) fail_msg("thread %d: %s", i, r[i].error);
    double err = chain_error(dev, &c);
    print_message("# after two threads' replays: error %.3g\n", err);
    assert_true(err < 1e-4);
    tsr_graph_destroy(g);
    chain_free(&c);
}

static void an_override_invalidates_a_graph(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    chain c;
    chain_make(dev, &c);
    tsr_graph *g = record(dev, &c);
    TH_ASSERT_OK(tsr_graph_launch(g, NULL, NULL));
    TH_ASSERT_OK(tsr_config_override(dev, "gelu", NULL)); /* cleared: still a change of configuration */
    assert_int_equal(tsr_graph_launch(g, NULL, NULL), TSR_ERR_INVALID_ARG);
    assert_non_null(strstr(tsr_last_error(), "re-record"));
    tsr_graph_destroy(g);
    g = record(dev, &c); /* recorded again, it replays */
    replay_checked(dev, &c, g, NULL);
    tsr_graph_destroy(g);
    chain_free(&c);
}

/* Weights marked constant (tsr_buffer_set_constant) under the smallm kernel: the GEMM reads its
 * kept strip copy of w (runtime/ops/gemm.c). Recorded after a warm call made the strips, the
 * graph replays on them; once w changed (the caller's tsr_buffer_changed) or was unmarked, a
 * replay fails with the reason, never a launch on the stale copy; recorded again, it follows w. */
static void kept_weights_invalidate_a_graph(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    if (!th_try_override(dev, "gemm", "KERNEL=2 MWI=8 VW=16 NVW=2 KU=4")) return;
    for (int how = 0; how < 2; ++how) {
        chain c;
        chain_make(dev, &c);
        TH_ASSERT_OK(tsr_buffer_set_constant(c.dw, true));
        TH_ASSERT_OK(chain_call(dev, &c)); /* the warm call: the strips are made here */
        assert_int_equal(tsr_derived_count_of(c.dw, NULL), 1);
        tsr_graph *g = record(dev, &c);
        for (int r = 0; r < 2; ++r) replay_checked(dev, &c, g, NULL);
        if (how == 0) {
            th_fill_uniform(c.w, KD * HD, -0.5f, 0.5f);
            TH_ASSERT_OK(tsr_upload(dev, c.dw, c.w, KD * HD));
            TH_ASSERT_OK(tsr_buffer_changed(c.dw));
        } else {
            TH_ASSERT_OK(tsr_buffer_set_constant(c.dw, false));
        }
        TH_ASSERT_STATUS(tsr_graph_launch(g, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "record the graph again");
        tsr_graph_destroy(g);
        TH_ASSERT_OK(chain_call(dev, &c));
        g = record(dev, &c); /* recorded again, it replays (on new strips, or on w itself) */
        replay_checked(dev, &c, g, NULL);
        tsr_graph_destroy(g);
        chain_free(&c);
    }
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
}

static void a_closed_device_refuses_replays(void **state) {
    (void)state;
    tsr_device *dev = th_open_device();
    chain c;
    chain_make(dev, &c);
    tsr_graph *g = record(dev, &c);
    chain_free(&c);
    tsr_device_close(dev); /* the graph holds it: freed at tsr_graph_destroy */
    assert_int_equal(tsr_graph_launch(g, NULL, NULL), TSR_ERR_INVALID_ARG);
    assert_non_null(strstr(tsr_last_error(), "closed"));
    tsr_graph_destroy(g);
}

static void host_reading_ops_and_misuse_are_refused(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    float table[4 * 8];
    th_fill_uniform(table, 4 * 8, -1.0f, 1.0f);
    cl_mem word = th_buffer_from(dev, table, 4 * 8), pos = th_buffer_from(dev, table, 4 * 8),
           typ = th_buffer_from(dev, table, 4 * 8), y = th_buffer(dev, 2 * 8);
    const int32_t ids[2] = {1, 3}, types[2] = {0, 1};
    const tsr_embedding_desc ed = {.tokens = 2, .seq_len = 2, .hidden = 8, .vocab = 4, .max_positions = 4,
                                   .type_vocab = 4};
    TH_ASSERT_OK(tsr_graph_begin(dev, NULL));
    assert_int_equal(tsr_graph_begin(dev, NULL), TSR_ERR_INVALID_ARG); /* one recording per thread */
    assert_int_equal(tsr_embedding(dev, &ed, ids, types, word, pos, typ, y, NULL, NULL), TSR_ERR_UNSUPPORTED);
    assert_non_null(strstr(tsr_last_error(), "tsr_embedding"));
    tsr_graph *g = (tsr_graph *)&g;
    assert_int_equal(tsr_graph_end(dev, &g), TSR_ERR_UNSUPPORTED);
    assert_null(g);
    assert_non_null(strstr(tsr_last_error(), "tsr_embedding"));
    /* outside a recording it runs */
    TH_ASSERT_OK(tsr_embedding(dev, &ed, ids, types, word, pos, typ, y, NULL, NULL));
    assert_int_equal(tsr_graph_end(dev, &g), TSR_ERR_INVALID_ARG);
    assert_int_equal(tsr_graph_begin(NULL, NULL), TSR_ERR_INVALID_ARG);
    assert_int_equal(tsr_graph_launch(NULL, NULL, NULL), TSR_ERR_INVALID_ARG);
    assert_int_equal(tsr_graph_info(NULL, NULL, NULL), TSR_ERR_INVALID_ARG);
    const tsr_graph_desc long_name = {.name = "a name far longer than sixty-three characters, which is the limit of it"};
    assert_int_equal(tsr_graph_begin(dev, &long_name), TSR_ERR_INVALID_ARG);
    /* an empty recording replays as a marker */
    TH_ASSERT_OK(tsr_graph_begin(dev, NULL));
    TH_ASSERT_OK(tsr_graph_end(dev, &g));
    cl_event ev = NULL;
    TH_ASSERT_OK(tsr_graph_launch(g, NULL, &ev));
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    tsr_graph_destroy(g);
    clFinish(tsr_device_queue(dev));
    clReleaseMemObject(word);
    clReleaseMemObject(pos);
    clReleaseMemObject(typ);
    clReleaseMemObject(y);
}

/* A convolution of each form (its own kernels: the implicit one with its padded copy on CPU
 * devices, direct, im2col, and channels-last's transposes) recorded once and replayed on new
 * input contents, against the float64 reference each time. */
enum { CN = 2, CC = 4, CH = 9, CW = 7, CK = 20 };
static void conv_upload_x(tsr_device *dev, const tsr_conv2d_desc *d, cl_mem dx, const float *x) {
    float t[CN * CC * CH * CW];
    for (int n = 0; n < CN; ++n)
        for (int c = 0; c < CC; ++c)
            for (int i = 0; i < CH * CW; ++i)
                t[d->layout == TSR_NHWC ? (n * CH * CW + i) * CC + c : (n * CC + c) * CH * CW + i] =
                    x[(n * CC + c) * CH * CW + i];
    TH_ASSERT_OK(tsr_upload(dev, dx, t, CN * CC * CH * CW));
}

static double conv_error(tsr_device *dev, const tsr_conv2d_desc *d, cl_mem dy, const float *x, const float *w) {
    float got[CN * CK * CH * CW], y[CN * CK * CH * CW];
    double ref[CN * CK * CH * CW];
    th_read(dev, dy, got, CN * CK * CH * CW);
    for (int n = 0; n < CN; ++n) /* back to NCHW */
        for (int k = 0; k < CK; ++k)
            for (int i = 0; i < CH * CW; ++i)
                y[(n * CK + k) * CH * CW + i] =
                    got[d->layout == TSR_NHWC ? (n * CH * CW + i) * CK + k : (n * CK + k) * CH * CW + i];
    tsr_conv2d_desc nchw = *d;
    nchw.layout = TSR_NCHW;
    tsr_conv2d_reference(&nchw, x, w, NULL, ref);
    return tsr_rel_error(y, ref, CN * CK * CH * CW);
}

static void convolutions_replay_new_inputs(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    static const struct {
        tsr_conv_algo algo;
        tsr_tensor_layout layout;
        size_t kernel; /* 3: padded 3x3; 1: a 1x1 layer over the batch (on CPUs one GEMM across the images) */
    } forms[] = {{TSR_CONV_AUTO, TSR_NCHW, 3}, {TSR_CONV_IMPLICIT, TSR_NCHW, 3}, {TSR_CONV_DIRECT, TSR_NCHW, 3},
                 {TSR_CONV_IM2COL, TSR_NCHW, 3}, {TSR_CONV_AUTO, TSR_NHWC, 3}, {TSR_CONV_AUTO, TSR_NCHW, 1}};
    float x[CN * CC * CH * CW], w[CK * CC * 9];
    th_fill_uniform(w, CK * CC * 9, -1.0f, 1.0f);
    cl_mem dx = th_buffer(dev, CN * CC * CH * CW), dw = th_buffer_from(dev, w, CK * CC * 9),
           dy = th_buffer(dev, CN * CK * CH * CW);
    for (size_t f = 0; f < sizeof forms / sizeof *forms; ++f) {
        const tsr_conv2d_desc d = {.batch = CN, .in_channels = CC, .in_height = CH, .in_width = CW,
                                   .out_channels = CK, .kernel_h = forms[f].kernel, .kernel_w = forms[f].kernel,
                                   .pad_h = forms[f].kernel / 2, .pad_w = forms[f].kernel / 2,
                                   .algo = forms[f].algo, .layout = forms[f].layout};
        th_fill_uniform(x, CN * CC * CH * CW, -1.0f, 1.0f);
        conv_upload_x(dev, &d, dx, x);
        TH_ASSERT_OK(tsr_graph_begin(dev, &(tsr_graph_desc){.name = "conv"}));
        tsr_status st = tsr_conv2d(dev, &d, dx, dw, dy, NULL, NULL);
        tsr_graph *g = NULL;
        tsr_status end = tsr_graph_end(dev, &g);
        if (st != TSR_SUCCESS || end != TSR_SUCCESS)
            fail_msg("form %zu: %s / %s: %s", f, tsr_status_str(st), tsr_status_str(end), tsr_last_error());
        double e = conv_error(dev, &d, dy, x, w);
        if (!(e < 1e-5)) fail_msg("form %zu, the recorded call: relative error %g", f, e);
        for (int r = 0; r < 2; ++r) {
            th_fill_uniform(x, CN * CC * CH * CW, -1.0f, 1.0f);
            conv_upload_x(dev, &d, dx, x);
            float poisoned[CN * CK * CH * CW];
            th_poison(poisoned, CN * CK * CH * CW);
            TH_ASSERT_OK(tsr_upload(dev, dy, poisoned, CN * CK * CH * CW));
            TH_ASSERT_OK(tsr_graph_launch(g, NULL, NULL));
            e = conv_error(dev, &d, dy, x, w);
            if (!(e < 1e-5)) fail_msg("form %zu, replay %d: relative error %g", f, r, e);
        }
        tsr_graph_destroy(g);
    }
    clReleaseMemObject(dx);
    clReleaseMemObject(dw);
    clReleaseMemObject(dy);
}

/* Graphs recorded before a workspace grew keep replaying on the buffer they recorded with, which
 * no slot holds any more: their replays must still go one after the other. Two graphs of split-K
 * GEMMs (the gpu kernel forced to 8 slices: one buffer of partial products each replay writes),
 * the workspace grown past them by a larger call, then replayed on two queues in turn: every
 * result bitwise the un-recorded call's (without the ordering 32 of 60 differed on PoCL). */
static void replays_after_a_workspace_grew_stay_ordered(void **state) {
    (void)state;
    tsr_device *dev = th_dev;
    if (!th_try_override(dev, "gemm", "KERNEL=1 MWI=4 VW=4 NVW=1 KU=2 WGM=8 WGN=8 KWG=8 PAD=0 DB=0 SPLIT=8")) return;
    enum { M = 32, N = 32, K = 4096, BM = 96, ROUNDS = 12 };
    cl_int err;
    cl_command_queue q[2];
    for (int i = 0; i < 2; ++i) {
        q[i] = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev), 0, &err);
        assert_int_equal(err, CL_SUCCESS);
    }
    float *host = malloc(sizeof(float) * BM * K), *want[2], *got = malloc(sizeof(float) * M * N);
    assert_non_null(host), assert_non_null(got);
    cl_mem a[2], b[2], c[2];
    const tsr_matmul_desc d = {.m = M, .n = N, .k = K, .alpha = 1.0f};
    tsr_graph *g[2];
    for (int i = 0; i < 2; ++i) {
        th_fill_uniform(host, (size_t)M * K, -1.0f, 1.0f);
        a[i] = th_buffer_from(dev, host, (size_t)M * K);
        th_fill_uniform(host, (size_t)K * N, -1.0f, 1.0f);
        b[i] = th_buffer_from(dev, host, (size_t)K * N);
        c[i] = th_buffer(dev, (size_t)M * N);
        want[i] = malloc(sizeof(float) * M * N);
        assert_non_null(want[i]);
        TH_ASSERT_OK(tsr_matmul(dev, &d, a[i], b[i], c[i], NULL, NULL));
        th_read(dev, c[i], want[i], (size_t)M * N);
        const tsr_graph_desc gd = {.name = "split"};
        TH_ASSERT_OK(tsr_graph_begin(dev, &gd));
        TH_ASSERT_OK(tsr_matmul(dev, &d, a[i], b[i], c[i], NULL, NULL));
        TH_ASSERT_OK(tsr_graph_end(dev, &g[i]));
    }
    { /* a larger split GEMM (3 x 1 tiles): its partials outgrow the buffer the graphs hold */
        const tsr_matmul_desc big = {.m = BM, .n = N, .k = K, .alpha = 1.0f};
        th_fill_uniform(host, (size_t)BM * K, -1.0f, 1.0f);
        cl_mem x = th_buffer_from(dev, host, (size_t)BM * K), y = th_buffer(dev, (size_t)BM * N);
        TH_ASSERT_OK(tsr_matmul(dev, &big, x, b[0], y, NULL, NULL));
        clFinish(tsr_device_queue(dev));
        clReleaseMemObject(x), clReleaseMemObject(y);
    }
    int differ = 0;
    for (int r = 0; r < ROUNDS; ++r) {
        th_poison(got, (size_t)M * N);
        for (int i = 0; i < 2; ++i) TH_ASSERT_OK(tsr_upload(dev, c[i], got, (size_t)M * N));
        for (int i = 0; i < 2; ++i) TH_ASSERT_OK(tsr_graph_launch(g[i], q[i], NULL));
        for (int i = 0; i < 2; ++i) clFlush(q[i]);
        for (int i = 0; i < 2; ++i) {
            clFinish(q[i]);
            th_read(dev, c[i], got, (size_t)M * N);
            differ += memcmp(got, want[i], sizeof(float) * M * N) != 0;
        }
    }
    print_message("# %d of %d replays differ from the recorded call\n", differ, 2 * ROUNDS);
    assert_int_equal(differ, 0);
    for (int i = 0; i < 2; ++i) {
        tsr_graph_destroy(g[i]);
        clReleaseMemObject(a[i]), clReleaseMemObject(b[i]), clReleaseMemObject(c[i]);
        clReleaseCommandQueue(q[i]);
        free(want[i]);
    }
    free(host), free(got);
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
}

int main(void) {
    th_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recorded_chain_replays_new_inputs),
        cmocka_unit_test(two_threads_replay_one_graph),
        cmocka_unit_test(an_override_invalidates_a_graph),
        cmocka_unit_test(kept_weights_invalidate_a_graph),
        cmocka_unit_test(a_closed_device_refuses_replays),
        cmocka_unit_test(host_reading_ops_and_misuse_are_refused),
        cmocka_unit_test(convolutions_replay_new_inputs),
        cmocka_unit_test(replays_after_a_workspace_grew_stay_ordered),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
