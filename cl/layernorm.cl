// LayerNorm with a fused residual add (OpenCL C 1.2): per row, s = x + r (or x), then
// y = (s - mean(s)) * rsqrt(var(s) + eps) * gamma + beta, with the biased variance.
//
// A work-group of WG work-items takes rows_per_group consecutive rows, one after the other; the
// items of a group split a row's VW-wide vectors round robin (item l: vectors l, l + WG, ...: a
// GPU's adjacent items read adjacent vectors) and its tail (cols % VW elements) element by element.
// Three passes over the row: the sum of s and its largest |s| (M), the sum of (s - mean)^2
// (variance: two-pass, so no cancellation of E[s^2] - mean^2), then the store. The first pass
// reads global memory; a row of a few thousand values is still in the caches for the other two.
// The last two work on s scaled by a power of two 2^k that brings M into [0.5, 1) (exact, so for
// ordinary rows the same roundings as unscaled): squares of rows near 1e30 no longer overflow and
// those of rows near 1e-22 no longer underflow; eps is scaled alike (k is capped so that eps 4^k
// stays below 2^125). Only a row whose plain sum overflows (values near FLT_MAX) sums again, scaled.
//
// -D defines:
//   WG        work-group size (a power of two, 1..256): the tree reduction's local array
//   VW        vector width (1, 2, 4, 8, 16): vloadN needs only element alignment, so any
//             offset and stride works
//   RESIDUAL  1: s = x + r; 0: s = x (r is not read)
//   X_TYPE, R_TYPE, Y_TYPE  storage of x, r and y (dtype.cl's codes; default 0: fp32)
// In place (y the same elements as x or r) is safe: each element is read for the store by the
// item that stores it, after the group's barriers have closed the first two passes.
#include "dtype.cl"
#include "dtype_avx512.cl"

#ifndef WG
#define WG 1
#endif
#ifndef VW
#define VW 8
#endif
#ifndef RESIDUAL
#define RESIDUAL 1
#endif
#ifndef X_TYPE
#define X_TYPE 0
#endif
#ifndef R_TYPE
#define R_TYPE 0
#endif
#ifndef Y_TYPE
#define Y_TYPE 0
#endif

#if VW == 1
typedef float floatv;
#define LD_X(p) TSR_LD(X_TYPE, p, 0)
#define LD_R(p) TSR_LD(R_TYPE, p, 0)
#define LD_F(p) (*(p))
#define ST_Y(v, p) TSR_ST(Y_TYPE, v, p, 0)
#else
typedef TSR_DT_CAT(float, VW) floatv;
#define LD_X(p) TSR_VLD(X_TYPE, VW, p)
#define LD_R(p) TSR_VLD(R_TYPE, VW, p)
#define LD_F(p) TSR_DT_CAT(vload, VW)(0, (p))
#define ST_Y(v, p) TSR_VST(Y_TYPE, VW, v, p)
#endif
// VW = 16 on AVX-512 CPUs: f16 through one zmm vcvtph2ps / vcvtps2ph (vload_half16 takes two ymm
// ones and a lane shuffle, at each of the three passes), bf16 stores rounded in mask registers
// (dtype_avx512.cl; the same values, bit for bit)
#if defined(TSR_X16) && VW == 16
#if X_TYPE == 1
#undef LD_X
#define LD_X(p) TSR_X16_LD_F16(p)
#endif
#if R_TYPE == 1
#undef LD_R
#define LD_R(p) TSR_X16_LD_F16(p)
#endif
#if Y_TYPE == 1
#undef ST_Y
#define ST_Y(v, p) TSR_X16_ST_F16(v, p)
#elif Y_TYPE == 2
#undef ST_Y
#define ST_Y(v, p) TSR_X16_ST_BF16(v, p)
#endif
#endif

// AVX-512 CPUs with one item a row (WG = 1, VW = 16, PoCL's tuned CPU geometry): the first pass
// keeps s (x + r in fp32, x and r widened if 16-bit) in a private array of LN_KEEP vectors (a row
// of up to 1024 columns: 4 KB of the item's stack, in L1), and the other two passes read s back
// from it: one fp32 load a vector where they would load (and widen) x and r again and add them, so
// a 16-bit row costs no more work than an fp32 one. The kept passes also sum into four
// accumulators (vectors v mod 4), where the unkept path's one chain of dependent adds (3-4 cycles a
// vector) bounds its first two passes, so the sums (not s, which is SV's value) round in another
// order than the unkept path's, and take the largest |s| by vmaxps with the accumulator second: a
// NaN lane of s is passed over, as fmax does, in one instruction where fmax's NaN handling takes
// four (the same largest |s|, so the same scale). Until session 29 only rows with a 16-bit x or r
// took it; fp32 rows too since: 4096 x 768 with residual at WG=1 VW=16 on the 2-core Cascade Lake
// Xeon, 1.34-1.40x less CPU time (bench/cl_cpu_ab.py layernorm, alternated, medians of 11) and
// 3.5-3.7 -> 2.3-2.4 ms a call (tessera bench layernorm, RPG=16 both), where VW=8 had been faster.
#if defined(TSR_X16) && WG == 1 && VW == 16
#define LN_KEEP 64
#define LN_MAX_ABS(s, m) __builtin_ia32_maxps512(fabs(s), (m), 4)
#endif

// Element i of s as float, and vector v (VW elements from element v * VW) as floatv.
#if RESIDUAL
#define S1(i) (TSR_LD(X_TYPE, xs, i) + TSR_LD(R_TYPE, rs, i))
#define SV(v) (LD_X(xs + (v) * VW) + LD_R(rs + (v) * VW))
#else
#define S1(i) TSR_LD(X_TYPE, xs, i)
#define SV(v) LD_X(xs + (v) * VW)
#endif

// The sum of a floatv's lanes. Swizzles by index, not .lo/.hi (Oclgrind 21.10 mishandles those
// on float16); under Oclgrind (program.c defines TSR_OCLGRIND), whose uninitialized-value checker
// crashes on these swizzles too, lane by lane through private memory: the same sum in another order.
#if defined(TSR_OCLGRIND) && TSR_OCLGRIND && VW > 1
float lanes_sum(const floatv v) {
    float lanes[VW];
    TSR_DT_CAT(vstore, VW)(v, 0, lanes);
    float total = 0.0f;
    for (int e = 0; e < VW; ++e) total += lanes[e];
    return total;
}
#else
float lanes_sum(const floatv v) {
#if VW == 1
    return v;
#elif VW == 2
    return v.s0 + v.s1;
#elif VW == 4
    const float2 h = v.s01 + v.s23;
    return h.s0 + h.s1;
#elif VW == 8
    const float4 q = v.s0123 + v.s4567;
    const float2 h = q.s01 + q.s23;
    return h.s0 + h.s1;
#else
    const float8 o = v.s01234567 + v.s89abcdef;
    const float4 q = o.s0123 + o.s4567;
    const float2 h = q.s01 + q.s23;
    return h.s0 + h.s1;
#endif
}
#endif

// The largest of a floatv's lanes (NaN lanes are passed over, as fmax does).
#if defined(TSR_OCLGRIND) && TSR_OCLGRIND && VW > 1
float lanes_max(const floatv v) {
    float lanes[VW];
    TSR_DT_CAT(vstore, VW)(v, 0, lanes);
    float m = lanes[0];
    for (int e = 1; e < VW; ++e) m = fmax(m, lanes[e]);
    return m;
}
#else
float lanes_max(const floatv v) {
#if VW == 1
    return v;
#elif VW == 2
    return fmax(v.s0, v.s1);
#elif VW == 4
    const float2 h = fmax(v.s01, v.s23);
    return fmax(h.s0, h.s1);
#elif VW == 8
    const float4 q = fmax(v.s0123, v.s4567);
    const float2 h = fmax(q.s01, q.s23);
    return fmax(h.s0, h.s1);
#else
    const float8 o = fmax(v.s01234567, v.s89abcdef);
    const float4 q = fmax(o.s0123, o.s4567);
    const float2 h = fmax(q.s01, q.s23);
    return fmax(h.s0, h.s1);
#endif
}
#endif

// 2^k for k in [-126, 127], exactly.
float pow2(const int k) { return as_float((uint)(k + 127) << 23); }

#if WG > 1
// The sum of `value` and the largest `big` over the work-group, returned to every item in
// *out_sum and *out_max (two scalar arrays: Oclgrind 21.10 takes a float2 built from two values
// for uninitialized). Every item must call it; the last barrier frees the arrays for the next call.
void group_sum_max(const float value, const float big, __local float *scratch, __local float *scratch_max,
                   float *out_sum, float *out_max) {
    const uint lid = get_local_id(0);
    scratch[lid] = value;
    scratch_max[lid] = big;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint half_size = WG / 2; half_size > 0; half_size >>= 1) {
        if (lid < half_size) {
            scratch[lid] += scratch[lid + half_size];
            scratch_max[lid] = fmax(scratch_max[lid], scratch_max[lid + half_size]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    *out_sum = scratch[0];
    *out_max = scratch_max[0];
    barrier(CLK_LOCAL_MEM_FENCE);
}
#define GROUP_SUM_MAX(v, b, s, m) group_sum_max((v), (b), scratch, scratch_max, (s), (m))
#else
#define GROUP_SUM_MAX(v, b, s, m) (*(s) = (v), *(m) = (b))
#endif

#if WG > 1
// The sum of `value` over the work-group, returned to every item. Every item must call it (it
// holds barriers); the last barrier frees `scratch` for the next call.
float group_sum(const float value, __local float *scratch) {
    const uint lid = get_local_id(0);
    scratch[lid] = value;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint half_size = WG / 2; half_size > 0; half_size >>= 1) {
        if (lid < half_size) scratch[lid] += scratch[lid + half_size];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}
#define GROUP_SUM(v) group_sum((v), scratch)
#else
#define GROUP_SUM(v) (v)
#endif

__kernel void layernorm(const ulong rows, const ulong cols, const float eps, const uint rows_per_group,
                        __global const TSR_ELT(X_TYPE) *x, const ulong x_off, const ulong x_stride,
                        __global const TSR_ELT(R_TYPE) *r, const ulong r_off, const ulong r_stride,
                        __global const float *gamma, const ulong gamma_off, __global const float *beta,
                        const ulong beta_off, __global TSR_ELT(Y_TYPE) *y, const ulong y_off, const ulong y_stride) {
#if WG > 1
    __local float scratch[WG], scratch_max[WG];
    const ulong lid = get_local_id(0);
#else
    const ulong lid = 0;
#endif
    const ulong vectors = cols / VW, tail = vectors * VW;
#ifdef LN_KEEP
    floatv kept[LN_KEEP];
    const bool keep = vectors <= LN_KEEP;
#endif
    const __global float *g = gamma + gamma_off;
    const __global float *b = beta + beta_off;
    for (uint k = 0; k < rows_per_group; ++k) {
        const ulong row = (ulong)get_group_id(0) * rows_per_group + k;
        if (row >= rows) break; // the same for every item of the group: no barrier is skipped by some
        const __global TSR_ELT(X_TYPE) *xs = x + x_off + row * x_stride;
#if RESIDUAL
        const __global TSR_ELT(R_TYPE) *rs = r + r_off + row * r_stride;
#endif
        __global TSR_ELT(Y_TYPE) *ys = y + y_off + row * y_stride;

        floatv acc = 0.0f, big = 0.0f;
        float acc1 = 0.0f, big1 = 0.0f;
#ifdef LN_KEEP
        if (keep) {
            floatv acc_1 = 0.0f, acc_2 = 0.0f, acc_3 = 0.0f, big_1 = 0.0f, big_2 = 0.0f, big_3 = 0.0f;
            ulong v = 0;
            for (; v + 4 <= vectors; v += 4) {
                const floatv s0 = SV(v), s1 = SV(v + 1), s2 = SV(v + 2), s3 = SV(v + 3);
                kept[v] = s0, kept[v + 1] = s1, kept[v + 2] = s2, kept[v + 3] = s3;
                acc += s0, acc_1 += s1, acc_2 += s2, acc_3 += s3;
                big = LN_MAX_ABS(s0, big), big_1 = LN_MAX_ABS(s1, big_1);
                big_2 = LN_MAX_ABS(s2, big_2), big_3 = LN_MAX_ABS(s3, big_3);
            }
            for (; v < vectors; ++v) {
                const floatv sv = SV(v);
                kept[v] = sv;
                acc += sv;
                big = LN_MAX_ABS(sv, big);
            }
            acc = (acc + acc_1) + (acc_2 + acc_3);
            big = fmax(fmax(big, big_1), fmax(big_2, big_3));
        } else
#endif
        for (ulong v = lid; v < vectors; v += WG) {
            const floatv sv = SV(v);
            acc += sv;
            big = fmax(big, fabs(sv));
        }
        for (ulong i = tail + lid; i < cols; i += WG) {
            const float s1 = S1(i);
            acc1 += s1;
            big1 = fmax(big1, fabs(s1));
        }
        float sum, largest;
        GROUP_SUM_MAX(lanes_sum(acc) + acc1, fmax(lanes_max(big), big1), &sum, &largest);
        // The scale 2^k: M 2^k in [0.5, 1) (M = 0 or below FLT_MIN: k = 126; M Inf or NaN: k = 0,
        // the row is NaN anyway), capped so that eps 4^k < 2^125, within [-126, 126]. From bits,
        // so a device that flushes subnormals agrees.
        const int m_exp = (int)(as_uint(largest) >> 23), eps_exp = (int)((as_uint(eps) >> 23) & 0xffu);
        const int k = clamp(min(m_exp == 255 ? 0 : 126 - m_exp, (251 - eps_exp) / 2), -126, 126);
        const float scale = pow2(k);
        if (!isfinite(sum) && isfinite(largest)) { // the plain sum overflowed: sum s 2^k again
            acc = 0.0f;
            acc1 = 0.0f;
            for (ulong v = lid; v < vectors; v += WG) acc += SV(v) * scale;
            for (ulong i = tail + lid; i < cols; i += WG) acc1 += S1(i) * scale;
            sum = GROUP_SUM(lanes_sum(acc) + acc1);
        } else {
            sum *= scale;
        }
        const float mean = sum / (float)cols; // of s 2^k, as are the variance and sd below

        acc = 0.0f;
        acc1 = 0.0f;
#ifdef LN_KEEP
        if (keep) {
            floatv acc_1 = 0.0f, acc_2 = 0.0f, acc_3 = 0.0f;
            ulong v = 0;
            for (; v + 4 <= vectors; v += 4) {
                const floatv d0 = kept[v] * scale - mean, d1 = kept[v + 1] * scale - mean;
                const floatv d2 = kept[v + 2] * scale - mean, d3 = kept[v + 3] * scale - mean;
                acc = fma(d0, d0, acc), acc_1 = fma(d1, d1, acc_1), acc_2 = fma(d2, d2, acc_2), acc_3 = fma(d3, d3, acc_3);
            }
            for (; v < vectors; ++v) {
                const floatv d = kept[v] * scale - mean;
                acc = fma(d, d, acc);
            }
            acc = (acc + acc_1) + (acc_2 + acc_3);
        } else
#endif
        for (ulong v = lid; v < vectors; v += WG) {
            const floatv d = SV(v) * scale - mean;
            acc = fma(d, d, acc);
        }
        for (ulong i = tail + lid; i < cols; i += WG) {
            const float d = S1(i) * scale - mean;
            acc1 = fma(d, d, acc1);
        }
        const float variance = GROUP_SUM(lanes_sum(acc) + acc1) / (float)cols;
        // eps 4^k: exact unless it falls below FLT_MIN, where the variance (of values near 1, or
        // 0 with every s equal) makes it vanish; a zero sum leaves every (s - mean) zero: y = beta.
        const float var_eps = variance + eps * scale * scale;
        const float inv_sd = var_eps > 0.0f ? rsqrt(var_eps) : 0.0f;

#ifdef LN_KEEP
        if (keep) {
            for (ulong v = 0; v < vectors; ++v) {
                const floatv normalized = (kept[v] * scale - mean) * inv_sd;
                ST_Y(fma(normalized, LD_F(g + v * VW), LD_F(b + v * VW)), ys + v * VW);
            }
        } else
#endif
        for (ulong v = lid; v < vectors; v += WG) {
            const floatv normalized = (SV(v) * scale - mean) * inv_sd;
            ST_Y(fma(normalized, LD_F(g + v * VW), LD_F(b + v * VW)), ys + v * VW);
        }
        for (ulong i = tail + lid; i < cols; i += WG)
            TSR_ST(Y_TYPE, fma((S1(i) * scale - mean) * inv_sd, g[i], b[i]), ys, i);
    }
}
