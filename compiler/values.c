/* values.c: the value analysis, one walk over every op (values.h).
 *
 * Error bounds. Every register carries `err`, a bound on how far any of its
 * columns can be from the exact value (0 or 1 for a categorical register,
 * the number for a numeric one). compiler/map.c and compiler/select.c say
 * how each general op's bound follows from its inputs'; the seed ops' are
 * below. The compiler adds these up along the program and refuses, with the
 * margin, where a step or the output could come out wrong.
 */
#include "values.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numbers.h"
#include "values_internal.h"

/* ---- storage ------------------------------------------------------------- */

void *va_alloc(Va *G, size_t n) {
    void *p = arena_alloc(&G->ir->arena, n);
    if (!p) G->failed = 1;
    return p;
}

char *va_strdup(Va *G, const char *s) {
    char *p = arena_strdup(&G->ir->arena, s);
    if (!p) G->failed = 1;
    return p;
}


/* ---- registers and their values --------------------------------------------- */

static int find_tok(const TfIr *ir, int c) {
    for (int i = 0; i < ir->n_vocab; i++)
        if (ir->vocab[i] == c) return i;
    return -1;
}

int values_token_of(const TfIr *ir, TfVal v) {
    if (v.kind == TF_VAL_TOKEN) return find_tok(ir, (int)v.x);
    // A number: the token whose name is its label (7, 10, -1, 0.5).
    char lab[64];
    val_label(ir, v, lab, sizeof lab);
    for (int t = 0; t < ir->n_vocab; t++) {
        char one[2];
        if (strcmp(check_token_name(ir, t, one), lab) == 0) return t;
    }
    return -1;
}

int va_is_categorical(const TfIr *ir, int r) {
    return ir->regs[r].kind == TF_REG_CATEGORICAL || ir->regs[r].kind == TF_REG_TOKEN;
}

int values_column(const TfIr *ir, int r, TfVal v) {
    const TfIrReg *R = &ir->regs[r];
    if (R->kind == TF_REG_TOKEN) {
        int t = v.kind == TF_VAL_TOKEN ? find_tok(ir, (int)v.x) : -1;
        return t < ir->n_input ? t : -1; // an output-only token has no column
    }
    if (R->kind != TF_REG_CATEGORICAL) return -1;
    const TfRegFacts *g = &ir->regs[r].facts;
    int lo = 0, hi = g->n_vals - 1;
    while (lo <= hi) { // values are sorted
        int mid = (lo + hi) / 2, c = val_cmp(g->vals[mid], v);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

TfRegFacts *va_facts(Va *G, int r) { return &G->ir->regs[r].facts; }

int va_combo_at_bos(const TfIr *ir, const int *in, int n_in, long c) {
    int r = ir->indices_reg;
    if (ir->bos < 0 || r < 0) return 0;
    for (int i = 0; i < n_in; i++) {
        const TfRegFacts *g = &ir->regs[in[i]].facts;
        int n = g->n_vals > 0 ? g->n_vals : 1;
        if (in[i] == r) return g->n_vals > 0 && g->vals[c % n].x == 0;
        c /= n;
    }
    return 0;
}

const char *va_reg_name(Va *G, int r) { return G->ir->regs[r].name; }

/* TfRegFacts.one_value of what op writes. A table has a result wherever its
 * inputs each hold one value and their combination, one that occurs after
 * the BOS (va_combo_at_bos), has one; a staircase
 * (Count's steps too) wherever its value has one; a copy wherever the BOS's
 * default or the copied register's one value is what it reads (or its
 * run-time check stops the run). A seed op's registers may hold anything. */
static void note_one_value(Va *G, const TfIrOp *op) {
    const TfOpPlan *p = op->plan;
    if (p->form == TF_PLAN_SEED) {
        const TfOpInfo *info = &tf_ops[op->op];
        for (int i = 0; i < p->n_args && info->n_params > 0; i++) {
            const TfParam *pa = &info->params[i < info->n_params ? i : info->n_params - 1];
            if ((pa->access & TF_ACCESS_WRITE) && p->args[i].reg >= 0)
                va_facts(G, p->args[i].reg)->one_value = 0;
        }
        if (op->dest >= 0) va_facts(G, op->dest)->one_value = 0;
        return;
    }
    int one = 0;
    if (!va_is_categorical(G->ir, p->dest)) {
        // numbers: no columns to hold
    } else if (p->form == TF_PLAN_TABLE) {
        one = 1;
        for (int i = 0; i < p->n_in; i++) one &= va_facts(G, p->in[i])->one_value;
        for (int c = 0; c < p->n_combo && one; c++)
            one = p->combo_col[c] >= 0 || va_combo_at_bos(G->ir, p->in, p->n_in, c);
    } else if (p->form == TF_PLAN_STAIRCASE) {
        one = 1;
        for (int i = 0; i < p->n_x && one; i++) one = p->x_col[i] >= 0;
    } else if (p->form == TF_PLAN_ATTEND) {
        one = p->check || (p->default_col >= 0 && va_facts(G, p->vreg)->one_value);
    }
    va_facts(G, p->dest)->one_value = one;
}

int va_push_op(Va *G, const TfIrOp *op) {
    note_one_value(G, op);
    if (G->n_out == G->cap_out) {
        int cap = G->cap_out ? 2 * G->cap_out : 32;
        TfIrOp *v = realloc(G->out, (size_t)cap * sizeof *v);
        if (!v) {
            G->failed = 1;
            return -1;
        }
        G->out = v;
        G->cap_out = cap;
    }
    G->out[G->n_out++] = *op;
    return 0;
}

int va_add_hidden_reg(Va *G, const char *name, TfRegKind kind) {
    TfIr *ir = G->ir;
    char *copy = va_strdup(G, name);
    if (!copy) return -1;
    TfLoc none = {0, 0, 0, 0};
    int r = check_add_reg(ir, copy, kind, none);
    if (r < 0) G->failed = 1;
    else ir->regs[r].facts.writer = -1;
    return r;
}

int va_domain(Va *G, int r, const TfVal **vals) {
    const TfRegFacts *g = va_facts(G, r);
    *vals = g->vals;
    if (!g->known) return -1;
    return g->n_vals;
}

void va_set_values(Va *G, int r, const TfVal *v, int n) {
    TfRegFacts *g = va_facts(G, r);
    g->vals = va_alloc(G, (size_t)n * sizeof *v);
    if (!g->vals) return;
    memcpy(g->vals, v, (size_t)n * sizeof *v);
    g->n_vals = n;
    g->known = 1;
    g->why_stmt = NULL;
    g->why = NULL;
}

/* Marks r's values unknown: written by `s`, which `why`. */
static void set_unknown(Va *G, int r, const TfStmt *s, const char *why) {
    TfRegFacts *g = va_facts(G, r);
    g->known = 0;
    g->why_stmt = s;
    g->why = why;
}

void va_note_why(Va *G, const TfRegFacts *g) {
    if (g->why_stmt)
        diag_note(G->diag, g->why_stmt->loc, "%s", g->why);
}

int va_check_readable(Va *G, const TfIrOp *op, int r, TfLoc loc, int need_categorical) {
    const TfIrReg *R = &G->ir->regs[r];
    const TfRegFacts *g = va_facts(G, r);
    if (g->poisoned) return -1;
    if (R->kind == TF_REG_POSITION) {
        diag_error(G->diag, loc,
                   "'%s' is a position register (sin/cos); %s reads categorical and numeric "
                   "registers (the built-in `indices` is the position as a number)",
                   R->name, tf_ops[op->op].name);
        return -1;
    }
    if (need_categorical && !va_is_categorical(G->ir, r)) {
        diag_error(G->diag, loc,
                   "'%s' is a numeric register; a selection compares categorical registers "
                   "(Map it to a `cat` register first)",
                   R->name);
        return -1;
    }
    if (R->loc.line > 0 && g->writer < 0) {
        diag_error(G->diag, loc, "'%s' is read here before any op writes it", R->name);
        return -1;
    }
    if (g->bos_dirty) {
        diag_error(G->diag, loc,
                   "'%s' may not be 0 at the BOS position, where %s needs it to be 0", R->name,
                   tf_ops[op->op].name);
        if (g->bos_stmt) diag_note(G->diag, g->bos_stmt->loc, "it is written at the BOS here");
        return -1;
    }
    if (!g->known && (va_is_categorical(G->ir, r) || need_categorical)) {
        diag_error(G->diag, loc, "the values of '%s' are not known to the compiler", R->name);
        va_note_why(G, g);
        return -1;
    }
    return 0;
}

void va_combo_text(Va *G, const int *regs, const TfVal *vals, int n, char *buf, size_t len) {
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        char lab[48];
        val_label(G->ir, vals[i], lab, sizeof lab);
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%s = %s", i ? ", " : "", va_reg_name(G, regs[i]), lab);
    }
}

TfOpPlan *va_new_plan(Va *G, TfPlanForm form, const TfIrOp *op, const char *suffix) {
    TfOpPlan *p = va_alloc(G, sizeof *p);
    if (!p) return NULL;
    p->form = form;
    p->vreg = -1;
    p->default_col = -1;
    const char *base = op->stmt->label.text ? op->stmt->label.text : tf_ops[op->op].layer_name;
    snprintf(p->name, sizeof p->name, "%s%s", base, suffix);
    return p;
}

void va_record_write(Va *G, int r, int op_index) { va_facts(G, r)->writer = op_index; }

int va_check_fresh(Va *G, const TfIrOp *op) {
    const TfRegFacts *g = va_facts(G, op->dest);
    if (g->writer >= 0) {
        diag_error(G->diag, op->stmt->dest.loc,
                   "'%s' is written a second time; the general ops write each register once",
                   va_reg_name(G, op->dest));
        diag_hint(G->diag, "write the result to a new register");
        return -1;
    }
    return 0;
}

double va_max_abs(const TfVal *v, int n) {
    double m = 0;
    for (int i = 0; i < n; i++)
        if (fabs(v[i].x) > m) m = fabs(v[i].x);
    return m;
}

int va_set_categorical_results(Va *G, int dest, const TfVal *res, const int *defined,
                               const int *reached, int n, int *col) {
    TfVal *vals = malloc((size_t)(n > 0 ? n : 1) * sizeof *vals);
    if (!vals) return G->failed = 1, -1;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (defined[i] && reached[i]) vals[m++] = res[i];
    m = val_unique(vals, m, 0, NULL);
    va_set_values(G, dest, vals, m);
    free(vals);
    // An unreached combination's result has a column only when a reached one gives it too.
    for (int i = 0; i < n; i++) col[i] = defined[i] ? values_column(G->ir, dest, res[i]) : -1;
    return 0;
}

/* ---- the seed ops --------------------------------------------------------------- */

/* The exact GELU, x Phi(x). */
static double gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }

/* IsZero(z): z + 0.1 GELU(10 - 100 z) - GELU(z + 10) + 10 (lower.c), the same
 * at every opt level: each value maps to its image; the slope is at most
 * 1 + 10 * 1.13 + 1.13 (GELU's slope is below 1.13), and the float32 sums of
 * terms near 10 and the runtime's GELU (within 1.5e-7) add 2e-5. */
static void seed_is_zero(Va *G, const TfIrOp *op, int z) {
    TfRegFacts *g = va_facts(G, z);
    g->bos_dirty = 1; // 0 at the BOS becomes 1
    g->bos_stmt = op->stmt;
    if (!g->known) {
        set_unknown(G, z, op->stmt, "IsZero here reads a register whose values are not known");
        return;
    }
    TfVal *v = malloc((size_t)(g->n_vals ? g->n_vals : 1) * sizeof *v);
    if (!v) {
        G->failed = 1;
        return;
    }
    for (int i = 0; i < g->n_vals; i++) {
        double x = g->vals[i].x;
        v[i] = val_num(x + 0.1 * gelu(10 - 100 * x) - gelu(x + 10) + 10, 0);
    }
    double err = 13.5 * g->err + 2e-5, moved;
    int n = val_unique(v, g->n_vals, SAME_VALUE, &moved);
    va_set_values(G, z, v, n);
    free(v);
    g->err = err + moved;
}

/* Clear(r): at -O, x - ReLU(x) on every column, exactly: a categorical
 * register holds no value afterwards; a number v becomes min(v, 0) within
 * the same bound. At -O0 the seed's GELU approximation is not analysed. */
static void seed_clear(Va *G, const TfIrOp *op, int r) {
    TfRegFacts *g = va_facts(G, r);
    if (va_is_categorical(G->ir, r)) {
        set_unknown(G, r, op->stmt, "Clear here leaves it holding no value");
        return;
    }
    if (!G->opt || !g->known) {
        if (!G->opt) g->err = INFINITY; // the seed's GELU leaves part of small positive values
        set_unknown(G, r, op->stmt,
                    G->opt ? "Clear here reads a register whose values are not known"
                           : "Clear here is seed 001's approximation at -O0, which the compiler "
                             "does not analyse");
        return;
    }
    TfVal *v = malloc((size_t)(g->n_vals ? g->n_vals : 1) * sizeof *v);
    if (!v) {
        G->failed = 1;
        return;
    }
    for (int i = 0; i < g->n_vals; i++) v[i] = val_num(fmin(g->vals[i].x, 0), g->vals[i].kind == TF_VAL_INT);
    double err = g->err, moved;
    int n = val_unique(v, g->n_vals, SAME_VALUE, &moved);
    va_set_values(G, r, v, n);
    free(v);
    g->err = err + moved;
}

/* CopyOnMatch(m, src) -> dst: unit i is 0.1 act(100 m + 100 src_i - 190),
 * which is src_i where m is 1 and 0 where m is 0 (within 10 times the
 * inputs' errors, 11.3 with -O0's GELU), into a token register nothing wrote
 * before. With m always 1 it copies src; where m may be 0 dst may hold no
 * value. */
static void seed_copy_on_match(Va *G, const TfIrOp *op) {
    int m = op->plan->args[0].reg, src = op->plan->args[1].reg, dst = op->dest;
    const TfRegFacts *gm = va_facts(G, m), *gs = va_facts(G, src);
    TfRegFacts *gd = va_facts(G, dst);
    gd->bos_dirty = gm->bos_dirty || gd->bos_dirty;
    if (gd->bos_dirty) gd->bos_stmt = gm->bos_dirty ? gm->bos_stmt : gd->bos_stmt;
    int fresh = gd->writer < 0;
    int always = gm->known && gm->n_vals > 0 && !gm->bos_dirty;
    for (int i = 0; always && i < gm->n_vals; i++)
        if (gm->vals[i].x != 1) always = 0;
    double err = 11.3 * (gm->err + gs->err) + 1e-5; // GELU's slope is below 1.13
    if (!fresh || !always || !gs->known || gs->bos_dirty || gm->err + gs->err >= 0.4) {
        set_unknown(G, dst, op->stmt,
                    !fresh ? "CopyOnMatch here adds into a register written before"
                           : "CopyOnMatch here copies only where its flag is 1, so the register "
                             "may hold no value");
        return;
    }
    va_set_values(G, dst, gs->vals, gs->n_vals);
    gd->err = err;
}

/* A seed op: every register it writes (ops.c) gets known values or unknown
 * ones with the reason. */
static void seed_op(Va *G, const TfIrOp *op) {
    const TfOpInfo *info = &tf_ops[op->op];
    for (int i = 0; i < op->plan->n_args; i++) {
        const TfParam *p = &info->params[i < info->n_params ? i : info->n_params - 1];
        int r = op->plan->args[i].reg;
        if (!(p->access & TF_ACCESS_WRITE) || r < 0) continue;
        if (op->op == TF_OP_CLEAR) seed_clear(G, op, r);
        else if (op->op == TF_OP_IS_ZERO) seed_is_zero(G, op, r);
        else {
            set_unknown(G, r, op->stmt, "it is changed here by a seed op, which the value "
                                        "analysis does not model");
            va_facts(G, r)->bos_dirty = 1;
            va_facts(G, r)->bos_stmt = op->stmt;
        }
    }
    if (op->dest >= 0) {
        if (op->op == TF_OP_COPY_ON_MATCH) {
            seed_copy_on_match(G, op);
        } else {
            set_unknown(G, op->dest, op->stmt,
                        "it is written here by a seed op, which the value analysis does not "
                        "model");
            va_facts(G, op->dest)->bos_dirty = 1;
            va_facts(G, op->dest)->bos_stmt = op->stmt;
        }
        va_facts(G, op->dest)->writer = G->n_out;
    }
}

/* ---- the pass ------------------------------------------------------------------- */

static void builtin_values(Va *G) {
    TfIr *ir = G->ir;
    for (int r = 0; r < ir->n_regs; r++) {
        TfRegFacts *g = va_facts(G, r);
        g->writer = -1;
        if (r == TF_IR_REG_TOKENS || ir->regs[r].kind == TF_REG_TOKEN) {
            TfVal v[256];
            int n = 0;
            for (int t = 0; t < ir->n_input; t++) {
                if (r == TF_IR_REG_TOKENS && t == ir->bos) continue;
                v[n].kind = TF_VAL_TOKEN;
                v[n++].x = ir->vocab[t];
            }
            n = val_unique(v, n, 0, NULL);
            va_set_values(G, r, v, n);
            g->one_value = r == TF_IR_REG_TOKENS;
        } else if (r == ir->indices_reg) {
            // Values 0..maxlen-1, one column each (values_column maps
            // value i to column i); 0, the BOS's position, is kept so that
            // values and columns line up (tfc --dump=plans shows its rows).
            TfVal *v = malloc((size_t)ir->maxlen * sizeof *v);
            if (!v) {
                G->failed = 1;
                return;
            }
            for (int i = 0; i < ir->maxlen; i++) v[i] = val_num(i, 1);
            va_set_values(G, r, v, ir->maxlen);
            free(v);
            g->one_value = 1;
        }
    }
}

/* Categorical registers' column labels from their values: 9 digits, or 17
 * (every double its own) for neighbours that 9 digits would not tell apart
 * (1 and 1 + 1e-14, a tie-break of Tracr's library). */
static void make_labels(Va *G) {
    TfIr *ir = G->ir;
    for (int r = 0; r < ir->n_regs; r++) {
        TfRegFacts *g = va_facts(G, r);
        if (ir->regs[r].kind != TF_REG_CATEGORICAL || g->labels) continue;
        g->labels = va_alloc(G, (size_t)(g->n_vals ? g->n_vals : 1) * sizeof *g->labels);
        if (!g->labels) return;
        for (int i = 0; i < g->n_vals; i++) {
            char buf[64];
            val_label(ir, g->vals[i], buf, sizeof buf);
            g->labels[i] = va_strdup(G, buf);
            if (!g->labels[i]) return;
        }
        // Sorted: equal labels are neighbours. Each run of them gets 17 digits.
        for (int i = 0, j; i < g->n_vals; i = j) {
            for (j = i + 1; j < g->n_vals && strcmp(g->labels[j], g->labels[i]) == 0; j++) {}
            for (int k = i; j - i > 1 && k < j; k++) {
                char buf[64];
                snprintf(buf, sizeof buf, "%.17g", g->vals[k].x);
                g->labels[k] = va_strdup(G, buf);
                if (!g->labels[k]) return;
            }
        }
    }
}

/* The residual stream's one layout, made once the values are known: the
 * registers in order (tokens, pos, indices, the declared ones, the hidden
 * ones the analysis added), a token register a column per vocabulary entry,
 * a position two, a number one, a categorical register one per value. */
static void layout(TfIr *ir) {
    int offset = 0;
    for (int i = 0; i < ir->n_regs; i++) {
        TfIrReg *r = &ir->regs[i];
        r->size = r->kind == TF_REG_TOKEN         ? ir->n_input
                  : r->kind == TF_REG_POSITION    ? 2
                  : r->kind == TF_REG_CATEGORICAL ? r->facts.n_vals
                                                  : 1;
        r->offset = offset;
        offset += r->size;
    }
    ir->d_model = offset;
}

/* A number the output can hold and no token spells becomes an output-only
 * token spelling it (its label: 11, -1, 0.5), in a list vocabulary read at
 * every position (docs/language.md, "Output-only tokens"). Returns the
 * token, or -1 (not such a program, 256 tokens already, out of memory). */
static int add_number_token(Va *G, TfVal v) {
    TfIr *ir = G->ir;
    if (!ir->list_vocab || !ir->every_position || !val_is_num(v) || ir->n_vocab >= 256) return -1;
    char lab[64];
    val_label(ir, v, lab, sizeof lab);
    int w = check_word(ir, lab, (int)strlen(lab)); // the label's word (compiler/checker.h)
    if (w < 0) return -1;
    ir->vocab[ir->n_vocab] = w;
    ir->named = 1;
    return ir->n_vocab++;
}

/* The output register must print as tokens, exactly (or, a number read at
 * every position, as its value within the bound it carries). */
static void check_output(Va *G) {
    TfIr *ir = G->ir;
    int r = ir->output_reg;
    const TfRegFacts *g = va_facts(G, r);
    const char *name = ir->regs[r].name;
    if (g->poisoned) return;
    if (ir->regs[r].kind == TF_REG_SCALAR && ir->output_as_number) {
        // Decoded by the unembedding into the nearest value's token
        // (compiler/lower.c): right while within half the values' gap.
        double gap = INFINITY;
        for (int i = 0; g->known && i < g->n_vals; i++)
            for (int j = i + 1; j < g->n_vals; j++)
                gap = fmin(gap, fabs(numbers_value(g->vals, g->n_vals, g->vals[i]) -
                                     numbers_value(g->vals, g->n_vals, g->vals[j])));
        // Its numbers no token spells are output-only tokens, as one-hot.
        for (int i = 0; g->known && i < g->n_vals; i++)
            if (values_token_of(ir, g->vals[i]) < 0 && add_number_token(G, g->vals[i]) < 0) {
                diag_error(G->diag, ir->output_loc,
                           "the output '%s', held as a number, can hold a value no token spells",
                           name);
                return;
            }
        if (!g->known || g->writer < 0 || !(g->err < gap / 2))
            diag_error(G->diag, ir->output_loc,
                       "the output '%s', held as a number, may be off by %.3g: half the gap "
                       "between its values (%.3g) or more",
                       name, g->err, gap);
        return;
    }
    if (ir->regs[r].kind == TF_REG_SCALAR) {
        if (g->writer < 0) {
            diag_error(G->diag, ir->output_loc, "the output '%s' is never written", name);
            return;
        }
        if (!isfinite(g->err) || g->err > 1e6) {
            diag_error(G->diag, ir->output_loc,
                       "the output '%s' has no useful error bound (%.3g): its values are not "
                       "known to the compiler",
                       name, g->err);
            va_note_why(G, g);
        }
        ir->output_error_bound = g->err;
        return;
    }
    // A token register (`tokens`, or written by seed ops): seed 001's
    // constructions, which the compiler does not analyse (docs/language.md).
    if (ir->regs[r].kind == TF_REG_TOKEN) return;
    if (g->writer < 0) {
        diag_error(G->diag, ir->output_loc, "the output '%s' is never written", name);
        return;
    }
    if (!g->known) {
        diag_error(G->diag, ir->output_loc,
                   "the values of the output '%s' are not known to the compiler", name);
        va_note_why(G, g);
        return;
    }
    for (int i = 0; i < g->n_vals; i++) {
        if (values_token_of(ir, g->vals[i]) < 0 && add_number_token(G, g->vals[i]) < 0) {
            char lab[64];
            val_label(ir, g->vals[i], lab, sizeof lab);
            diag_error(G->diag, ir->output_loc,
                       "the output '%s' can hold %s, which is no token of the vocabulary",
                       name, lab);
            // Issue 27: say what would make it one, not which numbers are.
            if (val_is_num(g->vals[i]))
                diag_hint(G->diag,
                          "an output's number is printed as the token that spells it: add "
                          "'%s' to the vocabulary%s%s%s%s",
                          lab, ir->every_position && !ir->list_vocab
                                   ? " (a listed vocabulary, `vocab [...]`, adds it as an "
                                     "output-only token)"
                                   : "",
                          ir->every_position ? ", or declare '" : "",
                          ir->every_position ? name : "",
                          ir->every_position ? "' `num` to print numbers" : "");
            else if (strcmp(lab, "''") == 0)
                diag_hint(G->diag, "the empty string cannot be a token: the Map must not make it "
                                   "for any value it reads");
            else
                diag_hint(G->diag, "add %s to the vocabulary%s", lab,
                          ir->every_position ? " (an output-only token: `vocab [...] output [...]`)"
                                             : "");
            return;
        }
    }
    if (g->err >= 0.5)
        diag_error(G->diag, ir->output_loc,
                   "the output '%s' may be off by %.3g, so its largest column may not be the "
                   "right token (margin %.3g)",
                   name, g->err, 0.5 - g->err);
}

int values_analyze(TfIr *ir, int opt_level, TfDiag *diag) {
    int max_len = ir->maxlen > 0 ? ir->maxlen : ir->period;
    Va G = {ir, diag, opt_level > 0, ir->bos >= 0 ? max_len - 1 : max_len, NULL, 0, 0, 0, 0};
    builtin_values(&G);
    int errors = diag->n_errors;
    for (int i = 0; i < ir->n_ops && !G.failed; i++) {
        TfIrOp op = ir->ops[i];
        if (tf_ops[op.op].general) op.plan = NULL; // a seed op's is the checker's
        int before = diag->n_errors;
        G.bos_set = 0;
        switch (op.op) {
        case TF_OP_MAP: map_analyze(&G, &op, G.n_out); break;
        case TF_OP_AGGREGATE:
        case TF_OP_COUNT_MATCHES: select_analyze(&G, &op, G.n_out); break;
        default:
            seed_op(&G, &op);
            va_push_op(&G, &op);
        }
        // Only a mean with a default, and a linear Map of one, hold a
        // number at the BOS position (TfRegFacts.bos_num).
        if (!G.bos_set && op.dest >= 0 && tf_ops[op.op].general) va_facts(&G, op.dest)->bos_num = 0;
        // A refused op's destination (an error here, or a quiet refusal
        // after an earlier one): later reads fail quietly, whatever wrote
        // it before.
        if ((diag->n_errors > before || !op.plan) && op.dest >= 0 && tf_ops[op.op].general) {
            va_facts(&G, op.dest)->poisoned = 1;
            if (va_facts(&G, op.dest)->writer < 0) va_facts(&G, op.dest)->writer = G.n_out;
        }
    }
    if (G.failed) {
        free(G.out);
        return -1;
    }
    for (int r = 0; r < ir->n_regs && diag->n_errors == errors; r++) {
        if (ir->regs[r].kind == TF_REG_CATEGORICAL && va_facts(&G, r)->n_vals == 0 &&
            va_facts(&G, r)->writer < 0 && r != ir->indices_reg) {
            diag_error(diag, ir->regs[r].loc, "categorical register '%s' is never written",
                       ir->regs[r].name);
        }
    }
    if (ir->output_reg >= 0) check_output(&G);
    make_labels(&G);
    free(ir->ops);
    ir->ops = G.out;
    ir->n_ops = G.n_out;
    layout(ir);
    return G.failed ? -1 : 0; // make_labels ran out of memory
}
