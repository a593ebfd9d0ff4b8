/* Storage types: names, sizes, host conversions with IEEE rounding (to nearest, ties to even),
 * the rounding a value undergoes when stored, error bounds, and the dtype part of shape texts and
 * problem classes. The device side of the same conversions is cl/dtype.cl. */
#include "internal.h"

#include <math.h>
#include <string.h>
#include <strings.h>

/* Every storage type, by its enum value: its name, the suffix of its problem classes (fp32's
 * classes keep their plain names), its size and unit roundoff. Problem classes, the ops' shape
 * tokens and type sets are derived from this table (tsr_dtype_class_*, tsr_dtype_storage_set,
 * tsr_dtype_combination): no op spells a storage type's class. */
static const struct dtype_def {
    const char *name, *class_suffix;
    size_t size;
    double unit_roundoff;
} dtypes[TSR_DTYPE_COUNT] = {
    [TSR_F32] = {"f32", "", 4, 0x1p-24},
    [TSR_F16] = {"f16", "-f16", 2, 0x1p-11},
    [TSR_BF16] = {"bf16", "-bf16", 2, 0x1p-8},
};

bool tsr_dtype_valid(tsr_dtype dtype) { return (int)dtype >= 0 && (int)dtype < TSR_DTYPE_COUNT; }

const char *tsr_dtype_str(tsr_dtype dtype) { return tsr_dtype_valid(dtype) ? dtypes[dtype].name : "?"; }

size_t tsr_dtype_size(tsr_dtype dtype) { return tsr_dtype_valid(dtype) ? dtypes[dtype].size : 0; }

/* A name of a data type (no error recorded: shape texts try tokens). */
static bool dtype_lookup(const char *name, tsr_dtype *dtype) {
    static const struct {
        const char *name;
        tsr_dtype dtype;
    } names[] = {{"f32", TSR_F32},   {"fp32", TSR_F32},     {"float32", TSR_F32}, {"float", TSR_F32},
                 {"f16", TSR_F16},   {"fp16", TSR_F16},     {"float16", TSR_F16}, {"half", TSR_F16},
                 {"bf16", TSR_BF16}, {"bfloat16", TSR_BF16}};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; ++i)
        if (strcasecmp(name, names[i].name) == 0) {
            *dtype = names[i].dtype;
            return true;
        }
    return false;
}

tsr_status tsr_dtype_parse(const char *name, tsr_dtype *dtype) {
    tsr_clear_diagnostics();
    if (!dtype) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_dtype_parse: dtype is NULL");
    if (dtype_lookup(name, dtype)) return TSR_SUCCESS;
    return tsr_fail(TSR_ERR_INVALID_ARG,
                    "unknown data type '%.40s%s': expected f32 (fp32, float32, float), f16 (fp16, "
                    "float16, half) or bf16 (bfloat16)",
                    name ? name : "(null)", name && strlen(name) > 40 ? "..." : "");
}

tsr_status tsr_dtype_check(const char *what, tsr_dtype dtype) {
    if (tsr_dtype_valid(dtype)) return TSR_SUCCESS;
    return tsr_fail(TSR_ERR_INVALID_ARG, "%s: data type %d is not one of TSR_F32, TSR_F16, TSR_BF16", what, (int)dtype);
}

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t tsr_f32_to_f16(float value) {
    const uint32_t bits = float_bits(value), sign = (bits >> 16) & 0x8000u, abs = bits & 0x7fffffffu;
    if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu)); /* NaN, made quiet */
    /* 65520 = 65504 + half an ulp: the tie rounds to the even neighbour, which is past the range. */
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (abs >= 0x38800000u) { /* normal in binary16: round the 13 dropped bits, rebias 127 -> 15 */
        const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
        return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
    }
    /* Subnormal (or zero): a multiple of 2^-24; scaling by 2^24 is exact and nearbyintf rounds to
     * even in the default mode. 1024 is the smallest normal, whose encoding follows on. */
    return (uint16_t)(sign | (uint32_t)nearbyintf(fabsf(value) * 16777216.0f));
}

float tsr_f16_to_f32(uint16_t half) {
    const uint32_t sign = (uint32_t)(half & 0x8000u) << 16, exp = (half >> 10) & 0x1fu, mant = half & 0x3ffu;
    if (exp == 0) {
        const float magnitude = (float)mant / 16777216.0f;
        return sign ? -magnitude : magnitude;
    }
    if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
    return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t tsr_f32_to_bf16(float value) {
    const uint32_t bits = float_bits(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40u); /* NaN, made quiet */
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

float tsr_bf16_to_f32(uint16_t bf16) { return bits_float((uint32_t)bf16 << 16); }

float tsr_dtype_round(tsr_dtype dtype, float value) {
    switch (dtype) {
    case TSR_F16:
        return tsr_f16_to_f32(tsr_f32_to_f16(value));
    case TSR_BF16:
        return tsr_bf16_to_f32(tsr_f32_to_bf16(value));
    default:
        return value;
    }
}

void tsr_dtype_round_array(tsr_dtype dtype, float *values, size_t n) {
    if (dtype == TSR_F32) return;
    for (size_t i = 0; i < n; ++i)
        values[i] = tsr_dtype_round(dtype, values[i]);
}

static float load_as_float(tsr_dtype type, const void *src, size_t i) {
    uint16_t h;
    switch (type) {
    case TSR_F16:
        memcpy(&h, (const char *)src + 2 * i, 2);
        return tsr_f16_to_f32(h);
    case TSR_BF16:
        memcpy(&h, (const char *)src + 2 * i, 2);
        return tsr_bf16_to_f32(h);
    default: {
        float f;
        memcpy(&f, (const char *)src + 4 * i, 4);
        return f;
    }
    }
}

static void store_float(tsr_dtype type, void *dst, size_t i, float value) {
    uint16_t h;
    switch (type) {
    case TSR_F16:
        h = tsr_f32_to_f16(value);
        memcpy((char *)dst + 2 * i, &h, 2);
        break;
    case TSR_BF16:
        h = tsr_f32_to_bf16(value);
        memcpy((char *)dst + 2 * i, &h, 2);
        break;
    default:
        memcpy((char *)dst + 4 * i, &value, 4);
        break;
    }
}

tsr_status tsr_convert_host(tsr_dtype src_type, const void *src, tsr_dtype dst_type, void *dst, size_t n) {
    tsr_clear_diagnostics();
    tsr_status st = TSR_SUCCESS;
    TSR_CHECK(st, tsr_dtype_check("tsr_convert_host: src_type", src_type), done);
    TSR_CHECK(st, tsr_dtype_check("tsr_convert_host: dst_type", dst_type), done);
    if (n == 0) return TSR_SUCCESS;
    if (!src || !dst) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_convert_host: %s is NULL", src ? "dst" : "src");
    size_t src_bytes, dst_bytes;
    if (__builtin_mul_overflow(n, tsr_dtype_size(src_type), &src_bytes) ||
        __builtin_mul_overflow(n, tsr_dtype_size(dst_type), &dst_bytes))
        return tsr_fail(TSR_ERR_OVERFLOW, "tsr_convert_host: %zu elements overflow a byte count", n);
    const uintptr_t s = (uintptr_t)src, d = (uintptr_t)dst;
    if (s < d + dst_bytes && d < s + src_bytes)
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_convert_host: src and dst overlap");
    if (src_type == dst_type) {
        memcpy(dst, src, src_bytes);
        return TSR_SUCCESS;
    }
    for (size_t i = 0; i < n; ++i)
        store_float(dst_type, dst, i, load_as_float(src_type, src, i));
done:
    return st;
}

double tsr_dtype_unit_roundoff(tsr_dtype dtype) {
    return dtypes[tsr_dtype_valid(dtype) ? dtype : TSR_F32].unit_roundoff;
}

double tsr_dtype_error_bound(tsr_dtype out, double reduction) {
    if (!(reduction >= 1.0)) reduction = 1.0;
    return (out == TSR_F32 ? 0.0 : tsr_dtype_unit_roundoff(out)) + 8.0 * sqrt(reduction) * 0x1p-24;
}

bool tsr_dtype_spec_parse(const char *token, tsr_dtype *in, tsr_dtype *out) {
    char first[16], second[16];
    const char *slash = strchr(token, '/');
    size_t len = slash ? (size_t)(slash - token) : strlen(token);
    if (len == 0 || len >= sizeof first) return false;
    memcpy(first, token, len);
    first[len] = '\0';
    tsr_dtype a, b;
    bool ok = dtype_lookup(first, &a);
    b = a;
    if (ok && slash) {
        size_t len2 = strlen(slash + 1);
        ok = len2 > 0 && len2 < sizeof second;
        if (ok) {
            memcpy(second, slash + 1, len2 + 1);
            ok = dtype_lookup(second, &b);
        }
    }
    if (!ok) return false;
    *in = a;
    *out = b;
    return true;
}

const char *tsr_dtype_spec_format(tsr_dtype in, tsr_dtype out, char *buf, size_t size) {
    if (in == out)
        snprintf(buf, size, "%s", in == TSR_F32 ? "" : tsr_dtype_str(in));
    else
        snprintf(buf, size, "%s/%s", tsr_dtype_str(in), tsr_dtype_str(out));
    return buf;
}

int tsr_dtype_class_group(const tsr_dtype *types, size_t n) {
    int group = 0; /* the first 16-bit type of the table that any tensor has */
    for (size_t i = 0; i < n; ++i)
        if (types[i] != TSR_F32 && tsr_dtype_valid(types[i]) && (group == 0 || (int)types[i] < group))
            group = (int)types[i];
    return group;
}

const char *tsr_dtype_class_suffix(const tsr_dtype *types, size_t n) {
    return dtypes[tsr_dtype_class_group(types, n)].class_suffix;
}

const char *tsr_dtype_class_base(const char *problem_class, char *buf, size_t size) {
    size_t len = strlen(problem_class);
    for (int t = 0; t < TSR_DTYPE_COUNT; ++t) {
        size_t sl = strlen(dtypes[t].class_suffix);
        if (sl && len > sl && strcmp(problem_class + len - sl, dtypes[t].class_suffix) == 0 && len - sl < size) {
            memcpy(buf, problem_class, len - sl);
            buf[len - sl] = '\0';
            return buf;
        }
    }
    return NULL;
}

bool tsr_dtype_types_serve_class(const tsr_dtype *types, size_t n, const char *problem_class) {
    char base[32];
    const char *suffix = tsr_dtype_class_base(problem_class, base, sizeof base) ? problem_class + strlen(base) : "";
    return strcmp(tsr_dtype_class_suffix(types, n), suffix) == 0;
}

void tsr_dtype_storage_set(int index, tsr_dtype *in, tsr_dtype *out) {
    if (index <= 0 || index >= TSR_STORAGE_SETS) { /* fp32 throughout */
        *in = *out = TSR_F32;
    } else if (index < TSR_DTYPE_COUNT) { /* uniform 16-bit storage */
        *in = *out = (tsr_dtype)index;
    } else { /* 16-bit inputs, an fp32 output */
        *in = (tsr_dtype)(index - TSR_DTYPE_COUNT + 1);
        *out = TSR_F32;
    }
}

/* Is `types` (n tensors) the storage set `index`? */
static bool is_storage_set(int index, int n, const tsr_dtype *types) {
    tsr_dtype in, out;
    tsr_dtype_storage_set(index, &in, &out);
    for (int i = 0; i < n - 1; ++i)
        if (types[i] != in) return false;
    return types[n - 1] == out;
}

/* The n types numbered `code` in lexicographic order (the first tensor's type varying slowest). */
static void decode(int code, int n, tsr_dtype *types) {
    for (int i = n - 1; i >= 0; --i, code /= TSR_DTYPE_COUNT) types[i] = (tsr_dtype)(code % TSR_DTYPE_COUNT);
}

void tsr_dtype_combination(int index, int n, tsr_dtype *types) {
    if (index < TSR_STORAGE_SETS) {
        tsr_dtype in, out;
        tsr_dtype_storage_set(index, &in, &out);
        for (int i = 0; i < n - 1; ++i) types[i] = in;
        types[n - 1] = out;
        return;
    }
    int total = 1;
    for (int i = 0; i < n; ++i) total *= TSR_DTYPE_COUNT;
    for (int code = 0, seen = TSR_STORAGE_SETS; code < total; ++code) {
        decode(code, n, types);
        bool listed = false;
        for (int s = 0; s < TSR_STORAGE_SETS && !listed; ++s) listed = is_storage_set(s, n, types);
        if (!listed && seen++ == index) return;
    }
    decode(0, n, types); /* past the end: fp32 */
}

int tsr_dtype_combination_index(int n, const tsr_dtype *types) {
    int total = 1;
    for (int i = 0; i < n; ++i) total *= TSR_DTYPE_COUNT;
    tsr_dtype t[8];
    for (int index = 0; index < total && n <= 8; ++index) {
        tsr_dtype_combination(index, n, t);
        if (memcmp(t, types, (size_t)n * sizeof *t) == 0) return index;
    }
    return 0;
}
