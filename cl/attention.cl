// Blocked ("flash") attention and the row softmax of the unfused baseline (OpenCL C 1.2).
//
//   O[b,h,i,:] = sum_j softmax_j(scale * Q[b,h,i,:] . K[b,h,j,:] + mask(i, j)) V[b,h,j,:]
//   mask(i, j) = -inf unless j < kv_len[b] and, when causal, j <= i + (Lk - Lq)
// A row whose keys are all masked gets O = 0 and LSE = -inf (documented in the header). A NaN
// among a row's visible scores (a NaN in its query, or in a key it sees) makes its O and LSE
// NaN, as the softmax's definition does: the running maximum (fmax) passes NaN over, so each
// kernel notes NaN scores and sets l = NaN, which the final 1/l and log(l) carry.
//
// Geometry, from -D defines:
//   HEAD_DIM  D, compiled in so the loops over it unroll and vectorize
//   BR        query rows per work-group (each row on DS work-items)
//   BC        keys per tile: K and V tiles of BC x D stream through local memory
//   DS        work-items per query row (the work-group is DS x BR): each holds a slice of D of
//             the query and the output accumulator; a tile's scores are summed from the
//             slices' partial dot products through local memory, so D splits across items
//             (fewer registers per item, more items per row on GPUs)
// Each work-item keeps its query row (pre-scaled) and its output accumulator in private
// memory and runs the online softmax: per tile, the scores, the tile maximum, one rescale
// of the accumulator when the running maximum grows, then the weighted sum of V. The L x L
// score matrix never exists; memory is O(B H L D). Tiles past the last key any row of the
// work-group may see (the causal limit, the batch's key length) are never loaded.
// Tensors are [b, h, row, d] with element strides (sb, sh, sl) for b, h, row and 1 for d.
//
// `attention_vec` is the fast path for head dimensions that are multiples of 16 (CPUs):
// a work-item owns RW query rows and takes keys 16 at a time as float16 lanes, reading K
// from a transposed copy (`transpose_k`: [b*h][d][key], zero-padded to a multiple of 16
// keys, O(B H L D) memory), so the scores of a tile are RW independent chains of D vector
// FMAs instead of scalar dot products (whose dependent FMA chains starve a CPU's
// pipelines); P V accumulates float16 slices of D per row.
//
// Storage types (cl/dtype.cl codes, 0 fp32, 1 f16, 2 bf16): Q_TYPE, K_TYPE, V_TYPE and O_TYPE
// for the four tensors, KP_TYPE for the transposed or packed copy of K that the fast paths
// read. Loads widen to fp32 (the staged tiles of STAGE=1 hold fp32), every sum is fp32, O is
// rounded once at the store; with every code 0 the loads and stores are the plain fp32 ones.
#include "activation.cl"
#include "dtype.cl"

#ifndef Q_TYPE
#define Q_TYPE 0
#endif
#ifndef K_TYPE
#define K_TYPE 0
#endif
#ifndef V_TYPE
#define V_TYPE 0
#endif
#ifndef O_TYPE
#define O_TYPE 0
#endif
#ifndef KP_TYPE
#define KP_TYPE 0
#endif
#define Q_T TSR_ELT(Q_TYPE)
#define K_T TSR_ELT(K_TYPE)
#define V_T TSR_ELT(V_TYPE)
#define O_T TSR_ELT(O_TYPE)
#define KP_T TSR_ELT(KP_TYPE)

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef BR
#define BR 1
#endif
#ifndef BC
#define BC 4
#endif
#ifndef STAGE
#define STAGE 0 // 0: read K and V tiles straight from global memory (CPUs: caches, no barriers)
#endif
#ifndef DS
#define DS 1 // work-items sharing a query row, each with a slice of D
#endif
#define DSL ((HEAD_DIM + DS - 1) / DS)

__kernel __attribute__((reqd_work_group_size(DS, BR, 1)))
void attention(const int Lq, const int Lk, const int H, const float scale, const int causal,
               __global const Q_T *q, const ulong q_off, const ulong qsb, const ulong qsh, const ulong qsl,
               __global const K_T *k, const ulong k_off, const ulong ksb, const ulong ksh, const ulong ksl,
               __global const V_T *v, const ulong v_off, const ulong vsb, const ulong vsh, const ulong vsl,
               __global O_T *o, const ulong o_off, const ulong osb, const ulong osh, const ulong osl,
               __global const int *kv_len, __global float *lse, const ulong lse_off, const int write_lse) {
#if STAGE
    __local float Ks[BC * HEAD_DIM];
    __local float Vs[BC * HEAD_DIM];
#define K_AT(jj, d) Ks[(jj) * HEAD_DIM + (d)]
#define V_AT(jj, d) Vs[(jj) * HEAD_DIM + (d)]
#else
#define K_AT(jj, d) TSR_LD(K_TYPE, kb, (size_t)min(j0 + (jj), kv_end - 1) * ksl + (d))
#define V_AT(jj, d) TSR_LD(V_TYPE, vb, (size_t)min(j0 + (jj), kv_end - 1) * vsl + (d))
#endif
#if DS > 1
    __local float partial[BR * DS * BC]; // each slice's part of each score, per row
#endif
    const int slice = (int)get_local_id(0), lr = (int)get_local_id(1), lid = lr * DS + slice;
    const int d0 = slice * DSL; // this work-item's slice of D: [d0, d0 + DSL) within HEAD_DIM
    const int i = (int)get_group_id(1) * BR + lr;
    const int bh = (int)get_global_id(2), b = bh / H, h = bh - b * H;
    const bool active = i < Lq;
    const int kv_end = kv_len[b];
    const int shift = Lk - Lq; // causal: row i sees keys j <= i + shift
    // Keys this row may see, and the last key any row of the group may see.
    int limit = active ? kv_end : 0;
    if (causal) limit = min(limit, i + shift + 1);
    int group_limit = kv_end;
    if (causal) group_limit = min(group_limit, min((int)get_group_id(1) * BR + BR, Lq) - 1 + shift + 1);

    const __global K_T *kb = k + k_off + b * ksb + h * ksh;
    const __global V_T *vb = v + v_off + b * vsb + h * vsh;
    float qr[DSL], acc[DSL];
    const __global Q_T *qp = q + q_off + b * qsb + h * qsh + (size_t)(active ? i : 0) * qsl;
    for (int dd = 0; dd < DSL; ++dd) {
        qr[dd] = active && d0 + dd < HEAD_DIM ? TSR_LD(Q_TYPE, qp, d0 + dd) * scale : 0.0f;
        acc[dd] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int nan_score = 0;

    for (int j0 = 0; j0 < group_limit; j0 += BC) {
#if STAGE
        const int rows = min(BC, group_limit - j0);
        for (int e = lid; e < BC * HEAD_DIM; e += BR * DS) {
            const int r = e / HEAD_DIM, d = e - r * HEAD_DIM;
            Ks[e] = r < rows ? TSR_LD(K_TYPE, kb, (size_t)(j0 + r) * ksl + d) : 0.0f;
            Vs[e] = r < rows ? TSR_LD(V_TYPE, vb, (size_t)(j0 + r) * vsl + d) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
        float s[BC];
        float tile_max = -INFINITY;
        for (int jj = 0; jj < BC; ++jj) {
            float dot = 0.0f;
            for (int dd = 0; dd < DSL; ++dd)
                if (DS == 1 || d0 + dd < HEAD_DIM) dot = fma(qr[dd], K_AT(jj, d0 + dd), dot);
#if DS > 1
            partial[(lr * DS + slice) * BC + jj] = dot;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int jj = 0; jj < BC; ++jj) { // every slice of the row sums the same parts, in the same order
            float dot = 0.0f;
            for (int sl = 0; sl < DS; ++sl) dot += partial[(lr * DS + sl) * BC + jj];
#endif
            s[jj] = j0 + jj < limit ? dot : -INFINITY;
            tile_max = fmax(tile_max, s[jj]);
            nan_score |= isnan(s[jj]);
        }
#if DS > 1
        barrier(CLK_LOCAL_MEM_FENCE); // the parts are read before the next tile writes them
#endif
        if (tile_max > -INFINITY) { // this row has keys in the tile
            const float m_new = fmax(m, tile_max);
            const float correction = exp(m - m_new); // 0 on the first tile (m = -inf)
            l *= correction;
            for (int dd = 0; dd < DSL; ++dd) acc[dd] *= correction;
            for (int jj = 0; jj < BC; ++jj) {
                const float p = exp(s[jj] - m_new); // masked keys: exp(-inf) = 0
                l += p;
                for (int dd = 0; dd < DSL; ++dd)
                    if (DS == 1 || d0 + dd < HEAD_DIM) acc[dd] = fma(p, V_AT(jj, d0 + dd), acc[dd]);
            }
            m = m_new;
        }
#if STAGE
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
    }
    if (!active) return;
    if (nan_score) l = NAN;
    __global O_T *op = o + o_off + b * osb + h * osh + (size_t)i * osl;
    const float inv = l == 0.0f ? 0.0f : 1.0f / l; // all keys masked: zeros
    for (int dd = 0; dd < DSL && d0 + dd < HEAD_DIM; ++dd) TSR_ST(O_TYPE, acc[dd] * inv, op, d0 + dd);
    if (write_lse && slice == 0) lse[lse_off + (size_t)bh * Lq + i] = l == 0.0f ? -INFINITY : m + log(l);
}

// Row softmax of the unfused baseline over S = [b*h][Lq][Lk] (scale already applied by the
// GEMM), with the same mask; rows with no visible key become zeros. One work-item per row.
__kernel void softmax_rows(const int Lq, const int Lk, const int H, const int causal, __global float *S,
                           const ulong s_off, __global const int *kv_len, __global float *lse, const ulong lse_off,
                           const int write_lse) {
    const int i = (int)get_global_id(0), bh = (int)get_global_id(1);
    if (i >= Lq) return;
    const int b = bh / H;
    int limit = kv_len[b];
    if (causal) limit = min(limit, i + (Lk - Lq) + 1);
    __global float *row = S + s_off + ((size_t)bh * Lq + i) * Lk;
    float m = -INFINITY;
    for (int j = 0; j < limit; ++j) m = fmax(m, row[j]);
    float sum = 0.0f;
    for (int j = 0; j < limit; ++j) {
        const float p = exp(row[j] - m);
        row[j] = p;
        sum += p;
    }
    const float inv = sum == 0.0f ? 0.0f : 1.0f / sum; // NaN scores: sum NaN (exp(NaN)), the row NaN
    for (int j = 0; j < Lk; ++j) row[j] = j < limit ? row[j] * inv : 0.0f;
    if (write_lse) lse[lse_off + (size_t)bh * Lq + i] = sum == 0.0f ? -INFINITY : m + log(sum);
}

// ---------------------------------------------------------------- fast path (D % 16 == 0)
#ifndef RW
#define RW 1
#endif
TSR_DEFINE_ACTIVATIONS(float16, int16)
TSR_DEFINE_ACTIVATIONS(float, int)

// kt[(bh * D + d) * Lkp + j] = K[b, h, j, d] for j < Lk, 0 up to Lkp. global = (Lkp, D, B*H)
__kernel void transpose_k(const int Lk, const int Lkp, const int H, __global const K_T *k, const ulong k_off,
                          const ulong ksb, const ulong ksh, const ulong ksl, __global KP_T *kt) {
    const int j = (int)get_global_id(0), d = (int)get_global_id(1), bh = (int)get_global_id(2);
    const int b = bh / H, h = bh - b * H;
    TSR_ST(KP_TYPE, j < Lk ? TSR_LD(K_TYPE, k, k_off + b * ksb + h * ksh + (size_t)j * ksl + d) : 0.0f, kt,
           ((size_t)bh * HEAD_DIM + d) * Lkp + j);
}

#if HEAD_DIM % 16 == 0
// Horizontal max and sum of a float16 as a tree of shuffles, in registers. Oclgrind 21.10
// crashes on these shuffles (and mishandles .lo/.hi of float16), so there (the host defines
// TSR_OCLGRIND) the same reductions go lane by lane through private memory.
#if TSR_OCLGRIND
float hmax16(const float16 v) {
    float t[16];
    vstore16(v, 0, t);
    float m = t[0];
    for (int e = 1; e < 16; ++e) m = fmax(m, t[e]);
    return m;
}
float hsum16(const float16 v) {
    float t[16];
    vstore16(v, 0, t);
    float s = 0.0f;
    for (int e = 0; e < 16; ++e) s += t[e];
    return s;
}
#else
float hmax16(const float16 v) {
    const float8 m8 = fmax(shuffle(v, (uint8)(0, 1, 2, 3, 4, 5, 6, 7)), shuffle(v, (uint8)(8, 9, 10, 11, 12, 13, 14, 15)));
    const float4 m4 = fmax(shuffle(m8, (uint4)(0, 1, 2, 3)), shuffle(m8, (uint4)(4, 5, 6, 7)));
    return fmax(fmax(m4.x, m4.y), fmax(m4.z, m4.w));
}
float hsum16(const float16 v) {
    const float8 s8 = shuffle(v, (uint8)(0, 1, 2, 3, 4, 5, 6, 7)) + shuffle(v, (uint8)(8, 9, 10, 11, 12, 13, 14, 15));
    const float4 s4 = shuffle(s8, (uint4)(0, 1, 2, 3)) + shuffle(s8, (uint4)(4, 5, 6, 7));
    return (s4.x + s4.y) + (s4.z + s4.w);
}
#endif

__kernel void attention_vec(const int Lq, const int Lk, const int Lkp, const int H, const float scale,
                            const int causal, __global const Q_T *q, const ulong q_off, const ulong qsb,
                            const ulong qsh, const ulong qsl, __global const KP_T *kt, __global const V_T *v,
                            const ulong v_off, const ulong vsb, const ulong vsh, const ulong vsl, __global O_T *o,
                            const ulong o_off, const ulong osb, const ulong osh, const ulong osl,
                            __global const int *kv_len, __global float *lse, const ulong lse_off,
                            const int write_lse) {
    const int r0 = (int)get_global_id(0) * RW, bh = (int)get_global_id(1), b = bh / H, h = bh - b * H;
    if (r0 >= Lq) return;
    const int kv_end = kv_len[b], shift = Lk - Lq;
    int limit[RW], group_limit = 0;
    float qr[RW][HEAD_DIM], m[RW], l[RW], pbuf[RW][16];
    int nan_score[RW];
    float16 acc[RW][HEAD_DIM / 16];
    _Pragma("unroll") for (int r = 0; r < RW; ++r) {
        const int i = r0 + r;
        limit[r] = i < Lq ? kv_end : 0;
        if (causal) limit[r] = min(limit[r], i + shift + 1);
        group_limit = max(group_limit, limit[r]);
        const __global Q_T *qp = q + q_off + b * qsb + h * qsh + (size_t)min(i, Lq - 1) * qsl;
        for (int d = 0; d < HEAD_DIM; ++d) qr[r][d] = TSR_LD(Q_TYPE, qp, d) * scale;
        _Pragma("unroll") for (int dv = 0; dv < HEAD_DIM / 16; ++dv) acc[r][dv] = (float16)(0.0f);
        m[r] = -INFINITY;
        l[r] = 0.0f;
        nan_score[r] = 0;
    }
    const __global KP_T *ktb = kt + (size_t)bh * HEAD_DIM * Lkp;
    const __global V_T *vb = v + v_off + b * vsb + h * vsh;
    const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int j0 = 0; j0 < group_limit; j0 += 16) {
        float16 s[RW];
        _Pragma("unroll") for (int r = 0; r < RW; ++r) s[r] = (float16)(0.0f);
        for (int d = 0; d < HEAD_DIM; ++d) {
            const float16 kv = TSR_VLD(KP_TYPE, 16, ktb + (size_t)d * Lkp + j0);
            _Pragma("unroll") for (int r = 0; r < RW; ++r) s[r] = fma((float16)(qr[r][d]), kv, s[r]);
        }
        _Pragma("unroll") for (int r = 0; r < RW; ++r) {
            const int16 masked = lane + j0 >= (int16)(limit[r]);
            const float16 sr = select(s[r], (float16)(-INFINITY), masked);
            nan_score[r] |= any(isnan(sr));
            vstore16(sr, 0, pbuf[r]);
            const float tile_max = hmax16(sr);
            if (tile_max > -INFINITY) {
                const float m_new = fmax(m[r], tile_max);
                if (m_new > m[r]) { /* rescale only when the maximum grows: rarer as rows go on */
                    const float correction = exp(m[r] - m_new);
                    l[r] *= correction;
                    _Pragma("unroll") for (int dv = 0; dv < HEAD_DIM / 16; ++dv) acc[r][dv] *= correction;
                }
                const float16 p = select(tsr_exp_float16(sr - m_new), (float16)(0.0f), masked);
                vstore16(p, 0, pbuf[r]);
                l[r] += hsum16(p);
                m[r] = m_new;
            } else {
                vstore16((float16)(0.0f), 0, pbuf[r]);
            }
        }
        const int keys = min(16, group_limit - j0);
        for (int jj = 0; jj < keys; ++jj) {
            const __global V_T *vr = vb + (size_t)(j0 + jj) * vsl;
            _Pragma("unroll") for (int dv = 0; dv < HEAD_DIM / 16; ++dv) {
                const float16 vv = TSR_VLD(V_TYPE, 16, vr + dv * 16);
                _Pragma("unroll") for (int r = 0; r < RW; ++r) acc[r][dv] = fma((float16)(pbuf[r][jj]), vv, acc[r][dv]);
            }
        }
    }
    _Pragma("unroll") for (int r = 0; r < RW; ++r) {
        const int i = r0 + r;
        if (i >= Lq) break;
        __global O_T *op = o + o_off + b * osb + h * osh + (size_t)i * osl;
        if (nan_score[r]) l[r] = NAN;
        const float inv = l[r] == 0.0f ? 0.0f : 1.0f / l[r];
        _Pragma("unroll") for (int dv = 0; dv < HEAD_DIM / 16; ++dv)
            TSR_VST(O_TYPE, 16, acc[r][dv] * inv, op + dv * 16);
        if (write_lse) lse[lse_off + (size_t)bh * Lq + i] = l[r] == 0.0f ? -INFINITY : m[r] + log(l[r]);
    }
}
#endif

// ---------------------------------------------------------------- blocked micro-kernels (VEC=2)
// The CPU path of a GEMM: a work-item owns BR groups of RW query rows and walks the keys in
// blocks of BC (16..64) keys. K comes packed (`pack_k`): for each block of BC keys a contiguous
// panel, [D][16] per chunk of 16 keys, so the scores read it in order (the transposed copy of
// `transpose_k` puts its D rows Lkp floats apart, all in the same L1 sets at L = 2048). Per
// block and row group:
//   scores: RW rows x 16 keys at a time, RW float16 accumulators fed by one panel load and RW
//           broadcasts of Q per d (a register-blocked GEMM micro-kernel);
//   softmax: the block's maximum per row, one rescale factor per row and block, the vector exp
//           over the whole block; the mask only on a block that crosses a row's last key (the
//           causal diagonal, the sequence's end), blocks past every row's last key skipped;
//   P V:     per float16 slice of D, RW accumulators rescaled once, then every key of the block
//           as a broadcast of P times one row of V (the same micro-kernel, keys as the k loop).
// Per block, first the scores and softmax of all BR groups (the K panel stays in L1), then P V
// of all groups (the block's rows of V stay in L1; the two phases together would not fit):
// K and V stream from memory once per BR x RW rows instead of once per RW rows. Compiled only
// for VEC=2 (the host defines VEC_BLK).
#if HEAD_DIM % 16 == 0 && defined(VEC_BLK)
// K packed per block of BC keys and, within it, per chunk of 16 keys: chunk c of block blk is
// [D][16] at kp + (bh * nblk + blk) * D * BC + c * D * 16 (nblk = Lkp / BC), 0 past Lk, so the
// scores of a chunk read 4 KiB (D = 64) in order. A work-item takes 16 consecutive elements of
// one key's row (one vector load and conversion: PoCL's scalar vload_half is a software routine)
// and scatters them to their 16 rows of the panel. global = (Lkp, D / 16, B*H)
__kernel void pack_k(const int Lk, const int Lkp, const int H, __global const K_T *k, const ulong k_off,
                     const ulong ksb, const ulong ksh, const ulong ksl, __global KP_T *kp) {
    const int j = (int)get_global_id(0), d0 = (int)get_global_id(1) * 16, bh = (int)get_global_id(2);
    const int b = bh / H, h = bh - b * H, blk = j / BC, c = (j - blk * BC) / 16;
    float t[16];
    vstore16(j < Lk ? TSR_VLD(K_TYPE, 16, k + k_off + b * ksb + h * ksh + (size_t)j * ksl + d0) : (float16)(0.0f), 0, t);
    __global KP_T *dst = kp + ((size_t)bh * (Lkp / BC) + blk) * HEAD_DIM * BC + (c * HEAD_DIM + d0) * 16 + (j & 15);
    _Pragma("unroll") for (int e = 0; e < 16; ++e) TSR_ST(KP_TYPE, t[e], dst, e * 16);
}

// V_PACKED (the host's, for a 16-bit V when K is packed): V widened once into fp32 rows, vp[bh][j][d]
// (bh = b H + h), which attention_blk then reads as an fp32 V. Widening in attention_blk instead
// converts every block of V once per work-item that reads it (Lq / (RW BR) times a head: 64 at L =
// 4096 under RW = 8, BR = 8); this converts it once a call. global = (Lk, D / 16, B*H)
#if defined(V_PACKED) && V_TYPE != 0
__kernel void pack_v(const int Lk, const int H, __global const V_T *v, const ulong v_off, const ulong vsb,
                     const ulong vsh, const ulong vsl, __global float *vp) {
    const int j = (int)get_global_id(0), d0 = (int)get_global_id(1) * 16, bh = (int)get_global_id(2);
    const int b = bh / H, h = bh - b * H;
    vstore16(TSR_VLD(V_TYPE, 16, v + v_off + b * vsb + h * vsh + (size_t)j * vsl + d0), 0,
             vp + ((size_t)bh * Lk + j) * HEAD_DIM + d0);
}
#define VB_TYPE 0
#else
#define VB_TYPE V_TYPE
#endif
#define VB_T TSR_ELT(VB_TYPE)

// max and the clamp of 2^x as compare-and-select: fmax's NaN rules cost two more instructions
// per vector, and NaN cannot reach a row's result here (masked keys are selected away below).
#define MAX16(a, b) select((a), (b), (b) > (a))
// 2^t for t <= 0 as tsr_exp2 (t below -125 gives 2^-125, which no sum of >= 1 can see).
float16 blk_exp2(float16 t) {
    t = select(t, (float16)(-125.0f), t < (float16)(-125.0f));
    const float16 k_shifted = t + 12582912.0f;
    const float16 f = t - (k_shifted - 12582912.0f);
    float16 q = fma(f, (float16)(0.0013381302537320797f), (float16)(0.009666368515385448f));
    q = fma(f, q, (float16)(0.05550381013796457f));
    q = fma(f, q, (float16)(0.2402234903802036f));
    q = fma(f, q, (float16)(0.6931471805599453f));
    return tsr_scale2_float16(fma(f, q, (float16)(1.0f)), k_shifted);
}

// BLK_W: float16 columns per micro-kernel step. With AVX-512's 32 vector registers (PoCL's CPU
// device defines __AVX512F__ there) 2: RW rows x 2 columns of accumulators, so a broadcast feeds
// two FMAs, a step issues 2 + RW loads per 2 RW FMAs instead of 1 + RW per RW, and 2 RW FMA chains
// hide the FMA latency (RW = 8: 16 accumulators + 2 loads of 32 registers); 1.08-1.09x on a 2-core
// Zen 5 at L = 2048 (docs/attention.md). Elsewhere 1 (AVX2: a float16 takes two of its 16
// registers already). -DBLK_W= forces it.
#ifndef BLK_W
#if defined(__AVX512F__) && defined(__x86_64__)
#define BLK_W 2
#else
#define BLK_W 1
#endif
#endif
#define NKC (BC / 16)       // float16 chunks of keys in a block
#define NDV (HEAD_DIM / 16) // float16 slices of a row of V and O
// BLK_DIRECT (the host defines it for keys that fit one block, Lk <= BC): no pack_k launch; each
// work-item reads K in place (its arguments replace kpk) and packs the one panel into private
// memory, laid out as pack_k's, before its rows' scores. At MiniLM's 16 tokens that is 6 of a
// forward's 51 launches (a launch's hand-off costs more than 16 keys of K read per item).
#ifdef BLK_DIRECT
#define BLK_K_ARGS __global const K_T *k, const ulong k_off, const ulong ksb, const ulong ksh, const ulong ksl
#define PANEL_PTR const float *
#define PANEL_LD(p) vload16(0, (p))
#else
#define BLK_K_ARGS __global const KP_T *kpk
#define PANEL_PTR const __global KP_T *
#define PANEL_LD(p) TSR_VLD(KP_TYPE, 16, (p))
#endif
__kernel void attention_blk(const int Lq, const int Lk, const int Lkp, const int H, const float scale,
                            const int causal, __global const Q_T *q, const ulong q_off, const ulong qsb,
                            const ulong qsh, const ulong qsl, BLK_K_ARGS, __global const VB_T *v,
                            const ulong v_off, const ulong vsb, const ulong vsh, const ulong vsl, __global O_T *o,
                            const ulong o_off, const ulong osb, const ulong osh, const ulong osl,
                            __global const int *kv_len, __global float *lse, const ulong lse_off,
                            const int write_lse) {
    const int r0 = (int)get_global_id(0) * (RW * BR), bh = (int)get_global_id(1), b = bh / H, h = bh - b * H;
    if (r0 >= Lq) return;
    const int kv_end = kv_len[b], shift = Lk - Lq;
    // Scores in natural units (scale alone in Q: with integer Q K^T and a power-of-two scale
    // they are exact, as in the other forms); the softmax takes 2^((s - m) log2 e), so the
    // difference is exact before the one multiply, and large logits lose no digits.
    // Per row: its last key + 1 (limit); per group: the fewest (lo) and the most (hi) keys a row sees.
    int limit[BR][RW], lo[BR], hi[BR], all_hi = 0;
    float qr[BR][RW][HEAD_DIM], m[BR][RW], l[BR][RW];
    float16 acc[BR][RW][NDV];
    for (int g = 0; g < BR; ++g) {
        lo[g] = INT_MAX;
        hi[g] = 0;
        _Pragma("unroll") for (int r = 0; r < RW; ++r) {
            const int i = r0 + g * RW + r;
            int lim = i < Lq ? kv_end : 0;
            if (causal) lim = max(0, min(lim, i + shift + 1));
            limit[g][r] = lim;
            lo[g] = min(lo[g], lim);
            hi[g] = max(hi[g], lim);
            const __global Q_T *qp = q + q_off + b * qsb + h * qsh + (size_t)min(i, Lq - 1) * qsl;
            for (int d = 0; d < HEAD_DIM; d += 16) vstore16(TSR_VLD(Q_TYPE, 16, qp + d) * scale, 0, qr[g][r] + d);
            for (int dv = 0; dv < NDV; ++dv) acc[g][r][dv] = (float16)(0.0f);
            m[g][r] = -INFINITY;
            l[g][r] = 0.0f;
        }
        all_hi = max(all_hi, hi[g]);
    }
    const __global VB_T *vb = v + v_off + b * vsb + h * vsh;
    const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // A block's scores, then its P, as whole float16 vectors: a float array took each vstore16 as
    // three stores (16-, 16- and 32-byte pieces); P V reads single elements through a float view.
    float16 s[BR][RW][NKC];
    float corr[BR][RW];
    // A 16-bit V read here (the one-block form, BLK_DIRECT; with packed keys the host widens V
    // once by pack_v, V_PACKED, and it is read as fp32: VB_TYPE 0): each block's rows widened once
    // into vw (fp32, BC x D, at most 16 KB: larger blocks keep widening at every load) instead of
    // once per group of rows at every use in the P V loops, BR times a block. Session 29, when the
    // packed-key form still widened here: 1x8x2048x64 f16 0.89-0.93 -> 0.96-1.02 of the fp32 rate
    // on the 2-core Cascade Lake Xeon.
#if VB_TYPE != 0 && BC * HEAD_DIM <= 4096
#define BLK_VW 1
    float vw[BC * HEAD_DIM];
#define BLK_V(jj, d) vload16(0, vw + (jj) * HEAD_DIM + (d))
#else
#define BLK_V(jj, d) TSR_VLD(VB_TYPE, 16, vr0 + (size_t)(jj) * vsl + (d))
#endif
#ifdef BLK_DIRECT
    // the one block's panel: chunk c of 16 keys is [D][16] at kpan + c * D * 16, 0 past Lk
    float kpan[BC * HEAD_DIM];
    for (int j = 0; j < BC; ++j) {
        const __global K_T *kr = k + k_off + b * ksb + h * ksh + (size_t)min(j, max(Lk - 1, 0)) * ksl;
        float *dst = kpan + (j / 16) * HEAD_DIM * 16 + (j & 15);
        for (int d0 = 0; d0 < HEAD_DIM; d0 += 16) {
            float t[16];
            vstore16(j < Lk ? TSR_VLD(K_TYPE, 16, kr + d0) : (float16)(0.0f), 0, t);
            _Pragma("unroll") for (int e = 0; e < 16; ++e) dst[(d0 + e) * 16] = t[e];
        }
    }
#endif
    for (int j0 = 0; j0 < all_hi; j0 += BC) {
#ifdef BLK_DIRECT
        PANEL_PTR panel = kpan; // one block: j0 = 0
#else
        PANEL_PTR panel = kpk + ((size_t)bh * (Lkp / BC) + j0 / BC) * HEAD_DIM * BC;
#endif
        for (int g = 0; g < BR; ++g) {
            if (j0 >= hi[g]) continue; // no row of this group sees a key of the block (causal)
            int c = 0;
#if BLK_W == 2
            // two chunks of keys at a time: 2 RW accumulators, each broadcast of Q feeds two FMAs
            // (the chunk past hi[g], if any, is zeros in the panel and masked below)
            for (; c + 1 < NKC; c += 2) {
                if (j0 + c * 16 >= hi[g]) break;
                float16 a[RW], a2[RW];
                _Pragma("unroll") for (int r = 0; r < RW; ++r) a[r] = a2[r] = (float16)(0.0f);
                PANEL_PTR kc = panel + c * 16 * HEAD_DIM;
                for (int d = 0; d < HEAD_DIM; ++d) {
                    const float16 kv = PANEL_LD(kc + d * 16);
                    const float16 kv2 = PANEL_LD(kc + (HEAD_DIM + d) * 16);
                    _Pragma("unroll") for (int r = 0; r < RW; ++r) {
                        const float16 qb = (float16)(qr[g][r][d]);
                        a[r] = fma(qb, kv, a[r]);
                        a2[r] = fma(qb, kv2, a2[r]);
                    }
                }
                _Pragma("unroll") for (int r = 0; r < RW; ++r) {
                    s[g][r][c] = a[r];
                    s[g][r][c + 1] = a2[r];
                }
            }
#endif
            for (; c < NKC; ++c) {
                if (j0 + c * 16 >= hi[g]) break; // masked below
                float16 a[RW];
                _Pragma("unroll") for (int r = 0; r < RW; ++r) a[r] = (float16)(0.0f);
                PANEL_PTR kc = panel + c * 16 * HEAD_DIM;
                for (int d = 0; d < HEAD_DIM; ++d) {
                    const float16 kv = PANEL_LD(kc + d * 16);
                    _Pragma("unroll") for (int r = 0; r < RW; ++r) a[r] = fma((float16)(qr[g][r][d]), kv, a[r]);
                }
                _Pragma("unroll") for (int r = 0; r < RW; ++r) s[g][r][c] = a[r];
            }
            const bool edge = j0 + BC > lo[g]; // some row of the group stops inside the block
            // The softmax with the rows as the inner loop (both unrolled): each step's RW rows are
            // independent chains (the 2^x polynomial is a dozen dependent operations per vector),
            // so they interleave instead of running one row's chain after another's.
            float16 mx[RW];
            _Pragma("unroll") for (int r = 0; r < RW; ++r) mx[r] = (float16)(-INFINITY);
            if (edge) {
                _Pragma("unroll") for (int c = 0; c < NKC; ++c) {
                    const int16 key = lane + (j0 + c * 16);
                    _Pragma("unroll") for (int r = 0; r < RW; ++r) {
                        const float16 sc = select(s[g][r][c], (float16)(-INFINITY), key >= (int16)(limit[g][r]));
                        s[g][r][c] = sc;
                        mx[r] = MAX16(mx[r], sc);
                    }
                }
            } else {
                _Pragma("unroll") for (int c = 0; c < NKC; ++c)
                    _Pragma("unroll") for (int r = 0; r < RW; ++r) mx[r] = MAX16(mx[r], s[g][r][c]);
            }
            float mn[RW];
            float16 sum[RW];
            _Pragma("unroll") for (int r = 0; r < RW; ++r) {
                const float m_old = m[g][r], m_new = fmax(m_old, hmax16(mx[r]));
                // 2^((m_old - m_new) log2 e) with the softmax's own polynomial, every row and block
                // without a branch: 1 where the maximum stays (or is NaN), 2^-125 on a row's first
                // keys (m_old = -Inf), which multiplies a zero sum and zero accumulators.
                corr[g][r] = tsr_exp2_float(m_new > m_old ? (m_old - m_new) * M_LOG2E_F : 0.0f);
                mn[r] = m_new;
                sum[r] = (float16)(0.0f);
            }
            _Pragma("unroll") for (int c = 0; c < NKC; ++c) {
                const int16 key = lane + (j0 + c * 16);
                _Pragma("unroll") for (int r = 0; r < RW; ++r) {
                    float16 p = blk_exp2((s[g][r][c] - mn[r]) * M_LOG2E_F);
                    if (edge) p = select(p, (float16)(0.0f), key >= (int16)(limit[g][r]));
                    s[g][r][c] = p;
                    sum[r] += p;
                }
            }
            _Pragma("unroll") for (int r = 0; r < RW; ++r) {
                l[g][r] = l[g][r] * corr[g][r] + hsum16(sum[r]);
                m[g][r] = mn[r];
            }
        }
        // Then P V for every group, while the block's rows of V stay in the cache.
#ifdef BLK_VW
        { // the block's rows of V that any group reads, widened once for all BR groups
            const int keys_all = min(BC, all_hi - j0);
            const __global VB_T *vr = vb + (size_t)j0 * vsl;
            for (int jj = 0; jj < keys_all; ++jj)
                for (int d = 0; d < HEAD_DIM; d += 16)
                    vstore16(TSR_VLD(VB_TYPE, 16, vr + (size_t)jj * vsl + d), 0, vw + jj * HEAD_DIM + d);
        }
#endif
        for (int g = 0; g < BR; ++g) {
            if (j0 >= hi[g]) continue;
            // V rows past the group's last key are never read (they may lie past the buffer or
            // hold NaN: 0 * NaN would reach O).
            const int keys = min(BC, hi[g] - j0);
#ifndef BLK_VW
            const __global VB_T *vr0 = vb + (size_t)j0 * vsl;
#endif
            int dv = 0;
#if BLK_W == 2
            for (; dv + 1 < NDV; dv += 2) { // two slices of D: each broadcast of P feeds two FMAs
                float16 a[RW], a2[RW];
                _Pragma("unroll") for (int r = 0; r < RW; ++r) {
                    a[r] = acc[g][r][dv] * corr[g][r];
                    a2[r] = acc[g][r][dv + 1] * corr[g][r];
                }
                for (int jj = 0; jj < keys; ++jj) {
                    const float16 vv = BLK_V(jj, dv * 16);
                    const float16 vv2 = BLK_V(jj, dv * 16 + 16);
                    _Pragma("unroll") for (int r = 0; r < RW; ++r) {
                        const float16 pb = (float16)(((const float *)s[g][r])[jj]);
                        a[r] = fma(pb, vv, a[r]);
                        a2[r] = fma(pb, vv2, a2[r]);
                    }
                }
                _Pragma("unroll") for (int r = 0; r < RW; ++r) {
                    acc[g][r][dv] = a[r];
                    acc[g][r][dv + 1] = a2[r];
                }
            }
#endif
            for (; dv < NDV; ++dv) {
                float16 a[RW];
                _Pragma("unroll") for (int r = 0; r < RW; ++r) a[r] = acc[g][r][dv] * corr[g][r];
                for (int jj = 0; jj < keys; ++jj) {
                    const float16 vv = BLK_V(jj, dv * 16);
                    _Pragma("unroll") for (int r = 0; r < RW; ++r) a[r] = fma((float16)(((const float *)s[g][r])[jj]), vv, a[r]);
                }
                _Pragma("unroll") for (int r = 0; r < RW; ++r) acc[g][r][dv] = a[r];
            }
        }
    }
    for (int g = 0; g < BR; ++g)
        _Pragma("unroll") for (int r = 0; r < RW; ++r) {
            const int i = r0 + g * RW + r;
            if (i >= Lq) break;
            __global O_T *op = o + o_off + b * osb + h * osh + (size_t)i * osl;
            // a NaN score reached l through blk_exp2 (NaN in, NaN out): 1/l and log(l) carry it
            const float inv = l[g][r] == 0.0f ? 0.0f : 1.0f / l[g][r];
            for (int dv = 0; dv < NDV; ++dv) TSR_VST(O_TYPE, 16, acc[g][r][dv] * inv, op + dv * 16);
            if (write_lse)
                lse[lse_off + (size_t)bh * Lq + i] = l[g][r] == 0.0f ? -INFINITY : m[g][r] + log(l[g][r]);
        }
}
#endif
