/* Derived numbers of a report: names and rates of rows, the roofline fraction, and the devices
 * side by side (report_compare), which report.md and the bar chart both read. */
#define _GNU_SOURCE
#include "report_parts.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- derived numbers: roofline and peers ---- */


/* The roofline's attainable GFLOP/s at an intensity (FLOP per byte), 0 without peaks. */
static double attainable(const cJSON *device, double intensity) {
    const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(device, "peaks");
    double bw = util_json_num(peaks, "bandwidth_gbps"), fl = util_json_num(peaks, "compute_gflops");
    if (bw <= 0 || fl <= 0) return 0;
    return fmin(fl, bw * intensity);
}

/* Fraction of the roofline a row reaches (memory-bound rows without FLOPs: of the bandwidth). */
double report_roofline_fraction(const cJSON *device, const cJSON *row) {
    double flops = util_json_num(row, "flops"), bytes = util_json_num(row, "bytes");
    if (bytes <= 0) return 0;
    if (flops <= 0) {
        double bw = util_json_num(cJSON_GetObjectItemCaseSensitive(device, "peaks"), "bandwidth_gbps");
        return bw > 0 ? util_json_num(row, "gbps") / bw : 0;
    }
    double roof = attainable(device, flops / bytes);
    return roof > 0 ? util_json_num(row, "gflops") / roof : 0;
}

size_t report_failed_devices(const cJSON *root) {
    size_t n = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "devices")) n += strcmp(util_json_text(d, "status"), "ok") != 0;
    return n;
}

/* ---- names and rates ---- */

const char *report_op_unit(const cJSON *row) { return util_json_num(row, "flops") > 0 ? "GFLOP/s" : "GB/s"; }
double report_op_rate(const cJSON *row) { return util_json_num(row, "flops") > 0 ? util_json_num(row, "gflops") : util_json_num(row, "gbps"); }

const char *report_device_name(const cJSON *d) {
    const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "info"), "name"));
    return n ? n : util_json_text(d, "selector");
}

/* A file-name-safe slug of the device: index and name. */
void report_device_slug(const cJSON *d, int index, char *out, size_t size) {
    snprintf(out, size, "%d-", index + 1);
    size_t used = strlen(out);
    for (const char *c = report_device_name(d); *c && used + 1 < size; ++c) {
        char ch = *c;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (!ok && used > 0 && out[used - 1] == '-') continue;
        out[used++] = ok ? (char)(ch | (ch >= 'A' && ch <= 'Z' ? 0x20 : 0)) : '-';
    }
    while (used > 0 && out[used - 1] == '-') --used;
    out[used] = '\0';
}

/* ---- the devices side by side ---- */

/* A row's implementation family: tessera's rows compare across devices whatever path each took
 * ("tessera(im2col)" on one, "tessera(direct)" on another); a peer's by its name. */
static const char *impl_family(const char *impl) { return strncmp(impl, "tessera", 7) == 0 ? "tessera" : impl; }

/* (case, shape, family) as one index key, each part with its length so no two triples collide. */
static char *comparison_key(const char *id, const char *shape, const char *family, size_t *len) {
    size_t a = strlen(id), b = strlen(shape), c = strlen(family);
    char *key = malloc(a + b + c + 64);
    if (!key) return NULL;
    int n = snprintf(key, 64, "%zu:%zu:", a, b);
    memcpy(key + n, id, a);
    memcpy(key + n + a, shape, b);
    memcpy(key + n + a + b, family, c);
    *len = (size_t)n + a + b + c;
    return key;
}

static bool is_cpu(const cJSON *d) {
    const char *type = util_json_text(cJSON_GetObjectItemCaseSensitive(d, "info"), "type");
    return tsr_contains_nocase(type, "cpu");
}

/* The comparison row of (case, shape, family), made with an empty entry per participant. */
static cJSON *comparison_row(util_index *ix, cJSON *rows, const char *id, const char *op, const char *shape,
                             const char *family, int participants) {
    size_t len = 0;
    char *key = comparison_key(id, shape, family, &len);
    bool found = false;
    void **slot = key ? util_index_get(ix, key, len, &found) : NULL;
    free(key);
    if (!slot) return NULL;
    if (found) return *slot;
    cJSON *row = cJSON_CreateObject();
    cJSON_AddStringToObject(row, "case", id);
    if (op) cJSON_AddStringToObject(row, "op", op);
    cJSON_AddStringToObject(row, "shape", shape);
    cJSON_AddStringToObject(row, "impl", family);
    cJSON *entries = cJSON_AddArrayToObject(row, "entries");
    for (int i = 0; i < participants; ++i) cJSON_AddItemToArray(entries, cJSON_CreateNull());
    cJSON_AddItemToArray(rows, row);
    *slot = row;
    return row;
}

/* Sets the participant's entry if it is still empty (a device's first row of a key counts). */
static void set_entry(cJSON *row, int participant, cJSON *entry) {
    cJSON *entries = cJSON_GetObjectItemCaseSensitive(row, "entries");
    if (cJSON_IsNull(cJSON_GetArrayItem(entries, participant))) cJSON_ReplaceItemInArray(entries, participant, entry);
    else cJSON_Delete(entry);
}

cJSON *report_compare(const cJSON *root) {
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices"), *d, *r;
    /* participants: devices with a result or a failed case; the baseline: the first with a result */
    int ndev = cJSON_GetArraySize(devices), nparts = 0, baseline = -1;
    bool baseline_sim = false;
    int *part_of = calloc(ndev ? (size_t)ndev : 1, sizeof *part_of);
    if (!part_of) return NULL;
    int di = 0;
    cJSON_ArrayForEach(d, devices) {
        bool results = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "results")) > 0, failed_case = false;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "failures")) failed_case |= strcmp(util_json_text(r, "case"), "peaks") != 0;
        part_of[di] = results || failed_case ? nparts++ : -1;
        /* a simulator's times say nothing about hardware: the baseline only where all are */
        bool sim = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "simulator"));
        if (results && (baseline < 0 || (baseline_sim && !sim))) baseline = di, baseline_sim = sim;
        ++di;
    }
    if (nparts < 2 || baseline < 0) {
        free(part_of);
        return NULL;
    }
    cJSON *cmp = cJSON_CreateObject();
    cJSON_AddNumberToObject(cmp, "baseline", baseline);
    cJSON_AddStringToObject(cmp, "ratio", "the baseline's median time over the device's, at the same case, shape and "
                                          "implementation: above 1 is faster than the baseline");
    cJSON *parts = cJSON_AddArrayToObject(cmp, "devices");
    cJSON *rows = cJSON_AddArrayToObject(cmp, "rows");
    const cJSON *base = cJSON_GetArrayItem(devices, baseline);
    util_index ix = {0};
    bool oom = false;
    di = 0;
    cJSON_ArrayForEach(d, devices) {
        int p = part_of[di];
        if (p < 0) {
            ++di;
            continue;
        }
        cJSON *pd = cJSON_CreateObject();
        cJSON_AddNumberToObject(pd, "device", di);
        cJSON_AddStringToObject(pd, "name", report_device_name(d));
        cJSON_AddStringToObject(pd, "platform", util_json_text(cJSON_GetObjectItemCaseSensitive(d, "info"), "platform_name"));
        cJSON_AddStringToObject(pd, "host", util_json_text(d, "host"));
        /* Same hardware only where it is certain: CPU devices on one host run on that host's
         * processor. Identical names on one host may be two cards, so GPUs are never assumed. */
        /* (two machines may share a host name: where both name their processor, it must agree) */
        const char *cpu = util_json_text(cJSON_GetObjectItemCaseSensitive(d, "info"), "host_cpu");
        const char *base_cpu = util_json_text(cJSON_GetObjectItemCaseSensitive(base, "info"), "host_cpu");
        bool same = di != baseline && is_cpu(d) && is_cpu(base) && *util_json_text(d, "host") &&
                    strcmp(util_json_text(d, "host"), util_json_text(base, "host")) == 0 &&
                    (!*cpu || !*base_cpu || strcmp(cpu, base_cpu) == 0);
        if (*cpu) cJSON_AddStringToObject(pd, "processor", cpu);
        if (di != baseline) cJSON_AddBoolToObject(pd, "same_hardware_as_baseline", same);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "simulator"))) cJSON_AddTrueToObject(pd, "simulator");
        cJSON_AddItemToArray(parts, pd);
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "results")) {
            const char *impl = util_json_text(r, "impl");
            cJSON *row = comparison_row(&ix, rows, util_json_text(r, "case"), cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "op")),
                                        util_json_text(r, "shape"), impl_family(impl), nparts);
            if (!row) {
                oom = true;
                break;
            }
            if (!cJSON_GetObjectItemCaseSensitive(row, "unit")) cJSON_AddStringToObject(row, "unit", report_op_unit(r));
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "device", di);
            cJSON_AddStringToObject(e, "impl", impl);
            cJSON_AddNumberToObject(e, "time_ms", util_json_num(r, "time_ms"));
            cJSON_AddNumberToObject(e, "rate", report_op_rate(r));
            const cJSON *timing = cJSON_GetObjectItemCaseSensitive(r, "timing");
            if (cJSON_IsString(timing)) cJSON_AddStringToObject(e, "timing", timing->valuestring);
            set_entry(row, p, e);
        }
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "failures")) {
            if (oom || strcmp(util_json_text(r, "case"), "peaks") == 0) continue;
            cJSON *row = comparison_row(&ix, rows, util_json_text(r, "case"), cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "op")),
                                        util_json_text(r, "shape"), "tessera", nparts);
            if (!row) {
                oom = true;
                break;
            }
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "device", di);
            cJSON_AddStringToObject(e, "error", util_json_text(r, "error"));
            set_entry(row, p, e);
        }
        ++di;
    }
    util_index_free(&ix);
    /* Rows at least two devices have; each measured entry's ratio to the baseline's. */
    int bp = part_of[baseline];
    free(part_of);
    cJSON *row = rows->child;
    while (row) {
        cJSON *next = row->next, *entries = cJSON_GetObjectItemCaseSensitive(row, "entries"), *e;
        int present = 0;
        cJSON_ArrayForEach(e, entries) present += !cJSON_IsNull(e);
        if (present < 2) {
            cJSON_Delete(cJSON_DetachItemViaPointer(rows, row));
        } else {
            double base_ms = util_json_num(cJSON_GetArrayItem(entries, bp), "time_ms");
            cJSON_ArrayForEach(e, entries) {
                double ms = util_json_num(e, "time_ms");
                if (cJSON_IsObject(e) && base_ms > 0 && ms > 0) cJSON_AddNumberToObject(e, "ratio", base_ms / ms);
            }
        }
        row = next;
    }
    if (oom || cJSON_GetArraySize(rows) == 0) {
        cJSON_Delete(cmp);
        return NULL;
    }
    return cmp;
}

/* root["comparison"], replaced by a fresh one (or removed where there is nothing to compare). */
void report_attach_comparison(cJSON *root) {
    cJSON_DeleteItemFromObjectCaseSensitive(root, "comparison");
    cJSON *cmp = report_compare(root);
    if (cmp) cJSON_AddItemToObject(root, "comparison", cmp);
}

