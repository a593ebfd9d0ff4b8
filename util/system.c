/* The machine: time, medians, simulated devices, host memory, and output checks before long runs. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

double util_now_s(void) { return tsr_now_s(); }

void util_touch_lines(unsigned char *buf, size_t bytes) {
    volatile unsigned char *v = buf;
    for (size_t i = 0; i < bytes; i += 64) v[i] = (unsigned char)(v[i] + 1);
}

double util_median(double *values, int n) {
    tsr_stats stats;
    tsr_stats_of(values, n, &stats);
    return stats.median;
}

double util_clock_us(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

cl_mem util_pattern_buffer(cl_context context, size_t n) {
    float *host = malloc(n * sizeof *host);
    if (!host) return NULL;
    for (size_t i = 0; i < n; ++i) host[i] = (float)((i * 7919u) % 97) / 97.0f - 0.5f;
    cl_int err;
    cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof *host, host, &err);
    free(host);
    return err == CL_SUCCESS ? m : NULL;
}

bool util_is_simulator(const tsr_device_info *info) {
    return tsr_contains_nocase(info->platform_name, "oclgrind") || tsr_contains_nocase(info->name, "oclgrind");
}

uint64_t util_host_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kib = 0;
        bool found = false;
        while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
        fclose(f);
        if (found) return (uint64_t)kib * 1024;
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

static double mib(uint64_t bytes) { return (double)bytes / 1048576.0; }

tsr_status util_check_memory(const tsr_device *dev, const char *what, const size_t *buffers, size_t n,
                             size_t host_bytes) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
        if (buffers[i] > info->max_alloc_bytes)
            return tsr_fail(TSR_ERR_OUT_OF_MEMORY,
                            "%s: a buffer of %.0f MiB is more than one allocation may hold on '%s' (%.0f MiB)", what,
                            mib(buffers[i]), info->name, mib(info->max_alloc_bytes));
        total += buffers[i]; /* each is below max_alloc_bytes (a uint64_t): a few cannot wrap */
    }
    if (total > info->global_mem_bytes)
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "%s: needs %.0f MiB of device memory, more than '%s' has (%.0f MiB)",
                        what, mib(total), info->name, mib(info->global_mem_bytes));
    uint64_t avail = util_host_available();
    if (avail && host_bytes > avail)
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "%s: needs %.0f MiB of host memory, more than is available (%.0f MiB)",
                        what, mib(host_bytes), mib(avail));
    return TSR_SUCCESS;
}

tsr_status util_check_output(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return tsr_fail(TSR_ERR_IO, "cannot write '%s': it is a directory", path);
    /* A probe beside it, as the atomic write will create its temporary file there. */
    char probe[TSR_PATH_MAX + 64];
    int n = snprintf(probe, sizeof probe, "%s.probe.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof probe) return tsr_fail(TSR_ERR_INVALID_ARG, "path too long: '%s'", path);
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return tsr_fail(TSR_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    close(fd);
    unlink(probe);
    return TSR_SUCCESS;
}

