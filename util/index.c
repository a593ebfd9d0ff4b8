/* A string-keyed hash map (open addressing, XXH3). */
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct util_index_slot {
    char *key;
    size_t len;
    uint64_t hash;
    void *value;
};

static bool index_grow(util_index *ix) {
    size_t cap = ix->cap ? 2 * ix->cap : 64;
    struct util_index_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < ix->cap; ++i) {
        if (!ix->slots[i].key) continue;
        size_t j = (size_t)ix->slots[i].hash & (cap - 1);
        while (slots[j].key) j = (j + 1) & (cap - 1);
        slots[j] = ix->slots[i];
    }
    free(ix->slots);
    ix->slots = slots;
    ix->cap = cap;
    return true;
}

void **util_index_get(util_index *ix, const char *key, size_t len, bool *found) {
    *found = false;
    if (2 * (ix->count + 1) > ix->cap && !index_grow(ix)) return NULL; /* at most half full */
    uint64_t h = XXH3_64bits(key, len);
    size_t j = (size_t)h & (ix->cap - 1);
    for (; ix->slots[j].key; j = (j + 1) & (ix->cap - 1)) {
        struct util_index_slot *s = &ix->slots[j];
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) {
            *found = true;
            return &s->value;
        }
    }
    char *copy = malloc(len + 1);
    if (!copy) return NULL;
    memcpy(copy, key, len);
    copy[len] = '\0';
    ix->slots[j] = (struct util_index_slot){copy, len, h, NULL};
    ++ix->count;
    return &ix->slots[j].value;
}

void util_index_free(util_index *ix) {
    for (size_t i = 0; i < ix->cap; ++i) free(ix->slots[i].key);
    free(ix->slots);
    memset(ix, 0, sizeof *ix);
}
