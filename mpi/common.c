/* The MPI component's job control: aborting with a clear message, waits that time out instead of
 * hanging, the argument check, opening a device per rank (ranks without one are split off),
 * gathering text to rank 0, and the fault-injection hook the tests use. */
#include "tessera_mpi.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define DEFAULT_TIMEOUT_S 600.0
#define MAX_TIMEOUT_S (7.0 * 24 * 3600)
#define SPIN_S 1e-4           /* poll without sleeping this long: short waits stay short */
#define MAX_SLEEP_NS 500000   /* then sleep up to 0.5 ms between polls */
#define BUSY_SLEEP_NS 2000000 /* or 2 ms while the device is still busy (tsr_mpi_wait_while) */

const char *tsr_mpi_whoami(void) {
    static char who[MPI_MAX_PROCESSOR_NAME + 32];
    if (!who[0]) {
        int rank = -1, len = 0, inited = 0;
        char host[MPI_MAX_PROCESSOR_NAME] = "";
        MPI_Initialized(&inited);
        if (inited) {
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            MPI_Get_processor_name(host, &len);
        }
        if (!host[0] && gethostname(host, sizeof host - 1) != 0) strcpy(host, "?");
        snprintf(who, sizeof who, "rank %d (%s)", rank, host);
    }
    return who;
}

void tsr_mpi_abort(MPI_Comm comm, const char *fmt, ...) {
    char message[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tessera-mpi: %s: %s\n", tsr_mpi_whoami(), message);
    fflush(stderr);
    MPI_Abort(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, 3);
    exit(3); /* MPI_Abort does not return; this keeps the promise if an implementation did */
}

double tsr_mpi_timeout(void) {
    static double timeout = 0;
    if (timeout > 0) return timeout;
    const char *text = getenv("TSR_MPI_TIMEOUT");
    if (!text || !*text) return timeout = DEFAULT_TIMEOUT_S;
    /* Digits and one point only: no sign, exponent, inf or nan, which strtod would take. */
    size_t digits = strspn(text, "0123456789.");
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (digits != strlen(text) || strchr(text, '.') != strrchr(text, '.') || end != text + strlen(text) || errno != 0 ||
        !(value > 0) || value > MAX_TIMEOUT_S)
        tsr_mpi_abort(MPI_COMM_WORLD,
                      "TSR_MPI_TIMEOUT=\"%s\" is not a number of seconds (a positive decimal number, at most %.0f)",
                      text, MAX_TIMEOUT_S);
    return timeout = value;
}

int tsr_mpi_test(MPI_Comm comm, MPI_Request *req, const char *what) {
    if (*req == MPI_REQUEST_NULL) return 1;
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) tsr_mpi_abort(comm, "MPI_Test failed (error %d) for %s", rc, what);
    return done;
}

/* ---- heartbeats ---- */

#define HEARTBEAT_TAG 0x7e57   /* on MPI_COMM_WORLD; under the 32767 every MPI allows */
#define MAX_HEARTBEAT_S 5.0    /* a heartbeat at most this often, and at least a quarter of the time-out */
#define HEARTBEAT_CHECK_S 0.01 /* a waiting rank looks for heartbeats this often */

static double heartbeat_interval(void) {
    double quarter = tsr_mpi_timeout() / 4;
    return quarter < MAX_HEARTBEAT_S ? quarter : MAX_HEARTBEAT_S;
}

void tsr_mpi_heartbeat(void) {
    static double last = -1e300;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized) return;
    double now = MPI_Wtime();
    if (now - last < heartbeat_interval()) return;
    last = now;
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    /* Zero bytes, sent eagerly: the request completes locally and is freed at once, so nothing
     * piles up in this rank whether or not the peer is listening. */
    for (int r = 0; r < ranks; ++r) {
        if (r == rank) continue;
        MPI_Request req;
        if (MPI_Isend(NULL, 0, MPI_BYTE, r, HEARTBEAT_TAG, MPI_COMM_WORLD, &req) == MPI_SUCCESS) MPI_Request_free(&req);
    }
}

/* Receive every heartbeat that has arrived: 1 when there was one. */
static int heard_heartbeat(void) {
    int heard = 0;
    for (;;) {
        int flag = 0;
        MPI_Status status;
        if (MPI_Iprobe(MPI_ANY_SOURCE, HEARTBEAT_TAG, MPI_COMM_WORLD, &flag, &status) != MPI_SUCCESS || !flag)
            return heard;
        MPI_Recv(NULL, 0, MPI_BYTE, status.MPI_SOURCE, HEARTBEAT_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        heard = 1;
    }
}

/* The deadline of a wait: TSR_MPI_TIMEOUT seconds of silence, counted again from each heartbeat. */
typedef struct wait_clock {
    double start, quiet_since, checked;
} wait_clock;

static void clock_start(wait_clock *clock) { clock->start = clock->quiet_since = clock->checked = MPI_Wtime(); }

static void clock_check(wait_clock *clock, double now, MPI_Comm comm, const char *what) {
    if (now - clock->checked >= HEARTBEAT_CHECK_S) {
        clock->checked = now;
        if (heard_heartbeat()) clock->quiet_since = now;
    }
    double limit = tsr_mpi_timeout();
    if (now - clock->quiet_since > limit)
        tsr_mpi_abort(comm,
                      "timed out after %g s waiting for %s (no rank reported progress for that long: a peer rank "
                      "died or stalled?; TSR_MPI_TIMEOUT sets the limit)",
                      limit, what);
}

double tsr_mpi_wait(MPI_Comm comm, MPI_Request *req, const char *what) {
    if (*req == MPI_REQUEST_NULL) return 0;
    wait_clock clock;
    clock_start(&clock);
    long sleep_ns = 1000;
    for (;;) {
        if (tsr_mpi_test(comm, req, what)) {
            tsr_mpi_heartbeat(); /* an operation completed: this rank makes progress */
            return MPI_Wtime() - clock.start;
        }
        double now = MPI_Wtime();
        clock_check(&clock, now, comm, what);
        if (now - clock.start < SPIN_S) {
            sched_yield();
        } else {
            struct timespec pause = {0, sleep_ns};
            nanosleep(&pause, NULL);
            if (sleep_ns < MAX_SLEEP_NS) sleep_ns *= 2;
            if (sleep_ns > MAX_SLEEP_NS) sleep_ns = MAX_SLEEP_NS;
        }
    }
}

/* tsr_mpi_wait_device's completion flag, set by the event's callback (a driver thread). The
 * waiter may return before the callback runs (it saw the status by polling): whichever of the
 * two comes second frees it. */
typedef struct device_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, abandoned;
    cl_int status;
} device_wait;

static void free_device_wait(device_wait *w) {
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

static void CL_CALLBACK device_wait_done(cl_event event, cl_int status, void *user) {
    (void)event;
    device_wait *w = user;
    pthread_mutex_lock(&w->lock);
    int abandoned = w->abandoned;
    w->status = status;
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    if (abandoned) free_device_wait(w);
}

tsr_status tsr_mpi_wait_device(cl_event event, const char *what) {
    cl_command_queue queue = NULL;
    cl_int err = clGetEventInfo(event, CL_EVENT_COMMAND_QUEUE, sizeof queue, &queue, NULL);
    if (err == CL_SUCCESS && queue) err = clFlush(queue); /* waiting alone would never start it */
    if (err != CL_SUCCESS) return tsr_set_cl_error(err, what, __FILE__, __LINE__);
    /* Poll its status with a growing pause (as tsr_mpi_wait_while does), sending heartbeats; a
     * completion callback, where the platform runs one, ends the pause at once, so the end of a
     * short command is seen without waiting for the next poll. No lock is held across an OpenCL
     * call: a platform may run the callback inside one. */
    device_wait *w = calloc(1, sizeof *w);
    if (!w) return tsr_set_error(TSR_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    int callback = clSetEventCallback(event, CL_COMPLETE, device_wait_done, w) == CL_SUCCESS;
    long sleep_ns = 1000;
    cl_int state = CL_QUEUED;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        int done = w->done;
        state = w->status;
        pthread_mutex_unlock(&w->lock);
        err = done ? CL_SUCCESS : clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL);
        if (err != CL_SUCCESS || state <= CL_COMPLETE) break; /* complete, or failed */
        tsr_mpi_heartbeat();                                  /* the device is working on it */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += sleep_ns;
        if (until.tv_nsec >= 1000000000L) until.tv_sec += 1, until.tv_nsec -= 1000000000L;
        pthread_mutex_lock(&w->lock);
        if (!w->done) pthread_cond_timedwait(&w->cond, &w->lock, &until);
        pthread_mutex_unlock(&w->lock);
        if (sleep_ns < BUSY_SLEEP_NS) sleep_ns *= 2;
    }
    pthread_mutex_lock(&w->lock);
    int free_now = !callback || w->done;
    w->abandoned = 1;
    pthread_mutex_unlock(&w->lock);
    if (free_now) free_device_wait(w);
    if (err != CL_SUCCESS || state < 0) return tsr_set_cl_error(err != CL_SUCCESS ? err : state, what, __FILE__, __LINE__);
    return TSR_SUCCESS;
}

/* ---- the fault hook ---- */

enum { FAULT_STALL, FAULT_EXIT, FAULT_CORRUPT };

typedef struct fault_spec {
    int parsed, fired;
    int kind; /* FAULT_STALL, FAULT_EXIT or FAULT_CORRUPT */
    int rank; /* -1: no fault */
    char point[64];
} fault_spec;

static fault_spec fault = {0, 0, 0, -1, ""};

static void parse_fault(void) {
    fault.parsed = 1;
    const char *text = getenv("TSR_MPI_FAULT");
    if (!text || !*text) return;
    char kind[16] = "";
    const char *colon = strchr(text, ':');
    if (colon && (size_t)(colon - text) < sizeof kind) memcpy(kind, text, (size_t)(colon - text));
    int stall = strcmp(kind, "stall") == 0, exit_kind = strcmp(kind, "exit") == 0,
        corrupt = strcmp(kind, "corrupt") == 0;
    const char *rank_text = colon ? colon + 1 : "";
    size_t rank_digits = strspn(rank_text, "0123456789");
    const char *rest = rank_text + rank_digits;
    long rank = rank_digits && rank_digits < 8 ? strtol(rank_text, NULL, 10) : -1;
    if ((!stall && !exit_kind && !corrupt) || rank < 0 || (*rest && (*rest != ':' || !rest[1])) ||
        strlen(rest) >= sizeof fault.point)
        tsr_mpi_abort(MPI_COMM_WORLD,
                      "TSR_MPI_FAULT=\"%s\" is not KIND:RANK[:POINT] with KIND stall, exit or corrupt (e.g. "
                      "stall:1:summa)",
                      text);
    fault.kind = stall ? FAULT_STALL : exit_kind ? FAULT_EXIT : FAULT_CORRUPT;
    fault.rank = (int)rank;
    if (*rest) strcpy(fault.point, rest + 1);
}

int tsr_mpi_fault_point(const char *point) {
    if (!fault.parsed) parse_fault();
    if (fault.rank < 0 || fault.fired) return 0;
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != fault.rank || (fault.point[0] && strcmp(fault.point, point) != 0)) return 0;
    fault.fired = 1;
    static const char *const doing[] = {"stalling", "exiting", "corrupting its output"};
    fprintf(stderr, "tessera-mpi: %s: TSR_MPI_FAULT: %s at %s\n", tsr_mpi_whoami(), doing[fault.kind], point);
    fflush(stderr);
    if (fault.kind == FAULT_CORRUPT) return 1;
    if (fault.kind == FAULT_EXIT) exit(1);
    for (;;)
        pause();
}

/* ---- gathering text ---- */

char *tsr_mpi_gather_text(MPI_Comm comm, const char *mine, size_t **offsets_out) {
    int rank = 0, ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    if (offsets_out) *offsets_out = NULL;
    if (!mine) mine = "";
    size_t len = strlen(mine) + 1;
    if (len > INT_MAX) tsr_mpi_abort(comm, "gathering text: this rank's text is %zu bytes, over INT_MAX", len);
    int my_size = (int)len;
    int *sizes = NULL, *displs = NULL;
    char *all = NULL;
    if (rank == 0) {
        sizes = calloc((size_t)ranks, sizeof *sizes);
        displs = calloc((size_t)ranks, sizeof *displs);
        if (!sizes || !displs) tsr_mpi_abort(comm, "gathering text: out of host memory");
    }
    MPI_Request req;
    MPI_Igather(&my_size, 1, MPI_INT, sizes, 1, MPI_INT, 0, comm, &req);
    tsr_mpi_wait(comm, &req, "the sizes of gathered text (MPI_Igather)");
    size_t total = 0;
    if (rank == 0) {
        for (int r = 0; r < ranks; ++r) {
            displs[r] = (int)total;
            total += (size_t)sizes[r];
            if (total > INT_MAX) tsr_mpi_abort(comm, "gathering text: %zu bytes in all, over INT_MAX", total);
        }
        all = malloc(total ? total : 1);
        if (!all) tsr_mpi_abort(comm, "gathering text: out of host memory for %zu bytes", total);
    }
    MPI_Igatherv(mine, my_size, MPI_CHAR, all, sizes, displs, MPI_CHAR, 0, comm, &req);
    tsr_mpi_wait(comm, &req, "gathered text (MPI_Igatherv)");
    if (rank == 0) {
        for (int r = 0; r < ranks; ++r) /* a text is NUL-terminated whatever a rank sent */
            if (sizes[r] < 1 || all[displs[r] + sizes[r] - 1] != '\0')
                tsr_mpi_abort(comm, "gathering text: rank %d sent a text without its terminating NUL", r);
        if (offsets_out) {
            *offsets_out = malloc((size_t)ranks * sizeof **offsets_out);
            if (!*offsets_out) tsr_mpi_abort(comm, "gathering text: out of host memory");
            for (int r = 0; r < ranks; ++r)
                (*offsets_out)[r] = (size_t)displs[r];
        }
    }
    free(sizes);
    free(displs);
    return all;
}

/* ---- the argument check ---- */

/* The arguments as one line, each in double quotes when it holds a space or is empty. */
static char *join_args(int argc, char **argv) {
    size_t size = 1;
    for (int i = 1; i < argc; ++i)
        size += strlen(argv[i]) + 3;
    char *line = malloc(size), *at = line;
    if (!line) return NULL;
    *at = '\0';
    for (int i = 1; i < argc; ++i) {
        int quote = !argv[i][0] || strpbrk(argv[i], " \t\n") != NULL;
        at += sprintf(at, "%s%s%s%s", i > 1 ? " " : "", quote ? "\"" : "", argv[i], quote ? "\"" : "");
    }
    return line;
}

void tsr_mpi_check_args(MPI_Comm comm, int argc, char **argv) {
    int rank = 0, ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    XXH64_state_t *state = XXH64_createState();
    if (!state) tsr_mpi_abort(comm, "checking arguments: out of host memory");
    XXH64_reset(state, 0);
    for (int i = 1; i < argc; ++i)
        XXH64_update(state, argv[i], strlen(argv[i]) + 1);
    unsigned long long mine = (unsigned long long)XXH64_digest(state);
    XXH64_freeState(state);
    tsr_mpi_fault_point("args");

    unsigned long long *hashes = malloc((size_t)ranks * sizeof *hashes);
    if (!hashes) tsr_mpi_abort(comm, "checking arguments: out of host memory");
    MPI_Request req;
    MPI_Iallgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, hashes, 1, MPI_UNSIGNED_LONG_LONG, comm, &req);
    tsr_mpi_wait(comm, &req, "the argument hashes of every rank (MPI_Iallgather)");
    int differing = 0;
    for (int r = 1; r < ranks; ++r)
        differing += hashes[r] != hashes[0];
    if (!differing) {
        free(hashes);
        return;
    }
    /* Every rank knows; gather the lines so rank 0 can show them, then all abort once it has. */
    char *line = join_args(argc, argv);
    char who_and_line[8192];
    snprintf(who_and_line, sizeof who_and_line, "%s: %s", tsr_mpi_whoami(), line ? line : "(out of memory)");
    free(line);
    size_t *offsets = NULL;
    char *lines = tsr_mpi_gather_text(comm, who_and_line, &offsets);
    char list[1024] = "";
    size_t used = 0;
    for (int r = 1; r < ranks && used + 16 < sizeof list; ++r)
        if (hashes[r] != hashes[0])
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", used ? ", " : "", r);
    if (rank == 0) {
        fprintf(stderr, "tessera-mpi: arguments differ between ranks; rank 0 has\n  %s\n", lines + offsets[0]);
        for (int r = 1; r < ranks; ++r)
            if (hashes[r] != hashes[0]) fprintf(stderr, "and differs from\n  %s\n", lines + offsets[r]);
        fflush(stderr);
    }
    free(lines);
    free(offsets);
    MPI_Ibarrier(comm, &req); /* rank 0 enters after printing: nobody aborts the job before that */
    tsr_mpi_wait(comm, &req, "the other ranks before aborting on differing arguments (MPI_Ibarrier)");
    tsr_mpi_abort(comm,
                  "arguments differ between ranks: rank%s %s differ%s from rank 0; every rank must get the same "
                  "arguments",
                  differing > 1 ? "s" : "", list, differing > 1 ? "" : "s");
}

/* ---- one device per rank ---- */

tsr_status tsr_mpi_open_device(MPI_Comm comm, const char *selector, tsr_device **device, MPI_Comm *active) {
    *device = NULL;
    *active = MPI_COMM_NULL;
    int rank = 0, ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    tsr_device *dev = NULL;
    tsr_status status = tsr_device_open(selector, &dev);
    char reason[3072] = "", note[4096] = "";
    if (status != TSR_SUCCESS) {
        snprintf(reason, sizeof reason, "%s (%s)", tsr_last_error(), tsr_status_str(status));
        snprintf(note, sizeof note, "tessera-mpi: %s: no OpenCL device: %s; excluded", tsr_mpi_whoami(), reason);
    }
    tsr_mpi_fault_point("device");

    int have = status == TSR_SUCCESS;
    int *haves = malloc((size_t)ranks * sizeof *haves);
    if (!haves) tsr_mpi_abort(comm, "opening devices: out of host memory");
    MPI_Request req;
    MPI_Iallgather(&have, 1, MPI_INT, haves, 1, MPI_INT, comm, &req);
    tsr_mpi_wait(comm, &req, "which ranks have a device (MPI_Iallgather)");
    char *notes = tsr_mpi_gather_text(comm, note, NULL);
    int count = 0;
    for (int r = 0; r < ranks; ++r)
        count += haves[r] != 0;
    if (rank == 0 && notes) {
        size_t offset = 0;
        for (int r = 0; r < ranks; ++r) {
            if (notes[offset]) fprintf(stderr, "%s\n", notes + offset);
            offset += strlen(notes + offset) + 1;
        }
        fflush(stderr);
    }
    free(notes);
    if (count == 0) {
        free(haves);
        return tsr_set_error(TSR_ERR_NO_DEVICE,
                             "no rank of the job could open an OpenCL device (rank 0 printed each rank's reason)%s%s",
                             have ? "" : "; this rank: ", have ? "" : reason);
    }
    if (count == ranks) {
        MPI_Comm_idup(comm, active, &req);
        tsr_mpi_wait(comm, &req, "the communicator of ranks with a device (MPI_Comm_idup)");
    } else if (have) {
        /* Only the members take part, and each just answered the all-gather. */
        int *members = malloc((size_t)count * sizeof *members), n = 0;
        if (!members) tsr_mpi_abort(comm, "opening devices: out of host memory");
        for (int r = 0; r < ranks; ++r)
            if (haves[r]) members[n++] = r;
        MPI_Group all, with_device;
        MPI_Comm_group(comm, &all);
        MPI_Group_incl(all, count, members, &with_device);
        MPI_Comm_create_group(comm, with_device, 0x7e55, active);
        MPI_Group_free(&with_device);
        MPI_Group_free(&all);
        free(members);
    }
    free(haves);
    *device = dev;
    return TSR_SUCCESS;
}

double tsr_mpi_wait_while(MPI_Comm comm, int count, MPI_Request *reqs, const char *what, cl_event busy, double *idle) {
    wait_clock clock;
    clock_start(&clock);
    double start = clock.start, busy_done = busy ? -1.0 : start;
    long sleep_ns = 1000;
    for (;;) {
        int done = 1;
        for (int i = 0; i < count; ++i)
            done &= tsr_mpi_test(comm, &reqs[i], what);
        double now = MPI_Wtime();
        if (busy_done < 0) {
            cl_int state = CL_QUEUED;
            if (clGetEventInfo(busy, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL) != CL_SUCCESS ||
                state <= CL_COMPLETE) /* complete, or failed: either way the device is not busy with it */
                busy_done = now;
        }
        if (done) {
            if (idle) *idle = busy_done >= 0 ? now - busy_done : 0;
            tsr_mpi_heartbeat();
            return now - start;
        }
        clock_check(&clock, now, comm, what);
        /* While the device still computes, poll rarely: each wake-up takes a core from the GEMM
         * when ranks share cores, and a panel's GEMM takes far longer than a poll interval. */
        long cap = busy_done < 0 ? BUSY_SLEEP_NS : MAX_SLEEP_NS;
        if (now - start < SPIN_S) {
            sched_yield();
        } else {
            struct timespec pause = {0, sleep_ns < cap ? sleep_ns : cap};
            nanosleep(&pause, NULL);
            if (sleep_ns < BUSY_SLEEP_NS) sleep_ns *= 2;
        }
    }
}
