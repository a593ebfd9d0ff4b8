/* Building programs from embedded sources, with an in-memory cache per device, a
 * persistent on-disk binary cache, and ahead-of-time binaries for devices that
 * have no online compiler. */
#define _GNU_SOURCE
#include "internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- entry file format ----
 * header (48 bytes, host byte order; `byte_order` detects a foreign one):
 *   magic "TSRBIN\0\0", u32 format version, u32 byte_order = 0x01020304,
 *   u64 key text length, u64 payload length, u64 XXH64 of key text + names + payload,
 *   u64 kernel names length
 * then the key text (what the binary was built from), then the kernel names the program had
 * when it was built from source (CL_PROGRAM_KERNEL_NAMES, ';'-separated), then the device
 * binary. A loaded binary whose kernels differ from the recorded names is rejected: an entry
 * that loads but lacks its kernels would otherwise fail every later process. */
#define ENTRY_MAGIC "TSRBIN\0\0"
#define ENTRY_FORMAT_VERSION 2u
#define ENTRY_BYTE_ORDER 0x01020304u

typedef struct entry_header {
    char magic[8];
    uint32_t format_version;
    uint32_t byte_order;
    uint64_t key_length;
    uint64_t payload_length;
    uint64_t checksum;
    uint64_t names_length;
} entry_header;

/* Temporaries older than this in the cache directory belong to a writer that died. */
#define TSR_STALE_TEMPORARY_SECONDS 600.0

struct tsr_program_entry {
    char *key_text;
    const char *embedded_text; /* the embedded source it was built from, NULL otherwise */
    char *options;
    cl_program program;
    /* Loaded from a binary (the disk cache or TSR_BINARY_DIR): the file, whether it is an
     * ahead-of-time one, and the program's kernel names (sorted, ';'-separated). NULL for a
     * program built from source. */
    char *origin, *kernels;
    bool from_aot;
    /* Dropped (a binary that lacked a kernel a caller needs): no lookup finds it, but callers may
     * still hold its program, so it is released with the device. */
    bool retired;
    /* Built from source while stores were on: written to the disk cache when the device closes
     * (tsr_cache_release), not when built (see store_in_cache). */
    bool store_pending;
    /* Kernel objects made from it (tsr_program_kernel), released with the entry. */
    tsr_kernel *cached_kernels;
    tsr_program_entry *next;
};

/* ---- sources ---- */

/* Kernel sources a layer above the runtime brings (the report's peak.cl): set once each, never
 * removed, so a pointer into the table stays valid after the lock is let go. */
#define MAX_ADDED_SOURCES 8
static tsr_embedded_source added_sources[MAX_ADDED_SOURCES];
static size_t nadded_sources;
static pthread_mutex_t added_sources_lock = PTHREAD_MUTEX_INITIALIZER;

tsr_status tsr_add_kernel_source(const char *name, const char *text, size_t length) {
    if (!name || !*name || !text) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_add_kernel_source: name and text must be set");
    for (const tsr_embedded_source *s = tsr_embedded_sources; s->name; ++s)
        if (strcmp(s->name, name) == 0)
            return tsr_fail(TSR_ERR_INVALID_ARG, "kernel source '%s' is one of libtessera's own", name);
    tsr_status st = TSR_SUCCESS;
    pthread_mutex_lock(&added_sources_lock);
    size_t i = 0;
    while (i < nadded_sources && strcmp(added_sources[i].name, name) != 0) ++i;
    if (i < nadded_sources) {
        if (added_sources[i].text != text || added_sources[i].length != length)
            st = tsr_fail(TSR_ERR_INVALID_ARG, "kernel source '%s' was added already, with other text", name);
    } else if (i == MAX_ADDED_SOURCES) {
        st = tsr_fail(TSR_ERR_INVALID_ARG, "kernel source '%s': at most %d sources may be added", name, MAX_ADDED_SOURCES);
    } else {
        added_sources[i] = (tsr_embedded_source){name, text, length};
        nadded_sources = i + 1;
    }
    pthread_mutex_unlock(&added_sources_lock);
    return st;
}

/* The embedded or added source called `name`; NULL when there is none. */
static const tsr_embedded_source *find_source(const char *name) {
    for (const tsr_embedded_source *s = tsr_embedded_sources; s->name; ++s)
        if (strcmp(s->name, name) == 0) return s;
    const tsr_embedded_source *found = NULL;
    pthread_mutex_lock(&added_sources_lock);
    for (size_t i = 0; i < nadded_sources && !found; ++i)
        if (strcmp(added_sources[i].name, name) == 0) found = &added_sources[i];
    pthread_mutex_unlock(&added_sources_lock);
    return found;
}

const char *const *tsr_kernel_source_names(void) {
    static const char *names[64];
    static bool filled;
    if (!filled) {
        size_t n = 0;
        for (const tsr_embedded_source *s = tsr_embedded_sources; s->name && n + 1 < 64; ++s) names[n++] = s->name;
        names[n] = NULL;
        filled = true;
    }
    return names;
}

/* $dir/name.cl with each line `#include "OTHER.cl"` replaced by $dir/OTHER.cl (one level),
 * as tools/embed_cl.py does for the embedded copies: the text a build sees is the whole
 * source, so cache keys and source hashes cover the included parts too. */
tsr_status tsr_read_kernel_file(const char *dir, const char *name, char **data, size_t *size) {
    char path[TSR_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.cl", dir, name);
    char *text = NULL;
    size_t length = 0;
    tsr_status st = tsr_read_file(path, &text, &length);
    if (st != TSR_SUCCESS) {
        char why[512];
        tsr_strlcpy(why, tsr_last_error(), sizeof why);
        return tsr_fail(st, "kernel source %s.cl from TSR_KERNEL_DIR=%s is unusable: %s", name, dir, why);
    }
    static const char directive[] = "#include \"";
    size_t from = 0;
    while (st == TSR_SUCCESS) {
        char *line = strstr(text + from, directive);
        while (line && line != text && line[-1] != '\n') line = strstr(line + 1, directive);
        if (!line) break;
        const char *file = line + sizeof directive - 1;
        const char *quote = strchr(file, '"');
        const char *eol = strchr(file, '\n');
        if (!eol) eol = text + length;
        if (!quote || quote > eol || quote - file < 4 || strncmp(quote - 3, ".cl", 3) != 0) {
            st = tsr_fail(TSR_ERR_INVALID_ARG, "%s/%s.cl: cannot read an #include line (expected #include \"NAME.cl\")",
                          dir, name);
            break;
        }
        char *inc = NULL;
        size_t inc_length = 0;
        snprintf(path, sizeof path, "%s/%.*s", dir, (int)(quote - file), file);
        st = tsr_read_file(path, &inc, &inc_length);
        if (st != TSR_SUCCESS) {
            char why[512];
            tsr_strlcpy(why, tsr_last_error(), sizeof why);
            st = tsr_fail(st, "%s/%s.cl includes \"%.*s\", which is unusable: %s", dir, name, (int)(quote - file), file,
                          why);
            break;
        }
        while (inc_length && inc[inc_length - 1] == '\n') --inc_length;
        size_t head = (size_t)(line - text), tail = length - (size_t)(eol - text);
        char *joined = malloc(head + inc_length + tail + 1);
        if (joined) {
            memcpy(joined, text, head);
            memcpy(joined + head, inc, inc_length);
            memcpy(joined + head + inc_length, eol, tail);
            joined[head + inc_length + tail] = '\0';
            free(text);
            text = joined;
            length = head + inc_length + tail;
            from = head + inc_length; /* included text is not scanned again: one level */
        } else {
            st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        }
        free(inc);
    }
    if (st != TSR_SUCCESS) {
        free(text);
        return st;
    }
    *data = text;
    *size = length;
    return TSR_SUCCESS;
}

/* Source text for `name`: $TSR_KERNEL_DIR/name.cl when set, else the embedded (or added) copy. A developer
 * who set TSR_KERNEL_DIR means to run those files: a missing directory, file or included file is
 * an error, never a silent fall back to the embedded source (the edited kernel would not be the
 * one measured). */
const char *tsr_env_kernel_dir(void) {
    const char *dir = getenv("TSR_KERNEL_DIR");
    return dir ? dir : "";
}

tsr_status tsr_load_kernel_source(const char *dir, const char *name, char **owned, const char **text, size_t *length) {
    *owned = NULL;
    if (dir && *dir) {
        struct stat st;
        if (stat(dir, &st) != 0)
            return tsr_fail(TSR_ERR_NOT_FOUND, "TSR_KERNEL_DIR=%s: %s (unset it to use the embedded kernel sources)", dir,
                            strerror(errno));
        if (!S_ISDIR(st.st_mode))
            return tsr_fail(TSR_ERR_NOT_FOUND, "TSR_KERNEL_DIR=%s is not a directory (unset it to use the embedded kernel "
                            "sources)", dir);
        size_t size = 0;
        tsr_status rc = tsr_read_kernel_file(dir, name, owned, &size);
        if (rc != TSR_SUCCESS) return rc;
        *text = *owned;
        *length = size;
        return TSR_SUCCESS;
    }
    const tsr_embedded_source *s = find_source(name);
    if (!s) return tsr_fail(TSR_ERR_NOT_FOUND, "no kernel source named '%s'", name);
    *text = s->text;
    *length = s->length;
    return TSR_SUCCESS;
}

/* ---- trust ----
 * A cache entry or ahead-of-time binary runs inside this process (native code on a CPU device),
 * and its checksum and key are computable by anyone, so what matters is who could have written
 * it: only the effective user or root may own the directory and each file, and neither may be
 * group- or world-writable. Anything else (a shared /tmp, a CI cache, NFS) is refused. */
/* snprintf for reasons: a long path may truncate one, which is fine for a message. */
static void reason(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reason(char *why, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
}

static bool stat_trusted(const struct stat *st, const char *what, const char *path, char *why, size_t size) {
    uid_t me = geteuid();
    if (st->st_uid != me && st->st_uid != 0) {
        reason(why, size, "%s '%s' is owned by uid %u, not by the effective user (uid %u) or root", what, path,
                 (unsigned)st->st_uid, (unsigned)me);
        return false;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        reason(why, size, "%s '%s' is group- or world-writable (mode %04o)", what, path, (unsigned)(st->st_mode & 07777));
        return false;
    }
    return true;
}

/* The directory itself (links followed) and, when `path` is a symbolic link, the link's owner:
 * a link in a sticky /tmp can be re-pointed only by whoever owns it. */
static bool dir_trusted(const char *path, const char *what, char *why, size_t size) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        reason(why, size, "%s '%s': %s", what, path, strerror(errno));
        return false;
    }
    if (S_ISLNK(st.st_mode) && st.st_uid != geteuid() && st.st_uid != 0) {
        reason(why, size, "%s '%s' is a symbolic link owned by uid %u", what, path, (unsigned)st.st_uid);
        return false;
    }
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        reason(why, size, "%s '%s' is not a directory", what, path);
        return false;
    }
    return stat_trusted(&st, what, path, why, size);
}

/* TSR_TRUST_BINARY_DIR=1: the user vouches for TSR_BINARY_DIR (e.g. a shared read-only install
 * written by someone else), and its directory and files are used whoever owns them. */
static bool binary_dir_trusted(const tsr_device *dev, char *why, size_t size) {
    return dev->trust_binary_dir || dir_trusted(dev->binary_dir, "TSR_BINARY_DIR", why, size);
}

/* ---- cache setup ---- */

static bool dir_is_writable(const char *dir, char *why, size_t why_size) {
    char probe[TSR_PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/.probe.XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0) {
        snprintf(why, why_size, "%s", strerror(errno));
        return false;
    }
    close(fd);
    unlink(probe);
    return true;
}

void tsr_cache_init(tsr_device *dev) {
    const char *env = getenv("TSR_CACHE_DIR");
    char dir[TSR_PATH_MAX] = "";
    dev->persistent = false;
    if (env) {
        if (*env == '\0' || strcmp(env, "off") == 0 || strcmp(env, "none") == 0) {
            snprintf(dev->cache_warning, sizeof dev->cache_warning, "disk cache disabled by TSR_CACHE_DIR='%s'", env);
        } else {
            tsr_strlcpy(dir, env, sizeof dir);
        }
    } else if (getenv("XDG_CACHE_HOME") && *getenv("XDG_CACHE_HOME")) {
        snprintf(dir, sizeof dir, "%s/tessera", getenv("XDG_CACHE_HOME"));
    } else if (getenv("HOME") && *getenv("HOME")) {
        snprintf(dir, sizeof dir, "%s/.cache/tessera", getenv("HOME"));
    } else {
        snprintf(dev->cache_warning, sizeof dev->cache_warning,
                 "no cache directory: set TSR_CACHE_DIR, XDG_CACHE_HOME or HOME; using an in-memory cache");
    }
    if (dir[0]) {
        char why[512] = "";
        /* Directories tessera creates are private (0700): nobody else may plant entries. */
        if (tsr_make_dirs_mode(dir, 0700) != TSR_SUCCESS) {
            tsr_strlcpy(why, tsr_last_error(), sizeof why);
            snprintf(dev->cache_warning, sizeof dev->cache_warning,
                     "cache directory '%s' is not writable (%s); using an in-memory cache", dir, why);
        } else if (!dir_trusted(dir, "cache directory", why, sizeof why)) {
            snprintf(dev->cache_warning, sizeof dev->cache_warning,
                     "refusing an unsafe binary cache: %s (others could plant kernels that run in this process; "
                     "`chmod go-w` it or set TSR_CACHE_DIR to a private directory); using an in-memory cache", why);
        } else if (!dir_is_writable(dir, why, sizeof why)) {
            snprintf(dev->cache_warning, sizeof dev->cache_warning,
                     "cache directory '%s' is not writable (%s); using an in-memory cache", dir, why);
        } else {
            dev->persistent = true;
            tsr_strlcpy(dev->cache_dir, dir, sizeof dev->cache_dir);
        }
        tsr_clear_error(); /* a degraded cache is a warning, not an error */
    }
    if (dev->cache_warning[0] && !strstr(dev->cache_warning, "disabled by")) tsr_warn("%s", dev->cache_warning);

    const char *force = getenv("TSR_FORCE_OFFLINE");
    dev->offline = !dev->info.compiler_available || (force && *force && strcmp(force, "0") != 0);
    const char *bdir = getenv("TSR_BINARY_DIR");
    tsr_strlcpy(dev->binary_dir, bdir ? bdir : "", sizeof dev->binary_dir);
    const char *trust = getenv("TSR_TRUST_BINARY_DIR");
    dev->trust_binary_dir = trust && *trust && strcmp(trust, "0") != 0;
    /* Kernel sources: a developer's directory, read here once (launches use dev->kernel_dir). */
    tsr_strlcpy(dev->kernel_dir, tsr_env_kernel_dir(), sizeof dev->kernel_dir);
    char why[512];
    if (dev->offline && dev->binary_dir[0] && !binary_dir_trusted(dev, why, sizeof why))
        tsr_warn("refusing ahead-of-time binaries: %s (set TSR_TRUST_BINARY_DIR=1 to use it anyway)", why);
}

static void launches_clear(tsr_device *dev);

static void store_in_cache(tsr_device *dev, const char *key_text, cl_program program);

void tsr_cache_release(tsr_device *dev) {
    launches_clear(dev);
    /* The programs this device built from source go to the disk cache now, after the last
     * launch: fetching a binary from PoCL compiles every kernel of the program once more (a
     * work-group function for any size, which its launches never run), which at build time
     * doubled a first call's compile (256^3 SGEMM, cold caches: 5.4 s CPU against 2.6 s with
     * the cache off, Zen 5 EPYC). */
    for (tsr_program_entry *e = dev->programs; e; e = e->next)
        if (e->store_pending && !e->retired && dev->persistent) store_in_cache(dev, e->key_text, e->program);
    tsr_program_entry *e = dev->programs;
    while (e) {
        tsr_program_entry *next = e->next;
        for (tsr_kernel *k = e->cached_kernels, *knext; k; k = knext) {
            knext = k->next;
            clReleaseKernel(k->kernel);
            pthread_mutex_destroy(&k->lock);
            free(k);
        }
        clReleaseProgram(e->program);
        free(e->key_text);
        free(e->options);
        free(e->origin);
        free(e->kernels);
        free(e);
        e = next;
    }
    dev->programs = NULL;
}

tsr_status tsr_cache_get_info(const tsr_device *dev, tsr_cache_info *info) {
    tsr_clear_diagnostics();
    if (!dev || !info) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_cache_get_info: device and info must not be NULL");
    memset(info, 0, sizeof *info);
    tsr_device *d = (tsr_device *)dev; /* the lock is internal state */
    pthread_mutex_lock(&d->program_lock);
    info->persistent = dev->persistent;
    tsr_strlcpy(info->dir, dev->persistent ? dev->cache_dir : "", sizeof info->dir);
    tsr_strlcpy(info->warning, dev->cache_warning, sizeof info->warning);
    info->offline = dev->offline;
    tsr_strlcpy(info->binary_dir, dev->binary_dir, sizeof info->binary_dir);
    info->memory_hits = dev->memory_hits;
    info->disk_hits = dev->disk_hits;
    info->builds = dev->builds;
    info->binary_loads = dev->binary_loads;
    info->disk_rejects = dev->disk_rejects;
    pthread_mutex_unlock(&d->program_lock);
    return TSR_SUCCESS;
}

/* ---- keys ---- */

/* What a binary depends on: the source, the options, the platform, device and driver. */
static char *make_key_text(const tsr_device *dev, const char *label, const char *text, size_t length,
                           const char *options) {
    XXH128_hash_t src = XXH3_128bits(text, length);
    const tsr_device_info *i = &dev->info;
    size_t cap = strlen(label) + strlen(options) + 6 * TSR_INFO_STR + 256;
    char *key = malloc(cap);
    if (!key) return NULL;
    snprintf(key, cap,
             "source=%s %016llx%016llx\noptions=%s\nplatform=%s %s\ndevice=%s %s\ndriver=%s\n", label,
             (unsigned long long)src.high64, (unsigned long long)src.low64, options, i->platform_name,
             i->platform_version, i->name, i->device_version, i->driver_version);
    return key;
}

static void entry_file_name(const char *key_text, char *out, size_t size) {
    XXH128_hash_t h = XXH3_128bits(key_text, strlen(key_text));
    snprintf(out, size, "%016llx%016llx.bin", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

static uint64_t entry_checksum(const char *key_text, size_t key_length, const char *names, size_t names_length,
                               const void *payload, size_t payload_length) {
    XXH64_state_t *st = XXH64_createState();
    if (!st) return 0;
    XXH64_reset(st, ENTRY_FORMAT_VERSION);
    XXH64_update(st, key_text, key_length);
    XXH64_update(st, names, names_length);
    XXH64_update(st, payload, payload_length);
    uint64_t h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
}

/* Read and verify an entry; on success *payload (malloc'ed) holds the binary and *names
 * (malloc'ed) the kernel names recorded with it. TSR_ERR_NOT_FOUND when there is no file,
 * TSR_ERR_CORRUPT with the reason in the message otherwise (a special file, one another user
 * could have written unless `check_owner` is false, or damage). */
static tsr_status read_entry(const char *path, const char *key_text, bool check_owner, unsigned char **payload,
                             size_t *payload_length, char **names) {
    *payload = NULL;
    *names = NULL;
    char *data = NULL;
    size_t size = 0;
    struct stat info;
    tsr_status st = tsr_read_file_stat(path, &data, &size, &info);
    if (st == TSR_ERR_NOT_FOUND) return st;
    if (st != TSR_SUCCESS) {
        char why[512];
        tsr_strlcpy(why, tsr_last_error(), sizeof why);
        /* A regular file we could not read just now (out of memory or descriptors, EACCES) is
         * not proven bad: kept, and this process builds from source. */
        struct stat link;
        if (st == TSR_ERR_OUT_OF_MEMORY || (lstat(path, &link) == 0 && S_ISREG(link.st_mode)))
            return tsr_fail(TSR_ERR_IO, "%s: not readable now (kept): %s", path, why);
        return tsr_fail(TSR_ERR_CORRUPT, "%s: unreadable: %s", path, why);
    }
    char untrusted[TSR_PATH_MAX + 128];
    if (check_owner && !stat_trusted(&info, "entry", path, untrusted, sizeof untrusted)) {
        free(data);
        return tsr_fail(TSR_ERR_CORRUPT, "%s: untrusted: %s", path, untrusted);
    }
    entry_header h;
    const char *reason = NULL;
    size_t key_length = strlen(key_text);
    if (size < sizeof h) {
        reason = "truncated header";
    } else {
        memcpy(&h, data, sizeof h);
        if (memcmp(h.magic, ENTRY_MAGIC, 8) != 0) reason = "not a tessera binary (bad magic)";
        else if (h.byte_order != ENTRY_BYTE_ORDER) reason = "written on a machine of another byte order";
        else if (h.format_version != ENTRY_FORMAT_VERSION) reason = "unsupported format version";
        else if (h.key_length > size || h.payload_length > size || h.names_length > size ||
                 sizeof h + h.key_length + h.names_length + h.payload_length != size)
            reason = "truncated or padded (lengths do not match the file size)";
        else if (h.payload_length == 0) reason = "empty binary";
        else if (entry_checksum(data + sizeof h, h.key_length, data + sizeof h + h.key_length, h.names_length,
                                data + sizeof h + h.key_length + h.names_length, h.payload_length) != h.checksum)
            reason = "checksum mismatch";
        else if (h.key_length != key_length || memcmp(data + sizeof h, key_text, key_length) != 0)
            reason = "built from another source, options or device (key mismatch)";
    }
    if (reason) {
        free(data);
        return tsr_fail(TSR_ERR_CORRUPT, "%s: %s", path, reason);
    }
    unsigned char *bin = malloc(h.payload_length);
    char *recorded = malloc(h.names_length + 1);
    if (!bin || !recorded) {
        free(bin);
        free(recorded);
        free(data);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
    }
    memcpy(recorded, data + sizeof h + h.key_length, h.names_length);
    recorded[h.names_length] = '\0';
    memcpy(bin, data + sizeof h + h.key_length + h.names_length, h.payload_length);
    free(data);
    *payload = bin;
    *payload_length = h.payload_length;
    *names = recorded;
    return TSR_SUCCESS;
}

static tsr_status write_entry(const char *path, const char *key_text, const char *names, const unsigned char *payload,
                              size_t length) {
    size_t key_length = strlen(key_text), names_length = strlen(names);
    size_t total = sizeof(entry_header) + key_length + names_length + length;
    unsigned char *buf = malloc(total);
    if (!buf) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory writing %s", path);
    entry_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, ENTRY_MAGIC, 8);
    h.format_version = ENTRY_FORMAT_VERSION;
    h.byte_order = ENTRY_BYTE_ORDER;
    h.key_length = key_length;
    h.payload_length = length;
    h.names_length = names_length;
    h.checksum = entry_checksum(key_text, key_length, names, names_length, payload, length);
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, key_text, key_length);
    memcpy(buf + sizeof h + key_length, names, names_length);
    memcpy(buf + sizeof h + key_length + names_length, payload, length);
    tsr_status st = tsr_write_file_atomic(path, buf, total);
    free(buf);
    return st;
}

/* ---- building ---- */

static tsr_status program_binary(cl_program program, unsigned char **binary, size_t *length) {
    tsr_status status = TSR_SUCCESS;
    size_t size = 0;
    *binary = NULL;
    TSR_CL_CHECK(status, clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL), done);
    if (size == 0) return tsr_fail(TSR_ERR_UNSUPPORTED, "the driver returned an empty program binary");
    *binary = malloc(size);
    if (!*binary) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    TSR_CL_CHECK(status, clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof *binary, binary, NULL), done);
    *length = size;
    return TSR_SUCCESS;
done:
    free(*binary);
    *binary = NULL;
    return status;
}

static int compare_strings(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The program's kernel names, sorted and ';'-separated (a driver need not keep one order). */
static tsr_status program_kernel_names(cl_program program, char **out) {
    tsr_status status = TSR_SUCCESS;
    size_t size = 0;
    char *raw = NULL, *sorted = NULL;
    char **names = NULL;
    *out = NULL;
    TSR_CL_CHECK(status, clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &size), done);
    raw = calloc(size + 1, 1);
    sorted = calloc(size + 1, 1);
    names = calloc(size / 2 + 2, sizeof *names);
    if (!raw || !sorted || !names) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    TSR_CL_CHECK(status, clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, size, raw, NULL), done);
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(raw, ";", &save); t; t = strtok_r(NULL, ";", &save)) names[n++] = t;
    qsort(names, n, sizeof *names, compare_strings);
    for (size_t i = 0; i < n; ++i) {
        if (i) strcat(sorted, ";");
        strcat(sorted, names[i]);
    }
    *out = sorted;
    sorted = NULL;
done:
    free(raw);
    free(sorted);
    free(names);
    return status;
}

/* A binary that loaded must have the kernels its source had when the entry was written (creating
 * every kernel as a check is left out: on PoCL it does per-kernel work on each disk hit). */
static tsr_status check_kernels(cl_program program, const char *recorded) {
    char *names = NULL;
    tsr_status status = program_kernel_names(program, &names);
    if (status != TSR_SUCCESS) return status;
    if (strcmp(names, recorded) != 0)
        status = tsr_fail(TSR_ERR_CORRUPT, "its kernels [%s] are not the ones it was built with [%s]", names, recorded);
    free(names);
    return status;
}

static void append_build_log(tsr_device *dev, cl_program program) {
    size_t size = 0;
    if (clGetProgramBuildInfo(program, dev->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) != CL_SUCCESS || size == 0) return;
    char *log = malloc(size + 1);
    if (!log) return;
    if (clGetProgramBuildInfo(program, dev->id, CL_PROGRAM_BUILD_LOG, size, log, NULL) == CL_SUCCESS) {
        log[size] = '\0';
        tsr_error_append("\nbuild log:\n%s", log);
    }
    free(log);
}

/* Options handed to the compiler: the caller's defines plus the language version, and -w:
 * some drivers (PoCL) print their compiler's warnings straight to the process's stderr
 * (e.g. "AVX vector argument ... changes the ABI" for float16 helpers), which a library must
 * not do; errors still come back in the build log. On Oclgrind, -DTSR_OCLGRIND=1: kernels
 * avoid the vector builtins its version 21.10 crashes on. */
static void compiler_options(const tsr_device *dev, const char *options, char *out, size_t size) {
    /* Hold kernels to OpenCL C 1.2 where the device supports it, so they run everywhere. */
    bool has12 = strstr(dev->info.opencl_c_version, "OpenCL C 1.2") || strstr(dev->info.opencl_c_version, "OpenCL C 2") ||
                 strstr(dev->info.opencl_c_version, "OpenCL C 3");
    bool oclgrind = tsr_contains_nocase(dev->info.platform_name, "oclgrind");
    snprintf(out, size, "-w %s%s%s", has12 ? "-cl-std=CL1.2 " : "", oclgrind ? "-DTSR_OCLGRIND=1 " : "", options);
}

static tsr_status build_from_binary(tsr_device *dev, const unsigned char *bin, size_t length, const char *options,
                                    cl_program *out) {
    tsr_status status = TSR_SUCCESS;
    cl_int err = CL_SUCCESS, bin_status = CL_SUCCESS;
    char opts[2048];
    compiler_options(dev, options, opts, sizeof opts);
    cl_program p = clCreateProgramWithBinary(dev->context, 1, &dev->id, &length, &bin, &bin_status, &err);
    TSR_CL_CHECK(status, err, fail);
    TSR_CL_CHECK(status, bin_status, fail);
    TSR_CL_CHECK(status, clBuildProgram(p, 1, &dev->id, opts, NULL, NULL), fail);
    *out = p;
    return TSR_SUCCESS;
fail:
    if (p) clReleaseProgram(p);
    return status;
}

static tsr_status build_from_source(tsr_device *dev, const char *label, const char *text, size_t length,
                                    const char *options, cl_program *out) {
    tsr_status status = TSR_SUCCESS;
    cl_int err = CL_SUCCESS;
    char opts[2048];
    compiler_options(dev, options, opts, sizeof opts);
    cl_program p = clCreateProgramWithSource(dev->context, 1, &text, &length, &err);
    TSR_CL_CHECK(status, err, fail);
    err = clBuildProgram(p, 1, &dev->id, opts, NULL, NULL);
    if (err != CL_SUCCESS) {
        status = tsr_fail(TSR_ERR_BUILD,
                          "building kernel source '%s' with options '%s' for device '%s' of platform '%s' (driver %s) "
                          "failed: %s (%d)",
                          label, options, dev->info.name, dev->info.platform_name, dev->info.driver_version,
                          tsr_cl_error_name(err), (int)err);
        append_build_log(dev, p);
        goto fail;
    }
    *out = p;
    return TSR_SUCCESS;
fail:
    if (p) clReleaseProgram(p);
    return status;
}

/* Does every ';'-separated name appear in the source text as a whole identifier? Each kernel of a
 * program built from it does (its name is there, or in the invocation of a macro that makes it),
 * so a binary with another kernel is another program's: an entry forged, or gone stale, around
 * the right key. *bad receives the first name that does not. */
static bool names_in_source(const char *names, const char *text, size_t length, char *bad, size_t bad_size) {
    for (const char *p = names; *p;) {
        const char *end = strchr(p, ';');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        bool found = n == 0;
        for (const char *at = text, *stop = text + length; !found && at < stop;) {
            const char *hit = memmem(at, (size_t)(stop - at), p, n);
            if (!hit) break;
            bool before = hit > text && (isalnum((unsigned char)hit[-1]) || hit[-1] == '_');
            bool after = hit + n < stop && (isalnum((unsigned char)hit[n]) || hit[n] == '_');
            found = !before && !after;
            at = hit + 1;
        }
        if (!found) {
            snprintf(bad, bad_size, "%.*s", (int)n, p);
            return false;
        }
        if (!end) break;
        p = end + 1;
    }
    return true;
}

/* Look for a usable binary in `dir` (the disk cache or the ahead-of-time directory); entries
 * must be the effective user's unless `check_owner` is false. With `remove_rejected` (the cache,
 * never a user's ahead-of-time directory) a rejected entry is deleted, so it cannot fail again.
 * `label`, `text`, `text_length`: the source the key names (a binary's kernels must be in it).
 * On success *path receives the file (TSR_PATH_MAX + 64 bytes) and *kernels its kernel names. */
static tsr_status load_from_dir(tsr_device *dev, const char *dir, const char *key_text, const char *options,
                                const char *label, const char *text, size_t text_length, bool check_owner,
                                bool remove_rejected, cl_program *out, char *path, char **kernels) {
    char name[64];
    entry_file_name(key_text, name, sizeof name);
    snprintf(path, TSR_PATH_MAX + 64, "%s/%s", dir, name);
    *kernels = NULL;
    unsigned char *bin = NULL;
    size_t length = 0;
    char *names = NULL;
    cl_program p = NULL;
    tsr_status st = read_entry(path, key_text, check_owner, &bin, &length, &names);
    if (st == TSR_SUCCESS) {
        st = build_from_binary(dev, bin, length, options, &p);
        if (st == TSR_ERR_OUT_OF_MEMORY) { /* the driver ran out, the entry may be fine: keep it */
            char why[512];
            tsr_strlcpy(why, tsr_last_error(), sizeof why);
            st = tsr_fail(TSR_ERR_IO, "%s: not loaded now (kept): %s", path, why);
        } else if (st != TSR_SUCCESS) {
            char why[512];
            tsr_strlcpy(why, tsr_last_error(), sizeof why);
            st = tsr_fail(TSR_ERR_CORRUPT, "%s: the driver rejected the binary: %s", path, why);
        } else if (check_kernels(p, names) != TSR_SUCCESS) { /* st becomes the refusal below */
            char why[512];
            tsr_strlcpy(why, tsr_last_error(), sizeof why);
            st = tsr_fail(TSR_ERR_CORRUPT, "%s: the binary loads but %s", path, why);
            clReleaseProgram(p);
            p = NULL;
        } else {
            char bad[128];
            if (!names_in_source(names, text, text_length, bad, sizeof bad)) {
                st = tsr_fail(TSR_ERR_CORRUPT, "%s: the binary's kernels [%s] are another program's (kernel '%s' is "
                              "not in source '%s'): forged or stale", path, names, bad, label);
                clReleaseProgram(p);
                p = NULL;
            }
        }
    }
    free(bin);
    if (st == TSR_ERR_CORRUPT && remove_rejected) unlink(path);
    if (st == TSR_SUCCESS) *out = p, *kernels = names; /* check_kernels: the program's own names */
    else free(names);
    return st;
}

static void store_in_cache(tsr_device *dev, const char *key_text, cl_program program) {
    char name[64], path[TSR_PATH_MAX + 64];
    unsigned char *bin = NULL;
    size_t length = 0;
    entry_file_name(key_text, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dev->cache_dir, name);
    char *names = NULL;
    /* Writers killed mid-write (kill -9, power loss) leave temporaries: clear old ones of ours. */
    tsr_remove_stale_temporaries(dev->cache_dir, NULL, TSR_STALE_TEMPORARY_SECONDS);
    tsr_status st = program_binary(program, &bin, &length);
    if (st == TSR_SUCCESS) st = program_kernel_names(program, &names);
    if (st == TSR_SUCCESS) st = write_entry(path, key_text, names, bin, length);
    if (st != TSR_SUCCESS) tsr_warn("could not store %s in the binary cache: %s", path, tsr_last_error());
    free(names);
    free(bin);
    /* a cache write failure is a warning only (and a store at close keeps a caller's last error) */
    if (st != TSR_SUCCESS) tsr_clear_error();
}

/* Takes key_text and kernels (NULL for a build from source); origin is copied. */
static tsr_status insert_entry(tsr_device *dev, char *key_text, const char *embedded_text, const char *options,
                               cl_program program, const char *origin, char *kernels, bool from_aot) {
    tsr_program_entry *e = calloc(1, sizeof *e);
    char *opts = strdup(options), *from = origin ? strdup(origin) : NULL;
    if (!e || !opts || (origin && !from)) {
        clReleaseProgram(program);
        free(key_text);
        free(e);
        free(opts);
        free(from);
        free(kernels);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    }
    e->key_text = key_text;
    e->embedded_text = embedded_text;
    e->options = opts;
    e->program = program;
    e->origin = from;
    e->kernels = kernels;
    e->from_aot = from_aot;
    e->next = dev->programs;
    dev->programs = e;
    return TSR_SUCCESS;
}

static tsr_status lookup_or_build(tsr_device *dev, const char *label, const char *text, size_t length,
                                  const char *options, bool embedded, bool skip_cache, cl_program *program);

tsr_status tsr_program_from_text(tsr_device *dev, const char *label, const char *text, size_t length,
                                 const char *options, cl_program *program) {
    return lookup_or_build(dev, label, text, length, options, false, false, program);
}

/* The live entry for key_text, or NULL; call with dev->program_lock held. */
static tsr_program_entry *find_entry(tsr_device *dev, const char *key_text) {
    for (tsr_program_entry *e = dev->programs; e; e = e->next)
        if (!e->retired && strcmp(e->key_text, key_text) == 0) return e;
    return NULL;
}

/* skip_cache: not from the disk cache (its entry for this key was just dropped).
 * The program cache has its own lock (dev->program_lock), held only to look up and insert
 * entries, never while a binary is read or a program compiles, and the device lock is not taken
 * at all: other threads' launches on the device never wait for a compile. Two threads that miss
 * the same key at once both build it; the first to insert wins, the second releases its copy and
 * returns the kept one (so every caller gets the one program the cache holds). */
static tsr_status lookup_or_build(tsr_device *dev, const char *label, const char *text, size_t length,
                                  const char *options, bool embedded, bool skip_cache, cl_program *program) {
    if (!dev || !label || !text || !program)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_program_from_text: NULL argument");
    if (!options) options = "";
    *program = NULL;
    char *key_text = make_key_text(dev, label, text, length, options);
    if (!key_text) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");

    tsr_status status = TSR_SUCCESS;
    cl_program p = NULL;
    char origin[TSR_PATH_MAX + 64];
    char *kernels = NULL;
    bool from_aot = false;
    pthread_mutex_lock(&dev->program_lock);
    tsr_program_entry *hit = find_entry(dev, key_text);
    if (hit) {
        dev->memory_hits++;
        *program = hit->program;
    }
    const bool store = dev->persistent && dev->cache_store_paused == 0;
    pthread_mutex_unlock(&dev->program_lock);
    if (hit) goto done;
    /* what this call did, counted under the lock when its result is inserted */
    uint64_t disk_hit = 0, disk_reject = 0, binary_load = 0, build = 0;
    bool pending = false;
    if (dev->persistent && !skip_cache) {
        status = load_from_dir(dev, dev->cache_dir, key_text, options, label, text, length, true, true, &p, origin,
                               &kernels);
        if (status == TSR_SUCCESS) {
            disk_hit = 1;
        } else if (status == TSR_ERR_CORRUPT) {
            disk_reject = 1;
            tsr_warn("rejected binary cache entry, rebuilding: %s", tsr_last_error());
        } else if (status != TSR_ERR_NOT_FOUND) {
            tsr_warn("binary cache entry not used, building from source: %s", tsr_last_error());
        }
    }
    if (!p && dev->offline) {
        if (!dev->binary_dir[0]) {
            status = tsr_fail(TSR_ERR_NO_BINARY,
                              "device '%s' has no online compiler (or TSR_FORCE_OFFLINE is set) and TSR_BINARY_DIR is "
                              "not set; write binaries with `tessera build-binaries --device SEL --out DIR` and point "
                              "TSR_BINARY_DIR at DIR (kernel source '%s', options '%s')",
                              dev->info.name, label, options);
            goto count;
        }
        char why[TSR_PATH_MAX + 128];
        if (!binary_dir_trusted(dev, why, sizeof why))
            status = tsr_fail(TSR_ERR_CORRUPT, "refusing it: %s; set TSR_TRUST_BINARY_DIR=1 to use it anyway", why);
        else
            status = load_from_dir(dev, dev->binary_dir, key_text, options, label, text, length, !dev->trust_binary_dir,
                                   false, &p, origin, &kernels);
        if (status != TSR_SUCCESS) {
            char why[1024];
            tsr_strlcpy(why, tsr_last_error(), sizeof why);
            status = tsr_fail(TSR_ERR_NO_BINARY,
                              "device '%s' has no online compiler and no usable ahead-of-time binary for kernel source "
                              "'%s' with options '%s' is in TSR_BINARY_DIR=%s (%s); write one with `tessera "
                              "build-binaries`",
                              dev->info.name, label, options, dev->binary_dir, why);
            goto count;
        }
        binary_load = 1;
        from_aot = true;
    }
    if (!p) {
        TSR_CHECK(status, build_from_source(dev, label, text, length, options, &p), count);
        build = 1;
        /* Stored when the device closes (tsr_cache_release): on PoCL, fetching a binary compiles
         * every kernel of the program again (for any work-group size), which a first call would
         * otherwise wait for; a tuning candidate (stores paused) is never stored. */
        pending = store;
    }
count:
    pthread_mutex_lock(&dev->program_lock);
    dev->disk_hits += disk_hit, dev->disk_rejects += disk_reject, dev->binary_loads += binary_load,
        dev->builds += build;
    if (p && (hit = find_entry(dev, key_text)) != NULL) {
        /* another thread built the same program meanwhile: keep its entry, drop this copy */
        clReleaseProgram(p);
        free(kernels);
        *program = hit->program;
    } else if (p) {
        status =
            insert_entry(dev, key_text, embedded ? text : NULL, options, p, kernels ? origin : NULL, kernels, from_aot);
        key_text = NULL;
        if (status == TSR_SUCCESS) {
            *program = p;
            dev->programs->store_pending = pending;
        }
    }
    pthread_mutex_unlock(&dev->program_lock);
done:
    free(key_text);
    return status;
}

tsr_status tsr_program_get(tsr_device *dev, const char *source_name, const char *options, cl_program *program) {
    char *owned = NULL;
    const char *text = NULL;
    size_t length = 0;
    tsr_status st = tsr_load_kernel_source(dev->kernel_dir, source_name, &owned, &text, &length);
    if (st != TSR_SUCCESS) return st;
    if (!owned) {
        /* Embedded sources never change within a process: a launch that finds its program by
         * source and options skips hashing the source and building the key (the hot path). */
        pthread_mutex_lock(&dev->program_lock);
        for (tsr_program_entry *e = dev->programs; e; e = e->next) {
            if (!e->retired && e->embedded_text == text && strcmp(e->options, options) == 0) {
                dev->memory_hits++;
                *program = e->program;
                pthread_mutex_unlock(&dev->program_lock);
                return TSR_SUCCESS;
            }
        }
        pthread_mutex_unlock(&dev->program_lock);
    }
    st = lookup_or_build(dev, source_name, text, length, options, owned == NULL, false, program);
    free(owned);
    return st;
}

/* Is `name` one of the ';'-separated `names`? */
static bool has_kernel(const char *names, const char *name, size_t length) {
    for (const char *p = names; *p;) {
        const char *end = strchr(p, ';');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == length && memcmp(p, name, length) == 0) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

/* The program `program` was loaded from a binary that cannot give kernel `kernel` (missing from
 * its names, or clCreateKernel failed with `err`): a forged or stale entry (the right key and
 * checksum around another program's binary). Drop it from memory and, for the cache, from disk,
 * and rebuild (*rebuild); an ahead-of-time binary is an error naming the file. Under no lock. */
static tsr_status drop_binary(tsr_device *dev, cl_program program, const char *source_name, const char *options,
                              const char *kernel, size_t kernel_length, cl_int err, bool *rebuild) {
    *rebuild = false;
    pthread_mutex_lock(&dev->program_lock);
    tsr_program_entry *e = dev->programs;
    while (e && (e->retired || e->program != program)) e = e->next;
    if (!e || !e->origin) { /* built from source, or already dropped by another thread: nothing to heal */
        pthread_mutex_unlock(&dev->program_lock);
        *rebuild = e == NULL;
        return TSR_SUCCESS;
    }
    e->retired = true;
    launches_clear(dev); /* records may name the dropped program: resolve again */
    dev->launch_generation++;
    char why[160];
    if (err == CL_SUCCESS) snprintf(why, sizeof why, "lacks kernel '%.*s'", (int)kernel_length, kernel);
    else snprintf(why, sizeof why, "cannot give kernel '%.*s' (clCreateKernel: %s)", (int)kernel_length, kernel,
                  tsr_cl_error_name(err));
    tsr_status st = TSR_SUCCESS;
    if (e->from_aot) {
        st = tsr_fail(TSR_ERR_NO_BINARY,
                      "the ahead-of-time binary %s (kernel source '%s', options '%s') %s: its kernels are [%s], forged "
                      "or stale; write it again with `tessera build-binaries`",
                      e->origin, source_name, options, why, e->kernels);
    } else {
        unlink(e->origin); /* the cache's own file: it would fail every later process too */
        dev->disk_rejects++;
        tsr_warn("rejected binary cache entry %s, rebuilding from source: it %s (its kernels are [%s]): forged or stale",
                 e->origin, why, e->kernels);
        *rebuild = true;
    }
    pthread_mutex_unlock(&dev->program_lock);
    return st;
}

/* The program again, from source (or, without a compiler, from TSR_BINARY_DIR), past the cache. */
static tsr_status rebuild_program(tsr_device *dev, const char *source_name, const char *options, cl_program *program) {
    char *owned = NULL;
    const char *text = NULL;
    size_t length = 0;
    tsr_status st = tsr_load_kernel_source(dev->kernel_dir, source_name, &owned, &text, &length);
    if (st != TSR_SUCCESS) return st;
    st = lookup_or_build(dev, source_name, text, length, options, owned == NULL, true, program);
    free(owned);
    return st;
}

tsr_status tsr_program_for(tsr_device *dev, const char *source_name, const char *options, const char *kernels,
                           cl_program *program) {
    tsr_status st = tsr_program_get(dev, source_name, options, program);
    /* at most: the cache's binary dropped, then an ahead-of-time one loaded and checked */
    for (int attempt = 0; st == TSR_SUCCESS && attempt < 3; ++attempt) {
        pthread_mutex_lock(&dev->program_lock);
        const tsr_program_entry *e = dev->programs;
        while (e && (e->retired || e->program != *program)) e = e->next;
        const char *missing = NULL;
        size_t missing_length = 0;
        for (const char *p = kernels; e && e->kernels && p && *p && !missing;) {
            const char *end = strchr(p, ';');
            size_t n = end ? (size_t)(end - p) : strlen(p);
            if (n && !has_kernel(e->kernels, p, n)) missing = p, missing_length = n;
            p = end ? end + 1 : p + n;
        }
        pthread_mutex_unlock(&dev->program_lock);
        if (!missing) return TSR_SUCCESS;
        bool rebuild = false;
        st = drop_binary(dev, *program, source_name, options, missing, missing_length, CL_SUCCESS, &rebuild);
        if (st == TSR_SUCCESS && rebuild) st = rebuild_program(dev, source_name, options, program);
    }
    return st;
}

tsr_status tsr_get_kernel(tsr_device *dev, const char *source_name, const char *options, const char *kernel_name,
                          cl_kernel *kernel) {
    tsr_clear_diagnostics();
    if (!dev || !source_name || !kernel_name || !kernel)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_get_kernel: device, source_name, kernel_name and kernel must not be NULL");
    *kernel = NULL;
    if (!options) options = "";
    /* A name the source does not hold is the caller's mistake, not a reason to doubt a cached binary. */
    char *owned = NULL;
    const char *text = NULL;
    size_t length = 0;
    tsr_status status = tsr_load_kernel_source(dev->kernel_dir, source_name, &owned, &text, &length);
    if (status != TSR_SUCCESS) return status;
    char bad[128];
    bool named = !strchr(kernel_name, ';') && names_in_source(kernel_name, text, length, bad, sizeof bad);
    free(owned);
    if (!named) return tsr_fail(TSR_ERR_NOT_FOUND, "kernel source '%s' has no kernel '%s'", source_name, kernel_name);
    cl_program program = NULL;
    status = tsr_program_for(dev, source_name, options, kernel_name, &program);
    if (status != TSR_SUCCESS) return status;
    cl_int err = CL_SUCCESS;
    *kernel = clCreateKernel(program, kernel_name, &err);
    if (err != CL_SUCCESS && err != CL_OUT_OF_HOST_MEMORY && err != CL_OUT_OF_RESOURCES) {
        /* a binary whose kernel cannot be created: dropped and rebuilt once (never a source build) */
        bool rebuild = false;
        status = drop_binary(dev, program, source_name, options, kernel_name, strlen(kernel_name), err, &rebuild);
        if (status != TSR_SUCCESS) return status;
        if (rebuild) status = rebuild_program(dev, source_name, options, &program);
        if (status != TSR_SUCCESS) return status;
        if (rebuild) *kernel = clCreateKernel(program, kernel_name, &err);
    }
    if (err != CL_SUCCESS) {
        *kernel = NULL;
        return tsr_fail(err == CL_INVALID_KERNEL_NAME ? TSR_ERR_NOT_FOUND : TSR_ERR_OPENCL,
                        "clCreateKernel('%s') in source '%s' failed with %s (%d)", kernel_name, source_name,
                        tsr_cl_error_name(err), (int)err);
    }
    return TSR_SUCCESS;
}

tsr_status tsr_program_write_binary(tsr_device *dev, const char *source_name, const char *options, const char *dir) {
    char *owned = NULL;
    const char *text = NULL;
    size_t length = 0;
    cl_program program = NULL;
    unsigned char *bin = NULL;
    size_t bin_length = 0;
    char *key_text = NULL;
    char *names = NULL;
    tsr_status st = tsr_load_kernel_source(dev->kernel_dir, source_name, &owned, &text, &length);
    if (st != TSR_SUCCESS) goto done;
    st = tsr_program_from_text(dev, source_name, text, length, options, &program);
    if (st != TSR_SUCCESS) goto done;
    st = program_binary(program, &bin, &bin_length);
    if (st != TSR_SUCCESS) goto done;
    st = program_kernel_names(program, &names);
    if (st != TSR_SUCCESS) goto done;
    key_text = make_key_text(dev, source_name, text, length, options);
    if (!key_text) {
        st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    char name[64], path[TSR_PATH_MAX + 64];
    entry_file_name(key_text, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    st = write_entry(path, key_text, names, bin, bin_length);
done:
    free(names);
    free(key_text);
    free(bin);
    free(owned);
    return st;
}

/* ---- kernel objects and launch records ---- */

tsr_status tsr_program_kernel(tsr_device *dev, cl_program program, const char *name, tsr_kernel **kernel) {
    *kernel = NULL;
    if (strlen(name) >= sizeof((tsr_kernel *)0)->name)
        return tsr_fail(TSR_ERR_INVALID_ARG, "kernel name '%s' is too long for the kernel cache", name);
    pthread_mutex_lock(&dev->program_lock);
    tsr_program_entry *e = dev->programs;
    while (e && e->program != program) e = e->next;
    tsr_kernel *k = e ? e->cached_kernels : NULL;
    while (k && strcmp(k->name, name) != 0) k = k->next;
    pthread_mutex_unlock(&dev->program_lock);
    if (!e) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_program_kernel: the program is not one of the device's cache");
    if (k) {
        *kernel = k;
        return TSR_SUCCESS;
    }
    /* Created outside the lock (PoCL may compile the kernel for its work-group size here); two
     * threads that miss at once both create one, and the second to insert keeps the first's. */
    cl_int err = CL_SUCCESS;
    cl_kernel made = clCreateKernel(program, name, &err);
    if (err != CL_SUCCESS)
        return tsr_fail(err == CL_INVALID_KERNEL_NAME ? TSR_ERR_NOT_FOUND : TSR_ERR_OPENCL,
                        "clCreateKernel('%s') failed with %s (%d)", name, tsr_cl_error_name(err), (int)err);
    tsr_kernel *fresh = calloc(1, sizeof *fresh);
    if (!fresh || pthread_mutex_init(&fresh->lock, NULL) != 0) {
        free(fresh);
        clReleaseKernel(made);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory caching kernel '%s'", name);
    }
    fresh->kernel = made;
    tsr_strlcpy(fresh->name, name, sizeof fresh->name);
    pthread_mutex_lock(&dev->program_lock);
    k = e->cached_kernels; /* entries are never freed before the device: e is still valid */
    while (k && strcmp(k->name, name) != 0) k = k->next;
    if (!k) {
        fresh->next = e->cached_kernels;
        e->cached_kernels = fresh;
        k = fresh;
        fresh = NULL;
    }
    pthread_mutex_unlock(&dev->program_lock);
    if (fresh) {
        clReleaseKernel(fresh->kernel);
        pthread_mutex_destroy(&fresh->lock);
        free(fresh);
    }
    *kernel = k;
    return TSR_SUCCESS;
}

_Thread_local tsr_kernel *tsr_held_kernel;

struct tsr_launch_entry {
    tsr_launch_key key;
    tsr_launch record;
    struct tsr_launch_entry *next;
};

/* Enough for every shape of a model and every configuration a tuning run tries on a class; past
 * it new records are not kept (the call pays its fixed cost, nothing else changes). */
#define MAX_LAUNCHES 4096

static size_t launch_bucket(const tsr_launch_key *key) {
    uint64_t h = (uint64_t)(uintptr_t)key->tag * 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < TSR_LAUNCH_KEY_WORDS; ++i) h = (h ^ key->words[i]) * 0x100000001B3ull;
    return (size_t)(h >> 58) % (sizeof ((tsr_device *)0)->launches / sizeof *((tsr_device *)0)->launches);
}

static bool same_key(const tsr_launch_key *a, const tsr_launch_key *b) {
    return a->tag == b->tag && memcmp(a->words, b->words, sizeof a->words) == 0;
}

/* Call with program_lock held (or on a device no other thread can reach). */
static void launches_clear(tsr_device *dev) {
    for (size_t b = 0; b < sizeof dev->launches / sizeof *dev->launches; ++b) {
        for (struct tsr_launch_entry *e = dev->launches[b], *next; e; e = next) {
            next = e->next;
            if (e->record.aux) clReleaseMemObject(e->record.aux);
            free(e);
        }
        dev->launches[b] = NULL;
    }
    dev->nlaunches = 0;
}

bool tsr_launch_find(tsr_device *dev, const tsr_launch_key *key, tsr_launch *out, uint64_t *generation) {
    const size_t b = launch_bucket(key);
    pthread_mutex_lock(&dev->program_lock);
    struct tsr_launch_entry *e = dev->launches[b];
    while (e && !same_key(&e->key, key)) e = e->next;
    if (e) {
        *out = e->record;
        if (out->aux) clRetainMemObject(out->aux);
    }
    *generation = dev->launch_generation;
    pthread_mutex_unlock(&dev->program_lock);
    return e != NULL;
}

void tsr_launch_store(tsr_device *dev, const tsr_launch_key *key, uint64_t generation, const tsr_launch *record) {
    const size_t b = launch_bucket(key);
    pthread_mutex_lock(&dev->program_lock);
    struct tsr_launch_entry *e = dev->launches[b];
    while (e && !same_key(&e->key, key)) e = e->next;
    if (!e && generation == dev->launch_generation && dev->nlaunches < MAX_LAUNCHES &&
        (e = malloc(sizeof *e)) != NULL) {
        e->key = *key;
        e->record = *record;
        if (e->record.aux) clRetainMemObject(e->record.aux);
        e->next = dev->launches[b];
        dev->launches[b] = e;
        dev->nlaunches++;
    }
    pthread_mutex_unlock(&dev->program_lock);
}

void tsr_launch_invalidate(tsr_device *dev) {
    pthread_mutex_lock(&dev->program_lock);
    launches_clear(dev);
    dev->launch_generation++;
    pthread_mutex_unlock(&dev->program_lock);
}

size_t tsr_launch_count(tsr_device *dev) {
    pthread_mutex_lock(&dev->program_lock);
    size_t n = dev->nlaunches;
    pthread_mutex_unlock(&dev->program_lock);
    return n;
}

tsr_status tsr_launch_kernels(tsr_device *dev, const void *tag, const tsr_config *cfg, int variant, uint32_t extra,
                              const char *source, tsr_options_fn options, const char *const *names,
                              tsr_kernel *kernels[TSR_LAUNCH_KERNELS]) {
    _Static_assert(sizeof cfg->values + 2 * sizeof(uint32_t) <= sizeof((tsr_launch_key *)0)->words,
                   "a configuration, its variant and one more word fit a launch key");
    tsr_status status = TSR_SUCCESS;
    tsr_launch_key key;
    memset(&key, 0, sizeof key);
    key.tag = tag;
    memcpy(key.words, cfg->values, sizeof cfg->values);
    key.words[TSR_MAX_PARAMS] = (uint32_t)variant;
    key.words[TSR_MAX_PARAMS + 1] = extra;
    tsr_launch rec;
    uint64_t generation = 0;
    /* With $TSR_KERNEL_DIR every call reads the files again (an edit reaches the next call, as it
     * always did): no record, only the kernel objects of each program are kept. */
    const bool remember = !dev->kernel_dir[0];
    if (remember && tsr_launch_find(dev, &key, &rec, &generation)) {
        memcpy(kernels, rec.kernels, sizeof rec.kernels);
        return TSR_SUCCESS;
    }
    memset(&rec, 0, sizeof rec);
    char text[768], list[4 * 48] = "";
    options(cfg, variant, text, sizeof text);
    for (int i = 0, used = 0; i < TSR_LAUNCH_KERNELS && names[i]; ++i)
        used += snprintf(list + used, sizeof list - (size_t)used, "%s%s", i ? ";" : "", names[i]);
    TSR_CHECK(status, tsr_program_for(dev, source, text, list, &rec.program), done);
    for (int i = 0; i < TSR_LAUNCH_KERNELS && names[i]; ++i)
        if (*names[i]) TSR_CHECK(status, tsr_program_kernel(dev, rec.program, names[i], &rec.kernels[i]), done);
    rec.config = *cfg;
    if (remember) tsr_launch_store(dev, &key, generation, &rec);
    memcpy(kernels, rec.kernels, sizeof rec.kernels);
done:
    return status;
}
