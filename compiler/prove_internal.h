/* prove_internal.h: what the validator's files share (compiler/prove.h
 * says what it proves). Nothing here is the compiler's: the program's
 * meaning comes from the front end (parse, checker, the value sets of
 * compiler/values.c, compiler/expr.c's evaluator), the rest from the weights.
 */
#ifndef TF_PROVE_INTERNAL_H
#define TF_PROVE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "checker.h"
#include "diag.h"
#include "expr.h"
#include "interval.h"
#include "parse.h"
#include "prove.h"

typedef uint64_t PvDeps; /* a set of base variables, bit b for base variable b */

/* One source op (Map, Aggregate, Count) as the source writes it. */
typedef struct PvOp {
    const TfStmt *stmt;
    TfOpKind kind;
    int dest;           /* its register */
    const TfExpr *expr; /* Map: the expression; Aggregate, Count: the selection */
    int vreg;           /* Aggregate: the value register */
    int causal, sum, has_default;
    TfVal dflt;
    int base; /* Aggregate, Count: its base variable; -1 for a Map */
    /* A `sum` Aggregate: its count, a base variable of its own (nbase:
       0..maxlen-1 selected keys, no register), and which sums each count
       can make, reach[n * (sums) + j] for the sum base's value j. */
    int nbase;
    unsigned char *reach;
} PvOp;

/* A base variable: a register whose value at a position is not a function
 * of others at that position (tokens, indices, an Aggregate or Count). */
typedef struct PvBase {
    int reg;      /* -1: a `sum` Aggregate's count (its op's nbase) */
    int n;        /* its values, "none" included */
    TfVal *vals;  /* n values; with has_none the last is "none" */
    int has_none; /* may hold no value (a categorical Aggregate without default) */
    int op;       /* its PvOp, -1 for tokens and indices */
} PvBase;

typedef struct PvSem {
    FILE *sink; /* /dev/null: the front end's messages */
    TfProgram *prog;
    TfIr *ir;
    int every_position;
    PvOp *ops;
    int n_ops;
    PvBase base[TF_PROOF_MAX_BASE];
    int n_base;
    int b_tokens, b_indices;
    PvDeps *deps; /* per register: the base variables its value depends on */
    int *writer;  /* per register: its PvOp, -1 */
    int *base_of; /* per register: its base variable, -1 */
    ExprReads *reads; /* per op: the registers a Map reads (make_deps) */
    char unsupported[400]; /* why the program cannot be proven ("" when it can) */
    int unsupported_line;
} PvSem;

/* prove_sem.c */
int pv_sem_load(PvSem *S, const TfModel *m, const char *source, size_t len, TfError *err);
void pv_sem_free(PvSem *S);
/* Every register whose base variables assign[] gives (-1: not given):
 * cur[r] and none[r] (1: holds no value). */
void pv_eval_regs(const PvSem *S, const int *assign, TfVal *cur, unsigned char *none);
/* v's index among vals[0..n): the equal one, else the nearest within 1e-9
   relative (the same number computed in another order), -1
   (compiler/prove_eval.c). */
int pv_val_find(const TfVal *vals, int n, TfVal v);
/* The selection of op o between a key and a query: 1 selected, 0 not, -1
 * when it fails (a none input: not selected). */
int pv_select(const PvSem *S, const PvOp *o, const TfVal *kcur, const TfVal *qcur);
/* 1 when Aggregate o's selection picks at most one position at any query:
 * a causal Count numbers the positions it can pick
 * (expr_numbered_selection). */
int pv_numbered_selection(const PvSem *S, const PvOp *o);
/* The number of combinations of deps' values, or -1 above limit. */
long pv_deps_size(const PvSem *S, PvDeps d, long limit);
/* assign[] for combination idx of deps (others left alone). */
void pv_deps_decode(const PvSem *S, PvDeps d, long idx, int *assign);
/* The index into a table over d of the combination in assign. */
long pv_deps_index(const PvSem *S, PvDeps d, const int *assign);
/* Label of base variable b's value i ("3", "'a'", "none"). */
void pv_base_label(const PvSem *S, int b, int i, char *buf, size_t n);
/* Name of base variable b: its register's, or "count(total)" for a sum's count. */
void pv_base_name(const PvSem *S, int b, char *buf, size_t n);
/* The PvOp (Aggregate or Count) at that source line, -1. */
int pv_op_at_line(const PvSem *S, int line);

/* A residual column at the positions after the BOS: an interval per
 * combination of the base variables in deps (prove_col.c). */
typedef struct PvCol {
    PvDeps deps;
    long n;
    TfIv *v;
} PvCol;

typedef struct PvNet {
    const TfModel *m;
    PvSem *S;
    TfProof *P;
    PvCol *col; /* d_model columns, after the BOS */
    TfIv *bos;  /* d_model, the BOS row */
    int maxlen;
    int *reg_col; /* per program register: its first model column, -1 when absent */
    int *reg_size;
    int *reg_model; /* per program register: the model's register, -1 */
    int *last_write; /* per program register: the last layer writing its columns, -1 */
    int **val_col;   /* per categorical program register: per value, its model column, -1 */
    int failed, unproven;
    int threads; /* for the attention heads' queries (prove_attn.c) */
    int naive;   /* tests: the naive twins of the fast paths (key classes over every
                    combination at once, prove_attn.c; every unit at every combination,
                    prove_mlp.c) */
} PvNet;

#define PV_MAX_THREADS 16

#define PV_TABLE_LIMIT (1L << 22)

/* prove_col.c */
int pv_col_set(PvCol *c, PvDeps d, long n);
void pv_col_free(PvCol *c);
TfIv pv_col_get(const PvNet *N, const PvCol *c, const int *assign);
/* c += add (a table over add's deps), the result over the union; the
 * float32 rounding of the residual addition included. -1: too large. */
int pv_col_add(PvNet *N, PvCol *c, const PvCol *add);
/* deps of the columns with a nonzero weight in W's rows [r0, r1) (row-major,
 * d_model wide): reads[c] set to 1 for each such column. */
PvDeps pv_read_cols(const PvNet *N, const float *W, int r0, int r1, unsigned char *reads);

/* prove.c */
void pv_line(TfProof *P, const char *fmt, ...) TF_PRINTF(2, 3);
void pv_fail(PvNet *N, int line, int layer, const int *assign, PvDeps d, const char *fmt, ...)
    TF_PRINTF(6, 7);
void pv_unproven(PvNet *N, int line, int layer, const char *fmt, ...) TF_PRINTF(4, 5);
/* row . x over the columns read, in the engine's float32 (gamma widened). */
TfIv pv_dot(const float *row, const TfIv *x, const unsigned char *reads, int d, float bias);
/* The least margin of logit e over the other nv - 1 (U: nv rows of d, bias ub or NULL). */
double pv_logit_margin(const float *U, const float *ub, int nv, int e, const TfIv *x,
                       const unsigned char *reads, int d);
/* Columns a layer writes (w[c] = 1): nonzero rows of its output (or fc2) and bias. */
void pv_layer_writes(const TfModel *m, const TfLayer *ly, unsigned char *w);

/* prove_mlp.c, prove_attn.c, prove_out.c */
int pv_mlp_layer(PvNet *N, int li);
int pv_attn_layer(PvNet *N, int li);
int pv_check_regs(PvNet *N, int li);
/* The file's run-time checks at layer li: each passes wherever its register
 * holds one value by the program (prove_out.c). */
int pv_check_runtime(PvNet *N, int li);
int pv_check_output(PvNet *N);
/* For tests (tests/test_prove.c): a head's score q.k * scale (D <=
 * TF_PV_TWIN_MAX) by the naive interval dot product and by the
 * midpoint-radius pass the proof uses (prove_attn.c, scores_all). */
#define TF_PV_TWIN_MAX 64
void pv_score_twins(int D, float scale, const TfIv *q, const TfIv *k, TfIv *naive, TfIv *fast);

/* For tests: the proof with the fast paths (naive 0) or their naive twins
 * (1), on one thread, and a digest of the residual stream it ends with
 * (every column's intervals): the twins must give the same bits. */
int pv_prove_twin(const TfModel *m, int naive, TfProof *P, uint64_t *digest, TfError *err);

/* prove_seed.c: a program of seed ops only (no bos, read at its last
 * position), proven from the weights on their own terms. */
int pv_seed_program(const PvSem *S);
int pv_seed_prove(const TfModel *m, PvSem *S, TfProof *P);

/* prove_split.c: a scheduled model of seed ops as the model of one layer
 * per op, in the source's order, that computes the same: u shares m's
 * tensors and owns the last n_own; file_layer[op] is the op's layer in m. */
typedef struct PvSplit {
    TfModel u;
    int n_own;
    int *file_layer;
} PvSplit;
/* 1 when m is not one layer per op of ir (parts, or another count). */
int pv_split_needed(const TfModel *m, const TfIr *ir);
/* 0: sp made; 1: m cannot be taken apart so (why, and the source line,
 * said); -1: out of memory. */
int pv_split_seed(const TfModel *m, const TfIr *ir, PvSplit *sp, char *why, size_t n_why, int *why_line);
void pv_split_free(PvSplit *sp);

#endif
