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

#define TUNE_MAX_CLASSES 16

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
        for (int i = 0; op->classes[i] && *nclasses < TUNE_MAX_CLASSES; ++i)
            classes[(*nclasses)++] = tsr_op_class_list(op)[i]; /* the listed ones lead the list */
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
        if (*nclasses == TUNE_MAX_CLASSES) return tsr_fail(TSR_ERR_INVALID_ARG, "classes: more than 16");
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
    /* A duel takes 3 rounds of at least TUNE_MIN_RUNS runs of each side. Where that is more than
     * the class's whole budget (a slow device, where a run takes seconds), no duel: the default
     * stays first unless the best was validated and beat it, by lower quartile, by over 10%. */
    double duel_s = 3.0 * 2 * TUNE_MIN_RUNS * (search->best_time > 0 ? search->best_time : 0);
    if (def_idx > 0 && duel_s > search->class_budget_s) {
        search->result->default_gflops = seen[def_idx].gflops;
        if (seen[def_idx].validated && seen[0].score < 1.1 * seen[def_idx].score) {
            tsr_evaluated d = seen[def_idx];
            memmove(&seen[1], &seen[0], (size_t)def_idx * sizeof d);
            seen[0] = d;
        }
        return;
    }
    if (def_idx != 0) tsr_search_duel(search, &seen[0].config, def, dg, dq);
    else search->result->default_gflops = seen[0].gflops; /* the default is the best: nothing to compare */
    /* The duel alternates runs, so both medians see the same machine: decide on them. */
    if (dg[1] >= dg[0] && def_idx > 0) { /* the default is really the best: move it first */
        tsr_evaluated d = seen[def_idx];
        memmove(&seen[1], &seen[0], (size_t)def_idx * sizeof d);
        seen[0] = d;
    }
    if (dq[0] > 0 && dq[1] > 0) {
        bool default_won = dg[1] >= dg[0] || def_idx == 0;
        seen[0].gflops = default_won ? dg[1] : dg[0];
        seen[0].score = default_won ? dq[1] : dq[0];
        search->result->default_gflops = dg[1];
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

/* The default, the known entries, the op's seeds and the strategy, then the duel: leaves the
 * search ranked. */
static void search_class(tsr_search *search, tsr_strategy_fn strategy, const cJSON *known_db, const char *hash) {
    const tsr_op *op = search->op;
    /* The built-in default first: the yardstick, and a start for the guided search. Then the
     * entries for this device's class (or the classes it falls back to): the current ones (a
     * re-tune never starts worse than what is there), then stale ones, tuned for an older kernel
     * source: a small edit seldom moves the best far. Starts only; lookups never launch a stale
     * entry. They count against the evaluation budget like any candidate. Then the op's seeds.
     * The whole list is known now: the workers compile the next ones while one is measured. */
    tsr_config def;
    tsr_op_default_config(op, search->device, search->problem_class, &def);
    bool def_ok = op->config_ok(search->device, NULL, &def);
    tsr_tuning_seed known[8];
    int nknown = tsr_tuning_seeds(search->device, op, known_db, search->problem_class, hash, known, 8);
    tsr_config seeds[8];
    int nseeds = tsr_op_seeds(op, search->device, search->problem_class, seeds, 8);
    start_list starts = {.n = 0};
    if (def_ok) starts.configs[starts.n++] = def;
    for (int i = 0; i < nknown; ++i) starts.configs[starts.n++] = known[i].config;
    for (int i = 0; i < nseeds; ++i)
        if (op->config_ok(search->device, NULL, &seeds[i])) starts.configs[starts.n++] = seeds[i];
    search->predict = start_predict;
    search->predict_ctx = &starts;
    double def_score = 0;
    search->seed = "default";
    if (def_ok) def_score = tsr_search_evaluate(search, &def);
    else tsr_search_report(search);
    search->result->default_gflops = def_score;
    search->start = def; /* where annealing starts: the best of the default and the seeds */
    search->start_score = def_score;
    for (int i = 0; i < nknown && tsr_search_budget_left(search); ++i) {
        search->seed = known[i].stale ? "stale entry" : "current entry";
        try_start(search, &known[i].config);
        search->result->stale_seeds += known[i].stale;
    }
    search->seed = "op seed";
    for (int i = 0; i < nseeds && tsr_search_budget_left(search); ++i)
        if (op->config_ok(search->device, NULL, &seeds[i])) try_start(search, &seeds[i]);
    search->seed = NULL;
    search->predict = NULL;
    search->predict_ctx = NULL;
    strategy(search);
    tsr_search_rank(search);
    duel_with_default(search, &def, def_score);
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

tsr_status tsr_tune_op(tsr_device *dev, const tsr_op *op, const tsr_tune_options *options, tsr_tune_result *results,
                       size_t max_results, size_t *nresults) {
    tsr_tune_options opt;
    tsr_status st = check_options(op, options, &opt);
    if (st != TSR_SUCCESS) return st;
    /* By default only the part of the space the op deems worth it on this device; "all": everything. */
    const char *restrict_to = opt.space;
    if (!restrict_to) restrict_to = op->tuning_space ? op->tuning_space(dev) : NULL;
    else if (strcmp(restrict_to, "all") == 0) restrict_to = NULL;
    tsr_space space;
    TSR_CHECK(st, tsr_space_make(op, restrict_to, &space), done);
    const char *classes[TUNE_MAX_CLASSES];
    int nclasses = 0;
    TSR_CHECK(st, parse_classes(op, opt.classes, classes, &nclasses), done);
    char hash[17];
    TSR_CHECK(st, tsr_op_source_hash_in(dev->kernel_dir, op, hash), done);
    char path[TSR_PATH_MAX];
    if (!opt.dry_run) TSR_CHECK(st, database_path(&opt, path, sizeof path), done);
    uint64_t rng = opt.seed ? opt.seed : (uint64_t)time(NULL) * 2654435761u + 1;
    tsr_class_outcome *outcomes = calloc((size_t)nclasses, sizeof *outcomes);
    if (!outcomes) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    double per_class = opt.budget_seconds / nclasses;
    FILE *log = NULL;
    if (opt.log_path) st = tsr_open_append(opt.log_path, &log);
    if (st != TSR_SUCCESS) {
        free(outcomes);
        return st;
    }
    cJSON *known_db = load_known_entries(&opt);
    size_t produced = 0;
    const int workers = tsr_ahead_default_workers();
    for (int c = 0; c < nclasses && st == TSR_SUCCESS; ++c) {
        tsr_device_runner runner = {.device = dev, .op = op};
        tsr_search search = {.op = op, .device = dev, .space = &space, .backend = tsr_device_backend(&runner),
                             .rng = &rng, .class_budget_s = per_class, .max_evaluations = opt.budget_evaluations,
                             .log = log, .problem_class = classes[c], .options = &opt,
                             .remaining_after_s = per_class * (nclasses - c - 1)};
        search.class_start = search.backend.now(search.backend.ctx);
        tsr_tune_result local;
        tsr_tune_result *res = (results && (size_t)c < max_results) ? &results[c] : &local;
        memset(res, 0, sizeof *res);
        tsr_strlcpy(res->op, op->name, sizeof res->op);
        tsr_strlcpy(res->problem_class, classes[c], sizeof res->problem_class);
        tsr_strlcpy(res->unit, op->rate_unit ? op->rate_unit : "GFLOP/s", sizeof res->unit);
        search.result = res;
        st = tsr_op_tuning_setup(op, dev, classes[c], &runner.ctx);
        if (st != TSR_SUCCESS) break;
        search.flops = tsr_op_tuning_work(op, runner.ctx);
        search.tolerance = tsr_op_tuning_tolerance(op, runner.ctx, TUNE_TOLERANCE);
        tsr_op_tuning_describe(op, runner.ctx, res->problem, sizeof res->problem);
        /* Candidates' programs stay in memory: storing each in the disk cache would cost more than
         * building it (PoCL compiles every kernel again for the binary), for programs mostly never
         * used again. The configuration chosen is built and stored by the first launch that uses it. */
        pause_cache_store(dev, true);
        /* Workers compile the candidates the search will ask for next (ahead.c); a pool that
         * cannot start only means compiling in this thread, as always. */
        tsr_ahead_device ahead_device = {.device = dev, .op = op, .problem_class = classes[c]};
        tsr_ahead_fns fns = tsr_ahead_device_fns(&ahead_device);
        if (tsr_ahead_start(&fns, workers, &search.ahead) != TSR_SUCCESS) tsr_clear_error();
        search_class(&search, strategies[opt.strategy].run, known_db, hash);
        tsr_ahead_stats ahead_stats = {0};
        tsr_ahead_stop(search.ahead, &ahead_stats);
        search.ahead = NULL;
        if (log && ahead_stats.submitted)
            fprintf(log, "{\"op\": \"%s\", \"class\": \"%s\", \"outcome\": \"ahead\", \"workers\": %d, "
                    "\"submitted\": %d, \"compiled\": %d, \"failed\": %d, \"dropped\": %d, \"used\": %d}\n",
                    op->name, classes[c], workers, ahead_stats.submitted, ahead_stats.jobs_run,
                    ahead_stats.jobs_failed, ahead_stats.dropped, search.prepared_hits);
        pause_cache_store(dev, false);
        keep_outcome(&search, res, &outcomes[c]);
        res->seconds = search.backend.now(search.backend.ctx) - search.class_start;
        tsr_op_tuning_free(op, runner.ctx);
        tsr_search_free(&search);
        ++produced;
    }
    if (st == TSR_SUCCESS && !opt.dry_run)
        st = tsr_tuner_save(path, dev, op, strategies[opt.strategy].name, hash, outcomes, (int)produced);
    cJSON_Delete(known_db);
    free(outcomes);
    if (log) fclose(log);
    if (nresults) *nresults = produced < max_results ? produced : max_results;
done:
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
