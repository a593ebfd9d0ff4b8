/* Host references in double precision, the relative-error metric and the seeded random generator:
 * one copy of each, used by the op fixtures (tuner, demo, report), the tests and the benchmarks. */
#include "internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* ---- seeded random inputs ---- */

uint64_t tsr_random_next(uint64_t *state) {
    /* 64-bit LCG (Knuth's MMIX constants): fast, reproducible from a seed, good enough for inputs */
    return *state = *state * 6364136223846793005ull + 1442695040888963407ull;
}

float tsr_random_float(uint64_t *state, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(tsr_random_next(state) >> 40) / 16777216.0);
}

void tsr_random_fill(float *x, size_t n, uint64_t *state, float lo, float hi) {
    for (size_t i = 0; i < n; ++i) x[i] = tsr_random_float(state, lo, hi);
}

uint64_t tsr_random_fresh_seed(void) {
    static atomic_uint calls; /* two fixtures made in the same second still differ */
    unsigned call = atomic_fetch_add(&calls, 1u) + 1u;
    return ((uint64_t)time(NULL) ^ 0x9E3779B97F4A7C15ull) + 0x2545F4914F6CDD1Dull * call;
}

/* ---- relative error ---- */

void tsr_error_add(tsr_error_sum *sum, double got, double ref) {
    sum->num += (got - ref) * (got - ref);
    sum->den += ref * ref;
}

double tsr_error_value(const tsr_error_sum *sum) {
    if (isnan(sum->num)) return INFINITY; /* an unwritten (poisoned) or broken element */
    return sum->den > 0 ? sqrt(sum->num / sum->den) : sqrt(sum->num);
}

double tsr_rel_error(const float *got, const double *ref, size_t n) {
    tsr_error_sum sum = {0, 0};
    for (size_t i = 0; i < n; ++i) tsr_error_add(&sum, got[i], ref[i]);
    return tsr_error_value(&sum);
}

/* ---- GEMM ---- */

void tsr_gemm_reference(size_t batch, size_t m, size_t n, size_t k, const float *a, const float *b, double *c) {
    for (size_t bi = 0; bi < batch; ++bi) {
        const float *A = a + bi * m * k, *B = b + bi * k * n;
        double *C = c + bi * m * n;
        for (size_t r = 0; r < m; ++r)
            for (size_t col = 0; col < n; ++col) {
                double s = 0;
                for (size_t l = 0; l < k; ++l) s += (double)A[r * k + l] * B[l * n + col];
                C[r * n + col] = s;
            }
    }
}

tsr_status tsr_gemm_probe_reference(size_t batch, size_t m, size_t n, size_t k, const float *a, const float *b,
                                    const double *probes, int nprobes, double *out) {
    double *bt = malloc((k ? k : 1) * sizeof *bt);
    if (!bt) return tsr_fail(TSR_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t bi = 0; bi < batch; ++bi)
        for (int q = 0; q < nprobes; ++q) {
            const float *A = a + bi * m * k, *B = b + bi * k * n;
            const double *t = probes + (size_t)q * n;
            for (size_t l = 0; l < k; ++l) {
                double s = 0;
                for (size_t col = 0; col < n; ++col) s += (double)B[l * n + col] * t[col];
                bt[l] = s;
            }
            for (size_t r = 0; r < m; ++r) {
                double s = 0;
                for (size_t l = 0; l < k; ++l) s += (double)A[r * k + l] * bt[l];
                out[(bi * (size_t)nprobes + (size_t)q) * m + r] = s;
            }
        }
    free(bt);
    return TSR_SUCCESS;
}

double tsr_gemm_probe_error(size_t batch, size_t m, size_t n, const float *c, const double *probes, int nprobes,
                            const double *reference) {
    tsr_error_sum sum = {0, 0};
    for (size_t bi = 0; bi < batch; ++bi)
        for (int q = 0; q < nprobes; ++q)
            for (size_t r = 0; r < m; ++r) {
                const float *row = c + (bi * m + r) * n;
                const double *t = probes + (size_t)q * n;
                double got = 0;
                for (size_t col = 0; col < n; ++col) got += (double)row[col] * t[col];
                tsr_error_add(&sum, got, reference[(bi * (size_t)nprobes + (size_t)q) * m + r]);
            }
    return tsr_error_value(&sum);
}

/* ---- GELU ---- */

double tsr_gelu_reference(int mode, double x) {
    if (isnan(x)) return x;
    if (isinf(x)) return x > 0 ? x : -0.0;
    if (mode == TSR_GELU_ERF) return 0.5 * x * erfc(-x / sqrt(2.0));
    double u = sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + tanh(u));
}

double tsr_gelu_max_error(int mode, const float *x, const float *y, size_t n) {
    return tsr_gelu_max_error_stored(mode, TSR_F32, x, y, n);
}

double tsr_gelu_max_error_stored(int mode, tsr_dtype y_type, const float *x, const float *y, size_t n) {
    const double u = y_type == TSR_F32 ? 0.0 : tsr_dtype_unit_roundoff(y_type);
    /* a 16-bit y rounds a value within TSR_GELU16_ERROR max(1, |x|) of GELU(x) */
    const double approx = y_type == TSR_F32 ? 0.0 : (1.0 + u) * TSR_GELU16_ERROR;
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
        double r = tsr_gelu_reference(mode, x[i]);
        double e = isnan(r) ? (isnan(y[i]) ? 0 : INFINITY)
                   : (double)y[i] == r
                       ? 0 /* also GELU(+Inf) = +Inf */
                       : fmax(0.0, (fabs((double)y[i] - r) - u * fabs(r)) / fmax(1.0, fabs((double)x[i])) - approx);
        if (isnan(e)) e = INFINITY;
        worst = fmax(worst, e);
    }
    return worst;
}

/* ---- conv2d ---- */

static size_t or_one(size_t v) { return v ? v : 1; }

void tsr_conv2d_reference(const tsr_conv2d_desc *d, const float *x, const float *w, const float *bias, double *y) {
    tsr_conv2d_reference_fused(d, x, w, NULL, bias, NULL, y);
}

void tsr_conv2d_reference_fused(const tsr_conv2d_desc *d, const float *x, const float *w, const float *scale,
                                const float *bias, const float *residual, double *y) {
    size_t N = d->batch, C = d->in_channels, H = d->in_height, W = d->in_width, K = d->out_channels;
    size_t R = d->kernel_h, S = d->kernel_w, G = or_one(d->groups), Cg = C / G, Kg = K / G;
    size_t sh = or_one(d->stride_h), sw = or_one(d->stride_w), dh = or_one(d->dilation_h), dw = or_one(d->dilation_w);
    /* The output size from the header's formula, worked out here rather than taken from the op,
     * so the reference does not share the implementation's shape arithmetic (callers pass
     * descriptors the op accepted). */
    size_t span_h = dh * (R - 1) + 1, span_w = dw * (S - 1) + 1;
    if (R == 0 || S == 0 || H + 2 * d->pad_h < span_h || W + 2 * d->pad_w < span_w) return;
    size_t P = (H + 2 * d->pad_h - span_h) / sh + 1, Q = (W + 2 * d->pad_w - span_w) / sw + 1, PQ = P * Q;
    /* x, y and the residual in the descriptor's layout: element (n, c, pixel) of a tensor with
     * `ch` channels and `px` pixels per image; i counts a channel's outputs (oh Q + ow) */
    const bool nhwc = d->layout == TSR_NHWC;
#define AT(n, c, pix, ch, px) (nhwc ? ((n) * (px) + (pix)) * (ch) + (c) : ((n) * (ch) + (c)) * (px) + (pix))
    for (size_t n = 0; n < N; ++n)
        for (size_t k = 0; k < K; ++k) {
            size_t g = k / Kg;
            for (size_t i = 0; i < PQ; ++i) y[AT(n, k, i, K, PQ)] = 0.0;
            for (size_t c = 0; c < Cg; ++c)
                for (size_t r = 0; r < R; ++r)
                    for (size_t s = 0; s < S; ++s) {
                        double wv = w[((k * Cg + c) * R + r) * S + s];
                        for (size_t oh = 0; oh < P; ++oh) {
                            long ih = (long)(oh * sh + r * dh) - (long)d->pad_h;
                            if (ih < 0 || ih >= (long)H) continue;
                            for (size_t ow = 0; ow < Q; ++ow) {
                                long iw = (long)(ow * sw + s * dw) - (long)d->pad_w;
                                if (iw >= 0 && iw < (long)W)
                                    y[AT(n, k, oh * Q + ow, K, PQ)] +=
                                        wv * x[AT(n, g * Cg + c, (size_t)ih * W + (size_t)iw, C, H * W)];
                            }
                        }
                    }
            /* the epilogue, in the header's order: scale, bias, residual, activation */
            int act = (int)d->epilogue.activation;
            for (size_t i = 0; i < PQ; ++i) {
                double *v = &y[AT(n, k, i, K, PQ)];
                *v = *v * (scale ? scale[k] : 1.0) + (bias ? bias[k] : 0.0) +
                     (residual ? residual[AT(n, k, i, K, PQ)] : 0.0);
                if (act != TSR_ACT_NONE) *v = act == TSR_ACT_RELU ? (*v < 0 ? 0.0 : *v) : tsr_gelu_reference(act, *v);
            }
        }
#undef AT
}

/* ---- attention ---- */

void tsr_attention_reference_row(const float *q_row, const float *k, const float *v, size_t kv_len, size_t head_dim,
                                 double scale, double *scores, double *out) {
    double m = -INFINITY, sum = 0;
    for (size_t j = 0; j < kv_len; ++j) {
        double dot = 0;
        for (size_t d = 0; d < head_dim; ++d) dot += (double)q_row[d] * k[j * head_dim + d];
        scores[j] = dot * scale;
        m = fmax(m, scores[j]);
    }
    for (size_t j = 0; j < kv_len; ++j) sum += (scores[j] = exp(scores[j] - m));
    for (size_t d = 0; d < head_dim; ++d) {
        double acc = 0;
        for (size_t j = 0; j < kv_len; ++j) acc += scores[j] * v[j * head_dim + d];
        out[d] = acc / sum;
    }
}

/* ---- pool2d ---- */

/* One dimension's output size as PyTorch defines it (pooling_output_shape), in signed arithmetic. */
static long long pool_reference_out(long long n, long long k, long long s, long long p, long long d, int ceil_mode) {
    const long long span = n + 2 * p - d * (k - 1) - 1;
    long long out = (span + (ceil_mode ? s - 1 : 0)) / s + 1;
    if (ceil_mode && (out - 1) * s >= n + p) --out;
    return out;
}

void tsr_pool2d_reference(const tsr_pool2d_desc *d, const float *x, double *y) {
    const long long N = (long long)d->batch, C = (long long)d->channels, H = (long long)d->in_height,
                    W = (long long)d->in_width, KH = (long long)d->kernel_h, KW = (long long)d->kernel_w,
                    SH = (long long)d->stride_h, SW = (long long)d->stride_w, PH = (long long)d->pad_h,
                    PW = (long long)d->pad_w, DH = (long long)d->dilation_h, DW = (long long)d->dilation_w;
    const long long OH = pool_reference_out(H, KH, SH, PH, DH, d->ceil_mode),
                    OW = pool_reference_out(W, KW, SW, PW, DW, d->ceil_mode);
    const bool nhwc = d->layout == TSR_NHWC;
    for (long long n = 0; n < N; ++n)
        for (long long c = 0; c < C; ++c)
            for (long long oh = 0; oh < OH; ++oh)
                for (long long ow = 0; ow < OW; ++ow) {
                    const long long hs = oh * SH - PH, ws = ow * SW - PW;
                    double acc = d->kind == TSR_POOL_MAX ? -INFINITY : 0.0;
                    long long inside = 0;
                    for (long long i = 0; i < KH; ++i)
                        for (long long j = 0; j < KW; ++j) {
                            const long long ih = hs + i * DH, iw = ws + j * DW;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            const double v = x[nhwc ? ((n * H + ih) * W + iw) * C + c : ((n * C + c) * H + ih) * W + iw];
                            ++inside;
                            if (d->kind == TSR_POOL_AVG) acc += v;
                            else if (isnan(v) || v > acc) acc = isnan(acc) ? acc : v;
                        }
                    if (d->kind == TSR_POOL_AVG) {
                        /* count_include_pad: the window clipped to the padded input [-p, n + p) */
                        const long long he = hs + KH < H + PH ? hs + KH : H + PH, we = ws + KW < W + PW ? ws + KW : W + PW;
                        const long long divisor = !d->exclude_pad ? (he - hs) * (we - ws) : inside;
                        acc = divisor > 0 ? acc / (double)divisor : 0.0;
                    }
                    y[nhwc ? ((n * OH + oh) * OW + ow) * C + c : ((n * C + c) * OH + oh) * OW + ow] = acc;
                }
}
