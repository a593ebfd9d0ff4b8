// 2-D max and average pooling (OpenCL C 1.2), PyTorch's max_pool2d / avg_pool2d.
//
// The window kernels and the NHWC global one run on a 1-D range rounded up to whole work-groups
// (the host's WI), items past the end doing nothing; an item decodes its index once (64-bit
// divisions cost tens of cycles: an item a few outputs spent more time there than loading).
// pool2d_nchw: work-item (n * C + c) * OH + oh computes output row oh of plane (n, c), VW outputs
//   at a time. Where the VW windows lie inside the input's columns (the common case) the window's
//   rows are read as vectors: with stride 1 one vload of VW elements per tap, with stride 2 one
//   vload of 2 VW elements and its even (or, at a row's end, odd) lanes; otherwise (edges, other
//   strides) each lane gathers its element at a clamped column and padding takes the start value,
//   without branches (the branchy per-lane loop this replaced made ResNet-50's padded stem pool
//   5 times slower than the same pool without padding on PoCL).
// pool2d_nhwc: work-item (n * OH + oh) * OW + ow computes output pixel (n, oh, ow), VW channels at
//   a time: every tap a vload of VW channels (the tail of C element by element).
// pool2d_global_nchw: kernel = the whole input (one output per plane): a work-group of WG items per
//   plane (n, c), items striding its H * W contiguous elements in VW-wide vectors, then a tree
//   reduction in local memory (WG 1: one item a plane, no barrier, WI planes a group).
// pool2d_global_nhwc: the same for NHWC: item n * ceil(C / VW) + i reduces channels i * VW ..
//   i * VW + VW - 1 over the H * W positions (each a vload of VW channels, C apart).
// Max: -Inf start, v replaces m when v > m or v is NaN (so a NaN stays). Average: fp32 sums,
// divided by the count the host's rules give (count_include_pad: the window clipped to the padded
// input; else the input elements it covers).
//
// -D defines:
//   KIND      0 max, 1 average
//   VW        vector width (1, 2, 4, 8, 16)
//   WG        the global reduction's work-group size (a power of two, 1 .. 256)
//   X_TYPE, Y_TYPE  storage of x and y (dtype.cl's codes; default 0: fp32)
#include "dtype.cl"

#ifndef KIND
#define KIND 0
#endif
#ifndef VW
#define VW 8
#endif
#ifndef WG
#define WG 1
#endif
#ifndef X_TYPE
#define X_TYPE 0
#endif
#ifndef Y_TYPE
#define Y_TYPE 0
#endif

#if VW == 1
typedef float floatv;
#define LD_XV(p) TSR_LD(X_TYPE, p, 0)
#define ST_YV(v, p) TSR_ST(Y_TYPE, v, p, 0)
#else
typedef TSR_DT_CAT(float, VW) floatv;
#define LD_XV(p) TSR_VLD(X_TYPE, VW, p)
#define ST_YV(v, p) TSR_VST(Y_TYPE, VW, v, p)
#endif
// 2 VW elements at p, even lanes (stride 2): only up to VW 8 (float16 is the widest vector).
#if VW == 2 || VW == 4 || VW == 8
#define HAS_STRIDE2 1
#if VW == 2
#define LD_X2(p) TSR_VLD(X_TYPE, 4, p)
#elif VW == 4
#define LD_X2(p) TSR_VLD(X_TYPE, 8, p)
#else
#define LD_X2(p) TSR_VLD(X_TYPE, 16, p)
#endif
#else
#define HAS_STRIDE2 0
#endif

#if VW == 2
#define POOL_IOTA (int2)(0, 1)
#elif VW == 4
#define POOL_IOTA (int4)(0, 1, 2, 3)
#elif VW == 8
#define POOL_IOTA (int8)(0, 1, 2, 3, 4, 5, 6, 7)
#elif VW == 16
#define POOL_IOTA (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#endif

#if KIND == 0
#define INIT (-INFINITY)
// v != v: NaN, without a call (PoCL's isnan on vectors goes lane by lane through a library call)
#define ACC1(m, v) ((m) = ((v) > (m) || (v) != (v)) ? (v) : (m))
#if VW == 1
#define ACCV(m, v) ACC1(m, v)
#else
#define ACCV(m, v) ((m) = select((m), (v), ((v) > (m)) | ((v) != (v))))
#endif
#else
#define INIT 0.0f
#define ACC1(m, v) ((m) += (v))
#define ACCV(m, v) ((m) += (v))
#endif

// The geometry, as the host computed it (layout-independent).
#define GEOMETRY_ARGS                                                                                                 \
    const uint C, const uint H, const uint W, const uint OH, const uint OW, const uint KH, const uint KW,           \
        const uint SH, const uint SW, const int PH, const int PW, const uint DH, const uint DW, const int include_pad

// An average window's divisor in one dimension: [start, start + k) clipped to [-pad, n + pad) when
// padded zeros count, else to [0, n).
inline int window_count(const int start, const int k, const int n, const int pad, const int include_pad) {
    const int end = min(start + k, n + pad);
    return include_pad ? end - start : min(end, n) - max(start, 0);
}

inline float finish(const float acc, const int count) {
#if KIND == 0
    return acc;
#else
    return count > 0 ? acc / (float)count : 0.0f;
#endif
}

__kernel void pool2d_nchw(GEOMETRY_ARGS, const ulong rows, __global const TSR_ELT(X_TYPE) *x, const ulong x_off,
                          __global TSR_ELT(Y_TYPE) *y, const ulong y_off) {
    const ulong row_index = get_global_id(0), plane = row_index / OH;
    if (row_index >= rows) return;
    const uint oh = (uint)(row_index - plane * OH);
    const __global TSR_ELT(X_TYPE) *xp = x + x_off + plane * H * W;
    __global TSR_ELT(Y_TYPE) *yp = y + y_off + row_index * OW;
    const int h0 = (int)(oh * SH) - PH;
    // The rows of the window inside the input (dilation: every DH-th row).
    uint i_lo = 0, i_hi = KH;
    if (h0 < 0) i_lo = (uint)((-h0 + (int)DH - 1) / (int)DH);
    if (h0 + (int)((KH - 1) * DH) >= (int)H) i_hi = h0 >= (int)H ? 0 : (uint)(((int)H - 1 - h0) / (int)DH) + 1;
    const int hcount = window_count(h0, (int)KH, (int)H, PH, include_pad);
    for (uint ow0 = 0; ow0 < OW; ow0 += VW) {
        const int w0 = (int)(ow0 * SW) - PW;
#if VW > 1
        // Inside the columns for every lane: the first tap of lane 0 and the last of lane VW - 1.
        const int last = w0 + (int)((KW - 1) * DW + (VW - 1) * SW);
        bool inner = ow0 + VW <= OW && w0 >= 0 && last < (int)W;
        // Stride 2 reads 2 VW elements a tap, one past the last lane's: where that one is past the
        // row, the block reads from one element earlier and takes the odd lanes.
        int odd = 0;
        if (SW == 2 && inner && last + 1 >= (int)W) {
            if (w0 >= 1) odd = 1;
            else inner = false;
        }
        if (inner && (SW == 1 || (HAS_STRIDE2 && SW == 2))) {
            floatv acc = (floatv)(INIT);
            for (uint i = i_lo; i < i_hi; ++i) {
                const __global TSR_ELT(X_TYPE) *row = xp + (ulong)(h0 + (int)(i * DH)) * W + w0 - odd;
                for (uint j = 0; j < KW; ++j) {
#if HAS_STRIDE2
                    if (SW == 2) {
                        const floatv v = odd ? LD_X2(row + j * DW).odd : LD_X2(row + j * DW).even;
                        ACCV(acc, v);
                        continue;
                    }
#endif
                    const floatv v = LD_XV(row + j * DW);
                    ACCV(acc, v);
                }
            }
#if KIND == 1
            // Inside the columns: the divisor is the same for every lane.
            acc /= (float)(hcount * (int)KW);
#endif
            ST_YV(acc, yp + ow0);
            continue;
        }
#endif
#if KIND == 0 && (VW == 2 || VW == 4 || VW == 8 || VW == 16)
        // Max pooling's left edge (a padded row's first vector): the same vector loads from
        // before the row's start (the row before, in x's buffer), the lanes whose column lies
        // in the padding replaced by the start value (-Inf).
        if (w0 < 0 && ow0 + VW <= OW && (SW == 1 || (HAS_STRIDE2 && SW == 2)) &&
            w0 + (int)((KW - 1) * DW + SW * VW) <= (int)W && (long)(x_off + plane * H * W) + w0 >= 0) {
            const TSR_DT_CAT(int, VW) lane = POOL_IOTA * (int)SW;
            floatv acc = (floatv)(INIT);
            for (uint i = i_lo; i < i_hi; ++i) {
                const __global TSR_ELT(X_TYPE) *row = xp + (ulong)(h0 + (int)(i * DH)) * W;
                for (uint j = 0; j < KW; ++j) {
                    const int c0 = w0 + (int)(j * DW);
#if HAS_STRIDE2
                    const floatv v = SW == 2 ? LD_X2(row + c0).even : LD_XV(row + c0);
#else
                    const floatv v = LD_XV(row + c0);
#endif
                    ACCV(acc, select((floatv)(INIT), v, lane + c0 >= (TSR_DT_CAT(int, VW))(0)));
                }
            }
            ST_YV(acc, yp + ow0);
            continue;
        }
#endif
        // The edges (and strides other than 1 and 2): each lane's elements gathered at clamped
        // columns, padding replaced by the start value, without branches.
        floatv acc = (floatv)(INIT);
        for (uint i = i_lo; i < i_hi; ++i) {
            const __global TSR_ELT(X_TYPE) *row = xp + (ulong)(h0 + (int)(i * DH)) * W;
            for (uint j = 0; j < KW; ++j) {
                float lanes[VW];
                for (uint l = 0; l < VW; ++l) {
                    const int iw = w0 + (int)(l * SW + j * DW);
                    const float v = TSR_LD(X_TYPE, row, clamp(iw, 0, (int)W - 1));
                    lanes[l] = iw >= 0 && iw < (int)W ? v : INIT;
                }
#if VW == 1
                const floatv v = lanes[0];
#else
                const floatv v = TSR_DT_CAT(vload, VW)(0, lanes);
#endif
                ACCV(acc, v);
            }
        }
        float out[VW];
#if VW == 1
        out[0] = acc;
#else
        TSR_DT_CAT(vstore, VW)(acc, 0, out);
#endif
        for (uint l = 0; l < VW && ow0 + l < OW; ++l) {
            const int ws = w0 + (int)(l * SW);
            TSR_ST(Y_TYPE, finish(out[l], hcount * window_count(ws, (int)KW, (int)W, PW, include_pad)), yp, ow0 + l);
        }
    }
}

__kernel void pool2d_nhwc(GEOMETRY_ARGS, const ulong pixels, __global const TSR_ELT(X_TYPE) *x, const ulong x_off,
                          __global TSR_ELT(Y_TYPE) *y, const ulong y_off) {
    const ulong pixel = get_global_id(0), noh = pixel / OW, n = noh / OH;
    if (pixel >= pixels) return;
    const uint ow = (uint)(pixel - noh * OW), oh = (uint)(noh - n * OH);
    const __global TSR_ELT(X_TYPE) *xn = x + x_off + n * H * W * C;
    __global TSR_ELT(Y_TYPE) *yo = y + y_off + pixel * C;
    const int h0 = (int)(oh * SH) - PH, w0 = (int)(ow * SW) - PW;
#if KIND == 1
    const int count = window_count(h0, (int)KH, (int)H, PH, include_pad) *
                      window_count(w0, (int)KW, (int)W, PW, include_pad);
#else
    const int count = 1;
#endif
    uint c0 = 0;
    for (; c0 + VW <= C; c0 += VW) {
        floatv acc = (floatv)(INIT);
        for (uint i = 0; i < KH; ++i) {
            const int ih = h0 + (int)(i * DH);
            if (ih < 0 || ih >= (int)H) continue;
            for (uint j = 0; j < KW; ++j) {
                const int iw = w0 + (int)(j * DW);
                if (iw < 0 || iw >= (int)W) continue;
                const floatv v = LD_XV(xn + ((ulong)ih * W + (ulong)iw) * C + c0);
                ACCV(acc, v);
            }
        }
#if KIND == 1
        acc = count > 0 ? acc / (float)count : (floatv)(0.0f);
#endif
        ST_YV(acc, yo + c0);
    }
    for (; c0 < C; ++c0) {
        float acc = INIT;
        for (uint i = 0; i < KH; ++i) {
            const int ih = h0 + (int)(i * DH);
            if (ih < 0 || ih >= (int)H) continue;
            for (uint j = 0; j < KW; ++j) {
                const int iw = w0 + (int)(j * DW);
                if (iw < 0 || iw >= (int)W) continue;
                const float v = TSR_LD(X_TYPE, xn, ((ulong)ih * W + (ulong)iw) * C + c0);
                ACC1(acc, v);
            }
        }
        TSR_ST(Y_TYPE, finish(acc, count), yo, c0);
    }
}

// Lanes of a vector accumulator reduced to one float.
inline float reduce_lanes(const floatv v) {
#if VW == 1
    return v;
#else
    float lanes[VW];
    TSR_DT_CAT(vstore, VW)(v, 0, lanes);
    float acc = lanes[0];
    for (int l = 1; l < VW; ++l) ACC1(acc, lanes[l]);
    return acc;
#endif
}

__kernel void pool2d_global_nchw(
    const ulong planes, const ulong size, __global const TSR_ELT(X_TYPE) *x, const ulong x_off,
    __global TSR_ELT(Y_TYPE) *y, const ulong y_off) {
    const ulong plane = get_global_id(1);
    const uint lid = (uint)get_local_id(0);
    const __global TSR_ELT(X_TYPE) *xp = x + x_off + plane * size;
    floatv accv = (floatv)(INIT);
    // The work-items of planes past the last (the global size is rounded up) read nothing, but
    // reach the barriers.
    const ulong vectors = plane < planes ? size / VW : 0, count = plane < planes ? size : 0;
    for (ulong v = lid; v < vectors; v += WG) {
        const floatv value = LD_XV(xp + v * VW);
        ACCV(accv, value);
    }
    float acc = reduce_lanes(accv);
    for (ulong i = vectors * VW + lid; i < count; i += WG) {
        const float value = TSR_LD(X_TYPE, xp, i);
        ACC1(acc, value);
    }
#if WG > 1
    __local float partial[WG];
    partial[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint half_size = WG / 2; half_size > 0; half_size /= 2) {
        if (lid < half_size) {
            float other = partial[lid + half_size], mine = partial[lid];
            ACC1(mine, other);
            partial[lid] = mine;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    acc = partial[0];
#endif
    if (lid == 0 && plane < planes) {
#if KIND == 1
        acc /= (float)size;
#endif
        TSR_ST(Y_TYPE, acc, y + y_off, plane);
    }
}

__kernel void pool2d_global_nhwc(const uint C, const ulong batch, const ulong size, __global const TSR_ELT(X_TYPE) *x,
                                 const ulong x_off, __global TSR_ELT(Y_TYPE) *y, const ulong y_off) {
    const uint blocks = (C + VW - 1) / VW;
    const ulong g = get_global_id(0), n = g / blocks;
    const uint c0 = (uint)(g - n * blocks) * VW; // not g % blocks: LLVM's div/rem pairing emits a
                                                 // freeze, which Oclgrind's checker cannot run
    if (n >= batch) return;
    const __global TSR_ELT(X_TYPE) *xn = x + x_off + n * size * C + c0;
    __global TSR_ELT(Y_TYPE) *yn = y + y_off + n * C + c0;
    if (c0 + VW <= C) {
        floatv acc = (floatv)(INIT);
        for (ulong i = 0; i < size; ++i) {
            const floatv v = LD_XV(xn + i * C);
            ACCV(acc, v);
        }
#if KIND == 1
        acc /= (float)size;
#endif
        ST_YV(acc, yn);
        return;
    }
    for (uint l = 0; c0 + l < C; ++l) {
        float acc = INIT;
        for (ulong i = 0; i < size; ++i) {
            const float v = TSR_LD(X_TYPE, xn, i * C + l);
            ACC1(acc, v);
        }
#if KIND == 1
        acc /= (float)size;
#endif
        TSR_ST(Y_TYPE, acc, yn, l);
    }
}
