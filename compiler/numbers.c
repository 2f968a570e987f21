/* numbers.c: categorical registers held as numbers (numbers.h). */
#include "numbers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "expr.h"
#include "values.h"

static int find(int *parent, int r) {
    while (parent[r] != r) r = parent[r] = parent[parent[r]];
    return r;
}

/* Whether an op reads register r (a selection's sides, its value and
 * default, a Map's expression). */
static int read_by_an_op(const TfIr *ir, int r, FILE *sink) {
    for (int i = 0; i < ir->n_ops; i++) {
        const TfIrOp *o = &ir->ops[i];
        if (o->plan && o->plan->vreg == r) return 1;
        for (int a = 0; o->stmt && a < o->stmt->n_args; a++) {
            if (!o->stmt->args[a].expr) continue;
            TfDiag quiet;
            diag_init(&quiet, "", "", 0, sink);
            ExprReads R = {0};
            int sel = a == 0 && o->op != TF_OP_MAP;
            // A flag (`causal`) reads no register.
            int bad = 0;
            if (expr_reads(ir, &quiet, o->stmt->args[a].expr, sel, &R) < 0) R.n = R.nk = R.nq = 0;
            diag_finish(&quiet);
            for (int k = 0; k < R.n; k++) bad |= R.regs[k] == r;
            for (int k = 0; k < R.nk; k++) bad |= R.kregs[k] == r;
            for (int k = 0; k < R.nq; k++) bad |= R.qregs[k] == r;
            if (bad) return 1;
        }
    }
    return 0;
}

/* Whether r, on its own, may be held as a number: declared categorical by
 * the program, written by a Map or by an Aggregate proven to copy one
 * value, its values numbers; or the output, whose values are tokens (the
 * unembedding decodes the number, and a value no number spells is held as
 * numbers_value's code, which only the unembedding reads: nothing else may
 * read such an output). */
static int candidate(const TfIr *ir, int r, FILE *sink) {
    const TfIrReg *g = &ir->regs[r];
    if (r == TF_IR_REG_TOKENS || r == ir->indices_reg || g->kind != TF_REG_CATEGORICAL ||
        !g->facts.known || !g->facts.one_value || g->facts.n_vals < 2 || g->facts.writer < 0)
        return 0;
    int coded = 0;
    for (int v = 0; v < g->facts.n_vals; v++) {
        if (r == ir->output_reg && values_token_of(ir, g->facts.vals[v]) < 0) return 0;
        coded |= !val_is_num(g->facts.vals[v]);
    }
    if (coded && (r != ir->output_reg || read_by_an_op(ir, r, sink))) return 0;
    const TfIrOp *w = &ir->ops[g->facts.writer];
    if (!w->plan || w->dest != r) return 0;
    if (w->op == TF_OP_MAP) return w->stmt->n_args == 1;
    return w->op == TF_OP_AGGREGATE && !coded && !w->plan->check && !w->plan->sum;
}

double numbers_value(const TfVal *vals, int n, TfVal v) {
    if (val_is_num(v)) return v.x;
    double top = -1;
    int rank = 0;
    for (int i = 0; i < n; i++) {
        if (val_is_num(vals[i])) top = fmax(top, floor(vals[i].x));
        else if (val_cmp(vals[i], v) < 0) {
            int seen = 0; // count each token once
            for (int j = 0; j < i && !seen; j++) seen = val_cmp(vals[j], vals[i]) == 0;
            rank += !seen;
        }
    }
    return top + 1 + rank;
}

int numbers_groups(const TfIr *ir, int n_declared, int *group) {
    int *parent = malloc((size_t)(n_declared > 0 ? n_declared : 1) * sizeof *parent);
    unsigned char *bad = calloc((size_t)(n_declared > 0 ? n_declared : 1), 1);
    FILE *sink = fopen("/dev/null", "w");
    if (!parent || !bad || !sink) {
        free(parent), free(bad);
        if (sink) fclose(sink);
        return -1;
    }
    for (int r = 0; r < n_declared; r++) {
        parent[r] = r;
        bad[r] = !candidate(ir, r, sink);
    }
    for (int i = 0; i < ir->n_ops; i++) {
        const TfIrOp *o = &ir->ops[i];
        if (o->op != TF_OP_AGGREGATE && o->op != TF_OP_COUNT_MATCHES) continue;
        // A selection compares one-hots: its registers keep theirs.
        TfDiag quiet;
        diag_init(&quiet, "", "", 0, sink);
        ExprReads R = {0};
        if (o->stmt->n_args < 1 || !o->stmt->args[0].expr ||
            expr_reads(ir, &quiet, o->stmt->args[0].expr, 1, &R) < 0) {
            diag_finish(&quiet);
            continue;
        }
        diag_finish(&quiet);
        for (int k = 0; k < R.nk; k++)
            if (R.kregs[k] < n_declared) bad[R.kregs[k]] = 1;
        for (int k = 0; k < R.nq; k++)
            if (R.qregs[k] < n_declared) bad[R.qregs[k]] = 1;
        // A copy's value register and its result are held alike.
        int v = o->plan ? o->plan->vreg : -1;
        if (o->op == TF_OP_AGGREGATE && v >= 0 && o->dest >= 0) {
            if (v >= n_declared || o->dest >= n_declared) {
                if (v < n_declared) bad[v] = 1;
                if (o->dest < n_declared) bad[o->dest] = 1;
            } else {
                parent[find(parent, v)] = find(parent, o->dest);
            }
        }
    }
    for (int r = 0; r < n_declared; r++)
        if (bad[r]) bad[find(parent, r)] = 1;
    int n = 0;
    for (int r = 0; r < n_declared; r++) group[r] = -1;
    for (int r = 0; r < n_declared; r++) {
        int root = find(parent, r);
        if (bad[root]) continue;
        if (group[root] < 0) group[root] = n++;
        group[r] = group[root];
    }
    free(parent), free(bad);
    fclose(sink);
    return n;
}

void numbers_apply(TfIr *ir, const unsigned char *as_number, int n) {
    for (int r = 0; r < n && r < ir->n_regs; r++)
        if (as_number[r] && ir->regs[r].kind == TF_REG_CATEGORICAL) {
            ir->regs[r].kind = TF_REG_SCALAR;
            ir->regs[r].size = 1;
            ir->regs[r].as_number = 1;
            if (r == ir->output_reg) ir->output_as_number = 1;
        }
}
