/* Shares and rates of a group call: the weights it starts from and each device's next tile
 * (device groups: group.h). */
#include "group.h"

#include <stdlib.h>
#include <string.h>

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

bool tsr_grp_schedule_next(schedule *s, size_t d, bool may_steal, size_t *first, size_t *count) {
    bool got = false;
    pthread_mutex_lock(&s->lock);
    if (s->stop || s->rate[d] <= 0) goto done;
    if (s->lo[d] < s->hi[d]) {
        size_t f = s->lo[d], c = min_size(s->chunk[d], s->hi[d] - f);
        if (s->boundary) c = min_size(c, s->boundary - f % s->boundary);
        s->lo[d] += c;
        *first = f, *count = c, got = true;
        goto done;
    }
    if (!may_steal) goto done;
    size_t victim = s->count;
    double longest = 0;
    for (size_t v = 0; v < s->count; v++) {
        double left = s->rate[v] > 0 ? (double)(s->hi[v] - s->lo[v]) / s->rate[v] : 0;
        if (left > longest) longest = left, victim = v;
    }
    if (victim == s->count) goto done;
    /* take the part that makes both finish together: x / rate[d] = (left - x) / rate[victim] */
    size_t left = s->hi[victim] - s->lo[victim];
    size_t take = (size_t)((double)left * s->rate[d] / (s->rate[d] + s->rate[victim]));
    if (take > s->chunk[d]) take = s->chunk[d];
    if (s->align > 1 && take > s->align) take = take / s->align * s->align;
    if (!take) goto done;
    size_t end = s->hi[victim], f = end - take;
    if (s->boundary) {
        size_t start_of_entry = (end - 1) / s->boundary * s->boundary;
        if (f < start_of_entry) f = start_of_entry;
    }
    if ((double)(end - f) / s->rate[d] >= longest) goto done; /* its owner finishes sooner */
    s->hi[victim] = f;
    *first = f, *count = end - f, got = true;
done:
    pthread_mutex_unlock(&s->lock);
    return got;
}

void tsr_grp_schedule_stop(schedule *s) {
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------------ weights */

learned_rates *tsr_grp_learned_for(tsr_device_group *g, const char *key, bool create) {
    for (size_t i = 0; i < g->nlearned; i++)
        if (!strcmp(g->learned[i].key, key)) return &g->learned[i];
    if (!create) return NULL;
    learned_rates *slot;
    if (g->nlearned < MAX_RATE_KEYS) {
        slot = &g->learned[g->nlearned++];
        slot->gflops = calloc(g->count, sizeof(double));
        if (!slot->gflops) {
            g->nlearned--;
            return NULL;
        }
    } else { /* full: reuse the oldest */
        slot = &g->learned[g->next_evict];
        g->next_evict = (g->next_evict + 1) % MAX_RATE_KEYS;
        memset(slot->gflops, 0, g->count * sizeof(double));
    }
    snprintf(slot->key, sizeof slot->key, "%s", key);
    return slot;
}

void tsr_grp_choose_weights(tsr_device_group *g, const char *key, const double *tuned, double *weights) {
    if (g->weights) {
        memcpy(weights, g->weights, g->count * sizeof(double));
        g->weights_from = "given";
        return;
    }
    learned_rates *l = tsr_grp_learned_for(g, key, false);
    bool all = l != NULL;
    for (size_t d = 0; all && d < g->count; d++)
        all = l->gflops[d] > 0;
    if (all) {
        memcpy(weights, l->gflops, g->count * sizeof(double));
        g->weights_from = "measured";
        return;
    }
    all = tuned != NULL;
    for (size_t d = 0; all && d < g->count; d++)
        all = tuned[d] > 0;
    if (all) {
        memcpy(weights, tuned, g->count * sizeof(double));
        g->weights_from = "tuning database";
        return;
    }
    for (size_t d = 0; d < g->count; d++)
        weights[d] = 1;
    g->weights_from = "equal";
}
