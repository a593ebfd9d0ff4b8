/* Simulated annealing on the index grid: a neighbour moves one parameter one step (or,
 * sometimes, anywhere in its range); worse moves are accepted with a probability that
 * shrinks as the budget runs out. Starts at search->start (the best of the default and seeds). */
#include "tuner.h"

#include <math.h>

enum { ANNEAL_HISTORY = 8 };

typedef struct anneal_state {
    tsr_point cur;
    double cur_score;
    tsr_point pending;             /* the candidate being evaluated: the current point if accepted */
    double temperature;            /* the acceptance test's, at the last step */
    double ratio[ANNEAL_HISTORY];  /* the last candidates' scores over the current point's then */
    int nratio;                    /* how many of ratio[] are filled (a ring once full) */
} anneal_state;

/* How likely the next candidate is to be accepted: the acceptance test at today's temperature
 * applied to the last candidates' score ratios (each 1 where the candidate was better). The search
 * never reads it: it only picks which branch the workers are given. */
static double acceptance_odds(const anneal_state *st) {
    int n = st->nratio < ANNEAL_HISTORY ? st->nratio : ANNEAL_HISTORY;
    if (n == 0) return 0.5;
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += st->ratio[i] >= 1 ? 1.0 : exp((st->ratio[i] - 1) / st->temperature);
    return sum / n;
}

/* A legal neighbour of `cur` not evaluated yet, drawn from search->rng; false after 200 draws
 * found none. */
static bool neighbour(tsr_search *search, const tsr_point *cur, tsr_point *next, tsr_config *config) {
    const tsr_space *space = search->space;
    uint64_t *rng = search->rng;
    for (int attempt = 0; attempt < 200; ++attempt) {
        *next = *cur;
        int moves = 1 + (tsr_rng_unit(rng) < 0.15); /* sometimes two parameters at once */
        for (int m = 0; m < moves; ++m) {
            int p = (int)(tsr_rng_next(rng) % (uint64_t)space->nparams);
            int n = space->nvalues[p];
            if (n < 2) continue;
            if (tsr_rng_unit(rng) < 0.1) next->idx[p] = (int)(tsr_rng_next(rng) % (uint64_t)n);
            else next->idx[p] = next->idx[p] + ((tsr_rng_next(rng) & 1) ? 1 : -1);
            if (next->idx[p] < 0) next->idx[p] = 1;
            if (next->idx[p] >= n) next->idx[p] = n - 2;
        }
        if (tsr_search_legal(search, next, config) && !tsr_search_seen(search, config)) return true;
    }
    return false;
}

/* What the search asks for next depends on the candidate's fate: accepted (it becomes the current
 * point) or rejected (the next neighbour is drawn around the same point). Either way the
 * acceptance test has drawn one number first. The workers get the branch the recent candidates
 * make likelier (late in a search, at a low temperature, most are rejected; early on a quiet
 * machine most land within a few percent and are accepted), and, deeper, neighbours of the same
 * point as if those were rejected too. */
static int anneal_predict(tsr_search *search, const tsr_config *next, tsr_config *out, int max) {
    const anneal_state *st = search->predict_ctx;
    /* (a current point that scored nothing accepts whatever scores; one that fails is rejected) */
    tsr_point base = st->cur_score <= 0 || acceptance_odds(st) > 0.5 ? st->pending : st->cur;
    tsr_config excluded[TUNE_MAX_AHEAD + 1] = {*next};
    uint64_t saved;
    tsr_search_predict_begin(search, excluded, 1, &saved);
    int n = 0;
    while (n < max && n < TUNE_MAX_AHEAD) {
        (void)tsr_rng_unit(search->rng); /* the acceptance test of the one before */
        tsr_point p;
        if (!neighbour(search, &base, &p, &out[n])) break;
        excluded[search->nexcluded++] = out[n];
        ++n;
    }
    tsr_search_predict_end(search, saved);
    return n;
}

void tsr_strategy_anneal(tsr_search *search) {
    const tsr_space *space = search->space;
    uint64_t *rng = search->rng;
    anneal_state st = {.temperature = 0.085, .cur_score = search->start_score};
    tsr_config config = search->start;
    if (!tsr_space_point(space, &search->start, &st.cur)) {
        if (!tsr_search_budget_left(search) || !tsr_search_propose(search, &config)) return;
        tsr_space_point(space, &config, &st.cur);
        st.cur_score = tsr_search_evaluate(search, &config);
    }
    search->predict = anneal_predict;
    search->predict_ctx = &st;
    double t_begin = search->backend.now(search->backend.ctx);
    while (tsr_search_budget_left(search)) {
        double elapsed = search->backend.now(search->backend.ctx) - t_begin;
        double progress = fmin(1.0, elapsed / fmax(search->class_budget_s, 1e-3));
        if (search->max_evaluations)
            progress = fmax(progress, (double)search->result->evaluated / search->max_evaluations);
        double temperature = 0.08 * (1.0 - progress) + 0.005;
        st.temperature = temperature;
        tsr_point next;
        if (!neighbour(search, &st.cur, &next, &config)) { /* the neighbourhood is exhausted: restart somewhere new */
            if (!tsr_search_propose(search, &config)) break;
            tsr_space_point(space, &config, &next);
        }
        st.pending = next;
        double score = tsr_search_evaluate(search, &config);
        /* The test always draws its number, better, worse or failed, so every branch starts alike. */
        double draw = tsr_rng_unit(rng);
        if (score <= 0) continue;
        double cur_score = st.cur_score;
        if (cur_score > 0) st.ratio[st.nratio++ % ANNEAL_HISTORY] = score / cur_score;
        if (score > cur_score || cur_score <= 0 || draw < exp((score - cur_score) / (cur_score * temperature))) {
            st.cur = next;
            st.cur_score = score;
        }
    }
    search->predict = NULL;
    search->predict_ctx = NULL;
}
