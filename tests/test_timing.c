/* Timing that cannot lie: the timestamp checks on made-up numbers (rusticl's among them), the
 * probe's verdict on PoCL, TSR_TIMING (a bad value refused; host forced), the tuner and the peaks
 * under host timing (a configuration chosen by distinct, plausible times; the database entry and
 * the peaks marked "host"; bandwidth plausible against the host's own copy), the bench JSON's
 * timing field, and a report row above the measured roof turned into a measurement error. Each test that sets TSR_TIMING opens its own device: the method is decided per
 * device at its first measurement. */
#include "harness.h"
#include "report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the checks, on numbers alone ---- */

static void timestamps_rejected(void **state) {
    (void)state;
    double s = -1;
    TH_ASSERT_STATUS(tsr_timestamps_check(0, 5, NULL, "t", &s), TSR_ERR_UNSUPPORTED);
    TH_ASSERT_CONTAINS(tsr_last_error(), "unusable timestamps");
    TH_ASSERT_STATUS(tsr_timestamps_check(5, 0, NULL, "t", &s), TSR_ERR_UNSUPPORTED);
    TH_ASSERT_STATUS(tsr_timestamps_check(10, 5, NULL, "t", &s), TSR_ERR_UNSUPPORTED);
    TH_ASSERT_CONTAINS(tsr_last_error(), "ended");
    TH_ASSERT_STATUS(tsr_timestamps_check(7, 7, NULL, "t", &s), TSR_ERR_UNSUPPORTED); /* 0 s is never a result */
    TH_ASSERT_CONTAINS(tsr_last_error(), "0 ns");
    assert_true(s == -1); /* nothing written on a rejection */

    tsr_event_clock clock = {0};
    TH_ASSERT_OK(tsr_timestamps_check(1000, 3000, &clock, "t", &s));
    assert_true(fabs(s - 2e-6) < 1e-15);
    TH_ASSERT_OK(tsr_timestamps_check(3000, 3500, &clock, "t", &s)); /* starts as the last one ends */
    TH_ASSERT_STATUS(tsr_timestamps_check(3200, 4000, &clock, "t", &s), TSR_ERR_UNSUPPORTED); /* overlaps it */
    TH_ASSERT_CONTAINS(tsr_last_error(), "before the one before it");
    TH_ASSERT_STATUS(tsr_timestamps_check(100, 200, &clock, "t", &s), TSR_ERR_UNSUPPORTED); /* clock went back */

    /* What Mesa rusticl 22.3 reports for every command: start 2 ns, end 3 ns. One alone looks
     * like a 1 ns command; the second on the same queue gives it away. */
    tsr_event_clock rusticl = {0};
    TH_ASSERT_OK(tsr_timestamps_check(2, 3, &rusticl, "t", &s));
    TH_ASSERT_STATUS(tsr_timestamps_check(2, 3, &rusticl, "t", &s), TSR_ERR_UNSUPPORTED);
    tsr_clear_error();
}

/* ---- the device's method ---- */

static bool is_pocl(tsr_device *dev) {
    return tsr_contains_nocase(tsr_device_get_info(dev)->platform_name, "portable computing language");
}

static void probe_says_device_on_pocl(void **state) {
    (void)state;
    unsetenv("TSR_TIMING");
    tsr_device *dev = th_open_device();
    if (!is_pocl(dev)) {
        tsr_device_close(dev);
        skip(); /* the verdict on other drivers is theirs to earn */
    }
    tsr_timing_method method = TSR_TIMING_UNDECIDED;
    const char *reason = NULL;
    TH_ASSERT_OK(tsr_device_timing(dev, &method, &reason));
    if (method != TSR_TIMING_DEVICE) fail_msg("PoCL's timestamps were refused: %s", reason);
    assert_string_equal(reason, "");
    double empty = tsr_device_empty_launch_s(dev);
    print_message("# empty launch (enqueue + clFinish): %.1f us\n", empty * 1e6);
    assert_true(empty > 0 && empty < 0.5);
    /* Decided once: a second call runs no probe and says the same. */
    TH_ASSERT_OK(tsr_device_timing(dev, &method, NULL));
    assert_int_equal(method, TSR_TIMING_DEVICE);
    assert_true(tsr_device_empty_launch_s(dev) == empty);
    tsr_device_close(dev);
}

static void bad_timing_variable_refused(void **state) {
    (void)state;
    setenv("TSR_TIMING", "sometimes", 1);
    tsr_device *dev = th_open_device(); /* opening is not measuring: no probe, no error yet */
    TH_ASSERT_STATUS(tsr_device_timing(dev, NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "TSR_TIMING='sometimes'");
    unsetenv("TSR_TIMING");
    tsr_device_close(dev);
}

/* One GELU over n floats, as a timer launches it. */
typedef struct gelu_launch {
    tsr_device *dev;
    cl_mem x, y;
    size_t n;
} gelu_launch;

static tsr_status launch_gelu(void *vctx, cl_event *first, cl_event *last) {
    gelu_launch *g = vctx;
    cl_event done = NULL;
    tsr_status st = tsr_gelu(g->dev, &(tsr_gelu_desc){.mode = TSR_GELU_TANH, .n = g->n}, g->x, g->y, NULL,
                             first || last ? &done : NULL);
    if (st == TSR_SUCCESS) tsr_fixture_single_event(done, first, last);
    return st;
}

static void forced_host_timer(void **state) {
    (void)state;
    setenv("TSR_TIMING", "host", 1);
    tsr_device *dev = th_open_device();
    tsr_timing_method method;
    const char *reason = NULL;
    TH_ASSERT_OK(tsr_device_timing(dev, &method, &reason));
    assert_int_equal(method, TSR_TIMING_HOST);
    assert_string_equal(reason, "TSR_TIMING=host");
    assert_true(tsr_device_empty_launch_s(dev) > 0);
    const size_t n = (size_t)1 << 18;
    float *x = malloc(n * sizeof *x);
    th_fill_uniform(x, n, -4, 4);
    gelu_launch g = {dev, th_buffer_from(dev, x, n), th_buffer(dev, n), n};
    tsr_timer timer = {.what = "a test"};
    for (int i = 0; i < 5; ++i) {
        double s = 0, t0 = tsr_now_s();
        TH_ASSERT_OK(tsr_timer_run(&timer, dev, launch_gelu, &g, &s));
        double wall = tsr_now_s() - t0;
        /* Per launch: positive, finite, and within the wall time the whole measurement took. */
        assert_true(s > 0 && isfinite(s));
        assert_true(s <= wall);
        if (i == 4) print_message("# GELU over %zu floats: %.3f ms per launch (batches of %d)\n", n, s * 1e3, timer.batch);
    }
    assert_int_equal(timer.device_runs, 0);
    assert_int_equal(timer.host_runs, 5);
    clReleaseMemObject(g.x);
    clReleaseMemObject(g.y);
    free(x);
    unsetenv("TSR_TIMING");
    tsr_device_close(dev);
}

/* ---- the tuner under host timing ---- */

static void tuner_under_host_timing(void **state) {
    (void)state;
    setenv("TSR_TIMING", "host", 1);
    tsr_device *dev = th_open_device();
    char dir[1024], db[1100], log[1100];
    th_tempdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/db.json", dir);
    snprintf(log, sizeof log, "%s/tune.log", dir);
    tsr_tune_options o = {.strategy = TSR_TUNE_RANDOM, .budget_evaluations = 6, .budget_seconds = 60,
                          .classes = "small", .seed = 11, .db_path = db, .log_path = log};
    tsr_tune_result r[1];
    size_t n = 0;
    TH_ASSERT_OK(tsr_tune(dev, "gelu", &o, r, 1, &n));
    assert_int_equal(n, 1);
    print_message("# gelu/small under host timing: default %.2f, best %.2f %s (%s) after %d evaluations\n",
                  r[0].default_gflops, r[0].best_gflops, r[0].unit, r[0].best_config, r[0].evaluated);
    assert_true(r[0].best_gflops > 0 && isfinite(r[0].best_gflops));
    assert_true(r[0].best_config[0] != '\0');

    /* Every log line says host; the measured candidates have distinct, plausible rates. */
    char *text = NULL;
    size_t size = 0;
    TH_ASSERT_OK(tsr_read_file(log, &text, &size));
    double rates[64];
    int nrates = 0, lines = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        assert_non_null(j);
        /* the lines that time nothing themselves have no timing: the workers' summary of a class
         * (compiling ahead), the class's space, its smaller problem, its second problem's verdict (its
         * duel has its own line, timed) */
        const char *outcome = util_json_text(j, "outcome");
        if (strcmp(outcome, "ahead") == 0 || strcmp(outcome, "space") == 0 || strcmp(outcome, "smaller problem") == 0 ||
            strcmp(outcome, "second problem") == 0) {
            cJSON_Delete(j);
            continue;
        }
        assert_string_equal(util_json_text(j, "timing"), "host");
        /* "slower" candidates were timed too (stopped early against the incumbent): under load most
         * of six may end that way, so both outcomes carry a measured rate. */
        const char *what = util_json_text(j, "outcome");
        if ((strcmp(what, "ok") == 0 || strcmp(what, "slower") == 0) && nrates < 64)
            rates[nrates++] = util_json_num(j, "gflops");
        ++lines;
        cJSON_Delete(j);
    }
    free(text);
    assert_true(lines >= 2);
    assert_true(nrates >= 2);
    bool distinct = false;
    for (int i = 0; i < nrates; ++i) {
        assert_true(rates[i] > 0 && rates[i] < 10000); /* GB/s: no CPU moves 10 TB/s */
        distinct |= rates[i] != rates[0];
    }
    assert_true(distinct);

    /* The database entry says how it was timed. */
    cJSON *root = NULL;
    TH_ASSERT_OK(tsr_read_json(db, "tuning database", &root));
    const cJSON *device, *op, *entry;
    int found = 0;
    cJSON_ArrayForEach(device, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        op = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(device, "ops"), "gelu");
        cJSON_ArrayForEach(entry, op) {
            assert_string_equal(util_json_text(entry, "timing"), "host");
            ++found;
        }
    }
    assert_int_equal(found, 1);
    cJSON_Delete(root);
    /* And --show's origin says so. */
    tsr_config_info ci;
    setenv("TSR_TUNING_DB", db, 1);
    tsr_device_close(dev);
    dev = th_open_device();
    TH_ASSERT_OK(tsr_config_lookup(dev, "gelu", "small", &ci));
    TH_ASSERT_CONTAINS(ci.origin, "timed with the host clock");
    tsr_device_close(dev);
    th_remove_tree(dir);
    unsetenv("TSR_TIMING");
}

/* ---- peaks under host timing ---- */

static void peaks_under_host_timing(void **state) {
    (void)state;
    setenv("TSR_TIMING", "host", 1);
    tsr_device *dev = th_open_device();
    const tsr_device_info *info = tsr_device_get_info(dev);
    peak_options po = {.budget_s = 0.02, .tests = PEAK_BANDWIDTH | PEAK_HOST | PEAK_LAUNCH, .buffer_bytes = 8 << 20,
                       .reduced = true, .quiet = true, .simulator = util_is_simulator(info)};
    peak_result r;
    TH_ASSERT_OK(peak_measure(dev, &po, &r));
    assert_true(r.host_timed);
    TH_ASSERT_CONTAINS(r.timing_reason, "TSR_TIMING=host");
    assert_true(r.bandwidth_gbps > 0 && isfinite(r.bandwidth_gbps));
    assert_true(r.round_trip_us.median > 0 && isfinite(r.round_trip_us.median));
    print_message("# host-timed bandwidth %.2f GB/s; the host's own copy %.2f GB/s; empty launch %.1f us\n",
                  r.bandwidth_gbps, r.host_copy_gbps.median, r.empty_launch_us);
    /* A CPU device cannot move memory fifty times faster than the host it runs on: what a unit slip
     * in the host-timed rate (x1000, x1024) would show. Not ten: both sides get 20 ms here, beside
     * other tests, and on a 2-core Zen 4 VM the host's one-thread copy once measured 4.2 GB/s against
     * the device's 65 GB/s on this 8 MiB buffer (its 32 MiB L3 holds it); not checked under
     * AddressSanitizer, which instruments the host's own copy. */
#ifndef __SANITIZE_ADDRESS__
    if (r.host_copy_gbps.runs) assert_true(r.bandwidth_gbps < 50 * fmax(r.host_copy_gbps.median, r.host_read_gbps.median));
#endif
    cJSON *j = peak_to_json(&r);
    assert_string_equal(util_json_text(j, "timing"), "host");
    peak_result back;
    TH_ASSERT_OK(peak_from_json(j, &back));
    assert_true(back.host_timed);
    assert_string_equal(back.timing_reason, r.timing_reason);
    cJSON_Delete(j);
    tsr_device_close(dev);
    unsetenv("TSR_TIMING");
}

/* ---- bench rows ---- */

static void bench_rows_carry_timing(void **state) {
    (void)state;
    char dir[1024], path[1100];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/rows.json", dir);
    bench_report rep = {.device = "test device"};
    bench_row a = {.op = "gemm", .shape = "8x8x8", .impl = "tessera", .time_ms = 1, .runs = 3, .rel_err = -1};
    bench_row b = a;
    tsr_strlcpy(b.timing, "device", sizeof b.timing);
    TH_ASSERT_OK(bench_add(&rep, &a));
    TH_ASSERT_OK(bench_add(&rep, &b));
    TH_ASSERT_OK(bench_write_json(&rep, path));
    cJSON *root = NULL;
    TH_ASSERT_OK(tsr_read_json(path, "rows", &root));
    assert_string_equal(util_json_text(cJSON_GetArrayItem(root, 0), "timing"), "host"); /* the wall clock */
    assert_string_equal(util_json_text(cJSON_GetArrayItem(root, 1), "timing"), "device");
    cJSON_Delete(root);
    bench_report_free(&rep);
    th_remove_tree(dir);
}

/* ---- the report's roof check ---- */

/* Two made-up rows: one far above any fp32 roof (what a clock that stands still produces), one
 * far below it. */
static tsr_status absurd_rows(tsr_device *dev, const report_case *c, const char *shape, const report_options *opt,
                              cJSON *results) {
    (void)dev, (void)shape, (void)opt;
    static const double gflops[2] = {1e9, 1e-3};
    for (int i = 0; i < 2; ++i) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "case", c->id);
        cJSON_AddStringToObject(r, "op", c->op);
        cJSON_AddStringToObject(r, "shape", i ? "slow" : "absurd");
        cJSON_AddStringToObject(r, "impl", "tessera");
        cJSON_AddNumberToObject(r, "time_ms", 1);
        cJSON_AddNumberToObject(r, "flops", gflops[i] * 1e6);
        cJSON_AddNumberToObject(r, "bytes", 1e6);
        cJSON_AddNumberToObject(r, "gflops", gflops[i]);
        cJSON_AddNumberToObject(r, "gbps", 1);
        cJSON_AddNumberToObject(r, "rel_err", 0);
        cJSON_AddStringToObject(r, "timing", "host");
        cJSON_AddItemToArray(results, r);
    }
    return TSR_SUCCESS;
}

static void report_rate_above_roof_is_an_error(void **state) {
    (void)state;
    char dir[1024], md[1100];
    th_tempdir(dir, sizeof dir);
    static const report_case suite[] = {{"made-up", "gemm", "1x1x1", "1x1x1", absurd_rows}};
    report_options o = {.out_dir = dir, .budget_s = 0.01,
                        .peak = {.budget_s = 0.005, .buffer_bytes = 1 << 20, .reduced = true,
                                 .tests = PEAK_BANDWIDTH | PEAK_COMPUTE},
                        .quiet = true, .suite = suite, .nsuite = 1};
    const char *sel[1] = {getenv("TSR_DEVICE") ? getenv("TSR_DEVICE") : "0:0"};
    cJSON *root = NULL;
    setenv("TSR_TIMING", "host", 1); /* and report.md notes the device's host timing */
    TH_ASSERT_OK(report_run(sel, 1, &o, &root));
    unsetenv("TSR_TIMING");
    const cJSON *dev = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "devices"), 0);
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(dev, "results");
    assert_int_equal(cJSON_GetArraySize(rows), 2);
    const cJSON *absurd = cJSON_GetArrayItem(rows, 0), *slow = cJSON_GetArrayItem(rows, 1);
    TH_ASSERT_CONTAINS(util_json_text(absurd, "error"), "measurement error");
    TH_ASSERT_CONTAINS(util_json_text(absurd, "error"), "above the measured roof");
    assert_true(util_json_num(absurd, "gflops") == 0); /* never shown as a rate */
    assert_null(cJSON_GetObjectItemCaseSensitive(slow, "error"));
    assert_true(util_json_num(slow, "gflops") > 0);
    TH_ASSERT_OK(report_write(root, dir, true));
    snprintf(md, sizeof md, "%s/report.md", dir);
    char *text = NULL;
    size_t size = 0;
    TH_ASSERT_OK(tsr_read_file(md, &text, &size));
    TH_ASSERT_CONTAINS(text, "measurement error");
    TH_ASSERT_CONTAINS(text, "Timing on ");
    TH_ASSERT_CONTAINS(text, "TSR\\_TIMING=host"); /* markdown-escaped */
    free(text);
    cJSON_Delete(root);
    th_remove_tree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timestamps_rejected),
        cmocka_unit_test(probe_says_device_on_pocl),
        cmocka_unit_test(bad_timing_variable_refused),
        cmocka_unit_test(forced_host_timer),
        cmocka_unit_test(tuner_under_host_timing),
        cmocka_unit_test(peaks_under_host_timing),
        cmocka_unit_test(bench_rows_carry_timing),
        cmocka_unit_test(report_rate_above_roof_is_an_error),
    };
    return TH_RUN(tests);
}
