/* tessera demo: run each op of the runtime's op table once on a device and check it. */
#include "cli.h"

#include <string.h>

/* One line when the op runs untuned on this device for some class because every tuned entry of
 * it is stale (tuned for a kernel source that has changed since); never tuned says nothing. */
static void warn_stale(tsr_device *dev, const char *op) {
    char list[256] = "";
    int stale = 0;
    for (const char *const *cls = tsr_op_classes(op); cls && *cls; ++cls) {
        tsr_config_info ci;
        if (tsr_config_lookup(dev, op, *cls, &ci) != TSR_SUCCESS) continue; /* the demo line reports failures */
        if (ci.source != TSR_CONFIG_BUILTIN_DEFAULT || ci.stale_passed_over == 0) continue;
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s", stale++ ? ", " : "", *cls);
    }
    if (stale)
        printf("  %-10s warning: runs untuned (the built-in default) for class%s %s: %s stale (kernel source changed "
               "since); run tessera tune --op %s\n",
               op, stale > 1 ? "es" : "", list, stale > 1 ? "their tuned entries are" : "its tuned entry is", op);
}

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
        warn_stale(dev, *op);
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
