/* plans.c: each op's layer and its size, the model's limits (plans.h).
 *
 * The sizes follow the constructions of compiler/lower.c and
 * compiler/lower_general.c (tests/test_lower.c checks that no compiled
 * model is larger than its plan). */
#include "plans.h"

#include <stdio.h>
#include <stdlib.h>

#include "cubes.h"

/* An MLP of h hidden units over d columns: fc1 [h, d] + [h], fc2 [d, h] + [d]. */
static size_t mlp(size_t h, size_t d) { return 2 * h * d + h + d; }

double plans_slope(const TfIr *ir, const TfOpPlan *p) {
    return p->form == TF_PLAN_STAIRCASE && !p->x_down &&
                   ir->regs[p->dest].kind != TF_REG_CATEGORICAL && ir->regs[p->dest].n_feat == 0
               ? p->slope
               : 0;
}

double plans_residual(const TfIr *ir, const TfOpPlan *p, int i) {
    return p->x_num[i] - plans_slope(ir, p) * (p->xs[i] - p->xs[0] + 1);
}

int plans_staircase_steps(const TfIr *ir, const TfOpPlan *p) {
    int dest_cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL, n = 0;
    for (int i = 0; i + 1 < p->n_x; i++)
        n += dest_cat ? p->x_col[i] != p->x_col[i + 1]
                      : plans_residual(ir, p, i) != plans_residual(ir, p, i + 1);
    return n;
}

/* The step pairs of a table: one per cube with a result (compiler/cubes.h). */
static int table_units(const TfIr *ir, const TfOpPlan *p) {
    TfCubes cubes;
    int n = 0;
    if (cubes_of_table(ir, p, &cubes) == 0) {
        n = cubes.n;
        cubes_free(&cubes);
    } else { // out of memory: one unit per combination with a result bounds them
        int dest_cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL;
        for (int c = 0; c < p->n_combo; c++)
            n += dest_cat ? p->combo_col[c] >= 0 : p->combo_num[c] != 0;
    }
    return n > 0 ? n : 1;
}

int plans_split_steps(const TfIr *ir, const TfOpPlan *p, int a, int *base) {
    int dest_cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL, n = 0;
    const int *col = dest_cat ? p->x_col + (size_t)a * (size_t)p->n_x : NULL;
    const double *num = dest_cat ? NULL : p->x_num + (size_t)a * (size_t)p->n_x;
    *base = dest_cat ? col[0] >= 0 : num[0] != 0;
    for (int i = 0; i + 1 < p->n_x; i++) n += dest_cat ? col[i] != col[i + 1] : num[i] != num[i + 1];
    return n;
}

int plans_mlp_units(const TfIr *ir, const TfOpPlan *p) {
    switch (p->form) {
    case TF_PLAN_TABLE: return 2 * table_units(ir, p);
    case TF_PLAN_STAIRCASE: return 1 + (plans_slope(ir, p) != 0) + 2 * plans_staircase_steps(ir, p);
    case TF_PLAN_LINEAR: return 2;
    case TF_PLAN_GATED: return 2 * p->n_combo;
    case TF_PLAN_SPLIT: {
        int n = 0;
        for (int a = 0; a < p->n_combo; a++) {
            int base, steps = plans_split_steps(ir, p, a, &base);
            n += 2 * (base + steps);
        }
        return n > 0 ? n : 1;
    }
    default: return 0;
    }
}

/* Each plan form's layer kind: attention selects, the rest are MLPs; a
 * seed op's is its row's (compiler/ops.c). */
static TfLayerKind layer_kind(const TfIrOp *op) {
    switch (op->plan->form) {
    case TF_PLAN_ATTEND:
    case TF_PLAN_COUNT: return TF_LAYER_ATTENTION;
    case TF_PLAN_SEED: return tf_ops[op->op].layer;
    default: return TF_LAYER_MLP;
    }
}

/* The general ops' sizes, by plan form. */
size_t plans_size_general(const TfIr *ir, const TfOpPlan *p, int opt) {
    size_t d = (size_t)ir->d_model;
    (void)opt;
    switch (p->form) {
    case TF_PLAN_TABLE:
    case TF_PLAN_STAIRCASE:
    case TF_PLAN_LINEAR:
    case TF_PLAN_GATED:
    case TF_PLAN_SPLIT: return mlp((size_t)plans_mlp_units(ir, p), d);
    case TF_PLAN_ATTEND:
    case TF_PLAN_COUNT: {
        size_t D = 2;
        for (int t = 0; t < p->n_terms; t++) D += (size_t)p->terms[t].nq;
        size_t dv = p->form == TF_PLAN_ATTEND && !p->value_numeric
                        ? (size_t)ir->regs[p->dest].size
                        : 1;
        for (int f = 0; p->form == TF_PLAN_ATTEND && f < ir->regs[p->dest].n_feat; f++)
            dv += ir->regs[p->dest].feat[f].from >= 0; // points copied (compiler/angles.c)
        return 2 * D * d + 2 * D + 2 * dv * d; // query, key (+ biases), value, output
    }
    case TF_PLAN_SEED:
    case TF_PLAN_FORM_COUNT: break;
    }
    return 0;
}

/* The seed ops' sizes, one function per op (compiler/ops.c's rows), each
 * following its constructions in compiler/lower.c at -O0 and at -O. */
size_t plans_size_find_and_store(const TfIr *ir, const TfOpPlan *p, int opt) {
    size_t d = (size_t)ir->d_model;
    (void)p;
    return opt ? 6 * d : 3 * d * d;
}

size_t plans_size_get_relative_token(const TfIr *ir, const TfOpPlan *p, int opt) {
    size_t d = (size_t)ir->d_model, V = (size_t)ir->n_vocab;
    (void)p;
    return opt ? 4 * d + 2 * V * d : 3 * d * d;
}

size_t plans_size_multiply(const TfIr *ir, const TfOpPlan *p, int opt) {
    (void)p;
    return mlp(opt ? 24 : 200, (size_t)ir->d_model);
}

size_t plans_size_clear(const TfIr *ir, const TfOpPlan *p, int opt) {
    size_t d = (size_t)ir->d_model, cols = 0;
    for (int i = 0; i < p->n_args; i++) cols += (size_t)ir->regs[p->args[i].reg].size;
    return mlp(opt ? cols : d, d);
}

size_t plans_size_step_position(const TfIr *ir, const TfOpPlan *p, int opt) {
    size_t d = (size_t)ir->d_model;
    return mlp(opt ? 4 * (size_t)p->n_args : d, d);
}

size_t plans_size_diff_pos(const TfIr *ir, const TfOpPlan *p, int opt) {
    (void)p;
    return mlp(opt ? 4 : 2, (size_t)ir->d_model);
}

size_t plans_size_is_zero(const TfIr *ir, const TfOpPlan *p, int opt) {
    (void)p, (void)opt;
    return mlp(2, (size_t)ir->d_model);
}

size_t plans_size_copy_on_match(const TfIr *ir, const TfOpPlan *p, int opt) {
    (void)opt;
    return mlp((size_t)ir->regs[p->args[1].reg].size, (size_t)ir->d_model);
}

static void size_text(size_t n, char *buf, size_t len) {
    snprintf(buf, len, "%zu", n);
}

int plans_make(const TfIr *ir, int opt_level, size_t max_params, TfDiag *diag, TfPlans *out) {
    *out = (TfPlans){0};
    if (ir->n_ops > TF_MAX_LAYERS) {
        const TfIrOp *op = &ir->ops[TF_MAX_LAYERS];
        diag_error(diag, op->stmt->loc,
                   "the program becomes more than %d layers (this op's layer is number %d)",
                   TF_MAX_LAYERS, TF_MAX_LAYERS + 1);
        return -1;
    }
    size_t d = (size_t)ir->d_model, V = (size_t)ir->n_vocab;
    size_t P = (size_t)(ir->maxlen > 0 ? ir->maxlen : ir->period);
    out->n_embed = 2 * V * d + P * d;
    out->n_params = out->n_embed;
    if (out->n_params > max_params) {
        char a[32];
        size_text(out->n_params, a, sizeof a);
        const char *fmt = "the embeddings alone have %s parameters (%zu positions, %zu tokens, "
                          "d_model %zu), more than the limit of %zu";
        if (ir->size_loc.line > 0) diag_error(diag, ir->size_loc, fmt, a, P, V, d, max_params);
        else diag_file_error(diag, fmt, a, P, V, d, max_params);
        diag_hint(diag, "tfc --max-params N raises the limit");
        return -1;
    }
    out->layers = calloc((size_t)(ir->n_ops > 0 ? ir->n_ops : 1), sizeof *out->layers);
    if (!out->layers) return -1;
    out->n_layers = ir->n_ops;
    for (int i = 0; i < ir->n_ops; i++) {
        const TfIrOp *op = &ir->ops[i];
        TfLayerSize *lp = &out->layers[i];
        lp->kind = layer_kind(op);
        lp->n_params = tf_ops[op->op].size(ir, op->plan, opt_level > 0);
        if (lp->n_params > max_params - out->n_params) {
            diag_error(diag, op->stmt->op.loc,
                       "this %s becomes a layer of %zu parameters, which takes the model past "
                       "the limit of %zu parameters (d_model %zu)",
                       tf_ops[op->op].name, lp->n_params, max_params, d);
            diag_hint(diag, "tfc --max-params N raises the limit");
            plans_free(out);
            return -1;
        }
        out->n_params += lp->n_params;
    }
    return 0;
}

void plans_free(TfPlans *p) {
    free(p->layers);
    *p = (TfPlans){0};
}
