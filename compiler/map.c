/* map.c: Map, the analysis of one op: its expression on every combination
 * of its inputs' values, the form of MLP it becomes (a table over
 * categorical inputs, a staircase over one numeric input, a linear map, or
 * a gated a + b x), the values and error bound of its result, and the
 * margins that make its steps exact in float32.
 *
 * An MLP step reads a sum of input columns that is an integer n when all
 * its inputs hold the combination and at most n - 1 otherwise; its ramp
 * turns on fully 0.25 before n and is off 0.25 after n - 1, so it is exact
 * while the inputs' errors add up to less than 0.25. A staircase on a
 * numeric input puts a step at the midpoint between neighbouring values
 * whose results differ, with ramps a quarter of the gap wide.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "cubes.h"
#include "numbers.h"
#include "plans.h"
#include "values_internal.h"

/* Enumerates the combinations of the inputs' values (first input fastest),
 * evaluating the expression on each: reached[c] says whether combination c
 * occurs after the BOS (va_combo_at_bos), defined[c] whether it has a
 * result. A reached one without a result is an error; an unreached one is
 * evaluated all the same (its result may stand in it) but may fail quietly
 * (`10 / indices`). Returns the number of combinations or -1 after
 * reporting. */
static int map_enumerate(Va *G, const TfIrOp *op, const TfExpr *e, const int *in, int n_in,
                         TfVal **res_out, int **defined_out, int **reached_out) {
    const TfVal *dom[TF_PLAN_MAX_INPUTS];
    int size[TF_PLAN_MAX_INPUTS];
    long total = 1;
    for (int i = 0; i < n_in; i++) {
        size[i] = va_domain(G, in[i], &dom[i]);
        total *= size[i] > 0 ? size[i] : 1;
        if (size[i] <= 0 || total > MAX_COMBOS) {
            diag_error(G->diag, op->stmt->op.loc,
                       "Map over %s: %s combinations of input values, more than %d",
                       va_reg_name(G, in[i]), size[i] <= 0 ? "no" : "too many", MAX_COMBOS);
            return -1;
        }
    }
    TfVal *res = malloc((size_t)total * sizeof *res);
    int *defined = malloc((size_t)total * sizeof *defined);
    int *reached = malloc((size_t)total * sizeof *reached);
    TfVal *cur = calloc((size_t)G->ir->n_regs, sizeof *cur);
    if (!res || !defined || !reached || !cur) {
        free(res), free(defined), free(reached), free(cur);
        G->failed = 1;
        return -1;
    }
    ExprEnv E = {.ir = G->ir, .cur = cur, .true_division = expr_true_division(G->ir, op->dest)};
    int idx[TF_PLAN_MAX_INPUTS] = {0};
    for (long c = 0; c < total; c++) {
        for (int i = 0; i < n_in; i++) cur[in[i]] = dom[i][idx[i]];
        defined[c] = 1;
        reached[c] = !va_combo_at_bos(G->ir, in, n_in, c);
        if (!reached[c]) {
            defined[c] = expr_eval(&E, e, &res[c]) == 0 && res[c].kind != TF_VAL_LIST;
            if (!defined[c]) res[c] = val_num(0, 1);
        } else if (expr_eval(&E, e, &res[c]) < 0 ||
            (res[c].kind == TF_VAL_LIST &&
             expr_fail(&E, e, "makes a list, which no register can hold (Python's lists are not "
                              "hashable: join it into a string, \"\".join(...))") < 0)) {
            TfVal vals[TF_PLAN_MAX_INPUTS] = {{TF_VAL_INT, 0}};
            for (int i = 0; i < n_in; i++) vals[i] = dom[i][idx[i]];
            char where[256];
            va_combo_text(G, in, vals, n_in, where, sizeof where);
            diag_error(G->diag, E.where, "this expression %s for %s", E.msg,
                       n_in ? where : "its constant value");
            free(res), free(defined), free(reached), free(cur);
            return -1;
        }
        for (int i = 0; i < n_in && ++idx[i] == size[i]; i++) idx[i] = 0;
    }
    free(cur);
    *res_out = res;
    *defined_out = defined;
    *reached_out = reached;
    return (int)total;
}

/* Map(e) -> num dest with one numeric input x among categorical ones: per
 * combination of the categorical values the expression must be a + b x on
 * x's values (sum = mean x count is one), gated by the combination. */
static void map_gated(Va *G, TfIrOp *op, const TfExpr *e, const ExprReads *R) {
    const TfStmt *s = op->stmt;
    int x = -1, cats[TF_PLAN_MAX_INPUTS], n_cat = 0;
    for (int i = 0; i < R->n; i++) {
        if (va_is_categorical(G->ir, R->regs[i])) cats[n_cat++] = R->regs[i];
        else x = R->regs[i];
    }
    const TfRegFacts *gx = va_facts(G, x);
    if (!gx->known) {
        diag_error(G->diag, s->args[0].loc,
                   "Map: the values of '%s' are not known, so the size of its gate cannot be set",
                   va_reg_name(G, x));
        return;
    }
    const TfVal *dom[TF_PLAN_MAX_INPUTS];
    int size[TF_PLAN_MAX_INPUTS];
    long total = 1;
    for (int i = 0; i < n_cat; i++) {
        size[i] = va_domain(G, cats[i], &dom[i]);
        total *= size[i];
    }
    if (total > MAX_COMBOS) {
        diag_error(G->diag, s->op.loc, "Map: more than %d combinations of input values", MAX_COMBOS);
        return;
    }
    TfOpPlan *p = va_new_plan(G, TF_PLAN_GATED, op, "");
    TfVal *cur = calloc((size_t)G->ir->n_regs, sizeof *cur);
    if (!p || !cur) {
        free(cur);
        G->failed = 1;
        return;
    }
    p->n_in = 1 + n_cat;
    p->in[0] = x;
    memcpy(p->in + 1, cats, (size_t)n_cat * sizeof *cats);
    p->n_combo = (int)total;
    p->combo_num = va_alloc(G, (size_t)total * sizeof *p->combo_num);
    p->combo_slope = va_alloc(G, (size_t)total * sizeof *p->combo_slope);
    TfVal *vals = malloc((size_t)total * (size_t)gx->n_vals * sizeof *vals);
    if (!p->combo_num || !p->combo_slope || !vals) {
        free(cur), free(vals);
        G->failed = 1;
        return;
    }
    ExprEnv E = {.ir = G->ir, .cur = cur, .true_division = expr_true_division(G->ir, op->dest)};
    int idx[TF_PLAN_MAX_INPUTS] = {0}, n_vals = 0;
    double vmax = 0;
    for (long c = 0; c < total; c++) {
        for (int i = 0; i < n_cat; i++) cur[cats[i]] = dom[i][idx[i]];
        double a = 0, b = 0;
        if (va_combo_at_bos(G->ir, cats, n_cat, c)) { // never computed: its gate stays shut
            p->combo_num[c] = p->combo_slope[c] = 0;
            for (int i = 0; i < n_cat && ++idx[i] == size[i]; i++) idx[i] = 0;
            continue;
        }
        for (int k = 0; k < gx->n_vals; k++) {
            TfVal v;
            cur[x] = gx->vals[k];
            if (expr_eval(&E, e, &v) < 0 || !val_is_num(v)) {
                TfVal where[TF_PLAN_MAX_INPUTS + 1];
                int regs[TF_PLAN_MAX_INPUTS + 1];
                for (int i = 0; i < n_cat; i++) where[i] = dom[i][idx[i]], regs[i] = cats[i];
                where[n_cat] = gx->vals[k];
                regs[n_cat] = x;
                char txt[256];
                va_combo_text(G, regs, where, n_cat + 1, txt, sizeof txt);
                diag_error(G->diag, E.msg[0] ? E.where : s->args[0].loc, "this expression %s for %s",
                           E.msg[0] ? E.msg : "gives a token for a numeric register", txt);
                free(cur), free(vals);
                return;
            }
            double x0 = gx->vals[0].x;
            if (k == 0) a = v.x;
            if (k == 1) {
                b = (v.x - a) / (gx->vals[1].x - x0);
                a -= b * x0;
            }
            if (k >= 1 && fabs(a + b * gx->vals[k].x - v.x) > 1e-9 * (1 + fabs(v.x))) {
                char lab[48], txt[200];
                val_label(G->ir, gx->vals[k], lab, sizeof lab);
                TfVal where[TF_PLAN_MAX_INPUTS];
                for (int i = 0; i < n_cat; i++) where[i] = dom[i][idx[i]];
                va_combo_text(G, cats, where, n_cat, txt, sizeof txt);
                diag_error(G->diag, s->args[0].loc,
                           "Map: a numeric input among categorical ones must enter linearly, but "
                           "this is not a + b * %s for %s (at %s = %s)",
                           va_reg_name(G, x), txt, va_reg_name(G, x), lab);
                free(cur), free(vals);
                return;
            }
            vals[n_vals++] = val_num(v.x, 0);
            vmax = fmax(vmax, fabs(v.x));
        }
        p->combo_num[c] = a;
        p->combo_slope[c] = b;
        for (int i = 0; i < n_cat && ++idx[i] == size[i]; i++) idx[i] = 0;
    }
    free(cur);
    // The gate: a combination that does not hold pushes both units below zero.
    p->c0 = vmax + 1.0;
    double cat_err = 0;
    for (int i = 0; i < n_cat; i++) cat_err += va_facts(G, cats[i])->err;
    if (cat_err * p->c0 >= 0.5) {
        diag_error(G->diag, s->op.loc,
                   "Map: its categorical inputs may be off by %.3g, which its gate (%.3g) turns "
                   "into %.3g (margin %.3g)",
                   cat_err, p->c0, cat_err * p->c0, 0.5 - cat_err * p->c0);
        free(vals);
        return;
    }
    double moved;
    int m = val_unique(vals, n_vals, SAME_VALUE, &moved);
    va_set_values(G, op->dest, vals, m);
    free(vals);
    p->dest = op->dest;
    va_facts(G, op->dest)->err = bounds_mlp(G->ir, p) + moved;
    op->plan = p;
}

/* A table of more than WARN_COMBOS step pairs (one per cube of one result,
 * compiler/cubes.h) is worth a warning. */
static void warn_large_table(Va *G, const TfIrOp *op, const TfOpPlan *p) {
    if (p->n_combo <= WARN_COMBOS) return;
    TfCubes cubes;
    if (cubes_of_table(G->ir, p, &cubes) < 0) {
        G->failed = 1;
        return;
    }
    if (cubes.n > WARN_COMBOS)
        diag_warning(G->diag, op->stmt->op.loc,
                     "this Map's MLP has %d hidden units: a pair per group of its inputs' "
                     "combinations with one result (%d groups of %d combinations)",
                     2 * cubes.n, cubes.n, p->n_combo);
    cubes_free(&cubes);
}

/* Map(e) -> dest with e a + b x + ...: exact, whatever the values; the
 * destination's values are every combination's sum when they are known and
 * few. */
static TfOpPlan *map_linear(Va *G, TfIrOp *op, const TfExpr *e, const ExprReads *R) {
    const TfStmt *s = op->stmt;
    int dest = op->dest;
    TfOpPlan *p = va_new_plan(G, TF_PLAN_LINEAR, op, "");
    if (!p) return NULL;
    TfVal *cur = calloc((size_t)G->ir->n_regs, sizeof *cur);
    if (!cur) { (void)(G->failed = 1); return NULL; }
    for (int i = 0; i < R->n; i++) cur[R->regs[i]] = val_num(0, 0); // what e reads
    ExprEnv E = {.ir = G->ir, .cur = cur, .true_division = expr_true_division(G->ir, op->dest)};
    TfVal base, one;
    if (expr_eval(&E, e, &base) < 0) {
        diag_error(G->diag, E.where, "this expression %s", E.msg);
        free(cur);
        return NULL;
    }
    p->c0 = base.x;
    double errsum = 0, bound = fabs(base.x);
    for (int i = 0; i < R->n; i++) {
        cur[R->regs[i]] = val_num(1, 0);
        if (expr_eval(&E, e, &one) < 0) {
            diag_error(G->diag, E.where, "this expression %s", E.msg);
            free(cur);
            return NULL;
        }
        cur[R->regs[i]] = val_num(0, 0);
        p->coef[i] = one.x - base.x;
        const TfRegFacts *g = va_facts(G, R->regs[i]);
        if (p->coef[i] != 0) errsum += fabs(p->coef[i]) * g->err;
        bound += fabs(p->coef[i]) * (g->known ? va_max_abs(g->vals, g->n_vals) : 1e6);
    }
    free(cur);
    p->n_in = R->n;
    memcpy(p->in, R->regs, sizeof R->regs);
    // At the BOS the constant is off and the inputs pass: a mean with a
    // default holds its default there (TfRegFacts.bos_num).
    double bos = 0;
    for (int i = 0; i < R->n; i++) bos += p->coef[i] * va_facts(G, R->regs[i])->bos_num;
    va_facts(G, dest)->bos_num = bos;
    G->bos_set = 1;
    // Value set: every combination, when the inputs' sets are known and small.
    // Up to MAX_COMBOS combinations, of which at most MAX_NUM_VALUES
    // different numbers (pair_balance's opens - closes: 32,761
    // combinations at maxlen 25, 12,531 numbers).
    long total = 1;
    int known = 1;
    double moved = 0;
    for (int i = 0; i < R->n; i++) {
        const TfRegFacts *g = va_facts(G, R->regs[i]);
        if (!g->known) known = 0;
        else if (total <= MAX_COMBOS) total *= g->n_vals;
    }
    if (known && total > MAX_COMBOS) {
        va_facts(G, dest)->why_stmt = s;
        va_facts(G, dest)->why = "this Map's inputs have more than 2^20 combinations of values";
    }
    if (known && total <= MAX_COMBOS) {
        TfVal *vals = malloc((size_t)total * sizeof *vals);
        if (!vals) { (void)(G->failed = 1); return NULL; }
        int idx[TF_PLAN_MAX_INPUTS] = {0}, n_reached = 0;
        for (long c = 0; c < total; c++) {
            double x = p->c0;
            for (int i = 0; i < R->n; i++) x += p->coef[i] * va_facts(G, R->regs[i])->vals[idx[i]].x;
            if (!va_combo_at_bos(G->ir, R->regs, R->n, c)) vals[n_reached++] = val_num(x, 0);
            for (int i = 0; i < R->n && ++idx[i] == va_facts(G, R->regs[i])->n_vals; i++) idx[i] = 0;
        }
        int m = val_unique(vals, n_reached, SAME_VALUE, &moved);
        if (m <= MAX_NUM_VALUES) {
            va_set_values(G, dest, vals, m);
        } else {
            moved = 0;
            va_facts(G, dest)->why_stmt = s;
            va_facts(G, dest)->why = "this Map's results are more than 20000 different numbers";
        }
        free(vals);
    }
    va_facts(G, dest)->err = errsum + bound * 4 * EPS32 + moved;
    return p;
}

/* Whether dest is the output held as a number, whose values may be tokens
 * no number spells (compiler/numbers.h: numbers_value codes them). */
static int coded_output(const TfIr *ir, int dest) {
    return ir->output_as_number && dest == ir->output_reg;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A numeric table's results: the reached combinations' numbers are its
 * values; an unreached one keeps its number when a reached one gives it
 * (the cubes may then ignore it) and is 0 otherwise, which needs no unit.
 * 0, or -1 after reporting. */
static int map_numeric_results(Va *G, const TfIrOp *op, TfOpPlan *p, TfVal *res,
                               const int *defined, const int *reached, int n) {
    p->combo_num = va_alloc(G, (size_t)n * sizeof *p->combo_num);
    TfVal *vals = malloc((size_t)(n > 0 ? n : 1) * sizeof *vals);
    double *sorted = malloc((size_t)(n > 0 ? n : 1) * sizeof *sorted);
    if (!p->combo_num || !vals || !sorted) {
        free(vals), free(sorted);
        G->failed = 1;
        return -1;
    }
    int m = 0;
    for (int c = 0; c < n; c++) {
        if (!reached[c]) continue;
        if (!val_is_num(res[c]) && !coded_output(G->ir, op->dest)) {
            diag_error(G->diag, op->stmt->args[0].loc,
                       "this Map gives a token, but '%s' is a numeric register",
                       va_reg_name(G, op->dest));
            free(vals), free(sorted);
            return -1;
        }
        vals[m++] = res[c];
    }
    // The values (the codes of tokens are taken from them: few, where the
    // combinations may be a million).
    double moved;
    int u = val_unique(vals, m, SAME_VALUE, &moved);
    for (int c = 0, k = 0; c < n; c++)
        if (reached[c]) sorted[k++] = numbers_value(vals, u, res[c]);
    qsort(sorted, (size_t)m, sizeof *sorted, cmp_double);
    for (int c = 0; c < n; c++) {
        int ok = reached[c] || (defined[c] && (val_is_num(res[c]) || coded_output(G->ir, op->dest)));
        double x = ok ? numbers_value(vals, u, res[c]) : 0;
        int kept = reached[c] || (ok && bsearch(&x, sorted, (size_t)m, sizeof *sorted, cmp_double));
        p->combo_num[c] = kept ? x : 0;
    }
    va_set_values(G, op->dest, vals, u);
    free(vals), free(sorted);
    va_facts(G, op->dest)->err = bounds_mlp(G->ir, p) + moved;
    return 0;
}

/* Map(e) -> dest with categorical inputs only: a step pair per combination
 * of their values (compiler/cubes.h groups them), exact while the inputs'
 * errors add up to less than 0.25. */
static TfOpPlan *map_table(Va *G, TfIrOp *op, const TfExpr *e, const ExprReads *R) {
    const TfStmt *s = op->stmt;
    int dest = op->dest, dest_cat = G->ir->regs[dest].kind == TF_REG_CATEGORICAL;
    double in_err = 0;
    for (int i = 0; i < R->n; i++) in_err += va_facts(G, R->regs[i])->err;
    TfVal *res;
    int *defined, *reached;
    int n = map_enumerate(G, op, e, R->regs, R->n, &res, &defined, &reached);
    if (n < 0) return NULL;
    TfOpPlan *p = va_new_plan(G, TF_PLAN_TABLE, op, "");
    if (!p) {
        free(res), free(defined), free(reached);
        return NULL;
    }
    p->n_in = R->n;
    memcpy(p->in, R->regs, sizeof R->regs);
    p->n_combo = n;
    p->dest = dest;
    if (in_err >= 0.25) {
        diag_error(G->diag, s->op.loc,
                   "Map: its inputs may be off by %.3g in all, but its steps need less than "
                   "0.25 (margin %.3g)",
                   in_err, 0.25 - in_err);
        free(res), free(defined), free(reached);
        return NULL;
    }
    if (dest_cat) {
        p->combo_col = va_alloc(G, (size_t)n * sizeof *p->combo_col);
        if (!p->combo_col) { (void)(free(res), free(defined), free(reached), G->failed = 1); return NULL; }
        va_set_categorical_results(G, dest, res, defined, reached, n, p->combo_col);
        va_facts(G, dest)->err = bounds_mlp(G->ir, p);
    } else if (map_numeric_results(G, op, p, res, defined, reached, n) < 0) {
        free(res), free(defined), free(reached);
        return NULL;
    }
    free(res);
    free(defined);
    free(reached);
    warn_large_table(G, op, p);
    return p;
}

/* A numeric staircase with a slope (TfOpPlan.slope): the one its
 * neighbouring values' results rise by that leaves the fewest units
 * (`x % 10`: 4 units instead of 39), where the bound is no larger or the
 * result is the output held as a number (decoded within half its values'
 * gap: compiler/values.c checks it). */
static void choose_slope(Va *G, TfOpPlan *p, double moved) {
    const TfIr *ir = G->ir;
    if (!G->opt || p->n_x < 3 || p->n_x > 4096) return; // each slope tried costs O(n_x)
    int units = plans_mlp_units(ir, p), best = units;
    double err = va_facts(G, p->dest)->err, a = 0;
    if (ir->output_as_number && p->dest == ir->output_reg) err = INFINITY;
    for (int k = 0; k + 1 < p->n_x; k++) {
        p->slope = (p->x_num[k + 1] - p->x_num[k]) / (p->xs[k + 1] - p->xs[k]);
        if (p->slope == 0 || p->slope == a) continue;
        int u = plans_mlp_units(ir, p);
        double e = bounds_mlp(ir, p) + moved;
        if (u < best && e >= 0 && e <= err) best = u, a = p->slope;
    }
    p->slope = a;
    if (a != 0) va_facts(G, p->dest)->err = bounds_mlp(ir, p) + moved;
}

/* Map(e) -> dest with one numeric input x: a staircase over x's values, a
 * step between neighbours whose results differ, its ramps a quarter of the
 * narrowest such gap wide. */
static TfOpPlan *map_staircase(Va *G, TfIrOp *op, const TfExpr *e, const ExprReads *R) {
    const TfStmt *s = op->stmt;
    int dest = op->dest, dest_cat = G->ir->regs[dest].kind == TF_REG_CATEGORICAL;
    int r = R->regs[0];
    const TfRegFacts *g = va_facts(G, r);
    if (!g->known) {
        diag_error(G->diag, s->args[0].loc,
                   "Map: the values of '%s' are not known, so a non-linear function of it "
                   "cannot be built",
                   va_reg_name(G, r));
        va_note_why(G, g);
        return NULL;
    }
    TfVal *res;
    int *defined, *reached; // a numeric input: every value is reached
    int n = map_enumerate(G, op, e, R->regs, 1, &res, &defined, &reached);
    if (n < 0) return NULL;
    free(reached);
    TfOpPlan *p = va_new_plan(G, TF_PLAN_STAIRCASE, op, "");
    if (!p) { (void)(free(res), free(defined)); return NULL; }
    p->n_in = 1;
    p->in[0] = r;
    p->dest = dest;
    p->n_x = n;
    p->xs = va_alloc(G, (size_t)n * sizeof *p->xs);
    if (!p->xs) { (void)(free(res), free(defined), G->failed = 1); return NULL; }
    // A step only between neighbouring values whose results differ.
    double gap = INFINITY, xmax = 0;
    int n_steps = 0;
    for (int i = 0; i < n; i++) {
        p->xs[i] = g->vals[i].x;
        if (i && val_cmp(res[i], res[i - 1]) != 0) {
            gap = fmin(gap, p->xs[i] - p->xs[i - 1]);
            n_steps++;
        }
        xmax = fmax(xmax, fabs(p->xs[i]));
    }
    // The ramps are a quarter of the gap wide on each side of the midpoint;
    // computing K (x - m) in float32 costs about 4 roundings of its terms.
    double rounding = n_steps ? (2.0 / gap) * 2 * xmax * 4 * EPS32 * (gap / 2) : 0;
    double margin = n_steps ? gap / 4 - g->err - rounding - xmax * 4 * EPS32 : 1;
    if (margin <= 0) {
        char gl[48];
        snprintf(gl, sizeof gl, "%.3g", gap);
        diag_error(G->diag, s->op.loc,
                   "Map: the values of '%s' are as close as %s, and it may be off by %.3g: "
                   "its steps cannot tell the values apart in float32 (margin %.3g)",
                   va_reg_name(G, r), gl, g->err, margin);
        free(res), free(defined);
        return NULL;
    }
    if (dest_cat) {
        p->x_col = va_alloc(G, (size_t)n * sizeof *p->x_col);
        if (!p->x_col) { (void)(free(res), free(defined), G->failed = 1); return NULL; }
        va_set_categorical_results(G, dest, res, defined, defined, n, p->x_col);
        va_facts(G, dest)->err = bounds_mlp(G->ir, p);
    } else {
        p->x_num = va_alloc(G, (size_t)n * sizeof *p->x_num);
        if (!p->x_num) { (void)(free(res), free(defined), G->failed = 1); return NULL; }
        if (!coded_output(G->ir, dest))
            for (int i = 0; i < n; i++)
                if (!val_is_num(res[i])) {
                    diag_error(G->diag, s->args[0].loc,
                               "this Map gives a token, but '%s' is a numeric register",
                               va_reg_name(G, dest));
                    free(res), free(defined);
                    return NULL;
                }
        TfVal *vals = malloc((size_t)(n > 0 ? n : 1) * sizeof *vals);
        if (!vals) { (void)(free(res), free(defined), G->failed = 1); return NULL; }
        memcpy(vals, res, (size_t)n * sizeof *vals);
        double moved;
        int m = val_unique(vals, n, SAME_VALUE, &moved);
        for (int i = 0; i < n; i++) p->x_num[i] = numbers_value(vals, m, res[i]);
        va_set_values(G, dest, vals, m);
        free(vals);
        va_facts(G, dest)->err = bounds_mlp(G->ir, p) + moved;
        choose_slope(G, p, moved);
    }
    free(res);
    free(defined);
    return p;
}

/* Whether e (a Map's, whose names are known) reads register reg. */
static int reads_reg(const TfIr *ir, const TfExpr *e, int reg) {
    if (!e) return 0;
    if (e->kind == TF_EXPR_NAME) return check_find_reg(ir, e->name.text) == reg;
    for (int i = 0; i < e->n_inputs; i++)
        if (check_find_reg(ir, e->inputs[i].text) == reg) return 1;
    if (reads_reg(ir, e->a, reg) || reads_reg(ir, e->b, reg) || reads_reg(ir, e->c, reg)) return 1;
    for (int i = 0; i < e->n_args; i++)
        if (reads_reg(ir, e->args[i], reg)) return 1;
    for (int i = 0; i < e->n_entries; i++) {
        for (int k = 0; k < e->entries[i].n_keys; k++)
            if (reads_reg(ir, e->entries[i].keys[k], reg)) return 1;
        if (reads_reg(ir, e->entries[i].value, reg)) return 1;
    }
    return 0;
}

/* The node of e that adds (or subtracts) a part reading x alone to one
 * reading a alone, when no other node of e reads either: e is then a
 * function of that sum. NULL when there is none. */
static const TfExpr *offset_node(const TfIr *ir, const TfExpr *e, int x, int a) {
    if (!e || !reads_reg(ir, e, x) || !reads_reg(ir, e, a)) return NULL;
    if (e->kind == TF_EXPR_BINARY && (e->op == '+' || e->op == '-')) {
        int ax = reads_reg(ir, e->a, x), aa = reads_reg(ir, e->a, a);
        int bx = reads_reg(ir, e->b, x), ba = reads_reg(ir, e->b, a);
        if ((ax && !aa && ba && !bx) || (aa && !ax && bx && !ba)) return e;
    }
    // Descend into the one child that reads both; a node whose other
    // children read x or a is no function of one sum.
    const TfExpr *kids[3] = {e->a, e->b, e->c}, *both = NULL;
    int n_both = 0, n_other = 0;
    for (int i = 0; i < 3; i++) {
        if (!kids[i]) continue;
        if (reads_reg(ir, kids[i], x) && reads_reg(ir, kids[i], a)) both = kids[i], n_both++;
        else if (reads_reg(ir, kids[i], x) || reads_reg(ir, kids[i], a)) n_other++;
    }
    for (int i = 0; i < e->n_args; i++)
        if (reads_reg(ir, e->args[i], x) || reads_reg(ir, e->args[i], a)) n_other++;
    if (e->entries || n_both != 1 || n_other) return NULL;
    return offset_node(ir, both, x, a);
}

/* Map(e) -> dest with one numeric input x and one categorical a where e is
 * a function of u = c x + d + h(a) (`(qt + carry / 2) % 10`): one
 * staircase over u, read from x's column and a's one-hot weighted by h
 * (TF_PLAN_STAIRCASE, x_linear, in_coef), where a staircase of x per value
 * of a (map_split) would repeat the steps for every value of a. Into a
 * number (a register held as one: add_decimal's output) its results are
 * numbers, with a slope where that pays (choose_slope). NULL, nothing
 * reported, when e is no such function, when the staircase over u would
 * not be smaller than the split, or when its steps lack the margin
 * (map_split's, or into a number map_gated's, then stand). */
/* map_offset's results into a number: each value of u's result (a token
 * only in the output held as a number, as its code), the values set, the
 * bound, a slope where it pays. -1 (nothing reported) when a result is no
 * number or u has a value with no result. */
static int offset_numbers(Va *G, const TfIrOp *op, TfOpPlan *p, TfVal *ures, const int *udef, int nu) {
    for (int k = 0; k < nu; k++)
        if (!udef[k] || (!val_is_num(ures[k]) && !coded_output(G->ir, op->dest))) return -1;
    p->x_num = va_alloc(G, (size_t)nu * sizeof *p->x_num);
    TfVal *vals = malloc((size_t)nu * sizeof *vals);
    if (!p->x_num || !vals) {
        free(vals);
        G->failed = 1;
        return -1;
    }
    memcpy(vals, ures, (size_t)nu * sizeof *vals);
    double moved;
    int m = val_unique(vals, nu, SAME_VALUE, &moved);
    for (int k = 0; k < nu; k++) p->x_num[k] = numbers_value(vals, m, ures[k]);
    va_set_values(G, op->dest, vals, m);
    free(vals);
    va_facts(G, op->dest)->err = bounds_mlp(G->ir, p) + moved;
    choose_slope(G, p, moved);
    return 0;
}

/* u's parts for map_offset, N its sum's node: c x + d (checked linear on
 * every value of x) and h(a) per value of a. 1 when they are so (c != 0),
 * 0 when not, -1 out of memory. */
static int offset_parts(Va *G, const TfIrOp *op, const TfExpr *N, int x, int a, double *c,
                        double *d, double *h) {
    const TfIr *ir = G->ir;
    const TfRegFacts *gx = va_facts(G, x), *ga = va_facts(G, a);
    int x_left = reads_reg(ir, N->a, x);
    const TfExpr *nx = x_left ? N->a : N->b, *na = x_left ? N->b : N->a;
    double sx = x_left || N->op == '+' ? 1 : -1, sa = !x_left || N->op == '+' ? 1 : -1;
    TfVal *cur = calloc((size_t)ir->n_regs, sizeof *cur);
    if (!cur) {
        G->failed = 1;
        return -1;
    }
    ExprEnv E = {.ir = ir, .cur = cur, .true_division = expr_true_division(ir, op->dest)};
    int ok = 1;
    for (int i = 0; ok && i < gx->n_vals; i++) {
        TfVal v;
        cur[x] = gx->vals[i];
        ok = expr_eval(&E, nx, &v) == 0 && val_is_num(v);
        double y = ok ? sx * v.x : 0, xi = gx->vals[i].x;
        if (ok && i == 1) *c = (y - *d) / (xi - gx->vals[0].x), *d -= *c * gx->vals[0].x;
        if (ok && i == 0) *d = y;
        if (ok && i >= 1) ok = fabs(*c * xi + *d - y) <= SAME_VALUE * fmax(1.0, fabs(y));
    }
    for (int j = 0; ok && j < ga->n_vals; j++) {
        TfVal v;
        cur[a] = ga->vals[j];
        ok = expr_eval(&E, na, &v) == 0 && val_is_num(v);
        h[j] = ok ? sa * v.x : 0;
    }
    free(cur);
    return ok && *c != 0;
}

static TfOpPlan *map_offset(Va *G, TfIrOp *op, const TfExpr *e, const ExprReads *R) {
    const TfIr *ir = G->ir;
    int qx = va_is_categorical(ir, R->regs[0]) ? 1 : 0;
    int x = R->regs[qx], a = R->regs[1 - qx];
    const TfRegFacts *gx = va_facts(G, x), *ga = va_facts(G, a);
    const TfExpr *N = offset_node(ir, e, x, a);
    if (!N || !gx->known || !ga->known || gx->n_vals < 2 || ga->n_vals < 1) return NULL;
    double c = 0, d = 0, *h = va_alloc(G, (size_t)ga->n_vals * sizeof *h);
    if (!h) {
        G->failed = 1;
        return NULL;
    }
    if (offset_parts(G, op, N, x, a, &c, &d, h) <= 0) return NULL;
    TfVal *res;
    int *defined, *reached, in[2] = {x, a};
    int n = map_enumerate(G, op, e, in, 2, &res, &defined, &reached);
    if (n < 0) return NULL;
    // u per combination, then its distinct values in order, each with one
    // result; the split's steps to compare with.
    int nx_ = gx->n_vals, *order = malloc((size_t)n * sizeof *order);
    double *u = malloc((size_t)n * sizeof *u);
    TfVal *ures = malloc((size_t)n * sizeof *ures);
    int *udef = malloc((size_t)n * sizeof *udef), *ureach = malloc((size_t)n * sizeof *ureach);
    double *us = va_alloc(G, (size_t)n * sizeof *us);
    TfOpPlan *p = NULL;
    if (!order || !u || !ures || !udef || !ureach || !us) {
        G->failed = 1;
        goto done;
    }
    int split_steps = 0;
    for (int i = 0; i < n; i++) {
        u[i] = c * gx->vals[i % nx_].x + d + h[i / nx_];
        order[i] = i;
        if (i % nx_ && (val_cmp(res[i], res[i - 1]) != 0 || defined[i] != defined[i - 1])) split_steps++;
    }
    for (int i = 1; i < n; i++) // insertion sort by u (a few hundred combinations)
        for (int k = i; k > 0 && u[order[k]] < u[order[k - 1]]; k--) {
            int t = order[k];
            order[k] = order[k - 1], order[k - 1] = t;
        }
    int nu = 0, steps = 0;
    double gap = INFINITY, umax = 0;
    for (int k = 0; k < n; k++) {
        int i = order[k];
        if (nu && fabs(u[i] - us[nu - 1]) <= SAME_VALUE * fmax(1.0, fabs(u[i]))) {
            // The same u: the same result, or no function of u.
            if (defined[i] != udef[nu - 1] || (defined[i] && val_cmp(res[i], ures[nu - 1]) != 0))
                goto done;
            ureach[nu - 1] |= reached[i];
            continue;
        }
        us[nu] = u[i], ures[nu] = res[i], udef[nu] = defined[i], ureach[nu] = reached[i];
        if (nu && (val_cmp(ures[nu], ures[nu - 1]) != 0 || udef[nu] != udef[nu - 1])) {
            steps++;
            gap = fmin(gap, us[nu] - us[nu - 1]);
        }
        umax = fmax(umax, fabs(us[nu]));
        nu++;
    }
    int dest_cat = ir->regs[op->dest].kind == TF_REG_CATEGORICAL;
    if (dest_cat && steps >= split_steps) goto done;
    // map_staircase's margin, u's error from x's and from a's columns.
    double ea = 0;
    for (int j = 0; j < ga->n_vals; j++) ea += fabs(h[j]) * (ga->err + 4 * EPS32);
    double eu = fabs(c) * gx->err + ea;
    double rounding = steps ? (2.0 / gap) * 2 * umax * 4 * EPS32 * (gap / 2) : 0;
    if (steps && gap / 4 - eu - rounding - umax * 4 * EPS32 <= 0) goto done;
    p = va_new_plan(G, TF_PLAN_STAIRCASE, op, "");
    if (!p) goto done;
    p->n_in = 2;
    p->in[0] = x;
    p->in[1] = a;
    p->coef[0] = c;
    p->coef[1] = 0;
    p->in_coef[1] = h;
    p->c0 = d;
    p->x_linear = 1;
    p->dest = op->dest;
    p->n_x = nu;
    p->xs = us;
    if (!dest_cat) {
        if (offset_numbers(G, op, p, ures, udef, nu) < 0) p = NULL;
        goto done;
    }
    p->x_col = va_alloc(G, (size_t)nu * sizeof *p->x_col);
    if (!p->x_col) {
        G->failed = 1;
        p = NULL;
        goto done;
    }
    va_set_categorical_results(G, op->dest, ures, udef, ureach, nu, p->x_col);
    va_facts(G, op->dest)->err = bounds_mlp(ir, p);
done:
    free(order), free(u), free(ures), free(udef), free(ureach);
    free(res), free(defined), free(reached);
    return p;
}

/* Map(e) -> categorical dest with one numeric input x and one categorical A: per value
 * of A, a staircase over x's values (TF_PLAN_SPLIT, the form compiler/fuse.c
 * composes for a Count read with a position), when every step keeps its
 * margin with x's and A's errors and the gate's size. */
static TfOpPlan *map_split(Va *G, TfIrOp *op, const TfExpr *e, const ExprReads *R) {
    const TfStmt *s = op->stmt;
    int dest = op->dest;
    int qx = va_is_categorical(G->ir, R->regs[0]) ? 1 : 0;
    int in[2] = {R->regs[qx], R->regs[1 - qx]}; /* x fastest, as SPLIT lays them out */
    const TfRegFacts *gx = va_facts(G, in[0]), *ga = va_facts(G, in[1]);
    if (!gx->known) {
        diag_error(G->diag, s->args[0].loc,
                   "Map: the values of '%s' are not known, so a non-linear function of it "
                   "cannot be built",
                   va_reg_name(G, in[0]));
        va_note_why(G, gx);
        return NULL;
    }
    TfVal *res;
    int *defined, *reached;
    int n = map_enumerate(G, op, e, in, 2, &res, &defined, &reached);
    if (n < 0) return NULL;
    int nx = gx->n_vals, na = n / nx;
    double xmax = 1.0; // what x can hold at the BOS, as compiler/lower_general.c bounds it
    for (int k = 0; k < nx; k++) xmax = fmax(xmax, fabs(gx->vals[k].x));
    for (int a = 0; a < na; a++)
        for (int k = 1; k < nx; k++) {
            size_t at = (size_t)a * (size_t)nx + (size_t)k;
            if (val_cmp(res[at], res[at - 1]) == 0 && defined[at] == defined[at - 1]) continue;
            // The step K (x - m) + G (a's column - 1) within a quarter of
            // its half-unit margin of the exact value (fuse_split's rule).
            double m = (gx->vals[k - 1].x + gx->vals[k].x) / 2;
            double K = 2.0 / (gx->vals[k].x - gx->vals[k - 1].x), Gs = K * (xmax + fabs(m)) + 2.0;
            double used = K * (gx->err + 4 * EPS32 * (xmax + fabs(m))) + Gs * (ga->err + 4 * EPS32);
            if (used > 0.25) {
                diag_error(G->diag, s->op.loc,
                           "Map: '%s' may be off by %.3g and '%s' by %.3g: a step of '%s' per "
                           "value of '%s' cannot tell its values apart in float32 (margin %.3g)",
                           va_reg_name(G, in[0]), gx->err, va_reg_name(G, in[1]), ga->err,
                           va_reg_name(G, in[0]), va_reg_name(G, in[1]), 0.25 - used);
                free(res), free(defined), free(reached);
                return NULL;
            }
        }
    TfOpPlan *p = va_new_plan(G, TF_PLAN_SPLIT, op, "");
    if (!p) { (void)(free(res), free(defined), free(reached)); return NULL; }
    p->n_in = 2;
    p->in[0] = in[0];
    p->in[1] = in[1];
    p->dest = dest;
    p->n_combo = na;
    p->n_x = nx;
    p->xs = va_alloc(G, (size_t)nx * sizeof *p->xs);
    if (!p->xs) { (void)(free(res), free(defined), free(reached), G->failed = 1); return NULL; }
    for (int k = 0; k < nx; k++) p->xs[k] = gx->vals[k].x;
    p->x_col = va_alloc(G, (size_t)n * sizeof *p->x_col);
    if (!p->x_col) { (void)(free(res), free(defined), free(reached), G->failed = 1); return NULL; }
    va_set_categorical_results(G, dest, res, defined, reached, n, p->x_col);
    va_facts(G, dest)->err = bounds_mlp(G->ir, p);
    free(res), free(defined), free(reached);
    return p;
}

/* Map's one argument, an expression; NULL after reporting a misuse. */
static const TfExpr *map_argument(Va *G, const TfIrOp *op) {
    const TfStmt *s = op->stmt;
    if (s->n_args != 1 || s->args[0].name.text) {
        diag_error(G->diag, s->n_args > 1 ? s->args[1].loc : s->args[0].loc,
                   "Map takes one expression: Map((a + b) %% 10) -> r");
        return NULL;
    }
    return s->args[0].expr;
}

/* Map(e) -> dest: the decision table of its form.
 *   numeric dest, numeric inputs, e linear    -> linear
 *   (a categorical input is read through its one-hot, never as a number)
 *   categorical inputs only                   -> table
 *   numeric dest, one numeric among several   -> gated
 *   one numeric input                         -> staircase
 *   categorical dest, one numeric, one categorical -> a staircase over
 *     x + h(a) where e is a function of that sum (offset), else split */
void map_analyze(Va *G, TfIrOp *op, int index) {
    const TfStmt *s = op->stmt;
    const TfExpr *e = map_argument(G, op);
    if (!e) return;
    ExprReads R = {0};
    if (expr_reads(G->ir, G->diag, e, 0, &R) < 0) return;
    int ok = 1;
    for (int i = 0; i < R.n; i++)
        if (va_check_readable(G, op, R.regs[i], s->args[0].loc, 0) < 0) ok = 0;
    if (!ok || va_check_fresh(G, op) < 0) return;

    int dest = op->dest, dest_cat = G->ir->regs[dest].kind == TF_REG_CATEGORICAL;
    int all_cat = 1, n_num = 0;
    for (int i = 0; i < R.n; i++) {
        if (!va_is_categorical(G->ir, R.regs[i])) all_cat = 0;
        n_num += !va_is_categorical(G->ir, R.regs[i]);
    }
    TfOpPlan *p = NULL;
    // Floor division into a `cat` register held as a number is no linear map.
    int linear = expr_linear(e) && !(G->ir->regs[dest].as_number && expr_divides(e));
    if (!dest_cat && n_num == R.n && R.n > 0 && linear) {
        p = map_linear(G, op, e, &R);
    } else if (all_cat) {
        p = map_table(G, op, e, &R);
    } else if (!dest_cat && R.n == 2 && n_num == 1 && !expr_linear(e) &&
               (p = map_offset(G, op, e, &R)) != NULL) {
        // one staircase over a sum (add_decimal's output held as a number)
    } else if (!dest_cat && R.n > 1) {
        if (G->failed) return;
        if (n_num != 1) {
            diag_error(G->diag, s->args[0].loc,
                       "Map: with categorical inputs, a Map takes one numeric input; this one reads "
                       "%d",
                       n_num);
            return;
        }
        map_gated(G, op, e, &R);
        p = op->plan;
    } else if (R.n == 1) {
        p = map_staircase(G, op, e, &R);
    } else if (dest_cat && R.n == 2 && n_num == 1) {
        p = map_offset(G, op, e, &R);
        if (!p && !G->failed) p = map_split(G, op, e, &R);
    } else {
        diag_error(G->diag, s->args[0].loc,
                   "Map: a non-linear function of numeric registers takes one input; this one "
                   "reads %d (Map categorical registers together, or numeric ones one at a time)",
                   R.n);
        return;
    }
    if (!p) return;
    p->dest = dest;
    op->plan = p;
    va_record_write(G, dest, index);
    va_push_op(G, op);
}
