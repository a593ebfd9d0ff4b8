/* The benchmark registry: the one list of `tessera bench` ops. Adding an op's benchmark is its
 * bench file and one line here; the CLI's dispatch, usage and errors read this table. */
#include "bench.h"

#include <string.h>

static const bench_part gelu_parts[] = {{"elementwise", NULL}, {"epilogue", "bias+GELU in GEMM"}, {NULL, NULL}};
static const bench_part conv2d_parts[] = {
    {"layers", NULL}, {"stack", NULL}, {"depthwise", "3x3 depthwise layers (GB/s: x once + weights + y once)"},
    {"block", "a ResNet-50 bottleneck block: BN+residual+ReLU fused vs separate passes"}, {NULL, NULL}};

static const bench_entry registry[] = {
    {"gemm", bench_gemm, "N, MxNxK or B@MxNxK, comma separated",
     "256,512,1024,2048,4096,512x768x768,512x3072x768,512x768x3072,4096x8x4096,8x4096x4096,64@128x128x128", NULL,
     "--clblast-xgemm: CLBlast's Xgemm parameters from its tuner (clblast_tuner_xgemm) instead of defaults"},
    {"gelu", bench_gelu, "N, NK or NM elements", "1M,16M,64M", gelu_parts, NULL},
    {"conv2d", bench_conv2d, "batch sizes", "1,8", conv2d_parts, "--layers: ResNet-50 layer names, all, or mobilenet (MobileNet-V2's depthwise layers); --weights kept (the "
     "default: weight buffers marked constant, their Winograd transform or 16-bit widening made once) or per-call; --forms "
     "chosen: only the path the call takes (and the peers), not each path forced in turn"},
    {"attention", bench_attention, "sequence lengths (B=1 H=8 D=64)", "128,256,512,1024,2048,4096,8192", NULL,
     "--max-unfused: longest L for the unfused pipelines"},
    {"layernorm", bench_layernorm, "ROWSxCOLS shapes (with the residual add)", "512x768,4096x768,4096x1024,16384x384",
     NULL, NULL},
    {"embedding", bench_embedding, "TOKENSxHIDDEN shapes (BERT-base tables: vocab 30522, 512 positions, 2 types)",
     "4096x768,16384x768", NULL, NULL},
    {"pool2d", bench_pool2d, "pooling shapes 'NxCxHxW max|avg kK [sS] [pP] [dD] [ceil] [exclude] [nhwc] [DTYPE]'",
     "1x64x112x112 max k3 s2 p1,8x64x112x112 max k3 s2 p1,8x64x112x112 max k3 s2 p1 nhwc,1x2048x7x7 avg k7,"
     "8x2048x7x7 avg k7,8x2048x7x7 avg k7 nhwc",
     NULL, NULL},
};

const bench_entry *bench_registry(size_t *count) {
    *count = sizeof registry / sizeof registry[0];
    return registry;
}

const bench_entry *bench_find(const char *op) {
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; ++i)
        if (strcmp(registry[i].op, op) == 0) return &registry[i];
    return NULL;
}

const char *bench_op_list(char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof registry / sizeof registry[0] && used < size; ++i) {
        int n = snprintf(out + used, size - used, "%s%s", i ? ", " : "", registry[i].op);
        if (n < 0) break;
        used += (size_t)n;
    }
    return out;
}

/* NULL (every part) or one of the op's parts; otherwise a TSR_ERR_INVALID_ARG naming its parts. */
static tsr_status check_part(const bench_entry *e, const char *part) {
    const char *op = e->op;
    if (!part) return TSR_SUCCESS;
    size_t nparts = 0;
    for (const bench_part *p = e->parts; p && p->name; ++p, ++nparts)
        if (strcmp(p->name, part) == 0) return TSR_SUCCESS;
    if (nparts == 0) return tsr_fail(TSR_ERR_INVALID_ARG, "--part: %s has no parts (got '%s')", op, part);
    /* "the parts 'a' and 'b'", "the parts 'a', 'b' and 'c'" */
    char names[256] = "";
    for (size_t i = 0; i < nparts; ++i) {
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s'%s'",
                 i == 0            ? ""
                 : i + 1 == nparts ? " and "
                                   : ", ",
                 e->parts[i].name);
    }
    return tsr_fail(TSR_ERR_INVALID_ARG, "--part: %s has the parts %s (got '%s')", op, names, part);
}

tsr_status bench_run(const bench_entry *entry, tsr_device *device, const bench_options *options, bench_report *report) {
    tsr_status st = check_part(entry, options->part);
    if (st != TSR_SUCCESS) return st;
    if (options->per_call_weights && strcmp(entry->op, "conv2d") != 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "--weights: only conv2d keeps derived weights");
    if (options->chosen_form_only && strcmp(entry->op, "conv2d") != 0)
        return tsr_fail(TSR_ERR_INVALID_ARG, "--forms: only conv2d times its forms one by one");
    bench_options with_sizes = *options;
    if (!with_sizes.sizes) with_sizes.sizes = entry->default_sizes;
    return entry->run(device, &with_sizes, report);
}
