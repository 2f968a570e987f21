/* select.c: Aggregate and Count, the analysis of one op: the selection's
 * truth table over the values of its query and key registers (joint
 * registers, written by inserted table layers, when a side reads several),
 * the attention's inverse temperature, the values and error bound of its
 * result, and the margins that make it exact in float32.
 *
 * An attention with inverse temperature beta gives selected keys the score
 * beta, the BOS beta/2 and the rest 0: what it leaks to keys it should not
 * read is at most (L + 1) exp(-beta (1/2 - 2 delta)), with delta the score
 * error its inputs can cause; its softmax sums L terms in float32, a
 * relative error of at most (2L + 4) 2^-24.
 *
 * A categorical Aggregate copies one value. The compiler proves that every
 * position it selects holds the same value when the key side is `indices`
 * (one position per key value) or the copied register itself, with at most
 * one key value selected per query value; otherwise the result depends on
 * the input (sort's `place` being a permutation), and the op is accepted
 * with a warning and a run-time check that the result decodes to one value.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "values_internal.h"

/* Whether a selection that counts (a Count, a `sum`'s count) reads
 * register r through a fresh one-hot: r is a Count's result. Its steps'
 * hidden units grow with the distance from each step (hundreds), so each
 * column is off by float32's rounding of them, up to about 1e-3 (for any
 * order of summation: the validator's model); a truth table adds up to
 * maxlen such columns, times the scale: the selected keys' scores may then
 * differ by 0.2, and 1/(count + 1) cannot be read back at large counts.
 * A table of r's one-hot into a fresh one (units 2 x - 1 +- 1/2, a few
 * ulps) gives every column within a few ulps of 0 or 1 whatever the
 * steps' error below 1/4 (sort_freq: `Count(k.hist > q.hist)`). */
static int clean_side(Va *G, const TfIrOp *op, int counts, int r) {
    if (!counts || op->op == TF_OP_MAP) return 0;
    for (int i = 0; i < G->n_out; i++)
        if (G->out[i].dest == r && G->out[i].op == TF_OP_COUNT_MATCHES && G->out[i].plan &&
            G->out[i].plan->form == TF_PLAN_STAIRCASE)
            return 1;
    return 0;
}

/* One side of a selection as one register: itself, or a joint register
 * written by an inserted table Map (one column per combination; for one
 * register, a Count's result that a counting selection reads: clean_side).
 * Returns the register, -1 after reporting; *n gets its number of values. */
static int selection_side(Va *G, const TfIrOp *op, int index, int term, const int *regs,
                          int n_regs, char side, int counts, int *n) {
    if (n_regs == 0) {
        *n = 1;
        return -1;
    }
    int clean = n_regs == 1 && clean_side(G, op, counts, regs[0]);
    if (n_regs == 1 && !clean) {
        *n = va_facts(G, regs[0])->n_vals;
        return regs[0];
    }
    long total = 1;
    for (int i = 0; i < n_regs; i++) total *= va_facts(G, regs[i])->n_vals;
    if (total > MAX_COMBOS) {
        diag_error(G->diag, op->stmt->args[0].loc,
                   "the %s side of this selection has %ld combinations of values",
                   side == 'k' ? "key" : "query", total);
        return -1;
    }
    if (total > WARN_JOINT && !clean)
        diag_warning(G->diag, op->stmt->args[0].loc,
                     "the %s side of this selection reads %d registers: their joint one-hot has "
                     "%ld columns (the product of their domains)",
                     side == 'k' ? "key" : "query", n_regs, total);
    // Named by op, side and term: a later term of the same selection reads
    // other registers (`k.indices < q.a and k.indices < q.b`), and a name
    // that is found again is the same selection in a repeat body.
    char name[128], tname[16] = "";
    const char *base = op->stmt->label.text ? op->stmt->label.text : tf_ops[op->op].layer_name;
    if (term > 0) snprintf(tname, sizeof tname, ".t%d", term);
    snprintf(name, sizeof name, "%s.%c%d%s%s", base, side, index, tname, clean ? ".clean" : "");
    int r = check_find_reg(G->ir, name);
    if (r >= 0) { // a repeat body: the same selection again
        *n = va_facts(G, r)->n_vals;
        return r;
    }
    r = va_add_hidden_reg(G, name, TF_REG_CATEGORICAL);
    if (r < 0) return -1;
    TfVal *vals = malloc((size_t)total * sizeof *vals);
    char **labels = va_alloc(G, (size_t)total * sizeof *labels);
    TfOpPlan *p = va_new_plan(G, TF_PLAN_TABLE, op, side == 'k' ? ".keys" : ".queries");
    int *cols = p ? va_alloc(G, (size_t)total * sizeof *cols) : NULL;
    if (!vals || !labels || !p || !cols) {
        free(vals);
        G->failed = 1;
        return -1;
    }
    int idx[TF_PLAN_MAX_INPUTS] = {0};
    double err = 0;
    for (int i = 0; i < n_regs; i++) err += va_facts(G, regs[i])->err;
    for (long c = 0; c < total; c++) {
        vals[c] = val_num((double)c, 1);
        cols[c] = (int)c;
        char lab[256] = "(";
        for (int i = 0; i < n_regs; i++) {
            char one[48];
            val_label(G->ir, va_facts(G, regs[i])->vals[idx[i]], one, sizeof one);
            size_t l = strlen(lab);
            snprintf(lab + l, sizeof lab - l, "%s%s", i ? "," : "", one);
        }
        strncat(lab, ")", sizeof lab - strlen(lab) - 1);
        labels[c] = va_strdup(G, lab);
        if (!labels[c]) {
            free(vals);
            return -1;
        }
        for (int i = 0; i < n_regs && ++idx[i] == va_facts(G, regs[i])->n_vals; i++) idx[i] = 0;
    }
    va_set_values(G, r, vals, (int)total);
    free(vals);
    va_facts(G, r)->labels = labels;
    va_facts(G, r)->err = ROUND_ONE;
    if (err >= 0.25) {
        diag_error(G->diag, op->stmt->args[0].loc,
                   "this selection's registers may be off by %.3g in all; its joint one-hot "
                   "needs less than 0.25 (margin %.3g)",
                   err, 0.25 - err);
        return -1;
    }
    p->n_in = n_regs;
    memcpy(p->in, regs, (size_t)n_regs * sizeof *regs);
    p->n_combo = (int)total;
    p->combo_col = cols;
    p->dest = r;
    p->clean = clean;
    TfIrOp joint = *op;
    joint.plan = p;
    joint.dest = r;
    va_record_write(G, r, G->n_out);
    va_push_op(G, &joint);
    *n = (int)total;
    return r;
}

/* Fills the predicate matrix P over the sides' values. */
/* The parts of a top-level `a and b and ...`; -1 when there are too many. */
static int split_conjuncts(const TfExpr *e, const TfExpr **out, int *n) {
    if (e->kind == TF_EXPR_BINARY && e->op == TF_EX_AND)
        return split_conjuncts(e->a, out, n) < 0 ? -1 : split_conjuncts(e->b, out, n);
    if (*n == TF_PLAN_MAX_INPUTS) return -1;
    out[(*n)++] = e;
    return 0;
}

static int selection_matrix(Va *G, const TfExpr *pred, const ExprReads *R, int nq, int nk,
                            unsigned char **P_out) {
    if ((size_t)nq * (size_t)nk > (size_t)MAX_COMBOS * 16) {
        diag_error(G->diag, pred->loc,
                   "this selection compares %d query values with %d key values, more than %d "
                   "pairs",
                   nq, nk, MAX_COMBOS * 16);
        diag_hint(G->diag, "a smaller maxlen gives `indices` and the counts fewer values");
        return -1;
    }
    unsigned char *P = va_alloc(G, (size_t)nq * (size_t)nk);
    TfVal *kcur = calloc((size_t)G->ir->n_regs, sizeof *kcur);
    TfVal *qcur = calloc((size_t)G->ir->n_regs, sizeof *qcur);
    if (!P || !kcur || !qcur) {
        free(kcur), free(qcur);
        G->failed = 1;
        return -1;
    }
    ExprEnv E = {.ir = G->ir, .kcur = kcur, .qcur = qcur};
    for (int qi = 0; qi < nq; qi++) {
        // Decode a joint index into its registers' values (first fastest).
        int rest = qi;
        for (int i = 0; i < R->nq; i++) {
            const TfRegFacts *g = va_facts(G, R->qregs[i]);
            qcur[R->qregs[i]] = g->vals[rest % g->n_vals];
            rest /= g->n_vals;
        }
        for (int ki = 0; ki < nk; ki++) {
            rest = ki;
            for (int i = 0; i < R->nk; i++) {
                const TfRegFacts *g = va_facts(G, R->kregs[i]);
                kcur[R->kregs[i]] = g->vals[rest % g->n_vals];
                rest /= g->n_vals;
            }
            TfVal v;
            int t;
            if (expr_eval(&E, pred, &v) < 0 || expr_truthy(&E, pred, v, &t) < 0) {
                diag_error(G->diag, E.where, "this selection %s", E.msg);
                free(kcur), free(qcur);
                return -1;
            }
            P[(size_t)qi * (size_t)nk + (size_t)ki] = (unsigned char)t;
        }
    }
    free(kcur);
    free(qcur);
    *P_out = P;
    return 0;
}

/* The selection's mask and scale options; value args start at `first`. */
static int selection_options(Va *G, const TfIrOp *op, int first, TfOpPlan *p, int *has_default,
                             TfVal *dflt) {
    const TfStmt *s = op->stmt;
    p->causal = !G->ir->every_position;
    p->beta = 2.0 * (log((double)G->n_real + 1.0) + 17.0);
    *has_default = 0;
    for (int i = first; i < s->n_args; i++) {
        const TfArg *a = &s->args[i];
        TfArgShape sh = check_arg_shape(a);
        const char *word = sh.kind == TF_ARG_NAME ? sh.name->text : NULL;
        const char *key = a->name.text; // `key: literal`
        if (word && strcmp(word, "causal") == 0) {
            p->causal = 1;
        } else if (word && strcmp(word, "sum") == 0 && op->op == TF_OP_AGGREGATE) {
            p->sum = 1;
        } else if (word && strcmp(word, "bidirectional") == 0) {
            if (!G->ir->every_position) {
                diag_error(G->diag, a->loc,
                           "a generating program's attention is causal: a token generated later "
                           "must not change what earlier positions computed");
                return -1;
            }
            p->causal = 0;
        } else if (key && strcmp(key, "default") == 0) {
            *has_default = 1;
            if (expr_literal(a->expr, dflt) < 0) {
                diag_error(G->diag, a->expr->loc, "a default is a literal: 0, 'a', 0.5");
                return -1;
            }
        } else if (key && strcmp(key, "scale") == 0) {
            TfVal v;
            if (expr_literal(a->expr, &v) < 0 || !val_is_num(v)) {
                diag_error(G->diag, a->expr->loc, "a scale is a number");
                return -1;
            }
            if (!(v.x > 0) || v.x > 1e4) {
                diag_error(G->diag, a->loc, "the scale must be above 0 and at most 10000");
                return -1;
            }
            p->beta = v.x;
        } else {
            diag_error(G->diag, a->loc,
                       "unknown option; %s takes `causal`, `bidirectional`, %s`default: V` and "
                       "`scale: S` after its %s",
                       tf_ops[op->op].name, op->op == TF_OP_AGGREGATE ? "`sum`, " : "",
                       op->op == TF_OP_AGGREGATE ? "value" : "selection");
            return -1;
        }
    }
    return 0;
}

/* ---- what a selection can reach ------------------------------------------------ */

#define REACH_WORK (1L << 22) /* predicate evaluations the bound may take */

/* A selection's sides for select_reach: the key registers but `indices`
 * (kx: whether the key side reads `indices`), which of them the query side
 * reads too (tied), the query registers (qx: `indices` among them). */
typedef struct Reach {
    int K[TF_EXPR_MAX_INPUTS], nk, kx;
    unsigned char tied[TF_EXPR_MAX_INPUTS];
    long n_k;
    int Q[TF_EXPR_MAX_INPUTS], nq, qx;
    long n_q;
} Reach;

/* The number of combinations of the registers' values (0 beyond cap). */
static long combos(Va *G, const int *regs, int n, long cap) {
    long total = 1;
    for (int i = 0; i < n; i++) {
        total *= va_facts(G, regs[i])->n_vals;
        if (total > cap || total <= 0) return 0;
    }
    return total;
}

/* Sets cur[regs[i]] to combination c's values (first register fastest). */
static void combo_set(Va *G, const int *regs, int n, long c, TfVal *cur) {
    for (int i = 0; i < n; i++) {
        const TfRegFacts *g = va_facts(G, regs[i]);
        cur[regs[i]] = g->vals[c % g->n_vals];
        c /= g->n_vals;
    }
}

/* 1 when the selection can pick the key position j (1..n_real) for the
 * query values in E->qcur: some combination of the key registers' values
 * satisfies it. At the query's own position (self) the registers both
 * sides read hold the query's values. Marks in readable the values of vreg
 * (a key register, else -1) that a picked key can hold. */
static int reach_key(Va *G, ExprEnv *E, const TfExpr *sel, const Reach *X, int j, int self,
                     int vreg, unsigned char *readable) {
    TfVal *kcur = (TfVal *)E->kcur;
    int any = 0;
    for (long c = 0; c < X->n_k; c++) {
        combo_set(G, X->K, X->nk, c, kcur);
        if (G->ir->indices_reg >= 0) kcur[G->ir->indices_reg] = val_num(j, 1);
        int tied = 1;
        for (int i = 0; self && i < X->nk; i++)
            if (X->tied[i] && val_cmp(kcur[X->K[i]], E->qcur[X->K[i]]) != 0) tied = 0;
        TfVal v;
        int t = 1; // a failure (none: selection_matrix evaluated every pair) counts as picked
        if (!tied || (expr_eval(E, sel, &v) == 0 && expr_truthy(E, sel, v, &t) == 0 && !t))
            continue;
        any = 1;
        if (vreg < 0) return 1;
        const TfRegFacts *gv = va_facts(G, vreg);
        for (int i = 0; i < gv->n_vals; i++)
            if (val_cmp(gv->vals[i], kcur[vreg]) == 0) readable[i] = 1;
    }
    return any;
}

/* The most keys the selection picks for the query values in E->qcur: at each
 * query position i (the one `indices` holds, or any), the other positions
 * it can pick (before i when causal) and itself when it can. */
static int reach_query(Va *G, ExprEnv *E, const TfExpr *sel, const Reach *X, int causal,
                       int vreg, unsigned char *readable, int *pre) {
    int n = G->n_real, best = 0, ix = G->ir->indices_reg;
    pre[0] = 0;
    int any = X->kx ? 0 : reach_key(G, E, sel, X, 0, 0, vreg, readable);
    for (int j = 1; j <= n; j++)
        pre[j] = pre[j - 1] + (X->kx ? reach_key(G, E, sel, X, j, 0, vreg, readable) : any);
    int lo = X->qx ? (int)E->qcur[ix].x : 1, hi = X->qx ? lo : n;
    int self = X->kx ? 0 : reach_key(G, E, sel, X, 0, 1, vreg, readable);
    for (int i = lo < 1 ? 1 : lo; i <= hi && i <= n; i++) {
        if (X->kx) self = reach_key(G, E, sel, X, i, 1, vreg, readable);
        int others = (causal ? pre[i] : pre[n]) - (pre[i] - pre[i - 1]);
        if (others + self > best) best = others + self;
    }
    return best;
}

/* The most positions the selection picks for any query (BOS excluded), and
 * with vreg a key register, which of its values a picked key can hold
 * (readable, one per value; left all 1 otherwise). Over every combination
 * of the query registers' values, each key position holding any
 * combination of the key registers' values but `indices` (its position):
 * never less than the input can give. Returns n_real when that is too much
 * work (or out of memory). */
static int select_reach(Va *G, const TfExpr *sel, const ExprReads *R, int causal, int vreg,
                        unsigned char *readable) {
    int n = G->n_real, ix = G->ir->indices_reg;
    Reach X = {.nk = 0};
    for (int i = 0; i < R->nk; i++) {
        if (R->kregs[i] == ix) {
            X.kx = 1;
            continue;
        }
        X.K[X.nk] = R->kregs[i];
        for (int k = 0; k < R->nq; k++) X.tied[X.nk] |= R->qregs[k] == R->kregs[i];
        X.nk++;
    }
    for (int i = 0; i < R->nq; i++) X.qx |= R->qregs[i] == ix;
    memcpy(X.Q, R->qregs, sizeof X.Q);
    X.nq = R->nq;
    int vk = 0; // vreg among the key registers
    for (int i = 0; i < X.nk; i++) vk |= X.K[i] == vreg;
    if (!vk) vreg = -1;
    X.n_k = combos(G, X.K, X.nk, REACH_WORK);
    X.n_q = combos(G, X.Q, X.nq, REACH_WORK);
    if (!X.n_k || !X.n_q || (double)X.n_q * X.n_k * (n + 1) * (X.kx ? 2 : 1) > REACH_WORK)
        return n;
    TfVal *kcur = calloc((size_t)G->ir->n_regs, sizeof *kcur);
    TfVal *qcur = calloc((size_t)G->ir->n_regs, sizeof *qcur);
    int *pre = malloc((size_t)(n + 1) * sizeof *pre);
    if (!kcur || !qcur || !pre) {
        free(kcur), free(qcur), free(pre);
        return n;
    }
    if (vreg >= 0) memset(readable, 0, (size_t)va_facts(G, vreg)->n_vals);
    ExprEnv E = {.ir = G->ir, .kcur = kcur, .qcur = qcur};
    int best = 0;
    for (long c = 0; c < X.n_q; c++) {
        combo_set(G, X.Q, X.nq, c, qcur);
        int b = reach_query(G, &E, sel, &X, causal, vreg, readable, pre);
        if (b > best) best = b;
    }
    free(kcur), free(qcur), free(pre);
    return best;
}

/* Count's two layers: an attention (plan p: the BOS scored like a selected
 * position, reading the BOS indicator) gives 1/(c+1) in a hidden numeric
 * register, and a staircase turns it into c in the categorical `dest`.
 * Returns 0, or -1 after reporting. */
static int push_count(Va *G, TfIrOp *op, int index, TfOpPlan *p, int dest, double leak,
                      double soft, int max_count) {
    const TfStmt *s = op->stmt;
    // 1 / (c + 1) into a hidden numeric register, then steps to c.
    // Named after the label, or the op and its place when unlabelled or
    // the label is taken: each Count has a fraction of its own.
    char name[128];
    if (s->label.text) snprintf(name, sizeof name, "%s.frac", s->label.text);
    if (!s->label.text || check_find_reg(G->ir, name) >= 0)
        snprintf(name, sizeof name, "%s%d.frac",
                 s->label.text ? s->label.text : tf_ops[op->op].layer_name, index);
    int h = va_add_hidden_reg(G, name, TF_REG_SCALAR);
    if (h < 0) return -1;
    int n_c = max_count + 1; // counts 0 .. max_count (select_reach), at most maxlen - 1
    TfVal *fr = malloc((size_t)n_c * sizeof *fr);
    if (!fr) { (void)(G->failed = 1); return -1; }
    for (int c = 0; c < n_c; c++) fr[c] = val_num(1.0 / (c + 1), 0);
    double moved;
    int m = val_unique(fr, n_c, SAME_VALUE, &moved);
    va_set_values(G, h, fr, m);
    free(fr);
    va_facts(G, h)->err = leak + soft + moved;
    p->dest = h;
    p->vreg = -1;
    op->plan = p;
    TfIrOp attn = *op;
    attn.dest = h;
    va_record_write(G, h, G->n_out);
    va_push_op(G, &attn);
    // The steps: value 1/(c+1) -> column c of dest. The softmax's rounding
    // (its sum of up to L + 1 terms, then a division) is relative to the
    // value 1/(c+1) it gives, and so is the steps' own: check each step
    // between neighbouring counts against the error at its values.
    const TfRegFacts *g = va_facts(G, h);
    double worst = INFINITY, wgap = 0, werr = 0;
    int wc = 0;
    for (int i = 1; i < g->n_vals; i++) {
        double gap = g->vals[i].x - g->vals[i - 1].x;
        double err = leak + (soft + 8 * EPS32) * g->vals[i].x;
        if (gap / 4 - err < worst) {
            worst = gap / 4 - err;
            wgap = gap;
            werr = err;
            wc = (int)lround(1.0 / g->vals[i].x) - 1;
        }
    }
    if (worst <= 0) {
        diag_error(G->diag, s->op.loc,
                   "Count: up to %d matches, the attention's 1/(count+1) for counts %d and %d "
                   "are %.3g apart but may be off by %.3g in float32: the count cannot be read "
                   "back exactly (margin %.3g)",
                   n_c - 1, wc, wc + 1, wgap, werr, worst);
        diag_hint(G->diag, "a smaller maxlen makes the gaps wider");
        return -1;
    }
    TfOpPlan *st = va_new_plan(G, TF_PLAN_STAIRCASE, op, ".steps");
    if (!st) return -1;
    st->n_in = 1;
    st->in[0] = h;
    st->n_x = g->n_vals;
    st->xs = va_alloc(G, (size_t)g->n_vals * sizeof *st->xs);
    st->x_col = va_alloc(G, (size_t)g->n_vals * sizeof *st->x_col);
    TfVal *counts = malloc((size_t)n_c * sizeof *counts);
    if (!st->xs || !st->x_col || !counts) { (void)(free(counts), G->failed = 1); return -1; }
    for (int c = 0; c < n_c; c++) counts[c] = val_num(c, 1);
    va_set_values(G, dest, counts, n_c);
    free(counts);
    for (int i = 0; i < g->n_vals; i++) {
        st->xs[i] = g->vals[i].x;
        int c = (int)lround(1.0 / g->vals[i].x) - 1; // xs ascending: counts descending
        st->x_col[i] = values_column(G->ir, dest, val_num(c, 1));
    }
    st->dest = dest;
    va_facts(G, dest)->err = ROUND_ONE * n_c;
    TfIrOp steps = *op;
    steps.plan = st;
    va_record_write(G, dest, index);
    va_push_op(G, &steps);
    return 0;
}

/* The argument `sum`, or NULL. */
static const TfArg *sum_arg(const TfStmt *s) {
    for (int i = 0; i < s->n_args; i++) {
        TfArgShape sh = check_arg_shape(&s->args[i]);
        if (sh.kind == TF_ARG_NAME && strcmp(sh.name->text, "sum") == 0) return &s->args[i];
    }
    return NULL;
}

/* 1 when every position the selection picks holds the same value of vreg:
 * some term's key side is `indices` (one position per value) or vreg
 * itself, and it selects at most one key value for every query value. */
static int copies_one_value(Va *G, const TfOpPlan *p, int vreg) {
    for (int t = 0; t < p->n_terms; t++) {
        const struct TfPlanTerm *T = &p->terms[t];
        if (T->kreg < 0 || (T->kreg != G->ir->indices_reg && T->kreg != vreg)) continue;
        const TfRegFacts *gk = va_facts(G, T->kreg);
        int ok = 1;
        for (int qi = 0; qi < T->nq && ok; qi++) {
            int n = 0;
            for (int ki = 0; ki < T->nk; ki++) {
                if (T->kreg == G->ir->indices_reg && gk->vals[ki].x == 0) continue; // the BOS
                n += T->P[(size_t)qi * (size_t)T->nk + (size_t)ki];
            }
            if (n > 1) ok = 0;
        }
        if (ok) return 1;
    }
    return 0;
}

/* What the parts of one selection's analysis share: its plan, the value
 * register (-1 for Count), the default, the score error before beta and the
 * softmax's leak and rounding, the most keys it picks and which of the value
 * register's values they can hold (select_reach). */
typedef struct Selection {
    TfOpPlan *p;
    int vreg;
    int has_default;
    TfVal dflt;
    double delta, leak, soft;
    int max_count;
    unsigned char *readable; /* one per value of vreg */
} Selection;

/* Aggregate(selection, value, ...) | Count(selection, ...): the arguments'
 * registers readable, the value register found, no key reading a BOS
 * default. 0 with *R and S->vreg, or -1 after reporting. */
static int select_arguments(Va *G, TfIrOp *op, ExprReads *R, Selection *S) {
    const TfStmt *s = op->stmt;
    int is_count = op->op == TF_OP_COUNT_MATCHES;
    if (G->ir->bos < 0) {
        diag_error(G->diag, s->op.loc,
                   "%s needs a BOS token (declare `bos '^';` and start every input with it): "
                   "the attention falls back on it when nothing is selected",
                   tf_ops[op->op].name);
        return -1;
    }
    if (is_count && G->ir->maxlen <= 0) {
        diag_error(G->diag, s->op.loc, "Count needs `maxlen N;`: its result counts 0..N-1");
        return -1;
    }
    const TfArg *a0 = &s->args[0];
    if (check_arg_shape(a0).kind != TF_ARG_EXPR) {
        diag_error(G->diag, a0->loc,
                   "%s's first argument is a selection such as k.tokens == q.tokens, or true",
                   tf_ops[op->op].name);
        return -1;
    }
    if (expr_reads(G->ir, G->diag, a0->expr, 1, R) < 0) return -1;
    int ok = 1;
    for (int i = 0; i < R->nk; i++)
        if (va_check_readable(G, op, R->kregs[i], a0->loc, 1) < 0) ok = 0;
    for (int i = 0; i < R->nq; i++)
        if (va_check_readable(G, op, R->qregs[i], a0->loc, 1) < 0) ok = 0;
    int vreg = -1;
    if (!is_count) {
        TfArgShape v = s->n_args < 2 ? (TfArgShape){0} : check_arg_shape(&s->args[1]);
        if (s->n_args < 2 || v.kind != TF_ARG_NAME) {
            diag_error(G->diag, s->n_args < 2 ? s->loc : s->args[1].loc,
                       "Aggregate's second argument is the register whose values it reads");
            return -1;
        }
        vreg = check_find_reg(G->ir, v.name->text);
        if (vreg < 0) {
            diag_error(G->diag, s->args[1].loc, "unknown register '%s'", v.name->text);
            check_hint_reg(G->diag, G->ir, v.name->text);
            return -1;
        }
        if (va_check_readable(G, op, vreg, s->args[1].loc, 0) < 0) ok = 0;
    }
    for (int i = 0; ok && i < R->nk + (vreg >= 0); i++) {
        int r = i < R->nk ? R->kregs[i] : vreg;
        if (!va_facts(G, r)->bos_value) continue;
        diag_error(G->diag, i < R->nk ? a0->loc : s->args[1].loc,
                   "'%s' holds its default at the BOS position, so an attention cannot read "
                   "it at the keys",
                   va_reg_name(G, r));
        diag_hint(G->diag, "Map it to a new register first: Map(%s) -> copy", va_reg_name(G, r));
        ok = 0;
    }
    S->vreg = vreg;
    return ok ? 0 : -1;
}

/* selection := term ('and' term)* with one register a side per term -> a sum
 * of terms; any other selection -> one term over joint sides. Sets the
 * plan's terms and S->delta; 0, or -1 after reporting. */
static int select_terms(Va *G, TfIrOp *op, int index, const ExprReads *R, Selection *S) {
    const TfExpr *sel = op->stmt->args[0].expr;
    TfOpPlan *p = S->p;
    const TfExpr *conj[TF_PLAN_MAX_INPUTS];
    int n_conj = 0, additive = split_conjuncts(sel, conj, &n_conj) == 0 && n_conj > 1;
    ExprReads CR[TF_PLAN_MAX_INPUTS];
    for (int i = 0; additive && i < n_conj; i++) {
        memset(&CR[i], 0, sizeof CR[i]);
        if (expr_reads(G->ir, G->diag, conj[i], 1, &CR[i]) < 0 || CR[i].nk > 1 || CR[i].nq > 1) additive = 0;
    }
    if (!additive) {
        n_conj = 1;
        conj[0] = sel;
        CR[0] = *R;
    }
    double delta = 0;
    for (int t = 0; t < n_conj; t++) {
        struct TfPlanTerm *T = &p->terms[t];
        int counts = op->op == TF_OP_COUNT_MATCHES || p->sum;
        T->qreg = selection_side(G, op, index, t, CR[t].qregs, CR[t].nq, 'q', counts, &T->nq);
        if (CR[t].nq && T->qreg < 0) return -1;
        T->kreg = selection_side(G, op, index, t, CR[t].kregs, CR[t].nk, 'k', counts, &T->nk);
        if (CR[t].nk && T->kreg < 0) return -1;
        if (selection_matrix(G, conj[t], &CR[t], T->nq, T->nk, &T->P) < 0) return -1;
        // How far scores can move (before beta): the inputs' errors.
        double eq = T->qreg >= 0 ? va_facts(G, T->qreg)->err : 0;
        double ek = T->kreg >= 0 ? va_facts(G, T->kreg)->err : 0;
        delta += (double)T->nq * eq + (double)T->nk * ek + 2 * EPS32;
    }
    p->n_terms = n_conj;
    p->delta = S->delta = delta;
    return 0;
}

/* The attention's error bounds: what the softmax leaks to keys it does not
 * select (below 25%), how float32 rounds it. 0, or -1 after reporting. */
static int select_bounds(Va *G, const TfIrOp *op, Selection *S) {
    double L = (double)G->n_real;
    double half = op->op == TF_OP_COUNT_MATCHES ? 1.0 : 0.5;
    S->leak = (L + 1) * exp(-S->p->beta * (half - 2 * S->delta));
    S->soft = (2 * L + 4) * EPS32;
    if (S->leak >= 0.25) {
        diag_error(G->diag, op->stmt->op.loc,
                   "%s: with scale %.3g over up to %.0f positions the attention may give %.3g%% "
                   "of its weight to positions it does not select; it must stay below 25%% "
                   "(margin %.3g)",
                   tf_ops[op->op].name, S->p->beta, L, fmin(S->leak, 1.0) * 100, 0.25 - S->leak);
        diag_hint(G->diag, "leave out `scale:` to let the compiler choose one");
        return -1;
    }
    return 0;
}

/* expr_numbered_selection's count_of: the selection of the causal Count
 * that alone writes reg, in a program without seed ops. */
static const TfExpr *count_of(const void *ctx, int reg) {
    const TfIr *ir = ctx;
    int w = ir->regs[reg].facts.writer;
    if (w < 0 || ir->ops[w].op != TF_OP_COUNT_MATCHES || ir->ops[w].stmt->n_args < 1) return NULL;
    for (int i = 0; i < ir->n_ops; i++) {
        const TfOpPlan *p = ir->ops[i].plan;
        if ((p && p->form == TF_PLAN_SEED) || (i != w && ir->ops[i].dest == reg)) return NULL;
    }
    // Causal as the statement says (op_options reads the same words).
    const TfStmt *s = ir->ops[w].stmt;
    int causal = !ir->every_position;
    for (int i = 1; i < s->n_args; i++) {
        TfArgShape sh = check_arg_shape(&s->args[i]);
        const char *word = sh.kind == TF_ARG_NAME ? sh.name->text : NULL;
        if (word && strcmp(word, "causal") == 0) causal = 1;
        if (word && strcmp(word, "bidirectional") == 0) causal = 0;
    }
    return causal ? s->args[0].expr : NULL;
}

/* Aggregate(selection, cat value) -> cat dest: a copy of one value (checked
 * at run time unless copies_one_value proves it, or a Count numbers the
 * positions the selection picks). 0, or -1 after reporting. */
static int select_copy(Va *G, TfIrOp *op, Selection *S) {
    const TfStmt *s = op->stmt;
    TfOpPlan *p = S->p;
    int vreg = S->vreg, dest = op->dest;
    const TfRegFacts *gv = va_facts(G, vreg);
    if (G->ir->regs[dest].kind != TF_REG_CATEGORICAL) {
        diag_error(G->diag, s->dest.loc,
                   "Aggregate of the categorical '%s' copies a value: its result is a `cat` "
                   "register, and '%s' is numeric",
                   va_reg_name(G, vreg), va_reg_name(G, dest));
        return -1;
    }
    if (p->sum) {
        const TfArg *a = sum_arg(s);
        diag_error(G->diag, a ? a->loc : s->op.loc,
                   "`sum` adds numbers, but '%s' is categorical: an Aggregate of it copies "
                   "one value",
                   va_reg_name(G, vreg));
        diag_hint(G->diag, "Map '%s' to a `num` register and sum that, or Count the "
                           "positions that hold a value",
                  va_reg_name(G, vreg));
        return -1;
    }
    // A selection no values of its registers can satisfy picks nothing, ever:
    // without a default the result would hold no value at any position.
    int any = S->has_default;
    for (int i = 0; i < gv->n_vals && !any; i++) any = S->readable[i] && S->max_count > 0;
    if (!any) {
        diag_error(G->diag, s->op.loc,
                   "Aggregate: no query can pick a position (no values of the selection's "
                   "registers satisfy it), so '%s' would never hold a value",
                   va_reg_name(G, dest));
        diag_hint(G->diag, "check the selection, or give it a `default:`");
        return -1;
    }
    if (!copies_one_value(G, p, vreg) &&
        !expr_numbered_selection(G->ir, s->args[0].expr, count_of, G->ir)) {
        diag_warning(G->diag, s->op.loc,
                     "Aggregate: the positions this selection picks may hold different "
                     "values of '%s', and the result is only right where they agree; the "
                     "compiler cannot prove that, so '%s' is checked at run time",
                     va_reg_name(G, vreg), va_reg_name(G, dest));
        diag_hint(G->diag, "a selection that picks one position (k.indices == q.X), one "
                           "value (k.%s == q.X), or the position a causal Count numbers "
                           "(k.P and k.n == q.X, n: Count(k.P)) needs no check",
                  va_reg_name(G, vreg));
        p->check = 1;
    }
    TfVal *vals = malloc((size_t)(gv->n_vals + 1) * sizeof *vals);
    if (!vals) { (void)(G->failed = 1); return -1; }
    int n = 0;
    for (int i = 0; i < gv->n_vals; i++)
        if (S->readable[i] && S->max_count > 0) vals[n++] = gv->vals[i];
    if (S->has_default) vals[n++] = S->dflt;
    int m = val_unique(vals, n, 0, NULL);
    va_set_values(G, dest, vals, m);
    free(vals);
    p->default_col = S->has_default ? values_column(G->ir, dest, S->dflt) : -1;
    p->value_numeric = 0;
    va_facts(G, dest)->err = gv->err + S->leak + S->soft + ROUND_ONE;
    // The BOS query reads the BOS's own value, the default: unlike
    // every other op's result, this one is not zero at the BOS, so no
    // attention may read it at its keys (the BOS key would match it).
    // The run-time check (p->check) skips the BOS position.
    if (S->has_default) va_facts(G, dest)->bos_value = 1;
    return 0;
}

/* The means of up to n_real values of vreg (and the default) into mean_reg's
 * value set, and with `sum` their sums into dest's; *totals_moved gets how
 * far numbers made one value drift. 0, or -1 after reporting. */
static int select_mean_values(Va *G, const TfIrOp *op, const Selection *S, int mean_reg,
                              double *totals_moved) {
    const TfOpPlan *p = S->p;
    const TfRegFacts *gv = va_facts(G, S->vreg);
    double sums_moved = 0; // numbers made one value (val_unique)
    *totals_moved = 0;
    int cap = MAX_NUM_VALUES;
    double *sums = malloc((size_t)cap * sizeof *sums), *next = malloc((size_t)cap * sizeof *next);
    TfVal *means = malloc((size_t)cap * sizeof *means);
    TfVal *totals = malloc((size_t)cap * sizeof *totals);
    int n_sums = 1, n_means = 0, n_totals = 0, known = sums && next && means && totals;
    if (known) {
        sums[0] = 0;
        means[n_means++] = val_num(p->default_num, 0);
        totals[n_totals++] = val_num(0, 0);
    }
    for (int k = 1; known && k <= S->max_count; k++) {
        int n_next = 0;
        for (int i = 0; i < n_sums && known; i++)
            for (int j = 0; j < gv->n_vals && known; j++) {
                if (!S->readable[j]) continue;
                if (n_next == cap) known = 0;
                else next[n_next++] = sums[i] + gv->vals[j].x;
            }
        if (!known) break;
        // unique
        TfVal *tmp = malloc((size_t)n_next * sizeof *tmp);
        if (!tmp) {
            known = 0;
            break;
        }
        for (int i = 0; i < n_next; i++) tmp[i] = val_num(next[i], 0);
        double moved;
        n_sums = val_unique(tmp, n_next, SAME_VALUE, &moved);
        sums_moved += moved;
        for (int i = 0; i < n_sums; i++) sums[i] = tmp[i].x;
        free(tmp);
        for (int i = 0; i < n_sums && known; i++) {
            if (n_means == cap || n_totals == cap) {
                known = 0;
                break;
            }
            means[n_means++] = val_num(sums[i] / k, 0);
            totals[n_totals++] = val_num(sums[i], 0);
        }
        n_means = val_unique(means, n_means, SAME_VALUE, &moved);
        va_facts(G, mean_reg)->err += moved;
        n_totals = val_unique(totals, n_totals, SAME_VALUE, &moved);
        *totals_moved += moved;
    }
    // A sum kept for several drifts by at most sums_moved; its mean by less.
    va_facts(G, mean_reg)->err += sums_moved;
    *totals_moved += sums_moved;
    if (known) va_set_values(G, mean_reg, means, n_means);
    if (known && p->sum) va_set_values(G, op->dest, totals, n_totals);
    free(sums), free(next), free(means), free(totals);
    if (!known && p->sum) {
        diag_error(G->diag, op->stmt->op.loc,
                   "`sum`: the sums of up to %d values of '%s' are more than %d numbers",
                   G->n_real, va_reg_name(G, S->vreg), MAX_NUM_VALUES);
        return -1;
    }
    return 0;
}

/* Aggregate(selection, num value, sum) -> dest: three ops, the mean (this
 * attention, already pushed into mean_reg), the count (a Count of the same
 * selection into a hidden `cat`), their product (a gated Map into dest). */
static void select_sum(Va *G, TfIrOp *op, int index, const Selection *S, int mean_reg,
                       double totals_moved) {
    const TfStmt *s = op->stmt;
    const TfOpPlan *p = S->p;
    int dest = op->dest;
    double L = (double)G->n_real;
    TfOpPlan *pc = va_new_plan(G, TF_PLAN_COUNT, op, ".count");
    char name[128];
    snprintf(name, sizeof name, "%s%d.n", p->name, index);
    int count_reg = va_add_hidden_reg(G, name, TF_REG_CATEGORICAL);
    if (!pc || count_reg < 0) return;
    pc->n_terms = p->n_terms;
    memcpy(pc->terms, p->terms, sizeof pc->terms);
    pc->beta = p->beta;
    pc->causal = p->causal;
    double leak_c = (L + 1) * exp(-p->beta * (1.0 - 2 * S->delta));
    TfIrOp cop = *op;
    if (push_count(G, &cop, G->n_out, pc, count_reg, leak_c, S->soft, S->max_count) < 0) return;
    TfOpPlan *pg = va_new_plan(G, TF_PLAN_GATED, op, ".sum");
    const TfRegFacts *gc = va_facts(G, count_reg), *gm = va_facts(G, mean_reg);
    if (!pg) return;
    pg->n_in = 2;
    pg->in[0] = mean_reg;
    pg->in[1] = count_reg;
    pg->n_combo = gc->n_vals;
    pg->combo_num = va_alloc(G, (size_t)gc->n_vals * sizeof *pg->combo_num);
    pg->combo_slope = va_alloc(G, (size_t)gc->n_vals * sizeof *pg->combo_slope);
    if (!pg->combo_num || !pg->combo_slope) { (void)(G->failed = 1); return; }
    for (int c = 0; c < gc->n_vals; c++) pg->combo_slope[c] = gc->vals[c].x;
    double mmax = va_max_abs(gm->vals, gm->n_vals);
    pg->c0 = mmax * L + 1.0;
    if (gc->err * pg->c0 >= 0.5) {
        diag_error(G->diag, s->op.loc,
                   "`sum`: the count may be off by %.3g, which the product's gate (%.3g) "
                   "turns into %.3g (margin %.3g)",
                   gc->err, pg->c0, gc->err * pg->c0, 0.5 - gc->err * pg->c0);
        return;
    }
    pg->dest = dest;
    va_facts(G, dest)->err = bounds_mlp(G->ir, pg) + totals_moved;
    TfIrOp gop = *op;
    gop.plan = pg;
    va_record_write(G, dest, index);
    va_push_op(G, &gop);
}

/* Aggregate(selection, num value[, sum]) -> num dest: the mean of the
 * selected values (with `sum`, times their count: select_sum). Returns 1
 * when the op is pushed already (sum), 0 when the caller pushes it, -1
 * after reporting. */
static int select_mean(Va *G, TfIrOp *op, int index, Selection *S) {
    const TfStmt *s = op->stmt;
    TfOpPlan *p = S->p;
    int vreg = S->vreg, dest = op->dest;
    const TfRegFacts *gv = va_facts(G, vreg);
    if (G->ir->regs[dest].kind == TF_REG_CATEGORICAL) {
        diag_error(G->diag, s->dest.loc,
                   "Aggregate of the numeric '%s' averages it: its result is a `num` "
                   "register, and '%s' is categorical",
                   va_reg_name(G, vreg), va_reg_name(G, dest));
        return -1;
    }
    if (S->has_default && !val_is_num(S->dflt)) {
        diag_error(G->diag, s->loc, "the default of a numeric Aggregate is a number");
        return -1;
    }
    p->value_numeric = 1;
    p->default_num = S->has_default ? S->dflt.x : 0;
    // The BOS key's value is what the value register holds there plus this
    // weight: the default exactly, also where that register is itself a
    // mean with a default (not 0 at the BOS: the BOS query reads the BOS).
    p->bos_weight = p->default_num - gv->bos_num;
    va_facts(G, dest)->bos_num = p->default_num;
    G->bos_set = 1;
    double vmax = gv->known ? fmax(va_max_abs(gv->vals, gv->n_vals), fabs(p->default_num)) : 1e6;
    int mean_reg = dest; /* with `sum`, the mean goes to a hidden register first */
    if (p->sum) {
        if (S->has_default) {
            diag_error(G->diag, s->loc, "a sum over nothing is 0: `sum` takes no default");
            return -1;
        }
        if (G->ir->maxlen <= 0 || !gv->known) {
            diag_error(G->diag, s->op.loc,
                       "`sum` needs `maxlen` and a value register whose values are known "
                       "(it multiplies the mean by the count)");
            return -1;
        }
        char name[128];
        snprintf(name, sizeof name, "%s%d.mean", p->name, index);
        mean_reg = va_add_hidden_reg(G, name, TF_REG_SCALAR);
        if (mean_reg < 0) return -1;
        gv = va_facts(G, vreg); // adding a register moves the array
        p->dest = mean_reg;
    }
    va_facts(G, mean_reg)->err = gv->err + 2 * S->leak * vmax + S->soft * vmax;
    double totals_moved = 0;
    if (gv->known && select_mean_values(G, op, S, mean_reg, &totals_moved) < 0) return -1;
    if (!p->sum) {
        va_facts(G, dest)->err = va_facts(G, mean_reg)->err;
        return 0;
    }
    op->plan = p;
    va_record_write(G, mean_reg, G->n_out);
    va_push_op(G, op);
    select_sum(G, op, index, S, mean_reg, totals_moved);
    return 1;
}

/* Aggregate | Count: the decision table.
 *   arguments -> terms -> bounds, then
 *   Count                      -> attention 1/(c+1), staircase to c (push_count)
 *   Aggregate of a cat value   -> copy
 *   Aggregate of a num value   -> mean (with `sum`: mean, count, product) */
void select_analyze(Va *G, TfIrOp *op, int index) {
    int is_count = op->op == TF_OP_COUNT_MATCHES;
    ExprReads R = {0};
    Selection S = {0};
    if (select_arguments(G, op, &R, &S) < 0 || va_check_fresh(G, op) < 0) return;
    S.p = va_new_plan(G, is_count ? TF_PLAN_COUNT : TF_PLAN_ATTEND, op, is_count ? ".attn" : "");
    if (!S.p) return;
    S.dflt = val_num(0, 1);
    if (selection_options(G, op, is_count ? 1 : 2, S.p, &S.has_default, &S.dflt) < 0) return;
    if (select_terms(G, op, index, &R, &S) < 0 || select_bounds(G, op, &S) < 0) return;
    int n_v = S.vreg >= 0 ? va_facts(G, S.vreg)->n_vals : 0;
    S.readable = va_alloc(G, (size_t)(n_v ? n_v : 1));
    if (!S.readable) return;
    memset(S.readable, 1, (size_t)(n_v ? n_v : 1));
    S.max_count = select_reach(G, op->stmt->args[0].expr, &R, S.p->causal, S.vreg, S.readable);
    int dest = op->dest;
    if (is_count) {
        push_count(G, op, index, S.p, dest, S.leak, S.soft, S.max_count);
        return;
    }
    S.p->vreg = S.vreg;
    S.p->dest = dest;
    int pushed = va_is_categorical(G->ir, S.vreg) ? select_copy(G, op, &S)
                                                   : select_mean(G, op, index, &S);
    if (pushed != 0) return;
    op->plan = S.p;
    va_record_write(G, dest, index);
    va_push_op(G, op);
}
