/* Compiling ahead in other processes. PoCL compiles a kernel for its work-group size at its first
 * launch, and two contexts of one process that launch at once compile one after the other (their
 * first runs on the pthread device queue behind each other): a worker thread then adds its
 * compile to the tuner's instead of running beside it. Two processes compile at once (measured:
 * two cold GEMM candidates, 5.0 s alone, 5.2 and 5.7 s side by side on two cores), and PoCL's
 * kernel cache on disk hands what one compiled to the other. So where an executable that serves
 * tsr_tune_serve is known ($TSR_TUNE_WORKER: `tessera tune` sets it to itself), each worker is a
 * child process speaking a line protocol over a socket:
 *
 *   child -> "ready <platform name>\t<device name>\n" once it opened the device ("P:D" it was given)
 *   tuner -> "<op>\t<class>\t<configuration>\n"          one run of the candidate there
 *   child -> "ok\n" or "fail <message>\n"
 *
 * The end of input ends the child. A child that does not answer in time is killed and its worker
 * fails its jobs (the tuner compiles those candidates itself). */
#define _GNU_SOURCE
#include "tuner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* A compile of the largest candidate takes seconds; a child silent this long is stuck. */
#define CHILD_ANSWER_SECONDS 300

static bool send_all(int fd, const char *text) {
    size_t left = strlen(text);
    while (left > 0) {
        ssize_t n = send(fd, text, left, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        text += n, left -= (size_t)n;
    }
    return true;
}

/* One line (without its newline) into line[size]; false at the end of input, on a timeout or
 * error, or on a line too long. */
/* One line from fd without its newline: LINE_OK, LINE_LONG (the line did not fit in size - 1 bytes:
 * the rest of it, up to its newline, is read and dropped so the next line starts clean) or
 * LINE_END (end of input or an error). */
typedef enum { LINE_OK, LINE_LONG, LINE_END } line_result;

static line_result read_line_ex(int fd, char *line, size_t size) {
    size_t used = 0;
    bool long_line = false;
    for (;;) {
        char c;
        ssize_t n = recv(fd, &c, 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return LINE_END;
        if (c == '\n') break;
        if (used + 1 >= size) {
            long_line = true;
            continue;
        }
        line[used++] = c;
    }
    line[used] = '\0';
    return long_line ? LINE_LONG : LINE_OK;
}

static bool read_line(int fd, char *line, size_t size) { return read_line_ex(fd, line, size) == LINE_OK; }

/* ---- the tuner's side ---- */

typedef struct child_worker {
    pid_t pid;
    int fd;
} child_worker;

typedef struct process_ctx {
    tsr_device *tuner;
    char exe[TSR_PATH_MAX];
} process_ctx;

static void child_end(child_worker *w, bool kill_it) {
    if (w->fd >= 0) close(w->fd); /* the child reads the end of its input and exits */
    w->fd = -1;
    if (w->pid > 0) {
        if (kill_it) kill(w->pid, SIGKILL);
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    w->pid = -1;
}

static tsr_status process_open(void *vctx, void **out) {
    process_ctx *ctx = vctx;
    const tsr_device_info *info = &ctx->tuner->info;
    if (info->platform_index < 0 || info->device_index < 0)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "the tuner's device has no selector (a wrapped context)");
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "socketpair: %s", strerror(errno));
    if (sv[1] == 3) { /* dup2 onto itself would keep close-on-exec: the child gets it as 3 from another number */
        int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, 4);
        if (moved < 0) {
            close(sv[0]), close(sv[1]);
            return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "fcntl: %s", strerror(errno));
        }
        close(sv[1]);
        sv[1] = moved;
    }
    child_worker *w = calloc(1, sizeof *w);
    if (!w) {
        close(sv[0]), close(sv[1]);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    }
    w->fd = sv[0];
    w->pid = -1;
    char selector[32];
    snprintf(selector, sizeof selector, "%d:%d", info->platform_index, info->device_index);
    char *argv[] = {ctx->exe, "tune-worker", "--device", selector, "--fd", "3", NULL};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, sv[1], 3); /* dup2 clears close-on-exec */
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int err = posix_spawn(&pid, ctx->exe, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(sv[1]);
    if (err != 0) {
        child_end(w, false);
        free(w);
        return tsr_fail(TSR_ERR_INVALID_ARG, "cannot start the tuning worker '%s': %s", ctx->exe, strerror(err));
    }
    w->pid = pid;
    struct timeval tv = {.tv_sec = CHILD_ANSWER_SECONDS};
    setsockopt(w->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    /* The child must have opened this very device: same platform, same device name. */
    char line[2 * TSR_INFO_STR + 16], want[2 * TSR_INFO_STR + 16];
    snprintf(want, sizeof want, "ready %s\t%s", info->platform_name, info->name);
    if (!read_line(w->fd, line, sizeof line) || strcmp(line, want) != 0) {
        child_end(w, true);
        free(w);
        return tsr_fail(TSR_ERR_UNSUPPORTED, "the tuning worker '%s' did not open device %s", ctx->exe, selector);
    }
    *out = w;
    return TSR_SUCCESS;
}

static tsr_status process_run(void *vctx, void *vworker, const tsr_ahead_device *scope, const tsr_config *config) {
    (void)vctx;
    child_worker *w = vworker;
    if (w->fd < 0) return tsr_fail(TSR_ERR_UNSUPPORTED, "the tuning worker has ended");
    char text[512], request[600], line[512];
    tsr_config_format(scope->op, config, text, sizeof text);
    if (scope->step) /* a smaller problem of the class (a slow device) */
        snprintf(request, sizeof request, "%s\t%s\t%s\t%d\n", scope->op->name, scope->problem_class, text, scope->step);
    else
        snprintf(request, sizeof request, "%s\t%s\t%s\n", scope->op->name, scope->problem_class, text);
    if (!send_all(w->fd, request) || !read_line(w->fd, line, sizeof line)) {
        child_end(w, true); /* gone, or stuck past the timeout: its later jobs fail at once */
        return tsr_fail(TSR_ERR_UNSUPPORTED, "the tuning worker stopped answering");
    }
    if (strcmp(line, "ok") != 0) return tsr_fail(TSR_ERR_BUILD, "tuning worker: %s", line);
    return TSR_SUCCESS;
}

static void process_close(void *vctx, void *vworker) {
    (void)vctx;
    child_worker *w = vworker;
    child_end(w, false);
    free(w);
}

bool tsr_ahead_process_fns(tsr_device *tuner, tsr_ahead_fns *fns, void **ctx_out) {
    *ctx_out = NULL;
    const char *exe = getenv("TSR_TUNE_WORKER");
    if (!exe || !*exe || access(exe, X_OK) != 0 || strlen(exe) >= TSR_PATH_MAX) return false;
    if (tuner->info.platform_index < 0 || tuner->info.device_index < 0) return false;
    process_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return false;
    ctx->tuner = tuner;
    tsr_strlcpy(ctx->exe, exe, sizeof ctx->exe);
    *fns = (tsr_ahead_fns){.open = process_open, .run = process_run, .close = process_close, .ctx = ctx};
    *ctx_out = ctx;
    return true;
}

/* ---- the child's side ---- */

tsr_status tsr_tune_serve(tsr_device *device, int fd) {
    if (!device) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_tune_serve: device is NULL");
    if (fd < 0) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_tune_serve: fd %d is not a descriptor", fd);
    signal(SIGPIPE, SIG_IGN); /* a tuner that went away ends the loop with an error, not the process */
    /* As the tuner's device while tuning: nothing stored in the binary cache, programs split so. */
    pthread_mutex_lock(&device->program_lock);
    device->cache_store_paused++;
    pthread_mutex_unlock(&device->program_lock);
    atomic_fetch_add(&device->tuning, 1);
    char line[1024];
    snprintf(line, sizeof line, "ready %s\t%s\n", device->info.platform_name, device->info.name);
    tsr_status status = send_all(fd, line) ? TSR_SUCCESS : tsr_fail(TSR_ERR_INVALID_ARG, "cannot write to fd %d", fd);
    const tsr_op *op = NULL;
    char problem_class[32] = "";
    int step = 0;
    void *fixture = NULL;
    line_result got;
    while (status == TSR_SUCCESS && (got = read_line_ex(fd, line, sizeof line)) != LINE_END) {
        char *cls = strchr(line, '\t'), *cfg = cls ? strchr(cls + 1, '\t') : NULL;
        char *step_text = cfg ? strchr(cfg + 1, '\t') : NULL;
        int want_step = 0;
        const tsr_op *want = NULL;
        tsr_config config;
        tsr_status st;
        if (got == LINE_LONG) {
            st = tsr_fail(TSR_ERR_INVALID_ARG, "a request line is at most %zu bytes", sizeof line - 1);
        } else if (!cfg) {
            st = tsr_fail(TSR_ERR_INVALID_ARG, "a request is '<op>\\t<class>\\t<configuration>[\\t<step>]'");
        } else if (step_text && (strspn(step_text + 1, "0123456789") != strlen(step_text + 1) || !step_text[1] ||
                                 strlen(step_text + 1) > 2)) {
            st = tsr_fail(TSR_ERR_INVALID_ARG, "a request's step '%s' is not a small count", step_text + 1);
        } else {
            if (step_text) *step_text++ = '\0', want_step = atoi(step_text);
            *cls++ = '\0', *cfg++ = '\0';
            want = tsr_find_op(line);
            st = want ? tsr_config_parse(want, cfg, "a tuning worker's request", &config)
                      : tsr_fail(TSR_ERR_INVALID_ARG, "no op '%s'", line);
        }
        if (st == TSR_SUCCESS && (!fixture || op != want || strcmp(problem_class, cls) != 0 || step != want_step)) {
            if (fixture) tsr_op_tuning_free(op, fixture);
            fixture = NULL;
            op = want;
            step = want_step;
            tsr_strlcpy(problem_class, cls, sizeof problem_class);
            st = tsr_op_tuning_setup_step(op, device, problem_class, step, &fixture);
        }
        if (st == TSR_SUCCESS) {
            cl_event first = NULL, last = NULL;
            st = tsr_op_tuning_run(op, device, fixture, &config, &first, &last);
            if (st == TSR_SUCCESS && last) {
                cl_int err = clWaitForEvents(1, &last);
                if (err != CL_SUCCESS) st = tsr_fail_cl(err, "clWaitForEvents", __FILE__, __LINE__);
            }
            if (first) clReleaseEvent(first);
            if (last) clReleaseEvent(last);
        }
        char answer[600];
        if (st == TSR_SUCCESS) {
            snprintf(answer, sizeof answer, "ok\n");
        } else {
            snprintf(answer, sizeof answer, "fail %.500s\n", tsr_last_error());
            for (char *p = answer + 5; *p && p[1]; ++p)
                if (*p == '\n') *p = ' ';
            tsr_clear_error();
        }
        if (!send_all(fd, answer)) break;
    }
    if (fixture) tsr_op_tuning_free(op, fixture);
    atomic_fetch_sub(&device->tuning, 1);
    pthread_mutex_lock(&device->program_lock);
    device->cache_store_paused--;
    pthread_mutex_unlock(&device->program_lock);
    return status;
}
