/* values.h: the value analysis, one walk over every op of the program.
 *
 * After compiler/checker.c has resolved names and kinds and unrolled the
 * program, values_analyze walks the ops in order. For every register it
 * knows the set of values it can hold at the positions after the BOS (or
 * that it does not know them) and a bound on how far its columns can be
 * from their exact values in float32. Each op's entry in compiler/ops.c
 * says which registers it reads and writes; a seed op that writes a register
 * makes its values known (Clear, IsZero, at -O) or unknown, never leaves
 * them as they were. A general op (Map: compiler/map.c; Aggregate and
 * Count: compiler/select.c) is checked against the values it reads: every
 * step and attention score gap gives the exact answer, or it is refused with
 * its location and the margin; where the exactness needs a fact about the
 * input (a selection that may pick positions holding different values) it
 * is accepted with a warning and a run-time check (TfOpPlan.check). The analysis
 * sizes the categorical registers (one column per value), lays out the
 * residual stream (the one layout), and plans each general op's weights
 * (TfOpPlan).
 *
 * Every general op writes zeros at the BOS position (position 0): that is
 * what lets an attention give the BOS a fixed score, so that it is selected
 * exactly when nothing else is, and supplies the default. The one exception
 * is that default itself: an Aggregate with one holds it at the BOS
 * (TfRegFacts.bos_value), and no attention reads such a register at its keys.
 *
 * Memory: what values_analyze learns of a register is written on it
 * (TfIrReg.facts); everything it allocates is in the TfIr's arena, released
 * by check_free.
 */
#ifndef TF_VALUES_H
#define TF_VALUES_H

#include "checker.h"
#include "diag.h"
#include "expr.h"


typedef enum TfPlanForm {
    TF_PLAN_TABLE,     /* MLP: a step per combination of categorical inputs */
    TF_PLAN_STAIRCASE, /* MLP: steps between the values of one numeric input */
    TF_PLAN_LINEAR,    /* MLP: ReLU(z) - ReLU(-z) of a linear combination */
    TF_PLAN_GATED,     /* MLP: per combination of categorical inputs, a + b x of one
                         numeric input x, gated by the combination's one-hot */
    TF_PLAN_SPLIT,     /* MLP: per value of a categorical input in[1], a staircase over the
                         numeric in[0] (compiler/fuse.c: a Map of a Count and a position) */
    TF_PLAN_ATTEND,    /* attention: select and aggregate (mean or copy) */
    TF_PLAN_COUNT,     /* attention: 1 / (count + 1) into a hidden numeric register */
    TF_PLAN_SEED,      /* a seed op: its construction (compiler/lower.c) over its checked
                         arguments; the checker makes it */
    TF_PLAN_FORM_COUNT
} TfPlanForm;

#define TF_PLAN_MAX_INPUTS TF_EXPR_MAX_INPUTS

struct TfOpPlan {
    TfPlanForm form;
    char name[96]; /* layer name */
    int n_in;
    int in[TF_PLAN_MAX_INPUTS]; /* input registers */
    int dest;
    int check; /* a run-time check of dest after this layer (compiler/plans.c) */

    /* TABLE: per combination (mixed radix over the inputs' values, first
     * input fastest): the destination column (categorical) or -1 when the
     * result has no column, or the number (numeric destination). */
    int n_combo;
    int *combo_col;
    double *combo_num;
    /* TABLE: a Count's result copied into a fresh one-hot for a selection
     * that counts (compiler/select.c, clean_side): never composed with the
     * steps before it nor read through (compiler/fuse.c). */
    int clean;

    /* STAIRCASE: the input's values xs[0..n_x) ascending, and per value its
     * destination column or number; no step between neighbours with the
     * same result. x_linear: the staircase is over x = sum coef[i] * in[i]
     * + c0 (c0 off at the BOS), a LINEAR Map it was composed with
     * (compiler/fuse.c), instead of in[0]; where in[i] is categorical,
     * in_coef[i] (one per value) weighs its one-hot instead of coef[i]
     * (a Map of a number plus a function of a categorical register:
     * compiler/map.c, map_offset). */
    int n_x;
    double *xs;
    int *x_col;
    double *x_num;
    int x_linear;
    double *in_coef[TF_PLAN_MAX_INPUTS];
    /* STAIRCASE (not x_linear): the base unit gives the result at the
     * highest x and each step turns on below its threshold, so that at
     * every x the units on are those of the nearer end: a Count's fraction
     * crowds its values near 0, where the steps are steepest
     * (compiler/angles.c chooses it where its bound is smaller). */
    int x_down;
    /* STAIRCASE of a number (not x_linear, not x_down): a slope a != 0
     * when the result is a x plus a staircase of what is left,
     * plans_residual (`x % 10`: x, less 10 from 10 on): one unit
     * a ReLU(x - xs[0] + 1) and the steps of the residual, flat between
     * them as any staircase's (compiler/map.c chooses it where it has fewer
     * units). */
    double slope;
    /* SPLIT: xs as STAIRCASE; x_col / x_num hold n_combo * n_x results, the
     * staircase of in[1]'s value a at [a * n_x, (a + 1) * n_x); n_combo is
     * in[1]'s number of values. */

    /* GATED: in[0] numeric, in[1..n_in) categorical; per combination of the
     * categorical ones (as TABLE) dest = combo_num[c] + combo_slope[c] x; c0 is
     * the gate's size (more than any |a + b x|). */
    double *combo_slope;

    /* LINEAR: dest = sum coef[i] * in[i] + c0 (zero at the BOS). */
    double coef[TF_PLAN_MAX_INPUTS], c0;

    /* ATTEND / COUNT: the selection as a sum of terms, each with one query
     * register and one key register (joint ones when a term reads several;
     * -1 when a side reads none) and its truth table P[qi * nk + ki] over
     * their values. A selection is one term, or a conjunction of terms that
     * each read one register a side: a key is selected when all hold, i.e.
     * when its score reaches n_terms. Then the value register (ATTEND), the
     * default, the inverse temperature, the mask. */
    int n_terms;
    struct TfPlanTerm {
        int qreg, kreg, nq, nk;
        unsigned char *P;
        /* Compared on angles (compiler/angles.c): the key value ki is the
         * point (cos, sin) of 2 pi ki / nk in the hidden registers ka[],
         * the query value the point of the key value it picks ((0, 0):
         * none) in qa[]; the score a_scale (q . k - a_cos). */
        int angle, qa[2], ka[2];
        double a_scale, a_cos;
    } terms[TF_PLAN_MAX_INPUTS];
    int vreg;
    int value_numeric;
    double default_num; /* numeric value at the BOS (the default) */
    double bos_weight;  /* the BOS key's value: the default less what the value
                           register holds at the BOS (its bos_num) */
    int default_col;    /* categorical default's destination column, -1: none */
    double beta;
    double delta; /* how far the inputs' errors move a score, before beta (select.c) */
    int causal;
    int sum; /* ATTEND: `sum` (the mean times the count) */

    /* SEED: the op's checked arguments in source order (compiler/ops.c's
     * parameters say which registers it reads and writes); dest is the op's. */
    int n_args;
    const TfSeedArg *args;
};

/* Runs the analysis (see above) with the lowering's opt_level (the seed
 * ops' constructions differ); reports to diag. The op list may grow: joint
 * registers and Count's steps become ops of their own (of the op's kind,
 * with their own plan). Returns 0, or -1 when memory ran out (which is not
 * reported to diag: it is no fault of the program). */
int values_analyze(TfIr *ir, int opt_level, TfDiag *diag);

/* Column of value v in categorical register r (tokens, indices or a declared
 * one), -1 when it has none. */
int values_column(const TfIr *ir, int r, TfVal v);

/* The token a value is printed as (a token; an integer 0..9 as its digit),
 * -1 when it has none in the vocabulary. */
int values_token_of(const TfIr *ir, TfVal v);

#endif
