// Tiled SGEMM on row-major C:  C[i,j] = alpha * sum_k A(i,k) * B(k,j) + beta * C[i,j]
// (column-major calls are mapped to this form on the host by swapping A and B).
//
// Geometry arrives as -D defines (defaults below):
//   MWI, NWI  register tile of one work-item (rows x columns of C); NWI % VW == 0
//   VW        vector width of B loads and accumulators (1, 2, 4, 8, 16)
//   WGM, WGN  work-group shape (rows, columns of work-items)
//   KU        unroll factor of the k loop
//   TA, TB    1 when A (resp. B) is stored transposed: A(i,k) = A[k*lda + i], B(k,j) = B[j*ldb + k]
//   BETA0     1 when beta == 0: C is never read, so NaN/Inf in C is overwritten (BLAS semantics)
// Dimension 0 of the NDRange walks columns, 1 rows, 2 the batch.
#ifndef MWI
#define MWI 4
#endif
#ifndef NWI
#define NWI 8
#endif
#ifndef VW
#define VW 4
#endif
#ifndef KU
#define KU 4
#endif
#ifndef TA
#define TA 0
#endif
#ifndef TB
#define TB 0
#endif
#ifndef BETA0
#define BETA0 0
#endif

#define NV (NWI / VW)

#if VW == 1
typedef float floatv;
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#elif VW == 2
typedef float2 floatv;
#define VLOAD(p) vload2(0, (p))
#define VSTORE(v, p) vstore2((v), 0, (p))
#elif VW == 4
typedef float4 floatv;
#define VLOAD(p) vload4(0, (p))
#define VSTORE(v, p) vstore4((v), 0, (p))
#elif VW == 8
typedef float8 floatv;
#define VLOAD(p) vload8(0, (p))
#define VSTORE(v, p) vstore8((v), 0, (p))
#elif VW == 16
typedef float16 floatv;
#define VLOAD(p) vload16(0, (p))
#define VSTORE(v, p) vstore16((v), 0, (p))
#else
#error "VW must be 1, 2, 4, 8 or 16"
#endif

// Element (i,k) of A and (k,j) of B through the transposition flags.
#if TA
#define A_AT(i, k) A[(size_t)(k) * lda + (i)]
#else
#define A_AT(i, k) A[(size_t)(i) * lda + (k)]
#endif
#if TB
#define B_AT(k, j) B[(size_t)(j) * ldb + (k)]
#else
#define B_AT(k, j) B[(size_t)(k) * ldb + (j)]
#endif

// A vector of B(k, j..j+VW-1); contiguous unless B is transposed.
inline floatv load_b_vec(__global const float *B, int ldb, int k, int j) {
#if TB == 0
    return VLOAD(B + (size_t)k * ldb + j);
#else
    float t[VW];
    for (int v = 0; v < VW; ++v) t[v] = B_AT(k, j + v);
#if VW == 1
    return t[0];
#else
    return VLOAD(t);
#endif
#endif
}

__kernel void gemm(const int M, const int N, const int K, const float alpha, const float beta,
                   __global const float *A, const ulong a_off, const int lda, const ulong a_stride,
                   __global const float *B, const ulong b_off, const int ldb, const ulong b_stride,
                   __global float *C, const ulong c_off, const int ldc, const ulong c_stride) {
    const int i0 = (int)get_global_id(1) * MWI;
    const int j0 = (int)get_global_id(0) * NWI;
    if (i0 >= M || j0 >= N) return;
    const size_t batch = get_global_id(2);
    A += a_off + batch * a_stride;
    B += b_off + batch * b_stride;
    C += c_off + batch * c_stride;

    floatv acc[MWI][NV];
    for (int r = 0; r < MWI; ++r)
        for (int v = 0; v < NV; ++v) acc[r][v] = (floatv)(0.0f);

    if (i0 + MWI <= M && j0 + NWI <= N) {
        // Interior tile: no bounds checks in the hot loop.
        int k = 0;
        for (; k + KU <= K; k += KU) {
#pragma unroll
            for (int u = 0; u < KU; ++u) {
                floatv b[NV];
                for (int v = 0; v < NV; ++v) b[v] = load_b_vec(B, ldb, k + u, j0 + v * VW);
                for (int r = 0; r < MWI; ++r) {
                    const float a = A_AT(i0 + r, k + u);
                    for (int v = 0; v < NV; ++v) acc[r][v] = mad((floatv)(a), b[v], acc[r][v]);
                }
            }
        }
        for (; k < K; ++k) {
            floatv b[NV];
            for (int v = 0; v < NV; ++v) b[v] = load_b_vec(B, ldb, k, j0 + v * VW);
            for (int r = 0; r < MWI; ++r) {
                const float a = A_AT(i0 + r, k);
                for (int v = 0; v < NV; ++v) acc[r][v] = mad((floatv)(a), b[v], acc[r][v]);
            }
        }
        for (int r = 0; r < MWI; ++r) {
            __global float *c = C + (size_t)(i0 + r) * ldc + j0;
            for (int v = 0; v < NV; ++v) {
#if BETA0
                VSTORE(alpha * acc[r][v], c + v * VW);
#else
                VSTORE(alpha * acc[r][v] + beta * VLOAD(c + v * VW), c + v * VW);
#endif
            }
        }
        return;
    }

    // Edge tile: clamp loads to valid indices (their products land in columns/rows that
    // are never stored) and guard the stores.
    for (int k = 0; k < K; ++k) {
        float bs[NWI];
        for (int j = 0; j < NWI; ++j) bs[j] = B_AT(k, min(j0 + j, N - 1));
        for (int r = 0; r < MWI; ++r) {
            const float a = A_AT(min(i0 + r, M - 1), k);
            for (int v = 0; v < NV; ++v) {
#if VW == 1
                acc[r][v] = mad(a, bs[v], acc[r][v]);
#else
                acc[r][v] = mad((floatv)(a), VLOAD(bs + v * VW), acc[r][v]);
#endif
            }
        }
    }
    for (int r = 0; r < MWI && i0 + r < M; ++r) {
        __global float *c = C + (size_t)(i0 + r) * ldc;
        for (int v = 0; v < NV; ++v) {
            float t[VW];
#if VW == 1
            t[0] = acc[r][v];
#else
            VSTORE(acc[r][v], t);
#endif
            for (int e = 0; e < VW; ++e) {
                const int j = j0 + v * VW + e;
                if (j < N) {
#if BETA0
                    c[j] = alpha * t[e];
#else
                    c[j] = alpha * t[e] + beta * c[j];
#endif
                }
            }
        }
    }
}
