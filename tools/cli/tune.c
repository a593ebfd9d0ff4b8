/* tessera tune: auto-tune ops into the tuning database; --show, --export and --import. */
#include "cli.h"
#ifdef TSR_HAVE_MPI
#include "fleet.h"
#endif

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The search strategies by the names --strategy takes. */
static const struct {
    const char *name;
    tsr_tune_strategy strategy;
} strategies[] = {
    {"exhaustive", TSR_TUNE_EXHAUSTIVE},
    {"random", TSR_TUNE_RANDOM},
    {"anneal", TSR_TUNE_ANNEAL},
    {"climb", TSR_TUNE_CLIMB},
};
#define NSTRATEGIES (sizeof strategies / sizeof strategies[0])

static void tune_progress(const tsr_tune_progress *p, void *user) {
    (void)user;
    char planned[32] = "";
    if (p->planned > 0) snprintf(planned, sizeof planned, "/%d", p->planned);
    fprintf(stderr, "\r\033[K[%s/%s] %d%s evaluated, best %.1f %s, ETA %.0f s", p->op, p->problem_class,
            p->evaluated, planned, p->best_gflops, p->unit, p->eta_s);
    fflush(stderr);
}

static int show_tuning(tsr_device *dev, const char *op_filter) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    char path[1024] = "";
    if (tsr_tuning_db_path(path, sizeof path) != TSR_SUCCESS) snprintf(path, sizeof path, "(none: %s)", tsr_last_error());
    printf("device %s (%s, driver %s%s%s)\ntuning database %s\n", info->name, info->platform_name, info->driver_version,
           info->host_cpu[0] ? "; processor " : "", info->host_cpu, path);
    int classes = 0, tuned = 0, defaults = 0, stale = 0;
    for (const char *const *op = tsr_op_names(); *op; ++op) {
        if (op_filter && strcmp(op_filter, "all") != 0 && strcmp(op_filter, *op) != 0) continue;
        for (const char *const *cls = tsr_op_classes(*op); *cls; ++cls) {
            tsr_config_info ci;
            tsr_status st = tsr_config_lookup(dev, *op, *cls, &ci);
            if (st != TSR_SUCCESS) return cli_fail(st);
            printf("%-8s %-9s %-44s %s\n", *op, *cls, tsr_config_source_str(ci.source), ci.config);
            printf("%-18s %s\n", "", ci.origin);
            ++classes;
            if (ci.source == TSR_CONFIG_BUILTIN_DEFAULT) ++defaults;
            else if (ci.source != TSR_CONFIG_ENV_OVERRIDE && ci.source != TSR_CONFIG_API_OVERRIDE) ++tuned;
            /* Never tuned is the ordinary state of a new device; tuned, but for a kernel source
             * that has changed since, is a loss nobody would notice otherwise. */
            if (ci.source == TSR_CONFIG_BUILTIN_DEFAULT && ci.stale_passed_over > 0) {
                ++stale;
                printf("UNTUNED: %s/%s on '%s' runs the built-in default: %s stale (kernel source changed since); "
                       "run tessera tune --op %s\n",
                       *op, *cls, info->name,
                       ci.stale_passed_over > 1 ? "its tuned entries are" : "its tuned entry is", *op);
            }
        }
    }
    printf("%d of %d op/classes tuned, %d on the built-in default, %d of them untuned because their tuned entries "
           "are stale\n",
           tuned, classes, defaults, stale);
    return 0;
}

/* "gemm, gelu, attention, conv2d" from the runtime's op table. */
static const char *op_names(char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (const char *const *op = tsr_op_names(); *op && used < size; ++op) {
        int n = snprintf(out + used, size - used, "%s%s", used ? ", " : "", *op);
        if (n < 0) break;
        used += (size_t)n;
    }
    return out;
}

static void print_result(FILE *out, const tsr_tune_result *r) {
    if (r->evaluated == 0) {
        fprintf(out, "%-9s %-9s not reached: the budget ran out first (its entry is unchanged; --budget, or --op %s)\n",
                r->op, r->problem_class, r->op);
        return;
    }
    fprintf(out, "%-9s %-9s %-16s %9.1f %9.1f %-7s %6.2fx %5d %5d %5d %5d %6.1f  %s\n", r->op, r->problem_class,
            r->problem, r->default_gflops, r->best_gflops, r->unit,
            r->default_gflops > 0 ? r->best_gflops / r->default_gflops : 0, r->evaluated, r->wrong_results,
            r->build_failures, r->abandoned, r->seconds, r->best_config);
    if (r->stale_seeds > 0)
        fprintf(out, "%-19s seeded from %d stale entr%s (tuned for an older kernel source)\n", "", r->stale_seeds,
                r->stale_seeds > 1 ? "ies" : "y");
    if (r->reduced_from[0])
        fprintf(out, "%-19s measured on a smaller problem of the class: a run of its own (%s) would have taken too "
                "much of its budget (a larger --budget, or --op %s --classes %s)\n", "", r->reduced_from, r->op,
                r->problem_class);
    if (r->second_problem[0] && r->kept_before && r->second_wrong)
        fprintf(out, "%-19s kept what it ran before: the pick gave a wrong result on the class's second problem (%s)\n",
                "", r->second_problem);
    else if (r->second_problem[0] && r->kept_before)
        fprintf(out, "%-19s kept what it ran before: on the class's second problem (%s) the pick ran at %.2fx its speed\n",
                "", r->second_problem, r->second_gain);
    else if (r->second_problem[0] && r->second_gain > 0)
        fprintf(out, "%-19s checked on the class's second problem (%s): %.2fx what it ran before\n", "",
            r->second_problem, r->second_gain);
    else if (r->second_problem[0])
        fprintf(out, "%-19s the class's second problem (%s) could not be timed: the pick stands on its own problem\n",
                "", r->second_problem);
}

/* Tune `op_name` (a name or "all") on the device, the results as a table on `out`; returns the
 * exit status. The CLI's own run and each rank of tune --mpi. "all" is one run over every op's
 * classes in one budget (the runtime gives the classes with the largest gaps the most of it). */
static int tune_device(tsr_device *dev, tsr_tune_options *options, FILE *out, void *op_name) {
    const char *op = op_name;
    int rc = 0;
    const tsr_device_info *info = tsr_device_get_info(dev);
    fprintf(out, "tuning on %s (%s%s%s)\n", info->name, info->platform_name, info->host_cpu[0] ? "; processor " : "",
            info->host_cpu);
    fprintf(out, "%-9s %-9s %-16s %9s %9s %-7s %7s %5s %5s %5s %5s %6s  %s\n", "op", "class", "problem", "default",
            "best", "unit", "gain", "evals", "wrong", "build", "aband", "secs", "best configuration");
    static tsr_tune_result results[256];
    size_t n = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tsr_status st = tsr_tune(dev, op, options, results, sizeof results / sizeof results[0], &n);
    if (options->progress == tune_progress) fprintf(stderr, "\r\033[K"); /* the line tune_progress drew */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double gain_min = 0, gain_max = 0;
    size_t tuned = 0;
    for (size_t i = 0; i < n; ++i) {
        print_result(out, &results[i]);
        if (results[i].evaluated == 0) continue; /* not reached */
        double g = results[i].default_gflops > 0 ? results[i].best_gflops / results[i].default_gflops : 0;
        if (tuned == 0 || g < gain_min) gain_min = g;
        if (tuned == 0 || g > gain_max) gain_max = g;
        ++tuned;
    }
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (n > 1 && tuned == n)
        fprintf(out, "%zu classes in %.1f s, gains %.2fx to %.2fx over the built-in defaults\n", n, secs, gain_min,
                gain_max);
    else if (n > 1)
        fprintf(out, "%zu of %zu classes in %.1f s (the others not reached), gains %.2fx to %.2fx over the built-in "
                "defaults\n", tuned, n, secs, gain_min, gain_max);
    if (st != TSR_SUCCESS) rc = cli_fail(st);
    tsr_timing_method timing = TSR_TIMING_UNDECIDED;
    const char *why = "";
    if (tsr_device_timing(dev, &timing, &why) == TSR_SUCCESS && timing != TSR_TIMING_UNDECIDED)
        fprintf(out, "timing: %s%s%s\n",
                timing == TSR_TIMING_HOST ? "host clock over batches of runs" : "device (profiling events)",
                *why ? ": " : "", why);
    return rc;
}

static int run_tune(int argc, char **argv) {
    static const struct option options[] = {
        CLI_OPTION_DEVICE,
        {"op", required_argument, NULL, 'o'},
        {"budget", required_argument, NULL, 'b'},
        {"evals", required_argument, NULL, 'e'},
        {"strategy", required_argument, NULL, 's'},
        {"space", required_argument, NULL, 'S'},
        {"classes", required_argument, NULL, 'c'},
        {"seed", required_argument, NULL, 'r'},
        {"db", required_argument, NULL, 'D'},
        {"dry-run", no_argument, NULL, 'n'},
        {"show", no_argument, NULL, 'w'},
        {"export", required_argument, NULL, 'x'},
        {"import", required_argument, NULL, 'i'},
        {"log", required_argument, NULL, 'l'},
        {"mpi", no_argument, NULL, 'M'},
        {"out", required_argument, NULL, 'O'},
        CLI_OPTION_HELP,
        {0}};
    tsr_tune_options to = {0};
    const char *device = NULL, *op = "all", *export_file = NULL, *import_file = NULL, *fleet_db = NULL, *db = NULL;
    bool show = false, mpi = false;
    int c, rc = 0;
    while ((c = cli_next_option(&cli_tune, argc, argv, "d:o:b:e:s:S:c:r:D:nwx:i:l:MO:h", options, &rc)) != -1) {
        switch (c) {
        case CLI_STOP: return rc;
        case 'd': device = optarg; break;
        case 'o': op = optarg; break;
        case 'b':
            if ((rc = cli_seconds("tune", optarg, "--budget", false, &to.budget_seconds))) return rc;
            break;
        case 'e': {
            uint64_t count = 0;
            if ((rc = cli_count("tune", optarg, "--evals", 1, INT_MAX, &count))) return rc;
            to.budget_evaluations = (int)count;
            break;
        }
        case 's': {
            size_t i = 0;
            while (i < NSTRATEGIES && strcmp(optarg, strategies[i].name) != 0) ++i;
            if (i == NSTRATEGIES) {
                char names[128] = "";
                for (size_t k = 0; k < NSTRATEGIES; ++k)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "",
                             strategies[k].name);
                return cli_misuse("tune", "unknown strategy '%s' (%s)", optarg, names);
            }
            to.strategy = strategies[i].strategy;
            break;
        }
        case 'S':
        case 'c':
            if (!*optarg) /* an empty list would mean "everything", not what was typed */
                return cli_misuse("tune", "--%s needs a value", c == 'S' ? "space" : "classes");
            if (c == 'S') to.space = optarg;
            else to.classes = optarg;
            break;
        case 'r':
            if ((rc = cli_u64("tune", optarg, "--seed (0: from the clock)", &to.seed))) return rc;
            break;
        case 'D':
            if (!*optarg) /* TSR_TUNING_DB="" would silently mean the default database */
                return cli_misuse("tune", "--db needs a file name");
            db = optarg;
            break;
        case 'n': to.dry_run = true; break;
        case 'w': show = true; break;
        case 'x': export_file = optarg; break;
        case 'i': import_file = optarg; break;
        case 'l': to.log_path = optarg; break;
        case 'M':
            mpi = true;
            break;
        case 'O':
            if (!*optarg) return cli_misuse("tune", "--out needs a file name");
            fleet_db = optarg;
            break;
        }
    }
    if (optind < argc) return cli_usage(stderr);
    if (mpi || fleet_db) {
        if (!mpi) return cli_misuse("tune", "--out names the fleet database of tune --mpi");
        if (export_file || import_file || show)
            return cli_misuse("tune", "--mpi tunes: --show, --export and --import are separate commands");
        if (db)
            return cli_misuse("tune", "--mpi: each rank tunes into a database of its own; --out FILE names the "
                                      "database rank 0 merges them into");
        if (!fleet_db && !to.dry_run) return cli_misuse("tune", "--mpi needs --out FILE (or --dry-run)");
        if (strcmp(op, "all") != 0 && !tsr_op_classes(op)) {
            char names[256];
            return cli_misuse("tune", "no op named '%s' (%s, or all)", op, op_names(names, sizeof names));
        }
#ifdef TSR_HAVE_MPI
        fleet_tune_job job = {
            .device = device, .out = fleet_db, .options = to, .tune = tune_device, .context = (void *)op};
        return fleet_tune(argc, argv, &job);
#else
        fprintf(stderr, "tessera tune: --mpi: this tessera was built without MPI (install Open MPI and reconfigure; "
                        "-Dmpi=enabled insists)\n");
        return 1;
#endif
    }
    if (db) setenv("TSR_TUNING_DB", db, 1); /* lookups in this process use it too */
    if ((export_file != NULL) + (import_file != NULL) + show > 1)
        return cli_misuse("tune", "--show, --export and --import are separate commands: give one");
    if ((export_file && !*export_file) || (import_file && !*import_file))
        return cli_misuse("tune", "--%s needs a file name", export_file ? "export" : "import");
    if (export_file || import_file) {
        tsr_status st;
        if (import_file) {
            size_t merged = 0;
            st = tsr_tuning_db_import(NULL, import_file, &merged);
            if (st == TSR_SUCCESS) printf("merged %zu entries from %s\n", merged, import_file);
        } else {
            st = tsr_tuning_db_export(NULL, export_file);
            if (st == TSR_SUCCESS) printf("wrote %s\n", export_file);
        }
        return st == TSR_SUCCESS ? 0 : cli_fail(st);
    }
    if (strcmp(op, "all") != 0 && !tsr_op_classes(op)) {
        char names[256];
        return cli_misuse("tune", "no op named '%s' (%s, or all)", op, op_names(names, sizeof names));
    }
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(device, &dev);
    if (st != TSR_SUCCESS) return cli_fail(st);
    if (show) {
        rc = show_tuning(dev, op);
        tsr_device_close(dev);
        return rc;
    }
    if (isatty(STDERR_FILENO)) to.progress = tune_progress; /* quiet when not on a terminal */
    /* Workers that compile ahead are this executable's `tune-worker` children (a process each:
     * PoCL compiles one process's contexts one after the other). A TSR_TUNE_WORKER set by the
     * user stays; an empty one keeps the workers in this process. (Not under --mpi: ranks
     * already share the machine's cores, and MPI processes should not start others.) */
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = '\0';
        setenv("TSR_TUNE_WORKER", self, 0);
    }
    rc = tune_device(dev, &to, stdout, (void *)op);
    if (rc == 0 && !to.dry_run) {
        char path[1024];
        if (tsr_tuning_db_path(path, sizeof path) == TSR_SUCCESS) printf("saved to %s\n", path);
    }
    tsr_device_close(dev);
    return rc;
}

static void print_details(FILE *out) {
    char names[256];
    fprintf(out, "NAME: an op of the runtime's op table (%s), or all (the default).\n", op_names(names, sizeof names));
    fputs("--budget: seconds for the op's classes together (88 by default); for all, for every op's classes\n"
          "together (150 by default): each class's default and known entries first, then the rest where the\n"
          "default is furthest from the best known. --evals: per class. TSR_TUNE_AHEAD=N threads compile the\n"
          "next candidates meanwhile (default on PoCL: one less than the CPUs; 0: none).\n",
          out);
    fputs("The database is TSR_TUNING_DB, else under XDG_DATA_HOME or HOME; --db names another one.\n", out);
    fputs("--mpi (under mpirun, or alone as a fleet of one; builds with Open MPI only): each rank tunes its\n"
          "--device into a temporary database of its own (never the shared one) and rank 0 imports every\n"
          "rank's entries into --out FILE (checked like any imported file; an existing FILE is merged into,\n"
          "the faster entry winning where both are for one source and problem, else the newer). Use FILE as\n"
          "TSR_TUNING_DB, or tessera tune --import FILE. --log FILE\n"
          "becomes FILE.rank-R per rank. See docs/fleet.md.\n",
          out);
}

const cli_command cli_tune = {
    .name = "tune",
    .summary = "  tune [--device SEL] [--op NAME|all] [--budget SECONDS] [--evals N]\n"
               "       [--strategy exhaustive|random|anneal|climb] [--space SPEC|all] [--classes LIST]\n"
               "       [--seed N] [--dry-run] [--db FILE] [--log FILE]\n"
               "                                       auto-tune ops on a device into the tuning database\n"
               "  tune --show [--device SEL] [--op NAME|all] [--db FILE]\n"
               "                                       the configuration each op and class uses, and why\n"
               "  tune --export FILE | --import FILE [--db FILE]\n"
               "                                       copy the database out, or merge another one in\n"
               "  tune --mpi --out FILE [the tuning options above, no --db]   (under mpirun)\n"
               "                                       tune every rank's device; rank 0 merges the entries\n"
               "                                       into FILE\n",
    .print_details = print_details,
    .notes = CLI_NOTE_DEVICE | CLI_NOTE_NUMBERS,
    .run = run_tune,
};

/* `tessera tune-worker --device P:D --fd N`: a child `tessera tune` starts to compile candidates
 * ahead (tsr_tune_serve). Not in the usage: nobody types it. */
int cli_tune_worker(int argc, char **argv) {
    const char *selector = NULL;
    int fd = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--device") == 0) selector = argv[i + 1];
        else if (strcmp(argv[i], "--fd") == 0) {
            char *end = NULL;
            long v = strtol(argv[i + 1], &end, 10);
            fd = end && *end == '\0' && v >= 3 && v < 1024 ? (int)v : -1;
        }
    }
    if (!selector || fd < 0 || argc != 5) {
        fprintf(stderr, "tessera tune-worker: started by `tessera tune` only (--device P:D --fd N)\n");
        return 2;
    }
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(selector, &dev);
    if (st == TSR_SUCCESS) {
        st = tsr_tune_serve(dev, fd);
        tsr_device_close(dev);
    }
    return st == TSR_SUCCESS ? 0 : cli_fail(st);
}
