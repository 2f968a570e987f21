/* bounds.c: the float32 error of an MLP plan's result, from the plan
 * (bounds.h). The weights are those compiler/lower_general.c writes, rounded
 * to float32 as it rounds them. */
#include "bounds.h"

#include <math.h>
#include <stdlib.h>

#include "cubes.h"
#include "plans.h"
#include "values_internal.h"

#define U32 EPS32 /* float32's unit roundoff, 2^-24 */

/* How far a float32 sum of n terms, added in any order (a BLAS kernel's:
 * lanes, blocks, the bias last), can be from the exact sum of the products
 * it rounds. mag: sum |terms|; big: the larger of the sum of the positive
 * terms and that of the negative ones, which bounds every partial sum.
 * Each product rounds by u |term|; each of the n - 1 additions by u times
 * its partial sum, at most big plus the error so far E, so
 * E <= u mag + (n - 1) u ((1 + u) big + E). With big = mag this is
 * Higham's gamma_n mag (interval.h); a column where steps cancel (+h, -h')
 * gets about half of it. */
static double sum_err(int n, double mag, double big) {
    if (n <= 1) return U32 * mag;
    double a = (double)(n - 1) * U32;
    return (U32 * mag + a * (1 + U32) * big) / (1 - a) * (1 + 1e-12);
}

/* The float32 weight the lowering writes for w. */
static double f32(double w) { return (double)(float)w; }

/* The largest |value| register r can hold after the BOS, and its error. */
static double reg_max_abs(const TfIr *ir, int r) {
    const TfRegFacts *g = &ir->regs[r].facts;
    double big = 0;
    for (int v = 0; v < g->n_vals; v++) big = fmax(big, fabs(g->vals[v].x));
    return big + g->err;
}

/* One output column's terms as its on units add them: their number, sum
 * |term|, the sums of the positive and of the negative ones, and the error
 * the units and the weights' rounding already carry. */
typedef struct Col {
    int n;
    double mag, pos, neg, err;
} Col;

static void col_add(Col *c, double w, double h, double h_err) {
    double t = fabs(w) * (h + h_err);
    c->n++;
    c->mag += t;
    if (w * h >= 0) c->pos += t;
    else c->neg += t;
    c->err += fabs(w) * h_err;
}

static double col_err(const Col *c) {
    // +2: the bias added last and the residual the column is added to (0).
    return c->err + sum_err(c->n + 2, c->mag, fmax(c->pos, c->neg));
}

/* A step pair h = ReLU(z + 1/2), h' = ReLU(z - 1/2), z = (its x terms) + b,
 * with both units on: each within err of its exact value, at most h in size,
 * and their difference, exact in real arithmetic, off 1 by wdiff (b +- 1/2
 * rounded to float32). xmag: sum |x terms|; n: its terms in fc1 (with the
 * BOS column's and the bias). The BOS column is exactly 0 after the BOS, so
 * its weight adds an exact 0. */
typedef struct Pair {
    double h, err, wdiff;
} Pair;

static Pair on_pair(double z, double xmag, double b, int n) {
    double hi = f32(b + 0.5), lo = f32(b - 0.5);
    double e_hi = sum_err(n, xmag + fabs(hi), xmag + fabs(hi));
    double e_lo = sum_err(n, xmag + fabs(lo), xmag + fabs(lo));
    double e = fmax(e_hi, e_lo);
    // An off unit (z <= -1/2 - its margin) is an exact 0 only while its own
    // rounding stays well inside that margin.
    if (e >= 0.125) e = INFINITY;
    return (Pair){fabs(z) + 0.5 + e, e, fabs(hi - lo - 1)};
}

/* A pair's contribution to a column, through fc2 weights w and -w (the
 * ideal ones; wdiff: the pair's difference in float32 weights, off 1 by
 * that much). */
static void col_pair(Col *c, double w, const Pair *q) {
    double fw = f32(w);
    col_add(c, fw, q->h, q->err);
    col_add(c, -fw, q->h, q->err);
    c->err += fabs(fw) * q->wdiff + fabs(fw - w); // fw (h - h') against w
}

/* TABLE: at any combination of its inputs' values one cube's pair is on
 * (compiler/cubes.h). Its units read the columns of k inputs' sets, z = 2
 * (their sum) - 2k + 1: within 2 sum (set size x error) of 1 when on, of
 * -1 or less when off, and the off ones are exactly 0. The worst cube; if
 * the cubes cannot be had (memory), every set as large as its input. */
static double table_err(const TfIr *ir, const TfOpPlan *p, int cat) {
    TfCubes cubes;
    int have = cubes_of_table(ir, p, &cubes) == 0, n_units = have ? cubes.n : p->n_combo;
    double worst = 0;
    for (int u = 0; u < n_units; u++) {
        int combo = have ? cubes.cube[u].combo : u, n = 2, k = 0;
        if (cat ? p->combo_col[combo] < 0 : p->combo_num[combo] == 0) continue;
        double xmag = 0, z = 1;
        for (int i = 0; i < p->n_in; i++) {
            const TfRegFacts *g = &ir->regs[p->in[i]].facts;
            int size = g->n_vals;
            if (have && cubes.cube[u].set[i] < 0) continue; // free
            if (have) cubes_set(&cubes, cubes.cube[u].set[i], &size);
            xmag += 2 * (1 + size * g->err);
            z += 2 * size * g->err;
            n += size;
            k++;
        }
        Pair q = on_pair(z, xmag, -2.0 * k + 1, n);
        Col col = {0};
        col_pair(&col, cat ? 1.0 : p->combo_num[combo], &q);
        worst = fmax(worst, col_err(&col));
    }
    if (have) cubes_free(&cubes);
    return worst;
}

/* STAIRCASE and SPLIT: every error below grows with x and with the set of
 * steps x has crossed, so the worst is at x's largest value, where every
 * step is on. Per column: the base unit (1, exact: the lowest value's
 * result) and a pair per step into or out of it. A SPLIT plan's steps of
 * value a of in[1] also read a's column, with a gate G, and are off for
 * the other values; per a, a base pair 2 ca - 1 instead of the base unit. */
/* A STAIRCASE's x as fc1 reads it: *ex its error, *xs_abs a bound on the
 * sum of its terms' magnitudes; returns how many terms (an x_linear x: a
 * term per numeric input and per column of a categorical one). */
static int x_terms(const TfIr *ir, const TfOpPlan *p, double *ex, double *xs_abs) {
    *ex = *xs_abs = 0;
    if (!p->x_linear) {
        double xmax = 0;
        for (int i = 0; i < p->n_x; i++) xmax = fmax(xmax, fabs(p->xs[i]));
        *ex = ir->regs[p->in[0]].facts.err;
        *xs_abs = xmax + *ex;
        return 1;
    }
    int nx = 0;
    for (int k = 0; k < p->n_in; k++) {
        const TfRegFacts *g = &ir->regs[p->in[k]].facts;
        if (p->in_coef[k]) { // h(a) from a's one-hot: one column on, each off by err
            double hmax = 0;
            for (int j = 0; j < g->n_vals; j++) {
                hmax = fmax(hmax, fabs(p->in_coef[k][j]));
                *ex += fabs(p->in_coef[k][j]) * g->err;
                *xs_abs += fabs(p->in_coef[k][j]) * g->err;
            }
            *xs_abs += hmax;
            nx += g->n_vals;
            continue;
        }
        *ex += fabs(p->coef[k]) * g->err;
        *xs_abs += fabs(p->coef[k]) * reg_max_abs(ir, p->in[k]);
        nx++;
    }
    return nx;
}

static double stair_err(const TfIr *ir, const TfOpPlan *p, int cat, int a) {
    int split = p->form == TF_PLAN_SPLIT, n = p->n_x;
    const int *xcol = cat ? p->x_col + (size_t)a * (size_t)n : NULL;
    const double *xnum = cat ? NULL : p->x_num + (size_t)a * (size_t)n;
    int n_cols = 1;
    for (int i = 0; cat && i < n; i++) n_cols = xcol[i] >= n_cols ? xcol[i] + 1 : n_cols;
    Col cols[n_cols];
    for (int c = 0; c < n_cols; c++) cols[c] = (Col){0};
    // |x| at its largest and x's error; x's terms in fc1.
    double xtop = p->xs[n - 1], ex, xs_abs, xmax = 0;
    for (int i = 0; i < n; i++) xmax = fmax(xmax, fabs(p->xs[i]));
    int nx = x_terms(ir, p, &ex, &xs_abs);
    // x_down: every step on at x's smallest value instead (the base unit
    // gives the result at the largest).
    int down = p->x_down && !p->x_linear && !split, base = down ? n - 1 : 0;
    double ea = split ? ir->regs[p->in[1]].facts.err : 0;
    // The base: a unit that is 1 (exactly: 1 - 0 x BOS), or a SPLIT pair on
    // 2 ca - 1.
    if (split) {
        if (cat ? xcol[0] >= 0 : xnum[0] != 0) {
            Pair q = on_pair(1 + 2 * ea, 2 * (1 + ea), -1.0, 3);
            col_pair(&cols[cat ? xcol[0] : 0], cat ? 1.0 : xnum[0], &q);
        }
    } else if (cat ? xcol[base] >= 0 : 1) {
        double w = cat ? 1.0 : xnum[base];
        col_add(&cols[cat ? xcol[base] : 0], f32(w), 1, 0);
        cols[cat ? xcol[base] : 0].err += fabs(f32(w) - w);
    }
    for (int i = 0; i + 1 < n; i++) {
        if (cat ? xcol[i] == xcol[i + 1] : xnum[i] == xnum[i + 1]) continue;
        double m = (p->xs[i] + p->xs[i + 1]) / 2, K = 2.0 / (p->xs[i + 1] - p->xs[i]);
        double c0 = p->x_linear ? p->c0 : 0;
        double b = -K * m + K * c0, xmag = K * xs_abs, z = K * (xtop + ex - m);
        int nt = nx + 2;
        if (down) { // on only below m + 1/(2K): x's terms no larger than there
            b = K * m, z = K * (m - p->xs[0] + ex);
            if (!isfinite(on_pair(0, xmag, b, nt).err)) return INFINITY; // off stays off
            xmag = K * (fmax(fabs(p->xs[0]), fabs(m) + 0.5 / K) + ex);
        }
        if (split) {
            double G = K * (xmax + 1 + fabs(m)) + 2.0;
            b -= G;
            xmag += G * (1 + ea);
            z += G * ea;
            nt++;
        }
        Pair q = on_pair(z, xmag, b, nt);
        if (cat) {
            if (xcol[i + 1] >= 0) col_pair(&cols[xcol[i + 1]], 1.0, &q);
            if (xcol[i] >= 0) col_pair(&cols[xcol[i]], 1.0, &q);
        } else {
            col_pair(&cols[0], xnum[i + 1] - xnum[i], &q);
        }
    }
    double worst = 0;
    for (int c = 0; c < n_cols; c++) worst = fmax(worst, col_err(&cols[c]));
    return worst;
}

/* A STAIRCASE with a slope (plans_slope): the staircase of its residual,
 * plus a ReLU(x - xs[0] + 1), exact but for x's error (times |a|), the
 * weights' rounding and fc2's sum, whose terms the steps' bound counts
 * once more. -1 out of memory. */
static double slope_err(const TfIr *ir, const TfOpPlan *p) {
    double a = plans_slope(ir, p), *r = malloc((size_t)p->n_x * sizeof *r);
    if (!r) return -1;
    for (int i = 0; i < p->n_x; i++) r[i] = plans_residual(ir, p, i);
    TfOpPlan t = *p;
    t.slope = 0;
    t.x_num = r;
    double steps = stair_err(ir, &t, 0, 0), ex, xs_abs;
    free(r);
    int nx = x_terms(ir, p, &ex, &xs_abs);
    // The unit's largest value; its input's rounding (an x_linear x: the
    // sum of its terms and the bias, each rounded to float32).
    double c0 = p->x_linear ? p->c0 : 0, b = 1 - p->xs[0] + c0;
    double h = xs_abs + fabs(c0) + fabs(p->xs[0]) + 1;
    double he = p->x_linear ? sum_err(nx + 2, h, h) + U32 * h : U32 * h;
    he += fabs(f32(b) - b);
    for (int k = 0; p->x_linear && k < p->n_in; k++) { // the terms' weights in float32
        const TfRegFacts *g = &ir->regs[p->in[k]].facts;
        double w = 0;
        for (int j = 0; p->in_coef[k] && j < g->n_vals; j++)
            w = fmax(w, fabs(f32(p->in_coef[k][j]) - p->in_coef[k][j]) * (1 + g->err));
        he += p->in_coef[k] ? w : fabs(f32(p->coef[k]) - p->coef[k]) * reg_max_abs(ir, p->in[k]);
    }
    return steps + fabs(a) * ex + fabs(f32(a)) * he + fabs(f32(a) - a) * h +
           sum_err(p->n_x + 2, fabs(a) * h, fabs(a) * h);
}

/* GATED: x = in[0] numeric, k categorical inputs in[1..]; per combination
 * c of theirs a pair h = ReLU(z), h' = ReLU(z') with
 * z = B (c's k columns) + b x + a - B k - B BOS and z' the same with -a, -b
 * (compiler/lower_general.c, lower_gated; B = c0). Where c holds, z and z'
 * are +-(a + b x) up to the inputs' errors (B per gate column, |b| for x),
 * the float32 weights' difference from B, a, b and the sum's rounding;
 * where it does not, both are below -1 (B is 1 above every |result|) by
 * more than those errors (the analysis's gate check), an exact 0. The
 * result h - h' is within one unit's error where |a + b x| exceeds it (the
 * other unit is an exact 0), and within both where it may not; then its own
 * sum of two terms (with the bias and the residual). */
static double gated_err(const TfIr *ir, const TfOpPlan *p) {
    const TfRegFacts *gx = &ir->regs[p->in[0]].facts;
    int k = p->n_in - 1;
    double ex = gx->err, xmax = reg_max_abs(ir, p->in[0]), ecat = 0, ecat_max = 0;
    for (int i = 1; i < p->n_in; i++) {
        ecat += ir->regs[p->in[i]].facts.err;
        ecat_max = fmax(ecat_max, ir->regs[p->in[i]].facts.err);
    }
    double B = p->c0, fB = f32(B), worst = 0;
    for (int c = 0; c < p->n_combo; c++) {
        double a = p->combo_num[c], b = p->combo_slope[c], e[2];
        for (int u = 0; u < 2; u++) {
            double sg = u ? -1.0 : 1.0, fb = f32(sg * b), bias = f32(sg * a - B * k);
            double gate = k * fB * (1 + ecat_max), bx = fabs(fb) * xmax;
            double weights = fabs(k * fB + bias - sg * a) + fabs(fb - sg * b) * xmax;
            double pos = gate + bx + fmax(bias, 0), neg = bx - fmin(bias, 0);
            e[u] = fB * ecat + fabs(fb) * ex + weights +
                   sum_err(k + 3, gate + bx + fabs(bias), fmax(pos, neg));
        }
        // Can a + b x come within the units' errors of 0 (both on)?
        double eu = fmax(e[0], e[1]), vmin = INFINITY;
        for (int v = 0; gx->known && v < gx->n_vals; v++)
            vmin = fmin(vmin, fabs(a + b * gx->vals[v].x) - fabs(b) * ex);
        double units = vmin > eu ? eu : e[0] + e[1], vtop = fabs(a) + fabs(b) * xmax + units;
        worst = fmax(worst, units + sum_err(4, vtop + units, vtop + units));
    }
    return worst;
}

double bounds_mlp(const TfIr *ir, const TfOpPlan *p) {
    int cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL;
    if (p->form == TF_PLAN_TABLE) return table_err(ir, p, cat);
    if (p->form == TF_PLAN_GATED) return gated_err(ir, p);
    if (plans_slope(ir, p) != 0) return slope_err(ir, p);
    if (p->form != TF_PLAN_STAIRCASE && p->form != TF_PLAN_SPLIT) return -1;
    double worst = 0;
    for (int a = 0; a < (p->form == TF_PLAN_SPLIT ? p->n_combo : 1); a++)
        worst = fmax(worst, stair_err(ir, p, cat, a));
    return worst;
}

double bounds_mlp_values(const TfIr *ir, const TfOpPlan *p, const double *per_col) {
    if (p->form != TF_PLAN_TABLE && p->form != TF_PLAN_STAIRCASE) return -1;
    TfOpPlan t = *p;
    int table = p->form == TF_PLAN_TABLE, n = table ? p->n_combo : p->n_x;
    const int *cols = table ? p->combo_col : p->x_col;
    double *num = malloc((size_t)(n > 0 ? n : 1) * sizeof *num);
    if (!num) return -1;
    for (int i = 0; i < n; i++) num[i] = cols[i] >= 0 ? per_col[cols[i]] : 0;
    if (table) t.combo_num = num;
    else t.x_num = num;
    double e = table ? table_err(ir, &t, 0) : stair_err(ir, &t, 0, 0);
    free(num);
    return e;
}
