/* Growing text (report.md, SVG), markdown escaping, rates for tables, and JSON members. */
#include "util.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void util_text_printf(util_text *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if (b->data && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
}

void util_text_md(util_text *b, const char *s) {
    for (; s && *s; ++s) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '<': util_text_printf(b, "&lt;"); break;
        case '>': util_text_printf(b, "&gt;"); break;
        case '&': util_text_printf(b, "&amp;"); break;
        case '|': util_text_printf(b, "&#124;"); break; /* an entity never splits a table cell */
        case '\\': case '`': case '*': case '_': case '[': case ']': case '(': case ')': case '#': case '!':
        case '~': case '{': case '}': case '$':
            util_text_printf(b, "\\%c", c);
            break;
        default: util_text_printf(b, "%c", c < 0x20 || c == 0x7f ? ' ' : c); /* no line breaks, no controls */
        }
    }
}

char *util_text_finish(util_text *b) {
    if (b->failed || !b->data) {
        free(b->data);
        b->data = NULL;
        return NULL;
    }
    return b->data;
}

const char *util_format_rate(double v, char *out, size_t size) {
    if (v >= 1000) snprintf(out, size, "%.0f", v);
    else if (v >= 10) snprintf(out, size, "%.1f", v);
    else snprintf(out, size, "%.3g", v);
    return out;
}

double util_json_num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

const char *util_json_text(const cJSON *o, const char *key) {
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
    return s ? s : "";
}

