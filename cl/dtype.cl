// Storage types of a kernel's tensors (OpenCL C 1.2, no extension needed), codes as tsr_dtype:
//   0 f32; 1 f16 through vload_half / vstore_half_rte (core OpenCL C: a `half *` may be declared
//   and passed without cl_khr_fp16, only arithmetic on half needs it); 2 bf16 as ushort, widened
//   by a 16-bit shift and narrowed in software, rounding to nearest even (NaN kept, quiet).
// A kernel names each tensor's type with a -D define T (0, 1 or 2) and uses:
//   TSR_ELT(T)             the element type of its pointers: float, half or ushort
//   TSR_LD(T, p, i)        element i of p, as float
//   TSR_ST(T, v, p, i)     float v stored as element i of p
//   TSR_VLD(T, N, p)       N consecutive elements at p as floatN (N = 2, 4, 8, 16; vloadN and
//                          vload_halfN need only element alignment)
//   TSR_VST(T, N, v, p)    floatN v stored as N consecutive elements at p
// Arithmetic stays in fp32 whatever the storage: the kernels convert at loads and stores only.
// Include it after nothing (the embedder splices included text one level deep).
#ifndef TSR_DTYPE_CL
#define TSR_DTYPE_CL

#ifdef __clang__
#define TSR_DT_INLINE __attribute__((always_inline))
#else
#define TSR_DT_INLINE
#endif

#define TSR_DT_CAT_(a, b) a##b
#define TSR_DT_CAT(a, b) TSR_DT_CAT_(a, b)

TSR_DT_INLINE float tsr_bf16_to_f32(const ushort h) { return as_float((uint)h << 16); }
TSR_DT_INLINE ushort tsr_f32_to_bf16(const float f) {
    const uint u = as_uint(f);
    // The rounding carry may run into the exponent (and up to Inf): that is the right result.
    return isnan(f) ? (ushort)((u >> 16) | 0x40u) : (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#define TSR_DT_BF16_VEC(N)                                                                         \
    TSR_DT_INLINE float##N tsr_bf16_to_f32_##N(const ushort##N h) { return as_float##N(convert_uint##N(h) << 16); } \
    TSR_DT_INLINE ushort##N tsr_f32_to_bf16_##N(const float##N f) {                                \
        const uint##N u = as_uint##N(f);                                                           \
        const uint##N rounded = (u + (uint##N)(0x7fffu) + ((u >> 16) & (uint##N)(1u))) >> 16;      \
        const uint##N quiet = (u >> 16) | (uint##N)(0x40u);                                        \
        return convert_ushort##N(select(rounded, quiet, as_uint##N(isnan(f))));                    \
    }
TSR_DT_BF16_VEC(2)
TSR_DT_BF16_VEC(4)
TSR_DT_BF16_VEC(8)
TSR_DT_BF16_VEC(16)

// Conversions on integer bits, for tsr_convert: bit for bit tsr_convert_host (runtime/dtype.c),
// where no float instruction ever holds a value, so a signalling NaN keeps its bits (x86, like
// most hardware, quiets one in any float operation, vload_half and vstore_half included):
//   tsr_f16b_to_f32b    widens exactly (NaN payloads shifted up, signalling ones kept)
//   tsr_f32b_to_f16b    rounds to nearest even; NaN: sign | 0x7e00 | the payload's top 10 bits
//   tsr_f32b_to_bf16b   rounds to nearest even; NaN: the top 16 bits | 0x40 (quiet)
// (bf16 widens by a shift.) Each on uint and uint2..uint16 (suffix _N); every value is in a uint.
#define TSR_DT_BITS(SUF, U)                                                                        \
    TSR_DT_INLINE U tsr_f16b_to_f32b##SUF(const U h) {                                             \
        const U sg = (h & (U)(0x8000u)) << 16, e = (h >> 10) & (U)(0x1fu), mant = h & (U)(0x3ffu); \
        /* a subnormal mant 2^-24: its top bit p (0..9) becomes the implicit bit of 2^(p - 24) */ \
        const U p = (U)(31u) - clz(mant);                                                          \
        const U sub = ((p + (U)(103u)) << 23) | ((mant << ((U)(23u) - p)) & (U)(0x7fffffu));       \
        U r = select(((e + (U)(112u)) << 23) | (mant << 13), (U)(0x7f800000u) | (mant << 13),      \
                     e == (U)(31u));                                                               \
        r = select(r, select((U)(0u), sub, mant != (U)(0u)), e == (U)(0u));                         \
        return sg | r;                                                                           \
    }                                                                                              \
    TSR_DT_INLINE U tsr_f32b_to_f16b##SUF(const U u) {                                             \
        const U sg = (u >> 16) & (U)(0x8000u), a = u & (U)(0x7fffffffu), e = a >> 23;            \
        const U normal = (a + (U)(0xfffu) + ((a >> 13) & (U)(1u)) - (U)(0x38000000u)) >> 13;       \
        /* below f16's normal range: round(|v| 2^24) = the significand m shifted right by s >= 14 */ \
        const U m = (a & (U)(0x7fffffu)) | select((U)(0u), (U)(0x800000u), e != (U)(0u));          \
        const U s = min((U)(126u) - max(e, (U)(1u)), (U)(31u));                                    \
        const U q = m >> s, rem = m & (((U)(1u) << s) - (U)(1u)), tie = (U)(1u) << (s - (U)(1u)); \
        const U sub = q + select((U)(0u), (U)(1u), (rem > tie) | ((rem == tie) & ((q & (U)(1u)) != (U)(0u)))); \
        U r = select(sub, normal, a >= (U)(0x38800000u));                                          \
        r = select(r, (U)(0x7c00u), a >= (U)(0x477ff000u)); /* 65520 and up: Inf */                \
        r = select(r, (U)(0x7e00u) | ((a >> 13) & (U)(0x3ffu)), a > (U)(0x7f800000u));             \
        return sg | r;                                                                           \
    }                                                                                              \
    TSR_DT_INLINE U tsr_f32b_to_bf16b##SUF(const U u) {                                            \
        const U rounded = (u + (U)(0x7fffu) + ((u >> 16) & (U)(1u))) >> 16;                        \
        return select(rounded, (u >> 16) | (U)(0x40u), (u & (U)(0x7fffffffu)) > (U)(0x7f800000u));  \
    }
TSR_DT_BITS(, uint)
TSR_DT_BITS(_2, uint2)
TSR_DT_BITS(_4, uint4)
TSR_DT_BITS(_8, uint8)
TSR_DT_BITS(_16, uint16)

#define TSR_ELT_0 float
#define TSR_ELT_1 half
#define TSR_ELT_2 ushort
#define TSR_ELT(T) TSR_DT_CAT(TSR_ELT_, T)

#define TSR_LD_0(p, i) ((p)[i])
#define TSR_LD_1(p, i) vload_half((i), (p))
#define TSR_LD_2(p, i) tsr_bf16_to_f32((p)[i])
#define TSR_LD(T, p, i) TSR_DT_CAT(TSR_LD_, T)(p, i)

#define TSR_ST_0(v, p, i) ((p)[i] = (v))
#define TSR_ST_1(v, p, i) vstore_half_rte((v), (i), (p))
#define TSR_ST_2(v, p, i) ((p)[i] = tsr_f32_to_bf16(v))
#define TSR_ST(T, v, p, i) TSR_DT_CAT(TSR_ST_, T)(v, p, i)

#define TSR_VLD_0(N, p) vload##N(0, (p))
// PoCL 3.1 (x86-64) compiles vload_half8 to an aligned 16-byte move (vmovdqa) and faults on an
// address that is only 2-byte aligned, as vload_halfN allows (an f16 tensor at an odd offset):
// eight halves are read as two vload_half4 (8-byte moves) instead. p is evaluated twice.
#define TSR_VLD_1_2(p) vload_half2(0, (p))
#define TSR_VLD_1_4(p) vload_half4(0, (p))
#define TSR_VLD_1_8(p) ((float8)(vload_half4(0, (p)), vload_half4(1, (p))))
#define TSR_VLD_1_16(p) vload_half16(0, (p))
#define TSR_VLD_1(N, p) TSR_VLD_1_##N(p)
#define TSR_VLD_2(N, p) tsr_bf16_to_f32_##N(vload##N(0, (p)))
#define TSR_VLD(T, N, p) TSR_DT_CAT(TSR_VLD_, T)(N, p)

#define TSR_VST_0(N, v, p) vstore##N((v), 0, (p))
#define TSR_VST_1(N, v, p) vstore_half##N##_rte((v), 0, (p))
#define TSR_VST_2(N, v, p) vstore##N(tsr_f32_to_bf16_##N(v), 0, (p))
#define TSR_VST(T, N, v, p) TSR_DT_CAT(TSR_VST_, T)(N, v, p)

#endif
