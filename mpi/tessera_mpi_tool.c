/* tessera-mpi: the MPI component's tool. Run under mpirun; every rank gets the same arguments
 * (checked). Commands:
 *   gemm       distributed SUMMA GEMM against a single-rank run of the same matrices
 *   allreduce  the data-parallel all-reduce of a device buffer, checked against a host sum
 *   model      the alpha-beta model's prediction beside the measurement, or for a described cluster */
#include "tessera_mpi.h"

#include "util.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM 65536
#define MAX_REPS 1000
#define DEFAULT_SEED 20261126u

static const char usage_text[] =
    "usage: mpirun [-np P] tessera-mpi COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  gemm       C = A B (fp32) by SUMMA on a 2-D grid of the ranks, one OpenCL device each; also\n"
    "             times the same GEMM on rank 0 alone and reports the parallel efficiency against it\n"
    "  allreduce  sum a device buffer of floats across the ranks (pipelined chunks); checked\n"
    "  model      the alpha-beta model: predicted vs measured SUMMA (measures alpha, beta and the\n"
    "             local GEMM rate with all ranks running), or with --cluster a described cluster\n"
    "\n"
    "options:\n"
    "  --n N          matrix size (gemm, model; default 4096 for model --cluster, else required)\n"
    "  --m M, --k K   other GEMM extents (default N): A is M x K, B is K x N\n"
    "  --panel B      SUMMA panel width (default 256)\n"
    "  --reps R       timed repetitions, after one warm-up (default 3); the median is reported\n"
    "  --check        gemm: compare the gathered C with the single-rank result (and, for small\n"
    "                 sizes, a double-precision host reference) within fp32 rounding bounds\n"
    "  --floats N     allreduce: floats per rank (required)\n"
    "  --chunk C      allreduce: floats per pipelined chunk (default 1048576)\n"
    "  --cluster SPEC model: P=RANKS,link=BANDWIDTH,latency=TIME,gemm=RATE, e.g.\n"
    "                 P=64,link=100Gbit,latency=2us,gemm=50TFLOPs (units: Gbit Mbit GB MB per s;\n"
    "                 s ms us ns; TFLOPs GFLOPs; P 1 to 1048576, link 1Mbit to 1000000GB, latency\n"
    "                 1ns to 1000s, gemm 0.001GFLOPs to 1000000TFLOPs); predictions only, so with\n"
    "                 it model takes just --n, --panel, --grad and --tokens\n"
    "  --grad G       model --cluster: gradient floats of the all-reduce example (default 110000000)\n"
    "  --tokens T     model --cluster: tokens per rank per step in that example (default 8192)\n"
    "  --device SEL   the OpenCL device of every rank (tsr_device_open selector)\n"
    "  --seed S       input seed (default 20261126)\n"
    "  --json FILE    write the results as JSON (the first rank with a device writes it, and checks\n"
    "                 it before the run)\n"
    "  -h, --help     this text\n"
    "\n"
    "Before anything is allocated, every size is checked against each rank's device (largest\n"
    "allocation, global memory) and host memory (the ranks of one host together) and against MPI's\n"
    "message counts; a refusal is one line and exit status 2 on every rank.\n"
    "\n"
    "environment: TSR_MPI_TIMEOUT (seconds a waiting rank goes without any sign of progress from\n"
    "the others before it aborts the job, default 600), TSR_MPI_FAULT (test hook, see tessera_mpi.h),\n"
    "TSR_MPI_HOST_MEMORY (test hook: bytes of host memory the size check takes as available, when\n"
    "lower than the real figure), POCL_MAX_PTHREAD_COUNT (PoCL threads per rank)\n";

typedef struct options {
    const char *command;
    size_t m, n, k, panel, floats, chunk, grad, tokens;
    int reps;
    bool check, help;
    const char *json, *device, *cluster;
    uint64_t seed;
    /* which options were given (a default is never mistaken for a choice) */
    bool has_m, has_k, has_panel, has_chunk, has_grad, has_tokens, has_reps, has_seed;
} options;

typedef struct cluster_spec {
    int ranks;
    double link_bytes_s, latency_s, rate;
} cluster_spec;

static int rank_world(void) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

/* A usage error: the arguments are the same on every rank (checked), so every rank comes here;
 * rank 0 says why. */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
    if (rank_world() == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "tessera-mpi: ");
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\n(tessera-mpi --help lists the commands and options)\n");
    }
    return 2;
}

/* "100Gbit" -> bytes per second etc.: a plain decimal number (digits with at most one point, an
 * optional exponent; no sign, hex, inf or nan, which strtod would take), one of the listed units,
 * and a value in base units from lo to hi (so nothing derived from it overflows or vanishes). */
static bool parse_quantity(const char *text, const char *const *units, const double *scales, double lo, double hi,
                           double *out) {
    const char *p = text;
    size_t int_digits = strspn(p, "0123456789");
    p += int_digits;
    size_t frac_digits = 0;
    if (*p == '.') frac_digits = strspn(++p, "0123456789"), p += frac_digits;
    if (int_digits + frac_digits == 0) return false;
    if ((*p == 'e' || *p == 'E') &&
        (isdigit((unsigned char)p[1]) || ((p[1] == '+' || p[1] == '-') && isdigit((unsigned char)p[2]))))
        p += 2, p += strspn(p, "0123456789");
    char number[64];
    if ((size_t)(p - text) >= sizeof number) return false;
    memcpy(number, text, (size_t)(p - text));
    number[p - text] = '\0';
    double value = strtod(number, NULL);
    for (int i = 0; units[i]; ++i)
        if (strcmp(p, units[i]) == 0) {
            double scaled = value * scales[i];
            if (!isfinite(scaled) || scaled < lo * (1 - 1e-9) || scaled > hi * (1 + 1e-9))
                return false; /* a relative tolerance: 0.001 * 1e9 is not exactly 1e6 */
            *out = scaled;
            return true;
        }
    return false;
}

static int parse_cluster(const char *text, cluster_spec *spec) {
    static const char *const link_units[] = {"Gbit", "Mbit", "GB", "MB", NULL};
    static const double link_scales[] = {1e9 / 8, 1e6 / 8, 1e9, 1e6};
    static const char *const time_units[] = {"s", "ms", "us", "ns", NULL};
    static const double time_scales[] = {1, 1e-3, 1e-6, 1e-9};
    static const char *const rate_units[] = {"TFLOPs", "GFLOPs", NULL};
    static const double rate_scales[] = {1e12, 1e9};
    memset(spec, 0, sizeof *spec);
    char copy[256];
    if (strlen(text) >= sizeof copy) return usage_error("--cluster: '%s' is too long", text);
    size_t len = strlen(text);
    if (!len || text[0] == ',' || text[len - 1] == ',' || strstr(text, ",,"))
        return usage_error("--cluster: '%s' has an empty item (KEY=VALUE items separated by single commas)", text);
    strcpy(copy, text);
    int seen = 0;
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) return usage_error("--cluster: '%s' is not KEY=VALUE (keys P, link, latency, gemm)", item);
        *eq = '\0';
        const char *key = item, *value = eq + 1;
        int bit = strcmp(key, "P") == 0         ? 1
                  : strcmp(key, "link") == 0    ? 2
                  : strcmp(key, "latency") == 0 ? 4
                  : strcmp(key, "gemm") == 0    ? 8
                                                : 0;
        if (!bit) return usage_error("--cluster: unknown key '%s' (keys P, link, latency, gemm)", key);
        if (seen & bit) return usage_error("--cluster: %s is given twice", key);
        seen |= bit;
        if (bit == 1) {
            uint64_t p = 0;
            if (util_parse_count(value, "--cluster P", 1, 1 << 20, &p) != TSR_SUCCESS)
                return usage_error("%s", tsr_last_error());
            spec->ranks = (int)p;
        } else if (bit == 2) {
            if (!parse_quantity(value, link_units, link_scales, 1e6 / 8, 1e15, &spec->link_bytes_s))
                return usage_error("--cluster link: '%s' is not a bandwidth such as 100Gbit, 400Mbit, 25GB, 900MB "
                                   "(per second), from 1Mbit to 1000000GB",
                                   value);
        } else if (bit == 4) {
            if (!parse_quantity(value, time_units, time_scales, 1e-9, 1e3, &spec->latency_s))
                return usage_error("--cluster latency: '%s' is not a time such as 2us, 500ns, 1ms, from 1ns to 1000s",
                                   value);
        } else {
            if (!parse_quantity(value, rate_units, rate_scales, 1e6, 1e18, &spec->rate))
                return usage_error("--cluster gemm: '%s' is not a rate such as 50TFLOPs or 900GFLOPs, from 0.001GFLOPs "
                                   "to 1000000TFLOPs",
                                   value);
        }
    }
    if (seen != 15) return usage_error("--cluster needs all of P, link, latency and gemm (got '%s')", text);
    return 0;
}

static int parse_size(const char *text, const char *option, uint64_t min, uint64_t max, size_t *out) {
    uint64_t v = 0;
    if (util_parse_count(text, option, min, max, &v) != TSR_SUCCESS) return usage_error("%s", tsr_last_error());
    *out = (size_t)v;
    return 0;
}

static int parse_options(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->reps = 3;
    o->seed = DEFAULT_SEED;
    o->grad = 110000000;
    o->tokens = 8192;
    if (argc < 2) return usage_error("no command (gemm, allreduce or model)");
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        o->help = true;
        return 0;
    }
    o->command = argv[1];
    if (strcmp(o->command, "gemm") && strcmp(o->command, "allreduce") && strcmp(o->command, "model"))
        return usage_error("unknown command '%s' (gemm, allreduce or model)", o->command);
    static const struct option longs[] = {
        {"n", required_argument, NULL, 'n'},       {"m", required_argument, NULL, 'm'},
        {"k", required_argument, NULL, 'k'},       {"panel", required_argument, NULL, 'p'},
        {"reps", required_argument, NULL, 'r'},    {"check", no_argument, NULL, 'c'},
        {"floats", required_argument, NULL, 'f'},  {"chunk", required_argument, NULL, 'u'},
        {"cluster", required_argument, NULL, 'C'}, {"grad", required_argument, NULL, 'g'},
        {"tokens", required_argument, NULL, 't'},  {"device", required_argument, NULL, 'd'},
        {"seed", required_argument, NULL, 's'},    {"json", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    optind = 2;
    int c, err = 0;
    uint64_t reps = 0;
    const char *bad = NULL;
    /* quiet: our own messages, printed by rank 0 only */
    while (!err && (c = util_next_option(argc, argv, "h", longs, true, &bad)) != -1) {
        switch (c) {
        case 'n':
            err = parse_size(optarg, "--n", 1, MAX_DIM, &o->n);
            break;
        case 'm':
            err = parse_size(optarg, "--m", 1, MAX_DIM, &o->m);
            o->has_m = true;
            break;
        case 'k':
            err = parse_size(optarg, "--k", 1, MAX_DIM, &o->k);
            o->has_k = true;
            break;
        case 'p':
            err = parse_size(optarg, "--panel", 1, MAX_DIM, &o->panel);
            o->has_panel = true;
            break;
        case 'f':
            /* any count whose bytes fit in size_t: the memory check (check_sizes) decides */
            err = parse_size(optarg, "--floats", 1, SIZE_MAX / sizeof(float), &o->floats);
            break;
        case 'u':
            err = parse_size(optarg, "--chunk", 1, (uint64_t)1 << 30, &o->chunk); /* one MPI message: an int count */
            o->has_chunk = true;
            break;
        case 'g':
            err = parse_size(optarg, "--grad", 1, (uint64_t)1 << 40, &o->grad);
            o->has_grad = true;
            break;
        case 't':
            err = parse_size(optarg, "--tokens", 1, (uint64_t)1 << 30, &o->tokens);
            o->has_tokens = true;
            break;
        case 'r':
            if (util_parse_count(optarg, "--reps", 1, MAX_REPS, &reps) != TSR_SUCCESS)
                err = usage_error("%s", tsr_last_error());
            o->reps = (int)reps;
            o->has_reps = true;
            break;
        case 's':
            if (util_parse_u64(optarg, "--seed", &o->seed) != TSR_SUCCESS) err = usage_error("%s", tsr_last_error());
            o->has_seed = true;
            break;
        case 'c':
            o->check = true;
            break;
        case 'C':
            o->cluster = optarg;
            break;
        case 'd':
            o->device = optarg;
            break;
        case 'j':
            o->json = optarg;
            break;
        case 'h':
            o->help = true;
            break;
        case UTIL_OPTION_MISSING:
            err = usage_error("%s needs a value", bad);
            break;
        default:
            err = usage_error("unknown option '%s' for %s", bad, o->command);
            break;
        }
    }
    if (err) return err;
    if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    if (o->help) return 0;
    bool gemm = strcmp(o->command, "gemm") == 0, model = strcmp(o->command, "model") == 0;
    bool allreduce = !gemm && !model;
    if (allreduce && (o->n || o->m || o->k || o->panel || o->check || o->cluster))
        return usage_error("allreduce takes --floats, --chunk, --reps, --seed, --device and --json");
    if (!allreduce && (o->floats || o->has_chunk)) return usage_error("--floats and --chunk belong to allreduce");
    if (gemm && o->cluster) return usage_error("--cluster belongs to model");
    if ((o->has_grad || o->has_tokens) && !o->cluster)
        return usage_error("--grad and --tokens belong to model --cluster");
    if (model && o->check) return usage_error("--check belongs to gemm");
    if (o->cluster && (o->has_m || o->has_k || o->has_reps || o->has_seed || o->device || o->json))
        return usage_error("model --cluster only predicts (square n x n GEMMs, nothing measured or written): it takes "
                           "--cluster, --n, --panel, --grad and --tokens");
    if (allreduce && !o->floats) return usage_error("allreduce needs --floats N");
    if (!allreduce && !o->n) {
        if (model && o->cluster)
            o->n = 4096;
        else
            return usage_error("%s needs --n N", o->command);
    }
    if (!o->m) o->m = o->n;
    if (!o->k) o->k = o->n;
    if (!o->panel) o->panel = 256;
    return 0;
}

/* ---- measurement pieces ---- */

static void sync_ranks(MPI_Comm comm, const char *what) {
    MPI_Request req;
    MPI_Ibarrier(comm, &req);
    tsr_mpi_wait(comm, &req, what);
}

static double max_over_ranks(MPI_Comm comm, double value) {
    double out = 0;
    MPI_Request req;
    MPI_Iallreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, comm, &req);
    tsr_mpi_wait(comm, &req, "the slowest rank's time (MPI_Iallreduce)");
    return out;
}

static double sum_over_ranks(MPI_Comm comm, double value) {
    double out = 0;
    MPI_Request req;
    MPI_Iallreduce(&value, &out, 1, MPI_DOUBLE, MPI_SUM, comm, &req);
    tsr_mpi_wait(comm, &req, "a sum over the ranks (MPI_Iallreduce)");
    return out;
}

static cl_mem device_buffer(MPI_Comm comm, tsr_device *dev, size_t floats, const float *init) {
    cl_int err = CL_SUCCESS;
    cl_mem mem =
        clCreateBuffer(tsr_device_context(dev), CL_MEM_READ_WRITE, (floats ? floats : 1) * sizeof(float), NULL, &err);
    if (err == CL_SUCCESS && init && floats)
        err = clEnqueueWriteBuffer(tsr_device_queue(dev), mem, CL_TRUE, 0, floats * sizeof(float), init, 0, NULL, NULL);
    if (err == CL_SUCCESS && !init && floats) { /* warm-ups read what they are given: never uninitialized memory */
        float *zeros = calloc(floats, sizeof(float));
        if (!zeros) tsr_mpi_abort(comm, "out of host memory for %zu floats", floats);
        err =
            clEnqueueWriteBuffer(tsr_device_queue(dev), mem, CL_TRUE, 0, floats * sizeof(float), zeros, 0, NULL, NULL);
        free(zeros);
    }
    if (err == CL_SUCCESS) err = clFinish(tsr_device_queue(dev));
    if (err != CL_SUCCESS) {
        tsr_fail_cl(err, "clCreateBuffer/clEnqueueWriteBuffer", __FILE__, __LINE__);
        tsr_mpi_abort(comm, "%zu floats on the device: %s", floats, tsr_last_error());
    }
    return mem;
}

/* One tsr_matmul of m x n x k on this rank, waited for with heartbeats (peers may be waiting on
 * this rank for many such GEMMs); returns its wall time. */
static double local_sgemm(MPI_Comm comm, tsr_device *dev, size_t m, size_t n, size_t k, cl_mem a, cl_mem b, cl_mem c,
                          float beta) {
    double start = util_now_s();
    cl_event done = NULL;
    const tsr_matmul_desc desc = {.m = m, .n = n, .k = k, .alpha = 1.0f, .beta = beta};
    tsr_status st = tsr_matmul(dev, &desc, a, b, c, NULL, &done);
    if (st == TSR_SUCCESS) st = tsr_mpi_wait_device(done, "the local tsr_matmul");
    if (done) clReleaseEvent(done);
    if (st != TSR_SUCCESS) tsr_mpi_abort(comm, "tsr_matmul %zu x %zu x %zu: %s", m, n, k, tsr_last_error());
    return util_now_s() - start;
}

/* The single-rank run: rank 0 of comm alone computes C = A B (the others wait, asleep), after a
 * warm-up on the first panel's shape; median of reps. c_out (rank 0) receives C, abs_out (may be
 * NULL) |A| |B| for the rounding bound. */
static double single_rank_gemm(MPI_Comm comm, tsr_device *dev, const options *o, const float *a, const float *b,
                               float *c_out, float *abs_out) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    double result = 0;
    if (rank == 0) {
        cl_mem da = device_buffer(comm, dev, o->m * o->k, a), db = device_buffer(comm, dev, o->k * o->n, b);
        cl_mem dc = device_buffer(comm, dev, o->m * o->n, NULL);
        size_t warm_k = o->k < o->panel ? o->k : o->panel;
        local_sgemm(comm, dev, o->m, o->n, warm_k, da, db, dc, 0.0f);
        double *times = malloc((size_t)o->reps * sizeof *times);
        for (int r = 0; r < o->reps; ++r)
            times[r] = local_sgemm(comm, dev, o->m, o->n, o->k, da, db, dc, 0.0f);
        result = util_median(times, o->reps);
        free(times);
        if (c_out &&
            clEnqueueReadBuffer(tsr_device_queue(dev), dc, CL_TRUE, 0, o->m * o->n * 4, c_out, 0, NULL, NULL) != 0)
            tsr_mpi_abort(comm, "reading the single-rank result failed");
        if (abs_out) { /* |A| |B| on the device: the scale of each element's rounding error */
            float *abs_a = malloc(o->m * o->k * 4), *abs_b = malloc(o->k * o->n * 4);
            if (!abs_a || !abs_b) tsr_mpi_abort(comm, "out of host memory for |A| and |B|");
            for (size_t i = 0; i < o->m * o->k; ++i)
                abs_a[i] = fabsf(a[i]);
            for (size_t i = 0; i < o->k * o->n; ++i)
                abs_b[i] = fabsf(b[i]);
            clEnqueueWriteBuffer(tsr_device_queue(dev), da, CL_TRUE, 0, o->m * o->k * 4, abs_a, 0, NULL, NULL);
            clEnqueueWriteBuffer(tsr_device_queue(dev), db, CL_TRUE, 0, o->k * o->n * 4, abs_b, 0, NULL, NULL);
            local_sgemm(comm, dev, o->m, o->n, o->k, da, db, dc, 0.0f);
            if (clEnqueueReadBuffer(tsr_device_queue(dev), dc, CL_TRUE, 0, o->m * o->n * 4, abs_out, 0, NULL, NULL))
                tsr_mpi_abort(comm, "reading |A| |B| failed");
            free(abs_a);
            free(abs_b);
        }
        clReleaseMemObject(da);
        clReleaseMemObject(db);
        clReleaseMemObject(dc);
    }
    sync_ranks(comm, "rank 0's single-rank GEMM (MPI_Ibarrier)");
    MPI_Request req;
    MPI_Ibcast(&result, 1, MPI_DOUBLE, 0, comm, &req);
    tsr_mpi_wait(comm, &req, "the single-rank time (MPI_Ibcast)");
    return result;
}

/* The matrices of a run: A and B on rank 0, from the seed. */
static void make_inputs(const options *o, int rank, float **a, float **b) {
    *a = *b = NULL;
    if (rank != 0) return;
    *a = malloc(o->m * o->k * sizeof(float));
    *b = malloc(o->k * o->n * sizeof(float));
    if (!*a || !*b) tsr_mpi_abort(MPI_COMM_WORLD, "out of host memory for A and B");
    uint64_t state = o->seed;
    tsr_random_fill(*a, o->m * o->k, &state, -1.0f, 1.0f);
    tsr_random_fill(*b, o->k * o->n, &state, -1.0f, 1.0f);
}

typedef struct summa_result {
    double total, local_gemm, comm_wait, comm_total; /* the median rep: the slowest rank's total; means of the rest */
    double comm_share;                               /* mean over ranks of comm_wait / total */
    int panels;
} summa_result;

/* Warm-up plus reps of SUMMA on scattered blocks; the last rep's C blocks stay in c_local. */
static summa_result run_summa(tsr_device *dev, const tsr_mpi_grid *grid, const options *o, const float *a_local,
                              const float *b_local, float *c_local) {
    summa_result res = {0, 0, 0, 0, 0, 0};
    /* Warm-up: one local GEMM of the first panel's shape compiles and loads the kernels. */
    size_t r0, mi, c0, nj;
    tsr_mpi_block(o->m, grid->pr, grid->my_row, &r0, &mi);
    tsr_mpi_block(o->n, grid->pc, grid->my_col, &c0, &nj);
    size_t w = o->panel < o->k ? o->panel : o->k;
    if (mi && nj) {
        cl_mem wa = device_buffer(grid->comm, dev, mi * w, NULL), wb = device_buffer(grid->comm, dev, w * nj, NULL);
        cl_mem wc = device_buffer(grid->comm, dev, mi * nj, NULL);
        local_sgemm(grid->comm, dev, mi, nj, w, wa, wb, wc, 0.0f);
        clReleaseMemObject(wa);
        clReleaseMemObject(wb);
        clReleaseMemObject(wc);
    }
    double *totals = malloc((size_t)o->reps * sizeof *totals);
    tsr_mpi_gemm_times *all = malloc((size_t)o->reps * sizeof *all);
    double *job = malloc((size_t)o->reps * sizeof *job);
    for (int r = 0; r < o->reps; ++r) {
        sync_ranks(grid->comm, "every rank before a SUMMA repetition (MPI_Ibarrier)");
        tsr_mpi_sgemm_summa(dev, grid, o->m, o->n, o->k, a_local, b_local, c_local, o->panel, &all[r]);
        job[r] = totals[r] = max_over_ranks(grid->comm, all[r].total);
    }
    double med = util_median(totals, o->reps);
    int pick = 0; /* the rep whose job time is the median (the lower middle for an even count) */
    for (int r = 0; r < o->reps; ++r)
        if (fabs(job[r] - med) < fabs(job[pick] - med)) pick = r;
    res.total = job[pick];
    double ranks = grid->ranks;
    res.local_gemm = sum_over_ranks(grid->comm, all[pick].local_gemm) / ranks;
    res.comm_wait = sum_over_ranks(grid->comm, all[pick].comm_wait) / ranks;
    res.comm_total = sum_over_ranks(grid->comm, all[pick].comm_total) / ranks;
    res.comm_share = sum_over_ranks(grid->comm, all[pick].comm_wait / all[pick].total) / ranks;
    res.panels = all[pick].panels;
    free(totals);
    free(all);
    free(job);
    return res;
}

/* ---- JSON output ---- */

/* --json is written by rank 0 of the ranks with a device (comm), which need not be world rank 0
 * (its working directory, its host's file system): that rank checks it, before the run. */
static void check_json(MPI_Comm comm, const options *o, int *failed) {
    int rank = 0, bad = 0;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0 && o->json && util_check_output(o->json) != TSR_SUCCESS) {
        fprintf(stderr, "tessera-mpi: %s: --json %s: %s\n", tsr_mpi_whoami(), o->json, tsr_last_error());
        bad = 1;
    }
    MPI_Request req;
    MPI_Ibcast(&bad, 1, MPI_INT, 0, comm, &req);
    tsr_mpi_wait(comm, &req, "rank 0's check of --json (MPI_Ibcast)");
    *failed = bad;
}

static int write_json(const options *o, cJSON *root) {
    int rc = 0;
    if (o->json) {
        char *text = cJSON_Print(root);
        if (!text || tsr_write_file_atomic(o->json, text, strlen(text)) != TSR_SUCCESS) {
            fprintf(stderr, "tessera-mpi: writing %s: %s\n", o->json, text ? tsr_last_error() : "out of memory");
            rc = 1;
        }
        free(text);
    }
    cJSON_Delete(root);
    return rc;
}

static cJSON *json_header(const options *o, tsr_device *dev, int ranks, int pr, int pc) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "command", o->command);
    cJSON_AddStringToObject(root, "device", dev ? tsr_device_get_info(dev)->name : "");
    cJSON_AddNumberToObject(root, "ranks", ranks);
    if (pr) {
        char grid[32];
        snprintf(grid, sizeof grid, "%dx%d", pr, pc);
        cJSON_AddStringToObject(root, "grid", grid);
    }
    const char *threads = getenv("POCL_MAX_PTHREAD_COUNT");
    cJSON_AddStringToObject(root, "POCL_MAX_PTHREAD_COUNT", threads ? threads : "(unset)");
    return root;
}

/* ---- gemm ---- */

/* The distributed C against the single-rank C: |Cd - C1| <= 2 gamma_k (|A| |B|) element by
 * element (each is within gamma_k |A||B| of the exact product, gamma_k = k u / (1 - k u)), with a
 * factor 1.05 for the rounding of |A| |B| itself. Returns the largest ratio to that bound. */
static double rounding_ratio(const options *o, const float *got, const float *single, const float *abs_ab,
                             double *rel_error) {
    double u = ldexp(1.0, -24), ku = (double)o->k * u, gamma = ku / (1 - ku), worst = 0;
    tsr_error_sum sum = {0, 0};
    for (size_t i = 0; i < o->m * o->n; ++i) {
        double diff = fabs((double)got[i] - (double)single[i]);
        double bound = 2.1 * gamma * abs_ab[i] + 1e-30;
        double ratio = isnan(got[i]) ? INFINITY : diff / bound;
        if (ratio > worst) worst = ratio;
        tsr_error_add(&sum, got[i], single[i]);
    }
    *rel_error = tsr_error_value(&sum);
    return worst;
}

static int run_gemm(tsr_device *dev, MPI_Comm comm, const options *o) {
    tsr_mpi_grid grid;
    tsr_mpi_grid_init(comm, &grid);
    float *a = NULL, *b = NULL;
    make_inputs(o, grid.rank, &a, &b);
    float *a_local, *b_local;
    size_t ar, ac, br, bc, cr, cc;
    tsr_mpi_scatter_matrix(&grid, a, o->m, o->k, &a_local, &ar, &ac);
    tsr_mpi_scatter_matrix(&grid, b, o->k, o->n, &b_local, &br, &bc);
    size_t c0;
    tsr_mpi_block(o->m, grid.pr, grid.my_row, &c0, &cr);
    tsr_mpi_block(o->n, grid.pc, grid.my_col, &c0, &cc);
    float *c_local = malloc(cr && cc ? cr * cc * sizeof(float) : 1);
    if (!c_local) tsr_mpi_abort(comm, "out of host memory for the C block");
    for (size_t i = 0; i < cr * cc; ++i)
        c_local[i] = NAN; /* poisoned: SUMMA must write all of it */

    summa_result res = run_summa(dev, &grid, o, a_local, b_local, c_local);
    float *c = NULL, *c_single = NULL, *abs_ab = NULL;
    if (grid.rank == 0 && o->check) {
        c = malloc(o->m * o->n * sizeof(float));
        c_single = malloc(o->m * o->n * sizeof(float));
        abs_ab = malloc(o->m * o->n * sizeof(float));
        if (!c || !c_single || !abs_ab) tsr_mpi_abort(comm, "out of host memory for the check");
        for (size_t i = 0; i < o->m * o->n; ++i)
            c[i] = NAN;
    }
    if (o->check) tsr_mpi_gather_matrix(&grid, c_local, o->m, o->n, c);
    double single = single_rank_gemm(comm, dev, o, a, b, c_single, abs_ab);

    double flops = 2.0 * (double)o->m * (double)o->n * (double)o->k;
    double efficiency = single / (grid.ranks * res.total);
    int rc = 0;
    if (grid.rank == 0) {
        printf("tessera-mpi gemm: %zu x %zu x %zu on %d rank(s), grid %d x %d, panel %zu (%d steps), device %s, "
               "POCL_MAX_PTHREAD_COUNT=%s\n",
               o->m, o->n, o->k, grid.ranks, grid.pr, grid.pc, o->panel, res.panels, tsr_device_get_info(dev)->name,
               getenv("POCL_MAX_PTHREAD_COUNT") ? getenv("POCL_MAX_PTHREAD_COUNT") : "(unset)");
        printf("  distributed  %.4f s (median of %d, slowest rank)  %.2f GFLOP/s per rank  %.2f GFLOP/s total\n",
               res.total, o->reps, flops / res.total / grid.ranks * 1e-9, flops / res.total * 1e-9);
        printf("  per rank     local GEMM %.4f s, communication wait %.4f s (%.1f%% of the time: exposed), "
               "broadcasts in flight %.4f s (means over ranks)\n",
               res.local_gemm, res.comm_wait, 100 * res.comm_share, res.comm_total);
        printf("  single rank  %.4f s (rank 0 alone, measured in this run, median of %d)  %.2f GFLOP/s\n", single,
               o->reps, flops / single * 1e-9);
        printf("  parallel efficiency %.3f = single / (%d x distributed)\n", efficiency, grid.ranks);
        cJSON *root = json_header(o, dev, grid.ranks, grid.pr, grid.pc);
        cJSON_AddNumberToObject(root, "m", (double)o->m);
        cJSON_AddNumberToObject(root, "n", (double)o->n);
        cJSON_AddNumberToObject(root, "k", (double)o->k);
        cJSON_AddNumberToObject(root, "panel", (double)o->panel);
        cJSON_AddNumberToObject(root, "reps", o->reps);
        cJSON_AddNumberToObject(root, "time_s", res.total);
        cJSON_AddNumberToObject(root, "gflops_per_rank", flops / res.total / grid.ranks * 1e-9);
        cJSON_AddNumberToObject(root, "local_gemm_s", res.local_gemm);
        cJSON_AddNumberToObject(root, "comm_wait_s", res.comm_wait);
        cJSON_AddNumberToObject(root, "comm_in_flight_s", res.comm_total);
        cJSON_AddNumberToObject(root, "comm_share", res.comm_share);
        cJSON_AddNumberToObject(root, "single_rank_time_s", single);
        cJSON_AddStringToObject(root, "single_rank_source", "measured in the same run: rank 0 alone, others idle");
        cJSON_AddNumberToObject(root, "parallel_efficiency", efficiency);
        if (o->check) {
            double rel = 0, worst = rounding_ratio(o, c, c_single, abs_ab, &rel);
            bool ok = worst <= 1.0;
            printf("  check vs single rank: max |Cd - C1| / (2.1 gamma_k (|A||B|)) = %.3g, relative error %.3g: %s\n",
                   worst, rel, ok ? "passed" : "FAILED");
            cJSON_AddNumberToObject(root, "check_bound_ratio", worst);
            cJSON_AddNumberToObject(root, "check_relative_error", rel);
            if (!ok) rc = 1;
            if ((double)o->m * o->n * o->k <= 1.0 * (1 << 24)) { /* small: a double reference as well */
                double *ref = malloc(o->m * o->n * sizeof *ref);
                tsr_gemm_reference(1, o->m, o->n, o->k, a, b, ref);
                double u = ldexp(1.0, -24), gamma = o->k * u / (1 - o->k * u), worst_ref = 0;
                for (size_t i = 0; i < o->m * o->n; ++i) {
                    double r = fabs(c[i] - ref[i]) / (1.05 * gamma * abs_ab[i] + 1e-30);
                    if (isnan(c[i])) r = INFINITY;
                    if (r > worst_ref) worst_ref = r;
                }
                free(ref);
                printf("  check vs double reference: max |Cd - C| / (1.05 gamma_k (|A||B|)) = %.3g: %s\n", worst_ref,
                       worst_ref <= 1.0 ? "passed" : "FAILED");
                cJSON_AddNumberToObject(root, "check_reference_ratio", worst_ref);
                if (worst_ref > 1.0) rc = 1;
            }
            cJSON_AddBoolToObject(root, "check_passed", rc == 0);
        }
        if (write_json(o, root)) rc = 1;
    }
    free(a);
    free(b);
    free(a_local);
    free(b_local);
    free(c_local);
    free(c);
    free(c_single);
    free(abs_ab);
    tsr_mpi_grid_free(&grid);
    return rc;
}

/* ---- allreduce ---- */

static int run_allreduce(tsr_device *dev, MPI_Comm comm, const options *o) {
    int rank = 0, ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    size_t count = o->floats;
    float *host = malloc(count * sizeof *host), *got = malloc(count * sizeof *got);
    double *expect = calloc(count, sizeof *expect), *magnitude = calloc(count, sizeof *magnitude);
    if (!host || !got || !expect || !magnitude) tsr_mpi_abort(comm, "out of host memory for %zu floats", count);
    /* Each rank's data comes from seed + rank, so every rank can form the exact sum itself. */
    for (int r = 0; r < ranks; ++r) {
        uint64_t state = o->seed + (uint64_t)r;
        tsr_random_fill(got, count, &state, -1.0f, 1.0f);
        for (size_t i = 0; i < count; ++i) {
            expect[i] += got[i];
            magnitude[i] += fabs(got[i]);
        }
        if (r == rank) memcpy(host, got, count * sizeof *host);
    }
    cl_mem buf = device_buffer(comm, dev, count, host);
    double *times = malloc((size_t)o->reps * sizeof *times);
    tsr_mpi_allreduce_times t = {0, 0, 0, 0};
    for (int r = 0; r < o->reps + 1; ++r) { /* the first is the warm-up */
        clEnqueueWriteBuffer(tsr_device_queue(dev), buf, CL_TRUE, 0, count * 4, host, 0, NULL, NULL);
        sync_ranks(comm, "every rank before an all-reduce (MPI_Ibarrier)");
        tsr_status st = tsr_mpi_allreduce_device(dev, comm, buf, 0, count, o->chunk, &t);
        if (st != TSR_SUCCESS) tsr_mpi_abort(comm, "all-reduce: %s", tsr_last_error());
        double job = max_over_ranks(comm, t.total);
        if (r > 0) times[r - 1] = job;
    }
    double time = util_median(times, o->reps);
    free(times);
    if (clEnqueueReadBuffer(tsr_device_queue(dev), buf, CL_TRUE, 0, count * 4, got, 0, NULL, NULL) != CL_SUCCESS)
        tsr_mpi_abort(comm, "reading the all-reduced buffer failed");
    /* Sums of P floats in any order: within (P - 1) u sum |x| of the exact sum, plus the final rounding. */
    double u = ldexp(1.0, -24), worst = 0;
    for (size_t i = 0; i < count; ++i) {
        double bound = (ranks - 1) * u * magnitude[i] + u * fabs(expect[i]) + 1e-30;
        double ratio = isnan(got[i]) ? INFINITY : fabs(got[i] - expect[i]) / bound;
        if (ratio > worst) worst = ratio;
    }
    double worst_all = max_over_ranks(comm, worst);
    double alpha = 0, beta = 0;
    tsr_mpi_measure_link(comm, 0, 5, &alpha, &beta);
    tsr_mpi_model model = {ranks, alpha, beta, 1, 1};
    double predicted = tsr_mpi_model_allreduce(&model, 4.0 * count);
    int rc = worst_all <= 1.0 ? 0 : 1;
    if (rank == 0) {
        double bytes = 4.0 * count;
        printf("tessera-mpi allreduce: %zu floats on %d rank(s), chunks of %zu, device %s\n", count, ranks,
               o->chunk ? o->chunk : (size_t)1 << 20, tsr_device_get_info(dev)->name);
        printf("  time %.4f s (median of %d, slowest rank)  algorithm bandwidth %.2f GB/s  bus bandwidth %.2f GB/s\n",
               time, o->reps, bytes / time * 1e-9, ranks > 1 ? 2.0 * (ranks - 1) / ranks * bytes / time * 1e-9 : 0);
        printf("  this rank: waits for reductions %.4f s, for device transfers %.4f s (last repetition)\n", t.comm_wait,
               t.transfer);
        printf("  model (ring, alpha %.2f us, beta %.3f ns/B measured by ping-pong): %.4f s\n", alpha * 1e6, beta * 1e9,
               predicted);
        printf("  check: max error / bound = %.3g over all ranks: %s\n", worst_all, rc ? "FAILED" : "passed");
        cJSON *root = json_header(o, dev, ranks, 0, 0);
        cJSON_AddNumberToObject(root, "floats", (double)count);
        cJSON_AddNumberToObject(root, "time_s", time);
        cJSON_AddNumberToObject(root, "algorithm_gb_s", bytes / time * 1e-9);
        cJSON_AddNumberToObject(root, "alpha_s", alpha);
        cJSON_AddNumberToObject(root, "beta_s_per_byte", beta);
        cJSON_AddNumberToObject(root, "predicted_s", predicted);
        cJSON_AddNumberToObject(root, "check_bound_ratio", worst_all);
        cJSON_AddBoolToObject(root, "check_passed", rc == 0);
        if (write_json(o, root)) rc = 1;
    }
    clReleaseMemObject(buf);
    free(host);
    free(got);
    free(expect);
    free(magnitude);
    return rc;
}

/* ---- model ---- */

/* The local rate with every rank computing at once: each rank runs the device work of its own
 * SUMMA block as SUMMA does it (per panel: upload A and B panels from host memory into one of two
 * device buffers, the beta = 1 GEMM; then the C block read back), with no communication, all
 * ranks at the same time; the slowest sets the rate. Returns FLOP/s per rank of the slowest block. */
static double shared_rate(tsr_device *dev, const tsr_mpi_grid *grid, const options *o, double *slowest_s) {
    size_t r0, mi, c0, nj;
    tsr_mpi_block(o->m, grid->pr, grid->my_row, &r0, &mi);
    tsr_mpi_block(o->n, grid->pc, grid->my_col, &c0, &nj);
    size_t w = o->panel < o->k ? o->panel : o->k, panels = (o->k + w - 1) / w;
    float *a_host = calloc(mi * w + 1, sizeof(float)), *b_host = calloc(w * nj + 1, sizeof(float));
    float *c_host = malloc((mi * nj + 1) * sizeof(float));
    if (!a_host || !b_host || !c_host) tsr_mpi_abort(grid->comm, "out of host memory for the local-rate panels");
    cl_mem a[2], b[2];
    for (int i = 0; i < 2; ++i) {
        a[i] = device_buffer(grid->comm, dev, mi * w, NULL);
        b[i] = device_buffer(grid->comm, dev, w * nj, NULL);
    }
    cl_mem c = device_buffer(grid->comm, dev, mi * nj, NULL);
    cl_command_queue queue = tsr_device_queue(dev);
    local_sgemm(grid->comm, dev, mi, nj, w, a[0], b[0], c, 0.0f); /* warm-up */
    double *times = malloc((size_t)o->reps * sizeof *times);
    for (int r = 0; r < o->reps; ++r) {
        sync_ranks(grid->comm, "every rank before the local-rate measurement (MPI_Ibarrier)");
        double start = util_now_s();
        for (size_t p = 0; p < panels && mi && nj; ++p) {
            size_t width = p + 1 < panels ? w : o->k - p * w;
            int buf = (int)(p % 2);
            cl_int err = clEnqueueWriteBuffer(queue, a[buf], CL_FALSE, 0, mi * width * 4, a_host, 0, NULL, NULL);
            if (err == CL_SUCCESS)
                err = clEnqueueWriteBuffer(queue, b[buf], CL_FALSE, 0, width * nj * 4, b_host, 0, NULL, NULL);
            if (err != CL_SUCCESS ||
                tsr_matmul(dev,
                           &(tsr_matmul_desc){.m = mi, .n = nj, .k = width, .alpha = 1.0f, .beta = p ? 1.0f : 0.0f},
                           a[buf], b[buf], c, NULL, NULL) != TSR_SUCCESS)
                tsr_mpi_abort(grid->comm, "the local-rate measurement failed: %s", tsr_last_error());
            clFlush(queue);
        }
        if (mi && nj && clEnqueueReadBuffer(queue, c, CL_TRUE, 0, mi * nj * 4, c_host, 0, NULL, NULL) != CL_SUCCESS)
            tsr_mpi_abort(grid->comm, "the local-rate measurement failed reading C");
        times[r] = max_over_ranks(grid->comm, util_now_s() - start);
    }
    *slowest_s = util_median(times, o->reps);
    free(times);
    for (int i = 0; i < 2; ++i) {
        clReleaseMemObject(a[i]);
        clReleaseMemObject(b[i]);
    }
    clReleaseMemObject(c);
    free(a_host);
    free(b_host);
    free(c_host);
    /* The largest block is the slowest: its work over the slowest time. */
    double mi_max = ceil((double)o->m / grid->pr), nj_max = ceil((double)o->n / grid->pc);
    return 2.0 * mi_max * nj_max * (double)o->k / *slowest_s;
}

static void print_cluster(const options *o, const cluster_spec *cs) {
    tsr_mpi_model model = {cs->ranks, cs->latency_s, 1.0 / cs->link_bytes_s, cs->rate, cs->rate};
    int pr, pc;
    tsr_mpi_grid_shape(cs->ranks, &pr, &pc);
    printf("tessera-mpi model --cluster: predictions only (nothing measured). Assumptions:\n"
           "  P = %d ranks on a %d x %d grid, one GPU-class device each, local GEMM at %.1f TFLOP/s on every\n"
           "  rank (the rate of the blocks as given, whatever their size), links of %.1f Gbit/s (beta = %.3g s/B)\n"
           "  with %.2f us latency (alpha), binomial-tree broadcasts, no overlap lost to the network stack,\n"
           "  panel width %zu, fp32; efficiency against one such rank doing the whole GEMM.\n",
           cs->ranks, pr, pc, cs->rate * 1e-12, cs->link_bytes_s * 8e-9, model.beta, cs->latency_s * 1e6, o->panel);
    printf("\n  %8s %12s %12s %12s %10s %10s\n", "n", "time s", "GEMM s", "comm s", "comm%", "efficiency");
    for (size_t n = 1024; n <= 131072; n *= 2) {
        tsr_mpi_summa_prediction p;
        tsr_mpi_model_summa(&model, n, n, n, o->panel, &p);
        printf("  %8zu %12.4g %12.4g %12.4g %9.1f%% %10.3f%s\n", n, p.total, p.compute, p.comm, 100 * p.comm_share,
               p.efficiency, n == o->n ? "  <- --n" : "");
    }
    if (o->n & (o->n - 1) || o->n < 1024 || o->n > 131072) {
        tsr_mpi_summa_prediction p;
        tsr_mpi_model_summa(&model, o->n, o->n, o->n, o->panel, &p);
        printf("  %8zu %12.4g %12.4g %12.4g %9.1f%% %10.3f  <- --n\n", o->n, p.total, p.compute, p.comm,
               100 * p.comm_share, p.efficiency);
    }
    /* Communication dominates while a panel's broadcasts take longer than its GEMM; both grow with
     * n (n^2 against n), so there is one crossing: bisect for it. */
    const size_t top = (size_t)1 << 24;
    size_t lo = 1, hi = top;
    tsr_mpi_summa_prediction ends[2];
    tsr_mpi_model_summa(&model, lo, lo, lo, o->panel, &ends[0]);
    tsr_mpi_model_summa(&model, hi, hi, hi, o->panel, &ends[1]);
    for (int i = 0; i < 64 && lo + 1 < hi; ++i) {
        size_t mid = lo + (hi - lo) / 2;
        tsr_mpi_summa_prediction p;
        tsr_mpi_model_summa(&model, mid, mid, mid, o->panel, &p);
        if (p.comm > p.compute)
            lo = mid;
        else
            hi = mid;
    }
    if (!(ends[0].comm > ends[0].compute)) /* one rank, or links so fast that no n is communication bound */
        printf("\n  communication never dominates: the broadcasts of a panel take no longer than its GEMM at any n.\n");
    else if (ends[1].comm > ends[1].compute)
        printf("\n  communication dominates (broadcasts of a panel take longer than its GEMM) at every n up to %zu.\n",
               top);
    else
        printf("\n  communication dominates (broadcasts of a panel take longer than its GEMM) below n = %zu;\n"
               "  above it the broadcasts hide behind the GEMM and only the first panel's are exposed.\n",
               hi);
    /* All-reduce vs compute: a data-parallel step over G parameters and T tokens per rank does
     * about 6 T G FLOPs of GEMMs (2 forward, 4 backward) and one all-reduce of G floats. */
    double g = (double)o->grad, tokens = (double)o->tokens;
    double reduce = tsr_mpi_model_allreduce(&model, 4.0 * g), compute = 6.0 * tokens * g / cs->rate;
    double even_tokens = reduce * cs->rate / (6.0 * g);
    printf("\n  all-reduce vs compute, one data-parallel step: a gradient of G = %.3g floats (%.2f GB), T = %zu\n"
           "  tokens per rank. GEMMs: 6 T G = %.3g FLOP -> %.4f s at %.1f TFLOP/s. Ring all-reduce:\n"
           "  2 (P-1) alpha + 2 (P-1)/P 4G beta = %.4f s. Ratio all-reduce / compute = %.2f; they are equal at\n"
           "  T = %.0f tokens per rank (more tokens hide the all-reduce behind the backward pass, fewer expose it).\n",
           g, 4 * g * 1e-9, o->tokens, 6 * tokens * g, compute, cs->rate * 1e-12, reduce, reduce / compute,
           even_tokens);
}

static int run_model(tsr_device *dev, MPI_Comm comm, const options *o) {
    tsr_mpi_grid grid;
    tsr_mpi_grid_init(comm, &grid);
    double alpha = 0, beta = 0;
    tsr_mpi_measure_link(comm, 0, 5, &alpha, &beta);
    float *a = NULL, *b = NULL;
    make_inputs(o, grid.rank, &a, &b);
    float *a_local, *b_local;
    size_t ar, ac, br, bc, cr, cc, c0;
    tsr_mpi_scatter_matrix(&grid, a, o->m, o->k, &a_local, &ar, &ac);
    tsr_mpi_scatter_matrix(&grid, b, o->k, o->n, &b_local, &br, &bc);
    tsr_mpi_block(o->m, grid.pr, grid.my_row, &c0, &cr);
    tsr_mpi_block(o->n, grid.pc, grid.my_col, &c0, &cc);
    float *c_local = malloc(cr && cc ? cr * cc * sizeof(float) : 1);
    /* The local rate and the distributed run alternate, one repetition each, so that load from
     * outside the job falls on both alike; the medians are compared. */
    options once = *o;
    once.reps = 1;
    double *rates = malloc((size_t)o->reps * sizeof *rates);
    summa_result *runs = malloc((size_t)o->reps * sizeof *runs);
    double *totals = malloc((size_t)o->reps * sizeof *totals);
    for (int r = 0; r < o->reps; ++r) {
        double slowest = 0;
        rates[r] = shared_rate(dev, &grid, &once, &slowest);
        runs[r] = run_summa(dev, &grid, &once, a_local, b_local, c_local);
        totals[r] = runs[r].total;
    }
    double rate_shared = util_median(rates, o->reps), med = util_median(totals, o->reps);
    summa_result res = runs[0];
    for (int r = 0; r < o->reps; ++r)
        if (fabs(runs[r].total - med) < fabs(res.total - med)) res = runs[r];
    free(rates);
    free(runs);
    free(totals);
    double single = single_rank_gemm(comm, dev, o, a, b, NULL, NULL);
    double flops = 2.0 * (double)o->m * o->n * o->k;
    tsr_mpi_model model = {grid.ranks, alpha, beta, rate_shared, flops / single};
    tsr_mpi_summa_prediction p;
    tsr_mpi_model_summa(&model, o->m, o->n, o->k, o->panel, &p);
    double efficiency = single / (grid.ranks * res.total);
    int rc = 0;
    if (grid.rank == 0) {
        printf("tessera-mpi model: %zu x %zu x %zu on %d rank(s), grid %d x %d, panel %zu, device %s, "
               "POCL_MAX_PTHREAD_COUNT=%s\n",
               o->m, o->n, o->k, grid.ranks, grid.pr, grid.pc, o->panel, tsr_device_get_info(dev)->name,
               getenv("POCL_MAX_PTHREAD_COUNT") ? getenv("POCL_MAX_PTHREAD_COUNT") : "(unset)");
        printf("  measured inputs: alpha %.2f us, beta %.4f ns/B (%.2f GB/s) by ping-pong of ranks 0 and 1;\n"
               "  local rate %.2f GFLOP/s per rank measured with all %d ranks computing at once (each its SUMMA\n"
               "  block's device work: panel uploads, panel GEMMs, C read back; no communication: the same\n"
               "  sharing of the cores as the run%s);\n"
               "  single-rank rate %.2f GFLOP/s (rank 0 alone).\n",
               alpha * 1e6, beta * 1e9, beta > 0 ? 1e-9 / beta : 0, rate_shared * 1e-9, grid.ranks,
               grid.ranks > 2 ? ", oversubscribed: more ranks than cores" : "", model.rate_single * 1e-9);
        printf("\n  %-22s %12s %12s\n", "", "predicted", "measured");
        printf("  %-22s %12.4f %12.4f\n", "time s", p.total, res.total);
        printf("  %-22s %12.4f %12.4f\n", "local work s", p.compute, res.local_gemm);
        printf("  %-22s %12.4f %12.4f\n", "communication s", p.comm, res.comm_total);
        printf("  %-22s %11.1f%% %11.1f%%\n", "exposed comm share", 100 * p.comm_share, 100 * res.comm_share);
        printf("  %-22s %12.3f %12.3f\n", "parallel efficiency", p.efficiency, efficiency);
        double diff = fabs(p.efficiency - efficiency) / efficiency;
        printf("  prediction vs measurement: efficiency differs by %.1f%%\n", 100 * diff);
        if (res.total < 0.1) /* 0.1 s: a few ms per panel of fixed costs are then no longer small */
            printf("  note: a run this short is dominated by fixed costs per panel (launches, polls every 0.5-2 ms,\n"
                   "  message latency under shared cores) that the model leaves out; use a larger --n\n");
        printf("  (local work: predicted = panel uploads + GEMMs + C read back at the shared rate; measured =\n"
               "  the GEMMs' device time alone. Communication: predicted = the broadcasts' modelled time;\n"
               "  measured = the time the host waited for broadcasts in flight, hidden or not)\n");
        cJSON *root = json_header(o, dev, grid.ranks, grid.pr, grid.pc);
        cJSON_AddNumberToObject(root, "n", (double)o->n);
        cJSON_AddNumberToObject(root, "m", (double)o->m);
        cJSON_AddNumberToObject(root, "k", (double)o->k);
        cJSON_AddNumberToObject(root, "panel", (double)o->panel);
        cJSON_AddNumberToObject(root, "reps", o->reps);
        cJSON_AddNumberToObject(root, "alpha_s", alpha);
        cJSON_AddNumberToObject(root, "beta_s_per_byte", beta);
        cJSON_AddNumberToObject(root, "rate_shared_flops", rate_shared);
        cJSON_AddNumberToObject(root, "rate_single_flops", model.rate_single);
        cJSON_AddNumberToObject(root, "predicted_time_s", p.total);
        cJSON_AddNumberToObject(root, "predicted_compute_s", p.compute);
        cJSON_AddNumberToObject(root, "predicted_comm_s", p.comm);
        cJSON_AddNumberToObject(root, "predicted_efficiency", p.efficiency);
        cJSON_AddNumberToObject(root, "measured_time_s", res.total);
        cJSON_AddNumberToObject(root, "measured_local_gemm_s", res.local_gemm);
        cJSON_AddNumberToObject(root, "measured_comm_wait_s", res.comm_wait);
        cJSON_AddNumberToObject(root, "measured_comm_share", res.comm_share);
        cJSON_AddNumberToObject(root, "single_rank_time_s", single);
        cJSON_AddNumberToObject(root, "measured_efficiency", efficiency);
        cJSON_AddNumberToObject(root, "efficiency_relative_difference", diff);
        if (write_json(o, root)) rc = 1;
    }
    free(a);
    free(b);
    free(a_local);
    free(b_local);
    free(c_local);
    tsr_mpi_grid_free(&grid);
    return rc;
}

/* ---- sizes against memory, before anything is allocated ---- */

/* A stretch of one rank's run: the device buffers alive together and the host bytes in use then. */
#define MAX_PHASE_BUFFERS 8
typedef struct phase {
    const char *name;
    size_t buffers[MAX_PHASE_BUFFERS];
    size_t nbuffers;
    size_t host;
} phase;

/* Byte counts from the options, every product and sum checked: the first overflow stays in st
 * (with its message) and every later result is SIZE_MAX. */
typedef struct sizer {
    tsr_status st;
    char what[160]; /* the size options as given: "--n 65536 --check" */
} sizer;

static size_t sz_mad(sizer *z, size_t a, size_t b, size_t c) {
    size_t out = SIZE_MAX;
    if (z->st == TSR_SUCCESS) {
        char what[224];
        snprintf(what, sizeof what, "%s: a byte count", z->what);
        z->st = tsr_size_mad(what, a, b, c, &out);
    }
    return z->st == TSR_SUCCESS ? out : SIZE_MAX;
}
static size_t sz_floats(sizer *z, size_t a, size_t b) { return sz_mad(z, sz_mad(z, a, b, 0), sizeof(float), 0); }
static size_t sz_add(sizer *z, size_t a, size_t b) { return sz_mad(z, a, 1, b); }
static size_t sz_max(size_t a, size_t b) { return a > b ? a : b; }

static void push_buffer(phase *ph, size_t bytes) {
    if (bytes && ph->nbuffers < MAX_PHASE_BUFFERS) ph->buffers[ph->nbuffers++] = bytes;
}

/* GEMM's pack workspace (CPU devices: the tiled kernel packs A and B into buffers the device keeps
 * for later calls, which tsr_workspace_get grows by a quarter and zeroes from a host copy): rows of
 * A and columns of B rounded up to 128, the largest tile. Returns the host bytes of that zeroing. */
static size_t push_pack_workspace(sizer *z, phase *ph, const tsr_device_info *info, size_t m, size_t n, size_t k) {
    size_t rows[2] = {m, n}, most = 0;
    for (int i = 0; i < 2; ++i) {
        size_t bytes = sz_floats(z, (rows[i] + 127) / 128 * 128, k);
        size_t grown = sz_mad(z, bytes / 4, 1, sz_add(z, bytes, 63)) / 64 * 64;
        if (grown > info->max_alloc_bytes) grown = bytes;
        push_buffer(ph, grown);
        most = sz_max(most, grown);
    }
    return most;
}

/* The options that set the sizes of o's command, as given. */
static void size_options_text(const options *o, char *out, size_t size) {
    size_t used = 0;
#define ADD(...) (used += (size_t)snprintf(out + used, used < size ? size - used : 0, __VA_ARGS__))
    out[0] = '\0';
    if (strcmp(o->command, "allreduce") == 0) {
        ADD("--floats %zu", o->floats);
        if (o->has_chunk) ADD(" --chunk %zu", o->chunk);
    } else {
        if (o->has_m) ADD("--m %zu ", o->m);
        ADD("--n %zu", o->n);
        if (o->has_k) ADD(" --k %zu", o->k);
        if (o->has_panel) ADD(" --panel %zu", o->panel);
        if (o->check) ADD(" --check");
    }
#undef ADD
}

/* The host memory this rank may count on: util_host_available(), or TSR_MPI_HOST_MEMORY (bytes; a
 * test hook) when that is lower; 0 when unknown. A malformed TSR_MPI_HOST_MEMORY is an error. */
static tsr_status host_available(uint64_t *out) {
    *out = util_host_available();
    const char *text = getenv("TSR_MPI_HOST_MEMORY");
    if (!text || !*text) return TSR_SUCCESS;
    uint64_t limit = 0;
    if (util_parse_count(text, "TSR_MPI_HOST_MEMORY", 1, UINT64_MAX, &limit) != TSR_SUCCESS)
        return TSR_ERR_INVALID_ARG;
    if (!*out || limit < *out) *out = limit;
    return TSR_SUCCESS;
}

static double mib(uint64_t bytes) { return (double)bytes / 1048576.0; }

/* This rank's own checks of o's command, as rank `rank` of `ranks` ranks with a device: byte counts
 * that overflow, MPI messages over INT_MAX elements, device buffers over the device's largest
 * allocation or, together, its global memory (util_check_memory, phase by phase), and its peak
 * host bytes (*host_need; device buffers count too on a CPU device, whose memory is the host's)
 * over what the host has available. Returns false with the reason in msg. */
static bool check_sizes_local(tsr_device *dev, const options *o, int rank, int ranks, uint64_t available,
                              size_t *host_need, char *msg, size_t size) {
    const tsr_device_info *info = tsr_device_get_info(dev);
    bool cpu = info->type == TSR_DEVICE_CPU;
    sizer z = {TSR_SUCCESS, ""};
    size_options_text(o, z.what, sizeof z.what);
    phase ph[2];
    memset(ph, 0, sizeof ph);
    size_t nph = 0;
    if (strcmp(o->command, "allreduce") == 0) {
        size_t c = o->floats, chunk = o->chunk ? o->chunk : (size_t)1 << 20;
        /* the rank's data, the result read back, the exact sum and the magnitudes (doubles), and
         * the all-reduce's three chunk slots */
        ph[0].name = "the all-reduce buffer and its host arrays";
        push_buffer(&ph[0], sz_floats(&z, c, 1));
        ph[0].host = sz_add(&z, sz_floats(&z, c, 6), sz_floats(&z, chunk < c ? chunk : c, 3));
        nph = 1;
    } else {
        bool gemm = strcmp(o->command, "gemm") == 0;
        int pr, pc;
        tsr_mpi_grid_shape(ranks, &pr, &pc);
        size_t r0, mi, nj, ka, kb, w = o->panel < o->k ? o->panel : o->k;
        tsr_mpi_block(o->m, pr, rank / pc, &r0, &mi);
        tsr_mpi_block(o->n, pc, rank % pc, &r0, &nj);
        tsr_mpi_block(o->k, pc, rank % pc, &r0, &ka);
        tsr_mpi_block(o->k, pr, rank / pc, &r0, &kb);
        /* MPI messages count elements in an int: the largest block of A and B scattered (and of C
         * gathered by --check) to the other ranks, and the panels broadcast, on every rank alike. */
        size_t bm = (o->m + (size_t)pr - 1) / (size_t)pr, bn = (o->n + (size_t)pc - 1) / (size_t)pc;
        size_t bka = (o->k + (size_t)pc - 1) / (size_t)pc, bkb = (o->k + (size_t)pr - 1) / (size_t)pr;
        struct {
            const char *name;
            size_t rows, cols;
            bool sent;
        } msgs[] = {{"a block of A", bm, bka, ranks > 1},
                    {"a block of B", bkb, bn, ranks > 1},
                    {"a block of C", bm, bn, ranks > 1 && gemm && o->check},
                    {"a panel of A", bm, w, true},
                    {"a panel of B", w, bn, true}};
        for (size_t i = 0; i < sizeof msgs / sizeof *msgs; ++i)
            if (msgs[i].sent && sz_mad(&z, msgs[i].rows, msgs[i].cols, 0) > INT_MAX && z.st == TSR_SUCCESS) {
                snprintf(msg, size,
                         "%s: %s on the %d x %d grid is %zu x %zu = %zu floats, more than one MPI message holds "
                         "(%d)",
                         z.what, msgs[i].name, pr, pc, msgs[i].rows, msgs[i].cols, msgs[i].rows * msgs[i].cols,
                         INT_MAX);
                return false;
            }
        /* Held for the whole run: this rank's blocks of A, B and C; on rank 0 A and B, and with
         * --check the gathered C, the single-rank C and |A||B|. */
        size_t held = sz_add(&z, sz_add(&z, sz_floats(&z, mi, ka), sz_floats(&z, kb, nj)), sz_floats(&z, mi, nj));
        if (rank == 0) held = sz_add(&z, held, sz_add(&z, sz_floats(&z, o->m, o->k), sz_floats(&z, o->k, o->n)));
        if (rank == 0 && gemm && o->check) held = sz_add(&z, held, sz_mad(&z, sz_floats(&z, o->m, o->n), 3, 0));
        size_t a_panel = sz_floats(&z, mi, w), b_panel = sz_floats(&z, w, nj), c_block = sz_floats(&z, mi, nj);
        size_t zeros = sz_max(sz_max(a_panel, b_panel), c_block); /* device buffers start from host zeros */
        bool computes = mi && nj && w;
        /* SUMMA: two panels of A and of B on the host and the device, the C block on the device
         * (the warm-up GEMM before it has one of each; model: the local-rate measurement has the
         * same device buffers and one set of host panels) */
        phase *p = &ph[nph++];
        p->name = "SUMMA's panels and C block";
        size_t transient = zeros;
        if (computes) {
            push_buffer(p, a_panel), push_buffer(p, a_panel), push_buffer(p, b_panel), push_buffer(p, b_panel);
            push_buffer(p, c_block);
            if (cpu) transient = sz_max(transient, push_pack_workspace(&z, p, info, mi, nj, w));
        }
        size_t panels = sz_add(&z, sz_mad(&z, a_panel, 2, 0), sz_mad(&z, b_panel, 2, 0));
        if (!gemm) panels = sz_max(panels, sz_add(&z, sz_add(&z, a_panel, b_panel), c_block));
        p->host = sz_add(&z, held, sz_add(&z, panels, transient));
        /* rank 0 alone: A, B and C whole on the device; with --check |A| and |B| on the host */
        if (rank == 0) {
            p = &ph[nph++];
            p->name = "the single-rank GEMM on rank 0";
            size_t a = sz_floats(&z, o->m, o->k), b = sz_floats(&z, o->k, o->n), c = sz_floats(&z, o->m, o->n);
            push_buffer(p, a), push_buffer(p, b), push_buffer(p, c);
            transient = c;
            if (gemm && o->check) transient = sz_max(transient, sz_mad(&z, c, 2, 0)); /* the double reference */
            if (cpu) transient = sz_max(transient, push_pack_workspace(&z, p, info, o->m, o->n, o->k));
            if (gemm && o->check) transient = sz_add(&z, transient, sz_add(&z, a, b));
            p->host = sz_add(&z, held, transient);
        }
    }
    char what[256];
    size_t need = 0;
    for (size_t i = 0; i < nph && z.st == TSR_SUCCESS; ++i) {
        snprintf(what, sizeof what, "%s: %s", z.what, ph[i].name);
        size_t host = ph[i].host, device = 0;
        for (size_t b = 0; b < ph[i].nbuffers; ++b)
            device = sz_add(&z, device, ph[i].buffers[b]);
        if (cpu) host = sz_add(&z, host, device); /* a CPU device's buffers are host memory */
        if (z.st != TSR_SUCCESS) break;
        if (util_check_memory(dev, what, ph[i].buffers, ph[i].nbuffers, 0) != TSR_SUCCESS) {
            snprintf(msg, size, "%s", tsr_last_error());
            return false;
        }
        if (available && host > available) {
            snprintf(msg, size, "%s: needs %.0f MiB of host memory%s, more than is available (%.0f MiB)", what,
                     mib(host), cpu ? " (with the CPU device's buffers)" : "", mib(available));
            return false;
        }
        need = sz_max(need, host);
    }
    if (z.st != TSR_SUCCESS) {
        snprintf(msg, size, "%s", tsr_last_error());
        return false;
    }
    *host_need = need;
    return true;
}

/* What each rank with a device tells the others before anything is allocated. */
typedef struct size_record {
    char host[MPI_MAX_PROCESSOR_NAME];
    uint64_t need;      /* its peak host bytes */
    uint64_t available; /* its host's available memory; 0: unknown */
    int32_t refused;    /* refused by its own checks */
    int32_t pad;
} size_record;

/* Every size of o's command against every rank's device and host memory, before anything is
 * allocated: each rank's own checks (check_sizes_local), then the ranks on one host together
 * against that host's available memory. The records are all-gathered, so every rank reaches the
 * same verdict; on a refusal one rank prints one line (the lowest rank that refused, else the
 * lowest rank of the first host over its memory) and every rank returns 2. Collective over comm. */
static int check_sizes(MPI_Comm comm, tsr_device *dev, const options *o) {
    int rank = 0, ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    char msg[1024] = "";
    size_record mine;
    memset(&mine, 0, sizeof mine);
    int len = 0;
    MPI_Get_processor_name(mine.host, &len);
    uint64_t available = 0;
    size_t need = 0;
    if (host_available(&available) != TSR_SUCCESS) {
        snprintf(msg, sizeof msg, "%s", tsr_last_error());
        mine.refused = 1;
    } else {
        mine.refused = !check_sizes_local(dev, o, rank, ranks, available, &need, msg, sizeof msg);
    }
    mine.need = need;
    mine.available = available;
    size_record *all = malloc((size_t)ranks * sizeof *all);
    if (!all) tsr_mpi_abort(comm, "checking sizes: out of host memory");
    MPI_Request req;
    MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, comm, &req);
    tsr_mpi_wait(comm, &req, "every rank's sizes against its memory (MPI_Iallgather)");
    int printer = -1;
    for (int r = 0; r < ranks && printer < 0; ++r)
        if (all[r].refused) printer = r;
    for (int r = 0; r < ranks && printer < 0; ++r) {
        int first = 1, count = 0; /* r is the lowest rank of its host */
        uint64_t sum = 0, most = 0, avail = 0;
        for (int q = 0; q < ranks; ++q) {
            if (strncmp(all[q].host, all[r].host, sizeof all[r].host) != 0) continue;
            if (q < r) first = 0;
            ++count;
            sum = all[q].need > UINT64_MAX - sum ? UINT64_MAX : sum + all[q].need;
            most = all[q].need > most ? all[q].need : most;
            if (all[q].available && (!avail || all[q].available < avail)) avail = all[q].available;
        }
        if (!first || !avail || sum <= avail) continue;
        printer = r;
        if (r == rank) {
            char what[160];
            size_options_text(o, what, sizeof what);
            snprintf(msg, sizeof msg,
                     "%s: the %d ranks on host %s need %.0f MiB of host memory together (up to %.0f MiB each), more "
                     "than is available (%.0f MiB)",
                     what, count, all[r].host, mib(sum), mib(most), mib(avail));
        }
    }
    free(all);
    if (printer < 0) return 0;
    if (printer == rank) {
        fprintf(stderr, "tessera-mpi: %s: %s\n", tsr_mpi_whoami(), msg);
        fflush(stderr);
    }
    return 2;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    tsr_mpi_check_args(MPI_COMM_WORLD, argc, argv);
    options o;
    int rc = parse_options(argc, argv, &o);
    cluster_spec cs;
    if (!rc && o.cluster) rc = parse_cluster(o.cluster, &cs);
    if (rc || o.help) {
        if (o.help && !rc && rank_world() == 0) fputs(usage_text, stdout);
        MPI_Finalize();
        return rc;
    }
    if (o.cluster) { /* predictions only: no device, no communication */
        if (rank_world() == 0) print_cluster(&o, &cs);
        MPI_Finalize();
        return 0;
    }
    tsr_device *dev = NULL;
    MPI_Comm active = MPI_COMM_NULL;
    if (tsr_mpi_open_device(MPI_COMM_WORLD, o.device, &dev, &active) != TSR_SUCCESS) {
        if (rank_world() == 0) fprintf(stderr, "tessera-mpi: %s\n", tsr_last_error());
        MPI_Finalize();
        return 1;
    }
    int json_failed = 0;
    if (active != MPI_COMM_NULL) rc = check_sizes(active, dev, &o);
    if (active != MPI_COMM_NULL && !rc) check_json(active, &o, &json_failed);
    if (json_failed) {
        rc = 2;
    } else if (active != MPI_COMM_NULL && !rc) {
        if (strcmp(o.command, "gemm") == 0)
            rc = run_gemm(dev, active, &o);
        else if (strcmp(o.command, "allreduce") == 0)
            rc = run_allreduce(dev, active, &o);
        else
            rc = run_model(dev, active, &o);
    }
    if (active != MPI_COMM_NULL) MPI_Comm_free(&active);
    tsr_device_close(dev);
    /* Every rank exits with the worst result (the check and the output are on the first active rank).
     * Ranks without a device wait here for the whole run: the working ranks' heartbeats keep them
     * from timing out while they work (tessera_mpi.h). */
    int worst = 0;
    MPI_Request req;
    MPI_Iallreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
    tsr_mpi_wait(MPI_COMM_WORLD, &req, "every rank's result (MPI_Iallreduce)");
    rc = worst;
    MPI_Finalize();
    return rc;
}
