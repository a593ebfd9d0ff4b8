/* Attention, blocked and unfused, against a double-precision reference: query and key
 * lengths from 1 to 2048 (also Lq != Lk), head dimensions 1 to 256, causal or not, padded
 * batches, [B, L, H, D] strides, logits of +-1e4, the log-sum-exp output, configurations,
 * and every invalid descriptor. Relative error (norm over the output) <= 1e-5.
 * TSR_TEST_MODE=oclgrind runs a small subset. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define dev th_dev /* the group's device (harness) */

static bool small_mode(void) { return th_oclgrind_mode(); }

typedef struct att_case {
    size_t B, H, Lq, Lk, D;
    bool causal, blh;       /* blh: [B, L, H, D] layout through strides */
    const int *kv_lengths;
    float logit_scale;      /* inputs drawn from [-a, a] with a = sqrt(logit_scale) */
    bool integer_qk;        /* round Q and K to integers: every score exact in fp32 */
    size_t off;             /* offset of every tensor */
    bool lse;
} att_case;

static size_t elem(const att_case *c, size_t L, size_t b, size_t h, size_t i) {
    return c->off + (c->blh ? ((b * L + i) * c->H + h) * c->D : ((b * c->H + h) * L + i) * c->D);
}

/* Run one case with fn; returns the relative error and checks rows with no visible key. */
static double run_case(const att_case *c, tsr_status (*fn)(tsr_device *, const tsr_attention_desc *, cl_mem, cl_mem,
                                                            cl_mem, cl_mem, cl_command_queue, cl_event *)) {
    size_t nq = c->off + c->B * c->H * c->Lq * c->D + 3, nk = c->off + c->B * c->H * c->Lk * c->D + 3;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *o = malloc(nq * 4);
    float a = c->logit_scale > 0 ? sqrtf(c->logit_scale) : 1.0f;
    th_fill_uniform(q, nq, -a, a);
    th_fill_uniform(k, nk, -a, a);
    th_fill_uniform(v, nk, -1, 1);
    for (size_t i = 0; c->integer_qk && i < nq; ++i) q[i] = rintf(q[i]);
    for (size_t i = 0; c->integer_qk && i < nk; ++i) k[i] = rintf(k[i]);
    for (size_t i = 0; i < nq; ++i) o[i] = 777.0f; /* guard value outside the output */
    for (size_t b = 0; b < c->B; ++b)
        for (size_t h = 0; h < c->H; ++h)
            for (size_t i = 0; i < c->Lq; ++i) th_poison(o + elem(c, c->Lq, b, h, i), c->D);
    size_t nl = c->B * c->H * c->Lq + 2;
    float *lse = malloc(nl * 4);
    th_poison(lse, nl);
    cl_mem dq = th_buffer_from(dev, q, nq), dk = th_buffer_from(dev, k, nk), dv = th_buffer_from(dev, v, nk),
           dout = th_buffer_from(dev, o, nq), dl = th_buffer_from(dev, lse, nl);
    tsr_attention_desc d = {.batch = c->B, .heads = c->H, .q_len = c->Lq, .kv_len = c->Lk, .head_dim = c->D,
                            .q_offset = c->off, .k_offset = c->off, .v_offset = c->off, .o_offset = c->off,
                            .causal = c->causal, .kv_lengths = c->kv_lengths, .lse = c->lse ? dl : NULL,
                            .lse_offset = 1};
    if (c->blh) {
        size_t sq[3] = {c->Lq * c->H * c->D, c->D, c->H * c->D}, sk[3] = {c->Lk * c->H * c->D, c->D, c->H * c->D};
        memcpy(d.q_strides, sq, sizeof sq), memcpy(d.o_strides, sq, sizeof sq);
        memcpy(d.k_strides, sk, sizeof sk), memcpy(d.v_strides, sk, sizeof sk);
    }
    cl_event ev = NULL;
    tsr_status st = fn(dev, &d, dq, dk, dv, dout, NULL, &ev);
    if (st != TSR_SUCCESS)
        fail_msg("attention B%zu H%zu Lq%zu Lk%zu D%zu: %s: %s", c->B, c->H, c->Lq, c->Lk, c->D, tsr_status_str(st),
                 tsr_last_error());
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    th_read(dev, dout, o, nq);
    th_read(dev, dl, lse, nl);

    double num = 0, den = 0, scale = 1.0 / sqrt((double)c->D);
    double *s = malloc(c->Lk * sizeof *s);
    char *inside = calloc(nq, 1);
    for (size_t b = 0; b < c->B; ++b) {
        size_t kv = c->kv_lengths ? (size_t)c->kv_lengths[b] : c->Lk;
        for (size_t h = 0; h < c->H; ++h)
            for (size_t i = 0; i < c->Lq; ++i) {
                size_t limit = kv;
                if (c->causal) {
                    long long last = (long long)i + (long long)c->Lk - (long long)c->Lq; /* last visible key */
                    limit = last < 0 ? 0 : (size_t)last + 1 < limit ? (size_t)last + 1 : limit;
                }
                const float *qi = q + elem(c, c->Lq, b, h, i);
                const float *oi = o + elem(c, c->Lq, b, h, i);
                memset(inside + elem(c, c->Lq, b, h, i), 1, c->D);
                double m = -INFINITY, sum = 0;
                for (size_t j = 0; j < limit; ++j) {
                    const float *kj = k + elem(c, c->Lk, b, h, j);
                    double dot = 0;
                    for (size_t e = 0; e < c->D; ++e) dot += (double)qi[e] * kj[e];
                    s[j] = dot * scale;
                    m = fmax(m, s[j]);
                }
                for (size_t j = 0; j < limit; ++j) sum += (s[j] = exp(s[j] - m));
                float got_lse = lse[1 + (b * c->H + h) * c->Lq + i];
                if (limit == 0) { /* no visible key: zeros, LSE -inf */
                    for (size_t e = 0; e < c->D; ++e)
                        if (oi[e] != 0.0f) fail_msg("row %zu/%zu/%zu sees no key but O = %g", b, h, i, (double)oi[e]);
                    if (c->lse && !(isinf(got_lse) && got_lse < 0)) fail_msg("row with no key: LSE %g", (double)got_lse);
                    continue;
                }
                for (size_t e = 0; e < c->D; ++e) {
                    double r = 0;
                    for (size_t j = 0; j < limit; ++j) r += s[j] * v[elem(c, c->Lk, b, h, j) + e];
                    r /= sum;
                    num += (oi[e] - r) * (oi[e] - r);
                    den += r * r;
                }
                if (c->lse) {
                    double ref_lse = m + log(sum);
                    if (!(fabs(got_lse - ref_lse) <= 1e-5 * fmax(1.0, fabs(ref_lse))))
                        fail_msg("LSE of row %zu/%zu/%zu: %.9g, reference %.9g", b, h, i, (double)got_lse, ref_lse);
                }
            }
    }
    for (size_t i = 0; i < nq; ++i)
        if (!inside[i] && o[i] != 777.0f) fail_msg("attention wrote outside O at element %zu", i);
    if (c->lse && !(isnan(lse[0]) && isnan(lse[nl - 1]))) fail_msg("attention wrote outside the LSE range");
    clReleaseMemObject(dq), clReleaseMemObject(dk), clReleaseMemObject(dv), clReleaseMemObject(dout);
    clReleaseMemObject(dl);
    free(q), free(k), free(v), free(o), free(lse), free(s), free(inside);
    if (isnan(num)) return INFINITY;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void expect_accurate(const att_case *c, bool unfused) {
    double e = run_case(c, unfused ? tsr_attention_unfused : tsr_attention);
    if (!(e <= 1e-5))
        fail_msg("%s attention B%zu H%zu Lq%zu Lk%zu D%zu causal %d blh %d: relative error %.3e",
                 unfused ? "unfused" : "blocked", c->B, c->H, c->Lq, c->Lk, c->D, c->causal, c->blh, e);
}

/* Lengths {1, 7, 64, 100, 1000, 2048} (also Lq != Lk) and head dimensions {1, 16, 32, 64,
 * 80, 128, 256}, with and without the causal mask. */
static void blocked_lengths_and_dims(void **state) {
    (void)state;
    static const size_t dims[] = {1, 16, 32, 64, 80, 128, 256};
    static const size_t lens[][2] = {{1, 1}, {7, 7}, {64, 64}, {100, 100}, {7, 100}, {100, 7}, {1, 1000}, {64, 1000}};
    size_t ndims = small_mode() ? 3 : 7, nlens = small_mode() ? 5 : 8;
    for (size_t di = 0; di < ndims; ++di)
        for (size_t li = 0; li < nlens; ++li)
            for (int causal = 0; causal < 2; ++causal) {
                att_case c = {.B = 1, .H = 2, .Lq = lens[li][0], .Lk = lens[li][1], .D = dims[di], .causal = causal,
                              .lse = causal};
                expect_accurate(&c, false);
            }
    if (!small_mode()) {
        const size_t big[][2] = {{1000, 1000}, {2048, 2048}, {2048, 100}, {100, 2048}};
        for (size_t i = 0; i < 4; ++i)
            for (int causal = 0; causal < 2; ++causal) {
                att_case c = {.B = 1, .H = 1, .Lq = big[i][0], .Lk = big[i][1], .D = 64, .causal = causal};
                expect_accurate(&c, false);
            }

    }
}

/* B=1, H=8, L=4096, D=64: the benchmark's shape, where PoCL, left to pick the work-group size,
 * once grouped so many work-items that its thread stack overflowed. Every output finite, and
 * the first, middle and last row of every head against the double-precision definition. */
static void long_sequence(void **state) {
    (void)state;
    enum { H = 8, L = 4096, D = 64 };
    size_t n = (size_t)H * L * D;
    float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4);
    double *s = malloc(L * sizeof *s);
    th_fill_uniform(q, n, -1, 1);
    th_fill_uniform(k, n, -1, 1);
    th_fill_uniform(v, n, -1, 1);
    th_poison(o, n);
    cl_mem dq = th_buffer_from(dev, q, n), dk = th_buffer_from(dev, k, n), dv = th_buffer_from(dev, v, n),
           dout = th_buffer_from(dev, o, n);
    tsr_attention_desc d = {.batch = 1, .heads = H, .q_len = L, .kv_len = L, .head_dim = D};
    TH_ASSERT_OK(tsr_attention(dev, &d, dq, dk, dv, dout, NULL, NULL));
    th_read(dev, dout, o, n);
    for (size_t i = 0; i < n; ++i)
        if (!isfinite(o[i])) fail_msg("o[%zu] = %g", i, o[i]);
    double num = 0, den = 0;
    for (size_t h = 0; h < H; ++h)
        for (size_t row = 0; row < 3; ++row) {
            size_t i = row == 0 ? 0 : row == 1 ? L / 2 : L - 1;
            double m = -INFINITY, sum = 0;
            for (size_t j = 0; j < L; ++j) {
                double dot = 0;
                for (size_t e = 0; e < D; ++e) dot += (double)q[(h * L + i) * D + e] * k[(h * L + j) * D + e];
                s[j] = dot / 8.0; /* 1 / sqrt(64) */
                m = fmax(m, s[j]);
            }
            for (size_t j = 0; j < L; ++j) sum += (s[j] = exp(s[j] - m));
            for (size_t e = 0; e < D; ++e) {
                double ref = 0;
                for (size_t j = 0; j < L; ++j) ref += s[j] * v[(h * L + j) * D + e];
                ref /= sum;
                num += (o[(h * L + i) * D + e] - ref) * (o[(h * L + i) * D + e] - ref);
                den += ref * ref;
            }
        }
    double e = sqrt(num / den);
    if (!(e <= 1e-5)) fail_msg("relative error %.3e on the sampled rows", e);
    clReleaseMemObject(dq), clReleaseMemObject(dk), clReleaseMemObject(dv), clReleaseMemObject(dout);
    free(q), free(k), free(v), free(o), free(s);
}

/* Padded batches (one with no keys at all), [B, L, H, D] strides, offsets, LSE. */
static void blocked_padding_strides_lse(void **state) {
    (void)state;
    const int lens[3] = {37, 5, 0};
    for (int causal = 0; causal < 2; ++causal)
        for (int blh = 0; blh < 2; ++blh) {
            att_case c = {.B = 3, .H = 3, .Lq = 23, .Lk = 37, .D = 24, .causal = causal, .blh = blh,
                          .kv_lengths = lens, .off = 5, .lse = true};
            expect_accurate(&c, false);
        }
}

/* Logits of +-1e4: no Inf or NaN, still the right answer. */
/* Logits up to +-1e4. Q and K are integers (and the scale 1/4 a power of two), so every score is
 * exact in fp32: with arbitrary inputs a dot product of magnitude 1e4 carries rounding of about
 * 1e-3, which the softmax turns into relative errors near 1e-5 whenever two scores come close,
 * whatever the kernel does. The check is then the kernel's own: no overflow, no NaN, 1e-5. */
static void blocked_extreme_logits(void **state) {
    (void)state;
    /* entries up to 50: |score| <= 16 * 50^2 / 4 = 1e4 */
    att_case c = {.B = 1, .H = 2, .Lq = 33, .Lk = 65, .D = 16, .logit_scale = 1e4f / 4, .integer_qk = true, .lse = true};
    expect_accurate(&c, false);
    c.causal = true;
    expect_accurate(&c, false);
}

/* The unfused baseline computes the same thing. */
static void unfused_matches(void **state) {
    (void)state;
    const int lens[2] = {40, 0};
    att_case cases[] = {
        {.B = 1, .H = 2, .Lq = 64, .Lk = 64, .D = 32},
        {.B = 2, .H = 2, .Lq = 17, .Lk = 40, .D = 8, .causal = true, .lse = true},
        {.B = 2, .H = 3, .Lq = 9, .Lk = 40, .D = 16, .blh = true, .kv_lengths = lens, .off = 3, .lse = true},
        {.B = 1, .H = 1, .Lq = 100, .Lk = 7, .D = 80, .causal = true},
    };
    size_t n = small_mode() ? 2 : sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; ++i) expect_accurate(&cases[i], true);
}

/* Every shape of the kernel family: rows per work-group and keys per tile. */
static void configurations(void **state) {
    (void)state;
    const char *configs[] = {"VEC=0 STAGE=1 BR=1 BC=4",       "VEC=1 RW=3",  "VEC=0 STAGE=1 BR=8 BC=8 DS=4",
                             "VEC=0 STAGE=0 BR=64 BC=8",      "VEC=1 RW=1",  "VEC=0 STAGE=0 BR=4 BC=16 DS=2",
                             "VEC=0 STAGE=1 BR=4 BC=64",      "VEC=1 RW=4",  "VEC=0 STAGE=1 BR=16 BC=4 DS=8"};
    size_t n = small_mode() ? 4 : 9;
    for (size_t i = 0; i < n; ++i) {
        setenv("TSR_CONFIG_ATTENTION", configs[i], 1);
        /* the fast path needs D % 16 == 0; others take any D */
        size_t D = strstr(configs[i], "VEC=1") ? 32 : 20;
        att_case c = {.B = 2, .H = 1, .Lq = 70, .Lk = 45, .D = D, .causal = i % 2 == 0, .lse = true};
        expect_accurate(&c, false);
    }
    unsetenv("TSR_CONFIG_ATTENTION");
}

static void invalid_descriptors(void **state) {
    (void)state;
    enum { B = 1, H = 2, L = 8, D = 4, N = B * H * L * D };
    float host[N];
    for (int i = 0; i < N; ++i) host[i] = 777.0f;
    cl_mem q = th_buffer_from(dev, host, N), k = th_buffer_from(dev, host, N), v = th_buffer_from(dev, host, N),
           o = th_buffer_from(dev, host, N), small = th_buffer(dev, N - 1);
    const tsr_attention_desc ok = {.batch = B, .heads = H, .q_len = L, .kv_len = L, .head_dim = D};
    for (int f = 0; f < 2; ++f) {
        tsr_status (*fn)(tsr_device *, const tsr_attention_desc *, cl_mem, cl_mem, cl_mem, cl_mem, cl_command_queue,
                         cl_event *) = f ? tsr_attention_unfused : tsr_attention;
        TH_ASSERT_STATUS(fn(dev, NULL, q, k, v, o, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_STATUS(fn(NULL, &ok, q, k, v, o, NULL, NULL), TSR_ERR_INVALID_ARG);
        tsr_attention_desc d = ok;
        d.heads = 0;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "at least 1");
        d = ok, d.head_dim = 257;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_UNSUPPORTED);
        TH_ASSERT_CONTAINS(tsr_last_error(), "head_dim");
        TH_ASSERT_STATUS(fn(dev, &ok, q, small, v, o, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
        TH_ASSERT_CONTAINS(tsr_last_error(), "buffer k");
        d = ok, d.o_offset = 1;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
        d = ok, d.q_strides[0] = SIZE_MAX / 2, d.q_strides[1] = 4, d.q_strides[2] = 4, d.batch = 3;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_OVERFLOW);
        d = ok, d.o_strides[0] = N, d.o_strides[1] = 0, d.o_strides[2] = D; /* both heads write the same rows */
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "overlap");
        d = ok, d.q_strides[0] = N, d.q_strides[1] = L * D, d.q_strides[2] = D - 1;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_INVALID_ARG);
        const int bad_len[1] = {L + 1};
        d = ok, d.kv_lengths = bad_len;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "kv_lengths[0]");
        d = ok, d.lse = small, d.lse_offset = N;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
        d = ok, d.scale = INFINITY;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_INVALID_ARG);
    }
    float after[N];
    th_read(dev, o, after, N);
    for (int i = 0; i < N; ++i) assert_true(after[i] == 777.0f);
    clReleaseMemObject(q), clReleaseMemObject(k), clReleaseMemObject(v), clReleaseMemObject(o);
    clReleaseMemObject(small);
}

int main(void) {
    if (small_mode()) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(blocked_lengths_and_dims),
            cmocka_unit_test(blocked_padding_strides_lse),
            cmocka_unit_test(blocked_extreme_logits),
            cmocka_unit_test(unfused_matches),
            cmocka_unit_test(configurations),
        };
        return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(blocked_lengths_and_dims),
        cmocka_unit_test(blocked_padding_strides_lse),
        cmocka_unit_test(blocked_extreme_logits),
        cmocka_unit_test(unfused_matches),
        cmocka_unit_test(configurations),
        cmocka_unit_test(long_sequence),
        cmocka_unit_test(invalid_descriptors),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
