/* Running a group call: shares by weight, tile sizes, one thread per device, the error of a
 * failed call and the statistics of a good one; the checks every call driver shares (device
 * groups: group.h). */
#include "group.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ running a job */

/* $TSR_TEST_MULTI_FAIL, the failure path's test hook: DEVICE or DEVICE:TILE (decimal, DEVICE below
 * the group's size) fails that device's tile TILE (0 when not given) before it is enqueued. Anything
 * else is refused, so a mistyped hook never passes for device 0. */
static tsr_status test_failure_hook(const char *fn, size_t count, size_t *device, size_t *tile) {
    const char *text = getenv("TSR_TEST_MULTI_FAIL");
    if (!text) return TSR_SUCCESS;
    /* decimal digits only (strtoull alone would take a sign or spaces), each number within range */
    const char *p = text;
    unsigned long long values[2] = {0, 0};
    int parts = 0;
    bool ok = true;
    while (ok && parts < 2) {
        char *end = NULL;
        errno = 0;
        ok = *p >= '0' && *p <= '9';
        if (ok) values[parts++] = strtoull(p, &end, 10), ok = errno == 0, p = end;
        if (ok && *p != ':') break;
        if (ok) p++;
    }
    if (!ok || *p != '\0' || values[0] >= count || values[1] >= SIZE_MAX)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: TSR_TEST_MULTI_FAIL='%.40s' is not DEVICE[:TILE] with DEVICE below %zu",
                        fn, text, count);
    *device = (size_t)values[0], *tile = (size_t)values[1];
    return TSR_SUCCESS;
}

tsr_status tsr_grp_run_job(tsr_device_group *g, job *j, const char *rate_key, const double *tuned) {
    size_t n = g->count;
    tsr_status status = TSR_SUCCESS;
    double t0 = tsr_now_s();
    g->ntiles = 0;
    g->tiles_lost = false;
    memset(g->stats, 0, n * sizeof *g->stats);
    g->seconds = 0;
    if (!j->units) return TSR_SUCCESS;
    double *weights = calloc(n, sizeof(double));
    size_t *lo = calloc(n, sizeof(size_t)), *hi = calloc(n, sizeof(size_t)), *chunk = calloc(n, sizeof(size_t));
    worker *workers = calloc(n, sizeof(worker));
    pthread_t *threads = calloc(n, sizeof(pthread_t));
    if (!weights || !lo || !hi || !chunk || !workers || !threads) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "%s: out of host memory for a %zu-device split", j->op, n);
        goto done;
    }
    tsr_grp_choose_weights(g, rate_key, tuned, weights);
    double total = 0;
    size_t active = 0;
    for (size_t d = 0; d < n; d++) {
        if (!(weights[d] > 0) || !isfinite(weights[d])) weights[d] = 0;
        total += weights[d];
        active += weights[d] > 0;
    }
    if (!active) {
        status = tsr_fail(TSR_ERR_INVALID_ARG, "%s: every device of the group has weight 0", j->op);
        goto done;
    }
    /* contiguous shares in proportion to the weights; tiles cut each share into a few pieces. A
     * device of weight 0 gets an empty share (and never takes work: schedule_next), so the last
     * device of positive weight ends at the last unit: rounding never leaves units without an owner. */
    size_t last = 0;
    for (size_t d = 0; d < n; d++)
        if (weights[d] > 0) last = d;
    double cumulative = 0;
    size_t edge = 0;
    for (size_t d = 0; d < n; d++) {
        lo[d] = edge;
        if (weights[d] > 0) {
            cumulative += weights[d];
            size_t h = d == last ? j->units : (size_t)llround((double)j->units * (cumulative / total));
            if (j->align > 1 && d != last) /* share edges on the alignment: GEMM runs whole tiles */
                h = (h + j->align / 2) / j->align * j->align;
            edge = h < edge ? edge : h > j->units ? j->units : h;
        }
        hi[d] = edge;
        g->stats[d].weight = weights[d] / total;
    }
    for (size_t d = 0; d < n; d++) {
        if (!(weights[d] > 0)) { /* takes no work: nothing to size or reserve */
            chunk[d] = 1;
            continue;
        }
        bool cpu = tsr_device_get_info(g->members[d].device)->type == TSR_DEVICE_CPU;
        /* on a CPU device a tile costs a pass over the shared operand (GEMM packs B per call) and
         * transfers are copies within the same memory: one tile, or two while the rates are
         * unknown (equal weights), so that stealing can even out the second half */
        size_t tiles = !cpu ? TILES_PER_DEVICE : strcmp(g->weights_from, "equal") ? 1 : 2, share = hi[d] - lo[d];
        size_t c = (share + tiles - 1) / tiles;
        if (j->align > 1 && c > j->align) c = (c + j->align - 1) / j->align * j->align;
        chunk[d] = c > j->chunk ? c : j->chunk;
        /* a tile's buffers must fit the device's largest allocation: halve until they do */
        uint64_t max_alloc = tsr_device_get_info(g->members[d].device)->max_alloc_bytes;
        for (;;) {
            size_t bytes[ROLES];
            TSR_CHECK(status, j->sizes(j, chunk[d], bytes), done);
            bool fits = !max_alloc || (bytes[0] <= max_alloc && bytes[1] <= max_alloc && bytes[2] <= max_alloc);
            if (fits) break;
            if (chunk[d] == 1) {
                status =
                    tsr_fail(TSR_ERR_OUT_OF_MEMORY,
                             "%s: device %zu (%s): one unit's tile needs more than its largest allocation (%llu bytes)",
                             j->op, d, tsr_device_get_info(g->members[d].device)->name, (unsigned long long)max_alloc);
                goto done;
            }
            chunk[d] = (chunk[d] + 1) / 2;
        }
        status = j->reserve ? j->reserve(j, &g->members[d]) : TSR_SUCCESS;
        if (status != TSR_SUCCESS) {
            char why[512]; /* tsr_fail rewrites the buffer tsr_last_error points into */
            snprintf(why, sizeof why, "%s", tsr_last_error());
            status = tsr_fail(status, "%s: device %zu (%s): %s", j->op, d,
                              tsr_device_get_info(g->members[d].device)->name, why);
            goto done;
        }
    }
    schedule s = {
        .count = n, .chunk = chunk, .boundary = j->boundary, .align = j->align, .lo = lo, .hi = hi, .rate = weights};
    pthread_mutex_init(&s.lock, NULL);
    size_t started = 0, fail_device = SIZE_MAX, fail_tile = SIZE_MAX;
    status = test_failure_hook(j->op, n, &fail_device, &fail_tile);
    if (status != TSR_SUCCESS) {
        pthread_mutex_destroy(&s.lock);
        goto done;
    }
    for (size_t d = 0; d < n; d++) {
        workers[d] = (worker){.group = g, .index = d, .job = j, .schedule = &s, .fail_at_tile = SIZE_MAX};
        if (d == fail_device) workers[d].fail_at_tile = fail_tile;
        if (pthread_create(&threads[d], NULL, tsr_grp_worker_main, &workers[d]) != 0) {
            status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "%s: could not start a thread for device %zu", j->op, d);
            tsr_grp_schedule_stop(&s);
            break;
        }
        started++;
    }
    for (size_t d = 0; d < started; d++)
        pthread_join(threads[d], NULL);
    pthread_mutex_destroy(&s.lock);
    for (size_t d = 0; d < started && status == TSR_SUCCESS; d++)
        if (workers[d].status != TSR_SUCCESS) {
            char writes[1024];
            tsr_grp_describe_writes(g, j, writes, sizeof writes);
            status = tsr_fail(workers[d].status, "%s: device %zu (%s): %s; %s", j->op, d,
                              tsr_device_get_info(g->members[d].device)->name, workers[d].error, writes);
        }
    size_t done = 0;
    for (size_t d = 0; d < started; d++)
        done += workers[d].units;
    if (status == TSR_SUCCESS && done != j->units) { /* cannot happen: every share has an owner that drains it */
        char writes[1024];
        tsr_grp_describe_writes(g, j, writes, sizeof writes);
        status = tsr_fail(TSR_ERR_OPENCL, "%s: %zu of %zu %s computed; %s", j->op, done, j->units, j->units_word,
                          writes);
    }
    if (status == TSR_SUCCESS && g->tiles_lost)
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY,
                          "%s: out of host memory recording the tiles (%s was computed in full; the call's statistics "
                          "are lost)",
                          j->op, j->output);
    if (status != TSR_SUCCESS) goto done;
    learned_rates *l = tsr_grp_learned_for(g, rate_key, true);
    for (size_t d = 0; d < n; d++) {
        tsr_group_device_stats *st = &g->stats[d];
        st->units = workers[d].units;
        st->tiles = workers[d].tiles;
        st->busy_s = workers[d].busy_s;
        st->gflops = st->busy_s > 0 ? (double)st->units * j->flops_per_unit / st->busy_s * 1e-9 : 0;
        if (l && st->gflops > 0 && !workers[d].compiled) /* smoothed: one noisy call moves it halfway */
            l->gflops[d] = l->gflops[d] > 0 ? 0.5 * (l->gflops[d] + st->gflops) : st->gflops;
    }
done:
    g->seconds = tsr_now_s() - t0;
    if (status != TSR_SUCCESS) { /* a failed call reports the tiles it wrote in full, and nothing else */
        memset(g->stats, 0, n * sizeof *g->stats);
        g->seconds = 0;
        size_t kept = 0;
        for (size_t t = 0; t < g->ntiles && !g->tiles_lost; t++)
            if (g->tile_state[t] == TILE_WRITTEN) {
                g->tiles[kept] = g->tiles[t];
                g->tile_state[kept++] = TILE_WRITTEN;
                g->stats[g->tiles[t].device].units += g->tiles[t].count;
                g->stats[g->tiles[t].device].tiles++;
            }
        g->ntiles = kept;
    }
    free(weights), free(lo), free(hi), free(chunk), free(workers), free(threads);
    return status;
}

/* ------------------------------------------------------------------ shared by the call drivers */

tsr_status tsr_grp_prefixed(tsr_status status, const char *fn) {
    char why[512];
    snprintf(why, sizeof why, "%s", tsr_last_error());
    return tsr_fail(status, "%s: %s", fn, why);
}

bool tsr_grp_spans_meet(const float *a, size_t a_n, const float *c, size_t c_n) {
    if (!a || !c || !a_n || !c_n) return false;
    uintptr_t a0 = (uintptr_t)a, a1 = a0 + a_n * sizeof(float), c0 = (uintptr_t)c, c1 = c0 + c_n * sizeof(float);
    return a0 < c1 && c0 < a1;
}
