/* tools/restamp_db: re-stamping a tuning database across a kernel-source change moves exactly the
 * entries that were current before it, leaves stale entries and other ops' entries alone, and
 * leaves a file that validates, imports and serves lookups; bad input is refused and changes
 * nothing. Run as test_restamp RESTAMP_DB_PATH SOURCE_CL_DIR. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *tool, *source_cl;
static char dir[512], db_path[700], old_dir[700], out_path[700];
static tsr_device *dev;

static int setup(void **state) {
    (void)state;
    th_tempdir(dir, sizeof dir);
    snprintf(db_path, sizeof db_path, "%s/tuning.json", dir);
    snprintf(old_dir, sizeof old_dir, "%s/old", dir);
    snprintf(out_path, sizeof out_path, "%s/out.txt", dir);
    setenv("TSR_TUNING_DB", db_path, 1);
    setenv("TSR_BUILTIN_TUNING", "off", 1); /* lookups see this file's entries or the op's default */
    dev = th_open_device();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tsr_device_close(dev);
    unsetenv("TSR_BUILTIN_TUNING");
    th_remove_tree(dir);
    return 0;
}

/* The tool with `args`; its stdout and stderr in *out (freed by the caller); its exit status. */
static int run_tool(const char *args, char **out) {
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "'%s' %s > '%s' 2>&1", tool, args, out_path);
    int rc = system(cmd);
    size_t size = 0;
    *out = NULL;
    TH_ASSERT_OK(tsr_read_file(out_path, out, &size));
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* OLD_DIR: a copy of the source tree's cl/, and gelu.cl there as it was before an edit (a comment). */
static void make_old_dir(void) {
    TH_ASSERT_OK(tsr_make_dirs(old_dir));
    DIR *d = opendir(source_cl);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 3, ".cl") != 0) continue;
        char from[1200], to[1200];
        snprintf(from, sizeof from, "%s/%s", source_cl, e->d_name);
        snprintf(to, sizeof to, "%s/%s", old_dir, e->d_name);
        char *text = NULL;
        size_t size = 0;
        TH_ASSERT_OK(tsr_read_file(from, &text, &size));
        if (strcmp(e->d_name, "gelu.cl") == 0) {
            char *older = malloc(size + 64);
            assert_non_null(older);
            memcpy(older, text, size);
            size += (size_t)sprintf(older + size, "// a comment the current source no longer has\n");
            free(text);
            text = older;
        }
        th_write_file(to, text, size);
        free(text);
    }
    closedir(d);
}

/* An entry of `op` for class `cls` on the device node `key` (this device's fingerprint, or a
 * made-up device), at the op's default configuration for this device, stamped `hash`. */
static void add_entry(cJSON *root, const char *key, const tsr_op *op, const char *cls, const char *hash) {
    const tsr_device_info *i = tsr_device_get_info(dev);
    cJSON *devs = cJSON_GetObjectItem(root, "devices");
    cJSON *d = cJSON_GetObjectItem(devs, key);
    if (!d) {
        d = cJSON_AddObjectToObject(devs, key);
        bool mine = strcmp(key, "mine") == 0;
        cJSON_AddStringToObject(d, "platform", mine ? i->platform_name : "Another Platform");
        cJSON_AddStringToObject(d, "vendor", mine ? i->vendor : "Another Vendor");
        cJSON_AddStringToObject(d, "name", mine ? i->name : "another device");
        cJSON_AddStringToObject(d, "driver", mine ? i->driver_version : "1.0");
        cJSON_AddStringToObject(d, "opencl_c", mine ? i->opencl_c_version : "OpenCL C 1.2");
        cJSON_AddStringToObject(d, "type", mine ? tsr_device_type_str(i->type) : "GPU");
        cJSON_AddObjectToObject(d, "ops");
    }
    cJSON *ops = cJSON_GetObjectItem(d, "ops");
    cJSON *o = cJSON_GetObjectItem(ops, op->name);
    if (!o) o = cJSON_AddObjectToObject(ops, op->name);
    tsr_config cfg;
    tsr_op_default_config(op, dev, cls, &cfg);
    cJSON *e = cJSON_AddObjectToObject(o, cls);
    cJSON *c = cJSON_AddObjectToObject(e, "config");
    for (int p = 0; p < op->nparams; ++p) cJSON_AddNumberToObject(c, op->params[p].name, cfg.values[p]);
    cJSON_AddNumberToObject(e, "gflops", 12.5);
    cJSON_AddStringToObject(e, "source_hash", hash);
    cJSON_AddStringToObject(e, "date", "2026-11-01");
    cJSON_AddStringToObject(e, "problem", "test");
}

static tsr_status merge_tree(cJSON *root, void *ctx) {
    tsr_db_merge(root, ctx);
    return TSR_SUCCESS;
}

static const char *hash_of(const cJSON *root, const char *key, const char *op, const char *cls) {
    const cJSON *e = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "devices"), key), "ops"), op),
        cls);
    return cJSON_GetStringValue(cJSON_GetObjectItem(e, "source_hash"));
}

static void set_hash(cJSON *root, const char *key, const char *op, const char *cls, const char *hash) {
    cJSON *e = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "devices"), key), "ops"), op),
        cls);
    cJSON_SetValuestring(cJSON_GetObjectItem(e, "source_hash"), hash);
}

static tsr_config_info lookup_fresh(const char *op, const char *cls) {
    tsr_device_close(dev);
    dev = th_open_device();
    tsr_config_info ci;
    TH_ASSERT_OK(tsr_config_lookup(dev, op, cls, &ci));
    return ci;
}

static char *file_text(const char *path) {
    char *text = NULL;
    size_t size = 0;
    TH_ASSERT_OK(tsr_read_file(path, &text, &size));
    return text;
}

/* Runs the tool with ARGS, expects exit status RC and SAYS in its output, and the database byte for
 * byte as it was. */
static void run_leaves_db(const char *args, int rc, const char *says) {
    char *out = NULL, *before = file_text(db_path);
    assert_int_equal(run_tool(args, &out), rc);
    TH_ASSERT_CONTAINS(out, says);
    free(out);
    char *now = file_text(db_path);
    assert_string_equal(now, before);
    free(now);
    free(before);
}

static void only_current_entries_move(void **state) {
    (void)state;
    make_old_dir();
    char gelu_old[17], gelu_new[17], gemm_new[17], gemm_from_dir[17], gelu_from_dir[17];
    TH_ASSERT_OK(tsr_op_source_hash_in(old_dir, &tsr_op_gelu, gelu_old));
    TH_ASSERT_OK(tsr_op_source_hash_in(NULL, &tsr_op_gelu, gelu_new));
    TH_ASSERT_OK(tsr_op_source_hash_in(NULL, &tsr_op_gemm, gemm_new));
    /* A directory is read as the embedded copies are (includes in place): cl/ hashes as the build. */
    TH_ASSERT_OK(tsr_op_source_hash_in(source_cl, &tsr_op_gemm, gemm_from_dir));
    TH_ASSERT_OK(tsr_op_source_hash_in(source_cl, &tsr_op_gelu, gelu_from_dir));
    assert_string_equal(gemm_from_dir, gemm_new);
    assert_string_equal(gelu_from_dir, gelu_new);
    assert_string_not_equal(gelu_old, gelu_new);

    cJSON *root = tsr_db_new();
    add_entry(root, "mine", &tsr_op_gelu, "large", gelu_old);          /* current before the edit: moves */
    add_entry(root, "mine", &tsr_op_gelu, "small", "0123456789abcdef"); /* stale before: stays stale */
    add_entry(root, "mine", &tsr_op_gemm, "large", gemm_new);          /* another op, current: untouched */
    add_entry(root, "mine", &tsr_op_gemm, "small", gelu_old);          /* another op with gelu's old hash: untouched */
    add_entry(root, "other", &tsr_op_gelu, "large", gelu_old);         /* another device's current entry: moves */
    unlink(db_path);
    TH_ASSERT_OK(tsr_db_update(db_path, merge_tree, root)); /* sealed, as tessera writes it */
    cJSON_Delete(root);
    cJSON *before = NULL;
    TH_ASSERT_OK(tsr_db_load(db_path, &before));

    tsr_config_info ci = lookup_fresh("gelu", "large");
    assert_int_equal(ci.source, TSR_CONFIG_BUILTIN_DEFAULT);
    TH_ASSERT_CONTAINS(ci.origin, "kernel source changed");

    char args[1500], *out = NULL;
    /* --list and --dry-run change nothing */
    snprintf(args, sizeof args, "--list '%s'", db_path);
    run_leaves_db(args, 0, "1 current, 4 stale, 0 of ops this build lacks");
    snprintf(args, sizeof args, "--dry-run '%s' '%s'", db_path, old_dir);
    run_leaves_db(args, 0, "2 entries re-stamped (dry run: DB unchanged)");

    snprintf(args, sizeof args, "'%s' '%s'", db_path, old_dir);
    assert_int_equal(run_tool(args, &out), 0);
    char line[200];
    snprintf(line, sizeof line, "gelu: source hash %s -> %s: 2 entries re-stamped, 1 stale left stale", gelu_old, gelu_new);
    TH_ASSERT_CONTAINS(out, line);
    TH_ASSERT_CONTAINS(out, "now: 3 current, 2 stale");
    assert_null(strstr(out, "gemm:")); /* gemm's sources did not change */
    free(out);

    cJSON *after = NULL;
    TH_ASSERT_OK(tsr_db_load(db_path, &after)); /* validates: checksum resealed */
    assert_string_equal(hash_of(after, "mine", "gelu", "large"), gelu_new);
    assert_string_equal(hash_of(after, "other", "gelu", "large"), gelu_new);
    assert_string_equal(hash_of(after, "mine", "gelu", "small"), "0123456789abcdef");
    assert_string_equal(hash_of(after, "mine", "gemm", "large"), gemm_new);
    assert_string_equal(hash_of(after, "mine", "gemm", "small"), gelu_old);
    /* nothing else changed */
    set_hash(before, "mine", "gelu", "large", gelu_new);
    set_hash(before, "other", "gelu", "large", gelu_new);
    assert_true(cJSON_Compare(cJSON_GetObjectItem(before, "devices"), cJSON_GetObjectItem(after, "devices"), true));
    cJSON_Delete(before);
    cJSON_Delete(after);

    ci = lookup_fresh("gelu", "large"); /* the re-stamped entry serves lookups */
    assert_int_equal(ci.source, TSR_CONFIG_TUNED);
    assert_int_equal(ci.stale_passed_over, 0);
    ci = lookup_fresh("gelu", "small"); /* the stale one is still passed over */
    assert_int_equal(ci.source, TSR_CONFIG_BUILTIN_DEFAULT);
    TH_ASSERT_CONTAINS(ci.origin, "kernel source changed");

    char other_db[800];
    size_t merged = 0;
    snprintf(other_db, sizeof other_db, "%s/imported.json", dir);
    TH_ASSERT_OK(tsr_tuning_db_import(other_db, db_path, &merged));
    assert_int_equal(merged, 5);

    /* A second run finds nothing at the old hash: the file's entries stay as they are. */
    run_leaves_db(args, 0, "0 entries re-stamped");
}

static void bad_input_changes_nothing(void **state) {
    (void)state;
    char args[1500], *out = NULL;
    assert_int_equal(run_tool("", &out), 2);
    TH_ASSERT_CONTAINS(out, "usage: restamp_db");
    free(out);
    snprintf(args, sizeof args, "--bogus '%s' '%s'", db_path, dir);
    assert_int_equal(run_tool(args, &out), 2);
    free(out);

    /* no database: refused, none created */
    snprintf(args, sizeof args, "'%s' '%s'", db_path, dir);
    assert_int_equal(run_tool(args, &out), 1);
    TH_ASSERT_CONTAINS(out, "tuning.json");
    free(out);
    assert_int_equal(access(db_path, F_OK), -1);

    /* a damaged database: refused, left where it is (never moved aside) */
    static const char damaged[] = "{\"format\": \"tessera-tuning-db\", \"schema_version\": 1, \"devices\": {}, "
                                  "\"checksum\": \"0000000000000000\"}";
    th_write_file(db_path, damaged, sizeof damaged - 1);
    assert_int_equal(run_tool(args, &out), 1);
    TH_ASSERT_CONTAINS(out, "checksum mismatch");
    free(out);
    char *text = file_text(db_path);
    assert_string_equal(text, damaged);
    free(text);

    /* an old kernel directory that is not there */
    cJSON *root = tsr_db_new();
    char gelu[17];
    TH_ASSERT_OK(tsr_op_source_hash_in(NULL, &tsr_op_gelu, gelu));
    add_entry(root, "mine", &tsr_op_gelu, "large", gelu);
    unlink(db_path);
    TH_ASSERT_OK(tsr_db_update(db_path, merge_tree, root));
    cJSON_Delete(root);
    char *good = file_text(db_path);
    snprintf(args, sizeof args, "'%s' '%s/missing'", db_path, dir);
    assert_int_equal(run_tool(args, &out), 1);
    TH_ASSERT_CONTAINS(out, "is not a directory of kernel sources");
    free(out);
    /* an old directory without the ops' sources (a tree before they existed): nothing moves */
    snprintf(args, sizeof args, "'%s' '%s'", db_path, dir);
    assert_int_equal(run_tool(args, &out), 0);
    TH_ASSERT_CONTAINS(out, "gelu: no old source hash");
    TH_ASSERT_CONTAINS(out, "0 entries re-stamped");
    free(out);
    cJSON *after = NULL;
    TH_ASSERT_OK(tsr_db_load(db_path, &after));
    assert_string_equal(hash_of(after, "mine", "gelu", "large"), gelu);
    cJSON_Delete(after);
    free(good);
}

/* The old cl/ directory and gelu's hashes before (old) and after (new) its edit. */
static void gelu_hashes(char old[17], char new_hash[17]) {
    make_old_dir();
    TH_ASSERT_OK(tsr_op_source_hash_in(old_dir, &tsr_op_gelu, old));
    TH_ASSERT_OK(tsr_op_source_hash_in(NULL, &tsr_op_gelu, new_hash));
}

/* `root` written as the database at db_path (sealed, as tessera writes it) and freed. */
static void write_db(cJSON *root) {
    unlink(db_path);
    TH_ASSERT_OK(tsr_db_update(db_path, merge_tree, root));
    cJSON_Delete(root);
}

/* Each malformed option list `bad` is a usage error (exit 2) that leaves the database as it was. */
static void refused_options_change_nothing(const char *const *bad, size_t n) {
    char args[1500];
    for (size_t i = 0; i < n; ++i) {
        snprintf(args, sizeof args, "%s '%s' '%s'", bad[i], db_path, old_dir);
        run_leaves_db(args, 2, "usage: restamp_db");
    }
}

/* --keep KEY=VALUE: the old-hash entries whose configuration sets KEY to VALUE stay stale (an edit to
 * code only that implementation runs), the others move; a malformed --keep is refused. */
static void keep_leaves_matching_entries_stale(void **state) {
    (void)state;
    char gelu_old[17], gelu_new[17];
    gelu_hashes(gelu_old, gelu_new);
    cJSON *root = tsr_db_new();
    add_entry(root, "mine", &tsr_op_gelu, "large", gelu_old);
    add_entry(root, "other", &tsr_op_gelu, "large", gelu_old);
    cJSON *cfg = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(
                                         cJSON_GetObjectItem(root, "devices"), "other"), "ops"), "gelu"), "large"),
                                     "config");
    int vw = cJSON_GetObjectItem(cfg, "VW")->valueint;
    cJSON_SetNumberValue(cJSON_GetObjectItem(cfg, "VW"), vw == 4 ? 8 : 4); /* "other" runs another width */
    write_db(root);

    char args[1500], *out = NULL;
    static const char *const bad[] = {"--keep VW", "--keep =4", "--keep VW=", "--keep VW=4x", "--keep"};
    refused_options_change_nothing(bad, sizeof bad / sizeof bad[0]);

    snprintf(args, sizeof args, "--keep VW=%d '%s' '%s'", vw, db_path, old_dir);
    assert_int_equal(run_tool(args, &out), 0);
    TH_ASSERT_CONTAINS(out, "1 entry re-stamped");
    free(out);
    cJSON *after = NULL;
    TH_ASSERT_OK(tsr_db_load(db_path, &after));
    assert_string_equal(hash_of(after, "mine", "gelu", "large"), gelu_old); /* kept stale */
    assert_string_equal(hash_of(after, "other", "gelu", "large"), gelu_new);
    cJSON_Delete(after);
    tsr_config_info ci = lookup_fresh("gelu", "large");
    assert_int_equal(ci.source, TSR_CONFIG_BUILTIN_DEFAULT);
    TH_ASSERT_CONTAINS(ci.origin, "kernel source changed");
}

/* --keep-class NAME leaves that class's old-hash entries stale; --device TEXT re-stamps only the device
 * nodes whose name contains TEXT (a proof made on one device says nothing of another's programs). */
static void keep_class_and_device_limit_the_move(void **state) {
    (void)state;
    char gelu_old[17], gelu_new[17];
    gelu_hashes(gelu_old, gelu_new);
    cJSON *root = tsr_db_new();
    add_entry(root, "mine", &tsr_op_gelu, "large", gelu_old);
    add_entry(root, "mine", &tsr_op_gelu, "small", gelu_old);
    add_entry(root, "other", &tsr_op_gelu, "large", gelu_old);
    write_db(root);

    char args[3000], *out = NULL;
    static const char *const bad[] = {"--keep-class", "--keep-class ''", "--device", "--device ''"};
    refused_options_change_nothing(bad, sizeof bad / sizeof bad[0]);
    /* 32 --keep-class are taken (session 26 needed 10 at once); a 33rd is refused by name, nothing moves */
    char many[800] = "";
    for (int k = 0; k < 33; ++k) snprintf(many + strlen(many), sizeof many - strlen(many), "--keep-class c%d ", k);
    snprintf(args, sizeof args, "%s'%s' '%s'", many, db_path, old_dir);
    run_leaves_db(args, 2, "at most 32 --keep-class options");
    snprintf(args, sizeof args, "--dry-run %s'%s' '%s'", many + strlen("--keep-class c0 "), db_path, old_dir);
    assert_int_equal(run_tool(args, &out), 0);
    free(out);

    const tsr_device_info *i = tsr_device_get_info(dev);
    snprintf(args, sizeof args, "--keep-class small --device '%s' '%s' '%s'", i->name, db_path, old_dir);
    assert_int_equal(run_tool(args, &out), 0);
    TH_ASSERT_CONTAINS(out, "1 entry re-stamped");
    free(out);
    cJSON *after = NULL;
    TH_ASSERT_OK(tsr_db_load(db_path, &after));
    assert_string_equal(hash_of(after, "mine", "gelu", "large"), gelu_new);
    assert_string_equal(hash_of(after, "mine", "gelu", "small"), gelu_old);  /* its class kept stale */
    assert_string_equal(hash_of(after, "other", "gelu", "large"), gelu_old); /* another device */
    cJSON_Delete(after);
}

/* --set-cpu SIGNATURE --device TEXT: the nodes of devices named TEXT that record no processor get
 * "cpu" and the key tessera gives such a node (its entries then serve that processor first and
 * others as a sibling's); other devices' nodes, and nodes that record one, stay as they were;
 * malformed option lists are refused and change nothing. */
static void set_cpu_records_the_processor(void **state) {
    (void)state;
    char hash[17];
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_gelu, hash));
    cJSON *root = tsr_db_new();
    add_entry(root, "mine", &tsr_op_gelu, "large", hash);
    add_entry(root, "other", &tsr_op_gelu, "large", hash);
    add_entry(root, "recorded", &tsr_op_gelu, "small", hash);
    add_entry(root, "gpu", &tsr_op_gelu, "small", hash); /* a GPU (add_entry's other devices) of this name */
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "devices"), "gpu"), "name",
                              cJSON_CreateString(tsr_device_get_info(dev)->name));
    cJSON *rec = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "devices"), "recorded");
    cJSON_ReplaceItemInObject(rec, "name", cJSON_CreateString(tsr_device_get_info(dev)->name));
    cJSON_AddStringToObject(rec, "cpu", "Vendor family 1 model 1");
    write_db(root);

    const tsr_device_info *i = tsr_device_get_info(dev);
    char args[3000], *out = NULL;
    static const char *const bad[] = {"--set-cpu X", "--set-cpu '' --device x", "--set-cpu X --device x --dry-run",
                                      "--set-cpu X --device x --keep-class small", "--set-cpu"};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; ++b) {
        snprintf(args, sizeof args, "%s '%s'", bad[b], db_path);
        run_leaves_db(args, 2, "usage: restamp_db");
    }
    snprintf(args, sizeof args, "--set-cpu X --device x '%s' extra", db_path);
    run_leaves_db(args, 2, "usage: restamp_db");
    static const char *const not_cpus[] = {"X", "Vendor family 9", "Vendor family 9 model 3 extra", "Ven dor family 9 model 3",
                                           "Vendor family x model 3", "Vendor\tfamily 9 model 3", "Vendor family 9 model 3\t"};
    for (size_t b = 0; b < sizeof not_cpus / sizeof not_cpus[0]; ++b) {
        snprintf(args, sizeof args, "--set-cpu '%s' --device '%s' '%s'", not_cpus[b], i->name, db_path);
        run_leaves_db(args, 2, "is not a processor as tessera names one");
    }

    snprintf(args, sizeof args, "--set-cpu 'Vendor family 9 model 3' --device '%s' '%s'", i->name, db_path);
    assert_int_equal(run_tool(args, &out), 0);
    TH_ASSERT_CONTAINS(out, "1 device node now records the processor");
    TH_ASSERT_CONTAINS(out, "left 'gpu' as it is: not a CPU device");
    free(out);
    cJSON *after = NULL;
    TH_ASSERT_OK(tsr_db_load(db_path, &after)); /* sealed: it validates */
    const cJSON *devs = cJSON_GetObjectItem(after, "devices");
    assert_null(cJSON_GetObjectItem(devs, "mine"));
    const cJSON *moved = cJSON_GetObjectItem(devs, "mine|Vendor family 9 model 3");
    assert_non_null(moved);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(moved, "cpu")), "Vendor family 9 model 3");
    assert_string_equal(hash_of(after, "mine|Vendor family 9 model 3", "gelu", "large"), hash);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(devs, "gpu"), "cpu"));
    assert_non_null(cJSON_GetObjectItem(devs, "other")); /* another device */
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(devs, "other"), "cpu"));
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(devs, "recorded"), "cpu")),
                        "Vendor family 1 model 1"); /* recorded one already */
    cJSON_Delete(after);
    /* the entry tuned on "another processor" of this device still serves it, as a sibling's */
    tsr_config_info ci = lookup_fresh("gelu", "large");
    assert_int_equal(ci.source, TSR_CONFIG_TUNED_SAME_VENDOR);
    TH_ASSERT_CONTAINS(ci.origin, "Vendor family 9 model 3, another processor");
    /* a missing file is refused, never made */
    snprintf(args, sizeof args, "--set-cpu 'Vendor family 1 model 1' --device x '%s/none.json'", dir);
    assert_int_equal(run_tool(args, &out), 1);
    free(out);
    snprintf(args, sizeof args, "%s/none.json", dir);
    assert_int_not_equal(access(args, F_OK), 0);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_restamp RESTAMP_DB SOURCE_CL_DIR\n");
        return 2;
    }
    tool = argv[1];
    source_cl = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(only_current_entries_move, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_input_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(keep_leaves_matching_entries_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(keep_class_and_device_limit_the_move, setup, teardown),
        cmocka_unit_test_setup_teardown(set_cpu_records_the_processor, setup, teardown),
    };
    return TH_RUN(tests);
}
