/* ops.h: the op set of the language and the signature of each op.
 *
 * One table row per op: its source name, the kind of layer it becomes, the
 * arguments it takes and which registers it reads and writes.
 * compiler/checker.c checks calls against the table; compiler/values.c
 * follows what each op writes; compiler/lower.c turns each seed op into
 * weights, compiler/lower_general.c each general op's plan. Adding a seed op
 * means one enum entry and one table row naming its functions: its lowering
 * (one per opt level, in compiler/lower.c) and its size (compiler/plans.c);
 * what it does to the values it writes is compiler/values.c's seed_op.
 * The checker gives a seed op its plan (TF_PLAN_SEED: the checked arguments).
 */
#ifndef TF_OPS_H
#define TF_OPS_H

#include <stddef.h>

#include "model.h"

typedef enum TfOpKind {
    TF_OP_FIND_AND_STORE,
    TF_OP_GET_RELATIVE_TOKEN,
    TF_OP_MULTIPLY,
    TF_OP_CLEAR,
    TF_OP_STEP_POSITION,
    TF_OP_DIFF_POS,
    TF_OP_IS_ZERO,
    TF_OP_COPY_ON_MATCH,
    /* the general ops (compiler/map.c, compiler/select.c analyse them, compiler/lower_general.c lowers them) */
    TF_OP_MAP,
    TF_OP_AGGREGATE,
    TF_OP_COUNT_MATCHES,
    TF_OP_COUNT
} TfOpKind;

/* What one argument position accepts. */
typedef enum TfParamKind {
    TF_PARAM_TOKEN_LITERAL, /* 'c', a token of the vocabulary */
    TF_PARAM_REG,           /* a register name */
    TF_PARAM_REG_OFFSET,    /* reg or reg + n or reg - n */
    TF_PARAM_REG_STEP,      /* reg: n */
    TF_PARAM_EXPR,          /* an expression (general ops: compiler/map.c, compiler/select.c) */
} TfParamKind;

/* Register kinds as a bit set, for parameters that accept several. */
#define TF_KINDS_TOKEN (1u << TF_REG_TOKEN)
#define TF_KINDS_POSITION (1u << TF_REG_POSITION)
#define TF_KINDS_SCALAR (1u << TF_REG_SCALAR)
#define TF_KINDS_CATEGORICAL (1u << TF_REG_CATEGORICAL)
#define TF_KINDS_ANY (TF_KINDS_TOKEN | TF_KINDS_POSITION | TF_KINDS_SCALAR | TF_KINDS_CATEGORICAL)

#define TF_OP_MAX_PARAMS 4

/* What an op does with a register argument (compiler/values.c follows it). */
#define TF_ACCESS_READ 1u
#define TF_ACCESS_WRITE 2u /* changes it in place */

typedef struct TfParam {
    TfParamKind kind;
    unsigned reg_kinds; /* for register parameters */
    const char *role;   /* for messages: "the position to read at" */
    unsigned access;    /* TF_ACCESS_*: read, written, or both */
} TfParam;

/* How an op becomes weights: appends its layer to the model being built
 * (compiler/lower_internal.h; li is the op's index in the TfIr). */
struct Lowerer;
struct TfIrOp;
typedef void (*TfLowerFn)(struct Lowerer *L, int li, const struct TfIrOp *op);
/* How many parameters an op's layer has at opt (1: -O, 0: -O0), from its
 * plan (compiler/plans.c). */
struct TfIr;
struct TfOpPlan;
typedef size_t (*TfSizeFn)(const struct TfIr *ir, const struct TfOpPlan *p, int opt);

typedef struct TfOpInfo {
    const char *name;       /* as written in source: "FindAndStore" */
    const char *layer_name; /* default layer name: "find_and_store" */
    TfLayerKind layer;
    int n_params;
    TfParam params[TF_OP_MAX_PARAMS];
    int variadic;           /* the last parameter repeats (one or more) */
    unsigned dest_kinds;    /* 0: no `-> dest`; else the kinds it accepts (written: the
                               op adds into it) */
    const char *synopsis;   /* "FindAndStore('c') -> position" */
    int general;            /* arguments checked by the value analysis (compiler/map.c,
                               compiler/select.c), lowered from its plan */
    TfLowerFn lower[2];     /* a seed op's constructions (compiler/lower.c), [0] at -O0,
                               [1] at -O; NULL for a general op, which its plan's form
                               lowers (compiler/lower_general.c) */
    TfSizeFn size;          /* its layer's parameters (compiler/plans.c) */
} TfOpInfo;

extern const TfOpInfo tf_ops[];

/* The op of that source name, or -1. */
int ops_find(const char *name);


#endif
