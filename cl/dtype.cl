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
