/* Platforms beside PoCL: how devices are classed by their lanes, what makes a device unusable,
 * tuning entries that never cross from one OpenCL implementation to another, vendor files that
 * do not load, and (TSR_TEST_MODE=rusticl) the tuner on Mesa rusticl.
 * TSR_TEST_MODE selects the cases a run can check:
 *   (unset)        synthetic device descriptions only: no device needed
 *   bad-icd        OCL_ICD_VENDORS holds broken vendor files beside PoCL's
 *   bad-icd-only   OCL_ICD_VENDORS holds only broken vendor files
 *   rusticl        OCL_ICD_VENDORS holds rusticl's and PoCL's vendor files, RUSTICL_ENABLE=llvmpipe */
#include "harness.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool mode_is(const char *mode) {
    const char *m = getenv("TSR_TEST_MODE");
    return m && strcmp(m, mode) == 0;
}

/* A healthy CPU device as PoCL describes one. */
static tsr_device_info pocl_cpu(void) {
    tsr_device_info info;
    memset(&info, 0, sizeof info);
    info.type = TSR_DEVICE_CPU;
    strcpy(info.platform_name, "Portable Computing Language");
    strcpy(info.vendor, "AuthenticAMD");
    strcpy(info.name, "cpu-haswell-AMD EPYC");
    strcpy(info.driver_version, "3.1");
    strcpy(info.opencl_c_version, "OpenCL C 1.2 PoCL");
    info.compute_units = 2;
    info.global_mem_bytes = info.max_alloc_bytes = 1u << 30;
    info.max_work_group_size = info.max_work_item_sizes[0] = 4096;
    info.preferred_vector_width[4] = info.native_vector_width[4] = 8;
    info.available = true;
    return info;
}

/* The same CPU under another implementation, which reports the same vendor and name. */
static tsr_device_info rusticl_cpu(void) {
    tsr_device_info info = pocl_cpu();
    strcpy(info.platform_name, "rusticl");
    info.preferred_vector_width[4] = info.native_vector_width[4] = 1;
    return info;
}

static void lanes_from_vector_widths(void **state) {
    (void)state;
    tsr_device_info pocl = pocl_cpu(), rusticl = rusticl_cpu();
    assert_int_equal(tsr_device_lanes(&pocl), TSR_LANES_IN_ITEM);
    assert_int_equal(tsr_device_lanes(&rusticl), TSR_LANES_ACROSS_ITEMS);
    pocl.native_vector_width[4] = 1; /* one of the two above 1 still means vectors in the item */
    assert_int_equal(tsr_device_lanes(&pocl), TSR_LANES_IN_ITEM);
}

/* On a CPU whose lanes run work-items (llvmpipe), every op's default in every class is legal
 * there and differs from the PoCL-like CPU's (the rows keyed by lanes are found). */
static void lane_defaults_legal(void **state) {
    (void)state;
    static tsr_device simt, simd;
    simt.info = rusticl_cpu();
    simd.info = pocl_cpu();
    simt.info.local_mem_bytes = simd.info.local_mem_bytes = 32 * 1024;
    simt.info.max_work_item_sizes[1] = simt.info.max_work_item_sizes[2] = 1024;
    simd.info.max_work_item_sizes[1] = simd.info.max_work_item_sizes[2] = 1024;
    simt.info.max_work_group_size = simt.info.max_work_item_sizes[0] = 1024;
    for (const tsr_op *const *op = tsr_ops; *op; ++op) {
        bool differs = false;
        for (int c = 0; tsr_op_class_list(*op)[c]; ++c) {
            tsr_config a, b;
            tsr_op_default_config(*op, &simt, tsr_op_class_list(*op)[c], &a);
            tsr_op_default_config(*op, &simd, tsr_op_class_list(*op)[c], &b);
            char text[256];
            tsr_config_format(*op, &a, text, sizeof text);
            if (!(*op)->config_ok(&simt, NULL, &a)) fail_msg("%s/%s: default %s is not legal on llvmpipe", (*op)->name, tsr_op_class_list(*op)[c], text);
            differs |= memcmp(&a, &b, sizeof a) != 0;
        }
        if ((*op)->defaults && !differs) fail_msg("%s: llvmpipe gets the PoCL CPU defaults", (*op)->name);
    }
}

static void unusable_devices_named(void **state) {
    (void)state;
    tsr_device_info info = pocl_cpu();
    assert_null(tsr_device_unusable_reason(&info));
    info.compute_units = 0;
    TH_ASSERT_CONTAINS(tsr_device_unusable_reason(&info), "zero compute units");
    info = pocl_cpu();
    info.global_mem_bytes = 0;
    TH_ASSERT_CONTAINS(tsr_device_unusable_reason(&info), "zero global memory");
    info = pocl_cpu();
    info.max_alloc_bytes = 0;
    TH_ASSERT_CONTAINS(tsr_device_unusable_reason(&info), "zero maximum allocation");
    info = pocl_cpu();
    info.available = false;
    TH_ASSERT_CONTAINS(tsr_device_unusable_reason(&info), "unavailable");
    info = pocl_cpu();
    info.max_work_group_size = 0;
    TH_ASSERT_CONTAINS(tsr_device_unusable_reason(&info), "work-group");
}

/* A database holding one GEMM entry tuned on `info`. */
static cJSON *db_with_entry(const tsr_device_info *info, const char *hash) {
    cJSON *root = tsr_db_new();
    cJSON *dev = tsr_db_device_node(root, info);
    assert_non_null(dev);
    cJSON *entry = cJSON_AddObjectToObject(cJSON_AddObjectToObject(cJSON_GetObjectItem(dev, "ops"), "gemm"), "large");
    cJSON *config = cJSON_AddObjectToObject(entry, "config"); /* every parameter, at its declared default */
    const tsr_op *gemm = tsr_find_op("gemm");
    for (int p = 0; p < gemm->nparams; ++p) cJSON_AddNumberToObject(config, gemm->params[p].name, gemm->params[p].default_value);
    cJSON_AddNumberToObject(entry, "gflops", 100.0);
    cJSON_AddStringToObject(entry, "source_hash", hash);
    cJSON_AddStringToObject(entry, "date", "2026-01-01");
    return root;
}

static int find_tier(const cJSON *root, const tsr_device_info *info) {
    const cJSON *entry;
    const char *key;
    char notes[256] = "";
    return tsr_db_find(root, info, "gemm", "large", "0123456789abcdef", &entry, &key, notes, sizeof notes, NULL);
}

static void tuning_never_crosses_platforms(void **state) {
    (void)state;
    tsr_device_info pocl = pocl_cpu(), rusticl = rusticl_cpu();
    cJSON *root = db_with_entry(&pocl, "0123456789abcdef");
    assert_int_equal(find_tier(root, &pocl), 1);
    tsr_device_info other_driver = pocl;
    strcpy(other_driver.driver_version, "4.0");
    assert_int_equal(find_tier(root, &other_driver), 2);
    tsr_device_info sibling = pocl; /* another AVX2 CPU of the same vendor, same platform */
    strcpy(sibling.name, "cpu-skylake-AMD EPYC");
    assert_int_equal(find_tier(root, &sibling), 6);
    /* Same vendor, name and type, another implementation: no tier at all. */
    assert_int_equal(find_tier(root, &rusticl), 0);

    /* An import (tsr_tuning_db_import merges files like this) keeps the entry under PoCL's key,
     * so it still does not apply on rusticl. */
    cJSON *mine = tsr_db_new();
    assert_int_equal(tsr_db_merge(mine, root), 1);
    assert_int_equal(find_tier(mine, &rusticl), 0);
    assert_int_equal(find_tier(mine, &pocl), 1);
    cJSON_Delete(mine);
    cJSON_Delete(root);
}

/* Sibling devices (same platform, vendor and type) share tuning only within one instruction
 * set: an entry tuned on the same LLVM target ranks first, then one of the same preferred float
 * vector width, then one of unknown ISA; an AVX2 entry never reaches an AVX-512 device (its tiles
 * are sized for 16 registers of 8 floats), and the lookup says why it passed it over. */
static void tuning_siblings_follow_the_isa(void **state) {
    (void)state;
    const char *target = NULL;
    assert_int_equal(tsr_llvm_target_of_name("pthread-haswell-AMD EPYC", &target), 8);
    assert_string_equal(target, "haswell");
    assert_int_equal(tsr_llvm_target_of_name("pthread-skylake-avx512-Intel(R) Xeon(R)", &target), 16);
    assert_string_equal(target, "skylake-avx512"); /* the longest target, not "skylake" */
    assert_int_equal(tsr_llvm_target_of_name("cpu-skylake-Intel(R) Core(TM)", &target), 8);
    assert_string_equal(target, "skylake");
    assert_int_equal(tsr_llvm_target_of_name("pthread-znver4", &target), 16);
    assert_int_equal(tsr_llvm_target_of_name("pthread-x86-64-v3-AMD EPYC", &target), 8); /* not plain x86-64 */
    assert_string_equal(target, "x86-64-v3");
    assert_int_equal(tsr_llvm_target_of_name("pthread-x86-64-v4", &target), 16);
    assert_int_equal(tsr_llvm_target_of_name("pthread-x86-64-AMD", &target), 4);
    assert_int_equal(tsr_llvm_target_of_name("pthread-skylakefoo-X", &target), 0); /* not a target */
    assert_null(target);
    assert_int_equal(tsr_llvm_target_of_name("NVIDIA H100 80GB HBM3", &target), 0);

    tsr_device_info haswell = pocl_cpu(); /* cpu-haswell-AMD EPYC, float width 8 */
    tsr_device_info avx512 = pocl_cpu();
    strcpy(avx512.name, "cpu-skylake-avx512-AMD EPYC");
    avx512.preferred_vector_width[4] = avx512.native_vector_width[4] = 16;
    tsr_device_info haswell2 = haswell; /* the same target, another model */
    strcpy(haswell2.name, "cpu-haswell-AMD EPYC 7B12");

    cJSON *root = db_with_entry(&haswell, "0123456789abcdef");
    const cJSON *node = cJSON_GetObjectItem(root, "devices")->child;
    assert_int_equal(cJSON_GetObjectItem(node, "float_width")->valueint, 8); /* recorded when written */
    assert_int_equal(find_tier(root, &haswell2), 5);
    const cJSON *entry;
    const char *key;
    char notes[512] = "";
    assert_int_equal(tsr_db_find(root, &avx512, "gemm", "large", "0123456789abcdef", &entry, &key, notes, sizeof notes, NULL), 0);
    assert_null(entry);
    TH_ASSERT_CONTAINS(notes, "another instruction set (float vector width 8, here 16)");
    /* A node written before nodes recorded their width: the name's target still tells. */
    cJSON_DeleteItemFromObject((cJSON *)node, "float_width");
    assert_int_equal(find_tier(root, &avx512), 0);
    assert_int_equal(find_tier(root, &haswell2), 5);
    /* Neither a width nor a known target: usable, but after every known-alike sibling. */
    cJSON *unknown = db_with_entry(&haswell, "0123456789abcdef");
    cJSON *unode = cJSON_GetObjectItem(unknown, "devices")->child;
    cJSON_DeleteItemFromObject(unode, "float_width");
    cJSON_ReplaceItemInObject(unode, "name", cJSON_CreateString("cpu-futurecore-AMD EPYC"));
    assert_int_equal(find_tier(unknown, &avx512), 7);
    assert_int_equal(find_tier(unknown, &haswell), 7);
    cJSON_Delete(unknown);

    /* Two siblings, the AVX2 one listed first: an AVX-512 device takes the AVX-512 entry, an
     * AVX2 device the AVX2 one, whatever the order. */
    tsr_device_info xeon = avx512;
    strcpy(xeon.name, "cpu-skylake-avx512-Intel Xeon");
    cJSON *both = db_with_entry(&haswell, "0123456789abcdef");
    cJSON *other = db_with_entry(&xeon, "0123456789abcdef");
    cJSON *other_config = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(other, "devices")->child, "ops"), "gemm"),
                            "large"),
        "config");
    cJSON_ReplaceItemInObject(other_config, "MWI", cJSON_CreateNumber(8));
    assert_int_equal(tsr_db_merge(both, other), 1);
    notes[0] = '\0';
    assert_int_equal(tsr_db_find(both, &avx512, "gemm", "large", "0123456789abcdef", &entry, &key, notes, sizeof notes, NULL), 5);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(entry, "config"), "MWI")->valueint, 8);
    assert_int_equal(tsr_db_find(both, &haswell2, "gemm", "large", "0123456789abcdef", &entry, &key, notes, sizeof notes, NULL), 5);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(entry, "config"), "MWI")->valueint, 1);
    /* Rates decide between entries for one source and one problem only: a newer entry measured on
     * another problem (a class re-aimed at another shape) replaces a faster old one, an older one
     * does not, and on the same problem the faster stays. */
    cJSON *base = db_with_entry(&haswell, "0123456789abcdef"), *moved = db_with_entry(&haswell, "0123456789abcdef");
    cJSON *be = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(base, "devices")->child, "ops"), "gemm"), "large");
    cJSON *me = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(moved, "devices")->child, "ops"), "gemm"), "large");
    cJSON_AddStringToObject(be, "problem", "256x256x256");
    cJSON_AddStringToObject(me, "problem", "1024x196x256");
    cJSON_ReplaceItemInObject(me, "gflops", cJSON_CreateNumber(60.0));
    assert_int_equal(tsr_db_merge(base, moved), 0); /* the same date: not newer */
    cJSON_ReplaceItemInObject(me, "date", cJSON_CreateString("2026-02-01"));
    assert_int_equal(tsr_db_merge(base, moved), 1);
    be = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(base, "devices")->child, "ops"), "gemm"), "large");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(be, "problem")), "1024x196x256");
    cJSON_ReplaceItemInObject(me, "gflops", cJSON_CreateNumber(50.0));
    cJSON_ReplaceItemInObject(me, "date", cJSON_CreateString("2026-03-01"));
    assert_int_equal(tsr_db_merge(base, moved), 0); /* same problem now, slower: kept out */
    cJSON_Delete(base);
    cJSON_Delete(moved);
    /* A merge teaches an older node of the same device its width. */
    cJSON *old = db_with_entry(&haswell, "0123456789abcdef");
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(old, "devices")->child, "float_width");
    cJSON *fresh = db_with_entry(&haswell, "fedcba9876543210");
    tsr_db_merge(old, fresh);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(old, "devices")->child, "float_width")->valueint, 8);
    cJSON_Delete(old);
    cJSON_Delete(fresh);
    cJSON_Delete(other);
    cJSON_Delete(both);
    cJSON_Delete(root);
}

/* One entry's MWI for `info` through tsr_db_find, and the tier it came from (0: none). */
static int find_mwi(const cJSON *root, const tsr_device_info *info, int *mwi) {
    const cJSON *entry = NULL;
    const char *key;
    char notes[256] = "";
    int tier = tsr_db_find(root, info, "gemm", "large", "0123456789abcdef", &entry, &key, notes, sizeof notes, NULL);
    *mwi = entry ? cJSON_GetObjectItem(cJSON_GetObjectItem(entry, "config"), "MWI")->valueint : 0;
    return tier;
}

/* A database of one entry tuned on `info` whose MWI is `mwi`. */
static cJSON *db_with_mwi(const tsr_device_info *info, int mwi) {
    cJSON *root = db_with_entry(info, "0123456789abcdef");
    cJSON *entry = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "devices")->child, "ops"), "gemm"), "large");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(entry, "config"), "MWI", cJSON_CreateNumber(mwi));
    return root;
}

/* Two processors one CPU driver names alike (PoCL: "pthread-skylake-avx512-AMD EPYC" for a Zen 4
 * and a Zen 5 behind a hypervisor) keep their entries apart: each takes its own first, whatever
 * the order in the file; the other's is a sibling of the same LLVM target (tier 5), still used
 * where this processor has none; a node that does not record its processor (written before
 * nodes did) ranks after this processor's own and before any other processor's. */
static void tuning_keeps_processors_apart(void **state) {
    (void)state;
    tsr_device_info zen4 = pocl_cpu(), zen5 = pocl_cpu(), unknown = pocl_cpu();
    strcpy(zen4.name, "pthread-skylake-avx512-AMD EPYC");
    zen4.preferred_vector_width[4] = zen4.native_vector_width[4] = 16;
    zen5 = unknown = zen4;
    strcpy(zen4.host_cpu, "AuthenticAMD family 25 model 17");
    strcpy(zen5.host_cpu, "AuthenticAMD family 26 model 2");

    cJSON *db = db_with_mwi(&zen5, 5);
    const cJSON *node = cJSON_GetObjectItem(db, "devices")->child;
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(node, "cpu")), zen5.host_cpu); /* recorded */
    TH_ASSERT_CONTAINS(node->string, "|AuthenticAMD family 26 model 2"); /* and in the key */
    char why[256];
    assert_true(tsr_db_seal(db) == TSR_SUCCESS && tsr_db_validate(db, why, sizeof why));
    int mwi;
    assert_int_equal(find_mwi(db, &zen5, &mwi), 1);
    assert_int_equal(find_mwi(db, &zen4, &mwi), 5); /* another processor: a sibling */
    assert_int_equal(mwi, 5);
    tsr_device_info zen4_driver = zen4;
    strcpy(zen4_driver.driver_version, "4.0");
    assert_int_equal(find_mwi(db, &zen4_driver, &mwi), 5);

    cJSON *mine = db_with_mwi(&zen4, 4); /* now the Zen 4 has its own */
    assert_int_equal(tsr_db_merge(db, mine), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(db, "devices")), 2);
    assert_int_equal(find_mwi(db, &zen4, &mwi), 1);
    assert_int_equal(mwi, 4);
    assert_int_equal(find_mwi(db, &zen5, &mwi), 1);
    assert_int_equal(mwi, 5);
    assert_int_equal(find_mwi(db, &zen4_driver, &mwi), 2);
    assert_int_equal(mwi, 4);
    /* the other order in the file: the same answers */
    cJSON *flipped = db_with_mwi(&zen4, 4), *theirs = db_with_mwi(&zen5, 5);
    assert_int_equal(tsr_db_merge(flipped, theirs), 1);
    assert_int_equal(find_mwi(flipped, &zen5, &mwi), 1);
    assert_int_equal(mwi, 5);
    assert_int_equal(find_mwi(flipped, &zen4, &mwi), 1);
    assert_int_equal(mwi, 4);

    /* A node without "cpu": this device, processor unknown: after the Zen 4's own, before the Zen 5's. */
    cJSON *legacy = db_with_mwi(&unknown, 3);
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(legacy, "devices")->child, "cpu"));
    assert_int_equal(find_mwi(legacy, &zen4, &mwi), 3);
    assert_int_equal(find_mwi(legacy, &zen4_driver, &mwi), 4);
    assert_int_equal(tsr_db_merge(legacy, theirs), 1);
    assert_int_equal(find_mwi(legacy, &zen4, &mwi), 3);
    assert_int_equal(mwi, 3);
    assert_int_equal(tsr_db_merge(legacy, mine), 1);
    assert_int_equal(find_mwi(legacy, &zen4, &mwi), 1);
    assert_int_equal(mwi, 4);
    assert_int_equal(tsr_db_count_for_device(legacy, &zen4), 2);  /* its own and the unknown one */
    assert_int_equal(tsr_db_count_for_device(theirs, &zen4), 0);  /* another processor's */
    /* A device that knows no processor (not a CPU, or not x86) takes an entry that names one as a
     * sibling only. */
    assert_int_equal(find_mwi(theirs, &unknown, &mwi), 5);

    /* A file whose node says "cpu" but not as a string is refused. */
    cJSON *bad = db_with_mwi(&zen4, 4);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(bad, "devices")->child, "cpu", cJSON_CreateNumber(25));
    assert_true(tsr_db_seal(bad) == TSR_SUCCESS);
    assert_false(tsr_db_validate(bad, why, sizeof why));
    TH_ASSERT_CONTAINS(why, "\"cpu\" is not a string");
    cJSON_Delete(bad);
    cJSON_Delete(legacy);
    cJSON_Delete(flipped);
    cJSON_Delete(theirs);
    cJSON_Delete(mine);
    cJSON_Delete(db);
}

/* The processor of a CPU device is read from the processor itself on x86 (the vendor string,
 * family and model), and left empty for every other device. */
static void host_processor_named(void **state) {
    (void)state;
    char cpu[TSR_INFO_STR] = "poison";
    tsr_host_cpu_signature(cpu, sizeof cpu);
#if defined(__x86_64__) || defined(__i386__)
    assert_true(strncmp(cpu, "GenuineIntel family ", 20) == 0 || strncmp(cpu, "AuthenticAMD family ", 20) == 0 ||
                strstr(cpu, " family ") != NULL);
    TH_ASSERT_CONTAINS(cpu, " model ");
    char small[8] = "poison";
    tsr_host_cpu_signature(small, sizeof small); /* cut, terminated */
    assert_int_equal(strlen(small), 7);
#else
    assert_string_equal(cpu, "");
#endif
    tsr_device_info *infos = NULL;
    size_t n = 0;
    if (tsr_discover(&infos, &n) != TSR_SUCCESS) return; /* no platform: nothing more to check */
    for (size_t i = 0; i < n; ++i) {
        if (infos[i].type == TSR_DEVICE_CPU) assert_string_equal(infos[i].host_cpu, cpu);
        else assert_string_equal(infos[i].host_cpu, "");
    }
    tsr_free(infos);
}

/* Defaults follow the ISA too: a PoCL CPU preferring 16-float vectors (AVX-512) gets GEMM tiles
 * for 32 registers, legal there and not on an AVX2 CPU; AVX2 keeps its own. */
static void gemm_defaults_follow_the_isa(void **state) {
    (void)state;
    static tsr_device avx2, avx512;
    avx2.info = pocl_cpu();
    avx512.info = pocl_cpu();
    strcpy(avx512.info.name, "cpu-skylake-avx512-Intel Xeon");
    avx512.info.preferred_vector_width[4] = avx512.info.native_vector_width[4] = 16;
    avx2.info.local_mem_bytes = avx512.info.local_mem_bytes = 32 * 1024;
    avx2.info.max_work_item_sizes[1] = avx512.info.max_work_item_sizes[1] = 4096;
    const tsr_op *gemm = tsr_find_op("gemm");
    for (int c = 0; tsr_op_class_list(gemm)[c]; ++c) {
        tsr_config a, b;
        tsr_op_default_config(gemm, &avx2, tsr_op_class_list(gemm)[c], &a);
        tsr_op_default_config(gemm, &avx512, tsr_op_class_list(gemm)[c], &b);
        char ta[256], tb[256];
        tsr_config_format(gemm, &a, ta, sizeof ta);
        tsr_config_format(gemm, &b, tb, sizeof tb);
        if (!gemm->config_ok(&avx2, NULL, &a)) fail_msg("%s: AVX2 default %s not legal", tsr_op_class_list(gemm)[c], ta);
        if (!gemm->config_ok(&avx512, NULL, &b)) fail_msg("%s: AVX-512 default %s not legal", tsr_op_class_list(gemm)[c], tb);
        if (strcmp(tsr_op_class_list(gemm)[c], "large") == 0) {
            TH_ASSERT_CONTAINS(tb, "MWI=8 VW=16 NVW=2");
            assert_false(gemm->config_ok(&avx2, NULL, &b)); /* 256 accumulators spill 16 registers */
            /* AVX-512's widest tile, 28 accumulators, is searched there only; 32 are refused */
            tsr_config w = b; /* the large class's AVX-512 default, with these over it */
            assert_int_equal(tsr_config_parse(gemm, "MWI=14 VW=16 NVW=2 PACKA=1 PACKB=1", "test", &w), TSR_SUCCESS);
            assert_true(gemm->config_ok(&avx512, NULL, &w));
            assert_false(gemm->config_ok(&avx2, NULL, &w));
            assert_int_equal(tsr_config_parse(gemm, "MWI=8 VW=16 NVW=4 PACKA=1 PACKB=1", "test", &w), TSR_SUCCESS);
            assert_false(gemm->config_ok(&avx512, NULL, &w)); /* 32 accumulators */
        }
    }
}

/* A kernel variant the driver cannot compile (here: gemm.cl from TSR_KERNEL_DIR refuses MWI=8
 * with #error, as a compiler bug would) is named in a warning and the launch runs the op's
 * plainest legal configuration instead, with a right answer. */
static void build_failure_falls_back(void **state) {
    (void)state;
    char dir[512];
    th_tempdir(dir, sizeof dir);
    for (const tsr_embedded_source *src = tsr_embedded_sources; src->name; ++src) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s.cl", dir, src->name);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        if (strcmp(src->name, "gemm") == 0) fputs("#if MWI == 8\n#error \"tessera test: MWI=8 does not build\"\n#endif\n", f);
        fwrite(src->text, 1, src->length, f);
        fclose(f);
    }
    setenv("TSR_KERNEL_DIR", dir, 1);
    tsr_device *dev = NULL;
    TH_ASSERT_OK(tsr_device_open(NULL, &dev));
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", "MWI=8 VW=1 NVW=1 KU=1 WGM=4 WGN=4 PACKA=0 PACKB=0"));
    th_expect_build_fallback(); /* the case's subject */
    enum { M = 13, N = 11, K = 7 };
    float a[M * K], b[K * N], c[M * N];
    double ref[M * N];
    th_fill_uniform(a, M * K, -1, 1);
    th_fill_uniform(b, K * N, -1, 1);
    cl_mem da = th_buffer_from(dev, a, M * K), db = th_buffer_from(dev, b, K * N), dc = th_buffer(dev, M * N);
    TH_ASSERT_OK(tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, M, N, K, 1.0f, da, 0, K, db, 0, N, 0.0f, dc, 0,
                           N, NULL, NULL));
    const char *warning = tsr_last_warning();
    TH_ASSERT_CONTAINS(warning, "does not build on device");
    TH_ASSERT_CONTAINS(warning, "kernel source 'gemm'");
    TH_ASSERT_CONTAINS(warning, tsr_device_get_info(dev)->platform_name);
    TH_ASSERT_CONTAINS(warning, "tessera test: MWI=8 does not build"); /* the build log */
    TH_ASSERT_CONTAINS(warning, "falling back to 'MWI=1");
    th_read(dev, dc, c, M * N);
    th_ref_sgemm(1, 0, 0, M, N, K, 1.0, a, K, b, N, 0.0, NULL, ref, N);
    double err = th_rel_error_matrix(1, M, N, c, ref, N);
    if (!(err < 1e-5)) fail_msg("relative error %g after the fall back", err);
    clReleaseMemObject(da), clReleaseMemObject(db), clReleaseMemObject(dc);
    tsr_device_close(dev);
    unsetenv("TSR_KERNEL_DIR");
    th_remove_tree(dir);
}

/* ---- TSR_TEST_MODE=bad-icd and bad-icd-only ---- */

static void broken_vendor_files_named(void **state) {
    (void)state;
    char *text = NULL;
    TH_ASSERT_OK(tsr_icd_problems(&text));
    TH_ASSERT_CONTAINS(text, "missing.icd");
    TH_ASSERT_CONTAINS(text, "does not load");
    TH_ASSERT_CONTAINS(text, "not-opencl.icd");
    TH_ASSERT_CONTAINS(text, "is not an OpenCL ICD");
    TH_ASSERT_CONTAINS(text, "control.icd: the library path holds control characters");
    TH_ASSERT_CONTAINS(text, "a vendor file whose name holds control characters");
    if (strchr(text, '\x1b')) fail_msg("an escape character from a vendor file reached the text: %s", text);
    if (strstr(text, "pocl.icd")) fail_msg("PoCL's vendor file is reported broken: %s", text);
    tsr_free(text);
    TH_ASSERT_STATUS(tsr_icd_problems(NULL), TSR_ERR_INVALID_ARG);
}

static void other_platforms_still_work(void **state) {
    (void)state;
    tsr_device_info *infos = NULL;
    size_t n = 0;
    TH_ASSERT_OK(tsr_discover(&infos, &n));
    assert_true(n >= 1);
    tsr_free(infos);
    tsr_device *dev = NULL;
    TH_ASSERT_OK(tsr_device_open("cpu", &dev));
    tsr_device_close(dev);
}

static void only_broken_vendor_files(void **state) {
    (void)state;
    tsr_device_info *infos = NULL;
    size_t n = 0;
    TH_ASSERT_STATUS(tsr_discover(&infos, &n), TSR_ERR_NO_PLATFORM);
    TH_ASSERT_CONTAINS(tsr_last_error(), "missing.icd");
    TH_ASSERT_CONTAINS(tsr_last_error(), "is not an OpenCL ICD");
    tsr_device *dev = NULL;
    TH_ASSERT_STATUS(tsr_device_open(NULL, &dev), TSR_ERR_NO_PLATFORM);
    assert_null(dev);
}

/* ---- TSR_TEST_MODE=rusticl: both implementations of this CPU ---- */

static void pocl_entry_not_used_on_rusticl(void **state) {
    (void)state;
    char dir[512], path[600];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tuning.json", dir);
    tsr_device *pocl = NULL, *rusticl = NULL;
    TH_ASSERT_OK(tsr_device_open("Portable Computing Language", &pocl));
    TH_ASSERT_OK(tsr_device_open("rusticl", &rusticl));
    char hash[17];
    TH_ASSERT_OK(tsr_op_source_hash(&tsr_op_gemm, hash));
    cJSON *root = db_with_entry(tsr_device_get_info(pocl), hash);
    TH_ASSERT_OK(tsr_db_seal(root)); /* as tessera writes every file */
    char *text = cJSON_PrintUnformatted(root);
    th_write_file(path, text, strlen(text));
    free(text);
    cJSON_Delete(root);
    size_t merged = 0; /* into a second file, the way `tessera tune --import` does */
    char imported[600];
    snprintf(imported, sizeof imported, "%s/imported.json", dir);
    TH_ASSERT_OK(tsr_tuning_db_import(imported, path, &merged));
    assert_int_equal(merged, 1);
    char *saved_db = getenv("TSR_TUNING_DB") ? strdup(getenv("TSR_TUNING_DB")) : NULL;
    setenv("TSR_BUILTIN_TUNING", "off", 1);
    setenv("TSR_TUNING_DB", imported, 1);
    tsr_device_close(pocl);
    tsr_device_close(rusticl); /* reopened: the database is read per device */
    TH_ASSERT_OK(tsr_device_open("Portable Computing Language", &pocl));
    TH_ASSERT_OK(tsr_device_open("rusticl", &rusticl));
    tsr_config_info info;
    TH_ASSERT_OK(tsr_config_lookup(pocl, "gemm", "large", &info));
    if (info.source != TSR_CONFIG_TUNED) fail_msg("PoCL resolved gemm/large to %s: %s", tsr_config_source_str(info.source), info.origin);
    TH_ASSERT_OK(tsr_config_lookup(rusticl, "gemm", "large", &info));
    if (info.source != TSR_CONFIG_BUILTIN_DEFAULT) fail_msg("rusticl resolved gemm/large to %s: %s", tsr_config_source_str(info.source), info.origin);
    tsr_device_close(pocl);
    tsr_device_close(rusticl);
    unsetenv("TSR_BUILTIN_TUNING");
    if (saved_db) setenv("TSR_TUNING_DB", saved_db, 1);
    else unsetenv("TSR_TUNING_DB");
    free(saved_db);
    th_remove_tree(dir);
}

/* The tuner on a tiny budget: two small GELU candidates, measured. rusticl's event timestamps
 * are unusable, so this needs the host-clock timing fallback. */
static void tuner_picks_by_measured_time(void **state) {
    (void)state;
    char dir[512], path[600];
    th_tempdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tuning.json", dir);
    tsr_device *dev = NULL;
    TH_ASSERT_OK(tsr_device_open("rusticl", &dev));
    tsr_tune_options options = {.budget_seconds = 240, .budget_evaluations = 2, .seed = 1,
                                .space = "VW=1 VPT=1,4 WG=64 INTERLEAVE=1", .classes = "small", .db_path = path};
    tsr_tune_result result;
    size_t n = 0;
    TH_ASSERT_OK(tsr_tune(dev, "gelu", &options, &result, 1, &n));
    assert_int_equal(n, 1);
    fprintf(stderr, "# rusticl gelu/small: best %s at %.3f %s (default %.3f), %d evaluated, %d failed builds\n",
            result.best_config, result.best_gflops, result.unit, result.default_gflops, result.evaluated,
            result.build_failures);
    assert_true(result.evaluated >= 1);
    assert_int_equal(result.wrong_results, 0);
    /* A rate from real timings: finite, positive, and far below any memory system's roof. */
    assert_true(isfinite(result.best_gflops) && result.best_gflops > 0 && result.best_gflops < 1000);
    assert_true(result.best_config[0] != '\0');
    tsr_device_close(dev);
    th_remove_tree(dir);
}

int main(void) {
    if (mode_is("bad-icd")) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(broken_vendor_files_named),
                                           cmocka_unit_test(other_platforms_still_work)};
        return TH_RUN(tests);
    }
    if (mode_is("bad-icd-only")) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(only_broken_vendor_files)};
        return TH_RUN(tests);
    }
    if (mode_is("rusticl")) {
        const struct CMUnitTest tests[] = {cmocka_unit_test(pocl_entry_not_used_on_rusticl),
                                           cmocka_unit_test(tuner_picks_by_measured_time)};
        return TH_RUN(tests);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lanes_from_vector_widths),
        cmocka_unit_test(lane_defaults_legal),
        cmocka_unit_test(unusable_devices_named),
        cmocka_unit_test(tuning_never_crosses_platforms),
        cmocka_unit_test(tuning_siblings_follow_the_isa),
        cmocka_unit_test(tuning_keeps_processors_apart),
        cmocka_unit_test(host_processor_named),
        cmocka_unit_test(gemm_defaults_follow_the_isa),
        cmocka_unit_test(build_failure_falls_back),
    };
    return TH_RUN(tests);
}
