/* The op contract, with no device: every op in the table has its descriptor's required fields;
 * built-in defaults parse and format back; the -D flags name every compiled parameter;
 * implementations reset what they do not read and seed searches; and a parameter is declared
 * in one place. */
#include "harness.h"

#include <stdio.h>
#include <string.h>

/* Devices as the defaults and legality rules see them: only their type and limits. */
static tsr_device fake_devices[3];

static int make_devices(void **state) {
    (void)state;
    const tsr_device_type types[3] = {TSR_DEVICE_CPU, TSR_DEVICE_GPU, TSR_DEVICE_ACCELERATOR};
    for (int d = 0; d < 3; ++d) {
        tsr_device_info *info = &fake_devices[d].info;
        info->type = types[d];
        info->max_work_group_size = 1024;
        info->max_work_item_sizes[0] = info->max_work_item_sizes[1] = info->max_work_item_sizes[2] = 1024;
        info->local_mem_bytes = 64 * 1024;
        info->max_alloc_bytes = (cl_ulong)1 << 30;
        info->preferred_vector_width[4] = info->native_vector_width[4] = types[d] == TSR_DEVICE_CPU ? 8 : 1; /* PoCL-like */
    }
    return 0;
}

static bool in_values(const tsr_param_def *param, int value) {
    for (int i = 0; i < param->nvalues; ++i)
        if (param->values[i] == value) return true;
    return false;
}

static void descriptors_have_required_fields(void **state) {
    (void)state;
    int nops = 0;
    for (const tsr_op *const *op = tsr_ops; *op; ++op, ++nops) {
        const tsr_op *o = *op;
        assert_non_null(o->name);
        assert_non_null(o->source_name);
        assert_non_null(o->params);
        assert_true(o->nparams >= 1 && o->nparams <= TSR_MAX_PARAMS);
        for (int p = 0; p < o->nparams; ++p) {
            const tsr_param_def *param = &o->params[p];
            assert_true(param->name && param->name[0]);
            assert_int_equal(tsr_param_index(o, param->name), p); /* names are unique */
            assert_true(param->values && param->nvalues >= 1 && param->nvalues <= 32);
            if (!in_values(param, param->default_value))
                fail_msg("%s: %s's default %d is not one of its values", o->name, param->name, param->default_value);
            assert_true(param->kind == TSR_PARAM_DEFINE || param->kind == TSR_PARAM_HOST);
        }
        assert_non_null(o->classes);
        assert_non_null(o->classes[0]);
        assert_non_null(o->problem_class);
        assert_true(o->ndefaults >= 0 && (o->defaults || o->ndefaults == 0));
        assert_non_null(o->implementations);
        assert_true(o->nimplementations >= 1);
        if (o->nimplementations > 1) {
            /* The choice is stored under a parameter whose values are exactly the implementations. */
            assert_non_null(o->implementation_param);
            int sel = tsr_param_index(o, o->implementation_param);
            assert_true(sel >= 0);
            assert_int_equal(o->params[sel].nvalues, o->nimplementations);
            for (int i = 0; i < o->nimplementations; ++i) assert_true(in_values(&o->params[sel], o->implementations[i].value));
        }
        for (int i = 0; i < o->nimplementations; ++i) {
            const tsr_implementation *impl = &o->implementations[i];
            assert_non_null(impl->name);
            /* Every name an implementation lists is a parameter. */
            char words[256];
            tsr_strlcpy(words, impl->params ? impl->params : "", sizeof words);
            char *save = NULL;
            for (char *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save))
                if (tsr_param_index(o, w) < 0) fail_msg("%s: implementation %s lists no parameter '%s'", o->name, impl->name, w);
        }
        assert_non_null(o->config_ok);
        assert_true(o->program_variants >= 1);
        /* build-binaries' filter leaves no class without a program and no program unwritten */
        for (int c = 0; o->variant_serves_class && tsr_op_class_list(o)[c]; ++c) {
            bool served = false;
            for (int v = 0; v < o->program_variants; ++v)
                served |= o->variant_serves_class(tsr_op_class_list(o)[c], v);
            if (!served) fail_msg("%s: no program variant serves class %s", o->name, tsr_op_class_list(o)[c]);
        }
        for (int v = 0; o->variant_serves_class && v < o->program_variants; ++v) {
            bool used = false;
            for (int c = 0; tsr_op_class_list(o)[c]; ++c)
                used |= o->variant_serves_class(tsr_op_class_list(o)[c], v);
            if (!used) fail_msg("%s: program variant %d serves no class", o->name, v);
        }
        assert_non_null(o->build_options);
        /* the fixture whole, a shape per listed class, and a demo on it */
        assert_true(o->fixture.setup && o->fixture.run && o->fixture.check && o->fixture.work &&
                    o->fixture.describe && o->fixture.free && o->class_shapes);
        for (int c = 0; o->classes[c]; ++c) assert_non_null(o->class_shapes[c]);
        for (const char *const *c = tsr_op_class_list(o); *c; ++c) assert_non_null(tsr_op_class_shape(o, *c));
        assert_non_null(o->demo.title);
        assert_non_null(o->demo.shapes[0]);
        assert_true(o->demo.runs >= 1);
    }
    assert_true(nops >= 4);
}

static void defaults_parse_and_format_back(void **state) {
    (void)state;
    for (const tsr_op *const *op = tsr_ops; *op; ++op) {
        const tsr_op *o = *op;
        /* Every row is valid text over the declared defaults, already normalized. */
        for (int r = 0; r < o->ndefaults; ++r) {
            tsr_config cfg;
            tsr_config_declared(o, &cfg);
            if (tsr_config_parse(o, o->defaults[r].config, "row", &cfg) != TSR_SUCCESS)
                fail_msg("%s: default row %d: %s", o->name, r, tsr_last_error());
            assert_true(tsr_op_is_normal(o, &cfg));
        }
        for (int d = 0; d < 3; ++d)
            for (int c = 0; tsr_op_class_list(o)[c]; ++c) {
                tsr_config cfg, back;
                char text[512], again[512];
                tsr_op_default_config(o, &fake_devices[d], tsr_op_class_list(o)[c], &cfg);
                if (!o->config_ok(&fake_devices[d], NULL, &cfg))
                    fail_msg("%s: the default of class %s is not legal on a %s device", o->name, tsr_op_class_list(o)[c],
                             tsr_device_type_str(fake_devices[d].info.type));
                tsr_config_format(o, &cfg, text, sizeof text);
                tsr_config_declared(o, &back);
                TH_ASSERT_OK(tsr_config_parse(o, text, "formatted", &back));
                assert_memory_equal(&back, &cfg, sizeof cfg);
                tsr_config_format(o, &back, again, sizeof again);
                assert_string_equal(again, text);
            }
    }
}

static void defines_name_every_compiled_parameter(void **state) {
    (void)state;
    for (const tsr_op *const *op = tsr_ops; *op; ++op) {
        const tsr_op *o = *op;
        tsr_config cfg;
        tsr_op_default_config(o, &fake_devices[0], o->classes[0], &cfg);
        char defines[512];
        assert_true(tsr_config_defines(o, &cfg, defines, sizeof defines));
        for (int v = 0; v < o->program_variants; ++v) {
            char options[1024];
            o->build_options(&cfg, v, options, sizeof options);
            for (int p = 0; p < o->nparams; ++p) {
                char flag[64], exact[64];
                snprintf(flag, sizeof flag, "-D%s=", o->params[p].name);
                snprintf(exact, sizeof exact, "-D%s=%d", o->params[p].name, cfg.values[p]);
                bool compiled = o->params[p].kind == TSR_PARAM_DEFINE;
                if (compiled != (strstr(options, flag) != NULL))
                    fail_msg("%s: '%s' %s %s", o->name, options, compiled ? "lacks" : "has", flag);
                if (compiled != (strstr(defines, exact) != NULL))
                    fail_msg("%s: '%s' %s %s", o->name, defines, compiled ? "lacks" : "has", exact);
            }
        }
        /* A buffer too small is reported, not overrun. */
        char small[8];
        assert_false(tsr_config_defines(o, &cfg, small, sizeof small));
        assert_true(strlen(small) < sizeof small);
    }
}

static void implementations_normalize_and_seed(void **state) {
    (void)state;
    const tsr_op *conv = tsr_find_op("conv2d");
    assert_non_null(conv);
    /* Parameters the direct path does not read go back to their declared defaults... */
    tsr_config cfg, canonical;
    tsr_config_declared(conv, &cfg);
    TH_ASSERT_OK(tsr_config_parse(conv, "ALGO=3 MWI=8 VW=4 STAGE=1 KWG=32", "test", &cfg));
    assert_string_equal(tsr_op_implementation(conv, &cfg)->name, "direct");
    assert_false(tsr_op_is_normal(conv, &cfg));
    tsr_op_normalize(conv, &cfg);
    tsr_config_declared(conv, &canonical);
    TH_ASSERT_OK(tsr_config_parse(conv, "ALGO=3", "test", &canonical));
    assert_memory_equal(&cfg, &canonical, sizeof cfg);
    /* ...the implicit kernel keeps its shape, less KWG without staging (the op's own rule). */
    tsr_config_declared(conv, &cfg);
    TH_ASSERT_OK(tsr_config_parse(conv, "ALGO=2 MWI=8 VW=4 STAGE=0 KWG=32", "test", &cfg));
    tsr_op_normalize(conv, &cfg);
    char text[256];
    tsr_config_format(conv, &cfg, text, sizeof text);
    assert_string_equal(text, "ALGO=2 MWI=8 VW=4 STAGE=0 WGM=1 WGN=1 KWG=8");
    /* One seed per implementation, each its built-in shape, for ops with several; none otherwise. */
    for (const tsr_op *const *op = tsr_ops; *op; ++op)
        for (int d = 0; d < 3; ++d) {
            tsr_config seeds[8];
            int n = tsr_op_seeds(*op, &fake_devices[d], (*op)->classes[0], seeds, 8);
            assert_int_equal(n, (*op)->nimplementations > 1 ? (*op)->nimplementations : 0);
            for (int i = 0; i < n; ++i) {
                assert_ptr_equal(tsr_op_implementation(*op, &seeds[i]), &(*op)->implementations[i]);
                assert_true(tsr_op_is_normal(*op, &seeds[i]));
                assert_true((*op)->config_ok(&fake_devices[d], NULL, &seeds[i]));
            }
        }
    tsr_config seeds[3];
    assert_int_equal(tsr_op_seeds(conv, &fake_devices[0], "3x3", seeds, 3), 3);
    tsr_config_format(conv, &seeds[1], text, sizeof text); /* CPUs: the padded implicit form's tile for 3x3 */
    assert_string_equal(text, "ALGO=2 MWI=6 VW=16 STAGE=2 WGM=1 WGN=16 KWG=8");
    /* An implementation without a row for the class starts from its row for another class on this
     * device, not from the declared defaults (the plainest kernel): GEMM's smallm kernel on a CPU's
     * large class takes the small-m row's tile. */
    const tsr_op *gemm = tsr_find_op("gemm");
    assert_non_null(gemm);
    tsr_config gemm_seeds[8];
    int n = tsr_op_seeds(gemm, &fake_devices[0], "large", gemm_seeds, 8);
    bool found = false;
    for (int i = 0; i < n; ++i) {
        tsr_config_format(gemm, &gemm_seeds[i], text, sizeof text);
        if (strstr(text, "KERNEL=2")) {
            found = true;
            TH_ASSERT_CONTAINS(text, "MWI=4 VW=8 NVW=2 KU=4");
        }
    }
    assert_true(found);
}

/* ---- a parameter is declared in one place ---- */

/* A small op's parameters, and the same op after a new parameter: one more line in its list. */
#define SMALL_PARAMS(P) P(TILE, DEFINE, 4, 1, 2, 4, 8) P(GROUP, HOST, 1, 1, 16, 64)
#define GROWN_PARAMS(P) SMALL_PARAMS(P) P(UNROLL, DEFINE, 2, 1, 2, 4)
enum { GROWN_PARAMS(TSR_PARAM_INDEX) GROWN_NPARAMS };
static const tsr_param_def small_params[] = {SMALL_PARAMS(TSR_PARAM_DEF)};
static const tsr_param_def grown_params[] = {GROWN_PARAMS(TSR_PARAM_DEF)};
static const char *const one_class[] = {"any", NULL};
static const tsr_default small_defaults[] = {{TSR_DEVICE_CPU, TSR_LANES_ANY, NULL, "TILE=8 GROUP=16"}};
static const tsr_implementation one_implementation[] = {{.name = "only"}};
static const tsr_op small_op = {.name = "small", .params = small_params, .nparams = TSR_COUNT(small_params),
                                .classes = one_class, .defaults = small_defaults, .ndefaults = 1,
                                .implementations = one_implementation, .nimplementations = 1};
static const tsr_op grown_op = {.name = "grown", .params = grown_params, .nparams = TSR_COUNT(grown_params),
                                .classes = one_class, .defaults = small_defaults, .ndefaults = 1,
                                .implementations = one_implementation, .nimplementations = 1};

static void a_parameter_is_declared_in_one_place(void **state) {
    (void)state;
    char text[128], defines[128];
    tsr_config cfg;
    tsr_op_default_config(&small_op, &fake_devices[0], "any", &cfg);
    tsr_config_format(&small_op, &cfg, text, sizeof text);
    assert_string_equal(text, "TILE=8 GROUP=16");
    assert_true(tsr_config_defines(&small_op, &cfg, defines, sizeof defines));
    assert_string_equal(defines, "-DTILE=8");
    /* The new line alone gives the index, the count, the default, the text and the -D flag. */
    assert_int_equal(GROWN_NPARAMS, 3);
    assert_int_equal(grown_op.nparams, 3);
    assert_int_equal(grown_params[P_UNROLL].nvalues, 3);
    tsr_op_default_config(&grown_op, &fake_devices[0], "any", &cfg);
    assert_int_equal(cfg.values[P_UNROLL], 2);
    tsr_config_format(&grown_op, &cfg, text, sizeof text);
    assert_string_equal(text, "TILE=8 GROUP=16 UNROLL=2");
    assert_true(tsr_config_defines(&grown_op, &cfg, defines, sizeof defines));
    assert_string_equal(defines, "-DTILE=8 -DUNROLL=2");
    TH_ASSERT_OK(tsr_config_parse(&grown_op, "UNROLL=4", "test", &cfg));
    assert_int_equal(cfg.values[P_UNROLL], 4);
    assert_int_equal(tsr_config_parse(&grown_op, "UNROLL=3", "test", &cfg), TSR_ERR_INVALID_ARG);
    TH_ASSERT_CONTAINS(tsr_last_error(), "UNROLL=3 is not in the parameter space");
    /* Other devices get the declared defaults. */
    tsr_op_default_config(&grown_op, &fake_devices[1], "any", &cfg);
    tsr_config_format(&grown_op, &cfg, text, sizeof text);
    assert_string_equal(text, "TILE=4 GROUP=1 UNROLL=2");
}

/* A default row for a class's 16-bit twins (TSR_TWINS_16) serves those twins, not the fp32 class
 * nor other classes' twins, and keeps them off the fp32 class's tuned entries: GELU on a CPU (both
 * forms VW=16 VPT=8 for 16-bit storage; the erf form VW=8 for fp32). */
static void twin_rows_serve_16_bit_classes_only(void **state) {
    (void)state;
    const tsr_device *cpu = &fake_devices[0], *gpu = &fake_devices[1];
    tsr_device simt = fake_devices[0]; /* a CPU that vectorizes across work-items (llvmpipe) */
    simt.info.preferred_vector_width[4] = simt.info.native_vector_width[4] = 1;
    assert_int_equal(tsr_device_lanes(&simt.info), TSR_LANES_ACROSS_ITEMS);
    const int vw = tsr_param_index(&tsr_op_gelu, "VW"), vpt = tsr_param_index(&tsr_op_gelu, "VPT");
    assert_true(vw >= 0 && vpt >= 0);
    tsr_config cfg;
    static const char *const twins[] = {"large-erf-f16", "large-erf-bf16", "small-erf-f16", "small-erf-bf16",
                                        "large-f16",     "large-bf16",     "small-f16",     "small-bf16"};
    for (size_t i = 0; i < sizeof twins / sizeof twins[0]; ++i) {
        assert_true(tsr_op_class_index(&tsr_op_gelu, twins[i]) >= 0);
        tsr_op_default_config(&tsr_op_gelu, cpu, twins[i], &cfg);
        assert_int_equal(cfg.values[vw], 16);
        assert_int_equal(cfg.values[vpt], 8);
        assert_true(tsr_op_has_own_default(&tsr_op_gelu, cpu, twins[i]));
        assert_false(tsr_op_has_own_default(&tsr_op_gelu, gpu, twins[i])); /* the rows are CPU rows */
        assert_false(tsr_op_has_own_default(&tsr_op_gelu, &simt, twins[i])); /* llvmpipe's row comes first */
    }
    tsr_op_default_config(&tsr_op_gelu, cpu, "large-erf", &cfg);
    assert_int_equal(cfg.values[vw], 8);
    static const char *const others[] = {"large-erf", "small-erf", "small", "large"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; ++i)
        assert_false(tsr_op_has_own_default(&tsr_op_gelu, cpu, others[i]));
}

/* The ops list fp32 classes only; their 16-bit twins, tuning shapes and fallbacks are derived from
 * the storage types. Tuning databases key entries by these names: every name written so far keeps
 * its place within its storage's group (a new class comes after its group's others, a new storage
 * type's classes after every group). */
static void class_lists_are_derived_and_keep_their_names(void **state) {
    (void)state;
    static const struct {
        const char *op;
        const char *names[56];
    } expected[] = {
        {"gemm", {"large", "medium", "small", "small-m", "small-n", "batched", "small-m16", "large-f16", "medium-f16",
                  "small-f16", "small-m-f16", "small-n-f16", "batched-f16", "small-m16-f16", "large-bf16",
                  "medium-bf16", "small-bf16", "small-m-bf16", "small-n-bf16", "batched-bf16", "small-m16-bf16"}},
        {"gelu", {"large", "small", "large-erf", "small-erf", "large-f16", "small-f16", "large-erf-f16",
                  "small-erf-f16", "large-bf16", "small-bf16", "large-erf-bf16", "small-erf-bf16"}},
        {"conv2d", {"3x3", "1x1", "strided", "depthwise", "other", "1x1-strided", "1x1-small", "1x1-expand", "stem",
                    "3x3-small", "strided-small", "1x1-strided-small", "1x1-mid", "3x3-wide", "3x3-mid", "strided-mid", "1x1-strided-mid", "3x3-small-wino", "3x3-f16", "1x1-f16", "strided-f16", "depthwise-f16", "other-f16",
                    "1x1-strided-f16", "1x1-small-f16", "1x1-expand-f16", "stem-f16", "3x3-small-f16",
                    "strided-small-f16", "1x1-strided-small-f16", "1x1-mid-f16", "3x3-wide-f16", "3x3-mid-f16", "strided-mid-f16", "1x1-strided-mid-f16", "3x3-small-wino-f16", "3x3-bf16", "1x1-bf16", "strided-bf16", "depthwise-bf16", "other-bf16",
                    "1x1-strided-bf16", "1x1-small-bf16", "1x1-expand-bf16", "stem-bf16", "3x3-small-bf16",
                    "strided-small-bf16", "1x1-strided-small-bf16", "1x1-mid-bf16", "3x3-wide-bf16", "3x3-mid-bf16", "strided-mid-bf16", "1x1-strided-mid-bf16", "3x3-small-wino-bf16"}},
        {"attention", {"long", "short", "long-f16", "short-f16", "long-bf16", "short-bf16"}},
        {"layernorm", {"medium", "narrow", "wide", "medium-f16", "narrow-f16", "wide-f16", "medium-bf16",
                       "narrow-bf16", "wide-bf16"}},
    };
    for (size_t o = 0; o < sizeof expected / sizeof expected[0]; ++o) {
        const char *const *names = tsr_op_classes(expected[o].op);
        assert_non_null(names);
        for (int c = 0; expected[o].names[c]; ++c) {
            if (!names[c]) fail_msg("%s: class %s is missing", expected[o].op, expected[o].names[c]);
            assert_string_equal(names[c], expected[o].names[c]);
        }
    }
    /* every class of the list is unique, and its storage token is the one its name says */
    for (const tsr_op *const *op = tsr_ops; *op; ++op)
        for (const char *const *c = tsr_op_class_list(*op); *c; ++c) {
            assert_int_equal(tsr_op_class_index(*op, *c), (int)(c - tsr_op_class_list(*op)));
            char base[32];
            const char *shape = tsr_op_class_shape(*op, *c);
            if (!tsr_dtype_class_base(*c, base, sizeof base)) continue;
            const char *token = strrchr(shape, ' ') + 1, *suffix = *c + strlen(base) + 1; /* "f16", "f16/f32" */
            if (strncmp(token, suffix, strlen(suffix)) != 0) fail_msg("%s/%s: shape '%s'", (*op)->name, *c, shape);
        }
    const tsr_op *gemm = tsr_find_op("gemm"), *gelu = tsr_find_op("gelu");
    assert_string_equal(tsr_op_class_shape(gemm, "small-n-bf16"), "4096x8x2048 bf16/f32"); /* fp32 C */
    assert_string_equal(tsr_op_class_shape(gelu, "small-erf-f16"), "65539 erf f16");      /* all in f16 */
    assert_string_equal(tsr_op_class_shape(gemm, "large"), "2048x2048x2048");
    assert_null(tsr_op_class_shape(gemm, "large-f32"));
    /* a 16-bit class's nearest class is its listed class's nearest, in the same storage */
    assert_string_equal(tsr_op_nearest_class(gemm, "batched-f16"), "small-f16");
    assert_string_equal(tsr_op_nearest_class(gemm, "batched"), "small");
    assert_null(tsr_op_nearest_class(gemm, "large-bf16"));
    /* a problem's class: its listed class in the storage of its first 16-bit tensor type */
    assert_string_equal(tsr_op_class(gemm, 2, (const tsr_dtype[]){TSR_BF16, TSR_F16, TSR_F32}, 3), "small-f16");
    assert_string_equal(tsr_op_class(gemm, 2, (const tsr_dtype[]){TSR_F32, TSR_BF16, TSR_F32}, 3), "small-bf16");
    assert_string_equal(tsr_op_class(gelu, 3, (const tsr_dtype[]){TSR_F32, TSR_F32}, 2), "small-erf");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(descriptors_have_required_fields),
        cmocka_unit_test(defaults_parse_and_format_back),
        cmocka_unit_test(defines_name_every_compiled_parameter),
        cmocka_unit_test(implementations_normalize_and_seed),
        cmocka_unit_test(a_parameter_is_declared_in_one_place),
        cmocka_unit_test(class_lists_are_derived_and_keep_their_names),
        cmocka_unit_test(twin_rows_serve_16_bit_classes_only),
    };
    return TH_RUN_GROUP(tests, make_devices, NULL);
}
