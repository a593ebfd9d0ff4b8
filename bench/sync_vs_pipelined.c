/* One convolution layer called the two ways a user calls it: synchronous (each call followed by
 * clFinish: a script timing one layer, the peer tool) and pipelined (calls back to back,
 * one clFinish: a network), with the process's CPU time over wall time, which shows how many of
 * the device's worker threads were running. With --placement it alternates child processes with
 * PoCL's default worker placement (POCL_AFFINITY=0) and tessera's (the variable unset: tessera pins
 * the workers when it may, see runtime/cpu_workers.c), so the two are compared side by side.
 *
 *   build/bench/sync_vs_pipelined [--layer C,H,K,R,S[,N]] [--calls 40] [--reps 3] [--placement ROUNDS]
 *
 * Prints one line per rep: milliseconds per call, GFLOP/s, CPU/wall (and the pipelined calls' process
 * CPU time per call, a load-insensitive A/B measure under TSR_CONFIG_CONV2D), and the worker placement
 * tessera reports (tsr_device_info->worker_threads). */
#include <tessera.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double wall_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double process_cpu(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec * 1e-6 + (double)r.ru_stime.tv_sec +
           (double)r.ru_stime.tv_usec * 1e-6;
}

static int usage(void) {
    fprintf(stderr, "usage: sync_vs_pipelined [--layer C,H,K,R,S[,N]] [--calls N] [--reps N] [--placement ROUNDS]\n");
    return 2;
}

static int measure(int c, int h, int k, int r, int s, int n, int calls, int reps, const char *label) {
    tsr_device *dev = NULL;
    if (tsr_device_open("cpu", &dev) != TSR_SUCCESS) {
        fprintf(stderr, "%s\n", tsr_last_error());
        return 1;
    }
    const tsr_device_info *info = tsr_device_get_info(dev);
    cl_context ctx = tsr_device_context(dev);
    cl_command_queue q = tsr_device_queue(dev);
    size_t xs = (size_t)n * c * h * h, ws = (size_t)k * c * r * r, ys = (size_t)n * k * h * h;
    size_t big = xs > ws ? xs : ws;
    float *host = malloc(sizeof(float) * big);
    if (!host) {
        fprintf(stderr, "sync_vs_pipelined: no memory for %zu floats\n", big);
        return 1;
    }
    for (size_t i = 0; i < big; ++i) host[i] = (float)(i % 97) / 97.0f - 0.5f;
    cl_int ex = CL_SUCCESS, ew = CL_SUCCESS, ey = CL_SUCCESS;
    cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, xs * 4, host, &ex);
    cl_mem w = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, ws * 4, host, &ew);
    cl_mem y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ys * 4, NULL, &ey);
    free(host);
    cl_int err = ex != CL_SUCCESS ? ex : ew != CL_SUCCESS ? ew : ey;
    if (err != CL_SUCCESS) {
        fprintf(stderr, "sync_vs_pipelined: buffers of %zu, %zu and %zu floats: OpenCL error %d\n", xs, ws, ys, err);
        return 1;
    }
    tsr_buffer_set_constant(w, true); /* weights kept, as `tessera bench` and a network have them */
    tsr_conv2d_desc d = {.batch = (size_t)n, .in_channels = (size_t)c, .in_height = (size_t)h, .in_width = (size_t)h,
                         .out_channels = (size_t)k, .kernel_h = (size_t)r, .kernel_w = (size_t)r,
                         .stride_h = (size_t)s, .stride_w = (size_t)s, .pad_h = (size_t)r / 2, .pad_w = (size_t)r / 2};
    size_t oh = 0, ow = 0;
    if (tsr_conv2d_output_size(&d, &oh, &ow) != TSR_SUCCESS) {
        fprintf(stderr, "%s\n", tsr_last_error());
        return 1;
    }
    double flop = 2.0 * n * k * (double)oh * (double)ow * c * r * r;
    for (int i = 0; i < 10; ++i) {
        if (tsr_conv2d(dev, &d, x, w, y, q, NULL) != TSR_SUCCESS) {
            fprintf(stderr, "%s\n", tsr_last_error());
            return 1;
        }
        clFinish(q);
    }
    for (int rep = 0; rep < reps; ++rep) {
        double t0 = wall_now(), c0 = process_cpu();
        for (int i = 0; i < calls; ++i) {
            tsr_conv2d(dev, &d, x, w, y, q, NULL);
            clFinish(q);
        }
        double t1 = wall_now(), c1 = process_cpu();
        for (int i = 0; i < calls; ++i) tsr_conv2d(dev, &d, x, w, y, q, NULL);
        clFinish(q);
        double t2 = wall_now(), c2 = process_cpu();
        printf("%-9s sync %.3f ms %6.1f GFLOP/s cpu/wall %.2f | pipelined %.3f ms %6.1f GFLOP/s cpu/wall %.2f, "
               "CPU %.3f ms a call | %s\n",
               label, (t1 - t0) / calls * 1e3, flop / ((t1 - t0) / calls) * 1e-9, (c1 - c0) / (t1 - t0),
               (t2 - t1) / calls * 1e3, flop / ((t2 - t1) / calls) * 1e-9, (c2 - c1) / (t2 - t1),
               (c2 - c1) / calls * 1e3, info->worker_threads);
        fflush(stdout);
    }
    clReleaseMemObject(x);
    clReleaseMemObject(w);
    clReleaseMemObject(y);
    tsr_device_close(dev);
    return 0;
}

int main(int argc, char **argv) {
    int c = 64, h = 56, k = 64, r = 3, s = 1, n = 1, calls = 40, reps = 3, rounds = 0;
    for (int i = 1; i < argc; ++i) {
        if (i + 1 >= argc) return usage();
        if (strcmp(argv[i], "--layer") == 0) {
            int got = sscanf(argv[++i], "%d,%d,%d,%d,%d,%d", &c, &h, &k, &r, &s, &n);
            if (got < 5 || c < 1 || h < 1 || k < 1 || r < 1 || s < 1 || n < 1) return usage();
        } else if (strcmp(argv[i], "--calls") == 0) {
            calls = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--reps") == 0) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--placement") == 0) {
            rounds = atoi(argv[++i]);
        } else {
            return usage();
        }
    }
    if (calls < 1 || reps < 1 || rounds < 0) return usage();
    if (rounds == 0) return measure(c, h, k, r, s, n, calls, reps, "as-is");
    for (int round = 0; round < rounds; ++round) {
        for (int side = 0; side < 2; ++side) {
            fflush(stdout);
            pid_t pid = fork();
            if (pid < 0) return 1;
            if (pid == 0) {
                if (side == 0) setenv("POCL_AFFINITY", "0", 1);
                else unsetenv("POCL_AFFINITY");
                _exit(measure(c, h, k, r, s, n, calls, reps, side == 0 ? "default" : "tessera"));
            }
            int status = 0;
            if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
        }
    }
    return 0;
}
