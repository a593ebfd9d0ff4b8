/* tsr_sgemm_multi and tsr_sgemm_strided_batched_multi: their jobs (a unit is a row of C, or a
 * batch entry), argument checks and drivers (device groups: group.h). */
#include "group.h"

#include <stdlib.h>

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

/* Rows and row length of a stored (not transposed) operand. */
static void stored_shape(bool trans, size_t rows, size_t cols, size_t *srows, size_t *scols) {
    *srows = trans ? cols : rows;
    *scols = trans ? rows : cols;
}

/* Floats a stored matrix spans: (rows - 1) * ld + cols. */
static size_t matrix_span(size_t rows, size_t cols, size_t ld) { return rows && cols ? (rows - 1) * ld + cols : 0; }

/* ---- GEMM: a unit is one row of C ---- */

static tsr_status gemm_sizes(const job *j, size_t count, size_t bytes[ROLES]) {
    const gemm_params *p = j->params;
    bytes[0] = (p->k ? count * p->k : 1) * sizeof(float);
    bytes[1] = sizeof(float);
    bytes[2] = count * p->n * sizeof(float);
    return TSR_SUCCESS;
}

static tsr_status gemm_reserve(const job *j, member *m) {
    const gemm_params *p = j->params;
    return tsr_grp_ensure_buffer(m, &m->shared[0], &m->shared_bytes[0], (p->k ? p->k * p->n : 1) * sizeof(float));
}

static tsr_status gemm_prepare(const job *j, member *m) {
    const gemm_params *p = j->params;
    if (!p->k) return TSR_SUCCESS;
    size_t rows, cols;
    stored_shape(p->trans_b, p->k, p->n, &rows, &cols);
    return tsr_grp_write_rect(m->upload, m->shared[0], 0, p->b, rows, cols, p->ldb, cols);
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
            status = tsr_grp_write_rect(m->upload, a, 0, p->a + first, p->k, count, p->lda, count);
        else
            status = tsr_grp_write_rect(m->upload, a, 0, p->a + first * p->lda, count, p->k, p->lda, p->k);
        if (status != TSR_SUCCESS) goto done;
    }
    if (p->beta != 0.0f)
        TSR_CHECK(status, tsr_grp_write_rect(m->upload, c, 0, p->c + first * p->ldc, count, p->n, p->ldc, p->n), done);
    TSR_CL_CHECK(status, clEnqueueMarkerWithWaitList(m->upload, 0, NULL, &uploaded), done);
    TSR_CL_CHECK(status, clEnqueueBarrierWithWaitList(m->compute, 1, &uploaded, NULL), done);
    TSR_CHECK(status,
              tsr_sgemm(m->device, TSR_ROW_MAJOR, p->trans_a ? TSR_TRANS : TSR_NO_TRANS,
                        p->trans_b ? TSR_TRANS : TSR_NO_TRANS, count, p->n, p->k, p->alpha, a, 0, a_ld, m->shared[0], 0,
                        b_ld, p->beta, c, 0, p->n, m->compute, &computed),
              done);
    *writing = true;
    TSR_CHECK(
        status,
        tsr_grp_copy_rows(m->download, false, c, 0, p->c + first * p->ldc, count, p->n, p->ldc, p->n, computed, done),
        done);
done:
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
    tsr_status status = tsr_grp_ensure_buffer(m, &m->shared[0], &m->shared_bytes[0],
                                              (!p->a_stride && a_span ? a_span : 1) * sizeof(float));
    if (status == TSR_SUCCESS)
        status = tsr_grp_ensure_buffer(m, &m->shared[1], &m->shared_bytes[1],
                                       (!p->b_stride && b_span ? b_span : 1) * sizeof(float));
    return status;
}

static tsr_status batched_prepare(const job *j, member *m) {
    const gemm_params *p = j->params;
    size_t a_span, b_span;
    tsr_status status = TSR_SUCCESS;
    batched_spans(p, &a_span, &b_span);
    if (!p->a_stride && a_span)
        TSR_CL_CHECK(
            status,
            clEnqueueWriteBuffer(m->upload, m->shared[0], CL_FALSE, 0, a_span * sizeof(float), p->a, 0, NULL, NULL),
            done);
    if (!p->b_stride && b_span)
        TSR_CL_CHECK(
            status,
            clEnqueueWriteBuffer(m->upload, m->shared[1], CL_FALSE, 0, b_span * sizeof(float), p->b, 0, NULL, NULL),
            done);
done:
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
        TSR_CL_CHECK(status,
                     clEnqueueWriteBuffer(m->upload, a, CL_FALSE, 0,
                                          batch_floats(count, p->a_stride, a_span) * sizeof(float),
                                          p->a + first * p->a_stride, 0, NULL, NULL),
                     done);
    if (p->b_stride && b_span)
        TSR_CL_CHECK(status,
                     clEnqueueWriteBuffer(m->upload, b, CL_FALSE, 0,
                                          batch_floats(count, p->b_stride, b_span) * sizeof(float),
                                          p->b + first * p->b_stride, 0, NULL, NULL),
                     done);
    if (p->beta != 0.0f)
        for (size_t e = 0; e < count; e++)
            TSR_CHECK(status,
                      tsr_grp_write_rect(m->upload, c, e * p->m * p->n, p->c + (first + e) * p->c_stride, p->m, p->n,
                                         p->ldc, p->n),
                      done);
    TSR_CL_CHECK(status, clEnqueueMarkerWithWaitList(m->upload, 0, NULL, &uploaded), done);
    TSR_CL_CHECK(status, clEnqueueBarrierWithWaitList(m->compute, 1, &uploaded, NULL), done);
    TSR_CHECK(status,
              tsr_sgemm_strided_batched(m->device, TSR_ROW_MAJOR, p->trans_a ? TSR_TRANS : TSR_NO_TRANS,
                                        p->trans_b ? TSR_TRANS : TSR_NO_TRANS, p->m, p->n, p->k, p->alpha, a, 0, p->lda,
                                        p->a_stride, b, 0, p->ldb, p->b_stride, p->beta, c, 0, p->n, p->m * p->n, count,
                                        m->compute, &computed),
              done);
    TSR_CL_CHECK(status, clEnqueueBarrierWithWaitList(m->download, 1, &computed, NULL), done);
    *writing = true;
    for (size_t e = 0; e < count; e++)
        TSR_CHECK(status,
                  tsr_grp_copy_rows(m->download, false, c, e * p->m * p->n, p->c + (first + e) * p->c_stride, p->m,
                                    p->n, p->ldc, p->n, NULL, NULL),
                  done);
    TSR_CL_CHECK(status, clEnqueueMarkerWithWaitList(m->download, 0, NULL, done), done);
done:
    if (uploaded) clReleaseEvent(uploaded);
    if (computed) clReleaseEvent(computed);
    return status;
}

/* ------------------------------------------------------------------ entry points */

/* tsr_sgemm's argument rules, by the same code (tsr_gemm_check_args: m, n and batch_count >= 1,
 * sizes, leading dimensions, extents, C's matrices apart), then the host arrays': none NULL (as
 * tsr_sgemm refuses a NULL buffer), spans whose bytes fit a size_t, and C apart from A and B where
 * those are read (k > 0 and alpha != 0, as tsr_sgemm). In the caller's layout, before the
 * row-major view, so messages name the caller's arguments. */
static tsr_status check_gemm(const char *fn, tsr_layout layout, tsr_transpose ta, tsr_transpose tb, size_t m, size_t n,
                             size_t k, float alpha, const float *a, size_t lda, size_t a_stride, const float *b,
                             size_t ldb, size_t b_stride, const float *c, size_t ldc, size_t c_stride, size_t batch) {
    size_t need[3];
    tsr_status status =
        tsr_gemm_check_args(layout, ta, tb, m, n, k, 0, lda, a_stride, 0, ldb, b_stride, 0, ldc, c_stride, batch, need);
    if (status != TSR_SUCCESS) return tsr_grp_prefixed(status, fn);
    const float *ptrs[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        if (!ptrs[i]) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: %c is NULL", fn, "ABC"[i]);
        if (need[i] > SIZE_MAX / sizeof(float))
            return tsr_fail(TSR_ERR_OVERFLOW, "%s: the bytes %c spans overflow a size_t", fn, "ABC"[i]);
    }
    if (k > 0 && alpha != 0.0f &&
        (tsr_grp_spans_meet(a, need[0], c, need[2]) || tsr_grp_spans_meet(b, need[1], c, need[2])))
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: C shares memory with %s", fn,
                        tsr_grp_spans_meet(a, need[0], c, need[2]) ? "A" : "B");
    /* a tile's buffers: C's rows (m n floats at most per entry) and A's (m k) */
    size_t m_n, work;
    if (__builtin_mul_overflow(m, n, &m_n) || __builtin_mul_overflow(m_n, batch, &work) ||
        work > SIZE_MAX / sizeof(float) || (k && (m > SIZE_MAX / sizeof(float) / k || n > SIZE_MAX / sizeof(float) / k)))
        return tsr_fail(TSR_ERR_OVERFLOW, "%s: the problem's size overflows", fn);
    return TSR_SUCCESS;
}

/* Column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T: swap the operands. */
static gemm_params row_major_view(tsr_layout layout, tsr_transpose ta, tsr_transpose tb, size_t m, size_t n, size_t k,
                                  float alpha, const float *a, size_t lda, size_t a_stride, const float *b, size_t ldb,
                                  size_t b_stride, float beta, float *c, size_t ldc, size_t c_stride, size_t batch) {
    bool trans_a = ta != TSR_NO_TRANS, trans_b = tb != TSR_NO_TRANS;
    if (layout == TSR_ROW_MAJOR)
        return (gemm_params){trans_a, trans_b, m,   n,   k,        alpha,    beta,     a,    b,
                             c,       lda,     ldb, ldc, a_stride, b_stride, c_stride, batch};
    return (gemm_params){trans_b, trans_a, n,   m,   k,        alpha,    beta,     b,    a,
                         c,       ldb,     lda, ldc, b_stride, a_stride, c_stride, batch};
}

static tsr_status gemm_class_key(tsr_device_group *g, const char *op, const gemm_params *p, char *key, size_t size,
                                 double *tuned) {
    for (size_t d = 0; d < g->count; d++) {
        tsr_config_info info;
        if (tsr_sgemm_plan(g->members[d].device, p->m, p->n, p->k, p->batch ? p->batch : 1, &info) != TSR_SUCCESS) {
            tsr_clear_error(); /* a class name is only a key for remembered rates */
            snprintf(info.problem_class, sizeof info.problem_class, "m%zu", p->m);
            info.tuned_gflops = 0;
        }
        tuned[d] = info.source == TSR_CONFIG_TUNED ? info.tuned_gflops : 0;
        if (!d) snprintf(key, size, "%s %s", op, info.problem_class);
    }
    return TSR_SUCCESS;
}

/* After check_gemm. A and B are not read when k = 0 or alpha = 0 (C <- beta C, as tsr_sgemm):
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
    status = tsr_grp_run_job(group, &j, key, tuned);
    free(tuned);
    return status;
}

tsr_status tsr_sgemm_multi(tsr_device_group *group, tsr_layout layout, tsr_transpose trans_a, tsr_transpose trans_b,
                           size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda, const float *b,
                           size_t ldb, float beta, float *c, size_t ldc) {
    tsr_clear_diagnostics();
    const char *fn = "tsr_sgemm_multi";
    if (!group) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: group is NULL", fn);
    tsr_status status = TSR_SUCCESS;
    TSR_CHECK(status, check_gemm(fn, layout, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, c, ldc, 0, 1),
              done);
    pthread_mutex_lock(&group->call_lock);
    status =
        gemm_multi(group, fn, false, layout == TSR_COL_MAJOR,
                   row_major_view(layout, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1));
    pthread_mutex_unlock(&group->call_lock);
done:
    return status;
}

tsr_status tsr_sgemm_strided_batched_multi(tsr_device_group *group, tsr_layout layout, tsr_transpose trans_a,
                                           tsr_transpose trans_b, size_t m, size_t n, size_t k, float alpha,
                                           const float *a, size_t lda, size_t a_stride, const float *b, size_t ldb,
                                           size_t b_stride, float beta, float *c, size_t ldc, size_t c_stride,
                                           size_t batch_count) {
    tsr_clear_diagnostics();
    const char *fn = "tsr_sgemm_strided_batched_multi";
    if (!group) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: group is NULL", fn);
    tsr_status status = TSR_SUCCESS;
    TSR_CHECK(status,
              check_gemm(fn, layout, trans_a, trans_b, m, n, k, alpha, a, lda, a_stride, b, ldb, b_stride, c, ldc,
                         c_stride, batch_count),
              done);
    pthread_mutex_lock(&group->call_lock);
    status = gemm_multi(group, fn, true, layout == TSR_COL_MAJOR,
                        row_major_view(layout, trans_a, trans_b, m, n, k, alpha, a, lda, a_stride, b, ldb, b_stride,
                                       beta, c, ldc, c_stride, batch_count));
    pthread_mutex_unlock(&group->call_lock);
done:
    return status;
}
