/* Random search: uniform samples of legal configurations without repetition. */
#include "tuner.h"

void tsr_strategy_random(tsr_search *search) {
    tsr_config config;
    while (tsr_search_budget_left(search) && tsr_search_propose(search, &config)) tsr_search_evaluate(search, &config);
}
