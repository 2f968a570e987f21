/* plans.h: layer plans, what each op of the analysed program becomes.
 *
 * After compiler/values.c, every op of the TfIr becomes one layer: a seed
 * op the construction of its opt level (compiler/lower.c), a general op
 * (or one of the ops it was split into) the form its plan says
 * (compiler/lower_general.c). plans_make works out each layer's kind and
 * size from the program alone, before any weight is allocated, and refuses
 * (located, with the option that raises the limit) a model of more than
 * max_params parameters or more than TF_MAX_LAYERS layers.
 *
 * Memory: a TfPlans owns its array (plans_free).
 */
#ifndef TF_PLANS_H
#define TF_PLANS_H

#include <stddef.h>

#include "checker.h"
#include "diag.h"
#include "values.h"

#define TF_DEFAULT_MAX_PARAMS ((size_t)1 << 26)

typedef struct TfLayerSize {
    TfLayerKind kind;
    size_t n_params; /* at most this many (shared tensors are counted again) */
} TfLayerSize;

typedef struct TfPlans {
    TfLayerSize *layers; /* one per op of the TfIr, in order */
    int n_layers;
    size_t n_embed;      /* the embeddings and the unembedding */
    size_t n_params;     /* the whole model */
} TfPlans;

/* 0, or -1 after reporting to diag (too large), or -1 with nothing
 * reported when memory ran out. */
int plans_make(const TfIr *ir, int opt_level, size_t max_params, TfDiag *diag, TfPlans *out);
void plans_free(TfPlans *p);

/* A numeric staircase's slope as lowered (TfOpPlan.slope; 0: none), and
 * its residual at xs[i]: the result less slope (xs[i] - xs[0] + 1), what
 * its steps make. */
double plans_slope(const TfIr *ir, const TfOpPlan *p);
double plans_residual(const TfIr *ir, const TfOpPlan *p, int i);
/* The steps of a staircase: neighbouring values whose results (residuals)
 * differ. */
int plans_staircase_steps(const TfIr *ir, const TfOpPlan *p);
/* The steps of a SPLIT plan's staircase for in[1]'s value a, and whether it
 * has a result at its lowest x (its base pair). */
int plans_split_steps(const TfIr *ir, const TfOpPlan *p, int a, int *base);
/* The op table's size functions (compiler/ops.c): the parameters of op's
 * layer at -O (opt 1) or -O0, from its plan alone. */
size_t plans_size_general(const TfIr *ir, const TfOpPlan *p, int opt);
size_t plans_size_find_and_store(const TfIr *ir, const TfOpPlan *p, int opt);
size_t plans_size_get_relative_token(const TfIr *ir, const TfOpPlan *p, int opt);
size_t plans_size_multiply(const TfIr *ir, const TfOpPlan *p, int opt);
size_t plans_size_clear(const TfIr *ir, const TfOpPlan *p, int opt);
size_t plans_size_step_position(const TfIr *ir, const TfOpPlan *p, int opt);
size_t plans_size_diff_pos(const TfIr *ir, const TfOpPlan *p, int opt);
size_t plans_size_is_zero(const TfIr *ir, const TfOpPlan *p, int opt);
size_t plans_size_copy_on_match(const TfIr *ir, const TfOpPlan *p, int opt);

/* The hidden units of an MLP plan (table, staircase, linear, gated, split). */
int plans_mlp_units(const TfIr *ir, const TfOpPlan *p);

#endif
