/* The attention op: blocked (flash-style) attention from cl/attention.cl, and the unfused
 * baseline (GEMM, row softmax, GEMM) that materializes the scores. */
#include "internal.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The tuning parameters, X(NAME, KIND, DEFAULT, values...): see TSR_PARAM_DEF. BR, BC, STAGE
 * and DS (work-items sharing a row, each with a slice of D) shape the generic kernel; VEC picks
 * a fast path for head dimensions that are multiples of 16: 1, attention_vec with RW query rows
 * per work-item; 2, attention_blk, where a work-item owns BR groups of RW rows and takes keys in
 * blocks of BC (BR and BC reused with that meaning rather than new parameters, so that tuned
 * entries written before VEC=2 existed still parse). */
#define ATTENTION_PARAMS(X)                                                                     \
    X(BR, DEFINE, 1, 1, 2, 4, 8, 16, 32, 64) /* query rows per work-group */                   \
    X(BC, DEFINE, 4, 4, 8, 16, 32, 64)       /* keys per tile */                               \
    X(STAGE, DEFINE, 0, 0, 1)                /* stage K and V tiles in local memory */         \
    X(VEC, HOST, 0, 0, 1, 2)                 /* the fast path's kernel when D allows it */     \
    X(RW, DEFINE, 1, 1, 2, 3, 4, 6, 8)       /* the fast path's query rows per work-item */    \
    X(DS, DEFINE, 1, 1, 2, 4, 8)             /* work-items sharing a row, a slice of D each */

enum { ATTENTION_PARAMS(TSR_PARAM_INDEX) ATTENTION_NPARAMS };
static const tsr_param_def attention_params[] = {ATTENTION_PARAMS(TSR_PARAM_DEF)};

/* One implementation: VEC is a kernel within it that falls back to the generic one for head
 * dimensions it cannot take, reading BR, BC, STAGE and DS then; the unfused baseline
 * (tsr_attention_unfused) is a separate entry point. */
static const tsr_implementation attention_implementations[] = {{.name = "blocked"}};

/* 16-bit problems get their own classes ("long-f16": any tensor f16, TSR_CLASSES_PER_TYPE), which
 * fall back to the fp32 class's entry until tuned. */
static const char *const attention_classes[] = {"long", "short", NULL};
#define ATTENTION_SHORT_LIMIT 256 /* keys; below this a launch is mostly overhead */
#define ATTENTION_MAX_DIM 256
/* The kernels index rows and keys with int, rounded up to a work-group of rows (BR <= 64) or
 * to 16 keys (the transposed K): leave room for that rounding. */
#define ATTENTION_MAX_LEN TSR_ATTENTION_MAX_LEN

/* A validated call: sizes, and element strides per tensor (batch, head, row), in elements of
 * each tensor's type. */
typedef struct attention_problem {
    size_t B, H, Lq, Lk, D;
    size_t off[4], stride[4][3]; /* q, k, v, o */
    tsr_dtype type[4];           /* q, k, v, o */
    float scale;
    bool causal;
    const int *kv_lengths;
    cl_mem lse;
    size_t lse_off;
} attention_problem;

static const char *attention_problem_class(const void *problem) {
    const attention_problem *p = problem;
    return tsr_op_class(&tsr_op_attention, p->Lk < ATTENTION_SHORT_LIMIT, p->type, 4);
}

/* CPUs: PoCL runs a work-group's rows as a loop it can vectorize across rows, K and V rows come
 * through the caches (no staging, no barriers); GPUs: a larger group shares each K/V tile among
 * more rows. */
static const tsr_default attention_defaults[] = {
    /* CPUs that vectorize across work-items (llvmpipe): the generic kernel, a row per item. The
     * CPU rows' float4 fast path with 4 rows per item took 55 s to compile there; this 1-2 s. */
    /* DS=4: a quarter of the loop iterations per work-item of DS=1, which llvmpipe's limit of
     * 65535 iterations cut short from L = 512 (DS=4 holds to about L = 1600). */
    {TSR_DEVICE_CPU, TSR_LANES_ACROSS_ITEMS, NULL, "BR=16 BC=16 STAGE=0 VEC=0 RW=1 DS=4"},
    /* PoCL: attention_blk (VEC=2), 6 rows x 16 keys per FMA micro-kernel, 8 groups of 6 rows
     * sharing each block of 64 keys (short sequences: one group, blocks of 32, so that the few
     * rows still make enough work-items). About twice VEC=1's rate at every L measured. */
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "short", "BR=1 BC=32 STAGE=0 VEC=2 RW=4 DS=1"},
    {TSR_DEVICE_CPU, TSR_LANES_ANY, NULL, "BR=8 BC=64 STAGE=0 VEC=2 RW=6 DS=1"},
    {0, TSR_LANES_ANY, NULL, "BR=64 BC=16 STAGE=1 VEC=0 RW=2 DS=1"},
};

/* Local memory of the generic kernel: staged K and V tiles, and the partial scores of a row's
 * D slices when DS work-items share it. */
static size_t local_bytes(const int *v, int bc, size_t D) {
    return ((v[P_STAGE] ? (size_t)bc * D * 2 : 0) + (v[P_DS] > 1 ? (size_t)v[P_BR] * v[P_DS] * bc : 0)) * sizeof(float);
}

/* Keys per tile that fit the device's local memory for this head dimension. */
static int fitting_bc(const tsr_device *dev, const int *v, size_t D) {
    int bc = v[P_BC];
    while (bc > 1 && local_bytes(v, bc, D) > dev->info.local_mem_bytes) bc /= 2;
    return bc;
}

/* The one-block form's private panel at most (BC = 64 keys of D = 64 floats): past it the keys
 * are packed by pack_k as for longer sequences. The same bound is cl/attention.cl's for a 16-bit
 * V's block widened once into private fp32 (BLK_VW: BC x D <= 4096 floats), which since pack_v
 * (V_PACKED) only the one-block form does; attention_config_ok counts it for any 16-bit V (it does
 * not know which form a call takes), a bound on the safe side. */
#define DIRECT_PANEL_BYTES (16u * 1024u)

static bool attention_config_ok(const tsr_device *dev, const void *problem, const tsr_config *cfg) {
    const int *v = cfg->values;
    /* llvmpipe-like CPUs (lanes across work-items): several float4 rows per item compile for
     * close to a minute. */
    if (dev->info.type == TSR_DEVICE_CPU && tsr_device_lanes(&dev->info) == TSR_LANES_ACROSS_ITEMS && v[P_VEC] &&
        (v[P_RW] > 1 || v[P_VEC] == 2))
        return false;
    if (v[P_VEC] == 2 && v[P_BC] < 16) return false; /* attention_blk: keys in float16 chunks */
    size_t D = problem ? ((const attention_problem *)problem)->D : 64;
    /* attention_blk keeps BR x RW rows of Q, scores and accumulators in private memory: a CPU
     * work-item's stack, a GPU's registers. Past 256 KiB it is no design, only a stack overflow. */
    if (v[P_VEC] == 2) {
        size_t bytes = (size_t)v[P_BR] * v[P_RW] * (2 * D + v[P_BC] + 8) * sizeof(float);
        const size_t v_block = (size_t)v[P_BC] * D * sizeof(float); /* a 16-bit V's widened block */
        if (problem && ((const attention_problem *)problem)->type[2] != TSR_F32 && v_block <= DIRECT_PANEL_BYTES)
            bytes += v_block;
        if (bytes > 256 * 1024) return false;
    }
    size_t group = (size_t)v[P_BR] * v[P_DS];
    if (group > dev->info.max_work_group_size || (size_t)v[P_DS] > dev->info.max_work_item_sizes[0] ||
        (size_t)v[P_BR] > dev->info.max_work_item_sizes[1])
        return false;
    return local_bytes(v, v[P_BC], D) <= dev->info.local_mem_bytes;
}

/* A program per head dimension, so the loops over D unroll, and per storage types of Q, K, V
 * and O. Ahead-of-time builds cover the common dimensions in fp32, uniform f16 and bf16, and
 * 16-bit inputs with an fp32 output; other dimensions and mixes compile on first use. */
static const int common_dims[] = {16, 32, 64, 80, 96, 128};
/* Storage types of Q, K, V and O for a variant's storage set (tsr_dtype_storage_set). */
static void common_types(int set, tsr_dtype types[4]) {
    tsr_dtype_storage_set(set, &types[0], &types[3]);
    types[1] = types[2] = types[0];
}
#define COMMON_DIMS ((int)TSR_COUNT(common_dims))

/* The type of the fast paths' copy of K (transposed for VEC=1, packed for VEC=2): fp32 whatever
 * K's type. Converting once while packing keeps the hot score loop on plain fp32 loads; 16-bit
 * panels halve their bytes, but the scores are compute-bound: measured side by side at L = 4096 they
 * were no faster (docs/attention.md), and the kernels keep KP_TYPE for devices where they are. */
static tsr_dtype packed_k_type(const tsr_dtype types[4]) {
    (void)types;
    return TSR_F32;
}

/* attention_blk with a packed K (VEC=2, not the one-block form) and a 16-bit V reads V widened
 * once a call into fp32 rows by pack_v (V_PACKED, cl/attention.cl), a second workspace as large
 * as the packed K's: widened in the kernel, each block of V was converted once per work-item that
 * reads it (64 times a head at L = 4096, RW = 8, BR = 8; see docs/attention.md). */
static bool v_packed(const tsr_config *cfg, const tsr_dtype types[4], bool direct) {
    return cfg->values[P_VEC] == 2 && !direct && types[2] != TSR_F32;
}

static void options_for(const tsr_config *cfg, size_t D, const tsr_dtype types[4], bool direct, char *out,
                        size_t size) {
    /* attention_blk only in programs that launch it (VEC=2): elsewhere (GPUs) its private arrays,
     * sized by BR, RW and D, would only cost compile time. `direct`: its one-block form, which
     * reads K in place (BLK_DIRECT, attention_launch_direct). */
    int n = snprintf(out, size, "-DHEAD_DIM=%zu %s%s%s", D, cfg->values[P_VEC] == 2 ? "-DVEC_BLK=1 " : "",
                     direct ? "-DBLK_DIRECT=1 " : "", v_packed(cfg, types, direct) ? "-DV_PACKED=1 " : "");
    /* Types only when some tensor is 16-bit: fp32 programs keep their options (and caches). */
    tsr_dtype kp = packed_k_type(types);
    if (n > 0 && (size_t)n < size && (types[0] || types[1] || types[2] || types[3] || kp))
        n += snprintf(out + n, size - (size_t)n, "-DQ_TYPE=%d -DK_TYPE=%d -DV_TYPE=%d -DO_TYPE=%d -DKP_TYPE=%d ",
                      (int)types[0], (int)types[1], (int)types[2], (int)types[3], (int)kp);
    if (n > 0 && (size_t)n < size) tsr_config_defines(&tsr_op_attention, cfg, out + n, size - (size_t)n);
}

static void attention_build_options(const tsr_config *cfg, int variant, char *out, size_t size) {
    tsr_dtype types[4];
    common_types(variant / COMMON_DIMS, types);
    options_for(cfg, (size_t)common_dims[variant % COMMON_DIMS], types, false, out, size);
}

/* offset + (B-1) sb + (H-1) sh + (L-1) sl + D, with overflow checks. */
static tsr_status tensor_extent(const char *name, size_t off, const size_t st[3], size_t B, size_t H, size_t L,
                                size_t D, size_t *need) {
    if (!tsr_strided_extent(off, 3, (const size_t[]){B, H, L}, st, D, need))
        return tsr_fail(TSR_ERR_OVERFLOW, "the extent of %s overflows", name);
    return TSR_SUCCESS;
}

static tsr_status attention_validate(const tsr_device *dev, const tsr_attention_desc *d, cl_mem q, cl_mem k, cl_mem v,
                                     cl_mem o, attention_problem *p) {
    if (!dev) return tsr_fail(TSR_ERR_INVALID_ARG, "device is NULL");
    if (!d) return tsr_fail(TSR_ERR_INVALID_ARG, "attention descriptor is NULL");
    if (!d->batch || !d->heads || !d->q_len || !d->kv_len || !d->head_dim)
        return tsr_fail(TSR_ERR_INVALID_ARG, "batch, heads, q_len, kv_len and head_dim must be at least 1 "
                        "(got %zu, %zu, %zu, %zu, %zu)", d->batch, d->heads, d->q_len, d->kv_len, d->head_dim);
    if (d->head_dim > ATTENTION_MAX_DIM)
        return tsr_fail(TSR_ERR_UNSUPPORTED, "head_dim %zu is larger than the supported %d", d->head_dim,
                        ATTENTION_MAX_DIM);
    size_t bh;
    if (d->q_len > ATTENTION_MAX_LEN || d->kv_len > ATTENTION_MAX_LEN)
        return tsr_fail(TSR_ERR_OVERFLOW, "q_len and kv_len must each be at most %d (got %zu, %zu)", ATTENTION_MAX_LEN,
                        d->q_len, d->kv_len);
    if (__builtin_mul_overflow(d->batch, d->heads, &bh) || bh > INT_MAX)
        return tsr_fail(TSR_ERR_OVERFLOW, "batch*heads must be at most %d (got %zu x %zu)", INT_MAX, d->batch,
                        d->heads);
    if (!(d->scale == d->scale) || isinf(d->scale)) return tsr_fail(TSR_ERR_INVALID_ARG, "scale must be finite");
    memset(p, 0, sizeof *p);
    p->B = d->batch, p->H = d->heads, p->Lq = d->q_len, p->Lk = d->kv_len, p->D = d->head_dim;
    p->scale = d->scale != 0.0f ? d->scale : (float)(1.0 / sqrt((double)d->head_dim));
    p->causal = d->causal;
    p->kv_lengths = d->kv_lengths;
    p->lse = d->lse;
    p->lse_off = d->lse_offset;
    const tsr_dtype types[4] = {d->q_type, d->k_type, d->v_type, d->o_type};
    const char *type_names[4] = {"q_type", "k_type", "v_type", "o_type"};
    tsr_status st = TSR_SUCCESS;
    for (int t = 0; t < 4; ++t) {
        TSR_CHECK(st, tsr_dtype_check(type_names[t], types[t]), done);
        p->type[t] = types[t];
    }
    const size_t *given[4] = {d->q_strides, d->k_strides, d->v_strides, d->o_strides};
    const size_t offs[4] = {d->q_offset, d->k_offset, d->v_offset, d->o_offset};
    const char *names[4] = {"q", "k", "v", "o"};
    const cl_mem mems[4] = {q, k, v, o};
    size_t span[5] = {0}; /* elements from each tensor's offset to its end: q, k, v, o, lse */
    for (int t = 0; t < 4; ++t) {
        size_t L = t == 0 || t == 3 ? p->Lq : p->Lk;
        p->off[t] = offs[t];
        if (!given[t][0] && !given[t][1] && !given[t][2]) { /* contiguous [B, H, L, D] */
            p->stride[t][2] = p->D;
            p->stride[t][1] = L * p->D;
            p->stride[t][0] = p->H * L * p->D;
        } else {
            memcpy(p->stride[t], given[t], sizeof p->stride[t]);
            if (p->stride[t][2] < p->D && L > 1)
                return tsr_fail(TSR_ERR_INVALID_ARG, "%s: the row stride %zu is smaller than head_dim %zu", names[t],
                                p->stride[t][2], p->D);
        }
        size_t need = 0;
        TSR_CHECK(st, tensor_extent(names[t], p->off[t], p->stride[t], p->B, p->H, L, p->D, &need), done);
        TSR_CHECK(st, tsr_check_buffer_typed(dev, mems[t], names[t], need, types[t]), done);
        span[t] = need - p->off[t];
    }
    if (!tsr_rows_disjoint(p->stride[3], (const size_t[]){p->B, p->H, p->Lq}, p->D))
        return tsr_fail(TSR_ERR_INVALID_ARG, "o: the strides {%zu, %zu, %zu} make output rows overlap",
                        p->stride[3][0], p->stride[3][1], p->stride[3][2]);
    if (d->kv_lengths)
        for (size_t b = 0; b < p->B; ++b)
            if (d->kv_lengths[b] < 0 || (size_t)d->kv_lengths[b] > p->Lk)
                return tsr_fail(TSR_ERR_INVALID_ARG, "kv_lengths[%zu] = %d is outside [0, kv_len = %zu]", b,
                                d->kv_lengths[b], p->Lk);
    if (d->lse) {
        size_t need;
        if (__builtin_mul_overflow(p->B * p->H, p->Lq, &need) || __builtin_add_overflow(need, d->lse_offset, &need))
            return tsr_fail(TSR_ERR_OVERFLOW, "the extent of lse overflows");
        TSR_CHECK(st, tsr_check_buffer(dev, d->lse, "lse", need), done);
        span[4] = need - d->lse_offset;
    }
    /* Outputs written while other work-groups still read the inputs: any shared byte races. Spans
     * (first to last element) are compared, so interleaved layouts that never touch are refused too. */
    const cl_mem all[5] = {q, k, v, o, d->lse};
    const size_t starts[5] = {p->off[0], p->off[1], p->off[2], p->off[3], d->lse_offset};
    const tsr_dtype all_types[5] = {types[0], types[1], types[2], types[3], TSR_F32};
    const char *labels[5] = {"q", "k", "v", "o", "lse"};
    for (int out = 3; out < 5; ++out)
        for (int t = 0; t < out && all[out]; ++t)
            TSR_CHECK(st,
                      tsr_check_disjoint_typed("attention", all[out], labels[out], starts[out], span[out],
                                               all_types[out], all[t], labels[t], starts[t], span[t], all_types[t],
                                               false),
                      done);
    /* Q, K and V are only read and may share a packed buffer, but bytes read as two types are a
     * caller's mistake, not a layout. */
    for (int a = 0; a < 3; ++a)
        for (int b = a + 1; b < 3; ++b)
            if (types[a] != types[b]) {
                tsr_ranges rel;
                TSR_CHECK(st,
                          tsr_ranges_relate_typed(all[a], starts[a], span[a], types[a], all[b], starts[b], span[b],
                                                  types[b], &rel),
                          done);
                if (rel != TSR_RANGES_DISJOINT)
                    return tsr_fail(TSR_ERR_INVALID_ARG, "attention: %s (%s) and %s (%s) share memory but have "
                                    "different types", labels[a], tsr_dtype_str(types[a]), labels[b],
                                    tsr_dtype_str(types[b]));
            }
done:
    return st;
}

static const char attention_lens_tag, attention_kernels_tag;

/* The per-batch key lengths as a device buffer (all kv_len when not given: then one buffer per
 * (batch, kv_len), kept in a launch record, so a repeated call allocates nothing). The caller
 * releases *out after its enqueues. */
static tsr_status kv_length_buffer(tsr_device *dev, const attention_problem *p, cl_mem *out) {
    tsr_launch_key key;
    tsr_launch rec;
    uint64_t generation = 0;
    if (!p->kv_lengths) {
        memset(&key, 0, sizeof key);
        key.tag = &attention_lens_tag;
        key.words[0] = (uint32_t)p->B, key.words[1] = (uint32_t)((uint64_t)p->B >> 32);
        key.words[2] = (uint32_t)p->Lk, key.words[3] = (uint32_t)((uint64_t)p->Lk >> 32);
        if (tsr_launch_find(dev, &key, &rec, &generation)) {
            *out = rec.aux;
            return TSR_SUCCESS;
        }
    }
    int *lens = malloc(p->B * sizeof *lens);
    if (!lens) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t b = 0; b < p->B; ++b) lens[b] = p->kv_lengths ? p->kv_lengths[b] : (int)p->Lk;
    cl_int err;
    *out = clCreateBuffer(dev->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, p->B * sizeof *lens, lens, &err);
    free(lens);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "clCreateBuffer(kv_lengths)", __FILE__, __LINE__);
    if (!p->kv_lengths) { /* never written again: calls on any queue may share it */
        memset(&rec, 0, sizeof rec);
        rec.aux = *out;
        tsr_launch_store(dev, &key, generation, &rec);
    }
    return TSR_SUCCESS;
}

/* A program per head dimension and storage types (options_for), as one int for the launch
 * records: D above the types' 2 bits each, and above D the one-block form's bit. */
#define KEY_DIRECT (1 << 30)
static int attention_program_key(size_t D, const tsr_dtype types[4]) {
    return (int)(D << 8) | (int)types[0] | (int)types[1] << 2 | (int)types[2] << 4 | (int)types[3] << 6;
}
static void attention_key_options(const tsr_config *cfg, int key, char *out, size_t size) {
    tsr_dtype types[4];
    for (int t = 0; t < 4; ++t) types[t] = (tsr_dtype)((key >> (2 * t)) & 3);
    options_for(cfg, (size_t)((key & ~KEY_DIRECT) >> 8), types, (key & KEY_DIRECT) != 0, out, size);
}

/* attention_blk for keys that fit one block (Lk <= BC): its BLK_DIRECT program reads K in place,
 * one launch and no workspace. */
static tsr_status attention_launch_direct(const attention_problem *p, tsr_kernel *kernel_obj, cl_mem lens,
                                          const tsr_config *cfg, cl_mem q, cl_mem k, cl_mem v, cl_mem o,
                                          cl_command_queue queue, cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    cl_kernel kernel = kernel_obj->kernel;
    cl_int Lq = (cl_int)p->Lq, Lk = (cl_int)p->Lk, Lkp = (cl_int)cfg->values[P_BC], H = (cl_int)p->H;
    cl_int causal = p->causal, write_lse = p->lse != NULL;
    cl_mem lse = p->lse ? p->lse : o;
    cl_ulong lse_off = p->lse_off;
    cl_uint arg = 0;
    tsr_kernel_lock(kernel_obj); /* the cached kernel's arguments are this call's until the enqueue */
#define SET(x) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(x), &(x)), unlock)
    SET(Lq); SET(Lk); SET(Lkp); SET(H); SET(p->scale); SET(causal);
    cl_ulong qo = p->off[0], qsb = p->stride[0][0], qsh = p->stride[0][1], qsl = p->stride[0][2];
    SET(q); SET(qo); SET(qsb); SET(qsh); SET(qsl);
    cl_ulong ko = p->off[1], ksb = p->stride[1][0], ksh = p->stride[1][1], ksl = p->stride[1][2];
    SET(k); SET(ko); SET(ksb); SET(ksh); SET(ksl);
    cl_ulong vo = p->off[2], vsb = p->stride[2][0], vsh = p->stride[2][1], vsl = p->stride[2][2];
    SET(v); SET(vo); SET(vsb); SET(vsh); SET(vsl);
    cl_ulong oo = p->off[3], osb = p->stride[3][0], osh = p->stride[3][1], osl = p->stride[3][2];
    SET(o); SET(oo); SET(osb); SET(osh); SET(osl);
    SET(lens); SET(lse); SET(lse_off); SET(write_lse);
#undef SET
    size_t rw = (size_t)cfg->values[P_RW] * (size_t)cfg->values[P_BR]; /* rows per work-item */
    /* work-groups of one, as attention_launch_vec's */
    size_t global[2] = {(p->Lq + rw - 1) / rw, p->B * p->H}, local[2] = {1, 1};
    TSR_CL_CHECK(status, tsr_enqueue_kernel(queue, kernel, 2, NULL, global, local, 0, NULL, event), unlock);
unlock:
    tsr_kernel_unlock(kernel_obj);
    return status;
}

/* The fast paths: K transposed (VEC=1) or packed in panels of BC keys (VEC=2) into a workspace,
 * then attention_vec or attention_blk. */
static tsr_status attention_launch_vec(tsr_device *dev, const attention_problem *p, tsr_kernel *const kernels[3],
                                       cl_mem lens, const tsr_config *cfg, cl_mem q, cl_mem k, cl_mem v, cl_mem o,
                                       cl_command_queue queue, cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    cl_kernel tk = kernels[0]->kernel, kernel = kernels[1]->kernel;
    cl_event transposed = NULL, ran = NULL;
    cl_int Lq = (cl_int)p->Lq, Lk = (cl_int)p->Lk, H = (cl_int)p->H, causal = p->causal;
    const bool blk = cfg->values[P_VEC] == 2;
    const size_t kpad = blk ? (size_t)cfg->values[P_BC] : 16; /* keys zero-padded to whole blocks */
    cl_int Lkp = (cl_int)((p->Lk + kpad - 1) / kpad * kpad);
    cl_int write_lse = p->lse != NULL;
    cl_mem lse = p->lse ? p->lse : o;
    cl_ulong lse_off = p->lse_off;
    /* The transposed K lives in a workspace shared by calls on this device: hold the lock. */
    pthread_mutex_lock(&dev->lock);
    cl_mem kt, vp = NULL;
    cl_event wait, vwait = NULL, vpacked = NULL;
    size_t kt_bytes, vp_bytes = 0;
    const bool pack_v = blk && v_packed(cfg, p->type, false); /* kernels[2]: pack_v */
    if (__builtin_mul_overflow(p->B * p->H * p->D, (size_t)Lkp * tsr_dtype_size(packed_k_type(p->type)),
                               &kt_bytes) ||
        kt_bytes > dev->info.max_alloc_bytes) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "the transposed K needs more than one allocation may hold on this "
                          "device (%llu bytes)", (unsigned long long)dev->info.max_alloc_bytes);
        goto done;
    }
    TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_TEMP0, kt_bytes, &kt, &wait), done);
    if (pack_v) {
        /* B H D Lk floats: no more than the packed K's B H D Lkp (Lkp >= Lk, fp32 panels), checked above */
        vp_bytes = p->B * p->H * p->D * p->Lk * sizeof(float);
        TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_TEMP1, vp_bytes, &vp, &vwait), done);
        cl_int Lk_ = (cl_int)p->Lk, H_ = (cl_int)p->H;
        cl_ulong vo = p->off[2], vsb = p->stride[2][0], vsh = p->stride[2][1], vsl = p->stride[2][2];
        cl_kernel pk = kernels[2]->kernel;
        cl_uint a = 0;
        tsr_kernel_lock(kernels[2]);
#define SET(x) TSR_CL_CHECK(status, tsr_set_arg(pk, a++, sizeof(x), &(x)), unlock_pv)
        SET(Lk_); SET(H_); SET(v); SET(vo); SET(vsb); SET(vsh); SET(vsl); SET(vp);
#undef SET
        {
            size_t vglobal[3] = {p->Lk, p->D / 16, p->B * p->H}, vlocal[3];
            TSR_CL_CHECK(status,
                         tsr_enqueue_kernel(queue, pk, 3, NULL, vglobal, tsr_spread_local(dev, 3, vglobal, vlocal), vwait ? 1 : 0, vwait ? &vwait : NULL,
                                            &vpacked),
                         unlock_pv);
        }
    unlock_pv:
        tsr_kernel_unlock(kernels[2]);
        if (status != TSR_SUCCESS) goto done;
    }
    cl_uint arg = 0;
    cl_ulong ko = p->off[1], ksb = p->stride[1][0], ksh = p->stride[1][1], ksl = p->stride[1][2];
    /* Each cached kernel's lock is held from its first argument to its enqueue. */
    tsr_kernel_lock(kernels[0]);
#define SET(K, x) TSR_CL_CHECK(status, tsr_set_arg(K, arg++, sizeof(x), &(x)), unlock_tk)
    SET(tk, Lk); SET(tk, Lkp); SET(tk, H); SET(tk, k); SET(tk, ko); SET(tk, ksb); SET(tk, ksh); SET(tk, ksl); SET(tk, kt);
#undef SET
    /* pack_k takes 16 elements of a key's row per work-item (VEC=2 needs D % 16 == 0) */
    size_t tglobal[3] = {(size_t)Lkp, blk ? p->D / 16 : p->D, p->B * p->H}, tlocal[3];
    TSR_CL_CHECK(
        status,
        tsr_enqueue_kernel(queue, tk, 3, NULL, tglobal, tsr_spread_local(dev, 3, tglobal, tlocal), wait ? 1 : 0, wait ? &wait : NULL, &transposed),
        unlock_tk);
unlock_tk:
    tsr_kernel_unlock(kernels[0]);
    if (status != TSR_SUCCESS) goto done;
    arg = 0;
    tsr_kernel_lock(kernels[1]);
#define SET(K, x) TSR_CL_CHECK(status, tsr_set_arg(K, arg++, sizeof(x), &(x)), unlock_kernel)
    SET(kernel, Lq); SET(kernel, Lk); SET(kernel, Lkp); SET(kernel, H); SET(kernel, p->scale); SET(kernel, causal);
    cl_ulong qo = p->off[0], qsb = p->stride[0][0], qsh = p->stride[0][1], qsl = p->stride[0][2];
    SET(kernel, q); SET(kernel, qo); SET(kernel, qsb); SET(kernel, qsh); SET(kernel, qsl);
    SET(kernel, kt);
    cl_ulong vo = p->off[2], vsb = p->stride[2][0], vsh = p->stride[2][1], vsl = p->stride[2][2];
    cl_mem vin = v;
    if (pack_v) /* pack_v's rows: [b H + h][j][d] */
        vin = vp, vo = 0, vsl = p->D, vsh = p->Lk * p->D, vsb = p->H * p->Lk * p->D;
    SET(kernel, vin); SET(kernel, vo); SET(kernel, vsb); SET(kernel, vsh); SET(kernel, vsl);
    cl_ulong oo = p->off[3], osb = p->stride[3][0], osh = p->stride[3][1], osl = p->stride[3][2];
    SET(kernel, o); SET(kernel, oo); SET(kernel, osb); SET(kernel, osh); SET(kernel, osl);
    SET(kernel, lens); SET(kernel, lse); SET(kernel, lse_off); SET(kernel, write_lse);
#undef SET
    size_t rw = (size_t)cfg->values[P_RW] * (blk ? (size_t)cfg->values[P_BR] : 1); /* rows per work-item */
    /* An explicit work-group of one: left to itself PoCL groups up to 512 work-items and its
     * work-group function then keeps every item's private tiles at once, which overflowed its
     * thread stack at L = 4096 once the rescale became a branch. The kernel is vectorized
     * within a work-item (float16 lanes over keys), so nothing is lost. */
    size_t global[2] = {(p->Lq + rw - 1) / rw, p->B * p->H}, local[2] = {1, 1};
    /* Always with an event, which orders the workspace's next writer: never a host wait. */
    {
        cl_event waits[2] = {transposed, vpacked};
        TSR_CL_CHECK(status, tsr_enqueue_kernel(queue, kernel, 2, NULL, global, local, vpacked ? 2 : 1, waits, &ran),
                     unlock_kernel);
    }
unlock_kernel:
    tsr_kernel_unlock(kernels[1]);
    if (status == TSR_SUCCESS) {
        tsr_workspace_set_last_use(dev, TSR_WS_TEMP0, ran);
        if (pack_v) tsr_workspace_set_last_use(dev, TSR_WS_TEMP1, ran);
    }
done:
    /* The transpose (the widening) ran into the workspace although the attention kernel failed to enqueue. */
    if (status != TSR_SUCCESS && transposed) tsr_workspace_set_last_use(dev, TSR_WS_TEMP0, transposed);
    if (status != TSR_SUCCESS && vpacked) tsr_workspace_set_last_use(dev, TSR_WS_TEMP1, vpacked);
    pthread_mutex_unlock(&dev->lock);
    if (transposed) clReleaseEvent(transposed);
    if (vpacked) clReleaseEvent(vpacked);
    if (ran) {
        if (event) *event = ran;
        else clReleaseEvent(ran);
    }
    return status;
}

/* Loop iterations one work-item of the generic kernel runs (every loop counted, nested ones in
 * full): per key tile the staging, the scores (BC keys, DSL elements each), the slices' sums,
 * the rescale and P V; its query row and output around them. */
static uint64_t generic_loop_iterations(const int *v, int bc, size_t Lk, size_t D) {
    uint64_t ds = (uint64_t)v[P_DS], dsl = (D + ds - 1) / ds, tiles = (Lk + (uint64_t)bc - 1) / (uint64_t)bc;
    uint64_t stage = v[P_STAGE] ? ((uint64_t)bc * D + (uint64_t)v[P_BR] * ds - 1) / ((uint64_t)v[P_BR] * ds) : 0;
    uint64_t per_tile = stage + 2 * (uint64_t)bc * (dsl + 1) + (ds > 1 ? (uint64_t)bc * (ds + 1) : 0) + dsl + 1;
    return tiles * (per_tile + 1) + 2 * dsl;
}

/* $TSR_TEST_ATTENTION_PACKED=1, the tests' and benches' hook: keys that fit one block are packed
 * by pack_k all the same (the form before the one-block kernel), so both forms can be run side
 * by side on one device. */
static bool packed_hook(void) {
    const char *text = getenv("TSR_TEST_ATTENTION_PACKED");
    return text && strcmp(text, "1") == 0;
}

/* Loops this long are checked against the device's loop limit (tsr_device_loop_limit): below
 * it no device tessera knows cuts loops, and the probe is not worth a compile. */
#define LOOPS_WORTH_CHECKING 30000u

static tsr_status attention_launch(tsr_device *dev, const attention_problem *p, const tsr_config *requested,
                                   cl_mem q, cl_mem k, cl_mem v, cl_mem o, cl_command_queue queue, cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    tsr_config cfg = *requested;
    bool vec = cfg.values[P_VEC] && p->D % 16 == 0;
    cfg.values[P_BC] = fitting_bc(dev, cfg.values, p->D);
    /* attention_blk pads the keys to whole blocks of BC and packs them (pack_k) before it scores
     * them: keys that fit half a block take the smallest block that holds them (16 at least), so a
     * short sequence packs and scores no padding past it (MiniLM's 16 tokens under BC=64: a
     * quarter of the packed K and of the scores). Same kernel, its program for the smaller BC. */
    if (vec && cfg.values[P_VEC] == 2)
        while (cfg.values[P_BC] > 16 && (size_t)cfg.values[P_BC] / 2 >= p->Lk) cfg.values[P_BC] /= 2;
    uint64_t loops = vec ? 0 : generic_loop_iterations(cfg.values, cfg.values[P_BC], p->Lk, p->D), limit = UINT64_MAX;
    if (loops > LOOPS_WORTH_CHECKING) {
        tsr_status probed = tsr_device_loop_limit(dev, &limit);
        if (probed != TSR_SUCCESS) return probed;
        /* 10% of margin for the estimate: a wrong answer is worse than a refusal. */
        if ((double)loops > 0.9 * (double)limit)
            return tsr_fail(TSR_ERR_UNSUPPORTED,
                            "attention: '%s' ends a work-item's loops after %llu iterations without an error "
                            "(llvmpipe does), and L = %zu with BC=%d DS=%d needs about %llu: the result would be "
                            "wrong; a configuration with more slices of D (DS) or shorter sequences stays within it",
                            dev->info.name, (unsigned long long)limit, p->Lk, cfg.values[P_BC], cfg.values[P_DS],
                            (unsigned long long)loops);
    }
    cl_mem lens = NULL;
    /* the kernels this call uses (attention_launch_vec's two, or "attention") */
    static const char *const generic_names[] = {"attention", NULL},
                             *const vec_names[] = {"transpose_k", "attention_vec", NULL},
                             *const blk_names[] = {"pack_k", "attention_blk", NULL},
                             *const blk_v_names[] = {"pack_k", "attention_blk", "pack_v", NULL};
    /* Keys that fit one block: attention_blk reads them in place (no pack_k launch), its private
     * panel (BC x D floats) within the private budget attention_config_ok keeps. */
    static const char *const direct_names[] = {"attention_blk", NULL};
    const bool direct = vec && cfg.values[P_VEC] == 2 && p->Lk <= (size_t)cfg.values[P_BC] &&
                        (size_t)cfg.values[P_BC] * p->D * sizeof(float) <= DIRECT_PANEL_BYTES && !packed_hook();
    if (direct) {
        /* Every work-item packs the panel itself: up to 8 groups of RW rows per item (of the
         * tuned BR at least), so that a short sequence is one item per head and its keys are
         * packed once, as by pack_k (MiniLM's 16 rows under RW=4 BR=1 were 4 items per head,
         * each packing the same 16 keys: 1.25x the CPU time of pack_k + attention_blk). */
        int br = cfg.values[P_BR];
        while (br < 8 && (size_t)br * (size_t)cfg.values[P_RW] < p->Lq) br *= 2;
        if ((size_t)br * (size_t)cfg.values[P_RW] * (2 * p->D + (size_t)cfg.values[P_BC] + 8) * sizeof(float) <=
            64 * 1024)
            cfg.values[P_BR] = br;
    }
    const char *const *names = !vec                         ? generic_names
                               : cfg.values[P_VEC] != 2       ? vec_names
                               : direct                       ? direct_names
                               : v_packed(&cfg, p->type, false) ? blk_v_names
                                                              : blk_names;
    tsr_kernel *kernels[TSR_LAUNCH_KERNELS];
    TSR_CHECK(status,
              tsr_launch_kernels(dev, &attention_kernels_tag, &cfg,
                                 attention_program_key(p->D, p->type) | (direct ? KEY_DIRECT : 0), 0, "attention",
                                 attention_key_options, names, kernels),
              done);
    TSR_CHECK(status, kv_length_buffer(dev, p, &lens), done);
    if (direct) {
        status = attention_launch_direct(p, kernels[0], lens, &cfg, q, k, v, o, queue, event);
        goto done;
    }
    if (vec) {
        status = attention_launch_vec(dev, p, kernels, lens, &cfg, q, k, v, o, queue, event);
        goto done;
    }
    cl_kernel kernel = kernels[0]->kernel;
    cl_int Lq = (cl_int)p->Lq, Lk = (cl_int)p->Lk, H = (cl_int)p->H, causal = p->causal;
    cl_int write_lse = p->lse != NULL;
    cl_mem lse = p->lse ? p->lse : o;
    cl_ulong lse_off = p->lse_off;
    cl_mem mems[4] = {q, k, v, o};
    cl_uint arg = 0;
    /* dimension 0: the D slices of a row, 1: rows, 2: batch x heads */
    size_t local[3] = {(size_t)cfg.values[P_DS], (size_t)cfg.values[P_BR], 1};
    size_t global[3] = {local[0], (p->Lq + local[1] - 1) / local[1] * local[1], p->B * p->H};
    tsr_kernel_lock(kernels[0]); /* the cached kernel's arguments are this call's until the enqueue */
#define SET(x) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(x), &(x)), unlock)
    SET(Lq); SET(Lk); SET(H); SET(p->scale); SET(causal);
    for (int t = 0; t < 4; ++t) {
        cl_ulong off = p->off[t], sb = p->stride[t][0], sh = p->stride[t][1], sl = p->stride[t][2];
        SET(mems[t]); SET(off); SET(sb); SET(sh); SET(sl);
    }
    SET(lens); SET(lse); SET(lse_off); SET(write_lse);
#undef SET
    TSR_CL_CHECK(status, tsr_enqueue_kernel(queue, kernel, 3, NULL, global, local, 0, NULL, event), unlock);
unlock:
    tsr_kernel_unlock(kernels[0]);
done:
    if (lens) clReleaseMemObject(lens); /* freed once the kernel is done with it */
    return status;
}

/* What every entry point does first: clear diagnostics, validate, pick the queue. */
static tsr_status attention_begin(tsr_device *dev, const tsr_attention_desc *desc, cl_mem q, cl_mem k, cl_mem v,
                                  cl_mem o, cl_command_queue queue, cl_event *event, attention_problem *p,
                                  cl_command_queue *cq) {
    tsr_clear_diagnostics();
    if (event) *event = NULL;
    tsr_status status = attention_validate(dev, desc, q, k, v, o, p);
    if (status != TSR_SUCCESS) return status;
    tsr_op_output(o);
    tsr_op_output(desc->lse);
    return tsr_resolve_queue(dev, queue, cq);
}

tsr_status tsr_attention(tsr_device *dev, const tsr_attention_desc *desc, cl_mem q, cl_mem k, cl_mem v, cl_mem o,
                         cl_command_queue queue, cl_event *event) {
    attention_problem p;
    cl_command_queue cq;
    tsr_status status = attention_begin(dev, desc, q, k, v, o, queue, event, &p, &cq);
    if (status != TSR_SUCCESS) return status;
    tsr_config cfg;
    /* the fields its class and legality check read */
    const uint32_t shape[] = {p.Lk < ATTENTION_SHORT_LIMIT, (uint32_t)p.D, (uint32_t)p.type[0], (uint32_t)p.type[1],
                              (uint32_t)p.type[2], (uint32_t)p.type[3]};
    TSR_CHECK(status, tsr_op_config_shape(dev, &tsr_op_attention, &p, shape, sizeof shape / sizeof *shape, &cfg), done);
    status = attention_launch(dev, &p, &cfg, q, k, v, o, cq, event);
    if (tsr_op_build_fallback(dev, &tsr_op_attention, &p, status, &cfg))
        status = attention_launch(dev, &p, &cfg, q, k, v, o, cq, event);
done:
    return status;
}

/* ---- the unfused baseline ---- */

size_t tsr_attention_unfused_workspace_bytes(const tsr_attention_desc *d) {
    if (!d) return 0;
    size_t n;
    if (__builtin_mul_overflow(d->heads, d->q_len, &n) || __builtin_mul_overflow(n, d->kv_len, &n) ||
        __builtin_mul_overflow(n, sizeof(float), &n))
        return SIZE_MAX;
    return n;
}

/* Row softmax over S (one batch entry's heads) with the mask; `b` picks kv_lengths. */
tsr_status tsr_attention_softmax(tsr_device *dev, const tsr_attention_desc *d, size_t b, cl_mem S,
                                 cl_command_queue queue, cl_event wait, cl_event *done) {
    tsr_status status = TSR_SUCCESS;
    tsr_config cfg;
    tsr_op_default_config(&tsr_op_attention, dev, "long", &cfg);
    cfg.values[P_BC] = fitting_bc(dev, cfg.values, 64);
    char options[128];
    options_for(&cfg, 64, (const tsr_dtype[4]){TSR_F32, TSR_F32, TSR_F32, TSR_F32}, false, options,
                sizeof options); /* the kernel does not depend on D or the types: any program */
    cl_program program = NULL;
    cl_kernel kernel = NULL;
    cl_int err;
    int len = d->kv_lengths ? d->kv_lengths[b] : (int)d->kv_len;
    cl_mem lens = NULL;
    TSR_CHECK(status, tsr_program_for(dev, "attention", options, "softmax_rows", &program), done);
    lens = clCreateBuffer(dev->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof len, &len, &err);
    TSR_CL_CHECK(status, err, done);
    kernel = clCreateKernel(program, "softmax_rows", &err);
    TSR_CL_CHECK(status, err, done);
    cl_int Lq = (cl_int)d->q_len, Lk = (cl_int)d->kv_len, H = (cl_int)d->heads, causal = d->causal;
    cl_ulong s_off = 0, lse_off = d->lse_offset + b * d->heads * d->q_len;
    cl_int write_lse = d->lse != NULL;
    cl_mem lse = d->lse ? d->lse : S;
    cl_uint arg = 0;
#define SET(x) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(x), &(x)), done)
    SET(Lq); SET(Lk); SET(H); SET(causal); SET(S); SET(s_off); SET(lens); SET(lse); SET(lse_off); SET(write_lse);
#undef SET
    size_t global[2] = {d->q_len, d->heads}, local[3];
    TSR_CL_CHECK(status,
                 tsr_enqueue_kernel(queue, kernel, 2, NULL, global, tsr_spread_local(dev, 2, global, local), wait ? 1 : 0, wait ? &wait : NULL, done),
                 done);
done:
    if (kernel) clReleaseKernel(kernel);
    if (lens) clReleaseMemObject(lens);
    return status;
}

tsr_status tsr_attention_unfused(tsr_device *dev, const tsr_attention_desc *desc, cl_mem q, cl_mem k, cl_mem v,
                                 cl_mem o, cl_command_queue queue, cl_event *event) {
    attention_problem p;
    cl_command_queue cq;
    tsr_status status = attention_begin(dev, desc, q, k, v, o, queue, event, &p, &cq);
    if (status != TSR_SUCCESS) return status;
    size_t bytes = tsr_attention_unfused_workspace_bytes(desc);
    if (bytes == SIZE_MAX || bytes > dev->info.max_alloc_bytes)
        return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "the unfused baseline needs %zu bytes of scores, more than one "
                        "allocation may hold on this device (%llu)", bytes, (unsigned long long)dev->info.max_alloc_bytes);
    tsr_attention_desc d = *desc;
    d.scale = p.scale;
    /* With one row a tensor's row stride is never used, and the contract accepts any; the
     * GEMM wants a leading dimension of at least the row, so give it head_dim. */
    size_t ld[4];
    for (int t = 0; t < 4; ++t) ld[t] = (t == 1 || t == 2 ? p.Lk : p.Lq) == 1 ? p.D : p.stride[t][2];
    /* O = P V: heads whose output rows interleave ([B, L, H, D]) go one GEMM each, since a
     * strided batch of matrices must not share a span */
    bool interleaved = p.stride[3][1] < (p.Lq - 1) * ld[3] + p.D;
    size_t per = interleaved ? 1 : p.H, ngemms = p.H / per;
    /* S = scale Q K^T reads Q and K in their types into fp32 scores; O = P V reads fp32 P and V in
     * its type and stores O in its own. */
    cl_event *outs = calloc(ngemms, sizeof *outs);
    if (!outs) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    /* The scores live in a workspace (allocated and zeroed once, reused by later calls) held
     * under the device's (recursive) lock for the whole pipeline. Every step waits for the
     * event of the one it needs, so the pipeline is right on out-of-order queues too: QK^T
     * after the last readers of S (`ready`), the softmax after QK^T, the P V GEMMs after the
     * softmax, and `ready` becomes a marker over the P V GEMMs of each batch entry. */
    pthread_mutex_lock(&dev->lock);
    cl_mem S;
    cl_event ready = NULL;
    status = tsr_workspace_get(dev, TSR_WS_TEMP1, bytes, &S, &ready);
    if (status != TSR_SUCCESS) {
        pthread_mutex_unlock(&dev->lock);
        free(outs);
        return status;
    }
    if (ready) clRetainEvent(ready);
    for (size_t b = 0; b < p.B && status == TSR_SUCCESS; ++b) {
        /* Keys past the sequence's length are masked: neither GEMM touches their rows, so
         * whatever K and V hold there (NaN, Inf) cannot reach O (0 * NaN is NaN). */
        size_t len = p.kv_lengths ? (size_t)p.kv_lengths[b] : p.Lk;
        cl_event e1 = NULL, e2 = NULL;
        /* S_h = scale Q_h K_h^T, all heads of this batch entry in one strided-batched GEMM */
        if (len > 0) {
            const tsr_matmul_desc qk = {.layout = TSR_ROW_MAJOR,
                                        .trans_a = TSR_NO_TRANS,
                                        .trans_b = TSR_TRANS,
                                        .m = p.Lq,
                                        .n = len,
                                        .k = p.D,
                                        .batch = p.H,
                                        .alpha = p.scale,
                                        .beta = 0.0f,
                                        .a = {p.type[0], p.off[0] + b * p.stride[0][0], ld[0], p.stride[0][1]},
                                        .b = {p.type[1], p.off[1] + b * p.stride[1][0], ld[1], p.stride[1][1]},
                                        .c = {TSR_F32, 0, p.Lk, p.Lq * p.Lk}};
            const tsr_matmul_extras after = {.input_ready = ready};
            status = tsr_matmul_pipeline(dev, &qk, &after, q, k, S, cq, &e1);
        }
        /* the softmax writes every row of S (zeros past the visible keys) and the LSE */
        if (status == TSR_SUCCESS) status = tsr_attention_softmax(dev, &d, b, S, cq, e1 ? e1 : ready, &e2);
        /* k = len: no key past the length is read; len = 0 writes O = 0 (beta = 0) */
        size_t n = 0;
        for (size_t h = 0; h < p.H && status == TSR_SUCCESS; h += per, ++n) {
            const tsr_matmul_desc pv = {
                .layout = TSR_ROW_MAJOR,
                .trans_a = TSR_NO_TRANS,
                .trans_b = TSR_NO_TRANS,
                .m = p.Lq,
                .n = p.D,
                .k = len,
                .batch = per,
                .alpha = 1.0f,
                .beta = 0.0f,
                .a = {TSR_F32, h * p.Lq * p.Lk, p.Lk, p.Lq * p.Lk},
                .b = {p.type[2], p.off[2] + b * p.stride[2][0] + h * p.stride[2][1], ld[2], p.stride[2][1]},
                .c = {p.type[3], p.off[3] + b * p.stride[3][0] + h * p.stride[3][1], ld[3], p.stride[3][1]}};
            const tsr_matmul_extras after = {.input_ready = e2};
            status = tsr_matmul_pipeline(dev, &pv, &after, S, v, o, cq, &outs[n]);
        }
        if (e1) clReleaseEvent(e1);
        if (e2) clReleaseEvent(e2);
        if (ready) clReleaseEvent(ready);
        ready = NULL;
        cl_int err = CL_SUCCESS;
        if (status == TSR_SUCCESS) {
            if (n == 1) {
                ready = outs[0];
                outs[0] = NULL;
            } else {
                err = clEnqueueMarkerWithWaitList(cq, (cl_uint)n, outs, &ready);
            }
        }
        for (size_t i = 0; i < ngemms; ++i) {
            if (outs[i]) clReleaseEvent(outs[i]);
            outs[i] = NULL;
        }
        if (err != CL_SUCCESS) status = tsr_fail_cl(err, "clEnqueueMarkerWithWaitList", __FILE__, __LINE__);
    }
    if (status != TSR_SUCCESS) { /* steps already enqueued may still read S: let them finish */
        clFinish(cq);
        if (ready) clReleaseEvent(ready);
        ready = NULL;
    }
    /* `ready` follows every step (each batch entry's first step waits for the previous one's
     * marker): the workspace's next writer and the caller wait for it. */
    tsr_workspace_set_last_use(dev, TSR_WS_TEMP1, ready);
    pthread_mutex_unlock(&dev->lock);
    free(outs);
    if (ready) {
        if (event) *event = ready;
        else clReleaseEvent(ready);
    }
    return status;
}

/* ---- the fixture: "B1 H4 L1024 D64" (q_len = kv_len = L), an optional dtype token ("f16": Q, K,
 * V and O in f16; "bf16/f32": Q, K, V in bf16, O fp32), checked against a double reference computed
 * from the inputs rounded to their types ---- */

typedef struct attention_fixture {
    tsr_attention_desc d;
    attention_problem p;
    cl_mem q, k, v, o;
    float *ho;
    size_t nrows;    /* query rows checked per head: every row, or 0, L/2 and L-1 beyond the limit */
    double *ref;     /* [B*H][nrows][D] */
} attention_fixture;

/* Above this many multiply-adds per product the check samples three rows of every head. */
#define FIXTURE_EXACT_LIMIT (1u << 29)

static const char *const attention_class_shapes[] = {"B1 H4 L1024 D64", "B1 H4 L128 D64"};
/* Smaller problems of the same classes for slow devices (tsr_op.class_shapes_reduced), about an
 * eighth and a sixty-fourth of the work; fixture.problem_class checks each stays in its class. */
static const char *const attention_class_shapes_reduced[] = {
    "B1 H1 L512 D64;B1 H1 L256 D64",
    ""};
static const tsr_report_shape attention_report_shapes[] = {
    {"attention-2048", "B1 H8 L2048 D64", "B1 H1 L64 D16"},
    {"attention-2048-f16", "B1 H8 L2048 D64 f16", "B1 H1 L64 D16 f16"},
    {NULL, NULL, NULL},
};

static size_t checked_row(const attention_fixture *t, size_t i) {
    if (t->nrows == t->p.Lq) return i;
    return i == 0 ? 0 : i == 1 ? t->p.Lq / 2 : t->p.Lq - 1;
}

static void attention_fixture_free(void *ctx) {
    attention_fixture *t = ctx;
    if (!t) return;
    cl_mem mems[4] = {t->q, t->k, t->v, t->o};
    for (int i = 0; i < 4; ++i)
        if (mems[i]) clReleaseMemObject(mems[i]);
    free(t->ho), free(t->ref);
    free(t);
}

static tsr_status attention_fixture_setup(tsr_device *dev, const char *shape, uint64_t seed, void **out) {
    size_t B, H, L, D;
    int used = 0;
    char token[32] = "", extra;
    tsr_dtype in = TSR_F32, out_type = TSR_F32;
    if (sscanf(shape, "B%zu H%zu L%zu D%zu%n", &B, &H, &L, &D, &used) != 4 ||
        (sscanf(shape + used, " %31s %c", token, &extra) >= 1 &&
         (sscanf(shape + used, " %31s %c", token, &extra) != 1 || !tsr_dtype_spec_parse(token, &in, &out_type))))
        return tsr_fail(TSR_ERR_INVALID_ARG, "attention: shape '%s' is not 'B1 H4 L1024 D64' with an optional "
                        "dtype token ('f16', 'bf16/f32')", shape);
    attention_fixture *t = calloc(1, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    t->d = (tsr_attention_desc){.batch = B, .heads = H, .q_len = L, .kv_len = L, .head_dim = D,
                                .q_type = in, .k_type = in, .v_type = in, .o_type = out_type};
    tsr_status status = TSR_SUCCESS;
    float *hq = NULL, *hk = NULL, *hv = NULL;
    double *s = NULL;
    size_t n;
    TSR_CHECK(status, tsr_size_mad("attention fixture", B * H, L * D, 0, &n), done);
    t->nrows = (double)B * H * L * L * D <= FIXTURE_EXACT_LIMIT ? L : (L < 3 ? L : 3);
    hq = malloc(n * 4), hk = malloc(n * 4), hv = malloc(n * 4), t->ho = malloc(n * 4);
    t->ref = malloc(B * H * t->nrows * D * sizeof(double));
    s = malloc(L * sizeof *s);
    if (!hq || !hk || !hv || !t->ho || !t->ref || !s) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    tsr_random_fill(hq, n, &seed, -1.0f, 1.0f);
    tsr_random_fill(hk, n, &seed, -1.0f, 1.0f);
    tsr_random_fill(hv, n, &seed, -1.0f, 1.0f);
    /* The reference reads exactly what the device holds. */
    tsr_dtype_round_array(in, hq, n);
    tsr_dtype_round_array(in, hk, n);
    tsr_dtype_round_array(in, hv, n);
    for (size_t i = 0; i < n; ++i) t->ho[i] = NAN; /* poisoned: a run must write every element */
    cl_int err = CL_SUCCESS;
    t->q = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, n * tsr_dtype_size(in), NULL, &err);
    if (err == CL_SUCCESS) t->k = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, n * tsr_dtype_size(in), NULL, &err);
    if (err == CL_SUCCESS) t->v = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, n * tsr_dtype_size(in), NULL, &err);
    if (err == CL_SUCCESS)
        t->o = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, n * tsr_dtype_size(out_type), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    TSR_CHECK(status, tsr_upload_typed(dev, t->q, in, hq, n), done);
    TSR_CHECK(status, tsr_upload_typed(dev, t->k, in, hk, n), done);
    TSR_CHECK(status, tsr_upload_typed(dev, t->v, in, hv, n), done);
    TSR_CHECK(status, tsr_upload_typed(dev, t->o, out_type, t->ho, n), done);
    TSR_CHECK(status, attention_validate(dev, &t->d, t->q, t->k, t->v, t->o, &t->p), done);
    for (size_t bh = 0; bh < B * H; ++bh)
        for (size_t r = 0; r < t->nrows; ++r)
            tsr_attention_reference_row(hq + (bh * L + checked_row(t, r)) * D, hk + bh * L * D, hv + bh * L * D, L, D,
                                        t->p.scale, s, t->ref + (bh * t->nrows + r) * D);
done:
    free(hq), free(hk), free(hv), free(s);
    if (status != TSR_SUCCESS) {
        attention_fixture_free(t);
        return status;
    }
    *out = t;
    return TSR_SUCCESS;
}

static tsr_status attention_fixture_run(tsr_device *dev, void *ctx, const tsr_config *cfg, cl_command_queue queue,
                                        cl_event *first, cl_event *last) {
    attention_fixture *t = ctx;
    cl_event done = NULL;
    tsr_status st = cfg ? attention_launch(dev, &t->p, cfg, t->q, t->k, t->v, t->o, queue, first || last ? &done : NULL)
                        : tsr_attention(dev, &t->d, t->q, t->k, t->v, t->o, queue, first || last ? &done : NULL);
    if (st != TSR_SUCCESS) return st;
    tsr_fixture_single_event(done, first, last);
    return TSR_SUCCESS;
}

static tsr_status attention_fixture_check(tsr_device *dev, void *ctx, double *rel_err) {
    attention_fixture *t = ctx;
    const attention_problem *p = &t->p;
    size_t n = p->B * p->H * p->Lq * p->D;
    tsr_status st = tsr_download_typed(dev, t->o, p->type[3], t->ho, n); /* widened to fp32 */
    if (st != TSR_SUCCESS) return st;
    tsr_error_sum sum = {0, 0};
    for (size_t bh = 0; bh < p->B * p->H; ++bh)
        for (size_t r = 0; r < t->nrows; ++r) {
            const float *got = t->ho + (bh * p->Lq + checked_row(t, r)) * p->D;
            const double *ref = t->ref + (bh * t->nrows + r) * p->D;
            for (size_t d = 0; d < p->D; ++d) tsr_error_add(&sum, got[d], ref[d]);
        }
    *rel_err = tsr_error_value(&sum);
    for (size_t i = 0; i < n; ++i) t->ho[i] = NAN; /* the next run cannot pass on this one's output */
    return tsr_upload_typed(dev, t->o, p->type[3], t->ho, n);
}

/* A 16-bit O's own rounding exceeds the fp32 tolerance: it is held to its type's bound over the
 * kv_len terms of each row's sums instead. */
static double attention_fixture_tolerance(const void *ctx) {
    const attention_problem *p = &((const attention_fixture *)ctx)->p;
    return fmax(tsr_op_attention.tolerance, tsr_dtype_error_bound(p->type[3], (double)p->Lk));
}

static void attention_fixture_work(const void *ctx, double *flops, double *bytes) {
    const attention_problem *p = &((const attention_fixture *)ctx)->p;
    *flops = 4.0 * p->B * p->H * p->Lq * p->Lk * p->D;
    double element_bytes = 0; /* q, k, v and o (q_len = kv_len) */
    for (int t = 0; t < 4; ++t) element_bytes += (double)tsr_dtype_size(p->type[t]);
    *bytes = element_bytes * p->B * p->H * p->Lq * p->D;
}

static void attention_fixture_describe(const void *ctx, char *out, size_t size) {
    const attention_problem *p = &((const attention_fixture *)ctx)->p;
    char dtype[32];
    tsr_dtype_spec_format(p->type[0], p->type[3], dtype, sizeof dtype);
    snprintf(out, size, "%zux%zux%zux%zu%s%s", p->B, p->H, p->Lq, p->D, dtype[0] ? " " : "", dtype);
}

static int attention_fixture_buffers(const void *ctx, cl_mem *buffers, int max) {
    const attention_fixture *t = ctx;
    cl_mem all[4] = {t->q, t->k, t->v, t->o};
    for (int i = 0; i < 4 && i < max; ++i) buffers[i] = all[i];
    return 4;
}

/* CPUs with lanes within a work-item (PoCL): attention_blk (VEC=2) alone, and only the parameters
 * it reads. It ignores STAGE and DS (the generic kernel's, for head dimensions it cannot take; the
 * tuned classes have D = 64), so every (STAGE, DS) pair of one (BR, BC, RW) is the same kernel: in
 * the full space 10 of them, and a 90-second `tessera tune --op attention` spent most of its
 * evaluations re-timing one kernel under another name. VEC=0 and VEC=1 measured about half VEC=2's
 * rate there at every length. Known entries outside this part (DS=8 ...) are still measured first;
 * `--space all` searches everything. Elsewhere (GPUs, llvmpipe, which cannot take VEC=2): all. */
static const char *attention_tuning_space(const tsr_device *dev, const char *problem_class) {
    (void)problem_class; /* one space for every class */
    if (dev->info.type == TSR_DEVICE_CPU && tsr_device_lanes(&dev->info) != TSR_LANES_ACROSS_ITEMS)
        return "VEC=2 STAGE=0 DS=1 BR=1,2,4,8,16,32 BC=16,32,64 RW=2,3,4,6,8";
    return NULL;
}

/* A class's programs are in its own storage types (fp32 classes fp32, "-f16" ones the f16 sets). */
static bool attention_variant_serves_class(const char *problem_class, int variant) {
    tsr_dtype types[4];
    common_types(variant / COMMON_DIMS, types);
    return tsr_dtype_types_serve_class(types, 4, problem_class);
}

static const char *attention_fixture_class(const void *fixture) {
    return attention_problem_class(&((const attention_fixture *)fixture)->p);
}

const tsr_op tsr_op_attention = {
    .name = "attention",
    .source_name = "attention",
    .params = attention_params,
    .nparams = ATTENTION_NPARAMS,
    .classes = attention_classes,
    .problem_class = attention_problem_class,
    .defaults = attention_defaults,
    .ndefaults = TSR_COUNT(attention_defaults),
    .implementations = attention_implementations,
    .nimplementations = TSR_COUNT(attention_implementations),
    .config_ok = attention_config_ok,
    .program_variants = COMMON_DIMS * TSR_STORAGE_SETS,
    .variant_serves_class = attention_variant_serves_class,
    .build_options = attention_build_options,
    .tuning_space = attention_tuning_space,
    .tolerance = 1e-5,
    .class_shapes = attention_class_shapes,
    .class_shapes_reduced = attention_class_shapes_reduced,
    .class_storage = TSR_CLASSES_PER_TYPE,
    .fixture = {.setup = attention_fixture_setup, .run = attention_fixture_run, .check = attention_fixture_check,
                .work = attention_fixture_work, .describe = attention_fixture_describe,
                .buffers = attention_fixture_buffers, .free = attention_fixture_free, .problem_class = attention_fixture_class,
                .tolerance = attention_fixture_tolerance},
    .demo = {.title = "attention B=1 H=4 L=128 D=64", .shapes = {"B1 H4 L128 D64"}, .runs = 1},
    .report_shapes = attention_report_shapes,
};
