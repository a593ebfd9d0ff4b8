/* The program cache: memory and disk hits, damaged entries, unwritable and
 * disabled directories, concurrent writers, build errors, TSR_KERNEL_DIR and the
 * ahead-of-time binary path for devices without a compiler. */
#define _GNU_SOURCE
#include "harness.h"

#include <dirent.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char fill_source[] =
    "__kernel void fill(__global float *out, const float scale) {\n"
    "    const size_t i = get_global_id(0);\n"
    "    out[i] = scale * (float)i + SALT;\n"
    "}\n";

static char cache_dir[512];

static int setup(void **state) {
    (void)state;
    th_tempdir(cache_dir, sizeof cache_dir);
    setenv("TSR_CACHE_DIR", cache_dir, 1);
    unsetenv("TSR_FORCE_OFFLINE");
    unsetenv("TSR_BINARY_DIR");
    unsetenv("TSR_KERNEL_DIR");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    th_remove_tree(cache_dir);
    return 0;
}

/* A salt unique to this run, so no earlier cache entry can answer. */
static int fresh_salt(void) { return (int)(th_rand() % 1000000u); }

static void salt_options(int salt, char *out, size_t size) { snprintf(out, size, "-DSALT=%d.0f", salt); }

/* Build the fill kernel through the cache and check what it computes. */
static tsr_status build_and_run(tsr_device *dev, int salt) {
    char options[64];
    salt_options(salt, options, sizeof options);
    cl_program program = NULL;
    tsr_status st = tsr_program_from_text(dev, "fill-test", fill_source, strlen(fill_source), options, &program);
    if (st != TSR_SUCCESS) return st;
    cl_int err;
    cl_kernel k = clCreateKernel(program, "fill", &err);
    assert_int_equal(err, CL_SUCCESS);
    float out[64];
    th_poison(out, 64);
    cl_mem buf = th_buffer_from(dev, out, 64);
    float scale = 3.0f;
    size_t global = 64;
    assert_int_equal(clSetKernelArg(k, 0, sizeof buf, &buf), CL_SUCCESS);
    assert_int_equal(clSetKernelArg(k, 1, sizeof scale, &scale), CL_SUCCESS);
    assert_int_equal(clEnqueueNDRangeKernel(tsr_device_queue(dev), k, 1, NULL, &global, NULL, 0, NULL, NULL), CL_SUCCESS);
    th_read(dev, buf, out, 64);
    for (int i = 0; i < 64; ++i) assert_float_equal(out[i], 3.0f * (float)i + (float)salt, 0.0f);
    clReleaseMemObject(buf);
    clReleaseKernel(k);
    return TSR_SUCCESS;
}

static tsr_cache_info cache_info(tsr_device *dev) {
    tsr_cache_info ci;
    TH_ASSERT_OK(tsr_cache_get_info(dev, &ci));
    return ci;
}

/* Entries (and leftover temporary files) in a directory. */
static void count_files(const char *dir, int *entries, int *temporaries, char *last_entry, size_t size) {
    *entries = *temporaries = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, ".tmp.")) ++*temporaries;
        else if (strlen(e->d_name) > 4 && strcmp(e->d_name + strlen(e->d_name) - 4, ".bin") == 0) {
            ++*entries;
            if (last_entry) snprintf(last_entry, size, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
}

static void miss_then_memory_then_disk_hit(void **state) {
    (void)state;
    int salt = fresh_salt();
    tsr_device *dev = th_open_device();
    tsr_cache_info ci = cache_info(dev);
    assert_true(ci.persistent);
    assert_string_equal(ci.dir, cache_dir);
    TH_ASSERT_OK(build_and_run(dev, salt));
    TH_ASSERT_OK(build_and_run(dev, salt));
    ci = cache_info(dev);
    assert_int_equal(ci.builds, 1);
    assert_int_equal(ci.memory_hits, 1);
    assert_int_equal(ci.disk_hits, 0);
    tsr_device_close(dev);
    int entries, temps;
    count_files(cache_dir, &entries, &temps, NULL, 0);
    assert_int_equal(entries, 1);
    assert_int_equal(temps, 0);

    dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, salt));
    ci = cache_info(dev);
    assert_int_equal(ci.builds, 0);
    assert_int_equal(ci.disk_hits, 1);
    /* Other options are another entry. */
    TH_ASSERT_OK(build_and_run(dev, salt + 1));
    ci = cache_info(dev);
    assert_int_equal(ci.builds, 1);
    tsr_device_close(dev);
    count_files(cache_dir, &entries, &temps, NULL, 0);
    assert_int_equal(entries, 2);
}

typedef enum damage { TRUNCATE_HALF, TRUNCATE_HEADER, EMPTY_FILE, FLIP_PAYLOAD, FLIP_KEY, FLIP_MAGIC, FOREIGN } damage;

static void damaged_entry_is_rejected_and_rebuilt(damage how, const char *reason) {
    int salt = fresh_salt();
    tsr_device *dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, salt));
    tsr_device_close(dev);
    char path[1024];
    int entries, temps;
    /* The newest entry is the one just written: use a directory of its own. */
    count_files(cache_dir, &entries, &temps, path, sizeof path);
    assert_int_equal(entries, 1);
    char *data = NULL;
    size_t size = 0;
    TH_ASSERT_OK(tsr_read_file(path, &data, &size));
    switch (how) {
    case TRUNCATE_HALF: size /= 2; break;
    case TRUNCATE_HEADER: size = 10; break;
    case EMPTY_FILE: size = 0; break;
    case FLIP_PAYLOAD: data[size - 7] ^= 0x40; break;
    case FLIP_KEY: data[60] ^= 0x01; break;
    case FLIP_MAGIC: data[0] = 'X'; break;
    case FOREIGN: memset(data, 'z', size); break;
    }
    th_write_file(path, data, size);
    free(data);

    dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, salt));
    TH_ASSERT_CONTAINS(tsr_last_warning(), "rejected");
    TH_ASSERT_CONTAINS(tsr_last_warning(), reason);
    tsr_cache_info ci = cache_info(dev);
    assert_int_equal(ci.disk_rejects, 1);
    assert_int_equal(ci.builds, 1);
    assert_int_equal(ci.disk_hits, 0);
    tsr_device_close(dev);
    /* The rebuilt entry replaced the damaged one and is valid. */
    dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, salt));
    ci = cache_info(dev);
    assert_int_equal(ci.disk_hits, 1);
    assert_int_equal(ci.disk_rejects, 0);
    tsr_device_close(dev);
    count_files(cache_dir, &entries, &temps, NULL, 0);
    assert_int_equal(entries, 1);
    assert_int_equal(temps, 0);
}

static void truncated_entry(void **state) { (void)state; damaged_entry_is_rejected_and_rebuilt(TRUNCATE_HALF, "truncated"); }
static void truncated_header(void **state) { (void)state; damaged_entry_is_rejected_and_rebuilt(TRUNCATE_HEADER, "truncated header"); }
static void empty_entry(void **state) { (void)state; damaged_entry_is_rejected_and_rebuilt(EMPTY_FILE, "truncated header"); }
static void flipped_payload_byte(void **state) { (void)state; damaged_entry_is_rejected_and_rebuilt(FLIP_PAYLOAD, "checksum mismatch"); }
static void flipped_key_byte(void **state) { (void)state; damaged_entry_is_rejected_and_rebuilt(FLIP_KEY, "checksum mismatch"); }
static void flipped_magic(void **state) { (void)state; damaged_entry_is_rejected_and_rebuilt(FLIP_MAGIC, "bad magic"); }
static void foreign_file(void **state) { (void)state; damaged_entry_is_rejected_and_rebuilt(FOREIGN, "bad magic"); }

static void unwritable_directory_degrades_to_memory(const char *dir) {
    setenv("TSR_CACHE_DIR", dir, 1);
    tsr_device *dev = th_open_device();
    TH_ASSERT_CONTAINS(tsr_last_warning(), "not writable");
    TH_ASSERT_CONTAINS(tsr_last_warning(), "in-memory");
    tsr_cache_info ci = cache_info(dev);
    assert_false(ci.persistent);
    TH_ASSERT_CONTAINS(ci.warning, dir);
    int salt = fresh_salt();
    TH_ASSERT_OK(build_and_run(dev, salt));
    TH_ASSERT_OK(build_and_run(dev, salt));
    ci = cache_info(dev);
    assert_int_equal(ci.builds, 1);
    assert_int_equal(ci.memory_hits, 1);
    tsr_device_close(dev);
    setenv("TSR_CACHE_DIR", cache_dir, 1);
}

static void unwritable_directories(void **state) {
    (void)state;
    /* Root ignores permission bits, so use places nobody can write: below a regular file, and /proc. */
    char file_parent[600];
    snprintf(file_parent, sizeof file_parent, "%s/plain-file", cache_dir);
    th_write_file(file_parent, "x", 1);
    char below_file[700];
    snprintf(below_file, sizeof below_file, "%s/cache", file_parent);
    unwritable_directory_degrades_to_memory(below_file);
    unwritable_directory_degrades_to_memory("/proc/tessera-cache");
    if (geteuid() != 0) {
        char ro[700];
        snprintf(ro, sizeof ro, "%s/read-only", cache_dir);
        assert_int_equal(mkdir(ro, 0500), 0);
        unwritable_directory_degrades_to_memory(ro);
        chmod(ro, 0700);
    }
}

static void disabled_cache(void **state) {
    (void)state;
    setenv("TSR_CACHE_DIR", "off", 1);
    tsr_device *dev = th_open_device();
    tsr_cache_info ci = cache_info(dev);
    assert_false(ci.persistent);
    TH_ASSERT_CONTAINS(ci.warning, "disabled");
    TH_ASSERT_OK(build_and_run(dev, fresh_salt()));
    tsr_device_close(dev);
    setenv("TSR_CACHE_DIR", cache_dir, 1);
}

/* Child process of the concurrent-writer test: wait for the start signal, then build. */
static int child_build(const char *start_file, int salt) {
    for (int i = 0; i < 20000 && access(start_file, F_OK) != 0; ++i) usleep(500);
    tsr_device *dev = NULL;
    if (tsr_device_open(NULL, &dev) != TSR_SUCCESS) return 10;
    char options[64];
    salt_options(salt, options, sizeof options);
    cl_program program = NULL;
    tsr_status st = tsr_program_from_text(dev, "fill-test", fill_source, strlen(fill_source), options, &program);
    tsr_device_close(dev);
    return st == TSR_SUCCESS ? 0 : 11;
}

static void concurrent_writers(void **state) {
    (void)state;
    /* Processes, not threads: two processes building at once is the case that matters. */
    for (int round = 0; round < 3; ++round) {
        int salt = fresh_salt();
        char start_file[700], salt_text[32];
        snprintf(start_file, sizeof start_file, "%s/start-%d", cache_dir, round);
        snprintf(salt_text, sizeof salt_text, "%d", salt);
        pid_t pids[2];
        char *argv[] = {(char *)"test_cache", (char *)"--child-build", start_file, salt_text, NULL};
        for (int i = 0; i < 2; ++i)
            assert_int_equal(posix_spawn(&pids[i], "/proc/self/exe", NULL, NULL, argv, environ), 0);
        th_write_file(start_file, "go", 2);
        for (int i = 0; i < 2; ++i) {
            int ws = 0;
            assert_int_equal(waitpid(pids[i], &ws, 0), pids[i]);
            assert_true(WIFEXITED(ws));
            assert_int_equal(WEXITSTATUS(ws), 0);
        }
        unlink(start_file);
    }
    int entries, temps;
    count_files(cache_dir, &entries, &temps, NULL, 0);
    assert_int_equal(entries, 3);
    assert_int_equal(temps, 0);
    /* Every entry loads. */
    tsr_device *dev = th_open_device();
    tsr_device_close(dev);
}

static void build_errors_carry_the_log(void **state) {
    (void)state;
    tsr_device *dev = th_open_device();
    static const char broken[] = "__kernel void broken(__global float *x) { x[0] = undefined_symbol_xyz; }\n";
    cl_program program = NULL;
    TH_ASSERT_STATUS(tsr_program_from_text(dev, "broken-test", broken, strlen(broken), "-DFOO=1", &program),
                     TSR_ERR_BUILD);
    assert_null(program);
    TH_ASSERT_CONTAINS(tsr_last_error(), "broken-test");
    TH_ASSERT_CONTAINS(tsr_last_error(), "-DFOO=1");
    TH_ASSERT_CONTAINS(tsr_last_error(), "build log");
    TH_ASSERT_CONTAINS(tsr_last_error(), "undefined_symbol_xyz");
    int entries, temps;
    count_files(cache_dir, &entries, &temps, NULL, 0);
    assert_int_equal(entries, 0);
    /* Bad options are a build error too, and the device stays usable. */
    TH_ASSERT_STATUS(tsr_program_from_text(dev, "fill-test", fill_source, strlen(fill_source), "-DSALT=", &program),
                     TSR_ERR_BUILD);
    TH_ASSERT_OK(build_and_run(dev, fresh_salt()));
    cl_kernel k = NULL;
    TH_ASSERT_STATUS(tsr_get_kernel(dev, "no-such-source", "", "gemm", &k), TSR_ERR_NOT_FOUND);
    TH_ASSERT_STATUS(tsr_get_kernel(dev, "gemm", "", "no_such_kernel", &k), TSR_ERR_NOT_FOUND);
    TH_ASSERT_CONTAINS(tsr_last_error(), "no_such_kernel");
    assert_null(k);
    tsr_device_close(dev);
}

/* Run a small GEMM through the public API and compare with the reference. */
static tsr_status small_gemm(tsr_device *dev) {
    enum { M = 19, N = 23, K = 17 };
    float a[M * K], b[K * N], c[M * N];
    double ref[M * N];
    th_fill_uniform(a, M * K, -1, 1);
    th_fill_uniform(b, K * N, -1, 1);
    th_poison(c, M * N);
    cl_mem da = th_buffer_from(dev, a, M * K), db = th_buffer_from(dev, b, K * N), dc = th_buffer_from(dev, c, M * N);
    tsr_status st = tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, M, N, K, 1.0f, da, 0, K, db, 0, N, 0.0f,
                              dc, 0, N, NULL, NULL);
    if (st == TSR_SUCCESS) {
        th_read(dev, dc, c, M * N);
        th_ref_sgemm(1, 0, 0, M, N, K, 1.0, a, K, b, N, 0.0, c, ref, N);
        assert_true(th_rel_error_matrix(1, M, N, c, ref, N) <= 1e-6);
    }
    clReleaseMemObject(da);
    clReleaseMemObject(db);
    clReleaseMemObject(dc);
    return st;
}

static void kernel_dir_override(void **state) {
    (void)state;
    char dir[600], path[700];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/gemm.cl", dir);
    th_write_file(path, "this is not OpenCL C\n", 21);
    setenv("TSR_KERNEL_DIR", dir, 1);
    tsr_device *dev = th_open_device();
    TH_ASSERT_STATUS(small_gemm(dev), TSR_ERR_BUILD);
    TH_ASSERT_CONTAINS(tsr_last_error(), "'gemm'");
    TH_ASSERT_CONTAINS(tsr_last_error(), "build log");
    tsr_device_close(dev);
    /* A directory without the file falls back to the embedded source, with a warning. */
    unlink(path);
    dev = th_open_device();
    TH_ASSERT_OK(small_gemm(dev));
    TH_ASSERT_CONTAINS(tsr_last_warning(), "embedded source");
    tsr_device_close(dev);
    unsetenv("TSR_KERNEL_DIR");
    th_remove_tree(dir);
}

static void offline_device_without_binaries(void **state) {
    (void)state;
    setenv("TSR_FORCE_OFFLINE", "1", 1);
    setenv("TSR_CACHE_DIR", "off", 1);
    tsr_device *dev = th_open_device();
    assert_true(cache_info(dev).offline);
    TH_ASSERT_STATUS(small_gemm(dev), TSR_ERR_NO_BINARY);
    TH_ASSERT_CONTAINS(tsr_last_error(), "TSR_BINARY_DIR");
    TH_ASSERT_CONTAINS(tsr_last_error(), "build-binaries");
    size_t written = 0;
    TH_ASSERT_STATUS(tsr_build_binaries(dev, cache_dir, &written), TSR_ERR_UNSUPPORTED);
    tsr_device_close(dev);
    /* An empty binary directory names what is missing. */
    setenv("TSR_BINARY_DIR", cache_dir, 1);
    dev = th_open_device();
    TH_ASSERT_STATUS(small_gemm(dev), TSR_ERR_NO_BINARY);
    TH_ASSERT_CONTAINS(tsr_last_error(), cache_dir);
    tsr_device_close(dev);
    unsetenv("TSR_FORCE_OFFLINE");
    unsetenv("TSR_BINARY_DIR");
    setenv("TSR_CACHE_DIR", cache_dir, 1);
}

static void offline_device_loads_prebuilt_binaries(void **state) {
    (void)state;
    char bin_dir[600];
    th_tempdir(bin_dir, sizeof bin_dir);
    tsr_device *dev = th_open_device();
    size_t written = 0;
    TH_ASSERT_OK(tsr_build_binaries(dev, bin_dir, &written));
    assert_true(written >= 8); /* every GEMM variant */
    tsr_device_close(dev);
    char manifest[700];
    snprintf(manifest, sizeof manifest, "%s/manifest.json", bin_dir);
    assert_int_equal(access(manifest, R_OK), 0);

    setenv("TSR_FORCE_OFFLINE", "1", 1);
    setenv("TSR_BINARY_DIR", bin_dir, 1);
    setenv("TSR_CACHE_DIR", "off", 1);
    dev = th_open_device();
    TH_ASSERT_OK(small_gemm(dev));
    tsr_cache_info ci = cache_info(dev);
    assert_int_equal(ci.builds, 0);
    assert_int_equal(ci.binary_loads, 1);
    tsr_device_close(dev);

    /* Damage every binary: the offline device refuses them with the reason. */
    DIR *d = opendir(bin_dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strstr(e->d_name, ".bin")) continue;
        char path[900];
        snprintf(path, sizeof path, "%s/%s", bin_dir, e->d_name);
        char *data = NULL;
        size_t size = 0;
        TH_ASSERT_OK(tsr_read_file(path, &data, &size));
        data[size - 3] ^= 0x10;
        th_write_file(path, data, size);
        free(data);
    }
    closedir(d);
    dev = th_open_device();
    TH_ASSERT_STATUS(small_gemm(dev), TSR_ERR_NO_BINARY);
    TH_ASSERT_CONTAINS(tsr_last_error(), "checksum mismatch");
    tsr_device_close(dev);
    unsetenv("TSR_FORCE_OFFLINE");
    unsetenv("TSR_BINARY_DIR");
    setenv("TSR_CACHE_DIR", cache_dir, 1);
    th_remove_tree(bin_dir);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--child-build") == 0) return child_build(argv[2], atoi(argv[3]));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(miss_then_memory_then_disk_hit, setup, teardown),
        cmocka_unit_test_setup_teardown(truncated_entry, setup, teardown),
        cmocka_unit_test_setup_teardown(truncated_header, setup, teardown),
        cmocka_unit_test_setup_teardown(empty_entry, setup, teardown),
        cmocka_unit_test_setup_teardown(flipped_payload_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(flipped_key_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(flipped_magic, setup, teardown),
        cmocka_unit_test_setup_teardown(foreign_file, setup, teardown),
        cmocka_unit_test_setup_teardown(unwritable_directories, setup, teardown),
        cmocka_unit_test_setup_teardown(disabled_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(concurrent_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(build_errors_carry_the_log, setup, teardown),
        cmocka_unit_test_setup_teardown(kernel_dir_override, setup, teardown),
        cmocka_unit_test_setup_teardown(offline_device_without_binaries, setup, teardown),
        cmocka_unit_test_setup_teardown(offline_device_loads_prebuilt_binaries, setup, teardown),
    };
    return TH_RUN(tests);
}
