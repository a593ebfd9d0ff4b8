// Storage types of a kernel's tensors (OpenCL C 1.2, no extension needed), codes as tsr_dtype:
//   0 f32; 1 f16 through vload_half / vstore_half_rte (core OpenCL C: a `half *` may be declared
//   and passed without cl_khr_fp16, only arithmetic on half needs it); 2 bf16 as ushort, widened
//   by a 16-bit shift and narrowed in software, rounding to nearest even (NaN kept, quiet).
// A kernel names each tensor's type with a -D define T (0, 1 or 2) and uses:
//   TSR_ELT(T)             the element type of its pointers: float, half or ushort
//   TSR_LD(T, p, i)        element i of p, as float
//   TSR_ST(T, v, p, i)     float v stored as element i of p
//   TSR_VLD(T, N, p)       N consecutive elements at p as floatN (N = 2, 4, 8, 16; p is a
//                          __global pointer with element alignment only)
//   TSR_VST(T, N, v, p)    floatN v stored as N consecutive elements at p (the same)
//   TSR_DT_VLD16(N, p), TSR_DT_VST16(N, v, p)   N 16-bit elements at p as ushortN, and back
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

// N 16-bit elements at p (a __global pointer to half or ushort) as ushortN, and back. On x86
// and 64-bit ARM under clang (PoCL's CPU devices) through a pointer to a ushortN typedef whose
// alignment is lowered to 2 bytes: one unaligned vector move (vmovdqu), where PoCL 3.1's own
// vstoreN on ushort stores element by element (16 extracts and 16-bit moves for ushort16, the
// bf16 store's whole cost). Elsewhere (Oclgrind, rusticl, GPU compilers) vloadN / vstoreN.
#if defined(__clang__) && (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__))
typedef ushort2 tsr_dt_ushort2_u __attribute__((aligned(2)));
typedef ushort4 tsr_dt_ushort4_u __attribute__((aligned(2)));
typedef ushort8 tsr_dt_ushort8_u __attribute__((aligned(2)));
typedef ushort16 tsr_dt_ushort16_u __attribute__((aligned(2)));
#define TSR_DT_U16V(N) TSR_DT_CAT(TSR_DT_CAT(tsr_dt_ushort, N), _u)
#define TSR_DT_VLD16(N, p) (*(const __global TSR_DT_U16V(N) *)(p))
#define TSR_DT_VST16(N, v, p) (*(__global TSR_DT_U16V(N) *)(p) = (v))
#else
#define TSR_DT_VLD16(N, p) TSR_DT_CAT(vload, N)(0, (const __global ushort *)(p))
#define TSR_DT_VST16(N, v, p) TSR_DT_CAT(vstore, N)((v), 0, (__global ushort *)(p))
#endif

// bf16 <-> f32 on the bits. Widening is a 16-bit shift. Narrowing, tsr_dt_bf16_round on the
// f32 bits (uint or uintN; GELU's copy kernel, which is tsr_convert, runs the same function, so
// its bit-for-bit tests cover every kernel's bf16 stores), rounds to nearest even by integer adds:
// u + 0x7fff + (bit 16 of u), shifted down 16; the carry may run into the exponent (and up to Inf:
// overflow rounds to Inf, as IEEE). A NaN, |u| > 0x7f800000 as an integer compare (no float
// instruction, so no isnan, nothing quieted on the way), keeps its top 16 bits with the quiet bit
// 0x40 set: a payload in the low 16 bits only still gives a NaN, never Inf. The result is below
// 2^16 in every lane (the add cannot wrap for a non-NaN u, at most 0xff800000), which LLVM sees
// from the shifts and narrows without saturation (vpmovdw on AVX-512, packs on AVX2).
#define TSR_DT_BF16_ROUND(SUF, U)                                                                 \
    TSR_DT_INLINE U tsr_dt_bf16_round##SUF(const U u) {                                           \
        const U hi = u >> 16;                                                                     \
        const U rounded = (u + (U)(0x7fffu) + (hi & (U)(1u))) >> 16;                              \
        return select(rounded, hi | (U)(0x40u), (u & (U)(0x7fffffffu)) > (U)(0x7f800000u));       \
    }
TSR_DT_BF16_ROUND(, uint)
TSR_DT_BF16_ROUND(_2, uint2)
TSR_DT_BF16_ROUND(_4, uint4)
TSR_DT_BF16_ROUND(_8, uint8)
TSR_DT_BF16_ROUND(_16, uint16)

TSR_DT_INLINE float tsr_bf16_to_f32(const ushort h) { return as_float((uint)h << 16); }
TSR_DT_INLINE ushort tsr_f32_to_bf16(const float f) { return (ushort)tsr_dt_bf16_round(as_uint(f)); }
#define TSR_DT_BF16_VEC(N)                                                                         \
    TSR_DT_INLINE float##N tsr_bf16_to_f32_##N(const ushort##N h) { return as_float##N(convert_uint##N(h) << 16); } \
    TSR_DT_INLINE ushort##N tsr_f32_to_bf16_##N(const float##N f) {                                \
        return convert_ushort##N(tsr_dt_bf16_round_##N(as_uint##N(f)));                           \
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
#define TSR_VLD_2(N, p) tsr_bf16_to_f32_##N(TSR_DT_VLD16(N, p))
#define TSR_VLD(T, N, p) TSR_DT_CAT(TSR_VLD_, T)(N, p)

#define TSR_VST_0(N, v, p) vstore##N((v), 0, (p))
#define TSR_VST_1(N, v, p) vstore_half##N##_rte((v), 0, (p))
#define TSR_VST_2(N, v, p) TSR_DT_VST16(N, tsr_f32_to_bf16_##N(v), p)
#define TSR_VST(T, N, v, p) TSR_DT_CAT(TSR_VST_, T)(N, v, p)

#endif
