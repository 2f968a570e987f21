/* test_kernels.c: every fast kernel against its naive twin, plus known values. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <float.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "kernels.h"
#include "testmodel.h"
#include "testutil.h"

static float *random_floats(unsigned *seed, size_t n, float scale) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = scale * ((float)rand_r(seed) / (float)RAND_MAX - 0.5f);
    return x;
}

static void check_matmul(int N, int C, int OC, int with_bias, int accumulate) {
    unsigned seed = (unsigned)(N * 131 + C * 17 + OC + with_bias * 7 + accumulate);
    float *inp = random_floats(&seed, (size_t)N * C, 2.0f);
    float *w = random_floats(&seed, (size_t)OC * C, 2.0f);
    float *b = with_bias ? random_floats(&seed, (size_t)OC, 2.0f) : NULL;
    float *fast = random_floats(&seed, (size_t)N * OC, 1.0f);
    float *slow = malloc((size_t)N * OC * sizeof(float));
    for (size_t i = 0; i < (size_t)N * OC; i++) slow[i] = fast[i];
    matmul_forward(fast, inp, w, b, N, C, OC, accumulate);
    matmul_forward_naive(slow, inp, w, b, N, C, OC, accumulate);
    char msg[256];
    int bad = tf_compare_floats(fast, slow, (size_t)N * OC, 1e-5, 1e-5, msg, sizeof msg);
    ck_assert_msg(bad == 0, "matmul N=%d C=%d OC=%d bias=%d acc=%d: %s", N, C, OC, with_bias,
                  accumulate, msg);
    free(inp), free(w), free(b), free(fast), free(slow);
}

START_TEST(test_matmul_matches_naive) {
    int shapes[][3] = {{1, 80, 80}, {10, 80, 200}, {7, 200, 80}, {1, 3, 1}, {64, 33, 17}, {3, 1, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int bias = 0; bias < 2; bias++)
            for (int acc = 0; acc < 2; acc++)
                check_matmul(shapes[s][0], shapes[s][1], shapes[s][2], bias, acc);
}
END_TEST

START_TEST(test_matmul_known_values) {
    // [1 2; 3 4] @ [1 0; 1 1]^T + [10, 20] = [11 23; 13 27]
    float inp[] = {1, 2, 3, 4}, w[] = {1, 0, 1, 1}, b[] = {10, 20}, out[4];
    matmul_forward(out, inp, w, b, 2, 2, 2, 0);
    ck_assert_float_eq(out[0], 11);
    ck_assert_float_eq(out[1], 23);
    ck_assert_float_eq(out[2], 13);
    ck_assert_float_eq(out[3], 27);
    matmul_forward(out, inp, w, NULL, 2, 2, 2, 1);
    ck_assert_float_eq(out[0], 12);
    ck_assert_float_eq(out[3], 34);
}
END_TEST

START_TEST(test_gelu_exact_values) {
    // reference values of 0.5 x (1 + erf(x / sqrt 2)), as torch.nn.GELU() gives
    float x[] = {1.0f, -1.0f, 0.0f, 3.0f, 1000.0f, -10.0f, 0.5f};
    const double want[] = {0.8413447460685429, -0.15865525393145707, 0.0, 2.9959502751634634,
                           1000.0, -7.619853024160525e-23, 0.34573123063700656};
    gelu_forward(x, 7);
    for (int i = 0; i < 7; i++)
        ck_assert_msg(fabs(x[i] - want[i]) <= 1e-6 * fmax(1.0, fabs(want[i])),
                      "gelu #%d = %.9g, want %.9g", i, x[i], want[i]);
    // The seed's +1000 bias trick relies on GELU being the identity there.
    float big = 1000.0f + 0.25f;
    gelu_forward(&big, 1);
    ck_assert_float_eq(big, 1000.25f);
}
END_TEST

/* gelu_forward's three paths (the baseline, AVX2, AVX-512, where this CPU
 * runs them) give the same bits on the sweep below, lengths that end
 * inside a vector included, and extreme inputs. */
START_TEST(test_gelu_simd_paths_agree) {
    enum { N = 40001 };
    static float x[N], ref[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)(-20.0 + 1e-3 * i);
    x[0] = 1e30f, x[1] = -1e30f, x[2] = 0.0f, x[3] = -0.0f, x[4] = 1e-30f;
    memcpy(ref, x, sizeof x);
    gelu_forward_simd(ref, N, TF_SIMD_GENERIC);
    int paths = 0;
    for (int simd = 0; simd < TF_SIMD_COUNT; simd++) {
        if (!simd_supported((TfSimd)simd)) continue;
        for (long n = N; n >= N - 17; n -= 17) {
            memcpy(y, x, sizeof x);
            gelu_forward_simd(y, n, (TfSimd)simd);
            for (long i = 0; i < n; i++)
                ck_assert_msg(memcmp(&y[i], &ref[i], sizeof y[i]) == 0,
                              "%s: gelu(%g) = %.9g, the baseline %.9g", tf_simd_names[simd], x[i],
                              y[i], ref[i]);
        }
        paths++;
    }
    ck_assert_int_ge(paths, 1);
}
END_TEST

/* Saturated inputs (x >= 8 or x <= -14, infinities included) and zeros, which the
 * vector loop answers without its polynomials: the bits the scalar loop
 * computes (a call on one element runs it), on every instruction set. */
START_TEST(test_gelu_saturated_shortcut) {
    enum { N = 64 }; /* gelu_body's vectors at once: all saturated */
    const float vals[] = {8.0f, 8.000001f, 9.5f, 1000.0f, 1e30f, INFINITY, -14.0f, -14.5f, -100.0f,
                          -1e30f, 13.0f, -3e4f, 0.0f, 40.0f, -0.0f, -INFINITY};
    enum { NV = sizeof vals / sizeof vals[0] };
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = vals[(i * 5) % NV];
    for (int simd = 0; simd < TF_SIMD_COUNT; simd++) {
        if (!simd_supported((TfSimd)simd)) continue;
        memcpy(y, x, sizeof x);
        gelu_forward_simd(y, N, (TfSimd)simd);
        for (int i = 0; i < N; i++) {
            float one = x[i];
            gelu_forward_simd(&one, 1, (TfSimd)simd);
            ck_assert_msg(memcmp(&one, &y[i], sizeof one) == 0, "%s: gelu(%g) = %.9g, scalar %.9g",
                          tf_simd_names[simd], x[i], y[i], one);
        }
        // Near the thresholds, densely: 8 to 40 and -14 to -46.
        for (int side = 0; side < 2; side++)
            for (int k = 0; k < 3200; k += N) {
                for (int i = 0; i < N; i++)
                    x[i] = side ? 8.0f + 0.01f * (float)(k + i) : -14.0f - 0.01f * (float)(k + i);
                memcpy(y, x, sizeof x);
                gelu_forward_simd(y, N, (TfSimd)simd);
                for (int i = 0; i < N; i++) {
                    float one = x[i];
                    gelu_forward_simd(&one, 1, (TfSimd)simd);
                    ck_assert_msg(memcmp(&one, &y[i], sizeof one) == 0, "gelu(%.9g)", x[i]);
                }
            }
    }
}
END_TEST

/* The whole range against a double-precision reference: the vectorized
 * erfc behind gelu_forward (runtime/engine/kernels.c) is as good as float allows
 * where it matters, and keeps its relative precision on the negative side. */
START_TEST(test_gelu_sweep) {
    enum { N = 40001 };
    static float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(-20.0 + 1e-3 * i);
    static float y[N];
    memcpy(y, x, sizeof x);
    gelu_forward(y, N);
    for (int i = 0; i < N; i++) {
        double v = x[i], want = 0.5 * v * erfc(-v / sqrt(2.0)), err = fabs(y[i] - want);
        ck_assert_msg(err <= 2e-7 * fmax(1.0, fabs(want)), "gelu(%g) = %.9g, want %.9g", v,
                      y[i], want);
        if (fabs(want) > 1e-10)
            ck_assert_msg(err <= 1e-5 * fabs(want), "gelu(%g) = %.9g, want %.9g (relative)", v,
                          y[i], want);
    }
}
END_TEST

START_TEST(test_gelu_tanh_values) {
    // PyTorch's gelu(x, approximate='tanh') in double (GPT-2's gelu_new)
    float x[] = {1.0f, -1.0f, 0.0f, 3.0f, 1000.0f, -10.0f, 0.5f};
    const double want[] = {0.8411919906082768, -0.15880800939172324, 0.0, 2.996362607918227,
                           1000.0, 0.0, 0.34571400982514394};
    float y[7];
    memcpy(y, x, sizeof x);
    gelu_tanh_forward(y, 7);
    gelu_tanh_forward_naive(x, 7);
    for (int i = 0; i < 7; i++) {
        ck_assert_msg(fabs(y[i] - want[i]) <= 1e-6 * fmax(1.0, fabs(want[i])),
                      "gelu_tanh #%d = %.9g, want %.9g", i, y[i], want[i]);
        ck_assert_msg(fabs(x[i] - want[i]) <= 1e-7 * fmax(1.0, fabs(want[i])),
                      "gelu_tanh_naive #%d = %.9g, want %.9g", i, x[i], want[i]);
    }
}
END_TEST

/* The fast tanh GELU against its double twin over the whole range. */
START_TEST(test_gelu_tanh_sweep) {
    enum { N = 40001 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)(-20.0 + 1e-3 * i);
    memcpy(y, x, sizeof x);
    gelu_tanh_forward(y, N);
    gelu_tanh_forward_naive(x, N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(fabs(y[i] - x[i]) <= 3e-7 * fmax(1.0, fabs(x[i])),
                      "gelu_tanh(%g) = %.9g, naive %.9g", -20.0 + 1e-3 * i, y[i], x[i]);
}
END_TEST

START_TEST(test_relu) {
    float x[] = {-2, 0, 3};
    relu_forward(x, 3);
    ck_assert_float_eq(x[0], 0);
    ck_assert_float_eq(x[1], 0);
    ck_assert_float_eq(x[2], 3);
}
END_TEST

START_TEST(test_attention_matches_naive) {
    unsigned seed = 7;
    int T = 13, D = 5, DV = 6, kstride = 9, vstride = 11;
    float *k = random_floats(&seed, (size_t)T * kstride, 2.0f);
    float *v = random_floats(&seed, (size_t)T * vstride, 2.0f);
    float *q = random_floats(&seed, (size_t)D, 2.0f);
    float fast[6], slow[6], att_fast[13], att_slow[13];
    for (int t = 1; t <= T; t++) {
        attention_row_forward(fast, att_fast, q, k, v, t, D, DV, kstride, vstride, 0.37f);
        attention_row_forward_naive(slow, att_slow, q, k, v, t, D, DV, kstride, vstride, 0.37f);
        char msg[256];
        ck_assert_msg(tf_compare_floats(fast, slow, DV, 1e-5, 1e-6, msg, sizeof msg) == 0,
                      "T=%d out: %s", t, msg);
        ck_assert_msg(tf_compare_floats(att_fast, att_slow, t, 1e-5, 1e-7, msg, sizeof msg) == 0,
                      "T=%d weights: %s", t, msg);
        double sum = 0;
        for (int i = 0; i < t; i++) sum += att_fast[i];
        ck_assert_msg(fabs(sum - 1.0) < 1e-5, "weights sum to %g", sum);
    }
    free(k), free(v), free(q);
}
END_TEST

START_TEST(test_attention_huge_scores_select_one) {
    // Scores of order 1e9, as the seed's 1e10 weights produce: the softmax
    // must pick the largest exactly, without overflow or NaN.
    float k[3] = {1e10f, 3e10f, 2e10f}, v[3] = {10, 20, 30}, q[1] = {1.0f}, out[1], att[3];
    attention_row_forward(out, att, q, k, v, 3, 1, 1, 1, 1, 0.1f);
    ck_assert_float_eq(out[0], 20);
    ck_assert_float_eq(att[0], 0);
    ck_assert_float_eq(att[1], 1);
    attention_row_forward_naive(out, att, q, k, v, 3, 1, 1, 1, 1, 0.1f);
    ck_assert_float_eq(out[0], 20);
}
END_TEST

/* attention_block_forward's inputs: sequence-minor caches of S sequences,
 * L positions, NK key and NV value channels; 3 live channel pairs. */
enum { AB_S = 20, AB_L = 40, AB_NK = 6, AB_NV = 4, AB_NP = 3, AB_LANES = TF_ATT_LANES };
typedef struct {
    float k[AB_L * AB_NK * AB_S], v[AB_L * AB_NV * AB_S], q[5 * AB_LANES];
    int pq[AB_NP], pk[AB_NP], seq[AB_LANES], T[AB_LANES], rows[AB_LANES];
    int k_same; /* the kernel told every sequence's keys are equal */
} AttBlock;
typedef struct {
    float out[3 * AB_LANES], sums[AB_LANES], att[AB_L * AB_LANES], scores[AB_L * AB_LANES];
    int used[AB_LANES];
} AttResult;

/* add: r->out (kept, not cleared) gains the outputs. */
static void att_block_run_add(AttResult *r, const AttBlock *b, int W, float scale, int naive,
                              TfSimd simd, int add) {
    float out[sizeof r->out / sizeof *r->out];
    memcpy(out, r->out, sizeof out);
    memset(r, 0, sizeof *r);
    if (add) memcpy(r->out, out, sizeof out);
    if (naive)
        attention_block_forward_naive(r->out, AB_LANES, r->sums, r->used, r->att, r->scores, b->q,
                                      AB_LANES, b->rows, b->pq, b->pk, AB_NP, b->k, AB_NK, b->v, AB_NV, 1,
                                      4, AB_S, b->seq, b->T, W, scale, 0, add);
    else
        attention_block_forward_simd(r->out, AB_LANES, r->sums, r->used, r->att, r->scores, b->q,
                                     AB_LANES, b->rows, b->pq, b->pk, AB_NP, b->k, AB_NK, b->v, AB_NV, 1,
                                     4, AB_S, b->seq, b->T, W, scale, b->k_same, add, simd);
}

static void att_block_run(AttResult *r, const AttBlock *b, int W, float scale, int naive,
                          TfSimd simd) {
    att_block_run_add(r, b, W, scale, naive, simd, 0);
}

/* Lanes of one sequence, of consecutive ones, and of any (these in
 * permuted columns of q and out); each lane its own number of positions. */
static void att_block_layout(AttBlock *b, int mode, unsigned *seed) {
    for (int i = 0; i < AB_LANES; i++) {
        b->seq[i] = mode == 0 ? 7 : mode == 1 ? 2 + i : (int)(rand_r(seed) % AB_S);
        b->T[i] = 1 + (int)(rand_r(seed) % AB_L);
        b->rows[i] = mode == 2 ? i * 5 % AB_LANES : i;
    }
    int pq[AB_NP] = {4, 0, 2}, pk[AB_NP] = {1, 5, 3};
    memcpy(b->pq, pq, sizeof pq);
    memcpy(b->pk, pk, sizeof pk);
}

START_TEST(test_attention_block_matches_naive) {
    // Random scores (soft attention). exp_vec is within 2 ulp of expf and
    // the division adds one rounding: each weight within 4 ulp (5e-7) of the
    // naive one; the weights' sum and the weighted sums of values in
    // [-1, 1] add T <= 40 such terms in the same order: 1e-5 relative plus
    // 1e-6 absolute bounds them with room.
    unsigned seed = 28;
    AttBlock *b = calloc(1, sizeof *b);
    AttResult *fast = malloc(sizeof *fast), *slow = malloc(sizeof *slow);
    for (size_t i = 0; i < sizeof b->k / sizeof *b->k; i++)
        b->k[i] = 4.0f * ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f);
    for (size_t i = 0; i < sizeof b->v / sizeof *b->v; i++)
        b->v[i] = 2.0f * ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f);
    for (size_t i = 0; i < sizeof b->q / sizeof *b->q; i++)
        b->q[i] = 4.0f * ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f);
    int checked = 0;
    for (int mode = 0; mode < 3; mode++)
        for (int wi = 0; wi < 3; wi++) {
            int W = wi == 0 ? AB_LANES : wi == 1 ? 5 : 1;
            att_block_layout(b, mode, &seed);
            att_block_run(slow, b, W, 0.7f, 1, TF_SIMD_GENERIC);
            for (int simd = 0; simd < TF_SIMD_COUNT; simd++) {
                if (!simd_supported((TfSimd)simd)) continue;
                att_block_run(fast, b, W, 0.7f, 0, (TfSimd)simd);
                char msg[256];
                for (int j = 0; j < 3; j++)
                    ck_assert_msg(tf_compare_floats(fast->out + j * AB_LANES,
                                                    slow->out + j * AB_LANES, AB_LANES, 1e-5,
                                                    1e-6, msg, sizeof msg) == 0,
                                  "%s mode %d W %d channel %d: %s", tf_simd_names[simd], mode, W,
                                  j, msg);
                ck_assert_msg(tf_compare_floats(fast->sums, slow->sums, (size_t)W, 1e-5, 0, msg,
                                                sizeof msg) == 0,
                              "%s sums: %s", tf_simd_names[simd], msg);
                for (int i = 0; i < W; i++) {
                    ck_assert_int_eq(fast->used[i], slow->used[i]);
                    for (int t = 0; t < b->T[i]; t++) {
                        int x = t * AB_LANES + i;
                        ck_assert_msg(fabsf(fast->att[x] - slow->att[x]) <= 1e-6f,
                                      "weight %d of lane %d: %g, naive %g", t, i, fast->att[x],
                                      slow->att[x]);
                        ck_assert_float_eq(fast->scores[x], slow->scores[x]); /* same order */
                    }
                }
                checked++;
            }
        }
    ck_assert_int_ge(checked, 9);
    free(b), free(fast), free(slow);
}
END_TEST

START_TEST(test_attention_block_simd_paths_agree) {
    // Every instruction set does the same operations in the same order.
    unsigned seed = 5;
    AttBlock *b = calloc(1, sizeof *b);
    AttResult *gen = malloc(sizeof *gen), *other = malloc(sizeof *other);
    for (size_t i = 0; i < sizeof b->k / sizeof *b->k; i++) b->k[i] = (float)((double)rand_r(&seed) / RAND_MAX);
    for (size_t i = 0; i < sizeof b->v / sizeof *b->v; i++) b->v[i] = (float)((double)rand_r(&seed) / RAND_MAX);
    for (size_t i = 0; i < sizeof b->q / sizeof *b->q; i++) b->q[i] = (float)((double)rand_r(&seed) / RAND_MAX);
    for (int mode = 0; mode < 3; mode++) {
        att_block_layout(b, mode, &seed);
        att_block_run(gen, b, AB_LANES, 3.0f, 0, TF_SIMD_GENERIC);
        for (int simd = 1; simd < TF_SIMD_COUNT; simd++) {
            if (!simd_supported((TfSimd)simd)) continue;
            att_block_run(other, b, AB_LANES, 3.0f, 0, (TfSimd)simd);
            ck_assert_msg(memcmp(gen, other, sizeof *gen) == 0, "%s differs from generic (mode %d)",
                          tf_simd_names[simd], mode);
        }
    }
    free(b), free(gen), free(other);
}
END_TEST

/* Keys of the position alone, equal in every sequence (the engine's static
 * keys): told so (k_same), the kernel reads lane 0's for every lane; the
 * naive loops' bits on every instruction set, in each lane layout. On keys
 * that differ by sequence the flag changes the answer, so it is used. */
/* add (a copying output projection's columns of the residual stream):
 * each output is the column's old value plus exactly the sum the store
 * gives, the naive loops and every instruction set alike, lanes past W and
 * other columns untouched; an output that overflows (FLT_MAX plus 3e38)
 * gives its lane, and only its lane, a NaN sum. */
START_TEST(test_attention_block_adds) {
    unsigned seed = 23;
    AttBlock *b = calloc(1, sizeof *b);
    AttResult *st = malloc(sizeof *st), *ad = malloc(sizeof *ad);
    float base[3 * AB_LANES];
    for (size_t i = 0; i < sizeof b->k / sizeof *b->k; i++)
        b->k[i] = 4.0f * ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f);
    for (size_t i = 0; i < sizeof b->q / sizeof *b->q; i++)
        b->q[i] = 4.0f * ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f);
    for (int big = 0; big < 2; big++) {
        for (size_t i = 0; i < sizeof b->v / sizeof *b->v; i++)
            b->v[i] = big ? 3e38f : 2.0f * ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f);
        for (int mode = 0; mode < 3; mode++)
            for (int wi = 0; wi < 2; wi++) {
                int W = wi == 0 ? AB_LANES : 5;
                att_block_layout(b, mode, &seed);
                for (int i = 0; i < 3 * AB_LANES; i++)
                    base[i] = 8.0f * ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f);
                if (big) base[1 * AB_LANES + b->rows[2]] = FLT_MAX; /* lane 2, channel 2 of 1..3 */
                for (int run = 0; run <= TF_SIMD_COUNT; run++) {
                    int naive = run == 0;
                    TfSimd simd = naive ? TF_SIMD_GENERIC : (TfSimd)(run - 1);
                    if (!simd_supported(simd)) continue;
                    att_block_run(st, b, W, 0.7f, naive, simd);
                    memcpy(ad->out, base, sizeof base);
                    att_block_run_add(ad, b, W, 0.7f, naive, simd, 1);
                    for (int j = 0; j < 3; j++)
                        for (int c = 0; c < AB_LANES; c++) {
                            int lane = -1;
                            for (int i = 0; i < W; i++)
                                if (b->rows[i] == c) lane = i;
                            int x = j * AB_LANES + c;
                            float want = lane < 0 ? base[x] : base[x] + st->out[x];
                            ck_assert_msg(memcmp(&ad->out[x], &want, sizeof want) == 0,
                                          "run %d, mode %d, W %d: channel %d, column %d", run,
                                          mode, W, j, c);
                        }
                    for (int i = 0; i < W; i++) {
                        int over = big && i == 2;
                        int ok = over ? isnan(ad->sums[i])
                                      : memcmp(&ad->sums[i], &st->sums[i], sizeof(float)) == 0;
                        ck_assert_msg(ok, "run %d, mode %d, W %d: lane %d's sum", run, mode, W, i);
                        ck_assert_int_eq(ad->used[i], st->used[i]);
                    }
                }
            }
    }
    free(b), free(st), free(ad);
}
END_TEST

START_TEST(test_attention_block_same_keys) {
    unsigned seed = 17;
    AttBlock *b = calloc(1, sizeof *b);
    AttResult *slow = malloc(sizeof *slow), *fast = malloc(sizeof *fast);
    for (size_t i = 0; i < sizeof b->v / sizeof *b->v; i++) b->v[i] = (float)((double)rand_r(&seed) / RAND_MAX);
    for (size_t i = 0; i < sizeof b->q / sizeof *b->q; i++) b->q[i] = 4.0f * (float)((double)rand_r(&seed) / RAND_MAX) - 2.0f;
    for (int differ = 0; differ < 2; differ++) {
        for (int t = 0; t < AB_L; t++)
            for (int c = 0; c < AB_NK; c++) {
                float kv = 3.0f * (float)((double)rand_r(&seed) / RAND_MAX) - 1.5f;
                for (int s = 0; s < AB_S; s++)
                    b->k[((long)t * AB_NK + c) * AB_S + s] = differ ? kv + 0.25f * (float)s : kv;
            }
        for (int mode = 0; mode < 3; mode++) {
            att_block_layout(b, mode, &seed);
            b->k_same = 0;
            att_block_run(slow, b, AB_LANES, 1.0f, 1, TF_SIMD_GENERIC);
            b->k_same = 1;
            for (int simd = 0; simd < TF_SIMD_COUNT; simd++) {
                if (!simd_supported((TfSimd)simd)) continue;
                att_block_run(fast, b, AB_LANES, 1.0f, 0, (TfSimd)simd);
                int same = 1; /* every score a lane sees */
                for (int i = 0; i < AB_LANES; i++)
                    for (int t = 0; t < b->T[i]; t++)
                        same &= memcmp(&fast->scores[t * AB_LANES + i],
                                       &slow->scores[t * AB_LANES + i], sizeof(float)) == 0;
                if (differ) {
                    // Lanes of one sequence (mode 0) read their own keys
                    // either way; the others read lane 0's.
                    ck_assert_int_eq(same, mode == 0);
                    continue;
                }
                ck_assert_msg(same, "%s, mode %d: scores", tf_simd_names[simd], mode);
                for (int i = 0; i < AB_LANES; i++)
                    for (int j = 0; j < 3; j++)
                        ck_assert(fabsf(fast->out[j * AB_LANES + b->rows[i]] -
                                        slow->out[j * AB_LANES + b->rows[i]]) <= 1e-5f);
            }
        }
    }
    free(b), free(slow), free(fast);
}
END_TEST

START_TEST(test_attention_block_hard_exact) {
    // Compiled heads: scores far apart (weights exactly 0 and 1) or tied
    // (exact averages), and tiny weights down to expf's underflow: the
    // same bits as the naive loops, and the same weights of exactly 0.
    AttBlock *b = calloc(1, sizeof *b);
    AttResult *fast = malloc(sizeof *fast), *slow = malloc(sizeof *slow);
    // Key channel 1 (met by query channel 4) holds a score per position:
    // 0 at the matches, -95, -103 (tiny, not 0 under expf) and -1000.
    const float pattern[] = {0, -95, 0, -103, -1000, 0, -105, -95, 0, -1000};
    for (int t = 0; t < AB_L; t++)
        for (int s = 0; s < AB_S; s++) {
            b->k[((long)t * AB_NK + 1) * AB_S + s] = pattern[(t + s) % 10];
            for (int j = 0; j < AB_NV; j++)
                b->v[((long)t * AB_NV + j) * AB_S + s] = (float)((t * 7 + s * 3 + j) % 5) - 2.0f;
        }
    for (int i = 0; i < AB_LANES; i++) b->q[4 * AB_LANES + i] = 1.0f;
    unsigned seed = 3;
    int tiny = 0;
    for (int mode = 0; mode < 3; mode++) {
        att_block_layout(b, mode, &seed);
        att_block_run(slow, b, AB_LANES, 1.0f, 1, TF_SIMD_GENERIC);
        att_block_run(fast, b, AB_LANES, 1.0f, 0, simd_best());
        ck_assert(memcmp(fast->out, slow->out, sizeof fast->out) == 0);
        ck_assert(memcmp(fast->sums, slow->sums, sizeof fast->sums) == 0);
        ck_assert(memcmp(fast->used, slow->used, sizeof fast->used) == 0);
        for (int i = 0; i < AB_LANES; i++)
            for (int t = 0; t < b->T[i]; t++) {
                float a = slow->att[t * AB_LANES + i];
                ck_assert_int_eq(fast->att[t * AB_LANES + i] == 0.0f, a == 0.0f);
                tiny += a > 0.0f && a < 1e-30f;
            }
    }
    ck_assert_int_gt(tiny, 0); /* the tiny weights were there to compare */
    // Hard in every lane (scores 0 at the matches, position 0 one of them,
    // the rest at least 105 below): the kernel skips exp there (its answers
    // 1 and 0); the same bits, and every weight exactly 0 or 1 / matches.
    const float hard[] = {0, -105, 0, -1000, -1000, 0, -105, -200, 0, -1000};
    for (int t = 0; t < AB_L; t++)
        for (int s = 0; s < AB_S; s++) b->k[((long)t * AB_NK + 1) * AB_S + s] = hard[t % 10];
    for (int mode = 0; mode < 3; mode++) {
        att_block_layout(b, mode, &seed);
        att_block_run(slow, b, AB_LANES, 1.0f, 1, TF_SIMD_GENERIC);
        for (int simd = 0; simd < TF_SIMD_COUNT; simd++) {
            if (!simd_supported((TfSimd)simd)) continue;
            att_block_run(fast, b, AB_LANES, 1.0f, 0, (TfSimd)simd);
            ck_assert(memcmp(fast->out, slow->out, sizeof fast->out) == 0);
            ck_assert(memcmp(fast->sums, slow->sums, sizeof fast->sums) == 0);
            ck_assert(memcmp(fast->used, slow->used, sizeof fast->used) == 0);
            for (int i = 0; i < AB_LANES; i++)
                for (int t = 0; t < b->T[i]; t++) {
                    float a = fast->att[t * AB_LANES + i];
                    ck_assert(a == 0.0f || a == 1.0f / (float)fast->used[i]);
                    ck_assert(memcmp(&a, &slow->att[t * AB_LANES + i], sizeof a) == 0);
                }
        }
    }
    // One position of weight 1 in every lane (the adder's reads: every
    // sequence's match at the same position, 3): the values' sums are
    // +0 + v, so a value of -0 comes out +0, as the naive loops make it.
    for (int t = 0; t < AB_L; t++)
        for (int s = 0; s < AB_S; s++) {
            b->k[((long)t * AB_NK + 1) * AB_S + s] = t == 3 ? 0.0f : -1000.0f;
            for (int j = 0; j < AB_NV; j++)
                b->v[((long)t * AB_NV + j) * AB_S + s] =
                    (s + j) % 4 == 0 ? -0.0f : (float)(s - 2 * j);
        }
    for (int mode = 0; mode < 3; mode++) {
        att_block_layout(b, mode, &seed);
        for (int i = 0; i < AB_LANES; i++) b->T[i] = 4 + b->T[i] % (AB_L - 4);
        att_block_run(slow, b, AB_LANES, 1.0f, 1, TF_SIMD_GENERIC);
        for (int i = 0; i < AB_LANES; i++) ck_assert_int_eq(slow->used[i], 1);
        for (int simd = 0; simd < TF_SIMD_COUNT; simd++) {
            if (!simd_supported((TfSimd)simd)) continue;
            att_block_run(fast, b, AB_LANES, 1.0f, 0, (TfSimd)simd);
            ck_assert_msg(memcmp(fast->out, slow->out, sizeof fast->out) == 0, "%s, mode %d",
                          tf_simd_names[simd], mode);
            ck_assert(memcmp(fast->sums, slow->sums, sizeof fast->sums) == 0);
        }
    }
    free(b), free(fast), free(slow);
}
END_TEST

/* Every number of live channel pairs the kernel treats apart: none, 1 to 4
 * (scores_few: the queries in registers, zero channels kept), 5 to 16 (one
 * chunk), and more than one chunk (20: the second chunk continues each
 * lane's sum in order and scales it). Each twice: every query channel
 * random, and some 0 in every lane (channel 1 with 2 to 16 pairs, the
 * second chunk's with 20: it adds nothing, but its pass still scales and
 * masks the first chunk's sums). Scores exactly the naive ones (the same
 * order), weights and outputs within test_attention_block_matches_naive's
 * bounds, every instruction set the same bits; consecutive rows (one
 * vector load per query channel) and permuted ones. */
START_TEST(test_attention_block_channel_counts) {
    enum { S = 8, L = 24, NPMAX = 20, NV = 2, B = TF_ATT_LANES };
    const int counts[] = {0, 1, 2, 3, 4, 5, 9, 16, 20};
    float *k = malloc(sizeof(float) * L * NPMAX * S), *v = malloc(sizeof(float) * L * NV * S);
    float *q = malloc(sizeof(float) * NPMAX * B);
    int pq[NPMAX], pk[NPMAX], seq[B], T[B], rows[B];
    unsigned seed = 41;
    for (int i = 0; i < L * NPMAX * S; i++)
        k[i] = 2.0f * ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f);
    for (int i = 0; i < L * NV * S; i++)
        v[i] = 2.0f * ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f);
    float out[3][NV * B], sums[3][B], att[3][L * B], scores[3][L * B];
    int used[3][B], checked = 0;
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++)
        for (int zeros = 0; zeros < 2; zeros++)
            for (int permuted = 0; permuted < 2; permuted++) {
                const int NP = counts[c];
                for (int p = 0; p < NP; p++) pq[p] = (p * 7) % NP, pk[p] = (p * 3) % NPMAX;
                for (int i = 0; i < NPMAX * B; i++)
                    q[i] = (float)rand_r(&seed) / (float)RAND_MAX - 0.5f;
                for (int p = 0; zeros && p < NP; p++)
                    if (NP > 16 ? p >= 16 : p == 1)
                        for (int i = 0; i < B; i++) q[pq[p] * B + i] = 0.0f;
                for (int i = 0; i < B; i++) {
                    seq[i] = i % S;
                    T[i] = 1 + (int)(rand_r(&seed) % L);
                    rows[i] = permuted ? (i * 5) % B : i;
                }
                // [0]: the naive loops; [1]: the generic path; [2]: each other one.
                for (int run = 0; run < 2 + TF_SIMD_COUNT - 1; run++) {
                    int x = run < 2 ? run : 2, simd = run < 2 ? TF_SIMD_GENERIC : run - 1;
                    if (!simd_supported((TfSimd)simd)) continue;
                    memset(att[x], 0, sizeof att[x]);
                    memset(scores[x], 0, sizeof scores[x]);
                    if (run == 0)
                        attention_block_forward_naive(out[0], B, sums[0], used[0], att[0],
                                                      scores[0], q, B, rows, pq, pk, NP, k, NPMAX,
                                                      v, NV, 0, NV, S, seq, T, B, 0.6f, 0, 0);
                    else
                        attention_block_forward_simd(out[x], B, sums[x], used[x], att[x],
                                                     scores[x], q, B, rows, pq, pk, NP, k, NPMAX,
                                                     v, NV, 0, NV, S, seq, T, B, 0.6f, 0, 0,
                                                     (TfSimd)simd);
                    if (run >= 2) {
                        ck_assert_msg(memcmp(out[1], out[2], sizeof out[1]) == 0 &&
                                          memcmp(att[1], att[2], sizeof att[1]) == 0 &&
                                          memcmp(sums[1], sums[2], sizeof sums[1]) == 0,
                                      "%s differs from generic (%d pairs)", tf_simd_names[simd],
                                      NP);
                        checked++;
                    }
                }
                char msg[256];
                int differ = tf_compare_floats(out[1], out[0], NV * B, 1e-5, 1e-6, msg, sizeof msg);
                ck_assert_msg(differ == 0, "%d pairs, zeros %d, permuted %d: %s", NP, zeros,
                              permuted, msg);
                for (int i = 0; i < B; i++) {
                    ck_assert_int_eq(used[1][i], used[0][i]);
                    for (int t = 0; t < T[i]; t++) {
                        ck_assert_msg(scores[1][t * B + i] == scores[0][t * B + i],
                                      "%d pairs, zeros %d: score %d of lane %d: %g, naive %g", NP,
                                      zeros, t, i, scores[1][t * B + i], scores[0][t * B + i]);
                        ck_assert_msg(fabsf(att[1][t * B + i] - att[0][t * B + i]) <= 1e-6f,
                                      "%d pairs, zeros %d lane %d position %d: %g, naive %g", NP,
                                      zeros, i, t, att[1][t * B + i], att[0][t * B + i]);
                    }
                }
            }
    (void)checked; /* 0 on a CPU with only the baseline's vectors */
    free(k), free(v), free(q);
}
END_TEST

START_TEST(test_attention_block_nan_score) {
    AttBlock *b = calloc(1, sizeof *b);
    AttResult *r = malloc(sizeof *r);
    unsigned seed = 9;
    att_block_layout(b, 1, &seed);
    b->k[((long)0 * AB_NK + 1) * AB_S + b->seq[3]] = NAN;
    for (int i = 0; i < AB_LANES; i++) b->q[4 * AB_LANES + i] = 1.0f;
    att_block_run(r, b, AB_LANES, 1.0f, 0, simd_best());
    ck_assert(isnan(r->sums[3]));
    ck_assert(!isnan(r->sums[2]));
    free(b), free(r);
}
END_TEST

START_TEST(test_attention_grouped_matches_naive) {
    // One sequence of 300 positions whose keys take 5 values (position 0,
    // the BOS, its own): attention_groups, then attention_grouped_forward,
    // against the row-by-row loops. The grouped sums add per group, then
    // over groups: a different order of the same T <= 300 terms, whose
    // weights sum to 1 and values lie in [-1, 1], so each output moves by at
    // most about 2 T 2^-24 (4e-5) plus the weights' 4 ulp; the softmax's sum
    // (one term is 1, none above) by 2 T 2^-24 relative.
    enum { L = 300, NP = 3, NV = 2, G = 5, W = TF_ATT_LANES };
    unsigned seed = 41;
    float *k = malloc(L * NP * sizeof(float)), *v = random_floats(&seed, L * NV, 2.0f);
    float cls_keys[G][NP];
    for (int g = 0; g < G; g++)
        for (int p = 0; p < NP; p++) cls_keys[g][p] = 3.0f * ((float)((double)rand_r(&seed) / RAND_MAX) - 0.5f);
    for (int t = 0; t < L; t++)
        memcpy(k + t * NP, cls_keys[t == 0 ? 0 : 1 + rand_r(&seed) % (G - 1)], sizeof cls_keys[0]);
    float keys[TF_ATT_GROUPS * NP], *counts = malloc(L * G * sizeof(float));
    float *vsums = malloc(L * G * NV * sizeof(float)), *att = malloc(L * W * sizeof(float));
    int cls[L], pq[NP] = {2, 0, 1}, pk[NP] = {0, 1, 2}, seq[W] = {0}, T[W], used[W], gused[W];
    ck_assert_int_eq(attention_groups(keys, counts, vsums, cls, k, v, L, NP, NV, TF_ATT_GROUPS), G);
    ck_assert_int_eq(attention_groups(keys, counts, vsums, cls, k, v, L, NP, NV, G - 1), 0);
    ck_assert_int_eq(attention_groups(keys, counts, vsums, cls, k, v, L, NP, NV, G), G);
    float q[3 * W], out[NV * W], gout[NV * W], sums[W], gsums[W];
    for (int trial = 0; trial < 2; trial++) {
        // Soft scores, then hard ones (scale 60: weights exactly 0 and 1).
        float scale = trial == 0 ? 0.8f : 60.0f;
        for (int i = 0; i < 3 * W; i++) q[i] = 2.0f * ((float)((double)rand_r(&seed) / RAND_MAX) - 0.5f);
        for (int i = 0; i < W; i++) T[i] = i == 0 ? 1 : i == 1 ? L : 1 + (int)(rand_r(&seed) % L);
        attention_block_forward_naive(out, W, sums, used, att, NULL, q, W, NULL, pq, pk, NP, k, NP,
                                      v, NV, 0, NV, 1, seq, T, W, scale, 0, 0);
        attention_grouped_forward(gout, W, gsums, gused, q, W, NULL, pq, NP, keys, G, counts, vsums,
                                  NV, T, W, scale, 0);
        char msg[256];
        ck_assert_msg(tf_compare_floats(gout, out, NV * W, 1e-5, 5e-5, msg, sizeof msg) == 0,
                      "scale %g: outputs: %s", scale, msg);
        ck_assert_msg(tf_compare_floats(gsums, sums, W, 5e-5, 0, msg, sizeof msg) == 0,
                      "scale %g: sums: %s", scale, msg);
        ck_assert_mem_eq(gused, used, sizeof used);
        // add: the same sums onto the columns' old values, bit for bit.
        float acc[NV * W], asums[W];
        int aused[W];
        for (int i = 0; i < NV * W; i++) acc[i] = (float)i - 7.5f;
        attention_grouped_forward(acc, W, asums, aused, q, W, NULL, pq, NP, keys, G, counts, vsums,
                                  NV, T, W, scale, 1);
        for (int i = 0; i < NV * W; i++) {
            float want = ((float)i - 7.5f) + gout[i];
            ck_assert_msg(memcmp(&acc[i], &want, sizeof want) == 0, "scale %g: added %d", scale, i);
        }
        ck_assert_mem_eq(asums, gsums, sizeof asums);
    }
    free(k), free(v), free(counts), free(vsums), free(att);
}
END_TEST

/* LayerNorm, the runtime's one (trainer and engine), against its double
 * twin: widths 1 to 70 (whole eight-lane blocks, tails, both), offsets up
 * to 1e3 over spreads down to 1e-2 (cancellation in the variance), and
 * the saved mean and 1/std. */
/* The engine's LayerNorm of a feature-major block (16 rows to a vector)
 * gives each row exactly layernorm_forward's bits: widths with and without
 * eight-lane tails, row counts below, at and past whole blocks of 16, a
 * leading dimension larger than the rows, large offsets. */
START_TEST(test_layernorm_fm_matches_rows) {
    unsigned seed = 11;
    static const int Cs[] = {1, 5, 8, 12, 32, 37}, ns[] = {1, 15, 16, 17, 40};
    for (int ci = 0; ci < 6; ci++)
        for (int ni = 0; ni < 5; ni++) {
            const int C = Cs[ci], n = ns[ni], ld = n + 3;
            float *x = random_floats(&seed, (size_t)C * ld, 3.0f);
            float *w = random_floats(&seed, (size_t)C, 2.0f), *b = random_floats(&seed, (size_t)C, 1.0f);
            float *y = calloc((size_t)C * ld, sizeof(float)), row[2 * 37], one[2 * 37];
            for (int i = 0; i < C * ld; i++) x[i] += (i % 3) * 100.0f;
            layernorm_forward_fm(y, x, ld, C, n, w, b, 1e-5f, row);
            for (int r = 0; r < ld; r++) {
                float mean, rstd;
                for (int c = 0; c < C; c++) one[c] = x[c * ld + r];
                layernorm_forward(one + C, &mean, &rstd, one, w, b, 1, C, 1e-5f);
                for (int c = 0; c < C; c++) {
                    float want = r < n ? one[C + c] : 0.0f; /* rows past n untouched */
                    ck_assert_msg(memcmp(&y[c * ld + r], &want, sizeof want) == 0,
                                  "C %d, n %d, row %d, column %d: %.9g against %.9g", C, n, r, c,
                                  y[c * ld + r], want);
                }
            }
            free(x), free(w), free(b), free(y);
        }
}
END_TEST

START_TEST(test_layernorm_matches_naive) {
    unsigned seed = 5;
    for (int C = 1; C <= 70; C += (C < 10 ? 1 : 7))
        for (int k = 0; k < 3; k++) {
            int N = 3;
            float off = k == 0 ? 0.0f : k == 1 ? 10.0f : 1000.0f, spread = k == 2 ? 0.01f : 2.0f;
            float *x = random_floats(&seed, (size_t)N * C, spread);
            float *w = random_floats(&seed, (size_t)C, 2.0f), *b = random_floats(&seed, (size_t)C, 1.0f);
            float *fast = malloc((size_t)N * C * sizeof(float)), *slow = malloc((size_t)N * C * sizeof(float));
            float mean[3], rstd[3];
            for (int i = 0; i < N * C; i++) x[i] += off;
            layernorm_forward(fast, mean, rstd, x, w, b, N, C, 1e-5f);
            layernorm_forward_naive(slow, x, w, b, N, C, 1e-5f);
            char msg[256];
            // Relative to the output's scale (|w| + |b| <= 2): float32 sums of
            // C values of up to 1e3 against double, so the error grows with off/spread.
            double tol = k == 2 ? 5e-2 : 1e-4;
            int bad = tf_compare_floats(fast, slow, (size_t)N * C, 0, tol, msg, sizeof msg);
            ck_assert_msg(bad == 0, "layernorm C=%d offset %g: %s", C, off, msg);
            for (int r = 0; r < N; r++) {
                double m = 0;
                for (int c = 0; c < C; c++) m += x[r * C + c];
                ck_assert_double_eq_tol(mean[r], m / C, 1e-6 * (1 + fabs(m / C)));
                ck_assert(rstd[r] > 0 && isfinite(rstd[r]));
            }
            free(x), free(w), free(b), free(fast), free(slow);
        }
}
END_TEST

/* softmax_forward (blocks of 16 lanes, the last padded) against
 * softmax_naive, for every length 1 to 40, with -inf entries; and
 * softmax_exp_rows (rows side by side in buffers of whole blocks, whose
 * padding holds anything) against softmax_exp row by row: the same bits,
 * and zeros in the padding. */
START_TEST(test_softmax_forward_matches_naive) {
    unsigned seed = 9;
    enum { NP = 48 };
    float rows[TF_SOFTMAX_ROWS * NP], sums[TF_SOFTMAX_ROWS], one[TF_SOFTMAX_ROWS][NP];
    int ns[TF_SOFTMAX_ROWS], k = 0;
    for (int n = 1; n <= 40; n++) {
        float *x = random_floats(&seed, (size_t)n, 20.0f), y[40];
        if (n > 2) x[n / 2] = -INFINITY;
        memcpy(y, x, (size_t)n * sizeof(float));
        // Row k of the next softmax_exp_rows call: x, then padding.
        for (int i = 0; i < NP; i++) rows[k * NP + i] = i < n ? x[i] : i % 2 ? 1e30f : NAN;
        ns[k] = n;
        memcpy(one[k], x, (size_t)n * sizeof(float));
        softmax_forward(x, n);
        softmax_naive(y, n);
        char msg[256];
        ck_assert_msg(tf_compare_floats(x, y, (size_t)n, 1e-6, 1e-6, msg, sizeof msg) == 0,
                      "softmax n=%d: %s", n, msg);
        if (n > 2) ck_assert_float_eq(x[n / 2], 0.0f);
        free(x);
        if (++k < TF_SOFTMAX_ROWS && n < 40) continue;
        softmax_exp_rows(rows, k, NP, ns, sums);
        for (int r = 0; r < k; r++) {
            float mx, sum = softmax_exp(one[r], ns[r], &mx);
            ck_assert_msg(memcmp(&sum, &sums[r], sizeof sum) == 0, "softmax_exp_rows n=%d: sum %g against %g",
                          ns[r], sums[r], sum);
            ck_assert_msg(memcmp(one[r], rows + r * NP, (size_t)ns[r] * sizeof(float)) == 0,
                          "softmax_exp_rows n=%d: the exponentials differ", ns[r]);
            for (int i = ns[r]; i < NP; i++)
                ck_assert_msg(rows[r * NP + i] == 0.0f, "softmax_exp_rows n=%d: padding %d is %g", ns[r], i,
                              rows[r * NP + i]);
        }
        k = 0;
    }
}
END_TEST

START_TEST(test_argmax_first_on_ties) {
    float x[] = {0, 2, 2, 1};
    ck_assert_int_eq(argmax(x, 4), 1);
    float z[] = {0, 0, 0};
    ck_assert_int_eq(argmax(z, 3), 0);
    float neg[] = {-3, -1, -2};
    ck_assert_int_eq(argmax(neg, 3), 1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("kernels");
    tcase_add_test(tc, test_matmul_matches_naive);
    tcase_add_test(tc, test_matmul_known_values);
    tcase_add_test(tc, test_gelu_exact_values);
    tcase_add_test(tc, test_gelu_sweep);
    tcase_add_test(tc, test_gelu_simd_paths_agree);
    tcase_add_test(tc, test_gelu_saturated_shortcut);
    tcase_add_test(tc, test_gelu_tanh_values);
    tcase_add_test(tc, test_gelu_tanh_sweep);
    tcase_add_test(tc, test_relu);
    tcase_add_test(tc, test_attention_matches_naive);
    tcase_add_test(tc, test_attention_huge_scores_select_one);
    tcase_add_test(tc, test_attention_block_matches_naive);
    tcase_add_test(tc, test_attention_block_simd_paths_agree);
    tcase_add_test(tc, test_attention_block_hard_exact);
    tcase_add_test(tc, test_attention_block_same_keys);
    tcase_add_test(tc, test_attention_block_adds);
    tcase_add_test(tc, test_attention_block_channel_counts);
    tcase_add_test(tc, test_attention_block_nan_score);
    tcase_add_test(tc, test_attention_grouped_matches_naive);
    tcase_add_test(tc, test_argmax_first_on_ties);
    tcase_add_test(tc, test_layernorm_matches_naive);
    tcase_add_test(tc, test_layernorm_fm_matches_rows);
    tcase_add_test(tc, test_softmax_forward_matches_naive);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
