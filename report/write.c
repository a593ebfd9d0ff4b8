/* Writing a report: report.json, the charts (SVG, PNG through rsvg-convert when on PATH) and
 * report.md, each atomically. */
#define _GNU_SOURCE
#include "report_parts.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static bool have_program(const char *name) {
    const char *path = getenv("PATH");
    if (!path) return false;
    char buf[4096];
    tsr_strlcpy(buf, path, sizeof buf);
    char *save = NULL;
    for (char *dir = strtok_r(buf, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char full[4200];
        snprintf(full, sizeof full, "%s/%s", dir, name);
        if (access(full, X_OK) == 0) return true;
    }
    return false;
}

/* svg -> png with rsvg-convert, no shell in between, into a temporary file renamed on success
 * (a failed conversion leaves no partial PNG); *why says what went wrong. */
static bool to_png(const char *svg, const char *png, char *why, size_t why_size) {
    char tmp[TSR_PATH_MAX + 300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", png, (long)getpid());
    char *argv[] = {"rsvg-convert", "-b", "white", "-o", tmp, (char *)svg, NULL};
    pid_t pid;
    int err = posix_spawnp(&pid, "rsvg-convert", NULL, NULL, argv, environ);
    if (err != 0) {
        snprintf(why, why_size, "cannot run rsvg-convert: %s", strerror(err));
        return false;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        unlink(tmp);
        if (WIFEXITED(status)) snprintf(why, why_size, "rsvg-convert exited with status %d", WEXITSTATUS(status));
        else snprintf(why, why_size, "rsvg-convert was killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        return false;
    }
    if (rename(tmp, png) != 0) {
        snprintf(why, why_size, "cannot rename its output: %s", strerror(errno));
        unlink(tmp);
        return false;
    }
    return true;
}

static tsr_status write_text(const char *dir, const char *name, const char *content) {
    char path[TSR_PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return tsr_write_file_atomic(path, content, strlen(content));
}

/* The PNG of dir/<base>.svg, recorded in pngs[*n]. */
static void add_png(const char *dir, const char *base, png_result *pngs, size_t *n, bool quiet) {
    png_result *p = &pngs[(*n)++];
    char in[TSR_PATH_MAX + 256], out[TSR_PATH_MAX + 256];
    snprintf(p->name, sizeof p->name, "%s.png", base);
    snprintf(in, sizeof in, "%s/%s.svg", dir, base);
    snprintf(out, sizeof out, "%s/%s", dir, p->name);
    p->why[0] = '\0';
    if (!to_png(in, out, p->why, sizeof p->why) && !quiet)
        fprintf(stderr, "tessera report: error: %s not made: %s\n", p->name, p->why);
}

/* Every output is written atomically (temporary file, fsync, rename) from text built in memory:
 * a full disk or an unwritable path fails the command and leaves no partial file. A PNG that
 * rsvg-convert fails to make is listed in report.md as missing, printed as an error line, and
 * fails the call (TSR_ERR_IO) after everything else has been written. */
tsr_status report_write(const cJSON *root, const char *dir, bool quiet) {
    /* What is written must load back (report --merge of it): a tree that would not is refused
     * before anything is written, whoever made it. */
    char why[512];
    if (!report_validate(root, why, sizeof why))
        return tsr_fail(TSR_ERR_INVALID_ARG, "report_write: the report is not valid: %s", why);
    tsr_status st = tsr_make_dirs(dir);
    if (st != TSR_SUCCESS) return st;
    char *json = cJSON_Print(root);
    if (!json) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    st = write_text(dir, "report.json", json);
    free(json);
    if (st != TSR_SUCCESS) return st;
    bool png = have_program("rsvg-convert");
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    size_t npngs = 0, cap = (size_t)cJSON_GetArraySize(devices) + 1;
    png_result *pngs = calloc(cap, sizeof *pngs);
    if (!pngs) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    int i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, devices) {
        char slug[128], base[160];
        report_device_slug(d, i++, slug, sizeof slug);
        if (st != TSR_SUCCESS || !cJSON_GetObjectItemCaseSensitive(d, "peaks")) continue;
        char *svg = chart_roofline_svg(d);
        if (!svg) {
            st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        snprintf(base, sizeof base, "roofline-%s", slug);
        char name[170];
        snprintf(name, sizeof name, "%s.svg", base);
        st = write_text(dir, name, svg);
        free(svg);
        if (st == TSR_SUCCESS && png) add_png(dir, base, pngs, &npngs, quiet);
    }
    if (st == TSR_SUCCESS) {
        char *svg = chart_bars_svg(root);
        st = svg ? write_text(dir, "bars.svg", svg) : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        free(svg);
        if (st == TSR_SUCCESS && png) add_png(dir, "bars", pngs, &npngs, quiet);
    }
    char *md = NULL;
    if (st == TSR_SUCCESS) md = report_markdown(root, pngs, npngs, png, &st);
    if (st == TSR_SUCCESS) st = write_text(dir, "report.md", md);
    free(md);
    size_t missing = 0;
    const char *first = NULL;
    for (size_t p = 0; p < npngs; ++p)
        if (*pngs[p].why) first = first ? first : pngs[p].name, ++missing;
    if (st == TSR_SUCCESS && missing)
        st = tsr_fail(TSR_ERR_IO, "%zu PNG chart%s not made by rsvg-convert (first: %s/%s); see %s/report.md", missing,
                      missing == 1 ? "" : "s", dir, first, dir);
    free(pngs);
    if (st == TSR_SUCCESS && !quiet)
        printf("wrote %s/report.json, report.md and the charts (SVG%s)\n", dir, png ? " and PNG" : "; no rsvg-convert for PNG");
    return st;
}

