/* Device discovery and selection. The ICD environment is chosen by meson per run
 * (TSR_TEST_MODE): the system's platforms, PoCL + Oclgrind, no platform, or a
 * platform without devices. */
#define _GNU_SOURCE /* cpu_set_t, sched_setaffinity */
#include "harness.h"

#include <cjson/cJSON.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *mode(void) {
    const char *m = getenv("TSR_TEST_MODE");
    return m ? m : "system";
}

/* ---- the system's platforms (PoCL) ---- */

static void discovers_the_pocl_cpu(void **state) {
    (void)state;
    tsr_device_info *infos = NULL;
    size_t n = 0;
    TH_ASSERT_OK(tsr_discover(&infos, &n));
    assert_true(n >= 1);
    int cpus = 0;
    for (size_t i = 0; i < n; ++i) {
        const tsr_device_info *d = &infos[i];
        assert_true(d->name[0] != '\0');
        assert_true(d->platform_name[0] != '\0');
        assert_true(d->compute_units >= 1);
        assert_true(d->global_mem_bytes > 0);
        assert_true(d->max_work_group_size >= 1);
        assert_true(d->max_work_item_dims >= 1);
        assert_true(strncmp(d->opencl_c_version, "OpenCL C", 8) == 0);
        if (d->type == TSR_DEVICE_CPU && tsr_contains_nocase(d->platform_name, "portable computing")) {
            ++cpus;
            assert_true(d->compiler_available);
            assert_true(d->preferred_vector_width[4] >= 1);
        }
    }
    assert_true(cpus >= 1);
    tsr_free(infos);
}

static cJSON *discover_json(void) {
    char *text = NULL;
    TH_ASSERT_OK(tsr_discover_json(&text));
    cJSON *arr = cJSON_Parse(text);
    tsr_free(text);
    assert_non_null(arr);
    assert_true(cJSON_IsArray(arr));
    return arr;
}

static void json_has_every_field(void **state) {
    (void)state;
    cJSON *arr = discover_json();
    assert_true(cJSON_GetArraySize(arr) >= 1);
    static const char *const fields[] = {"selector", "type", "name", "vendor", "platform_name", "platform_version",
                                         "driver_version", "opencl_c_version", "compute_units", "max_clock_mhz",
                                         "global_mem_bytes", "local_mem_bytes", "max_work_group_size",
                                         "max_work_item_sizes", "preferred_vector_width", "native_vector_width",
                                         "fp16", "fp64", "compiler_available"};
    cJSON *dev;
    cJSON_ArrayForEach(dev, arr) {
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; ++f)
            if (!cJSON_GetObjectItemCaseSensitive(dev, fields[f])) fail_msg("JSON device lacks '%s'", fields[f]);
        assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(dev, "preferred_vector_width"), "float"));
    }
    cJSON_Delete(arr);
}

static void open_and_check(const char *selector, tsr_device_type expected_type) {
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(selector, &dev);
    if (st != TSR_SUCCESS) fail_msg("selector '%s': %s: %s", selector, tsr_status_str(st), tsr_last_error());
    assert_int_equal(tsr_device_get_info(dev)->type, expected_type);
    assert_non_null(tsr_device_context(dev));
    assert_non_null(tsr_device_queue(dev));
    assert_non_null(tsr_device_id(dev));
    TH_ASSERT_CONTAINS(tsr_device_fingerprint(dev), tsr_device_get_info(dev)->name);
    tsr_device_close(dev);
}

static void good_selectors(void **state) {
    (void)state;
    unsetenv("TSR_DEVICE");
    open_and_check("cpu", TSR_DEVICE_CPU);
    open_and_check("CPU", TSR_DEVICE_CPU);
    open_and_check("  cpu ", TSR_DEVICE_CPU);
    open_and_check("0:0", TSR_DEVICE_CPU);
    open_and_check("pthread", TSR_DEVICE_CPU);          /* device name substring */
    open_and_check("PORTABLE computing", TSR_DEVICE_CPU); /* platform name, any case */
    open_and_check(NULL, TSR_DEVICE_CPU);               /* the default: no GPU here, so the CPU */
    open_and_check("", TSR_DEVICE_CPU);
    open_and_check("default", TSR_DEVICE_CPU);
}

static void bad_selectors(void **state) {
    (void)state;
    unsetenv("TSR_DEVICE");
    tsr_device *dev = (tsr_device *)0x1;
    TH_ASSERT_STATUS(tsr_device_open("no-such-device-xyz", &dev), TSR_ERR_NO_DEVICE);
    assert_null(dev);
    TH_ASSERT_CONTAINS(tsr_last_error(), "no-such-device-xyz");
    TH_ASSERT_CONTAINS(tsr_last_error(), "available devices");
    TH_ASSERT_CONTAINS(tsr_last_error(), "0:0");
    TH_ASSERT_STATUS(tsr_device_open("gpu", &dev), TSR_ERR_NO_DEVICE); /* no GPU on the test machines */
    TH_ASSERT_CONTAINS(tsr_last_error(), "no gpu device");
    TH_ASSERT_STATUS(tsr_device_open("accelerator", &dev), TSR_ERR_NO_DEVICE);
    TH_ASSERT_STATUS(tsr_device_open("9:0", &dev), TSR_ERR_NO_DEVICE);
    TH_ASSERT_CONTAINS(tsr_last_error(), "platform 9, device 0");
    TH_ASSERT_STATUS(tsr_device_open("0:99", &dev), TSR_ERR_NO_DEVICE);
    TH_ASSERT_STATUS(tsr_device_open("0:", &dev), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "malformed");
    TH_ASSERT_STATUS(tsr_device_open("0:1:2", &dev), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_device_open("1:x", &dev), TSR_ERR_INVALID_ARG);
    /* Indices past LONG_MAX were clamped by strtol; now they are malformed. */
    TH_ASSERT_STATUS(tsr_device_open("99999999999999999999999:0", &dev), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "malformed");
    /* A selector longer than the buffer was cut, and "cpu<spaces>x" became "cpu": refuse it whole. */
    char long_sel[TSR_INFO_STR + 64];
    memset(long_sel, ' ', sizeof long_sel);
    memcpy(long_sel, "cpu", 3);
    long_sel[sizeof long_sel - 2] = 'x';
    long_sel[sizeof long_sel - 1] = '\0';
    TH_ASSERT_STATUS(tsr_device_open(long_sel, &dev), TSR_ERR_INVALID_ARG);
    assert_null(dev);
    TH_ASSERT_CONTAINS(tsr_last_error(), "characters long");
}

static void selector_from_environment(void **state) {
    (void)state;
    setenv("TSR_DEVICE", "no-such-device-xyz", 1);
    tsr_device *dev = NULL;
    TH_ASSERT_STATUS(tsr_device_open(NULL, &dev), TSR_ERR_NO_DEVICE);
    TH_ASSERT_CONTAINS(tsr_last_error(), "TSR_DEVICE");
    setenv("TSR_DEVICE", "cpu", 1);
    TH_ASSERT_OK(tsr_device_open(NULL, &dev));
    tsr_device_close(dev);
    /* An explicit selector wins over the environment. */
    setenv("TSR_DEVICE", "no-such-device-xyz", 1);
    TH_ASSERT_OK(tsr_device_open("cpu", &dev));
    tsr_device_close(dev);
    unsetenv("TSR_DEVICE");
}

static void wrap_an_existing_context(void **state) {
    (void)state;
    tsr_device *owner = th_open_device();
    cl_context ctx = tsr_device_context(owner);
    cl_device_id id = tsr_device_id(owner);
    tsr_device *wrapped = NULL;
    TH_ASSERT_OK(tsr_device_wrap(ctx, id, tsr_device_queue(owner), &wrapped));
    assert_ptr_equal(tsr_device_queue(wrapped), tsr_device_queue(owner));
    assert_string_equal(tsr_device_get_info(wrapped)->name, tsr_device_get_info(owner)->name);
    tsr_device_close(wrapped);
    /* Without a queue tessera makes its own. */
    TH_ASSERT_OK(tsr_device_wrap(ctx, id, NULL, &wrapped));
    assert_true(tsr_device_queue(wrapped) != tsr_device_queue(owner));
    /* A queue of another context is refused. */
    tsr_device *other = th_open_device();
    tsr_device *bad = NULL;
    TH_ASSERT_STATUS(tsr_device_wrap(ctx, id, tsr_device_queue(other), &bad), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "another context");
    assert_null(bad);
    tsr_device_close(other);
    tsr_device_close(wrapped);
    /* The owner's handles survive the wrapper. */
    char summary[256];
    TH_ASSERT_OK(tsr_run_demo(owner, "gemm", summary, sizeof summary));
    tsr_device_close(owner);
}

/* ---- PoCL and Oclgrind as two platforms ---- */

static void two_platforms(void **state) {
    (void)state;
    tsr_device_info *infos = NULL;
    size_t n = 0;
    TH_ASSERT_OK(tsr_discover(&infos, &n));
    int pocl = -1, oclgrind = -1;
    for (size_t i = 0; i < n; ++i) {
        if (tsr_contains_nocase(infos[i].platform_name, "oclgrind")) oclgrind = (int)i;
        if (tsr_contains_nocase(infos[i].platform_name, "portable computing")) pocl = (int)i;
    }
    if (pocl < 0 || oclgrind < 0) fail_msg("expected PoCL and Oclgrind among %zu devices", n);
    assert_int_not_equal(infos[pocl].platform_index, infos[oclgrind].platform_index);
    char sel[32];
    snprintf(sel, sizeof sel, "%d:%d", infos[oclgrind].platform_index, infos[oclgrind].device_index);
    tsr_device *dev = NULL;
    TH_ASSERT_OK(tsr_device_open(sel, &dev));
    TH_ASSERT_CONTAINS(tsr_device_get_info(dev)->platform_name, "Oclgrind");
    tsr_device_close(dev);
    TH_ASSERT_OK(tsr_device_open("oclgrind", &dev));
    TH_ASSERT_CONTAINS(tsr_device_get_info(dev)->platform_name, "Oclgrind");
    tsr_device_close(dev);
    TH_ASSERT_OK(tsr_device_open("cpu", &dev));
    TH_ASSERT_CONTAINS(tsr_device_get_info(dev)->platform_name, "Portable");
    tsr_device_close(dev);
    cJSON *arr = discover_json();
    assert_int_equal(cJSON_GetArraySize(arr), (int)n);
    cJSON_Delete(arr);
    tsr_free(infos);
}

/* ---- no platform at all ---- */

static void no_platform(void **state) {
    (void)state;
    tsr_device_info *infos = (tsr_device_info *)0x1;
    size_t n = 99;
    TH_ASSERT_STATUS(tsr_discover(&infos, &n), TSR_ERR_NO_PLATFORM);
    assert_null(infos);
    assert_int_equal(n, 0);
    TH_ASSERT_CONTAINS(tsr_last_error(), "no OpenCL platform");
    char *json = NULL;
    TH_ASSERT_STATUS(tsr_discover_json(&json), TSR_ERR_NO_PLATFORM);
    assert_null(json);
    tsr_device *dev = NULL;
    TH_ASSERT_STATUS(tsr_device_open(NULL, &dev), TSR_ERR_NO_PLATFORM);
    TH_ASSERT_STATUS(tsr_device_open("cpu", &dev), TSR_ERR_NO_PLATFORM);
    assert_null(dev);
}

/* ---- where PoCL's worker threads run (POCL_AFFINITY) ---- */

static void pin_decision_table(void **state) {
    (void)state;
    const tsr_cpu_pin_facts all = {.online_cpus = 4, .allowed_known = true, .allowed_cpus = 4, .allowed_from_zero = true};
    bool pin = false;
    assert_null(tsr_cpu_pin_decide(&all, &pin));
    assert_true(pin);
    struct {
        tsr_cpu_pin_facts facts;
        const char *why;
    } refused[] = {
        {{.pocl_affinity = "0", .online_cpus = 4, .allowed_known = true, .allowed_cpus = 4, .allowed_from_zero = true},
         "POCL_AFFINITY is set"},
        {{.pocl_affinity = "1", .online_cpus = 4, .allowed_known = true, .allowed_cpus = 4, .allowed_from_zero = true},
         "POCL_AFFINITY is set"},
        {{.pocl_max_threads = "2", .online_cpus = 4, .allowed_known = true, .allowed_cpus = 4, .allowed_from_zero = true},
         "POCL_MAX_PTHREAD_COUNT"},
        {{.pocl_max_cu = "8", .online_cpus = 4, .allowed_known = true, .allowed_cpus = 4, .allowed_from_zero = true},
         "POCL_CPU_MAX_CU_COUNT"},
        {{.online_cpus = 1, .allowed_known = true, .allowed_cpus = 1, .allowed_from_zero = true}, "one CPU"},
        {{.online_cpus = 4}, "cannot be read"},
        {{.online_cpus = 4, .allowed_known = true, .allowed_cpus = 2, .allowed_from_zero = true}, "only some CPUs"},
        {{.online_cpus = 4, .allowed_known = true, .allowed_cpus = 4, .allowed_from_zero = false}, "only some CPUs"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; ++i) {
        pin = true;
        const char *why = tsr_cpu_pin_decide(&refused[i].facts, &pin);
        assert_false(pin);
        assert_non_null(why);
        TH_ASSERT_CONTAINS(why, refused[i].why);
    }
}

/* The PoCL CPU device's info through a context made here and tsr_device_wrap (OpenCL started
 * before tessera's discovery); false when there is none or a step failed. */
static bool wrapped_pocl_info(tsr_device_info *out) {
    cl_platform_id platforms[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, platforms, &np) != CL_SUCCESS) return false;
    for (cl_uint p = 0; p < np && p < 16; ++p) {
        char name[256] = "";
        clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof name, name, NULL);
        cl_device_id id;
        if (!strstr(name, "Portable Computing Language") ||
            clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_CPU, 1, &id, NULL) != CL_SUCCESS)
            continue;
        cl_int err = CL_SUCCESS;
        cl_context ctx = clCreateContext(NULL, 1, &id, NULL, NULL, &err);
        tsr_device *dev = NULL;
        if (err != CL_SUCCESS || tsr_device_wrap(ctx, id, NULL, &dev) != TSR_SUCCESS) return false;
        *out = *tsr_device_get_info(dev);
        tsr_device_close(dev);
        clReleaseContext(ctx);
        return true;
    }
    return false;
}

/* The PoCL CPU device's worker_threads field (and POCL_AFFINITY) in a child process that starts
 * OpenCL with `cpus` CPUs allowed (0: all; -1: all, OpenCL started by the child itself and the
 * device wrapped) and POCL_AFFINITY as `user` (NULL: unset). */
static void pin_in_child(int cpus, const char *user, const char *expect, const char *expect_env) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        unsetenv("POCL_MAX_PTHREAD_COUNT");
        unsetenv("POCL_CPU_MAX_CU_COUNT");
        if (user) setenv("POCL_AFFINITY", user, 1);
        else unsetenv("POCL_AFFINITY");
        if (cpus > 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            for (int i = 0; i < cpus; ++i) CPU_SET(i, &set);
            if (sched_setaffinity(0, sizeof set, &set) != 0) _exit(3);
        }
        tsr_device_info *infos = NULL, wrapped;
        size_t n = 0;
        if (cpus < 0) {
            if (!wrapped_pocl_info(&wrapped)) _exit(9);
            infos = &wrapped, n = 1;
        } else if (tsr_discover(&infos, &n) != TSR_SUCCESS) {
            _exit(4);
        }
        int seen = 0;
        for (size_t i = 0; i < n; ++i) {
            if (infos[i].type != TSR_DEVICE_CPU || !strstr(infos[i].platform_name, "Portable Computing Language")) {
                if (infos[i].worker_threads[0]) _exit(5); /* other devices say nothing */
                continue;
            }
            ++seen;
            for (const char *c = infos[i].worker_threads; *c; ++c)
                if (*c < 0x20 || *c == 0x7f) _exit(10); /* never the environment's control characters */
            if (!strstr(infos[i].worker_threads, expect)) {
                fprintf(stderr, "worker_threads '%s' lacks '%s'\n", infos[i].worker_threads, expect);
                _exit(6);
            }
        }
        const char *env = getenv("POCL_AFFINITY");
        if (expect_env ? !env || strcmp(env, expect_env) != 0 : env != NULL) _exit(7);
        if (cpus >= 0) tsr_free(infos);
        _exit(seen ? 0 : 8);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void pins_pocl_workers_when_safe(void **state) {
    (void)state;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    bool everything = online >= 2 && CPU_COUNT(&set) == online;
    for (long i = 0; everything && i < online; ++i) everything = CPU_ISSET(i, &set);
    if (everything) pin_in_child(0, NULL, "POCL_AFFINITY=1, set by tessera", "1");
    else pin_in_child(0, NULL, "placed by the OS scheduler", NULL);
    /* the user's value wins, either way */
    pin_in_child(0, "0", "placed by the OS scheduler (POCL_AFFINITY=0 from the environment)", "0");
    pin_in_child(0, "1", "POCL_AFFINITY=1 from the environment", "1");
    /* a process held to fewer CPUs (taskset): PoCL's pinning would escape the mask */
    if (everything) pin_in_child(1, NULL, "only some CPUs", NULL);
    /* a value with control characters is described, never echoed */
    pin_in_child(0, "1\n\033[31mx", "POCL_AFFINITY set to 8 bytes not shown", "1\n\033[31mx");
    /* OpenCL started by the caller, the device wrapped: too late to set, and said so */
    pin_in_child(-1, NULL, "OpenCL was started before tessera's discovery", NULL);
}

/* ---- a platform without devices (POCL_DEVICES=none) ---- */

static void empty_platform(void **state) {
    (void)state;
    tsr_device_info *infos = NULL;
    size_t n = 99;
    TH_ASSERT_OK(tsr_discover(&infos, &n));
    assert_int_equal(n, 0);
    tsr_free(infos);
    tsr_device *dev = NULL;
    TH_ASSERT_STATUS(tsr_device_open(NULL, &dev), TSR_ERR_NO_DEVICE);
    TH_ASSERT_CONTAINS(tsr_last_error(), "platforms without devices: 'Portable Computing Language'");
    TH_ASSERT_STATUS(tsr_device_open("0:0", &dev), TSR_ERR_NO_DEVICE);
    assert_null(dev);
}

int main(void) {
    if (strcmp(mode(), "two-platforms") == 0) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(two_platforms), cmocka_unit_test(json_has_every_field)};
        return TH_RUN(tests);
    }
    if (strcmp(mode(), "no-platform") == 0) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(no_platform)};
        return TH_RUN(tests);
    }
    if (strcmp(mode(), "empty-platform") == 0) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(empty_platform)};
        return TH_RUN(tests);
    }
    /* pins_pocl_workers_when_safe first: its children fork before this process starts OpenCL */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pins_pocl_workers_when_safe), cmocka_unit_test(pin_decision_table),
        cmocka_unit_test(discovers_the_pocl_cpu), cmocka_unit_test(json_has_every_field),
        cmocka_unit_test(good_selectors),         cmocka_unit_test(bad_selectors),
        cmocka_unit_test(selector_from_environment), cmocka_unit_test(wrap_an_existing_context),
    };
    return TH_RUN(tests);
}
