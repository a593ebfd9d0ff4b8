/* The tessera command line: one file per command (tools/cli/<command>.c), each described by a
 * cli_command that tessera.c lists in its command table; this header is the argument layer they
 * share (option loop, common options, strict numbers, error printing). */
#ifndef TSR_CLI_H
#define TSR_CLI_H

#include "bench.h"
#include "tessera.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The notes a command's --help ends with (the top-level usage prints them all). */
enum {
    CLI_NOTE_DEVICE = 1,  /* what --device SEL takes */
    CLI_NOTE_NUMBERS = 2, /* numbers are strict; output files are checked first */
};

typedef struct cli_command {
    const char *name;
    /* Its lines in the usage (forms, options, what it does), each starting "  NAME"; or NULL and
     * print_summary where the lines come from a table (bench: the benchmark registry). */
    const char *summary;
    void (*print_summary)(FILE *out);
    const char *details; /* more for its own --help, after the summary; NULL: none */
    void (*print_details)(FILE *out); /* the same, from a table; NULL: none */
    unsigned notes;                   /* CLI_NOTE_* bits */
    /* Runs it: argv[0] is the command's name, options follow; returns the exit status
     * (0 done, 1 failed, 2 misused). */
    int (*run)(int argc, char **argv);
} cli_command;

/* The commands (one per file), in the order the usage lists them. */
extern const cli_command cli_devices, cli_demo, cli_build_binaries, cli_cache, cli_bench, cli_tune, cli_peak,
    cli_report, cli_version;

/* The hidden `tune-worker` command: a child of `tessera tune` compiling ahead. (tune.c) */
int cli_tune_worker(int argc, char **argv);

/* The command table the usage lists (tessera.c's, in order), set once at the start of main. (usage.c) */
void cli_set_commands(const cli_command *const *commands, size_t count);
/* The full usage on `out`: 0 for stdout (asked for), 2 for stderr (a misuse). (usage.c) */
int cli_usage(FILE *out);
/* The command's own usage on stdout; returns 0. (usage.c) */
int cli_help(const cli_command *command);

/* Options every command spells the same way. */
#define CLI_OPTION_DEVICE {"device", required_argument, NULL, 'd'}
#define CLI_OPTION_HELP {"help", no_argument, NULL, 'h'}

/* getopt_long over the command's options, with -h/--help and misuse handled: returns the next
 * option's letter (its value in optarg), -1 after the last option (operands from optind), or
 * CLI_STOP when the command must return *exit_code: its --help was printed (0) or an unknown
 * option or missing value was reported with the usage (2). */
#define CLI_STOP (-2)
int cli_next_option(const cli_command *command, int argc, char **argv, const char *short_options,
                    const struct option *long_options, int *exit_code);

/* --device SEL, and --out DIR / --clear where allowed: the options of demo, build-binaries and
 * cache. Returns true when the command goes on; otherwise it returns *exit_code. */
typedef struct cli_device_args {
    const char *device;
    const char *out;
    bool clear;
    const char *dtypes; /* build-binaries' --dtypes LIST (only with allow_out) */
} cli_device_args;
bool cli_parse_device_args(const cli_command *command, int argc, char **argv, bool allow_out, bool allow_clear,
                           cli_device_args *args, int *exit_code);

/* A library failure: "tessera: STATUS: message" on stderr; returns 1. */
int cli_fail(tsr_status status);
/* A misuse the command found: "tessera COMMAND: message" on stderr; returns 2. */
int cli_misuse(const char *command, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* A refused option value (the strict parser's message, from tsr_last_error): as cli_misuse. */
int cli_bad_value(const char *command);

/* Strict numbers through util's parsers (util_parse_*): 0 when *out is set, else the
 * refusal is printed for `command` and 2 returned. */
int cli_seconds(const char *command, const char *text, const char *option, bool allow_zero, double *out);
int cli_count(const char *command, const char *text, const char *option, uint64_t min, uint64_t max, uint64_t *out);
int cli_u64(const char *command, const char *text, const char *option, uint64_t *out);

/* `text` on `out` in lines of at most `width` characters (longer words stand alone), each
 * indented by `indent` spaces. */
void cli_print_wrapped(FILE *out, const char *text, int indent, int width);
/* The column where the usage's descriptions start. */
#define CLI_DESCRIPTION_COLUMN 39

#endif
