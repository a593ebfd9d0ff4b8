/* The tuning database as storage: a JSON file of tuned configurations per device fingerprint,
 * op and problem class; loading and validation, lookups through the device tiers, merges, locked
 * atomic updates, import and export. It knows device info, not ops nor open devices: which
 * configuration a launch uses is decided in config.c. */
#define _GNU_SOURCE
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define DB_FORMAT "tessera-tuning-db"
#define DB_SCHEMA_VERSION 1

tsr_status tsr_tuning_db_path(char *path, size_t size) {
    if (!path || size == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_tuning_db_path: path must be set");
    const char *env = getenv("TSR_TUNING_DB");
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    int n;
    if (env && *env) n = snprintf(path, size, "%s", env);
    else if (xdg && *xdg) n = snprintf(path, size, "%s/tessera/tuning.json", xdg);
    else if (home && *home) n = snprintf(path, size, "%s/.local/share/tessera/tuning.json", home);
    else return tsr_fail(TSR_ERR_NOT_FOUND, "no tuning database path: set TSR_TUNING_DB, XDG_DATA_HOME or HOME");
    if (n < 0 || (size_t)n >= size) return tsr_fail(TSR_ERR_INVALID_ARG, "tuning database path too long");
    return TSR_SUCCESS;
}

static tsr_status source_hash_in(const char *kernel_dir, const char *source_name, char out[17]) {
    /* The source that will actually be built: with TSR_KERNEL_DIR set, its file or an error (a
     * hash of the embedded copy would let entries tuned for it pass as current). */
    char *owned = NULL;
    const char *text = NULL;
    size_t length = 0;
    tsr_status st = tsr_load_kernel_source(kernel_dir, source_name, &owned, &text, &length);
    if (st != TSR_SUCCESS) return st;
    snprintf(out, 17, "%016llx", (unsigned long long)XXH3_64bits(text, length));
    free(owned);
    return TSR_SUCCESS;
}

tsr_status tsr_source_hash(const char *source_name, char out[17]) {
    return source_hash_in(tsr_env_kernel_dir(), source_name, out);
}

tsr_status tsr_op_source_hash(const tsr_op *op, char out[17]) {
    return tsr_op_source_hash_in(tsr_env_kernel_dir(), op, out);
}

tsr_status tsr_op_source_hash_in(const char *kernel_dir, const tsr_op *op, char out[17]) {
    if (!op->more_sources) return source_hash_in(kernel_dir, op->source_name, out);
    XXH3_state_t *state = XXH3_createState();
    if (!state) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory hashing kernel sources");
    XXH3_64bits_reset(state);
    tsr_status st = TSR_SUCCESS;
    for (int i = -1; st == TSR_SUCCESS && (i < 0 || op->more_sources[i]); ++i) {
        char *owned = NULL;
        const char *text = NULL;
        size_t length = 0;
        st = tsr_load_kernel_source(kernel_dir, i < 0 ? op->source_name : op->more_sources[i], &owned, &text, &length);
        if (st == TSR_SUCCESS) { /* each text after its length, so no two lists of texts hash alike by accident */
            uint64_t n = length;
            XXH3_64bits_update(state, &n, sizeof n);
            XXH3_64bits_update(state, text, length);
        }
        free(owned);
    }
    if (st == TSR_SUCCESS) snprintf(out, 17, "%016llx", (unsigned long long)XXH3_64bits_digest(state));
    XXH3_freeState(state);
    return st;
}

/* ---- loading and validation ---- */

cJSON *tsr_db_new(void) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "format", DB_FORMAT);
    cJSON_AddNumberToObject(root, "schema_version", DB_SCHEMA_VERSION);
    cJSON_AddObjectToObject(root, "devices");
    return root;
}

static bool is_string(const cJSON *o, const char *key) { return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, key)); }

/* Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF) without control
 * characters: a flipped bit inside a name or a hash shows as a bad string. */
static bool clean_text(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = tsr_text_char_length(p);
        if (!n) return false;
        p += n;
    }
    return true;
}

/* Every key and string value of a tree; the first bad one is named in why. */
static bool clean_strings(const cJSON *node, char *why, size_t size) {
    for (const cJSON *c = node ? node->child : NULL; c; c = c->next) {
        if (c->string && !clean_text(c->string))
            return snprintf(why, size, "a key holds a control character or invalid UTF-8"), false;
        if (cJSON_IsString(c) && !clean_text(c->valuestring))
            return snprintf(why, size, "the string \"%s\" holds a control character or invalid UTF-8",
                            c->string ? c->string : "(array item)"), false;
        if (!clean_strings(c, why, size)) return false;
    }
    return true;
}

/* XXH3-64 of the unformatted "devices" object: cJSON prints a parsed tree back to the
 * same text, so a file's checksum holds across reads and rewrites. */
static bool devices_checksum(const cJSON *root, char out[17]) {
    char *text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(root, "devices"));
    if (!text) return false;
    snprintf(out, 17, "%016llx", (unsigned long long)XXH3_64bits(text, strlen(text)));
    free(text);
    return true;
}

/* Stamp the checksum before every write. */
tsr_status tsr_db_seal(cJSON *root) {
    char sum[17];
    if (!devices_checksum(root, sum)) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    cJSON *item = cJSON_CreateString(sum);
    if (!item) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    if (cJSON_GetObjectItemCaseSensitive(root, "checksum")) cJSON_ReplaceItemInObjectCaseSensitive(root, "checksum", item);
    else cJSON_AddItemToObject(root, "checksum", item);
    return TSR_SUCCESS;
}

/* The database as text to write: sealed, formatted like the shipped file. */
static tsr_status db_text(cJSON *root, char **text) {
    tsr_status st = tsr_db_seal(root);
    if (st != TSR_SUCCESS) return st;
    *text = cJSON_Print(root);
    return *text ? TSR_SUCCESS : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
}

/* The keys a database holds at its top level: anything else is damage (a flipped bit in a key) or
 * another program's file. */
static const char *const top_level_keys[] = {"format", "schema_version", "devices", "checksum"};

/* Bounds on the numbers of an entry (a file may come from anywhere; cJSON reads 1e999 as
 * infinity): rates (in the entry's "unit") a device could have measured, counts and parameters
 * integers an int holds. */
#define DB_MAX_RATE 1e12
#define DB_MAX_COUNT 1e9

/* o[key]: absent (unless required), or a finite number in [lo, hi], integral where asked. */
static bool db_number(const cJSON *o, const char *key, bool required, double lo, double hi, bool integer,
                      const char *where, char *why, size_t size) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v && !required) return true;
    if (!cJSON_IsNumber(v)) return snprintf(why, size, "%s: \"%s\" is %s", where, key, v ? "not a number" : "missing"), false;
    double x = v->valuedouble;
    if (isfinite(x) && x >= lo && x <= hi && (!integer || x == floor(x))) return true;
    snprintf(why, size, "%s: \"%s\" is %g: it must be %s in [%g, %g]", where, key, x,
             integer ? "an integer" : "a finite number", lo, hi);
    return false;
}

/* A configuration: parameter names to integers (an int each). */
static bool db_config(const cJSON *config, const char *where, char *why, size_t size) {
    if (!cJSON_IsObject(config)) return snprintf(why, size, "%s: \"config\" is not an object", where), false;
    const cJSON *v;
    cJSON_ArrayForEach(v, config) {
        if (!cJSON_IsNumber(v)) return snprintf(why, size, "%s: parameter %s is not a number", where, v->string), false;
        if (!db_number(config, v->string, true, INT_MIN, INT_MAX, true, where, why, size)) return false;
    }
    return true;
}

/* An entry: its configuration, rate and the other numbers a reader shows or compares. */
static bool db_entry(const cJSON *entry, const char *where, char *why, size_t size) {
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(entry, "config");
    const cJSON *gflops = cJSON_GetObjectItemCaseSensitive(entry, "gflops");
    if (!cJSON_IsObject(config) || !cJSON_IsNumber(gflops) || !is_string(entry, "source_hash"))
        return snprintf(why, size, "%s lacks config, gflops or source_hash", where), false;
    if (!db_config(config, where, why, size) || !db_number(entry, "gflops", true, 0, DB_MAX_RATE, false, where, why, size) ||
        !db_number(entry, "gflops_q25", false, 0, DB_MAX_RATE, false, where, why, size) ||
        !db_number(entry, "spread", false, 0, DB_MAX_RATE, false, where, why, size) ||
        !db_number(entry, "evaluations", false, 0, DB_MAX_COUNT, true, where, why, size))
        return false;
    const cJSON *runners = cJSON_GetObjectItemCaseSensitive(entry, "runners_up"), *r;
    if (runners && !cJSON_IsArray(runners)) return snprintf(why, size, "%s: \"runners_up\" is not an array", where), false;
    cJSON_ArrayForEach(r, runners) {
        char at[320];
        snprintf(at, sizeof at, "%.300s, a runner-up", where);
        if (!db_config(cJSON_GetObjectItemCaseSensitive(r, "config"), at, why, size) ||
            !db_number(r, "gflops", true, 0, DB_MAX_RATE, false, at, why, size))
            return false;
    }
    return true;
}

/* The first number under `node` that is not finite, or NULL. */
static const cJSON *db_non_finite(const cJSON *node) {
    if (cJSON_IsNumber(node)) return isfinite(node->valuedouble) ? NULL : node;
    for (const cJSON *c = node ? node->child : NULL; c; c = c->next) {
        const cJSON *bad = db_non_finite(c);
        if (bad) return bad;
    }
    return NULL;
}

/* Every field a lookup relies on has the right type and range, the top level holds only its four
 * keys, and the checksum matches: anything else makes the file untrusted. Every file tessera has
 * written since schema 1 carries its checksum, so a file without one is damaged (a bit flipped in
 * the key "checksum", a line lost) or made by hand, never one to trust. */
bool tsr_db_validate(const cJSON *root, char *why, size_t size) {
    if (!cJSON_IsObject(root)) return snprintf(why, size, "not a JSON object"), false;
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(format) || strcmp(format->valuestring, DB_FORMAT) != 0)
        return snprintf(why, size, "not a tessera tuning database (no \"format\": \"%s\")", DB_FORMAT), false;
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "schema_version");
    if (!cJSON_IsNumber(version) || version->valuedouble != (double)DB_SCHEMA_VERSION) {
        if (cJSON_IsNumber(version)) snprintf(why, size, "schema version %g is not the supported %d", version->valuedouble,
                                              DB_SCHEMA_VERSION);
        else snprintf(why, size, "no numeric \"schema_version\" (the supported one is %d)", DB_SCHEMA_VERSION);
        return false;
    }
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    if (!cJSON_IsObject(devices)) return snprintf(why, size, "\"devices\" is not an object"), false;
    if (!clean_strings(root, why, size)) return false;
    for (const cJSON *k = root->child; k; k = k->next) {
        bool known = false;
        for (size_t i = 0; i < sizeof top_level_keys / sizeof top_level_keys[0]; ++i)
            known |= strcmp(k->string, top_level_keys[i]) == 0;
        if (!known)
            return snprintf(why, size, "unknown top-level key \"%.64s\" (a database holds only format, schema_version, "
                                       "devices and checksum)", k->string), false;
    }
    const cJSON *dev;
    cJSON_ArrayForEach(dev, devices) {
        static const char *const fields[] = {"platform", "vendor", "name", "driver", "opencl_c", "type"};
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; ++f)
            if (!is_string(dev, fields[f]))
                return snprintf(why, size, "device '%s' lacks the string \"%s\"", dev->string, fields[f]), false;
        char where[300];
        snprintf(where, sizeof where, "device '%.200s'", dev->string);
        if (!db_number(dev, "float_width", false, 0, DB_MAX_COUNT, true, where, why, size)) return false;
        const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(dev, "cpu"); /* optional: older nodes lack it */
        if (cpu && !cJSON_IsString(cpu)) return snprintf(why, size, "device '%.200s': \"cpu\" is not a string", dev->string), false;
        const cJSON *ops = cJSON_GetObjectItemCaseSensitive(dev, "ops");
        if (!cJSON_IsObject(ops)) return snprintf(why, size, "device '%s' has no \"ops\" object", dev->string), false;
        const cJSON *op;
        cJSON_ArrayForEach(op, ops) {
            if (!cJSON_IsObject(op)) return snprintf(why, size, "op '%s' is not an object", op->string), false;
            const cJSON *entry;
            cJSON_ArrayForEach(entry, op) {
                snprintf(where, sizeof where, "entry %.100s/%.100s", op->string, entry->string);
                if (!db_entry(entry, where, why, size)) return false;
            }
        }
    }
    const cJSON *bad = db_non_finite(root);
    if (bad)
        return snprintf(why, size, "\"%s\" is %g: not a finite number", bad->string ? bad->string : "(array item)",
                        bad->valuedouble), false;
    const cJSON *checksum = cJSON_GetObjectItemCaseSensitive(root, "checksum");
    if (!checksum)
        return snprintf(why, size, "no \"checksum\" (every database tessera writes has one: damaged, or made or edited "
                                   "by hand)"), false;
    char sum[17];
    if (!cJSON_IsString(checksum)) return snprintf(why, size, "\"checksum\" is not a string"), false;
    if (!devices_checksum(root, sum)) return snprintf(why, size, "out of memory checking the checksum"), false;
    if (strcmp(sum, checksum->valuestring) != 0)
        return snprintf(why, size, "checksum mismatch (the file says %.16s, its entries give %s): damaged or "
                                   "edited by hand", checksum->valuestring, sum), false;
    return true;
}

tsr_status tsr_db_load(const char *path, cJSON **root) {
    cJSON *parsed = NULL;
    tsr_status st = tsr_read_json(path, "tuning database", &parsed);
    if (st != TSR_SUCCESS) return st;
    char why[256];
    if (!tsr_db_validate(parsed, why, sizeof why)) {
        cJSON_Delete(parsed);
        return tsr_fail(TSR_ERR_CORRUPT, "tuning database %s is unusable: %s", path, why);
    }
    *root = parsed;
    return TSR_SUCCESS;
}

/* ---- lookups ---- */

static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The SIMD instruction set a CPU kernel was compiled for decides its best register tile (16
 * ymm registers of 8 floats under AVX2, 32 zmm of 16 under AVX-512), so a sibling's tuning only
 * carries over between devices of one ISA. PoCL names its CPU device "<driver>-<LLVM target>-<model>"
 * ("pthread-haswell-AMD EPYC", "cpu-skylake-avx512-Intel(R) Xeon(R) ..."): the target, and the
 * float vector width the device prefers, which new device nodes record ("float_width"). */
static const struct {
    const char *target;
    int float_width; /* floats per SIMD register of the widest float unit LLVM uses there */
} llvm_targets[] = {
    {"skylake-avx512", 16}, {"cascadelake", 16}, {"cooperlake", 16}, {"cannonlake", 16}, {"icelake-client", 16},
    {"icelake-server", 16}, {"tigerlake", 16}, {"rocketlake", 16}, {"sapphirerapids", 16}, {"emeraldrapids", 16},
    {"graniterapids", 16}, {"znver4", 16}, {"znver5", 16}, {"knl", 16}, {"knm", 16},
    {"haswell", 8}, {"broadwell", 8}, {"skylake", 8}, {"alderlake", 8}, {"raptorlake", 8}, {"meteorlake", 8},
    {"znver1", 8}, {"znver2", 8}, {"znver3", 8}, {"core-avx2", 8}, {"sandybridge", 8}, {"ivybridge", 8},
    {"bdver1", 8}, {"bdver2", 8}, {"bdver3", 8}, {"bdver4", 8}, {"btver2", 8},
    {"x86-64-v4", 16}, {"x86-64-v3", 8}, {"x86-64-v2", 4}, {"x86-64", 4}, {"nehalem", 4}, {"westmere", 4}, {"core2", 4}, {"silvermont", 4}, {"goldmont", 4},
};

int tsr_llvm_target_of_name(const char *name, const char **target) {
    *target = NULL;
    const char *rest = NULL;
    if (strncmp(name, "pthread-", 8) == 0) rest = name + 8;
    else if (strncmp(name, "cpu-", 4) == 0) rest = name + 4;
    else if (strncmp(name, "basic-", 6) == 0) rest = name + 6;
    if (!rest) return 0;
    size_t best = 0;
    int width = 0;
    /* the longest target followed by '-' or the end: "skylake-avx512" before "skylake" */
    for (size_t i = 0; i < sizeof llvm_targets / sizeof llvm_targets[0]; ++i) {
        size_t n = strlen(llvm_targets[i].target);
        if (n > best && strncmp(rest, llvm_targets[i].target, n) == 0 && (rest[n] == '-' || rest[n] == '\0')) {
            best = n;
            width = llvm_targets[i].float_width;
            *target = llvm_targets[i].target;
        }
    }
    return width;
}

/* How alike the ISA of the device an entry was tuned on and this device are: 2 the same LLVM
 * target, 1 the same preferred float vector width, 0 unknown (a node without "float_width" whose
 * name says nothing), -1 different widths. */
static int isa_likeness(const cJSON *dev, const tsr_device_info *info) {
    const char *node_target, *my_target;
    int node_width = tsr_llvm_target_of_name(str(dev, "name"), &node_target);
    tsr_llvm_target_of_name(info->name, &my_target);
    const cJSON *fw = cJSON_GetObjectItemCaseSensitive(dev, "float_width");
    if (cJSON_IsNumber(fw) && fw->valueint > 0) node_width = fw->valueint;
    int my_width = (int)info->preferred_vector_width[4];
    if (node_target && my_target && strcmp(node_target, my_target) == 0) return 2; /* before any width guess */
    if (node_width && my_width && node_width != my_width) return -1;
    if (node_target && my_target && node_width != my_width) return -1;
    if (node_width && node_width == my_width) return 1;
    return 0;
}

static int sibling_width(const cJSON *dev) {
    const char *target;
    const cJSON *fw = cJSON_GetObjectItemCaseSensitive(dev, "float_width");
    return cJSON_IsNumber(fw) && fw->valueint > 0 ? fw->valueint : tsr_llvm_target_of_name(str(dev, "name"), &target);
}

/* How the processor an entry was tuned on relates to this one: 1 the same (or neither says), 0
 * unknown (a node written before nodes recorded it, "cpu"), -1 another processor. */
static int cpu_likeness(const cJSON *dev, const tsr_device_info *info) {
    const char *node_cpu = str(dev, "cpu");
    if (strcmp(node_cpu, info->host_cpu) == 0) return 1;
    return *node_cpu ? -1 : 0;
}

/* 1: this device, processor and driver, 2: this device and processor under another driver, 3-4:
 * the same for a node that does not say which processor it was tuned on; 5-7: a sibling of the
 * same ISA by LLVM target (5; also this very device name on another processor: a Zen 4 and a
 * Zen 5 both run PoCL's skylake-avx512 code), by float vector width (6), of unknown ISA (7); 0:
 * none, also for a sibling of another ISA (-1: that case, so a lookup can say why it passed the
 * entry over). */
static int device_tier(const cJSON *dev, const tsr_device_info *info) {
    bool same_name = strcmp(str(dev, "platform"), info->platform_name) == 0 &&
                     strcmp(str(dev, "vendor"), info->vendor) == 0 && strcmp(str(dev, "name"), info->name) == 0;
    int cpu = cpu_likeness(dev, info);
    if (same_name && cpu >= 0) {
        bool same_driver = strcmp(str(dev, "driver"), info->driver_version) == 0 &&
                           strcmp(str(dev, "opencl_c"), info->opencl_c_version) == 0;
        return (cpu == 1 ? 1 : 3) + (same_driver ? 0 : 1);
    }
    /* A sibling device of the same vendor and type, on the same platform only: another OpenCL
     * implementation of the same hardware (PoCL and rusticl on one CPU) compiles the same kernel
     * into something else, so its tuning says nothing here. */
    if (strcmp(str(dev, "platform"), info->platform_name) == 0 && strcmp(str(dev, "vendor"), info->vendor) == 0 &&
        strcmp(str(dev, "type"), tsr_device_type_str(info->type)) == 0) {
        int isa = isa_likeness(dev, info);
        return isa == 2 ? 5 : isa == 1 ? 6 : isa == 0 ? 7 : -1;
    }
    return 0;
}

void tsr_note_append(char *notes, size_t size, const char *fmt, ...) {
    size_t used = strlen(notes);
    if (used + 3 >= size) return;
    if (used) used += (size_t)snprintf(notes + used, size - used, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes + used, size - used, fmt, ap);
    va_end(ap);
}

int tsr_db_find(const cJSON *root, const tsr_device_info *info, const char *op, const char *problem_class,
                const char *source_hash, const cJSON **entry, const char **device_key, char *notes,
                size_t notes_size, int *stale) {
    return tsr_db_find_tiers(root, info, 1, TSR_DB_TIERS, op, problem_class, source_hash, entry, device_key, notes,
                             notes_size, stale);
}

int tsr_db_find_tiers(const cJSON *root, const tsr_device_info *info, int first_tier, int last_tier, const char *op,
                      const char *problem_class, const char *source_hash, const cJSON **entry,
                      const char **device_key, char *notes, size_t notes_size, int *stale) {
    *entry = NULL;
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    for (int tier = first_tier; tier <= last_tier; ++tier) {
        const cJSON *dev;
        cJSON_ArrayForEach(dev, devices) {
            int t = device_tier(dev, info);
            if (t != tier && !(t < 0 && tier == TSR_DB_TIERS)) continue;
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dev, "ops"), op), problem_class);
            if (!e) continue;
            if (t < 0) { /* said once, after every usable tier came up empty */
                tsr_note_append(notes, notes_size, "passed over %s/%s tuned on '%s': another instruction set (float vector width %d, here %u)",
                                op, problem_class, str(dev, "name"), sibling_width(dev), info->preferred_vector_width[4]);
                continue;
            }
            if (strcmp(str(e, "source_hash"), source_hash) != 0) {
                tsr_note_append(notes, notes_size, "passed over %s/%s tuned on '%s' (driver %s): kernel source changed since",
                         op, problem_class, str(dev, "name"), str(dev, "driver"));
                if (stale) ++*stale;
                continue;
            }
            *entry = e;
            *device_key = dev->string;
            return tier;
        }
    }
    return 0;
}

void tsr_db_each_entry(const cJSON *root, const tsr_device_info *info, const char *op, const char *problem_class,
                       const char *source_hash, tsr_db_visit_fn visit, void *ctx) {
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    for (int tier = 1; tier <= TSR_DB_TIERS; ++tier) {
        const cJSON *dev;
        cJSON_ArrayForEach(dev, devices) {
            if (device_tier(dev, info) != tier) continue; /* never another ISA's (-1) */
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dev, "ops"), op), problem_class);
            if (e) visit(e, dev, tier, strcmp(str(e, "source_hash"), source_hash) != 0, ctx);
        }
    }
}

/* ---- updates ---- */

cJSON *tsr_db_device_node(cJSON *root, const tsr_device_info *info) {
    char key[7 * TSR_INFO_STR];
    /* the processor joins the key only where known: every other device keeps the key it always had */
    snprintf(key, sizeof key, "%s|%s|%s|%s|%s%s%s", info->platform_name, info->vendor, info->name, info->driver_version,
             info->opencl_c_version, info->host_cpu[0] ? "|" : "", info->host_cpu);
    cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    cJSON *dev = cJSON_GetObjectItemCaseSensitive(devices, key);
    if (dev) return dev;
    dev = cJSON_AddObjectToObject(devices, key);
    if (!dev) return NULL;
    cJSON_AddStringToObject(dev, "platform", info->platform_name);
    cJSON_AddStringToObject(dev, "vendor", info->vendor);
    cJSON_AddStringToObject(dev, "name", info->name);
    cJSON_AddStringToObject(dev, "driver", info->driver_version);
    cJSON_AddStringToObject(dev, "opencl_c", info->opencl_c_version);
    cJSON_AddStringToObject(dev, "type", tsr_device_type_str(info->type));
    cJSON_AddNumberToObject(dev, "float_width", info->preferred_vector_width[4]); /* the ISA, for siblings */
    if (info->host_cpu[0]) cJSON_AddStringToObject(dev, "cpu", info->host_cpu);
    cJSON_AddObjectToObject(dev, "ops");
    return dev;
}

size_t tsr_db_merge(cJSON *dst, const cJSON *src) {
    size_t taken = 0;
    cJSON *dst_devices = cJSON_GetObjectItemCaseSensitive(dst, "devices");
    const cJSON *sdev;
    cJSON_ArrayForEach(sdev, cJSON_GetObjectItemCaseSensitive(src, "devices")) {
        cJSON *ddev = cJSON_GetObjectItemCaseSensitive(dst_devices, sdev->string);
        if (!ddev) {
            cJSON_AddItemToObject(dst_devices, sdev->string, cJSON_Duplicate(sdev, true));
            const cJSON *op;
            cJSON_ArrayForEach(op, cJSON_GetObjectItemCaseSensitive(sdev, "ops")) taken += (size_t)cJSON_GetArraySize(op);
            continue;
        }
        /* a node written before nodes recorded their ISA learns it from a newer one */
        const cJSON *fw = cJSON_GetObjectItemCaseSensitive(sdev, "float_width");
        if (cJSON_IsNumber(fw) && !cJSON_GetObjectItemCaseSensitive(ddev, "float_width"))
            cJSON_AddNumberToObject(ddev, "float_width", fw->valuedouble);
        cJSON *dops = cJSON_GetObjectItemCaseSensitive(ddev, "ops");
        const cJSON *sop;
        cJSON_ArrayForEach(sop, cJSON_GetObjectItemCaseSensitive(sdev, "ops")) {
            cJSON *dop = cJSON_GetObjectItemCaseSensitive(dops, sop->string);
            if (!dop) dop = cJSON_AddObjectToObject(dops, sop->string);
            const cJSON *se;
            cJSON_ArrayForEach(se, sop) {
                cJSON *de = cJSON_GetObjectItemCaseSensitive(dop, se->string);
                bool take = !de;
                if (de) {
                    /* rates compare only for one kernel source on one problem (a class's problem can
                     * change between releases); otherwise the newer result is for the newer source or
                     * problem */
                    if (strcmp(str(de, "source_hash"), str(se, "source_hash")) == 0 &&
                        strcmp(str(de, "problem"), str(se, "problem")) == 0)
                        take = cJSON_GetObjectItem(se, "gflops")->valuedouble > cJSON_GetObjectItem(de, "gflops")->valuedouble;
                    else
                        take = strcmp(str(se, "date"), str(de, "date")) > 0;
                }
                if (!take) continue;
                cJSON *copy = cJSON_Duplicate(se, true);
                if (de) cJSON_ReplaceItemInObjectCaseSensitive(dop, se->string, copy);
                else cJSON_AddItemToObject(dop, se->string, copy);
                ++taken;
            }
        }
    }
    return taken;
}

/* The file a database path names: a symlinked database is written through to its target
 * (resolved once, so the lock and the atomic rename act on the target, not on the link).
 * *linked: whether `path` was a link. */
static tsr_status resolve_db_path(const char *path, char *out, size_t size, bool *linked) {
    char target[TSR_PATH_MAX];
    tsr_strlcpy(out, path, size);
    *linked = false;
    for (int hops = 0; hops < 40; ++hops) {
        ssize_t n = readlink(out, target, sizeof target - 1);
        if (n < 0) {
            /* a regular file, or none yet (ENOTDIR: a parent is a file; reported on use) */
            if (errno == EINVAL || errno == ENOENT || errno == ENOTDIR) return TSR_SUCCESS;
            return tsr_fail(TSR_ERR_IO, "cannot read the link %s: %s", out, strerror(errno));
        }
        target[n] = '\0';
        *linked = true;
        if (target[0] != '/') { /* relative to the link's directory */
            char joined[TSR_PATH_MAX * 2];
            const char *slash = strrchr(out, '/');
            int len = slash ? (int)(slash - out) + 1 : 0;
            snprintf(joined, sizeof joined, "%.*s%s", len, out, target);
            if (strlen(joined) >= size) return tsr_fail(TSR_ERR_INVALID_ARG, "tuning database path too long: %s", joined);
            tsr_strlcpy(out, joined, size);
        } else {
            if ((size_t)n >= size) return tsr_fail(TSR_ERR_INVALID_ARG, "tuning database path too long: %s", target);
            tsr_strlcpy(out, target, size);
        }
    }
    return tsr_fail(TSR_ERR_IO, "too many levels of symbolic links at %s", path);
}

/* The parent directory of path ("." for a bare name, "/" for a top-level file). */
static void parent_dir(const char *path, char *dir, size_t size) {
    tsr_strlcpy(dir, path, size);
    char *slash = strrchr(dir, '/');
    if (!slash) tsr_strlcpy(dir, ".", size);
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
}

/* A database path that is a symbolic link is written through to its target, but tessera creates
 * no directories for a link: a dangling link whose target's directory is missing is an error
 * (the directories of a plain path are created, as for the default location). */
static tsr_status check_link_target_dir(const char *path, const char *file, const char *dir) {
    struct stat sb;
    int rc = stat(dir, &sb);
    if (rc == 0 && S_ISDIR(sb.st_mode)) return TSR_SUCCESS;
    const char *what = rc == 0 ? "is not a directory"
                       : errno == ENOENT || errno == ENOTDIR ? "does not exist" : strerror(errno);
    return tsr_fail(TSR_ERR_IO,
                    "tuning database %s is a symbolic link to %s, whose directory %s %s: tessera writes through a "
                    "link but creates no directories for one (create it, or point the link elsewhere)",
                    path, file, dir, what);
}

tsr_status tsr_db_check_writable(const char *path) {
    char file[TSR_PATH_MAX], dir[TSR_PATH_MAX];
    bool linked = false;
    tsr_status st = resolve_db_path(path, file, sizeof file, &linked);
    if (st != TSR_SUCCESS) return st;
    struct stat sb;
    if (stat(file, &sb) == 0) {
        if (!S_ISREG(sb.st_mode)) return tsr_fail(TSR_ERR_IO, "tuning database %s is not a regular file", file);
        if (access(file, W_OK) != 0)
            return tsr_fail(TSR_ERR_IO, "tuning database %s is not writable: %s", file, strerror(errno));
    } else if (errno != ENOENT && errno != ENOTDIR) {
        return tsr_fail(TSR_ERR_IO, "tuning database %s: %s", file, strerror(errno));
    }
    /* The nearest existing ancestor must be a directory we may create in (the rest is created;
     * never for a link's target). */
    parent_dir(file, dir, sizeof dir);
    if (linked) st = check_link_target_dir(path, file, dir);
    if (st != TSR_SUCCESS) return st;
    for (;;) {
        if (stat(dir, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode))
                return tsr_fail(TSR_ERR_IO, "cannot create the tuning database %s: %s is not a directory", file, dir);
            if (access(dir, W_OK | X_OK) != 0)
                return tsr_fail(TSR_ERR_IO, "cannot create the tuning database %s: directory %s is not writable: %s",
                                file, dir, strerror(errno));
            return TSR_SUCCESS;
        }
        if (errno != ENOENT && errno != ENOTDIR)
            return tsr_fail(TSR_ERR_IO, "cannot create the tuning database %s: %s: %s", file, dir, strerror(errno));
        char up[TSR_PATH_MAX];
        parent_dir(dir, up, sizeof up);
        if (strcmp(up, dir) == 0) return tsr_fail(TSR_ERR_IO, "cannot create the tuning database %s", file);
        tsr_strlcpy(dir, up, sizeof dir);
    }
}

/* Move a damaged file aside without ever replacing an earlier aside copy (two in one second
 * get -1, -2, ... suffixes). */
static tsr_status move_aside(const char *path, char *aside, size_t size) {
    long now = (long)time(NULL);
    for (int i = 0; i < 1000; ++i) {
        if (i == 0) snprintf(aside, size, "%s.damaged-%ld", path, now);
        else snprintf(aside, size, "%s.damaged-%ld-%d", path, now, i);
        if (renameat2(AT_FDCWD, path, AT_FDCWD, aside, RENAME_NOREPLACE) == 0) return TSR_SUCCESS;
        if (errno == EEXIST) continue;
        if (errno != EINVAL && errno != ENOSYS) break;
        /* No RENAME_NOREPLACE on this file system: a hard link is just as exclusive. */
        if (link(path, aside) == 0) {
            if (unlink(path) == 0) return TSR_SUCCESS;
            int e = errno;
            unlink(aside);
            errno = e;
            break;
        }
        if (errno != EEXIST) break;
    }
    return TSR_ERR_IO;
}

tsr_status tsr_db_update(const char *db_path, tsr_status (*update)(cJSON *root, void *ctx), void *ctx) {
    char path[TSR_PATH_MAX], dir[TSR_PATH_MAX], lock_path[TSR_PATH_MAX + 8];
    if (!db_path || !*db_path) return tsr_fail(TSR_ERR_INVALID_ARG, "the tuning database path is empty");
    bool linked = false;
    tsr_status st = resolve_db_path(db_path, path, sizeof path, &linked);
    if (st != TSR_SUCCESS) return st;
    parent_dir(path, dir, sizeof dir);
    if (linked) st = check_link_target_dir(db_path, path, dir);
    else st = tsr_make_dirs(dir);
    if (st != TSR_SUCCESS) return st;
    if ((size_t)snprintf(lock_path, sizeof lock_path, "%s.lock", path) >= sizeof lock_path)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tuning database path too long: %s", path);
    /* Two tuners writing at once: each re-reads and merges under the lock, so neither loses entries. */
    int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0) return tsr_fail(TSR_ERR_IO, "cannot open lock file %s: %s", lock_path, strerror(errno));
    while (flock(lock, LOCK_EX) != 0) {
        if (errno != EINTR) {
            close(lock);
            return tsr_fail(TSR_ERR_IO, "cannot lock %s: %s", lock_path, strerror(errno));
        }
    }
    /* Under the lock no writer of this database is running: every temporary of it left is stale. */
    const char *base = strrchr(path, '/');
    tsr_remove_stale_temporaries(dir, base ? base + 1 : path, 0.0);
    cJSON *root = NULL;
    st = tsr_db_load(path, &root);
    if (st == TSR_ERR_CORRUPT) {
        /* Keep the original aside: never overwrite what a user saved without a copy. */
        char aside[TSR_PATH_MAX + 64];
        char why[512];
        tsr_strlcpy(why, tsr_last_error(), sizeof why);
        if (move_aside(path, aside, sizeof aside) != TSR_SUCCESS) {
            st = tsr_fail(TSR_ERR_IO, "%s, and it could not be moved aside to %s: %s", why, aside, strerror(errno));
            goto done;
        }
        tsr_warn("%s; moved it to %s and started a new database", why, aside);
        st = TSR_ERR_NOT_FOUND;
    }
    if (st == TSR_ERR_NOT_FOUND) {
        tsr_clear_error();
        root = tsr_db_new();
        st = root ? TSR_SUCCESS : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (st != TSR_SUCCESS) goto done;
    TSR_CHECK(st, update(root, ctx), done);
    char *text = NULL;
    TSR_CHECK(st, db_text(root, &text), done);
    st = tsr_write_file_atomic(path, text, strlen(text));
    free(text);
done:
    cJSON_Delete(root);
    flock(lock, LOCK_UN);
    close(lock);
    return st;
}

/* ---- import / export ---- */

static tsr_status merge_update(cJSON *root, void *ctx) {
    void **args = ctx;
    *(size_t *)args[1] = tsr_db_merge(root, args[0]);
    return TSR_SUCCESS;
}

tsr_status tsr_tuning_db_import(const char *db_path, const char *file, size_t *merged) {
    tsr_clear_diagnostics();
    if (!file || !*file || !merged)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_tuning_db_import: file and merged must be set");
    *merged = 0;
    char path[TSR_PATH_MAX];
    tsr_status st = db_path ? (tsr_strlcpy(path, db_path, sizeof path), TSR_SUCCESS) : tsr_tuning_db_path(path, sizeof path);
    if (st != TSR_SUCCESS) return st;
    cJSON *src = NULL;
    st = tsr_db_load(file, &src);
    if (st != TSR_SUCCESS) {
        if (st == TSR_ERR_NOT_FOUND) tsr_error_append(" (import file)");
        return st;
    }
    void *args[2] = {src, merged};
    st = tsr_db_update(path, merge_update, args);
    cJSON_Delete(src);
    return st;
}

tsr_status tsr_tuning_db_export(const char *db_path, const char *file) {
    tsr_clear_diagnostics();
    if (!file || !*file) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_tuning_db_export: file must be set");
    if (db_path && !*db_path) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_tuning_db_export: the database path is empty");
    char path[TSR_PATH_MAX];
    tsr_status st = db_path ? (tsr_strlcpy(path, db_path, sizeof path), TSR_SUCCESS) : tsr_tuning_db_path(path, sizeof path);
    if (st != TSR_SUCCESS) return st;
    cJSON *root = NULL;
    TSR_CHECK(st, tsr_db_load(path, &root), done);
    char *text = NULL;
    st = db_text(root, &text); /* an older file's export gets its checksum */
    cJSON_Delete(root);
    if (st != TSR_SUCCESS) return st;
    st = tsr_write_file_atomic(file, text, strlen(text));
    free(text);
done:
    return st;
}

size_t tsr_db_count_for_device(const cJSON *root, const tsr_device_info *info) {
    size_t n = 0;
    const cJSON *node;
    cJSON_ArrayForEach(node, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        int tier = device_tier(node, info);
        if (tier < 1 || tier > 4) continue; /* this device name, on this processor or one not recorded */
        const cJSON *op;
        cJSON_ArrayForEach(op, cJSON_GetObjectItemCaseSensitive(node, "ops")) n += (size_t)cJSON_GetArraySize(op);
    }
    return n;
}
