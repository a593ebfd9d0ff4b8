/* Ahead-of-time binaries: every program a launch can ask for, written with a manifest, for
 * devices without an online compiler. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count_classes(const tsr_op *op) {
    int n = 0;
    while (tsr_op_class_list(op)[n]) ++n;
    return n;
}

/* Is a class's storage among the chosen ones (fp32 classes always)? */
static bool class_chosen(const char *problem_class, const bool chosen[TSR_DTYPE_COUNT]) {
    for (int t = 1; t < TSR_DTYPE_COUNT; ++t)
        if (tsr_dtype_types_serve_class((const tsr_dtype[]){(tsr_dtype)t}, 1, problem_class)) return chosen[t];
    return true;
}

/* One program's binary into dir, and its manifest entry. */
static tsr_status write_program(tsr_device *dev, const char *dir, cJSON *entries, const char *op, const char *source,
                                const char *options, size_t *written) {
    tsr_status status = tsr_program_write_binary(dev, source, options, dir);
    if (status != TSR_SUCCESS) return status;
    cJSON *e = cJSON_CreateObject();
    if (!e || !cJSON_AddStringToObject(e, "op", op) || !cJSON_AddStringToObject(e, "source", source) ||
        !cJSON_AddStringToObject(e, "options", options) || !cJSON_AddItemToArray(entries, e)) {
        cJSON_Delete(e);
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    }
    ++*written;
    return TSR_SUCCESS;
}

tsr_status tsr_build_binaries(tsr_device *dev, const char *dir, size_t *written) {
    return tsr_build_binaries_typed(dev, dir, NULL, 0, written);
}

tsr_status tsr_build_binaries_typed(tsr_device *dev, const char *dir, const tsr_dtype *dtypes, size_t count,
                                    size_t *written) {
    tsr_clear_diagnostics();
    if (!dev || !dir || !*dir || !written)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_build_binaries: device, dir and written must be set");
    *written = 0;
    if (count && !dtypes) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_build_binaries_typed: dtypes is NULL");
    bool chosen[TSR_DTYPE_COUNT] = {[TSR_F32] = true};
    for (size_t i = 0; i < count; ++i) {
        tsr_status st = tsr_dtype_check("tsr_build_binaries_typed: dtypes", dtypes[i]);
        if (st != TSR_SUCCESS) return st;
        chosen[dtypes[i]] = true;
    }
    if (dev->offline)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "device '%s' cannot compile kernels (no online compiler or "
                        "TSR_FORCE_OFFLINE set); build binaries on a device that has one", dev->info.name);
    tsr_status status = tsr_make_dirs(dir);
    if (status != TSR_SUCCESS) return status;
    cJSON *manifest = cJSON_CreateObject();
    if (!manifest) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    cJSON_AddStringToObject(manifest, "tessera_version", TSR_VERSION_STRING);
    cJSON_AddStringToObject(manifest, "device", dev->fingerprint);
    cJSON *entries = cJSON_AddArrayToObject(manifest, "binaries");
    for (const tsr_op *const *op = tsr_ops; *op; ++op) {
        const tsr_op *o = *op;
        /* Per problem class, the configuration launches resolve to (tuned or default) and the
         * built-in default, in every program variant a launch can ask for. */
        for (int variant = 0; variant < 2 * o->program_variants * count_classes(o); ++variant) {
            tsr_config config;
            const char *cls = tsr_op_class_list(o)[variant / (2 * o->program_variants)];
            if (!class_chosen(cls, chosen)) continue;
            if (o->variant_serves_class && !o->variant_serves_class(cls, variant % o->program_variants)) continue;
            if ((variant / o->program_variants) % 2 == 0) {
                TSR_CHECK(status, tsr_resolve_config(dev, o, cls, &config, NULL), done);
            } else {
                tsr_op_default_config(o, dev, cls, &config);
            }
            char options[1024];
            o->build_options(&config, variant % o->program_variants, options, sizeof options);
            const char *source = o->program_source ? o->program_source(&config) : o->source_name;
            bool seen = false;
            for (cJSON *e = entries->child; e && !seen; e = e->next)
                seen = strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "options")), options) == 0 &&
                       strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "source")), source) == 0;
            if (seen) continue; /* classes (and variants) may share a program */
            TSR_CHECK(status, write_program(dev, dir, entries, o->name, source, options, written), done);
        }
    }
    /* tsr_embedding, a plain call outside the table: its program per storage type of y and of the
     * tables. */
    for (int variant = 0; variant < TSR_DTYPE_COUNT * TSR_DTYPE_COUNT; ++variant) {
        const int y_type = variant % TSR_DTYPE_COUNT, table_type = variant / TSR_DTYPE_COUNT;
        if (!chosen[y_type] || !chosen[table_type]) continue;
        char options[48];
        tsr_embedding_options_text(y_type, table_type, options, sizeof options);
        TSR_CHECK(status, write_program(dev, dir, entries, "embedding", "embedding", options, written), done);
    }
    /* The channels-last transposes of tsr_conv2d (cl/conv_layout.cl), per element size. */
    for (size_t bytes = 2; bytes <= 4; bytes += 2) {
        bool wanted = false;
        for (int t = 0; t < TSR_DTYPE_COUNT; ++t) wanted |= chosen[t] && tsr_dtype_size((tsr_dtype)t) == bytes;
        if (!wanted) continue;
        char options[32];
        snprintf(options, sizeof options, "-DELT_BYTES=%zu", bytes);
        TSR_CHECK(status, write_program(dev, dir, entries, "conv2d", "conv_layout", options, written), done);
    }
    char *text = cJSON_Print(manifest);
    char path[TSR_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    status = text ? tsr_write_file_atomic(path, text, strlen(text)) : tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    free(text);
done:
    cJSON_Delete(manifest);
    return status;
}
