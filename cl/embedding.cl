// BERT's embedding sum, a gather (OpenCL C 1.2):
//   y[t][j] = word[ids[t]][j] + position[pos0 + t % seq_len][j] + token_type[type_ids[t]][j]
// Work-item (i, t) takes the VW-column vectors i, i + get_global_size(0), ... of token t (columns
// v VW .. v VW + VW - 1 of vector v): one vector load per table and one vector store (dtype.cl's
// TSR_VLD / TSR_VST, element alignment only, so any offset and any hidden work), adjacent items
// on adjacent vectors. The columns past the last whole vector (hidden % VW of them) are taken
// element by element, item i the columns i, i + get_global_size(0), ... of that tail. ids holds
// the word ids of the tokens, then (has_type_ids) their type ids; they were checked on the host;
// the tables are stored as T_TYPE and widened to fp32 in registers, y is stored as Y_TYPE
// (dtype.cl's codes, default 0: fp32). Missing terms are switched off by the flags (the host
// passes another valid buffer in their place).
// VW (2, 4, 8 or 16; default 16, a 64-byte fp32 vector or 32 bytes of 16-bit storage): the
// element-by-element gather it replaces ran the 16-bit forms at 0.2x (f16, a scalar vload_half
// per element) and 0.8x (bf16) the fp32 one.
#include "dtype.cl"

#ifndef Y_TYPE
#define Y_TYPE 0
#endif
#ifndef T_TYPE
#define T_TYPE 0
#endif
#ifndef VW
#define VW 16
#endif
#define EMB_CAT_(a, b) a##b
#define EMB_CAT(a, b) EMB_CAT_(a, b)
typedef EMB_CAT(float, VW) emb_floatv;

__kernel void embedding(const ulong tokens, const ulong hidden, const ulong seq_len, const ulong position_start,
                        __global const int *ids, const int has_position,
                        const int has_token_type, const int has_type_ids, __global const TSR_ELT(T_TYPE) *word,
                        const ulong word_off, __global const TSR_ELT(T_TYPE) *position, const ulong position_off,
                        __global const TSR_ELT(T_TYPE) *token_type, const ulong token_type_off, __global TSR_ELT(Y_TYPE) *y,
                        const ulong y_off, const ulong y_stride) {
    const ulong t = get_global_id(1);
    if (t >= tokens) return;
    const __global TSR_ELT(T_TYPE) *w = word + word_off + (ulong)ids[t] * hidden;
    const __global TSR_ELT(T_TYPE) *p = position + position_off + (position_start + t % seq_len) * hidden;
    const __global TSR_ELT(T_TYPE) *tt = token_type + token_type_off + (has_type_ids ? (ulong)ids[tokens + t] : 0) * hidden;
    __global TSR_ELT(Y_TYPE) *ys = y + y_off + t * y_stride;
    const ulong whole = hidden / VW * VW;
    for (ulong j = get_global_id(0) * VW; j < whole; j += get_global_size(0) * VW) {
        emb_floatv sum = TSR_VLD(T_TYPE, VW, w + j);
        if (has_position) sum += TSR_VLD(T_TYPE, VW, p + j);
        if (has_token_type) sum += TSR_VLD(T_TYPE, VW, tt + j);
        TSR_VST(Y_TYPE, VW, sum, ys + j);
    }
    for (ulong j = whole + get_global_id(0); j < hidden; j += get_global_size(0)) {
        float sum = TSR_LD(T_TYPE, w, j);
        if (has_position) sum += TSR_LD(T_TYPE, p, j);
        if (has_token_type) sum += TSR_LD(T_TYPE, tt, j);
        TSR_ST(Y_TYPE, sum, ys, j);
    }
}
