/* bounds.c: the float32 error of an MLP plan's result, from the plan
 * (bounds.h). The units are those of compiler/lower_general.c. */
#include "bounds.h"

#include <math.h>

#include "values_internal.h"

/* The largest |value| register r can hold, at least 1 (what a Count's
 * fraction holds at the BOS), as compiler/lower_general.c bounds it. */
static double reg_max_abs(const TfIr *ir, int r) {
    const TfRegFacts *g = &ir->regs[r].facts;
    double big = 1.0;
    for (int v = 0; v < g->n_vals; v++) big = fmax(big, fabs(g->vals[v].x));
    return big;
}

/* The largest |x| a staircase's units read: its values, or for a composed
 * LINEAR Map the sum of its inputs' largest terms. */
static double stair_x(const TfIr *ir, const TfOpPlan *p) {
    double x = 0, lin = fabs(p->c0);
    for (int i = 0; i < p->n_x; i++) x = fmax(x, fabs(p->xs[i]));
    if (p->x_linear)
        for (int k = 0; k < p->n_in; k++) lin += fabs(p->coef[k]) * reg_max_abs(ir, p->in[k]);
    else if (p->form == TF_PLAN_SPLIT)
        x = fmax(x, reg_max_abs(ir, p->in[0]));
    return fmax(x, lin);
}

/* One step pair's error, per unit of its height: ROUND_ONE per unit of the
 * largest term its pre-activation adds (bounds.h). split: the gate G of a
 * SPLIT plan's step, which adds 2 G. */
static double step_err(const TfOpPlan *p, int i, double X, int split) {
    double m = (p->xs[i] + p->xs[i + 1]) / 2, K = 2.0 / (p->xs[i + 1] - p->xs[i]);
    double U = K * (X + fabs(m) + fabs(p->c0)) + 1;
    if (split) U += 2 * (K * (X + fabs(m)) + 2.0);
    return ROUND_ONE * (U + 1);
}

/* One staircase's numeric results (n_x of them, from its lowest value on):
 * their error. */
static double stair_err(const TfOpPlan *p, const double *xnum, double X, int split) {
    double num = fabs(xnum[0]) * ROUND_ONE * (split ? 3 : 1);
    for (int i = 0; i + 1 < p->n_x; i++)
        if (xnum[i] != xnum[i + 1]) num += fabs(xnum[i + 1] - xnum[i]) * step_err(p, i, X, split);
    return num;
}

double bounds_mlp(const TfIr *ir, const TfOpPlan *p) {
    int cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL;
    if (p->form == TF_PLAN_TABLE) {
        double big = 0;
        for (int c = 0; !cat && c < p->n_combo; c++) big = fmax(big, fabs(p->combo_num[c]));
        return cat ? ROUND_ONE : big * ROUND_ONE;
    }
    if (cat || (p->form != TF_PLAN_STAIRCASE && p->form != TF_PLAN_SPLIT)) return -1;
    int split = p->form == TF_PLAN_SPLIT, n_a = split ? p->n_combo : 1;
    double X = stair_x(ir, p), worst = 0;
    for (int a = 0; a < n_a; a++)
        worst = fmax(worst, stair_err(p, p->x_num + (size_t)a * (size_t)p->n_x, X, split));
    return worst;
}
