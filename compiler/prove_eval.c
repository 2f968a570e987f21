/* prove_eval.c: the source's meaning on one whole input, for
 * counterexamples (compiler/prove.h): every register at every position, op
 * by op, as docs/language.md defines the general ops (a Count counts the
 * selected positions after the BOS; an Aggregate copies the one value or
 * averages the selected ones, or gives its default when none is selected).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prove_internal.h"
#include "values.h"

struct TfProveRef {
    PvSem S;
    TfVal *cur;
    unsigned char *none;
    int *count; /* per position and op: the keys an Aggregate or Count selected */
    int cap;
    double near; /* the last run's: how near it came to a failing case (1: reached) */
};

TfProveRef *prove_ref_new(const TfModel *m, TfError *err) {
    TfProveRef *R = calloc(1, sizeof *R);
    if (!R) return NULL;
    if (!m->source || pv_sem_load(&R->S, m, m->source, strlen(m->source), err) < 0 || R->S.unsupported[0]) {
        if (R->S.unsupported[0]) tf_error_set(err, "%s", R->S.unsupported);
        prove_ref_free(R);
        return NULL;
    }
    return R;
}

void prove_ref_free(TfProveRef *R) {
    if (!R) return;
    pv_sem_free(&R->S);
    free(R->cur);
    free(R->none);
    free(R->count);
    free(R);
}

/* Aggregate or Count at position p over keys 1..last: -1 when a copy
 * selects different values (the run-time check's failure). */
static int attend(TfProveRef *R, int oi, int p, int last, const ExprReads *E) {
    const PvOp *o = &R->S.ops[oi];
    int nr = R->S.ir->n_regs, count = 0, mixed = 0;
    TfVal *q = R->cur + (size_t)p * nr, first = {0};
    double sum = 0;
    for (int j = 1; j <= last; j++) {
        TfVal *k = R->cur + (size_t)j * nr;
        int ok = 1;
        for (int i = 0; i < E->nk; i++) ok &= !R->none[(size_t)j * nr + E->kregs[i]];
        for (int i = 0; i < E->nq; i++) ok &= !R->none[(size_t)p * nr + E->qregs[i]];
        if (!ok || pv_select(&R->S, o, k, q) != 1) continue;
        if (o->kind == TF_OP_AGGREGATE) {
            if (R->none[(size_t)j * nr + o->vreg]) continue;
            TfVal v = k[o->vreg];
            if (count && val_cmp(v, first) != 0) mixed = 1;
            if (!count) first = v;
            sum += v.x;
        }
        count++;
    }
    TfVal *out = &q[o->dest];
    unsigned char *none = &R->none[(size_t)p * nr + o->dest];
    *none = 0;
    R->count[(size_t)p * R->S.n_ops + oi] = count;
    if (o->sum) {
        *out = val_num(sum, 0); // a sum over nothing is 0
    } else if (o->kind == TF_OP_COUNT_MATCHES) {
        *out = val_num(count, 1);
    } else if (count == 0) {
        *out = o->has_default ? o->dflt : val_num(0, 1);
        *none = !o->has_default && R->S.ir->regs[o->dest].kind != TF_REG_SCALAR;
    } else if (R->S.ir->regs[o->dest].kind == TF_REG_SCALAR) {
        *out = val_num(sum / count, 0);
    } else {
        if (mixed) return -1;
        *out = first;
    }
    return 0;
}

static int eval_all(TfProveRef *R, const int *toks, int n) {
    PvSem *S = &R->S;
    int nr = S->ir->n_regs;
    for (int p = 1; p < n; p++) {
        R->cur[(size_t)p * nr + TF_IR_REG_TOKENS] = (TfVal){TF_VAL_TOKEN, S->ir->vocab[toks[p]]};
        R->cur[(size_t)p * nr + S->ir->indices_reg] = val_num(p, 1);
        R->none[(size_t)p * nr + TF_IR_REG_TOKENS] = R->none[(size_t)p * nr + S->ir->indices_reg] = 0;
    }
    for (int i = 0; i < S->n_ops; i++) {
        const PvOp *o = &S->ops[i];
        ExprReads E = {0};
        TfDiag quiet;
        diag_init(&quiet, "", "", 0, S->sink);
        expr_reads(S->ir, &quiet, o->expr, o->kind != TF_OP_MAP, &E);
        for (int p = 1; p < n; p++) {
            if (o->kind != TF_OP_MAP) {
                if (attend(R, i, p, o->causal ? p : n - 1, &E) < 0) return -1;
                continue;
            }
            int ok = 1;
            for (int k = 0; k < E.n; k++) ok &= !R->none[(size_t)p * nr + E.regs[k]];
            ExprEnv X = {.ir = S->ir, .cur = R->cur + (size_t)p * nr,
                         .true_division = expr_true_division(S->ir, o->dest)};
            TfVal v;
            R->none[(size_t)p * nr + o->dest] = 1;
            if (ok && expr_eval(&X, o->expr, &v) == 0) {
                R->cur[(size_t)p * nr + o->dest] = v;
                R->none[(size_t)p * nr + o->dest] = 0;
            }
        }
    }
    return 0;
}

/* How near position p comes to P's failing case c: the share of its base
 * variables that hold the case's value, a number that misses counting
 * 1 / (2 (1 + its distance)) (1: p holds the case). */
static double case_near(const TfProveRef *R, int p, const struct TfProofCase *K) {
    int nr = R->S.ir->n_regs;
    double got = 0;
    for (int k = 0; k < K->n; k++) {
        const PvBase *B = &R->S.base[K->base[k]];
        TfVal w = B->vals[K->idx[k]], v;
        if (B->reg < 0) { // a sum's count
            v = val_num(R->count[(size_t)p * R->S.n_ops + B->op], 1);
        } else {
            int none = R->none[(size_t)p * nr + B->reg], want_none = B->has_none && K->idx[k] == B->n - 1;
            if (none || want_none) {
                got += none == want_none;
                continue;
            }
            v = R->cur[(size_t)p * nr + B->reg];
        }
        if (val_cmp(v, w) == 0 || (val_is_num(v) && val_is_num(w) && fabs(v.x - w.x) <= 1e-9 * (1 + fabs(v.x))))
            got += 1;
        else if (val_is_num(v) && val_is_num(w))
            got += 0.5 / (1 + fabs(v.x - w.x));
    }
    return K->n ? got / K->n : 1; // a case of no base variables: every position holds it
}

int pv_val_find(const TfVal *vals, int n, TfVal v) {
    for (int i = 0; i < n; i++)
        if (val_cmp(vals[i], v) == 0) return i;
    int best = -1;
    for (int i = 0; i < n; i++)
        if (val_is_num(v) && val_is_num(vals[i]) && fabs(vals[i].x - v.x) <= 1e-9 * (1 + fabs(v.x)) &&
            (best < 0 || fabs(vals[i].x - v.x) < fabs(vals[best].x - v.x)))
            best = i;
    return best;
}

/* The nearest any position of the last run comes to one of P's failing
 * cases (case_near). */
static double nearest(const TfProveRef *R, int n, const TfProof *P) {
    double best = 0;
    for (int p = 1; p < n; p++)
        for (int c = 0; c < P->n_cases; c++) best = fmax(best, case_near(R, p, &P->cases[c]));
    return best;
}

int prove_ref_run(TfProveRef *R, const int *toks, int n, const TfProof *P, int *out, double *num) {
    int nr = R->S.ir->n_regs;
    if (n > R->cap) {
        free(R->cur), free(R->none), free(R->count);
        R->cur = malloc((size_t)n * nr * sizeof *R->cur);
        R->none = malloc((size_t)n * nr);
        R->count = calloc((size_t)n * (size_t)R->S.n_ops + 1, sizeof *R->count);
        R->cap = R->cur && R->none && R->count ? n : 0;
        if (!R->cap) return -1;
    }
    memset(R->none, 1, (size_t)n * nr);
    if (eval_all(R, toks, n) < 0) return -1;
    int r = R->S.ir->output_reg;
    out[0] = -1;
    for (int p = 1; p < n; p++) {
        int none = R->none[(size_t)p * nr + r];
        TfVal v = R->cur[(size_t)p * nr + r];
        out[p] = none ? -1 : values_token_of(R->S.ir, v);
        if (num) num[p] = none ? NAN : v.x;
    }
    R->near = nearest(R, n, P);
    return R->near == 1;
}

double prove_ref_near(const TfProveRef *R) { return R->near; }
