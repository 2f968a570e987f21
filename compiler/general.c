/* general.c: Map, Aggregate and Count: value sets, exactness checks, weights.
 *
 * See general.h for what the analysis establishes, docs/language.md
 * ("General ops") for the ops and the weights each becomes.
 *
 * Error bounds. Every register carries `err`, a bound on how far any of its
 * columns can be from the exact value (0 or 1 for a categorical register,
 * the number for a numeric one). An MLP step reads a sum of input columns
 * that is an integer n when all its inputs hold the combination and at most
 * n - 1 otherwise; its ramp turns on fully 0.25 before n and is off 0.25
 * after n - 1, so it is exact while the inputs' errors add up to less than
 * 0.25. A staircase on a numeric input puts each step at the midpoint
 * between neighbouring values with ramps a quarter of the gap wide. An
 * attention with inverse temperature beta gives selected keys the score
 * beta, the BOS beta/2 and the rest 0: what it leaks to keys it should not
 * read is at most (L + 1) exp(-beta (1/2 - 2 delta)), with delta the score
 * error its inputs can cause; its softmax sums L terms in float32, a
 * relative error of at most (2L + 4) 2^-24. The compiler adds these up along
 * the program and refuses, with the margin, where a step or the output could
 * come out wrong.
 */
#include "general.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower_internal.h"

#define MAX_COMBOS (1 << 20)     /* per Map or selection */
#define MAX_NUM_VALUES 20000     /* a numeric register's value set, beyond: unknown */
#define WARN_COMBOS 1024         /* a Map's product of domains worth a warning */
#define WARN_JOINT 256           /* a selection side's joint domain */
#define ROUND_ONE (1.0 / (1 << 20)) /* a few float32 roundings of a value near 1 */
#define EPS32 (1.0 / (1 << 24))

/* ---- storage ------------------------------------------------------------- */

typedef struct Store {
    void **ptrs;
    int n, cap;
    TfGenOp **ops; /* every plan, for freeing */
    int n_ops;
    char **names; /* hidden registers' names */
    int n_names;
} Store;

static void *keep(Store *st, void *p) {
    if (!p) return NULL;
    if (st->n == st->cap) {
        int cap = st->cap ? 2 * st->cap : 64;
        void **v = realloc(st->ptrs, (size_t)cap * sizeof *v);
        if (!v) {
            free(p);
            return NULL;
        }
        st->ptrs = v;
        st->cap = cap;
    }
    st->ptrs[st->n++] = p;
    return p;
}

static void *alloc(Store *st, size_t n) { return keep(st, calloc(1, n ? n : 1)); }

void general_free(TfIr *ir) {
    Store *st = ir->gen_store;
    if (!st) return;
    for (int i = 0; i < st->n; i++) free(st->ptrs[i]);
    free(st->ptrs);
    free(st);
    free(ir->gen_regs);
    ir->gen_store = NULL;
    ir->gen_regs = NULL;
}

/* ---- values ---------------------------------------------------------------- */

static int is_num(TfVal v) { return v.kind != TF_VAL_TOKEN; }

static int val_cmp(TfVal a, TfVal b) {
    if (a.kind == TF_VAL_TOKEN && b.kind != TF_VAL_TOKEN) return 1;
    if (a.kind != TF_VAL_TOKEN && b.kind == TF_VAL_TOKEN) return -1;
    return a.x < b.x ? -1 : a.x > b.x ? 1 : 0;
}

static int val_cmp_qsort(const void *a, const void *b) {
    return val_cmp(*(const TfVal *)a, *(const TfVal *)b);
}

/* Sorts and removes duplicates; returns the new count. */
static int val_unique(TfVal *v, int n) {
    qsort(v, (size_t)n, sizeof *v, val_cmp_qsort);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || val_cmp(v[m - 1], v[i]) != 0) v[m++] = v[i];
    return m;
}

void general_value_label(TfVal v, char *buf, size_t n) {
    char cb[8];
    if (v.kind == TF_VAL_TOKEN)
        snprintf(buf, n, "'%s'", check_show_char((int)v.x, cb));
    else if (v.kind == TF_VAL_INT)
        snprintf(buf, n, "%.0f", v.x);
    else
        snprintf(buf, n, "%.9g", v.x);
}

static int find_tok(const TfIr *ir, int c) {
    for (int i = 0; i < ir->n_vocab; i++)
        if ((unsigned char)ir->vocab[i] == (unsigned char)c) return i;
    return -1;
}

int general_token_of(const TfIr *ir, TfVal v) {
    if (v.kind == TF_VAL_TOKEN) return find_tok(ir, (int)v.x);
    if (v.kind != TF_VAL_TOKEN && v.x >= 0 && v.x <= 9 && v.x == floor(v.x))
        return find_tok(ir, '0' + (int)v.x);
    return -1;
}

static int is_categorical(const TfIr *ir, int r) {
    return ir->regs[r].kind == TF_REG_CATEGORICAL || ir->regs[r].kind == TF_REG_TOKEN;
}

int general_column(const TfIr *ir, int r, TfVal v) {
    const TfIrReg *R = &ir->regs[r];
    if (R->kind == TF_REG_TOKEN) return v.kind == TF_VAL_TOKEN ? find_tok(ir, (int)v.x) : -1;
    if (R->kind != TF_REG_CATEGORICAL || !ir->gen_regs) return -1;
    const TfGenReg *g = &ir->gen_regs[r];
    int lo = 0, hi = g->n_vals - 1;
    while (lo <= hi) { // values are sorted
        int mid = (lo + hi) / 2, c = val_cmp(g->vals[mid], v);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* ---- the analysis's state ------------------------------------------------------ */

typedef struct Gen {
    TfIr *ir;
    TfDiag *diag;
    Store *st;
    int n_real;     /* positions after the BOS: maxlen - 1 (or max_len) */
    TfIrOp *out;    /* the new op list */
    int n_out, cap_out;
    int failed;     /* out of memory */
} Gen;

static int push_op(Gen *G, const TfIrOp *op) {
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

static TfGenReg *greg(Gen *G, int r) { return &G->ir->gen_regs[r]; }

static int find_reg(const TfIr *ir, const char *name) {
    for (int i = 0; i < ir->n_regs; i++)
        if (strcmp(ir->regs[i].name, name) == 0) return i;
    return -1;
}

/* Adds a hidden register (a joint selection side, Count's fraction). */
static int add_hidden_reg(Gen *G, const char *name, TfRegKind kind) {
    TfIr *ir = G->ir;
    char *copy = keep(G->st, malloc(strlen(name) + 1));
    TfIrReg *regs = realloc(ir->regs, ((size_t)ir->n_regs + 1) * sizeof *regs);
    if (regs) ir->regs = regs;
    TfGenReg *gr = realloc(ir->gen_regs, ((size_t)ir->n_regs + 1) * sizeof *gr);
    if (gr) ir->gen_regs = gr;
    if (!copy || !regs || !gr) {
        G->failed = 1;
        return -1;
    }
    strcpy(copy, name);
    TfLoc none = {0, 0, 0, 0};
    regs[ir->n_regs] = (TfIrReg){copy, kind, 0, 0, none};
    memset(&gr[ir->n_regs], 0, sizeof gr[0]);
    gr[ir->n_regs].writer = -1;
    return ir->n_regs++;
}

/* The values a register holds after the BOS, for enumeration: tokens
 * without the BOS, indices from 1 (0 is the BOS's). */
static int domain(Gen *G, int r, const TfVal **vals) {
    const TfGenReg *g = greg(G, r);
    *vals = g->vals;
    if (!g->known) return -1;
    return g->n_vals;
}

static void set_values(Gen *G, int r, const TfVal *v, int n) {
    TfGenReg *g = greg(G, r);
    g->vals = alloc(G->st, (size_t)n * sizeof *v);
    if (!g->vals) {
        G->failed = 1;
        return;
    }
    memcpy(g->vals, v, (size_t)n * sizeof *v);
    g->n_vals = n;
    g->known = 1;
}

/* ---- expressions -------------------------------------------------------------- */

typedef struct Env {
    const TfIr *ir;
    const TfVal *cur;         /* per register: its value (Map) */
    const TfVal *kcur, *qcur; /* per register: key and query values (selections) */
    char msg[200];
    TfLoc where;
} Env;

static int fail(Env *E, const TfExpr *e, const char *fmt, const char *a) {
    snprintf(E->msg, sizeof E->msg, fmt, a);
    E->where = e->loc;
    return -1;
}

static int truthy(Env *E, const TfExpr *e, TfVal v, int *out) {
    if (v.kind == TF_VAL_TOKEN) return fail(E, e, "a token is not a truth value%s", "");
    *out = v.x != 0;
    return 0;
}

static TfVal num_val(double x, int integer) {
    TfVal v = {integer ? TF_VAL_INT : TF_VAL_REAL, x};
    return v;
}

static int eval(Env *E, const TfExpr *e, TfVal *out);

static int eval_binary(Env *E, const TfExpr *e, TfVal *out) {
    TfVal a, b;
    if (e->op == TF_EX_AND || e->op == TF_EX_OR) {
        int ta, tb;
        if (eval(E, e->a, &a) < 0 || truthy(E, e->a, a, &ta) < 0) return -1;
        if (e->op == TF_EX_AND && !ta) return *out = num_val(0, 1), 0;
        if (e->op == TF_EX_OR && ta) return *out = num_val(1, 1), 0;
        if (eval(E, e->b, &b) < 0 || truthy(E, e->b, b, &tb) < 0) return -1;
        *out = num_val(tb, 1);
        return 0;
    }
    if (eval(E, e->a, &a) < 0 || eval(E, e->b, &b) < 0) return -1;
    int cmp_op = e->op == TF_EX_EQ || e->op == TF_EX_NE || e->op == '<' || e->op == '>' ||
                 e->op == TF_EX_LE || e->op == TF_EX_GE;
    if (cmp_op) {
        if (is_num(a) != is_num(b))
            return fail(E, e, "compares a token with a number%s", "");
        int c = val_cmp(a, b);
        int r = e->op == TF_EX_EQ ? c == 0 : e->op == TF_EX_NE ? c != 0 : e->op == '<' ? c < 0
              : e->op == '>' ? c > 0 : e->op == TF_EX_LE ? c <= 0 : c >= 0;
        *out = num_val(r, 1);
        return 0;
    }
    if (!is_num(a) || !is_num(b))
        return fail(E, e, "does arithmetic on a token (use ord() for its code)%s", "");
    int integer = a.kind == TF_VAL_INT && b.kind == TF_VAL_INT;
    double x = a.x, y = b.x, r;
    switch (e->op) {
    case '+': r = x + y; break;
    case '-': r = x - y; break;
    case '*': r = x * y; break;
    case '/':
        if (y == 0) return fail(E, e, "divides by zero%s", "");
        r = integer ? floor(x / y) : x / y;
        break;
    case '%':
        if (y == 0) return fail(E, e, "takes a remainder by zero%s", "");
        r = x - y * floor(x / y);
        break;
    default: return fail(E, e, "unknown operator%s", "");
    }
    *out = num_val(r, integer);
    return 0;
}

static int eval_call(Env *E, const TfExpr *e, TfVal *out) {
    const char *f = e->name.text;
    TfVal a[8];
    if (e->n_args > 8) return fail(E, e, "%s takes at most 8 arguments", f);
    for (int i = 0; i < e->n_args; i++)
        if (eval(E, e->args[i], &a[i]) < 0) return -1;
    if (strcmp(f, "min") == 0 || strcmp(f, "max") == 0) {
        if (e->n_args < 1) return fail(E, e, "%s needs arguments", f);
        TfVal best = a[0];
        for (int i = 0; i < e->n_args; i++) {
            if (is_num(a[i]) != is_num(a[0])) return fail(E, e, "%s mixes tokens and numbers", f);
            int c = val_cmp(a[i], best);
            if (f[1] == 'i' ? c < 0 : c > 0) best = a[i];
        }
        *out = best;
        return 0;
    }
    if (e->n_args != 1)
        return fail(E, e, "unknown function '%s' (min, max, abs, floor, round, ord, chr)", f);
    if (strcmp(f, "floor") == 0 || strcmp(f, "round") == 0) {
        if (!is_num(a[0])) return fail(E, e, "%s of a token", f);
        // round: halves away from zero; a hair of tolerance for values like 0.3 * 10.
        double x = a[0].x;
        *out = num_val(f[0] == 'f' ? floor(x + 1e-9) : (x < 0 ? -floor(-x + 0.5) : floor(x + 0.5)), 1);
        return 0;
    }
    if (strcmp(f, "abs") == 0) {
        if (!is_num(a[0])) return fail(E, e, "abs of a token%s", "");
        *out = a[0];
        out->x = fabs(out->x);
        return 0;
    }
    if (strcmp(f, "ord") == 0) {
        if (a[0].kind != TF_VAL_TOKEN) return fail(E, e, "ord of a number%s", "");
        *out = num_val(a[0].x, 1);
        return 0;
    }
    if (strcmp(f, "chr") == 0) {
        if (a[0].kind != TF_VAL_INT || a[0].x < 1 || a[0].x > 255)
            return fail(E, e, "chr needs an integer 1..255%s", "");
        out->kind = TF_VAL_TOKEN;
        out->x = a[0].x;
        return 0;
    }
    return fail(E, e, "unknown function '%s' (min, max, abs, floor, round, ord, chr)", f);
}

static int literal(const TfExpr *e, TfVal *v) {
    switch (e->kind) {
    case TF_EXPR_INT: *v = num_val((double)e->ival, 1); return 0;
    case TF_EXPR_REAL: *v = num_val(e->real, 0); return 0;
    case TF_EXPR_CHAR: v->kind = TF_VAL_TOKEN; v->x = e->ch; return 0;
    case TF_EXPR_TRUE: *v = num_val(1, 1); return 0;
    default: return -1;
    }
}

static int eval(Env *E, const TfExpr *e, TfVal *out) {
    if (literal(e, out) == 0) return 0;
    switch (e->kind) {
    case TF_EXPR_NAME: {
        int r = find_reg(E->ir, e->name.text);
        if (r < 0 || !E->cur) return fail(E, e, "'%s' is not a value here", e->name.text);
        *out = E->cur[r];
        return 0;
    }
    case TF_EXPR_FIELD: {
        int r = find_reg(E->ir, e->name.text);
        const TfVal *side = e->side == 'k' ? E->kcur : E->qcur;
        if (r < 0 || !side) return fail(E, e, "'%s' is not a value here", e->name.text);
        *out = side[r];
        return 0;
    }
    case TF_EXPR_UNARY: {
        TfVal a;
        if (eval(E, e->a, &a) < 0) return -1;
        if (e->op == TF_EX_NOT) {
            int t;
            if (truthy(E, e->a, a, &t) < 0) return -1;
            *out = num_val(!t, 1);
            return 0;
        }
        if (!is_num(a)) return fail(E, e, "negates a token%s", "");
        *out = a;
        out->x = -a.x;
        return 0;
    }
    case TF_EXPR_BINARY: return eval_binary(E, e, out);
    case TF_EXPR_COND: {
        TfVal c;
        int t;
        if (eval(E, e->a, &c) < 0 || truthy(E, e->a, c, &t) < 0) return -1;
        return eval(E, t ? e->b : e->c, out);
    }
    case TF_EXPR_CALL: return eval_call(E, e, out);
    case TF_EXPR_TABLE: {
        TfVal in[TF_GEN_MAX_INPUTS];
        if (e->n_inputs > TF_GEN_MAX_INPUTS) return fail(E, e, "a table has at most 8 inputs%s", "");
        for (int i = 0; i < e->n_inputs; i++) {
            int r = find_reg(E->ir, e->inputs[i].text);
            if (r < 0 || !E->cur) return fail(E, e, "'%s' is not a value here", e->inputs[i].text);
            in[i] = E->cur[r];
        }
        const TfTableEntry *dflt = NULL;
        for (int i = 0; i < e->n_entries; i++) {
            const TfTableEntry *t = &e->entries[i];
            if (t->n_keys == 0) {
                dflt = t;
                continue;
            }
            int match = t->n_keys == e->n_inputs;
            for (int k = 0; k < t->n_keys && match; k++) {
                TfVal kv;
                if (literal(t->keys[k], &kv) < 0 || is_num(kv) != is_num(in[k]) ||
                    val_cmp(kv, in[k]) != 0)
                    match = 0;
            }
            if (match) return eval(E, t->value, out);
        }
        if (dflt) return eval(E, dflt->value, out);
        return fail(E, e, "has no entry for these inputs and no default `_ => ...`%s", "");
    }
    default: return fail(E, e, "cannot be evaluated%s", "");
    }
}

/* Registers an expression reads: names (Map) or k./q. fields (selections).
 * Reports unknown names; returns -1 after an error. */
typedef struct Reads {
    int regs[TF_GEN_MAX_INPUTS], n;       /* Map inputs */
    int kregs[TF_GEN_MAX_INPUTS], nk;     /* selection: key side */
    int qregs[TF_GEN_MAX_INPUTS], nq;     /* selection: query side */
} Reads;

static int add_unique(int *list, int *n, int r) {
    for (int i = 0; i < *n; i++)
        if (list[i] == r) return 0;
    if (*n == TF_GEN_MAX_INPUTS) return -1;
    list[(*n)++] = r;
    return 0;
}

static int collect_reads(Gen *G, const TfExpr *e, int selection, Reads *R) {
    if (!e) return 0;
    int bad = 0;
    switch (e->kind) {
    case TF_EXPR_NAME:
    case TF_EXPR_FIELD: {
        if (e->kind == TF_EXPR_NAME && selection) {
            diag_error(G->diag, e->loc,
                       "in a selection, write k.%s (at the key position) or q.%s (at the query "
                       "position)",
                       e->name.text, e->name.text);
            return -1;
        }
        if (e->kind == TF_EXPR_FIELD && !selection) {
            diag_error(G->diag, e->loc, "k. and q. belong in the selection of Aggregate or Count");
            return -1;
        }
        int r = find_reg(G->ir, e->name.text);
        if (r < 0) {
            diag_error(G->diag, e->name.loc, "unknown register '%s'", e->name.text);
            return -1;
        }
        int *list = !selection ? R->regs : e->side == 'k' ? R->kregs : R->qregs;
        int *n = !selection ? &R->n : e->side == 'k' ? &R->nk : &R->nq;
        if (add_unique(list, n, r) < 0) {
            diag_error(G->diag, e->loc, "an expression reads at most %d registers",
                       TF_GEN_MAX_INPUTS);
            return -1;
        }
        return 0;
    }
    case TF_EXPR_TABLE:
        for (int i = 0; i < e->n_inputs; i++) {
            int r = find_reg(G->ir, e->inputs[i].text);
            if (r < 0) {
                diag_error(G->diag, e->inputs[i].loc, "unknown register '%s'", e->inputs[i].text);
                return -1;
            }
            if (selection) {
                diag_error(G->diag, e->loc, "a table cannot be part of a selection");
                return -1;
            }
            if (add_unique(R->regs, &R->n, r) < 0) return -1;
        }
        for (int i = 0; i < e->n_entries; i++) {
            for (int k = 0; k < e->entries[i].n_keys; k++) {
                TfVal v;
                if (literal(e->entries[i].keys[k], &v) < 0) {
                    diag_error(G->diag, e->entries[i].keys[k]->loc,
                               "a table key is a literal (3, 'a', 0.5) or `_`");
                    bad = 1;
                }
            }
            if (e->entries[i].n_keys && e->entries[i].n_keys != e->n_inputs) {
                diag_error(G->diag, e->entries[i].loc, "this key has %d value%s for %d input%s",
                           e->entries[i].n_keys, e->entries[i].n_keys == 1 ? "" : "s",
                           e->n_inputs, e->n_inputs == 1 ? "" : "s");
                bad = 1;
            }
            if (collect_reads(G, e->entries[i].value, selection, R) < 0) bad = 1;
        }
        return bad ? -1 : 0;
    default: break;
    }
    if (collect_reads(G, e->a, selection, R) < 0) bad = 1;
    if (collect_reads(G, e->b, selection, R) < 0) bad = 1;
    if (collect_reads(G, e->c, selection, R) < 0) bad = 1;
    for (int i = 0; i < e->n_args; i++)
        if (collect_reads(G, e->args[i], selection, R) < 0) bad = 1;
    return bad ? -1 : 0;
}

/* Checks that op can read register r: written before, of a usable kind. */
static int check_readable(Gen *G, const TfIrOp *op, int r, TfLoc loc, int need_categorical) {
    const TfIrReg *R = &G->ir->regs[r];
    const TfGenReg *g = greg(G, r);
    if (g->poisoned) return -1;
    if (R->kind == TF_REG_POSITION) {
        diag_error(G->diag, loc,
                   "'%s' is a position register (sin/cos); %s reads categorical and numeric "
                   "registers (the built-in `indices` is the position as a number)",
                   R->name, tf_ops[op->op].name);
        return -1;
    }
    if (need_categorical && !is_categorical(G->ir, r)) {
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
    if (!g->known && (is_categorical(G->ir, r) || need_categorical)) {
        diag_error(G->diag, loc, "the values of '%s' are not known to the compiler", R->name);
        return -1;
    }
    return 0;
}

static const char *reg_name(Gen *G, int r) { return G->ir->regs[r].name; }

/* Describes a combination of input values, for messages. */
static void combo_text(Gen *G, const int *regs, const TfVal *vals, int n, char *buf, size_t len) {
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        char lab[48];
        general_value_label(vals[i], lab, sizeof lab);
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%s = %s", i ? ", " : "", reg_name(G, regs[i]), lab);
    }
}

/* ---- plans ------------------------------------------------------------------- */

static TfGenOp *new_plan(Gen *G, TfGenForm form, const TfIrOp *op, const char *suffix) {
    TfGenOp *p = alloc(G->st, sizeof *p);
    if (!p) {
        G->failed = 1;
        return NULL;
    }
    p->form = form;
    p->vreg = -1;
    p->default_col = -1;
    const char *base = op->stmt->label.text ? op->stmt->label.text : tf_ops[op->op].layer_name;
    snprintf(p->name, sizeof p->name, "%s%s", base, suffix);
    return p;
}

static void record_write(Gen *G, int r, int op_index) { greg(G, r)->writer = op_index; }

/* Write-once: a general op's destination must be fresh. */
static int check_fresh(Gen *G, const TfIrOp *op) {
    const TfGenReg *g = greg(G, op->dest);
    if (g->writer >= 0) {
        diag_error(G->diag, op->stmt->dest.loc,
                   "'%s' is written a second time; the general ops write each register once",
                   reg_name(G, op->dest));
        diag_hint(G->diag, "write the result to a new register");
        return -1;
    }
    return 0;
}

static double max_abs(const TfVal *v, int n) {
    double m = 0;
    for (int i = 0; i < n; i++)
        if (fabs(v[i].x) > m) m = fabs(v[i].x);
    return m;
}

/* Sets a categorical destination's values (sorted) and returns, through
 * col, each result's column. */
static int set_categorical_results(Gen *G, int dest, const TfVal *res, const int *defined, int n,
                                   int *col) {
    TfVal *vals = malloc((size_t)(n > 0 ? n : 1) * sizeof *vals);
    if (!vals) return G->failed = 1, -1;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (defined[i]) vals[m++] = res[i];
    m = val_unique(vals, m);
    set_values(G, dest, vals, m);
    free(vals);
    for (int i = 0; i < n; i++) col[i] = defined[i] ? general_column(G->ir, dest, res[i]) : -1;
    return 0;
}

/* ---- Map ------------------------------------------------------------------------ */

static int expr_has_names(const TfExpr *e) {
    if (!e) return 0;
    if (e->kind == TF_EXPR_NAME || e->kind == TF_EXPR_TABLE) return 1;
    if (expr_has_names(e->a) || expr_has_names(e->b) || expr_has_names(e->c)) return 1;
    for (int i = 0; i < e->n_args; i++)
        if (expr_has_names(e->args[i])) return 1;
    return 0;
}

static int expr_linear(const TfExpr *e) {
    switch (e->kind) {
    case TF_EXPR_INT:
    case TF_EXPR_REAL:
    case TF_EXPR_NAME: return 1;
    case TF_EXPR_UNARY: return e->op == TF_EX_NEG && expr_linear(e->a);
    case TF_EXPR_BINARY:
        if (e->op == '+' || e->op == '-') return expr_linear(e->a) && expr_linear(e->b);
        if (e->op == '*')
            return (!expr_has_names(e->a) && expr_linear(e->b)) ||
                   (!expr_has_names(e->b) && expr_linear(e->a));
        if (e->op == '/') return !expr_has_names(e->b) && expr_linear(e->a);
        return 0;
    default: return 0;
    }
}

/* Enumerates the combinations of the inputs' values (first input fastest),
 * evaluating the expression on each. Returns the number of combinations or
 * -1 after reporting. */
static int map_enumerate(Gen *G, const TfIrOp *op, const TfExpr *e, const int *in, int n_in,
                         TfVal **res_out, int **defined_out) {
    const TfVal *dom[TF_GEN_MAX_INPUTS];
    int size[TF_GEN_MAX_INPUTS];
    long total = 1;
    for (int i = 0; i < n_in; i++) {
        size[i] = domain(G, in[i], &dom[i]);
        total *= size[i] > 0 ? size[i] : 1;
        if (size[i] <= 0 || total > MAX_COMBOS) {
            diag_error(G->diag, op->stmt->op.loc,
                       "Map over %s: %s combinations of input values, more than %d",
                       reg_name(G, in[i]), size[i] <= 0 ? "no" : "too many", MAX_COMBOS);
            return -1;
        }
    }
    TfVal *res = malloc((size_t)total * sizeof *res);
    int *defined = malloc((size_t)total * sizeof *defined);
    TfVal *cur = calloc((size_t)G->ir->n_regs, sizeof *cur);
    if (!res || !defined || !cur) {
        free(res), free(defined), free(cur);
        G->failed = 1;
        return -1;
    }
    Env E = {.ir = G->ir, .cur = cur};
    int idx[TF_GEN_MAX_INPUTS] = {0};
    for (long c = 0; c < total; c++) {
        for (int i = 0; i < n_in; i++) cur[in[i]] = dom[i][idx[i]];
        defined[c] = 1;
        if (eval(&E, e, &res[c]) < 0) {
            TfVal vals[TF_GEN_MAX_INPUTS] = {{TF_VAL_INT, 0}};
            for (int i = 0; i < n_in; i++) vals[i] = dom[i][idx[i]];
            char where[256];
            combo_text(G, in, vals, n_in, where, sizeof where);
            diag_error(G->diag, E.where, "this expression %s for %s", E.msg,
                       n_in ? where : "its constant value");
            free(res), free(defined), free(cur);
            return -1;
        }
        for (int i = 0; i < n_in && ++idx[i] == size[i]; i++) idx[i] = 0;
    }
    free(cur);
    *res_out = res;
    *defined_out = defined;
    return (int)total;
}

/* One numeric input x among categorical ones, into a numeric register: per
 * combination of the categorical values the expression must be a + b x on
 * x's values (sum = mean x count is one). */
static void analyze_gated(Gen *G, TfIrOp *op, const TfExpr *e, const Reads *R) {
    const TfStmt *s = op->stmt;
    int x = -1, cats[TF_GEN_MAX_INPUTS], n_cat = 0;
    for (int i = 0; i < R->n; i++) {
        if (is_categorical(G->ir, R->regs[i])) cats[n_cat++] = R->regs[i];
        else x = R->regs[i];
    }
    const TfGenReg *gx = greg(G, x);
    if (!gx->known) {
        diag_error(G->diag, s->args[0].loc,
                   "Map: the values of '%s' are not known, so the size of its gate cannot be set",
                   reg_name(G, x));
        return;
    }
    const TfVal *dom[TF_GEN_MAX_INPUTS];
    int size[TF_GEN_MAX_INPUTS];
    long total = 1;
    for (int i = 0; i < n_cat; i++) {
        size[i] = domain(G, cats[i], &dom[i]);
        total *= size[i];
    }
    if (total > MAX_COMBOS) {
        diag_error(G->diag, s->op.loc, "Map: more than %d combinations of input values", MAX_COMBOS);
        return;
    }
    TfGenOp *p = new_plan(G, TF_GEN_GATED, op, "");
    TfVal *cur = calloc((size_t)G->ir->n_regs, sizeof *cur);
    if (!p || !cur) {
        free(cur);
        G->failed = 1;
        return;
    }
    p->n_in = 1 + n_cat;
    p->in[0] = x;
    memcpy(p->in + 1, cats, (size_t)n_cat * sizeof *cats);
    p->n_combo = (int)total;
    p->combo_num = alloc(G->st, (size_t)total * sizeof *p->combo_num);
    p->combo_slope = alloc(G->st, (size_t)total * sizeof *p->combo_slope);
    TfVal *vals = malloc((size_t)total * (size_t)gx->n_vals * sizeof *vals);
    if (!p->combo_num || !p->combo_slope || !vals) {
        free(cur), free(vals);
        G->failed = 1;
        return;
    }
    Env E = {.ir = G->ir, .cur = cur};
    int idx[TF_GEN_MAX_INPUTS] = {0}, n_vals = 0;
    double vmax = 0, slope_max = 0;
    for (long c = 0; c < total; c++) {
        for (int i = 0; i < n_cat; i++) cur[cats[i]] = dom[i][idx[i]];
        double a = 0, b = 0;
        for (int k = 0; k < gx->n_vals; k++) {
            TfVal v;
            cur[x] = gx->vals[k];
            if (eval(&E, e, &v) < 0 || !is_num(v)) {
                TfVal where[TF_GEN_MAX_INPUTS + 1];
                int regs[TF_GEN_MAX_INPUTS + 1];
                for (int i = 0; i < n_cat; i++) where[i] = dom[i][idx[i]], regs[i] = cats[i];
                where[n_cat] = gx->vals[k];
                regs[n_cat] = x;
                char txt[256];
                combo_text(G, regs, where, n_cat + 1, txt, sizeof txt);
                diag_error(G->diag, E.msg[0] ? E.where : s->args[0].loc, "this expression %s for %s",
                           E.msg[0] ? E.msg : "gives a token for a numeric register", txt);
                free(cur), free(vals);
                return;
            }
            double x0 = gx->vals[0].x;
            if (k == 0) a = v.x;
            if (k == 1) {
                b = (v.x - a) / (gx->vals[1].x - x0);
                a -= b * x0;
            }
            if (k >= 1 && fabs(a + b * gx->vals[k].x - v.x) > 1e-9 * (1 + fabs(v.x))) {
                char lab[48], txt[200];
                general_value_label(gx->vals[k], lab, sizeof lab);
                TfVal where[TF_GEN_MAX_INPUTS];
                for (int i = 0; i < n_cat; i++) where[i] = dom[i][idx[i]];
                combo_text(G, cats, where, n_cat, txt, sizeof txt);
                diag_error(G->diag, s->args[0].loc,
                           "Map: a numeric input among categorical ones must enter linearly, but "
                           "this is not a + b * %s for %s (at %s = %s)",
                           reg_name(G, x), txt, reg_name(G, x), lab);
                free(cur), free(vals);
                return;
            }
            vals[n_vals++] = num_val(v.x, 0);
            vmax = fmax(vmax, fabs(v.x));
        }
        p->combo_num[c] = a;
        p->combo_slope[c] = b;
        slope_max = fmax(slope_max, fabs(b));
        for (int i = 0; i < n_cat && ++idx[i] == size[i]; i++) idx[i] = 0;
    }
    free(cur);
    // The gate: a combination that does not hold pushes both units below zero.
    p->c0 = vmax + 1.0;
    double cat_err = 0;
    for (int i = 0; i < n_cat; i++) cat_err += greg(G, cats[i])->err;
    if (cat_err * p->c0 >= 0.5) {
        diag_error(G->diag, s->op.loc,
                   "Map: its categorical inputs may be off by %.3g, which its gate (%.3g) turns "
                   "into %.3g (margin %.3g)",
                   cat_err, p->c0, cat_err * p->c0, 0.5 - cat_err * p->c0);
        free(vals);
        return;
    }
    int m = val_unique(vals, n_vals);
    set_values(G, op->dest, vals, m);
    free(vals);
    greg(G, op->dest)->err = slope_max * gx->err + cat_err * p->c0 + p->c0 * 4 * EPS32;
    p->dest = op->dest;
    op->gen = p;
}

static void analyze_map(Gen *G, TfIrOp *op, int index) {
    const TfStmt *s = op->stmt;
    if (s->n_args != 1 || (s->args[0].kind == TF_ARG_STEP || s->args[0].kind == TF_ARG_NAMED)) {
        diag_error(G->diag, s->n_args > 1 ? s->args[1].loc : s->args[0].loc,
                   "Map takes one expression: Map((a + b) %% 10) -> r");
        return;
    }
    // Rebuild the argument as an expression (the parser simplified names,
    // literals and `reg + n`).
    const TfArg *a = &s->args[0];
    TfExpr tmp_lit, tmp_name, tmp_bin, tmp_int;
    const TfExpr *e = a->expr;
    memset(&tmp_lit, 0, sizeof tmp_lit);
    if (a->kind == TF_ARG_NAME) {
        memset(&tmp_name, 0, sizeof tmp_name);
        tmp_name.kind = TF_EXPR_NAME;
        tmp_name.name = a->name;
        tmp_name.loc = a->loc;
        e = &tmp_name;
    } else if (a->kind == TF_ARG_CHAR || a->kind == TF_ARG_INT) {
        tmp_lit.kind = a->kind == TF_ARG_CHAR ? TF_EXPR_CHAR : TF_EXPR_INT;
        tmp_lit.ch = a->ch;
        tmp_lit.ival = a->value;
        tmp_lit.loc = a->loc;
        e = &tmp_lit;
    } else if (a->kind == TF_ARG_OFFSET) {
        memset(&tmp_name, 0, sizeof tmp_name);
        memset(&tmp_bin, 0, sizeof tmp_bin);
        memset(&tmp_int, 0, sizeof tmp_int);
        tmp_name.kind = TF_EXPR_NAME;
        tmp_name.name = a->name;
        tmp_name.loc = a->name.loc;
        tmp_int.kind = TF_EXPR_INT;
        tmp_int.ival = a->value;
        tmp_int.loc = a->value_loc;
        tmp_bin.kind = TF_EXPR_BINARY;
        tmp_bin.op = '+';
        tmp_bin.a = &tmp_name;
        tmp_bin.b = &tmp_int;
        tmp_bin.loc = a->loc;
        e = &tmp_bin;
    }
    Reads R = {0};
    if (collect_reads(G, e, 0, &R) < 0) return;
    int ok = 1;
    for (int i = 0; i < R.n; i++)
        if (check_readable(G, op, R.regs[i], a->loc, 0) < 0) ok = 0;
    if (!ok || check_fresh(G, op) < 0) return;

    int dest = op->dest, dest_cat = G->ir->regs[dest].kind == TF_REG_CATEGORICAL;
    int all_cat = 1;
    for (int i = 0; i < R.n; i++)
        if (!is_categorical(G->ir, R.regs[i])) all_cat = 0;
    TfGenOp *p = NULL;
    double in_err = 0;
    for (int i = 0; i < R.n; i++) in_err += greg(G, R.regs[i])->err;

    if (!dest_cat && !all_cat && expr_linear(e)) {
        // Linear: exact, whatever the values.
        p = new_plan(G, TF_GEN_LINEAR, op, "");
        if (!p) return;
        TfVal *cur = calloc((size_t)G->ir->n_regs, sizeof *cur);
        if (!cur) { (void)(G->failed = 1); return; }
        for (int i = 0; i < G->ir->n_regs; i++) cur[i] = num_val(0, 0);
        Env E = {.ir = G->ir, .cur = cur};
        TfVal base, one;
        if (eval(&E, e, &base) < 0) {
            diag_error(G->diag, E.where, "this expression %s", E.msg);
            free(cur);
            return;
        }
        p->c0 = base.x;
        double errsum = 0, bound = fabs(base.x);
        for (int i = 0; i < R.n; i++) {
            cur[R.regs[i]] = num_val(1, 0);
            if (eval(&E, e, &one) < 0) {
                diag_error(G->diag, E.where, "this expression %s", E.msg);
                free(cur);
                return;
            }
            cur[R.regs[i]] = num_val(0, 0);
            p->coef[i] = one.x - base.x;
            const TfGenReg *g = greg(G, R.regs[i]);
            errsum += fabs(p->coef[i]) * g->err;
            bound += fabs(p->coef[i]) * (g->known ? max_abs(g->vals, g->n_vals) : 1e6);
        }
        free(cur);
        p->n_in = R.n;
        memcpy(p->in, R.regs, sizeof R.regs);
        // Value set: every combination, when the inputs' sets are known and small.
        long total = 1;
        int known = 1;
        for (int i = 0; i < R.n; i++) {
            const TfGenReg *g = greg(G, R.regs[i]);
            if (!g->known) known = 0;
            else total *= g->n_vals;
        }
        if (known && total <= MAX_NUM_VALUES) {
            TfVal *vals = malloc((size_t)total * sizeof *vals);
            if (!vals) { (void)(G->failed = 1); return; }
            int idx[TF_GEN_MAX_INPUTS] = {0};
            for (long c = 0; c < total; c++) {
                double x = p->c0;
                for (int i = 0; i < R.n; i++) x += p->coef[i] * greg(G, R.regs[i])->vals[idx[i]].x;
                vals[c] = num_val(x, 0);
                for (int i = 0; i < R.n && ++idx[i] == greg(G, R.regs[i])->n_vals; i++) idx[i] = 0;
            }
            int m = val_unique(vals, (int)total);
            set_values(G, dest, vals, m);
            free(vals);
        }
        greg(G, dest)->err = errsum + bound * 4 * EPS32;
    } else if (all_cat) {
        TfVal *res;
        int *defined;
        int n = map_enumerate(G, op, e, R.regs, R.n, &res, &defined);
        if (n < 0) return;
        p = new_plan(G, TF_GEN_TABLE, op, "");
        if (!p) {
            free(res), free(defined);
            return;
        }
        p->n_in = R.n;
        memcpy(p->in, R.regs, sizeof R.regs);
        p->n_combo = n;
        if (n > WARN_COMBOS)
            diag_warning(G->diag, s->op.loc,
                         "this Map's MLP has %d hidden units: one pair per combination of its "
                         "inputs' values (%d)",
                         2 * n, n);
        if (in_err >= 0.25) {
            diag_error(G->diag, s->op.loc,
                       "Map: its inputs may be off by %.3g in all, but its steps need less than "
                       "0.25 (margin %.3g)",
                       in_err, 0.25 - in_err);
            free(res), free(defined);
            return;
        }
        if (dest_cat) {
            p->combo_col = alloc(G->st, (size_t)n * sizeof *p->combo_col);
            if (!p->combo_col) { (void)(free(res), free(defined), G->failed = 1); return; }
            set_categorical_results(G, dest, res, defined, n, p->combo_col);
            greg(G, dest)->err = ROUND_ONE;
        } else {
            p->combo_num = alloc(G->st, (size_t)n * sizeof *p->combo_num);
            if (!p->combo_num) { (void)(free(res), free(defined), G->failed = 1); return; }
            for (int c = 0; c < n; c++) {
                if (!is_num(res[c])) {
                    diag_error(G->diag, s->args[0].loc,
                               "this Map gives a token, but '%s' is a numeric register",
                               reg_name(G, dest));
                    free(res), free(defined);
                    return;
                }
                p->combo_num[c] = res[c].x;
            }
            int m = val_unique(res, n);
            set_values(G, dest, res, m);
            greg(G, dest)->err = max_abs(res, m) * ROUND_ONE;
        }
        free(res);
        free(defined);
    } else if (!dest_cat && R.n > 1) {
        int n_num = 0;
        for (int i = 0; i < R.n; i++) n_num += !is_categorical(G->ir, R.regs[i]);
        if (n_num != 1) {
            diag_error(G->diag, s->args[0].loc,
                       "Map: with categorical inputs, a Map takes one numeric input; this one reads "
                       "%d",
                       n_num);
            return;
        }
        analyze_gated(G, op, e, &R);
        if (!op->gen) return;
        p = op->gen;
    } else if (R.n == 1) {
        // One numeric input: a staircase over its values.
        int r = R.regs[0];
        const TfGenReg *g = greg(G, r);
        if (!g->known) {
            diag_error(G->diag, s->args[0].loc,
                       "Map: the values of '%s' are not known, so a non-linear function of it "
                       "cannot be built",
                       reg_name(G, r));
            return;
        }
        TfVal *res;
        int *defined;
        int n = map_enumerate(G, op, e, R.regs, 1, &res, &defined);
        if (n < 0) return;
        p = new_plan(G, TF_GEN_STAIRCASE, op, "");
        if (!p) { (void)(free(res), free(defined)); return; }
        p->n_in = 1;
        p->in[0] = r;
        p->n_x = n;
        p->xs = alloc(G->st, (size_t)n * sizeof *p->xs);
        if (!p->xs) { (void)(free(res), free(defined), G->failed = 1); return; }
        double gap = INFINITY, xmax = 0;
        for (int i = 0; i < n; i++) {
            p->xs[i] = g->vals[i].x;
            if (i) gap = fmin(gap, p->xs[i] - p->xs[i - 1]);
            xmax = fmax(xmax, fabs(p->xs[i]));
        }
        // The ramps are a quarter of the gap wide on each side of the midpoint;
        // computing K (x - m) in float32 costs about 4 roundings of its terms.
        double rounding = n > 1 ? (2.0 / gap) * 2 * xmax * 4 * EPS32 * (gap / 2) : 0;
        double margin = n > 1 ? gap / 4 - g->err - rounding - xmax * 4 * EPS32 : 1;
        if (margin <= 0) {
            char gl[48];
            snprintf(gl, sizeof gl, "%.3g", gap);
            diag_error(G->diag, s->op.loc,
                       "Map: the values of '%s' are as close as %s, and it may be off by %.3g: "
                       "its steps cannot tell the values apart in float32 (margin %.3g)",
                       reg_name(G, r), gl, g->err, margin);
            free(res), free(defined);
            return;
        }
        if (dest_cat) {
            p->x_col = alloc(G->st, (size_t)n * sizeof *p->x_col);
            if (!p->x_col) { (void)(free(res), free(defined), G->failed = 1); return; }
            set_categorical_results(G, dest, res, defined, n, p->x_col);
            greg(G, dest)->err = ROUND_ONE * n;
        } else {
            p->x_num = alloc(G->st, (size_t)n * sizeof *p->x_num);
            if (!p->x_num) { (void)(free(res), free(defined), G->failed = 1); return; }
            for (int i = 0; i < n; i++) p->x_num[i] = res[i].x;
            int m = val_unique(res, n);
            set_values(G, dest, res, m);
            greg(G, dest)->err = max_abs(res, m) * ROUND_ONE * n;
        }
        free(res);
        free(defined);
    } else {
        diag_error(G->diag, s->args[0].loc,
                   "Map: a non-linear function of numeric registers takes one input; this one "
                   "reads %d (Map categorical registers together, or numeric ones one at a time)",
                   R.n);
        return;
    }
    p->dest = dest;
    op->gen = p;
    record_write(G, dest, index);
    push_op(G, op);
}

/* ---- selections ------------------------------------------------------------------ */

/* One side of a selection as one register: itself, or a joint register
 * written by an inserted table Map (one column per combination). Returns
 * the register, -1 after reporting; *n gets its number of values. */
static int selection_side(Gen *G, const TfIrOp *op, int index, const int *regs, int n_regs,
                          char side, int *n) {
    if (n_regs == 0) {
        *n = 1;
        return -1;
    }
    if (n_regs == 1) {
        *n = greg(G, regs[0])->n_vals;
        return regs[0];
    }
    long total = 1;
    for (int i = 0; i < n_regs; i++) total *= greg(G, regs[i])->n_vals;
    if (total > MAX_COMBOS) {
        diag_error(G->diag, op->stmt->args[0].loc,
                   "the %s side of this selection has %ld combinations of values",
                   side == 'k' ? "key" : "query", total);
        return -1;
    }
    if (total > WARN_JOINT)
        diag_warning(G->diag, op->stmt->args[0].loc,
                     "the %s side of this selection reads %d registers: their joint one-hot has "
                     "%ld columns (the product of their domains)",
                     side == 'k' ? "key" : "query", n_regs, total);
    char name[128];
    const char *base = op->stmt->label.text ? op->stmt->label.text : tf_ops[op->op].layer_name;
    snprintf(name, sizeof name, "%s.%c%d", base, side, index);
    int r = find_reg(G->ir, name);
    if (r >= 0) { // a repeat body: the same selection again
        *n = greg(G, r)->n_vals;
        return r;
    }
    r = add_hidden_reg(G, name, TF_REG_CATEGORICAL);
    if (r < 0) return -1;
    TfVal *vals = malloc((size_t)total * sizeof *vals);
    char **labels = alloc(G->st, (size_t)total * sizeof *labels);
    TfGenOp *p = new_plan(G, TF_GEN_TABLE, op, side == 'k' ? ".keys" : ".queries");
    int *cols = p ? alloc(G->st, (size_t)total * sizeof *cols) : NULL;
    if (!vals || !labels || !p || !cols) {
        free(vals);
        G->failed = 1;
        return -1;
    }
    int idx[TF_GEN_MAX_INPUTS] = {0};
    double err = 0;
    for (int i = 0; i < n_regs; i++) err += greg(G, regs[i])->err;
    for (long c = 0; c < total; c++) {
        vals[c] = num_val((double)c, 1);
        cols[c] = (int)c;
        char lab[256] = "(";
        for (int i = 0; i < n_regs; i++) {
            char one[48];
            general_value_label(greg(G, regs[i])->vals[idx[i]], one, sizeof one);
            size_t l = strlen(lab);
            snprintf(lab + l, sizeof lab - l, "%s%s", i ? "," : "", one);
        }
        strncat(lab, ")", sizeof lab - strlen(lab) - 1);
        labels[c] = keep(G->st, malloc(strlen(lab) + 1));
        if (!labels[c]) {
            free(vals);
            G->failed = 1;
            return -1;
        }
        strcpy(labels[c], lab);
        for (int i = 0; i < n_regs && ++idx[i] == greg(G, regs[i])->n_vals; i++) idx[i] = 0;
    }
    set_values(G, r, vals, (int)total);
    free(vals);
    greg(G, r)->labels = labels;
    greg(G, r)->err = ROUND_ONE;
    if (err >= 0.25) {
        diag_error(G->diag, op->stmt->args[0].loc,
                   "this selection's registers may be off by %.3g in all; its joint one-hot "
                   "needs less than 0.25 (margin %.3g)",
                   err, 0.25 - err);
        return -1;
    }
    p->n_in = n_regs;
    memcpy(p->in, regs, (size_t)n_regs * sizeof *regs);
    p->n_combo = (int)total;
    p->combo_col = cols;
    p->dest = r;
    TfIrOp joint = *op;
    joint.op = TF_OP_MAP;
    joint.gen = p;
    joint.dest = r;
    record_write(G, r, G->n_out);
    push_op(G, &joint);
    *n = (int)total;
    return r;
}

/* Fills the predicate matrix P over the sides' values. */
/* The parts of a top-level `a and b and ...`; -1 when there are too many. */
static int split_conjuncts(const TfExpr *e, const TfExpr **out, int *n) {
    if (e->kind == TF_EXPR_BINARY && e->op == TF_EX_AND)
        return split_conjuncts(e->a, out, n) < 0 ? -1 : split_conjuncts(e->b, out, n);
    if (*n == TF_GEN_MAX_INPUTS) return -1;
    out[(*n)++] = e;
    return 0;
}

static int selection_matrix(Gen *G, const TfExpr *pred, const Reads *R, int nq, int nk,
                            unsigned char **P_out) {
    unsigned char *P = alloc(G->st, (size_t)nq * (size_t)nk);
    TfVal *kcur = calloc((size_t)G->ir->n_regs, sizeof *kcur);
    TfVal *qcur = calloc((size_t)G->ir->n_regs, sizeof *qcur);
    if (!P || !kcur || !qcur) {
        free(kcur), free(qcur);
        G->failed = 1;
        return -1;
    }
    Env E = {.ir = G->ir, .kcur = kcur, .qcur = qcur};
    for (int qi = 0; qi < nq; qi++) {
        // Decode a joint index into its registers' values (first fastest).
        int rest = qi;
        for (int i = 0; i < R->nq; i++) {
            const TfGenReg *g = greg(G, R->qregs[i]);
            qcur[R->qregs[i]] = g->vals[rest % g->n_vals];
            rest /= g->n_vals;
        }
        for (int ki = 0; ki < nk; ki++) {
            rest = ki;
            for (int i = 0; i < R->nk; i++) {
                const TfGenReg *g = greg(G, R->kregs[i]);
                kcur[R->kregs[i]] = g->vals[rest % g->n_vals];
                rest /= g->n_vals;
            }
            TfVal v;
            int t;
            if (eval(&E, pred, &v) < 0 || truthy(&E, pred, v, &t) < 0) {
                diag_error(G->diag, E.where, "this selection %s", E.msg);
                free(kcur), free(qcur);
                return -1;
            }
            P[(size_t)qi * (size_t)nk + (size_t)ki] = (unsigned char)t;
        }
    }
    free(kcur);
    free(qcur);
    *P_out = P;
    return 0;
}

/* The selection's mask and scale options; value args start at `first`. */
static int selection_options(Gen *G, const TfIrOp *op, int first, TfGenOp *p, int *has_default,
                             TfVal *dflt) {
    const TfStmt *s = op->stmt;
    p->causal = !G->ir->every_position;
    p->beta = 2.0 * (log((double)G->n_real + 1.0) + 17.0);
    *has_default = 0;
    for (int i = first; i < s->n_args; i++) {
        const TfArg *a = &s->args[i];
        if (a->kind == TF_ARG_NAME && strcmp(a->name.text, "causal") == 0) {
            p->causal = 1;
        } else if (a->kind == TF_ARG_NAME && strcmp(a->name.text, "sum") == 0 &&
                   op->op == TF_OP_AGGREGATE) {
            p->sum = 1;
        } else if (a->kind == TF_ARG_NAME && strcmp(a->name.text, "bidirectional") == 0) {
            if (!G->ir->every_position) {
                diag_error(G->diag, a->loc,
                           "a generating program's attention is causal: a token generated later "
                           "must not change what earlier positions computed");
                return -1;
            }
            p->causal = 0;
        } else if ((a->kind == TF_ARG_STEP || a->kind == TF_ARG_NAMED) &&
                   strcmp(a->name.text, "default") == 0) {
            *has_default = 1;
            if (a->kind == TF_ARG_STEP) {
                *dflt = num_val((double)a->value, 1);
            } else if (literal(a->expr, dflt) < 0) {
                diag_error(G->diag, a->expr->loc, "a default is a literal: 0, 'a', 0.5");
                return -1;
            }
        } else if ((a->kind == TF_ARG_STEP || a->kind == TF_ARG_NAMED) &&
                   strcmp(a->name.text, "scale") == 0) {
            TfVal v;
            if (a->kind == TF_ARG_STEP) v = num_val((double)a->value, 1);
            else if (literal(a->expr, &v) < 0 || !is_num(v)) {
                diag_error(G->diag, a->expr->loc, "a scale is a number");
                return -1;
            }
            if (!(v.x > 0) || v.x > 1e4) {
                diag_error(G->diag, a->loc, "the scale must be above 0 and at most 10000");
                return -1;
            }
            p->beta = v.x;
        } else {
            diag_error(G->diag, a->loc,
                       "unknown option; %s takes `causal`, `bidirectional`, %s`default: V` and "
                       "`scale: S` after its %s",
                       tf_ops[op->op].name, op->op == TF_OP_AGGREGATE ? "`sum`, " : "",
                       op->op == TF_OP_AGGREGATE ? "value" : "selection");
            return -1;
        }
    }
    return 0;
}

/* Count's two layers: an attention (plan p: the BOS scored like a selected
 * position, reading the BOS indicator) gives 1/(c+1) in a hidden numeric
 * register, and a staircase turns it into c in the categorical `dest`.
 * Returns 0, or -1 after reporting. */
static int push_count(Gen *G, TfIrOp *op, int index, TfGenOp *p, int dest, double leak,
                      double soft) {
    const TfStmt *s = op->stmt;
    // 1 / (c + 1) into a hidden numeric register, then steps to c.
    // Named after the label, or the op and its place when unlabelled or
    // the label is taken: each Count has a fraction of its own.
    char name[128];
    if (s->label.text) snprintf(name, sizeof name, "%s.frac", s->label.text);
    if (!s->label.text || find_reg(G->ir, name) >= 0)
        snprintf(name, sizeof name, "%s%d.frac",
                 s->label.text ? s->label.text : tf_ops[op->op].layer_name, index);
    int h = add_hidden_reg(G, name, TF_REG_SCALAR);
    if (h < 0) return -1;
    int n_c = G->ir->maxlen; // counts 0 .. maxlen - 1
    TfVal *fr = malloc((size_t)n_c * sizeof *fr);
    if (!fr) { (void)(G->failed = 1); return -1; }
    for (int c = 0; c < n_c; c++) fr[c] = num_val(1.0 / (c + 1), 0);
    int m = val_unique(fr, n_c);
    set_values(G, h, fr, m);
    free(fr);
    greg(G, h)->err = leak + soft;
    p->dest = h;
    p->vreg = -1;
    op->gen = p;
    TfIrOp attn = *op;
    attn.dest = h;
    record_write(G, h, G->n_out);
    push_op(G, &attn);
    // The steps: value 1/(c+1) -> column c of dest. The softmax's rounding
    // (its sum of up to L + 1 terms, then a division) is relative to the
    // value 1/(c+1) it gives, and so is the steps' own: check each step
    // between neighbouring counts against the error at its values.
    const TfGenReg *g = greg(G, h);
    double worst = INFINITY, wgap = 0, werr = 0;
    int wc = 0;
    for (int i = 1; i < g->n_vals; i++) {
        double gap = g->vals[i].x - g->vals[i - 1].x;
        double err = leak + (soft + 8 * EPS32) * g->vals[i].x;
        if (gap / 4 - err < worst) {
            worst = gap / 4 - err;
            wgap = gap;
            werr = err;
            wc = (int)lround(1.0 / g->vals[i].x) - 1;
        }
    }
    if (worst <= 0) {
        diag_error(G->diag, s->op.loc,
                   "Count: up to %d matches, the attention's 1/(count+1) for counts %d and %d "
                   "are %.3g apart but may be off by %.3g in float32: the count cannot be read "
                   "back exactly (margin %.3g)",
                   n_c - 1, wc, wc + 1, wgap, werr, worst);
        diag_hint(G->diag, "a smaller maxlen makes the gaps wider");
        return -1;
    }
    TfGenOp *st = new_plan(G, TF_GEN_STAIRCASE, op, ".steps");
    if (!st) return -1;
    st->n_in = 1;
    st->in[0] = h;
    st->n_x = g->n_vals;
    st->xs = alloc(G->st, (size_t)g->n_vals * sizeof *st->xs);
    st->x_col = alloc(G->st, (size_t)g->n_vals * sizeof *st->x_col);
    TfVal *counts = malloc((size_t)n_c * sizeof *counts);
    if (!st->xs || !st->x_col || !counts) { (void)(free(counts), G->failed = 1); return -1; }
    for (int c = 0; c < n_c; c++) counts[c] = num_val(c, 1);
    set_values(G, dest, counts, n_c);
    free(counts);
    for (int i = 0; i < g->n_vals; i++) {
        st->xs[i] = g->vals[i].x;
        int c = (int)lround(1.0 / g->vals[i].x) - 1; // xs ascending: counts descending
        st->x_col[i] = general_column(G->ir, dest, num_val(c, 1));
    }
    st->dest = dest;
    greg(G, dest)->err = ROUND_ONE * n_c;
    TfIrOp steps = *op;
    steps.op = TF_OP_MAP;
    steps.gen = st;
    record_write(G, dest, index);
    push_op(G, &steps);
    return 0;
}

static void analyze_selection(Gen *G, TfIrOp *op, int index) {
    const TfStmt *s = op->stmt;
    int is_count = op->op == TF_OP_COUNT_MATCHES;
    if (G->ir->bos < 0) {
        diag_error(G->diag, s->op.loc,
                   "%s needs a BOS token (declare `bos '^';` and start every input with it): "
                   "the attention falls back on it when nothing is selected",
                   tf_ops[op->op].name);
        return;
    }
    if (is_count && G->ir->maxlen <= 0) {
        diag_error(G->diag, s->op.loc, "Count needs `maxlen N;`: its result counts 0..N-1");
        return;
    }
    const TfArg *a0 = &s->args[0];
    if (a0->kind != TF_ARG_EXPR) {
        diag_error(G->diag, a0->loc,
                   "%s's first argument is a selection such as k.tokens == q.tokens, or true",
                   tf_ops[op->op].name);
        return;
    }
    Reads R = {0};
    if (collect_reads(G, a0->expr, 1, &R) < 0) return;
    int ok = 1;
    for (int i = 0; i < R.nk; i++)
        if (check_readable(G, op, R.kregs[i], a0->loc, 1) < 0) ok = 0;
    for (int i = 0; i < R.nq; i++)
        if (check_readable(G, op, R.qregs[i], a0->loc, 1) < 0) ok = 0;
    int vreg = -1;
    if (!is_count) {
        if (s->n_args < 2 || s->args[1].kind != TF_ARG_NAME) {
            diag_error(G->diag, s->n_args < 2 ? s->loc : s->args[1].loc,
                       "Aggregate's second argument is the register whose values it reads");
            return;
        }
        vreg = find_reg(G->ir, s->args[1].name.text);
        if (vreg < 0) {
            diag_error(G->diag, s->args[1].loc, "unknown register '%s'", s->args[1].name.text);
            return;
        }
        if (check_readable(G, op, vreg, s->args[1].loc, 0) < 0) ok = 0;
    }
    if (!ok || check_fresh(G, op) < 0) return;

    TfGenOp *p = new_plan(G, is_count ? TF_GEN_COUNT : TF_GEN_ATTEND, op, is_count ? ".attn" : "");
    if (!p) return;
    int has_default = 0;
    TfVal dflt = num_val(0, 1);
    if (selection_options(G, op, is_count ? 1 : 2, p, &has_default, &dflt) < 0) return;

    // A conjunction whose parts each read one register a side becomes a sum
    // of terms (no joint one-hots); otherwise one term whose sides are one
    // register each (joint ones written by inserted Maps).
    const TfExpr *conj[TF_GEN_MAX_INPUTS];
    int n_conj = 0, additive = split_conjuncts(a0->expr, conj, &n_conj) == 0 && n_conj > 1;
    Reads CR[TF_GEN_MAX_INPUTS];
    for (int i = 0; additive && i < n_conj; i++) {
        memset(&CR[i], 0, sizeof CR[i]);
        if (collect_reads(G, conj[i], 1, &CR[i]) < 0 || CR[i].nk > 1 || CR[i].nq > 1) additive = 0;
    }
    if (!additive) {
        n_conj = 1;
        conj[0] = a0->expr;
        CR[0] = R;
    }
    double delta = 0;
    for (int t = 0; t < n_conj; t++) {
        struct TfGenTerm *T = &p->terms[t];
        T->qreg = selection_side(G, op, index, CR[t].qregs, CR[t].nq, 'q', &T->nq);
        if (CR[t].nq && T->qreg < 0) return;
        T->kreg = selection_side(G, op, index, CR[t].kregs, CR[t].nk, 'k', &T->nk);
        if (CR[t].nk && T->kreg < 0) return;
        if (selection_matrix(G, conj[t], &CR[t], T->nq, T->nk, &T->P) < 0) return;
        // How far scores can move (before beta): the inputs' errors.
        double eq = T->qreg >= 0 ? greg(G, T->qreg)->err : 0;
        double ek = T->kreg >= 0 ? greg(G, T->kreg)->err : 0;
        delta += (double)T->nq * eq + (double)T->nk * ek + 2 * EPS32;
    }
    p->n_terms = n_conj;

    // Error bounds: what the softmax leaks, how float32 rounds it.
    double L = (double)G->n_real;
    double half = is_count ? 1.0 : 0.5;
    double leak = (L + 1) * exp(-p->beta * (half - 2 * delta));
    double soft = (2 * L + 4) * EPS32;
    if (leak >= 0.25) {
        diag_error(G->diag, s->op.loc,
                   "%s: with scale %.3g over up to %.0f positions the attention may give %.3g%% "
                   "of its weight to positions it does not select; it must stay below 25%% "
                   "(margin %.3g)",
                   tf_ops[op->op].name, p->beta, L, fmin(leak, 1.0) * 100, 0.25 - leak);
        diag_hint(G->diag, "leave out `scale:` to let the compiler choose one");
        return;
    }
    int dest = op->dest;
    if (is_count) {
        push_count(G, op, index, p, dest, leak, soft);
        return;
    }

    // Aggregate: copy a categorical value, or average a numeric one.
    const TfGenReg *gv = greg(G, vreg);
    p->vreg = vreg;
    p->dest = dest;
    int dest_cat = G->ir->regs[dest].kind == TF_REG_CATEGORICAL;
    if (is_categorical(G->ir, vreg)) {
        if (!dest_cat) {
            diag_error(G->diag, s->dest.loc,
                       "Aggregate of the categorical '%s' copies a value: its result is a `cat` "
                       "register, and '%s' is numeric",
                       reg_name(G, vreg), reg_name(G, dest));
            return;
        }
        int n = gv->n_vals + has_default;
        TfVal *vals = malloc((size_t)n * sizeof *vals);
        if (!vals) { (void)(G->failed = 1); return; }
        memcpy(vals, gv->vals, (size_t)gv->n_vals * sizeof *vals);
        if (has_default) vals[gv->n_vals] = dflt;
        int m = val_unique(vals, n);
        set_values(G, dest, vals, m);
        free(vals);
        p->default_col = has_default ? general_column(G->ir, dest, dflt) : -1;
        p->value_numeric = 0;
        greg(G, dest)->err = gv->err + leak + soft + ROUND_ONE;
    } else {
        if (dest_cat) {
            diag_error(G->diag, s->dest.loc,
                       "Aggregate of the numeric '%s' averages it: its result is a `num` "
                       "register, and '%s' is categorical",
                       reg_name(G, vreg), reg_name(G, dest));
            return;
        }
        if (has_default && !is_num(dflt)) {
            diag_error(G->diag, s->loc, "the default of a numeric Aggregate is a number");
            return;
        }
        p->value_numeric = 1;
        p->default_num = has_default ? dflt.x : 0;
        double vmax = gv->known ? fmax(max_abs(gv->vals, gv->n_vals), fabs(p->default_num)) : 1e6;
        int mean_reg = dest; /* with `sum`, the mean goes to a hidden register first */
        if (p->sum) {
            if (has_default) {
                diag_error(G->diag, s->loc, "a sum over nothing is 0: `sum` takes no default");
                return;
            }
            if (G->ir->maxlen <= 0 || !gv->known) {
                diag_error(G->diag, s->op.loc,
                           "`sum` needs `maxlen` and a value register whose values are known "
                           "(it multiplies the mean by the count)");
                return;
            }
            char name[128];
            snprintf(name, sizeof name, "%s%d.mean", p->name, index);
            mean_reg = add_hidden_reg(G, name, TF_REG_SCALAR);
            if (mean_reg < 0) return;
            gv = greg(G, vreg); // adding a register moves the array
            p->dest = mean_reg;
        }
        greg(G, mean_reg)->err = gv->err + 2 * leak * vmax + soft * vmax;
        // The means of up to L values from the set (with the default).
        if (gv->known) {
            int cap = MAX_NUM_VALUES;
            double *sums = malloc((size_t)cap * sizeof *sums), *next = malloc((size_t)cap * sizeof *next);
            TfVal *means = malloc((size_t)cap * sizeof *means);
            TfVal *totals = malloc((size_t)cap * sizeof *totals);
            int n_sums = 1, n_means = 0, n_totals = 0, known = sums && next && means && totals;
            if (known) {
                sums[0] = 0;
                means[n_means++] = num_val(p->default_num, 0);
                totals[n_totals++] = num_val(0, 0);
            }
            for (int k = 1; known && k <= G->n_real; k++) {
                int n_next = 0;
                for (int i = 0; i < n_sums && known; i++)
                    for (int j = 0; j < gv->n_vals && known; j++) {
                        if (n_next == cap) known = 0;
                        else next[n_next++] = sums[i] + gv->vals[j].x;
                    }
                if (!known) break;
                // unique
                TfVal *tmp = malloc((size_t)n_next * sizeof *tmp);
                if (!tmp) {
                    known = 0;
                    break;
                }
                for (int i = 0; i < n_next; i++) tmp[i] = num_val(next[i], 0);
                n_sums = val_unique(tmp, n_next);
                for (int i = 0; i < n_sums; i++) sums[i] = tmp[i].x;
                free(tmp);
                for (int i = 0; i < n_sums && known; i++) {
                    if (n_means == cap || n_totals == cap) {
                        known = 0;
                        break;
                    }
                    means[n_means++] = num_val(sums[i] / k, 0);
                    totals[n_totals++] = num_val(sums[i], 0);
                }
                n_means = val_unique(means, n_means);
                n_totals = val_unique(totals, n_totals);
            }
            if (known) set_values(G, mean_reg, means, n_means);
            if (known && p->sum) set_values(G, dest, totals, n_totals);
            free(sums), free(next), free(means), free(totals);
            if (!known && p->sum) {
                diag_error(G->diag, s->op.loc,
                           "`sum`: the sums of up to %d values of '%s' are more than %d numbers",
                           G->n_real, reg_name(G, vreg), MAX_NUM_VALUES);
                return;
            }
        }
        if (p->sum) {
            // The mean (this attention), the count (a Count of the same
            // selection, into a hidden `cat`), their product (a gated Map).
            op->gen = p;
            record_write(G, mean_reg, G->n_out);
            push_op(G, op);
            TfGenOp *pc = new_plan(G, TF_GEN_COUNT, op, ".count");
            char name[128];
            snprintf(name, sizeof name, "%s%d.n", p->name, index);
            int count_reg = add_hidden_reg(G, name, TF_REG_CATEGORICAL);
            if (!pc || count_reg < 0) return;
            pc->n_terms = p->n_terms;
            memcpy(pc->terms, p->terms, sizeof pc->terms);
            pc->beta = p->beta;
            pc->causal = p->causal;
            double leak_c = (L + 1) * exp(-p->beta * (1.0 - 2 * delta));
            TfIrOp cop = *op;
            cop.op = TF_OP_COUNT_MATCHES;
            if (push_count(G, &cop, G->n_out, pc, count_reg, leak_c, soft) < 0) return;
            TfGenOp *pg = new_plan(G, TF_GEN_GATED, op, ".sum");
            const TfGenReg *gc = greg(G, count_reg), *gm = greg(G, mean_reg);
            if (!pg) return;
            pg->n_in = 2;
            pg->in[0] = mean_reg;
            pg->in[1] = count_reg;
            pg->n_combo = gc->n_vals;
            pg->combo_num = alloc(G->st, (size_t)gc->n_vals * sizeof *pg->combo_num);
            pg->combo_slope = alloc(G->st, (size_t)gc->n_vals * sizeof *pg->combo_slope);
            if (!pg->combo_num || !pg->combo_slope) { (void)(G->failed = 1); return; }
            for (int c = 0; c < gc->n_vals; c++) pg->combo_slope[c] = gc->vals[c].x;
            double mmax = max_abs(gm->vals, gm->n_vals);
            pg->c0 = mmax * L + 1.0;
            if (gc->err * pg->c0 >= 0.5) {
                diag_error(G->diag, s->op.loc,
                           "`sum`: the count may be off by %.3g, which the product's gate (%.3g) "
                           "turns into %.3g (margin %.3g)",
                           gc->err, pg->c0, gc->err * pg->c0, 0.5 - gc->err * pg->c0);
                return;
            }
            pg->dest = dest;
            greg(G, dest)->err = L * gm->err + gc->err * pg->c0 + pg->c0 * 4 * EPS32;
            TfIrOp gop = *op;
            gop.op = TF_OP_MAP;
            gop.gen = pg;
            record_write(G, dest, index);
            push_op(G, &gop);
            return;
        }
        greg(G, dest)->err = greg(G, mean_reg)->err;
    }
    op->gen = p;
    record_write(G, dest, index);
    push_op(G, op);
}

/* ---- the pass ------------------------------------------------------------------- */

static void builtin_values(Gen *G) {
    TfIr *ir = G->ir;
    for (int r = 0; r < ir->n_regs; r++) {
        TfGenReg *g = greg(G, r);
        g->writer = -1;
        if (r == TF_IR_REG_TOKENS || ir->regs[r].kind == TF_REG_TOKEN) {
            TfVal v[256];
            int n = 0;
            for (int t = 0; t < ir->n_vocab; t++) {
                if (r == TF_IR_REG_TOKENS && t == ir->bos) continue;
                v[n].kind = TF_VAL_TOKEN;
                v[n++].x = (unsigned char)ir->vocab[t];
            }
            n = val_unique(v, n);
            set_values(G, r, v, n);
        } else if (r == ir->indices_reg) {
            // Columns are positions 0..maxlen-1; the enumeration leaves out
            // the BOS's 0 (general_column maps value i to column i).
            TfVal *v = malloc((size_t)ir->maxlen * sizeof *v);
            if (!v) { (void)(G->failed = 1); return; }
            for (int i = 0; i < ir->maxlen; i++) v[i] = num_val(i, 1);
            set_values(G, r, v, ir->maxlen);
            free(v);
            char **labels = alloc(G->st, (size_t)ir->maxlen * sizeof *labels);
            if (!labels) { (void)(G->failed = 1); return; }
            for (int i = 0; i < ir->maxlen; i++) {
                char buf[16];
                snprintf(buf, sizeof buf, "%d", i);
                labels[i] = keep(G->st, malloc(strlen(buf) + 1));
                if (!labels[i]) { (void)(G->failed = 1); return; }
                strcpy(labels[i], buf);
            }
            g->labels = labels;
        }
    }
}

/* Categorical registers' column labels from their values. */
static void make_labels(Gen *G) {
    TfIr *ir = G->ir;
    for (int r = 0; r < ir->n_regs; r++) {
        TfGenReg *g = greg(G, r);
        if (ir->regs[r].kind != TF_REG_CATEGORICAL || g->labels) continue;
        g->labels = alloc(G->st, (size_t)(g->n_vals ? g->n_vals : 1) * sizeof *g->labels);
        if (!g->labels) { (void)(G->failed = 1); return; }
        for (int i = 0; i < g->n_vals; i++) {
            char buf[64];
            general_value_label(g->vals[i], buf, sizeof buf);
            g->labels[i] = keep(G->st, malloc(strlen(buf) + 1));
            if (!g->labels[i]) { (void)(G->failed = 1); return; }
            strcpy(g->labels[i], buf);
        }
    }
}

static void layout(TfIr *ir) {
    int offset = 0;
    for (int i = 0; i < ir->n_regs; i++) {
        TfIrReg *r = &ir->regs[i];
        if (r->kind == TF_REG_CATEGORICAL) r->size = ir->gen_regs[i].n_vals;
        if (r->kind == TF_REG_SCALAR) r->size = 1;
        r->offset = offset;
        offset += r->size;
    }
    ir->d_model = offset;
}

/* The output register must print as tokens, exactly. */
static void check_output(Gen *G) {
    TfIr *ir = G->ir;
    int r = ir->output_reg;
    if (r < 0 || ir->regs[r].kind != TF_REG_CATEGORICAL || greg(G, r)->writer < 0) return;
    const TfGenReg *g = greg(G, r);
    for (int i = 0; i < g->n_vals; i++) {
        if (general_token_of(ir, g->vals[i]) < 0) {
            char lab[64];
            general_value_label(g->vals[i], lab, sizeof lab);
            diag_file_error(G->diag,
                            "the output '%s' can hold %s, which is no token of the vocabulary "
                            "(an output holds tokens, or integers 0..9 printed as digits)",
                            ir->regs[r].name, lab);
            return;
        }
    }
    if (g->err >= 0.5)
        diag_file_error(G->diag,
                        "the output '%s' may be off by %.3g, so its largest column may not be the "
                        "right token (margin %.3g)",
                        ir->regs[r].name, g->err, 0.5 - g->err);
}

void general_analyze(TfIr *ir, TfDiag *diag) {
    Store *st = calloc(1, sizeof *st);
    ir->gen_regs = calloc((size_t)ir->n_regs, sizeof *ir->gen_regs);
    if (!st || !ir->gen_regs) {
        free(st);
        diag_file_error(diag, "out of memory");
        return;
    }
    ir->gen_store = st;
    int max_len = ir->maxlen > 0 ? ir->maxlen : ir->period;
    Gen G = {ir, diag, st, ir->bos >= 0 ? max_len - 1 : max_len, NULL, 0, 0, 0};
    builtin_values(&G);
    int errors = diag->n_errors;
    for (int i = 0; i < ir->n_ops && !G.failed; i++) {
        TfIrOp op = ir->ops[i];
        op.gen = NULL;
        int before = diag->n_errors;
        switch (op.op) {
        case TF_OP_MAP: analyze_map(&G, &op, G.n_out); break;
        case TF_OP_AGGREGATE:
        case TF_OP_COUNT_MATCHES: analyze_selection(&G, &op, G.n_out); break;
        default:
            // A seed op: what it writes is no longer known to the analysis.
            if (op.dest >= 0) {
                TfGenReg *g = greg(&G, op.dest);
                if (ir->regs[op.dest].kind != TF_REG_TOKEN) g->known = 0;
                g->writer = G.n_out;
                g->err = 0;
            }
            push_op(&G, &op);
        }
        if (diag->n_errors > before && op.dest >= 0 && greg(&G, op.dest)->writer < 0) {
            greg(&G, op.dest)->poisoned = 1;
            greg(&G, op.dest)->writer = G.n_out;
        }
    }
    if (G.failed) diag_file_error(diag, "out of memory");
    for (int r = 0; r < ir->n_regs && diag->n_errors == errors; r++) {
        if (ir->regs[r].kind == TF_REG_CATEGORICAL && greg(&G, r)->n_vals == 0 &&
            r != ir->indices_reg) {
            diag_error(diag, ir->regs[r].loc, "categorical register '%s' is never written",
                       ir->regs[r].name);
        }
    }
    if (ir->output_reg >= 0 && !greg(&G, ir->output_reg)->poisoned) check_output(&G);
    make_labels(&G);
    free(ir->ops);
    ir->ops = G.out;
    ir->n_ops = G.n_out;
    layout(ir);
}

/* ---- lowering -------------------------------------------------------------------- */

static int col(const TfIr *ir, int r, TfVal v) {
    int c = general_column(ir, r, v);
    return c < 0 ? -1 : ir->regs[r].offset + c;
}

static void add_mlp(Lowerer *L, const TfIrOp *op, Mat w1, Mat b1, Mat w2, Mat b2) {
    lower_add_mlp(L, op, TF_ACT_RELU, w1, b1, w2, b2);
}

/* Two ReLU units h = ReLU(u + 1/2), h' = ReLU(u - 1/2) with u = w.x + b:
 * their difference is a step from 0 (u <= -1/2) to 1 (u >= 1/2). */
static void step_pair(Mat b1, int h, double bias) {
    AT(b1, 0, h) = (float)(bias + 0.5);
    AT(b1, 0, h + 1) = (float)(bias - 0.5);
}

static void lower_table(Lowerer *L, const TfIrOp *op, const TfGenOp *p) {
    const TfIr *ir = L->ir;
    int d = ir->d_model, dest_cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL;
    int n_units = 0;
    for (int c = 0; c < p->n_combo; c++)
        if (dest_cat ? p->combo_col[c] >= 0 : p->combo_num[c] != 0) n_units++;
    int H = 2 * (n_units > 0 ? n_units : 1);
    Mat w1 = lower_mat(L, H, d), b1 = lower_mat(L, 1, H), w2 = lower_mat(L, d, H),
        b2 = lower_mat(L, 1, d);
    if (L->failed) { (void)(free(w1.w), free(b1.w), free(w2.w), free(b2.w)); return; }
    int bos_col = ir->bos >= 0 ? ir->regs[TF_IR_REG_TOKENS].offset + ir->bos : -1;
    int idx[TF_GEN_MAX_INPUTS] = {0}, h = 0;
    int n = p->n_in;
    for (int c = 0; c < p->n_combo; c++) {
        int used = dest_cat ? p->combo_col[c] >= 0 : p->combo_num[c] != 0;
        if (used) {
            // u = 2 (sum of the combination's columns) - 2n + 1: 1 when all
            // inputs hold it, -1 or less when one does not; the BOS turns it off.
            for (int i = 0; i < n; i++) {
                int cc = col(ir, p->in[i], ir->gen_regs[p->in[i]].vals[idx[i]]);
                AT(w1, h, cc) += 2.0f;
                AT(w1, h + 1, cc) += 2.0f;
            }
            if (bos_col >= 0) {
                AT(w1, h, bos_col) = (float)(-2.0 * (n + 1));
                AT(w1, h + 1, bos_col) = (float)(-2.0 * (n + 1));
            }
            step_pair(b1, h, -2.0 * n + 1.0);
            if (dest_cat) {
                int oc = ir->regs[p->dest].offset + p->combo_col[c];
                AT(w2, oc, h) = 1.0f;
                AT(w2, oc, h + 1) = -1.0f;
            } else {
                int oc = ir->regs[p->dest].offset;
                AT(w2, oc, h) = (float)p->combo_num[c];
                AT(w2, oc, h + 1) = (float)-p->combo_num[c];
            }
            h += 2;
        }
        for (int i = 0; i < n && ++idx[i] == ir->gen_regs[p->in[i]].n_vals; i++) idx[i] = 0;
    }
    add_mlp(L, op, w1, b1, w2, b2);
}

static void lower_staircase(Lowerer *L, const TfIrOp *op, const TfGenOp *p) {
    const TfIr *ir = L->ir;
    int d = ir->d_model, n = p->n_x, dest_cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL;
    int H = 1 + 2 * (n - 1);
    Mat w1 = lower_mat(L, H, d), b1 = lower_mat(L, 1, H), w2 = lower_mat(L, d, H),
        b2 = lower_mat(L, 1, d);
    if (L->failed) { (void)(free(w1.w), free(b1.w), free(w2.w), free(b2.w)); return; }
    int bos_col = ir->bos >= 0 ? ir->regs[TF_IR_REG_TOKENS].offset + ir->bos : -1;
    int xc = ir->regs[p->in[0]].offset, oc = ir->regs[p->dest].offset;
    double xmax = 0;
    for (int i = 0; i < n; i++) xmax = fmax(xmax, fabs(p->xs[i]));
    // Unit 0: 1 everywhere but at the BOS (the value at the lowest x).
    AT(b1, 0, 0) = 1.0f;
    if (bos_col >= 0) AT(w1, 0, bos_col) = -1.0f;
    if (dest_cat) {
        if (p->x_col[0] >= 0) AT(w2, oc + p->x_col[0], 0) = 1.0f;
    } else {
        AT(w2, oc, 0) = (float)p->x_num[0];
    }
    for (int i = 0; i + 1 < n; i++) {
        int h = 1 + 2 * i;
        double m = (p->xs[i] + p->xs[i + 1]) / 2, K = 2.0 / (p->xs[i + 1] - p->xs[i]);
        AT(w1, h, xc) = (float)K;
        AT(w1, h + 1, xc) = (float)K;
        if (bos_col >= 0) {
            float off = (float)(-(K * (xmax + fabs(m)) + 2.0));
            AT(w1, h, bos_col) = off;
            AT(w1, h + 1, bos_col) = off;
        }
        step_pair(b1, h, -K * m);
        if (dest_cat) {
            // Crossing into value i+1: its column on, value i's off.
            if (p->x_col[i + 1] >= 0) {
                AT(w2, oc + p->x_col[i + 1], h) += 1.0f;
                AT(w2, oc + p->x_col[i + 1], h + 1) -= 1.0f;
            }
            if (p->x_col[i] >= 0) {
                AT(w2, oc + p->x_col[i], h) -= 1.0f;
                AT(w2, oc + p->x_col[i], h + 1) += 1.0f;
            }
        } else {
            double delta = p->x_num[i + 1] - p->x_num[i];
            AT(w2, oc, h) = (float)delta;
            AT(w2, oc, h + 1) = (float)-delta;
        }
    }
    add_mlp(L, op, w1, b1, w2, b2);
}

static void lower_linear(Lowerer *L, const TfIrOp *op, const TfGenOp *p) {
    const TfIr *ir = L->ir;
    int d = ir->d_model;
    Mat w1 = lower_mat(L, 2, d), b1 = lower_mat(L, 1, 2), w2 = lower_mat(L, d, 2),
        b2 = lower_mat(L, 1, d);
    if (L->failed) { (void)(free(w1.w), free(b1.w), free(w2.w), free(b2.w)); return; }
    int bos_col = ir->bos >= 0 ? ir->regs[TF_IR_REG_TOKENS].offset + ir->bos : -1;
    for (int i = 0; i < p->n_in; i++) {
        int c = ir->regs[p->in[i]].offset;
        AT(w1, 0, c) += (float)p->coef[i];
        AT(w1, 1, c) -= (float)p->coef[i];
    }
    AT(b1, 0, 0) = (float)p->c0;
    AT(b1, 0, 1) = (float)-p->c0;
    if (bos_col >= 0) { // the constant is off at the BOS (its inputs are 0 there)
        AT(w1, 0, bos_col) = (float)-p->c0;
        AT(w1, 1, bos_col) = (float)p->c0;
    }
    int oc = ir->regs[p->dest].offset;
    AT(w2, oc, 0) = 1.0f;
    AT(w2, oc, 1) = -1.0f;
    add_mlp(L, op, w1, b1, w2, b2);
}

/* Query: the query register's one-hot, a constant 1 (the BOS's default
 * score) and the BOS indicator (a BOS query reads only the BOS). Key: per
 * query value, the predicate row applied to the key register's one-hot. */
static void lower_attend(Lowerer *L, const TfIrOp *op, const TfGenOp *p) {
    const TfIr *ir = L->ir;
    int d = ir->d_model, D = 2;
    for (int t = 0; t < p->n_terms; t++) D += p->terms[t].nq;
    int bos_col = ir->regs[TF_IR_REG_TOKENS].offset + ir->bos;
    int is_count = p->form == TF_GEN_COUNT;
    int dest_cat = !is_count && !p->value_numeric;
    int dv = dest_cat ? ir->regs[p->dest].size : 1;
    Mat q = lower_mat(L, D, d), qb = lower_mat(L, 1, D), k = lower_mat(L, D, d),
        kb = lower_mat(L, 1, D), v = lower_mat(L, dv, d), o = lower_mat(L, d, dv);
    if (L->failed) {
        free(q.w), free(qb.w), free(k.w), free(kb.w), free(v.w), free(o.w);
        return;
    }
    int kb_used = 0, row = 0;
    for (int t = 0; t < p->n_terms; t++) {
        const struct TfGenTerm *T = &p->terms[t];
        for (int qi = 0; qi < T->nq; qi++, row++) {
            if (T->qreg >= 0)
                AT(q, row, col(ir, T->qreg, ir->gen_regs[T->qreg].vals[qi])) = 1.0f;
            else
                AT(qb, 0, row) = 1.0f;
            for (int ki = 0; ki < T->nk; ki++) {
                if (!T->P[(size_t)qi * (size_t)T->nk + (size_t)ki]) continue;
                if (T->kreg >= 0) {
                    const TfVal kv = ir->gen_regs[T->kreg].vals[ki];
                    if (T->kreg == ir->indices_reg && kv.x == 0) continue; // the BOS's position
                    AT(k, row, col(ir, T->kreg, kv)) = 1.0f;
                } else { // every key but the BOS
                    AT(kb, 0, row) = 1.0f;
                    AT(k, row, bos_col) = -1.0f;
                    kb_used = 1;
                }
            }
        }
    }
    // A key is selected when all n terms hold: score n. The BOS: n - 1/2
    // (Count: n) for every query, and n + 4 for a BOS query.
    double n = p->n_terms;
    AT(qb, 0, row) = 1.0f;
    AT(k, row, bos_col) = (float)(is_count ? n : n - 0.5);
    AT(q, row + 1, bos_col) = 1.0f;
    AT(k, row + 1, bos_col) = (float)(n + 4.0);
    // Values.
    if (is_count) {
        AT(v, 0, bos_col) = 1.0f;
    } else if (p->value_numeric) {
        AT(v, 0, ir->regs[p->vreg].offset) = 1.0f;
        if (p->default_num != 0) AT(v, 0, bos_col) = (float)p->default_num;
    } else {
        const TfGenReg *gv = &ir->gen_regs[p->vreg];
        for (int i = 0; i < gv->n_vals; i++) {
            if (p->vreg == ir->indices_reg && gv->vals[i].x == 0) continue;
            int c = general_column(ir, p->dest, gv->vals[i]);
            if (c >= 0) AT(v, c, col(ir, p->vreg, gv->vals[i])) = 1.0f;
        }
        if (p->default_col >= 0) AT(v, p->default_col, bos_col) = 1.0f;
    }
    for (int j = 0; j < dv; j++) AT(o, ir->regs[p->dest].offset + j, j) = 1.0f;

    TfLayer ly = lower_layer_header(L, op, TF_LAYER_ATTENTION);
    q.two_d = k.two_d = v.two_d = o.two_d = 1;
    ly.n_heads = 1;
    ly.d_head = D;
    ly.d_vhead = dv;
    ly.scale = (float)p->beta;
    ly.causal = p->causal;
    ly.query = lower_emit_layer(L, "attn.query.weight", q);
    ly.query_bias = lower_emit_layer(L, "attn.query.bias", qb);
    ly.key = lower_emit_layer(L, "attn.key.weight", k);
    if (kb_used) {
        ly.key_bias = lower_emit_layer(L, "attn.key.bias", kb);
    } else {
        free(kb.w);
    }
    ly.value = lower_emit_layer(L, "attn.value.weight", v);
    ly.output = lower_emit_layer(L, "attn.output.weight", o);
    if (!L->failed && model_add_layer(L->m, &ly, L->err) < 0) L->failed = 1;
}

static void lower_gated(Lowerer *L, const TfIrOp *op, const TfGenOp *p) {
    const TfIr *ir = L->ir;
    int d = ir->d_model, n_cat = p->n_in - 1;
    int H = 2 * p->n_combo;
    Mat w1 = lower_mat(L, H, d), b1 = lower_mat(L, 1, H), w2 = lower_mat(L, d, H),
        b2 = lower_mat(L, 1, d);
    if (L->failed) {
        free(w1.w), free(b1.w), free(w2.w), free(b2.w);
        return;
    }
    int bos_col = ir->bos >= 0 ? ir->regs[TF_IR_REG_TOKENS].offset + ir->bos : -1;
    int xc = ir->regs[p->in[0]].offset, oc = ir->regs[p->dest].offset;
    double B = p->c0;
    int idx[TF_GEN_MAX_INPUTS] = {0};
    for (int c = 0; c < p->n_combo; c++) {
        int h = 2 * c;
        // h = ReLU(+-(a + b x) - B (n - sum of the combination's columns)).
        for (int i = 0; i < n_cat; i++) {
            int r = p->in[1 + i];
            int cc = col(ir, r, ir->gen_regs[r].vals[idx[i]]);
            AT(w1, h, cc) += (float)B;
            AT(w1, h + 1, cc) += (float)B;
        }
        AT(w1, h, xc) = (float)p->combo_slope[c];
        AT(w1, h + 1, xc) = (float)-p->combo_slope[c];
        AT(b1, 0, h) = (float)(p->combo_num[c] - B * n_cat);
        AT(b1, 0, h + 1) = (float)(-p->combo_num[c] - B * n_cat);
        if (bos_col >= 0) {
            AT(w1, h, bos_col) = (float)-B;
            AT(w1, h + 1, bos_col) = (float)-B;
        }
        AT(w2, oc, h) = 1.0f;
        AT(w2, oc, h + 1) = -1.0f;
        for (int i = 0; i < n_cat && ++idx[i] == ir->gen_regs[p->in[1 + i]].n_vals; i++) idx[i] = 0;
    }
    add_mlp(L, op, w1, b1, w2, b2);
}

void general_lower(Lowerer *L, const TfIrOp *op) {
    const TfGenOp *p = op->gen;
    switch (p->form) {
    case TF_GEN_TABLE: lower_table(L, op, p); break;
    case TF_GEN_STAIRCASE: lower_staircase(L, op, p); break;
    case TF_GEN_LINEAR: lower_linear(L, op, p); break;
    case TF_GEN_GATED: lower_gated(L, op, p); break;
    case TF_GEN_ATTEND:
    case TF_GEN_COUNT: lower_attend(L, op, p); break;
    }
}
