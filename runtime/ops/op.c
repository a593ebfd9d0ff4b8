/* The op table, argument checks shared by every op, and ahead-of-time binaries. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const tsr_op *const tsr_ops[] = {&tsr_op_gemm, &tsr_op_gelu, &tsr_op_conv, &tsr_op_attention, NULL};

const char *const *tsr_op_names(void) {
    static const char *names[TSR_MAX_PARAMS + 1];
    static bool filled;
    if (!filled) {
        int n = 0;
        for (const tsr_op *const *op = tsr_ops; *op && n < TSR_MAX_PARAMS; ++op) names[n++] = (*op)->name;
        names[n] = NULL;
        filled = true;
    }
    return names;
}

const tsr_op *tsr_find_op(const char *name) {
    for (const tsr_op *const *op = tsr_ops; *op; ++op)
        if (strcmp((*op)->name, name) == 0) return *op;
    return NULL;
}

void tsr_config_format(const tsr_op *op, const tsr_config *config, char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int p = 0; p < op->nparams && used < size; ++p) {
        int n = snprintf(out + used, size - used, "%s%s=%d", p ? " " : "", op->params[p].name, config->values[p]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

int tsr_op_class_index(const tsr_op *op, const char *problem_class) {
    for (int i = 0; op->classes[i]; ++i)
        if (strcmp(op->classes[i], problem_class) == 0) return i;
    return -1;
}

const char *const *tsr_op_classes(const char *op_name) {
    const tsr_op *op = op_name ? tsr_find_op(op_name) : NULL;
    return op ? op->classes : NULL;
}

tsr_status tsr_config_parse(const tsr_op *op, const char *text, const char *what, tsr_config *config) {
    char buf[512];
    /* A truncated override would silently run another configuration than the one asked for. */
    size_t len = strlen(text);
    if (len >= sizeof buf)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s is %zu characters long; at most %zu are accepted", what, len,
                        sizeof buf - 1);
    tsr_strlcpy(buf, text, sizeof buf);
    char *save = NULL;
    for (char *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: '%s' is not NAME=VALUE", what, tok);
        *eq = '\0';
        int p = 0;
        while (p < op->nparams && strcmp(op->params[p].name, tok) != 0) ++p;
        if (p == op->nparams) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: op %s has no parameter '%s'", what, op->name, tok);
        char *end = NULL;
        long v = strtol(eq + 1, &end, 10);
        bool allowed = false;
        for (int i = 0; end != eq + 1 && *end == '\0' && i < op->params[p].nvalues; ++i)
            allowed |= op->params[p].values[i] == v;
        if (!allowed) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: %s=%s is not in the parameter space", what, tok, eq + 1);
        config->values[p] = (int)v;
    }
    return TSR_SUCCESS;
}

/* The configuration and its origin for a problem class; `problem` (may be NULL) only refines
 * the legality check. */
static tsr_status op_config_info(tsr_device *dev, const tsr_op *op, const char *cls, const void *problem,
                                 tsr_config *config, tsr_config_info *info) {
    char var[64];
    snprintf(var, sizeof var, "TSR_CONFIG_%s", op->name);
    for (char *c = var; *c; ++c) *c = (char)toupper((unsigned char)*c);
    const char *env = getenv(var);
    if (!env || !*env) return tsr_resolve_config(dev, op, cls, config, info);
    op->default_config(dev, cls, config);
    tsr_status st = tsr_config_parse(op, env, var, config);
    if (st != TSR_SUCCESS) return st;
    if (op->normalize) op->normalize(config);
    if (!op->config_ok(dev, problem, config)) {
        char desc[256];
        tsr_config_format(op, config, desc, sizeof desc);
        return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: configuration '%s' is not legal on device '%s'", var, desc,
                        dev->info.name);
    }
    if (info) {
        memset(info, 0, sizeof *info);
        tsr_strlcpy(info->op, op->name, sizeof info->op);
        tsr_strlcpy(info->problem_class, cls, sizeof info->problem_class);
        tsr_strlcpy(info->used_class, cls, sizeof info->used_class);
        tsr_config_format(op, config, info->config, sizeof info->config);
        info->source = TSR_CONFIG_ENV_OVERRIDE;
        snprintf(info->origin, sizeof info->origin, "$%s over the class default", var);
    }
    return TSR_SUCCESS;
}

tsr_status tsr_op_config(tsr_device *dev, const tsr_op *op, const void *problem, tsr_config *config) {
    return op_config_info(dev, op, problem ? op->problem_class(problem) : op->classes[0], problem, config, NULL);
}

tsr_status tsr_config_lookup(tsr_device *dev, const char *op_name, const char *problem_class, tsr_config_info *info) {
    tsr_clear_diagnostics();
    if (!dev || !op_name || !info) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_config_lookup: device, op and info must be set");
    const tsr_op *op = tsr_find_op(op_name);
    if (!op) return tsr_fail(TSR_ERR_NOT_FOUND, "no op named '%s'", op_name);
    if (!problem_class) problem_class = op->classes[0];
    if (tsr_op_class_index(op, problem_class) < 0)
        return tsr_fail(TSR_ERR_NOT_FOUND, "op %s has no problem class '%s'", op_name, problem_class);
    tsr_config config;
    return op_config_info(dev, op, problem_class, NULL, &config, info);
}

tsr_status tsr_run_demo(tsr_device *dev, const char *op_name, char *summary, size_t size) {
    tsr_clear_diagnostics();
    if (!dev || !op_name || !summary || size == 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_run_demo: device, op_name and summary must be set");
    summary[0] = '\0';
    const tsr_op *op = tsr_find_op(op_name);
    if (!op) return tsr_fail(TSR_ERR_NOT_FOUND, "no op named '%s'", op_name);
    return op->demo(dev, summary, size);
}

tsr_status tsr_matrix_extent(const char *name, size_t offset, size_t lines, size_t line_length, size_t ld,
                             size_t stride, size_t batch, size_t *elements) {
    *elements = 0;
    if (lines == 0 || line_length == 0 || batch == 0) return TSR_SUCCESS;
    size_t last_line, last_batch, total;
    if (__builtin_mul_overflow(lines - 1, ld, &last_line) || __builtin_mul_overflow(batch - 1, stride, &last_batch) ||
        __builtin_add_overflow(last_line, line_length, &total) || __builtin_add_overflow(total, last_batch, &total) ||
        __builtin_add_overflow(total, offset, &total) || total > SIZE_MAX / sizeof(float))
        return tsr_fail(TSR_ERR_OVERFLOW, "the extent of %s overflows (offset %zu, %zu x %zu, ld %zu, stride %zu, batch %zu)",
                        name, offset, lines, line_length, ld, stride, batch);
    *elements = total;
    return TSR_SUCCESS;
}

tsr_status tsr_size_mad(const char *what, size_t a, size_t b, size_t c, size_t *out) {
    size_t ab;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_add_overflow(ab, c, out))
        return tsr_fail(TSR_ERR_OVERFLOW, "%s overflows (%zu * %zu + %zu exceeds %zu)", what, a, b, c, (size_t)SIZE_MAX);
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

/* Byte range [*begin, *end) of floats [off, off + count) of `mem` in its root buffer. */
static tsr_status root_range(cl_mem mem, const char *name, size_t off, size_t count, cl_mem *root, size_t *begin,
                             size_t *end) {
    tsr_mem_region r = {NULL, 0, 0};
    tsr_status st = tsr_mem_region_of(mem, name, &r);
    if (st == TSR_SUCCESS) st = tsr_size_mad("a buffer range's start", off, sizeof(float), r.origin, begin);
    if (st == TSR_SUCCESS) st = tsr_size_mad("a buffer range's end", count, sizeof(float), *begin, end);
    *root = r.root;
    return st;
}

tsr_status tsr_ranges_relate(cl_mem a, size_t a_off, size_t a_count, cl_mem b, size_t b_off, size_t b_count,
                             tsr_ranges *relation) {
    *relation = TSR_RANGES_DISJOINT;
    if (a_count == 0 || b_count == 0) return TSR_SUCCESS;
    cl_mem ra = NULL, rb = NULL;
    size_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    tsr_status st;
    if ((st = root_range(a, "a", a_off, a_count, &ra, &a0, &a1)) != TSR_SUCCESS ||
        (st = root_range(b, "b", b_off, b_count, &rb, &b0, &b1)) != TSR_SUCCESS)
        return st;
    if (ra != rb || a1 <= b0 || b1 <= a0) return TSR_SUCCESS;
    *relation = a0 == b0 && a1 == b1 ? TSR_RANGES_SAME : TSR_RANGES_OVERLAP;
    return TSR_SUCCESS;
}

tsr_status tsr_check_disjoint(const char *op, cl_mem a, const char *a_name, size_t a_off, size_t a_count, cl_mem b,
                              const char *b_name, size_t b_off, size_t b_count, bool same_ok) {
    tsr_ranges rel;
    tsr_status st = tsr_ranges_relate(a, a_off, a_count, b, b_off, b_count, &rel);
    if (st != TSR_SUCCESS || rel == TSR_RANGES_DISJOINT || (rel == TSR_RANGES_SAME && same_ok)) return st;
    cl_mem root;
    size_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    root_range(a, a_name, a_off, a_count, &root, &a0, &a1);
    root_range(b, b_name, b_off, b_count, &root, &b0, &b1);
    return tsr_fail(TSR_ERR_INVALID_ARG,
                    "%s: %s overlaps %s: they cover bytes [%zu, %zu) and [%zu, %zu) of one buffer (sub-buffers "
                    "resolved to their parent); %s", op, a_name, b_name, a0, a1, b0, b1,
                    same_ok ? "in place needs exactly the same range" : "this op cannot run in place");
}

tsr_status tsr_check_buffer(const tsr_device *dev, cl_mem mem, const char *name, size_t elements) {
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
    if (size / sizeof(float) < elements)
        return tsr_fail(TSR_ERR_BUFFER_TOO_SMALL, "buffer %s holds %zu floats but the call needs %zu", name,
                        size / sizeof(float), elements);
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

tsr_status tsr_upload(tsr_device *dev, cl_mem mem, const float *host, size_t count) {
    tsr_status status = TSR_SUCCESS;
    TSR_CL_CHECK(clEnqueueWriteBuffer(dev->queue, mem, CL_TRUE, 0, count * sizeof(float), host, 0, NULL, NULL), out);
out:
    return status;
}

tsr_status tsr_download(tsr_device *dev, cl_mem mem, float *host, size_t count) {
    tsr_status status = TSR_SUCCESS;
    TSR_CL_CHECK(clEnqueueReadBuffer(dev->queue, mem, CL_TRUE, 0, count * sizeof(float), host, 0, NULL, NULL), out);
out:
    return status;
}

/* ---- ahead-of-time binaries ---- */

static int count_classes(const tsr_op *op) {
    int n = 0;
    while (op->classes[n]) ++n;
    return n;
}

tsr_status tsr_build_binaries(tsr_device *dev, const char *dir, size_t *written) {
    tsr_clear_diagnostics();
    if (!dev || !dir || !*dir || !written)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_build_binaries: device, dir and written must be set");
    *written = 0;
    if (dev->offline)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "device '%s' cannot compile kernels (no online compiler or "
                        "TSR_FORCE_OFFLINE set); build binaries on a device that has one", dev->info.name);
    tsr_status status = tsr_make_dirs(dir);
    if (status != TSR_SUCCESS) return status;
    cJSON *manifest = cJSON_CreateObject();
    if (!manifest) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    cJSON_AddStringToObject(manifest, "tessera_version", TSR_VERSION_STRING);
    cJSON_AddStringToObject(manifest, "device", dev->fingerprint);
    cJSON *entries = cJSON_AddArrayToObject(manifest, "binaries");
    for (const tsr_op *const *op = tsr_ops; *op; ++op) {
        const tsr_op *o = *op;
        /* Per problem class, the configuration launches resolve to (tuned or default) and the
         * built-in default, in every variant a launch can ask for. */
        for (int variant = 0; variant < 2 * o->nvariants * count_classes(o); ++variant) {
            tsr_config config;
            const char *cls = o->classes[variant / (2 * o->nvariants)];
            if ((variant / o->nvariants) % 2 == 0) {
                if ((status = tsr_resolve_config(dev, o, cls, &config, NULL)) != TSR_SUCCESS) goto out;
            } else {
                o->default_config(dev, cls, &config);
            }
            char options[1024];
            o->build_options(&config, variant % o->nvariants, options, sizeof options);
            bool seen = false;
            for (cJSON *e = entries->child; e && !seen; e = e->next)
                seen = strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "options")), options) == 0;
            if (seen) continue; /* classes may share a configuration */
            status = tsr_program_write_binary(dev, o->source_name, options, dir);
            if (status != TSR_SUCCESS) goto out;
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "op", o->name);
            cJSON_AddStringToObject(e, "source", o->source_name);
            cJSON_AddStringToObject(e, "options", options);
            cJSON_AddItemToArray(entries, e);
            ++*written;
        }
    }
    char *text = cJSON_Print(manifest);
    char path[TSR_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    status = text ? tsr_write_file_atomic(path, text, strlen(text)) : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    free(text);
out:
    cJSON_Delete(manifest);
    return status;
}

/* ---- workspaces ---- */

tsr_status tsr_workspace_get(tsr_device *dev, int slot, size_t bytes, cl_mem *buffer, cl_event *wait) {
    struct tsr_workspace *w = &dev->workspace[slot];
    if (w->bytes < bytes) {
        /* Grow geometrically so a sequence of slightly larger calls does not reallocate each time.
         * Release the old buffer first, so old and new never both occupy device memory; that is
         * safe while commands still use it, since OpenCL frees it only after they finish. */
        size_t want;
        if (__builtin_add_overflow(bytes, bytes / 4 + 63, &want) || (want = want / 64 * 64) > dev->info.max_alloc_bytes)
            want = bytes; /* never less than asked: a wrapped size would hand out a too small buffer */
        if (w->buffer) clReleaseMemObject(w->buffer);
        w->buffer = NULL;
        w->bytes = 0;
        cl_int err;
        cl_mem grown = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, want, NULL, &err);
        if (err != CL_SUCCESS)
            return tsr_fail(err == CL_INVALID_BUFFER_SIZE ? TSR_ERR_OUT_OF_MEMORY : TSR_ERR_OPENCL,
                            "cannot allocate a %zu-byte workspace: %s (%d)", want, tsr_cl_error_name(err), (int)err);
        w->buffer = grown;
        w->bytes = want;
        /* Zero it once, so no path can ever read undefined memory from it (padding included).
         * A host write rather than clEnqueueFillBuffer: Oclgrind 21.10 keeps flagging memory
         * that was filled and later written by a kernel as uninitialized, which would blind its
         * checker to real problems in the kernels. */
        void *zeros = calloc(1, want);
        if (!zeros) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of host memory zeroing a %zu-byte workspace", want);
        err = clEnqueueWriteBuffer(dev->queue, grown, CL_TRUE, 0, want, zeros, 0, NULL, NULL);
        free(zeros);
        if (err != CL_SUCCESS) return tsr_fail_cl(err, "clEnqueueWriteBuffer(workspace)", __FILE__, __LINE__);
        tsr_workspace_set_last_use(dev, slot, NULL);
    }
    *buffer = w->buffer;
    *wait = w->last_use;
    return TSR_SUCCESS;
}

void tsr_workspace_set_last_use(tsr_device *dev, int slot, cl_event event) {
    struct tsr_workspace *w = &dev->workspace[slot];
    if (event) clRetainEvent(event);
    if (w->last_use) clReleaseEvent(w->last_use);
    w->last_use = event;
}

void tsr_workspace_release(tsr_device *dev) {
    for (int i = 0; i < TSR_WORKSPACE_SLOTS; ++i) {
        if (dev->workspace[i].last_use) clReleaseEvent(dev->workspace[i].last_use);
        if (dev->workspace[i].buffer) clReleaseMemObject(dev->workspace[i].buffer);
        memset(&dev->workspace[i], 0, sizeof dev->workspace[i]);
    }
}
