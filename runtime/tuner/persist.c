/* Saving a tuning run: each class's best configuration and runners-up, with their provenance,
 * into the device's node of the tuning database (through tuning_db.c's storage functions). */
#define _GNU_SOURCE
#include "tuner.h"

#include <cjson/cJSON.h>
#include <time.h>

typedef struct save_ctx {
    tsr_device *device;
    const tsr_op *op;
    const char *strategy;
    const char *source_hash;
    const tsr_class_outcome *outcomes;
    int noutcomes;
} save_ctx;

static cJSON *config_json(const tsr_op *op, const tsr_config *config) {
    cJSON *o = cJSON_CreateObject();
    for (int p = 0; o && p < op->nparams; ++p) cJSON_AddNumberToObject(o, op->params[p].name, config->values[p]);
    return o;
}

static tsr_status save_results(cJSON *root, void *vctx) {
    save_ctx *sc = vctx;
    cJSON *dev = tsr_db_device_node(root, &sc->device->info);
    if (!dev) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    cJSON *ops = cJSON_GetObjectItemCaseSensitive(dev, "ops");
    cJSON *op = cJSON_GetObjectItemCaseSensitive(ops, sc->op->name);
    if (!op) op = cJSON_AddObjectToObject(ops, sc->op->name);
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    for (int i = 0; i < sc->noutcomes; ++i) {
        const tsr_class_outcome *o = &sc->outcomes[i];
        if (o->ntop == 0) continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToObject(e, "config", config_json(sc->op, &o->top[0].config));
        cJSON_AddNumberToObject(e, "gflops", o->top[0].gflops); /* in "unit" */
        cJSON_AddStringToObject(e, "unit", sc->op->rate_unit ? sc->op->rate_unit : "GFLOP/s");
        cJSON_AddNumberToObject(e, "gflops_q25", o->top[0].score);
        cJSON_AddNumberToObject(e, "spread", o->top[0].spread);
        cJSON_AddStringToObject(e, "problem", o->problem);
        cJSON *runners = cJSON_AddArrayToObject(e, "runners_up");
        for (int r = 1; r < o->ntop; ++r) {
            cJSON *ru = cJSON_CreateObject();
            cJSON_AddItemToObject(ru, "config", config_json(sc->op, &o->top[r].config));
            cJSON_AddNumberToObject(ru, "gflops", o->top[r].gflops);
            cJSON_AddItemToArray(runners, ru);
        }
        char options[1024];
        sc->op->build_options(&o->top[0].config, 0, options, sizeof options);
        cJSON_AddStringToObject(e, "tessera_version", TSR_VERSION_STRING);
        cJSON_AddStringToObject(e, "source_hash", sc->source_hash);
        cJSON_AddStringToObject(e, "build_options", options);
        cJSON_AddStringToObject(e, "date", date);
        cJSON_AddStringToObject(e, "strategy", sc->strategy);
        cJSON_AddNumberToObject(e, "evaluations", o->evaluations);
        /* How the candidates were timed: "host" where the driver's timestamps were unusable (or
         * TSR_TIMING=host), so a reader knows the rates are host wall-clock over batches. */
        tsr_timing_method timing = TSR_TIMING_UNDECIDED;
        if (tsr_device_timing(sc->device, &timing, NULL) != TSR_SUCCESS) tsr_clear_error();
        if (timing != TSR_TIMING_UNDECIDED) cJSON_AddStringToObject(e, "timing", tsr_timing_name(timing));
        /* A fresh measurement of this very device replaces the old one. */
        if (cJSON_GetObjectItemCaseSensitive(op, o->problem_class))
            cJSON_ReplaceItemInObjectCaseSensitive(op, o->problem_class, e);
        else cJSON_AddItemToObject(op, o->problem_class, e);
    }
    return TSR_SUCCESS;
}

tsr_status tsr_tuner_save(const char *path, tsr_device *device, const tsr_op *op, const char *strategy,
                          const char *source_hash, const tsr_class_outcome *outcomes, int noutcomes) {
    save_ctx sc = {.device = device, .op = op, .strategy = strategy, .source_hash = source_hash,
                   .outcomes = outcomes, .noutcomes = noutcomes};
    tsr_status st = tsr_db_update(path, save_results, &sc);
    tsr_tuning_invalidate(device); /* the next launch resolves from the new database */
    return st;
}
