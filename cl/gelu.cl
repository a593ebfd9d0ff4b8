// GELU, fused into one pass (OpenCL C 1.2), and the unfused baseline a naive framework runs.
//
// Fused kernel `gelu`, from -D defines:
//   VW       vector width (1, 2, 4, 8, 16): loads and stores with vloadN/vstoreN, which need
//            only float alignment, so any offset works
//   VPT      vectors per work-item
//   INTERLEAVE  0: a work-item owns VW*VPT consecutive elements (CPUs: one stream per thread);
//            1: consecutive work-items take consecutive vectors (GPUs: coalesced accesses)
//   MODE     0 copy (the bandwidth yardstick and tsr_convert, same geometry), 2 GELU tanh, 3 GELU erf.
//            The copy moves integer bits only (tsr_*b_to_*b below between types, a plain copy
//            within one): bit for bit tsr_convert_host, signalling NaNs included
//   X_TYPE, Y_TYPE  storage of x and y (dtype.cl's codes: 0 f32, 1 f16, 2 bf16; default 0):
//            loads widen to float, GELU runs in float, stores round to nearest even; with both 0
//            the loads and stores are the plain float ones
// The host launches ceil(n / (VW*VPT)) work-items rounded up to the work-group size; the
// work-item holding the tail finishes it element by element.
//
// Unfused baseline: one kernel per elementary operation, one element per work-item, every
// intermediate written to and read back from global memory.
#include "activation.cl"
#include "dtype.cl"
#include "dtype_avx512.cl"

#ifndef VW
#define VW 1
#endif
#ifndef VPT
#define VPT 1
#endif
#ifndef INTERLEAVE
#define INTERLEAVE 0
#endif
#ifndef MODE
#define MODE TSR_ACT_GELU_TANH
#endif

#ifndef X_TYPE
#define X_TYPE 0
#endif
#ifndef Y_TYPE
#define Y_TYPE 0
#endif

#include "vector.cl"

// GELU for a 16-bit y on AVX-512 CPUs (GELU16: MODE 2 or 3, Y_TYPE 1 or 2, VW = 16, clang with
// __AVX512F__ and __AVX512DQ__, i.e. PoCL's CPU device on such a CPU). y keeps 11 (f16) or 8
// (bf16) significant bits, so the fp32 value before its store needs about 2^-14 of max(1, |x|),
// not fp32's 2^-23. Both forms (session 26) compute
//     GELU(x) = max(-0, x) - a h(a),   a = min(|x|, 4.6),   h(a) = c0 + a (c1 + a c2),
// h = (1 - tanh(u(a))) / 2 = 1 / (1 + e^(2 u(a))) (tanh) or erfc(a / sqrt(2)) / 2 (erf), with
// c0, c1, c2 a quadratic per interval of a of width 1/3.2: entry j = round(3.2 a) of three tables
// of 16 (bench/gelu16_fit.py, linear programming on GELU's largest error in each interval, numpy
// and scipy). The index is fma(a, 3.2, 1.5 2^23) taken as bits, whose low four bits vpermps reads
// (a <= 4.6: j <= 15); entries 14 and 15 are 0, so h = 0 exactly from a = 4.21875 on: y = x from
// there (+Inf included) and -0 below -4.21875 (-Inf included), where |GELU(x)| < 2.4e-5 (tanh),
// 5.2e-5 (erf); a quiet NaN x gives a = 4.6, h = 0 and y = max(-0, x) = x (x > 0: x - x h; x <= 0:
// x h, -0 for x <= 0 whatever a h is, +0 included). Error, the fp32 value before the store against
// the double reference (bench/gelu16_error: every f16 and bf16 input, fp32 ones): 2.8e-5 max(1,
// |x|) (both forms), under TSR_GELU16_ERROR = 2^-13 (docs/dtypes.md, "Error bounds"); h is good to
// that absolute error only, not to y's relative precision in the tail (GELU(-4) = -7e-5). Per 16
// elements f16 -> f16, from the load to the store: 11 vector operations: vrangeps, four FMAs,
// three vpermps, vmaxps and the two conversions (zmm vcvtph2ps / vcvtps2ph). Before (sessions
// 24-25): 13, h = max(q(a), 0)^4 with q of degree 5 (five FMAs, vmaxps and two squarings: eight
// FMA-pipe operations), 10-17% more CPU time per element (docs/dtypes.md, "Session 26"; 32-entry
// tables of width 1/4 by vpermt2ps, which overwrites a table or the index, took 1-5% more than
// these); sessions 16-23: 14-15, with 2^t by vreduceps and vscalefps and 1 / (1 +
// 2^t) by vrcp14ps. These loops are bound by the vector instructions they issue, so each one
// removed shows. An fp32 y, other vector widths, the tail's elements and every other device keep
// activation.cl's fp32 forms.
#if MODE != 0 && Y_TYPE != 0 && VW == 16 && defined(TSR_X16) && defined(__AVX512DQ__)
#define GELU16 1
// (The builtins take and return 16-float vectors; clang converts float16 to and from them.)
#define G16_ALL TSR_X16_ALL
#define G16_CUR 4 /* _MM_FROUND_CUR_DIRECTION */
#define G16_A 4.6f
/* 3.2 a + 1.5 2^23 holds round(3.2 a) (to nearest even) in its low bits: the table index */
#define G16_SCALE 3.2f
#define G16_ROUND 12582912.0f
/* the tables of bench/gelu16_fit.py (its output, as printed): c0, c1, c2 of each interval */
#if MODE == TSR_ACT_GELU_TANH
#define G16_T0 ((float16)(0.500045598f, 0.501727164f, 0.510729015f, 0.520315766f, 0.511490822f, 0.467633009f, \
    0.388232768f, 0.288902521f, 0.19115068f, 0.111543179f, 0.0568996854f, 0.0250791907f, \
    0.0094507942f, 0.00301354052f, 0.0f, 0.0f))
#define G16_T1 ((float16)(-0.400733829f, -0.417365849f, -0.455676913f, -0.481212318f, -0.466082364f, -0.404254198f, \
    -0.311942726f, -0.213933647f, -0.130213246f, -0.0699966401f, -0.0329885967f, -0.0134789636f, \
    -0.00472606346f, -0.00140735379f, 0.0f, 0.0f))
#define G16_T2 ((float16)(0.0199265201f, 0.0615982935f, 0.102683388f, 0.119709045f, 0.113243371f, 0.0914338529f, \
    0.0645859465f, 0.0403983332f, 0.0224664342f, 0.0110762427f, 0.00480894325f, 0.00181806949f, \
    0.000592378783f, 0.000164602214f, 0.0f, 0.0f))
#else
#define G16_T0 ((float16)(0.500045419f, 0.501722038f, 0.510751784f, 0.52056706f, 0.512066126f, 0.467967927f, \
    0.387380391f, 0.286737502f, 0.188841507f, 0.11049895f, 0.0575113334f, 0.0266428404f, \
    0.0110196415f, 0.00408252049f, 0.0f, 0.0f))
#define G16_T1 ((float16)(-0.400725305f, -0.417304963f, -0.455714941f, -0.481824249f, -0.467299134f, -0.405150115f, \
    -0.311463654f, -0.212150946f, -0.128293127f, -0.0690234005f, -0.0331340358f, -0.0142099662f, \
    -0.00546299294f, -0.0018888379f, 0.0f, 0.0f))
#define G16_T2 ((float16)(0.0198305864f, 0.0613599457f, 0.102530479f, 0.119917274f, 0.113734163f, 0.0918179452f, \
    0.0645717084f, 0.0400603078f, 0.0220959969f, 0.0108830463f, 0.00480472483f, 0.00190390402f, \
    0.000679460994f, 0.00021904592f, 0.0f, 0.0f))
#endif
/* vmaxps with b as the second operand: b where either is NaN (a NaN x goes on) and where both
 * are zeros (max(-0, +0) = +0) */
TSR_INLINE float16 gelu16_max(const float16 a, const float16 b) { return __builtin_ia32_maxps512(a, b, G16_CUR); }
/* min(|x|, 4.6) in one vrangeps (imm 10: the smaller magnitude, sign cleared; a quiet NaN x gives 4.6) */
#define G16_ABS(x) __builtin_ia32_rangeps512_mask((x), (float16)(G16_A), 10, (x), G16_ALL, G16_CUR)
/* G16_FORMN: GELU on NV vectors (x and y arrays of NV), each statement over the NV vectors in
 * turn (a fully unrolled loop keeps that order), so the vectors' chains alternate and each waits
 * less on its predecessor (one vector's chain is some 40 cycles long). At VPT a multiple of 4,
 * four at once took 4-6% less CPU time than two (sessions 16-20); eight (STEP8, VPT a multiple
 * of 8, not bf16 -> bf16) keep more independent instructions in flight than the Zen 5's
 * schedulers find in four: 7-10% less CPU time per element for f16 -> f16 and f32 -> f16 (session
 * 21; bf16 -> bf16's 32-element pairs gained 0-2% from eight, not kept). Session 24's form
 * interleaved eight ways took 3.0 TSC ticks per 16 elements in a C mirror (gcc), one vector at a
 * time 3.8. With session 26's tables LLVM 15 (PoCL 3.1) schedules the eight chains one after the
 * other and the out-of-order core overlaps them. */
#define G16_LN(NV, stmt) _Pragma("unroll") for (int l = 0; l < (NV); ++l) { stmt; }
/* each lane's entry of table k at index t (its low 4 bits): one vpermps, which keeps its operands */
#define G16_PERM(k, t) __builtin_ia32_permvarsf512(G16_T##k, (t))
#define G16_FORMN(NV, y, x)                                                                        \
    do {                                                                                           \
        float16 a[NV], h[NV];                                                                      \
        int16 t[NV];                                                                               \
        G16_LN(NV, a[l] = G16_ABS(x[l]))                                                           \
        G16_LN(NV, t[l] = as_int16(fma(a[l], (float16)(G16_SCALE), (float16)(G16_ROUND))))        \
        G16_LN(NV, h[l] = fma(G16_PERM(2, t[l]), a[l], G16_PERM(1, t[l])))                         \
        G16_LN(NV, h[l] = fma(h[l], a[l], G16_PERM(0, t[l])))                                      \
        G16_LN(NV, y[l] = fma(-a[l], h[l], gelu16_max((float16)(-0.0f), x[l])))                    \
    } while (0)
TSR_INLINE float16 gelu16_form(const float16 x) {
    float16 xv[1] = {x}, yv[1];
    G16_FORMN(1, yv, xv);
    return yv[0];
}
#define G16_FORM2(y0, y1, x0, x1)                                                                  \
    do {                                                                                           \
        float16 xv2[2] = {(x0), (x1)}, yv2[2];                                                     \
        G16_FORMN(2, yv2, xv2);                                                                    \
        y0 = yv2[0], y1 = yv2[1];                                                                  \
    } while (0)
#define G16_L4(stmt) G16_LN(4, stmt)
#define G16_FORM4(y, x) G16_FORMN(4, y, x)
#endif

// VW elements of x at p as floatv, and floatv v stored as VW elements of y at p; element e of x
// and y for the tail. For type 0 these are VLOAD/VSTORE's own vloadN/vstoreN and plain accesses.
#if VW == 1
#define LOAD_X(p) TSR_LD(X_TYPE, p, 0)
#define STORE_Y(v, p) TSR_ST(Y_TYPE, v, p, 0)
#else
#define LOAD_X(p) TSR_VLD(X_TYPE, VW, p)
#define STORE_Y(v, p) TSR_VST(Y_TYPE, VW, v, p)
#endif
#define LOAD_X1(p, e) TSR_LD(X_TYPE, p, e)
#define STORE_Y1(v, p, e) TSR_ST(Y_TYPE, v, p, e)

#if MODE == 0
// Conversions on integer bits, for tsr_convert: bit for bit tsr_convert_host (runtime/dtype.c),
// where no float instruction ever holds a value, so a signalling NaN keeps its bits (x86, like
// most hardware, quiets one in any float operation, vload_half and vstore_half included):
//   tsr_f16b_to_f32b    widens exactly (NaN payloads shifted up, signalling ones kept)
//   tsr_f32b_to_f16b    rounds to nearest even; NaN: sign | 0x7e00 | the payload's top 10 bits
//   tsr_f32b_to_bf16b   rounds to nearest even; NaN: the top 16 bits | 0x40 (quiet)
// (bf16 widens by a shift.) Each on uint and uint2..uint16 (suffix _N); every value is in a uint.
// On AVX-512 fp32 -> f16 and bf16 take AVX-512's own instructions, to the same bits (STEP below).
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
    /* dtype.cl's, the function every kernel's bf16 stores run */                               \
    TSR_DT_INLINE U tsr_f32b_to_bf16b##SUF(const U u) { return tsr_dt_bf16_round##SUF(u); }
TSR_DT_BITS(, uint)
TSR_DT_BITS(_2, uint2)
TSR_DT_BITS(_4, uint4)
TSR_DT_BITS(_8, uint8)
TSR_DT_BITS(_16, uint16)

// The copy on bits: x's elements as uint (f32 bits, f16 or bf16 bits widened), converted between
// the types' encodings on integers (never through a float register), stored in y's encoding.
#define BITS_T_0 uint
#define BITS_T_1 ushort
#define BITS_T_2 ushort
#define XB TSR_DT_CAT(BITS_T_, X_TYPE)
#define YB TSR_DT_CAT(BITS_T_, Y_TYPE)
#define WIDEN_0(SUF, b) (b)
#define WIDEN_1(SUF, b) tsr_f16b_to_f32b##SUF(b)
#define WIDEN_2(SUF, b) ((b) << 16)
#define NARROW_0(SUF, b) (b)
#define NARROW_1(SUF, b) tsr_f32b_to_f16b##SUF(b)
#define NARROW_2(SUF, b) tsr_f32b_to_bf16b##SUF(b)
#if X_TYPE == Y_TYPE
#define CONVERT_BITS(SUF, b) (b)
#else
#define CONVERT_BITS(SUF, b) TSR_DT_CAT(NARROW_, Y_TYPE)(SUF, TSR_DT_CAT(WIDEN_, X_TYPE)(SUF, b))
#endif
#define LOADB1(p, e) ((uint)((__global const XB *)(p))[e])
#define STOREB1(v, p, e) (((__global YB *)(p))[e] = (YB)(v))
#if VW == 1
#define STEP(in, out) STOREB1(CONVERT_BITS(, LOADB1(in, 0)), out, 0)
#else
#define BSUF TSR_DT_CAT(_, VW)
// 16-bit elements move through dtype.cl's TSR_DT_VLD16 / TSR_DT_VST16 (one vector move on CPUs)
#define LOADB_0(p) TSR_DT_CAT(vload, VW)(0, (__global const uint *)(p))
#define LOADB_1(p) TSR_DT_CAT(convert_uint, VW)(TSR_DT_VLD16(VW, p))
#define LOADB_2(p) LOADB_1(p)
#define STOREB_0(v, p) TSR_DT_CAT(vstore, VW)((v), 0, (__global uint *)(p))
#define STOREB_1(v, p) TSR_DT_VST16(VW, TSR_DT_CAT(convert_ushort, VW)(v), p)
#define STOREB_2(v, p) STOREB_1(v, p)
#define LOADB(p) TSR_DT_CAT(LOADB_, X_TYPE)(p)
#define STOREB(v, p) TSR_DT_CAT(STOREB_, Y_TYPE)(v, p)
#define CONVERT_V(b) CONVERT_V_(BSUF, b)
#define CONVERT_V_(SUF, b) CONVERT_BITS(SUF, b)
#if defined(TSR_X16) && VW == 16 && X_TYPE == 0 && Y_TYPE == 1
// fp32 -> f16 on AVX-512: one zmm vcvtps2ph (to nearest even, overflow to Inf, a NaN as sign |
// 0x7e00 | the payload's top 10 bits, a signalling one quieted: tsr_f32b_to_f16b's result, bit for
// bit) where the integer form takes about 25 instructions; the load is a move, which changes no bits
#define STEP(in, out) TSR_X16_ST_F16(vload16(0, (const __global float *)(in)), out)
#elif defined(TSR_X16) && VW == 16 && X_TYPE == 0 && Y_TYPE == 2
// fp32 -> bf16 on AVX-512: dtype_avx512.cl's rounding (its NaN test a compare, no value changes)
#define STEP(in, out) TSR_X16_ST_BF16(as_float16(vload16(0, (const __global uint *)(in))), out)
#else
#define STEP(in, out) STOREB(CONVERT_V(LOADB(in)), out)
#endif
#endif
#define STEP1(xs, ys, e) STOREB1(CONVERT_BITS(, LOADB1(xs, e)), ys, e)
#else
#define APPLY(T, x) CAT(activate_, T)((x), MODE)
#if defined(GELU16)
// The 16-bit loads and stores are dtype_avx512.cl's: zmm vcvtph2ps / vcvtps2ph for f16, the bf16
// rounding in mask registers; bf16 -> bf16 with an even VPT (GELU16_PAIR) goes 32 elements a step,
// the even and the odd elements as two float16, with no lane moves (a bf16 element's load and
// store take half an instruction each, where vpmovzxwd + vpslld and vpsrld + vpmovdw take 2).
#if X_TYPE == 1
#define LOAD_X16(p) TSR_X16_LD_F16(p)
#else
#define LOAD_X16(p) LOAD_X(p)
#endif
#if Y_TYPE == 1
#define STORE_Y16(v, p) TSR_X16_ST_F16(v, p)
#elif Y_TYPE == 2
#define STORE_Y16(v, p) TSR_X16_ST_BF16(v, p)
#else
#define STORE_Y16(v, p) STORE_Y(v, p)
#endif
#define GELU16_F gelu16_form
#define GELU16_F2 G16_FORM2
#define GELU16_F4 G16_FORM4
#define GELU16_FN G16_FORMN
#define STEP(in, out) STORE_Y16(GELU16_F(LOAD_X16(in)), out)
#if X_TYPE == 2 && Y_TYPE == 2 && VPT % 2 == 0 && !INTERLEAVE
#define GELU16_PAIR 1
// 32 bf16 elements at in (2-byte alignment only) through GELU to out.
#define STEP2(in, out)                                                                             \
    do {                                                                                           \
        const uint16 w = TSR_X16_LD32(in);                                                         \
        float16 ge, go;                                                                            \
        GELU16_F2(ge, go, TSR_X16_BF16_EVEN(w), TSR_X16_BF16_ODD(w));                              \
        TSR_X16_ST32(TSR_X16_BF16_PAIR(tsr_x16_bf16_hi_q(ge), tsr_x16_bf16_hi_q(go)), out);         \
    } while (0)
#if VPT % 4 == 0
#define GELU16_QUAD 1
// 64 bf16 elements: two words of 32, their four vectors' chains interleaved.
#define STEP4(in, out)                                                                             \
    do {                                                                                           \
        const uint16 w0 = TSR_X16_LD32(in), w1 = TSR_X16_LD32((in) + 2 * VW);                      \
        float16 xv[4] = {TSR_X16_BF16_EVEN(w0), TSR_X16_BF16_ODD(w0), TSR_X16_BF16_EVEN(w1),       \
                         TSR_X16_BF16_ODD(w1)};                                                    \
        float16 yv[4];                                                                             \
        GELU16_F4(yv, xv);                                                                         \
        TSR_X16_ST32(TSR_X16_BF16_PAIR(tsr_x16_bf16_hi_q(yv[0]), tsr_x16_bf16_hi_q(yv[1])), out);   \
        TSR_X16_ST32(TSR_X16_BF16_PAIR(tsr_x16_bf16_hi_q(yv[2]), tsr_x16_bf16_hi_q(yv[3])),         \
                     (out) + 2 * VW);                                                              \
    } while (0)
#endif
#elif VPT % 8 == 0 && !INTERLEAVE
#define GELU16_OCT 1
// Eight vectors (8 VW elements) at in through GELU to out, their chains interleaved.
#define STEP8(in, out)                                                                             \
    do {                                                                                           \
        float16 xv[8], yv[8];                                                                      \
        G16_LN(8, xv[l] = LOAD_X16((in) + l * VW))                                                 \
        GELU16_FN(8, yv, xv);                                                                      \
        G16_LN(8, STORE_Y16(yv[l], (out) + l * VW))                                                \
    } while (0)
#elif VPT % 4 == 0 && !INTERLEAVE
#define GELU16_PAIR 1
#define GELU16_QUAD 1
// Four vectors (4 VW elements) at in through GELU to out, their chains interleaved.
#define STEP4(in, out)                                                                             \
    do {                                                                                           \
        float16 xv[4], yv[4];                                                                      \
        G16_L4(xv[l] = LOAD_X16((in) + l * VW))                                                     \
        GELU16_F4(yv, xv);                                                                         \
        G16_L4(STORE_Y16(yv[l], (out) + l * VW))                                                    \
    } while (0)
#elif VPT % 2 == 0 && !INTERLEAVE
#define GELU16_PAIR 1
// Two vectors (2 VW elements) at in through GELU to out, their chains interleaved.
#define STEP2(in, out)                                                                             \
    do {                                                                                           \
        float16 g0, g1;                                                                            \
        GELU16_F2(g0, g1, LOAD_X16(in), LOAD_X16((in) + VW));                                      \
        STORE_Y16(g0, out);                                                                        \
        STORE_Y16(g1, (out) + VW);                                                                 \
    } while (0)
#endif
#else
#define STEP(in, out) STORE_Y(APPLY(floatv, LOAD_X(in)), out)
#endif
#define STEP1(xs, ys, e) STORE_Y1(APPLY(float, LOAD_X1(xs, e)), ys, e)
#endif

// Software prefetch of x GELU_PF_BYTES ahead of the work-item's own elements (one prefetcht0 per
// 64 bytes of them): on the 2-core Cascade Lake Xeon, whose cores each keep too few misses in
// flight to stream DRAM on their own while they compute, 16M elements (VPT=16 WG=64, in process CPU
// time, alternated: bench/cl_cpu_ab.py gelu 9) went bf16 GELU 0.85-0.89 -> 1.03-1.06 of the bf16
// copy kernel, f16 0.93 -> 1.05, fp32 GELU 0.86 -> 0.97 of the fp32 copy, and the copy kernels
// and tsr_convert f32 -> bf16 themselves 1.02-1.13x and 1.09x (1, 2 and 4 KB ahead within 3%; 2 KB
// ahead of the stores as well gained nothing). A hint that never faults: past the end of x it
// fetches nothing useful. Only where the kernel is compiled for x86-64 itself, as in
// gemm_smallm.cl (SPIR-V paths reject the intrinsic).
#ifndef GELU_PF_BYTES
#define GELU_PF_BYTES 2048
#endif
#if GELU_PF_BYTES > 0 && defined(__has_builtin) && defined(__x86_64__)
#if __has_builtin(__builtin_prefetch)
#define GELU_PREFETCH(p)                                                                           \
    _Pragma("unroll") for (int o = 0; o < VW * VPT * (int)sizeof(*(p)); o += 64)                   \
        __builtin_prefetch((const __global char *)(p) + GELU_PF_BYTES + o);
#endif
#endif
#ifndef GELU_PREFETCH
#define GELU_PREFETCH(p)
#endif

// The tail's element loop stays a plain loop: vectorized by LLVM (8 lanes, with the fp32 forms'
// constants), its registers crowded the unrolled vector loop of the whole work-items, which PoCL
// compiles into the same work-group loop, with spills and constants reloaded at every step (a
// GELU16 bf16 work-item of 64 elements: 153 instructions, 115 without).
#ifdef __clang__
#define GELU_TAIL_LOOP _Pragma("clang loop vectorize(disable) unroll(disable)")
#else
#define GELU_TAIL_LOOP
#endif
__kernel void gelu(const ulong n, __global const TSR_ELT(X_TYPE) *x, const ulong x_off, __global TSR_ELT(Y_TYPE) *y,
                   const ulong y_off) {
    const __global TSR_ELT(X_TYPE) *xs = x + x_off;
    __global TSR_ELT(Y_TYPE) *ys = y + y_off;
#if INTERLEAVE
    // Vector v of work-group g, item l: g*(VPT*WG) + v*WG + l, in vectors.
    const size_t wg = get_local_size(0);
    const size_t base = get_group_id(0) * VPT * wg + get_local_id(0);
    for (int v = 0; v < VPT; ++v) {
        const size_t i = (base + (size_t)v * wg) * VW;
        if (i + VW <= n) {
            STEP(xs + i, ys + i);
        } else {
            for (size_t e = i; e < n; ++e) STEP1(xs, ys, e);
        }
    }
#else
    const size_t i0 = get_global_id(0) * (VW * VPT);
    if (i0 >= n) return;
    GELU_PREFETCH(xs + i0)
    if (i0 + VW * VPT <= n) {
#if defined(GELU16_OCT)
        _Pragma("unroll") for (int v = 0; v < VPT; v += 8) STEP8(xs + i0 + v * VW, ys + i0 + v * VW);
#elif defined(GELU16_QUAD)
        _Pragma("unroll") for (int v = 0; v < VPT; v += 4) STEP4(xs + i0 + v * VW, ys + i0 + v * VW);
#elif defined(GELU16_PAIR)
        _Pragma("unroll") for (int v = 0; v < VPT; v += 2) STEP2(xs + i0 + v * VW, ys + i0 + v * VW);
#else
        _Pragma("unroll") for (int v = 0; v < VPT; ++v) STEP(xs + i0 + v * VW, ys + i0 + v * VW);
#endif
    } else {
        GELU_TAIL_LOOP for (size_t e = i0; e < n; ++e) STEP1(xs, ys, e);
    }
#endif
}

// ---------------------------------------------------------------- unfused baseline
// out[i] = a[i] OP b[i] (or OP s), over n elements with offsets.
#define ELEMENTWISE(name, expr)                                                                    \
    __kernel void name(const ulong n, __global const float *a, const ulong a_off,                  \
                       __global const float *b, const ulong b_off, const float s,                  \
                       __global float *out, const ulong out_off) {                                 \
        const size_t i = get_global_id(0);                                                         \
        if (i >= n) return;                                                                        \
        const float av = a[a_off + i];                                                             \
        out[out_off + i] = (expr);                                                                 \
    }

ELEMENTWISE(ew_cube, av * av * av)
ELEMENTWISE(ew_scale, s * av)
ELEMENTWISE(ew_add, av + b[b_off + i])
ELEMENTWISE(ew_add_scalar, av + s)
ELEMENTWISE(ew_mul, av * b[b_off + i])
// The gate (1 + erf or 1 + tanh) times x: where the gate is exactly 0 (x = -inf, or far below
// zero) the product is the limit 0 with x's sign, not 0 * -inf = NaN, as in the fused kernel.
ELEMENTWISE(ew_gate, av == 0.0f ? copysign(0.0f, b[b_off + i]) : av * b[b_off + i])
ELEMENTWISE(ew_tanh, tanh(av))
ELEMENTWISE(ew_erf, erf(av))
