/* What the files of report/ share among themselves (not for the CLI: report.h is the product's
 * face). The report's files by job, in layer order (tests/check_layers.py):
 *   compare.c   names and rates of rows, the roofline fraction, the devices side by side
 *   load.c      the report tree: new, validated, loaded, parsed, merged
 *   suite.c     the standard suite and its result rows
 *   run.c       running a report on devices
 *   charts.c    SVG charts (a roofline per device, bars across devices)
 *   markdown.c  report.md
 *   write.c     report.json, the charts and report.md on disk
 * plus peak.c (measuring device peaks), peak_json.c (their JSON and table) and pytorch.c (the
 * --pytorch section). */
#ifndef TSR_REPORT_PARTS_H
#define TSR_REPORT_PARTS_H

#include "report.h"

#define REPORT_FORMAT "tessera-report"
#define REPORT_SCHEMA 1

/* ---- peak_json.c ---- */

/* The vector widths the peaks measure: float1, 2, 4, 8, 16. */
extern const int peak_widths[PEAK_WIDTHS];

/* ---- compare.c ---- */

/* The device's name from its info, else its selector. */
const char *report_device_name(const struct cJSON *device);
/* A file-name-safe slug of the device: its index (from 1) and name. */
void report_device_slug(const struct cJSON *device, int index, char *out, size_t size);
/* A row's unit ("GFLOP/s" for ops with a FLOP count, else "GB/s") and its rate in that unit. */
const char *report_op_unit(const struct cJSON *row);
double report_op_rate(const struct cJSON *row);
/* The row's rate as a fraction of the device's roofline at the row's intensity; 0 without peaks. */
double report_roofline_fraction(const struct cJSON *device, const struct cJSON *row);
/* root["comparison"] replaced by report_compare's (none without two devices with results). */
void report_attach_comparison(struct cJSON *root);

/* ---- load.c ---- */

/* Now as "YYYY-MM-DDTHH:MM:SSZ" (UTC), a report's "created". */
void report_now_iso(char *out, size_t size);

/* A result row as any report's must be (fields, types, ranges); false with the reason in why. */
bool report_valid_result(const struct cJSON *row, char *why, size_t size);
/* A whole report tree, as report_load checks it; false with the reason in why. */
bool report_validate(const struct cJSON *root, char *why, size_t size);

/* ---- suite.c ---- */

/* The generic case: the op's fixture at `shape` (fixed inputs), tessera's row, then its peers
 * (a report_case's run when it names none). */
tsr_status report_run_case(tsr_device *device, const report_case *c, const char *shape, const report_options *options,
                           struct cJSON *results);

/* ---- markdown.c ---- */

/* A PNG that rsvg-convert did not make: report.md lists it as missing. */
typedef struct png_result {
    char name[160];
    char why[96]; /* "" when written */
} png_result;
/* report.md, built in memory (written atomically by the caller); NULL with *st on failure. */
char *report_markdown(const struct cJSON *root, const png_result *pngs, size_t npngs, bool png_tool, tsr_status *st);

#endif
