// LayerNorm with a fused residual add (OpenCL C 1.2): per row, s = x + r (or x), then
// y = (s - mean(s)) * rsqrt(var(s) + eps) * gamma + beta, with the biased variance.
//
// A work-group of WG work-items takes rows_per_group consecutive rows, one after the other; the
// items of a group split a row's VW-wide vectors round robin (item l: vectors l, l + WG, ...: a
// GPU's adjacent items read adjacent vectors) and its tail (cols % VW elements) element by element.
// Three passes over the row: the sum of s (mean), the sum of (s - mean)^2 (variance: two-pass,
// so no cancellation of E[s^2] - mean^2), then the store. The first pass reads global memory; a
// row of a few thousand values is still in the caches for the other two.
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
    __local float scratch[WG];
    const ulong lid = get_local_id(0);
#else
    const ulong lid = 0;
#endif
    const ulong vectors = cols / VW, tail = vectors * VW;
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

        floatv acc = 0.0f;
        float acc1 = 0.0f;
        for (ulong v = lid; v < vectors; v += WG) acc += SV(v);
        for (ulong i = tail + lid; i < cols; i += WG) acc1 += S1(i);
        const float mean = GROUP_SUM(lanes_sum(acc) + acc1) / (float)cols;

        acc = 0.0f;
        acc1 = 0.0f;
        for (ulong v = lid; v < vectors; v += WG) {
            const floatv d = SV(v) - mean;
            acc = fma(d, d, acc);
        }
        for (ulong i = tail + lid; i < cols; i += WG) {
            const float d = S1(i) - mean;
            acc1 = fma(d, d, acc1);
        }
        const float variance = GROUP_SUM(lanes_sum(acc) + acc1) / (float)cols;
        const float inv_sd = rsqrt(variance + eps);

        for (ulong v = lid; v < vectors; v += WG) {
            const floatv normalized = (SV(v) - mean) * inv_sd;
            ST_Y(fma(normalized, LD_F(g + v * VW), LD_F(b + v * VW)), ys + v * VW);
        }
        for (ulong i = tail + lid; i < cols; i += WG) TSR_ST(Y_TYPE, fma((S1(i) - mean) * inv_sd, g[i], b[i]), ys, i);
    }
}
