/* The GEMM op: parameter space, defaults, argument checks and launch of its three implementations,
 * cl/gemm.cl ("tiled": packed panels or staged tiles, the CPU design), cl/gemm_gpu.cl ("gpu":
 * 2-D register tiles over double-buffered local tiles) and cl/gemm_smallm.cl ("smallm": few rows,
 * both operands read in place in any layout and type, so a small call is one launch). */
#include "internal.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The tuning parameters, X(NAME, KIND, DEFAULT, values...): see TSR_PARAM_DEF. */
#define GEMM_PARAMS(X)                                                                          \
    X(MWI, DEFINE, 1, 1, 2, 4, 6, 8, 12, 14, 16) /* rows of C per work-item (16: smallm only) */ \
    X(VW, DEFINE, 1, 1, 2, 4, 8, 16)    /* vector width along a row of C */                    \
    X(NVW, DEFINE, 1, 1, 2, 4)          /* vectors per work-item along a row */                \
    X(KU, DEFINE, 1, 1, 2, 4, 8)        /* unroll of the k loop */                             \
    X(WGM, DEFINE, 1, 1, 2, 4, 8, 16, 32) /* work-group rows */                                \
    X(WGN, DEFINE, 1, 1, 2, 4, 8, 16, 32) /* work-group columns */                             \
    X(KWG, DEFINE, 8, 8, 16, 32)        /* k per staged tile (only with SA or SB) */           \
    X(SA, DEFINE, 0, 0, 1)              /* stage A's tile in local memory */                   \
    X(SB, DEFINE, 0, 0, 1)              /* stage B's tile in local memory */                   \
    X(PACKA, DEFINE, 0, 0, 1)           /* pack A into contiguous panels first */              \
    X(PACKB, DEFINE, 0, 0, 1)           /* pack B into contiguous panels first */                \
    X(KC, HOST, 0, 0, 128, 256, 512, 1024) /* k per launch (0: all of K in one launch) */       \
    X(PK, DEFINE, 16, 16, 64, 256)      /* k-steps per work-item of the pack kernels */        \
    X(NT, DEFINE, 1, 1, 2, 4, 8)        /* column tiles per work-item, one after the other */  \
    X(KERNEL, HOST, 0, 0, 1, 2)         /* the implementation: 0 tiled (gemm.cl), 1 gpu, 2 smallm */ \
    X(PAD, DEFINE, 0, 0, 1)             /* gpu: local rows padded by VW floats */              \
    X(DB, DEFINE, 0, 0, 1)              /* gpu: double-buffered local tiles */                 \
    X(SPLIT, HOST, 0, 0, 1, 2, 4, 8)    /* gpu: slices of K (0 auto, 1 never: see gemm_split) */

enum { GEMM_PARAMS(TSR_PARAM_INDEX) GEMM_NPARAMS };
static const tsr_param_def gemm_params[] = {GEMM_PARAMS(TSR_PARAM_DEF)};

/* KERNEL selects the kernel file; each reads only its own parameters (the others normalize to
 * their declared defaults, so a search never measures one kernel twice). */
enum { GEMM_TILED = 0, GEMM_GPU = 1, GEMM_SMALLM = 2 };
static const tsr_implementation gemm_implementations[] = {
    {.name = "tiled", .value = GEMM_TILED, .params = "MWI VW NVW KU WGM WGN KWG SA SB PACKA PACKB KC PK NT"},
    {.name = "gpu", .value = GEMM_GPU, .params = "MWI VW NVW KU WGM WGN KWG PAD DB SPLIT"},
    {.name = "smallm", .value = GEMM_SMALLM, .params = "MWI VW NVW KU"},
};
static const char *const gemm_more_sources[] = {"gemm_gpu", "gemm_smallm", NULL};

/* Program variants, which a launch adds to the configuration: the transpositions (bits 0-1)
 * and the storage types, variant / 4 numbering the combinations of A's, B's and C's types
 * (tsr_dtype_combination). The first TSR_STORAGE_SETS (fp32, each 16-bit type throughout, 16-bit
 * A and B with an fp32 C) are the op's program_variants, so `tessera build-binaries` writes them;
 * the mixed sets after them are valid variants too, built when a launch asks. */
enum { TRANSPOSE_A = 1, TRANSPOSE_B = 2, GEMM_TRANSPOSES = 4 };
#define GEMM_TYPE_SETS (TSR_DTYPE_COUNT * TSR_DTYPE_COUNT * TSR_DTYPE_COUNT)
enum { GEMM_PROGRAM_VARIANTS = GEMM_TRANSPOSES * TSR_STORAGE_SETS };
/* The smallm kernel with the LayerNorm epilogue (SM_NORM, tsr_epilogue.norm_gamma): variants from
 * here up, the transpositions and types numbered as below it. Built when a launch asks (not by
 * build-binaries: a device without a compiler runs the GEMM and a LayerNorm launch instead). */
#define GEMM_NORM_VARIANT (GEMM_TRANSPOSES * GEMM_TYPE_SETS)
/* The smallm kernel reading B in strips (SM_BSTRIP: gemm_strips): variants from here up, the rest
 * numbered as below it (the LayerNorm's included). Built when a launch asks. */
#define GEMM_BSTRIP_VARIANT (2 * GEMM_NORM_VARIANT)

static tsr_gemm_types gemm_type_set(int variant) {
    tsr_dtype t[3];
    tsr_dtype_combination(variant / GEMM_TRANSPOSES % GEMM_TYPE_SETS, 3, t);
    return (tsr_gemm_types){t[0], t[1], t[2]};
}

static int gemm_type_set_index(const tsr_gemm_types *t) {
    return tsr_dtype_combination_index(3, (const tsr_dtype[]){t->a, t->b, t->c});
}

/* The fp32 classes; each has its 16-bit twins ("large-f16", TSR_CLASSES_PER_INPUT_TYPE): a 16-bit
 * class without a tuned entry of its own uses its fp32 class's. */
/* small-m is 1-8 rows, small-m16 9-16 (appended, so the other classes keep their indices): a
 * 16-token batch (MiniLM at batch 1) and an 8-row problem may want different tiles (16 rows per
 * work-item, say, halves the speed of the 8-row one), so each is tuned on its own problem.
 * small-m16 without an entry of its own uses small-m's (gemm_nearest_class), so databases from
 * before the split stay valid. */
static const char *const gemm_classes[] = {"large", "medium", "small", "small-m", "small-n", "batched", "small-m16", NULL};

static const tsr_default gemm_defaults[] = {
    /* CPUs that vectorize across work-items (Mesa's llvmpipe): 8x8 groups of light work-items
     * with 4x4 scalar tiles. llvmpipe compiles this in seconds; a float16 tile in a one-item group
     * took more than 8 minutes. No packing: each pack kernel is one more slow compile. */
    {TSR_DEVICE_CPU, TSR_LANES_ACROSS_ITEMS, NULL, "MWI=4 VW=1 NVW=4 KU=1 WGM=8 WGN=8 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0"},
    /* AVX-512 CPUs (PoCL preferring float16): 32 registers of 16 floats, so an 8x32 tile in
     * 16 of them. Not measured here (no such machine): a first guess that follows the ISA, so
     * tiles tuned for AVX2's 16 registers are not used there. */
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "small-n", "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=1"},
    /* small-m and small-m16: the smallm kernel, no pack launches (a MiniLM 1 x 16 call is one
     * launch). 8 rows x 2 vectors: at M = 8 with a row-major B, 16 rows per item (MWI=16, smallm
     * only) ran at half the speed (11.0 against 22.5 GFLOP/s in one tune on the Skylake-AVX512
     * Xeon); at 16 rows, MiniLM 1 x 16 on the Zen 5 EPYC with B row-major ('in_out' weights, the
     * runner's choice) took 1.05x the CPU time at MWI=16, 1.31x at MWI=8 NVW=1 (docs/minilm.md). */
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "small-m", "KERNEL=2 MWI=8 VW=16 NVW=2 KU=4"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "small-m16", "KERNEL=2 MWI=8 VW=16 NVW=2 KU=4"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "small", "MWI=8 VW=16 NVW=2 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "batched", "MWI=8 VW=16 NVW=2 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1"},
    /* medium: ResNet-50's 1x1 convolutions (A = the weights, out x in channels; B = the image,
     * 49-3136 pixels wide). A is read in place: packing it costs a pass over the weights per call,
     * which the few column tiles of a 196- or 49-pixel image do not repay (side by side on the
     * Skylake-AVX512 Xeon, batch 1: 1.7-1.9x on the 7x7 layers, 1.2-1.3x on the 14x14 ones, the
     * 28x28 ones 1.0-1.1x, the 56x56 ones level; at batch 8 see packs_shared_a). */
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, "medium", "MWI=8 VW=16 NVW=2 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=1 NT=4"},
    {TSR_DEVICE_CPU, TSR_LANES_IN_ITEM_WIDE, NULL, "MWI=8 VW=16 NVW=2 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1 NT=4"},
    /* PoCL runs a work-group per thread and loops over its items, and barriers make it
     * spill: one item per group, a 6x16 tile in float16 accumulators (12 of AVX2's 16
     * registers), and operands packed into contiguous panels beforehand. */
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "small-n", "MWI=6 VW=8 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=1"}, /* A is large: stream it */
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "small-m", "KERNEL=2 MWI=4 VW=8 NVW=2 KU=4"}, /* A is small: read in place (AVX2: not measured) */
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "small-m16", "KERNEL=2 MWI=4 VW=8 NVW=2 KU=4"}, /* as small-m (AVX2: not measured) */
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "small", "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0"}, /* packing costs more than it saves */
    {TSR_DEVICE_CPU, TSR_LANES_ANY, "batched", "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1"},
    /* Four column tiles per work-item: the work-item's rows of A are read from memory once for
     * 64 columns instead of 16, which is what keeps 4096^3 from streaming A (0.72 -> 0.97 of
     * OpenBLAS here); K blocking by launches (KC) measured slower on PoCL at 1024-4096. */
    {TSR_DEVICE_CPU, TSR_LANES_ANY, NULL, "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=1 PACKB=1 NT=4"},
    /* GPUs: the gpu kernel, 8x8 register tiles in 16x16 groups (128x128 tiles) where there are
     * enough of them to fill the device, 4x4 (64x64) below; thin tiles for thin matrices. */
    {TSR_DEVICE_GPU, TSR_LANES_ANY, "small-m", "KERNEL=1 MWI=2 VW=4 NVW=1 KU=4 WGM=8 WGN=32 KWG=16 PAD=1 DB=1"},
    {TSR_DEVICE_GPU, TSR_LANES_ANY, "small-m16", "KERNEL=1 MWI=2 VW=4 NVW=1 KU=4 WGM=8 WGN=32 KWG=16 PAD=1 DB=1"},
    {TSR_DEVICE_GPU, TSR_LANES_ANY, "small-n", "KERNEL=1 MWI=4 VW=4 NVW=1 KU=4 WGM=32 WGN=4 KWG=16 PAD=1 DB=1"},
    {TSR_DEVICE_GPU, TSR_LANES_ANY, "small", "KERNEL=1 MWI=4 VW=4 NVW=1 KU=4 WGM=16 WGN=16 KWG=16 PAD=1 DB=1"},
    {TSR_DEVICE_GPU, TSR_LANES_ANY, "medium", "KERNEL=1 MWI=4 VW=4 NVW=1 KU=4 WGM=16 WGN=16 KWG=16 PAD=1 DB=1"},
    {TSR_DEVICE_GPU, TSR_LANES_ANY, "batched", "KERNEL=1 MWI=4 VW=4 NVW=1 KU=4 WGM=16 WGN=16 KWG=16 PAD=1 DB=1"},
    {TSR_DEVICE_GPU, TSR_LANES_ANY, NULL, "KERNEL=1 MWI=8 VW=4 NVW=2 KU=4 WGM=16 WGN=16 KWG=16 PAD=1 DB=1"},
    /* Other devices: 16x16 work-groups sharing 64x64 tiles staged in local memory. */
    {0, TSR_LANES_ANY, NULL, "MWI=4 VW=4 NVW=1 KU=4 WGM=16 WGN=16 KWG=16 SA=1 SB=1 PACKA=0 PACKB=0"},
    /* Never a default (the row above matches first): the gpu kernel's start on any device, which
     * a tuning search measures as that implementation's seed. */
    {0, TSR_LANES_ANY, NULL, "KERNEL=1 MWI=4 VW=4 NVW=1 KU=4 WGM=8 WGN=8 KWG=16 PAD=1 DB=1"},
};

static bool simt_cpu(const tsr_device *dev) {
    return dev->info.type == TSR_DEVICE_CPU && tsr_device_lanes(&dev->info) == TSR_LANES_ACROSS_ITEMS;
}

/* Bytes of local memory the gpu kernel declares (cl/gemm_gpu.cl: k-major tiles, rows padded by
 * VW floats with PAD, two of each with DB, each rounded up to whole float4s). */
static size_t gpu_local_bytes(const int *v) {
    size_t pad = v[P_PAD] ? (size_t)v[P_VW] : 0;
    size_t a_tile = (size_t)v[P_KWG] * ((size_t)v[P_WGM] * v[P_MWI] + pad);
    size_t b_tile = (size_t)v[P_KWG] * ((size_t)v[P_WGN] * v[P_VW] * v[P_NVW] + pad);
    return (v[P_DB] ? 2 : 1) * ((a_tile + 3) / 4 + (b_tile + 3) / 4) * 16;
}

static bool gpu_config_ok(const tsr_device *dev, const int *v) {
    size_t mwg = (size_t)v[P_WGM] * v[P_MWI], nwg = (size_t)v[P_WGN] * v[P_VW] * v[P_NVW];
    /* tiles are staged in 4-element vectors along either dimension */
    if (mwg % 4 || nwg % 4) return false;
    /* 128 accumulators: with the operand slices and the next tile in flight, near the 255
     * registers a GPU thread can have */
    if (v[P_MWI] * v[P_VW] * v[P_NVW] > 128) return false;
    if (v[P_KU] > v[P_KWG]) return false;
    size_t wg = (size_t)v[P_WGM] * (size_t)v[P_WGN];
    if (wg > dev->info.max_work_group_size || (size_t)v[P_WGN] > dev->info.max_work_item_sizes[0] ||
        (size_t)v[P_WGM] > dev->info.max_work_item_sizes[1])
        return false;
    return gpu_local_bytes(v) <= dev->info.local_mem_bytes;
}

/* smallm (cl/gemm_smallm.cl): one-item groups; its tile as the tiled kernel's (with B
 * transposed it holds one block of K-vectors at a time, whatever the tile: VW of them at VW 8
 * and 16, else 4 x 4). */
static bool smallm_config_ok(const tsr_device *dev, const int *v) {
    int nwi = v[P_VW] * v[P_NVW];
    int max_tile = dev->info.preferred_vector_width[4] >= 16 ? 448 : 128;
    return nwi <= 64 && v[P_MWI] * nwi <= max_tile;
}

static bool gemm_config_ok(const tsr_device *dev, const void *problem, const tsr_config *cfg) {
    (void)problem;
    const int *v = cfg->values;
    if (v[P_KERNEL] == GEMM_SMALLM) return smallm_config_ok(dev, v);
    /* 16 rows: the smallm kernel's one-item tile of a 16-token batch; the tiled and gpu kernels'
     * searches keep the sizes they were measured over */
    if (v[P_MWI] > 14) return false;
    if (v[P_KERNEL] == GEMM_GPU) return gpu_config_ok(dev, v);
    int nwi = v[P_VW] * v[P_NVW];
    bool staged = v[P_SA] || v[P_SB];
    /* Beyond this the tile spills on every device we know: 128 floats (16 AVX2 registers);
     * where the device prefers 16-float vectors (AVX-512's 32 registers), 28 of them (448
     * floats: MWI=14 x 2 vectors), which leaves the row of B and the broadcast of A their own. */
    int max_tile = dev->info.preferred_vector_width[4] >= 16 ? 448 : 128;
    if (nwi > 64 || v[P_MWI] * nwi > max_tile) return false;
    /* A CPU that vectorizes across work-items wants groups of light items: one-item groups
     * leave lanes idle, and large tiles compile for minutes on llvmpipe. */
    if (simt_cpu(dev) && ((size_t)v[P_WGM] * v[P_WGN] < 16 || v[P_MWI] * nwi > 32 || v[P_KU] > 4)) return false;
    size_t wg = (size_t)v[P_WGM] * (size_t)v[P_WGN];
    if (wg > dev->info.max_work_group_size) return false;
    if ((size_t)v[P_WGM] > dev->info.max_work_item_sizes[0] || (size_t)v[P_WGN] > dev->info.max_work_item_sizes[1])
        return false;
    /* Staged tiles are loaded from the matrices: packing would only add a pass. */
    if (staged && (v[P_PACKA] || v[P_PACKB])) return false;
    /* Without staging KWG means nothing, nor PK without packing: one value, so searches see no
     * duplicates. */
    if (!staged && v[P_KWG] != gemm_params[P_KWG].default_value) return false;
    if (staged && v[P_PK] != gemm_params[P_PK].default_value) return false;
    size_t local = ((v[P_SA] ? (size_t)v[P_WGM] * v[P_MWI] : 0) + (v[P_SB] ? (size_t)v[P_WGN] * nwi : 0)) *
                   (size_t)v[P_KWG] * sizeof(float);
    if (local > dev->info.local_mem_bytes) return false;
    return true;
}

/* Transposed operands are packed unless staged: strided loads in the hot loop cost 5-15x. A
 * 16-bit operand follows its configuration like an fp32 one: unpacked, a 16-bit A widens in the
 * kernel a chunk of the tile's rows at a time (gemm.cl's A_WIDEN: a vector conversion per 16
 * elements, where a scalar vload_half per broadcast in the hot loop measured 0.35x of fp32), a
 * 16-bit B as its vectors are loaded (one conversion per VW elements). Forcing their packing
 * instead cost the extra pack launches and passes: 0.77-0.84x of fp32 at 64@128^3 on PoCL. */
static bool packs_a(const tsr_config *cfg, bool ta) {
    if (cfg->values[P_KERNEL] != GEMM_TILED) return false; /* gpu and smallm read any layout and type */
    return cfg->values[P_PACKA] || (ta && !cfg->values[P_SA] && !cfg->values[P_SB]);
}
static bool packs_b(const tsr_config *cfg, bool tb) {
    if (cfg->values[P_KERNEL] != GEMM_TILED) return false;
    return cfg->values[P_PACKB] || (tb && !cfg->values[P_SA] && !cfg->values[P_SB]);
}

/* Column tiles per work-item: staged tiles take one (a work-group stages one tile of B at a
 * time), so an override of SA or SB over a default with NT > 1 still runs. */
static int tiles_per_item(const tsr_config *cfg) {
    return cfg->values[P_SA] || cfg->values[P_SB] || cfg->values[P_KERNEL] != GEMM_TILED ? 1 : cfg->values[P_NT];
}

static const char *gemm_program_source(const tsr_config *cfg) {
    return cfg->values[P_KERNEL] == GEMM_GPU ? "gemm_gpu" : cfg->values[P_KERNEL] == GEMM_SMALLM ? "gemm_smallm" : "gemm";
}

static void gemm_build_options(const tsr_config *cfg, int variant, char *out, size_t size) {
    bool ta = variant & TRANSPOSE_A, tb = variant & TRANSPOSE_B;
    const tsr_gemm_types set = gemm_type_set(variant), *types = &set;
    tsr_config compiled = *cfg; /* the kernel reads the packing a launch does */
    compiled.values[P_PACKA] = packs_a(cfg, ta);
    compiled.values[P_PACKB] = packs_b(cfg, tb);
    compiled.values[P_NT] = tiles_per_item(cfg);
    int n = snprintf(out, size, "-cl-mad-enable ");
    if (n < 0 || (size_t)n >= size) return;
    tsr_config_defines(&tsr_op_gemm, &compiled, out + n, size - (size_t)n);
    size_t used = strlen(out);
    int n2 = snprintf(out + used, size - used, " -DTA=%d -DTB=%d", ta, tb);
    if (n2 < 0 || (size_t)n2 >= size - used) return;
    used += (size_t)n2;
    /* fp32 adds nothing: its programs (and their cache entries) stay what they were */
    if (types->a != TSR_F32 || types->b != TSR_F32 || types->c != TSR_F32) {
        n2 = snprintf(out + used, size - used, " -DA_TYPE=%d -DB_TYPE=%d -DC_TYPE=%d", (int)types->a, (int)types->b,
                      (int)types->c);
        if (n2 < 0 || (size_t)n2 >= size - used) return;
        used += (size_t)n2;
    }
    if (variant % GEMM_BSTRIP_VARIANT >= GEMM_NORM_VARIANT) {
        n2 = snprintf(out + used, size - used, " -DSM_NORM=1");
        if (n2 < 0 || (size_t)n2 >= size - used) return;
        used += (size_t)n2;
    }
    if (variant >= GEMM_BSTRIP_VARIANT) snprintf(out + used, size - used, " -DSM_BSTRIP=1");
}

static bool is_trans(tsr_transpose t) { return t == TSR_TRANS || t == TSR_CONJ_TRANS; }

/* A GEMM in the kernel's canonical form: row-major C, A and B possibly transposed. */
typedef struct gemm_problem {
    size_t m, n, k, batch;
    bool ta, tb;
    tsr_gemm_types types; /* of the canonical A, B and C */
    float alpha, beta;
    cl_mem a, b, c;
    size_t a_off, b_off, c_off, lda, ldb, ldc, a_stride, b_stride, c_stride;
    /* epilogue: bias and scale per canonical column (1) or row (2, column-major calls; 0: none),
     * residual in C's layout (res_type -1: none), activation */
    cl_mem bias, scale, res;
    size_t bias_off, bias_stride, scale_off, scale_stride, res_off;
    int bias_axis, scale_axis, res_type, act;
    /* the LayerNorm over C's rows (norm: set; row-major, batch 1) */
    bool norm;
    cl_mem norm_g, norm_b;
    size_t norm_g_off, norm_b_off;
    float norm_eps;
} gemm_problem;

static int gemm_base_class(const gemm_problem *p) {
    if (p->batch > 1) return 5; /* batched */
    if (p->n <= 16) return 4;   /* small-n */
    if (p->m <= 16) return p->m > 8 ? 6 : 3; /* small-m16, small-m */
    double volume = (double)p->m * p->n * p->k;
    if (volume <= 128.0 * 128 * 128) return 2; /* small */
    if (volume <= 512.0 * 512 * 512) return 1; /* medium: the panels still fit in L2, packing matters less */
    return 0;                                  /* large */
}

static const char *gemm_problem_class(const void *problem) {
    const gemm_problem *p = problem;
    return tsr_op_class(&tsr_op_gemm, gemm_base_class(p), (const tsr_dtype[]){p->types.a, p->types.b, p->types.c}, 3);
}

static tsr_status check_transpose(tsr_transpose t, const char *name) {
    if (t == TSR_NO_TRANS || t == TSR_TRANS || t == TSR_CONJ_TRANS) return TSR_SUCCESS;
    return tsr_fail(TSR_ERR_INVALID_ARG, "%s must be TSR_NO_TRANS, TSR_TRANS or TSR_CONJ_TRANS (got %d)", name, (int)t);
}

/* The descriptor's rules that need no buffer, in this order (see internal.h). */
tsr_status tsr_matmul_check(const tsr_matmul_desc *desc, bool literal, tsr_matmul_desc *out, size_t need[3]) {
    tsr_status status = TSR_SUCCESS;
    need[0] = need[1] = need[2] = 0;
    if (!desc) return tsr_fail(TSR_ERR_INVALID_ARG, "desc is NULL");
    tsr_matmul_desc d = *desc;
    TSR_CHECK(status, tsr_dtype_check("gemm: a.dtype", d.a.dtype), done);
    TSR_CHECK(status, tsr_dtype_check("gemm: b.dtype", d.b.dtype), done);
    TSR_CHECK(status, tsr_dtype_check("gemm: c.dtype", d.c.dtype), done);
    if (!literal) { /* the descriptor's zero defaults */
        if ((int)d.layout == 0) d.layout = TSR_ROW_MAJOR;
        if ((int)d.trans_a == 0) d.trans_a = TSR_NO_TRANS;
        if ((int)d.trans_b == 0) d.trans_b = TSR_NO_TRANS;
        if (d.batch == 0) d.batch = 1;
    }
    if (d.layout != TSR_ROW_MAJOR && d.layout != TSR_COL_MAJOR)
        return tsr_fail(TSR_ERR_INVALID_ARG, "layout must be TSR_ROW_MAJOR or TSR_COL_MAJOR (got %d)", (int)d.layout);
    TSR_CHECK(status, check_transpose(d.trans_a, "trans_a"), done);
    TSR_CHECK(status, check_transpose(d.trans_b, "trans_b"), done);
    const size_t m = d.m, n = d.n, k = d.k, batch = d.batch;
    if (m == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "m must be at least 1");
    if (n == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "n must be at least 1");
    if (batch == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "batch_count must be at least 1");
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return tsr_fail(TSR_ERR_OVERFLOW, "m, n and k must each be at most %d", INT_MAX);

    bool row = d.layout == TSR_ROW_MAJOR;
    /* Stored shapes: lines x line_length with the leading dimension along lines. */
    size_t a_lines = (row != is_trans(d.trans_a)) ? m : k, a_len = (row != is_trans(d.trans_a)) ? k : m;
    size_t b_lines = (row != is_trans(d.trans_b)) ? k : n, b_len = (row != is_trans(d.trans_b)) ? n : k;
    size_t c_lines = row ? m : n, c_len = row ? n : m;
    if (!literal) { /* ld 0: packed */
        if (d.a.ld == 0) d.a.ld = a_len ? a_len : 1;
        if (d.b.ld == 0) d.b.ld = b_len ? b_len : 1;
        if (d.c.ld == 0) d.c.ld = c_len;
    }
    const size_t lda = d.a.ld, ldb = d.b.ld, ldc = d.c.ld;
    if (lda < (a_len ? a_len : 1))
        return tsr_fail(TSR_ERR_INVALID_ARG, "lda = %zu is smaller than the %zu it must be at least", lda, a_len ? a_len : 1);
    if (ldb < (b_len ? b_len : 1))
        return tsr_fail(TSR_ERR_INVALID_ARG, "ldb = %zu is smaller than the %zu it must be at least", ldb, b_len ? b_len : 1);
    if (ldc < c_len)
        return tsr_fail(TSR_ERR_INVALID_ARG, "ldc = %zu is smaller than the %zu it must be at least", ldc, c_len);
    if (lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
        return tsr_fail(TSR_ERR_OVERFLOW, "leading dimensions must be at most %d", INT_MAX);
    size_t a_need, b_need, c_need;
    TSR_CHECK(status, tsr_matrix_extent("a", d.a.offset, a_lines, a_len, lda, d.a.batch_stride, batch, &a_need), done);
    TSR_CHECK(status, tsr_matrix_extent("b", d.b.offset, b_lines, b_len, ldb, d.b.batch_stride, batch, &b_need), done);
    TSR_CHECK(status, tsr_matrix_extent("c", d.c.offset, c_lines, c_len, ldc, d.c.batch_stride, batch, &c_need), done);
    if (batch > 1) {
        /* Overlapping outputs would race; inputs may alias (a shared weight, stride 0). */
        size_t c_span = (c_lines - 1) * ldc + c_len;
        if (d.c.batch_stride < c_span)
            return tsr_fail(TSR_ERR_INVALID_ARG, "c_stride = %zu makes the batch's C matrices overlap (each spans %zu)",
                            d.c.batch_stride, c_span);
    }
    need[0] = a_need, need[1] = b_need, need[2] = c_need;
    if (out) *out = d;
done:
    return status;
}

/* The epilogue's rules that need no operand: its activation, the residual's type, and its bias,
 * scale and residual against their real buffers (a checked descriptor: defaults explicit). */
static tsr_status check_epilogue(const tsr_device *dev, const tsr_matmul_desc *d) {
    const tsr_epilogue *epi = &d->epilogue;
    tsr_status status = TSR_SUCCESS;
    if ((int)epi->activation < TSR_ACT_NONE || epi->activation > TSR_ACT_GELU_ERF)
        return tsr_fail(TSR_ERR_INVALID_ARG, "epilogue activation must be a tsr_activation (got %d)",
                        (int)epi->activation);
    size_t bias_need = 0, scale_need = 0, res_need = 0;
    if (epi->bias) {
        TSR_CHECK(status,
                  tsr_matrix_extent("bias", epi->bias_offset, 1, d->n, d->n, epi->bias_stride, d->batch, &bias_need),
                  done);
        TSR_CHECK(status, tsr_check_buffer(dev, epi->bias, "bias", bias_need), done);
    }
    if (epi->scale) {
        TSR_CHECK(status,
                  tsr_matrix_extent("scale", epi->scale_offset, 1, d->n, d->n, epi->scale_stride, d->batch,
                                    &scale_need),
                  done);
        TSR_CHECK(status, tsr_check_buffer(dev, epi->scale, "epilogue scale", scale_need), done);
    }
    if (epi->residual) {
        TSR_CHECK(status, tsr_dtype_check("gemm: epilogue residual_type", epi->residual_type), done);
        const bool row = d->layout == TSR_ROW_MAJOR;
        TSR_CHECK(status,
                  tsr_matrix_extent("residual", epi->residual_offset, row ? d->m : d->n, row ? d->n : d->m, d->c.ld,
                                    d->c.batch_stride, d->batch, &res_need),
                  done);
        TSR_CHECK(status, tsr_check_buffer_typed(dev, epi->residual, "epilogue residual", res_need, epi->residual_type),
                  done);
    }
    if (epi->norm_gamma || epi->norm_beta) {
        if (!epi->norm_gamma || !epi->norm_beta)
            return tsr_fail(TSR_ERR_INVALID_ARG, "gemm: the epilogue LayerNorm needs both norm_gamma and norm_beta");
        if (d->layout != TSR_ROW_MAJOR)
            return tsr_fail(TSR_ERR_UNSUPPORTED, "gemm: the epilogue LayerNorm needs a row-major C");
        if (d->batch != 1)
            return tsr_fail(TSR_ERR_UNSUPPORTED, "gemm: the epilogue LayerNorm takes batch 1 (got %zu)", d->batch);
        if (!(epi->norm_eps > 0.0f) || !isfinite(epi->norm_eps))
            return tsr_fail(TSR_ERR_INVALID_ARG, "gemm: epilogue norm_eps must be > 0 and finite (got %g)",
                            (double)epi->norm_eps);
        size_t need = 0;
        TSR_CHECK(status, tsr_size_mad("gemm: epilogue norm_gamma", 1, epi->norm_gamma_offset, d->n, &need), done);
        TSR_CHECK(status, tsr_check_buffer(dev, epi->norm_gamma, "epilogue norm_gamma", need), done);
        TSR_CHECK(status, tsr_size_mad("gemm: epilogue norm_beta", 1, epi->norm_beta_offset, d->n, &need), done);
        TSR_CHECK(status, tsr_check_buffer(dev, epi->norm_beta, "epilogue norm_beta", need), done);
    }
done:
    return status;
}

/* The epilogue's buffers against the operands (check_epilogue first): C is written while the
 * bias, scale and residual are read, so none may share memory with it, except a residual that is
 * C itself (the same bytes in the same type); the residual must not overlap A or B either (when
 * they are read). */
static tsr_status check_epilogue_overlap(const tsr_matmul_desc *d, const size_t need[3], cl_mem a, cl_mem b, cl_mem c,
                                         bool reads_ab) {
    const tsr_epilogue *epi = &d->epilogue;
    tsr_status status = TSR_SUCCESS;
    const size_t nc = need[2] - d->c.offset;
    if (epi->bias)
        TSR_CHECK(status,
                  tsr_check_disjoint_typed("gemm", c, "c", d->c.offset, nc, d->c.dtype, epi->bias, "the epilogue bias",
                                           epi->bias_offset, (d->batch - 1) * epi->bias_stride + d->n, TSR_F32, false),
                  done);
    if (epi->scale)
        TSR_CHECK(status,
                  tsr_check_disjoint_typed("gemm", c, "c", d->c.offset, nc, d->c.dtype, epi->scale,
                                           "the epilogue scale", epi->scale_offset,
                                           (d->batch - 1) * epi->scale_stride + d->n, TSR_F32, false),
                  done);
    if (epi->residual) {
        const tsr_dtype rt = epi->residual_type;
        TSR_CHECK(status,
                  tsr_check_disjoint_typed("gemm", c, "c", d->c.offset, nc, d->c.dtype, epi->residual,
                                           "the epilogue residual", epi->residual_offset, nc, rt, rt == d->c.dtype),
                  done);
        if (reads_ab) {
            TSR_CHECK(status,
                      tsr_check_disjoint_typed("gemm", epi->residual, "the epilogue residual", epi->residual_offset, nc,
                                               rt, a, "a", d->a.offset, need[0] - d->a.offset, d->a.dtype, false),
                      done);
            TSR_CHECK(status,
                      tsr_check_disjoint_typed("gemm", epi->residual, "the epilogue residual", epi->residual_offset, nc,
                                               rt, b, "b", d->b.offset, need[1] - d->b.offset, d->b.dtype, false),
                      done);
        }
    }
    if (epi->norm_gamma) {
        TSR_CHECK(status,
                  tsr_check_disjoint_typed("gemm", c, "c", d->c.offset, nc, d->c.dtype, epi->norm_gamma,
                                           "the epilogue norm_gamma", epi->norm_gamma_offset, d->n, TSR_F32, false),
                  done);
        TSR_CHECK(status,
                  tsr_check_disjoint_typed("gemm", c, "c", d->c.offset, nc, d->c.dtype, epi->norm_beta,
                                           "the epilogue norm_beta", epi->norm_beta_offset, d->n, TSR_F32, false),
                  done);
    }
done:
    return status;
}

/* The buffers of a checked descriptor `d` (defaults explicit, need[] from tsr_matmul_check) against
 * their real sizes and each other, then the call in canonical form. */
static tsr_status gemm_bind(const tsr_device *dev, const tsr_matmul_desc *d, const size_t need[3], cl_mem a, cl_mem b,
                            cl_mem c, gemm_problem *p) {
    tsr_status status = TSR_SUCCESS;
    const size_t k = d->k;
    const bool row = d->layout == TSR_ROW_MAJOR, reads_ab = k > 0 && d->alpha != 0.0f;
    const size_t a_need = need[0], b_need = need[1], c_need = need[2];
    const tsr_matrix *A = &d->a, *B = &d->b, *C = &d->c;
    /* A and B are checked against the shapes given even when alpha == 0 skips reading them, as
     * CLBlast does: a buffer too small for its matrix is a caller bug either way. */
    TSR_CHECK(status, tsr_check_buffer_typed(dev, a, "a", k > 0 ? a_need : 0, A->dtype), done);
    TSR_CHECK(status, tsr_check_buffer_typed(dev, b, "b", k > 0 ? b_need : 0, B->dtype), done);
    TSR_CHECK(status, tsr_check_buffer_typed(dev, c, "c", c_need, C->dtype), done);
    /* C written while A or B is read would race: their extents (in bytes of each one's type)
     * must not share memory. Operands that are not read may be anything. */
    if (reads_ab) {
        TSR_CHECK(status,
                  tsr_check_disjoint_typed("gemm", c, "c", C->offset, c_need - C->offset, C->dtype, a, "a", A->offset,
                                           a_need - A->offset, A->dtype, false),
                  done);
        TSR_CHECK(status,
                  tsr_check_disjoint_typed("gemm", c, "c", C->offset, c_need - C->offset, C->dtype, b, "b", B->offset,
                                           b_need - B->offset, B->dtype, false),
                  done);
    }

    /* Column-major C is row-major C^T = op(B)^T op(A)^T: swap the operands. */
    memset(p, 0, sizeof *p);
    p->batch = d->batch;
    p->alpha = reads_ab ? d->alpha : 0.0f;
    p->beta = d->beta;
    p->k = reads_ab ? k : 0;
    p->c = c;
    p->c_off = C->offset;
    p->ldc = C->ld;
    p->c_stride = C->batch_stride;
    TSR_CHECK(status, check_epilogue_overlap(d, need, a, b, c, reads_ab), done);
    const tsr_epilogue *epi = &d->epilogue;
    p->bias = p->scale = p->res = c; /* a valid buffer the kernel never reads without its part */
    p->act = (int)epi->activation;
    p->res_type = -1;
    if (epi->bias) {
        p->bias = epi->bias;
        p->bias_off = epi->bias_offset;
        p->bias_stride = epi->bias_stride;
        p->bias_axis = row ? 1 : 2; /* the call's columns are the canonical rows when column-major */
    }
    if (epi->scale) {
        p->scale = epi->scale;
        p->scale_off = epi->scale_offset;
        p->scale_stride = epi->scale_stride;
        p->scale_axis = row ? 1 : 2;
    }
    if (epi->residual) {
        /* A residual that is C itself (check_epilogue_overlap allowed only the very same bytes and
         * type) is C's old value, which beta already reads, element by element in the work-item
         * that writes it: beta + 1 computes the same sum in every launch form, K blocking
         * included (its first launch overwrites C before the last one would read a residual). */
        tsr_ranges rel = TSR_RANGES_DISJOINT;
        TSR_CHECK(status,
                  tsr_ranges_relate_typed(c, C->offset, c_need - C->offset, C->dtype, epi->residual,
                                          epi->residual_offset, c_need - C->offset, epi->residual_type, &rel),
                  done);
        if (rel == TSR_RANGES_SAME) {
            p->beta += 1.0f;
        } else {
            p->res = epi->residual;
            p->res_off = epi->residual_offset;
            p->res_type = (int)epi->residual_type;
        }
    }
    if (epi->norm_gamma) { /* row-major and batch 1 (check_epilogue) */
        p->norm = true;
        p->norm_g = epi->norm_gamma;
        p->norm_b = epi->norm_beta;
        p->norm_g_off = epi->norm_gamma_offset;
        p->norm_b_off = epi->norm_beta_offset;
        p->norm_eps = epi->norm_eps;
    }
    if (row) {
        p->m = d->m;
        p->n = d->n;
        p->ta = is_trans(d->trans_a);
        p->tb = is_trans(d->trans_b);
        p->types = (tsr_gemm_types){A->dtype, B->dtype, C->dtype};
        p->a = a;
        p->a_off = A->offset;
        p->lda = A->ld;
        p->a_stride = A->batch_stride;
        p->b = b;
        p->b_off = B->offset;
        p->ldb = B->ld;
        p->b_stride = B->batch_stride;
    } else {
        p->m = d->n;
        p->n = d->m;
        p->ta = is_trans(d->trans_b);
        p->tb = is_trans(d->trans_a);
        p->types = (tsr_gemm_types){B->dtype, A->dtype, C->dtype}; /* A and B trade places, types too */
        p->a = b;
        p->a_off = B->offset;
        p->lda = B->ld;
        p->a_stride = B->batch_stride;
        p->b = a;
        p->b_off = A->offset;
        p->ldb = A->ld;
        p->b_stride = A->batch_stride;
    }
done:
    return status;
}

/* The problem a configuration is chosen for: the canonical sizes and types, with `k` as read
 * (0 when alpha is 0), without buffers. */
static gemm_problem gemm_shape(const tsr_matmul_desc *d, bool class_by_shape) {
    gemm_problem p;
    memset(&p, 0, sizeof p);
    bool row = d->layout == TSR_ROW_MAJOR;
    p.m = row ? d->m : d->n;
    p.n = row ? d->n : d->m;
    p.k = d->k > 0 && d->alpha != 0.0f ? d->k : 0;
    p.batch = class_by_shape ? 1 : d->batch; /* class_by_shape: classify by one matrix's shape */
    p.types = row ? (tsr_gemm_types){d->a.dtype, d->b.dtype, d->c.dtype}
                  : (tsr_gemm_types){d->b.dtype, d->a.dtype, d->c.dtype};
    return p;
}

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }
static size_t ceil_div(size_t x, size_t to) { return (x + to - 1) / to; }

/* Enqueue a pack kernel writing operand `which` ('a' or 'b') into workspace `slot`. */
static tsr_status enqueue_pack(tsr_device *dev, tsr_kernel *pack, cl_command_queue queue, const gemm_problem *p,
                               const tsr_config *cfg, char which, cl_mem dst, size_t dst_stride, cl_event wait, cl_event input_ready,
                               cl_event *done) {
    tsr_status status = TSR_SUCCESS;
    cl_kernel kernel = pack->kernel;
    cl_int rows = (cl_int)(which == 'a' ? p->m : p->n), K = (cl_int)p->k;
    cl_int ld = (cl_int)(which == 'a' ? p->lda : p->ldb);
    cl_mem src = which == 'a' ? p->a : p->b;
    cl_ulong off = which == 'a' ? p->a_off : p->b_off, stride = which == 'a' ? p->a_stride : p->b_stride;
    cl_ulong dstride = dst_stride;
    size_t tile = which == 'a' ? (size_t)cfg->values[P_MWI] : (size_t)cfg->values[P_VW] * cfg->values[P_NVW];
    /* a shared operand (stride 0, e.g. conv2d's weights across a batch of images) is packed once;
     * the tiles first where they lie along the source's rows (gemm.cl's PACK_A_KB_DIM) */
    size_t kb = ceil_div(p->k, (size_t)cfg->values[P_PK]), tiles = ceil_div(which == 'a' ? p->m : p->n, tile);
    bool along_rows = which == 'a' ? p->ta : !p->tb;
    size_t global[3] = {along_rows ? tiles : kb, along_rows ? kb : tiles, stride ? p->batch : 1};
    cl_event waits[2];
    cl_uint nwaits = 0;
    if (wait) waits[nwaits++] = wait;
    if (input_ready) waits[nwaits++] = input_ready;
    cl_uint arg = 0;
    tsr_kernel_lock(pack); /* the cached kernel's arguments are this call's until the enqueue */
#define SET(x) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(x), &(x)), unlock)
    SET(rows); SET(K); SET(src); SET(off); SET(ld); SET(stride); SET(dst); SET(dstride);
#undef SET
    size_t local[3];
    TSR_CL_CHECK(status,
                 tsr_enqueue_kernel(queue, kernel, 3, NULL, global, tsr_spread_local(dev, 3, global, local), nwaits,
                                    nwaits ? waits : NULL, done),
                 unlock);
unlock:
    tsr_kernel_unlock(pack);
    return status;
}

/* The cached kernels a configuration runs for p's program variant: found in the device's launch
 * records by the configuration's values and the variant (no option text, no program look-up),
 * made on the first call of each. */
typedef struct gemm_kernels {
    tsr_kernel *gemm, *pack_a, *pack_b;
} gemm_kernels;
static const char gemm_kernels_tag;

static const char gemm_pack_a_tag, gemm_pack_b_tag;

/* The configuration and program variant of operand `which`'s pack program while tuning: every
 * parameter the pack kernel does not read at its declared default, the other operand fp32 and
 * untransposed, C fp32. pack_a reads MWI, PK, TA and A's type; pack_b VW, NVW, PK, TB and B's. */
static void pack_program(const tsr_config *cfg, int variant, char which, tsr_config *pc, int *pvariant) {
    tsr_config_declared(&tsr_op_gemm, pc);
    tsr_gemm_types t = gemm_type_set(variant);
    if (which == 'a') {
        pc->values[P_MWI] = cfg->values[P_MWI];
        t.b = TSR_F32;
    } else {
        pc->values[P_VW] = cfg->values[P_VW];
        pc->values[P_NVW] = cfg->values[P_NVW];
        t.a = TSR_F32;
    }
    pc->values[P_PK] = cfg->values[P_PK];
    t.c = TSR_F32;
    *pvariant = (variant & (which == 'a' ? TRANSPOSE_A : TRANSPOSE_B)) + GEMM_TRANSPOSES * gemm_type_set_index(&t);
}

/* One pack kernel from its own program (tuning: see pack_program). */
static tsr_status pack_kernel_for(tsr_device *dev, const tsr_config *cfg, int variant, char which, tsr_kernel **out) {
    tsr_config pc;
    int pv;
    pack_program(cfg, variant, which, &pc, &pv);
    const char *const names[] = {which == 'a' ? "pack_a" : "pack_b", NULL};
    tsr_kernel *k[TSR_LAUNCH_KERNELS];
    tsr_status status = tsr_launch_kernels(dev, which == 'a' ? &gemm_pack_a_tag : &gemm_pack_b_tag, &pc, pv, 0, "gemm",
                                           gemm_build_options, names, k);
    if (status == TSR_SUCCESS) *out = k[0];
    return status;
}

static tsr_status gemm_kernels_for(tsr_device *dev, const tsr_config *cfg, int variant, bool pack_a, bool pack_b,
                                   gemm_kernels *out) {
    /* While the device tunes, a candidate's program holds the GEMM kernel it launches and nothing
     * else is compiled for it: the pack kernels come from programs keyed by what they read, which
     * the candidates of a search share (PoCL compiles each launched kernel of a new program, ~0.15
     * s per pack kernel here). The GEMM program's options, and so its cache key, stay the ones an
     * ordinary launch builds; ordinary launches keep one program for all three kernels. */
    const bool split = atomic_load_explicit(&dev->tuning, memory_order_relaxed) > 0;
    const char *const names[] = {"gemm", pack_a && !split ? "pack_a" : "", pack_b && !split ? "pack_b" : "", NULL};
    tsr_kernel *k[TSR_LAUNCH_KERNELS];
    tsr_status status = tsr_launch_kernels(dev, &gemm_kernels_tag, cfg, variant,
                                           (uint32_t)(pack_a | pack_b << 1 | split << 2), gemm_program_source(cfg),
                                           gemm_build_options, names, k);
    if (status == TSR_SUCCESS && split) {
        if (pack_a) status = pack_kernel_for(dev, cfg, variant, 'a', &k[1]);
        if (status == TSR_SUCCESS && pack_b) status = pack_kernel_for(dev, cfg, variant, 'b', &k[2]);
    }
    if (status == TSR_SUCCESS) *out = (gemm_kernels){k[0], k[1], k[2]};
    return status;
}

/* A medium GEMM whose A is shared by a whole batch (a_stride 0: conv2d's weights across the
 * images of a 1x1 layer) is packed even where the configuration reads A in place (PACKA=0, the
 * AVX-512 medium default): one packing then serves every image, and the packed panels read
 * faster than A's rows. For one image the packing costs more than it saves (1x1 layers at batch
 * 1: 1.2-1.9x without it on the 14x14 and 7x7 layers); at batch 8 packing was ahead by 5% over
 * ResNet-50's 1x1 layers. Only for CPUs that vectorize inside a work-item and unstaged tiles. */
static bool packs_shared_a(const tsr_device *dev, const gemm_problem *p, const tsr_config *cfg) {
    const int *v = cfg->values;
    if (p->batch < 2 || p->a_stride != 0 || p->k == 0 || dev->info.type != TSR_DEVICE_CPU || simt_cpu(dev)) return false;
    if (v[P_KERNEL] != GEMM_TILED || v[P_PACKA] || v[P_SA] || v[P_SB]) return false;
    gemm_problem one = *p;
    one.batch = 1;
    return gemm_base_class(&one) == 1; /* medium */
}

/* ---- split-K (the gpu implementation) ----
 * The gpu kernel gives each work-group one MWG x NWG tile of C and all of K. Where a problem has
 * few tiles and a long K, most compute units idle: on the H100 (132 SMs), with the 128 x 128
 * tiles of the large-class default, 512x768x3072 (BERT's second FFN GEMM) is 4 x 6 = 24 tiles
 * and ran at 0.50x CLBlast, 512x768x768 at 0.56x; 512^3 (the medium default's 64 x 64 tiles:
 * 64 of them) at 0.68x (docs/gpu-h100.md). Split-K cuts K into S slices of `depth` k-steps (a
 * multiple of KWG; the last slice shorter, none empty), computes the S products in one launch
 * (dimension 2 walks the slices) into an fp32 workspace, alpha 1, beta 0 and no epilogue, then
 * gemm_reduce sums them in slice order and applies alpha, beta C, the scale, bias, residual and
 * activation as the unsplit kernel does, rounding a 16-bit C once.
 *
 * SPLIT=0 (auto) picks S by a model of the launch, for batch 1 only (a batch already has a
 * group per tile per matrix), where the tiles number fewer than twice the compute units and K
 * holds at least two slices of SPLIT_MIN_DEPTH: with W = ceil(tiles * S / CU) waves of
 * one group per compute unit (the 128 x 128 tile's registers leave room for one group of 256
 * items per SM), each wave SPLIT_SLICE_COST k-steps of set-up and store more than its depth,
 *     cost(S) = W * (depth + SPLIT_SLICE_COST) + [S > 1] * 40 * tiles * (S + 1) / CU,
 * the last term the workspace's traffic (S slices written, read back, C read and written:
 * ~(2S + 2) * 4 bytes per element against 2 * MWG * NWG flops per tile and k-step, at the ~10
 * flop/byte of a GPU's fp32 peak over its memory bandwidth, in the same k-step units). S runs
 * over 2..SPLIT_MAX with slices at least SPLIT_MIN_DEPTH deep; the cheapest wins when it is
 * under 0.9x of cost(1) (ties: the fewer slices). On 132 CUs this picks 512x768x3072 -> S = 5
 * (24 tiles x 5 = 120 groups of 624-deep slices: one wave instead of 3072 k-steps on 24 SMs),
 * 512x768x768 -> S = 5 (160 deep), 512^3 with 64 x 64 tiles -> S = 2 (128 groups, 256 deep);
 * 2048^3 (256 tiles) never splits. SPLIT=2, 4, 8 force that many slices (fewer when K holds fewer
 * KWG-deep slices or the workspace would pass the device's largest buffer) where the tiles number
 * fewer than twice the compute units (at least 16), 1 never splits. A split whose workspace cannot
 * be allocated runs unsplit. */
enum { SPLIT_MIN_DEPTH = 128, SPLIT_MAX = 16, SPLIT_SLICE_COST = 16 };

static double split_cost(size_t tiles, size_t cu, size_t slices, size_t depth) {
    double waves = (double)ceil_div(tiles * slices, cu);
    double traffic = slices > 1 ? 40.0 * (double)tiles * (double)(slices + 1) / (double)cu : 0.0;
    return waves * (double)(depth + SPLIT_SLICE_COST) + traffic;
}

/* The slices of K a launch of `cfg` runs `p` in (1: unsplit) and their depth in k-steps. */
static size_t gemm_split(const tsr_device *dev, const gemm_problem *p, const tsr_config *cfg, size_t *depth) {
    const int *v = cfg->values;
    *depth = p->k;
    if (v[P_KERNEL] != GEMM_GPU || v[P_SPLIT] == 1 || p->batch != 1 || p->k == 0) return 1;
    /* a device without a compiler runs the variants `tessera build-binaries` wrote: the slices'
     * products are an fp32 C, so A's and B's types must be one of its storage sets */
    const tsr_gemm_types partial = {p->types.a, p->types.b, TSR_F32};
    if (dev->offline &&
        (gemm_type_set_index(&partial) >= TSR_STORAGE_SETS || gemm_type_set_index(&p->types) >= TSR_STORAGE_SETS))
        return 1;
    const size_t kwg = (size_t)v[P_KWG], mwg = (size_t)v[P_WGM] * v[P_MWI];
    const size_t nwg = (size_t)v[P_WGN] * v[P_VW] * v[P_NVW];
    size_t most = SPLIT_MAX;
    const size_t slice_bytes = p->m * p->n * sizeof(float); /* m, n < 2^31 */
    if (dev->info.max_alloc_bytes / slice_bytes < most) most = dev->info.max_alloc_bytes / slice_bytes;
    if (ceil_div(p->k, kwg) < most) most = ceil_div(p->k, kwg);
    size_t slices = 1;
    const size_t tiles = ceil_div(p->m, mwg) * ceil_div(p->n, nwg);
    const size_t cu = dev->info.compute_units ? dev->info.compute_units : 1;
    if (v[P_SPLIT] > 1) {
        /* a forced count (a tuned entry's, for every shape of its class) only where the tiles are
         * few: an entry tuned on 64 tiles must not split a 1024-tile problem of its class 8 ways
         * (8x the partials' traffic, a workspace that never shrinks); at least 16, so that small
         * devices' tests still split */
        if (tiles >= (2 * cu > 16 ? 2 * cu : 16)) return 1;
        slices = (size_t)v[P_SPLIT] < most ? (size_t)v[P_SPLIT] : most;
    } else {
        if (tiles >= 2 * cu || p->k < 2 * SPLIT_MIN_DEPTH) return 1;
        const double unsplit = split_cost(tiles, cu, 1, p->k);
        double best = unsplit;
        for (size_t s = 2; s <= most; ++s) {
            const size_t d = round_up(ceil_div(p->k, s), kwg);
            if (d < SPLIT_MIN_DEPTH) break;
            if (ceil_div(p->k, d) != s) continue; /* the same slices as a smaller S */
            const double c = split_cost(tiles, cu, s, d);
            if (c < best) best = c, slices = s;
        }
        if (!(best < 0.9 * unsplit)) slices = 1;
    }
    if (slices < 2) return 1;
    *depth = round_up(ceil_div(p->k, slices), kwg);
    return ceil_div(p->k, *depth); /* every slice holds at least one k-step */
}

static const char gemm_reduce_tag;

/* Split-K's two launches (see gemm_split), after `input_ready`; events as gemm_launch's. */
static tsr_status gemm_launch_split(tsr_device *dev, const gemm_problem *p, const tsr_config *cfg, size_t slices,
                                    size_t depth, cl_command_queue queue, cl_event input_ready, cl_event *event,
                                    cl_event *first, bool *no_workspace) {
    tsr_status status = TSR_SUCCESS;
    *no_workspace = false;
    const int *v = cfg->values;
    const int transposes = (p->ta ? TRANSPOSE_A : 0) | (p->tb ? TRANSPOSE_B : 0);
    const tsr_gemm_types partial_types = {p->types.a, p->types.b, TSR_F32};
    const int pvariant = transposes + GEMM_TRANSPOSES * gemm_type_set_index(&partial_types);
    const int rvariant = transposes + GEMM_TRANSPOSES * gemm_type_set_index(&p->types);
    cl_event products = NULL, done = NULL;
    gemm_kernels kernels;
    TSR_CHECK(status, gemm_kernels_for(dev, cfg, pvariant, false, false, &kernels), done);
    tsr_kernel *rk[TSR_LAUNCH_KERNELS];
    const char *const names[] = {"gemm_reduce", NULL};
    TSR_CHECK(status,
              tsr_launch_kernels(dev, &gemm_reduce_tag, cfg, rvariant, 0, "gemm_gpu", gemm_build_options, names, rk),
              done);
    size_t slice = p->m * p->n, bytes;
    status = tsr_size_mad("gemm: the split-K workspace", slice * sizeof(float), slices, 0, &bytes);
    if (status != TSR_SUCCESS) {
        *no_workspace = true;
        goto done;
    }
    pthread_mutex_lock(&dev->lock); /* the workspace is shared by every call on this device */
    cl_mem ws;
    cl_event wait;
    status = tsr_workspace_get(dev, TSR_WS_SPLIT_K, bytes, &ws, &wait);
    if (status != TSR_SUCCESS) {
        *no_workspace = true; /* nothing enqueued: the caller runs it unsplit */
        goto unlock;
    }
    {
        cl_kernel kernel = kernels.gemm->kernel;
        const size_t nwi = (size_t)v[P_VW] * v[P_NVW];
        size_t local[3] = {(size_t)v[P_WGN], (size_t)v[P_WGM], 1};
        size_t global[3] = {ceil_div(p->n, nwi * local[0]) * local[0],
                            ceil_div(p->m, (size_t)v[P_MWI] * local[1]) * local[1], slices};
        cl_int M = (cl_int)p->m, N = (cl_int)p->n, K = (cl_int)p->k, KP = (cl_int)depth;
        cl_int lda = (cl_int)p->lda, ldb = (cl_int)p->ldb, ldw = (cl_int)p->n, none = 0, no_res = -1,
               act = TSR_ACT_NONE;
        cl_ulong ao = p->a_off, bo = p->b_off, zero = 0, ws_slice = slice;
        float one = 1.0f, beta = 0.0f;
        cl_event waits[2];
        cl_uint nwaits = 0;
        if (wait) waits[nwaits++] = wait;
        if (input_ready) waits[nwaits++] = input_ready;
        cl_uint arg = 0;
        tsr_kernel_lock(kernels.gemm); /* the cached kernel's arguments are this call's until the enqueue */
#define SET(x) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(x), &(x)), products_set)
        SET(M); SET(N); SET(K); SET(KP); SET(one); SET(beta);
        SET(p->a); SET(ao); SET(lda); SET(zero);
        SET(p->b); SET(bo); SET(ldb); SET(zero);
        SET(ws); SET(zero); SET(ldw); SET(ws_slice);
        SET(ws); SET(zero); SET(zero); SET(none); SET(act);
        SET(ws); SET(zero); SET(zero); SET(none);
        SET(ws); SET(zero); SET(no_res);
#undef SET
        TSR_CL_CHECK(status,
                     tsr_enqueue_kernel(queue, kernel, 3, NULL, global, local, nwaits, nwaits ? waits : NULL,
                                        &products),
                     products_set);
    products_set:
        tsr_kernel_unlock(kernels.gemm);
        if (status != TSR_SUCCESS) goto unlock;
    }
    {
        cl_kernel kernel = rk[0]->kernel;
        const size_t vw = (size_t)v[P_VW];
        tsr_kernel_lock(rk[0]); /* its arguments, and its work-group limit asked once */
        /* 32 x 4 groups where the device and the compiled kernel (whose own limit can be below the
         * device's) take them (NULL: the device's choice) */
        if (!rk[0]->work_group_most &&
            clGetKernelWorkGroupInfo(kernel, dev->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof rk[0]->work_group_most,
                                     &rk[0]->work_group_most, NULL) != CL_SUCCESS)
            rk[0]->work_group_most = 0;
        const bool shaped = rk[0]->work_group_most >= 128 && dev->info.max_work_item_sizes[0] >= 32 &&
                            dev->info.max_work_item_sizes[1] >= 4;
        size_t local[2] = {32, 4};
        size_t global[2] = {ceil_div(p->n, vw), p->m};
        if (shaped) global[0] = round_up(global[0], local[0]), global[1] = round_up(global[1], local[1]);
        cl_int M = (cl_int)p->m, N = (cl_int)p->n, S = (cl_int)slices, ldw = (cl_int)p->n, ldc = (cl_int)p->ldc;
        cl_int bias_axis = p->bias_axis, act = p->act, scale_axis = p->scale_axis, res_type = p->res_type;
        cl_ulong ws_slice = slice, co = p->c_off, bias_off = p->bias_off, scale_off = p->scale_off,
                 res_off = p->res_off;
        cl_uint arg = 0;
#define SET(x) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(x), &(x)), reduce_set)
        SET(M); SET(N); SET(S); SET(p->alpha); SET(p->beta);
        SET(ws); SET(ws_slice); SET(ldw); SET(p->c); SET(co); SET(ldc);
        SET(p->bias); SET(bias_off); SET(bias_axis); SET(act);
        SET(p->scale); SET(scale_off); SET(scale_axis);
        SET(p->res); SET(res_off); SET(res_type);
#undef SET
        TSR_CL_CHECK(status,
                     tsr_enqueue_kernel(queue, kernel, 2, NULL, global, shaped ? local : NULL, 1, &products, &done),
                     reduce_set);
    reduce_set:
        tsr_kernel_unlock(rk[0]);
    }
unlock:
    /* the products' launch writes the workspace even when the reduce failed to enqueue */
    if (done || products) tsr_workspace_set_last_use(dev, TSR_WS_SPLIT_K, done ? done : products);
    pthread_mutex_unlock(&dev->lock);
done:
    if (first && status == TSR_SUCCESS) {
        *first = products;
        clRetainEvent(products);
    }
    if (products) clReleaseEvent(products);
    if (done) {
        if (event && status == TSR_SUCCESS) *event = done;
        else clReleaseEvent(done);
    }
    return status;
}

/* Whether the LayerNorm of problem p (p->norm) runs in the GEMM's epilogue under configuration
 * cfg (cl/gemm_smallm.cl, SM_NORM: the last item of each row tile normalises its rows): the smallm
 * kernel's vectors-along-N form (not B transposed with A plain), an fp32 C, no K blocking, on a
 * CPU device that compiles each work-item's code natively (PoCL: the other items' stores are
 * visible to the last one after its atomic; not one that vectorizes across items, nor Oclgrind,
 * whose checker would see the items' exchange as a race), with a compiler (build-binaries writes
 * no norm programs). Otherwise gemm_norm_after enqueues a LayerNorm after the GEMM. */
static bool norm_fused(const tsr_device *dev, const gemm_problem *p, const tsr_config *cfg) {
    const int *v = cfg->values;
    if (!p->norm || v[P_KERNEL] != GEMM_SMALLM || (p->tb && !p->ta) || p->types.c != TSR_F32 || p->k == 0)
        return false;
    if (dev->offline || dev->info.type != TSR_DEVICE_CPU || simt_cpu(dev) ||
        tsr_contains_nocase(dev->info.platform_name, "oclgrind"))
        return false;
    return !(v[P_KC] > 0 && (size_t)v[P_KC] < p->k); /* K blocks: the epilogue in the last only */
}

/* Kept strip weights: where B's buffer is marked constant (tsr_buffer_set_constant) and the
 * smallm kernel's pointer loop reads it (B and A plain, VW > 1, one batch entry, one K block, a
 * device with a compiler), its columns are copied once into ceil(N / NWI) strips of K rows of NWI
 * values each, contiguous, the last zero-padded (tsr_derived_get, keyed by NWI, K, N, ldb and the
 * type; the source's offset is part of the entry), and the kernel built with SM_BSTRIP reads
 * them: each work-item's slab of B is then one sequential stream, which the hardware prefetchers
 * follow (MiniLM at 1 x 16 tokens, weights from DRAM: docs/minilm.md "Kept strip weights"). */
static bool strips_apply(const tsr_device *dev, const gemm_problem *p, const tsr_config *cfg) {
    const int *v = cfg->values;
    return v[P_KERNEL] == GEMM_SMALLM && !p->ta && !p->tb && v[P_VW] > 1 && p->batch == 1 && p->k > 0 &&
           !(v[P_KC] > 0 && (size_t)v[P_KC] < p->k) && !dev->offline && p->b;
}

typedef struct strip_job {
    const gemm_problem *p;
    size_t nwi;
    cl_event input_ready;
} strip_job;

/* Fills `out` with the strips of job->p's B: read to the host once, copied strip by strip,
 * written back (blocking; a derivation runs once per content). */
static tsr_status strips_fill(tsr_device *dev, void *ctx, cl_mem out, cl_command_queue queue, cl_event *done) {
    (void)dev;
    const strip_job *j = ctx;
    const gemm_problem *p = j->p;
    const size_t elt = tsr_dtype_size(p->types.b), w = j->nwi, nstrips = ceil_div(p->n, w);
    const size_t span = ((p->k - 1) * p->ldb + p->n) * elt, bytes = nstrips * p->k * w * elt;
    tsr_status status = TSR_SUCCESS;
    *done = NULL;
    unsigned char *src = malloc(span), *dst = calloc(1, bytes);
    if (!src || !dst) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "gemm: out of host memory copying B into strips");
        goto done;
    }
    /* after everything before it on the queue (out of order too) and the caller's event */
    const cl_uint nwaits = j->input_ready ? 1 : 0;
    TSR_CL_CHECK(status, clEnqueueBarrierWithWaitList(queue, nwaits, nwaits ? &j->input_ready : NULL, NULL), done);
    TSR_CL_CHECK(status, clEnqueueReadBuffer(queue, p->b, CL_TRUE, p->b_off * elt, span, src, 0, NULL, NULL), done);
    for (size_t s = 0; s < nstrips; ++s) {
        const size_t cols = p->n - s * w < w ? p->n - s * w : w;
        for (size_t k = 0; k < p->k; ++k)
            memcpy(dst + (s * p->k + k) * w * elt, src + (k * p->ldb + s * w) * elt, cols * elt);
    }
    TSR_CL_CHECK(status, clEnqueueWriteBuffer(queue, out, CL_TRUE, 0, bytes, dst, 0, NULL, NULL), done);
done:
    free(src);
    free(dst);
    return status;
}

/* Warns, once per marked buffer, that the operand in `buf` runs as stored where its kept copy
 * (`what`: "kept strips", "kept packed panels") was due (`why` it is not); silent for a buffer that
 * is not marked. */
static void kept_missed(cl_mem buf, char operand, const char *what, const char *why) {
    if (tsr_derived_first_miss(buf))
        tsr_warn("gemm: %c's buffer is marked constant but its %s cannot be used: %s; the call reads %c as stored "
                 "(said once per buffer)",
                 operand, what, why, operand);
}

/* The kept copy `key` (`bytes` long, made by `fill`) of the operand in `src` from byte `offset`:
 * *out retained (NULL: run as stored) and *ready the event to wait for (NULL: none). While the
 * calling thread records a graph, only a copy already derived and current is used (the derivation
 * is never recorded), and the graph notes it so that a replay after the source changed fails
 * instead of reading a stale copy. */
static void gemm_kept(tsr_device *dev, cl_mem src, size_t offset, char operand, const char *what, const char *key,
                      size_t bytes, tsr_derive_fn fill, void *job, cl_command_queue queue, cl_mem *out,
                      cl_event *ready) {
    *out = NULL, *ready = NULL;
    tsr_status st;
    const bool capturing = tsr_graph_capturing();
    if (capturing) {
        tsr_derived_ref ref;
        st = tsr_derived_peek(dev, src, offset, key, out, &ref);
        if (st == TSR_SUCCESS && *out) tsr_graph_note_derived(&ref);
    } else {
        st = tsr_derived_get(dev, src, offset, key, bytes, fill, job, queue, out, ready);
    }
    if (st != TSR_SUCCESS) { /* no copy: the call runs as it would have (and reports its own errors) */
        char why[256];
        snprintf(why, sizeof why, "making them failed (%s)", tsr_last_error());
        tsr_clear_diagnostics();
        *out = NULL, *ready = NULL;
        kept_missed(src, operand, what, why);
    } else if (!*out) {
        char why[160];
        if (capturing)
            snprintf(why, sizeof why, "a graph recorded them before they were made (run the call once first)");
        else
            snprintf(why, sizeof why, "%zu bytes do not fit the kept data's cap (%zu bytes) or device memory", bytes,
                     tsr_derived_cap(dev));
        kept_missed(src, operand, what, why);
    }
}

/* The kept strips of p's B (strips_apply; gemm_kept). */
static void gemm_strips(tsr_device *dev, const gemm_problem *p, size_t nwi, cl_command_queue queue,
                        cl_event input_ready, cl_mem *out, cl_event *ready) {
    *out = NULL, *ready = NULL;
    if (!tsr_derived_may_hold(p->b)) return; /* B not marked: no key, no lock */
    const size_t elt = tsr_dtype_size(p->types.b);
    size_t bytes;
    if (tsr_size_mad("gemm: B's strips", ceil_div(p->n, nwi) * nwi, p->k, 0, &bytes) != TSR_SUCCESS ||
        tsr_size_mad("gemm: B's strips", bytes, elt, 0, &bytes) != TSR_SUCCESS) {
        tsr_clear_diagnostics(); /* too large to keep: run as stored */
        kept_missed(p->b, 'B', "kept strips", "they would be larger than memory can address");
        return;
    }
    char key[96];
    snprintf(key, sizeof key, "gemm strips %s w%zu k%zu n%zu ld%zu t0", tsr_dtype_str(p->types.b), nwi, p->k, p->n,
             p->ldb);
    strip_job job = {p, nwi, input_ready};
    gemm_kept(dev, p->b, p->b_off * elt, 'B', "kept strips", key, bytes, strips_fill, &job, queue, out, ready);
}

/* Kept packed A: where A's buffer is marked constant and one A serves every batch entry (a_stride 0
 * or batch 1), the tiled kernel's packed A panels ([row tile][k][MWI] fp32, zero-padded past M:
 * pack_a) are made once per content instead of at every call (tsr_derived_get, keyed by MWI, M, K,
 * lda, TA and A's type; the source's offset is part of the entry). conv2d's im2col and pointwise
 * GEMMs have the weights as A: ResNet-50's 8x512x14x14 3x3/2 layer by im2col spent 8.5% of its
 * kernels' time in pack_a (perf, 2-core Cascade Lake Xeon, session 32). */
typedef struct pack_a_job {
    const gemm_problem *p;
    const tsr_config *cfg;
    tsr_kernel *pack;
    size_t stride;
    cl_event input_ready;
} pack_a_job;

static tsr_status packed_a_fill(tsr_device *dev, void *ctx, cl_mem out, cl_command_queue queue, cl_event *done) {
    const pack_a_job *j = ctx;
    /* zeroed first, as the packing workspace is (a host write, for Oclgrind's checker): a re-made
     * copy drew Oclgrind's uninitialized-value reports on the rows past M without it (which no
     * stored result reads) */
    const size_t bytes = j->stride * sizeof(float);
    void *zeros = calloc(1, bytes);
    if (!zeros) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "gemm: out of host memory zeroing A's kept panels");
    cl_int err = clEnqueueWriteBuffer(queue, out, CL_TRUE, 0, bytes, zeros, 0, NULL, NULL);
    free(zeros);
    if (err != CL_SUCCESS) return tsr_fail_cl(err, "clEnqueueWriteBuffer(A's kept panels)", __FILE__, __LINE__);
    return enqueue_pack(dev, j->pack, queue, j->p, j->cfg, 'a', out, j->stride, NULL, j->input_ready, done);
}

static void gemm_kept_packed_a(tsr_device *dev, const gemm_problem *p, const tsr_config *cfg, tsr_kernel *pack,
                               size_t stride, cl_command_queue queue, cl_event input_ready, cl_mem *out,
                               cl_event *ready) {
    *out = NULL, *ready = NULL;
    /* (a call being recorded packs as before: the graph's replays then follow A's writes, as
     * conv2d's recorded derivations do, instead of failing once A changed) */
    if (!tsr_derived_any() || (p->a_stride && p->batch > 1) || !tsr_derived_may_hold(p->a) || tsr_graph_capturing())
        return;
    size_t bytes;
    if (tsr_size_mad("gemm: A's packed panels", stride, sizeof(float), 0, &bytes) != TSR_SUCCESS) {
        tsr_clear_diagnostics();
        return; /* (the per-call pack reports the same size) */
    }
    char key[96];
    snprintf(key, sizeof key, "gemm packed A %s mwi%d m%zu k%zu ld%zu t%d", tsr_dtype_str(p->types.a),
             cfg->values[P_MWI], p->m, p->k, p->lda, p->ta ? 1 : 0);
    pack_a_job job = {p, cfg, pack, stride, input_ready};
    gemm_kept(dev, p->a, p->a_off * tsr_dtype_size(p->types.a), 'A', "kept packed panels", key, bytes, packed_a_fill,
              &job, queue, out, ready);
}

/* K blocking, shared by gemm_launch and gemm_launch_images: blocks of `want` k-steps (0, or at
 * least k: one block of all of K), the last one shorter. Returns their count (1 for k = 0); *kc
 * the block length. */
static size_t k_blocks(size_t k, size_t want, size_t *kc) {
    *kc = want > 0 && want < k ? want : k;
    return k ? ceil_div(k, *kc) : 1;
}
/* The k-steps of block `blk` of k_blocks(k, ., &kc). */
static cl_int k_block_len(size_t k, size_t kc, size_t blk) {
    return (cl_int)(k ? (blk * kc + kc <= k ? kc : k - blk * kc) : 0);
}

/* Enqueue packs (if any) and the GEMM, after `input_ready` (may be NULL). *event (may be NULL)
 * receives the GEMM's event and *first (may be NULL) the first command's, for timing the
 * whole launch. */
static tsr_status gemm_launch(tsr_device *dev, const gemm_problem *p, const tsr_config *given, cl_command_queue queue,
                              cl_event input_ready, cl_event *event, cl_event *first) {
    tsr_status status = TSR_SUCCESS;
    const tsr_config *cfg = given;
    tsr_config shared_a;
    if (packs_shared_a(dev, p, given)) {
        shared_a = *given;
        shared_a.values[P_PACKA] = 1;
        cfg = &shared_a;
    }
    const int *v = cfg->values;
    size_t depth, slices = gemm_split(dev, p, cfg, &depth);
    if (slices > 1) {
        bool no_workspace;
        tsr_status st = gemm_launch_split(dev, p, cfg, slices, depth, queue, input_ready, event, first, &no_workspace);
        /* nothing was enqueued when the workspace could not be had: the unsplit kernel needs none */
        if (st == TSR_SUCCESS || !no_workspace) return st;
        tsr_clear_diagnostics();
    }
    int variant = (p->ta ? TRANSPOSE_A : 0) | (p->tb ? TRANSPOSE_B : 0);
    variant += GEMM_TRANSPOSES * gemm_type_set_index(&p->types);
    const bool norm = norm_fused(dev, p, cfg);
    if (norm) variant += GEMM_NORM_VARIANT;
    cl_event packed[2] = {NULL, NULL}, done = NULL, first_launch = NULL;
    size_t nwi = (size_t)v[P_VW] * v[P_NVW];
    cl_mem strips = NULL; /* B's kept strips (gemm_strips) */
    cl_event strips_ready = NULL;
    cl_mem kept_a = NULL; /* A's kept packed panels (gemm_kept_packed_a) */
    cl_event kept_a_ready = NULL;
    if (tsr_derived_any() && strips_apply(dev, p, cfg))
        gemm_strips(dev, p, nwi, queue, input_ready, &strips, &strips_ready);
    if (strips) variant += GEMM_BSTRIP_VARIANT;
    /* k == 0 (or alpha == 0) reads neither operand: nothing to pack. */
    bool pack_a = packs_a(cfg, p->ta) && p->k > 0, pack_b = packs_b(cfg, p->tb) && p->k > 0;
    gemm_kernels kernels;
    status = gemm_kernels_for(dev, cfg, variant, pack_a, pack_b, &kernels);
    if (status != TSR_SUCCESS && strips) { /* no program for the strips: B as stored, as before */
        char why[256];
        snprintf(why, sizeof why, "the kernel that reads them does not build (%s)", tsr_last_error());
        tsr_clear_diagnostics();
        tsr_derived_done(strips, strips_ready, NULL); /* nothing enqueued reads it */
        strips = NULL, strips_ready = NULL;
        kept_missed(p->b, 'B', "kept strips", why);
        variant -= GEMM_BSTRIP_VARIANT;
        status = gemm_kernels_for(dev, cfg, variant, pack_a, pack_b, &kernels);
    }
    if (status != TSR_SUCCESS) goto done;
    cl_kernel kernel = kernels.gemm->kernel;
    /* A 16-bit C whose K the tiled kernel would block (KC < k, see the K blocking below) keeps its
     * sums in fp32 instead: the blocks but the last add into an fp32 copy of C's layout (the
     * split-K workspace, which this launch form never uses otherwise) through the same program
     * with an fp32 C, and the last block reads that copy as its residual and stores C, rounded
     * once. Only where the residual is free and C's old value unread (beta 0, no residual, no
     * LayerNorm); elsewhere a 16-bit C runs unblocked, as before. Unblocked, the A panels of
     * 2048^3 stream from memory at every column tile: f16 and bf16 ran 0.72-0.89x fp32 on the
     * 2-core Cascade Lake Xeon (tessera bench gemm --dtype). */
    const tsr_gemm_types acc_types = {p->types.a, p->types.b, TSR_F32};
    bool acc32 = p->types.c != TSR_F32 && v[P_KERNEL] == GEMM_TILED && v[P_KC] > 0 && (size_t)v[P_KC] < p->k &&
                 p->beta == 0.0f && p->res_type == -1 && !norm && !strips &&
                 !(dev->offline && gemm_type_set_index(&acc_types) >= TSR_STORAGE_SETS);
    gemm_kernels kernels32;
    if (acc32) {
        const int variant32 = (variant % GEMM_TRANSPOSES) + GEMM_TRANSPOSES * gemm_type_set_index(&acc_types);
        if (gemm_kernels_for(dev, cfg, variant32, pack_a, pack_b, &kernels32) != TSR_SUCCESS) {
            tsr_clear_diagnostics(); /* no such program: unblocked, as before */
            acc32 = false;
        }
    }
    cl_mem acc = NULL;
    cl_event acc_wait = NULL;

    gemm_problem q = *p;
    if (strips) q.b = strips, q.b_off = 0, q.ldb = nwi, q.b_stride = 0;
    /* The workspace is shared by every call on this device: hold the lock while enqueuing,
     * and order each pack after the previous reader of its buffer. */
    pthread_mutex_lock(&dev->lock);
    if (pack_a) {
        size_t stride, bytes;
        cl_mem ws;
        cl_event wait;
        /* With a_stride 0 (a shared A) the batch is not bounded by A's buffer: check the panels' size. */
        TSR_CHECK(status, tsr_size_mad("gemm: the packed A panels", round_up(p->m, (size_t)v[P_MWI]), p->k, 0, &stride),
                  unlock);
        gemm_kept_packed_a(dev, p, cfg, kernels.pack_a, stride, queue, input_ready, &kept_a, &kept_a_ready);
        if (kept_a) {
            q.a = kept_a; q.a_off = 0; q.a_stride = 0;
        } else {
            /* a shared A (a_stride 0) is packed once and read by every batch entry */
            TSR_CHECK(status, tsr_size_mad("gemm: the packed A panels", stride, p->a_stride ? p->batch : 1, 0, &bytes),
                      unlock);
            TSR_CHECK(status, tsr_size_mad("gemm: the packed A panels", bytes, sizeof(float), 0, &bytes), unlock);
            TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_PACK_A, bytes, &ws, &wait), unlock);
            TSR_CHECK(status,
                      enqueue_pack(dev, kernels.pack_a, queue, p, cfg, 'a', ws, stride, wait, input_ready, &packed[0]),
                      unlock);
            q.a = ws; q.a_off = 0; q.a_stride = p->a_stride ? stride : 0;
        }
    }
    if (pack_b) {
        size_t stride, bytes;
        cl_mem ws;
        cl_event wait;
        TSR_CHECK(status, tsr_size_mad("gemm: the packed B panels", round_up(p->n, nwi), p->k, 0, &stride), unlock);
        TSR_CHECK(status, tsr_size_mad("gemm: the packed B panels", stride, p->b_stride ? p->batch : 1, 0, &bytes),
                  unlock);
        TSR_CHECK(status, tsr_size_mad("gemm: the packed B panels", bytes, sizeof(float), 0, &bytes), unlock);
        TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_PACK_B, bytes, &ws, &wait), unlock);
        TSR_CHECK(status, enqueue_pack(dev, kernels.pack_b, queue, p, cfg, 'b', ws, stride, wait, input_ready, &packed[1]),
                  unlock);
        q.b = ws; q.b_off = 0; q.b_stride = p->b_stride ? stride : 0;
    }
    /* K blocking: one launch per block of KC k-steps, each accumulating into C (beta = 1 after
     * the first), so the block of A's panels a launch walks for every column tile stays in the
     * cache instead of streaming from memory; the epilogue runs in the last launch only. A 16-bit
     * C never holds partial sums (each block's would be rounded to C's type and read back: K/KC
     * roundings, 2.5x one rounding's error at K = 1090, KC = 128): it blocks only with acc32's fp32
     * sums (above), else runs in one launch. */
    if (acc32) { /* C's layout, less c_off, in fp32; a C too large for one buffer runs unblocked */
        size_t elems = 0, bytes = 0;
        /* (batch - 1) c_stride + (m - 1) ldc + n elements (m, n, batch >= 1: tsr_matmul_check) */
        if (tsr_size_mad("gemm: the fp32 sums of a 16-bit C", q.batch - 1, q.c_stride, q.n, &elems) != TSR_SUCCESS ||
            tsr_size_mad("gemm: the fp32 sums of a 16-bit C", q.m - 1, q.ldc, elems, &elems) != TSR_SUCCESS ||
            tsr_size_mad("gemm: the fp32 sums of a 16-bit C", elems, sizeof(float), 0, &bytes) != TSR_SUCCESS ||
            bytes > dev->info.max_alloc_bytes ||
            tsr_workspace_get(dev, TSR_WS_SPLIT_K, bytes, &acc, &acc_wait) != TSR_SUCCESS) {
            tsr_clear_diagnostics();
            acc32 = false, acc = NULL, acc_wait = NULL;
        }
    }
    size_t kc, nblocks = k_blocks(q.k, q.types.c == TSR_F32 || acc32 ? (size_t)v[P_KC] : 0, &kc);
    /* KP: the packed panels' k-length (gemm.cl); the gpu kernel reads 0 as "unsplit" */
    cl_int M = (cl_int)q.m, N = (cl_int)q.n, KP = v[P_KERNEL] == GEMM_GPU ? 0 : (cl_int)q.k;
    cl_int lda = (cl_int)q.lda, ldb = (cl_int)q.ldb, ldc = (cl_int)q.ldc;
    cl_ulong co = q.c_off, as = q.a_stride, bs = q.b_stride, cs = q.c_stride;
    cl_ulong bias_off = q.bias_off, bias_stride = q.bias_stride, scale_off = q.scale_off,
             scale_stride = q.scale_stride, res_off = q.res_off;
    size_t local[3] = {(size_t)v[P_WGM], (size_t)v[P_WGN], 1};
    size_t global[3] = {round_up(ceil_div(q.m, (size_t)v[P_MWI]), local[0]),
                        round_up(ceil_div(ceil_div(q.n, nwi), (size_t)tiles_per_item(cfg)), local[1]), q.batch};
    if (v[P_KERNEL] == GEMM_GPU) { /* dimension 0 walks columns there, one group per MWG x NWG tile */
        local[0] = (size_t)v[P_WGN], local[1] = (size_t)v[P_WGM];
        global[0] = ceil_div(q.n, nwi * local[0]) * local[0];
        global[1] = ceil_div(q.m, (size_t)v[P_MWI] * local[1]) * local[1];
    }
    cl_ulong norm_g_off = q.norm_g_off, norm_b_off = q.norm_b_off;
    cl_mem norm_count = NULL;
    cl_event norm_wait = NULL;
    if (norm) { /* a count per row tile and batch entry (zero: the workspace's start, and each launch's end) */
        size_t bytes;
        TSR_CHECK(status, tsr_size_mad("gemm: the LayerNorm counts", global[0], q.batch, 0, &bytes), unlock);
        TSR_CHECK(status, tsr_size_mad("gemm: the LayerNorm counts", bytes, sizeof(cl_int), 0, &bytes), unlock);
        TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_NORM, bytes, &norm_count, &norm_wait), unlock);
    }
    for (size_t blk = 0; blk < nblocks; ++blk) {
        size_t k0 = blk * kc;
        bool last = blk + 1 == nblocks;
        cl_int K = k_block_len(q.k, kc, blk);
        const bool to_acc = acc32 && !last; /* into the fp32 sums; the last block reads them */
        float beta = blk == 0 ? q.beta : acc32 && last ? 0.0f : 1.0f;
        /* where the block starts: inside each packed tile's panel, or in the matrix */
        cl_ulong ao = pack_a ? k0 * (size_t)v[P_MWI] : q.a_off + (q.ta ? k0 * q.lda : k0);
        cl_ulong bo = pack_b ? k0 * nwi : q.b_off + (q.tb ? k0 : k0 * q.ldb);
        /* the scale applies to each block's product, the rest once, on the sum */
        cl_int bias_axis = last ? q.bias_axis : 0, act = last ? q.act : TSR_ACT_NONE;
        cl_int scale_axis = q.scale_axis, res_type = last ? q.res_type : -1;
        cl_mem cbuf = to_acc ? acc : q.c, rbuf = q.res;
        cl_ulong cofs = to_acc ? 0 : co, rofs = res_off;
        if (acc32 && last && blk > 0) rbuf = acc, rofs = 0, res_type = TSR_F32;
        tsr_kernel *launched = to_acc ? kernels32.gemm : kernels.gemm;
        kernel = launched->kernel;
        /* each block after the packs (and the caller's event), and after the block before it:
         * the queue may be out of order */
        cl_event waits[6];
        cl_uint nwaits = 0;
        if (blk == 0) {
            if (strips_ready) waits[nwaits++] = strips_ready;
            if (kept_a_ready) waits[nwaits++] = kept_a_ready;
            if (packed[0]) waits[nwaits++] = packed[0];
            if (packed[1]) waits[nwaits++] = packed[1];
            if (input_ready) waits[nwaits++] = input_ready;
            if (norm_wait) waits[nwaits++] = norm_wait; /* (no packs with the smallm kernel) */
            if (acc_wait) waits[nwaits++] = acc_wait;    /* (never with norm_wait) */
        } else {
            waits[nwaits++] = done;
        }
        cl_event ev = NULL;
        cl_uint arg = 0;
        tsr_kernel_lock(launched); /* the cached kernel's arguments are this call's until the enqueue */
#define SET(x) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(x), &(x)), set_failed)
        SET(M); SET(N); SET(K); SET(KP); SET(q.alpha); SET(beta);
        SET(q.a); SET(ao); SET(lda); SET(as);
        SET(q.b); SET(bo); SET(ldb); SET(bs);
        SET(cbuf); SET(cofs); SET(ldc); SET(cs);
        SET(q.bias); SET(bias_off); SET(bias_stride); SET(bias_axis); SET(act);
        SET(q.scale); SET(scale_off); SET(scale_stride); SET(scale_axis);
        SET(rbuf); SET(rofs); SET(res_type);
        if (norm) {
            SET(norm_count); SET(q.norm_g); SET(norm_g_off); SET(q.norm_b); SET(norm_b_off); SET(q.norm_eps);
        }
#undef SET
        TSR_CL_CHECK(status,
                     tsr_enqueue_kernel(queue, kernel, 3, NULL, global, local, nwaits, nwaits ? waits : NULL, &ev),
                     set_failed);
    set_failed:
        tsr_kernel_unlock(launched);
        if (status != TSR_SUCCESS) goto unlock;
        if (blk == 0) first_launch = ev, clRetainEvent(ev);
        if (done) clReleaseEvent(done);
        done = ev;
    }
    if (pack_a && !kept_a) tsr_workspace_set_last_use(dev, TSR_WS_PACK_A, done);
    if (pack_b) tsr_workspace_set_last_use(dev, TSR_WS_PACK_B, done);
    if (norm) tsr_workspace_set_last_use(dev, TSR_WS_NORM, done);
    if (acc) tsr_workspace_set_last_use(dev, TSR_WS_SPLIT_K, done);
unlock:
    /* A pack enqueued before a later step failed still writes its panel: the next user of that
     * workspace must wait for it. */
    if (status != TSR_SUCCESS) {
        /* ...and so do the K blocks enqueued before the failing one (done: the last of them) */
        if (packed[0]) tsr_workspace_set_last_use(dev, TSR_WS_PACK_A, done ? done : packed[0]);
        if (packed[1]) tsr_workspace_set_last_use(dev, TSR_WS_PACK_B, done ? done : packed[1]);
        if (acc && done) tsr_workspace_set_last_use(dev, TSR_WS_SPLIT_K, done);
    }
    pthread_mutex_unlock(&dev->lock);
done:
    if (strips || kept_a) {
        if (status != TSR_SUCCESS) clFinish(queue); /* nothing enqueued may still read the copies */
        tsr_derived_done(strips, strips_ready, status == TSR_SUCCESS ? done : NULL);
        tsr_derived_done(kept_a, kept_a_ready, status == TSR_SUCCESS ? done : NULL);
    }
    if (first && status == TSR_SUCCESS) {
        *first = packed[0] ? packed[0] : packed[1] ? packed[1] : first_launch;
        clRetainEvent(*first);
    }
    if (first_launch) clReleaseEvent(first_launch);
    for (int i = 0; i < 2; ++i)
        if (packed[i]) clReleaseEvent(packed[i]);
    if (done) {
        if (event && status == TSR_SUCCESS) *event = done;
        else clReleaseEvent(done);
    }
    return status;
}

/* conv2d's 1x1 layers over a batch (extras.image_columns: each batch entry is one image of n
 * columns, A the weights shared by all, B and C NCHW planes) run as ONE GEMM of batch * n columns
 * (cl/gemm_images.cl): a column tile may end one image and start the next, so 7x7 images (49
 * columns) fill 392 of 416 columns at batch 8 instead of 49 of 64 each, and 14x14 ones 1568 of
 * 1568 instead of 196 of 224. Side by side on the 2-core Skylake-AVX512 Xeon (ResNet-50's 1x1
 * layers at batch 8 with scale, bias and ReLU, process CPU time, rotating order, medians of 7
 * rounds; load average 4-14, so indicative): the 14x14 and 7x7 layers 1.07-1.22x, the 28x28 ones
 * 1.03-1.11x, over all 1x1 layers weighted by their counts 1.08-1.09x. Taken where the tiled CPU
 * kernel runs unstaged and A is shared (as packs_shared_a, whatever the configuration's PACKA),
 * B is read plainly and the epilogue's scale and bias are per canonical row (a column-major
 * call's per-column ones). The configuration is the one resolved for one image's shape (tile,
 * unroll, NT and PK); K blocking (KC) is not applied. */
static bool runs_across_images(const tsr_device *dev, const gemm_problem *p, const tsr_config *cfg, size_t columns) {
    const int *v = cfg->values;
    /* (a device without a compiler runs the per-image GEMM: `tessera build-binaries` writes every op's
     * programs, not this launch-time form's) */
    if (!columns || p->batch < 2 || p->a_stride != 0 || p->k == 0 || dev->info.type != TSR_DEVICE_CPU || simt_cpu(dev) ||
        dev->offline)
        return false;
    if (v[P_KERNEL] != GEMM_TILED || v[P_SA] || v[P_SB]) return false;
    if (p->ta || p->tb || p->n != columns || p->ldb != p->n || p->ldc != p->n || p->b_stride < p->n * p->k ||
        p->c_stride < p->n * p->m)
        return false;
    if (p->bias_axis == 1 || p->scale_axis == 1 || p->bias_stride || p->scale_stride) return false;
    size_t nwi = (size_t)v[P_VW] * v[P_NVW];
    /* images of whole tiles (ResNet-50's 56x56 layers: 98 tiles of 32) waste no lanes per image,
     * and there the per-image GEMM measured level to 1.1x ahead (its store needs no image split) */
    if (p->n % nwi == 0) return false;
    return p->batch * p->n <= (size_t)INT_MAX - nwi; /* column indices stay ints, the last tile's too */
}

static const char gemm_images_tag;
#define IMAGES_KC 512       /* gemm_launch_images' K block where its configuration has none */
#define IMAGES_KC_FROM 2048 /* ...from this K on */

static tsr_status gemm_launch_images(tsr_device *dev, const gemm_problem *p, const tsr_config *given,
                                     cl_command_queue queue, cl_event input_ready, cl_event *event) {
    tsr_status status = TSR_SUCCESS;
    tsr_config cfg = *given;
    cfg.values[P_PACKA] = cfg.values[P_PACKB] = 1, cfg.values[P_KC] = 0;
    const int *v = cfg.values;
    int variant = GEMM_TRANSPOSES * gemm_type_set_index(&p->types);
    size_t nwi = (size_t)v[P_VW] * v[P_NVW], np = p->batch * p->n, tiles = ceil_div(np, nwi);
    cl_event packed[2] = {NULL, NULL}, done = NULL;
    cl_mem kept_a = NULL; /* A's kept packed panels (gemm_kept_packed_a) */
    cl_event kept_a_ready = NULL;
    gemm_kernels gk; /* the batched launch's program, which holds pack_a */
    TSR_CHECK(status, gemm_kernels_for(dev, &cfg, variant, true, true, &gk), done);
    tsr_kernel *k[TSR_LAUNCH_KERNELS];
    const char *const names[] = {"gemm_images", "pack_b_images", NULL};
    TSR_CHECK(status,
              tsr_launch_kernels(dev, &gemm_images_tag, &cfg, variant, 0, "gemm_images", gemm_build_options, names, k),
              done);
    pthread_mutex_lock(&dev->lock); /* the packing workspaces are shared by every call on the device */
    size_t a_stride, a_bytes, b_bytes;
    cl_mem ap, bp;
    cl_event wait;
    TSR_CHECK(status, tsr_size_mad("gemm: the packed A panels", round_up(p->m, (size_t)v[P_MWI]), p->k, 0, &a_stride),
              unlock);
    TSR_CHECK(status, tsr_size_mad("gemm: the packed A panels", a_stride, sizeof(float), 0, &a_bytes), unlock);
    TSR_CHECK(status, tsr_size_mad("gemm: the packed B panels", tiles * nwi, p->k, 0, &b_bytes), unlock);
    TSR_CHECK(status, tsr_size_mad("gemm: the packed B panels", b_bytes, sizeof(float), 0, &b_bytes), unlock);
    gemm_kept_packed_a(dev, p, &cfg, gk.pack_a, a_stride, queue, input_ready, &kept_a, &kept_a_ready);
    if (kept_a) {
        ap = kept_a, packed[0] = kept_a_ready, kept_a_ready = NULL; /* (packed[0] released below) */
    } else {
        TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_PACK_A, a_bytes, &ap, &wait), unlock);
        TSR_CHECK(status,
                  enqueue_pack(dev, gk.pack_a, queue, p, &cfg, 'a', ap, a_stride, wait, input_ready, &packed[0]), unlock);
    }
    TSR_CHECK(status, tsr_workspace_get(dev, TSR_WS_PACK_B, b_bytes, &bp, &wait), unlock);
    {
        cl_kernel pack = k[1]->kernel;
        cl_int P = (cl_int)p->n, NP = (cl_int)np, K = (cl_int)p->k;
        cl_ulong b_off = p->b_off, b_image = p->b_stride;
        size_t global[2] = {tiles, ceil_div(p->k, (size_t)v[P_PK])}, local[3];
        cl_event waits[2];
        cl_uint nwaits = 0;
        if (wait) waits[nwaits++] = wait;
        if (input_ready) waits[nwaits++] = input_ready;
        cl_uint arg = 0;
        tsr_kernel_lock(k[1]); /* the cached kernel's arguments are this call's until the enqueue */
#define SET(x) TSR_CL_CHECK(status, tsr_set_arg(pack, arg++, sizeof(x), &(x)), pack_set)
        SET(P); SET(NP); SET(K); SET(p->b); SET(b_off); SET(b_image); SET(bp);
#undef SET
        TSR_CL_CHECK(status,
                     tsr_enqueue_kernel(queue, pack, 2, NULL, global, tsr_spread_local(dev, 2, global, local), nwaits,
                                        nwaits ? waits : NULL, &packed[1]),
                     pack_set);
    pack_set:
        tsr_kernel_unlock(k[1]);
        if (status != TSR_SUCCESS) goto unlock;
    }
    /* K blocks as gemm_launch's: a launch per block of KC k-steps, each adding its product into C
     * (beta 1 after the first), the epilogue in the last, so the panels a work-item walks for each
     * of its column tiles stay in the cache instead of streaming from memory. KC: the configuration's;
     * where that is 0 and not an override, IMAGES_KC past IMAGES_KC_FROM k-steps: the entries these
     * GEMMs classify to (one image's GEMM: `medium` for ResNet-50's 3x3/2 layers by im2col) are tuned
     * on K = 256, where blocking never shows. On the 2-core Cascade Lake Xeon (session 32,
     * conv3x3_ab, the variants in one process) KC 512 ran 8x512x14x14 3x3/2 (K = 4608) and
     * 8x256x28x28 3x3/2 (K = 2304) by im2col 1.25x and 1.20x faster than one launch, 8x128x56x56
     * (K = 1152) level. A 16-bit C never holds partial sums (gemm_launch's reason): one launch. */
    int given_kc = given->values[P_KC]; /* (cfg's is 0: the launch records' key) */
    if (given_kc == 0 && p->k >= IMAGES_KC_FROM && !tsr_op_overridden(dev, &tsr_op_gemm)) given_kc = IMAGES_KC;
    size_t kc;
    const size_t nblocks = k_blocks(p->k, p->types.c == TSR_F32 && given_kc > 0 ? (size_t)given_kc : 0, &kc);
    for (size_t blk = 0; blk < nblocks; ++blk) {
        const bool last = blk + 1 == nblocks;
        cl_kernel kernel = k[0]->kernel;
        cl_int M = (cl_int)p->m, NP = (cl_int)np, KP = (cl_int)p->k, P = (cl_int)p->n;
        cl_int K0 = (cl_int)(blk * kc), K = k_block_len(p->k, kc, blk);
        cl_ulong c_off = p->c_off, c_image = p->c_stride, scale_off = p->scale_off, bias_off = p->bias_off,
                 res_off = p->res_off;
        cl_int scale_on = p->scale_axis != 0, bias_on = last && p->bias_axis != 0, act = last ? p->act : TSR_ACT_NONE,
               res_type = last ? p->res_type : -1;
        float beta = blk == 0 ? p->beta : 1.0f;
        size_t local[2] = {1, 1};
        size_t global[2] = {ceil_div(p->m, (size_t)v[P_MWI]), ceil_div(tiles, (size_t)v[P_NT])};
        cl_uint arg = 0;
        tsr_kernel_lock(k[0]);
#define SET(x) TSR_CL_CHECK(status, tsr_set_arg(kernel, arg++, sizeof(x), &(x)), gemm_set)
        SET(M); SET(NP); SET(K); SET(KP); SET(K0); SET(P); SET(p->alpha); SET(beta);
        SET(ap); SET(bp); SET(p->c); SET(c_off); SET(c_image);
        SET(p->scale); SET(scale_off); SET(scale_on); SET(p->bias); SET(bias_off); SET(bias_on); SET(act);
        SET(p->res); SET(res_off); SET(res_type);
#undef SET
        {
            /* the first block after the packs (packed[0] NULL: the kept panels needed no waiting),
             * each later one after the block before it (the queue may be out of order) */
            cl_event prev = done;
            const cl_uint nwaits = blk ? 1 : packed[0] ? 2 : 1;
            TSR_CL_CHECK(status,
                         tsr_enqueue_kernel(queue, kernel, 2, NULL, global, local, nwaits,
                                            blk ? &prev : packed + (2 - nwaits), &done),
                         gemm_set);
            if (prev) clReleaseEvent(prev);
        }
    gemm_set:
        tsr_kernel_unlock(k[0]);
        if (status != TSR_SUCCESS) break;
    }
    if (status == TSR_SUCCESS) {
        if (!kept_a) tsr_workspace_set_last_use(dev, TSR_WS_PACK_A, done);
        tsr_workspace_set_last_use(dev, TSR_WS_PACK_B, done);
    }
unlock:
    /* a pack enqueued before a later step failed still writes its panels, and the K blocks enqueued
     * before a failing one read them: their next user waits (done: the last of those blocks) */
    if (status != TSR_SUCCESS) {
        if (packed[0] && !kept_a) tsr_workspace_set_last_use(dev, TSR_WS_PACK_A, done ? done : packed[0]);
        if (packed[1]) tsr_workspace_set_last_use(dev, TSR_WS_PACK_B, done ? done : packed[1]);
    }
    pthread_mutex_unlock(&dev->lock);
done:
    if (kept_a) {
        if (status != TSR_SUCCESS) clFinish(queue); /* nothing enqueued may still read the copy */
        tsr_derived_done(kept_a, NULL, status == TSR_SUCCESS ? done : NULL);
    }
    for (int i = 0; i < 2; ++i)
        if (packed[i]) clReleaseEvent(packed[i]);
    if (done) {
        if (event && status == TSR_SUCCESS) *event = done;
        else clReleaseEvent(done);
    }
    return status;
}

/* The epilogue's LayerNorm where the GEMM's kernel does not apply it (norm_fused false): a
 * LayerNorm launch on C in place that waits for the GEMM's event `gemm_done` (on any queue). *event
 * (may be NULL) receives the LayerNorm's event. */
static tsr_status gemm_norm_after(tsr_device *dev, const gemm_problem *p, cl_command_queue queue, cl_event gemm_done,
                                  cl_event *event) {
    const tsr_layernorm_desc ln = {.rows = p->m,
                                   .cols = p->n,
                                   .eps = p->norm_eps,
                                   .x_offset = p->c_off,
                                   .gamma_offset = p->norm_g_off,
                                   .beta_offset = p->norm_b_off,
                                   .y_offset = p->c_off,
                                   .x_stride = p->m > 1 ? p->ldc : 0,
                                   .y_stride = p->m > 1 ? p->ldc : 0,
                                   .x_type = p->types.c,
                                   .y_type = p->types.c};
    return tsr_layernorm_pipeline(dev, &ln, p->c, NULL, p->norm_g, p->norm_b, p->c, queue, gemm_done, event);
}

/* conv2d's 1x1 layers whose images' GEMMs run one by one (runs_across_images declined: whole
 * tiles per image, ResNet-50's 56x56 planes) with few output channels (canonical m <= 128) and
 * many pixels (n >= 2048) read x's rows in place instead of packing them first (PACKB=0): a
 * packed panel of B is reused by only m / MWI row tiles, and the copy is a full pass over x
 * (38-42% of ResNet-50's 256->64 layer at batch 8, session 22). On the 2-core Zen 5 (session 23,
 * build/bench/conv1x1_gemm, the `medium` entry with PACKB 1 against 0, process CPU time, medians
 * of 7 rounds, load 1.8-2.5): 256->64 1.55x at batch 8, 1.19x at batch 1; 64->64 1.27x and 1.05x;
 * 256->128 1.27x and 1.10x; 64->256 (m = 256) 1.00x both, hence the bound. A 16-bit x is then
 * widened by the kernel's loads instead of by the packing: 256->64 at batch 8 f16 6.7-7.1 ms of CPU
 * a call -> 3.9-4.0, bf16 6.5-6.8 -> 3.9-4.0 (fp32 6.4-6.6 -> 4.2-4.3). A GEMM override
 * (tsr_config_override, $TSR_CONFIG_GEMM) is left as given. im2col's GEMMs on other layers pass image_columns too (B: the column matrix): the
 * 64x56x56 3x3 layer forced to im2col ran 1.2x faster at batch 8. */
static void unpacked_b_for_images(tsr_device *dev, const gemm_problem *p, tsr_config *cfg, size_t columns) {
    int *v = cfg->values;
    if (!columns || dev->info.type != TSR_DEVICE_CPU || simt_cpu(dev) || v[P_KERNEL] != GEMM_TILED || v[P_SA] ||
        v[P_SB] || !v[P_PACKB] || p->tb || p->n != columns || p->m > 128 || p->n < 2048 ||
        runs_across_images(dev, p, cfg, columns) || tsr_op_overridden(dev, &tsr_op_gemm))
        return;
    v[P_PACKB] = 0;
}

/* A launch as the problem and extras ask: across images where runs_across_images allows. */
static tsr_status gemm_launch_for(tsr_device *dev, const gemm_problem *p, const tsr_config *cfg,
                                  const tsr_matmul_extras *extras, cl_command_queue queue, cl_event *event) {
    if (runs_across_images(dev, p, cfg, extras->image_columns))
        return gemm_launch_images(dev, p, cfg, queue, extras->input_ready, event);
    return gemm_launch(dev, p, cfg, queue, extras->input_ready, event, NULL);
}

tsr_status tsr_matmul_pipeline(tsr_device *dev, const tsr_matmul_desc *desc, const tsr_matmul_extras *extras, cl_mem a,
                               cl_mem b, cl_mem c, cl_command_queue queue, cl_event *event) {
    if (event) *event = NULL;
    static const tsr_matmul_extras none = {0};
    if (!extras) extras = &none;
    if (!dev) return tsr_fail(TSR_ERR_INVALID_ARG, "device is NULL");
    tsr_status status = TSR_SUCCESS;
    tsr_matmul_desc d;
    size_t need[3];
    gemm_problem p;
    TSR_CHECK(status, tsr_matmul_check(desc, extras->literal, &d, need), done);
    TSR_CHECK(status, check_epilogue(dev, &d), done);
    TSR_CHECK(status, gemm_bind(dev, &d, need, a, b, c, &p), done);
    tsr_op_output(c);
    cl_command_queue q;
    TSR_CHECK(status, tsr_resolve_queue(dev, queue, &q), done);
    tsr_config cfg;
    gemm_problem one = p;
    if (extras->class_by_shape) one.batch = 1; /* classify by one matrix's shape */
    /* the fields its class and legality are read from */
    const uint32_t shape[] = {(uint32_t)one.m, (uint32_t)one.n, (uint32_t)one.k, (uint32_t)one.batch,
                              (uint32_t)((uint64_t)one.batch >> 32), one.ta, one.tb, (uint32_t)one.types.a,
                              (uint32_t)one.types.b, (uint32_t)one.types.c};
    TSR_CHECK(status, tsr_op_config_shape(dev, &tsr_op_gemm, &one, shape, sizeof shape / sizeof *shape, &cfg), done);
    unpacked_b_for_images(dev, &p, &cfg, extras->image_columns);
    /* a LayerNorm launched after the GEMM waits for the GEMM's event */
    cl_event gemm_done = NULL, *gemm_event = p.norm ? &gemm_done : event;
    status = gemm_launch_for(dev, &p, &cfg, extras, q, gemm_event);
    if (tsr_op_build_fallback(dev, &tsr_op_gemm, &one, status, &cfg))
        status = gemm_launch_for(dev, &p, &cfg, extras, q, gemm_event);
    if (p.norm && status == TSR_SUCCESS) {
        if (norm_fused(dev, &p, &cfg)) {
            if (event) *event = gemm_done;
            else clReleaseEvent(gemm_done);
            gemm_done = NULL;
        } else {
            status = gemm_norm_after(dev, &p, q, gemm_done, event);
        }
    }
    if (gemm_done) clReleaseEvent(gemm_done);
done:
    return status;
}

tsr_status tsr_matmul(tsr_device *dev, const tsr_matmul_desc *desc, cl_mem a, cl_mem b, cl_mem c,
                      cl_command_queue queue, cl_event *event) {
    tsr_clear_diagnostics();
    return tsr_matmul_pipeline(dev, desc, NULL, a, b, c, queue, event);
}

tsr_status tsr_sgemm_strided_batched(tsr_device *dev, tsr_layout layout, tsr_transpose ta, tsr_transpose tb, size_t m,
                                     size_t n, size_t k, float alpha, cl_mem a, size_t a_off, size_t lda,
                                     size_t a_stride, cl_mem b, size_t b_off, size_t ldb, size_t b_stride, float beta,
                                     cl_mem c, size_t c_off, size_t ldc, size_t c_stride, size_t batch,
                                     cl_command_queue queue, cl_event *event) {
    tsr_clear_diagnostics();
    const tsr_matmul_desc desc = {.layout = layout,
                                  .trans_a = ta,
                                  .trans_b = tb,
                                  .m = m,
                                  .n = n,
                                  .k = k,
                                  .batch = batch,
                                  .alpha = alpha,
                                  .beta = beta,
                                  .a = {.offset = a_off, .ld = lda, .batch_stride = a_stride},
                                  .b = {.offset = b_off, .ld = ldb, .batch_stride = b_stride},
                                  .c = {.offset = c_off, .ld = ldc, .batch_stride = c_stride}};
    const tsr_matmul_extras clblast = {.literal = true};
    return tsr_matmul_pipeline(dev, &desc, &clblast, a, b, c, queue, event);
}

tsr_status tsr_sgemm(tsr_device *dev, tsr_layout layout, tsr_transpose ta, tsr_transpose tb, size_t m, size_t n,
                     size_t k, float alpha, cl_mem a, size_t a_off, size_t lda, cl_mem b, size_t b_off, size_t ldb,
                     float beta, cl_mem c, size_t c_off, size_t ldc, cl_command_queue queue, cl_event *event) {
    return tsr_sgemm_strided_batched(dev, layout, ta, tb, m, n, k, alpha, a, a_off, lda, 0, b, b_off, ldb, 0, beta, c,
                                     c_off, ldc, 0, 1, queue, event);
}

tsr_status tsr_gemm_config_info(tsr_device *dev, size_t m, size_t n, size_t k, size_t batch, tsr_config_info *info) {
    if (!dev || !info) return tsr_fail(TSR_ERR_INVALID_ARG, "gemm: device and info must be set");
    if (m == 0 || n == 0 || batch == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "m, n and batch_count must be at least 1");
    gemm_problem p;
    memset(&p, 0, sizeof p);
    p.m = m; p.n = n; p.k = k; p.batch = batch;
    return tsr_op_config_lookup(dev, &tsr_op_gemm, gemm_problem_class(&p), info);
}

/* ---- plans: a checked descriptor and its configuration, read-only once made ---- */

struct tsr_matmul_plan {
    tsr_device *device;   /* held: see tsr_device_hold */
    tsr_matmul_desc desc; /* defaults explicit */
    size_t need[3];
    tsr_config config; /* resolved at creation, kept */
    tsr_config_info info;
};

tsr_status tsr_matmul_plan_create(tsr_device *dev, const tsr_matmul_desc *desc, tsr_matmul_plan **plan) {
    tsr_clear_diagnostics();
    if (!plan) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_matmul_plan_create: plan is NULL");
    *plan = NULL;
    if (!dev) return tsr_fail(TSR_ERR_INVALID_ARG, "device is NULL");
    tsr_status status = TSR_SUCCESS;
    tsr_matmul_plan *pl = calloc(1, sizeof *pl);
    if (!pl) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    TSR_CHECK(status, tsr_matmul_check(desc, false, &pl->desc, pl->need), done);
    TSR_CHECK(status, check_epilogue(dev, &pl->desc), done);
    if (pl->desc.epilogue.norm_gamma) {
        status = tsr_fail(TSR_ERR_UNSUPPORTED, "tsr_matmul_plan_create: a plan takes no epilogue LayerNorm (norm_gamma)");
        goto done;
    }
    gemm_problem shape = gemm_shape(&pl->desc, false);
    TSR_CHECK(status, tsr_op_config(dev, &tsr_op_gemm, &shape, &pl->config), done);
    TSR_CHECK(status, tsr_op_config_lookup(dev, &tsr_op_gemm, gemm_problem_class(&shape), &pl->info), done);
    if (packs_shared_a(dev, &shape, &pl->config)) { /* what the launch runs: A packed once for the batch */
        tsr_config packed = pl->config;
        packed.values[P_PACKA] = 1;
        tsr_config_format(&tsr_op_gemm, &packed, pl->info.config, sizeof pl->info.config);
        const size_t used = strlen(pl->info.origin);
        snprintf(pl->info.origin + used, sizeof pl->info.origin - used,
                 "; PACKA=1 for this plan: the batch shares A, packed once for every item");
    }
    pl->device = dev;
    tsr_device_hold(dev);
    /* checked once: kept */
    if (pl->desc.epilogue.bias) clRetainMemObject(pl->desc.epilogue.bias);
    if (pl->desc.epilogue.scale) clRetainMemObject(pl->desc.epilogue.scale);
    if (pl->desc.epilogue.residual) clRetainMemObject(pl->desc.epilogue.residual);
    *plan = pl;
    pl = NULL;
done:
    free(pl);
    return status;
}

tsr_status tsr_matmul_execute(tsr_matmul_plan *plan, cl_mem a, cl_mem b, cl_mem c, cl_command_queue queue,
                              cl_event *event) {
    tsr_clear_diagnostics();
    if (event) *event = NULL;
    if (!plan) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_matmul_execute: plan is NULL");
    tsr_device *dev = plan->device;
    if (tsr_device_closed(dev))
        return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_matmul_execute: the plan's device was closed");
    tsr_status status = TSR_SUCCESS;
    gemm_problem p;
    TSR_CHECK(status, gemm_bind(dev, &plan->desc, plan->need, a, b, c, &p), done);
    tsr_op_output(c);
    cl_command_queue q;
    TSR_CHECK(status, tsr_resolve_queue(dev, queue, &q), done);
    tsr_config cfg = plan->config; /* a copy: a build fallback changes this launch's only */
    status = gemm_launch(dev, &p, &cfg, q, NULL, event, NULL);
    if (tsr_op_build_fallback(dev, &tsr_op_gemm, &p, status, &cfg))
        status = gemm_launch(dev, &p, &cfg, q, NULL, event, NULL);
done:
    return status;
}

tsr_status tsr_matmul_plan_info(const tsr_matmul_plan *plan, tsr_config_info *info) {
    tsr_clear_diagnostics();
    if (!plan || !info) return tsr_fail(TSR_ERR_INVALID_ARG, "tsr_matmul_plan_info: plan and info must be set");
    *info = plan->info;
    return TSR_SUCCESS;
}

void tsr_matmul_plan_destroy(tsr_matmul_plan *plan) {
    if (!plan) return;
    tsr_device *dev = plan->device;
    if (plan->desc.epilogue.bias) clReleaseMemObject(plan->desc.epilogue.bias);
    if (plan->desc.epilogue.scale) clReleaseMemObject(plan->desc.epilogue.scale);
    if (plan->desc.epilogue.residual) clReleaseMemObject(plan->desc.epilogue.residual);
    free(plan);
    tsr_device_drop(dev);
}

/* ---- tuning ---- */

static const char *gemm_nearest_class(const char *cls) {
    /* A batch of small GEMMs behaves like one small GEMM. The other classes differ enough
     * in shape (packing pays off or not) that their own defaults beat another class's tuning. */
    /* (tsr_op_nearest_class gives "batched-f16" the same storage's "small-f16".) small-m16 (9-16
     * rows) was split from small-m: until a database has an entry of its own, small-m's. */
    if (strcmp(cls, "batched") == 0) return "small";
    return strcmp(cls, "small-m16") == 0 ? "small-m" : NULL;
}

static const char *gemm_tuning_space(const tsr_device *dev, const char *problem_class) {
    (void)problem_class; /* one space for every class */
    /* On CPUs (PoCL) barriers and large work-groups only cost: search the register tile,
     * vector shape, unrolling and packing. */
    /* CPUs that vectorize across work-items (llvmpipe): groups of light items, as on a GPU,
     * without packing (each pack kernel is one more slow compile there). */
    if (simt_cpu(dev))
        return "KERNEL=0 MWI=1,2,4 VW=1,2,4 NVW=1,2,4 KU=1,2,4 WGM=4,8,16 WGN=4,8,16 KWG=8,16 SA=0,1 SB=0,1 PACKA=0 "
               "PACKB=0 KC=0 NT=1";
    if (dev->info.type == TSR_DEVICE_CPU)
        return "KERNEL=0,2 MWI=2,4,6,8 VW=4,8,16 NVW=1,2 KU=1,2,4,8 WGM=1,2,4 WGN=1 KWG=8 SA=0 SB=0 PACKA=0,1 PACKB=0,1 "
               "KC=0,512 NT=1,2,4,8";
    /* GPUs and others: both kernels (each implementation's default is measured first), the gpu
     * kernel's register tiles, group shapes, k-tiles, padding and double buffering. */
    return "KERNEL=0,1 MWI=1,2,4,8 VW=1,2,4,8 NVW=1,2,4 KU=1,2,4,8 WGM=4,8,16,32 WGN=4,8,16,32 KWG=8,16,32 SA=0,1 "
           "SB=0,1 PACKA=0 PACKB=0 KC=0 NT=1 PAD=0,1 DB=0,1 SPLIT=0,2,4,8";
}

/* ---- the fixture: C = A op(B), row-major, "MxNxK" or "BATCHxMxNxK", then optionally "+tb" (B
 * stored transposed, [N][K], read with trans_b: nn.Linear's weight) and a dtype token ("f16": A,
 * B and C in f16; "bf16/f32": A and B in bf16, C in f32) ---- */

typedef struct gemm_fixture {
    gemm_problem p;
    float *host_c;
    double *ref;     /* C in double, or for large problems (A (B t)) for FIXTURE_PROBES probe vectors t */
    double *probes;  /* the probe vectors (n each), NULL when ref is the whole C */
} gemm_fixture;

/* Above this many multiply-adds the check compares C t with A (B t) for random probe vectors
 * t: O(n^2) instead of O(n^3), and any wrong or unwritten (NaN) element still shows. */
#define FIXTURE_EXACT_LIMIT (1u << 27)
#define FIXTURE_PROBES 2

/* Each class is tuned in the middle of its range rather than at its edge: "large" (volumes from
 * 512^3 up) at 2048^3 (at 1024^3 a GPU picked tiles that lost 10% at 4096^3), "medium" on what
 * its calls mostly are, a 1x1 convolution's GEMM (ResNet-50's 14x14 256 -> 1024 layer, the
 * weights as A, one image as B: at 256^3 packing A or not measured level, at 1x1 layers' shapes
 * not), "batched" at
 * 64 x 128^3, a batch that fills a GPU (at 32 x 96^3 the choice lost 25% at 64 x 128^3),
 * "small-m16" at 16 rows over 64 MB of row-major weights ([in, out], as the MiniLM runner stores
 * them; "+tb" in a shape stores B transposed): what a 16-token forward streams is all of a model's
 * weights, more than a CPU's last-level cache. At MiniLM's own 16 x 1536 x 384 (2.4 MB, hot in
 * cache between the tuner's runs) a tiled, A-packed configuration won 396 against 215 GFLOP/s on
 * the Zen 5 and then ran the MiniLM forward 1.31x slower than the small-m kernel (session 19). 
 * The 16-bit classes are tuned with 16-bit A and B and an fp32 C: A and B are what the tile shapes
 * stream (C is written once), and an fp32 C keeps the result within the tuner's fp32 tolerance. */
static const char *const gemm_class_shapes[] = {"2048x2048x2048", "1024x196x256", "96x96x96",     "8x4096x2048",
                                                "4096x8x2048",    "64x128x128x128", "16x4096x4096"};
/* Smaller problems of the same classes for slow devices (tsr_op.class_shapes_reduced), about an
 * eighth and a sixty-fourth of the work (and less for the slowest classes); fixture.problem_class
 * checks each stays in its class. */
/* Each class's second problem (tsr_op.class_shapes_check), where a pick must not lose what it wins on
 * the class's own: transformer shapes of other aspects (MiniLM and BERT at 128-384 tokens, the FFN's
 * 3072-deep product, per-head attention batches, a few decoding rows), each small enough that its
 * host reference costs about a second at most. */
static const char *const gemm_class_shapes_check[] = {"256x768x3072", "128x1152x384", "64x64x256",    "4x384x1536",
                                                      "2048x4x512",   "12x128x128x64", "12x1024x4096"};
_Static_assert(sizeof gemm_class_shapes_check / sizeof *gemm_class_shapes_check ==
                   sizeof gemm_classes / sizeof *gemm_classes - 1,
               "a second problem for each GEMM class");
static const char *const gemm_class_shapes_reduced[] = {
    "1024x1024x1024;640x640x640;528x528x528",
    "512x98x128;256x98x96",
    "",
    "8x1024x1024;8x512x512",
    "1024x8x1024;512x8x512",
    "8x128x128x128;2x128x128x128",
    "16x1024x1024;16x512x512"};
static const tsr_report_shape gemm_report_shapes[] = {
    {"gemm-square", "2048x2048x2048", "64x64x64"},
    {"gemm-bert", "512x3072x768", "32x96x48"},
    {"gemm-square-f16", "2048x2048x2048 f16", "64x64x64 f16"},
    {NULL, NULL, NULL},
};

static void gemm_fixture_free(void *ctx) {
    gemm_fixture *t = ctx;
    if (!t) return;
    if (t->p.a) clReleaseMemObject(t->p.a);
    if (t->p.b) clReleaseMemObject(t->p.b);
    if (t->p.c) clReleaseMemObject(t->p.c);
    free(t->host_c);
    free(t->ref);
    free(t->probes);
    free(t);
}

static tsr_status gemm_fixture_setup(tsr_device *dev, const char *shape, uint64_t seed, void **out) {
    size_t v[4] = {0}, batch = 1, m, n, k;
    char dims[128], words_[2][32], extra[2];
    tsr_dtype in = TSR_F32, out_type = TSR_F32;
    int words = sscanf(shape, "%127s %31s %31s %1s", dims, words_[0], words_[1], extra);
    int w = 0; /* words after the dimensions read so far */
    bool tb = words >= 2 && strcmp(words_[0], "+tb") == 0;
    if (tb) ++w;
    bool typed_ok = words == 2 + w && tsr_dtype_spec_parse(words_[w], &in, &out_type);
    char tail;
    int got = words >= 1 ? sscanf(dims, "%zux%zux%zux%zu%c", &v[0], &v[1], &v[2], &v[3], &tail) : 0;
    if ((words != 1 + w && !typed_ok) || (got != 3 && got != 4))
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "gemm: shape '%s' is not MxNxK or BATCHxMxNxK, optionally followed by +tb (B transposed) "
                        "and a dtype (f16, bf16, f16/f32, ...)",
                        shape);
    if (got == 3) m = v[0], n = v[1], k = v[2];
    else
        batch = v[0], m = v[1], n = v[2], k = v[3];
    size_t na, nb, nc;
    tsr_status status = TSR_SUCCESS;
    gemm_fixture *t = NULL;
    float *a = NULL, *b = NULL;
    TSR_CHECK(status, tsr_size_mad("gemm fixture A", batch, m * k, 0, &na), done);
    TSR_CHECK(status, tsr_size_mad("gemm fixture B", batch, k * n, 0, &nb), done);
    TSR_CHECK(status, tsr_size_mad("gemm fixture C", batch, m * n, 0, &nc), done);
    if (!na || !nb || !nc) return tsr_fail(TSR_ERR_INVALID_ARG, "gemm: shape '%s' is empty", shape);
    t = calloc(1, sizeof *t);
    if (!t) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    gemm_problem *p = &t->p;
    p->batch = batch; p->m = m; p->n = n; p->k = k;
    p->tb = tb;
    p->types = (tsr_gemm_types){in, in, out_type};
    p->alpha = 1.0f; p->beta = 0.0f;
    p->lda = p->k; p->ldb = tb ? p->k : p->n; p->ldc = p->n;
    p->a_stride = p->m * p->k; p->b_stride = p->k * p->n; p->c_stride = p->m * p->n;
    a = malloc(na * sizeof *a), b = malloc(nb * sizeof *b);
    bool exact = (double)p->batch * p->m * p->n * p->k <= FIXTURE_EXACT_LIMIT;
    t->host_c = malloc(nc * sizeof(float));
    t->ref = malloc((exact ? nc : FIXTURE_PROBES * p->batch * p->m) * sizeof(double));
    if (!exact) t->probes = malloc(FIXTURE_PROBES * p->n * sizeof(double));
    cl_int err;
    if (!a || !b || !t->host_c || !t->ref || (!exact && !t->probes)) {
        status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    tsr_random_fill(a, na, &seed, -1.0f, 1.0f);
    tsr_random_fill(b, nb, &seed, -1.0f, 1.0f);
    /* the reference is computed from exactly what the device reads */
    tsr_dtype_round_array(in, a, na);
    tsr_dtype_round_array(in, b, nb);
    if (exact) {
        tsr_gemm_reference(p->batch, p->m, p->n, p->k, a, b, t->ref);
    } else {
        for (size_t j = 0; j < FIXTURE_PROBES * p->n; ++j) t->probes[j] = tsr_random_float(&seed, -0.5f, 0.5f);
        status = tsr_gemm_probe_reference(p->batch, p->m, p->n, p->k, a, b, t->probes, FIXTURE_PROBES, t->ref);
        if (status != TSR_SUCCESS) goto done;
    }
    p->a = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, na * tsr_dtype_size(in), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    p->b = clCreateBuffer(dev->context, CL_MEM_READ_ONLY, nb * tsr_dtype_size(in), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    p->c = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, nc * tsr_dtype_size(out_type), NULL, &err);
    TSR_CL_CHECK(status, err, done);
    TSR_CHECK(status, tsr_upload_typed(dev, p->a, in, a, na), done);
    if (tb) { /* each matrix of B stored [N][K] (the reference above read it as [K][N]) */
        float *bt = malloc(nb * sizeof *bt);
        if (!bt) {
            status = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        for (size_t q = 0; q < batch; ++q)
            for (size_t kk = 0; kk < k; ++kk)
                for (size_t j = 0; j < n; ++j) bt[q * k * n + j * k + kk] = b[q * k * n + kk * n + j];
        free(b);
        b = bt;
    }
    TSR_CHECK(status, tsr_upload_typed(dev, p->b, in, b, nb), done);
    for (size_t j = 0; j < nc; ++j)
        t->host_c[j] = NAN; /* poisoned: a run must write every element */
    TSR_CHECK(status, tsr_upload_typed(dev, p->c, out_type, t->host_c, nc), done);
    p->bias = p->scale = p->res = p->c; /* no epilogue: a valid buffer the kernel does not read */
    p->res_type = -1;
done:
    free(a);
    free(b);
    if (status != TSR_SUCCESS) {
        gemm_fixture_free(t);
        return status;
    }
    *out = t;
    return TSR_SUCCESS;
}

static tsr_status gemm_fixture_run(tsr_device *dev, void *ctx, const tsr_config *cfg, cl_command_queue queue,
                                   cl_event *first, cl_event *last) {
    gemm_fixture *t = ctx;
    const gemm_problem *p = &t->p;
    if (cfg) return gemm_launch(dev, p, cfg, queue, NULL, last, first);
    /* as a caller gets it: through the public call, timed from a marker before it */
    cl_event start = NULL;
    if (first) {
        cl_int err = clEnqueueMarkerWithWaitList(queue, 0, NULL, &start);
        if (err != CL_SUCCESS) return tsr_fail_cl(err, "clEnqueueMarkerWithWaitList", __FILE__, __LINE__);
    }
    bool fp32 = p->types.a == TSR_F32 && p->types.b == TSR_F32 && p->types.c == TSR_F32;
    const tsr_transpose tb = p->tb ? TSR_TRANS : TSR_NO_TRANS;
    const tsr_matmul_desc desc = {.trans_b = tb,
                                  .m = p->m,
                                  .n = p->n,
                                  .k = p->k,
                                  .batch = p->batch,
                                  .alpha = 1.0f,
                                  .a = {p->types.a, 0, p->lda, p->a_stride},
                                  .b = {p->types.b, 0, p->ldb, p->b_stride},
                                  .c = {p->types.c, 0, p->ldc, p->c_stride}};
    tsr_status st = !fp32 ? tsr_matmul(dev, &desc, p->a, p->b, p->c, queue, last)
                    : p->batch > 1
                        ? tsr_sgemm_strided_batched(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, tb, p->m, p->n, p->k,
                                                    1.0f, p->a, 0, p->lda, p->a_stride, p->b, 0, p->ldb, p->b_stride,
                                                    0.0f, p->c, 0, p->ldc, p->c_stride, p->batch, queue, last)
                        : tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, tb, p->m, p->n, p->k, 1.0f, p->a, 0,
                                    p->lda, p->b, 0, p->ldb, 0.0f, p->c, 0, p->ldc, queue, last);
    if (st != TSR_SUCCESS) {
        if (start) clReleaseEvent(start);
        return st;
    }
    if (first) *first = start;
    return TSR_SUCCESS;
}

static tsr_status gemm_fixture_check(tsr_device *dev, void *ctx, double *rel_err) {
    gemm_fixture *t = ctx;
    const gemm_problem *p = &t->p;
    size_t nc = p->batch * p->c_stride;
    tsr_status status = tsr_download_typed(dev, p->c, p->types.c, t->host_c, nc);
    if (status != TSR_SUCCESS) return status;
    *rel_err = t->probes ? tsr_gemm_probe_error(p->batch, p->m, p->n, t->host_c, t->probes, FIXTURE_PROBES, t->ref)
                         : tsr_rel_error(t->host_c, t->ref, nc);
    /* the next run cannot pass on this one's output */
    for (size_t j = 0; j < nc; ++j)
        t->host_c[j] = NAN;
    return tsr_upload_typed(dev, p->c, p->types.c, t->host_c, nc);
}

static void gemm_fixture_work(const void *ctx, double *flops, double *bytes) {
    const gemm_problem *p = &((const gemm_fixture *)ctx)->p;
    *flops = 2.0 * p->batch * p->m * p->n * p->k;
    *bytes = (double)p->batch *
             ((double)tsr_dtype_size(p->types.a) * p->a_stride + (double)tsr_dtype_size(p->types.b) * p->b_stride +
              (double)tsr_dtype_size(p->types.c) * p->c_stride);
}

static double gemm_fixture_tolerance(const void *ctx) {
    const gemm_problem *p = &((const gemm_fixture *)ctx)->p;
    double bound = tsr_dtype_error_bound(p->types.c, (double)(p->k ? p->k : 1));
    return bound > tsr_op_gemm.tolerance ? bound : tsr_op_gemm.tolerance;
}

static void gemm_fixture_describe(const void *ctx, char *out, size_t size) {
    const gemm_problem *p = &((const gemm_fixture *)ctx)->p;
    char spec[32];
    tsr_dtype_spec_format(p->types.a, p->types.c, spec, sizeof spec);
    const char *tb = p->tb ? " +tb" : "";
    if (p->batch > 1)
        snprintf(out, size, "%zux%zux%zux%zu%s%s%s", p->batch, p->m, p->n, p->k, tb, *spec ? " " : "", spec);
    else
        snprintf(out, size, "%zux%zux%zu%s%s%s", p->m, p->n, p->k, tb, *spec ? " " : "", spec);
}

static int gemm_fixture_buffers(const void *ctx, cl_mem *buffers, int max) {
    const gemm_problem *p = &((const gemm_fixture *)ctx)->p;
    cl_mem all[3] = {p->a, p->b, p->c};
    for (int i = 0; i < 3 && i < max; ++i) buffers[i] = all[i];
    return 3;
}

/* A class's programs are in its own storage types (fp32 classes fp32, "-f16" ones the f16 sets). */
static bool gemm_variant_serves_class(const char *problem_class, int variant) {
    const tsr_gemm_types t = gemm_type_set(variant);
    return tsr_dtype_types_serve_class((const tsr_dtype[]){t.a, t.b, t.c}, 3, problem_class);
}

static const char *gemm_fixture_class(const void *fixture) {
    return gemm_problem_class(&((const gemm_fixture *)fixture)->p);
}

const tsr_op tsr_op_gemm = {
    .name = "gemm",
    .source_name = "gemm",
    .params = gemm_params,
    .nparams = GEMM_NPARAMS,
    .classes = gemm_classes,
    .problem_class = gemm_problem_class,
    .defaults = gemm_defaults,
    .ndefaults = TSR_COUNT(gemm_defaults),
    .more_sources = gemm_more_sources,
    .implementations = gemm_implementations,
    .nimplementations = TSR_COUNT(gemm_implementations),
    .implementation_param = "KERNEL",
    .config_ok = gemm_config_ok,
    .program_variants = GEMM_PROGRAM_VARIANTS,
    .variant_serves_class = gemm_variant_serves_class,
    .build_options = gemm_build_options,
    .program_source = gemm_program_source,
    .nearest_class = gemm_nearest_class,
    .tuning_space = gemm_tuning_space,
    .tolerance = 1e-5,
    .class_shapes = gemm_class_shapes,
    .class_shapes_reduced = gemm_class_shapes_reduced,
    .class_shapes_check = gemm_class_shapes_check,
    .class_storage = TSR_CLASSES_PER_INPUT_TYPE,
    .fixture = {.setup = gemm_fixture_setup, .run = gemm_fixture_run, .check = gemm_fixture_check,
                .work = gemm_fixture_work, .describe = gemm_fixture_describe, .buffers = gemm_fixture_buffers,
                .free = gemm_fixture_free, .problem_class = gemm_fixture_class, .tolerance = gemm_fixture_tolerance},
    .demo = {.title = "sgemm 256x256x256", .shapes = {"256x256x256"}, .runs = 3},
    .report_shapes = gemm_report_shapes,
};
