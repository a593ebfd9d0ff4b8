// conv2d's Winograd F(2x2, 3x3) form (STAGE 6, CPUs; OpenCL C 1.2): 3x3 kernels, stride 1,
// dilation 1, one group, any padding. Each 2x2 block of outputs (a tile; tile (i, j) of an image
// reads the 4x4 input patch from row 2i - PH, column 2j - PW, zeros outside x) is
//   y = A^T [ sum_c (G g_kc G^T) .* (B^T d_c B) ] A
// with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
// A^T = [1 1 1 0; 0 1 -1 -1]: 16 products per tile and channel pair instead of 36. The sum over
// c is 16 independent GEMMs, one per element xi = 4a + b of the 4x4 transformed tile, which the
// host runs on tessera's GEMM (one batched call):
//   wino_weights  U[xi][k][c]  = (G g_kc G^T)[a][b]           (w in its type, U fp32)
//   wino_input    V[xi][c][t]  = (B^T d_ct B)[a][b]           (x in its type, V fp32)
//   GEMM          M[xi][k][t]  = sum_c U[xi][k][c] V[xi][c][t]
//   wino_output   y            = A^T M A, then conv_store1's epilogue (scale, bias, residual,
//                                activation) and y's storage type, in the same pass
// t counts the tiles of a chunk of images: t = (n TP + i) TQ + j, TP = ceil(P / 2) tile rows and
// TQ = ceil(Q / 2) tile columns per image. The transforms' coefficients are 0, +-1 and 1/2, so
// the rounding error stays near the direct sum's (docs/conv.md states the bound tested).
// Work-items: one per (tile row, channel, image), each sweeping its row's tiles; neighbouring
// tiles share two columns of the patch, so each input column's B^T step is computed once.
#include "conv_geometry.cl"
#include "activation.cl"

#undef VW
#define VW 1
#include "vector.cl"

#include "dtype.cl"
#include "epilogue.cl"
#include "conv_access.cl"

// U = G g G^T for every (k, c): global (C, K).
__kernel void wino_weights(const int16 geo, __global const WELT *w, const ulong w_off, __global float *u) {
    const int c = (int)get_global_id(0), k = (int)get_global_id(1);
    if (c >= GEO_C || k >= GEO_K) return;
    const __global WELT *g = w + w_off + ((size_t)k * GEO_C + c) * 9;
    float gg[9];
    _Pragma("unroll") for (int i = 0; i < 9; ++i) gg[i] = LDW(g, i);
    float t[4][3]; // G g
    _Pragma("unroll") for (int s = 0; s < 3; ++s) {
        const float g0 = gg[s], g1 = gg[3 + s], g2 = gg[6 + s];
        t[0][s] = g0;
        t[1][s] = 0.5f * (g0 + g1 + g2);
        t[2][s] = 0.5f * (g0 - g1 + g2);
        t[3][s] = g2;
    }
    const size_t plane = (size_t)GEO_K * GEO_C, at = (size_t)k * GEO_C + c;
    _Pragma("unroll") for (int a = 0; a < 4; ++a) {
        const float g0 = t[a][0], g1 = t[a][1], g2 = t[a][2];
        u[(4 * a + 0) * plane + at] = g0;
        u[(4 * a + 1) * plane + at] = 0.5f * (g0 + g1 + g2);
        u[(4 * a + 2) * plane + at] = 0.5f * (g0 - g1 + g2);
        u[(4 * a + 3) * plane + at] = g2;
    }
}

// B^T along a column of four values.
#define BT4(d0, d1, d2, d3, o0, o1, o2, o3) \
    do {                                    \
        o0 = (d0) - (d2);                   \
        o1 = (d1) + (d2);                   \
        o2 = (d2) - (d1);                   \
        o3 = (d1) - (d3);                   \
    } while (0)

// V for one tile row: global (TP, C, images of the chunk); tiles = the chunk's tile count
// (V's row length), x_off the chunk's first image.
__kernel void wino_input(const int16 geo, __global const XELT *x, const ulong x_off, __global float *v,
                         const int tiles) {
    const int i = (int)get_global_id(0), c = (int)get_global_id(1), n = (int)get_global_id(2);
    const int TP = (GEO_P + 1) / 2, TQ = (GEO_Q + 1) / 2;
    if (i >= TP || c >= GEO_C) return;
    const __global XELT *xc = x + x_off + ((size_t)n * GEO_C + c) * GEO_H * GEO_W;
    const int h0 = 2 * i - GEO_PH;
    // the patch's four rows (a row outside x reads as zeros: its pointer is never used)
    bool in[4];
    const __global XELT *row[4];
    _Pragma("unroll") for (int r = 0; r < 4; ++r) {
        in[r] = h0 + r >= 0 && h0 + r < GEO_H;
        row[r] = xc + (size_t)(in[r] ? h0 + r : 0) * GEO_W;
    }
    const size_t plane = (size_t)GEO_C * tiles;
    __global float *out = v + (size_t)c * tiles + ((size_t)n * TP + i) * TQ;
    // B^T d of the current patch's columns 0, 1 (carried over from the previous tile's 2, 3)
    float col[4][4];
    const int w0 = -GEO_PW;
#define LOADCOL(q, wc)                                                                          \
    do {                                                                                        \
        const bool inw = (wc) >= 0 && (wc) < GEO_W;                                             \
        const int wcc = inw ? (wc) : 0;                                                         \
        const float d0 = in[0] && inw ? LDX(row[0], wcc) : 0.0f, d1 = in[1] && inw ? LDX(row[1], wcc) : 0.0f; \
        const float d2 = in[2] && inw ? LDX(row[2], wcc) : 0.0f, d3 = in[3] && inw ? LDX(row[3], wcc) : 0.0f; \
        BT4(d0, d1, d2, d3, col[0][q], col[1][q], col[2][q], col[3][q]);                        \
    } while (0)
    LOADCOL(0, w0);
    LOADCOL(1, w0 + 1);
    for (int j = 0; j < TQ; ++j) {
        const int wc = w0 + 2 * j + 2;
        LOADCOL(2, wc);
        LOADCOL(3, wc + 1);
        _Pragma("unroll") for (int a = 0; a < 4; ++a) {
            float o0, o1, o2, o3;
            BT4(col[a][0], col[a][1], col[a][2], col[a][3], o0, o1, o2, o3);
            out[(4 * a + 0) * plane + j] = o0;
            out[(4 * a + 1) * plane + j] = o1;
            out[(4 * a + 2) * plane + j] = o2;
            out[(4 * a + 3) * plane + j] = o3;
            col[a][0] = col[a][2];
            col[a][1] = col[a][3];
        }
    }
#undef LOADCOL
}

// y from M for one tile row: global (TP, K, images of the chunk); y_off and res_off point at the
// chunk's first image. (w and w_off, unread, keep the arguments every conv2d kernel shares in
// their places: runtime/ops/conv.c's set_common_args.)
__kernel void wino_output(const int16 geo, __global const float *m, const int tiles, __global const WELT *w,
                          const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int i = (int)get_global_id(0), k = (int)get_global_id(1), n = (int)get_global_id(2);
    const int TP = (GEO_P + 1) / 2, TQ = (GEO_Q + 1) / 2;
    if (i >= TP || k >= GEO_K) return;
    const size_t plane = (size_t)GEO_K * tiles, PQ = (size_t)GEO_P * GEO_Q;
    const __global float *in = m + (size_t)k * tiles + ((size_t)n * TP + i) * TQ;
    const size_t e0 = ((size_t)n * GEO_K + k) * PQ + (size_t)(2 * i) * GEO_Q;
    const bool row1 = 2 * i + 1 < GEO_P;
    for (int j = 0; j < TQ; ++j) {
        float s[2][4]; // A^T M
        _Pragma("unroll") for (int b = 0; b < 4; ++b) {
            const float m0 = in[(0 + b) * plane + j], m1 = in[(4 + b) * plane + j];
            const float m2 = in[(8 + b) * plane + j], m3 = in[(12 + b) * plane + j];
            s[0][b] = m0 + m1 + m2;
            s[1][b] = m1 - m2 - m3;
        }
        const bool col1 = 2 * j + 1 < GEO_Q;
        const size_t e = e0 + 2 * j;
        CONV_STORE1(s[0][0] + s[0][1] + s[0][2], k, e);
        if (col1) CONV_STORE1(s[0][1] - s[0][2] - s[0][3], k, e + 1);
        if (row1) {
            CONV_STORE1(s[1][0] + s[1][1] + s[1][2], k, e + GEO_Q);
            if (col1) CONV_STORE1(s[1][1] - s[1][2] - s[1][3], k, e + GEO_Q + 1);
        }
    }
}
