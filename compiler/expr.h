/* expr.h: values and the expression evaluator of the general ops.
 *
 * A value is an integer, a token (its character code) or a real number.
 * A token is Python's str: a Map builds new ones (x[::-1], x + "s"), which
 * the IR's word table keeps (compiler/expr_str.c).
 * expr_eval evaluates an expression (Map's, or a selection's with k./q.
 * fields) on one assignment of values to registers, as the compiler does
 * for every combination of its inputs' values; expr_reads lists the
 * registers an expression reads, reporting unknown names (with a
 * did-you-mean hint). Arithmetic: `/` of two integers is floor division, of
 * any real operand true division (docs/language.md, "Expressions").
 *
 * Memory: nothing here allocates; an ExprEnv borrows its arrays.
 */
#ifndef TF_EXPR_H
#define TF_EXPR_H

#include <stddef.h>

#include "ast.h"
#include "checker.h"
#include "diag.h"

#define TF_EXPR_MAX_INPUTS 8 /* registers one expression (or one side) reads */

int val_is_num(TfVal v);
TfVal val_num(double x, int integer);
/* Tokens after numbers; numbers by value. */
int val_cmp(TfVal a, TfVal b);
/* Sorts and removes duplicates; returns the new count. Numbers closer than
 * `tol` (relative to their size, at least absolute tol) to the first of
 * their run are one value: the same number reached two ways. tol 0: exact.
 * *moved (when not NULL) gets how far apart the numbers made one value lie
 * at most (0 when none were): the kept one is that close to each of them,
 * which the caller adds to the register's error bound. */
int val_unique(TfVal *v, int n, double tol, double *moved);
/* The label of a value: 3, 'a', 'cat', 0.5 (buf of n bytes; ir: its words). */
void val_label(const TfIr *ir, TfVal v, char *buf, size_t n);

/* What expr_eval reads: per register, its value (Map) or its key and query
 * values (selections); msg and where describe a failure. */
typedef struct ExprEnv {
    const TfIr *ir;
    const TfVal *cur;
    const TfVal *kcur, *qcur;
    int true_division; /* `/` of two integers: 1 true division (a Map into a
                          `num` register), 0 floor division: expr_true_division */
    char msg[200];
    TfLoc where;
} ExprEnv;

/* 0 and *out, or -1 with E->msg ("divides by zero") and E->where set. */
int expr_eval(ExprEnv *E, const TfExpr *e, TfVal *out);
/* A truth value, as Python's: a number not 0, a string or list not empty. */
int expr_truthy(ExprEnv *E, const TfExpr *e, TfVal v, int *out);
/* A literal's value (3, 0.5, 'a', true): 0, or -1 when e is no literal. */
int expr_literal(const TfExpr *e, TfVal *v);
/* 1 when e is a + b x + ... in its register names (linear, exact). */
int expr_linear(const TfExpr *e);

/* Whether e divides anywhere (`/`, whose result depends on the
 * destination's kind: ExprEnv.true_division). */
int expr_divides(const TfExpr *e);

/* ExprEnv.true_division for a Map into register dest: true division into
 * a `num` register, floor division into a `cat` one, held as a number or
 * not (compiler/numbers.h). */
int expr_true_division(const TfIr *ir, int dest);

/* 1 when selection sel picks at most one position for any query because a
 * causal Count numbers the positions it can pick: sel is a conjunction
 * with a conjunct k.K == X (X reading only q. fields), where K is the
 * result of a causal Count whose selection reads only k.C, and another
 * conjunct that reads only k.C and holds only where the Count's selection
 * does (every value of C tried). At two positions it picks, both counted,
 * the later one's K is at least the earlier one's plus 1 (it counts
 * itself, and the earlier one counts only positions up to it), so K
 * differs and at most one matches X. count_of(ctx, K): the selection of
 * the causal Count that alone writes K, or NULL (no such Count, or a
 * register a seed op may write). */
int expr_numbered_selection(const TfIr *ir, const TfExpr *sel,
                            const TfExpr *(*count_of)(const void *ctx, int reg), const void *ctx);

/* The registers an expression reads: names (Map), k. and q. fields
 * (selections), each listed once. */
typedef struct ExprReads {
    int regs[TF_EXPR_MAX_INPUTS], n;
    int kregs[TF_EXPR_MAX_INPUTS], nk;
    int qregs[TF_EXPR_MAX_INPUTS], nq;
} ExprReads;

/* Fills R (add to what it holds); reports unknown registers, misplaced
 * k./q. and bad table keys to diag; -1 after an error. */
int expr_reads(const TfIr *ir, TfDiag *diag, const TfExpr *e, int selection, ExprReads *R);

/* ---- for expr.c's parts (compiler/expr_str.c: Python's strings) ---- */

#define TF_EXPR_STRING_MAX 60 /* bytes of a string an expression makes (its label fits 64) */

/* Fails with a message (printf format) at e: -1. */
int expr_fail(ExprEnv *E, const TfExpr *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Two strings (or two lists) in Python's order: <0, 0, >0. */
int str_order(const ExprEnv *E, TfVal a, TfVal b);
/* a + b and a * n (e->op '+' or '*') where a string or list takes part (1
 * when none does). */
int str_arith(ExprEnv *E, const TfExpr *e, TfVal a, TfVal b, TfVal *out);
/* a in b, a not in b (e->op). */
int str_in(ExprEnv *E, const TfExpr *e, TfVal a, TfVal b, TfVal *out);
int str_index(ExprEnv *E, const TfExpr *e, TfVal s, TfVal i, TfVal *out);
/* part[k] counts where given[k]: start, stop, step. */
int str_slice(ExprEnv *E, const TfExpr *e, TfVal s, const TfVal *part, const int *given,
              TfVal *out);
/* self.name(arg...) */
int str_method(ExprEnv *E, const TfExpr *e, TfVal self, const TfVal *arg, TfVal *out);
/* sorted(s), list(s); 1 when e calls neither. */
int str_call(ExprEnv *E, const TfExpr *e, const TfVal *arg, TfVal *out);
/* min(s), max(s) of one string or list. */
int str_minmax(ExprEnv *E, const TfExpr *e, TfVal s, TfVal *out);
/* A list's label: ['a', 'b']. */
void str_label(const TfIr *ir, TfVal v, char *buf, size_t n);

#endif
