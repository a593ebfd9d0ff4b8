/* First-call latency in a fresh process: device open, then the first GEMM
 * (compile or cache load + run), then a second, warm call for comparison.
 * Prints one JSON object. With --clblast, times CLBlastSgemm the same way.
 * Whole-process timing (cold and warm caches) is driven by bench/first_call.sh. */
#define _GNU_SOURCE
#include "tessera.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef TSR_HAVE_CLBLAST
#include <clblast_c.h>
#endif

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* CPU time of the whole process (every thread: PoCL compiles and runs in its own): what a shared
 * machine's load does not inflate. */
static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

int main(int argc, char **argv) {
    double t_start = now_ms();
    static const struct option options[] = {{"clblast", no_argument, NULL, 'c'}, {0}};
    const char *bad = NULL;
    int use_clblast = 0, opt;
    while ((opt = util_next_option(argc, argv, "", options, true, &bad)) != -1) {
        if (opt != 'c') return fprintf(stderr, "usage: first_call [--clblast]\n"), 2;
        use_clblast = 1;
    }
    if (optind < argc) return fprintf(stderr, "usage: first_call [--clblast]\n"), 2;
    size_t n = 256;
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(NULL, &dev);
    if (st != TSR_SUCCESS) {
        fprintf(stderr, "%s: %s\n", tsr_status_str(st), tsr_last_error());
        return 1;
    }
    double t_open = now_ms();
    cl_context ctx = tsr_device_context(dev);
    cl_command_queue q = tsr_device_queue(dev);
    cl_int err;
    float *host = malloc(n * n * sizeof(float));
    for (size_t i = 0; i < n * n; ++i) host[i] = (float)(i % 17) * 0.25f - 2.0f;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * n * sizeof(float), host, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * n * sizeof(float), host, &err);
    cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * n * sizeof(float), NULL, &err);
    clFinish(q);
    double t_ready = now_ms();
    double calls[2], first_cpu = cpu_ms();
    for (int rep = 0; rep < 2; ++rep) {
        double t0 = now_ms();
        if (use_clblast) {
#ifdef TSR_HAVE_CLBLAST
            CLBlastStatusCode cs = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, n, n, n,
                                                1.0f, a, 0, n, b, 0, n, 0.0f, c, 0, n, &q, NULL);
            if (cs != CLBlastSuccess) {
                fprintf(stderr, "CLBlastSgemm failed: %d\n", (int)cs);
                return 1;
            }
#else
            fprintf(stderr, "built without CLBlast\n");
            return 1;
#endif
        } else {
            st = tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, n, n, n, 1.0f, a, 0, n, b, 0, n, 0.0f, c, 0,
                           n, NULL, NULL);
            if (st != TSR_SUCCESS) {
                fprintf(stderr, "%s: %s\n", tsr_status_str(st), tsr_last_error());
                return 1;
            }
        }
        clFinish(q);
        calls[rep] = now_ms() - t0;
        if (rep == 0) first_cpu = cpu_ms() - first_cpu;
    }
    tsr_cache_info ci;
    tsr_cache_get_info(dev, &ci);
    (void)t_ready;
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseMemObject(c);
    free(host);
    /* Closing writes the programs built from source to tessera's disk cache: timed apart. */
    double t_close = now_ms(), close_cpu = cpu_ms();
    tsr_device_close(dev);
    printf("{\"impl\": \"%s\", \"open_ms\": %.2f, \"first_call_ms\": %.2f, \"second_call_ms\": %.2f, "
           "\"first_call_overhead_ms\": %.2f, \"first_call_cpu_ms\": %.2f, \"close_ms\": %.2f, "
           "\"close_cpu_ms\": %.2f, \"since_start_ms\": %.2f, \"cpu_ms\": %.2f, \"tessera_disk_hits\": %llu, "
           "\"tessera_builds\": %llu}\n",
           use_clblast ? "clblast" : "tessera", t_open - t_start, calls[0], calls[1], calls[0] - calls[1], first_cpu,
           now_ms() - t_close, cpu_ms() - close_cpu, now_ms() - t_start, cpu_ms(), (unsigned long long)ci.disk_hits,
           (unsigned long long)ci.builds);
    return 0;
}
