/* The op contract's generic side: configuration text (parse, format), problem classes with their
 * storage-type twins, built-in defaults, implementations, and the wrappers through which generic
 * code reaches the op hooks. Knows no op. */
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

/* ---- problem classes: the listed ones and their storage-type twins ---- */

enum { MAX_CLASSES = 128, CLASS_NAME = 32, CLASS_SHAPE = 128, MAX_STEPS = 4 };

/* An op's full class list, built on first use and kept for the life of the process. */
typedef struct class_list {
    const tsr_op *op;
    int nlisted, nclasses;
    const char *names[MAX_CLASSES + 1];
    char name[MAX_CLASSES][CLASS_NAME];
    char shape[MAX_CLASSES][CLASS_SHAPE];
    /* the smaller problems for slow devices (class_shapes_reduced), storage token appended */
    int nsteps[MAX_CLASSES];
    char step[MAX_CLASSES][MAX_STEPS][CLASS_SHAPE];
    char check[MAX_CLASSES][CLASS_SHAPE]; /* the second problem (class_shapes_check); "" when none */
    struct class_list *next;
} class_list;

static class_list *class_lists;
static pthread_mutex_t class_lists_lock = PTHREAD_MUTEX_INITIALIZER;

static void build_class_list(const tsr_op *op, class_list *l) {
    l->op = op;
    while (op->classes && op->classes[l->nlisted]) ++l->nlisted;
    const int types = op->class_storage == TSR_CLASSES_AS_LISTED ? 1 : TSR_DTYPE_COUNT;
    for (int t = 0; t < types; ++t)
        for (int c = 0; c < l->nlisted && l->nclasses < MAX_CLASSES; ++c, ++l->nclasses) {
            const tsr_dtype type = (tsr_dtype)t;
            snprintf(l->name[l->nclasses], CLASS_NAME, "%s%s", op->classes[c], tsr_dtype_class_suffix(&type, 1));
            l->names[l->nclasses] = l->name[l->nclasses];
            if (!op->class_shapes) continue;
            char token[32];
            tsr_dtype_spec_format(type, op->class_storage == TSR_CLASSES_PER_INPUT_TYPE ? TSR_F32 : type, token,
                                  sizeof token);
            snprintf(l->shape[l->nclasses], CLASS_SHAPE, "%s%s%s", op->class_shapes[c], *token ? " " : "", token);
            const char *check = op->class_shapes_check ? op->class_shapes_check[c] : NULL;
            if (check && *check)
                snprintf(l->check[l->nclasses], CLASS_SHAPE, "%s%s%s", check, *token ? " " : "", token);
            const char *steps = op->class_shapes_reduced ? op->class_shapes_reduced[c] : NULL;
            while (steps && *steps && l->nsteps[l->nclasses] < MAX_STEPS) {
                size_t len = strcspn(steps, ";");
                snprintf(l->step[l->nclasses][l->nsteps[l->nclasses]++], CLASS_SHAPE, "%.*s%s%s", (int)len, steps,
                         *token ? " " : "", token);
                steps += len + (steps[len] == ';');
            }
        }
    l->names[l->nclasses] = NULL;
}

static const class_list *class_list_of(const tsr_op *op) {
    pthread_mutex_lock(&class_lists_lock);
    class_list *l = class_lists;
    while (l && l->op != op) l = l->next;
    if (!l && (l = calloc(1, sizeof *l)) != NULL) {
        build_class_list(op, l);
        l->next = class_lists;
        class_lists = l;
    }
    pthread_mutex_unlock(&class_lists_lock);
    return l;
}

const char *const *tsr_op_class_list(const tsr_op *op) {
    static const char *const none[] = {NULL};
    const class_list *l = class_list_of(op);
    return l ? l->names : none;
}

int tsr_op_class_index(const tsr_op *op, const char *problem_class) {
    const char *const *names = tsr_op_class_list(op);
    for (int i = 0; names[i]; ++i)
        if (strcmp(names[i], problem_class) == 0) return i;
    return -1;
}

const char *tsr_op_class(const tsr_op *op, int listed, const tsr_dtype *types, size_t n) {
    const class_list *l = class_list_of(op);
    if (!l || listed < 0 || listed >= l->nlisted) return op->classes[0];
    int index = (op->class_storage == TSR_CLASSES_AS_LISTED ? 0 : tsr_dtype_class_group(types, n)) * l->nlisted + listed;
    return index < l->nclasses ? l->names[index] : op->classes[listed];
}

const char *tsr_op_class_shape(const tsr_op *op, const char *problem_class) {
    const class_list *l = class_list_of(op);
    int index = tsr_op_class_index(op, problem_class);
    return l && op->class_shapes && index >= 0 ? l->shape[index] : NULL;
}

int tsr_op_class_shape_steps(const tsr_op *op, const char *problem_class) {
    const class_list *l = class_list_of(op);
    int index = tsr_op_class_index(op, problem_class);
    return l && op->class_shapes && index >= 0 ? l->nsteps[index] : 0;
}

const char *tsr_op_class_shape_step(const tsr_op *op, const char *problem_class, int step) {
    if (step == 0) return tsr_op_class_shape(op, problem_class);
    const class_list *l = class_list_of(op);
    int index = tsr_op_class_index(op, problem_class);
    if (!l || !op->class_shapes || index < 0 || step < 0 || step > l->nsteps[index]) return NULL;
    return l->step[index][step - 1];
}

const char *tsr_op_class_check_shape(const tsr_op *op, const char *problem_class) {
    const class_list *l = class_list_of(op);
    int index = tsr_op_class_index(op, problem_class);
    return l && op->class_shapes && index >= 0 && l->check[index][0] ? l->check[index] : NULL;
}

const char *tsr_op_nearest_class(const tsr_op *op, const char *problem_class) {
    if (!op->nearest_class) return NULL;
    char base[CLASS_NAME];
    if (!tsr_dtype_class_base(problem_class, base, sizeof base)) return op->nearest_class(problem_class);
    const char *nearest = op->nearest_class(base);
    if (!nearest) return NULL;
    char twin[2 * CLASS_NAME];
    snprintf(twin, sizeof twin, "%s%s", nearest, problem_class + strlen(base));
    int index = tsr_op_class_index(op, twin);
    return index >= 0 ? tsr_op_class_list(op)[index] : NULL;
}

tsr_status tsr_op_launch(const tsr_op *op, tsr_device *device, const void *problem, const tsr_config *config,
                         cl_command_queue queue, cl_event *event) {
    const tsr_implementation *impl = tsr_op_implementation(op, config);
    if (!impl || !impl->launch) {
        char text[256];
        tsr_config_format(op, config, text, sizeof text);
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: configuration '%s' selects no implementation that launches", op->name,
                        text);
    }
    return impl->launch(device, problem, config, queue, event);
}

tsr_status tsr_config_parse(const tsr_op *op, const char *text, const char *what, tsr_config *config) {
    char buf[512];
    /* A truncated override would silently run another configuration than the one asked for. */
    size_t len = strlen(text);
    if (len >= sizeof buf)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s is %zu characters long; at most %zu are accepted", what, len,
                        sizeof buf - 1);
    tsr_strlcpy(buf, text, sizeof buf);
    char *cursor = buf, *name, *value;
    while (tsr_next_pair(&cursor, " ,", &name, &value)) {
        if (!value) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: '%s' is not NAME=VALUE", what, name);
        int p;
        tsr_status st = tsr_param_lookup(op, name, what, &p);
        if (st == TSR_SUCCESS) st = tsr_param_value(op, p, value, what, &config->values[p]);
        if (st != TSR_SUCCESS) return st;
    }
    return TSR_SUCCESS;
}

tsr_status tsr_param_lookup(const tsr_op *op, const char *name, const char *what, int *param) {
    *param = tsr_param_index(op, name);
    if (*param < 0) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: op %s has no parameter '%s'", what, op->name, name);
    return TSR_SUCCESS;
}

tsr_status tsr_param_value(const tsr_op *op, int param, const char *text, const char *what, int *value) {
    const tsr_param_def *def = &op->params[param];
    char *end = NULL;
    long v = strtol(text, &end, 10);
    bool allowed = false;
    for (int i = 0; end != text && *end == '\0' && i < def->nvalues; ++i) allowed |= def->values[i] == v;
    if (!allowed) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: %s=%s is not in the parameter space", what, def->name, text);
    *value = (int)v;
    return TSR_SUCCESS;
}

/* ---- parameters by name, built-in defaults and implementations ---- */

int tsr_param_index(const tsr_op *op, const char *name) {
    for (int p = 0; p < op->nparams; ++p)
        if (strcmp(op->params[p].name, name) == 0) return p;
    return -1;
}

void tsr_config_declared(const tsr_op *op, tsr_config *config) {
    memset(config, 0, sizeof *config);
    for (int p = 0; p < op->nparams; ++p) config->values[p] = op->params[p].default_value;
}

bool tsr_config_defines(const tsr_op *op, const tsr_config *config, char *out, size_t size) {
    if (size == 0) return false;
    size_t used = 0;
    out[0] = '\0';
    for (int p = 0; p < op->nparams; ++p) {
        if (op->params[p].kind != TSR_PARAM_DEFINE) continue;
        int n = snprintf(out + used, size - used, "%s-D%s=%d", used ? " " : "", op->params[p].name, config->values[p]);
        if (n < 0 || (size_t)n >= size - used) return false;
        used += (size_t)n;
    }
    return true;
}

/* A row of class X serves X's 16-bit classes too (X-f16, X-bf16): loads widen to fp32 before any
 * arithmetic, so the shapes that suit X suit them. */
/* A TSR_TWINS_16 row's class: true when problem_class is a 16-bit twin of the row's class. */
static bool twins_16_match(const char *row_class, const char *problem_class) {
    const size_t len = strlen(row_class), mark = strlen(TSR_TWINS_16_MARK);
    char base[32];
    return len > mark && strcmp(row_class + len - mark, TSR_TWINS_16_MARK) == 0 &&
           tsr_dtype_class_base(problem_class, base, sizeof base) && strlen(base) == len - mark &&
           strncmp(row_class, base, len - mark) == 0;
}

static bool default_matches(const tsr_default *row, const tsr_device *device, const char *problem_class) {
    char base[32];
    return (row->device_type == 0 || row->device_type == (int)device->info.type) &&
           (row->lanes == TSR_LANES_ANY || row->lanes == (int)tsr_device_lanes(&device->info) ||
            (row->lanes == TSR_LANES_IN_ITEM_WIDE && tsr_device_lanes(&device->info) == TSR_LANES_IN_ITEM &&
             device->info.preferred_vector_width[4] >= 16)) &&
           (!row->problem_class || strcmp(row->problem_class, problem_class) == 0 ||
            twins_16_match(row->problem_class, problem_class) ||
            strcmp(row->problem_class, tsr_dtype_class_base(problem_class, base, sizeof base) ? base : "") == 0);
}

/* A row over the declared defaults. Built-in text is checked by test_ops; should a row still
 * not parse, the declared defaults stand rather than half of it. */
static void parse_default(const tsr_op *op, const tsr_default *row, tsr_config *config) {
    /* Rows are static text, parsed once each: unfused GELU, attention's softmax and forced conv
     * paths ask for a default on every call. */
    static struct {
        const tsr_op *op; /* two ops may share a row over different parameters */
        const tsr_default *row;
        tsr_config config;
    } parsed[128];
    static int nparsed;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nparsed; ++i)
        if (parsed[i].op == op && parsed[i].row == row) {
            *config = parsed[i].config;
            pthread_mutex_unlock(&lock);
            return;
        }
    tsr_config_declared(op, config);
    if (tsr_config_parse(op, row->config, "a built-in default", config) != TSR_SUCCESS) tsr_config_declared(op, config);
    if (nparsed < (int)(sizeof parsed / sizeof parsed[0])) {
        parsed[nparsed].op = op;
        parsed[nparsed].row = row;
        parsed[nparsed++].config = *config;
    }
    pthread_mutex_unlock(&lock);
}

void tsr_op_default_config(const tsr_op *op, const tsr_device *device, const char *problem_class, tsr_config *config) {
    for (int r = 0; r < op->ndefaults; ++r)
        if (default_matches(&op->defaults[r], device, problem_class)) {
            parse_default(op, &op->defaults[r], config);
            return;
        }
    tsr_config_declared(op, config);
}

bool tsr_op_has_own_default(const tsr_op *op, const tsr_device *device, const char *problem_class) {
    for (int r = 0; r < op->ndefaults; ++r) /* the row tsr_op_default_config takes */
        if (default_matches(&op->defaults[r], device, problem_class))
            return op->defaults[r].problem_class && twins_16_match(op->defaults[r].problem_class, problem_class);
    return false;
}

/* Index of the parameter that selects the implementation, or -1 when there is one. */
static int implementation_index(const tsr_op *op) {
    return op->implementation_param ? tsr_param_index(op, op->implementation_param) : -1;
}

const tsr_implementation *tsr_op_implementation(const tsr_op *op, const tsr_config *config) {
    int sel = implementation_index(op);
    if (sel < 0) return op->nimplementations > 0 ? &op->implementations[0] : NULL;
    for (int i = 0; i < op->nimplementations; ++i)
        if (op->implementations[i].value == config->values[sel]) return &op->implementations[i];
    return NULL;
}

bool tsr_implementation_uses(const tsr_implementation *impl, const char *param) {
    if (!impl->params) return true;
    size_t len = strlen(param);
    for (const char *w = impl->params; *w;) {
        while (*w == ' ') ++w;
        size_t n = strcspn(w, " ");
        if (n == len && strncmp(w, param, len) == 0) return true;
        w += n;
    }
    return false;
}

bool tsr_implementation_accepts(const tsr_implementation *impl, const tsr_device *device, const void *problem) {
    return !impl->accepts || impl->accepts(device, problem);
}

void tsr_op_normalize(const tsr_op *op, tsr_config *config) {
    const tsr_implementation *impl = tsr_op_implementation(op, config);
    int sel = implementation_index(op);
    for (int p = 0; impl && p < op->nparams; ++p)
        if (p != sel && !tsr_implementation_uses(impl, op->params[p].name))
            config->values[p] = op->params[p].default_value;
    if (op->normalize) op->normalize(config);
}

bool tsr_op_is_normal(const tsr_op *op, const tsr_config *config) {
    tsr_config normal = *config;
    tsr_op_normalize(op, &normal);
    return memcmp(&normal, config, sizeof normal) == 0;
}

/* The first row of the defaults that matches (device, class) and selects `impl`, into *config. */
static bool implementation_row(const tsr_op *op, const tsr_implementation *impl, const tsr_device *device,
                               const char *problem_class, tsr_config *config) {
    int sel = implementation_index(op);
    for (int r = 0; r < op->ndefaults; ++r)
        if (default_matches(&op->defaults[r], device, problem_class)) {
            parse_default(op, &op->defaults[r], config);
            if (sel < 0 || config->values[sel] == impl->value) return true;
        }
    return false;
}

void tsr_op_implementation_default(const tsr_op *op, const tsr_implementation *impl, const tsr_device *device,
                                   const char *problem_class, tsr_config *config) {
    if (!implementation_row(op, impl, device, problem_class, config)) {
        int sel = implementation_index(op);
        tsr_config_declared(op, config);
        if (sel >= 0) config->values[sel] = impl->value;
    }
    tsr_op_normalize(op, config);
}

int tsr_op_seeds(const tsr_op *op, const tsr_device *device, const char *problem_class, tsr_config *seeds, int max) {
    if (op->nimplementations < 2) return 0;
    int n = 0;
    for (int i = 0; i < op->nimplementations && n < max; ++i) {
        const tsr_implementation *impl = &op->implementations[i];
        tsr_config *seed = &seeds[n++];
        if (implementation_row(op, impl, device, problem_class, seed)) {
            tsr_op_normalize(op, seed);
            continue;
        }
        /* No row for this class: the implementation's row for another class on this device, not
         * the declared defaults. Those are the plainest kernel, which on a large class's problem
         * can run for minutes (GEMM's smallm kernel at MWI=1 VW=1 on 2048^3: 0.15 GFLOP/s, its
         * first run and one timed run ~200 s of a 64-evaluation tune on a Zen 5 EPYC). */
        bool found = false;
        for (int r = 0; r < op->ndefaults && !found; ++r) {
            const tsr_default *d = &op->defaults[r];
            if (!d->problem_class || !implementation_row(op, impl, device, d->problem_class, seed)) continue;
            tsr_op_normalize(op, seed);
            found = op->config_ok(device, NULL, seed);
        }
        if (!found) tsr_op_implementation_default(op, impl, device, problem_class, seed);
    }
    return n;
}

bool tsr_op_build_fallback(tsr_device *device, const tsr_op *op, const void *problem, tsr_status status,
                           tsr_config *config) {
    if (status != TSR_ERR_BUILD) return false;
    /* The declared defaults are the plainest kernel; where they are not legal (llvmpipe refuses
     * one-item groups), the built-in rows from the last, most generic, one. */
    tsr_config safe;
    bool found = false;
    for (int r = -1; r < op->ndefaults && !found; ++r) {
        if (r < 0) tsr_config_declared(op, &safe);
        else parse_default(op, &op->defaults[op->ndefaults - 1 - r], &safe);
        tsr_op_normalize(op, &safe);
        found = memcmp(&safe, config, sizeof safe) != 0 && op->config_ok(device, problem, &safe);
    }
    if (!found) return false;
    char failed[256], text[256];
    tsr_config_format(op, config, failed, sizeof failed);
    tsr_config_format(op, &safe, text, sizeof text);
    tsr_warn("%s: configuration '%s' does not build on device '%s' (%s); falling back to '%s'", op->name, failed,
             device->info.name, tsr_last_error(), text);
    tsr_clear_error();
    *config = safe;
    return true;
}
