/* Evaluating candidates: timed runs through the backend (the device, or recorded timings),
 * validation against the reference, scoring by the lower-quartile time, and duels. */
#include "tuner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the device backend ---- */

/* One tuning run of a configuration, as a timer launches it. */
typedef struct tuning_launch {
    tsr_device_runner *runner;
    const tsr_config *config;
} tuning_launch;

static tsr_status launch_tuning_run(void *vctx, cl_event *first, cl_event *last) {
    tuning_launch *l = vctx;
    return tsr_op_tuning_run(l->runner->op, l->runner->device, l->runner->ctx, l->config, first, last);
}

/* Seconds per run by the device's timing method (events, or the host clock over batches where
 * the driver's timestamps are unusable). */
static tsr_status device_run(void *vrunner, const tsr_config *config, double *seconds) {
    tsr_device_runner *r = vrunner;
    tuning_launch l = {r, config};
    if (!r->timer.what) r->timer.what = "timing a tuning run";
    return tsr_timer_run(&r->timer, r->device, launch_tuning_run, &l, seconds);
}

static tsr_status device_check(void *vrunner, double *rel_err) {
    tsr_device_runner *r = vrunner;
    return tsr_op_tuning_check(r->op, r->device, r->ctx, rel_err);
}

static double device_now(void *vrunner) {
    (void)vrunner;
    return tsr_now_s();
}

tsr_tune_backend tsr_device_backend(tsr_device_runner *runner) {
    return (tsr_tune_backend){.run = device_run, .check = device_check, .now = device_now, .ctx = runner};
}

/* ---- one candidate ---- */

static tsr_status timed_run(tsr_search *search, const tsr_config *config, double *seconds) {
    return search->backend.run(search->backend.ctx, config, seconds);
}

static void log_candidate(const tsr_search *search, const tsr_config *config, const char *outcome, double gflops,
                          double score, double spread) {
    if (!search->log) return;
    char desc[256];
    tsr_config_format(search->op, config, desc, sizeof desc);
    tsr_timing_method timing = TSR_TIMING_UNDECIDED; /* replays without a device: "undecided" */
    if (search->device && tsr_device_timing(search->device, &timing, NULL) != TSR_SUCCESS) tsr_clear_error();
    fprintf(search->log, "{\"op\": \"%s\", \"class\": \"%s\", \"config\": \"%s\", \"outcome\": \"%s\", "
            "\"gflops\": %.3f, \"gflops_q25\": %.3f, \"spread\": %.3f, \"timing\": \"%s\"}\n", search->op->name,
            search->problem_class, desc, outcome, gflops, score, spread, tsr_timing_name(timing));
    fflush(search->log);
}

/* Measure a new entry `e` for `config`; returns its score, 0 when rejected (and counted). */
static double measure(tsr_search *search, tsr_evaluated *e, const tsr_config *config) {
    tsr_tune_result *res = search->result;
    res->evaluated++;
    double warm;
    tsr_status st = timed_run(search, config, &warm); /* also builds the program */
    if (st != TSR_SUCCESS) {
        if (st == TSR_ERR_BUILD) res->build_failures++;
        else res->launch_failures++;
        tsr_clear_error();
        return 0;
    }
    double err = INFINITY;
    if (search->backend.check(search->backend.ctx, &err) != TSR_SUCCESS || !(err <= TUNE_TOLERANCE)) {
        res->wrong_results++;
        tsr_clear_error();
        return 0;
    }
    double t[TUNE_MAX_RUNS], settle, total = 0;
    if (timed_run(search, config, &settle) != TSR_SUCCESS) { /* one more untimed run: caches, pages, thread pool */
        res->launch_failures++;
        tsr_clear_error();
        return 0;
    }
    int n = 0;
    while (n < TUNE_MAX_RUNS) {
        if (timed_run(search, config, &t[n]) != TSR_SUCCESS) {
            res->launch_failures++;
            tsr_clear_error();
            return 0;
        }
        total += t[n++];
        /* Clearly slower than the best after one run: not worth more runs. */
        if (n == 1 && search->best_time > 0 && t[0] > TUNE_ABANDON_FACTOR * search->best_time) {
            res->abandoned++;
            return 0;
        }
        if (n >= TUNE_MIN_RUNS && total >= TUNE_MIN_SECONDS) break;
    }
    tsr_stats s;
    tsr_stats_of(t, n, &s);
    /* Other tenants of a shared machine only ever add time: rank by the lower quartile, which
     * ignores up to three quarters of runs slowed that way; report the median too. */
    e->gflops = search->flops / s.median * 1e-9;
    e->score = search->flops / s.q25 * 1e-9;
    e->spread = s.spread;
    if (search->best_time == 0 || s.q25 < search->best_time) search->best_time = s.q25;
    return e->score;
}

double tsr_search_evaluate(tsr_search *search, const tsr_config *config) {
    if (search->nseen == search->capseen) {
        int cap = search->capseen ? 2 * search->capseen : 64;
        tsr_evaluated *grown = realloc(search->seen, (size_t)cap * sizeof *grown);
        if (!grown) { /* not recorded, not counted: the search goes on without it */
            log_candidate(search, config, "failed", 0, 0, 0);
            tsr_search_report(search);
            return 0;
        }
        search->seen = grown;
        search->capseen = cap;
    }
    tsr_evaluated *e = &search->seen[search->nseen++];
    memset(e, 0, sizeof *e);
    e->config = *config;
    const tsr_tune_result *res = search->result;
    int before[4] = {res->build_failures, res->launch_failures, res->wrong_results, res->abandoned};
    double score = measure(search, e, config);
    const char *outcome = score > 0 ? "ok"
                          : res->build_failures > before[0]  ? "build-failed"
                          : res->launch_failures > before[1] ? "launch-failed"
                          : res->wrong_results > before[2]   ? "wrong-result"
                          : res->abandoned > before[3]       ? "abandoned"
                                                             : "failed";
    log_candidate(search, config, outcome, score > 0 ? e->gflops : 0, score, score > 0 ? e->spread : 0);
    tsr_search_report(search);
    return score;
}

/* ---- duels ---- */

void tsr_search_duel(tsr_search *search, const tsr_config *a, const tsr_config *b, double gflops[2],
                     double score[2]) {
    double t[2][3 * TUNE_MAX_RUNS];
    int n[2] = {0, 0};
    for (int round = 0; round < 3; ++round)
        for (int w = 0; w < 2; ++w) {
            double total = 0;
            int runs = 0;
            while (runs < TUNE_MAX_RUNS && (runs < TUNE_MIN_RUNS || total < TUNE_MIN_SECONDS / 3) &&
                   timed_run(search, w ? b : a, &t[w][n[w]]) == TSR_SUCCESS) {
                total += t[w][n[w]++];
                ++runs;
            }
            tsr_clear_error();
        }
    for (int w = 0; w < 2; ++w) {
        gflops[w] = score[w] = 0;
        if (n[w] < TUNE_MIN_RUNS) continue;
        tsr_stats s;
        tsr_stats_of(t[w], n[w], &s);
        /* The duel has always ranked by the upper middle run (t[n / 2]), not the mean of the two
         * middle ones: kept, so a re-tune decides as before. */
        gflops[w] = search->flops / t[w][n[w] / 2] * 1e-9;
        score[w] = search->flops / s.q25 * 1e-9;
    }
}
