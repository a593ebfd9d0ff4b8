// VW-wide float vectors, shared by the kernels that are shaped by a vector width (OpenCL C 1.2).
// Include after activation.cl and after VW has its value (the embedder and $TSR_KERNEL_DIR
// loading splice included text one level deep, so this file includes nothing itself):
//   CAT(a, b)          pastes after expanding its arguments
//   floatv             float (VW = 1) or floatVW
//   VLOAD(p)           VW floats at p, any address space; vloadN needs only float alignment
//   VSTORE(v, p)       the reverse
//   activate_float, activate_floatv   activation.cl's activate_T for scalars and for floatv
#ifndef TSR_VECTOR_CL
#define TSR_VECTOR_CL

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#if VW == 1
typedef float floatv;
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#else
typedef CAT(float, VW) floatv;
#define VLOAD(p) CAT(vload, VW)(0, (p))
#define VSTORE(v, p) CAT(vstore, VW)((v), 0, (p))
#endif

TSR_DEFINE_ACTIVATIONS(float, int)
#if VW > 1
TSR_DEFINE_ACTIVATIONS(CAT(float, VW), CAT(int, VW))
// Its own paste macro, not CAT: a kernel may name activate_floatv inside a CAT(...), where
// CAT does not expand again.
#define TSR_VECTOR_PASTE_(a, b) a##b
#define TSR_VECTOR_PASTE(a, b) TSR_VECTOR_PASTE_(a, b)
#define activate_floatv TSR_VECTOR_PASTE(activate_float, VW)
#else
#define activate_floatv activate_float
#endif

#endif
