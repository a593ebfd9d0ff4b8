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
// Work-items: one per (tile row, channel, image), each sweeping its row's tiles 8 at a time as
// float8 vectors (two 16-float loads per patch row, split into even and odd columns; at the row's
// ends the padding's zeros shifted in: wino_row16), 4 at a time in rows of 4 to 7 tiles, one at a
// time with checked loads in narrower rows. STAGE 9 (wino_fused, below) fuses the three steps.
#include "conv_geometry.cl"
#include "activation.cl"

// VW = 16: the output transform stores a row of 8 tiles (16 outputs) as one vector.
#undef VW
#define VW 16
#include "vector.cl"

#include "dtype.cl"
// a 16-bit y's partial vectors on AVX-512 (conv_access.cl's conv_store), and a bf16 y's whole ones
#if Y_TYPE == 1 || Y_TYPE == 2
#include "dtype_avx512.cl"
#endif
#include "epilogue.cl"
// conv_access.cl: an f16 y's partial vectors rounded as one vector (conv_store)
#define CONV_VECTOR_ROUND 1
#include "conv_access.cl"

// A tile's N x N input patch at column wc into the float array P[N][N] (rows outside x, flagged
// by in[], and columns outside it read as zeros), for the tiles at a row's ends. An f16 x is
// gathered as integers and widened a row at a time (vload_halfN from a private copy: vector
// conversions), since a scalar vload_half is a software routine on PoCL's CPU devices (no
// cl_khr_fp16); other types load element by element.
#if X_TYPE == 1
// 8 f16 bit patterns from the private array h (ushort[8]) as float8: with F16C one vcvtph2ps on a
// vector built in registers (the loads' values inserted; no private store and reload, whose
// narrow stores cannot forward to the vector load), else vload_half8 from the array.
#if defined(__clang__) && defined(__F16C__) && (defined(__x86_64__) || defined(__i386__))
#define WINO_F16X8(h) __builtin_ia32_vcvtph2ps256(as_short8((ushort8)(h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7])))
#else
#define WINO_F16X8(h) vload_half8(0, (const __private half *)h)
#endif
#define WINO_PATCH(P, N)                                                                           \
    _Pragma("unroll") for (int r_ = 0; r_ < (N); ++r_) {                                           \
        ushort h_[8] __attribute__((aligned(16)));                                                 \
        _Pragma("unroll") for (int q_ = 0; q_ < 8; ++q_) {                                         \
            const bool inw_ = q_ < (N) && wc + q_ >= 0 && wc + q_ < GEO_W;                         \
            h_[q_] = in[r_] && inw_ ? ((const __global ushort *)row[r_])[inw_ ? wc + q_ : 0] : (ushort)0; \
        }                                                                                          \
        const float8 v_ = WINO_F16X8(h_);                                                         \
        float f_[8];                                                                               \
        vstore8(v_, 0, f_);                                                                        \
        _Pragma("unroll") for (int q_ = 0; q_ < (N); ++q_) P[r_][q_] = f_[q_];                     \
    }
#else
#define WINO_PATCH(P, N)                                                                           \
    _Pragma("unroll") for (int q_ = 0; q_ < (N); ++q_) {                                           \
        const bool inw_ = wc + q_ >= 0 && wc + q_ < GEO_W;                                         \
        const int col_ = inw_ ? wc + q_ : 0;                                                       \
        _Pragma("unroll") for (int r_ = 0; r_ < (N); ++r_) P[r_][q_] = in[r_] && inw_ ? LDX(row[r_], col_) : 0.0f; \
    }
#endif

// Two float8 interleaved: a0 b0 a1 b1 ... (clang's shuffle; PoCL's shuffle2 came out scalar).
#if defined(__clang__)
#define INTERLEAVE8(a, b) __builtin_shufflevector((a), (b), 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15)
#else
#define INTERLEAVE8(a, b) shuffle2((a), (b), (uint16)(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15))
#endif

// N consecutive values (8 or 16) of a row of x (W long) from column c as floats, zeros outside
// the row: one vector load where they lie inside it; else, for a row at least N long, its first
// (last) N values shifted right (left) by 1 to 3 lanes with zeros entering, where the padding is
// that narrow; 16 of a row of 8 to 15 as two halves of 8; else element by element through a
// private copy.
#if defined(__clang__)
#define WINO_SHR16(v, z, s)                                                                        \
    ((s) == 1   ? __builtin_shufflevector(z, v, 0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30) \
     : (s) == 2 ? __builtin_shufflevector(z, v, 0, 1, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29) \
                : __builtin_shufflevector(z, v, 0, 1, 2, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28))
#define WINO_SHL16(v, z, s)                                                                        \
    ((s) == 1   ? __builtin_shufflevector(v, z, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16) \
     : (s) == 2 ? __builtin_shufflevector(v, z, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17) \
                : __builtin_shufflevector(v, z, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18))
#define WINO_SHR8(v, z, s)                                                                         \
    ((s) == 1   ? __builtin_shufflevector(z, v, 0, 8, 9, 10, 11, 12, 13, 14)                     \
     : (s) == 2 ? __builtin_shufflevector(z, v, 0, 1, 8, 9, 10, 11, 12, 13)                       \
                : __builtin_shufflevector(z, v, 0, 1, 2, 8, 9, 10, 11, 12))
#define WINO_SHL8(v, z, s)                                                                         \
    ((s) == 1   ? __builtin_shufflevector(v, z, 1, 2, 3, 4, 5, 6, 7, 8)                           \
     : (s) == 2 ? __builtin_shufflevector(v, z, 2, 3, 4, 5, 6, 7, 8, 9)                           \
                : __builtin_shufflevector(v, z, 3, 4, 5, 6, 7, 8, 9, 10))
#endif
#define WINO_ROW(N)                                                                                \
    TSR_INLINE float##N wino_row##N(const __global XELT *p, const int c, const int W) {            \
        if (c >= 0 && c + N <= W) return TSR_VLD(X_TYPE, N, p + c);                                \
        WINO_ROW_SHIFTED(N)                                                                        \
        WINO_ROW_HALVES_##N                                                                        \
        float t_[N];                                                                               \
        _Pragma("unroll") for (int q_ = 0; q_ < N; ++q_) {                                         \
            const bool inw_ = c + q_ >= 0 && c + q_ < W;                                           \
            t_[q_] = inw_ ? LDX(p, c + q_) : 0.0f;                                                 \
        }                                                                                          \
        return vload##N(0, t_);                                                                    \
    }
#if defined(__clang__)
#define WINO_ROW_SHIFTED(N)                                                                        \
    if (W >= N && c < 0 && c >= -3) return WINO_SHR##N(TSR_VLD(X_TYPE, N, p), (float##N)(0.0f), -c); \
    if (W >= N && c >= 0 && c + N - W <= 3) return WINO_SHL##N(TSR_VLD(X_TYPE, N, p + W - N), (float##N)(0.0f), c + N - W);
#else
#define WINO_ROW_SHIFTED(N)
#endif
#define WINO_ROW_HALVES_8
// a row narrower than 16 but at least 8 long (ResNet-50's 14x14 planes): two 8-value halves
#define WINO_ROW_HALVES_16 \
    if (W >= 8 && W < 16) return (float16)(wino_row8(p, c, W), wino_row8(p, c + 8, W));
WINO_ROW(8)
WINO_ROW(16)

#if STAGE != 7
// ---- F(2x2, 3x3) ----

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

// B^T along four values (scalars or vectors).
#define BT4(d0, d1, d2, d3, o0, o1, o2, o3) \
    do {                                    \
        o0 = (d0) - (d2);                   \
        o1 = (d1) + (d2);                   \
        o2 = (d2) - (d1);                   \
        o3 = (d1) - (d3);                   \
    } while (0)

// The 16 values B^T d B (o[4 a + b]) of N consecutive tiles (N = 8 or 4) whose patches start at
// column wc of the rows row[r] (in[r]: inside x, else zeros), as floatN vectors: two loads of 2N
// values per row (wino_row16 or wino_row8, N2 = 2N) split into even and odd columns.
#define WINO_BT(N, N2, in, row, wc, o)                                                             \
    do {                                                                                           \
        float##N d_[4][4], t_[4][4];                                                               \
        _Pragma("unroll") for (int r_ = 0; r_ < 4; ++r_) {                                         \
            if (in[r_]) {                                                                          \
                const float##N2 a_ = wino_row##N2(row[r_], (wc), GEO_W);                           \
                const float##N2 b_ = wino_row##N2(row[r_], (wc) + 2, GEO_W);                       \
                d_[r_][0] = a_.even, d_[r_][1] = a_.odd, d_[r_][2] = b_.even, d_[r_][3] = b_.odd;  \
            } else {                                                                               \
                d_[r_][0] = d_[r_][1] = d_[r_][2] = d_[r_][3] = (float##N)(0.0f);                  \
            }                                                                                      \
        }                                                                                          \
        _Pragma("unroll") for (int q_ = 0; q_ < 4; ++q_)                                           \
            BT4(d_[0][q_], d_[1][q_], d_[2][q_], d_[3][q_], t_[0][q_], t_[1][q_], t_[2][q_], t_[3][q_]); \
        _Pragma("unroll") for (int a_ = 0; a_ < 4; ++a_)                                           \
            BT4(t_[a_][0], t_[a_][1], t_[a_][2], t_[a_][3], o[4 * a_], o[4 * a_ + 1], o[4 * a_ + 2], o[4 * a_ + 3]); \
    } while (0)

// V for one tile row: global (TP, C, images of the chunk); tiles = the chunk's tile count
// (V's row length), x_off the chunk's first image. Rows of at least 8 tiles go 8 at a time (two
// 16-float loads per patch row, split into even and odd columns), the last 8 moved back to end at
// the row's last tile (the tiles both cover are written twice, with the same values, by this
// work-item); rows of 4 to 7 tiles 4 at a time the same way (two 8-float loads), narrower rows one
// tile at a time with checked loads. Loads that would leave x's row (the padding at either end)
// take the row's first or last whole vector shifted a few lanes with zeros (wino_row16/8), so only
// rows narrower than a vector, or paddings wider than 3, read element by element.
__kernel void wino_input(const int16 geo, __global const XELT *x, const ulong x_off, __global float *v,
                         const int tiles) {
    const int i = (int)get_global_id(0), c = (int)get_global_id(1), n = (int)get_global_id(2);
    const int TP = (GEO_P + 1) / 2, TQ = (GEO_Q + 1) / 2;
    if (i >= TP || c >= GEO_C) return;
    const __global XELT *xc = x + x_off + ((size_t)n * GEO_C + c) * GEO_H * GEO_W;
    const int h0 = 2 * i - GEO_PH, w0 = -GEO_PW;
    // the patch's four rows (a row outside x reads as zeros: its pointer is never used)
    bool in[4];
    const __global XELT *row[4];
    _Pragma("unroll") for (int r = 0; r < 4; ++r) {
        in[r] = h0 + r >= 0 && h0 + r < GEO_H;
        row[r] = xc + (size_t)(in[r] ? h0 + r : 0) * GEO_W;
    }
    const size_t plane = (size_t)GEO_C * tiles;
    __global float *out = v + (size_t)c * tiles + ((size_t)n * TP + i) * TQ;
    if (TQ >= 8) {
        for (int j0 = 0; j0 < TQ; j0 += 8) {
            const int j = min(j0, TQ - 8);
            float8 o[16];
            WINO_BT(8, 16, in, row, w0 + 2 * j, o);
            _Pragma("unroll") for (int xi = 0; xi < 16; ++xi) vstore8(o[xi], 0, out + xi * plane + j);
        }
        return;
    }
    if (TQ >= 4) {
        for (int j0 = 0; j0 < TQ; j0 += 4) {
            const int j = min(j0, TQ - 4);
            float4 o[16];
            WINO_BT(4, 8, in, row, w0 + 2 * j, o);
            _Pragma("unroll") for (int xi = 0; xi < 16; ++xi) vstore4(o[xi], 0, out + xi * plane + j);
        }
        return;
    }
    for (int j = 0; j < TQ; ++j) {
        const int wc = w0 + 2 * j;
        float t[4][4], d[4][4];
        WINO_PATCH(d, 4);
        _Pragma("unroll") for (int q = 0; q < 4; ++q) BT4(d[0][q], d[1][q], d[2][q], d[3][q], t[0][q], t[1][q], t[2][q], t[3][q]);
        _Pragma("unroll") for (int a = 0; a < 4; ++a) {
            float o0, o1, o2, o3;
            BT4(t[a][0], t[a][1], t[a][2], t[a][3], o0, o1, o2, o3);
            out[(4 * a + 0) * plane + j] = o0;
            out[(4 * a + 1) * plane + j] = o1;
            out[(4 * a + 2) * plane + j] = o2;
            out[(4 * a + 3) * plane + j] = o3;
        }
    }
}

// y from M for one tile row: global (TP, K, images of the chunk); y_off and res_off point at the
// chunk's first image. 8 tiles at a time (16 outputs per output row: conv_store's vector store,
// its partial one where the row ends inside them: the row's last 1 to 8 tiles are read as 8 from
// M, the lanes past the row dropped; M is allocated with 8 floats of slack for the last row's
// reads). (w and w_off,
// unread, keep the arguments every conv2d kernel shares in their places: runtime/ops/conv.c's
// set_common_args.)
__kernel void wino_output(const int16 geo, __global const float *m, const int tiles, __global const WELT *w,
                          const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int i = (int)get_global_id(0), k = (int)get_global_id(1), n = (int)get_global_id(2);
    const int TP = (GEO_P + 1) / 2, TQ = (GEO_Q + 1) / 2;
    if (i >= TP || k >= GEO_K) return;
    const size_t plane = (size_t)GEO_K * tiles, PQ = (size_t)GEO_P * GEO_Q;
    const __global float *in = m + (size_t)k * tiles + ((size_t)n * TP + i) * TQ;
    const size_t e0 = ((size_t)n * GEO_K + k) * PQ + (size_t)(2 * i) * GEO_Q;
    const bool row1 = 2 * i + 1 < GEO_P;
    for (int j = 0; j < TQ; j += 8) {
        const size_t e = e0 + 2 * j;
        float8 s[2][4]; // A^T M, 8 tiles (past the row's last tile: the next row's, or M's slack)
        _Pragma("unroll") for (int b = 0; b < 4; ++b) {
            const float8 m0 = vload8(0, in + (0 + b) * plane + j), m1 = vload8(0, in + (4 + b) * plane + j);
            const float8 m2 = vload8(0, in + (8 + b) * plane + j), m3 = vload8(0, in + (12 + b) * plane + j);
            s[0][b] = m0 + m1 + m2;
            s[1][b] = m1 - m2 - m3;
        }
        const int cols = min(16, GEO_Q - 2 * j);
        CONV_STORE(INTERLEAVE8(s[0][0] + s[0][1] + s[0][2], s[0][1] - s[0][2] - s[0][3]), k, e, cols);
        if (row1) CONV_STORE(INTERLEAVE8(s[1][0] + s[1][1] + s[1][2], s[1][1] - s[1][2] - s[1][3]), k, e + GEO_Q, cols);
    }
}

#if STAGE == 9
// ---- the fused F(2x2) form (STAGE 9): transforms and products of a block of tiles in one
// work-item, V and M in its work-group's local memory (on PoCL's CPU devices a per-thread arena
// that stays in cache), so nothing but x, U and y crosses memory. A work-item (one per
// work-group) takes WF_T = 16 WGM consecutive tiles of the batch (t = (n TP + i) TQ + j: a block
// may span tile rows and images) and a WGN-th of the output channels (a multiple of MWI):
//   1. V[xi][c][lane] for every input channel, each tile row's piece of the block 8 tiles at a
//      time (wino_row16's loads), in local memory, once;
//   2. per MWI output channels: M[xi][m][lane] for the 16 xi (MWI channels x WGM vectors of 16
//      tiles in registers), then 3. y = A^T M A of those channels, with the epilogue.
// Local memory (the launch's `scratch`, runtime/ops/conv.c's wino_fused_local): 16 C WF_T floats
// of V, 16 MWI WF_T of M and 4 (WF_T + 8) of one channel's outputs.
#define WF_T (16 * WGM)
#define WF_OSTR (WF_T + 8)

__kernel void wino_fused(const int16 geo, __global const XELT *x, const ulong x_off, __global const float *u,
                         __local float *scratch, const int tiles, __global const WELT *w, const ulong w_off,
                         __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int TP = (GEO_P + 1) / 2, TQ = (GEO_Q + 1) / 2, per = TP * TQ, C = GEO_C, K = GEO_K;
    const int kper = ((K + WGN - 1) / WGN + MWI - 1) / MWI * MWI; // output channels a work-item
    const int t0 = (int)get_global_id(0) * WF_T, k0 = (int)get_global_id(1) * kper, kend = min(k0 + kper, K);
    if (t0 >= tiles || k0 >= K) return;
    const int tend = min(t0 + WF_T, tiles);
    const size_t vplane = (size_t)C * WF_T;
    __local float *vs = scratch, *ms = scratch + 16 * vplane, *os = ms + 16 * MWI * WF_T;
    // lanes past the batch's last tile, and the outputs' slack, hold zeros
    for (int l = tend - t0; l < WF_T; ++l)
        for (int xi = 0; xi < 16; ++xi)
            for (int c = 0; c < C; ++c) vs[xi * vplane + (size_t)c * WF_T + l] = 0.0f;
    for (int l = 0; l < 4 * WF_OSTR; ++l) os[l] = 0.0f;
    // 1. V, channel by channel (so a channel's rows the block reads, a few consecutive rows of
    // one or two images, are read together), each tile row's piece of the block 8 tiles at a time,
    // a piece's last 1 to 7 tiles stored as at most three stores. The pieces (at most WF_T + 1)
    // are found once: their first tile column, length, lane, first row's offset in x (that of the
    // first of the patch's four rows inside x) and which rows are inside x.
    int pj[WF_T + 1], plen[WF_T + 1], pin[WF_T + 1], plane_at[WF_T + 1];
    size_t poff[WF_T + 1];
    int npieces = 0;
    for (int t = t0; t < tend; ++npieces) {
        const int n = t / per, rem = t - n * per, i = rem / TQ, j = rem - i * TQ, h0 = 2 * i - GEO_PH;
        pj[npieces] = j, plen[npieces] = min(TQ - j, tend - t), plane_at[npieces] = t - t0;
        int mask = 0;
        _Pragma("unroll") for (int r = 0; r < 4; ++r) mask |= (h0 + r >= 0 && h0 + r < GEO_H) << r;
        pin[npieces] = mask;
        poff[npieces] = (size_t)n * C * GEO_H * GEO_W + (size_t)max(h0, 0) * GEO_W;
        t += plen[npieces];
    }
    const __global XELT *x0 = x + x_off;
    for (int c = 0; c < C; ++c) {
        __local float *out = vs + (size_t)c * WF_T;
        for (int pc = 0; pc < npieces; ++pc) {
            const int j = pj[pc], seg = plen[pc], mask = pin[pc];
            // the piece's four rows: row r at (r - first row inside x) rows past poff
            const int h0 = (mask & 1) ? 0 : (mask & 2) ? -1 : (mask & 4) ? -2 : -3;
            const __global XELT *xc = x0 + poff[pc] + (size_t)c * GEO_H * GEO_W;
            bool in[4];
            const __global XELT *row[4];
            _Pragma("unroll") for (int r = 0; r < 4; ++r) {
                in[r] = (mask >> r) & 1;
                row[r] = in[r] ? xc + (h0 + r) * GEO_W : xc;
            }
            for (int jj = 0; jj < seg; jj += 8) {
                float8 o[16];
                WINO_BT(8, 16, in, row, 2 * (j + jj) - GEO_PW, o);
                const int nb = min(8, seg - jj);
                __local float *po0 = out + plane_at[pc] + jj;
                _Pragma("unroll") for (int xi = 0; xi < 16; ++xi) {
                    __local float *po = po0 + xi * vplane;
                    if (nb == 8) {
                        vstore8(o[xi], 0, po);
                        continue;
                    }
                    float4 r4 = o[xi].lo;
                    if (nb & 4) {
                        vstore4(r4, 0, po);
                        r4 = o[xi].hi, po += 4;
                    }
                    float2 r2 = r4.lo;
                    if (nb & 2) {
                        vstore2(r2, 0, po);
                        r2 = r4.hi, po += 2;
                    }
                    if (nb & 1) *po = r2.x;
                }
            }
        }
    }
    // 2. and 3., MWI output channels at a time: M[xi][m][lane] = sum_c U[xi][k + m][c] V[xi][c][lane]
    // (MWI channels x WGM vectors of 16 tiles in registers, U's values broadcast; channels past the
    // work-item's computed on U's last row, never stored), then y = A^T M A of each channel's tiles,
    // stored a tile row's piece at a time with the epilogue
    const size_t PQ = (size_t)GEO_P * GEO_Q;
    for (int kc = k0; kc < kend; kc += MWI) {
        for (int xi = 0; xi < 16; ++xi) {
            const __local float *vx = vs + xi * vplane;
            float16 acc[MWI][WGM];
            const __global float *ur[MWI];
            _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                ur[m] = u + ((size_t)xi * K + min(kc + m, K - 1)) * C;
                _Pragma("unroll") for (int g = 0; g < WGM; ++g) acc[m][g] = (float16)(0.0f);
            }
            for (int c = 0; c < C; ++c) {
                float16 v[WGM];
                _Pragma("unroll") for (int g = 0; g < WGM; ++g) v[g] = vload16(g, vx + (size_t)c * WF_T);
                _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                    const float a = ur[m][c];
                    _Pragma("unroll") for (int g = 0; g < WGM; ++g) acc[m][g] = fma((float16)(a), v[g], acc[m][g]);
                }
            }
            _Pragma("unroll") for (int m = 0; m < MWI; ++m)
                _Pragma("unroll") for (int g = 0; g < WGM; ++g) vstore16(acc[m][g], g, ms + (xi * MWI + m) * WF_T);
        }
        for (int m = 0; m < MWI && kc + m < kend; ++m) {
            const int k = kc + m;
            _Pragma("unroll") for (int g = 0; g < WGM; ++g) {
                float16 s0[4], s1[4]; // A^T M
                _Pragma("unroll") for (int b = 0; b < 4; ++b) {
                    const float16 m0 = vload16(g, ms + ((0 + b) * MWI + m) * WF_T);
                    const float16 m1 = vload16(g, ms + ((4 + b) * MWI + m) * WF_T);
                    const float16 m2 = vload16(g, ms + ((8 + b) * MWI + m) * WF_T);
                    const float16 m3 = vload16(g, ms + ((12 + b) * MWI + m) * WF_T);
                    s0[b] = m0 + m1 + m2;
                    s1[b] = m1 - m2 - m3;
                }
                vstore16(s0[0] + s0[1] + s0[2], g, os);
                vstore16(s0[1] - s0[2] - s0[3], g, os + WF_OSTR);
                vstore16(s1[0] + s1[1] + s1[2], g, os + 2 * WF_OSTR);
                vstore16(s1[1] - s1[2] - s1[3], g, os + 3 * WF_OSTR);
            }
            for (int t = t0; t < tend;) {
                const int n = t / per, rem = t - n * per, i = rem / TQ, j = rem - i * TQ;
                const int seg = min(TQ - j, tend - t), lane = t - t0;
                const size_t e0 = ((size_t)n * K + k) * PQ + (size_t)(2 * i) * GEO_Q + 2 * j;
                const bool row1 = 2 * i + 1 < GEO_P;
                for (int jj = 0; jj < seg; jj += 8) {
                    const int cols = min(min(16, 2 * (seg - jj)), GEO_Q - 2 * (j + jj));
                    const __local float *o = os + lane + jj;
                    CONV_STORE(INTERLEAVE8(vload8(0, o), vload8(0, o + WF_OSTR)), k, e0 + 2 * jj, cols);
                    if (row1)
                        CONV_STORE(INTERLEAVE8(vload8(0, o + 2 * WF_OSTR), vload8(0, o + 3 * WF_OSTR)), k,
                                   e0 + 2 * jj + GEO_Q, cols);
                }
                t += seg;
            }
        }
    }
}
#endif
#else
// ---- F(4x4, 3x3) (STAGE 7): 6x6 patches from row 4i - PH, column 4j - PW, 36 products per 16
// outputs (against 144), with Lavin and Gray's points 0, +-1, +-2:
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// Larger coefficients than F(2x2)'s: its rounding error is several times the direct sum's.

#define G6(g0, g1, g2, o)                                   \
    do {                                                    \
        o[0] = 0.25f * (g0);                                \
        o[1] = -((g0) + (g1) + (g2)) * (1.0f / 6.0f);       \
        o[2] = -((g0) - (g1) + (g2)) * (1.0f / 6.0f);       \
        o[3] = (g0) * (1.0f / 24.0f) + (g1) * (1.0f / 12.0f) + (g2) * (1.0f / 6.0f); \
        o[4] = (g0) * (1.0f / 24.0f) - (g1) * (1.0f / 12.0f) + (g2) * (1.0f / 6.0f); \
        o[5] = (g2);                                        \
    } while (0)

// U = G g G^T for every (k, c): global (C, K).
__kernel void wino_weights(const int16 geo, __global const WELT *w, const ulong w_off, __global float *u) {
    const int c = (int)get_global_id(0), k = (int)get_global_id(1);
    if (c >= GEO_C || k >= GEO_K) return;
    const __global WELT *g = w + w_off + ((size_t)k * GEO_C + c) * 9;
    float gg[9];
    _Pragma("unroll") for (int i = 0; i < 9; ++i) gg[i] = LDW(g, i);
    float t[3][6]; // (G g)^T: t[s][a]
    _Pragma("unroll") for (int s = 0; s < 3; ++s) G6(gg[s], gg[3 + s], gg[6 + s], t[s]);
    const size_t plane = (size_t)GEO_K * GEO_C, at = (size_t)k * GEO_C + c;
    _Pragma("unroll") for (int a = 0; a < 6; ++a) {
        float o[6];
        G6(t[0][a], t[1][a], t[2][a], o);
        _Pragma("unroll") for (int b = 0; b < 6; ++b) u[(6 * a + b) * plane + at] = o[b];
    }
}

// B^T along six values (scalars or vectors) d[0..5] into o[0..5].
#define BT6(d, o)                                                     \
    do {                                                              \
        o[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];                      \
        o[1] = d[3] + d[4] - 4.0f * (d[1] + d[2]);                    \
        o[2] = 4.0f * (d[1] - d[2]) + d[4] - d[3];                    \
        o[3] = 2.0f * (d[3] - d[1]) + d[4] - d[2];                    \
        o[4] = 2.0f * (d[1] - d[3]) + d[4] - d[2];                    \
        o[5] = 4.0f * d[1] - 5.0f * d[3] + d[5];                      \
    } while (0)

// The 36 values of a block's B^T d B from its rows d[r][q] (q: patch column), stored at out + j.
#define INPUT_TRANSFORM(T, d, STORE)                                               \
    do {                                                                           \
        T t_[6][6]; /* t_[a][q] = (B^T d)[a][q] */                                 \
        _Pragma("unroll") for (int q = 0; q < 6; ++q) {                            \
            T col_[6], o_[6];                                                      \
            _Pragma("unroll") for (int r = 0; r < 6; ++r) col_[r] = d[r][q];       \
            BT6(col_, o_);                                                         \
            _Pragma("unroll") for (int a = 0; a < 6; ++a) t_[a][q] = o_[a];        \
        }                                                                          \
        _Pragma("unroll") for (int a = 0; a < 6; ++a) {                            \
            T o_[6];                                                               \
            BT6(t_[a], o_);                                                        \
            _Pragma("unroll") for (int b = 0; b < 6; ++b) STORE(o_[b], 6 * a + b); \
        }                                                                          \
    } while (0)

// V for one tile row: global (TP, C, images of the chunk): 8 tiles at a time where their patches
// lie inside x's row (four 16-float loads per patch row, gathered with shuffles), then 4, else one
// with checked loads.
__kernel void wino_input(const int16 geo, __global const XELT *x, const ulong x_off, __global float *v,
                         const int tiles) {
    const int i = (int)get_global_id(0), c = (int)get_global_id(1), n = (int)get_global_id(2);
    const int TP = (GEO_P + 3) / 4, TQ = (GEO_Q + 3) / 4;
    if (i >= TP || c >= GEO_C) return;
    const __global XELT *xc = x + x_off + ((size_t)n * GEO_C + c) * GEO_H * GEO_W;
    const int h0 = 4 * i - GEO_PH, w0 = -GEO_PW;
    bool in[6];
    const __global XELT *row[6];
    _Pragma("unroll") for (int r = 0; r < 6; ++r) {
        in[r] = h0 + r >= 0 && h0 + r < GEO_H;
        row[r] = xc + (size_t)(in[r] ? h0 + r : 0) * GEO_W;
    }
    const size_t plane = (size_t)GEO_C * tiles;
    __global float *out = v + (size_t)c * tiles + ((size_t)n * TP + i) * TQ;
    for (int j = 0; j < TQ;) {
        const int wc = w0 + 4 * j;
#if defined(__clang__)
        if (j + 8 <= TQ && wc >= 0 && wc + 35 < GEO_W) {
            float8 d[6][6];
            _Pragma("unroll") for (int r = 0; r < 6; ++r) {
                if (in[r]) {
                    const __global XELT *p = row[r] + wc;
                    const float16 a0 = TSR_VLD(X_TYPE, 16, p), a1 = TSR_VLD(X_TYPE, 16, p + 16);
                    const float16 b0 = TSR_VLD(X_TYPE, 16, p + 4), b1 = TSR_VLD(X_TYPE, 16, p + 20);
                    d[r][0] = __builtin_shufflevector(a0, a1, 0, 4, 8, 12, 16, 20, 24, 28);
                    d[r][1] = __builtin_shufflevector(a0, a1, 1, 5, 9, 13, 17, 21, 25, 29);
                    d[r][2] = __builtin_shufflevector(a0, a1, 2, 6, 10, 14, 18, 22, 26, 30);
                    d[r][3] = __builtin_shufflevector(a0, a1, 3, 7, 11, 15, 19, 23, 27, 31);
                    d[r][4] = __builtin_shufflevector(b0, b1, 0, 4, 8, 12, 16, 20, 24, 28);
                    d[r][5] = __builtin_shufflevector(b0, b1, 1, 5, 9, 13, 17, 21, 25, 29);
                } else {
                    _Pragma("unroll") for (int q = 0; q < 6; ++q) d[r][q] = (float8)(0.0f);
                }
            }
#define STORE8(val, xi) vstore8((val), 0, out + (xi) * plane + j)
            INPUT_TRANSFORM(float8, d, STORE8);
#undef STORE8
            j += 8;
            continue;
        }
        if (j + 4 <= TQ && wc >= 0 && wc + 19 < GEO_W) {
            float4 d[6][6];
            _Pragma("unroll") for (int r = 0; r < 6; ++r) {
                if (in[r]) {
                    const __global XELT *p = row[r] + wc;
                    const float16 a = TSR_VLD(X_TYPE, 16, p), b = TSR_VLD(X_TYPE, 16, p + 4);
                    d[r][0] = __builtin_shufflevector(a, a, 0, 4, 8, 12);
                    d[r][1] = __builtin_shufflevector(a, a, 1, 5, 9, 13);
                    d[r][2] = __builtin_shufflevector(a, a, 2, 6, 10, 14);
                    d[r][3] = __builtin_shufflevector(a, a, 3, 7, 11, 15);
                    d[r][4] = __builtin_shufflevector(b, b, 0, 4, 8, 12);
                    d[r][5] = __builtin_shufflevector(b, b, 1, 5, 9, 13);
                } else {
                    _Pragma("unroll") for (int q = 0; q < 6; ++q) d[r][q] = (float4)(0.0f);
                }
            }
#define STORE4(val, xi) vstore4((val), 0, out + (xi) * plane + j)
            INPUT_TRANSFORM(float4, d, STORE4);
#undef STORE4
            j += 4;
            continue;
        }
#endif
        float d[6][6];
        WINO_PATCH(d, 6);
#define STORE1(val, xi) (out[(xi) * plane + j] = (val))
        INPUT_TRANSFORM(float, d, STORE1);
#undef STORE1
        ++j;
    }
}

// A^T along six values m[0..5] into o[0..3].
#define AT6(m, o)                                                  \
    do {                                                           \
        o[0] = m[0] + m[1] + m[2] + m[3] + m[4];                   \
        o[1] = m[1] - m[2] + 2.0f * (m[3] - m[4]);                 \
        o[2] = m[1] + m[2] + 4.0f * (m[3] + m[4]);                 \
        o[3] = m[1] - m[2] + 8.0f * (m[3] - m[4]) + m[5];          \
    } while (0)

// A block's 4x4 outputs per tile from its 36 values LOAD(xi) into Y[r][c].
#define OUTPUT_TRANSFORM(T, LOAD, Y)                                             \
    do {                                                                         \
        T s_[4][6]; /* A^T M */                                                  \
        _Pragma("unroll") for (int b = 0; b < 6; ++b) {                          \
            T m_[6], o_[4];                                                      \
            _Pragma("unroll") for (int a = 0; a < 6; ++a) m_[a] = LOAD(6 * a + b); \
            AT6(m_, o_);                                                         \
            _Pragma("unroll") for (int r = 0; r < 4; ++r) s_[r][b] = o_[r];      \
        }                                                                        \
        _Pragma("unroll") for (int r = 0; r < 4; ++r) AT6(s_[r], Y[r]);          \
    } while (0)

// y from M for one tile row: global (TP, K, images of the chunk); 8 tiles at a time (32 outputs
// per output row: two of conv_store's vector stores), then 4 (one), then one with checked stores.
// (w and w_off, unread, keep the arguments every conv2d kernel shares in their places.)
__kernel void wino_output(const int16 geo, __global const float *m, const int tiles, __global const WELT *w,
                          const ulong w_off, __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    const int i = (int)get_global_id(0), k = (int)get_global_id(1), n = (int)get_global_id(2);
    const int TP = (GEO_P + 3) / 4, TQ = (GEO_Q + 3) / 4;
    if (i >= TP || k >= GEO_K) return;
    const size_t plane = (size_t)GEO_K * tiles, PQ = (size_t)GEO_P * GEO_Q;
    const __global float *in = m + (size_t)k * tiles + ((size_t)n * TP + i) * TQ;
    const size_t e0 = ((size_t)n * GEO_K + k) * PQ + (size_t)(4 * i) * GEO_Q;
    const int rows = min(4, GEO_P - 4 * i);
    for (int j = 0; j < TQ;) {
        const size_t e = e0 + 4 * j;
#if defined(__clang__)
        if (j + 8 <= TQ) {
            float8 Y[4][4];
#define LOAD8(xi) vload8(0, in + (xi) * plane + j)
            OUTPUT_TRANSFORM(float8, LOAD8, Y);
#undef LOAD8
            const int cols = GEO_Q - 4 * j; // more than 16
            for (int r = 0; r < rows; ++r) {
                const float16 p01 = INTERLEAVE8(Y[r][0], Y[r][1]), p23 = INTERLEAVE8(Y[r][2], Y[r][3]);
                const float16 lo = __builtin_shufflevector(p01, p23, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
                const float16 hi = __builtin_shufflevector(p01, p23, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
                CONV_STORE(lo, k, e + (size_t)r * GEO_Q, 16);
                CONV_STORE(hi, k, e + (size_t)r * GEO_Q + 16, min(16, cols - 16));
            }
            j += 8;
            continue;
        }
        if (j + 4 <= TQ) {
            float4 Y[4][4];
#define LOAD4(xi) vload4(0, in + (xi) * plane + j)
            OUTPUT_TRANSFORM(float4, LOAD4, Y);
#undef LOAD4
            const int cols = min(16, GEO_Q - 4 * j);
            for (int r = 0; r < rows; ++r) {
                const float8 p01 = __builtin_shufflevector(Y[r][0], Y[r][1], 0, 4, 1, 5, 2, 6, 3, 7);
                const float8 p23 = __builtin_shufflevector(Y[r][2], Y[r][3], 0, 4, 1, 5, 2, 6, 3, 7);
                CONV_STORE(__builtin_shufflevector(p01, p23, 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15), k,
                           e + (size_t)r * GEO_Q, cols);
            }
            j += 4;
            continue;
        }
#if Y_TYPE == 1 || defined(CONV_BF16_X16)
        {
            // an f16 y, and on AVX-512 a bf16 y (CONV_BF16_X16): the row's last tiles (fewer
            // than 4, at most 12 outputs a row) gathered into one vector per output row, stored as
            // conv_store's partial vector (rounded as one vector; other types store lane by lane
            // below)
            float ry[4][16] = {{0.0f}};
            for (int jj = j; jj < TQ; ++jj) {
                float Y[4][4];
#define LOAD1(xi) in[(xi) * plane + jj]
                OUTPUT_TRANSFORM(float, LOAD1, Y);
#undef LOAD1
                _Pragma("unroll") for (int r = 0; r < 4; ++r)
                    _Pragma("unroll") for (int q = 0; q < 4; ++q) ry[r][4 * (jj - j) + q] = Y[r][q];
            }
            const int cols = GEO_Q - 4 * j;
            for (int r = 0; r < rows; ++r) CONV_STORE(vload16(0, ry[r]), k, e + (size_t)r * GEO_Q, cols);
            break;
        }
#endif
#endif
        float Y[4][4];
#define LOAD1(xi) in[(xi) * plane + j]
        OUTPUT_TRANSFORM(float, LOAD1, Y);
#undef LOAD1
        const int cols = min(4, GEO_Q - 4 * j);
        for (int r = 0; r < rows; ++r)
            for (int q = 0; q < cols; ++q) CONV_STORE1(Y[r][q], k, e + (size_t)r * GEO_Q + q);
        ++j;
    }
}
#endif
