// GPU SGEMM (OpenCL C 1.2): the GEMM op's "gpu" implementation. Same canonical form, arguments
// and epilogue as gemm.cl's gemm kernel (read its header), designed for devices that run many
// work-items in lock step:
//   - each work-group stages an MWG x KWG tile of A and a KWG x NWG tile of B in local memory,
//     read from global memory in 4-element vectors along the operand's contiguous dimension
//     (so any transposition is coalesced) and stored k-major, A transposed on the way;
//   - each work-item keeps an MWI x NWI block of C in registers (a 2-D register tile), reading
//     VM-wide slices of A's tile and VW-wide slices of B's from local memory per k-step;
//   - with DB the next tiles are read from global memory into registers while this one is
//     multiplied, then stored into the other half of a double buffer: one barrier per k-tile;
//   - tiles past the edges of M, N and K are zero-filled as they are loaded, so the hot loop has
//     no edge cases and no loop bound known only at run time; only the stores are guarded.
// Geometry (-D defines):
//   WGN x WGM  work-items per group. Dimension 0 walks columns, 1 rows, 2 the batch, so that
//              neighbouring work-items store neighbouring columns of C (coalesced stores).
//   MWI        rows of C per work-item, in slices of VM rows (VM: the widest of VW, 4, 2, 1
//              that divides MWI), slice r at rows r*(WGM*VM) + lm*VM: neighbouring work-items
//              read neighbouring vectors of local memory, so a warp's reads do not conflict
//   VW, NVW    NVW vectors of VW columns per work-item, vector v at v*(WGN*VW) + ln*VW
//   KWG        k-steps per staged tile, KU the unroll of the loop over them
//   PAD        1: each local row is VW floats longer, against bank conflicts of the stores
//   DB         1: double-buffered local tiles (see above)
#include "activation.cl"
#include "dtype.cl"
#ifndef MWI
#define MWI 1
#endif
#ifndef VW
#define VW 1
#endif
#ifndef NVW
#define NVW 1
#endif
#ifndef KU
#define KU 1
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
#ifndef PAD
#define PAD 0
#endif
#ifndef DB
#define DB 0
#endif
#ifndef TA
#define TA 0
#endif
#ifndef TB
#define TB 0
#endif
#ifndef A_TYPE
#define A_TYPE 0
#endif
#ifndef B_TYPE
#define B_TYPE 0
#endif
#ifndef C_TYPE
#define C_TYPE 0
#endif

#include "vector.cl"
#include "epilogue.cl"

#define NWI (VW * NVW)
#define MWG (WGM * MWI)
#define NWG (WGN * NWI)
#define WG_ITEMS (WGM * WGN)

// Row slices: VM rows read as one vector.
#if MWI % VW == 0
#define VM VW
#elif VW > 4 && MWI % 4 == 0
#define VM 4
#elif VW > 2 && MWI % 2 == 0
#define VM 2
#else
#define VM 1
#endif
#if VM == 1
typedef float floatm;
#else
typedef CAT(float, VM) floatm;
#endif

// Local tiles, k-major: row kk of A's tile holds its MWG values of k-step kk.
#define LDA_S (MWG + PAD * VW)
#define LDB_S (NWG + PAD * VW)
#define A_TILE (KWG * LDA_S)
#define B_TILE (KWG * LDB_S)
#define BUFFERS (DB ? 2 : 1)
// In float4 units (float4 arrays are 16-byte aligned, so the vector reads below are aligned).
#define A_TILE4 ((A_TILE + 3) / 4)
#define B_TILE4 ((B_TILE + 3) / 4)

// The staging loads: 4-element vectors along the contiguous dimension of each operand's tile,
// LOADS_A (LOADS_B) per work-item, the last round guarded when the count does not divide.
#define A_VECS (MWG * KWG / 4)
#define B_VECS (NWG * KWG / 4)
#define LOADS_A ((A_VECS + WG_ITEMS - 1) / WG_ITEMS)
#define LOADS_B ((B_VECS + WG_ITEMS - 1) / WG_ITEMS)

#define A_ELT TSR_ELT(A_TYPE)
#define B_ELT TSR_ELT(B_TYPE)
#define C_ELT TSR_ELT(C_TYPE)
#if VW == 1
#define C_VLOAD(p) TSR_LD(C_TYPE, p, 0)
#define C_VSTORE(v, p) TSR_ST(C_TYPE, v, p, 0)
#elif C_TYPE == 0
#define C_VLOAD(p) VLOAD(p)
#define C_VSTORE(v, p) VSTORE(v, p)
#else
#define C_VLOAD(p) TSR_VLD(C_TYPE, VW, p)
#define C_VSTORE(v, p) TSR_VST(C_TYPE, VW, v, p)
#endif

// Vector e of a tile: its position in the tile, and the tile coordinates (row or column, k) of
// its first element. Along k for A (B transposed), along rows (columns) otherwise.
#if TA
#define A_VEC_POS(e, row, kk) const int kk = (e) / (MWG / 4), row = ((e) - kk * (MWG / 4)) * 4
#else
#define A_VEC_POS(e, row, kk) const int row = (e) / (KWG / 4), kk = ((e) - row * (KWG / 4)) * 4
#endif
#if TB
#define B_VEC_POS(e, col, kk) const int col = (e) / (KWG / 4), kk = ((e) - col * (KWG / 4)) * 4
#else
#define B_VEC_POS(e, col, kk) const int kk = (e) / (NWG / 4), col = ((e) - kk * (NWG / 4)) * 4
#endif

// Four elements of A starting at tile row i, k-step k (global coordinates): along k, or along i
// when transposed; zero past M and K.
float4 load_a4(const __global A_ELT *a, const int lda, const int M, const int K, const int i, const int k,
                      const bool interior) {
#if TA
    const __global A_ELT *p = a + (size_t)k * lda + i;
    if (interior) return TSR_VLD(A_TYPE, 4, p);
    float4 r = (float4)(0.0f);
    if (k < K) {
        if (i + 0 < M) r.s0 = TSR_LD(A_TYPE, p, 0);
        if (i + 1 < M) r.s1 = TSR_LD(A_TYPE, p, 1);
        if (i + 2 < M) r.s2 = TSR_LD(A_TYPE, p, 2);
        if (i + 3 < M) r.s3 = TSR_LD(A_TYPE, p, 3);
    }
    return r;
#else
    const __global A_ELT *p = a + (size_t)i * lda + k;
    if (interior) return TSR_VLD(A_TYPE, 4, p);
    float4 r = (float4)(0.0f);
    if (i < M) {
        if (k + 0 < K) r.s0 = TSR_LD(A_TYPE, p, 0);
        if (k + 1 < K) r.s1 = TSR_LD(A_TYPE, p, 1);
        if (k + 2 < K) r.s2 = TSR_LD(A_TYPE, p, 2);
        if (k + 3 < K) r.s3 = TSR_LD(A_TYPE, p, 3);
    }
    return r;
#endif
}

// Four elements of B starting at k-step k, column j: along j, or along k when transposed.
float4 load_b4(const __global B_ELT *b, const int ldb, const int N, const int K, const int j, const int k,
                      const bool interior) {
#if TB
    const __global B_ELT *p = b + (size_t)j * ldb + k;
    if (interior) return TSR_VLD(B_TYPE, 4, p);
    float4 r = (float4)(0.0f);
    if (j < N) {
        if (k + 0 < K) r.s0 = TSR_LD(B_TYPE, p, 0);
        if (k + 1 < K) r.s1 = TSR_LD(B_TYPE, p, 1);
        if (k + 2 < K) r.s2 = TSR_LD(B_TYPE, p, 2);
        if (k + 3 < K) r.s3 = TSR_LD(B_TYPE, p, 3);
    }
    return r;
#else
    const __global B_ELT *p = b + (size_t)k * ldb + j;
    if (interior) return TSR_VLD(B_TYPE, 4, p);
    float4 r = (float4)(0.0f);
    if (k < K) {
        if (j + 0 < N) r.s0 = TSR_LD(B_TYPE, p, 0);
        if (j + 1 < N) r.s1 = TSR_LD(B_TYPE, p, 1);
        if (j + 2 < N) r.s2 = TSR_LD(B_TYPE, p, 2);
        if (j + 3 < N) r.s3 = TSR_LD(B_TYPE, p, 3);
    }
    return r;
#endif
}

// Stores a vector loaded by load_a4 (load_b4) into the k-major local tile.
void store_a4(__local float *as, const int row, const int kk, const float4 v) {
#if TA
    __local float *d = as + kk * LDA_S + row;
    d[0] = v.s0; d[1] = v.s1; d[2] = v.s2; d[3] = v.s3;
#else
    __local float *d = as + kk * LDA_S + row;
    d[0] = v.s0; d[LDA_S] = v.s1; d[2 * LDA_S] = v.s2; d[3 * LDA_S] = v.s3;
#endif
}
void store_b4(__local float *bs, const int col, const int kk, const float4 v) {
#if TB
    __local float *d = bs + kk * LDB_S + col;
    d[0] = v.s0; d[LDB_S] = v.s1; d[2 * LDB_S] = v.s2; d[3 * LDB_S] = v.s3;
#else
    __local float *d = bs + kk * LDB_S + col;
    d[0] = v.s0; d[1] = v.s1; d[2] = v.s2; d[3] = v.s3;
#endif
}

__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1))) void
gemm(const int M, const int N, const int K_all, const int KP, const float alpha, const float beta,
     __global const A_ELT *A, const ulong a_off, const int lda, const ulong a_stride, __global const B_ELT *B,
     const ulong b_off, const int ldb, const ulong b_stride, __global C_ELT *C, const ulong c_off, const int ldc,
     const ulong c_stride, __global const float *bias, const ulong bias_off, const ulong bias_stride,
     const int bias_axis, const int act, __global const float *scale, const ulong scale_off,
     const ulong scale_stride, const int scale_axis, __global const uchar *res, const ulong res_off,
     const int res_type) {
    // KP (gemm.cl's packed-panel stride; nothing is packed here): 0, or split-K's slice depth.
    // Split-K: dimension 2 walks slices of one matrix's K, KP k-steps each from k = z * KP (the
    // last slice shorter, never empty: the host makes ceil(K / KP) slices), and slice z's product
    // goes to C + z * c_stride (the host's fp32 workspace; gemm_reduce sums the slices).
    const size_t z = get_global_id(2);
    const int k_begin = KP > 0 ? (int)z * KP : 0;
    const int K = KP > 0 ? min(KP, K_all - k_begin) : K_all;
    __local float4 as4[BUFFERS * A_TILE4];
    __local float4 bs4[BUFFERS * B_TILE4];
    __local float *as = (__local float *)as4;
    __local float *bs = (__local float *)bs4;
    const int ln = (int)get_local_id(0), lm = (int)get_local_id(1);
    const int tid = lm * WGN + ln;
    const int tile_i0 = (int)get_group_id(1) * MWG, tile_j0 = (int)get_group_id(0) * NWG;
    const size_t batch = KP > 0 ? 0 : z;
#if TA
    const __global A_ELT *a = A + a_off + batch * a_stride + (size_t)k_begin * lda;
#else
    const __global A_ELT *a = A + a_off + batch * a_stride + k_begin;
#endif
#if TB
    const __global B_ELT *b = B + b_off + batch * b_stride + k_begin;
#else
    const __global B_ELT *b = B + b_off + batch * b_stride + (size_t)k_begin * ldb;
#endif
    // The group's tiles lie inside M (N) whole: k-tiles away from the end of K need no guard.
    const bool full_m = tile_i0 + MWG <= M, full_n = tile_j0 + NWG <= N;

    float4 ra[LOADS_A], rb[LOADS_B];
    // Read the tiles of k-steps [k0, k0 + KWG) into ra and rb.
#define LOAD_TILES(k0)                                                                             \
    {                                                                                              \
        const bool full_k = (k0) + KWG <= K;                                                       \
        _Pragma("unroll") for (int l = 0; l < LOADS_A; ++l) {                                      \
            const int e = l * WG_ITEMS + tid;                                                      \
            if (A_VECS % WG_ITEMS == 0 || e < A_VECS) {                                            \
                A_VEC_POS(e, row, kk);                                                             \
                ra[l] = load_a4(a, lda, M, K, tile_i0 + row, (k0) + kk, full_m && full_k);         \
            }                                                                                      \
        }                                                                                          \
        _Pragma("unroll") for (int l = 0; l < LOADS_B; ++l) {                                      \
            const int e = l * WG_ITEMS + tid;                                                      \
            if (B_VECS % WG_ITEMS == 0 || e < B_VECS) {                                            \
                B_VEC_POS(e, col, kk);                                                             \
                rb[l] = load_b4(b, ldb, N, K, tile_j0 + col, (k0) + kk, full_n && full_k);         \
            }                                                                                      \
        }                                                                                          \
    }
    // Store ra and rb into local buffer `buf`.
#define STORE_TILES(buf)                                                                           \
    {                                                                                              \
        _Pragma("unroll") for (int l = 0; l < LOADS_A; ++l) {                                      \
            const int e = l * WG_ITEMS + tid;                                                      \
            if (A_VECS % WG_ITEMS == 0 || e < A_VECS) {                                            \
                A_VEC_POS(e, row, kk);                                                             \
                store_a4(as + (buf) * (A_TILE4 * 4), row, kk, ra[l]);                              \
            }                                                                                      \
        }                                                                                          \
        _Pragma("unroll") for (int l = 0; l < LOADS_B; ++l) {                                      \
            const int e = l * WG_ITEMS + tid;                                                      \
            if (B_VECS % WG_ITEMS == 0 || e < B_VECS) {                                            \
                B_VEC_POS(e, col, kk);                                                             \
                store_b4(bs + (buf) * (B_TILE4 * 4), col, kk, rb[l]);                              \
            }                                                                                      \
        }                                                                                          \
    }

    floatv acc[MWI][NVW];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m)
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = (floatv)(0.0f);

    const int ntiles = (K + KWG - 1) / KWG;
    if (ntiles > 0) {
        LOAD_TILES(0)
        STORE_TILES(0)
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < ntiles; ++t) {
        const int cur = DB ? (t & 1) : 0;
#if DB
        if (t + 1 < ntiles) LOAD_TILES((t + 1) * KWG)
#endif
        const __local float *at = as + cur * (A_TILE4 * 4) + lm * VM;
        const __local float *bt = bs + cur * (B_TILE4 * 4) + ln * VW;
        for (int k = 0; k < KWG; k += KU) {
            _Pragma("unroll") for (int u = 0; u < KU; ++u) {
                const int kk = k + u;
                float av[MWI];
                floatv bv[NVW];
                _Pragma("unroll") for (int r = 0; r < MWI / VM; ++r) {
#if VM == 1
                    av[r] = at[kk * LDA_S + r * (WGM * VM)];
#else
                    CAT(vstore, VM)(*(const __local floatm *)(at + kk * LDA_S + r * (WGM * VM)), 0, av + r * VM);
#endif
                }
                _Pragma("unroll") for (int v = 0; v < NVW; ++v) {
#if VW == 1
                    bv[v] = bt[kk * LDB_S + v * (WGN * VW)];
#else
                    bv[v] = *(const __local floatv *)(bt + kk * LDB_S + v * (WGN * VW));
#endif
                }
                _Pragma("unroll") for (int m = 0; m < MWI; ++m)
                    _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = fma((floatv)(av[m]), bv[v], acc[m][v]);
            }
        }
#if DB
        if (t + 1 < ntiles) STORE_TILES(cur ^ 1)
        barrier(CLK_LOCAL_MEM_FENCE);
#else
        barrier(CLK_LOCAL_MEM_FENCE);
        if (t + 1 < ntiles) {
            LOAD_TILES((t + 1) * KWG)
            STORE_TILES(0)
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
    }

    // ---- store act(scale * alpha * acc + beta * C + bias + residual) (gemm.cl's epilogue)
    __global C_ELT *cb = C + c_off + z * c_stride; // a batch entry, or split-K's slice
    const __global float *bias_b = bias + bias_off + batch * bias_stride;
    const __global float *scale_b = scale + scale_off + batch * scale_stride;
    const size_t res_b = res_off + batch * c_stride; // the batch entry's residual
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
        const int i = tile_i0 + (m / VM) * (WGM * VM) + lm * VM + m % VM;
        if (i >= M) continue;
        __global C_ELT *crow = cb + (size_t)i * ldc;
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) {
            const int j = tile_j0 + v * (WGN * VW) + ln * VW;
            if (j + VW <= N) {
                floatv r = alpha * acc[m][v];
                if (scale_axis == 1) r *= VLOAD(scale_b + j);
                else if (scale_axis == 2) r *= scale_b[i];
                if (beta != 0.0f) r = fma((floatv)(beta), C_VLOAD(crow + j), r);
                if (bias_axis == 1) r += VLOAD(bias_b + j);
                else if (bias_axis == 2) r += bias_b[i];
                r = tsr_epi_finish_v(r, res, res_type, res_b + (size_t)i * ldc + j, act);
                C_VSTORE(r, crow + j);
            } else if (j < N) {
                float t[VW];
                VSTORE(acc[m][v], t);
                for (int e = 0; e < VW && j + e < N; ++e) {
                    float r = alpha * t[e];
                    if (scale_axis == 1) r *= scale_b[j + e];
                    else if (scale_axis == 2) r *= scale_b[i];
                    if (beta != 0.0f) r = fma(beta, TSR_LD(C_TYPE, crow, j + e), r);
                    if (bias_axis == 1) r += bias_b[j + e];
                    else if (bias_axis == 2) r += bias_b[i];
                    r = tsr_epi_finish(r, res, res_type, res_b + (size_t)i * ldc + j + e, act);
                    TSR_ST(C_TYPE, r, crow, j + e);
                }
            }
        }
    }
}

// Split-K's second step: C = act(scale * alpha * sum_s W_s + beta * C + bias + residual), the sum
// of the S fp32 slice products W_s (w_slice floats apart, rows ldw apart) in slice order, then the
// gemm kernel's epilogue, in the same order of operations, and one rounding to C's type. One
// work-item per VW columns of a row; dimension 0 walks columns, 1 rows (one matrix: split-K runs
// for a batch of one).
__kernel void gemm_reduce(const int M, const int N, const int S, const float alpha, const float beta,
                          __global const float *W, const ulong w_slice, const int ldw, __global C_ELT *C,
                          const ulong c_off, const int ldc, __global const float *bias, const ulong bias_off,
                          const int bias_axis, const int act, __global const float *scale, const ulong scale_off,
                          const int scale_axis, __global const uchar *res, const ulong res_off, const int res_type) {
    const int j = (int)get_global_id(0) * VW, i = (int)get_global_id(1);
    if (i >= M || j >= N) return;
    const __global float *w = W + (size_t)i * ldw + j;
    __global C_ELT *crow = C + c_off + (size_t)i * ldc;
    const __global float *bias_b = bias + bias_off;
    const __global float *scale_b = scale + scale_off;
    const size_t res_i = res_off + (size_t)i * ldc + j;
    if (j + VW <= N) {
        floatv acc = VLOAD(w);
        for (int s = 1; s < S; ++s) acc += VLOAD(w + s * w_slice);
        floatv r = alpha * acc;
        if (scale_axis == 1) r *= VLOAD(scale_b + j);
        else if (scale_axis == 2) r *= scale_b[i];
        if (beta != 0.0f) r = fma((floatv)(beta), C_VLOAD(crow + j), r);
        if (bias_axis == 1) r += VLOAD(bias_b + j);
        else if (bias_axis == 2) r += bias_b[i];
        r = tsr_epi_finish_v(r, res, res_type, res_i, act);
        C_VSTORE(r, crow + j);
    } else {
        for (int e = 0; j + e < N; ++e) {
            float acc = w[e];
            for (int s = 1; s < S; ++s) acc += w[s * w_slice + e];
            float r = alpha * acc;
            if (scale_axis == 1) r *= scale_b[j + e];
            else if (scale_axis == 2) r *= scale_b[i];
            if (beta != 0.0f) r = fma(beta, TSR_LD(C_TYPE, crow, j + e), r);
            if (bias_axis == 1) r += bias_b[j + e];
            else if (bias_axis == 2) r += bias_b[i];
            r = tsr_epi_finish(r, res, res_type, res_i + e, act);
            TSR_ST(C_TYPE, r, crow, j + e);
        }
    }
}
