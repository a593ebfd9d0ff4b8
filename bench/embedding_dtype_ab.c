/* The embedding gather (tsr_embedding, BERT-base tables: vocab 30522, 512 positions, 2 types) in
 * fp32, f16 and bf16 (tables and y in the type), side by side in one process:
 *   embedding_dtype_ab [--device SEL] [--rounds N] [--calls N] [--tokens N] [--hidden N] [--cold | --no-warmup]
 * For each round the three run in rotating order: a warm-up call, then N calls back to back and
 * one clFinish. --cold: between the warm-up and the timed calls the host reads and writes 128 MB
 * (more than the L3; until session 21 a memset, whose non-temporal stores left the L3 as it was), so the timed calls gather their rows from DRAM (a model's embedding call, the network
 * having run since the last one); --no-warmup: no warm-up call, so the call before the timed ones
 * is another type's (as in `tessera bench embedding --dtype`'s alternation, where the fp32 call's
 * larger footprint evicts the 16-bit rows from the L3 more than the 16-bit call evicts fp32's).
 * Prints one JSON line: per type the medians over the rounds of wall and process CPU microseconds
 * per call, and the medians of the rounds' paired fp32/16-bit time ratios (CPU and
 * wall), the "x the tokens/s of fp32" of `tessera bench embedding --dtype`, here without its
 * per-call host clock around a single call (docs/dtypes.md, session 20). Random ids, fixed seed. */
#include "ab_harness.h"
#include "tessera.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { VOCAB = 30522, POSITIONS = 512, TYPES = 2, SEQ = 128 };

int main(int argc, char **argv) {
    ab_opts o = {.rounds = 15, .calls = 20};
    int cold = 0, warmup = 1;
    size_t tokens = 4096, hidden = 768;
    for (int i = 1; i < argc; ++i) {
        if (ab_arg(argc, argv, &i, &o, 0)) continue;
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--hidden") && i + 1 < argc) hidden = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--cold")) cold = 1;
        else if (!strcmp(argv[i], "--no-warmup")) warmup = 0;
        else {
            fprintf(stderr, "usage: embedding_dtype_ab [--device SEL] [--rounds N] [--calls N] [--tokens N] [--hidden N] "
                            "[--cold | --no-warmup]\n");
            return 2;
        }
    }
    const int rounds = o.rounds, calls = o.calls;
    if (rounds < 1 || rounds > 1000 || calls < 1 || calls > 100000 || tokens < 1 || tokens > (1u << 20) || hidden < 1 ||
        hidden > 8192) {
        fprintf(stderr, "embedding_dtype_ab: --rounds 1..1000, --calls 1..100000, --tokens 1..1048576, --hidden 1..8192\n");
        return 2;
    }
    tsr_device *dev = NULL;
    if (!ab_open("embedding_dtype_ab", o.selector, NULL, &dev)) return 1;
    cl_context ctx = tsr_device_context(dev);
    cl_command_queue q = tsr_device_queue(dev);
    static const tsr_dtype types[3] = {TSR_F32, TSR_F16, TSR_BF16};
    const size_t rows[3] = {VOCAB, POSITIONS, TYPES};
    float *host = malloc((size_t)VOCAB * hidden * sizeof *host), *draw = malloc(tokens * 2 * sizeof *draw);
    int32_t *ids = malloc(tokens * sizeof *ids), *type_ids = malloc(tokens * sizeof *type_ids);
    void *conv = malloc((size_t)VOCAB * hidden * sizeof(float));
    enum { EVICT_BYTES = 128 << 20 };
    unsigned char *evict = cold ? calloc(EVICT_BYTES, 1) : NULL;
    if (cold && !evict) return 1;
    double *wall[3], *cpu[3], *ratio_cpu[2], *ratio_wall[2];
    if (!host || !draw || !ids || !type_ids || !conv) return 1;
    for (int v = 0; v < 3; ++v) {
        if (!ab_rounds_alloc(rounds, &wall[v], &cpu[v])) return 1;
    }
    for (int v = 0; v < 2; ++v) {
        if (!ab_rounds_alloc(rounds, &ratio_wall[v], &ratio_cpu[v])) return 1;
    }
    uint64_t seed = 0x5eed2020;
    tsr_random_fill(host, (size_t)VOCAB * hidden, &seed, -0.1f, 0.1f);
    tsr_random_fill(draw, tokens * 2, &seed, 0.0f, 1.0f);
    for (size_t t = 0; t < tokens; ++t)
        ids[t] = (int32_t)(draw[t] * VOCAB) % VOCAB, type_ids[t] = (int32_t)(draw[tokens + t] * TYPES) % TYPES;
    cl_mem table[3][3], y[3];
    for (int v = 0; v < 3; ++v) {
        size_t es = tsr_dtype_size(types[v]);
        if (tsr_convert_host(TSR_F32, host, types[v], conv, (size_t)VOCAB * hidden) != TSR_SUCCESS) return 1;
        cl_int err = CL_SUCCESS;
        for (int k = 0; k < 3 && err == CL_SUCCESS; ++k) /* each table the first rows of the words' */
            table[v][k] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, rows[k] * hidden * es, conv, &err);
        if (err == CL_SUCCESS) y[v] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, tokens * hidden * es, NULL, &err);
        if (err != CL_SUCCESS) {
            fprintf(stderr, "embedding_dtype_ab: buffers: OpenCL error %d\n", err);
            return 1;
        }
    }
    for (int r = 0; r < rounds; ++r) {
        for (int j = 0; j < 3; ++j) {
            int v = (r + j) % 3; /* rotate which goes first */
            const tsr_embedding_desc d = {.tokens = tokens, .seq_len = SEQ, .hidden = hidden, .vocab = VOCAB,
                                          .max_positions = POSITIONS, .type_vocab = TYPES, .y_type = types[v],
                                          .table_type = types[v]};
            tsr_status st = warmup ? tsr_embedding(dev, &d, ids, type_ids, table[v][0], table[v][1], table[v][2], y[v], q,
                                                   NULL)
                                   : TSR_SUCCESS;
            clFinish(q);
            if (evict) util_touch_lines(evict, EVICT_BYTES);
            ab_mark m = ab_start();
            for (int i = 0; i < calls && st == TSR_SUCCESS; ++i)
                st = tsr_embedding(dev, &d, ids, type_ids, table[v][0], table[v][1], table[v][2], y[v], q, NULL);
            clFinish(q);
            if (st != TSR_SUCCESS) {
                fprintf(stderr, "embedding_dtype_ab: %s: %s\n", tsr_dtype_str(types[v]), tsr_last_error());
                return 1;
            }
            ab_per_call(m, calls, &wall[v][r], &cpu[v][r]);
        }
        for (int v = 1; v < 3; ++v)
            ratio_cpu[v - 1][r] = cpu[0][r] / cpu[v][r], ratio_wall[v - 1][r] = wall[0][r] / wall[v][r];
    }
    printf("{\"tokens\": %zu, \"hidden\": %zu, \"rounds\": %d, \"calls\": %d, \"before\": \"%s\"", tokens, hidden,
           rounds, calls, cold ? "cold" : warmup ? "same type" : "other type");
    for (int v = 0; v < 3; ++v) {
        printf(", \"%s\": {\"us\": %.1f, \"cpu_us\": %.1f", tsr_dtype_str(types[v]), util_median(wall[v], rounds),
               util_median(cpu[v], rounds));
        if (v) printf(", \"fp32_over_cpu\": %.3f, \"fp32_over_wall\": %.3f", util_median(ratio_cpu[v - 1], rounds),
                      util_median(ratio_wall[v - 1], rounds));
        printf("}");
    }
    printf("}\n");
    for (int v = 0; v < 3; ++v) {
        for (int k = 0; k < 3; ++k) clReleaseMemObject(table[v][k]);
        clReleaseMemObject(y[v]);
    }
    free(evict);
    tsr_device_close(dev);
    return 0;
}
