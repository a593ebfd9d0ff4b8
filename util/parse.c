/* Strict numbers for options and environment variables: digits only, no sign, no wrap. */
#include "util.h"

#include <ctype.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool util_scan_uint(const char **p, uint64_t max, uint64_t *out) {
    const char *s = *p;
    uint64_t v = 0;
    if (*s < '0' || *s > '9') return false;
    for (; *s >= '0' && *s <= '9'; ++s) {
        unsigned d = (unsigned)(*s - '0');
        if (d > max || v > (max - d) / 10) return false; /* v * 10 + d > max, without wrapping */
        v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return true;
}

tsr_status util_parse_count(const char *text, const char *option, uint64_t min, uint64_t max, uint64_t *out) {
    const char *p = text;
    uint64_t v = 0;
    if (!util_scan_uint(&p, max, &v) || *p || v < min)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: '%s' is not a whole number from %llu to %llu", option, text,
                        (unsigned long long)min, (unsigned long long)max);
    *out = v;
    return TSR_SUCCESS;
}

tsr_status util_parse_u64(const char *text, const char *option, uint64_t *out) {
    /* Decimal, or hexadecimal after "0x"; digits only, so no sign can wrap to 2^64 - 1. */
    bool hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    const char *p = hex ? text + 2 : text;
    uint64_t v = 0;
    bool ok = isxdigit((unsigned char)*p) != 0;
    for (; ok && *p; ++p) {
        unsigned d;
        if (*p >= '0' && *p <= '9') d = (unsigned)(*p - '0');
        else if (hex && isxdigit((unsigned char)*p)) d = (unsigned)(tolower((unsigned char)*p) - 'a' + 10);
        else break;
        unsigned base = hex ? 16 : 10;
        ok = v <= (UINT64_MAX - d) / base;
        v = v * base + d;
    }
    if (!ok || *p)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: '%s' is not an unsigned 64-bit integer (decimal or 0x-hexadecimal)",
                        option, text);
    *out = v;
    return TSR_SUCCESS;
}

tsr_status util_parse_seconds(const char *text, const char *option, bool allow_zero, double max, double *out) {
    /* strtod alone takes " 1", "+1", "-0", "inf", "nan" and "0x1p4": only plain decimals here. */
    bool plain = (*text >= '0' && *text <= '9') || *text == '.';
    for (const char *c = text; plain && *c; ++c)
        plain = strchr("0123456789.eE", *c) || ((*c == '+' || *c == '-') && (c[-1] == 'e' || c[-1] == 'E'));
    char *end = NULL;
    double v = plain ? strtod(text, &end) : NAN;
    if (!plain || *end || !isfinite(v) || !(allow_zero ? v >= 0 : v > 0) || v > max)
        return tsr_fail(TSR_ERR_INVALID_ARG, "%s: '%s' is not a number of seconds %s 0 and at most %g", option, text,
                        allow_zero ? "from" : "above", max);
    *out = v;
    return TSR_SUCCESS;
}

tsr_status util_parse_counts(const char *text, const char *what, uint64_t max, size_t **out, size_t *count) {
    size_t cap = 1, n = 0;
    for (const char *p = text; *p; ++p) cap += *p == ',';
    size_t *s = calloc(cap, sizeof *s);
    if (!s) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    const char *p = text;
    bool too_large = false;
    const char *token = p;
    while (*p) {
        uint64_t v = 0;
        token = p;
        if (!util_scan_uint(&p, max, &v)) {
            too_large = *p >= '0' && *p <= '9';
            break;
        }
        unsigned shift = (*p == 'K' || *p == 'k') ? 10 : (*p == 'M' || *p == 'm') ? 20 : 0;
        if (shift) {
            if (v > (max >> shift)) {
                too_large = true;
                break;
            }
            v <<= shift, ++p;
        }
        if (v == 0) break;
        s[n++] = (size_t)v;
        if (*p == ',' && p[1]) ++p;
        else if (*p) break;
    }
    if (*p || n == 0) {
        free(s);
        if (too_large)
            return tsr_fail(TSR_ERR_INVALID_ARG, "--sizes: '%s' is too large (%s: at most %llu)", token, what,
                            (unsigned long long)max);
        return tsr_fail(TSR_ERR_INVALID_ARG, "--sizes: cannot read '%s' (%s: N, NK or NM from 1 to %llu, comma separated)",
                        p, what, (unsigned long long)max);
    }
    *out = s;
    *count = n;
    return TSR_SUCCESS;
}


int util_next_option(int argc, char **argv, const char *short_options, const struct option *long_options, bool quiet,
                     const char **bad) {
    /* Quiet: a leading ':' silences getopt and tells a missing value (':') from an unknown
     * option ('?'); otherwise getopt prints its own message and both come back as '?'. */
    char shorts[64];
    int n = snprintf(shorts, sizeof shorts, "%s%s", quiet ? ":" : "", short_options);
    if (n < 0 || (size_t)n >= sizeof shorts) return UTIL_OPTION_UNKNOWN; /* a tool's own table: never */
    int saved = opterr;
    opterr = !quiet;
    int c = getopt_long(argc, argv, shorts, long_options, NULL);
    opterr = saved;
    if (c == '?' || c == ':') {
        *bad = argv[optind - 1];
        return c == ':' ? UTIL_OPTION_MISSING : UTIL_OPTION_UNKNOWN;
    }
    return c;
}

bool util_in_list(const char *list, const char *name) {
    if (!list || strcmp(list, "all") == 0) return true;
    size_t n = strlen(name);
    if (!n) return false;
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return true;
    return false;
}
