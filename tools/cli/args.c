/* The argument layer every command shares: the option loop (util's, as tessera-mpi's), --device, error printing, strict
 * numbers and wrapped usage text. */
#define _GNU_SOURCE
#include "cli.h"

#include <stdarg.h>
#include <string.h>

int cli_next_option(const cli_command *command, int argc, char **argv, const char *short_options,
                    const struct option *long_options, int *exit_code) {
    const char *bad = NULL;
    int c = util_next_option(argc, argv, short_options, long_options, false, &bad);
    if (c == -1) return -1;
    if (c == 'h') {
        *exit_code = cli_help(command);
        return CLI_STOP;
    }
    if (c == UTIL_OPTION_UNKNOWN || c == UTIL_OPTION_MISSING) { /* getopt has named the option */
        *exit_code = cli_usage(stderr);
        return CLI_STOP;
    }
    return c;
}

bool cli_parse_device_args(const cli_command *command, int argc, char **argv, bool allow_out, bool allow_clear,
                           cli_device_args *args, int *exit_code) {
    static const struct option options[] = {CLI_OPTION_DEVICE,
                                            {"out", required_argument, NULL, 'o'},
                                            {"clear", no_argument, NULL, 'c'},
                                            {"dtypes", required_argument, NULL, 'T'},
                                            CLI_OPTION_HELP,
                                            {0}};
    memset(args, 0, sizeof *args);
    int c;
    while ((c = cli_next_option(command, argc, argv, "d:o:ch", options, exit_code)) != -1) {
        if (c == CLI_STOP) return false;
        if (c == 'd') args->device = optarg;
        else if (c == 'o' && allow_out) args->out = optarg;
        else if (c == 'T' && allow_out) args->dtypes = optarg; /* build-binaries, the command with --out */
        else if (c == 'c' && allow_clear) args->clear = true;
        else { /* an option of another of these commands */
            *exit_code = cli_usage(stderr);
            return false;
        }
    }
    if (optind < argc) {
        *exit_code = cli_usage(stderr);
        return false;
    }
    return true;
}

int cli_fail(tsr_status status) {
    fprintf(stderr, "tessera: %s: %s\n", tsr_status_str(status), tsr_last_error());
    return 1;
}

int cli_misuse(const char *command, const char *format, ...) {
    fprintf(stderr, "tessera %s: ", command);
    va_list ap;
    va_start(ap, format);
    vfprintf(stderr, format, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

int cli_bad_value(const char *command) { return cli_misuse(command, "%s", tsr_last_error()); }

int cli_seconds(const char *command, const char *text, const char *option, bool allow_zero, double *out) {
    if (util_parse_seconds(text, option, allow_zero, UTIL_MAX_SECONDS, out) != TSR_SUCCESS)
        return cli_bad_value(command);
    return 0;
}

int cli_count(const char *command, const char *text, const char *option, uint64_t min, uint64_t max, uint64_t *out) {
    if (util_parse_count(text, option, min, max, out) != TSR_SUCCESS) return cli_bad_value(command);
    return 0;
}

int cli_u64(const char *command, const char *text, const char *option, uint64_t *out) {
    if (util_parse_u64(text, option, out) != TSR_SUCCESS) return cli_bad_value(command);
    return 0;
}

void cli_print_wrapped(FILE *out, const char *text, int indent, int width) {
    const char *p = text;
    while (*p) {
        while (*p == ' ') ++p;
        if (!*p) break;
        /* As many whole words as fit in width; at least one. */
        const char *end = p, *fit = NULL;
        while (*end) {
            const char *word_end = end;
            while (*word_end && *word_end != ' ') ++word_end;
            if (fit && word_end - p > width) break;
            fit = word_end;
            end = word_end;
            while (*end == ' ') ++end;
        }
        fprintf(out, "%*s%.*s\n", indent, "", (int)(fit - p), p);
        p = fit;
    }
}
