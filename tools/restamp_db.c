/* restamp_db: a developer's tool (built, never installed) that moves the tuned entries of a
 * tuning database across a kernel-source change that cannot alter what any tuned configuration
 * computes or how fast it runs (a comment, a dead #ifndef fallback the host always overrides).
 * docs/tuning.md says when that is honest.
 *
 *   restamp_db --list DB                      every entry: current, stale, or of an op this build lacks
 *   restamp_db [--dry-run] [--new DIR] DB OLD_DIR
 *   restamp_db --set-cpu SIGNATURE --device TEXT DB
 *                                             record the processor the nodes of devices named TEXT
 *                                             that record none were tuned on (their key too)
 *
 * OLD_DIR holds the kernel sources before the change (`git archive REV cl | tar -x -C DIR` gives
 * DIR/cl), read as TSR_KERNEL_DIR is; the sources after it are this build's embedded ones, or DIR
 * with --new. For each op whose source hash differs between the two, exactly the entries stamped
 * with the old hash take the new one: an entry already stale before the change stays stale, and
 * nothing else in the file changes. The file is rewritten through the tuning database's own update
 * path (under its lock, sealed with a fresh checksum); a missing or damaged file is refused, never
 * replaced. Exit status: 0 done, 1 an error (said on stderr), 2 a usage error. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_OPS 64
#define MAX_KEEP 32 /* of each of --keep and --keep-class */

typedef struct {
    const tsr_op *op;
    char old_hash[17], new_hash[17];
    bool known_old; /* the op's sources exist in OLD_DIR */
    int moved, kept_stale, current;
} op_stamp;

typedef struct {
    op_stamp ops[MAX_OPS];
    int nops;
    int unknown; /* entries of ops this build does not have: left as they are */
    bool dry_run;
    int nkeep;
    char keep_key[MAX_KEEP][32];
    int keep_value[MAX_KEEP];
    int nkeep_class;
    const char *keep_class[MAX_KEEP]; /* --keep-class: entries of these classes stay stale */
    const char *device;               /* --device: only device nodes whose name contains it */
    const char *set_cpu;              /* --set-cpu: the processor signature to record */
    int cpu_set;                      /* nodes it was recorded in */
} restamp_ctx;

static op_stamp *find_stamp(restamp_ctx *ctx, const char *name) {
    for (int i = 0; i < ctx->nops; ++i)
        if (strcmp(ctx->ops[i].op->name, name) == 0) return &ctx->ops[i];
    return NULL;
}

/* Each op's source hash after the change and, with old_dir, before it. */
static tsr_status hash_ops(restamp_ctx *ctx, const char *old_dir, const char *new_dir) {
    ctx->nops = 0;
    for (const tsr_op *const *op = tsr_ops; *op && ctx->nops < MAX_OPS; ++op) {
        op_stamp *s = &ctx->ops[ctx->nops++];
        memset(s, 0, sizeof *s);
        s->op = *op;
        tsr_status st = tsr_op_source_hash_in(new_dir, *op, s->new_hash);
        if (st != TSR_SUCCESS) return st;
        if (!old_dir) continue;
        st = tsr_op_source_hash_in(old_dir, *op, s->old_hash);
        if ((st == TSR_ERR_NOT_FOUND || st == TSR_ERR_IO) && (*op)->more_sources) {
            /* An extra source added since (the old tree lacks it): the old hash was taken over
             * the list without it. The main source must exist. */
            tsr_clear_error();
            const char *kept[16];
            int n = 0;
            for (int i = 0; (*op)->more_sources[i] && n < 15; ++i) {
                char *owned = NULL;
                const char *text = NULL;
                size_t length = 0;
                if (tsr_load_kernel_source(old_dir, (*op)->more_sources[i], &owned, &text, &length) == TSR_SUCCESS)
                    kept[n++] = (*op)->more_sources[i];
                else
                    fprintf(stderr, "restamp_db: %s: the old tree has no %s.cl: its old hash leaves it out\n",
                            (*op)->name, (*op)->more_sources[i]);
                free(owned);
                tsr_clear_error();
            }
            kept[n] = NULL;
            tsr_op old_op = **op;
            old_op.more_sources = n ? kept : NULL;
            st = tsr_op_source_hash_in(old_dir, &old_op, s->old_hash);
        }
        if (st == TSR_ERR_NOT_FOUND || st == TSR_ERR_IO) { /* a source the old tree did not have yet */
            fprintf(stderr, "restamp_db: %s: no old source hash (%s): its entries stay as they are\n", (*op)->name,
                    tsr_last_error());
            continue;
        }
        if (st != TSR_SUCCESS) return st;
        s->known_old = true;
    }
    return TSR_SUCCESS;
}

/* --keep KEY=VALUE: an entry whose configuration sets KEY to VALUE is left stale (a change to the
 * code only that implementation runs, e.g. GEMM's KERNEL=2 smallm kernel); --keep-class NAME: the
 * entries of that class (bench/program_proof.py found their programs changed); --device TEXT:
 * every entry of a device whose name lacks TEXT (the proof ran on one device). */
static bool excluded(const restamp_ctx *ctx, const cJSON *dev, const cJSON *entry) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dev, "name"));
    if (ctx->device && !(name && strstr(name, ctx->device))) return true;
    for (int i = 0; i < ctx->nkeep_class; ++i)
        if (strcmp(entry->string, ctx->keep_class[i]) == 0) return true;
    for (int i = 0; i < ctx->nkeep; ++i) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(entry, "config"),
                                                          ctx->keep_key[i]);
        if (cJSON_IsNumber(v) && v->valuedouble == (double)ctx->keep_value[i]) return true;
    }
    return false;
}

/* Visit every entry: with moving set, restamp the ones at their op's old hash. */
static void walk(cJSON *root, restamp_ctx *ctx, bool moving, FILE *list) {
    cJSON *dev;
    cJSON_ArrayForEach(dev, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        cJSON *op;
        cJSON_ArrayForEach(op, cJSON_GetObjectItemCaseSensitive(dev, "ops")) {
            op_stamp *s = find_stamp(ctx, op->string);
            cJSON *entry;
            cJSON_ArrayForEach(entry, op) {
                cJSON *hash = cJSON_GetObjectItemCaseSensitive(entry, "source_hash");
                const char *was = cJSON_GetStringValue(hash);
                const char *state;
                if (!s) {
                    ++ctx->unknown;
                    state = "unknown-op";
                } else if (moving && s->known_old && strcmp(s->old_hash, s->new_hash) != 0 &&
                           strcmp(was, s->old_hash) == 0 && !excluded(ctx, dev, entry)) {
                    ++s->moved;
                    state = "re-stamped";
                    if (!ctx->dry_run) cJSON_SetValuestring(hash, s->new_hash);
                } else if (strcmp(was, s->new_hash) == 0) {
                    ++s->current;
                    state = "current";
                } else {
                    ++s->kept_stale;
                    state = "stale";
                }
                if (list)
                    fprintf(list, "%-10s %-8s %-14s %s  %s  (%s)\n", state, op->string, entry->string, was,
                            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dev, "name")), dev->string);
            }
        }
    }
}

/* --set-cpu: a node tuned before nodes recorded their processor (tsr_device_info.host_cpu) gets
 * "cpu" and the key a node of that device on that processor has (tsr_db_device_node's); a node
 * that records one, or whose new key is taken, is left as it is. */
static tsr_status set_cpu_update(cJSON *root, void *arg) {
    restamp_ctx *ctx = arg;
    cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
    for (cJSON *dev = devices ? devices->child : NULL, *next; dev; dev = next) {
        next = dev->next;
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dev, "name"));
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dev, "type"));
        if (!name || !strstr(name, ctx->device) || cJSON_GetObjectItemCaseSensitive(dev, "cpu")) continue;
        if (!type || strcmp(type, "CPU") != 0) { /* only a CPU device has a processor of its own */
            fprintf(stderr, "restamp_db: left '%s' as it is: not a CPU device\n", dev->string);
            continue;
        }
        char key[7 * TSR_INFO_STR];
        if ((size_t)snprintf(key, sizeof key, "%s|%s", dev->string, ctx->set_cpu) >= sizeof key) {
            fprintf(stderr, "restamp_db: left '%s' as it is: its key would be too long\n", dev->string);
            continue;
        }
        if (cJSON_GetObjectItemCaseSensitive(devices, key)) {
            fprintf(stderr, "restamp_db: left '%s' as it is: '%s' exists\n", dev->string, key);
            continue;
        }
        /* renamed in its place (the file's diff: the key and "cpu"), with cJSON's own allocator */
        char *renamed = cJSON_malloc(strlen(key) + 1);
        if (!renamed || !cJSON_AddStringToObject(dev, "cpu", ctx->set_cpu)) {
            cJSON_free(renamed);
            return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        }
        memcpy(renamed, key, strlen(key) + 1);
        if (!(dev->type & cJSON_StringIsConst)) cJSON_free(dev->string);
        dev->string = renamed;
        dev->type &= ~cJSON_StringIsConst;
        printf("%s -> %s\n", name, key);
        ++ctx->cpu_set;
    }
    return TSR_SUCCESS;
}

/* Printable ASCII only: sscanf's blanks also take tabs and newlines, which no processor name holds
 * and the database refuses (a control character) once written. */
static bool plain_text(const char *s) {
    for (; *s; ++s)
        if (*s < 0x20 || *s > 0x7e) return false;
    return true;
}

static tsr_status restamp_update(cJSON *root, void *arg) {
    walk(root, arg, true, NULL);
    return TSR_SUCCESS;
}

static int usage(void) {
    fprintf(stderr, "usage: restamp_db --list DB\n"
                    "       restamp_db [--dry-run] [--new NEW_KERNEL_DIR] [--keep KEY=VALUE]... [--keep-class NAME]...\n"
                    "                  [--device TEXT] DB OLD_KERNEL_DIR\n"
                    "       restamp_db --set-cpu SIGNATURE --device TEXT DB\n"
                    "Re-stamps the entries of DB tuned for the kernel sources in OLD_KERNEL_DIR with the source\n"
                    "hashes of this build's sources (or NEW_KERNEL_DIR's); see docs/tuning.md. --keep leaves\n"
                    "stale the entries whose configuration sets KEY to VALUE (an edit to the code only they run),\n"
                    "--keep-class those of class NAME, --device those of every device whose name lacks TEXT.\n"
                    "--set-cpu records the processor (`tessera devices` names it) that the nodes of devices named\n"
                    "TEXT which record none were tuned on.\n");
    return 2;
}

int main(int argc, char **argv) {
    static restamp_ctx ctx;
    bool list = false, dry_run = false;
    const char *new_dir = NULL;
    int a = 1;
    for (; a < argc && argv[a][0] == '-'; ++a) {
        if (strcmp(argv[a], "--list") == 0) list = true;
        else if (strcmp(argv[a], "--dry-run") == 0) dry_run = true;
        else if (strcmp(argv[a], "--new") == 0 && a + 1 < argc) new_dir = argv[++a];
        else if (strcmp(argv[a], "--keep") == 0 && a + 1 < argc && ctx.nkeep < MAX_KEEP) {
            const char *arg = argv[++a], *eq = strchr(arg, '=');
            char *end = NULL;
            long v = eq ? strtol(eq + 1, &end, 10) : 0;
            if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof ctx.keep_key[0] || !eq[1] || *end) return usage();
            memcpy(ctx.keep_key[ctx.nkeep], arg, (size_t)(eq - arg));
            ctx.keep_key[ctx.nkeep][eq - arg] = '\0';
            ctx.keep_value[ctx.nkeep++] = (int)v;
        } else if (strcmp(argv[a], "--keep-class") == 0 && a + 1 < argc && ctx.nkeep_class < MAX_KEEP && argv[a + 1][0])
            ctx.keep_class[ctx.nkeep_class++] = argv[++a];
        else if (strcmp(argv[a], "--device") == 0 && a + 1 < argc && argv[a + 1][0])
            ctx.device = argv[++a];
        else if (strcmp(argv[a], "--set-cpu") == 0 && a + 1 < argc && argv[a + 1][0])
            ctx.set_cpu = argv[++a];
        else if ((strcmp(argv[a], "--keep") == 0 && ctx.nkeep == MAX_KEEP) ||
                 (strcmp(argv[a], "--keep-class") == 0 && ctx.nkeep_class == MAX_KEEP)) {
            fprintf(stderr, "restamp_db: at most %d %s options\n", MAX_KEEP, argv[a]);
            return 2;
        } else return usage();
    }
    if (ctx.set_cpu) { /* only with --device, alone */
        if (!ctx.device || list || dry_run || new_dir || ctx.nkeep || ctx.nkeep_class || argc - a != 1) return usage();
        /* what tsr_device_info.host_cpu holds: "<vendor> family <n> model <n>", nothing else */
        char vendor[64], tail;
        unsigned family, model;
        if (strlen(ctx.set_cpu) >= TSR_INFO_STR ||
            sscanf(ctx.set_cpu, "%63[A-Za-z0-9] family %u model %u%c", vendor, &family, &model, &tail) != 3 ||
            strstr(ctx.set_cpu, "  ") || !plain_text(ctx.set_cpu)) {
            fprintf(stderr, "restamp_db: --set-cpu '%s' is not a processor as tessera names one (\"AuthenticAMD family "
                            "26 model 2\": `tessera devices` shows it)\n", ctx.set_cpu);
            return 2;
        }
        cJSON *root = NULL;
        tsr_status st = tsr_db_load(argv[a], &root); /* refuse a missing or damaged file */
        cJSON_Delete(root);
        if (st == TSR_SUCCESS) st = tsr_db_update(argv[a], set_cpu_update, &ctx);
        if (st != TSR_SUCCESS) {
            fprintf(stderr, "restamp_db: %s\n", tsr_last_error());
            return 1;
        }
        printf("%d device node%s now record%s the processor\n", ctx.cpu_set, ctx.cpu_set == 1 ? "" : "s",
               ctx.cpu_set == 1 ? "s" : "");
        return 0;
    }
    if (argc - a != (list ? 1 : 2)) return usage();
    const char *db = argv[a], *old_dir = list ? NULL : argv[a + 1];
    if (old_dir && !*old_dir) return usage(); /* an empty dir would mean the embedded sources */
    struct stat sb;
    for (int i = 0; i < 2; ++i) {
        const char *dir = i ? new_dir : old_dir;
        if (dir && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
            fprintf(stderr, "restamp_db: %s is not a directory of kernel sources\n", dir);
            return 1;
        }
    }

    ctx.dry_run = dry_run;
    cJSON *root = NULL;
    /* Refuse a missing or damaged file here: the update path would start a new one instead. */
    tsr_status st = tsr_db_load(db, &root);
    if (st == TSR_SUCCESS) st = hash_ops(&ctx, old_dir, new_dir);
    if (st != TSR_SUCCESS) {
        cJSON_Delete(root);
        fprintf(stderr, "restamp_db: %s\n", tsr_last_error());
        return 1;
    }
    if (list || dry_run) {
        walk(root, &ctx, !list, stdout);
    } else {
        cJSON_Delete(root);
        root = NULL;
        st = tsr_db_update(db, restamp_update, &ctx);
        if (st != TSR_SUCCESS) {
            fprintf(stderr, "restamp_db: %s\n", tsr_last_error());
            return 1;
        }
    }
    cJSON_Delete(root);
    int moved = 0, stale = 0, current = 0;
    for (int i = 0; i < ctx.nops; ++i) {
        const op_stamp *s = &ctx.ops[i];
        moved += s->moved;
        stale += s->kept_stale;
        current += s->current;
        if (old_dir && s->known_old && strcmp(s->old_hash, s->new_hash) != 0)
            printf("%s: source hash %s -> %s: %d entr%s re-stamped, %d stale left stale\n", s->op->name, s->old_hash,
                   s->new_hash, s->moved, s->moved == 1 ? "y" : "ies", s->kept_stale);
    }
    printf("%s%d current, %d stale, %d of ops this build lacks\n", list ? "" : dry_run ? "after a re-stamp: " : "now: ",
           current + moved, stale, ctx.unknown);
    if (!list) printf("%d entr%s re-stamped%s\n", moved, moved == 1 ? "y" : "ies", dry_run ? " (dry run: DB unchanged)" : "");
    return 0;
}
