/* test_engine.c: the optimized engine against its naive twins.
 *
 * - linear_forward (packed, sparse or dense, feature-major) against
 *   linear_forward_naive and against the plain dense product in double;
 * - infer_generate / infer_classify (packed weights, skipped rows, shared
 *   caches, batches of mixed lengths, threads' engines sharing a plan)
 *   against reference_forward below: one sequence, every position
 *   recomputed, dense row-major loops, on random models with every layer
 *   feature (multi-head attention with biases and an output projection,
 *   pre-norm, LayerNorm layers, GELU and ReLU MLPs, a bidirectional layer,
 *   a classifier head);
 * - the activation and attention hooks (q, k, v, scores, pattern, z, hidden
 *   units, normalized inputs, layer outputs) against what reference_forward
 *   records.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "infer.h"
#include "intervene.h"
#include "linear.h"
#include "testmodel.h"
#include "testutil.h"

static float frand(unsigned *seed) { return (float)rand_r(seed) / (float)RAND_MAX - 0.5f; }

/* ---- linear maps ---------------------------------------------------------- */

/* linear_forward_fused's fused outputs against the naive twin's (slow, ld
 * ldy) and a second pass, bit for bit: the ReLU (x > 0 ? x : +0, as
 * relu_forward), and the sum added to rows L->rows of a residual stream
 * (the others untouched), which reports an infinite sum. */
static void check_linear_modes(const TfLinear *L, const float *slow, int ldy, const float *x,
                               int ldx, int n, TfSimd simd) {
    float *y = calloc((size_t)(L->n_rows + 1) * ldy, sizeof(float));
    linear_forward_fused(L, TF_LINEAR_RELU, y, ldy, x, ldx, n, simd);
    for (int k = 0; k < L->n_rows; k++)
        for (int r = 0; r < n; r++) {
            float s = slow[(size_t)k * ldy + r], want = s > 0.0f ? s : 0.0f;
            ck_assert_msg(memcmp(&y[(size_t)k * ldy + r], &want, sizeof want) == 0,
                          "ReLU row %d batch row %d (%s): %g, want %g", k, r, tf_simd_names[simd],
                          y[(size_t)k * ldy + r], want);
        }
    int n_out = L->n_out, ldr = n + 2;
    float *res = malloc((size_t)n_out * ldr * sizeof(float));
    float *before = malloc((size_t)n_out * ldr * sizeof(float));
    unsigned seed = 11;
    for (int i = 0; i < n_out * ldr; i++) res[i] = before[i] = 3 * frand(&seed);
    ck_assert_int_eq(linear_forward_fused(L, TF_LINEAR_ADD, res, ldr, x, ldx, n, simd), 0);
    for (int o = 0, k = 0; o < n_out; o++) {
        int kept = k < L->n_rows && L->rows[k] == o;
        for (int r = 0; r < ldr; r++) {
            float want = before[(size_t)o * ldr + r];
            if (kept && r < n) want = want + slow[(size_t)k * ldy + r];
            ck_assert_msg(memcmp(&res[(size_t)o * ldr + r], &want, sizeof want) == 0,
                          "added row %d batch row %d (%s): %g, want %g", o, r,
                          tf_simd_names[simd], res[(size_t)o * ldr + r], want);
        }
        k += kept;
    }
    if (L->n_rows > 0) {
        // An infinite residual value in a row the map adds to: at batch
        // row 0 (in a vector when n >= 32), then at the last (the scalar
        // tail here) alone.
        float *last = res + (size_t)L->rows[L->n_rows - 1] * ldr;
        last[0] = INFINITY;
        ck_assert_int_eq(linear_forward_fused(L, TF_LINEAR_ADD, res, ldr, x, ldx, n, simd), 1);
        last[0] = 1.0f;
        last[n - 1] = -INFINITY;
        ck_assert_int_eq(linear_forward_fused(L, TF_LINEAR_ADD, res, ldr, x, ldx, n, simd), 1);
    }
    free(y), free(res), free(before);
}

/* repeat: rows o with o % 4 != 3 repeat row o % 2's weights (a table of
 * thresholds on one sum), each its own bias. */
static void check_linear(int n_out, int n_in, double fill, int with_bias, int with_map, int n,
                         unsigned seed, int repeat) {
    float *W = calloc((size_t)n_out * n_in, sizeof(float));
    float *b = with_bias ? calloc((size_t)n_out, sizeof(float)) : NULL;
    for (int i = 0; i < n_out * n_in; i++)
        if ((double)rand_r(&seed) / RAND_MAX < fill) W[i] = 4 * frand(&seed);
    for (int o = 2; o < n_out && repeat; o++)
        if (o % 4 != 3)
            memcpy(W + (size_t)o * n_in, W + (size_t)(o % 2) * n_in, (size_t)n_in * sizeof(float));
    for (int o = 0; o < n_out && b; o++)
        if (rand_r(&seed) % 3) b[o] = frand(&seed);
    // in_map: drop some inputs, send two columns to one feature.
    int *map = malloc((size_t)n_in * sizeof(int)), n_feat = n_in;
    for (int c = 0; c < n_in; c++) map[c] = with_map ? (c % 5 == 4 ? -1 : c / 2) : c;
    if (with_map) n_feat = n_in / 2 + 1;
    int ldx = n + 3; /* rows padded: strides must be honoured */
    float *x = malloc((size_t)n_feat * ldx * sizeof(float));
    for (int i = 0; i < n_feat * ldx; i++) x[i] = 2 * frand(&seed);
    TfLinear L;
    TfError err = {""};
    ck_assert_int_eq(linear_pack(&L, W, b, n_out, n_in, with_map ? map : NULL, &err), 0);
    // A small dense block of repeated rows forms each distinct sum once
    // (sgemm's blocks ignore repeats).
    if (repeat && L.dense && linear_fused(&L) && L.n_rows == n_out && n_out >= 5) {
        ck_assert_ptr_nonnull(L.lead);
        ck_assert_int_eq(L.n_lead, n_out >= 7 ? 2 + n_out / 4 : 3);
    } else if (!linear_fused(&L)) {
        ck_assert_ptr_null(L.lead);
    }
    int ldy = n + 1;
    float *fast = calloc((size_t)(L.n_rows + 1) * ldy, sizeof(float));
    float *slow = calloc((size_t)(L.n_rows + 1) * ldy, sizeof(float));
    float *scratch = malloc((size_t)(L.n_cols + 1) * n * sizeof(float));
    linear_forward_naive(&L, slow, ldy, x, ldx, n);
    // Every instruction set this CPU runs (the baseline, AVX2, AVX-512:
    // linear_forward's paths), each against the naive twin.
    for (int simd = 0; simd < TF_SIMD_COUNT; simd++) {
    if (!simd_supported((TfSimd)simd)) continue;
    linear_forward_simd(&L, fast, ldy, x, ldx, n, scratch, (TfSimd)simd);
    // Every output row that is not kept must be exactly zero in the truth.
    int k = 0;
    for (int o = 0; o < n_out; o++) {
        int kept = k < L.n_rows && L.rows[k] == o;
        for (int r = 0; r < n; r++) {
            double want = b ? b[o] : 0.0;
            for (int c = 0; c < n_in; c++)
                if (map[c] >= 0) want += (double)W[(size_t)o * n_in + c] * x[(size_t)map[c] * ldx + r];
            if (!kept) {
                ck_assert_msg(want == 0.0, "row %d dropped but not zero", o);
                continue;
            }
            float f = fast[(size_t)k * ldy + r], s = slow[(size_t)k * ldy + r];
            // The compressed form, and a small dense block's loops, add the
            // same terms in the same order as the naive loop (the bias
            // last): the same value. sgemm's order is its own.
            ck_assert_msg(!linear_fused(&L) || f == s,
                          "%dx%d fill %.2f row %d batch row %d of %d (%s): "
                          "sparse %.9g naive %.9g", n_out, n_in, fill, o, r, n,
                          tf_simd_names[simd], f, s);
            ck_assert_msg(fabs(f - want) <= 1e-4 * (1 + fabs(want)) &&
                              fabs(s - want) <= 1e-4 * (1 + fabs(want)),
                          "%dx%d fill %.2f map %d row %d: fast %g naive %g want %g", n_out, n_in,
                          fill, with_map, o, f, s, want);
        }
        k += kept;
    }
    ck_assert_int_eq(k, L.n_rows);
    if (linear_fused(&L)) check_linear_modes(&L, slow, ldy, x, ldx, n, (TfSimd)simd);
    }
    linear_free(&L);
    free(W), free(b), free(map), free(x), free(fast), free(slow), free(scratch);
}

START_TEST(test_linear_matches_naive) {
    double fills[] = {0.0, 0.02, 0.1, 0.3, 1.0};
    // Dense blocks of 24, 7, 6 and 5 rows take the small-dense loops (four
    // rows at a time and every remainder); 80 columns, sgemm.
    int shapes[][2] = {{1, 1},   {24, 21}, {7, 9},    {6, 12}, {5, 30},
                       {80, 80}, {14, 80}, {200, 80}, {3, 50}};
    unsigned seed = 7;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t f = 0; f < sizeof fills / sizeof *fills; f++)
            for (int bias = 0; bias < 2; bias++)
                for (int map = 0; map < 2; map++)
                    for (int n = 1; n <= 97; n += 32)
                        check_linear(shapes[s][0], shapes[s][1], fills[f], bias, map, n, seed++,
                                     0);
}
END_TEST

/* Dense blocks whose rows repeat (TfLinear.lead: each distinct sum formed
 * once, each row adding its own bias): the naive twin's bits in every mode
 * (store, ReLU, added with overflow), on every instruction set, with and
 * without a scalar tail, as small-dense loops of one to four distinct
 * rows at once; sgemm's blocks ignore the repeats. */
START_TEST(test_linear_repeated_rows_match_naive) {
    int shapes[][2] = {{24, 19}, {7, 9}, {6, 12}, {5, 30}, {13, 8}, {80, 80}};
    unsigned seed = 31;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int bias = 0; bias < 2; bias++)
            for (int map = 0; map < 2; map++)
                for (int n = 1; n <= 97; n += 32)
                    check_linear(shapes[s][0], shapes[s][1], 1.0, bias, map, n, seed++, 1);
}
END_TEST

/* Packs a ReLU MLP over d columns as the engine does (fc2 reading fc1's
 * packed units). */
static void pack_mlp(TfLinear *fc1, TfLinear *fc2, const float *w1, const float *b1,
                     const float *w2, const float *b2, int F, int d) {
    TfError err = {""};
    ck_assert_int_eq(linear_pack(fc1, w1, b1, F, d, NULL, &err), 0);
    int hi[64];
    for (int u = 0; u < F; u++) hi[u] = -1;
    for (int k = 0; k < fc1->n_rows; k++) hi[fc1->rows[k]] = k;
    ck_assert_int_eq(linear_pack(fc2, w2, b2, d, F, hi, &err), 0);
}

/* One-to-one pairs (a Clear: x_c -= ReLU(x_c); a copy with biases and
 * weights of any sign, writing columns others read first): one pass gives
 * the two passes' bits on every instruction set, reading and writing the
 * same buffer, at batch sizes with and without a scalar tail; an
 * overflow is reported. A pair reading a column an earlier pair writes is
 * refused (the passes read every input first). */
START_TEST(test_mlp_pairs_match_two_passes) {
    enum { D = 12, F = 6, N = 53 };
    unsigned seed = 23;
    for (int kind = 0; kind < 3; kind++) {
        float w1[F * D] = {0}, w2[D * F] = {0}, b1[F], b2[D] = {0};
        for (int u = 0; u < F; u++) {
            // kind 0: Clear (unit u reads column 2 + u, writes it back);
            // 1: units read 0..5 and write 6..11 (and 0 reads 11: written
            // later, fine); 2: unit 1 reads column 6, which unit 0 wrote.
            int in = kind == 0 ? 2 + u : kind == 1 ? (u == 0 ? 11 : u) : (u == 1 ? 6 : u);
            int out = kind == 0 ? 2 + u : 6 + u;
            w1[u * D + in] = kind == 0 ? 1.0f : 3.0f * frand(&seed);
            w2[out * F + u] = kind == 0 ? -1.0f : 3.0f * frand(&seed);
            b1[u] = kind == 0 ? 0.0f : frand(&seed);
            if (kind) b2[out] = frand(&seed);
        }
        TfLinear fc1, fc2;
        pack_mlp(&fc1, &fc2, w1, kind ? b1 : NULL, w2, kind ? b2 : NULL, F, D);
        ck_assert_int_eq(linear_mlp_pairs(&fc1, &fc2), kind < 2);
        if (kind == 2) {
            linear_free(&fc1), linear_free(&fc2);
            continue;
        }
        for (int n = N; n >= 32; n -= 21)
            for (int simd = 0; simd < TF_SIMD_COUNT; simd++) {
                if (!simd_supported((TfSimd)simd)) continue;
                float x[D * N], ref[D * N], h[F * N];
                for (int i = 0; i < D * N; i++) x[i] = 4.0f * frand(&seed);
                x[3 * N + 1] = -0.0f, x[3 * N + 2] = 0.0f;
                memcpy(ref, x, sizeof x);
                linear_forward_fused(&fc1, TF_LINEAR_RELU, h, n, ref, N, n, (TfSimd)simd);
                int bad_ref =
                    linear_forward_fused(&fc2, TF_LINEAR_ADD, ref, N, h, n, n, (TfSimd)simd);
                int bad = linear_mlp_pairs_forward(&fc1, &fc2, x, N, x, N, n, (TfSimd)simd);
                ck_assert_int_eq(bad, bad_ref);
                ck_assert_msg(memcmp(x, ref, sizeof x) == 0, "kind %d, n %d, %s", kind, n,
                              tf_simd_names[simd]);
                // A pair's input, infinite where its ReLU passes: its sum overflows.
                int c = kind ? 1 : 2;
                x[c * N + n - 1] = w1[(kind ? 1 : 0) * D + c] > 0.0f ? INFINITY : -INFINITY;
                ck_assert_int_eq(linear_mlp_pairs_forward(&fc1, &fc2, x, N, x, N, n, (TfSimd)simd),
                                 1);
            }
        linear_free(&fc1), linear_free(&fc2);
    }
}
END_TEST

START_TEST(test_linear_packs_only_nonzero_blocks) {
    // A map reading columns 3 and 5 into rows 1 and 2 of 4.
    float W[4 * 8] = {0};
    W[1 * 8 + 3] = 2.0f;
    W[2 * 8 + 5] = -1.0f;
    float b[4] = {0, 0, 0.5f, 0};
    TfLinear L;
    TfError err = {""};
    ck_assert_int_eq(linear_pack(&L, W, b, 4, 8, NULL, &err), 0);
    ck_assert_int_eq(L.n_rows, 2);
    ck_assert_int_eq(L.rows[0], 1);
    ck_assert_int_eq(L.rows[1], 2);
    ck_assert_int_eq(L.n_cols, 2);
    ck_assert_int_eq(L.cols[0], 3);
    ck_assert_int_eq(L.cols[1], 5);
    ck_assert_int_eq(L.nnz, 2);
    ck_assert_int_eq(linear_cost(&L), L.dense ? 4 : 2); /* the 2x2 block, or its 2 weights */
    float x[8] = {0, 0, 0, 10, 0, 20, 0, 0}, y[2], scratch[2];
    linear_forward(&L, y, 1, x, 1, 1, scratch);
    ck_assert_float_eq(y[0], 20.0f);
    ck_assert_float_eq(y[1], -19.5f);
    linear_free(&L);
}
END_TEST

/* ---- whole models ----------------------------------------------------------- */

typedef struct Spec {
    int d, vocab, max_len;
    int classify;
} Spec;

static int add_random(TfModel *m, const char *name, int rows, int cols, float scale, unsigned *seed) {
    TfError err = {""};
    int64_t shape[2] = {rows, cols};
    int t = model_add_tensor(m, name, cols > 0 ? 2 : 1, shape, &err);
    ck_assert_msg(t >= 0, "%s", err.msg);
    for (size_t i = 0; i < m->tensors[t].nelem; i++) m->tensors[t].data[i] = scale * frand(seed);
    return t;
}

static int add_ones(TfModel *m, const char *name, int n, unsigned *seed) {
    int t = add_random(m, name, n, 0, 0.2f, seed);
    for (int i = 0; i < n; i++) m->tensors[t].data[i] += 1.0f;
    return t;
}

/* A random model with every kind of layer. causal_all 0 puts one
 * bidirectional attention layer in. */
static TfModel *random_model(const Spec *sp, int causal_all, unsigned seed) {
    const unsigned seed0 = seed; /* odd seeds: the tanh GELU */
    TfModel *m = model_new();
    TfError err = {""};
    int d = sp->d;
    m->d_model = d;
    m->n_vocab = sp->vocab;
    m->vocab = malloc((size_t)sp->vocab);
    for (int i = 0; i < sp->vocab; i++) m->vocab[i] = (char)('a' + i);
    m->period = sp->max_len;
    m->max_len = sp->max_len;
    m->generate = 3;
    m->tok_embed = add_random(m, TF_TENSOR_TOKEN_EMBED, sp->vocab, d, 2.0f, &seed);
    m->pos_embed = add_random(m, TF_TENSOR_POS_EMBED, sp->max_len, d, 1.0f, &seed);
    int n_out = sp->vocab;
    if (sp->classify) {
        m->output_kind = TF_OUTPUT_CLASSIFY;
        m->n_classes = n_out = 3;
        m->class_names = calloc(3, sizeof(char *));
        for (int i = 0; i < 3; i++) {
            m->class_names[i] = malloc(8);
            snprintf(m->class_names[i], 8, "c%d", i);
        }
    }
    m->unembed = add_random(m, TF_TENSOR_UNEMBED, n_out, d, 1.0f, &seed);
    m->unembed_bias = add_random(m, TF_TENSOR_UNEMBED_BIAS, n_out, 0, 0.5f, &seed);
    char name[64];
    for (int b = 0; b < 2; b++) {
        // Multi-head attention, pre-norm, biases, output projection.
        TfLayer a = model_layer_init(TF_LAYER_ATTENTION);
        a.name = "attn";
        a.n_heads = 2;
        a.d_head = 3;
        a.d_vhead = 4;
        a.scale = 0.7f;
        a.causal = causal_all || b == 0;
        snprintf(name, sizeof name, "l%d.q", b);
        a.query = add_random(m, name, 6, d, 1.5f, &seed);
        snprintf(name, sizeof name, "l%d.k", b);
        a.key = add_random(m, name, 6, d, 1.5f, &seed);
        snprintf(name, sizeof name, "l%d.v", b);
        a.value = add_random(m, name, 8, d, 1.0f, &seed);
        snprintf(name, sizeof name, "l%d.o", b);
        a.output = add_random(m, name, d, 8, 1.0f, &seed);
        snprintf(name, sizeof name, "l%d.qb", b);
        a.query_bias = add_random(m, name, 6, 0, 0.5f, &seed);
        snprintf(name, sizeof name, "l%d.kb", b);
        a.key_bias = add_random(m, name, 6, 0, 0.5f, &seed);
        snprintf(name, sizeof name, "l%d.vb", b);
        a.value_bias = add_random(m, name, 8, 0, 0.5f, &seed);
        snprintf(name, sizeof name, "l%d.ob", b);
        a.output_bias = add_random(m, name, d, 0, 0.5f, &seed);
        snprintf(name, sizeof name, "l%d.ln1w", b);
        a.norm_weight = add_ones(m, name, d, &seed);
        snprintf(name, sizeof name, "l%d.ln1b", b);
        a.norm_bias = add_random(m, name, d, 0, 0.2f, &seed);
        ck_assert_int_ge(model_add_layer(m, &a, &err), 0);
        // One head over the whole width, no projection (a compiled head).
        TfLayer c = model_layer_init(TF_LAYER_ATTENTION);
        c.name = "plain";
        c.n_heads = 1;
        c.d_head = 2;
        c.d_vhead = d;
        c.scale = 1.0f;
        c.causal = 1;
        snprintf(name, sizeof name, "l%d.cq", b);
        c.query = add_random(m, name, 2, d, 1.0f, &seed);
        snprintf(name, sizeof name, "l%d.ck", b);
        c.key = add_random(m, name, 2, d, 1.0f, &seed);
        snprintf(name, sizeof name, "l%d.cv", b);
        c.value = add_random(m, name, d, d, 0.5f, &seed);
        // Half the value rows zero: the engine drops them.
        for (int i = 0; i < d * d / 2; i++) m->tensors[c.value].data[i] = 0.0f;
        ck_assert_int_ge(model_add_layer(m, &c, &err), 0);
        TfLayer f = model_layer_init(TF_LAYER_MLP);
        f.name = "mlp";
        f.d_hidden = 10;
        // Block 0: exact GELU (even seeds) or tanh GELU (odd); block 1: ReLU.
        f.act = b ? TF_ACT_RELU : seed0 % 2 ? TF_ACT_GELU_TANH : TF_ACT_GELU;
        snprintf(name, sizeof name, "l%d.w1", b);
        f.fc1_weight = add_random(m, name, 10, d, 1.0f, &seed);
        snprintf(name, sizeof name, "l%d.b1", b);
        f.fc1_bias = add_random(m, name, 10, 0, 0.5f, &seed);
        snprintf(name, sizeof name, "l%d.w2", b);
        f.fc2_weight = add_random(m, name, d, 10, 1.0f, &seed);
        if (b == 0) {
            snprintf(name, sizeof name, "l%d.ln2w", b);
            f.norm_weight = add_ones(m, name, d, &seed);
            snprintf(name, sizeof name, "l%d.ln2b", b);
            f.norm_bias = add_random(m, name, d, 0, 0.2f, &seed);
        }
        ck_assert_int_ge(model_add_layer(m, &f, &err), 0);
    }
    TfLayer n = model_layer_init(TF_LAYER_NORM);
    n.name = "final_norm";
    n.norm_weight = add_ones(m, "lnf.w", d, &seed);
    n.norm_bias = add_random(m, "lnf.b", d, 0, 0.2f, &seed);
    ck_assert_int_ge(model_add_layer(m, &n, &err), 0);
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    return m;
}

static const float *T(const TfModel *m, int i) { return i >= 0 ? m->tensors[i].data : NULL; }

/* y[n, out] = x[n, in] W^T + b, plain loops. */
static void ref_linear(float *y, const float *x, const float *W, const float *b, int n, int in,
                       int out) {
    for (int r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int c = 0; c < in; c++) acc += (double)x[r * in + c] * W[o * in + c];
            y[r * out + o] = (float)acc;
        }
}

static void ref_norm(float *y, const float *x, int n, int d, const float *w, const float *b,
                     float eps) {
    for (int r = 0; r < n; r++) {
        double mean = 0, var = 0;
        for (int c = 0; c < d; c++) mean += x[r * d + c];
        mean /= d;
        for (int c = 0; c < d; c++) var += (x[r * d + c] - mean) * (x[r * d + c] - mean);
        var /= d;
        for (int c = 0; c < d; c++)
            y[r * d + c] = (float)((x[r * d + c] - mean) / sqrt(var + eps) * w[c] + b[c]);
    }
}

#define REF_MAX_LAYERS 8

/* What reference_forward records when asked: layer l's activation p
 * (infer.h's TfHookPoint) act[l][p] [n, infer_hook_width], and an attention
 * layer's scores [H, n, n] (-INFINITY where a causal row cannot see) and
 * softmax weights att[l] [H, n, n]. Owned by the caller (ref_acts_free). */
typedef struct RefActs {
    float *act[REF_MAX_LAYERS][TF_HOOK_POINT_COUNT];
    float *scores[REF_MAX_LAYERS], *att[REF_MAX_LAYERS];
} RefActs;

static void ref_acts_free(RefActs *r) {
    for (int l = 0; l < REF_MAX_LAYERS; l++) {
        for (int p = 0; p < TF_HOOK_POINT_COUNT; p++) free(r->act[l][p]);
        free(r->scores[l]);
        free(r->att[l]);
    }
}

/* rec->act[l][p] = a copy of x [n, w] (nothing without rec). */
static void ref_record(RefActs *rec, int l, TfHookPoint p, const float *x, int n, int w) {
    if (!rec) return;
    rec->act[l][p] = malloc((size_t)n * w * sizeof(float));
    memcpy(rec->act[l][p], x, (size_t)n * w * sizeof(float));
}

/* Logits (n_out) at position `at` of ids[0..n-1], everything recomputed;
 * with rec, the activations inside every layer recorded. */
static void reference_forward(const TfModel *m, const int *ids, int n, int at, float *logits,
                              RefActs *rec) {
    int d = m->d_model;
    float *x = calloc((size_t)n * d, sizeof(float)), *h = calloc((size_t)n * d, sizeof(float));
    float *q = calloc((size_t)n * 64, sizeof(float)), *k = calloc((size_t)n * 64, sizeof(float));
    float *v = calloc((size_t)n * 64, sizeof(float)), *o = calloc((size_t)n * 64, sizeof(float));
    float *y = calloc((size_t)n * 64, sizeof(float)), *hid = calloc((size_t)n * 64, sizeof(float));
    for (int i = 0; i < n; i++)
        for (int c = 0; c < d; c++)
            x[i * d + c] = T(m, m->tok_embed)[ids[i] * d + c] + T(m, m->pos_embed)[i * d + c];
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        if (ly->kind == TF_LAYER_NORM) {
            ref_norm(h, x, n, d, T(m, ly->norm_weight), T(m, ly->norm_bias), ly->norm_eps);
            memcpy(x, h, (size_t)n * d * sizeof(float));
            continue;
        }
        if (ly->norm_weight >= 0) {
            ref_norm(h, x, n, d, T(m, ly->norm_weight), T(m, ly->norm_bias), ly->norm_eps);
            ref_record(rec, l, TF_HOOK_NORMALIZED, h, n, d);
        } else
            memcpy(h, x, (size_t)n * d * sizeof(float));
        if (ly->kind == TF_LAYER_ATTENTION) {
            int H = ly->n_heads, dh = ly->d_head, dv = ly->d_vhead;
            ref_linear(q, h, T(m, ly->query), T(m, ly->query_bias), n, d, H * dh);
            ref_linear(k, h, T(m, ly->key), T(m, ly->key_bias), n, d, H * dh);
            ref_linear(v, h, T(m, ly->value), T(m, ly->value_bias), n, d, H * dv);
            ref_record(rec, l, TF_HOOK_Q, q, n, H * dh);
            ref_record(rec, l, TF_HOOK_K, k, n, H * dh);
            ref_record(rec, l, TF_HOOK_V, v, n, H * dv);
            if (rec) {
                rec->scores[l] = malloc((size_t)H * n * n * sizeof(float));
                rec->att[l] = calloc((size_t)H * n * n, sizeof(float));
            }
            for (int i = 0; i < n; i++)
                for (int hh = 0; hh < H; hh++) {
                    int Tn = ly->causal ? i + 1 : n;
                    double s[64], mx = -INFINITY, sum = 0;
                    for (int j = 0; j < Tn; j++) {
                        double dot = 0;
                        for (int c = 0; c < dh; c++)
                            dot += (double)q[i * H * dh + hh * dh + c] * k[j * H * dh + hh * dh + c];
                        s[j] = dot * ly->scale;
                        if (s[j] > mx) mx = s[j];
                    }
                    float *srow = rec ? rec->scores[l] + ((size_t)hh * n + i) * n : NULL;
                    for (int j = 0; srow && j < n; j++) srow[j] = j < Tn ? (float)s[j] : -INFINITY;
                    for (int j = 0; j < Tn; j++) sum += s[j] = exp(s[j] - mx);
                    for (int j = 0; rec && j < Tn; j++)
                        rec->att[l][((size_t)hh * n + i) * n + j] = (float)(s[j] / sum);
                    for (int c = 0; c < dv; c++) {
                        double acc = 0;
                        for (int j = 0; j < Tn; j++) acc += s[j] / sum * v[j * H * dv + hh * dv + c];
                        o[i * H * dv + hh * dv + c] = (float)acc;
                    }
                }
            ref_record(rec, l, TF_HOOK_Z, o, n, H * dv);
            if (ly->output >= 0)
                ref_linear(y, o, T(m, ly->output), T(m, ly->output_bias), n, H * dv, d);
            else
                memcpy(y, o, (size_t)n * d * sizeof(float));
        } else {
            int F = ly->d_hidden;
            ref_linear(hid, h, T(m, ly->fc1_weight), T(m, ly->fc1_bias), n, d, F);
            ref_record(rec, l, TF_HOOK_MLP_PRE, hid, n, F);
            for (int i = 0; i < n * F; i++)
                hid[i] = ly->act == TF_ACT_RELU ? (hid[i] > 0 ? hid[i] : 0)
                         : ly->act == TF_ACT_GELU_TANH
                             ? (float)(0.5 * hid[i] *
                                       (1 + tanh(0.7978845608028654 *
                                                 (hid[i] + 0.044715 * (double)hid[i] * hid[i] * hid[i]))))
                             : (float)(0.5 * hid[i] * (1 + erf(hid[i] / sqrt(2.0))));
            ref_record(rec, l, TF_HOOK_MLP_POST, hid, n, F);
            ref_linear(y, hid, T(m, ly->fc2_weight), T(m, ly->fc2_bias), n, F, d);
        }
        ref_record(rec, l, TF_HOOK_OUT, y, n, d);
        for (int i = 0; i < n * d; i++) x[i] += y[i];
    }
    int n_out = m->output_kind == TF_OUTPUT_CLASSIFY ? m->n_classes : m->n_vocab;
    ref_linear(logits, x + at * d, T(m, m->unembed), T(m, m->unembed_bias), 1, d, n_out);
    free(x), free(h), free(q), free(k), free(v), free(o), free(y), free(hid);
}

static int ref_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* The reference's n_new greedy tokens after ids[0..len-1] (len + n_new <=
 * 16, at most 8 outputs). */
static void reference_generate(const TfModel *m, const int *ids, int len, int n_new, int *out) {
    int seq[16];
    memcpy(seq, ids, (size_t)len * sizeof(int));
    for (int t = 0; t < n_new; t++) {
        float logits[8];
        reference_forward(m, seq, len + t, len + t - 1, logits, NULL);
        int n_out = m->output_kind == TF_OUTPUT_CLASSIFY ? m->n_classes : m->n_vocab;
        out[t] = seq[len + t] = ref_argmax(logits, n_out);
    }
}

#define N_SEQS 9
#define N_NEW 4

static void check_generation(int causal_all, unsigned seed) {
    Spec sp = {12, 6, 16, 0};
    TfModel *m = random_model(&sp, causal_all, seed);
    // Prompts of lengths 1..9, random tokens; the reference's greedy tokens.
    int ids[N_SEQS][16], lens[N_SEQS], want[N_SEQS][N_NEW];
    const int *idp[N_SEQS];
    for (int s = 0; s < N_SEQS; s++) {
        lens[s] = 1 + (s * 5) % N_SEQS;
        for (int i = 0; i < lens[s]; i++) ids[s][i] = rand_r(&seed) % sp.vocab;
        idp[s] = ids[s];
        reference_generate(m, ids[s], lens[s], N_NEW, want[s]);
    }
    TfError err = {""};
    for (int cache = 0; cache < 2; cache++) {
        // All at once, and one by one, with and without the cache.
        TfInfer *inf = infer_new(m, N_SEQS, &err);
        ck_assert_msg(inf != NULL, "%s", err.msg);
        infer_set_cache(inf, cache);
        int got[N_SEQS * N_NEW];
        ck_assert_int_eq(infer_generate(inf, idp, lens, N_SEQS, N_NEW, got, &err), 0);
        for (int s = 0; s < N_SEQS; s++)
            for (int t = 0; t < N_NEW; t++)
                ck_assert_msg(got[s * N_NEW + t] == want[s][t],
                              "causal %d cache %d: sequence %d token %d: %d, reference %d",
                              causal_all, cache, s, t, got[s * N_NEW + t], want[s][t]);
        for (int s = 0; s < N_SEQS; s++) {
            ck_assert_int_eq(infer_generate(inf, &idp[s], &lens[s], 1, N_NEW, got, &err), 0);
            for (int t = 0; t < N_NEW; t++) ck_assert_int_eq(got[t], want[s][t]);
        }
        infer_free(inf);
    }
    model_free(m);
}

/* What the hooks saw of sequence 0: per layer and point [n, width], and
 * the scores and weights [H, n, n] (NULL: never called). */
typedef struct Seen {
    const TfModel *m;
    int n;
    RefActs got;
    int calls[REF_MAX_LAYERS][TF_HOOK_POINT_COUNT];
} Seen;

static void seen_act_hook(void *user, int layer, TfHookPoint point, const float *x, int width,
                          int n_rows, const int *row_seq, const int *row_pos) {
    Seen *sn = user;
    ck_assert_int_eq(width, infer_hook_width(sn->m, &sn->m->layers[layer], point));
    ck_assert_int_eq(n_rows, sn->n); /* one sequence, one step: every row */
    float **dst = &sn->got.act[layer][point];
    if (!*dst) *dst = calloc((size_t)sn->n * width, sizeof(float));
    for (int r = 0; r < n_rows; r++) {
        ck_assert_int_eq(row_seq[r], 0);
        memcpy(*dst + (size_t)row_pos[r] * width, x + (size_t)r * width,
               (size_t)width * sizeof(float));
    }
    sn->calls[layer][point]++;
}

static void seen_att_hook(void *user, int layer, int head, int seq, int pos, const float *scores,
                          const float *att, int T) {
    Seen *sn = user;
    size_t n = (size_t)sn->n, at = ((size_t)head * n + (size_t)pos) * n;
    ck_assert_int_eq(seq, 0);
    if (!sn->got.scores[layer]) {
        size_t count = (size_t)sn->m->layers[layer].n_heads * n * n;
        sn->got.scores[layer] = malloc(count * sizeof(float));
        sn->got.att[layer] = calloc(count, sizeof(float));
    }
    float *srow = sn->got.scores[layer] + at;
    for (size_t t = 0; t < n; t++) srow[t] = t < (size_t)T ? scores[t] : -INFINITY;
    memcpy(sn->got.att[layer] + at, att, (size_t)T * sizeof(float));
}

/* |got - want| <= 1e-4 max(1, |want|) everywhere, infinities equal. */
static void check_close(const float *got, const float *want, size_t count, const char *what,
                        int l) {
    for (size_t i = 0; i < count; i++) {
        if (isinf(want[i])) {
            ck_assert_msg(got[i] == want[i], "layer %d %s[%zu]: %g, reference %g", l, what, i,
                          got[i], want[i]);
            continue;
        }
        ck_assert_msg(fabsf(got[i] - want[i]) <= 1e-4f * fmaxf(1.0f, fabsf(want[i])),
                      "layer %d %s[%zu]: %g, reference %g", l, what, i, got[i], want[i]);
    }
}

/* The hooks see every activation reference_forward computes, each point of
 * each layer once (a layer's skipped channels as 0: half the plain layer's
 * value rows are zero), and setting them changes no output. */
static void check_hooks(int causal_all, unsigned seed) {
    Spec sp = {12, 6, 16, 0};
    TfModel *m = random_model(&sp, causal_all, seed);
    ck_assert_int_le(m->n_layers, REF_MAX_LAYERS);
    int ids[9], n = 9, tok, plain;
    for (int i = 0; i < n; i++) ids[i] = rand_r(&seed) % sp.vocab;
    const int *idp = ids;
    float logits[8];
    RefActs want = {0};
    reference_forward(m, ids, n, n - 1, logits, &want);
    TfError err = {""};
    TfInfer *inf = infer_new(m, 1, &err);
    ck_assert_int_eq(infer_generate(inf, &idp, &n, 1, 1, &plain, &err), 0);
    Seen sn = {.m = m, .n = n};
    infer_set_activation_hook(inf, seen_act_hook, &sn);
    infer_set_attention_hook(inf, seen_att_hook, &sn);
    ck_assert_int_eq(infer_generate(inf, &idp, &n, 1, 1, &tok, &err), 0);
    ck_assert_int_eq(tok, plain);
    ck_assert_int_eq(tok, ref_argmax(logits, sp.vocab));
    static const char *names[TF_HOOK_POINT_COUNT] = {"normalized", "q", "k", "v", "z",
                                                     "mlp_pre", "mlp_post", "out"};
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        for (int p = 0; p < TF_HOOK_POINT_COUNT; p++) {
            int w = infer_hook_width(m, ly, (TfHookPoint)p);
            ck_assert_msg(sn.calls[l][p] == (w > 0), "layer %d %s: %d calls", l, names[p],
                          sn.calls[l][p]);
            ck_assert_msg((want.act[l][p] != NULL) == (w > 0), "layer %d %s: width %d", l,
                          names[p], w);
            if (w > 0) check_close(sn.got.act[l][p], want.act[l][p], (size_t)n * w, names[p], l);
        }
        ck_assert((sn.got.scores[l] != NULL) == (ly->kind == TF_LAYER_ATTENTION));
        if (ly->kind != TF_LAYER_ATTENTION) continue;
        check_close(sn.got.scores[l], want.scores[l], (size_t)ly->n_heads * n * n, "scores", l);
        check_close(sn.got.att[l], want.att[l], (size_t)ly->n_heads * n * n, "pattern", l);
    }
    // Hooks removed: nothing is called.
    infer_set_activation_hook(inf, NULL, NULL);
    infer_set_attention_hook(inf, NULL, NULL);
    memset(sn.calls, 0, sizeof sn.calls);
    ck_assert_int_eq(infer_generate(inf, &idp, &n, 1, 1, &tok, &err), 0);
    ck_assert_int_eq(tok, plain);
    for (int l = 0; l < m->n_layers; l++)
        for (int p = 0; p < TF_HOOK_POINT_COUNT; p++) ck_assert_int_eq(sn.calls[l][p], 0);
    infer_free(inf);
    ref_acts_free(&want);
    ref_acts_free(&sn.got);
    model_free(m);
}

START_TEST(test_hooks_match_reference) {
    for (unsigned seed = 41; seed <= 43; seed++) check_hooks(1, seed);
    for (unsigned seed = 51; seed <= 53; seed++) check_hooks(0, seed);
}
END_TEST

START_TEST(test_generation_matches_reference) {
    for (unsigned seed = 1; seed <= 6; seed++) check_generation(1, seed);
}
END_TEST

START_TEST(test_bidirectional_matches_reference) {
    for (unsigned seed = 11; seed <= 14; seed++) check_generation(0, seed);
}
END_TEST

START_TEST(test_classifier_matches_reference) {
    for (int last = 0; last < 2; last++) {
        Spec sp = {12, 6, 16, 1};
        unsigned seed = 99 + last;
        TfModel *m = random_model(&sp, 0, seed);
        m->classify_at_last = last;
        int ids[N_SEQS][16], lens[N_SEQS];
        const int *idp[N_SEQS];
        for (int s = 0; s < N_SEQS; s++) {
            lens[s] = 2 + s;
            for (int i = 0; i < lens[s]; i++) ids[s][i] = rand_r(&seed) % sp.vocab;
            idp[s] = ids[s];
        }
        TfError err = {""};
        TfInfer *inf = infer_new(m, N_SEQS, &err);
        float probs[N_SEQS * 3];
        ck_assert_int_eq(infer_classify(inf, idp, lens, N_SEQS, probs, &err), 0);
        for (int s = 0; s < N_SEQS; s++) {
            float logits[3];
            reference_forward(m, ids[s], lens[s], last ? lens[s] - 1 : 0, logits, NULL);
            double mx = fmax(logits[0], fmax(logits[1], logits[2])), sum = 0;
            for (int c = 0; c < 3; c++) sum += exp(logits[c] - mx);
            for (int c = 0; c < 3; c++) {
                double want = exp(logits[c] - mx) / sum;
                ck_assert_msg(fabs(probs[s * 3 + c] - want) < 1e-4,
                              "at_last %d sequence %d class %d: %g, reference %g", last, s, c,
                              probs[s * 3 + c], want);
            }
        }
        infer_free(inf);
        model_free(m);
    }
}
END_TEST

/* Every-position output: one pass, the argmax at every position, for a
 * batch of mixed lengths, one by one, and the reference, on models with
 * and without a bidirectional layer. */
static void check_every_position(int causal_all, unsigned seed) {
    Spec sp = {12, 6, 16, 0};
    TfModel *m = random_model(&sp, causal_all, seed);
    m->every_position = 1;
    TfError err = {""};
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    int ids[N_SEQS][16], lens[N_SEQS], want[N_SEQS][16], got[N_SEQS][16], one[16];
    const int *idp[N_SEQS];
    int *outs[N_SEQS];
    for (int s = 0; s < N_SEQS; s++) {
        lens[s] = s == 0 ? sp.max_len : 1 + (s * 7) % sp.max_len; /* one of full length */
        for (int i = 0; i < lens[s]; i++) ids[s][i] = rand_r(&seed) % sp.vocab;
        idp[s] = ids[s];
        outs[s] = got[s];
        for (int p = 0; p < lens[s]; p++) {
            float logits[8];
            reference_forward(m, ids[s], lens[s], p, logits, NULL);
            want[s][p] = ref_argmax(logits, sp.vocab);
        }
    }
    TfInfer *inf = infer_new(m, N_SEQS, &err);
    ck_assert_msg(inf != NULL, "%s", err.msg);
    ck_assert_msg(infer_every_position(inf, idp, lens, N_SEQS, outs, &err) == 0, "%s", err.msg);
    for (int s = 0; s < N_SEQS; s++)
        for (int p = 0; p < lens[s]; p++)
            ck_assert_msg(got[s][p] == want[s][p],
                          "causal %d seed %u: sequence %d (length %d) position %d: %d, reference %d",
                          causal_all, seed, s, lens[s], p, got[s][p], want[s][p]);
    // One by one, in reverse order (the caches of the batch left behind).
    for (int s = N_SEQS - 1; s >= 0; s--) {
        int *op = one;
        ck_assert_int_eq(infer_every_position(inf, &idp[s], &lens[s], 1, &op, &err), 0);
        ck_assert_mem_eq(one, want[s], (size_t)lens[s] * sizeof(int));
    }
    // A sequence longer than max_len, and an empty one, are refused.
    int too_long = sp.max_len + 1, empty = 0, *op = one;
    int big[17] = {0};
    const int *bp = big;
    ck_assert_int_eq(infer_every_position(inf, &bp, &too_long, 1, &op, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "exceed the 16 positions"));
    ck_assert_int_eq(infer_every_position(inf, &bp, &empty, 1, &op, &err), -1);
    // An every-position model does not generate.
    int len1 = 1, tok;
    ck_assert_int_eq(infer_generate(inf, &bp, &len1, 1, 1, &tok, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "every position"));
    infer_free(inf);
    model_free(m);
}

START_TEST(test_every_position_matches_reference) {
    for (unsigned seed = 21; seed <= 24; seed++) check_every_position(1, seed);
    for (unsigned seed = 31; seed <= 34; seed++) check_every_position(0, seed);
}
END_TEST

/* Generation with a stop token equals generating the most and cutting at
 * the first stop token, capped by the position encoding; sequences that
 * stop leave the batch without changing the others. */
START_TEST(test_stop_token_truncates) {
    Spec sp = {12, 6, 16, 0};
    for (unsigned seed = 41; seed <= 46; seed++) {
        unsigned rs = seed;
        TfModel *m = random_model(&sp, 1, seed);
        int ids[N_SEQS][16], lens[N_SEQS];
        const int *idp[N_SEQS];
        for (int s = 0; s < N_SEQS; s++) {
            lens[s] = 1 + (s * 5) % N_SEQS + (s == 0 ? 7 : 0); /* 8, up to max_len 16 */
            if (s == 1) lens[s] = sp.max_len;                  /* room for one token */
            for (int i = 0; i < lens[s]; i++) ids[s][i] = rand_r(&rs) % sp.vocab;
            idp[s] = ids[s];
        }
        enum { MAX_NEW = 8 };
        TfError err = {""};
        TfInfer *inf = infer_new(m, N_SEQS, &err);
        ck_assert_ptr_nonnull(inf);
        // Every token as the stop token, and none.
        for (int stop = -1; stop < sp.vocab; stop++) {
            int got[N_SEQS * MAX_NEW], n_out[N_SEQS];
            ck_assert_msg(infer_generate_until(inf, idp, lens, N_SEQS, MAX_NEW, stop, got, n_out,
                                               &err) == 0,
                          "%s", err.msg);
            for (int s = 0; s < N_SEQS; s++) {
                int room = sp.max_len - lens[s] + 1, cap = room < MAX_NEW ? room : MAX_NEW;
                int full[MAX_NEW];
                ck_assert_int_eq(infer_generate(inf, &idp[s], &lens[s], 1, cap, full, &err), 0);
                int want = cap;
                for (int t = 0; t < cap; t++)
                    if (full[t] == stop) {
                        want = t;
                        break;
                    }
                ck_assert_msg(n_out[s] == want, "seed %u stop %d sequence %d: %d tokens, want %d",
                              seed, stop, s, n_out[s], want);
                for (int t = 0; t < want; t++) ck_assert_int_eq(got[s * MAX_NEW + t], full[t]);
                if (want < cap) ck_assert_int_eq(got[s * MAX_NEW + want], stop);
                // One by one, the same.
                int alone[MAX_NEW], n_alone;
                ck_assert_int_eq(infer_generate_until(inf, &idp[s], &lens[s], 1, MAX_NEW, stop,
                                                      alone, &n_alone, &err),
                                 0);
                ck_assert_int_eq(n_alone, want);
                ck_assert_mem_eq(alone, full, (size_t)want * sizeof(int));
            }
        }
        // Without the cache: the same counts.
        infer_set_cache(inf, 0);
        int a[N_SEQS * MAX_NEW], na[N_SEQS], b[N_SEQS * MAX_NEW], nb[N_SEQS];
        ck_assert_int_eq(infer_generate_until(inf, idp, lens, N_SEQS, MAX_NEW, 2, a, na, &err), 0);
        infer_set_cache(inf, 1);
        ck_assert_int_eq(infer_generate_until(inf, idp, lens, N_SEQS, MAX_NEW, 2, b, nb, &err), 0);
        ck_assert_mem_eq(na, nb, sizeof na);
        for (int s = 0; s < N_SEQS; s++)
            ck_assert_mem_eq(a + s * MAX_NEW, b + s * MAX_NEW, (size_t)na[s] * sizeof(int));
        // A prompt longer than max_len is refused; max_new 0 generates nothing.
        int too_long = sp.max_len + 1, big[17] = {0};
        const int *bp = big;
        ck_assert_int_eq(infer_generate_until(inf, &bp, &too_long, 1, 4, 0, a, na, &err), -1);
        ck_assert_int_eq(infer_generate_until(inf, idp, lens, N_SEQS, 0, 0, a, na, &err), 0);
        for (int s = 0; s < N_SEQS; s++) ck_assert_int_eq(na[s], 0);
        infer_free(inf);
        model_free(m);
    }
}
END_TEST

/* Two engines on one plan (as tfrun's threads use them) give the same
 * tokens as an engine with its own. */
START_TEST(test_shared_plan) {
    Spec sp = {12, 6, 16, 0};
    TfModel *m = random_model(&sp, 1, 5);
    TfError err = {""};
    TfPlan *plan = plan_new(m, &err);
    ck_assert_ptr_nonnull(plan);
    TfInfer *a = infer_new_with_plan(plan, 2, &err), *b = infer_new_with_plan(plan, 2, &err);
    TfInfer *own = infer_new(m, 2, &err);
    int p0[] = {1, 2, 3}, p1[] = {4, 0};
    const int *ps[] = {p0, p1};
    int lens[] = {3, 2}, ga[8], gb[8], go[8];
    ck_assert_int_eq(infer_generate(a, ps, lens, 2, 4, ga, &err), 0);
    ck_assert_int_eq(infer_generate(b, ps, lens, 2, 4, gb, &err), 0);
    ck_assert_int_eq(infer_generate(own, ps, lens, 2, 4, go, &err), 0);
    ck_assert_mem_eq(ga, go, sizeof ga);
    ck_assert_mem_eq(gb, go, sizeof gb);
    long dense = 0;
    ck_assert_int_gt(plan_row_cost(plan, &dense), 0);
    ck_assert_int_ge(dense, plan_row_cost(plan, NULL));
    infer_free(a), infer_free(b), infer_free(own);
    plan_free(plan);
    model_free(m);
}
END_TEST

/* The adder at -O skips what it can: its prompt positions before the last
 * cost far less than a full pass (keys and values only), and the eight
 * GetRelativeToken heads share one key and one value cache. */
START_TEST(test_adder_plan_skips_work) {
    TfModel *o1 = tf_compile_program_opt("programs/adder.tfp", 1);
    TfModel *o0 = tf_compile_program_opt("programs/adder.tfp", 0);
    TfError err = {""};
    TfInfer *i1 = infer_new(o1, 1, &err), *i0 = infer_new(o0, 1, &err);
    int ids[10], out1[4], out0[4], len = 10;
    ck_assert_int_eq(infer_tokenize(o1, "0999+0111=", 10, ids, &err), 10);
    const int *idp = ids;
    ck_assert_int_eq(infer_generate(i1, &idp, &len, 1, 4, out1, &err), 0);
    ck_assert_int_eq(infer_generate(i0, &idp, &len, 1, 4, out0, &err), 0);
    ck_assert_mem_eq(out1, out0, sizeof out1);
    // Seed 001 spends 12.1 MFLOP on one addition; -O0 packed, -O far less.
    ck_assert_double_lt(infer_flops(i1), 40e3);
    ck_assert_double_lt(infer_flops(i0), 1e6);
    ck_assert_double_gt(infer_flops(i0), 10 * infer_flops(i1));
    infer_free(i1), infer_free(i0);
    model_free(o1), model_free(o0);
}
END_TEST

/* ---- per-part rows ---------------------------------------------------------- */

/* A model of scheduled layers without norms (d 12, vocab 6): layer 0, two
 * heads, head 0 writing column 8 and head 1 column 9; layer 1, an MLP whose
 * units 0..5 write column 10 and units 6..11 column 11; layer 2, one head
 * whose keys read columns 8 and 10 (with all_live, 9 and 11 too) and
 * whose values read and output writes columns 0..7. Head 1 and units 6..11 feed only the
 * unembedding, unless all_live: then the engine needs them at every row. */
static TfModel *parts_model(int all_live, unsigned seed) {
    Spec sp = {12, 6, 16, 0};
    TfModel *m = model_new();
    TfError err = {""};
    int d = sp.d;
    m->d_model = d;
    m->n_vocab = sp.vocab;
    m->vocab = malloc((size_t)sp.vocab);
    for (int i = 0; i < sp.vocab; i++) m->vocab[i] = (char)('a' + i);
    m->period = m->max_len = sp.max_len;
    m->generate = 3;
    m->tok_embed = add_random(m, TF_TENSOR_TOKEN_EMBED, sp.vocab, d, 2.0f, &seed);
    m->pos_embed = add_random(m, TF_TENSOR_POS_EMBED, sp.max_len, d, 1.0f, &seed);
    m->unembed = add_random(m, TF_TENSOR_UNEMBED, sp.vocab, d, 1.0f, &seed);
    TfLayer a = model_layer_init(TF_LAYER_ATTENTION);
    a.name = "two_ops";
    a.n_heads = 2, a.d_head = 3, a.d_vhead = 2, a.scale = 0.7f, a.causal = 1;
    a.query = add_random(m, "l0.q", 6, d, 1.5f, &seed);
    a.key = add_random(m, "l0.k", 6, d, 1.5f, &seed);
    a.value = add_random(m, "l0.v", 4, d, 1.0f, &seed);
    a.output = add_random(m, "l0.o", d, 4, 1.0f, &seed);
    float *wo = m->tensors[a.output].data;
    for (int c = 0; c < d; c++)
        for (int j = 0; j < 4; j++)
            if (c != (j < 2 ? 8 : 9)) wo[c * 4 + j] = 0.0f;
    ck_assert_int_ge(model_add_layer(m, &a, &err), 0);
    TfLayer f = model_layer_init(TF_LAYER_MLP);
    f.name = "two_maps";
    f.d_hidden = 12;
    f.act = TF_ACT_RELU;
    f.fc1_weight = add_random(m, "l1.w1", 12, d, 1.0f, &seed);
    f.fc1_bias = add_random(m, "l1.b1", 12, 0, 0.5f, &seed);
    f.fc2_weight = add_random(m, "l1.w2", d, 12, 1.0f, &seed);
    f.fc2_bias = add_random(m, "l1.b2", d, 0, 0.5f, &seed);
    float *w2 = m->tensors[f.fc2_weight].data, *b2 = m->tensors[f.fc2_bias].data;
    for (int c = 0; c < d; c++) {
        for (int u = 0; u < 12; u++)
            if (c != (u < 6 ? 10 : 11)) w2[c * 12 + u] = 0.0f;
        if (c < 10) b2[c] = 0.0f;
    }
    ck_assert_int_ge(model_add_layer(m, &f, &err), 0);
    TfLayer r = model_layer_init(TF_LAYER_ATTENTION);
    r.name = "reader";
    r.n_heads = 1, r.d_head = 2, r.d_vhead = 3, r.scale = 1.0f, r.causal = 1;
    r.query = add_random(m, "l2.q", 2, d, 1.0f, &seed);
    r.key = add_random(m, "l2.k", 2, d, 1.0f, &seed);
    r.value = add_random(m, "l2.v", 3, d, 1.0f, &seed);
    r.output = add_random(m, "l2.o", d, 3, 1.0f, &seed);
    float *wk = m->tensors[r.key].data, *wv = m->tensors[r.value].data;
    float *wr = m->tensors[r.output].data;
    for (int c = 0; c < d; c++) {
        int keep = c == 8 || c == 10 || (all_live && (c == 9 || c == 11));
        for (int i = 0; i < 2; i++)
            if (!keep) wk[i * d + c] = 0.0f;
        for (int j = 0; j < 3 && c >= 8; j++) wr[c * 3 + j] = wv[j * d + c] = 0.0f;
    }
    ck_assert_int_ge(model_add_layer(m, &r, &err), 0);
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    return m;
}

/* A layer of several parts runs each part at the rows it is needed at: the
 * outputs are the reference's, and the parts only the output rows need cost
 * nothing at the prompts' other rows (against the same model whose later
 * keys read every part). */
START_TEST(test_parts_run_only_needed_rows) {
    for (unsigned seed = 61; seed <= 64; seed++) {
        double flops[2];
        int rows = 0;
        for (int all_live = 0; all_live < 2; all_live++) {
            TfModel *m = parts_model(all_live, seed);
            int ids[N_SEQS][16], lens[N_SEQS], got[N_SEQS * N_NEW];
            const int *idp[N_SEQS];
            unsigned s0 = seed;
            rows = 0;
            for (int s = 0; s < N_SEQS; s++) {
                lens[s] = 2 + s % 7;
                rows += lens[s] - 1; /* prompt rows that are not output rows */
                for (int i = 0; i < lens[s]; i++) ids[s][i] = rand_r(&s0) % 6;
                idp[s] = ids[s];
            }
            TfError err = {""};
            TfInfer *inf = infer_new(m, N_SEQS, &err);
            ck_assert_msg(inf != NULL, "%s", err.msg);
            ck_assert_int_eq(infer_generate(inf, idp, lens, N_SEQS, N_NEW, got, &err), 0);
            flops[all_live] = infer_flops(inf);
            for (int s = 0; s < N_SEQS; s++) {
                int seq[16];
                memcpy(seq, ids[s], sizeof seq);
                for (int t = 0; t < N_NEW; t++) {
                    float logits[8];
                    reference_forward(m, seq, lens[s] + t, lens[s] + t - 1, logits, NULL);
                    seq[lens[s] + t] = ref_argmax(logits, 6);
                    ck_assert_msg(got[s * N_NEW + t] == seq[lens[s] + t],
                                  "seed %u all_live %d: sequence %d token %d: %d, reference %d",
                                  seed, all_live, s, t, got[s * N_NEW + t], seq[lens[s] + t]);
                }
            }
            infer_free(inf);
            model_free(m);
        }
        // Skipped per row: head 1 (at least 2 T 3 + 2 T 2 with T >= 1) and
        // units 6..11 (2 (6 x 12 + 6)); read in addition by all_live's
        // keys: 2 columns of 2 channels (8 FLOP per row, at every row).
        ck_assert_msg(flops[0] + 100.0 * rows < flops[1], "seed %u: %.0f FLOP, every part at every row %.0f",
                      seed, flops[0], flops[1]);
    }
}
END_TEST

/* ---- run-time checks ------------------------------------------------------ */

/* Heads whose keys take few values over long sequences go through
 * attention_groups (infer.c): the same outputs as scoring every position,
 * for a Count (tokens out) and a mean of numbers (values within the
 * rounding of a different summation order: means of values up to 2 over at
 * most 200 positions, about 2 T 2^-24 2), at a fraction of the work. */
static void check_grouped(const char *source, int numeric) {
    TfModel *m = tf_compile_text(source);
    ck_assert_ptr_nonnull(m);
    enum { NS = 6 };
    unsigned seed = 12;
    int lens[NS], *ids[NS], *a[NS], *b[NS];
    float *fa[NS], *fb[NS];
    for (int s = 0; s < NS; s++) {
        lens[s] = s == 0 ? 20 : s == 1 ? m->max_len : 64 + (int)(rand_r(&seed) % (m->max_len - 64));
        ids[s] = malloc((size_t)lens[s] * sizeof(int));
        ids[s][0] = m->bos;
        for (int i = 1; i < lens[s]; i++) ids[s][i] = 1 + (int)(rand_r(&seed) % 3);
        a[s] = malloc((size_t)lens[s] * sizeof(int)), b[s] = malloc((size_t)lens[s] * sizeof(int));
        fa[s] = malloc((size_t)lens[s] * sizeof(float)), fb[s] = malloc((size_t)lens[s] * sizeof(float));
    }
    TfError err = {""};
    double flops[2];
    for (int grouped = 0; grouped < 2; grouped++) {
        TfInfer *inf = infer_new(m, NS, &err);
        ck_assert_msg(inf != NULL, "%s", err.msg);
        infer_set_grouped(inf, grouped);
        int rc = numeric ? infer_every_position_values(inf, (const int *const *)ids, lens, NS,
                                                       grouped ? fb : fa, &err)
                         : infer_every_position(inf, (const int *const *)ids, lens, NS,
                                                grouped ? b : a, &err);
        ck_assert_msg(rc == 0, "%s", err.msg);
        flops[grouped] = infer_flops(inf);
        infer_free(inf);
    }
    double saved = 0;
    for (int s = 0; s < NS; s++) {
        saved += lens[s] >= 64 ? (double)lens[s] * lens[s] / 4 : 0;
        if (numeric) {
            char msg[256];
            ck_assert_msg(tf_compare_floats(fb[s], fa[s], (size_t)lens[s], 0, 1e-4, msg, sizeof msg) == 0,
                          "sequence %d: %s", s, msg);
        } else {
            ck_assert_mem_eq(b[s], a[s], (size_t)lens[s] * sizeof(int));
        }
        free(ids[s]), free(a[s]), free(b[s]), free(fa[s]), free(fb[s]);
    }
    // Each row of a long sequence scores a handful of groups, not its T
    // positions: at least T / 2 fewer FLOP per row, len^2 / 4 per sequence.
    ck_assert_msg(flops[0] - flops[1] > saved, "grouped %g FLOP, every position %g", flops[1],
                  flops[0]);
    model_free(m);
}

START_TEST(test_grouped_keys_same_outputs) {
    check_grouped("vocab \"^abc01\"; bos '^'; maxlen 200; cat hist, out;\n"
                  "hist: Count(k.tokens == q.tokens) -> hist;\n"
                  "out: Map(hist >= 40 ? '1' : '0') -> out;\n"
                  "output out at every position;\n",
                  0);
    check_grouped("vocab \"^abc\"; bos '^'; maxlen 200; num x, mean;\n"
                  "x: Map([tokens: 'a' => 2, 'b' => -1, _ => 0.375]) -> x;\n"
                  "mean: Aggregate(k.tokens != q.tokens, x, default: 0) -> mean;\n"
                  "output mean at every position;\n",
                  1);
}
END_TEST

/* Keys that read only what the position embedding writes (k.indices) are
 * computed once per position and kept in the caches (plan_static_keys):
 * generation is the reference's, also after an intervention that edits
 * those columns (the engine then computes every key and refills the
 * static ones when the intervention is cleared). */
START_TEST(test_static_keys_match_reference) {
    TfModel *m = tf_compile_text("vocab \"^abc\"; bos '^'; maxlen 12; cat apos, prev, out;\n"
                                 "apos: Map(indices - 2) -> apos;\n"
                                 "prev: Aggregate(k.indices == q.apos, tokens, default: '^') -> prev;\n"
                                 "out: Map([prev: 'a' => 'b', 'b' => 'c', 'c' => 'a', _ => 'a']) -> out;\n"
                                 "output out; generate 4;\n");
    ck_assert_ptr_nonnull(m);
    TfError err = {""};
    TfPlan *plan = plan_new(m, &err);
    ck_assert_msg(plan != NULL, "%s", err.msg);
    ck_assert_int_gt(plan_static_key_rows(plan), 0);
    enum { NS = 7, NEW = 4 };
    int ids[NS][12], lens[NS], want[NS * NEW], got[NS * NEW], edited[NS * NEW];
    const int *idp[NS];
    unsigned seed = 3;
    for (int s = 0; s < NS; s++) {
        lens[s] = 2 + s % 6;
        ids[s][0] = m->bos;
        for (int i = 1; i < lens[s]; i++) ids[s][i] = 1 + (int)(rand_r(&seed) % 3);
        idp[s] = ids[s];
        reference_generate(m, ids[s], lens[s], NEW, want + s * NEW);
    }
    TfInfer *inf = infer_new_with_plan(plan, NS, &err);
    ck_assert_msg(inf != NULL, "%s", err.msg);
    ck_assert_int_eq(infer_generate(inf, idp, lens, NS, NEW, got, &err), 0);
    ck_assert_mem_eq(got, want, sizeof want);
    const char *spec = "zero:indices@embed";
    TfIntervention *iv = intervention_parse(m, &spec, 1, 0, &err);
    ck_assert_msg(iv != NULL, "%s", err.msg);
    ck_assert_int_eq(infer_set_intervention(inf, iv, &err), 0);
    ck_assert_int_eq(infer_generate(inf, idp, lens, NS, NEW, edited, &err), 0);
    ck_assert_msg(memcmp(edited, want, sizeof want) != 0, "zeroing indices changed nothing");
    ck_assert_int_eq(infer_set_intervention(inf, NULL, &err), 0);
    ck_assert_int_eq(infer_generate(inf, idp, lens, NS, NEW, got, &err), 0);
    ck_assert_mem_eq(got, want, sizeof want);
    // Prompts of one length: each generation step's rows are one position
    // of consecutive sequences (store_cache copies them a channel at a
    // time; the embedding fills each position column).
    int same[NS];
    for (int s = 0; s < NS; s++) {
        for (int i = lens[s]; i < 5; i++) ids[s][i] = 1 + (s + i) % 3;
        same[s] = 5;
        reference_generate(m, ids[s], 5, NEW, want + s * NEW);
    }
    ck_assert_int_eq(infer_generate(inf, idp, same, NS, NEW, got, &err), 0);
    ck_assert_mem_eq(got, want, sizeof want);
    intervention_free(iv);
    infer_free(inf);
    plan_free(plan);
    model_free(m);
}
END_TEST

/* intervention_parse on spec: NULL with err.msg == want (want NULL: the
 * edits, which the caller frees). */
static TfIntervention *parse_one(const TfModel *m, const char *spec, const char *want) {
    TfError err = {""};
    TfIntervention *iv = intervention_parse(m, &spec, 1, 0, &err);
    if (want) {
        ck_assert_msg(iv == NULL, "%s: parsed", spec);
        ck_assert_str_eq(err.msg, want);
    } else {
        ck_assert_msg(iv != NULL, "%s: %s", spec, err.msg);
    }
    return iv;
}

/* A register's edits where it holds its columns only (model.h's live
 * ranges): the adder's `left` split where its second clear_lro (layer 12)
 * zeroed it, `left` the first round's digit and `left2` the later rounds'
 * on the same columns. REG@LAYER edits the layers of that name where REG is
 * held; a layer (or the embedding) where it is not is refused, naming the
 * register and its range. */
START_TEST(test_intervene_live_ranges) {
    TfModel *m = tf_compile_program("programs/adder.tfp");
    ck_assert_str_eq(m->layers[12].name, "clear_lro");
    tf_split_register(m, "left", 13, "left2");
    const TfRegister *left = &m->regs[model_find_register(m, "left")];
    TfIntervention *iv = parse_one(m, "left@read_left", NULL); /* read_left: 6, 14, 22, 30 */
    ck_assert_int_eq(iv->n, 1);
    ck_assert_int_eq(iv->edits[0].layer, 6);
    ck_assert_int_eq(iv->edits[0].site, TF_SITE_RESID);
    ck_assert_int_eq(iv->edits[0].lo, left->offset);
    ck_assert_int_eq(iv->edits[0].hi, left->offset + left->size);
    intervention_free(iv);
    iv = parse_one(m, "left2@read_left", NULL);
    ck_assert_int_eq(iv->n, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(iv->edits[i].layer, 14 + 8 * i);
        ck_assert_int_eq(iv->edits[i].lo, left->offset);
    }
    intervention_free(iv);
    intervention_free(parse_one(m, "left@layers.11", NULL)); /* state 12: left's last */
    intervention_free(parse_one(m, "left2@layers.12", NULL)); /* state 13: left2's first */
    intervention_free(parse_one(m, "left@embed", NULL));
    parse_one(m, "left@layers.14",
              "--ablate: 'left@layers.14': register 'left' holds its columns in states 0..12 (the "
              "embedding to after layer 11) only, not after layer 14 (read_left)");
    parse_one(m, "zero:left2@layers.6",
              "--ablate: 'zero:left2@layers.6': register 'left2' holds its columns in states "
              "13..36 (after layer 12 to after layer 35) only, not after layer 6 (read_left)");
    parse_one(m, "left@clear_lro,left2@embed",
              "--ablate: 'left2@embed': register 'left2' holds its columns in states 13..36 (after "
              "layer 12 to after layer 35) only, not after the embedding");
    model_free(m);
    // Held after none of the layers a name gives.
    m = tf_compile_program("programs/adder.tfp");
    tf_split_register(m, "left", 33, "left2");
    parse_one(m, "left2@read_left",
              "--ablate: 'left2@read_left': register 'left2' holds its columns in states 33..36 "
              "(after layer 32 to after layer 35) only, not after any of the 4 layers 'read_left' "
              "names");
    intervention_free(parse_one(m, "left2@copy_out", NULL)); /* after layer 35: state 36 */
    model_free(m);
}
END_TEST

/* The overflow tests' model: a Count of tokens and a Map of it, read at
 * every position. */
static TfModel *count_model(void) {
    TfModel *m = tf_compile_text("vocab \"^ab01\"; bos '^'; maxlen 20; cat hist, out;\n"
                                 "hist: Count(k.tokens == q.tokens) -> hist;\n"
                                 "out: Map(hist >= 3 ? '1' : '0') -> out;\n"
                                 "output out at every position;\n");
    ck_assert_ptr_nonnull(m);
    return m;
}

/* Runs m on ^aaaa at every position with a fresh engine: its return code,
 * the error in err. */
static int run_aaaa(const TfModel *m, TfError *err) {
    int ids[5] = {m->bos, 1, 1, 1, 1}, len = 5, out[5];
    const int *idp = ids;
    TfInfer *inf = infer_new(m, 1, err);
    ck_assert_ptr_nonnull(inf);
    int rc = infer_every_position(inf, &idp, &len, 1, (int *const[]){out}, err);
    infer_free(inf);
    return rc;
}

START_TEST(test_infinite_key_fails_the_step) {
    // Key channel c made infinite or NaN at every position (row c of the
    // Count's key weights set to infinity): every row's score meets it,
    // even where the query is 0 in channel c at every row of the prompt
    // (0 times infinity is NaN). The attention leaves such channels out, so
    // the engine must catch the key itself: each c fails the step, naming
    // the overflow.
    TfModel *m = count_model();
    int l = 0;
    while (l < m->n_layers && m->layers[l].kind != TF_LAYER_ATTENTION) l++;
    ck_assert_int_lt(l, m->n_layers);
    TfTensor *K = &m->tensors[m->layers[l].key];
    int rows = (int)K->shape[0], cols = (int)K->shape[1];
    float *saved = malloc((size_t)cols * sizeof(float));
    for (int c = 0; c < rows; c++) {
        memcpy(saved, K->data + (size_t)c * cols, (size_t)cols * sizeof(float));
        for (int j = 0; j < cols; j++) K->data[(size_t)c * cols + j] = INFINITY;
        TfError err = {""};
        int rc = run_aaaa(m, &err);
        ck_assert_msg(rc != 0, "key channel %d infinite: the step ran", c);
        ck_assert_msg(strstr(err.msg, "overflows float32") != NULL, "channel %d: %s", c, err.msg);
        memcpy(K->data + (size_t)c * cols, saved, (size_t)cols * sizeof(float));
    }
    free(saved);
    model_free(m);
}
END_TEST

/* A layer whose output overflows (every weight of its output map infinite:
 * the sum is infinite, or NaN where the inputs are 0) fails the step at that
 * layer: add_rows catches the sum it writes, not a later layer or the
 * logits. Each MLP and each attention layer with an output map whose tensor
 * no other layer uses, in turn. */
/* The embedding's overflow test, which the plan leaves out where the
 * tables cannot overflow (every entry finite, no column's largest token
 * and position entries summing past FLT_MAX): a token entry of 3e38 on a
 * position entry of 3e38, an infinite token entry and a NaN one fail at
 * the embedding; 1.7e38 on 1.6e38 (finite) does not. */
START_TEST(test_embedding_overflow_named) {
    const float tok_v[] = {3e38f, INFINITY, NAN, 1.7e38f}, pos_v[] = {3e38f, 0.0f, 0.0f, 1.6e38f};
    for (int k = 0; k < 4; k++) {
        TfModel *m = count_model();
        float *te = m->tensors[m->tok_embed].data, *pe = m->tensors[m->pos_embed].data;
        int d = m->d_model;
        te[(size_t)1 * d + 0] = tok_v[k]; /* token 'a', column 0 */
        for (int p = 0; p < m->max_len; p++) pe[(size_t)p * d + 0] = pos_v[k];
        TfError err = {""};
        int rc = run_aaaa(m, &err);
        const char *want = "the embedding overflows float32 at position 1";
        if (k < 3)
            ck_assert_msg(rc != 0 && strstr(err.msg, want), "case %d: %s", k, err.msg);
        else
            ck_assert_msg(rc == 0 || !strstr(err.msg, "the embedding"), "case %d: %s", k, err.msg);
        model_free(m);
    }
}
END_TEST

START_TEST(test_layer_output_overflow_named) {
    TfModel *m = count_model();
    int tested = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        int t = ly->kind == TF_LAYER_MLP         ? ly->fc2_weight
                : ly->kind == TF_LAYER_ATTENTION ? ly->output
                                                 : -1;
        int shared = 0;
        for (int e = 0; e < m->n_layers && t >= 0; e++)
            shared |= e != l && (m->layers[e].fc2_weight == t || m->layers[e].output == t);
        if (t < 0 || shared) continue;
        TfTensor *T = &m->tensors[t];
        size_t n = (size_t)T->shape[0] * (size_t)T->shape[1];
        float *saved = malloc(n * sizeof(float));
        memcpy(saved, T->data, n * sizeof(float));
        for (size_t i = 0; i < n; i++) T->data[i] = INFINITY;
        TfError err = {""};
        int rc = run_aaaa(m, &err);
        char want[64];
        snprintf(want, sizeof want, "layer %d (", l);
        ck_assert_msg(rc != 0, "layer %d's output infinite: the step ran", l);
        ck_assert_msg(strstr(err.msg, want) != NULL && strstr(err.msg, "overflows float32") != NULL,
                      "layer %d: %s", l, err.msg);
        memcpy(T->data, saved, n * sizeof(float));
        free(saved);
        tested++;
    }
    ck_assert_int_ge(tested, 2); /* the Count's output map and the Map's fc2 */
    model_free(m);
}
END_TEST

START_TEST(test_check_thresholds) {
    // Within the bound of one value: one column near 1, the rest near 0.
    float one[] = {0.99f, 0.01f, -0.01f}, low[] = {0.98f, 0.0f, 0.0f}, warm[] = {1.0f, 0.011f, 0.0f};
    float two[] = {1.0f, 1.0f, 0.0f}, none[] = {0.0f, 0.0f, 0.0f}, big[] = {5.0f, 0.0f, 0.0f};
    float nan[] = {1.0f, NAN, 0.0f}, mix[] = {0.75f, 0.25f, 0.0f}, exact[] = {1.0f, 0.0f, 0.0f};
    ck_assert_int_eq(check_holds_one(one, 3, 1, 0.0101), 1);
    ck_assert_int_eq(check_holds_one(exact, 3, 1, 0), 1); /* three equal values: their one-hot */
    ck_assert_int_eq(check_holds_one(big, 3, 1, 0.01), 0); /* far from 1: not within the bound */
    ck_assert_int_eq(check_holds_one(low, 3, 1, 0.01), 0);
    ck_assert_int_eq(check_holds_one(warm, 3, 1, 0.01), 0);
    ck_assert_int_eq(check_holds_one(two, 3, 1, 0.01), 0);
    ck_assert_int_eq(check_holds_one(none, 3, 1, 0.01), 0);
    ck_assert_int_eq(check_holds_one(nan, 3, 1, 0.01), 0);
    // Issue 22: three 'a' and one 'b' averaged is no value, whatever bound below 0.25.
    ck_assert_int_eq(check_holds_one(mix, 3, 1, 0.2), 0);
    ck_assert_int_eq(check_holds_one(mix, 3, 1, 0.25), 1);
    // A stride: column i at v[i * 2].
    float strided[] = {0.001f, 9.0f, 0.999f, 9.0f, 0.002f, 9.0f};
    ck_assert_int_eq(check_holds_one(strided, 3, 2, 0.01), 1);
}
END_TEST

/* A check without a bound (a file from before it was written) gets
 * 1 / (2 max_len): every mixture among max_len positions fails. */
START_TEST(test_check_default_bound) {
    TfModel *m = model_new();
    TfCheck c = {.bound = -1};
    m->max_len = 17;
    ck_assert_double_eq_tol(model_check_bound(m, &c), 0.5 / 17, 1e-15);
    float sixteen_to_one[] = {16.0f / 17, 1.0f / 17};
    ck_assert_int_eq(check_holds_one(sixteen_to_one, 2, 1, model_check_bound(m, &c)), 0);
    c.bound = 0.003;
    ck_assert_double_eq(model_check_bound(m, &c), 0.003);
    model_free(m);
}
END_TEST

/* A model with one categorical register "r" of n columns (labels "0",
 * "1", ...), vocab "ab", no layers; one check of r after layer 0 (which
 * check_describe never looks at). */
static TfModel *labelled_model(int n, const char *source_name) {
    TfModel *m = model_new();
    TfError err = {""};
    const char *labels[] = {"0", "1", "2", "3", "4", "5", "6", "7"};
    m->n_vocab = 2;
    m->d_model = n;
    ck_assert_int_eq(model_add_categorical(m, "r", 0, n, labels, &err), 0);
    m->checks = calloc(1, sizeof *m->checks);
    m->checks[0].op = strdup("Aggregate -> r");
    m->checks[0].line = 7;
    m->checks[0].bound = 0.25;
    m->n_checks = 1;
    if (source_name) m->source_name = strdup(source_name);
    return m;
}

static void expect_description(const TfModel *m, const float *v, const char *want) {
    TfError err = {""};
    check_describe(m, &m->checks[0], 3, v, 1, &err);
    ck_assert_str_eq(err.msg, want);
}

START_TEST(test_check_messages) {
    TfModel *m = labelled_model(6, "sort.tfp");
    float tie[] = {0.0f, 0.5f, 0.0f, 0.5f, 0.0f, 0.0f};
    expect_description(m, tie, "sort.tfp:7: Aggregate -> r: position 3 does not hold one value within 0.25 "
                               "(1 0.50, 3 0.50); the compiler could not prove it");
    float many[] = {0.3f, 0.6f, NAN, 0.4f, 0.5f, 0.35f};
    expect_description(m, many, "sort.tfp:7: Aggregate -> r: position 3 does not hold one value within 0.25 "
                                "(2 nan, 1 0.60, 4 0.50, 3 0.40, 2 more); the compiler "
                                "could not prove it");
    float cold[] = {0.1f, 0.0f, 0.2f, 0.0f, 0.0f, 0.0f};
    expect_description(m, cold, "sort.tfp:7: Aggregate -> r: position 3 does not hold one value within 0.25 "
                                "(no value above 0.25; the largest 2 0.20); the compiler could "
                                "not prove it");
    m->checks[0].line = 0;
    expect_description(m, tie, "sort.tfp: Aggregate -> r: position 3 does not hold one value within 0.25 "
                               "(1 0.50, 3 0.50); the compiler could not prove it");
    model_free(m);
    m = labelled_model(2, NULL);
    float half[] = {0.5f, 0.5f};
    expect_description(m, half, "line 7: Aggregate -> r: position 3 does not hold one value within 0.25 "
                                "(0 0.50, 1 0.50); the compiler could not prove it");
    model_free(m);
}
END_TEST

/* vocab "ab", d_model 4: r (columns 2, 3) is the mean of the token one-hots
 * of positions 0..i (one causal attention layer with constant scores); the
 * next token is r's argmax. With `checked`, r must hold one value after
 * layer 0. */
static TfModel *mean_model(int checked) {
    TfModel *m = model_new();
    TfError err = {""};
    m->d_model = 4;
    m->n_vocab = 2;
    m->vocab = malloc(2);
    memcpy(m->vocab, "ab", 2);
    m->period = m->max_len = 8;
    m->generate = 2;
    int64_t vd[2] = {2, 4}, pd[2] = {8, 4}, q[2] = {1, 4}, v[2] = {2, 4}, o[2] = {4, 2}, b[1] = {1};
    m->tok_embed = model_add_tensor(m, TF_TENSOR_TOKEN_EMBED, 2, vd, &err);
    m->pos_embed = model_add_tensor(m, TF_TENSOR_POS_EMBED, 2, pd, &err);
    m->unembed = model_add_tensor(m, TF_TENSOR_UNEMBED, 2, vd, &err);
    TfLayer a = model_layer_init(TF_LAYER_ATTENTION);
    a.name = "mean";
    a.n_heads = a.d_head = 1;
    a.d_vhead = 2;
    a.scale = 1.0f;
    a.causal = 1;
    a.query = model_add_tensor(m, "q", 2, q, &err);
    a.query_bias = model_add_tensor(m, "qb", 1, b, &err);
    a.key = model_add_tensor(m, "k", 2, q, &err);
    a.value = model_add_tensor(m, "v", 2, v, &err);
    a.output = model_add_tensor(m, "o", 2, o, &err);
    float *T = m->tensors[m->tok_embed].data, *U = m->tensors[m->unembed].data;
    for (int t = 0; t < 2; t++) {
        T[t * 4 + t] = 1.0f;
        U[t * 4 + 2 + t] = 1.0f;
        m->tensors[a.value].data[t * 4 + t] = 1.0f;
        m->tensors[a.output].data[(2 + t) * 2 + t] = 1.0f;
    }
    m->tensors[a.query_bias].data[0] = 1.0f;
    ck_assert_int_eq(model_add_layer(m, &a, &err), 0);
    const char *labels[] = {"'a'", "'b'"};
    ck_assert_int_eq(model_add_register(m, "tokens", TF_REG_TOKEN, 0, 2, &err), 0);
    ck_assert_int_eq(model_add_categorical(m, "r", 2, 2, labels, &err), 1);
    m->output_reg = 1;
    if (checked) ck_assert_int_eq(model_add_check(m, 1, 0, 3, "Aggregate -> r", 0.25, &err), 0);
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    return m;
}

/* Token ids of a string over "ab". */
static int *ab_ids(const char *s) {
    int n = (int)strlen(s), *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++) ids[i] = s[i] == 'b';
    return ids;
}

START_TEST(test_checks_fail_alone) {
    TfModel *m = mean_model(1), *plain = mean_model(0);
    TfError err = {""};
    const char *texts[] = {"aaaa", "abaa", "bbb", "aab"};
    const int *ids[4];
    int lens[4];
    for (int s = 0; s < 4; s++) {
        ids[s] = ab_ids(texts[s]);
        lens[s] = (int)strlen(texts[s]);
    }
    // Generation: "abaa" fails at position 1, a prompt row whose output
    // nobody reads; "aab" at position 2 (2/3 'a'); the others generate as
    // they do alone, and as without the check.
    TfInfer *inf = infer_new(m, 4, &err), *ref = infer_new(plain, 4, &err);
    ck_assert_ptr_nonnull(inf);
    int out[8], want[8];
    ck_assert_int_eq(infer_generate(inf, ids, lens, 4, 2, out, &err), -1);
    ck_assert_str_eq(err.msg, "line 3: Aggregate -> r: position 1 does not hold one value within "
                              "0.25 ('a' 0.50, 'b' 0.50); the compiler could not prove it");
    ck_assert_int_eq(infer_n_failed(inf), 2);
    ck_assert_ptr_null(infer_failure(inf, 0));
    ck_assert_ptr_nonnull(strstr(infer_failure(inf, 1), "position 1 does not hold one value"));
    ck_assert_ptr_null(infer_failure(inf, 2));
    ck_assert_ptr_nonnull(strstr(infer_failure(inf, 3), "position 2 does not hold one value within 0.25 "
                                                        "('a' 0.67, 'b' 0.33)"));
    ck_assert_int_eq(infer_generate(ref, ids, lens, 4, 2, want, &err), 0);
    ck_assert_int_eq(infer_n_failed(ref), 0);
    for (int s = 0; s == 0 || s == 2; s += 2)
        for (int i = 0; i < 2; i++) ck_assert_int_eq(out[s * 2 + i], want[s * 2 + i]);
    // The next call forgets the failures.
    ck_assert_int_eq(infer_generate(inf, ids, lens, 1, 2, out, &err), 0);
    ck_assert_int_eq(infer_n_failed(inf), 0);
    ck_assert_ptr_null(infer_failure(inf, 1));
    // Without the cache, and at every position: the same failures.
    infer_set_cache(inf, 0);
    ck_assert_int_eq(infer_generate(inf, ids, lens, 4, 2, out, &err), -1);
    ck_assert_int_eq(infer_n_failed(inf), 2);
    int rows[4][8], *rowp[4] = {rows[0], rows[1], rows[2], rows[3]};
    ck_assert_int_eq(infer_every_position(inf, ids, lens, 4, rowp, &err), -1);
    ck_assert_int_eq(infer_n_failed(inf), 2);
    ck_assert_ptr_nonnull(strstr(infer_failure(inf, 3), "position 2 does not hold"));
    ck_assert_int_eq(rows[2][2], 1); /* "bbb": 'b' everywhere */
    infer_free(inf);
    infer_free(ref);
    for (int s = 0; s < 4; s++) free((void *)ids[s]);
    model_free(m);
    model_free(plain);
}
END_TEST

int main(void) {
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("engine");
    tcase_add_test(tc, test_linear_matches_naive);
    tcase_add_test(tc, test_linear_repeated_rows_match_naive);
    tcase_add_test(tc, test_linear_packs_only_nonzero_blocks);
    tcase_add_test(tc, test_mlp_pairs_match_two_passes);
    tcase_add_test(tc, test_generation_matches_reference);
    tcase_add_test(tc, test_bidirectional_matches_reference);
    tcase_add_test(tc, test_classifier_matches_reference);
    tcase_add_test(tc, test_every_position_matches_reference);
    tcase_add_test(tc, test_hooks_match_reference);
    tcase_add_test(tc, test_static_keys_match_reference);
    tcase_add_test(tc, test_stop_token_truncates);
    tcase_add_test(tc, test_shared_plan);
    tcase_add_test(tc, test_adder_plan_skips_work);
    tcase_add_test(tc, test_parts_run_only_needed_rows);
    tcase_add_test(tc, test_grouped_keys_same_outputs);
    tcase_add_test(tc, test_infinite_key_fails_the_step);
    tcase_add_test(tc, test_layer_output_overflow_named);
    tcase_add_test(tc, test_embedding_overflow_named);
    tcase_add_test(tc, test_check_thresholds);
    tcase_add_test(tc, test_check_default_bound);
    tcase_add_test(tc, test_check_messages);
    tcase_add_test(tc, test_checks_fail_alone);
    tcase_add_test(tc, test_intervene_live_ranges);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
