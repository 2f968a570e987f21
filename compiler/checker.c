/* checker.c: names, kinds and op signatures; `repeat` unrolling.
 *
 * Two passes over the tree. The first collects the program's declarations
 * (vocab, period, registers, output, generate) wherever they stand; the
 * second checks each op call once and unrolls repeat blocks by copying the
 * checked ops, so an error in a repeated body is reported once.
 */
#include "checker.h"
#include "hash.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "values.h"

typedef struct Checker {
    TfDiag *diag;
    TfIr *ir;
    const TfStmt *vocab_stmt, *period_stmt, *output_stmt, *generate_stmt, *model_stmt;
    const TfStmt *bos_stmt, *maxlen_stmt;
    int have_vocab;
    int too_many_layers;
} Checker;

static const char *kind_name(TfRegKind k) { return tf_reg_kind_names[k]; }

/* "a token register", "a position or scalar register" */
static void kinds_text(unsigned kinds, char *buf, size_t n) {
    if (kinds == TF_KINDS_ANY) {
        snprintf(buf, n, "a register");
        return;
    }
    buf[0] = '\0';
    int first = 1;
    for (int k = 0; k < TF_REG_KIND_COUNT; k++) {
        if (!(kinds & (1u << k))) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", first ? "a " : " or ", tf_reg_kind_names[k]);
        first = 0;
    }
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, " register");
}

static const char *arg_kind_text(TfArgKind k) {
    switch (k) {
    case TF_ARG_NAME: return "a register name";
    case TF_ARG_CHAR: return "a token literal";
    case TF_ARG_INT: return "an integer";
    case TF_ARG_OFFSET: return "a register with an offset";
    case TF_ARG_STEP: return "a register with a step";
    case TF_ARG_EXPR: return "an expression";
    case TF_ARG_NAMED: return "a named argument";
    default: return "an argument";
    }
}

/* A literal integer as written, sign included (`-1`, `+2`, `3`). */
static int is_int_literal(const TfExpr *e) { return e->kind == TF_EXPR_INT; }

TfArgShape check_arg_shape(const TfArg *a) {
    TfArgShape sh = {TF_ARG_EXPR, NULL, 0, 0, a->loc};
    const TfExpr *e = a->expr;
    if (a->name.text) {
        sh.name = &a->name;
        sh.kind = TF_ARG_NAMED;
        if (is_int_literal(e)) {
            sh.kind = TF_ARG_STEP;
            sh.value = e->ival;
            sh.value_loc = e->loc;
        }
    } else if (e->kind == TF_EXPR_NAME) {
        sh.kind = TF_ARG_NAME;
        sh.name = &e->name;
    } else if (e->kind == TF_EXPR_CHAR) {
        sh.kind = TF_ARG_CHAR;
        sh.ch = e->ch;
    } else if (is_int_literal(e)) {
        sh.kind = TF_ARG_INT;
        sh.value = e->ival;
        sh.value_loc = e->loc;
    } else if (e->kind == TF_EXPR_BINARY && (e->op == '+' || e->op == '-') &&
               e->a->kind == TF_EXPR_NAME && is_int_literal(e->b) && !e->b->op) {
        // `reg + n`, `reg - n`: the offset's location starts at its sign
        sh.kind = TF_ARG_OFFSET;
        sh.name = &e->a->name;
        sh.value = e->op == '-' ? -e->b->ival : e->b->ival;
        sh.value_loc = e->b->loc;
        if (e->op == '-')
            sh.value_loc.col =
                e->a->loc.end_col + 1 + (e->b->loc.col - e->a->loc.end_col - 1 > 1 ? 1 : 0);
    }
    return sh;
}

static uint64_t name_hash(const char *s) { return hash_bytes(HASH_INIT, s, strlen(s)); }

int check_find_reg(const TfIr *ir, const char *name) {
    if (!ir->reg_hash) return -1;
    size_t mask = (size_t)ir->reg_hash_cap - 1;
    for (size_t i = (size_t)name_hash(name) & mask;; i = (i + 1) & mask) {
        int r = ir->reg_hash[i];
        if (r < 0) return -1;
        if (strcmp(ir->regs[r].name, name) == 0) return r;
    }
}

static void hash_insert(TfIr *ir, int r) {
    size_t mask = (size_t)ir->reg_hash_cap - 1;
    size_t i = (size_t)name_hash(ir->regs[r].name) & mask;
    while (ir->reg_hash[i] >= 0) i = (i + 1) & mask;
    ir->reg_hash[i] = r;
}

int check_add_reg(TfIr *ir, const char *name, TfRegKind kind, TfLoc loc) {
    if (ir->n_regs == ir->regs_cap) { // doubling: linear in the number of registers
        int cap = ir->regs_cap ? 2 * ir->regs_cap : 16;
        TfIrReg *regs = realloc(ir->regs, (size_t)cap * sizeof *regs);
        if (!regs) return -1;
        ir->regs = regs;
        ir->regs_cap = cap;
    }
    TfIrReg *regs = ir->regs;
    if (2 * (ir->n_regs + 1) > ir->reg_hash_cap) { // at most half full
        int cap = ir->reg_hash_cap ? 2 * ir->reg_hash_cap : 64;
        int *h = malloc((size_t)cap * sizeof *h);
        if (!h) return -1;
        for (int i = 0; i < cap; i++) h[i] = -1;
        free(ir->reg_hash);
        ir->reg_hash = h;
        ir->reg_hash_cap = cap;
        for (int r = 0; r < ir->n_regs; r++) hash_insert(ir, r);
    }
    regs[ir->n_regs] = (TfIrReg){.name = name, .kind = kind, .loc = loc};
    hash_insert(ir, ir->n_regs);
    return ir->n_regs++;
}

static int find_reg(const TfIr *ir, const char *name) { return check_find_reg(ir, name); }

static int find_tok(const TfIr *ir, int c) {
    for (int i = 0; i < ir->n_vocab; i++)
        if (ir->vocab[i] == c) return i;
    return -1;
}

const char *check_token_name(const TfIr *ir, int i, char *buf) {
    int c = ir->vocab[i];
    if (c >= TF_TOKEN_WORD) return ir->words->text[c - TF_TOKEN_WORD];
    buf[0] = (char)c;
    buf[1] = '\0';
    return buf;
}

/* The hint for a character the vocabulary lacks: the same letter in the
 * other case when the vocabulary has it, else the vocabulary's tokens
 * (the first 16). */
static void unknown_char_hint(TfDiag *diag, const TfIr *ir, int code) {
    int other = isupper(code) ? tolower(code) : islower(code) ? toupper(code) : -1;
    char buf[8], list[160] = "";
    size_t len = 0;
    if (other >= 0 && find_tok(ir, other) >= 0) {
        diag_hint(diag, "did you mean '%s'?", ast_token_text(ir->words->text, other, '\'', buf));
        return;
    }
    for (int i = 0; i < ir->n_vocab && i < 16 && len < sizeof list - 16; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s'%s'", i ? ", " : "",
                                ast_token_text(ir->words->text, ir->vocab[i], '\'', buf));
    diag_hint(diag, "did you mean one of the vocabulary's tokens: %s%s?", list,
              ir->n_vocab > 16 ? ", ..." : "");
}

void check_unknown_token(TfDiag *diag, const TfIr *ir, TfLoc loc, int code, int warning) {
    char buf[8];
    const char *text = ast_token_text(ir->words->text, code, '\'', buf);
    if (warning)
        diag_warning(diag, loc, "token '%s' is not in the vocabulary, so 'tokens' never equals it",
                     text);
    else
        diag_error(diag, loc, "token '%s' is not in the vocabulary", text);
    if (!ir->named) {
        unknown_char_hint(diag, ir, code);
        return;
    }
    int best = -1, best_d = 3;
    for (int i = 0; i < ir->n_vocab; i++) {
        char one[2];
        int d = tf_edit_distance(text, strlen(text), check_token_name(ir, i, one));
        if (d < best_d) {
            best_d = d;
            best = i;
        }
    }
    if (best >= 0) {
        char one[2];
        diag_hint(diag, "did you mean '%s'?", check_token_name(ir, best, one));
    }
}

static void unknown_token(Checker *ck, TfLoc loc, int code) {
    check_unknown_token(ck->diag, ck->ir, loc, code, 0);
}

/* A token only outputs print where a prompt's token is needed. */
static void output_only_token(Checker *ck, TfLoc loc, int code, const char *what) {
    char buf[8];
    diag_error(ck->diag, loc, "%s must be a token a prompt can hold, not the output-only token '%s'",
               what, ast_token_text(ck->ir->words->text, code, '\'', buf));
}

void check_hint_reg(TfDiag *diag, const TfIr *ir, const char *name) {
    int best = -1, best_d = 3;
    for (int i = 0; i < ir->n_regs; i++) {
        int d = tf_edit_distance(name, strlen(name), ir->regs[i].name);
        if (d < best_d) {
            best_d = d;
            best = i;
        }
    }
    if (best >= 0) diag_hint(diag, "did you mean '%s'?", ir->regs[best].name);
}

static void hint_similar_reg(Checker *ck, const char *name) { check_hint_reg(ck->diag, ck->ir, name); }

static void note_declared(Checker *ck, int reg) {
    const TfIrReg *r = &ck->ir->regs[reg];
    if (r->loc.line > 0)
        diag_note(ck->diag, r->loc, "'%s' is declared here as a %s register", r->name,
                  kind_name(r->kind));
    else
        diag_hint(ck->diag, "'%s' is a built-in %s register", r->name, kind_name(r->kind));
}

/* Resolves a register name and checks its kind; -1 after reporting. */
static int resolve_reg(Checker *ck, const TfName *name, unsigned kinds, const char *op,
                       const char *role) {
    int reg = find_reg(ck->ir, name->text);
    if (reg < 0) {
        diag_error(ck->diag, name->loc, "unknown register '%s'", name->text);
        hint_similar_reg(ck, name->text);
        return -1;
    }
    if (!(kinds & (1u << ck->ir->regs[reg].kind))) {
        char want[64];
        kinds_text(kinds, want, sizeof want);
        diag_error(ck->diag, name->loc, "'%s' is a %s register, but %s needs %s for %s",
                   name->text, kind_name(ck->ir->regs[reg].kind), op, want, role);
        note_declared(ck, reg);
        return -1;
    }
    return reg;
}

/* ---- pass 1: declarations ------------------------------------------------ */

static int add_reg(Checker *ck, const char *name, TfRegKind kind, TfLoc loc) {
    return check_add_reg(ck->ir, name, kind, loc);
}

/* Records the statement declaring `what` in *slot; 0 (after reporting)
 * when it was declared already. */
static int declare_once(Checker *ck, const TfStmt *s, const TfStmt **slot, const char *what) {
    if (*slot) {
        diag_error(ck->diag, s->loc, "%s is declared twice", what);
        diag_note(ck->diag, (*slot)->loc, "first declared here");
        return 0;
    }
    *slot = s;
    return 1;
}

static void check_vocab(Checker *ck, const TfStmt *s) {
    TfIr *ir = ck->ir;
    if (!declare_once(ck, s, &ck->vocab_stmt, "the vocabulary")) return;
    if (s->vocab_len == 0) {
        diag_error(ck->diag, s->loc, "the vocabulary is empty");
        return;
    }
    if (s->vocab_len > 256) {
        diag_error(ck->diag, s->vocab_locs[256], "the vocabulary has %d tokens, over the limit of 256",
                   s->vocab_len);
        return;
    }
    for (int i = 0; i < s->vocab_len; i++) ir->named |= s->vocab_codes[i] >= TF_TOKEN_WORD;
    ir->list_vocab = s->vocab_list;
    int ok = 1, at[256]; /* the list entry of ir->vocab[j] */
    int n_in = s->vocab_len - s->vocab_n_out;
    if (n_in == 0) {
        diag_error(ck->diag, s->loc, "the vocabulary has no token a prompt can hold");
        return;
    }
    for (int i = 0; i < s->vocab_len; i++) {
        int c = s->vocab_codes[i];
        if (i == n_in) ir->n_input = ir->n_vocab;
        char buf[8];
        const char *text = ast_token_text(ir->words->text, c, '\'', buf);
        if (c == '\0') {
            diag_error(ck->diag, s->vocab_locs[i], "the vocabulary cannot hold the NUL character");
            ok = 0;
            continue;
        }
        int prev = find_tok(ir, c);
        if (prev >= 0) {
            diag_error(ck->diag, s->vocab_locs[i], "token '%s' appears twice in the vocabulary",
                       text);
            diag_note(ck->diag, s->vocab_locs[at[prev]], "first listed here");
            ok = 0;
            continue;
        }
        // A vocabulary of words is typed as words apart: no blank or control
        // character in a token, and none too long to print.
        // An output-only token is never typed: it may hold a space ("not
        // spam"), printed as it is.
        int bad = 0;
        if (ir->named) {
            const char *t = c >= TF_TOKEN_WORD ? ir->words->text[c - TF_TOKEN_WORD] : (char[]){(char)c, 0};
            for (; *t; t++)
                bad |= ((unsigned char)*t <= 0x20 && (i < n_in || *t != ' ')) || *t == 0x7f;
        }
        if (bad && i >= n_in) {
            diag_error(ck->diag, s->vocab_locs[i], "an output-only token holds a control character");
            ok = 0;
        } else if (bad) {
            diag_error(ck->diag, s->vocab_locs[i],
                       "token '%s' holds a space or a control character, which a prompt of "
                       "words cannot hold",
                       text);
            diag_hint(ck->diag, "a vocabulary with tokens of several characters is typed as "
                                "words separated by spaces; a token only outputs print may hold "
                                "them: `vocab [...] output [\"%s\"]`",
                      text);
            ok = 0;
        }
        at[ir->n_vocab] = i;
        ir->vocab[ir->n_vocab++] = c; /* kept so that a repeat is found */
    }
    if (n_in == s->vocab_len) ir->n_input = ir->n_vocab;
    ck->have_vocab = ok;
}

static void check_decl(Checker *ck, const TfStmt *s) {
    static const TfRegKind kinds[] = {[TF_DECL_POSITION] = TF_REG_POSITION,
                                      [TF_DECL_TOKEN] = TF_REG_TOKEN,
                                      [TF_DECL_SCALAR] = TF_REG_SCALAR,
                                      [TF_DECL_CAT] = TF_REG_CATEGORICAL,
                                      [TF_DECL_NUM] = TF_REG_SCALAR};
    for (int i = 0; i < s->n_names; i++) {
        const TfName *n = &s->names[i];
        int prev = find_reg(ck->ir, n->text);
        if (prev >= 0 && (prev <= TF_IR_REG_POS || prev == ck->ir->indices_reg)) {
            diag_error(ck->diag, n->loc, "'%s' is a built-in register and cannot be declared",
                       n->text);
            continue;
        }
        if (prev >= 0) {
            diag_error(ck->diag, n->loc, "register '%s' is declared twice", n->text);
            diag_note(ck->diag, ck->ir->regs[prev].loc, "first declared here");
            continue;
        }
        add_reg(ck, n->text, kinds[s->decl_kind], n->loc);
    }
}

static void collect_declarations(Checker *ck, const TfProgram *prog) {
    for (const TfStmt *s = prog->stmts; s; s = s->next) {
        switch (s->kind) {
        case TF_STMT_VOCAB: check_vocab(ck, s); break;
        case TF_STMT_PERIOD:
            if (!declare_once(ck, s, &ck->period_stmt, "the period")) break;
            if (s->value < 2 || s->value > TF_MAX_PERIOD)
                diag_error(ck->diag, s->value_loc, "period must be between 2 and %d, not %ld",
                           TF_MAX_PERIOD, s->value);
            else
                ck->ir->period = (int)s->value;
            break;
        case TF_STMT_DECL: check_decl(ck, s); break;
        case TF_STMT_OUTPUT:
            declare_once(ck, s, &ck->output_stmt, "the output");
            break;
        case TF_STMT_GENERATE:
            declare_once(ck, s, &ck->generate_stmt, "the generation count");
            break;
        case TF_STMT_MODEL: declare_once(ck, s, &ck->model_stmt, "the model"); break;
        case TF_STMT_BOS:
            if (!declare_once(ck, s, &ck->bos_stmt, "the BOS token")) break;
            if (ck->have_vocab) {
                ck->ir->bos = find_tok(ck->ir, s->ch);
                if (ck->ir->bos < 0) unknown_token(ck, s->ch_loc, s->ch);
                else if (ck->ir->bos >= ck->ir->n_input)
                    output_only_token(ck, s->ch_loc, s->ch, "the BOS");
            }
            break;
        case TF_STMT_MAXLEN:
            if (!declare_once(ck, s, &ck->maxlen_stmt, "the maximum length")) break;
            if (s->value < 2 || s->value > TF_MAX_PERIOD)
                diag_error(ck->diag, s->value_loc, "maxlen must be between 2 and %d, not %ld",
                           TF_MAX_PERIOD, s->value);
            else
                ck->ir->maxlen = (int)s->value;
            break;
        default: break;
        }
    }
    if (ck->maxlen_stmt) ck->ir->size_loc = ck->maxlen_stmt->value_loc;
    else if (ck->period_stmt) ck->ir->size_loc = ck->period_stmt->value_loc;
    if (ck->maxlen_stmt && ck->ir->maxlen > 0) {
        if (!ck->period_stmt && ck->ir->period < ck->ir->maxlen) ck->ir->period = ck->ir->maxlen;
        if (ck->ir->period < ck->ir->maxlen)
            diag_error(ck->diag, ck->maxlen_stmt->value_loc,
                       "maxlen %d is longer than the period %d: positions would repeat",
                       ck->ir->maxlen, ck->ir->period);
    }
    if (!ck->vocab_stmt)
        diag_file_error(ck->diag, "the program declares no vocabulary (add `vocab \"...\";`)");
}

/* A learned model (a `model { ... }` block, compiler/learned.c checks its
 * settings) has no registers, ops or output register; its generate count is
 * checked against its max_len there. */
static void check_learned(Checker *ck, const TfProgram *prog) {
    TfIr *ir = ck->ir;
    ir->model = ck->model_stmt;
    if (ir->named) {
        diag_error(ck->diag, ck->vocab_stmt->loc,
                   "a learned model's vocabulary is of characters: its training data is text");
        diag_note(ck->diag, ck->model_stmt->loc, "the model block is here");
    } else if (ir->n_input < ir->n_vocab) {
        diag_error(ck->diag, ck->vocab_stmt->loc,
                   "a learned model has no output-only tokens: what it generates it reads back");
        diag_note(ck->diag, ck->model_stmt->loc, "the model block is here");
    }
    if (ck->output_stmt) {
        diag_error(ck->diag, ck->output_stmt->loc,
                   "a learned model has no output register; its output is declared in the model "
                   "block (`predict`)");
        diag_note(ck->diag, ck->model_stmt->loc, "the model block is here");
    }
    for (const TfStmt *s = prog->stmts; s; s = s->next) {
        if (s->kind == TF_STMT_DECL || s->kind == TF_STMT_OP || s->kind == TF_STMT_REPEAT) {
            diag_error(ck->diag, s->loc, "a program with a model block cannot also have %s",
                       s->kind == TF_STMT_DECL ? "registers" : "ops");
            diag_note(ck->diag, ck->model_stmt->loc, "the model block is here");
            break;
        }
    }
    if (ck->generate_stmt) ir->generate = (int)ck->generate_stmt->value;
}

static void check_output_and_generate(Checker *ck) {
    TfIr *ir = ck->ir;
    if (!ck->output_stmt) {
        diag_file_error(ck->diag, "the program has no output (add `output REGISTER;` naming the "
                                  "token register the next token is read from)");
    } else {
        ir->every_position = ck->output_stmt->every_position;
        ir->output_loc = ck->output_stmt->dest.loc;
        ir->output_reg = resolve_reg(ck, &ck->output_stmt->dest,
                                     TF_KINDS_TOKEN | TF_KINDS_CATEGORICAL |
                                         (ir->every_position ? TF_KINDS_SCALAR : 0),
                                     "output",
                                     ir->every_position ? "the value read at every position"
                                                        : "the next token");
        int r = find_reg(ir, ck->output_stmt->dest.text);
        if (ir->output_reg < 0 && r >= 0 && ir->regs[r].kind == TF_REG_SCALAR)
            diag_hint(ck->diag, "a number is printed at every position: `output %s at every "
                                "position;`",
                      ir->regs[r].name);
    }
    int max_len = ir->maxlen > 0 ? ir->maxlen : ir->period;
    if (ck->generate_stmt) {
        const TfStmt *g = ck->generate_stmt;
        if (ir->every_position) {
            diag_error(ck->diag, g->loc,
                       "a program read at every position runs one forward pass and generates "
                       "nothing; remove `generate`");
            diag_note(ck->diag, ck->output_stmt->loc, "the output is read at every position here");
        } else if (g->ch >= 0 && g->value == 0) {
            ir->generate = max_len - 1;
        } else if (g->value < 1 || g->value >= max_len) {
            diag_error(ck->diag, g->value_loc,
                       "generate count must be between 1 and %d (the %s less one), not %ld",
                       max_len - 1, ir->maxlen > 0 ? "maxlen" : "period", g->value);
        } else {
            ir->generate = (int)g->value;
        }
        if (g->ch >= 0 && ck->have_vocab) {
            ir->stop_token = find_tok(ir, g->ch);
            if (ir->stop_token < 0) unknown_token(ck, g->ch_loc, g->ch);
        }
    }
    // A generated token is read back as input: output-only tokens belong
    // to programs read at every position.
    if (ck->output_stmt && !ir->every_position && ck->have_vocab && ir->n_input < ir->n_vocab) {
        diag_error(ck->diag, ck->vocab_stmt->loc,
                   "output-only tokens need a program read at every position: a generated "
                   "token is read back as input");
        diag_note(ck->diag, ck->output_stmt->loc, "the output is generated here");
    }
}

/* ---- pass 2: ops ------------------------------------------------------------ */

typedef struct OpList {
    TfIrOp *ops;
    int n, cap;
} OpList;

static int oplist_push(OpList *l, const TfIrOp *op) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        TfIrOp *ops = realloc(l->ops, (size_t)cap * sizeof *ops);
        if (!ops) return -1;
        l->ops = ops;
        l->cap = cap;
    }
    l->ops[l->n++] = *op;
    return 0;
}

/* A seed op's plan: its checked arguments, n of them (filled by the caller). */
static TfOpPlan *seed_plan(Checker *ck, int n, TfSeedArg **args) {
    TfOpPlan *p = arena_alloc(&ck->ir->arena, sizeof *p);
    *args = arena_alloc(&ck->ir->arena, (size_t)(n > 0 ? n : 1) * sizeof **args);
    if (!p || !*args) return NULL;
    p->form = TF_PLAN_SEED;
    p->n_args = n;
    p->args = *args;
    p->dest = -1;
    p->vreg = -1;
    p->default_col = -1;
    return p;
}

/* Checks one argument against its parameter; 0 or -1 after reporting. */
static int check_arg(Checker *ck, const TfOpInfo *info, const TfParam *p, const TfArg *arg,
                     TfSeedArg *out) {
    TfArgShape a = check_arg_shape(arg);
    out->reg = -1;
    out->tok = -1;
    out->value = 0;
    switch (p->kind) {
    case TF_PARAM_TOKEN_LITERAL:
        if (a.kind != TF_ARG_CHAR) {
            diag_error(ck->diag, arg->loc, "%s needs a token literal such as '+' for %s, not %s",
                       info->name, p->role, arg_kind_text(a.kind));
            return -1;
        }
        if (!ck->have_vocab) return -1;
        out->tok = find_tok(ck->ir, a.ch);
        if (out->tok < 0) {
            unknown_token(ck, arg->loc, a.ch);
            return -1;
        }
        return 0;
    case TF_PARAM_REG:
    case TF_PARAM_REG_OFFSET:
    case TF_PARAM_REG_STEP: {
        int ok_kind = (a.kind == TF_ARG_NAME && p->kind != TF_PARAM_REG_STEP) ||
                      (a.kind == TF_ARG_OFFSET && p->kind == TF_PARAM_REG_OFFSET) ||
                      (a.kind == TF_ARG_STEP && p->kind == TF_PARAM_REG_STEP);
        if (!ok_kind) {
            static const char *const want[] = {
                [TF_PARAM_REG] = "a register name",
                [TF_PARAM_REG_OFFSET] = "a register, optionally with an offset (`reg + 1`)",
                [TF_PARAM_REG_STEP] = "a register and a step (`reg: -1`)"};
            diag_error(ck->diag, arg->loc, "%s needs %s for %s, not %s", info->name,
                       want[p->kind], p->role, arg_kind_text(a.kind));
            diag_hint(ck->diag, "usage: %s", info->synopsis);
            return -1;
        }
        out->reg = resolve_reg(ck, a.name, p->reg_kinds, info->name, p->role);
        out->value = a.kind == TF_ARG_NAME ? 0 : a.value;
        if (out->reg >= 0 && ck->ir->period > 0 &&
            (out->value >= ck->ir->period || out->value <= -ck->ir->period)) {
            diag_error(ck->diag, a.value_loc,
                       "%ld is a whole turn or more of the position encoding (period %d)",
                       out->value, ck->ir->period);
            return -1;
        }
        return out->reg >= 0 ? 0 : -1;
    }
    case TF_PARAM_EXPR: break; // general ops: compiler/map.c, compiler/select.c
    }
    return -1;
}

static int check_multiply_digits(Checker *ck, const TfStmt *s) {
    if (!ck->have_vocab) return -1;
    for (int dgt = 0; dgt < 10; dgt++) {
        if (find_tok(ck->ir, '0' + dgt) < 0) {
            diag_error(ck->diag, s->op.loc,
                       "Multiply adds decimal digits, but '%c' is not in the vocabulary", '0' + dgt);
            return -1;
        }
    }
    return 0;
}

/* Checks one op call; on success appends it to out. */
static int check_op(Checker *ck, const TfStmt *s, OpList *out) {
    int op = ops_find(s->op.text);
    if (op < 0) {
        diag_error(ck->diag, s->op.loc, "unknown op '%s'", s->op.text);
        int best = -1, best_d = 4;
        for (int i = 0; i < TF_OP_COUNT; i++) {
            int d = tf_edit_distance(s->op.text, strlen(s->op.text), tf_ops[i].name);
            if (d < best_d) {
                best_d = d;
                best = i;
            }
        }
        if (best >= 0) {
            diag_hint(ck->diag, "did you mean '%s'?", tf_ops[best].name);
        } else {
            char list[512] = "";
            for (int i = 0; i < TF_OP_COUNT; i++) {
                size_t len = strlen(list);
                snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", tf_ops[i].name);
            }
            diag_hint(ck->diag, "the ops are %s", list);
        }
        return -1;
    }
    const TfOpInfo *info = &tf_ops[op];
    if (info->general) {
        // compiler/values.c checks the arguments, in program order.
        if (s->n_args < info->n_params) {
            diag_error(ck->diag, s->op.loc, "%s takes at least %d argument%s, but %d %s given",
                       info->name, info->n_params, info->n_params == 1 ? "" : "s", s->n_args,
                       s->n_args == 1 ? "was" : "were");
            diag_hint(ck->diag, "usage: %s", info->synopsis);
            return -1;
        }
        if (!s->dest.text) {
            diag_error(ck->diag, s->loc, "%s needs a result register", info->name);
            diag_hint(ck->diag, "usage: %s", info->synopsis);
            return -1;
        }
        int dest = resolve_reg(ck, &s->dest, info->dest_kinds, info->name, "its result");
        if (dest < 0) return -1;
        TfIrOp irop = {(TfOpKind)op, s, dest, NULL}; // planned by compiler/values.c
        return oplist_push(out, &irop);
    }
    if (info->variadic ? s->n_args < info->n_params : s->n_args != info->n_params) {
        diag_error(ck->diag, s->op.loc, "%s takes %s%d argument%s, but %d %s given", info->name,
                   info->variadic ? "at least " : "", info->n_params,
                   info->n_params == 1 ? "" : "s", s->n_args, s->n_args == 1 ? "was" : "were");
        diag_hint(ck->diag, "usage: %s", info->synopsis);
        return -1;
    }
    TfSeedArg *args;
    TfOpPlan *plan = seed_plan(ck, s->n_args, &args);
    if (!plan) return -1;
    int ok = 1;
    for (int i = 0; i < s->n_args; i++) {
        const TfParam *p = &info->params[i < info->n_params ? i : info->n_params - 1];
        if (check_arg(ck, info, p, &s->args[i], &args[i]) < 0) ok = 0;
    }
    int dest = -1;
    if (info->dest_kinds == 0 && s->dest.text) {
        diag_error(ck->diag, s->dest.loc, "%s writes no result register; remove '-> %s'",
                   info->name, s->dest.text);
        diag_hint(ck->diag, "usage: %s", info->synopsis);
        ok = 0;
    } else if (info->dest_kinds != 0 && !s->dest.text) {
        diag_error(ck->diag, s->loc, "%s needs a result register", info->name);
        diag_hint(ck->diag, "usage: %s", info->synopsis);
        ok = 0;
    } else if (s->dest.text) {
        dest = resolve_reg(ck, &s->dest, info->dest_kinds, info->name, "its result");
        if (dest < 0) ok = 0;
    }
    if (op == TF_OP_MULTIPLY && check_multiply_digits(ck, s) < 0) ok = 0;
    if (!ok) return -1;
    plan->dest = dest;
    TfIrOp irop = {(TfOpKind)op, s, dest, plan};
    return oplist_push(out, &irop);
}

static void check_block(Checker *ck, const TfStmt *list, OpList *out) {
    for (const TfStmt *s = list; s; s = s->next) {
        if (s->kind == TF_STMT_OP) {
            if (out->n >= TF_MAX_LAYERS) {
                if (!ck->too_many_layers)
                    diag_error(ck->diag, s->loc, "the program has more than %d ops",
                               TF_MAX_LAYERS);
                ck->too_many_layers = 1;
                continue;
            }
            check_op(ck, s, out);
        } else if (s->kind == TF_STMT_REPEAT) {
            OpList body = {0};
            check_block(ck, s->body, &body);
            if (s->value < 1 || s->value > TF_MAX_REPEAT) {
                diag_error(ck->diag, s->value_loc,
                           "repeat count must be between 1 and %d, not %ld", TF_MAX_REPEAT,
                           s->value);
            } else if ((long)out->n + (long)body.n * s->value > TF_MAX_LAYERS) {
                if (!ck->too_many_layers)
                    diag_error(ck->diag, s->loc,
                               "this repeat unrolls the program to more than %d layers",
                               TF_MAX_LAYERS);
                ck->too_many_layers = 1;
            } else {
                for (long r = 0; r < s->value; r++)
                    for (int i = 0; i < body.n; i++) oplist_push(out, &body.ops[i]);
            }
            free(body.ops);
        }
    }
}

/* ---- the word table ---------------------------------------------------------- */

static unsigned word_hash(const char *bytes, int len) {
    unsigned h = 2166136261u; // FNV-1a
    for (int i = 0; i < len; i++) h = (h ^ (unsigned char)bytes[i]) * 16777619u;
    return h;
}

/* Puts word i into the hash (room is there). */
static void word_hash_put(TfWords *W, int i) {
    const char *t = W->text[i];
    unsigned m = (unsigned)W->hash_cap - 1, h = word_hash(t, (int)strlen(t)) & m;
    while (W->hash[h]) h = (h + 1) & m;
    W->hash[h] = i + 1;
}

/* Room for one more word (the array and a hash at most half full); -1 when
 * memory ran out. */
static int word_room(TfWords *W) {
    if (W->n == W->cap) {
        int cap = W->cap ? 2 * W->cap : 16;
        const char **t = realloc(W->text, (size_t)cap * sizeof *t);
        if (!t) return -1;
        W->text = t;
        W->cap = cap;
    }
    if (2 * (W->n + 1) > W->hash_cap) {
        int cap = W->hash_cap ? 2 * W->hash_cap : 32;
        int *h = calloc((size_t)cap, sizeof *h);
        if (!h) return -1;
        free(W->hash);
        W->hash = h;
        W->hash_cap = cap;
        for (int i = 0; i < W->n; i++) word_hash_put(W, i);
    }
    return 0;
}

int check_word(const TfIr *ir, const char *bytes, int len) {
    if (len == 1) return (unsigned char)bytes[0];
    TfWords *W = ir->words;
    if (W->hash_cap) {
        unsigned m = (unsigned)W->hash_cap - 1, h = word_hash(bytes, len) & m;
        for (; W->hash[h]; h = (h + 1) & m) {
            const char *t = W->text[W->hash[h] - 1];
            if (strlen(t) == (size_t)len && memcmp(t, bytes, (size_t)len) == 0)
                return TF_TOKEN_WORD + W->hash[h] - 1;
        }
    }
    if (word_room(W) < 0) return -1;
    char *t = malloc((size_t)len + 1);
    if (!t) return -1;
    if (len) memcpy(t, bytes, (size_t)len);
    t[len] = '\0';
    W->text[W->n] = t;
    word_hash_put(W, W->n);
    return TF_TOKEN_WORD + W->n++;
}

const char *check_code_text(const TfIr *ir, int code, char *buf, int *len) {
    if (code >= TF_TOKEN_WORD) {
        const char *t = ir->words->text[code - TF_TOKEN_WORD];
        *len = (int)strlen(t);
        return t;
    }
    buf[0] = (char)code;
    buf[1] = '\0';
    *len = 1;
    return buf;
}

/* The table starts with the program's words, borrowed; -1 when memory ran out. */
static int words_init(TfIr *ir, const TfProgram *prog) {
    TfWords *W = calloc(1, sizeof *W);
    if (!W) return -1;
    ir->words = W;
    for (int i = 0; i < prog->n_words; i++) {
        if (word_room(W) < 0) return -1;
        W->text[W->n] = prog->words[i];
        word_hash_put(W, W->n++);
    }
    W->n_borrowed = W->n;
    return 0;
}

static void words_free(TfWords *W) {
    if (!W) return;
    for (int i = W->n_borrowed; i < W->n; i++) free((char *)W->text[i]);
    free(W->text);
    free(W->hash);
    free(W);
}

void check_free(TfIr *ir) {
    if (!ir) return;
    words_free(ir->words);
    free(ir->reg_hash);
    arena_free(&ir->arena);
    free(ir->regs);
    free(ir->ops);
    free(ir);
}

TfIr *check_program(const TfProgram *prog, TfDiag *diag) {
    TfIr *ir = calloc(1, sizeof *ir);
    if (!ir) return NULL;
    ir->period = TF_DEFAULT_PERIOD;
    ir->generate = TF_DEFAULT_GENERATE;
    ir->output_reg = -1;
    ir->bos = ir->stop_token = ir->indices_reg = -1;
    if (words_init(ir, prog) < 0) {
        check_free(ir);
        return NULL;
    }
    Checker ck = {.diag = diag, .ir = ir};
    TfLoc none = {0, 0, 0, 0};
    add_reg(&ck, "tokens", TF_REG_TOKEN, none);
    add_reg(&ck, "pos", TF_REG_POSITION, none);
    for (const TfStmt *s = prog->stmts; s; s = s->next)
        if (s->kind == TF_STMT_MAXLEN) ir->indices_reg = TF_IR_REG_INDICES;
    if (ir->indices_reg >= 0) add_reg(&ck, "indices", TF_REG_CATEGORICAL, none);

    int errors_before = diag->n_errors;
    collect_declarations(&ck, prog);
    if (ck.model_stmt) {
        check_learned(&ck, prog);
        if (diag->n_errors > errors_before) {
            check_free(ir);
            return NULL;
        }
        return ir;
    }
    OpList ops = {0};
    check_block(&ck, prog->stmts, &ops);
    ir->ops = ops.ops;
    ir->n_ops = ops.n;
    check_output_and_generate(&ck);
    if (diag->n_errors > errors_before) {
        check_free(ir);
        return NULL;
    }
    return ir;
}
