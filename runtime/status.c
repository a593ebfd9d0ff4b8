/* Status names and the thread-local error and warning messages. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* Large enough for a typical build log; longer logs are truncated with a marker. */
#define TSR_ERROR_CAP 16384
#define TSR_WARNING_CAP 4096

static _Thread_local char last_error[TSR_ERROR_CAP];
static _Thread_local char last_warning[TSR_WARNING_CAP];

/* Process-wide: warnings are per call and per thread, a front end wants all of them. */
static pthread_mutex_t warning_lock = PTHREAD_MUTEX_INITIALIZER;
static tsr_warning_handler warning_handler; /* with warning_user: read and written as a pair */
static void *warning_user;

void tsr_set_warning_handler(tsr_warning_handler handler, void *user) {
    pthread_mutex_lock(&warning_lock);
    warning_handler = handler;
    warning_user = user;
    pthread_mutex_unlock(&warning_lock);
}

const char *tsr_status_str(tsr_status status) {
    switch (status) {
    case TSR_SUCCESS: return "TSR_SUCCESS";
    case TSR_ERR_INVALID_ARG: return "TSR_ERR_INVALID_ARG";
    case TSR_ERR_NO_PLATFORM: return "TSR_ERR_NO_PLATFORM";
    case TSR_ERR_NO_DEVICE: return "TSR_ERR_NO_DEVICE";
    case TSR_ERR_OUT_OF_MEMORY: return "TSR_ERR_OUT_OF_MEMORY";
    case TSR_ERR_OPENCL: return "TSR_ERR_OPENCL";
    case TSR_ERR_BUILD: return "TSR_ERR_BUILD";
    case TSR_ERR_NO_BINARY: return "TSR_ERR_NO_BINARY";
    case TSR_ERR_IO: return "TSR_ERR_IO";
    case TSR_ERR_CORRUPT: return "TSR_ERR_CORRUPT";
    case TSR_ERR_UNSUPPORTED: return "TSR_ERR_UNSUPPORTED";
    case TSR_ERR_BUFFER_TOO_SMALL: return "TSR_ERR_BUFFER_TOO_SMALL";
    case TSR_ERR_OVERFLOW: return "TSR_ERR_OVERFLOW";
    case TSR_ERR_NOT_FOUND: return "TSR_ERR_NOT_FOUND";
    }
    return "TSR_ERR_UNKNOWN";
}

const char *tsr_last_error(void) { return last_error; }
const char *tsr_last_warning(void) { return last_warning; }

void tsr_clear_error(void) { last_error[0] = '\0'; }

void tsr_clear_diagnostics(void) {
    last_error[0] = '\0';
    last_warning[0] = '\0';
}

static void append_v(char *buf, size_t cap, const char *fmt, va_list ap) {
    size_t used = strlen(buf);
    if (used + 1 >= cap) return;
    int n = vsnprintf(buf + used, cap - used, fmt, ap);
    if (n >= 0 && (size_t)n >= cap - used) {
        static const char marker[] = "\n...(truncated)";
        memcpy(buf + cap - sizeof marker, marker, sizeof marker);
    }
}

static tsr_status fail_v(tsr_status status, const char *fmt, va_list ap) {
    last_error[0] = '\0';
    append_v(last_error, sizeof last_error, fmt, ap);
    return status;
}

tsr_status tsr_fail(tsr_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fail_v(status, fmt, ap);
    va_end(ap);
    return status;
}

void tsr_error_append(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    append_v(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

void tsr_warn(const char *fmt, ...) {
    va_list ap;
    /* Keep earlier warnings of the same call: several things can degrade at once. */
    if (last_warning[0] != '\0') {
        strncat(last_warning, "; ", sizeof last_warning - strlen(last_warning) - 1);
    }
    va_start(ap, fmt);
    append_v(last_warning, sizeof last_warning, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&warning_lock);
    tsr_warning_handler handler = warning_handler;
    void *user = warning_user;
    pthread_mutex_unlock(&warning_lock);
    if (handler) {
        /* This warning alone (possibly truncated), not the ones joined before it. */
        char one[TSR_WARNING_CAP];
        va_start(ap, fmt);
        vsnprintf(one, sizeof one, fmt, ap);
        va_end(ap);
        handler(one, user);
    }
}

tsr_status tsr_fail_cl(cl_int err, const char *what, const char *file, int line) {
    tsr_status status = (err == CL_OUT_OF_HOST_MEMORY || err == CL_MEM_OBJECT_ALLOCATION_FAILURE)
                            ? TSR_ERR_OUT_OF_MEMORY
                            : TSR_ERR_OPENCL;
    return tsr_fail(status, "%s failed with %s (%d) [%s:%d]", what, tsr_cl_error_name(err), (int)err,
                    file, line);
}

const char *tsr_cl_error_name(cl_int err) {
    switch (err) {
#define E(x) case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_IMAGE_FORMAT_MISMATCH)
    E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE)
    E(CL_DEVICE_PARTITION_FAILED) E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE)
    E(CL_INVALID_CONTEXT) E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE)
    E(CL_INVALID_HOST_PTR) E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    E(CL_INVALID_IMAGE_SIZE) E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS)
    E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME)
    E(CL_INVALID_KERNEL_DEFINITION) E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX)
    E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS)
    E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE)
    E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST) E(CL_INVALID_EVENT)
    E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT) E(CL_INVALID_BUFFER_SIZE)
    E(CL_INVALID_MIP_LEVEL) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
    E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS) E(CL_INVALID_LINKER_OPTIONS)
    E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    }
    return "CL_UNKNOWN_ERROR";
}

/* ---- the public face of tsr_fail and tsr_fail_cl, for libraries built on tessera ---- */

tsr_status tsr_set_error(tsr_status status, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    fail_v(status, format, ap);
    va_end(ap);
    return status;
}

tsr_status tsr_set_cl_error(cl_int error, const char *what, const char *file, int line) {
    return tsr_fail_cl(error, what, file, line);
}

