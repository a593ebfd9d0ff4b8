/* tessera peak and tessera report: peaks on a small buffer, a report over a small suite (every
 * file written, JSON schema round trip, charts that parse as XML), damaged reports rejected,
 * merging reports with overlapping and distinct devices, and a device that fails mid-suite
 * reported as failed while the rest of the report completes (TSR_TEST_MODE=two-platforms:
 * PoCL and Oclgrind). */
#include "report.h"
#include "harness.h"

#include <cjson/cJSON.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The standard cases' runners at small sizes (on every device: their simulator sizes). */
static const report_case *standard_small(size_t *n) {
    static report_case suite[8];
    static const char *const ids[] = {"gemm-small", "gemm-small-bert", "gelu-small", "conv-small", "attention-small"};
    size_t count = 0;
    const report_case *std = report_standard_suite(&count);
    if (count > 5) count = 5;
    for (size_t i = 0; i < count; ++i) {
        suite[i] = std[i];
        suite[i].id = ids[i];
        suite[i].shape = std[i].simulator_shape;
    }
    *n = count;
    return suite;
}

static bool two_platforms(void) {
    const char *m = getenv("TSR_TEST_MODE");
    return m && strcmp(m, "two-platforms") == 0;
}

static char *read_text(const char *path) {
    char *data = NULL;
    size_t size = 0;
    TH_ASSERT_OK(tsr_read_file(path, &data, &size));
    return data;
}

/* Merge the one report `in` and write it to `out`; returns report.md's text (path in md_path). */
static char *merge_one_and_render(const char *in, const char *out, char *md_path, size_t size) {
    const char *paths[1] = {in};
    cJSON *root = NULL;
    TH_ASSERT_OK(report_merge(paths, 1, &root));
    TH_ASSERT_OK(report_write(root, out, true));
    cJSON_Delete(root);
    snprintf(md_path, size, "%s/report.md", out);
    return read_text(md_path);
}

static bool file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* XML well-formedness through Python's parser (python3 is one of the build's requirements). */
static void assert_xml(const char *path) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys, xml.etree.ElementTree as ET; r = ET.parse(sys.argv[1]).getroot(); "
             "sys.exit(0 if r.tag.endswith(\"svg\") else 3)' '%s'", path);
    int rc = system(cmd);
    if (rc != 0) fail_msg("%s is not well-formed SVG (python3 exit %d)", path, rc);
}

static tsr_status injected_failure(tsr_device *dev, const report_case *c, const char *shape,
                                   const report_options *opt, cJSON *results) {
    (void)c, (void)shape, (void)opt, (void)results;
    if (tsr_contains_nocase(tsr_device_get_info(dev)->platform_name, "oclgrind"))
        return tsr_fail(TSR_ERR_UNSUPPORTED, "failure injected by the test on the simulator");
    return TSR_SUCCESS;
}

static report_options quick_options(const char *dir, const report_case *suite, size_t n) {
    report_options o = {.out_dir = dir, .budget_s = 0.01, .peak = {.budget_s = 0.005, .buffer_bytes = 1 << 20,
                                                                   .reduced = true},
                        .tune_budget_s = 0, .peers = true, .quiet = true, .suite = suite, .nsuite = n};
    return o;
}

static void peaks_small(void **state) {
    (void)state;
    tsr_device *dev = th_open_device();
    peak_options po = {.budget_s = 0.01, .buffer_bytes = 1 << 20, .quiet = true};
    peak_result r;
    TH_ASSERT_OK(peak_measure(dev, &po, &r));
    assert_int_equal(r.buffer_bytes, 1 << 20);
    assert_true(r.bandwidth_gbps > 0);
    assert_true(r.compute_gflops > 0);
    for (int w = 0; w < PEAK_WIDTHS; ++w) { /* every width measured, best layout and chain count kept */
        assert_true(r.read[w].runs >= 3 && r.write[w].runs >= 3 && r.copy[w].runs >= 3);
        assert_true(r.read[w].min <= r.read[w].median && r.read[w].median <= r.read[w].max);
        assert_true(r.compute[w].median > 0 && r.chains[w] > 0);
    }
    assert_true(r.dispatch_us.median > 0 && r.round_trip_us.median > 0);
    assert_true(r.write_gbps.median > 0 && r.read_gbps.median > 0 && r.map_read_gbps.median > 0 &&
                r.map_write_gbps.median > 0);
    /* JSON round trip */
    cJSON *j = peak_to_json(&r);
    peak_result back;
    TH_ASSERT_OK(peak_from_json(j, &back));
    assert_true(back.bandwidth_gbps == r.bandwidth_gbps && back.compute_gflops == r.compute_gflops);
    assert_true(back.copy[3].median == r.copy[3].median && back.chains[2] == r.chains[2]);
    cJSON_DeleteItemFromObject(j, "compute_gflops");
    TH_ASSERT_STATUS(peak_from_json(j, &back), TSR_ERR_CORRUPT);
    cJSON_Delete(j);
    tsr_device_close(dev);
}


static void report_files_and_round_trip(void **state) {
    (void)state;
    char dir[512];
    th_tempdir(dir, sizeof dir);
    size_t n = 0;
    const report_case *suite = standard_small(&n);
    report_options o = quick_options(dir, suite, n);
    cJSON *root = NULL;
    const char *sel[1] = {""}; /* the default device */
    TH_ASSERT_OK(report_run(sel, 1, &o, &root));
    assert_int_equal(report_failed_devices(root), 0);
    const cJSON *dev = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "devices"), 0);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(dev, "peaks"));
    const cJSON *results = cJSON_GetObjectItemCaseSensitive(dev, "results");
    assert_true(cJSON_GetArraySize(results) >= (int)n); /* tessera rows, plus peers and the copy kernel */
    const cJSON *r;
    cJSON_ArrayForEach(r, results) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "rel_err");
        if (strncmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "impl")), "tessera", 7) == 0)
            assert_true(cJSON_IsNumber(e) && e->valuedouble <= 1e-5);
        assert_true(cJSON_GetObjectItemCaseSensitive(r, "time_ms")->valuedouble > 0);
    }
    TH_ASSERT_OK(report_write(root, dir, true));
    char path[700];
    const char *files[] = {"report.json", "report.md", "bars.svg", "roofline-1-"};
    for (int i = 0; i < 3; ++i) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        assert_true(file_exists(path));
    }
    snprintf(path, sizeof path, "%s/bars.svg", dir);
    assert_xml(path);
    /* the roofline's file name comes from the device's name */
    glob_t g;
    snprintf(path, sizeof path, "%s/roofline-1-*.svg", dir);
    assert_int_equal(glob(path, 0, NULL, &g), 0);
    assert_int_equal(g.gl_pathc, 1);
    assert_xml(g.gl_pathv[0]);
    char *svg = read_text(g.gl_pathv[0]);
    TH_ASSERT_CONTAINS(svg, "memory roof");
    TH_ASSERT_CONTAINS(svg, "fp32 roof");
    TH_ASSERT_CONTAINS(svg, "gemm-small");
    free(svg);
    globfree(&g);
    /* report.md names every case and the device */
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = read_text(path);
    for (size_t i = 0; i < n; ++i) TH_ASSERT_CONTAINS(md, suite[i].id);
    TH_ASSERT_CONTAINS(md, "% of roofline");
    free(md);
    /* JSON round trip: load, print, identical */
    snprintf(path, sizeof path, "%s/report.json", dir);
    cJSON *loaded = NULL;
    TH_ASSERT_OK(report_load(path, &loaded));
    char *a = read_text(path), *b = cJSON_Print(loaded);
    assert_string_equal(a, b);
    free(a), free(b);
    cJSON_Delete(loaded);
    cJSON_Delete(root);
    th_remove_tree(dir);
}

static void damaged_reports(void **state) {
    (void)state;
    char dir[512], path[700];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/r.json", dir);
    const char *bad[] = {
        "not json",
        "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": []} and a truncated copy",
        "{\"format\": \"something-else\", \"schema_version\": 1, \"devices\": []}",
        "{\"format\": \"tessera-report\", \"schema_version\": 99, \"devices\": []}",
        "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": {}}",
        "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [{\"status\": \"ok\"}]}",
        "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [{\"fingerprint\": \"x\", \"status\": "
        "\"ok\", \"host\": \"h\", \"results\": [{\"case\": \"c\"}]}]}",
        "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [{\"fingerprint\": \"x\", \"status\": "
        "\"ok\", \"host\": \"h\", \"peaks\": {\"bandwidth_gbps\": \"fast\"}}]}",
        /* a fractional schema version is not version 1 */
        "{\"format\": \"tessera-report\", \"schema_version\": 1.5, \"devices\": []}",
        /* a negative roof: the message says what is wrong with it */
        "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [{\"fingerprint\": \"x\", \"status\": "
        "\"ok\", \"host\": \"h\", \"peaks\": {\"bandwidth_gbps\": -1, \"compute_gflops\": 5}}]}",
    };
    const char *why[] = {"not valid JSON", "not valid JSON", "format", "schema_version", "devices", "fingerprint", "time_ms",
                         "must be numbers", "integer 1", "must be >= 0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        th_write_file(path, bad[i], strlen(bad[i]));
        cJSON *root = NULL;
        TH_ASSERT_STATUS(report_load(path, &root), TSR_ERR_CORRUPT);
        TH_ASSERT_CONTAINS(tsr_last_error(), why[i]);
        assert_null(root);
        const char *paths[1] = {path};
        TH_ASSERT_STATUS(report_merge(paths, 1, &root), TSR_ERR_CORRUPT);
    }
    cJSON *root = NULL;
    snprintf(path, sizeof path, "%s/missing.json", dir);
    const char *paths[1] = {path};
    TH_ASSERT_STATUS(report_merge(paths, 1, &root), TSR_ERR_NOT_FOUND);
    TH_ASSERT_STATUS(report_merge(paths, 0, &root), TSR_ERR_INVALID_ARG);
    th_remove_tree(dir);
}

/* A synthetic device entry: what a report made elsewhere holds. */
static cJSON *fake_device(const char *name, const char *host, const char *created, double bw, double flops,
                          double gemm_gflops) {
    cJSON *d = cJSON_CreateObject();
    char fp[256];
    snprintf(fp, sizeof fp, "Vendor Platform|Vendor|%s|1.0|OpenCL C 1.2", name);
    cJSON_AddStringToObject(d, "fingerprint", fp);
    cJSON_AddStringToObject(d, "host", host);
    cJSON_AddStringToObject(d, "created", created);
    cJSON_AddStringToObject(d, "status", "ok");
    cJSON_AddStringToObject(d, "error", "");
    cJSON *info = cJSON_AddObjectToObject(d, "info");
    cJSON_AddStringToObject(info, "name", name);
    cJSON_AddStringToObject(info, "type", "GPU");
    cJSON_AddStringToObject(info, "platform_name", "Vendor Platform");
    cJSON_AddStringToObject(info, "driver_version", "1.0");
    cJSON *peaks = cJSON_AddObjectToObject(d, "peaks");
    cJSON_AddNumberToObject(peaks, "bandwidth_gbps", bw);
    cJSON_AddNumberToObject(peaks, "compute_gflops", flops);
    cJSON *results = cJSON_AddArrayToObject(d, "results");
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "case", "gemm-square");
    cJSON_AddStringToObject(r, "op", "gemm");
    cJSON_AddStringToObject(r, "shape", "2048x2048x2048");
    cJSON_AddStringToObject(r, "impl", "tessera");
    double flops_run = 2.0 * 2048 * 2048 * 2048;
    cJSON_AddNumberToObject(r, "time_ms", flops_run / (gemm_gflops * 1e6));
    cJSON_AddNumberToObject(r, "flops", flops_run);
    cJSON_AddNumberToObject(r, "bytes", 4.0 * 3 * 2048 * 2048);
    cJSON_AddNumberToObject(r, "gflops", gemm_gflops);
    cJSON_AddNumberToObject(r, "gbps", 0);
    cJSON_AddItemToArray(results, r);
    return d;
}

static void write_fake_report(const char *path, cJSON *devices[], int n) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "tessera-report");
    cJSON_AddNumberToObject(root, "schema_version", 1);
    cJSON_AddStringToObject(root, "tessera_version", TSR_VERSION_STRING);
    cJSON_AddStringToObject(root, "created", "2026-01-01T00:00:00Z");
    cJSON *arr = cJSON_AddArrayToObject(root, "devices");
    for (int i = 0; i < n; ++i) cJSON_AddItemToArray(arr, devices[i]);
    char *text = cJSON_Print(root);
    th_write_file(path, text, strlen(text));
    free(text);
    cJSON_Delete(root);
}

static void merge_reports(void **state) {
    (void)state;
    char dir[512], a[700], b[700];
    th_tempdir(dir, sizeof dir);
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    /* A: X and Y on host1. B: Y on host1 again (newer), Y on host2 (another machine), Z with a
     * name that needs escaping in markdown and SVG. */
    cJSON *in_a[2] = {fake_device("Card X", "host1", "2026-01-01T00:00:00Z", 500, 10000, 8000),
                      fake_device("Card Y", "host1", "2026-01-01T00:00:00Z", 900, 20000, 15000)};
    cJSON *in_b[3] = {fake_device("Card Y", "host1", "2026-02-01T00:00:00Z", 950, 21000, 16000),
                      fake_device("Card Y", "host2", "2026-02-01T00:00:00Z", 900, 20000, 14000),
                      fake_device("Card <Z> & \"|quotes|\"", "host3", "2026-02-01T00:00:00Z", 100, 3000, 900)};
    write_fake_report(a, in_a, 2);
    write_fake_report(b, in_b, 3);
    const char *paths[2] = {a, b};
    cJSON *root = NULL;
    TH_ASSERT_OK(report_merge(paths, 2, &root));
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    assert_int_equal(cJSON_GetArraySize(devices), 4); /* X, Y@host1 (newer), Y@host2, Z */
    const cJSON *y1 = cJSON_GetArrayItem(devices, 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(y1, "host")), "host1");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(y1, "created")), "2026-02-01T00:00:00Z");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(y1, "source")), b);
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(root, "notes");
    assert_int_equal(cJSON_GetArraySize(notes), 1);
    TH_ASSERT_CONTAINS(cJSON_GetArrayItem(notes, 0)->valuestring, "duplicate");
    TH_ASSERT_CONTAINS(cJSON_GetArrayItem(notes, 0)->valuestring, "Card Y");
    char out[700];
    snprintf(out, sizeof out, "%s/merged", dir);
    TH_ASSERT_OK(report_write(root, out, true));
    char path[800];
    snprintf(path, sizeof path, "%s/bars.svg", out);
    assert_xml(path);
    for (int i = 1; i <= 4; ++i) {
        char cmd[900];
        snprintf(cmd, sizeof cmd, "python3 -c 'import glob, sys, xml.etree.ElementTree as ET; "
                                  "[ET.parse(f) for f in glob.glob(sys.argv[1])]' '%s/roofline-%d-*.svg'", out, i);
        assert_int_equal(system(cmd), 0);
    }
    snprintf(path, sizeof path, "%s/report.md", out);
    char *md = read_text(path);
    TH_ASSERT_CONTAINS(md, "host2");
    TH_ASSERT_CONTAINS(md, "duplicate");
    TH_ASSERT_CONTAINS(md, "Card &lt;Z&gt; &amp; \"&#124;quotes&#124;\""); /* table cells cannot break on '|' */
    /* 16000 GFLOP/s under a roof of min(21000, 950 * 2048 / 6) = 21000: 76% */
    TH_ASSERT_CONTAINS(md, "| 16000 GFLOP/s | 341.33 | 76% |");
    free(md);
    /* and the merged report loads again */
    snprintf(path, sizeof path, "%s/report.json", out);
    cJSON *again = NULL;
    TH_ASSERT_OK(report_load(path, &again));
    cJSON_Delete(again);
    cJSON_Delete(root);
    th_remove_tree(dir);
}

/* Two platforms: the simulator fails mid-suite (after a case that succeeded), PoCL completes. */
static void failing_device(void **state) {
    (void)state;
    char dir[512];
    th_tempdir(dir, sizeof dir);
    size_t n = 0;
    const report_case *std = standard_small(&n);
    report_case suite[3] = {std[0], {"injected", "gemm", "", "", injected_failure}, std[1]};
    report_options o = quick_options(dir, suite, 3);
    cJSON *root = NULL;
    TH_ASSERT_OK(report_run(NULL, 0, &o, &root)); /* every device */
    assert_int_equal(report_failed_devices(root), 1);
    const cJSON *d;
    int ok = 0, failed = 0;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "status"));
        int rows = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "results"));
        if (strcmp(status, "ok") == 0) {
            ++ok;
            assert_true(rows >= 2); /* both real cases ran */
        } else {
            ++failed;
            assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "simulator")));
            TH_ASSERT_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "error")), "injected");
            TH_ASSERT_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "error")), "failure injected");
            assert_true(rows >= 1); /* the case before the failure is kept, the one after is not run */
        }
    }
    assert_int_equal(ok, 1);
    assert_int_equal(failed, 1);
    TH_ASSERT_OK(report_write(root, dir, true));
    char path[700];
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = read_text(path);
    TH_ASSERT_CONTAINS(md, "**failed**");
    TH_ASSERT_CONTAINS(md, "simulator");
    free(md);
    cJSON_Delete(root);
    th_remove_tree(dir);
}

/* ---- hardening: hostile reports, atomic writes, PNG failures, large merges ---- */

/* Every string field a report carries, set to something that would inject HTML, a link, a
 * heading or a table column into report.md, or markup into an SVG. */
static const char *const hostile[] = {
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "x\n# injected heading\n| a | b |",
    "a|b|c\r\n\t`code` *em* _u_ ![i](javascript:x) &amp; \\",
    "not UTF-8: \xff\xc3( \xed\xa0\x80 end, not XML: \xef\xbf\xbf \xef\xbf\xbe", /* the SVGs must stay well-formed XML */
};
#define NHOSTILE (sizeof hostile / sizeof hostile[0])

static cJSON *hostile_device(size_t i) {
    cJSON *d = fake_device(hostile[i], hostile[(i + 1) % NHOSTILE], "2026-01-01T00:00:00Z", 100, 1000, 500);
    cJSON *info = cJSON_GetObjectItemCaseSensitive(d, "info");
    cJSON_ReplaceItemInObjectCaseSensitive(info, "type", cJSON_CreateString(hostile[(i + 2) % NHOSTILE]));
    cJSON_ReplaceItemInObjectCaseSensitive(info, "platform_name", cJSON_CreateString(hostile[(i + 3) % NHOSTILE]));
    cJSON_ReplaceItemInObjectCaseSensitive(info, "driver_version", cJSON_CreateString(hostile[(i + 4) % NHOSTILE]));
    cJSON_AddStringToObject(d, "tuning", hostile[i]);
    cJSON_ReplaceItemInObjectCaseSensitive(d, "status", cJSON_CreateString("failed"));
    cJSON_ReplaceItemInObjectCaseSensitive(d, "error", cJSON_CreateString(hostile[(i + 1) % NHOSTILE]));
    cJSON *peaks = cJSON_GetObjectItemCaseSensitive(d, "peaks");
    cJSON_AddStringToObject(peaks, "bandwidth_best", hostile[i]);
    cJSON_AddStringToObject(peaks, "compute_best", hostile[(i + 1) % NHOSTILE]);
    cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(d, "results"), 0);
    cJSON_ReplaceItemInObjectCaseSensitive(row, "case", cJSON_CreateString(hostile[i]));
    cJSON_ReplaceItemInObjectCaseSensitive(row, "shape", cJSON_CreateString(hostile[(i + 2) % NHOSTILE]));
    cJSON_ReplaceItemInObjectCaseSensitive(row, "impl", cJSON_CreateString("tessera<script>|x"));
    return d;
}

static size_t count_char(const char *s, char c) {
    size_t n = 0;
    for (; *s; ++s) n += *s == c;
    return n;
}

/* No raw element or javascript: link (in markdown: a link target; in SVG: an href). */
static void assert_inert(const char *path, const char *text, bool markdown) {
    const char *bad[] = {"<script", "<img", "onerror=alert(1)>", markdown ? "](javascript:" : "href=\"javascript:"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
        if (strstr(text, bad[i])) fail_msg("%s holds a raw '%s'", path, bad[i]);
}

static void hostile_report_is_inert(void **state) {
    (void)state;
    char dir[512], in[700], out[700], path[800];
    th_tempdir(dir, sizeof dir);
    snprintf(in, sizeof in, "%s/hostile.json", dir);
    cJSON *devs[NHOSTILE];
    for (size_t i = 0; i < NHOSTILE; ++i) devs[i] = hostile_device(i);
    write_fake_report(in, devs, (int)NHOSTILE);
    snprintf(out, sizeof out, "%s/out", dir);
    char *md = merge_one_and_render(in, out, path, sizeof path);
    assert_inert(path, md, true);
    TH_ASSERT_CONTAINS(md, "&lt;script&gt;alert\\(1\\)&lt;/script&gt;"); /* shown as text, not dropped */
    /* No injected heading, and each table intact: the device table has NHOSTILE rows of 11
     * columns (12 pipes), each case table one row of 9 columns (10 pipes), with nothing else
     * starting a line with '|' or '#'. */
    size_t device_rows = 0, result_rows = 0, headings = 0;
    for (char *line = md, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (line[0] == '#') {
            ++headings;
            assert_true(strncmp(line, "# tessera report", 16) == 0 || strncmp(line, "## ", 3) == 0 ||
                        strncmp(line, "### ", 4) == 0);
        }
        if (line[0] != '|' || strncmp(line, "|---", 4) == 0 || strncmp(line, "| # |", 5) == 0 ||
            strncmp(line, "| device |", 10) == 0)
            continue;
        size_t pipes = count_char(line, '|');
        if (pipes == 12) ++device_rows;
        else if (pipes == 10) ++result_rows;
        else fail_msg("a broken table row (%zu pipes): %s", pipes, line);
    }
    assert_int_equal(device_rows, NHOSTILE);
    assert_int_equal(result_rows, NHOSTILE); /* one row per (hostile) case */
    assert_int_equal(headings, 1 + 3 + NHOSTILE); /* title, Devices/Results/Charts, a heading per case */
    free(md);
    /* The charts: escaped, and still well-formed XML. */
    glob_t g;
    snprintf(path, sizeof path, "%s/*.svg", out);
    assert_int_equal(glob(path, 0, NULL, &g), 0);
    assert_int_equal(g.gl_pathc, NHOSTILE + 1);
    for (size_t i = 0; i < g.gl_pathc; ++i) {
        char *svg = read_text(g.gl_pathv[i]);
        assert_inert(g.gl_pathv[i], svg, false);
        free(svg);
        assert_xml(g.gl_pathv[i]);
    }
    globfree(&g);
    th_remove_tree(dir);
}

/* report.md goes through the atomic writer: a report.md that is a link to a full disk is
 * replaced by a complete file (fprintf into it used to "succeed" with nothing written), and a
 * report.md that cannot be replaced (a directory) fails the call and leaves no temporary file. */
static void report_md_is_written_atomically(void **state) {
    (void)state;
    char dir[512], in[700], out[700], path[800];
    th_tempdir(dir, sizeof dir);
    snprintf(in, sizeof in, "%s/a.json", dir);
    cJSON *devs[1] = {fake_device("Card X", "host1", "2026-01-01T00:00:00Z", 500, 10000, 8000)};
    write_fake_report(in, devs, 1);
    const char *paths[1] = {in};
    cJSON *root = NULL;
    TH_ASSERT_OK(report_merge(paths, 1, &root));
    snprintf(out, sizeof out, "%s/full", dir);
    TH_ASSERT_OK(tsr_make_dirs(out));
    snprintf(path, sizeof path, "%s/report.md", out);
    assert_int_equal(symlink("/dev/full", path), 0);
    TH_ASSERT_OK(report_write(root, out, true));
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    char *md = read_text(path);
    TH_ASSERT_CONTAINS(md, "![devices per op](bars.svg)"); /* complete to its last section */
    free(md);
    /* report.md a directory: refused, nothing half-written beside it */
    snprintf(out, sizeof out, "%s/blocked", dir);
    snprintf(path, sizeof path, "%s/report.md", out);
    TH_ASSERT_OK(tsr_make_dirs(path));
    tsr_status status = report_write(root, out, true);
    assert_int_equal(status, TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "report.md");
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    glob_t g;
    snprintf(path, sizeof path, "%s/*.tmp*", out);
    assert_int_equal(glob(path, 0, NULL, &g), GLOB_NOMATCH);
    globfree(&g);
    cJSON_Delete(root);
    th_remove_tree(dir);
}

/* A failing rsvg-convert: every SVG and report.md are still written, report.md lists each PNG
 * as missing with the reason, no partial PNG is left, and the call fails (TSR_ERR_IO). */
static void failed_png_conversion_is_reported(void **state) {
    (void)state;
    char dir[512], bin[700], tool[800], in[700], out[700], path[800];
    th_tempdir(dir, sizeof dir);
    snprintf(bin, sizeof bin, "%s/bin", dir);
    TH_ASSERT_OK(tsr_make_dirs(bin));
    snprintf(tool, sizeof tool, "%s/rsvg-convert", bin);
    const char *script = "#!/bin/sh\n# writes half a file, then fails\nwhile [ $# -gt 1 ]; do\n"
                         "  if [ \"$1\" = -o ]; then printf 'partial' > \"$2\"; fi\n  shift\ndone\nexit 3\n";
    th_write_file(tool, script, strlen(script));
    assert_int_equal(chmod(tool, 0755), 0);
    snprintf(in, sizeof in, "%s/a.json", dir);
    cJSON *devs[1] = {fake_device("Card X", "host1", "2026-01-01T00:00:00Z", 500, 10000, 8000)};
    write_fake_report(in, devs, 1);
    const char *paths[1] = {in};
    cJSON *root = NULL;
    TH_ASSERT_OK(report_merge(paths, 1, &root));
    const char *old = getenv("PATH");
    char *saved = strdup(old ? old : "");
    char newpath[4096];
    snprintf(newpath, sizeof newpath, "%s:%s", bin, saved);
    setenv("PATH", newpath, 1);
    snprintf(out, sizeof out, "%s/out", dir);
    tsr_status status = report_write(root, out, true);
    setenv("PATH", saved, 1);
    free(saved);
    assert_int_equal(status, TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "rsvg-convert");
    snprintf(path, sizeof path, "%s/report.md", out);
    char *md = read_text(path);
    TH_ASSERT_CONTAINS(md, "bars.png: **missing** (rsvg-convert exited with status 3)");
    TH_ASSERT_CONTAINS(md, "roofline-1-card-x.png: **missing**");
    free(md);
    glob_t g;
    snprintf(path, sizeof path, "%s/*.png*", out);
    assert_int_equal(glob(path, 0, NULL, &g), GLOB_NOMATCH);
    globfree(&g);
    snprintf(path, sizeof path, "%s/bars.svg", out);
    assert_true(file_exists(path));
    cJSON_Delete(root);
    th_remove_tree(dir);
}

/* Merging is linear: 100 000 devices, all of them again (newer) in a second report, keep the
 * newer of each pair with a note; before, each device was compared with every kept one. */
static void merge_many_devices(void **state) {
    (void)state;
    enum { N = 100000 };
    char dir[512], a[700], b[700];
    th_tempdir(dir, sizeof dir);
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    for (int f = 0; f < 2; ++f) {
        bench_text t = {0};
        bench_text_printf(&t, "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [");
        for (int i = 0; i < N; ++i)
            bench_text_printf(&t, "%s{\"fingerprint\": \"P|V|card %d|1.0\", \"host\": \"h%d\", \"status\": \"ok\", "
                                  "\"created\": \"2026-0%d-01T00:00:00Z\", \"results\": []}", i ? "," : "", i, i % 7,
                              f + 1);
        bench_text_printf(&t, "]}");
        char *text = bench_text_finish(&t);
        assert_non_null(text);
        th_write_file(f ? b : a, text, strlen(text));
        free(text);
    }
    const char *paths[2] = {a, b};
    cJSON *root = NULL;
    TH_ASSERT_OK(report_merge(paths, 2, &root));
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    assert_int_equal(cJSON_GetArraySize(devices), N);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "notes")), N);
    int i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, devices) { /* in first-seen order, each the newer copy (from b) */
        char fp[64];
        snprintf(fp, sizeof fp, "P|V|card %d|1.0", i++);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "fingerprint")), fp);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "source")), b);
    }
    cJSON_Delete(root);
    th_remove_tree(dir);
}

/* report.md is linear in rows: 200 000 rows of one device in 10 cases, CLBlast's rows last
 * (each tessera row used to search the whole list for its peer). The peer ratio is unchanged. */
static void report_many_rows(void **state) {
    (void)state;
    enum { ROWS = 200000, CASES = 10 };
    char dir[512], a[700], out[700], path[800];
    th_tempdir(dir, sizeof dir);
    snprintf(a, sizeof a, "%s/a.json", dir);
    bench_text t = {0};
    bench_text_printf(&t, "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [{\"fingerprint\": \"f\", "
                          "\"host\": \"h\", \"status\": \"ok\", \"info\": {\"name\": \"Big\"}, \"results\": [");
    for (int i = 0; i < ROWS; ++i)
        bench_text_printf(&t, "%s{\"case\": \"c%d\", \"impl\": \"tessera\", \"shape\": \"s%d\", \"time_ms\": 2, "
                              "\"gflops\": 1, \"gbps\": 1, \"flops\": 0, \"bytes\": 0}", i ? "," : "", i % CASES, i);
    for (int c = 0; c < CASES; ++c)
        bench_text_printf(&t, ",{\"case\": \"c%d\", \"impl\": \"clblast\", \"shape\": \"s\", \"time_ms\": %d, \"gflops\": 1, "
                              "\"gbps\": 1, \"flops\": 0, \"bytes\": 0}", c, 3 + c);
    bench_text_printf(&t, "]}]}");
    char *text = bench_text_finish(&t);
    assert_non_null(text);
    th_write_file(a, text, strlen(text));
    free(text);
    snprintf(out, sizeof out, "%s/out", dir);
    char *md = merge_one_and_render(a, out, path, sizeof path);
    assert_int_equal(count_char(md, '\n') > ROWS, true);
    TH_ASSERT_CONTAINS(md, "| Big | s0 | tessera | 2.000 | 1 GB/s | - | 0% | 1.50x | - |");       /* c0: 3 / 2 */
    TH_ASSERT_CONTAINS(md, "| Big | s199999 | tessera | 2.000 | 1 GB/s | - | 0% | 6.00x | - |"); /* c9: 12 / 2 */
    /* rows grouped by case, cases in first-seen order */
    assert_true(strstr(md, "| Big | s10 |") < strstr(md, "### c1"));
    free(md);
    th_remove_tree(dir);
}

int main(void) {
    if (two_platforms()) {
        const struct CMUnitTest only[] = {cmocka_unit_test(failing_device)};
        return TH_RUN(only);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(peaks_small),
        cmocka_unit_test(report_files_and_round_trip),
        cmocka_unit_test(damaged_reports),
        cmocka_unit_test(merge_reports),
        cmocka_unit_test(hostile_report_is_inert),
        cmocka_unit_test(report_md_is_written_atomically),
        cmocka_unit_test(failed_png_conversion_is_reported),
        cmocka_unit_test(merge_many_devices),
        cmocka_unit_test(report_many_rows),
    };
    return TH_RUN(tests);
}
