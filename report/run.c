/* Running a report: every selected device's peaks, a budgeted tune where nothing is tuned for
 * it yet, and the suite, into one JSON tree (a fresh run and a merge render the same way). */
#define _GNU_SOURCE
#include "report_parts.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- running a report ---- */

/* A device that could not be used at all: "skipped" with the reason. */
static void skip_device(cJSON *entry, const char *what, tsr_status status) {
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "status", cJSON_CreateString("skipped"));
    char msg[1200];
    snprintf(msg, sizeof msg, "%s: %s: %s", what, tsr_status_str(status), tsr_last_error());
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "error", cJSON_CreateString(msg));
}

/* One part of a device's run that failed or did not run ("peaks", or a case at its shape): listed
 * in the device's "failures"; the rest of the device's run goes on. */
static void add_failure(cJSON *entry, const char *part, const char *op, const char *shape, const char *error) {
    cJSON *failures = cJSON_GetObjectItemCaseSensitive(entry, "failures");
    if (!failures) failures = cJSON_AddArrayToObject(entry, "failures");
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "case", part);
    if (op) cJSON_AddStringToObject(f, "op", op);
    if (shape) cJSON_AddStringToObject(f, "shape", shape);
    cJSON_AddStringToObject(f, "error", error);
    cJSON_AddItemToArray(failures, f);
}

static void add_failed_status(cJSON *entry, const char *part, const char *op, const char *shape, tsr_status status) {
    char msg[1200];
    snprintf(msg, sizeof msg, "%s: %s", tsr_status_str(status), tsr_last_error());
    add_failure(entry, part, op, shape, msg);
}

static void step(const report_options *opt) {
    if (opt->progress) opt->progress(opt->progress_user);
}

static void tune_step(const tsr_tune_progress *progress, void *user) {
    (void)progress;
    step(user);
}

/* Tune the device when neither the user's database nor tessera's built-in one has an entry for
 * it (any driver); say what was done. */
static void maybe_tune(tsr_device *dev, const report_options *opt, bool simulator, cJSON *entry) {
    char text[256];
    size_t entries = tsr_tuning_entries_for_device(dev);
    if (simulator) {
        snprintf(text, sizeof text, "not tuned: a simulator");
    } else if (entries) {
        snprintf(text, sizeof text, "%zu tuned entries for this device in the database or built in", entries);
    } else if (opt->tune_budget_s <= 0) {
        snprintf(text, sizeof text, "nothing tuned for this device; tuning skipped (--tune-budget 0): built-in defaults");
    } else {
        int nops = 0;
        for (const char *const *o = tsr_op_names(); *o; ++o) ++nops;
        tsr_tune_options to = {.budget_seconds = opt->tune_budget_s / nops,
                               .progress = opt->progress ? tune_step : NULL,
                               .user = (void *)opt};
        int ok = 0;
        for (const char *const *o = tsr_op_names(); *o; ++o) {
            if (!opt->quiet) fprintf(stderr, "report: tuning %s on %s (%.0f s)\n", *o, tsr_device_get_info(dev)->name, to.budget_seconds);
            size_t n = 0;
            ok += tsr_tune(dev, *o, &to, NULL, 0, &n) == TSR_SUCCESS;
        }
        snprintf(text, sizeof text, "tuned now: %d of %d ops in %.0f s (nothing was tuned for this device)", ok, nops,
                 opt->tune_budget_s);
    }
    cJSON_AddStringToObject(entry, "tuning", text);
}

/* Where each op's configuration comes from on this device, per class ("configs": op -> class ->
 * state): "tuned" (the database or built in, this device or a matching one), "override", "default"
 * (never tuned), or "default-stale": tuned entries exist, but every one for a kernel source that
 * has changed since, so the class runs the built-in default until it is re-tuned. */
static void record_configs(tsr_device *dev, cJSON *entry) {
    cJSON *configs = cJSON_AddObjectToObject(entry, "configs");
    for (const char *const *op = tsr_op_names(); *op; ++op) {
        cJSON *classes = cJSON_AddObjectToObject(configs, *op);
        for (const char *const *cls = tsr_op_classes(*op); *cls; ++cls) {
            tsr_config_info ci;
            if (tsr_config_lookup(dev, *op, *cls, &ci) != TSR_SUCCESS) {
                tsr_clear_error(); /* the suite's own rows report what fails */
                continue;
            }
            const char *state = ci.source == TSR_CONFIG_BUILTIN_DEFAULT
                                    ? (ci.stale_passed_over > 0 ? "default-stale" : "default")
                                : ci.source == TSR_CONFIG_ENV_OVERRIDE || ci.source == TSR_CONFIG_API_OVERRIDE
                                    ? "override"
                                    : "tuned";
            cJSON_AddStringToObject(classes, *cls, state);
        }
    }
}

/* A rate this far above the device's measured roof is a measurement error, not a result: the
 * roof and the row are measured minutes apart on a machine whose load moves rows by up to 20%
 * (bench.h), so 1.25 leaves room for that and for a peak test that misses a little; any driver
 * clock that runs slow or stops (rusticl's timestamps) is off by far more. Rows with FLOPs are
 * checked against the fp32 roof, rows without (copies) against the bandwidth roof: a row with
 * FLOPs may rightly beat the memory roof from cache. */
#define ROOF_MARGIN 1.25
/* Where the measured value is no roof, only orders of magnitude are an error (what a clock that
 * stands still produces): the reduced peak set (one width and layout: a floor that a good kernel
 * may beat several times over), and a copy whose bytes are fewer than the bandwidth test's
 * buffers (it may run from cache, at several times the memory's rate: a 1M-float copy moved
 * 42 GB/s on PoCL against a 21 GB/s roof measured on 128 MiB). */
#define LOOSE_ROOF_MARGIN 100.0

static void check_roofs(cJSON *entry) {
    const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(entry, "peaks");
    bool reduced = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(peaks, "reduced"));
    double compute = util_json_num(peaks, "compute_gflops"), bandwidth = util_json_num(peaks, "bandwidth_gbps");
    double peak_buffer = util_json_num(peaks, "buffer_bytes");
    cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(entry, "results")) {
        bool flops = util_json_num(row, "flops") > 0;
        double rate = util_json_num(row, flops ? "gflops" : "gbps"), roof = flops ? compute : bandwidth;
        bool from_cache = !flops && util_json_num(row, "bytes") < peak_buffer;
        double margin = reduced || from_cache ? LOOSE_ROOF_MARGIN : ROOF_MARGIN;
        if (!(roof > 0) || rate <= margin * roof) continue;
        char msg[256];
        snprintf(msg, sizeof msg, "measurement error: %.4g %s is above the measured roof (%.4g %s, with a %.4gx margin%s)",
                 rate, flops ? "GFLOP/s" : "GB/s", roof, flops ? "GFLOP/s" : "GB/s", margin,
                 reduced ? " for the reduced peak set" : from_cache ? " for a copy that may run from cache" : "");
        cJSON_AddStringToObject(row, "error", msg);
        cJSON_ReplaceItemInObjectCaseSensitive(row, "gflops", cJSON_CreateNumber(0)); /* never shown as a rate */
        cJSON_ReplaceItemInObjectCaseSensitive(row, "gbps", cJSON_CreateNumber(0));
    }
}

/* Quick shapes, by case id: the same on every device (so devices compare), a few to tens of
 * milliseconds per run on a 2-core CPU device, small enough for a slow implementation (llvmpipe
 * runs GEMM at well under 1 GFLOP/s with a configuration that compiles in reasonable time). */
static const struct {
    const char *id, *shape;
} quick_shapes[] = {
    {"gemm-square", "256x256x256"},
    {"gemm-bert", "128x768x192"},
    {"gelu-16M", "1048576"},
    {"gelu-f16", "1048576 f16"},
    {"conv-resnet50-3x3", "1x32x28x28 k32 3x3 p1"},
    {"conv-resnet50-3x3-f16", "1x32x28x28 k32 3x3 p1 f16"},
    {"attention-2048", "B1 H2 L256 D64"},
};

const char *report_quick_shape(const report_case *c) {
    for (size_t i = 0; i < sizeof quick_shapes / sizeof quick_shapes[0]; ++i)
        if (strcmp(quick_shapes[i].id, c->id) == 0) return quick_shapes[i].shape;
    return c->simulator_shape;
}

/* A device's status from what ran: "ok", "partial" (some part failed or did not run: listed in
 * "failures", summarized in "error"), or "skipped" (nothing was measured). */
static void settle_status(cJSON *entry) {
    const cJSON *failures = cJSON_GetObjectItemCaseSensitive(entry, "failures");
    int nfail = cJSON_GetArraySize(failures);
    if (nfail == 0) return;
    bool measured = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(entry, "results")) > 0 ||
                    cJSON_GetObjectItemCaseSensitive(entry, "peaks");
    const cJSON *first = cJSON_GetArrayItem(failures, 0);
    char msg[1400];
    if (measured)
        snprintf(msg, sizeof msg, "%d part%s failed or not run (first: %s: %s)", nfail, nfail == 1 ? "" : "s",
                 util_json_text(first, "case"), util_json_text(first, "error"));
    else
        snprintf(msg, sizeof msg, "nothing could be measured (first: %s: %s)", util_json_text(first, "case"),
                 util_json_text(first, "error"));
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "status", cJSON_CreateString(measured ? "partial" : "skipped"));
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "error", cJSON_CreateString(msg));
}

static tsr_status run_device(tsr_device *dev, const report_options *opt, cJSON *entry) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    bool sim = util_is_simulator(info);
    double started = util_now_s();
    cJSON_AddBoolToObject(entry, "simulator", sim);
    if (!opt->quiet) fprintf(stderr, "report: %s (%s)%s\n", info->name, info->platform_name, sim ? ", simulated" : "");
    peak_options po = opt->peak;
    po.simulator = sim;
    po.quiet = opt->quiet;
    po.progress = opt->progress;
    po.progress_user = opt->progress_user;
    if (sim) po.budget_s = 0.0; /* three runs: simulated time says nothing */
    peak_result pr;
    tsr_clear_diagnostics();
    tsr_status st = peak_measure(dev, &po, &pr);
    /* without peaks there is no roofline, but the suite's rows still say how fast each op runs */
    cJSON *peaks = st == TSR_SUCCESS ? peak_to_json(&pr) : NULL;
    if (st == TSR_SUCCESS && !peaks) st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == TSR_SUCCESS) st = peak_from_json(peaks, &pr); /* they must read back as any report's would */
    if (st == TSR_SUCCESS) cJSON_AddItemToObject(entry, "peaks", peaks);
    else cJSON_Delete(peaks), add_failed_status(entry, "peaks", NULL, NULL, st);
    step(opt);
    maybe_tune(dev, opt, sim, entry);
    record_configs(dev, entry);
    cJSON *results = cJSON_AddArrayToObject(entry, "results");
    size_t n = opt->nsuite;
    const report_case *suite = opt->suite ? opt->suite : report_standard_suite(&n);
    report_options local = *opt;
    if (sim) local.peers = false, local.budget_s = 0.0; /* three runs each: simulated time says nothing */
    for (size_t i = 0; i < n; ++i) {
        const char *shape = sim ? suite[i].simulator_shape : opt->quick ? report_quick_shape(&suite[i]) : suite[i].shape;
        double spent = util_now_s() - started;
        if (opt->device_budget_s > 0 && spent >= opt->device_budget_s) {
            char why[160];
            snprintf(why, sizeof why, "not run: %.0f s of the device's %.0f s budget (--device-budget) were spent", spent,
                     opt->device_budget_s);
            add_failure(entry, suite[i].id, suite[i].op, shape, why);
            continue;
        }
        step(opt);
        if (!opt->quiet) fprintf(stderr, "report:   %s %s\n", suite[i].id, shape);
        tsr_clear_diagnostics();
        tsr_status (*run)(tsr_device *, const report_case *, const char *, const report_options *, cJSON *) =
            suite[i].run ? suite[i].run : report_run_case;
        st = run(dev, &suite[i], shape, &local, results);
        if (st != TSR_SUCCESS) { /* this case only: the next one may well run */
            if (!opt->quiet) fprintf(stderr, "report:   %s failed: %s\n", suite[i].id, tsr_last_error());
            add_failed_status(entry, suite[i].id, suite[i].op, shape, st);
        }
    }
    check_roofs(entry);
    cJSON_AddNumberToObject(entry, "seconds", util_now_s() - started);
    settle_status(entry);
    return TSR_SUCCESS;
}

tsr_status report_run(const char *const *selectors, size_t nselectors, const report_options *opt, cJSON **out) {
    *out = NULL;
    tsr_device_info *infos = NULL;
    size_t count = 0;
    tsr_status st = tsr_discover(&infos, &count);
    if (st != TSR_SUCCESS) return st;
    char created[32], host[256] = "";
    report_now_iso(created, sizeof created);
    gethostname(host, sizeof host - 1);
    cJSON *root = report_new(created);
    if (!root) {
        tsr_free(infos);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    }
    cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    /* The selected devices, in discovery order, each once. */
    size_t nsel = selectors ? nselectors : count;
    for (size_t s = 0; s < nsel; ++s) {
        char sel[32];
        if (!selectors) snprintf(sel, sizeof sel, "%d:%d", infos[s].platform_index, infos[s].device_index);
        const char *selector = selectors ? selectors[s] : sel;
        step(opt);
        tsr_device *dev = NULL;
        cJSON *entry = cJSON_CreateObject();
        cJSON_AddStringToObject(entry, "selector", selector);
        cJSON_AddStringToObject(entry, "host", host);
        cJSON_AddStringToObject(entry, "created", created);
        cJSON_AddStringToObject(entry, "status", "ok");
        cJSON_AddStringToObject(entry, "error", "");
        tsr_status ost = tsr_device_open(selector, &dev);
        if (ost != TSR_SUCCESS) {
            cJSON_AddStringToObject(entry, "fingerprint", "");
            /* what discovery knows of it names it in the report (by selector alone otherwise) */
            if (!selectors) cJSON_AddItemToObject(entry, "info", tsr_device_info_to_json(&infos[s]));
            if (!opt->quiet) fprintf(stderr, "report: %s skipped: %s\n", selector, tsr_last_error());
            skip_device(entry, "open", ost);
            cJSON_AddItemToArray(devices, entry);
            continue;
        }
        cJSON_AddStringToObject(entry, "fingerprint", tsr_device_fingerprint(dev));
        cJSON_AddItemToObject(entry, "info", tsr_device_info_to_json(tsr_device_get_info(dev)));
        cJSON_AddItemToArray(devices, entry);
        run_device(dev, opt, entry);
        tsr_device_close(dev);
    }
    tsr_free(infos);
    report_attach_comparison(root);
    *out = root;
    return TSR_SUCCESS;
}

