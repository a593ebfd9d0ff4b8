/* `tessera peak`'s words: which tests (--tests), the peaks as JSON (written, and read back from a
 * report made anywhere: every field checked) and as the printed table. */
#include "report_parts.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int peak_widths[PEAK_WIDTHS] = {1, 2, 4, 8, 16};

/* ---- which tests ---- */

static const char *const test_names[] = {"bandwidth", "compute", "launch", "transfers", "host"};
#define PEAK_TEST_COUNT (int)(sizeof test_names / sizeof test_names[0])

const char *peak_test_list(char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < PEAK_TEST_COUNT && used < size; ++i) {
        int n = snprintf(out + used, size - used, "%s%s", i ? ", " : "", test_names[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
    return out;
}

bool peak_parse_tests(const char *list, unsigned *tests, char *bad, size_t bad_size) {
    *tests = 0;
    const char *p = list;
    do {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < PEAK_TEST_COUNT; ++i)
            if (len == strlen(test_names[i]) && strncmp(p, test_names[i], len) == 0) found = i;
        if (found < 0) {
            snprintf(bad, bad_size, "%.*s", (int)len, p);
            return false;
        }
        *tests |= 1u << found;
        p += len;
    } while (*p++ == ',');
    return true;
}

/* ---- output ---- */

static cJSON *stat_json(const peak_stat *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "median", s->median);
    cJSON_AddNumberToObject(o, "min", s->min);
    cJSON_AddNumberToObject(o, "max", s->max);
    cJSON_AddNumberToObject(o, "runs", s->runs);
    return o;
}

/* Bounds on the numbers of a peaks section read back (a report from elsewhere): generous for any
 * device, and finite, so nothing derived from them (roofs, ridges, chart ranges) is not. */
#define PEAK_MAX_RATE 1e12  /* GB/s, GFLOP/s, microseconds */
#define PEAK_MAX_COUNT 1e9  /* runs, chains, threads, streams, vector widths */
#define PEAK_MIN_ROOF 1e-9  /* GB/s or GFLOP/s: the smallest roof other than 0 (not measured) */

/* The number at `o`[key] (absent: *out unchanged): finite, in [0, hi], an integer where asked;
 * TSR_ERR_CORRUPT naming the field (`where`.key) otherwise. */
static tsr_status peak_number(const cJSON *o, const char *where, const char *key, double hi, bool integer,
                              double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return TSR_SUCCESS;
    if (!cJSON_IsNumber(v)) return tsr_fail(TSR_ERR_CORRUPT, "peaks: %s%s%s is not a number", where, *where ? "." : "", key);
    double x = v->valuedouble;
    if (!isfinite(x) || x < 0 || x > hi || (integer && x != floor(x)))
        return tsr_fail(TSR_ERR_CORRUPT, "peaks: %s%s%s is %g: it must be %s in [0, %g]", where, *where ? "." : "", key,
                        x, integer ? "an integer" : "a finite number", hi);
    *out = x;
    return TSR_SUCCESS;
}

static tsr_status peak_int(const cJSON *o, const char *where, const char *key, int *out) {
    double x = *out;
    tsr_status st = peak_number(o, where, key, PEAK_MAX_COUNT, true, &x);
    *out = (int)x;
    return st;
}

/* A measurement {median, min, max, runs}; `where` names it in messages. */
static tsr_status stat_from(const cJSON *o, const char *where, peak_stat *s) {
    memset(s, 0, sizeof *s);
    tsr_status st = peak_number(o, where, "median", PEAK_MAX_RATE, false, &s->median);
    if (st == TSR_SUCCESS) st = peak_number(o, where, "min", PEAK_MAX_RATE, false, &s->min);
    if (st == TSR_SUCCESS) st = peak_number(o, where, "max", PEAK_MAX_RATE, false, &s->max);
    if (st == TSR_SUCCESS) st = peak_int(o, where, "runs", &s->runs);
    return st;
}

cJSON *peak_to_json(const peak_result *r) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON *tests = cJSON_AddArrayToObject(o, "tests");
    for (int i = 0; i < PEAK_TEST_COUNT; ++i)
        if (r->tests & (1u << i)) cJSON_AddItemToArray(tests, cJSON_CreateString(test_names[i]));
    if (r->reduced) cJSON_AddBoolToObject(o, "reduced", true); /* a floor of the device's limits, not a roof */
    if (r->tests & (PEAK_BANDWIDTH | PEAK_COMPUTE)) {
        cJSON_AddStringToObject(o, "timing", r->host_timed ? "host" : "device");
        if (r->host_timed) cJSON_AddStringToObject(o, "timing_reason", r->timing_reason);
        cJSON_AddNumberToObject(o, "empty_launch_us", r->empty_launch_us);
    }
    cJSON_AddNumberToObject(o, "buffer_bytes", (double)r->buffer_bytes);
    cJSON_AddNumberToObject(o, "budget_s", r->budget_s);
    cJSON_AddNumberToObject(o, "bandwidth_gbps", r->bandwidth_gbps);
    cJSON_AddStringToObject(o, "bandwidth_best", r->bandwidth_best);
    cJSON_AddNumberToObject(o, "compute_gflops", r->compute_gflops);
    cJSON_AddStringToObject(o, "compute_best", r->compute_best);
    static const char *const kinds[3] = {"read", "write", "copy"};
    cJSON *bw = cJSON_AddObjectToObject(o, "bandwidth");
    for (int k = 0; k < 3; ++k) {
        cJSON *arr = cJSON_AddArrayToObject(bw, kinds[k]);
        for (int w = 0; w < PEAK_WIDTHS; ++w) {
            const peak_stat *s = k == 0 ? &r->read[w] : k == 1 ? &r->write[w] : &r->copy[w];
            cJSON *e = stat_json(s);
            cJSON_AddNumberToObject(e, "vector_width", peak_widths[w]);
            cJSON_AddStringToObject(e, "layout", r->layout[k][w] ? "interleaved" : "contiguous");
            cJSON_AddItemToArray(arr, e);
        }
    }
    cJSON *comp = cJSON_AddArrayToObject(o, "compute");
    for (int w = 0; w < PEAK_WIDTHS; ++w) {
        cJSON *e = stat_json(&r->compute[w]);
        cJSON_AddNumberToObject(e, "vector_width", peak_widths[w]);
        cJSON_AddNumberToObject(e, "chains", r->chains[w]);
        cJSON_AddStringToObject(e, "form", r->compute_mad[w] ? "mad" : "fma");
        cJSON_AddItemToArray(comp, e);
    }
    cJSON *launch = cJSON_AddObjectToObject(o, "launch_us");
    cJSON_AddStringToObject(launch, "timing", "host"); /* enqueue to clFinish on the host clock, always */
    cJSON_AddItemToObject(launch, "dispatch", stat_json(&r->dispatch_us));
    cJSON_AddItemToObject(launch, "round_trip", stat_json(&r->round_trip_us));
    cJSON *xfer = cJSON_AddObjectToObject(o, "transfer_gbps");
    cJSON_AddItemToObject(xfer, "write", stat_json(&r->write_gbps));
    cJSON_AddItemToObject(xfer, "read", stat_json(&r->read_gbps));
    cJSON_AddItemToObject(xfer, "map_read", stat_json(&r->map_read_gbps));
    cJSON_AddItemToObject(xfer, "map_write", stat_json(&r->map_write_gbps));
    if (r->host_copy_gbps.runs) {
        cJSON *h = stat_json(&r->host_copy_gbps);
        cJSON_AddNumberToObject(h, "threads", r->host_threads);
        cJSON_AddNumberToObject(h, "streams_per_thread", r->host_copy_streams);
        cJSON_AddItemToObject(o, "host_copy_gbps", h);
        h = stat_json(&r->host_read_gbps);
        cJSON_AddNumberToObject(h, "streams_per_thread", r->host_read_streams);
        cJSON_AddItemToObject(o, "host_read_gbps", h);
    }
    return o;
}

/* Every number is checked (a report from elsewhere may hold anything cJSON parses, 1e999 as
 * infinity): the first bad one is TSR_ERR_CORRUPT naming its field. */
tsr_status peak_from_json(const cJSON *o, peak_result *r) {
    memset(r, 0, sizeof *r);
    const cJSON *bw = cJSON_GetObjectItemCaseSensitive(o, "bandwidth_gbps");
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(o, "compute_gflops");
    if (!cJSON_IsNumber(bw) || !cJSON_IsNumber(fl))
        return tsr_fail(TSR_ERR_CORRUPT, "peaks: bandwidth_gbps and compute_gflops must be numbers");
    /* 0 is meaningful (not measured: --tests left it out); below 0, beyond a double or so small that
     * a rate over the roof overflows is not. */
    for (int i = 0; i < 2; ++i) {
        double x = (i ? fl : bw)->valuedouble;
        if (!(x == 0 || (x >= PEAK_MIN_ROOF && x <= PEAK_MAX_RATE)))
            return tsr_fail(TSR_ERR_CORRUPT, "peaks: bandwidth_gbps (%g) and compute_gflops (%g) must be >= 0 and finite "
                            "(0: not measured; otherwise in [%g, %g])", bw->valuedouble, fl->valuedouble,
                            PEAK_MIN_ROOF, PEAK_MAX_RATE);
    }
    r->bandwidth_gbps = bw->valuedouble;
    r->compute_gflops = fl->valuedouble;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "tests"), *t;
    r->tests = v ? 0 : PEAK_ALL; /* files from before --tests measured everything */
    cJSON_ArrayForEach(t, v) {
        for (int i = 0; i < PEAK_TEST_COUNT; ++i)
            if (cJSON_IsString(t) && strcmp(t->valuestring, test_names[i]) == 0) r->tests |= 1u << i;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "timing")) && cJSON_IsString(v))
        r->host_timed = strcmp(v->valuestring, "host") == 0;
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "timing_reason")) && cJSON_IsString(v))
        tsr_strlcpy(r->timing_reason, v->valuestring, sizeof r->timing_reason);
    tsr_status st = peak_number(o, "", "empty_launch_us", PEAK_MAX_RATE, false, &r->empty_launch_us);
    if (st != TSR_SUCCESS) return st;
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "bandwidth_best")) && cJSON_IsString(v))
        tsr_strlcpy(r->bandwidth_best, v->valuestring, sizeof r->bandwidth_best);
    r->reduced = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "reduced"));
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "compute_best")) && cJSON_IsString(v))
        tsr_strlcpy(r->compute_best, v->valuestring, sizeof r->compute_best);
    /* A foreign file: a negative or huge count would make the cast undefined. */
    double buffer = 0;
    if ((st = peak_number(o, "", "buffer_bytes", 9007199254740992.0, true, &buffer)) != TSR_SUCCESS) return st;
    r->buffer_bytes = (size_t)buffer;
    if ((st = peak_number(o, "", "budget_s", PEAK_MAX_RATE, false, &r->budget_s)) != TSR_SUCCESS) return st;
    static const char *const kinds[3] = {"read", "write", "copy"};
    const cJSON *bws = cJSON_GetObjectItemCaseSensitive(o, "bandwidth");
    char where[64];
    for (int k = 0; k < 3; ++k) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(bws, kinds[k]);
        int w = 0;
        for (const cJSON *e = arr ? arr->child : NULL; e && w < PEAK_WIDTHS; e = e->next, ++w) {
            snprintf(where, sizeof where, "bandwidth.%s[%d]", kinds[k], w);
            if ((st = stat_from(e, where, k == 0 ? &r->read[w] : k == 1 ? &r->write[w] : &r->copy[w])) != TSR_SUCCESS)
                return st;
            const cJSON *l = cJSON_GetObjectItemCaseSensitive(e, "layout");
            r->layout[k][w] = cJSON_IsString(l) && strcmp(l->valuestring, "interleaved") == 0;
        }
    }
    int w = 0;
    const cJSON *comp = cJSON_GetObjectItemCaseSensitive(o, "compute");
    for (const cJSON *e = comp ? comp->child : NULL; e && w < PEAK_WIDTHS; e = e->next, ++w) {
        snprintf(where, sizeof where, "compute[%d]", w);
        if ((st = stat_from(e, where, &r->compute[w])) != TSR_SUCCESS) return st;
        if ((st = peak_int(e, where, "chains", &r->chains[w])) != TSR_SUCCESS) return st;
        const cJSON *form = cJSON_GetObjectItemCaseSensitive(e, "form");
        r->compute_mad[w] = cJSON_IsString(form) && strcmp(form->valuestring, "mad") == 0;
    }
    static const struct {
        const char *section, *key;
        size_t offset;
    } stats[] = {
        {"launch_us", "dispatch", offsetof(peak_result, dispatch_us)},
        {"launch_us", "round_trip", offsetof(peak_result, round_trip_us)},
        {"transfer_gbps", "write", offsetof(peak_result, write_gbps)},
        {"transfer_gbps", "read", offsetof(peak_result, read_gbps)},
        {"transfer_gbps", "map_read", offsetof(peak_result, map_read_gbps)},
        {"transfer_gbps", "map_write", offsetof(peak_result, map_write_gbps)},
    };
    for (size_t i = 0; i < sizeof stats / sizeof stats[0]; ++i) {
        snprintf(where, sizeof where, "%s.%s", stats[i].section, stats[i].key);
        const cJSON *sec = cJSON_GetObjectItemCaseSensitive(o, stats[i].section);
        if ((st = stat_from(cJSON_GetObjectItemCaseSensitive(sec, stats[i].key), where,
                            (peak_stat *)((char *)r + stats[i].offset))) != TSR_SUCCESS)
            return st;
    }
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "host_copy_gbps");
    if (h) {
        if ((st = stat_from(h, "host_copy_gbps", &r->host_copy_gbps)) != TSR_SUCCESS) return st;
        if ((st = peak_int(h, "host_copy_gbps", "threads", &r->host_threads)) != TSR_SUCCESS) return st;
        r->host_copy_streams = 1; /* older files: memcpy */
        if ((st = peak_int(h, "host_copy_gbps", "streams_per_thread", &r->host_copy_streams)) != TSR_SUCCESS) return st;
        const cJSON *hr = cJSON_GetObjectItemCaseSensitive(o, "host_read_gbps");
        if ((st = stat_from(hr, "host_read_gbps", &r->host_read_gbps)) != TSR_SUCCESS) return st;
        r->host_read_streams = 1;
        if ((st = peak_int(hr, "host_read_gbps", "streams_per_thread", &r->host_read_streams)) != TSR_SUCCESS) return st;
    }
    return TSR_SUCCESS;
}

static void spread(const peak_stat *s, char *out, size_t size) {
    if (s->runs == 0) snprintf(out, size, "-");
    else snprintf(out, size, "%.1f [%.1f, %.1f] n=%d", s->median, s->min, s->max, s->runs);
}

void peak_print(FILE *f, const peak_result *r) {
    char t[3][64];
    if (r->host_timed)
        fprintf(f, "timing: host clock (batches of launches, less the %.1f us empty-launch cost, per launch): %s\n",
                r->empty_launch_us, r->timing_reason);
    else if (r->tests & (PEAK_BANDWIDTH | PEAK_COMPUTE))
        fprintf(f, "timing: device (profiling events, checked against the host clock)\n");
    if (r->tests & PEAK_BANDWIDTH) {
        fprintf(f, "global memory bandwidth, GB/s (median [min, max] n=runs; %.0f MiB buffers of random data; copy "
                   "counts bytes read + written)\n", (double)r->buffer_bytes / 1048576.0);
        fprintf(f, "  %-8s %-38s %-38s %-38s\n", "width", "read", "write", "copy");
        for (int w = 0; w < PEAK_WIDTHS; ++w) {
            spread(&r->read[w], t[0], sizeof t[0]);
            spread(&r->write[w], t[1], sizeof t[1]);
            spread(&r->copy[w], t[2], sizeof t[2]);
            fprintf(f, "  float%-3d %-38s %-38s %-38s\n", peak_widths[w], t[0], t[1], t[2]);
        }
        fprintf(f, "  best: %.1f GB/s (%s)\n", r->bandwidth_gbps, r->bandwidth_best);
    }
    if (r->host_copy_gbps.runs) {
        spread(&r->host_read_gbps, t[0], sizeof t[0]);
        spread(&r->host_copy_gbps, t[1], sizeof t[1]);
        fprintf(f, "the host itself, %d threads, GB/s: read %s (%d stream%s per thread); copy %s (%d stream%s per "
                   "thread%s)\n", r->host_threads, t[0], r->host_read_streams, r->host_read_streams == 1 ? "" : "s", t[1],
                r->host_copy_streams, r->host_copy_streams == 1 ? "" : "s", r->host_copy_streams == 1 ? ": memcpy" : "");
    }
    if (r->tests & PEAK_COMPUTE) {
        fprintf(f, "fp32 multiply-add throughput, GFLOP/s\n");
        for (int w = 0; w < PEAK_WIDTHS; ++w) {
            spread(&r->compute[w], t[0], sizeof t[0]);
            fprintf(f, "  float%-3d %-38s (%d chains, %s)\n", peak_widths[w], t[0], r->chains[w], r->compute_mad[w] ? "mad" : "fma");
        }
        fprintf(f, "  best: %.1f GFLOP/s (%s)\n", r->compute_gflops, r->compute_best);
    }
    if (r->tests & PEAK_LAUNCH) {
        spread(&r->dispatch_us, t[0], sizeof t[0]);
        spread(&r->round_trip_us, t[1], sizeof t[1]);
        fprintf(f, "kernel launch, microseconds on the host clock: dispatch %s; round trip (enqueue to clFinish) %s\n",
                t[0], t[1]);
    }
    if (r->tests & PEAK_TRANSFERS) {
        fprintf(f, "host <-> device, GB/s\n");
        spread(&r->write_gbps, t[0], sizeof t[0]);
        spread(&r->read_gbps, t[1], sizeof t[1]);
        fprintf(f, "  write %s; read %s\n", t[0], t[1]);
        spread(&r->map_read_gbps, t[0], sizeof t[0]);
        spread(&r->map_write_gbps, t[1], sizeof t[1]);
        fprintf(f, "  map+read %s; map+write %s\n", t[0], t[1]);
    }
}
