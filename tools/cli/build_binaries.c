/* tessera build-binaries: ahead-of-time kernel binaries for devices without a compiler. */
#include "cli.h"

static int run_build_binaries(int argc, char **argv) {
    cli_device_args a;
    int rc = 0;
    if (!cli_parse_device_args(&cli_build_binaries, argc, argv, true, false, &a, &rc)) return rc;
    if (!a.out) return cli_misuse("build-binaries", "--out DIR is required");
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(a.device, &dev);
    if (st != TSR_SUCCESS) return cli_fail(st);
    size_t written = 0;
    st = tsr_build_binaries(dev, a.out, &written);
    const tsr_device_info *info = tsr_device_get_info(dev);
    if (st == TSR_SUCCESS)
        printf("wrote %zu binaries for %s to %s (use TSR_BINARY_DIR=%s)\n", written, info->name, a.out, a.out);
    tsr_device_close(dev);
    return st == TSR_SUCCESS ? 0 : cli_fail(st);
}

const cli_command cli_build_binaries = {
    .name = "build-binaries",
    .summary = "  build-binaries --device SEL --out DIR\n"
               "                                       write ahead-of-time kernel binaries (for devices\n"
               "                                       without a compiler; load them with TSR_BINARY_DIR)\n",
    .notes = CLI_NOTE_DEVICE,
    .run = run_build_binaries,
};
