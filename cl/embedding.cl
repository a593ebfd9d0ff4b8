// BERT's embedding sum, a gather (OpenCL C 1.2):
//   y[t][j] = word[ids[t]][j] + position[pos0 + t % seq_len][j] + token_type[type_ids[t]][j]
// Work-item (i, t) takes the VW-column vectors i, i + get_global_size(0), ... of token t (columns
// v VW .. v VW + VW - 1 of vector v): one vector load per table and one vector store (dtype.cl's
// TSR_VLD / TSR_VST, element alignment only, so any offset and any hidden work), adjacent items
// on adjacent vectors. The columns past the last whole vector (hidden % VW of them) are taken
// element by element, item i the columns i, i + get_global_size(0), ... of that tail. ids holds
// the word ids of the tokens, then (has_type_ids) their type ids; they were checked on the host;
// the tables are stored as T_TYPE and widened to fp32 in registers, y is stored as Y_TYPE
// (dtype.cl's codes, default 0: fp32). Missing terms are switched off by the flags (the host
// passes another valid buffer in their place).
// VW (2, 4, 8 or 16; default 16, a 64-byte fp32 vector or 32 bytes of 16-bit storage): the
// element-by-element gather it replaces ran the 16-bit forms at 0.2x (f16, a scalar vload_half
// per element) and 0.8x (bf16) the fp32 one.
// On AVX-512 CPUs (dtype_avx512.cl) the 16-bit conversions are AVX-512's zmm ones, and bf16 tables
// into a bf16 y, f16 tables into an f16 y go 32 columns a step (EMB_VEC2 below).
// TPI (1 or 2; default 1): tokens per work-item, item (i, g) taking tokens g TPI .. g TPI + TPI - 1
// with their vectors interleaved in one loop (two random rows in flight); a second token past
// the end reads token tokens - 1's rows (in range) and stores nothing.
#include "dtype.cl"
#include "dtype_avx512.cl"

#ifndef Y_TYPE
#define Y_TYPE 0
#endif
#ifndef T_TYPE
#define T_TYPE 0
#endif
#ifndef VW
#define VW 16
#endif
#define EMB_CAT_(a, b) a##b
#define EMB_CAT(a, b) EMB_CAT_(a, b)
typedef EMB_CAT(float, VW) emb_floatv;

#ifndef TPI
#define TPI 1
#endif

#define EMB_ROWS(k)                                                                                                  \
    const ulong t##k = get_global_id(1) * TPI + k;                                                                   \
    const ulong c##k = t##k < tokens ? t##k : tokens - 1; /* past the end: read in range, never stored */                    \
    const __global TSR_ELT(T_TYPE) *w##k = word + word_off + (ulong)ids[c##k] * hidden;                               \
    const __global TSR_ELT(T_TYPE) *p##k = position + position_off + (position_start + c##k % seq_len) * hidden;     \
    const __global TSR_ELT(T_TYPE) *tt##k =                                                                          \
        token_type + token_type_off + (has_type_ids ? (ulong)ids[tokens + c##k] : 0) * hidden;                       \
    __global TSR_ELT(Y_TYPE) *ys##k = y + y_off + c##k * y_stride;
// VW = 16 on AVX-512 CPUs (dtype_avx512.cl's TSR_X16): f16 through zmm vcvtph2ps / vcvtps2ph, the
// bf16 store's rounding in mask registers, and bf16 tables with a bf16 y (EMB_PAIR) 32 columns a
// step, the even and the odd columns as two float16 (no lane moves; the sums are the same fp32
// sums in the same order, so y is bit for bit the 16-column path's), and f16 tables with an f16 y
// 32 columns a step too (one 64-byte store). The rest keeps dtype.cl's.
#if defined(TSR_X16) && VW == 16 && T_TYPE == 1
#define EMB_VLD(p) TSR_X16_LD_F16(p)
#else
#define EMB_VLD(p) TSR_VLD(T_TYPE, VW, p)
#endif
#if defined(TSR_X16) && VW == 16 && Y_TYPE == 1
#define EMB_VST(v, p) TSR_X16_ST_F16(v, p)
#elif defined(TSR_X16) && VW == 16 && Y_TYPE == 2
#define EMB_VST(v, p) TSR_X16_ST_BF16(v, p)
#else
#define EMB_VST(v, p) TSR_VST(Y_TYPE, VW, v, p)
#endif
#if defined(TSR_X16) && VW == 16 && T_TYPE == 2 && Y_TYPE == 2
#define EMB_PAIR 1
#define EMB_VEC2(k)                                                                                                  \
    {                                                                                                                \
        const uint16 w = TSR_X16_LD32(w##k + j);                                                                     \
        float16 even = TSR_X16_BF16_EVEN(w), odd = TSR_X16_BF16_ODD(w);                                              \
        if (has_position) {                                                                                          \
            const uint16 q = TSR_X16_LD32(p##k + j);                                                                 \
            even += TSR_X16_BF16_EVEN(q), odd += TSR_X16_BF16_ODD(q);                                                \
        }                                                                                                            \
        if (has_token_type) {                                                                                        \
            const uint16 q = TSR_X16_LD32(tt##k + j);                                                                \
            even += TSR_X16_BF16_EVEN(q), odd += TSR_X16_BF16_ODD(q);                                                \
        }                                                                                                            \
        TSR_X16_ST32(TSR_X16_BF16_PAIR(tsr_x16_bf16_hi_q(even), tsr_x16_bf16_hi_q(odd)), ys##k + j);                    \
    }
#elif defined(TSR_X16) && VW == 16 && T_TYPE == 1 && Y_TYPE == 1
// f16 tables into an f16 y: 32 columns a step as two float16 and one 64-byte store
// (TSR_X16_F16_PAIR), the same sums and roundings as the 16-column path, so the same y bit for bit.
#define EMB_PAIR 1
#define EMB_VEC2(k)                                                                                                  \
    {                                                                                                                \
        float16 a = EMB_VLD(w##k + j), b = EMB_VLD(w##k + j + VW);                                                   \
        if (has_position) a += EMB_VLD(p##k + j), b += EMB_VLD(p##k + j + VW);                                       \
        if (has_token_type) a += EMB_VLD(tt##k + j), b += EMB_VLD(tt##k + j + VW);                                   \
        TSR_X16_ST32(TSR_X16_F16_PAIR(a, b), ys##k + j);                                                             \
    }
#endif
#define EMB_VEC(k)                                                                                                   \
    {                                                                                                                \
        emb_floatv sum = EMB_VLD(w##k + j);                                                                          \
        if (has_position) sum += EMB_VLD(p##k + j);                                                                  \
        if (has_token_type) sum += EMB_VLD(tt##k + j);                                                               \
        EMB_VST(sum, ys##k + j);                                                                                     \
    }
#define EMB_ONE(k)                                                                                                   \
    {                                                                                                                \
        float sum = TSR_LD(T_TYPE, w##k, j);                                                                         \
        if (has_position) sum += TSR_LD(T_TYPE, p##k, j);                                                            \
        if (has_token_type) sum += TSR_LD(T_TYPE, tt##k, j);                                                         \
        TSR_ST(Y_TYPE, sum, ys##k, j);                                                                               \
    }

// On x86-64 CPUs (PoCL; clang's __builtin_prefetch, a hint that never faults) each item first
// prefetches the word rows of the next item's TPI tokens, which the same thread usually runs next
// (PoCL runs a work-group's items in order), so a random row's first misses overlap this item's
// work instead of stalling the next one (CPU time per 4096x768 call, load 9: f16 0.85 -> 0.45 ms,
// bf16 0.70 -> 0.41, fp32 1.4 -> 0.95). Only where the kernel is compiled for x86-64 itself
// (compilers that go through SPIR-V reject the intrinsic; see gemm_smallm.cl).
#if defined(__has_builtin) && defined(__x86_64__)
#if __has_builtin(__builtin_prefetch)
#define EMB_PREFETCH_NEXT()                                                                                          \
    if (get_global_id(0) == 0) {                                                                                     \
        for (ulong n = (get_global_id(1) + 1) * TPI; n < (get_global_id(1) + 2) * TPI && n < tokens; ++n) {          \
            const __global char *row = (const __global char *)(word + word_off + (ulong)ids[n] * hidden);            \
            for (ulong o = 0; o < hidden * sizeof(TSR_ELT(T_TYPE)); o += 64) __builtin_prefetch(row + o);             \
        }                                                                                                            \
    }
#endif
#endif
#ifndef EMB_PREFETCH_NEXT
#define EMB_PREFETCH_NEXT()
#endif

__kernel void embedding(const ulong tokens, const ulong hidden, const ulong seq_len, const ulong position_start,
                        __global const int *ids, const int has_position,
                        const int has_token_type, const int has_type_ids, __global const TSR_ELT(T_TYPE) *word,
                        const ulong word_off, __global const TSR_ELT(T_TYPE) *position, const ulong position_off,
                        __global const TSR_ELT(T_TYPE) *token_type, const ulong token_type_off, __global TSR_ELT(Y_TYPE) *y,
                        const ulong y_off, const ulong y_stride) {
    if (get_global_id(1) * TPI >= tokens) return;
    EMB_PREFETCH_NEXT()
    EMB_ROWS(0)
#if TPI == 2
    EMB_ROWS(1)
    const bool two = t1 < tokens;
#endif
#if defined(EMB_PAIR)
    const ulong pairs = hidden / (2 * VW) * (2 * VW); /* columns taken 32 a step */
    for (ulong j = get_global_id(0) * (2 * VW); j < pairs; j += get_global_size(0) * (2 * VW)) {
        EMB_VEC2(0)
#if TPI == 2
        if (two) EMB_VEC2(1)
#endif
    }
#else
    const ulong pairs = 0;
#endif
    const ulong whole = hidden / VW * VW;
    for (ulong j = pairs + get_global_id(0) * VW; j < whole; j += get_global_size(0) * VW) {
        EMB_VEC(0)
#if TPI == 2
        if (two) EMB_VEC(1)
#endif
    }
    for (ulong j = whole + get_global_id(0); j < hidden; j += get_global_size(0)) {
        EMB_ONE(0)
#if TPI == 2
        if (two) EMB_ONE(1)
#endif
    }
}
