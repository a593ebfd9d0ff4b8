/* Platform and device discovery, selector strings, opening a device (context + queue, its
 * configuration overrides and caches) and closing it. What a device is: device_info.c. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void tsr_free(void *ptr) { free(ptr); }

/* One discovered device with its OpenCL handles. */
typedef struct found_device {
    cl_platform_id platform;
    cl_device_id id;
    tsr_device_info info;
} found_device;

/* ---- vendor files the ICD loader could not use ---- */

/* No control characters (a file anyone could have written reaches terminals only when it is printable). */
static bool printable(const char *text) {
    for (const unsigned char *c = (const unsigned char *)text; *c; ++c)
        if (*c < 0x20 || *c == 0x7f) return false;
    return true;
}

/* One .icd file: the library it names, and why that library is no OpenCL driver (appended to
 * `out`), like the loader would find (ocl-icd skips such files without a word). */
static void check_icd_file(const char *path, char *out, size_t size) {
    char *text = NULL;
    size_t length = 0;
    if (tsr_read_file(path, &text, &length) != TSR_SUCCESS) {
        tsr_note_append(out, size, "%s: unreadable", path);
        tsr_clear_error();
        return;
    }
    text[strcspn(text, "\r\n")] = '\0';
    bool shown = printable(text);
    void *lib = text[0] && shown ? dlopen(text, RTLD_LAZY | RTLD_LOCAL) : NULL;
    if (!text[0]) tsr_note_append(out, size, "%s names no library", path);
    else if (!shown) tsr_note_append(out, size, "%s: the library path holds control characters", path);
    else if (!lib) tsr_note_append(out, size, "%s: library %s does not load (%s)", path, text, dlerror());
    else {
        /* The loader's own test: the library hands out clIcdGetPlatformIDsKHR through
         * clGetExtensionFunctionAddress. */
        void *(*get_address)(const char *) = NULL;
        void *symbol = dlsym(lib, "clGetExtensionFunctionAddress");
        memcpy(&get_address, &symbol, sizeof symbol); /* object to function pointer, as POSIX allows */
        if (!get_address || !get_address("clIcdGetPlatformIDsKHR"))
            tsr_note_append(out, size, "%s: library %s is not an OpenCL ICD (no clIcdGetPlatformIDsKHR)", path, text);
    }
    if (lib) dlclose(lib);
    free(text);
}

/* The vendor files of $OCL_ICD_VENDORS (a folder or one .icd file) or /etc/OpenCL/vendors that
 * name no loadable OpenCL driver, "; "-separated in `out` ("" when none). */
static void icd_problems(char *out, size_t size) {
    out[0] = '\0';
    const char *where = getenv("OCL_ICD_VENDORS");
    if (!where || !*where) where = "/etc/OpenCL/vendors";
    size_t len = strlen(where);
    if (len > 4 && strcmp(where + len - 4, ".icd") == 0) {
        check_icd_file(where, out, size);
        return;
    }
    DIR *dir = opendir(where);
    if (!dir) return;
    for (struct dirent *e; (e = readdir(dir));) {
        size_t n = strlen(e->d_name);
        if (n <= 4 || strcmp(e->d_name + n - 4, ".icd") != 0) continue;
        if (!printable(e->d_name)) {
            tsr_note_append(out, size, "%s: a vendor file whose name holds control characters", where);
            continue;
        }
        char path[TSR_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", where, e->d_name);
        check_icd_file(path, out, size);
    }
    closedir(dir);
}

tsr_status tsr_icd_problems(char **text) {
    tsr_clear_diagnostics();
    if (!text) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_icd_problems: text must not be NULL");
    *text = malloc(4096);
    if (!*text) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    icd_problems(*text, 4096);
    return TSR_SUCCESS;
}

/* Names of platforms that offer no device, for "nothing found" messages. */
static _Thread_local char empty_platforms[1024];

/* Enumerate every device of every platform. */
static tsr_status enumerate(found_device **out, size_t *count, cl_uint *nplatforms_out) {
    empty_platforms[0] = '\0';
    *out = NULL;
    *count = 0;
    tsr_cpu_pin_workers(); /* before the first OpenCL call: PoCL reads POCL_AFFINITY as it starts */
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    /* ocl-icd answers CL_PLATFORM_NOT_FOUND_KHR when no vendor file names a loadable platform. */
    if (err == -1001 || (err == CL_SUCCESS && np == 0)) {
        tsr_fail(TSR_ERR_NO_PLATFORM,
                 "no OpenCL platform found: the ICD loader found no usable vendor file "
                 "(searched %s%s); install a driver such as pocl-opencl-icd",
                 getenv("OCL_ICD_VENDORS") ? "OCL_ICD_VENDORS=" : "/etc/OpenCL/vendors",
                 getenv("OCL_ICD_VENDORS") ? getenv("OCL_ICD_VENDORS") : "");
        char broken[2048];
        icd_problems(broken, sizeof broken);
        if (broken[0]) tsr_error_append("; broken vendor files: %s", broken);
        return TSR_ERR_NO_PLATFORM;
    }
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "clGetPlatformIDs", __FILE__, __LINE__);
    if (nplatforms_out) *nplatforms_out = np;
    cl_platform_id *platforms = calloc(np, sizeof *platforms);
    if (!platforms) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory listing platforms");
    err = clGetPlatformIDs(np, platforms, NULL);
    if (err != CL_SUCCESS) {
        free(platforms);
        return tsr_fail_cl(err, "clGetPlatformIDs", __FILE__, __LINE__);
    }
    found_device *all = NULL;
    size_t n = 0;
    tsr_status status = TSR_SUCCESS;
    for (cl_uint p = 0; p < np; ++p) {
        cl_uint nd = 0;
        err = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
        if (err == CL_DEVICE_NOT_FOUND || nd == 0) { /* an empty platform is not an error */
            char name[TSR_INFO_STR];
            tsr_query_platform_str(platforms[p], CL_PLATFORM_NAME, name);
            size_t used = strlen(empty_platforms);
            snprintf(empty_platforms + used, sizeof empty_platforms - used, "%s'%s'", used ? ", " : "", name);
            continue;
        }
        if (err != CL_SUCCESS) continue;                     /* a broken platform must not hide the others */
        cl_device_id *ids = calloc(nd, sizeof *ids);
        found_device *grown = realloc(all, (n + nd) * sizeof *all);
        if (!ids || !grown) {
            free(ids);
            if (grown) all = grown;
            status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory listing devices");
            break;
        }
        all = grown;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) == CL_SUCCESS) {
            for (cl_uint d = 0; d < nd; ++d) {
                found_device *fd = &all[n++];
                fd->platform = platforms[p];
                fd->id = ids[d];
                fd->info.platform_index = (int)p;
                fd->info.device_index = (int)d;
                tsr_query_device_info(platforms[p], ids[d], &fd->info);
            }
        }
        free(ids);
    }
    free(platforms);
    if (status != TSR_SUCCESS) {
        free(all);
        return status;
    }
    *out = all;
    *count = n;
    return TSR_SUCCESS;
}

tsr_status tsr_discover(tsr_device_info **infos, size_t *count) {
    tsr_clear_diagnostics();
    if (!infos || !count) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_discover: infos and count must not be NULL");
    *infos = NULL;
    *count = 0;
    found_device *all = NULL;
    size_t n = 0;
    tsr_status status = enumerate(&all, &n, NULL);
    if (status != TSR_SUCCESS) return status;
    tsr_device_info *out = calloc(n ? n : 1, sizeof *out);
    if (!out) {
        free(all);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (size_t i = 0; i < n; ++i) out[i] = all[i].info;
    free(all);
    *infos = out;
    *count = n;
    return TSR_SUCCESS;
}

tsr_status tsr_discover_json(char **json) {
    tsr_clear_diagnostics();
    if (!json) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_discover_json: json must not be NULL");
    *json = NULL;
    tsr_device_info *infos = NULL;
    size_t n = 0;
    tsr_status status = tsr_discover(&infos, &n);
    if (status != TSR_SUCCESS) return status;
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; ++i) cJSON_AddItemToArray(arr, tsr_device_info_to_json(&infos[i]));
    free(infos);
    char *text = arr ? cJSON_Print(arr) : NULL;
    cJSON_Delete(arr);
    if (!text) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory writing JSON");
    /* cJSON allocates with malloc by default, so tsr_free releases it. */
    *json = text;
    return TSR_SUCCESS;
}

/* ---- selectors ---- */

/* Describe every device, one per line, for "nothing matched" messages. */
static void append_device_list(const found_device *all, size_t n) {
    if (n == 0) {
        tsr_error_append("; the installed platforms offer no device (platforms without devices: %s)",
                         empty_platforms[0] ? empty_platforms : "none");
        return;
    }
    tsr_error_append("; available devices:");
    for (size_t i = 0; i < n; ++i)
        tsr_error_append("\n  %d:%d  %-11s %s (%s)", all[i].info.platform_index, all[i].info.device_index,
                         tsr_device_type_str(all[i].info.type), all[i].info.name, all[i].info.platform_name);
}

static int type_rank_for_default(tsr_device_type t) {
    switch (t) {
    case TSR_DEVICE_GPU: return 0;
    case TSR_DEVICE_ACCELERATOR: return 1;
    case TSR_DEVICE_CPU: return 2;
    default: return 3;
    }
}

static bool parse_index_pair(const char *s, long *p, long *d) {
    char *end = NULL;
    if (!isdigit((unsigned char)s[0])) return false;
    errno = 0;
    *p = strtol(s, &end, 10);
    if (*end != ':' || !isdigit((unsigned char)end[1])) return false;
    *d = strtol(end + 1, &end, 10);
    return *end == '\0' && errno == 0; /* out-of-range indices are malformed, not clamped */
}

/* Pick one device from `all` by selector into *pick; on failure the error is recorded. */
static tsr_status select_device(const found_device *all, size_t n, const char *selector, const char *origin,
                                long *pick) {
    char sel[TSR_INFO_STR];
    /* Trim blanks: selectors come from environment variables and command lines. */
    while (*selector && isspace((unsigned char)*selector)) ++selector;
    /* A truncated selector could name another device ("cpu   ...x" cut to "cpu"): refuse it whole. */
    if (strlen(selector) >= sizeof sel)
        return tsr_fail(TSR_ERR_INVALID_ARG, "selector from %s is %zu characters long; at most %zu are accepted",
                        origin, strlen(selector), sizeof sel - 1);
    tsr_strlcpy(sel, selector, sizeof sel);
    for (size_t len = strlen(sel); len > 0 && isspace((unsigned char)sel[len - 1]); --len) sel[len - 1] = '\0';

    if (n == 0) {
        tsr_fail(TSR_ERR_NO_DEVICE, "no OpenCL device found");
        append_device_list(all, n);
        return TSR_ERR_NO_DEVICE;
    }
    if (sel[0] == '\0' || strcasecmp(sel, "default") == 0) {
        long best = -1;
        for (size_t i = 0; i < n; ++i)
            if (best < 0 || type_rank_for_default(all[i].info.type) < type_rank_for_default(all[best].info.type))
                best = (long)i;
        *pick = best;
        return TSR_SUCCESS;
    }
    static const struct { const char *word; tsr_device_type type; } words[] = {
        {"cpu", TSR_DEVICE_CPU}, {"gpu", TSR_DEVICE_GPU}, {"accelerator", TSR_DEVICE_ACCELERATOR},
        {"custom", TSR_DEVICE_CUSTOM}};
    for (size_t w = 0; w < sizeof words / sizeof words[0]; ++w) {
        if (strcasecmp(sel, words[w].word) != 0) continue;
        for (size_t i = 0; i < n; ++i)
            if (all[i].info.type == words[w].type) {
                *pick = (long)i;
                return TSR_SUCCESS;
            }
        tsr_fail(TSR_ERR_NO_DEVICE, "no %s device found (selector '%s' from %s)", words[w].word, sel, origin);
        append_device_list(all, n);
        return TSR_ERR_NO_DEVICE;
    }
    long p, d;
    if (parse_index_pair(sel, &p, &d)) {
        for (size_t i = 0; i < n; ++i)
            if (all[i].info.platform_index == p && all[i].info.device_index == d) {
                *pick = (long)i;
                return TSR_SUCCESS;
            }
        tsr_fail(TSR_ERR_NO_DEVICE, "no device at platform %ld, device %ld (selector '%s' from %s)", p, d, sel, origin);
        append_device_list(all, n);
        return TSR_ERR_NO_DEVICE;
    }
    if (strchr(sel, ':') && isdigit((unsigned char)sel[0])) {
        tsr_fail(TSR_ERR_INVALID_ARG, "malformed selector '%s' from %s: expected P:D with two non-negative integers", sel, origin);
        append_device_list(all, n);
        return TSR_ERR_INVALID_ARG;
    }
    for (size_t i = 0; i < n; ++i)
        if (tsr_contains_nocase(all[i].info.name, sel) || tsr_contains_nocase(all[i].info.vendor, sel) ||
            tsr_contains_nocase(all[i].info.platform_name, sel)) {
            *pick = (long)i;
            return TSR_SUCCESS;
        }
    tsr_fail(TSR_ERR_NO_DEVICE,
             "no device matches selector '%s' from %s (use cpu, gpu, accelerator, P:D or part of a name)", sel, origin);
    append_device_list(all, n);
    return TSR_ERR_NO_DEVICE;
}

static void make_fingerprint(tsr_device *dev) {
    const tsr_device_info *i = &dev->info;
    snprintf(dev->fingerprint, sizeof dev->fingerprint, "%s|%s|%s|%s|%s", i->platform_name, i->vendor, i->name,
             i->driver_version, i->opencl_c_version);
}

static tsr_status finish_open(tsr_device *dev, cl_command_queue queue) {
    tsr_status status = TSR_SUCCESS;
    cl_int err = CL_SUCCESS;
    if (queue) {
        dev->queue = queue;
        clRetainCommandQueue(queue);
    } else {
        dev->queue = clCreateCommandQueue(dev->context, dev->id, CL_QUEUE_PROFILING_ENABLE, &err);
        TSR_CL_CHECK(status, err, fail);
    }
    make_fingerprint(dev);
    /* Recursive: a pipeline that holds a workspace (unfused attention's scores) calls ops
     * that take the lock again. */
    pthread_mutexattr_t attr;
    bool locked_ok = pthread_mutexattr_init(&attr) == 0 &&
                     pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE) == 0 &&
                     pthread_mutex_init(&dev->lock, &attr) == 0;
    pthread_mutexattr_destroy(&attr);
    if (locked_ok && pthread_mutex_init(&dev->program_lock, NULL) != 0) {
        pthread_mutex_destroy(&dev->lock);
        locked_ok = false;
    }
    if (!locked_ok) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "cannot create a mutex");
        goto fail;
    }
    /* The configuration overrides in the environment are read here, once per device, and so is
     * TSR_BUILTIN_TUNING (tsr_cache_init reads the cache's and the kernel sources' variables). */
    const char *builtin = getenv("TSR_BUILTIN_TUNING");
    dev->builtin_tuning = !(builtin && strcmp(builtin, "off") == 0);
    status = tsr_config_device_init(dev);
    if (status != TSR_SUCCESS) {
        tsr_config_device_release(dev);
        pthread_mutex_destroy(&dev->program_lock);
        pthread_mutex_destroy(&dev->lock);
        goto fail;
    }
    tsr_cache_init(dev);
    return TSR_SUCCESS;
fail:
    return status;
}

static void free_device(tsr_device *dev) {
    if (!dev) return;
    if (dev->queue) clReleaseCommandQueue(dev->queue);
    if (dev->context) clReleaseContext(dev->context);
    free(dev);
}

tsr_status tsr_device_open(const char *selector, tsr_device **device) {
    tsr_clear_diagnostics();
    if (!device) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_device_open: device must not be NULL");
    *device = NULL;
    const char *origin = "the API";
    if (!selector || !*selector) {
        selector = getenv("TSR_DEVICE");
        origin = "TSR_DEVICE";
        if (!selector || !*selector) {
            selector = "";
            origin = "the default preference (GPU, accelerator, CPU)";
        }
    }
    found_device *all = NULL;
    size_t n = 0;
    tsr_status status = enumerate(&all, &n, NULL);
    if (status != TSR_SUCCESS) return status;
    long pick = -1;
    status = select_device(all, n, selector, origin, &pick);
    if (status != TSR_SUCCESS) {
        free(all);
        return status;
    }
    tsr_device *dev = calloc(1, sizeof *dev);
    if (!dev) {
        free(all);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    }
    dev->platform = all[pick].platform;
    dev->id = all[pick].id;
    dev->info = all[pick].info;
    free(all);
    cl_int err = CL_SUCCESS;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)dev->platform, 0};
    dev->context = clCreateContext(props, 1, &dev->id, NULL, NULL, &err);
    TSR_CL_CHECK(status, err, fail);
    TSR_CHECK(status, finish_open(dev, NULL), fail);
    *device = dev;
    return TSR_SUCCESS;
fail:
    tsr_error_append(" (opening device '%s')", dev->info.name);
    free_device(dev);
    return status;
}

tsr_status tsr_device_wrap(cl_context context, cl_device_id device_id, cl_command_queue queue, tsr_device **device) {
    tsr_clear_diagnostics();
    if (!device) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_device_wrap: device must not be NULL");
    *device = NULL;
    if (!context) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_device_wrap: context must not be NULL");
    if (!device_id) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_device_wrap: device_id must not be NULL");
    tsr_status status = TSR_SUCCESS;
    cl_platform_id platform = NULL;
    TSR_CL_CHECK(status, clGetDeviceInfo(device_id, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL), done);
    if (queue) {
        cl_context qctx = NULL;
        cl_device_id qdev = NULL;
        TSR_CL_CHECK(status, clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL), done);
        TSR_CL_CHECK(status, clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL), done);
        if (qctx != context || qdev != device_id)
            return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_device_wrap: queue belongs to another context or device");
    }
    tsr_device *dev = calloc(1, sizeof *dev);
    if (!dev) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    dev->platform = platform;
    dev->id = device_id;
    dev->info.platform_index = -1; /* unknown: the caller chose the device */
    dev->info.device_index = -1;
    tsr_query_device_info(platform, device_id, &dev->info);
    dev->context = context;
    clRetainContext(context);
    status = finish_open(dev, queue);
    if (status != TSR_SUCCESS) {
        free_device(dev);
        return status;
    }
    *device = dev;
done:
    return status;
}

/* Guards every device's live_plans and closed. */
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;

static void device_free(tsr_device *device) {
    tsr_derived_release_device(device);
    tsr_workspace_release(device);
    tsr_config_device_release(device);
    tsr_cache_release(device);
    pthread_mutex_destroy(&device->program_lock);
    pthread_mutex_destroy(&device->lock);
    free_device(device);
}

void tsr_device_close(tsr_device *device) {
    if (!device) return;
    if (device->queue) clFinish(device->queue);
    pthread_mutex_lock(&plans_lock);
    bool held = device->live_plans > 0;
    device->closed = true;
    pthread_mutex_unlock(&plans_lock);
    if (!held) device_free(device); /* else the last plan's tsr_device_drop frees it */
}

void tsr_device_hold(tsr_device *device) {
    pthread_mutex_lock(&plans_lock);
    device->live_plans++;
    pthread_mutex_unlock(&plans_lock);
}

void tsr_device_drop(tsr_device *device) {
    pthread_mutex_lock(&plans_lock);
    bool last = --device->live_plans == 0 && device->closed;
    pthread_mutex_unlock(&plans_lock);
    if (last) device_free(device);
}

bool tsr_device_closed(tsr_device *device) {
    pthread_mutex_lock(&plans_lock);
    bool closed = device->closed;
    pthread_mutex_unlock(&plans_lock);
    return closed;
}

const tsr_device_info *tsr_device_get_info(const tsr_device *device) { return device ? &device->info : NULL; }
cl_context tsr_device_context(const tsr_device *device) { return device ? device->context : NULL; }
cl_device_id tsr_device_id(const tsr_device *device) { return device ? device->id : NULL; }
cl_command_queue tsr_device_queue(const tsr_device *device) { return device ? device->queue : NULL; }
const char *tsr_device_fingerprint(const tsr_device *device) { return device ? device->fingerprint : ""; }
