/* prove.h: the validator, an independent check that a weight file computes
 * its program (translation validation: whatever built the weights).
 *
 * prove_model re-reads the program from the file's `source` with the front
 * end only (parse, names and kinds, the value analysis at -O0 for each
 * register's semantic value set, the expression evaluator) and checks the
 * file's weights layer by layer in interval arithmetic (compiler/interval.h)
 * against that meaning. It shares nothing of the compiler's plans,
 * lowering, cubes, fusion or scheduling, nor any error bound the compiler
 * computed (tests/layering.sh checks the symbols): every margin and bound
 * here comes from the weights.
 *
 * The model it proves (compiler/prove_sem.c): a position's "base variables"
 * are its token, its index and the result of each Aggregate and Count; every
 * Map register is a function of them (the source's expressions composed).
 * Each residual column at the positions after the BOS holds an interval
 * that is a function of a few base variables (compiler/prove_col.c); the BOS
 * row is tracked apart. An MLP part is evaluated on every combination of
 * the base variables its input columns depend on (compiler/prove_mlp.c), an
 * attention head for every query scenario, key class and length up to
 * maxlen (compiler/prove_attn.c); each declared register must decode to
 * the source's value after the last layer that writes it, and the
 * unembedding must give the right token (or, for a number, the bound must
 * be within the file's `output_error_bound`) (compiler/prove_out.c).
 *
 * Memory: a TfProof owns its lines of text; prove_free releases them.
 */
#ifndef TF_PROVE_H
#define TF_PROVE_H

#include <stddef.h>

#include "model.h"

typedef enum TfProofVerdict {
    TF_PROOF_PROVEN,   /* every op and the output proven */
    TF_PROOF_FAILED,   /* some check failed: the weights may disagree with the program */
    TF_PROOF_UNPROVEN  /* something the validator cannot prove (`sum`, a layer norm, ...) */
} TfProofVerdict;

/* The failing scenario: the base variables' values at one position, and the
 * statement's line. n_assign 0 when the failure has no scenario. */
#define TF_PROOF_MAX_BASE 64
#define TF_PROOF_MAX_PROMPTS 8
#define TF_PROOF_MAX_PROMPT 128
typedef struct TfProof {
    TfProofVerdict verdict;
    char **lines; /* the report, one line each: per op its margin, per output its bound */
    int n_lines, cap_lines;
    char reason[512]; /* the first failure or unproven part, located */
    int fail_line;    /* its source line, 0 when none */
    int fail_layer;   /* its layer, -1 when none */
    /* The failing position's base variables: reg index in the program,
       value label ("3", "'a'", "none"); n_assign 0 when not a scenario. */
    int n_assign;
    char assign_reg[TF_PROOF_MAX_BASE][64];
    char assign_val[TF_PROOF_MAX_BASE][64];
    int assign_idx[TF_PROOF_MAX_BASE]; /* the value's index in the base variable's set */
    int assign_base[TF_PROOF_MAX_BASE]; /* which base variable */
    /* Further failing cases of the same check (the first is the one above),
       for the counterexample search: base variables and value indices. */
    int n_cases;
    struct TfProofCase {
        int n, base[TF_PROOF_MAX_BASE], idx[TF_PROOF_MAX_BASE];
    } cases[16];
    double output_bound; /* a numeric output's proven end-to-end bound, else 0 */
    int bound_proven;    /* 1: every op proven and output_bound finite (the file's
                            output_error_bound may still claim less) */
    int bound_short;     /* 1: that claim is the only failure: the weights are
                            proven within output_bound, above what the file claims */
    int threads_run;     /* the most threads that shared one head's queries */
    /* A seed program's failing case as prompts that reach it
       (compiler/prove_seed.c): token indices, and the token the program
       gives after each (-1: no value). */
    int n_prompts;
    int prompt_len[TF_PROOF_MAX_PROMPTS];
    int prompt[TF_PROOF_MAX_PROMPTS][TF_PROOF_MAX_PROMPT];
    int prompt_expect[TF_PROOF_MAX_PROMPTS];
    /* A seed program not proven: other prompts that hold its input facts,
       any scenario, with the token the program gives after each (-1: no
       value), for when none of the above shows the weights wrong: n_any
       of them, any_prompt[k * TF_PROOF_MAX_PROMPT ..] (prove_free frees). */
    int n_any;
    int *any_len, *any_prompt, *any_expect;
} TfProof;

/* Proves m against its own source. Returns 0 with P filled (any verdict),
 * or -1 with err set when it could not run (no source, out of memory). */
int prove_model(const TfModel *m, TfProof *P, TfError *err);
/* The same on `threads` threads (0: one per core online, at most 16): the
 * proof and its report do not depend on the number. */
int prove_model_threads(const TfModel *m, int threads, TfProof *P, TfError *err);
void prove_free(TfProof *P);

/* Reference semantics of the source (compiler/prove_eval.c), for
 * counterexamples: the output token (or number) at every position of a
 * prompt of token indices, and whether some position reaches P's failing
 * scenario. Opaque, built from m's source. */
typedef struct TfProveRef TfProveRef;
TfProveRef *prove_ref_new(const TfModel *m, TfError *err);
void prove_ref_free(TfProveRef *R);
/* Evaluates the program on toks[0..n) (toks[0] the BOS): out[i] the output
 * register's printed token index (-1: none) at each position, num[i] its
 * number for a numeric output (NULL: not wanted). 1 when some position has
 * the values of P's failing scenario, 0 otherwise, -1 on error. */
int prove_ref_run(TfProveRef *R, const int *toks, int n, const TfProof *P, int *out, double *num);
/* How near the last prove_ref_run came to P's failing scenario, in [0, 1]:
 * at its nearest position, the share of the scenario's base variables
 * holding their values, a number that misses counting 1 / (2 (1 + its
 * distance)); 1 when reached (the counterexample search climbs it). */
double prove_ref_near(const TfProveRef *R);

#endif
