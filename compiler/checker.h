/* checker.h: semantic checks, from syntax tree to a checked program (TfIr).
 *
 * The checker resolves names, classifies each op argument (the parser keeps
 * them as expressions), checks every seed op call against its signature
 * (compiler/ops.h) and gives it its plan, unrolls `repeat` blocks and
 * reports every problem it finds to the TfDiag, continuing where it can.
 *
 * Registers, in order: the built-in token register `tokens` (the input
 * one-hot), the built-in position register `pos`, `indices` (with maxlen),
 * then the declared registers in declaration order. Their columns are laid
 * out once, after the value analysis (compiler/values.c): until then every
 * register's offset and size, and d_model, are 0.
 *
 * Memory: a TfIr owns everything reachable from it: its growable arrays
 * (regs, ops, reg_hash) and, in its arena (compiler/arena.h),
 * everything else every stage adds (op arguments, plans, value sets, labels,
 * hidden registers' names). check_free releases it all. It borrows the
 * TfProgram (names, source locations), which must outlive it.
 */
#ifndef TF_CHECKER_H
#define TF_CHECKER_H

#include "arena.h"
#include "ast.h"
#include "diag.h"
#include "model.h"
#include "ops.h"

#define TF_DEFAULT_PERIOD 100
#define TF_MAX_PERIOD 65536
#define TF_MAX_REPEAT 10000
#define TF_MAX_LAYERS 100000
#define TF_DEFAULT_GENERATE 1

/* A value: an integer, a token (its code: a character, or TF_TOKEN_WORD + i
 * for the word TfIr.words[i], grammar/ast.h) or a real number
 * (compiler/expr.h evaluates expressions over them). */
typedef enum TfValKind {
    TF_VAL_INT,
    TF_VAL_TOKEN, /* a string (Python's str): its code, a byte or a word */
    TF_VAL_REAL,
    TF_VAL_LIST   /* a list of one-character strings (Python's sorted(x), list(x)) inside an
                     expression: x is the code of the string they join into. No register
                     holds one (Python's lists are not hashable, so no Tracr value set can). */
} TfValKind;

typedef struct TfVal {
    TfValKind kind;
    double x;
} TfVal;

/* What the value analysis (compiler/values.c) proves of a register: its
 * values, its error bound and who wrote it. Zero until the analysis runs. */
typedef struct TfRegFacts {
    int known;     /* the value set is known */
    TfVal *vals;   /* categorical: one per column, in column order; numeric: sorted */
    int n_vals;
    char **labels; /* categorical registers written by general ops: column labels */
    double err;    /* bound on |column - exact value| at every position */
    int writer;    /* index of the op that wrote it, -1 */
    int poisoned;  /* its op failed: later reads fail quietly (no follow-on errors) */
    const TfStmt *why_stmt; /* the op that made the values unknown, or NULL */
    const char *why;        /* and how: "leaves it holding no value" */
    int bos_dirty;          /* may be non-zero at the BOS position (a seed op wrote it) */
    const TfStmt *bos_stmt; /* that seed op */
    int bos_value;          /* holds a value at the BOS (an Aggregate's default): no attention
                               reads it at the keys */
    double bos_num;         /* a numeric register's value at the BOS position: 0 but for a
                               mean with a default (the default) and a linear Map of one */
    int one_value;          /* holds exactly one of its values at every position after the
                               BOS (or the run stops at its run-time check): `tokens`,
                               `indices`, and what a general op writes from inputs that do,
                               with a result for every combination (or a default); a seed
                               op that writes it later clears it (compiler/cubes.h) */
} TfRegFacts;

/* A number per value of a categorical register that its writer (a table's
 * or a staircase's units, or the embedding) writes into a hidden scalar
 * register besides the one-hot: val[c] where it holds its column c's value
 * (compiler/angles.h: the points a selection compares its values by). A
 * register an Aggregate copies can have them copied with it: `from` is the
 * value register's point the head reads (-1: the writer's own, which is 0
 * at the BOS), and at_bos the BOS's weight in that value row: the
 * default's point less what `from` holds at the BOS. */
#define TF_REG_MAX_FEATS 8
typedef struct TfRegFeat {
    int reg;
    double *val;
    int from;
    double at_bos;
} TfRegFeat;

typedef struct TfIrReg {
    const char *name; /* borrowed from the tree, or a literal for built-ins */
    TfRegKind kind;
    int offset, size;
    TfLoc loc;        /* declaration; line 0 for built-ins */
    TfRegFacts facts; /* the value analysis's (zero before it) */
    int as_number;    /* declared `cat`, held as a number (compiler/numbers.h) */
    int n_feat;       /* compiler/angles.c's */
    TfRegFeat feat[TF_REG_MAX_FEATS];
} TfIrReg;

/* One checked argument of a seed op: a register (reg >= 0) with an
 * optional integer (offset or step), or a token (tok >= 0). A seed op's
 * plan (TfOpPlan, form TF_PLAN_SEED) holds them. */
typedef struct TfSeedArg {
    int reg;
    long value;
    int tok;
} TfSeedArg;

/* One op application, after unrolling: the op, the statement it came from,
 * its destination and its plan. The checker gives a seed op its plan (its
 * checked arguments, shared by the copies `repeat` makes); compiler/values.c
 * plans each general op, and may add ops (joint selection sides, Count's
 * steps), each of the kind of the op it serves and with its own plan;
 * compiler/plans.c says what layer each becomes. */
typedef struct TfOpPlan TfOpPlan; /* compiler/values.h */

typedef struct TfIrOp {
    TfOpKind op;
    const TfStmt *stmt; /* label, location, the arguments as written */
    int dest;           /* register index, or -1 */
    TfOpPlan *plan;     /* a general op's is NULL until compiler/values.c plans it */
} TfIrOp;

/* The words that token codes name: TF_TOKEN_WORD + i is text[i]. The
 * program's words first (borrowed from the TfProgram, the same codes), then
 * the strings that expressions make at compile time (`x[::-1]`, `x + "s"`:
 * compiler/expr.c), each once (check_word). A code never changes; the
 * table only grows, also through a const TfIr (interning does not change
 * what any code means). */
typedef struct TfWords {
    const char **text;
    int n, cap;
    int n_borrowed; /* text[0..n_borrowed) are the program's */
    int *hash;      /* open addressing: index + 1, 0 empty */
    int hash_cap;
} TfWords;

typedef struct TfIr {
    int vocab[256];            /* token i's code (grammar/ast.h, TF_TOKEN_WORD) */
    int n_vocab;
    int n_input;               /* vocab[0..n_input) are the tokens a prompt can hold (and
                                  `tokens` one-hot); the rest are output-only tokens, which
                                  only the output prints: `vocab [...] output [...]` and the
                                  numbers compiler/values.c adds (docs/language.md) */
    int list_vocab;            /* declared as a list, `vocab [...]` */
    int named;                 /* some token is a word: prompts are words (check_token_name) */
    TfWords *words;            /* the words of token codes (above) */
    int period;
    TfIrReg *regs;
    int n_regs;
    int d_model;
    TfIrOp *ops;
    int n_ops;
    int output_reg;
    TfLoc output_loc;          /* the output statement's register name */
    double output_error_bound; /* a numeric output's proven bound (compiler/values.c) */
    int generate;
    const TfStmt *model; /* a learned model's `model { ... }` block, or NULL */

    /* General programs (docs/language.md, "General ops"). */
    int maxlen;         /* declared `maxlen`, 0 when not declared */
    TfLoc size_loc;     /* the `maxlen` (or `period`) value, line 0 when neither */
    int bos;            /* token index of `bos`, -1 when none */
    int stop_token;     /* token index of `generate until`, -1 when none */
    int every_position; /* `output R at every position` */
    int output_as_number; /* a `cat` output held as a number, which the
                             unembedding decodes (compiler/numbers.h) */
    int indices_reg;    /* the built-in `indices`, -1 without maxlen */
    TfArena arena;      /* owns every piece reachable from here but the arrays */

    int regs_cap;       /* room in regs */
    int *reg_hash;      /* open addressing over regs by name (check_find_reg) */
    int reg_hash_cap;
} TfIr;

/* Index of the built-in registers in TfIr.regs. */
enum { TF_IR_REG_TOKENS = 0, TF_IR_REG_POS = 1, TF_IR_REG_INDICES = 2 /* with maxlen */ };

/* The shape of an op argument as written (the parser keeps every argument
 * as an expression): what a seed op's parameters accept, or an expression
 * (the general ops' arguments, compiler/map.c and compiler/select.c). */
typedef enum TfArgKind {
    TF_ARG_NAME,   /* left_pos */
    TF_ARG_CHAR,   /* '+'  '\n' */
    TF_ARG_INT,    /* 3  -1  +2 */
    TF_ARG_OFFSET, /* left_pos + 1, left_pos - 2: name, value (signed) */
    TF_ARG_STEP,   /* out_pos: -1 (an integer literal after the name): name, value */
    TF_ARG_EXPR,   /* any other expression: (a + b) % 10, k.x == q.y */
    TF_ARG_NAMED,  /* any other `name: expression`: default: 0.5, scale: 8.5 */
    TF_ARG_KIND_COUNT
} TfArgKind;

typedef struct TfArgShape {
    TfArgKind kind;
    const TfName *name; /* NAME, OFFSET, STEP, NAMED: in the tree */
    int ch;             /* CHAR: the byte value 0..255 */
    long value;         /* INT, OFFSET, STEP */
    TfLoc value_loc;    /* INT, STEP: the literal; OFFSET: the sign and the number */
} TfArgShape;

/* What shape an argument has (see TfArgKind). */
TfArgShape check_arg_shape(const TfArg *a);

/* Checks a parsed program: names, kinds, signatures, unrolling. Returns the
 * checked program, or NULL when any error was reported (diag->n_errors > 0)
 * or memory ran out (nothing reported). The values are compiler/values.c's stage. */
TfIr *check_program(const TfProgram *prog, TfDiag *diag);

/* The register of that name, or -1 (a hash lookup). */
int check_find_reg(const TfIr *ir, const char *name);
/* Appends a register (name borrowed, must outlive ir); its index, or -1
 * when memory ran out. */
int check_add_reg(TfIr *ir, const char *name, TfRegKind kind, TfLoc loc);
/* After an "unknown register" error: "did you mean 'x'?" when one is close. */
void check_hint_reg(TfDiag *diag, const TfIr *ir, const char *name);

/* "token 'x' is not in the vocabulary" at loc, and in a vocabulary of words
 * "did you mean" the closest token; a warning (warning 1: a comparison
 * that Python allows, always false) or an error. */
void check_unknown_token(TfDiag *diag, const TfIr *ir, TfLoc loc, int code, int warning);
/* The code of the string bytes[0..len): its byte for one byte, else a word
 * of ir->words (interned; the empty string is a word too). -1 when memory
 * ran out. A string of several bytes holds no NUL (the caller checks). */
int check_word(const TfIr *ir, const char *bytes, int len);
/* A code's text and length: a byte (into buf, 2 bytes) or a word. */
const char *check_code_text(const TfIr *ir, int code, char *buf, int *len);

/* Token i's name, NUL-terminated: its character, or its word (buf: 2 bytes). */
const char *check_token_name(const TfIr *ir, int i, char *buf);

void check_free(TfIr *ir);

#endif
