/* A device group's life cycle: create, destroy, weights and the last call's statistics (device
 * groups: group.h). */
#include "group.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void member_release(member *m) {
    for (int s = 0; s < SLOTS; s++)
        for (int r = 0; r < ROLES; r++)
            if (m->buf[s][r]) clReleaseMemObject(m->buf[s][r]);
    for (int i = 0; i < 2; i++)
        if (m->shared[i]) clReleaseMemObject(m->shared[i]);
    if (m->upload) clReleaseCommandQueue(m->upload);
    if (m->compute) clReleaseCommandQueue(m->compute);
    if (m->download) clReleaseCommandQueue(m->download);
}

/* Members that compete for one processor split a call worse than their rates alone promise: say
 * so once, at creation (the call still works; weights can give the work to one of them). */
static void warn_about_sharing(tsr_device *const *devices, size_t count) {
    for (size_t a = 0; a < count; a++)
        for (size_t b = a + 1; b < count; b++)
            if (tsr_device_id(devices[a]) == tsr_device_id(devices[b])) {
                tsr_warn("device group: members %zu and %zu are the same device (%s): they take turns on it, so a "
                         "split helps only where one's transfers can overlap the other's compute",
                         a, b, tsr_device_get_info(devices[a])->name);
                return;
            }
    unsigned long cpu_units = 0, cpus = 0;
    for (size_t d = 0; d < count; d++) {
        const tsr_device_info *info = tsr_device_get_info(devices[d]);
        if (info->type == TSR_DEVICE_CPU) cpu_units += info->compute_units, cpus++;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 1 && online > 0 && cpu_units > (unsigned long)online)
        tsr_warn("device group: its %lu CPU devices have %lu compute units between them on a host with %ld "
                 "processors: they compete for them, and a split can be slower than the fastest alone (weights "
                 "can give it all the work)",
                 cpus, cpu_units, online);
}

tsr_status tsr_group_create(tsr_device *const *devices, size_t count, tsr_device_group **group) {
    tsr_clear_diagnostics();
    if (!group) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_create: group is NULL");
    *group = NULL;
    if (!devices || !count) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_create: no devices");
    for (size_t d = 0; d < count; d++)
        if (!devices[d]) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_create: devices[%zu] is NULL", d);
    tsr_device_group *g = calloc(1, sizeof *g);
    if (!g || !(g->members = calloc(count, sizeof(member))) || !(g->stats = calloc(count, sizeof *g->stats))) {
        if (g) free(g->members);
        free(g);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "tsr_group_create: out of host memory");
    }
    g->count = count;
    g->weights_from = "none";
    pthread_mutex_init(&g->call_lock, NULL);
    tsr_status status = TSR_SUCCESS;
    for (size_t d = 0; d < count; d++) {
        member *m = &g->members[d];
        m->device = devices[d];
        cl_context ctx = tsr_device_context(devices[d]);
        cl_device_id id = tsr_device_id(devices[d]);
        cl_command_queue *queues[3] = {&m->upload, &m->compute, &m->download};
        for (int q = 0; q < 3; q++) {
            cl_int err;
            *queues[q] = clCreateCommandQueue(ctx, id, 0, &err);
            if (err != CL_SUCCESS) {
                *queues[q] = NULL;
                status = tsr_fail_cl(err, "clCreateCommandQueue (a group's transfer and compute queues)", __FILE__,
                                     __LINE__);
                goto done;
            }
        }
    }
done:
    if (status != TSR_SUCCESS) {
        tsr_group_destroy(g);
        return status;
    }
    warn_about_sharing(devices, count);
    *group = g;
    return TSR_SUCCESS;
}

void tsr_group_destroy(tsr_device_group *group) {
    if (!group) return;
    for (size_t d = 0; d < group->count; d++)
        member_release(&group->members[d]);
    for (size_t i = 0; i < group->nlearned; i++)
        free(group->learned[i].gflops);
    pthread_mutex_destroy(&group->call_lock);
    free(group->members);
    free(group->weights);
    free(group->tiles);
    free(group->tile_state);
    free(group->stats);
    free(group);
}

size_t tsr_group_size(const tsr_device_group *group) { return group ? group->count : 0; }

tsr_status tsr_group_set_weights(tsr_device_group *group, const double *weights) {
    tsr_clear_diagnostics();
    if (!group) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_set_weights: group is NULL");
    if (!weights) {
        pthread_mutex_lock(&group->call_lock);
        free(group->weights);
        group->weights = NULL;
        pthread_mutex_unlock(&group->call_lock);
        return TSR_SUCCESS;
    }
    bool any = false;
    for (size_t d = 0; d < group->count; d++) {
        if (!isfinite(weights[d]) || weights[d] < 0)
            return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_set_weights: weights[%zu] = %g (finite, >= 0)", d,
                            weights[d]);
        any |= weights[d] > 0;
    }
    if (!any) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_set_weights: every weight is 0");
    double *copy = malloc(group->count * sizeof(double));
    if (!copy) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "tsr_group_set_weights: out of host memory");
    memcpy(copy, weights, group->count * sizeof(double));
    pthread_mutex_lock(&group->call_lock);
    free(group->weights);
    group->weights = copy;
    pthread_mutex_unlock(&group->call_lock);
    return TSR_SUCCESS;
}

tsr_status tsr_group_last_stats(tsr_device_group *group, tsr_group_stats *stats) {
    tsr_clear_diagnostics();
    if (!group || !stats) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_group_last_stats: group or stats is NULL");
    pthread_mutex_lock(&group->call_lock);
    *stats = (tsr_group_stats){.seconds = group->seconds,
                               .weights_from = group->weights_from,
                               .tile_count = group->ntiles,
                               .tiles = group->tiles,
                               .devices = group->stats};
    pthread_mutex_unlock(&group->call_lock);
    return TSR_SUCCESS;
}
