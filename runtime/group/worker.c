/* One device's thread in a group call: it takes tiles from the schedule and keeps two in flight
 * (device groups: group.h). */
#include "group.h"

/* Wait for a tile's results: in the output in full, or not known to be. */
static cl_int wait_tile(worker *w, cl_event *done, size_t *tile) {
    cl_int err = clWaitForEvents(1, done);
    clReleaseEvent(*done);
    *done = NULL;
    tsr_grp_set_tile_state(w, *tile, err == CL_SUCCESS ? TILE_WRITTEN : TILE_MAYBE);
    *tile = SIZE_MAX;
    return err;
}

/* Programs the device built or loaded so far: a call that compiled is no measure of its rate. */
static uint64_t programs_made(tsr_device *dev) {
    pthread_mutex_lock(&dev->program_lock);
    uint64_t made = dev->builds + dev->disk_hits + dev->binary_loads;
    pthread_mutex_unlock(&dev->program_lock);
    return made;
}

void *tsr_grp_worker_main(void *arg) {
    worker *w = arg;
    member *m = &w->group->members[w->index];
    const job *j = w->job;
    cl_event done[SLOTS] = {NULL};
    size_t tile_of[SLOTS]; /* the recorded tile whose results done[slot] brings */
    for (int s = 0; s < SLOTS; s++)
        tile_of[s] = SIZE_MAX;
    tsr_status status = TSR_SUCCESS;
    double start = tsr_now_s();
    bool began = false;
    uint64_t programs_before = programs_made(m->device);
    for (size_t i = 0;; i++) {
        int slot = (int)(i % SLOTS);
        if (done[slot]) { /* the slot's previous tile is home: its buffers are free */
            cl_int err = wait_tile(w, &done[slot], &tile_of[slot]);
            if (err != CL_SUCCESS) {
                status = tsr_fail_cl(err, "clWaitForEvents (a tile's result)", __FILE__, __LINE__);
                break;
            }
        }
        size_t first, count;
        cl_event *other = &done[(slot + 1) % SLOTS];
        if (!tsr_grp_schedule_next(w->schedule, w->index, *other == NULL, &first, &count)) {
            if (!*other) break;
            /* own share done, a tile still running: wait for it, then look for work to take */
            cl_int err = wait_tile(w, other, &tile_of[(slot + 1) % SLOTS]);
            if (err != CL_SUCCESS) {
                status = tsr_fail_cl(err, "clWaitForEvents (a tile's result)", __FILE__, __LINE__);
                break;
            }
            if (!tsr_grp_schedule_next(w->schedule, w->index, true, &first, &count)) break;
        }
        if (!began) {
            began = true, start = tsr_now_s();
            if (j->prepare) status = j->prepare(j, m);
            if (status != TSR_SUCCESS) break;
        }
        size_t bytes[ROLES];
        status = j->sizes(j, count, bytes);
        if (status != TSR_SUCCESS) break;
        for (int r = 0; r < ROLES && status == TSR_SUCCESS; r++)
            status = tsr_grp_ensure_buffer(m, &m->buf[slot][r], &m->buf_bytes[slot][r], bytes[r]);
        if (status == TSR_SUCCESS && w->tiles == w->fail_at_tile)
            status = tsr_fail(TSR_ERR_OPENCL, "failure injected for tests (TSR_TEST_MULTI_FAIL=%zu:%zu)", w->index,
                              w->fail_at_tile);
        bool writing = false;
        if (status == TSR_SUCCESS) status = j->enqueue(j, m, slot, first, count, &done[slot], &writing);
        if (status != TSR_SUCCESS) {
            if (writing) tsr_grp_record_tile(w, first, count, TILE_MAYBE); /* its reads that were enqueued still run */
            break;
        }
        clFlush(m->upload), clFlush(m->compute), clFlush(m->download);
        tile_of[slot] = tsr_grp_record_tile(w, first, count, TILE_IN_FLIGHT);
        w->units += count, w->tiles++;
    }
    for (int s = 0; s < SLOTS; s++) {
        if (!done[s]) continue;
        cl_int err = wait_tile(w, &done[s], &tile_of[s]);
        if (err != CL_SUCCESS && status == TSR_SUCCESS)
            status = tsr_fail_cl(err, "clWaitForEvents (a tile's result)", __FILE__, __LINE__);
    }
    /* nothing may still read or write the buffers when the call returns */
    clFinish(m->upload), clFinish(m->compute), clFinish(m->download);
    w->busy_s = began ? tsr_now_s() - start : 0;
    w->compiled = programs_made(m->device) != programs_before;
    if (status != TSR_SUCCESS) {
        w->status = status;
        snprintf(w->error, sizeof w->error, "%s", tsr_last_error());
        tsr_grp_schedule_stop(w->schedule);
    }
    return NULL;
}
