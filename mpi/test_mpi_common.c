/* The component's job-control helpers under mpirun: the argument check, device opening with
 * exclusion, gathering text, SUMMA with k = 0, and (through mpi_test.py's environment) the
 * timeout, the fault hook and bad settings. Rank 0 prints "test_mpi_common: ok, N ranks with a
 * device" only when every check passed; mpi_test.py looks for it.
 *
 * With the first argument "long-phase", world rank 0 first works alone for four times
 * TSR_MPI_TIMEOUT (sleeping in short steps, each a step of progress: tsr_mpi_heartbeat) while the
 * others wait for it in a barrier: they must not time out. The fault point "phase" (at the start
 * of that work) lets a test stall it instead: then they must. */
#include "tessera_mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void long_phase(void) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double start = now_s();
    if (rank == 0) {
        tsr_mpi_fault_point("phase");
        while (now_s() - start < 4 * tsr_mpi_timeout()) {
            struct timespec step = {0, 20000000};
            nanosleep(&step, NULL);
            tsr_mpi_heartbeat();
        }
    }
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    tsr_mpi_wait(MPI_COMM_WORLD, &req, "world rank 0's long phase (MPI_Ibarrier)");
    if (rank != 0) printf("test_mpi_common: rank %d waited %.1f s for the long phase\n", rank, now_s() - start);
}

/* k = 0: no panels, and every C block is zeros (A B = 0), whatever it held. */
static int summa_k0(tsr_device *device, MPI_Comm comm) {
    tsr_mpi_grid grid;
    tsr_mpi_grid_init(comm, &grid);
    size_t m = 5, n = 7, r0, mi, c0, nj;
    tsr_mpi_block(m, grid.pr, grid.my_row, &r0, &mi);
    tsr_mpi_block(n, grid.pc, grid.my_col, &c0, &nj);
    float a = 1, b = 1, c[35];
    for (size_t i = 0; i < 35; ++i)
        c[i] = NAN;
    int failed = tsr_mpi_sgemm_summa(device, &grid, m, n, 0, &a, &b, c, 0, NULL) != TSR_SUCCESS;
    for (size_t i = 0; i < mi * nj; ++i)
        if (c[i] != 0.0f) {
            fprintf(stderr, "test_mpi_common: SUMMA with k = 0: C[%zu] of rank %d's block is %g, not 0\n", i, grid.rank,
                    (double)c[i]);
            failed = 1;
            break;
        }
    tsr_mpi_grid_free(&grid);
    return failed;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    (void)tsr_mpi_timeout(); /* a bad TSR_MPI_TIMEOUT ends the job here */
    tsr_mpi_check_args(MPI_COMM_WORLD, argc, argv);
    if (argc > 1 && strcmp(argv[1], "long-phase") == 0) long_phase();

    tsr_device *device = NULL;
    MPI_Comm active = MPI_COMM_NULL;
    tsr_status status = tsr_mpi_open_device(MPI_COMM_WORLD, NULL, &device, &active);
    if (status != TSR_SUCCESS) tsr_mpi_abort(MPI_COMM_WORLD, "no device anywhere: %s", tsr_last_error());
    int failed = 0;
    if (active != MPI_COMM_NULL) {
        int rank = 0, ranks = 0;
        MPI_Comm_rank(active, &rank);
        MPI_Comm_size(active, &ranks);
        failed |= summa_k0(device, active);
        /* Texts of different lengths, one empty, so offsets and terminators are exercised. */
        char mine[64];
        if (rank == 1)
            mine[0] = '\0';
        else
            snprintf(mine, sizeof mine, "text of rank %d%.*s", rank, rank, "xxxxxxxx");
        size_t *offsets = NULL;
        char *all = tsr_mpi_gather_text(active, mine, &offsets);
        if (rank == 0) {
            size_t expected_offset = 0;
            for (int r = 0; r < ranks; ++r) {
                char want[64] = "";
                if (r != 1) snprintf(want, sizeof want, "text of rank %d%.*s", r, r, "xxxxxxxx");
                if (offsets[r] != expected_offset || strcmp(all + offsets[r], want) != 0) {
                    fprintf(stderr, "test_mpi_common: rank %d's text: got \"%s\" at %zu, want \"%s\" at %zu\n", r,
                            all + offsets[r], offsets[r], want, expected_offset);
                    failed = 1;
                }
                expected_offset += strlen(want) + 1;
            }
            if (!failed) printf("test_mpi_common: ok, %d ranks with a device\n", ranks);
        } else if (all || offsets) {
            fprintf(stderr, "test_mpi_common: rank %d got gathered text; only rank 0 should\n", rank);
            failed = 1;
        }
        free(all);
        free(offsets);
        MPI_Comm_free(&active);
    } else if (device) {
        fprintf(stderr, "test_mpi_common: a device without an active communicator\n");
        failed = 1;
    }
    tsr_device_close(device);
    MPI_Finalize();
    return failed;
}
