/* A complete program using an installed tessera:
 *   cc sgemm.c $(pkg-config --cflags --libs tessera) -o sgemm && ./sgemm [SELECTOR] */
#include <tessera.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    enum { M = 64, N = 48, K = 80 };
    static float a[M * K], b[K * N], c[M * N];
    for (int i = 0; i < M * K; ++i) a[i] = (float)((i * 7) % 13) - 6.0f;
    for (int i = 0; i < K * N; ++i) b[i] = (float)((i * 5) % 11) - 5.0f;

    tsr_device *dev = NULL;
    tsr_status st = tsr_device_open(argc > 1 ? argv[1] : NULL, &dev);
    if (st != TSR_SUCCESS) {
        fprintf(stderr, "%s: %s\n", tsr_status_str(st), tsr_last_error());
        return 1;
    }
    cl_context ctx = tsr_device_context(dev);
    cl_int err;
    cl_mem da = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof a, a, &err);
    cl_mem db = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof b, b, &err);
    cl_mem dc = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, sizeof c, NULL, &err);
    st = tsr_sgemm(dev, TSR_ROW_MAJOR, TSR_NO_TRANS, TSR_NO_TRANS, M, N, K, 1.0f, da, 0, K, db, 0, N, 0.0f, dc, 0, N,
                   NULL, NULL);
    if (st != TSR_SUCCESS) {
        fprintf(stderr, "%s: %s\n", tsr_status_str(st), tsr_last_error());
        return 1;
    }
    clEnqueueReadBuffer(tsr_device_queue(dev), dc, CL_TRUE, 0, sizeof c, c, 0, NULL, NULL);
    double worst = 0;
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double r = 0;
            for (int l = 0; l < K; ++l) r += (double)a[i * K + l] * b[l * N + j];
            worst = fmax(worst, fabs(r - c[i * N + j]));
        }
    printf("sgemm %dx%dx%d on %s: max abs error %g\n", M, N, K, tsr_device_get_info(dev)->name, worst);
    clReleaseMemObject(da);
    clReleaseMemObject(db);
    clReleaseMemObject(dc);
    tsr_device_close(dev);
    return worst == 0 ? 0 : 1; /* small integers: the result is exact */
}
