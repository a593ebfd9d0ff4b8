/* Strict option-value parsers shared by the CLI's commands: the whole text must be a
 * number in range (no trailing text, no "inf"/"nan", no silent wrap-around). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The largest budget any command accepts, in seconds (about 11.6 days). */
#define ARGS_MAX_SECONDS 1e6

/* A finite number of seconds in (0, ARGS_MAX_SECONDS], or [0, ...] with allow_zero. */
bool args_parse_seconds(const char *text, bool allow_zero, double *out);

/* A decimal integer in [min, max]. */
bool args_parse_long(const char *text, long long min, long long max, long long *out);

/* An unsigned 64-bit integer, decimal or 0x-hexadecimal (no sign). */
bool args_parse_u64(const char *text, uint64_t *out);
