/* tsr_matmul_multi: its jobs (a unit is a row of C for one product, or a batch entry), argument
 * checks and driver (device groups: group.h). */
#include "group.h"

#include <stdlib.h>
#include <string.h>

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
    if (status != TSR_SUCCESS) return tsr_grp_prefixed(status, fn);
    const tsr_matrix *ops[3] = {&d->a, &d->b, &d->c};
    for (int i = 0; i < 3; i++)
        if (ops[i]->dtype != TSR_F32)
            return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: %c.dtype is %s: the group's calls take fp32 host arrays", fn,
                            "abc"[i], tsr_dtype_str(ops[i]->dtype));
    const tsr_epilogue none = {0};
    if (memcmp(&d->epilogue, &none, sizeof none) != 0)
        return tsr_fail(TSR_ERR_UNSUPPORTED,
                        "%s: the group's calls take no epilogue (bias, scale, residual, activation or LayerNorm)", fn);
    const float *ptrs[3] = {*a, *b, *c};
    for (int i = 0; i < 3; i++) {
        if (!ptrs[i]) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: %c is NULL", fn, "ABC"[i]);
        if (need[i] > SIZE_MAX / sizeof(float))
            return tsr_fail(TSR_ERR_OVERFLOW, "%s: the bytes %c spans overflow a size_t", fn, "ABC"[i]);
    }
    /* from here on the arrays start at their offsets */
    *a += d->a.offset, *b += d->b.offset, *c += d->c.offset;
    const size_t a_n = need[0] - d->a.offset, b_n = need[1] - d->b.offset, c_n = need[2] - d->c.offset;
    if (d->k > 0 && d->alpha != 0.0f && (tsr_grp_spans_meet(*a, a_n, *c, c_n) || tsr_grp_spans_meet(*b, b_n, *c, c_n)))
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: C shares memory with %s", fn,
                        tsr_grp_spans_meet(*a, a_n, *c, c_n) ? "A" : "B");
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
    status = tsr_grp_run_job(group, &j, key, tuned);
    free(tuned);
    return status;
}

/* One product splits by rows of C, a batch (batch > 1) by its entries. */
tsr_status tsr_matmul_multi(tsr_device_group *group, const tsr_matmul_desc *desc, const float *a, const float *b,
                            float *c) {
    tsr_clear_diagnostics();
    const char *fn = "tsr_matmul_multi";
    if (tsr_graph_capturing()) return tsr_graph_refuse(fn, "it reads and writes host arrays on worker threads");
    if (!group) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: group is NULL", fn);
    tsr_status status = TSR_SUCCESS;
    tsr_matmul_desc d;
    TSR_CHECK(status, check_gemm(fn, desc, &a, &b, &c, &d), done);
    pthread_mutex_lock(&group->call_lock);
    status = gemm_multi(group, fn, d.batch > 1, d.layout == TSR_COL_MAJOR, row_major_view(&d, a, b, c));
    pthread_mutex_unlock(&group->call_lock);
done:
    return status;
}
