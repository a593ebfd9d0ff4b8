/* tessera: the command-line front end (devices, demo, build-binaries, cache). */
#define _GNU_SOURCE
#include "bench.h"
#include "tessera.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int usage(FILE *out) {
    fprintf(out,
            "usage: tessera <command> [options]\n"
            "\n"
            "commands:\n"
            "  devices [--json]                     list every OpenCL platform and device\n"
            "  demo [--device SEL]                  run each op once on a device and check it\n"
            "  build-binaries --device SEL --out DIR\n"
            "                                       write ahead-of-time kernel binaries (for devices\n"
            "                                       without a compiler; load them with TSR_BINARY_DIR)\n"
            "  cache [--device SEL] [--clear]       show (or empty) the kernel binary cache\n"
            "  bench OP [--device SEL] [--sizes LIST] [--json FILE] [--budget SECONDS] [--no-peers]\n"
            "        [--part NAME] [--clblast-xgemm \"GEMMK=0 MWG=64 ...\"] [--max-unfused L] [--layers LIST]\n"
            "                                       time OP (gemm, gelu, conv2d, attention) against its\n"
            "                                       peers"
            " (CLBlast, OpenBLAS) and baselines;\n"
            "                                       gemm sizes: N, MxNxK or B@MxNxK, comma separated;\n"
            "                                       gelu sizes: N, NK or NM elements; gelu parts:\n"
            "                                       elementwise, epilogue (bias+GELU in GEMM);\n"
            "                                       --clblast-xgemm: CLBlast's Xgemm parameters from\n"
            "                                       its tuner (clblast_tuner_xgemm) instead of defaults;\n"
            "                                       attention sizes: sequence lengths (B=1 H=8 D=64);\n"
            "                                       --max-unfused: longest L for the unfused pipelines;\n"
            "                                       conv2d sizes: batch sizes; --layers: ResNet-50 layer\n"
            "                                       names or all; conv2d parts: layers, stack\n"
            "  tune [--device SEL] [--op NAME|all] [--budget SECONDS] [--evals N]\n"
            "       [--strategy exhaustive|random|anneal|climb] [--space SPEC|all] [--classes LIST]\n"
            "       [--seed N] [--dry-run] [--db FILE] [--log FILE]\n"
            "                                       auto-tune ops on a device into the tuning database\n"
            "  tune --show [--device SEL] [--op NAME|all] [--db FILE]\n"
            "                                       the configuration each op and class uses, and why\n"
            "  tune --export FILE | --import FILE [--db FILE]\n"
            "                                       copy the database out, or merge another one in\n"
            "  peak [--device SEL] [--budget SECONDS] [--size MIB] [--json FILE] [--tests LIST]\n"
            "                                       measure the device's limits: memory bandwidth,\n"
            "                                       fp32 throughput, launch latency, transfers (and\n"
            "                                       on CPUs the host's own read and memcpy); LIST:\n"
            "                                       some of bandwidth,compute,launch,transfers,host\n"
            "  report [--device SEL]... [--out DIR] [--budget SECONDS] [--peak-budget SECONDS]\n"
            "         [--tune-budget SECONDS] [--no-peers]\n"
            "                                       peaks, a budgeted tune where nothing is tuned, and\n"
            "                                       the op suite on every device (or each --device):\n"
            "                                       DIR/report.json, report.md, roofline and bar charts\n"
            "  report --merge A.json B.json ... [--out DIR]\n"
            "                                       combine reports made on different machines\n"
            "  version                              print the version\n"
            "\n"
            "SEL: cpu, gpu, accelerator, P:D indices, or part of a device name (default: $TSR_DEVICE,\n"
            "     else a GPU, else an accelerator, else a CPU)\n"
            "Numbers are taken whole or refused: counts and sizes are plain digits (gelu sizes may end\n"
            "in K or M), seconds are plain decimals up to 86400 (0 only for --tune-budget: no tuning),\n"
            "seeds are decimal or 0x-hexadecimal; sizes that do not fit the device or the host are\n"
            "refused before anything is allocated.\n"
            "Output files (--json, --out, --log) are checked before anything is measured.\n");
    return out == stderr ? 2 : 0;
}

/* Every library warning of every command, on stderr, each distinct text once: a damaged
 * tuning database warns again for each device opened, and after each re-read. */
static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;
static char **warned;
static size_t nwarned;

static void print_warning(const char *message, void *user) {
    (void)user;
    pthread_mutex_lock(&warned_lock);
    bool seen = false;
    for (size_t i = 0; i < nwarned && !seen; ++i) seen = strcmp(warned[i], message) == 0;
    if (!seen) {
        fprintf(stderr, "tessera: warning: %s\n", message);
        char **grown = realloc(warned, (nwarned + 1) * sizeof *warned);
        char *copy = strdup(message);
        if (grown) warned = grown;
        if (grown && copy) warned[nwarned++] = copy;
        else free(copy);
    }
    pthread_mutex_unlock(&warned_lock);
}

static void forget_warnings(void) {
    for (size_t i = 0; i < nwarned; ++i) free(warned[i]);
    free(warned);
    warned = NULL;
    nwarned = 0;
}

static int fail(tsr_status st) {
    fprintf(stderr, "tessera: %s: %s\n", tsr_status_str(st), tsr_last_error());
    return 1;
}

/* A bad option value (its message from the strict parsers in bench.c): exit 2 like any usage error. */
static int usage_error(const char *command) {
    fprintf(stderr, "tessera %s: %s\n", command, tsr_last_error());
    return 2;
}

static void human_bytes(uint64_t b, char *out, size_t size) {
    if (b >= (1ull << 30)) snprintf(out, size, "%.1f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) snprintf(out, size, "%.1f MiB", (double)b / (1ull << 20));
    else snprintf(out, size, "%.0f KiB", (double)b / 1024.0);
}

static void print_device(const tsr_device_info *d) {
    char gmem[32], lmem[32], amem[32];
    human_bytes(d->global_mem_bytes, gmem, sizeof gmem);
    human_bytes(d->local_mem_bytes, lmem, sizeof lmem);
    human_bytes(d->max_alloc_bytes, amem, sizeof amem);
    printf("%d:%d  %s  %s\n", d->platform_index, d->device_index, tsr_device_type_str(d->type), d->name);
    printf("      vendor            %s\n", d->vendor);
    printf("      platform          %s (%s; %s)\n", d->platform_name, d->platform_vendor, d->platform_version);
    printf("      device version    %s\n", d->device_version);
    printf("      driver version    %s\n", d->driver_version);
    printf("      OpenCL C          %s\n", d->opencl_c_version);
    printf("      compute units     %u at %u MHz\n", d->compute_units, d->max_clock_mhz);
    printf("      global memory     %s (max allocation %s)\n", gmem, amem);
    printf("      local memory      %s (%s)\n", lmem, d->local_mem_is_dedicated ? "dedicated" : "emulated in global");
    printf("      work-group        max %zu, item sizes %zu x %zu x %zu\n", d->max_work_group_size,
           d->max_work_item_sizes[0], d->max_work_item_sizes[1], d->max_work_item_sizes[2]);
    printf("      vector widths     preferred/native: char %u/%u short %u/%u int %u/%u long %u/%u float %u/%u "
           "double %u/%u half %u/%u\n",
           d->preferred_vector_width[0], d->native_vector_width[0], d->preferred_vector_width[1],
           d->native_vector_width[1], d->preferred_vector_width[2], d->native_vector_width[2],
           d->preferred_vector_width[3], d->native_vector_width[3], d->preferred_vector_width[4],
           d->native_vector_width[4], d->preferred_vector_width[5], d->native_vector_width[5],
           d->preferred_vector_width[6], d->native_vector_width[6]);
    printf("      fp16 / fp64       %s / %s\n", d->fp16 ? "yes" : "no", d->fp64 ? "yes" : "no");
    printf("      online compiler   %s%s\n", d->compiler_available ? "yes" : "no",
           d->available ? "" : "  (device reports itself unavailable)");
}

static int cmd_devices(int argc, char **argv) {
    int json = 0;
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
        if (c == 'j') json = 1;
        else return usage(c == 'h' ? stdout : stderr);
    }
    if (optind < argc) return usage(stderr);
    if (json) {
        char *text = NULL;
        tsr_status st = tsr_discover_json(&text);
        if (st != TSR_SUCCESS) return fail(st);
        printf("%s\n", text);
        tsr_free(text);
        return 0;
    }
    tsr_device_info *infos = NULL;
    size_t n = 0;
    tsr_status st = tsr_discover(&infos, &n);
    if (st != TSR_SUCCESS) return fail(st);
    printf("%-5s %-11s %-36s %-30s %5s %9s\n", "SEL", "TYPE", "DEVICE", "PLATFORM", "CUs", "GLOBAL");
    for (size_t i = 0; i < n; ++i) {
        char sel[16], gmem[32];
        snprintf(sel, sizeof sel, "%d:%d", infos[i].platform_index, infos[i].device_index);
        human_bytes(infos[i].global_mem_bytes, gmem, sizeof gmem);
        printf("%-5s %-11s %-36.36s %-30.30s %5u %9s\n", sel, tsr_device_type_str(infos[i].type), infos[i].name,
               infos[i].platform_name, infos[i].compute_units, gmem);
    }
    if (n == 0) printf("(the installed platforms offer no device)\n");
    printf("\n");
    for (size_t i = 0; i < n; ++i) print_device(&infos[i]);
    tsr_free(infos);
    return 0;
}

/* Parse --device SEL [--out DIR] [--clear] for the commands that open a device. */
typedef struct device_args {
    const char *device;
    const char *out;
    int clear;
} device_args;

/* Returns true when the command should go on; otherwise *exit_code is set. */
static bool parse_device_args(int argc, char **argv, device_args *a, int allow_out, int allow_clear, int *exit_code) {
    static const struct option opts[] = {{"device", required_argument, NULL, 'd'}, {"out", required_argument, NULL, 'o'},
                                         {"clear", no_argument, NULL, 'c'},        {"help", no_argument, NULL, 'h'},
                                         {0}};
    memset(a, 0, sizeof *a);
    int c;
    while ((c = getopt_long(argc, argv, "d:o:ch", opts, NULL)) != -1) {
        if (c == 'd') a->device = optarg;
        else if (c == 'o' && allow_out) a->out = optarg;
        else if (c == 'c' && allow_clear) a->clear = 1;
        else {
            *exit_code = usage(c == 'h' ? stdout : stderr);
            return false;
        }
    }
    if (optind < argc) {
        *exit_code = usage(stderr);
        return false;
    }
    return true;
}

static int cmd_demo(int argc, char **argv) {
    device_args a;
    int rc = 0;
    if (!parse_device_args(argc, argv, &a, 0, 0, &rc)) return rc;
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(a.device, &dev);
    if (st != TSR_SUCCESS) return fail(st);
    const tsr_device_info *info = tsr_device_get_info(dev);
    printf("device %d:%d  %s  %s (%s)\n", info->platform_index, info->device_index, tsr_device_type_str(info->type),
           info->name, info->platform_name);
    tsr_cache_info ci;
    tsr_cache_get_info(dev, &ci);
    printf("binary cache: %s\n", ci.persistent ? ci.dir : ci.warning);
    int failures = 0;
    for (const char *const *op = tsr_op_names(); *op; ++op) {
        char summary[512];
        st = tsr_run_demo(dev, *op, summary, sizeof summary);
        if (st == TSR_SUCCESS) {
            printf("  %-10s ok    %s\n", *op, summary);
        } else {
            printf("  %-10s FAIL  %s: %s\n", *op, tsr_status_str(st), tsr_last_error());
            ++failures;
        }
    }
    tsr_device_close(dev);
    return failures ? 1 : 0;
}

static int cmd_build_binaries(int argc, char **argv) {
    device_args a;
    int rc = 0;
    if (!parse_device_args(argc, argv, &a, 1, 0, &rc)) return rc;
    if (!a.out) {
        fprintf(stderr, "tessera build-binaries: --out DIR is required\n");
        return 2;
    }
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(a.device, &dev);
    if (st != TSR_SUCCESS) return fail(st);
    size_t written = 0;
    st = tsr_build_binaries(dev, a.out, &written);
    const tsr_device_info *info = tsr_device_get_info(dev);
    if (st == TSR_SUCCESS)
        printf("wrote %zu binaries for %s to %s (use TSR_BINARY_DIR=%s)\n", written, info->name, a.out, a.out);
    tsr_device_close(dev);
    return st == TSR_SUCCESS ? 0 : fail(st);
}

static int cmd_cache(int argc, char **argv) {
    device_args a;
    int rc = 0;
    if (!parse_device_args(argc, argv, &a, 0, 1, &rc)) return rc;
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(a.device, &dev);
    if (st != TSR_SUCCESS) return fail(st);
    tsr_cache_info ci;
    tsr_cache_get_info(dev, &ci);
    tsr_device_close(dev);
    /* An unsafe directory (see README: cache trust) is not persistent: neither listed nor cleared. */
    if (!ci.persistent) {
        printf("no disk cache: %s\n", ci.warning);
        return 0;
    }
    size_t entries = 0, bytes = 0, removed = 0;
    DIR *d = opendir(ci.dir);
    if (!d) {
        fprintf(stderr, "tessera: cannot read %s\n", ci.dir);
        return 1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        /* Only tessera's own entries: 32 hex digits + ".bin". */
        size_t len = strlen(e->d_name);
        if (len != 36 || strcmp(e->d_name + 32, ".bin") != 0 || strspn(e->d_name, "0123456789abcdef") != 32) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", ci.dir, e->d_name);
        /* lstat, never open: a FIFO planted under an entry's name must not hang the listing. */
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode)) bytes += (size_t)sb.st_size;
        ++entries;
        if (a.clear && unlink(path) == 0) ++removed;
    }
    closedir(d);
    printf("cache directory %s: %zu entries, %.1f MiB\n", ci.dir, entries, (double)bytes / (1 << 20));
    if (a.clear) {
        /* Temporaries of writers that were killed mid-write go too (of any age: a writer racing
         * with --clear only loses its entry, with a warning). */
        size_t temporaries = tsr_remove_stale_temporaries(ci.dir, NULL, 0.0);
        printf("removed %zu entries and %zu temporary files\n", removed, temporaries);
    }
    return 0;
}

static int cmd_bench(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "tessera bench: name an op (gemm, gelu, conv2d, attention)\n");
        return 2;
    }
    const char *op = argv[1];
    argc -= 1;
    argv += 1;
    static const struct option opts[] = {{"device", required_argument, NULL, 'd'}, {"sizes", required_argument, NULL, 's'},
                                         {"json", required_argument, NULL, 'j'},   {"budget", required_argument, NULL, 'b'},
                                         {"no-peers", no_argument, NULL, 'n'},     {"help", no_argument, NULL, 'h'},
                                         {"part", required_argument, NULL, 'p'},
                                         {"clblast-xgemm", required_argument, NULL, 'X'},
                                         {"max-unfused", required_argument, NULL, 'U'},
                                         {"layers", required_argument, NULL, 'L'}, {0}};
    bench_options bo = {.budget_s = 1.0, .peers = true};
    const char *device = NULL, *json = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "d:s:j:b:nhp:", opts, NULL)) != -1) {
        switch (c) {
        case 'p': bo.part = optarg; break;
        case 'L': bo.layers = optarg; break;
        case 'X': bo.clblast_xgemm = optarg; break;
        case 'U': {
            uint64_t v = 0;
            if (bench_parse_count(optarg, "--max-unfused", 1, (uint64_t)1 << 24, &v) != TSR_SUCCESS) return usage_error("bench");
            bo.max_unfused = (size_t)v;
            break;
        }
        case 'd': device = optarg; break;
        case 's': bo.sizes = optarg; break;
        case 'j': json = optarg; break;
        case 'b':
            if (bench_parse_seconds(optarg, "--budget", false, BENCH_MAX_SECONDS, &bo.budget_s) != TSR_SUCCESS)
                return usage_error("bench");
            break;
        case 'n': bo.peers = false; break;
        default: return usage(c == 'h' ? stdout : stderr);
        }
    }
    if (optind < argc) return usage(stderr);
    tsr_status (*bench)(tsr_device *, const bench_options *, bench_report *) =
        strcmp(op, "gemm") == 0        ? bench_gemm
        : strcmp(op, "gelu") == 0      ? bench_gelu
        : strcmp(op, "attention") == 0 ? bench_attention
        : strcmp(op, "conv2d") == 0    ? bench_conv2d
                                       : NULL;
    if (!bench) {
        fprintf(stderr, "tessera bench: no benchmark for op '%s' (available: gemm, gelu, conv2d, attention)\n", op);
        return 2;
    }
    /* A --json that cannot be written fails now, not after the benchmark. */
    tsr_status st = json ? bench_check_output(json) : TSR_SUCCESS;
    if (st != TSR_SUCCESS) return fail(st);
    tsr_device *dev = NULL;
    st = tsr_device_open(device, &dev);
    if (st != TSR_SUCCESS) return fail(st);
    const tsr_device_info *info = tsr_device_get_info(dev);
    printf("%s on %d:%d %s (%s, %s)\n", op, info->platform_index, info->device_index, info->name,
           tsr_device_type_str(info->type), info->platform_name);
    bench_report report = {0};
    snprintf(report.device, sizeof report.device, "%s", info->name);
    st = bench(dev, &bo, &report);
    if (st == TSR_SUCCESS && json) st = bench_write_json(&report, json);
    bench_report_free(&report);
    tsr_device_close(dev);
    return st == TSR_SUCCESS ? 0 : fail(st);
}

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
    printf("device %s (%s, driver %s)\ntuning database %s\n", info->name, info->platform_name, info->driver_version,
           path);
    for (const char *const *op = tsr_op_names(); *op; ++op) {
        if (op_filter && strcmp(op_filter, "all") != 0 && strcmp(op_filter, *op) != 0) continue;
        for (const char *const *cls = tsr_op_classes(*op); *cls; ++cls) {
            tsr_config_info ci;
            tsr_status st = tsr_config_lookup(dev, *op, *cls, &ci);
            if (st != TSR_SUCCESS) return fail(st);
            printf("%-8s %-9s %-44s %s\n", *op, *cls, tsr_config_source_str(ci.source), ci.config);
            printf("%-18s %s\n", "", ci.origin);
        }
    }
    return 0;
}

static int cmd_tune(int argc, char **argv) {
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'}, {"op", required_argument, NULL, 'o'},
        {"budget", required_argument, NULL, 'b'}, {"evals", required_argument, NULL, 'e'},
        {"strategy", required_argument, NULL, 's'}, {"space", required_argument, NULL, 'S'},
        {"classes", required_argument, NULL, 'c'}, {"seed", required_argument, NULL, 'r'},
        {"db", required_argument, NULL, 'D'}, {"dry-run", no_argument, NULL, 'n'},
        {"show", no_argument, NULL, 'w'}, {"export", required_argument, NULL, 'x'},
        {"import", required_argument, NULL, 'i'}, {"log", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'}, {0}};
    tsr_tune_options to = {0};
    const char *device = NULL, *op = "all", *export_file = NULL, *import_file = NULL;
    int show = 0, c;
    while ((c = getopt_long(argc, argv, "d:o:b:e:s:S:c:r:D:nwx:i:l:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'o': op = optarg; break;
        case 'b':
            if (bench_parse_seconds(optarg, "--budget", false, BENCH_MAX_SECONDS, &to.budget_seconds) != TSR_SUCCESS)
                return usage_error("tune");
            break;
        case 'e': {
            uint64_t count = 0;
            if (bench_parse_count(optarg, "--evals", 1, INT_MAX, &count) != TSR_SUCCESS) return usage_error("tune");
            to.budget_evaluations = (int)count;
            break;
        }
        case 's':
            if (strcmp(optarg, "exhaustive") == 0) to.strategy = TSR_TUNE_EXHAUSTIVE;
            else if (strcmp(optarg, "random") == 0) to.strategy = TSR_TUNE_RANDOM;
            else if (strcmp(optarg, "anneal") == 0) to.strategy = TSR_TUNE_ANNEAL;
            else if (strcmp(optarg, "climb") == 0) to.strategy = TSR_TUNE_CLIMB;
            else {
                fprintf(stderr, "tessera tune: unknown strategy '%s' (exhaustive, random, anneal, climb)\n", optarg);
                return 2;
            }
            break;
        case 'S':
        case 'c':
            if (!*optarg) { /* an empty list would mean "everything", not what was typed */
                fprintf(stderr, "tessera tune: --%s needs a value\n", c == 'S' ? "space" : "classes");
                return 2;
            }
            if (c == 'S') to.space = optarg;
            else to.classes = optarg;
            break;
        case 'r':
            if (bench_parse_u64(optarg, "--seed (0: from the clock)", &to.seed) != TSR_SUCCESS) return usage_error("tune");
            break;
        case 'D':
            if (!*optarg) { /* TSR_TUNING_DB="" would silently mean the default database */
                fprintf(stderr, "tessera tune: --db needs a file name\n");
                return 2;
            }
            setenv("TSR_TUNING_DB", optarg, 1); /* lookups in this process use it too */
            break;
        case 'n': to.dry_run = true; break;
        case 'w': show = 1; break;
        case 'x': export_file = optarg; break;
        case 'i': import_file = optarg; break;
        case 'l': to.log_path = optarg; break;
        default: return usage(c == 'h' ? stdout : stderr);
        }
    }
    if (optind < argc) return usage(stderr);
    if ((export_file != NULL) + (import_file != NULL) + show > 1) {
        fprintf(stderr, "tessera tune: --show, --export and --import are separate commands: give one\n");
        return 2;
    }
    if ((export_file && !*export_file) || (import_file && !*import_file)) {
        fprintf(stderr, "tessera tune: --%s needs a file name\n", export_file ? "export" : "import");
        return 2;
    }
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
        return st == TSR_SUCCESS ? 0 : fail(st);
    }
    if (strcmp(op, "all") != 0 && !tsr_op_classes(op)) {
        fprintf(stderr, "tessera tune: no op named '%s'\n", op);
        return 2;
    }
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(device, &dev);
    if (st != TSR_SUCCESS) return fail(st);
    if (show) {
        int rc = show_tuning(dev, op);
        tsr_device_close(dev);
        return rc;
    }
    if (isatty(STDERR_FILENO)) to.progress = tune_progress; /* quiet when not on a terminal */
    int nops = 0;
    for (const char *const *o = tsr_op_names(); *o; ++o) nops += strcmp(op, "all") == 0 || strcmp(op, *o) == 0;
    if (to.budget_seconds > 0) to.budget_seconds /= nops;
    printf("tuning on %s (%s)\n", tsr_device_get_info(dev)->name, tsr_device_get_info(dev)->platform_name);
    printf("%-8s %-9s %-16s %9s %9s %-7s %7s %5s %5s %5s %5s  %s\n", "op", "class", "problem", "default", "best",
           "unit", "gain", "evals", "wrong", "build", "aband", "best configuration");
    int rc = 0;
    for (const char *const *o = tsr_op_names(); *o && rc == 0; ++o) {
        if (strcmp(op, "all") != 0 && strcmp(op, *o) != 0) continue;
        tsr_tune_result results[16];
        size_t n = 0;
        st = tsr_tune(dev, *o, &to, results, 16, &n);
        if (to.progress) fprintf(stderr, "\r\033[K");
        for (size_t i = 0; i < n; ++i) {
            const tsr_tune_result *r = &results[i];
            printf("%-8s %-9s %-16s %9.1f %9.1f %-7s %6.2fx %5d %5d %5d %5d  %s\n", r->op, r->problem_class,
                   r->problem, r->default_gflops, r->best_gflops, r->unit,
                   r->default_gflops > 0 ? r->best_gflops / r->default_gflops : 0,
                   r->evaluated, r->wrong_results, r->build_failures, r->abandoned, r->best_config);
        }
        if (st != TSR_SUCCESS) rc = fail(st);
    }
    if (rc == 0 && !to.dry_run) {
        char path[1024];
        if (tsr_tuning_db_path(path, sizeof path) == TSR_SUCCESS) printf("saved to %s\n", path);
    }
    tsr_device_close(dev);
    return rc;
}

static int cmd_peak(int argc, char **argv) {
    static const struct option opts[] = {{"device", required_argument, NULL, 'd'}, {"budget", required_argument, NULL, 'b'},
                                         {"size", required_argument, NULL, 's'},   {"json", required_argument, NULL, 'j'},
                                         {"tests", required_argument, NULL, 't'},  {"help", no_argument, NULL, 'h'},
                                         {0}};
    const char *device = NULL, *json = NULL;
    peak_options po = {.budget_s = 0.5};
    int c;
    while ((c = getopt_long(argc, argv, "d:b:s:j:t:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'j': json = optarg; break;
        case 't': {
            char bad[64];
            if (!peak_parse_tests(optarg, &po.tests, bad, sizeof bad)) {
                fprintf(stderr, "tessera peak: unknown test '%s' in --tests (bandwidth, compute, launch, transfers, "
                                "host)\n", bad);
                return 2;
            }
            break;
        }
        case 'b':
            if (bench_parse_seconds(optarg, "--budget", false, BENCH_MAX_SECONDS, &po.budget_s) != TSR_SUCCESS)
                return usage_error("peak");
            break;
        case 's': {
            uint64_t mib = 0;
            if (bench_parse_count(optarg, "--size (MiB)", 1, (uint64_t)1 << 20, &mib) != TSR_SUCCESS)
                return usage_error("peak");
            po.buffer_bytes = (size_t)mib << 20;
            break;
        }
        default: return usage(c == 'h' ? stdout : stderr);
        }
    }
    if (optind < argc) return usage(stderr);
    tsr_status st = json ? bench_check_output(json) : TSR_SUCCESS;
    if (st != TSR_SUCCESS) return fail(st);
    tsr_device *dev = NULL;
    st = tsr_device_open(device, &dev);
    if (st != TSR_SUCCESS) return fail(st);
    const tsr_device_info *info = tsr_device_get_info(dev);
    po.simulator = bench_is_simulator(info);
    printf("peaks of %d:%d %s (%s, %s)%s\n", info->platform_index, info->device_index, info->name,
           tsr_device_type_str(info->type), info->platform_name, po.simulator ? ", a simulator: a reduced set" : "");
    peak_result r;
    st = peak_measure(dev, &po, &r);
    if (st == TSR_SUCCESS) {
        peak_print(stdout, &r);
        if (json) {
            cJSON *o = peak_to_json(&r);
            cJSON *root = cJSON_CreateObject();
            cJSON_AddStringToObject(root, "device", tsr_device_fingerprint(dev));
            cJSON_AddItemToObject(root, "peaks", o);
            char *text = cJSON_Print(root);
            cJSON_Delete(root);
            st = text ? tsr_write_file_atomic(json, text, strlen(text)) : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
            free(text);
        }
    }
    tsr_device_close(dev);
    return st == TSR_SUCCESS ? 0 : fail(st);
}

static int cmd_report(int argc, char **argv) {
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'},      {"out", required_argument, NULL, 'o'},
        {"budget", required_argument, NULL, 'b'},      {"peak-budget", required_argument, NULL, 'p'},
        {"tune-budget", required_argument, NULL, 't'}, {"no-peers", no_argument, NULL, 'n'},
        {"merge", no_argument, NULL, 'm'},             {"help", no_argument, NULL, 'h'},
        {0}};
    report_options ro = {.out_dir = "tessera-report", .budget_s = 0.5, .peak = {.budget_s = 0.25}, .tune_budget_s = 120,
                         .peers = true};
    const char *selectors[64];
    size_t nsel = 0;
    int merge = 0, c;
    while ((c = getopt_long(argc, argv, "d:o:b:p:t:nmh", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (nsel == 64) {
                fprintf(stderr, "tessera report: at most 64 --device options\n");
                return 2;
            }
            selectors[nsel++] = optarg;
            break;
        case 'o': ro.out_dir = optarg; break;
        case 'b':
        case 'p':
        case 't':
            if (bench_parse_seconds(optarg, c == 'b' ? "--budget" : c == 'p' ? "--peak-budget" : "--tune-budget", c == 't',
                                    BENCH_MAX_SECONDS,
                                    c == 'b' ? &ro.budget_s : c == 'p' ? &ro.peak.budget_s : &ro.tune_budget_s) != TSR_SUCCESS)
                return usage_error("report");
            break;
        case 'n': ro.peers = false; break;
        case 'm': merge = 1; break;
        default: return usage(c == 'h' ? stdout : stderr);
        }
    }
    /* The output directory is made and probed before anything runs. */
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/report.json", ro.out_dir);
    tsr_status st = tsr_make_dirs(ro.out_dir);
    if (st == TSR_SUCCESS) st = bench_check_output(probe);
    if (st != TSR_SUCCESS) return fail(st);
    cJSON *root = NULL;
    if (merge) {
        if (optind >= argc || nsel) {
            fprintf(stderr, "tessera report --merge: name the report.json files to combine (and no --device)\n");
            return 2;
        }
        st = report_merge((const char *const *)&argv[optind], (size_t)(argc - optind), &root);
    } else {
        if (optind < argc) return usage(stderr);
        st = report_run(nsel ? selectors : NULL, nsel, &ro, &root);
    }
    if (st == TSR_SUCCESS) st = report_write(root, ro.out_dir, false);
    size_t failed = st == TSR_SUCCESS ? report_failed_devices(root) : 0;
    cJSON_Delete(root);
    if (st != TSR_SUCCESS) return fail(st);
    if (failed) {
        fprintf(stderr, "tessera report: %zu device%s failed; see %s/report.md\n", failed, failed == 1 ? "" : "s",
                ro.out_dir);
        return 1;
    }
    return 0;
}

static int run_command(int argc, char **argv);

int main(int argc, char **argv) {
    tsr_set_warning_handler(print_warning, NULL);
    int rc = run_command(argc, argv);
    tsr_set_warning_handler(NULL, NULL);
    forget_warnings();
    return rc;
}

static int run_command(int argc, char **argv) {
    if (argc < 2) return usage(stderr);
    const char *cmd = argv[1];
    argc -= 1;
    argv += 1;
    if (strcmp(cmd, "devices") == 0) return cmd_devices(argc, argv);
    if (strcmp(cmd, "demo") == 0) return cmd_demo(argc, argv);
    if (strcmp(cmd, "build-binaries") == 0) return cmd_build_binaries(argc, argv);
    if (strcmp(cmd, "cache") == 0) return cmd_cache(argc, argv);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc, argv);
    if (strcmp(cmd, "tune") == 0) return cmd_tune(argc, argv);
    if (strcmp(cmd, "peak") == 0) return cmd_peak(argc, argv);
    if (strcmp(cmd, "report") == 0) return cmd_report(argc, argv);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("tessera %s\n", TSR_VERSION_STRING);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) return usage(stdout);
    fprintf(stderr, "tessera: unknown command '%s'\n\n", cmd);
    return usage(stderr);
}
