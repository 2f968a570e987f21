/* lower_general.c: the weights of the general ops' plans (compiler/values.h,
 * TfOpPlan): tables, staircases, linear and gated MLPs, select-and-aggregate
 * heads. Every layer writes zeros at the BOS position. The matrices are
 * described in docs/language.md (Map, Aggregate, Count, and "Layers: ops
 * side by side"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubes.h"
#include "lower_internal.h"
#include "plans.h"
#include "values.h"


static int col(const TfIr *ir, int r, TfVal v) {
    int c = values_column(ir, r, v);
    return c < 0 ? -1 : ir->regs[r].offset + c;
}

/* Point f of register r (TfIrReg.feat) where it holds its column c's
 * value; 0 where it holds none (c < 0). */
static double feat_at(const TfIrReg *r, int f, int c) { return c < 0 ? 0 : r->feat[f].val[c]; }

/* The points a pair h, h + 1 writes besides the dest's column: the result
 * on (c) less the result off (c_off, -1 for none). */
static void feat_pair(const TfIr *ir, const TfOpPlan *p, Mat w2, int h, int c, int c_off) {
    const TfIrReg *R = &ir->regs[p->dest];
    for (int f = 0; f < R->n_feat; f++) {
        double v = feat_at(R, f, c) - feat_at(R, f, c_off);
        if (v == 0) continue;
        int oc = ir->regs[R->feat[f].reg].offset;
        AT(w2, oc, h) = (float)v;
        AT(w2, oc, h + 1) = (float)-v;
    }
}

static void add_mlp(Lowerer *L, const TfIrOp *op, Mat w1, Mat b1, Mat w2, Mat b2) {
    lower_add_mlp(L, op, TF_ACT_RELU, w1, b1, w2, b2);
}

/* Two ReLU units h = ReLU(u + 1/2), h' = ReLU(u - 1/2) with u = w.x + b:
 * their difference is a step from 0 (u <= -1/2) to 1 (u >= 1/2). */
static void step_pair(Mat b1, int h, double bias) {
    AT(b1, 0, h) = (float)(bias + 0.5);
    AT(b1, 0, h + 1) = (float)(bias - 0.5);
}

/* |x| at the BOS for a staircase over register r: what r holds there (a
 * Count's fraction is 1) is at most the larger of 1 and its values. */
static double bos_bound(const TfIr *ir, int r) {
    const TfRegFacts *g = &ir->regs[r].facts;
    double big = 1.0;
    for (int v = 0; v < g->n_vals; v++) big = fmax(big, fabs(g->vals[v].x));
    return big;
}

/* One step pair per cube of the table with a result (compiler/cubes.h),
 * reading the k inputs the cube restricts, each the columns of its set of
 * values: u = 2 (sum of those columns) - 2k + 1 is 1 when each holds one of
 * its set's values and -1 or less when one does not (k = 0: a constant 1).
 * The BOS column, weighted -2(k + 1), turns every unit off at the BOS,
 * where `indices` or a default may hold a value. */
static void lower_table(Lowerer *L, const TfIrOp *op, const TfOpPlan *p) {
    const TfIr *ir = L->ir;
    int d = ir->d_model, dest_cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL;
    TfCubes cubes;
    if (cubes_of_table(ir, p, &cubes) < 0) {
        if (!L->failed) tf_error_set(L->err, "out of memory for the cubes of a table");
        L->failed = 1;
        return;
    }
    int H = 2 * (cubes.n > 0 ? cubes.n : 1);
    Mat w1 = lower_mat(L, H, d), b1 = lower_mat(L, 1, H), w2 = lower_mat(L, d, H),
        b2 = lower_mat(L, 1, d);
    if (L->failed) {
        (void)(free(w1.w), free(b1.w), free(w2.w), free(b2.w));
        cubes_free(&cubes);
        return;
    }
    int bos_col = ir->bos >= 0 ? ir->regs[TF_IR_REG_TOKENS].offset + ir->bos : -1;
    for (int u = 0; u < cubes.n; u++) {
        const TfCube *cb = &cubes.cube[u];
        int h = 2 * u, k = 0;
        for (int i = 0; i < p->n_in; i++) {
            if (cb->set[i] < 0) continue; // free: the cube reads no column of it
            int n;
            const int *v = cubes_set(&cubes, cb->set[i], &n);
            for (int q = 0; q < n; q++) { // 1 when it holds one of the set's values
                int cc = col(ir, p->in[i], ir->regs[p->in[i]].facts.vals[v[q]]);
                AT(w1, h, cc) += 2.0f;
                AT(w1, h + 1, cc) += 2.0f;
            }
            k++;
        }
        if (bos_col >= 0) {
            AT(w1, h, bos_col) = (float)(-2.0 * (k + 1));
            AT(w1, h + 1, bos_col) = (float)(-2.0 * (k + 1));
        }
        step_pair(b1, h, -2.0 * k + 1.0);
        if (dest_cat) {
            int oc = ir->regs[p->dest].offset + p->combo_col[cb->combo];
            AT(w2, oc, h) = 1.0f;
            AT(w2, oc, h + 1) = -1.0f;
            feat_pair(ir, p, w2, h, p->combo_col[cb->combo], -1);
        } else {
            int oc = ir->regs[p->dest].offset;
            AT(w2, oc, h) = (float)p->combo_num[cb->combo];
            AT(w2, oc, h + 1) = (float)-p->combo_num[cb->combo];
        }
    }
    cubes_free(&cubes);
    add_mlp(L, op, w1, b1, w2, b2);
}

/* Unit h's fc1 row reads K x for an x_linear staircase's x: K times each
 * numeric input's coefficient on its column, K h(a) on a's one-hot (x's
 * constant goes in the bias). */
static void x_linear_terms(const TfIr *ir, const TfOpPlan *p, Mat w1, int h, double K) {
    for (int k = 0; k < p->n_in; k++) {
        const TfRegFacts *g = &ir->regs[p->in[k]].facts;
        for (int j = 0; p->in_coef[k] && j < g->n_vals; j++) { // h(a): a's one-hot
            int c = col(ir, p->in[k], g->vals[j]);
            if (c < 0 || p->in_coef[k][j] == 0) continue;
            AT(w1, h, c) += (float)(K * p->in_coef[k][j]);
        }
        if (p->in_coef[k]) continue;
        AT(w1, h, ir->regs[p->in[k]].offset) += (float)(K * p->coef[k]);
    }
}

static void lower_staircase(Lowerer *L, const TfIrOp *op, const TfOpPlan *p) {
    const TfIr *ir = L->ir;
    int d = ir->d_model, n = p->n_x, dest_cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL;
    int H = plans_mlp_units(ir, p);
    Mat w1 = lower_mat(L, H, d), b1 = lower_mat(L, 1, H), w2 = lower_mat(L, d, H),
        b2 = lower_mat(L, 1, d);
    if (L->failed) { (void)(free(w1.w), free(b1.w), free(w2.w), free(b2.w)); return; }
    int bos_col = ir->bos >= 0 ? ir->regs[TF_IR_REG_TOKENS].offset + ir->bos : -1;
    int xc = ir->regs[p->in[0]].offset, oc = ir->regs[p->dest].offset;
    double xmax = 0;
    for (int i = 0; i < n; i++) xmax = fmax(xmax, fabs(p->xs[i]));
    if (p->x_linear) {
        // x at the BOS is the sum of what its inputs hold there (a Count's
        // fraction is 1, an Aggregate's default): bound it too, so that the
        // steps stay off at the BOS whatever x is there.
        double at_bos = 0;
        for (int k = 0; k < p->n_in; k++) {
            at_bos += fabs(p->coef[k]) * bos_bound(ir, p->in[k]);
            for (int j = 0; p->in_coef[k] && j < ir->regs[p->in[k]].facts.n_vals; j++)
                at_bos += fabs(p->in_coef[k][j]); // a one-hot's columns, any of them on
        }
        xmax = fmax(xmax, at_bos + fabs(p->c0));
    }
    // Unit 0: 1 everywhere but at the BOS (the value at the lowest x; with
    // x_down, at the highest, each step then on below its threshold).
    int down = p->x_down && !p->x_linear, base = down ? n - 1 : 0;
    AT(b1, 0, 0) = 1.0f;
    if (bos_col >= 0) AT(w1, 0, bos_col) = -1.0f;
    if (dest_cat) {
        if (p->x_col[base] >= 0) AT(w2, oc + p->x_col[base], 0) = 1.0f;
        const TfIrReg *R = &ir->regs[p->dest];
        for (int f = 0; f < R->n_feat; f++)
            AT(w2, ir->regs[R->feat[f].reg].offset, 0) = (float)feat_at(R, f, p->x_col[base]);
    } else {
        AT(w2, oc, 0) = (float)plans_residual(ir, p, base);
    }
    double slope = plans_slope(ir, p);
    if (slope != 0) { // the last unit: slope ReLU(x - xs[0] + 1), off at the BOS
        if (p->x_linear) {
            x_linear_terms(ir, p, w1, H - 1, 1.0);
            AT(b1, 0, H - 1) = (float)(1 - p->xs[0] + p->c0);
            if (bos_col >= 0) AT(w1, H - 1, bos_col) = (float)-(xmax + fabs(p->xs[0]) + 2 + fabs(p->c0));
        } else {
            AT(w1, H - 1, xc) = 1.0f;
            AT(b1, 0, H - 1) = (float)(1 - p->xs[0]);
            if (bos_col >= 0) AT(w1, H - 1, bos_col) = (float)-(bos_bound(ir, p->in[0]) + fabs(p->xs[0]) + 2);
        }
        AT(w2, oc, H - 1) = (float)slope;
    }
    for (int i = 0, h = 1; i + 1 < n; i++) {
        if (dest_cat ? p->x_col[i] == p->x_col[i + 1]
                     : plans_residual(ir, p, i) == plans_residual(ir, p, i + 1))
            continue; // no step between neighbours with the same result
        double m = (p->xs[i] + p->xs[i + 1]) / 2, K = 2.0 / (p->xs[i + 1] - p->xs[i]);
        double c0 = 0; // x's constant (a composed LINEAR Map's), off at the BOS
        if (p->x_linear) {
            x_linear_terms(ir, p, w1, h, K);
            x_linear_terms(ir, p, w1, h + 1, K);
            c0 = p->c0;
        } else {
            AT(w1, h, xc) = (float)(down ? -K : K);
            AT(w1, h + 1, xc) = (float)(down ? -K : K);
        }
        if (bos_col >= 0) {
            float off = (float)(-(K * (xmax + fabs(m)) + 2.0) - K * c0);
            AT(w1, h, bos_col) = off;
            AT(w1, h + 1, bos_col) = off;
        }
        step_pair(b1, h, down ? K * m : -K * m + K * c0);
        int on = down ? i : i + 1, off = down ? i + 1 : i;
        if (dest_cat) {
            // Crossing into value `on`: its column on, value `off`'s off.
            if (p->x_col[on] >= 0) {
                AT(w2, oc + p->x_col[on], h) += 1.0f;
                AT(w2, oc + p->x_col[on], h + 1) -= 1.0f;
            }
            if (p->x_col[off] >= 0) {
                AT(w2, oc + p->x_col[off], h) -= 1.0f;
                AT(w2, oc + p->x_col[off], h + 1) += 1.0f;
            }
            feat_pair(ir, p, w2, h, p->x_col[on], p->x_col[off]);
        } else {
            double delta = plans_residual(ir, p, on) - plans_residual(ir, p, off);
            AT(w2, oc, h) = (float)delta;
            AT(w2, oc, h + 1) = (float)-delta;
        }
        h += 2;
    }
    add_mlp(L, op, w1, b1, w2, b2);
}

/* SPLIT: per value a of the categorical in[1] (its column ca), a staircase
 * over x = in[0]: a base pair 2 ca - 1 that gives a's result at the lowest
 * x, and a pair per step K (x - m) + G (ca - 1), G so large that the step
 * is off unless a is the value. The BOS turns every pair off. */
static void lower_split(Lowerer *L, const TfIrOp *op, const TfOpPlan *p) {
    const TfIr *ir = L->ir;
    int d = ir->d_model, n = p->n_x, dest_cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL;
    int H = plans_mlp_units(ir, p);
    Mat w1 = lower_mat(L, H, d), b1 = lower_mat(L, 1, H), w2 = lower_mat(L, d, H),
        b2 = lower_mat(L, 1, d);
    if (L->failed) { (void)(free(w1.w), free(b1.w), free(w2.w), free(b2.w)); return; }
    int bos_col = ir->bos >= 0 ? ir->regs[TF_IR_REG_TOKENS].offset + ir->bos : -1;
    int xc = ir->regs[p->in[0]].offset, oc = ir->regs[p->dest].offset;
    double xmax = bos_bound(ir, p->in[0]);
    for (int i = 0; i < n; i++) xmax = fmax(xmax, fabs(p->xs[i]));
    int h = 0;
    for (int a = 0; a < p->n_combo; a++) {
        int ca = col(ir, p->in[1], ir->regs[p->in[1]].facts.vals[a]);
        const int *xcol = dest_cat ? p->x_col + (size_t)a * (size_t)n : NULL;
        const double *xnum = dest_cat ? NULL : p->x_num + (size_t)a * (size_t)n;
        if (dest_cat ? xcol[0] >= 0 : xnum[0] != 0) {
            AT(w1, h, ca) = 2.0f;
            AT(w1, h + 1, ca) = 2.0f;
            if (bos_col >= 0) AT(w1, h, bos_col) = AT(w1, h + 1, bos_col) = -4.0f;
            step_pair(b1, h, -1.0);
            if (dest_cat) {
                AT(w2, oc + xcol[0], h) = 1.0f;
                AT(w2, oc + xcol[0], h + 1) = -1.0f;
            } else {
                AT(w2, oc, h) = (float)xnum[0];
                AT(w2, oc, h + 1) = (float)-xnum[0];
            }
            h += 2;
        }
        for (int i = 0; i + 1 < n; i++) {
            if (dest_cat ? xcol[i] == xcol[i + 1] : xnum[i] == xnum[i + 1]) continue;
            double m = (p->xs[i] + p->xs[i + 1]) / 2, K = 2.0 / (p->xs[i + 1] - p->xs[i]);
            double G = K * (xmax + fabs(m)) + 2.0;
            AT(w1, h, xc) = AT(w1, h + 1, xc) = (float)K;
            AT(w1, h, ca) = AT(w1, h + 1, ca) = (float)G;
            if (bos_col >= 0) AT(w1, h, bos_col) = AT(w1, h + 1, bos_col) = (float)-G;
            step_pair(b1, h, -K * m - G);
            if (dest_cat) {
                if (xcol[i + 1] >= 0) {
                    AT(w2, oc + xcol[i + 1], h) += 1.0f;
                    AT(w2, oc + xcol[i + 1], h + 1) -= 1.0f;
                }
                if (xcol[i] >= 0) {
                    AT(w2, oc + xcol[i], h) -= 1.0f;
                    AT(w2, oc + xcol[i], h + 1) += 1.0f;
                }
            } else {
                double delta = xnum[i + 1] - xnum[i];
                AT(w2, oc, h) = (float)delta;
                AT(w2, oc, h + 1) = (float)-delta;
            }
            h += 2;
        }
    }
    add_mlp(L, op, w1, b1, w2, b2);
}

static void lower_linear(Lowerer *L, const TfIrOp *op, const TfOpPlan *p) {
    const TfIr *ir = L->ir;
    int d = ir->d_model;
    Mat w1 = lower_mat(L, 2, d), b1 = lower_mat(L, 1, 2), w2 = lower_mat(L, d, 2),
        b2 = lower_mat(L, 1, d);
    if (L->failed) { (void)(free(w1.w), free(b1.w), free(w2.w), free(b2.w)); return; }
    int bos_col = ir->bos >= 0 ? ir->regs[TF_IR_REG_TOKENS].offset + ir->bos : -1;
    for (int i = 0; i < p->n_in; i++) {
        int c = ir->regs[p->in[i]].offset;
        AT(w1, 0, c) += (float)p->coef[i];
        AT(w1, 1, c) -= (float)p->coef[i];
    }
    AT(b1, 0, 0) = (float)p->c0;
    AT(b1, 0, 1) = (float)-p->c0;
    if (bos_col >= 0) { // the constant is off at the BOS (its inputs are 0 there)
        AT(w1, 0, bos_col) = (float)-p->c0;
        AT(w1, 1, bos_col) = (float)p->c0;
    }
    int oc = ir->regs[p->dest].offset;
    AT(w2, oc, 0) = 1.0f;
    AT(w2, oc, 1) = -1.0f;
    add_mlp(L, op, w1, b1, w2, b2);
}

/* Whether register r holds exact one-hots: `tokens`, `indices` and the Maps
 * the embedding holds (no MLP's rounding). */
static int exact_reg(const Lowerer *L, int r) {
    const TfIr *ir = L->ir;
    if (r == TF_IR_REG_TOKENS || r == ir->indices_reg) return 1;
    for (int i = 0; i < ir->n_ops; i++)
        if (ir->ops[i].plan && ir->ops[i].plan->dest == r) return lower_folded(L, &ir->ops[i]);
    return 0;
}

/* Most key values a rank-3 term compares: its scores are sums of integers
 * below 4 * 64^2, exact in float32 in any order, and far inside the gap of
 * 1 when a scheduled head's query carries a scale ratio. */
#define RANK3_MAX_KEYS 64

/* A term that picks at most one key value for each query value (k.indices
 * == q.p, a copy from one position) compared by rank 3 instead of one row
 * per query value: with y the key's value index and t the one its query
 * value picks, rows (t, 2y), (t^2, -1), (1, 1 - y^2) add up to
 * 1 - (t - y)^2: 1 for the picked key, 0 or less for every other, 0 for the
 * BOS, 0 for every key when the query picks none, as the one-hot rows
 * give. Only where both registers are exact one-hots (the error of a
 * one-hot column would be multiplied by up to y^2) and at -O scheduled
 * (L->fold); in an Aggregate's head, not a Count's (whose 1/(count+1) the
 * validator proves only with a key's score as small as the one-hot rows
 * make it). tq[qi]: the key value index query value qi picks, -1 none. */
static int rank3_term(const Lowerer *L, const struct TfPlanTerm *T, int *tq) {
    const TfIr *ir = L->ir;
    if (!L->fold || T->qreg < 0 || T->kreg < 0 || T->nq <= 3 || T->nk > RANK3_MAX_KEYS ||
        !exact_reg(L, T->qreg) || !exact_reg(L, T->kreg))
        return 0;
    for (int qi = 0; qi < T->nq; qi++) {
        tq[qi] = -1;
        for (int ki = 0; ki < T->nk; ki++) {
            if (!T->P[(size_t)qi * (size_t)T->nk + (size_t)ki]) continue;
            if (T->kreg == ir->indices_reg && ir->regs[T->kreg].facts.vals[ki].x == 0) continue;
            if (tq[qi] >= 0) return 0; // two key values
            tq[qi] = ki;
        }
    }
    return 1;
}

/* Whether query value qi of a (one-hot) term can pick some key: a row
 * whose key weights would all be 0 adds 0 to every score, and is left out
 * (`k.indices <= q.p` where p is below every position). */
static int row_live(const TfIr *ir, const struct TfPlanTerm *T, int qi) {
    for (int ki = 0; ki < T->nk; ki++) {
        if (!T->P[(size_t)qi * (size_t)T->nk + (size_t)ki]) continue;
        if (T->kreg < 0) return 1; // every key but the BOS
        if (!(T->kreg == ir->indices_reg && ir->regs[T->kreg].facts.vals[ki].x == 0)) return 1;
    }
    return 0;
}

/* A rank-3 term's rows row..row+2 (rank3_term): t, t^2, 1 on the query's
 * one-hot against 2y, -1 (off at the BOS), 1 - y^2 on the key's. */
static void rank3_rows(const TfIr *ir, const struct TfPlanTerm *T, const int *tq, int row, Mat q,
                       Mat k, Mat kb, int bos_col) {
    const TfRegFacts *fq = &ir->regs[T->qreg].facts, *fk = &ir->regs[T->kreg].facts;
    for (int qi = 0; qi < T->nq; qi++) {
        if (tq[qi] < 0) continue;
        int c = col(ir, T->qreg, fq->vals[qi]);
        AT(q, row, c) = (float)tq[qi];
        AT(q, row + 1, c) = (float)(tq[qi] * tq[qi]);
        AT(q, row + 2, c) = 1.0f;
    }
    for (int ki = 0; ki < T->nk; ki++) {
        if (T->kreg == ir->indices_reg && fk->vals[ki].x == 0) continue; // the BOS's
        int c = col(ir, T->kreg, fk->vals[ki]);
        if (c == bos_col) continue; // the BOS token: the BOS scores apart
        AT(k, row, c) = (float)(2 * ki);
        AT(k, row + 2, c) = (float)(1 - ki * ki);
    }
    AT(kb, 0, row + 1) = -1.0f; // -t^2 at every key but the BOS
    AT(k, row + 1, bos_col) = 1.0f;
}

/* A term on angles (compiler/angles.h), rows row..row+2: s times the
 * points' dot product, then -s cos c at every key but the BOS. */
static void angle_rows(const TfIr *ir, const struct TfPlanTerm *T, int row, Mat q, Mat qb, Mat k,
                       Mat kb, int bos_col) {
    for (int j = 0; j < 2; j++) {
        AT(q, row + j, ir->regs[T->qa[j]].offset) = (float)T->a_scale;
        AT(k, row + j, ir->regs[T->ka[j]].offset) = 1.0f;
    }
    AT(qb, 0, row + 2) = 1.0f;
    AT(kb, 0, row + 2) = (float)(-T->a_scale * T->a_cos);
    AT(k, row + 2, bos_col) = (float)(T->a_scale * T->a_cos);
}

/* Query: the query register's one-hot, a constant 1 (the BOS's default
 * score) and the BOS indicator (a BOS query reads only the BOS). Key: per
 * query value, the predicate row applied to the key register's one-hot;
 * a rank-3 term (rank3_term) or one on angles takes three rows. */
static void lower_attend(Lowerer *L, const TfIrOp *op, const TfOpPlan *p) {
    const TfIr *ir = L->ir;
    int d = ir->d_model, D = 2;
    int *tq[TF_PLAN_MAX_INPUTS] = {NULL};
    for (int t = 0; t < p->n_terms; t++) {
        tq[t] = malloc((size_t)(p->terms[t].nq > 0 ? p->terms[t].nq : 1) * sizeof(int));
        if (!tq[t]) {
            tf_error_set(L->err, "out of memory");
            L->failed = 1;
        } else if (p->form != TF_PLAN_ATTEND || p->terms[t].angle ||
                   !rank3_term(L, &p->terms[t], tq[t])) {
            free(tq[t]);
            tq[t] = NULL;
        }
        if (tq[t] || p->terms[t].angle) D += 3;
        else
            for (int qi = 0; qi < p->terms[t].nq; qi++) D += !L->prune || row_live(ir, &p->terms[t], qi);
    }
    int bos_col = ir->regs[TF_IR_REG_TOKENS].offset + ir->bos;
    int is_count = p->form == TF_PLAN_COUNT;
    int dest_cat = !is_count && !p->value_numeric;
    int dv = dest_cat ? ir->regs[p->dest].size : 1, d_one = dv;
    const TfIrReg *R = &ir->regs[p->dest];
    for (int f = 0; dest_cat && f < R->n_feat; f++) dv += R->feat[f].from >= 0;
    Mat q = lower_mat(L, D, d), qb = lower_mat(L, 1, D), k = lower_mat(L, D, d),
        kb = lower_mat(L, 1, D), v = lower_mat(L, dv, d), o = lower_mat(L, d, dv);
    if (L->failed) {
        free(q.w), free(qb.w), free(k.w), free(kb.w), free(v.w), free(o.w);
        for (int t = 0; t < p->n_terms; t++) free(tq[t]);
        return;
    }
    int kb_used = 0, row = 0;
    for (int t = 0; t < p->n_terms; t++) {
        const struct TfPlanTerm *T = &p->terms[t];
        if (tq[t] || T->angle) {
            if (tq[t]) rank3_rows(ir, T, tq[t], row, q, k, kb, bos_col);
            else angle_rows(ir, T, row, q, qb, k, kb, bos_col);
            free(tq[t]);
            kb_used = 1;
            row += 3;
            continue;
        }
        for (int qi = 0; qi < T->nq; qi++) {
            if (L->prune && !row_live(ir, T, qi)) continue;
            if (T->qreg >= 0)
                AT(q, row, col(ir, T->qreg, ir->regs[T->qreg].facts.vals[qi])) = 1.0f;
            else
                AT(qb, 0, row) = 1.0f;
            for (int ki = 0; ki < T->nk; ki++) {
                if (!T->P[(size_t)qi * (size_t)T->nk + (size_t)ki]) continue;
                if (T->kreg >= 0) {
                    const TfVal kv = ir->regs[T->kreg].facts.vals[ki];
                    if (T->kreg == ir->indices_reg && kv.x == 0) continue; // the BOS's position
                    AT(k, row, col(ir, T->kreg, kv)) = 1.0f;
                } else { // every key but the BOS
                    AT(kb, 0, row) = 1.0f;
                    AT(k, row, bos_col) = -1.0f;
                    kb_used = 1;
                }
            }
            row++;
        }
    }
    // A key is selected when all n terms hold: score n. The BOS: n - 1/2
    // (Count: n) for every query, and n + 4 for a BOS query.
    double n = p->n_terms;
    AT(qb, 0, row) = 1.0f;
    AT(k, row, bos_col) = (float)(is_count ? n : n - 0.5);
    AT(q, row + 1, bos_col) = 1.0f;
    AT(k, row + 1, bos_col) = (float)(n + 4.0);
    // Values.
    if (is_count) {
        AT(v, 0, bos_col) = 1.0f;
    } else if (p->value_numeric) {
        AT(v, 0, ir->regs[p->vreg].offset) = 1.0f;
        if (p->bos_weight != 0) AT(v, 0, bos_col) = (float)p->bos_weight;
    } else {
        const TfRegFacts *gv = &ir->regs[p->vreg].facts;
        for (int i = 0; i < gv->n_vals; i++) {
            if (p->vreg == ir->indices_reg && gv->vals[i].x == 0) continue;
            int c = values_column(ir, p->dest, gv->vals[i]);
            if (c >= 0) AT(v, c, col(ir, p->vreg, gv->vals[i])) = 1.0f;
        }
        if (p->default_col >= 0) AT(v, p->default_col, bos_col) = 1.0f;
        // Points copied with the value (compiler/angles.c, a chain's
        // copy): the value register's, and the default's at the BOS.
        for (int f = 0, j = d_one; f < R->n_feat; f++) {
            if (R->feat[f].from < 0) continue;
            AT(v, j, ir->regs[R->feat[f].from].offset) = 1.0f;
            AT(v, j, bos_col) = (float)R->feat[f].at_bos;
            AT(o, ir->regs[R->feat[f].reg].offset, j) = 1.0f;
            j++;
        }
    }
    for (int j = 0; j < d_one; j++) AT(o, ir->regs[p->dest].offset + j, j) = 1.0f;

    TfLayer ly = lower_layer_header(L, op, TF_LAYER_ATTENTION);
    q.two_d = k.two_d = v.two_d = o.two_d = 1;
    ly.n_heads = 1;
    ly.d_head = D;
    ly.d_vhead = dv;
    ly.scale = (float)p->beta;
    ly.causal = p->causal;
    ly.query = lower_emit_layer(L, "attn.query.weight", q);
    ly.query_bias = lower_emit_layer(L, "attn.query.bias", qb);
    ly.key = lower_emit_layer(L, "attn.key.weight", k);
    if (kb_used) {
        ly.key_bias = lower_emit_layer(L, "attn.key.bias", kb);
    } else {
        free(kb.w);
    }
    ly.value = lower_emit_layer(L, "attn.value.weight", v);
    ly.output = lower_emit_layer(L, "attn.output.weight", o);
    if (!L->failed && model_add_layer(L->m, &ly, L->err) < 0) L->failed = 1;
}

static void lower_gated(Lowerer *L, const TfIrOp *op, const TfOpPlan *p) {
    const TfIr *ir = L->ir;
    int d = ir->d_model, n_cat = p->n_in - 1;
    int H = 2 * p->n_combo;
    Mat w1 = lower_mat(L, H, d), b1 = lower_mat(L, 1, H), w2 = lower_mat(L, d, H),
        b2 = lower_mat(L, 1, d);
    if (L->failed) {
        free(w1.w), free(b1.w), free(w2.w), free(b2.w);
        return;
    }
    int bos_col = ir->bos >= 0 ? ir->regs[TF_IR_REG_TOKENS].offset + ir->bos : -1;
    int xc = ir->regs[p->in[0]].offset, oc = ir->regs[p->dest].offset;
    double B = p->c0;
    int idx[TF_PLAN_MAX_INPUTS] = {0};
    for (int c = 0; c < p->n_combo; c++) {
        int h = 2 * c;
        // h = ReLU(+-(a + b x) - B (n - sum of the combination's columns)).
        for (int i = 0; i < n_cat; i++) {
            int r = p->in[1 + i];
            int cc = col(ir, r, ir->regs[r].facts.vals[idx[i]]);
            AT(w1, h, cc) += (float)B;
            AT(w1, h + 1, cc) += (float)B;
        }
        AT(w1, h, xc) = (float)p->combo_slope[c];
        AT(w1, h + 1, xc) = (float)-p->combo_slope[c];
        AT(b1, 0, h) = (float)(p->combo_num[c] - B * n_cat);
        AT(b1, 0, h + 1) = (float)(-p->combo_num[c] - B * n_cat);
        if (bos_col >= 0) {
            AT(w1, h, bos_col) = (float)-B;
            AT(w1, h + 1, bos_col) = (float)-B;
        }
        AT(w2, oc, h) = 1.0f;
        AT(w2, oc, h + 1) = -1.0f;
        for (int i = 0; i < n_cat && ++idx[i] == ir->regs[p->in[1 + i]].facts.n_vals; i++) idx[i] = 0;
    }
    add_mlp(L, op, w1, b1, w2, b2);
}

/* The layer of one general op: its plan's form says which construction. */
void lower_general(Lowerer *L, const TfIrOp *op) {
    const TfOpPlan *p = op->plan;
    switch (p->form) {
    case TF_PLAN_TABLE: lower_table(L, op, p); break;
    case TF_PLAN_STAIRCASE: lower_staircase(L, op, p); break;
    case TF_PLAN_LINEAR: lower_linear(L, op, p); break;
    case TF_PLAN_GATED: lower_gated(L, op, p); break;
    case TF_PLAN_SPLIT: lower_split(L, op, p); break;
    case TF_PLAN_ATTEND:
    case TF_PLAN_COUNT: lower_attend(L, op, p); break;
    case TF_PLAN_SEED: // compiler/lower.c's lower_op
    case TF_PLAN_FORM_COUNT: break;
    }
}
