/* Configuration text (parse, format) and the wrappers through which generic code reaches the
 * op hooks. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tsr_config_format(const tsr_op *op, const tsr_config *config, char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int p = 0; p < op->nparams && used < size; ++p) {
        int n = snprintf(out + used, size - used, "%s%s=%d", p ? " " : "", op->params[p].name, config->values[p]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

int tsr_op_class_index(const tsr_op *op, const char *problem_class) {
    for (int i = 0; op->classes[i]; ++i)
        if (strcmp(op->classes[i], problem_class) == 0) return i;
    return -1;
}

tsr_status tsr_config_parse(const tsr_op *op, const char *text, const char *what, tsr_config *config) {
    char buf[512];
    /* A truncated override would silently run another configuration than the one asked for. */
    size_t len = strlen(text);
    if (len >= sizeof buf)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s is %zu characters long; at most %zu are accepted", what, len,
                        sizeof buf - 1);
    tsr_strlcpy(buf, text, sizeof buf);
    char *save = NULL;
    for (char *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: '%s' is not NAME=VALUE", what, tok);
        *eq = '\0';
        int p = 0;
        while (p < op->nparams && strcmp(op->params[p].name, tok) != 0) ++p;
        if (p == op->nparams) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: op %s has no parameter '%s'", what, op->name, tok);
        char *end = NULL;
        long v = strtol(eq + 1, &end, 10);
        bool allowed = false;
        for (int i = 0; end != eq + 1 && *end == '\0' && i < op->params[p].nvalues; ++i)
            allowed |= op->params[p].values[i] == v;
        if (!allowed) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: %s=%s is not in the parameter space", what, tok, eq + 1);
        config->values[p] = (int)v;
    }
    return TSR_SUCCESS;
}

void tsr_op_normalize(const tsr_op *op, tsr_config *config) {
    if (op->normalize) op->normalize(config);
}

int tsr_op_seeds(const tsr_op *op, const tsr_device *device, const char *problem_class, tsr_config *seeds, int max) {
    return op->tuning_seeds ? op->tuning_seeds(device, problem_class, seeds, max) : 0;
}

void tsr_op_default_config(const tsr_op *op, const tsr_device *device, const char *problem_class, tsr_config *config) {
    op->default_config(device, problem_class, config);
}
