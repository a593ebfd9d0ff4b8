/* The cost of one tessera call from C, the baseline of the Python package's overhead
 * (bench/python_overhead.py runs this and the same calls from Python, alternating):
 *   call_overhead [--device SEL] [--size N] [--calls N]
 * times N row-major N x N x N tsr_matmul calls two ways, after warm-up calls:
 *   synchronous: each call followed by clFinish (what one blocking call costs);
 *   pipelined:   the calls enqueued back to back, one clFinish at the end.
 * Prints one JSON object with the microseconds per call of each. */
#include "tessera.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int fail(const char *what, tsr_status st) {
    fprintf(stderr, "call_overhead: %s: %s: %s\n", what, tsr_status_str(st), tsr_last_error());
    return 1;
}

int main(int argc, char **argv) {
    static const struct option options[] = {{"device", required_argument, NULL, 'd'},
                                            {"size", required_argument, NULL, 's'},
                                            {"calls", required_argument, NULL, 'c'},
                                            {0}};
    const char *selector = NULL, *bad = NULL;
    uint64_t size_arg = 256, calls_arg = 200;
    int opt;
    while ((opt = util_next_option(argc, argv, "", options, true, &bad)) != -1) {
        if (opt == 'd') selector = optarg;
        else if ((opt == 's' && util_parse_count(optarg, "--size", 1, 8192, &size_arg) != TSR_SUCCESS) ||
                 (opt == 'c' && util_parse_count(optarg, "--calls", 1, 1000000, &calls_arg) != TSR_SUCCESS)) {
            fprintf(stderr, "call_overhead: --size 1..8192, --calls 1..1000000\n");
            return 2;
        } else if (opt != 's' && opt != 'c') {
            fprintf(stderr, "usage: call_overhead [--device SEL] [--size N] [--calls N]\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "usage: call_overhead [--device SEL] [--size N] [--calls N]\n");
        return 2;
    }
    long calls = (long)calls_arg;
    size_t n = (size_t)size_arg;
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(selector, &dev);
    if (st != TSR_SUCCESS) return fail("device", st);
    cl_context ctx = tsr_device_context(dev);
    cl_command_queue q = tsr_device_queue(dev);
    float *host = malloc(n * n * sizeof(float));
    if (!host) return 1;
    for (size_t i = 0; i < n * n; ++i) host[i] = (float)(i % 17) * 0.125f - 1.0f;
    cl_int err_a, err_b, err_c;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * n * sizeof(float), host, &err_a);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * n * sizeof(float), host, &err_b);
    cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * n * sizeof(float), NULL, &err_c);
    if (err_a != CL_SUCCESS || err_b != CL_SUCCESS || err_c != CL_SUCCESS) {
        fprintf(stderr, "call_overhead: clCreateBuffer failed\n");
        return 1;
    }
    const tsr_matmul_desc desc = {.m = n, .n = n, .k = n, .alpha = 1.0f};
#define GEMM() tsr_matmul(dev, &desc, a, b, c, NULL, NULL)
    for (int i = 0; i < 10; ++i)
        if ((st = GEMM()) != TSR_SUCCESS) return fail("tsr_matmul", st);
    clFinish(q);
    double t0 = now_us();
    for (long i = 0; i < calls; ++i) {
        if ((st = GEMM()) != TSR_SUCCESS) return fail("tsr_matmul", st);
        clFinish(q);
    }
    double t1 = now_us();
    for (long i = 0; i < calls; ++i)
        if ((st = GEMM()) != TSR_SUCCESS) return fail("tsr_matmul", st);
    clFinish(q);
    double t2 = now_us();
    printf("{\"size\": %zu, \"calls\": %ld, \"device\": \"%s\", \"synchronous_us\": %.3f, \"pipelined_us\": %.3f}\n", n,
           calls, tsr_device_get_info(dev)->name, (t1 - t0) / (double)calls, (t2 - t1) / (double)calls);
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseMemObject(c);
    free(host);
    tsr_device_close(dev);
    return 0;
}
