/* Strict option-value parsers shared by the CLI's commands. */
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

bool args_parse_seconds(const char *text, bool allow_zero, double *out) {
    if (!text || !*text || isspace((unsigned char)text[0])) return false;
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno == ERANGE || !isfinite(v)) return false;
    if (!(allow_zero ? v >= 0 : v > 0) || v > ARGS_MAX_SECONDS) return false;
    *out = v;
    return true;
}

bool args_parse_long(const char *text, long long min, long long max, long long *out) {
    if (!text || !*text || isspace((unsigned char)text[0])) return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || errno == ERANGE || v < min || v > max) return false;
    *out = v;
    return true;
}

bool args_parse_u64(const char *text, uint64_t *out) {
    /* strtoull accepts a sign and negates: "-1" would be 2^64-1. */
    if (!text || !(isdigit((unsigned char)text[0]))) return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 0);
    if (*end || errno == ERANGE) return false;
    *out = (uint64_t)v;
    return true;
}
