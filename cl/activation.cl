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
//   Below x = -20 the exact result is smaller in magnitude than 1e-80 (tanh form) and 1e-88
//   (erf form), zero in fp32: return -0, which also gives GELU(-Inf) = -0 (the limit)
//   instead of -Inf * 0 = NaN. x^3 overflowing to +-Inf for |x| > 7e12 is harmless.
//   NaN propagates through the numerator x (and NaN < -20 is false).
// Speed: GELU must keep up with memory, and some drivers' exp/erfc builtins are scalar
//   loops over vector lanes (PoCL's erfc ran at 2 GB/s on float16). Both forms therefore
//   use tsr_exp_T below (vectorizes everywhere: FMAs, rint, integer shifts), and erfc uses
//   the Chebyshev-fitted form t * exp(-z^2 + P(t)), t = 1 / (1 + z/2), whose coefficients
//   are the published fit in Numerical Recipes (section 6.2, fractional error < 1.2e-7).
#ifndef TSR_ACTIVATION_CL
#define TSR_ACTIVATION_CL

#define TSR_ACT_NONE 0
#define TSR_ACT_RELU 1
#define TSR_ACT_GELU_TANH 2
#define TSR_ACT_GELU_ERF 3

// (Two levels, so macro arguments such as floatv expand before they are pasted into names.)
#define TSR_DEFINE_ACTIVATIONS(T, IT) TSR_DEFINE_ACTIVATIONS_(T, IT)
#define TSR_DEFINE_ACTIVATIONS_(T, IT)                                                             \
    /* e^a, a clamped to [-87, 88] (NaN becomes -87): 2^k e^r with k = round(a / ln 2) */     \
    /* taken from the low bits of a + 1.5 * 2^23 (rint is a long software sequence on */         \
    /* some drivers), r = a - k ln 2 in two steps (ln 2 split so k ln2_hi is exact), e^r */      \
    /* by Taylor to r^7 (|r| <= 0.35: truncation 5e-9), 2^k built in the exponent bits.    */       \
    T tsr_exp_##T(T a) {                                                                           \
        a = fmin(fmax(a, -87.0f), 88.0f);                                                          \
        const T shifted = fma(a, (T)(1.4426950408889634f), (T)(12582912.0f));                      \
        const T k = shifted - 12582912.0f;                                                         \
        T r = fma(k, (T)(-0.693145751953125f), a);                                                 \
        r = fma(k, (T)(-1.428606765330187e-6f), r);                                                \
        /* Estrin's scheme: depth 4 instead of Horner's 7, for latency-bound pipelines */       \
        const T r2 = r * r, r4 = r2 * r2;                                                          \
        const T p01 = r + 1.0f, p23 = fma(r, (T)(1.0f / 6.0f), (T)(0.5f));                         \
        const T p45 = fma(r, (T)(1.0f / 120.0f), (T)(1.0f / 24.0f));                               \
        const T p67 = fma(r, (T)(1.0f / 5040.0f), (T)(1.0f / 720.0f));                             \
        const T p = fma(r4, fma(r2, p67, p45), fma(r2, p23, p01));                                 \
        return p * as_##T((as_##IT(shifted) - (0x4B400000 - 127)) << 23);                         \
    }                                                                                              \
    T gelu_tanh_##T(const T x) {                                                                   \
        const T u = 0.7978845608028654f * fma(0.044715f * x * x, x, x);                            \
        return select(x / (1.0f + tsr_exp_##T(-2.0f * u)), (T)(-0.0f), x < -20.0f);                \
    }                                                                                              \
    T gelu_erf_##T(const T x) {                                                                    \
        const T z = 0.7071067811865476f * fabs(x);                                                 \
        const T t = 1.0f / fma(0.5f, z, 1.0f);                                                     \
        T p = fma(t, (T)(0.17087277f), (T)(-0.82215223f));                                         \
        p = fma(p, t, (T)(1.48851587f));                                                           \
        p = fma(p, t, (T)(-1.13520398f));                                                          \
        p = fma(p, t, (T)(0.27886807f));                                                           \
        p = fma(p, t, (T)(-0.18628806f));                                                          \
        p = fma(p, t, (T)(0.09678418f));                                                           \
        p = fma(p, t, (T)(0.37409196f));                                                           \
        p = fma(p, t, (T)(1.00002368f));                                                           \
        p = fma(p, t, (T)(-1.26551223f));                                                          \
        const T erfc_z = t * tsr_exp_##T(fma(-z, z, p)); /* erfc(|x| / sqrt 2) */                  \
        const T y = 0.5f * x * select(erfc_z, 2.0f - erfc_z, x > 0.0f);                            \
        return select(y, (T)(-0.0f), x < -20.0f);                                                  \
    }                                                                                              \
    T relu_##T(const T x) { return select(x, (T)(0.0f), x < 0.0f); }                               \
    T activate_##T(const T x, const int act) {                                                     \
        return act == TSR_ACT_RELU        ? relu_##T(x)                                            \
               : act == TSR_ACT_GELU_TANH ? gelu_tanh_##T(x)                                       \
               : act == TSR_ACT_GELU_ERF  ? gelu_erf_##T(x)                                        \
                                          : x;                                                     \
    }

#endif
