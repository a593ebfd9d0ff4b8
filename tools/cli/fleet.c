/* `tessera report --mpi` and `tessera tune --mpi`: each rank measures or tunes its own devices,
 * rank 0 gathers the results (text, checked on arrival like any foreign file) and writes the
 * one merged report or tuning database. Built on the MPI component's job control (tessera_mpi.h):
 * every wait times out, argument mismatches and dead peers end the job with a message. */
#include "fleet.h"

#include "cli.h"
#include "tessera_mpi.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What rank 0 tells every rank before any work: go ahead (or stop: rank 0 refused the output)
 * and the run's name, which marks every device measured in it. */
typedef struct fleet_start {
    char go; /* 'y': go ahead */
    char run[127];
} fleet_start;

static bool init_mpi(void) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(NULL, NULL); /* without mpirun: a singleton, a fleet of one */
    return !inited;
}

static void finish_mpi(bool ours) {
    if (ours) MPI_Finalize();
}

/* Rank 0's decision, and the run name, on every rank. */
static void share_start(fleet_start *start) {
    MPI_Request req;
    MPI_Ibcast(start, (int)sizeof *start, MPI_CHAR, 0, MPI_COMM_WORLD, &req);
    tsr_mpi_wait(MPI_COMM_WORLD, &req, "rank 0's go-ahead (MPI_Ibcast)");
    start->run[sizeof start->run - 1] = '\0';
}

/* The name of this run: rank 0's host, process and start time. */
static void run_name(char *out, size_t size) {
    char host[128] = "";
    if (gethostname(host, sizeof host - 1) != 0) strcpy(host, "?");
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(out, size, "%s-%ld-%s", host, (long)getpid(), when);
}

/* Every rank is done with its own work: the point where a stalled or dead rank shows. A rank
 * that is done early (no device, a quick report) waits here as long as the others work: their
 * heartbeats (fleet_progress) reset its deadline; only TSR_MPI_TIMEOUT seconds in which no rank
 * made progress end the job. `what` names the work for the time-out message. */
static void wait_for_everyone(const char *what) {
    char text[256];
    snprintf(text, sizeof text, "every rank to finish %s", what);
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    tsr_mpi_wait(MPI_COMM_WORLD, &req, text);
}

/* A step of this rank's report or tuning: tell the waiting ranks this one is alive and working. */
static void fleet_progress(void *user) {
    (void)user;
    tsr_mpi_heartbeat();
}

static void fleet_tune_progress(const tsr_tune_progress *progress, void *user) {
    (void)progress;
    fleet_progress(user);
}

/* Decimal digits of the highest rank: rank directories sort in rank order. */
static int rank_width(int ranks) {
    int width = 1;
    for (int r = ranks - 1; r >= 10; r /= 10)
        ++width;
    return width;
}

/* ---- report --mpi ---- */

/* A rank directory of an earlier run that is not one of this run's: its files are ours (a report
 * as report_write leaves it), so they go, and the directory if nothing else is in it; a merge of
 * OUT/ranks/rank-* then sees this run's reports only. */
static void remove_stale_rank_dirs(const char *out_dir, int ranks, int width) {
    char ranks_dir[4096];
    snprintf(ranks_dir, sizeof ranks_dir, "%s/ranks", out_dir);
    DIR *dir = opendir(ranks_dir);
    if (!dir) return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        const char *digits = e->d_name + 5;
        size_t n = strspn(digits, "0123456789");
        if (strncmp(e->d_name, "rank-", 5) != 0 || n == 0 || digits[n]) continue;
        if ((int)n == width && atoi(digits) < ranks) continue; /* this run's */
        char sub[4400];
        snprintf(sub, sizeof sub, "%s/%s", ranks_dir, e->d_name);
        DIR *inner = opendir(sub);
        if (!inner) continue;
        struct dirent *f;
        while ((f = readdir(inner))) {
            const char *name = f->d_name, *dot = strrchr(name, '.');
            bool chart = (strncmp(name, "roofline-", 9) == 0 || strncmp(name, "bars.", 5) == 0) && dot &&
                         (strcmp(dot, ".svg") == 0 || strcmp(dot, ".png") == 0);
            if (!chart && strcmp(name, "report.json") != 0 && strcmp(name, "report.md") != 0) continue;
            char file[4800];
            snprintf(file, sizeof file, "%s/%s", sub, name);
            unlink(file);
        }
        closedir(inner);
        rmdir(sub); /* stays if the user put something else there */
    }
    closedir(dir);
}

/* This rank's report when report_run could not make one (no OpenCL platform, say): no devices
 * and a note that says why, so the merged report names the rank. */
static cJSON *no_report(tsr_status status, int ranks) {
    char note[2048];
    snprintf(note, sizeof note, "%s of %d: no report from it: %s: %s; excluded", tsr_mpi_whoami(), ranks,
             tsr_status_str(status), tsr_last_error());
    fprintf(stderr, "tessera-mpi: %s\n", note);
    cJSON *root = report_new(NULL);
    if (root) cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(root, "notes"), cJSON_CreateString(note));
    return root;
}

/* Each device records which rank of which run measured it. */
static void mark_devices(cJSON *root, int rank, int ranks, const char *run) {
    cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        cJSON *mpi = cJSON_CreateObject();
        cJSON_AddNumberToObject(mpi, "rank", rank);
        cJSON_AddNumberToObject(mpi, "ranks", ranks);
        cJSON_AddStringToObject(mpi, "run", run);
        cJSON_DeleteItemFromObjectCaseSensitive(d, "mpi");
        cJSON_AddItemToObject(d, "mpi", mpi);
    }
}

/* Rank 0: check and write the reports the ranks sent (`texts`, one after another), then merge
 * them. Returns the exit status. */
static int write_fleet_report(const char *texts, const size_t *offsets, int ranks, const report_options *options,
                              cJSON *pytorch) {
    int width = rank_width(ranks), rc = 0, excluded = 0;
    remove_stale_rank_dirs(options->out_dir, ranks, width);
    cJSON **roots = calloc((size_t)ranks, sizeof *roots);
    char **names = calloc((size_t)ranks, sizeof *names);
    tsr_status st = roots && names ? TSR_SUCCESS : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    for (int r = 0; r < ranks && st == TSR_SUCCESS; ++r) {
        const char *text = texts + offsets[r];
        size_t dir_size = strlen(options->out_dir) + 64;
        char *dir = malloc(dir_size);
        names[r] = malloc(dir_size + 16);
        if (!dir || !names[r]) {
            free(dir);
            st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        char rank_name[32];
        snprintf(rank_name, sizeof rank_name, "rank-%0*d", width > 10 ? 10 : width, r); /* an int has 10 digits */
        snprintf(dir, dir_size, "%s/ranks/%s", options->out_dir, rank_name);
        snprintf(names[r], dir_size + 16, "%s/report.json", dir);
        st = report_parse(text, strlen(text), names[r], &roots[r]);
        if (st != TSR_SUCCESS && st != TSR_ERR_OUT_OF_MEMORY) {
            /* One rank's bad text costs that rank's report, not the fleet's: a report without
             * devices and a note that says why, like a rank that had no report. */
            char note[2048];
            snprintf(note, sizeof note, "rank %d of %d: its report was rejected: %s: %s; excluded", r, ranks,
                     tsr_status_str(st), tsr_last_error());
            fprintf(stderr, "tessera-mpi: %s\n", note);
            roots[r] = report_new(NULL);
            st = roots[r] ? TSR_SUCCESS : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
            if (st == TSR_SUCCESS)
                cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(roots[r], "notes"), cJSON_CreateString(note));
        }
        if (st == TSR_SUCCESS && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(roots[r], "devices")) == 0)
            ++excluded;
        /* A rank's own report, as a report of its own: a report --merge of these files gives
         * OUT/report.json byte for byte. */
        tsr_status wst = st == TSR_SUCCESS ? report_write(roots[r], dir, true) : st;
        if (st == TSR_SUCCESS && wst != TSR_SUCCESS) rc = cli_fail(wst); /* a PNG chart, say: the rest is there */
        free(dir);
    }
    cJSON *merged = NULL;
    if (st == TSR_SUCCESS) st = report_merge_roots(roots, (const char *const *)names, (size_t)ranks, &merged);
    if (st == TSR_SUCCESS && pytorch) cJSON_AddItemToObject(merged, "pytorch", cJSON_Duplicate(pytorch, true));
    if (st == TSR_SUCCESS) st = report_write(merged, options->out_dir, false);
    size_t failed = st == TSR_SUCCESS ? report_failed_devices(merged) : 0;
    if (st == TSR_SUCCESS) {
        const cJSON *note;
        cJSON_ArrayForEach(note, cJSON_GetObjectItemCaseSensitive(merged, "notes"))
            fprintf(stderr, "tessera report: note: %s\n", note->valuestring);
        printf("merged the reports of %d rank%s into %s/report.json (each rank's own: %s/ranks/rank-R/)\n", ranks,
               ranks == 1 ? "" : "s", options->out_dir, options->out_dir);
    }
    for (int r = 0; roots && r < ranks; ++r)
        cJSON_Delete(roots[r]);
    for (int r = 0; names && r < ranks; ++r)
        free(names[r]);
    free(roots);
    free(names);
    cJSON_Delete(merged);
    if (st != TSR_SUCCESS) return cli_fail(st);
    if (failed || excluded) {
        fprintf(stderr, "tessera report: %zu device%s failed, %d rank%s without a report; see %s/report.md\n", failed,
                failed == 1 ? "" : "s", excluded, excluded == 1 ? "" : "s", options->out_dir);
        return 1;
    }
    return rc;
}

int fleet_report(int argc, char **argv, const char *const *selectors, size_t nselectors, const report_options *options,
                 const char *pytorch_file) {
    bool ours = init_mpi();
    int rank = 0, ranks = 1, rc = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    tsr_mpi_check_args(MPI_COMM_WORLD, argc, argv);
    /* Rank 0 alone writes OUT: it checks it, and the --pytorch file, before anyone measures. */
    fleet_start start = {0};
    cJSON *pytorch = NULL;
    if (rank == 0) {
        char probe[4096];
        snprintf(probe, sizeof probe, "%s/report.json", options->out_dir);
        tsr_status st = tsr_make_dirs(options->out_dir);
        if (st == TSR_SUCCESS) st = util_check_output(probe);
        if (st == TSR_SUCCESS && pytorch_file) st = report_load_pytorch(pytorch_file, &pytorch);
        if (st != TSR_SUCCESS) rc = cli_fail(st);
        start.go = st == TSR_SUCCESS ? 'y' : 'n';
        run_name(start.run, sizeof start.run);
    }
    share_start(&start);
    if (start.go != 'y') {
        finish_mpi(ours);
        return rank == 0 ? rc : 1;
    }
    cJSON *root = NULL;
    report_options mine = *options;
    mine.progress = fleet_progress;
    tsr_status st = report_run(selectors, nselectors, &mine, &root);
    if (st != TSR_SUCCESS) root = no_report(st, ranks);
    if (!root) tsr_mpi_abort(MPI_COMM_WORLD, "out of memory making this rank's report");
    mark_devices(root, rank, ranks, start.run);
    char *text = cJSON_Print(root); /* as report_write prints report.json */
    cJSON_Delete(root);
    if (!text) tsr_mpi_abort(MPI_COMM_WORLD, "out of memory printing this rank's report");
    if (tsr_mpi_fault_point("report")) text[strlen(text) / 2] = '\0'; /* the test of a report rank 0 rejects */
    wait_for_everyone("its report");
    size_t *offsets = NULL;
    char *texts = tsr_mpi_gather_text(MPI_COMM_WORLD, text, &offsets);
    free(text);
    if (rank == 0) rc = write_fleet_report(texts, offsets, ranks, options, pytorch);
    free(texts);
    free(offsets);
    cJSON_Delete(pytorch);
    finish_mpi(ours);
    return rc;
}

/* ---- tune --mpi ---- */

/* This rank's own database: a fresh private directory, so ranks sharing a host (and the user's
 * database) never race. */
static bool make_rank_db(char *dir, size_t dir_size, char *db, size_t db_size) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, dir_size, "%s/tessera-fleet-tune-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return false;
    snprintf(db, db_size, "%s/tuning.json", dir);
    return true;
}

static void remove_rank_db(const char *dir, const char *db) {
    char lock[4300];
    snprintf(lock, sizeof lock, "%s.lock", db);
    unlink(db);
    unlink(lock);
    rmdir(dir);
}

/* Rank 0: import one rank's database text into the fleet database through a temporary file, so
 * the import checks it (format, checksum, every field) like any file from elsewhere. */
static tsr_status import_rank(const char *out, int rank, const char *text, size_t *merged) {
    *merged = 0;
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tessera-fleet-rank-%d-XXXXXX", tmp && *tmp ? tmp : "/tmp", rank);
    int fd = mkstemp(path);
    if (fd < 0) return tsr_fail(TSR_ERR_IO, "cannot make a temporary file %s: %s", path, strerror(errno));
    size_t size = strlen(text), done = 0;
    while (done < size) {
        ssize_t n = write(fd, text + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    int closed = close(fd);
    tsr_status st = done == size && closed == 0 ? tsr_tuning_db_import(out, path, merged)
                                                : tsr_fail(TSR_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    unlink(path);
    return st;
}

int fleet_tune(int argc, char **argv, const fleet_tune_job *job) {
    bool ours = init_mpi();
    int rank = 0, ranks = 1, rc = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    tsr_mpi_check_args(MPI_COMM_WORLD, argc, argv);
    fleet_start start = {0};
    if (rank == 0) {
        tsr_status st = job->out ? tsr_db_check_writable(job->out) : TSR_SUCCESS;
        if (st != TSR_SUCCESS) rc = cli_fail(st);
        start.go = st == TSR_SUCCESS ? 'y' : 'n';
    }
    share_start(&start);
    if (start.go != 'y') {
        finish_mpi(ours);
        return rank == 0 ? rc : 1;
    }
    char dir[4096], db[4200];
    if (!make_rank_db(dir, sizeof dir, db, sizeof db))
        tsr_mpi_abort(MPI_COMM_WORLD, "cannot make a private directory for this rank's tuning database (%s): %s", dir,
                      strerror(errno));
    setenv("TSR_TUNING_DB", db, 1); /* lookups in this process use it too */
    tsr_device *device = NULL;
    MPI_Comm active = MPI_COMM_NULL;
    tsr_status st = tsr_mpi_open_device(MPI_COMM_WORLD, job->device, &device, &active);
    if (st != TSR_SUCCESS) { /* no rank has a device: each knows, rank 0 printed the reasons */
        remove_rank_db(dir, db);
        finish_mpi(ours);
        return rank == 0 ? cli_fail(st) : 1;
    }
    /* This rank's table, printed by rank 0 in rank order. */
    char *table = NULL;
    size_t table_size = 0;
    FILE *out = open_memstream(&table, &table_size);
    if (!out) tsr_mpi_abort(MPI_COMM_WORLD, "out of memory for this rank's results");
    fprintf(out, "== %s\n", tsr_mpi_whoami());
    int status = 2; /* 0 tuned, 1 failed, 2 no device */
    if (device) {
        tsr_tune_options options = job->options;
        options.db_path = db;
        options.progress = fleet_tune_progress; /* heartbeats; no progress line: ranks share a terminal */
        options.user = NULL;
        char log[4200];
        if (options.log_path) {
            snprintf(log, sizeof log, "%s.rank-%d", options.log_path, rank);
            options.log_path = log;
        }
        status = job->tune(device, &options, out, job->context) == 0 ? 0 : 1;
        tsr_device_close(device);
        MPI_Comm_free(&active);
    } else {
        fprintf(out, "no OpenCL device; excluded\n");
    }
    fclose(out);
    tsr_mpi_fault_point("tune");
    wait_for_everyone("its tuning");
    /* The entries this rank tuned: its database as written ("" where it wrote none). */
    char *entries = NULL;
    size_t entries_size = 0;
    tsr_status read_st = device && !job->options.dry_run ? tsr_read_file(db, &entries, &entries_size) : TSR_SUCCESS;
    if (read_st != TSR_SUCCESS) {
        if (read_st != TSR_ERR_NOT_FOUND) {
            fprintf(stderr, "tessera-mpi: %s: cannot read this rank's tuning database: %s\n", tsr_mpi_whoami(),
                    tsr_last_error());
            status = 1;
        }
        entries = NULL;
    }
    remove_rank_db(dir, db);
    int *statuses = rank == 0 ? calloc((size_t)ranks, sizeof *statuses) : NULL;
    if (rank == 0 && !statuses) tsr_mpi_abort(MPI_COMM_WORLD, "out of memory");
    MPI_Request req;
    MPI_Igather(&status, 1, MPI_INT, statuses, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    tsr_mpi_wait(MPI_COMM_WORLD, &req, "each rank's tuning status (MPI_Igather)");
    size_t *table_at = NULL, *entries_at = NULL;
    char *tables = tsr_mpi_gather_text(MPI_COMM_WORLD, table, &table_at);
    char *all_entries = tsr_mpi_gather_text(MPI_COMM_WORLD, entries, &entries_at);
    free(table);
    free(entries);
    if (rank == 0) {
        size_t total = 0;
        int tuned = 0, failed = 0, without = 0;
        for (int r = 0; r < ranks; ++r) {
            fputs(tables + table_at[r], stdout);
            tuned += statuses[r] == 0, failed += statuses[r] == 1, without += statuses[r] == 2;
            const char *text = all_entries + entries_at[r];
            if (!job->out || !*text) continue;
            size_t merged = 0;
            tsr_status ist = import_rank(job->out, r, text, &merged);
            if (ist != TSR_SUCCESS) {
                fprintf(stderr, "tessera tune: rank %d's entries not taken: %s: %s\n", r, tsr_status_str(ist),
                        tsr_last_error());
                ++failed;
                continue;
            }
            printf("rank %d: %zu of its entries taken%s\n", r, merged,
                   merged ? "" : " (the database had them, or faster ones)");
            total += merged;
        }
        printf("fleet: %d rank%s tuned, %d failed, %d without a device\n", tuned, tuned == 1 ? "" : "s", failed,
               without);
        if (job->out)
            printf("merged %zu entries into %s: use it with TSR_TUNING_DB=%s, or merge it into a database with "
                   "tessera tune --import %s [--db FILE]\n",
                   total, job->out, job->out, job->out);
        rc = failed || without ? 1 : 0;
    }
    free(statuses);
    free(tables);
    free(all_entries);
    free(table_at);
    free(entries_at);
    finish_mpi(ours);
    return rc;
}
