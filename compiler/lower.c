/* lower.c: the seed ops' weight constructions, the embeddings, and the
 * model: one layer per op of the analysed program (compiler/plans.h); the
 * general ops' layers are built by compiler/lower_general.c from their plans.
 *
 * Two sets. At -O0, seed 001's constructions to the float: one head over the
 * whole residual stream, MLPs of d_model units. At -O (the default), each op
 * gets the layer it needs: heads of the true rank of their query-key
 * product, with an output projection onto the destination register; MLPs
 * whose units read and write only the op's registers; exact ReLU steps
 * where the seed approximates with GELU (StepPosition, Clear, Multiply,
 * CopyOnMatch). The -O constructions also read keys and values from the
 * token and position columns only, which lets the runtime skip every layer
 * but those at prompt positions whose output is never read.
 *
 * Matrices are built in PyTorch's [out, in] order: W(o, i) is the weight
 * from residual column i to output o. Constants are computed in double and
 * rounded once to float, as the seed's Python does.
 */
#include "lower.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#include "lower_internal.h"
#include "numbers.h"
#include "values.h"

Mat lower_mat(Lowerer *L, int rows, int cols) {
    Mat M = {rows, cols, calloc((size_t)rows * (size_t)cols, sizeof(float)), 0};
    if (!M.w && !L->failed) {
        tf_error_set(L->err, "out of memory for a %dx%d matrix", rows, cols);
        L->failed = 1;
    }
    return M;
}

static void mat_fill(Mat M, float value) {
    for (size_t i = 0; i < (size_t)M.rows * (size_t)M.cols; i++) M.w[i] = value;
}

/* Stores M under `name` unless an identical tensor exists; returns the
 * tensor index either way and frees M. A vector (rows == 1) is 1-D. */
int lower_emit(Lowerer *L, const char *name, Mat M) {
    if (L->failed || !M.w) {
        free(M.w);
        return -1;
    }
    int ndim = M.rows == 1 && !M.two_d ? 1 : 2;
    int64_t shape[2] = {M.rows, M.cols};
    if (ndim == 1) shape[0] = M.cols;
    unsigned flags = L->share ? TENSORS_FIND | TENSORS_FINDABLE : TENSORS_FINDABLE;
    int t = tensors_store(&L->tensors, name, ndim, shape, M.w, flags, L->err);
    if (t < 0) L->failed = 1;
    free(M.w);
    return t;
}

static const TfIrReg *reg(const Lowerer *L, int r) { return &L->ir->regs[r]; }

int lower_emit_layer(Lowerer *L, const char *what, Mat M) {
    char name[96];
    snprintf(name, sizeof name, "layers.%d.%s", L->m->n_layers, what);
    return lower_emit(L, name, M);
}

TfLayer lower_layer_header(const Lowerer *L, const TfIrOp *op, TfLayerKind kind) {
    TfLayer ly = model_layer_init(kind);
    ly.name = op->stmt->label.text ? op->stmt->label.text : (char *)tf_ops[op->op].layer_name;
    if (op->plan && op->plan->name[0]) ly.name = (char *)op->plan->name;
    ly.op = (char *)tf_ops[op->op].name;
    ly.line = op->stmt->loc.line;
    (void)L;
    return ly;
}

/* One head over the whole residual stream, no output projection, scaled by
 * 1/sqrt(d_model): the seed's AttentionLayer. */
static void emit_attention(Lowerer *L, int li, const TfIrOp *op, Mat q, Mat k, Mat v) {
    (void)li; // tensors are named by the layer they belong to
    int d = L->ir->d_model;
    TfLayer ly = lower_layer_header(L, op, TF_LAYER_ATTENTION);
    ly.n_heads = 1;
    ly.d_head = d;
    ly.d_vhead = d;
    ly.scale = (float)(1.0 / sqrt((double)d));
    ly.causal = 1;
    ly.query = lower_emit_layer(L, "attn.query.weight", q);
    ly.key = lower_emit_layer(L, "attn.key.weight", k);
    ly.value = lower_emit_layer(L, "attn.value.weight", v);
    if (!L->failed && model_add_layer(L->m, &ly, L->err) < 0) L->failed = 1;
}

/* One head of query/key width q.rows and value width v.rows, with an output
 * projection o [d_model, v.rows]: the -O attention layers. */
static void emit_attention_proj(Lowerer *L, int li, const TfIrOp *op, Mat q, Mat k, Mat v, Mat o,
                                float scale) {
    (void)li;
    TfLayer ly = lower_layer_header(L, op, TF_LAYER_ATTENTION);
    ly.n_heads = 1;
    ly.d_head = q.rows;
    ly.d_vhead = v.rows;
    ly.scale = scale;
    ly.causal = 1;
    ly.query = lower_emit_layer(L, "attn.query.weight", q);
    ly.key = lower_emit_layer(L, "attn.key.weight", k);
    ly.value = lower_emit_layer(L, "attn.value.weight", v);
    ly.output = lower_emit_layer(L, "attn.output.weight", o);
    if (!L->failed && model_add_layer(L->m, &ly, L->err) < 0) L->failed = 1;
}

/* x += act(x W1^T + b1) W2^T + b2: the seed's MLPLayer with exact GELU,
 * or (emit_mlp_act) with ReLU. */
void lower_add_mlp(Lowerer *L, const TfIrOp *op, TfActivation act, Mat w1, Mat b1, Mat w2,
                   Mat b2) {
    TfLayer ly = lower_layer_header(L, op, TF_LAYER_MLP);
    w1.two_d = w2.two_d = 1;
    ly.d_hidden = w1.rows;
    ly.act = act;
    ly.fc1_weight = lower_emit_layer(L, "mlp.fc1.weight", w1);
    ly.fc1_bias = lower_emit_layer(L, "mlp.fc1.bias", b1);
    ly.fc2_weight = lower_emit_layer(L, "mlp.fc2.weight", w2);
    ly.fc2_bias = lower_emit_layer(L, "mlp.fc2.bias", b2);
    if (!L->failed && model_add_layer(L->m, &ly, L->err) < 0) L->failed = 1;
}

static void emit_mlp_act(Lowerer *L, int li, const TfIrOp *op, TfActivation act, Mat w1, Mat b1,
                         Mat w2, Mat b2) {
    (void)li; // tensors are named by the layer they belong to
    lower_add_mlp(L, op, act, w1, b1, w2, b2);
}

static void emit_mlp(Lowerer *L, int li, const TfIrOp *op, Mat w1, Mat b1, Mat w2, Mat b2) {
    emit_mlp_act(L, li, op, TF_ACT_GELU, w1, b1, w2, b2);
}

static double angle(const Lowerer *L, double steps) {
    return steps * (2.0 * M_PI) / (double)L->ir->period;
}

/* FindAndStore('c') -> dst: every query row is -1e10 except +1e10 at the
 * token's column, keys are the residual itself, values copy pos into dst. */
void lower_find_and_store(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model, tok = op->plan->args[0].tok;
    const TfIrReg *pos = reg(L, TF_IR_REG_POS), *dst = reg(L, op->dest);
    int tokcol = reg(L, TF_IR_REG_TOKENS)->offset + tok;
    Mat q = lower_mat(L, d, d), k = lower_mat(L, d, d), v = lower_mat(L, d, d);
    if (L->failed) goto fail;
    for (int o = 0; o < d; o++)
        for (int i = 0; i < d; i++) AT(q, o, i) = o == tokcol ? 1e10f : -1e10f;
    for (int c = 0; c < d; c++) AT(k, c, c) = 1.0f;
    AT(v, dst->offset, pos->offset) = 1.0f;
    AT(v, dst->offset + 1, pos->offset + 1) = 1.0f;
    emit_attention(L, li, op, q, k, v);
    return;
fail:
    free(q.w), free(k.w), free(v.w);
}

/* GetRelativeToken(p + n) -> dst: the query is p rotated by n steps, the
 * key pos scaled by 1e10, the value copies the token one-hot into dst. */
void lower_get_relative_token(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model;
    const TfIrReg *p = reg(L, op->plan->args[0].reg), *pos = reg(L, TF_IR_REG_POS);
    const TfIrReg *toks = reg(L, TF_IR_REG_TOKENS), *dst = reg(L, op->dest);
    double a = angle(L, (double)-op->plan->args[0].value);
    float s = (float)sin(a), c = (float)cos(a);
    Mat q = lower_mat(L, d, d), k = lower_mat(L, d, d), v = lower_mat(L, d, d);
    if (L->failed) goto fail;
    AT(q, pos->offset, p->offset) = c;
    AT(q, pos->offset, p->offset + 1) = -s;
    AT(q, pos->offset + 1, p->offset) = s;
    AT(q, pos->offset + 1, p->offset + 1) = c;
    AT(k, pos->offset, pos->offset) = 1e10f;
    AT(k, pos->offset + 1, pos->offset + 1) = 1e10f;
    for (int t = 0; t < toks->size; t++) AT(v, dst->offset + t, toks->offset + t) = 1.0f;
    emit_attention(L, li, op, q, k, v);
    return;
fail:
    free(q.w), free(k.w), free(v.w);
}

/* Multiply(a, b, carry) -> out: two hidden units per digit pair (i, j), one
 * firing without carry (500 a_i + 500 b_j - 1000 carry - 900), one with
 * (333 each - 900); each writes the digit (i + j [+ 1]) mod 10 and the carry
 * change. 200 hidden units. */
void lower_multiply(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model, width = 10 * 10 * 2;
    const TfIrReg *a = reg(L, op->plan->args[0].reg), *b = reg(L, op->plan->args[1].reg);
    const TfIrReg *carry = reg(L, op->plan->args[2].reg), *out = reg(L, op->dest);
    int digit[10];
    for (int i = 0; i < 10; i++)
        for (int t = 0; t < L->ir->n_vocab; t++)
            if (L->ir->vocab[t] == '0' + i) digit[i] = t;
    Mat w1 = lower_mat(L, width, d), b1 = lower_mat(L, 1, width);
    Mat w2 = lower_mat(L, d, width), b2 = lower_mat(L, 1, d);
    if (L->failed) goto fail;
    const float carry_scale = (float)(0.01 * (1.0 / 0.99));
    int u = 0;
    for (int i = 0; i < 10; i++) {
        for (int j = 0; j < 10; j++) {
            AT(w1, u, a->offset + digit[i]) = 500;
            AT(w1, u, b->offset + digit[j]) = 500;
            AT(w1, u, carry->offset) = -1000;
            AT(b1, 0, u) = -900;
            AT(w2, out->offset + digit[(i + j) % 10], u) = 0.01f;
            if (i + j >= 10) AT(w2, carry->offset, u) = 0.01f;
            u++;
            AT(w1, u, a->offset + digit[i]) = 333;
            AT(w1, u, b->offset + digit[j]) = 333;
            AT(w1, u, carry->offset) = 333;
            AT(b1, 0, u) = -900;
            AT(w2, out->offset + digit[(i + j + 1) % 10], u) = carry_scale;
            AT(w2, carry->offset, u) = i + j + 1 >= 10 ? 0.0f : -carry_scale;
            u++;
        }
    }
    emit_mlp(L, li, op, w1, b1, w2, b2);
    return;
fail:
    free(w1.w), free(b1.w), free(w2.w), free(b2.w);
}

/* Clear(r, ...): a hidden unit per column, 100 x in, -0.01 x out: subtracts
 * every positive value (negative ones stay). */
void lower_clear(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model;
    Mat w1 = lower_mat(L, d, d), b1 = lower_mat(L, 1, d), w2 = lower_mat(L, d, d), b2 = lower_mat(L, 1, d);
    if (L->failed) goto fail;
    for (int n = 0; n < op->plan->n_args; n++) {
        const TfIrReg *r = reg(L, op->plan->args[n].reg);
        for (int c = r->offset; c < r->offset + r->size; c++) {
            AT(w1, c, c) = 100.0f;
            AT(w2, c, c) = -0.01f;
        }
    }
    emit_mlp(L, li, op, w1, b1, w2, b2);
    return;
fail:
    free(w1.w), free(b1.w), free(w2.w), free(b2.w);
}

/* StepPosition(p: n, ...): GELU(x R + 1000) - 1000 ~ x R, where R is the
 * rotation by n steps minus the identity, on each named register. */
void lower_step_position(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model;
    Mat w1 = lower_mat(L, d, d), b1 = lower_mat(L, 1, d), w2 = lower_mat(L, d, d), b2 = lower_mat(L, 1, d);
    if (L->failed) goto fail;
    for (int n = 0; n < op->plan->n_args; n++) {
        const TfIrReg *r = reg(L, op->plan->args[n].reg);
        double a = angle(L, (double)-op->plan->args[n].value);
        double s = sin(a), c = cos(a);
        AT(w1, r->offset, r->offset) = (float)(c - 1.0);
        AT(w1, r->offset, r->offset + 1) = (float)-s;
        AT(w1, r->offset + 1, r->offset) = (float)s;
        AT(w1, r->offset + 1, r->offset + 1) = (float)(c - 1.0);
    }
    mat_fill(b1, 1000.0f);
    for (int c = 0; c < d; c++) AT(w2, c, c) = 1.0f;
    mat_fill(b2, -1000.0f);
    emit_mlp(L, li, op, w1, b1, w2, b2);
    return;
fail:
    free(w1.w), free(b1.w), free(w2.w), free(b2.w);
}

/* DiffPos(a, b) -> dist: |100 (a.sin - b.sin) + 1000 (a.cos - b.cos)| as
 * GELU(z) + GELU(-z), added to dist. */
void lower_diff_pos(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model;
    const TfIrReg *a = reg(L, op->plan->args[0].reg), *b = reg(L, op->plan->args[1].reg);
    const TfIrReg *dist = reg(L, op->dest);
    Mat w1 = lower_mat(L, 2, d), b1 = lower_mat(L, 1, 2), w2 = lower_mat(L, d, 2), b2 = lower_mat(L, 1, d);
    if (L->failed) goto fail;
    for (int u = 0; u < 2; u++) {
        float sign = u == 0 ? 1.0f : -1.0f;
        AT(w1, u, a->offset) = sign * 1e2f;
        AT(w1, u, a->offset + 1) = sign * 1e3f;
        AT(w1, u, b->offset) = -sign * 1e2f;
        AT(w1, u, b->offset + 1) = -sign * 1e3f;
        AT(w2, dist->offset, u) = 1.0f;
    }
    emit_mlp(L, li, op, w1, b1, w2, b2);
    return;
fail:
    free(w1.w), free(b1.w), free(w2.w), free(b2.w);
}

/* IsZero(z): z becomes ~1 where it was 0 and ~0 where it was large:
 * 0.1 GELU(10 - 100 z) - GELU(z + 10) + 10 added to z. */
void lower_is_zero(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model;
    const TfIrReg *z = reg(L, op->plan->args[0].reg);
    Mat w1 = lower_mat(L, 2, d), b1 = lower_mat(L, 1, 2), w2 = lower_mat(L, d, 2), b2 = lower_mat(L, 1, d);
    if (L->failed) goto fail;
    AT(w1, 0, z->offset) = -100.0f;
    AT(w1, 1, z->offset) = 1.0f;
    mat_fill(b1, 10.0f); /* the seed's bias of shape (1,), broadcast to both units */
    AT(w2, z->offset, 0) = 0.1f;
    AT(w2, z->offset, 1) = -1.0f;
    AT(b2, 0, z->offset) = 10.0f;
    emit_mlp(L, li, op, w1, b1, w2, b2);
    return;
fail:
    free(w1.w), free(b1.w), free(w2.w), free(b2.w);
}

/* CopyOnMatch(m, src) -> dst: unit i fires (0.1 GELU(100 m + 100 src_i -
 * 190) ~ 1) only when both the flag and src's column i are ~1. */
void lower_copy_on_match(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model;
    const TfIrReg *match = reg(L, op->plan->args[0].reg), *src = reg(L, op->plan->args[1].reg);
    const TfIrReg *dst = reg(L, op->dest);
    int n = src->size;
    Mat w1 = lower_mat(L, n, d), b1 = lower_mat(L, 1, n), w2 = lower_mat(L, d, n), b2 = lower_mat(L, 1, d);
    if (L->failed) goto fail;
    for (int i = 0; i < n; i++) {
        AT(w1, i, match->offset) = 100.0f;
        AT(w1, i, src->offset + i) = 100.0f;
        AT(b1, 0, i) = -190.0f;
        AT(w2, dst->offset + i, i) = 0.1f;
    }
    emit_mlp(L, li, op, w1, b1, w2, b2);
    return;
fail:
    free(w1.w), free(b1.w), free(w2.w), free(b2.w);
}

/* ---- -O constructions ---------------------------------------------------- */

/* FindAndStore('c') -> dst at -O: a rank-1 head. The query is 1 at every
 * row (the sum of the token one-hot), the key 1e4 at rows holding 'c': the
 * positions holding 'c' share the attention, every other position gets
 * exp(-1e4) = 0. The value reads pos, the output writes it into dst. Unlike
 * the seed's construction it works at any position (the seed's fails past
 * position 33: docs/language.md). */
void lower_find_and_store_opt(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model, tok = op->plan->args[0].tok;
    const TfIrReg *pos = reg(L, TF_IR_REG_POS), *dst = reg(L, op->dest);
    const TfIrReg *toks = reg(L, TF_IR_REG_TOKENS);
    Mat q = lower_mat(L, 1, d), k = lower_mat(L, 1, d), v = lower_mat(L, 2, d), o = lower_mat(L, d, 2);
    if (L->failed) goto fail;
    for (int t = 0; t < toks->size; t++) AT(q, 0, toks->offset + t) = 1.0f;
    AT(k, 0, toks->offset + tok) = 1e4f;
    for (int c = 0; c < 2; c++) {
        AT(v, c, pos->offset + c) = 1.0f;
        AT(o, dst->offset + c, c) = 1.0f;
    }
    q.two_d = k.two_d = 1; /* [1, d_model] weights, not vectors */
    emit_attention_proj(L, li, op, q, k, v, o, 1.0f);
    return;
fail:
    free(q.w), free(k.w), free(v.w), free(o.w);
}

/* GetRelativeToken(p + n) -> dst at -O: the seed's rank-2 query-key product
 * (p rotated by n steps against 1e10 pos, the seed's scale) as a head of
 * width 2; the value reads the token one-hot, the output writes dst. */
void lower_get_relative_token_opt(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model;
    const TfIrReg *p = reg(L, op->plan->args[0].reg), *pos = reg(L, TF_IR_REG_POS);
    const TfIrReg *toks = reg(L, TF_IR_REG_TOKENS), *dst = reg(L, op->dest);
    double a = angle(L, (double)-op->plan->args[0].value);
    float s = (float)sin(a), c = (float)cos(a);
    int V = toks->size;
    Mat q = lower_mat(L, 2, d), k = lower_mat(L, 2, d), v = lower_mat(L, V, d), o = lower_mat(L, d, V);
    if (L->failed) goto fail;
    AT(q, 0, p->offset) = c;
    AT(q, 0, p->offset + 1) = -s;
    AT(q, 1, p->offset) = s;
    AT(q, 1, p->offset + 1) = c;
    AT(k, 0, pos->offset) = 1e10f;
    AT(k, 1, pos->offset + 1) = 1e10f;
    for (int t = 0; t < V; t++) {
        AT(v, t, toks->offset + t) = 1.0f;
        AT(o, dst->offset + t, t) = 1.0f;
    }
    emit_attention_proj(L, li, op, q, k, v, o, (float)(1.0 / sqrt((double)d)));
    return;
fail:
    free(q.w), free(k.w), free(v.w), free(o.w);
}

/* StepPosition(p: n, ...) at -O: z = x (R - I) exactly, as ReLU(z) -
 * ReLU(-z): four units per register, no rounding through 1000. */
void lower_step_position_opt(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model, F = 4 * op->plan->n_args;
    Mat w1 = lower_mat(L, F, d), b1 = lower_mat(L, 1, F), w2 = lower_mat(L, d, F), b2 = lower_mat(L, 1, d);
    if (L->failed) goto fail;
    for (int n = 0; n < op->plan->n_args; n++) {
        const TfIrReg *r = reg(L, op->plan->args[n].reg);
        double a = angle(L, (double)-op->plan->args[n].value);
        float s = (float)sin(a), c = (float)(cos(a) - 1.0);
        float rot[2][2] = {{c, -s}, {s, c}}; /* (R - I) for the sin and the cos column */
        for (int col = 0; col < 2; col++)
            for (int sign = 0; sign < 2; sign++) {
                int u = 4 * n + 2 * col + sign;
                float g = sign ? -1.0f : 1.0f;
                AT(w1, u, r->offset) = g * rot[col][0];
                AT(w1, u, r->offset + 1) = g * rot[col][1];
                AT(w2, r->offset + col, u) = g;
            }
    }
    emit_mlp_act(L, li, op, TF_ACT_RELU, w1, b1, w2, b2);
    return;
fail:
    free(w1.w), free(b1.w), free(w2.w), free(b2.w);
}

/* Clear(r, ...) at -O: x -= ReLU(x) on the registers' columns, exactly. */
void lower_clear_opt(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model, F = 0;
    for (int n = 0; n < op->plan->n_args; n++) F += reg(L, op->plan->args[n].reg)->size;
    Mat w1 = lower_mat(L, F, d), b1 = lower_mat(L, 1, F), w2 = lower_mat(L, d, F), b2 = lower_mat(L, 1, d);
    if (L->failed) goto fail;
    int u = 0;
    for (int n = 0; n < op->plan->n_args; n++) {
        const TfIrReg *r = reg(L, op->plan->args[n].reg);
        for (int c = r->offset; c < r->offset + r->size; c++, u++) {
            AT(w1, u, c) = 1.0f;
            AT(w2, c, u) = -1.0f;
        }
    }
    emit_mlp_act(L, li, op, TF_ACT_RELU, w1, b1, w2, b2);
    return;
fail:
    free(w1.w), free(b1.w), free(w2.w), free(b2.w);
}

/* Multiply(a, b, carry) -> out at -O: the sum s = digit(a) + digit(b) +
 * carry is linear in the one-hots, so 22 ReLU ramps t_k = ReLU(s - k), k =
 * -1..20, give every indicator [s = v] = t_{v-1} - 2 t_v + t_{v+1} exactly
 * for integer s; out gets the one-hot of s mod 10, carry becomes [s >= 10]
 * = t_9 - t_10 (two more units read the old carry to subtract it). 24
 * units instead of the seed's 200. */
void lower_multiply_opt(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model, n_ramps = 22, F = n_ramps + 2;
    const TfIrReg *a = reg(L, op->plan->args[0].reg), *b = reg(L, op->plan->args[1].reg);
    const TfIrReg *carry = reg(L, op->plan->args[2].reg), *out = reg(L, op->dest);
    int digit[10];
    for (int i = 0; i < 10; i++)
        for (int t = 0; t < L->ir->n_vocab; t++)
            if (L->ir->vocab[t] == '0' + i) digit[i] = t;
    Mat w1 = lower_mat(L, F, d), b1 = lower_mat(L, 1, F), w2 = lower_mat(L, d, F), b2 = lower_mat(L, 1, d);
    if (L->failed) goto fail;
    for (int u = 0; u < n_ramps; u++) { /* t_k, k = u - 1 */
        for (int i = 0; i < 10; i++) {
            AT(w1, u, a->offset + digit[i]) = (float)i;
            AT(w1, u, b->offset + digit[i]) = (float)i;
        }
        AT(w1, u, carry->offset) = 1.0f;
        AT(b1, 0, u) = (float)-(u - 1);
    }
    for (int v = 0; v < 20; v++) { /* [s = v] = t_{v-1} - 2 t_v + t_{v+1}: units v, v+1, v+2 */
        int row = out->offset + digit[v % 10];
        AT(w2, row, v) += 1.0f;
        AT(w2, row, v + 1) += -2.0f;
        AT(w2, row, v + 2) += 1.0f;
    }
    AT(w2, carry->offset, 10) = 1.0f;  /* + t_9 */
    AT(w2, carry->offset, 11) = -1.0f; /* - t_10 */
    AT(w1, n_ramps, carry->offset) = 1.0f;      /* ReLU(carry) */
    AT(w1, n_ramps + 1, carry->offset) = -1.0f; /* ReLU(-carry) */
    AT(w2, carry->offset, n_ramps) = -1.0f;     /* - carry */
    AT(w2, carry->offset, n_ramps + 1) = 1.0f;
    emit_mlp_act(L, li, op, TF_ACT_RELU, w1, b1, w2, b2);
    return;
fail:
    free(w1.w), free(b1.w), free(w2.w), free(b2.w);
}

/* DiffPos(a, b) -> dist at -O: GELU(z) + GELU(-z) = z erf(z / sqrt 2)
 * twice, once on z = c (a.sin - b.sin) and once on z = c (a.cos - b.cos):
 * four units. The seed's single z = 100 ds + 1000 dc vanishes along a
 * direction, so two neighbouring positions near that angle (1.5 and 51.5
 * steps at period 100) give |z| = 0.34 and a distance of 0.09, which IsZero
 * reads as near 0. Apart, two distinct positions differ by at least
 * 2 sin(pi/P) / sqrt 2 in sin or in cos; c = 100 sin(pi/100) / sin(pi/P)
 * (100 at period 100) makes that |z| >= 4.44 and the distance at least as
 * much; equal positions a float error e apart give about 0.8 (c e)^2. */
void lower_diff_pos_opt(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model, P = L->ir->period;
    const TfIrReg *a = reg(L, op->plan->args[0].reg), *b = reg(L, op->plan->args[1].reg);
    const TfIrReg *dist = reg(L, op->dest);
    double c = 100.0 * sin(M_PI / 100.0) / sin(M_PI / (double)P);
    Mat w1 = lower_mat(L, 4, d), b1 = lower_mat(L, 1, 4), w2 = lower_mat(L, d, 4), b2 = lower_mat(L, 1, d);
    if (L->failed) goto fail;
    for (int u = 0; u < 4; u++) {
        int col = u / 2; /* 0: sin, 1: cos */
        float g = (float)(u % 2 ? -c : c);
        AT(w1, u, a->offset + col) = g;
        AT(w1, u, b->offset + col) = -g;
        AT(w2, dist->offset, u) = 1.0f;
    }
    emit_mlp(L, li, op, w1, b1, w2, b2);
    return;
fail:
    free(w1.w), free(b1.w), free(w2.w), free(b2.w);
}

/* CopyOnMatch(m, src) -> dst at -O: the seed's units 0.1 act(100 m + 100
 * src_i - 190) with ReLU, which is exact (1.0) where m and src_i are 1. */
void lower_copy_on_match_opt(Lowerer *L, int li, const TfIrOp *op) {
    int d = L->ir->d_model;
    const TfIrReg *match = reg(L, op->plan->args[0].reg), *src = reg(L, op->plan->args[1].reg);
    const TfIrReg *dst = reg(L, op->dest);
    int n = src->size;
    Mat w1 = lower_mat(L, n, d), b1 = lower_mat(L, 1, n), w2 = lower_mat(L, d, n), b2 = lower_mat(L, 1, d);
    if (L->failed) goto fail;
    for (int i = 0; i < n; i++) {
        AT(w1, i, match->offset) = 100.0f;
        AT(w1, i, src->offset + i) = 100.0f;
        AT(b1, 0, i) = -190.0f;
        AT(w2, dst->offset + i, i) = 0.1f;
    }
    emit_mlp_act(L, li, op, TF_ACT_RELU, w1, b1, w2, b2);
    return;
fail:
    free(w1.w), free(b1.w), free(w2.w), free(b2.w);
}

/* How many positions seed 001's FindAndStore (-O0) holds for. Its query is
 * 1e10 s_i (+1 on the token's column, -1 on every other), s_i the sum of the
 * query row, and its key the row itself, so key k scores 1e10 s_i v_k /
 * sqrt(d) with v_k = 2 [token k is c] - S_k (S_k the row's sum): the right
 * key wins only while s_i > 0 and v_a - v_k > 0 for the one c at a and every
 * other key k <= i (docs/language.md, FindAndStore). The sums are those of
 * the embedding (1 for the token, sin + cos of the position) and of what the
 * FindAndStores before it wrote at that position: the position of the key
 * that won there, the c once found, or before it whichever key scored
 * highest (a function of the sums alone, as no other column is written yet).
 * Each run of FindAndStores at the start of the program is followed so, in
 * double, for every place of its characters (once each, distinct) and every
 * read position i at or after them; the first i where a layer takes another
 * key, or wins by less than MIN_WIN (in units of 1e10/sqrt(d): the float32
 * sums of the +-1e10 query against a row of |sum| <= 10 err by under 1e-4
 * of it), is the number of positions. A FindAndStore after another op reads
 * what that op wrote, which this does not follow: the positions stay those
 * of the run before it (tfprove decides the rest). With more than three
 * characters to place: no limit is derived (P). At period 100 the adder's
 * three hold up to position 35: with '=' at 12 and '+' at 36, the position
 * read, find_plus takes position 13 instead (36 rows). */
#define SEED_FIND_MIN_WIN 1e-3
#define SEED_FIND_MAX_CHARS 3

typedef struct SeedFind {
    int n_layers, n_chars, P;
    int chr[SEED_FIND_MAX_CHARS * 8]; /* per layer: its character's index in place[] */
    double *sc, *rest, *add;          /* [P]: sin + cos of each position; the row's other sums; a layer's output */
} SeedFind;

/* The first read position (>= every place) where a layer of F fails, or P. */
static int seed_find_first_failure(SeedFind *F, const int *place, int last) {
    int P = F->P, fail = P;
    for (int j = 0; j < P; j++) F->rest[j] = F->sc[j];
    for (int l = 0; l < F->n_layers; l++) {
        int a = place[F->chr[l]];
        double hi1 = -INFINITY, hi2 = -INFINITY, lo1 = INFINITY, lo2 = INFINITY;
        int khi = -1, klo = -1;
        for (int j = 0; j < P; j++) {
            double v = (j == a ? 1.0 : -1.0) - F->rest[j];
            if (v > hi1) hi2 = hi1, hi1 = v, khi = j;
            else if (v > hi2) hi2 = v;
            if (v < lo1) lo2 = lo1, lo1 = v, klo = j;
            else if (v < lo2) lo2 = v;
            double s = 1.0 + F->rest[j];
            int k = s >= 0 ? khi : klo;
            double win = s >= 0 ? s * (hi1 - hi2) : -s * (lo2 - lo1);
            F->add[j] = F->sc[k];
            if (j >= last && j < fail && (k != a || fabs(s) < SEED_FIND_MIN_WIN || win < SEED_FIND_MIN_WIN))
                fail = j;
        }
        for (int j = 0; j < P; j++) F->rest[j] += F->add[j];
    }
    return fail;
}

static int seed_positions(const Lowerer *L, int P) {
    const TfIr *ir = L->ir;
    if (L->opt) return P;
    SeedFind F = {0, 0, P, {0}, NULL, NULL, NULL};
    int chars[SEED_FIND_MAX_CHARS];
    for (int i = 0; i < ir->n_ops && ir->ops[i].op == TF_OP_FIND_AND_STORE; i++) {
        if (F.n_layers == (int)(sizeof F.chr / sizeof F.chr[0])) break;
        int tok = ir->ops[i].plan->args[0].tok, c = 0;
        while (c < F.n_chars && chars[c] != tok) c++;
        if (c == F.n_chars) {
            if (c == SEED_FIND_MAX_CHARS) return P;
            chars[F.n_chars++] = tok;
        }
        F.chr[F.n_layers++] = c;
    }
    if (F.n_layers == 0) return P;
    F.sc = malloc((size_t)P * sizeof *F.sc), F.rest = malloc((size_t)P * sizeof *F.rest);
    F.add = malloc((size_t)P * sizeof *F.add);
    int limit = P;
    if (F.sc && F.rest && F.add) {
        for (int j = 0; j < P; j++) {
            double a = (double)j * (2.0 * M_PI) / (double)ir->period;
            F.sc[j] = (double)(float)sin(a) + (double)(float)cos(a); // as the embedding stores them
        }
        int place[SEED_FIND_MAX_CHARS] = {0}, n = F.n_chars;
        for (;;) { // every placement of distinct positions, the first character fastest
            int ok = 1, last = 0;
            for (int c = 0; c < n; c++) {
                for (int e = 0; e < c; e++) ok &= place[e] != place[c];
                if (place[c] > last) last = place[c];
            }
            if (ok && last < limit) {
                int f = seed_find_first_failure(&F, place, last);
                if (f < limit) limit = f;
            }
            int c = 0;
            while (c < n && ++place[c] == P) place[c++] = 0;
            if (c == n) break;
        }
    }
    free(F.sc), free(F.rest), free(F.add);
    return limit < 2 ? 2 : limit;
}

/* Whether op is a table Map of `tokens` alone or `indices` alone that the
 * embedding holds (L->fold): its value is a function of the token, or of
 * the position, so the token (position) embedding's row can carry it, exact
 * where an MLP's units would round, and the MLP goes. A Map with a
 * run-time check keeps its layer (the check follows a layer). */
int lower_folded(const Lowerer *L, const TfIrOp *op) {
    const TfOpPlan *p = op->plan;
    if (!L->fold || !p || p->form != TF_PLAN_TABLE || p->n_in != 1 || p->check) return 0;
    return p->in[0] == TF_IR_REG_TOKENS || (L->ir->indices_reg >= 0 && p->in[0] == L->ir->indices_reg);
}

/* A folded table (above) into the token embedding te or the position
 * embedding pe: the row of each token (position) gets the one-hot of the
 * table's value there, or the number; the BOS's row, and position 0's,
 * stay zero, as every general op writes zeros at the BOS. A combination
 * with no value writes nothing, as no unit of the table would fire. */
static void fold_table(Lowerer *L, const TfIrOp *op, Mat te, Mat pe) {
    const TfIr *ir = L->ir;
    const TfOpPlan *p = op->plan;
    int r = p->in[0], tok = r == TF_IR_REG_TOKENS, off = ir->regs[p->dest].offset;
    int dest_cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL;
    const TfRegFacts *f = &ir->regs[r].facts;
    Mat M = tok ? te : pe;
    for (int v = 0; v < f->n_vals && v < p->n_combo; v++) { // one input: combination v is value v
        int row = values_column(ir, r, f->vals[v]); // the token, or the position
        if (row < 0 || row >= (tok ? ir->n_input : M.rows) || (tok ? row == ir->bos : row == 0))
            continue;
        if (dest_cat && p->combo_col[v] >= 0) {
            AT(M, row, off + p->combo_col[v]) = 1.0f;
            const TfIrReg *R = &ir->regs[p->dest];
            for (int f = 0; f < R->n_feat; f++) // points (compiler/angles.h)
                AT(M, row, ir->regs[R->feat[f].reg].offset) = (float)R->feat[f].val[p->combo_col[v]];
        }
        else if (!dest_cat) AT(M, row, off) = (float)p->combo_num[v];
    }
}

/* The unembedding of an output held as a number y (compiler/numbers.h):
 * value v's token scores 2 v y - v^2, which is y^2 - (y - v)^2, so the
 * nearest value's token scores highest; a token no value spells scores
 * below every value's (v^2 >= 0 at y = v, and the bias is -1 - max |v|). */
static void unembed_number(Lowerer *L, Mat un) {
    const TfIr *ir = L->ir;
    const TfIrReg *out = reg(L, ir->output_reg);
    const TfRegFacts *g = &out->facts;
    Mat ub = lower_mat(L, 1, ir->n_vocab);
    if (L->failed) {
        free(un.w), free(ub.w);
        return;
    }
    double most = 0;
    for (int i = 0; i < g->n_vals; i++) most = fmax(most, fabs(numbers_value(g->vals, g->n_vals, g->vals[i])));
    for (int t = 0; t < ir->n_vocab; t++) AT(ub, 0, t) = (float)(-1.0 - most);
    for (int i = 0; i < g->n_vals; i++) {
        int t = values_token_of(ir, g->vals[i]);
        double v = numbers_value(g->vals, g->n_vals, g->vals[i]); // a token no number spells: its code
        if (t < 0) continue;
        AT(un, t, out->offset) = (float)(2.0 * v);
        AT(ub, 0, t) = (float)(-v * v);
    }
    L->share = 0; // never shared (below)
    L->m->unembed = lower_emit(L, TF_TENSOR_UNEMBED, un);
    L->m->unembed_bias = lower_emit(L, TF_TENSOR_UNEMBED_BIAS, ub);
    L->share = 1;
}

/* Token one-hot into `tokens`, sin/cos of 2 pi p / period into `pos`, the
 * position one-hot into `indices` (with maxlen), the folded Maps (above),
 * and the output register
 * read back onto the vocabulary (a categorical one: each value onto its
 * token, integers 0..9 onto the digits). */
static void lower_embeddings(Lowerer *L) {
    const TfIr *ir = L->ir;
    int d = ir->d_model, V = ir->n_vocab, P = L->m->max_len;
    const TfIrReg *toks = reg(L, TF_IR_REG_TOKENS), *pos = reg(L, TF_IR_REG_POS);
    const TfIrReg *out = reg(L, ir->output_reg);
    Mat te = lower_mat(L, V, d), pe = lower_mat(L, P, d), un = lower_mat(L, V, d);
    if (L->failed) {
        free(te.w), free(pe.w), free(un.w);
        return;
    }
    // An output-only token's row stays zero: no prompt holds it.
    for (int t = 0; t < ir->n_input; t++) AT(te, t, toks->offset + t) = 1.0f;
    for (int p = 0; p < P; p++) {
        double a = (double)p * (2.0 * M_PI) / (double)ir->period;
        AT(pe, p, pos->offset) = (float)sin(a);
        AT(pe, p, pos->offset + 1) = (float)cos(a);
        if (ir->indices_reg < 0) continue;
        const TfIrReg *R = reg(L, ir->indices_reg);
        AT(pe, p, R->offset + p) = 1.0f;
        for (int f = 0; p > 0 && f < R->n_feat; f++) // points (compiler/angles.h), none at the BOS
            AT(pe, p, ir->regs[R->feat[f].reg].offset) = (float)R->feat[f].val[p];
    }
    for (int i = 0; i < ir->n_ops; i++)
        if (lower_folded(L, &ir->ops[i])) fold_table(L, &ir->ops[i], te, pe);
    if (out->kind == TF_REG_CATEGORICAL) {
        const TfRegFacts *g = &ir->regs[ir->output_reg].facts;
        for (int c = 0; c < g->n_vals; c++) {
            int t = values_token_of(ir, g->vals[c]);
            if (t >= 0) AT(un, t, out->offset + c) = 1.0f;
        }
    } else if (out->kind == TF_REG_TOKEN) {
        for (int t = 0; t < ir->n_input; t++) AT(un, t, out->offset + t) = 1.0f;
    }
    L->m->tok_embed = lower_emit(L, TF_TENSOR_TOKEN_EMBED, te);
    L->m->pos_embed = lower_emit(L, TF_TENSOR_POS_EMBED, pe);
    if (ir->output_as_number) { // a `cat` output held as a number
        unembed_number(L, un);
        return;
    }
    if (out->kind == TF_REG_SCALAR) { // a number read at every position: no unembedding
        free(un.w);
        L->m->unembed = -1;
        L->m->output_error_bound = ir->output_error_bound;
        return;
    }
    // Never shared: a file always has its unembed.weight, even when it
    // equals the token embedding (`vocab "ab"; output tokens;`).
    L->share = 0;
    L->m->unembed = lower_emit(L, TF_TENSOR_UNEMBED, un);
    L->share = 1;
}

/* The run-time check an op's plan asks for: its destination, after its
 * layer, within 1 / (2 max_len) of one value's one-hot: the widest bound
 * that still fails every mixture (among at most max_len positions a second
 * value holds at least 1 / maxlen of the mean), so that one value passes
 * whatever leak and rounding the validator has to allow for it (tfprove
 * proves that it does). The analysis's own bound for the op when it is
 * wider (compiler/select.c: the value's error, the softmax's leak). */
static void add_check(Lowerer *L, const TfIrOp *op) {
    char text[160];
    const TfIr *ir = L->ir;
    snprintf(text, sizeof text, "%s -> %s", tf_ops[op->op].name, ir->regs[op->plan->dest].name);
    TfCheck widest = {.bound = -1}; // model_check_bound's rule for a file without one
    double bound = fmax(ir->regs[op->plan->dest].facts.err, model_check_bound(L->m, &widest));
    // A bound of 0.5 or more could not tell one value from two: the loosest
    // one that still can (the leak alone stays below 0.25, compiler/select.c).
    if (!(bound >= 0 && bound < 0.5)) bound = 0.49;
    if (model_add_check(L->m, op->plan->dest, L->m->n_layers - 1, op->stmt->loc.line, text, bound,
                        L->err) < 0)
        L->failed = 1;
}

/* One op's layer, by its plan's form: a seed plan is the construction its
 * row of the op table (compiler/ops.c) names at this opt level; any other
 * form is compiler/lower_general.c's, with the run-time check it asks for. */
static void lower_op(Lowerer *L, int li, const TfIrOp *op) {
    if (op->plan->form == TF_PLAN_SEED) {
        tf_ops[op->op].lower[L->opt](L, li, op);
        return;
    }
    lower_general(L, op);
    if (op->plan->check && !L->failed) add_check(L, op);
}

TfModel *lower_program(const TfIr *ir, int opt_level, int fold, int all_rows, TfError *err) {
    Lowerer L = {ir, opt_level > 0, model_new(), err, {0}, 0, 1, fold && opt_level > 0,
                 fold && opt_level > 0 && !all_rows};
    if (!L.m) {
        tf_error_set(err, "out of memory");
        return NULL;
    }
    TfModel *m = L.m;
    L.tensors.m = m;
    m->d_model = ir->d_model;
    m->period = ir->period;
    m->max_len = seed_positions(&L, ir->maxlen > 0 ? ir->maxlen : ir->period);
    m->generate = ir->generate;
    m->output_reg = ir->output_reg;
    m->every_position = ir->every_position;
    m->bos = ir->bos;
    m->stop_token = ir->stop_token;
    const char *names[256];
    char one[256][2];
    for (int t = 0; t < ir->n_vocab; t++) names[t] = check_token_name(ir, t, one[t]);
    if (model_set_vocab(m, names, ir->n_vocab, ir->n_vocab - ir->n_input, err) < 0) {
        model_free(m);
        return NULL;
    }
    for (int r = 0; r < ir->n_regs && !L.failed; r++) {
        const TfIrReg *x = &ir->regs[r];
        if (x->kind == TF_REG_CATEGORICAL) {
            if (model_add_categorical(m, x->name, x->offset, x->size,
                                      (const char *const *)ir->regs[r].facts.labels, err) < 0)
                L.failed = 1;
        } else if (model_add_register(m, x->name, x->kind, x->offset, x->size, err) < 0) {
            L.failed = 1;
        }
    }
    // The embeddings first, so that the file opens with them.
    lower_embeddings(&L);
    for (int i = 0; i < ir->n_ops && !L.failed; i++)
        if (!lower_folded(&L, &ir->ops[i])) lower_op(&L, i, &ir->ops[i]);
    tensors_free(&L.tensors);
    if (L.failed || model_name_tensors(m, err) < 0 || model_validate(m, err) < 0) {
        model_free(m);
        return NULL;
    }
    return m;
}
