/* The usage, from the command table main hands over: the full usage and each command's own
 * --help. The commands call it on misuse; the table (tessera.c) lists the commands, so it comes
 * in through cli_set_commands rather than by name (no circle between the commands and main). */
#include "cli.h"

static const cli_command *const *commands;
static size_t ncommands;

void cli_set_commands(const cli_command *const *table, size_t count) {
    commands = table;
    ncommands = count;
}

static const char note_device[] =
    "SEL: cpu, gpu, accelerator, P:D indices, or part of a device name (default: $TSR_DEVICE,\n"
    "     else a GPU, else an accelerator, else a CPU)\n";
static const char note_numbers[] =
    "Numbers are taken whole or refused: counts and sizes are plain digits (gelu sizes may end\n"
    "in K or M), seconds are plain decimals up to 86400 (0 only for --tune-budget: no tuning),\n"
    "seeds are decimal or 0x-hexadecimal; sizes that do not fit the device or the host are\n"
    "refused before anything is allocated.\n"
    "Output files (--json, --out, --log) are checked before anything is measured.\n";

static void print_summary(const cli_command *command, FILE *out) {
    if (command->print_summary) command->print_summary(out);
    else fputs(command->summary, out);
}

int cli_usage(FILE *out) {
    fputs("usage: tessera <command> [options]\n\ncommands:\n", out);
    for (size_t i = 0; i < ncommands; ++i) print_summary(commands[i], out);
    fputs("  help [COMMAND]                       this text, or a command's own (also COMMAND --help)\n", out);
    fprintf(out, "\n%s%s", note_device, note_numbers);
    return out == stderr ? 2 : 0;
}

int cli_help(const cli_command *command) {
    fputs("usage:\n", stdout);
    print_summary(command, stdout);
    if (command->details || command->print_details) fputs("\n", stdout);
    if (command->details) fputs(command->details, stdout);
    if (command->print_details) command->print_details(stdout);
    if (command->notes) fputs("\n", stdout);
    if (command->notes & CLI_NOTE_DEVICE) fputs(note_device, stdout);
    if (command->notes & CLI_NOTE_NUMBERS) fputs(note_numbers, stdout);
    return 0;
}
