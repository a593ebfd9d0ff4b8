/*
 * tessera: a portable OpenCL runtime for deep-learning kernels.
 *
 * The one public header. Conventions:
 *  - every function that can fail returns a tsr_status; tsr_status_str() names
 *    it and tsr_last_error() (thread-local) explains the last failure;
 *  - the library never prints, exits or aborts;
 *  - ops take plain cl_mem buffers with element offsets and leading dimensions,
 *    so they can run on an existing OpenCL program's buffers and queue.
 */
#ifndef TESSERA_H
#define TESSERA_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* TSR_API marks the library's exported functions; TSR_PRINTF_LIKE(f, a) a function whose
 * argument f is a printf format for the arguments from a on (checked by GCC and clang). */
#if defined(__GNUC__)
#define TSR_API __attribute__((visibility("default")))
#define TSR_PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define TSR_API
#define TSR_PRINTF_LIKE(f, a)
#endif

#define TSR_VERSION_STRING "0.1.0"

/* ------------------------------------------------------------------ status */

typedef enum tsr_status {
    TSR_SUCCESS = 0,
    TSR_ERR_INVALID_ARG = -1,      /* a bad argument; the message names it */
    TSR_ERR_NO_PLATFORM = -2,      /* the ICD loader offers no OpenCL platform */
    TSR_ERR_NO_DEVICE = -3,        /* no device, or none matches the selector */
    TSR_ERR_OUT_OF_MEMORY = -4,    /* host or device allocation failed */
    TSR_ERR_OPENCL = -5,           /* an OpenCL call failed; the message names it */
    TSR_ERR_BUILD = -6,            /* kernel compilation failed; the message holds the build log */
    TSR_ERR_NO_BINARY = -7,        /* device has no compiler and no ahead-of-time binary was found */
    TSR_ERR_IO = -8,               /* a file could not be read or written */
    TSR_ERR_CORRUPT = -9,          /* a file exists but is damaged or foreign */
    TSR_ERR_UNSUPPORTED = -10,     /* the device cannot run this op or configuration */
    TSR_ERR_BUFFER_TOO_SMALL = -11,/* a cl_mem is smaller than the data it must hold */
    TSR_ERR_OVERFLOW = -12,        /* a size computation overflows */
    TSR_ERR_NOT_FOUND = -13        /* a named kernel source or entry does not exist */
} tsr_status;

/* Name of a status ("TSR_ERR_INVALID_ARG"); never NULL. */
TSR_API const char *tsr_status_str(tsr_status status);

/* Explanation of the last failure on this thread ("" if none). Valid until the
 * next tessera call on this thread. */
TSR_API const char *tsr_last_error(void);

/* For libraries built on tessera (the MPI component): record a failure of their own as tessera
 * records its own, so that tsr_status_str() and tsr_last_error() explain it; `format` is
 * printf's. Returns status. */
TSR_API tsr_status tsr_set_error(tsr_status status, const char *format, ...) TSR_PRINTF_LIKE(2, 3);
/* The same for an OpenCL call that returned `error`: "WHAT failed with CL_NAME (code)
 * [FILE:LINE]", as TSR_ERR_OUT_OF_MEMORY for CL_OUT_OF_HOST_MEMORY and
 * CL_MEM_OBJECT_ALLOCATION_FAILURE, else TSR_ERR_OPENCL. Returns that status. */
TSR_API tsr_status tsr_set_cl_error(cl_int error, const char *what, const char *file, int line);

/* The last non-fatal warning on this thread ("" if none), e.g. an unwritable
 * cache directory that made tessera fall back to an in-memory cache. */
TSR_API const char *tsr_last_warning(void);

/* Called with each warning as it is raised, on the thread that raises it (the text
 * is only valid during the call), in addition to tsr_last_warning(). Warnings are
 * also raised inside calls that succeed and by calls whose warning a later call
 * clears: a damaged tuning database, a rejected binary cache entry, a tuned entry
 * passed over. The handler must not call tessera. Process-wide; NULL removes it. A handler
 * always receives the user pointer it was set with; one already running on another thread
 * may still finish after this call returns. */
typedef void (*tsr_warning_handler)(const char *message, void *user);
TSR_API void tsr_set_warning_handler(tsr_warning_handler handler, void *user);

/* ---------------------------------------------------------------- devices */

typedef enum tsr_device_type {
    TSR_DEVICE_CPU = 1,
    TSR_DEVICE_GPU = 2,
    TSR_DEVICE_ACCELERATOR = 3, /* FPGAs and other accelerators */
    TSR_DEVICE_CUSTOM = 4,
    TSR_DEVICE_OTHER = 5
} tsr_device_type;

/* Name of a device type ("CPU", "GPU", ...; "OTHER" for unknown values); never NULL. */
TSR_API const char *tsr_device_type_str(tsr_device_type type);

#define TSR_INFO_STR 256

typedef struct tsr_device_info {
    int platform_index;             /* P in a "P:D" selector */
    int device_index;               /* D in a "P:D" selector */
    tsr_device_type type;
    char platform_name[TSR_INFO_STR];
    char platform_vendor[TSR_INFO_STR];
    char platform_version[TSR_INFO_STR];
    char name[TSR_INFO_STR];
    char vendor[TSR_INFO_STR];
    char device_version[TSR_INFO_STR];
    char driver_version[TSR_INFO_STR];
    char opencl_c_version[TSR_INFO_STR];
    uint32_t compute_units;
    uint32_t max_clock_mhz;
    uint64_t global_mem_bytes;
    uint64_t max_alloc_bytes;
    uint64_t local_mem_bytes;
    bool local_mem_is_dedicated;    /* false: local memory is emulated in global memory */
    size_t max_work_group_size;
    uint32_t max_work_item_dims;
    size_t max_work_item_sizes[3];
    /* preferred and native vector widths: char, short, int, long, float, double, half */
    uint32_t preferred_vector_width[7];
    uint32_t native_vector_width[7];
    bool fp16;
    bool fp64;
    bool compiler_available;        /* CL_DEVICE_COMPILER_AVAILABLE && CL_DEVICE_LINKER_AVAILABLE */
    bool available;                 /* CL_DEVICE_AVAILABLE */
    /* Why tessera cannot use the device ("": it can), e.g. "the device reports zero compute
     * units": such a device is listed but never chosen by default, and tsr_device_open refuses
     * it with TSR_ERR_UNSUPPORTED. */
    char unusable[TSR_INFO_STR];
    /* Where the driver's worker threads run, for PoCL's CPU device ("" for every other device):
     * "pinned, worker i on CPU i (POCL_AFFINITY=1, set by tessera before its first OpenCL call)" or "... from the
     * environment", or "placed by the OS scheduler (why)". Before its first OpenCL call tessera
     * sets POCL_AFFINITY=1 when the variable is unset, POCL_MAX_PTHREAD_COUNT and
     * POCL_CPU_MAX_CU_COUNT are unset and the process may run on every online CPU: without it
     * the scheduler often stacks two workers on one CPU during a short call (a batch-1
     * convolution at about one core's speed). POCL_AFFINITY=0 keeps PoCL's default. A device from
     * tsr_device_wrap with no discovery before it found OpenCL started and says so. */
    char worker_threads[TSR_INFO_STR];
    /* For a CPU device, the processor it runs on as the processor itself reports it (on x86, from
     * CPUID: "AuthenticAMD family 25 model 17"); "" for every other device and where unknown. A
     * CPU driver's device name may not tell two processors apart (PoCL names a Zen 4 and a Zen 5
     * "pthread-skylake-avx512-AMD EPYC" under a hypervisor that hides the model), yet their best
     * kernel configurations differ: the tuning database keeps their entries apart by this. */
    char host_cpu[TSR_INFO_STR];
} tsr_device_info;

/* Every device of every platform the ICD loader offers. *infos is allocated
 * (free with tsr_free); *count may be 0 when platforms exist but hold no
 * device. No platform at all gives TSR_ERR_NO_PLATFORM. */
TSR_API tsr_status tsr_discover(tsr_device_info **infos, size_t *count);

/* A JSON array describing every device (the same fields as tsr_device_info).
 * Free with tsr_free. */
TSR_API tsr_status tsr_discover_json(char **json);

/* The vendor files (.icd) of $OCL_ICD_VENDORS or /etc/OpenCL/vendors whose library does not load
 * or is no OpenCL driver, each with the reason, "; "-separated ("" when none): the ICD loader
 * skips them silently, so their platforms are simply missing from tsr_discover. Free *text with
 * tsr_free. */
TSR_API tsr_status tsr_icd_problems(char **text);

/* Free memory tessera allocated for the caller (tsr_discover, tsr_discover_json); NULL is a no-op. */
TSR_API void tsr_free(void *ptr);

typedef struct tsr_device tsr_device;

/* Open a device by selector: "cpu", "gpu", "accelerator", "P:D" indices, or a
 * case-insensitive substring of the device, vendor or platform name. NULL or ""
 * uses $TSR_DEVICE, and if that is unset the default: a GPU, else an
 * accelerator, else a CPU. A selector matching nothing gives TSR_ERR_NO_DEVICE
 * with the list of devices in the message. */
TSR_API tsr_status tsr_device_open(const char *selector, tsr_device **device);

/* Wrap an existing context, device and queue (the caller keeps ownership;
 * tessera retains them while the tsr_device lives). The queue may be NULL, in
 * which case tessera creates one with profiling enabled. */
TSR_API tsr_status tsr_device_wrap(cl_context context, cl_device_id device_id,
                           cl_command_queue queue, tsr_device **device);

/* Finish the device's queue and release everything tessera holds for it; NULL is a no-op. With
 * GEMM plans (tsr_matmul_plan) alive, the release waits for the last of them to be destroyed.
 * The release writes the programs built from source on the device to the disk binary cache (not
 * their first call: on PoCL, fetching a program's binary compiles its kernels once more). */
TSR_API void tsr_device_close(tsr_device *device);

/* The device's description and its OpenCL handles (owned by the tsr_device; NULL for a NULL
 * device). */
TSR_API const tsr_device_info *tsr_device_get_info(const tsr_device *device);
TSR_API cl_context tsr_device_context(const tsr_device *device);
TSR_API cl_device_id tsr_device_id(const tsr_device *device);
TSR_API cl_command_queue tsr_device_queue(const tsr_device *device);

/* A stable fingerprint of platform, vendor, device, driver and OpenCL C
 * version, e.g. for tuning databases and reports. */
TSR_API const char *tsr_device_fingerprint(const tsr_device *device);

/* ------------------------------------------------------- programs, caches */

typedef struct tsr_cache_info {
    bool persistent;            /* false: in-memory only (disabled or unwritable) */
    char dir[1024];             /* the on-disk cache directory ("" when not persistent) */
    char warning[1024];         /* why the disk cache is not used, if it is not */
    bool offline;               /* device has no compiler: binaries come from binary_dir */
    char binary_dir[1024];      /* $TSR_BINARY_DIR */
    uint64_t memory_hits, disk_hits, builds, binary_loads, disk_rejects;
} tsr_cache_info;

/* The device's program cache: where it lives, whether it is persistent, and its counters. */
TSR_API tsr_status tsr_cache_get_info(const tsr_device *device, tsr_cache_info *info);

/* Build (or fetch from the caches) the program made from the embedded kernel
 * source `source_name` (e.g. "gemm") with `options` (-D defines), and return a
 * new kernel object for `kernel_name`. The caller releases the kernel. */
TSR_API tsr_status tsr_get_kernel(tsr_device *device, const char *source_name,
                          const char *options, const char *kernel_name,
                          cl_kernel *kernel);

/* Names of the embedded kernel sources, NULL-terminated. */
TSR_API const char *const *tsr_kernel_source_names(void);

/* Write ahead-of-time binaries of every op's built-in configurations for this
 * device into `dir`, for devices without an online compiler (load them with
 * $TSR_BINARY_DIR). *written receives the number of binaries written. fp32 programs only:
 * tsr_build_binaries_typed adds the 16-bit ones. */
TSR_API tsr_status tsr_build_binaries(tsr_device *device, const char *dir, size_t *written);


/* -------------------------------------------------------------- data types */

/* How a tensor's elements are stored. Every op computes in fp32 (products and sums), whatever its
 * tensors' storage: loads widen to fp32 in registers, stores round to the output's type. Rounding
 * to a 16-bit type is to nearest, ties to even; NaN stays NaN (a quiet NaN); a finite value
 * beyond the type's range becomes Inf of its sign, as IEEE 754 rounds. Offsets, leading dimensions
 * and strides count elements of the tensor's own type. fp16 and bf16 need no device extension:
 * storage goes through OpenCL C 1.2's vload_half/vstore_half and 16-bit integer loads. */
typedef enum tsr_dtype {
    TSR_F32 = 0,  /* IEEE 754 binary32; the zero value, so zero-initialised descriptors mean fp32 */
    TSR_F16 = 1,  /* IEEE 754 binary16 (half): 11 significant bits, largest finite 65504 */
    TSR_BF16 = 2  /* bfloat16: the upper 16 bits of a binary32, 8 significant bits, fp32's range */
} tsr_dtype;

/* Name of a data type ("f32", "f16", "bf16"); "?" for a value outside the enum; never NULL. */
TSR_API const char *tsr_dtype_str(tsr_dtype dtype);

/* Bytes per element (4, 2, 2); 0 for a value outside the enum. */
TSR_API size_t tsr_dtype_size(tsr_dtype dtype);

/* A data type by name: "f32"/"fp32"/"float32"/"float", "f16"/"fp16"/"float16"/"half",
 * "bf16"/"bfloat16" (case-insensitive). TSR_ERR_INVALID_ARG naming the accepted names otherwise. */
TSR_API tsr_status tsr_dtype_parse(const char *name, tsr_dtype *dtype);

/* Convert n elements on the host, src in src_type to dst in dst_type (rounding as above; f32 to
 * f32 and the like copy). src and dst must not overlap. */
TSR_API tsr_status tsr_convert_host(tsr_dtype src_type, const void *src, tsr_dtype dst_type, void *dst, size_t n);

/* The same on the device: dst[dst_offset + i] = src[src_offset + i] converted from src_type to
 * dst_type, for i < n (n >= 1), enqueued on `queue` (NULL: the device's queue; `event` may be
 * NULL). Any pair of types, rounding as tsr_convert_host does and bit for bit equal to it, NaN
 * payloads included (a widened signalling NaN stays signalling; f32 to f32 and the like copy).
 * Offsets count elements of each buffer's own type; both buffers are checked for size in those
 * elements. src and dst may be the same bytes only when the types are equal; any other overlap is
 * refused with the byte ranges. A status naming src or dst refuses a type outside the enum. It
 * runs GELU's copy kernel on integer bits (its tuned geometry; no float operation touches a value;
 * see docs/gelu.md). */
TSR_API tsr_status tsr_convert(tsr_device *device, tsr_dtype src_type, cl_mem src, size_t src_offset,
                               tsr_dtype dst_type, cl_mem dst, size_t dst_offset, size_t n, cl_command_queue queue,
                               cl_event *event);

/* Constant buffers. Ops take plain cl_mem buffers, so tessera cannot see writes the caller makes
 * itself (clEnqueueWriteBuffer, a map, another library's kernel). Unless told otherwise it does
 * every per-call step on every call: tsr_conv2d transforms (Winograd forms), widens (16-bit
 * weights) or packs (its channel-vector form) its weights w each time, and a small-M tsr_matmul
 * reads B as stored. A buffer marked constant lets tessera keep what it derives
 * from the buffer's contents (per device, at most tsr_device_info.global_mem_bytes / 8 and 1 GiB
 * per device, least recently used dropped first) and reuse it while the contents are unchanged.
 * Derived data is never served stale: it is made again after any write tessera knows of (an op
 * whose output lies in the buffer, including a graph replay's, and tsr_buffer_changed), and it is
 * dropped when the buffer is released (seen through a destructor callback, before the buffer's
 * memory can be reused), when the mark is removed, and when its device is closed. Kept: conv2d's
 * transformed, widened or packed weights; GEMM's B in strips of the small-M kernel's tile columns
 * (where that kernel reads B and A untransposed, batch 1); GEMM's A in the tiled kernel's packed
 * panels (where its configuration packs A and one A serves the call: batch 1 or a stride of 0;
 * conv2d's im2col and 1x1 GEMMs have the weights there). Calls being recorded into a graph never
 * derive: a conv2d call derives on every replay, and so does a GEMM call's packed A (it is packed
 * in the recording); a GEMM call recorded while its strips are made and current replays on them,
 * and such a replay fails once the buffer changed or was unmarked (tsr_graph_launch): make one call
 * before recording. Safe from several threads.
 * A write counts when its call is made, not when it runs: a call that reads a marked buffer on one
 * queue while a write to it is still pending, unordered, on another (a data race in OpenCL terms)
 * may derive from the old contents and keep them until the next write tessera knows of; order
 * such a write before the next call that reads the buffer (or call tsr_buffer_changed once it is
 * done).
 *
 * Mark `buffer` (a buffer, not a sub-buffer: the mark covers the whole allocation and every
 * sub-buffer of it) constant, or with constant = false remove the mark and drop what was derived
 * from it. Marking a marked buffer (or unmarking an unmarked one) changes nothing. */
TSR_API tsr_status tsr_buffer_set_constant(cl_mem buffer, bool constant);

/* Tell tessera that the contents of a marked buffer changed by a write it did not make (call it
 * after enqueueing the write and before the next tessera call that reads the buffer); a
 * sub-buffer stands for its parent. What tessera derived from it is made again at its next use.
 * Harmless on an unmarked buffer. */
TSR_API tsr_status tsr_buffer_changed(cl_mem buffer);

/* tsr_build_binaries with the programs of problems whose tensors are stored in the `count` types of
 * `dtypes` (TSR_F16, TSR_BF16; TSR_F32's are always written): fp32 and the uniform 16-bit storage
 * sets of each op (all-f16, all-bf16, 16-bit inputs with an fp32 output; GELU every pair). A launch
 * on a device without a compiler that needs a program not written gets TSR_ERR_NO_BINARY. */
TSR_API tsr_status tsr_build_binaries_typed(tsr_device *device, const char *dir, const tsr_dtype *dtypes,
                                            size_t count, size_t *written);

/* -------------------------------------------------------------------- ops */

/* Layout and transposition, with CLBlast's values so its callers can swap calls. */
typedef enum tsr_layout { TSR_ROW_MAJOR = 101, TSR_COL_MAJOR = 102 } tsr_layout;
typedef enum tsr_transpose { TSR_NO_TRANS = 111, TSR_TRANS = 112, TSR_CONJ_TRANS = 113 } tsr_transpose;

/* ------------------------------------------------------------------ activations */

/* Activations for GEMM's epilogue (and later ops' outputs). */
typedef enum tsr_activation {
    TSR_ACT_NONE = 0,
    TSR_ACT_RELU = 1,      /* max(x, 0); NaN stays NaN */
    TSR_ACT_GELU_TANH = 2, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PyTorch approximate='tanh' */
    TSR_ACT_GELU_ERF = 3   /* 0.5 x (1 + erf(x / sqrt(2))), PyTorch's default GELU */
} tsr_activation;

typedef enum tsr_gelu_mode {
    TSR_GELU_TANH = TSR_ACT_GELU_TANH,
    TSR_GELU_ERF = TSR_ACT_GELU_ERF
} tsr_gelu_mode;

/* What GEMM applies to each element of C before writing it (conv2d takes the same struct, per
 * output channel: see tsr_conv2d_desc):
 *   C(i, j) <- act(scale[j] * alpha * (op(A) op(B))(i, j) + beta * C(i, j) + bias[j] + residual(i, j))
 * in one pass over C, with j the column of C (in the call's layout). scale[j] = the scale buffer
 * at scale_offset + batch_index * scale_stride + j and bias[j] likewise (both fp32 whatever the
 * operands' types); a NULL scale is 1, a NULL bias 0. residual(i, j) is a matrix of C's shape in C's
 * layout, leading dimension and batch stride, at residual_offset (counted in elements of
 * residual_type, which is any storage type: f32, f16 or bf16), read and widened to fp32 like C;
 * a NULL residual is 0. The residual may be C itself (the same buffer, offset and type: each
 * element is read before it is written, as beta's C is; any other overlap with C, and any with A
 * or B, is refused). The arithmetic is fp32; C is rounded to its type once, when stored. A linear
 * layer gelu(x W^T + b) is a tsr_matmul_desc with trans_b TSR_TRANS and
 * .epilogue = {.bias = b, .activation = TSR_ACT_GELU_TANH}; BatchNorm folded into a per-column
 * scale and bias, plus a skip connection and ReLU, is {.scale = s, .bias = b, .residual = r,
 * .activation = TSR_ACT_RELU}. All zero: no epilogue (fields added later keep that meaning). */
typedef struct tsr_epilogue {
    cl_mem bias;            /* NULL: no bias */
    size_t bias_offset;     /* in floats */
    size_t bias_stride;     /* per batch entry, in floats; 0 shares one bias vector */
    tsr_activation activation;
    cl_mem scale;           /* NULL: none (1). fp32, multiplies the product before beta C and the bias */
    size_t scale_offset;    /* in floats */
    size_t scale_stride;    /* per batch entry, in floats; 0 shares one scale vector */
    cl_mem residual;        /* NULL: none. A tensor of the output's shape and layout, added after the
                               bias, before the activation */
    size_t residual_offset; /* in elements of residual_type */
    tsr_dtype residual_type; /* 0: fp32; TSR_F16 and TSR_BF16 storage allowed */
    /* LayerNorm last (GEMM only; conv2d refuses it): with norm_gamma set, each row of C (its n
     * values s, after the activation) becomes (s - mean(s)) / sqrt(var(s) + norm_eps) *
     * gamma[j] + beta[j], as tsr_layernorm computes it (biased two-pass variance on s scaled by a
     * power of two; the same accuracy bound), gamma and beta n fp32 values at their offsets
     * (floats). A transformer's Add & Norm after a linear layer is {.bias = b, .residual = x,
     * .norm_gamma = g, .norm_beta = be, .norm_eps = 1e-12f} with C = x (in place). Row-major,
     * batch 1 only (TSR_ERR_UNSUPPORTED otherwise; matmul plans and device groups refuse it too);
     * neither gamma nor beta may overlap C. Where the small-M kernel runs (its vectors-along-N
     * form, an fp32 C) on a CPU device compiled to native code, the norm is in its epilogue: one
     * launch, the last work-item of each row tile normalising its rows; elsewhere the GEMM is
     * followed by a LayerNorm launch on C in place that waits for the GEMM's event. */
    cl_mem norm_gamma;       /* NULL: no LayerNorm (then norm_beta must be NULL too) */
    cl_mem norm_beta;        /* required with norm_gamma */
    size_t norm_gamma_offset, norm_beta_offset;
    float norm_eps;          /* > 0 and finite (BERT: 1e-12) */
} tsr_epilogue;

/* One GEMM operand: its storage type and where its matrices lie, counted in elements of its own
 * type (an f16 operand's offset is in halves, and so are the buffer-size checks). */
typedef struct tsr_matrix {
    tsr_dtype dtype;      /* 0: fp32 */
    size_t offset;
    size_t ld;            /* leading dimension; 0: packed (the stored row, or column, length) */
    size_t batch_stride;  /* between consecutive matrices of a batch; 0: every batch entry reads one
                           * matrix (for C, with batch > 1, refused: the outputs would overlap) */
} tsr_matrix;

/* One GEMM, or a strided batch of them:
 *   C <- act(alpha * op(A) * op(B) + beta * C + bias)   for each of `batch` matrices,
 * op(A) m x k, op(B) k x n, C m x n, with CLBlastSgemm's semantics: k == 0 or alpha == 0 gives
 * C <- beta * C without reading A and B (alpha and beta are taken literally); beta == 0 overwrites
 * C without reading it (NaN and Inf in C do not propagate). Each operand is stored in its own type
 * (TSR_F32, TSR_F16, TSR_BF16, any combination, modelled on cublasGemmStridedBatchedEx): products
 * and sums are fp32, A and B widen to fp32 as they are loaded, beta != 0 reads C in its type, and
 * the result is rounded (to nearest even) to C's type once, when stored. fp16 and bf16 need no
 * device extension: only storage is 16-bit, never arithmetic. Zero-initialised fields take
 * defaults: row-major, no transposes, one product, packed leading dimensions, fp32, no epilogue.
 * Every field is checked before anything is enqueued, and every operand against its real cl_mem
 * size (A and B also when alpha == 0; with k == 0 they may be any buffer); C must not share memory
 * with an A or B it reads (TSR_ERR_INVALID_ARG naming both); a type outside the enum is
 * TSR_ERR_INVALID_ARG naming the operand. Sizes and leading dimensions are at most INT_MAX. */
typedef struct tsr_matmul_desc {
    tsr_layout layout;              /* 0: TSR_ROW_MAJOR */
    tsr_transpose trans_a, trans_b; /* 0: TSR_NO_TRANS */
    size_t m, n, k;                 /* m, n >= 1; k may be 0 */
    size_t batch;                   /* 0 or 1: one product */
    float alpha, beta;
    tsr_matrix a, b, c;
    tsr_epilogue epilogue;          /* zero: none */
} tsr_matmul_desc;

/* The GEMM `desc` describes, on buffers a, b and c. `queue` may be NULL (the device's queue);
 * `event` may be NULL. */
TSR_API tsr_status tsr_matmul(tsr_device *device, const tsr_matmul_desc *desc, cl_mem a, cl_mem b, cl_mem c,
                              cl_command_queue queue, cl_event *event);

/* A reusable GEMM: the descriptor checked and its configuration resolved once, then executed on
 * any buffers that fit it (each execute checks them as tsr_matmul does). A plan keeps the
 * configuration it was made with: a later tsr_config_override or tuning does not change it (make a
 * new plan for that). It holds its device: tsr_device_close with plans alive finishes the device's
 * work and marks it closed, but its memory and OpenCL objects live until the last plan is
 * destroyed, and an execute after the close fails with TSR_ERR_INVALID_ARG ("the plan's device was
 * closed"). A plan is read-only once made: executes on one plan may run concurrently from several
 * threads (the device serializes what it shares). The plan retains the epilogue's bias buffer (checked
 * once, when the plan is made) until it is destroyed. */
typedef struct tsr_matmul_plan tsr_matmul_plan;
TSR_API tsr_status tsr_matmul_plan_create(tsr_device *device, const tsr_matmul_desc *desc, tsr_matmul_plan **plan);
TSR_API tsr_status tsr_matmul_execute(tsr_matmul_plan *plan, cl_mem a, cl_mem b, cl_mem c, cl_command_queue queue,
                                      cl_event *event);
/* Release a plan (and, when it was the last plan of a closed device, the device); NULL is a no-op. */
TSR_API void tsr_matmul_plan_destroy(tsr_matmul_plan *plan);

/* CLBlastSgemm, argument for argument, so CLBlast's callers can swap calls: tsr_matmul on fp32
 * operands with no epilogue, except that every value is literal (layout 0, a leading dimension of
 * 0 and batch_count 0 are refused, as CLBlast does) and offsets and leading dimensions count floats. */
TSR_API tsr_status tsr_sgemm(tsr_device *device, tsr_layout layout, tsr_transpose trans_a, tsr_transpose trans_b,
                     size_t m, size_t n, size_t k, float alpha,
                     cl_mem a, size_t a_offset, size_t lda,
                     cl_mem b, size_t b_offset, size_t ldb, float beta,
                     cl_mem c, size_t c_offset, size_t ldc,
                     cl_command_queue queue, cl_event *event);

/* CLBlastSgemmStridedBatched: batch_count independent GEMMs; matrix i starts at offset + i * stride. */
TSR_API tsr_status tsr_sgemm_strided_batched(tsr_device *device, tsr_layout layout, tsr_transpose trans_a,
                                     tsr_transpose trans_b, size_t m, size_t n, size_t k, float alpha,
                                     cl_mem a, size_t a_offset, size_t lda, size_t a_stride,
                                     cl_mem b, size_t b_offset, size_t ldb, size_t b_stride, float beta,
                                     cl_mem c, size_t c_offset, size_t ldc, size_t c_stride,
                                     size_t batch_count, cl_command_queue queue, cl_event *event);

/* An elementwise GELU: y[y_offset + i] = GELU(x[x_offset + i]) for i < n, x stored as x_type and
 * y as y_type (any pair of TSR_F32, TSR_F16, TSR_BF16; zero: fp32). Offsets count elements of each
 * one's type; buffer sizes are checked in those elements. */
typedef struct tsr_gelu_desc {
    tsr_gelu_mode mode;
    size_t n;               /* at least 1 */
    tsr_dtype x_type, y_type;
    size_t x_offset, y_offset;
} tsr_gelu_desc;

/* The GELU above in one pass over memory. Both forms are computed without cancellation or
 * overflow: GELU(+Inf) = +Inf, GELU(-Inf) = -0, GELU(x) = -0 for x < -20 (the exact value is below
 * fp32's range), NaN propagates. Loads widen to fp32, GELU runs in fp32, and the store rounds to
 * y_type (nearest even; a 16-bit y holds NaN as NaN, +-Inf as +-Inf, and an f16 y turns results
 * beyond 65504 into Inf). In place only when x and y are the same bytes and the same type (x == y,
 * equal offsets); any other overlap (across types too) is refused with the byte ranges. Accuracy
 * against a double-precision reference: |error| <= 1e-6 * max(1, |x|) for an fp32 y, plus y's own
 * rounding u |GELU(x)| with u = 2^-11 (f16) or 2^-8 (bf16) and, for a 16-bit y, (1 + u) 2^-13 *
 * max(1, |x|): on AVX-512 CPUs the value a 16-bit y rounds is computed to the accuracy y keeps
 * (see docs/gelu.md, docs/dtypes.md "Error bounds"). An invalid type is
 * TSR_ERR_INVALID_ARG naming x or y. */
TSR_API tsr_status tsr_gelu(tsr_device *device, const tsr_gelu_desc *desc, cl_mem x, cl_mem y, cl_command_queue queue,
                            cl_event *event);

/* The same result the way a naive framework computes it, for comparison: one kernel per
 * elementary operation (tanh form: x^3, *0.044715, +x, *sqrt(2/pi), tanh, +1, *x, *0.5;
 * erf form: *1/sqrt(2), erf, +1, *x, *0.5), each intermediate written to a temporary in
 * global memory. Same descriptor and checks as tsr_gelu, fp32 only (a 16-bit x_type or y_type is
 * TSR_ERR_UNSUPPORTED naming it). */
TSR_API tsr_status tsr_gelu_unfused(tsr_device *device, const tsr_gelu_desc *desc, cl_mem x, cl_mem y,
                                    cl_command_queue queue, cl_event *event);

/* ------------------------------------------------------------------ attention */

/* O = softmax(scale * Q K^T + mask) V per batch entry b and head h. Tensors hold rows of
 * head_dim values (fp32 unless q_type .. o_type below say otherwise), element (b, h, row, d)
 * at offset + b*stride[0] + h*stride[1] + row*stride[2] + d; all-zero strides mean contiguous
 * [B, H, L, D]. For the [B, L, H, D] layout that projections produce, use strides
 * {L*H*D, D, H*D}.
 * Mask: key j is visible to query i when j < kv_lengths[b] (all keys if kv_lengths is NULL)
 * and, if causal, j <= i + (kv_len - q_len) (decoding with a KV cache). A query row that
 * sees no key gets O = 0 (and LSE = -inf), not NaN; a NaN among the scores a row sees (a NaN in
 * its query, or in a key it sees) makes its O and LSE NaN, as the softmax's definition does (and
 * NumPy and PyTorch). Q, K and V may share memory (a packed QKV buffer); O and lse may not
 * overlap any tensor: their spans, from the first to the last element, must be disjoint from
 * every other span (sub-buffers are resolved to their parent). */
typedef struct tsr_attention_desc {
    size_t batch, heads, q_len, kv_len, head_dim; /* head_dim 1..256 */
    size_t q_offset, k_offset, v_offset, o_offset;
    size_t q_strides[3], k_strides[3], v_strides[3], o_strides[3]; /* {batch, head, row}; zeros: contiguous */
    float scale;                 /* 0: 1/sqrt(head_dim) */
    bool causal;
    const int *kv_lengths;       /* host array of `batch` valid key counts (0..kv_len), NULL: all */
    cl_mem lse;                  /* optional: per-row log-sum-exp of the scaled, masked scores, [B, H, q_len] */
    size_t lse_offset;
    /* Storage types of Q, K, V and O, any combination (zero: fp32 throughout, the layout of
     * callers written before these fields). Offsets and strides count elements of each tensor's
     * own type; lse stays fp32. Loads widen to fp32, every sum and the softmax are fp32, O is
     * rounded to nearest even once. Q, K and V may share a packed buffer only when of one type. */
    tsr_dtype q_type, k_type, v_type, o_type;
} tsr_attention_desc;

/* Blocked (flash-style) attention: never materializes the q_len x kv_len scores. */
TSR_API tsr_status tsr_attention(tsr_device *device, const tsr_attention_desc *desc, cl_mem q, cl_mem k, cl_mem v,
                                 cl_mem o, cl_command_queue queue, cl_event *event);

/* The unfused baseline: S = scale Q K^T (tessera GEMM, batched over heads), a row softmax
 * with the same mask, O = P V (tessera GEMM). Needs heads*q_len*kv_len floats of workspace,
 * whose size in bytes tsr_attention_unfused_workspace_bytes reports (SIZE_MAX when it
 * overflows, 0 for a NULL descriptor). Same arguments and results. */
TSR_API tsr_status tsr_attention_unfused(tsr_device *device, const tsr_attention_desc *desc, cl_mem q, cl_mem k,
                                         cl_mem v, cl_mem o, cl_command_queue queue, cl_event *event);
TSR_API size_t tsr_attention_unfused_workspace_bytes(const tsr_attention_desc *desc);

/* ------------------------------------------------------------------ convolution */

/* How tsr_conv2d computes. */
typedef enum tsr_conv_algo {
    TSR_CONV_AUTO = 0,     /* the path tuned (or built in) for the layer's problem class */
    TSR_CONV_IM2COL = 1,   /* im2col into a workspace, then tessera's GEMM with the bias/activation
                              epilogue (1x1 stride-1 unpadded layers skip the im2col: x is the matrix) */
    TSR_CONV_IMPLICIT = 2, /* implicit GEMM: the im2col indexing folded into the GEMM's tile loads,
                              no caller workspace (on CPUs a padded layer's input may be copied into
                              zero-padded planes in tessera's own workspace, chunk by chunk; where
                              that cannot be had, the form without the copy runs) */
    TSR_CONV_DIRECT = 3    /* a naive direct convolution, one work-item per output: the baseline */
} tsr_conv_algo;

/* How a 4-D activation tensor is laid out in memory: NCHW is [batch][channels][height][width]
 * (PyTorch's default, tsr_conv2d's default), NHWC is [batch][height][width][channels] (PyTorch's
 * channels_last). */
typedef enum tsr_tensor_layout { TSR_NCHW = 0, TSR_NHWC = 1 } tsr_tensor_layout;

/* A 2-D convolution (cross-correlation, as deep-learning frameworks define it), in the
 * layouts of PyTorch and CLBlastSconvgemm: x is NCHW [batch][in_channels][in_height][in_width],
 * w is OIHW [out_channels][in_channels / groups][kernel_h][kernel_w], y is NCHW
 * [batch][out_channels][out_h][out_w] with out_h = (in_height + 2 pad_h - dilation_h (kernel_h - 1)
 * - 1) / stride_h + 1 (likewise out_w), and
 *   y[n][k][i][j] = act(scale[k] sum[n][k][i][j] + bias[k] + residual[n][k][i][j])
 *   sum[n][k][i][j] = sum_{c,r,s} w[k][c][r][s] x[n][g Cg + c][i stride_h - pad_h + r dilation_h]
 *                                                          [j stride_w - pad_w + s dilation_w]
 * with g = k / (out_channels / groups), Cg = in_channels / groups, and positions outside the
 * input reading as zero. The epilogue (scale, bias, residual, act: see tsr_epilogue) is fused into
 * the convolution's one pass over y on every path: a BatchNorm in inference is folded into scale
 * and bias at load time (scale = gamma / sqrt(var + eps), bias = beta - mean scale), a ResNet
 * skip connection is the residual. Zero-initialised fields take defaults: stride, dilation and
 * groups 0 mean 1; algo 0 is TSR_CONV_AUTO; a zero epilogue is none. */
typedef struct tsr_conv2d_desc {
    size_t batch, in_channels, in_height, in_width;
    size_t out_channels, kernel_h, kernel_w;
    size_t stride_h, stride_w;
    size_t pad_h, pad_w;           /* zeros added on each side */
    size_t dilation_h, dilation_w;
    size_t groups;                 /* divides in_channels and out_channels; = in_channels: depthwise */
    /* The epilogue, per output channel k: scale (out_channels fp32 values at epilogue.scale_offset;
     * NULL: 1), bias (likewise at epilogue.bias_offset; NULL: 0), residual (NULL: none; a tensor of
     * y's shape [batch][out_channels][out_h][out_w] at epilogue.residual_offset, counted in elements
     * of epilogue.residual_type, any storage type) and the activation. epilogue.bias_stride and
     * epilogue.scale_stride must be 0. The residual may be y itself (the same buffer, offset and
     * type: every element is read before it is written, by the same work-item); any other overlap
     * with y, and any with x or w, is refused, as are a scale, bias or residual too small for it
     * and a residual_type outside tsr_dtype. */
    tsr_epilogue epilogue;
    size_t x_offset, w_offset, y_offset; /* in elements of each tensor's own type */
    tsr_conv_algo algo;
    cl_mem workspace;              /* TSR_CONV_IM2COL's column matrices; NULL: tessera's own (kept per device) */
    size_t workspace_bytes;        /* usable bytes of `workspace` from its start */
    /* Storage types of x, w and y, any combination (0: fp32). Loads widen to fp32, the sum
     * accumulates in fp32 and y is rounded to nearest even on its store; the bias stays fp32. */
    tsr_dtype x_type, w_type, y_type;
    /* How x, y and the epilogue's residual lie in memory (0: TSR_NCHW, the layout above; TSR_NHWC:
     * x [batch][in_height][in_width][in_channels], y and the residual [batch][out_h][out_w]
     * [out_channels]); w stays OIHW. NHWC is computed in NCHW: x (and a residual) are transposed into
     * temporaries, and the result back into y, one extra read and write of each per call. */
    tsr_tensor_layout layout;
} tsr_conv2d_desc;

/* The output height and width of a descriptor, or an error naming what is wrong with it. */
TSR_API tsr_status tsr_conv2d_output_size(const tsr_conv2d_desc *desc, size_t *out_h, size_t *out_w);

/* Workspace the call would use with its path (the one TSR_CONV_AUTO picks on this device when
 * desc->algo is AUTO): *bytes is what tessera would take itself (column matrices for as many
 * images as it processes at once), *min_bytes (may be NULL) the least a caller-supplied
 * workspace may hold (one image's column matrices; a smaller batch chunk means more GEMM
 * launches). Both are 0 when the path needs none. The column matrices are fp32 whatever the
 * storage types (the GEMM reads them as its fp32 operand), so 16-bit layers need as many bytes. */
TSR_API tsr_status tsr_conv2d_workspace_size(tsr_device *device, const tsr_conv2d_desc *desc, size_t *bytes,
                                             size_t *min_bytes);

/* y = act(scale conv2d(x, w) + bias + residual), the epilogue from desc->epilogue. Every size and
 * buffer is checked before anything is enqueued; a rejected call writes nothing. */
TSR_API tsr_status tsr_conv2d(tsr_device *device, const tsr_conv2d_desc *desc, cl_mem x, cl_mem w, cl_mem y,
                              cl_command_queue queue, cl_event *event);

/* ------------------------------------------------------------------------- pooling */

/* The reduction a pooling window applies. */
typedef enum tsr_pool_kind { TSR_POOL_MAX = 0, TSR_POOL_AVG = 1 } tsr_pool_kind;

/* 2-D max or average pooling, exactly PyTorch's max_pool2d / avg_pool2d (divisor_override aside):
 * output (oh, ow) of channel c of image n reduces x over the window rows
 *   ih = oh * stride_h - pad_h + i * dilation_h, i < kernel_h
 * (columns alike), positions outside the input being padding. Max ignores padding (a window
 * without an input element, possible only with dilation, gives -Inf, as PyTorch) and propagates
 * NaN (a NaN anywhere in the window gives NaN). Average divides the sum of the window's input
 * elements by the window's size clipped to the padded input [-pad, in + pad)
 * (PyTorch's count_include_pad, the default here: padded zeros count, the ceil-mode overhang past
 * the padding does not) or, with exclude_pad, by the number of input elements in the window.
 * Output size (tsr_pool2d_output_size): out = floor((in + 2 pad - dilation (kernel - 1) - 1) /
 * stride) + 1, rounded up instead with ceil_mode, where a last window that would start past the
 * input and its left padding (at or beyond in + pad) is dropped; out must be at least 1.
 * Global average pooling is kernel = in_height x in_width (stride and padding 0): it runs as one
 * reduction per (n, c). x holds batch x channels x in_height x in_width elements from x_offset, y
 * batch x channels x out_h x out_w from y_offset, both in `layout`. Zero fields take defaults. */
typedef struct tsr_pool2d_desc {
    tsr_pool_kind kind;
    tsr_tensor_layout layout; /* 0: TSR_NCHW; x and y share it */
    size_t batch, channels, in_height, in_width; /* each at least 1 */
    size_t kernel_h, kernel_w;                   /* each at least 1 */
    size_t stride_h, stride_w;                   /* 0: the kernel size (PyTorch's default) */
    size_t pad_h, pad_w;                         /* at most half the kernel (kernel / 2), as PyTorch */
    size_t dilation_h, dilation_w;               /* 0: 1; average pooling refuses anything but 1 */
    int ceil_mode;         /* nonzero: round the output size up (PyTorch's ceil_mode) */
    int exclude_pad;       /* average: 0 counts padded zeros in the divisor (PyTorch's default,
                            * count_include_pad=True); nonzero leaves them out; max ignores it */
    size_t x_offset, y_offset; /* in elements of each tensor's type */
    tsr_dtype x_type, y_type;  /* 0: fp32; f16 and bf16 storage, any combination (fp32 arithmetic) */
} tsr_pool2d_desc;

/* The output's height and width for the descriptor (with its defaults); every rule of tsr_pool2d
 * that needs no buffer is checked (TSR_ERR_INVALID_ARG naming the field, TSR_ERR_OVERFLOW for
 * sizes whose products overflow). */
TSR_API tsr_status tsr_pool2d_output_size(const tsr_pool2d_desc *desc, size_t *out_h, size_t *out_w);

/* The pooling above on the device. y may not overlap x (compared as byte spans, sub-buffers
 * resolved to their parent), and both are checked against their real buffer sizes before anything
 * is enqueued. Max is exact in any storage (y rounded once to its type); average sums in fp32,
 * within 2^-24 sqrt(window) relative of a double-precision reference plus y's own rounding.
 * Windows run vectorized along the contiguous dimension (width in NCHW, channels in NHWC); the
 * vector width and the global reduction's work-group size are the op "pool2d"'s tuned
 * configuration (classes "window" and "global", with their 16-bit twins). */
TSR_API tsr_status tsr_pool2d(tsr_device *device, const tsr_pool2d_desc *desc, cl_mem x, cl_mem y,
                              cl_command_queue queue, cl_event *event);

/* ------------------------------------------------------------ transformer layers */

/* LayerNorm over rows, with an optional residual added first (a transformer's Add & Norm):
 *   s = x[row] + residual[row]   (residual NULL: s = x[row])
 *   y[row][j] = (s[j] - mean(s)) / sqrt(var(s) + eps) * gamma[j] + beta[j]
 * for row < rows and j < cols, with the biased variance (divided by cols), as PyTorch's
 * LayerNorm. Row r of x starts at x[x_offset + r * x_stride] (likewise residual and y); gamma and
 * beta are cols fp32 values at their offsets. Offsets and strides count elements of each tensor's
 * own type. Zero-initialised fields take defaults: strides 0 mean cols (contiguous rows), types 0
 * mean fp32. */
typedef struct tsr_layernorm_desc {
    size_t rows, cols; /* each at least 1 */
    float eps;         /* added to the variance: > 0 and finite (BERT uses 1e-12, PyTorch's default is 1e-5) */
    size_t x_offset, residual_offset, gamma_offset, beta_offset, y_offset;
    size_t x_stride, residual_stride, y_stride; /* elements between rows: 0 or at least cols */
    /* Storage of x, residual and y (any combination of TSR_F32, TSR_F16, TSR_BF16; gamma and beta
     * are fp32). residual_type and residual_stride are not read when residual is NULL. */
    tsr_dtype x_type, residual_type, y_type;
} tsr_layernorm_desc;

/* The fused LayerNorm above: one pass of work-groups over the rows, each row read from global
 * memory once (its sums of s and of (s - mean)^2 are two passes over it in the caches: the
 * two-pass variance, never E[s^2] - mean^2), all arithmetic in fp32, y rounded to its type once.
 * s is rounded to fp32 first (x + residual beyond FLT_MAX is Inf, and its row NaN, as in any fp32
 * framework); every row whose s is finite works, whatever its magnitude (1e-38 to FLT_MAX): the
 * mean, variance and eps are taken on s scaled by a power of two that brings max|s| near 1, so no
 * sum or square overflows or underflows (on a device that flushes fp32 subnormals, values below
 * FLT_MIN read as 0).
 * y may be exactly x or exactly residual (same buffer, offset, stride and type: in place, as a
 * transformer layer wants); any other overlap of y with x, residual, gamma or beta (compared as
 * byte spans from a tensor's first to its last element, sub-buffers resolved to their parent) is
 * refused. Every size is checked against the real buffers before anything is enqueued.
 * Accuracy against a double-precision reference from the same stored inputs, for any such row: for
 * fp32 y, |y - ref| <= 2^-24 (32 + 4 sqrt(cols)) (|gamma| max|s| / sd + |beta| + |ref|) + 2^-150
 * per element, sd = sqrt(var + eps) (see docs/layernorm.md); a 16-bit y adds its own rounding
 * (u(y) |ref|, and half its smallest subnormal in place of 2^-150). The work-group,
 * rows per group and vector width are the op "layernorm"'s tuned configuration (classes by cols). */
TSR_API tsr_status tsr_layernorm(tsr_device *device, const tsr_layernorm_desc *desc, cl_mem x, cl_mem residual,
                                 cl_mem gamma, cl_mem beta, cl_mem y, cl_command_queue queue, cl_event *event);

/* BERT's embedding sum, a gather: for token t < tokens,
 *   y[t][j] = word[ids[t]][j] + position[position_start + t % seq_len][j] + token_type[type_ids[t]][j]
 * for j < hidden. The tables are row-major, all three of table_type (0: fp32; f16 or bf16 are
 * widened to fp32 in registers) with `hidden` values a row: word holds vocab rows at word_offset,
 * position max_positions rows at position_offset, token_type type_vocab rows at
 * token_type_offset (offsets in elements of table_type). Row t of y starts at
 * y[y_offset + t * y_stride] (y_stride 0: hidden), stored as y_type (0: fp32; the sum is fp32,
 * rounded once to nearest even). */
typedef struct tsr_embedding_desc {
    size_t tokens;      /* batch * seq_len rows of y, at least 1 */
    size_t seq_len;     /* positions restart every seq_len tokens; at least 1 */
    size_t hidden;      /* columns, at least 1 */
    size_t vocab;       /* rows of word; ids must lie in 0..vocab-1 */
    size_t max_positions; /* rows of position; position_start + min(tokens, seq_len) - 1 must be below it */
    size_t type_vocab;  /* rows of token_type; type ids must lie in 0..type_vocab-1 */
    size_t position_start; /* the position of each sequence's first token (0 for BERT) */
    size_t word_offset, position_offset, token_type_offset, y_offset, y_stride;
    tsr_dtype y_type;
    tsr_dtype table_type; /* the three tables' storage type (0: fp32) */
} tsr_embedding_desc;

/* The gather above. ids (tokens values) and type_ids are HOST arrays, as a tokenizer makes them:
 * every id is checked on the host (an id outside 0..vocab-1, a type id outside 0..type_vocab-1
 * or a position at or past max_positions is TSR_ERR_INVALID_ARG naming the token index and the
 * value, and nothing is enqueued), then copied (a blocking write) into a device scratch buffer
 * tessera owns per device, so the arrays may be reused as soon as the call returns. position and
 * token_type may be NULL: that term is left out (max_positions, type_vocab and their offsets are
 * then not read). type_ids NULL with a token_type table means type 0 for every token. y may not
 * overlap a table (compared in bytes, whatever the two types); every table and y is checked
 * against its real buffer size; an invalid y_type or table_type is TSR_ERR_INVALID_ARG. A plain call, not a
 * tuned op: a gather has nothing worth tuning (one work-item per column slice of a token). */
TSR_API tsr_status tsr_embedding(tsr_device *device, const tsr_embedding_desc *desc, const int32_t *ids,
                                 const int32_t *type_ids, cl_mem word, cl_mem position, cl_mem token_type, cl_mem y,
                                 cl_command_queue queue, cl_event *event);

/* ------------------------------------------------------------------ several devices */

/* A group of open devices that share one call between them (tensor parallelism in one process):
 * a GPU and the CPU, two GPUs, or PoCL's pthread and basic devices. Devices may come from
 * different platforms, so the group's calls take HOST arrays: each device receives only the
 * operands of its tiles. The group holds three queues and its transfer buffers per device; the
 * caller keeps the devices, which must stay open until tsr_group_destroy. */
typedef struct tsr_device_group tsr_device_group;

/* A group of `count` devices (the same device twice is allowed: two streams of work on it). A
 * warning (tsr_last_warning) says when members compete for one processor: the same device twice,
 * or CPU devices with more compute units between them than the host has processors. */
TSR_API tsr_status tsr_group_create(tsr_device *const *devices, size_t count, tsr_device_group **group);
/* Release the group's queues and buffers (not its devices); NULL is a no-op. */
TSR_API void tsr_group_destroy(tsr_device_group *group);
/* Devices in the group (0 for NULL). */
TSR_API size_t tsr_group_size(const tsr_device_group *group);
/* Fix the share of work each device gets: weights[i] >= 0 (finite, at least one positive) is
 * device i's relative rate; a device with weight 0 takes no work (every unit goes to a device of
 * positive weight, however few units a call has). NULL goes back to measured rates:
 * each call splits by the rates the group measured on its earlier calls of the same problem class,
 * else by the tuning database's rates for that class when every device has a tuned entry, else
 * equally, and measures the rates for the next call (not from a device that compiled kernels
 * during the call: that time says nothing about its rate). */
TSR_API tsr_status tsr_group_set_weights(tsr_device_group *group, const double *weights);

/* A tile of a group call: units [first, first + count) computed on device `device` by one
 * single-device call (tsr_sgemm, tsr_sgemm_strided_batched or tsr_attention) on copies of that tile's
 * operands, so its result is bitwise what that device gives for the tile alone. Units are rows of C
 * (in the row-major view: columns of a TSR_COL_MAJOR C) for a single tsr_matmul_multi product,
 * batch entries for a batched one, and (batch, head) pairs b * heads + h for tsr_attention_multi. */
typedef struct tsr_group_tile {
    size_t device;
    size_t first, count;
} tsr_group_tile;

typedef struct tsr_group_device_stats {
    double weight;   /* the share of units the split planned for the device, 0..1 */
    size_t units;    /* units it computed (a device that runs out of work takes tiles from the back
                      * of the share that would finish last) */
    size_t tiles;
    double busy_s;   /* from its first upload to its last result on the host */
    double gflops;   /* its units' flops / busy_s: the rate the next call's split uses */
} tsr_group_device_stats;

typedef struct tsr_group_stats {
    double seconds;           /* the whole call, checks to results */
    const char *weights_from; /* "given", "measured", "tuning database", "equal" ("none" before a call) */
    size_t tile_count;
    const tsr_group_tile *tiles;            /* valid until the group's next call or destruction */
    const tsr_group_device_stats *devices;  /* tsr_group_size entries, same lifetime */
} tsr_group_stats;

/* What the group's last call did. After a failed call: only the tiles whose results reached the
 * output in full (the units it wrote), with each device's units and tiles of them; every other field
 * zero. */
TSR_API tsr_status tsr_group_last_stats(tsr_device_group *group, tsr_group_stats *stats);

/* tsr_matmul over host arrays, split across the group: by rows of C (in the row-major view: columns
 * of a TSR_COL_MAJOR C) for one product, by batch entries for a batch (batch > 1; an operand with
 * batch_stride 0 is uploaded once per device). desc as for tsr_matmul, checked by the same code,
 * with offsets counting floats of these arrays; every type must be fp32 and the epilogue zero
 * (TSR_ERR_UNSUPPORTED naming the operand or the epilogue otherwise); no NULL array; no memory
 * shared between C and A or B where those are read (k > 0 and alpha != 0). Every device works
 * through its share two tiles at a time (the next tile's upload overlaps the current tile's GEMM,
 * and its result is read back into C while the next one runs). Every argument is checked before
 * anything runs, and a refused call writes nothing; a device failing mid-call stops the others and
 * names itself in the error, which then says exactly which rows of C (batch entries, for a batch)
 * were written (tiles whose results had reached C in full: tsr_group_last_stats lists them), which
 * may be partly written (a tile whose reads back failed, rare), and that every other row is as it
 * was; the attention call says the same of (batch, head) pairs. Host arrays cannot be size-checked:
 * they must hold what the sizes say. One call at a time per group (others wait). */
TSR_API tsr_status tsr_matmul_multi(tsr_device_group *group, const tsr_matmul_desc *desc, const float *a,
                                    const float *b, float *c);

/* tsr_attention over host fp32 arrays, split by heads: desc as for tsr_attention, with its rules
 * (offsets and strides in floats of these arrays; kv_lengths a host array), except that every type
 * must be fp32 (0; a value outside the enum is TSR_ERR_INVALID_ARG) and lse NULL
 * (TSR_ERR_UNSUPPORTED otherwise), and rows must not overlap (row stride >= head_dim). A tile
 * holds heads of one batch entry. */
TSR_API tsr_status tsr_attention_multi(tsr_device_group *group, const tsr_attention_desc *desc, const float *q,
                                       const float *k, const float *v, float *o);

/* Names of the ops this build provides, NULL-terminated. */
TSR_API const char *const *tsr_op_names(void);

/* Run op `op_name` once on random data with its built-in configuration and check
 * it against a double-precision host reference; `summary` receives one line
 * (time, rate, error). */
TSR_API tsr_status tsr_run_demo(tsr_device *device, const char *op_name, char *summary, size_t summary_size);

/* ------------------------------------------------------------------ graphs */

/* A recorded launch sequence (docs/graph.md). Between tsr_graph_begin and tsr_graph_end, the op
 * calls the calling thread makes on `device` run as always and each of their kernel launches is
 * also recorded: its own kernel object with every argument set once, its work sizes, and a
 * reference to every buffer it reads or writes (tessera's workspaces included). A replay
 * (tsr_graph_launch) enqueues the recorded kernels in order and nothing else: no configuration
 * look-up, no argument setting, no allocation, so it costs a few microseconds per kernel; it
 * reads whatever the recorded buffers hold at the time, so new input written into the same
 * buffers gives new results. An op that reads host memory or waits on the host at call time
 * cannot be replayed: under a recording, tsr_embedding and the device-group calls
 * (tsr_matmul_multi, tsr_attention_multi) fail with TSR_ERR_UNSUPPORTED naming the op, and the
 * recording is then invalid (tsr_graph_end reports it). Host transfers the caller makes itself
 * (clEnqueueWriteBuffer...) are not tessera calls and are not recorded. Other threads' calls are
 * not recorded. */
typedef struct tsr_graph tsr_graph;

/* Options of a recording; a NULL descriptor takes the defaults. */
typedef struct tsr_graph_desc {
    const char *name; /* names the graph in messages (at most 63 characters); NULL: "graph" */
} tsr_graph_desc;

/* Start recording on the calling thread (one recording per thread at a time: a second
 * tsr_graph_begin before tsr_graph_end is TSR_ERR_INVALID_ARG). */
TSR_API tsr_status tsr_graph_begin(tsr_device *device, const tsr_graph_desc *desc);

/* Stop the calling thread's recording and hand out the graph in *out (NULL on failure). A
 * recording in which an op was refused, a launch could not be recorded (a kernel argument the
 * call did not set, a launch on another device) or the device's configuration changed (see
 * tsr_graph_launch) fails here with that reason, and no graph is made. */
TSR_API tsr_status tsr_graph_end(tsr_device *device, tsr_graph **out);

/* Replay `graph` on `queue` (NULL: the device's queue, which must belong to the graph's device's
 * context); `event` (may be NULL) receives the event of its last launch. On an in-order queue the
 * launches are enqueued back to back; on an out-of-order queue a barrier orders the first after
 * everything enqueued before, and each launch waits for the event of the one before. A replay waits for the previous replay of the same graph when it runs on another
 * queue, and for the last user of each tessera workspace it reads, so replays from several
 * threads run one after the other (one replay enqueues at a time). The device's configuration
 * generation is recorded: after tsr_config_override, a re-tune or a dropped program binary a
 * replay fails with TSR_ERR_INVALID_ARG ("re-record"); after tsr_device_close it fails with
 * TSR_ERR_INVALID_ARG; so it does ("record the graph again"), enqueueing nothing, when it reads
 * data kept for a buffer marked constant (a GEMM's strips of B, tsr_buffer_set_constant) and
 * that buffer changed or was unmarked since the recording. */
TSR_API tsr_status tsr_graph_launch(tsr_graph *graph, cl_command_queue queue, cl_event *event);

/* How many kernel launches `graph` holds and how many buffers it keeps (either may be NULL). */
TSR_API tsr_status tsr_graph_info(const tsr_graph *graph, size_t *launches, size_t *buffers);

/* Release a graph: its kernels and its references to buffers (a graph keeps every buffer it uses
 * alive, retained, until it is destroyed, even one its owner released or a workspace that grew
 * since) and its hold on the device (a closed device is freed when its last graph or plan goes).
 * NULL is a no-op. */
TSR_API void tsr_graph_destroy(tsr_graph *graph);

/* ------------------------------------------------------------------ tuning */

/* Where a launch's configuration comes from, best first (the two overrides rank together: an
 * op has at most one, the environment's until tsr_config_override replaces or clears it). */
typedef enum tsr_config_source {
    TSR_CONFIG_ENV_OVERRIDE = 1,     /* $TSR_CONFIG_<OP>, as read when the device was opened */
    TSR_CONFIG_TUNED = 2,            /* the tuning database: this device, driver and kernel source */
    TSR_CONFIG_TUNED_OTHER_DRIVER = 3, /* the tuning database: this device under another driver */
    TSR_CONFIG_TUNED_SAME_VENDOR = 4,  /* the tuning database: another device of this platform, vendor and type */
    TSR_CONFIG_BUILTIN_TUNED = 5,    /* tuned results shipped with tessera for a matching device */
    TSR_CONFIG_BUILTIN_DEFAULT = 6,  /* tessera's built-in default for the device type */
    TSR_CONFIG_API_OVERRIDE = 7      /* set through tsr_config_override */
} tsr_config_source;

/* A configuration source in words ("tuned on this device", ...); never NULL. */
TSR_API const char *tsr_config_source_str(tsr_config_source source);

typedef struct tsr_config_info {
    char op[32];
    char problem_class[32];  /* the class asked for */
    char used_class[32];     /* the class whose entry was used (a nearby one if that had none) */
    char config[256];        /* "MWI=6 VW=16 ..." */
    tsr_config_source source;
    char origin[768];        /* in words: which entry, and what was passed over and why */
    double tuned_gflops;     /* measured when tuned; 0 for defaults */
    /* Tuned entries passed over because their kernel source changed since they were tuned
     * (stale; 0 for overrides). With TSR_CONFIG_BUILTIN_DEFAULT and a count above 0 the device
     * runs untuned only because its tuning is stale: a re-tune (which starts from those entries)
     * brings it back. */
    int stale_passed_over;
} tsr_config_info;

/* The configuration op `op` uses on this device for a problem class, and where it comes from. */
TSR_API tsr_status tsr_config_lookup(tsr_device *device, const char *op, const char *problem_class,
                                     tsr_config_info *info);

/* Override the configuration op `op` launches with on this device, for every problem class:
 * `config_text` names parameters over each class's default ("MWI=6 VW=16 ...", the syntax of
 * $TSR_CONFIG_<OP>, which is read when the device opens and is only the initial override); NULL
 * or "" clears the override, the environment's included, so launches go back to the tuning
 * database and the defaults. For experiments and tests. TSR_ERR_NOT_FOUND for an unknown op,
 * TSR_ERR_INVALID_ARG for an unknown parameter or a value outside the parameter space,
 * TSR_ERR_UNSUPPORTED for a configuration this device cannot run; a launch whose own class or
 * problem rules the configuration out fails with TSR_ERR_UNSUPPORTED. tsr_config_lookup
 * reports it as TSR_CONFIG_API_OVERRIDE. */
TSR_API tsr_status tsr_config_override(tsr_device *device, const char *op, const char *config_text);

/* The problem class and configuration a GEMM plan launches with (fixed when it was made), and
 * where that comes from. */
TSR_API tsr_status tsr_matmul_plan_info(const tsr_matmul_plan *plan, tsr_config_info *info);

/* The path and configuration TSR_CONV_AUTO uses for this layer, and where that comes from. */
TSR_API tsr_status tsr_conv2d_plan(tsr_device *device, const tsr_conv2d_desc *desc, tsr_conv_algo *algo,
                                   tsr_config_info *info);

/* Names of an op's problem classes, NULL-terminated (NULL for an unknown op). */
TSR_API const char *const *tsr_op_classes(const char *op);

typedef enum tsr_tune_strategy {
    TSR_TUNE_EXHAUSTIVE = 1, /* every legal configuration (small spaces) */
    TSR_TUNE_RANDOM = 2,     /* uniform samples without repetition */
    TSR_TUNE_ANNEAL = 3,     /* simulated annealing from the current best-known configuration */
    TSR_TUNE_CLIMB = 4       /* best-first hill climbing over one-step neighbours from the default */
} tsr_tune_strategy;

typedef struct tsr_tune_progress {
    const char *op;
    const char *problem_class;
    const char *unit;        /* of best_gflops: "GFLOP/s", or "GB/s" for memory-bound ops */
    int evaluated;           /* candidates tried in this class */
    int planned;             /* candidates the budget allows (an estimate under a time budget) */
    double best_gflops;
    double elapsed_s;        /* in this class */
    double eta_s;            /* for the whole op */
} tsr_tune_progress;

typedef struct tsr_tune_options {
    tsr_tune_strategy strategy;  /* 0: anneal */
    double budget_seconds;       /* for the whole op, split evenly over its classes; 0: 88 s. For
                                  * "all": for every op's classes together; 0: 150 s */
    int budget_evaluations;      /* per class; 0: no limit besides time */
    uint64_t seed;               /* 0: from the clock */
    const char *space;           /* restrict the space, e.g. "MWI=4,6 VW=8,16"; NULL: the op's space */
    const char *classes;         /* comma-separated classes to tune; NULL: the op's fp32 classes (a 16-bit
                                  * class such as "large-f16" uses its fp32 class's entry until named here) */
    const char *db_path;         /* NULL: $TSR_TUNING_DB or the default path */
    bool dry_run;                /* measure but do not write the database */
    const char *log_path;        /* append one JSON line per evaluated candidate (NULL: none) */
    void (*progress)(const tsr_tune_progress *progress, void *user);
    void *user;
} tsr_tune_options;

typedef struct tsr_tune_result {
    char op[32];
    char problem_class[32];
    char problem[64];            /* the tuning problem, e.g. "512x512x512" */
    char best_config[256];
    double best_gflops;          /* in `unit` */
    double default_gflops;       /* the built-in default on the same problem */
    char unit[16];               /* "GFLOP/s", or "GB/s" for memory-bound ops (bytes that must move) */
    double best_spread;          /* (max - min) / median of the best candidate's timed runs */
    int evaluated, wrong_results, build_failures, abandoned, launch_failures;
    double seconds;
    /* Entries for this device and class tuned for an older kernel source (stale: lookups pass
     * them over) whose configurations the search started from, after the default. */
    int stale_seeds;
    /* Where `problem` is a smaller problem of the class than its own (a slow device with a small
     * budget: a run of its own would have eaten the class's share), the class's own problem; ""
     * otherwise. The result holds for the class; re-tune with a larger budget for its own problem. */
    char reduced_from[64];
    /* Where the pick beat what the device ran before (its entry, else the built-in default) on
     * `problem` and the class has a second problem (another plane or batch of it), both were run
     * there too: `second_problem` names it ("" when no check was held), `second_gain` is the pick's
     * rate there over the other's, side by side (0: not timed), `second_wrong` says the pick gave a
     * wrong result there, and `kept_before` that the check kept the configuration of before (the
     * pick was wrong there, ran under 0.8x, or gained less over both problems than it lost):
     * best_config is then that one. A check whose duel timed nothing leaves the pick (second_gain 0). */
    char second_problem[64];
    double second_gain;
    int second_wrong, kept_before;
} tsr_tune_result;

/* Tune `op` on this device ("all": every op's classes in one budget, spent first on each class's
 * default and known entries, then where the default is furthest from the best known; `classes`
 * and a restricted `space` then refuse). results (may be NULL) receives up to max_results classes.
 * Unless dry_run, the best configurations are merged into the tuning database
 * (atomically, under a lock; a damaged database is moved aside and reported). */
TSR_API tsr_status tsr_tune(tsr_device *device, const char *op, const tsr_tune_options *options,
                            tsr_tune_result *results, size_t max_results, size_t *nresults);

/* The far end of compiling ahead in another process: `tessera tune` sets $TSR_TUNE_WORKER to itself
 * and starts `tessera tune-worker --device P:D --fd N` children that call this. It writes "ready
 * <platform>\t<device>" on `fd`, then for each line "<op>\t<class>\t<configuration>[\t<step>]" read
 * there (step: a smaller problem of the class, which the tuner measures on slow devices; absent or 0:
 * the class's own) runs that candidate once on `device` (so that the driver compiles it into its kernel cache; nothing is
 * timed or stored) and answers "ok" or "fail <message>", until the end of input (TSR_SUCCESS; a
 * request line over 1023 bytes is answered "fail ..." and skipped). `fd` is one end of a connected stream socket (both
 * directions on one descriptor; anything else fails with "cannot write to fd N"). It ignores
 * SIGPIPE for the rest of the process. Set TSR_TUNE_WORKER to such an executable to give
 * tsr_tune process workers from other programs (docs/tuning.md). */
TSR_API tsr_status tsr_tune_serve(tsr_device *device, int fd);

/* The database path in use: $TSR_TUNING_DB, else $XDG_DATA_HOME/tessera/tuning.json,
 * else ~/.local/share/tessera/tuning.json. */
TSR_API tsr_status tsr_tuning_db_path(char *path, size_t size);

/* Merge the entries of another database file into `db_path` (NULL: the default);
 * per device, op and class the faster current entry wins. *merged counts entries taken. */
TSR_API tsr_status tsr_tuning_db_import(const char *db_path, const char *file, size_t *merged);

/* Write a copy of the database (validated) to `file`. */
TSR_API tsr_status tsr_tuning_db_export(const char *db_path, const char *file);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_H */
