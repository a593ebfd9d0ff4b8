/* tessera's optional MPI component: helpers that run tessera ops across the ranks of an MPI job
 * (distributed GEMM, all-reduce of device buffers, and the building blocks the CLI's fleet
 * commands use). libtessera itself never links MPI; this header and libtessera_mpi do.
 *
 * Conventions shared by every function here:
 * - "rank R (host)" in messages is the rank in MPI_COMM_WORLD and the processor name, whatever
 *   communicator the call got, so messages from split communicators still name the process.
 * - Every collective is nonblocking and completed by tsr_mpi_wait, so a rank whose peer died or
 *   stalled aborts the job after tsr_mpi_timeout() seconds with a message naming the operation
 *   instead of hanging. (MPI_Comm_create_group, which has no nonblocking form, is the one
 *   exception; it runs right after an all-gather that proved every member alive.)
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

/* Seconds a rank waits for any one MPI operation before it gives up: $TSR_MPI_TIMEOUT (a positive
 * decimal number of seconds, at most one week), 600 when unset or empty. A value that is not such
 * a number aborts the job naming it. Read once per process. */
double tsr_mpi_timeout(void);

/* Complete *req: poll MPI_Test (which also drives Open MPI's progress) until it completes, first
 * spinning briefly and then sleeping up to 0.5 ms between polls so oversubscribed ranks leave the
 * cores to the ones computing. After tsr_mpi_timeout() seconds it aborts the job with
 * "timed out after S s waiting for <what> (a peer rank died or stalled?)". *req becomes
 * MPI_REQUEST_NULL; a null request returns at once. Returns the seconds spent waiting. */
double tsr_mpi_wait(MPI_Comm comm, MPI_Request *req, const char *what);

/* Test *req once without blocking: 1 when complete (or null), 0 otherwise; aborts the job when
 * MPI_Test fails. For loops that overlap polling with other work. */
int tsr_mpi_test(MPI_Comm comm, MPI_Request *req, const char *what);

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
 * rank gets TSR_ERR_NO_DEVICE (tsr_last_error() names each rank's reason), *device = NULL and
 * *active = MPI_COMM_NULL. Collective over comm. */
tsr_status tsr_mpi_open_device(MPI_Comm comm, const char *selector, tsr_device **device, MPI_Comm *active);

/* Gather each rank's NUL-terminated text (NULL counts as "") to rank 0 of comm, in rank order.
 * On rank 0: returns one malloc'd buffer holding every text with its NUL, one after another, and
 * when offsets_out is not NULL, *offsets_out = a malloc'd array of comm-size offsets (text of
 * rank r at buffer + (*offsets_out)[r]). Free both with free(). Other ranks get NULL (and
 * *offsets_out = NULL). A text longer than INT_MAX bytes, or a total over INT_MAX, aborts.
 * Collective over comm. */
char *tsr_mpi_gather_text(MPI_Comm comm, const char *mine, size_t **offsets_out);

/* The test hook: TSR_MPI_FAULT=KIND:RANK[:POINT], KIND "stall" (sleep forever, never answering
 * peers) or "exit" (exit(1) at once, without MPI_Finalize), RANK a rank in MPI_COMM_WORLD. The
 * fault fires when that rank reaches the fault point named POINT, or, without POINT, the first
 * fault point it reaches. The points in this component (call tsr_mpi_fault_point with a new name
 * to add one):
 *   "args"      tsr_mpi_check_args, before the hashes are exchanged
 *   "device"    tsr_mpi_open_device, after the device is opened, before the exchange
 *   "summa"     tsr_mpi_sgemm_summa, after the first panel's local GEMM is enqueued (mid-run)
 *   "allreduce" tsr_mpi_allreduce_device, after the first chunk's reduction is posted
 * A malformed value aborts the job naming it; other ranks ignore the hook. The firing rank prints
 * "tessera-mpi: rank R (host): TSR_MPI_FAULT: stalling at POINT" (or "exiting at") first. */
void tsr_mpi_fault_point(const char *point);

#ifdef __cplusplus
}
#endif

#endif
