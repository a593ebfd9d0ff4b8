/* The op table, configuration text (parse, format) and where a launch gets its configuration. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const tsr_op *const tsr_ops[] = {&tsr_op_gemm, &tsr_op_gelu, &tsr_op_conv, &tsr_op_attention, NULL};

const char *const *tsr_op_names(void) {
    static const char *names[TSR_MAX_PARAMS + 1];
    static bool filled;
    if (!filled) {
        int n = 0;
        for (const tsr_op *const *op = tsr_ops; *op && n < TSR_MAX_PARAMS; ++op) names[n++] = (*op)->name;
        names[n] = NULL;
        filled = true;
    }
    return names;
}

const tsr_op *tsr_find_op(const char *name) {
    for (const tsr_op *const *op = tsr_ops; *op; ++op)
        if (strcmp((*op)->name, name) == 0) return *op;
    return NULL;
}

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

const char *const *tsr_op_classes(const char *op_name) {
    const tsr_op *op = op_name ? tsr_find_op(op_name) : NULL;
    return op ? op->classes : NULL;
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

/* The configuration and its origin for a problem class; `problem` (may be NULL) only refines
 * the legality check. */
static tsr_status op_config_info(tsr_device *dev, const tsr_op *op, const char *cls, const void *problem,
                                 tsr_config *config, tsr_config_info *info) {
    char var[64];
    snprintf(var, sizeof var, "TSR_CONFIG_%s", op->name);
    for (char *c = var; *c; ++c) *c = (char)toupper((unsigned char)*c);
    const char *env = getenv(var);
    if (!env || !*env) return tsr_resolve_config(dev, op, cls, config, info);
    tsr_op_default_config(op, dev, cls, config);
    tsr_status st = tsr_config_parse(op, env, var, config);
    if (st != TSR_SUCCESS) return st;
    tsr_op_normalize(op, config);
    if (!op->config_ok(dev, problem, config)) {
        char desc[256];
        tsr_config_format(op, config, desc, sizeof desc);
        return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: configuration '%s' is not legal on device '%s'", var, desc,
                        dev->info.name);
    }
    if (info) {
        memset(info, 0, sizeof *info);
        tsr_strlcpy(info->op, op->name, sizeof info->op);
        tsr_strlcpy(info->problem_class, cls, sizeof info->problem_class);
        tsr_strlcpy(info->used_class, cls, sizeof info->used_class);
        tsr_config_format(op, config, info->config, sizeof info->config);
        info->source = TSR_CONFIG_ENV_OVERRIDE;
        snprintf(info->origin, sizeof info->origin, "$%s over the class default", var);
    }
    return TSR_SUCCESS;
}

tsr_status tsr_op_config(tsr_device *dev, const tsr_op *op, const void *problem, tsr_config *config) {
    return op_config_info(dev, op, problem ? op->problem_class(problem) : op->classes[0], problem, config, NULL);
}

tsr_status tsr_config_lookup(tsr_device *dev, const char *op_name, const char *problem_class, tsr_config_info *info) {
    tsr_clear_diagnostics();
    if (!dev || !op_name || !info) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_config_lookup: device, op and info must be set");
    const tsr_op *op = tsr_find_op(op_name);
    if (!op) return tsr_fail(TSR_ERR_NOT_FOUND, "no op named '%s'", op_name);
    if (!problem_class) problem_class = op->classes[0];
    if (tsr_op_class_index(op, problem_class) < 0)
        return tsr_fail(TSR_ERR_NOT_FOUND, "op %s has no problem class '%s'", op_name, problem_class);
    tsr_config config;
    return op_config_info(dev, op, problem_class, NULL, &config, info);
}

tsr_status tsr_run_demo(tsr_device *dev, const char *op_name, char *summary, size_t size) {
    tsr_clear_diagnostics();
    if (!dev || !op_name || !summary || size == 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_run_demo: device, op_name and summary must be set");
    summary[0] = '\0';
    const tsr_op *op = tsr_find_op(op_name);
    if (!op) return tsr_fail(TSR_ERR_NOT_FOUND, "no op named '%s'", op_name);
    return op->demo(dev, summary, size);
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
