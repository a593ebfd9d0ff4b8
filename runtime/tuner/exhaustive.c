/* Exhaustive search: every legal configuration of the space in order, until the budget ends. */
#include "tuner.h"

#include <string.h>

void tsr_strategy_exhaustive(tsr_search *search) {
    tsr_point point;
    memset(&point, 0, sizeof point);
    do {
        tsr_config config;
        if (!tsr_search_legal(search, &point, &config) || tsr_search_seen(search, &config)) continue;
        if (!tsr_search_budget_left(search)) return;
        tsr_search_evaluate(search, &config);
    } while (tsr_space_next(search->space, &point));
}
