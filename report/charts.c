/* SVG charts for `tessera report`: a log-log roofline per device (its measured memory and fp32
 * roofs, each op at its arithmetic intensity and achieved rate) and a bar chart per op across
 * devices. Plain SVG 1.1 text, no dependencies; every label is XML-escaped. */
#include "report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the character at s when XML may hold it: well-formed UTF-8 (the runtime's check)
 * other than U+FFFE and U+FFFF, which are not XML characters; 0 otherwise. */
static size_t xml_char_length(const unsigned char *s) {
    size_t n = tsr_text_char_length(s);
    if (n == 3 && s[0] == 0xEF && s[1] == 0xBF && s[2] >= 0xBE) return 0;
    return n;
}

/* Text for an SVG element or attribute: escaped, control characters dropped, and bytes that are
 * not UTF-8 (a report from elsewhere may hold any) replaced by U+FFFD so the XML stays well-formed. */
static void sb_escaped(util_text *b, const char *s) {
    for (; *s; ++s) {
        if ((unsigned char)*s >= 0x80) {
            size_t n = xml_char_length((const unsigned char *)s);
            if (n == 0) util_text_printf(b, "\xEF\xBF\xBD");
            else util_text_printf(b, "%.*s", (int)n, s), s += n - 1;
            continue;
        }
        switch (*s) {
        case '&': util_text_printf(b, "&amp;"); break;
        case '<': util_text_printf(b, "&lt;"); break;
        case '>': util_text_printf(b, "&gt;"); break;
        case '"': util_text_printf(b, "&quot;"); break;
        case '\'': util_text_printf(b, "&apos;"); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t') util_text_printf(b, "%c", *s);
        }
    }
}

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                      "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"};
#define PALETTE (sizeof palette / sizeof palette[0])

/* Short numbers for axis labels: 0.0625 -> "1/16", 4096 -> "4096", 1e5 -> "100k". */
static void axis_label(double v, char *out, size_t size) {
    if (v < 1) snprintf(out, size, "1/%.0f", 1.0 / v);
    else if (v >= 1e6) snprintf(out, size, "%.0fM", v / 1e6);
    else if (v >= 1e4) snprintf(out, size, "%.0fk", v / 1e3);
    else snprintf(out, size, "%.0f", v);
}

/* A positive finite number, or `fallback` (a report's numbers are checked when it is loaded; the
 * charts do not rely on it). */
static double usable(double v, double fallback) { return v > 0 && isfinite(v) ? v : fallback; }

/* A row the roofline can place: work, bytes and rate positive and finite, and a finite intensity. */
static bool roofline_point(const cJSON *r, double *intensity, double *gflops) {
    double fl = util_json_num(r, "flops"), by = util_json_num(r, "bytes"), g = util_json_num(r, "gflops");
    if (!(fl > 0 && by > 0 && g > 0 && isfinite(fl) && isfinite(by) && isfinite(g))) return false;
    double ai = fl / by;
    if (!(ai > 0 && isfinite(ai))) return false;
    *intensity = ai, *gflops = g;
    return true;
}

/* The chart's span in decades, at most: wider ranges are cut around the roof, and each axis has
 * at most this many grid lines (every loop below is bounded by a count). */
#define CHART_MAX_DECADES 24.0
#define CHART_MIN_VALUE 1e-150
#define CHART_MAX_VALUE 1e150

/* [lo, hi] in log10 clamped to the values a double and the chart hold: finite, lo < hi, at most
 * CHART_MAX_DECADES wide (cut away from `keep`, a log10 inside the range that must stay). */
static void clamp_range(double *lo, double *hi, double keep) {
    double min = log10(CHART_MIN_VALUE), max = log10(CHART_MAX_VALUE);
    if (!isfinite(*lo) || *lo < min) *lo = min;
    if (!isfinite(*hi) || *hi > max) *hi = max;
    if (!isfinite(keep)) keep = 0;
    keep = fmin(fmax(keep, min), max);
    if (*hi - *lo > CHART_MAX_DECADES) {
        *lo = fmax(*lo, keep - CHART_MAX_DECADES / 2);
        *hi = fmin(*hi, *lo + CHART_MAX_DECADES);
    }
    if (!(*hi > *lo)) *hi = *lo + 1;
}

char *chart_roofline_svg(const cJSON *device) {
    const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(device, "peaks");
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(device, "info");
    double bw = usable(util_json_num(peaks, "bandwidth_gbps"), 1), peak = usable(util_json_num(peaks, "compute_gflops"), 1);
    const double W = 1060, H = 520, left = 78, right = 370, top = 64, bottom = 56; /* legend on the right */
    const double pw = W - left - right, ph = H - top - bottom;
    /* Ranges: every point, the ridge, and a margin, in powers of 4 (x) and 10 (y). */
    double ridge = usable(peak / bw, 1), xmin = 1.0 / 16, xmax = 256, ymin = INFINITY, ymax = peak * 2;
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(device, "results"), *r;
    double ai, g;
    cJSON_ArrayForEach(r, rows) {
        if (!roofline_point(r, &ai, &g)) continue;
        xmin = fmin(xmin, ai / 2), xmax = fmax(xmax, ai * 3);
        ymin = fmin(ymin, g / 2), ymax = fmax(ymax, g * 2);
    }
    xmin = fmin(xmin, ridge / 4), xmax = fmax(xmax, ridge * 4);
    ymin = fmin(ymin, bw * xmin);
    if (ymin < ymax * 1e-7) ymin = ymax * 1e-7;
    /* In log10, each end finite and the span bounded whatever the numbers (0, inf and 1e300 included). */
    const double l4 = log10(4);
    double lx0 = floor(log(xmin) / log(4)) * l4, lx1 = ceil(log(xmax) / log(4)) * l4;
    double ly0 = floor(log10(ymin)), ly1 = ceil(log10(ymax));
    double was[4] = {lx0, lx1, ly0, ly1};
    clamp_range(&lx0, &lx1, log10(ridge));
    clamp_range(&ly0, &ly1, log10(peak));
    if (lx0 != was[0] || lx1 != was[1]) lx0 = floor(lx0 / l4) * l4, lx1 = ceil(lx1 / l4) * l4; /* on the grid again */
    if (ly0 != was[2] || ly1 != was[3]) ly0 = floor(ly0), ly1 = ceil(ly1);
    int nx = (int)lround((lx1 - lx0) / l4), ny = (int)lround(ly1 - ly0); /* grid lines: at most ~42 and 26 */
    if (nx < 1) nx = 1, lx1 = lx0 + l4;
    if (ny < 1) ny = 1, ly1 = ly0 + 1;
    /* Coordinates clamped to the plot (a point beyond a cut range sits on its edge). */
#define X(v) (left + fmin(fmax((log10(v) - lx0) / (lx1 - lx0), 0), 1) * pw)
#define Y(v) (top + ph - fmin(fmax((log10(v) - ly0) / (ly1 - ly0), 0), 1) * ph)
    util_text b = {0};
    util_text_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                  "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    util_text_printf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"%.0f\" y=\"24\" font-size=\"16\" "
                  "font-weight=\"bold\">Roofline: ", left);
    sb_escaped(&b, util_json_text(info, "name"));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(device, "simulator"))) util_text_printf(&b, " (simulator)");
    util_text_printf(&b, "</text>\n<text x=\"%.0f\" y=\"44\" fill=\"#555\">", left);
    sb_escaped(&b, util_json_text(info, "platform_name"));
    util_text_printf(&b, ", driver ");
    sb_escaped(&b, util_json_text(info, "driver_version"));
    util_text_printf(&b, "; host ");
    sb_escaped(&b, util_json_text(device, "host"));
    util_text_printf(&b, "</text>\n");
    /* grid and axes */
    util_text_printf(&b, "<g stroke=\"#ddd\" stroke-width=\"1\">\n");
    for (int i = 0; i <= nx; ++i) {
        double x = X(pow(10, lx0 + i * l4));
        util_text_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, top, x, top + ph);
    }
    for (int i = 0; i <= ny; ++i) {
        double y = Y(pow(10, ly0 + i));
        util_text_printf(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", left, y, left + pw, y);
    }
    util_text_printf(&b, "</g>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n", left,
              top, pw, ph);
    char lab[32];
    for (int i = 0; i <= nx; ++i) {
        double v = pow(10, lx0 + i * l4);
        axis_label(v, lab, sizeof lab);
        util_text_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", X(v), top + ph + 16, lab);
    }
    for (int i = 0; i <= ny; ++i) {
        double v = pow(10, ly0 + i);
        axis_label(v, lab, sizeof lab);
        util_text_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", left - 6, Y(v) + 4, lab);
    }
    util_text_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">arithmetic intensity (FLOP per byte that must move)"
                  "</text>\n", left + pw / 2, H - 14);
    util_text_printf(&b, "<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\">GFLOP/s</text>\n", top + ph / 2);
    /* the roof: bandwidth slope up to the ridge, then flat */
    double x0 = fmax(pow(10, lx0), pow(10, ly0) / bw), x1 = pow(10, lx1);
    util_text_printf(&b, "<polyline fill=\"none\" stroke=\"#000\" stroke-width=\"2.5\" points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>\n",
              X(x0), Y(bw * x0), X(ridge), Y(peak), X(x1), Y(peak));
    char roof_text[32];
    util_text_printf(&b, "<text x=\"%.1f\" y=\"%.1f\">fp32 roof %s GFLOP/s (", X(ridge) + 8, Y(peak) - 8,
              util_format_rate(peak, roof_text, sizeof roof_text));
    sb_escaped(&b, util_json_text(peaks, "compute_best"));
    util_text_printf(&b, ")</text>\n");
    double mx = sqrt(x0 * ridge);
    util_text_printf(&b, "<text transform=\"translate(%.1f %.1f) rotate(%.1f)\" fill=\"#000\">memory roof %s GB/s (", X(mx) - 40,
              Y(bw * mx) - 10, -atan2(Y(bw * x0) - Y(peak), X(ridge) - X(x0)) * 180 / 3.14159265358979323846,
              util_format_rate(bw, roof_text, sizeof roof_text));
    sb_escaped(&b, util_json_text(peaks, "bandwidth_best"));
    util_text_printf(&b, ")</text>\n");
    /* the ops: a colour per case, circles for tessera and squares for its peer, numbered, with
     * the legend to the right of the plot */
    const char *cases[32];
    size_t ncases = 0;
    int k = 0;
    double lx = left + pw + 24, ly = top + 6;
    util_text_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">op, implementation: GFLOP/s (%% of roof)</text>\n",
              lx, ly);
    cJSON_ArrayForEach(r, rows) {
        if (!roofline_point(r, &ai, &g)) continue;
        size_t ci = 0;
        while (ci < ncases && strcmp(cases[ci], util_json_text(r, "case")) != 0) ++ci;
        if (ci == ncases && ncases < 32) cases[ncases++] = util_json_text(r, "case");
        bool tessera = strncmp(util_json_text(r, "impl"), "tessera", 7) == 0;
        double px = X(ai), py = Y(g);
        const char *color = palette[ci % PALETTE];
        ++k;
        if (tessera)
            util_text_printf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>\n", px, py, color);
        else
            util_text_printf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"none\" stroke=\"%s\" "
                          "stroke-width=\"2\"/>\n", px - 5, py - 5, color);
        util_text_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" font-size=\"10\">%d</text>\n", px + 7, py - 5, color, k);
        double roof = fmin(peak, bw * ai);
        ly += 18;
        util_text_printf(&b, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%d. ", lx, ly, color, k);
        sb_escaped(&b, util_json_text(r, "case"));
        util_text_printf(&b, ", ");
        sb_escaped(&b, util_json_text(r, "impl"));
        char rate[32], share[32] = "-";
        double pct = roof > 0 ? 100 * g / roof : 0;
        if (isfinite(pct)) snprintf(share, sizeof share, "%.0f%%", pct);
        util_text_printf(&b, ": %s (%s)</text>\n", util_format_rate(g, rate, sizeof rate), share);
    }
    util_text_printf(&b, "</svg>\n");
#undef X
#undef Y
    return util_text_finish(&b);
}

char *chart_bars_svg(const cJSON *root) {
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices"), *d, *r;
    /* cases with a tessera row, in first-seen order */
    const char *ids[32];
    size_t nids = 0;
    cJSON_ArrayForEach(d, devices) {
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "results")) {
            if (strncmp(util_json_text(r, "impl"), "tessera", 7) != 0) continue;
            bool seen = false;
            for (size_t i = 0; i < nids && !seen; ++i) seen = strcmp(ids[i], util_json_text(r, "case")) == 0;
            if (!seen && nids < 32) ids[nids++] = util_json_text(r, "case");
        }
    }
    int ndev = cJSON_GetArraySize(devices);
    /* each bar's ratio to the baseline device's bar where both ran the same shape */
    cJSON *cmp = report_compare(root);
    const cJSON *base = cmp ? cJSON_GetArrayItem(devices, (int)util_json_num(cmp, "baseline")) : NULL;
    int base_index = cmp ? (int)util_json_num(cmp, "baseline") : -1;
    cJSON_Delete(cmp);
    const double W = 900, label_w = 250, bar_h = 18, gap = 6, panel_head = 28;
    double panel_h = panel_head + ndev * (bar_h + gap) + 10;
    double H = 50 + 22 * ((ndev + 2) / 3) + nids * panel_h + 10;
    util_text b = {0};
    util_text_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                  "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    util_text_printf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<text x=\"10\" y=\"24\" font-size=\"16\" "
                  "font-weight=\"bold\">tessera across devices, op by op</text>\n");
    int i = 0;
    cJSON_ArrayForEach(d, devices) { /* legend */
        const char *name = util_json_text(cJSON_GetObjectItemCaseSensitive(d, "info"), "name");
        double lx = 10 + (i % 3) * 270, ly = 44 + (i / 3) * 22;
        util_text_printf(&b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n<text x=\"%.0f\" y=\"%.0f\">",
                  lx, ly - 10, palette[(size_t)i % PALETTE], lx + 16, ly);
        util_text_printf(&b, "%d. ", i + 1);
        sb_escaped(&b, *name ? name : util_json_text(d, "selector"));
        util_text_printf(&b, "</text>\n");
        ++i;
    }
    double y = 50 + 22 * ((ndev + 2) / 3);
    for (size_t c = 0; c < nids; ++c) {
        double max_rate = 0;
        cJSON_ArrayForEach(d, devices) {
            cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "results")) {
                if (strcmp(util_json_text(r, "case"), ids[c]) == 0 && strncmp(util_json_text(r, "impl"), "tessera", 7) == 0)
                    max_rate = fmax(max_rate, usable(util_json_num(r, "flops") > 0 ? util_json_num(r, "gflops")
                                                                                    : util_json_num(r, "gbps"), 0));
            }
        }
        util_text_printf(&b, "<text x=\"10\" y=\"%.0f\" font-weight=\"bold\">", y + 18);
        sb_escaped(&b, ids[c]);
        util_text_printf(&b, "</text>\n");
        i = 0;
        cJSON_ArrayForEach(d, devices) {
            double by = y + panel_head + i * (bar_h + gap);
            const cJSON *row = NULL;
            cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "results")) {
                if (!row && strcmp(util_json_text(r, "case"), ids[c]) == 0 && strncmp(util_json_text(r, "impl"), "tessera", 7) == 0) row = r;
            }
            util_text_printf(&b, "<text x=\"20\" y=\"%.0f\">%d. ", by + 13, i + 1);
            sb_escaped(&b, util_json_text(cJSON_GetObjectItemCaseSensitive(d, "info"), "name"));
            util_text_printf(&b, "</text>\n");
            if (!row) {
                util_text_printf(&b, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#999\">%s</text>\n", label_w, by + 13,
                          strcmp(util_json_text(d, "status"), "ok") == 0 ? "not run" : "failed");
            } else {
                bool flops = util_json_num(row, "flops") > 0;
                double rate = usable(flops ? util_json_num(row, "gflops") : util_json_num(row, "gbps"), 0);
                double len = max_rate > 0 ? (W - label_w - 330) * (rate / max_rate) : 0;
                util_text_printf(&b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\"/>\n", label_w, by,
                          fmax(len, 1), bar_h, palette[(size_t)i % PALETTE]);
                char rate_text[32];
                const cJSON *peaks = cJSON_GetObjectItemCaseSensitive(d, "peaks");
                double bw = usable(util_json_num(peaks, "bandwidth_gbps"), 0);
                double peak = usable(util_json_num(peaks, "compute_gflops"), 0), by_ = util_json_num(row, "bytes");
                double roof = flops ? (by_ > 0 ? fmin(peak, bw * util_json_num(row, "flops") / by_) : 0) : bw;
                util_text_printf(&b, "<text x=\"%.1f\" y=\"%.0f\">%s %s", label_w + fmax(len, 1) + 6, by + 13,
                          util_format_rate(rate, rate_text, sizeof rate_text), flops ? "GFLOP/s" : "GB/s");
                if (roof > 0 && isfinite(100 * rate / roof)) util_text_printf(&b, " (%.0f%% of its roofline)", 100 * rate / roof);
                const cJSON *brow = NULL;
                cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(base, "results")) {
                    if (!brow && strcmp(util_json_text(r, "case"), ids[c]) == 0 && strncmp(util_json_text(r, "impl"), "tessera", 7) == 0) brow = r;
                }
                double ratio = util_json_num(brow, "time_ms") / util_json_num(row, "time_ms");
                if (brow && d != base && strcmp(util_json_text(brow, "shape"), util_json_text(row, "shape")) == 0 &&
                    ratio > 0 && isfinite(ratio))
                    util_text_printf(&b, ", %.3g× #%d", ratio, base_index + 1);
                util_text_printf(&b, "</text>\n");
            }
            ++i;
        }
        y += panel_h;
    }
    util_text_printf(&b, "</svg>\n");
    return util_text_finish(&b);
}
