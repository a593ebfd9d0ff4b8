/* tessera build-binaries: ahead-of-time kernel binaries for devices without a compiler. */
#include "cli.h"

#include <string.h>

static int run_build_binaries(int argc, char **argv) {
    cli_device_args a;
    int rc = 0;
    if (!cli_parse_device_args(&cli_build_binaries, argc, argv, true, false, &a, &rc)) return rc;
    if (!a.out) return cli_misuse("build-binaries", "--out DIR is required");
    /* --dtypes f16,bf16: the 16-bit programs too */
    tsr_dtype dtypes[8];
    size_t ndtypes = 0;
    if (a.dtypes) {
        char list[64];
        if (strlen(a.dtypes) >= sizeof list)
            return cli_misuse("build-binaries", "--dtypes: a list of f32, f16 and bf16 (got a longer text)");
        strcpy(list, a.dtypes);
        for (char *save = NULL, *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
            if (ndtypes == sizeof dtypes / sizeof dtypes[0] || tsr_dtype_parse(name, &dtypes[ndtypes]) != TSR_SUCCESS)
                return cli_misuse("build-binaries", "--dtypes: '%s' is not a list of f32, f16 and bf16", a.dtypes);
            ++ndtypes;
        }
        if (ndtypes == 0) return cli_misuse("build-binaries", "--dtypes: an empty list");
    }
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(a.device, &dev);
    if (st != TSR_SUCCESS) return cli_fail(st);
    size_t written = 0;
    st = tsr_build_binaries_typed(dev, a.out, dtypes, ndtypes, &written);
    const tsr_device_info *info = tsr_device_get_info(dev);
    if (st == TSR_SUCCESS)
        printf("wrote %zu binaries for %s to %s (use TSR_BINARY_DIR=%s)\n", written, info->name, a.out, a.out);
    tsr_device_close(dev);
    return st == TSR_SUCCESS ? 0 : cli_fail(st);
}

const cli_command cli_build_binaries = {
    .name = "build-binaries",
    .summary = "  build-binaries --device SEL --out DIR [--dtypes f16,bf16]\n"
               "                                       write ahead-of-time kernel binaries (for devices\n"
               "                                       without a compiler; load them with TSR_BINARY_DIR);\n"
               "                                       --dtypes adds the 16-bit storage programs\n",
    .notes = CLI_NOTE_DEVICE,
    .run = run_build_binaries,
};
