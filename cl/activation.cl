// Activations shared by the GELU kernels and GEMM's epilogue (OpenCL C 1.2). Sources that
// need them say `#include "activation.cl"`; the embedder (and TSR_KERNEL_DIR loading) put
// this text in place, so no build ever looks for files.
//
// TSR_DEFINE_ACTIVATIONS(T, IT) defines, for a float type T and the int type of its shape
// (float/int, float8/int8, ...):
//   gelu_tanh_T(x)  0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   PyTorch approximate='tanh'
//   gelu_erf_T(x)   0.5 x (1 + erf(x / sqrt(2)))                       PyTorch's default
//   relu_T(x)       max(x, 0), NaN kept
//   activate_T(x, act)  by code: 0 none, 1 ReLU, 2 GELU tanh, 3 GELU erf
// Numerics:
//   0.5 (1 + tanh u) is evaluated as 1 / (1 + exp(-2u)) and 1 + erf(t) as erfc(-t): the
//   textbook forms lose every digit to cancellation for x < 0 (1 + tanh u -> 0), and the
//   naive tanh(u) = (e^u - e^-u) / (e^u + e^-u) gives Inf/Inf = NaN once |u| > 88.
//   Below x = -9 (tanh form) and x = -20 (erf form) both return -0: the exact results there
//   are under 2e-28 and 1e-88 in magnitude (the textbook tanh form is 0 in fp32 from about
//   x = -5.5 on). That also gives GELU(-Inf) = -0 (the limit) instead of -Inf * 0 = NaN.
//   x^2 or x^3 overflowing to Inf for large |x| is harmless. NaN propagates through the
//   numerator x (and NaN < -9 is false).
// Speed: GELU must keep up with memory, and some drivers' exp/erfc builtins are scalar
//   loops over vector lanes (PoCL's erfc ran at 2 GB/s on float16, its rint is a 20-instruction
//   sequence). The exponentials below vectorize everywhere (FMAs, one add of a shifting
//   constant, integer shifts and adds). GELU tanh, the op's hot path, works in base 2 with
//   the constants folded: 2^t with t = -2u / ln 2 = x (c1 + c3 x^2), 18 vector operations per
//   element including the division (27 before, 1.6x the throughput on an AVX2 core). The erf
//   form uses erfc(z) = (1 + z a(z))^-16 with a of degree 5, least-squares fitted to
//   erfc^(-1/16) on [0, 6] (the shape of the classic Hastings approximation): 16 operations
//   with one division and no exp, absolute error under 3e-7 in erf (4e-7 max(1, |x|) in GELU
//   after fp32 rounding of the 16th power), where the Chebyshev-fitted erfc with an exp and a
//   10-term polynomial took 30 and ran at 0.2-0.4x the copy kernel.
// Polynomials: 2^f on |f| <= 1/2 and e^r on |r| <= ln2/2 as 1 + f q(f), q of degree 4
//   fitted on Chebyshev nodes (mpmath.chebyfit); the constant term is exactly 1 so 2^0 = 1,
//   truncation error 1.6e-7 absolute, about 1.5 ulp of the result.
// Inlining: all functions are forced inline where the compiler is clang (PoCL, Oclgrind):
//   PoCL's inliner turned gelu_tanh_float16 into a call taking its vector through the stack
//   once the function grew, which halved GELU's throughput.
#ifndef TSR_ACTIVATION_CL
#define TSR_ACTIVATION_CL

#ifdef __clang__
#define TSR_INLINE __attribute__((always_inline))
#else
#define TSR_INLINE
#endif

#define TSR_ACT_NONE 0
#define TSR_ACT_RELU 1
#define TSR_ACT_GELU_TANH 2
#define TSR_ACT_GELU_ERF 3

// (Two levels, so macro arguments such as floatv expand before they are pasted into names.)
#define TSR_DEFINE_ACTIVATIONS(T, IT) TSR_DEFINE_ACTIVATIONS_(T, IT)
#define TSR_DEFINE_ACTIVATIONS_(T, IT)                                                             \
    /* 2^k q for k an integer in [-125, 127] in float form (the sum 1.5 * 2^23 + k, whose low */   \
    /* mantissa bits hold k) and q in [0.5, 2): k added to q's exponent field; bits of the   */   \
    /* shifting constant shift out of the word.                                              */   \
    TSR_INLINE T tsr_scale2_##T(const T q, const T k_shifted) {                                   \
        return as_##T(as_##IT(q) + (as_##IT(k_shifted) << 23));                                   \
    }                                                                                              \
    /* 2^t for t >= -125 (smaller t and NaN give 2^-125); callers discard t > 127, whose */      \
    /* result is meaningless. t = k + f, k = round(t) by adding and removing 1.5 * 2^23, */      \
    /* f = t - k exactly (|f| <= 1/2), 2^f = 1 + f q(f).                                   */      \
    TSR_INLINE T tsr_exp2_##T(T t) {                                                               \
        t = fmax(t, -125.0f);                                                                      \
        const T k_shifted = t + 12582912.0f;                                                       \
        const T f = t - (k_shifted - 12582912.0f);                                                 \
        T q = fma(f, (T)(0.0013381302537320797f), (T)(0.009666368515385448f));                     \
        q = fma(f, q, (T)(0.05550381013796457f));                                                  \
        q = fma(f, q, (T)(0.2402234903802036f));                                                   \
        q = fma(f, q, (T)(0.6931471805599453f));                                                   \
        return tsr_scale2_##T(fma(f, q, (T)(1.0f)), k_shifted);                                    \
    }                                                                                              \
    /* e^a, a clamped to [-86, 88] (NaN becomes -86): 2^k e^r with k = round(a / ln 2) and */   \
    /* r = a - k ln 2 in two steps (ln 2 split so k ln2_hi is exact), e^r = 1 + r q(r).    */      \
    TSR_INLINE T tsr_exp_##T(T a) {                                                                \
        a = fmin(fmax(a, -86.0f), 88.0f);                                                          \
        const T k_shifted = fma(a, (T)(1.4426950408889634f), (T)(12582912.0f));                    \
        const T k = k_shifted - 12582912.0f;                                                       \
        T r = fma(k, (T)(-0.693145751953125f), a);                                                 \
        r = fma(k, (T)(-1.428606765330187e-6f), r);                                                \
        T q = fma(r, (T)(0.008363173074513711f), (T)(0.04187564445233737f));                       \
        q = fma(r, q, (T)(0.1666657702559799f));                                                   \
        q = fma(r, q, (T)(0.4999937213862548f));                                                   \
        q = fma(r, q, (T)(1.0f));                                                                  \
        return tsr_scale2_##T(fma(r, q, (T)(1.0f)), k_shifted);                                    \
    }                                                                                              \
    /* x / (1 + e^(-2u)) = x / (1 + 2^t), t = x (c1 + c3 x^2), c1 = -2 sqrt(2/pi) / ln 2,   */    \
    /* c3 = 0.044715 c1. Below x = -9 (t > 96) the result is under 2e-28 in magnitude and  */    \
    /* tanh-form GELU in fp32 is -0 there anyway; -0 also covers x = -Inf.                  */    \
    TSR_INLINE T gelu_tanh_##T(const T x) {                                                        \
        const T t = x * fma(x * x, (T)(-0.1029432395800235f), (T)(-2.3022081981443248f));          \
        return select(x / (1.0f + tsr_exp2_##T(t)), (T)(-0.0f), x < -9.0f);                        \
    }                                                                                              \
    /* x Phi(x), Phi(x) = 1 - erfc(z)/2 (x > 0) or erfc(z)/2 (x <= 0), z = |x| / sqrt 2,   */    \
    /* erfc(z) = 1 / (1 + z a(z))^16, a of degree 5: FMAs, four squarings and one division  */   \
    /* (no exp), and no cancellation for x < 0. Below x = -20 (the 16th power overflows to  */   \
    /* Inf, the result is under 1e-88) -0, which also covers x = -Inf.                       */   \
    TSR_INLINE T gelu_erf_##T(const T x) {                                                         \
        const T z = 0.7071067811865476f * fabs(x);                                                 \
        T p = fma(z, (T)(4.3046933569712564e-05f), (T)(2.766418328974396e-04f));                   \
        p = fma(p, z, (T)(1.518970530014485e-04f));                                                \
        p = fma(p, z, (T)(9.270606562495232e-03f));                                                \
        p = fma(p, z, (T)(4.228198900818825e-02f));                                                \
        p = fma(p, z, (T)(7.052308320999146e-02f));                                                \
        p = fma(p, z, (T)(1.0f));                                                                  \
        p *= p;                                                                                    \
        p *= p;                                                                                    \
        p *= p;                                                                                    \
        p *= p;                                                                                    \
        const T half_erfc = 0.5f / p;                                                              \
        const T y = x * select(half_erfc, 1.0f - half_erfc, x > 0.0f);                             \
        return select(y, (T)(-0.0f), x < -20.0f);                                                  \
    }                                                                                              \
    TSR_INLINE T relu_##T(const T x) { return select(x, (T)(0.0f), x < 0.0f); }                               \
    TSR_INLINE T activate_##T(const T x, const int act) {                                                     \
        return act == TSR_ACT_RELU        ? relu_##T(x)                                            \
               : act == TSR_ACT_GELU_TANH ? gelu_tanh_##T(x)                                       \
               : act == TSR_ACT_GELU_ERF  ? gelu_erf_##T(x)                                        \
                                          : x;                                                     \
    }

#endif
