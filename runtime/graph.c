/* Recorded launch sequences (tsr_graph_*, docs/graph.md): between tsr_graph_begin and
 * tsr_graph_end the calling thread's op calls run as always and every kernel launch is also
 * recorded, with its own kernel object whose arguments are set once; a replay enqueues the
 * recorded kernels in order and nothing else. Every op's launch goes through tsr_kernel_arg and
 * tsr_enqueue_kernel (internal.h), which record only while their thread captures. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 64
#define MAX_ARG_BYTES 256

typedef struct graph_launch {
    cl_kernel kernel; /* the graph's own, arguments set at record time */
    cl_uint dims;
    size_t offset[3], global[3], local[3];
    bool has_offset, has_local;
} graph_launch;

struct tsr_graph {
    tsr_device *device;
    uint64_t generation;     /* the device's launch generation when recording began */
    char name[64];
    pthread_mutex_t lock;    /* one replay at a time: its launches stay contiguous */
    graph_launch *launches;
    size_t nlaunches, cap_launches;
    cl_mem *buffers;         /* every buffer argument, retained (duplicates kept once) */
    size_t nbuffers, cap_buffers;
    cl_mem *outputs;         /* the caller buffers its ops write (tsr_op_output), retained */
    size_t noutputs, cap_outputs;
    cl_mem workspace[TSR_WORKSPACE_SLOTS]; /* the device workspaces it reads, as recorded */
    tsr_derived_ref *deps;   /* kept data its launches read (tsr_graph_note_derived), roots retained */
    size_t ndeps, cap_deps;
    cl_event last;           /* the previous replay's last launch */
    cl_command_queue last_queue;
};

/* The capture of one thread: the graph being recorded, the arguments set since the last
 * launch of `pending_kernel`, and the first reason the capture failed. */
typedef struct capture {
    tsr_graph *graph;
    tsr_status failed;
    char message[512];
    cl_kernel pending_kernel;
    bool set[MAX_ARGS], buffer[MAX_ARGS], null_value[MAX_ARGS];
    size_t size[MAX_ARGS];
    unsigned char value[MAX_ARGS][MAX_ARG_BYTES];
} capture;

static _Thread_local capture *tls_capture;

static void capture_fail(capture *c, tsr_status status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void capture_fail(capture *c, tsr_status status, const char *fmt, ...) {
    if (c->failed != TSR_SUCCESS) return; /* the first reason counts */
    c->failed = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->message, sizeof c->message, fmt, ap);
    va_end(ap);
}

static uint64_t device_generation(tsr_device *dev) {
    pthread_mutex_lock(&dev->program_lock);
    uint64_t g = dev->launch_generation;
    pthread_mutex_unlock(&dev->program_lock);
    return g;
}

static void graph_free(tsr_graph *g) {
    if (!g) return;
    for (size_t i = 0; i < g->nlaunches; ++i) clReleaseKernel(g->launches[i].kernel);
    for (size_t i = 0; i < g->nbuffers; ++i) clReleaseMemObject(g->buffers[i]);
    for (size_t i = 0; i < g->noutputs; ++i) clReleaseMemObject(g->outputs[i]);
    free(g->outputs);
    for (size_t i = 0; i < g->ndeps; ++i) clReleaseMemObject(g->deps[i].root);
    free(g->deps);
    if (g->last) clReleaseEvent(g->last);
    free(g->launches);
    free(g->buffers);
    pthread_mutex_destroy(&g->lock);
    if (g->device) tsr_device_drop(g->device);
    free(g);
}

bool tsr_graph_capturing(void) { return tls_capture != NULL; }

tsr_status tsr_graph_refuse(const char *op, const char *why) {
    capture *c = tls_capture;
    if (!c) return TSR_SUCCESS;
    capture_fail(c, TSR_ERR_UNSUPPORTED, "%s cannot be recorded in a graph: %s; record only the device-only part", op,
                 why);
    return tsr_fail(TSR_ERR_UNSUPPORTED, "%s", c->message);
}

cl_int tsr_kernel_arg(cl_kernel kernel, cl_uint index, size_t size, const void *value, bool is_buffer) {
    capture *c = tls_capture;
    /* the held cached kernel's shadow (internal.h): by-value arguments only, never while recording */
    tsr_kernel *held = tsr_held_kernel;
    if (held && held->kernel != kernel) held = NULL;
    const bool shadowed = held && index < TSR_KERNEL_SHADOW_ARGS && !is_buffer && value && size > 0 &&
                          size <= TSR_KERNEL_SHADOW_BYTES;
    if (shadowed && !c && held->shadow_size[index] == size && memcmp(held->shadow[index], value, size) == 0)
        return CL_SUCCESS; /* the object holds this value already */
    cl_int err = clSetKernelArg(kernel, index, size, value);
    if (held && index < TSR_KERNEL_SHADOW_ARGS) {
        held->shadow_size[index] = shadowed && err == CL_SUCCESS ? (uint8_t)size : 0;
        if (held->shadow_size[index]) memcpy(held->shadow[index], value, size);
    }
    if (!c || err != CL_SUCCESS) return err;
    if (c->pending_kernel != kernel) {
        memset(c->set, 0, sizeof c->set);
        c->pending_kernel = kernel;
    }
    /* (a NULL value is local memory of `size` bytes: only its size is kept) */
    if (index >= MAX_ARGS || (value && size > MAX_ARG_BYTES)) {
        capture_fail(c, TSR_ERR_UNSUPPORTED, "a kernel argument (index %u, %zu bytes) is beyond what a graph records",
                     (unsigned)index, size);
        return err;
    }
    c->set[index] = true;
    c->buffer[index] = is_buffer && value != NULL;
    c->null_value[index] = value == NULL;
    c->size[index] = size;
    if (value) memcpy(c->value[index], value, size);
    return err;
}

static bool graph_grow(void **array, size_t *cap, size_t n, size_t item) {
    if (n < *cap) return true;
    size_t want = *cap ? 2 * *cap : 16;
    void *grown = realloc(*array, want * item);
    if (!grown) return false;
    *array = grown;
    *cap = want;
    return true;
}

void tsr_op_output(cl_mem buffer) {
    if (!buffer) return;
    tsr_buffer_written(buffer);
    capture *c = tls_capture;
    if (!c) return;
    tsr_graph *g = c->graph;
    for (size_t i = 0; i < g->noutputs; ++i)
        if (g->outputs[i] == buffer) return;
    if (!graph_grow((void **)&g->outputs, &g->cap_outputs, g->noutputs, sizeof *g->outputs)) {
        capture_fail(c, TSR_ERR_OUT_OF_MEMORY, "out of host memory recording an op's output");
        return;
    }
    clRetainMemObject(buffer);
    g->outputs[g->noutputs++] = buffer;
}

void tsr_graph_note_derived(const tsr_derived_ref *ref) {
    capture *c = tls_capture;
    if (!c || !ref->root) return;
    tsr_graph *g = c->graph;
    for (size_t i = 0; i < g->ndeps; ++i) {
        const tsr_derived_ref *d = &g->deps[i];
        if (d->root == ref->root && d->serial == ref->serial && d->generation == ref->generation &&
            d->offset == ref->offset && !strcmp(d->key, ref->key))
            return;
    }
    if (!graph_grow((void **)&g->deps, &g->cap_deps, g->ndeps, sizeof *g->deps)) {
        capture_fail(c, TSR_ERR_OUT_OF_MEMORY, "out of host memory recording kept data's dependency");
        return;
    }
    clRetainMemObject(ref->root);
    g->deps[g->ndeps++] = *ref;
}

/* Record the launch just enqueued into the capture's graph (the caller checked c != NULL). */
static void record_launch(capture *c, cl_kernel kernel, cl_uint dims, const size_t *offset, const size_t *global,
                          const size_t *local) {
    tsr_graph *g = c->graph;
    tsr_device *dev = g->device;
    char name[128] = "";
    cl_program program = NULL;
    cl_context context = NULL;
    cl_uint nargs = 0;
    if (clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL) != CL_SUCCESS ||
        clGetKernelInfo(kernel, CL_KERNEL_PROGRAM, sizeof program, &program, NULL) != CL_SUCCESS ||
        clGetKernelInfo(kernel, CL_KERNEL_CONTEXT, sizeof context, &context, NULL) != CL_SUCCESS ||
        clGetKernelInfo(kernel, CL_KERNEL_NUM_ARGS, sizeof nargs, &nargs, NULL) != CL_SUCCESS) {
        capture_fail(c, TSR_ERR_OPENCL, "clGetKernelInfo failed on a launch being recorded");
        return;
    }
    if (context != dev->context) {
        capture_fail(c, TSR_ERR_UNSUPPORTED, "kernel '%s' was launched on another device than the graph's", name);
        return;
    }
    if (c->pending_kernel != kernel || nargs > MAX_ARGS || dims < 1 || dims > 3) {
        capture_fail(c, TSR_ERR_UNSUPPORTED, "kernel '%s' was launched without its arguments set through the recorder",
                     name);
        return;
    }
    for (cl_uint i = 0; i < nargs; ++i)
        if (!c->set[i]) {
            capture_fail(c, TSR_ERR_UNSUPPORTED,
                         "kernel '%s' was launched with argument %u set before the call: a graph records only "
                         "launches whose every argument the call sets",
                         name, (unsigned)i);
            return;
        }
    if (!graph_grow((void **)&g->launches, &g->cap_launches, g->nlaunches, sizeof *g->launches)) {
        capture_fail(c, TSR_ERR_OUT_OF_MEMORY, "out of host memory recording kernel '%s'", name);
        return;
    }
    cl_int err;
    cl_kernel own = clCreateKernel(program, name, &err);
    if (err != CL_SUCCESS) {
        capture_fail(c, TSR_ERR_OPENCL, "clCreateKernel('%s') failed recording a launch: %s (%d)", name,
                     tsr_cl_error_name(err), (int)err);
        return;
    }
    for (cl_uint i = 0; i < nargs; ++i) {
        err = clSetKernelArg(own, i, c->size[i], c->null_value[i] ? NULL : c->value[i]);
        if (err != CL_SUCCESS) {
            clReleaseKernel(own);
            capture_fail(c, TSR_ERR_OPENCL, "clSetKernelArg('%s', %u) failed recording a launch: %s (%d)", name,
                         (unsigned)i, tsr_cl_error_name(err), (int)err);
            return;
        }
    }
    /* Retain every buffer argument once; note which device workspaces it is. */
    for (cl_uint i = 0; i < nargs; ++i) {
        if (!c->buffer[i]) continue;
        cl_mem mem;
        memcpy(&mem, c->value[i], sizeof mem);
        if (!mem) continue;
        bool known = false;
        for (size_t j = 0; j < g->nbuffers && !known; ++j) known = g->buffers[j] == mem;
        if (known) continue;
        if (!graph_grow((void **)&g->buffers, &g->cap_buffers, g->nbuffers, sizeof *g->buffers)) {
            clReleaseKernel(own);
            capture_fail(c, TSR_ERR_OUT_OF_MEMORY, "out of host memory recording kernel '%s'", name);
            return;
        }
        clRetainMemObject(mem);
        g->buffers[g->nbuffers++] = mem;
    }
    graph_launch *l = &g->launches[g->nlaunches++];
    memset(l, 0, sizeof *l);
    l->kernel = own;
    l->dims = dims;
    for (cl_uint d = 0; d < dims; ++d) {
        l->global[d] = global[d];
        if (offset) l->offset[d] = offset[d];
        if (local) l->local[d] = local[d];
    }
    l->has_offset = offset != NULL;
    l->has_local = local != NULL;
    c->pending_kernel = NULL; /* the next launch sets its arguments again */
}

const size_t *tsr_spread_local(const tsr_device *dev, cl_uint dims, const size_t *global, size_t local[3]) {
    if (dev->info.type != TSR_DEVICE_CPU || dims < 1 || dims > 3) return NULL;
    size_t cu = dev->info.compute_units ? dev->info.compute_units : 1, target = (size_t)TSR_SPREAD_GROUPS * cu;
    size_t cap = dev->info.max_work_group_size && dev->info.max_work_group_size < 1024 ? dev->info.max_work_group_size
                                                                                        : 1024;
    size_t groups = 1, items = 1;
    for (cl_uint d = 0; d < dims; ++d) local[d] = 1, groups *= global[d] ? global[d] : 1;
    /* the first dimension whole while groups stay many enough, then the next, ... */
    for (cl_uint d = 0; d < dims; ++d) {
        /* groups / l >= target exactly when l <= groups / target: start there (the walk below runs
         * on every such launch, a division a step) */
        size_t l = global[d] < cap / items ? global[d] : cap / items;
        if (l > groups / target) l = groups / target;
        for (; l > 1; --l)
            if (global[d] % l == 0) break;
        if (l < 1) l = 1;
        local[d] = l, groups /= l, items *= l;
        if (l < global[d]) break;
    }
    return local;
}

cl_int tsr_enqueue_kernel(cl_command_queue queue, cl_kernel kernel, cl_uint dims, const size_t *offset,
                          const size_t *global, const size_t *local, cl_uint nwaits, const cl_event *waits,
                          cl_event *event) {
    cl_int err = clEnqueueNDRangeKernel(queue, kernel, dims, offset, global, local, nwaits, waits, event);
    capture *c = tls_capture;
    if (!c) return err;
    if (err != CL_SUCCESS)
        capture_fail(c, TSR_ERR_OPENCL, "a launch failed during the capture (%s)", tsr_cl_error_name(err));
    else if (c->failed == TSR_SUCCESS)
        record_launch(c, kernel, dims, offset, global, local);
    return err;
}

tsr_status tsr_graph_begin(tsr_device *dev, const tsr_graph_desc *desc) {
    tsr_clear_diagnostics();
    if (!dev) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_graph_begin: device is NULL");
    if (tls_capture)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "tsr_graph_begin: this thread is already recording a graph; end it first (tsr_graph_end)");
    if (desc && desc->name && strlen(desc->name) >= sizeof((tsr_graph *)0)->name)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_graph_begin: desc->name is longer than 63 characters");
    capture *c = calloc(1, sizeof *c);
    tsr_graph *g = calloc(1, sizeof *g);
    if (!c || !g) {
        free(c);
        free(g);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "tsr_graph_begin: out of host memory");
    }
    pthread_mutex_init(&g->lock, NULL);
    snprintf(g->name, sizeof g->name, "%s", desc && desc->name ? desc->name : "graph");
    tsr_device_hold(dev);
    g->device = dev;
    g->generation = device_generation(dev);
    c->graph = g;
    tls_capture = c;
    return TSR_SUCCESS;
}

tsr_status tsr_graph_end(tsr_device *dev, tsr_graph **out) {
    tsr_clear_diagnostics();
    if (out) *out = NULL;
    capture *c = tls_capture;
    if (!c) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_graph_end: this thread is not recording a graph (tsr_graph_begin)");
    if (dev != c->graph->device)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_graph_end: device is not the one this thread's recording began on");
    tls_capture = NULL;
    tsr_graph *g = c->graph;
    tsr_status status = c->failed;
    if (status == TSR_SUCCESS && !out) status = tsr_fail(TSR_ERR_INVALID_ARG, "tsr_graph_end: out is NULL");
    else if (status != TSR_SUCCESS)
        tsr_fail(status, "tsr_graph_end: the recording of '%s' is invalid: %s", g->name, c->message);
    else if (device_generation(dev) != g->generation)
        status = tsr_fail(TSR_ERR_INVALID_ARG,
                          "tsr_graph_end: the device's configuration changed while '%s' was recorded "
                          "(an override, a re-tune or a dropped binary): re-record it",
                          g->name);
    free(c);
    if (status == TSR_SUCCESS) {
        /* the device workspaces it reads (found here, not at record time: a launch holds its
         * kernel's leaf lock there) */
        pthread_mutex_lock(&dev->lock);
        for (size_t j = 0; j < g->nbuffers; ++j)
            for (int s = 0; s < TSR_WORKSPACE_SLOTS; ++s)
                if (dev->workspace[s].buffer == g->buffers[j]) g->workspace[s] = g->buffers[j];
        pthread_mutex_unlock(&dev->lock);
    }
    if (status != TSR_SUCCESS) {
        graph_free(g);
        return status;
    }
    *out = g;
    return TSR_SUCCESS;
}

tsr_status tsr_graph_launch(tsr_graph *g, cl_command_queue queue, cl_event *event) {
    if (event) *event = NULL;
    if (!g) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_graph_launch: graph is NULL");
    tsr_device *dev = g->device;
    if (tsr_device_closed(dev))
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_graph_launch: the device of graph '%s' was closed", g->name);
    if (device_generation(dev) != g->generation)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "tsr_graph_launch: the device's configuration changed since graph '%s' was recorded (an "
                        "override, a re-tune or a dropped binary): re-record it",
                        g->name);
    /* Kept data a recorded launch reads (a GEMM's strip copy of weights marked constant) must be
     * what its buffer holds now: never a replay on a stale copy. */
    for (size_t i = 0; i < g->ndeps; ++i)
        if (!tsr_derived_current(&g->deps[i]))
            return tsr_fail(TSR_ERR_INVALID_ARG,
                            "tsr_graph_launch: graph '%s' reads data kept for a buffer marked constant ('%s') that "
                            "changed or was unmarked since the graph was recorded (tsr_buffer_changed, an op wrote "
                            "it, or tsr_buffer_set_constant(false)): record the graph again",
                            g->name, g->deps[i].key);
    if (!queue) queue = dev->queue;
    tsr_status status = TSR_SUCCESS;
    cl_context context = NULL;
    cl_command_queue_properties props = 0;
    TSR_CL_CHECK(status, clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof context, &context, NULL), done);
    if (context != dev->context)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_graph_launch: queue belongs to another context than graph '%s''s device",
                        g->name);
    TSR_CL_CHECK(status, clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL), done);
    bool in_order = !(props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);

    pthread_mutex_lock(&g->lock);
    pthread_mutex_lock(&dev->lock); /* the workspaces' last_use */
    /* Wait for what must come first: the previous replay when it ran on another queue (or this
     * queue runs out of order), and the last reader of each workspace the graph uses. */
    cl_event waits[TSR_WORKSPACE_SLOTS + 2];
    cl_uint nwaits = 0;
    if (g->last && (queue != g->last_queue || !in_order)) waits[nwaits++] = g->last;
    bool uses_workspace = false, uses_retired = false;
    for (int s = 0; s < TSR_WORKSPACE_SLOTS; ++s) {
        if (!g->workspace[s]) continue;
        if (dev->workspace[s].buffer != g->workspace[s]) { /* replaced since: see workspace_retired_use */
            uses_retired = true;
            continue;
        }
        uses_workspace = true;
        if (dev->workspace[s].last_use) waits[nwaits++] = dev->workspace[s].last_use;
    }
    /* A buffer a growth replaced is no slot's any more, but every graph recorded with it replays
     * on it: such replays go one after the other, after the buffer's last users before the
     * growth (two graphs of split GEMMs on two queues otherwise wrote one buffer of partial
     * products at once, session 21's review). */
    if (uses_retired && dev->workspace_retired_use) waits[nwaits++] = dev->workspace_retired_use;
    cl_event prev = NULL, ev = NULL;
    if (!in_order && g->nlaunches) {
        /* out of order: after everything enqueued before (a barrier), then each launch after the
         * one before */
        TSR_CL_CHECK(status, clEnqueueBarrierWithWaitList(queue, nwaits, nwaits ? waits : NULL, &prev), unlock);
        nwaits = 0;
    }
    for (size_t i = 0; i < g->nlaunches && status == TSR_SUCCESS; ++i) {
        const graph_launch *l = &g->launches[i];
        bool last = i + 1 == g->nlaunches;
        cl_uint n = in_order ? (i == 0 ? nwaits : 0) : 1;
        const cl_event *w = in_order ? waits : &prev;
        /* an event for each launch on an out-of-order queue (the next waits for it), else only the last */
        bool want = !in_order || last;
        cl_int err = clEnqueueNDRangeKernel(queue, l->kernel, l->dims, l->has_offset ? l->offset : NULL, l->global,
                                            l->has_local ? l->local : NULL, n, n ? w : NULL, want ? &ev : NULL);
        if (prev) clReleaseEvent(prev);
        prev = ev;
        ev = NULL;
        if (err != CL_SUCCESS) status = tsr_fail_cl(err, "clEnqueueNDRangeKernel (graph replay)", __FILE__, __LINE__);
    }
    if (status == TSR_SUCCESS && g->nlaunches == 0)
        TSR_CL_CHECK(status, clEnqueueMarkerWithWaitList(queue, nwaits, nwaits ? waits : NULL, &prev), unlock);
    if (status == TSR_SUCCESS) {
        if (uses_workspace)
            for (int s = 0; s < TSR_WORKSPACE_SLOTS; ++s)
                if (g->workspace[s] && dev->workspace[s].buffer == g->workspace[s]) tsr_workspace_set_last_use(dev, s, prev);
        if (uses_retired) { /* the replay is the retired buffers' last use now */
            clRetainEvent(prev);
            if (dev->workspace_retired_use) clReleaseEvent(dev->workspace_retired_use);
            dev->workspace_retired_use = prev;
        }
        for (size_t i = 0; i < g->noutputs; ++i) tsr_buffer_written(g->outputs[i]); /* marked ones' data is stale */
        if (g->last) clReleaseEvent(g->last);
        g->last = prev;
        g->last_queue = queue;
        if (event) {
            clRetainEvent(prev);
            *event = prev;
        }
        prev = NULL;
    }
unlock:
    if (prev) clReleaseEvent(prev);
    pthread_mutex_unlock(&dev->lock);
    pthread_mutex_unlock(&g->lock);
done:
    return status;
}

tsr_status tsr_graph_info(const tsr_graph *g, size_t *launches, size_t *buffers) {
    if (!g) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_graph_info: graph is NULL");
    if (launches) *launches = g->nlaunches;
    if (buffers) *buffers = g->nbuffers;
    return TSR_SUCCESS;
}

void tsr_graph_destroy(tsr_graph *g) {
    if (!g) return;
    graph_free(g);
}
