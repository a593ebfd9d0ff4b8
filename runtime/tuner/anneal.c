/* Simulated annealing on the index grid: a neighbour moves one parameter one step (or,
 * sometimes, anywhere in its range); worse moves are accepted with a probability that
 * shrinks as the budget runs out. Starts at search->start (the best of the default and seeds). */
#include "tuner.h"

#include <math.h>

void tsr_strategy_anneal(tsr_search *search) {
    const tsr_space *space = search->space;
    uint64_t *rng = search->rng;
    tsr_point cur;
    tsr_config config = search->start;
    double cur_score = search->start_score;
    if (!tsr_space_point(space, &search->start, &cur)) {
        if (!tsr_search_propose(search, &config)) return;
        tsr_space_point(space, &config, &cur);
        cur_score = tsr_search_evaluate(search, &config);
    }
    double t_begin = search->backend.now(search->backend.ctx);
    while (tsr_search_budget_left(search)) {
        double elapsed = search->backend.now(search->backend.ctx) - t_begin;
        double progress = fmin(1.0, elapsed / fmax(search->class_budget_s, 1e-3));
        if (search->max_evaluations)
            progress = fmax(progress, (double)search->result->evaluated / search->max_evaluations);
        double temperature = 0.08 * (1.0 - progress) + 0.005;
        tsr_point next = cur;
        bool found = false;
        for (int attempt = 0; attempt < 200 && !found; ++attempt) {
            next = cur;
            int moves = 1 + (tsr_rng_unit(rng) < 0.15); /* sometimes two parameters at once */
            for (int m = 0; m < moves; ++m) {
                int p = (int)(tsr_rng_next(rng) % (uint64_t)space->nparams);
                int n = space->nvalues[p];
                if (n < 2) continue;
                if (tsr_rng_unit(rng) < 0.1) next.idx[p] = (int)(tsr_rng_next(rng) % (uint64_t)n);
                else next.idx[p] = next.idx[p] + ((tsr_rng_next(rng) & 1) ? 1 : -1);
                if (next.idx[p] < 0) next.idx[p] = 1;
                if (next.idx[p] >= n) next.idx[p] = n - 2;
            }
            found = tsr_search_legal(search, &next, &config) && !tsr_search_seen(search, &config);
        }
        if (!found) { /* the neighbourhood is exhausted: restart somewhere new */
            if (!tsr_search_propose(search, &config)) return;
            tsr_space_point(space, &config, &next);
        }
        double score = tsr_search_evaluate(search, &config);
        if (score <= 0) continue;
        if (score > cur_score || cur_score <= 0 ||
            tsr_rng_unit(rng) < exp((score - cur_score) / (cur_score * temperature))) {
            cur = next;
            cur_score = score;
        }
    }
}
