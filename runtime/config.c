/* The one resolver: which configuration a launch uses. First the override of the op (the
 * environment's $TSR_CONFIG_<OP>, read once when the device opens, or tsr_config_override), else
 * the user's tuning database and then the built-in one through the device tiers and the op's
 * nearest class, passing over entries tuned for another kernel source (stale) or not legal here,
 * else the op's built-in default. Results are cached per device and (op, class).
 * Generic code: ops are reached through the tsr_op_* wrappers of op.c, storage through
 * tuning_db.c; the op table is above this file (registry.c). */
#include "internal.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

const char *tsr_config_source_str(tsr_config_source source) {
    switch (source) {
    case TSR_CONFIG_ENV_OVERRIDE: return "environment override";
    case TSR_CONFIG_API_OVERRIDE: return "override set through tsr_config_override";
    case TSR_CONFIG_TUNED: return "tuned on this device";
    case TSR_CONFIG_TUNED_OTHER_DRIVER: return "tuned on this device under another driver";
    case TSR_CONFIG_TUNED_SAME_VENDOR: return "tuned on another device of the same vendor and type";
    case TSR_CONFIG_BUILTIN_TUNED: return "built-in tuned for a matching device";
    case TSR_CONFIG_BUILTIN_DEFAULT: return "built-in default";
    }
    return "unknown";
}

static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* ---- tuned and built-in configurations ---- */

/* Config from an entry's JSON object; false (with a note) when it does not fit this build or device. */
/* With `missing_ok` (seeds from stale entries) a parameter added since the entry was tuned takes its
 * declared default, which keeps the kernel the entry measured. So does, in any entry, a parameter
 * that the entry's implementation does not read (GEMM's gpu-only SPLIT in a tiled entry): it
 * normalizes to that default anyway, so a current entry re-stamped across its addition stays
 * usable. */
static bool config_from_json(const tsr_device *dev, const tsr_op *op, const cJSON *json, tsr_config *cfg,
                             bool missing_ok, char *why, size_t size) {
    memset(cfg, 0, sizeof *cfg);
    const tsr_implementation *impl = NULL;
    if (op->implementation_param && cJSON_IsObject(json)) {
        const cJSON *iv = cJSON_GetObjectItemCaseSensitive(json, op->implementation_param);
        for (int i = 0; cJSON_IsNumber(iv) && i < op->nimplementations; ++i)
            if (op->implementations[i].value == iv->valueint && iv->valuedouble == (double)iv->valueint)
                impl = &op->implementations[i];
    }
    int found = 0;
    for (int p = 0; p < op->nparams; ++p) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(json, op->params[p].name);
        const bool unread = impl && strcmp(op->params[p].name, op->implementation_param) != 0 &&
                            !tsr_implementation_uses(impl, op->params[p].name);
        if (!v && (missing_ok || unread) && cJSON_IsObject(json)) {
            cfg->values[p] = op->params[p].default_value;
            continue;
        }
        if (!cJSON_IsNumber(v)) return snprintf(why, size, "parameter %s missing", op->params[p].name), false;
        bool in_space = false;
        for (int i = 0; i < op->params[p].nvalues; ++i) in_space |= op->params[p].values[i] == v->valueint;
        if (!in_space || v->valuedouble != (double)v->valueint)
            return snprintf(why, size, "%s=%g is outside the parameter space", op->params[p].name, v->valuedouble), false;
        cfg->values[p] = v->valueint;
        ++found;
    }
    if (cJSON_GetArraySize(json) != found) return snprintf(why, size, "unknown parameters"), false;
    if (!op->config_ok(dev, NULL, cfg)) return snprintf(why, size, "not legal on this device"), false;
    return true;
}

static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;
static cJSON *builtin_db;

static void parse_builtin(void) {
    cJSON *root = cJSON_Parse(tsr_builtin_tuning_json);
    char why[256];
    if (root && tsr_db_validate(root, why, sizeof why)) builtin_db = root;
    else cJSON_Delete(root); /* a broken built-in file is caught by the tests */
}

static void load_user_db(tsr_device *dev) {
    if (dev->tuning_db_loaded) return;
    dev->tuning_db_loaded = true;
    char path[TSR_PATH_MAX];
    if (tsr_tuning_db_path(path, sizeof path) != TSR_SUCCESS) {
        tsr_clear_error();
        return;
    }
    tsr_status st = tsr_db_load(path, &dev->tuning_db);
    if (st == TSR_ERR_CORRUPT || st == TSR_ERR_IO) {
        snprintf(dev->tuning_db_warning, sizeof dev->tuning_db_warning, "%s; ignoring it", tsr_last_error());
        tsr_warn("%s", dev->tuning_db_warning);
    }
    tsr_clear_error();
}

void tsr_tuning_invalidate(tsr_device *dev) {
    pthread_mutex_lock(&dev->lock);
    dev->nresolved = 0;
    cJSON_Delete(dev->tuning_db);
    dev->tuning_db = NULL;
    dev->tuning_db_loaded = false;
    dev->tuning_db_warning[0] = '\0';
    pthread_mutex_unlock(&dev->lock);
    tsr_launch_invalidate(dev); /* records hold configurations resolved from the old state */
}

/* Try one database for one class; fills cfg and info on success, and counts the entries it passed
 * over as stale into info->stale_passed_over either way. */
static bool try_db(tsr_device *dev, const tsr_op *op, const cJSON *db, bool builtin, bool siblings, const char *cls,
                   const char *hash, tsr_config *cfg, tsr_config_info *info, char *notes, size_t notes_size) {
    if (!db) return false;
    const cJSON *entry = NULL;
    const char *key = NULL;
    size_t noted = strlen(notes);
    int tier = tsr_db_find_tiers(db, &dev->info, siblings ? TSR_DB_OWN_TIERS + 1 : 1,
                                 siblings ? TSR_DB_TIERS : TSR_DB_OWN_TIERS, op->name, cls, hash, &entry, &key, notes,
                                 notes_size, &info->stale_passed_over);
    char why[128];
    bool usable = tier && config_from_json(dev, op, cJSON_GetObjectItemCaseSensitive(entry, "config"), cfg, false, why, sizeof why);
    if (tier && !usable)
        tsr_note_append(notes, notes_size, "passed over the %s entry for %s/%s: %s", builtin ? "built-in" : "database", op->name,
                 cls, why);
    /* The user's own entries passed over are worth a warning (a re-tune brings them back);
     * the built-in ones are checked by the tests. */
    if (!builtin && strlen(notes) > noted) tsr_warn("tuning database: %s", notes + noted + (noted ? 2 : 0));
    if (!usable) return false;
    const cJSON *dev_node = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(db, "devices"), key);
    info->source = builtin ? TSR_CONFIG_BUILTIN_TUNED
                           : (tier == 1 || tier == 3 ? TSR_CONFIG_TUNED
                              : tier == 2 || tier == 4 ? TSR_CONFIG_TUNED_OTHER_DRIVER
                                                       : TSR_CONFIG_TUNED_SAME_VENDOR);
    info->tuned_gflops = cJSON_GetObjectItemCaseSensitive(entry, "gflops")->valuedouble;
    tsr_strlcpy(info->used_class, cls, sizeof info->used_class);
    char where[TSR_PATH_MAX] = "built into tessera";
    if (!builtin && tsr_tuning_db_path(where, sizeof where) != TSR_SUCCESS) tsr_clear_error();
    const char *unit = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(entry, "unit"));
    const char *cpu = str(dev_node, "cpu"); /* named where it is not this one, or not recorded */
    bool other_cpu = *cpu && strcmp(cpu, dev->info.host_cpu) != 0, unrecorded = !*cpu && dev->info.host_cpu[0];
    snprintf(info->origin, sizeof info->origin, "%s entry %s/%s for '%s'%s%s%s (driver %s), tuned %s on %s at %.1f %s",
             builtin ? "built-in" : where, op->name, cls, str(dev_node, "name"), other_cpu ? " on " : "",
             other_cpu ? cpu : "", other_cpu ? ", another processor" : unrecorded ? ", processor not recorded" : "",
             str(dev_node, "driver"),
             str(entry, "date"), str(entry, "problem"), info->tuned_gflops, unit ? unit : "GFLOP/s");
    if (strcmp(str(entry, "timing"), "host") == 0) { /* the driver's timestamps were unusable: say so */
        size_t used = strlen(info->origin);
        snprintf(info->origin + used, sizeof info->origin - used, ", timed with the host clock");
    }
    return true;
}

/* The classes whose entries serve `cls`, in order, each once: itself, its nearest class (GEMM:
 * batched -> small), and for a 16-bit class ("large-f16") its fp32 class and that one's nearest:
 * the same tile shapes suit it, since loads widen to fp32 before any arithmetic (its default rows
 * too: op.c), unless the op has a default row for this device naming the 16-bit class itself
 * (GELU's erf form: memory-bound in fp32, compute-bound in 16 bits, where its fp32 width is
 * wrong): then the chain stops before the fp32 class and that row is the default. `base_buf`
 * holds the fp32 class's name. Returns how many. */
static int class_chain(const tsr_device *dev, const tsr_op *op, const char *cls, char base_buf[32],
                       const char *chain[4]) {
    const char *base = tsr_dtype_class_base(cls, base_buf, 32);
    if (base && tsr_op_has_own_default(op, dev, cls)) base = NULL;
    const char *candidates[4] = {cls, tsr_op_nearest_class(op, cls), base, base ? tsr_op_nearest_class(op, base) : NULL};
    int n = 0;
    for (int c = 0; c < 4; ++c) {
        bool repeated = !candidates[c]; /* "small-f16": small as its nearest class and as its base */
        for (int p = 0; p < n && !repeated; ++p) repeated = strcmp(chain[p], candidates[c]) == 0;
        if (!repeated) chain[n++] = candidates[c];
    }
    return n;
}

tsr_status tsr_resolve_config(tsr_device *dev, const tsr_op *op, const char *cls, tsr_config *cfg,
                              tsr_config_info *info) {
    tsr_status status = TSR_SUCCESS;
    pthread_mutex_lock(&dev->lock);
    for (size_t i = 0; i < dev->nresolved; ++i) {
        if (dev->resolved[i].op == op && strcmp(dev->resolved[i].problem_class, cls) == 0) {
            *cfg = dev->resolved[i].config;
            if (info) *info = dev->resolved[i].info;
            goto done;
        }
    }
    pthread_once(&builtin_once, parse_builtin);
    load_user_db(dev);
    char hash[17];
    TSR_CHECK(status, tsr_op_source_hash_in(dev->kernel_dir, op, hash), done);
    tsr_config_info found;
    memset(&found, 0, sizeof found);
    tsr_strlcpy(found.op, op->name, sizeof found.op);
    tsr_strlcpy(found.problem_class, cls, sizeof found.problem_class);
    char notes[512] = "";
    if (dev->tuning_db_warning[0]) tsr_note_append(notes, sizeof notes, "%s", dev->tuning_db_warning);
    char base_buf[32];
    const char *classes[4];
    int nclasses = class_chain(dev, op, cls, base_buf, classes);
    /* TSR_BUILTIN_TUNING=off (read at device open): ignore the tuned entries shipped in the library. */
    const cJSON *builtin = dev->builtin_tuning ? builtin_db : NULL;
    bool done = false;
    /* Per class: this device's entries in either database (the user's first), then siblings' */
    for (int c = 0; c < nclasses && !done; ++c)
        for (int siblings = 0; siblings < 2 && !done; ++siblings)
            done = try_db(dev, op, dev->tuning_db, false, siblings, classes[c], hash, cfg, &found, notes, sizeof notes) ||
                   try_db(dev, op, builtin, true, siblings, classes[c], hash, cfg, &found, notes, sizeof notes);
    if (!done) {
        tsr_op_default_config(op, dev, cls, cfg);
        found.source = TSR_CONFIG_BUILTIN_DEFAULT;
        tsr_strlcpy(found.used_class, cls, sizeof found.used_class);
        snprintf(found.origin, sizeof found.origin, "tessera's default for %s devices, class %s",
                 tsr_device_type_str(dev->info.type), cls);
    }
    if (notes[0]) {
        size_t used = strlen(found.origin);
        snprintf(found.origin + used, sizeof found.origin - used, " (%s)", notes);
    }
    tsr_config_format(op, cfg, found.config, sizeof found.config);
    /* The cache grows with the (op, class) pairs launched: a fixed size would silently stop
     * caching (and re-read the database on every launch) past its end. */
    if (dev->nresolved == dev->resolved_capacity) {
        size_t capacity = dev->resolved_capacity ? 2 * dev->resolved_capacity : 16;
        struct tsr_resolved *grown = realloc(dev->resolved, capacity * sizeof *grown);
        if (!grown) {
            status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory caching the configuration of %s/%s", op->name, cls);
            goto done;
        }
        dev->resolved = grown;
        dev->resolved_capacity = capacity;
    }
    struct tsr_resolved *r = &dev->resolved[dev->nresolved++];
    r->op = op;
    tsr_strlcpy(r->problem_class, cls, sizeof r->problem_class);
    r->config = *cfg;
    r->info = found;
    if (info) *info = found;
done:
    pthread_mutex_unlock(&dev->lock);
    return status;
}

size_t tsr_tuning_entries_for_device(tsr_device *dev) {
    size_t n = 0;
    pthread_mutex_lock(&dev->lock);
    pthread_once(&builtin_once, parse_builtin);
    load_user_db(dev);
    n = tsr_db_count_for_device(dev->tuning_db, &dev->info) + tsr_db_count_for_device(builtin_db, &dev->info);
    pthread_mutex_unlock(&dev->lock);
    return n;
}

/* ---- seeds for a re-tune ---- */

typedef struct seed_ctx {
    const tsr_device *dev;
    const tsr_op *op;
    bool want_stale; /* this pass takes the stale entries, the other the current ones */
    tsr_tuning_seed *seeds;
    int n, max;
} seed_ctx;

static void take_seed(const cJSON *entry, const cJSON *device_node, int tier, bool stale, void *vctx) {
    (void)device_node;
    (void)tier;
    seed_ctx *sc = vctx;
    if (stale != sc->want_stale || sc->n == sc->max) return;
    tsr_config cfg;
    char why[128];
    if (!config_from_json(sc->dev, sc->op, cJSON_GetObjectItemCaseSensitive(entry, "config"), &cfg, stale, why,
                          sizeof why))
        return; /* tuned for parameters this build no longer has: no start */
    for (int i = 0; i < sc->n; ++i)
        if (memcmp(&sc->seeds[i].config, &cfg, sizeof cfg) == 0) return;
    sc->seeds[sc->n++] = (tsr_tuning_seed){.config = cfg, .stale = stale};
}

int tsr_tuning_seeds(tsr_device *dev, const tsr_op *op, const cJSON *user_db, const char *cls, const char *hash,
                     tsr_tuning_seed *seeds, int max) {
    pthread_once(&builtin_once, parse_builtin);
    const char *builtin_env = getenv("TSR_BUILTIN_TUNING");
    const cJSON *dbs[2] = {user_db, (builtin_env && strcmp(builtin_env, "off") == 0) ? NULL : builtin_db};
    char base_buf[32];
    const char *classes[4];
    int nclasses = class_chain(dev, op, cls, base_buf, classes);
    seed_ctx sc = {.dev = dev, .op = op, .seeds = seeds, .max = max};
    /* The class's own entries, then those it falls back to when it has none (what it runs now) */
    for (int pass = 0; pass < 2; ++pass) {
        sc.want_stale = pass == 1;
        for (int c = 0; c < nclasses; ++c)
            for (int d = 0; d < 2; ++d)
                if (dbs[d]) tsr_db_each_entry(dbs[d], &dev->info, op->name, classes[c], hash, take_seed, &sc);
    }
    return sc.n;
}

/* ---- overrides ---- */

#define OVERRIDE_PREFIX "TSR_CONFIG_"

/* The environment variable that overrides an op: "TSR_CONFIG_" and the op's name in capitals.
 * It also keys the op's override in the device, whichever way it was set. */
static void override_var(const tsr_op *op, char *var, size_t size) {
    snprintf(var, size, OVERRIDE_PREFIX "%s", op->name);
    for (char *c = var; *c; ++c) *c = (char)toupper((unsigned char)*c);
}

static struct tsr_override *find_override(tsr_device *dev, const char *var) {
    for (size_t i = 0; i < dev->noverrides; ++i)
        if (strcmp(dev->overrides[i].var, var) == 0) return &dev->overrides[i];
    return NULL;
}

/* Set (text) or clear (NULL) the override keyed `var`; call with dev->lock held. */
static tsr_status put_override(tsr_device *dev, const char *var, const char *text, bool from_api) {
    struct tsr_override *o = find_override(dev, var);
    if (!text) {
        if (o) {
            free(o->text);
            *o = dev->overrides[--dev->noverrides];
        }
        return TSR_SUCCESS;
    }
    char *copy = strdup(text);
    if (!copy) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory storing the override %s", var);
    if (!o) {
        struct tsr_override *grown = realloc(dev->overrides, (dev->noverrides + 1) * sizeof *grown);
        if (!grown) {
            free(copy);
            return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory storing the override %s", var);
        }
        dev->overrides = grown;
        o = &dev->overrides[dev->noverrides++];
        tsr_strlcpy(o->var, var, sizeof o->var);
        o->text = NULL;
    }
    free(o->text);
    o->text = copy;
    o->from_api = from_api;
    return TSR_SUCCESS;
}

tsr_status tsr_config_device_init(tsr_device *dev) {
    /* Every TSR_CONFIG_* variable, whether or not an op answers to it: this layer does not know
     * the op table, and a launch looks its own op's variable up. Texts are checked at launch,
     * as they always were, so a bad one fails the launch that uses it and not the open. */
    for (char **env = environ; env && *env; ++env) {
        const char *eq = strchr(*env, '=');
        size_t name_length = eq ? (size_t)(eq - *env) : 0;
        if (!eq || strncmp(*env, OVERRIDE_PREFIX, strlen(OVERRIDE_PREFIX)) != 0 || !eq[1] ||
            name_length >= sizeof dev->overrides[0].var)
            continue;
        char var[sizeof dev->overrides[0].var];
        memcpy(var, *env, name_length);
        var[name_length] = '\0';
        tsr_status st = put_override(dev, var, eq + 1, false);
        if (st != TSR_SUCCESS) return st;
    }
    return TSR_SUCCESS;
}

void tsr_config_device_release(tsr_device *dev) {
    tsr_tuning_invalidate(dev); /* frees the parsed tuning database */
    for (size_t i = 0; i < dev->noverrides; ++i) free(dev->overrides[i].text);
    free(dev->overrides);
    dev->overrides = NULL;
    dev->noverrides = 0;
    free(dev->resolved);
    dev->resolved = NULL;
    dev->resolved_capacity = 0;
}

/* What an override is called in messages: the environment variable, or the call that set it. */
static void override_label(const tsr_op *op, const struct tsr_override *o, char *label, size_t size) {
    if (o->from_api) snprintf(label, size, "tsr_config_override(%s)", op->name);
    else tsr_strlcpy(label, o->var, size);
}

/* An override text over the class default, normalized and checked for this device and problem
 * (NULL: any); `label` names the text in messages. */
/* Does every NAME=VALUE word of the text name a parameter `impl` reads (or the implementation
 * parameter itself)? Sets *names_impl when the text names the implementation parameter. */
static bool override_fits(const tsr_op *op, const tsr_implementation *impl, const char *text, bool *names_impl) {
    bool fits = true;
    *names_impl = false;
    for (const char *w = text; *w;) {
        while (isspace((unsigned char)*w)) ++w;
        size_t n = 0;
        while (w[n] && w[n] != '=' && !isspace((unsigned char)w[n])) ++n;
        if (n) {
            char name[32];
            snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), w);
            if (op->implementation_param && strcmp(name, op->implementation_param) == 0) *names_impl = true;
            else if (!tsr_implementation_uses(impl, name)) fits = false;
        }
        w += n;
        while (*w && !isspace((unsigned char)*w)) ++w;
    }
    return fits;
}

static tsr_status override_config(const tsr_device *dev, const tsr_op *op, const char *cls, const void *problem,
                                  const char *text, const char *label, tsr_config *config) {
    tsr_op_default_config(op, dev, cls, config);
    /* A text that does not say which implementation but names parameters only another one reads
     * ("PACKA=1" where the default is GEMM's gpu kernel) means that implementation: start from
     * its default, rather than from a default that ignores what the text asks for. */
    const tsr_implementation *impl = tsr_op_implementation(op, config);
    bool names_impl = false;
    if (impl && op->nimplementations > 1 && !override_fits(op, impl, text, &names_impl) && !names_impl)
        for (int i = 0; i < op->nimplementations; ++i)
            if (override_fits(op, &op->implementations[i], text, &names_impl)) {
                tsr_op_implementation_default(op, &op->implementations[i], dev, cls, config);
                break;
            }
    tsr_status st = tsr_config_parse(op, text, label, config);
    if (st != TSR_SUCCESS) return st;
    tsr_op_normalize(op, config);
    if (!op->config_ok(dev, problem, config)) {
        char desc[256];
        tsr_config_format(op, config, desc, sizeof desc);
        return tsr_fail(TSR_ERR_UNSUPPORTED, "%s: configuration '%s' is not legal on device '%s'", label, desc,
                        dev->info.name);
    }
    return TSR_SUCCESS;
}

tsr_status tsr_config_set_override(tsr_device *dev, const tsr_op *op, const char *text) {
    char var[sizeof dev->overrides[0].var];
    override_var(op, var, sizeof var);
    tsr_status st = TSR_SUCCESS;
    if (text && *text) {
        /* Checked now, so a mistake shows where it was made: over the generic class's default,
         * which launches check again against their own class and problem. */
        char what[96];
        snprintf(what, sizeof what, "tsr_config_override(%s)", op->name);
        tsr_config config;
        TSR_CHECK(st, override_config(dev, op, op->classes[0], NULL, text, what, &config), done);
    }
    pthread_mutex_lock(&dev->lock);
    st = put_override(dev, var, text && *text ? text : NULL, true);
    pthread_mutex_unlock(&dev->lock);
    /* After the override is in place: a call that resolved before it cannot keep its record. */
    tsr_launch_invalidate(dev);
done:
    return st;
}

/* The override's configuration over the class default, checked for this device and problem;
 * call with dev->lock held. */
static tsr_status apply_override(tsr_device *dev, const tsr_op *op, const char *cls, const void *problem,
                                 const struct tsr_override *o, tsr_config *config, tsr_config_info *info) {
    char label[64];
    override_label(op, o, label, sizeof label);
    tsr_status st = override_config(dev, op, cls, problem, o->text, label, config);
    if (st != TSR_SUCCESS) return st;
    if (info) {
        memset(info, 0, sizeof *info);
        tsr_strlcpy(info->op, op->name, sizeof info->op);
        tsr_strlcpy(info->problem_class, cls, sizeof info->problem_class);
        tsr_strlcpy(info->used_class, cls, sizeof info->used_class);
        tsr_config_format(op, config, info->config, sizeof info->config);
        info->source = o->from_api ? TSR_CONFIG_API_OVERRIDE : TSR_CONFIG_ENV_OVERRIDE;
        if (o->from_api) snprintf(info->origin, sizeof info->origin, "tsr_config_override over the class default");
        else snprintf(info->origin, sizeof info->origin, "$%s over the class default", o->var);
    }
    return TSR_SUCCESS;
}

/* ---- what a launch uses ---- */

/* The configuration and its origin for a problem class; `problem` (may be NULL) only refines
 * the legality check. */
static tsr_status op_config_info(tsr_device *dev, const tsr_op *op, const char *cls, const void *problem,
                                 tsr_config *config, tsr_config_info *info) {
    char var[sizeof dev->overrides[0].var];
    pthread_mutex_lock(&dev->lock);
    const struct tsr_override *o = NULL;
    if (dev->noverrides) { /* the common case has none: no name to build on every launch */
        override_var(op, var, sizeof var);
        o = find_override(dev, var);
    }
    tsr_status st = o ? apply_override(dev, op, cls, problem, o, config, info)
                      : tsr_resolve_config(dev, op, cls, config, info);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

bool tsr_op_overridden(tsr_device *dev, const tsr_op *op) {
    char var[sizeof dev->overrides[0].var];
    pthread_mutex_lock(&dev->lock);
    bool found = false;
    if (dev->noverrides) {
        override_var(op, var, sizeof var);
        found = find_override(dev, var) != NULL;
    }
    pthread_mutex_unlock(&dev->lock);
    return found;
}

tsr_status tsr_op_config(tsr_device *dev, const tsr_op *op, const void *problem, tsr_config *config) {
    return op_config_info(dev, op, problem ? op->problem_class(problem) : op->classes[0], problem, config, NULL);
}

tsr_status tsr_op_config_lookup(tsr_device *dev, const tsr_op *op, const char *problem_class, tsr_config_info *info) {
    tsr_config config;
    return op_config_info(dev, op, problem_class, NULL, &config, info);
}

tsr_status tsr_op_config_shape(tsr_device *dev, const tsr_op *op, const void *problem, const uint32_t *shape,
                               size_t nwords, tsr_config *config) {
    if (nwords > TSR_LAUNCH_KEY_WORDS)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: a shape key of %zu words is too long", op->name, nwords);
    tsr_launch_key key;
    memset(&key, 0, sizeof key);
    key.tag = op; /* ops' kernel records are tagged by other addresses */
    memcpy(key.words, shape, nwords * sizeof *shape);
    tsr_launch rec;
    uint64_t generation;
    if (tsr_launch_find(dev, &key, &rec, &generation)) {
        *config = rec.config;
        return TSR_SUCCESS;
    }
    tsr_status st = tsr_op_config(dev, op, problem, config);
    if (st != TSR_SUCCESS) return st;
    memset(&rec, 0, sizeof rec);
    rec.config = *config;
    tsr_launch_store(dev, &key, generation, &rec);
    return TSR_SUCCESS;
}
