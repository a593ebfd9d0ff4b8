/* What one GEMM tuning candidate costs to compile, step by step, in several program forms side by
 * side in one process (issue 39; docs/tuning.md, "What a candidate compiles"):
 *   candidate_compile [--device SEL] [--rounds N] [--config CFG] [--size N] [--forms LIST] [--base DIR]
 * Forms (comma-separated, run in rotating order each round):
 *   all     gemm.cl as an ordinary launch builds it (gemm, pack_a, pack_b), all three created
 *           and launched (packs with PoCL's choice of local size);
 *   tuning  the same program, only `gemm` created and launched (the pack kernels come from
 *           programs of their own while tuning);
 *   only    gemm.cl with the pack kernels cut out of the text (Kernel Tuner's way: a program
 *           holding the one kernel it times);
 *   gemmonly  the program tessera builds for a tuning candidate with -DTSR_GEMM_ONLY=1 (the
 *           guard in cl/gemm.cl);
 *   noact   `only` with the epilogue's residual and activation compiled out (what the
 *           epilogue's code costs a compile; not a form tessera can use as is);
 *   base    `tuning` with gemm.cl (and what it includes) from --base DIR: an older kernel text
 *           against the build's, side by side.
 * Each round's programs get a define no other build had (-DTSR_CC_ROUND=...), so PoCL's kernel
 * cache never hits. Per step, wall seconds and process CPU seconds (user + sys, every thread:
 * PoCL compiles on the calling thread or its workers): clBuildProgram, clCreateKernel (all of
 * the form's kernels), first launch of each kernel (enqueue + clFinish: PoCL compiles the
 * kernel for the launch's work-group size there), a second launch of gemm. One JSON line per
 * form with the medians and every round's values. */
#include "internal.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The load averages from /proc/loadavg (zeros where it cannot be read). */
static void load_avg(double l[3]) {
    l[0] = l[1] = l[2] = 0;
    FILE *fp = fopen("/proc/loadavg", "r");
    if (!fp) return;
    if (fscanf(fp, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3) l[0] = l[1] = l[2] = 0;
    fclose(fp);
}

static double cpu_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

enum { STEP_BUILD, STEP_CREATE, STEP_PACK_A, STEP_PACK_B, STEP_GEMM1, STEP_GEMM2, STEP_TOTAL, NSTEPS };
static const char *const step_names[NSTEPS] = {"build", "create", "pack_a_first", "pack_b_first",
                                               "gemm_first", "gemm_second", "total"};
#define MAXFORMS 6
#define MAXROUNDS 64

typedef struct form {
    char name[16];
    double wall[NSTEPS][MAXROUNDS], cpu[NSTEPS][MAXROUNDS];
} form;

static int die(const char *what, cl_int err) {
    fprintf(stderr, "candidate_compile: %s failed: %d\n", what, (int)err);
    exit(1);
}
#define CK(x)                                                                                                        \
    do {                                                                                                             \
        cl_int e_ = (x);                                                                                             \
        if (e_ != CL_SUCCESS) die(#x, e_);                                                                           \
    } while (0)

/* The text between the packing section's marker and the GEMM section's, cut out. */
static char *cut_packs(const char *text) {
    const char *a = strstr(text, "// ---------------------------------------------------------------- packing");
    const char *b = strstr(text, "// ---------------------------------------------------------------- GEMM");
    size_t n = strlen(text);
    if (!a || !b || b < a) return strcpy(malloc(n + 1), text); /* no pack kernels (gemm_smallm.cl) */
    char *out = malloc(n + 1);
    memcpy(out, text, (size_t)(a - text));
    strcpy(out + (a - text), b);
    return out;
}

/* `only`, with the residual and activation of the epilogue replaced by nothing. */
static char *cut_epilogue(const char *only) {
    const char *b = strstr(only, "// ---------------------------------------------------------------- GEMM");
    if (!b) b = strstr(only, "__kernel void gemm(");
    const char *macros = "#define tsr_epi_finish_v(r, res, t, i, a) (r)\n#define tsr_epi_finish(r, res, t, i, a) (r)\n";
    size_t n = strlen(only), m = strlen(macros);
    char *out = malloc(n + m + 1);
    memcpy(out, only, (size_t)(b - only));
    memcpy(out + (b - only), macros, m);
    strcpy(out + (b - only) + m, b);
    return out;
}

static void set_gemm_args(cl_kernel k, cl_int M, cl_int N, cl_int K, cl_mem a, cl_mem b, cl_mem c, cl_mem dummy) {
    cl_float alpha = 1.0f, beta = 0.0f;
    cl_ulong zero = 0;
    cl_int lda = K, ldb = N, ldc = N, none = 0, res_none = -1;
    cl_uint arg = 0;
#define SET(x) CK(clSetKernelArg(k, arg++, sizeof(x), &(x)))
    SET(M); SET(N); SET(K); SET(K); SET(alpha); SET(beta);
    SET(a); SET(zero); SET(lda); SET(zero);
    SET(b); SET(zero); SET(ldb); SET(zero);
    SET(c); SET(zero); SET(ldc); SET(zero);
    SET(dummy); SET(zero); SET(zero); SET(none); SET(none);
    SET(dummy); SET(zero); SET(zero); SET(none);
    SET(dummy); SET(zero); SET(res_none);
#undef SET
}

static void set_pack_args(cl_kernel k, cl_int rows, cl_int K, cl_int ld, cl_mem src, cl_mem dst) {
    cl_ulong zero = 0;
    cl_uint arg = 0;
#define SET(x) CK(clSetKernelArg(k, arg++, sizeof(x), &(x)))
    SET(rows); SET(K); SET(src); SET(zero); SET(ld); SET(zero); SET(dst); SET(zero);
#undef SET
}

int main(int argc, char **argv) {
    const char *selector = NULL, *config_text = "MWI=8 VW=16 NVW=2 KU=4 WGM=1 WGN=1 PACKA=1 PACKB=1 PK=16 NT=4";
    const char *forms_text = "tuning,only,all";
    const char *base_dir = NULL;
    int rounds = 5;
    int size = 256;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) selector = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--config") && i + 1 < argc) config_text = argv[++i];
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--forms") && i + 1 < argc) forms_text = argv[++i];
        else if (!strcmp(argv[i], "--base") && i + 1 < argc) base_dir = argv[++i];
        else {
            fprintf(stderr, "usage: candidate_compile [--device SEL] [--rounds N] [--config CFG] [--size N] [--forms LIST]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > MAXROUNDS || size < 16) return fprintf(stderr, "candidate_compile: bad --rounds or --size\n"), 2;
    form forms[MAXFORMS];
    int nforms = 0;
    char list[128];
    snprintf(list, sizeof list, "%s", forms_text);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t && nforms < MAXFORMS; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "all") && strcmp(t, "tuning") && strcmp(t, "only") && strcmp(t, "noact") && strcmp(t, "gemmonly") &&
            (strcmp(t, "base") || !base_dir))
            return fprintf(stderr, "candidate_compile: unknown form '%s'\n", t), 2;
        memset(&forms[nforms], 0, sizeof forms[nforms]);
        snprintf(forms[nforms++].name, sizeof forms[0].name, "%s", t);
    }

    tsr_device *dev = NULL;
    if (tsr_device_open(selector, &dev) != TSR_SUCCESS) return fprintf(stderr, "%s\n", tsr_last_error()), 1;
    tsr_config cfg;
    if (tsr_config_parse(&tsr_op_gemm, config_text, "--config", &cfg) != TSR_SUCCESS)
        return fprintf(stderr, "%s\n", tsr_last_error()), 1;
    const char *source_name = tsr_op_gemm.program_source ? tsr_op_gemm.program_source(&cfg) : "gemm";
    char options[768];
    tsr_op_gemm.build_options(&cfg, 0, options, sizeof options);
    const char *text;
    char *owned = NULL;
    size_t length;
    if (tsr_load_kernel_source(getenv("TSR_KERNEL_DIR"), source_name, &owned, &text, &length) != TSR_SUCCESS)
        return fprintf(stderr, "%s\n", tsr_last_error()), 1;
    char *full = malloc(length + 1);
    memcpy(full, text, length);
    full[length] = '\0';
    char *only = cut_packs(full), *noact = cut_epilogue(only), *base = NULL;
    if (base_dir) {
        char *base_owned = NULL;
        if (tsr_load_kernel_source(base_dir, source_name, &base_owned, &text, &length) != TSR_SUCCESS)
            return fprintf(stderr, "%s\n", tsr_last_error()), 1;
        base = malloc(length + 1);
        memcpy(base, text, length);
        base[length] = '\0';
        free(base_owned);
    }

    cl_context ctx = tsr_device_context(dev);
    cl_device_id id = tsr_device_id(dev);
    cl_int err;
    cl_command_queue q = clCreateCommandQueue(ctx, id, 0, &err);
    CK(err);
    const int *v = cfg.values;
    int mwi = 1, vw = 1, nvw = 1, wgm = 1, wgn = 1, pk = 16, nt = 1;
    for (int p = 0; p < tsr_op_gemm.nparams; ++p) {
        const char *name = tsr_op_gemm.params[p].name;
        int *at = !strcmp(name, "MWI") ? &mwi : !strcmp(name, "VW") ? &vw : !strcmp(name, "NVW") ? &nvw
                  : !strcmp(name, "WGM") ? &wgm : !strcmp(name, "WGN") ? &wgn : !strcmp(name, "PK") ? &pk
                  : !strcmp(name, "NT") ? &nt : NULL;
        if (at) *at = v[p];
    }
    int nwi = vw * nvw;
    if (wgm < 1) wgm = 1; /* smallm: one-item groups */
    if (wgn < 1) wgn = 1;
    size_t n = (size_t)size, floats = (n + 64) * (n + 64) * 2;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, floats * 4, NULL, &err);
    CK(err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, floats * 4, NULL, &err);
    CK(err);
    cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, floats * 4, NULL, &err);
    CK(err);
    cl_mem ap = clCreateBuffer(ctx, CL_MEM_READ_WRITE, floats * 4, NULL, &err);
    CK(err);
    cl_mem bp = clCreateBuffer(ctx, CL_MEM_READ_WRITE, floats * 4, NULL, &err);
    CK(err);
    cl_mem dummy = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &err);
    CK(err);
    float zero = 0.0f;
    CK(clEnqueueFillBuffer(q, a, &zero, 4, 0, floats * 4, 0, NULL, NULL));
    CK(clEnqueueFillBuffer(q, b, &zero, 4, 0, floats * 4, 0, NULL, NULL));
    CK(clFinish(q));

    /* PoCL's first build of a context loads its kernel library: a throwaway program first */
    {
        const char *warm = "__kernel void warm(__global float *x) { x[get_global_id(0)] = 1.0f; }";
        cl_program p = clCreateProgramWithSource(ctx, 1, &warm, NULL, &err);
        CK(err);
        CK(clBuildProgram(p, 1, &id, "", NULL, NULL));
        cl_kernel k = clCreateKernel(p, "warm", &err);
        CK(err);
        CK(clSetKernelArg(k, 0, sizeof dummy, &dummy));
        size_t g = 4;
        CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
        CK(clFinish(q));
        clReleaseKernel(k);
        clReleaseProgram(p);
    }
    fprintf(stderr, "source: %s, options: %s\n", source_name, options);
    const unsigned tag = (unsigned)getpid();
    for (int r = 0; r < rounds; ++r) {
        for (int j = 0; j < nforms; ++j) {
            form *f = &forms[(j + r) % nforms];
            const char *src = !strcmp(f->name, "only")    ? only
                              : !strcmp(f->name, "noact") ? noact
                              : !strcmp(f->name, "base")  ? base
                                                          : full;
            bool packs = !strcmp(f->name, "all") && strstr(src, "pack_a");
            char opts[1024];
            snprintf(opts, sizeof opts, "-w -cl-std=CL1.2 %s -DTSR_CC_ROUND=%u%02d%d%s", options, tag, r, j,
                     !strcmp(f->name, "gemmonly") ? " -DTSR_GEMM_ONLY=1" : "");
            double w0 = tsr_now_s(), c0 = cpu_now(), w, cc;
#define STEP(s)                                                                                                      \
    do {                                                                                                             \
        w = tsr_now_s(), cc = cpu_now();                                                                             \
        f->wall[s][r] = w - w0, f->cpu[s][r] = cc - c0;                                                              \
        w0 = w, c0 = cc;                                                                                             \
    } while (0)
            double wstart = w0, cstart = c0;
            cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
            CK(err);
            err = clBuildProgram(p, 1, &id, opts, NULL, NULL);
            if (err != CL_SUCCESS) {
                char log[8192] = "";
                clGetProgramBuildInfo(p, id, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
                fprintf(stderr, "%s\n", log);
                die("clBuildProgram", err);
            }
            STEP(STEP_BUILD);
            cl_kernel kg = clCreateKernel(p, "gemm", &err), ka = NULL, kb = NULL;
            CK(err);
            if (packs) {
                ka = clCreateKernel(p, "pack_a", &err);
                CK(err);
                kb = clCreateKernel(p, "pack_b", &err);
                CK(err);
            }
            STEP(STEP_CREATE);
            cl_int M = size, N = size, K = size;
            if (packs) {
                set_pack_args(ka, M, K, K, a, ap);
                size_t ga[3] = {(size_t)(K + pk - 1) / pk, (size_t)(M + mwi - 1) / mwi, 1};
                CK(clEnqueueNDRangeKernel(q, ka, 3, NULL, ga, NULL, 0, NULL, NULL));
                CK(clFinish(q));
            }
            STEP(STEP_PACK_A);
            if (packs) {
                set_pack_args(kb, N, K, N, b, bp);
                size_t gb[3] = {(size_t)(K + pk - 1) / pk, (size_t)(N + nwi - 1) / nwi, 1};
                CK(clEnqueueNDRangeKernel(q, kb, 3, NULL, gb, NULL, 0, NULL, NULL));
                CK(clFinish(q));
            }
            STEP(STEP_PACK_B);
            size_t local[3] = {(size_t)wgm, (size_t)wgn, 1};
            size_t tiles = ((size_t)N + nwi - 1) / nwi, items = (tiles + nt - 1) / nt;
            size_t global[3] = {(((size_t)M + mwi - 1) / mwi + wgm - 1) / wgm * wgm, (items + wgn - 1) / wgn * wgn, 1};
            set_gemm_args(kg, M, N, K, ap, bp, c, dummy);
            CK(clEnqueueNDRangeKernel(q, kg, 3, NULL, global, local, 0, NULL, NULL));
            CK(clFinish(q));
            STEP(STEP_GEMM1);
            CK(clEnqueueNDRangeKernel(q, kg, 3, NULL, global, local, 0, NULL, NULL));
            CK(clFinish(q));
            STEP(STEP_GEMM2);
            f->wall[STEP_TOTAL][r] = w0 - wstart, f->cpu[STEP_TOTAL][r] = c0 - cstart;
#undef STEP
            clReleaseKernel(kg);
            if (ka) clReleaseKernel(ka);
            if (kb) clReleaseKernel(kb);
            clReleaseProgram(p);
            double l[3] = {0};
            load_avg(l);
            fprintf(stderr, "round %d %-8s build %.3f/%.3f gemm_first %.3f/%.3f total %.3f/%.3f (wall/cpu s) load %.2f\n", r,
                    f->name, f->wall[STEP_BUILD][r], f->cpu[STEP_BUILD][r], f->wall[STEP_GEMM1][r],
                    f->cpu[STEP_GEMM1][r], f->wall[STEP_TOTAL][r], f->cpu[STEP_TOTAL][r], l[0]);
        }
    }
    double load[3] = {0};
    load_avg(load);
    for (int j = 0; j < nforms; ++j) {
        form *f = &forms[j];
        printf("{\"form\": \"%s\", \"config\": \"%s\", \"size\": %d, \"rounds\": %d, \"load_at_end\": [%.2f, %.2f, %.2f]",
               f->name, config_text, size, rounds, load[0], load[1], load[2]);
        for (int s = 0; s < NSTEPS; ++s) {
            double wc[MAXROUNDS], cc[MAXROUNDS];
            memcpy(wc, f->wall[s], sizeof wc);
            memcpy(cc, f->cpu[s], sizeof cc);
            double wm = util_median(wc, rounds), cm = util_median(cc, rounds);
            printf(", \"%s\": {\"wall_median\": %.4f, \"cpu_median\": %.4f, \"cpu\": [", step_names[s], wm, cm);
            for (int r = 0; r < rounds; ++r) printf("%s%.3f", r ? ", " : "", f->cpu[s][r]);
            printf("]}");
        }
        printf("}\n");
    }
    free(only);
    free(noact);
    free(base);
    free(full);
    free(owned);
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    clReleaseMemObject(c);
    clReleaseMemObject(ap);
    clReleaseMemObject(bp);
    clReleaseMemObject(dummy);
    clReleaseCommandQueue(q);
    tsr_device_close(dev);
    return 0;
}
