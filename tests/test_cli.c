/* The tessera command line, run as a user would: exit codes, tables, JSON. */
#define _GNU_SOURCE
#include "harness.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run the CLI with arguments (shell-quoted by the caller); capture stdout+stderr. */
static int run_cli(const char *env, const char *args, char *out, size_t size) {
    const char *cli = getenv("TSR_CLI");
    assert_non_null(cli);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s %s 2>&1", env ? env : "", cli, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, size - 1, p);
    out[got] = '\0';
    int ws = pclose(p);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

static char out[1 << 16];

static void devices_json_lists_pocl(void **state) {
    (void)state;
    assert_int_equal(run_cli(NULL, "devices --json", out, sizeof out), 0);
    cJSON *arr = cJSON_Parse(out);
    assert_non_null(arr);
    int pocl_cpu = 0;
    cJSON *d;
    cJSON_ArrayForEach(d, arr) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(d, "type"));
        const char *platform = cJSON_GetStringValue(cJSON_GetObjectItem(d, "platform_name"));
        if (type && platform && strcmp(type, "CPU") == 0 && strstr(platform, "Portable Computing Language")) ++pocl_cpu;
    }
    assert_int_equal(pocl_cpu, 1);
    cJSON_Delete(arr);
}

static void devices_json_lists_oclgrind_when_registered(void **state) {
    (void)state;
    const char *two = getenv("TSR_TEST_ICD_TWO");
    assert_non_null(two);
    char env[1024];
    snprintf(env, sizeof env, "OCL_ICD_VENDORS=%s", two);
    assert_int_equal(run_cli(env, "devices --json", out, sizeof out), 0);
    cJSON *arr = cJSON_Parse(out);
    assert_non_null(arr);
    int grind = 0, pocl = 0;
    cJSON *d;
    cJSON_ArrayForEach(d, arr) {
        const char *platform = cJSON_GetStringValue(cJSON_GetObjectItem(d, "platform_name"));
        grind += platform && strstr(platform, "Oclgrind") != NULL;
        pocl += platform && strstr(platform, "Portable") != NULL;
    }
    assert_int_equal(grind, 1);
    assert_int_equal(pocl, 1);
    cJSON_Delete(arr);
}

static void devices_table_is_readable(void **state) {
    (void)state;
    assert_int_equal(run_cli(NULL, "devices", out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "SEL");
    TH_ASSERT_CONTAINS(out, "0:0");
    TH_ASSERT_CONTAINS(out, "CPU");
    TH_ASSERT_CONTAINS(out, "online compiler");
    TH_ASSERT_CONTAINS(out, "vector widths");
}

static void failures_have_clear_messages(void **state) {
    (void)state;
    assert_int_equal(run_cli(NULL, "frobnicate", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "unknown command");
    assert_int_equal(run_cli(NULL, "devices --bogus", out, sizeof out), 2);
    assert_int_equal(run_cli(NULL, "demo --device no-such-device-xyz", out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "TSR_ERR_NO_DEVICE");
    TH_ASSERT_CONTAINS(out, "available devices");
    assert_int_equal(run_cli(NULL, "build-binaries --device cpu", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "--out");
    assert_int_equal(run_cli(NULL, "build-binaries --device cpu --out /nonexistent-dir --dtypes f16,f8", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "--dtypes");
    assert_int_equal(run_cli(NULL, "bench gelu --dtype f8", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "--dtype");
    assert_int_equal(run_cli(NULL, "bench gelu --dtype f16/", out, sizeof out), 2);
    const char *empty = getenv("TSR_TEST_ICD_EMPTY");
    char env[1024];
    snprintf(env, sizeof env, "OCL_ICD_VENDORS=%s", empty);
    assert_int_equal(run_cli(env, "devices", out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "TSR_ERR_NO_PLATFORM");
    assert_int_equal(run_cli("TSR_DEVICE=gpu", "demo", out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "no gpu device");
}

static void demo_and_build_binaries(void **state) {
    (void)state;
    assert_int_equal(run_cli(NULL, "demo --device cpu", out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "gemm");
    TH_ASSERT_CONTAINS(out, "ok");
    char dir[600], args[800], env[1000];
    th_tempdir(dir, sizeof dir);
    snprintf(args, sizeof args, "build-binaries --device cpu --out %s", dir);
    /* without meson's MALLOC_PERTURB_: the compiler in PoCL (clang, then a cache lookup, for each
     * of the 68 programs) spent more than half of this command filling freed and new blocks (26 s
     * against 10 s with an empty cache, on a loaded machine); demo and the offline demo keep it */
    assert_int_equal(run_cli("MALLOC_PERTURB_=0", args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "wrote");
    /* The written binaries serve a device forced offline. */
    snprintf(env, sizeof env, "TSR_FORCE_OFFLINE=1 TSR_CACHE_DIR=off TSR_BINARY_DIR=%s", dir);
    assert_int_equal(run_cli(env, "demo --device cpu", out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "relative error");
    assert_int_equal(run_cli("TSR_FORCE_OFFLINE=1 TSR_CACHE_DIR=off", "demo", out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "TSR_ERR_NO_BINARY");
    th_remove_tree(dir);
}

/* The JSON a `bench`/`peak ... --json path` run wrote, parsed (the caller deletes it). */
static cJSON *read_rows(const char *path) {
    char *text = NULL;
    size_t size = 0;
    TH_ASSERT_OK(tsr_read_file(path, &text, &size));
    cJSON *rows = cJSON_Parse(text);
    free(text);
    assert_non_null(rows);
    return rows;
}

static void bench_rows(void **state) {
    (void)state;
    char dir[600], args[900], path[700];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/rows.json", dir);
    snprintf(args, sizeof args, "bench gemm --sizes 33x17x65,2@16x8x4 --budget 0.05 --json %s", path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "33x17x65");
    cJSON *rows = read_rows(path);
    int tessera_rows = 0;
    cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        static const char *const fields[] = {"op", "shape", "impl", "device", "time_ms", "gflops", "rel_err"};
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; ++f)
            if (!cJSON_GetObjectItem(r, fields[f])) fail_msg("bench row lacks '%s'", fields[f]);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(r, "op")), "gemm");
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "time_ms")) > 0);
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "rel_err")) <= 1e-5);
        tessera_rows += strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(r, "impl")), "tessera") == 0;
    }
    assert_int_equal(tessera_rows, 2);
    cJSON_Delete(rows);
    th_remove_tree(dir);
    assert_int_equal(run_cli(NULL, "bench gemm --sizes 12xfoo", out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "--sizes");
    assert_int_equal(run_cli(NULL, "bench gemm --budget -1", out, sizeof out), 2);
    assert_int_equal(run_cli(NULL, "bench nosuchop", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "no benchmark");
}

/* The GELU and attention benchmarks: rows in the common format, each checked result within
 * its tolerance, and bad options refused. */
static void bench_gelu_and_attention(void **state) {
    (void)state;
    char dir[600], args[900], path[700];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/gelu.json", dir);
    snprintf(args, sizeof args, "bench gelu --sizes 1000,4099 --part elementwise --budget 0.02 --json %s", path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "unfused-erf");
    TH_ASSERT_CONTAINS(out, "timed in alternation");
    cJSON *rows = read_rows(path);
    /* 2 sizes x (2 copies + 2 forms x fused/unfused + copy and each fused form timed in alternation) */
    assert_int_equal(cJSON_GetArraySize(rows), 20);
    cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(r, "op")), "gelu");
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "gbps")) > 0);
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "rel_err")) <= 1e-6);
    }
    cJSON_Delete(rows);
    /* --dtype f16/bf16: per form, 16-bit fused against fp32 fused and against the 16-bit copy, in
     * alternation; the 16-bit rows carry their dtype and their bytes, within the output's rounding. */
    snprintf(path, sizeof path, "%s/gelu16.json", dir);
    snprintf(args, sizeof args, "bench gelu --sizes 1001 --dtype f16/bf16 --budget 0.02 --part elementwise --json %s",
             path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "x the elements/s of fp32");
    TH_ASSERT_CONTAINS(out, "x the f16/bf16 copy-kernel");
    rows = read_rows(path);
    assert_int_equal(cJSON_GetArraySize(rows), 8); /* 2 forms x 2 pairs x 2 rows */
    int typed = 0;
    cJSON_ArrayForEach(r, rows) {
        const char *dtype = cJSON_GetStringValue(cJSON_GetObjectItem(r, "dtype"));
        typed += dtype && strcmp(dtype, "f16/bf16") == 0;
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "rel_err")) <= (dtype ? 4e-3 : 1e-6));
    }
    assert_int_equal(typed, 6);
    cJSON_Delete(rows);
    /* --dtype bf16 adds tsr_convert from fp32 and its copy kernel in alternation with f16's, all exact. */
    snprintf(path, sizeof path, "%s/gelubf16.json", dir);
    snprintf(args, sizeof args, "bench gelu --sizes 1001 --dtype bf16 --budget 0.02 --part elementwise --json %s", path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "bf16 copy-kernel = ");
    rows = read_rows(path);
    /* 2 forms x 2 pairs x 2 rows, then tsr_convert from fp32 against the fp32 copy (calls back to
     * back, then one call and its wait), the copies' pair */
    assert_int_equal(cJSON_GetArraySize(rows), 14);
    int copies = 0, back_to_back = 0;
    cJSON_ArrayForEach(r, rows) {
        const char *impl = cJSON_GetStringValue(cJSON_GetObjectItem(r, "impl"));
        if (strcmp(impl, "copy-kernel-vs-f16") != 0 && strcmp(impl, "convert-paired") != 0 &&
            strcmp(impl, "convert-paired-sync") != 0)
            continue;
        ++copies;
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "rel_err")) == 0);
        /* timed in alternation: the median of the pairs' own rate ratios, written with the row */
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "paired_rate_ratio")) > 0);
        /* 1001 elements: 64 calls a sample, said in the row */
        const char *variant = cJSON_GetStringValue(cJSON_GetObjectItem(r, "variant"));
        if (strcmp(impl, "convert-paired") == 0)
            back_to_back += variant && strcmp(variant, "64 calls back to back, one clFinish") == 0;
        else
            assert_null(variant);
    }
    assert_int_equal(copies, 6);
    assert_int_equal(back_to_back, 2);
    TH_ASSERT_CONTAINS(out, "tsr_convert f32 to bf16 = ");
    cJSON_Delete(rows);
    snprintf(path, sizeof path, "%s/attention.json", dir);
    snprintf(args, sizeof args, "bench attention --sizes 48 --budget 0.02 --no-peers --json %s", path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    rows = read_rows(path);
    int unfused = 0, causal = 0;
    cJSON_ArrayForEach(r, rows) {
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "device_mib")) > 0);
        /* every row: its mask, what ran, and its own error against the double reference */
        const char *mask = cJSON_GetStringValue(cJSON_GetObjectItem(r, "mask"));
        assert_non_null(mask);
        causal += strcmp(mask, "causal") == 0;
        assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(r, "variant")));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(r, "rel_err")));
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "rel_err")) <= 1e-5);
        unfused += strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(r, "impl")), "tessera-unfused") == 0;
    }
    assert_int_equal(unfused, 2); /* full and causal */
    assert_int_equal(causal, 2);  /* blocked and unfused */
    cJSON_Delete(rows);
    th_remove_tree(dir);
    assert_int_equal(run_cli(NULL, "bench gelu --part nope", out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "elementwise");
    assert_int_equal(run_cli(NULL, "bench attention --sizes 0", out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "--sizes");
    assert_int_equal(run_cli(NULL, "bench attention --max-unfused x", out, sizeof out), 2);
}

/* The LayerNorm benchmark: fused, unfused and copy rows per shape, the checked ones within
 * LayerNorm's tolerance (a 16-bit output's rounding with --dtype), and malformed shapes refused. */
static void bench_layernorm_rows(void **state) {
    (void)state;
    char dir[600], args[900], path[700];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/layernorm.json", dir);
    snprintf(args, sizeof args, "bench layernorm --sizes 9x768,5x33 --dtype f16/bf16 --budget 0.02 --json %s", path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "x unfused");
    TH_ASSERT_CONTAINS(out, "timed in alternation");
    TH_ASSERT_CONTAINS(out, "x the rows/s of fp32");
    cJSON *rows = read_rows(path);
    /* 2 shapes x (16-bit fused, fused, unfused, copy, then 16-bit and fp32 fused in alternation) */
    assert_int_equal(cJSON_GetArraySize(rows), 12);
    int typed = 0, paired = 0;
    cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(r, "op")), "layernorm");
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "gbps")) > 0);
        const char *dtype = cJSON_GetStringValue(cJSON_GetObjectItem(r, "dtype"));
        typed += dtype != NULL;
        paired += strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(r, "impl")), "fused-paired") == 0;
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(r, "impl")), "copy-kernel") != 0)
            assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "rel_err")) <= (dtype ? 4e-3 : 1e-5));
    }
    assert_int_equal(typed, 4);
    assert_int_equal(paired, 4);
    cJSON_Delete(rows);
    th_remove_tree(dir);
    const char *const bad[] = {"bench layernorm --sizes 768", "bench layernorm --sizes 0x768",
                               "bench layernorm --sizes 4x-5", "bench layernorm --sizes 4x5,",
                               "bench layernorm --sizes 99999999999x99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        assert_int_equal(run_cli(NULL, bad[i], out, sizeof out), 1);
        TH_ASSERT_CONTAINS(out, "--sizes");
    }
}

/* The embedding gather's benchmark with --dtype: the fp32 row, then the 16-bit gather against the
 * fp32 one twice in alternation, with the caches emptied before each call ("gather-paired") and
 * plainly ("gather-paired-hot"), each pair a 16-bit and an fp32 row within its tolerance. */
static void bench_embedding_rows(void **state) {
    (void)state;
    char dir[600], args[900], path[700];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/embedding.json", dir);
    snprintf(args, sizeof args, "bench embedding --sizes 9x40 --dtype f16 --budget 0.02 --json %s", path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "caches emptied before each call");
    TH_ASSERT_CONTAINS(out, "each call after the other type's");
    cJSON *rows = read_rows(path);
    assert_int_equal(cJSON_GetArraySize(rows), 5);
    int cold = 0, hot = 0, typed = 0;
    cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(r, "op")), "embedding");
        const char *impl = cJSON_GetStringValue(cJSON_GetObjectItem(r, "impl"));
        const char *dtype = cJSON_GetStringValue(cJSON_GetObjectItem(r, "dtype"));
        cold += strcmp(impl, "gather-paired") == 0;
        hot += strcmp(impl, "gather-paired-hot") == 0;
        typed += dtype && strcmp(dtype, "f16") == 0;
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "time_ms")) > 0);
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "rel_err")) <= (dtype ? 1e-3 : 1e-6));
    }
    assert_int_equal(cold, 2);
    assert_int_equal(hot, 2);
    assert_int_equal(typed, 2);
    cJSON_Delete(rows);
    th_remove_tree(dir);
}

/* The pooling benchmark: a tessera row (checked against the reference) and a copy row per shape,
 * --dtype applied to shapes that name no storage, malformed shapes refused. */
static void bench_pool2d_rows(void **state) {
    (void)state;
    char dir[600], args[900], path[700];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/pool.json", dir);
    snprintf(args, sizeof args,
             "bench pool2d --sizes '2x3x9x9 max k3 s2 p1,1x5x7x7 avg k7 nhwc bf16/f32' --dtype f16 --budget 0.02 "
             "--json %s",
             path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "copy-kernel");
    cJSON *rows = read_rows(path);
    assert_int_equal(cJSON_GetArraySize(rows), 4); /* 2 shapes x (tessera, copy) */
    const char *const dtypes[2] = {"f16", "bf16/f32"};
    int k = 0;
    cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(r, "op")), "pool2d");
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "gbps")) > 0);
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(r, "impl")), "tessera") == 0) {
            assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(r, "dtype")), dtypes[k++]);
            assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "rel_err")) <= 4e-3);
        }
    }
    assert_int_equal(k, 2);
    cJSON_Delete(rows);
    th_remove_tree(dir);
    const char *const bad[] = {"bench pool2d --sizes '1x2x3 max k2'", "bench pool2d --sizes '1x2x3x4 max k2 p2'",
                               "bench pool2d --sizes '1x2x3x4 max k2,'", "bench pool2d --sizes '1x2x3x4 avg k2 d2'"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        assert_int_equal(run_cli(NULL, bad[i], out, sizeof out), 1);
        TH_ASSERT_CONTAINS(out, "--sizes");
    }
}

static void bench_conv2d_peak_report(void **state) {
    (void)state;
    char dir[600], args[1400], path[700];
    th_tempdir(dir, sizeof dir);
    /* one small ResNet-50 layer through every path (no peers: CLBlast's first call compiles for long) */
    snprintf(path, sizeof path, "%s/conv.json", dir);
    snprintf(args, sizeof args, "bench conv2d --layers l4.3x3 --sizes 1 --part layers --budget 0.02 --no-peers --json %s",
             path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    cJSON *rows = read_rows(path);
    assert_int_equal(cJSON_GetArraySize(rows), 4); /* tessera's choice, im2col, implicit, direct */
    cJSON *r;
    cJSON_ArrayForEach(r, rows) assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "rel_err")) <= 1e-5);
    cJSON_Delete(rows);
    /* --forms chosen: the call's own path only (one row, named by the path it took) */
    snprintf(args, sizeof args,
             "bench conv2d --layers l4.3x3 --sizes 1 --part layers --budget 0.02 --no-peers --forms chosen --json %s", path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    rows = read_rows(path);
    assert_int_equal(cJSON_GetArraySize(rows), 1);
    TH_ASSERT_CONTAINS(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "impl")), "tessera(");
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "rel_err")) <= 1e-5);
    cJSON_Delete(rows);
    assert_null(strstr(out, "naive direct"));
    assert_int_equal(run_cli(NULL, "bench conv2d --layers l9.9x9", out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "no ResNet-50 layer 'l9.9x9'");
    assert_int_equal(run_cli(NULL, "bench conv2d --part nope", out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "layers");
    /* peak on a small buffer, with its JSON */
    snprintf(path, sizeof path, "%s/peak.json", dir);
    snprintf(args, sizeof args, "peak --budget 0.01 --size 1 --json %s", path);
    /* its first compiles of the peak programs, without MALLOC_PERTURB_ as build-binaries above
     * (20-22 s against 7.5-10 s on a loaded machine, with an empty cache) */
    assert_int_equal(run_cli("MALLOC_PERTURB_=0", args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "global memory bandwidth");
    TH_ASSERT_CONTAINS(out, "fp32 multiply-add throughput");
    TH_ASSERT_CONTAINS(out, "kernel launch");
    cJSON *peak = read_rows(path);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(peak, "peaks"), "bandwidth_gbps")) > 0);
    cJSON_Delete(peak);
    assert_int_equal(run_cli(NULL, "peak --size 0", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "--size");
    assert_int_equal(run_cli(NULL, "peak --budget -1", out, sizeof out), 2);
    /* only some tests: the rest is neither printed nor claimed in the JSON */
    snprintf(args, sizeof args, "peak --budget 0.01 --size 1 --tests host,bandwidth --json %s", path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "global memory bandwidth");
    TH_ASSERT_CONTAINS(out, "the host itself");
    assert_null(strstr(out, "fp32 multiply-add throughput"));
    assert_null(strstr(out, "kernel launch"));
    cJSON *root = read_rows(path);
    peak = cJSON_GetObjectItem(root, "peaks");
    assert_non_null(peak);
    const cJSON *tests = cJSON_GetObjectItem(peak, "tests");
    assert_int_equal(cJSON_GetArraySize(tests), 2);
    assert_string_equal(cJSON_GetArrayItem(tests, 0)->valuestring, "bandwidth");
    assert_string_equal(cJSON_GetArrayItem(tests, 1)->valuestring, "host");
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(peak, "host_read_gbps"), "median")) > 0);
    cJSON_Delete(root);
    assert_int_equal(run_cli(NULL, "peak --tests bandwidth,nope", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "unknown test 'nope'");
    assert_int_equal(run_cli(NULL, "peak --tests compute,", out, sizeof out), 2);
    /* report: bad options, merging nothing or a damaged file */
    assert_int_equal(run_cli(NULL, "report --tune-budget x", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "--tune-budget");
    assert_int_equal(run_cli(NULL, "report --merge", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "report.json files");
    /* --cases: a case the suite lacks is refused with the suite's ids; an empty id; with --merge.
     * (The fleet tests run reports of two cases and check that each device has exactly those.) */
    assert_int_equal(run_cli(NULL, "report --cases gelu-16M,nope", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "'nope' is no case of the suite");
    TH_ASSERT_CONTAINS(out, "gemm-square");
    TH_ASSERT_CONTAINS(out, "layernorm-bert");
    assert_int_equal(run_cli(NULL, "report --cases gelu-16M,", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "an empty case id");
    assert_int_equal(run_cli(NULL, "report --cases ,", out, sizeof out), 2);
    assert_int_equal(run_cli(NULL, "report --merge a.json --cases gelu-16M", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "--cases does not apply");
    snprintf(path, sizeof path, "%s/bad.json", dir);
    th_write_file(path, "{\"format\": \"nope\"}", strlen("{\"format\": \"nope\"}"));
    snprintf(args, sizeof args, "report --merge %s --out %s/merged", path, dir);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "TSR_ERR_CORRUPT");
    TH_ASSERT_CONTAINS(out, "not a tessera report");
    th_remove_tree(dir);
}

static void tune_show_export_import(void **state) {
    (void)state;
    char dir[600], env[800], args[1600];
    th_tempdir(dir, sizeof dir);
    snprintf(env, sizeof env, "TSR_TUNING_DB=%s/db.json", dir);
    assert_int_equal(run_cli(env, "tune --show --op gemm", out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "large");
    TH_ASSERT_CONTAINS(out, "built-in");
    assert_int_equal(run_cli(env, "tune --op gemm --classes small --evals 2 --seed 5", out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "small");
    TH_ASSERT_CONTAINS(out, "saved to");
    assert_int_equal(run_cli(env, "tune --show --op gemm", out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "tuned on this device");
    snprintf(args, sizeof args, "tune --export %s/out.json", dir);
    assert_int_equal(run_cli(env, args, out, sizeof out), 0);
    snprintf(args, sizeof args, "tune --import %s/out.json --db %s/db2.json", dir, dir);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "merged 1 entries");
    snprintf(args, sizeof args, "tune --import %s/missing.json", dir);
    assert_int_equal(run_cli(env, args, out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "missing.json");
    assert_int_equal(run_cli(env, "tune --strategy sideways", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "unknown strategy");
    assert_int_equal(run_cli(env, "tune --op nosuchop", out, sizeof out), 2);
    assert_int_equal(run_cli(env, "tune --budget 0", out, sizeof out), 2);
    assert_int_equal(run_cli(env, "tune --op gemm --classes bogus", out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "bogus");
    th_remove_tree(dir);
}

/* `tessera tune` compiles ahead in child processes (`tessera tune-worker`): with one forced worker
 * the log says so and the children compiled what was used; a worker executable that cannot serve
 * leaves the tune whole (the tuner compiles every candidate itself); the hidden command refuses a
 * hand-typed call. */
static void tune_workers_are_processes(void **state) {
    (void)state;
    char dir[600], env[1400], args[1600], log[700];
    th_tempdir(dir, sizeof dir);
    snprintf(log, sizeof log, "%s/log.jsonl", dir);
    /* pass 2: stdin and stderr closed, so the log takes descriptor 0 and the worker's socket pair 2
     * and 3: the child's end is descriptor 3 itself (under the older POSIX rule a dup2 onto itself keeps
     * close-on-exec and the child could never answer; glibc 2.36 clears it, so here this pass shows the
     * moved descriptor works, and elsewhere that the move is needed) */
    for (int pass = 0; pass < 3; ++pass) {
        const bool broken = pass == 1;
        snprintf(env, sizeof env, "TSR_TUNING_DB=%s/db.json TSR_TUNE_AHEAD=1%s", dir,
                 broken ? " TSR_TUNE_WORKER=/bin/true" : "");
        unlink(log);
        snprintf(args, sizeof args, "tune --op gelu --classes small --evals 5 --strategy random --seed 3 --dry-run --log %s",
                 log);
        if (pass == 2) {
            char cmd[3200];
            snprintf(cmd, sizeof cmd, "%s %s %s 0<&- 2>&-", env, getenv("TSR_CLI"), args);
            FILE *p = popen(cmd, "r");
            assert_non_null(p);
            size_t got = fread(out, 1, sizeof out - 1, p);
            out[got] = '\0';
            if (pclose(p) != 0) fail_msg("with stderr closed: %s", out);
        } else if (run_cli(env, args, out, sizeof out) != 0) {
            fail_msg("%s", out);
        }
        TH_ASSERT_CONTAINS(out, "gelu      small");
        const th_ahead_counts ahead = th_read_ahead_line(log);
        const int workers = ahead.workers, submitted = ahead.submitted, compiled = ahead.compiled,
                  failed = ahead.failed, used = ahead.used;
        assert_int_equal(workers, 1);
        assert_string_equal(ahead.in, "processes");
        assert_true(submitted >= 2); /* random search's next draws, exactly */
        if (broken) {
            assert_int_equal(compiled, 0); /* /bin/true never says ready: its jobs fail at once */
            assert_int_equal(failed, submitted);
        } else {
            assert_int_equal(failed, 0);
            assert_true(compiled >= 2);
            assert_true(used >= 2);
        }
        /* five evaluations either way, every one measured */
        char *text = NULL;
        size_t size = 0;
        TH_ASSERT_OK(tsr_read_file(log, &text, &size));
        int evaluated = 0;
        for (const char *p = text; (p = strstr(p, "\"first_run_s\"")) != NULL; ++p) ++evaluated;
        assert_int_equal(evaluated, 5);
        free(text);
    }
    assert_int_equal(run_cli(NULL, "tune-worker", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "started by `tessera tune` only");
    assert_int_equal(run_cli(NULL, "tune-worker --device 0:0 --fd 1", out, sizeof out), 2);
    th_remove_tree(dir);
}

/* ---- hardening of bench, peak and report options (numbers, parts, outputs) ---- */

/* One strict parser for every number: no sign, no wrap, no inf/nan, within its range; sizes that
 * overflow or exceed the device or the host are refused before anything is allocated (each of
 * these used to crash, wrap to a huge value, be accepted, or allocate tens of GiB). */
static void bench_numbers_are_strict(void **state) {
    (void)state;
    static const struct {
        const char *args;
        int rc;
        const char *message;
    } cases[] = {
        {"bench gemm --sizes 4611686018427387904x4x1", 1, "--sizes"}, /* used to overflow a heap buffer */
        {"bench gemm --sizes 2147483647@2147483647x2147483647x2", 1, "overflow"},
        {"bench gemm --sizes 65536", 1, "65536x65536x65536"}, /* 3 x 16 GiB: refused, not allocated */
        {"bench gemm --sizes -5", 1, "--sizes"},
        {"bench gemm --sizes +5", 1, "--sizes"},
        {"bench gemm --sizes 8,", 1, "--sizes"},
        {"bench gemm --sizes 0x4x4", 1, "--sizes"},
        {"bench gemm --sizes 8x8", 1, "--sizes"},
        {"bench gelu --sizes -1", 1, "--sizes"},
        {"bench gelu --sizes 18446744073709551617", 1, "too large"},
        {"bench gelu --sizes 17179869184M", 1, "too large"}, /* the suffix used to wrap */
        {"bench attention --sizes -5", 1, "--sizes"},
        {"bench attention --sizes 16777216", 1, "MiB"},
        {"bench conv2d --sizes -1", 1, "--sizes"},
        {"bench conv2d --sizes 4096 --layers conv1", 1, "MiB"},
        {"bench attention --max-unfused -5", 2, "--max-unfused"},
        {"bench attention --max-unfused 0", 2, "--max-unfused"},
        {"bench gemm --part bogus", 1, "gemm has no parts"},
        {"bench attention --part bogus", 1, "attention has no parts"},
        {"bench gemm --layers conv1", 1, "--layers"},
        {"bench gemm --weights per-call", 1, "--weights"},
        {"bench conv2d --weights sometimes", 2, "--weights"},
        {"bench gemm --forms chosen", 1, "--forms"},
        {"bench conv2d --forms some", 2, "--forms"},
        {"bench gemm --budget inf", 2, "--budget"},
        {"bench gemm --budget nan", 2, "--budget"},
        {"bench gemm --budget 1e400", 2, "--budget"},
        {"bench gemm --budget 0x10", 2, "--budget"},
        {"bench gemm --budget ' 1'", 2, "--budget"},
        {"peak --budget inf", 2, "--budget"},
        {"peak --size -1", 2, "--size"},
        {"peak --size 1048576", 1, "MiB"}, /* a size asked for is refused, not quietly shrunk */
        {"report --budget inf", 2, "--budget"},
        {"report --peak-budget -1", 2, "--peak-budget"},
        {"report --tune-budget nan", 2, "--tune-budget"},
        {"report --device-budget -1", 2, "--device-budget"},
        {"report --device-budget 1e400", 2, "--device-budget"},
        {"report --device-budget 'x<b>'", 2, "--device-budget"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        int rc = run_cli(NULL, cases[i].args, out, sizeof out);
        if (rc != cases[i].rc || !strstr(out, cases[i].message))
            fail_msg("'%s': exit %d (expected %d), output: %s", cases[i].args, rc, cases[i].rc, out);
        assert_null(strstr(out, "GFLOP/s")); /* refused before any benchmark ran */
    }
    /* a budget of 0.5 and an exponent are fine */
    assert_int_equal(run_cli(NULL, "bench gemm --sizes 8 --budget 5e-3 --no-peers", out, sizeof out), 0);
}

/* --json (bench, peak) and report's --out are checked before anything runs. */
static void outputs_checked_before_running(void **state) {
    (void)state;
    char dir[600], args[2400], path[800];
    th_tempdir(dir, sizeof dir);
    snprintf(args, sizeof args, "bench gemm --sizes 8 --budget 0.01 --no-peers --json %s/missing/rows.json", dir);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "rows.json");
    assert_null(strstr(out, "8x8x8")); /* the benchmark never ran */
    snprintf(args, sizeof args, "bench gemm --sizes 8 --budget 0.01 --no-peers --json %s", dir);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "is a directory");
    assert_null(strstr(out, "8x8x8"));
    snprintf(args, sizeof args, "peak --budget 0.01 --size 1 --json %s/missing/peak.json", dir);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 1);
    assert_null(strstr(out, "global memory bandwidth"));
    /* report --out under a regular file: refused before any device is measured */
    snprintf(path, sizeof path, "%s/file", dir);
    th_write_file(path, "x", 1);
    snprintf(args, sizeof args, "report --budget 0.01 --out %s/sub", path);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 1);
    assert_null(strstr(out, "report: "));
    /* report.md that cannot be written (a directory in its place): exit 1, no partial file */
    snprintf(path, sizeof path, "%s/a.json", dir);
    const char *report = "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [{\"fingerprint\": \"f\", "
                         "\"host\": \"h\", \"status\": \"ok\", \"results\": []}]}";
    th_write_file(path, report, strlen(report));
    char md[900];
    snprintf(md, sizeof md, "%s/out/report.md", dir);
    TH_ASSERT_OK(tsr_make_dirs(md));
    snprintf(args, sizeof args, "report --merge %s --out %s/out", path, dir);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "report.md");
    snprintf(args, sizeof args, "ls %s/out | grep -q tmp", dir);
    assert_int_not_equal(system(args), 0); /* grep found no temporary file */
    th_remove_tree(dir);
}

/* report --pytorch: the peer script's JSON becomes report.md's PyTorch section; a file that is not
 * the script's, or whose rows are malformed (a control character, a negative time, Infinity,
 * a ratio of the wrong type), is refused before anything runs, naming the row and field. */
static void report_pytorch_peer_file(void **state) {
    (void)state;
    char dir[600], path[700], peer[700], args[2400];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.json", dir);
    const char *report = "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [{\"fingerprint\": \"f\", "
                         "\"host\": \"h\", \"status\": \"ok\", \"results\": []}]}";
    th_write_file(path, report, strlen(report));
    snprintf(peer, sizeof peer, "%s/peer.json", dir);
    const char *good =
        "{\"tool\": \"bench/pytorch_peer.py\", \"torch\": \"2.9.0\", \"threads\": 2, \"rounds\": 3, \"extra\": [1], "
        "\"rows\": [{\"op\": \"gemm\", \"shape\": \"256x256x256\", \"impl\": \"tessera\", \"time_ms\": 0.5, "
        "\"gflops\": 67.1, \"rel_err\": 2.9e-7, \"vs_pytorch\": {\"peer\": \"pytorch\", \"ratio\": 1.25, \"min\": 1.1, "
        "\"max\": 1.4}}, {\"op\": \"gemm\", \"shape\": \"256x256x256\", \"impl\": \"pytorch\", \"time_ms\": 0.625, "
        "\"gflops\": 53.7, \"rel_err\": null, \"unknown\": {\"x\": 1}}]}";
    th_write_file(peer, good, strlen(good));
    snprintf(args, sizeof args, "report --merge %s --pytorch %s --out %s/out", path, peer, dir);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    char md[800], *text = NULL;
    size_t size = 0;
    snprintf(md, sizeof md, "%s/out/report.md", dir);
    TH_ASSERT_OK(tsr_read_file(md, &text, &size));
    TH_ASSERT_CONTAINS(text, "## Against PyTorch");
    TH_ASSERT_CONTAINS(text, "| gemm | 256x256x256 | tessera | 67.1 | 53.7 | GFLOP/s | 1.25 (1.10–1.40) | 2.9e-07 | - |");
    free(text);
    snprintf(md, sizeof md, "%s/out/report.json", dir);
    TH_ASSERT_OK(tsr_read_file(md, &text, &size));
    assert_null(strstr(text, "unknown")); /* only checked fields are copied */
    assert_null(strstr(text, "extra"));
    free(text);
    /* a --paired --passes 2 file: each row's bounds and its passes' range reach report.md */
    const char *paired =
        "{\"tool\": \"bench/pytorch_peer.py\", \"method\": \"paired\", \"passes\": 2, \"torch\": \"2.15.0\", "
        "\"threads\": 2, \"rounds\": 1, \"rows\": [{\"op\": \"conv2d\", \"shape\": \"1x3x224x224 k64 7x7/2 p3\", "
        "\"impl\": \"tessera\", \"time_ms\": 2.1, \"gflops\": 110.4, \"vs_pytorch\": {\"peer\": \"pytorch\", "
        "\"ratio\": 0.77, \"bounds\": [0.74, 0.82], \"min\": 0.56, \"max\": 1.34, \"pairs\": 56, "
        "\"pass_range\": [0.74, 0.81], \"pair_ratios\": [0.66, 0.7]}}, {\"op\": \"conv2d\", "
        "\"shape\": \"1x3x224x224 k64 7x7/2 p3\", \"impl\": \"pytorch\", \"time_ms\": 1.6, \"gflops\": 143.1}, "
        /* too few pairs for bounds: the script writes [null, null] */
        "{\"op\": \"gemm\", \"shape\": \"64\", \"impl\": \"tessera\", \"time_ms\": 0.1, \"gflops\": 5.2, "
        "\"vs_pytorch\": {\"peer\": \"pytorch\", \"ratio\": 1.1, \"bounds\": [null, null], \"min\": 1.0, \"max\": 1.2, "
        "\"pairs\": 3}}, {\"op\": \"gemm\", \"shape\": \"64\", \"impl\": \"pytorch\", \"time_ms\": 0.11, \"gflops\": 4.7}]}";
    th_write_file(peer, paired, strlen(paired));
    snprintf(args, sizeof args, "report --merge %s --pytorch %s --out %s/out3", path, peer, dir);
    assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
    snprintf(md, sizeof md, "%s/out3/report.md", dir);
    TH_ASSERT_OK(tsr_read_file(md, &text, &size));
    TH_ASSERT_CONTAINS(text, "in paired blocks");
    TH_ASSERT_CONTAINS(text, "2 passes over the rows");
    TH_ASSERT_CONTAINS(text, "| conv2d | 1x3x224x224 k64 7x7/2 p3 | tessera | 110.4 | 143.1 | GFLOP/s | 0.77 [0.74, 0.82] "
                             "(0.56–1.34, passes 0.74–0.81) | - | - |");
    TH_ASSERT_CONTAINS(text, "| gemm | 64 | tessera | 5.2 | 4.7 | GFLOP/s | 1.10 (1.00–1.20) | - | - |");
    free(text);
    snprintf(md, sizeof md, "%s/out3/report.json", dir);
    TH_ASSERT_OK(tsr_read_file(md, &text, &size));
    assert_null(strstr(text, "pair_ratios")); /* only checked fields */
    TH_ASSERT_CONTAINS(text, "\"pass_range\"");
    free(text);
    static const struct {
        const char *json, *message;
    } bad[] = {
        {"{\"tool\": \"other\", \"rows\": []}", "not the output of bench/pytorch_peer.py"},
        {"{\"tool\": \"bench/pytorch_peer.py\", \"torch\": \"t\", \"threads\": 2, \"rounds\": 1, \"rows\": []}",
         "\"rows\" is not an array"},
        {"{\"tool\": \"bench/pytorch_peer.py\", \"torch\": \"t\", \"threads\": 2, \"rounds\": 1, \"rows\": "
         "[{\"op\": \"gemm\", \"shape\": \"1\\u001b[2J\", \"impl\": \"t\", \"time_ms\": 1}]}",
         "row 0: \"shape\" holds a control character"},
        {"{\"tool\": \"bench/pytorch_peer.py\", \"torch\": \"t\", \"threads\": 2, \"rounds\": 1, \"rows\": "
         "[{\"op\": \"gemm\", \"shape\": \"1\", \"impl\": \"t\", \"time_ms\": 1}, {\"op\": \"gemm\", \"shape\": \"1\", "
         "\"impl\": \"t\", \"time_ms\": -1}]}",
         "row 1: \"time_ms\" is not a number"},
        {"{\"tool\": \"bench/pytorch_peer.py\", \"torch\": \"t\", \"threads\": 2, \"rounds\": 1, \"rows\": "
         "[{\"op\": \"gemm\", \"shape\": \"1\", \"impl\": \"t\", \"time_ms\": Infinity}]}",
         "not valid JSON"},
        {"{\"tool\": \"bench/pytorch_peer.py\", \"torch\": \"t\", \"threads\": 2, \"rounds\": 1, \"rows\": "
         "[{\"op\": \"gemm\", \"shape\": \"1\", \"impl\": \"t\", \"time_ms\": 1, \"vs_pytorch\": {\"peer\": \"p\", "
         "\"ratio\": \"fast\", \"min\": 1, \"max\": 1}}]}",
         "row 0: \"ratio\" is not a number"},
        {"{\"tool\": \"bench/pytorch_peer.py\", \"torch\": \"t\", \"threads\": 0, \"rounds\": 1, \"rows\": "
         "[{\"op\": \"gemm\", \"shape\": \"1\", \"impl\": \"t\", \"time_ms\": 1}]}",
         "\"threads\" is not a number"},
        {"{\"tool\": \"bench/pytorch_peer.py\", \"torch\": \"t\", \"threads\": 2, \"rounds\": 1, \"rows\": "
         "[{\"op\": \"gemm\", \"shape\": \"1\", \"impl\": \"t\", \"time_ms\": 1, \"vs_pytorch\": {\"peer\": \"p\", "
         "\"ratio\": 1, \"min\": 1, \"max\": 1, \"bounds\": [1.2, 0.9]}}]}",
         "row 0: \"bounds\" is not a pair"},
        {"{\"tool\": \"bench/pytorch_peer.py\", \"torch\": \"t\", \"threads\": 2, \"rounds\": 1, \"rows\": "
         "[{\"op\": \"gemm\", \"shape\": \"1\", \"impl\": \"t\", \"time_ms\": 1, \"vs_pytorch\": {\"peer\": \"p\", "
         "\"ratio\": 1, \"min\": 1, \"max\": 1, \"pass_range\": [1, \"x\"]}}]}",
         "row 0: \"pass_range\" is not a pair"},
        {"{\"tool\": \"bench/pytorch_peer.py\", \"torch\": \"t\", \"threads\": 2, \"rounds\": 1, \"passes\": 0, "
         "\"rows\": [{\"op\": \"gemm\", \"shape\": \"1\", \"impl\": \"t\", \"time_ms\": 1}]}",
         "\"passes\" is not a number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        th_write_file(peer, bad[i].json, strlen(bad[i].json));
        snprintf(args, sizeof args, "report --merge %s --pytorch %s --out %s/out2", path, peer, dir);
        assert_int_equal(run_cli(NULL, args, out, sizeof out), 1);
        TH_ASSERT_CONTAINS(out, "TSR_ERR_CORRUPT");
        TH_ASSERT_CONTAINS(out, bad[i].message);
        assert_null(strstr(out, "\x1b"));
    }
    snprintf(md, sizeof md, "%s/out2/report.md", dir);
    assert_int_equal(access(md, F_OK), -1); /* refused before anything was written */
    th_remove_tree(dir);
}

/* report --merge of reports whose numbers are not finite (cJSON reads 1e999 as infinity, 1e-999
 * as 0): it used to loop forever on an infinite rate or intensity, and to print "inf ms",
 * "-inf GFLOP/s" and "-nan×" with exit 0. Each is refused naming the file and the field, before
 * anything is written; `timeout` bounds every run, so a regression fails instead of hanging. */
static void report_merge_refuses_non_finite_numbers(void **state) {
    (void)state;
    char dir[400], path[500], args[1200], md[600];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/foreign.json", dir);
    static const struct {
        const char *field, *value, *message;
    } cases[] = {
        {"gflops", "1e999", "\"gflops\" is inf"},     {"flops", "1e999", "\"flops\" is inf"},
        {"bytes", "1e-999", "\"bytes\" is 0"},        {"time_ms", "1e999", "\"time_ms\" is inf"},
        {"gflops", "-1e999", "\"gflops\" is -inf"},   {"time_ms", "1e-999", "\"time_ms\" is 0"},
        {"gbps", "1e999", "\"gbps\" is inf"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        char report[2048];
        /* two devices with one row each, the second device's row carrying the number */
        const char *row = "{\"case\": \"gemm-square\", \"op\": \"gemm\", \"shape\": \"64x64x64\", \"impl\": \"tessera\", "
                          "\"time_ms\": %s, \"flops\": %s, \"bytes\": %s, \"gflops\": %s, \"gbps\": %s}";
        char first[512], second[512];
        snprintf(first, sizeof first, row, "1", "524288", "49152", "0.5", "0.05");
        snprintf(second, sizeof second, row, strcmp(cases[c].field, "time_ms") == 0 ? cases[c].value : "2",
                 strcmp(cases[c].field, "flops") == 0 ? cases[c].value : "524288",
                 strcmp(cases[c].field, "bytes") == 0 ? cases[c].value : "49152",
                 strcmp(cases[c].field, "gflops") == 0 ? cases[c].value : "0.25",
                 strcmp(cases[c].field, "gbps") == 0 ? cases[c].value : "0.02");
        snprintf(report, sizeof report,
                 "{\"format\": \"tessera-report\", \"schema_version\": 1, \"devices\": [{\"fingerprint\": \"a\", "
                 "\"host\": \"h\", \"status\": \"ok\", \"info\": {\"name\": \"A\"}, \"peaks\": {\"bandwidth_gbps\": 10, "
                 "\"compute_gflops\": 100}, \"results\": [%s]}, {\"fingerprint\": \"b\", \"host\": \"h\", \"status\": "
                 "\"ok\", \"info\": {\"name\": \"B\"}, \"peaks\": {\"bandwidth_gbps\": 10, \"compute_gflops\": 100}, "
                 "\"results\": [%s]}]}",
                 first, second);
        th_write_file(path, report, strlen(report));
        snprintf(args, sizeof args, "report --merge %s --out %s/out", path, dir);
        int rc = run_cli("timeout 60", args, out, sizeof out);
        if (rc != 1) fail_msg("%s = %s: exit %d (124: it hung), output: %s", cases[c].field, cases[c].value, rc, out);
        TH_ASSERT_CONTAINS(out, "TSR_ERR_CORRUPT");
        TH_ASSERT_CONTAINS(out, path);
        TH_ASSERT_CONTAINS(out, "device 1, result 0");
        TH_ASSERT_CONTAINS(out, cases[c].message);
        snprintf(md, sizeof md, "%s/out/report.md", dir);
        assert_int_equal(access(md, F_OK), -1); /* refused before anything was written */
    }
    th_remove_tree(dir);
}

/* ---- tuning database and tune options (hardening) ---- */

static size_t count_of(const char *haystack, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle)) ++n;
    return n;
}

/* A device whose tuned entry went stale (its kernel source changed since) is flagged, not
 * silently run on the defaults: tune --show and demo say so, and a re-tune starts from it. */
static void stale_tuning_is_flagged(void **state) {
    (void)state;
    char dir[600], db[700], env[800], args[1600];
    th_tempdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/db.json", dir);
    snprintf(env, sizeof env, "TSR_BUILTIN_TUNING=off"); /* no shipped entry for this machine in the way */
    snprintf(args, sizeof args, "tune --op gemm --classes small --evals 1 --seed 5 --db %s", db);
    assert_int_equal(run_cli(env, args, out, sizeof out), 0);
    snprintf(args, sizeof args, "tune --show --op gemm --db %s", db);
    assert_int_equal(run_cli(env, args, out, sizeof out), 0);
    assert_int_equal(count_of(out, "UNTUNED"), 0);
    TH_ASSERT_CONTAINS(out, "0 of them untuned because their tuned entries are stale");
    /* The entry as an older kernel source left it (sealed again, as tessera writes every file). */
    char *text = NULL;
    size_t size = 0;
    TH_ASSERT_OK(tsr_read_file(db, &text, &size));
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    cJSON_DeleteItemFromObject(root, "checksum");
    cJSON *node = cJSON_GetObjectItem(root, "devices")->child;
    cJSON *entry = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(node, "ops"), "gemm"), "small");
    assert_non_null(entry);
    cJSON_ReplaceItemInObject(entry, "source_hash", cJSON_CreateString("0123456789abcdef"));
    TH_ASSERT_OK(tsr_db_seal(root));
    text = cJSON_Print(root);
    th_write_file(db, text, strlen(text));
    free(text);
    cJSON_Delete(root);

    snprintf(args, sizeof args, "tune --show --op gemm --db %s", db);
    assert_int_equal(run_cli(env, args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "UNTUNED: gemm/small on '");
    TH_ASSERT_CONTAINS(out, "runs the built-in default: its tuned entry is stale (kernel source changed since); "
                            "run tessera tune --op gemm");
    assert_int_equal(count_of(out, "UNTUNED: gemm/large "), 0); /* never tuned: no alarm */
    TH_ASSERT_CONTAINS(out, "0 of 21 op/classes tuned");
    assert_true(strstr(out, "of them untuned because their tuned entries are stale") &&
                !strstr(out, " 0 of them untuned because"));
    snprintf(args, sizeof args, "TSR_BUILTIN_TUNING=off TSR_TUNING_DB=%s", db);
    assert_int_equal(run_cli(args, "demo --device cpu", out, sizeof out), 0);
    assert_int_equal(count_of(out, "warning: runs untuned"), 1); /* one line for the op */
    TH_ASSERT_CONTAINS(out, "for classes small, ");
    TH_ASSERT_CONTAINS(out, "run tessera tune --op gemm");
    /* A re-tune starts from the stale entry. */
    snprintf(args, sizeof args, "tune --op gemm --classes small --evals 2 --seed 5 --dry-run --db %s", db);
    assert_int_equal(run_cli(env, args, out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "seeded from 1 stale entry");
    th_remove_tree(dir);
}

/* Every command passes library warnings on, each once: a damaged database is not only
 * reported by tune --show. */
static void cli_warns_once_about_a_damaged_db(void **state) {
    (void)state;
    char dir[600], env[800];
    th_tempdir(dir, sizeof dir);
    char path[700];
    snprintf(path, sizeof path, "%s/db.json", dir);
    static const char damaged[] = "{\"format\": \"tessera-tuning-db\", \"schema_version\": 1.5, \"devices\": {}}";
    th_write_file(path, damaged, strlen(damaged));
    snprintf(env, sizeof env, "TSR_TUNING_DB=%s", path);
    assert_int_equal(run_cli(env, "demo --device cpu", out, sizeof out), 0);
    TH_ASSERT_CONTAINS(out, "tessera: warning: tuning database");
    TH_ASSERT_CONTAINS(out, "schema version 1.5");
    assert_int_equal(count_of(out, "is unusable"), 1);
    assert_int_equal(run_cli(env, "bench gelu --sizes 1000 --part elementwise --budget 0.01", out, sizeof out), 0);
    assert_int_equal(count_of(out, "is unusable"), 1);
    th_remove_tree(dir);
}

/* No place to save: tune fails at once, before any candidate is measured. */
static void cli_tune_checks_destination_first(void **state) {
    (void)state;
    char dir[600], env[900], args[900], log[700];
    th_tempdir(dir, sizeof dir);
    snprintf(log, sizeof log, "%s/log.jsonl", dir);
    snprintf(args, sizeof args, "tune --op gemm --classes small --evals 2 --log %s", log);
    assert_int_equal(run_cli("env -u TSR_TUNING_DB XDG_DATA_HOME=/dev/null/x", args, out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "/dev/null is not a directory");
    assert_int_not_equal(access(log, F_OK), 0); /* nothing was measured */
    assert_int_equal(run_cli("env -u TSR_TUNING_DB -u XDG_DATA_HOME -u HOME", args, out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "no tuning database path");
    assert_int_not_equal(access(log, F_OK), 0);
    snprintf(env, sizeof env, "TSR_TUNING_DB=%s/log.jsonl/db.json", dir); /* parent is a file once the log exists */
    th_write_file(log, "", 0);
    assert_int_equal(run_cli(env, args, out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "is not a directory");
    th_remove_tree(dir);
}

/* Option values are taken whole and in range, or refused. */
static void cli_tune_refuses_bad_values(void **state) {
    (void)state;
    static const struct { const char *args, *message; } cases[] = {
        {"tune --db ''", "--db needs a file name"},
        {"tune --import a.json --export b.json", "separate commands"},
        {"tune --show --export b.json", "separate commands"},
        {"tune --export ''", "--export needs a file name"},
        {"tune --seed abc", "--seed"},
        {"tune --seed -1", "--seed"},
        {"tune --seed 99999999999999999999999", "--seed"},
        {"tune --budget inf", "--budget"},
        {"tune --budget nan", "--budget"},
        {"tune --budget 1e300", "--budget"},
        {"tune --budget ''", "--budget"},
        {"tune --evals 99999999999", "--evals"},
        {"tune --evals 0", "--evals"},
        {"tune --evals 3x", "--evals"},
        {"tune --classes ''", "--classes needs a value"},
        {"tune --space ''", "--space needs a value"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        int rc = run_cli("TSR_TUNING_DB=/nonexistent-dir-for-tessera-tests/db.json", cases[c].args, out, sizeof out);
        if (rc != 2 || !strstr(out, cases[c].message))
            fail_msg("'%s' gave %d: %s (expected 2 and '%s')", cases[c].args, rc, out, cases[c].message);
    }
    char longer[512] = "tune --op gemm --dry-run --evals 1 --classes "; /* + 360 */
    for (int i = 0; i < 60; ++i) strcat(longer, "small,");
    assert_int_equal(run_cli(NULL, longer, out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "longer than");
}

/* Exports carry the checksum; a hand-edited number makes the file damaged, not trusted. */
static void cli_export_is_sealed(void **state) {
    (void)state;
    char dir[600], env[800], args[1600], path[700];
    th_tempdir(dir, sizeof dir);
    snprintf(env, sizeof env, "TSR_TUNING_DB=%s/db.json", dir);
    assert_int_equal(run_cli(env, "tune --op gemm --classes small --evals 1 --seed 0x5", out, sizeof out), 0);
    snprintf(path, sizeof path, "%s/out.json", dir);
    snprintf(args, sizeof args, "tune --export %s", path);
    assert_int_equal(run_cli(env, args, out, sizeof out), 0);
    char *text = NULL;
    size_t size = 0;
    TH_ASSERT_OK(tsr_read_file(path, &text, &size));
    TH_ASSERT_CONTAINS(text, "\"checksum\"");
    char *g = strstr(text, "\"gflops\":\t");
    assert_non_null(g);
    g += strlen("\"gflops\":\t");
    *g = *g == '9' ? '1' : (char)(*g + 1); /* another first digit */
    th_write_file(path, text, size);
    free(text);
    snprintf(args, sizeof args, "tune --import %s", path);
    assert_int_equal(run_cli(env, args, out, sizeof out), 1);
    TH_ASSERT_CONTAINS(out, "checksum mismatch");
    th_remove_tree(dir);
}

/* ---- per-command help ---- */

/* Every command the usage lists answers --help, -h and `help COMMAND` with its own usage on
 * stdout and exit 0 (the list comes from the usage, so a new command is covered too). */
static void every_command_has_help(void **state) {
    (void)state;
    static char usage[1 << 16], own[1 << 16];
    assert_int_equal(run_cli(NULL, "help", usage, sizeof usage), 0);
    TH_ASSERT_CONTAINS(usage, "commands:");
    int checked = 0;
    for (const char *line = usage; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        /* "  NAME ..." starts a command's lines; continuation lines are indented further */
        if (strncmp(line, "  ", 2) != 0 || line[2] < 'a' || line[2] > 'z') continue;
        char name[32];
        size_t len = strspn(line + 2, "abcdefghijklmnopqrstuvwxyz-");
        assert_true(len > 0 && len < sizeof name);
        memcpy(name, line + 2, len);
        name[len] = '\0';
        if (strcmp(name, "help") == 0) continue;
        char args[96], first[64];
        snprintf(args, sizeof args, "%s --help", name);
        if (run_cli(NULL, args, own, sizeof own) != 0) fail_msg("'%s' exits non-zero: %s", args, own);
        snprintf(first, sizeof first, "usage:\n  %s", name);
        if (strncmp(own, first, strlen(first)) != 0) fail_msg("'%s' does not print its own usage: %s", args, own);
        assert_null(strstr(own, "commands:")); /* its own, not the whole list */
        static char again[1 << 16];
        snprintf(args, sizeof args, "%s -h", name);
        assert_int_equal(run_cli(NULL, args, again, sizeof again), 0);
        assert_string_equal(again, own);
        snprintf(args, sizeof args, "help %s", name);
        assert_int_equal(run_cli(NULL, args, again, sizeof again), 0);
        assert_string_equal(again, own);
        ++checked;
    }
    assert_true(checked >= 9); /* devices demo build-binaries cache bench tune peak report version */
    /* help's own help is the general usage; an unknown name is a usage error */
    const char *general[] = {"help --help", "help -h", "help help", "--help", "-h"};
    for (size_t i = 0; i < sizeof general / sizeof general[0]; ++i) {
        if (run_cli(NULL, general[i], own, sizeof own) != 0) fail_msg("'%s' exits non-zero: %s", general[i], own);
        assert_string_equal(own, usage);
    }
    assert_int_equal(run_cli(NULL, "help nosuch", own, sizeof own), 2);
    assert_int_equal(run_cli(NULL, "help frobnicate", out, sizeof out), 2);
    TH_ASSERT_CONTAINS(out, "unknown command 'frobnicate'");
    assert_int_equal(run_cli(NULL, "--help", out, sizeof out), 0);
    assert_string_equal(out, usage);
}

/* Every op of the runtime's table has a benchmark: `bench --help` describes it, `bench OP
 * --help` works, and the errors name the ops. */
static void bench_help_lists_every_op(void **state) {
    (void)state;
    static char help[1 << 16];
    assert_int_equal(run_cli(NULL, "bench --help", help, sizeof help), 0);
    TH_ASSERT_CONTAINS(help, "default sizes");
    for (const char *const *op = tsr_op_names(); *op; ++op) {
        char needle[64], args[96];
        snprintf(needle, sizeof needle, "%s sizes:", *op);
        if (!strstr(help, needle)) fail_msg("bench --help does not describe %s: %s", *op, help);
        snprintf(args, sizeof args, "bench %s --help", *op);
        assert_int_equal(run_cli(NULL, args, out, sizeof out), 0);
        assert_string_equal(out, help);
        assert_int_equal(run_cli(NULL, "bench", out, sizeof out), 2);
        TH_ASSERT_CONTAINS(out, *op);
        assert_int_equal(run_cli(NULL, "bench nosuchop", out, sizeof out), 2);
        TH_ASSERT_CONTAINS(out, *op);
        assert_int_equal(run_cli(NULL, "tune --op nosuchop", out, sizeof out), 2);
        TH_ASSERT_CONTAINS(out, *op);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(devices_json_lists_pocl),
        cmocka_unit_test(devices_json_lists_oclgrind_when_registered),
        cmocka_unit_test(devices_table_is_readable),
        cmocka_unit_test(failures_have_clear_messages),
        cmocka_unit_test(demo_and_build_binaries),
        cmocka_unit_test(bench_rows),
        cmocka_unit_test(bench_gelu_and_attention),
        cmocka_unit_test(bench_layernorm_rows),
        cmocka_unit_test(bench_embedding_rows),
        cmocka_unit_test(bench_pool2d_rows),
        cmocka_unit_test(bench_conv2d_peak_report),
        cmocka_unit_test(tune_show_export_import),
        cmocka_unit_test(tune_workers_are_processes),
        cmocka_unit_test(stale_tuning_is_flagged),
        /* bench, peak and report hardening */
        cmocka_unit_test(bench_numbers_are_strict),
        cmocka_unit_test(outputs_checked_before_running),
        cmocka_unit_test(cli_warns_once_about_a_damaged_db),
        cmocka_unit_test(cli_tune_checks_destination_first),
        cmocka_unit_test(cli_tune_refuses_bad_values),
        cmocka_unit_test(cli_export_is_sealed),
        /* per-command help */
        cmocka_unit_test(every_command_has_help),
        cmocka_unit_test(bench_help_lists_every_op),
        cmocka_unit_test(report_pytorch_peer_file),
        cmocka_unit_test(report_merge_refuses_non_finite_numbers),
    };
    return TH_RUN(tests);
}
