/* tessera peak: the device's limits (bandwidth, fp32 throughput, launch latency, transfers). */
#include "cli.h"
#include "report.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static int run_peak(int argc, char **argv) {
    static const struct option options[] = {CLI_OPTION_DEVICE,
                                            {"budget", required_argument, NULL, 'b'},
                                            {"size", required_argument, NULL, 's'},
                                            {"json", required_argument, NULL, 'j'},
                                            {"tests", required_argument, NULL, 't'},
                                            CLI_OPTION_HELP,
                                            {0}};
    const char *device = NULL, *json = NULL;
    peak_options po = {.budget_s = 0.5};
    int c, rc = 0;
    while ((c = cli_next_option(&cli_peak, argc, argv, "d:b:s:j:t:h", options, &rc)) != -1) {
        switch (c) {
        case CLI_STOP: return rc;
        case 'd': device = optarg; break;
        case 'j': json = optarg; break;
        case 't': {
            char bad[64], names[128];
            if (!peak_parse_tests(optarg, &po.tests, bad, sizeof bad))
                return cli_misuse("peak", "unknown test '%s' in --tests (%s)", bad, peak_test_list(names, sizeof names));
            break;
        }
        case 'b':
            if ((rc = cli_seconds("peak", optarg, "--budget", false, &po.budget_s))) return rc;
            break;
        case 's': {
            uint64_t mib = 0;
            if ((rc = cli_count("peak", optarg, "--size (MiB)", 1, (uint64_t)1 << 20, &mib))) return rc;
            po.buffer_bytes = (size_t)mib << 20;
            break;
        }
        }
    }
    if (optind < argc) return cli_usage(stderr);
    tsr_status st = json ? util_check_output(json) : TSR_SUCCESS;
    if (st != TSR_SUCCESS) return cli_fail(st);
    tsr_device *dev = NULL;
    st = tsr_device_open(device, &dev);
    if (st != TSR_SUCCESS) return cli_fail(st);
    const tsr_device_info *info = tsr_device_get_info(dev);
    po.simulator = util_is_simulator(info);
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
    return st == TSR_SUCCESS ? 0 : cli_fail(st);
}

const cli_command cli_peak = {
    .name = "peak",
    .summary = "  peak [--device SEL] [--budget SECONDS] [--size MIB] [--json FILE] [--tests LIST]\n"
               "                                       measure the device's limits: memory bandwidth,\n"
               "                                       fp32 throughput, launch latency, transfers (and\n"
               "                                       on CPUs the host's own read and memcpy); LIST:\n"
               "                                       some of bandwidth,compute,launch,transfers,host\n",
    .details = "--budget: seconds per test (default 0.5); --size: the buffer in MiB (default: 128 on CPUs,\n"
               "512 elsewhere, halved until the device holds it); simulators (Oclgrind) run a reduced set.\n",
    .notes = CLI_NOTE_DEVICE | CLI_NOTE_NUMBERS,
    .run = run_peak,
};
