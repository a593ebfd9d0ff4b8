/* tessera report: peaks, a budgeted tune and the op suite on every device, or merged reports. */
#include "cli.h"
#include "report.h"

#include <cjson/cJSON.h>
#include <string.h>
#ifdef TSR_HAVE_MPI
#include "fleet.h"
#endif

/* --cases ID,ID...: the standard suite's cases with those ids, in the suite's order (so that reports
 * with the same cases list them alike); an id the suite does not have is refused with the list. */
static int pick_cases(const char *list, report_case *picked, size_t *npicked) {
    size_t n = 0;
    const report_case *suite = report_standard_suite(&n);
    bool want[64] = {false};
    if (n > sizeof want / sizeof want[0]) n = sizeof want / sizeof want[0];
    const char *p = list;
    bool any = false;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 0) return cli_misuse("report", "--cases: an empty case id in '%s'", list);
        size_t i = 0;
        while (i < n && !(strlen(suite[i].id) == len && strncmp(suite[i].id, p, len) == 0)) ++i;
        if (i == n) {
            char ids[1024] = "";
            for (size_t j = 0; j < n; ++j)
                snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%s", j ? ", " : "", suite[j].id);
            return cli_misuse("report", "--cases: '%.*s' is no case of the suite (%s)", (int)(len > 64 ? 64 : len), p, ids);
        }
        want[i] = any = true;
        if (!p[len]) break;
        p += len + 1;
    }
    *npicked = 0;
    for (size_t i = 0; i < n && any; ++i)
        if (want[i]) picked[(*npicked)++] = suite[i];
    return 0;
}

static int run_report(int argc, char **argv) {
    static const struct option options[] = {CLI_OPTION_DEVICE,
                                            {"out", required_argument, NULL, 'o'},
                                            {"budget", required_argument, NULL, 'b'},
                                            {"peak-budget", required_argument, NULL, 'p'},
                                            {"peak-size", required_argument, NULL, 's'},
                                            {"tune-budget", required_argument, NULL, 't'},
                                            {"no-peers", no_argument, NULL, 'n'},
                                            {"quick", no_argument, NULL, 'q'},
                                            {"device-budget", required_argument, NULL, 'B'},
                                            {"merge", no_argument, NULL, 'm'},
                                            {"pytorch", required_argument, NULL, 'P'},
                                            {"mpi", no_argument, NULL, 'M'},
                                            {"cases", required_argument, NULL, 'c'},
                                            CLI_OPTION_HELP,
                                            {0}};
    report_options ro = {.out_dir = "tessera-report", .budget_s = 0.5, .peak = {.budget_s = 0.25}, .tune_budget_s = 120,
                         .peers = true, .device_budget_s = 900};
    const char *selectors[64];
    size_t nsel = 0;
    bool merge = false, mpi = false;
    const char *pytorch_file = NULL;
    static report_case picked[64];
    int c, rc = 0;
    while ((c = cli_next_option(&cli_report, argc, argv, "d:o:b:p:s:t:nqB:mP:Mc:h", options, &rc)) != -1) {
        switch (c) {
        case CLI_STOP: return rc;
        case 'd':
            if (nsel == 64) return cli_misuse("report", "at most 64 --device options");
            selectors[nsel++] = optarg;
            break;
        case 'o': ro.out_dir = optarg; break;
        case 'b':
            if ((rc = cli_seconds("report", optarg, "--budget", false, &ro.budget_s))) return rc;
            break;
        case 'p':
            if ((rc = cli_seconds("report", optarg, "--peak-budget", false, &ro.peak.budget_s))) return rc;
            break;
        case 's': {
            uint64_t mib = 0;
            if ((rc = cli_count("report", optarg, "--peak-size (MiB)", 1, (uint64_t)1 << 20, &mib))) return rc;
            ro.peak.buffer_bytes = (size_t)mib << 20;
            break;
        }
        case 't': /* 0: no tuning */
            if ((rc = cli_seconds("report", optarg, "--tune-budget", true, &ro.tune_budget_s))) return rc;
            break;
        case 'n': ro.peers = false; break;
        case 'q': ro.quick = true; break;
        case 'B': /* 0: no limit */
            if ((rc = cli_seconds("report", optarg, "--device-budget", true, &ro.device_budget_s))) return rc;
            break;
        case 'm': merge = true; break;
        case 'P': pytorch_file = optarg; break;
        case 'M': mpi = true; break;
        case 'c':
            if ((rc = pick_cases(optarg, picked, &ro.nsuite))) return rc;
            ro.suite = picked;
            break;
        }
    }
    if (merge && ro.suite) return cli_misuse("report", "--merge runs nothing: --cases does not apply");
    if (mpi) {
        if (merge) return cli_misuse("report", "--mpi and --merge are separate commands: give one");
        if (optind < argc) return cli_usage(stderr);
#ifdef TSR_HAVE_MPI
        /* Rank 0 checks the output directory and the --pytorch file; the others write nothing. */
        return fleet_report(argc, argv, nsel ? selectors : NULL, nsel, &ro, pytorch_file);
#else
        fprintf(stderr, "tessera report: --mpi: this tessera was built without MPI (install Open MPI and "
                        "reconfigure; -Dmpi=enabled insists)\n");
        return 1;
#endif
    }
    /* The output directory is made and probed before anything runs. */
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/report.json", ro.out_dir);
    tsr_status st = tsr_make_dirs(ro.out_dir);
    if (st == TSR_SUCCESS) st = util_check_output(probe);
    if (st != TSR_SUCCESS) return cli_fail(st);
    cJSON *root = NULL, *pytorch = NULL;
    if (pytorch_file && (st = report_load_pytorch(pytorch_file, &pytorch)) != TSR_SUCCESS) return cli_fail(st);
    if (merge) {
        if (optind >= argc || nsel) {
            cJSON_Delete(pytorch);
            return cli_misuse("report --merge", "name the report.json files to combine (and no --device)");
        }
        st = report_merge((const char *const *)&argv[optind], (size_t)(argc - optind), &root);
    } else {
        if (optind < argc) {
            cJSON_Delete(pytorch);
            return cli_usage(stderr);
        }
        st = report_run(nsel ? selectors : NULL, nsel, &ro, &root);
    }
    if (st == TSR_SUCCESS && pytorch) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "pytorch");
        cJSON_AddItemToObject(root, "pytorch", pytorch);
        pytorch = NULL;
    }
    cJSON_Delete(pytorch);
    if (st == TSR_SUCCESS) st = report_write(root, ro.out_dir, false);
    size_t failed = st == TSR_SUCCESS ? report_failed_devices(root) : 0;
    cJSON_Delete(root);
    if (st != TSR_SUCCESS) return cli_fail(st);
    if (failed) {
        fprintf(stderr, "tessera report: %zu device%s failed; see %s/report.md\n", failed, failed == 1 ? "" : "s",
                ro.out_dir);
        return 1;
    }
    return 0;
}

const cli_command cli_report = {
    .name = "report",
    .summary = "  report [--device SEL]... [--out DIR] [--budget SECONDS] [--peak-budget SECONDS]\n"
               "         [--peak-size MIB] [--tune-budget SECONDS] [--device-budget SECONDS] [--quick]\n"
               "         [--no-peers] [--cases ID,...] [--pytorch FILE]\n"
               "                                       peaks, a budgeted tune where nothing is tuned, and\n"
               "                                       the op suite on every device (or each --device):\n"
               "                                       DIR/report.json, report.md, roofline and bar charts;\n"
               "                                       two or more devices side by side (the first is the\n"
               "                                       baseline); a device that cannot run is skipped\n"
               "  report --merge A.json B.json ... [--out DIR] [--pytorch FILE]\n"
               "                                       combine reports made on different machines\n"
               "  report --mpi [--device SEL]... [--out DIR] [the options above]   (under mpirun)\n"
               "                                       a report on every rank's devices, merged on rank 0\n",
    .details = "Defaults: --out tessera-report, --budget 0.5 (per row), --peak-budget 0.25 (per test),\n"
               "--peak-size as peak --size (128 MiB on CPUs, 512 elsewhere, halved until the device holds it;\n"
               "one given is used on every device: where it does not fit, that device's peaks fail),\n"
               "--tune-budget 120 (per device; 0: no tuning), --device-budget 900 (per device: no case\n"
               "starts after that many seconds on it; 0: no limit). --quick runs every case at a mid-size\n"
               "shape, the same on every device, and the reduced peak set: for slow implementations.\n"
               "--cases ID,...: only those cases of the suite (gemm-square, gelu-16M, ...; a wrong id lists them).\n"
               "--pytorch FILE: the JSON of bench/pytorch_peer.py (tessera and PyTorch side by side), checked\n"
               "and shown as report.md's \"Against PyTorch\" section (also with --merge).\n"
               "--mpi (under mpirun, or alone as a fleet of one; builds with Open MPI only): every rank reports\n"
               "on its own devices, and rank 0 writes DIR/ranks/rank-R/ for each rank and their merge in DIR,\n"
               "the same bytes as report --merge DIR/ranks/rank-*/report.json. Every rank gets the same\n"
               "arguments; a rank without a device is noted and left out; a rank that stalls ends the job\n"
               "after TSR_MPI_TIMEOUT seconds (600; ranks finishing further apart need more). See docs/fleet.md.\n",
    .notes = CLI_NOTE_DEVICE | CLI_NOTE_NUMBERS,
    .run = run_report,
};
