// 2-D convolution (OpenCL C 1.2): cross-correlation of NCHW input x with OIHW weights w into
// NCHW output y, with groups:
//   y[n][k][oh][ow] = act(scale[k] sum + bias[k] + residual[n][k][oh][ow]),
//   sum = sum_{c < Cg, r < R, s < S} w[k][c][r][s] x[n][g Cg + c][oh SH - PH + r DH][ow SW - PW + s DW],
// g = k / Kg, input positions outside the image reading as 0. Every kernel stores y through
// conv_access.cl's conv_store (the epilogue: scale, bias, residual, activation; see there). Seen as a GEMM per image and group:
// M = Kg output channels, N = OH OW pixels, K = Cg R S, with B = im2col(x).
//
// Kernels:
//   im2col         writes B explicitly (for tessera's GEMM, whose epilogue is the same)
//   conv_implicit  the GEMM with B's im2col indexing folded into its loads (no workspace)
//   conv_direct    one work-item per output, the naive baseline
//
// The layer's geometry arrives at run time in one int16, so one program serves every layer:
#include "conv_geometry.cl"
// Offsets into x and y are size_t; everything within one image fits an int (checked on the host).
// x, w and y are stored in X_TYPE, W_TYPE, Y_TYPE (cl/dtype.cl codes, fp32 by default; offsets in
// elements of each): loads widen to float, arithmetic is fp32, y's stores round to nearest even.
// im2col's column matrices and the bias are always fp32.
//
// conv_implicit's shape, from -D defines:
//   MWI      output channels per work-item
//   VW       output pixels per work-item, one floatVW per channel (1, 2, 4, 8, 16)
//   STAGE 0  (CPUs) a work-item owns MWI channels x VW consecutive pixels of one output row;
//            its input rows stream through the caches: for each kernel tap (r, s) a whole
//            vector of input comes in one load when the tap's window lies inside the row
//            (stride 1 and 2), else lane by lane with zeros outside
//   STAGE 1  (GPUs) WGM x WGN work-items share a (WGM MWI) x (WGN VW) tile of channels x
//            flattened pixels; KWG reduction steps of weights and gathered input at a time are
//            staged in local memory
#include "activation.cl"

#ifndef MWI
#define MWI 1
#endif
#ifndef VW
#define VW 1
#endif
#ifndef STAGE
#define STAGE 0
#endif
#ifndef WGM
#define WGM 1
#endif
#ifndef WGN
#define WGN 1
#endif
#ifndef KWG
#define KWG 8
#endif

#include "vector.cl"

#include "dtype.cl"
#include "epilogue.cl"
#include "conv_access.cl"

// ---------------------------------------------------------------- im2col
// col[ig][kk][p], ig = i G + g over the chunk's images i (x_off points at the first one),
// kk = (c R + r) S + s, p = oh Q + ow. Two grids (the host picks; the kernel tells them apart by
// dimension 1's size, the same when R S = 1):
//   CPUs (1, Cg, images G): an item writes the whole R S planes of one input channel c;
//   GPUs (P, Cg R S, images G): an item writes one row oh of one kk (many light items).
// The columns whose tap falls in the padding are found once per tap (the same for every row): a row
// is then zeros, the copy without bounds checks, zeros. Until session 34 every device ran the GPU
// grid with a bounds check per element: on ResNet-50's 14x14/2 layer (7 elements a row) the items'
// divisions and the per-element branch made im2col 0.22 of the GEMM's samples on the Cascade Lake
// Xeon.
__kernel void im2col(const int16 geo, __global const XELT *x, const ulong x_off, __global float *col) {
    const int ig = (int)get_global_id(2);
    const int Cg = GEO_C / GEO_G, RS = GEO_R * GEO_S, CRS = Cg * RS, PQ = GEO_P * GEO_Q;
    const bool per_tap = (int)get_global_size(1) == CRS; // the GPU grid: item (oh, kk)
    const int c = per_tap ? (int)get_global_id(1) / RS : (int)get_global_id(1);
    const int tap0 = per_tap ? (int)get_global_id(1) - c * RS : 0, tap_end = per_tap ? tap0 + 1 : RS;
    const int i = ig / GEO_G, g = ig - i * GEO_G;
    const __global XELT *xc = x + x_off + ((size_t)i * GEO_C + g * Cg + c) * (size_t)(GEO_H * GEO_W);
    __global float *planes = col + ((size_t)ig * CRS + (size_t)c * RS) * (size_t)PQ;
    for (int tap = tap0; tap < tap_end; ++tap) {
        const int r = tap / GEO_S, s = tap - r * GEO_S;
        __global float *plane = planes + (size_t)tap * PQ;
        // iw = iw0 + ow SW is inside [0, W) for ow in [lo, hi) (a few steps from each end: the
        // padding is less than a kernel's width)
        const int iw0 = s * GEO_DW - GEO_PW;
        int lo = 0, hi = GEO_Q;
        while (lo < GEO_Q && iw0 + lo * GEO_SW < 0) ++lo;
        while (hi > lo && iw0 + (hi - 1) * GEO_SW >= GEO_W) --hi;
        for (int oh = (int)get_global_id(0); oh < GEO_P; oh += (int)get_global_size(0)) {
            const int ih = oh * GEO_SH - GEO_PH + r * GEO_DH;
            __global float *dst = plane + (size_t)oh * GEO_Q;
            if (ih < 0 || ih >= GEO_H) {
                for (int ow = 0; ow < GEO_Q; ++ow) dst[ow] = 0.0f;
                continue;
            }
            const __global XELT *src = xc + (size_t)ih * GEO_W;
            for (int ow = 0; ow < lo; ++ow) dst[ow] = 0.0f;
            if (GEO_SW == 1) {
                for (int ow = lo; ow < hi; ++ow) dst[ow] = LDX(src, iw0 + ow);
            } else {
                for (int ow = lo; ow < hi; ++ow) dst[ow] = LDX(src, iw0 + ow * GEO_SW);
            }
            for (int ow = hi; ow < GEO_Q; ++ow) dst[ow] = 0.0f;
        }
    }
}

// ---------------------------------------------------------------- direct (baseline)
// global = (Q, P, N K): one output each, loops over c, r, s.
__kernel void conv_direct(const int16 geo, __global const XELT *x, const ulong x_off, __global const WELT *w,
                          const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int ow = (int)get_global_id(0), oh = (int)get_global_id(1), nk = (int)get_global_id(2);
    const int Cg = GEO_C / GEO_G, Kg = GEO_K / GEO_G, HW = GEO_H * GEO_W;
    const int n = nk / GEO_K, k = nk - n * GEO_K, g = k / Kg;
    const __global XELT *xn = x + x_off + ((size_t)n * GEO_C + g * Cg) * (size_t)HW;
    const __global WELT *wk = w + w_off + (size_t)k * Cg * GEO_R * GEO_S;
    float acc = 0.0f;
    for (int c = 0; c < Cg; ++c)
        for (int r = 0; r < GEO_R; ++r) {
            const int ih = oh * GEO_SH - GEO_PH + r * GEO_DH;
            if (ih < 0 || ih >= GEO_H) continue;
            for (int s = 0; s < GEO_S; ++s) {
                const int iw = ow * GEO_SW - GEO_PW + s * GEO_DW;
                if (iw >= 0 && iw < GEO_W)
                    acc = fma(LDW(wk, (c * GEO_R + r) * GEO_S + s), LDX(xn, (size_t)c * HW + ih * GEO_W + iw), acc);
            }
        }
    CONV_STORE1(acc, k, ((size_t)n * GEO_K + k) * (size_t)(GEO_P * GEO_Q) + oh * GEO_Q + ow);
}

// ---------------------------------------------------------------- implicit GEMM

#if !STAGE
// global = (ceil(Kg / MWI), P ceil(Q / VW), N G), local = (WGM, WGN, 1).
__kernel void conv_implicit(const int16 geo, __global const XELT *x, const ulong x_off, __global const WELT *w,
                            const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int Cg = GEO_C / GEO_G, Kg = GEO_K / GEO_G, HW = GEO_H * GEO_W, RS = GEO_R * GEO_S;
    const int QT = (GEO_Q + VW - 1) / VW;
    const int k0 = (int)get_global_id(0) * MWI, pt = (int)get_global_id(1), ng = (int)get_global_id(2);
    const int oh = pt / QT;
    if (k0 >= Kg || oh >= GEO_P) return;
    const int ow0 = (pt - oh * QT) * VW;
    const int n = ng / GEO_G, g = ng - n * GEO_G;
    const __global XELT *xg = x + x_off + ((size_t)n * GEO_C + g * Cg) * (size_t)HW;
    // Rows past Kg repeat the last one (computed, never stored), so the tile needs no guards.
    const __global WELT *wrow[MWI];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m)
        wrow[m] = w + w_off + (size_t)(g * Kg + min(k0 + m, Kg - 1)) * Cg * RS;
    floatv acc[MWI];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[m] = (floatv)(0.0f);

#define FMA_TILE(wi, bvec)                                                                         \
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[m] = fma((floatv)(LDW(wrow[m], wi)), (bvec), acc[m]);

    for (int r = 0; r < GEO_R; ++r) {
        const int ih = oh * GEO_SH - GEO_PH + r * GEO_DH;
        if (ih < 0 || ih >= GEO_H) continue; // a row of zeros adds nothing
        const __global XELT *xr = xg + (size_t)ih * GEO_W;
        for (int s = 0; s < GEO_S; ++s) {
            const int iw0 = ow0 * GEO_SW - GEO_PW + s * GEO_DW;
            const int tap = r * GEO_S + s;
            if (GEO_SW == 1 && iw0 >= 0 && iw0 + VW <= GEO_W) {
                for (int c = 0; c < Cg; ++c) {
                    const floatv b = VLOADX(xr + (size_t)c * HW + iw0);
                    FMA_TILE(c * RS + tap, b)
                }
            } else if (GEO_SW == 2 && iw0 >= 0 && iw0 + 2 * VW <= GEO_W) {
                for (int c = 0; c < Cg; ++c) {
                    const floatv b = VLOAD_STRIDE2(xr + (size_t)c * HW + iw0);
                    FMA_TILE(c * RS + tap, b)
                }
            } else {
                // Lane by lane: positions outside the row read a clamped in-bounds element
                // that select() then replaces by zero (NaN or Inf in x stay out of padding).
                int off[VW];
                bool inside[VW];
                _Pragma("unroll") for (int e = 0; e < VW; ++e) {
                    const int iw = iw0 + e * GEO_SW;
                    inside[e] = iw >= 0 && iw < GEO_W;
                    off[e] = clamp(iw, 0, GEO_W - 1);
                }
                for (int c = 0; c < Cg; ++c) {
                    const __global XELT *xc = xr + (size_t)c * HW;
                    float t[VW];
                    _Pragma("unroll") for (int e = 0; e < VW; ++e) t[e] = inside[e] ? LDX(xc, off[e]) : 0.0f;
                    const floatv b = VLOAD(t);
                    FMA_TILE(c * RS + tap, b)
                }
            }
        }
    }
#undef FMA_TILE
    const size_t erow = ((size_t)n * GEO_K + g * Kg + k0) * (size_t)(GEO_P * GEO_Q) + (size_t)oh * GEO_Q + ow0;
    const int nstore = min(VW, GEO_Q - ow0);
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
        if (k0 + m >= Kg) break;
        CONV_STORE(acc[m], g * Kg + k0 + m, erow + (size_t)m * GEO_P * GEO_Q, nstore);
    }
}

#else // STAGE
#define MWG (WGM * MWI)
#define NWG (WGN * VW)
// global = (ceil(Kg / MWG) WGM, ceil(P Q / NWG) WGN, N G), local = (WGM, WGN, 1). Pixels are
// flattened (p = oh Q + ow), so tiles run across output rows.
__kernel __attribute__((reqd_work_group_size(WGM, WGN, 1)))
void conv_implicit(const int16 geo, __global const XELT *x, const ulong x_off, __global const WELT *w,
                   const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int Cg = GEO_C / GEO_G, Kg = GEO_K / GEO_G, HW = GEO_H * GEO_W, RS = GEO_R * GEO_S;
    const int CRS = Cg * RS, PQ = GEO_P * GEO_Q;
    const int lm = (int)get_local_id(0), ln = (int)get_local_id(1), tid = ln * WGM + lm;
    const int tile_k0 = (int)get_group_id(0) * MWG, tile_p0 = (int)get_group_id(1) * NWG;
    const int ng = (int)get_global_id(2), n = ng / GEO_G, g = ng - n * GEO_G;
    const __global XELT *xg = x + x_off + ((size_t)n * GEO_C + g * Cg) * (size_t)HW;
    const __global WELT *wg = w + w_off + (size_t)g * Kg * CRS;
    __local float As[KWG * MWG];
    __local float Bs[KWG * NWG];
    floatv acc[MWI];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[m] = (floatv)(0.0f);
    for (int kk0 = 0; kk0 < CRS; kk0 += KWG) {
        for (int e = tid; e < KWG * MWG; e += WGM * WGN) { // neighbours read neighbouring weights
            const int mm = e / KWG, kk = e - mm * KWG, k = tile_k0 + mm;
            As[kk * MWG + mm] = (k < Kg && kk0 + kk < CRS) ? LDW(wg, (size_t)k * CRS + kk0 + kk) : 0.0f;
        }
        for (int e = tid; e < KWG * NWG; e += WGM * WGN) {
            const int kk = e / NWG, pp = e - kk * NWG, p = tile_p0 + pp, kidx = kk0 + kk;
            float v = 0.0f;
            if (p < PQ && kidx < CRS) {
                const int c = kidx / RS, rs = kidx - c * RS, r = rs / GEO_S, s = rs - r * GEO_S;
                const int oh = p / GEO_Q, ow = p - oh * GEO_Q;
                const int ih = oh * GEO_SH - GEO_PH + r * GEO_DH, iw = ow * GEO_SW - GEO_PW + s * GEO_DW;
                if (ih >= 0 && ih < GEO_H && iw >= 0 && iw < GEO_W) v = LDX(xg, (size_t)c * HW + ih * GEO_W + iw);
            }
            Bs[e] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int kn = min(KWG, CRS - kk0);
        for (int kk = 0; kk < kn; ++kk) {
            const floatv b = VLOAD(Bs + kk * NWG + ln * VW);
            _Pragma("unroll") for (int m = 0; m < MWI; ++m)
                acc[m] = fma((floatv)(As[kk * MWG + lm * MWI + m]), b, acc[m]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int p0 = tile_p0 + ln * VW;
    if (p0 >= PQ) return;
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
        const int k = tile_k0 + lm * MWI + m;
        if (k >= Kg) break;
        CONV_STORE(acc[m], g * Kg + k, ((size_t)n * GEO_K + g * Kg + k) * (size_t)PQ + p0, min(VW, PQ - p0));
    }
}
#endif
