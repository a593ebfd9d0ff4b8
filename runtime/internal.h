/* Internal declarations shared by the runtime's translation units (not installed). */
#ifndef TSR_INTERNAL_H
#define TSR_INTERNAL_H

#include "tessera.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>

#define TSR_PATH_MAX 1024

/* ---- errors (status.c) ---- */

/* Record a failure message for tsr_last_error() and return `status`. */
tsr_status tsr_fail(tsr_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Record an OpenCL failure: the call's text, the error's name, file and line. */
tsr_status tsr_fail_cl(cl_int err, const char *what, const char *file, int line);
/* Append text to the last error message (e.g. a build log). */
void tsr_error_append(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Record a non-fatal warning for tsr_last_warning(). */
void tsr_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Clear this thread's error and warning: every public entry point starts with it. */
void tsr_clear_diagnostics(void);
/* Clear only the error (after a failure that was handled and turned into a warning). */
void tsr_clear_error(void);
const char *tsr_cl_error_name(cl_int err);

/* The one error idiom in runtime/: a function keeps its status in a local it names, checks each
 * step with TSR_CHECK / TSR_CL_CHECK and cleans up at one label (`done`; `unlock` where a lock is
 * released before it), then returns the status:
 *     tsr_status status = TSR_SUCCESS;
 *     TSR_CHECK(status, step(...), done);
 *     TSR_CL_CHECK(status, clSomething(...), done);
 *   done:
 *     cleanup...;
 *     return status;
 * A function's own refusals may `return tsr_fail(...)` directly. tests/check_idioms.py keeps the
 * older forms out. */

/* Check an OpenCL call; on failure record it in `status_var` and jump to `label`. */
#define TSR_CL_CHECK(status_var, call, label)                                                                          \
    do {                                                                                                               \
        cl_int tsr_cl_err_ = (call);                                                                                   \
        if (tsr_cl_err_ != CL_SUCCESS) {                                                                               \
            (status_var) = tsr_fail_cl(tsr_cl_err_, #call, __FILE__, __LINE__);                                        \
            goto label;                                                                                                \
        }                                                                                                              \
    } while (0)

/* Check a tessera status; on failure keep it in `status_var` and jump to `label`. */
#define TSR_CHECK(status_var, expr, label)                                                                             \
    do {                                                                                                               \
        (status_var) = (expr);                                                                                         \
        if ((status_var) != TSR_SUCCESS) goto label;                                                                   \
    } while (0)

/* ---- storage types (dtype.c; the device side is cl/dtype.cl) ---- */

/* The storage types are the enum's values 0 .. TSR_DTYPE_COUNT - 1 (TSR_F32 first; the others
 * are the 16-bit types, in the order of their problem classes). */
#define TSR_DTYPE_COUNT ((int)TSR_BF16 + 1)
/* The storage sets ops build ahead of time: fp32 throughout, each 16-bit type throughout, and each
 * 16-bit type for the inputs with an fp32 output (tsr_dtype_storage_set). */
#define TSR_STORAGE_SETS (2 * TSR_DTYPE_COUNT - 1)

bool tsr_dtype_valid(tsr_dtype dtype);
/* TSR_ERR_INVALID_ARG naming `what` unless dtype is one of the enum's values. */
tsr_status tsr_dtype_check(const char *what, tsr_dtype dtype);
/* Scalar conversions, rounding to nearest even, NaN kept (quiet), overflow to Inf. */
uint16_t tsr_f32_to_f16(float value);
float tsr_f16_to_f32(uint16_t half);
uint16_t tsr_f32_to_bf16(float value);
float tsr_bf16_to_f32(uint16_t bf16);
/* The value `value` reads back as after a store in dtype (fixtures round their inputs with it, so
 * references are computed from exactly what the device sees). */
float tsr_dtype_round(tsr_dtype dtype, float value);
void tsr_dtype_round_array(tsr_dtype dtype, float *values, size_t n);
/* 2^-24, 2^-11, 2^-8: half the distance from 1 to the next value of the type. */
double tsr_dtype_unit_roundoff(tsr_dtype dtype);
/* The error bound tests and fixtures hold a result to when its inputs were rounded to their types
 * before the double-precision reference was computed from them: the output's rounding (its unit
 * roundoff when 16-bit) plus fp32 accumulation over `reduction` terms (K for GEMM, C*R*S for
 * conv2d, the key count for attention), 8 sqrt(reduction) 2^-24: rounding errors of random-signed
 * terms add like a random walk, and 8 is the margin. Relative, in the op's own norm. */
double tsr_dtype_error_bound(tsr_dtype out, double reduction);
/* GELU with a 16-bit y, on top of y's rounding: its fp32 value before the store is within
 * TSR_GELU16_ERROR max(1, |x|) of GELU(x) (on AVX-512 CPUs cl/gelu.cl's GELU16 forms compute it
 * from tables of quadratics, to the accuracy y keeps; docs/dtypes.md, "Error bounds"). */
#define TSR_GELU16_ERROR 0x1p-13
/* The dtype token of a shape text: "f16" (inputs and output), "bf16/f32" (inputs / output). True
 * when `token` is one (names as tsr_dtype_parse), without recording an error when it is not. */
bool tsr_dtype_spec_parse(const char *token, tsr_dtype *in, tsr_dtype *out);
/* The token back ("" for f32 throughout, "f16", "f16/f32"). */
const char *tsr_dtype_spec_format(tsr_dtype in, tsr_dtype out, char *buf, size_t size);
/* A problem class's dtype suffix: "-f16" when any of the types is f16, else "-bf16" when any is
 * bf16, else "" (fp32 classes keep their names, and their tuned entries). */
const char *tsr_dtype_class_suffix(const tsr_dtype *types, size_t n);
/* The same rule as the storage type whose classes these are (0: fp32): the first 16-bit type
 * in enum order that any tensor has (tsr_op_class). */
int tsr_dtype_class_group(const tsr_dtype *types, size_t n);
/* Do programs for tensors of these types serve this class (their class suffix is the class's)? An
 * op's variant_serves_class, so build-binaries writes a class's programs in its own types only. */
bool tsr_dtype_types_serve_class(const tsr_dtype *types, size_t n, const char *problem_class);
/* The fp32 class a 16-bit class falls back to ("large-f16" -> "large" in buf), NULL if none. */
const char *tsr_dtype_class_base(const char *problem_class, char *buf, size_t size);
/* Storage set `index` (0 <= index < TSR_STORAGE_SETS) as the inputs' and the output's type: 0 fp32,
 * then each 16-bit type throughout, then each 16-bit type with an fp32 output ("f16/f32"). */
void tsr_dtype_storage_set(int index, tsr_dtype *in, tsr_dtype *out);
/* Every combination of types for n tensors (n <= 8; the last one the output), numbered: the
 * storage sets first (index < TSR_STORAGE_SETS, as tsr_dtype_storage_set), then the others in
 * lexicographic order, TSR_DTYPE_COUNT^n in all; and the number of a combination. */
void tsr_dtype_combination(int index, int n, tsr_dtype *types);
int tsr_dtype_combination_index(int n, const tsr_dtype *types);

/* ---- op configurations (values; parsed and formatted in op.c) ---- */

/* Whether the kernel sees a parameter: DEFINE parameters become -DNAME=value (tsr_config_defines);
 * HOST parameters only steer the host (launch geometry, which kernel or implementation), so
 * candidates that differ only in them share one program. */
typedef enum tsr_param_kind { TSR_PARAM_DEFINE, TSR_PARAM_HOST } tsr_param_kind;

/* One tuning parameter of an op, found by name everywhere (parse, format, -D flags, the tuning
 * database). Declare an op's parameters once, with TSR_PARAMS below. */
typedef struct tsr_param_def {
    const char *name;      /* "MWI": in configuration text, the tuning database and -D flags */
    const int *values;     /* the values a search and an override may take */
    int nvalues;
    int default_value;     /* the declared default: built-in configurations are written over it, and
                            * an implementation that does not read the parameter runs with it */
    tsr_param_kind kind;
} tsr_param_def;

#define TSR_MAX_PARAMS 20

/* An op's parameters are one X-macro list, each entry X(NAME, KIND, DEFAULT, values...):
 *     #define GEMM_PARAMS(X) X(MWI, DEFINE, 1, 1, 2, 4, 6, 8) X(SA, DEFINE, 0, 0, 1)
 *     enum { GEMM_PARAMS(TSR_PARAM_INDEX) GEMM_NPARAMS };               (P_MWI, P_SA, ...)
 *     static const tsr_param_def gemm_params[] = {GEMM_PARAMS(TSR_PARAM_DEF)};
 * so a new parameter is one line here plus its use (kernel, legality rule); the value count
 * comes from sizeof. */
#define TSR_PARAM_INDEX(name, kind, def, ...) P_##name,
#define TSR_PARAM_DEF(name, kind, def, ...)                                                       \
    {#name, (const int[]){__VA_ARGS__}, (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)), def, \
     TSR_PARAM_##kind},
/* Entries of a static array (descriptor counts). */
#define TSR_COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

typedef struct tsr_config {
    int values[TSR_MAX_PARAMS];
} tsr_config;
struct tsr_op;

/* ---- devices (device.c: discovery, selectors, open and close; device_info.c: what a device is) ---- */

typedef struct tsr_program_entry tsr_program_entry;

/* Workspace slots: who uses which scratch buffer. */
#define TSR_IDS_SLOTS 4
enum tsr_workspace_slot {
    TSR_WS_PACK_A = 0, /* GEMM's packed A panels */
    TSR_WS_PACK_B = 1, /* GEMM's packed B panels */
    TSR_WS_TEMP0 = 2,  /* temporaries: unfused GELU; attention's transposed K */
    TSR_WS_TEMP1 = 3,  /* temporaries: unfused GELU; unfused attention's scores; attention_blk's widened 16-bit V */
    TSR_WS_CONV_COL = 4, /* conv's im2col column matrices */
    TSR_WS_CONV_W = 5,   /* conv's 16-bit weights widened to fp32 once per call (the implicit forms);
                          * STAGE 5's packed weights; the Winograd form's transformed weights (a
                          * weight buffer marked constant keeps its own instead: derived.c) */
    TSR_WS_CONV_M = 6,   /* conv's Winograd form: the 16 GEMMs' products, before the output transform */
    TSR_WS_SPLIT_K = 7,  /* GEMM's split-K: the fp32 products of the slices of K, before their sum; a 16-bit C's fp32 sums across K blocks */
    TSR_WS_NORM = 8,     /* GEMM's LayerNorm epilogue: a count per row tile, zero between launches */
    TSR_WS_IDS = 9,      /* tsr_embedding's token ids, copied from the host: TSR_IDS_SLOTS slots in turn */
    TSR_WORKSPACE_SLOTS = TSR_WS_IDS + TSR_IDS_SLOTS
};

struct tsr_device {
    tsr_device_info info;
    cl_platform_id platform;
    cl_device_id id;
    cl_context context;
    cl_command_queue queue;
    char fingerprint[6 * TSR_INFO_STR];

    pthread_mutex_t lock; /* recursive; guards the configuration state and workspaces */
    /* The program cache's own lock: guards `programs`, the cache counters and cache_store_paused,
     * and is never held while a program loads or compiles (nor with any other lock taken inside
     * it), so launches never wait for another thread's compile (program.c, lookup_or_build). */
    pthread_mutex_t program_lock;
    tsr_program_entry *programs;   /* in-memory program cache */
    /* Launch records (program.c, tsr_launch_find), guarded by program_lock: hashed chains, their
     * count, and a generation that tsr_launch_invalidate advances. */
    struct tsr_launch_entry *launches[64];
    size_t nlaunches;
    uint64_t launch_generation;
    bool persistent;               /* on-disk cache usable */
    int cache_store_paused;        /* > 0: new builds stay in memory only (the tuner's candidates) */
    /* > 0 while a tuning run searches on this device (runtime/tuner/tune.c): ops may then build a
     * candidate's rarely changing kernels (GEMM's pack kernels) in programs of their own, keyed by
     * the parameters those kernels read, so a search compiles them once (read with relaxed loads). */
    _Atomic int tuning;
    char cache_dir[TSR_PATH_MAX];
    char cache_warning[TSR_PATH_MAX];
    bool offline;                  /* no online compiler: load ahead-of-time binaries */
    char binary_dir[TSR_PATH_MAX];
    /* The environment, read once at device open (docs/usage.md, "Environment"): launches use
     * these, never getenv. */
    char kernel_dir[TSR_PATH_MAX]; /* TSR_KERNEL_DIR; "" (unset or empty): the embedded sources */
    bool trust_binary_dir;         /* TSR_TRUST_BINARY_DIR set and not "0" */
    bool builtin_tuning;           /* TSR_BUILTIN_TUNING is not "off": the shipped tuned entries count */
    uint64_t memory_hits, disk_hits, builds, binary_loads, disk_rejects;

    /* Scratch buffers ops reuse between calls (e.g. GEMM's packed panels): allocating
     * afresh costs page faults on every call. Guarded by `lock`; `last_use` is the
     * event of the last command that read the buffer, which the next writer waits for. */
    struct tsr_workspace {
        cl_mem buffer;
        size_t bytes;
        cl_event last_use;
        /* host memory a non-blocking upload into the buffer reads from (tsr_embedding's ids),
         * free to reuse once last_use completed; freed with the workspace */
        void *host;
        size_t host_bytes;
    } workspace[TSR_WORKSPACE_SLOTS];
    /* The last command that used a workspace buffer a growth replaced (any slot's): recorded
     * graphs keep the buffers they recorded with and replay on them after a growth, where the
     * slot's last_use no longer orders them against each other or against the buffer's last
     * users before the growth (graph.c). NULL: none. Guarded by `lock`. */
    cl_event workspace_retired_use;

    /* Configuration state of config.c, guarded by `lock`. Overrides per op, keyed by the op's
     * environment variable: the TSR_CONFIG_* variables read at open, then tsr_config_override. */
    struct tsr_override {
        char var[64];              /* "TSR_CONFIG_GEMM" */
        char *text;                /* "MWI=6 VW=16 ..." as given */
        bool from_api;             /* set by tsr_config_override, not read from the environment */
    } *overrides;
    size_t noverrides;
    /* Resolved launch configurations per (op, class), filled on first use, growing as needed;
     * the user's tuning database is parsed once per device. */
    struct tsr_resolved {
        const struct tsr_op *op;
        char problem_class[32];
        tsr_config config;
        tsr_config_info info;
    } *resolved;
    size_t nresolved, resolved_capacity;
    struct cJSON *tuning_db;       /* NULL when absent or damaged */
    bool tuning_db_loaded;
    char tuning_db_warning[512];

    /* How measurements time this device (measure.c), decided at the first measurement, not at
     * open: a plain GEMM call should not pay for a probe kernel. Guarded by `lock`. */
    struct tsr_timing_state {
        int method;               /* a tsr_timing_method; 0: not decided yet */
        bool forced;              /* TSR_TIMING=device|host chose it, not the probe */
        char reason[512];         /* why host timing ("" for device timing) */
        double empty_launch_s;    /* median enqueue + clFinish of an empty kernel */
    } timing;
    /* Loop iterations a work-item may run before the device cuts its loops short (llvmpipe:
     * about 65535 in all, silently); 0: not probed yet, UINT64_MAX: no limit found. Guarded by
     * `lock`; see tsr_device_loop_limit. */
    uint64_t loop_limit;
    /* GEMM plans alive on the device, and whether tsr_device_close was called while some were:
     * the device is freed when the last of them is destroyed (tsr_device_hold / tsr_device_drop,
     * guarded by a lock of device.c). */
    size_t live_plans;
    bool closed;
};

/* A plan's hold on its device: tsr_device_close leaves a held device marked closed, and the last
 * tsr_device_drop frees it. tsr_device_closed: whether it was closed. */
void tsr_device_hold(tsr_device *device);
void tsr_device_drop(tsr_device *device);
bool tsr_device_closed(tsr_device *device);

/* ---- recorded launches (graph.c) ----
 * Every op sets kernel arguments with tsr_set_arg and launches with tsr_enqueue_kernel, drop-in
 * replacements of clSetKernelArg and clEnqueueNDRangeKernel that also record the launch while the
 * calling thread records a graph (tsr_graph_begin). tsr_set_arg tells buffer arguments (a
 * pointer to a cl_mem) from the others by type, so the graph retains the buffers. On the cached
 * kernel the thread holds (tsr_kernel_lock), a by-value argument equal to the one the object
 * holds is not set again (tsr_kernel's shadow), except while recording. */
cl_int tsr_kernel_arg(cl_kernel kernel, cl_uint index, size_t size, const void *value, bool is_buffer);
#define tsr_set_arg(kernel, index, size, value)                                                                        \
    tsr_kernel_arg((kernel), (index), (size), (value), _Generic((value), cl_mem *: true, const cl_mem *: true, default: false))
cl_int tsr_enqueue_kernel(cl_command_queue queue, cl_kernel kernel, cl_uint dims, const size_t *offset,
                          const size_t *global, const size_t *local, cl_uint nwaits, const cl_event *waits,
                          cl_event *event);
/* Whether the calling thread records a graph. */
bool tsr_graph_capturing(void);
/* The local size for a launch whose kernel works with any (no __local memory, no barriers):
 * NULL (the driver picks) except on CPU devices, where PoCL picks about one work-group per
 * compute unit and, for a grid of a few thousand work-items, one for the whole grid, run by one
 * thread (gemm's pack of B at 4608 x 392: 4 ms on one of two cores). There, `local` is filled
 * dimension by dimension, each with the largest divisor of its global size that still leaves
 * TSR_SPREAD_GROUPS work-groups per compute unit (1 where none does), the next dimension only
 * where the one before is whole, at most 1024 items (or the device's limit) in all; returns
 * `local`. Large groups where the grid allows: PoCL pays for each group it schedules. PoCL's
 * threads take a kernel's work-groups in chunks of half of what is left (guided), so several
 * groups per thread also even out groups of unequal cost. */
#define TSR_SPREAD_GROUPS 8
const size_t *tsr_spread_local(const tsr_device *dev, cl_uint dims, const size_t *global, size_t local[3]);

/* Every op calls this for each caller buffer it writes (its outputs), after validating them:
 * marked buffers' derived data goes stale (tsr_buffer_written), and a recording graph notes the
 * buffer so that each replay does the same. */
void tsr_op_output(cl_mem buffer);
/* For an op that reads host memory or waits on the host at call time: while the calling thread
 * records, fail the recording and return TSR_ERR_UNSUPPORTED naming `op` and `why`; else
 * TSR_SUCCESS. */
tsr_status tsr_graph_refuse(const char *op, const char *why);
/* While the calling thread records: the graph retains ref->root and checks, before each replay,
 * that the derived data the recorded launches read is still current (else the replay fails). */
struct tsr_derived_ref;
void tsr_graph_note_derived(const struct tsr_derived_ref *ref);

/* ---- data derived from constant buffers (derived.c; tsr_buffer_set_constant) ---- */

/* Enqueues on `queue` what derives data from a source into `out` (a new buffer of the requested
 * size); *done receives the event of its last command. Enqueues nothing unless it succeeds. */
typedef tsr_status (*tsr_derive_fn)(tsr_device *device, void *ctx, cl_mem out, cl_command_queue queue,
                                    cl_event *done);
/* Data `key` derived from `src` (from byte src_byte_offset on) on `device`, `bytes` long: when
 * src's root buffer is marked constant, *out receives it retained (made by `fill` on `queue` now,
 * under the registry's lock, when absent or stale) and *ready the retained event to wait for
 * before reading it (NULL: none); else *out = NULL and the caller does its per-call work. The
 * caller hands both back with tsr_derived_done once its commands reading *out are enqueued.
 * `key` names the derivation completely (form, types, sizes; under 96 characters). A call being
 * recorded into a graph must not ask (tsr_graph_capturing: the replay derives again). Takes
 * registry_lock inside device->lock when the caller holds that. */
tsr_status tsr_derived_get(tsr_device *device, cl_mem src, size_t src_byte_offset, const char *key, size_t bytes,
                           tsr_derive_fn fill, void *ctx, cl_command_queue queue, cl_mem *out, cl_event *ready);
/* Whether any buffer is marked constant (a cheap test before building a key). */
bool tsr_derived_any(void);
/* Whether src's root may be marked constant: false means certainly not (a lock-free test, no
 * string work: the hot paths ask it before building a key). */
bool tsr_derived_may_hold(cl_mem src);
/* For an op whose data derived from `src` could not be kept (too large, no device memory, no
 * program) and that runs on the source as stored: true the first time for src's marked root (per
 * marking), so the op warns once per buffer; false when not marked or already said. */
bool tsr_derived_first_miss(cl_mem src);
/* What a graph recording notes of data it reads that tsr_derived_peek handed out: the marked root
 * buffer (not retained here), the marking's serial, the generation the data was made at, the
 * source's byte offset in the root and the key. */
typedef struct tsr_derived_ref {
    cl_mem root;
    uint64_t serial, generation;
    size_t offset;
    char key[96];
} tsr_derived_ref;
/* The current data `key` derived from `src` (as tsr_derived_get) without making it: *out retained
 * (release it with tsr_derived_done(*out, NULL, last)) and *ref filled, once the command that
 * made it completed (waited for here); *out = NULL where none is current. For calls being recorded
 * into a graph: the derivation itself must never be recorded, the graph notes *ref
 * (tsr_graph_note_derived) and checks it at each replay (tsr_derived_current). */
tsr_status tsr_derived_peek(tsr_device *device, cl_mem src, size_t src_byte_offset, const char *key, cl_mem *out,
                            tsr_derived_ref *ref);
/* Whether the data `ref` names is still current (under the registry's lock): its root still marked
 * by the same tsr_buffer_set_constant and at the same generation (no tsr_buffer_changed, no op
 * writing it since). */
bool tsr_derived_current(const tsr_derived_ref *ref);
/* Release what tsr_derived_get handed out: `ready` now, `mem` once `last` (the caller's last
 * command reading it; NULL after a clFinish) completes. NULL mem or ready: nothing to release. */
void tsr_derived_done(cl_mem mem, cl_event ready, cl_event last);
/* Advance the generation of a marked buffer an op writes (its root, when a sub-buffer): ops call
 * it through tsr_op_output (graph.c). Cheap when nothing is marked. */
void tsr_buffer_written(cl_mem buffer);
/* Drop every derived buffer of a closing device. */
void tsr_derived_release_device(tsr_device *device);
/* A device's derived bytes at most. */
size_t tsr_derived_cap(const tsr_device *device);
/* For tests: entries (and their bytes) derived from `buffer` (its root, if marked) on every device. */
size_t tsr_derived_count_of(cl_mem buffer, size_t *bytes);
/* For tests: every device's cap set to `bytes` (0: the default again). */
void tsr_derived_test_cap(size_t bytes);
/* For tests: entries and bytes derived on `device` (NULL: all devices), and marked buffers. */
void tsr_derived_stats(const tsr_device *device, size_t *count, size_t *bytes, size_t *marked);

/* ---- workspaces (workspace.c) ---- */

/* A workspace buffer of at least `bytes` (a tsr_workspace_slot); grows it if needed. Call with
 * device->lock held. *wait receives the event the caller must wait for before writing
 * to it (NULL if none); the caller then stores its own reading event in last_use. */
tsr_status tsr_workspace_get(tsr_device *device, int slot, size_t bytes, cl_mem *buffer, cl_event *wait);
void tsr_workspace_set_last_use(tsr_device *device, int slot, cl_event event);
/* Adds `use` (a command that used a workspace buffer no longer any slot's) to
 * device->workspace_retired_use: the replays of graphs that recorded such a buffer wait for it,
 * and set it to their own last launch. Under device->lock. */
tsr_status tsr_workspace_retired_use(tsr_device *device, cl_event use);
void tsr_workspace_release(tsr_device *device);

/* ---- what a device is (device_info.c) ---- */

/* How a device fills its SIMD lanes, which decides the shape of a good kernel more than its type
 * does. PoCL's CPU device puts a work-item's vector code in the lanes (preferred float vector
 * width > 1): few heavy work-items with float16 tiles. GPUs and Mesa's llvmpipe run one work-item
 * per lane (width 1) and want many light work-items; llvmpipe also compiles a heavy one for
 * minutes. */
typedef enum tsr_lanes {
    TSR_LANES_ANY = 0,          /* in a tsr_default: any device */
    TSR_LANES_IN_ITEM = 1,      /* vectors inside a work-item */
    TSR_LANES_ACROSS_ITEMS = 2, /* one work-item per lane (preferred and native float width 1) */
    /* In a tsr_default only: vectors inside a work-item on a device preferring float vectors of 16
     * or more (AVX-512 CPUs under PoCL, whose 32 registers of 16 floats hold larger tiles). */
    TSR_LANES_IN_ITEM_WIDE = 3
} tsr_lanes;
tsr_lanes tsr_device_lanes(const tsr_device_info *info);
/* Why a device cannot be used (zero compute units, zero global memory, unavailable, no float
 * work-group...), or NULL when it can: discovery lists it with this reason, tsr_device_open
 * refuses it (TSR_ERR_UNSUPPORTED) and reports skip it. */
const char *tsr_device_unusable_reason(const tsr_device_info *info);

/* ---- where PoCL's CPU worker threads run (cpu_workers.c) ---- */

/* What decides whether tessera sets POCL_AFFINITY=1 (PoCL then pins worker i to CPU i). */
typedef struct tsr_cpu_pin_facts {
    const char *pocl_affinity;    /* getenv("POCL_AFFINITY"): the user's choice, never overridden */
    const char *pocl_max_threads; /* getenv("POCL_MAX_PTHREAD_COUNT") */
    const char *pocl_max_cu;      /* getenv("POCL_CPU_MAX_CU_COUNT") */
    size_t online_cpus;           /* sysconf(_SC_NPROCESSORS_ONLN) */
    bool allowed_known;           /* sched_getaffinity answered */
    size_t allowed_cpus;          /* CPUs in the process's mask */
    bool allowed_from_zero;       /* the mask holds CPUs 0..allowed_cpus-1 */
} tsr_cpu_pin_facts;
/* *pin: set POCL_AFFINITY=1 (only for a process allowed on every online CPU, numbered from 0,
 * with none of PoCL's own thread settings in the environment); returns why not (NULL: pin). */
const char *tsr_cpu_pin_decide(const tsr_cpu_pin_facts *facts, bool *pin);
/* Once per process, before tessera's first OpenCL call: setenv POCL_AFFINITY=1 when
 * tsr_cpu_pin_decide says so. */
void tsr_cpu_pin_workers(void);
/* tsr_device_info.worker_threads for a device ("" unless PoCL's CPU device). */
void tsr_cpu_workers_describe(const tsr_device_info *info, char *out, size_t size);

/* Fill `info` for one device (indices are set by the caller). */
tsr_status tsr_query_device_info(cl_platform_id platform, cl_device_id device, tsr_device_info *info);
/* tsr_device_info.host_cpu for a CPU device: the host processor's vendor, family and model ("" where
 * unknown). */
void tsr_host_cpu_signature(char *out, size_t size);
/* A platform's string (name, vendor, version), sanitized for JSON; "" when the query fails. */
void tsr_query_platform_str(cl_platform_id platform, cl_platform_info what, char *out);
/* Fill a cJSON object from a device info (used by the CLI and reports). */
struct cJSON;
struct cJSON *tsr_device_info_to_json(const tsr_device_info *info);

/* ---- programs and caches (program.c) ---- */

typedef struct tsr_embedded_source {
    const char *name;
    const char *text;
    size_t length;
} tsr_embedded_source;

extern const tsr_embedded_source tsr_embedded_sources[]; /* generated; ends with {NULL} */
/* A kernel source a layer above the runtime brings (the report's peak.cl, embedded in the
 * report's library): from then on found by name as an embedded one is (tsr_program_for,
 * tsr_get_kernel, the caches; $TSR_KERNEL_DIR/name.cl overrides it alike), though not listed by
 * tsr_kernel_source_names. `text` must live as long as the process. Adding the same text again
 * is a no-op; a name taken by other text is TSR_ERR_INVALID_ARG. */
tsr_status tsr_add_kernel_source(const char *name, const char *text, size_t length);

/* Initialise the device's cache settings from the environment. */
void tsr_cache_init(tsr_device *device);
void tsr_cache_release(tsr_device *device);

/* The program for a named source (embedded, or from $TSR_KERNEL_DIR), built
 * with options; the returned program is owned by the cache (do not release). */
tsr_status tsr_program_get(tsr_device *device, const char *source_name, const char *options,
                           cl_program *program);
/* tsr_program_get for a caller that creates the kernels `kernels` (';'-separated): a program
 * loaded from a binary that lacks one (a forged or stale entry: the right key and checksum around
 * another program's binary) is dropped, its cache file deleted, and the program rebuilt from
 * source; an ahead-of-time binary that lacks one is TSR_ERR_NO_BINARY naming the file. */
tsr_status tsr_program_for(tsr_device *device, const char *source_name, const char *options, const char *kernels,
                           cl_program *program);
/* The same for explicit source text; `label` names it in messages. */
tsr_status tsr_program_from_text(tsr_device *device, const char *label, const char *text,
                                 size_t length, const char *options, cl_program *program);
/* Write the binary of (source, options) into `dir` in the cache-entry format. */
tsr_status tsr_program_write_binary(tsr_device *device, const char *source_name,
                                    const char *options, const char *dir);

/* ---- kernel objects and launch records (program.c) ----
 * The fixed cost of a call, paid once per shape instead of on every call (docs/ARCHITECTURE.md,
 * "Small calls"). Kernel objects are created once per (program, kernel name) and kept with their
 * program entry until the device closes. clSetKernelArg is not thread-safe, so every cached kernel
 * has a lock that a caller holds from its first clSetKernelArg to its clEnqueueNDRangeKernel, and
 * for nothing else (a leaf lock: no other lock is taken inside it); OpenCL captures the arguments
 * at the enqueue, so the object is free again as soon as the enqueue returns. */
#define TSR_KERNEL_SHADOW_ARGS 32
#define TSR_KERNEL_SHADOW_BYTES 64
typedef struct tsr_kernel {
    cl_kernel kernel;
    pthread_mutex_t lock;
    char name[48];
    struct tsr_kernel *next;
    /* The value each by-value argument was last set to (size 0: unknown), read and written only
     * by the lock's holder: tsr_kernel_arg skips a clSetKernelArg that would set the value the
     * object holds already (a call on a shape seen before sets none of its scalars again).
     * Buffer arguments are always set: a driver may resolve a handle (a sub-buffer's parent and
     * offset) when it is set, and a released handle's address can come back as a new buffer. */
    uint8_t shadow_size[TSR_KERNEL_SHADOW_ARGS];
    unsigned char shadow[TSR_KERNEL_SHADOW_ARGS][TSR_KERNEL_SHADOW_BYTES];
    /* CL_KERNEL_WORK_GROUP_SIZE on the device, asked once under the lock (0: not yet) */
    size_t work_group_most;
} tsr_kernel;
/* The cached kernel whose lock the calling thread holds (NULL: none), for tsr_kernel_arg. */
extern _Thread_local tsr_kernel *tsr_held_kernel;
/* The cached kernel `name` of `program`, a program the device's cache holds (tsr_program_for):
 * created on its first request. Owned by the cache: never released by the caller. */
tsr_status tsr_program_kernel(tsr_device *device, cl_program program, const char *name, tsr_kernel **kernel);
static inline void tsr_kernel_lock(tsr_kernel *k) {
    pthread_mutex_lock(&k->lock);
    tsr_held_kernel = k;
}
static inline void tsr_kernel_unlock(tsr_kernel *k) {
    tsr_held_kernel = NULL;
    pthread_mutex_unlock(&k->lock);
}

/* Launch records: what an op resolved for a key it chooses (a shape, or a configuration and a
 * program variant) — its configuration, program and kernels, and optionally one device buffer
 * it keeps (`aux`, e.g. attention's key lengths when every batch entry has all keys) — so a call
 * that has seen its key skips the resolver, option formatting, program look-up and allocation.
 * Keys are plain words (zero what you do not use), compared whole, never formatted. */
#define TSR_LAUNCH_KEY_WORDS 32
#define TSR_LAUNCH_KERNELS 4
typedef struct tsr_launch_key {
    const void *tag; /* whose key: the op, or a function of it */
    uint32_t words[TSR_LAUNCH_KEY_WORDS];
} tsr_launch_key;
typedef struct tsr_launch {
    tsr_config config;
    cl_program program;
    tsr_kernel *kernels[TSR_LAUNCH_KERNELS];
    cl_mem aux;    /* NULL, or a buffer the record keeps (retained by it) */
    int flags;     /* the op's own */
} tsr_launch;
/* The record for `key` into *out (true), its aux retained for the caller (release it after the
 * enqueue that uses it); false when there is none, with *generation set for tsr_launch_store. */
bool tsr_launch_find(tsr_device *device, const tsr_launch_key *key, tsr_launch *out, uint64_t *generation);
/* Keep `record` under `key`, unless the records were invalidated since `generation` was read
 * (what was resolved may be stale then) or the table is full (records are a cache: a call without
 * one only pays the fixed cost again). Takes its own reference to record->aux. */
void tsr_launch_store(tsr_device *device, const tsr_launch_key *key, uint64_t generation, const tsr_launch *record);
/* Forget every record: called after anything a record could have been resolved from changes (an
 * override set or cleared, a re-tune's database, a program dropped from the cache). */
void tsr_launch_invalidate(tsr_device *device);
/* The cached kernels `names` (NULL-terminated, at most TSR_LAUNCH_KERNELS; an empty name skips its
 * slot) of source `source` built with options(cfg, variant): from a launch record keyed by `tag`,
 * the configuration's values, `variant` and `extra` (whatever else decides the kernels), so that
 * after the first call no option text is formatted and no program looked up (with $TSR_KERNEL_DIR
 * set the program is looked up every call, so an edited file reaches the next call). */
typedef void (*tsr_options_fn)(const tsr_config *cfg, int variant, char *out, size_t size);
tsr_status tsr_launch_kernels(tsr_device *device, const void *tag, const tsr_config *cfg, int variant, uint32_t extra,
                              const char *source, tsr_options_fn options, const char *const *names,
                              tsr_kernel *kernels[TSR_LAUNCH_KERNELS]);
/* tsr_embedding's program options for y's and the tables' storage types ("" for fp32 and fp32). */
void tsr_embedding_options_text(int y_type, int table_type, char *out, size_t size);
/* How many records the device holds (tests). */
size_t tsr_launch_count(tsr_device *device);

/* $dir/name.cl with its `#include "OTHER.cl"` line expanded from the same directory. */
tsr_status tsr_read_kernel_file(const char *dir, const char *name, char **data, size_t *size);
/* The source a program named `name` is built from: kernel_dir/name.cl (includes expanded; any
 * missing file is an error) when kernel_dir is set (a device's dev->kernel_dir, read at open),
 * else the embedded copy. *owned is what to free. */
tsr_status tsr_load_kernel_source(const char *kernel_dir, const char *name, char **owned, const char **text,
                                  size_t *length);
/* TSR_KERNEL_DIR as the environment holds it now ("" when unset), for callers without a device
 * (hashing sources for the tuning database outside a device, tests); devices keep the value they
 * read when they opened. */
const char *tsr_env_kernel_dir(void);

/* ---- files (fileio.c) ---- */

/* Read a whole file; *data is malloc'ed and NUL-terminated. Links are followed, but anything
 * that is not a regular file (FIFO, device, directory) is refused with TSR_ERR_IO without
 * blocking; a missing file is TSR_ERR_NOT_FOUND. */
tsr_status tsr_read_file(const char *path, char **data, size_t *size);
/* tsr_read_file that also returns the fstat of the file it read (NULL info: none), so callers
 * can check who owns what they just read without a race between check and read. */
struct stat;
tsr_status tsr_read_file_stat(const char *path, char **data, size_t *size, struct stat *info);
/* Read a whole file as one JSON value: truncation, damage or trailing text is TSR_ERR_CORRUPT,
 * "<what> <path> is unusable: not valid JSON (... near byte N)". */
tsr_status tsr_read_json(const char *path, const char *what, struct cJSON **root);
/* Length (1 to 4) of the character at p when it is well-formed UTF-8 and not a control
 * character (< 0x20, 0x7F); 0 otherwise (also at the terminating NUL). */
size_t tsr_text_char_length(const unsigned char *p);
/* In place: control characters become spaces and bytes that are not UTF-8 become '?', so text
 * from a driver can go into JSON that tessera's own validation accepts. */
void tsr_text_sanitize(char *s);
/* Open a log for appending (created 0644 if missing): only a regular file is accepted, and a
 * FIFO or device is refused (TSR_ERR_IO) without blocking on it. */
tsr_status tsr_open_append(const char *path, FILE **out);
/* Write a file atomically: a temporary file in the same directory, fsync, rename. */
tsr_status tsr_write_file_atomic(const char *path, const void *data, size_t size);
/* mkdir -p (new directories 0755) */
tsr_status tsr_make_dirs(const char *path);
/* mkdir -p creating missing directories with `mode` (e.g. 0700 for private caches). */
tsr_status tsr_make_dirs_mode(const char *path, unsigned mode);
/* Remove tsr_write_file_atomic's temporaries ("<file>.tmp.<pid>.<n>"; any file's when `file` is
 * NULL) in `dir` that are regular files owned by the effective user and at least
 * `min_age_seconds` old (left by a killed writer). Returns how many were removed. */
size_t tsr_remove_stale_temporaries(const char *dir, const char *file, double min_age_seconds);

/* ---- ops: the descriptor (each ops/<op>.c), the table (registry.c) ---- */

/* A built-in configuration: the first row matching the device's type, its lanes and the problem
 * class is the op's default there. */
typedef struct tsr_default {
    int device_type;           /* a tsr_device_type; 0: any device */
    int lanes;                 /* a tsr_lanes (declared below); 0, TSR_LANES_ANY: any device */
    const char *problem_class; /* NULL: any class; TSR_TWINS_16("large"): large's 16-bit twins */
    const char *config;        /* "MWI=6 VW=16 ...", parsed over the declared defaults */
} tsr_default;
/* A default row's class that names a class's 16-bit twins ("large-f16", "large-bf16", ... from the
 * storage-type table), so no op spells a 16-bit class. Such a row also keeps those classes off
 * their fp32 twin's tuned entries (config.c's class chain): for an op whose best shape changes
 * when its bytes halve (GELU's erf form turns compute-bound). */
#define TSR_TWINS_16_MARK "/16-bit"
#define TSR_TWINS_16(cls) cls TSR_TWINS_16_MARK

/* One way of computing an op (oneDNN's implementation list), apart from the tile parameters
 * that shape it. */
typedef struct tsr_implementation {
    const char *name;   /* "im2col" */
    int value;          /* the value of the op's implementation_param that selects it */
    /* The parameters it reads, "MWI VW ..."; NULL: all of them. The others take their declared
     * default (tsr_op_normalize), so searches do not measure the same behaviour twice. */
    const char *params;
    /* Optional: can it run this problem on this device? NULL: every problem. */
    bool (*accepts)(const tsr_device *device, const void *problem);
    /* Optional: enqueue a validated problem of the op with a configuration that selects this
     * implementation (tsr_op_launch); NULL where the op launches every implementation through
     * one path of its own (GEMM's two kernels share the packing). */
    tsr_status (*launch)(tsr_device *device, const void *problem, const tsr_config *config, cl_command_queue queue,
                         cl_event *event);
} tsr_implementation;

/* One case of the report's standard suite, declared by its op. */
typedef struct tsr_report_shape {
    const char *id;              /* "gemm-square" */
    const char *shape;           /* the fixture's shape text, also the report rows' "shape" */
    const char *simulator_shape; /* smaller, for simulated devices */
} tsr_report_shape;

/* How an op's classes cover the storage types (see tsr_op_class_list). */
typedef enum tsr_class_storage {
    TSR_CLASSES_AS_LISTED = 0, /* the classes as listed, whatever the storage */
    /* Each listed (fp32) class also once per 16-bit storage type, named "<class>-<type>" and tuned
     * on "<shape> <type>" (inputs and output in that type)... */
    TSR_CLASSES_PER_TYPE = 1,
    /* ... or on "<shape> <type>/f32" (inputs in that type, an fp32 output). */
    TSR_CLASSES_PER_INPUT_TYPE = 2
} tsr_class_storage;

/* The fixture: one problem of the op with fresh inputs, device buffers and a double-precision
 * reference, shared by the tuner, the demo and the report. */
typedef struct tsr_fixture_hooks {
    /* A problem given by its shape text (the op's grammar, e.g. "1024x1024x1024"), inputs drawn
     * from `seed`, the output poisoned with NaN so a run must write all of it. */
    tsr_status (*setup)(tsr_device *device, const char *shape, uint64_t seed, void **fixture);
    /* Enqueue one run on `queue`: with `config` (the tuner) or, NULL, the configuration a caller of
     * the public API gets. first/last: NULL, or retained events that bracket the device work (the
     * caller releases them; they may be the same event). */
    tsr_status (*run)(tsr_device *device, void *fixture, const tsr_config *config, cl_command_queue queue,
                      cl_event *first, cl_event *last);
    /* Relative error of the last run's output against the reference (the op's metric); the output
     * is poisoned again afterwards, so the next run cannot pass on this one's values. */
    tsr_status (*check)(tsr_device *device, void *fixture, double *rel_err);
    /* Work of one run: FLOPs and the bytes that must move (the roofline's intensity). */
    void (*work)(const void *fixture, double *flops, double *bytes);
    /* The tuner's description of the problem ("1024x1024x1024"). */
    void (*describe)(const void *fixture, char *out, size_t size);
    /* Optional: the report's implementation label ("tessera(im2col)"); NULL: "tessera". */
    void (*impl)(tsr_device *device, const void *fixture, char *out, size_t size);
    /* The device buffers in the order of the op's public call (a, b, c; x, w, bias, y ...; a NULL
     * where the problem has none), so a peer library can run the same problem. Returns the count. */
    int (*buffers)(const void *fixture, cl_mem *buffers, int max);
    void (*free)(void *fixture);
    /* Optional: the largest rel_err for this fixture's problem when it is not the op's `tolerance`
     * (16-bit outputs: max(tolerance, tsr_dtype_error_bound(out, reduction))); NULL: tolerance. */
    double (*tolerance)(const void *fixture);
    /* Optional: the class of the fixture's problem (the op's problem_class of it), so a problem
     * made smaller for a slow device, or a class's second problem, is checked to stay in its class
     * (tsr_op_tuning_setup_step, tsr_op_tuning_setup_check). */
    const char *(*problem_class)(const void *fixture);
} tsr_fixture_hooks;

/* The demo (tsr_run_demo): the fixture at one shape, or two side by side, timed as a caller of
 * the public API gets it and checked. Its line: "<title>[ (<implementation>)]: <ms> ms, <rate>
 * GFLOP/s, relative error <e>", or for ops rated in GB/s "<title>: [<label> ]<ms> ms (<rate> GB/s,
 * <metric> <e>)" per shape. */
typedef struct tsr_demo {
    const char *title;     /* "sgemm 256x256x256" */
    const char *shapes[2]; /* the fixture's shape texts; the second optional */
    const char *labels[2]; /* with two shapes, what tells them apart ("tanh", "erf") */
    int runs;              /* the best time of this many runs */
    const char *metric;    /* optional: the check's name in the line; NULL: "relative error" */
} tsr_demo;

/* An op's descriptor. Every field is required unless it says "optional"; generic code reaches
 * the hooks through the tsr_op_* functions below, and test_ops checks the table's ops. */
typedef struct tsr_op {
    const char *name;          /* "gemm" */
    const char *source_name;   /* embedded cl/ file without .cl */
    /* Optional: the other sources its programs are built from (NULL-terminated), so that a change
     * to any of them marks the op's tuned entries stale too (tsr_op_source_hash). */
    const char *const *more_sources;
    const tsr_param_def *params; /* declared with TSR_PARAM_DEF (order of formats, manifests, -D flags) */
    int nparams;               /* at most TSR_MAX_PARAMS */
    /* Problem classes (tuning buckets, e.g. "large", "small-n", "batched") with fp32 storage,
     * NULL-terminated; the first is the generic one. The op's full list (tsr_op_class_list) adds
     * their storage-type twins as class_storage says; no op spells a 16-bit class itself. */
    const char *const *classes;
    /* The shape each listed class is tuned on (the fixture's grammar), in the order of `classes`;
     * NULL for an op without a fixture. */
    const char *const *class_shapes;
    /* Optional: per listed class (in the order of `classes`), smaller problems of the same class
     * for slow devices, largest first, separated by ';' (NULL, or "" for a class: none). The tuner
     * takes one where a run of the class's own problem would eat its budget (llvmpipe ran GEMM's
     * 2048^3 at 0.6 GFLOP/s: 30 s a run). Their 16-bit twins append the storage token as
     * class_shapes' do; fixture.problem_class checks each stays in its class. */
    const char *const *class_shapes_reduced;
    /* Optional: per listed class, a second problem of the same class (another plane, another batch;
     * NULL or "": none), on which the tuner checks a pick that is not what the device ran before
     * side by side with that one before saving it: a class serves many layers and is searched on
     * one (session 35's Zen 4 1x1 pick won its batch-1 fixture by 7-11% and lost the class's 56x56
     * layers by 7-30%). 16-bit twins append the storage token; fixture.problem_class checks the
     * class. Like class_shapes_reduced, one entry per listed class when set. */
    const char *const *class_shapes_check;
    tsr_class_storage class_storage;
    /* The class of a validated problem: tsr_op_class of its base class's index and its storage. */
    const char *(*problem_class)(const void *problem);
    /* Optional: the class to use when `problem_class` has no tuned entry (NULL hook, or NULL
     * returned: go to the defaults). Called with listed classes only: a 16-bit class's chain is
     * its own entry, then its listed class's (config.c). */
    const char *(*nearest_class)(const char *problem_class);
    /* Optional: built-in configurations by device type and class (used when nothing is tuned);
     * NULL, or no row matching: the declared defaults. Static data: each row is parsed once and
     * kept by address (with its op). */
    const tsr_default *defaults;
    int ndefaults;
    /* Its implementations, at least one. With more than one, implementation_param names the
     * parameter whose value selects one (the tuning database stores the choice under it). */
    const tsr_implementation *implementations;
    int nimplementations;
    const char *implementation_param; /* optional: NULL with a single implementation */
    /* Optional: rules within an implementation that tsr_op_normalize applies after resetting the
     * parameters the implementation does not read (e.g. KWG means nothing without staging).
     * NULL: none. */
    void (*normalize)(tsr_config *config);
    /* Is this configuration legal on this device? (NULL problem: for any problem) */
    bool (*config_ok)(const tsr_device *device, const void *problem, const tsr_config *config);
    /* Programs a launch may need beyond the configuration: their count (at least 1; what tells
     * them apart, e.g. GEMM's transposes times storage sets, is the op's build_options). */
    int program_variants;
    /* Optional: can a launch of this problem class ask for this program variant? `tessera
     * build-binaries` writes only those (GELU's variants are forms times storage types, and a class
     * launches few of them). NULL: every variant serves every class. */
    bool (*variant_serves_class)(const char *problem_class, int program_variant);
    /* -D options for a configuration and program variant (0 <= program_variant <
     * program_variants): tsr_config_defines plus what the variant adds; every program a launch
     * with this configuration can build is one of these. */
    void (*build_options)(const tsr_config *config, int program_variant, char *options, size_t size);
    /* Optional: the source a configuration's programs are built from, when it is not always
     * source_name (conv2d's CPU forms live in conv_cpu.cl); NULL hook: source_name. */
    const char *(*program_source)(const tsr_config *config);
    /* Optional: the part of the space worth searching on this device ("NAME=v1,v2 ..") for a class
     * of the op's class list (NULL: for all of them; the tuner searches each class in its own);
     * NULL hook or NULL returned: all of it. */
    const char *(*tuning_space)(const tsr_device *device, const char *problem_class);
    /* Optional: unit of the tuner's rates; NULL means "GFLOP/s", memory-bound ops say "GB/s". */
    const char *rate_unit;
    /* The fixture (optional as a whole: an op without one cannot be tuned and has no report
     * cases or demo), the demo it runs and the report's cases of this op (ended by an entry with a
     * NULL id). */
    tsr_fixture_hooks fixture;
    tsr_demo demo;
    const tsr_report_shape *report_shapes;
    /* Largest rel_err a correct result has (the demo's, the tuner's and the report's check). */
    double tolerance;
} tsr_op;

extern const tsr_op *const tsr_ops[]; /* NULL-terminated (registry.c) */
extern const tsr_op tsr_op_gemm;
extern const tsr_op tsr_op_gelu;
extern const tsr_op tsr_op_attention;
extern const tsr_op tsr_op_conv;
extern const tsr_op tsr_op_layernorm;
/* LayerNorm in double on the host: rows x cols contiguous x (and r, NULL: none), gamma and beta
 * of cols values, into y (rows x cols). */
/* tsr_layernorm after `input_ready` (may be NULL): its launch waits for that event (the GEMM's
 * epilogue LayerNorm, launched after the GEMM on any queue); no diagnostics cleared. */
tsr_status tsr_layernorm_pipeline(tsr_device *device, const tsr_layernorm_desc *desc, cl_mem x, cl_mem residual,
                                  cl_mem gamma, cl_mem beta, cl_mem y, cl_command_queue queue, cl_event input_ready,
                                  cl_event *event);
void tsr_layernorm_reference(size_t rows, size_t cols, double eps, const float *x, const float *r, const float *gamma,
                             const float *beta, double *y);
/* LayerNorm's shape text "ROWSxCOLS [+res] [DTYPE]" (the fixture's, the tuner's and the bench's). */
tsr_status tsr_layernorm_shape_parse(const char *shape, size_t *rows, size_t *cols, bool *residual, tsr_dtype *in_type,
                                     tsr_dtype *out_type);
extern const tsr_op tsr_op_pool2d;
/* pool2d's shape text "NxCxHxW max|avg kK[xK] [sS[xS]] [pP[xP]] [dD[xD]] [ceil] [exclude] [nhwc] [DTYPE]"
 * (the fixture's, the tuner's and the bench's) into a descriptor (zero offsets; exclude_pad
 * set by "exclude"), checked as tsr_pool2d_output_size checks it; and back (defaults left out). */
tsr_status tsr_pool2d_shape_parse(const char *shape, tsr_pool2d_desc *desc);
void tsr_pool2d_shape_format(const tsr_pool2d_desc *desc, char *out, size_t size);
/* conv2d in double on the host (y: batch * out_channels * out_h * out_w values, x, y and a residual
 * in the descriptor's layout), with the
 * descriptor's bias and activation; and the op's FLOP count (2 N K P Q Cg R S). */
void tsr_conv2d_reference(const tsr_conv2d_desc *desc, const float *x, const float *w, const float *bias, double *y);
/* The same with the whole fused epilogue (each of scale, bias and residual may be NULL: none;
 * residual has y's shape): y = act(scale[k] sum + bias[k] + residual). */
void tsr_conv2d_reference_fused(const tsr_conv2d_desc *desc, const float *x, const float *w, const float *scale,
                                const float *bias, const float *residual, double *y);
double tsr_conv2d_flops(const tsr_conv2d_desc *desc);
/* Storage types of a GEMM's A, B and C (the bias stays fp32). */
typedef struct tsr_gemm_types {
    tsr_dtype a, b, c;
} tsr_gemm_types;
/* The GEMM descriptor's rules that need no buffer (ops/gemm.c), the one copy shared by tsr_matmul,
 * its plans, the CLBlast shims, conv's and attention's GEMMs and the device groups, in this order:
 * desc not NULL, the operands' types (each named), layout, transposes, m, n, batch >= 1, sizes and
 * leading dimensions <= INT_MAX, ld >= a stored row, extents that do not overflow, C's matrices
 * apart. *out (may be NULL) receives the descriptor with its defaults made explicit (layout,
 * transposes and batch 0, ld 0 packed); `literal` (the CLBlast shims) takes every value as given,
 * so those zeros are refused. need[]: the elements A, B and C span from their buffers' starts
 * (offset included). The error names the field, without a function prefix. */
tsr_status tsr_matmul_check(const tsr_matmul_desc *desc, bool literal, tsr_matmul_desc *out, size_t need[3]);
/* What an op's pipeline adds to a GEMM descriptor. */
typedef struct tsr_matmul_extras {
    bool literal;         /* tsr_matmul_check's: the CLBlast shims */
    bool class_by_shape;  /* pick the configuration by one matrix's shape rather than the "batched"
                           * class (a batch of large per-image GEMMs is not a batch of small ones) */
    cl_event input_ready; /* wait for it before reading (NULL: none) */
    size_t image_columns; /* conv2d's 1x1 layers: each batch entry is one image of this many columns
                           * (n, B's and C's leading dimension), A shared; the batch may then run as
                           * one GEMM across the images' columns (0: an ordinary batch) */
} tsr_matmul_extras;
/* tsr_matmul for another op's pipeline (conv's im2col path, unfused attention): keeps the caller's
 * diagnostics; extras NULL: none. */
tsr_status tsr_matmul_pipeline(tsr_device *device, const tsr_matmul_desc *desc, const tsr_matmul_extras *extras,
                               cl_mem a, cl_mem b, cl_mem c, cl_command_queue queue, cl_event *event);
/* The class and configuration of an fp32 GEMM of these sizes (the device groups' rate keys). */
tsr_status tsr_gemm_config_info(tsr_device *device, size_t m, size_t n, size_t k, size_t batch, tsr_config_info *info);
/* The unfused attention baseline's masked row softmax over S (one batch entry b, all heads;
 * S already scaled), for the benchmark's CLBlast-based pipeline too. */
tsr_status tsr_attention_softmax(tsr_device *device, const tsr_attention_desc *desc, size_t b, cl_mem scores,
                                 cl_command_queue queue, cl_event wait, cl_event *done);
/* A copy kernel with the fused GELU's geometry and configuration: the bandwidth yardstick (with
 * x_type != y_type it converts, as tsr_convert; offsets count elements of each one's type). */
tsr_status tsr_gelu_copy(tsr_device *device, tsr_dtype x_type, cl_mem x, size_t x_offset, tsr_dtype y_type, cl_mem y,
                         size_t y_offset, size_t n, cl_command_queue queue, cl_event *event);
/* GELU's fixture grammar, "N [erf] [DTYPE]" ("16777216", "65536 erf bf16/f32"; DTYPE as
 * tsr_dtype_spec_parse: the types of x and y), for the fixture and the report's copy peer. */
tsr_status tsr_gelu_shape_parse(const char *shape, size_t *n, int *mode, tsr_dtype *x_type, tsr_dtype *y_type);
/* GELU in double (mode: TSR_GELU_TANH or TSR_GELU_ERF), with the kernel's limits at +-Inf. */
double tsr_gelu_reference(int mode, double x);
/* The op of the table with this name, NULL if none (registry.c). */
const tsr_op *tsr_find_op(const char *name);

/* ---- configuration text and hook wrappers (op.c) ---- */

/* Parse "NAME=VALUE ..." over a base configuration; `what` labels messages. */
tsr_status tsr_config_parse(const tsr_op *op, const char *text, const char *what, tsr_config *config);
/* "MWI=6 VW=16 ..." for messages and manifests. */
void tsr_config_format(const tsr_op *op, const tsr_config *config, char *out, size_t size);
/* "-DMWI=6 -DVW=16 ..." for every DEFINE parameter, in declared order: the part of an op's
 * build_options that comes from the configuration. Returns false when `size` cut it short. */
bool tsr_config_defines(const tsr_op *op, const tsr_config *config, char *out, size_t size);
/* The declared defaults (every other value zero). */
void tsr_config_declared(const tsr_op *op, tsr_config *config);
/* Index of the parameter called `name`, or -1. */
int tsr_param_index(const tsr_op *op, const char *name);
/* tsr_param_index, or TSR_ERR_INVALID_ARG "<what>: op <op> has no parameter '<name>'". */
tsr_status tsr_param_lookup(const tsr_op *op, const char *name, const char *what, int *param);
/* Decimal `text` as a value of parameter `param`: one of its declared values, or TSR_ERR_INVALID_ARG
 * "<what>: NAME=<text> is not in the parameter space". The one value reader of overrides, built-in
 * defaults and tuner spaces. */
tsr_status tsr_param_value(const tsr_op *op, int param, const char *text, const char *what, int *value);
/* The op's problem classes, NULL-terminated (tsr_op_classes): its listed classes, then per 16-bit
 * storage type (class_storage TSR_CLASSES_PER_TYPE or _PER_INPUT_TYPE) the same with the type's
 * class suffix ("large-f16"), in the order of the types; built once, never freed. */
const char *const *tsr_op_class_list(const tsr_op *op);
/* Index of a class in that list, or -1. */
int tsr_op_class_index(const tsr_op *op, const char *problem_class);
/* The class of a problem whose listed class is `listed` (an index into op->classes) and whose
 * tensors have these storage types (the class of their tsr_dtype_class_group). */
const char *tsr_op_class(const tsr_op *op, int listed, const tsr_dtype *types, size_t n);
/* The shape a class of the list is tuned on: its listed class's shape, with the storage token
 * of a 16-bit class (" f16", or " f16/f32" for TSR_CLASSES_PER_INPUT_TYPE); NULL when the op has
 * no class shapes or no such class. */
const char *tsr_op_class_shape(const tsr_op *op, const char *problem_class);
/* How many smaller problems the class has for slow devices (op->class_shapes_reduced), and the
 * step-th of them (1: the largest of them; 0: the class's own shape, as tsr_op_class_shape), with
 * the class's storage token; NULL past the last. */
int tsr_op_class_shape_steps(const tsr_op *op, const char *problem_class);
const char *tsr_op_class_shape_step(const tsr_op *op, const char *problem_class, int step);
/* The class's second problem (op->class_shapes_check) with its storage token; NULL when none. */
const char *tsr_op_class_check_shape(const tsr_op *op, const char *problem_class);
/* The op's nearest_class for any class of its list: a 16-bit class's is its listed class's nearest
 * in the same storage ("batched-f16" -> "small-f16"); NULL when there is none. */
const char *tsr_op_nearest_class(const tsr_op *op, const char *problem_class);
/* Enqueue a validated problem with the implementation the configuration selects (its launch
 * hook); TSR_ERR_INVALID_ARG when it selects none or one without a launch hook. */
tsr_status tsr_op_launch(const tsr_op *op, tsr_device *device, const void *problem, const tsr_config *config,
                         cl_command_queue queue, cl_event *event);
/* The op's built-in configuration for this device and class: the first matching row of its
 * defaults over the declared defaults. Generic code calls this, never reads the rows. */
void tsr_op_default_config(const tsr_op *op, const tsr_device *device, const char *problem_class, tsr_config *config);
/* Whether the op's default row for this device and class (the first that matches) names this
 * 16-bit class's twins (TSR_TWINS_16): such a class is not served by its fp32 twin's tuned entries. */
bool tsr_op_has_own_default(const tsr_op *op, const tsr_device *device, const char *problem_class);
/* The implementation a configuration selects (the only one when the op has one); NULL when the
 * implementation parameter holds a value no implementation claims. */
const tsr_implementation *tsr_op_implementation(const tsr_op *op, const tsr_config *config);
/* Does the implementation read this parameter? (its params list; NULL list: every parameter) */
bool tsr_implementation_uses(const tsr_implementation *impl, const char *param);
/* Does the implementation take this problem on this device? (its accepts hook; true without) */
bool tsr_implementation_accepts(const tsr_implementation *impl, const tsr_device *device, const void *problem);
/* The built-in configuration of one implementation for this device and class: the first row of
 * the defaults that matches and selects it, else the declared defaults with it selected;
 * normalized. */
void tsr_op_implementation_default(const tsr_op *op, const tsr_implementation *impl, const tsr_device *device,
                                   const char *problem_class, tsr_config *config);
/* Set the parameters that mean nothing under the others to their declared default: those the
 * selected implementation does not read, then the op's normalize hook (rules within an
 * implementation). Generic code calls this, never the hook. */
void tsr_op_normalize(const tsr_op *op, tsr_config *config);
/* Is the configuration what tsr_op_normalize makes of it? (ops' config_ok refuse the others, so
 * searches and the database see one configuration per behaviour) */
bool tsr_op_is_normal(const tsr_op *op, const tsr_config *config);
/* The configurations every tuning search of a class measures first: one per implementation
 * (tsr_op_implementation_default) when the op has several, none otherwise, so the choice
 * between implementations never depends on a search walking there. An implementation without a
 * row for the class takes its first legal row for another class on this device before the
 * declared defaults (the plainest kernel, far too slow on a large class's problem). Returns how
 * many of at most `max` it wrote. */
int tsr_op_seeds(const tsr_op *op, const tsr_device *device, const char *problem_class, tsr_config *seeds, int max);
/* After a launch with `config` ended in `status`: when that is TSR_ERR_BUILD (the driver could not
 * compile this kernel variant, e.g. a compiler bug) and a different configuration that is legal
 * here exists (the declared defaults, else the op's built-in rows from the most generic one),
 * records the build error as a warning ("falling back to ..."), sets *config to it and returns
 * true: the caller launches once more. False otherwise (the error stands). */
bool tsr_op_build_fallback(tsr_device *device, const tsr_op *op, const void *problem, tsr_status status,
                           tsr_config *config);

/* ---- host references (reference.c): one copy of each, for fixtures, tests and benchmarks ---- */

/* The seeded generator of every input tessera makes (a 64-bit LCG): next state, a float in [lo, hi). */
uint64_t tsr_random_next(uint64_t *state);
float tsr_random_float(uint64_t *state, float lo, float hi);
void tsr_random_fill(float *x, size_t n, uint64_t *state, float lo, float hi);
/* A seed that differs per call and per run (tuning draws fresh inputs every time). */
uint64_t tsr_random_fresh_seed(void);
/* The relative error sqrt(sum (got - ref)^2 / sum ref^2), accumulated element by element; a NaN
 * anywhere (an unwritten, poisoned element) makes it infinite. */
typedef struct tsr_error_sum {
    double num, den;
} tsr_error_sum;
void tsr_error_add(tsr_error_sum *sum, double got, double ref);
double tsr_error_value(const tsr_error_sum *sum);
double tsr_rel_error(const float *got, const double *ref, size_t n);
/* C = A B in double for `batch` contiguous row-major matrices (A m x k, B k x n, C m x n). */
void tsr_gemm_reference(size_t batch, size_t m, size_t n, size_t k, const float *a, const float *b, double *c);
/* The O(n^2) check of large GEMMs: A (B t) for `nprobes` probe vectors t (n values each), into
 * out[(batch entry * nprobes + probe) * m + row]; and the relative error of C t against it. */
tsr_status tsr_gemm_probe_reference(size_t batch, size_t m, size_t n, size_t k, const float *a, const float *b,
                                    const double *probes, int nprobes, double *out);
double tsr_gemm_probe_error(size_t batch, size_t m, size_t n, const float *c, const double *probes, int nprobes,
                            const double *reference);
/* GELU's metric: max |y - ref| / max(1, |x|) (a NaN where the reference is not NaN: infinite). */
double tsr_gelu_max_error(int mode, const float *x, const float *y, size_t n);
/* The same metric for a y stored in y_type, beyond that storage's rounding and the 16-bit forms'
 * error: max over elements of max(0, (|y - ref| - u |ref|) / max(1, |x|) - (1 + u) TSR_GELU16_ERROR),
 * u the unit roundoff of y_type (both terms 0 for f32, where it is tsr_gelu_max_error). A correct
 * result stays within the fp32 kernel's 1e-6 whatever the type; a store that truncates (2^-10
 * relative in f16), or rounds through another type, exceeds it. */
double tsr_gelu_max_error_stored(int mode, tsr_dtype y_type, const float *x, const float *y, size_t n);
/* pool2d in double on the host (reference.c), written from PyTorch's definition independently of
 * ops/pool.c: desc with its defaults explicit (stride, dilation), offsets ignored; x and y
 * contiguous in desc->layout, y batch x channels x out_h x out_w values (the output size computed
 * here too). Max propagates NaN; a window without an input element gives -Inf. */
void tsr_pool2d_reference(const tsr_pool2d_desc *desc, const float *x, double *y);
/* One query row of softmax(q K^T scale) V in double: k and v are the head's kv_len x head_dim
 * rows; scores holds kv_len values of scratch; out receives head_dim values. */
void tsr_attention_reference_row(const float *q_row, const float *k, const float *v, size_t kv_len, size_t head_dim,
                                 double scale, double *scores, double *out);

/* ---- fixtures (fixture.c): the generic parts of the op fixtures ---- */

/* What the tuner calls: the op's fixture at the class's shape (tsr_op_class_shape) with fresh
 * inputs, run on the device's queue. An op without a fixture cannot be tuned: tsr_op_tuning_setup
 * says so (TSR_ERR_UNSUPPORTED). */
tsr_status tsr_op_tuning_setup(const tsr_op *op, tsr_device *device, const char *problem_class, void **ctx);
/* The same at the class's step-th problem (tsr_op_class_shape_step; 0: its own). A smaller problem
 * whose class (fixture.problem_class) is not `problem_class` fails (TSR_ERR_UNSUPPORTED, naming both):
 * tuning it would tune another class. */
tsr_status tsr_op_tuning_setup_step(const tsr_op *op, tsr_device *device, const char *problem_class, int step,
                                    void **ctx);
/* The same at the class's second problem (tsr_op_class_check_shape): TSR_ERR_NOT_FOUND when the class
 * has none, TSR_ERR_UNSUPPORTED when it is of another class. */
tsr_status tsr_op_tuning_setup_check(const tsr_op *op, tsr_device *device, const char *problem_class, void **ctx);
tsr_status tsr_op_tuning_run(const tsr_op *op, tsr_device *device, void *ctx, const tsr_config *config,
                             cl_event *first, cl_event *last);
/* The tuner's limit on a candidate's relative error: `tolerance`, or the fixture's own bound when
 * larger (a 16-bit output's rounding alone exceeds the fp32 limit). */
double tsr_op_tuning_tolerance(const tsr_op *op, const void *ctx, double tolerance);
tsr_status tsr_op_tuning_check(const tsr_op *op, tsr_device *device, void *ctx, double *rel_err);
double tsr_op_tuning_work(const tsr_op *op, const void *ctx);
void tsr_op_tuning_describe(const tsr_op *op, const void *ctx, char *out, size_t size);
void tsr_op_tuning_free(const tsr_op *op, void *ctx);
/* A fixture.run of one kernel: `done` (may be NULL) is both the first and the last event. */
void tsr_fixture_single_event(cl_event done, cl_event *first, cl_event *last);
/* The demo's measurement: `runs` runs as a caller of the public API gets them, the best time per
 * run by the device's timing method (tsr_timer_run: first to last event, or the host clock over a
 * batch of runs where timestamps are unusable, then with a warning saying so) in *best_ms, then
 * the check. */
tsr_status tsr_fixture_measure(tsr_device *device, const tsr_op *op, void *fixture, int runs, double *best_ms,
                               double *rel_err);
/* The op's demo (tsr_run_demo): its demo shapes on the fixture, measured and checked; the line as
 * tsr_demo says. TSR_ERR_OPENCL (the line ends "(WRONG)") when the error exceeds the tolerance. */
tsr_status tsr_op_demo(tsr_device *device, const tsr_op *op, char *summary, size_t size);
/* Fill `host` (count floats) with NaN and upload it to `mem`: an output a run must overwrite. */
tsr_status tsr_fixture_poison(tsr_device *device, cl_mem mem, float *host, size_t count);

/* ---- the resolver: which configuration a launch uses (config.c) ---- */

/* The configuration an op launches with on this device for a problem: the op's override
 * ("MWI=6 VW=16 ...": $TSR_CONFIG_<OP> as read at open, or tsr_config_override; for experiments
 * and tests), else the tuning database through its fallback chain, else the built-in default;
 * always legal for the device. */
tsr_status tsr_op_config(tsr_device *device, const tsr_op *op, const void *problem, tsr_config *config);
/* Whether the op has an override on this device ($TSR_CONFIG_<OP> or tsr_config_override): a
 * launch's own shape rules then leave the overriding configuration as it is. */
bool tsr_op_overridden(tsr_device *device, const tsr_op *op);
/* tsr_op_config remembered per shape: `shape` (nwords <= TSR_LAUNCH_KEY_WORDS) holds every field of
 * the problem its class and legality depend on; the record is forgotten whenever an override or a
 * re-tune could change the answer (tsr_launch_invalidate), so a call that has seen its shape skips
 * the resolver's class name and look-ups. */
tsr_status tsr_op_config_shape(tsr_device *device, const tsr_op *op, const void *problem, const uint32_t *shape,
                               size_t nwords, tsr_config *config);
/* tsr_config_lookup for an op descriptor (the class is not checked; no diagnostics cleared). */
tsr_status tsr_op_config_lookup(tsr_device *device, const tsr_op *op, const char *problem_class,
                                tsr_config_info *info);
/* Set (text) or clear (NULL or "") the op's override, checking the text first: tsr_config_override
 * for an op descriptor. */
tsr_status tsr_config_set_override(tsr_device *device, const tsr_op *op, const char *text);
/* Resolve the configuration of (op, class) for this device (no override), with where it
 * came from. Caches per device. */
tsr_status tsr_resolve_config(tsr_device *device, const tsr_op *op, const char *problem_class, tsr_config *config,
                              tsr_config_info *info);
/* Entries the user's database and the built-in one hold for this very device (any driver). */
size_t tsr_tuning_entries_for_device(tsr_device *device);
/* A configuration a re-tune starts from: a tuning entry's for this device and class. */
typedef struct tsr_tuning_seed {
    tsr_config config;
    bool stale; /* from an entry tuned for another kernel source */
} tsr_tuning_seed;
/* What a re-tune of (op, class) starts from: the configurations of the entries for this device
 * (the tiers of tsr_db_find) in `user_db` (may be NULL) and the built-in database, for the class
 * and the classes a lookup falls back to (nearest, fp32 of a 16-bit class), current ones first,
 * then stale ones. An entry whose configuration no longer fits this build (a parameter
 * renamed, dropped or added, a value outside the space) or this device is skipped; each
 * configuration comes once. Returns how many were written (at most max). */
int tsr_tuning_seeds(tsr_device *device, const tsr_op *op, const struct cJSON *user_db, const char *problem_class,
                     const char *source_hash, tsr_tuning_seed *seeds, int max);
/* Forget resolved configurations and the parsed database (after the database changed). */
void tsr_tuning_invalidate(tsr_device *device);
/* At open (device lock created): read the TSR_CONFIG_* variables as the initial overrides. */
tsr_status tsr_config_device_init(tsr_device *device);
/* At close: free the overrides, the resolved configurations and the parsed database. */
void tsr_config_device_release(tsr_device *device);

/* ---- tuning database storage (tuning_db.c): knows device info, not ops nor open devices ---- */

/* XXH3-64 of a kernel source as 16 hex digits (stale entries are detected with it), the source
 * read as tsr_load_kernel_source does: tsr_op_source_hash_in from kernel_dir (a device passes its
 * dev->kernel_dir), the others from TSR_KERNEL_DIR as the environment holds it now (callers
 * without a device). */
tsr_status tsr_source_hash(const char *source_name, char out[17]);
/* The hash tuned entries of `op` carry: tsr_source_hash of its source alone, or, with
 * more_sources, of all its sources' texts in order. */
struct tsr_op;
tsr_status tsr_op_source_hash(const struct tsr_op *op, char out[17]);
tsr_status tsr_op_source_hash_in(const char *kernel_dir, const struct tsr_op *op, char out[17]);
/* Every field a lookup relies on has the right type and range, the top level holds only format,
 * schema_version, devices and checksum, and the checksum is there and matches; false with the
 * reason in `why` otherwise. */
bool tsr_db_validate(const struct cJSON *root, char *why, size_t size);
/* Stamp root's "checksum" (what every write does; tests seal the files they make by hand). */
tsr_status tsr_db_seal(struct cJSON *root);
/* Load and validate a database file: TSR_ERR_NOT_FOUND when absent, TSR_ERR_CORRUPT (with the
 * reason) when damaged or foreign. */
tsr_status tsr_db_load(const char *path, struct cJSON **root);
/* Look a class up in one database through the device tiers (this device on this processor: this
 * driver, another driver; the same for a node that does not record its processor; then a device
 * of the same platform, vendor and type: of the same LLVM target, this device name on another
 * processor included, of the same preferred float vector width, of unknown ISA; never one of
 * another ISA). Returns the tier (1 to TSR_DB_TIERS)
 * or 0; entries whose source hash or ISA differs are passed over and described in `notes`, and
 * those whose source hash differs (stale) are counted into *stale (may be NULL). */
#define TSR_DB_TIERS 7
int tsr_db_find(const struct cJSON *root, const tsr_device_info *info, const char *op, const char *problem_class,
                const char *source_hash, const struct cJSON **entry, const char **device_key, char *notes,
                size_t notes_size, int *stale);
/* tsr_db_find through tiers first_tier to last_tier only (the other-ISA note only when last_tier is
 * TSR_DB_TIERS). The resolver asks every database for this very device (TSR_DB_OWN_TIERS) before
 * any for a sibling, so an entry tuned on this device and processor, in the built-in database too,
 * is taken over one tuned elsewhere that the user's database holds. */
#define TSR_DB_OWN_TIERS 4
int tsr_db_find_tiers(const struct cJSON *root, const tsr_device_info *info, int first_tier, int last_tier,
                      const char *op, const char *problem_class, const char *source_hash, const struct cJSON **entry,
                      const char **device_key, char *notes, size_t notes_size, int *stale);
/* Every entry of op/class that tsr_db_find would weigh for this device, in its tier order, current
 * or stale (its source hash differs), whether or not its configuration fits: what a re-tune
 * starts from. */
typedef void (*tsr_db_visit_fn)(const struct cJSON *entry, const struct cJSON *device_node, int tier, bool stale,
                                void *ctx);
void tsr_db_each_entry(const struct cJSON *root, const tsr_device_info *info, const char *op,
                       const char *problem_class, const char *source_hash, tsr_db_visit_fn visit, void *ctx);
/* The LLVM CPU target in a PoCL device name ("pthread-skylake-avx512-Intel..." gives
 * "skylake-avx512") and its float SIMD width (16 there, 8 for AVX2 targets); 0 and NULL when the
 * name is no PoCL CPU name or names a target tessera does not know. */
int tsr_llvm_target_of_name(const char *name, const char **target);
/* Entries a database holds for this very device (tiers 1 to 4: any driver, this processor or a
 * node that does not say); 0 for NULL. */
size_t tsr_db_count_for_device(const struct cJSON *root, const tsr_device_info *info);
/* Append a note to a "; "-separated list (silently cut at `size`). */
void tsr_note_append(char *notes, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fails (TSR_ERR_IO, with the reason) unless the database at path can be written: checked
 * before a long search so it does not end in a failed save. */
tsr_status tsr_db_check_writable(const char *path);
/* Read-modify-write of a database file under an exclusive lock; a damaged file is moved aside
 * (reported as a warning, never over an earlier copy) and replaced; a symlinked path is written
 * through to its target; temp files of killed writers are removed. `update` edits the tree in place. */
tsr_status tsr_db_update(const char *path, tsr_status (*update)(struct cJSON *root, void *ctx), void *ctx);
/* The device's node in a database tree, created when missing. */
struct cJSON *tsr_db_device_node(struct cJSON *root, const tsr_device_info *info);
/* Merge every entry of `src` into `dst` (faster wins among entries of the same source hash;
 * an entry for the current source replaces a stale one). Returns how many were taken. */
size_t tsr_db_merge(struct cJSON *dst, const struct cJSON *src);
struct cJSON *tsr_db_new(void);
extern const char tsr_builtin_tuning_json[]; /* generated from data/builtin_tuning.json */

/* ---- tuner (tuner/; its private parts in tuner/tuner.h) ---- */

/* tsr_tune for an op descriptor (tests tune ops that no table lists). */
tsr_status tsr_tune_op(tsr_device *device, const tsr_op *op, const tsr_tune_options *options,
                       tsr_tune_result *results, size_t max_results, size_t *nresults);

/* ---- measurement (measure.c): used by the tuner, bench, peak and report ---- */

/* Seconds on the monotonic clock (wall-clock timing and time budgets). */
double tsr_now_s(void);
/* What a series of event timings on one in-order queue has seen, to catch a clock that goes
 * back or stands still; zero-initialise it before the first timing. */
typedef struct tsr_event_clock {
    cl_ulong last_start, last_end;
} tsr_event_clock;
/* The checks of one timing, on its numbers alone (so tests can feed it any): a start or end of
 * 0, an end at or before its start (a command takes time), or, with a `clock` (may be NULL), a
 * start before the previous timing's end (an in-order queue runs one command after the other)
 * are unusable: TSR_ERR_UNSUPPORTED with "<what>: unusable timestamps: ...". Otherwise *seconds
 * and the clock are updated. */
tsr_status tsr_timestamps_check(cl_ulong start, cl_ulong end, tsr_event_clock *clock, const char *what,
                                double *seconds);
/* Device seconds from the start of `first` to the end of `last` (the same event for one
 * command): waits for `last`, releases neither, and checks the timestamps with
 * tsr_timestamps_check, so a made-up time is never returned (a failing OpenCL call is
 * TSR_ERR_OPENCL). */
tsr_status tsr_event_seconds(cl_event first, cl_event last, const char *what, tsr_event_clock *clock,
                             double *seconds);

/* How a device's kernels are timed. DEVICE: profiling events (their timestamps checked every
 * time). HOST: the host's monotonic clock around batches of launches (enqueue N, clFinish),
 * less the device's empty-launch cost, over N: for drivers whose timestamps are unusable
 * (Mesa rusticl 22.x reports start 2 ns and end 3 ns for every command). */
typedef enum tsr_timing_method { TSR_TIMING_UNDECIDED = 0, TSR_TIMING_DEVICE = 1, TSR_TIMING_HOST = 2 } tsr_timing_method;
/* "device", "host" (or "undecided"). */
const char *tsr_timing_name(tsr_timing_method method);
/* The device's timing method, decided at the first call and kept: $TSR_TIMING=device|host
 * forces one; auto (or unset) runs the probe: a calibrated kernel (about 20 ms) timed 5 times
 * with profiling and with the host clock around clFinish; its timestamps must be non-zero,
 * ordered, advancing from run to run, and the device time within the host time and not a small
 * fraction of it. *reason (may be NULL) says why host timing was chosen ("" for device). Also
 * measures the empty-launch cost. A bad $TSR_TIMING is TSR_ERR_INVALID_ARG. */
tsr_status tsr_device_timing(tsr_device *device, tsr_timing_method *method, const char **reason);
/* The median enqueue + clFinish of an empty kernel on the device's queue, in seconds (measured
 * by tsr_device_timing; 0 before it). */
double tsr_device_empty_launch_s(tsr_device *device);
/* How many loop iterations one work-item may run on this device before its loops end early
 * without an error (Mesa's llvmpipe ends them after about 65535 in all, nested loops counted
 * together): *limit, or UINT64_MAX where a probe of LOOP_PROBE_ITERATIONS found none. Probed
 * once per device at the first call (a one-work-item kernel), so that a kernel whose loops
 * would pass the limit is refused instead of returning wrong results. */
tsr_status tsr_device_loop_limit(tsr_device *device, uint64_t *limit);
/* One launch of what a timer measures, on the device's queue: *first and *last (either may be
 * NULL: host timing asks for no events) receive the first and last command's events. */
typedef tsr_status (*tsr_launch_fn)(void *ctx, cl_event *first, cl_event *last);
/* Times launches by the device's method. Zero-initialise; `what` names it in messages. */
typedef struct tsr_timer {
    const char *what;
    tsr_event_clock clock;
    int batch;                 /* host timing: launches per measurement, adapted to the launch's length */
    int device_runs, host_runs; /* measurements made each way */
} tsr_timer;
/* Seconds per launch of `launch` by the device's method: one launch timed by its events, or a
 * batch of launches on the host clock (long enough that the empty-launch cost, subtracted, is
 * small). A timing whose events fail the checks switches the device to host timing, with a
 * warning, and is taken again on the host clock (unless TSR_TIMING=device forced events: then
 * it is the error). The result is finite and positive, or an error: never 0. */
tsr_status tsr_timer_run(tsr_timer *timer, tsr_device *device, tsr_launch_fn launch, void *ctx, double *seconds);
/* Summary of n >= 1 measurements. */
typedef struct tsr_stats {
    int n;
    double median; /* the mean of the middle two for even n */
    double q25;    /* lower quartile: the sorted value at (n - 1) / 4 */
    double min, max;
    double spread; /* (max - min) / median */
} tsr_stats;
/* Sorts `values` in place and summarizes them. */
void tsr_stats_of(double *values, int n, tsr_stats *stats);
/* Distribution-free ~95% confidence bounds for the p-quantile (0 < p < 1) of what n >= 1 sorted
 * values were drawn from: the order statistics at ranks n p -/+ 1.96 sqrt(n p (1 - p)), clamped
 * to the smallest and largest value. False when a rank was clamped: too few values for that
 * confidence (the median needs 8, the lower quartile 12), and the bounds are then wider in truth.
 * Adaptive measurements stop once these are close enough. */
bool tsr_quantile_bounds(const double *sorted, int n, double p, double *lo, double *hi);
/* One measurement of whatever a caller times (seconds, a rate, microseconds...). */
typedef tsr_status (*tsr_measure_fn)(void *ctx, double *value);
/* Is the p-quantile of these n values known within `precision` (half its ~95% confidence
 * interval, relative to it)? False with too few values for the bounds; `scratch` has room for n. */
bool tsr_quantile_known(const double *values, int n, double p, double precision, double *scratch);
/* One warm-up call whose value is dropped, then calls until at least `min_runs` were made and
 * `budget_s` seconds of wall-clock time have passed, or sooner once the median is known within
 * `precision` (0: spend the budget), at most `max_runs`: `values` (room for max_runs) receives
 * them, *n how many. The first failure ends it and is returned. */
tsr_status tsr_repeat(tsr_measure_fn fn, void *ctx, double budget_s, int min_runs, int max_runs, double precision,
                      double *values, int *n);

/* ---- argument checks shared by ops (checks.c) ---- */

/* Rows of `row` elements at every index of three strided dimensions (strides, counts) never
 * share an element: sorted by stride, each stride covers everything inside it. For outputs. */
bool tsr_rows_disjoint(const size_t strides[3], const size_t counts[3], size_t row);
/* Attention's longest q_len and kv_len: row indices run up to 512 past the last row in int. */
#define TSR_ATTENTION_MAX_LEN (INT_MAX - 512)

/* The extent arithmetic of every op: offset + sum of (counts[i] - 1) * strides[i] + inner elements,
 * every count at least 1; false (and *elements 0) when it, or its size in bytes as floats, overflows.
 * Callers word their own messages. */
bool tsr_strided_extent(size_t offset, size_t ndims, const size_t *counts, const size_t *strides, size_t inner,
                        size_t *elements);
/* Elements a strided-batched matrix spans: offset + (batch-1)*stride + (lines-1)*ld + line_length,
 * with overflow checks; 0 when the matrix is empty. `name` labels messages. */
tsr_status tsr_matrix_extent(const char *name, size_t offset, size_t lines, size_t line_length, size_t ld,
                             size_t stride, size_t batch, size_t *elements);
/* a * b + c into *out, or TSR_ERR_OVERFLOW with a message naming `what`: every size an op derives
 * from caller values (elements, bytes, work sizes, workspaces) goes through this or
 * __builtin_*_overflow, never plain arithmetic that can wrap. */
tsr_status tsr_size_mad(const char *what, size_t a, size_t b, size_t c, size_t *out);
/* Where a buffer's bytes are: the root buffer (sub-buffers resolved through
 * CL_MEM_ASSOCIATED_MEMOBJECT) and the byte range [origin, origin + size) inside it. */
typedef struct tsr_mem_region {
    cl_mem root;
    size_t origin, size;
} tsr_mem_region;
tsr_status tsr_mem_region_of(cl_mem mem, const char *name, tsr_mem_region *region);
/* How two float ranges [off, off + count) of two buffers relate in memory, comparing byte ranges
 * of their root buffers, so sub-buffers of one parent (and a sub-buffer and its parent) are seen
 * to alias. TSR_RANGES_SAME: the very same bytes (in place). Empty ranges never overlap. */
typedef enum tsr_ranges { TSR_RANGES_DISJOINT, TSR_RANGES_SAME, TSR_RANGES_OVERLAP } tsr_ranges;
tsr_status tsr_ranges_relate(cl_mem a, size_t a_off, size_t a_count, cl_mem b, size_t b_off, size_t b_count,
                             tsr_ranges *relation);
/* Refuse (TSR_ERR_INVALID_ARG, naming both arguments) ranges that share memory; with
 * `same_ok` the exact in-place case is accepted. `op` prefixes the message. Offsets and counts
 * are in floats and already checked against the buffers. For attention and any other op. */
tsr_status tsr_check_disjoint(const char *op, cl_mem a, const char *a_name, size_t a_off, size_t a_count, cl_mem b,
                              const char *b_name, size_t b_off, size_t b_count, bool same_ok);
/* tsr_ranges_relate and tsr_check_disjoint for tensors of other types: offsets and counts in
 * elements of each tensor's own dtype. */
tsr_status tsr_ranges_relate_typed(cl_mem a, size_t a_off, size_t a_count, tsr_dtype a_type, cl_mem b, size_t b_off,
                                   size_t b_count, tsr_dtype b_type, tsr_ranges *relation);
tsr_status tsr_check_disjoint_typed(const char *op, cl_mem a, const char *a_name, size_t a_off, size_t a_count,
                                    tsr_dtype a_type, cl_mem b, const char *b_name, size_t b_off, size_t b_count,
                                    tsr_dtype b_type, bool same_ok);
/* Is `mem` a buffer of this device's context holding at least `elements` floats? */
tsr_status tsr_check_buffer(const tsr_device *device, cl_mem mem, const char *name, size_t elements);
/* tsr_check_buffer for a tensor of `dtype` (elements of its size; an invalid dtype is refused). */
tsr_status tsr_check_buffer_typed(const tsr_device *device, cl_mem mem, const char *name, size_t elements,
                                  tsr_dtype dtype);
/* The queue to use: the caller's (checked to belong to the device's context) or the device's. */
tsr_status tsr_resolve_queue(const tsr_device *device, cl_command_queue queue, cl_command_queue *out);
/* Fill a buffer of `count` floats from a host array (blocking), for demos and tests. */
tsr_status tsr_upload(tsr_device *device, cl_mem mem, const float *host, size_t count);
/* The same for a tensor stored in `dtype`: host holds fp32 values, converted (rounded to nearest
 * even) on the way up and widened on the way down; the buffer's first count elements. */
tsr_status tsr_upload_typed(tsr_device *device, cl_mem mem, tsr_dtype dtype, const float *host, size_t count);
tsr_status tsr_download_typed(tsr_device *device, cl_mem mem, tsr_dtype dtype, float *host, size_t count);
tsr_status tsr_download(tsr_device *device, cl_mem mem, float *host, size_t count);

/* Case-insensitive substring test. */
bool tsr_contains_nocase(const char *haystack, const char *needle);
/* Format into buf like snprintf but always terminated and truncated safely. */
void tsr_strlcpy(char *dst, const char *src, size_t size);
/* The tokenizer of every "NAME=VALUE ..." text (configurations, tuner spaces, CLBlast's parameters):
 * the next token of the writable string at *cursor, which it cuts at any of `separators` (runs of
 * them count as one) and advances past. *name is the token up to '=' and *value what follows it;
 * a token without '=' gives the whole token in *name and a NULL *value. False at the end. */
bool tsr_next_pair(char **cursor, const char *separators, char **name, char **value);

#endif
