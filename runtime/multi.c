/* One GEMM, strided-batched GEMM or attention split across a group of devices.
 *
 * Devices of a group may live on different platforms, so operands are host arrays. A call's
 * work is a row of units (rows of C, batch entries, or (batch, head) pairs); each device gets a
 * contiguous share in proportion to its rate and works through it in tiles on its own thread,
 * with two tiles in flight: the next tile's upload overlaps the current tile's compute, and its
 * result comes back while the next one runs. A device that runs out of work takes tiles from the
 * back of the share that would finish last, when it can finish one before that device would.
 * Every tile is one ordinary single-device call (tsr_sgemm, tsr_sgemm_strided_batched, tsr_attention) on
 * copies of that tile's operands, so its result is bitwise what that device gives for the tile
 * alone. Results are read straight into the caller's output (no staging copy); every argument is checked before
 * anything runs, so only a device failing mid-call can leave an output partly written: the error then names that
 * device and the units whose results reached the output (tiles whose reads completed), and tsr_group_last_stats lists
 * those tiles. A device of weight 0 gets no units. */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 2 /* tiles in flight per device */
#define ROLES 3 /* per-slot buffers: A (or packed Q, K, V), B, C (or O) */
/* A share is cut into about this many tiles on a device with its own memory: its transfers
 * overlap compute from the second tile on (CPU devices: see run_job). */
#define TILES_PER_DEVICE 6
#define MAX_RATE_KEYS 64

#define RETURN_IF_FAILED(expr)                                                                                         \
    do {                                                                                                               \
        tsr_status failed_ = (expr);                                                                                   \
        if (failed_ != TSR_SUCCESS) return failed_;                                                                    \
    } while (0)

typedef struct member {
    tsr_device *device;
    cl_command_queue upload, compute, download;
    cl_mem buf[SLOTS][ROLES];
    size_t buf_bytes[SLOTS][ROLES];
    cl_mem shared[2]; /* operands every tile reads (GEMM's B; a batch's A or B with stride 0) */
    size_t shared_bytes[2];
} member;

typedef struct learned_rates {
    char key[64];
    double *gflops; /* per device; 0 where not measured */
} learned_rates;

struct tsr_device_group {
    size_t count;
    member *members;
    double *weights; /* given by tsr_group_set_weights, or NULL */
    learned_rates learned[MAX_RATE_KEYS];
    size_t nlearned, next_evict;
    pthread_mutex_t call_lock; /* one call at a time */
    /* what the last call did */
    tsr_group_tile *tiles;
    unsigned char *tile_state; /* per tile: a tile_state (in flight, written, maybe partly written) */
    size_t ntiles, tiles_cap;
    bool tiles_lost; /* out of host memory while recording them */
    tsr_group_device_stats *stats;
    const char *weights_from;
    double seconds;
};

/* ------------------------------------------------------------------ jobs */

/* What became of a tile's results: still in flight, in the output in full (its reads completed),
 * or possibly part of them (a read failed, or a failure came after some of its reads were enqueued). */
enum tile_state { TILE_IN_FLIGHT, TILE_WRITTEN, TILE_MAYBE };

typedef struct job job;
struct job {
    const char *op;
    const char *unit_word, *units_word, *output; /* what a unit is, of which output: "row", "rows", "C" */
    size_t units, chunk, boundary; /* tiles never cross a multiple of boundary (0: none) */
    size_t align;                  /* tile sizes are multiples of this where the share allows */
    double flops_per_unit;
    /* per-slot buffer bytes for a tile of `count` units */
    tsr_status (*sizes)(const job *j, size_t count, size_t bytes[ROLES]);
    /* buffers for the operands shared by every tile, made before the call starts on every device that
     * may take work, so that running out of memory writes nothing (NULL: none) */
    tsr_status (*reserve)(const job *j, member *m);
    /* operands shared by every tile, uploaded once per device (NULL: none) */
    tsr_status (*prepare)(const job *j, member *m);
    /* upload, compute and download one tile; *done: the download's event; *writing: set before the
     * first read into the output is enqueued (a failure after it may have written part of the tile) */
    tsr_status (*enqueue)(const job *j, member *m, int slot, size_t first, size_t count, cl_event *done,
                          bool *writing);
    const void *params;
};

/* GEMM in row-major terms (column-major calls are transposed into this on entry). */
typedef struct gemm_params {
    bool trans_a, trans_b;
    size_t m, n, k;
    float alpha, beta;
    const float *a, *b;
    float *c;
    size_t lda, ldb, ldc;
    size_t a_stride, b_stride, c_stride, batch;
} gemm_params;

typedef struct attention_params {
    tsr_attention_desc desc; /* strides made explicit */
    const float *q, *k, *v;
    float *o;
} attention_params;

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Rows and row length of a stored (not transposed) operand. */
static void stored_shape(bool trans, size_t rows, size_t cols, size_t *srows, size_t *scols) {
    *srows = trans ? cols : rows;
    *scols = trans ? rows : cols;
}

/* Floats a stored matrix spans: (rows - 1) * ld + cols. */
static size_t matrix_span(size_t rows, size_t cols, size_t ld) { return rows && cols ? (rows - 1) * ld + cols : 0; }

/* Copy `rows` rows of `row_floats` floats between the host (rows host_ld apart) and a buffer (rows
 * buf_ld apart from float buf_offset): one linear copy when both sides are contiguous (drivers
 * move those fastest), else a rectangle. Reads wait for `wait` and return their event in *done. */
static tsr_status copy_rows(cl_command_queue q, bool to_device, cl_mem buf, size_t buf_offset, float *host, size_t rows,
                            size_t row_floats, size_t host_ld, size_t buf_ld, cl_event wait, cl_event *done) {
    tsr_status status = TSR_SUCCESS;
    cl_uint nwait = wait ? 1 : 0;
    const cl_event *wait_list = wait ? &wait : NULL;
    if (!rows || !row_floats) { /* nothing to move; still hand back an event that follows `wait` */
        if (done) TSR_CL_CHECK(clEnqueueMarkerWithWaitList(q, nwait, wait_list, done), out);
        return TSR_SUCCESS;
    }
    if ((host_ld == row_floats && buf_ld == row_floats) || rows == 1) {
        size_t bytes = rows * row_floats * sizeof(float), offset = buf_offset * sizeof(float);
        if (to_device)
            TSR_CL_CHECK(clEnqueueWriteBuffer(q, buf, CL_FALSE, offset, bytes, host, nwait, wait_list, done), out);
        else
            TSR_CL_CHECK(clEnqueueReadBuffer(q, buf, CL_FALSE, offset, bytes, host, nwait, wait_list, done), out);
        return TSR_SUCCESS;
    }
    const size_t buf_origin[3] = {buf_offset * sizeof(float), 0, 0}, host_origin[3] = {0, 0, 0};
    const size_t region[3] = {row_floats * sizeof(float), rows, 1};
    if (to_device)
        TSR_CL_CHECK(clEnqueueWriteBufferRect(q, buf, CL_FALSE, buf_origin, host_origin, region, buf_ld * sizeof(float),
                                              0, host_ld * sizeof(float), 0, host, nwait, wait_list, done),
                     out);
    else
        TSR_CL_CHECK(clEnqueueReadBufferRect(q, buf, CL_FALSE, buf_origin, host_origin, region, buf_ld * sizeof(float),
                                             0, host_ld * sizeof(float), 0, host, nwait, wait_list, done),
                     out);
out:
    return status;
}

static tsr_status write_rect(cl_command_queue q, cl_mem buf, size_t buf_offset_floats, const float *host, size_t rows,
                             size_t row_floats, size_t host_ld, size_t buf_ld) {
    return copy_rows(q, true, buf, buf_offset_floats, (float *)host, rows, row_floats, host_ld, buf_ld, NULL, NULL);
}

/* ---- GEMM: a unit is one row of C ---- */

static tsr_status gemm_sizes(const job *j, size_t count, size_t bytes[ROLES]) {
    const gemm_params *p = j->params;
    bytes[0] = (p->k ? count * p->k : 1) * sizeof(float);
    bytes[1] = sizeof(float);
    bytes[2] = count * p->n * sizeof(float);
    return TSR_SUCCESS;
}

static tsr_status ensure_buffer(member *m, cl_mem *buf, size_t *have, size_t bytes);

static tsr_status gemm_reserve(const job *j, member *m) {
    const gemm_params *p = j->params;
    return ensure_buffer(m, &m->shared[0], &m->shared_bytes[0], (p->k ? p->k * p->n : 1) * sizeof(float));
}

static tsr_status gemm_prepare(const job *j, member *m) {
    const gemm_params *p = j->params;
    if (!p->k) return TSR_SUCCESS;
    size_t rows, cols;
    stored_shape(p->trans_b, p->k, p->n, &rows, &cols);
    return write_rect(m->upload, m->shared[0], 0, p->b, rows, cols, p->ldb, cols);
}

static tsr_status gemm_enqueue(const job *j, member *m, int slot, size_t first, size_t count, cl_event *done,
                               bool *writing) {
    const gemm_params *p = j->params;
    tsr_status status = TSR_SUCCESS;
    cl_event uploaded = NULL, computed = NULL;
    cl_mem a = m->buf[slot][0], c = m->buf[slot][2];
    /* the tile's A is packed: a stored row holds k floats, or `count` when A is stored k x m */
    size_t a_ld = p->trans_a ? count : (p->k ? p->k : 1), b_ld = p->trans_b ? (p->k ? p->k : 1) : p->n;
    if (p->k) {
        if (p->trans_a) /* the tile is columns [first, first + count) of every row of A */
            status = write_rect(m->upload, a, 0, p->a + first, p->k, count, p->lda, count);
        else
            status = write_rect(m->upload, a, 0, p->a + first * p->lda, count, p->k, p->lda, p->k);
        if (status != TSR_SUCCESS) goto out;
    }
    if (p->beta != 0.0f && (status = write_rect(m->upload, c, 0, p->c + first * p->ldc, count, p->n, p->ldc, p->n)))
        goto out;
    TSR_CL_CHECK(clEnqueueMarkerWithWaitList(m->upload, 0, NULL, &uploaded), out);
    TSR_CL_CHECK(clEnqueueBarrierWithWaitList(m->compute, 1, &uploaded, NULL), out);
    TSR_CHECK(tsr_sgemm(m->device, TSR_ROW_MAJOR, p->trans_a ? TSR_TRANS : TSR_NO_TRANS,
                        p->trans_b ? TSR_TRANS : TSR_NO_TRANS, count, p->n, p->k, p->alpha, a, 0, a_ld, m->shared[0], 0,
                        b_ld, p->beta, c, 0, p->n, m->compute, &computed),
              out);
    *writing = true;
    TSR_CHECK(copy_rows(m->download, false, c, 0, p->c + first * p->ldc, count, p->n, p->ldc, p->n, computed, done),
              out);
out:
    if (uploaded) clReleaseEvent(uploaded);
    if (computed) clReleaseEvent(computed);
    return status;
}

/* ---- strided-batched GEMM: a unit is one batch entry ---- */

static void batched_spans(const gemm_params *p, size_t *a_span, size_t *b_span) {
    size_t rows, cols;
    stored_shape(p->trans_a, p->m, p->k, &rows, &cols);
    *a_span = matrix_span(rows, cols, p->lda);
    stored_shape(p->trans_b, p->k, p->n, &rows, &cols);
    *b_span = matrix_span(rows, cols, p->ldb);
}

static size_t batch_floats(size_t count, size_t stride, size_t span) {
    return span ? (stride ? (count - 1) * stride + span : span) : 1;
}

static tsr_status batched_sizes(const job *j, size_t count, size_t bytes[ROLES]) {
    const gemm_params *p = j->params;
    size_t a_span, b_span;
    batched_spans(p, &a_span, &b_span);
    bytes[0] = (p->a_stride ? batch_floats(count, p->a_stride, a_span) : 1) * sizeof(float);
    bytes[1] = (p->b_stride ? batch_floats(count, p->b_stride, b_span) : 1) * sizeof(float);
    bytes[2] = count * p->m * p->n * sizeof(float);
    return TSR_SUCCESS;
}

static tsr_status batched_reserve(const job *j, member *m) {
    const gemm_params *p = j->params;
    size_t a_span, b_span;
    batched_spans(p, &a_span, &b_span);
    tsr_status status =
        ensure_buffer(m, &m->shared[0], &m->shared_bytes[0], (!p->a_stride && a_span ? a_span : 1) * sizeof(float));
    if (status == TSR_SUCCESS)
        status =
            ensure_buffer(m, &m->shared[1], &m->shared_bytes[1], (!p->b_stride && b_span ? b_span : 1) * sizeof(float));
    return status;
}

static tsr_status batched_prepare(const job *j, member *m) {
    const gemm_params *p = j->params;
    size_t a_span, b_span;
    tsr_status status = TSR_SUCCESS;
    batched_spans(p, &a_span, &b_span);
    if (!p->a_stride && a_span)
        TSR_CL_CHECK(
            clEnqueueWriteBuffer(m->upload, m->shared[0], CL_FALSE, 0, a_span * sizeof(float), p->a, 0, NULL, NULL),
            out);
    if (!p->b_stride && b_span)
        TSR_CL_CHECK(
            clEnqueueWriteBuffer(m->upload, m->shared[1], CL_FALSE, 0, b_span * sizeof(float), p->b, 0, NULL, NULL),
            out);
out:
    return status;
}

static tsr_status batched_enqueue(const job *j, member *m, int slot, size_t first, size_t count, cl_event *done,
                                  bool *writing) {
    const gemm_params *p = j->params;
    tsr_status status = TSR_SUCCESS;
    cl_event uploaded = NULL, computed = NULL;
    size_t a_span, b_span;
    batched_spans(p, &a_span, &b_span);
    cl_mem a = p->a_stride ? m->buf[slot][0] : m->shared[0];
    cl_mem b = p->b_stride ? m->buf[slot][1] : m->shared[1];
    cl_mem c = m->buf[slot][2];
    if (p->a_stride && a_span)
        TSR_CL_CHECK(clEnqueueWriteBuffer(m->upload, a, CL_FALSE, 0,
                                          batch_floats(count, p->a_stride, a_span) * sizeof(float),
                                          p->a + first * p->a_stride, 0, NULL, NULL),
                     out);
    if (p->b_stride && b_span)
        TSR_CL_CHECK(clEnqueueWriteBuffer(m->upload, b, CL_FALSE, 0,
                                          batch_floats(count, p->b_stride, b_span) * sizeof(float),
                                          p->b + first * p->b_stride, 0, NULL, NULL),
                     out);
    if (p->beta != 0.0f)
        for (size_t e = 0; e < count; e++)
            TSR_CHECK(
                write_rect(m->upload, c, e * p->m * p->n, p->c + (first + e) * p->c_stride, p->m, p->n, p->ldc, p->n),
                out);
    TSR_CL_CHECK(clEnqueueMarkerWithWaitList(m->upload, 0, NULL, &uploaded), out);
    TSR_CL_CHECK(clEnqueueBarrierWithWaitList(m->compute, 1, &uploaded, NULL), out);
    TSR_CHECK(tsr_sgemm_strided_batched(m->device, TSR_ROW_MAJOR, p->trans_a ? TSR_TRANS : TSR_NO_TRANS,
                                        p->trans_b ? TSR_TRANS : TSR_NO_TRANS, p->m, p->n, p->k, p->alpha, a, 0,
                                        p->lda, p->a_stride, b, 0, p->ldb, p->b_stride,
                                        p->beta, c, 0, p->n, p->m * p->n, count, m->compute, &computed),
              out);
    TSR_CL_CHECK(clEnqueueBarrierWithWaitList(m->download, 1, &computed, NULL), out);
    *writing = true;
    for (size_t e = 0; e < count; e++)
        TSR_CHECK(copy_rows(m->download, false, c, e * p->m * p->n, p->c + (first + e) * p->c_stride, p->m, p->n,
                            p->ldc, p->n, NULL, NULL),
                  out);
    TSR_CL_CHECK(clEnqueueMarkerWithWaitList(m->download, 0, NULL, done), out);
out:
    if (uploaded) clReleaseEvent(uploaded);
    if (computed) clReleaseEvent(computed);
    return status;
}

/* ---- attention: a unit is one (batch, head) pair, b * heads + h; tiles stay inside one batch entry ---- */

static tsr_status attention_sizes(const job *j, size_t count, size_t bytes[ROLES]) {
    const tsr_attention_desc *d = &((const attention_params *)j->params)->desc;
    bytes[0] = count * (d->q_len + 2 * d->kv_len) * d->head_dim * sizeof(float);
    bytes[1] = sizeof(float);
    bytes[2] = count * d->q_len * d->head_dim * sizeof(float);
    return TSR_SUCCESS;
}

static tsr_status attention_enqueue(const job *j, member *m, int slot, size_t first, size_t count, cl_event *done,
                                    bool *writing) {
    const attention_params *p = j->params;
    const tsr_attention_desc *d = &p->desc;
    tsr_status status = TSR_SUCCESS;
    cl_event uploaded = NULL, computed = NULL;
    size_t b = first / d->heads, h0 = first % d->heads, dim = d->head_dim;
    size_t k_base = count * d->q_len * dim, v_base = k_base + count * d->kv_len * dim;
    cl_mem in = m->buf[slot][0], o = m->buf[slot][2];
    for (size_t i = 0; i < count; i++) { /* pack the tile's heads as [count, rows, head_dim] */
        size_t h = h0 + i;
        TSR_CHECK(write_rect(m->upload, in, i * d->q_len * dim,
                             p->q + d->q_offset + b * d->q_strides[0] + h * d->q_strides[1], d->q_len, dim,
                             d->q_strides[2], dim),
                  out);
        TSR_CHECK(write_rect(m->upload, in, k_base + i * d->kv_len * dim,
                             p->k + d->k_offset + b * d->k_strides[0] + h * d->k_strides[1], d->kv_len, dim,
                             d->k_strides[2], dim),
                  out);
        TSR_CHECK(write_rect(m->upload, in, v_base + i * d->kv_len * dim,
                             p->v + d->v_offset + b * d->v_strides[0] + h * d->v_strides[1], d->kv_len, dim,
                             d->v_strides[2], dim),
                  out);
    }
    TSR_CL_CHECK(clEnqueueMarkerWithWaitList(m->upload, 0, NULL, &uploaded), out);
    TSR_CL_CHECK(clEnqueueBarrierWithWaitList(m->compute, 1, &uploaded, NULL), out);
    tsr_attention_desc tile = {.batch = 1,
                               .heads = count,
                               .q_len = d->q_len,
                               .kv_len = d->kv_len,
                               .head_dim = dim,
                               .k_offset = k_base,
                               .v_offset = v_base,
                               .scale = d->scale,
                               .causal = d->causal,
                               .kv_lengths = d->kv_lengths ? d->kv_lengths + b : NULL};
    TSR_CHECK(tsr_attention(m->device, &tile, in, in, in, o, m->compute, &computed), out);
    TSR_CL_CHECK(clEnqueueBarrierWithWaitList(m->download, 1, &computed, NULL), out);
    *writing = true;
    for (size_t i = 0; i < count; i++)
        TSR_CHECK(copy_rows(m->download, false, o, i * d->q_len * dim,
                            p->o + d->o_offset + b * d->o_strides[0] + (h0 + i) * d->o_strides[1], d->q_len, dim,
                            d->o_strides[2], dim, NULL, NULL),
                  out);
    TSR_CL_CHECK(clEnqueueMarkerWithWaitList(m->download, 0, NULL, done), out);
out:
    if (uploaded) clReleaseEvent(uploaded);
    if (computed) clReleaseEvent(computed);
    return status;
}

/* ------------------------------------------------------------------ scheduling */

typedef struct schedule {
    pthread_mutex_t lock;
    size_t count, boundary, align;
    size_t *chunk;      /* each device's tile size */
    size_t *lo, *hi;    /* each device's remaining share [lo, hi) */
    const double *rate; /* relative rates, for deciding whether taking work pays */
    bool stop;
} schedule;

/* The next tile for device d: the front of its own share, else (when d is about to idle:
 * may_steal) the back of the share that would finish last: the part of it that lets both finish
 * together (at most d's tile size), if d can compute that before its owner would reach it. Only
 * an idle device steals: one still busy would take work from a device whose thread has not yet
 * claimed its first tile. */
static bool schedule_next(schedule *s, size_t d, bool may_steal, size_t *first, size_t *count) {
    bool got = false;
    pthread_mutex_lock(&s->lock);
    if (s->stop || s->rate[d] <= 0) goto out;
    if (s->lo[d] < s->hi[d]) {
        size_t f = s->lo[d], c = min_size(s->chunk[d], s->hi[d] - f);
        if (s->boundary) c = min_size(c, s->boundary - f % s->boundary);
        s->lo[d] += c;
        *first = f, *count = c, got = true;
        goto out;
    }
    if (!may_steal) goto out;
    size_t victim = s->count;
    double longest = 0;
    for (size_t v = 0; v < s->count; v++) {
        double left = s->rate[v] > 0 ? (double)(s->hi[v] - s->lo[v]) / s->rate[v] : 0;
        if (left > longest) longest = left, victim = v;
    }
    if (victim == s->count) goto out;
    /* take the part that makes both finish together: x / rate[d] = (left - x) / rate[victim] */
    size_t left = s->hi[victim] - s->lo[victim];
    size_t take = (size_t)((double)left * s->rate[d] / (s->rate[d] + s->rate[victim]));
    if (take > s->chunk[d]) take = s->chunk[d];
    if (s->align > 1 && take > s->align) take = take / s->align * s->align;
    if (!take) goto out;
    size_t end = s->hi[victim], f = end - take;
    if (s->boundary) {
        size_t start_of_entry = (end - 1) / s->boundary * s->boundary;
        if (f < start_of_entry) f = start_of_entry;
    }
    if ((double)(end - f) / s->rate[d] >= longest) goto out; /* its owner finishes sooner */
    s->hi[victim] = f;
    *first = f, *count = end - f, got = true;
out:
    pthread_mutex_unlock(&s->lock);
    return got;
}

static void schedule_stop(schedule *s) {
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_mutex_unlock(&s->lock);
}

typedef struct worker {
    tsr_device_group *group;
    size_t index;
    const job *job;
    schedule *schedule;
    tsr_status status;
    char error[1024];
    size_t units, tiles;
    double busy_s;
    bool compiled;      /* it built or loaded a program during the call */
    size_t fail_at_tile; /* $TSR_TEST_MULTI_FAIL=DEVICE[:TILE] names this device: its tile TILE (counted from 0)
                          * fails before it is enqueued, the failure path's test; SIZE_MAX: none */
} worker;

static tsr_status ensure_buffer(member *m, cl_mem *buf, size_t *have, size_t bytes) {
    if (*buf && *have >= bytes) return TSR_SUCCESS;
    if (*buf) clReleaseMemObject(*buf);
    *buf = NULL, *have = 0;
    cl_int err;
    *buf = clCreateBuffer(tsr_device_context(m->device), CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        *buf = NULL;
        return tsr_fail_cl(err, "clCreateBuffer (a group tile's buffer)", __FILE__, __LINE__);
    }
    *have = bytes;
    return TSR_SUCCESS;
}

/* Record a tile of the call in state `state`; its index, or SIZE_MAX where host memory ran out. */
static size_t record_tile(worker *w, size_t first, size_t count, enum tile_state state) {
    tsr_device_group *g = w->group;
    size_t index = SIZE_MAX;
    pthread_mutex_lock(&w->schedule->lock);
    if (g->ntiles == g->tiles_cap) {
        size_t cap = g->tiles_cap ? 2 * g->tiles_cap : 64;
        tsr_group_tile *grown = realloc(g->tiles, cap * sizeof *grown);
        if (grown) g->tiles = grown;
        unsigned char *states = grown ? realloc(g->tile_state, cap) : NULL;
        if (states) g->tile_state = states, g->tiles_cap = cap;
    }
    if (g->ntiles < g->tiles_cap) {
        index = g->ntiles++;
        g->tiles[index] = (tsr_group_tile){w->index, first, count};
        g->tile_state[index] = (unsigned char)state;
    } else {
        g->tiles_lost = true;
    }
    pthread_mutex_unlock(&w->schedule->lock);
    return index;
}

static void set_tile_state(worker *w, size_t index, enum tile_state state) {
    if (index == SIZE_MAX) return;
    pthread_mutex_lock(&w->schedule->lock);
    w->group->tile_state[index] = (unsigned char)state;
    pthread_mutex_unlock(&w->schedule->lock);
}

/* Wait for a tile's results: in the output in full, or not known to be. */
static cl_int wait_tile(worker *w, cl_event *done, size_t *tile) {
    cl_int err = clWaitForEvents(1, done);
    clReleaseEvent(*done);
    *done = NULL;
    set_tile_state(w, *tile, err == CL_SUCCESS ? TILE_WRITTEN : TILE_MAYBE);
    *tile = SIZE_MAX;
    return err;
}

/* Programs the device built or loaded so far: a call that compiled is no measure of its rate. */
static uint64_t programs_made(tsr_device *dev) {
    pthread_mutex_lock(&dev->lock);
    uint64_t made = dev->builds + dev->disk_hits + dev->binary_loads;
    pthread_mutex_unlock(&dev->lock);
    return made;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    member *m = &w->group->members[w->index];
    const job *j = w->job;
    cl_event done[SLOTS] = {NULL};
    size_t tile_of[SLOTS]; /* the recorded tile whose results done[slot] brings */
    for (int s = 0; s < SLOTS; s++)
        tile_of[s] = SIZE_MAX;
    tsr_status status = TSR_SUCCESS;
    double start = tsr_now_s();
    bool began = false;
    uint64_t programs_before = programs_made(m->device);
    for (size_t i = 0;; i++) {
        int slot = (int)(i % SLOTS);
        if (done[slot]) { /* the slot's previous tile is home: its buffers are free */
            cl_int err = wait_tile(w, &done[slot], &tile_of[slot]);
            if (err != CL_SUCCESS) {
                status = tsr_fail_cl(err, "clWaitForEvents (a tile's result)", __FILE__, __LINE__);
                break;
            }
        }
        size_t first, count;
        cl_event *other = &done[(slot + 1) % SLOTS];
        if (!schedule_next(w->schedule, w->index, *other == NULL, &first, &count)) {
            if (!*other) break;
            /* own share done, a tile still running: wait for it, then look for work to take */
            cl_int err = wait_tile(w, other, &tile_of[(slot + 1) % SLOTS]);
            if (err != CL_SUCCESS) {
                status = tsr_fail_cl(err, "clWaitForEvents (a tile's result)", __FILE__, __LINE__);
                break;
            }
            if (!schedule_next(w->schedule, w->index, true, &first, &count)) break;
        }
        if (!began) {
            began = true, start = tsr_now_s();
            if (j->prepare && (status = j->prepare(j, m)) != TSR_SUCCESS) break;
        }
        size_t bytes[ROLES];
        if ((status = j->sizes(j, count, bytes)) != TSR_SUCCESS) break;
        for (int r = 0; r < ROLES && status == TSR_SUCCESS; r++)
            status = ensure_buffer(m, &m->buf[slot][r], &m->buf_bytes[slot][r], bytes[r]);
        if (status == TSR_SUCCESS && w->tiles == w->fail_at_tile)
            status = tsr_fail(TSR_ERR_OPENCL, "failure injected for tests (TSR_TEST_MULTI_FAIL=%zu:%zu)", w->index,
                              w->fail_at_tile);
        bool writing = false;
        if (status == TSR_SUCCESS) status = j->enqueue(j, m, slot, first, count, &done[slot], &writing);
        if (status != TSR_SUCCESS) {
            if (writing) record_tile(w, first, count, TILE_MAYBE); /* its reads that were enqueued still run */
            break;
        }
        clFlush(m->upload), clFlush(m->compute), clFlush(m->download);
        tile_of[slot] = record_tile(w, first, count, TILE_IN_FLIGHT);
        w->units += count, w->tiles++;
    }
    for (int s = 0; s < SLOTS; s++) {
        if (!done[s]) continue;
        cl_int err = wait_tile(w, &done[s], &tile_of[s]);
        if (err != CL_SUCCESS && status == TSR_SUCCESS)
            status = tsr_fail_cl(err, "clWaitForEvents (a tile's result)", __FILE__, __LINE__);
    }
    /* nothing may still read or write the buffers when the call returns */
    clFinish(m->upload), clFinish(m->compute), clFinish(m->download);
    w->busy_s = began ? tsr_now_s() - start : 0;
    w->compiled = programs_made(m->device) != programs_before;
    if (status != TSR_SUCCESS) {
        w->status = status;
        snprintf(w->error, sizeof w->error, "%s", tsr_last_error());
        schedule_stop(w->schedule);
    }
    return NULL;
}

/* ------------------------------------------------------------------ weights */

static learned_rates *learned_for(tsr_device_group *g, const char *key, bool create) {
    for (size_t i = 0; i < g->nlearned; i++)
        if (!strcmp(g->learned[i].key, key)) return &g->learned[i];
    if (!create) return NULL;
    learned_rates *slot;
    if (g->nlearned < MAX_RATE_KEYS) {
        slot = &g->learned[g->nlearned++];
        slot->gflops = calloc(g->count, sizeof(double));
        if (!slot->gflops) {
            g->nlearned--;
            return NULL;
        }
    } else { /* full: reuse the oldest */
        slot = &g->learned[g->next_evict];
        g->next_evict = (g->next_evict + 1) % MAX_RATE_KEYS;
        memset(slot->gflops, 0, g->count * sizeof(double));
    }
    snprintf(slot->key, sizeof slot->key, "%s", key);
    return slot;
}

/* Weights for a call, best source first: the caller's, rates this group measured on earlier
 * calls of the problem class, the tuning database's rates for the class, else equal shares (the
 * call then measures the rates, and taking work from slower shares evens out the first split). */
static void choose_weights(tsr_device_group *g, const char *key, const double *tuned, double *weights) {
    if (g->weights) {
        memcpy(weights, g->weights, g->count * sizeof(double));
        g->weights_from = "given";
        return;
    }
    learned_rates *l = learned_for(g, key, false);
    bool all = l != NULL;
    for (size_t d = 0; all && d < g->count; d++)
        all = l->gflops[d] > 0;
    if (all) {
        memcpy(weights, l->gflops, g->count * sizeof(double));
        g->weights_from = "measured";
        return;
    }
    all = tuned != NULL;
    for (size_t d = 0; all && d < g->count; d++)
        all = tuned[d] > 0;
    if (all) {
        memcpy(weights, tuned, g->count * sizeof(double));
        g->weights_from = "tuning database";
        return;
    }
    for (size_t d = 0; d < g->count; d++)
        weights[d] = 1;
    g->weights_from = "equal";
}

/* ------------------------------------------------------------------ running a job */

/* $TSR_TEST_MULTI_FAIL, the failure path's test hook: DEVICE or DEVICE:TILE (decimal, DEVICE below
 * the group's size) fails that device's tile TILE (0 when not given) before it is enqueued. Anything
 * else is refused, so a mistyped hook never passes for device 0. */
static tsr_status test_failure_hook(const char *fn, size_t count, size_t *device, size_t *tile) {
    const char *text = getenv("TSR_TEST_MULTI_FAIL");
    if (!text) return TSR_SUCCESS;
    /* decimal digits only (strtoull alone would take a sign or spaces), each number within range */
    const char *p = text;
    unsigned long long values[2] = {0, 0};
    int parts = 0;
    bool ok = true;
    while (ok && parts < 2) {
        char *end = NULL;
        errno = 0;
        ok = *p >= '0' && *p <= '9';
        if (ok) values[parts++] = strtoull(p, &end, 10), ok = errno == 0, p = end;
        if (ok && *p != ':') break;
        if (ok) p++;
    }
    if (!ok || *p != '\0' || values[0] >= count || values[1] >= SIZE_MAX)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: TSR_TEST_MULTI_FAIL='%.40s' is not DEVICE[:TILE] with DEVICE below %zu",
                        fn, text, count);
    *device = (size_t)values[0], *tile = (size_t)values[1];
    return TSR_SUCCESS;
}

static int by_first(const void *a, const void *b) {
    const size_t x = ((const size_t *)a)[0], y = ((const size_t *)b)[0];
    return x < y ? -1 : x > y;
}

/* The units of tiles in `state` as merged ranges "0-63, 128-191" into out; false when there are none. */
static bool describe_ranges(const tsr_device_group *g, enum tile_state state, char *out, size_t size) {
    size_t count = 0;
    size_t(*r)[2] = malloc((g->ntiles ? g->ntiles : 1) * sizeof *r);
    if (!r) {
        snprintf(out, size, "(out of host memory listing them)");
        return true;
    }
    for (size_t t = 0; t < g->ntiles; t++)
        if (g->tile_state[t] == state) r[count][0] = g->tiles[t].first, r[count++][1] = g->tiles[t].first + g->tiles[t].count;
    qsort(r, count, sizeof *r, by_first);
    size_t used = 0, ranges = 0;
    out[0] = '\0';
    for (size_t i = 0; i < count;) {
        size_t lo = r[i][0], hi = r[i][1];
        for (i++; i < count && r[i][0] <= hi; i++)
            hi = r[i][1] > hi ? r[i][1] : hi;
        if (used + 48 < size)
            used += (size_t)snprintf(out + used, size - used, "%s%zu-%zu", ranges ? ", " : "", lo, hi - 1);
        else if (used + 4 < size && !strstr(out, "..."))
            used += (size_t)snprintf(out + used, size - used, ", ...");
        ranges++;
    }
    free(r);
    return count > 0;
}

/* What a failed call did to the output, exactly: the units whose results reached it in full (the
 * tiles tsr_group_last_stats then lists), those a failed read may have written in part, and that
 * every other unit is as it was. */
static void describe_writes(const tsr_device_group *g, const job *j, char *out, size_t size) {
    if (g->tiles_lost) {
        snprintf(out, size, "the record of its tiles was lost (out of host memory): any of %s's %s may be written",
                 j->output, j->units_word);
        return;
    }
    char written[400], maybe[400];
    bool any_written = describe_ranges(g, TILE_WRITTEN, written, sizeof written);
    bool any_maybe = describe_ranges(g, TILE_MAYBE, maybe, sizeof maybe);
    if (!any_written && !any_maybe) {
        snprintf(out, size, "%s was not written (none of its %s)", j->output, j->units_word);
        return;
    }
    snprintf(out, size, "%s of %s written: %s%s%s%s; every other %s of %s is as it was", j->units_word, j->output,
             any_written ? written : "none", any_maybe ? "; " : "", any_maybe ? "may be partly written: " : "",
             any_maybe ? maybe : "", j->unit_word, j->output);
}


static tsr_status run_job(tsr_device_group *g, job *j, const char *rate_key, const double *tuned) {
    size_t n = g->count;
    tsr_status status = TSR_SUCCESS;
    double t0 = tsr_now_s();
    g->ntiles = 0;
    g->tiles_lost = false;
    memset(g->stats, 0, n * sizeof *g->stats);
    g->seconds = 0;
    if (!j->units) return TSR_SUCCESS;
    double *weights = calloc(n, sizeof(double));
    size_t *lo = calloc(n, sizeof(size_t)), *hi = calloc(n, sizeof(size_t)), *chunk = calloc(n, sizeof(size_t));
    worker *workers = calloc(n, sizeof(worker));
    pthread_t *threads = calloc(n, sizeof(pthread_t));
    if (!weights || !lo || !hi || !chunk || !workers || !threads) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "%s: out of host memory for a %zu-device split", j->op, n);
        goto out;
    }
    choose_weights(g, rate_key, tuned, weights);
    double total = 0;
    size_t active = 0;
    for (size_t d = 0; d < n; d++) {
        if (!(weights[d] > 0) || !isfinite(weights[d])) weights[d] = 0;
        total += weights[d];
        active += weights[d] > 0;
    }
    if (!active) {
        status = tsr_fail(TSR_ERR_INVALID_ARG, "%s: every device of the group has weight 0", j->op);
        goto out;
    }
    /* contiguous shares in proportion to the weights; tiles cut each share into a few pieces. A
     * device of weight 0 gets an empty share (and never takes work: schedule_next), so the last
     * device of positive weight ends at the last unit: rounding never leaves units without an owner. */
    size_t last = 0;
    for (size_t d = 0; d < n; d++)
        if (weights[d] > 0) last = d;
    double cumulative = 0;
    size_t edge = 0;
    for (size_t d = 0; d < n; d++) {
        lo[d] = edge;
        if (weights[d] > 0) {
            cumulative += weights[d];
            size_t h = d == last ? j->units : (size_t)llround((double)j->units * (cumulative / total));
            if (j->align > 1 && d != last) /* share edges on the alignment: GEMM runs whole tiles */
                h = (h + j->align / 2) / j->align * j->align;
            edge = h < edge ? edge : h > j->units ? j->units : h;
        }
        hi[d] = edge;
        g->stats[d].weight = weights[d] / total;
    }
    for (size_t d = 0; d < n; d++) {
        if (!(weights[d] > 0)) { /* takes no work: nothing to size or reserve */
            chunk[d] = 1;
            continue;
        }
        bool cpu = tsr_device_get_info(g->members[d].device)->type == TSR_DEVICE_CPU;
        /* on a CPU device a tile costs a pass over the shared operand (GEMM packs B per call) and
         * transfers are copies within the same memory: one tile, or two while the rates are
         * unknown (equal weights), so that stealing can even out the second half */
        size_t tiles = !cpu ? TILES_PER_DEVICE : strcmp(g->weights_from, "equal") ? 1 : 2, share = hi[d] - lo[d];
        size_t c = (share + tiles - 1) / tiles;
        if (j->align > 1 && c > j->align) c = (c + j->align - 1) / j->align * j->align;
        chunk[d] = c > j->chunk ? c : j->chunk;
        /* a tile's buffers must fit the device's largest allocation: halve until they do */
        uint64_t max_alloc = tsr_device_get_info(g->members[d].device)->max_alloc_bytes;
        for (;;) {
            size_t bytes[ROLES];
            if ((status = j->sizes(j, chunk[d], bytes)) != TSR_SUCCESS) goto out;
            bool fits = !max_alloc || (bytes[0] <= max_alloc && bytes[1] <= max_alloc && bytes[2] <= max_alloc);
            if (fits) break;
            if (chunk[d] == 1) {
                status =
                    tsr_fail(TSR_ERR_OUT_OF_MEMORY,
                             "%s: device %zu (%s): one unit's tile needs more than its largest allocation (%llu bytes)",
                             j->op, d, tsr_device_get_info(g->members[d].device)->name, (unsigned long long)max_alloc);
                goto out;
            }
            chunk[d] = (chunk[d] + 1) / 2;
        }
        if (j->reserve && (status = j->reserve(j, &g->members[d])) != TSR_SUCCESS) {
            char why[512]; /* tsr_fail rewrites the buffer tsr_last_error points into */
            snprintf(why, sizeof why, "%s", tsr_last_error());
            status = tsr_fail(status, "%s: device %zu (%s): %s", j->op, d,
                              tsr_device_get_info(g->members[d].device)->name, why);
            goto out;
        }
    }
    schedule s = {
        .count = n, .chunk = chunk, .boundary = j->boundary, .align = j->align, .lo = lo, .hi = hi, .rate = weights};
    pthread_mutex_init(&s.lock, NULL);
    size_t started = 0, fail_device = SIZE_MAX, fail_tile = SIZE_MAX;
    if ((status = test_failure_hook(j->op, n, &fail_device, &fail_tile)) != TSR_SUCCESS) {
        pthread_mutex_destroy(&s.lock);
        goto out;
    }
    for (size_t d = 0; d < n; d++) {
        workers[d] = (worker){.group = g, .index = d, .job = j, .schedule = &s, .fail_at_tile = SIZE_MAX};
        if (d == fail_device) workers[d].fail_at_tile = fail_tile;
        if (pthread_create(&threads[d], NULL, worker_main, &workers[d]) != 0) {
            status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "%s: could not start a thread for device %zu", j->op, d);
            schedule_stop(&s);
            break;
        }
        started++;
    }
    for (size_t d = 0; d < started; d++)
        pthread_join(threads[d], NULL);
    pthread_mutex_destroy(&s.lock);
    for (size_t d = 0; d < started && status == TSR_SUCCESS; d++)
        if (workers[d].status != TSR_SUCCESS) {
            char writes[1024];
            describe_writes(g, j, writes, sizeof writes);
            status = tsr_fail(workers[d].status, "%s: device %zu (%s): %s; %s", j->op, d,
                              tsr_device_get_info(g->members[d].device)->name, workers[d].error, writes);
        }
    size_t done = 0;
    for (size_t d = 0; d < started; d++)
        done += workers[d].units;
    if (status == TSR_SUCCESS && done != j->units) { /* cannot happen: every share has an owner that drains it */
        char writes[1024];
        describe_writes(g, j, writes, sizeof writes);
        status = tsr_fail(TSR_ERR_OPENCL, "%s: %zu of %zu %s computed; %s", j->op, done, j->units, j->units_word,
                          writes);
    }
    if (status == TSR_SUCCESS && g->tiles_lost)
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY,
                          "%s: out of host memory recording the tiles (%s was computed in full; the call's statistics "
                          "are lost)",
                          j->op, j->output);
    if (status != TSR_SUCCESS) goto out;
    learned_rates *l = learned_for(g, rate_key, true);
    for (size_t d = 0; d < n; d++) {
        tsr_group_device_stats *st = &g->stats[d];
        st->units = workers[d].units;
        st->tiles = workers[d].tiles;
        st->busy_s = workers[d].busy_s;
        st->gflops = st->busy_s > 0 ? (double)st->units * j->flops_per_unit / st->busy_s * 1e-9 : 0;
        if (l && st->gflops > 0 && !workers[d].compiled) /* smoothed: one noisy call moves it halfway */
            l->gflops[d] = l->gflops[d] > 0 ? 0.5 * (l->gflops[d] + st->gflops) : st->gflops;
    }
out:
    g->seconds = tsr_now_s() - t0;
    if (status != TSR_SUCCESS) { /* a failed call reports the tiles it wrote in full, and nothing else */
        memset(g->stats, 0, n * sizeof *g->stats);
        g->seconds = 0;
        size_t kept = 0;
        for (size_t t = 0; t < g->ntiles && !g->tiles_lost; t++)
            if (g->tile_state[t] == TILE_WRITTEN) {
                g->tiles[kept] = g->tiles[t];
                g->tile_state[kept++] = TILE_WRITTEN;
                g->stats[g->tiles[t].device].units += g->tiles[t].count;
                g->stats[g->tiles[t].device].tiles++;
            }
        g->ntiles = kept;
    }
    free(weights), free(lo), free(hi), free(chunk), free(workers), free(threads);
    return status;
}

/* ------------------------------------------------------------------ the group */

static void member_release(member *m) {
    for (int s = 0; s < SLOTS; s++)
        for (int r = 0; r < ROLES; r++)
            if (m->buf[s][r]) clReleaseMemObject(m->buf[s][r]);
    for (int i = 0; i < 2; i++)
        if (m->shared[i]) clReleaseMemObject(m->shared[i]);
    if (m->upload) clReleaseCommandQueue(m->upload);
    if (m->compute) clReleaseCommandQueue(m->compute);
    if (m->download) clReleaseCommandQueue(m->download);
}

/* Members that compete for one processor split a call worse than their rates alone promise: say
 * so once, at creation (the call still works; weights can give the work to one of them). */
static void warn_about_sharing(tsr_device *const *devices, size_t count) {
    for (size_t a = 0; a < count; a++)
        for (size_t b = a + 1; b < count; b++)
            if (tsr_device_id(devices[a]) == tsr_device_id(devices[b])) {
                tsr_warn("device group: members %zu and %zu are the same device (%s): they take turns on it, so a "
                         "split helps only where one's transfers can overlap the other's compute",
                         a, b, tsr_device_get_info(devices[a])->name);
                return;
            }
    unsigned long cpu_units = 0, cpus = 0;
    for (size_t d = 0; d < count; d++) {
        const tsr_device_info *info = tsr_device_get_info(devices[d]);
        if (info->type == TSR_DEVICE_CPU) cpu_units += info->compute_units, cpus++;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 1 && online > 0 && cpu_units > (unsigned long)online)
        tsr_warn("device group: its %lu CPU devices have %lu compute units between them on a host with %ld "
                 "processors: they compete for them, and a split can be slower than the fastest alone (weights "
                 "can give it all the work)",
                 cpus, cpu_units, online);
}

tsr_status tsr_group_create(tsr_device *const *devices, size_t count, tsr_device_group **group) {
    tsr_clear_diagnostics();
    if (!group) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_create: group is NULL");
    *group = NULL;
    if (!devices || !count) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_create: no devices");
    for (size_t d = 0; d < count; d++)
        if (!devices[d]) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_create: devices[%zu] is NULL", d);
    tsr_device_group *g = calloc(1, sizeof *g);
    if (!g || !(g->members = calloc(count, sizeof(member))) || !(g->stats = calloc(count, sizeof *g->stats))) {
        if (g) free(g->members);
        free(g);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "tsr_group_create: out of host memory");
    }
    g->count = count;
    g->weights_from = "none";
    pthread_mutex_init(&g->call_lock, NULL);
    tsr_status status = TSR_SUCCESS;
    for (size_t d = 0; d < count; d++) {
        member *m = &g->members[d];
        m->device = devices[d];
        cl_context ctx = tsr_device_context(devices[d]);
        cl_device_id id = tsr_device_id(devices[d]);
        cl_command_queue *queues[3] = {&m->upload, &m->compute, &m->download};
        for (int q = 0; q < 3; q++) {
            cl_int err;
            *queues[q] = clCreateCommandQueue(ctx, id, 0, &err);
            if (err != CL_SUCCESS) {
                *queues[q] = NULL;
                status = tsr_fail_cl(err, "clCreateCommandQueue (a group's transfer and compute queues)", __FILE__,
                                     __LINE__);
                goto out;
            }
        }
    }
out:
    if (status != TSR_SUCCESS) {
        tsr_group_destroy(g);
        return status;
    }
    warn_about_sharing(devices, count);
    *group = g;
    return TSR_SUCCESS;
}

void tsr_group_destroy(tsr_device_group *group) {
    if (!group) return;
    for (size_t d = 0; d < group->count; d++)
        member_release(&group->members[d]);
    for (size_t i = 0; i < group->nlearned; i++)
        free(group->learned[i].gflops);
    pthread_mutex_destroy(&group->call_lock);
    free(group->members);
    free(group->weights);
    free(group->tiles);
    free(group->tile_state);
    free(group->stats);
    free(group);
}

size_t tsr_group_size(const tsr_device_group *group) { return group ? group->count : 0; }

tsr_status tsr_group_set_weights(tsr_device_group *group, const double *weights) {
    tsr_clear_diagnostics();
    if (!group) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_set_weights: group is NULL");
    if (!weights) {
        pthread_mutex_lock(&group->call_lock);
        free(group->weights);
        group->weights = NULL;
        pthread_mutex_unlock(&group->call_lock);
        return TSR_SUCCESS;
    }
    bool any = false;
    for (size_t d = 0; d < group->count; d++) {
        if (!isfinite(weights[d]) || weights[d] < 0)
            return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_set_weights: weights[%zu] = %g (finite, >= 0)", d,
                            weights[d]);
        any |= weights[d] > 0;
    }
    if (!any) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_set_weights: every weight is 0");
    double *copy = malloc(group->count * sizeof(double));
    if (!copy) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "tsr_group_set_weights: out of host memory");
    memcpy(copy, weights, group->count * sizeof(double));
    pthread_mutex_lock(&group->call_lock);
    free(group->weights);
    group->weights = copy;
    pthread_mutex_unlock(&group->call_lock);
    return TSR_SUCCESS;
}

tsr_status tsr_group_last_stats(tsr_device_group *group, tsr_group_stats *stats) {
    tsr_clear_diagnostics();
    if (!group || !stats) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_last_stats: group or stats is NULL");
    pthread_mutex_lock(&group->call_lock);
    *stats = (tsr_group_stats){.seconds = group->seconds,
                               .weights_from = group->weights_from,
                               .tile_count = group->ntiles,
                               .tiles = group->tiles,
                               .devices = group->stats};
    pthread_mutex_unlock(&group->call_lock);
    return TSR_SUCCESS;
}

/* ------------------------------------------------------------------ entry points */

/* A failed shared check's error, with the group call's name in front. */
static tsr_status prefixed(tsr_status status, const char *fn) {
    char why[512];
    snprintf(why, sizeof why, "%s", tsr_last_error());
    return tsr_fail(status, "%s: %s", fn, why);
}

/* Host ranges [lo, hi) of two operands must not meet (C is written, A and B read). */
static bool spans_meet(const float *a, size_t a_n, const float *c, size_t c_n) {
    if (!a || !c || !a_n || !c_n) return false;
    uintptr_t a0 = (uintptr_t)a, a1 = a0 + a_n * sizeof(float), c0 = (uintptr_t)c, c1 = c0 + c_n * sizeof(float);
    return a0 < c1 && c0 < a1;
}

/* tsr_matmul's descriptor rules, by the same code (tsr_matmul_check: types, layout, transposes, m, n
 * and batch >= 1, sizes, leading dimensions, extents, C's matrices apart), then the group's own:
 * fp32 operands and no epilogue (host arrays of floats, tiles by the plain calls), and the host
 * arrays': none NULL (as tsr_matmul refuses a NULL buffer), spans whose bytes fit a size_t, and C
 * apart from A and B where those are read (k > 0 and alpha != 0, as tsr_matmul). In the caller's
 * layout, before the row-major view, so messages name the caller's fields. *d receives the
 * descriptor with its defaults explicit; a, b and c are moved to their offsets. */
static tsr_status check_gemm(const char *fn, const tsr_matmul_desc *desc, const float **a, const float **b, float **c,
                             tsr_matmul_desc *d) {
    size_t need[3];
    tsr_status status = tsr_matmul_check(desc, false, d, need);
    if (status != TSR_SUCCESS) return prefixed(status, fn);
    const tsr_matrix *ops[3] = {&d->a, &d->b, &d->c};
    for (int i = 0; i < 3; i++)
        if (ops[i]->dtype != TSR_F32)
            return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: %c.dtype is %s: the group's calls take fp32 host arrays", fn,
                            "abc"[i], tsr_dtype_str(ops[i]->dtype));
    const tsr_epilogue none = {0};
    if (memcmp(&d->epilogue, &none, sizeof none) != 0)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: the group's calls take no epilogue (bias or activation)", fn);
    const float *ptrs[3] = {*a, *b, *c};
    for (int i = 0; i < 3; i++) {
        if (!ptrs[i]) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: %c is NULL", fn, "ABC"[i]);
        if (need[i] > SIZE_MAX / sizeof(float))
            return tsr_fail(TSR_ERR_OVERFLOW, "%s: the bytes %c spans overflow a size_t", fn, "ABC"[i]);
    }
    /* from here on the arrays start at their offsets */
    *a += d->a.offset, *b += d->b.offset, *c += d->c.offset;
    const size_t a_n = need[0] - d->a.offset, b_n = need[1] - d->b.offset, c_n = need[2] - d->c.offset;
    if (d->k > 0 && d->alpha != 0.0f && (spans_meet(*a, a_n, *c, c_n) || spans_meet(*b, b_n, *c, c_n)))
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: C shares memory with %s", fn,
                        spans_meet(*a, a_n, *c, c_n) ? "A" : "B");
    /* a tile's buffers: C's rows (m n floats at most per entry) and A's (m k) */
    size_t m_n, work;
    const size_t m = d->m, n = d->n, k = d->k;
    if (__builtin_mul_overflow(m, n, &m_n) || __builtin_mul_overflow(m_n, d->batch, &work) ||
        work > SIZE_MAX / sizeof(float) ||
        (k && (m > SIZE_MAX / sizeof(float) / k || n > SIZE_MAX / sizeof(float) / k)))
        return tsr_fail(TSR_ERR_OVERFLOW, "%s: the problem's size overflows", fn);
    return TSR_SUCCESS;
}

/* Column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T: swap the operands. */
static gemm_params row_major_view(const tsr_matmul_desc *d, const float *a, const float *b, float *c) {
    bool trans_a = d->trans_a != TSR_NO_TRANS, trans_b = d->trans_b != TSR_NO_TRANS;
    if (d->layout == TSR_ROW_MAJOR)
        return (gemm_params){
            trans_a, trans_b, d->m,    d->n,    d->k,    d->alpha,          d->beta,           a,
            b,       c,       d->a.ld, d->b.ld, d->c.ld, d->a.batch_stride, d->b.batch_stride, d->c.batch_stride,
            d->batch};
    return (gemm_params){
        trans_b, trans_a, d->n,    d->m,    d->k,    d->alpha,          d->beta,           b,
        a,       c,       d->b.ld, d->a.ld, d->c.ld, d->b.batch_stride, d->a.batch_stride, d->c.batch_stride,
        d->batch};
}

static tsr_status gemm_class_key(tsr_device_group *g, const char *op, const gemm_params *p, char *key, size_t size,
                                 double *tuned) {
    for (size_t d = 0; d < g->count; d++) {
        tsr_config_info info;
        if (tsr_gemm_config_info(g->members[d].device, p->m, p->n, p->k, p->batch ? p->batch : 1, &info) !=
            TSR_SUCCESS) {
            tsr_clear_error(); /* a class name is only a key for remembered rates */
            snprintf(info.problem_class, sizeof info.problem_class, "m%zu", p->m);
            info.tuned_gflops = 0;
        }
        tuned[d] = info.source == TSR_CONFIG_TUNED ? info.tuned_gflops : 0;
        if (!d) snprintf(key, size, "%s %s", op, info.problem_class);
    }
    return TSR_SUCCESS;
}

/* After check_gemm. A and B are not read when k = 0 or alpha = 0 (C <- beta C, as tsr_matmul):
 * nothing of them is uploaded. */
static tsr_status gemm_multi(tsr_device_group *group, const char *fn, bool batched, bool col_major, gemm_params p) {
    tsr_status status;
    if (p.alpha == 0.0f) p.k = 0;
    char key[64];
    double *tuned = calloc(group->count, sizeof(double));
    if (!tuned) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    if (!batched) p.batch = 0;
    gemm_class_key(group, batched ? "gemm_batched" : "gemm", &p, key, sizeof key, tuned);
    tsr_clear_diagnostics();
    job j = {.op = fn, .params = &p, .output = "C"};
    j.reserve = batched ? batched_reserve : gemm_reserve;
    if (batched) {
        j.unit_word = "batch entry", j.units_word = "batch entries";
        j.units = p.batch, j.chunk = 1, j.flops_per_unit = 2.0 * (double)p.m * (double)p.n * (double)p.k;
        j.sizes = batched_sizes, j.prepare = batched_prepare, j.enqueue = batched_enqueue;
    } else {
        j.unit_word = col_major ? "column" : "row", j.units_word = col_major ? "columns" : "rows";
        j.units = p.m, j.chunk = 16, j.align = 64, j.flops_per_unit = 2.0 * (double)p.n * (double)p.k;
        j.sizes = gemm_sizes, j.prepare = gemm_prepare, j.enqueue = gemm_enqueue;
    }
    status = run_job(group, &j, key, tuned);
    free(tuned);
    return status;
}

/* One product splits by rows of C, a batch (batch > 1) by its entries. */
tsr_status tsr_matmul_multi(tsr_device_group *group, const tsr_matmul_desc *desc, const float *a, const float *b,
                            float *c) {
    tsr_clear_diagnostics();
    const char *fn = "tsr_matmul_multi";
    if (!group) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: group is NULL", fn);
    tsr_matmul_desc d;
    RETURN_IF_FAILED(check_gemm(fn, desc, &a, &b, &c, &d));
    pthread_mutex_lock(&group->call_lock);
    tsr_status status = gemm_multi(group, fn, d.batch > 1, d.layout == TSR_COL_MAJOR, row_major_view(&d, a, b, c));
    pthread_mutex_unlock(&group->call_lock);
    return status;
}

/* Explicit strides (zeros mean contiguous [B, H, L, D]) and the host checks of one tensor. */
static tsr_status attention_tensor(const char *fn, const char *name, const float *ptr, size_t len, size_t heads,
                                   size_t dim, size_t batch, size_t offset, size_t strides[3], size_t *span) {
    if (!strides[0] && !strides[1] && !strides[2]) {
        strides[2] = dim, strides[1] = len * dim, strides[0] = heads * len * dim;
    }
    if (!ptr) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: %s is NULL", fn, name);
    if (len > 1 && strides[2] < dim)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: %s's row stride %zu is less than head_dim %zu", fn, name, strides[2],
                        dim);
    size_t counts[3] = {batch, heads, len};
    if (!tsr_strided_extent(offset, 3, counts, strides, dim, span))
        return tsr_fail(TSR_ERR_OVERFLOW, "%s: %s's extent overflows", fn, name);
    return TSR_SUCCESS;
}

tsr_status tsr_attention_multi(tsr_device_group *group, const tsr_attention_desc *desc, const float *q, const float *k,
                               const float *v, float *o) {
    tsr_clear_diagnostics();
    const char *fn = "tsr_attention_multi";
    if (!group || !desc) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: group or desc is NULL", fn);
    attention_params p = {.desc = *desc, .q = q, .k = k, .v = v, .o = o};
    tsr_attention_desc *d = &p.desc;
    const tsr_dtype types[4] = {d->q_type, d->k_type, d->v_type, d->o_type};
    static const char *const type_names[4] = {"q_type", "k_type", "v_type", "o_type"};
    for (int i = 0; i < 4; i++) /* a value outside the enum is an invalid argument, as for tsr_attention */
        if (tsr_dtype_check(type_names[i], types[i]) != TSR_SUCCESS) return prefixed(TSR_ERR_INVALID_ARG, fn);
    for (int i = 0; i < 4; i++)
        if (types[i] != 0 && types[i] != TSR_F32)
            return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: host tensors are fp32 (a %s tensor was given)", fn,
                            tsr_dtype_str(types[i]));
    if (d->lse) return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: lse is not offered across devices (set it to NULL)", fn);
    /* tsr_attention's own rules, checked here so that no tile can fail on them */
    if (!d->batch || !d->heads || !d->q_len || !d->kv_len || !d->head_dim)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "%s: batch, heads, q_len, kv_len and head_dim must be at least 1 (got %zu, %zu, %zu, %zu, %zu)",
                        fn, d->batch, d->heads, d->q_len, d->kv_len, d->head_dim);
    if (d->head_dim > 256)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: head_dim %zu is larger than the supported 256", fn, d->head_dim);
    size_t pairs;
    if (d->q_len > TSR_ATTENTION_MAX_LEN || d->kv_len > TSR_ATTENTION_MAX_LEN ||
        __builtin_mul_overflow(d->batch, d->heads, &pairs) || pairs > INT_MAX)
        return tsr_fail(TSR_ERR_OVERFLOW, "%s: q_len and kv_len must each be at most %d, batch*heads at most %d", fn,
                        TSR_ATTENTION_MAX_LEN, INT_MAX);
    if (!isfinite(d->scale)) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: scale must be finite", fn);
    if (d->kv_lengths)
        for (size_t b = 0; b < d->batch; b++)
            if (d->kv_lengths[b] < 0 || (size_t)d->kv_lengths[b] > d->kv_len)
                return tsr_fail(TSR_ERR_INVALID_ARG, "%s: kv_lengths[%zu] = %d (0..%zu)", fn, b, d->kv_lengths[b],
                                d->kv_len);
    size_t q_span, k_span = 0, v_span = 0, o_span;
    RETURN_IF_FAILED(
        attention_tensor(fn, "O", o, d->q_len, d->heads, d->head_dim, d->batch, d->o_offset, d->o_strides, &o_span));
    RETURN_IF_FAILED(
        attention_tensor(fn, "Q", q, d->q_len, d->heads, d->head_dim, d->batch, d->q_offset, d->q_strides, &q_span));
    RETURN_IF_FAILED(
        attention_tensor(fn, "K", k, d->kv_len, d->heads, d->head_dim, d->batch, d->k_offset, d->k_strides, &k_span));
    RETURN_IF_FAILED(
        attention_tensor(fn, "V", v, d->kv_len, d->heads, d->head_dim, d->batch, d->v_offset, d->v_strides, &v_span));
    if (!tsr_rows_disjoint(d->o_strides, (const size_t[]){d->batch, d->heads, d->q_len}, d->head_dim))
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: O's strides {%zu, %zu, %zu} make output rows overlap", fn,
                        d->o_strides[0], d->o_strides[1], d->o_strides[2]);
    if (spans_meet(q, q_span, o, o_span) || spans_meet(k, k_span, o, o_span) || spans_meet(v, v_span, o, o_span))
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: O shares memory with Q, K or V", fn);
    size_t units, per_unit, rows;
    if (__builtin_mul_overflow(d->batch, d->heads, &units) ||
        __builtin_mul_overflow(d->q_len, d->head_dim, &per_unit) ||
        __builtin_add_overflow(d->q_len, 2 * d->kv_len, &rows) || rows > SIZE_MAX / sizeof(float) / d->head_dim)
        return tsr_fail(TSR_ERR_OVERFLOW, "%s: the problem's size overflows", fn);
    job j = {.op = fn,
             .params = &p,
             .units = units,
             .unit_word = "(batch, head) pair",
             .units_word = "(batch, head) pairs b * heads + h",
             .output = "O",
             .chunk = 1,
             .boundary = d->heads,
             .flops_per_unit = 4.0 * (double)d->q_len * (double)d->kv_len * (double)d->head_dim,
             .sizes = attention_sizes,
             .enqueue = attention_enqueue};
    char key[64];
    unsigned bucket = 0;
    while (bucket < 40 && ((size_t)1 << bucket) < d->kv_len)
        bucket++;
    snprintf(key, sizeof key, "attention d%zu kv2^%u%s", d->head_dim, bucket, d->causal ? " causal" : "");
    pthread_mutex_lock(&group->call_lock);
    tsr_status status = run_job(group, &j, key, NULL);
    pthread_mutex_unlock(&group->call_lock);
    return status;
}
