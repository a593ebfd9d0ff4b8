/* conv2d's kept weights (tsr_buffer_set_constant, runtime/derived.c): the Winograd forms'
 * transformed weights and the 16-bit weights' widened copy, made once per content of a weight
 * buffer marked constant. Every check compares y with a double-precision direct convolution of the
 * weights the buffer holds at that time (tsr_conv2d_reference, 16-bit inputs rounded as stored),
 * within max(1e-5, tsr_dtype_error_bound(y's type, C R S)), after the weights change through each
 * write path: an op's output (tsr_convert, also into a sub-buffer of the marked buffer), a graph
 * replay writing them, and the caller's own writes (clEnqueueWriteBuffer, clEnqueueCopyBuffer, a
 * map) followed by tsr_buffer_changed. Also: the kept copy really is used (a write tessera is not
 * told of leaves it in place, as documented), unmarking, a released weight buffer (its data goes,
 * a new buffer at the same address is never served the old data), a closed device, the memory cap,
 * two threads on one device (shared and own weights, own queues), a recording graph, and the
 * argument checks. Forms: F(2x2) and F(4x4) Winograd, STAGE 2 and STAGE 5 (packed weights) on
 * CPUs with vectors, STAGE 0 (tsr_convert's widening) and im2col + GEMM everywhere; weights in
 * fp32, f16 and bf16. */
#include "harness.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define dev th_dev

static bool cpu_forms_here(void) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    return info->type == TSR_DEVICE_CPU && (info->preferred_vector_width[4] > 1 || info->native_vector_width[4] > 1);
}

/* The forms: whether each derives from fp32 weights, and whether it needs the CPU forms. */
typedef struct form {
    const char *config;
    bool derives_f32, cpu_only;
    const char *gemm; /* the GEMM's configuration (NULL: as tuned) */
} form;
#define GEMM_TILED_CFG "MWI=4 VW=4 NVW=2 KU=2 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKB=1 NT=2 KC=0"
static const form forms[] = {
    {"ALGO=2 STAGE=6 WGN=1", true, true, NULL},
    {"ALGO=2 STAGE=7 WGN=1", true, true, NULL},
    {"ALGO=2 MWI=4 VW=8 STAGE=2 WGN=4", false, true, NULL},
    {"ALGO=2 MWI=1 VW=8 STAGE=5 WGM=3 WGN=4", true, true, NULL}, /* packs its weights (and widens 16-bit ones) */
    {"ALGO=2 MWI=4 VW=4 STAGE=0 WGM=1 WGN=1 KWG=8", false, false, NULL},
    /* im2col + GEMM: the GEMM reads 16-bit weights' kept fp32 copy (session 22) */
    {"ALGO=1", false, false, GEMM_TILED_CFG " PACKA=0"},
    /* ...and with A packed, fp32 weights' packed panels are kept (session 32); a 16-bit A is the
     * kept fp32 copy, itself not marked, so packed per call */
    {"ALGO=1", true, true, GEMM_TILED_CFG " PACKA=1"},
    /* the fused F(2x2): U kept as STAGE 6's (last: the cases above name forms by index) */
    {"ALGO=2 STAGE=9 MWI=4 WGM=1 WGN=1", true, true, NULL},
};
#define NFORMS (sizeof forms / sizeof forms[0])

static bool form_here(const form *f) { return !f->cpu_only || cpu_forms_here(); }

/* The form's configurations set on `d` (NULL: both back to tuned); false where the device refuses
 * the form's GEMM configuration (th_try_override: a GPU's legality rules), said. */
static bool form_set(tsr_device *d, const form *f) {
    TH_ASSERT_OK(tsr_config_override(d, "conv2d", f ? f->config : NULL));
    if (f && f->gemm) return th_try_override(d, "gemm", f->gemm);
    TH_ASSERT_OK(tsr_config_override(d, "gemm", NULL));
    return true;
}
static bool form_derives(const form *f, tsr_dtype w) { return f->derives_f32 || w != TSR_F32; }

/* One layer: x, w (at an offset, in a buffer with room before and after), y, host copies. */
typedef struct layer {
    tsr_conv2d_desc d;
    tsr_dtype t; /* x, w and y's type */
    size_t nx, nw, ny, w_off, w_room;
    float *x, *w;
    double *ref;
    float *y;
    cl_mem dx, dw, dy;
} layer;

static void layer_make(layer *L, tsr_dtype t, size_t w_off) {
    memset(L, 0, sizeof *L);
    L->t = t;
    L->d = (tsr_conv2d_desc){.batch = 1, .in_channels = 6, .in_height = 12, .in_width = 11, .out_channels = 10,
                             .kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1,
                             .dilation_h = 1, .dilation_w = 1, .groups = 1, .x_type = t, .w_type = t, .y_type = t,
                             .w_offset = w_off};
    L->nx = 6 * 12 * 11, L->nw = 10 * 6 * 9, L->ny = 10 * 12 * 11, L->w_off = w_off, L->w_room = w_off + L->nw + 7;
    L->x = malloc(L->nx * sizeof(float));
    L->w = calloc(L->w_room, sizeof(float));
    L->y = malloc(L->ny * sizeof(float));
    L->ref = malloc(L->ny * sizeof(double));
    th_fill_uniform_typed(t, L->x, L->nx, -1, 1);
    th_fill_uniform_typed(t, L->w, L->w_room, -1, 1);
    L->dx = th_buffer_from_typed(dev, t, L->x, L->nx);
    L->dw = th_buffer_from_typed(dev, t, L->w, L->w_room);
    L->dy = th_buffer_typed(dev, t, L->ny);
}

static void layer_free(layer *L) {
    free(L->x), free(L->w), free(L->y), free(L->ref);
    clReleaseMemObject(L->dx);
    if (L->dw) clReleaseMemObject(L->dw);
    clReleaseMemObject(L->dy);
}

/* New host weights (rounded to the type), not yet on the device. */
static void new_weights(layer *L) { th_fill_uniform_typed(L->t, L->w + L->w_off, L->nw, -1, 1); }

/* The relative error of y of L as run on `queue` (NULL: the device's; y poisoned first) against
 * the reference of host weights `w`; no cmocka asserts (the threads call it). */
static tsr_status run_error(layer *L, cl_mem w, cl_command_queue queue, const float *host_w, double *error) {
    *error = INFINITY;
    th_poison(L->y, L->ny);
    tsr_status st = tsr_upload_typed(dev, L->dy, L->t, L->y, L->ny);
    cl_event ev = NULL;
    if (st == TSR_SUCCESS) st = tsr_conv2d(dev, &L->d, L->dx, w, L->dy, queue, &ev);
    if (st != TSR_SUCCESS) return st;
    clWaitForEvents(1, &ev);
    clReleaseEvent(ev);
    if ((st = tsr_download_typed(dev, L->dy, L->t, L->y, L->ny)) != TSR_SUCCESS) return st;
    tsr_conv2d_desc plain = L->d;
    plain.x_type = plain.w_type = plain.y_type = TSR_F32;
    plain.w_offset = 0;
    tsr_conv2d_reference(&plain, L->x, host_w, NULL, L->ref);
    tsr_error_sum sum = {0, 0};
    for (size_t i = 0; i < L->ny; ++i) tsr_error_add(&sum, L->y[i], L->ref[i]);
    *error = tsr_error_value(&sum);
    return TSR_SUCCESS;
}

static double error_of(layer *L, cl_mem w, cl_command_queue queue, const float *host_w) {
    double e;
    TH_ASSERT_OK(run_error(L, w, queue, host_w, &e));
    return e;
}

static double bound(const layer *L) {
    double b = tsr_dtype_error_bound(L->t, 6.0 * 9);
    return b > 1e-5 ? b : 1e-5;
}

/* y follows the host weights now. */
static void expect_follows(layer *L, const char *form_name, const char *what) {
    double e = error_of(L, L->dw, NULL, L->w + L->w_off);
    if (!(e <= bound(L)))
        fail_msg("%s, w %s, after %s: relative error %.3e > %.3e", form_name, tsr_dtype_str(L->t), what, e, bound(L));
}

/* Writes of the host weights into dw, the device's queue. */
static void write_raw(layer *L) {
    size_t es = tsr_dtype_size(L->t);
    uint16_t *packed = malloc(L->nw * 2);
    const void *src = L->w + L->w_off;
    if (L->t != TSR_F32) {
        TH_ASSERT_OK(tsr_convert_host(TSR_F32, L->w + L->w_off, L->t, packed, L->nw));
        src = packed;
    }
    assert_int_equal(clEnqueueWriteBuffer(tsr_device_queue(dev), L->dw, CL_TRUE, L->w_off * es, L->nw * es, src, 0,
                                          NULL, NULL),
                     CL_SUCCESS);
    free(packed);
}

/* A device buffer of the host weights in fp32. */
static cl_mem weights_f32(layer *L) { return th_buffer_from(dev, L->w + L->w_off, L->nw); }

/* Every write path, each followed by a check, for one form and type. */
static void write_paths(const form *f, tsr_dtype t) {
    if (!form_set(dev, f)) return;
    layer L;
    layer_make(&L, t, 5);
    const bool derives = form_derives(f, t);
    expect_follows(&L, f->config, "the first upload, unmarked");
    TH_ASSERT_OK(tsr_buffer_set_constant(L.dw, true));
    TH_ASSERT_OK(tsr_buffer_set_constant(L.dw, true)); /* twice: no change */
    expect_follows(&L, f->config, "marking");
    assert_int_equal(tsr_derived_count_of(L.dw, NULL), derives ? 1 : 0);
    expect_follows(&L, f->config, "a second call");
    assert_int_equal(tsr_derived_count_of(L.dw, NULL), derives ? 1 : 0);

    /* a write tessera is not told of: the kept copy stays in use (the documented contract), so
     * the weights derived once really serve later calls; tsr_buffer_changed then brings them in */
    float *old = malloc(L.w_room * sizeof(float));
    memcpy(old, L.w, L.w_room * sizeof(float));
    new_weights(&L);
    write_raw(&L);
    if (derives) {
        double e = error_of(&L, L.dw, NULL, old + L.w_off);
        if (!(e <= bound(&L))) fail_msg("%s: the kept weights were not used (%.3e from the old weights)", f->config, e);
    }
    TH_ASSERT_OK(tsr_buffer_changed(L.dw));
    expect_follows(&L, f->config, "clEnqueueWriteBuffer + tsr_buffer_changed");
    free(old);

    /* an op's output: tsr_convert from fp32 weights into w */
    new_weights(&L);
    cl_mem src = weights_f32(&L);
    TH_ASSERT_OK(tsr_convert(dev, TSR_F32, src, 0, t, L.dw, L.w_off, L.nw, NULL, NULL));
    expect_follows(&L, f->config, "tsr_convert into w");
    assert_int_equal(tsr_derived_count_of(L.dw, NULL), derives ? 1 : 0); /* the stale copy went */

    /* an op's output into a sub-buffer of the marked buffer (the root's origin) */
    new_weights(&L);
    clReleaseMemObject(src);
    src = weights_f32(&L);
    size_t es = tsr_dtype_size(t);
    cl_buffer_region region = {0, (L.w_off + L.nw) * es};
    cl_int err;
    cl_mem sub = clCreateSubBuffer(L.dw, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    assert_int_equal(err, CL_SUCCESS);
    TH_ASSERT_OK(tsr_convert(dev, TSR_F32, src, 0, t, sub, L.w_off, L.nw, NULL, NULL));
    expect_follows(&L, f->config, "tsr_convert into a sub-buffer of w");
    /* the conv reading w through the sub-buffer shares the root's kept data */
    double e = error_of(&L, sub, NULL, L.w + L.w_off);
    if (!(e <= bound(&L))) fail_msg("%s: through a sub-buffer: %.3e", f->config, e);
    assert_int_equal(tsr_derived_count_of(L.dw, NULL), derives ? 1 : 0);

    /* a copy, then tsr_buffer_changed on the sub-buffer (it stands for its parent) */
    new_weights(&L);
    cl_mem staged = th_buffer_from_typed(dev, t, L.w + L.w_off, L.nw);
    assert_int_equal(clEnqueueCopyBuffer(tsr_device_queue(dev), staged, L.dw, 0, L.w_off * es, L.nw * es, 0, NULL, NULL),
                     CL_SUCCESS);
    TH_ASSERT_OK(tsr_buffer_changed(sub));
    expect_follows(&L, f->config, "clEnqueueCopyBuffer + tsr_buffer_changed(sub-buffer)");
    clReleaseMemObject(staged);
    clReleaseMemObject(sub);

    /* a map */
    new_weights(&L);
    void *mapped = clEnqueueMapBuffer(tsr_device_queue(dev), L.dw, CL_TRUE, CL_MAP_WRITE, L.w_off * es, L.nw * es, 0,
                                      NULL, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    TH_ASSERT_OK(tsr_convert_host(TSR_F32, L.w + L.w_off, t, mapped, L.nw));
    cl_event unmapped = NULL;
    assert_int_equal(clEnqueueUnmapMemObject(tsr_device_queue(dev), L.dw, mapped, 0, NULL, &unmapped), CL_SUCCESS);
    assert_int_equal(clWaitForEvents(1, &unmapped), CL_SUCCESS);
    clReleaseEvent(unmapped);
    TH_ASSERT_OK(tsr_buffer_changed(L.dw));
    expect_follows(&L, f->config, "a map + tsr_buffer_changed");

    /* tessera's own upload helper (tsr_upload_typed: the fixtures', the tests'): a write it makes */
    new_weights(&L);
    TH_ASSERT_OK(tsr_upload_typed(dev, L.dw, t, L.w, L.w_room));
    expect_follows(&L, f->config, "tsr_upload_typed into w");
    assert_int_equal(tsr_derived_count_of(L.dw, NULL), derives ? 1 : 0);

    /* a graph replay that writes w: recorded once, replayed after its source changed */
    TH_ASSERT_OK(tsr_upload(dev, src, L.w + L.w_off, L.nw)); /* the weights w holds now */
    tsr_graph *g = NULL;
    TH_ASSERT_OK(tsr_graph_begin(dev, NULL));
    TH_ASSERT_OK(tsr_convert(dev, TSR_F32, src, 0, t, L.dw, L.w_off, L.nw, NULL, NULL));
    TH_ASSERT_OK(tsr_graph_end(dev, &g));
    expect_follows(&L, f->config, "recording a graph that writes w");
    new_weights(&L);
    TH_ASSERT_OK(tsr_upload(dev, src, L.w + L.w_off, L.nw)); /* src is not marked: nothing to tell */
    TH_ASSERT_OK(tsr_graph_launch(g, NULL, NULL));
    expect_follows(&L, f->config, "a graph replay writing w");
    tsr_graph_destroy(g);
    clReleaseMemObject(src);

    /* unmarked: the kept data goes, and every write counts again */
    TH_ASSERT_OK(tsr_buffer_set_constant(L.dw, false));
    TH_ASSERT_OK(tsr_buffer_set_constant(L.dw, false));
    assert_int_equal(tsr_derived_count_of(L.dw, NULL), 0);
    new_weights(&L);
    write_raw(&L);
    expect_follows(&L, f->config, "unmarking, then clEnqueueWriteBuffer alone");
    layer_free(&L);
    form_set(dev, NULL);
}

static const tsr_dtype types[] = {TSR_F32, TSR_F16, TSR_BF16};

static void every_write_path(void **state) {
    (void)state;
    for (size_t i = 0; i < NFORMS; ++i) {
        if (!form_here(&forms[i])) {
            printf("# %s: CPU form, passed over\n", forms[i].config);
            continue;
        }
        for (size_t j = 0; j < 3; ++j) {
            if (th_small_mode() && j != (i % 2 ? 2 : 1)) continue; /* one 16-bit type per form */
            write_paths(&forms[i], types[j]);
        }
    }
}

/* Whether OpenCL destroyed a buffer: a destructor callback registered before the buffer is
 * marked runs after tessera's (callbacks run in reverse order of registration). An implementation
 * may keep a released buffer alive a while (rusticl, while a cached kernel holds it as an
 * argument); its kept data goes when it is destroyed, and until then its address cannot be
 * reused. */
static void CL_CALLBACK note_destroyed(cl_mem mem, void *flag) {
    (void)mem;
    __atomic_store_n((int *)flag, 1, __ATOMIC_SEQ_CST);
}

static int *watch_destruction(cl_mem mem) {
    int *flag = calloc(1, sizeof *flag);
    assert_non_null(flag);
    assert_int_equal(clSetMemObjectDestructorCallback(mem, note_destroyed, flag), CL_SUCCESS);
    return flag;
}

static bool destroyed(int *flag) { return __atomic_load_n(flag, __ATOMIC_SEQ_CST) != 0; }

/* A released weight buffer: its kept data goes with it, and a new buffer (at the same address, as
 * allocators often hand out) with other weights is never served it. */
static void released_buffer(void **state) {
    (void)state;
    const form *f = cpu_forms_here() ? &forms[0] : &forms[4];
    form_set(dev, f);
    int gone = 0;
    for (int round = 0; round < 4; ++round) {
        layer L;
        layer_make(&L, TSR_BF16, 0);
        int *flag = watch_destruction(L.dw);
        TH_ASSERT_OK(tsr_buffer_set_constant(L.dw, true));
        expect_follows(&L, f->config, round ? "a new buffer after a released one" : "the first buffer");
        assert_int_equal(tsr_derived_count_of(L.dw, NULL), 1);
        size_t before = 0, marked_before = 0;
        tsr_derived_stats(NULL, &before, NULL, &marked_before);
        clReleaseMemObject(L.dw); /* still marked */
        L.dw = NULL;
        clFinish(tsr_device_queue(dev));
        if (destroyed(flag)) { /* its watch and data went with it */
            size_t n = 0, marked = 0;
            tsr_derived_stats(NULL, &n, NULL, &marked);
            assert_int_equal(n, before - 1);
            assert_int_equal(marked, marked_before - 1);
            ++gone;
        }
        layer_free(&L);
        if (destroyed(flag)) free(flag); /* else the callback still to come writes it: left to it */
    }
    if (!gone) printf("# this implementation kept the released buffers alive for now: their data goes with them\n");
    form_set(dev, NULL);
}

/* A device closed with kept data (freed with it: the sanitizer build sees no leak), its weight
 * buffer released after the close (the destructor callback finds no device). */
static void closed_device(void **state) {
    (void)state;
    tsr_device *other = th_open_device();
    const form *f = cpu_forms_here() ? &forms[1] : &forms[4];
    form_set(other, f);
    tsr_device *keep = dev;
    dev = other;
    layer L;
    layer_make(&L, TSR_F16, 3);
    int *flag = watch_destruction(L.dw);
    TH_ASSERT_OK(tsr_buffer_set_constant(L.dw, true));
    expect_follows(&L, f->config, "a second device");
    assert_int_equal(tsr_derived_count_of(L.dw, NULL), 1);
    dev = keep;
    tsr_device_close(other);
    size_t n = 0;
    tsr_derived_stats(other, &n, NULL, NULL); /* (only compared, never dereferenced) */
    assert_int_equal(n, 0);
    assert_int_equal(tsr_derived_count_of(L.dw, NULL), 0); /* still marked, nothing kept */
    size_t marked_before = 0;
    tsr_derived_stats(NULL, NULL, NULL, &marked_before);
    layer_free(&L); /* the marked buffer goes after its device */
    if (destroyed(flag)) {
        size_t marked = 0;
        tsr_derived_stats(NULL, NULL, NULL, &marked);
        assert_int_equal(marked, marked_before - 1);
        free(flag);
    }
}

/* The cap: the least recently used kept data goes first, and every result stays right. */
static void memory_cap(void **state) {
    (void)state;
    const form *f = cpu_forms_here() ? &forms[0] : &forms[4];
    form_set(dev, f);
    layer L[3];
    for (int i = 0; i < 3; ++i) {
        layer_make(&L[i], TSR_F16, (size_t)i);
        TH_ASSERT_OK(tsr_buffer_set_constant(L[i].dw, true));
    }
    tsr_derived_test_cap(0);
    size_t one = 0;
    expect_follows(&L[0], f->config, "the first layer");
    assert_int_equal(tsr_derived_count_of(L[0].dw, &one), 1);
    assert_true(one > 0);
    tsr_derived_test_cap(one + one / 2); /* room for one */
    for (int round = 0; round < 2; ++round)
        for (int k = 1; k <= 3; ++k) { /* L[1] first: a miss, so the cap is applied at once */
            const int i = k % 3;
            expect_follows(&L[i], f->config, "a capped cache");
            size_t bytes = 0, kept = 0; /* (the device's: other tests' data, least recently used, went first) */
            tsr_derived_stats(dev, NULL, &bytes, NULL);
            for (int j = 0; j < 3; ++j) kept += tsr_derived_count_of(L[j].dw, NULL);
            assert_int_equal(kept, 1);
            assert_int_equal(tsr_derived_count_of(L[i].dw, NULL), 1);
            assert_true(bytes <= one + one / 2);
        }
    tsr_derived_test_cap(0);
    for (int i = 0; i < 3; ++i) expect_follows(&L[i], f->config, "the default cap again");
    for (int i = 0; i < 3; ++i) assert_int_equal(tsr_derived_count_of(L[i].dw, NULL), 1);
    for (int i = 0; i < 3; ++i) layer_free(&L[i]);
    form_set(dev, NULL);
}

/* Two threads on one device, each on its own queue: one shared marked weight buffer (its data
 * made by whichever thread comes first, read by the other after it) and one of each thread's own,
 * which it rewrites with tsr_convert every other round. */
typedef struct worker {
    layer *shared, own;
    const char *config;
    uint64_t state; /* its weights' generator */
    int failures;
    char message[256];
} worker;

static void *work(void *arg) {
    worker *wk = arg;
    cl_int err;
    cl_command_queue q = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev), 0, &err);
    if (err != CL_SUCCESS) {
        wk->failures++;
        snprintf(wk->message, sizeof wk->message, "clCreateCommandQueue: %d", (int)err);
        return NULL;
    }
    layer *S = wk->shared, *L = &wk->own;
    /* (the shared layer's y is written by both threads: each thread checks its own y) */
    float *ys = malloc(S->ny * sizeof(float));
    double *refs = malloc(S->ny * sizeof(double));
    cl_mem yown = th_buffer_typed(dev, S->t, S->ny);
    tsr_conv2d_desc plain = S->d;
    plain.x_type = plain.w_type = plain.y_type = TSR_F32;
    plain.w_offset = 0;
    tsr_conv2d_reference(&plain, S->x, S->w + S->w_off, NULL, refs);
    for (int round = 0; round < 6 && !wk->failures; ++round) {
        cl_event ev = NULL;
        tsr_status st = tsr_conv2d(dev, &S->d, S->dx, S->dw, yown, q, &ev);
        if (st == TSR_SUCCESS) {
            clWaitForEvents(1, &ev);
            clReleaseEvent(ev);
            st = tsr_download_typed(dev, yown, S->t, ys, S->ny);
        }
        tsr_error_sum sum = {0, 0};
        for (size_t i = 0; i < S->ny; ++i) tsr_error_add(&sum, ys[i], refs[i]);
        if (st != TSR_SUCCESS || !(tsr_error_value(&sum) <= bound(S))) {
            wk->failures++;
            snprintf(wk->message, sizeof wk->message, "shared weights, round %d: %s, error %.3e", round,
                     tsr_status_str(st), tsr_error_value(&sum));
            break;
        }
        if (round % 2) {
            /* new weights without the harness's generator (not the threads'): a small LCG, rounded */
            for (size_t i = 0; i < L->nw; ++i) {
                wk->state = wk->state * 6364136223846793005ull + 1442695040888963407ull;
                L->w[L->w_off + i] = (float)((double)(wk->state >> 40) / (double)(1ull << 24) * 2 - 1);
            }
            uint16_t *h = malloc(L->nw * 2);
            if (L->t != TSR_F32) {
                tsr_convert_host(TSR_F32, L->w + L->w_off, L->t, h, L->nw);
                tsr_convert_host(L->t, h, TSR_F32, L->w + L->w_off, L->nw);
            }
            free(h);
            cl_mem src = th_buffer_from(dev, L->w + L->w_off, L->nw);
            st = tsr_convert(dev, TSR_F32, src, 0, L->t, L->dw, L->w_off, L->nw, q, NULL);
            clFinish(q);
            clReleaseMemObject(src);
        }
        double e = INFINITY;
        if (st == TSR_SUCCESS) st = run_error(L, L->dw, q, L->w + L->w_off, &e);
        if (!(e <= bound(L))) {
            wk->failures++;
            snprintf(wk->message, sizeof wk->message, "own weights, round %d: %s, error %.3e", round,
                     tsr_status_str(st), e);
        }
    }
    clReleaseMemObject(yown);
    free(ys), free(refs);
    clReleaseCommandQueue(q);
    return NULL;
}

static void two_threads(void **state) {
    (void)state;
    if (th_oclgrind_mode()) { /* its simulator runs one kernel at a time: two threads' launches abort it */
        printf("# under Oclgrind: passed over (one kernel at a time)\n");
        return;
    }
    tsr_derived_test_cap(0);
    for (size_t fi = 0; fi < NFORMS; ++fi) {
        const form *f = &forms[fi];
        if (!form_here(f) || (th_small_mode() && fi != 4 && fi != 0)) continue;
        if (!form_set(dev, f)) continue;
        layer shared;
        layer_make(&shared, TSR_BF16, 2);
        TH_ASSERT_OK(tsr_buffer_set_constant(shared.dw, true));
        worker wk[2];
        memset(wk, 0, sizeof wk);
        for (int i = 0; i < 2; ++i) {
            wk[i].shared = &shared;
            wk[i].config = f->config;
            wk[i].state = th_rand() | (uint64_t)th_rand() << 32;
            /* (cmocka's asserts run on this thread: the layers are made here) */
            layer_make(&wk[i].own, i ? TSR_F16 : TSR_BF16, (size_t)i);
            TH_ASSERT_OK(tsr_buffer_set_constant(wk[i].own.dw, true));
        }
        pthread_t th[2];
        for (int i = 0; i < 2; ++i) assert_int_equal(pthread_create(&th[i], NULL, work, &wk[i]), 0);
        for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
        for (int i = 0; i < 2; ++i)
            if (wk[i].failures) fail_msg("%s, thread %d: %s", f->config, i, wk[i].message);
        assert_int_equal(tsr_derived_count_of(shared.dw, NULL), 1);
        for (int i = 0; i < 2; ++i) assert_int_equal(tsr_derived_count_of(wk[i].own.dw, NULL), 1);
        for (int i = 0; i < 2; ++i) layer_free(&wk[i].own);
        layer_free(&shared);
    }
    form_set(dev, NULL);
}

/* A call recorded into a graph derives in the recording, so each replay reads the weights as they
 * are then (a write tessera was told of, here). */
static void recorded_call(void **state) {
    (void)state;
    for (size_t fi = 0; fi < NFORMS; ++fi) {
        const form *f = &forms[fi];
        if (!form_here(f) || (th_small_mode() && fi != 4)) continue;
        if (!form_set(dev, f)) continue;
        layer L;
        layer_make(&L, TSR_F16, 1);
        TH_ASSERT_OK(tsr_buffer_set_constant(L.dw, true));
        expect_follows(&L, f->config, "a call before the recording");
        tsr_graph *g = NULL;
        TH_ASSERT_OK(tsr_graph_begin(dev, NULL));
        TH_ASSERT_OK(tsr_conv2d(dev, &L.d, L.dx, L.dw, L.dy, NULL, NULL));
        TH_ASSERT_OK(tsr_graph_end(dev, &g));
        for (int round = 0; round < 2; ++round) {
            new_weights(&L);
            write_raw(&L);
            TH_ASSERT_OK(tsr_buffer_changed(L.dw));
            th_poison(L.y, L.ny);
            TH_ASSERT_OK(tsr_graph_launch(g, NULL, NULL));
            th_read_typed(dev, L.t, L.dy, L.y, L.ny);
            tsr_conv2d_desc plain = L.d;
            plain.x_type = plain.w_type = plain.y_type = TSR_F32;
            plain.w_offset = 0;
            tsr_conv2d_reference(&plain, L.x, L.w + L.w_off, NULL, L.ref);
            tsr_error_sum sum = {0, 0};
            for (size_t i = 0; i < L.ny; ++i) tsr_error_add(&sum, L.y[i], L.ref[i]);
            if (!(tsr_error_value(&sum) <= bound(&L)))
                fail_msg("%s: replay %d: error %.3e", f->config, round, tsr_error_value(&sum));
        }
        expect_follows(&L, f->config, "a direct call after the replays");
        tsr_graph_destroy(g);
        layer_free(&L);
    }
    form_set(dev, NULL);
}

static void invalid_arguments(void **state) {
    (void)state;
    TH_ASSERT_STATUS(tsr_buffer_set_constant(NULL, true), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_buffer_changed(NULL), TSR_ERR_INVALID_ARG);
    cl_mem root = th_buffer(dev, 4 * th_sub_buffer_align(dev));
    cl_mem sub = th_sub_buffer(root, th_sub_buffer_align(dev), th_sub_buffer_align(dev));
    TH_ASSERT_STATUS(tsr_buffer_set_constant(sub, true), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "sub-buffer");
    TH_ASSERT_OK(tsr_buffer_changed(sub)); /* harmless on unmarked buffers */
    TH_ASSERT_OK(tsr_buffer_set_constant(root, false));
    clReleaseMemObject(sub);
    clReleaseMemObject(root);
    /* an image is no buffer: refused, never marked (where the device has images) */
    cl_image_format fmt = {CL_RGBA, CL_FLOAT};
    cl_image_desc desc = {.image_type = CL_MEM_OBJECT_IMAGE2D, .image_width = 4, .image_height = 4};
    cl_int err;
    cl_mem image = clCreateImage(tsr_device_context(dev), CL_MEM_READ_ONLY, &fmt, &desc, NULL, &err);
    if (err == CL_SUCCESS) {
        TH_ASSERT_STATUS(tsr_buffer_set_constant(image, true), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "not a buffer");
        TH_ASSERT_STATUS(tsr_buffer_changed(image), TSR_ERR_INVALID_ARG);
        clReleaseMemObject(image);
    } else {
        printf("# no images on this device (%d): the image check passed over\n", err);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(invalid_arguments), cmocka_unit_test(every_write_path), cmocka_unit_test(released_buffer),
        cmocka_unit_test(closed_device),     cmocka_unit_test(memory_cap),       cmocka_unit_test(two_threads),
        cmocka_unit_test(recorded_call),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
