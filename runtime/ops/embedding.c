/* BERT's embedding sum (cl/embedding.cl): a gather of word, position and token-type rows per
 * token. A plain call, not a tuned op: it has nothing to tune (one pass, every byte read once),
 * so it is not in the op table. The ids come from the host (a tokenizer), are checked there, and
 * travel to the device in a workspace slot of their own. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct embedding_problem {
    tsr_embedding_desc d; /* y_stride resolved */
    size_t y_end;
} embedding_problem;

/* A table (of table_type) of `table_rows` x hidden at `offset`: its end, checked against the buffer, and y
 * disjoint from it. */
#define TABLE_LABEL(name) "embedding: the " name " table's elements" /* a constant: no text per call */
static tsr_status embedding_check_table(const tsr_device *dev, const embedding_problem *p, cl_mem table,
                                        const char *name, const char *what, size_t table_rows, size_t offset,
                                        cl_mem y) {
    size_t elements, end, bytes;
    tsr_status st = TSR_SUCCESS;
    TSR_CHECK(st, tsr_size_mad(what, table_rows, p->d.hidden, 0, &elements), done);
    TSR_CHECK(st, tsr_size_mad(what, elements, 1, offset, &end), done);
    TSR_CHECK(st, tsr_size_mad(what, end, tsr_dtype_size(p->d.table_type), 0, &bytes), done);
    TSR_CHECK(st, tsr_check_buffer_typed(dev, table, name, end, p->d.table_type), done);
    const size_t y_span = p->y_end - p->d.y_offset;
    st = tsr_check_disjoint_typed("embedding", table, name, offset, elements, p->d.table_type, y, "y", p->d.y_offset,
                                  y_span, p->d.y_type, false);
done:
    return st;
}

static tsr_status embedding_validate(const tsr_device *dev, const tsr_embedding_desc *desc, const int32_t *ids,
                                     const int32_t *type_ids, cl_mem word, cl_mem position, cl_mem token_type, cl_mem y,
                                     embedding_problem *p) {
    if (!dev) return tsr_fail(TSR_ERR_INVALID_ARG, "device is NULL");
    if (!desc) return tsr_fail(TSR_ERR_INVALID_ARG, "embedding: desc is NULL");
    if (!ids) return tsr_fail(TSR_ERR_INVALID_ARG, "embedding: ids is NULL");
    if (!word) return tsr_fail(TSR_ERR_INVALID_ARG, "embedding: buffer word is NULL");
    if (!y) return tsr_fail(TSR_ERR_INVALID_ARG, "embedding: buffer y is NULL");
    tsr_status st = tsr_dtype_check("embedding: y_type", desc->y_type);
    if (st != TSR_SUCCESS) return st;
    st = tsr_dtype_check("embedding: table_type", desc->table_type);
    if (st != TSR_SUCCESS) return st;
    const tsr_embedding_desc *d = desc;
    if (d->tokens == 0 || d->seq_len == 0 || d->hidden == 0 || d->vocab == 0)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "embedding: tokens, seq_len, hidden and vocab must be at least 1 (got %zu, "
                        "%zu, %zu, %zu)",
                        d->tokens, d->seq_len, d->hidden, d->vocab);
    if (position && d->max_positions == 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "embedding: max_positions must be at least 1 with a position table");
    if (token_type && d->type_vocab == 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "embedding: type_vocab must be at least 1 with a token_type table");
    if (d->y_stride != 0 && d->y_stride < d->hidden)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "embedding: y_stride must be 0 (contiguous) or at least hidden (got %zu < %zu)", d->y_stride,
                        d->hidden);
    /* The ids, on the host, before anything is enqueued. */
    for (size_t t = 0; t < d->tokens; ++t)
        if (ids[t] < 0 || (uint64_t)ids[t] >= (uint64_t)d->vocab)
            return tsr_fail(TSR_ERR_INVALID_ARG, "embedding: ids[%zu] = %d is outside 0..%zu (vocab %zu)", t,
                            (int)ids[t], d->vocab - 1, d->vocab);
    if (token_type && type_ids)
        for (size_t t = 0; t < d->tokens; ++t)
            if (type_ids[t] < 0 || (uint64_t)type_ids[t] >= (uint64_t)d->type_vocab)
                return tsr_fail(TSR_ERR_INVALID_ARG, "embedding: type_ids[%zu] = %d is outside 0..%zu (type_vocab %zu)",
                                t, (int)type_ids[t], d->type_vocab - 1, d->type_vocab);
    if (position) {
        /* Token t is at position_start + t % seq_len: the first too far is the one at max_positions. */
        const size_t used = d->tokens < d->seq_len ? d->tokens : d->seq_len;
        if (d->position_start >= d->max_positions || used > d->max_positions - d->position_start) {
            const size_t t = d->position_start >= d->max_positions ? 0 : d->max_positions - d->position_start;
            return tsr_fail(TSR_ERR_INVALID_ARG,
                            "embedding: token %zu is at position %zu, past the table's max_positions %zu "
                            "(position_start %zu, seq_len %zu)",
                            t, d->position_start + t, d->max_positions, d->position_start, d->seq_len);
        }
    }
    *p = (embedding_problem){.d = *d};
    if (!p->d.y_stride) p->d.y_stride = d->hidden;
    size_t y_span, bytes;
    TSR_CHECK(st, tsr_size_mad("embedding: the elements y spans", d->tokens - 1, p->d.y_stride, d->hidden, &y_span),
              done);
    TSR_CHECK(st, tsr_size_mad("embedding: y_offset + y's span", y_span, 1, d->y_offset, &p->y_end), done);
    TSR_CHECK(st, tsr_size_mad("embedding: the bytes y spans", p->y_end, tsr_dtype_size(d->y_type), 0, &bytes), done);
    TSR_CHECK(st, tsr_size_mad("embedding: the ids' bytes", d->tokens, 2 * sizeof(int32_t), 0, &bytes), done);
    TSR_CHECK(st, tsr_check_buffer_typed(dev, y, "y", p->y_end, d->y_type), done);
    TSR_CHECK(st, embedding_check_table(dev, p, word, "word", TABLE_LABEL("word"), d->vocab, d->word_offset, y), done);
    if (position)
        TSR_CHECK(st,
                  embedding_check_table(dev, p, position, "position", TABLE_LABEL("position"), d->max_positions,
                                        d->position_offset, y),
                  done);
    if (token_type)
        TSR_CHECK(st,
                  embedding_check_table(dev, p, token_type, "token_type", TABLE_LABEL("token_type"), d->type_vocab,
                                        d->token_type_offset, y),
                  done);
done:
    return st;
}

static const char embedding_kernels_tag;

enum { EMBEDDING_VW = 16 }; /* cl/embedding.cl's default VW: the columns of one item's vector */

/* $TSR_TEST_EMBEDDING_ITEMS, the tests' hook: items per token (1 to 64, decimal), so that a CPU
 * also runs the geometry other devices get (and the reverse). Anything else is refused. */
static tsr_status embedding_items_hook(size_t *items) {
    const char *text = getenv("TSR_TEST_EMBEDDING_ITEMS");
    if (!text) return TSR_SUCCESS;
    char *end = NULL;
    const unsigned long n = text[0] >= '0' && text[0] <= '9' ? strtoul(text, &end, 10) : 0;
    if (!end || *end || n < 1 || n > 64)
        return tsr_fail(TSR_ERR_INVALID_ARG, "embedding: TSR_TEST_EMBEDDING_ITEMS='%s' is not a count of 1 to 64",
                        text);
    *items = n;
    return TSR_SUCCESS;
}

/* The record's variant: y's type and the tables' type in one number. */
static int embedding_variant(tsr_dtype y_type, tsr_dtype table_type) {
    return (int)y_type + TSR_DTYPE_COUNT * (int)table_type;
}

/* Tokens per work-item (cl/embedding.cl's TPI): 16-bit tables take two tokens at once, their
 * rows' vectors interleaved in one loop, so two random word rows are in flight (under load on
 * the 2-core AVX-512 Xeon, bf16 1.22-1.27x -> 1.45-1.58x fp32, f16 1.40-1.75x -> 1.55-1.66x);
 * fp32 rows, twice as long, were no faster that way. */
static size_t embedding_tokens_per_item(tsr_dtype table_type) { return table_type == TSR_F32 ? 1 : 2; }

/* The program's options for the variant (y's type, the tables' type): fp32 adds none. binaries.c
 * writes the same strings (tsr_embedding_options_text). */
void tsr_embedding_options_text(int y_type, int table_type, char *out, size_t size) {
    if (!size) return;
    out[0] = '\0';
    int used = y_type != TSR_F32 ? snprintf(out, size, "-DY_TYPE=%d", y_type) : 0;
    if (table_type != TSR_F32 && used >= 0 && (size_t)used < size)
        snprintf(out + used, size - (size_t)used, "%s-DT_TYPE=%d -DTPI=%zu", used ? " " : "", table_type,
                 embedding_tokens_per_item((tsr_dtype)table_type));
}

static void embedding_options(const tsr_config *cfg, int variant, char *out, size_t size) {
    (void)cfg;
    tsr_embedding_options_text(variant % TSR_DTYPE_COUNT, variant / TSR_DTYPE_COUNT, out, size);
}

tsr_status tsr_embedding(tsr_device *dev, const tsr_embedding_desc *desc, const int32_t *ids, const int32_t *type_ids,
                         cl_mem word, cl_mem position, cl_mem token_type, cl_mem y, cl_command_queue queue,
                         cl_event *event) {
    tsr_clear_diagnostics();
    if (event) *event = NULL;
    if (tsr_graph_capturing())
        return tsr_graph_refuse("tsr_embedding", "it uploads its ids from host memory at call time");
    embedding_problem p;
    tsr_status status = embedding_validate(dev, desc, ids, type_ids, word, position, token_type, y, &p);
    if (status != TSR_SUCCESS) return status;
    tsr_op_output(y);
    /* Items per token. A CPU: one, looping over the row's EMBEDDING_VW-column vectors
     * (cl/embedding.cl's VW): an item per vector spent more on PoCL's work-item loop than on
     * its 32 bytes of a 16-bit row. Otherwise up to 64, one per vector, each taking every
     * 64th: adjacent items on adjacent vectors; at least one, for the element-by-element tail
     * of a row narrower than a vector. */
    const size_t vectors = p.d.hidden / EMBEDDING_VW;
    size_t items = dev->info.type == TSR_DEVICE_CPU || vectors < 1 ? 1 : vectors < 64 ? vectors : 64;
    status = embedding_items_hook(&items);
    if (status != TSR_SUCCESS) return status;
    cl_kernel kernel = NULL;
    cl_event written = NULL, done = NULL;
    cl_command_queue q;
    TSR_CHECK(status, tsr_resolve_queue(dev, queue, &q), done);
    const tsr_embedding_desc *d = &p.d;
    const bool has_type_ids = token_type && type_ids;
    static const char *const names[] = {"embedding", NULL};
    tsr_kernel *cached[TSR_LAUNCH_KERNELS];
    tsr_config none; /* nothing to tune: the record is keyed by y's and the tables' types alone */
    memset(&none, 0, sizeof none);
    TSR_CHECK(status,
              tsr_launch_kernels(dev, &embedding_kernels_tag, &none, embedding_variant(d->y_type, d->table_type), 0, "embedding", embedding_options,
                                 names, cached),
              done);
    kernel = cached[0]->kernel;
    /* The ids' scratch: TSR_IDS_SLOTS workspace slots taken in turn, each with host memory that a
     * non-blocking upload reads from. A slot is reused once the kernel that last read it is
     * complete (a status query, no wait), and then so is its upload: the caller's arrays are
     * copied into that host memory here, so they are free on return. With every slot still in
     * flight (more calls queued than slots) the ids go into a buffer of their own, created with
     * a copy of them: never a host wait. */
    pthread_mutex_lock(&dev->lock);
    cl_mem scratch = NULL, own = NULL;
    cl_event previous_reader = NULL; /* of a slot found complete: nothing to wait for */
    const size_t id_bytes = d->tokens * sizeof(int32_t);
    /* One write of both arrays (Oclgrind 21.10 reports the ids as uninitialized after a second
     * write at an offset into the same buffer). */
    const size_t write_bytes = has_type_ids ? 2 * id_bytes : id_bytes;
    int slot = -1;
    for (int i = 0; i < TSR_IDS_SLOTS && slot < 0; ++i) {
        cl_event last = dev->workspace[TSR_WS_IDS + i].last_use;
        cl_int state = CL_COMPLETE;
        if (last && clGetEventInfo(last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL) != CL_SUCCESS)
            state = CL_QUEUED;
        if (state == CL_COMPLETE) slot = TSR_WS_IDS + i;
    }
    if (slot < 0) {
        int32_t small[256], *copy = write_bytes <= sizeof small ? small : malloc(write_bytes);
        if (!copy) {
            status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "embedding: out of host memory staging %zu ids", d->tokens);
            goto unlock;
        }
        memcpy(copy, ids, id_bytes);
        if (has_type_ids) memcpy(copy + d->tokens, type_ids, id_bytes);
        cl_int err;
        own = clCreateBuffer(dev->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, write_bytes, copy, &err);
        if (copy != small) free(copy);
        TSR_CL_CHECK(status, err, unlock);
        scratch = own;
    } else {
        TSR_CHECK(status, tsr_workspace_get(dev, slot, 2 * id_bytes, &scratch, &previous_reader), unlock);
        struct tsr_workspace *w = &dev->workspace[slot];
        if (w->host_bytes < write_bytes) { /* grows with the longest call, then stays */
            void *grown = realloc(w->host, write_bytes);
            if (!grown) {
                status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "embedding: out of host memory staging %zu ids", d->tokens);
                goto unlock;
            }
            w->host = grown;
            w->host_bytes = write_bytes;
        }
        int32_t *staging = w->host;
        memcpy(staging, ids, id_bytes);
        if (has_type_ids) memcpy(staging + d->tokens, type_ids, id_bytes);
        TSR_CL_CHECK(status, clEnqueueWriteBuffer(q, scratch, CL_FALSE, 0, write_bytes, staging, 0, NULL, &written),
                     unlock);
    }
    /* Absent tables: the kernel does not read them, another valid buffer stands in. */
    cl_mem position_arg = position ? position : word, token_type_arg = token_type ? token_type : word;
    cl_ulong tokens = d->tokens, hidden = d->hidden, seq_len = d->seq_len,
             position_start = position ? d->position_start : 0, wo = d->word_offset,
             po = position ? d->position_offset : 0, to = token_type ? d->token_type_offset : 0, yo = d->y_offset,
             ys = d->y_stride;
    cl_int has_position = position != NULL, has_token_type = token_type != NULL, has_types = has_type_ids;
    cl_uint arg = 0;
    tsr_kernel_lock(cached[0]); /* the cached kernel's arguments are this call's until the enqueue */
#define SET(value) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(value), &(value)), unlock_kernel)
    SET(tokens);
    SET(hidden);
    SET(seq_len);
    SET(position_start);
    SET(scratch); /* the ids, then the type ids at element `tokens` */
    SET(has_position);
    SET(has_token_type);
    SET(has_types);
    SET(word);
    SET(wo);
    SET(position_arg);
    SET(po);
    SET(token_type_arg);
    SET(to);
    SET(y);
    SET(yo);
    SET(ys);
#undef SET
    const size_t tpi = embedding_tokens_per_item(d->table_type);
    size_t global[2] = {items, (d->tokens + tpi - 1) / tpi}, local[3];
    TSR_CL_CHECK(status,
                 tsr_enqueue_kernel(q, kernel, 2, NULL, global, tsr_spread_local(dev, 2, global, local), written ? 1 : 0, written ? &written : NULL,
                                        &done),
                 unlock_kernel);
unlock_kernel:
    tsr_kernel_unlock(cached[0]);
    /* the slot is free again once the kernel is done (and the upload even on a failure after it) */
    if (slot >= 0 && status == TSR_SUCCESS) tsr_workspace_set_last_use(dev, slot, done);
    else if (slot >= 0 && written) tsr_workspace_set_last_use(dev, slot, written);
unlock:
    pthread_mutex_unlock(&dev->lock);
    if (own) clReleaseMemObject(own); /* kept by OpenCL until the kernel is done */
done:
    if (written) clReleaseEvent(written);
    if (done) {
        if (event && status == TSR_SUCCESS)
            *event = done;
        else
            clReleaseEvent(done);
    }
    return status;
}
