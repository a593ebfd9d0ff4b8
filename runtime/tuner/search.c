/* The search object strategies work through: budgets, what was seen, random proposals, the
 * best so far and progress reports. */
#include "tuner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t tsr_rng_next(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 2685821657736338717ull;
}

double tsr_rng_unit(uint64_t *state) { return (double)(tsr_rng_next(state) >> 11) * (1.0 / 9007199254740992.0); }

bool tsr_search_time_left(const tsr_search *search) {
    return search->backend.now(search->backend.ctx) < search->class_start + search->class_budget_s;
}

bool tsr_search_budget_left(const tsr_search *search) {
    if (search->max_evaluations && search->result->evaluated >= search->max_evaluations) return false;
    return tsr_search_time_left(search);
}

bool tsr_search_seen(const tsr_search *search, const tsr_config *config) {
    for (int i = 0; i < search->nseen; ++i)
        if (memcmp(&search->seen[i].config, config, sizeof *config) == 0) return true;
    for (int i = 0; i < search->nexcluded; ++i)
        if (memcmp(&search->excluded[i], config, sizeof *config) == 0) return true;
    return false;
}

void tsr_search_predict_begin(tsr_search *search, const tsr_config *excluded, int n, uint64_t *saved_rng) {
    *saved_rng = *search->rng;
    search->excluded = excluded;
    search->nexcluded = n;
}

void tsr_search_predict_end(tsr_search *search, uint64_t saved_rng) {
    *search->rng = saved_rng;
    search->excluded = NULL;
    search->nexcluded = 0;
}

bool tsr_search_legal(const tsr_search *search, const tsr_point *point, tsr_config *config) {
    return tsr_space_legal(search->op, search->device, search->space, point, config);
}

bool tsr_search_propose(tsr_search *search, tsr_config *config) {
    for (int attempt = 0; attempt < 2000; ++attempt) {
        tsr_point point;
        for (int p = 0; p < search->space->nparams; ++p)
            point.idx[p] = (int)(tsr_rng_next(search->rng) % (uint64_t)search->space->nvalues[p]);
        if (tsr_search_legal(search, &point, config) && !tsr_search_seen(search, config)) return true;
    }
    return false;
}

const tsr_evaluated *tsr_search_best(const tsr_search *search) {
    const tsr_evaluated *best = NULL;
    for (int i = 0; i < search->nseen; ++i)
        if (search->seen[i].validated && (!best || search->seen[i].score > best->score)) best = &search->seen[i];
    return best;
}

void tsr_search_report(const tsr_search *search) {
    const tsr_tune_options *opt = search->options;
    if (!opt || !opt->progress) return;
    const tsr_evaluated *best = tsr_search_best(search);
    int evaluated = search->result->evaluated;
    double elapsed = search->backend.now(search->backend.ctx) - search->class_start;
    tsr_tune_progress p = {.op = search->op->name,
                           .problem_class = search->problem_class,
                           .evaluated = evaluated,
                           .planned = search->max_evaluations,
                           .best_gflops = best ? fmax(0.0, best->score) : 0,
                           .unit = search->op->rate_unit ? search->op->rate_unit : "GFLOP/s",
                           .elapsed_s = elapsed,
                           .eta_s = fmax(0.0, search->class_budget_s - elapsed) + search->remaining_after_s};
    if (search->max_evaluations > 0 && evaluated > 0) {
        double per = elapsed / evaluated;
        p.eta_s = fmin(p.eta_s, per * (search->max_evaluations - evaluated) + search->remaining_after_s);
    }
    opt->progress(&p, opt->user);
}

static int by_score_desc(const void *a, const void *b) {
    const tsr_evaluated *p = a, *q = b;
    if (p->validated != q->validated) return p->validated ? -1 : 1;
    return (p->score < q->score) - (p->score > q->score);
}

void tsr_search_rank(tsr_search *search) {
    if (search->nseen > 0) qsort(search->seen, (size_t)search->nseen, sizeof *search->seen, by_score_desc);
}

void tsr_search_free(tsr_search *search) {
    free(search->seen);
    search->seen = NULL;
    search->nseen = search->capseen = 0;
}
