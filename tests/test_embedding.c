/* The embedding gather (tsr_embedding) against a double-precision sum of the same table rows, on
 * fresh random tables and ids (TSR_TEST_SEED replays a run). The device adds two or three fp32
 * values: |y - ref| <= 2^-23 (|word| + |position| + |token_type|), plus a 16-bit y's rounding
 * u(y) |ref|. y is poisoned, guarded (before, between strided rows and after), and every refused
 * call is checked to name its cause and leave y as it was. TSR_TEST_MODE=oclgrind runs a small
 * subset. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define dev th_dev                        /* the group's device (harness) */
static const float guard_value = 1536.0f; /* exact in f32, f16 and bf16 */
enum { GUARD = 3 };

typedef struct emb_case {
    size_t batch, seq_len, hidden, vocab, max_positions, type_vocab, position_start;
    size_t word_off, position_off, type_off, y_off, y_stride;
    bool position, token_type, type_ids;
    tsr_dtype y_type, table_type;
} emb_case;

static size_t rand_below(size_t n) { return (size_t)th_rand() % n; }

/* A table of rows x hidden random values at `off`, guard values before and after. */
static float *table(size_t rows, size_t hidden, size_t off, size_t *total) {
    *total = off + rows * hidden + GUARD;
    float *t = malloc(*total * sizeof *t);
    for (size_t i = 0; i < *total; ++i)
        t[i] = guard_value;
    th_fill_uniform(t + off, rows * hidden, -2, 2);
    return t;
}

/* Runs the case into a fresh y and checks it; ids drawn at random (a given ids array when not NULL). */
static void run_case(const emb_case *c) {
    const size_t tokens = c->batch * c->seq_len, H = c->hidden, ys = c->y_stride ? c->y_stride : H;
    size_t nw, np = 0, nt = 0;
    float *w = table(c->vocab, H, c->word_off, &nw);
    float *p = c->position ? table(c->max_positions, H, c->position_off, &np) : NULL;
    float *t = c->token_type ? table(c->type_vocab, H, c->type_off, &nt) : NULL;
    int32_t *ids = malloc(tokens * sizeof *ids), *types = malloc(tokens * sizeof *types);
    for (size_t i = 0; i < tokens; ++i) {
        ids[i] = (int32_t)rand_below(c->vocab);
        types[i] = c->type_vocab ? (int32_t)rand_below(c->type_vocab) : 0;
    }
    const size_t ny = c->y_off + (tokens - 1) * ys + H + GUARD;
    float *hy = malloc(ny * sizeof *hy), *after = malloc(ny * sizeof *after);
    for (size_t i = 0; i < ny; ++i)
        hy[i] = guard_value;
    for (size_t i = 0; i < tokens; ++i)
        th_poison(hy + c->y_off + i * ys, H);
    const tsr_dtype tt = c->table_type;
    cl_mem dw = th_buffer_from_typed(dev, tt, w, nw), dp = p ? th_buffer_from_typed(dev, tt, p, np) : NULL;
    cl_mem dt = t ? th_buffer_from_typed(dev, tt, t, nt) : NULL, dy = th_buffer_from_typed(dev, c->y_type, hy, ny);
    /* The reference reads the tables as stored: rounded to their type. */
    th_read_typed(dev, tt, dw, w, nw);
    if (p) th_read_typed(dev, tt, dp, p, np);
    if (t) th_read_typed(dev, tt, dt, t, nt);
    const tsr_embedding_desc d = {.tokens = tokens,
                                  .seq_len = c->seq_len,
                                  .hidden = H,
                                  .vocab = c->vocab,
                                  .max_positions = c->max_positions,
                                  .type_vocab = c->type_vocab,
                                  .position_start = c->position_start,
                                  .word_offset = c->word_off,
                                  .position_offset = c->position_off,
                                  .token_type_offset = c->type_off,
                                  .y_offset = c->y_off,
                                  .y_stride = c->y_stride,
                                  .y_type = c->y_type,
                                  .table_type = tt};
    char what[220];
    snprintf(what, sizeof what,
             "%zu x %zu tokens, hidden %zu, tables %s, y %s at %zu stride %zu, position %d type %d ids %d", c->batch,
             c->seq_len, H, tsr_dtype_str(tt), tsr_dtype_str(c->y_type), c->y_off, c->y_stride, c->position,
             c->token_type, c->type_ids);
    int32_t *kept = malloc(tokens * sizeof *kept);
    memcpy(kept, ids, tokens * sizeof *ids);
    cl_event ev = NULL;
    tsr_status st = tsr_embedding(dev, &d, ids, c->type_ids ? types : NULL, dw, dp, dt, dy, NULL, &ev);
    if (st != TSR_SUCCESS) fail_msg("%s: %s: %s", what, tsr_status_str(st), tsr_last_error());
    assert_non_null(ev);
    /* The arrays are the caller's again at once: scribbling on them changes nothing. */
    memset(ids, 0xff, tokens * sizeof *ids);
    assert_int_equal(clWaitForEvents(1, &ev), CL_SUCCESS);
    clReleaseEvent(ev);
    th_read_typed(dev, c->y_type, dy, after, ny);
    const double u = ldexp(1.0, -23), u_y = c->y_type == TSR_F32 ? 0 : tsr_dtype_unit_roundoff(c->y_type);
    size_t token = 0;
    for (size_t i = 0; i < ny; ++i) {
        while (token < tokens && i >= c->y_off + token * ys + H)
            ++token;
        if (!(token < tokens && i >= c->y_off + token * ys) && !(after[i] == guard_value))
            fail_msg("%s: wrote outside y's rows at element %zu (%g)", what, i, (double)after[i]);
    }
    for (size_t k = 0; k < tokens; ++k) {
        const float *wr = w + c->word_off + (size_t)kept[k] * H;
        const float *pr = p ? p + c->position_off + (c->position_start + k % c->seq_len) * H : NULL;
        const float *tr = t ? t + c->type_off + (size_t)(c->type_ids ? types[k] : 0) * H : NULL;
        for (size_t j = 0; j < H; ++j) {
            const double ref = (double)wr[j] + (pr ? (double)pr[j] : 0) + (tr ? (double)tr[j] : 0);
            const double size = fabs(wr[j]) + (pr ? fabs(pr[j]) : 0) + (tr ? fabs(tr[j]) : 0);
            const double got = after[c->y_off + k * ys + j], bound = u * size + u_y * fabs(ref);
            if (!(fabs(got - ref) <= bound))
                fail_msg("%s: y[%zu][%zu] = %.9g, reference %.9g (id %d, error %.3g, bound %.3g)", what, k, j, got, ref,
                         (int)kept[k], fabs(got - ref), bound);
            /* The store, bit for bit: the fp32 sum in the kernel's order, rounded as the host rounds. */
            float sum = wr[j];
            if (pr) sum += pr[j];
            if (tr) sum += tr[j];
            float want = sum;
            if (c->y_type != TSR_F32) {
                uint16_t bits;
                TH_ASSERT_OK(tsr_convert_host(TSR_F32, &sum, c->y_type, &bits, 1));
                TH_ASSERT_OK(tsr_convert_host(c->y_type, &bits, TSR_F32, &want, 1));
            }
            if (memcmp(&want, &after[c->y_off + k * ys + j], sizeof want) != 0)
                fail_msg("%s: y[%zu][%zu] = %a, not the rounded fp32 sum %a", what, k, j, got, (double)want);
        }
    }
    free(ids);
    free(kept);
    free(types);
    free(w);
    free(p);
    free(t);
    free(hy);
    free(after);
    clReleaseMemObject(dw);
    if (dp) clReleaseMemObject(dp);
    if (dt) clReleaseMemObject(dt);
    clReleaseMemObject(dy);
}

/* BERT's shape (hidden 768, two token types, positions from 0) and odd widths, fp32. */
static void bert_and_odd_widths(void **state) {
    (void)state;
    const size_t widths[] = {768, 1, 3, 100, 65, 1000};
    const size_t count = th_small_mode() ? 3 : sizeof widths / sizeof widths[0];
    for (size_t i = 0; i < count; ++i) {
        const emb_case c = {.batch = 2,
                            .seq_len = th_small_mode() ? 5 : 37,
                            .hidden = th_small_mode() && widths[i] == 768 ? 96 : widths[i],
                            .vocab = 97,
                            .max_positions = 64,
                            .type_vocab = 2,
                            .position = true,
                            .token_type = true,
                            .type_ids = true};
        run_case(&c);
    }
}

/* Tables left out (NULL), type ids left out (type 0), positions from an offset up to the table's
 * end, tables at offsets, a strided y at an offset, 16-bit y. */
static void optional_terms_offsets_and_types(void **state) {
    (void)state;
    const tsr_dtype types[] = {TSR_F32, TSR_F16, TSR_BF16};
    for (int mask = 0; mask < 8; ++mask)
        for (int combo = 0; combo < 9; ++combo) {
            const int ty = combo % 3, tt = combo / 3;
            if (th_small_mode() ? combo != (mask * 4) % 9 : (combo % 4 != mask % 4 && combo != mask)) continue;
            const emb_case c = {.batch = 3,
                                .seq_len = 6,
                                .hidden = 33,
                                .vocab = 11,
                                .max_positions = 10,
                                .type_vocab = 3,
                                .position_start = 4, /* positions 4..9: the last row of the table */
                                .word_off = 5,
                                .position_off = 2,
                                .type_off = 7,
                                .y_off = 3,
                                .y_stride = mask % 2 ? 40 : 0,
                                .position = mask & 1,
                                .token_type = mask & 2,
                                .type_ids = mask & 4,
                                .y_type = types[ty],
                                .table_type = types[tt]};
            run_case(&c);
        }
}

static void random_cases(void **state) {
    (void)state;
    const int count = th_small_mode() ? 3 : 30;
    const tsr_dtype types[] = {TSR_F32, TSR_F16, TSR_BF16};
    for (int i = 0; i < count; ++i) {
        emb_case c = {.batch = 1 + rand_below(4),
                      .seq_len = 1 + rand_below(th_small_mode() ? 6 : 40),
                      .hidden = 1 + rand_below(th_small_mode() ? 40 : 900),
                      .vocab = 1 + rand_below(300),
                      .type_vocab = 1 + rand_below(3),
                      .word_off = rand_below(9),
                      .position_off = rand_below(9),
                      .type_off = rand_below(9),
                      .y_off = rand_below(9),
                      .position = th_rand() & 1,
                      .token_type = th_rand() & 1,
                      .type_ids = th_rand() & 1,
                      .y_type = types[rand_below(3)],
                      .table_type = types[rand_below(3)]};
        c.position_start = rand_below(5);
        c.max_positions = c.position_start + c.seq_len + rand_below(5);
        c.y_stride = rand_below(2) ? 0 : c.hidden + rand_below(4);
        run_case(&c);
    }
}

/* Widths around the kernel's 16-column vector (whole vectors, a ragged tail, none at all) in every
 * pair of table and y types (16-bit tables take two tokens an item: odd and even token counts), tables and y at odd offsets (no vector alignment), under the
 * geometry this device gets and under others by the test hook TSR_TEST_EMBEDDING_ITEMS (one item
 * a token looping over the row; 3 and 64 items striding over its vectors and sharing its tail). */
static void vector_widths_and_geometries(void **state) {
    (void)state;
    const tsr_dtype types[] = {TSR_F32, TSR_F16, TSR_BF16};
    const size_t widths[] = {1, 15, 16, 17, 33, 47, 48, 50, 200};
    const char *const items[] = {NULL, "1", "3", "64"};
    const size_t nw = th_small_mode() ? 4 : sizeof widths / sizeof widths[0];
    for (size_t g = 0; g < (th_small_mode() ? 2 : 4); ++g) {
        if (items[g]) setenv("TSR_TEST_EMBEDDING_ITEMS", items[g], 1);
        for (size_t i = 0; i < nw; ++i)
            for (int combo = 0; combo < 9; ++combo) {
                if (th_small_mode() && (size_t)combo % 4 != (i + g) % 4) continue;
                const size_t H = th_small_mode() ? widths[i + 2 * g] : widths[i];
                const emb_case c = {.batch = 1 + (size_t)combo % 2, /* 3 or 6 tokens: odd and even */
                                    .seq_len = 3,
                                    .hidden = H,
                                    .vocab = 7,
                                    .max_positions = 5,
                                    .type_vocab = 2,
                                    .word_off = 1 + (size_t)combo,
                                    .position_off = 3,
                                    .type_off = 5,
                                    .y_off = 1 + i % 3,
                                    .y_stride = combo % 2 ? H + 3 : 0,
                                    .position = true,
                                    .token_type = combo != 4,
                                    .type_ids = true,
                                    .y_type = types[combo % 3],
                                    .table_type = types[combo / 3]};
                printf("# hidden %zu, tables %s, y %s, items %s\n", H, tsr_dtype_str(c.table_type),
                       tsr_dtype_str(c.y_type), items[g] ? items[g] : "(the device's)");
                run_case(&c);
            }
        unsetenv("TSR_TEST_EMBEDDING_ITEMS");
    }
    /* The hook refuses what is not a count of 1 to 64, naming itself, and leaves y alone. */
    const char *const bad[] = {"0", "65", "x", "3x", "", "-1"};
    const tsr_embedding_desc d = {.tokens = 1, .seq_len = 1, .hidden = 4, .vocab = 1};
    const float ones[4] = {1, 1, 1, 1}, poison[4] = {-7, -7, -7, -7};
    cl_mem w = th_buffer_from(dev, ones, 4), y = th_buffer_from(dev, poison, 4);
    const int32_t id = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        setenv("TSR_TEST_EMBEDDING_ITEMS", bad[i], 1);
        const tsr_status st = tsr_embedding(dev, &d, &id, NULL, w, NULL, NULL, y, NULL, NULL);
        unsetenv("TSR_TEST_EMBEDDING_ITEMS");
        if (st != TSR_ERR_INVALID_ARG)
            fail_msg("TSR_TEST_EMBEDDING_ITEMS='%s': %s (%s)", bad[i], tsr_status_str(st), tsr_last_error());
        TH_ASSERT_CONTAINS(tsr_last_error(), "TSR_TEST_EMBEDDING_ITEMS");
        float got[4];
        th_read(dev, y, got, 4);
        assert_memory_equal(got, poison, sizeof got);
    }
    clReleaseMemObject(w);
    clReleaseMemObject(y);
}

/* Two calls back to back without waiting: the second's ids go to the same scratch only after the
 * first kernel has read it. */
static void back_to_back_calls_keep_their_ids(void **state) {
    (void)state;
    enum { V = 4, H = 256, T = 512 };
    float *w = malloc(V * H * sizeof *w), *got = malloc(T * H * sizeof *got);
    for (size_t i = 0; i < V * H; ++i)
        w[i] = (float)(i / H); /* row v holds v */
    int32_t ids_a[T], ids_b[T];
    for (int i = 0; i < T; ++i)
        ids_a[i] = (int32_t)rand_below(V), ids_b[i] = (int32_t)(V - 1 - ids_a[i]);
    cl_mem dw = th_buffer_from(dev, w, V * H), ya = th_buffer(dev, T * H), yb = th_buffer(dev, T * H);
    const tsr_embedding_desc d = {.tokens = T, .seq_len = T, .hidden = H, .vocab = V};
    TH_ASSERT_OK(tsr_embedding(dev, &d, ids_a, NULL, dw, NULL, NULL, ya, NULL, NULL));
    TH_ASSERT_OK(tsr_embedding(dev, &d, ids_b, NULL, dw, NULL, NULL, yb, NULL, NULL));
    th_read(dev, ya, got, T * H);
    for (size_t i = 0; i < T * H; ++i)
        if (got[i] != (float)ids_a[i / H])
            fail_msg("first call: y[%zu][%zu] = %g, want %d", i / H, i % H, (double)got[i], (int)ids_a[i / H]);
    th_read(dev, yb, got, T * H);
    for (size_t i = 0; i < T * H; ++i)
        if (got[i] != (float)ids_b[i / H])
            fail_msg("second call: y[%zu][%zu] = %g, want %d", i / H, i % H, (double)got[i], (int)ids_b[i / H]);
    clReleaseMemObject(dw);
    clReleaseMemObject(ya);
    clReleaseMemObject(yb);
    free(w);
    free(got);
}

/* Every refusal names its cause (bad ids with the token index and value) and enqueues nothing. */
static void invalid_arguments(void **state) {
    (void)state;
    enum { V = 5, P = 8, TV = 2, H = 4, T = 6, NY = T * H };
    float w[V * H], p[P * H], tt[TV * H], hy[NY], after[NY];
    th_fill_uniform(w, V * H, -1, 1);
    th_fill_uniform(p, P * H, -1, 1);
    th_fill_uniform(tt, TV * H, -1, 1);
    for (int i = 0; i < NY; ++i)
        hy[i] = guard_value;
    cl_mem dw = th_buffer_from(dev, w, V * H), dp = th_buffer_from(dev, p, P * H), dt = th_buffer_from(dev, tt, TV * H);
    cl_mem y = th_buffer_from(dev, hy, NY), small = th_buffer(dev, NY - 1), wsmall = th_buffer(dev, V * H - 1);
    int32_t ids[T] = {0, 1, 2, 3, 4, 0}, types[T] = {0, 1, 0, 1, 0, 1};
    const tsr_embedding_desc ok = {
        .tokens = T, .seq_len = 3, .hidden = H, .vocab = V, .max_positions = P, .type_vocab = TV};
    tsr_embedding_desc d;
    cl_event ev = (cl_event)1;
#define EXPECT(expr, status, text)                                                                                     \
    do {                                                                                                               \
        TH_ASSERT_STATUS(expr, status);                                                                                \
        TH_ASSERT_CONTAINS(tsr_last_error(), text);                                                                    \
    } while (0)
    EXPECT(tsr_embedding(NULL, &ok, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "device");
    EXPECT(tsr_embedding(dev, NULL, ids, types, dw, dp, dt, y, NULL, &ev), TSR_ERR_INVALID_ARG, "desc");
    assert_null(ev);
    EXPECT(tsr_embedding(dev, &ok, NULL, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "ids");
    EXPECT(tsr_embedding(dev, &ok, ids, types, NULL, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "word");
    EXPECT(tsr_embedding(dev, &ok, ids, types, dw, dp, dt, NULL, NULL, NULL), TSR_ERR_INVALID_ARG, "buffer y");
    const size_t zero_fields[] = {offsetof(tsr_embedding_desc, tokens), offsetof(tsr_embedding_desc, seq_len),
                                  offsetof(tsr_embedding_desc, hidden), offsetof(tsr_embedding_desc, vocab)};
    for (size_t i = 0; i < 4; ++i) {
        d = ok;
        *(size_t *)((char *)&d + zero_fields[i]) = 0;
        EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "at least 1");
    }
    d = ok, d.max_positions = 0;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "max_positions");
    d = ok, d.type_vocab = 0;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "type_vocab");
    d = ok, d.y_type = (tsr_dtype)(TSR_DTYPE_COUNT + 2);
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "y_type");
    d = ok, d.y_stride = H - 1;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "y_stride");
    /* Bad ids: the token index and the value. */
    int32_t bad[T];
    memcpy(bad, ids, sizeof bad), bad[4] = -1;
    EXPECT(tsr_embedding(dev, &ok, bad, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "ids[4] = -1");
    memcpy(bad, ids, sizeof bad), bad[5] = V;
    EXPECT(tsr_embedding(dev, &ok, bad, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "ids[5] = 5");
    memcpy(bad, ids, sizeof bad), bad[0] = INT32_MIN;
    EXPECT(tsr_embedding(dev, &ok, bad, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "ids[0] = -2147483648");
    memcpy(bad, types, sizeof bad), bad[2] = TV;
    EXPECT(tsr_embedding(dev, &ok, ids, bad, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "type_ids[2] = 2");
    memcpy(bad, types, sizeof bad), bad[3] = -7;
    EXPECT(tsr_embedding(dev, &ok, ids, bad, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "type_ids[3] = -7");
    /* ... but bad type ids without a type table are not read. */
    cl_mem y2 = th_buffer(dev, NY);
    TH_ASSERT_OK(tsr_embedding(dev, &ok, ids, bad, dw, dp, NULL, y2, NULL, NULL));
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    clReleaseMemObject(y2);
    /* Positions: seq_len 3 from 6 in a table of 8 reaches position 8 at token 2. */
    d = ok, d.position_start = 6;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG,
           "token 2 is at position 8");
    d = ok, d.position_start = 9;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG,
           "token 0 is at position 9");
    d = ok, d.seq_len = 9; /* 6 tokens of one sequence: positions 0..5 fit */
    d.max_positions = 5;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG,
           "token 5 is at position 5");
    /* Buffers too small, by one element or an offset. */
    EXPECT(tsr_embedding(dev, &ok, ids, types, wsmall, dp, dt, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer word");
    EXPECT(tsr_embedding(dev, &ok, ids, types, dw, dp, dt, small, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer y");
    d = ok, d.position_offset = 1;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer position");
    d = ok, d.token_type_offset = 1;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL,
           "buffer token_type");
    d = ok, d.y_stride = H + 1;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL, "buffer y");
    d = ok, d.hidden = SIZE_MAX / 2;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_OVERFLOW, "overflows");
    d = ok, d.vocab = SIZE_MAX / 2;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_OVERFLOW, "overflows");
    /* y over a table. */
    d = ok, d.tokens = 1;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, dw, NULL, NULL), TSR_ERR_INVALID_ARG, "overlaps");
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, dt, NULL, NULL), TSR_ERR_INVALID_ARG, "overlaps");
    /* The tables' type: refused when invalid; sizes and overlaps in bytes across the two types. */
    d = ok, d.table_type = (tsr_dtype)(TSR_DTYPE_COUNT + 1);
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "table_type");
    d = ok, d.table_type = (tsr_dtype)-1;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, y, NULL, NULL), TSR_ERR_INVALID_ARG, "table_type");
    cl_mem w16small = th_buffer_typed(dev, TSR_F16, V * H - 1);
    d = ok, d.table_type = TSR_F16;
    EXPECT(tsr_embedding(dev, &d, ids, types, w16small, dp, dt, y, NULL, NULL), TSR_ERR_BUFFER_TOO_SMALL,
           "buffer word");
    /* An f16 word table of V * H halves spans bytes 0 .. 2 V H of dw: an fp32 y from float V H / 2 - 1
     * overlaps it, from float V H / 2 on it does not. */
    d = ok, d.table_type = TSR_BF16, d.tokens = 1, d.y_offset = V * H / 2 - 1;
    EXPECT(tsr_embedding(dev, &d, ids, types, dw, dp, dt, dw, NULL, NULL), TSR_ERR_INVALID_ARG, "overlaps");
    d.y_offset = V * H / 2;
    TH_ASSERT_OK(tsr_embedding(dev, &d, ids, types, dw, dp, dt, dw, NULL, NULL));
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    clReleaseMemObject(w16small);
#undef EXPECT
    assert_int_equal(clFinish(tsr_device_queue(dev)), CL_SUCCESS);
    th_read(dev, y, after, NY);
    for (int i = 0; i < NY; ++i)
        if (after[i] != guard_value) fail_msg("a refused call wrote y[%d]", i);
    cl_mem all[] = {dw, dp, dt, y, small, wsmall};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        clReleaseMemObject(all[i]);
}

/* A device without a compiler runs the gather (and LayerNorm) from `tessera build-binaries`' set:
 * the embedding programs are written beside the table ops'. */
static void offline_device_runs_from_binaries(void **state) {
    (void)state;
    char dir[600];
    th_tempdir(dir, sizeof dir);
    size_t written = 0;
    TH_ASSERT_OK(tsr_build_binaries(dev, dir, &written));
    const char *old_cache = getenv("TSR_CACHE_DIR");
    char saved[700] = "";
    if (old_cache) snprintf(saved, sizeof saved, "%s", old_cache);
    setenv("TSR_FORCE_OFFLINE", "1", 1);
    setenv("TSR_BINARY_DIR", dir, 1);
    setenv("TSR_CACHE_DIR", "off", 1);
    tsr_device *offline = th_open_device();
    enum { H = 8, T = 4 };
    float w[2 * H], got[T * H];
    for (int i = 0; i < 2 * H; ++i)
        w[i] = (float)i;
    cl_mem dw =
        clCreateBuffer(tsr_device_context(offline), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof w, w, NULL);
    cl_mem y = clCreateBuffer(tsr_device_context(offline), CL_MEM_READ_WRITE, sizeof got, NULL, NULL);
    const int32_t ids[T] = {1, 0, 1, 1};
    const tsr_embedding_desc d = {.tokens = T, .seq_len = T, .hidden = H, .vocab = 2};
    TH_ASSERT_OK(tsr_embedding(offline, &d, ids, NULL, dw, NULL, NULL, y, NULL, NULL));
    assert_int_equal(clEnqueueReadBuffer(tsr_device_queue(offline), y, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL),
                     CL_SUCCESS);
    for (int i = 0; i < T * H; ++i)
        assert_true(got[i] == w[ids[i / H] * H + i % H]);
    const tsr_layernorm_desc ln = {.rows = T, .cols = H, .eps = 1e-5f};
    TH_ASSERT_OK(tsr_layernorm(offline, &ln, y, NULL, dw, dw, y, NULL, NULL));
    assert_int_equal(clFinish(tsr_device_queue(offline)), CL_SUCCESS);
    clReleaseMemObject(dw);
    clReleaseMemObject(y);
    tsr_device_close(offline);
    unsetenv("TSR_FORCE_OFFLINE");
    unsetenv("TSR_BINARY_DIR");
    if (old_cache)
        setenv("TSR_CACHE_DIR", saved, 1);
    else
        unsetenv("TSR_CACHE_DIR");
    th_remove_tree(dir);
}

int main(void) {
    if (th_small_mode()) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(bert_and_odd_widths),
            cmocka_unit_test(optional_terms_offsets_and_types),
            cmocka_unit_test(random_cases),
            cmocka_unit_test(back_to_back_calls_keep_their_ids),
            cmocka_unit_test(vector_widths_and_geometries),
        };
        return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bert_and_odd_widths), cmocka_unit_test(optional_terms_offsets_and_types),
        cmocka_unit_test(random_cases),        cmocka_unit_test(back_to_back_calls_keep_their_ids),
        cmocka_unit_test(invalid_arguments),   cmocka_unit_test(offline_device_runs_from_binaries),
        cmocka_unit_test(vector_widths_and_geometries),
    };
    return TH_RUN_GROUP(tests, th_group_setup, th_group_teardown);
}
