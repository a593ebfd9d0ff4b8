// BERT's embedding sum, a gather (OpenCL C 1.2):
//   y[t][j] = word[ids[t]][j] + position[pos0 + t % seq_len][j] + token_type[type_ids[t]][j]
// Work-item (i, t) takes columns i, i + get_global_size(0), ... of token t: adjacent items read
// adjacent floats of a row. ids holds the word ids of the tokens, then (has_type_ids) their type
// ids; they were checked on the host; the tables are stored as T_TYPE and widened to fp32 in
// registers, y is stored as Y_TYPE (dtype.cl's codes, default 0: fp32). Missing terms are switched off by the flags (the
// host passes another valid buffer in their place).
#include "dtype.cl"

#ifndef Y_TYPE
#define Y_TYPE 0
#endif
#ifndef T_TYPE
#define T_TYPE 0
#endif

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
    for (ulong j = get_global_id(0); j < hidden; j += get_global_size(0)) {
        float sum = TSR_LD(T_TYPE, w, j);
        if (has_position) sum += TSR_LD(T_TYPE, p, j);
        if (has_token_type) sum += TSR_LD(T_TYPE, tt, j);
        TSR_ST(Y_TYPE, sum, ys, j);
    }
}
