/* The side-by-side bench tools' shared pieces (ab_harness.h). */
#include "ab_harness.h"

#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool ab_arg(int argc, char **argv, int *i, ab_opts *o, unsigned flags) {
    const char *a = argv[*i];
    if (*i + 1 >= argc) return false;
    if (!strcmp(a, "--device")) o->selector = argv[++*i];
    else if (!strcmp(a, "--rounds")) o->rounds = atoi(argv[++*i]);
    else if (!strcmp(a, "--calls")) o->calls = atoi(argv[++*i]);
    else if ((flags & AB_BATCH) && !strcmp(a, "--batch")) o->batch = (size_t)atoi(argv[++*i]);
    else if ((flags & AB_LAYERS) && !strcmp(a, "--layers")) o->list = argv[++*i];
    else if ((flags & AB_WEIGHTS) && !strcmp(a, "--weights")) {
        const char *v = argv[++*i] ? argv[*i] : "";
        o->kept = !strcmp(v, "kept");
        if (!o->kept && strcmp(v, "per-call")) {
            fprintf(stderr, "--weights takes kept or per-call, not '%s'\n", v);
            o->rounds = -1; /* ab_check says no */
        }
    } else return false;
    return true;
}

bool ab_check(const char *tool, const ab_opts *o) {
    if (o->rounds < 1 || o->rounds > 1000 || o->calls < 1 || o->calls > 100000 || o->batch < 1 || o->batch > 64) {
        fprintf(stderr, "%s: --rounds 1..1000, --calls 1..100000, --batch 1..64\n", tool);
        return false;
    }
    return true;
}

bool ab_layers_known(const char *tool, const char *list, const void *table, size_t count, size_t stride) {
    if (!list || strcmp(list, "all") == 0) return true;
    const char *at = list;
    while (true) {
        size_t len = strcspn(at, ",");
        bool found = false;
        for (size_t i = 0; i < count && !found; ++i) {
            const char *name = *(const char *const *)((const char *)table + i * stride);
            found = strlen(name) == len && strncmp(name, at, len) == 0;
        }
        if (!found) {
            fprintf(stderr, "%s: --layers: no layer '%.*s' here; the layers:", tool, (int)len, at);
            for (size_t i = 0; i < count; ++i)
                fprintf(stderr, "%s %s", i ? "," : "", *(const char *const *)((const char *)table + i * stride));
            fprintf(stderr, "\n");
            return false;
        }
        if (!at[len]) return true;
        at += len + 1;
    }
}

bool ab_json_safe(const char *tool, const char *flag, const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; ++c)
        if (*c == '"' || *c == '\\' || *c < 0x20 || *c == 0x7f) {
            fprintf(stderr, "%s: %s '%s' holds a quote, a backslash or a control character (it is printed into JSON)\n",
                    tool, flag, s);
            return false;
        }
    return true;
}

bool ab_parse_var(const char *tool, const char *s, ab_var *v) {
    if (!ab_json_safe(tool, "--var", s)) return false;
    const char *eq = strchr(s, '='), *bar = eq ? strchr(eq, '|') : NULL;
    const char *bar2 = bar ? strchr(bar + 1, '|') : NULL; /* an optional |GEMM: that device's GEMM configuration */
    const size_t clen = bar2 ? (size_t)(bar2 - bar - 1) : bar ? strlen(bar + 1) : 0;
    if (!eq || !bar || eq == s || (size_t)(eq - s) >= sizeof v->label || (size_t)(bar - eq - 1) >= sizeof v->dir ||
        clen >= sizeof v->config || (bar2 && strlen(bar2 + 1) >= sizeof v->gemm)) {
        fprintf(stderr, "%s: --var takes LABEL=DIR|CONFIG[|GEMM] (each part shorter than its limit), not '%s'\n", tool,
                s);
        return false;
    }
    memset(v, 0, sizeof *v);
    memcpy(v->label, s, (size_t)(eq - s));
    memcpy(v->dir, eq + 1, (size_t)(bar - eq - 1));
    snprintf(v->config, sizeof v->config, "%.*s", (int)clen, bar + 1);
    if (!strcmp(v->config, "builtin")) v->config[0] = '\0';
    if (bar2) snprintf(v->gemm, sizeof v->gemm, "%s", bar2 + 1);
    return true;
}

void ab_default_var(ab_var *v) {
    memset(v, 0, sizeof *v);
    snprintf(v->label, sizeof v->label, "builtin");
}

int ab_var_args(const char *tool, int argc, char **argv, ab_opts *o, ab_var *var, int maxvar) {
    int nvar = 0;
    for (int i = 1; i < argc; ++i) {
        if (ab_arg(argc, argv, &i, o, AB_BATCH | AB_LAYERS | AB_WEIGHTS)) continue;
        if (!strcmp(argv[i], "--var") && i + 1 < argc && nvar < maxvar) {
            if (!ab_parse_var(tool, argv[++i], &var[nvar])) return -1;
            ++nvar;
        } else {
            fprintf(stderr, "usage: %s [--device SEL] [--rounds N] [--calls N] [--batch N] [--layers LIST] "
                            "[--weights kept|per-call] [--var LABEL=DIR|CONFIG]...\n", tool);
            return -1;
        }
    }
    if (!ab_check(tool, o)) return -1;
    if (!nvar) ab_default_var(&var[nvar++]);
    return nvar;
}

bool ab_open(const char *tool, const char *selector, const char *dir, tsr_device **dev) {
    if (dir && dir[0]) setenv("TSR_KERNEL_DIR", dir, 1);
    else if (dir) unsetenv("TSR_KERNEL_DIR");
    if (tsr_device_open(selector, dev) != TSR_SUCCESS) {
        fprintf(stderr, "%s: device: %s\n", tool, tsr_last_error());
        return false;
    }
    return true;
}

bool ab_open_vars(const char *tool, const char *selector, const char *op, ab_var *var, int nvar, int rounds) {
    for (int v = 0; v < nvar; ++v) {
        if (!ab_open(tool, selector, var[v].dir, &var[v].dev)) return false;
        if (tsr_config_override(var[v].dev, op, var[v].config) != TSR_SUCCESS ||
            (var[v].gemm[0] && tsr_config_override(var[v].dev, "gemm", var[v].gemm) != TSR_SUCCESS)) {
            fprintf(stderr, "%s: %s: %s\n", tool, var[v].label, tsr_last_error());
            return false;
        }
        if (!ab_rounds_alloc(rounds, &var[v].wall, &var[v].cpu)) return false;
    }
    unsetenv("TSR_KERNEL_DIR");
    return true;
}

void ab_print_vars(const ab_opts *o, const ab_var *var, int nvar) {
    printf("{\"rounds\": %d, \"calls\": %d, \"batch\": %zu, \"variants\": [", o->rounds, o->calls, o->batch);
    for (int v = 0; v < nvar; ++v)
        printf("%s{\"label\": \"%s\", \"kernel_dir\": \"%s\", \"config\": \"%s\", \"gemm\": \"%s\"}", v ? ", " : "",
               var[v].label, var[v].dir, var[v].config, var[v].gemm);
    printf("]}\n");
}

void ab_close_vars(const char *op, ab_var *var, int nvar) {
    for (int v = 0; v < nvar; ++v) {
        tsr_config_override(var[v].dev, op, NULL);
        if (var[v].gemm[0]) tsr_config_override(var[v].dev, "gemm", NULL);
        tsr_device_close(var[v].dev);
        free(var[v].wall), free(var[v].cpu);
    }
}

cl_mem ab_typed_pattern(tsr_device *dev, tsr_dtype t, size_t n) {
    cl_context ctx = tsr_device_context(dev);
    cl_mem f = util_pattern_buffer(ctx, n);
    if (!f || t == TSR_F32) return f;
    cl_int err;
    cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * tsr_dtype_size(t), NULL, &err);
    if (err == CL_SUCCESS && tsr_convert(dev, TSR_F32, f, 0, t, m, 0, n, NULL, NULL) != TSR_SUCCESS) {
        clReleaseMemObject(m);
        m = NULL;
    }
    clFinish(tsr_device_queue(dev));
    clReleaseMemObject(f);
    return err == CL_SUCCESS ? m : NULL;
}

bool ab_rounds_alloc(int rounds, double **wall, double **cpu) {
    *wall = malloc((size_t)rounds * sizeof(double)), *cpu = malloc((size_t)rounds * sizeof(double));
    return *wall && *cpu;
}

ab_mark ab_start(void) {
    return (ab_mark){util_clock_us(CLOCK_MONOTONIC), util_clock_us(CLOCK_PROCESS_CPUTIME_ID)};
}

void ab_per_call(ab_mark m, int calls, double *wall, double *cpu) {
    *wall = (util_clock_us(CLOCK_MONOTONIC) - m.wall) / calls;
    *cpu = (util_clock_us(CLOCK_PROCESS_CPUTIME_ID) - m.cpu) / calls;
}

bool ab_conv_bufs_new(tsr_device *dev, size_t nx, size_t nw, size_t ny, size_t nk, ab_conv_bufs *b) {
    cl_context ctx = tsr_device_context(dev);
    b->x = util_pattern_buffer(ctx, nx), b->w = util_pattern_buffer(ctx, nw), b->y = util_pattern_buffer(ctx, ny);
    b->bias = util_pattern_buffer(ctx, nk), b->scale = util_pattern_buffer(ctx, nk);
    return b->x && b->w && b->y && b->bias && b->scale;
}

void ab_conv_bufs_release(ab_conv_bufs *b) {
    clReleaseMemObject(b->x), clReleaseMemObject(b->w), clReleaseMemObject(b->y);
    clReleaseMemObject(b->bias), clReleaseMemObject(b->scale);
}

bool ab_time_conv2d(tsr_device *dev, const tsr_conv2d_desc *d, cl_mem x, cl_mem w, cl_mem y, int calls, double *wall,
                    double *cpu) {
    cl_command_queue q = tsr_device_queue(dev);
    if (tsr_conv2d(dev, d, x, w, y, q, NULL) != TSR_SUCCESS) return false;
    clFinish(q);
    ab_mark m = ab_start();
    for (int i = 0; i < calls; ++i)
        if (tsr_conv2d(dev, d, x, w, y, q, NULL) != TSR_SUCCESS) return false;
    clFinish(q);
    ab_per_call(m, calls, wall, cpu);
    return true;
}
