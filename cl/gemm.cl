// Tiled SGEMM family (OpenCL C 1.2) on a canonical form: C is row-major,
//   C(i,j) = alpha * sum_k opA(i,k) * opB(k,j) + beta * C(i,j)
//   opA(i,k) = TA ? A[k*lda + i] : A[i*lda + k],   opB(k,j) = TB ? B[j*ldb + k] : B[k*ldb + j]
// (column-major calls are mapped to it on the host: C^T = op(B)^T op(A)^T).
//
// Geometry, from -D defines:
//   MWI          rows of C per work-item
//   VW, NVW      vector width and vectors per row: a work-item owns MWI x (VW*NVW) of C,
//                held in MWI*NVW floatVW accumulators
//   KU           unroll of the k loop
//   WGM, WGN     work-group shape (dimension 0 walks row tiles, 1 column tiles, 2 the batch)
//   SA, SB       stage the work-group's A (B) tile in __local memory, KWG k-steps at a time
//   KWG          k-steps per staged tile
//   PACKA, PACKB read A (B) from panels written by pack_a (pack_b) instead of the matrix:
//                contiguous per tile and zero-padded, so the hot loop has unit-stride,
//                unguarded loads whatever the layout, transposition or edge
//   TA, TB       transposition of the (unpacked) operands
//   PK           k-steps per work-item of the pack kernels
//   NT           column tiles per work-item at most, computed one after the other (1 with SA or
//                SB); the kernel spreads the tiles evenly over dimension 1's work-items (TILE_START)
// K blocking (the host's KC parameter): the host may split K into blocks and launch once per
// block, accumulating into C with beta = 1 after the first, so the packed panels a launch walks
// stay in cache. Each launch sees its block as K and starts at a_off / b_off; packed panels
// are laid out for the whole K (KP k-steps per tile), a_off / b_off then pointing at the block's
// first k-step inside each tile's panel.
// Edges: rows of A are clamped (duplicated rows are never stored), columns of B are
// zero-filled, stores are guarded. beta == 0 never reads C, so NaN in C is overwritten.
// Epilogue (run-time arguments, so it costs no program variants): before C is written,
//   C(i,j) <- act(scale * alpha * acc + beta * C(i,j) + bias + residual(i,j)),
//   bias = bias[j] (bias_axis 1) or bias[i] (bias_axis 2, the column-major case after the host's
//   transposition) or 0; scale likewise by scale_axis, or 1; residual(i,j) a matrix of C's
//   layout (ldc, c_stride) at res_off in type res_type (epilogue.cl; TSR_RES_NONE: 0), read by
//   the work-item that then writes C(i,j); act as in activation.cl. With K blocking the host
//   passes the scale to every launch and the rest to the last only.
// Storage types (-D A_TYPE, B_TYPE, C_TYPE: 0 f32, 1 f16, 2 bf16, codes as dtype.cl's): A and B
// widen to fp32 as they are loaded (pack_a / pack_b write fp32 panels, so a packed hot loop is
// the fp32 one), accumulation is fp32, and C is read (beta) and written through its type,
// rounding to nearest even. Offsets, leading dimensions and strides count elements of each
// operand's type. With every code 0 the loads and stores are the plain float ones.
#include "activation.cl"
#include "dtype.cl"
#include "dtype_avx512.cl"
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
#ifndef SA
#define SA 0
#endif
#ifndef SB
#define SB 0
#endif
#ifndef PACKA
#define PACKA 0
#endif
#ifndef PACKB
#define PACKB 0
#endif
#ifndef TA
#define TA 0
#endif
#ifndef TB
#define TB 0
#endif
#ifndef PK
#define PK 16
#endif
#ifndef NT
#define NT 1
#endif
// The first column tile of work-item g of dimension 1, of n columns' tiles: the tiles spread
// evenly over get_global_size(1) items, floor or ceil of tiles / items each (the host launches
// at least ceil(tiles / NT) items, so never more than NT). PoCL's threads take a launch's
// work-groups in chunks of half of what is left, in order (dimension 0 fastest): with NT tiles
// each but the last item's, 13 tiles at NT = 8 gave the second half of the groups 5 tiles to the
// first half's 8, and one of two cores sat idle for a third of the GEMM (512 x 392 x 4608).
#if NT > 1
#define TILE_START(g, n) ((int)((long)(g) * (((n) + NWI - 1) / NWI) / (long)get_global_size(1)))
#else
#define TILE_START(g, n) (g)
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

#define NWI (VW * NVW)
#define MWG (WGM * MWI)
#define NWG (WGN * NWI)

#include "vector.cl"
#include "epilogue.cl"

// Element types of the operands, and the type the GEMM kernel reads A (B) as: fp32 when it
// reads the packed panels.
#define A_ELT TSR_ELT(A_TYPE)
#define B_ELT TSR_ELT(B_TYPE)
#define C_ELT TSR_ELT(C_TYPE)
#if PACKA
#define AK_TYPE 0
#else
#define AK_TYPE A_TYPE
#endif
#if PACKB
#define BK_TYPE 0
#else
#define BK_TYPE B_TYPE
#endif
#define AK_ELT TSR_ELT(AK_TYPE)
// A 16-bit A that is neither packed nor staged (nor transposed) widens in the GEMM kernel,
// AW_KC k-steps of the tile's rows at a time, into a private fp32 chunk: one vector conversion
// per 16 elements and no pack launch, where widening each value in the hot loop costs a scalar
// conversion per broadcast (f16's vload_half: 0.35x of fp32 at 64@128^3 on PoCL).
#if AK_TYPE != 0 && !TA && !SA && !SB
#define A_WIDEN 1
#else
#define A_WIDEN 0
#endif
#ifndef AW_KC
#define AW_KC 64
#endif
#if AW_KC % 16
#error "AW_KC must be a multiple of 16: the widened chunks are stored as whole float16s"
#endif
// With NT > 1 the work-item's NT column tiles share one widening of A (see the GEMM kernel): where
// K <= AW_KMAX all of the rows' K steps are widened once into a private array (A_WIDEN_K, up to
// 32 KB), the tiles then running as fp32's; past it each chunk is widened once for all the tiles
// (A_WIDEN_TILES: chunks outermost, the tiles' accumulators kept in private memory, up to 16 KB;
// larger tiles keep widening per tile).
#if A_WIDEN && NT > 1
#define A_WIDEN_K 1
#define AW_KMAX_ ((8192 / MWI) & ~15)
#define AW_KMAX (AW_KMAX_ < 1024 ? AW_KMAX_ : 1024)
// The rows' stride in that array: AW_KMAX and one float16 more, so that the MWI rows a k-step
// broadcasts from are not 4 KiB apart (AW_KMAX = 1024 at MWI = 8), where they all fell in one set of
// a 32 KiB 8-way L1 with the B panel's lines. On the 2-core Cascade Lake Xeon (gemm_dtype_ab, the
// medium entry forced, 41-61 rounds, three runs): 16-bit 256^3 and 512^3 0.91-0.94 -> 0.93-1.02 of
// fp32's rate (11 of 12 pairs higher, by 0.03 at the median).
#define AW_KS (AW_KMAX + 16)
#else
#define A_WIDEN_K 0
#endif
#if A_WIDEN && NT > 1 && NT * MWI * NWI <= 4096
#define A_WIDEN_TILES 1
#else
#define A_WIDEN_TILES 0
#endif
#define BK_ELT TSR_ELT(BK_TYPE)
// 16 consecutive elements of type T at p as a float16: f16 through one zmm vcvtph2ps on AVX-512
// (dtype_avx512.cl; vload_half16 is two ymm ones and a lane shuffle), else dtype.cl's TSR_VLD.
#define GEMM_VLD16_0(p) TSR_VLD(0, 16, p)
#ifdef TSR_X16
#define GEMM_VLD16_1(p) TSR_X16_LD_F16(p)
#else
#define GEMM_VLD16_1(p) TSR_VLD(1, 16, p)
#endif
#define GEMM_VLD16_2(p) TSR_VLD(2, 16, p)
#define GEMM_VLD16(T, p) TSR_DT_CAT(GEMM_VLD16_, T)(p)
// VW consecutive elements of type T at p as a floatv (float for VW = 1); type 0 is VLOAD.
#if VW == 1
#define TYPED_VLOAD(T, p) TSR_LD(T, p, 0)
#define TYPED_VSTORE(T, v, p) TSR_ST(T, v, p, 0)
#elif VW == 16
#define TYPED_VLOAD(T, p) GEMM_VLD16(T, p)
#define TYPED_VSTORE(T, v, p) TSR_VST(T, VW, v, p)
#else
#define TYPED_VLOAD(T, p) TSR_VLD(T, VW, p)
#define TYPED_VSTORE(T, v, p) TSR_VST(T, VW, v, p)
#endif
// A bf16 B read in place (not packed, not staged, row-major) in 16-float vectors on AVX-512
// (dtype_avx512.cl's TSR_X16): each pair of a row's vectors is one 64-byte load split into its
// even and odd elements (a shift and an and: TSR_X16_BF16_EVEN / _ODD), where two zero-extending
// loads and two shifts put two more micro-ops a k-step on the FMA ports (p0, p5 on Skylake-X).
// The pair's accumulators then hold the tile's even and odd columns; a full tile puts them back in
// place once, before its store (edge tiles load element by element, in place).
#if defined(TSR_X16) && BK_TYPE == 2 && !TB && VW == 16 && NVW % 2 == 0 && !SA && !SB
#define GEMM_B_SPLIT 1
#else
#define GEMM_B_SPLIT 0
#endif
#if BK_TYPE == 0
#define B_VLOAD(p) VLOAD(p)
#else
#define B_VLOAD(p) TYPED_VLOAD(BK_TYPE, p)
#endif
#if B_TYPE == 0
#define B_PACK_VLOAD(p) VLOAD(p)
#else
#define B_PACK_VLOAD(p) TYPED_VLOAD(B_TYPE, p)
#endif
#if C_TYPE == 0
#define C_VLOAD(p) VLOAD(p)
#define C_VSTORE(v, p) VSTORE(v, p)
#else
#define C_VLOAD(p) TYPED_VLOAD(C_TYPE, p)
#define C_VSTORE(v, p) TYPED_VSTORE(C_TYPE, v, p)
#endif

// ---------------------------------------------------------------- packing
// Ap per batch: [row tile][k][MWI], Bp per batch: [column tile][k][NWI], zero-padded past
// M (N). One work-item copies PK k-steps of one tile. The grid's first dimension walks the way the
// source's rows run: (tiles, ceil(K/PK), batch) where a tile's elements lie along a row of the
// source (pack_a of a transposed A, pack_b of an untransposed B), else (ceil(K/PK), tiles, batch)
// (a tile's rows, read along k). PoCL runs a work-group's items in order, so neighbouring items
// then read neighbouring bytes of the same rows; with k blocks first, a row-major B was read one
// 128-byte strip of all its rows at a time (a page per row). On the 2-core Cascade Lake Xeon
// (perf, session 34) pack_b went from 0.30 to 0.18 of the GEMM kernel's samples at 240x2048x2048
// on one thread, and from 2.8-2.9% to 1.4-1.6% of all samples at 2048^3 and 512x3072x768.
#if TA
#define PACK_A_KB_DIM 1
#else
#define PACK_A_KB_DIM 0
#endif
#if TB
#define PACK_B_KB_DIM 0
#else
#define PACK_B_KB_DIM 1
#endif

__kernel void pack_a(const int M, const int K, __global const A_ELT *A, const ulong a_off, const int lda,
                     const ulong a_stride, __global float *Ap, const ulong ap_stride) {
    const int k0 = (int)get_global_id(PACK_A_KB_DIM) * PK;
    const int tile = (int)get_global_id(1 - PACK_A_KB_DIM);
    if (k0 >= K) return;
    const __global A_ELT *a = A + a_off + get_global_id(2) * a_stride;
    __global float *d = Ap + get_global_id(2) * ap_stride + ((size_t)tile * K + k0) * MWI;
    const int i0 = tile * MWI;
    if (k0 + PK <= K && i0 + MWI <= M) {
#if TA
        for (int kk = 0; kk < PK; ++kk) {
            const __global A_ELT *src = a + (size_t)(k0 + kk) * lda + i0;
            for (int m = 0; m < MWI; ++m) d[kk * MWI + m] = TSR_LD(A_TYPE, src, m);
        }
#else
        for (int m = 0; m < MWI; ++m) {
            const __global A_ELT *src = a + (size_t)(i0 + m) * lda + k0;
            for (int kk = 0; kk < PK; ++kk) d[kk * MWI + m] = TSR_LD(A_TYPE, src, kk);
        }
#endif
        return;
    }
    const int kn = min(PK, K - k0);
    for (int kk = 0; kk < kn; ++kk)
        for (int m = 0; m < MWI; ++m) {
            const int i = i0 + m, k = k0 + kk;
#if TA
            d[kk * MWI + m] = i < M ? TSR_LD(A_TYPE, a, (size_t)k * lda + i) : 0.0f;
#else
            d[kk * MWI + m] = i < M ? TSR_LD(A_TYPE, a, (size_t)i * lda + k) : 0.0f;
#endif
        }
}

__kernel void pack_b(const int N, const int K, __global const B_ELT *B, const ulong b_off, const int ldb,
                     const ulong b_stride, __global float *Bp, const ulong bp_stride) {
    const int k0 = (int)get_global_id(PACK_B_KB_DIM) * PK;
    const int tile = (int)get_global_id(1 - PACK_B_KB_DIM);
    if (k0 >= K) return;
    const __global B_ELT *b = B + b_off + get_global_id(2) * b_stride;
    __global float *d = Bp + get_global_id(2) * bp_stride + ((size_t)tile * K + k0) * NWI;
    const int j0 = tile * NWI;
    if (k0 + PK <= K && j0 + NWI <= N) {
#if TB
        for (int n = 0; n < NWI; ++n) {
            const __global B_ELT *src = b + (size_t)(j0 + n) * ldb + k0;
            for (int kk = 0; kk < PK; ++kk) d[kk * NWI + n] = TSR_LD(B_TYPE, src, kk);
        }
#else
        for (int kk = 0; kk < PK; ++kk) {
            const __global B_ELT *src = b + (size_t)(k0 + kk) * ldb + j0;
            for (int v = 0; v < NVW; ++v) VSTORE(B_PACK_VLOAD(src + v * VW), d + kk * NWI + v * VW);
        }
#endif
        return;
    }
    const int kn = min(PK, K - k0);
    for (int kk = 0; kk < kn; ++kk)
        for (int n = 0; n < NWI; ++n) {
            const int j = j0 + n, k = k0 + kk;
#if TB
            d[kk * NWI + n] = j < N ? TSR_LD(B_TYPE, b, (size_t)j * ldb + k) : 0.0f;
#else
            d[kk * NWI + n] = j < N ? TSR_LD(B_TYPE, b, (size_t)k * ldb + j) : 0.0f;
#endif
        }
}

// ---------------------------------------------------------------- GEMM

// Run BODY(k) for k in [k_begin, k_end), unrolled by KU.
#define K_LOOP(k_begin, k_end, BODY)                                                               \
    {                                                                                              \
        int k = (k_begin);                                                                         \
        for (; k + KU <= (k_end); k += KU) {                                                       \
            _Pragma("unroll") for (int u = 0; u < KU; ++u) BODY(k + u)                             \
        }                                                                                          \
        for (; k < (k_end); ++k) BODY(k)                                                           \
    }

__kernel void gemm(const int M, const int N, const int K, const int KP, const float alpha, const float beta,
                   __global const AK_ELT *A, const ulong a_off, const int lda, const ulong a_stride,
                   __global const BK_ELT *B, const ulong b_off, const int ldb, const ulong b_stride,
                   __global C_ELT *C, const ulong c_off, const int ldc, const ulong c_stride,
                   __global const float *bias, const ulong bias_off, const ulong bias_stride, const int bias_axis,
                   const int act, __global const float *scale, const ulong scale_off, const ulong scale_stride,
                   const int scale_axis, __global const uchar *res, const ulong res_off, const int res_type) {
    const int it = (int)get_global_id(0);
    const size_t batch = get_global_id(2);
    const int i0 = it * MWI;
    // Local tiles at the kernel's outermost scope, as OpenCL C requires (Mesa refuses them in the
    // NT loop below).
#if SA
    __local float As[KWG * MWG];
#endif
#if SB
    __local float Bs[KWG * NWG];
#endif
#if A_WIDEN_K
    // A's rows widened, all K steps (see A_WIDEN below), as whole float16s: each widened vector is
    // then one aligned 64-byte store (a float array's vstore16 became four 16-byte stores under
    // PoCL on AVX-512; the widening took 3.4% of the kernel's time at 512x3072x768, then 2.4%)
    float16 awk16[MWI * AW_KS / 16];
    float *awk = (float *)awk16;
#endif
#if A_WIDEN_TILES
    floatv accs[NT][MWI][NVW]; // every tile's accumulators (see A_WIDEN below)
#endif
    // Up to NT column tiles per work-item, one after the other: fewer, longer work-items (PoCL
    // pays for each work-group it schedules), and the rows of A stay in L1 from one tile to the next.
    const int jt0 = TILE_START(get_global_id(1), N), tiles_here = TILE_START(get_global_id(1) + 1, N) - jt0;
    for (int tile_ = 0; tile_ < tiles_here; ++tile_) {
    const int jt = jt0 + tile_;
    const int j0 = jt * NWI;
#if !(SA || SB)
    // Without barriers, work-items past the edge can leave at once (the tiles after it too).
    if (i0 >= M || j0 >= N) return;
#endif
    floatv acc[MWI][NVW];
    _Pragma("unroll") for (int m = 0; m < MWI; ++m)
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = (floatv)(0.0f);

    // ---- where A values come from
#if PACKA
    const __global float *ap = A + a_off + batch * a_stride + (size_t)it * KP * MWI;
#define A_GLOBAL(m, k) ap[(size_t)(k) * MWI + (m)]
#elif A_WIDEN
    // 16-bit A, not packed: each AW_KC-step chunk of the tile's MWI rows is widened into a
    // private fp32 copy (16 elements per vector load) before its k-steps run.
    const __global AK_ELT *abase = A + a_off + batch * a_stride;
    float16 aw16[MWI * AW_KC / 16]; // whole float16s, as awk16 above
    float *aw = (float *)aw16;
#define A_GLOBAL(m, k) aw[(m) * AW_KC + (k)]
#else
    const __global AK_ELT *abase = A + a_off + batch * a_stride;
#if TA
#define A_GLOBAL(m, k) TSR_LD(AK_TYPE, abase, (size_t)(k) * lda + min(i0 + (m), M - 1))
#else
#define A_GLOBAL(m, k) TSR_LD(AK_TYPE, abase, (size_t)min(i0 + (m), M - 1) * lda + (k))
#endif
#endif
    // ---- where B vectors come from
#if PACKB
    const __global float *bp = B + b_off + batch * b_stride + (size_t)jt * KP * NWI;
#define B_LOAD_FULL(k) _Pragma("unroll") for (int v = 0; v < NVW; ++v) bv[v] = VLOAD(bp + (size_t)(k) * NWI + v * VW);
#define B_LOAD_EDGE(k) B_LOAD_FULL(k)
#else
    const __global BK_ELT *bbase = B + b_off + batch * b_stride;
#if TB
#define B_AT(k, j) TSR_LD(BK_TYPE, bbase, (size_t)(j) * ldb + (k))
#else
#define B_AT(k, j) TSR_LD(BK_TYPE, bbase, (size_t)(k) * ldb + (j))
#endif
#if TB || VW == 1
#define B_LOAD_FULL(k) B_LOAD_EDGE(k)
#elif GEMM_B_SPLIT
#define B_LOAD_FULL(k)                                                                             \
    _Pragma("unroll") for (int v = 0; v < NVW; v += 2) {                                           \
        const uint16 w_ = TSR_X16_LD32(bbase + (size_t)(k) * ldb + j0 + v * VW);                   \
        bv[v] = TSR_X16_BF16_EVEN(w_);                                                             \
        bv[v + 1] = TSR_X16_BF16_ODD(w_);                                                          \
    }
#else
#define B_LOAD_FULL(k) _Pragma("unroll") for (int v = 0; v < NVW; ++v) bv[v] = B_VLOAD(bbase + (size_t)(k) * ldb + j0 + v * VW);
#endif
#define B_LOAD_EDGE(k)                                                                             \
    {                                                                                              \
        float t_[NWI];                                                                             \
        _Pragma("unroll") for (int n = 0; n < NWI; ++n) t_[n] = j0 + n < N ? B_AT((k), j0 + n) : 0.0f; \
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) bv[v] = VLOAD(t_ + v * VW);                \
    }
#endif

#if SA || SB
    // ---- work-group tiles staged in local memory, KWG k-steps at a time
    const int lm = (int)get_local_id(0), ln = (int)get_local_id(1);
    const int tid = ln * WGM + lm;
    const int tile_i0 = (int)get_group_id(0) * MWG, tile_j0 = (int)get_group_id(1) * NWG;
#if SA
#define A_VALUE(m, kk) As[(kk) * MWG + lm * MWI + (m)]
#else
#define A_VALUE(m, kk) A_GLOBAL(m, k0 + (kk))
#endif
#if SB
#define B_LOAD(kk) _Pragma("unroll") for (int v = 0; v < NVW; ++v) bv[v] = VLOAD(Bs + (kk) * NWG + ln * NWI + v * VW);
#else
#define B_LOAD(kk) if (full_n) { B_LOAD_FULL(k0 + (kk)) } else { B_LOAD_EDGE(k0 + (kk)) }
    const bool full_n = j0 + NWI <= N;
#endif
#define STAGED_BODY(kk)                                                                            \
    {                                                                                              \
        floatv bv[NVW];                                                                            \
        B_LOAD(kk)                                                                                 \
        FMA_TILE_K(kk)                                                                             \
    }
#define FMA_TILE_K(kk)                                                                             \
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {                                              \
        const floatv a_ = (floatv)(A_VALUE(m, kk));                                                \
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = fma(a_, bv[v], acc[m][v]);     \
    }
    for (int k0 = 0; k0 < K; k0 += KWG) {
        const int kn = min(KWG, K - k0);
#if SA
        for (int e = tid; e < KWG * MWG; e += WGM * WGN) {
            const int kk = e / MWG, mm = e - kk * MWG, i = tile_i0 + mm, k = k0 + kk;
#if PACKA
            As[e] = 0.0f; // not reached: the host never combines SA with PACKA
#elif TA
            As[e] = (i < M && kk < kn) ? TSR_LD(AK_TYPE, abase, (size_t)k * lda + i) : 0.0f;
#else
            As[e] = (i < M && kk < kn) ? TSR_LD(AK_TYPE, abase, (size_t)i * lda + k) : 0.0f;
#endif
        }
#endif
#if SB
        for (int e = tid; e < KWG * NWG; e += WGM * WGN) {
            const int kk = e / NWG, nn = e - kk * NWG, j = tile_j0 + nn;
#if PACKB
            Bs[e] = 0.0f; // not reached: the host never combines SB with PACKB
#else
            Bs[e] = (j < N && kk < kn) ? B_AT(k0 + kk, j) : 0.0f;
#endif
        }
#endif
        barrier(CLK_LOCAL_MEM_FENCE);
        K_LOOP(0, kn, STAGED_BODY)
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i0 >= M || j0 >= N) return;
#else
    // ---- straight from global memory (or the packed panels)
#define GLOBAL_BODY_FULL(k)                                                                        \
    {                                                                                              \
        floatv bv[NVW];                                                                            \
        B_LOAD_FULL(k)                                                                             \
        FMA_TILE_AT(k)                                                                             \
    }
#define GLOBAL_BODY_EDGE(k)                                                                        \
    {                                                                                              \
        floatv bv[NVW];                                                                            \
        B_LOAD_EDGE(k)                                                                             \
        FMA_TILE_AT(k)                                                                             \
    }
#define FMA_TILE_AT(k)                                                                             \
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {                                              \
        const floatv a_ = (floatv)(A_GLOBAL(m, k));                                                \
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = fma(a_, bv[v], acc[m][v]);     \
    }
    // Widen the chunk of A's MWI rows at k-step kc (kn steps) into aw.
#define A_WIDEN_CHUNK(kc, kn)                                                                       \
    _Pragma("unroll") for (int m = 0; m < MWI; ++m) {                                              \
        const __global AK_ELT *row = abase + (size_t)min(i0 + m, M - 1) * lda + (kc);              \
        if ((kn) == AW_KC) {                                                                       \
            _Pragma("unroll") for (int c = 0; c < AW_KC; c += 16) aw16[(m * AW_KC + c) / 16] = GEMM_VLD16(AK_TYPE, row + c); \
        } else {                                                                                   \
            for (int kk = 0; kk < (kn); ++kk) aw[m * AW_KC + kk] = TSR_LD(AK_TYPE, row, kk);       \
        }                                                                                          \
    }
#if A_WIDEN_K
    // NT column tiles share the work-item's rows of A, widened once for all of them (widening per
    // tile cost 5-9% of the fp32 rate at 1024^3-2048^3, NT = 4). Where K fits, tile 0 widens
    // every k-step and each tile runs its whole K as fp32's does (B's panel streamed in order).
    if (K <= AW_KMAX) {
        if (tile_ == 0) {
            _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                const __global AK_ELT *row = abase + (size_t)min(i0 + m, M - 1) * lda;
                int kk = 0;
                for (; kk + 16 <= K; kk += 16) awk16[(m * AW_KS + kk) / 16] = GEMM_VLD16(AK_TYPE, row + kk);
                for (; kk < K; ++kk) awk[m * AW_KS + kk] = TSR_LD(AK_TYPE, row, kk);
            }
        }
#undef A_GLOBAL
#define A_GLOBAL(m, k) awk[(m) * AW_KS + (k)]
#if PACKB
        K_LOOP(0, K, GLOBAL_BODY_FULL) // zero-padded panels: see below
#else
        if (j0 + NWI <= N) {
            K_LOOP(0, K, GLOBAL_BODY_FULL)
        } else {
            K_LOOP(0, K, GLOBAL_BODY_EDGE)
        }
#endif
#undef A_GLOBAL
#define A_GLOBAL(m, k) aw[(m) * AW_KC + (k)]
    } else {
#endif
#if A_WIDEN_TILES
    // Past AW_KMAX: the chunks outermost and the tiles inside, each tile's accumulators kept in
    // private memory between chunks (B's panels then read a chunk of each tile in turn).
    if (tile_ == 0) {
        const int nt_ = tiles_here; // (each with columns)
        for (int kc = 0; kc < K; kc += AW_KC) {
            const int kn = min(AW_KC, K - kc);
            A_WIDEN_CHUNK(kc, kn)
#pragma unroll 1
            for (int t_ = 0; t_ < nt_; ++t_) {
                const int jt = jt0 + t_;
                const int j0 = jt * NWI;
                if (kc == 0) {
                    _Pragma("unroll") for (int m = 0; m < MWI; ++m)
                        _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = (floatv)(0.0f);
                } else {
                    _Pragma("unroll") for (int m = 0; m < MWI; ++m)
                        _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = accs[t_][m][v];
                }
#if PACKB
                const __global float *bp = B + b_off + batch * b_stride + (size_t)jt * KP * NWI + (size_t)kc * NWI;
                K_LOOP(0, kn, GLOBAL_BODY_FULL) // zero-padded panels: see below
#else
#if TB
                const __global BK_ELT *bbase = B + b_off + batch * b_stride + kc;
#else
                const __global BK_ELT *bbase = B + b_off + batch * b_stride + (size_t)kc * ldb;
#endif
                if (j0 + NWI <= N) {
                    K_LOOP(0, kn, GLOBAL_BODY_FULL)
                } else {
                    K_LOOP(0, kn, GLOBAL_BODY_EDGE)
                }
#endif
                _Pragma("unroll") for (int m = 0; m < MWI; ++m)
                    _Pragma("unroll") for (int v = 0; v < NVW; ++v) accs[t_][m][v] = acc[m][v];
            }
        }
    }
    if (K > 0) {
        _Pragma("unroll") for (int m = 0; m < MWI; ++m)
            _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = accs[tile_][m][v];
    }
#elif A_WIDEN
    for (int kc = 0; kc < K; kc += AW_KC) {
        const int kn = min(AW_KC, K - kc);
        A_WIDEN_CHUNK(kc, kn)
        // The chunk's k-steps run from 0 (plain indices into aw), B's pointer moved to kc.
#if PACKB
        const __global float *b_chunk = bp + (size_t)kc * NWI;
        const __global float *bp = b_chunk;
        K_LOOP(0, kn, GLOBAL_BODY_FULL) // zero-padded panels: see below
#else
#if TB
        const __global BK_ELT *b_chunk = bbase + kc;
        const __global BK_ELT *bbase = b_chunk;
#else
        const __global BK_ELT *b_chunk = bbase + (size_t)kc * ldb;
        const __global BK_ELT *bbase = b_chunk;
#endif
        if (j0 + NWI <= N) {
            K_LOOP(0, kn, GLOBAL_BODY_FULL)
        } else {
            K_LOOP(0, kn, GLOBAL_BODY_EDGE)
        }
#endif
    }
#elif PACKB
    // The packed panels are zero-padded past N: an edge tile reads like a full one, and one loop
    // (not two identical ones) is compiled.
    K_LOOP(0, K, GLOBAL_BODY_FULL)
#else
    if (j0 + NWI <= N) {
        K_LOOP(0, K, GLOBAL_BODY_FULL)
    } else {
        K_LOOP(0, K, GLOBAL_BODY_EDGE)
    }
#endif
#if A_WIDEN_K
    } // K > AW_KMAX
#endif
#endif

#if GEMM_B_SPLIT
    // a full tile's even / odd columns (GEMM_B_SPLIT) back in place
    if (j0 + NWI <= N) {
        _Pragma("unroll") for (int m = 0; m < MWI; ++m)
            _Pragma("unroll") for (int v = 0; v < NVW; v += 2) {
                const float16 e_ = acc[m][v], o_ = acc[m][v + 1];
                acc[m][v] = __builtin_shufflevector(e_, o_, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
                acc[m][v + 1] =
                    __builtin_shufflevector(e_, o_, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
            }
    }
#endif
    // ---- store act(scale * alpha * acc + beta * C + bias + residual)
    // The residual and the GELUs are code the compiler would otherwise copy into every vector of
    // the unrolled tile (half the kernel's compile time on PoCL, for a part most launches do not
    // use): a launch with neither (ReLU at most) stores the tile unrolled; one with either goes
    // through a copy of the tile in private memory and a loop over its rows that holds their code
    // once per vector of a row (the copy keeps the accumulators indexed by constants only, so they
    // stay in registers). Edge tiles (the last columns) take one loop over elements.
    const size_t cidx = batch * c_stride + (size_t)i0 * ldc + j0; // of the tile's first element, less c_off
    __global C_ELT *cbase = C + c_off + cidx;
    const __global float *bias_row = bias + bias_off + batch * bias_stride + i0; // bias_axis 2
    const __global float *bias_col = bias + bias_off + batch * bias_stride + j0; // bias_axis 1
    const __global float *scale_row = scale + scale_off + batch * scale_stride + i0; // scale_axis 2
    const __global float *scale_col = scale + scale_off + batch * scale_stride + j0; // scale_axis 1
    // scale * alpha * x + beta * C + bias for the VW elements (m, v * VW ..) of a full tile
#define GEMM_PRE_V(m, v, x)                                                                        \
    r = alpha * (x);                                                                               \
    if (scale_axis == 1) r *= VLOAD(scale_col + (v) * VW);                                         \
    else if (scale_axis == 2) r *= scale_row[m];                                                   \
    if (beta != 0.0f) r = fma((floatv)(beta), C_VLOAD(cbase + (size_t)(m) * ldc + (v) * VW), r);  \
    if (bias_axis == 1) r += VLOAD(bias_col + (v) * VW);                                           \
    else if (bias_axis == 2) r += bias_row[m];
    if (j0 + NWI <= N) {
        if (res_type == TSR_RES_NONE && (act == TSR_ACT_NONE || act == TSR_ACT_RELU)) {
            _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                if (i0 + m < M) {
                    _Pragma("unroll") for (int v = 0; v < NVW; ++v) {
                        floatv r;
                        GEMM_PRE_V(m, v, acc[m][v])
                        if (act == TSR_ACT_RELU) r = select(r, (floatv)(0.0f), r < 0.0f); // NaN kept
                        C_VSTORE(r, cbase + (size_t)m * ldc + v * VW);
                    }
                }
            }
        } else {
            floatv t[MWI][NVW];
            _Pragma("unroll") for (int m = 0; m < MWI; ++m)
                _Pragma("unroll") for (int v = 0; v < NVW; ++v) t[m][v] = acc[m][v];
#pragma unroll 1
            for (int m = 0; m < MWI; ++m) {
                if (i0 + m >= M) break;
                _Pragma("unroll") for (int v = 0; v < NVW; ++v) {
                    floatv r;
                    GEMM_PRE_V(m, v, t[m][v])
                    r = tsr_epi_finish_v(r, res, res_type, res_off + cidx + (size_t)m * ldc + v * VW, act);
                    C_VSTORE(r, cbase + (size_t)m * ldc + v * VW);
                }
            }
        }
    } else {
        float t[MWI][NWI];
        _Pragma("unroll") for (int m = 0; m < MWI; ++m)
            _Pragma("unroll") for (int v = 0; v < NVW; ++v) VSTORE(acc[m][v], &t[m][v * VW]);
#pragma unroll 1
        for (int m = 0; m < MWI; ++m) {
            if (i0 + m >= M) break;
            __global C_ELT *cp = cbase + (size_t)m * ldc;
#pragma unroll 1
            for (int n = 0; n < NWI && j0 + n < N; ++n) {
                float r = alpha * t[m][n];
                if (scale_axis == 1) r *= scale_col[n];
                else if (scale_axis == 2) r *= scale_row[m];
                if (beta != 0.0f) r = fma(beta, TSR_LD(C_TYPE, cp, n), r);
                if (bias_axis == 1) r += bias_col[n];
                else if (bias_axis == 2) r += bias_row[m];
                r = tsr_epi_finish(r, res, res_type, res_off + cidx + (size_t)m * ldc + n, act);
                TSR_ST(C_TYPE, r, cp, n);
            }
        }
    }
#undef GEMM_PRE_V
    } // NT
}
