/* The alpha-beta cost model of SUMMA and of the gradient all-reduce, and the ping-pong that
 * measures alpha and beta. The formulas are written out in docs/mpi.md. */
#include "tessera_mpi.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double tsr_mpi_model_bcast(const tsr_mpi_model *model, int q, double bytes) {
    if (q <= 1) return 0;
    return ceil(log2((double)q)) * (model->alpha + model->beta * bytes);
}

double tsr_mpi_model_allreduce(const tsr_mpi_model *model, double bytes) {
    int p = model->ranks;
    if (p <= 1) return 0;
    return 2.0 * (p - 1) * model->alpha + 2.0 * (p - 1) / p * bytes * model->beta;
}

void tsr_mpi_model_summa(const tsr_mpi_model *model, size_t m, size_t n, size_t k, size_t panel,
                         tsr_mpi_summa_prediction *out) {
    memset(out, 0, sizeof *out);
    if (panel == 0) panel = 256;
    tsr_mpi_grid_shape(model->ranks, &out->pr, &out->pc);
    /* The largest block sets the pace: the first blocks of an uneven split are one larger. */
    double mi = ceil((double)m / out->pr), nj = ceil((double)n / out->pc);
    /* Panels stop at block boundaries of k as well: with b dividing k / pr and k / pc (the usual
     * case) that is ceil(k / b) panels of b; otherwise a few narrower ones, which the sum below
     * takes as full ones (slightly more messages, the same volume). */
    size_t k_block = (k + (size_t)out->pc - 1) / (size_t)out->pc;
    size_t kb = (k + (size_t)out->pr - 1) / (size_t)out->pr;
    if (kb < k_block) k_block = kb;
    size_t per_block = k_block ? (k_block + panel - 1) / panel : 0;
    size_t panels = k_block ? per_block * ((k + k_block - 1) / k_block) : 0;
    double width = panels ? (double)k / (double)panels : 0;
    double gemm = 2.0 * mi * nj * width / model->rate_shared;
    double bcast =
        tsr_mpi_model_bcast(model, out->pc, 4.0 * mi * width) + tsr_mpi_model_bcast(model, out->pr, 4.0 * width * nj);
    out->panels = (int)panels;
    out->compute = (double)panels * gemm;
    out->comm = (double)panels * bcast;
    /* The first panel's broadcasts are exposed; after that each step takes the longer of the GEMM
     * of panel p and the broadcasts of panel p + 1 (the last GEMM has nothing to hide). */
    out->total = panels ? bcast + (double)(panels - 1) * fmax(gemm, bcast) + gemm : 0;
    out->comm_share = out->total > 0 ? (out->total - out->compute) / out->total : 0;
    out->single = 2.0 * (double)m * (double)n * (double)k / model->rate_single;
    out->efficiency = out->total > 0 ? out->single / (model->ranks * out->total) : 0;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median half round trip of `bytes` between ranks 0 and 1. */
static double ping_pong(MPI_Comm comm, int rank, char *buffer, size_t bytes, int reps) {
    double *times = malloc((size_t)reps * sizeof *times);
    if (!times) tsr_mpi_abort(comm, "ping-pong: out of host memory");
    for (int i = 0; i < reps + 1; ++i) { /* one warm-up round trip sets up the connection */
        double start = MPI_Wtime();
        MPI_Request req;
        if (rank == 0) {
            MPI_Isend(buffer, (int)bytes, MPI_BYTE, 1, 0x9199, comm, &req);
            tsr_mpi_wait(comm, &req, "the ping of the link measurement (MPI_Isend)");
            MPI_Irecv(buffer, (int)bytes, MPI_BYTE, 1, 0x9199, comm, &req);
            tsr_mpi_wait(comm, &req, "the pong of the link measurement (MPI_Irecv)");
        } else {
            MPI_Irecv(buffer, (int)bytes, MPI_BYTE, 0, 0x9199, comm, &req);
            tsr_mpi_wait(comm, &req, "the ping of the link measurement (MPI_Irecv)");
            MPI_Isend(buffer, (int)bytes, MPI_BYTE, 0, 0x9199, comm, &req);
            tsr_mpi_wait(comm, &req, "the pong of the link measurement (MPI_Isend)");
        }
        if (i > 0) times[i - 1] = (MPI_Wtime() - start) / 2;
    }
    qsort(times, (size_t)reps, sizeof *times, compare_double);
    double median = times[reps / 2];
    free(times);
    return median;
}

void tsr_mpi_measure_link(MPI_Comm comm, size_t bytes, int reps, double *alpha, double *beta) {
    int rank = 0, ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    if (bytes == 0) bytes = (size_t)8 << 20;
    if (bytes > (size_t)1 << 30) bytes = (size_t)1 << 30;
    if (reps < 1) reps = 1;
    double values[2] = {0, 0};
    if (ranks > 1 && rank <= 1) {
        char *buffer = calloc(bytes, 1);
        if (!buffer) tsr_mpi_abort(comm, "ping-pong: out of host memory for %zu bytes", bytes);
        double small = ping_pong(comm, rank, buffer, 8, reps * 10);
        double large = ping_pong(comm, rank, buffer, bytes, reps);
        free(buffer);
        values[0] = small;
        values[1] = large > small ? (large - small) / (double)bytes : 0;
    }
    MPI_Request req;
    MPI_Ibcast(values, 2, MPI_DOUBLE, 0, comm, &req);
    tsr_mpi_wait(comm, &req, "the link measurement from rank 0 (MPI_Ibcast)");
    *alpha = values[0];
    *beta = values[1];
}
