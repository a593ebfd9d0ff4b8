/* Attention, blocked and unfused, against a double-precision reference: query and key
 * lengths from 1 to 2048 (also Lq != Lk), head dimensions 1 to 256, causal or not, padded
 * batches, [B, L, H, D] strides, logits of +-1e4, the log-sum-exp output, configurations,
 * and every invalid descriptor. Relative error (norm over the output) <= 1e-5; with 16-bit
 * storage (every combination of f32, f16 and bf16 for Q, K, V and O) inputs are rounded to their
 * types before the reference sees them and the bound is max(1e-5, tsr_dtype_error_bound(o_type,
 * kv_len)): O's rounding (2^-11 f16, 2^-8 bf16) plus fp32 sums over the keys.
 * TSR_TEST_MODE=oclgrind runs a small subset. */
#include "harness.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define dev th_dev /* the group's device (harness) */

static bool small_mode(void) { return th_small_mode(); }
/* The default tier gives the sweeps fewer draws (every kind still runs); TSR_TEST_LONG=1 runs all. */
static bool default_tier(void) { return !th_small_mode() && !th_long_mode(); }
/* Under Oclgrind (each tiny call costs seconds in its checkers) the small set's sweeps also take
 * alternate draws, every kind still runs; TSR_TEST_LONG=1 runs the whole small set there too. */
static bool grind_thin(void) { return th_oclgrind_mode() && th_small_thinned(); }
/* Alternate draws: the default tier, and the thinned Oclgrind set. */
static bool thin(void) { return default_tier() || grind_thin(); }

typedef struct att_case {
    size_t B, H, Lq, Lk, D;
    bool causal, blh;       /* blh: [B, L, H, D] layout through strides */
    const int *kv_lengths;
    float logit_scale;      /* inputs drawn from [-a, a] with a = sqrt(logit_scale) */
    bool integer_qk;        /* round Q and K to integers: every score exact in fp32 */
    size_t off;             /* offset of every tensor, in elements of its type */
    bool lse;
    tsr_dtype type[4];      /* storage of q, k, v, o (zeros: fp32) */
} att_case;

#define GUARD 768.0f /* outside O: exact in every storage type */

static size_t elem(const att_case *c, size_t L, size_t b, size_t h, size_t i) {
    return c->off + (c->blh ? ((b * L + i) * c->H + h) * c->D : ((b * c->H + h) * L + i) * c->D);
}

/* Run one case with fn; returns the relative error and checks rows with no visible key. */
static double run_case(const att_case *c, tsr_status (*fn)(tsr_device *, const tsr_attention_desc *, cl_mem, cl_mem,
                                                            cl_mem, cl_mem, cl_command_queue, cl_event *)) {
    size_t nq = c->off + c->B * c->H * c->Lq * c->D + 3, nk = c->off + c->B * c->H * c->Lk * c->D + 3;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *o = malloc(nq * 4);
    float a = c->logit_scale > 0 ? sqrtf(c->logit_scale) : 1.0f;
    th_fill_uniform_typed(c->type[0], q, nq, -a, a);
    th_fill_uniform_typed(c->type[1], k, nk, -a, a);
    th_fill_uniform_typed(c->type[2], v, nk, -1, 1);
    for (size_t i = 0; c->integer_qk && i < nq; ++i) q[i] = rintf(q[i]);
    for (size_t i = 0; c->integer_qk && i < nk; ++i) k[i] = rintf(k[i]);
    for (size_t i = 0; i < nq; ++i) o[i] = GUARD; /* guard value outside the output */
    for (size_t b = 0; b < c->B; ++b)
        for (size_t h = 0; h < c->H; ++h)
            for (size_t i = 0; i < c->Lq; ++i) th_poison(o + elem(c, c->Lq, b, h, i), c->D);
    size_t nl = c->B * c->H * c->Lq + 2;
    float *lse = malloc(nl * 4);
    th_poison(lse, nl);
    cl_mem dq = th_buffer_from_typed(dev, c->type[0], q, nq), dk = th_buffer_from_typed(dev, c->type[1], k, nk),
           dv = th_buffer_from_typed(dev, c->type[2], v, nk), dout = th_buffer_from_typed(dev, c->type[3], o, nq),
           dl = th_buffer_from(dev, lse, nl);
    tsr_attention_desc d = {.batch = c->B, .heads = c->H, .q_len = c->Lq, .kv_len = c->Lk, .head_dim = c->D,
                            .q_offset = c->off, .k_offset = c->off, .v_offset = c->off, .o_offset = c->off,
                            .causal = c->causal, .kv_lengths = c->kv_lengths, .lse = c->lse ? dl : NULL,
                            .lse_offset = 1, .q_type = c->type[0], .k_type = c->type[1], .v_type = c->type[2],
                            .o_type = c->type[3]};
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
    th_read_typed(dev, c->type[3], dout, o, nq);
    th_read(dev, dl, lse, nl);

    double scale = 1.0 / sqrt((double)c->D);
    tsr_error_sum err = {0, 0};
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
                    tsr_error_add(&err, oi[e], r);
                }
                if (c->lse) {
                    double ref_lse = m + log(sum);
                    if (!(fabs(got_lse - ref_lse) <= 1e-5 * fmax(1.0, fabs(ref_lse))))
                        fail_msg("LSE of row %zu/%zu/%zu: %.9g, reference %.9g", b, h, i, (double)got_lse, ref_lse);
                }
            }
    }
    for (size_t i = 0; i < nq; ++i)
        if (!inside[i] && o[i] != GUARD) fail_msg("attention wrote outside O at element %zu", i);
    if (c->lse && !(isnan(lse[0]) && isnan(lse[nl - 1]))) fail_msg("attention wrote outside the LSE range");
    clReleaseMemObject(dq), clReleaseMemObject(dk), clReleaseMemObject(dv), clReleaseMemObject(dout);
    clReleaseMemObject(dl);
    free(q), free(k), free(v), free(o), free(lse), free(s), free(inside);
    return tsr_error_value(&err);
}

/* The bound of a case: 1e-5, or O's 16-bit rounding plus fp32 sums over the keys. */
static double case_bound(const att_case *c) { return fmax(1e-5, tsr_dtype_error_bound(c->type[3], (double)c->Lk)); }

static void expect_accurate(const att_case *c, bool unfused) {
    double e = run_case(c, unfused ? tsr_attention_unfused : tsr_attention), bound = case_bound(c);
    if (!(e <= bound))
        fail_msg("%s attention B%zu H%zu Lq%zu Lk%zu D%zu causal %d blh %d types %s %s %s %s: relative error %.3e "
                 "(bound %.3e)", unfused ? "unfused" : "blocked", c->B, c->H, c->Lq, c->Lk, c->D, c->causal, c->blh,
                 tsr_dtype_str(c->type[0]), tsr_dtype_str(c->type[1]), tsr_dtype_str(c->type[2]),
                 tsr_dtype_str(c->type[3]), e, bound);
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
                /* default tier: each head size with every length, masked and not, on alternate draws;
                 * the thinned Oclgrind set a third: each length and each head size masked and not
                 * (every pair runs on the default device) */
                if (grind_thin() ? (di + li + (size_t)causal) % 3 != 0 : thin() && (di + li + (size_t)causal) % 2) continue;
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
    tsr_error_sum err = {0, 0};
    double ref[D];
    for (size_t h = 0; h < H; ++h)
        for (size_t row = 0; row < 3; ++row) {
            size_t i = row == 0 ? 0 : row == 1 ? L / 2 : L - 1;
            tsr_attention_reference_row(q + (h * L + i) * D, k + h * L * D, v + h * L * D, L, D, 1.0 / 8.0 /* 1 / sqrt(64) */,
                                        s, ref);
            for (size_t e = 0; e < D; ++e) tsr_error_add(&err, o[(h * L + i) * D + e], ref[e]);
        }
    double e = tsr_error_value(&err);
    if (!(e <= 1e-5)) fail_msg("relative error %.3e on the sampled rows", e);
    clReleaseMemObject(dq), clReleaseMemObject(dk), clReleaseMemObject(dv), clReleaseMemObject(dout);
    free(q), free(k), free(v), free(o), free(s);
}

/* A device that cuts loops short (llvmpipe: 65535 iterations per work-item in all) refuses a
 * configuration whose loops would pass its limit (L = 512 with one work-item per query row and
 * D = 64 needs about 69,000) instead of returning a wrong result; the same problem with four
 * work-items per row, and any device without a limit, compute it right. */
static void loops_within_the_device_limit(void **state) {
    (void)state;
    uint64_t limit = 0;
    TH_ASSERT_OK(tsr_device_loop_limit(dev, &limit));
    if (limit == UINT64_MAX) print_message("# loop limit of %s: none found\n", tsr_device_get_info(dev)->name);
    else print_message("# loop limit of %s: %llu iterations\n", tsr_device_get_info(dev)->name, (unsigned long long)limit);
    if (th_oclgrind_mode()) { /* the probe under Oclgrind's checkers; L = 512 would take minutes */
        assert_true(limit == UINT64_MAX);
        return;
    }
    att_case c = {.B = 1, .H = 1, .Lq = 512, .Lk = 512, .D = 64};
    TH_ASSERT_OK(tsr_config_override(dev, "attention", "BR=16 BC=16 STAGE=0 VEC=0 RW=1 DS=1"));
    if (limit < 70000) { /* the 69,000 iterations do not fit */
        size_t n = c.Lq * c.D;
        float *x = malloc(n * 4);
        th_fill_uniform(x, n, -1, 1);
        cl_mem dq = th_buffer_from(dev, x, n), dk = th_buffer_from(dev, x, n), dv = th_buffer_from(dev, x, n),
               dout = th_buffer_from(dev, x, n);
        tsr_attention_desc d = {.batch = 1, .heads = 1, .q_len = c.Lq, .kv_len = c.Lk, .head_dim = c.D};
        assert_int_equal(tsr_attention(dev, &d, dq, dk, dv, dout, NULL, NULL), TSR_ERR_UNSUPPORTED);
        TH_ASSERT_CONTAINS(tsr_last_error(), "ends a work-item's loops");
        clReleaseMemObject(dq), clReleaseMemObject(dk), clReleaseMemObject(dv), clReleaseMemObject(dout);
        free(x);
    } else {
        expect_accurate(&c, false);
    }
    TH_ASSERT_OK(tsr_config_override(dev, "attention", "BR=16 BC=16 STAGE=0 VEC=0 RW=1 DS=4"));
    expect_accurate(&c, false);
    TH_ASSERT_OK(tsr_config_override(dev, "attention", NULL));
}

/* Padded batches (one with no keys at all), [B, L, H, D] strides, offsets, LSE. */
static void blocked_padding_strides_lse(void **state) {
    (void)state;
    const int lens[3] = {37, 5, 0};
    for (int causal = 0; causal < 2; ++causal)
        for (int blh = 0; blh < 2; ++blh) {
            if (grind_thin() && causal != blh) continue; /* each mask and each layout */
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
                             "VEC=0 STAGE=1 BR=4 BC=64",      "VEC=1 RW=4",  "VEC=0 STAGE=1 BR=16 BC=4 DS=8",
                             "VEC=2 RW=6 BR=8 BC=64",         "VEC=2 RW=4 BR=1 BC=32"};
    size_t n = small_mode() ? 4 : 11;
    for (size_t i = 0; i < n; ++i) {
        if (!th_try_override(dev, "attention", configs[i])) continue;
        /* the fast path needs D % 16 == 0; others take any D */
        size_t D = strstr(configs[i], "VEC=0") ? 20 : 32;
        att_case c = {.B = 2, .H = 1, .Lq = 70, .Lk = 45, .D = D, .causal = i % 2 == 0, .lse = true};
        expect_accurate(&c, false);
    }
    TH_ASSERT_OK(tsr_config_override(dev, "attention", NULL));
}

/* Keys that fit one block of the VEC=2 kernel: attention_blk reads K in place (BLK_DIRECT, one
 * launch), or with $TSR_TEST_ATTENTION_PACKED=1 packs it first (pack_k, as longer sequences):
 * both forms, each against the double reference, for MiniLM's 16 tokens, padding and strides,
 * a causal mask, Lq past Lk, 16-bit tensors and the largest panel (64 keys of D = 64). */
static void one_block_forms(void **state) {
    (void)state;
    const int lens[2] = {5, 16};
    att_case cases[] = {
        {.B = 1, .H = 12, .Lq = 16, .Lk = 16, .D = 32},
        {.B = 2, .H = 3, .Lq = 9, .Lk = 16, .D = 16, .blh = true, .kv_lengths = lens, .off = 3, .lse = true},
        {.B = 1, .H = 2, .Lq = 100, .Lk = 7, .D = 80, .causal = true, .lse = true},
        {.B = 1, .H = 2, .Lq = 3, .Lk = 30, .D = 48, .type = {TSR_F16, TSR_F16, TSR_F16, TSR_F32}},
        {.B = 1, .H = 1, .Lq = 70, .Lk = 64, .D = 64, .causal = true},
    };
    const char *configs[] = {NULL, "VEC=2 RW=4 BR=1 BC=32 STAGE=0 DS=1", "VEC=2 RW=6 BR=8 BC=64 STAGE=0 DS=1"};
    size_t ncases = small_mode() ? 3 : sizeof cases / sizeof cases[0];
    for (size_t ci = 0; ci < 3; ++ci) {
        if (configs[ci] && !th_try_override(dev, "attention", configs[ci])) continue;
        for (int packed = 0; packed < 2; ++packed) {
            if (packed) assert_int_equal(setenv("TSR_TEST_ATTENTION_PACKED", "1", 1), 0);
            for (size_t i = 0; i < ncases; ++i) expect_accurate(&cases[i], false);
            if (packed) assert_int_equal(unsetenv("TSR_TEST_ATTENTION_PACKED"), 0);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "attention", NULL));
}

static void invalid_descriptors(void **state) {
    (void)state;
    enum { B = 1, H = 2, L = 8, D = 4, N = B * H * L * D };
    float host[N];
    for (int i = 0; i < N; ++i) host[i] = 777.0f;
    /* big: [0, S + N) with a sub-buffer `half` over [S, S + N), S the first aligned origin >= N */
    const size_t A = th_sub_buffer_align(dev), S = (N + A - 1) / A * A;
    float *host2 = malloc((S + N) * sizeof *host2);
    for (size_t i = 0; i < S + N; ++i) host2[i] = 0.25f * (float)(i % 7) - 0.5f;
    cl_mem q = th_buffer_from(dev, host, N), k = th_buffer_from(dev, host, N), v = th_buffer_from(dev, host, N),
           o = th_buffer_from(dev, host, N), small = th_buffer(dev, N - 1);
    cl_mem big = th_buffer_from(dev, host2, S + N), o2 = th_buffer(dev, N);
    free(host2);
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
        /* outputs that share memory with an input or each other race with the reads */
        TH_ASSERT_STATUS(fn(dev, &ok, q, k, v, q, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "o overlaps q");
        d = ok, d.v_offset = D; /* o spans [0, N), v [D, N + D) of big */
        TH_ASSERT_STATUS(fn(dev, &d, q, k, big, big, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "o overlaps v");
        cl_mem half = th_sub_buffer(big, S, N);
        d = ok, d.k_offset = S - 1; /* k's first element is just before the sub-buffer, the rest in it */
        TH_ASSERT_STATUS(fn(dev, &d, q, big, v, half, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "o overlaps k");
        d = ok, d.lse = o, d.lse_offset = N - 1;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, big, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL); /* lse past o's end */
        d = ok, d.lse = big, d.lse_offset = S - B * H * L + 1; /* lse's last element is the sub-buffer o's first */
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, half, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "lse overlaps o");
        d = ok, d.lse = q;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "lse overlaps q");
        d = ok, d.k_offset = S; /* disjoint neighbours in one buffer, and a packed K/V pair, are fine */
        d.v_offset = S;
        TH_ASSERT_OK(fn(dev, &d, q, big, big, o2, NULL, NULL));
        clReleaseMemObject(half);
    }
    float after[N];
    th_read(dev, o, after, N);
    for (int i = 0; i < N; ++i) assert_true(after[i] == 777.0f);
    clReleaseMemObject(q), clReleaseMemObject(k), clReleaseMemObject(v), clReleaseMemObject(o);
    clReleaseMemObject(small), clReleaseMemObject(big), clReleaseMemObject(o2);
}

/* ---- the unfused baseline's contract is tsr_attention's: a differential harness ---- */

typedef tsr_status (*att_fn)(tsr_device *, const tsr_attention_desc *, cl_mem, cl_mem, cl_mem, cl_mem,
                             cl_command_queue, cl_event *);

/* A descriptor with explicit per-tensor strides (zeros: contiguous), and what to fill. */
typedef struct dcase {
    tsr_attention_desc d;
    int kv[8];      /* kv_lengths when has_kv */
    bool has_kv;
    bool poison;    /* K and V rows past a sequence's kv_lengths hold NaN / +-Inf */
} dcase;

static const float poison_values[3] = {NAN, INFINITY, -INFINITY};

/* Element strides actually used for tensor t (the header's rule: all zeros mean contiguous). */
static void used_strides(const tsr_attention_desc *d, int t, size_t st[3]) {
    const size_t *given = t == 0 ? d->q_strides : t == 1 ? d->k_strides : t == 2 ? d->v_strides : d->o_strides;
    size_t L = t == 1 || t == 2 ? d->kv_len : d->q_len;
    if (given[0] || given[1] || given[2]) {
        memcpy(st, given, 3 * sizeof *st);
    } else {
        st[2] = d->head_dim, st[1] = L * d->head_dim, st[0] = d->heads * L * d->head_dim;
    }
}

static size_t tensor_offset(const tsr_attention_desc *d, int t) {
    return t == 0 ? d->q_offset : t == 1 ? d->k_offset : t == 2 ? d->v_offset : d->o_offset;
}

static size_t at(const tsr_attention_desc *d, int t, size_t b, size_t h, size_t i) {
    size_t st[3];
    used_strides(d, t, st);
    return tensor_offset(d, t) + b * st[0] + h * st[1] + i * st[2];
}

/* Floats a tensor's buffer holds: its extent and 2 guard elements. */
static size_t tensor_floats(const tsr_attention_desc *d, int t) {
    size_t L = t == 1 || t == 2 ? d->kv_len : d->q_len;
    return at(d, t, d->batch - 1, d->heads - 1, L - 1) + d->head_dim + 2;
}

/* Strides with random padding, innermost dimension first in `order` (0 batch, 1 head, 2 row);
 * a dimension of extent 1 gets an arbitrary stride (0, 1 or padded), as the contract allows. */
static void random_strides(size_t D, const size_t count[3], const int order[3], bool share_heads, size_t st[3]) {
    size_t span = D;
    for (int a = 0; a < 3; ++a) {
        int dim = order[a];
        size_t pad = th_rand() % 3 == 0 ? th_rand() % 5 : 0;
        if (count[dim] == 1) {
            uint32_t r = th_rand() % 3;
            st[dim] = r == 0 ? 0 : r == 1 ? 1 : span + pad;
            continue;
        }
        if (dim == 1 && share_heads) { /* every head reads the same K/V rows (multi-query) */
            st[dim] = 0;
            continue;
        }
        st[dim] = span + pad;
        span = st[dim] * (count[dim] - 1) + span;
    }
}

static void random_case(dcase *c) {
    memset(c, 0, sizeof *c);
    tsr_attention_desc *d = &c->d;
    static const size_t dims[] = {1, 3, 8, 16, 20, 32, 64};
    d->batch = 1 + th_rand() % 3;
    d->heads = 1 + th_rand() % 4;
    d->q_len = th_rand() % 4 == 0 ? 1 : 1 + th_rand() % 40;
    d->kv_len = th_rand() % 4 == 0 ? 1 : 1 + th_rand() % 70;
    d->head_dim = dims[th_rand() % (sizeof dims / sizeof dims[0])];
    d->causal = th_rand() % 2;
    d->scale = th_rand() % 2 ? 0.0f : 0.3f;
    c->poison = th_rand() % 2;
    c->has_kv = th_rand() % 3 != 0;
    for (size_t b = 0; b < d->batch; ++b) {
        uint32_t r = th_rand() % 3;
        c->kv[b] = r == 0 ? 0 : r == 1 ? (int)d->kv_len : (int)(1 + th_rand() % d->kv_len);
    }
    d->kv_lengths = c->has_kv ? c->kv : NULL;
    d->lse_offset = th_rand() % 3;
    size_t *given[4] = {d->q_strides, d->k_strides, d->v_strides, d->o_strides};
    size_t *offs[4] = {&d->q_offset, &d->k_offset, &d->v_offset, &d->o_offset};
    for (int t = 0; t < 4; ++t) {
        *offs[t] = th_rand() % 2 ? th_rand() % 7 : 0;
        uint32_t layout = th_rand() % 3; /* 0: contiguous (zeros), 1: [B, H, L, D], 2: [B, L, H, D] */
        if (layout == 0) continue;
        size_t L = t == 1 || t == 2 ? d->kv_len : d->q_len;
        size_t count[3] = {d->batch, d->heads, L};
        static const int bhld[3] = {2, 1, 0}, blhd[3] = {1, 2, 0};
        random_strides(d->head_dim, count, layout == 1 ? bhld : blhd, (t == 1 || t == 2) && th_rand() % 4 == 0, given[t]);
    }
}

/* Host data for a case: everything outside the tensors' rows NaN (no path may read it),
 * masked K/V rows poisoned when asked. */
typedef struct dhost {
    float *x[4];
    size_t n[4];
    float *lse;
    size_t nl;
} dhost;

static void dhost_make(const dcase *c, dhost *hd) {
    const tsr_attention_desc *d = &c->d;
    for (int t = 0; t < 4; ++t) {
        hd->n[t] = tensor_floats(d, t);
        hd->x[t] = malloc(hd->n[t] * sizeof(float));
        if (t == 3) {
            for (size_t i = 0; i < hd->n[t]; ++i) hd->x[t][i] = 777.0f; /* guard outside O's rows */
        } else {
            th_poison(hd->x[t], hd->n[t]);
        }
        size_t L = t == 1 || t == 2 ? d->kv_len : d->q_len;
        for (size_t b = 0; b < d->batch; ++b)
            for (size_t h = 0; h < d->heads; ++h)
                for (size_t i = 0; i < L; ++i) {
                    float *row = hd->x[t] + at(d, t, b, h, i);
                    if (t == 3) {
                        th_poison(row, d->head_dim);
                    } else if (t != 0 && c->poison && d->kv_lengths && i >= (size_t)d->kv_lengths[b]) {
                        for (size_t e = 0; e < d->head_dim; ++e) row[e] = poison_values[(i + e + t) % 3];
                    } else if (row[0] != row[0] || t == 0) { /* shared (head stride 0) rows: fill once */
                        th_fill_uniform(row, d->head_dim, -1, 1);
                    }
                }
    }
    hd->nl = d->lse_offset + d->batch * d->heads * d->q_len + 2;
    hd->lse = malloc(hd->nl * sizeof(float));
    th_poison(hd->lse, hd->nl);
}

static void dhost_free(dhost *hd) {
    for (int t = 0; t < 4; ++t) free(hd->x[t]);
    free(hd->lse);
}

static size_t visible_keys(const tsr_attention_desc *d, size_t b, size_t i) {
    size_t limit = d->kv_lengths ? (size_t)d->kv_lengths[b] : d->kv_len;
    if (d->causal) {
        long long last = (long long)i + (long long)d->kv_len - (long long)d->q_len;
        limit = last < 0 ? 0 : (size_t)last + 1 < limit ? (size_t)last + 1 : limit;
    }
    return limit;
}

/* Check one result against the double-precision definition; returns the relative error. */
static double check_result(const char *who, const dcase *c, const dhost *hd, const float *o, const float *lse) {
    const tsr_attention_desc *d = &c->d;
    double scale = d->scale != 0.0f ? d->scale : 1.0 / sqrt((double)d->head_dim);
    tsr_error_sum err = {0, 0};
    double *s = malloc(d->kv_len * sizeof *s);
    char *inside = calloc(hd->n[3], 1);
    for (size_t b = 0; b < d->batch; ++b)
        for (size_t h = 0; h < d->heads; ++h)
            for (size_t i = 0; i < d->q_len; ++i) {
                size_t limit = visible_keys(d, b, i);
                const float *qi = hd->x[0] + at(d, 0, b, h, i), *oi = o + at(d, 3, b, h, i);
                memset(inside + at(d, 3, b, h, i), 1, d->head_dim);
                float got_lse = lse[d->lse_offset + (b * d->heads + h) * d->q_len + i];
                if (limit == 0) { /* the header: O = 0 and LSE = -inf */
                    for (size_t e = 0; e < d->head_dim; ++e)
                        if (oi[e] != 0.0f)
                            fail_msg("%s: row %zu/%zu/%zu sees no key but O[%zu] = %g", who, b, h, i, e, (double)oi[e]);
                    if (d->lse && !(isinf(got_lse) && got_lse < 0))
                        fail_msg("%s: row %zu/%zu/%zu sees no key but LSE = %g", who, b, h, i, (double)got_lse);
                    continue;
                }
                double m = -INFINITY, sum = 0;
                for (size_t j = 0; j < limit; ++j) {
                    const float *kj = hd->x[1] + at(d, 1, b, h, j);
                    double dot = 0;
                    for (size_t e = 0; e < d->head_dim; ++e) dot += (double)qi[e] * kj[e];
                    s[j] = dot * scale;
                    m = fmax(m, s[j]);
                }
                for (size_t j = 0; j < limit; ++j) sum += (s[j] = exp(s[j] - m));
                for (size_t e = 0; e < d->head_dim; ++e) {
                    double r = 0;
                    for (size_t j = 0; j < limit; ++j) r += s[j] * hd->x[2][at(d, 2, b, h, j) + e];
                    r /= sum;
                    if (!isfinite(oi[e])) fail_msg("%s: O[%zu/%zu/%zu][%zu] = %g", who, b, h, i, e, (double)oi[e]);
                    tsr_error_add(&err, oi[e], r);
                }
                double ref_lse = m + log(sum);
                if (d->lse && !(fabs(got_lse - ref_lse) <= 1e-5 * fmax(1.0, fabs(ref_lse))))
                    fail_msg("%s: LSE of row %zu/%zu/%zu: %.9g, reference %.9g", who, b, h, i, (double)got_lse, ref_lse);
            }
    for (size_t i = 0; i < hd->n[3]; ++i)
        if (!inside[i] && o[i] != 777.0f) fail_msg("%s wrote outside O's rows at element %zu", who, i);
    size_t nrows = d->batch * d->heads * d->q_len;
    for (size_t i = 0; i < hd->nl; ++i)
        if ((!d->lse || i < d->lse_offset || i >= d->lse_offset + nrows) && !isnan(lse[i]))
            fail_msg("%s wrote LSE element %zu outside its rows", who, i);
    free(s), free(inside);
    return tsr_error_value(&err);
}

static void describe(const dcase *c, char *out, size_t size) {
    const tsr_attention_desc *d = &c->d;
    int n = snprintf(out, size, "B%zu H%zu Lq%zu Lk%zu D%zu causal %d poison %d lse %d kv", d->batch, d->heads,
                     d->q_len, d->kv_len, d->head_dim, d->causal, c->poison, d->lse != NULL);
    for (size_t b = 0; b < d->batch && n > 0 && (size_t)n < size; ++b)
        n += snprintf(out + n, size - (size_t)n, " %d", d->kv_lengths ? d->kv_lengths[b] : -1);
    const size_t *st[4] = {d->q_strides, d->k_strides, d->v_strides, d->o_strides};
    for (int t = 0; t < 4 && n > 0 && (size_t)n < size; ++t)
        n += snprintf(out + n, size - (size_t)n, " %c{%zu,%zu,%zu}+%zu", "qkvo"[t], st[t][0], st[t][1], st[t][2],
                      tensor_offset(d, t));
}

/* Run both entry points `reps` times each on `queue` (NULL: the device's), all calls enqueued
 * before any is waited for, each into its own O and LSE buffers, and check every result. */
static void run_both(const dcase *c, cl_command_queue queue, int reps) {
    dcase cc = *c;
    if (cc.has_kv) cc.d.kv_lengths = cc.kv;
    dhost hd;
    dhost_make(&cc, &hd);
    bool use_lse = cc.d.lse_offset % 2 == 1; /* with an LSE buffer or without */
    cc.d.lse = use_lse ? (cl_mem)1 : NULL;    /* a flag for describe and check_result until set */
    char what[512];
    describe(&cc, what, sizeof what);
    cl_mem in[3];
    for (int t = 0; t < 3; ++t) in[t] = th_buffer_from(dev, hd.x[t], hd.n[t]);
    enum { MAX_CALLS = 16 };
    assert_true(2 * reps <= MAX_CALLS);
    cl_mem outs[MAX_CALLS], lses[MAX_CALLS];
    cl_event events[MAX_CALLS];

    for (int call = 0; call < 2 * reps; ++call) {
        outs[call] = th_buffer_from(dev, hd.x[3], hd.n[3]);
        lses[call] = th_buffer_from(dev, hd.lse, hd.nl);
        tsr_attention_desc d = cc.d;
        d.lse = use_lse ? lses[call] : NULL;
        att_fn fn = call % 2 ? tsr_attention_unfused : tsr_attention;
        tsr_status st = fn(dev, &d, in[0], in[1], in[2], outs[call], queue, &events[call]);
        if (st != TSR_SUCCESS)
            fail_msg("%s refused %s: %s: %s", call % 2 ? "unfused" : "blocked", what, tsr_status_str(st),
                     tsr_last_error());
    }
    assert_int_equal(clWaitForEvents((cl_uint)(2 * reps), events), CL_SUCCESS);
    float *o = malloc(hd.n[3] * sizeof(float)), *lse = malloc(hd.nl * sizeof(float));
    cc.d.lse = use_lse ? lses[0] : NULL; /* only tested for non-NULL */
    for (int call = 0; call < 2 * reps; ++call) {
        th_read(dev, outs[call], o, hd.n[3]);
        th_read(dev, lses[call], lse, hd.nl);
        char who[600];
        snprintf(who, sizeof who, "%s (call %d) %s", call % 2 ? "unfused" : "blocked", call, what);
        double e = check_result(who, &cc, &hd, o, lse);
        if (!(e <= 1e-5)) fail_msg("%s: relative error %.3e", who, e);
        clReleaseEvent(events[call]);
        clReleaseMemObject(outs[call]), clReleaseMemObject(lses[call]);
    }
    for (int t = 0; t < 3; ++t) clReleaseMemObject(in[t]);
    free(o), free(lse);
    dhost_free(&hd);
}

/* (a) A length of 1 makes the row stride irrelevant: any stride, below head_dim too, is
 * accepted by both entry points, for q_len = 1 (Q and O) and kv_len = 1 (K and V). */
static void unit_length_row_strides(void **state) {
    (void)state;
    for (int which = 0; which < 2; ++which)
        for (size_t rs = 0; rs < 3; ++rs) {
            dcase c = {0};
            tsr_attention_desc *d = &c.d;
            d->batch = 2, d->heads = 3, d->head_dim = 16;
            d->q_len = which == 0 ? 1 : 5;
            d->kv_len = which == 1 ? 1 : 9;
            size_t stride = rs == 0 ? 0 : rs == 1 ? 1 : 7; /* all below head_dim */
            size_t *unit[2] = {which == 0 ? d->q_strides : d->k_strides, which == 0 ? d->o_strides : d->v_strides};
            for (int t = 0; t < 2; ++t) /* [B, H, 1, D] with that row stride */
                unit[t][0] = 3 * 16, unit[t][1] = 16, unit[t][2] = stride;
            /* thinned Oclgrind set: each stride with one kernel per side, both kernels on each side */
            if (!grind_thin() || (which + rs) % 2 == 0) run_both(&c, NULL, 1);
            d->head_dim = 20; /* the generic kernel too */
            for (int t = 0; t < 2; ++t) unit[t][0] = 3 * 20, unit[t][1] = 20;
            if (!grind_thin() || (which + rs) % 2 == 1) run_both(&c, NULL, 1);
        }
}

/* (b) K and V rows past a sequence's kv_lengths hold NaN and +-Inf: masked keys contribute
 * nothing, in either entry point, causal or not, with both kernels. */
static void masked_rows_poisoned(void **state) {
    (void)state;
    static const size_t dims[] = {16, 20};
    for (int di = 0; di < 2; ++di)
        for (int causal = 0; causal < 2; ++causal) {
            if (grind_thin() && di != causal) continue; /* each kernel, each mask */
            dcase c = {.has_kv = true, .poison = true, .kv = {5, 33, 1}};
            c.d = (tsr_attention_desc){.batch = 3, .heads = 2, .q_len = 7, .kv_len = 33, .head_dim = dims[di],
                                       .causal = causal, .lse_offset = 1};
            run_both(&c, NULL, 1);
        }
}

/* The blocked micro-kernel path (VEC=2, attention_blk) under every shape of its parameters:
 * RW rows x BR groups per work-item, blocks of BC keys. Lengths just below, at and past a
 * block and a work-item's rows (also Lq != Lk, so the causal diagonal crosses blocks at an
 * offset and early rows of Lq > Lk see no key), head dimensions 16 to 256, padded batches
 * whose masked K/V rows hold NaN and Inf, with and without the LSE. */
static void blocked_micro_kernel_part(size_t part, size_t parts) {
    static const char *const configs[] = {"VEC=2 RW=6 BR=8 BC=64 STAGE=0 DS=1", "VEC=2 RW=4 BR=1 BC=32 STAGE=0 DS=1",
                                          "VEC=2 RW=1 BR=2 BC=16 STAGE=0 DS=1", "VEC=2 RW=3 BR=4 BC=64 STAGE=0 DS=1",
                                          "VEC=2 RW=8 BR=1 BC=16 STAGE=0 DS=1", "VEC=2 RW=2 BR=16 BC=32 STAGE=0 DS=1"};
    static const size_t lens[][2] = {{1, 1}, {6, 63}, {48, 64}, {49, 65}, {100, 129}, {130, 97}, {7, 200}};
    static const size_t dims[] = {16, 64, 32, 128, 256, 48, 64};
    size_t nconfigs = small_mode() ? 2 : sizeof configs / sizeof configs[0];
    size_t nlens = small_mode() ? 3 : sizeof lens / sizeof lens[0];
    for (size_t ci = part; ci < nconfigs; ci += parts) {
        if (!th_try_override(dev, "attention", configs[ci])) continue;
        for (size_t li = 0; li < nlens; ++li)
            for (int causal = 0; causal < 2; ++causal) {
                /* the default tier: the (configuration, length) pairs of even ci + li, masked and not:
                 * every length on three configurations, every configuration on three or four lengths,
                 * every head dimension (D below: (ci + li) mod 7 takes each value), and half the
                 * (configuration, head dimension) programs to compile (each for seconds) */
                if (default_tier() && (ci + li) % 2) continue;
                /* the thinned Oclgrind set: every length, alternate draws */
                if (grind_thin() && (ci + li + (size_t)causal) % 2) continue;
                /* the sanitizer tier (th_sanitizer_tier) half of the default tier's draws, the same
                 * programs: each configuration and each length masked and not */
                if (th_sanitizer_tier() && (size_t)causal != (li / 2 + ci / 2) % 2) continue;
                size_t D = dims[(ci + li) % (sizeof dims / sizeof dims[0])];
                att_case c = {.B = 1, .H = 2, .Lq = lens[li][0], .Lk = lens[li][1], .D = D, .causal = causal,
                              .lse = (li + causal) % 2 == 0};
                expect_accurate(&c, false);
                /* the thinned Oclgrind set (a padded batch of three through both entry points costs
                 * 4-8 s in its checkers): the padded batch on one draw per length, each
                 * configuration and each mask among them; the default device runs it on every draw */
                if (grind_thin() && ci != (li == 2)) continue;
                /* padded batch: one sequence cut mid-block, one empty, one full; masked rows poisoned */
                dcase p = {.has_kv = true, .poison = true,
                           .kv = {(int)(lens[li][1] / 2 + 1), 0, (int)lens[li][1]}};
                p.d = (tsr_attention_desc){.batch = 3, .heads = 2, .q_len = lens[li][0], .kv_len = lens[li][1],
                                           .head_dim = D, .causal = causal, .lse_offset = (size_t)li % 2};
                run_both(&p, NULL, 1);
            }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "attention", NULL));
}

static void blocked_micro_kernel(void **state) { (void)state, blocked_micro_kernel_part(0, 1); }
/* The default device's list: two configurations each (the six took 160 s of a cold run). */
static void blocked_micro_kernel_1of3(void **state) { (void)state, blocked_micro_kernel_part(0, 3); }
static void blocked_micro_kernel_2of3(void **state) { (void)state, blocked_micro_kernel_part(1, 3); }
static void blocked_micro_kernel_3of3(void **state) { (void)state, blocked_micro_kernel_part(2, 3); }

/* (c) kv_lengths[b] = 0: every row of that sequence is O = 0 and LSE = -inf (the header),
 * even when its K/V rows (all masked) hold NaN/Inf and O held NaN before. */
static void empty_sequence(void **state) {
    (void)state;
    for (int poison = 0; poison < 2; ++poison)
        for (int causal = 0; causal < 2; ++causal) {
            if (grind_thin() && poison != causal) continue; /* poisoned and clean, masked and not */
            dcase c = {.has_kv = true, .poison = poison, .kv = {0, 12, 0}};
            c.d = (tsr_attention_desc){.batch = 3, .heads = 2, .q_len = 4, .kv_len = 12, .head_dim = 32,
                                       .causal = causal, .lse_offset = 1};
            run_both(&c, NULL, 1);
            c.kv[1] = 0; /* every sequence empty */
            run_both(&c, NULL, 1);
        }
}

/* One attention call on host data, O and LSE read back (B = 1, H = 2, Lq = 5, Lk = 7). */
static void run_nan_case(bool unfused, bool causal, size_t D, const float *q, const float *k, const float *v,
                         float *o, float *lse) {
    size_t nq = 2 * 5 * D, nk = 2 * 7 * D;
    cl_mem dq = th_buffer_from(dev, q, nq), dk = th_buffer_from(dev, k, nk), dv = th_buffer_from(dev, v, nk),
           dout = th_buffer(dev, nq), dl = th_buffer(dev, 10);
    tsr_attention_desc d = {.batch = 1, .heads = 2, .q_len = 5, .kv_len = 7, .head_dim = D, .causal = causal,
                            .lse = dl};
    TH_ASSERT_OK((unfused ? tsr_attention_unfused : tsr_attention)(dev, &d, dq, dk, dv, dout, NULL, NULL));
    th_read(dev, dout, o, nq);
    th_read(dev, dl, lse, 10);
    clReleaseMemObject(dq), clReleaseMemObject(dk), clReleaseMemObject(dv), clReleaseMemObject(dout);
    clReleaseMemObject(dl);
}

/* A NaN in a query row makes that row's O and LSE NaN, as the softmax's definition (NumPy's,
 * PyTorch's) does; a NaN in a key makes every row that sees it NaN. The kernels' running maximum
 * (fmax) passes NaN over, and a query row of NaN scores once came back as zeros (LSE -inf), like
 * a row that sees no key. Every other row is bitwise what it is without the NaN. Each kernel
 * (generic, staged or not, D split or not; VEC=1; VEC=2) and the unfused path, causal or not. */
static void nan_scores(void **state) {
    (void)state;
    static const char *const configs[] = {NULL, "VEC=0 STAGE=0 BR=16 BC=16 DS=4", "VEC=0 STAGE=1 BR=4 BC=8 DS=1",
                                          "VEC=1 RW=2", "VEC=2 RW=6 BR=8 BC=64"};
    static const size_t dims[] = {16, 20};
    size_t nconfigs = small_mode() ? 1 : sizeof configs / sizeof configs[0];
    float q[2 * 5 * 20], k[2 * 7 * 20], v[2 * 7 * 20], o0[2 * 5 * 20], o1[2 * 5 * 20], l0[10], l1[10];
    for (size_t ci = 0; ci < nconfigs; ++ci) {
        if (!th_try_override(dev, "attention", configs[ci])) continue;
        for (int di = 0; di < 2; ++di)
            for (int where = 0; where < 2; ++where) /* 0: q[0, 1, 2, 3]; 1: k[0, 1, 4, 3] */
                for (int unfused = 0; unfused < 2; ++unfused)
                    for (int causal = 0; causal < 2; ++causal) {
                        /* thinned Oclgrind set: the even-parity half, in which every pair of the four
                         * factors (kernel, where, entry point, mask) meets in all four combinations */
                        if (grind_thin() && (di + where + unfused + causal) % 2) continue;
                        size_t D = dims[di];
                        th_fill_uniform(q, 2 * 5 * D, -1, 1);
                        th_fill_uniform(k, 2 * 7 * D, -1, 1);
                        th_fill_uniform(v, 2 * 7 * D, -1, 1);
                        run_nan_case(unfused, causal, D, q, k, v, o0, l0);
                        if (where == 0) q[(5 + 2) * D + 3] = NAN;
                        else k[(7 + 4) * D + 3] = NAN;
                        run_nan_case(unfused, causal, D, q, k, v, o1, l1);
                        for (size_t row = 0; row < 10; ++row) { /* rows of head 1 are 5..9 */
                            /* causal (bottom-right, shift 2): row i sees keys j <= i + 2 */
                            bool nan_row = where == 0 ? row == 7 : row >= 5 && (!causal || row - 5 + 2 >= 4);
                            for (size_t e = 0; e < D; ++e)
                                if (nan_row ? !isnan(o1[row * D + e])
                                            : memcmp(&o1[row * D + e], &o0[row * D + e], sizeof(float)))
                                    fail_msg("%s D%zu %s %s NaN in %s: O[row %zu][%zu] = %g (without the NaN %g)",
                                             configs[ci] ? configs[ci] : "default", D, unfused ? "unfused" : "blocked",
                                             causal ? "causal" : "full", where ? "k" : "q", row, e,
                                             (double)o1[row * D + e], (double)o0[row * D + e]);
                            if (nan_row ? !isnan(l1[row]) : memcmp(&l1[row], &l0[row], sizeof(float)))
                                fail_msg("%s D%zu %s NaN in %s: LSE[%zu] = %g (without the NaN %g)",
                                         configs[ci] ? configs[ci] : "default", D, unfused ? "unfused" : "blocked",
                                         where ? "k" : "q", row, (double)l1[row], (double)l0[row]);
                        }
                    }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "attention", NULL));
}

/* An out-of-order queue: [B, L, H, D] with B > 1 (one output GEMM per head, scores reused by
 * every batch entry and by back-to-back calls) — each step must wait for the one it needs,
 * and the returned event must cover every step. Several calls in flight, several rounds. */
static void out_of_order_queue(void **state) {
    (void)state;
    cl_int err;
    cl_command_queue q = clCreateCommandQueue(tsr_device_context(dev), tsr_device_id(dev),
                                              CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    assert_int_equal(err, CL_SUCCESS);
    size_t B = 4, H = 8, L = small_mode() ? 16 : 128, D = 64;
    dcase c = {.has_kv = true, .kv = {(int)L, (int)L - 3, (int)L, 1}};
    c.d = (tsr_attention_desc){.batch = B, .heads = H, .q_len = L, .kv_len = L, .head_dim = D, .lse_offset = 1};
    size_t blhd[3] = {L * H * D, D, H * D};
    memcpy(c.d.q_strides, blhd, sizeof blhd), memcpy(c.d.k_strides, blhd, sizeof blhd);
    memcpy(c.d.v_strides, blhd, sizeof blhd), memcpy(c.d.o_strides, blhd, sizeof blhd);
    /* the sanitizer tier (th_sanitizer_tier) two rounds: causal and not, under each GEMM form */
    int rounds = small_mode() ? 1 : getenv("ROUNDS") ? atoi(getenv("ROUNDS")) : th_sanitizer_tier() ? 2 : 4;
    /* The GEMM's default packs its operands on CPUs, which chains every GEMM after the previous
     * one through the pack workspaces and hides missing dependencies; without packing (and
     * with local-memory tiles, the GPU path) nothing but the pipeline's own events orders them. */
    static const char *const gemm_configs[] = {NULL, "MWI=6 VW=16 NVW=1 KU=4 WGM=1 WGN=1 KWG=8 SA=0 SB=0 PACKA=0 PACKB=0",
                                               "MWI=2 VW=2 NVW=4 KU=2 WGM=4 WGN=8 KWG=8 SA=1 SB=1 PACKA=0 PACKB=0"};
    for (int g = 0; g < 3; ++g) {
        TH_ASSERT_OK(tsr_config_override(dev, "gemm", gemm_configs[g]));
        for (int r = 0; r < rounds; ++r) {
            c.d.causal = r % 2;
            run_both(&c, q, small_mode() ? 1 : 3);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "gemm", NULL));
    clReleaseCommandQueue(q);
}

/* Random descriptors: layouts, strides above the minimum (and anything for a dimension of
 * 1), multi-query K/V (head stride 0), offsets, causal, kv_lengths with 0 and full, L = 1,
 * poisoned masked rows, explicit and default scales, LSE: both entry points against the
 * double-precision definition. */
static void differential_random(void **state) {
    (void)state;
    int n = small_mode() ? 6 : default_tier() ? 30 : 60;
    for (int i = 0; i < n; ++i) {
        dcase c;
        random_case(&c);
        run_both(&c, NULL, 1);
    }
}

/* Accept/refuse decisions: every descriptor field (and buffer) set to values around its
 * limits, one or two at a time; both entry points must return the same status, neither may
 * write anything when refusing, and when both accept they agree with each other. */
static void differential_validation(void **state) {
    (void)state;
    enum { B = 2, H = 2, L = 6, D = 8, N = B * H * L * D, NB = N + 64 };
    float host[NB];
    th_fill_uniform(host, NB, -1, 1);
    cl_mem q = th_buffer_from(dev, host, NB), k = th_buffer_from(dev, host, NB), v = th_buffer_from(dev, host, NB),
           small = th_buffer(dev, 8), lse_buf = th_buffer(dev, NB);
    cl_mem out[2] = {th_buffer(dev, NB), th_buffer(dev, NB)};
    float got[2][NB], guard[NB];
    for (int i = 0; i < NB; ++i) guard[i] = 777.0f;
    static const size_t values[] = {0, 1, 2, 3, D - 1, D, D + 1, L, L * D, H * D, L * H * D, N, NB - D, NB,
                                    256, 257, (size_t)INT_MAX, (size_t)INT_MAX + 1, SIZE_MAX / 4, SIZE_MAX};
    size_t nv = sizeof values / sizeof values[0];
    int bad_lens[B];
    int iterations = small_mode() ? 40 : 400, accepted = 0;
    for (int it = 0; it < iterations; ++it) {
        tsr_attention_desc d = {.batch = B, .heads = H, .q_len = L, .kv_len = L, .head_dim = D};
        cl_mem mq = q, mk = k, mv = v;
        int changes = 1 + (int)(th_rand() % 2);
        for (int ch = 0; ch < changes; ++ch) {
            size_t val = values[th_rand() % nv];
            size_t *fields[] = {&d.batch, &d.heads, &d.q_len, &d.kv_len, &d.head_dim, &d.q_offset, &d.k_offset,
                                &d.v_offset, &d.o_offset, &d.q_strides[0], &d.q_strides[1], &d.q_strides[2],
                                &d.k_strides[0], &d.k_strides[1], &d.k_strides[2], &d.v_strides[0],
                                &d.v_strides[1], &d.v_strides[2], &d.o_strides[0], &d.o_strides[1],
                                &d.o_strides[2], &d.lse_offset};
            size_t nf = sizeof fields / sizeof fields[0];
            uint32_t f = th_rand() % (uint32_t)(nf + 5);
            if (f < nf) {
                *fields[f] = val;
            } else if (f == nf) {
                static const float scales[] = {NAN, INFINITY, -INFINITY, -1.0f, 1e-30f, 0.0f};
                d.scale = scales[th_rand() % 6];
            } else if (f == nf + 1) {
                d.causal = !d.causal;
            } else if (f == nf + 2) {
                static const int lens[] = {-1, 0, 1, L, L + 1, INT_MAX};
                for (int b = 0; b < B; ++b) bad_lens[b] = lens[th_rand() % 6];
                d.kv_lengths = bad_lens;
            } else if (f == nf + 3) {
                d.lse = th_rand() % 2 ? small : lse_buf;
            } else {
                cl_mem *m[3] = {&mq, &mk, &mv};
                *m[th_rand() % 3] = th_rand() % 2 ? small : NULL;
            }
        }
        if (th_rand() % 4 == 0) { /* a length of 1, where any row stride is allowed */
            bool keys = th_rand() % 2;
            size_t *rows = keys ? (th_rand() % 2 ? d.k_strides : d.v_strides)
                                : (th_rand() % 2 ? d.q_strides : d.o_strides);
            *(keys ? &d.kv_len : &d.q_len) = 1;
            if (!rows[0] && !rows[1]) rows[0] = L * H * D, rows[1] = D; /* [B, H, 1, D] */
            rows[2] = values[th_rand() % 6];                             /* 0 .. D + 1 */
        }
        if (d.kv_lengths && d.batch > B) d.kv_lengths = NULL; /* the array holds B entries */
        tsr_status st[2];
        char err0[256] = "";
        for (int f = 0; f < 2; ++f) {
            TH_ASSERT_OK(tsr_upload(dev, out[f], guard, NB));
            cl_event ev = NULL;
            st[f] = (f ? tsr_attention_unfused : tsr_attention)(dev, &d, mq, mk, mv, out[f], NULL, &ev);
            if (f == 0) snprintf(err0, sizeof err0, "%s", tsr_last_error());
            if (ev) {
                assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
                clReleaseEvent(ev);
            }
            th_read(dev, out[f], got[f], NB);
        }
        if (st[0] != st[1])
            fail_msg("iteration %d: B%zu H%zu Lq%zu Lk%zu D%zu offs %zu %zu %zu %zu q{%zu,%zu,%zu} k{%zu,%zu,%zu} "
                     "v{%zu,%zu,%zu} o{%zu,%zu,%zu}: blocked %s (%s), unfused %s (%s)",
                     it, d.batch, d.heads, d.q_len, d.kv_len, d.head_dim, d.q_offset, d.k_offset, d.v_offset,
                     d.o_offset, d.q_strides[0], d.q_strides[1], d.q_strides[2], d.k_strides[0], d.k_strides[1],
                     d.k_strides[2], d.v_strides[0], d.v_strides[1], d.v_strides[2], d.o_strides[0], d.o_strides[1],
                     d.o_strides[2], tsr_status_str(st[0]), err0, tsr_status_str(st[1]), tsr_last_error());
        if (st[0] != TSR_SUCCESS) {
            for (int f = 0; f < 2; ++f)
                for (int i = 0; i < NB; ++i)
                    if (got[f][i] != 777.0f) fail_msg("iteration %d: refused but wrote O[%d]", it, i);
            continue;
        }
        ++accepted;
        tsr_error_sum diff = {0, 0};
        for (int i = 0; i < NB; ++i) tsr_error_add(&diff, got[1][i], got[0][i]);
        double e = tsr_error_value(&diff);
        if (!(e <= 1e-5)) fail_msg("iteration %d: blocked and unfused differ (%.3e)", it, e);
    }
    print_message("# %d of %d mutated descriptors accepted by both\n", accepted, iterations);
    clReleaseMemObject(q), clReleaseMemObject(k), clReleaseMemObject(v), clReleaseMemObject(small);
    clReleaseMemObject(lse_buf), clReleaseMemObject(out[0]), clReleaseMemObject(out[1]);
}

/* Sizes whose products or int kernel indices would overflow are refused up front, by both
 * entry points alike, with the reason (not a wrapped product that passes, or a later
 * complaint about buffer sizes). */
static void size_limits(void **state) {
    (void)state;
    enum { N = 64 };
    cl_mem q = th_buffer(dev, N), k = th_buffer(dev, N), v = th_buffer(dev, N), o = th_buffer(dev, N);
    const tsr_attention_desc ok = {.batch = 1, .heads = 2, .q_len = 4, .kv_len = 4, .head_dim = 8};
    for (int f = 0; f < 2; ++f) {
        att_fn fn = f ? tsr_attention_unfused : tsr_attention;
        tsr_attention_desc d = ok;
        d.batch = (size_t)1 << 34, d.heads = (size_t)1 << 30; /* the product wraps to 0 */
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_OVERFLOW);
        TH_ASSERT_CONTAINS(tsr_last_error(), "batch*heads");
        d = ok, d.batch = 3, d.heads = INT_MAX / 2;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_OVERFLOW);
        TH_ASSERT_CONTAINS(tsr_last_error(), "batch*heads");
        /* rows rounded up to a work-group, keys to 16, must still fit the kernels' int indices */
        d = ok, d.q_len = INT_MAX - 10;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_OVERFLOW);
        TH_ASSERT_CONTAINS(tsr_last_error(), "q_len and kv_len");
        d = ok, d.kv_len = INT_MAX - 10;
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_OVERFLOW);
        TH_ASSERT_CONTAINS(tsr_last_error(), "q_len and kv_len");
        d = ok, d.q_len = INT_MAX - 511; /* VEC=2 rows run up to 512 past the last */
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_OVERFLOW);
        d = ok, d.kv_len = INT_MAX - 512; /* the largest length: then the buffers are what is too small */
        TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
    }
    clReleaseMemObject(q), clReleaseMemObject(k), clReleaseMemObject(v), clReleaseMemObject(o);
}

/* ---- 16-bit storage ---- */

static const tsr_dtype all_types[3] = {TSR_F32, TSR_F16, TSR_BF16};

/* Every combination of f32, f16 and bf16 for Q, K, V and O (81) on the default path: L = 37
 * (not a multiple of any tile), D = 16 (the fast path on CPUs) or 24 (the generic kernel),
 * causal or not, padded batches, offsets, LSE. Small modes: the uniform types and one mix. */
static void dtype_every_combination(void **state) {
    (void)state;
    static const int lens[2] = {37, 20};
    for (int combo = 0; combo < 81; ++combo) {
        att_case c = {.B = 2, .H = 2, .Lq = 37, .Lk = 37, .D = combo % 4 == 3 ? 24 : 16, .causal = combo % 2,
                      .kv_lengths = combo % 3 == 0 ? lens : NULL, .off = combo % 5, .lse = combo % 3 != 1};
        for (int t = 0, rest = combo; t < 4; ++t, rest /= 3) c.type[t] = all_types[rest % 3];
        bool uniform = c.type[0] == c.type[1] && c.type[1] == c.type[2] && c.type[2] == c.type[3];
        /* default tier (each combination builds its own programs): an orthogonal array of strength 2
         * (every pair of tensors sees every pair of types), the uniform sets, and 16-bit q, k, v with
         * an fp32 o */
        int t0 = (int)c.type[0], t1 = (int)c.type[1];
        bool covering = ((int)c.type[2] == (t0 + t1) % 3 && (int)c.type[3] == (t0 + 2 * t1) % 3) || uniform ||
                        combo == 1 + 3 + 9 || combo == 2 + 6 + 18;
        if (default_tier() && !covering) continue;
        if (small_mode() && !uniform && combo != 1 + 3 + 9) continue; /* 13: f16 q, k, v; f32 o */
        if (th_oclgrind_mode() && combo != 1 + 3 + 9 + 27 && combo != 1 + 3 + 9) continue; /* f16; f16 in, f32 out */
        expect_accurate(&c, false);
    }
}

/* Each kernel (forced): the generic one as on CPUs and GPU-shaped (STAGE=1, 64 rows a group),
 * attention_vec (VEC=1) and attention_blk (VEC=2), with f16 and bf16 throughout and 16-bit
 * inputs with an fp32 output. */
static void dtype_kernels(void **state) {
    (void)state;
    const char *configs[] = {"VEC=0 STAGE=0 BR=16 BC=16 DS=4", "VEC=0 STAGE=1 BR=64 BC=16 DS=1", "VEC=1 RW=2",
                             "VEC=2 RW=6 BR=8 BC=64"};
    const tsr_dtype sets[4][4] = {{TSR_F16, TSR_F16, TSR_F16, TSR_F16},
                                  {TSR_BF16, TSR_BF16, TSR_BF16, TSR_BF16},
                                  {TSR_F16, TSR_F16, TSR_F16, TSR_F32},
                                  {TSR_BF16, TSR_BF16, TSR_BF16, TSR_F32}};
    static const int lens[2] = {45, 30};
    /* Oclgrind: the GPU-shaped generic kernel (local tiles and barriers under its race checks) */
    size_t nconfigs = small_mode() ? 2 : 4;
    for (size_t i = th_oclgrind_mode() ? 1 : 0; i < nconfigs; ++i) {
        if (!th_try_override(dev, "attention", configs[i])) continue;
        for (size_t t = 0; t < (small_mode() ? 2u : 4u); ++t) {
            att_case c = {.B = 2, .H = 1, .Lq = 70, .Lk = 45, .D = 32, .causal = (i + t) % 2 == 0,
                          .kv_lengths = t == 3 ? lens : NULL, .off = 1, .lse = true};
            memcpy(c.type, sets[t], sizeof c.type);
            expect_accurate(&c, false);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "attention", NULL));
}

/* attention_blk over several blocks of keys with a 16-bit V: V widened once a call into fp32 rows
 * (pack_v, V_PACKED) that the kernel reads in place of V. Blocks of 16 and 32 keys with 45 to 100
 * keys (full blocks and a ragged last one), V f16 or bf16 under Q, K, O of other types, the
 * [B, L, H, D] layout (V's rows strided by H D, heads by D), per-batch key lengths (one of them 0),
 * causal or not, more or fewer queries than keys, offsets, LSE; D 16 and 32. A row of V taken
 * from the wrong head, batch or key moves O far past the bound. */
static void dtype_packed_v(void **state) {
    (void)state;
    const char *configs[] = {"VEC=2 RW=4 BR=2 BC=16", "VEC=2 RW=2 BR=4 BC=32"};
    static const int lens[2] = {61, 0}, lens3[3] = {33, 100, 7};
    const att_case cases[] = {
        {.B = 2, .H = 3, .Lq = 50, .Lk = 61, .D = 16, .causal = true, .blh = true, .kv_lengths = lens, .off = 3,
         .lse = true, .type = {TSR_F32, TSR_F32, TSR_F16, TSR_F32}},
        {.B = 3, .H = 2, .Lq = 100, .Lk = 100, .D = 32, .kv_lengths = lens3, .off = 1,
         .type = {TSR_BF16, TSR_BF16, TSR_BF16, TSR_BF16}},
        {.B = 1, .H = 2, .Lq = 17, .Lk = 45, .D = 16, .causal = true, .lse = true,
         .type = {TSR_F16, TSR_F16, TSR_F16, TSR_F16}},
        {.B = 2, .H = 1, .Lq = 64, .Lk = 80, .D = 32, .blh = true, .off = 2,
         .type = {TSR_F16, TSR_BF16, TSR_BF16, TSR_F32}},
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; ++i) {
        if (small_mode() && i) break;
        if (!th_try_override(dev, "attention", configs[i])) continue;
        for (size_t j = 0; j < sizeof cases / sizeof cases[0]; ++j) {
            if (small_mode() && j % 2) continue;
            expect_accurate(&cases[j], false);
        }
    }
    TH_ASSERT_OK(tsr_config_override(dev, "attention", NULL));
}

/* The unfused baseline with 16-bit tensors: its GEMMs read Q, K and V in their types and store
 * O in its own; the results are checked like the blocked ones. */
static void unfused_16bit(void **state) {
    (void)state;
    const int lens[2] = {40, 0};
    att_case cases[] = {
        {.B = 1, .H = 2, .Lq = 33, .Lk = 33, .D = 32, .type = {TSR_F16, TSR_F16, TSR_F16, TSR_F16}},
        {.B = 2, .H = 2, .Lq = 17, .Lk = 40, .D = 16, .causal = true, .lse = true,
         .type = {TSR_BF16, TSR_BF16, TSR_BF16, TSR_BF16}},
        {.B = 2, .H = 3, .Lq = 9, .Lk = 40, .D = 16, .blh = true, .kv_lengths = lens, .off = 3, .lse = true,
         .type = {TSR_F16, TSR_BF16, TSR_F32, TSR_F16}},
        {.B = 1, .H = 1, .Lq = 20, .Lk = 7, .D = 24, .causal = true, .type = {TSR_BF16, TSR_F16, TSR_F16, TSR_F32}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) expect_accurate(&cases[i], true);
}

/* Types checked like every other argument, and sizes and overlaps counted in each tensor's own
 * elements. */
static void dtype_invalid(void **state) {
    (void)state;
    enum { B = 1, H = 2, L = 8, D = 4, N = B * H * L * D };
    cl_mem q = th_buffer_typed(dev, TSR_F16, N), k = th_buffer_typed(dev, TSR_F16, N),
           v = th_buffer_typed(dev, TSR_BF16, N), o = th_buffer_typed(dev, TSR_F16, N),
           short_k = th_buffer_typed(dev, TSR_F16, N - 1), short_o = th_buffer_typed(dev, TSR_BF16, N - 1);
    /* shared: N f16 of K at [0, 2N) bytes, then room for an fp32 O after it */
    cl_mem shared = th_buffer(dev, N / 2 + N);
    const tsr_attention_desc ok = {.batch = B, .heads = H, .q_len = L, .kv_len = L, .head_dim = D,
                                   .q_type = TSR_F16, .k_type = TSR_F16, .v_type = TSR_BF16, .o_type = TSR_F16};
    for (int f = 0; f < 2; ++f) {
        tsr_status (*fn)(tsr_device *, const tsr_attention_desc *, cl_mem, cl_mem, cl_mem, cl_mem, cl_command_queue,
                         cl_event *) = f ? tsr_attention_unfused : tsr_attention;
        const char *names[4] = {"q_type", "k_type", "v_type", "o_type"};
        for (int t = 0; t < 4; ++t) {
            tsr_attention_desc d = ok;
            tsr_dtype *field[4] = {&d.q_type, &d.k_type, &d.v_type, &d.o_type};
            *field[t] = (tsr_dtype)(t % 2 ? 3 : -1);
            TH_ASSERT_STATUS(fn(dev, &d, q, k, v, o, NULL, NULL), TSR_ERR_INVALID_ARG);
            TH_ASSERT_CONTAINS(tsr_last_error(), names[t]);
        }
        /* one 16-bit element short */
        TH_ASSERT_STATUS(fn(dev, &ok, q, short_k, v, o, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
        TH_ASSERT_CONTAINS(tsr_last_error(), "buffer k");
        tsr_attention_desc bf16_out = ok;
        bf16_out.o_type = TSR_BF16;
        TH_ASSERT_STATUS(fn(dev, &bf16_out, q, k, v, short_o, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL);
        TH_ASSERT_CONTAINS(tsr_last_error(), "buffer o");
        /* O (fp32) over the last bytes of K (f16): an overlap only in bytes */
        tsr_attention_desc d = ok;
        d.v_type = TSR_F16, d.o_type = TSR_F32, d.o_offset = N / 2 - 1;
        TH_ASSERT_STATUS(fn(dev, &d, q, shared, k, shared, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "o");
        /* Q and K of different types in the same bytes */
        d = ok, d.k_type = TSR_BF16;
        TH_ASSERT_STATUS(fn(dev, &d, q, q, v, o, NULL, NULL), TSR_ERR_INVALID_ARG);
        TH_ASSERT_CONTAINS(tsr_last_error(), "different types");
    }
    /* right after K's bytes, O does not overlap: accepted and computed (blocked) */
    float host[N];
    th_fill_uniform_typed(TSR_F16, host, N, -1, 1);
    cl_mem qk = th_buffer_from_typed(dev, TSR_F16, host, N);
    float *big = malloc((N / 2 + N) * sizeof *big);
    th_fill_uniform_typed(TSR_F16, big, N / 2 + N, -1, 1);
    clReleaseMemObject(shared);
    shared = th_buffer_from(dev, big, N / 2 + N);
    tsr_attention_desc d = ok;
    d.v_type = TSR_F16, d.o_type = TSR_F32, d.o_offset = N / 2;
    TH_ASSERT_OK(tsr_attention(dev, &d, qk, shared, qk, shared, NULL, NULL));
    /* Q, K and V of one type in one buffer: accepted */
    d = ok, d.v_type = TSR_F16;
    TH_ASSERT_OK(tsr_attention(dev, &d, qk, qk, qk, o, NULL, NULL));
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    free(big);
    cl_mem all[] = {q, k, v, o, short_k, short_o, shared, qk};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) clReleaseMemObject(all[i]);
}

int main(void) {
    if (small_mode()) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(blocked_lengths_and_dims),
            cmocka_unit_test(blocked_padding_strides_lse),
            cmocka_unit_test(blocked_extreme_logits),
            cmocka_unit_test(unfused_matches),
            cmocka_unit_test(configurations),
            cmocka_unit_test(one_block_forms),
            cmocka_unit_test(blocked_micro_kernel),
            cmocka_unit_test(unit_length_row_strides),
            cmocka_unit_test(masked_rows_poisoned),
            cmocka_unit_test(empty_sequence),
            cmocka_unit_test(nan_scores),
            cmocka_unit_test(loops_within_the_device_limit),
            cmocka_unit_test(dtype_every_combination),
            cmocka_unit_test(dtype_kernels),
            cmocka_unit_test(dtype_packed_v),
        };
        return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
    }
    /* The long cases (with empty caches) first, in an order that deals them across tests/meson.build's
     * 4 shards (case i runs in shard i mod N): row by row, each case to the shard with the least so
     * far (seconds of a cold run on a loaded 2-core Xeon). */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(differential_random),
        cmocka_unit_test(blocked_lengths_and_dims),
        cmocka_unit_test(unfused_16bit),
        cmocka_unit_test(dtype_kernels),
        cmocka_unit_test(dtype_packed_v),
        cmocka_unit_test(blocked_micro_kernel_2of3),
        cmocka_unit_test(out_of_order_queue),
        cmocka_unit_test(blocked_micro_kernel_1of3),
        cmocka_unit_test(dtype_every_combination),
        cmocka_unit_test(configurations),
        cmocka_unit_test(blocked_micro_kernel_3of3),
        cmocka_unit_test(nan_scores),
        cmocka_unit_test(masked_rows_poisoned),
        cmocka_unit_test(loops_within_the_device_limit),
        cmocka_unit_test(dtype_invalid),
        cmocka_unit_test(differential_validation),
        cmocka_unit_test(unfused_matches),
        cmocka_unit_test(empty_sequence),
        cmocka_unit_test(long_sequence),
        cmocka_unit_test(blocked_padding_strides_lse),
        cmocka_unit_test(blocked_extreme_logits),
        cmocka_unit_test(unit_length_row_strides),
        cmocka_unit_test(invalid_descriptors),
        cmocka_unit_test(size_limits),
        cmocka_unit_test(one_block_forms),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
