/* tessera bench OP: time an op against its peers and baselines; the ops, what their --sizes
 * list and their parts come from the benchmark registry (bench/registry.c). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void print_summary(FILE *out) {
    fputs("  bench OP [--device SEL] [--sizes LIST] [--json FILE] [--budget SECONDS] [--no-peers]\n"
          "        [--part NAME] [--clblast-xgemm \"GEMMK=0 MWG=64 ...\"] [--max-unfused L] [--layers LIST]\n"
          "        [--dtype IN[/OUT]] [--weights kept|per-call] [--forms all|chosen]\n",
          out);
    /* What it does, then per op what --sizes lists, its parts and its own options: each op's
     * lines from its registry entry. */
    char ops[256], line[1024];
    snprintf(line, sizeof line, "time OP (%s) against its peers (CLBlast, OpenBLAS) and baselines;",
             bench_op_list(ops, sizeof ops));
    cli_print_wrapped(out, line, CLI_DESCRIPTION_COLUMN, 52);
    size_t n = 0;
    const bench_entry *entries = bench_registry(&n);
    for (size_t i = 0; i < n; ++i) {
        const bench_entry *e = &entries[i];
        util_text text = {0};
        util_text_printf(&text, "%s sizes: %s", e->op, e->sizes);
        for (const bench_part *p = e->parts; p && p->name; ++p) {
            if (p == e->parts) util_text_printf(&text, "; %s parts: %s", e->op, p->name);
            else util_text_printf(&text, ", %s", p->name);
            if (p->what) util_text_printf(&text, " (%s)", p->what);
        }
        if (e->options) util_text_printf(&text, "; %s", e->options);
        util_text_printf(&text, "%s", i + 1 < n ? ";" : "");
        char *paragraph = util_text_finish(&text);
        if (paragraph) cli_print_wrapped(out, paragraph, CLI_DESCRIPTION_COLUMN, 52);
        free(paragraph);
    }
}

static void print_details(FILE *out) {
    fputs("Without --sizes each op runs its default sizes:\n", out);
    size_t n = 0;
    const bench_entry *entries = bench_registry(&n);
    for (size_t i = 0; i < n; ++i) fprintf(out, "  %-10s %s\n", entries[i].op, entries[i].default_sizes);
    fputs("--json FILE: the rows as a JSON array (op, shape, impl, device, time_ms, gflops, gbps, rel_err, ...).\n",
          out);
    fputs("--dtype IN[/OUT]: inputs (and output) stored as f16 or bf16 (computation stays fp32): each shape runs\n"
          "  in that type and in fp32, in alternation, and both rows are written (their \"dtype\" field).\n",
          out);
}

static int run_bench(int argc, char **argv) {
    char ops[256];
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) return cli_help(&cli_bench);
    if (argc < 2 || argv[1][0] == '-') return cli_misuse("bench", "name an op (%s)", bench_op_list(ops, sizeof ops));
    const char *op = argv[1];
    argc -= 1;
    argv += 1;
    static const struct option options[] = {CLI_OPTION_DEVICE,
                                            {"sizes", required_argument, NULL, 's'},
                                            {"json", required_argument, NULL, 'j'},
                                            {"budget", required_argument, NULL, 'b'},
                                            {"no-peers", no_argument, NULL, 'n'},
                                            CLI_OPTION_HELP,
                                            {"part", required_argument, NULL, 'p'},
                                            {"clblast-xgemm", required_argument, NULL, 'X'},
                                            {"max-unfused", required_argument, NULL, 'U'},
                                            {"layers", required_argument, NULL, 'L'},
                                            {"dtype", required_argument, NULL, 'T'},
                                            {"weights", required_argument, NULL, 'W'},
                                            {"forms", required_argument, NULL, 'F'},
                                            {0}};
    bench_options bo = {.budget_s = 1.0, .peers = true};
    const char *device = NULL, *json = NULL;
    int c, rc = 0;
    while ((c = cli_next_option(&cli_bench, argc, argv, "d:s:j:b:nhp:", options, &rc)) != -1) {
        switch (c) {
        case CLI_STOP: return rc;
        case 'p': bo.part = optarg; break;
        case 'L': bo.layers = optarg; break;
        case 'X': bo.clblast_xgemm = optarg; break;
        case 'T':
            if (!tsr_dtype_spec_parse(optarg, &bo.in_type, &bo.out_type))
                return cli_misuse("bench", "--dtype: '%s' is not f32, f16, bf16 or IN/OUT of them (e.g. f16/f32)",
                                  optarg);
            break;
        case 'W':
            if (strcmp(optarg, "kept") && strcmp(optarg, "per-call"))
                return cli_misuse("bench", "--weights: '%s' is not kept or per-call", optarg);
            bo.per_call_weights = strcmp(optarg, "per-call") == 0;
            break;
        case 'F':
            if (strcmp(optarg, "all") && strcmp(optarg, "chosen"))
                return cli_misuse("bench", "--forms: '%s' is not all or chosen", optarg);
            bo.chosen_form_only = strcmp(optarg, "chosen") == 0;
            break;
        case 'U': {
            uint64_t v = 0;
            if ((rc = cli_count("bench", optarg, "--max-unfused", 1, (uint64_t)1 << 24, &v))) return rc;
            bo.max_unfused = (size_t)v;
            break;
        }
        case 'd': device = optarg; break;
        case 's': bo.sizes = optarg; break;
        case 'j': json = optarg; break;
        case 'b':
            if ((rc = cli_seconds("bench", optarg, "--budget", false, &bo.budget_s))) return rc;
            break;
        case 'n': bo.peers = false; break;
        }
    }
    if (optind < argc) return cli_usage(stderr);
    const bench_entry *entry = bench_find(op);
    if (!entry)
        return cli_misuse("bench", "no benchmark for op '%s' (available: %s)", op, bench_op_list(ops, sizeof ops));
    /* A --json that cannot be written fails now, not after the benchmark. */
    tsr_status st = json ? util_check_output(json) : TSR_SUCCESS;
    if (st != TSR_SUCCESS) return cli_fail(st);
    tsr_device *dev = NULL;
    st = tsr_device_open(device, &dev);
    if (st != TSR_SUCCESS) return cli_fail(st);
    const tsr_device_info *info = tsr_device_get_info(dev);
    printf("%s on %d:%d %s (%s, %s)\n", op, info->platform_index, info->device_index, info->name,
           tsr_device_type_str(info->type), info->platform_name);
    /* Every implementation (tessera's and its peers') is timed the same way, whatever the
     * driver's profiling timestamps are worth: the JSON rows say "timing": "host". */
    printf("timing: host clock around each call (enqueue to completion, launch cost included); median of the runs\n");
    bench_report report = {0};
    snprintf(report.device, sizeof report.device, "%s", info->name);
    st = bench_run(entry, dev, &bo, &report);
    if (st == TSR_SUCCESS && json) st = bench_write_json(&report, json);
    bench_report_free(&report);
    tsr_device_close(dev);
    return st == TSR_SUCCESS ? 0 : cli_fail(st);
}

const cli_command cli_bench = {
    .name = "bench",
    .print_summary = print_summary,
    .print_details = print_details,
    .notes = CLI_NOTE_DEVICE | CLI_NOTE_NUMBERS,
    .run = run_bench,
};
