/* prove_sem.c: the program's meaning at one position, for the validator.
 *
 * The source is parsed and checked again, and the value analysis run at
 * -O0 (no fusion) only for what it proves of the program's meaning: each
 * register's set of values. Nothing of its plans is read. The source ops
 * (Map, Aggregate, Count) are taken from the statements; a position's base
 * variables are its token, its index and each Aggregate's and Count's result;
 * every other register is a Map of earlier ones, evaluated with the
 * expression evaluator on one combination of base-variable values.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prove_internal.h"
#include "numbers.h"
#include "values.h"

static void unsupported(PvSem *S, int line, const char *why) {
    if (S->unsupported[0]) return;
    snprintf(S->unsupported, sizeof S->unsupported, "%s", why);
    S->unsupported_line = line;
}

/* Causal, sum and default, as the source says them (docs/language.md). */
static void op_options(PvSem *S, PvOp *o, int first) {
    const TfStmt *s = o->stmt;
    o->causal = !S->ir->every_position;
    for (int i = first; i < s->n_args; i++) {
        TfArgShape sh = check_arg_shape(&s->args[i]);
        const char *word = sh.kind == TF_ARG_NAME ? sh.name->text : NULL;
        const char *key = s->args[i].name.text;
        if (word && strcmp(word, "causal") == 0) o->causal = 1;
        if (word && strcmp(word, "bidirectional") == 0) o->causal = 0;
        if (word && strcmp(word, "sum") == 0) o->sum = 1;
        if (key && strcmp(key, "default") == 0 && expr_literal(s->args[i].expr, &o->dflt) == 0)
            o->has_default = 1;
    }
}

static int add_base(PvSem *S, int reg, int op) {
    if (S->n_base >= TF_PROOF_MAX_BASE) {
        unsupported(S, 0, "more than 64 base variables (tokens, indices, Aggregates, Counts)");
        return -1;
    }
    const TfRegFacts *g = &S->ir->regs[reg].facts;
    PvBase *b = &S->base[S->n_base];
    b->reg = reg;
    b->op = op;
    if (!g->known) {
        char why[200];
        snprintf(why, sizeof why, "the values of '%s' are unknown", S->ir->regs[reg].name);
        unsupported(S, 0, why);
        return -1;
    }
    b->vals = malloc(((size_t)g->n_vals + 1) * sizeof *b->vals);
    if (!b->vals) return -1;
    b->n = 0;
    for (int i = 0; i < g->n_vals; i++) {
        if (reg == S->ir->indices_reg && g->vals[i].x == 0) continue; // the BOS's
        b->vals[b->n++] = g->vals[i];
    }
    const PvOp *o = op >= 0 ? &S->ops[op] : NULL;
    b->has_none = o && o->kind == TF_OP_AGGREGATE && !o->has_default &&
                  S->ir->regs[reg].kind == TF_REG_CATEGORICAL;
    if (b->has_none) b->vals[b->n++] = (TfVal){TF_VAL_INT, 0};
    S->base_of[reg] = S->n_base;
    S->deps[reg] = (PvDeps)1 << S->n_base;
    return S->n_base++;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define PV_MAX_SUMS (1 << 16)

/* A `sum` Aggregate's count: a base variable of its own (0..maxlen-1 keys
 * selected), and which of the sum's values each count can make: the sums
 * of n values of the value register, each one of its values (n = 0: 0). A
 * combination of a sum and a count that no input makes is unreachable
 * (prove_attn.c writes no value there). The sum's values are the value
 * analysis's, trusted as every register's are (prove.h): a sum a count
 * makes that is not among them is not looked for. */
static int add_count_base(PvSem *S, int op) {
    PvOp *o = &S->ops[op];
    if (S->n_base >= TF_PROOF_MAX_BASE) {
        unsupported(S, 0, "more than 64 base variables (tokens, indices, Aggregates, Counts)");
        return -1;
    }
    int maxlen = S->ir->maxlen, nb = S->n_base;
    PvBase *b = &S->base[nb], *sb = &S->base[o->base];
    const TfRegFacts *gx = &S->ir->regs[o->vreg].facts;
    b->reg = -1;
    b->op = op;
    b->has_none = 0;
    b->n = maxlen;
    b->vals = malloc((size_t)maxlen * sizeof *b->vals);
    o->reach = calloc((size_t)maxlen * (size_t)sb->n + 1, 1);
    double *cur = malloc(PV_MAX_SUMS * sizeof *cur), *next = NULL;
    if (!b->vals || !o->reach || !cur) {
        free(cur), free(next);
        return -1;
    }
    for (int n = 0; n < maxlen; n++) b->vals[n] = val_num(n, 1);
    S->n_base++;
    o->nbase = nb;
    int nc = 1;
    cur[0] = 0;
    for (int n = 0; n < maxlen; n++) {
        if (n > 0) { // the sums of n values: those of n - 1 plus one more
            size_t nn = 0;
            double *t = realloc(next, ((size_t)nc * (size_t)gx->n_vals + 1) * sizeof *t);
            if (!t) {
                free(cur), free(next);
                return -1;
            }
            next = t;
            for (int i = 0; i < nc; i++)
                for (int k = 0; k < gx->n_vals; k++) next[nn++] = cur[i] + gx->vals[k].x;
            qsort(next, nn, sizeof *next, cmp_double);
            nc = 0;
            for (size_t i = 0; i < nn; i++) {
                if (nc > 0 && next[i] <= cur[nc - 1] + 1e-12 * (1 + fabs(next[i]))) continue;
                if (nc == PV_MAX_SUMS) {
                    free(cur), free(next);
                    unsupported(S, o->stmt->loc.line, "not proven: a `sum` that can make more than 65536 numbers");
                    return -1;
                }
                cur[nc++] = next[i];
            }
        }
        for (int j = 0; j < sb->n; j++) { // the sum's value j among them (bisection)
            double y = sb->vals[j].x, tol = 1e-9 * (1 + fabs(y));
            int lo = 0, hi = nc;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (cur[mid] < y - tol) lo = mid + 1;
                else hi = mid;
            }
            o->reach[(size_t)n * sb->n + j] = lo < nc && cur[lo] <= y + tol;
        }
    }
    free(cur), free(next);
    return 0;
}

/* One source statement into S->ops (or the reason it cannot be proven). */
static int add_op(PvSem *S, const TfIrOp *io) {
    const TfStmt *s = io->stmt;
    for (int i = 0; i < S->n_ops; i++)
        if (S->ops[i].stmt == s) return 0; // Count's steps, joint registers: the same statement
    if (io->op != TF_OP_MAP && io->op != TF_OP_AGGREGATE && io->op != TF_OP_COUNT_MATCHES) {
        char why[200];
        snprintf(why, sizeof why, "not proven: seed op %s", tf_ops[io->op].name);
        unsupported(S, s->loc.line, why);
        return 0;
    }
    PvOp *o = &S->ops[S->n_ops];
    memset(o, 0, sizeof *o);
    o->stmt = s;
    o->kind = io->op;
    o->vreg = -1;
    o->base = -1;
    o->nbase = -1;
    o->dest = s->dest.text ? check_find_reg(S->ir, s->dest.text) : -1;
    if (o->dest < 0 || s->n_args < 1) return 0;
    if (S->writer[o->dest] >= 0) {
        unsupported(S, s->loc.line, "a register written twice");
        return 0;
    }
    o->expr = s->args[0].expr;
    if (io->op == TF_OP_AGGREGATE) {
        TfArgShape v = s->n_args > 1 ? check_arg_shape(&s->args[1]) : (TfArgShape){0};
        o->vreg = v.kind == TF_ARG_NAME ? check_find_reg(S->ir, v.name->text) : -1;
        op_options(S, o, 2);
        if (o->sum && (o->vreg < 0 || S->ir->regs[o->vreg].kind != TF_REG_SCALAR ||
                       !S->ir->regs[o->vreg].facts.known || S->ir->regs[o->dest].kind != TF_REG_SCALAR))
            unsupported(S, s->loc.line, "not proven: a `sum` of a register whose values are unknown");
    } else if (io->op == TF_OP_COUNT_MATCHES) {
        op_options(S, o, 1);
    }
    S->writer[o->dest] = S->n_ops++;
    return 0;
}

/* Each register's base variables, in op order. */
static int make_deps(PvSem *S) {
    const TfIr *ir = S->ir;
    for (int i = 0; i < S->n_ops; i++) {
        PvOp *o = &S->ops[i];
        if (o->kind != TF_OP_MAP) {
            o->base = add_base(S, o->dest, i);
            if (o->base < 0) return S->unsupported[0] ? 0 : -1;
            if (o->sum && add_count_base(S, i) < 0) return S->unsupported[0] ? 0 : -1;
            continue;
        }
        ExprReads *R = &S->reads[i];
        TfDiag quiet;
        diag_init(&quiet, "", "", 0, S->sink);
        if (expr_reads(ir, &quiet, o->expr, 0, R) < 0) return -1;
        for (int k = 0; k < R->n; k++) S->deps[o->dest] |= S->deps[R->regs[k]];
    }
    return 0;
}

/* The registers the file holds as numbers (its register table says
 * numeric where the source declares `cat`: compiler/numbers.h) become
 * numeric in S->ir, after checking, on the program as declared, that each
 * is one the compiler may so hold, with its whole group: then the program
 * computes the same either way, and the proof is against the program as
 * written. Otherwise the file is not proven. 0, or -1 out of memory. */
static int held_as_numbers(PvSem *S, const TfModel *m, TfDiag *diag) {
    TfIr *ir = S->ir;
    int n = ir->n_regs, any = 0;
    unsigned char *as = calloc((size_t)n, 1);
    int *group = malloc((size_t)n * sizeof *group);
    if (!as || !group) {
        free(as), free(group);
        return -1;
    }
    for (int r = 0; r < n; r++) {
        int k = m ? model_find_register(m, ir->regs[r].name) : -1;
        as[r] = k >= 0 && ir->regs[r].kind == TF_REG_CATEGORICAL && m->regs[k].kind == TF_REG_SCALAR;
        any |= as[r];
    }
    int rc = 0;
    if (any) {
        TfIr *ir0 = check_program(S->prog, diag);
        int ng = ir0 && values_analyze(ir0, 1, diag) == 0 ? numbers_groups(ir0, n, group) : -1;
        if (ng < 0) rc = -1;
        for (int r = 0; rc == 0 && r < n && !S->unsupported[0]; r++) {
            int whole = as[r] && group[r] >= 0;
            for (int x = 0; whole && x < n; x++) whole = group[x] != group[r] || as[x];
            if (as[r] && !whole) {
                char why[200];
                snprintf(why, sizeof why,
                         "not proven: the file holds '%.60s' as a number, which could change what "
                         "the program computes (compiler/numbers.h)",
                         ir->regs[r].name);
                unsupported(S, ir->regs[r].loc.line, why);
            }
        }
        if (ir0) check_free(ir0);
        if (rc == 0 && !S->unsupported[0]) numbers_apply(ir, as, n);
    }
    free(as), free(group);
    return rc;
}

int pv_sem_load(PvSem *S, const TfModel *m, const char *source, size_t len, TfError *err) {
    memset(S, 0, sizeof *S);
    S->sink = fopen("/dev/null", "w"); // the compiler's warnings are tfc's to print
    if (!S->sink) {
        tf_error_set(err, "cannot open /dev/null");
        return -1;
    }
    TfDiag diag;
    diag_init(&diag, "source", source, len, S->sink);
    S->prog = tf_parse(source, len, &diag);
    if (S->prog && !diag.n_errors) S->ir = check_program(S->prog, &diag);
    if (S->ir && !diag.n_errors && held_as_numbers(S, m, &diag) < 0) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    /* -O's analysis: the value sets are the program's meaning at every
       level; -O0's also refuses a program whose seed-built approximations
       it cannot bound (a Clear), which is tfc -O0's to refuse. */
    if (S->ir && !diag.n_errors && values_analyze(S->ir, 1, &diag) < 0) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    if (!S->ir || diag.n_errors) {
        tf_error_set(err, "the file's source does not compile (%d errors): tfc says where",
                     diag.n_errors);
        return -1;
    }
    TfIr *ir = S->ir;
    S->every_position = ir->every_position;
    S->ops = calloc((size_t)ir->n_ops + 1, sizeof *S->ops);
    S->deps = calloc((size_t)ir->n_regs, sizeof *S->deps);
    S->writer = malloc((size_t)ir->n_regs * sizeof *S->writer);
    S->base_of = malloc((size_t)ir->n_regs * sizeof *S->base_of);
    S->reads = calloc((size_t)ir->n_ops + 1, sizeof *S->reads);
    if (!S->ops || !S->deps || !S->writer || !S->base_of || !S->reads) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int r = 0; r < ir->n_regs; r++) S->writer[r] = S->base_of[r] = -1;
    if (ir->model) unsupported(S, 0, "a learned model: nothing to prove against");
    if (ir->bos < 0 || ir->indices_reg < 0) unsupported(S, 0, "not proven: no bos and maxlen");
    for (const TfStmt *s = S->prog->stmts; s; s = s->next)
        if (s->kind == TF_STMT_REPEAT) unsupported(S, s->loc.line, "not proven: `repeat`");
    if (S->unsupported[0]) return 0;
    S->b_tokens = add_base(S, TF_IR_REG_TOKENS, -1);
    S->b_indices = add_base(S, ir->indices_reg, -1);
    if (S->b_tokens < 0 || S->b_indices < 0) return S->unsupported[0] ? 0 : -1;
    for (int i = 0; i < ir->n_ops; i++)
        if (add_op(S, &ir->ops[i]) < 0) return -1;
    if (S->unsupported[0]) return 0;
    if (make_deps(S) < 0) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    return 0;
}

void pv_sem_free(PvSem *S) {
    for (int b = 0; b < S->n_base; b++) free(S->base[b].vals);
    for (int i = 0; S->ops && i < S->n_ops; i++) free(S->ops[i].reach);
    free(S->ops);
    free(S->deps);
    free(S->writer);
    free(S->base_of);
    free(S->reads);
    check_free(S->ir);
    if (S->prog) ast_free_program(S->prog);
    if (S->sink) fclose(S->sink);
    memset(S, 0, sizeof *S);
}

void pv_eval_regs(const PvSem *S, const int *assign, TfVal *cur, unsigned char *none) {
    const TfIr *ir = S->ir;
    for (int r = 0; r < ir->n_regs; r++) none[r] = 1;
    for (int b = 0; b < S->n_base; b++) {
        const PvBase *B = &S->base[b];
        if (assign[b] < 0 || B->reg < 0) continue;
        cur[B->reg] = B->vals[assign[b]];
        none[B->reg] = B->has_none && assign[b] == B->n - 1;
    }
    for (int i = 0; i < S->n_ops; i++) {
        const PvOp *o = &S->ops[i];
        if (o->kind != TF_OP_MAP) continue;
        const ExprReads *R = &S->reads[i];
        int ok = 1;
        for (int k = 0; ok && k < R->n; k++)
            if (none[R->regs[k]]) ok = 0;
        ExprEnv E = {.ir = ir, .cur = cur,
                     .true_division = expr_true_division(ir, o->dest)};
        TfVal v;
        if (ok && expr_eval(&E, o->expr, &v) == 0) {
            cur[o->dest] = v;
            none[o->dest] = 0;
        }
    }
}

int pv_select(const PvSem *S, const PvOp *o, const TfVal *kcur, const TfVal *qcur) {
    ExprEnv E = {.ir = S->ir, .kcur = kcur, .qcur = qcur};
    TfVal v;
    int t;
    if (expr_eval(&E, o->expr, &v) < 0 || expr_truthy(&E, o->expr, v, &t) < 0) return -1;
    return t;
}

/* expr_numbered_selection's count_of: the selection of the causal Count
 * that writes reg (a program without seed ops: none rewrites a register). */
static const TfExpr *count_of(const void *ctx, int reg) {
    const PvSem *S = ctx;
    for (int i = 0; i < S->ir->n_ops; i++)
        if (S->ir->ops[i].plan && S->ir->ops[i].plan->form == TF_PLAN_SEED) return NULL;
    int w = S->writer[reg];
    const PvOp *c = w >= 0 ? &S->ops[w] : NULL;
    return c && c->kind == TF_OP_COUNT_MATCHES && c->causal ? c->expr : NULL;
}

int pv_numbered_selection(const PvSem *S, const PvOp *o) {
    return o->kind == TF_OP_AGGREGATE && o->expr &&
           expr_numbered_selection(S->ir, o->expr, count_of, S);
}

/* The base variables of d, lowest first: each loop below visits only them. */
static int next_base(PvDeps *d) {
    int b = __builtin_ctzll(*d);
    *d &= *d - 1;
    return b;
}

long pv_deps_size(const PvSem *S, PvDeps d, long limit) {
    long n = 1;
    while (d) {
        n *= S->base[next_base(&d)].n;
        if (n > limit) return -1;
    }
    return n;
}

void pv_deps_decode(const PvSem *S, PvDeps d, long idx, int *assign) {
    while (d) {
        int b = next_base(&d);
        long r = S->base[b].n;
        assign[b] = (int)(idx % r);
        idx /= r;
    }
}

long pv_deps_index(const PvSem *S, PvDeps d, const int *assign) {
    long idx = 0, mul = 1;
    while (d) {
        int b = next_base(&d);
        idx += mul * assign[b];
        mul *= S->base[b].n;
    }
    return idx;
}

void pv_base_label(const PvSem *S, int b, int i, char *buf, size_t n) {
    const PvBase *B = &S->base[b];
    if (B->has_none && i == B->n - 1) snprintf(buf, n, "none");
    else val_label(S->ir, B->vals[i], buf, n);
}

void pv_base_name(const PvSem *S, int b, char *buf, size_t n) {
    const PvBase *B = &S->base[b];
    if (B->reg >= 0) snprintf(buf, n, "%s", S->ir->regs[B->reg].name);
    else snprintf(buf, n, "count(%s)", S->ir->regs[S->ops[B->op].dest].name);
}

int pv_op_at_line(const PvSem *S, int line) {
    for (int i = 0; i < S->n_ops; i++)
        if (S->ops[i].kind != TF_OP_MAP && S->ops[i].stmt->loc.line == line) return i;
    return -1;
}
