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

/* The standard cases' runners at small sizes (on every device: their simulator sizes): one case
 * per op and GEMM's two, picked by id (ops add cases, such as their 16-bit ones, in between). */
static const report_case *standard_small(size_t *n) {
    static report_case suite[8];
    static const char *const picked[] = {"gemm-square", "gemm-bert", "gelu-16M", "conv-resnet50-3x3", "attention-2048",
                                         "layernorm-bert"};
    static const char *const ids[] = {"gemm-small", "gemm-small-bert", "gelu-small", "conv-small", "attention-small",
                                         "layernorm-small"};
    size_t count = 0, k = 0;
    const report_case *std = report_standard_suite(&count);
    for (size_t i = 0; i < count; ++i)
        for (size_t j = 0; j < sizeof picked / sizeof picked[0]; ++j)
            if (strcmp(std[i].id, picked[j]) == 0) {
                suite[k] = std[i];
                suite[k].id = ids[j];
                suite[k].shape = std[i].simulator_shape;
                ++k;
            }
    assert_int_equal(k, 6);
    *n = k;
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

/* The default buffer (buffer_bytes 0, which `report` and `peak` use without --peak-size/--size):
 * 128 MiB on a CPU, 512 MiB elsewhere, halved until one allocation, half the device's memory and
 * half the host's available memory hold it. Launch latency only: the buffers are made and filled,
 * not streamed (the tests that run reports pass 1 MiB). */
static void peaks_default_buffer(void **state) {
    (void)state;
    tsr_device *dev = th_open_device();
    const tsr_device_info *info = tsr_device_get_info(dev);
    peak_options po = {.budget_s = 0.005, .tests = PEAK_LAUNCH, .quiet = true};
    peak_result r;
    TH_ASSERT_OK(peak_measure(dev, &po, &r));
    size_t want = info->type == TSR_DEVICE_CPU ? (size_t)128 << 20 : (size_t)512 << 20;
    while (want > r.buffer_bytes) want /= 2; /* halved, never grown */
    if (r.buffer_bytes != want / 64 * 64) fail_msg("default peak buffer %zu bytes, not a halving of the default", r.buffer_bytes);
    assert_true(r.buffer_bytes >= 4096 && r.buffer_bytes <= info->max_alloc_bytes &&
                2 * (uint64_t)r.buffer_bytes <= info->global_mem_bytes);
    if (info->type == TSR_DEVICE_CPU && info->max_alloc_bytes >= (128u << 20) && info->global_mem_bytes >= (256u << 20) &&
        util_host_available() >= (256u << 20))
        assert_int_equal(r.buffer_bytes, (size_t)128 << 20);
    assert_true(r.dispatch_us.median > 0);
    assert_true(r.bandwidth_gbps == 0); /* not measured */
    tsr_device_close(dev);
}


/* A tuning database at `path` whose one entry, gemm/small on this device, was tuned for an older
 * kernel source (its configuration: the class's default). */
static void write_stale_db(const char *path) {
    tsr_device *dev = th_open_device();
    const tsr_device_info *i = tsr_device_get_info(dev);
    tsr_config_info ci;
    TH_ASSERT_OK(tsr_config_lookup(dev, "gemm", "small", &ci));
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "tessera-tuning-db");
    cJSON_AddNumberToObject(root, "schema_version", 1);
    cJSON *node = cJSON_AddObjectToObject(cJSON_AddObjectToObject(root, "devices"), "this");
    cJSON_AddStringToObject(node, "platform", i->platform_name);
    cJSON_AddStringToObject(node, "vendor", i->vendor);
    cJSON_AddStringToObject(node, "name", i->name);
    cJSON_AddStringToObject(node, "driver", i->driver_version);
    cJSON_AddStringToObject(node, "opencl_c", i->opencl_c_version);
    cJSON_AddStringToObject(node, "type", tsr_device_type_str(i->type));
    cJSON *entry = cJSON_AddObjectToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(node, "ops"), "gemm"), "small");
    cJSON *config = cJSON_AddObjectToObject(entry, "config");
    char *save = NULL;
    for (char *pair = strtok_r(ci.config, " ", &save); pair; pair = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(pair, '=');
        assert_non_null(eq);
        *eq = '\0';
        cJSON_AddNumberToObject(config, pair, atoi(eq + 1));
    }
    cJSON_AddNumberToObject(entry, "gflops", 1);
    cJSON_AddStringToObject(entry, "source_hash", "0123456789abcdef");
    TH_ASSERT_OK(tsr_db_seal(root)); /* as tessera writes every file */
    char *text = cJSON_Print(root);
    th_write_file(path, text, strlen(text));
    free(text);
    cJSON_Delete(root);
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
    /* gemm/small tuned, but for an older kernel source (no built-in entry in the way) */
    char db[700], *saved_db = getenv("TSR_TUNING_DB") ? strdup(getenv("TSR_TUNING_DB")) : NULL;
    snprintf(db, sizeof db, "%s/stale-tuning.json", dir);
    setenv("TSR_BUILTIN_TUNING", "off", 1);
    write_stale_db(db);
    setenv("TSR_TUNING_DB", db, 1);
    TH_ASSERT_OK(report_run(sel, 1, &o, &root));
    unsetenv("TSR_BUILTIN_TUNING");
    if (saved_db) setenv("TSR_TUNING_DB", saved_db, 1);
    else unsetenv("TSR_TUNING_DB");
    free(saved_db);
    assert_int_equal(report_failed_devices(root), 0);
    const cJSON *dev = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "devices"), 0);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(dev, "peaks"));
    /* Per op and class, where the configuration came from: the stale class is told from one
     * never tuned. */
    const cJSON *gemm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dev, "configs"), "gemm");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(gemm, "small")), "default-stale");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(gemm, "large")), "default");
    const cJSON *gelu = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dev, "configs"), "gelu");
    assert_true(cJSON_GetArraySize(gelu) > 0);
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
    TH_ASSERT_CONTAINS(md, "**Untuned because stale** on ");
    TH_ASSERT_CONTAINS(md, "re-tunes them): gemm small, batched");
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

/* The in-memory merge (`report --mpi` on rank 0) and the file merge give the same bytes: reports
 * as text, each parsed and merged under the name of the file it is written to; the notes of the
 * sources are kept once each, "created" is the newest source's (no clock in it), ranks of one MPI
 * run on one host are noted, and a bad "notes" or "mpi" record is refused. */
static char *report_text(const char *created, const char *note, cJSON *devices[], int n) {
    cJSON *root = report_new(created);
    if (note) cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(root, "notes"), cJSON_CreateString(note));
    for (int i = 0; i < n; ++i)
        cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(root, "devices"), devices[i]);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

static void mark_rank(cJSON *d, int rank) {
    cJSON *mpi = cJSON_AddObjectToObject(d, "mpi");
    cJSON_AddNumberToObject(mpi, "rank", rank);
    cJSON_AddNumberToObject(mpi, "ranks", 3);
    cJSON_AddStringToObject(mpi, "run", "run-1");
}

static void merge_in_memory(void **state) {
    (void)state;
    char dir[512], path[3][700];
    th_tempdir(dir, sizeof dir);
    cJSON *d0[2] = {fake_device("Card X", "host1", "2026-03-01T00:00:00Z", 500, 10000, 8000),
                    fake_device("Card Y", "host1", "2026-03-01T00:00:00Z", 900, 20000, 15000)};
    cJSON *d1[1] = {
        fake_device("Card Y", "host1", "2026-03-01T00:00:00Z", 950, 21000, 16000)}; /* a tie: rank 0's stays */
    mark_rank(d0[0], 0), mark_rank(d0[1], 0), mark_rank(d1[0], 1);
    char *text[3] = {report_text("2026-03-01T00:00:00Z", NULL, d0, 2),
                     report_text("2026-03-01T00:00:05Z", "rank 1: a note", d1, 1),
                     report_text("2026-02-01T00:00:00Z", "rank 2 of 3: no report from it", NULL, 0)};
    cJSON *roots[3] = {0}, *from_text = NULL, *from_files = NULL;
    const char *names[3] = {path[0], path[1], path[2]};
    for (int r = 0; r < 3; ++r) {
        snprintf(path[r], sizeof path[r], "%s/rank-%d.json", dir, r);
        th_write_file(path[r], text[r], strlen(text[r]));
        TH_ASSERT_OK(report_parse(text[r], strlen(text[r]), names[r], &roots[r]));
    }
    TH_ASSERT_OK(report_merge_roots(roots, names, 3, &from_text));
    for (int r = 0; r < 3; ++r)
        assert_null(roots[r]); /* taken */
    TH_ASSERT_OK(report_merge(names, 3, &from_files));
    char *a = cJSON_Print(from_text), *b = cJSON_Print(from_files);
    assert_string_equal(a, b);
    free(a), free(b);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(from_text, "created")),
                        "2026-03-01T00:00:05Z");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(from_text, "devices")), 2);
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(from_text, "notes");
    assert_int_equal(cJSON_GetArraySize(notes), 4);
    assert_string_equal(cJSON_GetArrayItem(notes, 0)->valuestring, "rank 1: a note");
    TH_ASSERT_CONTAINS(cJSON_GetArrayItem(notes, 1)->valuestring, "duplicate: 'Card Y'");
    assert_string_equal(cJSON_GetArrayItem(notes, 2)->valuestring, "rank 2 of 3: no report from it");
    TH_ASSERT_CONTAINS(cJSON_GetArrayItem(notes, 3)->valuestring,
                       "ranks 0 and 1 of MPI run run-1 measured on one host, 'host1'");
    /* merged again with one of its sources: every note once */
    char merged_path[800];
    snprintf(merged_path, sizeof merged_path, "%s/merged.json", dir);
    char *merged_text = cJSON_Print(from_files);
    th_write_file(merged_path, merged_text, strlen(merged_text));
    free(merged_text);
    const char *again[2] = {merged_path, path[1]};
    cJSON *twice = NULL;
    TH_ASSERT_OK(report_merge(again, 2, &twice));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(twice, "notes")), 5); /* + Card Y again */
    cJSON_Delete(twice);
    cJSON_Delete(from_text);
    cJSON_Delete(from_files);
    for (int r = 0; r < 3; ++r)
        free(text[r]);
    /* foreign text: damaged JSON, a note that is not a string, a rank outside its run */
    static const char *const bad[] = {
        "{\"format\": \"tessera-report\"",
        "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [], \"notes\": [1]}",
        "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [{\"fingerprint\": \"x\", \"status\": "
        "\"ok\", \"host\": \"h\", \"mpi\": {\"rank\": 2, \"ranks\": 2, \"run\": \"r\"}}]}",
    };
    static const char *const why[] = {"rank-x is unusable: not valid JSON", "a note is not a string", "\"mpi\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        cJSON *root = NULL;
        TH_ASSERT_STATUS(report_parse(bad[i], strlen(bad[i]), "rank-x", &root), TSR_ERR_CORRUPT);
        TH_ASSERT_CONTAINS(tsr_last_error(), why[i]);
        assert_null(root);
    }
    cJSON *none = NULL;
    TH_ASSERT_STATUS(report_merge_roots(NULL, NULL, 0, &none), TSR_ERR_INVALID_ARG);
    th_remove_tree(dir);
}

/* The comparison's entry of device `device` in the row of (case, shape, impl); NULL if none. */
static const cJSON *comparison_entry(const cJSON *cmp, const char *id, const char *shape, const char *impl, int device) {
    const cJSON *row, *e;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(cmp, "rows")) {
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "case")), id) != 0 ||
            strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "shape")), shape) != 0 ||
            strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "impl")), impl) != 0)
            continue;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(row, "entries")) {
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "device");
            if (cJSON_IsNumber(d) && d->valueint == device) return e;
        }
    }
    return NULL;
}

static const cJSON *device_row(const cJSON *root, int device, const char *id, const char *impl_prefix) {
    const cJSON *r;
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "devices"), device);
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "results"))
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "case")), id) == 0 &&
            strncmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "impl")), impl_prefix, strlen(impl_prefix)) == 0)
            return r;
    return NULL;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) fail_msg("\"%s\" is not a number", key);
    return v->valuedouble;
}

/* Every ratio of the comparison is the baseline's time over the device's, from the devices' own
 * rows, and report.md shows it (two decimals) in the row of its case. */
static void check_comparison_numbers(const cJSON *root, const char *md) {
    const cJSON *cmp = cJSON_GetObjectItemCaseSensitive(root, "comparison"), *row, *e;
    assert_non_null(cmp);
    int base = (int)num(cmp, "baseline"), checked = 0;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(cmp, "rows")) {
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "case"));
        const char *impl = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "impl"));
        const cJSON *b = device_row(root, base, id, impl);
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(row, "entries")) {
            if (!cJSON_GetObjectItemCaseSensitive(e, "ratio")) continue;
            const cJSON *r = device_row(root, (int)num(e, "device"), id, impl);
            assert_non_null(b), assert_non_null(r);
            double want = num(b, "time_ms") / num(r, "time_ms");
            assert_true(fabs(num(e, "ratio") - want) <= 1e-12 * want);
            /* the same ratio from the rates (same shape, same work) */
            if (num(r, "flops") > 0) assert_true(fabs(num(r, "gflops") / num(b, "gflops") - want) <= 1e-9 * want);
            if ((int)num(e, "device") == base) continue;
            char cell[64];
            snprintf(cell, sizeof cell, want >= 100 ? "| **%.0f** |" : "| **%.3g** |", want); /* report.md's format */
            char start[128]; /* the line of this case and shape holds the ratio */
            snprintf(start, sizeof start, "| %s | %s | %s |", id, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "shape")), impl);
            const char *line = strstr(md, start);
            if (!line) fail_msg("report.md has no side-by-side line '%s'", start);
            const char *end = strchr(line, '\n');
            const char *hit = strstr(line, "**");
            assert_true(hit && hit < end);
            bool found = false;
            for (const char *p = line; p && p < end && !found; p = strstr(p + 1, "| **"))
                found = strncmp(p, cell, strlen(cell)) == 0;
            if (!found) fail_msg("the line '%s' lacks the ratio %s", start, cell);
            ++checked;
        }
    }
    assert_true(checked > 0);
}

/* Two platforms: the simulator fails one case (after a case that succeeded); that case is
 * recorded as failed, the next case still runs there, PoCL completes, and the two devices are
 * side by side (same small shapes on both). */
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
    int ok = 0, partial = 0;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "status"));
        int rows = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "results"));
        assert_true(rows >= 2); /* both real cases ran everywhere */
        if (strcmp(status, "ok") == 0) {
            ++ok;
            assert_null(cJSON_GetObjectItemCaseSensitive(d, "failures"));
        } else {
            ++partial;
            assert_string_equal(status, "partial");
            assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "simulator")));
            const cJSON *failures = cJSON_GetObjectItemCaseSensitive(d, "failures");
            assert_int_equal(cJSON_GetArraySize(failures), 1);
            const cJSON *f = cJSON_GetArrayItem(failures, 0);
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "case")), "injected");
            TH_ASSERT_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "error")), "failure injected");
            TH_ASSERT_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "error")), "injected");
        }
    }
    assert_int_equal(ok, 1);
    assert_int_equal(partial, 1);
    TH_ASSERT_OK(report_write(root, dir, true));
    char path[700];
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = read_text(path);
    TH_ASSERT_CONTAINS(md, "**partial**");
    TH_ASSERT_CONTAINS(md, "**failed**: TSR\\_ERR\\_UNSUPPORTED"); /* the injected case's row in its table */
    TH_ASSERT_CONTAINS(md, "simulator");
    TH_ASSERT_CONTAINS(md, "## Side by side");
    TH_ASSERT_CONTAINS(md, "### injected"); /* the failed case has its table */
    check_comparison_numbers(root, md);
    free(md);
    /* the baseline is PoCL's device, not the simulator (whichever platform came first) */
    const cJSON *cmp = cJSON_GetObjectItemCaseSensitive(root, "comparison");
    const cJSON *base = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "devices"), (int)num(cmp, "baseline"));
    assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(base, "simulator")));
    cJSON_Delete(root);
    th_remove_tree(dir);
}

/* One real device twice and a selector that opens nothing: the broken one is skipped with the
 * reason, the two others report in full, side by side (the same processor: ratio near 1, not
 * asserted: timings), and report.json on disk holds the same comparison. */
static void skipped_device_and_side_by_side(void **state) {
    (void)state;
    char dir[512], path[700];
    th_tempdir(dir, sizeof dir);
    size_t n = 0;
    const report_case *suite = standard_small(&n);
    report_options o = quick_options(dir, suite, 2);
    cJSON *root = NULL;
    const char *sel[3] = {"", "no-such-device-anywhere", ""};
    TH_ASSERT_OK(report_run(sel, 3, &o, &root));
    assert_int_equal(report_failed_devices(root), 1);
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    const cJSON *broken = cJSON_GetArrayItem(devices, 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(broken, "status")), "skipped");
    TH_ASSERT_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(broken, "error")), "open: ");
    for (int i = 0; i < 3; i += 2) {
        const cJSON *d = cJSON_GetArrayItem(devices, i);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "status")), "ok");
        assert_true(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(d, "results")) >= 2);
    }
    const cJSON *cmp = cJSON_GetObjectItemCaseSensitive(root, "comparison");
    assert_non_null(cmp);
    assert_int_equal((int)num(cmp, "baseline"), 0);
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(cmp, "devices");
    assert_int_equal(cJSON_GetArraySize(parts), 2); /* the skipped device has nothing to compare */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(parts, 1), "same_hardware_as_baseline")));
    const cJSON *e = comparison_entry(cmp, "gemm-small", suite[0].shape, "tessera", 2);
    assert_non_null(e);
    assert_true(num(e, "ratio") > 0);
    TH_ASSERT_OK(report_write(root, dir, true));
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = read_text(path);
    TH_ASSERT_CONTAINS(md, "| **skipped**: open: ");
    TH_ASSERT_CONTAINS(md, "another device of the same OpenCL implementation");
    check_comparison_numbers(root, md);
    free(md);
    snprintf(path, sizeof path, "%s/report.json", dir);
    cJSON *loaded = NULL;
    TH_ASSERT_OK(report_load(path, &loaded));
    char *a = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(loaded, "comparison"));
    char *b = cJSON_PrintUnformatted(cmp);
    assert_string_equal(a, b);
    free(a), free(b);
    cJSON_Delete(loaded);
    cJSON_Delete(root);
    th_remove_tree(dir);
}

/* TSR_TEST_MODE=rusticl (OCL_ICD_VENDORS with PoCL and rusticl, RUSTICL_ENABLE=llvmpipe): the
 * report on PoCL's CPU device and llvmpipe, small shapes, both side by side as two
 * implementations of the same processor; the ratios agree with the rows. */
static void pocl_and_rusticl_side_by_side(void **state) {
    (void)state;
    char dir[512], path[700];
    th_tempdir(dir, sizeof dir);
    size_t n = 0;
    const report_case *suite = standard_small(&n);
    report_options o = quick_options(dir, suite, n);
    cJSON *root = NULL;
    const char *sel[2] = {"pthread", "llvmpipe"};
    TH_ASSERT_OK(report_run(sel, 2, &o, &root));
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices"), *d;
    cJSON_ArrayForEach(d, devices) {
        const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "status"));
        if (strcmp(status, "ok") != 0)
            fail_msg("%s: %s: %s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "selector")), status,
                     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "error")));
    }
    TH_ASSERT_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                           cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(devices, 1), "info"), "platform_name")),
                       "rusticl");
    const cJSON *cmp = cJSON_GetObjectItemCaseSensitive(root, "comparison");
    assert_non_null(cmp);
    int tessera_rows = 0; /* every case of tessera's on both, beside its peers' rows */
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(cmp, "rows")) {
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "impl")), "tessera") != 0) continue;
        ++tessera_rows;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(row, "entries")) assert_true(num(e, "ratio") > 0);
    }
    assert_int_equal(tessera_rows, (int)n);
    TH_ASSERT_OK(report_write(root, dir, true));
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = read_text(path);
    TH_ASSERT_CONTAINS(md, "through another OpenCL implementation");
    check_comparison_numbers(root, md);
    free(md);
    cJSON_Delete(root);
    th_remove_tree(dir);
}

/* Two reports made apart (say, on two machines) merged: the same side-by-side table as one
 * report with both devices. Devices: PoCL and rusticl on host1 (same processor), a GPU, and a
 * device skipped with its reason; a case failed on one device. */
static cJSON *cpu_device(const char *name, const char *platform, const char *host, double gemm_gflops) {
    cJSON *d = fake_device(name, host, "2026-01-01T00:00:00Z", 20, 200, gemm_gflops);
    cJSON *info = cJSON_GetObjectItemCaseSensitive(d, "info");
    cJSON_ReplaceItemInObjectCaseSensitive(info, "type", cJSON_CreateString("CPU"));
    cJSON_ReplaceItemInObjectCaseSensitive(info, "platform_name", cJSON_CreateString(platform));
    char fp[256];
    snprintf(fp, sizeof fp, "%s|%s|1.0", platform, name);
    cJSON_ReplaceItemInObjectCaseSensitive(d, "fingerprint", cJSON_CreateString(fp));
    return d;
}

static void add_gemm_row(cJSON *d, const char *id, size_t m, size_t n, size_t k, double gflops) {
    cJSON *r = cJSON_CreateObject();
    char shape[64];
    snprintf(shape, sizeof shape, "%zux%zux%zu", m, n, k);
    double flops = 2.0 * m * n * k;
    cJSON_AddStringToObject(r, "case", id);
    cJSON_AddStringToObject(r, "op", "gemm");
    cJSON_AddStringToObject(r, "shape", shape);
    cJSON_AddStringToObject(r, "impl", "tessera");
    cJSON_AddNumberToObject(r, "time_ms", flops / (gflops * 1e6));
    cJSON_AddNumberToObject(r, "flops", flops);
    cJSON_AddNumberToObject(r, "bytes", 4.0 * (m * k + k * n + m * n));
    cJSON_AddNumberToObject(r, "gflops", gflops);
    cJSON_AddNumberToObject(r, "gbps", 0);
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(d, "results"), r);
}

/* report --mpi's shared-host note: ranks of one run on one host name competed for it, unless their
 * CPU devices name different processors (VMs cloned from one image keep their hostname): then it says
 * several machines share the name. A device that names no processor (a GPU) joins either group. */
static void mpi_ranks_on_one_host_name(void **state) {
    (void)state;
    char dir[512], path[700];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ranks.json", dir);
    const char *pocl = "Portable Computing Language";
    cJSON *devs[5] = {cpu_device("pthread-a", pocl, "vm", 150), cpu_device("pthread-b", pocl, "vm", 300),
                      fake_device("Card X", "vm", "2026-03-01T00:00:00Z", 500, 10000, 8000),
                      cpu_device("pthread-c", pocl, "box", 150), fake_device("Card Y", "box", "2026-03-01T00:00:00Z", 500, 10000, 8000)};
    const char *cpus[5] = {"AuthenticAMD family 25 model 17", "AuthenticAMD family 26 model 2", "",
                           "GenuineIntel family 6 model 85", ""};
    for (int i = 0; i < 5; ++i) {
        if (*cpus[i]) cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(devs[i], "info"), "host_cpu", cpus[i]);
        mark_rank(devs[i], i);
        cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(devs[i], "mpi"), "ranks", cJSON_CreateNumber(5));
    }
    write_fake_report(path, devs, 5);
    cJSON *rep = NULL;
    const char *p1[1] = {path};
    TH_ASSERT_OK(report_merge(p1, 1, &rep));
    int several = 0, competed = 0;
    const cJSON *note;
    cJSON_ArrayForEach(note, cJSON_GetObjectItemCaseSensitive(rep, "notes")) {
        if (strstr(note->valuestring, "ranks 0, 1 and 2 of MPI run run-1 name one host, 'vm', but 2 processors "
                                      "('AuthenticAMD family 25 model 17', 'AuthenticAMD family 26 model 2')"))
            ++several;
        if (strstr(note->valuestring, "ranks 3 and 4 of MPI run run-1 measured on one host, 'box'")) ++competed;
        assert_null(strstr(note->valuestring, "measured on one host, 'vm'"));
    }
    assert_int_equal(several, 1);
    assert_int_equal(competed, 1);
    cJSON_Delete(rep);
    th_remove_tree(dir);
}

/* Two runs of one CPU driver's device name on machines of one host name but other processors (a Zen
 * 4 and a Zen 5 both "pthread-skylake-avx512-AMD EPYC"): the merge keeps both (not one device
 * measured twice), the report names each processor, and the comparison does not call them the
 * same hardware; another device on the same host and processor still is. */
static void processors_told_apart(void **state) {
    (void)state;
    char dir[512], both[700], out[700], path[800];
    th_tempdir(dir, sizeof dir);
    snprintf(both, sizeof both, "%s/both.json", dir);
    const char *pthread = "pthread-skylake-avx512-AMD EPYC", *pocl = "Portable Computing Language";
    cJSON *devs[5] = {cpu_device(pthread, pocl, "vm", 150), cpu_device(pthread, pocl, "vm", 300),
                      cpu_device("basic-skylake-avx512-AMD EPYC", pocl, "vm", 80),
                      cpu_device(pthread, pocl, "vm", 310),  /* the Zen 5's run again: one device twice */
                      cpu_device(pthread, pocl, "vm", 155)}; /* a run that names no processor (an older report) */
    const char *cpus[5] = {"AuthenticAMD family 25 model 17", "AuthenticAMD family 26 model 2", "AuthenticAMD family 25 model 17",
                           "AuthenticAMD family 26 model 2", ""};
    for (int i = 0; i < 5; ++i)
        if (*cpus[i]) cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(devs[i], "info"), "host_cpu", cpus[i]);
    write_fake_report(both, devs, 5);
    cJSON *rep = NULL;
    const char *p1[1] = {both};
    TH_ASSERT_OK(report_merge(p1, 1, &rep));
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rep, "comparison"), "devices");
    assert_int_equal(cJSON_GetArraySize(parts), 3); /* the last two are duplicates, each of its own processor's run */
    int duplicates = 0;
    const cJSON *note;
    cJSON_ArrayForEach(note, cJSON_GetObjectItemCaseSensitive(rep, "notes")) duplicates += strstr(note->valuestring, "duplicate:") != NULL;
    assert_int_equal(duplicates, 2);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(parts, 1), "same_hardware_as_baseline")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(parts, 2), "same_hardware_as_baseline")));
    snprintf(out, sizeof out, "%s/out", dir);
    TH_ASSERT_OK(report_write(rep, out, true));
    snprintf(path, sizeof path, "%s/report.md", out);
    char *md = read_text(path);
    TH_ASSERT_CONTAINS(md, "pthread-skylake-avx512-AMD EPYC (AuthenticAMD family 26 model 2)");
    TH_ASSERT_CONTAINS(md, "pthread-skylake-avx512-AMD EPYC on AuthenticAMD family 25 model 17");
    free(md);
    cJSON_Delete(rep);
    th_remove_tree(dir);
}

static void merged_side_by_side(void **state) {
    (void)state;
    char dir[512], a[700], b[700], both[700], out[700], path[800];
    th_tempdir(dir, sizeof dir);
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    snprintf(both, sizeof both, "%s/both.json", dir);
    for (int f = 0; f < 2; ++f) {
        cJSON *devs[4] = {cpu_device("pthread-cpu", "Portable Computing Language", "host1", 150),
                          cpu_device("llvmpipe", "rusticl", "host1", 6),
                          fake_device("Card G", "host1", "2026-01-01T00:00:00Z", 900, 20000, 12000),
                          cpu_device("broken", "Broken ICD", "host1", 1)};
        add_gemm_row(devs[0], "gemm-bert", 512, 3072, 768, 120);
        /* llvmpipe: a failed case; the broken device: skipped, nothing measured */
        cJSON *fail = cJSON_AddArrayToObject(devs[1], "failures");
        cJSON *fc = cJSON_CreateObject();
        cJSON_AddStringToObject(fc, "case", "gemm-bert");
        cJSON_AddStringToObject(fc, "op", "gemm");
        cJSON_AddStringToObject(fc, "shape", "512x3072x768");
        cJSON_AddStringToObject(fc, "error", "build: the kernel did not build");
        cJSON_AddItemToArray(fail, fc);
        cJSON_ReplaceItemInObjectCaseSensitive(devs[1], "status", cJSON_CreateString("partial"));
        cJSON_ReplaceItemInObjectCaseSensitive(devs[3], "status", cJSON_CreateString("skipped"));
        cJSON_ReplaceItemInObjectCaseSensitive(devs[3], "error", cJSON_CreateString("open: the device reports 0 compute units"));
        cJSON_DeleteItemFromObjectCaseSensitive(devs[3], "results");
        cJSON_DeleteItemFromObjectCaseSensitive(devs[3], "peaks");
        if (f == 0) {
            write_fake_report(both, devs, 4);
        } else {
            write_fake_report(a, devs, 1);
            write_fake_report(b, devs + 1, 3);
        }
    }
    cJSON *one = NULL, *two = NULL;
    const char *p1[1] = {both}, *p2[2] = {a, b};
    TH_ASSERT_OK(report_merge(p1, 1, &one));
    TH_ASSERT_OK(report_merge(p2, 2, &two));
    char *c1 = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(one, "comparison"));
    char *c2 = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(two, "comparison"));
    assert_string_equal(c1, c2);
    free(c1), free(c2);
    const cJSON *cmp = cJSON_GetObjectItemCaseSensitive(two, "comparison");
    assert_int_equal((int)num(cmp, "baseline"), 0);
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(cmp, "devices");
    assert_int_equal(cJSON_GetArraySize(parts), 3); /* the skipped device is not compared */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(parts, 1), "same_hardware_as_baseline")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(parts, 2), "same_hardware_as_baseline")));
    /* 2048^3 at 150 and 6 GFLOP/s: the rusticl device is 6/150 = 0.04 of the baseline */
    const cJSON *e = comparison_entry(cmp, "gemm-square", "2048x2048x2048", "tessera", 1);
    assert_non_null(e);
    assert_true(fabs(num(e, "ratio") - 0.04) < 1e-9);
    e = comparison_entry(cmp, "gemm-bert", "512x3072x768", "tessera", 1);
    assert_non_null(e); /* the failed case: in the comparison with its error, no ratio */
    TH_ASSERT_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "error")), "did not build");
    assert_null(cJSON_GetObjectItemCaseSensitive(e, "ratio"));
    snprintf(out, sizeof out, "%s/out", dir);
    TH_ASSERT_OK(report_write(two, out, true));
    snprintf(path, sizeof path, "%s/report.md", out);
    char *md = read_text(path);
    if (getenv("DEBUG_MD")) fputs(md, stderr);
    TH_ASSERT_CONTAINS(md, "Baseline: #1 pthread-cpu (Portable Computing Language)");
    TH_ASSERT_CONTAINS(md, "#2 llvmpipe (rusticl): the same processor as the baseline (CPU devices of host host1), "
                           "through another OpenCL implementation");
    TH_ASSERT_CONTAINS(md, "#3 Card G (Vendor Platform): not known to be the same hardware");
    TH_ASSERT_CONTAINS(md, "| gemm-square | 2048x2048x2048 | tessera | 150.0 GFLOP/s (114.532 ms) | 6 GFLOP/s (2863.312 ms) "
                           "| 12000 GFLOP/s (1.432 ms) | **0.04** | **80** |");
    TH_ASSERT_CONTAINS(md, "| gemm-bert | 512x3072x768 | tessera | 120.0 GFLOP/s (20.133 ms) | failed: build: the kernel did not build | - | - | - |");
    TH_ASSERT_CONTAINS(md, "| **skipped**: open: the device reports 0 compute units |");
    TH_ASSERT_CONTAINS(md, "| llvmpipe | 512x3072x768 | **failed**: build: the kernel did not build |");
    check_comparison_numbers(two, md);
    free(md);
    cJSON_Delete(one);
    cJSON_Delete(two);
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
    cJSON *op = cJSON_AddObjectToObject(cJSON_AddObjectToObject(d, "configs"), hostile[(i + 1) % NHOSTILE]);
    cJSON_AddStringToObject(op, hostile[(i + 2) % NHOSTILE], "default-stale"); /* flagged in report.md */
    cJSON_AddNumberToObject(op, "not-a-state", 1);
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
    /* No injected heading, and each table intact: the device table has NHOSTILE rows of 12
     * columns (13 pipes), each case table one row of 9 columns (10 pipes), with nothing else
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
        if (pipes == 13) ++device_rows;
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

/* Devices that could not be opened have no fingerprint (""): they say nothing of which device
 * each was, so merging keeps every one of them (two ranks on one host whose devices both failed
 * are two failures, not a duplicate), while a device with a fingerprint is still de-duplicated. */
static void merge_keeps_failed_devices(void **state) {
    (void)state;
    char dir[512], a[700], b[700];
    th_tempdir(dir, sizeof dir);
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    static const char device_fmt[] = "{\"fingerprint\": \"%s\", \"host\": \"h\", \"selector\": \"%s\", "
                                     "\"status\": \"%s\", \"created\": \"2026-0%d-01T00:00:00Z\", \"results\": []}";
    for (int f = 0; f < 2; ++f) {
        util_text t = {0};
        util_text_printf(&t, "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [");
        util_text_printf(&t, device_fmt, "", "0:0", "skipped", f + 1);
        util_text_printf(&t, ",");
        util_text_printf(&t, device_fmt, "", "0:1", "skipped", f + 1);
        util_text_printf(&t, ",");
        util_text_printf(&t, device_fmt, "P|V|card|1.0", "1:0", "ok", f + 1);
        util_text_printf(&t, "]}");
        char *text = util_text_finish(&t);
        assert_non_null(text);
        th_write_file(f ? b : a, text, strlen(text));
        free(text);
    }
    const char *paths[2] = {a, b};
    cJSON *root = NULL;
    TH_ASSERT_OK(report_merge(paths, 2, &root));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "devices")), 5);
    assert_int_equal(report_failed_devices(root), 4);
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(root, "notes");
    assert_int_equal(cJSON_GetArraySize(notes), 1); /* the card with a fingerprint, once */
    TH_ASSERT_CONTAINS(cJSON_GetArrayItem(notes, 0)->valuestring, "duplicate: 'P|V|card|1.0'");
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
        util_text t = {0};
        util_text_printf(&t, "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [");
        for (int i = 0; i < N; ++i)
            util_text_printf(&t, "%s{\"fingerprint\": \"P|V|card %d|1.0\", \"host\": \"h%d\", \"status\": \"ok\", "
                                 "\"created\": \"2026-0%d-01T00:00:00Z\", \"results\": []}", i ? "," : "", i, i % 7,
                             f + 1);
        util_text_printf(&t, "]}");
        char *text = util_text_finish(&t);
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
    util_text t = {0};
    util_text_printf(&t, "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [{\"fingerprint\": \"f\", "
                         "\"host\": \"h\", \"status\": \"ok\", \"info\": {\"name\": \"Big\"}, \"results\": [");
    for (int i = 0; i < ROWS; ++i)
        util_text_printf(&t, "%s{\"case\": \"c%d\", \"impl\": \"tessera\", \"shape\": \"s%d\", \"time_ms\": 2, "
                             "\"gflops\": 1, \"gbps\": 1, \"flops\": 0, \"bytes\": 0}", i ? "," : "", i % CASES, i);
    for (int c = 0; c < CASES; ++c)
        util_text_printf(&t, ",{\"case\": \"c%d\", \"impl\": \"clblast\", \"shape\": \"s\", \"time_ms\": %d, \"gflops\": 1, "
                             "\"gbps\": 1, \"flops\": 0, \"bytes\": 0}", c, 3 + c);
    util_text_printf(&t, "]}]}");
    char *text = util_text_finish(&t);
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

/* ---- numbers from elsewhere: checked where they are read, and harmless to the charts ---- */

/* A one-device report whose `key` at `where` ("result", "device", "peaks", "peaks.launch_us.round_trip",
 * "info") holds the raw JSON number text `value` (1e999, which cJSON reads as infinity, included). */
static char *report_with_number(const char *where, const char *key, const char *value) {
    cJSON *d = fake_device("Card N", "host1", "2026-01-01T00:00:00Z", 500, 10000, 8000);
    cJSON *at = where[0] == 'r' ? cJSON_GetArrayItem(cJSON_GetObjectItem(d, "results"), 0) : d;
    char path[128];
    snprintf(path, sizeof path, "%s", where[0] == 'r' || strcmp(where, "device") == 0 ? "" : where);
    char *save = NULL;
    for (char *part = strtok_r(path, ".", &save); part; part = strtok_r(NULL, ".", &save)) {
        cJSON *next = cJSON_GetObjectItem(at, part);
        at = next ? next : cJSON_AddObjectToObject(at, part);
    }
    cJSON_DeleteItemFromObject(at, key);
    cJSON_AddStringToObject(at, key, "@NUMBER@");
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "tessera-report");
    cJSON_AddNumberToObject(root, "schema_version", 1);
    cJSON_AddStringToObject(root, "created", "2026-01-01T00:00:00Z");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "devices"), d);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char *mark = strstr(text, "\"@NUMBER@\"");
    assert_non_null(mark);
    size_t head = (size_t)(mark - text), tail = strlen(mark + 10);
    char *out = malloc(head + strlen(value) + tail + 1);
    assert_non_null(out);
    memcpy(out, text, head);
    strcpy(out + head, value);
    strcat(out + head, mark + 10);
    free(text);
    return out;
}

/* report --merge used to loop forever (at ~85 MB/s until the OOM killer) on an infinite rate or an
 * intensity of 0 or infinity, and print "inf ms" or "-nan×" for others: every number of a report
 * is now checked when it is loaded, the file refused naming the file and the field. alarm() bounds
 * the test should a check go missing. */
static void foreign_numbers_are_refused(void **state) {
    (void)state;
    char dir[512], path[700];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/foreign.json", dir);
    static const struct {
        const char *where, *key, *value, *message;
    } cases[] = {
        {"result", "gflops", "1e999", "device 0, result 0: \"gflops\" is inf"},
        {"result", "gflops", "-1e999", "\"gflops\" is -inf"},
        {"result", "gflops", "-3", "\"gflops\" is -3"},
        {"result", "gflops", "1e13", "\"gflops\" is 1e+13"},
        {"result", "flops", "1e999", "\"flops\" is inf"},
        {"result", "flops", "0.5", "\"flops\" is 0.5"},
        {"result", "bytes", "1e-999", "\"bytes\" is 0"},
        {"result", "bytes", "1e-300", "\"bytes\" is 1e-300"},
        {"result", "bytes", "1e999", "\"bytes\" is inf"},
        {"result", "time_ms", "1e999", "\"time_ms\" is inf"},
        {"result", "time_ms", "0", "\"time_ms\" is 0"},
        {"result", "time_ms", "1e-999", "\"time_ms\" is 0"},
        {"result", "time_ms", "-1e999", "\"time_ms\" is -inf"},
        {"result", "time_min_ms", "-1", "\"time_min_ms\" is -1"},
        {"result", "gbps", "1e999", "\"gbps\" is inf"},
        {"result", "rel_err", "1e999", "\"rel_err\" is inf"},
        {"result", "runs", "2.5", "\"runs\" is 2.5"},
        {"peaks", "bandwidth_gbps", "1e999", "bandwidth_gbps (inf)"},
        {"peaks", "compute_gflops", "1e-300", "compute_gflops (1e-300)"},
        {"peaks", "empty_launch_us", "1e999", "empty_launch_us is inf"},
        {"peaks.launch_us.round_trip", "median", "1e999", "launch_us.round_trip.median is inf"},
        {"peaks.transfer_gbps.read", "runs", "-1", "transfer_gbps.read.runs is -1"},
        {"peaks.host_copy_gbps", "threads", "1e999", "host_copy_gbps.threads is inf"},
        {"device", "seconds", "1e999", "\"seconds\" is inf"},
        {"info", "compute_units", "1e999", "\"compute_units\" is inf"},
    };
    alarm(60);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        char *text = report_with_number(cases[c].where, cases[c].key, cases[c].value);
        th_write_file(path, text, strlen(text));
        cJSON *root = (cJSON *)1;
        TH_ASSERT_STATUS(report_load(path, &root), TSR_ERR_CORRUPT);
        assert_null(root);
        TH_ASSERT_CONTAINS(tsr_last_error(), path);
        TH_ASSERT_CONTAINS(tsr_last_error(), cases[c].message);
        const char *paths[1] = {path};
        TH_ASSERT_STATUS(report_merge(paths, 1, &root), TSR_ERR_CORRUPT);
        TH_ASSERT_CONTAINS(tsr_last_error(), cases[c].message);
        TH_ASSERT_STATUS(report_parse(text, strlen(text), "rank 3", &root), TSR_ERR_CORRUPT);
        TH_ASSERT_CONTAINS(tsr_last_error(), "rank 3");
        TH_ASSERT_CONTAINS(tsr_last_error(), cases[c].message);
        free(text);
    }
    /* The same file with ordinary numbers loads (the cases above differ in one number each). */
    char *text = report_with_number("result", "gflops", "8000");
    th_write_file(path, text, strlen(text));
    free(text);
    cJSON *root = NULL;
    TH_ASSERT_OK(report_load(path, &root));
    cJSON_Delete(root);
    alarm(0);
    th_remove_tree(dir);
}

/* Lines of an SVG text, counted; no coordinate or label may be infinite or NaN. */
static size_t svg_lines(const char *svg) {
    size_t n = 0;
    for (const char *p = svg; (p = strstr(p, "<line")) != NULL; ++p) ++n;
    const char *bad = strstr(svg, "inf");
    if (!bad) bad = strstr(svg, "nan");
    if (bad) fail_msg("a non-finite number in the chart: ...%.120s...", bad > svg + 60 ? bad - 60 : svg);
    return n;
}

/* The charts on their own (trees that never went through report_load, as report_run's do):
 * infinite, NaN, zero, negative and extreme numbers give a bounded chart with finite
 * coordinates. Bounded by alarm(): the grid loops used to never end. */
static void charts_survive_any_numbers(void **state) {
    (void)state;
    static const double odd[] = {INFINITY, -INFINITY, NAN, 0, -1, 1e-300, 1e300, 5e-324, 1.7e308};
    alarm(60);
    for (size_t field = 0; field < 5; ++field) {
        for (size_t v = 0; v < sizeof odd / sizeof odd[0]; ++v) {
            cJSON *d = fake_device("Card Z", "host1", "2026-01-01T00:00:00Z", 500, 10000, 8000);
            cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "results"), 0);
            cJSON *peaks = cJSON_GetObjectItem(d, "peaks");
            static const char *const keys[] = {"gflops", "flops", "bytes", "bandwidth_gbps", "compute_gflops"};
            cJSON_ReplaceItemInObject(field < 3 ? row : peaks, keys[field], cJSON_CreateNumber(odd[v]));
            /* a second row at the extreme the other way */
            cJSON *other = cJSON_Duplicate(row, true);
            cJSON_ReplaceItemInObject(other, keys[field < 3 ? field : 0], cJSON_CreateNumber(1.0 / odd[v]));
            cJSON_AddItemToArray(cJSON_GetObjectItem(d, "results"), other);
            char *svg = chart_roofline_svg(d);
            assert_non_null(svg);
            assert_true(strlen(svg) < 100000);
            assert_true(svg_lines(svg) <= 100);
            free(svg);
            cJSON *root = cJSON_CreateObject();
            cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "devices"), d);
            cJSON_AddItemToArray(cJSON_GetObjectItem(root, "devices"),
                                 fake_device("Card Y", "host2", "2026-01-01T00:00:00Z", 500, 10000, 8000));
            svg = chart_bars_svg(root);
            assert_non_null(svg);
            svg_lines(svg);
            free(svg);
            cJSON_Delete(root);
        }
    }
    alarm(0);
}

/* util_in_list (the benches' --layers): whole comma-separated items only. */
static void list_items_match_whole(void **state) {
    (void)state;
    assert_true(util_in_list(NULL, "l1.3x3"));
    assert_true(util_in_list("all", "l1.3x3"));
    assert_true(util_in_list("l1.3x3", "l1.3x3"));
    assert_true(util_in_list("l2.3x3s2,l1.3x3", "l1.3x3"));
    assert_true(util_in_list("l1.3x3,l2.3x3", "l2.3x3"));
    assert_false(util_in_list("l2.3x3s2", "l2.3x3"));   /* a prefix of an item */
    assert_false(util_in_list("xl2.3x3", "l2.3x3"));    /* a suffix of an item */
    assert_false(util_in_list("l2.3x3s2,l1", "l2.3x3"));
    assert_false(util_in_list("", "l1.3x3"));
    assert_false(util_in_list("l1.3x3", ""));
    assert_false(util_in_list("a,,b", ""));
}

int main(void) {
    if (two_platforms()) {
        const struct CMUnitTest only[] = {cmocka_unit_test(failing_device)};
        return TH_RUN(only);
    }
    const char *mode = getenv("TSR_TEST_MODE");
    if (mode && strcmp(mode, "rusticl") == 0) {
        const struct CMUnitTest only[] = {cmocka_unit_test(pocl_and_rusticl_side_by_side)};
        return TH_RUN(only);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(peaks_small),
        cmocka_unit_test(peaks_default_buffer),
        cmocka_unit_test(report_files_and_round_trip),
        cmocka_unit_test(damaged_reports),
        cmocka_unit_test(merge_reports),
        cmocka_unit_test(merged_side_by_side),
        cmocka_unit_test(processors_told_apart),
        cmocka_unit_test(mpi_ranks_on_one_host_name),
        cmocka_unit_test(merge_in_memory),
        cmocka_unit_test(skipped_device_and_side_by_side),
        cmocka_unit_test(hostile_report_is_inert),
        cmocka_unit_test(report_md_is_written_atomically),
        cmocka_unit_test(failed_png_conversion_is_reported),
        cmocka_unit_test(merge_many_devices),
        cmocka_unit_test(merge_keeps_failed_devices),
        cmocka_unit_test(report_many_rows),
        cmocka_unit_test(foreign_numbers_are_refused),
        cmocka_unit_test(charts_survive_any_numbers),
        cmocka_unit_test(list_items_match_whole),
    };
    return TH_RUN(tests);
}
