/* What a device is: its info queried from OpenCL, its type in words, its JSON form. The bottom
 * of the device layer: the tuning database and the resolver use it, and it uses nothing above. */
#include "internal.h"

#include <cjson/cJSON.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tsr_device_type_str(tsr_device_type type) {
    switch (type) {
    case TSR_DEVICE_CPU: return "CPU";
    case TSR_DEVICE_GPU: return "GPU";
    case TSR_DEVICE_ACCELERATOR: return "ACCELERATOR";
    case TSR_DEVICE_CUSTOM: return "CUSTOM";
    case TSR_DEVICE_OTHER: break;
    }
    return "OTHER";
}

static void query_str(cl_device_id d, cl_device_info what, char *out) {
    out[0] = '\0';
    if (clGetDeviceInfo(d, what, TSR_INFO_STR, out, NULL) != CL_SUCCESS) out[0] = '\0';
    out[TSR_INFO_STR - 1] = '\0';
    tsr_text_sanitize(out); /* these strings key the tuning database and fill reports */
}

void tsr_query_platform_str(cl_platform_id p, cl_platform_info what, char *out) {
    out[0] = '\0';
    if (clGetPlatformInfo(p, what, TSR_INFO_STR, out, NULL) != CL_SUCCESS) out[0] = '\0';
    out[TSR_INFO_STR - 1] = '\0';
    tsr_text_sanitize(out);
}

static uint32_t query_uint(cl_device_id d, cl_device_info what) {
    cl_uint v = 0;
    if (clGetDeviceInfo(d, what, sizeof v, &v, NULL) != CL_SUCCESS) v = 0;
    return v;
}

static uint64_t query_ulong(cl_device_id d, cl_device_info what) {
    cl_ulong v = 0;
    if (clGetDeviceInfo(d, what, sizeof v, &v, NULL) != CL_SUCCESS) v = 0;
    return v;
}

static bool query_bool(cl_device_id d, cl_device_info what) {
    cl_bool v = CL_FALSE;
    if (clGetDeviceInfo(d, what, sizeof v, &v, NULL) != CL_SUCCESS) v = CL_FALSE;
    return v == CL_TRUE;
}

static bool has_extension(cl_device_id d, const char *ext) {
    size_t size = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &size) != CL_SUCCESS || size == 0) return false;
    char *buf = malloc(size + 1);
    if (!buf) return false;
    bool found = false;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, size, buf, NULL) == CL_SUCCESS) {
        buf[size] = '\0';
        size_t n = strlen(ext);
        for (char *p = strstr(buf, ext); p; p = strstr(p + 1, ext)) {
            bool starts = p == buf || p[-1] == ' ';
            bool ends = p[n] == '\0' || p[n] == ' ';
            if (starts && ends) { found = true; break; }
        }
    }
    free(buf);
    return found;
}

/* The host processor as it reports itself ("" where this build cannot ask): on x86 CPUID's vendor
 * string and its family and model, extended fields included (AMD's family 0x19 is Zen 3 and Zen 4,
 * told apart by the model; Intel's family 6 by the model). */
void tsr_host_cpu_signature(char *out, size_t size) {
    if (size) out[0] = '\0';
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    char vendor[13];
    memcpy(vendor, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
    vendor[12] = '\0';
    if (a < 1 || !__get_cpuid(1, &a, &b, &c, &d)) return;
    unsigned family = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
    if (family == 0xf) family += (a >> 20) & 0xff;
    if (family == 0x6 || family >= 0xf) model |= ((a >> 16) & 0xf) << 4;
    snprintf(out, size, "%s family %u model %u", vendor, family, model);
    tsr_text_sanitize(out); /* it keys the tuning database beside the OpenCL strings */
#endif
}

tsr_status tsr_query_device_info(cl_platform_id platform, cl_device_id d, tsr_device_info *info) {
    int pi = info->platform_index, di = info->device_index;
    memset(info, 0, sizeof *info);
    info->platform_index = pi;
    info->device_index = di;
    tsr_query_platform_str(platform, CL_PLATFORM_NAME, info->platform_name);
    tsr_query_platform_str(platform, CL_PLATFORM_VENDOR, info->platform_vendor);
    tsr_query_platform_str(platform, CL_PLATFORM_VERSION, info->platform_version);
    query_str(d, CL_DEVICE_NAME, info->name);
    query_str(d, CL_DEVICE_VENDOR, info->vendor);
    query_str(d, CL_DEVICE_VERSION, info->device_version);
    query_str(d, CL_DRIVER_VERSION, info->driver_version);
    query_str(d, CL_DEVICE_OPENCL_C_VERSION, info->opencl_c_version);

    cl_device_type type = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (type & CL_DEVICE_TYPE_GPU) info->type = TSR_DEVICE_GPU;
    else if (type & CL_DEVICE_TYPE_ACCELERATOR) info->type = TSR_DEVICE_ACCELERATOR;
    else if (type & CL_DEVICE_TYPE_CPU) info->type = TSR_DEVICE_CPU;
    else if (type & CL_DEVICE_TYPE_CUSTOM) info->type = TSR_DEVICE_CUSTOM;
    else info->type = TSR_DEVICE_OTHER;

    info->compute_units = query_uint(d, CL_DEVICE_MAX_COMPUTE_UNITS);
    info->max_clock_mhz = query_uint(d, CL_DEVICE_MAX_CLOCK_FREQUENCY);
    info->global_mem_bytes = query_ulong(d, CL_DEVICE_GLOBAL_MEM_SIZE);
    info->max_alloc_bytes = query_ulong(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    info->local_mem_bytes = query_ulong(d, CL_DEVICE_LOCAL_MEM_SIZE);
    cl_device_local_mem_type lmt = CL_GLOBAL;
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_TYPE, sizeof lmt, &lmt, NULL);
    info->local_mem_is_dedicated = lmt == CL_LOCAL;
    size_t wg = 0;
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    info->max_work_group_size = wg;
    info->max_work_item_dims = query_uint(d, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS);
    size_t sizes[16] = {0};
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof sizes, sizes, NULL);
    for (int i = 0; i < 3; ++i) info->max_work_item_sizes[i] = sizes[i];

    static const cl_device_info preferred[7] = {
        CL_DEVICE_PREFERRED_VECTOR_WIDTH_CHAR, CL_DEVICE_PREFERRED_VECTOR_WIDTH_SHORT,
        CL_DEVICE_PREFERRED_VECTOR_WIDTH_INT, CL_DEVICE_PREFERRED_VECTOR_WIDTH_LONG,
        CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE,
        CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF};
    static const cl_device_info native[7] = {
        CL_DEVICE_NATIVE_VECTOR_WIDTH_CHAR, CL_DEVICE_NATIVE_VECTOR_WIDTH_SHORT,
        CL_DEVICE_NATIVE_VECTOR_WIDTH_INT, CL_DEVICE_NATIVE_VECTOR_WIDTH_LONG,
        CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, CL_DEVICE_NATIVE_VECTOR_WIDTH_DOUBLE,
        CL_DEVICE_NATIVE_VECTOR_WIDTH_HALF};
    for (int i = 0; i < 7; ++i) {
        info->preferred_vector_width[i] = query_uint(d, preferred[i]);
        info->native_vector_width[i] = query_uint(d, native[i]);
    }
    info->fp16 = has_extension(d, "cl_khr_fp16");
    cl_device_fp_config fp64 = 0;
    clGetDeviceInfo(d, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, NULL);
    info->fp64 = fp64 != 0 || has_extension(d, "cl_khr_fp64");
    info->compiler_available = query_bool(d, CL_DEVICE_COMPILER_AVAILABLE) && query_bool(d, CL_DEVICE_LINKER_AVAILABLE);
    info->available = query_bool(d, CL_DEVICE_AVAILABLE);
    const char *why = tsr_device_unusable_reason(info);
    tsr_strlcpy(info->unusable, why ? why : "", sizeof info->unusable);
    tsr_cpu_workers_describe(info, info->worker_threads, sizeof info->worker_threads);
    /* An OpenCL CPU device is the processor this process runs on (PoCL's, rusticl's llvmpipe,
     * a vendor's CPU runtime) */
    if (info->type == TSR_DEVICE_CPU) tsr_host_cpu_signature(info->host_cpu, sizeof info->host_cpu);
    return TSR_SUCCESS;
}

tsr_lanes tsr_device_lanes(const tsr_device_info *info) {
    enum { FLOAT = 4 }; /* index of float in the vector width arrays */
    return info->preferred_vector_width[FLOAT] <= 1 && info->native_vector_width[FLOAT] <= 1 ? TSR_LANES_ACROSS_ITEMS
                                                                                             : TSR_LANES_IN_ITEM;
}

const char *tsr_device_unusable_reason(const tsr_device_info *info) {
    /* What a driver reports when it is broken or half-installed: a kernel could not run there, or
     * every size tessera derives from these would be zero. */
    if (!info->available) return "the device reports itself unavailable (CL_DEVICE_AVAILABLE is false)";
    if (info->compute_units == 0) return "the device reports zero compute units";
    if (info->global_mem_bytes == 0) return "the device reports zero global memory";
    if (info->max_alloc_bytes == 0) return "the device reports a zero maximum allocation";
    if (info->max_work_group_size == 0 || info->max_work_item_sizes[0] == 0)
        return "the device reports a zero maximum work-group size";
    return NULL;
}

cJSON *tsr_device_info_to_json(const tsr_device_info *info) {
    static const char *const width_names[7] = {"char", "short", "int", "long", "float", "double", "half"};
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    char sel[32];
    snprintf(sel, sizeof sel, "%d:%d", info->platform_index, info->device_index);
    cJSON_AddStringToObject(o, "selector", sel);
    cJSON_AddNumberToObject(o, "platform_index", info->platform_index);
    cJSON_AddNumberToObject(o, "device_index", info->device_index);
    cJSON_AddStringToObject(o, "type", tsr_device_type_str(info->type));
    cJSON_AddStringToObject(o, "name", info->name);
    cJSON_AddStringToObject(o, "vendor", info->vendor);
    cJSON_AddStringToObject(o, "platform_name", info->platform_name);
    cJSON_AddStringToObject(o, "platform_vendor", info->platform_vendor);
    cJSON_AddStringToObject(o, "platform_version", info->platform_version);
    cJSON_AddStringToObject(o, "device_version", info->device_version);
    cJSON_AddStringToObject(o, "driver_version", info->driver_version);
    cJSON_AddStringToObject(o, "opencl_c_version", info->opencl_c_version);
    cJSON_AddNumberToObject(o, "compute_units", info->compute_units);
    cJSON_AddNumberToObject(o, "max_clock_mhz", info->max_clock_mhz);
    cJSON_AddNumberToObject(o, "global_mem_bytes", (double)info->global_mem_bytes);
    cJSON_AddNumberToObject(o, "max_alloc_bytes", (double)info->max_alloc_bytes);
    cJSON_AddNumberToObject(o, "local_mem_bytes", (double)info->local_mem_bytes);
    cJSON_AddBoolToObject(o, "local_mem_dedicated", info->local_mem_is_dedicated);
    cJSON_AddNumberToObject(o, "max_work_group_size", (double)info->max_work_group_size);
    cJSON *sizes = cJSON_AddArrayToObject(o, "max_work_item_sizes");
    for (uint32_t i = 0; i < info->max_work_item_dims && i < 3; ++i)
        cJSON_AddItemToArray(sizes, cJSON_CreateNumber((double)info->max_work_item_sizes[i]));
    cJSON *pref = cJSON_AddObjectToObject(o, "preferred_vector_width");
    cJSON *nat = cJSON_AddObjectToObject(o, "native_vector_width");
    for (int i = 0; i < 7; ++i) {
        cJSON_AddNumberToObject(pref, width_names[i], info->preferred_vector_width[i]);
        cJSON_AddNumberToObject(nat, width_names[i], info->native_vector_width[i]);
    }
    cJSON_AddBoolToObject(o, "fp16", info->fp16);
    cJSON_AddBoolToObject(o, "fp64", info->fp64);
    cJSON_AddBoolToObject(o, "compiler_available", info->compiler_available);
    cJSON_AddBoolToObject(o, "available", info->available);
    if (info->unusable[0]) cJSON_AddStringToObject(o, "unusable", info->unusable);
    if (info->worker_threads[0]) cJSON_AddStringToObject(o, "worker_threads", info->worker_threads);
    if (info->host_cpu[0]) cJSON_AddStringToObject(o, "host_cpu", info->host_cpu);
    return o;
}
