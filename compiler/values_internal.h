/* values_internal.h: the value analysis's state, shared by compiler/values.c
 * (the walk over every op, the seed ops), compiler/map.c (Map) and
 * compiler/select.c (Aggregate, Count). Private to those three files. */
#ifndef TF_VALUES_INTERNAL_H
#define TF_VALUES_INTERNAL_H

#include "values.h"

#define MAX_COMBOS (1 << 20)        /* per Map or selection */
#define MAX_NUM_VALUES 20000        /* a numeric register's value set, beyond: unknown */
#define WARN_COMBOS 1024            /* a Map's product of domains worth a warning */
#define WARN_JOINT 256              /* a selection side's joint domain */
#define ROUND_ONE (1.0 / (1 << 20)) /* a few float32 roundings of a value near 1 */
#define EPS32 (1.0 / (1 << 24))
#define SAME_VALUE 1e-9             /* numbers this close (relative) are one value */

/* The value analysis as it walks the ops (values_analyze). */
typedef struct Va {
    TfIr *ir;
    TfDiag *diag;
    int opt;        /* the lowering's opt_level */
    int n_real;     /* positions after the BOS: maxlen - 1 (or max_len) */
    TfIrOp *out;    /* the new op list */
    int n_out, cap_out;
    int failed;     /* out of memory */
    int bos_set;    /* the op being analyzed set its dest's bos_num (else it is 0) */
} Va;

void *va_alloc(Va *G, size_t n);       /* zeroed, in the TfIr's arena; NULL: failed */
char *va_strdup(Va *G, const char *s); /* the same for a copy of s */
TfRegFacts *va_facts(Va *G, int r);
const char *va_reg_name(Va *G, int r);
int va_is_categorical(const TfIr *ir, int r);
int va_push_op(Va *G, const TfIrOp *op);
/* A hidden register (a joint selection side, Count's fraction); -1 on failure. */
int va_add_hidden_reg(Va *G, const char *name, TfRegKind kind);
/* The values a register holds after the BOS; -1 when unknown. */
int va_domain(Va *G, int r, const TfVal **vals);
void va_set_values(Va *G, int r, const TfVal *v, int n);
/* Checks that op can read register r: written before, of a usable kind,
 * its values known; 0, or -1 after reporting. */
int va_check_readable(Va *G, const TfIrOp *op, int r, TfLoc loc, int need_categorical);
/* A note at the op that made g's values unknown, saying how (none when no op did). */
void va_note_why(Va *G, const TfRegFacts *g);
/* "a = 1, b = 'x'": a combination of input values, for messages. */
void va_combo_text(Va *G, const int *regs, const TfVal *vals, int n, char *buf, size_t len);
TfOpPlan *va_new_plan(Va *G, TfPlanForm form, const TfIrOp *op, const char *suffix);
void va_record_write(Va *G, int r, int op_index);
/* Write-once: a general op's destination must be fresh; -1 after reporting. */
int va_check_fresh(Va *G, const TfIrOp *op);
double va_max_abs(const TfVal *v, int n);
/* Whether combination c of inputs in[0..n_in) (mixed radix over their
 * values, first input fastest) has `indices` = 0 in a program with a BOS:
 * the BOS's position, where every general op writes zeros, so that no
 * position after the BOS ever computes it. What a Map reads is then exactly
 * what occurs: `tokens` after the BOS with `indices` from 1, and every
 * register made from them the values those make (issue 27: `x * indices`
 * of a letter is never the empty string). */
int va_combo_at_bos(const TfIr *ir, const int *in, int n_in, long c);
/* Sets a categorical destination's values (sorted): the results of the
 * combinations that are defined (have a result) and reached (occur after
 * the BOS), and returns, through col, each combination's column: -1 where
 * it has no result, or where it is not reached and no reached one gives its
 * result (a reached one's result may stand in an unreached combination,
 * which leaves the cubes free to ignore it: compiler/cubes.h). */
int va_set_categorical_results(Va *G, int dest, const TfVal *res, const int *defined,
                               const int *reached, int n, int *col);

/* compiler/map.c and compiler/select.c: one op each (index: its place in
 * the new op list). */
void map_analyze(Va *G, TfIrOp *op, int index);
void select_analyze(Va *G, TfIrOp *op, int index);

#endif
