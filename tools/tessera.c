/* tessera: the command-line front end. Each command lives in tools/cli/<command>.c; this file
 * holds the command table (handed to cli/usage.c, which prints the usage from it) and main. */
#define _GNU_SOURCE
#include "cli.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The commands in the order the usage lists them: a new command is its file and one line here. */
static const cli_command *const commands[] = {
    &cli_devices, &cli_demo, &cli_build_binaries, &cli_cache, &cli_bench,
    &cli_tune,    &cli_peak, &cli_report,         &cli_version,
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const cli_command *find_command(const char *name) {
    for (size_t i = 0; i < NCOMMANDS; ++i)
        if (strcmp(commands[i]->name, name) == 0) return commands[i];
    return NULL;
}

static int unknown_command(const char *name) {
    fprintf(stderr, "tessera: unknown command '%s'\n\n", name);
    return cli_usage(stderr);
}

/* Every library warning of every command, on stderr, each distinct text once: a damaged
 * tuning database warns again for each device opened, and after each re-read. */
static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;
static char **warned;
static size_t nwarned;

static void print_warning(const char *message, void *user) {
    (void)user;
    pthread_mutex_lock(&warned_lock);
    bool seen = false;
    for (size_t i = 0; i < nwarned && !seen; ++i) seen = strcmp(warned[i], message) == 0;
    if (!seen) {
        fprintf(stderr, "tessera: warning: %s\n", message);
        char **grown = realloc(warned, (nwarned + 1) * sizeof *warned);
        char *copy = strdup(message);
        if (grown) warned = grown;
        if (grown && copy) warned[nwarned++] = copy;
        else free(copy);
    }
    pthread_mutex_unlock(&warned_lock);
}

static void forget_warnings(void) {
    for (size_t i = 0; i < nwarned; ++i) free(warned[i]);
    free(warned);
    warned = NULL;
    nwarned = 0;
}

static int run_command(int argc, char **argv) {
    if (argc < 2) return cli_usage(stderr);
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0) name = "version";
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        /* "help", "help --help" and "help help" all mean the general usage */
        if (argc < 3 || strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "help") == 0)
            return cli_usage(stdout);
        const cli_command *command = find_command(argv[2]);
        return command ? cli_help(command) : unknown_command(argv[2]);
    }
    if (strcmp(name, "tune-worker") == 0) return cli_tune_worker(argc - 1, argv + 1); /* not in the usage */
    const cli_command *command = find_command(name);
    if (!command) return unknown_command(name);
    return command->run(argc - 1, argv + 1);
}

int main(int argc, char **argv) {
    cli_set_commands(commands, NCOMMANDS);
    tsr_set_warning_handler(print_warning, NULL);
    int rc = run_command(argc, argv);
    tsr_set_warning_handler(NULL, NULL);
    forget_warnings();
    return rc;
}
