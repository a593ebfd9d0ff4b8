/* `tessera report --pytorch FILE`: the side-by-side run of bench/pytorch_peer.py shown as the
 * report's PyTorch column. The file comes from a script (perhaps from another machine), so it is
 * checked as foreign input: only the fields below, each of its type and in its range, are
 * copied into the report; anything else in the file is ignored, and anything malformed refuses
 * the whole file with the row and field named. */
#include "report.h"

#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#define PEER_MAX_ROWS 4096
#define PEER_MAX_TEXT 256

/* A string member that is present, well-formed UTF-8 without control characters and short. */
static bool clean_text(const cJSON *o, const char *key, bool required, char *why, size_t size, const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        if (required) snprintf(why, size, "%s: no \"%s\"", where, key);
        return !required;
    }
    if (!cJSON_IsString(v)) {
        snprintf(why, size, "%s: \"%s\" is not a string", where, key);
        return false;
    }
    size_t len = strlen(v->valuestring);
    if (len > PEER_MAX_TEXT) {
        snprintf(why, size, "%s: \"%s\" is longer than %d bytes", where, key, PEER_MAX_TEXT);
        return false;
    }
    for (const char *p = v->valuestring; *p;) {
        size_t n = tsr_text_char_length((const unsigned char *)p);
        if (n == 0) {
            snprintf(why, size, "%s: \"%s\" holds a control character or malformed UTF-8", where, key);
            return false;
        }
        p += n;
    }
    return true;
}

/* A number member: finite, within [lo, hi]; absent or null allowed when optional. */
static bool clean_number(const cJSON *o, const char *key, bool required, double lo, double hi, char *why, size_t size,
                         const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (required) snprintf(why, size, "%s: no \"%s\"", where, key);
        return !required;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        snprintf(why, size, "%s: \"%s\" is not a number from %g to %g", where, key, lo, hi);
        return false;
    }
    return true;
}

/* An optional pair [lo, hi]: absent, null or [null, null] (bench/pytorch_peer.py's bounds with too
 * few pairs), or an array of two numbers within [lo, hi], the first not above the second. */
static bool clean_pair(const cJSON *o, const char *key, double lo, double hi, char *why, size_t size, const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return true;
    const cJSON *a = cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2 ? cJSON_GetArrayItem(v, 0) : NULL;
    const cJSON *b = a ? cJSON_GetArrayItem(v, 1) : NULL;
    if (a && b && cJSON_IsNull(a) && cJSON_IsNull(b)) return true;
    if (!a || !b || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !isfinite(a->valuedouble) ||
        !isfinite(b->valuedouble) || a->valuedouble < lo || b->valuedouble > hi || a->valuedouble > b->valuedouble) {
        snprintf(why, size, "%s: \"%s\" is not a pair [low, high] of numbers from %g to %g", where, key, lo, hi);
        return false;
    }
    return true;
}

/* A pair clean_pair passed, when it holds numbers ([null, null] is left out). */
static void copy_pair(cJSON *to, const cJSON *from, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, key);
    if (!cJSON_IsArray(v) || !cJSON_IsNumber(cJSON_GetArrayItem(v, 0))) return;
    const double pair[2] = {cJSON_GetArrayItem(v, 0)->valuedouble, cJSON_GetArrayItem(v, 1)->valuedouble};
    cJSON *item = cJSON_CreateDoubleArray(pair, 2);
    if (item && !cJSON_AddItemToObject(to, key, item)) cJSON_Delete(item);
}

static void copy_text(cJSON *to, const cJSON *from, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, key);
    if (cJSON_IsString(v)) cJSON_AddStringToObject(to, key, v->valuestring);
}

static void copy_number(cJSON *to, const cJSON *from, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, key);
    if (cJSON_IsNumber(v)) cJSON_AddNumberToObject(to, key, v->valuedouble);
    else cJSON_AddNullToObject(to, key);
}

static cJSON *clean_row(const cJSON *r, int index, char *why, size_t size) {
    char where[48];
    snprintf(where, sizeof where, "row %d", index);
    if (!cJSON_IsObject(r)) {
        snprintf(why, size, "%s is not an object", where);
        return NULL;
    }
    static const char *const texts[] = {"op", "shape", "impl", "device", "variant", "mask", "timing"};
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; ++t)
        if (!clean_text(r, texts[t], t < 3, why, size, where)) return NULL;
    if (!clean_number(r, "time_ms", true, 1e-9, 1e9, why, size, where) ||
        !clean_number(r, "gflops", false, 0, 1e9, why, size, where) ||
        !clean_number(r, "gbps", false, 0, 1e9, why, size, where) ||
        !clean_number(r, "rel_err", false, 0, INFINITY, why, size, where) ||
        !clean_number(r, "rounds", false, 1, 1e6, why, size, where))
        return NULL;
    cJSON *vs = cJSON_GetObjectItemCaseSensitive(r, "vs_pytorch");
    if (vs && (!cJSON_IsObject(vs) || !clean_text(vs, "peer", true, why, size, where) ||
               !clean_number(vs, "ratio", true, 1e-9, 1e9, why, size, where) ||
               !clean_number(vs, "min", true, 1e-9, 1e9, why, size, where) ||
               !clean_number(vs, "max", true, 1e-9, 1e9, why, size, where) ||
               !clean_number(vs, "pairs", false, 0, 1e9, why, size, where) ||
               !clean_pair(vs, "bounds", 1e-9, 1e9, why, size, where) ||
               !clean_pair(vs, "pass_range", 1e-9, 1e9, why, size, where))) {
        if (!*why) snprintf(why, size, "%s: \"vs_pytorch\" is not an object", where);
        return NULL;
    }
    cJSON *out = cJSON_CreateObject();
    if (!out) return NULL;
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; ++t) copy_text(out, r, texts[t]);
    static const char *const numbers[] = {"time_ms", "gflops", "gbps", "rel_err", "rounds"};
    for (size_t n = 0; n < sizeof numbers / sizeof numbers[0]; ++n) copy_number(out, r, numbers[n]);
    if (vs) {
        cJSON *v = cJSON_AddObjectToObject(out, "vs_pytorch");
        if (v) {
            copy_text(v, vs, "peer");
            copy_number(v, vs, "ratio");
            copy_number(v, vs, "min");
            copy_number(v, vs, "max");
            /* paired blocks (--paired): the median's ~95% bounds, the pairs, the passes' medians */
            if (cJSON_GetObjectItemCaseSensitive(vs, "pairs")) copy_number(v, vs, "pairs");
            copy_pair(v, vs, "bounds");
            copy_pair(v, vs, "pass_range");
        }
    }
    return out;
}

tsr_status report_load_pytorch(const char *path, cJSON **out) {
    *out = NULL;
    cJSON *doc = NULL;
    tsr_status st = tsr_read_json(path, "PyTorch comparison", &doc);
    if (st != TSR_SUCCESS) return st;
    char why[512] = "";
    cJSON *clean = NULL;
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "rows");
    if (!cJSON_IsObject(doc) || strcmp(util_json_text(doc, "tool"), "bench/pytorch_peer.py") != 0) {
        snprintf(why, sizeof why, "not the output of bench/pytorch_peer.py (no \"tool\" naming it)");
    } else if (!cJSON_IsArray(rows) || cJSON_GetArraySize(rows) < 1 || cJSON_GetArraySize(rows) > PEER_MAX_ROWS) {
        snprintf(why, sizeof why, "\"rows\" is not an array of 1 to %d rows", PEER_MAX_ROWS);
    } else if (clean_text(doc, "torch", true, why, sizeof why, "the file") &&
               clean_number(doc, "threads", true, 1, 4096, why, sizeof why, "the file") &&
               clean_number(doc, "rounds", true, 1, 1e6, why, sizeof why, "the file") &&
               clean_text(doc, "method", false, why, sizeof why, "the file") &&
               clean_number(doc, "passes", false, 1, 1000, why, sizeof why, "the file")) {
        clean = cJSON_CreateObject();
        cJSON *crows = clean ? cJSON_AddArrayToObject(clean, "rows") : NULL;
        if (!crows) {
            cJSON_Delete(clean), cJSON_Delete(doc);
            return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
        }
        cJSON_AddStringToObject(clean, "file", path);
        copy_text(clean, doc, "torch");
        copy_number(clean, doc, "threads");
        copy_number(clean, doc, "rounds");
        if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(doc, "method"))) copy_text(clean, doc, "method");
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(doc, "passes"))) copy_number(clean, doc, "passes");
        int i = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, rows) {
            cJSON *c = clean_row(r, i++, why, sizeof why);
            if (!c) {
                if (!*why) snprintf(why, sizeof why, "out of memory");
                break;
            }
            cJSON_AddItemToArray(crows, c);
        }
    }
    cJSON_Delete(doc);
    if (*why) {
        cJSON_Delete(clean);
        return tsr_fail(TSR_ERR_CORRUPT, "PyTorch comparison %s is unusable: %s", path, why);
    }
    *out = clean;
    return TSR_SUCCESS;
}

static const char *rate_unit(const cJSON *row) { return util_json_num(row, "gflops") > 0 ? "GFLOP/s" : "GB/s"; }
static double rate(const cJSON *row) {
    return util_json_num(row, "gflops") > 0 ? util_json_num(row, "gflops") : util_json_num(row, "gbps");
}

/* The row of `peer` at the same op and shape as `row`, or NULL. */
static const cJSON *peer_row(const cJSON *rows, const cJSON *row, const char *peer) {
    const cJSON *p;
    cJSON_ArrayForEach(p, rows) {
        if (strcmp(util_json_text(p, "impl"), peer) == 0 && strcmp(util_json_text(p, "op"), util_json_text(row, "op")) == 0 &&
            strcmp(util_json_text(p, "shape"), util_json_text(row, "shape")) == 0)
            return p;
    }
    return NULL;
}

void report_pytorch_markdown(util_text *b, const cJSON *peer) {
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(peer, "rows"), *r;
    util_text_printf(b, "\n## Against PyTorch\n\nFrom ");
    util_text_md(b, util_json_text(peer, "file"));
    util_text_printf(b, " (bench/pytorch_peer.py): `tessera bench` and PyTorch ");
    util_text_md(b, util_json_text(peer, "torch"));
    const bool paired = strcmp(util_json_text(peer, "method"), "paired") == 0;
    const double passes = util_json_num(peer, "passes");
    if (paired)
        util_text_printf(b, " on %.0f threads, in paired blocks (tessera's and PyTorch's calls within the same "
                             "second, taking turns), %.0f pass%s over the rows, each row's pairs pooled. \"speed vs "
                             "PyTorch\" is PyTorch's time over tessera's per pair, median [its ~95%% bounds] (range of "
                             "the pairs)%s: above 1 tessera is faster. Each rel_err is that implementation's own, "
                             "against float64.\n\n",
                          util_json_num(peer, "threads"), passes > 1 ? passes : 1, passes > 1 ? "es" : "",
                          passes > 1 ? ", then the range of the passes' own medians" : "");
    else
        util_text_printf(b, " on %.0f threads, alternated over %.0f rounds; medians over rounds. \"speed vs PyTorch\" is "
                             "PyTorch's time over tessera's, per round, median (range): above 1 tessera is faster. Each "
                             "rel_err is that implementation's own, against float64.\n\n",
                          util_json_num(peer, "threads"), util_json_num(peer, "rounds"));
    util_text_printf(b, "| op | shape | tessera impl | tessera | PyTorch | unit | speed vs PyTorch | tessera rel_err | "
                         "PyTorch rel_err |\n|---|---|---|---:|---:|---|---:|---:|---:|\n");
    cJSON_ArrayForEach(r, rows) {
        const cJSON *vs = cJSON_GetObjectItemCaseSensitive(r, "vs_pytorch");
        if (!vs) continue;
        const cJSON *p = peer_row(rows, r, util_json_text(vs, "peer"));
        if (!p) continue;
        char terr[32] = "-", perr[32] = "-", a[32], c[32];
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "rel_err");
        if (cJSON_IsNumber(e)) snprintf(terr, sizeof terr, "%.1e", e->valuedouble);
        e = cJSON_GetObjectItemCaseSensitive(p, "rel_err");
        if (cJSON_IsNumber(e)) snprintf(perr, sizeof perr, "%.1e", e->valuedouble);
        static const char *const cells[] = {"op", "shape", "impl"};
        for (size_t k = 0; k < 3; ++k) {
            util_text_printf(b, "| ");
            util_text_md(b, util_json_text(r, cells[k]));
            util_text_printf(b, " ");
        }
        char bounds[48] = "", range[48] = "";
        const cJSON *bd = cJSON_GetObjectItemCaseSensitive(vs, "bounds"), *pr = cJSON_GetObjectItemCaseSensitive(vs, "pass_range");
        if (cJSON_IsArray(bd))
            snprintf(bounds, sizeof bounds, " [%.2f, %.2f]", cJSON_GetArrayItem(bd, 0)->valuedouble,
                     cJSON_GetArrayItem(bd, 1)->valuedouble);
        if (cJSON_IsArray(pr))
            snprintf(range, sizeof range, ", passes %.2f–%.2f", cJSON_GetArrayItem(pr, 0)->valuedouble,
                     cJSON_GetArrayItem(pr, 1)->valuedouble);
        util_text_printf(b, "| %s | %s | %s | %.2f%s (%.2f–%.2f%s) | %s | %s |\n", util_format_rate(rate(r), a, sizeof a),
                         util_format_rate(rate(p), c, sizeof c), rate_unit(r), util_json_num(vs, "ratio"), bounds,
                         util_json_num(vs, "min"), util_json_num(vs, "max"), range, terr, perr);
    }
}
