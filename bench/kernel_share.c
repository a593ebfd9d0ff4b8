/* A preload (LD_PRELOAD, never linked into a product) that shows how a program's kernels use
 * the OpenCL device's worker threads on a CPU device (PoCL's pthread driver: one thread per
 * compute unit). Per kernel name it waits for the queue before and after each launch
 * (clFinish: this serializes the program's commands, so its wall time is not the program's)
 * and reads /proc/self/task/N/schedstat of every thread but the caller:
 *   wall      microseconds from the enqueue to the queue's end, per launch
 *   run       the other threads' CPU time in it (the device's workers), per launch
 *   par       run / wall: how many workers were busy on average (2 = both on the 2-core Zen 5)
 *   busiest   the busiest worker's share of run (1/#workers: even; 1.00: one worker did all)
 *   rqwait    the workers' time runnable but waiting for a CPU (other processes' load), per
 *             launch: a high busiest share with a high rqwait is the machine's load, with a
 *             low rqwait the launch's own geometry (too few work-groups, a late wake-up).
 * The geometry printed is the first launch's (global and local sizes; local "-" = NULL, the
 * implementation's choice). Set KERNEL_SHARE_OFF=1 to pass launches through untouched.
 *
 *   LD_PRELOAD=build/bench/kernel_share.so build/bench/conv3x3_ab --batch 8 ...
 *
 * It prints its table to stderr at exit. Single-threaded callers only (plain counters). */
#define _GNU_SOURCE
#include <CL/cl.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define MAX_KERNELS 64

typedef cl_int (*ndrange_fn)(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *,
                             cl_uint, const cl_event *, cl_event *);

typedef struct {
    char name[64], geometry[96];
    unsigned long launches;
    double wall, run, busiest, rqwait; /* microseconds, summed over launches */
} kernel_row;

static kernel_row rows[MAX_KERNELS];
static int nrows;

typedef struct {
    long tid[MAX_THREADS];
    double run[MAX_THREADS], wait[MAX_THREADS];
    int n;
} snapshot;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void take(snapshot *s) {
    s->n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    long self = (long)syscall(SYS_gettid);
    struct dirent *e;
    while ((e = readdir(d)) && s->n < MAX_THREADS) {
        if (e->d_name[0] == '.') continue;
        long tid = atol(e->d_name);
        if (tid == self) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        double run, wait;
        if (fscanf(f, "%lf %lf", &run, &wait) == 2) {
            s->tid[s->n] = tid, s->run[s->n] = run / 1e3, s->wait[s->n] = wait / 1e3;
            s->n++;
        }
        fclose(f);
    }
    closedir(d);
}

static void report(void) {
    if (!nrows) return;
    fprintf(stderr, "%-22s %-34s %8s %10s %10s %5s %7s %10s\n", "kernel", "global / local", "launches", "wall us",
            "run us", "par", "busiest", "rqwait us");
    for (int i = 0; i < nrows; ++i) {
        const kernel_row *r = &rows[i];
        double n = (double)r->launches;
        fprintf(stderr, "%-22s %-34s %8lu %10.1f %10.1f %5.2f %7.2f %10.1f\n", r->name, r->geometry, r->launches,
                r->wall / n, r->run / n, r->wall > 0 ? r->run / r->wall : 0.0, r->run > 0 ? r->busiest / r->run : 0.0,
                r->rqwait / n);
    }
}

static kernel_row *row_for(cl_kernel kernel, cl_uint dims, const size_t *global, const size_t *local) {
    char name[64] = "";
    clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
    for (int i = 0; i < nrows; ++i)
        if (!strcmp(rows[i].name, name)) return &rows[i];
    if (nrows == MAX_KERNELS) return NULL;
    kernel_row *r = &rows[nrows++];
    snprintf(r->name, sizeof r->name, "%s", name);
    size_t g[3] = {1, 1, 1}, l[3] = {0, 0, 0};
    for (cl_uint d = 0; d < dims && d < 3; ++d) g[d] = global[d], l[d] = local ? local[d] : 0;
    if (local)
        snprintf(r->geometry, sizeof r->geometry, "%zu,%zu,%zu / %zu,%zu,%zu", g[0], g[1], g[2], l[0], l[1], l[2]);
    else
        snprintf(r->geometry, sizeof r->geometry, "%zu,%zu,%zu / -", g[0], g[1], g[2]);
    return r;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue queue, cl_kernel kernel, cl_uint dims,
                                                       const size_t *offset, const size_t *global, const size_t *local,
                                                       cl_uint nwaits, const cl_event *waits, cl_event *event) {
    static ndrange_fn real;
    static int off = -1;
    if (!real) {
        real = (ndrange_fn)dlsym(RTLD_NEXT, "clEnqueueNDRangeKernel");
        if (!real) return CL_INVALID_OPERATION;
        off = getenv("KERNEL_SHARE_OFF") != NULL;
        if (!off) atexit(report);
    }
    if (off) return real(queue, kernel, dims, offset, global, local, nwaits, waits, event);
    clFinish(queue);
    snapshot a, b;
    take(&a);
    double t0 = now_us();
    cl_int err = real(queue, kernel, dims, offset, global, local, nwaits, waits, event);
    clFinish(queue);
    double t1 = now_us();
    take(&b);
    kernel_row *r = err == CL_SUCCESS ? row_for(kernel, dims, global, local) : NULL;
    if (!r) return err;
    double run = 0, busiest = 0, wait = 0;
    for (int i = 0; i < b.n; ++i) {
        double dr = b.run[i], dw = b.wait[i];
        for (int j = 0; j < a.n; ++j)
            if (a.tid[j] == b.tid[i]) {
                dr -= a.run[j], dw -= a.wait[j];
                break;
            }
        run += dr, wait += dw;
        if (dr > busiest) busiest = dr;
    }
    r->launches++, r->wall += t1 - t0, r->run += run, r->busiest += busiest, r->rqwait += wait;
    return err;
}
