/* tsr_attention_multi: its job (a unit is a (batch, head) pair), argument checks and driver
 * (device groups: group.h). */
#include "group.h"

#include <math.h>

typedef struct attention_params {
    tsr_attention_desc desc; /* strides made explicit */
    const float *q, *k, *v;
    float *o;
} attention_params;

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
        TSR_CHECK(status,
                  tsr_grp_write_rect(m->upload, in, i * d->q_len * dim,
                                     p->q + d->q_offset + b * d->q_strides[0] + h * d->q_strides[1], d->q_len, dim,
                                     d->q_strides[2], dim),
                  done);
        TSR_CHECK(status,
                  tsr_grp_write_rect(m->upload, in, k_base + i * d->kv_len * dim,
                                     p->k + d->k_offset + b * d->k_strides[0] + h * d->k_strides[1], d->kv_len, dim,
                                     d->k_strides[2], dim),
                  done);
        TSR_CHECK(status,
                  tsr_grp_write_rect(m->upload, in, v_base + i * d->kv_len * dim,
                                     p->v + d->v_offset + b * d->v_strides[0] + h * d->v_strides[1], d->kv_len, dim,
                                     d->v_strides[2], dim),
                  done);
    }
    TSR_CL_CHECK(status, clEnqueueMarkerWithWaitList(m->upload, 0, NULL, &uploaded), done);
    TSR_CL_CHECK(status, clEnqueueBarrierWithWaitList(m->compute, 1, &uploaded, NULL), done);
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
    TSR_CHECK(status, tsr_attention(m->device, &tile, in, in, in, o, m->compute, &computed), done);
    TSR_CL_CHECK(status, clEnqueueBarrierWithWaitList(m->download, 1, &computed, NULL), done);
    *writing = true;
    for (size_t i = 0; i < count; i++)
        TSR_CHECK(status,
                  tsr_grp_copy_rows(m->download, false, o, i * d->q_len * dim,
                                    p->o + d->o_offset + b * d->o_strides[0] + (h0 + i) * d->o_strides[1], d->q_len,
                                    dim, d->o_strides[2], dim, NULL, NULL),
                  done);
    TSR_CL_CHECK(status, clEnqueueMarkerWithWaitList(m->download, 0, NULL, done), done);
done:
    if (uploaded) clReleaseEvent(uploaded);
    if (computed) clReleaseEvent(computed);
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
    if (tsr_graph_capturing()) return tsr_graph_refuse(fn, "it reads and writes host arrays on worker threads");
    if (!group || !desc) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: group or desc is NULL", fn);
    attention_params p = {.desc = *desc, .q = q, .k = k, .v = v, .o = o};
    tsr_attention_desc *d = &p.desc;
    const tsr_dtype types[4] = {d->q_type, d->k_type, d->v_type, d->o_type};
    static const char *const type_names[4] = {"q_type", "k_type", "v_type", "o_type"};
    for (int i = 0; i < 4; i++) /* a value outside the enum is an invalid argument, as for tsr_attention */
        if (tsr_dtype_check(type_names[i], types[i]) != TSR_SUCCESS) return tsr_grp_prefixed(TSR_ERR_INVALID_ARG, fn);
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
    tsr_status status = TSR_SUCCESS;
    TSR_CHECK(
        status,
        attention_tensor(fn, "O", o, d->q_len, d->heads, d->head_dim, d->batch, d->o_offset, d->o_strides, &o_span),
        done);
    TSR_CHECK(
        status,
        attention_tensor(fn, "Q", q, d->q_len, d->heads, d->head_dim, d->batch, d->q_offset, d->q_strides, &q_span),
        done);
    TSR_CHECK(
        status,
        attention_tensor(fn, "K", k, d->kv_len, d->heads, d->head_dim, d->batch, d->k_offset, d->k_strides, &k_span),
        done);
    TSR_CHECK(
        status,
        attention_tensor(fn, "V", v, d->kv_len, d->heads, d->head_dim, d->batch, d->v_offset, d->v_strides, &v_span),
        done);
    if (!tsr_rows_disjoint(d->o_strides, (const size_t[]){d->batch, d->heads, d->q_len}, d->head_dim))
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: O's strides {%zu, %zu, %zu} make output rows overlap", fn,
                        d->o_strides[0], d->o_strides[1], d->o_strides[2]);
    if (tsr_grp_spans_meet(q, q_span, o, o_span) || tsr_grp_spans_meet(k, k_span, o, o_span) ||
        tsr_grp_spans_meet(v, v_span, o, o_span))
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
    status = tsr_grp_run_job(group, &j, key, NULL);
    pthread_mutex_unlock(&group->call_lock);
done:
    return status;
}
