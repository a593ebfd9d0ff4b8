/* The program cache: memory and disk hits, damaged entries, unwritable and
 * disabled directories, concurrent writers, build errors, TSR_KERNEL_DIR and the
 * ahead-of-time binary path for devices without a compiler. */
#define _GNU_SOURCE
#include "harness.h"
#include "report.h" /* peak_add_source: the report's kernel source "peak", used here as a small one */

#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

extern char **environ;

static const char fill_source[] =
    "__kernel void fill(__global float *out, const float scale) {\n"
    "    const size_t i = get_global_id(0);\n"
    "    out[i] = scale * (float)i + SALT;\n"
    "}\n";

static char cache_dir[512];
/* The suite's own cache folder (tests/meson.build's TSR_CACHE_DIR), kept before the first case
 * replaces it: the one case that does not test the cache itself builds through it. */
static char suite_cache_dir[512];

static int setup(void **state) {
    (void)state;
    static bool kept;
    if (!kept) {
        const char *dir = getenv("TSR_CACHE_DIR");
        if (dir && strlen(dir) < sizeof suite_cache_dir) snprintf(suite_cache_dir, sizeof suite_cache_dir, "%s", dir);
        kept = true;
    }
    th_tempdir(cache_dir, sizeof cache_dir);
    setenv("TSR_CACHE_DIR", cache_dir, 1);
    unsetenv("TSR_FORCE_OFFLINE");
    unsetenv("TSR_BINARY_DIR");
    unsetenv("TSR_TRUST_BINARY_DIR");
    unsetenv("TSR_KERNEL_DIR");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    th_remove_tree(cache_dir);
    return 0;
}

/* A salt unique to this call, so no earlier cache entry (tessera's or the OpenCL driver's own) can
 * answer: the build is a real compile. The cases that race compiles take one. */
static int fresh_salt(void) {
    /* the process and the clock too: ./run test gives both builds one TSR_TEST_SEED, and a salt
     * drawn from it alone would meet the other build's cache entries */
    return (int)((th_rand() ^ (uint32_t)getpid() ^ (uint32_t)time(NULL)) % 1000000u);
}

/* A salt unique to this run, drawn once: no earlier run's entry can answer, and since every case
 * has a cache folder of its own, the cases about tessera's cache share it (the driver compiles it
 * once, its own cache answers the later cases: a second each, longer under sanitizers). The long
 * tier (TSR_TEST_LONG=1) draws a fresh one for every case. */
static int run_salt(void) {
    static int salt = -1;
    if (th_long_mode()) return fresh_salt();
    if (salt < 0) salt = fresh_salt();
    return salt;
}

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
    int salt = run_salt();
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

/* Build a program of a fresh salt into the cache, which must then hold exactly that one entry;
 * its path goes to `path`. Returns the salt. */
static int cache_one_entry(char *path, size_t size) {
    int salt = run_salt();
    tsr_device *dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, salt));
    tsr_device_close(dev);
    int entries, temps;
    count_files(cache_dir, &entries, &temps, path, size);
    assert_int_equal(entries, 1);
    return salt;
}

typedef enum damage { TRUNCATE_HALF, TRUNCATE_HEADER, EMPTY_FILE, FLIP_PAYLOAD, FLIP_KEY, FLIP_MAGIC, FOREIGN } damage;

static void damaged_entry_is_rejected_and_rebuilt(damage how, const char *reason) {
    char path[1024];
    int salt = cache_one_entry(path, sizeof path);
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

    tsr_device *dev = th_open_device();
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
    int entries, temps;
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
    int salt = run_salt();
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
    TH_ASSERT_OK(build_and_run(dev, run_salt()));
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
    /* Processes, not threads: two processes building at once is the case that matters (two rounds;
     * three in the long tier). */
    const int rounds = th_long_mode() ? 3 : 2;
    for (int round = 0; round < rounds; ++round) {
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
    assert_int_equal(entries, rounds);
    assert_int_equal(temps, 0);
    /* Every entry loads. */
    tsr_device *dev = th_open_device();
    tsr_device_close(dev);
}

static tsr_status small_gemm(tsr_device *dev);

/* Threads on one device: the program cache has its own lock, so a compile never holds the
 * device lock (other threads' launches do not wait for it), and two threads that ask for the same
 * new program at once both get the one program the cache keeps. */
typedef struct {
    tsr_device *dev;
    const char *options;
    cl_program program;
    tsr_status status;
    pthread_barrier_t *start;
    volatile int finished; /* written by the thread, polled by the test */
} build_thread;

static void *build_in_thread(void *arg) {
    build_thread *b = arg;
    if (b->start) pthread_barrier_wait(b->start);
    b->status = tsr_program_from_text(b->dev, "fill-test", fill_source, strlen(fill_source), b->options, &b->program);
    __atomic_store_n(&b->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void two_threads_build_one_program(void **state) {
    (void)state;
    tsr_device *dev = th_open_device();
    for (int round = 0; round < 3; ++round) {
        char options[64];
        salt_options(fresh_salt(), options, sizeof options);
        tsr_cache_info before, after;
        TH_ASSERT_OK(tsr_cache_get_info(dev, &before));
        pthread_barrier_t start;
        assert_int_equal(pthread_barrier_init(&start, NULL, 2), 0);
        build_thread b[2] = {{.dev = dev, .options = options, .start = &start},
                             {.dev = dev, .options = options, .start = &start}};
        pthread_t threads[2];
        for (int i = 0; i < 2; ++i)
            assert_int_equal(pthread_create(&threads[i], NULL, build_in_thread, &b[i]), 0);
        for (int i = 0; i < 2; ++i)
            assert_int_equal(pthread_join(threads[i], NULL), 0);
        pthread_barrier_destroy(&start);
        for (int i = 0; i < 2; ++i)
            TH_ASSERT_OK(b[i].status);
        assert_non_null(b[0].program);
        assert_ptr_equal(b[0].program, b[1].program); /* one result kept, the other copy released */
        TH_ASSERT_OK(tsr_cache_get_info(dev, &after));
        uint64_t made = (after.builds - before.builds) + (after.disk_hits - before.disk_hits);
        if (made < 1 || made > 2)
            fail_msg("round %d: %llu builds or disk hits for one program (1 or 2)", round, (unsigned long long)made);
        /* and the cache answers from memory now: the same program, nothing built */
        cl_program again = NULL;
        TH_ASSERT_OK(tsr_program_from_text(dev, "fill-test", fill_source, strlen(fill_source), options, &again));
        assert_ptr_equal(again, b[0].program);
        tsr_cache_info last;
        TH_ASSERT_OK(tsr_cache_get_info(dev, &last));
        assert_true(last.builds == after.builds && last.disk_hits == after.disk_hits);
        assert_true(last.memory_hits == after.memory_hits + 1);
    }
    tsr_device_close(dev);
}

static void compile_does_not_hold_the_device_lock(void **state) {
    (void)state;
    tsr_device *dev = th_open_device();
    char options[64];
    salt_options(fresh_salt(), options, sizeof options);
    /* The device lock held here, as a launch holds it for its workspace: a compile in another
     * thread must finish anyway (it waited for the lock, and so stalled every launch, before). */
    pthread_mutex_lock(&dev->lock);
    build_thread b = {.dev = dev, .options = options};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, build_in_thread, &b), 0);
    bool finished = false;
    for (int ms = 0; ms < 120000 && !finished; ms += 10) {
        finished = __atomic_load_n(&b.finished, __ATOMIC_ACQUIRE) != 0;
        if (!finished) usleep(10000);
    }
    pthread_mutex_unlock(&dev->lock);
    assert_int_equal(pthread_join(thread, NULL), 0);
    if (!finished) fail_msg("a program build waited 120 s for the device lock");
    TH_ASSERT_OK(b.status);
    assert_non_null(b.program);
    tsr_device_close(dev);
}

/* TSR_KERNEL_DIR is read when the device opens: changing it later does not change what the
 * device's launches build from (a new device sees the new value). */
static void kernel_dir_is_read_at_open(void **state) {
    (void)state;
    char dir[600], missing[700];
    th_tempdir(dir, sizeof dir);
    snprintf(missing, sizeof missing, "%s/no-such-dir", dir);
    tsr_device *before = th_open_device(); /* TSR_KERNEL_DIR unset: the embedded sources */
    setenv("TSR_KERNEL_DIR", missing, 1);
    TH_ASSERT_OK(small_gemm(before));
    tsr_device *after = th_open_device();
    TH_ASSERT_STATUS(small_gemm(after), TSR_ERR_NOT_FOUND);
    TH_ASSERT_CONTAINS(tsr_last_error(), "no-such-dir");
    tsr_device_close(after);
    unsetenv("TSR_KERNEL_DIR");
    tsr_device_close(before);
    th_remove_tree(dir);
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
    TH_ASSERT_OK(build_and_run(dev, run_salt()));
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

/* A batch of 1x1 layers on 5x7 images (online, a CPU runs them as one GEMM across the images) in
 * both layouts (NHWC transposes around the NCHW path), against a double reference. */
static tsr_status small_convs(tsr_device *dev) {
    enum { B = 3, C = 9, K = 20, P = 35 };
    float x[B * C * P], w[K * C], y[B * K * P];
    th_fill_uniform(x, B * C * P, -1, 1);
    th_fill_uniform(w, K * C, -1, 1);
    cl_mem dx = th_buffer_from(dev, x, B * C * P), dw = th_buffer_from(dev, w, K * C);
    tsr_status st = TSR_SUCCESS;
    for (int layout = TSR_NCHW; layout <= TSR_NHWC && st == TSR_SUCCESS; ++layout) {
        th_poison(y, B * K * P);
        cl_mem dy = th_buffer_from(dev, y, B * K * P);
        tsr_conv2d_desc d = {.batch = B, .in_channels = C, .in_height = 5, .in_width = 7, .out_channels = K,
                             .kernel_h = 1, .kernel_w = 1, .layout = (tsr_tensor_layout)layout};
        st = tsr_conv2d(dev, &d, dx, dw, dy, NULL, NULL);
        if (st == TSR_SUCCESS) {
            th_read(dev, dy, y, B * K * P);
            for (int n = 0; n < B; ++n)
                for (int k = 0; k < K; ++k)
                    for (int p = 0; p < P; ++p) {
                        double ref = 0;
                        for (int c = 0; c < C; ++c)
                            ref += (double)w[k * C + c] * x[layout == TSR_NCHW ? (n * C + c) * P + p : (n * P + p) * C + c];
                        float got = y[layout == TSR_NCHW ? (n * K + k) * P + p : (n * P + p) * K + k];
                        assert_true(fabs(got - ref) <= 1e-5 * (1 + fabs(ref)));
                    }
        }
        clReleaseMemObject(dy);
    }
    clReleaseMemObject(dx);
    clReleaseMemObject(dw);
    return st;
}

static void kernel_dir_override(void **state) {
    (void)state;
    char dir[600], path[700];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/gemm.cl", dir);
    th_write_file(path, "this is not OpenCL C\n", 21);
    snprintf(path, sizeof path, "%s/gemm_gpu.cl", dir); /* GEMM's other source, hashed with it */
    th_write_file(path, "this is not OpenCL C either\n", 28);
    snprintf(path, sizeof path, "%s/gemm_smallm.cl", dir); /* and its third */
    th_write_file(path, "this is not OpenCL C either\n", 28);
    setenv("TSR_KERNEL_DIR", dir, 1);
    tsr_device *dev = th_open_device();
    th_expect_build_fallback(); /* the case's subject: the fallback's program does not build either */
    TH_ASSERT_STATUS(small_gemm(dev), TSR_ERR_BUILD);
    TH_ASSERT_CONTAINS(tsr_last_error(), "'gemm'");
    TH_ASSERT_CONTAINS(tsr_last_error(), "build log");
    tsr_device_close(dev);
    unsetenv("TSR_KERNEL_DIR");
    th_remove_tree(dir);
}

/* Tuned entries of an op built from several sources (conv: conv.cl, conv_cpu.cl and
 * conv_winograd.cl) go stale when any of them changes: the hash covers every source, and a
 * missing one is an error. */
static void op_hash_covers_every_source(void **state) {
    (void)state;
    char embedded[17], same[17], changed[17], dir[600], path[700];
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_conv, embedded));
    th_tempdir(dir, sizeof dir);
    const char *names[] = {"conv", "conv_cpu", "conv_winograd"};
    char *texts[3] = {NULL, NULL, NULL};
    size_t lengths[3] = {0, 0, 0};
    for (int i = 0; i < 3; ++i) { /* the embedded texts (includes already in place) as files */
        char *owned = NULL;
        const char *text = NULL;
        TH_ASSERT_OK(tsr_load_kernel_source("", names[i], &owned, &text, &lengths[i]));
        texts[i] = malloc(lengths[i] + 32);
        memcpy(texts[i], text, lengths[i]);
        free(owned);
    }
    snprintf(path, sizeof path, "%s/conv.cl", dir);
    th_write_file(path, texts[0], lengths[0]);
    setenv("TSR_KERNEL_DIR", dir, 1);
    TH_ASSERT_STATUS(tsr_op_source_hash(&tsr_op_conv, same), TSR_ERR_NOT_FOUND); /* no conv_cpu.cl */
    TH_ASSERT_CONTAINS(tsr_last_error(), "conv_cpu.cl");
    snprintf(path, sizeof path, "%s/conv_cpu.cl", dir);
    th_write_file(path, texts[1], lengths[1]);
    TH_ASSERT_STATUS(tsr_op_source_hash(&tsr_op_conv, same), TSR_ERR_NOT_FOUND); /* no conv_winograd.cl */
    TH_ASSERT_CONTAINS(tsr_last_error(), "conv_winograd.cl");
    snprintf(path, sizeof path, "%s/conv_winograd.cl", dir);
    th_write_file(path, texts[2], lengths[2]);
    snprintf(path, sizeof path, "%s/conv_cpu.cl", dir);
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_conv, same));
    assert_string_equal(same, embedded);
    memcpy(texts[1] + lengths[1], "\n// edited\n", 11);
    th_write_file(path, texts[1], lengths[1] + 11);
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_conv, changed));
    assert_string_not_equal(changed, embedded);
    unsetenv("TSR_KERNEL_DIR");
    /* an op with one source keeps that source's plain hash (its shipped entries stay current) */
    char gelu_op[17], gelu_file[17];
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_gelu, gelu_op));
    TH_ASSERT_OK(tsr_source_hash("gelu", gelu_file));
    assert_string_equal(gelu_op, gelu_file);
    free(texts[0]), free(texts[1]), free(texts[2]);
    th_remove_tree(dir);
}

/* With TSR_KERNEL_DIR set, whatever is missing is an error naming it: never a silent fall back
 * to the embedded source (the developer's edited kernel would not be the one that runs). */
static void kernel_dir_missing_files_are_errors(void **state) {
    (void)state;
    char dir[600], path[700], missing_dir[700];
    th_tempdir(dir, sizeof dir);
    setenv("TSR_KERNEL_DIR", dir, 1);
    tsr_device *dev = th_open_device();
    /* The directory exists but has no gemm.cl. */
    TH_ASSERT_STATUS(small_gemm(dev), TSR_ERR_NOT_FOUND);
    TH_ASSERT_CONTAINS(tsr_last_error(), "gemm.cl");
    TH_ASSERT_CONTAINS(tsr_last_error(), dir);
    /* Looking up a tuned configuration hashes the same missing file: an error too, not the
     * embedded source's hash (which let entries tuned for the embedded kernel pass as current). */
    tsr_config_info info;
    TH_ASSERT_STATUS(tsr_config_lookup(dev, "gemm", "small", &info), TSR_ERR_NOT_FOUND);
    TH_ASSERT_CONTAINS(tsr_last_error(), "gemm.cl");
    /* gemm.cl includes a file that is not there. */
    static const char with_include[] = "#include \"missing_helper.cl\"\n__kernel void gemm(__global float *x) { x[0] = 1.0f; }\n";
    snprintf(path, sizeof path, "%s/gemm.cl", dir);
    th_write_file(path, with_include, strlen(with_include));
    TH_ASSERT_STATUS(small_gemm(dev), TSR_ERR_NOT_FOUND);
    TH_ASSERT_CONTAINS(tsr_last_error(), "missing_helper.cl");
    TH_ASSERT_CONTAINS(tsr_last_error(), "gemm.cl");
    tsr_device_close(dev);
    /* A directory that does not exist. */
    snprintf(missing_dir, sizeof missing_dir, "%s/no-such-dir", dir);
    setenv("TSR_KERNEL_DIR", missing_dir, 1);
    dev = th_open_device();
    TH_ASSERT_STATUS(small_gemm(dev), TSR_ERR_NOT_FOUND);
    TH_ASSERT_CONTAINS(tsr_last_error(), missing_dir);
    cl_kernel k = NULL;
    TH_ASSERT_STATUS(tsr_get_kernel(dev, "gelu", "", "gelu", &k), TSR_ERR_NOT_FOUND);
    TH_ASSERT_CONTAINS(tsr_last_error(), "no-such-dir");
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
    /* the 16-bit selection is checked before anything else */
    TH_ASSERT_STATUS(tsr_build_binaries_typed(dev, cache_dir, NULL, 1, &written), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_build_binaries_typed(dev, cache_dir, (const tsr_dtype[]){(tsr_dtype)7}, 1, &written),
                     TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "dtypes");
    TH_ASSERT_STATUS(tsr_build_binaries_typed(dev, cache_dir, (const tsr_dtype[]){TSR_F16}, 1, &written),
                     TSR_ERR_UNSUPPORTED);
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
    /* Every program of every op, built through the suite's cache (the cli test's build-binaries
     * fills it in a full run: 2-3 s, against 20-30 s compiling them all into an empty one; the
     * long tier keeps the case's own empty folder). */
    if (suite_cache_dir[0] && !th_long_mode()) setenv("TSR_CACHE_DIR", suite_cache_dir, 1);
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
    /* conv2d's launch-time forms too: a batch of 1x1 layers, and channels-last's transposes */
    dev = th_open_device();
    TH_ASSERT_OK(small_convs(dev));
    assert_int_equal(cache_info(dev).builds, 0);
    tsr_device_close(dev);

    /* A world-writable binary directory is refused, unless the user vouches for it. */
    assert_int_equal(chmod(bin_dir, 0777), 0);
    dev = th_open_device();
    TH_ASSERT_CONTAINS(tsr_last_warning(), "refusing ahead-of-time binaries");
    TH_ASSERT_STATUS(small_gemm(dev), TSR_ERR_NO_BINARY);
    TH_ASSERT_CONTAINS(tsr_last_error(), "world-writable");
    TH_ASSERT_CONTAINS(tsr_last_error(), "TSR_TRUST_BINARY_DIR=1");
    tsr_device_close(dev);
    setenv("TSR_TRUST_BINARY_DIR", "1", 1);
    dev = th_open_device();
    TH_ASSERT_OK(small_gemm(dev));
    assert_int_equal(cache_info(dev).binary_loads, 1);
    tsr_device_close(dev);
    unsetenv("TSR_TRUST_BINARY_DIR");
    assert_int_equal(chmod(bin_dir, 0700), 0);
    /* So is a group-writable binary in a private directory (the same rule as the cache). */
    DIR *bd = opendir(bin_dir);
    struct dirent *be;
    while ((be = readdir(bd)) != NULL)
        if (strstr(be->d_name, ".bin")) assert_int_equal(fchmodat(dirfd(bd), be->d_name, 0664, 0), 0);
    closedir(bd);
    dev = th_open_device();
    TH_ASSERT_STATUS(small_gemm(dev), TSR_ERR_NO_BINARY);
    TH_ASSERT_CONTAINS(tsr_last_error(), "untrusted");
    tsr_device_close(dev);
    setenv("TSR_TRUST_BINARY_DIR", "1", 1);
    dev = th_open_device();
    TH_ASSERT_OK(small_gemm(dev));
    tsr_device_close(dev);
    unsetenv("TSR_TRUST_BINARY_DIR");
    bd = opendir(bin_dir);
    while ((be = readdir(bd)) != NULL)
        if (strstr(be->d_name, ".bin")) assert_int_equal(fchmodat(dirfd(bd), be->d_name, 0644, 0), 0);
    closedir(bd);

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

/* ---- trust: directories and entries others could write are refused ---- */

/* Names and modification times of a directory's files, to show nothing was read or written. */
static void snapshot(const char *dir, char *out, size_t size) {
    out[0] = '\0';
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        assert_int_equal(lstat(path, &st), 0);
        size_t n = strlen(out);
        snprintf(out + n, size - n, "%s:%lld.%09ld:%lld.%09ld;", e->d_name, (long long)st.st_mtim.tv_sec,
                 st.st_mtim.tv_nsec, (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec);
    }
    closedir(d);
}

/* The cache directory `dir` is refused: a warning saying why, correct results from an in-memory
 * build, and the directory left exactly as it was. */
static void refused_cache_dir(const char *dir, int salt, const char *why) {
    char before[4096], after[4096];
    snapshot(dir, before, sizeof before);
    tsr_device *dev = th_open_device();
    TH_ASSERT_CONTAINS(tsr_last_warning(), "unsafe");
    TH_ASSERT_CONTAINS(tsr_last_warning(), why);
    TH_ASSERT_CONTAINS(tsr_last_warning(), "in-memory");
    tsr_cache_info ci = cache_info(dev);
    assert_false(ci.persistent);
    TH_ASSERT_OK(build_and_run(dev, salt));
    TH_ASSERT_OK(build_and_run(dev, salt + 1));
    ci = cache_info(dev);
    assert_int_equal(ci.disk_hits, 0);
    assert_int_equal(ci.builds, 2);
    tsr_device_close(dev);
    snapshot(dir, after, sizeof after);
    assert_string_equal(before, after);
}

static void unsafe_cache_directory_is_refused(void **state) {
    (void)state;
    int salt = run_salt();
    /* A valid entry exists: a refused directory must not even be read. */
    tsr_device *dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, salt));
    tsr_device_close(dev);
    assert_int_equal(chmod(cache_dir, 0777), 0);
    refused_cache_dir(cache_dir, salt, "world-writable");
    assert_int_equal(chmod(cache_dir, 0770), 0);
    refused_cache_dir(cache_dir, salt, "group- or world-writable");
    assert_int_equal(chmod(cache_dir, 0700), 0);
    if (geteuid() == 0) {
        /* Owned by another user (a directory someone made first in a sticky /tmp). */
        assert_int_equal(chown(cache_dir, 65534, 65534), 0);
        refused_cache_dir(cache_dir, salt, "owned by uid 65534");
        assert_int_equal(chown(cache_dir, 0, 0), 0);
    } else {
        printf("# skipping the other-owner case: needs root to chown to uid 65534 (euid %u)\n", (unsigned)geteuid());
    }
    /* Private again: the entry is used. */
    dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, salt));
    assert_int_equal(cache_info(dev).disk_hits, 1);
    tsr_device_close(dev);
}

static void created_cache_directory_is_private(void **state) {
    (void)state;
    char dir[700], parent[700];
    snprintf(parent, sizeof parent, "%s/new", cache_dir);
    snprintf(dir, sizeof dir, "%s/new/tessera", cache_dir);
    setenv("TSR_CACHE_DIR", dir, 1);
    mode_t old = umask(0);
    tsr_device *dev = th_open_device();
    umask(old);
    assert_true(cache_info(dev).persistent);
    tsr_device_close(dev);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(stat(parent, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    setenv("TSR_CACHE_DIR", cache_dir, 1);
}

/* Delete the entries in a directory (so the next one written is the only one). */
static void remove_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".bin") == 0) assert_int_equal(unlinkat(dirfd(d), e->d_name, 0), 0);
    }
    closedir(d);
}

/* An entry others could have written is rejected, deleted and rebuilt as the user's own. */
static void unsafe_entry_is_rejected(void (*make_unsafe)(const char *path), const char *why) {
    remove_entries(cache_dir);
    char path[1024];
    int salt = cache_one_entry(path, sizeof path);
    make_unsafe(path);
    tsr_device *dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, salt));
    TH_ASSERT_CONTAINS(tsr_last_warning(), "rejected");
    TH_ASSERT_CONTAINS(tsr_last_warning(), "untrusted");
    TH_ASSERT_CONTAINS(tsr_last_warning(), why);
    tsr_cache_info ci = cache_info(dev);
    assert_int_equal(ci.disk_rejects, 1);
    assert_int_equal(ci.disk_hits, 0);
    assert_int_equal(ci.builds, 1);
    tsr_device_close(dev);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_uid, geteuid());
    assert_int_equal(st.st_mode & 022, 0);
    dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, salt));
    assert_int_equal(cache_info(dev).disk_hits, 1);
    tsr_device_close(dev);
}

static void make_group_writable(const char *path) { assert_int_equal(chmod(path, 0664), 0); }
static void make_world_writable(const char *path) { assert_int_equal(chmod(path, 0646), 0); }
static void give_to_nobody(const char *path) { assert_int_equal(chown(path, 65534, 65534), 0); }

static void unsafe_entries_are_rejected(void **state) {
    (void)state;
    unsafe_entry_is_rejected(make_group_writable, "group- or world-writable");
    unsafe_entry_is_rejected(make_world_writable, "group- or world-writable");
    if (geteuid() == 0)
        unsafe_entry_is_rejected(give_to_nobody, "owned by uid 65534");
    else
        printf("# skipping the other-owner entry case: needs root to chown to uid 65534 (euid %u)\n", (unsigned)geteuid());
}

/* ---- an entry that loads but lacks its kernels heals ---- */

static const char other_source[] =
    "__kernel void other(__global float *out) { out[get_global_id(0)] = 42.0f; }\n";

/* The entry format (program.c): 48-byte header, key text, kernel names, binary. */
typedef struct {
    char magic[8];
    uint32_t format_version, byte_order;
    uint64_t key_length, payload_length, checksum, names_length;
} th_entry_header;

static void wrong_kernels_entry_is_replaced(void **state) {
    (void)state;
    int salt = run_salt();
    char options[64];
    salt_options(salt, options, sizeof options);
    tsr_device *dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, salt));
    tsr_device_close(dev); /* entries are written when the device closes */
    char fill_entry[1024], other_entry[1024], other_dir[600];
    int entries, temps;
    count_files(cache_dir, &entries, &temps, fill_entry, sizeof fill_entry);
    assert_int_equal(entries, 1);
    /* The same options, another source, in a directory of its own. */
    th_tempdir(other_dir, sizeof other_dir);
    setenv("TSR_CACHE_DIR", other_dir, 1);
    dev = th_open_device();
    cl_program program = NULL;
    TH_ASSERT_OK(tsr_program_from_text(dev, "other-test", other_source, strlen(other_source), options, &program));
    tsr_device_close(dev);
    setenv("TSR_CACHE_DIR", cache_dir, 1);
    count_files(other_dir, &entries, &temps, other_entry, sizeof other_entry);
    assert_int_equal(entries, 1);

    /* Plant a well-formed entry under fill's key: fill's key and recorded names, other's binary,
     * a correct checksum. It loads, but has no kernel "fill". */
    char *fill = NULL, *other = NULL;
    size_t fill_size = 0, other_size = 0;
    TH_ASSERT_OK(tsr_read_file(fill_entry, &fill, &fill_size));
    TH_ASSERT_OK(tsr_read_file(other_entry, &other, &other_size));
    th_entry_header fh, oh;
    memcpy(&fh, fill, sizeof fh);
    memcpy(&oh, other, sizeof oh);
    assert_int_equal(fh.format_version, 2);
    const char *key = fill + sizeof fh, *names = key + fh.key_length;
    const char *payload = other + sizeof oh + oh.key_length + oh.names_length;
    TH_ASSERT_CONTAINS(names, "fill");
    th_entry_header ph = fh;
    ph.payload_length = oh.payload_length;
    XXH64_state_t *xs = XXH64_createState();
    XXH64_reset(xs, 2);
    XXH64_update(xs, key, fh.key_length);
    XXH64_update(xs, names, fh.names_length);
    XXH64_update(xs, payload, oh.payload_length);
    ph.checksum = XXH64_digest(xs);
    XXH64_freeState(xs);
    size_t planted_size = sizeof ph + fh.key_length + fh.names_length + oh.payload_length;
    char *planted = malloc(planted_size);
    assert_non_null(planted);
    memcpy(planted, &ph, sizeof ph);
    memcpy(planted + sizeof ph, key, fh.key_length + fh.names_length);
    memcpy(planted + sizeof ph + fh.key_length + fh.names_length, payload, oh.payload_length);
    th_write_file(fill_entry, planted, planted_size);

    for (int process = 0; process < 2; ++process) {
        dev = th_open_device();
        TH_ASSERT_OK(build_and_run(dev, salt));
        char warning[2048];
        tsr_strlcpy(warning, tsr_last_warning(), sizeof warning);
        tsr_cache_info ci = cache_info(dev);
        if (process == 0) {
            /* Rejected, rebuilt from source, and replaced. */
            TH_ASSERT_CONTAINS(warning, "rejected");
            TH_ASSERT_CONTAINS(warning, "not the ones it was built with");
            assert_int_equal(ci.disk_rejects, 1);
            assert_int_equal(ci.builds, 1);
        } else {
            /* Healed: the next process loads the rebuilt entry. */
            assert_int_equal(ci.disk_rejects, 0);
            assert_int_equal(ci.disk_hits, 1);
            assert_int_equal(ci.builds, 0);
        }
        tsr_device_close(dev);
    }
    char *now = NULL;
    size_t now_size = 0;
    TH_ASSERT_OK(tsr_read_file(fill_entry, &now, &now_size));
    assert_true(now_size != planted_size || memcmp(now, planted, now_size) != 0);
    free(now);
    free(planted);
    free(fill);
    free(other);
    th_remove_tree(other_dir);
}

/* Rewrite the entry at `path` as its own key around the names and binary of the entry at `donor`,
 * with a correct checksum: what a forged (or stale) entry looks like. It loads (its recorded names
 * are its binary's), but lacks the kernels its key's program has. */
static void forge_entry(const char *path, const char *donor) {
    char *own = NULL, *other = NULL;
    size_t own_size = 0, other_size = 0;
    TH_ASSERT_OK(tsr_read_file(path, &own, &own_size));
    TH_ASSERT_OK(tsr_read_file(donor, &other, &other_size));
    th_entry_header h, oh;
    memcpy(&h, own, sizeof h);
    memcpy(&oh, other, sizeof oh);
    assert_int_equal(h.format_version, 2);
    const char *key = own + sizeof h, *names = other + sizeof oh + oh.key_length;
    const char *payload = names + oh.names_length;
    h.names_length = oh.names_length;
    h.payload_length = oh.payload_length;
    XXH64_state_t *xs = XXH64_createState();
    XXH64_reset(xs, 2);
    XXH64_update(xs, key, h.key_length);
    XXH64_update(xs, names, oh.names_length);
    XXH64_update(xs, payload, oh.payload_length);
    h.checksum = XXH64_digest(xs);
    XXH64_freeState(xs);
    size_t size = sizeof h + h.key_length + oh.names_length + oh.payload_length;
    char *forged = malloc(size);
    assert_non_null(forged);
    memcpy(forged, &h, sizeof h);
    memcpy(forged + sizeof h, key, h.key_length);
    memcpy(forged + sizeof h + h.key_length, names, oh.names_length + oh.payload_length);
    th_write_file(path, forged, size);
    free(forged);
    free(own);
    free(other);
}

/* Forge every entry of `dir` whose key starts with `key_prefix` ("source=gemm ") with donor's
 * binary; returns how many. */
static int forge_all(const char *dir, const char *key_prefix, const char *donor) {
    int n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!strstr(e->d_name, ".bin")) continue;
        char *data = NULL;
        size_t size = 0;
        TH_ASSERT_OK(tsr_read_file(path, &data, &size));
        bool match = size > sizeof(th_entry_header) + strlen(key_prefix) &&
                     memcmp(data + sizeof(th_entry_header), key_prefix, strlen(key_prefix)) == 0;
        free(data);
        if (!match) continue;
        forge_entry(path, donor);
        ++n;
    }
    closedir(d);
    return n;
}

/* A program of one kernel named `kernel` as an entry file (its path in entry) in a directory of
 * its own (dir). */
static void donor_entry(const char *kernel, char *dir, size_t dir_size, char *entry, size_t entry_size) {
    th_tempdir(dir, dir_size);
    char *saved = strdup(getenv("TSR_CACHE_DIR"));
    setenv("TSR_CACHE_DIR", dir, 1);
    tsr_device *dev = th_open_device();
    char source[256];
    snprintf(source, sizeof source, "__kernel void %s(__global float *out) { out[get_global_id(0)] = 42.0f; }\n", kernel);
    cl_program program = NULL;
    TH_ASSERT_OK(tsr_program_from_text(dev, "donor", source, strlen(source), "", &program));
    tsr_device_close(dev);
    setenv("TSR_CACHE_DIR", saved, 1);
    free(saved);
    int entries, temps;
    count_files(dir, &entries, &temps, entry, entry_size);
    assert_int_equal(entries, 1);
}

/* A well-formed entry (the right key and checksum) around another program's binary used to fail
 * every op with CL_INVALID_KERNEL_NAME, in every later process, until `tessera cache --clear`. Two
 * forgeries: a binary whose kernels are not in the key's source at all (refused when loaded), and
 * one whose kernel is in it but is not the one the caller creates (an op through tsr_program_for,
 * tsr_get_kernel through the same). Each entry is dropped and rebuilt from source, and the next
 * process loads the rebuilt entry. */
static void forged_entry_heals(void **state) {
    (void)state;
    char foreign_dir[600], foreign[1024], pack_dir[600], pack[1024], read_dir[600], bw_read[1024];
    donor_entry("zz_foreign_kernel", foreign_dir, sizeof foreign_dir, foreign, sizeof foreign);
    donor_entry("pack_a", pack_dir, sizeof pack_dir, pack, sizeof pack);         /* a kernel of gemm.cl */
    donor_entry("bw_read", read_dir, sizeof read_dir, bw_read, sizeof bw_read); /* a kernel of peak.cl */
    for (int forgery = 0; forgery < 2; ++forgery) {
        tsr_device *dev = th_open_device();
        TH_ASSERT_OK(small_gemm(dev));
        cl_kernel k = NULL;
        TH_ASSERT_OK(tsr_get_kernel(dev, "peak", "-DVW=1", "empty", &k));
        clReleaseKernel(k);
        tsr_device_close(dev);
        assert_true(forge_all(cache_dir, "source=gemm ", forgery ? pack : foreign) >= 1);
        assert_int_equal(forge_all(cache_dir, "source=peak ", forgery ? bw_read : foreign), 1);
        for (int process = 0; process < 2; ++process) {
            dev = th_open_device();
            TH_ASSERT_OK(small_gemm(dev));
            char warning[2048];
            tsr_strlcpy(warning, tsr_last_warning(), sizeof warning);
            tsr_cache_info ci = cache_info(dev);
            if (process == 0) {
                TH_ASSERT_CONTAINS(warning, "rejected binary cache entry");
                TH_ASSERT_CONTAINS(warning, forgery ? "lacks kernel 'gemm'"
                                                    : "kernel 'zz_foreign_kernel' is not in source 'gemm'");
                TH_ASSERT_CONTAINS(warning, forgery ? "[pack_a]" : "[zz_foreign_kernel]");
                assert_true(ci.disk_rejects >= 1);
                assert_true(ci.builds >= 1);
            } else {
                assert_int_equal(ci.disk_rejects, 0);
                assert_int_equal(ci.builds, 0);
                assert_true(ci.disk_hits >= 1);
            }
            uint64_t rejects = ci.disk_rejects;
            TH_ASSERT_OK(tsr_get_kernel(dev, "peak", "-DVW=1", "empty", &k));
            assert_non_null(k);
            clReleaseKernel(k);
            if (process == 0)
                TH_ASSERT_CONTAINS(tsr_last_warning(), forgery ? "lacks kernel 'empty'" : "not in source 'peak'");
            ci = cache_info(dev);
            assert_int_equal(ci.disk_rejects, rejects + (process == 0)); /* peak's entry, the first time */
            /* A second call finds the rebuilt program in memory. */
            TH_ASSERT_OK(tsr_get_kernel(dev, "peak", "-DVW=1", "empty", &k));
            clReleaseKernel(k);
            assert_int_equal(cache_info(dev).disk_rejects, rejects + (process == 0));
            /* A name the source does not have is the caller's mistake: the entry stays. */
            TH_ASSERT_STATUS(tsr_get_kernel(dev, "peak", "-DVW=1", "emptyy", &k), TSR_ERR_NOT_FOUND);
            TH_ASSERT_CONTAINS(tsr_last_error(), "has no kernel 'emptyy'");
            TH_ASSERT_STATUS(tsr_get_kernel(dev, "peak", "-DVW=1", "empty;bw_read", &k), TSR_ERR_NOT_FOUND);
            assert_int_equal(cache_info(dev).disk_rejects, rejects + (process == 0));
            tsr_device_close(dev);
        }
    }
    th_remove_tree(foreign_dir);
    th_remove_tree(pack_dir);
    th_remove_tree(read_dir);
}

/* The same forgeries among ahead-of-time binaries (TSR_BINARY_DIR, a device without a compiler):
 * nothing to rebuild from, so an error naming the file, in place of CL_INVALID_KERNEL_NAME. */
static void forged_ahead_of_time_binary_is_named(void **state) {
    (void)state;
    char foreign_dir[600], foreign[1024], read_dir[600], bw_read[1024], bin_dir[600];
    donor_entry("zz_foreign_kernel", foreign_dir, sizeof foreign_dir, foreign, sizeof foreign);
    donor_entry("bw_read", read_dir, sizeof read_dir, bw_read, sizeof bw_read);
    th_tempdir(bin_dir, sizeof bin_dir);
    tsr_device *dev = th_open_device();
    TH_ASSERT_OK(tsr_program_write_binary(dev, "peak", "-DVW=1", bin_dir));
    tsr_device_close(dev);
    char forged[1024];
    int entries, temps;
    count_files(bin_dir, &entries, &temps, forged, sizeof forged);
    assert_int_equal(entries, 1);
    setenv("TSR_FORCE_OFFLINE", "1", 1);
    setenv("TSR_BINARY_DIR", bin_dir, 1);
    setenv("TSR_CACHE_DIR", "off", 1);
    dev = th_open_device();
    cl_kernel k = NULL;
    TH_ASSERT_OK(tsr_get_kernel(dev, "peak", "-DVW=1", "empty", &k)); /* intact: it loads */
    clReleaseKernel(k);
    tsr_device_close(dev);
    for (int forgery = 0; forgery < 2; ++forgery) {
        assert_int_equal(forge_all(bin_dir, "source=peak ", forgery ? bw_read : foreign), 1);
        for (int call = 0; call < 2; ++call) { /* and again: the file is named each time */
            dev = th_open_device();
            k = (cl_kernel)1;
            TH_ASSERT_STATUS(tsr_get_kernel(dev, "peak", "-DVW=1", "empty", &k), TSR_ERR_NO_BINARY);
            assert_null(k);
            TH_ASSERT_CONTAINS(tsr_last_error(), forged);
            TH_ASSERT_CONTAINS(tsr_last_error(), forgery ? "lacks kernel 'empty'" : "not in source 'peak'");
            TH_ASSERT_CONTAINS(tsr_last_error(), "build-binaries");
            assert_int_equal(cache_info(dev).builds, 0);
            tsr_device_close(dev);
        }
    }
    unsetenv("TSR_FORCE_OFFLINE");
    unsetenv("TSR_BINARY_DIR");
    setenv("TSR_CACHE_DIR", cache_dir, 1);
    th_remove_tree(bin_dir);
    th_remove_tree(foreign_dir);
    th_remove_tree(read_dir);
}

/* ---- special files never hang a reader ---- */

static void make_fifo(const char *path) {
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
}

static void special_files_are_refused_promptly(void **state) {
    (void)state;
    /* Before the fix each of these blocked in open() forever: the alarm turns a hang into a failure. */
    alarm(120);
    char fifo[700];
    snprintf(fifo, sizeof fifo, "%s/fifo", cache_dir);
    make_fifo(fifo);
    char *data = NULL;
    size_t size = 0;
    TH_ASSERT_STATUS(tsr_read_file(fifo, &data, &size), TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "FIFO");
    assert_null(data);
    TH_ASSERT_STATUS(tsr_read_file(cache_dir, &data, &size), TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "directory");
    TH_ASSERT_STATUS(tsr_read_file("/dev/null", &data, &size), TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "character device");
    struct cJSON *root = NULL;
    TH_ASSERT_STATUS(tsr_read_json(fifo, "report", &root), TSR_ERR_IO);
    assert_null(root);

    /* As the tuning database: the public import and export refuse it, and ops run with a warning. */
    size_t merged = 0;
    char db[700];
    snprintf(db, sizeof db, "%s/db.json", cache_dir);
    TH_ASSERT_STATUS(tsr_tuning_db_import(db, fifo, &merged), TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "FIFO");
    TH_ASSERT_STATUS(tsr_tuning_db_export(fifo, db), TSR_ERR_IO);
    char *saved_db = getenv("TSR_TUNING_DB") ? strdup(getenv("TSR_TUNING_DB")) : NULL;
    setenv("TSR_TUNING_DB", fifo, 1);
    tsr_device *dev = th_open_device();
    TH_ASSERT_OK(small_gemm(dev));
    TH_ASSERT_CONTAINS(tsr_last_warning(), "FIFO");
    tsr_device_close(dev);
    if (saved_db) setenv("TSR_TUNING_DB", saved_db, 1);
    else unsetenv("TSR_TUNING_DB");
    free(saved_db);

    /* As TSR_KERNEL_DIR/gemm.cl. */
    char kdir[700], kfile[800];
    snprintf(kdir, sizeof kdir, "%s/kernels", cache_dir);
    assert_int_equal(mkdir(kdir, 0700), 0);
    snprintf(kfile, sizeof kfile, "%s/gemm.cl", kdir);
    make_fifo(kfile);
    setenv("TSR_KERNEL_DIR", kdir, 1);
    dev = th_open_device();
    TH_ASSERT_STATUS(small_gemm(dev), TSR_ERR_IO);
    TH_ASSERT_CONTAINS(tsr_last_error(), "gemm.cl");
    TH_ASSERT_CONTAINS(tsr_last_error(), "FIFO");
    tsr_device_close(dev);
    unsetenv("TSR_KERNEL_DIR");

    /* As a cache entry: rejected and replaced by a real one. */
    remove_entries(cache_dir);
    char entry[1024];
    int salt = cache_one_entry(entry, sizeof entry);
    make_fifo(entry);
    dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, salt));
    TH_ASSERT_CONTAINS(tsr_last_warning(), "rejected");
    TH_ASSERT_CONTAINS(tsr_last_warning(), "FIFO");
    assert_int_equal(cache_info(dev).disk_rejects, 1);
    tsr_device_close(dev);
    struct stat st;
    assert_int_equal(lstat(entry, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    alarm(0);
}

/* ---- temporaries of killed writers ---- */

/* The CLI next to this test in the build tree. */
static void cli_path(char *out, size_t size) {
    char exe[800];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    snprintf(out, size, "%s/../tools/tessera", dirname(exe));
    assert_int_equal(access(out, X_OK), 0);
}

static int run_cli(char *const argv[]) {
    pid_t pid;
    posix_spawn_file_actions_t quiet; /* keep the CLI's output out of the TAP stream */
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    assert_int_equal(posix_spawn(&pid, argv[0], &quiet, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&quiet);
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    return WEXITSTATUS(ws);
}

static void touch_file(const char *dir, const char *name, time_t age) {
    char path[900];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    th_write_file(path, "partial", 7);
    struct timeval tv[2];
    gettimeofday(&tv[0], NULL);
    tv[0].tv_sec -= age;
    tv[1] = tv[0];
    assert_int_equal(utimes(path, tv), 0);
}

static bool exists_in(const char *dir, const char *name) {
    char path[900];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    return lstat(path, &st) == 0;
}

static void stale_temporaries_are_cleaned(void **state) {
    (void)state;
    static const char stale[] = "0123456789abcdef0123456789abcdef.bin.tmp.4242.7";
    static const char fresh[] = "fedcba9876543210fedcba9876543210.bin.tmp.4243.0";
    static const char unrelated[] = "notes.tmp.txt";
    touch_file(cache_dir, stale, 3600);
    touch_file(cache_dir, fresh, 5);
    touch_file(cache_dir, unrelated, 3600);
    /* The next write into the directory removes the stale one only (a fresh one may be a live writer's). */
    tsr_device *dev = th_open_device();
    TH_ASSERT_OK(build_and_run(dev, run_salt()));
    assert_int_equal(cache_info(dev).builds, 1);
    tsr_device_close(dev);
    assert_false(exists_in(cache_dir, stale));
    assert_true(exists_in(cache_dir, fresh));
    assert_true(exists_in(cache_dir, unrelated));

    /* `tessera cache` lists without opening entries (a FIFO named like one must not hang it)... */
    char cli[900];
    cli_path(cli, sizeof cli);
    static const char fifo_entry[] = "00000000000000000000000000000000.bin";
    char fifo[900];
    snprintf(fifo, sizeof fifo, "%s/%s", cache_dir, fifo_entry);
    make_fifo(fifo);
    alarm(120);
    char *list[] = {cli, (char *)"cache", NULL};
    assert_int_equal(run_cli(list), 0);
    /* ...and `tessera cache --clear` removes entries and temporaries, nothing else. */
    char *clear[] = {cli, (char *)"cache", (char *)"--clear", NULL};
    assert_int_equal(run_cli(clear), 0);
    alarm(0);
    assert_false(exists_in(cache_dir, fresh));
    assert_false(exists_in(cache_dir, fifo_entry));
    assert_true(exists_in(cache_dir, unrelated));
    int entries, temps;
    count_files(cache_dir, &entries, &temps, NULL, 0);
    assert_int_equal(entries, 0);
    assert_int_equal(temps, 1); /* notes.tmp.txt: not a temporary's name, kept */
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--child-build") == 0) return child_build(argv[2], atoi(argv[3]));
    if (peak_add_source() != TSR_SUCCESS) return fprintf(stderr, "peak_add_source: %s\n", tsr_last_error()), 1;
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
        cmocka_unit_test_setup_teardown(two_threads_build_one_program, setup, teardown),
        cmocka_unit_test_setup_teardown(compile_does_not_hold_the_device_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(kernel_dir_is_read_at_open, setup, teardown),
        cmocka_unit_test_setup_teardown(build_errors_carry_the_log, setup, teardown),
        cmocka_unit_test_setup_teardown(kernel_dir_override, setup, teardown),
        cmocka_unit_test_setup_teardown(kernel_dir_missing_files_are_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(op_hash_covers_every_source, setup, teardown),
        cmocka_unit_test_setup_teardown(unsafe_cache_directory_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(created_cache_directory_is_private, setup, teardown),
        cmocka_unit_test_setup_teardown(unsafe_entries_are_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(wrong_kernels_entry_is_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(forged_entry_heals, setup, teardown),
        cmocka_unit_test_setup_teardown(forged_ahead_of_time_binary_is_named, setup, teardown),
        cmocka_unit_test_setup_teardown(special_files_are_refused_promptly, setup, teardown),
        cmocka_unit_test_setup_teardown(stale_temporaries_are_cleaned, setup, teardown),
        cmocka_unit_test_setup_teardown(offline_device_without_binaries, setup, teardown),
        cmocka_unit_test_setup_teardown(offline_device_loads_prebuilt_binaries, setup, teardown),
    };
    return TH_RUN(tests);
}
