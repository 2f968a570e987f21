/* prove_out.c: the registers and the output against the source.
 *
 * After the last layer that writes a declared register, its columns must
 * decode to the source's value in every combination of the base variables
 * they and the value depend on: a categorical register's right column above
 * every other (the margin is the smallest gap; a register with no value
 * must have every column under 1/2), a number within a bound (reported).
 * The unembedding's logits must put the right token first at every
 * position after the BOS; a numeric output's bound must be within the
 * file's `output_error_bound`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prove_internal.h"
#include "values.h"

/* The index of v in register r's value set, -1. */
static int value_index(const TfIr *ir, int r, TfVal v) {
    const TfRegFacts *g = &ir->regs[r].facts;
    return pv_val_find(g->vals, g->n_vals, v);
}

typedef struct Scan {
    PvDeps D;
    long n;
    TfVal *cur;
    unsigned char *none;
    int assign[TF_PROOF_MAX_BASE];
} Scan;

/* Combination i of D into s->assign and the registers' values; 0 when
 * some column read is unreachable. */
static int scan_at(PvNet *N, Scan *s, long i, const int *cols, int ncols) {
    for (int b = 0; b < N->S->n_base; b++) s->assign[b] = -1;
    pv_deps_decode(N->S, s->D, i, s->assign);
    for (int k = 0; k < ncols; k++)
        if (isnan(pv_col_get(N, &N->col[cols[k]], s->assign).lo)) return 0;
    pv_eval_regs(N->S, s->assign, s->cur, s->none);
    return 1;
}

/* Categorical margin of register r at one combination (expected column e, -1: none). */
static double cat_margin(PvNet *N, const Scan *s, int r, int e) {
    int off = N->reg_col[r], size = N->reg_size[r];
    double top = -INFINITY;
    for (int k = 0; k < size; k++)
        if (k != e) top = fmax(top, pv_col_get(N, &N->col[off + k], s->assign).hi);
    if (e < 0) return 0.5 - top;
    return pv_col_get(N, &N->col[off + e], s->assign).lo - top;
}

/* A scan of register r's columns and value over every combination of the
 * base variables both depend on (s->n < 0: more than PV_TABLE_LIMIT);
 * *cols its columns. -1: out of memory (nothing left allocated). */
static int scan_reg(PvNet *N, int r, Scan *s, int **cols) {
    const TfIr *ir = N->S->ir;
    int off = N->reg_col[r], size = N->reg_size[r];
    *cols = malloc((size_t)size * sizeof(int));
    *s = (Scan){.D = N->S->deps[r]};
    for (int k = 0; *cols && k < size; k++) s->D |= N->col[off + k].deps, (*cols)[k] = off + k;
    s->n = pv_deps_size(N->S, s->D, PV_TABLE_LIMIT);
    s->cur = malloc((size_t)ir->n_regs * sizeof *s->cur);
    s->none = malloc((size_t)ir->n_regs);
    if (*cols && s->cur && s->none) return 0;
    free(*cols), free(s->cur), free(s->none);
    return -1;
}

static int check_reg(PvNet *N, int li, int r) {
    const PvSem *S = N->S;
    const TfIr *ir = S->ir;
    const PvOp *o = &S->ops[S->writer[r]];
    int off = N->reg_col[r], size = N->reg_size[r], *cols;
    Scan s;
    if (scan_reg(N, r, &s, &cols) < 0) return -1;
    if (s.n < 0) {
        free(cols), free(s.cur), free(s.none);
        return 0;
    }
    int scalar = ir->regs[r].kind == TF_REG_SCALAR;
    double worst = scalar ? 0 : INFINITY;
    char where[32]; // a register no layer writes: the embedding holds it
    if (li < 0) snprintf(where, sizeof where, "the embedding");
    else snprintf(where, sizeof where, "layer %d", li);
    for (long i = 0; i < s.n; i++) {
        if (!scan_at(N, &s, i, cols, size)) continue;
        if (scalar) {
            // A token no number spells (an output the unembedding decodes,
            // compiler/numbers.h) has no value to be near: the output's
            // logit margin (check_tokens) proves it.
            if (s.none[r] || !val_is_num(s.cur[r])) continue;
            TfIv v = pv_col_get(N, &N->col[off], s.assign);
            double err = fmax(fabs(v.lo - s.cur[r].x), fabs(v.hi - s.cur[r].x));
            if (!(err < 1e30)) err = INFINITY;
            worst = fmax(worst, err);
            continue;
        }
        int vi = s.none[r] ? -1 : value_index(ir, r, s.cur[r]);
        int e = vi >= 0 && N->val_col[r] ? N->val_col[r][vi] : -1;
        double mg = cat_margin(N, &s, r, e);
        if (!(mg > 0)) {
            char lab[64];
            if (s.none[r]) snprintf(lab, sizeof lab, "no value");
            else val_label(ir, s.cur[r], lab, sizeof lab);
            pv_fail(N, o->stmt->loc.line, li, s.assign, s.D,
                    "line %d: %s -> %s (%s): the columns do not decode to %s (margin %.3g)",
                    o->stmt->loc.line, tf_ops[o->kind].name, ir->regs[r].name, where, lab, mg);
            continue; // more cases for the counterexample search
        }
        worst = fmin(worst, mg);
    }
    if (!N->failed) {
        if (scalar) pv_line(N->P, "line %d: %s -> %s: %s: within %.3g of the value", o->stmt->loc.line, tf_ops[o->kind].name, ir->regs[r].name, where, worst);
        else pv_line(N->P, "line %d: %s -> %s: %s: decodes with margin %.3g", o->stmt->loc.line, tf_ops[o->kind].name, ir->regs[r].name, where, worst);
    }
    if (scalar && !(worst < INFINITY))
        pv_fail(N, o->stmt->loc.line, li, NULL, 0, "line %d: %s -> %s (%s): no finite bound", o->stmt->loc.line, tf_ops[o->kind].name, ir->regs[r].name, where);
    free(cols), free(s.cur), free(s.none);
    return 0;
}

int pv_check_regs(PvNet *N, int li) {
    for (int r = 0; r < N->S->ir->n_regs && !N->failed && !N->unproven; r++)
        if (N->last_write[r] == li && N->S->writer[r] >= 0 && N->reg_model[r] >= 0)
            if (check_reg(N, li, r) < 0) return -1;
    return 0;
}

/* How far register r's columns are inside check bound b at one
 * combination: b minus the largest distance of a column from the one-hot
 * of value column e (the column at that distance in *worst_col). */
static double check_slack(PvNet *N, const Scan *s, int r, int e, double b, int *worst_col) {
    int off = N->reg_col[r];
    double far = 0;
    for (int k = 0; k < N->reg_size[r]; k++) {
        TfIv v = pv_col_get(N, &N->col[off + k], s->assign);
        double t = k == e ? 1 : 0, dist = fmax(fabs(v.lo - t), fabs(v.hi - t));
        if (!(dist <= far)) far = dist, *worst_col = k; // NaN: as far as can be
    }
    return b - far;
}

/* Check c (at layer li) of register r: wherever the program gives r one
 * value (the case the proof of its Aggregate covers), every column within
 * the check's bound of that value's one-hot; else the check stops the
 * model on inputs the program answers. */
static int check_runtime(PvNet *N, int li, int r, const TfCheck *c) {
    const PvSem *S = N->S;
    const TfIr *ir = S->ir;
    const PvOp *o = S->writer[r] >= 0 ? &S->ops[S->writer[r]] : NULL;
    int line = o ? o->stmt->loc.line : c->line;
    int off = N->reg_col[r], size = N->reg_size[r], *cols;
    Scan s;
    if (scan_reg(N, r, &s, &cols) < 0) return -1;
    double b = model_check_bound(N->m, c), least = INFINITY;
    if (s.n < 0) pv_unproven(N, line, li, "layer %d: the run-time check of '%s': not proven: more than 2^22 combinations", li, ir->regs[r].name);
    for (long i = 0; i < s.n; i++) {
        if (!scan_at(N, &s, i, cols, size) || s.none[r]) continue;
        int vi = value_index(ir, r, s.cur[r]);
        int e = vi >= 0 && N->val_col[r] ? N->val_col[r][vi] : -1, k = 0;
        double slack = check_slack(N, &s, r, e, b, &k);
        if (!(slack > 0)) {
            char lab[64];
            val_label(ir, s.cur[r], lab, sizeof lab);
            TfIv v = pv_col_get(N, &N->col[off + k], s.assign);
            pv_fail(N, line, li, s.assign, s.D,
                    "line %d: %s (layer %d): where '%s' holds one value, %s, the run-time check "
                    "fails: its column %d is in [%.9g, %.9g], the check allows %d within %.2g",
                    line, c->op, li, ir->regs[r].name, lab, k, v.lo, v.hi, k == e, b);
            continue; // more cases for the counterexample search
        }
        least = fmin(least, slack);
    }
    if (!N->failed && !N->unproven)
        pv_line(N->P, "line %d: %s: layer %d: the run-time check passes wherever it holds one value (by %.3g of its bound %.2g)",
                line, c->op, li, least, b);
    free(cols), free(s.cur), free(s.none);
    return 0;
}

int pv_check_runtime(PvNet *N, int li) {
    for (int i = 0; i < N->m->n_checks && !N->failed && !N->unproven; i++) {
        const TfCheck *c = &N->m->checks[i];
        if (c->layer != li) continue;
        int r = 0;
        while (r < N->S->ir->n_regs && N->reg_model[r] != c->reg) r++;
        if (r == N->S->ir->n_regs || N->S->ir->regs[r].kind == TF_REG_SCALAR) {
            pv_unproven(N, c->line, li, "layer %d: not proven: a run-time check of '%s', which the source has no categorical register for",
                        li, N->m->regs[c->reg].name);
            return 0;
        }
        if (check_runtime(N, li, r, c) < 0) return -1;
    }
    return 0;
}

/* Largest |column - value| of a numeric register over every combination. */
static double scalar_bound(PvNet *N, int r) {
    const TfIr *ir = N->S->ir;
    int off = N->reg_col[r];
    Scan s = {.D = N->S->deps[r] | N->col[off].deps};
    s.n = pv_deps_size(N->S, s.D, PV_TABLE_LIMIT);
    s.cur = malloc((size_t)ir->n_regs * sizeof *s.cur);
    s.none = malloc((size_t)ir->n_regs);
    double worst = s.n < 0 || !s.cur || !s.none ? INFINITY : 0;
    for (long i = 0; i < s.n && s.cur && s.none; i++) {
        if (!scan_at(N, &s, i, &off, 1) || s.none[r]) continue;
        TfIv v = pv_col_get(N, &N->col[off], s.assign);
        double err = fmax(fabs(v.lo - s.cur[r].x), fabs(v.hi - s.cur[r].x));
        worst = err < 1e30 ? fmax(worst, err) : INFINITY;
    }
    free(s.cur), free(s.none);
    return worst;
}

static int check_tokens(PvNet *N, int r) {
    const TfModel *m = N->m;
    const TfIr *ir = N->S->ir;
    int d = m->d_model, nv = m->n_vocab;
    const float *U = m->tensors[m->unembed].data;
    const float *ub = m->unembed_bias >= 0 ? m->tensors[m->unembed_bias].data : NULL;
    unsigned char *reads = malloc((size_t)d);
    int *cols = malloc((size_t)d * sizeof(int)), nc = 0;
    TfIv *x = calloc((size_t)d, sizeof *x);
    Scan s = {0};
    s.cur = malloc((size_t)ir->n_regs * sizeof *s.cur);
    s.none = malloc((size_t)ir->n_regs);
    if (!reads || !cols || !x || !s.cur || !s.none) {
        free(reads), free(cols), free(x), free(s.cur), free(s.none);
        return -1;
    }
    s.D = pv_read_cols(N, U, 0, nv, reads) | N->S->deps[r];
    for (int c = 0; c < d; c++)
        if (reads[c]) cols[nc++] = c;
    s.n = pv_deps_size(N->S, s.D, PV_TABLE_LIMIT);
    double worst = INFINITY;
    if (s.n < 0) pv_unproven(N, 0, -1, "the output: not proven: more than 2^22 combinations");
    for (long i = 0; i < s.n; i++) {
        if (!scan_at(N, &s, i, cols, nc) || s.none[r]) continue;
        for (int k = 0; k < nc; k++) x[cols[k]] = pv_col_get(N, &N->col[cols[k]], s.assign);
        int e = values_token_of(ir, s.cur[r]);
        double mg = pv_logit_margin(U, ub, nv, e, x, reads, d);
        if (!(mg > 0)) {
            char lab[64];
            val_label(ir, s.cur[r], lab, sizeof lab);
            pv_fail(N, ir->output_loc.line, m->n_layers, s.assign, s.D,
                    "the output '%s': the unembedding does not pick %s (margin %.3g)",
                    ir->regs[r].name, lab, mg);
            continue;
        }
        worst = fmin(worst, mg);
    }
    if (!N->failed && !N->unproven)
        pv_line(N->P, "output %s: the right token by a logit margin of %.3g", ir->regs[r].name, worst);
    free(reads), free(cols), free(x), free(s.cur), free(s.none);
    return 0;
}

int pv_check_output(PvNet *N) {
    const TfIr *ir = N->S->ir;
    int r = ir->output_reg;
    if (r < 0 || N->reg_model[r] < 0) {
        pv_unproven(N, 0, -1, "the output register is not in the file");
        return 0;
    }
    if (!model_numeric_output(N->m)) return check_tokens(N, r);
    double b = scalar_bound(N, r);
    N->P->output_bound = b;
    N->P->bound_proven = b < INFINITY;
    if (!(b <= N->m->output_error_bound)) {
        N->P->bound_short = b < INFINITY && !N->failed && !N->unproven;
        pv_fail(N, ir->output_loc.line, N->m->n_layers, NULL, 0,
                "the output '%s': proven within %.3g of the value, but the file claims %.3g",
                ir->regs[r].name, b, N->m->output_error_bound);
    } else
        pv_line(N->P, "output %s: within %.3g of the value (the file claims %.3g)", ir->regs[r].name,
                b, N->m->output_error_bound);
    return 0;
}
