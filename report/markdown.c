/* report.md from a report tree: per-case tables of every device's rows, the comparison, the
 * peaks, the notes; every foreign string escaped. */
#define _GNU_SOURCE
#include "report_parts.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */


/* Every row of every device, grouped by case (cases in first-seen order; within a case, device
 * order then row order), with each device's first CLBlast row per case: built with indexes, so
 * that a report of millions of rows renders in linear time. */
typedef struct md_row {
    const cJSON *device, *row, *peer;
    size_t device_index, case_index;
    bool failure; /* row is one of the device's "failures": a case that failed or did not run */
} md_row;

typedef struct md_rows {
    md_row *rows;       /* grouped by case */
    const char **cases; /* case ids, first-seen order */
    size_t *starts;     /* rows of case c: starts[c] .. starts[c + 1] - 1 */
    size_t nrows, ncases;
} md_rows;

static void md_rows_free(md_rows *m) {
    free(m->rows), free(m->cases), free(m->starts);
    memset(m, 0, sizeof *m);
}

/* The index of case `id` in `cases`, appended (with the next index) when it is new. */
static tsr_status case_index(util_index *ix, const char *id, const char **cases, size_t *ncases, size_t *index) {
    bool found = false;
    void **slot = util_index_get(ix, id, strlen(id), &found);
    if (!slot) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    if (!found) *slot = (void *)(uintptr_t)*ncases, cases[(*ncases)++] = id;
    *index = (size_t)(uintptr_t)*slot;
    return TSR_SUCCESS;
}

static tsr_status md_rows_build(const cJSON *root, md_rows *out) {
    memset(out, 0, sizeof *out);
    size_t total = 0;
    const cJSON *d, *r;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        total += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "results"));
        total += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "failures"));
    }
    md_row *flat = calloc(total ? total : 1, sizeof *flat);
    const char **cases = calloc(total ? total : 1, sizeof *cases);
    util_index case_ix = {0}, peer_ix = {0};
    tsr_status st = flat && cases ? TSR_SUCCESS : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    size_t n = 0, ncases = 0, di = 0;
    char key[64];
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "results")) {
            if (st != TSR_SUCCESS) break;
            size_t ci = 0;
            if ((st = case_index(&case_ix, util_json_text(r, "case"), cases, &ncases, &ci)) != TSR_SUCCESS) break;
            bool found = false;
            flat[n++] = (md_row){.device = d, .row = r, .device_index = di, .case_index = ci};
            if (strncmp(util_json_text(r, "impl"), "clblast", 7) == 0) { /* the first one per device and case */
                int len = snprintf(key, sizeof key, "%zu/%zu", di, ci);
                void **p = util_index_get(&peer_ix, key, (size_t)len, &found);
                if (!p) st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
                else if (!found) *p = (void *)r;
            }
        }
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "failures")) { /* after the device's rows */
            const char *id = util_json_text(r, "case");
            if (st != TSR_SUCCESS || strcmp(id, "peaks") == 0) continue; /* peaks: in the device table */
            size_t ci = 0;
            if ((st = case_index(&case_ix, id, cases, &ncases, &ci)) != TSR_SUCCESS) break;
            flat[n++] = (md_row){.device = d, .row = r, .device_index = di, .case_index = ci, .failure = true};
        }
        ++di;
    }
    /* Counting sort by case, stable: the order within a case stays device order, row order. */
    size_t *starts = st == TSR_SUCCESS ? calloc(ncases + 1, sizeof *starts) : NULL;
    md_row *rows = st == TSR_SUCCESS ? calloc(total ? total : 1, sizeof *rows) : NULL;
    if (st == TSR_SUCCESS && (!starts || !rows)) st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == TSR_SUCCESS) {
        for (size_t i = 0; i < n; ++i) ++starts[flat[i].case_index + 1];
        for (size_t c = 0; c < ncases; ++c) starts[c + 1] += starts[c];
        size_t *next = calloc(ncases + 1, sizeof *next);
        if (!next) {
            st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        } else {
            memcpy(next, starts, (ncases + 1) * sizeof *next);
            for (size_t i = 0; i < n; ++i) {
                md_row row = flat[i];
                if (!row.failure && strncmp(util_json_text(row.row, "impl"), "tessera", 7) == 0) {
                    bool found = false;
                    int len = snprintf(key, sizeof key, "%zu/%zu", row.device_index, row.case_index);
                    void **p = util_index_get(&peer_ix, key, (size_t)len, &found);
                    if (!p) {
                        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
                        break;
                    }
                    row.peer = found ? *p : NULL;
                }
                rows[next[row.case_index]++] = row;
            }
            free(next);
        }
    }
    util_index_free(&case_ix);
    util_index_free(&peer_ix);
    free(flat);
    if (st != TSR_SUCCESS) {
        free(cases), free(starts), free(rows);
        return st;
    }
    *out = (md_rows){rows, cases, starts, n, ncases};
    return TSR_SUCCESS;
}

/* How a device's rows were timed, from their "timing" fields (device: profiling events; host:
 * the host clock): one method, "mixed", or "-" where the rows do not say. */
static const char *timing_method(const cJSON *d) {
    const char *seen = NULL;
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "results")) {
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "timing"));
        if (!t) continue;
        const char *method = strcmp(t, "device") == 0 ? "device" : strcmp(t, "host") == 0 ? "host" : "other";
        if (seen && strcmp(seen, method) != 0) return "mixed";
        seen = method;
    }
    return seen ? seen : "-";
}

/* A line per device some of whose classes run untuned because their tuned entries are stale:
 * never tuned is a device's ordinary start, tuned for an older kernel source a silent loss. */
static void stale_markdown(util_text *b, const cJSON *d) {
    int ops_listed = 0;
    const cJSON *op;
    cJSON_ArrayForEach(op, cJSON_GetObjectItemCaseSensitive(d, "configs")) {
        bool listed = false;
        const cJSON *cls;
        cJSON_ArrayForEach(cls, op) {
            const char *state = cJSON_GetStringValue(cls);
            if (!op->string || !cls->string || !state || strcmp(state, "default-stale") != 0) continue;
            if (!ops_listed && !listed) {
                util_text_printf(b, "\n**Untuned because stale** on ");
                util_text_md(b, report_device_name(d));
                util_text_printf(b, " (tuned entries exist, for a kernel source that has changed since: these run the "
                                     "built-in default until `tessera tune` re-tunes them):");
            }
            if (!listed) {
                util_text_printf(b, "%s", ops_listed ? "; " : " ");
                util_text_md(b, op->string);
                util_text_printf(b, " ");
            } else {
                util_text_printf(b, ", ");
            }
            util_text_md(b, cls->string);
            listed = true;
        }
        ops_listed += listed;
    }
    if (ops_listed) util_text_printf(b, ".\n");
}

/* "#2 name (platform)": a device as the comparison names it. */
static void comparison_device(util_text *b, const cJSON *pd) {
    util_text_printf(b, "#%d ", (int)util_json_num(pd, "device") + 1);
    util_text_md(b, util_json_text(pd, "name"));
    const char *cpu = util_json_text(pd, "processor");
    if (*cpu) {
        util_text_printf(b, " on ");
        util_text_md(b, cpu);
    }
    const char *platform = util_json_text(pd, "platform");
    if (*platform) {
        util_text_printf(b, " (");
        util_text_md(b, platform);
        util_text_printf(b, ")");
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pd, "simulator"))) util_text_printf(b, " (simulator)");
}

/* The "Side by side" section: a column per device, a ratio column per device after the baseline. */
static void comparison_markdown(util_text *b, const cJSON *cmp) {
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(cmp, "devices"), *pd, *row, *e;
    int base = (int)util_json_num(cmp, "baseline"), bp = 0, np = cJSON_GetArraySize(parts), k = 0;
    const cJSON *bdev = NULL;
    cJSON_ArrayForEach(pd, parts) {
        if ((int)util_json_num(pd, "device") == base) bp = k, bdev = pd;
        ++k;
    }
    util_text_printf(b, "\n## Side by side\n\nBaseline: ");
    comparison_device(b, bdev);
    util_text_printf(b, ", the first device with results in the report's order (the order of `--device`; with "
                         "`--merge`, the order of the files), passing over simulators. Each ratio is the baseline's median time over the device's at the same case, "
                         "shape and implementation: above 1 is faster than the baseline.\n\n");
    cJSON_ArrayForEach(pd, parts) {
        const cJSON *same = cJSON_GetObjectItemCaseSensitive(pd, "same_hardware_as_baseline");
        if (!same) continue;
        util_text_printf(b, "- ");
        comparison_device(b, pd);
        if (cJSON_IsTrue(same)) {
            bool same_platform = strcmp(util_json_text(pd, "platform"), util_json_text(bdev, "platform")) == 0;
            util_text_printf(b, ": the same processor as the baseline (CPU devices of host ");
            util_text_md(b, util_json_text(pd, "host"));
            util_text_printf(b, "), %s: the ratio compares software on one CPU.\n",
                             same_platform ? "another device of the same OpenCL implementation"
                                            : "through another OpenCL implementation");
        } else {
            util_text_printf(b, ": not known to be the same hardware as the baseline: the ratio compares devices%s.\n",
                             cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pd, "simulator"))
                                  ? " (a simulator's times say nothing about hardware)" : "");
        }
    }
    util_text_printf(b, "\n| case | shape | impl |");
    cJSON_ArrayForEach(pd, parts) {
        util_text_printf(b, " ");
        comparison_device(b, pd);
        util_text_printf(b, " |");
    }
    cJSON_ArrayForEach(pd, parts) if ((int)util_json_num(pd, "device") != base) util_text_printf(b, " #%d / #%d |", (int)util_json_num(pd, "device") + 1, base + 1);
    util_text_printf(b, "\n|---|---|---|");
    for (int i = 0; i < 2 * np - 1; ++i) util_text_printf(b, "---:|");
    util_text_printf(b, "\n");
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(cmp, "rows")) {
        static const char *const fields[] = {"case", "shape", "impl"};
        for (size_t f = 0; f < 3; ++f) {
            util_text_printf(b, "| ");
            util_text_md(b, util_json_text(row, fields[f]));
            util_text_printf(b, " ");
        }
        const cJSON *entries = cJSON_GetObjectItemCaseSensitive(row, "entries");
        cJSON_ArrayForEach(e, entries) {
            char rate[32];
            if (cJSON_IsNull(e)) {
                util_text_printf(b, "| - ");
            } else if (cJSON_GetObjectItemCaseSensitive(e, "error")) {
                const char *error = util_json_text(e, "error");
                util_text_printf(b, "| %s", strncmp(error, "not run", 7) == 0 ? "" : "failed: ");
                util_text_md(b, error);
                util_text_printf(b, " ");
            } else {
                util_text_printf(b, "| %s %s (%.3f ms", util_format_rate(util_json_num(e, "rate"), rate, sizeof rate),
                                 util_json_text(row, "unit"), util_json_num(e, "time_ms"));
                const char *impl = util_json_text(e, "impl");
                if (strcmp(impl, util_json_text(row, "impl")) != 0) { /* tessera's path on this device */
                    util_text_printf(b, ", ");
                    util_text_md(b, impl);
                }
                util_text_printf(b, ") ");
            }
        }
        k = 0;
        cJSON_ArrayForEach(e, entries) {
            if (k++ == bp) continue;
            const cJSON *ratio = cJSON_GetObjectItemCaseSensitive(e, "ratio");
            if (!cJSON_IsNumber(ratio)) util_text_printf(b, "| - ");
            else if (ratio->valuedouble >= 100) util_text_printf(b, "| **%.0f** ", ratio->valuedouble);
            else util_text_printf(b, "| **%.3g** ", ratio->valuedouble); /* 0.0412 as such, not 0.04 */
        }
        util_text_printf(b, "|\n");
    }
}

/* report.md, built in memory (written atomically by the caller). Every string that came from a
 * report (names, hosts, shapes, notes, errors, case ids, alt texts) goes through util_text_md. */
char *report_markdown(const cJSON *root, const png_result *pngs, size_t npngs, bool png_tool, tsr_status *st) {
    *st = TSR_SUCCESS;
    md_rows m;
    if ((*st = md_rows_build(root, &m)) != TSR_SUCCESS) return NULL;
    util_text b = {0};
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    int ndev = cJSON_GetArraySize(devices);
    util_text_printf(&b, "# tessera report\n\nCreated ");
    util_text_md(&b, util_json_text(root, "created"));
    util_text_printf(&b, " by tessera ");
    util_text_md(&b, util_json_text(root, "tessera_version"));
    util_text_printf(&b, ": %d device%s, %zu failed.\n", ndev, ndev == 1 ? "" : "s", report_failed_devices(root));
    const cJSON *src;
    cJSON_ArrayForEach(src, cJSON_GetObjectItemCaseSensitive(root, "merged_from")) {
        util_text_printf(&b, "Merged from ");
        util_text_md(&b, cJSON_GetStringValue(src));
        util_text_printf(&b, ".\n");
    }
    const cJSON *note;
    cJSON_ArrayForEach(note, cJSON_GetObjectItemCaseSensitive(root, "notes")) {
        util_text_printf(&b, "\nNote: ");
        util_text_md(&b, cJSON_GetStringValue(note));
        util_text_printf(&b, "\n");
    }
    util_text_printf(&b, "\n## Devices\n\n| # | device | type | platform | driver | host | memory roof GB/s | fp32 roof GFLOP/s | "
                         "launch round trip µs | tuning | timing | status |\n|---|---|---|---|---|---|---:|---:|---:|---|---|---|\n");
    int i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, devices) {
        const cJSON *info = cJSON_GetObjectItemCaseSensitive(d, "info"), *peaks = cJSON_GetObjectItemCaseSensitive(d, "peaks");
        const cJSON *rt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(peaks, "launch_us"), "round_trip");
        char bw[32], fl[32], lat[32];
        util_text_printf(&b, "| %d | ", ++i);
        util_text_md(&b, report_device_name(d));
        const char *cpu = util_json_text(info, "host_cpu"); /* a CPU driver's name may not tell processors apart */
        if (*cpu) {
            util_text_printf(&b, " (");
            util_text_md(&b, cpu);
            util_text_printf(&b, ")");
        }
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "simulator")))
            util_text_printf(&b, " (simulator: times say nothing about hardware)");
        static const char *const fields[] = {"type", "platform_name", "driver_version"};
        for (size_t f = 0; f < 3; ++f) {
            util_text_printf(&b, " | ");
            util_text_md(&b, util_json_text(info, fields[f]));
        }
        util_text_printf(&b, " | ");
        util_text_md(&b, util_json_text(d, "host"));
        util_text_printf(&b, " | %s | %s | %s | ", util_format_rate(util_json_num(peaks, "bandwidth_gbps"), bw, sizeof bw),
                         util_format_rate(util_json_num(peaks, "compute_gflops"), fl, sizeof fl),
                         util_format_rate(util_json_num(rt, "median"), lat, sizeof lat));
        util_text_md(&b, util_json_text(d, "tuning"));
        util_text_printf(&b, " | %s", timing_method(d));
        const char *status = util_json_text(d, "status");
        if (strcmp(status, "ok") == 0) {
            util_text_printf(&b, " | ok |\n");
        } else {
            util_text_printf(&b, " | **");
            util_text_md(&b, *status ? status : "failed"); /* skipped, partial; failed in older reports */
            util_text_printf(&b, "**: ");
            util_text_md(&b, util_json_text(d, "error"));
            util_text_printf(&b, " |\n");
        }
    }
    cJSON_ArrayForEach(d, devices) { /* where the driver's timestamps could not be used */
        const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(d, "peaks");
        if (strcmp(util_json_text(peaks, "timing"), "host") != 0) continue;
        util_text_printf(&b, "\nTiming on ");
        util_text_md(&b, report_device_name(d));
        util_text_printf(&b, ": host clock (batches of launches less the %.0f µs empty-launch cost) for its peaks and "
                             "tuning: ", util_json_num(peaks, "empty_launch_us"));
        util_text_md(&b, util_json_text(peaks, "timing_reason"));
        util_text_printf(&b, "\n");
    }
    cJSON_ArrayForEach(d, devices) stale_markdown(&b, d);
    cJSON *cmp = report_compare(root); /* recomputed: report.json's copy may come from an older tessera */
    if (cmp) comparison_markdown(&b, cmp);
    cJSON_Delete(cmp);
    util_text_printf(&b, "\n## Results\n\nMedian time of repeated runs; the rate counts each op's arithmetic (GELU: 8 operations "
                         "per element) or, for the copy kernel, bytes moved; %% of roofline is the rate over min(fp32 roof, "
                         "intensity × memory roof) with this device's measured roofs; \"vs CLBlast\" is CLBlast's time over "
                         "tessera's in the same run.\n");
    for (size_t c = 0; c < m.ncases; ++c) {
        util_text_printf(&b, "\n### ");
        util_text_md(&b, m.cases[c]);
        util_text_printf(&b, "\n\n| device | shape | impl | ms | rate | intensity FLOP/B | %% of roofline | vs CLBlast | rel_err |\n"
                             "|---|---|---|---:|---:|---:|---:|---:|---:|\n");
        for (size_t k = m.starts[c]; k < m.starts[c + 1]; ++k) {
            const md_row *w = &m.rows[k];
            const cJSON *r = w->row;
            if (w->failure) { /* the error in the impl column, the numbers empty */
                const char *error = util_json_text(r, "error");
                util_text_printf(&b, "| ");
                util_text_md(&b, report_device_name(w->device));
                util_text_printf(&b, " | ");
                util_text_md(&b, util_json_text(r, "shape"));
                util_text_printf(&b, " | %s", strncmp(error, "not run", 7) == 0 ? "" : "**failed**: ");
                util_text_md(&b, error);
                util_text_printf(&b, " | - | - | - | - | | - |\n");
                continue;
            }
            char vs[32] = "", err[32] = "-", inten[32] = "-", rate[32];
            if (w->peer) snprintf(vs, sizeof vs, "%.2fx", util_json_num(w->peer, "time_ms") / util_json_num(r, "time_ms"));
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "rel_err");
            if (cJSON_IsNumber(e)) snprintf(err, sizeof err, "%.1e", e->valuedouble);
            if (util_json_num(r, "flops") > 0)
                snprintf(inten, sizeof inten, "%.2f", util_json_num(r, "flops") / util_json_num(r, "bytes"));
            util_text_printf(&b, "| ");
            util_text_md(&b, report_device_name(w->device));
            util_text_printf(&b, " | ");
            util_text_md(&b, util_json_text(r, "shape"));
            util_text_printf(&b, " | ");
            util_text_md(&b, util_json_text(r, "impl"));
            const char *error = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "error"));
            if (error) { /* a measurement error in place of the rate */
                util_text_printf(&b, " | %.3f | **", util_json_num(r, "time_ms"));
                util_text_md(&b, error);
                util_text_printf(&b, "** | %s | - | %s | %s |\n", inten, vs, err);
                continue;
            }
            util_text_printf(&b, " | %.3f | %s %s | %s | %.0f%% | %s | %s |\n", util_json_num(r, "time_ms"),
                             util_format_rate(report_op_rate(r), rate, sizeof rate), report_op_unit(r), inten,
                             100.0 * report_roofline_fraction(w->device, r), vs, err);
        }
    }
    md_rows_free(&m);
    const cJSON *pytorch = cJSON_GetObjectItemCaseSensitive(root, "pytorch");
    if (pytorch) report_pytorch_markdown(&b, pytorch);
    util_text_printf(&b, "\n## Charts\n\nOne roofline per device (log-log: x is arithmetic intensity in FLOP per byte that must "
                         "move, y is GFLOP/s). The slanted line is the measured memory roof (bandwidth × intensity), the flat "
                         "one the measured fp32 roof; where they meet is the ridge point. An op left of the ridge is bound by "
                         "memory, right of it by arithmetic; its height under the roof is what is left on the table. Filled "
                         "circles are tessera, hollow squares CLBlast.\n\n");
    i = 0;
    cJSON_ArrayForEach(d, devices) {
        char slug[128];
        report_device_slug(d, i++, slug, sizeof slug);
        if (!cJSON_GetObjectItemCaseSensitive(d, "peaks")) continue;
        util_text_printf(&b, "![roofline of ");
        util_text_md(&b, report_device_name(d));
        util_text_printf(&b, "](roofline-%s.svg)\n\n", slug);
    }
    util_text_printf(&b, "Devices side by side, op by op (tessera's rate; the tables above give the %% of each device's "
                         "roofline):\n\n![devices per op](bars.svg)\n");
    /* The PNG copies: made, missing (and why), or not attempted. */
    if (!png_tool) {
        util_text_printf(&b, "\nPNG copies: none (no rsvg-convert on PATH).\n");
    } else {
        util_text_printf(&b, "\nPNG copies (rsvg-convert):\n\n");
        for (size_t p = 0; p < npngs; ++p) {
            util_text_printf(&b, "- ");
            util_text_md(&b, pngs[p].name);
            if (*pngs[p].why) {
                util_text_printf(&b, ": **missing** (");
                util_text_md(&b, pngs[p].why);
                util_text_printf(&b, ")");
            }
            util_text_printf(&b, "\n");
        }
    }
    char *text = util_text_finish(&b);
    if (!text) *st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory building report.md");
    return text;
}

