/* stage_dump.c: tfc --dump=ir|plans|layers, the program after a stage, in text
 * (compiler/stage_dump.h). */
#include "stage_dump.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "values.h"

#define SHOW_VALUES 12 /* a value set longer than this shows its first 8 and last 2 */
#define SHOW_ROWS 24   /* a table longer than this shows its first 20 rows and last 2 */

const char *const tf_dump_stage_names[] = {"", "ast", "ir", "plans", "layers"};
static_assert(sizeof tf_dump_stage_names / sizeof tf_dump_stage_names[0] == TF_DUMP_STAGE_COUNT,
              "one name per stage");

static const char *const form_names[] = {
    [TF_PLAN_TABLE] = "table",   [TF_PLAN_STAIRCASE] = "staircase", [TF_PLAN_LINEAR] = "linear",
    [TF_PLAN_GATED] = "gated",   [TF_PLAN_SPLIT] = "split",         [TF_PLAN_ATTEND] = "attend",
    [TF_PLAN_COUNT] = "count",   [TF_PLAN_SEED] = "seed",
};
static_assert(sizeof form_names / sizeof form_names[0] == TF_PLAN_FORM_COUNT, "one name per form");

int dump_stage_find(const char *name) {
    for (int i = 1; i < TF_DUMP_STAGE_COUNT; i++)
        if (strcmp(tf_dump_stage_names[i], name) == 0) return i;
    return -1;
}

/* Whether row i of n is shown (the first SHOW_ROWS - 4 and the last 2), and
 * the "..." line in place of the rest. */
static int show_row(FILE *f, int i, int n, const char *indent) {
    if (n <= SHOW_ROWS || i < SHOW_ROWS - 4 || i >= n - 2) return 1;
    if (i == SHOW_ROWS - 4) fprintf(f, "%s... (%d more)\n", indent, n - SHOW_ROWS + 2);
    return 0;
}

/* A register's facts, NULL for a learned model (no value analysis). */
static const TfRegFacts *greg(const TfIr *ir, int r) { return ir->model ? NULL : &ir->regs[r].facts; }

static void print_value(FILE *f, const TfIr *ir, TfVal v) {
    char buf[64];
    val_label(ir, v, buf, sizeof buf);
    fputs(buf, f);
}

/* "{a, b, c}" or "{0, 1, ..., 16} (17 values)" */
static void print_value_set(FILE *f, const TfIr *ir, const TfRegFacts *g) {
    fputc('{', f);
    for (int i = 0; i < g->n_vals; i++) {
        if (g->n_vals > SHOW_VALUES && i >= 8 && i < g->n_vals - 2) {
            if (i == 8) fputs(", ...", f);
            continue;
        }
        if (i) fputs(", ", f);
        print_value(f, ir, g->vals[i]);
    }
    fputc('}', f);
    if (g->n_vals > SHOW_VALUES) fprintf(f, " (%d values)", g->n_vals);
}

/* "written by op 3", "written by ops 6, 14, 22 and 30", "built in", "changed
 * in place by seed ops" or "never written": the ops whose destination r is. */
static void print_writers(FILE *f, const TfIr *ir, int r) {
    int n = 0, last = -1;
    for (int i = 0; i < ir->n_ops; i++) {
        const TfIrOp *op = &ir->ops[i];
        if (op->plan->dest != r) continue;
        if (n == 1) fprintf(f, "written by ops %d", last);
        else if (n > 1) fprintf(f, ", %d", last);
        n++;
        last = i;
    }
    for (int o = 0; n == 0 && o < ir->n_regs; o++) // a point (compiler/angles.h)
        for (int k = 0; k < ir->regs[o].n_feat; k++) {
            if (ir->regs[o].feat[k].reg != r) continue;
            fprintf(f, "a point of %s, written with it\n", ir->regs[o].name);
            return;
        }
    if (n == 1) fprintf(f, "written by op %d\n", last);
    else if (n > 1) fprintf(f, " and %d\n", last);
    else if (!ir->regs[r].loc.line) fputs("built in\n", f);
    else fputs(greg(ir, r)->why_stmt ? "changed in place by seed ops\n" : "never written\n", f);
}

/* One register: "r5 rank  cat  cols 27..43  err 1.1e-05  written by op 1",
 * then its values (or why they are unknown) and what else is known. */
static void dump_reg(FILE *f, const TfIr *ir, int r) {
    const TfIrReg *R = &ir->regs[r];
    fprintf(f, "  r%-3d %-16s %-11s ", r, R->name, tf_reg_kind_names[R->kind]);
    if (R->size == 1) fprintf(f, "col %d", R->offset);
    else if (R->size > 1) fprintf(f, "cols %d..%d", R->offset, R->offset + R->size - 1);
    else fputs("no columns", f);
    const TfRegFacts *g = greg(ir, r);
    if (!g) {
        fputc('\n', f);
        return;
    }
    // A seed op's result has no bound: the analysis does not model seed 001's
    // arithmetic (docs/language.md, "What is proven").
    if (g->bos_dirty) fputs("  no error bound  ", f);
    else fprintf(f, "  err %.3g  ", g->err);
    print_writers(f, ir, r);
    fputs("       values ", f);
    if (g->known) {
        print_value_set(f, ir, g);
    } else {
        fputs("unknown", f);
        if (g->why_stmt) fprintf(f, ": line %d: %s", g->why_stmt->loc.line, g->why);
    }
    if (g->one_value) fputs("; one value at every position", f);
    if (g->bos_value) fputs("; holds its default at the BOS", f);
    if (g->bos_dirty) fputs("; may be non-zero at the BOS", f);
    fputc('\n', f);
}

static const char *reg_name(const TfIr *ir, int r) { return r >= 0 ? ir->regs[r].name : "-"; }

/* A seed op's checked arguments (its plan), as the source wrote them. */
static void print_seed_args(FILE *f, const TfIr *ir, const TfIrOp *op) {
    const TfOpInfo *info = &tf_ops[op->op];
    for (int i = 0; i < op->plan->n_args; i++) {
        const TfSeedArg *a = &op->plan->args[i];
        const TfParam *p = &info->params[i < info->n_params ? i : info->n_params - 1];
        if (i) fputs(", ", f);
        if (a->tok >= 0) {
            char buf[8];
            fprintf(f, "'%s'", ast_token_text(ir->words->text, ir->vocab[a->tok], '\'', buf));
        } else if (p->kind == TF_PARAM_REG_OFFSET) {
            fprintf(f, "%s %c %ld", reg_name(ir, a->reg), a->value < 0 ? '-' : '+', labs(a->value));
        } else if (p->kind == TF_PARAM_REG_STEP) {
            fprintf(f, "%s: %ld", reg_name(ir, a->reg), a->value);
        } else {
            fputs(reg_name(ir, a->reg), f);
        }
    }
}

/* "op2 line 17 sorted: Aggregate(k.place == q.indices, tokens) -> sorted" */
static void print_op_head(FILE *f, const TfIr *ir, int i) {
    const TfIrOp *op = &ir->ops[i];
    const TfStmt *s = op->stmt;
    fprintf(f, "  op%-3d line %-4d ", i, s->loc.line);
    if (s->label.text) fprintf(f, "%s: ", s->label.text);
    fprintf(f, "%s(", tf_ops[op->op].name);
    if (op->plan->form != TF_PLAN_SEED) {
        for (int a = 0; a < s->n_args; a++) {
            if (a) fputs(", ", f);
            ast_print_arg(f, ir->words->text, &s->args[a]);
        }
    } else {
        print_seed_args(f, ir, op);
    }
    fputc(')', f);
    if (s->dest.text) fprintf(f, " -> %s", s->dest.text);
    fputc('\n', f);
}

/* What an op's plan reads and writes: "table(rank) -> place". */
static void print_plan_signature(FILE *f, const TfIr *ir, const TfOpPlan *p) {
    fprintf(f, "%s(", form_names[p->form]);
    if (p->form == TF_PLAN_ATTEND || p->form == TF_PLAN_COUNT) {
        for (int t = 0; t < p->n_terms; t++)
            fprintf(f, "%sq.%s k.%s", t ? "; " : "", reg_name(ir, p->terms[t].qreg),
                    reg_name(ir, p->terms[t].kreg));
        if (p->vreg >= 0) fprintf(f, "; value %s", reg_name(ir, p->vreg));
    } else {
        for (int i = 0; i < p->n_in; i++) fprintf(f, "%s%s", i ? ", " : "", reg_name(ir, p->in[i]));
    }
    fprintf(f, ") -> %s", reg_name(ir, p->dest));
}

void dump_ir(FILE *f, const TfIr *ir) {
    if (ir->model) {
        fprintf(f, "ir: a learned model (`model { ... }`, line %d): no registers or ops are "
                   "compiled; --dump=layers shows its layers\n",
                ir->model->loc.line);
        return;
    }
    fprintf(f, "ir: %d registers, d_model %d, %d ops\n", ir->n_regs, ir->d_model, ir->n_ops);
    fputs("registers (kind, columns, error bound, writers; the values the analysis found):\n", f);
    for (int r = 0; r < ir->n_regs; r++) dump_reg(f, ir, r);
    fputs("ops (source; the form and registers of its plan):\n", f);
    for (int i = 0; i < ir->n_ops; i++) {
        const TfIrOp *op = &ir->ops[i];
        print_op_head(f, ir, i);
        fputs("         ", f);
        if (op->plan->form != TF_PLAN_SEED) {
            fprintf(f, "%s: ", op->plan->name);
            print_plan_signature(f, ir, op->plan);
            if (op->plan->check) fputs(", checked at run time", f);
        } else {
            fprintf(f, "seed op (%s)", tf_layer_kind_names[tf_ops[op->op].layer]);
        }
        fputc('\n', f);
    }
    if (ir->output_reg >= 0) {
        fprintf(f, "output %s%s", reg_name(ir, ir->output_reg),
                ir->every_position ? " at every position" : "");
        if (ir->regs[ir->output_reg].kind == TF_REG_SCALAR)
            fprintf(f, ", error bound %.3g", ir->output_error_bound);
        fputc('\n', f);
    }
}

/* A categorical destination's column label, or the number it gets. */
static void print_result(FILE *f, const TfIr *ir, int dest, const int *cols, const double *nums,
                         int i) {
    const TfRegFacts *g = greg(ir, dest);
    if (!cols) fprintf(f, "%.6g", nums[i]);
    else if (cols[i] < 0) fputs("(no value)", f);
    else if (g && g->labels && cols[i] < g->n_vals) fputs(g->labels[cols[i]], f);
    else fprintf(f, "column %d", cols[i]);
}

/* "a=1 b='x'": combination c of the inputs in[first..n) (first fastest). */
static void print_combo(FILE *f, const TfIr *ir, const TfOpPlan *p, int first, long c) {
    for (int i = first; i < p->n_in; i++) {
        const TfRegFacts *g = greg(ir, p->in[i]);
        int n = g->n_vals > 0 ? g->n_vals : 1;
        fprintf(f, "%s%s=", i > first ? " " : "", reg_name(ir, p->in[i]));
        if (g->n_vals > 0) print_value(f, ir, g->vals[c % n]);
        c /= n;
    }
}

static void dump_table(FILE *f, const TfIr *ir, const TfOpPlan *p) {
    fprintf(f, "      %d combinations:\n", p->n_combo);
    for (int c = 0; c < p->n_combo; c++) {
        if (!show_row(f, c, p->n_combo, "        ")) continue;
        fputs("        ", f);
        print_combo(f, ir, p, 0, c);
        fputs(" -> ", f);
        print_result(f, ir, p->dest, p->combo_col, p->combo_num, c);
        fputc('\n', f);
    }
    for (int k = 0; k < ir->regs[p->dest].n_feat; k++) // compiler/angles.h
        fprintf(f, "      and the points %s\n", reg_name(ir, ir->regs[p->dest].feat[k].reg));
}

static void print_linear(FILE *f, const TfIr *ir, const TfOpPlan *p) {
    fprintf(f, "%.6g", p->c0);
    for (int i = 0; i < p->n_in; i++)
        if (p->in_coef[i]) fprintf(f, " + h(%s)", reg_name(ir, p->in[i])); // per value
        else if (p->coef[i] != 0) fprintf(f, " %+.6g %s", p->coef[i], reg_name(ir, p->in[i]));
}

/* The staircase's values and results, from xs[0] (first of n) on. */
static void dump_steps(FILE *f, const TfIr *ir, const TfOpPlan *p, int first, int n) {
    for (int i = 0; i < n; i++) {
        if (!show_row(f, i, n, "        ")) continue;
        fprintf(f, "        x=%.6g -> ", p->xs[i]);
        print_result(f, ir, p->dest, p->x_col, p->x_num, first + i);
        fputc('\n', f);
    }
}

static void dump_staircase(FILE *f, const TfIr *ir, const TfOpPlan *p) {
    fputs("      x = ", f);
    if (p->x_linear) print_linear(f, ir, p);
    else fputs(reg_name(ir, p->in[0]), f);
    fprintf(f, ", %d values, %d steps%s", p->n_x, plans_staircase_steps(ir, p),
            p->x_down && !p->x_linear ? " (from the top)" : "");
    if (plans_slope(ir, p) != 0) // the steps make what the slope leaves
        fprintf(f, " and a slope of %.6g", plans_slope(ir, p));
    fputs(":\n", f);
    dump_steps(f, ir, p, 0, p->n_x);
    for (int k = 0; k < ir->regs[p->dest].n_feat; k++) // compiler/angles.h
        fprintf(f, "      and the points %s\n", reg_name(ir, ir->regs[p->dest].feat[k].reg));
}

static void dump_split(FILE *f, const TfIr *ir, const TfOpPlan *p) {
    for (int a = 0; a < p->n_combo; a++) {
        int base;
        fputs("      ", f);
        print_combo(f, ir, p, 1, a);
        fprintf(f, ": a staircase over %s, %d steps\n", reg_name(ir, p->in[0]),
                plans_split_steps(ir, p, a, &base));
        dump_steps(f, ir, p, a * p->n_x, p->n_x);
    }
}

static void dump_gated(FILE *f, const TfIr *ir, const TfOpPlan *p) {
    fprintf(f, "      gate %.6g; per combination, a + b %s:\n", p->c0, reg_name(ir, p->in[0]));
    for (int c = 0; c < p->n_combo; c++) {
        if (!show_row(f, c, p->n_combo, "        ")) continue;
        fputs("        ", f);
        print_combo(f, ir, p, 1, c);
        fprintf(f, " -> %.6g %+.6g %s\n", p->combo_num[c], p->combo_slope[c], reg_name(ir, p->in[0]));
    }
}

/* A selection: per term, the query and key values and how many pairs it
 * selects; the temperature, the mask, the value and the default. */
static void dump_attend(FILE *f, const TfIr *ir, const TfOpPlan *p) {
    for (int t = 0; t < p->n_terms; t++) {
        const struct TfPlanTerm *T = &p->terms[t];
        long n = 0;
        for (long i = 0; i < (long)T->nq * T->nk; i++) n += T->P[i];
        if (T->qreg < 0 && T->kreg < 0) {
            fprintf(f, "      term %d: reads no register: %s every key\n", t, n ? "selects" : "selects no");
            continue;
        }
        fprintf(f, "      term %d: q.%s (%d values) x k.%s (%d values): %ld of %ld pairs selected\n",
                t, reg_name(ir, T->qreg), T->nq, reg_name(ir, T->kreg), T->nk, n,
                (long)T->nq * T->nk);
        if (T->angle) // compiler/angles.h
            fprintf(f, "        on angles: q.%s q.%s x k.%s k.%s, score %.6g (q.k - %.6g)\n",
                    reg_name(ir, T->qa[0]), reg_name(ir, T->qa[1]), reg_name(ir, T->ka[0]),
                    reg_name(ir, T->ka[1]), T->a_scale, T->a_cos);
    }
    fprintf(f, "      scale %.6g, %s", p->beta, p->causal ? "causal" : "bidirectional");
    if (p->form == TF_PLAN_ATTEND) {
        fprintf(f, ", %s of %s", p->value_numeric ? (p->sum ? "mean (then sum)" : "mean") : "copy",
                reg_name(ir, p->vreg));
        if (p->value_numeric) fprintf(f, ", default %.6g", p->default_num);
        else if (p->default_col >= 0) {
            fputs(", default ", f);
            print_result(f, ir, p->dest, &p->default_col, NULL, 0);
        }
    }
    fputc('\n', f);
    const TfIrReg *R = &ir->regs[p->dest];
    for (int k = 0; p->form == TF_PLAN_ATTEND && k < R->n_feat; k++) // compiler/angles.c's chains
        if (R->feat[k].from >= 0)
            fprintf(f, "      and the points %s, copied from %s\n", reg_name(ir, R->feat[k].reg),
                    reg_name(ir, R->feat[k].from));
}

void dump_plans(FILE *f, const TfIr *ir, const TfPlans *plans) {
    fprintf(f, "plans: %d layers, %zu parameters (%zu in the embeddings and unembedding)\n",
            plans->n_layers, plans->n_params, plans->n_embed);
    for (int i = 0; i < ir->n_ops; i++) {
        const TfIrOp *op = &ir->ops[i];
        const TfLayerSize *lp = &plans->layers[i];
        print_op_head(f, ir, i);
        fprintf(f, "      layer %d: %s, at most %zu parameters", i, tf_layer_kind_names[lp->kind],
                lp->n_params);
        const TfOpPlan *p = op->plan;
        if (p->form == TF_PLAN_SEED) {
            fputs("; seed 001's construction\n", f);
            continue;
        }
        if (lp->kind == TF_LAYER_MLP) fprintf(f, ", %d hidden units", plans_mlp_units(ir, p));
        fprintf(f, "\n      %s: ", p->name);
        print_plan_signature(f, ir, p);
        fputs(p->check ? ", checked at run time\n" : "\n", f);
        switch (p->form) {
        case TF_PLAN_TABLE: dump_table(f, ir, p); break;
        case TF_PLAN_STAIRCASE: dump_staircase(f, ir, p); break;
        case TF_PLAN_SPLIT: dump_split(f, ir, p); break;
        case TF_PLAN_GATED: dump_gated(f, ir, p); break;
        case TF_PLAN_LINEAR:
            fprintf(f, "      %s = ", reg_name(ir, p->dest));
            print_linear(f, ir, p);
            fputc('\n', f);
            break;
        case TF_PLAN_ATTEND:
        case TF_PLAN_COUNT: dump_attend(f, ir, p); break;
        case TF_PLAN_SEED:
        case TF_PLAN_FORM_COUNT: break;
        }
    }
}

void dump_layers(FILE *f, const TfModel *m) {
    fprintf(f, "layers: %d, d_model %d, %d tensors, %zu parameters\n", m->n_layers, m->d_model,
            m->n_tensors, model_param_count(m));
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        fprintf(f, "  layer %d: %s", l, tf_layer_kind_names[ly->kind]);
        if (ly->kind == TF_LAYER_ATTENTION)
            fprintf(f, ", %d head%s of %d, %s", ly->n_heads, ly->n_heads == 1 ? "" : "s",
                    ly->d_head, ly->causal ? "causal" : "bidirectional");
        else if (ly->kind == TF_LAYER_MLP)
            fprintf(f, ", %d hidden units, %s", ly->d_hidden, tf_activation_names[ly->act]);
        if (ly->n_parts == 0) {
            fprintf(f, ": %s", ly->name);
            if (ly->line > 0) fprintf(f, " (line %d)", ly->line);
        }
        fputc('\n', f);
        for (int i = 0; i < ly->n_parts; i++) {
            const TfLayerPart *pt = &ly->parts[i];
            fprintf(f, "    %s %d..%d: %s", ly->kind == TF_LAYER_ATTENTION ? "heads" : "units",
                    pt->first, pt->first + pt->count - 1, pt->name);
            if (pt->line > 0) fprintf(f, " (line %d)", pt->line);
            fputc('\n', f);
        }
    }
    for (int i = 0; i < m->n_checks; i++)
        fprintf(f, "  check after layer %d: %s (line %d)\n", m->checks[i].layer, m->checks[i].op,
                m->checks[i].line);
}
