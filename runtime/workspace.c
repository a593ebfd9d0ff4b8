/* Per-device scratch buffers that ops reuse between calls (GEMM's packed panels, temporaries). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

tsr_status tsr_workspace_get(tsr_device *dev, int slot, size_t bytes, cl_mem *buffer, cl_event *wait) {
    struct tsr_workspace *w = &dev->workspace[slot];
    if (w->bytes < bytes) {
        /* Grow geometrically so a sequence of slightly larger calls does not reallocate each time.
         * Release the old buffer first, so old and new never both occupy device memory; that is
         * safe while commands still use it, since OpenCL frees it only after they finish. */
        size_t want;
        if (__builtin_add_overflow(bytes, bytes / 4 + 63, &want) || (want = want / 64 * 64) > dev->info.max_alloc_bytes)
            want = bytes; /* never less than asked: a wrapped size would hand out a too small buffer */
        /* A graph recorded before may still replay on the old buffer: its last use carries over
         * to tsr_workspace_retired_use's chain, which such replays wait for. */
        if (w->buffer && w->last_use) {
            tsr_status st = tsr_workspace_retired_use(dev, w->last_use);
            if (st != TSR_SUCCESS) return st;
        }
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

tsr_status tsr_workspace_retired_use(tsr_device *dev, cl_event use) {
    cl_event before = dev->workspace_retired_use;
    if (!before) {
        clRetainEvent(use);
        dev->workspace_retired_use = use;
        return TSR_SUCCESS;
    }
    if (before == use) return TSR_SUCCESS;
    /* one event for both: a marker after the two (on the device's queue; events of one context
     * may be waited for on any of its queues) */
    cl_event both[2] = {before, use}, merged = NULL;
    cl_int err = clEnqueueMarkerWithWaitList(dev->queue, 2, both, &merged);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "clEnqueueMarkerWithWaitList(retired workspace)", __FILE__, __LINE__);
    clReleaseEvent(before);
    dev->workspace_retired_use = merged;
    return TSR_SUCCESS;
}

void tsr_workspace_release(tsr_device *dev) {
    if (dev->workspace_retired_use) clReleaseEvent(dev->workspace_retired_use);
    dev->workspace_retired_use = NULL;
    for (int i = 0; i < TSR_WORKSPACE_SLOTS; ++i) {
        if (dev->workspace[i].last_use) clReleaseEvent(dev->workspace[i].last_use);
        if (dev->workspace[i].buffer) clReleaseMemObject(dev->workspace[i].buffer);
        free(dev->workspace[i].host);
        memset(&dev->workspace[i], 0, sizeof dev->workspace[i]);
    }
}
