/* The public header on its own: it compiles without internal headers, and every TSR_API function
 * it declares links against the shared library (hidden visibility would make a declared but
 * unexported function fail the link here). check_header.py checks the converse: every exported
 * function is declared and documented, and this list names every declared one. */
#include <tessera.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

typedef void (*any_fn)(void); /* casts to void (*)(void) are exempt from -Wcast-function-type */
#define FN(name) {#name, (any_fn)name}

static const struct {
    const char *name;
    any_fn fn;
} api[] = {
    FN(tsr_status_str), FN(tsr_last_error), FN(tsr_set_error), FN(tsr_set_cl_error), FN(tsr_last_warning), FN(tsr_set_warning_handler),
    FN(tsr_device_type_str), FN(tsr_discover),
    FN(tsr_discover_json), FN(tsr_icd_problems), FN(tsr_free), FN(tsr_device_open), FN(tsr_device_wrap), FN(tsr_device_close),
    FN(tsr_device_get_info), FN(tsr_device_context), FN(tsr_device_id), FN(tsr_device_queue),
    FN(tsr_device_fingerprint), FN(tsr_cache_get_info), FN(tsr_get_kernel), FN(tsr_kernel_source_names),
    FN(tsr_build_binaries), FN(tsr_build_binaries_typed), FN(tsr_sgemm), FN(tsr_sgemm_strided_batched), FN(tsr_gelu), FN(tsr_gelu_unfused),
    FN(tsr_matmul), FN(tsr_matmul_plan_create), FN(tsr_matmul_execute), FN(tsr_matmul_plan_destroy),
    FN(tsr_matmul_plan_info), FN(tsr_attention), FN(tsr_attention_unfused),
    FN(tsr_attention_unfused_workspace_bytes), FN(tsr_conv2d_output_size), FN(tsr_conv2d_workspace_size),
    FN(tsr_conv2d), FN(tsr_op_names), FN(tsr_run_demo), FN(tsr_config_source_str), FN(tsr_config_lookup),
    FN(tsr_config_override),
    FN(tsr_conv2d_plan), FN(tsr_op_classes), FN(tsr_tune), FN(tsr_tune_serve), FN(tsr_tuning_db_path),
    FN(tsr_tuning_db_import), FN(tsr_tuning_db_export), FN(tsr_dtype_str), FN(tsr_dtype_size), FN(tsr_dtype_parse),
    FN(tsr_convert_host),
    FN(tsr_convert), FN(tsr_buffer_set_constant), FN(tsr_buffer_changed), FN(tsr_layernorm), FN(tsr_embedding), FN(tsr_pool2d_output_size), FN(tsr_pool2d),
    FN(tsr_group_create), FN(tsr_group_destroy), FN(tsr_group_size), FN(tsr_group_set_weights),
    FN(tsr_group_last_stats), FN(tsr_matmul_multi), FN(tsr_attention_multi),
    FN(tsr_graph_begin), FN(tsr_graph_end), FN(tsr_graph_launch), FN(tsr_graph_info), FN(tsr_graph_destroy),
};

static void every_function_links(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof api / sizeof api[0]; ++i)
        if (!api[i].fn) fail_msg("%s has no address", api[i].name);
}

/* A few calls through the shared library, needing no device. */
static void calls_through_the_shared_library(void **state) {
    (void)state;
    assert_string_equal(tsr_status_str(TSR_ERR_OVERFLOW), "TSR_ERR_OVERFLOW");
    assert_string_equal(tsr_device_type_str(TSR_DEVICE_GPU), "GPU");
    assert_non_null(tsr_config_source_str(TSR_CONFIG_TUNED));
    assert_int_equal(tsr_attention_unfused_workspace_bytes(NULL), 0);
    size_t h = 0, w = 0;
    assert_int_equal(tsr_conv2d_output_size(NULL, &h, &w), TSR_ERR_INVALID_ARG);
    assert_true(strlen(tsr_last_error()) > 0);
    tsr_free(NULL);
    tsr_device_close(NULL);
    tsr_matmul_plan_destroy(NULL);
    tsr_matmul_plan *plan = (tsr_matmul_plan *)&h; /* overwritten: NULL on failure */
    assert_int_equal(tsr_matmul_plan_create(NULL, &(tsr_matmul_desc){.m = 1, .n = 1}, &plan), TSR_ERR_INVALID_ARG);
    assert_null(plan);
    assert_int_equal(tsr_matmul(NULL, NULL, NULL, NULL, NULL, NULL, NULL), TSR_ERR_INVALID_ARG);
    assert_int_equal(tsr_matmul_execute(NULL, NULL, NULL, NULL, NULL, NULL), TSR_ERR_INVALID_ARG);
    /* A library built on tessera records its failures as tessera's own. */
    assert_int_equal(tsr_set_error(TSR_ERR_IO, "rank %d: %s", 3, "lost"), TSR_ERR_IO);
    assert_string_equal(tsr_last_error(), "rank 3: lost");
    assert_int_equal(tsr_set_cl_error(CL_OUT_OF_HOST_MEMORY, "clFoo", "x.c", 7), TSR_ERR_OUT_OF_MEMORY);
    assert_string_equal(tsr_last_error(), "clFoo failed with CL_OUT_OF_HOST_MEMORY (-6) [x.c:7]");
    assert_int_equal(tsr_set_cl_error(CL_INVALID_VALUE, "clBar", "y.c", 1), TSR_ERR_OPENCL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_function_links),
        cmocka_unit_test(calls_through_the_shared_library),
    };
    cmocka_set_message_output(CM_OUTPUT_TAP);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
