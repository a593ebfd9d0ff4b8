/* Private to runtime/group/: device groups (tsr_group_*, tsr_*_multi), one file per job:
 *   group.c      the group's life cycle: create (three queues per device), destroy, weights, the
 *                last call's statistics
 *   transfer.c   moving a tile's rows between host arrays and device buffers; tile buffers
 *   schedule.c   shares and rates: the weights a call starts from (given, measured on earlier
 *                calls of the class, the tuning database's rate, else equal) and each device's
 *                next tile (its own share, else work taken from the share that would finish last)
 *   record.c     the record of a call's tiles, and what a failed call wrote
 *   worker.c     one device's thread: its tiles, two in flight
 *   run.c        running a call: shares by weight, tile sizes, the threads, errors, statistics;
 *                the checks every call driver shares
 *   gemm.c       tsr_matmul_multi (a unit: a row of C for one product, a batch entry for a batch)
 *   attention.c  tsr_attention_multi (a unit: a (batch, head) pair)
 * Layers (the `layers` test): transfer, schedule, record and group use no other file here;
 * worker uses transfer, schedule and record; run uses worker, schedule and record; the call
 * drivers use run and transfer.
 *
 * One GEMM, strided-batched GEMM or attention split across a group of devices.
 *
 * Devices of a group may live on different platforms, so operands are host arrays. A call's
 * work is a row of units (rows of C, batch entries, or (batch, head) pairs); each device gets a
 * contiguous share in proportion to its rate and works through it in tiles on its own thread,
 * with two tiles in flight: the next tile's upload overlaps the current tile's compute, and its
 * result comes back while the next one runs. A device that runs out of work takes tiles from the
 * back of the share that would finish last, when it can finish one before that device would.
 * Every tile is one ordinary single-device call (tsr_sgemm, tsr_sgemm_strided_batched, tsr_attention) on
 * copies of that tile's operands, so its result is bitwise what that device gives for the tile
 * alone. Results are read straight into the caller's output (no staging copy); every argument is checked before
 * anything runs, so only a device failing mid-call can leave an output partly written: the error then names that
 * device and the units whose results reached the output (tiles whose reads completed), and tsr_group_last_stats lists
 * those tiles. A device of weight 0 gets no units. */
#ifndef TSR_GROUP_H
#define TSR_GROUP_H

#include "internal.h"

#include <stdbool.h>
#include <stdint.h>

#define SLOTS 2 /* tiles in flight per device */
#define ROLES 3 /* per-slot buffers: A (or packed Q, K, V), B, C (or O) */
/* A share is cut into about this many tiles on a device with its own memory: its transfers
 * overlap compute from the second tile on (CPU devices: see tsr_grp_run_job). */
#define TILES_PER_DEVICE 6
#define MAX_RATE_KEYS 64

typedef struct member {
    tsr_device *device;
    cl_command_queue upload, compute, download;
    cl_mem buf[SLOTS][ROLES];
    size_t buf_bytes[SLOTS][ROLES];
    cl_mem shared[2]; /* operands every tile reads (GEMM's B; a batch's A or B with stride 0) */
    size_t shared_bytes[2];
} member;

typedef struct learned_rates {
    char key[64];
    double *gflops; /* per device; 0 where not measured */
} learned_rates;

struct tsr_device_group {
    size_t count;
    member *members;
    double *weights; /* given by tsr_group_set_weights, or NULL */
    learned_rates learned[MAX_RATE_KEYS];
    size_t nlearned, next_evict;
    pthread_mutex_t call_lock; /* one call at a time */
    /* what the last call did */
    tsr_group_tile *tiles;
    unsigned char *tile_state; /* per tile: a tile_state (in flight, written, maybe partly written) */
    size_t ntiles, tiles_cap;
    bool tiles_lost; /* out of host memory while recording them */
    tsr_group_device_stats *stats;
    const char *weights_from;
    double seconds;
};

/* ------------------------------------------------------------------ jobs */

/* What became of a tile's results: still in flight, in the output in full (its reads completed),
 * or possibly part of them (a read failed, or a failure came after some of its reads were enqueued). */
enum tile_state { TILE_IN_FLIGHT, TILE_WRITTEN, TILE_MAYBE };

typedef struct job job;
struct job {
    const char *op;
    const char *unit_word, *units_word, *output; /* what a unit is, of which output: "row", "rows", "C" */
    size_t units, chunk, boundary; /* tiles never cross a multiple of boundary (0: none) */
    size_t align;                  /* tile sizes are multiples of this where the share allows */
    double flops_per_unit;
    /* per-slot buffer bytes for a tile of `count` units */
    tsr_status (*sizes)(const job *j, size_t count, size_t bytes[ROLES]);
    /* buffers for the operands shared by every tile, made before the call starts on every device that
     * may take work, so that running out of memory writes nothing (NULL: none) */
    tsr_status (*reserve)(const job *j, member *m);
    /* operands shared by every tile, uploaded once per device (NULL: none) */
    tsr_status (*prepare)(const job *j, member *m);
    /* upload, compute and download one tile; *done: the download's event; *writing: set before the
     * first read into the output is enqueued (a failure after it may have written part of the tile) */
    tsr_status (*enqueue)(const job *j, member *m, int slot, size_t first, size_t count, cl_event *done,
                          bool *writing);
    const void *params;
};

/* ------------------------------------------------------------------ scheduling */

typedef struct schedule {
    pthread_mutex_t lock;
    size_t count, boundary, align;
    size_t *chunk;      /* each device's tile size */
    size_t *lo, *hi;    /* each device's remaining share [lo, hi) */
    const double *rate; /* relative rates, for deciding whether taking work pays */
    bool stop;
} schedule;

typedef struct worker {
    tsr_device_group *group;
    size_t index;
    const job *job;
    schedule *schedule;
    tsr_status status;
    char error[1024];
    size_t units, tiles;
    double busy_s;
    bool compiled;      /* it built or loaded a program during the call */
    size_t fail_at_tile; /* $TSR_TEST_MULTI_FAIL=DEVICE[:TILE] names this device: its tile TILE (counted from 0)
                          * fails before it is enqueued, the failure path's test; SIZE_MAX: none */
} worker;

/* ---- transfer.c ---- */

/* Copy `rows` rows of `row_floats` floats between the host (rows host_ld apart) and a buffer (rows
 * buf_ld apart from float buf_offset): one linear copy when both sides are contiguous (drivers
 * move those fastest), else a rectangle. Reads wait for `wait` and return their event in *done. */
tsr_status tsr_grp_copy_rows(cl_command_queue q, bool to_device, cl_mem buf, size_t buf_offset, float *host,
                             size_t rows, size_t row_floats, size_t host_ld, size_t buf_ld, cl_event wait,
                             cl_event *done);

/* tsr_grp_copy_rows host to device, without events. */
tsr_status tsr_grp_write_rect(cl_command_queue q, cl_mem buf, size_t buf_offset_floats, const float *host, size_t rows,
                              size_t row_floats, size_t host_ld, size_t buf_ld);

/* *buf holds at least `bytes` (a smaller one is replaced); an error names the tile buffer. */
tsr_status tsr_grp_ensure_buffer(member *m, cl_mem *buf, size_t *have, size_t bytes);

/* ---- schedule.c ---- */

/* The next tile for device d: the front of its own share, else (when d is about to idle:
 * may_steal) the back of the share that would finish last: the part of it that lets both finish
 * together (at most d's tile size), if d can compute that before its owner would reach it. Only
 * an idle device steals: one still busy would take work from a device whose thread has not yet
 * claimed its first tile. */
bool tsr_grp_schedule_next(schedule *s, size_t d, bool may_steal, size_t *first, size_t *count);

/* No device takes another tile (a device failed). */
void tsr_grp_schedule_stop(schedule *s);

/* The rates this group learned for a problem class; with `create`, a new entry where none is
 * (the oldest is reused when all MAX_RATE_KEYS are taken), NULL where host memory ran out. */
learned_rates *tsr_grp_learned_for(tsr_device_group *g, const char *key, bool create);

/* Weights for a call, best source first: the caller's, rates this group measured on earlier
 * calls of the problem class, the tuning database's rates for the class, else equal shares (the
 * call then measures the rates, and taking work from slower shares evens out the first split). */
void tsr_grp_choose_weights(tsr_device_group *g, const char *key, const double *tuned, double *weights);

/* ---- record.c ---- */

/* Record a tile of the call in state `state`; its index, or SIZE_MAX where host memory ran out. */
size_t tsr_grp_record_tile(worker *w, size_t first, size_t count, enum tile_state state);

/* A recorded tile's new state (index SIZE_MAX: the tile was never recorded). */
void tsr_grp_set_tile_state(worker *w, size_t index, enum tile_state state);

/* What a failed call did to the output, exactly: the units whose results reached it in full (the
 * tiles tsr_group_last_stats then lists), those a failed read may have written in part, and that
 * every other unit is as it was. */
void tsr_grp_describe_writes(const tsr_device_group *g, const job *j, char *out, size_t size);

/* ---- worker.c ---- */

/* The thread of one device of a call (arg: its worker): tiles until the schedule has none for it. */
void *tsr_grp_worker_main(void *arg);

/* ---- run.c ---- */

/* Run a job across the group (the caller holds its call_lock): its shares, tiles and threads, then
 * the call's statistics and rates; rate_key names the problem class whose rates are remembered,
 * tuned[d] the tuning database's rate on device d (NULL or 0: none). */
tsr_status tsr_grp_run_job(tsr_device_group *g, job *j, const char *rate_key, const double *tuned);

/* A failed shared check's error, with the group call's name in front. */
tsr_status tsr_grp_prefixed(tsr_status status, const char *fn);

/* Host ranges [lo, hi) of two operands must not meet (C is written, A and B read). */
bool tsr_grp_spans_meet(const float *a, size_t a_n, const float *c, size_t c_n);

#endif
