/* Simulated annealing on the index grid: a neighbour moves one parameter one step (or,
 * sometimes, anywhere in its range); worse moves are accepted with a probability that
 * shrinks as the budget runs out. Starts at search->start (the best of the default and seeds). */
#include "tuner.h"

#include <math.h>

typedef struct anneal_state {
    tsr_point cur;
} anneal_state;

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

/* Most candidates are worse than the current point and rejected: then the acceptance test has
 * drawn one number and the next neighbour is drawn around the same point. Exactly what the
 * search asks for next in that case, and, deeper, if those are rejected too. */
static int anneal_predict(tsr_search *search, const tsr_config *next, tsr_config *out, int max) {
    const anneal_state *st = search->predict_ctx;
    tsr_config excluded[TUNE_MAX_AHEAD + 1] = {*next};
    uint64_t saved;
    tsr_search_predict_begin(search, excluded, 1, &saved);
    int n = 0;
    while (n < max && n < TUNE_MAX_AHEAD) {
        (void)tsr_rng_unit(search->rng); /* the acceptance test of the one before */
        tsr_point p;
        if (!neighbour(search, &st->cur, &p, &out[n])) break;
        excluded[search->nexcluded++] = out[n];
        ++n;
    }
    tsr_search_predict_end(search, saved);
    return n;
}

void tsr_strategy_anneal(tsr_search *search) {
    const tsr_space *space = search->space;
    uint64_t *rng = search->rng;
    anneal_state st;
    tsr_config config = search->start;
    double cur_score = search->start_score;
    if (!tsr_space_point(space, &search->start, &st.cur)) {
        if (!tsr_search_budget_left(search) || !tsr_search_propose(search, &config)) return;
        tsr_space_point(space, &config, &st.cur);
        cur_score = tsr_search_evaluate(search, &config);
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
        tsr_point next;
        if (!neighbour(search, &st.cur, &next, &config)) { /* the neighbourhood is exhausted: restart somewhere new */
            if (!tsr_search_propose(search, &config)) break;
            tsr_space_point(space, &config, &next);
        }
        double score = tsr_search_evaluate(search, &config);
        if (score <= 0) continue;
        if (score > cur_score || cur_score <= 0 ||
            tsr_rng_unit(rng) < exp((score - cur_score) / (cur_score * temperature))) {
            st.cur = next;
            cur_score = score;
        }
    }
    search->predict = NULL;
    search->predict_ctx = NULL;
}
