/* Distributed GEMM by SUMMA on a 2-D process grid: the grid, block distribution (scatter from and
 * gather to rank 0), and the panel loop that overlaps the broadcasts of panel p+1 with the local
 * GEMM of panel p on each rank's OpenCL device. */
#include "tessera_mpi.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PANEL 256

void tsr_mpi_grid_shape(int ranks, int *pr, int *pc) {
    int rows = 1;
    for (int r = 1; (long)r * r <= ranks; ++r)
        if (ranks % r == 0) rows = r;
    *pr = rows;
    *pc = ranks / rows;
}

void tsr_mpi_block(size_t n, int parts, int index, size_t *start, size_t *length) {
    size_t base = n / (size_t)parts, extra = n % (size_t)parts, i = (size_t)index;
    *start = i * base + (i < extra ? i : extra);
    *length = base + (i < extra ? 1 : 0);
}

void tsr_mpi_grid_init(MPI_Comm comm, tsr_mpi_grid *grid) {
    memset(grid, 0, sizeof *grid);
    grid->comm = comm;
    MPI_Comm_rank(comm, &grid->rank);
    MPI_Comm_size(comm, &grid->ranks);
    tsr_mpi_grid_shape(grid->ranks, &grid->pr, &grid->pc);
    grid->my_row = grid->rank / grid->pc;
    grid->my_col = grid->rank % grid->pc;
    /* MPI_Comm_split has no nonblocking form; an Ibarrier first proves every rank is here, so
     * the split cannot wait on a dead or stalled peer (it would time out in the barrier). */
    MPI_Request req;
    MPI_Ibarrier(comm, &req);
    tsr_mpi_wait(comm, &req, "every rank before making the process grid (MPI_Ibarrier)");
    MPI_Comm_split(comm, grid->my_row, grid->my_col, &grid->row_comm);
    MPI_Comm_split(comm, grid->my_col, grid->my_row, &grid->col_comm);
}

void tsr_mpi_grid_free(tsr_mpi_grid *grid) {
    if (grid->row_comm != MPI_COMM_NULL) MPI_Comm_free(&grid->row_comm);
    if (grid->col_comm != MPI_COMM_NULL) MPI_Comm_free(&grid->col_comm);
}

/* Extents of the block of grid rank r. */
static void block_of(const tsr_mpi_grid *grid, int r, size_t rows, size_t cols, size_t *r0, size_t *nr, size_t *c0,
                     size_t *nc) {
    tsr_mpi_block(rows, grid->pr, r / grid->pc, r0, nr);
    tsr_mpi_block(cols, grid->pc, r % grid->pc, c0, nc);
}

static int checked_int(MPI_Comm comm, size_t value, const char *what) {
    if (value > INT_MAX)
        tsr_mpi_abort(comm, "%s: %zu elements, more than one MPI message holds (INT_MAX)", what, value);
    return (int)value;
}

/* The block (r0, c0, nr x nc) of a row-major matrix with `cols` columns, as one MPI datatype. */
static MPI_Datatype block_type(MPI_Comm comm, size_t nr, size_t nc, size_t cols) {
    MPI_Datatype type;
    MPI_Type_vector(checked_int(comm, nr, "a matrix block's rows"), checked_int(comm, nc, "a matrix block's columns"),
                    checked_int(comm, cols, "a matrix's columns"), MPI_FLOAT, &type);
    MPI_Type_commit(&type);
    return type;
}

void tsr_mpi_scatter_matrix(const tsr_mpi_grid *grid, const float *global, size_t rows, size_t cols, float **local,
                            size_t *local_rows, size_t *local_cols) {
    size_t r0, nr, c0, nc;
    block_of(grid, grid->rank, rows, cols, &r0, &nr, &c0, &nc);
    *local_rows = nr;
    *local_cols = nc;
    *local = malloc(nr && nc ? nr * nc * sizeof **local : 1);
    if (!*local) tsr_mpi_abort(grid->comm, "scattering a matrix: out of host memory for a %zu x %zu block", nr, nc);
    MPI_Request recv = MPI_REQUEST_NULL;
    if (grid->rank != 0 && nr && nc)
        MPI_Irecv(*local, checked_int(grid->comm, nr * nc, "a matrix block"), MPI_FLOAT, 0, 0x5ca7, grid->comm, &recv);
    if (grid->rank == 0) {
        for (int r = 0; r < grid->ranks; ++r) {
            size_t br0, bnr, bc0, bnc;
            block_of(grid, r, rows, cols, &br0, &bnr, &bc0, &bnc);
            if (!bnr || !bnc) continue;
            if (r == 0) {
                for (size_t i = 0; i < bnr; ++i)
                    memcpy(*local + i * bnc, global + (br0 + i) * cols + bc0, bnc * 4);
                continue;
            }
            MPI_Datatype type = block_type(grid->comm, bnr, bnc, cols);
            MPI_Request send;
            MPI_Isend(global + br0 * cols + bc0, 1, type, r, 0x5ca7, grid->comm, &send);
            tsr_mpi_wait(grid->comm, &send, "sending a matrix block (MPI_Isend)");
            MPI_Type_free(&type);
        }
    }
    tsr_mpi_wait(grid->comm, &recv, "this rank's matrix block from rank 0 (MPI_Irecv)");
}

void tsr_mpi_gather_matrix(const tsr_mpi_grid *grid, const float *local, size_t rows, size_t cols, float *global) {
    size_t r0, nr, c0, nc;
    block_of(grid, grid->rank, rows, cols, &r0, &nr, &c0, &nc);
    if (grid->rank != 0) {
        if (!nr || !nc) return;
        MPI_Request send;
        MPI_Isend(local, checked_int(grid->comm, nr * nc, "a matrix block"), MPI_FLOAT, 0, 0x6a7e, grid->comm, &send);
        tsr_mpi_wait(grid->comm, &send, "sending this rank's result block to rank 0 (MPI_Isend)");
        return;
    }
    for (int r = 0; r < grid->ranks; ++r) {
        size_t br0, bnr, bc0, bnc;
        block_of(grid, r, rows, cols, &br0, &bnr, &bc0, &bnc);
        if (!bnr || !bnc) continue;
        if (r == 0) {
            for (size_t i = 0; i < bnr; ++i)
                memcpy(global + (br0 + i) * cols + bc0, local + i * bnc, bnc * 4);
            continue;
        }
        MPI_Datatype type = block_type(grid->comm, bnr, bnc, cols);
        MPI_Request recv;
        MPI_Irecv(global + br0 * cols + bc0, 1, type, r, 0x6a7e, grid->comm, &recv);
        char what[96];
        snprintf(what, sizeof what, "the result block of rank %d (MPI_Irecv)", r);
        tsr_mpi_wait(grid->comm, &recv, what);
        MPI_Type_free(&type);
    }
}

/* ---- SUMMA ---- */

/* One panel of the k loop: columns [k0, k0 + width) of A (owned by grid column a_owner) and the
 * same rows of B (owned by grid row b_owner). */
typedef struct panel_step {
    size_t k0, width;
    int a_owner, b_owner;
} panel_step;

/* The first block boundary of a `parts`-way split of n after position k. */
static size_t next_boundary(size_t n, int parts, size_t k, int *owner) {
    for (int i = 0; i < parts; ++i) {
        size_t start, length;
        tsr_mpi_block(n, parts, i, &start, &length);
        if (k >= start && k < start + length) {
            *owner = i;
            return start + length;
        }
    }
    *owner = parts - 1;
    return n;
}

static size_t plan_panels(size_t k, int pr, int pc, size_t panel, panel_step *steps) {
    size_t count = 0;
    for (size_t k0 = 0; k0 < k;) {
        panel_step s = {k0, 0, 0, 0};
        size_t end_a = next_boundary(k, pc, k0, &s.a_owner), end_b = next_boundary(k, pr, k0, &s.b_owner);
        size_t end = k0 + panel < k ? k0 + panel : k;
        if (end_a < end) end = end_a;
        if (end_b < end) end = end_b;
        s.width = end - k0;
        if (steps) steps[count] = s;
        ++count;
        k0 = end;
    }
    return count;
}

typedef struct summa_state {
    const tsr_mpi_grid *grid;
    size_t mi, nj, ka, kb, ka0, kb0;
    const float *a_local, *b_local;
    float *a_host[2], *b_host[2];
    MPI_Request reqs[2][2]; /* [buffer][A, B] */
} summa_state;

/* Pack (if this rank owns it) and post the broadcasts of one panel into host buffer `buf`. */
static void post_panel(summa_state *s, const panel_step *step, int buf) {
    const tsr_mpi_grid *g = s->grid;
    size_t w = step->width;
    if (g->my_col == step->a_owner)
        for (size_t i = 0; i < s->mi; ++i)
            memcpy(s->a_host[buf] + i * w, s->a_local + i * s->ka + (step->k0 - s->ka0), w * sizeof(float));
    if (g->my_row == step->b_owner)
        memcpy(s->b_host[buf], s->b_local + (step->k0 - s->kb0) * s->nj, w * s->nj * sizeof(float));
    MPI_Ibcast(s->a_host[buf], checked_int(g->comm, s->mi * w, "an A panel"), MPI_FLOAT, step->a_owner, g->row_comm,
               &s->reqs[buf][0]);
    MPI_Ibcast(s->b_host[buf], checked_int(g->comm, w * s->nj, "a B panel"), MPI_FLOAT, step->b_owner, g->col_comm,
               &s->reqs[buf][1]);
}

static double event_span(cl_event from_end_of, cl_event to_end_of) {
    cl_ulong start = 0, end = 0;
    if (clGetEventProfilingInfo(from_end_of, CL_PROFILING_COMMAND_END, sizeof start, &start, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(to_end_of, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) != CL_SUCCESS ||
        end < start)
        return NAN;
    return (double)(end - start) * 1e-9;
}

/* A panel's GEMM failing at execution leaves garbage in C: wait for its event and check how it
 * ended; any error aborts the job (peers would otherwise go on and report a wrong product). */
static void check_gemm(const tsr_mpi_grid *grid, cl_event event, size_t panel, size_t panels) {
    cl_int state = CL_COMPLETE;
    cl_int err = clWaitForEvents(1, &event);
    if (err == CL_SUCCESS) err = clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL);
    if (err != CL_SUCCESS || state < 0) {
        tsr_set_cl_error(err != CL_SUCCESS ? err : state, "the local GEMM (clWaitForEvents)", __FILE__, __LINE__);
        tsr_mpi_abort(grid->comm, "SUMMA: the local GEMM of panel %zu of %zu failed on the device: %s", panel, panels,
                      tsr_last_error());
    }
}

static void release_event(cl_event *event) {
    if (*event) clReleaseEvent(*event);
    *event = NULL;
}

tsr_status tsr_mpi_sgemm_summa(tsr_device *device, const tsr_mpi_grid *grid, size_t m, size_t n, size_t k,
                               const float *a_local, const float *b_local, float *c_local, size_t panel,
                               tsr_mpi_gemm_times *times) {
    tsr_mpi_gemm_times t = {0, 0, 0, 0, 0};
    if (panel == 0) panel = DEFAULT_PANEL;
    summa_state s;
    memset(&s, 0, sizeof s);
    s.grid = grid;
    s.a_local = a_local;
    s.b_local = b_local;
    size_t r0, c0;
    tsr_mpi_block(m, grid->pr, grid->my_row, &r0, &s.mi);
    tsr_mpi_block(n, grid->pc, grid->my_col, &c0, &s.nj);
    tsr_mpi_block(k, grid->pc, grid->my_col, &s.ka0, &s.ka);
    tsr_mpi_block(k, grid->pr, grid->my_row, &s.kb0, &s.kb);
    size_t count = plan_panels(k, grid->pr, grid->pc, panel, NULL);
    panel_step *steps = malloc((count ? count : 1) * sizeof *steps);
    if (!steps) tsr_mpi_abort(grid->comm, "SUMMA: out of host memory");
    plan_panels(k, grid->pr, grid->pc, panel, steps);
    size_t max_w = 0;
    for (size_t p = 0; p < count; ++p)
        if (steps[p].width > max_w) max_w = steps[p].width;

    tsr_status status = TSR_SUCCESS;
    cl_context ctx = tsr_device_context(device);
    cl_command_queue queue = tsr_device_queue(device);
    cl_mem a_dev[2] = {NULL, NULL}, b_dev[2] = {NULL, NULL}, c_dev = NULL;
    cl_event a_written[2] = {NULL, NULL}, b_written[2] = {NULL, NULL}, gemm_done[2] = {NULL, NULL};
    size_t a_panel_floats = s.mi * max_w, b_panel_floats = max_w * s.nj, c_floats = s.mi * s.nj;
    int compute = a_panel_floats && b_panel_floats && c_floats; /* an empty block only relays */
    for (int b = 0; b < 2; ++b) {
        s.a_host[b] = malloc(a_panel_floats ? a_panel_floats * sizeof(float) : 1);
        s.b_host[b] = malloc(b_panel_floats ? b_panel_floats * sizeof(float) : 1);
        if (!s.a_host[b] || !s.b_host[b]) tsr_mpi_abort(grid->comm, "SUMMA: out of host memory for panels");
        s.reqs[b][0] = s.reqs[b][1] = MPI_REQUEST_NULL;
    }
    cl_int err = CL_SUCCESS;
    if (compute) {
        for (int b = 0; b < 2 && err == CL_SUCCESS; ++b) {
            a_dev[b] = clCreateBuffer(ctx, CL_MEM_READ_ONLY, a_panel_floats * sizeof(float), NULL, &err);
            if (err == CL_SUCCESS)
                b_dev[b] = clCreateBuffer(ctx, CL_MEM_READ_ONLY, b_panel_floats * sizeof(float), NULL, &err);
        }
        if (err == CL_SUCCESS) c_dev = clCreateBuffer(ctx, CL_MEM_READ_WRITE, c_floats * sizeof(float), NULL, &err);
        /* Panels narrower than the widest leave the ends of the panel buffers unwritten, and the
         * GEMM kernel may load (and then discard) beyond its operands: start from zeros, never
         * from uninitialized memory. (Written from the host: Oclgrind does not count
         * clEnqueueFillBuffer as initializing.) */
        size_t most = a_panel_floats > b_panel_floats ? a_panel_floats : b_panel_floats;
        if (c_floats > most) most = c_floats;
        float *zeros = calloc(most, sizeof(float));
        if (!zeros) tsr_mpi_abort(grid->comm, "SUMMA: out of host memory");
        for (int b = 0; b < 2 && err == CL_SUCCESS; ++b) {
            err =
                clEnqueueWriteBuffer(queue, a_dev[b], CL_TRUE, 0, a_panel_floats * sizeof(float), zeros, 0, NULL, NULL);
            if (err == CL_SUCCESS)
                err = clEnqueueWriteBuffer(queue, b_dev[b], CL_TRUE, 0, b_panel_floats * sizeof(float), zeros, 0, NULL,
                                           NULL);
        }
        if (err == CL_SUCCESS)
            err = clEnqueueWriteBuffer(queue, c_dev, CL_TRUE, 0, c_floats * sizeof(float), zeros, 0, NULL, NULL);
        free(zeros);
        if (err != CL_SUCCESS) {
            /* Peers would wait for this rank's broadcasts: end the job with the reason. */
            tsr_set_cl_error(err, "clCreateBuffer (SUMMA panels and C block)", __FILE__, __LINE__);
            tsr_mpi_abort(grid->comm, "SUMMA: %s", tsr_last_error());
        }
    }

    double start = MPI_Wtime();
    if (count) post_panel(&s, &steps[0], 0);
    for (size_t p = 0; p < count; ++p) {
        int buf = (int)(p % 2), other = 1 - buf;
        char what[96];
        snprintf(what, sizeof what, "the broadcast of SUMMA panel %zu of %zu (MPI_Ibcast)", p + 1, count);
        double idle = 0;
        t.comm_total += tsr_mpi_wait_while(grid->comm, 2, s.reqs[buf], what, p ? gemm_done[other] : NULL, &idle);
        t.comm_wait += idle;
        if (p + 1 < count) {
            /* The other host buffers were last read by the uploads of panel p - 1. */
            cl_event uploads[2] = {a_written[other], b_written[other]};
            if (uploads[0] && clWaitForEvents(2, uploads) != CL_SUCCESS) {
                tsr_set_error(TSR_ERR_OPENCL, "SUMMA: an upload of panel %zu failed", p);
                tsr_mpi_abort(grid->comm, "SUMMA: %s", tsr_last_error());
            }
            post_panel(&s, &steps[p + 1], other);
        }
        if (!compute) continue;
        size_t w = steps[p].width;
        if (gemm_done[buf]) { /* panel p - 2, finished or about to be: the queue is in order */
            check_gemm(grid, gemm_done[buf], p - 1, count);
            t.local_gemm += event_span(b_written[buf], gemm_done[buf]);
        }
        release_event(&a_written[buf]);
        release_event(&b_written[buf]);
        release_event(&gemm_done[buf]);
        /* Writes are nonblocking: the host buffer stays untouched until a_written/b_written. */
        err = clEnqueueWriteBuffer(queue, a_dev[buf], CL_FALSE, 0, s.mi * w * sizeof(float), s.a_host[buf], 0, NULL,
                                   &a_written[buf]);
        if (err == CL_SUCCESS)
            err = clEnqueueWriteBuffer(queue, b_dev[buf], CL_FALSE, 0, w * s.nj * sizeof(float), s.b_host[buf], 0, NULL,
                                       &b_written[buf]);
        if (err != CL_SUCCESS) {
            tsr_set_cl_error(err, "clEnqueueWriteBuffer (SUMMA panel)", __FILE__, __LINE__);
            tsr_mpi_abort(grid->comm, "SUMMA: %s", tsr_last_error());
        }
        const tsr_matmul_desc local = {.m = s.mi, .n = s.nj, .k = w, .alpha = 1.0f, .beta = p == 0 ? 0.0f : 1.0f};
        status = tsr_matmul(device, &local, a_dev[buf], b_dev[buf], c_dev, queue, &gemm_done[buf]);
        if (status != TSR_SUCCESS)
            tsr_mpi_abort(grid->comm, "SUMMA: the local GEMM of panel %zu failed: %s", p + 1, tsr_last_error());
        clFlush(queue);
        if (p == 0) tsr_mpi_fault_point("summa");
    }
    if (compute) {
        /* The last two panels' GEMMs: panel count - 1 in buffer (count - 1) % 2, the one before in the other. */
        for (int b = 0; b < 2; ++b)
            if (gemm_done[b]) check_gemm(grid, gemm_done[b], (size_t)b == (count - 1) % 2 ? count : count - 1, count);
        err = clEnqueueReadBuffer(queue, c_dev, CL_TRUE, 0, c_floats * sizeof(float), c_local, 0, NULL, NULL);
        if (err != CL_SUCCESS) {
            tsr_set_cl_error(err, "clEnqueueReadBuffer (SUMMA C block)", __FILE__, __LINE__);
            tsr_mpi_abort(grid->comm, "SUMMA: %s", tsr_last_error());
        }
        /* Each panel's GEMM runs from the end of its B upload (in-order queue) to its event's end. */
        for (int b = 0; b < 2; ++b)
            if (gemm_done[b]) t.local_gemm += event_span(b_written[b], gemm_done[b]);
    } else if (count == 0 && c_floats) { /* k = 0: A B is the zero matrix */
        memset(c_local, 0, c_floats * sizeof(float));
    }
    t.total = MPI_Wtime() - start;
    t.panels = (int)count;
    if (!compute) t.local_gemm = 0;
    for (int b = 0; b < 2; ++b) {
        release_event(&a_written[b]);
        release_event(&b_written[b]);
        release_event(&gemm_done[b]);
        if (a_dev[b]) clReleaseMemObject(a_dev[b]);
        if (b_dev[b]) clReleaseMemObject(b_dev[b]);
        free(s.a_host[b]);
        free(s.b_host[b]);
    }
    if (c_dev) clReleaseMemObject(c_dev);
    free(steps);
    if (times) *times = t;
    return status;
}
