/* The auto-tuner: searches an op's declared parameter space per problem class,
 * validating every candidate against a reference and timing it with profiling events. */
#define _GNU_SOURCE
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TUNE_MIN_RUNS 5        /* timed runs of a candidate that survives its first... */
#define TUNE_MAX_RUNS 60       /* ...continued until TUNE_MIN_SECONDS of device time, at most this many */
#define TUNE_MIN_SECONDS 0.3  /* short problems need many runs for a stable median on a busy machine */
#define TUNE_ABANDON_FACTOR 3  /* a first run this much slower than the best ends the candidate */
#define TUNE_TOLERANCE 1e-4    /* relative error above which a result is wrong */
#define TUNE_KEEP 4            /* best + runners-up stored per class */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the search space: allowed values per parameter ---- */

typedef struct space {
    int nparams;
    int nvalues[TSR_MAX_PARAMS];
    int values[TSR_MAX_PARAMS][32];
} space;

/* The op's space, narrowed by "NAME=v1,v2 NAME=v3" (`restrict_to` may be NULL). */
static tsr_status make_space(const tsr_op *op, const char *restrict_to, space *sp) {
    memset(sp, 0, sizeof *sp);
    sp->nparams = op->nparams;
    for (int p = 0; p < op->nparams; ++p) {
        sp->nvalues[p] = op->params[p].nvalues;
        memcpy(sp->values[p], op->params[p].values, (size_t)op->params[p].nvalues * sizeof(int));
    }
    if (!restrict_to) return TSR_SUCCESS;
    char buf[512];
    tsr_strlcpy(buf, restrict_to, sizeof buf);
    char *save = NULL;
    for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return tsr_fail(TSR_ERR_INVALID_ARG, "space: '%s' is not NAME=V1,V2,...", tok);
        *eq = '\0';
        int p = 0;
        while (p < op->nparams && strcmp(op->params[p].name, tok) != 0) ++p;
        if (p == op->nparams) return tsr_fail(TSR_ERR_INVALID_ARG, "space: op %s has no parameter '%s'", op->name, tok);
        int n = 0;
        char *vsave = NULL;
        for (char *v = strtok_r(eq + 1, ",", &vsave); v; v = strtok_r(NULL, ",", &vsave)) {
            char *end = NULL;
            long value = strtol(v, &end, 10);
            bool allowed = false;
            for (int i = 0; end != v && *end == '\0' && i < op->params[p].nvalues; ++i)
                allowed |= op->params[p].values[i] == value;
            if (!allowed) return tsr_fail(TSR_ERR_INVALID_ARG, "space: %s=%s is not in the parameter space", tok, v);
            if (n < 32) sp->values[p][n++] = (int)value;
        }
        if (n == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "space: %s has no values", tok);
        sp->nvalues[p] = n;
    }
    return TSR_SUCCESS;
}

/* A configuration as value indices into the space. */
typedef struct point {
    int idx[TSR_MAX_PARAMS];
} point;

static void point_config(const space *sp, const point *pt, tsr_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (int p = 0; p < sp->nparams; ++p) cfg->values[p] = sp->values[p][pt->idx[p]];
}

/* The point of a configuration, false when a value is outside the (restricted) space. */
static bool config_point(const space *sp, const tsr_config *cfg, point *pt) {
    for (int p = 0; p < sp->nparams; ++p) {
        pt->idx[p] = -1;
        for (int i = 0; i < sp->nvalues[p]; ++i)
            if (sp->values[p][i] == cfg->values[p]) pt->idx[p] = i;
        if (pt->idx[p] < 0) return false;
    }
    return true;
}

static bool next_point(const space *sp, point *pt) {
    for (int p = sp->nparams - 1; p >= 0; --p) {
        if (++pt->idx[p] < sp->nvalues[p]) return true;
        pt->idx[p] = 0;
    }
    return false;
}

/* ---- random numbers (xorshift64*, seeded per run) ---- */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}
static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

/* ---- evaluation ---- */

typedef struct evaluated {
    tsr_config config;
    double gflops;   /* from the median time; 0: failed, wrong or abandoned */
    double score;    /* GFLOP/s from the 25th-percentile time: what candidates are ranked by */
    double spread;
    bool expanded;   /* climb: every one-step neighbour has been tried */
} evaluated;

typedef struct tuning_state {
    FILE *log;
    const char *cls;
    tsr_device *dev;
    const tsr_op *op;
    const space *sp;
    void *ctx;
    double flops;
    evaluated *seen;
    int nseen, capseen;
    double best_time; /* seconds; 0 until something succeeded */
    tsr_tune_result *result;
} tuning_state;

static bool already_seen(const tuning_state *ts, const tsr_config *cfg) {
    for (int i = 0; i < ts->nseen; ++i)
        if (memcmp(&ts->seen[i].config, cfg, sizeof *cfg) == 0) return true;
    return false;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Device time of one run, from the first command's start to the last one's end. */
static tsr_status timed_run(tuning_state *ts, const tsr_config *cfg, double *seconds) {
    cl_event first = NULL, last = NULL;
    tsr_status st = ts->op->tuning_run(ts->dev, ts->ctx, cfg, &first, &last);
    if (st != TSR_SUCCESS) return st;
    cl_ulong t0 = 0, t1 = 0;
    cl_int err = clWaitForEvents(1, &last);
    if (err == CL_SUCCESS) err = clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    if (err == CL_SUCCESS) err = clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    clReleaseEvent(first);
    clReleaseEvent(last);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "timing a tuning run", __FILE__, __LINE__);
    *seconds = t1 > t0 ? (double)(t1 - t0) * 1e-9 : 1e-9;
    return TSR_SUCCESS;
}

static void log_candidate(tuning_state *ts, const tsr_config *cfg, const char *outcome, double gflops, double score,
                          double spread) {
    if (!ts->log) return;
    char desc[256];
    tsr_config_format(ts->op, cfg, desc, sizeof desc);
    fprintf(ts->log, "{\"op\": \"%s\", \"class\": \"%s\", \"config\": \"%s\", \"outcome\": \"%s\", "
            "\"gflops\": %.3f, \"gflops_q25\": %.3f, \"spread\": %.3f}\n", ts->op->name, ts->cls, desc, outcome,
            gflops, score, spread);
    fflush(ts->log);
}

static double evaluate_inner(tuning_state *ts, const tsr_config *cfg);

/* Build, run, validate and time one candidate; returns its GFLOP/s (0 when rejected). */
static double evaluate(tuning_state *ts, const tsr_config *cfg) {
    int before[4] = {ts->result->build_failures, ts->result->launch_failures, ts->result->wrong_results,
                     ts->result->abandoned};
    double g = evaluate_inner(ts, cfg);
    const char *outcome = g > 0 ? "ok"
                          : ts->result->build_failures > before[0]  ? "build-failed"
                          : ts->result->launch_failures > before[1] ? "launch-failed"
                          : ts->result->wrong_results > before[2]   ? "wrong-result"
                          : ts->result->abandoned > before[3]       ? "abandoned"
                                                                    : "failed";
    const evaluated *e = &ts->seen[ts->nseen - 1];
    log_candidate(ts, cfg, outcome, g > 0 ? e->gflops : 0, g, g > 0 ? e->spread : 0);
    return g;
}

static double evaluate_inner(tuning_state *ts, const tsr_config *cfg) {
    if (ts->nseen == ts->capseen) {
        int cap = ts->capseen ? 2 * ts->capseen : 64;
        evaluated *grown = realloc(ts->seen, (size_t)cap * sizeof *grown);
        if (!grown) return 0;
        ts->seen = grown;
        ts->capseen = cap;
    }
    evaluated *e = &ts->seen[ts->nseen++];
    memset(e, 0, sizeof *e);
    e->config = *cfg;
    ts->result->evaluated++;
    double warm;
    tsr_status st = timed_run(ts, cfg, &warm); /* also builds the program */
    if (st != TSR_SUCCESS) {
        if (st == TSR_ERR_BUILD) ts->result->build_failures++;
        else ts->result->launch_failures++;
        tsr_clear_error();
        return 0;
    }
    double err = INFINITY;
    if (ts->op->tuning_check(ts->dev, ts->ctx, &err) != TSR_SUCCESS || !(err <= TUNE_TOLERANCE)) {
        ts->result->wrong_results++;
        tsr_clear_error();
        return 0;
    }
    double t[TUNE_MAX_RUNS], settle, total = 0;
    if (timed_run(ts, cfg, &settle) != TSR_SUCCESS) { /* one more untimed run: caches, pages, thread pool */
        ts->result->launch_failures++;
        tsr_clear_error();
        return 0;
    }
    int n = 0;
    while (n < TUNE_MAX_RUNS) {
        if (timed_run(ts, cfg, &t[n]) != TSR_SUCCESS) {
            ts->result->launch_failures++;
            tsr_clear_error();
            return 0;
        }
        total += t[n++];
        /* Clearly slower than the best after one run: not worth more runs. */
        if (n == 1 && ts->best_time > 0 && t[0] > TUNE_ABANDON_FACTOR * ts->best_time) {
            ts->result->abandoned++;
            return 0;
        }
        if (n >= TUNE_MIN_RUNS && total >= TUNE_MIN_SECONDS) break;
    }
    qsort(t, (size_t)n, sizeof t[0], compare_doubles);
    double median = (n % 2) ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    /* Other tenants of a shared machine only ever add time: rank by the lower quartile, which
     * ignores up to three quarters of runs slowed that way; report the median too. */
    double quartile = t[(n - 1) / 4];
    e->gflops = ts->flops / median * 1e-9;
    e->score = ts->flops / quartile * 1e-9;
    e->spread = (t[n - 1] - t[0]) / median;
    if (ts->best_time == 0 || quartile < ts->best_time) ts->best_time = quartile;
    return e->score;
}

/* Time two configurations in alternation (3 rounds of runs each); fills GFLOP/s from the
 * median and the lower-quartile time of all their runs. */
static void duel(tuning_state *ts, const tsr_config *a, const tsr_config *b, double gflops[2], double score[2]) {
    double t[2][3 * TUNE_MAX_RUNS];
    int n[2] = {0, 0};
    for (int round = 0; round < 3; ++round)
        for (int w = 0; w < 2; ++w) {
            double total = 0;
            int runs = 0;
            while (runs < TUNE_MAX_RUNS && (runs < TUNE_MIN_RUNS || total < TUNE_MIN_SECONDS / 3) &&
                   timed_run(ts, w ? b : a, &t[w][n[w]]) == TSR_SUCCESS) {
                total += t[w][n[w]++];
                ++runs;
            }
            tsr_clear_error();
        }
    for (int w = 0; w < 2; ++w) {
        gflops[w] = score[w] = 0;
        if (n[w] < TUNE_MIN_RUNS) continue;
        qsort(t[w], (size_t)n[w], sizeof t[w][0], compare_doubles);
        gflops[w] = ts->flops / t[w][n[w] / 2] * 1e-9;
        score[w] = ts->flops / t[w][(n[w] - 1) / 4] * 1e-9;
    }
}

/* ---- strategies ---- */

typedef struct budget {
    double deadline;     /* absolute, seconds */
    int evaluations;     /* 0: unlimited */
    int start_evals;
} budget;

static bool budget_left(const tuning_state *ts, const budget *b) {
    if (b->evaluations && ts->result->evaluated - b->start_evals >= b->evaluations) return false;
    return now_s() < b->deadline;
}

typedef struct progress_ctx {
    const tsr_tune_options *opt;
    const char *op, *cls;
    double class_start, class_budget_s, remaining_after_s;
    int planned;
} progress_ctx;

static void report(const tuning_state *ts, const progress_ctx *pc) {
    if (!pc->opt->progress) return;
    double best = 0;
    for (int i = 0; i < ts->nseen; ++i) best = fmax(best, ts->seen[i].score);
    double elapsed = now_s() - pc->class_start;
    tsr_tune_progress p = {.op = pc->op,
                           .problem_class = pc->cls,
                           .evaluated = ts->result->evaluated,
                           .planned = pc->planned,
                           .best_gflops = best,
                           .unit = ts->op->rate_unit ? ts->op->rate_unit : "GFLOP/s",
                           .elapsed_s = elapsed,
                           .eta_s = fmax(0.0, pc->class_budget_s - elapsed) + pc->remaining_after_s};
    if (pc->planned > 0 && ts->result->evaluated > 0) {
        double per = elapsed / ts->result->evaluated;
        p.eta_s = fmin(p.eta_s, per * (pc->planned - ts->result->evaluated) + pc->remaining_after_s);
    }
    pc->opt->progress(&p, pc->opt->user);
}

static bool legal(const tuning_state *ts, const point *pt, tsr_config *cfg) {
    point_config(ts->sp, pt, cfg);
    tsr_op_normalize(ts->op, cfg);
    return ts->op->config_ok(ts->dev, NULL, cfg);
}

static void search_exhaustive(tuning_state *ts, const budget *b, const progress_ctx *pc) {
    point pt;
    memset(&pt, 0, sizeof pt);
    do {
        tsr_config cfg;
        if (!legal(ts, &pt, &cfg) || already_seen(ts, &cfg)) continue;
        if (!budget_left(ts, b)) return;
        evaluate(ts, &cfg);
        report(ts, pc);
    } while (next_point(ts->sp, &pt));
}

static bool random_legal(tuning_state *ts, uint64_t *rng, tsr_config *cfg) {
    for (int attempt = 0; attempt < 2000; ++attempt) {
        point pt;
        for (int p = 0; p < ts->sp->nparams; ++p) pt.idx[p] = (int)(rng_next(rng) % (uint64_t)ts->sp->nvalues[p]);
        if (legal(ts, &pt, cfg) && !already_seen(ts, cfg)) return true;
    }
    return false;
}

static void search_random(tuning_state *ts, const budget *b, uint64_t *rng, const progress_ctx *pc) {
    tsr_config cfg;
    while (budget_left(ts, b) && random_legal(ts, rng, &cfg)) {
        evaluate(ts, &cfg);
        report(ts, pc);
    }
}

/* Simulated annealing on the index grid: a neighbour moves one parameter one step (or,
 * sometimes, anywhere in its range); worse moves are accepted with a probability that
 * shrinks as the budget runs out. */
static void search_anneal(tuning_state *ts, const budget *b, uint64_t *rng, const tsr_config *start,
                          double start_gflops, const progress_ctx *pc, double budget_s) {
    point cur;
    tsr_config cfg = *start;
    if (!config_point(ts->sp, start, &cur)) {
        if (!random_legal(ts, rng, &cfg)) return;
        config_point(ts->sp, &cfg, &cur);
        start_gflops = evaluate(ts, &cfg);
        report(ts, pc);
    }
    double cur_g = start_gflops;
    double t_begin = now_s();
    while (budget_left(ts, b)) {
        double progress = fmin(1.0, (now_s() - t_begin) / fmax(budget_s, 1e-3));
        if (b->evaluations)
            progress = fmax(progress, (double)(ts->result->evaluated - b->start_evals) / b->evaluations);
        double temperature = 0.08 * (1.0 - progress) + 0.005;
        point next = cur;
        bool found = false;
        for (int attempt = 0; attempt < 200 && !found; ++attempt) {
            next = cur;
            int moves = 1 + (rng_unit(rng) < 0.15); /* sometimes two parameters at once */
            for (int m = 0; m < moves; ++m) {
                int p = (int)(rng_next(rng) % (uint64_t)ts->sp->nparams);
                int n = ts->sp->nvalues[p];
                if (n < 2) continue;
                if (rng_unit(rng) < 0.1) next.idx[p] = (int)(rng_next(rng) % (uint64_t)n);
                else next.idx[p] = next.idx[p] + ((rng_next(rng) & 1) ? 1 : -1);
                if (next.idx[p] < 0) next.idx[p] = 1;
                if (next.idx[p] >= n) next.idx[p] = n - 2;
            }
            found = legal(ts, &next, &cfg) && !already_seen(ts, &cfg);
        }
        if (!found) { /* the neighbourhood is exhausted: restart somewhere new */
            if (!random_legal(ts, rng, &cfg)) return;
            config_point(ts->sp, &cfg, &next);
        }
        double g = evaluate(ts, &cfg);
        report(ts, pc);
        if (g <= 0) continue;
        if (g > cur_g || cur_g <= 0 || rng_unit(rng) < exp((g - cur_g) / (cur_g * temperature))) {
            cur = next;
            cur_g = g;
        }
    }
}

/* Best-first hill climbing on the index grid: always work on the best configuration whose
 * one-step neighbours (each parameter to its next legal value up or down) are not all tried yet; a better
 * neighbour takes over at once. Tuning parameters mostly act smoothly and separately, so this
 * walks from the default to the nearby optimum in a handful of evaluations; when every
 * measured configuration is exhausted it restarts at a random one. */
static void search_climb(tuning_state *ts, const budget *b, uint64_t *rng, const progress_ctx *pc) {
    while (budget_left(ts, b)) {
        int center = -1;
        for (int i = 0; i < ts->nseen; ++i)
            if (!ts->seen[i].expanded && ts->seen[i].score > 0 &&
                (center < 0 || ts->seen[i].score > ts->seen[center].score))
                center = i;
        tsr_config cfg;
        point pt;
        bool found = false;
        if (center >= 0 && config_point(ts->sp, &ts->seen[center].config, &pt)) {
            for (int p = 0; p < ts->sp->nparams && !found; ++p)
                for (int step = 1; step >= -1 && !found; step -= 2) {
                    /* the nearest legal value that way: illegal values are stepped over */
                    point next = pt;
                    bool ok = false;
                    do {
                        next.idx[p] += step;
                    } while (next.idx[p] >= 0 && next.idx[p] < ts->sp->nvalues[p] && !(ok = legal(ts, &next, &cfg)));
                    found = ok && !already_seen(ts, &cfg);
                }
        }
        if (center >= 0 && !found) { /* nothing left around it */
            ts->seen[center].expanded = true;
            continue;
        }
        if (!found && !random_legal(ts, rng, &cfg)) return;
        evaluate(ts, &cfg);
        report(ts, pc);
    }
}

/* ---- results ---- */

static int by_score_desc(const void *a, const void *b) {
    double x = ((const evaluated *)a)->score, y = ((const evaluated *)b)->score;
    return (x < y) - (x > y);
}

typedef struct class_outcome {
    char cls[32];
    char problem[64];
    evaluated top[TUNE_KEEP];
    int ntop;
    int evaluations;
} class_outcome;

typedef struct save_ctx {
    tsr_device *dev;
    const tsr_op *op;
    const tsr_tune_options *opt;
    class_outcome *outcomes;
    int noutcomes;
    const char *hash;
} save_ctx;

static cJSON *config_json(const tsr_op *op, const tsr_config *cfg) {
    cJSON *o = cJSON_CreateObject();
    for (int p = 0; o && p < op->nparams; ++p) cJSON_AddNumberToObject(o, op->params[p].name, cfg->values[p]);
    return o;
}

static tsr_status save_results(cJSON *root, void *vctx) {
    save_ctx *sc = vctx;
    cJSON *dev = tsr_db_device_node(root, &sc->dev->info);
    if (!dev) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    cJSON *ops = cJSON_GetObjectItemCaseSensitive(dev, "ops");
    cJSON *op = cJSON_GetObjectItemCaseSensitive(ops, sc->op->name);
    if (!op) op = cJSON_AddObjectToObject(ops, sc->op->name);
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    static const char *const strategies[] = {"", "exhaustive", "random", "anneal", "climb"};
    for (int i = 0; i < sc->noutcomes; ++i) {
        const class_outcome *o = &sc->outcomes[i];
        if (o->ntop == 0) continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToObject(e, "config", config_json(sc->op, &o->top[0].config));
        cJSON_AddNumberToObject(e, "gflops", o->top[0].gflops); /* in "unit" */
        cJSON_AddStringToObject(e, "unit", sc->op->rate_unit ? sc->op->rate_unit : "GFLOP/s");
        cJSON_AddNumberToObject(e, "gflops_q25", o->top[0].score);
        cJSON_AddNumberToObject(e, "spread", o->top[0].spread);
        cJSON_AddStringToObject(e, "problem", o->problem);
        cJSON *runners = cJSON_AddArrayToObject(e, "runners_up");
        for (int r = 1; r < o->ntop; ++r) {
            cJSON *ru = cJSON_CreateObject();
            cJSON_AddItemToObject(ru, "config", config_json(sc->op, &o->top[r].config));
            cJSON_AddNumberToObject(ru, "gflops", o->top[r].gflops);
            cJSON_AddItemToArray(runners, ru);
        }
        char options[1024];
        sc->op->build_options(&o->top[0].config, 0, options, sizeof options);
        cJSON_AddStringToObject(e, "tessera_version", TSR_VERSION_STRING);
        cJSON_AddStringToObject(e, "source_hash", sc->hash);
        cJSON_AddStringToObject(e, "build_options", options);
        cJSON_AddStringToObject(e, "date", date);
        cJSON_AddStringToObject(e, "strategy", strategies[sc->opt->strategy]);
        cJSON_AddNumberToObject(e, "evaluations", o->evaluations);
        /* A fresh measurement of this very device replaces the old one. */
        if (cJSON_GetObjectItemCaseSensitive(op, o->cls)) cJSON_ReplaceItemInObjectCaseSensitive(op, o->cls, e);
        else cJSON_AddItemToObject(op, o->cls, e);
    }
    return TSR_SUCCESS;
}

tsr_status tsr_tune_op(tsr_device *dev, const tsr_op *op, const tsr_tune_options *options, tsr_tune_result *results,
                       size_t max_results, size_t *nresults) {
    tsr_tune_options opt = *options;
    if (opt.strategy == 0) opt.strategy = TSR_TUNE_ANNEAL;
    if (opt.strategy < TSR_TUNE_EXHAUSTIVE || opt.strategy > TSR_TUNE_CLIMB)
        return tsr_fail(TSR_ERR_INVALID_ARG, "unknown tuning strategy %d", (int)opt.strategy);
    if (!(opt.budget_seconds >= 0) || !isfinite(opt.budget_seconds) || opt.budget_evaluations < 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tuning budgets must be finite and not negative"); /* inf: no end */
    if (opt.budget_seconds == 0) opt.budget_seconds = 88; /* with setup, duels and overheads (measured 24 s), within two minutes */
    if (!op->tuning_setup) return tsr_fail(TSR_ERR_UNSUPPORTED, "op %s cannot be tuned", op->name);
    /* By default only the part of the space the op deems worth it on this device; "all": everything. */
    const char *restrict_to = opt.space;
    if (!restrict_to) restrict_to = op->tuning_space ? op->tuning_space(dev) : NULL;
    else if (strcmp(restrict_to, "all") == 0) restrict_to = NULL;
    space sp;
    tsr_status st = make_space(op, restrict_to, &sp);
    if (st != TSR_SUCCESS) return st;

    /* The classes to tune. */
    const char *classes[16];
    int nclasses = 0;
    if (opt.classes && *opt.classes) {
        char buf[256];
        /* Never tune a silently shortened list. */
        if (strlen(opt.classes) >= sizeof buf)
            return tsr_fail(TSR_ERR_INVALID_ARG, "classes: the list is longer than %zu characters", sizeof buf - 1);
        tsr_strlcpy(buf, opt.classes, sizeof buf);
        char *save = NULL;
        for (char *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
            int idx = tsr_op_class_index(op, c);
            if (idx < 0) return tsr_fail(TSR_ERR_INVALID_ARG, "op %s has no problem class '%s'", op->name, c);
            bool repeated = false;
            for (int i = 0; i < nclasses; ++i) repeated |= classes[i] == op->classes[idx];
            if (repeated) return tsr_fail(TSR_ERR_INVALID_ARG, "classes: '%s' is named twice", c);
            if (nclasses == 16) return tsr_fail(TSR_ERR_INVALID_ARG, "classes: more than 16");
            classes[nclasses++] = op->classes[idx];
        }
        if (nclasses == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "classes: '%s' names no class", opt.classes);
    } else {
        while (op->classes[nclasses] && nclasses < 16) {
            classes[nclasses] = op->classes[nclasses];
            ++nclasses;
        }
    }
    char hash[17];
    if ((st = tsr_source_hash(op->source_name, hash)) != TSR_SUCCESS) return st;
    /* Where the results go, checked before the search rather than after it. */
    char path[TSR_PATH_MAX];
    if (!opt.dry_run) {
        if (opt.db_path) {
            if (!*opt.db_path) return tsr_fail(TSR_ERR_INVALID_ARG, "the tuning database path is empty");
            if (strlen(opt.db_path) >= sizeof path) return tsr_fail(TSR_ERR_INVALID_ARG, "tuning database path too long");
            tsr_strlcpy(path, opt.db_path, sizeof path);
        } else if ((st = tsr_tuning_db_path(path, sizeof path)) != TSR_SUCCESS) {
            tsr_error_append(" (or measure without saving: a dry run)");
            return st;
        }
        if ((st = tsr_db_check_writable(path)) != TSR_SUCCESS) return st;
    }
    uint64_t rng = opt.seed ? opt.seed : (uint64_t)time(NULL) * 2654435761u + 1;
    class_outcome *outcomes = calloc((size_t)nclasses, sizeof *outcomes);
    if (!outcomes) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    double per_class = opt.budget_seconds / nclasses;
    FILE *log = NULL;
    if (opt.log_path && (st = tsr_open_append(opt.log_path, &log)) != TSR_SUCCESS) {
        free(outcomes);
        return st;
    }
    size_t produced = 0;
    for (int c = 0; c < nclasses && st == TSR_SUCCESS; ++c) {
        double class_start = now_s();
        tsr_tune_result local;
        tsr_tune_result *res = (results && (size_t)c < max_results) ? &results[c] : &local;
        memset(res, 0, sizeof *res);
        tsr_strlcpy(res->op, op->name, sizeof res->op);
        tsr_strlcpy(res->problem_class, classes[c], sizeof res->problem_class);
        tsr_strlcpy(res->unit, op->rate_unit ? op->rate_unit : "GFLOP/s", sizeof res->unit);
        tuning_state ts = {.log = log, .cls = classes[c], .dev = dev, .op = op, .sp = &sp, .result = res};
        if ((st = op->tuning_setup(dev, classes[c], &ts.ctx)) != TSR_SUCCESS) break;
        ts.flops = op->tuning_flops(ts.ctx);
        op->tuning_describe(ts.ctx, res->problem, sizeof res->problem);
        progress_ctx pc = {.opt = &opt, .op = op->name, .cls = classes[c], .class_start = class_start,
                           .class_budget_s = per_class, .remaining_after_s = per_class * (nclasses - c - 1),
                           .planned = opt.budget_evaluations};
        budget b = {.deadline = class_start + per_class, .evaluations = opt.budget_evaluations, .start_evals = 0};
        /* The built-in default first: the yardstick, and a start for the guided search. */
        tsr_config def;
        tsr_op_default_config(op, dev, classes[c], &def);
        double def_g = op->config_ok(dev, NULL, &def) ? evaluate(&ts, &def) : 0;
        res->default_gflops = def_g;
        report(&ts, &pc);
        tsr_config start = def; /* where annealing starts: the best of the default and the seeds */
        double start_g = def_g;
        tsr_config seeds[8];
        int nseeds = tsr_op_seeds(op, dev, classes[c], seeds, 8);
        for (int i = 0; i < nseeds && budget_left(&ts, &b); ++i)
            if (op->config_ok(dev, NULL, &seeds[i]) && !already_seen(&ts, &seeds[i])) {
                double g = evaluate(&ts, &seeds[i]);
                report(&ts, &pc);
                if (g > start_g) start = seeds[i], start_g = g;
            }
        switch (opt.strategy) {
        case TSR_TUNE_EXHAUSTIVE: search_exhaustive(&ts, &b, &pc); break;
        case TSR_TUNE_RANDOM: search_random(&ts, &b, &rng, &pc); break;
        case TSR_TUNE_CLIMB: search_climb(&ts, &b, &rng, &pc); break;
        default: search_anneal(&ts, &b, &rng, &start, start_g, &pc, per_class); break;
        }
        qsort(ts.seen, (size_t)ts.nseen, sizeof *ts.seen, by_score_desc);
        /* Final duel, with warm caches: the best candidate against the default, measured in
         * alternation so both see the same machine. The default wins ties, so a tuned entry
         * differs from the default only when it beats it side by side. */
        if (ts.nseen > 0 && ts.seen[0].score > 0 && def_g > 0) {
            int best_idx = 0, def_idx = -1;
            for (int i = 0; i < ts.nseen; ++i)
                if (memcmp(&ts.seen[i].config, &def, sizeof def) == 0) def_idx = i;
            double dg[2] = {0, 0}, dq[2] = {0, 0};
            if (def_idx != 0) duel(&ts, &ts.seen[best_idx].config, &def, dg, dq);
            else res->default_gflops = ts.seen[0].gflops; /* the default is the best: nothing to compare */
            /* The duel alternates runs, so both medians see the same machine: decide on them. */
            if (dg[1] >= dg[0] && def_idx > 0) { /* the default is really the best: move it first */
                evaluated d = ts.seen[def_idx];
                memmove(&ts.seen[1], &ts.seen[0], (size_t)def_idx * sizeof d);
                ts.seen[0] = d;
            }
            if (dq[0] > 0 && dq[1] > 0) {
                bool default_won = dg[1] >= dg[0] || def_idx == 0;
                ts.seen[0].gflops = default_won ? dg[1] : dg[0];
                ts.seen[0].score = default_won ? dq[1] : dq[0];
                res->default_gflops = dg[1];
            }
        }
        class_outcome *o = &outcomes[c];
        tsr_strlcpy(o->cls, classes[c], sizeof o->cls);
        tsr_strlcpy(o->problem, res->problem, sizeof o->problem);
        o->evaluations = res->evaluated;
        for (int i = 0; i < ts.nseen && o->ntop < TUNE_KEEP; ++i)
            if (ts.seen[i].score > 0) o->top[o->ntop++] = ts.seen[i];
        if (o->ntop) {
            tsr_config_format(op, &o->top[0].config, res->best_config, sizeof res->best_config);
            res->best_gflops = o->top[0].gflops;
            res->best_spread = o->top[0].spread;
        }
        res->seconds = now_s() - class_start;
        op->tuning_free(ts.ctx);
        free(ts.seen);
        ++produced;
    }
    if (st == TSR_SUCCESS && !opt.dry_run) {
        save_ctx sc = {.dev = dev, .op = op, .opt = &opt, .outcomes = outcomes, .noutcomes = (int)produced, .hash = hash};
        st = tsr_db_update(path, save_results, &sc);
        tsr_tuning_invalidate(dev);
    }
    free(outcomes);
    if (log) fclose(log);
    if (nresults) *nresults = produced < max_results ? produced : max_results;
    return st;
}

tsr_status tsr_tune(tsr_device *dev, const char *op_name, const tsr_tune_options *options, tsr_tune_result *results,
                    size_t max_results, size_t *nresults) {
    tsr_clear_diagnostics();
    if (nresults) *nresults = 0;
    if (!dev || !op_name || !options) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_tune: device, op and options must be set");
    const tsr_op *op = tsr_find_op(op_name);
    if (!op) return tsr_fail(TSR_ERR_NOT_FOUND, "no op named '%s'", op_name);
    return tsr_tune_op(dev, op, options, results, max_results, nresults);
}
