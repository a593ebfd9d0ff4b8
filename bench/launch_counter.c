/* A preload for bench/call_overhead --ops (LD_PRELOAD, never linked into a product): counts the
 * OpenCL commands and host waits a tessera call makes, and while recording keeps each kernel's
 * event, so the bench can add up the device time a call's kernels took (profiling queue).
 * It forwards every call to the real OpenCL library (dlsym RTLD_NEXT). The bench reaches it
 * through dlsym, so nothing links against it: single-threaded use, plain counters. */
#define _GNU_SOURCE
#include <CL/cl.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_EVENTS 65536

/* kernel launches, host waits (clFinish, clWaitForEvents, blocking transfers), transfers, kernel
 * arguments set (clSetKernelArg), kernel objects created (clCreateKernel) */
static uint64_t counts[5];
static int recording;
static cl_event events[MAX_EVENTS];
static size_t nevents;

#define REAL(name, type)                             \
    static type real;                                \
    if (!real) real = (type)dlsym(RTLD_NEXT, #name); \
    if (!real) return CL_INVALID_OPERATION

typedef cl_int (*ndrange_fn)(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *,
                             cl_uint, const cl_event *, cl_event *);
typedef cl_int (*finish_fn)(cl_command_queue);
typedef cl_int (*setarg_fn)(cl_kernel, cl_uint, size_t, const void *);
typedef cl_kernel (*create_kernel_fn)(cl_program, const char *, cl_int *);
typedef cl_int (*wait_fn)(cl_uint, const cl_event *);
typedef cl_int (*rw_fn)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint, const cl_event *,
                        cl_event *);
typedef cl_int (*write_fn)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *, cl_uint, const cl_event *,
                           cl_event *);

void launch_counter_read(uint64_t out[5]);
void launch_counter_record(int on);
size_t launch_counter_events(cl_event **list);
void launch_counter_clear(void);

CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue queue, cl_kernel kernel, cl_uint dims,
                                                       const size_t *offset, const size_t *global, const size_t *local,
                                                       cl_uint nwaits, const cl_event *waits, cl_event *event) {
    REAL(clEnqueueNDRangeKernel, ndrange_fn);
    counts[0]++;
    if (!recording) return real(queue, kernel, dims, offset, global, local, nwaits, waits, event);
    cl_event own = NULL;
    cl_int err = real(queue, kernel, dims, offset, global, local, nwaits, waits, event ? event : &own);
    if (err == CL_SUCCESS) {
        cl_event e = event ? *event : own;
        if (event) clRetainEvent(e);
        if (nevents < MAX_EVENTS) events[nevents++] = e;
        else clReleaseEvent(e);
    }
    return err;
}

CL_API_ENTRY cl_int CL_API_CALL clSetKernelArg(cl_kernel kernel, cl_uint index, size_t size, const void *value) {
    REAL(clSetKernelArg, setarg_fn);
    counts[3]++;
    return real(kernel, index, size, value);
}

CL_API_ENTRY cl_kernel CL_API_CALL clCreateKernel(cl_program program, const char *name, cl_int *err) {
    static create_kernel_fn real;
    if (!real) real = (create_kernel_fn)dlsym(RTLD_NEXT, "clCreateKernel");
    if (!real) {
        if (err) *err = CL_INVALID_OPERATION;
        return NULL;
    }
    counts[4]++;
    return real(program, name, err);
}

CL_API_ENTRY cl_int CL_API_CALL clFinish(cl_command_queue queue) {
    REAL(clFinish, finish_fn);
    counts[1]++;
    return real(queue);
}

CL_API_ENTRY cl_int CL_API_CALL clWaitForEvents(cl_uint n, const cl_event *list) {
    REAL(clWaitForEvents, wait_fn);
    counts[1]++;
    return real(n, list);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueReadBuffer(cl_command_queue queue, cl_mem mem, cl_bool blocking,
                                                    size_t offset, size_t size, void *ptr, cl_uint nwaits,
                                                    const cl_event *waits, cl_event *event) {
    REAL(clEnqueueReadBuffer, rw_fn);
    counts[2]++;
    if (blocking) counts[1]++;
    return real(queue, mem, blocking, offset, size, ptr, nwaits, waits, event);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue queue, cl_mem mem, cl_bool blocking,
                                                     size_t offset, size_t size, const void *ptr, cl_uint nwaits,
                                                     const cl_event *waits, cl_event *event) {
    REAL(clEnqueueWriteBuffer, write_fn);
    counts[2]++;
    if (blocking) counts[1]++;
    return real(queue, mem, blocking, offset, size, ptr, nwaits, waits, event);
}

/* What the bench reads (through dlsym). */
void launch_counter_read(uint64_t out[5]) {
    for (int i = 0; i < 5; ++i) out[i] = counts[i];
}

void launch_counter_record(int on) { recording = on; }

/* The kernel events recorded so far; the caller releases them and calls launch_counter_clear. */
size_t launch_counter_events(cl_event **list) {
    *list = events;
    return nevents;
}

void launch_counter_clear(void) { nevents = 0; }
