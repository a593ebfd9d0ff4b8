// Typed access to conv2d's tensors, shared by conv.cl and conv_cpu.cl (included after vector.cl
// and dtype.cl, with VW defined; it includes nothing itself: the embedder splices one level).
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
