// The fused epilogue's last steps, shared by GEMM's kernels (gemm.cl, gemm_gpu.cl) and every
// conv2d kernel (through conv_access.cl's conv_store, conv_store1): the residual added, then the
// activation. Include after vector.cl (VW, floatv, activate_floatv) and dtype.cl; it includes
// nothing itself (the embedder splices one level).
//
// The residual is a tensor of the output's shape in any storage type, chosen at run time, so a
// residual costs no program variants: `res` is its buffer as bytes, `res_type` its tsr_dtype code
// (0 f32, 1 f16, 2 bf16) or TSR_RES_NONE, and element i (counted in its own type, offset
// included) is widened to fp32. A caller reads an element's residual before it stores the element,
// in the same work-item, so a residual that is the output itself (same bytes, same type) is read
// intact.
#ifndef TSR_EPILOGUE_CL
#define TSR_EPILOGUE_CL

#define TSR_RES_NONE (-1)

TSR_INLINE float tsr_res_ld(const __global uchar *res, const int res_type, const size_t i) {
    if (res_type == 1) return vload_half(i, (const __global half *)res);
    if (res_type == 2) return tsr_bf16_to_f32(((const __global ushort *)res)[i]);
    return ((const __global float *)res)[i];
}

// act(r + residual[i]) for one value (no residual with TSR_RES_NONE).
TSR_INLINE float tsr_epi_finish(float r, const __global uchar *res, const int res_type, const size_t i, const int act) {
    if (res_type != TSR_RES_NONE) r += tsr_res_ld(res, res_type, i);
    return act != TSR_ACT_NONE ? activate_float(r, act) : r;
}

#if VW == 1
#define tsr_epi_finish_v tsr_epi_finish
#else
// VW consecutive residual elements from i.
TSR_INLINE floatv tsr_res_vld(const __global uchar *res, const int res_type, const size_t i) {
    if (res_type == 1) return TSR_VLD(1, VW, (const __global half *)res + i);
    if (res_type == 2) return TSR_VLD(2, VW, (const __global ushort *)res + i);
    return VLOAD((const __global float *)res + i);
}

// act(r + residual[i .. i + VW)) for VW lanes.
TSR_INLINE floatv tsr_epi_finish_v(floatv r, const __global uchar *res, const int res_type, const size_t i,
                                   const int act) {
    if (res_type != TSR_RES_NONE) r += tsr_res_vld(res, res_type, i);
    return act != TSR_ACT_NONE ? activate_floatv(r, act) : r;
}
#endif

#endif
