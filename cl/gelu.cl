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
// (bf16) significant bits, so the fp32 value before its store needs about 2^-14 relative, not
// fp32's 2^-23: the division becomes AVX-512's reciprocal estimate (vrcp14ps, relative error
// below 2^-14, exact at 1), and the tanh form's 2^t takes vreduceps for t - floor(t), a degree-3
// polynomial and vscalefps for the exponent (no shifts, no clamp), and no vdivps, which holds
// Skylake's divider 10 cycles a zmm vector; an f16 x or y converts with zmm vcvtph2ps /
// vcvtps2ph. The erf form's 1 / p(|x|)^16 takes a polynomial fitted to the accuracy y keeps
// (degree 5 for bf16, 4 for f16, where activation.cl's form has 6 and a multiply by 1/sqrt(2)),
// the estimate for its division, and ends in one fused multiply-add. GELU f16 -> f16 per 16 elements
// (the vector operations from the load to the store): tanh 14 (session 16: 19;
// before: 25 and a vdivps), erf 15 (session 16: 22). These loops are bound by the vector
// instructions they issue (PoCL's CPU device at 16M elements spent twice the copy kernel's CPU
// time), so each one removed shows. Error, fp32 value before the store against the double
// reference, over every input (docs/dtypes.md, "Error bounds"): below 2^-13 max(1, |x|) in both
// forms; GELU(x) = x from x = 10.9 on, -0 below x = -9 (tanh) and -20 (erf), NaN kept, as the
// fp32 forms. An fp32 y, other vector widths, the tail's elements and every other device keep
// activation.cl's fp32 forms.
#if MODE != 0 && Y_TYPE != 0 && VW == 16 && defined(TSR_X16) && defined(__AVX512DQ__)
#define GELU16 1
// (The builtins take and return 16-float vectors; clang converts float16 to and from them.)
#define G16_ALL TSR_X16_ALL
#define G16_CUR 4 /* _MM_FROUND_CUR_DIRECTION */
// 2^f on [0, 1) by a degree-3 polynomial (relative minimax, 7.5e-5: the value y rounds stays
// within 4.3e-5 max(1, |x|) of GELU(x), against 4.2e-5 with degree 4; fp32's degree 4 on
// [-1/2, 1/2]: 1.6e-7)
#define GELU16_E3 0.07802427478740856f
#define GELU16_E2 0.22606726670731025f
#define GELU16_E1 0.6958336268679407f
#define GELU16_E0 0.999925194576748f
// The erf form: h = 1 / p(|x|)^16 = erfc(|x| / sqrt(2)) / 2, p fitted for this form (weighted
// least squares on [0, 8], iterated to the smallest largest error of h, numpy): a y that keeps
// 11 or 8 bits needs h to 2^-13 or so, not the 3e-7 of activation.cl's degree-6 polynomial
// (A&S 7.1.28). bf16 y: degree 5, |h error| below 1.7e-6 on [0, 30], p above 256 (p^16 = Inf,
// h = 0, y = -0) from |x| = 19.12 on; f16 y: degree 4, 2.2e-5, p^16 = Inf from 26.2 on, and
// below x = -20 h < 2^-100: y rounds to f16 -0 as the fp32 form's -0 does.
#if Y_TYPE == 1
#define G16_EC_4 0.000397948839f
#define G16_EC_3 0.00277177314f
#define G16_EC_2 0.0225064736f
#define G16_EC_1 0.0519850738f
#define G16_EC_0 1.04427648f
#define G16_ETOP 4
#else
#define G16_EC_5 8.94469486e-05f
#define G16_EC_4 -5.38514214e-05f
#define G16_EC_3 0.00352213532f
#define G16_EC_2 0.0220321417f
#define G16_EC_1 0.0520820357f
#define G16_EC_0 1.04427361f
#define G16_ETOP 5
#endif
// One Horner step of p in a, and the polynomial on one vector or on two interleaved.
#define G16_EH(p, a, k) p = fma(p, a, (float16)(G16_EC_##k))
#if G16_ETOP == 5
#define GELU16_ERF_POLY(p, a)                                                                      \
    p = fma(a, (float16)(G16_EC_5), (float16)(G16_EC_4));                                          \
    G16_EH(p, a, 3); G16_EH(p, a, 2); G16_EH(p, a, 1); G16_EH(p, a, 0)
#define GELU16_ERF_POLY2(p0, a0, p1, a1)                                                           \
    p0 = fma(a0, (float16)(G16_EC_5), (float16)(G16_EC_4));                                        \
    p1 = fma(a1, (float16)(G16_EC_5), (float16)(G16_EC_4));                                        \
    G16_EH(p0, a0, 3); G16_EH(p1, a1, 3); G16_EH(p0, a0, 2); G16_EH(p1, a1, 2);                    \
    G16_EH(p0, a0, 1); G16_EH(p1, a1, 1); G16_EH(p0, a0, 0); G16_EH(p1, a1, 0)
#else
#define GELU16_ERF_POLY(p, a)                                                                      \
    p = fma(a, (float16)(G16_EC_4), (float16)(G16_EC_3));                                          \
    G16_EH(p, a, 2); G16_EH(p, a, 1); G16_EH(p, a, 0)
#define GELU16_ERF_POLY2(p0, a0, p1, a1)                                                           \
    p0 = fma(a0, (float16)(G16_EC_4), (float16)(G16_EC_3));                                        \
    p1 = fma(a1, (float16)(G16_EC_4), (float16)(G16_EC_3));                                        \
    G16_EH(p0, a0, 2); G16_EH(p1, a1, 2); G16_EH(p0, a0, 1); G16_EH(p1, a1, 1);                    \
    G16_EH(p0, a0, 0); G16_EH(p1, a1, 0)
#endif
TSR_INLINE float16 gelu16_recip(const float16 d) { return __builtin_ia32_rcp14ps512_mask(d, d, G16_ALL); }
/* vmaxps with b as the second operand: b where either is NaN (a NaN x goes on) and where both
 * are zeros (max(-0, +0) = +0) */
TSR_INLINE float16 gelu16_max(const float16 a, const float16 b) { return __builtin_ia32_maxps512(a, b, G16_CUR); }
/* min(|x|, 30) in one vrangeps (imm 10: the smaller magnitude, sign cleared; a quiet NaN x gives
 * 30, and max(-0, x) below keeps x's NaN in y) */
#define G16_ABS30(x) __builtin_ia32_rangeps512_mask((x), (float16)(30.0f), 10, (x), G16_ALL, G16_CUR)
/* 2^t for every t: f = t - floor(t) in [0, 1) exactly by vreduceps (imm 9: round down, no
 * precision exception; +-Inf give 0, NaN NaN), 2^f by the polynomial, times 2^floor(t) by
 * vscalefps (0 and Inf beyond the exponent range, t = -Inf: 0, +Inf: Inf). No clamp, no
 * vrndscaleps and subtraction. */
TSR_INLINE float16 gelu16_exp2(const float16 t) {
    const float16 f = __builtin_ia32_reduceps512_mask(t, 9, t, G16_ALL, G16_CUR);
    float16 q = fma(f, (float16)(GELU16_E3), (float16)(GELU16_E2));
    q = fma(f, q, (float16)(GELU16_E1));
    q = fma(f, q, (float16)(GELU16_E0));
    return __builtin_ia32_scalefps512_mask(q, t, q, G16_ALL, G16_CUR);
}
/* x / (1 + 2^t), t as in gelu_tanh_T; -0 below x = -9 (x = -Inf included: 2^t = Inf there and
 * x * 0 would be NaN). From x = 5.2 on 2^t is below 2^-24, 1 + 2^t = 1 and the estimate of 1 is
 * 1: y = x exactly, +Inf included (t = -Inf, 2^t = 0); NaN: y = x NaN. */
/* x r, with -0 below x = -9. An f16 y needs no compare there: 2^t >= 2^95.8, so |x r| < 2^-90,
 * which f16 rounds to -0 as it rounds the fp32 form's -0; only x = -Inf (-Inf * 0 = NaN) is set
 * to -0, by vfixupimmps (x's class -Inf: response 7, -0; every other class keeps x r), one
 * instruction for vcmpltps and a masked move. */
#if Y_TYPE == 1
#define G16_TANH_END(x, r) __builtin_ia32_fixupimmps512_mask((x) * (r), (x), (int16)(0x70000), 0, G16_ALL, G16_CUR)
#else
// Other y types: the product masked by !(x < -9) (a NaN x included) over a register of -0, which
// clang emits as vcmpnltps and a masked vmulps (select(x r, -0, x < -9) became vcmpltps, vmulps
// and a masked move)
#define G16_TANH_END(x, r) select((float16)(-0.0f), (x) * (r), !((x) < -9.0f))
#endif
TSR_INLINE float16 gelu16_tanh(const float16 x) {
    const float16 t = x * fma(x * x, (float16)(-0.1029432395800235f), (float16)(-2.3022081981443248f));
    return G16_TANH_END(x, gelu16_recip(1.0f + gelu16_exp2(t)));
}
/* The erf form with the estimate: h = 1 / p^16 = erfc(|x| / sqrt(2)) / 2 (GELU16_ERF_POLY) and
 * GELU(x) = max(x, 0) - |x| h, one fused multiply-add (x > 0: x - x h; x <= 0: x h) with max(-0,
 * x) keeping -0 for x <= 0 whatever |x| h is (+0 included) and x for NaN; |x| clamped to 30
 * (p^16 = Inf, h = 0 before it) keeps Inf * 0 off: GELU(+Inf) = Inf, GELU(-Inf) = -0. */
TSR_INLINE float16 gelu16_erf(const float16 x) {
    const float16 a = G16_ABS30(x);
    float16 p;
    GELU16_ERF_POLY(p, a);
    p *= p;
    p *= p;
    p *= p;
    p *= p;
    return fma(-a, gelu16_recip(p), gelu16_max((float16)(-0.0f), x));
}
/* The two forms on two vectors at once, statement by statement in turn: clang emits the
 * instructions in this order, so the two chains' instructions alternate and each waits less on
 * its predecessor (one vector's chain is about 60 cycles long; one after the other, the core's
 * schedulers filled with waiting instructions before the next vector's could start). */
#define G16_BOTH(op) op(0) op(1)
#define G16_TANH2(y0, y1, x0, x1)                                                                  \
    do {                                                                                           \
        const float16 xx0 = (x0), xx1 = (x1);                                                      \
        float16 t0 = xx0 * xx0, t1 = xx1 * xx1;                                                    \
        t0 = fma(t0, (float16)(-0.1029432395800235f), (float16)(-2.3022081981443248f));            \
        t1 = fma(t1, (float16)(-0.1029432395800235f), (float16)(-2.3022081981443248f));            \
        t0 = xx0 * t0, t1 = xx1 * t1;                                                              \
        const float16 f0 = __builtin_ia32_reduceps512_mask(t0, 9, t0, G16_ALL, G16_CUR);            \
        const float16 f1 = __builtin_ia32_reduceps512_mask(t1, 9, t1, G16_ALL, G16_CUR);            \
        float16 q0 = fma(f0, (float16)(GELU16_E3), (float16)(GELU16_E2));                           \
        float16 q1 = fma(f1, (float16)(GELU16_E3), (float16)(GELU16_E2));                           \
        q0 = fma(f0, q0, (float16)(GELU16_E1)), q1 = fma(f1, q1, (float16)(GELU16_E1));            \
        q0 = fma(f0, q0, (float16)(GELU16_E0)), q1 = fma(f1, q1, (float16)(GELU16_E0));            \
        q0 = __builtin_ia32_scalefps512_mask(q0, t0, q0, G16_ALL, G16_CUR);                        \
        q1 = __builtin_ia32_scalefps512_mask(q1, t1, q1, G16_ALL, G16_CUR);                        \
        q0 = gelu16_recip(1.0f + q0), q1 = gelu16_recip(1.0f + q1);                                \
        y0 = G16_TANH_END(xx0, q0);                                                                \
        y1 = G16_TANH_END(xx1, q1);                                                                \
    } while (0)
/* The same on four vectors (x and y arrays of 4), each statement over the four in turn (a fully
 * unrolled loop keeps that order): at VPT a multiple of 4, 4-6% less CPU time than two at once
 * (f16 tanh 2.36 -> 2.25 ms per 16M, erf 2.23 -> 2.18; cl_cpu_ab.py, load 10-13); the arrays
 * stay in registers. G16_TANHN / G16_ERFN take NV vectors: eight (STEP8, VPT a multiple of 8,
 * not bf16 -> bf16) keep more independent instructions in flight than the Zen 5's schedulers
 * find in four: 7-10% less CPU time per element for f16 -> f16 and f32 -> f16, both forms, in
 * cache and at 16M (session 21; bf16 -> bf16's 32-element pairs gained 0-2% from eight, not kept). */
#define G16_LN(NV, stmt) _Pragma("unroll") for (int l = 0; l < (NV); ++l) { stmt; }
#define G16_L4(stmt) G16_LN(4, stmt)
#define G16_TANHN(NV, y, x)                                                                        \
    do {                                                                                           \
        float16 t[NV], f[NV], q[NV];                                                               \
        G16_LN(NV, t[l] = x[l] * x[l])                                                             \
        G16_LN(NV, t[l] = fma(t[l], (float16)(-0.1029432395800235f), (float16)(-2.3022081981443248f))) \
        G16_LN(NV, t[l] = x[l] * t[l])                                                             \
        G16_LN(NV, f[l] = __builtin_ia32_reduceps512_mask(t[l], 9, t[l], G16_ALL, G16_CUR))        \
        G16_LN(NV, q[l] = fma(f[l], (float16)(GELU16_E3), (float16)(GELU16_E2)))                   \
        G16_LN(NV, q[l] = fma(f[l], q[l], (float16)(GELU16_E1)))                                   \
        G16_LN(NV, q[l] = fma(f[l], q[l], (float16)(GELU16_E0)))                                   \
        G16_LN(NV, q[l] = __builtin_ia32_scalefps512_mask(q[l], t[l], q[l], G16_ALL, G16_CUR))     \
        G16_LN(NV, q[l] = gelu16_recip(1.0f + q[l]))                                               \
        G16_LN(NV, y[l] = G16_TANH_END(x[l], q[l]))                                                \
    } while (0)
#define G16_TANH4(y, x) G16_TANHN(4, y, x)
#define G16_ERFN(NV, y, x)                                                                         \
    do {                                                                                           \
        float16 a[NV], p[NV];                                                                      \
        G16_LN(NV, a[l] = G16_ABS30(x[l]))                                                         \
        G16_LN(NV, p[l] = fma(a[l], (float16)(G16_EC_TOP), (float16)(G16_EC_NEXT)))                \
        G16_ERF_REST(NV)                                                                           \
        G16_LN(NV, p[l] *= p[l])                                                                   \
        G16_LN(NV, p[l] *= p[l])                                                                   \
        G16_LN(NV, p[l] *= p[l])                                                                   \
        G16_LN(NV, p[l] *= p[l])                                                                   \
        G16_LN(NV, p[l] = gelu16_recip(p[l]))                                                      \
        G16_LN(NV, y[l] = fma(-a[l], p[l], gelu16_max((float16)(-0.0f), x[l])))                    \
    } while (0)
#define G16_ERF4(y, x) G16_ERFN(4, y, x)
#if G16_ETOP == 5
#define G16_EC_TOP G16_EC_5
#define G16_EC_NEXT G16_EC_4
#define G16_ERF_REST(NV)                                                                           \
    G16_LN(NV, G16_EH(p[l], a[l], 3)) G16_LN(NV, G16_EH(p[l], a[l], 2)) G16_LN(NV, G16_EH(p[l], a[l], 1)) \
    G16_LN(NV, G16_EH(p[l], a[l], 0))
#else
#define G16_EC_TOP G16_EC_4
#define G16_EC_NEXT G16_EC_3
#define G16_ERF_REST(NV)                                                                           \
    G16_LN(NV, G16_EH(p[l], a[l], 2)) G16_LN(NV, G16_EH(p[l], a[l], 1)) G16_LN(NV, G16_EH(p[l], a[l], 0))
#endif
#define G16_ERF2(y0, y1, x0, x1)                                                                   \
    do {                                                                                           \
        const float16 xx0 = (x0), xx1 = (x1);                                                      \
        const float16 a0 = G16_ABS30(xx0);                                                         \
        const float16 a1 = G16_ABS30(xx1);                                                         \
        float16 p0, p1;                                                                            \
        GELU16_ERF_POLY2(p0, a0, p1, a1);                                                          \
        p0 *= p0, p1 *= p1;                                                                        \
        p0 *= p0, p1 *= p1;                                                                        \
        p0 *= p0, p1 *= p1;                                                                        \
        p0 *= p0, p1 *= p1;                                                                        \
        p0 = gelu16_recip(p0), p1 = gelu16_recip(p1);                                              \
        y0 = fma(-a0, p0, gelu16_max((float16)(-0.0f), xx0));                                      \
        y1 = fma(-a1, p1, gelu16_max((float16)(-0.0f), xx1));                                      \
    } while (0)
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
#if MODE == TSR_ACT_GELU_TANH
#define GELU16_F gelu16_tanh
#else
#define GELU16_F gelu16_erf
#endif
#if MODE == TSR_ACT_GELU_TANH
#define GELU16_F2 G16_TANH2
#define GELU16_F4 G16_TANH4
#define GELU16_FN G16_TANHN
#else
#define GELU16_F2 G16_ERF2
#define GELU16_F4 G16_ERF4
#define GELU16_FN G16_ERFN
#endif
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
