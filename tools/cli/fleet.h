/* The CLI's fleet commands over MPI: `tessera report --mpi` and `tessera tune --mpi` run on every
 * rank of an MPI job and gather the ranks' results on rank 0 (fleet.c, built into the CLI only
 * where Open MPI is found: TSR_HAVE_MPI; libtessera never links MPI). Every rank must get the same
 * arguments (refused otherwise); a rank without an OpenCL device is reported and left out; a rank
 * that stalls or dies makes the others abort after TSR_MPI_TIMEOUT seconds instead of hanging.
 * Without mpirun the command runs as a fleet of one. */
#ifndef TSR_FLEET_H
#define TSR_FLEET_H

#include "report.h"

#include <stdbool.h>
#include <stdio.h>

/* `report --mpi`: every rank runs report_run(selectors, options) on its own devices; rank 0
 * writes each rank's report to OUT/ranks/rank-R/ (R zero-padded to the width of the last rank,
 * so the names sort in rank order) and their merge (report_merge_roots, named by those paths) to
 * OUT, with the --pytorch section when pytorch_file is set. Nothing is written by other ranks.
 * argv: the command's arguments (argv[0] "report"), checked to be the same on every rank.
 * Returns this rank's exit status (0, or 1 on rank 0 when a device failed, a rank had no report,
 * or writing failed). */
int fleet_report(int argc, char **argv, const char *const *selectors, size_t nselectors, const report_options *options,
                 const char *pytorch_file);

/* `tune --mpi`: every rank opens its device, tunes it into its own temporary database (never the
 * user's, which ranks on one host would share) and rank 0 imports every rank's entries into `out`
 * (tsr_tuning_db_import: each file checked like any foreign one, an existing database merged
 * into, the write atomic), printing each rank's table in rank order. */
typedef struct fleet_tune_job {
    const char *device;       /* --device SEL; NULL: the default device */
    const char *out;          /* the fleet database (rank 0's host); NULL only with options.dry_run */
    tsr_tune_options options; /* db_path is set per rank; log_path gets ".rank-R" appended */
    /* Tune on `device` with `options`, printing the results on `out`; returns an exit status. */
    int (*tune)(tsr_device *device, tsr_tune_options *options, FILE *out, void *context);
    void *context;
} fleet_tune_job;
int fleet_tune(int argc, char **argv, const fleet_tune_job *job);

#endif
