/* The pieces the side-by-side (A/B) bench tools share (bench/conv3x3_ab.c, depthwise_ab.c,
 * conv1x1_gemm.c, conv_weights_ab.c, gemm_dtype_ab.c, embedding_dtype_ab.c): their common
 * options, a variant opened on its own device with its own kernel directory and configuration,
 * per-round arrays and the wall/CPU clock around N calls. `tool` names the program in messages. */
#ifndef TESSERA_BENCH_AB_HARNESS_H
#define TESSERA_BENCH_AB_HARNESS_H

#include "tessera.h"

#include <stdbool.h>
#include <stddef.h>

/* A convolution layer of a network: c in channels of h x h, k out channels, its stride and how
 * often the network runs it. */
typedef struct ab_layer {
    const char *name;
    size_t c, h, k, stride, count;
} ab_layer;

/* The options every tool takes; which of --batch and --layers a tool takes is its `flags`. */
typedef struct ab_opts {
    const char *selector, *list; /* --device SEL, --layers LIST (NULL: the defaults) */
    int rounds, calls;
    size_t batch;
    bool kept; /* --weights kept: the weight buffers marked constant (tsr_buffer_set_constant) */
} ab_opts;
enum { AB_BATCH = 1, AB_LAYERS = 2, AB_WEIGHTS = 4 };

/* When argv[*i] is --device, --rounds, --calls (or, with flags, --batch, --layers) followed by a
 * value: takes it into o, moves *i past it and returns true. */
bool ab_arg(int argc, char **argv, int *i, ab_opts *o, unsigned flags);
/* Rounds, calls and batch in range; otherwise says so ("TOOL: --rounds 1..1000, --calls 1..100000,
 * --batch 1..64") and returns false. */
bool ab_check(const char *tool, const ab_opts *o);
/* Does every name of `list` (comma-separated; NULL or "all": the whole table) name one of the
 * tool's `count` layers (a table of `stride`-byte rows, each beginning with its `const char *name`)?
 * Says which does not, and lists the names: a misspelt or foreign layer measured nothing, silently. */
bool ab_layers_known(const char *tool, const char *list, const void *table, size_t count, size_t stride);

/* One variant: LABEL=DIR|CONFIG, its device (TSR_KERNEL_DIR=DIR, CONFIG overriding `op`) and its
 * per-round wall and CPU microseconds per call. */
typedef struct ab_var {
    char label[64], dir[512], config[256], gemm[256]; /* gemm: the GEMM's override ("": none) */
    tsr_device *dev;
    double *wall, *cpu;
} ab_var;

/* False, and a message naming the tool and flag on stderr, when s holds a character the JSON lines
 * print unescaped: a quote, a backslash or a control character (labels, directories and
 * configurations go into every result line). */
bool ab_json_safe(const char *tool, const char *flag, const char *s);
/* Parses LABEL=DIR|CONFIG[|GEMM] ("builtin": no CONFIG; GEMM: the variant's GEMM configuration,
 * for ops that run GEMMs) into v; says what it takes and returns false when s is not that (or not
 * ab_json_safe). */
bool ab_parse_var(const char *tool, const char *s, ab_var *v);
/* The whole command line of a tool taking [--device SEL] [--rounds N] [--calls N] [--batch N]
 * [--layers LIST] [--var LABEL=DIR|CONFIG]... (at most maxvar --var; none: one "builtin"), its
 * ranges checked: the number of variants, or -1 after saying what is wrong (exit status 2). */
int ab_var_args(const char *tool, int argc, char **argv, ab_opts *o, ab_var *var, int maxvar);
/* Label "builtin", the embedded kernels and no configuration. */
void ab_default_var(ab_var *v);
/* Opens the device `selector` names with TSR_KERNEL_DIR=dir (dir "": unset; NULL: as it is);
 * says "TOOL: device: ..." and returns false when it cannot. */
bool ab_open(const char *tool, const char *selector, const char *dir, tsr_device **dev);
/* Opens each variant's device with its configuration for `op` and its per-round arrays, then
 * unsets TSR_KERNEL_DIR; false (said) on failure. */
bool ab_open_vars(const char *tool, const char *selector, const char *op, ab_var *var, int nvar, int rounds);
/* The closing JSON line: {"rounds": R, "calls": C, "batch": B, "variants": [{label, kernel_dir, config}...]}. */
void ab_print_vars(const ab_opts *o, const ab_var *var, int nvar);
/* Clears the variants' configurations for `op`, closes their devices and frees their arrays. */
void ab_close_vars(const char *op, ab_var *var, int nvar);

/* n pattern values (util_pattern_buffer's) stored as t, converted on the device from fp32; NULL
 * on failure. */
cl_mem ab_typed_pattern(tsr_device *dev, tsr_dtype t, size_t n);

/* rounds doubles each in *wall and *cpu; false when out of memory. */
bool ab_rounds_alloc(int rounds, double **wall, double **cpu);

/* The wall (CLOCK_MONOTONIC) and process CPU clocks, microseconds: ab_start before N calls,
 * ab_per_call after their clFinish gives each per call. */
typedef struct ab_mark {
    double wall, cpu;
} ab_mark;
ab_mark ab_start(void);
void ab_per_call(ab_mark m, int calls, double *wall, double *cpu);


/* A convolution's buffers on one device: util_pattern_buffer's values, nk for bias and scale. */
typedef struct ab_conv_bufs {
    cl_mem x, w, y, bias, scale;
} ab_conv_bufs;
bool ab_conv_bufs_new(tsr_device *dev, size_t nx, size_t nw, size_t ny, size_t nk, ab_conv_bufs *b);
void ab_conv_bufs_release(ab_conv_bufs *b);
/* One variant's round of tsr_conv2d on its device's queue: a warm-up call and clFinish, then
 * `calls` calls back to back and one clFinish; per call wall and CPU microseconds into *wall and
 * *cpu. False (tsr_last_error says why) when a call fails. */
bool ab_time_conv2d(tsr_device *dev, const tsr_conv2d_desc *d, cl_mem x, cl_mem w, cl_mem y, int calls, double *wall,
                    double *cpu);

#endif
