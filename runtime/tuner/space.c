/* The tuner's search space: the values each parameter may take (the op's, optionally narrowed
 * by "NAME=v1,v2 ..."), points as value indices, and their legality. */
#define _GNU_SOURCE
#include "tuner.h"

#include <stdlib.h>
#include <string.h>

tsr_status tsr_space_make(const tsr_op *op, const char *restrict_to, tsr_space *space) {
    memset(space, 0, sizeof *space);
    space->nparams = op->nparams;
    for (int p = 0; p < op->nparams; ++p) {
        space->nvalues[p] = op->params[p].nvalues;
        memcpy(space->values[p], op->params[p].values, (size_t)op->params[p].nvalues * sizeof(int));
    }
    if (!restrict_to) return TSR_SUCCESS;
    tsr_status st = TSR_SUCCESS;
    char buf[512];
    tsr_strlcpy(buf, restrict_to, sizeof buf);
    char *cursor = buf, *name, *list;
    while (tsr_next_pair(&cursor, " ", &name, &list)) {
        if (!list) return tsr_fail(TSR_ERR_INVALID_ARG, "space: '%s' is not NAME=V1,V2,...", name);
        int p, n = 0;
        TSR_CHECK(st, tsr_param_lookup(op, name, "space", &p), done);
        char *vsave = NULL;
        for (char *v = strtok_r(list, ",", &vsave); v; v = strtok_r(NULL, ",", &vsave)) {
            int value;
            TSR_CHECK(st, tsr_param_value(op, p, v, "space", &value), done);
            if (n < TUNE_MAX_VALUES) space->values[p][n++] = value;
        }
        if (n == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "space: %s has no values", name);
        space->nvalues[p] = n;
    }
done:
    return st;
}

void tsr_space_config(const tsr_space *space, const tsr_point *point, tsr_config *config) {
    memset(config, 0, sizeof *config);
    for (int p = 0; p < space->nparams; ++p) config->values[p] = space->values[p][point->idx[p]];
}

bool tsr_space_point(const tsr_space *space, const tsr_config *config, tsr_point *point) {
    /* Every index is set, a value outside the space to the first: normalizing puts parameters an
     * implementation does not read at their declared default, which a narrowed space may leave
     * out, and a strategy that goes on from such a point must never index outside the space. */
    bool inside = true;
    for (int p = 0; p < space->nparams; ++p) {
        int found = -1;
        for (int i = 0; i < space->nvalues[p]; ++i)
            if (space->values[p][i] == config->values[p]) found = i;
        inside &= found >= 0;
        point->idx[p] = found >= 0 ? found : 0;
    }
    return inside;
}

bool tsr_space_next(const tsr_space *space, tsr_point *point) {
    for (int p = space->nparams - 1; p >= 0; --p) {
        if (++point->idx[p] < space->nvalues[p]) return true;
        point->idx[p] = 0;
    }
    return false;
}

bool tsr_space_legal(const tsr_op *op, const tsr_device *device, const tsr_space *space, const tsr_point *point,
                     tsr_config *config) {
    tsr_space_config(space, point, config);
    tsr_op_normalize(op, config);
    return op->config_ok(device, NULL, config);
}
