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

/* Every run goes through here: a run leaves its output for the next check to see. */
static tsr_status timed_run(tsr_search *search, const tsr_config *config, double *seconds) {
    if (!search->output_dirty) search->output_writer = *config, search->output_single = true;
    else if (memcmp(&search->output_writer, config, sizeof *config) != 0) search->output_single = false;
    search->output_dirty = true;
    return search->backend.run(search->backend.ctx, config, seconds);
}

/* The check compares the last run's output with the reference and poisons it (NaN). */
static tsr_status check_output(tsr_search *search, double *rel_err) {
    tsr_status st = search->backend.check(search->backend.ctx, rel_err);
    if (st == TSR_SUCCESS) search->output_dirty = false;
    return st;
}

/* Where one candidate's time went (backend clock, seconds), for the log. */
typedef struct phase_times {
    double first_run; /* the first run: builds the program, first touch */
    double timed;     /* the timed runs, wall time around them */
    double check;     /* validation: checks and the run they need */
    int runs;         /* timed runs */
    bool prepared;    /* compiled ahead by a worker */
} phase_times;

typedef enum outcome { OK, SLOWER, BUILD_FAILED, LAUNCH_FAILED, WRONG_RESULT } outcome;
static const char *const outcome_names[] = {"ok", "slower", "build-failed", "launch-failed", "wrong-result"};

/* How the search's device times candidates, for the log ("undecided" for replays without a device). */
static const char *log_timing(const tsr_search *search) {
    tsr_timing_method timing = TSR_TIMING_UNDECIDED;
    if (search->device && tsr_device_timing(search->device, &timing, NULL) != TSR_SUCCESS) tsr_clear_error();
    return tsr_timing_name(timing);
}

static void log_candidate(const tsr_search *search, const tsr_config *config, const char *outcome, double gflops,
                          double score, double spread, const phase_times *ph) {
    if (!search->log) return;
    char desc[256];
    tsr_config_format(search->op, config, desc, sizeof desc);
    fprintf(search->log, "{\"op\": \"%s\", \"class\": \"%s\", \"config\": \"%s\", \"outcome\": \"%s\", "
            "\"gflops\": %.3f, \"gflops_q25\": %.3f, \"spread\": %.3f, \"first_run_s\": %.4f, \"timed_s\": %.4f, "
            "\"check_s\": %.4f, \"runs\": %d, \"timing\": \"%s\"%s%s%s%s}\n", search->op->name, search->problem_class,
            desc, outcome, gflops, score, spread, ph->first_run, ph->timed, ph->check, ph->runs, log_timing(search),
            ph->prepared ? ", \"ahead\": true" : "",
            search->seed ? ", \"seed\": \"" : "", search->seed ? search->seed : "", search->seed ? "\"" : "");
    fflush(search->log);
}

/* The lower quartile of n runs and its confidence bounds (`t` is left as it was). With few runs
 * the bounds are the extremes: never narrower than the truth, so stops on them stay on the safe
 * side. */
static double lower_quartile(const double *t, int n, double *low, double *high) {
    double sorted[TUNE_MAX_RUNS];
    memcpy(sorted, t, (size_t)n * sizeof *t);
    tsr_stats s;
    tsr_stats_of(sorted, n, &s);
    tsr_quantile_bounds(sorted, n, 0.25, low, high);
    return s.q25;
}

/* Is a candidate with these n timed runs clearly slower than the incumbent, whose m runs `u`
 * were taken in alternation with them (the load of a shared machine moves within seconds, so
 * the incumbent's own evaluation is no yardstick for a later one)? One run (which may still
 * carry warm-up) must be TUNE_FIRST_RUN_FACTOR times slower than the incumbent's; from two on,
 * the lower bound of the candidate's lower quartile must lie TUNE_STOP_MARGIN above the upper
 * bound of the incumbent's. */
static bool clearly_slower(const double *t, int n, const double *u, int m) {
    if (m == 0) return false; /* no incumbent */
    if (n == 1) return t[0] > TUNE_FIRST_RUN_FACTOR * u[0];
    double low, high, ignored;
    lower_quartile(t, n, &low, &ignored);
    lower_quartile(u, m, &ignored, &high);
    return low > (1.0 + TUNE_STOP_MARGIN) * high;
}

/* Can a candidate with these n timed runs no longer become the incumbent, whose m runs `u` were
 * taken in alternation with them? When the lower bound of its lower quartile lies above the
 * upper bound of the incumbent's (with few runs the bounds are the extremes: its fastest run
 * slower than the incumbent's slowest): clearly_slower without the margin. More runs would only
 * make its score more precise, and the score of a candidate that is not the best only steers the
 * strategy: its rank needs no more. (Against the incumbent's lower quartile itself, two equal
 * configurations stopped each other about one time in five.) */
static bool not_the_best(const double *t, int n, const double *u, int m) {
    if (m < TUNE_MIN_RUNS) return false;
    double low, high, ignored;
    lower_quartile(t, n, &low, &ignored);
    lower_quartile(u, m, &ignored, &high);
    return low > high;
}

/* Is the lower quartile of these n runs known within TUNE_PRECISION? */
static bool known_well_enough(const double *t, int n) {
    double scratch[TUNE_MAX_RUNS];
    return tsr_quantile_known(t, n, 0.25, TUNE_PRECISION, scratch);
}

/* Does the output of `config` match the reference? The output checked must be this candidate's
 * alone: a kernel that writes nothing would otherwise pass on another configuration's correct
 * output. It is when only this candidate ran since a check poisoned the output; if not, one
 * check poisons it now and one more run writes it. */
static outcome validate(tsr_search *search, const tsr_config *config) {
    double err = INFINITY, seconds;
    if (!(search->output_dirty && search->output_single &&
          memcmp(&search->output_writer, config, sizeof *config) == 0)) {
        if (check_output(search, &err) != TSR_SUCCESS) return WRONG_RESULT;
        if (timed_run(search, config, &seconds) != TSR_SUCCESS) return LAUNCH_FAILED;
    }
    err = INFINITY;
    if (check_output(search, &err) != TSR_SUCCESS || !(err <= (search->tolerance > 0 ? search->tolerance : TUNE_TOLERANCE)))
        return WRONG_RESULT;
    return OK;
}

/* Measure a new entry `e` for `config`, validating it if it could be chosen. */
static outcome measure(tsr_search *search, tsr_evaluated *e, const tsr_config *config, phase_times *ph) {
    double warm, clock = search->backend.now(search->backend.ctx), was;
#define PHASE(field) (was = clock, clock = search->backend.now(search->backend.ctx), ph->field += clock - was)
    bool warmed = search->warmed_valid && memcmp(&search->warmed, config, sizeof *config) == 0;
    search->warmed_valid = false;
    /* also builds the program; caches, pages, thread pool (unless the problem's choice just did) */
    tsr_status st = warmed ? TSR_SUCCESS : timed_run(search, config, &warm);
    /* Nothing is timed while a worker compiles: it would take the cores the runs time. */
    tsr_ahead_idle(search->ahead);
    PHASE(first_run);
    if (st != TSR_SUCCESS) return st == TSR_ERR_BUILD ? BUILD_FAILED : LAUNCH_FAILED;
    double t[TUNE_MAX_RUNS], u[TUNE_MIN_RUNS], total = 0;
    int n = 0, m = 0;
    bool slower = false;
    while (n < TUNE_MAX_RUNS) {
        st = timed_run(search, config, &t[n]);
        if (st != TSR_SUCCESS) return LAUNCH_FAILED;
        total += t[n++];
        ph->runs = n;
        /* The incumbent's runs alongside the first ones: what they decide on. */
        if (search->best_time > 0 && m < TUNE_MIN_RUNS) {
            if (timed_run(search, &search->incumbent, &u[m]) == TSR_SUCCESS) ++m;
            else tsr_clear_error();
        }
        PHASE(timed);
        if ((slower = (!search->measure_fully || n >= TUNE_MIN_RUNS) && clearly_slower(t, n, u, m))) break;
        if (n >= TUNE_MIN_RUNS && (total >= TUNE_MAX_SECONDS || known_well_enough(t, n))) break;
        if (!search->measure_fully && n >= TUNE_MIN_RUNS && not_the_best(t, n, u, m)) break;
        /* Out of time: what was measured stands (a slow device, where one run of the class's
         * problem takes seconds, would otherwise overrun the budget many times over). */
        if (!tsr_search_time_left(search)) break;
    }
    tsr_stats s;
    tsr_stats_of(t, n, &s);
    /* Other tenants of a shared machine only ever add time: rank by the lower quartile, which
     * ignores up to three quarters of runs slowed that way; report the median too. */
    e->gflops = search->flops / s.median * 1e-9;
    e->score = search->flops / s.q25 * 1e-9;
    e->spread = s.spread;
    /* Only what could be chosen is validated: candidates within TUNE_VALIDATE_MARGIN of the
     * incumbent or faster. The others keep their score as an estimate for the strategies. */
    double ignored, incumbent_q25 = m > 0 ? lower_quartile(u, m, &ignored, &ignored) : 0;
    /* (The entry in use is validated whatever its runs say: the duel with it decides, side by side.) */
    if (!search->measure_fully && (slower || (m > 0 && s.q25 > (1.0 + TUNE_VALIDATE_MARGIN) * incumbent_q25)))
        return SLOWER;
    outcome valid = validate(search, config);
    PHASE(check);
#undef PHASE
    if (valid != OK) return valid;
    e->validated = true;
    if (search->best_time == 0 || (m > 0 && s.q25 < incumbent_q25)) {
        search->incumbent = *config;
        search->best_time = s.q25;
    }
    return OK;
}

/* Before a candidate's first run: if a worker was given it, wait for the workers (its first run
 * then loads what was compiled); if not, give them what the strategy will ask for next (no more
 * than the evaluation budget leaves), to compile while this thread compiles the candidate. */
static bool prepare_ahead(tsr_search *search, const tsr_config *config) {
    tsr_ahead *a = search->ahead;
    if (!a) return false;
    if (tsr_ahead_submitted(a, config)) {
        tsr_ahead_idle(a);
        search->prepared_hits++;
        return true;
    }
    int max = tsr_ahead_workers(a);
    if (search->max_evaluations && search->max_evaluations - search->result->evaluated < max)
        max = search->max_evaluations - search->result->evaluated;
    /* ...nor more than the class's time is likely to reach: none once less than two evaluations'
     * worth of it is left (by the average so far), so that a budget's end wastes no compile */
    int done = search->result->evaluated - 1 - search->evaluated_at_start;
    double now = search->backend.now(search->backend.ctx);
    if (done > 0 && search->class_start + search->class_budget_s - now < 2 * (now - search->class_start) / done)
        max = 0;
    if (!search->predict || max <= 0) return false;
    tsr_config next[TUNE_MAX_AHEAD];
    int n = search->predict(search, config, next, max);
    tsr_ahead_submit(a, search->ahead_scope, next, n);
    return false;
}

double tsr_search_evaluate(tsr_search *search, const tsr_config *config) {
    if (search->nseen == search->capseen) {
        int cap = search->capseen ? 2 * search->capseen : 64;
        tsr_evaluated *grown = realloc(search->seen, (size_t)cap * sizeof *grown);
        if (!grown) { /* not recorded, not counted: the search goes on without it */
            log_candidate(search, config, "failed", 0, 0, 0, &(phase_times){0});
            tsr_search_report(search);
            return 0;
        }
        search->seen = grown;
        search->capseen = cap;
    }
    tsr_evaluated *e = &search->seen[search->nseen++];
    memset(e, 0, sizeof *e);
    e->config = *config;
    tsr_tune_result *res = search->result;
    res->evaluated++;
    phase_times ph = {.prepared = prepare_ahead(search, config)};
    outcome what = measure(search, e, config, &ph);
    switch (what) {
    case OK: break;
    case SLOWER: res->abandoned++; break;
    case BUILD_FAILED: res->build_failures++; break;
    case LAUNCH_FAILED: res->launch_failures++; break;
    case WRONG_RESULT: res->wrong_results++; break;
    }
    if (what != OK && what != SLOWER) {
        tsr_clear_error();
        e->gflops = e->score = e->spread = 0;
    }
    log_candidate(search, config, outcome_names[what], e->gflops, e->score, e->spread, &ph);
    tsr_search_report(search);
    return e->score;
}

bool tsr_search_validate(tsr_search *search, const tsr_config *config) {
    double seconds;
    bool ok = timed_run(search, config, &seconds) == TSR_SUCCESS && validate(search, config) == OK;
    if (!ok) tsr_clear_error();
    return ok;
}

/* ---- duels ---- */

/* Is the side with the lower median already known, whatever the rounds left would add? Only when
 * both medians' confidence intervals (~95%, distribution-free) are real (8 runs or more) and
 * apart: a clear gap ends the duel early, a close one runs all three rounds, so a duel decides as
 * a full one would (the medians lie within their bounds), only sooner on clear cases. */
static bool duel_decided(const double *ta, int na, const double *tb, int nb) {
    double sa[3 * TUNE_MAX_RUNS], sb[3 * TUNE_MAX_RUNS], alo, ahi, blo, bhi;
    if (na < TUNE_MIN_RUNS || nb < TUNE_MIN_RUNS) return false;
    memcpy(sa, ta, (size_t)na * sizeof *ta);
    memcpy(sb, tb, (size_t)nb * sizeof *tb);
    tsr_stats ignored;
    tsr_stats_of(sa, na, &ignored);
    tsr_stats_of(sb, nb, &ignored);
    if (!tsr_quantile_bounds(sa, na, 0.5, &alo, &ahi) || !tsr_quantile_bounds(sb, nb, 0.5, &blo, &bhi)) return false;
    return ahi < blo || bhi < alo;
}

void tsr_search_duel(tsr_search *search, const tsr_config *a, const tsr_config *b, double gflops[2],
                     double score[2]) {
    double t[2][3 * TUNE_MAX_RUNS];
    int n[2] = {0, 0};
    tsr_ahead_idle(search->ahead);
    double began = search->backend.now(search->backend.ctx);
    int rounds = 0;
    for (int round = 0; round < 3; ++round) {
        for (int w = 0; w < 2; ++w) {
            double total = 0;
            int runs = 0;
            while (runs < TUNE_MAX_RUNS && (runs < TUNE_MIN_RUNS || total < TUNE_MAX_SECONDS / 3) &&
                   timed_run(search, w ? b : a, &t[w][n[w]]) == TSR_SUCCESS) {
                total += t[w][n[w]++];
                ++runs;
            }
            tsr_clear_error();
        }
        ++rounds;
        if (duel_decided(t[0], n[0], t[1], n[1])) break;
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
    if (search->log) {
        char desc[2][256];
        tsr_config_format(search->op, a, desc[0], sizeof desc[0]);
        tsr_config_format(search->op, b, desc[1], sizeof desc[1]);
        fprintf(search->log, "{\"op\": \"%s\", \"class\": \"%s\", \"outcome\": \"duel\", \"config\": \"%s\", "
                "\"against\": \"%s\", \"gflops\": [%.3f, %.3f], \"runs\": [%d, %d], \"rounds\": %d, \"duel_s\": %.4f, "
                "\"timing\": \"%s\"}\n", search->op->name, search->problem_class, desc[0], desc[1], gflops[0],
                gflops[1], n[0], n[1], rounds, search->backend.now(search->backend.ctx) - began, log_timing(search));
        fflush(search->log);
    }
}
