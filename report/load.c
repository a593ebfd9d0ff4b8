/* The report tree: a new one, validation of foreign report.json (every field checked), loading,
 * parsing and merging reports made on different machines or MPI ranks. */
#define _GNU_SOURCE
#include "report_parts.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- a new tree ---- */

void report_now_iso(char *out, size_t size) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

cJSON *report_new(const char *created) {
    char now[32];
    if (!created) report_now_iso(now, sizeof now), created = now;
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "format", REPORT_FORMAT);
    cJSON_AddNumberToObject(root, "schema_version", REPORT_SCHEMA);
    cJSON_AddStringToObject(root, "tessera_version", TSR_VERSION_STRING);
    cJSON_AddStringToObject(root, "created", created);
    cJSON_AddArrayToObject(root, "devices");
    if (!cJSON_AddArrayToObject(root, "notes")) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* ---- validation, loading and merging ---- */

/* A device's "mpi" record (`report --mpi`): which rank of which run measured it. */
static bool valid_mpi_record(const cJSON *mpi) {
    const cJSON *rank = cJSON_GetObjectItemCaseSensitive(mpi, "rank"),
                *ranks = cJSON_GetObjectItemCaseSensitive(mpi, "ranks");
    if (!cJSON_IsObject(mpi) || !cJSON_IsNumber(rank) || !cJSON_IsNumber(ranks) ||
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(mpi, "run")))
        return false;
    double r = rank->valuedouble, n = ranks->valuedouble;
    return r >= 0 && r < n && n <= 1e7 && r == floor(r) && n == floor(n);
}

/* Bounds on the numbers of a report from elsewhere (cJSON reads 1e999 as infinity and 1e-999 as
 * 0): generous for any real device, narrow enough that every rate, ratio and chart range derived
 * from them (a time over a time, a rate over a roof, FLOPs over bytes) is finite. */
#define REPORT_MAX_RATE 1e12  /* GFLOP/s or GB/s (a zettaflop) */
#define REPORT_MIN_MS 1e-9    /* milliseconds (a picosecond) */
#define REPORT_MAX_MS 1e12    /* milliseconds (about 30 years) */
#define REPORT_MAX_WORK 1e30  /* FLOPs or bytes of one run */
#define REPORT_MAX_COUNT 1e9  /* repetitions */
#define REPORT_MAX_SECONDS 1e9

enum { NUM_REQUIRED = 1, NUM_INTEGER = 2, NUM_ZERO = 4 /* 0 too, besides [lo, hi] */ };

/* The number `key` of `o`: absent (unless NUM_REQUIRED), or finite and in [lo, hi] (or 0 with
 * NUM_ZERO), integral with NUM_INTEGER. False with the field and the rule in why. */
static bool report_number(const cJSON *o, const char *key, unsigned rules, double lo, double hi, char *why,
                          size_t size) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        if (!(rules & NUM_REQUIRED)) return true;
        return snprintf(why, size, "\"%s\" is missing", key), false;
    }
    if (!cJSON_IsNumber(v)) return snprintf(why, size, "\"%s\" is not a number", key), false;
    double x = v->valuedouble;
    if (isfinite(x) && ((x >= lo && x <= hi) || (rules & NUM_ZERO && x == 0)) && (!(rules & NUM_INTEGER) || x == floor(x)))
        return true;
    char range[96];
    if (hi == DBL_MAX) snprintf(range, sizeof range, "%s >= %g", rules & NUM_INTEGER ? "an integer" : "a finite number", lo);
    else snprintf(range, sizeof range, "%s%s in [%g, %g]", rules & NUM_ZERO ? "0 or " : "",
                  rules & NUM_INTEGER ? "an integer" : "a number", lo, hi);
    snprintf(why, size, "\"%s\" is %g: it must be %s", key, x, range);
    return false;
}

/* The first number under `node` that is not finite (a report's own numbers always are), or NULL. */
static const cJSON *non_finite(const cJSON *node) {
    if (cJSON_IsNumber(node)) return isfinite(node->valuedouble) ? NULL : node;
    for (const cJSON *c = node ? node->child : NULL; c; c = c->next) {
        const cJSON *bad = non_finite(c);
        if (bad) return bad;
    }
    return NULL;
}

/* A result row: the strings the report shows, and every number finite and in range (the rates and
 * ratios report.md and the charts derive from them are then finite too). */
bool report_valid_result(const cJSON *r, char *why, size_t size) {
    if (!cJSON_IsObject(r)) return snprintf(why, size, "not an object"), false;
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(r, "case")) ||
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(r, "impl")))
        return snprintf(why, size, "case, impl, time_ms or gflops missing"), false;
    static const char *const texts[] = {"op", "shape", "timing", "error"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; ++i) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, texts[i]);
        if (t && !cJSON_IsString(t)) return snprintf(why, size, "\"%s\" is not a string", texts[i]), false;
    }
    if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r, "time_ms")) ||
        !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r, "gflops")))
        return snprintf(why, size, "case, impl, time_ms or gflops missing"), false;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "rel_err");
    bool ok = report_number(r, "time_ms", NUM_REQUIRED, REPORT_MIN_MS, REPORT_MAX_MS, why, size) &&
              report_number(r, "time_min_ms", NUM_ZERO, REPORT_MIN_MS, REPORT_MAX_MS, why, size) &&
              report_number(r, "time_max_ms", NUM_ZERO, REPORT_MIN_MS, REPORT_MAX_MS, why, size) &&
              report_number(r, "runs", NUM_INTEGER, 0, REPORT_MAX_COUNT, why, size) &&
              report_number(r, "flops", NUM_ZERO, 1, REPORT_MAX_WORK, why, size) &&
              report_number(r, "bytes", util_json_num(r, "flops") > 0 ? NUM_REQUIRED : NUM_ZERO, 1, REPORT_MAX_WORK, why,
                            size) && /* 0 only where there is no intensity to take */
              report_number(r, "gflops", NUM_REQUIRED, 0, REPORT_MAX_RATE, why, size) &&
              report_number(r, "gbps", 0, 0, REPORT_MAX_RATE, why, size);
    return ok && (!e || cJSON_IsNull(e) || report_number(r, "rel_err", 0, 0, DBL_MAX, why, size));
}

bool report_validate(const cJSON *root, char *why, size_t size) {
    if (!cJSON_IsObject(root)) return snprintf(why, size, "not a JSON object"), false;
    if (strcmp(util_json_text(root, "format"), REPORT_FORMAT) != 0)
        return snprintf(why, size, "\"format\" is not \"%s\"", REPORT_FORMAT), false;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "schema_version");
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)REPORT_SCHEMA) /* 1.5 is not 1: valueint would truncate */
        return snprintf(why, size, "unsupported schema_version (this tessera reads the integer %d)", REPORT_SCHEMA),
               false;
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    if (!cJSON_IsArray(devices)) return snprintf(why, size, "\"devices\" is not an array"), false;
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(root, "notes"), *note;
    if (notes && !cJSON_IsArray(notes)) return snprintf(why, size, "\"notes\" is not an array"), false;
    cJSON_ArrayForEach(note, notes) if (!cJSON_IsString(note)) return snprintf(why, size, "a note is not a string"),
        false;
    int i = 0;
    const cJSON *d;
    char detail[200];
    cJSON_ArrayForEach(d, devices) {
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(d, "fingerprint")) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(d, "status")) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(d, "host")))
            return snprintf(why, size, "device %d lacks fingerprint, status or host", i), false;
        const cJSON *mpi = cJSON_GetObjectItemCaseSensitive(d, "mpi");
        if (mpi && !valid_mpi_record(mpi))
            return snprintf(why, size, "device %d: \"mpi\" is not {rank, ranks, run} with 0 <= rank < ranks", i), false;
        if (!report_number(d, "seconds", 0, 0, REPORT_MAX_SECONDS, detail, sizeof detail))
            return snprintf(why, size, "device %d: %s", i, detail), false;
        const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(d, "peaks");
        peak_result pr;
        if (peaks && !cJSON_IsNull(peaks) && peak_from_json(peaks, &pr) != TSR_SUCCESS)
            return snprintf(why, size, "device %d: %s", i, tsr_last_error()), false;
        const cJSON *results = cJSON_GetObjectItemCaseSensitive(d, "results");
        if (results && !cJSON_IsArray(results)) return snprintf(why, size, "device %d: results is not an array", i), false;
        int j = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, results) {
            if (!report_valid_result(r, detail, sizeof detail))
                return snprintf(why, size, "device %d, result %d: %s", i, j, detail), false;
            ++j;
        }
        ++i;
    }
    /* Numbers nothing above checks (the device's "info", a "comparison" an older tessera wrote, ...):
     * finite, as every report tessera writes has them. */
    const cJSON *bad = non_finite(root);
    if (bad)
        return snprintf(why, size, "\"%s\" is %g: not a finite number", bad->string ? bad->string : "(array item)",
                        bad->valuedouble), false;
    return true;
}

tsr_status report_load(const char *path, cJSON **root) {
    cJSON *r = NULL;
    *root = NULL;
    tsr_status st = tsr_read_json(path, "report", &r);
    if (st != TSR_SUCCESS) return st;
    char why[256];
    if (!report_validate(r, why, sizeof why)) {
        cJSON_Delete(r);
        return tsr_fail(TSR_ERR_CORRUPT, "%s is not a tessera report: %s", path, why);
    }
    *root = r;
    return TSR_SUCCESS;
}

tsr_status report_parse(const char *text, size_t size, const char *name, cJSON **root) {
    *root = NULL;
    if (!text || memchr(text, '\0', size) || text[size] != '\0')
        return tsr_fail(TSR_ERR_CORRUPT, "report %s is unusable: not NUL-terminated text of %zu bytes", name, size);
    const char *end = NULL;
    /* As tsr_read_json: the NUL is part of the input, so trailing garbage is an error too. */
    cJSON *r = cJSON_ParseWithLengthOpts(text, size + 1, &end, true);
    if (!r)
        return tsr_fail(TSR_ERR_CORRUPT, "report %s is unusable: not valid JSON (truncated or damaged near byte %ld)",
                        name, end ? (long)(end - text) : -1L);
    char why[256];
    if (!report_validate(r, why, sizeof why)) {
        cJSON_Delete(r);
        return tsr_fail(TSR_ERR_CORRUPT, "%s is not a tessera report: %s", name, why);
    }
    *root = r;
    return TSR_SUCCESS;
}

/* The key of (a, b) for a util_index: both strings with the first one's length, so no two pairs
 * collide. malloc'ed (NULL when out of memory); *len receives its length. */
static char *pair_key(const char *a, const char *b, size_t *len) {
    size_t la = strlen(a), lb = strlen(b);
    char *key = malloc(la + lb + 32);
    if (!key) return NULL;
    int n = snprintf(key, 32, "%zu:", la);
    memcpy(key + n, a, la);
    memcpy(key + n + la, b, lb);
    *len = (size_t)n + la + lb;
    return key;
}

/* A note, unless the merged report has it already (merging a report twice, or a merged report
 * with one of its sources, says it once). */
static void add_note(cJSON *notes, const char *text) {
    const cJSON *n;
    cJSON_ArrayForEach(n, notes) if (strcmp(cJSON_GetStringValue(n), text) == 0) return;
    cJSON_AddItemToArray(notes, cJSON_CreateString(text));
}

/* Whether two runs of a device may be of one processor: unless both name theirs (info.host_cpu, a
 * CPU device's) and the two differ. */
static bool same_processor(const cJSON *a, const cJSON *b) {
    const char *x = util_json_text(cJSON_GetObjectItemCaseSensitive(a, "info"), "host_cpu");
    const char *y = util_json_text(cJSON_GetObjectItemCaseSensitive(b, "info"), "host_cpu");
    return !*x || !*y || strcmp(x, y) == 0;
}

/* Ranks of one MPI run (`report --mpi`) that measured on one host did so at the same time: a
 * note per such host, from the devices' "mpi" records. `hosts` holds, per (run, host) in the
 * order first seen, an object {"run", "host", "ranks": [...], "cpus": [...]}: the processors its
 * CPU devices name (info.host_cpu), two of which say the host name covers several machines (VMs
 * cloned from one image keep their hostname), whose ranks did not compete. */
static tsr_status note_rank_host(util_index *ix, cJSON *hosts, const cJSON *device) {
    const cJSON *mpi = cJSON_GetObjectItemCaseSensitive(device, "mpi");
    if (!mpi) return TSR_SUCCESS;
    const char *run = util_json_text(mpi, "run"), *host = util_json_text(device, "host");
    int rank = (int)util_json_num(mpi, "rank");
    size_t len = 0;
    bool found = false;
    char *key = pair_key(run, host, &len);
    void **slot = key ? util_index_get(ix, key, len, &found) : NULL;
    free(key);
    if (!slot) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory merging reports");
    cJSON *group = found ? *slot : NULL;
    if (!group) {
        group = cJSON_CreateObject();
        cJSON_AddStringToObject(group, "run", run);
        cJSON_AddStringToObject(group, "host", host);
        cJSON_AddArrayToObject(group, "ranks");
        cJSON_AddArrayToObject(group, "cpus");
        cJSON_AddItemToArray(hosts, group);
        *slot = group;
    }
    const char *cpu = util_json_text(cJSON_GetObjectItemCaseSensitive(device, "info"), "host_cpu");
    cJSON *cpus = cJSON_GetObjectItemCaseSensitive(group, "cpus"), *c;
    bool known = !*cpu;
    cJSON_ArrayForEach(c, cpus) known |= strcmp(cJSON_GetStringValue(c), cpu) == 0;
    if (!known) cJSON_AddItemToArray(cpus, cJSON_CreateString(cpu));
    cJSON *ranks = cJSON_GetObjectItemCaseSensitive(group, "ranks"), *r;
    cJSON_ArrayForEach(r, ranks) if (r->valueint == rank) return TSR_SUCCESS;
    cJSON_AddItemToArray(ranks, cJSON_CreateNumber(rank));
    return TSR_SUCCESS;
}

static void add_shared_host_notes(cJSON *notes, const cJSON *hosts) {
    const cJSON *group;
    cJSON_ArrayForEach(group, hosts) {
        const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(group, "ranks"), *r;
        int n = cJSON_GetArraySize(ranks), i = 0;
        if (n < 2) continue;
        char list[512] = "";
        size_t used = 0;
        cJSON_ArrayForEach(r, ranks) {
            const char *sep = i == 0 ? "" : i == n - 1 ? " and " : ", ";
            int w = snprintf(list + used, sizeof list - used, "%s%d", sep, r->valueint);
            if (w < 0 || (size_t)w >= sizeof list - used) break;
            used += (size_t)w, ++i;
        }
        char note[1200];
        const cJSON *cpus = cJSON_GetObjectItemCaseSensitive(group, "cpus");
        if (cJSON_GetArraySize(cpus) > 1)
            snprintf(note, sizeof note,
                     "ranks %s of MPI run %s name one host, '%s', but %d processors ('%s', '%s'%s): several machines "
                     "under one host name, not one shared by the ranks",
                     list, util_json_text(group, "run"), util_json_text(group, "host"), cJSON_GetArraySize(cpus),
                     cJSON_GetStringValue(cJSON_GetArrayItem(cpus, 0)), cJSON_GetStringValue(cJSON_GetArrayItem(cpus, 1)),
                     cJSON_GetArraySize(cpus) > 2 ? ", ..." : "");
        else
            snprintf(note, sizeof note,
                     "ranks %s of MPI run %s measured on one host, '%s', at the same time: their timings competed for "
                     "its processors and memory",
                     list, util_json_text(group, "run"), util_json_text(group, "host"));
        add_note(notes, note);
    }
}

tsr_status report_merge_roots(cJSON **roots, const char *const *names, size_t n, cJSON **out) {
    *out = NULL;
    tsr_status st = TSR_SUCCESS;
    if (n == 0) st = tsr_fail(TSR_ERR_INVALID_ARG, "--merge needs at least one report");
    /* "created": the newest source's, so merging the same reports again gives the same bytes. */
    const char *created = NULL;
    for (size_t f = 0; f < n; ++f) {
        const char *c = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(roots[f], "created"));
        if (c && (!created || strcmp(c, created) > 0)) created = c;
    }
    cJSON *merged = st == TSR_SUCCESS ? report_new(created) : NULL;
    cJSON *sources = merged ? cJSON_AddArrayToObject(merged, "merged_from") : NULL;
    cJSON *hosts = cJSON_CreateArray();
    if (st == TSR_SUCCESS && (!sources || !hosts))
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory merging reports");
    cJSON *devices = cJSON_GetObjectItemCaseSensitive(merged, "devices");
    cJSON *notes = cJSON_GetObjectItemCaseSensitive(merged, "notes");
    /* (fingerprint, host) -> the kept device entry: one lookup per device, not a scan. */
    util_index kept = {0}, rank_hosts = {0};
    for (size_t f = 0; f < n && st == TSR_SUCCESS; ++f) {
        cJSON *root = roots[f];
        cJSON_AddItemToArray(sources, cJSON_CreateString(names[f]));
        const cJSON *note;
        cJSON_ArrayForEach(note, cJSON_GetObjectItemCaseSensitive(root, "notes")) add_note(notes, note->valuestring);
        cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "devices")->child;
        while (d && st == TSR_SUCCESS) {
            cJSON *next = d->next;
            cJSON_DetachItemViaPointer(cJSON_GetObjectItemCaseSensitive(root, "devices"), d);
            cJSON_DeleteItemFromObjectCaseSensitive(d, "source"); /* ours, not a copy's */
            cJSON_AddStringToObject(d, "source", names[f]);
            st = note_rank_host(&rank_hosts, hosts, d);
            /* The same device on the same host twice: keep the newer measurement. Identical
             * devices on different hosts are different machines and both stay. A device that
             * could not be opened has no fingerprint to say which it is: each such entry stays. */
            size_t len = 0;
            bool found = false, unknown = util_json_text(d, "fingerprint")[0] == '\0';
            char *key = unknown ? NULL : pair_key(util_json_text(d, "fingerprint"), util_json_text(d, "host"), &len);
            void **slot = key ? util_index_get(&kept, key, len, &found) : NULL;
            free(key);
            if (st == TSR_SUCCESS && !unknown && !slot)
                st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory merging reports");
            if (st != TSR_SUCCESS) {
                cJSON_Delete(d);
                break;
            }
            cJSON *dup = found ? *slot : NULL;
            /* Runs that name different processors are two machines of one host name (two VMs; a
             * Zen 4 and a Zen 5 PoCL names alike), not one device twice: the duplicate, if any, is
             * a kept run of the same fingerprint and host on the same (or an unnamed) processor. */
            if (dup && !same_processor(dup, d)) {
                cJSON *other;
                cJSON_ArrayForEach(other, devices) {
                    if (other != dup && strcmp(util_json_text(other, "fingerprint"), util_json_text(d, "fingerprint")) == 0 &&
                        strcmp(util_json_text(other, "host"), util_json_text(d, "host")) == 0 && same_processor(other, d))
                        break;
                }
                dup = other;
            }
            if (!dup) {
                cJSON_AddItemToArray(devices, d);
                if (slot && !found) *slot = d;
            } else {
                bool newer = strcmp(util_json_text(d, "created"), util_json_text(dup, "created")) > 0;
                char text[1024];
                snprintf(text, sizeof text, "duplicate: '%s' on host '%s' is in %s and %s; kept the %s one (%s)",
                         cJSON_GetStringValue(
                             cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "info"), "name"))
                             ?: util_json_text(d, "fingerprint"),
                         util_json_text(d, "host"), util_json_text(dup, "source"), names[f],
                         newer ? "newer" : "earlier",
                         newer ? util_json_text(d, "created") : util_json_text(dup, "created"));
                cJSON_AddItemToArray(notes, cJSON_CreateString(text));
                if (newer) {
                    if (*slot == dup) *slot = d;
                    cJSON_ReplaceItemViaPointer(devices, dup, d);
                } else {
                    cJSON_Delete(d);
                }
            }
            d = next;
        }
    }
    for (size_t f = 0; f < n; ++f)
        cJSON_Delete(roots[f]), roots[f] = NULL;
    util_index_free(&kept);
    util_index_free(&rank_hosts);
    if (st == TSR_SUCCESS) add_shared_host_notes(notes, hosts);
    cJSON_Delete(hosts);
    if (st != TSR_SUCCESS) {
        cJSON_Delete(merged);
        return st;
    }
    report_attach_comparison(merged);
    *out = merged;
    return TSR_SUCCESS;
}

tsr_status report_merge(const char *const *paths, size_t npaths, cJSON **out) {
    *out = NULL;
    if (npaths == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "--merge needs at least one report");
    cJSON **roots = calloc(npaths, sizeof *roots);
    if (!roots) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory merging reports");
    tsr_status st = TSR_SUCCESS;
    for (size_t f = 0; f < npaths && st == TSR_SUCCESS; ++f)
        st = report_load(paths[f], &roots[f]);
    if (st == TSR_SUCCESS) st = report_merge_roots(roots, paths, npaths, out);
    for (size_t f = 0; f < npaths; ++f)
        cJSON_Delete(roots[f]);
    free(roots);
    return st;
}

