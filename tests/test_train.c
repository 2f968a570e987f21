/* test_train.c: every backward kernel against finite differences, the
 * whole trainer's gradient against finite differences of its loss, the
 * optimizers, determinism, checkpoints and the data generators. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataparallel.h"
#include "dataset.h"
#include "kernels.h"
#include "nn.h"
#include "rng.h"
#include "testmodel.h"
#include "testutil.h"
#include "tfw.h"
#include "train.h"

/* ---- finite differences ------------------------------------------------------ */

/* A kernel under test: inputs x[0..n_in), loss(ctx) = sum w . out, and
 * grad(ctx) = the kernel's gradient (accumulated into zeroed buffers). */
typedef struct Case {
    double (*loss)(struct Case *c);
    void (*grad)(struct Case *c);
    float *in[6];
    float *gin[6];
    long n[6];
    int n_in;
    void *ctx;
} Case;

static void fill(float *x, long n, TfRng *r, float lo, float hi) {
    for (long i = 0; i < n; i++) x[i] = rng_uniform(r, lo, hi);
}

static double dot(const float *a, const float *b, long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* Central differences on every input element against the analytic gradient. */
static void check_case(Case *c, const char *what) {
    for (int k = 0; k < c->n_in; k++) memset(c->gin[k], 0, (size_t)c->n[k] * sizeof(float));
    c->grad(c);
    for (int k = 0; k < c->n_in; k++) {
        for (long i = 0; i < c->n[k]; i++) {
            float keep = c->in[k][i];
            const float eps = 1e-2f;
            c->in[k][i] = keep + eps;
            double lp = c->loss(c);
            c->in[k][i] = keep - eps;
            double lm = c->loss(c);
            c->in[k][i] = keep;
            double fd = (lp - lm) / (2.0 * eps), an = c->gin[k][i];
            double tol = 1e-2 * fmax(fabs(fd), fabs(an)) + 2e-3;
            ck_assert_msg(fabs(fd - an) <= tol, "%s: input %d element %ld: analytic %.6g, finite "
                                                "difference %.6g", what, k, i, an, fd);
        }
    }
}

/* matmul: out = x W^T + b */
enum { MN = 5, MC = 4, MOC = 3 };
static float mw_out[MN * MOC], mw_w[MN * MOC];

static double matmul_loss(Case *c) {
    matmul_forward_naive(mw_out, c->in[0], c->in[1], c->in[2], MN, MC, MOC, 0);
    return dot(mw_out, mw_w, MN * MOC);
}
static void matmul_grad(Case *c) {
    matmul_backward(c->gin[0], c->gin[1], c->gin[2], mw_w, c->in[0], c->in[1], MN, MC, MOC, 1);
}

START_TEST(test_matmul_backward) {
    TfRng r;
    rng_seed(&r, 1);
    float x[MN * MC], w[MOC * MC], b[MOC], gx[MN * MC], gw[MOC * MC], gb[MOC];
    fill(x, MN * MC, &r, -1, 1), fill(w, MOC * MC, &r, -1, 1), fill(b, MOC, &r, -1, 1);
    fill(mw_w, MN * MOC, &r, -1, 1);
    Case c = {matmul_loss, matmul_grad, {x, w, b}, {gx, gw, gb}, {MN * MC, MOC * MC, MOC}, 3, 0};
    check_case(&c, "matmul_backward");
}
END_TEST

/* matmul_backward against plain loops, 20 outputs wide (the bias sums' 16
 * at a time and the rest): dinp overwritten (its NaNs gone) or added to,
 * dweight and dbias added to. */
START_TEST(test_matmul_backward_wide) {
    enum { N = 7, C = 5, OC = 20 };
    TfRng r;
    rng_seed(&r, 3);
    float x[N * C], w[OC * C], dout[N * OC], dx[N * C], dw[OC * C], db[OC];
    fill(x, N * C, &r, -1, 1), fill(w, OC * C, &r, -1, 1), fill(dout, N * OC, &r, -1, 1);
    for (int accumulate = 0; accumulate < 2; accumulate++) {
        fill(dw, OC * C, &r, -1, 1), fill(db, OC, &r, -1, 1);
        for (int i = 0; i < N * C; i++) dx[i] = accumulate ? 0.5f : NAN;
        float dw0[OC * C], db0[OC];
        memcpy(dw0, dw, sizeof dw), memcpy(db0, db, sizeof db);
        matmul_backward(dx, dw, db, dout, x, w, N, C, OC, accumulate);
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++) {
                double e = accumulate ? 0.5 : 0.0;
                for (int o = 0; o < OC; o++) e += (double)dout[n * OC + o] * w[o * C + c];
                ck_assert_msg(fabs(dx[n * C + c] - e) <= 1e-5, "dinp[%d,%d] %g, expected %g", n, c,
                              dx[n * C + c], e);
            }
        for (int o = 0; o < OC; o++) {
            double eb = db0[o];
            for (int n = 0; n < N; n++) eb += dout[n * OC + o];
            ck_assert_msg(fabs(db[o] - eb) <= 1e-5, "dbias[%d] %g, expected %g", o, db[o], eb);
            for (int c = 0; c < C; c++) {
                double ew = dw0[o * C + c];
                for (int n = 0; n < N; n++) ew += (double)dout[n * OC + o] * x[n * C + c];
                ck_assert_msg(fabs(dw[o * C + c] - ew) <= 1e-5, "dweight[%d,%d]", o, c);
            }
        }
    }
}
END_TEST

/* layernorm */
enum { LN = 3, LC = 6 };
static float ln_out[LN * LC], ln_w[LN * LC], ln_mean[LN], ln_rstd[LN];

static double layernorm_loss(Case *c) {
    layernorm_forward(ln_out, ln_mean, ln_rstd, c->in[0], c->in[1], c->in[2], LN, LC, 1e-5f);
    return dot(ln_out, ln_w, LN * LC);
}
static void layernorm_grad(Case *c) {
    layernorm_forward(ln_out, ln_mean, ln_rstd, c->in[0], c->in[1], c->in[2], LN, LC, 1e-5f);
    nn_layernorm_backward(c->gin[0], c->gin[1], c->gin[2], ln_w, c->in[0], c->in[1], ln_mean,
                       ln_rstd, LN, LC);
}

START_TEST(test_layernorm_backward) {
    TfRng r;
    rng_seed(&r, 2);
    float x[LN * LC], w[LC], b[LC], gx[LN * LC], gw[LC], gb[LC];
    fill(x, LN * LC, &r, -2, 2), fill(w, LC, &r, 0.5f, 1.5f), fill(b, LC, &r, -1, 1);
    fill(ln_w, LN * LC, &r, -1, 1);
    Case c = {layernorm_loss, layernorm_grad, {x, w, b}, {gx, gw, gb}, {LN * LC, LC, LC}, 3, 0};
    check_case(&c, "nn_layernorm_backward");
    // Known values: a row normalised to mean 0, variance 1.
    float row[4] = {1, 2, 3, 4}, one[4] = {1, 1, 1, 1}, zero4[4] = {0}, out[4], mean, rstd;
    layernorm_forward(out, &mean, &rstd, row, one, zero4, 1, 4, 0.0f);
    ck_assert_float_eq_tol(mean, 2.5f, 1e-6f);
    ck_assert_float_eq_tol(out[0], -1.3416408f, 1e-5f);
    ck_assert_float_eq_tol(out[3], 1.3416408f, 1e-5f);
}
END_TEST

/* activations */
enum { AN = 16 };
static float act_w[AN], act_out[AN];
static int act_gelu; /* 1: exact GELU, 2: tanh GELU, 0: ReLU */

static double act_loss(Case *c) {
    memcpy(act_out, c->in[0], sizeof act_out);
    if (act_gelu == 1) gelu_forward(act_out, AN);
    else if (act_gelu == 2) gelu_tanh_forward(act_out, AN);
    else relu_forward(act_out, AN);
    return dot(act_out, act_w, AN);
}
static void act_grad(Case *c) {
    if (act_gelu == 1) gelu_backward(c->gin[0], c->in[0], act_w, AN);
    else if (act_gelu == 2) gelu_tanh_backward(c->gin[0], c->in[0], act_w, AN);
    else relu_backward(c->gin[0], c->in[0], act_w, AN);
}

START_TEST(test_activation_backward) {
    TfRng r;
    rng_seed(&r, 3);
    float x[AN], gx[AN];
    fill(x, AN, &r, -3, 3);
    for (int i = 0; i < AN; i++)
        if (fabsf(x[i]) < 0.05f) x[i] = 0.5f; /* ReLU has no derivative at 0 */
    fill(act_w, AN, &r, -1, 1);
    Case c = {act_loss, act_grad, {x}, {gx}, {AN}, 1, 0};
    act_gelu = 1;
    check_case(&c, "gelu_backward");
    act_gelu = 2;
    check_case(&c, "gelu_tanh_backward");
    act_gelu = 0;
    check_case(&c, "relu_backward");
}
END_TEST

/* attention, with an extra loss on the scores */
enum { AT = 4, AH = 2, AD = 3, ADV = 2 };
static float at_out[AT * AH * ADV], at_pre[AH * AT * AT], at_att[AH * AT * AT];
static float at_w[AT * AH * ADV], at_wpre[AH * AT * AT], at_scratch[4096]; /* >= nn_attention_scratch_floats: asserted */
static int at_causal, at_group; /* at_group: through the group kernels, a group of one */

/* The finite-difference check of an attention case, through the group
 * kernels (a group of one) and the one-sequence kernels, causal or not. */
static void check_attention_case(Case *c, const char *what) {
    for (at_group = 1; at_group >= 0; at_group--)
        for (at_causal = 0; at_causal < 2; at_causal++) {
            char name[80];
            snprintf(name, sizeof name, "nn_attention_%s%s%s", at_group ? "group_" : "", what,
                     at_causal ? " (causal)" : "");
            check_case(c, name);
        }
}

static double attention_loss(Case *c) {
    NnGroup g = {.G = 1};
    if (at_group)
        nn_attention_group_forward(at_out, at_pre, at_att, at_scratch, c->in[0], c->in[1], c->in[2],
                                   &g, NULL, AT, AT, AH, AD, ADV, 0.7f, at_causal, 1);
    else
        nn_attention_forward(at_out, at_pre, at_att, at_scratch, c->in[0], c->in[1], c->in[2], AT,
                             AH, AD, ADV, 0.7f, at_causal);
    return dot(at_out, at_w, AT * AH * ADV) + dot(at_pre, at_wpre, AH * AT * AT);
}
static void attention_grad(Case *c) {
    attention_loss(c);
    NnGroup g = {.G = 1, .extra = at_wpre};
    if (at_group)
        nn_attention_group_backward(c->gin[0], c->gin[1], c->gin[2], at_scratch, at_w, c->in[0],
                                    c->in[1], c->in[2], at_att, &g, NULL, AT, AT, AH, AD, ADV, 0.7f,
                                    at_causal);
    else
        nn_attention_backward(c->gin[0], c->gin[1], c->gin[2], at_scratch, at_w, at_wpre, c->in[0],
                              c->in[1], c->in[2], at_att, AT, AH, AD, ADV, 0.7f, at_causal);
}

START_TEST(test_attention_backward) {
    ck_assert(nn_attention_scratch_floats(AT, AD, ADV) <= sizeof at_scratch / sizeof *at_scratch);
    ck_assert(nn_attention_group_scratch_floats(AT, AH, AD, ADV) <= sizeof at_scratch / sizeof *at_scratch);
    TfRng r;
    rng_seed(&r, 4);
    float q[AT * AH * AD], k[AT * AH * AD], v[AT * AH * ADV];
    float gq[AT * AH * AD], gk[AT * AH * AD], gv[AT * AH * ADV];
    fill(q, AT * AH * AD, &r, -1, 1), fill(k, AT * AH * AD, &r, -1, 1);
    fill(v, AT * AH * ADV, &r, -1, 1), fill(at_w, AT * AH * ADV, &r, -1, 1);
    fill(at_wpre, AH * AT * AT, &r, -0.5f, 0.5f);
    Case c = {attention_loss, attention_grad, {q, k, v}, {gq, gk, gv},
              {AT * AH * AD, AT * AH * AD, AT * AH * ADV}, 3, 0};
    check_attention_case(&c, "backward");
    for (at_causal = 0; at_causal < 2; at_causal++) {
        // The fast forward against its naive twin.
        attention_loss(&c);
        float out2[AT * AH * ADV], pre2[AH * AT * AT], att2[AH * AT * AT];
        nn_attention_forward_naive(out2, pre2, att2, q, k, v, AT, AH, AD, ADV, 0.7f, at_causal);
        char msg[256];
        ck_assert_msg(tf_compare_floats(at_out, out2, AT * AH * ADV, 1e-5, 1e-6, msg, sizeof msg) == 0, "%s", msg);
        ck_assert_msg(tf_compare_floats(at_att, att2, AH * AT * AT, 1e-5, 1e-6, msg, sizeof msg) == 0, "%s", msg);
    }
    ck_assert_float_eq(at_att[1], 0.0f); /* causal: row 0 sees only position 0 */
}
END_TEST

/* attention for selected rows (rows 1 and 3 of the sequence) */
static const int ar_pos[2] = {1, 3};
static float ar_out[2 * AH * ADV], ar_pre[2 * AH * AT], ar_att[2 * AH * AT], ar_w[2 * AH * ADV];

static double attention_rows_loss(Case *c) {
    NnGroup g = {.G = 1};
    if (at_group)
        nn_attention_group_forward(ar_out, ar_pre, ar_att, at_scratch, c->in[0], c->in[1], c->in[2],
                                   &g, ar_pos, 2, AT, AH, AD, ADV, 0.7f, at_causal, 0);
    else
        nn_attention_rows_forward(ar_out, ar_pre, ar_att, at_scratch, c->in[0], c->in[1], c->in[2],
                                  ar_pos, 2, AT, AH, AD, ADV, 0.7f, at_causal);
    return dot(ar_out, ar_w, 2 * AH * ADV);
}
static void attention_rows_grad(Case *c) {
    attention_rows_loss(c);
    NnGroup g = {.G = 1};
    if (at_group)
        nn_attention_group_backward(c->gin[0], c->gin[1], c->gin[2], at_scratch, ar_w, c->in[0],
                                    c->in[1], c->in[2], ar_att, &g, ar_pos, 2, AT, AH, AD, ADV, 0.7f,
                                    at_causal);
    else
        nn_attention_rows_backward(c->gin[0], c->gin[1], c->gin[2], at_scratch, ar_w, c->in[0],
                                   c->in[1], c->in[2], ar_att, ar_pos, 2, AT, AH, AD, ADV, 0.7f,
                                   at_causal);
}

START_TEST(test_attention_rows_backward) {
    ck_assert(nn_attention_scratch_floats(AT, AD, ADV) <= sizeof at_scratch / sizeof *at_scratch);
    ck_assert(nn_attention_group_scratch_floats(AT, AH, AD, ADV) <= sizeof at_scratch / sizeof *at_scratch);
    TfRng r;
    rng_seed(&r, 6);
    float q[AT * AH * AD], k[AT * AH * AD], v[AT * AH * ADV], qr[2 * AH * AD];
    float gq[2 * AH * AD], gk[AT * AH * AD], gv[AT * AH * ADV];
    fill(q, AT * AH * AD, &r, -1, 1), fill(k, AT * AH * AD, &r, -1, 1);
    fill(v, AT * AH * ADV, &r, -1, 1), fill(ar_w, 2 * AH * ADV, &r, -1, 1);
    for (int i = 0; i < 2; i++) memcpy(qr + i * AH * AD, q + ar_pos[i] * AH * AD, AH * AD * sizeof(float));
    Case c = {attention_rows_loss, attention_rows_grad, {qr, k, v}, {gq, gk, gv},
              {2 * AH * AD, AT * AH * AD, AT * AH * ADV}, 3, 0};
    check_attention_case(&c, "rows_backward");
    for (at_causal = 0; at_causal < 2; at_causal++) {
        // The selected rows equal those rows of the whole sequence's attention.
        attention_rows_loss(&c);
        nn_attention_forward_naive(at_out, at_pre, at_att, q, k, v, AT, AH, AD, ADV, 0.7f, at_causal);
        for (int i = 0; i < 2; i++)
            for (int h = 0; h < AH; h++) {
                char msg[256];
                const float *want = at_out + ar_pos[i] * AH * ADV + h * ADV;
                ck_assert_msg(tf_compare_floats(ar_out + i * AH * ADV + h * ADV, want, ADV, 1e-5,
                                                1e-6, msg, sizeof msg) == 0, "%s", msg);
                ck_assert_msg(tf_compare_floats(ar_att + (i * AH + h) * AT,
                                                at_att + (h * AT + ar_pos[i]) * AT, AT, 1e-5, 1e-6,
                                                msg, sizeof msg) == 0, "%s", msg);
            }
    }
}
END_TEST

/* embeddings and cross-entropy */
enum { EN = 5, EC = 3, EV = 4 };
static const int e_tok[EN] = {0, 3, 1, 3, 2}, e_pos[EN] = {0, 1, 2, 0, 1};
static float e_out[EN * EC], e_w[EN * EC], ce_probs[EN * EV];
static const int ce_tgt[EN] = {1, 0, 3, 3, 2};

static double embed_loss(Case *c) {
    embedding_forward(e_out, e_tok, e_pos, c->in[0], c->in[1], EN, EC);
    return dot(e_out, e_w, EN * EC);
}
static void embed_grad(Case *c) {
    embedding_backward(c->gin[0], c->gin[1], e_w, e_tok, e_pos, EN, EC);
}
static double ce_loss(Case *c) { return nn_crossentropy_forward(ce_probs, c->in[0], ce_tgt, EN, EV); }
static void ce_grad(Case *c) {
    nn_crossentropy_forward(ce_probs, c->in[0], ce_tgt, EN, EV);
    nn_crossentropy_backward(c->gin[0], ce_probs, ce_tgt, EN, EV, 1.0f);
}

START_TEST(test_embedding_and_crossentropy_backward) {
    TfRng r;
    rng_seed(&r, 5);
    float wte[EV * EC], wpe[3 * EC], gte[EV * EC], gpe[3 * EC];
    fill(wte, EV * EC, &r, -1, 1), fill(wpe, 3 * EC, &r, -1, 1), fill(e_w, EN * EC, &r, -1, 1);
    Case c = {embed_loss, embed_grad, {wte, wpe}, {gte, gpe}, {EV * EC, 3 * EC}, 2, 0};
    check_case(&c, "embedding_backward");
    float logits[EN * EV], gl[EN * EV];
    fill(logits, EN * EV, &r, -2, 2);
    Case d = {ce_loss, ce_grad, {logits}, {gl}, {EN * EV}, 1, 0};
    check_case(&d, "nn_crossentropy_backward");
    // Uniform logits: the loss is log V per row.
    float flat[EV] = {0};
    int t0 = 2;
    ck_assert_double_eq_tol(nn_crossentropy_forward(ce_probs, flat, &t0, 1, EV), log(EV), 1e-6);
    // Huge logits stay finite (log-sum-exp).
    float big[2] = {1000.0f, -1000.0f};
    int t1 = 1;
    ck_assert_double_eq_tol(nn_crossentropy_forward(ce_probs, big, &t1, 1, 2), 2000.0, 1e-3);
}
END_TEST

/* ---- the whole model --------------------------------------------------------- */

static const char *const model_texts[] = {
    /* post-norm, ReLU, learned positions, next-token */
    "vocab \"01+=\";\n generate 3;\n model { d_model 8; layers 2; heads 2; d_ff 12; activation "
    "gelu; norm post; positions learned; max_len 12; predict next_token; seed 3; }\n",
    /* pre-norm, GELU, sinusoidal positions, classifier at the last position */
    "vocab \"#0123\";\n model { d_model 6; layers 1; heads 3; d_ff 10; activation gelu; norm pre; "
    "positions sinusoidal; max_len 8; attention bidirectional; predict classes \"a\", \"b\", "
    "\"c\"; classify_at last; seed 4; }\n",
    /* no norm, no feed-forward, no positions, classifier at CLS */
    "vocab \"#0123\";\n model { d_model 4; layers 1; heads 2; d_ff 0; norm none; positions none; "
    "max_len 8; attention bidirectional; predict classes \"x\", \"y\"; seed 5; }\n",
    /* every position, bidirectional, two layers (with attention-pattern targets) */
    "vocab \"^01\";\n bos '^';\n model { d_model 8; layers 2; heads 2; d_ff 8; norm pre; "
    "positions learned; max_len 8; attention bidirectional; predict every_position; seed 6; }\n",
};

/* A batch of three sequences of lengths 5, 3, 6 over the first vocab tokens. */
static void small_batch(const TfModel *m, TfBatch *b, int *tok, int *start, int *tgt, int *lab) {
    static const int lens[3] = {5, 3, 6};
    int row = 0;
    TfRng r;
    rng_seed(&r, 9);
    for (int s = 0; s < 3; s++) {
        start[s] = row;
        for (int i = 0; i < lens[s]; i++, row++) {
            tok[row] = (int)rng_below(&r, (uint64_t)m->n_vocab);
            tgt[row] = i >= 1 ? (int)rng_below(&r, (uint64_t)m->n_vocab) : -1;
        }
        lab[s] = m->output_kind == TF_OUTPUT_CLASSIFY ? (int)rng_below(&r, (uint64_t)m->n_classes) : 0;
    }
    start[3] = row;
    *b = (TfBatch){3, tok, start, tgt, lab, NULL, 0, 0, 0, 0};
}

static TfTrainOptions default_opts(TfOptimizer opt) {
    TfTrainOptions o = {opt, 0.9f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.0f, 0.0f, 1, 7, 1, NULL};
    return o;
}

START_TEST(test_model_gradient) {
    const char *text = model_texts[_i];
    TfModel *m = tf_compile_text(text);
    TfTrainOptions o = default_opts(TF_OPT_ADAMW);
    o.train_positions = _i == 0;
    TfError err = {""};
    TfTrainer *t = trainer_new(m, &o, 64, 8, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    int tok[14], start[4], tgt[14], lab[3];
    TfBatch b;
    small_batch(m, &b, tok, start, tgt, lab);
    float target[25];
    TfRng r;
    rng_seed(&r, 11);
    fill(target, 25, &r, 0, 1);
    TfAttnTarget at = {0, 0, 1, target, 0.5f, TF_ATTN_SCORES};
    if (_i == 2) { /* the attention-score loss, on sequence 0 (5 long) */
        b.attn = &at;
        b.n_attn = 1;
    }
    // The attention-pattern loss (distillation): rows that are
    // distributions, on sequences 0 and 2 (5 and 6 long), two layers.
    float pat0[25], pat2[36];
    TfAttnTarget pats[3] = {{0, 1, 0, pat0, 0.7f, TF_ATTN_PATTERN},
                            {2, 0, 1, pat2, 0.7f, TF_ATTN_PATTERN},
                            {2, 1, 1, pat2, 1.3f, TF_ATTN_PATTERN}};
    for (int k = 0; k < 2; k++) {
        int T = k ? 6 : 5;
        float *pt = k ? pat2 : pat0;
        fill(pt, T * T, &r, 0, 1);
        for (int i = 0; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) sum += pt[i * T + j] = pt[i * T + j] * pt[i * T + j];
            for (int j = 0; j < T; j++) pt[i * T + j] = (float)(pt[i * T + j] / sum);
        }
    }
    if (_i == 3) {
        b.attn = pats;
        b.n_attn = 3;
    }
    ck_assert_msg(trainer_check_batch(t, &b, &err) == 0, "%s", err.msg);
    double loss = trainer_forward_backward(t, &b, 0, NULL);
    ck_assert(isfinite(loss) && loss > 0);
    size_t n;
    float *g0 = trainer_grads(t, &n);
    float *g = malloc(n * sizeof *g);
    memcpy(g, g0, n * sizeof *g);
    // A fixed position table is skipped: no gradient is wanted there.
    size_t pos_lo = trainer_tensor_offset(t, m->pos_embed);
    size_t pos_hi = o.train_positions ? pos_lo : pos_lo + m->tensors[m->pos_embed].nelem;
    char what[32];
    snprintf(what, sizeof what, "model %d", _i);
    int checked = tf_check_gradients(t, &b, m, g, 1 + n / 300, pos_lo, pos_hi, what, NULL);
    ck_assert_int_gt(checked, 50);
    // A fixed position table gets no gradient.
    if (!o.train_positions) {
        size_t off = trainer_tensor_offset(t, m->pos_embed);
        for (size_t i = 0; i < m->tensors[m->pos_embed].nelem; i++) ck_assert(g[off + i] == 0.0f);
    }
    free(g);
    trainer_free(t);
    model_free(m);
}
END_TEST

/* Trains a model to memorise a few sequences; returns the final loss. */
static double train_small(TfOptimizer opt, float lr, int steps, float *params_out) {
    TfModel *m = tf_compile_text(model_texts[0]);
    TfTrainOptions o = default_opts(opt);
    o.dropout = 0.1f;
    o.clip = 1.0f;
    TfError err = {""};
    TfTrainer *t = trainer_new(m, &o, 64, 8, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    int tok[14], start[4], tgt[14], lab[3];
    TfBatch b;
    small_batch(m, &b, tok, start, tgt, lab);
    double loss = 0;
    for (int s = 0; s < steps; s++) {
        trainer_forward_backward(t, &b, s, NULL);
        trainer_step(t, train_lr_at(s, steps, lr, 5, 1, 0.0f));
    }
    int correct;
    loss = trainer_evaluate(t, &b, &correct);
    size_t n;
    float *p = trainer_params(t, &n);
    if (params_out) memcpy(params_out, p, n * sizeof *p);
    trainer_free(t);
    model_free(m);
    return loss;
}

/* 20 steps on 256 copies of the small batch (768 sequences: enough work for
 * the trainer to split its attention over threads) with `threads` threads. */
static void train_threads(int threads, float *params_out, size_t *n_out) {
    enum { COPIES = 256 };
    TfModel *m = tf_compile_text(model_texts[0]);
    TfTrainOptions o = default_opts(TF_OPT_ADAMW);
    o.threads = threads;
    TfError err = {""};
    TfTrainer *t = trainer_new(m, &o, 14 * COPIES, 3 * COPIES, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    int tok[14], start[4], tgt[14], lab[3];
    TfBatch one;
    small_batch(m, &one, tok, start, tgt, lab);
    static int btok[14 * COPIES], bstart[3 * COPIES + 1], btgt[14 * COPIES], blab[3 * COPIES];
    for (int c = 0; c < COPIES; c++) {
        for (int i = 0; i < 14; i++) {
            btok[c * 14 + i] = tok[i];
            btgt[c * 14 + i] = tgt[i];
        }
        for (int s = 0; s < 3; s++) {
            bstart[c * 3 + s] = c * 14 + start[s];
            blab[c * 3 + s] = lab[s];
        }
    }
    bstart[3 * COPIES] = 14 * COPIES;
    TfBatch b = {3 * COPIES, btok, bstart, one.targets ? btgt : NULL, one.labels ? blab : NULL,
                 NULL, 0, 0, 0, 0};
    for (int s = 0; s < 20; s++) {
        trainer_forward_backward(t, &b, s, NULL);
        trainer_step(t, 1e-2f);
    }
    float *p = trainer_params(t, n_out);
    memcpy(params_out, p, *n_out * sizeof *p);
    trainer_free(t);
    model_free(m);
}

START_TEST(test_threads_do_not_change_the_result) {
    static float one[4096], two[4096], three[4096];
    // (attn_threads in runtime/train/train.c uses one thread below about 200,000
    // multiply-adds per attention layer; this batch has more.)
    size_t n1, n2, n3;
    train_threads(1, one, &n1);
    train_threads(2, two, &n2);
    train_threads(3, three, &n3);
    ck_assert(n1 <= 4096 && n1 == n2 && n1 == n3);
    ck_assert(memcmp(one, two, n1 * sizeof(float)) == 0); /* bit for bit */
    ck_assert(memcmp(one, three, n1 * sizeof(float)) == 0);
}
END_TEST

/* Data parallelism (runtime/train/dataparallel.h) on `threads` workers: 8 steps of
 * batches of 100 examples (chunks of 16, the last of 4); the parameters, and
 * in *grad0 the first step's gradient. */
static void train_chunks(int threads, float *params_out, float *grad0, size_t *n_out,
                         double *loss0) {
    TfModel *m = tf_compile_text(model_texts[0]); /* vocab 01+=, max_len 12 */
    TfDataset tr = {0}, ho = {0};
    TfError err = {""};
    ck_assert_msg(dataset_generate(&tr, &ho, m, "binary-add:3", 60, 4, 1, &err) == 0, "%s", err.msg);
    TfTrainOptions o = default_opts(TF_OPT_ADAMW);
    o.threads = threads;
    TfTrainer *t = trainer_new(m, &o, 100 * 12, 100, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    TfDataParallel *dp = dp_new(t, threads, 100, 12, NULL, &err);
    ck_assert_msg(dp != NULL, "%s", err.msg);
    int idx[100];
    for (int s = 0; s < 8; s++) {
        for (int i = 0; i < 100; i++) idx[i] = (i * 7 + s * 13) % tr.n;
        double loss = dp_forward_backward(dp, &tr, idx, 100, s);
        if (s == 0) {
            size_t n;
            const float *g = trainer_grads(t, &n);
            memcpy(grad0, g, n * sizeof(float));
            *loss0 = loss;
        }
        trainer_step(t, 1e-2f);
    }
    float *p = trainer_params(t, n_out);
    memcpy(params_out, p, *n_out * sizeof *p);
    dp_free(dp);
    trainer_free(t);
    dataset_free(&tr);
    dataset_free(&ho);
    model_free(m);
}

START_TEST(test_data_parallel) {
    static float p1[4096], p2[4096], p3[4096], g1[4096], g2[4096], g3[4096], whole[4096];
    size_t n1, n2, n3;
    double l1, l2, l3;
    train_chunks(1, p1, g1, &n1, &l1);
    train_chunks(2, p2, g2, &n2, &l2);
    train_chunks(3, p3, g3, &n3, &l3);
    ck_assert(n1 <= 4096 && n1 == n2 && n1 == n3);
    ck_assert(memcmp(p1, p2, n1 * sizeof(float)) == 0); /* bit for bit */
    ck_assert(memcmp(p1, p3, n1 * sizeof(float)) == 0);
    ck_assert(memcmp(g1, g3, n1 * sizeof(float)) == 0 && l1 == l2 && l1 == l3);
    // The chunks' gradients add up to the whole batch's (to rounding).
    TfModel *m = tf_compile_text(model_texts[0]);
    TfDataset tr = {0}, ho = {0};
    TfError err = {""};
    ck_assert(dataset_generate(&tr, &ho, m, "binary-add:3", 60, 4, 1, &err) == 0);
    TfTrainOptions o = default_opts(TF_OPT_ADAMW);
    TfTrainer *t = trainer_new(m, &o, 100 * 12, 100, &err);
    TfBatchBuf bb = {0};
    ck_assert(t && batchbuf_init(&bb, 100, 12) == 0);
    int idx[100];
    for (int i = 0; i < 100; i++) idx[i] = (i * 7) % tr.n;
    batchbuf_fill(&bb, &tr, idx, 100);
    double loss = trainer_forward_backward(t, &bb.batch, 0, NULL);
    size_t n;
    const float *g = trainer_grads(t, &n);
    memcpy(whole, g, n * sizeof(float));
    ck_assert(n == n1);
    ck_assert_double_eq_tol(loss, l1, 1e-5 * fabs(loss));
    char msg[256];
    ck_assert_msg(tf_compare_floats(g1, whole, (long)n, 1e-4, 1e-6, msg, sizeof msg) == 0, "%s", msg);
    batchbuf_free(&bb);
    trainer_free(t);
    dataset_free(&tr);
    dataset_free(&ho);
    model_free(m);
}
END_TEST

START_TEST(test_optimizers_learn_and_are_deterministic) {
    double before = train_small(TF_OPT_ADAMW, 0.0f, 1, NULL);
    ck_assert_double_lt(train_small(TF_OPT_ADAMW, 1e-2f, 150, NULL), before * 0.2);
    ck_assert_double_lt(train_small(TF_OPT_ADAM, 1e-2f, 150, NULL), before * 0.2);
    ck_assert_double_lt(train_small(TF_OPT_SGD, 5e-2f, 150, NULL), before * 0.5);
    float a[4096], b[4096];
    train_small(TF_OPT_ADAMW, 1e-2f, 20, a);
    train_small(TF_OPT_ADAMW, 1e-2f, 20, b);
    TfModel *m = tf_compile_text(model_texts[0]);
    size_t n = model_param_count(m);
    model_free(m);
    ck_assert(n <= 4096);
    ck_assert(memcmp(a, b, n * sizeof(float)) == 0); /* bit for bit */
}
END_TEST

/* One Adam and one AdamW step against the formulas, with weight decay: Adam
 * adds it to the gradient, AdamW decays the parameter (trainer_step runs
 * both through one loop without branches). */
START_TEST(test_adam_weight_decay_step) {
    for (int opt = 0; opt < 2; opt++) {
        TfModel *m = tf_compile_text(model_texts[0]);
        TfTrainOptions o = default_opts(opt ? TF_OPT_ADAMW : TF_OPT_ADAM);
        o.weight_decay = 0.1f;
        o.train_positions = 1;
        TfError err = {""};
        TfTrainer *t = trainer_new(m, &o, 64, 8, &err);
        ck_assert_msg(t != NULL, "%s", err.msg);
        size_t n, ng;
        float *p = trainer_params(t, &n), *g = trainer_grads(t, &ng);
        ck_assert(n == ng && n > 0);
        float *p0 = malloc(n * sizeof *p0);
        ck_assert(p0 != NULL);
        for (size_t j = 0; j < n; j++) g[j] = (float)((long)(j % 7) - 3) * 0.25f;
        memcpy(p0, p, n * sizeof *p0);
        const float lr = 0.01f;
        ck_assert(isfinite(trainer_step(t, lr)));
        for (size_t j = 0; j < n; j++) {
            // First step: m = (1 - b1) g', v = (1 - b2) g'^2, both bias-corrected.
            double gj = g[j] + (opt ? 0.0 : 0.1 * p0[j]), keep = opt ? 1.0 - lr * 0.1 : 1.0;
            double mo = (1 - 0.9) * gj, ve = (1 - 0.999) * gj * gj;
            double e = p0[j] * keep - lr / (1 - 0.9) * mo / (sqrt(ve) / sqrt(1 - 0.999) + 1e-8);
            ck_assert_msg(fabs(p[j] - e) <= 1e-6 + 1e-5 * fabs(e), "%s, parameter %zu: %.9g, expected %.9g",
                          opt ? "AdamW" : "Adam", j, p[j], e);
        }
        free(p0);
        trainer_free(t);
        model_free(m);
    }
}
END_TEST

START_TEST(test_checkpoint_resume) {
    // 10 steps straight == 5 steps, save, load, 5 more steps.
    TfModel *m = tf_compile_text(model_texts[0]);
    TfTrainOptions o = default_opts(TF_OPT_ADAMW);
    TfError err = {""};
    TfTrainer *t = trainer_new(m, &o, 64, 8, &err);
    int tok[14], start[4], tgt[14], lab[3];
    TfBatch b;
    small_batch(m, &b, tok, start, tgt, lab);
    char path[] = "/tmp/tftrain_ckpt_XXXXXX";
    close(mkstemp(path));
    for (int s = 0; s < 10; s++) {
        trainer_forward_backward(t, &b, s, NULL);
        trainer_step(t, 1e-2f);
        if (s == 4) ck_assert_msg(trainer_save_checkpoint(t, path, &err) == 0, "%s", err.msg);
    }
    TfModel *m2 = tfw_read(path, &err);
    ck_assert_msg(m2 != NULL, "%s", err.msg);
    ck_assert_int_ge(model_find_tensor(m2, "optim.v.embed.token.weight"), 0);
    // The model alone: every tensor of the model, none of the optimizer's.
    ck_assert_msg(trainer_save(t, path, &err) == 0, "%s", err.msg);
    TfModel *alone = tfw_read(path, &err);
    ck_assert_msg(alone != NULL, "%s", err.msg);
    ck_assert_int_eq(alone->n_tensors, model_find_tensor(m, "optim.m.embed.token.weight"));
    for (int i = 0; i < alone->n_tensors; i++)
        ck_assert_msg(strncmp(alone->tensors[i].name, "optim.", 6) != 0, "%s", alone->tensors[i].name);
    TfTrainer *ta = trainer_new(alone, &o, 64, 8, &err);
    ck_assert_int_eq(trainer_load_state(ta, &err), 0); /* no state to load */
    trainer_free(ta);
    model_free(alone);
    TfTrainer *t2 = trainer_new(m2, &o, 64, 8, &err);
    ck_assert_int_eq(trainer_load_state(t2, &err), 1);
    ck_assert_int_eq(trainer_steps_done(t2), 5);
    for (int s = 5; s < 10; s++) {
        trainer_forward_backward(t2, &b, s, NULL);
        trainer_step(t2, 1e-2f);
    }
    size_t n, n2;
    float *p = trainer_params(t, &n), *p2 = trainer_params(t2, &n2);
    ck_assert_int_eq(n, n2);
    ck_assert(memcmp(p, p2, n * sizeof(float)) == 0);
    // SGD cannot resume Adam's state.
    TfTrainOptions s = default_opts(TF_OPT_SGD);
    TfTrainer *t3 = trainer_new(m2, &s, 64, 8, &err);
    ck_assert_int_eq(trainer_load_state(t3, &err), 1); /* SGD needs only optim.m */
    trainer_free(t3);
    remove(path);
    trainer_free(t2);
    trainer_free(t);
    model_free(m2);
    model_free(m);
}
END_TEST

START_TEST(test_bad_batches_are_rejected) {
    TfModel *m = tf_compile_text(model_texts[0]);
    TfTrainOptions o = default_opts(TF_OPT_ADAM);
    TfError err = {""};
    TfTrainer *t = trainer_new(m, &o, 16, 2, &err);
    int tok[14], start[4], tgt[14], lab[3];
    TfBatch b;
    small_batch(m, &b, tok, start, tgt, lab);
    ck_assert_int_eq(trainer_check_batch(t, &b, &err), -1);
    ck_assert_str_eq(err.msg, "a batch of 3 sequences (1 to 2 allowed)");
    b.n_seqs = 2;
    tok[1] = 7;
    ck_assert_int_eq(trainer_check_batch(t, &b, &err), -1);
    ck_assert_str_eq(err.msg, "row 1: token 7 is outside the vocabulary");
    tok[1] = 0;
    for (int i = 0; i < 14; i++) tgt[i] = -1;
    ck_assert_int_eq(trainer_check_batch(t, &b, &err), -1);
    ck_assert_str_eq(err.msg, "the batch has no target tokens");
    o.dropout = 1.0f;
    ck_assert_ptr_null(trainer_new(m, &o, 16, 2, &err));
    trainer_free(t);
    model_free(m);
}
END_TEST

START_TEST(test_generators) {
    TfModel *m = tf_compile_text(model_texts[0]); /* vocab 01+=, max_len 12 */
    TfDataset tr = {0}, ho = {0};
    TfError err = {""};
    ck_assert_msg(dataset_generate(&tr, &ho, m, "binary-add:3", 40, 20, 1, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(tr.n, 40);
    ck_assert_int_eq(ho.n, 20);
    // Held-out and training prompts are disjoint, and every answer is right.
    char *text;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    dataset_write_text(&tr, m, f);
    fputs("--\n", f);
    dataset_write_text(&ho, m, f);
    fclose(f);
    char *sep = strstr(text, "--\n");
    ck_assert_ptr_nonnull(sep);
    for (char *line = sep + 3; *line; line = strchr(line, '\n') + 1) {
        int a = 0, bb = 0, s = 0;
        for (int i = 0; i < 3; i++) a = a * 2 + (line[i] - '0');
        for (int i = 4; i < 7; i++) bb = bb * 2 + (line[i] - '0');
        for (int i = 3; i >= 0; i--) s = s * 2 + (line[9 + i] - '0'); /* LSB first */
        ck_assert_int_eq(s, a + bb);
        ck_assert_int_eq(line[7], '=');
        char prompt[10];
        memcpy(prompt, line, 8);
        prompt[8] = '\t';
        prompt[9] = '\0';
        *sep = '\0';
        ck_assert_msg(strstr(text, prompt) == NULL, "held-out %.8s is also a training example", line);
        *sep = '-';
    }
    free(text);
    dataset_free(&tr);
    dataset_free(&ho);
    ck_assert_int_eq(dataset_generate(&tr, &ho, m, "binary-add:3", 60, 20, 1, &err), -1);
    ck_assert_str_eq(err.msg, "cannot draw 60 distinct training examples: the task has too few");
    dataset_free(&tr);
    dataset_free(&ho);
    ck_assert_int_eq(dataset_generate(&tr, &ho, m, "decimal-add:2", 10, 10, 1, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "is not in the model's vocabulary"));
    dataset_free(&tr);
    dataset_free(&ho);
    ck_assert_int_eq(dataset_generate(&tr, &ho, m, "xor", 10, 10, 1, &err), -1);
    ck_assert_str_eq(err.msg, "task xor needs a classifier (predict classes ...) model");
    dataset_free(&tr);
    dataset_free(&ho);
    model_free(m);

    // The secret code: rounds of negative, close negative, 2013 with targets.
    TfModel *c = tf_compile_text(
        "vocab \"0123456789#\";\n model { d_model 6; heads 3; max_len 6; attention "
        "bidirectional; predict classes \"reject\", \"accept\"; }\n");
    ck_assert_msg(dataset_generate(&tr, &ho, c, "secret-code", 30, 50, 2, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(tr.n, 30);
    ck_assert_int_eq(tr.n_attn, 3);
    for (int i = 0; i < 30; i++) ck_assert_int_eq(tr.ex[i].label, i % 3 == 2);
    for (int i = 0; i < 50; i++) ck_assert_int_eq(ho.ex[i].label, 0);
    TfBatchBuf bb;
    ck_assert_int_eq(batchbuf_init(&bb, 3, 6), 0);
    int idx[3] = {0, 1, 2};
    batchbuf_fill(&bb, &tr, idx, 3);
    ck_assert_int_eq(bb.batch.n_attn, 3);
    ck_assert_int_eq(bb.batch.attn[2].head, 2);
    ck_assert_int_eq(bb.batch.seq_start[3] - bb.batch.seq_start[2], 5);
    batchbuf_free(&bb);
    dataset_free(&tr);
    dataset_free(&ho);
    model_free(c);
}
END_TEST

START_TEST(test_text_data_errors) {
    TfModel *m = tf_compile_text(model_texts[0]);
    char path[] = "/tmp/tftrain_data_XXXXXX";
    int fd = mkstemp(path);
    const char *bad = "01+01=\t010\n01+0x=\t01\n";
    ck_assert(write(fd, bad, strlen(bad)) == (ssize_t)strlen(bad));
    close(fd);
    TfDataset d = {0};
    TfError err = {""};
    ck_assert_int_eq(dataset_load_text(&d, m, path, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, ":2: character 'x' is not in the model's vocabulary"));
    dataset_free(&d);
    FILE *f = fopen(path, "w");
    fputs("0101\n", f);
    fclose(f);
    ck_assert_int_eq(dataset_load_text(&d, m, path, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, ":1: expected PROMPT<TAB>ANSWER, one tab between"));
    dataset_free(&d);
    f = fopen(path, "w");
    fputs("0101010101\t0101\n", f);
    fclose(f);
    ck_assert_int_eq(dataset_load_text(&d, m, path, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, ":1: 13 tokens, but the model's max_len is 12"));
    dataset_free(&d);
    remove(path);
    model_free(m);
}
END_TEST

/* The fast attention kernels (one head's keys and values as columns) against
 * their naive twins, on sizes like the seed models' (uneven on purpose),
 * causal and not, with and without a loss on the scores. */
/* nn_softmax (blocks of 16, the last padded) against the naive twin, for
 * every length from 1 to 40 (whole blocks, a tail, both), with scores of
 * every scale and -inf entries (weight 0 exactly). */
START_TEST(test_softmax_fast_matches_naive) {
    TfRng r;
    rng_seed(&r, 11);
    int checked = 0;
    for (int n = 1; n <= 40; n++)
        for (int scale = 0; scale < 3; scale++) {
            float x[40], y[40];
            fill(x, n, &r, -3.0f, 3.0f);
            for (int i = 0; i < n; i++) x[i] *= scale == 0 ? 1.0f : scale == 1 ? 30.0f : 1e-3f;
            if (n > 2) x[n / 2] = -INFINITY;
            memcpy(y, x, sizeof x);
            nn_softmax(x, n);
            softmax_naive(y, n);
            double sum = 0;
            for (int i = 0; i < n; i++) {
                ck_assert_msg(fabsf(x[i] - y[i]) <= 1e-6f + 1e-6f * y[i],
                              "n %d, scale %d, i %d: %g against %g", n, scale, i, x[i], y[i]);
                sum += x[i];
            }
            if (n > 2) ck_assert_float_eq(x[n / 2], 0.0f);
            ck_assert_double_eq_tol(sum, 1.0, 1e-5);
            checked++;
        }
    ck_assert_int_eq(checked, 120);
}
END_TEST

/* The fast attention kernels against their naive twins, at two shapes:
 * features fewer than a vector of 8 (5 and 4), and one vector plus a
 * remainder (8 and 12). */
static void attention_fast_matches_naive(int T, int H, int D, int DV) {
    enum { MT = 21, MH = 3, MD = 8, MDV = 12, R = 4 };
    static float q[MT * MH * MD], k[MT * MH * MD], v[MT * MH * MDV], dout[MT * MH * MDV],
        dpre[MH * MT * MT];
    static float out[MT * MH * MDV], pre[MH * MT * MT], att[MH * MT * MT], scratch[65536];
    static float g1[3][MT * MH * MDV], g2[3][MT * MH * MDV];
    static float o1[R * MH * MDV], o2[R * MH * MDV], p1[R * MH * MT], p2[R * MH * MT],
        a1[R * MH * MT], a2[R * MH * MT];
    ck_assert(T <= MT && H <= MH && D <= MD && DV <= MDV);
    const int pos[R] = {2, 5, T - 2, T - 1};
    ck_assert(nn_attention_scratch_floats(T, D, DV) <= sizeof scratch / sizeof *scratch);
    TfRng r;
    rng_seed(&r, 9);
    fill(q, T * H * D, &r, -1, 1), fill(k, T * H * D, &r, -1, 1), fill(v, T * H * DV, &r, -1, 1);
    fill(dout, T * H * DV, &r, -1, 1), fill(dpre, H * T * T, &r, -1, 1);
    char msg[256];
    for (int causal = 0; causal < 2; causal++) {
        float out2[MT * MH * MDV], pre2[MH * MT * MT], att2[MH * MT * MT];
        nn_attention_forward(out, pre, att, scratch, q, k, v, T, H, D, DV, 0.35f, causal);
        nn_attention_forward_naive(out2, pre2, att2, q, k, v, T, H, D, DV, 0.35f, causal);
        ck_assert_msg(tf_compare_floats(out, out2, (size_t)(T * H * DV), 1e-5, 1e-6, msg, sizeof msg) == 0,
                      "nn_attention_forward, D %d, DV %d, causal %d: %s", D, DV, causal, msg);
        ck_assert_msg(tf_compare_floats(pre, pre2, (size_t)(H * T * T), 1e-5, 1e-6, msg, sizeof msg) == 0,
                      "nn_attention_forward scores, D %d, causal %d: %s", D, causal, msg);
        ck_assert_msg(tf_compare_floats(att, att2, (size_t)(H * T * T), 1e-5, 1e-6, msg, sizeof msg) == 0,
                      "nn_attention_forward weights, D %d, causal %d: %s", D, causal, msg);
        for (int extra = 0; extra < 2; extra++) {
            memset(g1, 0, sizeof g1), memset(g2, 0, sizeof g2);
            nn_attention_backward(g1[0], g1[1], g1[2], scratch, dout, extra ? dpre : NULL, q, k, v,
                                  att, T, H, D, DV, 0.35f, causal);
            nn_attention_backward_naive(g2[0], g2[1], g2[2], scratch, dout, extra ? dpre : NULL, q,
                                        k, v, att, T, H, D, DV, 0.35f, causal);
            for (int i = 0; i < 3; i++)
                ck_assert_msg(tf_compare_floats(g1[i], g2[i], (size_t)(i == 2 ? T * H * DV : T * H * D),
                                                1e-5, 1e-5, msg, sizeof msg) == 0,
                              "nn_attention_backward, D %d, DV %d, causal %d, extra %d, gradient %d: %s",
                              D, DV, causal, extra, i, msg);
        }
    }
    for (int causal = 0; causal < 2; causal++) {
        // Query rows at pos: q holds them first ([R, H*D]); keys and values are the sequence's.
        nn_attention_rows_forward(o1, p1, a1, scratch, q, k, v, pos, R, T, H, D, DV, 0.35f, causal);
        nn_attention_rows_forward_naive(o2, p2, a2, q, k, v, pos, R, T, H, D, DV, 0.35f, causal);
        ck_assert_msg(tf_compare_floats(o1, o2, (size_t)(R * H * DV), 1e-5, 1e-6, msg, sizeof msg) == 0,
                      "nn_attention_rows_forward, D %d, DV %d: %s", D, DV, msg);
        ck_assert_msg(tf_compare_floats(a1, a2, (size_t)(R * H * T), 1e-5, 1e-6, msg, sizeof msg) == 0,
                      "nn_attention_rows_forward weights: %s", msg);
        memset(g1, 0, sizeof g1), memset(g2, 0, sizeof g2);
        nn_attention_rows_backward(g1[0], g1[1], g1[2], scratch, dout, q, k, v, a1, pos, R, T, H, D,
                                   DV, 0.35f, causal);
        nn_attention_rows_backward_naive(g2[0], g2[1], g2[2], scratch, dout, q, k, v, a1, pos, R, T,
                                         H, D, DV, 0.35f, causal);
        for (int i = 0; i < 3; i++)
            ck_assert_msg(tf_compare_floats(g1[i], g2[i], (size_t)(i == 0 ? R * H * D : i == 1 ? T * H * D
                                                                                        : T * H * DV),
                                            1e-5, 1e-5, msg, sizeof msg) == 0,
                          "nn_attention_rows_backward, D %d, DV %d, causal %d, gradient %d: %s", D, DV,
                          causal, i, msg);
    }
}

START_TEST(test_attention_fast_matches_naive) {
    attention_fast_matches_naive(13, 3, 5, 4);
    attention_fast_matches_naive(21, 2, 8, 12);
}
END_TEST

/* A group of G sequences through the group kernels gives each sequence
 * exactly (bit for bit) what it gets in a group of one, whatever its lane,
 * and that agrees with the naive twins: at head widths compiled apart (4, 8,
 * 16) and any other, full and selected rows, causal or not, with the
 * scores' own gradient, the group's rows in any order and its scores at an
 * offset. */
static void attention_group_matches_alone(int G, int T, int H, int D, int DV, int causal,
                                          int rows, int extra) {
    enum { MG = 16, MT = 9, MW = 48, R = 3 };
    static float q[MG * MT * MW], k[MG * MT * MW], v[MG * MT * MW], dout[MG * MT * MW];
    static float pre[64 + MG * MT * MT * 3], att[64 + MG * MT * MT * 3], xg[MG * MT * MT * 3];
    static float out[MG * MT * MW], g1[3][MG * MT * MW], scratch[40000];
    static float q1[MT * MW], o1[MT * MW], p1[MT * MT * 3], a1[MT * MT * 3], e1[MG][MT * MT * 3],
        h1[3][MT * MW], o2[MT * MW], p2[MT * MT * 3], a2[MT * MT * 3], h2[3][MT * MW];
    ck_assert(G <= MG && T <= MT && H * D <= MW && H * DV <= MW && H <= 3);
    ck_assert(nn_attention_group_scratch_floats(T, H, D, DV) <= sizeof scratch / sizeof *scratch);
    const int qs = H * D, vs = H * DV, pos[R] = {0, T / 2, T - 1}, NR = rows ? R : T;
    const int n_sc = NR * H * T; /* one sequence's scores */
    TfRng r;
    rng_seed(&r, (uint64_t)(G * 1000 + T * 100 + D * 10 + DV + rows));
    fill(q, MG * MT * MW, &r, -1.5f, 1.5f), fill(k, MG * MT * MW, &r, -1.5f, 1.5f);
    fill(v, MG * MT * MW, &r, -1, 1), fill(dout, MG * MT * MW, &r, -1, 1);
    NnGroup grp = {.G = G, .at = 37};
    for (int g = 0; g < G; g++) { /* sequences in reverse order of their rows */
        grp.row[g] = (long)(G - 1 - g) * T;
        grp.qrow[g] = (long)(G - 1 - g) * NR;
    }
    for (int g = 0; g < G; g++) { /* each sequence's extra gradient, interleaved too */
        fill(e1[g], n_sc, &r, -1, 1);
        for (int i = 0; i < n_sc; i++) xg[(long)i * G + g] = e1[g][i];
    }
    grp.extra = extra ? xg : NULL;
    memset(g1, 0, sizeof g1);
    nn_attention_group_forward(out, pre, att, scratch, q, k, v, &grp, rows ? pos : NULL, NR, T, H,
                               D, DV, 0.45f, causal, !rows);
    nn_attention_group_backward(g1[0], g1[1], g1[2], scratch, dout, q, k, v, att, &grp,
                                rows ? pos : NULL, NR, T, H, D, DV, 0.45f, causal);
    char msg[256], what[160];
    for (int g = 0; g < G; g++) {
        snprintf(what, sizeof what, "G %d, lane %d, T %d, H %d, D %d, DV %d, causal %d, rows %d, extra %d",
                 G, g, T, H, D, DV, causal, rows, extra);
        const float *qg = q + grp.qrow[g] * qs, *kg = k + grp.row[g] * qs, *vg = v + grp.row[g] * vs;
        const float *dg = dout + grp.qrow[g] * vs;
        memcpy(q1, qg, (size_t)NR * qs * sizeof *q1);
        memset(h1, 0, sizeof h1), memset(h2, 0, sizeof h2);
        NnGroup one = {.G = 1, .extra = extra ? e1[g] : NULL};
        nn_attention_group_forward(o1, p1, a1, scratch, q1, kg, vg, &one, rows ? pos : NULL, NR, T,
                                   H, D, DV, 0.45f, causal, !rows);
        nn_attention_group_backward(h1[0], h1[1], h1[2], scratch, dg, q1, kg, vg, a1, &one,
                                    rows ? pos : NULL, NR, T, H, D, DV, 0.45f, causal);
        if (rows) {
            nn_attention_rows_forward_naive(o2, p2, a2, q1, kg, vg, pos, R, T, H, D, DV, 0.45f, causal);
            nn_attention_rows_backward_naive(h2[0], h2[1], h2[2], scratch, dg, q1, kg, vg, a1, pos, R,
                                             T, H, D, DV, 0.45f, causal);
        } else {
            nn_attention_forward_naive(o2, p2, a2, q1, kg, vg, T, H, D, DV, 0.45f, causal);
            nn_attention_backward_naive(h2[0], h2[1], h2[2], scratch, dg, extra ? e1[g] : NULL, q1,
                                        kg, vg, a1, T, H, D, DV, 0.45f, causal);
        }
        // In the group, exactly as alone.
        ck_assert_msg(memcmp(out + grp.qrow[g] * vs, o1, (size_t)NR * vs * sizeof *o1) == 0,
                      "group output differs from alone: %s", what);
        for (int i = 0; i < n_sc; i++) {
            ck_assert_msg(att[grp.at + (long)i * G + g] == a1[i], "group weight %d: %s", i, what);
            if (!rows)
                ck_assert_msg(pre[grp.at + (long)i * G + g] == p1[i], "group score %d: %s", i, what);
        }
        ck_assert_msg(memcmp(g1[0] + grp.qrow[g] * qs, h1[0], (size_t)NR * qs * sizeof(float)) == 0,
                      "group dq differs from alone: %s", what);
        ck_assert_msg(memcmp(g1[1] + grp.row[g] * qs, h1[1], (size_t)T * qs * sizeof(float)) == 0,
                      "group dk differs from alone: %s", what);
        ck_assert_msg(memcmp(g1[2] + grp.row[g] * vs, h1[2], (size_t)T * vs * sizeof(float)) == 0,
                      "group dv differs from alone: %s", what);
        // Alone, as the naive twins.
        ck_assert_msg(tf_compare_floats(o1, o2, (size_t)NR * vs, 1e-5, 1e-6, msg, sizeof msg) == 0,
                      "output, %s: %s", what, msg);
        ck_assert_msg(tf_compare_floats(a1, a2, (size_t)n_sc, 1e-5, 1e-6, msg, sizeof msg) == 0,
                      "weights, %s: %s", what, msg);
        if (!rows)
            ck_assert_msg(tf_compare_floats(p1, p2, (size_t)n_sc, 1e-5, 1e-6, msg, sizeof msg) == 0,
                          "scores, %s: %s", what, msg);
        for (int i = 0; i < 3; i++)
            ck_assert_msg(tf_compare_floats(h1[i], h2[i], (size_t)(i == 0 ? NR * qs : i == 1 ? T * qs : T * vs),
                                            1e-5, 1e-5, msg, sizeof msg) == 0,
                          "gradient %d, %s: %s", i, what, msg);
    }
}

START_TEST(test_attention_group_lanes_independent) {
    static const int widths[][2] = {{4, 4}, {8, 8}, {16, 16}, {5, 3}, {8, 12}};
    for (int wi = 0; wi < 5; wi++)
        for (int causal = 0; causal < 2; causal++)
            for (int rows = 0; rows < 2; rows++) {
                const int D = widths[wi][0], DV = widths[wi][1], H = D == 16 ? 2 : 3;
                attention_group_matches_alone(16, 7, H, D, DV, causal, rows, 0);
                attention_group_matches_alone(5, 9, H, D, DV, causal, rows, !rows);
                attention_group_matches_alone(1, 4, H, D, DV, causal, rows, !rows);
            }
}
END_TEST

/* Sequences longer than NN_SHORT_T: through the group kernels (two of 24
 * positions side by side, d_model 16) and, in a model wide and long enough
 * that the group kernels' scratch passes the trainer's bound (d_model 512,
 * room for 80 positions: 4.6 M floats), through the one-sequence kernels
 * one at a time; two layers, so that the first runs every row and the last
 * the answer rows only (the first position has no target). The batch's loss and gradient do not depend on the order
 * of its sequences (to rounding), nor on the threads (bit for bit); the
 * small model's gradient against finite differences; the attention pictures
 * (long_pictures_match). */
static double long_batch(TfTrainer *t, const TfModel *m, int swap, float *grad, size_t *n) {
    enum { S = 2, T = 24 };
    int tok[S * T], start[S + 1], tgt[S * T], lab[S] = {0};
    TfRng r;
    rng_seed(&r, 12);
    for (int i = 0; i < S * T; i++) {
        int k = swap ? (i + T) % (S * T) : i; /* sequence 1 first when swapped */
        tok[k] = (int)rng_below(&r, (uint64_t)m->n_vocab);
        tgt[k] = i % T >= 1 ? (int)rng_below(&r, (uint64_t)m->n_vocab) : -1;
    }
    for (int s = 0; s <= S; s++) start[s] = s * T;
    TfBatch b = {S, tok, start, tgt, lab, NULL, 0, 0, 0, 0};
    TfError err = {""};
    ck_assert_msg(trainer_check_batch(t, &b, &err) == 0, "%s", err.msg);
    double loss = trainer_forward_backward(t, &b, 0, NULL);
    const float *g = trainer_grads(t, n);
    if (grad) memcpy(grad, g, *n * sizeof *g);
    if (swap == 2) { /* the finite differences, on the unswapped batch */
        char what[40];
        snprintf(what, sizeof what, "long sequences, d_model %d", m->d_model);
        size_t pos_lo = trainer_tensor_offset(t, m->pos_embed);
        float *g0 = malloc(*n * sizeof *g0);
        memcpy(g0, g, *n * sizeof *g0);
        ck_assert_int_gt(tf_check_gradients(t, &b, m, g0, 1 + *n / 60, pos_lo, pos_lo, what, NULL), 30);
        free(g0);
    }
    return loss;
}

/* After trainer_predict, the attention scores and weights the trainer hands
 * out for a sequence (trainer_attention_scores, _weights: copied out of a
 * group's interleaved layout) are exactly those of the same sequence in a
 * batch of its own, in every head of both layers. */
static void long_pictures_match(TfTrainer *t, const TfModel *m) {
    enum { T = 24 };
    int tok[2 * T], start[3] = {0, T, 2 * T}, tgt[2 * T], lab[2] = {0}, pred[2];
    TfRng r;
    rng_seed(&r, 13);
    for (int i = 0; i < 2 * T; i++) {
        tok[i] = (int)rng_below(&r, (uint64_t)m->n_vocab);
        tgt[i] = i % T >= 1 ? (int)rng_below(&r, (uint64_t)m->n_vocab) : -1;
    }
    static float pair[2][2][2][T * T]; /* [layer][head][scores, weights] */
    TfBatch both = {2, tok, start, tgt, lab, NULL, 0, 0, 0, 0};
    trainer_predict(t, &both, pred, NULL);
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 2; h++) {
            int n = 0;
            const float *sc = trainer_attention_scores(t, 1, l, h, &n);
            ck_assert(sc != NULL && n == T);
            memcpy(pair[l][h][0], sc, sizeof pair[l][h][0]);
            const float *w = trainer_attention_weights(t, 1, l, h, &n);
            ck_assert(w != NULL && n == T);
            memcpy(pair[l][h][1], w, sizeof pair[l][h][1]);
        }
    TfBatch alone = {1, tok + T, start, tgt + T, lab, NULL, 0, 0, 0, 0};
    trainer_predict(t, &alone, pred, NULL);
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 2; h++) {
            int n = 0;
            const float *sc = trainer_attention_scores(t, 0, l, h, &n);
            ck_assert(sc != NULL && n == T);
            ck_assert_msg(memcmp(pair[l][h][0], sc, sizeof pair[l][h][0]) == 0,
                          "d_model %d, layer %d, head %d: scores differ in a batch of two", m->d_model, l, h);
            const float *w = trainer_attention_weights(t, 0, l, h, &n);
            ck_assert_msg(memcmp(pair[l][h][1], w, sizeof pair[l][h][1]) == 0,
                          "d_model %d, layer %d, head %d: weights differ in a batch of two", m->d_model, l, h);
            for (int j = 1; j < T; j++) ck_assert(w[j] == 0.0f); /* causal: row 0 sees position 0 */
        }
}

START_TEST(test_long_sequences) {
    const char *text = _i == 0
        ? "vocab \"01+=\";\n model { d_model 16; layers 2; heads 2; d_ff 8; norm pre; positions "
          "learned; max_len 30; predict every_position; seed 8; }\n"
        : "vocab \"01+=\";\n model { d_model 512; layers 2; heads 2; d_ff 8; norm pre; positions "
          "learned; max_len 80; predict every_position; seed 8; }\n";
    TfModel *m = tf_compile_text(text);
    double loss[3];
    float *grad[2] = {NULL, NULL};
    size_t n = 0;
    for (int run = 0; run < 3; run++) { /* 1 thread, 1 thread swapped, 2 threads */
        TfTrainOptions o = default_opts(TF_OPT_ADAMW);
        o.threads = run == 2 ? 2 : 1;
        TfError err = {""};
        TfTrainer *t = trainer_new(m, &o, 80, 2, &err); /* room for 80 rows: the bound counts it */
        ck_assert_msg(t != NULL, "%s", err.msg);
        trainer_grads(t, &n);
        if (run < 2) grad[run] = malloc(n * sizeof(float));
        loss[run] = long_batch(t, m, run == 1, run < 2 ? grad[run] : NULL, &n);
        if (run == 0 && _i == 0) long_batch(t, m, 2, NULL, &n);
        if (run == 0) long_pictures_match(t, m);
        trainer_free(t);
    }
    char msg[256];
    ck_assert_msg(fabs(loss[0] - loss[1]) <= 1e-6 * fabs(loss[0]), "loss %.9g, swapped %.9g", loss[0], loss[1]);
    ck_assert_msg(tf_compare_floats(grad[1], grad[0], n, 1e-6, 1e-4, msg, sizeof msg) == 0,
                  "gradient, sequences swapped: %s", msg);
    ck_assert_msg(memcmp(&loss[0], &loss[2], sizeof loss[0]) == 0, "loss %.17g on 1 thread, %.17g on 2",
                  loss[0], loss[2]);
    free(grad[0]), free(grad[1]);
    model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("train");
    tcase_add_test(tc, test_matmul_backward);
    tcase_add_test(tc, test_matmul_backward_wide);
    tcase_add_test(tc, test_layernorm_backward);
    tcase_add_test(tc, test_activation_backward);
    tcase_add_test(tc, test_attention_backward);
    tcase_add_test(tc, test_attention_rows_backward);
    tcase_add_test(tc, test_attention_fast_matches_naive);
    tcase_add_test(tc, test_attention_group_lanes_independent);
    tcase_add_loop_test(tc, test_long_sequences, 0, 2);
    tcase_add_test(tc, test_softmax_fast_matches_naive);
    tcase_add_test(tc, test_embedding_and_crossentropy_backward);
    tcase_add_loop_test(tc, test_model_gradient, 0, 4);
    tcase_add_test(tc, test_optimizers_learn_and_are_deterministic);
    tcase_add_test(tc, test_threads_do_not_change_the_result);
    tcase_add_test(tc, test_data_parallel);
    tcase_add_test(tc, test_adam_weight_decay_step);
    tcase_add_test(tc, test_checkpoint_resume);
    tcase_add_test(tc, test_bad_batches_are_rejected);
    tcase_add_test(tc, test_generators);
    tcase_add_test(tc, test_text_data_errors);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
