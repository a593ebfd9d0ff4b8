/* Moving a tile's rows between host arrays and a device's buffers, and the buffers themselves
 * (device groups: group.h). */
#include "group.h"

tsr_status tsr_grp_copy_rows(cl_command_queue q, bool to_device, cl_mem buf, size_t buf_offset, float *host,
                             size_t rows, size_t row_floats, size_t host_ld, size_t buf_ld, cl_event wait,
                             cl_event *done) {
    tsr_status status = TSR_SUCCESS;
    cl_uint nwait = wait ? 1 : 0;
    const cl_event *wait_list = wait ? &wait : NULL;
    if (!rows || !row_floats) { /* nothing to move; still hand back an event that follows `wait` */
        if (done) TSR_CL_CHECK(status, clEnqueueMarkerWithWaitList(q, nwait, wait_list, done), done);
        return TSR_SUCCESS;
    }
    if ((host_ld == row_floats && buf_ld == row_floats) || rows == 1) {
        size_t bytes = rows * row_floats * sizeof(float), offset = buf_offset * sizeof(float);
        if (to_device)
            TSR_CL_CHECK(status, clEnqueueWriteBuffer(q, buf, CL_FALSE, offset, bytes, host, nwait, wait_list, done),
                         done);
        else
            TSR_CL_CHECK(status, clEnqueueReadBuffer(q, buf, CL_FALSE, offset, bytes, host, nwait, wait_list, done),
                         done);
        return TSR_SUCCESS;
    }
    const size_t buf_origin[3] = {buf_offset * sizeof(float), 0, 0}, host_origin[3] = {0, 0, 0};
    const size_t region[3] = {row_floats * sizeof(float), rows, 1};
    if (to_device)
        TSR_CL_CHECK(status,
                     clEnqueueWriteBufferRect(q, buf, CL_FALSE, buf_origin, host_origin, region, buf_ld * sizeof(float),
                                              0, host_ld * sizeof(float), 0, host, nwait, wait_list, done),
                     done);
    else
        TSR_CL_CHECK(status,
                     clEnqueueReadBufferRect(q, buf, CL_FALSE, buf_origin, host_origin, region, buf_ld * sizeof(float),
                                             0, host_ld * sizeof(float), 0, host, nwait, wait_list, done),
                     done);
done:
    return status;
}

tsr_status tsr_grp_write_rect(cl_command_queue q, cl_mem buf, size_t buf_offset_floats, const float *host, size_t rows,
                              size_t row_floats, size_t host_ld, size_t buf_ld) {
    return tsr_grp_copy_rows(q, true, buf, buf_offset_floats, (float *)host, rows, row_floats, host_ld, buf_ld, NULL,
                             NULL);
}

tsr_status tsr_grp_ensure_buffer(member *m, cl_mem *buf, size_t *have, size_t bytes) {
    if (*buf && *have >= bytes) return TSR_SUCCESS;
    if (*buf) clReleaseMemObject(*buf);
    *buf = NULL, *have = 0;
    cl_int err;
    *buf = clCreateBuffer(tsr_device_context(m->device), CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        *buf = NULL;
        return tsr_fail_cl(err, "clCreateBuffer (a group tile's buffer)", __FILE__, __LINE__);
    }
    *have = bytes;
    return TSR_SUCCESS;
}
