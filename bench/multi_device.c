/* One call split across several devices against each device alone (tsr_matmul_multi,
 * tsr_attention_multi):
 *   multi_device [--device SEL]... [--op gemm|attention] [--size N] [--reps R] [--weights W,...]
 *                [--config I:TEXT]... [--json FILE]
 * Every timed call is host to host (operands uploaded, results downloaded), on a group of one
 * device for "alone" and on the group of all for "split". After one warm-up call of each (kernels
 * compiled, the split's rates measured), each repetition times every device alone and then the
 * split, in rotating order; the medians give each device's rate, the split's rate, and the split
 * as a fraction of the sum of the rates alone (1.0: every device as busy as alone). The split's
 * result is compared with device 0's alone. For GEMM, device 0 also runs without a group: blocking
 * upload, one tsr_sgemm, blocking download ("plain": nothing overlapped). Devices default to "pthread" and "basic"
 * (PoCL's two CPU devices with POCL_DEVICES="pthread basic"). gemm: N x N x N; attention: 1 x 12 heads x N queries x N
 * keys x 64. */
#include "tessera.h"
#include "util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEVICES 8

static int fail(const char *what, tsr_status st) {
    fprintf(stderr, "multi_device: %s: %s: %s\n", what, tsr_status_str(st), tsr_last_error());
    return 1;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct problem {
    bool attention;
    size_t n;
    float *a, *b, *c; /* gemm: A, B, C; attention: Q, K, V packed in a, O in c */
    tsr_attention_desc desc;
    double flops;
} problem;

static tsr_status run(tsr_device_group *g, problem *p) {
    if (!p->attention)
        return tsr_matmul_multi(g, &(tsr_matmul_desc){.m = p->n, .n = p->n, .k = p->n, .alpha = 1}, p->a, p->b, p->c);
    size_t tensor = p->desc.heads * p->n * p->desc.head_dim;
    return tsr_attention_multi(g, &p->desc, p->a, p->a + tensor, p->a + 2 * tensor, p->c);
}

/* Device 0 without a group: blocking upload of A and B, one tsr_sgemm, blocking download of C,
 * nothing overlapped; what the split's pipelining is measured against. */
typedef struct plain {
    tsr_device *dev;
    cl_mem a, b, c;
} plain;

static tsr_status plain_run(plain *pl, problem *p, double *seconds) {
    cl_command_queue q = tsr_device_queue(pl->dev);
    size_t bytes = p->n * p->n * sizeof(float);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (clEnqueueWriteBuffer(q, pl->a, CL_TRUE, 0, bytes, p->a, 0, NULL, NULL) != CL_SUCCESS ||
        clEnqueueWriteBuffer(q, pl->b, CL_TRUE, 0, bytes, p->b, 0, NULL, NULL) != CL_SUCCESS)
        return TSR_ERR_OPENCL;
    tsr_status st = tsr_sgemm(pl->dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, p->n, p->n, p->n, 1, pl->a, 0, p->n,
                              pl->b, 0, p->n, 0, pl->c, 0, p->n, NULL, NULL);
    if (st != TSR_SUCCESS) return st;
    if (clEnqueueReadBuffer(q, pl->c, CL_TRUE, 0, bytes, p->c, 0, NULL, NULL) != CL_SUCCESS) return TSR_ERR_OPENCL;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return TSR_SUCCESS;
}

int main(int argc, char **argv) {
    static const struct option options[] = {{"device", required_argument, NULL, 'd'},
                                            {"op", required_argument, NULL, 'o'},
                                            {"size", required_argument, NULL, 's'},
                                            {"reps", required_argument, NULL, 'r'},
                                            {"json", required_argument, NULL, 'j'},
                                            {"weights", required_argument, NULL, 'w'},
                                            {"config", required_argument, NULL, 'c'},
                                            {"help", no_argument, NULL, 'h'},
                                            {0}};
    const char *selectors[MAX_DEVICES], *json_path = NULL, *op = "gemm";
    size_t nsel = 0, nweights = 0, nconfigs = 0;
    const char *configs[MAX_DEVICES]; /* "I:TEXT": device I's GEMM configuration */
    double weights[MAX_DEVICES];
    long size = 4096, reps = 5;
    int c;
    char *end;
    const char *bad = NULL;
    while ((c = util_next_option(argc, argv, "d:o:s:r:j:w:c:h", options, false, &bad)) != -1) {
        switch (c) {
        case 'd':
            if (nsel == MAX_DEVICES) return fprintf(stderr, "multi_device: at most %d devices\n", MAX_DEVICES), 2;
            selectors[nsel++] = optarg;
            break;
        case 'o':
            op = optarg;
            break;
        case 's':
            size = strtol(optarg, &end, 10);
            if (*end || size < 1 || size > 16384) return fprintf(stderr, "multi_device: --size 1..16384\n"), 2;
            break;
        case 'r':
            reps = strtol(optarg, &end, 10);
            if (*end || reps < 1 || reps > 1000) return fprintf(stderr, "multi_device: --reps 1..1000\n"), 2;
            break;
        case 'j':
            json_path = optarg;
            break;
        case 'c':
            if (nconfigs == MAX_DEVICES || !strchr(optarg, ':'))
                return fprintf(stderr, "multi_device: --config I:TEXT (device index, GEMM configuration)\n"), 2;
            configs[nconfigs++] = optarg;
            break;
        case 'w': /* fixed shares instead of measured rates */
            for (char *w = optarg; nweights < MAX_DEVICES; w = end + 1) {
                weights[nweights++] = strtod(w, &end);
                if (end == w || (*end && *end != ',')) return fprintf(stderr, "multi_device: --weights W1,W2,...\n"), 2;
                if (!*end) break;
            }
            break;
        default:
            fprintf(stderr, "usage: multi_device [--device SEL]... [--op gemm|attention] [--size N] [--reps R] "
                            "[--weights W1,W2,...] [--config I:TEXT]... [--json FILE]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind < argc || (strcmp(op, "gemm") && strcmp(op, "attention")))
        return fprintf(stderr, "multi_device: --op gemm or attention; no other arguments\n"), 2;
    if (!nsel) selectors[nsel++] = "pthread", selectors[nsel++] = "basic";
    tsr_device *devs[MAX_DEVICES] = {0};
    tsr_device_group *alone[MAX_DEVICES] = {0}, *all = NULL;
    for (size_t d = 0; d < nsel; d++) {
        tsr_status st = tsr_device_open(selectors[d], &devs[d]);
        if (st != TSR_SUCCESS) return fail(selectors[d], st);
        if ((st = tsr_group_create(&devs[d], 1, &alone[d])) != TSR_SUCCESS) return fail("tsr_group_create", st);
    }
    tsr_status st = tsr_group_create(devs, nsel, &all);
    if (st != TSR_SUCCESS) return fail("tsr_group_create", st);
    for (size_t i = 0; i < nconfigs; i++) { /* e.g. a slower GEMM on one device: unequal rates on equal cores */
        char *colon = strchr(configs[i], ':');
        unsigned long index = strtoul(configs[i], &end, 10);
        if (end != colon || index >= nsel)
            return fprintf(stderr, "multi_device: --config %s: no such device\n", configs[i]), 2;
        if ((st = tsr_config_override(devs[index], "gemm", colon + 1)) != TSR_SUCCESS) return fail("--config", st);
    }
    if (nweights && nweights != nsel) return fprintf(stderr, "multi_device: one weight per device\n"), 2;
    if (nweights && (st = tsr_group_set_weights(all, weights)) != TSR_SUCCESS) return fail("--weights", st);

    problem p = {.attention = !strcmp(op, "attention"), .n = (size_t)size};
    size_t n = p.n, in_floats, out_floats;
    if (p.attention) {
        p.desc = (tsr_attention_desc){.batch = 1, .heads = 12, .q_len = n, .kv_len = n, .head_dim = 64};
        in_floats = 3 * 12 * n * 64, out_floats = 12 * n * 64;
        p.flops = 4.0 * 12 * (double)n * (double)n * 64;
    } else {
        in_floats = 2 * n * n, out_floats = n * n;
        p.flops = 2.0 * (double)n * (double)n * (double)n;
    }
    p.a = malloc(in_floats * sizeof(float));
    p.c = malloc(out_floats * sizeof(float));
    float *reference = malloc(out_floats * sizeof(float));
    if (!p.a || !p.c || !reference) return fprintf(stderr, "multi_device: out of host memory\n"), 1;
    p.b = p.a + n * n;
    srand(7);
    for (size_t i = 0; i < in_floats; i++)
        p.a[i] = (float)rand() / (float)RAND_MAX - 0.5f;

    /* warm-up: kernels compiled on each device, the split's rates measured */
    for (size_t d = 0; d < nsel; d++)
        if ((st = run(alone[d], &p)) != TSR_SUCCESS) return fail("warm-up alone", st);
    for (int w = 0; w < 2; w++)
        if ((st = run(all, &p)) != TSR_SUCCESS) return fail("warm-up split", st);

    plain pl = {.dev = devs[0]};
    double plain_seconds;
    if (!p.attention) {
        cl_int e1, e2, e3;
        size_t bytes = n * n * sizeof(float);
        cl_context ctx = tsr_device_context(devs[0]);
        pl.a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &e1);
        pl.b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &e2);
        pl.c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &e3);
        if (e1 || e2 || e3) return fprintf(stderr, "multi_device: cannot allocate the plain run's buffers\n"), 1;
        if ((st = plain_run(&pl, &p, &plain_seconds)) != TSR_SUCCESS) return fail("warm-up plain", st);
    }
    double *rate_plain = calloc((size_t)reps, sizeof(double));
    double *rate_alone = calloc((size_t)reps * nsel, sizeof(double)),
           *rate_split = calloc((size_t)reps, sizeof(double));
    double *seconds_split = calloc((size_t)reps, sizeof(double));
    size_t *units = calloc((size_t)reps * nsel, sizeof(size_t));
    if (!rate_alone || !rate_split || !seconds_split || !units) return 1;
    tsr_group_stats stats;
    for (long r = 0; r < reps; r++) {
        for (size_t i = 0; i <= nsel; i++) { /* rotate which runs first */
            size_t slot = (i + (size_t)r) % (nsel + 1);
            tsr_device_group *g = slot < nsel ? alone[slot] : all;
            if ((st = run(g, &p)) != TSR_SUCCESS) return fail(slot < nsel ? "alone" : "split", st);
            tsr_group_last_stats(g, &stats);
            double rate = p.flops / stats.seconds * 1e-9;
            if (slot < nsel) {
                rate_alone[slot * (size_t)reps + (size_t)r] = rate;
                if (!slot) memcpy(reference, p.c, out_floats * sizeof(float));
            } else {
                rate_split[r] = rate, seconds_split[r] = stats.seconds;
                for (size_t d = 0; d < nsel; d++)
                    units[(size_t)r * nsel + d] = stats.devices[d].units;
            }
        }
        if (!p.attention) {
            if ((st = plain_run(&pl, &p, &plain_seconds)) != TSR_SUCCESS) return fail("plain", st);
            rate_plain[r] = p.flops / plain_seconds * 1e-9;
        }
        printf("rep %ld:", r + 1);
        if (!p.attention) printf(" %s plain %.1f", selectors[0], rate_plain[r]);
        for (size_t d = 0; d < nsel; d++)
            printf(" %s %.1f", selectors[d], rate_alone[d * (size_t)reps + (size_t)r]);
        printf(" split %.1f GFLOP/s (", rate_split[r]);
        tsr_group_last_stats(all, &stats);
        for (size_t d = 0; d < nsel; d++)
            printf("%s%s %zu units, %zu tiles, busy %.1f", d ? "; " : "", selectors[d], stats.devices[d].units,
                   stats.devices[d].tiles, stats.devices[d].gflops);
        printf(")\n");
    }
    /* the split's result against device 0 alone (the last repetition of each) */
    run(all, &p);
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < out_floats; i++) {
        double diff = fabs((double)p.c[i] - (double)reference[i]);
        if (!(diff <= max_diff)) max_diff = diff;
        if (fabs(reference[i]) > max_ref) max_ref = fabs(reference[i]);
    }
    tsr_group_last_stats(all, &stats);

    cJSON *root = cJSON_CreateObject(), *devices = cJSON_AddArrayToObject(root, "devices");
    cJSON_AddStringToObject(root, "command", "build/bench/multi_device (see README)");
    cJSON_AddStringToObject(root, "op", op);
    cJSON_AddNumberToObject(root, "size", (double)n);
    cJSON_AddNumberToObject(root, "reps", (double)reps);
    double sum = 0;
    for (size_t d = 0; d < nsel; d++) {
        double med = median(rate_alone + d * (size_t)reps, (int)reps);
        sum += med;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "selector", selectors[d]);
        cJSON_AddStringToObject(o, "name", tsr_device_get_info(devs[d])->name);
        cJSON_AddNumberToObject(o, "alone_gflops_median", med);
        cJSON_AddNumberToObject(o, "split_units_last", (double)stats.devices[d].units);
        cJSON_AddNumberToObject(o, "split_weight_last", stats.devices[d].weight);
        cJSON_AddNumberToObject(o, "split_busy_gflops_last", stats.devices[d].gflops);
        cJSON_AddItemToArray(devices, o);
    }
    double split = median(rate_split, (int)reps);
    cJSON_AddNumberToObject(root, "split_gflops_median", split);
    cJSON_AddNumberToObject(root, "split_seconds_median", median(seconds_split, (int)reps));
    cJSON_AddNumberToObject(root, "sum_alone_gflops", sum);
    cJSON_AddNumberToObject(root, "split_over_sum", split / sum);
    cJSON_AddStringToObject(root, "weights_from_last", stats.weights_from);
    if (!p.attention) /* device 0: one blocking upload, tsr_sgemm, one blocking download */
        cJSON_AddNumberToObject(root, "device0_plain_gflops_median", median(rate_plain, (int)reps));
    cJSON_AddNumberToObject(root, "max_abs_diff_vs_device0", max_diff);
    cJSON_AddNumberToObject(root, "max_abs_reference", max_ref);
    const char *pocl = getenv("POCL_DEVICES"), *threads = getenv("POCL_MAX_PTHREAD_COUNT");
    cJSON_AddStringToObject(root, "POCL_DEVICES", pocl ? pocl : "");
    cJSON_AddStringToObject(root, "POCL_MAX_PTHREAD_COUNT", threads ? threads : "");
    cJSON *overrides = cJSON_AddArrayToObject(root, "gemm_config_overrides");
    for (size_t i = 0; i < nconfigs; i++)
        cJSON_AddItemToArray(overrides, cJSON_CreateString(configs[i]));
    printf("median GFLOP/s:");
    for (size_t d = 0; d < nsel; d++)
        printf(" %s alone %.1f (split share %zu units),", selectors[d],
               cJSON_GetObjectItem(cJSON_GetArrayItem(devices, (int)d), "alone_gflops_median")->valuedouble,
               stats.devices[d].units);
    printf(" split %.1f = %.2f x the sum %.1f; weights %s; max |split - device 0| = %.3g (|ref| <= %.3g)\n", split,
           split / sum, sum, stats.weights_from, max_diff, max_ref);
    if (json_path) {
        char *text = cJSON_Print(root);
        FILE *f = fopen(json_path, "w");
        if (!f || fputs(text, f) < 0 || fputc('\n', f) < 0 || fclose(f) != 0)
            return fprintf(stderr, "multi_device: cannot write %s\n", json_path), 1;
        free(text);
    }
    cJSON_Delete(root);
    for (size_t d = 0; d < nsel; d++)
        tsr_group_destroy(alone[d]);
    tsr_group_destroy(all);
    for (size_t d = 0; d < nsel; d++)
        tsr_device_close(devs[d]);
    if (pl.a) {
        clReleaseMemObject(pl.a);
        clReleaseMemObject(pl.b);
        clReleaseMemObject(pl.c);
    }
    free(rate_plain);
    free(p.a), free(p.c), free(reference), free(rate_alone), free(rate_split), free(seconds_split), free(units);
    return 0;
}
