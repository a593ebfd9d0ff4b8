/* Data-parallel all-reduce of a device buffer: chunks read from the device, summed across ranks
 * with MPI_Iallreduce and written back, pipelined three chunks deep (one being read, one being
 * reduced, one being written) so device transfers overlap the reduction. */
#include "tessera_mpi.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#define DEFAULT_CHUNK ((size_t)1 << 20)
#define SLOTS 3

typedef struct chunk_slot {
    float *host;
    cl_event read, write;
    MPI_Request reduce;
} chunk_slot;

static double wait_event(MPI_Comm comm, cl_event *event, const char *what) {
    if (!*event) return 0;
    double start = MPI_Wtime();
    cl_int err = clWaitForEvents(1, event);
    cl_int state = CL_COMPLETE;
    if (err == CL_SUCCESS) err = clGetEventInfo(*event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL);
    if (err != CL_SUCCESS || state < 0) {
        tsr_set_cl_error(err != CL_SUCCESS ? err : state, what, __FILE__, __LINE__);
        tsr_mpi_abort(comm, "all-reduce: %s", tsr_last_error());
    }
    clReleaseEvent(*event);
    *event = NULL;
    return MPI_Wtime() - start;
}

tsr_status tsr_mpi_allreduce_device(tsr_device *device, MPI_Comm comm, cl_mem buffer, size_t offset, size_t count,
                                    size_t chunk, tsr_mpi_allreduce_times *times) {
    tsr_mpi_allreduce_times t = {0, 0, 0, 0};
    if (chunk == 0) chunk = DEFAULT_CHUNK;
    if (chunk > INT_MAX) return tsr_set_error(TSR_ERR_INVALID_ARG, "all-reduce: chunk of %zu floats, over INT_MAX", chunk);
    size_t end_float = 0, mem_size = 0;
    if (!buffer || __builtin_add_overflow(offset, count, &end_float) ||
        clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof mem_size, &mem_size, NULL) != CL_SUCCESS ||
        end_float > mem_size / sizeof(float))
        return tsr_set_error(TSR_ERR_INVALID_ARG,
                             "all-reduce: %zu floats from offset %zu do not fit the buffer (%zu bytes, or no buffer)",
                             count, offset, mem_size);
    cl_command_queue queue = tsr_device_queue(device);
    size_t chunks = (count + chunk - 1) / chunk;
    chunk_slot slots[SLOTS];
    for (int i = 0; i < SLOTS; ++i) {
        slots[i].host = malloc((chunk < count ? chunk : count ? count : 1) * sizeof(float));
        slots[i].read = slots[i].write = NULL;
        slots[i].reduce = MPI_REQUEST_NULL;
        if (!slots[i].host) tsr_mpi_abort(comm, "all-reduce: out of host memory for chunk buffers");
    }
    double start = MPI_Wtime();
#define CHUNK_FLOATS(c) ((c) + 1 < chunks ? chunk : count - (c)*chunk)
#define ENQUEUE(call, what)                                                                                            \
    do {                                                                                                               \
        cl_int err_ = (call);                                                                                          \
        if (err_ != CL_SUCCESS) {                                                                                      \
            tsr_set_cl_error(err_, what, __FILE__, __LINE__);                                                          \
            tsr_mpi_abort(comm, "all-reduce: %s", tsr_last_error());                                                   \
        }                                                                                                              \
    } while (0)
    if (chunks)
        ENQUEUE(clEnqueueReadBuffer(queue, buffer, CL_FALSE, offset * sizeof(float), CHUNK_FLOATS(0) * sizeof(float),
                                    slots[0].host, 0, NULL, &slots[0].read),
                "clEnqueueReadBuffer (all-reduce chunk)");
    clFlush(queue);
    char what[96];
    for (size_t c = 0; c < chunks; ++c) {
        chunk_slot *cur = &slots[c % SLOTS];
        t.transfer += wait_event(comm, &cur->read, "reading an all-reduce chunk");
        MPI_Iallreduce(MPI_IN_PLACE, cur->host, (int)CHUNK_FLOATS(c), MPI_FLOAT, MPI_SUM, comm, &cur->reduce);
        if (c == 0) tsr_mpi_fault_point("allreduce");
        if (c + 1 < chunks) { /* read the next chunk while this one is reduced */
            chunk_slot *next = &slots[(c + 1) % SLOTS];
            t.transfer += wait_event(comm, &next->write, "writing back an all-reduce chunk"); /* chunk c - 2 */
            ENQUEUE(clEnqueueReadBuffer(queue, buffer, CL_FALSE, (offset + (c + 1) * chunk) * sizeof(float),
                                        CHUNK_FLOATS(c + 1) * sizeof(float), next->host, 0, NULL, &next->read),
                    "clEnqueueReadBuffer (all-reduce chunk)");
            clFlush(queue);
        }
        if (c >= 1) { /* the previous chunk's sum goes back while this one is reduced */
            chunk_slot *prev = &slots[(c - 1) % SLOTS];
            snprintf(what, sizeof what, "the all-reduce of chunk %zu of %zu (MPI_Iallreduce)", c, chunks);
            t.comm_wait += tsr_mpi_wait(comm, &prev->reduce, what);
            ENQUEUE(clEnqueueWriteBuffer(queue, buffer, CL_FALSE, (offset + (c - 1) * chunk) * sizeof(float),
                                         CHUNK_FLOATS(c - 1) * sizeof(float), prev->host, 0, NULL, &prev->write),
                    "clEnqueueWriteBuffer (all-reduce chunk)");
            clFlush(queue);
        }
    }
    if (chunks) {
        chunk_slot *last = &slots[(chunks - 1) % SLOTS];
        snprintf(what, sizeof what, "the all-reduce of chunk %zu of %zu (MPI_Iallreduce)", chunks, chunks);
        t.comm_wait += tsr_mpi_wait(comm, &last->reduce, what);
        ENQUEUE(clEnqueueWriteBuffer(queue, buffer, CL_FALSE, (offset + (chunks - 1) * chunk) * sizeof(float),
                                     CHUNK_FLOATS(chunks - 1) * sizeof(float), last->host, 0, NULL, &last->write),
                "clEnqueueWriteBuffer (all-reduce chunk)");
    }
    for (int i = 0; i < SLOTS; ++i) {
        t.transfer += wait_event(comm, &slots[i].write, "writing back an all-reduce chunk");
        free(slots[i].host);
    }
#undef ENQUEUE
#undef CHUNK_FLOATS
    t.total = MPI_Wtime() - start;
    t.chunks = (int)chunks;
    if (times) *times = t;
    return TSR_SUCCESS;
}
