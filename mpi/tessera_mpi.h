/* tessera's optional MPI component: helpers that run tessera ops across the ranks of an MPI job
 * (distributed GEMM, all-reduce of device buffers, and the building blocks the CLI's fleet
 * commands use). libtessera itself never links MPI; this header and libtessera_mpi do.
 *
 * Conventions shared by every function here:
 * - "rank R (host)" in messages is the rank in MPI_COMM_WORLD and the processor name, whatever
 *   communicator the call got, so messages from split communicators still name the process.
 * - Every collective of the work is nonblocking and completed by tsr_mpi_wait, so a rank whose
 *   peer died or stalled aborts the job with a message naming the operation instead of hanging.
 *   The exceptions build communicators, which have no nonblocking form: MPI_Comm_create_group in
 *   tsr_mpi_open_device (right after an all-gather that proved every member alive) and the two
 *   MPI_Comm_split calls of tsr_mpi_grid_init (every rank of the communicator takes part).
 * - The time-out bounds silence, not work: a rank that makes progress (an MPI operation of it
 *   completes, its device runs a command it waits for with tsr_mpi_wait_device, or its code calls
 *   tsr_mpi_heartbeat) sends every other rank a heartbeat at most every few seconds, and a waiting
 *   rank counts its tsr_mpi_timeout() seconds again from each heartbeat it receives. A rank idle
 *   while its peers run a long phase therefore waits as long as they work; when no rank has made
 *   progress for tsr_mpi_timeout() seconds (a stalled or dead rank sends nothing, and ranks that
 *   only wait for it send nothing either), the waiting ranks abort. Heartbeats are zero-byte
 *   messages with tag 32343 (0x7e57) on MPI_COMM_WORLD: an application's receives on
 *   MPI_COMM_WORLD with MPI_ANY_TAG could take one.
 * - Errors a rank cannot recover from (a timeout, arguments that differ between ranks) end the
 *   whole job through tsr_mpi_abort; errors of one rank's own work (a device that fails) are
 *   tessera statuses with tsr_last_error() set, as in the library. */
#ifndef TESSERA_MPI_H
#define TESSERA_MPI_H

#include <mpi.h>
#include <stddef.h>

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ job control */

/* Print "tessera-mpi: rank R (host): <message>" (printf-style) and a newline to stderr, flush it,
 * and call MPI_Abort(comm, 3) (MPI_COMM_WORLD when comm is MPI_COMM_NULL). Never returns. */
void tsr_mpi_abort(MPI_Comm comm, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

/* Like tsr_mpi_abort's prefix: "rank R (host)" for this process (a static buffer, valid for the
 * life of the process). */
const char *tsr_mpi_whoami(void);

/* Seconds a waiting rank goes without hearing of progress (its operation completing, or a
 * heartbeat from any rank) before it gives up: $TSR_MPI_TIMEOUT (a positive
 * decimal number of seconds, at most one week), 600 when unset or empty. A value that is not such
 * a number aborts the job naming it. Read once per process. */
double tsr_mpi_timeout(void);

/* Complete *req: poll MPI_Test (which also drives Open MPI's progress) until it completes, first
 * spinning briefly and then sleeping up to 0.5 ms between polls so oversubscribed ranks leave the
 * cores to the ones computing. After tsr_mpi_timeout() seconds without a heartbeat from any rank
 * it aborts the job with "timed out after S s waiting for <what> (no rank reported progress for
 * that long: a peer rank died or stalled?; ...)". When the request completes it sends a heartbeat
 * (tsr_mpi_heartbeat). *req becomes MPI_REQUEST_NULL; a null request returns at once. Returns
 * the seconds spent waiting. */
double tsr_mpi_wait(MPI_Comm comm, MPI_Request *req, const char *what);

/* This rank makes progress: unless it sent one less than min(5, tsr_mpi_timeout() / 4) seconds
 * ago, send every other rank of MPI_COMM_WORLD a heartbeat (a zero-byte nonblocking send, freed
 * at once), which resets the deadline of their waits. Call it from long work that makes no MPI
 * calls of its own (a long host loop, a library call with a progress callback); does nothing
 * before MPI_Init or after MPI_Finalize. Never call it from a loop that only waits for a peer:
 * a heartbeat must mean that work advances. */
void tsr_mpi_heartbeat(void);

/* Wait for the OpenCL command of `event` (its queue is flushed first), sending heartbeats while it
 * runs, so peers waiting on this rank do not time out however long the device computes. Returns
 * TSR_SUCCESS when it completed, or TSR_ERR_OPENCL (tsr_last_error() names `what`) when the wait
 * failed or the command ended with an error status. Does not release the event. */
tsr_status tsr_mpi_wait_device(cl_event event, const char *what);

/* Test *req once without blocking: 1 when complete (or null), 0 otherwise; aborts the job when
 * MPI_Test fails. For loops that overlap polling with other work. */
int tsr_mpi_test(MPI_Comm comm, MPI_Request *req, const char *what);

/* Complete `count` requests like tsr_mpi_wait, while the device works on `busy` (a cl_event, may be
 * NULL): returns the seconds spent waiting and, in *idle (may be NULL), the part of them after
 * `busy` had completed (when it was seen complete at the first poll, all of them): the time the
 * device sat idle for want of these messages. While `busy` runs it polls only every 2 ms (each
 * wake-up takes a core from the device when ranks share the cores), after that every 0.5 ms. */
double tsr_mpi_wait_while(MPI_Comm comm, int count, MPI_Request *reqs, const char *what, cl_event busy, double *idle);

/* Refuse a job whose ranks got different command lines: each rank hashes argv[1..argc-1]
 * (XXH64 over each argument with its terminating NUL) and all ranks all-gather the hashes. On
 * any difference rank 0 prints its own arguments and those of every rank that differs, and every
 * rank aborts ("arguments differ between ranks: rank(s) 1, 3 differ from rank 0"). Returns only
 * when all ranks agree. */
void tsr_mpi_check_args(MPI_Comm comm, int argc, char **argv);

/* Each rank of comm opens its OpenCL device with tsr_device_open(selector) (NULL: the default).
 * Rank 0 prints "tessera-mpi: rank R (host): no OpenCL device: <reason>; excluded" for each rank
 * that could not. Ranks with a device get *device and, in *active, a new communicator of the ranks
 * with a device (rank order kept; free it with MPI_Comm_free, close the device with
 * tsr_device_close); ranks without get *device = NULL and *active = MPI_COMM_NULL and
 * TSR_SUCCESS, so they can skip the work and go to MPI_Finalize. When no rank has a device every
 * rank gets TSR_ERR_NO_DEVICE (rank 0 has printed each rank's reason; tsr_last_error() says so
 * and gives this rank's), *device = NULL and *active = MPI_COMM_NULL. Collective over comm. */
tsr_status tsr_mpi_open_device(MPI_Comm comm, const char *selector, tsr_device **device, MPI_Comm *active);

/* Gather each rank's NUL-terminated text (NULL counts as "") to rank 0 of comm, in rank order.
 * On rank 0: returns one malloc'd buffer holding every text with its NUL, one after another, and
 * when offsets_out is not NULL, *offsets_out = a malloc'd array of comm-size offsets (text of
 * rank r at buffer + (*offsets_out)[r]). Free both with free(). Other ranks get NULL (and
 * *offsets_out = NULL). A text longer than INT_MAX bytes, or a total over INT_MAX, aborts.
 * Collective over comm. */
char *tsr_mpi_gather_text(MPI_Comm comm, const char *mine, size_t **offsets_out);

/* The test hook: TSR_MPI_FAULT=KIND:RANK[:POINT], KIND "stall" (sleep forever, never answering
 * peers), "exit" (exit(1) at once, without MPI_Finalize) or "corrupt" (return 1: the caller
 * garbles what it sends next, where the point supports it: "report"), RANK a rank in
 * MPI_COMM_WORLD. The
 * fault fires when that rank reaches the fault point named POINT, or, without POINT, the first
 * fault point it reaches. The points in this component (call tsr_mpi_fault_point with a new name
 * to add one):
 *   "args"      tsr_mpi_check_args, before the hashes are exchanged
 *   "device"    tsr_mpi_open_device, after the device is opened, before the exchange
 *   "summa"     tsr_mpi_sgemm_summa, after the first panel's local GEMM is enqueued (mid-run)
 *   "allreduce" tsr_mpi_allreduce_device, after the first chunk's reduction is posted
 *   "report"    tessera report --mpi, after this rank's report is made, before it is sent
 *   "tune"      tessera tune --mpi, after this rank's tuning
 * A malformed value aborts the job naming it; other ranks ignore the hook. The firing rank prints
 * "tessera-mpi: rank R (host): TSR_MPI_FAULT: stalling at POINT" (or "exiting at", "corrupting
 * its output at") first. Returns 1 when a "corrupt" fault fired here, else 0. */
int tsr_mpi_fault_point(const char *point);

/* ------------------------------------------------------ distributed GEMM */

/* The process grid of SUMMA: pr x pc = the communicator size, the most square factorization
 * with pr <= pc (2 ranks: 1 x 2, 4: 2 x 2, 6: 2 x 3, 7: 1 x 7). */
void tsr_mpi_grid_shape(int ranks, int *pr, int *pc);

/* Part `index` of `n` split into `parts` nearly equal blocks (the first n % parts one larger):
 * its first index and its length. */
void tsr_mpi_block(size_t n, int parts, int index, size_t *start, size_t *length);

/* The 2-D block distribution of a row-major rows x cols matrix over the grid: the rank at grid
 * position (row r, column c) = rank r * pc + c of the communicator holds the block of rows
 * tsr_mpi_block(rows, pr, r) and columns tsr_mpi_block(cols, pc, c), row-major and contiguous. */
typedef struct tsr_mpi_grid {
    MPI_Comm comm;     /* the communicator the grid is laid over (not owned) */
    MPI_Comm row_comm; /* the ranks of my grid row (owned: tsr_mpi_grid_free) */
    MPI_Comm col_comm; /* the ranks of my grid column (owned) */
    int rank, ranks;   /* mine in comm, comm's size */
    int pr, pc;        /* grid shape */
    int my_row, my_col;
} tsr_mpi_grid;

/* Make the grid over comm (collective; row and column communicators by two blocking MPI_Comm_split
 * calls, the exception to the nonblocking rule above) and free it. */
void tsr_mpi_grid_init(MPI_Comm comm, tsr_mpi_grid *grid);
void tsr_mpi_grid_free(tsr_mpi_grid *grid);

/* Rank 0 of grid->comm holds the global row-major rows x cols matrix `global` (ignored elsewhere);
 * every rank gets its block in a malloc'd buffer (*local, free with free()) and its extents.
 * Collective; nonblocking sends and receives with tsr_mpi_wait. */
void tsr_mpi_scatter_matrix(const tsr_mpi_grid *grid, const float *global, size_t rows, size_t cols, float **local,
                            size_t *local_rows, size_t *local_cols);

/* The reverse: every rank sends its block `local`; rank 0 assembles the global rows x cols
 * matrix into `global` (caller's buffer of rows * cols floats; ignored elsewhere). Collective. */
void tsr_mpi_gather_matrix(const tsr_mpi_grid *grid, const float *local, size_t rows, size_t cols, float *global);

/* The time split of one distributed GEMM on this rank, in seconds. */
typedef struct tsr_mpi_gemm_times {
    double total;      /* wall time from the first broadcast to the local C block read back to the host */
    double local_gemm; /* device time of the local tsr_matmul calls (profiling events) */
    double comm_wait;  /* time the device sat idle for want of a panel: waits for broadcasts not
                        * hidden behind the GEMM already queued (the exposed communication) */
    double comm_total; /* all time the host spent in tsr_mpi_wait for panels, hidden or not */
    int panels;        /* panel steps */
} tsr_mpi_gemm_times;

/* C = A B on the grid (SUMMA): A m x k, B k x n, C m x n, fp32 row-major, each block-distributed
 * as tsr_mpi_scatter_matrix lays it out (a_local: my block of A, b_local of B, c_local receives my
 * block of C, host memory). The k dimension advances in panels of at most `panel` columns (0: 256)
 * that never straddle a block boundary; for each, the owner column broadcasts its panel of A along
 * its grid row and the owner row its panel of B along its grid column (MPI_Ibcast), and every rank
 * accumulates the product into its device-resident C block with tsr_matmul (beta = 0 for the first
 * panel, 1 after). The broadcast of panel p+1 is posted before panel p's GEMM runs and host and
 * device panel buffers are double-buffered, so communication overlaps the local GEMM. `times`
 * (may be NULL) receives the split. A device error on any rank aborts the job with its message
 * (its peers would otherwise wait for its broadcasts), and so does a local GEMM that fails while
 * it runs on the device (every panel's GEMM event is checked), so this returns TSR_SUCCESS or not
 * at all. k = 0 is allowed: there are no panels and every C block is set to zeros (A B = 0).
 * Collective over grid->comm. */
tsr_status tsr_mpi_sgemm_summa(tsr_device *device, const tsr_mpi_grid *grid, size_t m, size_t n, size_t k,
                               const float *a_local, const float *b_local, float *c_local, size_t panel,
                               tsr_mpi_gemm_times *times);

/* ---------------------------------------------------------- all-reduce */

/* The time split of one tsr_mpi_allreduce_device call, in seconds. */
typedef struct tsr_mpi_allreduce_times {
    double total;     /* wall time of the call */
    double comm_wait; /* host time blocked in tsr_mpi_wait for reductions */
    double transfer;  /* host time blocked waiting for device reads and writes */
    int chunks;
} tsr_mpi_allreduce_times;

/* Sum `count` floats of the device buffer `buffer` (from float offset `offset`) over all ranks of
 * comm, in place (the data-parallel gradient all-reduce). The buffer is read in chunks of at most
 * `chunk` floats (0: 1 Mi floats); each chunk's MPI_Iallreduce is posted as soon as its read is
 * done, and its write back is enqueued as soon as its reduction completes, while later chunks are
 * being read and earlier ones written (up to three chunks in flight), so device transfers overlap
 * the reduction. Every rank must pass the same count and chunk (a mismatch is not detected here:
 * the caller's tsr_mpi_check_args covers the command line). `times` may be NULL. Collective.
 * A rank whose buffer cannot hold offset + count floats returns TSR_ERR_INVALID_ARG before any
 * communication (its peers then time out in the first reduction); a device error aborts the job. */
tsr_status tsr_mpi_allreduce_device(tsr_device *device, MPI_Comm comm, cl_mem buffer, size_t offset, size_t count,
                                    size_t chunk, tsr_mpi_allreduce_times *times);

/* ------------------------------------------------------------ cost model */

/* The alpha-beta model (docs/mpi.md has the formulas): a message of b bytes costs alpha + beta b
 * seconds; a broadcast over q ranks ceil(log2 q) such steps (binomial tree; 0 for q = 1); a ring
 * all-reduce of b bytes over P ranks 2 (P - 1) alpha + 2 (P - 1) / P b beta. */
typedef struct tsr_mpi_model {
    int ranks;          /* P */
    double alpha;       /* seconds per message */
    double beta;        /* seconds per byte */
    double rate_shared; /* FLOP/s of one rank's local device work (its SUMMA block's panel uploads,
                         * GEMMs and C read back) while all P ranks compute: the same sharing of cores
                         * as the distributed run; for a cluster, the device's GEMM rate */
    double rate_single; /* FLOP/s of the single-rank GEMM the efficiency is measured against */
} tsr_mpi_model;

/* What the model predicts for one SUMMA C = A B (m x k times k x n, panels of `panel`). */
typedef struct tsr_mpi_summa_prediction {
    int pr, pc, panels;
    double compute;    /* the slowest (largest) block's local work at rate_shared, summed over panels */
    double comm;       /* sum of the per-panel broadcast times (A along rows, B along columns) */
    double total;      /* comm of panel 1 + sum over panels of max(GEMM of p, broadcasts of p + 1) */
    double comm_share; /* (total - compute) / total: the exposed communication */
    double single;     /* 2 m n k / rate_single */
    double efficiency; /* single / (P total) */
} tsr_mpi_summa_prediction;

double tsr_mpi_model_bcast(const tsr_mpi_model *model, int q, double bytes);
double tsr_mpi_model_allreduce(const tsr_mpi_model *model, double bytes);
void tsr_mpi_model_summa(const tsr_mpi_model *model, size_t m, size_t n, size_t k, size_t panel,
                         tsr_mpi_summa_prediction *out);

/* Ping-pong between ranks 0 and 1 of comm (others wait): alpha = half the round trip of an 8-byte
 * message, beta from half the round trip of `bytes` (0: 8 MiB) less alpha; each the median of
 * `reps` round trips. Collective; a communicator of one rank gives 0 and 0. Every rank gets rank
 * 0's values. */
void tsr_mpi_measure_link(MPI_Comm comm, size_t bytes, int reps, double *alpha, double *beta);

#ifdef __cplusplus
}
#endif

#endif
