/* Status names, thread-local error messages, argument checks of the basic API. */
#include "harness.h"

#include <pthread.h>
#include <string.h>

static void status_names(void **state) {
    (void)state;
    assert_string_equal(tsr_status_str(TSR_SUCCESS), "TSR_SUCCESS");
    assert_string_equal(tsr_status_str(TSR_ERR_INVALID_ARG), "TSR_ERR_INVALID_ARG");
    assert_string_equal(tsr_status_str(TSR_ERR_NO_BINARY), "TSR_ERR_NO_BINARY");
    assert_string_equal(tsr_status_str((tsr_status)-999), "TSR_ERR_UNKNOWN");
    for (int s = 0; s >= TSR_ERR_NOT_FOUND; --s) assert_null(strstr(tsr_status_str((tsr_status)s), "UNKNOWN"));
    assert_string_equal(tsr_cl_error_name(CL_BUILD_PROGRAM_FAILURE), "CL_BUILD_PROGRAM_FAILURE");
    assert_string_equal(tsr_cl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
}

static void *fail_in_thread(void *arg) {
    (void)arg;
    tsr_fail(TSR_ERR_IO, "error from the other thread");
    return NULL;
}

static void errors_are_thread_local(void **state) {
    (void)state;
    tsr_fail(TSR_ERR_INVALID_ARG, "error from the main thread %d", 42);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fail_in_thread, NULL), 0);
    pthread_join(t, NULL);
    assert_string_equal(tsr_last_error(), "error from the main thread 42");
}

static void long_messages_are_truncated_safely(void **state) {
    (void)state;
    char big[40000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    tsr_fail(TSR_ERR_BUILD, "log: %s", big);
    size_t len = strlen(tsr_last_error());
    assert_true(len < 20000);
    TH_ASSERT_CONTAINS(tsr_last_error(), "(truncated)");
}

static void null_arguments_are_rejected(void **state) {
    (void)state;
    TH_ASSERT_STATUS(tsr_discover(NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_discover_json(NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_device_open("cpu", NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "device must not be NULL");
    tsr_device *dev = NULL;
    TH_ASSERT_STATUS(tsr_device_wrap(NULL, NULL, NULL, &dev), TSR_ERR_INVALID_ARG);
    assert_null(dev);
    TH_ASSERT_STATUS(tsr_cache_get_info(NULL, NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_get_kernel(NULL, "gemm", "", "gemm", NULL), TSR_ERR_INVALID_ARG);
    TH_ASSERT_STATUS(tsr_build_binaries(NULL, "/tmp", NULL), TSR_ERR_INVALID_ARG);
    char summary[8];
    TH_ASSERT_STATUS(tsr_run_demo(NULL, "gemm", summary, sizeof summary), TSR_ERR_INVALID_ARG);
    tsr_device_close(NULL); /* a no-op, like free(NULL) */
    tsr_free(NULL);
    assert_null(tsr_device_get_info(NULL));
}

static void success_clears_the_last_error(void **state) {
    (void)state;
    tsr_fail(TSR_ERR_IO, "stale");
    tsr_device_info *infos = NULL;
    size_t n = 0;
    TH_ASSERT_OK(tsr_discover(&infos, &n));
    assert_string_equal(tsr_last_error(), "");
    tsr_free(infos);
}

static void embedded_sources_and_ops_are_listed(void **state) {
    (void)state;
    const char *const *src = tsr_kernel_source_names();
    assert_non_null(src[0]);
    int found = 0;
    for (; *src; ++src) found += strcmp(*src, "gemm") == 0;
    assert_int_equal(found, 1);
    const char *const *ops = tsr_op_names();
    assert_string_equal(ops[0], "gemm");
}

/* A source a layer above the runtime adds (the report's peak.cl) is found by name like an
 * embedded one; adding it again is a no-op; a taken name or other text is refused. */
static void added_kernel_sources(void **state) {
    (void)state;
    static const char text[] = "__kernel void zz_added(__global float *x) { x[0] = 1.0f; }\n";
    static const char other[] = "__kernel void zz_other(__global float *x) { x[0] = 2.0f; }\n";
    char *owned = NULL;
    const char *got = NULL;
    size_t length = 0;
    assert_int_equal(tsr_load_kernel_source(NULL, "zz_added", &owned, &got, &length), TSR_ERR_NOT_FOUND);
    assert_int_equal(tsr_add_kernel_source("zz_added", text, sizeof text - 1), TSR_SUCCESS);
    assert_int_equal(tsr_add_kernel_source("zz_added", text, sizeof text - 1), TSR_SUCCESS);
    assert_int_equal(tsr_load_kernel_source(NULL, "zz_added", &owned, &got, &length), TSR_SUCCESS);
    assert_null(owned);
    assert_ptr_equal(got, text);
    assert_int_equal(length, sizeof text - 1);
    assert_int_equal(tsr_add_kernel_source("zz_added", other, sizeof other - 1), TSR_ERR_INVALID_ARG);
    assert_non_null(strstr(tsr_last_error(), "other text"));
    assert_int_equal(tsr_add_kernel_source("gemm", other, sizeof other - 1), TSR_ERR_INVALID_ARG);
    assert_non_null(strstr(tsr_last_error(), "libtessera's own"));
    assert_int_equal(tsr_add_kernel_source(NULL, other, 1), TSR_ERR_INVALID_ARG);
    /* Not in the public list of libtessera's own sources. */
    for (const char *const *src = tsr_kernel_source_names(); *src; ++src) assert_string_not_equal(*src, "zz_added");
}

/* The shared checked size: a * b + c, refused with a message when it wraps. */
static void checked_sizes(void **state) {
    (void)state;
    size_t out = 0;
    TH_ASSERT_OK(tsr_size_mad("x", 3, 4, 5, &out));
    assert_int_equal(out, 17);
    TH_ASSERT_OK(tsr_size_mad("x", SIZE_MAX / 4, 4, 3, &out));
    assert_true(out == SIZE_MAX);
    TH_ASSERT_STATUS(tsr_size_mad("the thing", SIZE_MAX / 4 + 1, 4, 0, &out), TSR_ERR_OVERFLOW);
    TH_ASSERT_CONTAINS(tsr_last_error(), "the thing overflows");
    TH_ASSERT_STATUS(tsr_size_mad("x", SIZE_MAX / 4, 4, 4, &out), TSR_ERR_OVERFLOW);
    TH_ASSERT_STATUS(tsr_size_mad("x", 1, SIZE_MAX, 1, &out), TSR_ERR_OVERFLOW);
}

/* A workspace request near SIZE_MAX used to wrap the geometric growth to a few bytes and hand out
 * that tiny buffer as if it held the request. */
static void workspace_growth_never_wraps(void **state) {
    (void)state;
    tsr_device *dev = th_open_device();
    pthread_mutex_lock(&dev->lock);
    cl_mem buf = NULL;
    cl_event wait = NULL;
    const size_t sizes[] = {SIZE_MAX - 8, SIZE_MAX / 5 * 4 + 64, SIZE_MAX};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
        tsr_status st = tsr_workspace_get(dev, TSR_WS_TEMP0, sizes[i], &buf, &wait);
        if (st == TSR_SUCCESS) fail_msg("a %zu-byte workspace was handed out as %zu bytes", sizes[i], dev->workspace[TSR_WS_TEMP0].bytes);
        assert_true(dev->workspace[TSR_WS_TEMP0].bytes == 0 || dev->workspace[TSR_WS_TEMP0].bytes >= sizes[i]);
    }
    TH_ASSERT_OK(tsr_workspace_get(dev, TSR_WS_TEMP0, 1000, &buf, &wait));
    assert_true(dev->workspace[TSR_WS_TEMP0].bytes >= 1000);
    pthread_mutex_unlock(&dev->lock);
    tsr_device_close(dev);
}

/* Driver strings key the tuning database: control characters and bytes that are not UTF-8 are
 * replaced, so a tune never writes a file its own reader would refuse as damaged. */
static void driver_text_is_sanitized(void **state) {
    (void)state;
    char s[] = "Dev\tice\x7f \xe9t\xc3\xa9 \xed\xa0\x80 \xf0\x9f\x98\x80 end\n";
    tsr_text_sanitize(s);
    assert_string_equal(s, "Dev ice  ?t\xc3\xa9 ??? \xf0\x9f\x98\x80 end ");
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = tsr_text_char_length(p);
        assert_true(n > 0);
        p += n;
    }
    assert_int_equal(tsr_text_char_length((const unsigned char *)"\x01"), 0);
    assert_int_equal(tsr_text_char_length((const unsigned char *)"\xc0\xaf"), 0); /* overlong '/' */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_names),
        cmocka_unit_test(errors_are_thread_local),
        cmocka_unit_test(long_messages_are_truncated_safely),
        cmocka_unit_test(null_arguments_are_rejected),
        cmocka_unit_test(success_clears_the_last_error),
        cmocka_unit_test(embedded_sources_and_ops_are_listed),
        cmocka_unit_test(added_kernel_sources),
        cmocka_unit_test(checked_sizes),
        cmocka_unit_test(workspace_growth_never_wraps),
        cmocka_unit_test(driver_text_is_sanitized),
    };
    return TH_RUN(tests);
}
