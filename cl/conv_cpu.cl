// 2-D convolution, the CPU forms of the implicit GEMM (OpenCL C 1.2): the same computation and
// kernel arguments as conv.cl's conv_implicit (see there), shaped for CPUs that vectorize inside a
// work-item. A file of its own so that conv.cl, and the tuned entries keyed by its hash, stay as
// they are for the other devices.
//
//   STAGE 2  the host first copies x into zero-padded planes (pad_input below; x itself when an
//            unstrided fp32 layer has no padding) and hands the kernel the copy's geometry, so
//            every kernel tap of a VW-pixel tile is one unit-stride vector load: pixels are
//            flattened over the copy's row width (j = oh W + ow), columns ow >= Q are computed
//            and dropped. Strided layers (conv1's 7x7/2, 3x3/2) get a polyphase copy: the padded
//            plane is split into SH x SW phase planes (rows hp = a + SH i, columns wp = b + SW q
//            go to phase (a, b) at (i, q)), so output (oh, ow)'s tap (r, s) reads phase
//            ((r DH) % SH, (s DW) % SW) at (oh + r DH / SH, ow + s DW / SW): unit stride along
//            ow again, and one row of the phase plane per output row. A work-item holds MWI
//            channels x NV vectors of VW consecutive pixels (NV from the host's WGM): per tap NV
//            vector loads of x and MWI weight broadcasts feed MWI NV independent FMA chains (8 x 3
//            or 6 x 4 fill AVX-512's 32 registers; one vector per item gives MWI chains, fewer
//            than two 4-cycle FMA ports keep busy); up to WGN neighbouring tiles share a
//            work-group (one thread on PoCL), so the MWI weight rows stay in L1 across them.
//   STAGE 4  (depthwise) column tiles x row blocks x planes: see its kernel.
//   STAGE 8  (depthwise 3x3, pad 1, stride 1 or 2; the CPU default there) row strips of a plane per
//            work-item, or narrow planes whole (DW8_PLANES: one or two planes a work-item, one
//            vector a row, or two on stride-1 rows of 17-32 columns): see its kernels.
//   STAGE 3  (depthwise) a work-item computes MWI output rows of one channel, VW pixels at a time
//            along each row; up to WGN such items per work-group. Meant for one input channel per
//            group (memory-bound layers), correct for any layer.
// KR, KS (optional, from the host): the kernel size at compile time, so the taps unroll.
//
// The layer's geometry arrives at run time in one int16, so one program serves every layer:
#include "conv_geometry.cl"
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
// STAGE 2: pixel vectors per work-item (its tile is MWI channels x NV VW pixels); the host passes
// it in WGM, which this form has no other use for (no work-group extent along channels).
#if STAGE == 2 && defined(WGM)
#define NV WGM
#else
#define NV 1
#endif
#ifdef KR
#define KR_ KR
#else
#define KR_ GEO_R
#endif
#ifdef KS
#define KS_ KS
#else
#define KS_ GEO_S
#endif

// CSH, CSW, CDH, CDW (STAGE 2's polyphase programs, from the host): strides and dilations at
// compile time, so the taps' phase and offset arithmetic folds.
#ifdef CSH
#define SH_ CSH
#define SW_ CSW
#define DH_ CDH
#define DW_ CDW
#else
#define SH_ GEO_SH
#define SW_ GEO_SW
#define DH_ GEO_DH
#define DW_ GEO_DW
#endif
#if defined(KR) && KR > 3
#define ROWS_PRAGMA _Pragma("unroll 1")
#else
#define ROWS_PRAGMA _Pragma("unroll")
#endif

#include "vector.cl"

#include "dtype.cl"
#include "dtype_avx512.cl"
#include "epilogue.cl"
// conv_access.cl: an f16 y's partial vectors rounded as one vector (conv_store)
#define CONV_VECTOR_ROUND 1
#if STAGE == 2
#define CONV_F32_VST_U 1 // conv_access.cl: an fp32 y's vectors as single unaligned moves
#endif
#include "conv_access.cl"

// 16 f16 bit patterns as float16, exactly: one zmm vcvtph2ps on AVX-512 (dtype_avx512.cl), else
// vload_half16 from a private copy. The forms below gather short runs of 16-bit elements as
// integers and widen them here at once: a scalar vload_half is a software routine on PoCL's CPU
// devices (no cl_khr_fp16), several times the cost of the vector conversion per element.
TSR_DT_INLINE float16 conv_f16x16(const ushort16 h) {
#if defined(TSR_X16)
    return __builtin_ia32_vcvtph2ps512_mask(as_short16(h), (float16)(0.0f), TSR_X16_ALL, 8);
#else
    ushort t[16];
    vstore16(h, 0, t);
    return vload_half16(0, (const __private half *)t);
#endif
}
// The same for 16 elements of 16-bit storage type T (1 f16, 2 bf16: a shift).
#define CONV_WIDEN16(T, h) TSR_DT_CAT(CONV_WIDEN16_, T)(h)
#define CONV_WIDEN16_1(h) conv_f16x16(h)
#define CONV_WIDEN16_2(h) as_float16(convert_uint16(h) << 16)

#if STAGE == 2
#if defined(TSR_X16) && VW == 16 && (Y_TYPE == 1 || defined(CONV_BF16_X16))
// The first n (1 to 15) of v's 16 lanes rounded to y's 16-bit type at p: one vector rounding, then
// at most four vector stores of 8, 4, 2 and 1 lanes (n's bits, in order), as conv_store's.
TSR_INLINE void conv_st16_first(const float16 v, __global ushort *p, const int n) {
#if Y_TYPE == 1
    const ushort16 h16 = as_ushort16(__builtin_ia32_vcvtps2ph512_mask(v, 0, (short16)(0), TSR_X16_ALL));
#else
    const ushort16 h16 = conv_bf16x16(v);
#endif
    ushort8 r8 = h16.lo;
    if (n & 8) {
        TSR_DT_VST16(8, r8, p);
        r8 = h16.hi, p += 8;
    }
    ushort4 r4 = r8.lo;
    if (n & 4) {
        TSR_DT_VST16(4, r4, p);
        r4 = r8.hi, p += 4;
    }
    ushort2 r2 = r4.lo;
    if (n & 2) {
        TSR_DT_VST16(2, r2, p);
        r2 = r4.hi, p += 2;
    }
    if (n & 1) *p = r2.x;
}
#endif

// x is the (padded, for strides polyphase) copy: the host's geometry has H = the copy's rows
// per channel (all phases), W = its row width, PH = the phases along a row (SW, or 1 for a
// one-column kernel), PW = one phase plane's elements, and geo.sf the largest tap offset; the
// output keeps its true P x Q, strides and dilations their true values. global = (ceil(Kg /
// MWI), ceil(P W / VW) rounded to WGN, N G), local = (1, WGN, 1). x is fp32 whatever X_TYPE: a
// 16-bit x always comes through pad_input's fp32 copy (unpadded layers too), so its vector loads
// convert nothing.
__kernel void conv_implicit(const int16 geo, __global const float *x, const ulong x_off, __global const WELT *w,
                            const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int Cg = GEO_C / GEO_G, Kg = GEO_K / GEO_G, HW = GEO_H * GEO_W;
    const int R = KR_, S = KS_, RS = R * S;
    const int span = GEO_P * GEO_W; // flattened outputs, padded columns included
    const int k0 = (int)get_global_id(0) * MWI, j0 = (int)get_global_id(1) * (NV * VW), ng = (int)get_global_id(2);
    if (k0 >= Kg || j0 >= span) return;
    const int n = ng / GEO_G, g = ng - n * GEO_G;
    const __global float *xc = x + x_off + ((size_t)n * GEO_C + g * Cg) * (size_t)HW + j0;
    // Rows past Kg repeat the last one (computed, never stored), so the tile needs no guards.
    const __global WELT *wrow[MWI];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m)
        wrow[m] = w + w_off + (size_t)(g * Kg + min(k0 + m, Kg - 1)) * Cg * RS;
    floatv acc[MWI][NV];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m)
        _Pragma("unroll") for (int v = 0; v < NV; ++v) acc[m][v] = (floatv)(0.0f);
    const int rstep = GEO_DH * GEO_W;
    const bool poly = GEO_SH > 1 || GEO_SW > 1; // the host asks for it with the kernel size compiled in
    // One tap: NV pixel vectors (loaded by LOADV(v)) times MWI weights, MWI NV independent chains.
#define FMA_TILE(wi, LOADV)                                                                        \
    {                                                                                              \
        floatv b[NV];                                                                              \
        _Pragma("unroll") for (int v = 0; v < NV; ++v) b[v] = LOADV(v);                            \
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {                                          \
            const floatv wv = (floatv)(LDW(wrow[m], wi));                                          \
            _Pragma("unroll") for (int v = 0; v < NV; ++v) acc[m][v] = fma(wv, b[v], acc[m][v]);   \
        }                                                                                          \
    }
    // Tap (r, s)'s offset: a phase plane, then rows and columns inside it (r DH, s DW when unstrided).
#define POLY_OFF(r, s)                                                                             \
    (((r) * GEO_DH % GEO_SH * GEO_PH + (s) * GEO_DW % GEO_SW) * GEO_PW + (r) * GEO_DH / GEO_SH * GEO_W + \
     (s) * GEO_DW / GEO_SW)
    if (j0 + NV * VW - 1 + geo.sf < HW) {
        if (poly) {
            // A kernel row's taps read two phase planes (the s DW % SW ones) at compile-time
            // distances, so large kernels (conv1's 7x7) keep the rows in a loop, not unrolled: a
            // few live pointers instead of one per tap.
            for (int c = 0; c < Cg; ++c, xc += HW) {
                ROWS_PRAGMA for (int r = 0; r < R; ++r) {
                    const int rr = r * DH_;
                    const __global float *xr = xc + rr % SH_ * GEO_PH * GEO_PW + rr / SH_ * GEO_W;
                    _Pragma("unroll") for (int s = 0; s < S; ++s) {
                        const __global float *xs = xr + s * DW_ % SW_ * GEO_PW + s * DW_ / SW_;
#define LOAD_POLY(v) VLOAD(xs + (v) * VW)
                        FMA_TILE(r * S + s, LOAD_POLY)
#undef LOAD_POLY
                    }
                }
                _Pragma("unroll") for (int m = 0; m < MWI; ++m) wrow[m] += RS;
            }
        } else {
            for (int c = 0; c < Cg; ++c, xc += HW) {
                _Pragma("unroll") for (int r = 0; r < R; ++r)
                    _Pragma("unroll") for (int s = 0; s < S; ++s) {
                        const __global float *xs = xc + r * rstep + s * GEO_DW;
#define LOAD_PLAIN(v) VLOAD(xs + (v) * VW)
                        FMA_TILE(r * S + s, LOAD_PLAIN)
#undef LOAD_PLAIN
                    }
                _Pragma("unroll") for (int m = 0; m < MWI; ++m) wrow[m] += RS;
            }
        }
    } else {
        // The plane's last tile (x read as it is, unstrided): lanes past the plane (padded
        // columns only) read its last element.
        const int lim = HW - 1 - j0;
        for (int c = 0; c < Cg; ++c, xc += HW) {
            for (int r = 0; r < R; ++r)
                for (int s = 0; s < S; ++s) {
                    const int o = poly ? POLY_OFF(r, s) : r * rstep + s * GEO_DW;
                    float t[NV][VW];
                    _Pragma("unroll") for (int v = 0; v < NV; ++v)
                        _Pragma("unroll") for (int e = 0; e < VW; ++e) t[v][e] = xc[min(o + v * VW + e, lim)];
#define LOAD_LANES(v) VLOAD(t[v])
                    FMA_TILE(r * S + s, LOAD_LANES)
#undef LOAD_LANES
                }
            _Pragma("unroll") for (int m = 0; m < MWI; ++m) wrow[m] += RS;
        }
    }
#undef POLY_OFF
#undef FMA_TILE
    // Output (oh, ow < Q) is flattened position oh W + ow: exactly one work-item stores it.
    const size_t ek = ((size_t)n * GEO_K + g * Kg + k0) * (size_t)(GEO_P * GEO_Q);
    _Pragma("unroll") for (int v = 0; v < NV; ++v) {
        const int jv = j0 + v * VW;
        if (jv >= span) break; // the tile's vectors past the plane's outputs
        const int oh0 = jv / GEO_W, ow0 = jv - oh0 * GEO_W;
        const bool whole = ow0 + VW <= GEO_Q; // the vector lies inside one output row
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
            if (k0 + m >= Kg) break;
            const size_t em = ek + (size_t)m * GEO_P * GEO_Q;
            if (whole) {
                CONV_STORE(acc[m][v], g * Kg + k0 + m, em + oh0 * GEO_Q + ow0, VW);
            } else {
#if VW > 1
                // A vector across output rows (or over the copy's padded columns): the epilogue on
                // the whole vector (the channel's scale and bias broadcast, the residual gathered
                // for the lanes inside y, the activation) and y's rounding once (one vector
                // conversion for a 16-bit y, where PoCL's scalar vstore_half_rte is a software
                // routine), then the lanes inside y stored one by one.
                const int kk = g * Kg + k0 + m;
                floatv s = acc[m][v];
                if (epi_flags & 1) s *= scale[scale_off + kk];
                if (epi_flags & 2) s += bias[bias_off + kk];
#if defined(TSR_X16) && VW == 16 && (Y_TYPE == 0 || Y_TYPE == 1 || defined(CONV_BF16_X16))
                // AVX-512: the lanes inside y as runs, each run in one output row (at most
                // ceil(VW / W) + 1 of them): the residual's lanes gathered run by run, and each
                // run moved to lane 0 by one vpermps and stored, an fp32 y by one masked vmovups
                // (y's address as an integer: the builtin takes a plain pointer, and PoCL's CPU
                // devices have one address space), a 16-bit y rounded and stored by
                // conv_st16_first. Session 24: the per-lane indices the lane-by-lane stores use
                // do not depend on the channel, so LLVM computed them for every vector of the
                // tile, crossing or not (16 lanes of row and column arithmetic a vector); with
                // them, conv1 (115-wide copy rows: one vector in seven crosses a row end) spent
                // 11-13% more CPU time.
#define CONV_RUNS(BODY)                                                                            \
    {                                                                                              \
        int le = 0, rh = oh0, rw = ow0; /* the next lane, its output row and column */            \
        while (le < VW && rh < GEO_P) {                                                            \
            if (rw < GEO_Q) {                                                                      \
                const int run = min(GEO_Q - rw, VW - le);                                          \
                const size_t at = em + (size_t)(rh * GEO_Q + rw);                                  \
                BODY                                                                               \
                le += run, rw += run;                                                              \
                if (le >= VW) break;                                                               \
            }                                                                                      \
            le += GEO_W - rw, rw = 0, ++rh; /* the copy's padded columns, then the next row */    \
        }                                                                                          \
    }
                if (res_type != TSR_RES_NONE) {
                    float r[VW];
                    _Pragma("unroll") for (int e = 0; e < VW; ++e) r[e] = 0.0f;
                    CONV_RUNS(for (int i = 0; i < run; ++i) r[le + i] = tsr_res_ld(res, res_type, res_off + at + i);)
                    s += VLOAD(r);
                }
                if (act != TSR_ACT_NONE) s = activate_floatv(s, act);
                CONV_RUNS({
                    const int16 from = (int16)(le) + (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#if Y_TYPE == 0
                    __builtin_ia32_storeups512_mask((__private float *)(size_t)(y + y_off + at),
                                                    __builtin_ia32_permvarsf512(s, from), (ushort)((1u << run) - 1u));
#else
                    conv_st16_first(__builtin_ia32_permvarsf512(s, from), (__global ushort *)y + y_off + at, run);
#endif
                })
#undef CONV_RUNS
#else
                int at[VW]; // each lane's element of the plane, -1 outside y
                int oh = oh0, ow = ow0;
                _Pragma("unroll") for (int e = 0; e < VW; ++e) {
                    at[e] = ow < GEO_Q && oh < GEO_P ? oh * GEO_Q + ow : -1;
                    if (++ow == GEO_W) ow = 0, ++oh;
                }
                if (res_type != TSR_RES_NONE) {
                    float r[VW];
                    _Pragma("unroll") for (int e = 0; e < VW; ++e)
                        r[e] = at[e] >= 0 ? tsr_res_ld(res, res_type, res_off + em + at[e]) : 0.0f;
                    s += VLOAD(r);
                }
                if (act != TSR_ACT_NONE) s = activate_floatv(s, act);
#if Y_TYPE == 0
                float t[VW];
                VSTORE(s, t);
                _Pragma("unroll") for (int e = 0; e < VW; ++e) if (at[e] >= 0) y[y_off + em + at[e]] = t[e];
#else
                ushort h[VW];
#if Y_TYPE == 1
                TSR_VST(1, VW, s, (__private half *)h);
#else
                CONV_BF16_PRIV(s, h);
#endif
                _Pragma("unroll") for (int e = 0; e < VW; ++e)
                    if (at[e] >= 0) ((__global ushort *)y)[y_off + em + at[e]] = h[e];
#endif
#endif
#else
                int oh = oh0, ow = ow0;
                if (ow < GEO_Q && oh < GEO_P) CONV_STORE1(acc[m][v], g * Kg + k0 + m, em + oh * GEO_Q + ow);
#endif
            }
        }
    }
}

#elif STAGE == 5
// (channel vectors) the same padded (polyphase) copy of x as STAGE 2 (none for an unpadded 1x1
// layer: x itself, at its strides under KV_STRIDED_X, 16-bit under KV_X16), read one pixel at a time:
// a work-item holds NP = WGM output pixels x MWI vectors of VW output channels (KB = MWI VW), and
// per tap loads MWI weight vectors and broadcasts NP input values into NP MWI independent FMA
// chains. The pixels are any NP consecutive ones of the chunk's images (rows and images crossed
// freely), so no lane computes a padded column or a rounding of the plane: the form for small
// planes (14x14, 7x7), where STAGE 2's flattened rows leave 12-23% of the lanes idle. The
// weights come packed by pack_weights below (KB consecutive output channels per tap, fp32):
// wp[g][kb][c][r][s][KB], zero past Kg. The host's geometry is STAGE 2's (the copy's rows and
// width, phases, phase plane), with geo.sf = the chunk's pixels (images x P Q). global =
// (ceil(pixels / NP) rounded to WGN, ceil(Kg / KB), G), local = (WGN, 1, 1): consecutive
// work-groups share a block of weights (they stay in L2) and sweep the pixels.
#define NP WGM
#define KB (MWI * VW)
// KV_X16 (an unpadded 1x1 layer with 16-bit x, from the host): x itself, each pixel widened as it
// is broadcast (bf16: a shift; f16: one F16C conversion where the target has it), no widening copy
#if defined(KV_X16) && X_TYPE != 0
#define KV_XT XELT
#if X_TYPE == 2
#define KV_LD(p) as_float((uint)(*(p)) << 16)
#define KV_WIDEN8(h) as_float8(convert_uint8(h) << 16)
#elif defined(__F16C__) && defined(__has_builtin)
#if __has_builtin(__builtin_ia32_vcvtph2ps) && __has_builtin(__builtin_ia32_vcvtph2ps256)
#define KV_LD(p) (__builtin_ia32_vcvtph2ps((short8)(*(const __global short *)(p), 0, 0, 0, 0, 0, 0, 0))[0])
#define KV_WIDEN8(h) as_float8(__builtin_ia32_vcvtph2ps256(as_short8(h)))
#endif
#endif
#ifndef KV_LD
#define KV_LD(p) vload_half(0, (p))
#define KV_WIDEN8(h) vload_half8(0, (const __private half *)&(h))
#endif
#else
#define KV_XT float
#define KV_LD(p) (*(p))
#endif
__kernel void conv_implicit(const int16 geo, __global const KV_XT *x, const ulong x_off, __global const float *w,
                            const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int Cg = GEO_C / GEO_G, Kg = GEO_K / GEO_G, HW = GEO_H * GEO_W;
    const int R = KR_, S = KS_, RS = R * S, PQ = GEO_P * GEO_Q, npix = geo.sf;
    const int kb = (int)get_global_id(1), t0 = (int)get_global_id(0) * NP, g = (int)get_global_id(2);
    if (kb * KB >= Kg || t0 >= npix) return;
    // each pixel's place in the copy: its image's channel group, row and column (pixels past the
    // chunk repeat the last one: computed, never stored)
    const __global KV_XT *px[NP];
    _Pragma("unroll") for (int i = 0; i < NP; ++i) {
        const int t = min(t0 + i, npix - 1), n = t / PQ, rem = t - n * PQ, oh = rem / GEO_Q;
#ifdef KV_STRIDED_X
        // (a strided 1x1 layer without padding: x itself at the strides, the plain geometry)
        px[i] = x + x_off + (size_t)((n * GEO_C + g * Cg) * HW + oh * SH_ * GEO_W + (rem - oh * GEO_Q) * SW_);
#else
        px[i] = x + x_off + (size_t)((n * GEO_C + g * Cg) * HW + oh * GEO_W + (rem - oh * GEO_Q));
#endif
    }
    const __global float *wp = w + w_off + ((size_t)g * ((Kg + KB - 1) / KB) + kb) * (size_t)(Cg * RS * KB);
    floatv acc[NP][MWI];
    _Pragma("unroll") for (int i = 0; i < NP; ++i)
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[i][m] = (floatv)(0.0f);
    const bool poly = GEO_SH > 1 || GEO_SW > 1;
    int c = 0;
#if defined(KV_X16) && X_TYPE != 0 && !defined(KV_STRIDED_X) && NP <= 8
    // (an unstrided 1x1 layer, 16-bit x in place) NP pixels in one plane lie side by side: while 8
    // elements from the first stay in its plane, a channel's NP values come in one 8-element load and
    // conversion into a private row that the broadcasts read, not in NP scalar widenings
    if (t0 + NP <= npix && t0 % PQ + 8 <= PQ) {
        const __global ushort *xr = (const __global ushort *)px[0];
        for (; c < Cg; ++c, xr += HW, wp += KB) {
            float xs[8];
            const ushort8 h = vload8(0, xr);
            vstore8(KV_WIDEN8(h), 0, xs);
            floatv wv[MWI];
            _Pragma("unroll") for (int m = 0; m < MWI; ++m) wv[m] = VLOAD(wp + m * VW);
            _Pragma("unroll") for (int i = 0; i < NP; ++i) {
                const floatv b = (floatv)(xs[i]);
                _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[i][m] = fma(wv[m], b, acc[i][m]);
            }
        }
    }
#endif
    // One tap per iteration, not unrolled: unrolled, the compiler hoists every tap's broadcasts
    // above the FMAs and spills them. The packed weights are read in order (wp += KB per tap).
    for (; c < Cg; ++c) {
        _Pragma("unroll 1") for (int r = 0; r < R; ++r) {
            const int rr = r * DH_;
            const int ro = poly ? rr % SH_ * GEO_PH * GEO_PW + rr / SH_ * GEO_W : rr * GEO_W;
            _Pragma("unroll 1") for (int s = 0; s < S; ++s, wp += KB) {
                const int o = ro + (poly ? s * DW_ % SW_ * GEO_PW + s * DW_ / SW_ : s * DW_);
                floatv wv[MWI];
                _Pragma("unroll") for (int m = 0; m < MWI; ++m) wv[m] = VLOAD(wp + m * VW);
                _Pragma("unroll") for (int i = 0; i < NP; ++i) {
                    const floatv b = (floatv)(KV_LD(px[i] + o));
                    _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[i][m] = fma(wv[m], b, acc[i][m]);
                }
            }
        }
        _Pragma("unroll") for (int i = 0; i < NP; ++i) px[i] += HW;
    }
    _Pragma("unroll") for (int i = 0; i < NP; ++i) {
        const int t = t0 + i;
        if (t >= npix) break;
        const int n = t / PQ, rem = t - n * PQ;
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
            const int k = kb * KB + m * VW;
            if (k >= Kg) break;
            const size_t e0 = ((size_t)n * GEO_K + g * Kg + k) * (size_t)PQ + rem;
            CONV_STORE_STRIDED(acc[i][m], g * Kg + k, e0, (size_t)PQ, min(VW, Kg - k));
        }
    }
}
#undef NP
#undef KB
#undef KV_XT
#undef KV_LD
#undef KV_WIDEN8

#elif STAGE == 4
// (depthwise, all taps compiled in) global = (column tiles ceil(Q / VW), row blocks ceil(P / MWI),
// N K planes, the last two rounded to the work-group), local from the host (a whole output row's
// tiles, then row blocks, then planes, about WGN items). A work-item computes MWI output rows x VW
// pixels of one channel: MWI independent accumulator chains over the taps, the tap weights held in
// registers, the MWI rows' input rows (overlapping for stride 1) read from L1. A tile whose every
// tap's columns lie inside the row (most of a wide plane) runs straight vector code (stride 2:
// every second element of 2 VW), skipping the rows above and below the image; border tiles zero
// the lanes outside the image with a bit mask, and go
// lane by lane only where a vector would leave the channel's plane. The row's last tile ends at its
// last pixel (overlapping the one before) when Q >= VW. Correct for any layer (Cg channels are
// summed in turn); meant for one input channel per group.
#if VW == 1
#define DW_IOTA 0
#define DW_MASKED(v, m) ((m) ? (v) : 0.0f)
#define DW_TRUE(c) (-(int)(c)) // a comparison as a lane mask: -1 true, 0 false
typedef int dw_intv;
#else
#define DW_IOTA CAT(DW_IOTA_, VW)
#define DW_IOTA_2 (int2)(0, 1)
#define DW_IOTA_4 (int4)(0, 1, 2, 3)
#define DW_IOTA_8 (int8)(0, 1, 2, 3, 4, 5, 6, 7)
#define DW_IOTA_16 (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define DW_MASKED(v, m) CAT(as_float, VW)(CAT(as_int, VW)(v) & (m))
#define DW_TRUE(c) (c)
typedef CAT(int, VW) dw_intv;
#endif
#if defined(KR) && KR <= 3
#define DW_TAPS (KR * KS)
#else
#define DW_TAPS 1 // weights read from memory at each tap
#endif
#ifdef DW_FLAT
// The flattened variant (the host defines DW_FLAT for unstrided layers whose output rows are as
// wide as the input's, Q = W: "same" padding, and no wider than a vector, Q <= VW, where row
// tiles would leave lanes idle; on wider rows its masks cost more than the row tiles): output j = oh Q + ow's tap (r, s) reads input
// j + (r DH - PH) W + s DW - PW, the same offset for every pixel, so a vector of VW consecutive
// outputs, crossing rows, is one load per tap whatever Q; the lanes whose input row or column lies
// outside the image are zeroed with a bit mask. A work-item holds MWI such vectors (consecutive:
// MWI VW pixels of one plane); global = (ceil(P Q / (MWI VW)) rounded to the work-group, 1,
// N K planes rounded), local from the host.
__kernel void conv_implicit(const int16 geo, __global const XELT *x, const ulong x_off, __global const WELT *w,
                            const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int Cg = GEO_C / GEO_G, Kg = GEO_K / GEO_G, HW = GEO_H * GEO_W, PQ = GEO_P * GEO_Q;
    const int R = KR_, S = KS_, RS = R * S;
    const int j0 = (int)get_global_id(0) * (MWI * VW), nk = (int)get_global_id(2);
    if (j0 >= PQ || nk >= geo.sf) return; // geo.sf: N K
    const int n = nk / GEO_K, k = nk - n * GEO_K, g = k / Kg;
    const __global XELT *xg = x + x_off + ((size_t)n * GEO_C + g * Cg) * (size_t)HW;
    const __global WELT *wk = w + w_off + (size_t)k * Cg * RS;
    // each vector's lanes: output row and column (no vector division: wrap the columns past Q)
    dw_intv oh[MWI], ow[MWI];
    const int wraps = (VW + GEO_Q - 1) / GEO_Q;
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
        const int jm = min(j0 + m * VW, PQ - 1);
        const int r0 = jm / GEO_Q;
        ow[m] = (jm - r0 * GEO_Q) + DW_IOTA;
        oh[m] = (dw_intv)(r0);
        for (int i = 0; i < wraps; ++i) {
            const dw_intv over = DW_TRUE(ow[m] >= GEO_Q); // -1 where a lane passed the row's end
            ow[m] -= over & (dw_intv)(GEO_Q);
            oh[m] -= over;
        }
    }
    floatv acc[MWI];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[m] = (floatv)(0.0f);
#if defined(KS) && KS <= 3
    // the column masks, per vector and kernel column, once (row masks per kernel row below)
    dw_intv colok[MWI][KS];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m)
        _Pragma("unroll") for (int s = 0; s < KS; ++s) {
            const dw_intv iw = ow[m] + (s * DW_ - GEO_PW);
            colok[m][s] = DW_TRUE(iw >= 0) & DW_TRUE(iw < GEO_W);
        }
#define DW_COLOK(m, s, iw) colok[m][s]
#else
#define DW_COLOK(m, s, iw) (DW_TRUE((iw) >= 0) & DW_TRUE((iw) < GEO_W))
#endif
    for (int c = 0; c < Cg; ++c) {
        const __global XELT *xc = xg + (size_t)c * HW;
        const __global WELT *wc = wk + c * RS;
        _Pragma("unroll") for (int r = 0; r < R; ++r) {
            const int dr = r * DH_ - GEO_PH;
            dw_intv rowok[MWI];
            _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                const dw_intv ih = oh[m] + dr;
                rowok[m] = DW_TRUE(ih >= 0) & DW_TRUE(ih < GEO_H);
            }
            _Pragma("unroll") for (int s = 0; s < S; ++s) {
                const float wrs = LDW(wc, r * S + s);
                const int ds = s * DW_ - GEO_PW;
                _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                    const int jm = j0 + m * VW;
                    const dw_intv keep = rowok[m] & DW_COLOK(m, s, ow[m] + ds);
                    const int at = jm + dr * GEO_W + ds;
                    floatv b;
                    if (at >= 0 && at + VW <= HW) {
                        b = VLOADX(xc + at);
                    } else { // the plane's first and last vectors
                        float tl[VW];
                        _Pragma("unroll 1") for (int e = 0; e < VW; ++e) {
                            const int i = at + e;
                            const float v = LDX(xc, clamp(i, 0, HW - 1));
                            tl[e] = i >= 0 && i < HW ? v : 0.0f;
                        }
                        b = VLOAD(tl);
                    }
                    acc[m] = fma((floatv)(wrs), DW_MASKED(b, keep), acc[m]);
                }
            }
        }
    }
#undef DW_COLOK
    const size_t ek = (size_t)nk * PQ;
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
        const int jm = j0 + m * VW;
        if (jm >= PQ) break;
        CONV_STORE(acc[m], k, ek + jm, min(VW, PQ - jm));
    }
}
#else
__kernel void conv_implicit(const int16 geo, __global const XELT *x, const ulong x_off, __global const WELT *w,
                            const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int Cg = GEO_C / GEO_G, Kg = GEO_K / GEO_G, HW = GEO_H * GEO_W;
    const int R = KR_, S = KS_, RS = R * S;
    const int t = (int)get_global_id(0), oh0 = (int)get_global_id(1) * MWI, nk = (int)get_global_id(2);
    if (t * VW >= GEO_Q || oh0 >= GEO_P || nk >= geo.sf) return; // geo.sf: N K
    const int n = nk / GEO_K, k = nk - n * GEO_K, g = k / Kg;
    const __global XELT *xg = x + x_off + ((size_t)n * GEO_C + g * Cg) * (size_t)HW;
    const __global WELT *wk = w + w_off + (size_t)k * Cg * RS;
    const int ow0 = GEO_Q >= VW ? min(t * VW, GEO_Q - VW) : 0;
    const int rows = min(MWI, GEO_P - oh0);
    const int iwb = ow0 * SW_ - GEO_PW;             // the tile's first input column (tap s = 0)
    const int span = SW_ == 1 ? VW : 2 * VW;         // elements one load reads
    const bool vec_ok = SW_ <= 2;
    // every tap's columns inside the row (the rows are checked per tap: first and last row blocks)
    const bool inside = vec_ok && iwb >= 0 && iwb + (S - 1) * DW_ + span <= GEO_W;
    const dw_intv lane_col = DW_IOTA * SW_;
    floatv acc[MWI];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[m] = (floatv)(0.0f);
    for (int c = 0; c < Cg; ++c) {
        const __global XELT *xc = xg + (size_t)c * HW;
        const __global WELT *wc = wk + c * RS;
        if (inside) {
#if DW_TAPS > 1
            float wv[DW_TAPS];
            _Pragma("unroll") for (int i = 0; i < DW_TAPS; ++i) wv[i] = LDW(wc, i);
#define DW_W(i) wv[i]
#else
#define DW_W(i) LDW(wc, i)
#endif
            // rows past `rows` repeat the last one (computed, never stored)
            _Pragma("unroll") for (int r = 0; r < R; ++r)
                _Pragma("unroll") for (int s = 0; s < S; ++s) {
                    const float wrs = DW_W(r * S + s);
                    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                        const int ih = (oh0 + min(m, rows - 1)) * SH_ - GEO_PH + r * DH_;
                        if (ih < 0 || ih >= GEO_H) continue; // a row of zeros adds nothing
                        const __global XELT *xp = xc + ih * GEO_W + iwb + s * DW_;
                        const floatv b = SW_ == 1 ? VLOADX(xp) : VLOAD_STRIDE2(xp);
                        acc[m] = fma((floatv)(wrs), b, acc[m]);
                    }
                }
#undef DW_W
        } else {
            for (int r = 0; r < R; ++r) {
                _Pragma("unroll") for (int s = 0; s < S; ++s) {
                    const float wrs = LDW(wc, r * S + s);
                    const int iw0 = iwb + s * DW_;
                    const dw_intv col = iw0 + lane_col;
                    const dw_intv keep = col >= 0 && col < GEO_W;
                    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                        const int ih = (oh0 + m) * SH_ - GEO_PH + r * DH_;
                        if (m >= rows || ih < 0 || ih >= GEO_H) continue; // a row of zeros adds nothing
                        const int at = ih * GEO_W + iw0;
                        floatv b;
                        if (vec_ok && at >= 0 && at + span <= HW) {
                            const __global XELT *xp = xc + at;
                            b = SW_ == 1 ? VLOADX(xp) : VLOAD_STRIDE2(xp);
                            b = DW_MASKED(b, keep);
                        } else {
                            float tl[VW];
                            const __global XELT *xr = xc + ih * GEO_W;
                            _Pragma("unroll 1") for (int e = 0; e < VW; ++e) { // rare: kept small (code size)
                                const int iw = iw0 + e * SW_;
                                const float v = LDX(xr, clamp(iw, 0, GEO_W - 1));
                                tl[e] = iw >= 0 && iw < GEO_W ? v : 0.0f;
                            }
                            b = VLOAD(tl);
                        }
                        acc[m] = fma((floatv)(wrs), b, acc[m]);
                    }
                }
            }
        }
    }
    // Overlapped pixels (the row's last tile) belong to the tile before: stored only by it when a
    // residual is read (it may be y itself), else stored again with the same values.
    const int skip = res_type == TSR_RES_NONE ? 0 : t * VW - ow0;
    const size_t ek = (size_t)nk * GEO_P * GEO_Q;
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
        if (m >= rows) break;
        const size_t er = ek + (size_t)(oh0 + m) * GEO_Q + ow0;
        if (skip == 0) {
            CONV_STORE(acc[m], k, er, min(VW, GEO_Q - ow0));
        } else {
            float tl[VW];
            VSTORE(acc[m], tl);
            for (int e = skip; e < VW; ++e) CONV_STORE1(tl[e], k, er + e);
        }
    }
}
#endif // DW_FLAT
#undef DW_TAPS

#elif STAGE == 8
// (depthwise 3x3 row strips) One channel per group (C = K = G), 3x3 taps, padding 1, dilation 1,
// stride 1 (any W) or 2 (even W), Q >= VW >= 4: the host checks, and runs STAGE 4 (the same
// configuration) on other layers. global = (row bands, K rounded to the work-group, N), local =
// (1, channels per work-group, 1). A work-item computes a band of output rows of one plane
// (the whole plane unless the layer has too few planes to keep the device busy), MWI rows at a
// time: for each tile of VW consecutive output columns (the row's last tile moved back to end at
// the row's last pixel) it walks the strip's input rows once, each row's taps read as whole
// vectors and fed to every output row of the strip that uses it (MWI + 2 rows per MWI outputs at
// stride 1, 2 MWI + 1 at stride 2), the nine weights in registers. Every load stays inside its
// input row: stride 1 reads columns ow0 - 1, ow0 and ow0 + 1, and the first (last) tile shifts
// its middle vector right (left) one lane with the padding's zero instead of reading past the
// row; stride 2 reads 2 VW columns from 2 ow0, splits them into even columns (tap 1) and odd ones
// (tap 2), and tap 0's columns are the odd ones shifted right a lane with column 2 ow0 - 1 (a
// zero in the first tile). Input rows outside the image are skipped.
#if VW == 16
#define DW8_IOTA ((int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#define DW8_VST_HALF(t, p) TSR_VST(Y_TYPE, 8, vload8(0, (t)), (p))
typedef int16 intv_dw8;
#define DW8_SHR(v, f) ((float16)((f), (v).s0123, (v).s4567, (v).s89ab, (v).scd, (v).se))
#define DW8_SHL(v, f) ((float16)((v).s1234, (v).s5678, (v).s9abc, (v).sdef, (f)))
#elif VW == 8
#define DW8_IOTA ((int8)(0, 1, 2, 3, 4, 5, 6, 7))
#define DW8_VST_HALF(t, p) TSR_VST(Y_TYPE, 4, vload4(0, (t)), (p))
typedef int8 intv_dw8;
#define DW8_SHR(v, f) ((float8)((f), (v).s0123, (v).s456))
#define DW8_SHL(v, f) ((float8)((v).s1234, (v).s567, (f)))
#elif VW == 4
#define DW8_IOTA ((int4)(0, 1, 2, 3))
#define DW8_VST_HALF(t, p) TSR_VST(Y_TYPE, 2, vload2(0, (t)), (p))
typedef int4 intv_dw8;
#define DW8_SHR(v, f) ((float4)((f), (v).s012))
#define DW8_SHL(v, f) ((float4)((v).s123, (f)))
#else
#define DW8_NO_ROWS // (VW 1 and 2: the channels-last kernel below only; the host takes 4 and up here)
#endif
#ifndef DW8_NO_ROWS
// (session 25) On AVX-512 x86 under clang with 16 lanes: the side taps and the stride-2 split as single
// two-source permutes (__builtin_shufflevector: one vpermt2ps each, where the swizzles above
// came out as ymm pieces with extracts and inserts), and an fp32 row's 16 lanes as one unaligned
// move (PoCL 3.1's vload16 on float is two 8-lane loads and an insert).
#if VW == 16 && defined(__has_builtin) && defined(__x86_64__) && defined(__AVX512F__)
#if __has_builtin(__builtin_shufflevector)
#define DW8_FAST 1
#endif
#endif
#ifdef DW8_FAST
#undef DW8_SHR
#undef DW8_SHL
#define DW8_SHR(v, f) __builtin_shufflevector((v), (float16)(f), 16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)
#define DW8_SHL(v, f) __builtin_shufflevector((v), (float16)(f), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
#define DW8_EVEN(a, b) __builtin_shufflevector((a), (b), 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#define DW8_ODD(a, b) __builtin_shufflevector((a), (b), 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)
typedef float16 dw8_float16_u __attribute__((aligned(4)));
#if X_TYPE == 0
#define DW8_VLD(p) (*(const __global dw8_float16_u *)(p))
#endif
#else
#define DW8_EVEN(a, b) ((floatv)((a).even, (b).even))
#define DW8_ODD(a, b) ((floatv)((a).odd, (b).odd))
#endif
#ifndef DW8_VLD
#define DW8_VLD(p) VLOADX(p)
#endif
// A software prefetch of the same columns 4 MWI input rows on (the strip after next at stride 2,
// or the next plane's first rows: planes are consecutive, and a prefetch never faults). The
// strip's walk, tile by tile over its rows, hides the row stream from the hardware's prefetchers;
// ResNet-50's and MobileNet-V2's large planes come from memory at batch 8 (8x96x112x112 /2: 1.87
// -> 1.01 ms, back to back on a 2-core Zen 5). Stride 1 only on rows of more than 4 vectors (on
// 56 and 28 wide rows it cost 5-10%). AVX-512 only, as above (measured there; AVX2's programs,
// 16 lanes or 8, keep their code).
#ifdef DW8_FAST
#if __has_builtin(__builtin_prefetch)
#define DW8_PREFETCH(p) __builtin_prefetch((const void *)(ulong)(p), 0, 3)
#endif
#endif
#ifndef DW8_PREFETCH
#define DW8_PREFETCH(p) ((void)0)
#endif
// One input row i of the strip (input row ih) into the strip's accumulators, stride 1: LEFT and
// RIGHT (0 or 1, so the tests fold) say whether the tile touches the row's first or last column.
#define DW8_ROW1(LEFT, RIGHT, CHK)                                                                   \
    _Pragma("unroll") for (int i = 0; i < MWI + 2; ++i) {                                            \
        const int ih = oh0 - 1 + i;                                                                  \
        if ((CHK) && (ih < 0 || ih >= GEO_H)) continue; /* a row of zeros adds nothing */           \
        const __global XELT *xr = xc + ih * GEO_W + ow0;                                            \
        if (GEO_W > 4 * VW) DW8_PREFETCH(xr + 4 * MWI * GEO_W);                                      \
        const floatv v1 = DW8_VLD(xr);                                                               \
        const floatv v0 = (LEFT) ? DW8_SHR(v1, 0.0f) : DW8_VLD(xr - 1);                              \
        const floatv v2 = (RIGHT) ? DW8_SHL(v1, 0.0f) : DW8_VLD(xr + 1);                             \
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {                                            \
            const int r = i - m;                                                                     \
            if (r < 0 || r > 2) continue;                                                            \
            acc[m] = fma((floatv)(wt[3 * r + 2]), v2,                                                \
                         fma((floatv)(wt[3 * r + 1]), v1, fma((floatv)(wt[3 * r]), v0, acc[m])));     \
        }                                                                                            \
    }
#define DW8_ROW2(LEFT, CHK)                                                                          \
    _Pragma("unroll") for (int i = 0; i < 2 * MWI + 1; ++i) {                                        \
        const int ih = 2 * oh0 - 1 + i;                                                              \
        if ((CHK) && (ih < 0 || ih >= GEO_H)) continue;                                              \
        const __global XELT *xr = xc + ih * GEO_W + 2 * ow0;                                        \
        DW8_PREFETCH(xr + 4 * MWI * GEO_W);                                                          \
        DW8_PREFETCH(xr + 4 * MWI * GEO_W + VW);                                                     \
        const floatv a = DW8_VLD(xr), b = DW8_VLD(xr + VW);                                          \
        const floatv ev = DW8_EVEN(a, b), od = DW8_ODD(a, b);                                        \
        const floatv v0 = DW8_SHR(od, (LEFT) ? 0.0f : LDX(xr - 1, 0));                              \
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {                                            \
            const int r = i - 2 * m;                                                                 \
            if (r < 0 || r > 2) continue;                                                            \
            acc[m] = fma((floatv)(wt[3 * r + 2]), od,                                                \
                         fma((floatv)(wt[3 * r + 1]), ev, fma((floatv)(wt[3 * r]), v0, acc[m])));     \
        }                                                                                            \
    }
#if defined(DW8_PLANES) && VW == 16
// (the host's DW8_PLANES = W and DW8_H = H, the input plane's size, with DW8_NPL and DW8_STRIDE;
// session 24) Narrow planes whole: a work-item owns DW8_NPL (1 or 2) consecutive planes of the
// tensor (plane nk: image nk / K, channel nk % K), each in a slot of SL = 16 / DW8_NPL lanes of
// every vector, and walks their output rows once, fully unrolled (H compiled in). Stride 1
// (W <= SL): an input row is one load of SL lanes a plane (its lanes past the row, read from the
// next row, zeroed), the left and right taps that vector shifted a lane inside each slot with
// the padding's zero. Stride 2 (even W <= 2 SL): a row is 2 SL lanes a plane, split into even
// columns (tap 1) and odd ones (tap 2), tap 0 the odd ones shifted right a lane in each slot.
// Each input row is loaded once (a window of three rows' taps), each output row is 9 FMAs (three
// chains) on the slots' broadcast weights. Loads that would pass the tensor's end (the last
// plane's last rows; the host checks that a plane holds a load) read lane by lane. A row's store
// is the whole slot where that stays inside the plane (its lanes past the row land on the next
// rows, stored later by the same item), else vector pieces of the row's width; with a residual
// (which may be y itself) lane by lane. 7x7 planes (two a vector), 14x14 (one) and 14x14 stride 2
// (two) leave at most 2 lanes of 16 idle, where STAGE 8's rows ran them as 4-lane tiles or
// half-vector stores. global = (items rounded to the work-group, 1, 1), local = (WG, 1, 1).
#define DWP_W DW8_PLANES
#define DWP_H DW8_H
#define DWP_NPL DW8_NPL
#define DWP_SL (16 / DWP_NPL)
#if DW8_STRIDE == 1
#define DWP_P DWP_H
#define DWP_Q DWP_W
#define DWP_LW DWP_SL // lanes loaded a plane and row
#else
#define DWP_P ((DWP_H - 1) / 2 + 1)
#define DWP_Q (DWP_W / 2)
#define DWP_LW (2 * DWP_SL)
#endif
#define DWP_HW (DWP_H * DWP_W)
#if defined(__has_builtin) && defined(__x86_64__)
#if __has_builtin(__builtin_shufflevector)
// one two-source permute with a zero vector each (vpermt2ps, valignd), where the swizzles below
// came out as up to five instructions (7x7 planes: 1.15-1.25x less CPU time)
#if DWP_NPL == 2
#define DWP_SHR(v) __builtin_shufflevector((v), (float16)(0.0f), 16, 0, 1, 2, 3, 4, 5, 6, 16, 8, 9, 10, 11, 12, 13, 14)
#define DWP_SHL(v) __builtin_shufflevector((v), (float16)(0.0f), 1, 2, 3, 4, 5, 6, 7, 16, 9, 10, 11, 12, 13, 14, 15, 16)
#else
#define DWP_SHR(v) __builtin_shufflevector((v), (float16)(0.0f), 16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)
#define DWP_SHL(v) __builtin_shufflevector((v), (float16)(0.0f), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
#endif
#endif
#endif
#if DWP_NPL == 2 && !defined(DWP_SHR)
#define DWP_SHR(v) ((float16)((float8)(0.0f, (v).s0123, (v).s456), (float8)(0.0f, (v).s89ab, (v).scde)))
#define DWP_SHL(v) ((float16)((v).s1234, (v).s567, 0.0f, (v).s9abc, (v).sdef, 0.0f))
#elif !defined(DWP_SHR)
#define DWP_SHR(v) DW8_SHR(v, 0.0f)
#define DWP_SHL(v) DW8_SHL(v, 0.0f)
#endif
// N lanes of x at p, of which only the first lim (< N) lie inside the tensor: lane by lane
#define DWP_LDT_(N)                                                                                  \
    TSR_INLINE float##N dwp_ldt##N(const __global XELT *p, const int lim) {                          \
        float t[N];                                                                                  \
        _Pragma("unroll") for (int e = 0; e < N; ++e) t[e] = e < lim ? LDX(p, e) : 0.0f;             \
        return vload##N(0, t);                                                                       \
    }
DWP_LDT_(8)
DWP_LDT_(16)
#undef DWP_LDT_
// N (8, 16) lanes of x at p: an f16 x's 16 as integers widened at once (PoCL 3.1's vload_half16
// reads 8 at a time with aligned moves, which fault at the rows' 2-byte aligned addresses)
#if X_TYPE == 1
#define DWP_VLD_16(p) conv_f16x16(TSR_DT_VLD16(16, (p)))
#else
#define DWP_VLD_16(p) TSR_VLD(X_TYPE, 16, (p))
#endif
#define DWP_VLD_8(p) TSR_VLD(X_TYPE, 8, (p))
// N lanes of row ih (from column c) of the plane at x + o; last: the plane is the tensor's last
#define DWP_LD(N, o, ih, c, last)                                                                    \
    ((ih) * DWP_W + (c) + (N) > DWP_HW && (last) ? dwp_ldt##N(xs + (o) + (ih) * DWP_W + (c), DWP_HW - (ih) * DWP_W - (c)) \
                                               : DWP_VLD_##N(xs + (o) + (ih) * DWP_W + (c)))
// y's stores: on x86 and 64-bit ARM under clang (PoCL's CPU devices) through vector typedefs
// whose alignment is an element's (one unaligned move; PoCL 3.1's vstore16 on float is three)
#if Y_TYPE == 0 && defined(__clang__) && (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__))
typedef float2 dwp_float2_u __attribute__((aligned(4)));
typedef float4 dwp_float4_u __attribute__((aligned(4)));
typedef float8 dwp_float8_u __attribute__((aligned(4)));
typedef float16 dwp_float16_u __attribute__((aligned(4)));
#define DWP_VSTY(N, v, p) (*(__global dwp_float##N##_u *)(p) = (v))
#elif Y_TYPE == 0
#define DWP_VSTY(N, v, p) vstore##N((v), 0, (p))
#else
#define DWP_VSTY(N, v, p) TSR_DT_VST16(N, v, p)
#endif
// the first n lanes (n <= 8, 16: compile-time after inlining) of v at p, as vector pieces
#define DWP_ST_(T)                                                                                   \
    TSR_INLINE void dwp_st8(const T##8 v, __global T *p, const int n) {                              \
        if (n >= 8) {                                                                                \
            DWP_VSTY(8, v, p);                                                                       \
            return;                                                                                  \
        }                                                                                            \
        T##4 r4 = v.lo;                                                                              \
        if (n & 4) {                                                                                 \
            DWP_VSTY(4, r4, p);                                                                      \
            r4 = v.hi, p += 4;                                                                       \
        }                                                                                            \
        T##2 r2 = r4.lo;                                                                             \
        if (n & 2) {                                                                                 \
            DWP_VSTY(2, r2, p);                                                                      \
            r2 = r4.hi, p += 2;                                                                      \
        }                                                                                            \
        if (n & 1) *p = r2.x;                                                                        \
    }                                                                                                \
    TSR_INLINE void dwp_st16(const T##16 v, __global T *p, const int n) {                            \
        if (n >= 16) {                                                                               \
            DWP_VSTY(16, v, p);                                                                      \
            return;                                                                                  \
        }                                                                                            \
        T##8 r8 = v.lo;                                                                              \
        if (n & 8) {                                                                                 \
            DWP_VSTY(8, r8, p);                                                                      \
            r8 = v.hi, p += 8;                                                                       \
        }                                                                                            \
        dwp_st8(r8, p, n & 7);                                                                       \
    }
#if Y_TYPE == 0
DWP_ST_(float)
#define DWP_YV(s) (s)
#define DWP_YP(e) (y + y_off + (e))
#else
DWP_ST_(ushort)
#define DWP_YP(e) ((__global ushort *)y + y_off + (e))
// 16 outputs rounded to y's 16-bit type, as bits
TSR_INLINE ushort16 dwp_yv(const float16 s) {
#if Y_TYPE == 1 && defined(TSR_X16)
    return as_ushort16(__builtin_ia32_vcvtps2ph512_mask(s, 0, (short16)(0), TSR_X16_ALL));
#elif Y_TYPE == 1
    ushort h[16];
    vstore_half16_rte(s, 0, (__private half *)h);
    return vload16(0, h);
#elif defined(CONV_BF16_X16)
    return conv_bf16x16(s);
#else
    return tsr_f32_to_bf16_16(s);
#endif
}
#define DWP_YV(s) dwp_yv(s)
#endif
#undef DWP_ST_
__kernel void conv_implicit(const int16 geo, __global const XELT *x, const ulong x_off, __global const WELT *w,
                            const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int nplanes = geo.sf, item = (int)get_global_id(0);
    const int nkA = item * DWP_NPL;
    if (nkA >= nplanes) return;
    const int kA = nkA % GEO_K;
#if DWP_NPL == 2
    const bool hasB = nkA + 1 < nplanes;
    const int nkB = hasB ? nkA + 1 : nkA; // (an odd count's last item: plane A twice)
    const int kB = !hasB ? kA : kA + 1 == GEO_K ? 0 : kA + 1;
    const bool lastB = nkB == nplanes - 1;
#endif
    const bool lastA = nkA == nplanes - 1;
    // the nine weights (and the epilogue's scale and bias) of each slot's plane
    floatv wv[9];
    _Pragma("unroll") for (int t = 0; t < 9; ++t) {
#if DWP_NPL == 2
        wv[t] = (float16)((float8)(LDW(w + w_off + (size_t)kA * 9, t)), (float8)(LDW(w + w_off + (size_t)kB * 9, t)));
#else
        wv[t] = (floatv)(LDW(w + w_off + (size_t)kA * 9, t));
#endif
    }
    floatv sc = (floatv)(1.0f), bi = (floatv)(0.0f);
#if DWP_NPL == 2
    if (epi_flags & 1) sc = (float16)((float8)(scale[scale_off + kA]), (float8)(scale[scale_off + kB]));
    if (epi_flags & 2) bi = (float16)((float8)(bias[bias_off + kA]), (float8)(bias[bias_off + kB]));
#else
    if (epi_flags & 1) sc = (floatv)(scale[scale_off + kA]);
    if (epi_flags & 2) bi = (floatv)(bias[bias_off + kA]);
#endif
    // ReLU (or none) as one max, with -inf for none
    const floatv lo = (floatv)(act == TSR_ACT_RELU ? 0.0f : -INFINITY);
    const __global XELT *xs = x + x_off;
    const size_t oA = (size_t)nkA * DWP_HW, yA = (size_t)nkA * (DWP_P * DWP_Q);
#if DWP_NPL == 2
    const size_t oB = (size_t)nkB * DWP_HW, yB = (size_t)nkB * (DWP_P * DWP_Q);
#endif
#if DW8_STRIDE == 1 && DWP_W > 16
    // (session 26) Rows of 17 to 32 columns (28x28 planes), one plane an item: a row is two
    // vectors, a (columns 0-15) and b (16-31, its lanes past the row zeroed); each side tap is
    // one two-source permute of the pair (a's right neighbour lane 15 is b's lane 0, b's left
    // neighbour lane 0 is a's lane 15), so each input row is loaded once and no lane but b's
    // last 32 - W idles, where the row strips ran two overlapping tiles a row, each input row
    // read 1 + 2 / MWI times, with run-time loop bounds. A row's b half is stored whole where
    // that stays inside the plane (its lanes past the row land on the next row's first columns,
    // which this item stores next), else its W - 16 lanes.
    const intv_dw8 past = DW8_IOTA >= (intv_dw8)(GEO_W - 16);
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define DWP2_AL(a, b) __builtin_shufflevector((a), (b), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
#define DWP2_BR(a, b) __builtin_shufflevector((a), (b), 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30)
#endif
#endif
#ifndef DWP2_AL
#define DWP2_AL(a, b) ((float16)((a).s1234, (a).s5678, (a).s9abc, (a).sdef, (b).s0))
#define DWP2_BR(a, b) ((float16)((a).sf, (b).s0123, (b).s4567, (b).s89ab, (b).scde))
#endif
    // input row ih's taps: a0, a1, a2 (columns 0-15 shifted right, in place, shifted left), b0..b2
#define DWP2_ROW(ih, a0, a1, a2, b0, b1, b2)                                                         \
    do {                                                                                             \
        a1 = DWP_LD(16, oA, ih, 0, lastA);                                                           \
        b1 = select(DWP_LD(16, oA, ih, 16, lastA), (floatv)(0.0f), past);                            \
        a0 = DWP_SHR(a1), a2 = DWP2_AL(a1, b1), b0 = DWP2_BR(a1, b1), b2 = DWP_SHL(b1);              \
    } while (0)
#define DWP2_N(oh) ((DWP_P - (oh)) * DWP_Q - 16 >= 16 ? 16 : DWP_Q - 16)
#define DWP2_ROWS(FAST)                                                                              \
    do {                                                                                             \
        floatv pa0 = z, pa1 = z, pa2 = z, pb0 = z, pb1 = z, pb2 = z, ca0, ca1, ca2, cb0, cb1, cb2;   \
        DWP2_ROW(0, ca0, ca1, ca2, cb0, cb1, cb2);                                                   \
        _Pragma("unroll") for (int oh = 0; oh < DWP_P; ++oh) {                                       \
            floatv na0 = z, na1 = z, na2 = z, nb0 = z, nb1 = z, nb2 = z;                             \
            if (oh + 1 < DWP_H) DWP2_ROW(oh + 1, na0, na1, na2, nb0, nb1, nb2);                      \
            floatv sa = fma(wv[2], pa2, fma(wv[1], pa1, wv[0] * pa0)) +                              \
                        fma(wv[5], ca2, fma(wv[4], ca1, wv[3] * ca0)) +                              \
                        fma(wv[8], na2, fma(wv[7], na1, wv[6] * na0));                               \
            floatv sb = fma(wv[2], pb2, fma(wv[1], pb1, wv[0] * pb0)) +                              \
                        fma(wv[5], cb2, fma(wv[4], cb1, wv[3] * cb0)) +                              \
                        fma(wv[8], nb2, fma(wv[7], nb1, wv[6] * nb0));                               \
            if (FAST) {                                                                              \
                sa = fma(sa, sc, bi), sb = fma(sb, sc, bi);                                          \
                sa = select(sa, lo, sa < lo), sb = select(sb, lo, sb < lo);                          \
            } else if (res_type == TSR_RES_NONE) {                                                   \
                sa = activate_floatv(fma(sa, sc, bi), act), sb = activate_floatv(fma(sb, sc, bi), act); \
            }                                                                                        \
            if (FAST || res_type == TSR_RES_NONE) {                                                  \
                dwp_st16(DWP_YV(sa), DWP_YP(yA + (oh) * DWP_Q), 16);                                 \
                dwp_st16(DWP_YV(sb), DWP_YP(yA + (oh) * DWP_Q + 16), DWP2_N(oh));                    \
            } else { /* lane by lane: the residual may be y itself */                                \
                float t[32];                                                                         \
                VSTORE(sa, t);                                                                       \
                VSTORE(sb, t + 16);                                                                  \
                for (int e = 0; e < DWP_Q; ++e) CONV_STORE1(t[e], kA, yA + (oh) * DWP_Q + e);        \
            }                                                                                        \
            pa0 = ca0, pa1 = ca1, pa2 = ca2, pb0 = cb0, pb1 = cb1, pb2 = cb2;                        \
            ca0 = na0, ca1 = na1, ca2 = na2, cb0 = nb0, cb1 = nb1, cb2 = nb2;                        \
        }                                                                                            \
    } while (0)
    const floatv z = (floatv)(0.0f);
    if (res_type == TSR_RES_NONE && (act == TSR_ACT_NONE || act == TSR_ACT_RELU))
        DWP2_ROWS(1);
    else
        DWP2_ROWS(0);
#undef DWP2_AL
#undef DWP2_BR
#undef DWP2_ROW
#undef DWP2_N
#undef DWP2_ROWS
#else
    // one input row's taps (v0: columns shifted right, v1, v2: left), zeros outside the image
#if DW8_STRIDE == 1
    // (the run-time width, not DWP_W: a constant mask let LLVM shrink the row's load to pieces)
    const intv_dw8 past = (DW8_IOTA & (intv_dw8)(DWP_SL - 1)) >= (intv_dw8)(GEO_W);
#if DWP_NPL == 2
#define DWP_ROW(ih, v0, v1, v2)                                                                      \
    do {                                                                                             \
        v1 = select((float16)(DWP_LD(8, oA, ih, 0, lastA), DWP_LD(8, oB, ih, 0, lastB)), (floatv)(0.0f), past); \
        v0 = DWP_SHR(v1), v2 = DWP_SHL(v1);                                                          \
    } while (0)
#else
#define DWP_ROW(ih, v0, v1, v2)                                                                      \
    do {                                                                                             \
        v1 = select(DWP_LD(16, oA, ih, 0, lastA), (floatv)(0.0f), past);                             \
        v0 = DWP_SHR(v1), v2 = DWP_SHL(v1);                                                          \
    } while (0)
#endif
#else // stride 2 (lanes past the row feed only outputs past it)
#if DWP_NPL == 2
#define DWP_ROW(ih, v0, v1, v2)                                                                      \
    do {                                                                                             \
        const float16 a = DWP_LD(16, oA, ih, 0, lastA), b = DWP_LD(16, oB, ih, 0, lastB);            \
        v1 = (float16)(a.even, b.even), v2 = (float16)(a.odd, b.odd);                                \
        v0 = DWP_SHR(v2);                                                                            \
    } while (0)
#else
#define DWP_ROW(ih, v0, v1, v2)                                                                      \
    do {                                                                                             \
        const float16 a = DWP_LD(16, oA, ih, 0, lastA), b = DWP_LD(16, oA, ih, 16, lastA);           \
        v1 = (float16)(a.even, b.even), v2 = (float16)(a.odd, b.odd);                                \
        v0 = DWP_SHR(v2);                                                                            \
    } while (0)
#endif
#endif
    // The rows, in two copies: the common call (no residual; no activation or ReLU) with no test
    // a row, the others with them. p: row oh S - 1's taps (zeros above the image), c: row oh S's,
    // n: row oh S + 1's.
#if DW8_STRIDE == 1
#define DWP_FIRST() DWP_ROW(0, c0, c1, c2)
#define DWP_NEXT(oh)                                                                                 \
    if ((oh) + 1 < DWP_H) DWP_ROW((oh) + 1, n0, n1, n2);
#define DWP_SHIFT() (p0 = c0, p1 = c1, p2 = c2, c0 = n0, c1 = n1, c2 = n2)
#else
#define DWP_FIRST() ((void)0)
#define DWP_NEXT(oh)                                                                                 \
    DWP_ROW(2 * (oh), c0, c1, c2);                                                                   \
    if (2 * (oh) + 1 < DWP_H) DWP_ROW(2 * (oh) + 1, n0, n1, n2);
#define DWP_SHIFT() (p0 = n0, p1 = n1, p2 = n2)
#endif
    // a whole slot where it stays inside the plane (its lanes past the row land on the plane's
    // next rows, which this item stores later), else the row's lanes
#define DWP_N(oh) ((DWP_P - (oh)) * DWP_Q >= DWP_SL ? DWP_SL : DWP_Q)
#if DWP_NPL == 2
#define DWP_STORE(s, oh, B)                                                                          \
    dwp_st8(DWP_YV(s).lo, DWP_YP(yA + (oh) * DWP_Q), DWP_N(oh));                                     \
    if (B) dwp_st8(DWP_YV(s).hi, DWP_YP(yB + (oh) * DWP_Q), DWP_N(oh));
#define DWP_STORE1(t, oh)                                                                            \
    for (int e = 0; e < DWP_Q; ++e) CONV_STORE1(t[e], kA, yA + (oh) * DWP_Q + e);                    \
    if (hasB)                                                                                        \
        for (int e = 0; e < DWP_Q; ++e) CONV_STORE1(t[8 + e], kB, yB + (oh) * DWP_Q + e);
#else
#define DWP_STORE(s, oh, B) dwp_st16(DWP_YV(s), DWP_YP(yA + (oh) * DWP_Q), DWP_N(oh));
#define DWP_STORE1(t, oh)                                                                            \
    for (int e = 0; e < DWP_Q; ++e) CONV_STORE1(t[e], kA, yA + (oh) * DWP_Q + e);
#endif
#define DWP_ROWS(FAST)                                                                               \
    do {                                                                                             \
        floatv p0 = z, p1 = z, p2 = z, c0 = z, c1 = z, c2 = z;                                       \
        DWP_FIRST();                                                                                 \
        _Pragma("unroll") for (int oh = 0; oh < DWP_P; ++oh) {                                       \
            floatv n0 = z, n1 = z, n2 = z;                                                           \
            DWP_NEXT(oh)                                                                             \
            /* three short chains (a row's taps each), not one of nine */                            \
            const floatv u0 = fma(wv[2], p2, fma(wv[1], p1, wv[0] * p0));                            \
            const floatv u1 = fma(wv[5], c2, fma(wv[4], c1, wv[3] * c0));                            \
            const floatv u2 = fma(wv[8], n2, fma(wv[7], n1, wv[6] * n0));                            \
            floatv s = u0 + u1 + u2;                                                                 \
            if (FAST) {                                                                              \
                s = fma(s, sc, bi);                                                                  \
                s = select(s, lo, s < lo); /* ReLU or nothing (NaN kept, as relu_T) */               \
                DWP_STORE(s, oh, 1) /* (plane B twice A when absent: A's values again) */            \
            } else if (res_type != TSR_RES_NONE) { /* lane by lane: the residual may be y itself */  \
                float t[16];                                                                         \
                VSTORE(s, t);                                                                        \
                DWP_STORE1(t, oh)                                                                    \
            } else {                                                                                 \
                s = activate_floatv(fma(s, sc, bi), act);                                            \
                DWP_STORE(s, oh, hasB)                                                               \
            }                                                                                        \
            DWP_SHIFT();                                                                             \
        }                                                                                            \
    } while (0)
    const floatv z = (floatv)(0.0f);
    if (res_type == TSR_RES_NONE && (act == TSR_ACT_NONE || act == TSR_ACT_RELU))
        DWP_ROWS(1);
    else
        DWP_ROWS(0);
#undef DWP_FIRST
#undef DWP_NEXT
#undef DWP_SHIFT
#undef DWP_N
#undef DWP_STORE
#undef DWP_STORE1
#undef DWP_ROWS
#undef DWP_ROW
#endif // two vectors a row
}
#undef DWP_W
#undef DWP_H
#undef DWP_NPL
#undef DWP_SL
#undef DWP_P
#undef DWP_Q
#undef DWP_LW
#undef DWP_HW
#undef DWP_SHR
#undef DWP_SHL
#undef DWP_LD
#undef DWP_VLD_16
#undef DWP_VLD_8
#undef DWP_VSTY
#undef DWP_YV
#undef DWP_YP
#else
__kernel void conv_implicit(const int16 geo, __global const XELT *x, const ulong x_off, __global const WELT *w,
                            const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int k = (int)get_global_id(1), nk = (int)get_global_id(2) * GEO_K + k;
    if (k >= GEO_K) return;
    const int bands = (int)get_global_size(0);
    // rows per band (the host's count; no division per work-item when a band is the whole plane)
    const int B = bands == 1 ? GEO_P : ((GEO_P + bands - 1) / bands + MWI - 1) / MWI * MWI;
    const int p0 = (int)get_global_id(0) * B, p1 = min(GEO_P, p0 + B);
    const __global XELT *xc = x + x_off + (size_t)nk * (size_t)(GEO_H * GEO_W); // C = K: plane nk
    float wt[9];
    _Pragma("unroll") for (int i = 0; i < 9; ++i) wt[i] = LDW(w + w_off + (size_t)k * 9, i);
    const size_t ek = (size_t)nk * (size_t)(GEO_P * GEO_Q);
#ifdef DW8_WIDE
    // (the host's DW8_WIDE: stride 1, VW / 2 < W < VW, H >= 2, no residual) one tile per row, its
    // VW - W last lanes past the row: a row's load reads them from the next row (in the plane) and
    // they are zeroed, so the shifted taps see the padding's zero; the plane's last row is read
    // element by element (nothing past the plane). Stores: two half vectors, at column 0 and
    // W - VW / 2 (overlapping), after the epilogue on the whole vector.
    const intv_dw8 past = DW8_IOTA >= (intv_dw8)(GEO_W);
    for (int oh0 = p0; oh0 < p1; oh0 += MWI) {
        floatv acc[MWI];
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[m] = (floatv)(0.0f);
        _Pragma("unroll") for (int i = 0; i < MWI + 2; ++i) {
            const int ih = oh0 - 1 + i;
            if (ih < 0 || ih >= GEO_H) continue;
            const __global XELT *xr = xc + ih * GEO_W;
            floatv v1;
            if (ih < GEO_H - 1) {
                v1 = VLOADX(xr);
            } else {
                float tl[VW];
                _Pragma("unroll 1") for (int e = 0; e < VW; ++e) tl[e] = e < GEO_W ? LDX(xr, e) : 0.0f;
                v1 = VLOAD(tl);
            }
            v1 = select(v1, (floatv)(0.0f), past);
            const floatv v0 = DW8_SHR(v1, 0.0f), v2 = DW8_SHL(v1, 0.0f);
            _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                const int r = i - m;
                if (r < 0 || r > 2) continue;
                acc[m] = fma((floatv)(wt[3 * r + 2]), v2,
                             fma((floatv)(wt[3 * r + 1]), v1, fma((floatv)(wt[3 * r]), v0, acc[m])));
            }
        }
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
            if (oh0 + m >= p1) break;
            floatv v = acc[m];
            if (epi_flags & 1) v *= scale[scale_off + k];
            if (epi_flags & 2) v += bias[bias_off + k];
            float tl[VW];
            VSTORE(tsr_epi_finish_v(v, res, TSR_RES_NONE, 0, act), tl);
            __global YELT *yr = y + y_off + ek + (size_t)(oh0 + m) * GEO_Q;
            DW8_VST_HALF(tl, yr);
            DW8_VST_HALF(tl + GEO_W - VW / 2, yr + GEO_W - VW / 2);
        }
    }
#else
    const int tiles = (GEO_Q + VW - 1) / VW;
#ifdef DW8_FAST
    // (session 26) the common call (no residual; no activation or ReLU, the scale and bias of a
    // folded BatchNorm or none) stores each row as one fma, one max and one 16-lane move, where
    // conv_store's tests and its four-piece vstore16 ran per row and tile
    const bool fast = res_type == TSR_RES_NONE && (act == TSR_ACT_NONE || act == TSR_ACT_RELU);
    const float16 sc = (float16)((epi_flags & 1) ? scale[scale_off + k] : 1.0f);
    const float16 bi = (float16)((epi_flags & 2) ? bias[bias_off + k] : 0.0f);
    const float16 lo = (float16)(act == TSR_ACT_RELU ? 0.0f : -INFINITY);
#endif
    // A strip's tiles; CHK 0 (a strip whose input rows all lie inside the image and whose output
    // rows all lie inside the band, the most of a large plane's) leaves out the row tests.
#define DW8_TILES(CHK)                                                                               \
    for (int t = 0; t < tiles; ++t) {                                                                \
        const int ow0 = min(t * VW, GEO_Q - VW);                                                     \
        floatv acc[MWI];                                                                             \
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[m] = (floatv)(0.0f);                     \
        if (SW_ == 1) {                                                                              \
            const bool left = ow0 == 0, right = ow0 + VW == GEO_W;                                   \
            if (!left && !right) {                                                                   \
                DW8_ROW1(0, 0, CHK)                                                                  \
            } else if (left && right) {                                                              \
                DW8_ROW1(1, 1, CHK)                                                                  \
            } else if (left) {                                                                       \
                DW8_ROW1(1, 0, CHK)                                                                  \
            } else {                                                                                 \
                DW8_ROW1(0, 1, CHK)                                                                  \
            }                                                                                        \
        } else if (ow0 == 0) {                                                                       \
            DW8_ROW2(1, CHK)                                                                         \
        } else {                                                                                     \
            DW8_ROW2(0, CHK)                                                                         \
        }                                                                                            \
        DW8_FAST_STORE(CHK)                                                                          \
        /* Overlapped pixels (the row's last tile) belong to the tile before: stored only by it     \
           when a residual is read (it may be y itself), else stored again with the same values. */ \
        const int skip = res_type == TSR_RES_NONE ? 0 : t * VW - ow0;                                \
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {                                            \
            if (oh0 + m >= p1) break;                                                                \
            const size_t er = ek + (size_t)(oh0 + m) * GEO_Q + ow0;                                  \
            if (skip == 0) {                                                                         \
                CONV_STORE(acc[m], k, er, VW);                                                       \
            } else {                                                                                 \
                float tl[VW];                                                                        \
                VSTORE(acc[m], tl);                                                                  \
                for (int e = skip; e < VW; ++e) CONV_STORE1(tl[e], k, er + e);                       \
            }                                                                                        \
        }                                                                                            \
    }
#if defined(DW8_FAST) && Y_TYPE == 0
#define DW8_FAST_STORE(CHK)                                                                          \
    if (fast) {                                                                                      \
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {                                            \
            if ((CHK) && oh0 + m >= p1) break;                                                       \
            const float16 s = fma(acc[m], sc, bi);                                                   \
            *(__global dw8_float16_u *)(y + y_off + ek + (size_t)(oh0 + m) * GEO_Q + ow0) = select(s, lo, s < lo); \
        }                                                                                            \
        continue;                                                                                    \
    }
    // the strips with no row outside the image or the band
    const int in0 = (1 + SW_ - 1) / SW_, in1 = (GEO_H - (SW_ == 1 ? MWI + 1 : 2 * MWI)) / SW_; // oh0 * SW - 1 >= 0, last input row < H
    for (int oh0 = p0; oh0 < p1; oh0 += MWI) {
        if (oh0 >= in0 && oh0 <= in1 && oh0 + MWI <= p1) {
            DW8_TILES(0)
        } else {
            DW8_TILES(1)
        }
    }
#else
#define DW8_FAST_STORE(CHK)
    for (int oh0 = p0; oh0 < p1; oh0 += MWI) {
        DW8_TILES(1)
    }
#endif
#undef DW8_TILES
#undef DW8_FAST_STORE
#endif // DW8_WIDE
}
#endif // DW8_PLANES
#undef DW8_ROW1
#undef DW8_ROW2
#undef DW8_EVEN
#undef DW8_ODD
#undef DW8_VLD
#undef DW8_PREFETCH
#undef DW8_FAST
#undef DW8_SHR
#undef DW8_SHL
#undef DW8_IOTA
#undef DW8_VST_HALF
#endif // DW8_NO_ROWS

// Channels-last (NHWC x, y and residual) depthwise layers, any kernel size, padding, stride and
// dilation, one channel per group (C = K = G): the host checks, and picks VW as the largest of 16,
// 8, 4, 2, 1 that divides C. Vectors run along the channels, so every tap of a pixel is one
// unit-stride vector load of VW channels (or nothing, outside the image) and no lane is wasted
// whatever the plane's size. global = (C / VW channel blocks, output rows rounded to the
// work-group, N), local = (1, rows per work-group, 1). A work-item computes one output row of one
// image for VW channels, MWI pixels at a time (MWI independent accumulator chains), the R S
// weight vectors (gathered from OIHW once) in registers where they fit.
__kernel void conv_dw_nhwc(const int16 geo, __global const XELT *x, const ulong x_off, __global const WELT *w,
                           const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int c0 = (int)get_global_id(0) * VW, oh = (int)get_global_id(1), n = (int)get_global_id(2);
    if (oh >= GEO_P) return;
    const int R = KR_, S = KS_, C = GEO_C;
#if defined(KR) && KR <= 3
    floatv wv[KR * KS];
#define DWN_W(t) wv[t]
#else
#define DWN_W(t) dwn_w(w + w_off, c0, R * S, t)
#endif
#if defined(KR) && KR <= 3
    _Pragma("unroll") for (int t = 0; t < KR * KS; ++t) {
        float tl[VW];
        _Pragma("unroll") for (int e = 0; e < VW; ++e) tl[e] = LDW(w + w_off, (size_t)(c0 + e) * (KR * KS) + t);
        wv[t] = VLOAD(tl);
    }
#endif
    const __global XELT *xn = x + x_off + (size_t)n * GEO_H * GEO_W * C + c0;
    const size_t er = ((size_t)n * GEO_P + oh) * GEO_Q * (size_t)C + c0;
    for (int q0 = 0; q0 < GEO_Q; q0 += MWI) {
        floatv acc[MWI];
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[m] = (floatv)(0.0f);
        ROWS_PRAGMA for (int r = 0; r < R; ++r) {
            const int ih = oh * GEO_SH - GEO_PH + r * GEO_DH;
            if (ih < 0 || ih >= GEO_H) continue; // a row of zeros adds nothing
            const __global XELT *xr = xn + (size_t)ih * GEO_W * C;
            _Pragma("unroll") for (int s = 0; s < S; ++s) {
#if defined(KR) && KR <= 3
                const floatv ws = DWN_W(r * S + s);
#else
                float tl[VW];
                for (int e = 0; e < VW; ++e) tl[e] = LDW(w + w_off, (size_t)(c0 + e) * (R * S) + r * S + s);
                const floatv ws = VLOAD(tl);
#endif
                _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                    const int iw = (q0 + m) * GEO_SW - GEO_PW + s * GEO_DW;
                    if (q0 + m >= GEO_Q || iw < 0 || iw >= GEO_W) continue;
                    acc[m] = fma(ws, VLOADX(xr + (size_t)iw * C), acc[m]);
                }
            }
        }
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
            if (q0 + m >= GEO_Q) break;
            floatv v = acc[m];
#if VW == 1
            if (epi_flags & 1) v *= scale[scale_off + c0];
            if (epi_flags & 2) v += bias[bias_off + c0];
#else
            if (epi_flags & 1) v *= VLOAD(scale + scale_off + c0);
            if (epi_flags & 2) v += VLOAD(bias + bias_off + c0);
#endif
            const size_t e = er + (size_t)(q0 + m) * C;
            VSTOREY(tsr_epi_finish_v(v, res, res_type, res_off + e, act), y + y_off + e);
        }
    }
#undef DWN_W
}

#else // STAGE 3
#if VW == 1
#define IOTA 0
#define MASKED(v, m) ((m) ? (v) : 0.0f)
typedef int intv;
#else
#define IOTA CAT(IOTA_, VW)
#define IOTA_2 (int2)(0, 1)
#define IOTA_4 (int4)(0, 1, 2, 3)
#define IOTA_8 (int8)(0, 1, 2, 3, 4, 5, 6, 7)
#define IOTA_16 (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define MASKED(v, m) CAT(as_float, VW)(CAT(as_int, VW)(v) & (m)) /* m: -1 keeps a lane, 0 zeroes it */
typedef CAT(int, VW) intv;
#endif
// global = (ceil(P / MWI), N K), each rounded to the work-group; local = (L0, L1) with L0 L1 <= WGN
// (L1 > 1 when a plane has fewer than WGN items: few, heavy work-groups). A work-item computes MWI
// output rows of one channel together, VW pixels at a time along them: MWI independent
// accumulator chains (one chain would wait on the FMA latency at every tap). A tap's vector load
// reads x as it lies; in edge tiles the lanes whose input column falls outside the row (padding,
// or a tile past the row's end reading the next row) are zeroed with a bit mask, so they stay
// vector code. Only loads that would leave the channel's plane (first and last rows) and strides
// above 2 go lane by lane.
__kernel void conv_implicit(const int16 geo, __global const XELT *x, const ulong x_off, __global const WELT *w,
                            const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int Cg = GEO_C / GEO_G, Kg = GEO_K / GEO_G, HW = GEO_H * GEO_W;
    const int R = KR_, S = KS_, RS = R * S;
    const int oh0 = (int)get_global_id(0) * MWI, nk = (int)get_global_id(1);
    if (oh0 >= GEO_P || nk >= geo.sf) return; // geo.sf: N K
    const int n = nk / GEO_K, k = nk - n * GEO_K, g = k / Kg;
    const __global XELT *xg = x + x_off + ((size_t)n * GEO_C + g * Cg) * (size_t)HW;
    const __global WELT *wk = w + w_off + (size_t)k * Cg * RS;
    const size_t ek = (size_t)nk * GEO_P * GEO_Q; // the channel's plane in y (and the residual)
    // Input columns one load covers: VW (stride 1), 2 VW (stride 2, every second one kept).
    const int need = GEO_SW == 1 ? VW : 2 * VW;
    const bool vec_ok = GEO_SW <= 2;
    const intv lane_col = IOTA * GEO_SW;
    const int rows = min(MWI, GEO_P - oh0);
    for (int t0 = 0; t0 < GEO_Q; t0 += VW) {
        // The row's last tile ends at its last pixel (overlapping the one before) when it can.
        const int ow0 = GEO_Q >= VW ? min(t0, GEO_Q - VW) : t0;
        const int iwb = ow0 * GEO_SW - GEO_PW;
        floatv acc[MWI];
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) acc[m] = (floatv)(0.0f);
        // Every tap's load inside the row: plain vector code.
        const bool inside = vec_ok && iwb >= 0 && iwb + (S - 1) * GEO_DW + need <= GEO_W;
        for (int c = 0; c < Cg; ++c) {
            const __global XELT *xc = xg + (size_t)c * HW;
            const __global WELT *wc = wk + c * RS;
            for (int r = 0; r < R; ++r) {
                // Per output row: whether kernel row r lands inside the image, where its input
                // row starts, and whether the tile's loads stay inside the plane (masked vectors).
                int at[MWI];
                bool ok[MWI], safe[MWI];
                _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                    const int ih = (oh0 + m) * GEO_SH - GEO_PH + r * GEO_DH;
                    ok[m] = m < rows && ih >= 0 && ih < GEO_H; // a row of zeros adds nothing
                    at[m] = ih * GEO_W + iwb;
                    safe[m] = vec_ok && at[m] >= 0 && at[m] + (S - 1) * GEO_DW + need <= HW;
                }
                _Pragma("unroll") for (int s = 0; s < S; ++s) {
                    const floatv wv = (floatv)(LDW(wc, r * S + s));
                    const int iw0 = iwb + s * GEO_DW;
                    const intv col = iw0 + lane_col;
                    const intv keep = col >= 0 && col < GEO_W;
                    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                        if (!ok[m]) continue;
                        const __global XELT *xp = xc + at[m] + s * GEO_DW;
                        floatv b;
                        if (inside) {
                            b = GEO_SW == 1 ? VLOADX(xp) : VLOAD_STRIDE2(xp);
                        } else if (safe[m]) {
                            b = GEO_SW == 1 ? VLOADX(xp) : VLOAD_STRIDE2(xp);
                            b = MASKED(b, keep);
                        } else {
                            float t[VW];
                            const __global XELT *xr = xc + at[m] - iwb;
                            _Pragma("unroll 1") for (int e = 0; e < VW; ++e) { // rare: kept small (code size)
                                const int iw = iw0 + e * GEO_SW;
                                const float v = LDX(xr, clamp(iw, 0, GEO_W - 1));
                                t[e] = iw >= 0 && iw < GEO_W ? v : 0.0f;
                            }
                            b = VLOAD(t);
                        }
                        acc[m] = fma(wv, b, acc[m]);
                    }
                }
            }
        }
        // Overlapped pixels, already stored: stored again with the same values (one vector store)
        // unless a residual is read, which may be y itself.
        const int skip = res_type == TSR_RES_NONE ? 0 : t0 - ow0;
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
            if (m >= rows) break;
            const size_t er = ek + (size_t)(oh0 + m) * GEO_Q + ow0;
            if (skip == 0) {
                CONV_STORE(acc[m], k, er, min(VW, GEO_Q - ow0));
            } else {
                float t[VW];
                VSTORE(acc[m], t);
                for (int e = skip; e < VW; ++e) CONV_STORE1(t[e], k, er + e);
            }
        }
    }
}
#endif

// ---------------------------------------------------------------- padding (STAGE 2's input)
// The zero-padded copy of x, split into phase planes for strided layers: with PHW phases along a
// row (geo's PH slot: SW, or 1), row phases PHH = the plane count / PHW, phase plane (a, b) holds
// xp[i][c][a][b][iq][q] = x[i][c][a + SH iq - PH][b + SW q - PW] (zero outside x) for iq < Hq, q <
// Wq. Unstrided layers have one phase: the padded plane, Hq >= H + 2 PH rows (the rows past the
// padding are slack for the last tile's loads, in every phase plane). global = (PHH Hq, C,
// images), one row of every column phase per work-item. The planes are fp32: a 16-bit x is
// widened here, once per element, not at each of the kernel's taps. Arguments: geo (the
// layer's), Hq, PHW, Wq.
// 16 floats stored at an element's alignment: one unaligned vector move (PoCL 3.1's vstore16 on
// float is four 128-bit stores, or one 128-bit move and two extracts: the whole-plane copy's
// stores took half of its samples). Every x type since session 26: on the fp32 polyphase copy of
// the 3x3/2 layers at batch 8 the row stores below took 1-4% off the layers' CPU time.
#if defined(__clang__) && (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__))
typedef float16 pad_float16_u __attribute__((aligned(4)));
#define PAD_VST16(v, p) (*(__global pad_float16_u *)(p) = (v))
#else
#define PAD_VST16(v, p) vstore16((v), 0, (p))
#endif
#if X_TYPE == 0
// An fp32 strided layer's copy, one work-item per channel and image (global (1, C, images)): the
// channel's PHH x PHW phase planes, each phase column's range [qlo, qhi) of x's columns worked out
// once (the row form below spends most of its time on that per row: its integer divisions and
// setup were 60% of its samples, session 26), then every row of the plane: zeros outside x, else
// x's row read every SW-th column, 16 columns a vector. A channel's plane of x (12.5 KB on the
// 56x56/2 layer) is read once per phase, from L1 after the first.
TSR_INLINE void pad_channel_poly(const int16 geo, const __global float *src, __global float *dst, const int phh,
                                 const int Hq, const int phw, const int Wq) {
    const size_t plane = (size_t)Hq * Wq;
    for (int b = 0; b < phw; ++b) {
        const int iw0 = b - GEO_PW;
        const int qlo = min(Wq, iw0 >= 0 ? 0 : (GEO_SW - 1 - iw0) / GEO_SW);
        const int qhi = iw0 < GEO_W ? max(qlo, min(Wq, (GEO_W - 1 - iw0) / GEO_SW + 1)) : qlo;
        // the vector loop's end and the tail vector's start, as the row form's
        const int vend = GEO_SW == 1 ? qhi - 15 : GEO_SW == 2 ? qhi - 16 : qlo;
        const bool tail = (GEO_SW == 1 || GEO_SW == 2) && qhi - 16 >= qlo + (GEO_SW == 2 ? 1 : 0);
        for (int a = 0; a < phh; ++a) {
            __global float *d = dst + (size_t)(a * phw + b) * plane;
            for (int iq = 0; iq < Hq; ++iq, d += Wq) {
                const int ih = a + GEO_SH * iq - GEO_PH;
                int q = 0;
                if (ih < 0 || ih >= GEO_H) {
                    if (Wq >= 16) {
                        for (; q + 16 <= Wq; q += 16) PAD_VST16((float16)(0.0f), d + q);
                        PAD_VST16((float16)(0.0f), d + Wq - 16);
                    } else {
                        for (; q < Wq; ++q) d[q] = 0.0f;
                    }
                    continue;
                }
                const __global float *r = src + (size_t)ih * GEO_W + iw0;
                for (; q < qlo; ++q) d[q] = 0.0f;
                if (GEO_SW == 1)
                    for (; q < vend; q += 16) PAD_VST16(vload16(0, r + q), d + q);
                else if (GEO_SW == 2)
                    for (; q < vend; q += 16)
                        PAD_VST16((float16)(vload16(0, r + 2 * q).even, vload16(0, r + 2 * q + 16).even), d + q);
                if (q < qhi && tail) {
                    const int qs = qhi - 16;
                    if (GEO_SW == 1)
                        PAD_VST16(vload16(0, r + qs), d + qs);
                    else
                        PAD_VST16((float16)(vload16(0, r + 2 * qs - 1).odd, vload16(0, r + 2 * qs + 15).odd), d + qs);
                    q = qhi;
                }
                for (; q < qhi; ++q) d[q] = r[GEO_SW * q];
                for (; q < Wq; ++q) d[q] = 0.0f;
            }
        }
    }
}
#endif
__kernel void pad_input(const int16 geo, __global const XELT *x, const ulong x_off, __global float *xp,
                        const int Hq, const int phw, const int Wq) {
    const int row = (int)get_global_id(0), c = (int)get_global_id(1), i = (int)get_global_id(2);
    // (the host launches one work-item per plane for the whole-plane copies below: dimension 0 of
    // size 1, which makes phh 1 for the unstrided one and the host's row phases for the strided)
#if X_TYPE != 0
    const int phh = max(1, (int)get_global_size(0) / Hq), a = row / Hq, iq = row - a * Hq;
#else
    if (get_global_size(0) == 1) {
        // padded_geometry's row phases: SH on a strided layer whose kernel has several rows
        const int ph = GEO_R > 1 ? GEO_SH : 1;
        pad_channel_poly(geo, x + x_off + ((size_t)i * GEO_C + c) * (size_t)GEO_H * GEO_W,
                         xp + ((size_t)i * GEO_C + c) * (size_t)ph * phw * Hq * Wq, ph, Hq, phw, Wq);
        return;
    }
    const int phh = (int)get_global_size(0) / Hq, a = row / Hq, iq = row - a * Hq;
#endif
    if (GEO_SH == 1 && GEO_SW == 1 && GEO_PH == 0 && GEO_PW == 0 && Wq == GEO_W && phh == 1 && phw == 1) {
        // An unpadded unstrided layer's copy (a 16-bit x widened; rows of x's own width): a
        // channel's rows lie back to back in x and in the copy, so one work-item widens the
        // whole plane 16 elements a vector (the last vector ending at the plane's end) and zeroes
        // the copy's slack rows. (Row by row, ResNet-50's 1x1 14x14 layers spent longer in the
        // copy than in the convolution; launched one item a row, the items of the other rows,
        // which return at once, took half of the copy's samples: session 25.)
        if (iq != 0) return;
        const int n = GEO_H * GEO_W, plane = Hq * Wq;
        const __global XELT *src = x + x_off + ((size_t)i * GEO_C + c) * (size_t)n;
        __global float *dst = xp + ((size_t)i * GEO_C + c) * (size_t)plane;
#if X_TYPE == 1
#define PAD_VLD16(p) conv_f16x16(TSR_DT_VLD16(16, (p)))
#else
#define PAD_VLD16(p) TSR_VLD(X_TYPE, 16, (p))
#endif
        int e = 0;
        for (; e + 16 <= n; e += 16) PAD_VST16(PAD_VLD16(src + e), dst + e);
        if (e < n && n >= 16) PAD_VST16(PAD_VLD16(src + n - 16), dst + n - 16);
        else
            for (; e < n; ++e) dst[e] = LDX(src, e);
#undef PAD_VLD16
        for (e = n; e < plane; ++e) dst[e] = 0.0f;
        return;
    }
    const int ih = a + GEO_SH * iq - GEO_PH;
    const size_t plane = (size_t)Hq * Wq;
    __global float *dst = xp + ((size_t)i * GEO_C + c) * phh * phw * plane + (size_t)a * phw * plane + (size_t)iq * Wq;
    const bool inside = ih >= 0 && ih < GEO_H;
    const __global XELT *src = x + x_off + (((size_t)i * GEO_C + c) * GEO_H + (inside ? ih : 0)) * (size_t)GEO_W;
    for (int b = 0; b < phw; ++b, dst += plane) {
        // Columns q in [qlo, qhi) read x's row (input column iw0 + SW q), the rest are zeros; the
        // middle goes 16 at a time with vector loads (stride 2: every second element of 32,
        // loaded only while all 32 lie inside the row), the ends element by element.
        const int iw0 = b - GEO_PW;
        const int qlo = inside ? min(Wq, iw0 >= 0 ? 0 : (GEO_SW - 1 - iw0) / GEO_SW) : Wq;
        const int qhi = inside && iw0 < GEO_W ? max(qlo, min(Wq, (GEO_W - 1 - iw0) / GEO_SW + 1)) : qlo;
        int q = 0;
        for (; q < qlo; ++q) dst[q] = 0.0f;
        if (GEO_SW == 1)
            for (; q + 16 <= qhi; q += 16) PAD_VST16(TSR_VLD(X_TYPE, 16, src + iw0 + q), dst + q);
        else if (GEO_SW == 2)
            for (; q + 16 < qhi; q += 16) {
                const __global XELT *s2 = src + iw0 + 2 * q;
                PAD_VST16((float16)(TSR_VLD(X_TYPE, 16, s2).even, TSR_VLD(X_TYPE, 16, s2 + 16).even), dst + q);
            }
        // the rest (under 16 columns) as one vector of the part's last 16 columns where those lie
        // inside the row (columns before q again, the same values); with stride 2 its odd lanes
        // from one element earlier, so that no load passes the row's last column
        if (q < qhi && qhi - 16 >= qlo + (GEO_SW == 2 ? 1 : 0) && (GEO_SW == 1 || GEO_SW == 2)) {
            const int qs = qhi - 16;
            if (GEO_SW == 1) {
                PAD_VST16(TSR_VLD(X_TYPE, 16, src + iw0 + qs), dst + qs);
            } else {
                const __global XELT *s2 = src + iw0 + 2 * qs - 1;
                PAD_VST16((float16)(TSR_VLD(X_TYPE, 16, s2).odd, TSR_VLD(X_TYPE, 16, s2 + 16).odd), dst + qs);
            }
            q = qhi;
        }
#if X_TYPE == 1
        // the rest (under 16 columns with stride 1 or 2) gathered as integers, widened at once and
        // stored as one vector of the row's last 16 columns where the row has 16 (columns outside
        // [qlo, qhi) zero, as the loops around write them; columns before q0 again, the same
        // values): no private round trip, whose narrow reloads of a vector store stall
        for (int q0 = q; q0 < qhi; q0 += 16) {
            const int qb = q0 + 16 <= Wq ? q0 : Wq - 16;
            const __global ushort *u = (const __global ushort *)src;
            ushort t[16];
#if defined(TSR_X16)
            // AVX-512, stride 1, a plane of at least 16 elements: the 16 consecutive elements of
            // the channel's plane that hold the part's columns (the row's own where they fit,
            // else the plane's last 16: neighbouring rows' elements, never past the plane) as
            // one load and one vcvtph2ps, moved to their columns by one vpermps, the columns
            // outside [qlo, qhi) zeroed by a select (session 22: the gather above, 16 scalar
            // loads a row, took pad_input on 14x14 planes to 2.2x its fp32 time)
            if (GEO_SW == 1 && qb >= 0 && GEO_H * GEO_W >= 16) {
                const int HWp = GEO_H * GEO_W, at = ih * GEO_W + iw0; // plane index of column 0
                const int first = at + max(qb, qlo), base = min(first, HWp - 16);
                const __global ushort *pu = (const __global ushort *)(x + x_off) + ((size_t)i * GEO_C + c) * (size_t)HWp;
                const float16 h = conv_f16x16(TSR_DT_VLD16(16, pu + base));
                const int16 col = (int16)(qb) + (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                const int16 lane = (col + (int16)(at - base)) & 15;
                const float16 moved = __builtin_ia32_permvarsf512(h, lane);
                vstore16(select((float16)(0.0f), moved, col >= (int16)(qlo) && col < (int16)(qhi)), 0, dst + qb);
                continue;
            }
#endif
            if (qb >= 0) {
                _Pragma("unroll") for (int e = 0; e < 16; ++e) {
                    const int col = qb + e;
                    const bool in = col >= qlo && col < qhi;
                    t[e] = in ? u[in ? iw0 + GEO_SW * col : 0] : (ushort)0;
                }
                vstore16(conv_f16x16(vload16(0, t)), 0, dst + qb);
            } else if (Wq >= 8) {
                // rows of 8 to 15 columns (7x7 planes): the same, 8 columns a vector
                for (int q8 = q0; q8 < qhi; q8 += 8) {
                    const int qb8 = q8 + 8 <= Wq ? q8 : Wq - 8;
                    _Pragma("unroll") for (int e = 0; e < 16; ++e) {
                        const int col = qb8 + e;
                        const bool in = e < 8 && col >= qlo && col < qhi;
                        t[e] = in ? u[in ? iw0 + GEO_SW * col : 0] : (ushort)0;
                    }
                    vstore8(conv_f16x16(vload16(0, t)).lo, 0, dst + qb8);
                }
            } else {
                const int n = min(16, qhi - q0);
                float f[16];
                _Pragma("unroll") for (int e = 0; e < 16; ++e) t[e] = e < n ? u[iw0 + GEO_SW * (q0 + e)] : (ushort)0;
                vstore16(conv_f16x16(vload16(0, t)), 0, f);
                for (int e = 0; e < n; ++e) dst[q0 + e] = f[e];
            }
        }
        q = max(q, qhi);
#else
        for (; q < qhi; ++q) dst[q] = LDX(src, iw0 + GEO_SW * q);
#endif
        for (; q < Wq; ++q) dst[q] = 0.0f;
    }
}

#if STAGE == 5
// ---------------------------------------------------------------- weights (STAGE 5's)
// w (OIHW, [G Kg][Cg][R][S], any W_TYPE) as fp32 blocks of KB = MWI VW output channels per tap:
// wp[g][kb][crs][KB], zero for channels past Kg. global = (ceil(Kg / KB) KB, ceil(Cg R S / 16),
// G): a work-item reads 16 consecutive taps of one output channel (one cache line) and writes
// them KB apart; consecutive work-items take consecutive channels, so their writes fill the
// same 16 KB floats. Arguments: geo (the layer's), w, w_off, wp.
__kernel void pack_weights(const int16 geo, __global const WELT *w, const ulong w_off, __global float *wp) {
    const int kk = (int)get_global_id(0), crs0 = (int)get_global_id(1) * 16, g = (int)get_global_id(2);
    const int Kg = GEO_K / GEO_G, CRS = GEO_C / GEO_G * GEO_R * GEO_S, kpad = (int)get_global_size(0);
    const int kb = kk / (MWI * VW), e = kk - kb * (MWI * VW);
    __global float *dst = wp + ((size_t)g * kpad + (size_t)kb * (MWI * VW)) * CRS + e;
    const __global WELT *src = w + w_off + ((size_t)g * Kg + min(kk, Kg - 1)) * CRS;
    const int n = min(16, CRS - crs0);
    for (int i = 0; i < n; ++i) dst[(size_t)(crs0 + i) * (MWI * VW)] = kk < Kg ? LDW(src, crs0 + i) : 0.0f;
}
#endif

#if W_TYPE != 0
// ---------------------------------------------------------------- weights (STAGE 2's, 16-bit)
// w's n 16-bit elements (W_TYPE, from w_off) widened into the fp32 copy wf, which the kernel
// then reads as fp32 weights: 64 per work-item, 16 per vector conversion (conv_f16x16: one
// vcvtph2ps on AVX-512, where tsr_convert's f16 widening is integer code that keeps a signalling
// NaN's bits, which a convolution does not need: its FMAs quiet one either way, to the same NaN).
// The last work-item's tail is gathered as integers and widened the same way. global =
// ceil(n / 64).
__kernel void widen_weights(__global const WELT *w, const ulong w_off, __global float *wf, const ulong n) {
    const ulong i0 = (ulong)get_global_id(0) * 64;
    const __global ushort *u = (const __global ushort *)w + w_off;
    _Pragma("unroll") for (int v = 0; v < 4; ++v) {
        const ulong i = i0 + (ulong)v * 16;
        if (i + 16 <= n) {
            vstore16(CONV_WIDEN16(W_TYPE, TSR_DT_VLD16(16, u + i)), 0, wf + i);
        } else if (i < n) {
            const int m = (int)(n - i);
            ushort t[16];
            float f[16];
            for (int e = 0; e < 16; ++e) t[e] = e < m ? u[i + e] : (ushort)0;
            vstore16(CONV_WIDEN16(W_TYPE, vload16(0, t)), 0, f);
            for (int e = 0; e < m; ++e) wf[i + e] = f[e];
        }
    }
}
#endif
