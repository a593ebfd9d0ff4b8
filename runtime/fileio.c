/* Small file helpers: whole-file reads, atomic writes, mkdir -p, string utilities. */
#define _GNU_SOURCE
#include "internal.h"

#include <cjson/cJSON.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}

size_t tsr_text_char_length(const unsigned char *p) {
    unsigned c = *p;
    if (c < 0x20 || c == 0x7f) return 0;
    if (c < 0x80) return 1;
    int n = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
    if (n < 0) return 0;
    unsigned lo = 0x80, hi = 0xbf; /* the second byte's range excludes overlongs and surrogates */
    if (c == 0xe0) lo = 0xa0;
    else if (c == 0xed) hi = 0x9f;
    else if (c == 0xf0) lo = 0x90;
    else if (c == 0xf4) hi = 0x8f;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i <= n; ++i)
        if (p[i] < 0x80 || p[i] > 0xbf) return 0;
    return (size_t)n + 1;
}

void tsr_text_sanitize(char *s) {
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        size_t n = tsr_text_char_length(p);
        if (n) {
            p += n;
        } else {
            *p = *p < 0x20 || *p == 0x7f ? ' ' : '?';
            ++p;
        }
    }
}

tsr_status tsr_open_append(const char *path, FILE **out) {
    *out = NULL;
    /* O_NONBLOCK: a FIFO with no reader would block the open itself (or fail with ENXIO). */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0644);
    struct stat st = {0};
    if (fd < 0) {
        int e = errno;
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
            return tsr_fail(TSR_ERR_IO, "'%s' is not a regular file (it is %s); refusing to write to it", path,
                            file_kind(st.st_mode));
        return tsr_fail(TSR_ERR_IO, "cannot open '%s' for appending: %s", path, strerror(e));
    }
    int flags = -1;
    bool stat_ok = fstat(fd, &st) == 0;
    if (!stat_ok || !S_ISREG(st.st_mode) || (flags = fcntl(fd, F_GETFL)) < 0 ||
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        if (stat_ok && !S_ISREG(st.st_mode))
            return tsr_fail(TSR_ERR_IO, "'%s' is not a regular file (it is %s); refusing to write to it", path,
                            file_kind(st.st_mode));
        return tsr_fail(TSR_ERR_IO, "cannot open '%s' for appending: %s", path, strerror(e));
    }
    FILE *f = fdopen(fd, "a");
    if (!f) {
        int e = errno;
        close(fd);
        return tsr_fail(TSR_ERR_IO, "cannot open '%s' for appending: %s", path, strerror(e));
    }
    *out = f;
    return TSR_SUCCESS;
}

tsr_status tsr_read_file_stat(const char *path, char **data, size_t *size, struct stat *info) {
    *data = NULL;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever, before
     * any fstat could refuse it. Symbolic links are followed (users link their databases);
     * what they point at must be a regular file. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return tsr_fail(errno == ENOENT || errno == ENOTDIR ? TSR_ERR_NOT_FOUND : TSR_ERR_IO, "cannot open '%s': %s", path,
                        strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tsr_fail(TSR_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tsr_fail(TSR_ERR_IO, "'%s' is not a regular file (it is %s); refusing to read it", path,
                        file_kind(st.st_mode));
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return tsr_fail(TSR_ERR_IO, "cannot read '%s': %s", path, strerror(e));
    }
    size_t cap = (size_t)st.st_size;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory reading '%s' (%zu bytes)", path, cap);
    }
    /* Read what fstat reported; a file that grows meanwhile is read up to that size. */
    size_t got = 0;
    while (got < cap) {
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            free(buf);
            return tsr_fail(TSR_ERR_IO, "error reading '%s': %s", path, strerror(e));
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    *data = buf;
    *size = got;
    if (info) *info = st;
    return TSR_SUCCESS;
}

tsr_status tsr_read_file(const char *path, char **data, size_t *size) {
    return tsr_read_file_stat(path, data, size, NULL);
}

tsr_status tsr_make_dirs(const char *path) { return tsr_make_dirs_mode(path, 0755); }

tsr_status tsr_make_dirs_mode(const char *path, unsigned mode) {
    char buf[TSR_PATH_MAX];
    if (strlen(path) >= sizeof buf) return tsr_fail(TSR_ERR_INVALID_ARG, "path too long: '%s'", path);
    tsr_strlcpy(buf, path, sizeof buf);
    for (char *p = buf + 1; ; ++p) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST)
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

/* Is `name` what tsr_write_file_atomic names a temporary of `file` ("<file>.tmp.<pid>.<n>"), or
 * of any file when `file` is NULL? */
static bool is_temporary_name(const char *name, const char *file) {
    const char *t;
    if (file) {
        size_t n = strlen(file);
        if (strncmp(name, file, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0) return false;
        t = name + n;
    } else {
        t = strstr(name, ".tmp.");
        if (!t || t == name) return false;
        for (const char *next; (next = strstr(t + 1, ".tmp.")) != NULL;) t = next;
    }
    const char *p = t + 5;
    size_t pid_digits = strspn(p, "0123456789");
    if (pid_digits == 0 || p[pid_digits] != '.') return false;
    p += pid_digits + 1;
    size_t counter_digits = strspn(p, "0123456789");
    return counter_digits > 0 && p[counter_digits] == '\0';
}

size_t tsr_remove_stale_temporaries(const char *dir, const char *file, double min_age_seconds) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t removed = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_temporary_name(e->d_name, file)) continue;
        struct stat st;
        /* Only our own regular files (never follow a link): a writer killed mid-write left it. No age
         * test when none is asked: a file's fine-grained mtime can be a second ahead of time(NULL). */
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid() || (min_age_seconds > 0 && difftime(now, st.st_mtime) < min_age_seconds))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) ++removed;
    }
    closedir(d);
    return removed;
}
