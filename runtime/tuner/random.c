/* Random search: uniform samples of legal configurations without repetition. */
#include "tuner.h"

/* The next draws, exactly: the proposals after `next` from the same random state. */
static int random_predict(tsr_search *search, const tsr_config *next, tsr_config *out, int max) {
    tsr_config excluded[TUNE_MAX_AHEAD + 1] = {*next};
    uint64_t saved;
    tsr_search_predict_begin(search, excluded, 1, &saved);
    int n = 0;
    while (n < max && n < TUNE_MAX_AHEAD && tsr_search_propose(search, &out[n])) {
        excluded[search->nexcluded++] = out[n];
        ++n;
    }
    tsr_search_predict_end(search, saved);
    return n;
}

void tsr_strategy_random(tsr_search *search) {
    tsr_config config;
    search->predict = random_predict;
    while (tsr_search_budget_left(search) && tsr_search_propose(search, &config)) tsr_search_evaluate(search, &config);
    search->predict = NULL;
}
