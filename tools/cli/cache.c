/* tessera cache: show (or empty) the kernel binary cache of a device. */
#define _GNU_SOURCE
#include "cli.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int run_cache(int argc, char **argv) {
    cli_device_args a;
    int rc = 0;
    if (!cli_parse_device_args(&cli_cache, argc, argv, false, true, &a, &rc)) return rc;
    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(a.device, &dev);
    if (st != TSR_SUCCESS) return cli_fail(st);
    tsr_cache_info ci;
    tsr_cache_get_info(dev, &ci);
    tsr_device_close(dev);
    /* An unsafe directory (see docs/cache.md: what is trusted) is not persistent: neither listed nor cleared. */
    if (!ci.persistent) {
        printf("no disk cache: %s\n", ci.warning);
        return 0;
    }
    size_t entries = 0, bytes = 0, removed = 0;
    DIR *d = opendir(ci.dir);
    if (!d) {
        fprintf(stderr, "tessera: cannot read %s\n", ci.dir);
        return 1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        /* Only tessera's own entries: 32 hex digits + ".bin". */
        size_t len = strlen(e->d_name);
        if (len != 36 || strcmp(e->d_name + 32, ".bin") != 0 || strspn(e->d_name, "0123456789abcdef") != 32) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", ci.dir, e->d_name);
        /* lstat, never open: a FIFO planted under an entry's name must not hang the listing. */
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode)) bytes += (size_t)sb.st_size;
        ++entries;
        if (a.clear && unlink(path) == 0) ++removed;
    }
    closedir(d);
    printf("cache directory %s: %zu entries, %.1f MiB\n", ci.dir, entries, (double)bytes / (1 << 20));
    if (a.clear) {
        /* Temporaries of writers that were killed mid-write go too (of any age: a writer racing
         * with --clear only loses its entry, with a warning). */
        size_t temporaries = tsr_remove_stale_temporaries(ci.dir, NULL, 0.0);
        printf("removed %zu entries and %zu temporary files\n", removed, temporaries);
    }
    return 0;
}

const cli_command cli_cache = {
    .name = "cache",
    .summary = "  cache [--device SEL] [--clear]       show (or empty) the kernel binary cache\n",
    .details = "Only tessera's own entries are counted or removed; --clear also removes the temporary files of\n"
               "writers that were interrupted.\n",
    .notes = CLI_NOTE_DEVICE,
    .run = run_cache,
};
