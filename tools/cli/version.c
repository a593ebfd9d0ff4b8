/* tessera version: the library's version. */
#include "cli.h"

#include <string.h>

/* Operands and options other than --help are ignored, as they always were. */
static int run_version(int argc, char **argv) {
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) return cli_help(&cli_version);
    printf("tessera %s\n", TSR_VERSION_STRING);
    return 0;
}

const cli_command cli_version = {
    .name = "version",
    .summary = "  version                              print the version\n",
    .run = run_version,
};
