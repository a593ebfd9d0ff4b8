/* Compiling candidates ahead of the tuner: worker threads run the configurations a strategy is
 * about to ask for, once each, on private devices (their own OpenCL contexts on the tuner's
 * device), so that the driver compiles them (PoCL: the program at its build, each kernel for its
 * work-group size at its first launch) while the tuner's own thread compiles its current
 * candidate. The driver's kernel cache then serves the tuner's device, whose first run of a
 * prepared candidate only loads what was compiled. Nothing is ever timed while a worker runs:
 * the tuner calls tsr_ahead_idle before every timed run (tsr_search_evaluate, duels). */
#define _GNU_SOURCE
#include "tuner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

typedef struct ahead_worker {
    pthread_t thread;
    bool started;
    struct tsr_ahead *owner;
} ahead_worker;

typedef struct ahead_job {
    tsr_ahead_device scope; /* a copy: the tuner may reuse its own for the next class meanwhile */
    tsr_config config;
} ahead_job;

struct tsr_ahead {
    tsr_ahead_fns fns;
    pthread_mutex_t lock;
    pthread_cond_t work;   /* a job was queued, or stop */
    pthread_cond_t idle;   /* a job finished */
    ahead_job *queue;      /* jobs not started, first first */
    int nqueue, capqueue;
    tsr_config *submitted; /* every configuration ever queued, for tsr_ahead_submitted */
    int nsubmitted, capsubmitted;
    int running;           /* jobs being run */
    bool stop;
    int nworkers;
    ahead_worker workers[TUNE_MAX_AHEAD];
    tsr_ahead_stats stats;
};

static void *worker_main(void *arg) {
    ahead_worker *w = arg;
    tsr_ahead *a = w->owner;
    void *state = NULL;
    bool opened = false, usable = true;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (!a->stop && a->nqueue == 0) pthread_cond_wait(&a->work, &a->lock);
        if (a->stop) break;
        ahead_job job = a->queue[0];
        memmove(&a->queue[0], &a->queue[1], (size_t)(a->nqueue - 1) * sizeof *a->queue);
        a->nqueue--;
        a->running++;
        pthread_mutex_unlock(&a->lock);
        /* The private state (a device) is made by the first job, and kept for the whole tuning
         * run (a new OpenCL context costs PoCL a second or so at its first build): a run that
         * prepares nothing never pays for it. A worker that cannot make it fails its jobs (the
         * tuner then compiles those candidates itself, as without workers). */
        if (!opened) {
            opened = true;
            usable = a->fns.open(a->fns.ctx, &state) == TSR_SUCCESS;
            if (!usable) tsr_clear_error();
        }
        bool ran = usable && a->fns.run(a->fns.ctx, state, &job.scope, &job.config) == TSR_SUCCESS;
        if (!ran) tsr_clear_error(); /* a candidate that fails here fails again, with its message, in the tuner */
        pthread_mutex_lock(&a->lock);
        a->running--;
        a->stats.jobs_run += ran;
        a->stats.jobs_failed += !ran;
        pthread_cond_broadcast(&a->idle);
    }
    pthread_mutex_unlock(&a->lock);
    if (opened && usable) a->fns.close(a->fns.ctx, state);
    return NULL;
}

tsr_status tsr_ahead_start(const tsr_ahead_fns *fns, int workers, tsr_ahead **out) {
    *out = NULL;
    if (workers <= 0) return TSR_SUCCESS;
    if (workers > TUNE_MAX_AHEAD) workers = TUNE_MAX_AHEAD;
    tsr_ahead *a = calloc(1, sizeof *a);
    if (!a) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    a->fns = *fns;
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "cannot create a mutex");
    }
    if (pthread_cond_init(&a->work, NULL) != 0 || pthread_cond_init(&a->idle, NULL) != 0) {
        pthread_mutex_destroy(&a->lock);
        free(a);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "cannot create a condition variable");
    }
    for (int i = 0; i < workers; ++i) {
        a->workers[i].owner = a;
        if (pthread_create(&a->workers[i].thread, NULL, worker_main, &a->workers[i]) != 0) break;
        a->workers[i].started = true;
        a->nworkers++;
    }
    if (a->nworkers == 0) { /* no thread: tune without compiling ahead */
        tsr_ahead_stop(a, NULL);
        return TSR_SUCCESS;
    }
    *out = a;
    return TSR_SUCCESS;
}

int tsr_ahead_workers(const tsr_ahead *a) { return a ? a->nworkers : 0; }

static bool grow(void **array, int *cap, int need, size_t size) {
    if (need <= *cap) return true;
    int cap2 = *cap ? 2 * *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *grown = realloc(*array, (size_t)cap2 * size);
    if (!grown) return false;
    *array = grown;
    *cap = cap2;
    return true;
}

static bool was_submitted(const tsr_ahead *a, const tsr_config *config) {
    for (int i = 0; i < a->nsubmitted; ++i)
        if (memcmp(&a->submitted[i], config, sizeof *config) == 0) return true;
    return false;
}

void tsr_ahead_submit(tsr_ahead *a, const tsr_ahead_device *scope, const tsr_config *configs, int n) {
    if (!a || n <= 0) return;
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < n && !a->stop; ++i) {
        if (was_submitted(a, &configs[i])) continue;
        /* Out of memory: that configuration is compiled by the tuner itself, as without workers. */
        if (!grow((void **)&a->queue, &a->capqueue, a->nqueue + 1, sizeof *a->queue) ||
            !grow((void **)&a->submitted, &a->capsubmitted, a->nsubmitted + 1, sizeof *a->submitted))
            break;
        a->queue[a->nqueue++] = (ahead_job){.scope = *scope, .config = configs[i]};
        a->submitted[a->nsubmitted++] = configs[i];
        a->stats.submitted++;
    }
    pthread_cond_broadcast(&a->work);
    pthread_mutex_unlock(&a->lock);
}

bool tsr_ahead_submitted(tsr_ahead *a, const tsr_config *config) {
    if (!a) return false;
    pthread_mutex_lock(&a->lock);
    bool found = was_submitted(a, config);
    pthread_mutex_unlock(&a->lock);
    return found;
}

void tsr_ahead_idle(tsr_ahead *a) {
    if (!a) return;
    pthread_mutex_lock(&a->lock);
    while (a->nqueue > 0 || a->running > 0) pthread_cond_wait(&a->idle, &a->lock);
    pthread_mutex_unlock(&a->lock);
}

void tsr_ahead_end_scope(tsr_ahead *a, tsr_ahead_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!a) return;
    pthread_mutex_lock(&a->lock);
    /* Jobs not started are dropped. A running one is not waited for (a compile cannot be
     * interrupted, and the tuner has the next class's setup and first compile to do meanwhile; it
     * waits before it times anything, tsr_ahead_idle): it finishes, its result stays in the
     * driver's cache, unused, and it counts in the next scope's numbers. */
    a->stats.dropped += a->nqueue;
    a->nqueue = 0;
    if (stats) *stats = a->stats, stats->running = a->running;
    memset(&a->stats, 0, sizeof a->stats);
    a->nsubmitted = 0;
    pthread_mutex_unlock(&a->lock);
}

void tsr_ahead_stop(tsr_ahead *a, tsr_ahead_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!a) return;
    pthread_mutex_lock(&a->lock);
    /* as at a scope's end, and then the running jobs finish before the threads are joined */
    a->stats.dropped += a->nqueue;
    a->nqueue = 0;
    while (a->running > 0) pthread_cond_wait(&a->idle, &a->lock);
    a->stop = true;
    pthread_cond_broadcast(&a->work);
    pthread_mutex_unlock(&a->lock);
    for (int i = 0; i < TUNE_MAX_AHEAD; ++i)
        if (a->workers[i].started) pthread_join(a->workers[i].thread, NULL);
    if (stats) *stats = a->stats;
    pthread_cond_destroy(&a->work);
    pthread_cond_destroy(&a->idle);
    pthread_mutex_destroy(&a->lock);
    free(a->queue);
    free(a->submitted);
    free(a);
}

/* The first line of /proc/stat: the time all cores spent busy and in all (Linux; false elsewhere). */
static bool cpu_times(unsigned long long *busy, unsigned long long *total) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return false;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]);
    fclose(f);
    if (n < 4) return false;
    *total = 0;
    for (int i = 0; i < 8; ++i) *total += v[i];
    *busy = *total - v[3] - v[4]; /* all but idle and iowait (steal counts as busy: the core is not ours) */
    return true;
}

/* How many cores the rest of the machine keeps busy now: /proc/stat over 0.2 s where there is
 * one, else the last minute's load average. (The load average also counts what ended moments
 * ago: a tune run just before this one leaves it near 1.5 on two idle cores for a minute.) */
static double busy_cores(long cpus) {
    unsigned long long b0, t0, b1, t1;
    if (cpu_times(&b0, &t0)) {
        nanosleep(&(struct timespec){.tv_nsec = 200000000}, NULL);
        if (cpu_times(&b1, &t1) && t1 > t0) return (double)cpus * (double)(b1 - b0) / (double)(t1 - t0);
    }
    double load[1] = {0};
    return getloadavg(load, 1) == 1 ? load[0] : 0;
}

tsr_status tsr_ahead_default_workers(const tsr_device *dev, int *workers) {
    const char *env = getenv("TSR_TUNE_AHEAD");
    if (env && *env) {
        char *end = NULL;
        long n = strtol(env, &end, 10);
        if (!(end && *end == '\0' && n >= 0 && n <= 1000))
            return tsr_fail(TSR_ERR_INVALID_ARG, "TSR_TUNE_AHEAD='%s' is not a count of threads (0 compiles nothing "
                            "ahead)", env);
        *workers = n > TUNE_MAX_AHEAD ? TUNE_MAX_AHEAD : (int)n;
        return TSR_SUCCESS;
    }
    /* By default only where it was measured to pay: PoCL, whose kernel cache (on unless
     * POCL_KERNEL_CACHE=0) hands what one context compiled to another. Elsewhere a worker's compile
     * may not reach the tuner's context at all (TSR_TUNE_AHEAD turns it on). */
    const char *cache = getenv("POCL_KERNEL_CACHE");
    if (!tsr_contains_nocase(dev->info.platform_name, "Portable Computing Language") || (cache && strcmp(cache, "0") == 0)) {
        *workers = 0;
        return TSR_SUCCESS;
    }
    /* One core stays the tuner's (its own candidate compiles there meanwhile), and the others only
     * where they are idle: on a machine already busy (other processes keeping all but half a core
     * busy, busy_cores) a worker's compile takes the core the tuner's own compile needs, and
     * a budgeted tune measured fewer candidates with workers than without (docs/tuning.md). */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef CPU_COUNT
    cpu_set_t mine; /* the cores this process may run on (a container's or taskset's share) */
    if (sched_getaffinity(0, sizeof mine, &mine) == 0 && CPU_COUNT(&mine) > 0) cpus = CPU_COUNT(&mine);
#endif
    if (cpus >= 2 && busy_cores(cpus) > (double)cpus - 0.5) cpus = 1;
    *workers = cpus < 2 ? 0 : cpus - 1 > TUNE_MAX_AHEAD ? TUNE_MAX_AHEAD : (int)(cpus - 1);
    return TSR_SUCCESS;
}

/* ---- the device's workers: a private device, and a fixture of the problem of the class whose
 * candidate it runs (set up again when the class changes) ---- */

typedef struct device_worker {
    tsr_device *device;
    const tsr_op *op;  /* whose fixture `fixture` is: this op's... */
    char problem_class[32]; /* ...class (copies: a scope may be reused for another class)... */
    int step;               /* ...at this problem of the class */
    void *fixture;
} device_worker;

static tsr_status device_open(void *vctx, void **out) {
    tsr_device *tuner = vctx;
    tsr_status status = TSR_SUCCESS;
    cl_int err = CL_SUCCESS;
    device_worker *w = calloc(1, sizeof *w);
    if (!w) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    cl_context context = clCreateContext(NULL, 1, &tuner->id, NULL, NULL, &err);
    TSR_CL_CHECK(status, err, fail);
    status = tsr_device_wrap(context, tuner->id, NULL, &w->device);
    clReleaseContext(context); /* the wrapped device holds its own reference */
    if (status != TSR_SUCCESS) goto fail;
    /* As the tuner's device: nothing stored in the binary cache, programs split as while tuning. */
    pthread_mutex_lock(&w->device->program_lock);
    w->device->cache_store_paused++;
    pthread_mutex_unlock(&w->device->program_lock);
    atomic_fetch_add(&w->device->tuning, 1);
    *out = w;
    return TSR_SUCCESS;
fail:
    free(w);
    return status;
}

static void drop_fixture(device_worker *w) {
    if (w->fixture) tsr_op_tuning_free(w->op, w->fixture);
    w->fixture = NULL;
    w->op = NULL;
}

static tsr_status device_run_once(void *vctx, void *vworker, const tsr_ahead_device *scope, const tsr_config *config) {
    (void)vctx;
    device_worker *w = vworker;
    /* A scope is one of the tuner's classes: another op, class or step is another problem. */
    if (!w->fixture || w->op != scope->op || strcmp(w->problem_class, scope->problem_class) != 0 ||
        w->step != scope->step) {
        drop_fixture(w);
        tsr_status st = tsr_op_tuning_setup_step(scope->op, w->device, scope->problem_class, scope->step, &w->fixture);
        if (st != TSR_SUCCESS) return st;
        w->op = scope->op;
        w->step = scope->step;
        tsr_strlcpy(w->problem_class, scope->problem_class, sizeof w->problem_class);
    }
    cl_event first = NULL, last = NULL;
    tsr_status st = tsr_op_tuning_run(scope->op, w->device, w->fixture, config, &first, &last);
    if (st == TSR_SUCCESS && last) {
        cl_int err = clWaitForEvents(1, &last);
        if (err != CL_SUCCESS) st = tsr_fail_cl(err, "clWaitForEvents", __FILE__, __LINE__);
    }
    if (first) clReleaseEvent(first);
    if (last) clReleaseEvent(last);
    return st;
}

static void device_close(void *vctx, void *vworker) {
    (void)vctx;
    device_worker *w = vworker;
    drop_fixture(w);
    tsr_device_close(w->device);
    free(w);
}

tsr_ahead_fns tsr_ahead_device_fns(tsr_device *tuner) {
    return (tsr_ahead_fns){.open = device_open, .run = device_run_once, .close = device_close, .ctx = tuner};
}
