// Device peaks for `tessera peak` (OpenCL C 1.2): global-memory bandwidth, fp32 multiply-add
// throughput and launch latency.
//   VW          vector width of the accesses and the arithmetic (1, 2, 4, 8, 16)
//   INTERLEAVE  1: consecutive work-items take consecutive vectors (a grid-stride loop: what
//               GPUs coalesce); 0: each work-item streams a contiguous run (what CPUs prefetch)
//   CHAINS      independent multiply-add chains per work-item (enough to hide FMA latency)
#ifndef VW
#define VW 4
#endif
#ifndef INTERLEAVE
#define INTERLEAVE 1
#endif
#ifndef CHAINS
#define CHAINS 8
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#if VW == 1
typedef float floatv;
typedef uint uintv;
#define HSUM(v) (v)
#define CONVERT_FLOAT(v) convert_float(v)
#else
typedef CAT(float, VW) floatv;
typedef CAT(uint, VW) uintv;
#define CONVERT_FLOAT(v) CAT(convert_float, VW)(v)
#endif

float hsum(const floatv v) {
#if VW == 1
    return v;
#else
    float t[VW];
    CAT(vstore, VW)(v, 0, t);
    float s = 0.0f;
    for (int i = 0; i < VW; ++i) s += t[i];
    return s;
#endif
}

// The vectors work-item `gid` of `items` handles: [first, end) with step `step`.
#define RANGE(n)                                                                                   \
    const uint gid = get_global_id(0), items = get_global_size(0);                                 \
    uint first, end, step;                                                                         \
    if (INTERLEAVE) {                                                                              \
        first = gid, end = (n), step = items;                                                      \
    } else {                                                                                       \
        const uint per = ((n) + items - 1) / items;                                                \
        first = min(gid * per, (uint)(n)), end = min(first + per, (uint)(n)), step = 1;            \
    }

// Reads every vector once; four running sums keep the adds off the critical path, and the
// per-item result is written so the loads cannot be dropped.
__kernel void bw_read(__global const floatv *src, const uint n, __global float *sink) {
    RANGE(n)
    floatv s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    uint i = first;
    for (; i + 3 * step < end; i += 4 * step) {
        s0 += src[i];
        s1 += src[i + step];
        s2 += src[i + 2 * step];
        s3 += src[i + 3 * step];
    }
    for (; i < end; i += step) s0 += src[i];
    sink[gid] = hsum(s0 + s1 + s2 + s3);
}

// Writes every vector once with values that differ everywhere (an integer hash of the index),
// so no device can compress them.
__kernel void bw_write(__global floatv *dst, const uint n, const uint seed) {
    RANGE(n)
#if VW == 1
    const uintv lane = 0;
#elif VW == 2
    const uintv lane = (uintv)(0, 1);
#elif VW == 4
    const uintv lane = (uintv)(0, 1, 2, 3);
#elif VW == 8
    const uintv lane = (uintv)(0, 1, 2, 3, 4, 5, 6, 7);
#else
    const uintv lane = (uintv)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#endif
    for (uint i = first; i < end; i += step) {
        uintv h = (uintv)(i * VW + seed) + lane;
        h = (h ^ (h >> 16)) * 0x45d9f3bu;
        h ^= h >> 16;
        dst[i] = CONVERT_FLOAT(h);
    }
}

__kernel void bw_copy(__global const floatv *src, __global floatv *dst, const uint n) {
    RANGE(n)
    for (uint i = first; i < end; i += step) dst[i] = src[i];
}

// CHAINS independent chains of a = a * m + c (converging to c / (1 - m): no overflow, no
// denormals), `iters` steps each; 2 * CHAINS * VW * iters FLOPs per work-item. fma(), or mad()
// with -DPEAK_MAD (faster where fma() is not one instruction, as on llvmpipe).
__kernel void fma_peak(__global float *sink, const float m, const float c, const int iters) {
    const uint gid = get_global_id(0);
    floatv a[CHAINS];
    for (int j = 0; j < CHAINS; ++j) a[j] = (floatv)((float)(gid & 255) * 1e-3f + (float)j * 1e-2f);
    const floatv mv = (floatv)(m), cv = (floatv)(c);
    for (int it = 0; it < iters; ++it) {
#ifdef PEAK_MAD
        _Pragma("unroll") for (int j = 0; j < CHAINS; ++j) a[j] = mad(a[j], mv, cv);
#else
        _Pragma("unroll") for (int j = 0; j < CHAINS; ++j) a[j] = fma(a[j], mv, cv);
#endif
    }
    floatv s = a[0];
    for (int j = 1; j < CHAINS; ++j) s += a[j];
    sink[gid] = hsum(s);
}

__kernel void empty(void) {}
