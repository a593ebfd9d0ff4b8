/* The record of a group call's tiles (what tsr_group_last_stats lists), and what a failed call
 * wrote (device groups: group.h). */
#include "group.h"

#include <stdlib.h>
#include <string.h>

size_t tsr_grp_record_tile(worker *w, size_t first, size_t count, enum tile_state state) {
    tsr_device_group *g = w->group;
    size_t index = SIZE_MAX;
    pthread_mutex_lock(&w->schedule->lock);
    if (g->ntiles == g->tiles_cap) {
        size_t cap = g->tiles_cap ? 2 * g->tiles_cap : 64;
        tsr_group_tile *grown = realloc(g->tiles, cap * sizeof *grown);
        if (grown) g->tiles = grown;
        unsigned char *states = grown ? realloc(g->tile_state, cap) : NULL;
        if (states) g->tile_state = states, g->tiles_cap = cap;
    }
    if (g->ntiles < g->tiles_cap) {
        index = g->ntiles++;
        g->tiles[index] = (tsr_group_tile){w->index, first, count};
        g->tile_state[index] = (unsigned char)state;
    } else {
        g->tiles_lost = true;
    }
    pthread_mutex_unlock(&w->schedule->lock);
    return index;
}

void tsr_grp_set_tile_state(worker *w, size_t index, enum tile_state state) {
    if (index == SIZE_MAX) return;
    pthread_mutex_lock(&w->schedule->lock);
    w->group->tile_state[index] = (unsigned char)state;
    pthread_mutex_unlock(&w->schedule->lock);
}

static int by_first(const void *a, const void *b) {
    const size_t x = ((const size_t *)a)[0], y = ((const size_t *)b)[0];
    return x < y ? -1 : x > y;
}

/* The units of tiles in `state` as merged ranges "0-63, 128-191" into out; false when there are none. */
static bool describe_ranges(const tsr_device_group *g, enum tile_state state, char *out, size_t size) {
    size_t count = 0;
    size_t(*r)[2] = malloc((g->ntiles ? g->ntiles : 1) * sizeof *r);
    if (!r) {
        snprintf(out, size, "(out of host memory listing them)");
        return true;
    }
    for (size_t t = 0; t < g->ntiles; t++)
        if (g->tile_state[t] == state) r[count][0] = g->tiles[t].first, r[count++][1] = g->tiles[t].first + g->tiles[t].count;
    qsort(r, count, sizeof *r, by_first);
    size_t used = 0, ranges = 0;
    out[0] = '\0';
    for (size_t i = 0; i < count;) {
        size_t lo = r[i][0], hi = r[i][1];
        for (i++; i < count && r[i][0] <= hi; i++)
            hi = r[i][1] > hi ? r[i][1] : hi;
        if (used + 48 < size)
            used += (size_t)snprintf(out + used, size - used, "%s%zu-%zu", ranges ? ", " : "", lo, hi - 1);
        else if (used + 4 < size && !strstr(out, "..."))
            used += (size_t)snprintf(out + used, size - used, ", ...");
        ranges++;
    }
    free(r);
    return count > 0;
}

void tsr_grp_describe_writes(const tsr_device_group *g, const job *j, char *out, size_t size) {
    if (g->tiles_lost) {
        snprintf(out, size, "the record of its tiles was lost (out of host memory): any of %s's %s may be written",
                 j->output, j->units_word);
        return;
    }
    char written[400], maybe[400];
    bool any_written = describe_ranges(g, TILE_WRITTEN, written, sizeof written);
    bool any_maybe = describe_ranges(g, TILE_MAYBE, maybe, sizeof maybe);
    if (!any_written && !any_maybe) {
        snprintf(out, size, "%s was not written (none of its %s)", j->output, j->units_word);
        return;
    }
    snprintf(out, size, "%s of %s written: %s%s%s%s; every other %s of %s is as it was", j->units_word, j->output,
             any_written ? written : "none", any_maybe ? "; " : "", any_maybe ? "may be partly written: " : "",
             any_maybe ? maybe : "", j->unit_word, j->output);
}
