// Layout conversion for conv2d's channels-last tensors (OpenCL C 1.2): NHWC is computed in NCHW,
// so runtime/ops/conv.c transposes x (and a residual) into NCHW temporaries before the
// convolution and its NCHW result back into NHWC y after it. Each image is an A x B matrix whose
// transpose, B x A, is written: NHWC -> NCHW is A = H W pixels by B = C channels, NCHW -> NHWC the
// other way round. Elements are copied bit for bit, so one program serves every storage type of
// the same size: ELT_BYTES 4 (fp32) or 2 (f16, bf16).
#ifndef ELT_BYTES
#define ELT_BYTES 4
#endif
#if ELT_BYTES == 2
typedef ushort elt;
#else
typedef uint elt;
#endif
#define TILE 16

// global = (ceil(B / TILE), ceil(A / TILE), images); each work-item moves one TILE x TILE block,
// reading TILE rows of src (TILE consecutive elements each) and writing TILE rows of dst.
__kernel void transpose_images(const int A, const int B, __global const elt *src, const ulong src_off,
                               __global elt *dst, const ulong dst_off) {
    const int b0 = (int)get_global_id(0) * TILE, a0 = (int)get_global_id(1) * TILE;
    const size_t n = get_global_id(2);
    if (a0 >= A || b0 >= B) return;
    const __global elt *s = src + src_off + n * (size_t)A * B;
    __global elt *d = dst + dst_off + n * (size_t)A * B;
    const int na = min(TILE, A - a0), nb = min(TILE, B - b0);
    elt t[TILE][TILE];
    for (int i = 0; i < na; ++i)
        for (int j = 0; j < nb; ++j) t[j][i] = s[(size_t)(a0 + i) * B + b0 + j];
    for (int j = 0; j < nb; ++j)
        for (int i = 0; i < na; ++i) d[(size_t)(b0 + j) * A + a0 + i] = t[j][i];
}
