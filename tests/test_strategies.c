/* The tuner's strategies on a synthetic space, with timings replayed from a landscape and a
 * table of recorded failures instead of a device: exhaustive finds the optimum; random, anneal
 * and climb keep to their budgets (evaluations, or replayed seconds), never evaluate an illegal
 * or repeated configuration, are reproducible from their seed, and find the optimum of an easy
 * landscape; workers compiling ahead (fakes here) change nothing a strategy does, and stop cleanly.
 * Also the measurement module's summaries and repetitions. No OpenCL device is opened. */
#include "harness.h"

#include "tuner/tuner.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

/* ---- a synthetic op: X (1..8) x Y (0..5) x Z (1, 2, 4); X + Y a multiple of 5 is illegal ---- */

enum { P_X, P_Y, P_Z };
static const int x_values[] = {1, 2, 3, 4, 5, 6, 7, 8};
static const int y_values[] = {0, 1, 2, 3, 4, 5};
static const int z_values[] = {1, 2, 4};
static const tsr_param_def grid_params[] = {
    {.name = "X", .values = x_values, .nvalues = 8},
    {.name = "Y", .values = y_values, .nvalues = 6},
    {.name = "Z", .values = z_values, .nvalues = 3},
};

static bool grid_ok(const tsr_device *device, const void *problem, const tsr_config *config) {
    (void)device;
    (void)problem;
    return (config->values[P_X] + config->values[P_Y]) % 5 != 0;
}

static const tsr_op grid_op = {.name = "grid", .params = grid_params, .nparams = 3, .config_ok = grid_ok};

/* The same grid where odd X stands for an implementation that does not read Z: normalizing sets Z
 * to a value the searched space does not hold (as conv2d's im2col sets VW=1 while a CPU search
 * narrows VW to 4, 8, 16). */
enum { Z_UNUSED = 99 };
static void fold_z(tsr_config *config) {
    if (config->values[P_X] % 2) config->values[P_Z] = Z_UNUSED;
}
static const tsr_op folded_op = {
    .name = "folded", .params = grid_params, .nparams = 3, .config_ok = grid_ok, .normalize = fold_z};
/* The same grid where each X stands for an implementation of its own (as conv2d's ALGO). */
static const tsr_implementation x_implementations[] = {
    {.name = "x1", .value = 1}, {.name = "x2", .value = 2}, {.name = "x3", .value = 3}, {.name = "x4", .value = 4},
    {.name = "x5", .value = 5}, {.name = "x6", .value = 6}, {.name = "x7", .value = 7}, {.name = "x8", .value = 8}};
static const tsr_op implemented_op = {.name = "implemented",
                                      .params = grid_params,
                                      .nparams = 3,
                                      .config_ok = grid_ok,
                                      .implementations = x_implementations,
                                      .nimplementations = 8,
                                      .implementation_param = "X"};
static const tsr_op *run_op = &grid_op; /* the op run_strategy searches */

static tsr_config make_config(int x, int y, int z) {
    tsr_config c;
    memset(&c, 0, sizeof c);
    c.values[P_X] = x;
    c.values[P_Y] = y;
    c.values[P_Z] = z;
    return c;
}

/* Recorded outcomes that are not timings. */
typedef enum outcome { RUNS, BUILD_FAILS, LAUNCH_FAILS, WRONG_RESULT, WRITES_NOTHING } outcome;
static const struct {
    int x, y, z;
    outcome what;
} recorded_failures[] = {
    {7, 0, 4, BUILD_FAILS}, {7, 1, 4, BUILD_FAILS}, {7, 2, 4, BUILD_FAILS}, {1, 5, 1, LAUNCH_FAILS},
    {1, 5, 2, LAUNCH_FAILS}, {6, 2, 2, WRONG_RESULT}, {8, 1, 1, WRONG_RESULT}, {5, 2, 2, WRONG_RESULT},
};

static outcome recorded_outcome(const tsr_config *c) {
    for (size_t i = 0; i < sizeof recorded_failures / sizeof recorded_failures[0]; ++i)
        if (recorded_failures[i].x == c->values[P_X] && recorded_failures[i].y == c->values[P_Y] &&
            recorded_failures[i].z == c->values[P_Z])
            return recorded_failures[i].what;
    return RUNS;
}

/* ---- the replay backend ---- */

/* What the output buffer holds: the fixture starts it poisoned, each check poisons it again. */
typedef enum output { POISONED, CORRECT, WRONG } output;

typedef struct replay {
    bool failures;       /* apply recorded_failures (off: an easy landscape) */
    const tsr_config *fast_wrong; /* faster than the optimum, with this outcome (NULL: none) */
    outcome fast_wrong_is;
    output output;
    int checks;          /* calls of check */
    int runs_of[512], checks_of[512]; /* per configuration, in started[] order */
    double clock;        /* replayed seconds */
    int runs;            /* runs so far, for the jitter */
    outcome last;        /* of the last run, for check */
    int illegal_runs;    /* runs of configurations config_ok refuses: must stay 0 */
    tsr_config started[512]; /* configurations in the order their first run came */
    double started_at[512];
    int nstarted;
    double slowdown;     /* every run this many times longer (0: as the landscape says) */
    struct override {    /* configurations whose runs take other times than the landscape's */
        tsr_config config;
        double seconds;  /* per run */
        int runs;        /* for their first this many runs (0: all) */
        int ran;
    } override[4];
    int noverrides;
    bool improving;      /* every new configuration runs faster than all before it (landscape ignored) */
} replay;

/* Runs of `config` take `seconds` each, for its first `runs` runs (0: all of them). */
static void replay_override(replay *r, tsr_config config, double seconds, int runs) {
    assert_true(r->noverrides < 4);
    r->override[r->noverrides++] = (struct override){.config = config, .seconds = seconds, .runs = runs};
}

/* A smooth bowl with its one optimum at X=5 Y=3 Z=2: 0.1 ms there, more away from it. */
static double landscape_seconds(const tsr_config *c) {
    double dx = c->values[P_X] - 5, dy = c->values[P_Y] - 3, dz = c->values[P_Z] == 2 ? 0 : 1;
    return 1e-4 * (1.0 + 0.3 * dx * dx + 0.5 * dy * dy + 0.8 * dz);
}

static const tsr_config optimum = {.values = {5, 3, 2}};

static int started_index(const replay *r, const tsr_config *c);

static tsr_status replay_run(void *vctx, const tsr_config *config, double *seconds) {
    replay *r = vctx;
    if (!grid_ok(NULL, NULL, config)) r->illegal_runs++;
    bool first = true;
    for (int i = 0; i < r->nstarted && first; ++i) first = memcmp(&r->started[i], config, sizeof *config) != 0;
    if (first && r->nstarted < 512) {
        r->started[r->nstarted] = *config;
        r->started_at[r->nstarted++] = r->clock;
    }
    r->clock += 1e-3; /* launch overhead: even failures cost time */
    bool fast_wrong = r->fast_wrong && memcmp(r->fast_wrong, config, sizeof *config) == 0;
    r->last = fast_wrong ? r->fast_wrong_is : r->failures ? recorded_outcome(config) : RUNS;
    for (int i = 0; i < r->nstarted; ++i)
        if (memcmp(&r->started[i], config, sizeof *config) == 0) r->runs_of[i]++;
    if (r->last == BUILD_FAILS) return tsr_fail(TSR_ERR_BUILD, "replayed build failure");
    if (r->last == LAUNCH_FAILS) return tsr_fail(TSR_ERR_OPENCL, "replayed launch failure");
    if (r->last == WRONG_RESULT) r->output = WRONG;
    else if (r->last == RUNS) r->output = CORRECT; /* WRITES_NOTHING leaves what was there */
    double base = fast_wrong ? 0.5e-4 : landscape_seconds(config);
    if (r->improving) base = 1e-4 / (1.0 + 0.05 * started_index(r, config));
    for (int i = 0; i < r->noverrides; ++i)
        if (memcmp(&r->override[i].config, config, sizeof *config) == 0 &&
            (r->override[i].runs == 0 || r->override[i].ran++ < r->override[i].runs))
            base = r->override[i].seconds;
    /* A few percent of deterministic jitter, as recorded runs have. */
    *seconds = base * (1.0 + 0.03 * (double)(r->runs++ % 7) / 7.0) * (r->slowdown > 0 ? r->slowdown : 1.0);
    r->clock += *seconds;
    return TSR_SUCCESS;
}

/* As a fixture's check: compares the output with the reference, then poisons it. */
static tsr_status replay_check(void *vctx, double *rel_err) {
    replay *r = vctx;
    *rel_err = r->output == CORRECT ? 0.0 : r->output == WRONG ? 0.5 : NAN;
    r->output = POISONED;
    r->checks++;
    if (r->nstarted > 0) r->checks_of[r->nstarted - 1]++; /* the candidate being evaluated */
    return TSR_SUCCESS;
}

static double replay_now(void *vctx) { return ((replay *)vctx)->clock; }

/* ---- running a strategy as tsr_tune_op does: the default first, then the strategy ---- */

typedef struct run {
    replay replay;
    tsr_space space;
    uint64_t rng;
    tsr_tune_result result;
    tsr_search search;
} run;

/* As run_strategy, with every run `slowdown` times longer (0: as the landscape says). */
/* The search over the replay in `r` (whose replay fields the caller may have set after zeroing it),
 * as tsr_tune_op makes it. */
static void search_setup(run *r, uint64_t seed, int max_evaluations, double budget_s) {
    r->replay.clock = 100.0;
    r->rng = seed;
    TH_ASSERT_OK(tsr_space_make(run_op, NULL, &r->space));
    r->search = (tsr_search){.op = run_op,
                             .space = &r->space,
                             .backend = {.run = replay_run, .check = replay_check, .now = replay_now, .ctx = &r->replay},
                             .flops = 1e6,
                             .rng = &r->rng,
                             .class_start = r->replay.clock,
                             .class_budget_s = budget_s,
                             .max_evaluations = max_evaluations,
                             .problem_class = "only",
                             .result = &r->result};
}

static void run_strategy_slowed(run *r, tsr_strategy_fn strategy, uint64_t seed, int max_evaluations, double budget_s,
                                bool failures, double slowdown) {
    memset(r, 0, sizeof *r);
    r->replay.failures = failures;
    r->replay.slowdown = slowdown;
    search_setup(r, seed, max_evaluations, budget_s);
    r->search.start = make_config(1, 0, 1); /* the "default": far from the optimum */
    r->search.start_score = tsr_search_evaluate(&r->search, &r->search.start);
    strategy(&r->search);
}

static void run_strategy(run *r, tsr_strategy_fn strategy, uint64_t seed, int max_evaluations, double budget_s,
                         bool failures) {
    run_strategy_slowed(r, strategy, seed, max_evaluations, budget_s, failures, 0);
}

static int legal_count(void) {
    int n = 0;
    for (int x = 0; x < 8; ++x)
        for (int y = 0; y < 6; ++y) n += (x_values[x] + y_values[y]) % 5 != 0 ? 3 : 0;
    return n;
}

/* What every search must keep to: only legal configurations, none twice, each counted. */
static void assert_clean(const run *r) {
    assert_int_equal(r->replay.illegal_runs, 0);
    assert_int_equal(r->search.nseen, r->result.evaluated);
    for (int i = 0; i < r->search.nseen; ++i) {
        assert_true(grid_ok(NULL, NULL, &r->search.seen[i].config));
        for (int j = 0; j < i; ++j)
            if (memcmp(&r->search.seen[i].config, &r->search.seen[j].config, sizeof(tsr_config)) == 0)
                fail_msg("evaluation %d repeats evaluation %d", i, j);
    }
}

static bool is_optimum(const tsr_evaluated *e) { return e && memcmp(&e->config, &optimum, sizeof optimum) == 0; }

static const struct {
    const char *name;
    tsr_strategy_fn fn;
} guided[] = {{"random", tsr_strategy_random}, {"anneal", tsr_strategy_anneal}, {"climb", tsr_strategy_climb}};
enum { NGUIDED = sizeof guided / sizeof guided[0] };

static void exhaustive_finds_the_optimum(void **state) {
    (void)state;
    run r;
    run_strategy(&r, tsr_strategy_exhaustive, 1, 0, 1e9, true);
    assert_clean(&r);
    assert_int_equal(r.result.evaluated, legal_count()); /* every legal configuration, once */
    assert_int_equal(r.result.build_failures, 3);
    assert_int_equal(r.result.launch_failures, 2);
    /* Wrong results are found only where a candidate is validated: when it could be chosen. */
    assert_true(r.result.wrong_results <= 3);
    for (int i = 0; i < r.search.nseen; ++i)
        if (recorded_outcome(&r.search.seen[i].config) == WRONG_RESULT) assert_false(r.search.seen[i].validated);
    assert_true(is_optimum(tsr_search_best(&r.search)));
    /* In order: after the default, (1, 0, 1) is skipped as seen and (1, 0, 2) comes next. */
    const tsr_config second = make_config(1, 0, 2);
    assert_memory_equal(&r.search.seen[1].config, &second, sizeof second);
    tsr_search_free(&r.search);
}

static void evaluation_budgets_are_kept(void **state) {
    (void)state;
    for (int s = 0; s < NGUIDED; ++s)
        for (int budget = 1; budget <= 40; budget += 13) {
            run r;
            run_strategy(&r, guided[s].fn, 7, budget, 1e9, true);
            assert_clean(&r);
            /* The default counts too; the space is large enough to spend all of it. */
            if (r.result.evaluated != budget)
                fail_msg("%s: %d evaluations for a budget of %d", guided[s].name, r.result.evaluated, budget);
            tsr_search_free(&r.search);
        }
}

static void replayed_seconds_budgets_are_kept(void **state) {
    (void)state;
    const double budget_s = 0.2; /* replayed seconds: a fraction of what the whole space takes */
    for (int s = 0; s < NGUIDED + 1; ++s) {
        tsr_strategy_fn fn = s < NGUIDED ? guided[s].fn : tsr_strategy_exhaustive;
        run r;
        run_strategy(&r, fn, 11, 0, budget_s, true);
        assert_clean(&r);
        assert_true(r.result.evaluated >= 3);
        assert_true(r.result.evaluated < legal_count()); /* the budget ended it, not the space */
        /* Every evaluation began with budget left; the last may run past the end. */
        for (int i = 0; i < r.replay.nstarted; ++i)
            if (r.replay.started_at[i] >= r.search.class_start + budget_s)
                fail_msg("%s: evaluation %d began at %.3f s, after the budget", s < NGUIDED ? guided[s].name : "exhaustive",
                         i, r.replay.started_at[i] - r.search.class_start);
        tsr_search_free(&r.search);
    }
}

/* A slow device (llvmpipe: one run of the class's problem takes seconds): a candidate's timing
 * stops when the class's time is up, so the budget is overrun by about a run, not by the minimum
 * number of runs of every candidate. The default's run takes 1 s here; the budget is 2.5 s. */
static void slow_runs_end_at_the_budget(void **state) {
    (void)state;
    const double budget_s = 2.5, default_run_s = 1.0;
    for (int s = 0; s < NGUIDED + 1; ++s) {
        tsr_strategy_fn fn = s < NGUIDED ? guided[s].fn : tsr_strategy_exhaustive;
        run r;
        run_strategy_slowed(&r, fn, 11, 0, budget_s, false,
                            default_run_s / landscape_seconds(&(tsr_config){.values = {1, 0, 1}}));
        double spent = r.replay.clock - r.search.class_start;
        print_message("# %s: %d evaluations, %d runs, %.2f s of a %.1f s budget\n",
                      s < NGUIDED ? guided[s].name : "exhaustive", r.result.evaluated, r.replay.runs, spent, budget_s);
        assert_true(r.result.evaluated >= 1);
        /* At most the run that crossed the end and the check's run after it (1.1 s each at most). */
        assert_true(spent <= budget_s + 2 * 1.1 * default_run_s);
        tsr_search_free(&r.search);
    }
}

static void strategies_are_reproducible_from_the_seed(void **state) {
    (void)state;
    for (int s = 0; s < NGUIDED; ++s) {
        run a, b, c;
        run_strategy(&a, guided[s].fn, 1234, 30, 1e9, true);
        run_strategy(&b, guided[s].fn, 1234, 30, 1e9, true);
        run_strategy(&c, guided[s].fn, 99, 30, 1e9, true);
        assert_int_equal(a.search.nseen, b.search.nseen);
        for (int i = 0; i < a.search.nseen; ++i) {
            assert_memory_equal(&a.search.seen[i].config, &b.search.seen[i].config, sizeof(tsr_config));
            assert_true(a.search.seen[i].score == b.search.seen[i].score);
        }
        /* Random search depends on nothing else: another seed takes another path. */
        if (guided[s].fn == tsr_strategy_random) {
            bool differs = a.search.nseen != c.search.nseen;
            for (int i = 0; !differs && i < a.search.nseen; ++i)
                differs = memcmp(&a.search.seen[i].config, &c.search.seen[i].config, sizeof(tsr_config)) != 0;
            assert_true(differs);
        }
        tsr_search_free(&a.search);
        tsr_search_free(&b.search);
        tsr_search_free(&c.search);
    }
}

static void easy_landscapes_are_solved(void **state) {
    (void)state;
    /* Random search without repetition covers the whole space within that many evaluations. */
    run r;
    run_strategy(&r, tsr_strategy_random, 5, legal_count(), 1e9, false);
    assert_clean(&r);
    assert_true(is_optimum(tsr_search_best(&r.search)));
    tsr_search_free(&r.search);
    /* The guided searches walk down the bowl in far fewer, whatever the seed. */
    for (uint64_t seed = 1; seed <= 5; ++seed)
        for (int s = 1; s < NGUIDED; ++s) {
            run_strategy(&r, guided[s].fn, seed, 40, 1e9, false);
            assert_clean(&r);
            if (!is_optimum(tsr_search_best(&r.search)))
                fail_msg("%s (seed %llu) missed the optimum in 40 of %d evaluations", guided[s].name,
                         (unsigned long long)seed, legal_count());
            tsr_search_free(&r.search);
        }
}

/* Normalized configurations outside the space (the start among them) never make a strategy step
 * off the space's arrays: every evaluated value is one the space holds, or Z's folded value. */
static void normalized_points_outside_the_space(void **state) {
    (void)state;
    run_op = &folded_op;
    for (uint64_t seed = 1; seed <= 5; ++seed)
        for (int s = 0; s < NGUIDED; ++s) {
            run r;
            memset(&r, 0, sizeof r);
            search_setup(&r, seed, 60, 1e9);
            r.search.start = make_config(1, 0, Z_UNUSED); /* normalized, not a point of the space */
            r.search.start_score = tsr_search_evaluate(&r.search, &r.search.start);
            guided[s].fn(&r.search);
            assert_clean(&r);
            assert_int_equal(r.result.evaluated, 60);
            for (int i = 0; i < r.search.nseen; ++i) {
                const int *v = r.search.seen[i].config.values;
                bool z_ok = v[P_X] % 2 ? v[P_Z] == Z_UNUSED : (v[P_Z] == 1 || v[P_Z] == 2 || v[P_Z] == 4);
                if (v[P_X] < 1 || v[P_X] > 8 || v[P_Y] < 0 || v[P_Y] > 5 || !z_ok)
                    fail_msg("%s (seed %llu) evaluated X=%d Y=%d Z=%d, outside the space", guided[s].name,
                             (unsigned long long)seed, v[P_X], v[P_Y], v[P_Z]);
            }
            tsr_search_free(&r.search);
        }
    run_op = &grid_op;
}

static void abandoned_and_failed_candidates_score_zero(void **state) {
    (void)state;
    run r;
    run_strategy(&r, tsr_strategy_exhaustive, 1, 0, 1e9, true);
    int zero = 0, unvalidated = 0;
    for (int i = 0; i < r.search.nseen; ++i) {
        outcome o = recorded_outcome(&r.search.seen[i].config);
        if (o == BUILD_FAILS || o == LAUNCH_FAILS) assert_true(r.search.seen[i].score == 0);
        if (o != RUNS) assert_false(r.search.seen[i].validated);
        zero += r.search.seen[i].score == 0;
        unvalidated += !r.search.seen[i].validated;
    }
    assert_int_equal(zero, r.result.build_failures + r.result.launch_failures + r.result.wrong_results);
    /* Stopped as slower: a score for the strategies, but never validated. */
    assert_int_equal(unvalidated, zero + r.result.abandoned);
    assert_true(r.result.abandoned > 0);
    tsr_search_free(&r.search);
}

static int started_index(const replay *r, const tsr_config *c) {
    for (int i = 0; i < r->nstarted; ++i)
        if (memcmp(&r->started[i], c, sizeof *c) == 0) return i;
    fail_msg("a configuration was recorded but never run");
    return -1;
}

/* Timing stops once a candidate is clearly slower than the incumbent, and only candidates that
 * could be chosen are validated: with replayed timings, each one left unvalidated is slower than
 * the incumbent of its time, each validated one was timed TUNE_MIN_RUNS times at least, and most
 * are neither timed long nor checked. */
static void slower_candidates_stop_early_unvalidated(void **state) {
    (void)state;
    run r;
    run_strategy(&r, tsr_strategy_exhaustive, 1, 0, 1e9, false);
    assert_clean(&r);
    double incumbent = 0;
    int stopped_early = 0, validated = 0;
    for (int i = 0; i < r.search.nseen; ++i) {
        const tsr_evaluated *e = &r.search.seen[i];
        int runs = r.replay.runs_of[started_index(&r.replay, &e->config)];
        double seconds = landscape_seconds(&e->config);
        if (e->validated) {
            assert_true(runs >= 1 + TUNE_MIN_RUNS); /* the build run, then the timed ones */
            if (incumbent == 0 || seconds < incumbent) incumbent = seconds;
            ++validated;
        } else {
            assert_true(e->score > 0); /* an estimate for the strategies */
            if (!(seconds > incumbent))
                fail_msg("candidate %d (%.3g s) was not validated, but the incumbent took %.3g s", i, seconds, incumbent);
            stopped_early += runs < 1 + TUNE_MIN_RUNS;
        }
    }
    assert_int_equal(r.result.abandoned, r.search.nseen - validated);
    assert_true(stopped_early > r.search.nseen / 2);
    assert_true(r.replay.checks < r.search.nseen / 2);
    assert_true(is_optimum(tsr_search_best(&r.search)));
    tsr_search_free(&r.search);
}

/* A candidate a few percent slower than the incumbent (not clearly: it is validated, it may be a
 * runner-up) stops once the lower bound of its lower quartile lies above the upper bound of the
 * incumbent's (its fastest run slower than the incumbent's slowest, with 5 runs each): its rank
 * needs no more runs. One 2% faster is not stopped so and becomes the incumbent; one 10% faster
 * is measured until its lower quartile is known (from 12 runs), as before. */
static void candidates_stop_once_their_rank_is_known(void **state) {
    (void)state;
    run r;
    memset(&r, 0, sizeof r);
    const tsr_config nearly = make_config(6, 3, 2), close = make_config(5, 3, 1), faster = make_config(5, 2, 2);
    replay_override(&r.replay, nearly, 0.98e-4, 0); /* 2% faster than the optimum's landscape time */
    replay_override(&r.replay, close, 1.06e-4, 0);  /* 8% slower than that */
    replay_override(&r.replay, faster, 0.88e-4, 0); /* 10% faster than that */
    search_setup(&r, 1, 0, 1e9);
    assert_true(tsr_search_evaluate(&r.search, &optimum) > 0); /* the incumbent */
    assert_true(tsr_search_evaluate(&r.search, &nearly) > 0);
    assert_memory_equal(&r.search.incumbent, &nearly, sizeof nearly);
    assert_true(tsr_search_evaluate(&r.search, &close) > 0);
    assert_true(r.search.seen[2].validated);
    int runs = r.replay.runs_of[started_index(&r.replay, &close)];
    print_message("# 8%% slower: %d runs in all (first run, timed runs, the check's run)\n", runs);
    assert_int_equal(runs, 1 + TUNE_MIN_RUNS + 1);
    assert_true(tsr_search_evaluate(&r.search, &faster) > 0);
    runs = r.replay.runs_of[started_index(&r.replay, &faster)];
    print_message("# 10%% faster: %d runs in all\n", runs);
    assert_true(runs >= 1 + 12);
    assert_true(r.search.seen[3].validated);
    assert_memory_equal(&r.search.incumbent, &faster, sizeof faster);
    tsr_search_free(&r.search);
}

/* A search ends with the best against a close runner-up side by side: a candidate whose own
 * evaluation ran slow (the machine was busy then) is not passed over for one that only looked
 * faster. Here the optimum's first 62 runs (its evaluation, its runs as the incumbent beside
 * later candidates, then the start of the duel) take 1.4x its time, which ranks it behind
 * (6, 3, 2) at 1.3x; the duel's later rounds at its own speed put it first. Where it ran at 1.2x
 * it ranks first and stays so. A runner-up more than 15% behind (1.4x against 1.1x) is left alone. */
static void a_close_runner_up_duels_the_best(void **state) {
    (void)state;
    const double slowed[] = {1.2e-4, 1.4e-4, 1.6e-4}; /* first anyway; second and close; too far behind */
    for (int c = 0; c < 3; ++c) {
        run r;
        memset(&r, 0, sizeof r);
        replay_override(&r.replay, make_config(4, 3, 2), 2e-4, 0); /* out of the way: one runner-up */
        replay_override(&r.replay, optimum, slowed[c], 1 + TUNE_MAX_RUNS + 1);
        search_setup(&r, 1, 0, 1e9);
        const tsr_config def = make_config(1, 0, 1);
        double def_score = tsr_search_evaluate(&r.search, &def);
        r.search.start = def;
        r.search.start_score = def_score;
        tsr_strategy_exhaustive(&r.search);
        tsr_search_rank(&r.search);
        if (c > 0) assert_false(is_optimum(&r.search.seen[0])); /* the test can fail */
        int runs_before = r.replay.runs;
        tsr_search_final_duels(&r.search, &def, def_score, NULL);
        assert_true(r.replay.runs > runs_before);
        if (c < 2) assert_true(is_optimum(&r.search.seen[0]));
        else assert_false(is_optimum(&r.search.seen[0])); /* over 15% behind: no duel */
        assert_true(r.search.seen[0].validated);
        tsr_search_free(&r.search);
    }
}

/* Where the op has several implementations, each other implementation's best (within half the
 * best's score) duels the best side by side, however far behind its own evaluation ran. The
 * optimum, evaluated right after the default (so validated, as the incumbent of its time), runs at
 * 1.45x for the whole search (still the best of its X) while (6, 3, 2) runs at 1.15x throughout:
 * more than 15% behind, so no runner-up duel. Where each X is an implementation of its own, the
 * duel at the optimum's own speed puts it first; on the plain grid it stays behind. */
static void other_implementations_duel_the_best(void **state) {
    (void)state;
    const tsr_op *ops[] = {&grid_op, &implemented_op};
    for (int o = 0; o < 2; ++o) {
        run_op = ops[o];
        run r;
        memset(&r, 0, sizeof r);
        replay_override(&r.replay, make_config(4, 3, 2), 2e-4, 0);
        replay_override(&r.replay, make_config(6, 3, 2), 1.15e-4, 0);
        replay_override(&r.replay, optimum, 1.45e-4, 1 << 30);
        search_setup(&r, 1, 0, 1e9);
        const tsr_config def = make_config(1, 0, 1);
        double def_score = tsr_search_evaluate(&r.search, &def);
        r.search.start = def;
        r.search.start_score = def_score;
        assert_true(tsr_search_evaluate(&r.search, &optimum) > 0);
        tsr_strategy_exhaustive(&r.search);
        tsr_search_rank(&r.search);
        r.replay.override[2].runs = r.replay.override[2].ran; /* its own speed from now on */
        assert_false(is_optimum(&r.search.seen[0])); /* the test can fail */
        tsr_search_final_duels(&r.search, &def, def_score, NULL);
        assert_true(is_optimum(&r.search.seen[0]) == (o == 1));
        assert_true(r.search.seen[0].validated);
        tsr_search_free(&r.search);
    }
    run_op = &grid_op;
}

/* The entry lookups resolve to today is timed for TUNE_MIN_RUNS runs and validated however slow
 * its runs are (the duel with it decides: one noisy run must not drop it unseen); any other
 * candidate as slow stops after its first timed run, unvalidated. */
static void the_entry_in_use_is_measured_fully(void **state) {
    (void)state;
    run r;
    memset(&r, 0, sizeof r);
    search_setup(&r, 1, 0, 1e9);
    assert_true(tsr_search_evaluate(&r.search, &optimum) > 0); /* the incumbent */
    const tsr_config in_use = make_config(1, 1, 1), other = make_config(1, 1, 4); /* 8.6x as slow */
    r.search.measure_fully = true;
    double score = tsr_search_evaluate(&r.search, &in_use);
    r.search.measure_fully = false;
    assert_true(score > 0);
    assert_true(r.replay.runs_of[started_index(&r.replay, &in_use)] >= 1 + TUNE_MIN_RUNS);
    tsr_search_evaluate(&r.search, &other);
    assert_true(r.replay.runs_of[started_index(&r.replay, &other)] < 1 + TUNE_MIN_RUNS);
    for (int i = 0; i < r.search.nseen; ++i) {
        const tsr_evaluated *e = &r.search.seen[i];
        if (memcmp(&e->config, &in_use, sizeof in_use) == 0) assert_true(e->validated);
        if (memcmp(&e->config, &other, sizeof other) == 0) assert_false(e->validated);
    }
    assert_true(is_optimum(tsr_search_best(&r.search))); /* validated, not chosen */
    tsr_search_free(&r.search);
}

/* A configuration faster than the optimum that computes a wrong result, or writes nothing (its
 * output then holds whatever the previous candidate left), is validated because it could win,
 * found wrong and never chosen, whichever strategy meets it. */
static void fast_but_wrong_never_wins(void **state) {
    (void)state;
    static const tsr_config fast = {.values = {4, 3, 2}};
    for (int kind = 0; kind < 2; ++kind)
        for (int s = 0; s <= NGUIDED; ++s) {
            tsr_strategy_fn fn = s < NGUIDED ? guided[s].fn : tsr_strategy_exhaustive;
            run r;
            memset(&r, 0, sizeof r);
            r.replay.fast_wrong = &fast;
            r.replay.fast_wrong_is = kind ? WRITES_NOTHING : WRONG_RESULT;
            search_setup(&r, 3, s < NGUIDED ? 80 : 0, 1e9);
            r.search.start = make_config(1, 0, 1);
            r.search.start_score = tsr_search_evaluate(&r.search, &r.search.start);
            fn(&r.search);
            assert_clean(&r);
            bool met = false;
            for (int i = 0; i < r.search.nseen; ++i)
                if (memcmp(&r.search.seen[i].config, &fast, sizeof fast) == 0) {
                    met = true;
                    assert_false(r.search.seen[i].validated);
                    assert_true(r.search.seen[i].score == 0);
                }
            const tsr_evaluated *best = tsr_search_best(&r.search);
            assert_non_null(best);
            assert_true(memcmp(&best->config, &fast, sizeof fast) != 0);
            if (met) assert_int_equal(r.result.wrong_results, 1);
            if (fn == tsr_strategy_exhaustive) {
                assert_true(met);
                assert_true(is_optimum(best));
            }
            tsr_search_rank(&r.search);
            assert_true(r.search.seen[0].validated); /* what the duel and the database take */
            tsr_search_free(&r.search);
        }
}

/* ---- the measurement module's summaries and repetitions ---- */

/* ---- compiling ahead: fake workers that record what they are given ---- */

typedef struct fake_ahead {
    pthread_mutex_t lock;
    tsr_config ran[512];
    int nran;          /* jobs started */
    int opens, closes;
    bool fail_open;    /* a worker that cannot make its private device */
    int job_us;        /* how long a job takes */
} fake_ahead;

static void sleep_us(int us) {
    struct timespec t = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static tsr_status fake_open(void *ctx, void **worker) {
    fake_ahead *f = ctx;
    pthread_mutex_lock(&f->lock);
    f->opens++;
    pthread_mutex_unlock(&f->lock);
    *worker = f;
    return f->fail_open ? tsr_fail(TSR_ERR_OPENCL, "fake: no private device") : TSR_SUCCESS;
}

static const tsr_ahead_device fake_scope = {.op = &grid_op, .problem_class = "only"};

static tsr_status fake_run(void *ctx, void *worker, const tsr_ahead_device *scope, const tsr_config *config) {
    fake_ahead *f = ctx;
    if (worker != f || scope->op != fake_scope.op || strcmp(scope->problem_class, "only") != 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "fake: wrong worker or scope");
    pthread_mutex_lock(&f->lock);
    if (f->nran < 512) f->ran[f->nran] = *config;
    f->nran++;
    pthread_mutex_unlock(&f->lock);
    if (f->job_us) sleep_us(f->job_us);
    /* the recorded build failures fail here too, as a real compile would */
    return recorded_outcome(config) == BUILD_FAILS ? tsr_fail(TSR_ERR_BUILD, "fake: build failed") : TSR_SUCCESS;
}

static void fake_close(void *ctx, void *worker) {
    fake_ahead *f = ctx;
    (void)worker;
    pthread_mutex_lock(&f->lock);
    f->closes++;
    pthread_mutex_unlock(&f->lock);
}

static void fake_init(fake_ahead *f) {
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->lock, NULL);
}

/* As run_strategy, with `workers` fake workers compiling ahead. */
static void run_strategy_ahead(run *r, tsr_strategy_fn strategy, uint64_t seed, int max_evaluations, int workers,
                               fake_ahead *f, tsr_ahead_stats *stats, bool improving) {
    memset(r, 0, sizeof *r);
    r->replay.failures = !improving;
    r->replay.improving = improving;
    search_setup(r, seed, max_evaluations, 1e9);
    tsr_ahead_fns fns = {.open = fake_open, .run = fake_run, .close = fake_close, .ctx = f};
    TH_ASSERT_OK(tsr_ahead_start(&fns, workers, &r->search.ahead));
    assert_non_null(r->search.ahead);
    r->search.ahead_scope = &fake_scope;
    r->search.start = make_config(1, 0, 1);
    r->search.start_score = tsr_search_evaluate(&r->search, &r->search.start);
    strategy(&r->search);
    tsr_ahead_stop(r->search.ahead, stats);
    r->search.ahead = NULL;
}

/* Workers only compile: every strategy evaluates the same configurations, in the same order, with
 * the same scores, with and without them, and what they were given is what the strategy asked for
 * next as often as the strategy's predictions say (random: always). Guesses that were never
 * evaluated (their builds finished after the search moved elsewhere) leave no trace. */
static void compiling_ahead_changes_no_search(void **state) {
    (void)state;
    for (int s = 0; s < NGUIDED; ++s)
        for (uint64_t seed = 1; seed <= 3; ++seed)
            for (int workers = 1; workers <= 3; workers += 2) {
                run plain, ahead;
                run_strategy(&plain, guided[s].fn, seed, 40, 1e9, true);
                fake_ahead f;
                fake_init(&f);
                tsr_ahead_stats stats;
                run_strategy_ahead(&ahead, guided[s].fn, seed, 40, workers, &f, &stats, false);
                assert_clean(&ahead);
                assert_int_equal(plain.search.nseen, ahead.search.nseen);
                for (int i = 0; i < plain.search.nseen; ++i) {
                    assert_memory_equal(&plain.search.seen[i].config, &ahead.search.seen[i].config,
                                        sizeof(tsr_config));
                    assert_true(plain.search.seen[i].score == ahead.search.seen[i].score);
                    assert_int_equal(plain.search.seen[i].validated, ahead.search.seen[i].validated);
                }
                assert_int_equal(plain.result.build_failures, ahead.result.build_failures);
                /* everything given to a worker ran once, legal, never the evaluation it was given at */
                assert_int_equal(stats.submitted, f.nran);
                assert_int_equal(stats.jobs_run + stats.jobs_failed, f.nran);
                assert_int_equal(stats.dropped, 0);
                int failing = 0;
                for (int i = 0; i < f.nran; ++i) {
                    assert_true(grid_ok(NULL, NULL, &f.ran[i]));
                    failing += recorded_outcome(&f.ran[i]) == BUILD_FAILS;
                }
                assert_int_equal(stats.jobs_failed, failing);
                assert_int_equal(f.opens, f.closes);
                assert_true(f.opens <= workers);
                /* no more guesses than the evaluation budget leaves */
                assert_true(f.nran <= ahead.result.evaluated);
                int evaluated_ahead = 0;
                for (int i = 0; i < f.nran; ++i)
                    for (int j = 0; j < ahead.search.nseen; ++j)
                        evaluated_ahead += memcmp(&f.ran[i], &ahead.search.seen[j].config, sizeof(tsr_config)) == 0;
                assert_int_equal(evaluated_ahead, ahead.search.prepared_hits);
                print_message("# %s (seed %llu, %d workers): %d of %d evaluations compiled ahead, %d guesses\n",
                              guided[s].name, (unsigned long long)seed, workers, evaluated_ahead,
                              ahead.result.evaluated, f.nran);
                if (guided[s].fn == tsr_strategy_random) assert_int_equal(evaluated_ahead, f.nran); /* exact */
                if (evaluated_ahead < ahead.result.evaluated / 4)
                    fail_msg("%s (seed %llu, %d workers): only %d of %d evaluations were compiled ahead",
                             guided[s].name, (unsigned long long)seed, workers, evaluated_ahead,
                             ahead.result.evaluated);
                pthread_mutex_destroy(&f.lock);
                tsr_search_free(&plain.search);
                tsr_search_free(&ahead.search);
            }
}

/* Where every candidate is accepted (each runs faster than all before it), annealing's next
 * candidate is a neighbour of the one just evaluated: the worker's guess follows that branch once
 * the last candidates' ratios say so, and prepares every other candidate (the most one worker can:
 * a prepared candidate's turn has no compile of the tuner's own to overlap). Guessing the rejected
 * branch, as before session 22, prepared almost none here. */
static void annealing_guesses_the_likelier_branch(void **state) {
    (void)state;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        run r;
        fake_ahead f;
        fake_init(&f);
        tsr_ahead_stats stats;
        run_strategy_ahead(&r, tsr_strategy_anneal, seed, 40, 1, &f, &stats, true);
        assert_clean(&r);
        print_message("# seed %llu: %d of %d evaluations compiled ahead, %d guesses\n", (unsigned long long)seed,
                      r.search.prepared_hits, r.result.evaluated, f.nran);
        if (r.search.prepared_hits < 2 * r.result.evaluated / 5)
            fail_msg("seed %llu: only %d of %d evaluations compiled ahead", (unsigned long long)seed,
                     r.search.prepared_hits, r.result.evaluated);
        pthread_mutex_destroy(&f.lock);
        tsr_search_free(&r.search);
    }
}

/* Stopping drops the jobs not started; a running one (a compile cannot be interrupted) finishes
 * first, and each worker closes what it opened. */
static void compiling_ahead_stops_cleanly(void **state) {
    (void)state;
    fake_ahead f;
    fake_init(&f);
    f.job_us = 500000;
    tsr_ahead_fns fns = {.open = fake_open, .run = fake_run, .close = fake_close, .ctx = &f};
    tsr_ahead *a = NULL;
    TH_ASSERT_OK(tsr_ahead_start(&fns, 1, &a));
    const tsr_config jobs[3] = {make_config(1, 0, 1), make_config(2, 0, 1), make_config(4, 0, 1)};
    tsr_ahead_submit(a, &fake_scope, jobs, 3);
    tsr_ahead_submit(a, &fake_scope, jobs, 3); /* again: queued once */
    assert_true(tsr_ahead_submitted(a, &jobs[2]));
    assert_false(tsr_ahead_submitted(a, &optimum));
    for (;;) { /* until the first job runs */
        pthread_mutex_lock(&f.lock);
        int started = f.nran;
        pthread_mutex_unlock(&f.lock);
        if (started) break;
        sleep_us(1000);
    }
    tsr_ahead_stats stats;
    /* the class ends: the two queued are dropped, the one running goes on (0.5 s) */
    tsr_ahead_end_scope(a, &stats);
    assert_int_equal(stats.submitted, 3);
    assert_int_equal(stats.jobs_run, 0);
    assert_int_equal(stats.running, 1);
    assert_int_equal(stats.dropped, 2);
    assert_false(tsr_ahead_submitted(a, &jobs[0])); /* a new scope: nothing queued in it yet */
    tsr_ahead_idle(a); /* what the tuner does before it times: the running one finishes */
    assert_int_equal(f.nran, 1);
    /* the next class's jobs run on the same worker, opened once */
    f.job_us = 0;
    tsr_ahead_submit(a, &fake_scope, &jobs[1], 1);
    tsr_ahead_idle(a);
    tsr_ahead_stop(a, &stats);
    assert_int_equal(stats.submitted, 1);
    assert_int_equal(stats.jobs_run, 2); /* the one that ran past its class's end counts here */
    assert_int_equal(stats.dropped, 0);
    assert_int_equal(f.nran, 2);
    assert_int_equal(f.opens, 1);
    assert_int_equal(f.closes, 1);
    /* No workers: nothing started, and every call on the NULL pool does nothing. */
    TH_ASSERT_OK(tsr_ahead_start(&fns, 0, &a));
    assert_null(a);
    tsr_ahead_submit(a, &fake_scope, jobs, 3);
    tsr_ahead_idle(a);
    assert_false(tsr_ahead_submitted(a, &jobs[0]));
    tsr_ahead_stop(a, NULL);
    pthread_mutex_destroy(&f.lock);
}

/* A worker that cannot make its private device fails its jobs at once: the tuner waits for
 * nothing and compiles those candidates itself; the search is the same. */
static void compiling_ahead_survives_broken_workers(void **state) {
    (void)state;
    fake_ahead f;
    fake_init(&f);
    f.fail_open = true;
    run plain, ahead;
    run_strategy(&plain, tsr_strategy_random, 5, 20, 1e9, true);
    tsr_ahead_stats stats;
    run_strategy_ahead(&ahead, tsr_strategy_random, 5, 20, 2, &f, &stats, false);
    assert_int_equal(plain.search.nseen, ahead.search.nseen);
    for (int i = 0; i < plain.search.nseen; ++i)
        assert_memory_equal(&plain.search.seen[i].config, &ahead.search.seen[i].config, sizeof(tsr_config));
    assert_int_equal(stats.jobs_run, 0);
    assert_int_equal(stats.jobs_failed, stats.submitted);
    assert_true(stats.submitted > 0);
    assert_int_equal(f.nran, 0);  /* never ran: the private device is missing */
    assert_int_equal(f.closes, 0); /* nothing opened, nothing closed */
    pthread_mutex_destroy(&f.lock);
    tsr_search_free(&plain.search);
    tsr_search_free(&ahead.search);
}

/* A duel ends as soon as the medians are clearly apart (a slow candidate against the optimum),
 * and runs its three rounds when they are not (a configuration against its twin: Z=1 and Z=4
 * cost the same); either way the faster side wins, as in a full duel. */
static void duels_end_early_only_when_clear(void **state) {
    (void)state;
    run r;
    memset(&r, 0, sizeof r);
    search_setup(&r, 1, 0, 1e9);
    const tsr_config slow = make_config(1, 1, 1), twin_a = make_config(4, 3, 1), twin_b = make_config(4, 3, 4);
    double g[2], q[2];
    int before = r.replay.runs;
    tsr_search_duel(&r.search, &optimum, &slow, g, q);
    int clear_runs = r.replay.runs - before;
    assert_true(g[0] > g[1] && q[0] > q[1]);
    before = r.replay.runs;
    tsr_search_duel(&r.search, &twin_a, &twin_b, g, q);
    int close_runs = r.replay.runs - before;
    assert_true(g[0] > 0 && g[1] > 0);
    /* each round runs each side for TUNE_MAX_SECONDS / 3 at least: far more runs in three rounds */
    if (!(clear_runs < close_runs))
        fail_msg("a clear duel took %d runs, a close one %d: it did not end early", clear_runs, close_runs);
    assert_true(clear_runs <= 2 * close_runs / 3 + 2);
}

/* ---- the problem a class is measured on: its own, or a smaller one on a slow device ---- */

typedef struct fake_steps {
    double work[4];       /* per step: 0 the class's own problem, then smaller ones */
    double seconds_per_work; /* the device's speed: a run of step s takes work[s] * this */
    bool untimeable;      /* the default fails to run */
    int fail_setup;       /* this step's setup fails (-1: none) */
    bool live[4];         /* set up and not dropped */
    int setups, timings;
} fake_steps;

static tsr_status fake_step_setup(void *ctx, int step, double *work) {
    fake_steps *f = ctx;
    assert_false(f->live[step]);
    if (step == f->fail_setup) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "fake: no memory for step %d", step);
    f->live[step] = true;
    f->setups++;
    *work = f->work[step];
    return TSR_SUCCESS;
}

static double fake_step_time(void *ctx, int step) {
    fake_steps *f = ctx;
    assert_true(f->live[step]); /* only a problem that is set up is timed */
    f->timings++;
    return f->untimeable ? 0 : f->work[step] * f->seconds_per_work;
}

static void fake_step_drop(void *ctx, int step) {
    fake_steps *f = ctx;
    assert_true(f->live[step]);
    f->live[step] = false;
}

static int choose(fake_steps *f, int nsteps, double limit, double *own) {
    const tsr_step_probe probe = {.setup = fake_step_setup, .time = fake_step_time, .drop = fake_step_drop, .ctx = f};
    int step = tsr_tune_choose_step(&probe, nsteps, limit, own);
    int live = 0;
    for (int s = 0; s < 4; ++s) live += f->live[s];
    assert_int_equal(live, step >= 0 ? 1 : 0); /* the chosen problem alone is left set up */
    if (step >= 0) assert_true(f->live[step]);
    return step;
}

/* A fast device keeps the class's own problem (each step timed on the way up: 2 timings); a slow one
 * stops where the next step's predicted run would pass the limit (GEMM `large` on llvmpipe: 30 s a
 * run of 2048^3), and the slowest keeps the smallest; the own problem's predicted run time is told
 * when it was judged; a default that does not run leaves the class its own problem; a failed setup
 * is an error with nothing left set up. */
static void slow_devices_measure_smaller_problems(void **state) {
    (void)state;
    double own;
    fake_steps f = {.work = {8000, 1000, 125}, .seconds_per_work = 1e-4, .fail_setup = -1};
    assert_int_equal(choose(&f, 2, 1.0, &own), 0);
    assert_true(own == 0);
    assert_int_equal(f.timings, 2);
    f = (fake_steps){.work = {8000, 1000, 125}, .seconds_per_work = 1e-3, .fail_setup = -1};
    assert_int_equal(choose(&f, 2, 1.0, &own), 1); /* 1000 work: 1 s, within; 8000: 8 s */
    assert_true(fabs(own - 8.0) < 1e-9);
    f = (fake_steps){.work = {8000, 1000, 125}, .seconds_per_work = 1e-2, .fail_setup = -1};
    assert_int_equal(choose(&f, 2, 1.0, &own), 2);
    assert_int_equal(f.timings, 1);
    assert_int_equal(f.setups, 2); /* the own problem was never set up: judged from step 1 */
    f = (fake_steps){.work = {8000, 1000, 125}, .seconds_per_work = 1e-2, .untimeable = true, .fail_setup = -1};
    assert_int_equal(choose(&f, 2, 1.0, &own), 0);
    assert_true(own == 0);
    f = (fake_steps){.work = {8000, 1000, 125}, .seconds_per_work = 1e-4, .fail_setup = 1};
    assert_int_equal(choose(&f, 2, 1.0, &own), -1);
    TH_ASSERT_CONTAINS(tsr_last_error(), "no memory for step 1");
    tsr_clear_error();
    f = (fake_steps){.work = {8000}, .seconds_per_work = 1, .fail_setup = -1};
    assert_int_equal(choose(&f, 0, 1e-9, &own), 0); /* no smaller problem: its own, untimed */
    assert_int_equal(f.timings, 0);
    f = (fake_steps){.work = {8000, 1000}, .seconds_per_work = 1, .fail_setup = -1};
    assert_int_equal(choose(&f, 1, INFINITY, &own), 0); /* no budget limit: every run fits */
}

static void stats_summarize_measurements(void **state) {
    (void)state;
    double odd[] = {5, 1, 4, 2, 3};
    tsr_stats s;
    tsr_stats_of(odd, 5, &s);
    assert_int_equal(s.n, 5);
    assert_true(s.median == 3 && s.min == 1 && s.max == 5 && s.q25 == 2);
    assert_true(fabs(s.spread - 4.0 / 3.0) < 1e-12);
    assert_true(odd[0] == 1 && odd[4] == 5); /* sorted in place */
    double even[] = {4, 1, 3, 2};
    tsr_stats_of(even, 4, &s);
    assert_true(s.median == 2.5 && s.q25 == 1);
    double one[] = {7};
    tsr_stats_of(one, 1, &s);
    assert_true(s.median == 7 && s.q25 == 7 && s.spread == 0);
}

static void quantile_bounds_widen_with_few_values(void **state) {
    (void)state;
    double v[20], lo, hi;
    for (int i = 0; i < 20; ++i) v[i] = i + 1;
    assert_true(tsr_quantile_bounds(v, 20, 0.5, &lo, &hi)); /* ranks 10 -/+ 4.4 */
    assert_true(lo == 6 && hi == 16);
    assert_false(tsr_quantile_bounds(v, 5, 0.5, &lo, &hi)); /* too few: the extremes */
    assert_true(lo == 1 && hi == 5);
    assert_false(tsr_quantile_bounds(v, 7, 0.5, &lo, &hi));
    assert_true(tsr_quantile_bounds(v, 8, 0.5, &lo, &hi));  /* the median needs 8 values */
    assert_false(tsr_quantile_bounds(v, 11, 0.25, &lo, &hi));
    assert_true(tsr_quantile_bounds(v, 12, 0.25, &lo, &hi)); /* the lower quartile 12 */
    assert_true(lo == 1 && hi == 7); /* ranks 3 -/+ 2.9, 0-based */
}

typedef struct counter {
    int calls, fail_at;
    double steady; /* > 0: values wobble within 0.2% around this instead of counting the calls */
} counter;

static tsr_status count_call(void *vctx, double *value) {
    counter *c = vctx;
    if (++c->calls == c->fail_at) return tsr_fail(TSR_ERR_OPENCL, "replayed failure");
    *value = c->steady > 0 ? c->steady * (1.0 + 0.001 * (c->calls % 3)) : c->calls;
    return TSR_SUCCESS;
}

static void repeat_keeps_its_bounds(void **state) {
    (void)state;
    double v[10];
    int n = 0;
    counter c = {0, 0, 0};
    TH_ASSERT_OK(tsr_repeat(count_call, &c, 0.0, 3, 10, 0, v, &n)); /* no time budget: the minimum */
    assert_int_equal(n, 3);
    assert_int_equal(c.calls, 4); /* after one warm-up call, whose value is dropped */
    assert_true(v[0] == 2 && v[2] == 4);
    c = (counter){0, 0, 0};
    TH_ASSERT_OK(tsr_repeat(count_call, &c, 1e9, 3, 10, 0, v, &n)); /* endless budget: the maximum */
    assert_int_equal(n, 10);
    c = (counter){0, 3, 0};
    TH_ASSERT_STATUS(tsr_repeat(count_call, &c, 0.0, 5, 10, 0, v, &n), TSR_ERR_OPENCL);
    c = (counter){0, 1, 0};
    TH_ASSERT_STATUS(tsr_repeat(count_call, &c, 0.0, 5, 10, 0, v, &n), TSR_ERR_OPENCL); /* the warm-up's failure */
    assert_int_equal(n, 0);
    /* With a precision: steady values stop once the median's bounds have their confidence (8
     * values) and lie within 2%; values spread far (the call count) use the whole budget. */
    double w[20];
    c = (counter){0, 0, 1000.0};
    TH_ASSERT_OK(tsr_repeat(count_call, &c, 1e9, 3, 20, 0.02, w, &n));
    assert_int_equal(n, 8);
    c = (counter){0, 0, 0};
    TH_ASSERT_OK(tsr_repeat(count_call, &c, 1e9, 3, 20, 0.02, w, &n));
    assert_int_equal(n, 20);
    assert_false(tsr_quantile_known(w, 7, 0.5, 1.0, v)); /* too few values for the confidence */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exhaustive_finds_the_optimum),
        cmocka_unit_test(evaluation_budgets_are_kept),
        cmocka_unit_test(replayed_seconds_budgets_are_kept),
        cmocka_unit_test(slow_runs_end_at_the_budget),
        cmocka_unit_test(strategies_are_reproducible_from_the_seed),
        cmocka_unit_test(easy_landscapes_are_solved),
        cmocka_unit_test(normalized_points_outside_the_space),
        cmocka_unit_test(abandoned_and_failed_candidates_score_zero),
        cmocka_unit_test(slower_candidates_stop_early_unvalidated),
        cmocka_unit_test(candidates_stop_once_their_rank_is_known),
        cmocka_unit_test(a_close_runner_up_duels_the_best),
        cmocka_unit_test(other_implementations_duel_the_best),
        cmocka_unit_test(the_entry_in_use_is_measured_fully),
        cmocka_unit_test(fast_but_wrong_never_wins),
        cmocka_unit_test(duels_end_early_only_when_clear),
        cmocka_unit_test(compiling_ahead_changes_no_search),
        cmocka_unit_test(annealing_guesses_the_likelier_branch),
        cmocka_unit_test(compiling_ahead_stops_cleanly),
        cmocka_unit_test(compiling_ahead_survives_broken_workers),
        cmocka_unit_test(slow_devices_measure_smaller_problems),
        cmocka_unit_test(stats_summarize_measurements),
        cmocka_unit_test(quantile_bounds_widen_with_few_values),
        cmocka_unit_test(repeat_keeps_its_bounds),
    };
    return TH_RUN(tests);
}
