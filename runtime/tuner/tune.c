/* The tuning driver: per problem class, the built-in default and the op's seeds first, then
 * the chosen strategy, then a duel of the best against the default; the results are saved
 * unless it is a dry run. */
#define _GNU_SOURCE
#include "tuner.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TUNE_MAX_CLASSES 32

static const struct {
    const char *name; /* as the database records it */
    tsr_strategy_fn run;
} strategies[] = {
    [TSR_TUNE_EXHAUSTIVE] = {"exhaustive", tsr_strategy_exhaustive},
    [TSR_TUNE_RANDOM] = {"random", tsr_strategy_random},
    [TSR_TUNE_ANNEAL] = {"anneal", tsr_strategy_anneal},
    [TSR_TUNE_CLIMB] = {"climb", tsr_strategy_climb},
};

/* The options with defaults filled in, or a failure naming the bad one. */
static tsr_status check_options(const tsr_op *op, const tsr_tune_options *options, tsr_tune_options *opt) {
    *opt = *options;
    if (opt->strategy == 0) opt->strategy = TSR_TUNE_ANNEAL;
    if (opt->strategy < TSR_TUNE_EXHAUSTIVE || opt->strategy > TSR_TUNE_CLIMB)
        return tsr_fail(TSR_ERR_INVALID_ARG, "unknown tuning strategy %d", (int)opt->strategy);
    if (!(opt->budget_seconds >= 0) || !isfinite(opt->budget_seconds) || opt->budget_evaluations < 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tuning budgets must be finite and not negative"); /* inf: no end */
    if (opt->budget_seconds == 0) opt->budget_seconds = 88; /* with setup, duels and overheads (measured 24 s), within two minutes */
    if (!op->fixture.setup || !op->class_shapes)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "op %s cannot be tuned", op->name);
    return TSR_SUCCESS;
}

/* The classes to tune: the comma-separated list, or the op's fp32 classes (its 16-bit classes take
 * their fp32 class's entry until they are named: a default tune keeps its budget per class). */
static tsr_status parse_classes(const tsr_op *op, const char *list, const char *classes[TUNE_MAX_CLASSES],
                                int *nclasses) {
    *nclasses = 0;
    if (!list || !*list) {
        for (int i = 0; op->classes[i]; ++i) {
            /* never a silently shortened default either (conv2d has 17 fp32 classes) */
            if (*nclasses == TUNE_MAX_CLASSES)
                return tsr_fail(TSR_ERR_UNSUPPORTED, "op %s has more than %d problem classes to tune", op->name,
                                TUNE_MAX_CLASSES);
            classes[(*nclasses)++] = tsr_op_class_list(op)[i]; /* the listed ones lead the list */
        }
        return TSR_SUCCESS;
    }
    char buf[256];
    /* Never tune a silently shortened list. */
    if (strlen(list) >= sizeof buf)
        return tsr_fail(TSR_ERR_INVALID_ARG, "classes: the list is longer than %zu characters", sizeof buf - 1);
    tsr_strlcpy(buf, list, sizeof buf);
    char *save = NULL;
    for (char *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        int idx = tsr_op_class_index(op, c);
        if (idx < 0) return tsr_fail(TSR_ERR_INVALID_ARG, "op %s has no problem class '%s'", op->name, c);
        bool repeated = false;
        for (int i = 0; i < *nclasses; ++i) repeated |= classes[i] == tsr_op_class_list(op)[idx];
        if (repeated) return tsr_fail(TSR_ERR_INVALID_ARG, "classes: '%s' is named twice", c);
        if (*nclasses == TUNE_MAX_CLASSES) return tsr_fail(TSR_ERR_INVALID_ARG, "classes: more than %d", TUNE_MAX_CLASSES);
        classes[(*nclasses)++] = tsr_op_class_list(op)[idx];
    }
    if (*nclasses == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "classes: '%s' names no class", list);
    return TSR_SUCCESS;
}

/* Where the results go, checked before the search rather than after it. */
static tsr_status database_path(const tsr_tune_options *opt, char *path, size_t size) {
    tsr_status st;
    if (opt->db_path) {
        if (!*opt->db_path) return tsr_fail(TSR_ERR_INVALID_ARG, "the tuning database path is empty");
        if (strlen(opt->db_path) >= size) return tsr_fail(TSR_ERR_INVALID_ARG, "tuning database path too long");
        tsr_strlcpy(path, opt->db_path, size);
    } else {
        st = tsr_tuning_db_path(path, size);
        if (st != TSR_SUCCESS) {
            tsr_error_append(" (or measure without saving: a dry run)");
            return st;
        }
    }
    return tsr_db_check_writable(path);
}

static double duel_allowance(const tsr_search *search) {
    return search->duel_budget_s > 0 ? search->duel_budget_s : search->class_budget_s;
}

/* A duel takes 3 rounds of at least TUNE_MIN_RUNS runs of each side: more than the duel allowance on
 * a slow device, where a run takes seconds, so none is held there. */
static bool duel_unaffordable(const tsr_search *search) {
    return 3.0 * 2 * TUNE_MIN_RUNS * (search->best_time > 0 ? search->best_time : 0) > duel_allowance(search);
}

/* seen[idx] to the front, the ones before it one place down. */
static void move_first(tsr_evaluated *seen, int idx) {
    tsr_evaluated e = seen[idx];
    memmove(&seen[1], &seen[0], (size_t)idx * sizeof e);
    seen[0] = e;
}

/* Final duel, with warm caches: the best candidate against the default, measured in
 * alternation so both see the same machine. The default wins ties, so a tuned entry differs
 * from the default only when it beats it side by side. Expects the search ranked. */
static void duel_with_default(tsr_search *search, const tsr_config *def, double def_score) {
    tsr_evaluated *seen = search->seen;
    if (search->nseen == 0 || !seen[0].validated || seen[0].score <= 0 || def_score <= 0) return;
    int def_idx = -1;
    for (int i = 0; i < search->nseen; ++i)
        if (memcmp(&seen[i].config, def, sizeof *def) == 0) def_idx = i;
    double dg[2] = {0, 0}, dq[2] = {0, 0};
    /* On a slow device (duel_unaffordable) no duel: the default stays first unless the best was
     * validated and beat it, by lower quartile, by over 10%. */
    if (def_idx > 0 && duel_unaffordable(search)) {
        search->result->default_gflops = seen[def_idx].gflops;
        if (seen[def_idx].validated && seen[0].score < 1.1 * seen[def_idx].score) move_first(seen, def_idx);
        return;
    }
    if (def_idx != 0) tsr_search_duel(search, &seen[0].config, def, dg, dq);
    else search->result->default_gflops = seen[0].gflops; /* the default is the best: nothing to compare */
    /* The duel alternates runs, so both medians see the same machine: decide on them. */
    if (dg[1] >= dg[0] && def_idx > 0) move_first(seen, def_idx); /* the default is really the best */
    if (dq[0] > 0 && dq[1] > 0) {
        bool default_won = dg[1] >= dg[0] || def_idx == 0;
        seen[0].gflops = default_won ? dg[1] : dg[0];
        seen[0].score = default_won ? dq[1] : dq[0];
        search->result->default_gflops = dg[1];
        if (!default_won) search->before_gflops = dg[1], search->before_score = dq[1]; /* (the entry's duel may replace them) */
    }
}

/* Then, where the device runs an entry today (the database's current one, or the built-in one)
 * that is neither the pick nor the default and was close enough to be validated, a duel of the
 * two: the entry keeps its place unless the pick beats it side by side, so a tune never leaves a
 * class slower than it was. Expects the search ranked. */
static void duel_with_entry(tsr_search *search, const tsr_config *entry, const tsr_config *def) {
    tsr_evaluated *seen = search->seen;
    if (!entry || search->nseen == 0 || !seen[0].validated || memcmp(&seen[0].config, entry, sizeof *entry) == 0)
        return;
    int idx = -1;
    for (int i = 1; i < search->nseen; ++i)
        if (memcmp(&seen[i].config, entry, sizeof *entry) == 0) idx = i;
    if (idx < 0 || !seen[idx].validated || seen[idx].score <= 0) return; /* failed, or clearly slower */
    if (duel_unaffordable(search)) return;
    double dg[2] = {0, 0}, dq[2] = {0, 0};
    tsr_search_duel(search, &seen[0].config, entry, dg, dq);
    if (!(dq[0] > 0 && dq[1] > 0)) return;
    /* the default kept its place in the first duel: its rate beside the entry's is the yardstick */
    if (memcmp(&seen[0].config, def, sizeof *def) == 0) search->result->default_gflops = dg[0];
    bool entry_won = dg[1] >= dg[0];
    if (entry_won) move_first(seen, idx);
    seen[0].gflops = entry_won ? dg[1] : dg[0];
    seen[0].score = entry_won ? dq[1] : dq[0];
    if (!entry_won) search->before_gflops = dg[1], search->before_score = dq[1];
}

/* The best (seen[0]) against seen[idx] side by side; the faster goes first, with the duel's rate
 * and score (the best keeps its place on a tie, and both stay where they are when the duel could
 * not measure them). */
static void duel_challenger(tsr_search *search, int idx) {
    tsr_evaluated *seen = search->seen;
    double dg[2] = {0, 0}, dq[2] = {0, 0};
    tsr_search_duel(search, &seen[0].config, &seen[idx].config, dg, dq);
    if (!(dq[0] > 0 && dq[1] > 0)) return;
    bool challenger_won = dg[1] > dg[0];
    if (challenger_won) move_first(seen, idx);
    seen[0].gflops = challenger_won ? dg[1] : dg[0];
    seen[0].score = challenger_won ? dq[1] : dq[0];
}

/* Before those, the best (unless it is the default or the entry) against the runner-up, where one
 * comes close (within 15% by lower quartile) and is neither the default nor the entry (they duel
 * it next): a candidate's score comes from a
 * few runs taken when it came up, and two configurations a few percent apart can swap places from
 * one tune to the next (the Zen 5's conv2d 3x3 class picked two forms by turns: docs/tuning.md).
 * Side by side the faster one wins, whatever its draw. Expects the search ranked. */
static void duel_runner_up(tsr_search *search, const tsr_config *def, const tsr_config *entry) {
    tsr_evaluated *seen = search->seen;
    if (search->nseen < 2 || !seen[0].validated || seen[0].score <= 0) return;
    if (duel_unaffordable(search)) return;
    /* The default or the entry first: their own duels would run the same pair again. */
    if (memcmp(&seen[0].config, def, sizeof *def) == 0 || (entry && memcmp(&seen[0].config, entry, sizeof *entry) == 0))
        return;
    int idx = -1;
    for (int i = 1; i < search->nseen && idx < 0; ++i) {
        if (!seen[i].validated || seen[i].score < 0.85 * seen[0].score) continue;
        if (memcmp(&seen[i].config, def, sizeof *def) == 0) continue;
        if (entry && memcmp(&seen[i].config, entry, sizeof *entry) == 0) continue;
        idx = i;
    }
    if (idx >= 0) duel_challenger(search, idx);
}

/* First of all, where the op has several implementations, the best validated candidate of each
 * other one (within half the best's score, and neither the default nor the entry: they duel it
 * later) against the best, side by side. Forms of different implementations are measured at
 * different moments of a search, often far apart, and on a VM whose speed moves by 2x within
 * seconds one measured in a slow phase fell outside the runner-up's 15%: on the Cascade Lake Xeon
 * (session 34) conv2d's strided-mid tune kept the padded form, measured at 120 GFLOP/s while im2col
 * had measured 78 in a slower phase, where side by side im2col ran the layer 1.09-1.26x faster.
 * Expects the search ranked. */
static void duel_other_implementations(tsr_search *search, const tsr_config *def, const tsr_config *entry) {
    tsr_evaluated *seen = search->seen;
    const tsr_op *op = search->op;
    if (!op || op->nimplementations < 2 || search->nseen < 2 || !seen[0].validated || seen[0].score <= 0) return;
    if (duel_unaffordable(search)) return;
    for (int m = 0; m < op->nimplementations; ++m) {
        const tsr_implementation *impl = &op->implementations[m];
        if (tsr_op_implementation(op, &seen[0].config) == impl) continue;
        int idx = -1;
        for (int i = 1; i < search->nseen && idx < 0; ++i) {
            if (tsr_op_implementation(op, &seen[i].config) != impl) continue;
            if (!seen[i].validated || seen[i].score < 0.5 * seen[0].score) break; /* its best is out of reach */
            if (memcmp(&seen[i].config, def, sizeof *def) == 0) break;
            if (entry && memcmp(&seen[i].config, entry, sizeof *entry) == 0) break;
            idx = i;
        }
        if (idx >= 0) duel_challenger(search, idx);
    }
}

void tsr_search_final_duels(tsr_search *search, const tsr_config *def, double def_score, const tsr_config *entry) {
    if (entry && memcmp(entry, def, sizeof *def) == 0) entry = NULL;
    search->before_gflops = search->before_score = 0;
    duel_other_implementations(search, def, entry);
    duel_runner_up(search, def, entry);
    duel_with_default(search, def, def_score);
    if (entry) {
        search->before_gflops = search->before_score = 0; /* what the device ran before is the entry */
        duel_with_entry(search, entry, def);
    }
}

static void pause_cache_store(tsr_device *dev, bool pause) {
    pthread_mutex_lock(&dev->program_lock);
    dev->cache_store_paused += pause ? 1 : -1;
    pthread_mutex_unlock(&dev->program_lock);
    /* ...and ops may build candidates' shared kernels in programs of their own (internal.h) */
    atomic_fetch_add(&dev->tuning, pause ? 1 : -1);
}

/* The configurations a class's search starts with, in the order it evaluates them: what the
 * workers compile ahead while the first ones are measured. */
typedef struct start_list {
    tsr_config configs[1 + 2 * 8];
    int n;
} start_list;

static int start_predict(tsr_search *search, const tsr_config *next, tsr_config *out, int max) {
    const start_list *l = search->predict_ctx;
    int at = 0;
    while (at < l->n && memcmp(&l->configs[at], next, sizeof *next) != 0) ++at;
    int n = 0;
    for (int i = at + 1; i < l->n && n < max; ++i) {
        bool repeated = false;
        for (int j = 0; j < n; ++j) repeated |= memcmp(&out[j], &l->configs[i], sizeof *next) == 0;
        if (!repeated && !tsr_search_seen(search, &l->configs[i])) out[n++] = l->configs[i];
    }
    return n;
}

/* Evaluate a configuration the search may start from (once). */
static void try_start(tsr_search *search, const tsr_config *config) {
    if (tsr_search_seen(search, config)) return;
    double score = tsr_search_evaluate(search, config);
    if (score > search->start_score) search->start = *config, search->start_score = score;
}

/* The database the results go to, as it stands (NULL when absent or unreadable: the search then
 * starts from the defaults alone; a damaged file is dealt with when the results are saved). */
static cJSON *load_known_entries(const tsr_tune_options *opt) {
    char path[TSR_PATH_MAX];
    cJSON *root = NULL;
    if (opt->db_path) {
        if (!*opt->db_path || strlen(opt->db_path) >= sizeof path) return NULL;
        tsr_strlcpy(path, opt->db_path, sizeof path);
    } else if (tsr_tuning_db_path(path, sizeof path) != TSR_SUCCESS) {
        tsr_clear_error();
        return NULL;
    }
    if (tsr_db_load(path, &root) != TSR_SUCCESS) tsr_clear_error();
    return root;
}

/* A class's default, the entries the database (and the built-in one) hold for it and, with
 * `op_seeds`, the op's seeds: the start of every search (see search_class). */
typedef struct class_start {
    tsr_config def;
    double def_score;
    bool def_ok;
    tsr_tuning_seed known[8];
    int nknown;
    tsr_config seeds[8];
    int nseeds;
    start_list list;
} class_start;

/* Is a seed's implementation one the search space holds? The op's space for a device leaves out
 * the implementations that do not pay there (GEMM's gpu kernel on PoCL's CPUs: 5 GFLOP/s against
 * 80-120 at 2048^3, ~10 s of a tune), and a space the caller narrowed by the selector asks for
 * those implementations alone: a seed of another is no start for this search. */
static bool seed_wanted(const tsr_search *search, const tsr_config *seed) {
    const tsr_op *op = search->op;
    if (!op->config_ok(search->device, NULL, seed)) return false;
    if (!search->space || !op->implementation_param) return true;
    int sel = tsr_param_index(op, op->implementation_param);
    if (sel < 0) return true;
    for (int i = 0; i < search->space->nvalues[sel]; ++i)
        if (search->space->values[sel][i] == seed->values[sel]) return true;
    return false;
}

/* With `op_seeds` false (tune all's first pass) the entry lookups resolve to today (the first
 * current one) is measured whatever the time (the evaluation budget still counts): what the device
 * runs today is what a tune must not lose to; the other known entries while the class's first-pass
 * share lasts. */
static void start_phase(tsr_search *search, class_start *cs, const cJSON *known_db, const char *hash, bool op_seeds) {
    const tsr_op *op = search->op;
    /* The built-in default first: the yardstick, and a start for the guided search. Then the
     * entries for this device's class (or the classes it falls back to): the current ones (a
     * re-tune never starts worse than what is there), then stale ones, tuned for an older kernel
     * source: a small edit seldom moves the best far. Starts only; lookups never launch a stale
     * entry. They count against the evaluation budget like any candidate. Then the op's seeds.
     * The whole list is known now: the workers compile the next ones while one is measured. */
    tsr_op_default_config(op, search->device, search->problem_class, &cs->def);
    cs->def_ok = op->config_ok(search->device, NULL, &cs->def);
    cs->nknown = tsr_tuning_seeds(search->device, op, known_db, search->problem_class, hash, cs->known, 8);
    cs->nseeds = tsr_op_seeds(op, search->device, search->problem_class, cs->seeds, 8);
    cs->list.n = 0;
    if (cs->def_ok) cs->list.configs[cs->list.n++] = cs->def;
    for (int i = 0; i < cs->nknown; ++i) cs->list.configs[cs->list.n++] = cs->known[i].config;
    for (int i = 0; op_seeds && i < cs->nseeds; ++i)
        if (seed_wanted(search, &cs->seeds[i])) cs->list.configs[cs->list.n++] = cs->seeds[i];
    search->predict = start_predict;
    search->predict_ctx = &cs->list;
    cs->def_score = 0;
    search->seed = "default";
    if (cs->def_ok) cs->def_score = tsr_search_evaluate(search, &cs->def);
    else tsr_search_report(search);
    search->result->default_gflops = cs->def_score;
    search->start = cs->def; /* where annealing starts: the best of the default and the seeds */
    search->start_score = cs->def_score;
    bool current_seen = false;
    for (int i = 0; i < cs->nknown; ++i) {
        bool evaluations_left = !search->max_evaluations || search->result->evaluated < search->max_evaluations;
        bool in_use = !cs->known[i].stale && !current_seen;
        current_seen |= !cs->known[i].stale;
        if (!(op_seeds || !in_use ? tsr_search_budget_left(search) : evaluations_left)) {
            if (op_seeds) break;
            continue; /* tune all: the entry in use may come later in the list */
        }
        search->seed = cs->known[i].stale ? "stale entry" : "current entry";
        search->measure_fully = in_use;
        try_start(search, &cs->known[i].config);
        search->measure_fully = false;
        search->result->stale_seeds += cs->known[i].stale;
    }
    if (op_seeds) {
        search->seed = "op seed";
        for (int i = 0; i < cs->nseeds && tsr_search_budget_left(search); ++i)
            if (seed_wanted(search, &cs->seeds[i])) try_start(search, &cs->seeds[i]);
    }
    search->seed = NULL;
    search->predict = NULL;
    search->predict_ctx = NULL;
}

/* The class's first current entry: what lookups resolve to now (NULL: none). */
static const tsr_config *current_entry(const class_start *cs) {
    for (int i = 0; i < cs->nknown; ++i)
        if (!cs->known[i].stale) return &cs->known[i].config;
    return NULL;
}

/* The op's seeds (unless the start phase took them), the strategy and the duel: leaves the
 * search ranked. */
static void search_phase(tsr_search *search, class_start *cs, tsr_strategy_fn strategy, bool op_seeds) {
    if (op_seeds) {
        cs->list.n = 0;
        for (int i = 0; i < cs->nseeds; ++i)
            if (seed_wanted(search, &cs->seeds[i]) && !tsr_search_seen(search, &cs->seeds[i]))
                cs->list.configs[cs->list.n++] = cs->seeds[i];
        search->predict = start_predict;
        search->predict_ctx = &cs->list;
        search->seed = "op seed";
        for (int i = 0; i < cs->list.n && tsr_search_budget_left(search); ++i) try_start(search, &cs->list.configs[i]);
        search->seed = NULL;
        search->predict = NULL;
        search->predict_ctx = NULL;
    }
    strategy(search);
    tsr_search_rank(search);
    tsr_search_final_duels(search, &cs->def, cs->def_score, current_entry(cs));
}

/* The default, the known entries, the op's seeds and the strategy, then the duel: leaves the
 * search ranked. */
static void search_class(tsr_search *search, class_start *cs, tsr_strategy_fn strategy, const cJSON *known_db,
                         const char *hash) {
    start_phase(search, cs, known_db, hash, true);
    search_phase(search, cs, strategy, false);
}

/* What the class's search keeps, into its result and its outcome. */
static void keep_outcome(const tsr_search *search, tsr_tune_result *res, tsr_class_outcome *o) {
    tsr_strlcpy(o->problem_class, search->problem_class, sizeof o->problem_class);
    tsr_strlcpy(o->problem, res->problem, sizeof o->problem);
    o->evaluations = res->evaluated;
    for (int i = 0; i < search->nseen && o->ntop < TUNE_KEEP; ++i)
        if (search->seen[i].validated && search->seen[i].score > 0) o->top[o->ntop++] = search->seen[i];
    if (o->ntop) {
        tsr_config_format(search->op, &o->top[0].config, res->best_config, sizeof res->best_config);
        res->best_gflops = o->top[0].gflops;
        res->best_spread = o->top[0].spread;
    }
}

/* ---- running classes ---- */

/* One class of one op in a tuning run: its search persists between the passes of `tune all`
 * (its fixture does not: each pass sets the problem up again). */
typedef struct class_job {
    const tsr_op *op;
    int op_index;              /* into the run's ops */
    const char *problem_class;
    tsr_device_runner runner;
    tsr_search search;
    tsr_tune_result *res;
    class_start start;
    double setup_s;            /* the last setup of its problem */
    int step;                  /* the problem it is measured on (tsr_op_class_shape_step); -1: not chosen yet */
    double own_run_s;          /* with a smaller problem: a run of its own predicted to take this long */
    tsr_space space;           /* the op's space for this class (tuning_space), unless the options name one */
    bool unreached;            /* tune all: the budget ran out before its first pass */
    double weight;             /* tune all: its share of the second pass */
    tsr_ahead_device scope;    /* its jobs' scope on the workers */
} class_job;

/* What a run shares across its classes. */
typedef struct tune_run {
    tsr_device *dev;
    tsr_tune_options opt;
    FILE *log;
    cJSON *known_db;
    uint64_t rng;
    int workers;
    /* Workers compile the candidates the searches will ask for next (ahead.c), kept for the whole
     * run; a pool that cannot start only means compiling in the tuner's thread, as always. */
    tsr_ahead *ahead;
    void *ahead_ctx; /* the process workers' context (tsr_ahead_process_fns), or NULL */
} tune_run;

/* ---- the problem a class is measured on ---- */

int tsr_tune_choose_step(const tsr_step_probe *probe, int nsteps, double limit_s, double *own_run_s) {
    *own_run_s = 0;
    if (nsteps <= 0) return probe->setup(probe->ctx, 0, &(double){0}) == TSR_SUCCESS ? 0 : -1;
    int s = nsteps;
    double work = 0, next_work = 0;
    if (probe->setup(probe->ctx, s, &work) != TSR_SUCCESS) return -1;
    double t = probe->time(probe->ctx, s);
    if (!(t > 0) || !(work > 0)) { /* nothing to predict from: the class's own problem */
        probe->drop(probe->ctx, s);
        return probe->setup(probe->ctx, 0, &work) == TSR_SUCCESS ? 0 : -1;
    }
    while (s > 0) {
        if (probe->setup(probe->ctx, s - 1, &next_work) != TSR_SUCCESS) {
            probe->drop(probe->ctx, s);
            return -1;
        }
        double predicted = t * next_work / work;
        if (s - 1 == 0) *own_run_s = predicted;
        if (!(predicted <= limit_s)) {
            probe->drop(probe->ctx, s - 1);
            break;
        }
        *own_run_s = 0;
        probe->drop(probe->ctx, s);
        --s;
        work = next_work;
        if (s == 0) break; /* the class's own problem: taken, nothing more to judge */
        double measured = probe->time(probe->ctx, s);
        t = measured > 0 ? measured : predicted;
    }
    return s;
}

/* The device's side of tsr_tune_choose_step: the class's problems in the job's runner, timed
 * through its backend (the default configuration; its first run builds it, as the search's will). */
typedef struct step_ctx {
    class_job *job;
    tsr_config def;
    void *fixtures[8];
    tsr_status status; /* of the last setup */
    int timed_step;    /* the last step the default ran on (-1: none) */
} step_ctx;

static tsr_status step_setup(void *vctx, int step, double *work) {
    step_ctx *c = vctx;
    const tsr_op *op = c->job->op;
    tsr_status st = tsr_op_tuning_setup_step(op, c->job->runner.device, c->job->problem_class, step, &c->fixtures[step]);
    *work = st == TSR_SUCCESS ? tsr_op_tuning_work(op, c->fixtures[step]) : 0;
    return c->status = st;
}

static double step_time(void *vctx, int step) {
    step_ctx *c = vctx;
    tsr_device_runner *runner = &c->job->runner;
    tsr_tune_backend backend = c->job->search.backend;
    runner->ctx = c->fixtures[step];
    double first = 0, seconds = 0;
    tsr_status st = backend.run(backend.ctx, &c->def, &first);
    tsr_ahead_idle(c->job->search.ahead); /* nothing timed beside a worker's compile (the last class's) */
    if (st == TSR_SUCCESS) st = backend.run(backend.ctx, &c->def, &seconds);
    /* the output is left for nobody to check: poison it again */
    double ignored;
    if (st == TSR_SUCCESS) st = backend.check(backend.ctx, &ignored);
    runner->ctx = NULL;
    if (st != TSR_SUCCESS) {
        tsr_clear_error();
        return 0;
    }
    c->timed_step = step;
    return seconds;
}

static void step_drop(void *vctx, int step) {
    step_ctx *c = vctx;
    tsr_op_tuning_free(c->job->op, c->fixtures[step]);
    c->fixtures[step] = NULL;
}

/* Set up the class's problem: the one chosen before, or (the first time) its own unless a run of
 * it would take more than 1/TUNE_RUN_SHARE of `share_s` (a slow device, or a small budget). */
static tsr_status setup_problem(tune_run *run, class_job *job, double share_s) {
    const tsr_op *op = job->op;
    if (job->step >= 0) return tsr_op_tuning_setup_step(op, run->dev, job->problem_class, job->step, &job->runner.ctx);
    int nsteps = tsr_op_class_shape_steps(op, job->problem_class);
    step_ctx c = {.job = job, .timed_step = -1};
    tsr_op_default_config(op, run->dev, job->problem_class, &c.def);
    if (nsteps > 7) nsteps = 7;
    if (!isfinite(share_s) || !op->config_ok(run->dev, NULL, &c.def)) nsteps = 0;
    const tsr_step_probe probe = {.setup = step_setup, .time = step_time, .drop = step_drop, .ctx = &c};
    int step = tsr_tune_choose_step(&probe, nsteps, share_s / TUNE_RUN_SHARE, &job->own_run_s);
    if (step < 0) return c.status;
    job->step = step;
    job->runner.ctx = c.fixtures[step];
    job->scope.step = step;
    /* the default just ran there: its evaluation, next, needs no untimed first run (on llvmpipe one
     * run of GEMM `large`'s smallest problem took 5 s under load) */
    job->search.warmed_valid = step > 0 && c.timed_step == step;
    job->search.warmed = c.def;
    if (step > 0) {
        tsr_strlcpy(job->res->reduced_from, tsr_op_class_shape(op, job->problem_class), sizeof job->res->reduced_from);
        if (run->log)
            fprintf(run->log, "{\"op\": \"%s\", \"class\": \"%s\", \"outcome\": \"smaller problem\", \"problem\": "
                    "\"%s\", \"own_problem\": \"%s\", \"own_run_s\": %.3f, \"run_limit_s\": %.3f}\n",
                    op->name, job->problem_class, tsr_op_class_shape_step(op, job->problem_class, step),
                    job->res->reduced_from, job->own_run_s, share_s / TUNE_RUN_SHARE);
    }
    return TSR_SUCCESS;
}

/* Set the class's problem up, and the device for a search (cache stores paused). `share_s`: the
 * class's share of the budget, by which its problem is chosen the first time. */
static tsr_status class_begin(tune_run *run, class_job *job, double budget_s, double remaining_after_s,
                              double share_s) {
    tsr_device *dev = run->dev;
    tsr_search *search = &job->search;
    /* the class's time (its budget, its seconds) counts from here: setting the problem up included */
    search->class_start = search->backend.now(search->backend.ctx);
    pause_cache_store(dev, true);
    tsr_status st = setup_problem(run, job, share_s);
    if (st != TSR_SUCCESS) {
        pause_cache_store(dev, false);
        return st;
    }
    job->setup_s = search->backend.now(search->backend.ctx) - search->class_start;
    search->flops = tsr_op_tuning_work(job->op, job->runner.ctx);
    search->tolerance = tsr_op_tuning_tolerance(job->op, job->runner.ctx, TUNE_TOLERANCE);
    tsr_op_tuning_describe(job->op, job->runner.ctx, job->res->problem, sizeof job->res->problem);
    search->output_dirty = false; /* a fresh problem: its output is poisoned */
    search->prepared_hits = 0;    /* counted per pass, as the workers' jobs are */
    search->evaluated_at_start = job->res->evaluated;
    search->class_budget_s = budget_s;
    search->remaining_after_s = remaining_after_s;
    /* Candidates' programs stay in memory: storing each in the disk cache would cost more than
     * building it (PoCL compiles every kernel again for the binary), for programs mostly never
     * used again. The configuration chosen is built and stored by the first launch that uses it.
     * (Paused above, before the problem's choice runs the default.) */
    return TSR_SUCCESS;
}

/* ---- the class's second problem ---- */

/* The pick keeps its place against what the device ran before only if its gains on both problems
 * together (the product of the two ratios: both layers weigh the same) exceed 1 and, on the class's
 * second problem, it runs at least this share of that one's rate (no layer of the class 1.25x slower
 * for another's gain). A 0.95 floor put back the 1x1-strided-mid pick on the Zen 4 (session 36),
 * im2col, which ran its 8x512x28x28/2 fixture 1.9x faster and 4x512x28x28/2 at 0.85x; every other
 * pick put back that day had a product under 1. */
#define TUNE_SECOND_FLOOR 0.8

/* The configuration the device ran before the tune: the entry lookups resolve to, else the default. */
static const tsr_config *ran_before(const class_start *cs) {
    const tsr_config *entry = current_entry(cs);
    return entry ? entry : cs->def_ok ? &cs->def : NULL;
}

/* Where the final duels left a pick that beat what the device ran before on the class's problem,
 * and the class has a second problem (tsr_op_class_check_shape: another plane or batch), both run
 * there (each validated against the reference, then a duel): a class serves many layers and is
 * searched on one. What ran before goes back first when the pick is wrong there, or slower than
 * TUNE_SECOND_FLOOR of it, or does not gain over both problems together. Skipped on a smaller
 * problem (a slow device) and where the duel would cost more than the class's duel allowance. */
static void check_second_problem(tune_run *run, class_job *job) {
    tsr_search *search = &job->search;
    tsr_evaluated *seen = search->seen;
    const tsr_op *op = job->op;
    const tsr_config *before = ran_before(&job->start);
    if (job->step != 0 || !before || search->nseen < 2 || !seen[0].validated || !(search->before_gflops > 0) ||
        !tsr_op_class_check_shape(op, job->problem_class))
        return;
    int idx = -1;
    for (int i = 1; i < search->nseen && idx < 0; ++i)
        if (memcmp(&seen[i].config, before, sizeof *before) == 0) idx = i;
    if (idx < 0 || !seen[idx].validated) return; /* (what could not be validated is no place to go back to) */
    void *fx = NULL;
    if (tsr_op_tuning_setup_check(op, run->dev, job->problem_class, &fx) != TSR_SUCCESS) {
        if (run->log) { /* the message quoted as JSON */
            cJSON *message = cJSON_CreateString(tsr_last_error());
            char *quoted = message ? cJSON_PrintUnformatted(message) : NULL;
            fprintf(run->log, "{\"op\": \"%s\", \"class\": \"%s\", \"outcome\": \"second problem\", \"error\": %s}\n",
                    op->name, job->problem_class, quoted ? quoted : "null");
            cJSON_free(quoted);
            cJSON_Delete(message);
        }
        tsr_clear_error();
        return;
    }
    double work = tsr_op_tuning_work(op, fx);
    /* What the check costs, against the class's duel allowance: the duel and the two validating runs
     * (the best's time on the class's problem scaled by the work) and the host's double-precision
     * reference at its first check (fixtures compute it there; at ~1 GFLOP/s on a host core: conv2d's
     * batch-8 second problems took 0.5-2 s on the Zen 4). */
    double run_s = search->flops > 0 ? search->best_time * work / search->flops : 0;
    double cost_s = (3.0 * 2 * TUNE_MIN_RUNS + 2) * run_s + work * 1e-9;
    if (!(work > 0) || cost_s > duel_allowance(search)) {
        tsr_op_tuning_free(op, fx);
        return;
    }
    char problem[64];
    tsr_op_tuning_describe(op, fx, problem, sizeof problem);
    /* the search, on the second problem for a moment */
    void *fixture = job->runner.ctx;
    tsr_timer timer = job->runner.timer;
    const double flops = search->flops, tolerance = search->tolerance;
    const bool dirty = search->output_dirty, single = search->output_single;
    const tsr_config writer = search->output_writer;
    job->runner.ctx = fx;
    job->runner.timer = (tsr_timer){0};
    search->flops = work;
    search->tolerance = tsr_op_tuning_tolerance(op, fx, TUNE_TOLERANCE);
    search->output_dirty = false; /* a fresh problem: its output is poisoned */
    const tsr_config pick = seen[0].config;
    bool pick_ok = tsr_search_validate(search, &pick), before_ok = tsr_search_validate(search, before);
    double dg[2] = {0, 0}, dq[2] = {0, 0};
    if (pick_ok && before_ok) tsr_search_duel(search, &pick, before, dg, dq);
    job->runner.ctx = fixture;
    job->runner.timer = timer;
    search->flops = flops;
    search->tolerance = tolerance;
    search->output_dirty = dirty;
    search->output_single = single;
    search->output_writer = writer;
    tsr_op_tuning_free(op, fx);

    const double first_gain = seen[0].gflops / search->before_gflops;
    const double gain = dg[0] > 0 && dg[1] > 0 ? dg[0] / dg[1] : 0;
    /* A pick wrong there goes back whatever the other did (both wrong: the problem or its reference is
     * suspect, and the device keeps what it ran); a duel that timed nothing (gain 0) leaves the pick. */
    bool keep_before = !pick_ok || (gain > 0 && (gain < TUNE_SECOND_FLOOR || first_gain * gain <= 1.0));
    tsr_tune_result *res = job->res;
    tsr_strlcpy(res->second_problem, problem, sizeof res->second_problem);
    res->second_gain = gain;
    res->second_wrong = !pick_ok;
    res->kept_before = keep_before;
    if (keep_before) {
        move_first(seen, idx);
        seen[0].gflops = search->before_gflops;
        seen[0].score = search->before_score;
    }
    if (run->log) {
        char desc[2][256];
        tsr_config_format(op, &pick, desc[0], sizeof desc[0]);
        tsr_config_format(op, before, desc[1], sizeof desc[1]);
        fprintf(run->log, "{\"op\": \"%s\", \"class\": \"%s\", \"outcome\": \"second problem\", \"problem\": \"%s\", "
                "\"config\": \"%s\", \"before\": \"%s\", \"valid\": [%s, %s], \"gflops\": [%.3f, %.3f], "
                "\"first_gain\": %.3f, \"gain\": %.3f, \"kept\": \"%s\"}\n",
                op->name, job->problem_class, problem, desc[0], desc[1], pick_ok ? "true" : "false",
                before_ok ? "true" : "false", dg[0], dg[1], first_gain, gain, keep_before ? "before" : "pick");
        fflush(run->log);
    }
}

/* End the class's jobs on the workers, resume cache stores, free the problem. */
static void class_end(tune_run *run, class_job *job) {
    tsr_search *search = &job->search;
    tsr_ahead_stats stats;
    tsr_ahead_end_scope(run->ahead, &stats);
    if (run->log && stats.submitted)
        fprintf(run->log, "{\"op\": \"%s\", \"class\": \"%s\", \"outcome\": \"ahead\", \"workers\": %d, "
                "\"submitted\": %d, \"compiled\": %d, \"failed\": %d, \"dropped\": %d, \"used\": %d, "
                "\"in\": \"%s\"}\n",
                job->op->name, job->problem_class, run->workers, stats.submitted, stats.jobs_run, stats.jobs_failed,
                stats.dropped, search->prepared_hits, run->ahead_ctx ? "processes" : "threads");
    pause_cache_store(run->dev, false);
    job->res->seconds += search->backend.now(search->backend.ctx) - search->class_start;
    tsr_op_tuning_free(job->op, job->runner.ctx);
    job->runner.ctx = NULL;
}

static void job_init(tune_run *run, class_job *job, const tsr_op *op, int op_index, const tsr_space *space,
                     const char *problem_class, tsr_tune_result *res) {
    memset(job, 0, sizeof *job);
    job->op = op;
    job->op_index = op_index;
    job->problem_class = problem_class;
    job->runner = (tsr_device_runner){.device = run->dev, .op = op};
    job->res = res;
    memset(res, 0, sizeof *res);
    tsr_strlcpy(res->op, op->name, sizeof res->op);
    tsr_strlcpy(res->problem_class, problem_class, sizeof res->problem_class);
    tsr_strlcpy(res->unit, op->rate_unit ? op->rate_unit : "GFLOP/s", sizeof res->unit);
    job->scope = (tsr_ahead_device){.op = op, .problem_class = problem_class};
    job->step = -1;
    /* the part of the space the op deems worth it for this class, where the options name none */
    const char *text = !run->opt.space && op->tuning_space ? op->tuning_space(run->dev, problem_class) : NULL;
    if (text) {
        if (tsr_space_make(op, text, &job->space) == TSR_SUCCESS) space = &job->space;
        else tsr_clear_error(); /* (the op's own text: test_tuner class_spaces parses every class's) */
    }
    if (run->log && space) { /* the class's space, as the search sees it (before legality) */
        double points = 1;
        for (int i = 0; i < space->nparams; ++i) points *= space->nvalues[i];
        fprintf(run->log, "{\"op\": \"%s\", \"class\": \"%s\", \"outcome\": \"space\", \"points\": %.0f, "
                "\"class_space\": %s}\n", op->name, problem_class, points, space == &job->space ? "true" : "false");
    }
    job->search = (tsr_search){.op = op, .device = run->dev, .space = space,
                               .backend = tsr_device_backend(&job->runner), .rng = &run->rng,
                               .max_evaluations = run->opt.budget_evaluations, .log = run->log,
                               .problem_class = problem_class, .options = &run->opt, .result = res,
                               .ahead = run->ahead, .ahead_scope = &job->scope};
}

static tsr_status run_open(tune_run *run, tsr_device *dev, const tsr_tune_options *opt) {
    memset(run, 0, sizeof *run);
    run->dev = dev;
    run->opt = *opt;
    run->rng = opt->seed ? opt->seed : (uint64_t)time(NULL) * 2654435761u + 1;
    tsr_status st = tsr_ahead_default_workers(dev, &run->workers);
    if (st != TSR_SUCCESS) return st;
    if (opt->log_path) {
        st = tsr_open_append(opt->log_path, &run->log);
        if (st != TSR_SUCCESS) return st;
    }
    tsr_ahead_fns fns;
    if (!run->workers || !tsr_ahead_process_fns(dev, &fns, &run->ahead_ctx)) fns = tsr_ahead_device_fns(dev);
    if (tsr_ahead_start(&fns, run->workers, &run->ahead) != TSR_SUCCESS) tsr_clear_error();
    run->known_db = load_known_entries(opt);
    return TSR_SUCCESS;
}

static void run_close(tune_run *run) {
    tsr_ahead_stop(run->ahead, NULL);
    run->ahead = NULL;
    free(run->ahead_ctx);
    run->ahead_ctx = NULL;
    cJSON_Delete(run->known_db);
    if (run->log) fclose(run->log);
}

/* The op's space: what the options name, else the part the op deems worth it on this device. */
static tsr_status op_space(tsr_device *dev, const tsr_op *op, const char *restrict_to, tsr_space *space) {
    if (!restrict_to) restrict_to = op->tuning_space ? op->tuning_space(dev, NULL) : NULL;
    else if (strcmp(restrict_to, "all") == 0) restrict_to = NULL;
    return tsr_space_make(op, restrict_to, space);
}

tsr_status tsr_tune_op(tsr_device *dev, const tsr_op *op, const tsr_tune_options *options, tsr_tune_result *results,
                       size_t max_results, size_t *nresults) {
    tsr_tune_options opt;
    tsr_status st = check_options(op, options, &opt);
    if (st != TSR_SUCCESS) return st;
    tsr_space space;
    TSR_CHECK(st, op_space(dev, op, opt.space, &space), done);
    const char *classes[TUNE_MAX_CLASSES];
    int nclasses = 0;
    TSR_CHECK(st, parse_classes(op, opt.classes, classes, &nclasses), done);
    char hash[17];
    TSR_CHECK(st, tsr_op_source_hash_in(dev->kernel_dir, op, hash), done);
    char path[TSR_PATH_MAX];
    if (!opt.dry_run) TSR_CHECK(st, database_path(&opt, path, sizeof path), done);
    tsr_class_outcome *outcomes = calloc((size_t)nclasses, sizeof *outcomes);
    class_job *job = calloc(1, sizeof *job);
    tune_run run;
    if (!outcomes || !job) {
        free(outcomes);
        free(job);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    }
    st = run_open(&run, dev, &opt);
    if (st != TSR_SUCCESS) {
        free(outcomes);
        free(job);
        return st;
    }
    double per_class = opt.budget_seconds / nclasses;
    size_t produced = 0;
    for (int c = 0; c < nclasses && st == TSR_SUCCESS; ++c) {
        tsr_tune_result local;
        job_init(&run, job, op, 0, &space, classes[c], (results && (size_t)c < max_results) ? &results[c] : &local);
        st = class_begin(&run, job, per_class, per_class * (nclasses - c - 1), per_class);
        if (st != TSR_SUCCESS) break;
        search_class(&job->search, &job->start, strategies[opt.strategy].run, run.known_db, hash);
        check_second_problem(&run, job);
        class_end(&run, job);
        keep_outcome(&job->search, job->res, &outcomes[c]);
        tsr_search_free(&job->search);
        ++produced;
    }
    if (st == TSR_SUCCESS && !opt.dry_run)
        st = tsr_tuner_save(path, dev, op, strategies[opt.strategy].name, hash, outcomes, (int)produced);
    run_close(&run);
    free(outcomes);
    free(job);
    if (nresults) *nresults = produced < max_results ? produced : max_results;
done:
    return st;
}

/* ---- every op at once ---- */

#define TUNE_ALL_BUDGET 150 /* seconds, for every op's classes together, when no budget is given */
#define TUNE_ALL_MAX_OPS 16

static int by_weight_desc(const void *a, const void *b) {
    const class_job *p = *(class_job *const *)a, *q = *(class_job *const *)b;
    return (p->weight < q->weight) - (p->weight > q->weight);
}

/* Every op's classes in one budget. A first pass measures each class's default and the entries
 * known for it (the built-in ones included) and so learns how far the default is from the best
 * known; the second pass gives the rest of the budget to the classes in proportion to that gap
 * (plus a little for every class: a search finds what no entry knows yet), largest first, each
 * search going on from where its first pass left it (the op's seeds, the strategy, the duel). */
static tsr_status tune_all(tsr_device *dev, const tsr_tune_options *options, tsr_tune_result *results,
                           size_t max_results, size_t *nresults) {
    tsr_tune_options opt = *options;
    if (opt.classes)
        return tsr_fail(TSR_ERR_INVALID_ARG, "classes: name an op to tune some of its classes (every op: all of them)");
    if (opt.space && strcmp(opt.space, "all") != 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "space: name an op to restrict its space (every op: \"all\" or none)");
    const tsr_op *ops[TUNE_ALL_MAX_OPS];
    int nops = 0;
    for (const tsr_op *const *o = tsr_ops; *o && nops < TUNE_ALL_MAX_OPS; ++o)
        if ((*o)->fixture.setup && (*o)->class_shapes) ops[nops++] = *o;
    tsr_tune_options op_opt[TUNE_ALL_MAX_OPS];
    tsr_space *spaces = calloc((size_t)nops, sizeof *spaces);
    char (*hashes)[17] = calloc((size_t)nops, sizeof *hashes);
    class_job *jobs = calloc((size_t)nops * TUNE_MAX_CLASSES, sizeof *jobs);
    class_job **order = calloc((size_t)nops * TUNE_MAX_CLASSES, sizeof *order);
    tsr_class_outcome *outcomes = calloc((size_t)nops * TUNE_MAX_CLASSES, sizeof *outcomes);
    tsr_tune_result *own = calloc((size_t)nops * TUNE_MAX_CLASSES, sizeof *own);
    int first_class[TUNE_ALL_MAX_OPS + 1] = {0};
    tsr_status st = TSR_SUCCESS;
    tune_run run;
    bool run_opened = false;
    int njobs = 0;
    if (!spaces || !hashes || !jobs || !order || !outcomes || !own) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    char path[TSR_PATH_MAX];
    if (!opt.dry_run) TSR_CHECK(st, database_path(&opt, path, sizeof path), done);
    const double budget = opt.budget_seconds > 0 ? opt.budget_seconds : TUNE_ALL_BUDGET;
    for (int o = 0; o < nops; ++o) {
        TSR_CHECK(st, check_options(ops[o], &opt, &op_opt[o]), done);
        TSR_CHECK(st, op_space(dev, ops[o], opt.space, &spaces[o]), done);
        TSR_CHECK(st, tsr_op_source_hash_in(dev->kernel_dir, ops[o], hashes[o]), done);
    }
    TSR_CHECK(st, run_open(&run, dev, &opt), done);
    run_opened = true;
    const double began = tsr_now_s();
    for (int o = 0; o < nops; ++o) {
        const char *classes[TUNE_MAX_CLASSES];
        int n = 0;
        TSR_CHECK(st, parse_classes(ops[o], NULL, classes, &n), done);
        first_class[o] = njobs;
        for (int c = 0; c < n; ++c, ++njobs) job_init(&run, &jobs[njobs], ops[o], o, &spaces[o], classes[c], &own[njobs]);
    }
    first_class[nops] = njobs;
    /* Pass 1: each class's default and known entries, while the budget lasts: on a slow device
     * (llvmpipe compiles a class's default for tens of seconds) the classes not reached keep the
     * entries the device has, untouched, and say so in their results. */
    for (int j = 0; j < njobs && st == TSR_SUCCESS; ++j) {
        class_job *job = &jobs[j];
        if (j > 0 && tsr_now_s() - began >= budget) {
            job->unreached = true;
            continue;
        }
        st = class_begin(&run, job, budget / njobs, 0, budget / njobs); /* bounds the timing of slow runs (slow devices) */
        if (st != TSR_SUCCESS) break;
        start_phase(&job->search, &job->start, run.known_db, hashes[job->op_index], false);
        class_end(&run, job);
        const tsr_evaluated *best = tsr_search_best(&job->search);
        double gain = best && job->start.def_score > 0 ? best->score / job->start.def_score : 2.0;
        job->weight = fmax(gain - 1.0, 0.0) + 0.05;
    }
    /* Pass 2: what is left, by weight, after a reserve for each class's setup and duel. */
    double weights = 0, reserve = 0;
    int nreached = 0;
    for (int j = 0; j < njobs; ++j) {
        if (jobs[j].unreached) continue;
        weights += jobs[j].weight;
        reserve += jobs[j].setup_s + 1.0;
        order[nreached++] = &jobs[j];
    }
    qsort(order, (size_t)nreached, sizeof *order, by_weight_desc);
    for (int j = 0; j < nreached && st == TSR_SUCCESS; ++j) {
        class_job *job = order[j];
        double left = budget - (tsr_now_s() - began) - reserve;
        double share = left > 0 ? left * job->weight / weights : 0;
        weights -= job->weight;
        reserve -= job->setup_s + 1.0;
        double after = left > share ? left - share : 0;
        job->search.options = &op_opt[job->op_index];
        /* a class's duels may cost what an even share of the budget would be, whatever its share */
        job->search.duel_budget_s = budget / njobs;
        /* (its setup counts in its time; a class with no share gets no time past its setup, or a
         * second setup faster than the first would leave time for a candidate: on llvmpipe one
         * GEMM `large` candidate took 205 s of a 60 s budget that way) */
        st = class_begin(&run, job, share > 0 ? share + job->setup_s : 0, after, 0);
        if (st != TSR_SUCCESS) break;
        search_phase(&job->search, &job->start, strategies[op_opt[job->op_index].strategy].run, true);
        check_second_problem(&run, job);
        class_end(&run, job);
        keep_outcome(&job->search, job->res, &outcomes[job - jobs]);
    }
    if (st == TSR_SUCCESS && !opt.dry_run)
        for (int o = 0; o < nops && st == TSR_SUCCESS; ++o)
            st = tsr_tuner_save(path, dev, ops[o], strategies[op_opt[o].strategy].name, hashes[o],
                                &outcomes[first_class[o]], first_class[o + 1] - first_class[o]);
    if (st == TSR_SUCCESS) {
        size_t n = 0;
        for (int j = 0; j < njobs && results && n < max_results; ++j) results[n++] = own[j];
        if (nresults) *nresults = n;
    }
done:
    if (run_opened) run_close(&run);
    for (int j = 0; j < njobs; ++j) {
        if (jobs[j].runner.ctx) tsr_op_tuning_free(jobs[j].op, jobs[j].runner.ctx);
        tsr_search_free(&jobs[j].search);
    }
    free(spaces);
    free(hashes);
    free(jobs);
    free(order);
    free(outcomes);
    free(own);
    return st;
}

tsr_status tsr_tune(tsr_device *dev, const char *op_name, const tsr_tune_options *options, tsr_tune_result *results,
                    size_t max_results, size_t *nresults) {
    tsr_clear_diagnostics();
    if (nresults) *nresults = 0;
    if (!dev || !op_name || !options) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_tune: device, op and options must be set");
    if (strcmp(op_name, "all") == 0) return tune_all(dev, options, results, max_results, nresults);
    const tsr_op *op = tsr_find_op(op_name);
    if (!op) return tsr_fail(TSR_ERR_NOT_FOUND, "no op named '%s'", op_name);
    return tsr_tune_op(dev, op, options, results, max_results, nresults);
}
