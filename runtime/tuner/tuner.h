/* Private to runtime/tuner/: the parameter space (space.c), the search object every strategy
 * works through (search.c), the evaluation of candidates (evaluate.c), the strategies (one
 * file each, one signature), persistence (persist.c) and the driver (tune.c). */
#ifndef TSR_TUNER_H
#define TSR_TUNER_H

#include "internal.h"

#include <stdint.h>
#include <stdio.h>

/* How long a candidate is timed (evaluate.c): after its first run (which builds the program),
 * timed runs until it is clearly slower than the incumbent (the best validated candidate), or,
 * after TUNE_MIN_RUNS, until its lower quartile is known within TUNE_PRECISION, TUNE_MAX_SECONDS
 * of device time have been spent or TUNE_MAX_RUNS were made. */
#define TUNE_MIN_RUNS 5
#define TUNE_MAX_RUNS 60
#define TUNE_MAX_SECONDS 0.3
#define TUNE_PRECISION 0.02    /* half the width of the lower quartile's confidence interval, relative */
#define TUNE_FIRST_RUN_FACTOR 2 /* one timed run this much slower than the incumbent ends a candidate */
#define TUNE_STOP_MARGIN 0.10  /* later: the lower bound of its lower quartile this much above the incumbent's upper bound */
#define TUNE_VALIDATE_MARGIN 0.10 /* candidates within this of the incumbent (or faster) are validated */
#define TUNE_TOLERANCE 1e-4    /* relative error above which a result is wrong */
#define TUNE_KEEP 4            /* best + runners-up stored per class */
#define TUNE_MAX_VALUES 32     /* values per parameter a space keeps */

/* ---- the search space: allowed values per parameter (space.c) ---- */

typedef struct tsr_space {
    int nparams;
    int nvalues[TSR_MAX_PARAMS];
    int values[TSR_MAX_PARAMS][TUNE_MAX_VALUES];
} tsr_space;

/* A configuration as value indices into the space. */
typedef struct tsr_point {
    int idx[TSR_MAX_PARAMS];
} tsr_point;

/* The op's space, narrowed by "NAME=v1,v2 NAME=v3" (`restrict_to` may be NULL: all of it). */
tsr_status tsr_space_make(const tsr_op *op, const char *restrict_to, tsr_space *space);
void tsr_space_config(const tsr_space *space, const tsr_point *point, tsr_config *config);
/* The point of a configuration; false when a value is outside the (restricted) space (that
 * parameter then gets index 0, so the point is always inside the space). */
bool tsr_space_point(const tsr_space *space, const tsr_config *config, tsr_point *point);
/* The next point in row-major order (last parameter fastest); false after the last. */
bool tsr_space_next(const tsr_space *space, tsr_point *point);
/* The normalized configuration of a point, and whether the op accepts it on this device for
 * any problem (`device` may be NULL for ops whose config_ok does not look at it). */
bool tsr_space_legal(const tsr_op *op, const tsr_device *device, const tsr_space *space, const tsr_point *point,
                     tsr_config *config);

/* ---- random numbers: xorshift64*, one state per tuning run (search.c) ---- */

uint64_t tsr_rng_next(uint64_t *state);
double tsr_rng_unit(uint64_t *state); /* uniform in [0, 1) */

/* ---- where timings come from ---- */

/* The device in tsr_tune_op; a table of recorded timings in tests/test_strategies.c. */
typedef struct tsr_tune_backend {
    /* One run of `config`: its time in seconds (the first run also builds the program). */
    tsr_status (*run)(void *ctx, const tsr_config *config, double *seconds);
    /* Relative error of the last run's output against the reference. */
    tsr_status (*check)(void *ctx, double *rel_err);
    /* Seconds on a clock that never goes back: time budgets and progress. */
    double (*now)(void *ctx);
    void *ctx;
} tsr_tune_backend;

/* The device backend's state: the op's tuning run and check (tsr_op_tuning_*) on one class's problem. */
typedef struct tsr_device_runner {
    tsr_device *device;
    const tsr_op *op;
    void *ctx;             /* from tsr_op_tuning_setup */
    tsr_timer timer;       /* zero-initialised: times runs by the device's timing method */
} tsr_device_runner;
tsr_tune_backend tsr_device_backend(tsr_device_runner *runner);

/* ---- compiling candidates ahead (ahead.c) ---- */

#define TUNE_MAX_AHEAD 8 /* worker threads at most */

/* The scope of a worker's job: the tuner's class (`problem_class` from tsr_op_class_list, which
 * lives as long as the process). Jobs keep a copy. */
typedef struct tsr_ahead_device {
    const tsr_op *op;
    const char *problem_class;
    int step; /* the class's problem the tuner measures: 0 its own, else a smaller one (tsr_op_class_shape_step) */
} tsr_ahead_device;

/* What a worker does: open its private state (once, in its thread, at its first job; kept for the
 * whole tuning run), run one configuration in a scope (what the tuner gave with it: the device's
 * workers take a tsr_ahead_device, the class), close. The device's (tsr_ahead_device_fns) make a
 * private device and, per class, a fixture of its problem; tests give their own. */
typedef struct tsr_ahead_fns {
    tsr_status (*open)(void *ctx, void **worker);
    tsr_status (*run)(void *ctx, void *worker, const tsr_ahead_device *scope, const tsr_config *config);
    void (*close)(void *ctx, void *worker);
    void *ctx;
} tsr_ahead_fns;

typedef struct tsr_ahead_stats {
    int submitted;   /* configurations queued */
    int jobs_run;    /* run to the end by a worker */
    int jobs_failed; /* failed there (the tuner meets the failure again, with its message) */
    int dropped;     /* queued but never started: the scope ended first */
    int running;     /* still running when the scope ended (they count in the next one) */
} tsr_ahead_stats;

typedef struct tsr_ahead tsr_ahead;
/* Start `workers` threads (0: *out = NULL, nothing ahead; at most TUNE_MAX_AHEAD). */
tsr_status tsr_ahead_start(const tsr_ahead_fns *fns, int workers, tsr_ahead **out);
int tsr_ahead_workers(const tsr_ahead *ahead);
/* Queue configurations not queued in this scope before (returns at once). */
void tsr_ahead_submit(tsr_ahead *ahead, const tsr_ahead_device *scope, const tsr_config *configs, int n);
/* Was the configuration queued in this scope? */
bool tsr_ahead_submitted(tsr_ahead *ahead, const tsr_config *config);
/* Wait until no job is queued or running: the tuner's thread calls it before it times anything. */
void tsr_ahead_idle(tsr_ahead *ahead);
/* The end of a scope (a class): drop the jobs not started (running ones go on), hand over and
 * reset the counts (`stats` may be NULL) and forget what was queued. */
void tsr_ahead_end_scope(tsr_ahead *ahead, tsr_ahead_stats *stats);
/* Drop the jobs not started, wait for the running ones, join the threads (each closes its state)
 * and free. Nothing a worker did is ever saved: the tuning database is written by the tuner alone. */
void tsr_ahead_stop(tsr_ahead *ahead, tsr_ahead_stats *stats);
/* Threads to use: $TSR_TUNE_AHEAD (0 disables; not a count: an error naming it), else on PoCL with
 * its kernel cache on one less than the online CPUs (at most TUNE_MAX_AHEAD) unless the machine is
 * already busy (load average within half a core of the CPU count), elsewhere none. */
tsr_status tsr_ahead_default_workers(const tsr_device *device, int *workers);

/* Workers with private devices on `tuner`'s OpenCL device (which must outlive them). */
tsr_ahead_fns tsr_ahead_device_fns(tsr_device *tuner);
/* Workers as child processes where $TSR_TUNE_WORKER names an executable whose `tune-worker`
 * command serves tsr_tune_serve (`tessera tune` sets it to itself): PoCL compiles two processes'
 * kernels at once, but one process's contexts one after the other (ahead_process.c). Returns
 * false (use the device's threads) where none is named or the device has no "P:D" selector;
 * *ctx is freed by the caller after tsr_ahead_stop. */
bool tsr_ahead_process_fns(tsr_device *tuner, tsr_ahead_fns *fns, void **ctx);

/* ---- the search of one problem class (search.c, evaluate.c) ---- */

struct tsr_search;
/* What the strategy will ask for after `next` if `next` disappoints (it is not better than what
 * the strategy holds): up to `max` configurations into `out`. Must leave the search as it was
 * (tsr_search_predict_begin/end keep its random state and count the predicted as seen). */
typedef int (*tsr_predict_fn)(struct tsr_search *search, const tsr_config *next, tsr_config *out, int max);

typedef struct tsr_evaluated {
    tsr_config config;
    double gflops; /* from the median time; 0: failed or wrong */
    double score;  /* GFLOP/s from the 25th-percentile time: what candidates are ranked by */
    double spread;
    /* Checked against the reference: only these can be chosen or kept. The others were clearly
     * slower than the incumbent; their score is an estimate from few runs, for the strategies. */
    bool validated;
    bool expanded; /* climb: every one-step neighbour has been tried */
} tsr_evaluated;

typedef struct tsr_search {
    /* Set by whoever runs the search (tsr_tune_op, or a test). */
    const tsr_op *op;
    tsr_device *device;        /* passed to config_ok; NULL when replaying without a device */
    const tsr_space *space;
    tsr_tune_backend backend;
    double flops;              /* work per run: FLOPs, or bytes for ops whose rate unit is GB/s */
    double tolerance;          /* relative error above which a result is wrong: the fixture's own bound
                                * when larger than TUNE_TOLERANCE (16-bit outputs); 0: TUNE_TOLERANCE */
    uint64_t *rng;             /* shared by the classes of one tuning run */
    double class_start;        /* backend clock when the class began */
    double class_budget_s;     /* ends the search at class_start + class_budget_s */
    double duel_budget_s;      /* what a final duel may cost at most (0: class_budget_s) */
    int evaluated_at_start;    /* result->evaluated at class_start (a class may be searched in two passes) */
    int max_evaluations;       /* 0: no limit */
    tsr_config start;          /* anneal: where to start (the best of the default and seeds)... */
    double start_score;        /* ...and its score (0: not measured) */
    FILE *log;                 /* one JSON line per candidate; may be NULL */
    const char *problem_class;
    const tsr_tune_options *options; /* progress callback and user data */
    double remaining_after_s;  /* budget of the classes after this one, for the ETA */
    tsr_tune_result *result;   /* counts: evaluated, failures, abandoned (stopped as slower) */
    const char *seed;          /* while seeds are evaluated, what they are ("stale entry"), for the log */
    /* The candidate now evaluated is the entry lookups resolve to today: it is timed for at least
     * TUNE_MIN_RUNS runs before it can be stopped as slower (one noisy run beside the incumbent
     * stopped the Zen 5's built-in conv2d 3x3 entry in a loaded tune, which then kept a pick 0.72x
     * as fast: no duel is held with an entry that was not validated), and validated whatever they
     * say, so that the duel with it decides. */
    bool measure_fully;
    /* The problem's choice (tsr_tune_choose_step) has just run this configuration on the problem
     * (built, pages touched): its next evaluation skips its untimed first run (consumed by the
     * next evaluation, whichever it is). */
    bool warmed_valid;
    tsr_config warmed;

    tsr_ahead *ahead;          /* NULL: nothing compiled ahead */
    const tsr_ahead_device *ahead_scope; /* given with each configuration submitted (the class) */
    tsr_predict_fn predict;    /* set by the strategy (or the driver, for the seeds); NULL: no guesses */
    void *predict_ctx;         /* the strategy's state, for its predict */
    const tsr_config *excluded; /* counted as seen while predicting */
    int nexcluded;
    int prepared_hits;         /* evaluations of configurations compiled ahead */

    /* Filled by the search. */
    tsr_evaluated *seen;
    int nseen, capseen;
    tsr_config incumbent;      /* the best validated candidate, timed alongside the next ones */
    double best_time;          /* its lower-quartile seconds; 0 until a candidate was validated */
    bool output_dirty;         /* a run since the last check: the output is not poisoned... */
    bool output_single;        /* ...and all those runs were of output_writer */
    tsr_config output_writer;
    /* Set by the final duels: the rate (median) and score of the configuration the device ran before
     * the tune (the entry lookups resolve to, else the default) in its duel with a pick that beat it;
     * 0 when the pick is that configuration or no such duel was held. */
    double before_gflops, before_score;
} tsr_search;

/* Is there budget (evaluations and time) for another evaluation? */
bool tsr_search_budget_left(const tsr_search *search);
/* Is there time left in the class's budget (evaluations aside)? */
bool tsr_search_time_left(const tsr_search *search);
/* Has this configuration been evaluated already (or is it among search->excluded)? */
bool tsr_search_seen(const tsr_search *search, const tsr_config *config);
/* For predict functions: from begin to end the random state is a copy and `excluded` (n, growing
 * as the caller appends to it; its first entry the configuration about to be evaluated) counts as
 * seen. */
void tsr_search_predict_begin(tsr_search *search, const tsr_config *excluded, int n, uint64_t *saved_rng);
void tsr_search_predict_end(tsr_search *search, uint64_t saved_rng);
/* tsr_space_legal for the search's op, device and space. */
bool tsr_search_legal(const tsr_search *search, const tsr_point *point, tsr_config *config);
/* A random legal configuration not evaluated yet; false when 2000 draws found none. */
bool tsr_search_propose(tsr_search *search, tsr_config *config);
/* Build, run and time one candidate and validate it if it could be chosen; record it, log it and
 * report progress. Returns its score: 0 when it failed or was wrong, an estimate when it was
 * stopped as clearly slower (not validated). */
double tsr_search_evaluate(tsr_search *search, const tsr_config *config);
/* The best-scoring validated evaluation so far (NULL when none). */
const tsr_evaluated *tsr_search_best(const tsr_search *search);
/* Call the progress callback, if any. */
void tsr_search_report(const tsr_search *search);
/* Sort the evaluations best first, the validated ones before the others. */
void tsr_search_rank(tsr_search *search);
/* Free what the search allocated. */
void tsr_search_free(tsr_search *search);

/* The duels that end a class's search (ranked first): the best against each other implementation's
 * best within half its score (ops with several), then against a runner-up within 15%, then against the default (`def`, whose score in the search was `def_score`), then against
 * `entry` (the entry lookups resolve to today; NULL: none). Each moves the side that wins side by
 * side first; a slow device, where a duel would cost more than the class's budget, skips them. */
void tsr_search_final_duels(tsr_search *search, const tsr_config *def, double def_score, const tsr_config *entry);
/* One run of `config` on the search's problem (which builds it there), then its output against the
 * reference: is it right? */
bool tsr_search_validate(tsr_search *search, const tsr_config *config);
/* Time two configurations in alternation (up to 3 rounds of runs each, fewer once the medians'
 * confidence intervals are apart); fills GFLOP/s from the median and the lower-quartile time of
 * all their runs (0 when either ran too few times). */
void tsr_search_duel(tsr_search *search, const tsr_config *a, const tsr_config *b, double gflops[2],
                     double score[2]);

/* ---- strategies: one signature, each in its own file ---- */

/* Evaluate configurations through `search` until its budget or its ideas run out. */
typedef void (*tsr_strategy_fn)(tsr_search *search);
void tsr_strategy_exhaustive(tsr_search *search);
void tsr_strategy_random(tsr_search *search);
void tsr_strategy_anneal(tsr_search *search);
void tsr_strategy_climb(tsr_search *search);

/* ---- the problem a class is measured on (tune.c) ---- */

/* A class's problem is made smaller (one of tsr_op_class_shape_step's) where one run of its default
 * would take more than this fraction of the class's budget share: its first pass (the default and
 * the known entries, each a first run, TUNE_MIN_RUNS timed runs and a check) then fits the share. */
#define TUNE_RUN_SHARE 10

/* Setting the class's problems up and timing its default on them, for tsr_tune_choose_step. */
typedef struct tsr_step_probe {
    tsr_status (*setup)(void *ctx, int step, double *work); /* set the step's problem up; its work */
    double (*time)(void *ctx, int step); /* seconds of one run of the default there (after one untimed); 0: failed */
    void (*drop)(void *ctx, int step);   /* free the step's problem */
    void *ctx;
} tsr_step_probe;

/* Which of a class's problems to measure it on: 0, its own, or step 1..nsteps, smaller ones. From
 * the smallest up, a larger one is taken while the run time predicted for it (the last measured
 * time, scaled by work) is within `limit_s`; each one taken is timed before the next is judged.
 * The chosen step's problem is left set up, the others dropped. *own_run_s: the run time predicted
 * for the class's own problem when it was not taken (0 otherwise). Returns the step, or -1 when a
 * setup failed (its error set); a default that cannot be timed leaves the class its own problem. */
int tsr_tune_choose_step(const tsr_step_probe *probe, int nsteps, double limit_s, double *own_run_s);

/* ---- persistence (persist.c) ---- */

/* What a class's search keeps. */
typedef struct tsr_class_outcome {
    char problem_class[32];
    char problem[64];
    tsr_evaluated top[TUNE_KEEP];
    int ntop;
    int evaluations;
} tsr_class_outcome;

/* Store the best configuration and runners-up of each outcome in the database at `path` for
 * this device, with their provenance (`strategy` names the search). */
tsr_status tsr_tuner_save(const char *path, tsr_device *device, const tsr_op *op, const char *strategy,
                          const char *source_hash, const tsr_class_outcome *outcomes, int noutcomes);

#endif
