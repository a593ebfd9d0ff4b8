/* Small file helpers: whole-file reads, atomic writes, mkdir -p, string utilities. */
#define _GNU_SOURCE
#include "internal.h"

#include <cjson/cJSON.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void tsr_strlcpy(char *dst, const char *src, size_t size) {
    if (size == 0) return;
    size_t n = src ? strlen(src) : 0;
    if (n >= size) n = size - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

bool tsr_contains_nocase(const char *haystack, const char *needle) {
    size_t n = strlen(needle);
    if (n == 0) return true;
    for (const char *h = haystack; *h; ++h) {
        size_t i = 0;
        while (i < n && h[i] && tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i])) ++i;
        if (i == n) return true;
    }
    return false;
}

tsr_status tsr_read_json(const char *path, const char *what, cJSON **root) {
    *root = NULL;
    char *text = NULL;
    size_t size = 0;
    tsr_status st = tsr_read_file(path, &text, &size);
    if (st != TSR_SUCCESS) return st;
    const char *end = NULL;
    /* tsr_read_file NUL-terminates: include the NUL so trailing garbage is an error too. */
    *root = cJSON_ParseWithLengthOpts(text, size + 1, &end, true);
    long at = end ? (long)(end - text) : -1L;
    free(text);
    if (!*root)
        return tsr_fail(TSR_ERR_CORRUPT, "%s %s is unusable: not valid JSON (truncated or damaged near byte %ld)", what,
                        path, at);
    return TSR_SUCCESS;
}

tsr_status tsr_read_file(const char *path, char **data, size_t *size) {
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return tsr_fail(errno == ENOENT ? TSR_ERR_NOT_FOUND : TSR_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return tsr_fail(TSR_ERR_IO, "'%s' is not a regular file", path);
    }
    size_t cap = (size_t)st.st_size;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory reading '%s' (%zu bytes)", path, cap);
    }
    size_t got = fread(buf, 1, cap, f);
    bool failed = ferror(f) != 0;
    fclose(f);
    if (failed) {
        free(buf);
        return tsr_fail(TSR_ERR_IO, "error reading '%s'", path);
    }
    buf[got] = '\0';
    *data = buf;
    *size = got;
    return TSR_SUCCESS;
}

tsr_status tsr_make_dirs(const char *path) {
    char buf[TSR_PATH_MAX];
    if (strlen(path) >= sizeof buf) return tsr_fail(TSR_ERR_INVALID_ARG, "path too long: '%s'", path);
    tsr_strlcpy(buf, path, sizeof buf);
    for (char *p = buf + 1; ; ++p) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return tsr_fail(TSR_ERR_IO, "cannot create directory '%s': %s", buf, strerror(errno));
            *p = saved;
            if (saved == '\0') break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return tsr_fail(TSR_ERR_IO, "'%s' is not a directory", path);
    return TSR_SUCCESS;
}

tsr_status tsr_write_file_atomic(const char *path, const void *data, size_t size) {
    static atomic_uint counter;
    char tmp[TSR_PATH_MAX + 64];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
                     atomic_fetch_add(&counter, 1u));
    if (n < 0 || (size_t)n >= sizeof tmp) return tsr_fail(TSR_ERR_INVALID_ARG, "path too long: '%s'", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return tsr_fail(TSR_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
    const char *p = data;
    size_t left = size;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            unlink(tmp);
            return tsr_fail(TSR_ERR_IO, "cannot write '%s': %s", tmp, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    /* fsync before rename: a crash must leave the old file or the new one, never a torn one. */
    if (fsync(fd) != 0 || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return tsr_fail(TSR_ERR_IO, "cannot flush '%s': %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return tsr_fail(TSR_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(e));
    }
    return TSR_SUCCESS;
}
