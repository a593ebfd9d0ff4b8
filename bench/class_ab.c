/* Two configurations of an op side by side on a tuning class's own problem, in one process:
 *   class_ab [--device SEL] [--rounds N] [--runs N] FILE
 * FILE holds one line per class, "<op>\t<class>\t<configuration A>\t<configuration B>" (A: a
 * fresh tune's pick, B: the built-in entry it is held against; bench/tune_vs_builtin.py writes it).
 * Per class the tuner's fixture of the class's problem is set up once (tsr_op_tuning_setup, fresh
 * inputs); each configuration runs once untimed (its build, first touch) and is checked against
 * the reference; then N rounds, A and B in alternating order (A B, B A, ...), each a median of
 * --runs timed runs by the device's timing method (the tuner's: events, or the host clock over
 * batches). Prints one JSON line per class: the per-round rates of each, their medians, the
 * per-round ratio A/B (same round: the same machine state), its median, minimum and maximum, and
 * each side's relative error. A line whose class cannot run prints an "error" member instead. */
#define _GNU_SOURCE
#include "internal.h"
#include "tuner/tuner.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUNDS 64
#define MAX_RUNS 64

static double median(double *v, int n) {
    tsr_stats s;
    double copy[MAX_RUNS > MAX_ROUNDS ? MAX_RUNS : MAX_ROUNDS];
    memcpy(copy, v, (size_t)n * sizeof *v);
    tsr_stats_of(copy, n, &s);
    return s.median;
}

static void print_rates(const char *name, const double *v, int n) {
    printf(", \"%s\": [", name);
    for (int i = 0; i < n; ++i) printf("%s%.4g", i ? ", " : "", v[i]);
    printf("]");
}

/* One class: returns false (and prints the error line) when it cannot run. */
static bool run_class(tsr_device *dev, const char *op_name, const char *cls, const char *text[2], int rounds, int runs) {
    const tsr_op *op = tsr_find_op(op_name);
    tsr_config config[2];
    tsr_device_runner runner = {.device = dev, .op = op};
    tsr_tune_backend backend = tsr_device_backend(&runner);
    tsr_status st = op ? TSR_SUCCESS : tsr_fail(TSR_ERR_NOT_FOUND, "no op '%s'", op_name);
    for (int s = 0; s < 2 && st == TSR_SUCCESS; ++s) st = tsr_config_parse(op, text[s], "class_ab", &config[s]);
    if (st == TSR_SUCCESS) st = tsr_op_tuning_setup(op, dev, cls, &runner.ctx);
    double err[2] = {0, 0}, rate[2][MAX_ROUNDS], ratio[MAX_ROUNDS], t[MAX_RUNS], seconds;
    char problem[64] = "";
    for (int s = 0; s < 2 && st == TSR_SUCCESS; ++s) { /* build, first touch, and the check */
        st = backend.run(backend.ctx, &config[s], &seconds);
        if (st == TSR_SUCCESS) st = backend.check(backend.ctx, &err[s]);
    }
    double work = 0;
    if (st == TSR_SUCCESS) {
        work = tsr_op_tuning_work(op, runner.ctx);
        tsr_op_tuning_describe(op, runner.ctx, problem, sizeof problem);
    }
    for (int r = 0; r < rounds && st == TSR_SUCCESS; ++r) {
        for (int k = 0; k < 2 && st == TSR_SUCCESS; ++k) {
            int s = (r % 2) ? 1 - k : k;
            for (int i = 0; i < runs && st == TSR_SUCCESS; ++i) st = backend.run(backend.ctx, &config[s], &t[i]);
            if (st == TSR_SUCCESS) rate[s][r] = work / median(t, runs) * 1e-9;
        }
        if (st == TSR_SUCCESS) ratio[r] = rate[0][r] / rate[1][r];
    }
    if (st == TSR_SUCCESS) { /* the output of the last runs is checked too, then poisoned */
        double last = 0;
        st = backend.check(backend.ctx, &last);
        int s = ((rounds - 1) % 2) ? 0 : 1; /* the side that ran last */
        if (last > err[s]) err[s] = last;
    }
    if (runner.ctx) tsr_op_tuning_free(op, runner.ctx);
    printf("{\"op\": \"%s\", \"class\": \"%s\"", op_name, cls);
    if (st != TSR_SUCCESS) {
        char msg[512];
        tsr_strlcpy(msg, tsr_last_error(), sizeof msg);
        for (char *p = msg; *p; ++p)
            if (*p == '"' || *p == '\\' || *p == '\n') *p = ' ';
        printf(", \"error\": \"%s\"}\n", msg);
        tsr_clear_error();
        return false;
    }
    printf(", \"problem\": \"%s\", \"unit\": \"%s\", \"a\": \"%s\", \"b\": \"%s\", \"rounds\": %d, \"runs\": %d", problem,
           op->rate_unit ? op->rate_unit : "GFLOP/s", text[0], text[1], rounds, runs);
    print_rates("rate_a", rate[0], rounds);
    print_rates("rate_b", rate[1], rounds);
    print_rates("ratio", ratio, rounds);
    double lo = ratio[0], hi = ratio[0];
    for (int r = 1; r < rounds; ++r) lo = ratio[r] < lo ? ratio[r] : lo, hi = ratio[r] > hi ? ratio[r] : hi;
    printf(", \"median_a\": %.4g, \"median_b\": %.4g, \"ratio_median\": %.4f, \"ratio_min\": %.4f, \"ratio_max\": %.4f"
           ", \"rel_err_a\": %.3g, \"rel_err_b\": %.3g}\n",
           median(rate[0], rounds), median(rate[1], rounds), median(ratio, rounds), lo, hi, err[0], err[1]);
    fflush(stdout);
    return true;
}

int main(int argc, char **argv) {
    const char *selector = NULL, *path = NULL;
    int rounds = 5, runs = 5;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) selector = argv[++i];
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fprintf(stderr, "usage: class_ab [--device SEL] [--rounds N] [--runs N] FILE\n");
            return 2;
        }
    }
    if (!path || rounds < 1 || rounds > MAX_ROUNDS || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "class_ab: a FILE, --rounds 1-%d and --runs 1-%d\n", MAX_ROUNDS, MAX_RUNS);
        return 2;
    }
    FILE *in = fopen(path, "r");
    if (!in) {
        perror(path);
        return 2;
    }
    tsr_device *dev = NULL;
    if (tsr_device_open(selector, &dev) != TSR_SUCCESS) {
        fprintf(stderr, "class_ab: %s\n", tsr_last_error());
        fclose(in);
        return 1;
    }
    char line[2048];
    int failed = 0;
    while (fgets(line, sizeof line, in)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *f[4] = {line, NULL, NULL, NULL};
        for (int k = 1; k < 4 && f[k - 1]; ++k) {
            char *tab = strchr(f[k - 1], '\t');
            if (tab) *tab = '\0', f[k] = tab + 1;
        }
        if (!f[3]) continue; /* not a class line */
        const char *text[2] = {f[2], f[3]};
        failed += !run_class(dev, f[0], f[1], text, rounds, runs);
    }
    fclose(in);
    tsr_device_close(dev);
    return failed ? 1 : 0;
}
