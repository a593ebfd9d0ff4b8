/* Best-first hill climbing on the index grid: always work on the best configuration whose
 * one-step neighbours (each parameter to its next legal value up or down) are not all tried
 * yet; a better neighbour takes over at once. Tuning parameters mostly act smoothly and
 * separately, so this walks from the default to the nearby optimum in a handful of
 * evaluations; when every measured configuration is exhausted it restarts at a random one. */
#include "tuner.h"

/* The best measured configuration with untried neighbours; -1 when none. */
static int next_center(const tsr_search *search) {
    int center = -1;
    for (int i = 0; i < search->nseen; ++i)
        if (!search->seen[i].expanded && search->seen[i].score > 0 &&
            (center < 0 || search->seen[i].score > search->seen[center].score))
            center = i;
    return center;
}

/* An untried one-step neighbour of `point` (illegal values are stepped over). */
static bool untried_neighbour(const tsr_search *search, const tsr_point *point, tsr_config *config) {
    for (int p = 0; p < search->space->nparams; ++p)
        for (int step = 1; step >= -1; step -= 2) {
            tsr_point next = *point;
            bool ok = false;
            do {
                next.idx[p] += step;
            } while (next.idx[p] >= 0 && next.idx[p] < search->space->nvalues[p] &&
                     !(ok = tsr_search_legal(search, &next, config)));
            if (ok && !tsr_search_seen(search, config)) return true;
        }
    return false;
}

/* If `next` is no better than the center, the center's next untried neighbours follow it. */
static int climb_predict(tsr_search *search, const tsr_config *next, tsr_config *out, int max) {
    int center = next_center(search);
    tsr_point point;
    if (center < 0 || !tsr_space_point(search->space, &search->seen[center].config, &point)) return 0;
    tsr_config excluded[TUNE_MAX_AHEAD + 1] = {*next};
    uint64_t saved;
    tsr_search_predict_begin(search, excluded, 1, &saved);
    int n = 0;
    while (n < max && n < TUNE_MAX_AHEAD && untried_neighbour(search, &point, &out[n])) {
        excluded[search->nexcluded++] = out[n];
        ++n;
    }
    tsr_search_predict_end(search, saved);
    return n;
}

void tsr_strategy_climb(tsr_search *search) {
    search->predict = climb_predict;
    while (tsr_search_budget_left(search)) {
        int center = next_center(search);
        tsr_config config;
        tsr_point point;
        bool found = center >= 0 && tsr_space_point(search->space, &search->seen[center].config, &point) &&
                     untried_neighbour(search, &point, &config);
        if (center >= 0 && !found) { /* nothing left around it */
            search->seen[center].expanded = true;
            continue;
        }
        if (!found && !tsr_search_propose(search, &config)) break;
        tsr_search_evaluate(search, &config);
    }
    search->predict = NULL;
}
