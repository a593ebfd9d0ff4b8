// 16 elements of 16-bit storage to and from float16 with AVX-512's own instructions (OpenCL C 1.2
// under clang with __AVX512F__: PoCL's CPU device on such a CPU), for the kernels whose hot loops
// are their conversions (GELU with a 16-bit y, tsr_convert, LayerNorm, the embedding gather).
// Include after dtype.cl, as a kernel's own include (the embedder splices one level deep). Defines
// TSR_X16 where it applies; elsewhere nothing, and the kernels keep dtype.cl's TSR_VLD / TSR_VST.
//   TSR_X16_LD_F16(p), TSR_X16_ST_F16(v, p)   16 halves at p (2-byte alignment) as float16 and
//            back: one zmm vcvtph2ps / vcvtps2ph (vload_half16 / vstore_half16_rte compile to two
//            ymm ones and a lane shuffle each), rounding to nearest even as vstore_half_rte; the
//            load's argument 8 ({sae}) keeps clang from an fpext on half, which LLVM then moves
//            compares onto, lane by lane on x86 without AVX512-FP16
//   tsr_x16_bf16_hi(v)   the bf16 of each lane of v in its high 16 bits (the low 16 are junk):
//            dtype.cl's tsr_dt_bf16_round bit for bit (to nearest even, NaN: the top 16 bits with
//            the quiet bit 0x40, overflow to Inf) in mask registers: the tie's parity (bit 16) by
//            vptestmd and the bias 0x7fff or 0x8000 by a masked add, a NaN (v != v, vcmpunordps: a
//            compare, which changes no value) by a masked or: 5 instructions, where
//            tsr_dt_bf16_round's shifts, adds and integer NaN test take 7
//   TSR_X16_ST_BF16(v, p)  16 bf16 at p: tsr_x16_bf16_hi, vpsrld and vpmovdw to memory
//   TSR_X16_LD32(p), TSR_X16_ST32(w, p)   32 16-bit elements at p (2-byte alignment) as uint16
//            and back, one zmm move. A bf16 -> bf16 kernel goes 32 elements a step without lane
//            moves: TSR_X16_BF16_EVEN(w) and TSR_X16_BF16_ODD(w) (w << 16, w & 0xffff0000) are
//            the even and the odd elements as float16, and TSR_X16_BF16_PAIR(he, ho), from the
//            two results' tsr_x16_bf16_hi (or _q: bf16 inputs only), puts them back in place.
//   TSR_X16_F16_PAIR(a, b)  two float16 as 32 halves (uint16) for one TSR_X16_ST32
#ifndef TSR_DTYPE_AVX512_CL
#define TSR_DTYPE_AVX512_CL

#if defined(__clang__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__x86_64__)
#define TSR_X16 1
#define TSR_X16_ALL ((ushort)0xffffu)
#define TSR_X16_LD_F16(p)                                                                          \
    __builtin_ia32_vcvtph2ps512_mask(as_short16(TSR_DT_VLD16(16, p)), (float16)(0.0f), TSR_X16_ALL, 8)
#define TSR_X16_ST_F16(v, p)                                                                       \
    TSR_DT_VST16(16, as_ushort16(__builtin_ia32_vcvtps2ph512_mask((v), 0, (short16)(0), TSR_X16_ALL)), p)
TSR_DT_INLINE uint16 tsr_x16_bf16_hi(const float16 v) {
    const uint16 u = as_uint16(v);
    const uint16 t = select(u + 0x7fffu, u + 0x8000u, (u & 0x10000u) != (uint16)(0u));
    return select(t, u | 0x400000u, as_uint16(v != v));
}
// tsr_x16_bf16_hi_q(v): the same for a v whose NaNs all have their low 16 bits 0, as every NaN of
// arithmetic on bf16 values has (x86 passes an operand's NaN on, quieted, or makes 0xffc00000):
// the rounding's add then carries nothing out of a NaN's low half, whose high half is already the
// quiet NaN, so no NaN test (3 instructions).
TSR_DT_INLINE uint16 tsr_x16_bf16_hi_q(const float16 v) {
    const uint16 u = as_uint16(v);
    return select(u + 0x7fffu, u + 0x8000u, (u & 0x10000u) != (uint16)(0u));
}
#define TSR_X16_ST_BF16(v, p) TSR_DT_VST16(16, convert_ushort16(tsr_x16_bf16_hi(v) >> 16), p)
typedef uint16 tsr_x16_uint16_u __attribute__((aligned(2)));
#define TSR_X16_LD32(p) (*(const __global tsr_x16_uint16_u *)(p))
#define TSR_X16_ST32(w, p) (*(__global tsr_x16_uint16_u *)(p) = (w))
#define TSR_X16_BF16_EVEN(w) as_float16((w) << 16)
#define TSR_X16_BF16_ODD(w) as_float16((w) & 0xffff0000u)
#define TSR_X16_BF16_PAIR(he, ho) (((he) >> 16) | ((ho) & 0xffff0000u))
// TSR_X16_F16_PAIR(a, b): 32 halves, a's 16 then b's, rounded to nearest even, as one uint16 for
// TSR_X16_ST32: two register-form vcvtps2ph and a vinsertf64x4 before one 64-byte store, where
// TSR_X16_ST_F16 twice becomes two memory-form vcvtps2ph (4 micro-ops each on Skylake-X and
// Cascade Lake against 2; the f16 embedding gather went 1.64-1.74x -> 1.76-1.99x fp32 by it).
#define TSR_X16_F16_BITS8(v) as_uint8(__builtin_ia32_vcvtps2ph512_mask((v), 0, (short16)(0), TSR_X16_ALL))
#define TSR_X16_F16_PAIR(a, b) ((uint16)(TSR_X16_F16_BITS8(a), TSR_X16_F16_BITS8(b)))
#endif

#endif
