// Small-M SGEMM (OpenCL C 1.2): the "smallm" implementation of the GEMM op (KERNEL=2), for
// C = act(scale * alpha * opA(A) opB(B) + beta * C + bias + residual) with few rows (M up to a
// few dozen), any N and K. Same canonical form, arguments and epilogue as gemm.cl's `gemm`, but
// it reads A and B in place, in their own layout and storage type: no pack kernels, so a small
// call is one launch. A small A stays in L1 across every column tile.
//
// Geometry, from -D defines (the host launches ceil(M/MWI) x ceil(N/NWI) x batch one-item groups):
//   MWI        rows of C per work-item
//   VW, NVW    a work-item owns MWI x NWI of C, NWI = VW * NVW
//   KU         unroll of the k loop (row-major B)
//   TA, TB     transpositions, A_TYPE, B_TYPE, C_TYPE storage types (as gemm.cl)
// Two inner forms:
//   B row-major (or A and B both transposed): vectors along N, B's rows loaded VW at a time, A
//     broadcast, MWI x NVW floatv accumulators.
//   B transposed, A row-major (nn.Linear's weight, C = A W^T): both operands are contiguous
//     along K, so vectors run along K: blocks of RB rows x CB columns of C, each an RB x CB
//     set of floatv partial sums over K, reduced across lanes at the end; the block's values go
//     to a row buffer that the vector epilogue stores. At VW 8 and 16 a block is VW vectors
//     (RB up to VW rows, CB = VW / RB columns), reduced together in log2(VW) steps of adjacent
//     lane pairs; with MWI = VW an item streams each of its NWI rows of B once, in order (while
//     its RB rows of A fit L1, RB x K <= 8192 floats; past that, 4-row blocks).
// Edges: rows and columns past M (N) are clamped (duplicates never stored), the K tail is
// scalar, stores are guarded.
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
// SM_NORM 1: a LayerNorm over each row of C closes the epilogue (fp32 C, the vectors-along-N
// form; see sm_norm_rows).
#ifndef SM_NORM
#define SM_NORM 0
#endif

#define NWI (VW * NVW)
#if SM_BSTRIP && (TB || TA || VW == 1)
#error "SM_BSTRIP (B in strips of NWI columns) is read by the pointer loop only: TA 0, TB 0, VW > 1"
#endif

#include "vector.cl"
#include "epilogue.cl"

#define A_ELT TSR_ELT(A_TYPE)
#define B_ELT TSR_ELT(B_TYPE)
#define C_ELT TSR_ELT(C_TYPE)
#if VW == 1
#define SM_VLOAD(T, p) TSR_LD(T, p, 0)
#define SM_VSTORE(T, v, p) TSR_ST(T, v, p, 0)
#else
#define SM_VLOAD(T, p) TSR_VLD(T, VW, p)
#define SM_VSTORE(T, v, p) TSR_VST(T, VW, v, p)
#endif

// The sum of a floatv's lanes.
#if VW == 1
#define SM_HSUM(v) (v)
#elif VW == 2
#define SM_HSUM(v) ((v).s0 + (v).s1)
#elif VW == 4
#define SM_HSUM(v) (((v).s0 + (v).s1) + ((v).s2 + (v).s3))
#elif VW == 8
#define SM_HSUM(v) sm_hsum4((v).lo + (v).hi)
#else
#define SM_HSUM(v) sm_hsum4(((v).lo.lo + (v).lo.hi) + ((v).hi.lo + (v).hi.hi))
#endif
#if VW >= 8
TSR_INLINE float sm_hsum4(const float4 v) { return (v.s0 + v.s1) + (v.s2 + v.s3); }
#endif

// act(scale * alpha * t + beta * C + bias + residual) for one row of the work-item's tile: t[n]
// is C(i, j0 + n) before the epilogue.
TSR_INLINE void sm_store_row(const float *t, const int i, const int j0, const int N, const float alpha,
                             const float beta, __global C_ELT *C, const size_t cidx, const __global float *bias_row,
                             const __global float *bias_col, const int bias_axis, const int act,
                             const __global float *scale_row, const __global float *scale_col, const int scale_axis,
                             const __global uchar *res, const ulong res_off, const int res_type) {
    __global C_ELT *cp = C + cidx;
#define SM_PRE_V(v)                                                                                \
    floatv r = alpha * VLOAD(t + (v) * VW);                                                        \
    if (scale_axis == 1) r *= VLOAD(scale_col + (v) * VW);                                         \
    else if (scale_axis == 2) r *= scale_row[i];                                                   \
    if (beta != 0.0f) r = fma((floatv)(beta), SM_VLOAD(C_TYPE, cp + (v) * VW), r);                 \
    if (bias_axis == 1) r += VLOAD(bias_col + (v) * VW);                                           \
    else if (bias_axis == 2) r += bias_row[i];
    if (j0 + NWI <= N) {
        // The residual's and the GELUs' code once, in a loop, not in every unrolled vector
        // (compile time; see gemm.cl's store).
        if (res_type == TSR_RES_NONE && (act == TSR_ACT_NONE || act == TSR_ACT_RELU)) {
            _Pragma("unroll") for (int v = 0; v < NVW; ++v) {
                SM_PRE_V(v)
                if (act == TSR_ACT_RELU) r = select(r, (floatv)(0.0f), r < 0.0f); // NaN kept
                SM_VSTORE(C_TYPE, r, cp + v * VW);
            }
        } else {
#pragma unroll 1
            for (int v = 0; v < NVW; ++v) {
                SM_PRE_V(v)
                r = tsr_epi_finish_v(r, res, res_type, res_off + cidx + v * VW, act);
                SM_VSTORE(C_TYPE, r, cp + v * VW);
            }
        }
#undef SM_PRE_V
    } else {
        for (int n = 0; n < NWI && j0 + n < N; ++n) {
            float r = alpha * t[n];
            if (scale_axis == 1) r *= scale_col[n];
            else if (scale_axis == 2) r *= scale_row[i];
            if (beta != 0.0f) r = fma(beta, TSR_LD(C_TYPE, cp, n), r);
            if (bias_axis == 1) r += bias_col[n];
            else if (bias_axis == 2) r += bias_row[i];
            r = tsr_epi_finish(r, res, res_type, res_off + cidx + n, act);
            TSR_ST(C_TYPE, r, cp, n);
        }
    }
}

#if SM_NORM
#if (TB && !TA) || C_TYPE != 0
#error "SM_NORM: an fp32 C and the vectors-along-N form only (the host launches it for no other)"
#endif
// The LayerNorm of the epilogue: the items of a row tile store their columns of s (the rest of
// the epilogue applied) to C as usual, then count themselves in norm_count (one int per row tile
// and batch entry, zero between launches); the last of them to finish normalises the tile's rows
// in place and sets the count back to zero. No barrier, so the one-item groups and the K loop stay
// what they are without it. The host takes this form only on CPU devices that compile kernels to
// native code (the stores of the other items are visible to the last one after its atomic: x86's
// locked read-modify-write orders them); elsewhere it launches a LayerNorm after the GEMM.
//
// Per row, as cl/layernorm.cl with one item a row: the sum of s and its largest |s|, then s scaled
// by the power of two 2^k that brings the largest |s| into [0.5, 1) (exact), the two-pass biased
// variance of s 2^k, eps 4^k, and y = (s 2^k - mean) / sqrt(var + eps 4^k) * gamma + beta.

// 2^k for k in [-126, 127], exactly.
TSR_INLINE float sm_pow2(const int k) { return as_float((uint)(k + 127) << 23); }

#if VW == 1
#define SM_HMAX(v) (v)
#else
// The largest of a floatv's lanes (NaN lanes passed over, as fmax does).
TSR_INLINE float sm_hmax(const floatv v) {
    float l[VW];
    VSTORE(v, l);
    float m = l[0];
    _Pragma("unroll") for (int e = 1; e < VW; ++e) m = fmax(m, l[e]);
    return m;
}
#define SM_HMAX(v) sm_hmax(v)
#endif

// LayerNorm in place over `rows` rows of `cols` fp32 values at c, row stride ldc.
TSR_INLINE void sm_norm_rows(__global float *c, const int rows, const int cols, const int ldc,
                             const __global float *gam, const __global float *bet, const float eps) {
    const int vectors = cols / VW, tail = vectors * VW;
#pragma unroll 1
    for (int r = 0; r < rows; ++r) {
        __global float *s = c + (size_t)r * ldc;
        floatv acc = (floatv)(0.0f), big = (floatv)(0.0f);
        float acc1 = 0.0f, big1 = 0.0f;
        for (int v = 0; v < vectors; ++v) {
            const floatv sv = VLOAD(s + v * VW);
            acc += sv;
            big = fmax(big, fabs(sv));
        }
        for (int i = tail; i < cols; ++i) {
            acc1 += s[i];
            big1 = fmax(big1, fabs(s[i]));
        }
        float sum = SM_HSUM(acc) + acc1;
        const float largest = fmax(SM_HMAX(big), big1);
        // the scale 2^k, as cl/layernorm.cl: largest 2^k in [0.5, 1) (0 or below FLT_MIN: k = 126;
        // Inf or NaN: 0), capped so that eps 4^k < 2^125, within [-126, 126]; from bits
        const int m_exp = (int)(as_uint(largest) >> 23), eps_exp = (int)((as_uint(eps) >> 23) & 0xffu);
        const int k = clamp(min(m_exp == 255 ? 0 : 126 - m_exp, (251 - eps_exp) / 2), -126, 126);
        const float scale = sm_pow2(k);
        if (!isfinite(sum) && isfinite(largest)) { // the plain sum overflowed: sum s 2^k again
            acc = (floatv)(0.0f);
            acc1 = 0.0f;
            for (int v = 0; v < vectors; ++v) acc += VLOAD(s + v * VW) * scale;
            for (int i = tail; i < cols; ++i) acc1 += s[i] * scale;
            sum = SM_HSUM(acc) + acc1;
        } else {
            sum *= scale;
        }
        const float mean = sum / (float)cols; // of s 2^k, as are the variance and sd below
        acc = (floatv)(0.0f);
        acc1 = 0.0f;
        for (int v = 0; v < vectors; ++v) {
            const floatv d = VLOAD(s + v * VW) * scale - mean;
            acc = fma(d, d, acc);
        }
        for (int i = tail; i < cols; ++i) {
            const float d = s[i] * scale - mean;
            acc1 = fma(d, d, acc1);
        }
        const float var_eps = (SM_HSUM(acc) + acc1) / (float)cols + eps * scale * scale;
        const float inv_sd = var_eps > 0.0f ? rsqrt(var_eps) : 0.0f;
        for (int v = 0; v < vectors; ++v)
            VSTORE(fma((VLOAD(s + v * VW) * scale - mean) * inv_sd, VLOAD(gam + v * VW), VLOAD(bet + v * VW)),
                   s + v * VW);
        for (int i = tail; i < cols; ++i) s[i] = fma((s[i] * scale - mean) * inv_sd, gam[i], bet[i]);
    }
}
#endif

#if TB && !TA
// Blocks of the vectors-along-K form: RB rows x CB columns of C.
#if VW == 16 || VW == 8
// VW partial-sum vectors at a time (16 of AVX-512's 32 registers at VW 16), reduced together
// (SM_REDUCE): RB the largest power of two up to VW dividing MWI, CB = VW / RB. With MWI = VW
// a block is one column (CB 1): the item streams its rows of B one after the other, each once,
// a sequential read of its NWI x K slab of the weights.
#define SM_JOINT 1
#if VW == 16 && MWI % 16 == 0
#define RB 16
#elif MWI % 8 == 0
#define RB 8
#elif MWI % 4 == 0
#define RB 4
#elif MWI % 2 == 0
#define RB 2
#else
#define RB 1
#endif
#define CB (VW / RB)
// Halves the lanes of two vectors of partial sums: adjacent lanes summed, a's then b's. Applied
// log2(VW) times to VW vectors, lane l of the result is the sum of vector l's lanes.
#define SM_PAIR(a, b) ((floatv)((a).even + (a).odd, (b).even + (b).odd))
TSR_INLINE floatv sm_reduce(floatv *s) {
    _Pragma("unroll") for (int w = VW / 2; w >= 1; w /= 2)
        _Pragma("unroll") for (int i = 0; i < w; ++i) s[i] = SM_PAIR(s[2 * i], s[2 * i + 1]);
    return s[0];
}
#else
#define SM_JOINT 0
#if MWI % 4 == 0
#define RB 4
#elif MWI % 2 == 0
#define RB 2
#else
#define RB 1
#endif
#if NWI >= 4
#define CB 4
#else
#define CB NWI
#endif
#endif
#endif

__kernel void gemm(const int M, const int N, const int K, const int KP, const float alpha, const float beta,
                   __global const A_ELT *A, const ulong a_off, const int lda, const ulong a_stride,
                   __global const B_ELT *B, const ulong b_off, const int ldb, const ulong b_stride,
                   __global C_ELT *C, const ulong c_off, const int ldc, const ulong c_stride,
                   __global const float *bias, const ulong bias_off, const ulong bias_stride, const int bias_axis,
                   const int act, __global const float *scale, const ulong scale_off, const ulong scale_stride,
                   const int scale_axis, __global const uchar *res, const ulong res_off, const int res_type
#if SM_NORM
                   , volatile __global int *norm_count, __global const float *norm_g, const ulong norm_g_off,
                   __global const float *norm_b, const ulong norm_b_off, const float norm_eps
#endif
                   ) {
    (void)KP;
    const size_t batch = get_global_id(2);
    const int i0 = (int)get_global_id(0) * MWI, j0 = (int)get_global_id(1) * NWI;
    if (i0 >= M || j0 >= N) return;
    const __global A_ELT *abase = A + a_off + batch * a_stride;
    const __global B_ELT *bbase = B + b_off + batch * b_stride;
    const size_t cidx = batch * c_stride + (size_t)i0 * ldc + j0; // the tile's first element, less c_off
    const __global float *bias_row = bias + bias_off + batch * bias_stride + i0;
    const __global float *bias_col = bias + bias_off + batch * bias_stride + j0;
    const __global float *scale_row = scale + scale_off + batch * scale_stride + i0;
    const __global float *scale_col = scale + scale_off + batch * scale_stride + j0;
#define SM_STORE(t, m)                                                                              \
    if (i0 + (m) < M)                                                                               \
    sm_store_row((t), (m), j0, N, alpha, beta, C + c_off, cidx + (size_t)(m) * ldc, bias_row, bias_col, bias_axis, \
                 act, scale_row, scale_col, scale_axis, res, res_off, res_type)

#if TB && !TA
    // ---- vectors along K: C(i, j) = sum_k A[i][k] * B[j][k]
    const int kv = K - K % VW; // k-steps covered by whole vectors
#if SM_JOINT
// the block's sums: red[r * C_ + c] the sum of acc[r][c]'s lanes
#define SM_SUMS(R_, C_)                                                                            \
    float red[VW];                                                                                 \
    {                                                                                              \
        floatv s[VW];                                                                              \
        _Pragma("unroll") for (int r = 0; r < R_; ++r)                                             \
            _Pragma("unroll") for (int c = 0; c < C_; ++c) s[r * C_ + c] = acc[r][c];             \
        VSTORE(sm_reduce(s), red);                                                                 \
    }
#define SM_SUM(r, c, C_) red[(r) * (C_) + (c)]
#else
#define SM_SUMS(R_, C_)
#define SM_SUM(r, c, C_) SM_HSUM(acc[r][c])
#endif
// Software prefetch of B's rows SM_PF_BYTES ahead of the loads: the weights of a small-M GEMM
// are read once per call, from DRAM when a model's weights outgrow the last-level cache, and
// the hardware prefetchers alone left the K loop waiting on them (clang's __builtin_prefetch,
// a hint that never faults: past the end of B it fetches nothing useful and costs one issue).
// Only where the kernel is compiled for x86-64 itself (PoCL's CPU devices): compilers that go
// through SPIR-V reject the intrinsic (rusticl's translator ends the process on it, Oclgrind
// cannot create the kernel), and a GPU's would gain nothing from it.
#ifndef SM_PF_BYTES
#define SM_PF_BYTES 8192
#endif
#if SM_PF_BYTES > 0 && defined(__has_builtin) && defined(__x86_64__)
#if __has_builtin(__builtin_prefetch)
#define SM_PREFETCH_B(C_)                                                                          \
    _Pragma("unroll") for (int c = 0; c < C_; ++c)                                                 \
        __builtin_prefetch((const __global char *)(bbase + bc[c] + k) + SM_PF_BYTES);
#endif
#endif
#ifndef SM_PREFETCH_B
#define SM_PREFETCH_B(C_)
#endif
// Rows r0 .. r0 + R_ of the item's tile in blocks of R_ x C_ columns.
#define SM_K_FORM(R_, C_)                                                                          \
    for (int r0 = 0; r0 < MWI; r0 += R_) {                                                         \
        if (i0 + r0 >= M) break;                                                                   \
        float t[R_ * NWI];                                                                         \
        size_t ar[R_]; /* offsets of the block's rows of A */                                      \
        _Pragma("unroll") for (int r = 0; r < R_; ++r) ar[r] = (size_t)min(i0 + r0 + r, M - 1) * lda; \
        for (int c0 = 0; c0 < NWI; c0 += C_) {                                                     \
            size_t bc[C_];                                                                         \
            _Pragma("unroll") for (int c = 0; c < C_; ++c) bc[c] = (size_t)min(j0 + c0 + c, N - 1) * ldb; \
            floatv acc[R_][C_];                                                                    \
            _Pragma("unroll") for (int r = 0; r < R_; ++r)                                         \
                _Pragma("unroll") for (int c = 0; c < C_; ++c) acc[r][c] = (floatv)(0.0f);         \
            for (int k = 0; k < kv; k += VW) {                                                     \
                SM_PREFETCH_B(C_)                                                                  \
                floatv av[R_], bv[C_];                                                             \
                _Pragma("unroll") for (int r = 0; r < R_; ++r) av[r] = SM_VLOAD(A_TYPE, abase + ar[r] + k); \
                _Pragma("unroll") for (int c = 0; c < C_; ++c) bv[c] = SM_VLOAD(B_TYPE, bbase + bc[c] + k); \
                _Pragma("unroll") for (int r = 0; r < R_; ++r)                                     \
                    _Pragma("unroll") for (int c = 0; c < C_; ++c) acc[r][c] = fma(av[r], bv[c], acc[r][c]); \
            }                                                                                      \
            SM_SUMS(R_, C_)                                                                        \
            _Pragma("unroll") for (int r = 0; r < R_; ++r) {                                       \
                _Pragma("unroll") for (int c = 0; c < C_; ++c) {                                   \
                    float s = SM_SUM(r, c, C_);                                                    \
                    for (int k = kv; k < K; ++k)                                                   \
                        s = fma(TSR_LD(A_TYPE, abase, ar[r] + k), TSR_LD(B_TYPE, bbase, bc[c] + k), s); \
                    t[r * NWI + c0 + c] = s;                                                       \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        _Pragma("unroll 1") for (int r = 0; r < R_; ++r) SM_STORE(t + r * NWI, r0 + r);            \
    }
#if SM_JOINT && RB > 4
    // Tall blocks while their RB rows of A stay in L1 (RB x K floats, 24 KB at 16 x 384); past
    // that, 4-row blocks, whose rows of A do (4 x 1536: MiniLM's FFN output).
    if (RB * K <= 8192) {
        SM_K_FORM(RB, CB)
    } else {
        SM_K_FORM(4, VW / 4)
    }
#else
    SM_K_FORM(RB, CB)
#endif
#else
    // ---- vectors along N: acc[m] += A(i0 + m, k) * B(k, j0 .. j0 + NWI)
    floatv acc[MWI][NVW];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m)
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = (floatv)(0.0f);
#if TA
#define SM_A(m, k) TSR_LD(A_TYPE, abase, (size_t)(k) * lda + min(i0 + (m), M - 1))
#else
#define SM_A(m, k) TSR_LD(A_TYPE, abase, (size_t)min(i0 + (m), M - 1) * lda + (k))
#endif
#if TB
#define SM_B(k, j) TSR_LD(B_TYPE, bbase, (size_t)(j) * ldb + (k))
#else
#define SM_B(k, j) TSR_LD(B_TYPE, bbase, (size_t)(k) * ldb + (j))
#endif
#define SM_FMA(k)                                                                                  \
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {                                              \
        const floatv a_ = (floatv)(SM_A(m, k));                                                    \
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = fma(a_, bv[v], acc[m][v]);     \
    }
#define SM_BODY_EDGE(k)                                                                            \
    {                                                                                              \
        float t_[NWI];                                                                             \
        _Pragma("unroll") for (int n = 0; n < NWI; ++n) t_[n] = SM_B((k), min(j0 + n, N - 1));      \
        floatv bv[NVW];                                                                            \
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) bv[v] = VLOAD(t_ + v * VW);                \
        SM_FMA(k)                                                                                  \
    }
#if TB || VW == 1
#define SM_BODY_FULL(k) SM_BODY_EDGE(k)
#else
// B's rows SM_PF_ROWS ahead, fetched while this row's FMAs run (each a row's NWI values from j0;
// one prefetch per 64 bytes), with locality 2 (x86: into L2, prefetcht1: 0.95-0.98x the CPU time
// of prefetcht0 for MiniLM at 1 x 16 tokens, three runs). See SM_PF_BYTES for the K-vectors form.
// B in strips (SM_BSTRIP): 64 rows (0.95-0.99x the process CPU time of 32 for MiniLM's 1 x 16
// forward, session 22, docs/minilm.md; on B as stored it lost the small-m16 class's tune to the
// tiled kernel, so B as stored keeps 32).
#ifndef SM_PF_ROWS
#if SM_BSTRIP
#define SM_PF_ROWS 64
#else
#define SM_PF_ROWS 32
#endif
#endif
#if SM_PF_ROWS > 0 && defined(__has_builtin) && defined(__x86_64__)
#if __has_builtin(__builtin_prefetch)
#define SM_PREFETCH_ROW(k)                                                                         \
    _Pragma("unroll") for (int l = 0; l < (NWI * (int)sizeof(B_ELT) + 63) / 64; ++l)               \
        __builtin_prefetch((const __global char *)(bbase + (size_t)((k) + SM_PF_ROWS) * ldb + j0) + 64 * l, 0, 2);
#endif
#endif
#ifndef SM_PREFETCH_ROW
#define SM_PREFETCH_ROW(k)
#endif
// The same prefetch, from a pointer to the current row at the item's columns.
#if SM_PF_ROWS > 0 && defined(__has_builtin) && defined(__x86_64__)
#if __has_builtin(__builtin_prefetch)
#define SM_PREFETCH_PTR(p)                                                                         \
    _Pragma("unroll") for (int l = 0; l < (NWI * (int)sizeof(B_ELT) + 63) / 64; ++l)               \
        __builtin_prefetch((const __global char *)((p) + SM_PF_ROWS * bstep) + 64 * l, 0, 2);
#endif
#endif
#ifndef SM_PREFETCH_PTR
#define SM_PREFETCH_PTR(p)
#endif
#define SM_BODY_FULL(k)                                                                            \
    {                                                                                              \
        SM_PREFETCH_ROW(k)                                                                         \
        floatv bv[NVW];                                                                            \
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) bv[v] = SM_VLOAD(B_TYPE, bbase + (size_t)(k) * ldb + j0 + v * VW); \
        SM_FMA(k)                                                                                  \
    }
#endif
#define SM_K_LOOP(BODY)                                                                            \
    {                                                                                              \
        int k = 0;                                                                                 \
        for (; k + KU <= K; k += KU) {                                                             \
            _Pragma("unroll") for (int u = 0; u < KU; ++u) BODY(k + u)                             \
        }                                                                                          \
        for (; k < K; ++k) BODY(k)                                                                 \
    }
#if SM_BSTRIP
    // B stored in strips (SM_BSTRIP, runtime/ops/gemm.c): strip j0 / NWI holds B's columns j0 ..
    // j0 + NWI - 1 as K rows of NWI values, contiguous, the last strip zero-padded to full width,
    // so every tile (the edge one too) streams its slab in order; the stores stay guarded by N.
    {
#else
    if (j0 + NWI <= N) {
#endif
#if !TB && !TA && VW > 1
        // Pointers walked along K (A's MWI rows, B's row at the item's columns): the loop's
        // addresses are a base and a constant displacement, no per-step index arithmetic (which
        // the indexed form spent on 8-row tiles, out of general registers).
        const __global A_ELT *ap[MWI];
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) ap[m] = abase + (size_t)min(i0 + m, M - 1) * lda;
#if SM_BSTRIP
        const __global B_ELT *bp = bbase + (size_t)(j0 / NWI) * K * NWI;
        const size_t bstep = (size_t)NWI;
#else
        const __global B_ELT *bp = bbase + j0;
        const size_t bstep = (size_t)ldb;
#endif
#define SM_PBODY(u)                                                                                \
    {                                                                                              \
        SM_PREFETCH_PTR(bp)                                                                        \
        floatv bv[NVW];                                                                            \
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) bv[v] = SM_VLOAD(B_TYPE, bp + v * VW);    \
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {                                          \
            const floatv a_ = (floatv)(TSR_LD(A_TYPE, ap[m], (u)));                                \
            _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = fma(a_, bv[v], acc[m][v]); \
        }                                                                                          \
        bp += bstep;                                                                               \
    }
        int k = 0;
        for (; k + KU <= K; k += KU) {
            _Pragma("unroll") for (int u = 0; u < KU; ++u) SM_PBODY(u)
            _Pragma("unroll") for (int m = 0; m < MWI; ++m) ap[m] += KU;
        }
        for (; k < K; ++k) {
            SM_PBODY(0)
            _Pragma("unroll") for (int m = 0; m < MWI; ++m) ap[m] += 1;
        }
#undef SM_PBODY
#else
        SM_K_LOOP(SM_BODY_FULL)
#endif
#if SM_BSTRIP
    }
#else
    } else {
        SM_K_LOOP(SM_BODY_EDGE)
    }
#endif
    // The tile through private memory, then one store per row in a loop: the store's code once
    // (compile time), the accumulators indexed by constants only.
    float t[MWI * NWI];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m)
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) VSTORE(acc[m][v], t + m * NWI + v * VW);
#pragma unroll 1
    for (int m = 0; m < MWI; ++m) {
        SM_STORE(t + m * NWI, m);
    }
#if SM_NORM
    // the row tile's last item to finish normalises its rows (the count: row tiles x batch)
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    volatile __global int *count = norm_count + batch * get_global_size(0) + get_global_id(0);
    if (atomic_inc(count) == (N + NWI - 1) / NWI - 1) {
        mem_fence(CLK_GLOBAL_MEM_FENCE);
        sm_norm_rows(C + c_off + cidx - j0, min(MWI, M - i0), N, ldc, norm_g + norm_g_off, norm_b + norm_b_off,
                     norm_eps);
        atomic_xchg(count, 0);
    }
#endif
#endif
}
