// Typed access to conv2d's tensors and the fused epilogue's store, shared by conv.cl and
// conv_cpu.cl (included after vector.cl, dtype.cl and epilogue.cl, with VW defined; it includes
// nothing itself: the embedder splices one level).
// Storage types of x, w and y (tsr_dtype codes, cl/dtype.cl; 0 fp32 when not defined): loads
// widen to float, y's stores round. With code 0 every macro below is the plain float access.
#ifndef X_TYPE
#define X_TYPE 0
#endif
#ifndef W_TYPE
#define W_TYPE 0
#endif
#ifndef Y_TYPE
#define Y_TYPE 0
#endif
#define XELT TSR_ELT(X_TYPE)
#define WELT TSR_ELT(W_TYPE)
#define YELT TSR_ELT(Y_TYPE)
#define LDX(p, i) TSR_LD(X_TYPE, p, i)
#define LDW(p, i) TSR_LD(W_TYPE, p, i)
#define STY(v, p, i) TSR_ST(Y_TYPE, v, p, i)
#if VW == 1
#define VLOADX(p) TSR_LD(X_TYPE, p, 0)
#define VSTOREY(v, p) TSR_ST(Y_TYPE, v, p, 0)
#else
#define VLOADX(p) TSR_VLD(X_TYPE, VW, p)
#define VSTOREY(v, p) TSR_VST(Y_TYPE, VW, v, p)
#endif
// CONV_F32_VST_U (a CPU form's program asks for it): an fp32 y's whole vectors stored at an
// element's alignment, one unaligned vector move, where PoCL 3.1's vstore16 on float is a 128-bit
// move and two extracts (session 26: conv1's and the 3x3/2 layers' STAGE 2 stores).
#if defined(CONV_F32_VST_U) && Y_TYPE == 0 && VW > 1 && defined(__clang__) &&                       \
    (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__))
typedef floatv conv_floatv_u __attribute__((aligned(4)));
#undef VSTOREY
#define VSTOREY(v, p) (*(__global conv_floatv_u *)(p) = (v))
#endif
// CONV_F32_PARTIAL (the CPU forms' files, an fp32 y, 16-lane vectors): conv_store's partial
// vectors take the epilogue as one vector and leave as at most four unaligned stores of 8, 4, 2
// and 1 lanes, where lane by lane each output took conv_store1's scalar epilogue and store (the
// Winograd output transform's last tiles of a row, session 37).
#if defined(CONV_VECTOR_ROUND) && Y_TYPE == 0 && VW == 16 && defined(__clang__)
#define CONV_F32_PARTIAL 1
typedef float8 conv_float8_u __attribute__((aligned(4)));
typedef float4 conv_float4_u __attribute__((aligned(4)));
typedef float2 conv_float2_u __attribute__((aligned(4)));
#endif
// A bf16 y on AVX-512 (the CPU forms' files, which include dtype_avx512.cl): 16 outputs rounded
// by tsr_x16_bf16_hi (dtype_avx512.cl: dtype.cl's rounding bit for bit, in 5 instructions where
// tsr_dt_bf16_round takes 7), narrowed by one vpmovdw. (An empty asm that kept vpmovdw in a
// register, stored by a vector move, gained nothing on the Zen 5: session 23, docs/dtypes.md.)
#if defined(CONV_VECTOR_ROUND) && defined(TSR_X16) && Y_TYPE == 2 && VW == 16
#define CONV_BF16_X16 1
TSR_INLINE ushort16 conv_bf16x16(const float16 v) { return convert_ushort16(tsr_x16_bf16_hi(v) >> 16); }
#undef VSTOREY
#define VSTOREY(v, p) TSR_DT_VST16(16, conv_bf16x16(v), p)
#endif
// VW bf16 of s into the private ushort array h (whose lanes are then stored one by one): on
// AVX-512 one vector move, where vstore16 on ushort is 16 word extracts to memory
#ifdef CONV_BF16_X16
#define CONV_BF16_PRIV(s, h) (*(__private tsr_dt_ushort16_u *)(h) = conv_bf16x16(s))
#else
#define CONV_BF16_PRIV(s, h) CAT(vstore, VW)(CAT(tsr_f32_to_bf16_, VW)(s), 0, (h))
#endif

// Every second element of x from p, as floats (VW of them; reads 2 VW elements).
#if VW == 1
#define VLOAD_STRIDE2(p) TSR_LD(X_TYPE, p, 0)
#elif VW == 16
#define VLOAD_STRIDE2(p) ((float16)(TSR_VLD(X_TYPE, 16, (p)).even, TSR_VLD(X_TYPE, 16, (p) + 16).even))
#elif VW == 8
#define VLOAD_STRIDE2(p) (TSR_VLD(X_TYPE, 16, (p)).even)
#elif VW == 4
#define VLOAD_STRIDE2(p) (TSR_VLD(X_TYPE, 8, (p)).even)
#else
#define VLOAD_STRIDE2(p) (TSR_VLD(X_TYPE, 4, (p)).even)
#endif

// ---- the fused epilogue: every conv2d kernel stores y through conv_store / conv_store1 ----
// y[n][k][i][j] = act(scale[k] sum + bias[k] + residual[n][k][i][j]) (epilogue.cl's steps after
// the bias). The kernels declare CONV_EPILOGUE_PARAMS after y and y_off (runtime/ops/conv.c's
// set_common_args sets them): epi_flags bit 0 a scale, bit 1 a bias; res_type the residual's
// type code or TSR_RES_NONE; act the activation. Element indices e count from y's start (y_off and
// res_off are added here), so the residual, which has y's shape, is read at the same e; it is read
// before the store, in the same call, so a residual that is y itself is read intact.
// (Include after epilogue.cl.)
#define CONV_EPILOGUE_PARAMS                                                                       \
    __global const float *scale, const ulong scale_off, __global const float *bias, const ulong bias_off, \
        __global const uchar *res, const ulong res_off, const int epi_flags, const int res_type, const int act
#define CONV_EPILOGUE_ARGS scale, scale_off, bias, bias_off, res, res_off, epi_flags, res_type, act

// One output: s is its sum, k its channel, e its index.
TSR_INLINE void conv_store1(float s, const int k, const size_t e, __global YELT *y, const ulong y_off,
                            CONV_EPILOGUE_PARAMS) {
    if (epi_flags & 1) s *= scale[scale_off + k];
    if (epi_flags & 2) s += bias[bias_off + k];
    STY(tsr_epi_finish(s, res, res_type, res_off + e, act), y, y_off + e);
}

#if defined(CONV_VECTOR_ROUND) && VW > 1
// The epilogue on a whole vector s of channel k at e .. e + VW - 1 whose first n lanes are stored
// (conv_store's partial vectors on the CPU forms): the residual gathered for those lanes only.
TSR_INLINE floatv conv_epi_partial(floatv s, const int k, const size_t e, const int n, CONV_EPILOGUE_PARAMS) {
    if (epi_flags & 1) s *= scale[scale_off + k];
    if (epi_flags & 2) s += bias[bias_off + k];
    if (res_type != TSR_RES_NONE) {
        float r[VW];
        for (int i = 0; i < VW; ++i) r[i] = i < n ? tsr_res_ld(res, res_type, res_off + e + i) : 0.0f;
        s += VLOAD(r);
    }
    return act != TSR_ACT_NONE ? activate_floatv(s, act) : s;
}
#endif

// The VW sums s of channel k at e .. e + VW - 1, of which the first n are stored (n == VW: one
// vector load of the residual and one vector store; fewer: lane by lane, nothing past them read).
// With CONV_VECTOR_ROUND (the CPU forms' files define it) an f16 y's partial vector (and on
// AVX-512 a bf16 y's, CONV_BF16_X16) takes the
// epilogue on the whole vector (the residual gathered for its first n lanes) and one vector
// rounding (vstore_halfN_rte: the bits of the scalar vstore_half_rte, which is a software routine
// on PoCL's CPU devices without cl_khr_fp16), then stores the first n lanes as bits.
TSR_INLINE void conv_store(floatv s, const int k, const size_t e, const int n, __global YELT *y, const ulong y_off,
                           CONV_EPILOGUE_PARAMS) {
    if (n == VW) {
        if (epi_flags & 1) s *= scale[scale_off + k];
        if (epi_flags & 2) s += bias[bias_off + k];
        VSTOREY(tsr_epi_finish_v(s, res, res_type, res_off + e, act), y + y_off + e);
    } else {
#if defined(CONV_F32_PARTIAL)
        // an fp32 y: the first n lanes as at most four stores of 8, 4, 2 and 1 lanes
        s = conv_epi_partial(s, k, e, n, CONV_EPILOGUE_ARGS);
        __global float *py = y + y_off + e;
        float8 r8 = s.lo;
        if (n & 8) {
            *(__global conv_float8_u *)py = r8;
            r8 = s.hi, py += 8;
        }
        float4 r4 = r8.lo;
        if (n & 4) {
            *(__global conv_float4_u *)py = r4;
            r4 = r8.hi, py += 4;
        }
        float2 r2 = r4.lo;
        if (n & 2) {
            *(__global conv_float2_u *)py = r2;
            r2 = r4.hi, py += 2;
        }
        if (n & 1) *py = r2.x;
#elif defined(CONV_VECTOR_ROUND) && (Y_TYPE == 1 || defined(CONV_BF16_X16)) && VW > 1
        s = conv_epi_partial(s, k, e, n, CONV_EPILOGUE_ARGS);
#if defined(TSR_X16) && VW == 16
        // AVX-512 (dtype_avx512.cl): one vcvtps2ph to a register, the first n lanes stored as at
        // most four vector stores of 8, 4, 2 and 1 lanes (n's bits, in order), where a private
        // copy reloaded lane by lane took f16's Winograd output transform to 1.3x fp32's samples
        // at batch 8 (session 22)
        // (a bf16 y, session 23: conv_bf16x16's rounding, the same stores)
#if Y_TYPE == 1
        const ushort16 h16 = as_ushort16(__builtin_ia32_vcvtps2ph512_mask(s, 0, (short16)(0), TSR_X16_ALL));
#else
        const ushort16 h16 = conv_bf16x16(s);
#endif
        __global ushort *py = (__global ushort *)y + y_off + e;
        ushort8 r8 = h16.lo;
        if (n & 8) {
            TSR_DT_VST16(8, r8, py);
            r8 = h16.hi, py += 8;
        }
        ushort4 r4 = r8.lo;
        if (n & 4) {
            TSR_DT_VST16(4, r4, py);
            r4 = r8.hi, py += 4;
        }
        ushort2 r2 = r4.lo;
        if (n & 2) {
            TSR_DT_VST16(2, r2, py);
            r2 = r4.hi, py += 2;
        }
        if (n & 1) *py = r2.x;
#else
        ushort h[VW];
        TSR_VST(1, VW, s, (__private half *)h);
        for (int i = 0; i < n; ++i) ((__global ushort *)y)[y_off + e + i] = h[i];
#endif
#else
        float t[VW];
        VSTORE(s, t);
        for (int i = 0; i < n; ++i) conv_store1(t[i], k, e + i, y, y_off, CONV_EPILOGUE_ARGS);
#endif
    }
}

#if defined(CONV_VECTOR_ROUND) && VW > 1
// (the CPU forms' files only: conv.cl's programs keep their text, so its tuned entries stay current)
// The VW sums s of channels k .. k + VW - 1 at elements e, e + stride, ... (a pixel's outputs in
// consecutive channels: stride = P Q), of which the first n are stored. n == VW: the scale and
// bias as vector loads, the residual gathered lane by lane, the activation and y's rounding on the
// whole vector (one vector conversion for a 16-bit y), then the lanes stored one by one; fewer:
// conv_store1 lane by lane, nothing past them read.
TSR_INLINE void conv_store_strided(floatv s, const int k, const size_t e, const size_t stride, const int n,
                                   __global YELT *y, const ulong y_off, CONV_EPILOGUE_PARAMS) {
    if (n < VW) {
        float t[VW];
        VSTORE(s, t);
        for (int i = 0; i < n; ++i) conv_store1(t[i], k + i, e + (size_t)i * stride, y, y_off, CONV_EPILOGUE_ARGS);
        return;
    }
    if (epi_flags & 1) s *= VLOAD(scale + scale_off + k);
    if (epi_flags & 2) s += VLOAD(bias + bias_off + k);
    if (res_type != TSR_RES_NONE) {
        float r[VW];
        for (int i = 0; i < VW; ++i) r[i] = tsr_res_ld(res, res_type, res_off + e + (size_t)i * stride);
        s += VLOAD(r);
    }
    if (act != TSR_ACT_NONE) s = activate_floatv(s, act);
#if Y_TYPE == 0
    float t[VW];
    VSTORE(s, t);
    _Pragma("unroll") for (int i = 0; i < VW; ++i) y[y_off + e + (size_t)i * stride] = t[i];
#else
    ushort h[VW];
#if Y_TYPE == 1
    TSR_VST(1, VW, s, (__private half *)h);
#else
    CONV_BF16_PRIV(s, h);
#endif
    _Pragma("unroll") for (int i = 0; i < VW; ++i) ((__global ushort *)y)[y_off + e + (size_t)i * stride] = h[i];
#endif
}
#define CONV_STORE_STRIDED(s, k, e, stride, n) conv_store_strided((s), (k), (e), (stride), (n), y, y_off, CONV_EPILOGUE_ARGS)
#elif defined(CONV_VECTOR_ROUND)
// VW 1: one channel a vector, its value stored as conv_store1 stores it (STAGE 5 with VW=1 did not
// build before session 22: a test forcing it passed on the fallback configuration)
#define CONV_STORE_STRIDED(s, k, e, stride, n)                                                     \
    do {                                                                                           \
        if ((n) > 0) CONV_STORE1((s), (k), (e));                                                   \
    } while (0)
#endif
#define CONV_STORE(s, k, e, n) conv_store((s), (k), (e), (n), y, y_off, CONV_EPILOGUE_ARGS)
#define CONV_STORE1(s, k, e) conv_store1((s), (k), (e), y, y_off, CONV_EPILOGUE_ARGS)
