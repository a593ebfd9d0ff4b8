/* Argument checks shared by every op: extents, overflow-checked sizes, buffers, aliasing, queues;
 * and the blocking host transfers demos and tuning fixtures use. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tsr_strided_extent(size_t offset, size_t ndims, const size_t *counts, const size_t *strides, size_t inner,
                        size_t *elements) {
    size_t total = offset;
    *elements = 0;
    for (size_t i = 0; i < ndims; ++i) {
        size_t last;
        if (__builtin_mul_overflow(counts[i] - 1, strides[i], &last) || __builtin_add_overflow(total, last, &total))
            return false;
    }
    if (__builtin_add_overflow(total, inner, &total) || total > SIZE_MAX / sizeof(float)) return false;
    *elements = total;
    return true;
}

tsr_status tsr_matrix_extent(const char *name, size_t offset, size_t lines, size_t line_length, size_t ld,
                             size_t stride, size_t batch, size_t *elements) {
    *elements = 0;
    if (lines == 0 || line_length == 0 || batch == 0) return TSR_SUCCESS;
    if (!tsr_strided_extent(offset, 2, (const size_t[]){batch, lines}, (const size_t[]){stride, ld}, line_length,
                            elements))
        return tsr_fail(TSR_ERR_OVERFLOW,
                        "the extent of %s overflows (offset %zu, %zu x %zu, ld %zu, stride %zu, batch %zu)", name,
                        offset, lines, line_length, ld, stride, batch);
    return TSR_SUCCESS;
}

tsr_status tsr_size_mad(const char *what, size_t a, size_t b, size_t c, size_t *out) {
    size_t ab;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_add_overflow(ab, c, out))
        return tsr_fail(TSR_ERR_OVERFLOW, "%s overflows (%zu * %zu + %zu exceeds %zu)", what, a, b, c,
                        (size_t)SIZE_MAX);
    return TSR_SUCCESS;
}

tsr_status tsr_mem_region_of(cl_mem mem, const char *name, tsr_mem_region *region) {
    size_t origin = 0, size = 0;
    cl_mem cur = mem;
    cl_int err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
    /* OpenCL 1.2 has one level of sub-buffers; follow a few more in case an implementation nests. */
    for (int depth = 0; err == CL_SUCCESS && depth < 8; ++depth) {
        cl_mem parent = NULL;
        size_t offset = 0;
        err = clGetMemObjectInfo(cur, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL);
        if (err != CL_SUCCESS || !parent) break;
        err = clGetMemObjectInfo(cur, CL_MEM_OFFSET, sizeof offset, &offset, NULL);
        if (err == CL_SUCCESS && __builtin_add_overflow(origin, offset, &origin)) err = CL_INVALID_MEM_OBJECT;
        cur = parent;
    }
    if (err != CL_SUCCESS)
        return tsr_fail(TSR_ERR_INVALID_ARG, "buffer %s is not a valid cl_mem (%s)", name, tsr_cl_error_name(err));
    *region = (tsr_mem_region){.root = cur, .origin = origin, .size = size};
    return TSR_SUCCESS;
}

/* Byte range [*begin, *end) of elements [off, off + count) (of `elem` bytes) of `mem` in its root
 * buffer. */
static tsr_status root_range(cl_mem mem, const char *name, size_t off, size_t count, size_t elem, cl_mem *root,
                             size_t *begin, size_t *end) {
    tsr_mem_region r = {NULL, 0, 0};
    tsr_status st = tsr_mem_region_of(mem, name, &r);
    if (st == TSR_SUCCESS) st = tsr_size_mad("a buffer range's start", off, elem, r.origin, begin);
    if (st == TSR_SUCCESS) st = tsr_size_mad("a buffer range's end", count, elem, *begin, end);
    *root = r.root;
    return st;
}

tsr_status tsr_ranges_relate(cl_mem a, size_t a_off, size_t a_count, cl_mem b, size_t b_off, size_t b_count,
                             tsr_ranges *relation) {
    return tsr_ranges_relate_typed(a, a_off, a_count, TSR_F32, b, b_off, b_count, TSR_F32, relation);
}

tsr_status tsr_ranges_relate_typed(cl_mem a, size_t a_off, size_t a_count, tsr_dtype a_type, cl_mem b, size_t b_off,
                                   size_t b_count, tsr_dtype b_type, tsr_ranges *relation) {
    *relation = TSR_RANGES_DISJOINT;
    if (a_count == 0 || b_count == 0) return TSR_SUCCESS;
    cl_mem ra = NULL, rb = NULL;
    size_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    tsr_status st = TSR_SUCCESS;
    TSR_CHECK(st, root_range(a, "a", a_off, a_count, tsr_dtype_size(a_type), &ra, &a0, &a1), done);
    TSR_CHECK(st, root_range(b, "b", b_off, b_count, tsr_dtype_size(b_type), &rb, &b0, &b1), done);
    if (ra != rb || a1 <= b0 || b1 <= a0) return TSR_SUCCESS;
    *relation = a0 == b0 && a1 == b1 ? TSR_RANGES_SAME : TSR_RANGES_OVERLAP;
done:
    return st;
}

tsr_status tsr_check_disjoint(const char *op, cl_mem a, const char *a_name, size_t a_off, size_t a_count, cl_mem b,
                              const char *b_name, size_t b_off, size_t b_count, bool same_ok) {
    return tsr_check_disjoint_typed(op, a, a_name, a_off, a_count, TSR_F32, b, b_name, b_off, b_count, TSR_F32,
                                    same_ok);
}

tsr_status tsr_check_disjoint_typed(const char *op, cl_mem a, const char *a_name, size_t a_off, size_t a_count,
                                    tsr_dtype a_type, cl_mem b, const char *b_name, size_t b_off, size_t b_count,
                                    tsr_dtype b_type, bool same_ok) {
    tsr_ranges rel;
    tsr_status st = tsr_ranges_relate_typed(a, a_off, a_count, a_type, b, b_off, b_count, b_type, &rel);
    if (st != TSR_SUCCESS || rel == TSR_RANGES_DISJOINT || (rel == TSR_RANGES_SAME && same_ok)) return st;
    cl_mem root;
    size_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    root_range(a, a_name, a_off, a_count, tsr_dtype_size(a_type), &root, &a0, &a1);
    root_range(b, b_name, b_off, b_count, tsr_dtype_size(b_type), &root, &b0, &b1);
    return tsr_fail(TSR_ERR_INVALID_ARG,
                    "%s: %s overlaps %s: they cover bytes [%zu, %zu) and [%zu, %zu) of one buffer (sub-buffers "
                    "resolved to their parent); %s",
                    op, a_name, b_name, a0, a1, b0, b1,
                    same_ok ? "in place needs exactly the same range" : "this op cannot run in place");
}

tsr_status tsr_check_buffer(const tsr_device *dev, cl_mem mem, const char *name, size_t elements) {
    return tsr_check_buffer_typed(dev, mem, name, elements, TSR_F32);
}

tsr_status tsr_check_buffer_typed(const tsr_device *dev, cl_mem mem, const char *name, size_t elements,
                                  tsr_dtype dtype) {
    tsr_status st = tsr_dtype_check(name, dtype);
    if (st != TSR_SUCCESS) return st;
    const size_t elem = tsr_dtype_size(dtype);
    if (!mem) return tsr_fail(TSR_ERR_INVALID_ARG, "buffer %s is NULL", name);
    cl_mem_object_type type = 0;
    cl_context ctx = NULL;
    size_t size = 0;
    cl_int err = clGetMemObjectInfo(mem, CL_MEM_TYPE, sizeof type, &type, NULL);
    if (err == CL_SUCCESS) err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof ctx, &ctx, NULL);
    if (err == CL_SUCCESS) err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
        return tsr_fail(TSR_ERR_INVALID_ARG, "buffer %s is not a valid cl_mem (%s)", name, tsr_cl_error_name(err));
    if (type != CL_MEM_OBJECT_BUFFER) return tsr_fail(TSR_ERR_INVALID_ARG, "%s is an image, not a buffer", name);
    if (ctx != dev->context)
        return tsr_fail(TSR_ERR_INVALID_ARG, "buffer %s belongs to another OpenCL context than the device's", name);
    if (size / elem < elements)
        return tsr_fail(TSR_ERR_BUFFER_TOO_SMALL, "buffer %s holds %zu %s%s but the call needs %zu", name,
                        size / elem, dtype == TSR_F32 ? "floats" : tsr_dtype_str(dtype),
                        dtype == TSR_F32 ? "" : " elements", elements);
    return TSR_SUCCESS;
}

tsr_status tsr_resolve_queue(const tsr_device *dev, cl_command_queue queue, cl_command_queue *out) {
    *out = dev->queue;
    if (!queue) return TSR_SUCCESS;
    cl_context ctx = NULL;
    cl_device_id id = NULL;
    if (clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof ctx, &ctx, NULL) != CL_SUCCESS ||
        clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof id, &id, NULL) != CL_SUCCESS)
        return tsr_fail(TSR_ERR_INVALID_ARG, "queue is not a valid cl_command_queue");
    if (ctx != dev->context || id != dev->id)
        return tsr_fail(TSR_ERR_INVALID_ARG, "queue belongs to another context or device");
    *out = queue;
    return TSR_SUCCESS;
}

tsr_status tsr_download_typed(tsr_device *dev, cl_mem mem, tsr_dtype dtype, float *host, size_t count) {
    if (dtype == TSR_F32) return tsr_download(dev, mem, host, count);
    tsr_status status = TSR_SUCCESS;
    uint16_t *packed = malloc(count ? count * sizeof *packed : 1);
    if (!packed) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "no host memory for %zu 16-bit elements", count);
    TSR_CL_CHECK(status,
                 clEnqueueReadBuffer(dev->queue, mem, CL_TRUE, 0, count * sizeof *packed, packed, 0, NULL, NULL), done);
    TSR_CHECK(status, tsr_convert_host(dtype, packed, TSR_F32, host, count), done);
done:
    free(packed);
    return status;
}

tsr_status tsr_download(tsr_device *dev, cl_mem mem, float *host, size_t count) {
    tsr_status status = TSR_SUCCESS;
    TSR_CL_CHECK(status, clEnqueueReadBuffer(dev->queue, mem, CL_TRUE, 0, count * sizeof(float), host, 0, NULL, NULL),
                 done);
done:
    return status;
}

bool tsr_next_pair(char **cursor, const char *separators, char **name, char **value) {
    char *token = *cursor + strspn(*cursor, separators);
    size_t length = strcspn(token, separators);
    if (length == 0) {
        *cursor = token;
        return false;
    }
    *cursor = token[length] ? token + length + 1 : token + length;
    token[length] = '\0';
    char *eq = strchr(token, '=');
    if (eq) *eq = '\0';
    *name = token;
    *value = eq ? eq + 1 : NULL;
    return true;
}

bool tsr_rows_disjoint(const size_t strides[3], const size_t counts[3], size_t row) {
    size_t dims[3][2] = {{strides[0], counts[0]}, {strides[1], counts[1]}, {strides[2], counts[2]}};
    for (int a = 0; a < 3; ++a) /* sort by stride */
        for (int c = a + 1; c < 3; ++c)
            if (dims[c][0] < dims[a][0]) {
                size_t tmp[2] = {dims[a][0], dims[a][1]};
                dims[a][0] = dims[c][0], dims[a][1] = dims[c][1];
                dims[c][0] = tmp[0], dims[c][1] = tmp[1];
            }
    size_t span = row; /* elements covered by the dims inside the current one */
    for (int a = 0; a < 3; ++a) {
        if (dims[a][1] == 1) continue;
        if (dims[a][0] < span) return false;
        span = dims[a][0] * (dims[a][1] - 1) + span;
    }
    return true;
}
