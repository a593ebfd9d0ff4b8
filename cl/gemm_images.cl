// A 1x1 convolution over a batch of images as ONE GEMM whose columns run across the images
// (OpenCL C 1.2). In gemm.cl's canonical form, per image n: C_n (M x P) = A (M x K) B_n (K x P),
// A shared by every image (the weights, packed once by gemm.cl's pack_a), B_n and C_n at image
// strides b_image and c_image, each row P elements long (ldb = ldc = P: NCHW planes). Here the
// batch is one GEMM of NP = N P columns, column j being pixel j % P of image j / P: pack_b_images
// writes B's panels across the images (a tile of NWI columns may hold the end of one image and
// the start of the next), gemm_images runs gemm.cl's register tile over both packed panels and
// stores each vector of VW columns in one piece when it lies inside one image, else element by
// element. So a 7x7 image (49 pixels) no longer fills a 64-column tile pair of its own: 8 images
// are 392 columns, 13 tiles of 32, not 16.
//
// Geometry, from the same -D defines as gemm.cl (the GEMM configuration of the per-image class):
// MWI rows x NVW vectors of VW columns per tile, KU unroll, NT tiles per work-item, PK k-steps
// per pack work-item; storage types A_TYPE (unused here: A comes packed), B_TYPE, C_TYPE.
// Epilogue as gemm.cl's, for the column-major calls conv2d makes: per canonical row (output
// channel) scale and bias (absent when scale_on / bias_on is 0), then beta C, the residual in C's
// layout (read by the work-item that then writes the element), the activation.
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
#ifndef PK
#define PK 16
#endif
#ifndef NT
#define NT 1
#endif
#ifndef B_TYPE
#define B_TYPE 0
#endif
#ifndef C_TYPE
#define C_TYPE 0
#endif
#define NWI (VW * NVW)
#include "vector.cl"
#include "epilogue.cl"

#define B_ELT TSR_ELT(B_TYPE)
#define C_ELT TSR_ELT(C_TYPE)
#if VW == 1
#define B_IMG_VLOAD(p) TSR_LD(B_TYPE, p, 0)
#define C_IMG_VLOAD(p) TSR_LD(C_TYPE, p, 0)
#define C_IMG_VSTORE(v, p) TSR_ST(C_TYPE, v, p, 0)
#else
#define B_IMG_VLOAD(p) TSR_VLD(B_TYPE, VW, p)
#define C_IMG_VLOAD(p) TSR_VLD(C_TYPE, VW, p)
#define C_IMG_VSTORE(v, p) TSR_VST(C_TYPE, VW, v, p)
#endif

// Bp: [column tile][k][NWI] over the NP columns of every image, zero past NP. One work-item
// copies PK k-steps of one tile: global = (tiles, ceil(K / PK)), the tiles first as gemm.cl's
// pack_b of a row-major B (neighbouring items read neighbouring bytes of the same rows).
__kernel void pack_b_images(const int P, const int NP, const int K, __global const B_ELT *B, const ulong b_off,
                            const ulong b_image, __global float *Bp) {
    const int k0 = (int)get_global_id(1) * PK;
    const int tile = (int)get_global_id(0);
    if (k0 >= K) return;
    const int kn = min(PK, K - k0);
    const int j0 = tile * NWI;
    __global float *d = Bp + ((size_t)tile * K + k0) * NWI;
    int n = j0 / P, p = j0 - n * P;
    if (p + NWI <= P) { // the whole tile inside one image: rows of NWI contiguous elements
        const __global B_ELT *src = B + b_off + n * b_image + (size_t)k0 * P + p;
        for (int kk = 0; kk < kn; ++kk)
            _Pragma("unroll") for (int v = 0; v < NVW; ++v)
                VSTORE(B_IMG_VLOAD(src + (size_t)kk * P + v * VW), d + kk * NWI + v * VW);
        return;
    }
    // runs of columns, each inside one image; zeros past the last image
    for (int c = 0; c < NWI; n += 1, p = 0) {
        const int run = j0 + c >= NP ? NWI - c : min(NWI - c, P - p);
        const __global B_ELT *src = B + b_off + n * b_image + (size_t)k0 * P + p;
        for (int kk = 0; kk < kn; ++kk)
            for (int e = 0; e < run; ++e)
                d[kk * NWI + c + e] = j0 + c < NP ? TSR_LD(B_TYPE, src, (size_t)kk * P + e) : 0.0f;
        c += run;
    }
}

// Run BODY(k) for k in [0, k_end), unrolled by KU.
#define IMG_K_LOOP(k_end, BODY)                                                                    \
    {                                                                                              \
        int k = 0;                                                                                 \
        for (; k + KU <= (k_end); k += KU) {                                                       \
            _Pragma("unroll") for (int u = 0; u < KU; ++u) BODY(k + u)                             \
        }                                                                                          \
        for (; k < (k_end); ++k) BODY(k)                                                           \
    }

// One work-item: MWI rows x up to NT tiles of NWI columns, one tile after the other, the tiles
// spread evenly over dimension 1's items as gemm.cl's TILE_START does (the host launches at least
// ceil(tiles / NT)). Ap: gemm.cl's pack_a panels ([row tile][k][MWI]), Bp: pack_b_images', each
// panel KP k-steps long; this launch sums the K steps from K0 on (the host's K blocks: beta 1 and
// no epilogue but the scale in all but the last, as gemm.cl's launches).
__kernel void gemm_images(const int M, const int NP, const int K, const int KP, const int K0, const int P,
                          const float alpha, const float beta,
                          __global const float *Ap, __global const float *Bp, __global C_ELT *C, const ulong c_off,
                          const ulong c_image, __global const float *scale, const ulong scale_off, const int scale_on,
                          __global const float *bias, const ulong bias_off, const int bias_on, const int act,
                          __global const uchar *res, const ulong res_off, const int res_type) {
    const int it = (int)get_global_id(0);
    const int i0 = it * MWI;
    const long tiles = (NP + NWI - 1) / NWI, gs1 = (long)get_global_size(1), g = (long)get_global_id(1);
    const int jt0 = (int)(g * tiles / gs1), tiles_here = (int)((g + 1) * tiles / gs1) - jt0;
    for (int tile_ = 0; tile_ < tiles_here; ++tile_) {
        const int jt = jt0 + tile_;
        const int j0 = jt * NWI;
        if (i0 >= M || j0 >= NP) return;
        floatv acc[MWI][NVW];
        _Pragma("unroll") for (int m = 0; m < MWI; ++m)
            _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = (floatv)(0.0f);
        const __global float *ap = Ap + ((size_t)it * KP + K0) * MWI;
        const __global float *bp = Bp + ((size_t)jt * KP + K0) * NWI;
#define IMG_BODY(k)                                                                                \
    {                                                                                              \
        floatv bv[NVW];                                                                            \
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) bv[v] = VLOAD(bp + (size_t)(k) * NWI + v * VW); \
        _Pragma("unroll") for (int m = 0; m < MWI; ++m) {                                          \
            const floatv a_ = (floatv)(ap[(size_t)(k) * MWI + m]);                                 \
            _Pragma("unroll") for (int v = 0; v < NVW; ++v) acc[m][v] = fma(a_, bv[v], acc[m][v]); \
        }                                                                                          \
    }
        IMG_K_LOOP(K, IMG_BODY)

        // ---- store act(scale alpha acc + beta C + bias + residual), by image and pixel
        _Pragma("unroll") for (int v = 0; v < NVW; ++v) {
            const int jv = j0 + v * VW;
            if (jv >= NP) break;
            int n = jv / P, p = jv - n * P;
            if (p + VW <= P) { // one image's VW consecutive pixels
                const size_t at = n * c_image + (size_t)i0 * P + p; // row i0's, less c_off
                _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                    if (i0 + m < M) {
                        const size_t e = at + (size_t)m * P;
                        floatv r = alpha * acc[m][v];
                        if (scale_on) r *= scale[scale_off + i0 + m];
                        if (beta != 0.0f) r = fma((floatv)(beta), C_IMG_VLOAD(C + c_off + e), r);
                        if (bias_on) r += bias[bias_off + i0 + m];
                        r = tsr_epi_finish_v(r, res, res_type, res_off + e, act);
                        C_IMG_VSTORE(r, C + c_off + e);
                    }
                }
            } else { // the vector crosses into the next image (or past the last column)
                _Pragma("unroll") for (int m = 0; m < MWI; ++m) {
                    if (i0 + m < M) {
                        float t[VW];
                        VSTORE(acc[m][v], t);
                        int nn = n, pp = p;
                        for (int l = 0; l < VW && jv + l < NP; ++l) {
                            const size_t e = nn * c_image + (size_t)(i0 + m) * P + pp;
                            float r = alpha * t[l];
                            if (scale_on) r *= scale[scale_off + i0 + m];
                            if (beta != 0.0f) r = fma(beta, TSR_LD(C_TYPE, C + c_off, e), r);
                            if (bias_on) r += bias[bias_off + i0 + m];
                            r = tsr_epi_finish(r, res, res_type, res_off + e, act);
                            TSR_ST(C_TYPE, r, C + c_off, e);
                            if (++pp == P) pp = 0, ++nn;
                        }
                    }
                }
            }
        }
    }
}
