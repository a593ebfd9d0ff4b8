/* tessera demo: run each op of the runtime's op table once on a device and check it. */
#include "cli.h"

static int run_demo(int argc, char **argv) {
    cli_device_args a;
    int rc = 0;
    if (!cli_parse_device_args(&cli_demo, argc, argv, false, false, &a, &rc)) return rc;
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(a.device, &dev);
    if (st != TSR_SUCCESS) return cli_fail(st);
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

const cli_command cli_demo = {
    .name = "demo",
    .summary = "  demo [--device SEL]                  run each op once on a device and check it\n",
    .details = "Every op of the runtime's op table, on a small problem, checked against a host reference;\n"
               "exit 1 when any fails.\n",
    .notes = CLI_NOTE_DEVICE,
    .run = run_demo,
};
