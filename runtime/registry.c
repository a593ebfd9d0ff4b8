/* The op table and the public entry points that take an op by name: the top of the runtime's
 * layers, since the table names every op's descriptor while the ops call the generic code. */
#include "internal.h"

#include <string.h>

const tsr_op *const tsr_ops[] = {&tsr_op_gemm, &tsr_op_gelu, &tsr_op_conv, &tsr_op_attention, &tsr_op_layernorm,
                                  &tsr_op_pool2d, NULL};

enum { MAX_OPS = 64 };
static const char *op_names[MAX_OPS + 1];
static pthread_once_t op_names_once = PTHREAD_ONCE_INIT;

static void fill_op_names(void) {
    int n = 0;
    for (const tsr_op *const *op = tsr_ops; *op && n < MAX_OPS; ++op) op_names[n++] = (*op)->name;
    op_names[n] = NULL;
}

const char *const *tsr_op_names(void) {
    pthread_once(&op_names_once, fill_op_names); /* callers may come from several threads at once */
    return op_names;
}

const tsr_op *tsr_find_op(const char *name) {
    for (const tsr_op *const *op = tsr_ops; *op; ++op)
        if (strcmp((*op)->name, name) == 0) return *op;
    return NULL;
}

const char *const *tsr_op_classes(const char *op_name) {
    const tsr_op *op = op_name ? tsr_find_op(op_name) : NULL;
    return op ? tsr_op_class_list(op) : NULL;
}

tsr_status tsr_config_lookup(tsr_device *dev, const char *op_name, const char *problem_class, tsr_config_info *info) {
    tsr_clear_diagnostics();
    if (!dev || !op_name || !info) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_config_lookup: device, op and info must be set");
    const tsr_op *op = tsr_find_op(op_name);
    if (!op) return tsr_fail(TSR_ERR_NOT_FOUND, "no op named '%s'", op_name);
    if (!problem_class) problem_class = op->classes[0];
    if (tsr_op_class_index(op, problem_class) < 0)
        return tsr_fail(TSR_ERR_NOT_FOUND, "op %s has no problem class '%s'", op_name, problem_class);
    return tsr_op_config_lookup(dev, op, problem_class, info);
}

tsr_status tsr_config_override(tsr_device *dev, const char *op_name, const char *config_text) {
    tsr_clear_diagnostics();
    if (!dev || !op_name) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_config_override: device and op must be set");
    const tsr_op *op = tsr_find_op(op_name);
    if (!op) return tsr_fail(TSR_ERR_NOT_FOUND, "no op named '%s'", op_name);
    return tsr_config_set_override(dev, op, config_text);
}

tsr_status tsr_run_demo(tsr_device *dev, const char *op_name, char *summary, size_t size) {
    tsr_clear_diagnostics();
    if (!dev || !op_name || !summary || size == 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_run_demo: device, op_name and summary must be set");
    summary[0] = '\0';
    const tsr_op *op = tsr_find_op(op_name);
    if (!op) return tsr_fail(TSR_ERR_NOT_FOUND, "no op named '%s'", op_name);
    return tsr_op_demo(dev, op, summary, size);
}
