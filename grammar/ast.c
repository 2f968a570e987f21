/* ast.c: syntax tree nodes: construction, freeing, and a readable dump. */
#define _POSIX_C_SOURCE 200809L
#include "ast.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const tf_stmt_kind_names[] = {
    "vocab", "period", "decl", "op", "repeat", "output", "generate", "model", "bos", "maxlen"};
static_assert(sizeof tf_stmt_kind_names / sizeof *tf_stmt_kind_names == TF_STMT_KIND_COUNT,
              "one name per statement kind");
TfStmt *ast_new_stmt(TfStmtKind kind, TfLoc loc) {
    TfStmt *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->kind = kind;
    s->loc = loc;
    s->ch = -1;
    return s;
}

void ast_free_expr(TfExpr *e) {
    if (!e) return;
    free(e->name.text);
    ast_free_expr(e->a);
    ast_free_expr(e->b);
    ast_free_expr(e->c);
    for (int i = 0; i < e->n_args; i++) ast_free_expr(e->args[i]);
    free(e->args);
    for (int i = 0; i < e->n_inputs; i++) free(e->inputs[i].text);
    free(e->inputs);
    for (int i = 0; i < e->n_entries; i++) {
        for (int k = 0; k < e->entries[i].n_keys; k++) ast_free_expr(e->entries[i].keys[k]);
        free(e->entries[i].keys);
        ast_free_expr(e->entries[i].value);
    }
    free(e->entries);
    free(e);
}

void ast_free_setting(TfSetting *st) {
    free(st->key.text);
    for (int i = 0; i < st->n_values; i++) free(st->values[i].text);
    free(st->values);
}

void ast_free_stmts(TfStmt *s) {
    while (s) {
        TfStmt *next = s->next;
        free(s->vocab_codes);
        free(s->vocab_locs);
        for (int i = 0; i < s->n_names; i++) free(s->names[i].text);
        free(s->names);
        free(s->label.text);
        free(s->op.text);
        for (int i = 0; i < s->n_args; i++) {
            free(s->args[i].name.text);
            ast_free_expr(s->args[i].expr);
        }
        free(s->args);
        free(s->dest.text);
        ast_free_stmts(s->body);
        for (int i = 0; i < s->n_settings; i++) ast_free_setting(&s->settings[i]);
        free(s->settings);
        free(s);
        s = next;
    }
}

void ast_free_program(TfProgram *p) {
    if (!p) return;
    ast_free_stmts(p->stmts);
    for (int i = 0; i < p->n_words; i++) free(p->words[i]);
    free(p->words);
    free(p);
}

int ast_token_code(TfProgram *p, const char *bytes, int len) {
    if (len == 1) return (unsigned char)bytes[0];
    for (int i = 0; i < p->n_words; i++) // len 0: the empty string, a word too
        if (strlen(p->words[i]) == (size_t)len && memcmp(p->words[i], bytes, (size_t)len) == 0)
            return TF_TOKEN_WORD + i;
    if ((p->n_words & (p->n_words - 1)) == 0) { /* 0, 1, 2, 4...: grow */
        char **w = realloc(p->words, (size_t)(p->n_words ? 2 * p->n_words : 1) * sizeof *w);
        if (!w) return -1;
        p->words = w;
    }
    char *t = malloc((size_t)len + 1);
    if (!t) return -1;
    memcpy(t, bytes, (size_t)len);
    t[len] = '\0';
    p->words[p->n_words] = t;
    return TF_TOKEN_WORD + p->n_words++;
}

const char *ast_token_text(const char *const *words, int code, int quote, char *buf) {
    if (code >= TF_TOKEN_WORD) return words[code - TF_TOKEN_WORD];
    return ast_char_text(code, quote, buf);
}

const char *ast_char_text(int c, int quote, char *buf) {
    switch (c) {
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    case '\0': return "\\0";
    case '\\': return "\\\\";
    default:
        if (c == quote)
            snprintf(buf, 8, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            snprintf(buf, 8, "\\x%02x", c & 0xff);
        else
            snprintf(buf, 8, "%c", c);
        return buf;
    }
}

static void dump_char(FILE *f, int c, char quote) {
    char buf[8];
    fputs(ast_char_text(c, quote, buf), f);
}

static const char *op_text(int op) {
    static char one[2];
    switch (op) {
    case TF_EX_EQ: return "==";
    case TF_EX_NE: return "!=";
    case TF_EX_LE: return "<=";
    case TF_EX_GE: return ">=";
    case TF_EX_AND: return "and";
    case TF_EX_OR: return "or";
    case TF_EX_NOT: return "not";
    case TF_EX_NEG: return "-";
    case TF_EX_POW: return "**";
    case TF_EX_IN: return "in";
    case TF_EX_NOT_IN: return "not in";
    default: one[0] = (char)op; one[1] = '\0'; return one;
    }
}

/* A token literal: 'a', or a word as "the" (W: the program's words). */
static void print_char_literal(FILE *f, const char *const *W, int c) {
    if (c >= TF_TOKEN_WORD) {
        fprintf(f, "\"%s\"", W ? W[c - TF_TOKEN_WORD] : "?");
        return;
    }
    fputc('\'', f);
    dump_char(f, c, '\'');
    fputc('\'', f);
}

void ast_print_expr(FILE *f, const char *const *W, const TfExpr *e) {
    if (!e) {
        fputs("?", f);
        return;
    }
    switch (e->kind) {
    case TF_EXPR_INT: fprintf(f, e->op == '+' ? "+%ld" : "%ld", e->ival); break; // as signed
    case TF_EXPR_REAL: fprintf(f, "%g", e->real); break;
    case TF_EXPR_CHAR: print_char_literal(f, W, e->ch); break;
    case TF_EXPR_TRUE: fputs("true", f); break;
    case TF_EXPR_NAME: fputs(e->name.text, f); break;
    case TF_EXPR_FIELD: fprintf(f, "%c.%s", e->side, e->name.text); break;
    case TF_EXPR_UNARY:
        fprintf(f, "(%s%s", op_text(e->op), e->op == TF_EX_NOT ? " " : "");
        ast_print_expr(f, W, e->a);
        fputc(')', f);
        break;
    case TF_EXPR_BINARY:
        fputc('(', f);
        ast_print_expr(f, W, e->a);
        fprintf(f, " %s ", op_text(e->op));
        ast_print_expr(f, W, e->b);
        fputc(')', f);
        break;
    case TF_EXPR_COND:
        fputc('(', f);
        ast_print_expr(f, W, e->a);
        fputs(" ? ", f);
        ast_print_expr(f, W, e->b);
        fputs(" : ", f);
        ast_print_expr(f, W, e->c);
        fputc(')', f);
        break;
    case TF_EXPR_CALL:
        fprintf(f, "%s(", e->name.text);
        for (int i = 0; i < e->n_args; i++) {
            if (i) fputs(", ", f);
            ast_print_expr(f, W, e->args[i]);
        }
        fputc(')', f);
        break;
    case TF_EXPR_TABLE:
        fputc('[', f);
        for (int i = 0; i < e->n_inputs; i++) fprintf(f, "%s%s", i ? ", " : "", e->inputs[i].text);
        fputs(":", f);
        for (int i = 0; i < e->n_entries; i++) {
            const TfTableEntry *t = &e->entries[i];
            fputs(i ? ", " : " ", f);
            if (t->n_keys == 0) fputs("_", f);
            if (t->n_keys > 1) fputc('(', f);
            for (int k = 0; k < t->n_keys; k++) {
                if (k) fputs(", ", f);
                ast_print_expr(f, W, t->keys[k]);
            }
            if (t->n_keys > 1) fputc(')', f);
            fputs(" => ", f);
            ast_print_expr(f, W, t->value);
        }
        fputc(']', f);
        break;
    case TF_EXPR_INDEX:
        ast_print_expr(f, W, e->a);
        fputc('[', f);
        ast_print_expr(f, W, e->b);
        fputc(']', f);
        break;
    case TF_EXPR_SLICE:
        ast_print_expr(f, W, e->a);
        fputc('[', f);
        for (int i = 0; i < 3; i++) {
            if (i) fputc(':', f);
            if (e->args[i]) ast_print_expr(f, W, e->args[i]);
        }
        fputc(']', f);
        break;
    case TF_EXPR_METHOD:
        ast_print_expr(f, W, e->a);
        fprintf(f, ".%s(", e->name.text);
        for (int i = 0; i < e->n_args; i++) {
            if (i) fputs(", ", f);
            ast_print_expr(f, W, e->args[i]);
        }
        fputc(')', f);
        break;
    default: fputs("?", f);
    }
}

void ast_print_arg(FILE *f, const char *const *W, const TfArg *a) {
    const TfExpr *e = a->expr;
    if (a->name.text) fprintf(f, "%s: ", a->name.text);
    if (e && e->kind == TF_EXPR_BINARY) {
        ast_print_expr(f, W, e->a);
        fprintf(f, " %s ", op_text(e->op));
        ast_print_expr(f, W, e->b);
    } else {
        ast_print_expr(f, W, e);
    }
}

static const char *const decl_names[] = {"position", "token", "scalar", "cat", "num"};
static_assert(sizeof decl_names / sizeof *decl_names == TF_DECL_KIND_COUNT, "one name per kind");

static void dump_stmts(FILE *f, const char *const *W, const TfStmt *s, int depth) {
    for (; s; s = s->next) {
        fprintf(f, "%*s", 2 * depth, "");
        switch (s->kind) {
        case TF_STMT_VOCAB:
        {
            int n_in = s->vocab_len - s->vocab_n_out;
            if (s->vocab_list) {
                fputs("vocab [", f);
                for (int i = 0; i < n_in; i++) {
                    char buf[8];
                    fprintf(f, "%s\"%s\"", i ? ", " : "",
                            ast_token_text(W, s->vocab_codes[i], '"', buf));
                }
                fputs("]", f);
            } else {
                fputs("vocab \"", f);
                for (int i = 0; i < n_in; i++) dump_char(f, s->vocab_codes[i], '"');
                fputs("\"", f);
            }
            for (int i = n_in; i < s->vocab_len; i++) {
                char buf[8];
                fprintf(f, "%s\"%s\"", i > n_in ? ", " : " output [",
                        ast_token_text(W, s->vocab_codes[i], '"', buf));
            }
            fputs(s->vocab_n_out ? "]\n" : "\n", f);
            break;
        }
        case TF_STMT_PERIOD: fprintf(f, "period %ld\n", s->value); break;
        case TF_STMT_GENERATE:
            fprintf(f, "generate %ld", s->value);
            if (s->ch >= 0) {
                fputs(" until ", f);
                print_char_literal(f, W, s->ch);
            }
            fputc('\n', f);
            break;
        case TF_STMT_OUTPUT:
            fprintf(f, "output %s%s\n", s->dest.text, s->every_position ? " at every position" : "");
            break;
        case TF_STMT_MAXLEN: fprintf(f, "maxlen %ld\n", s->value); break;
        case TF_STMT_BOS:
            fputs("bos ", f);
            print_char_literal(f, W, s->ch);
            fputc('\n', f);
            break;
        case TF_STMT_DECL:
            fprintf(f, "decl %s", decl_names[s->decl_kind]);
            for (int i = 0; i < s->n_names; i++) fprintf(f, "%s%s", i ? ", " : " ", s->names[i].text);
            fputc('\n', f);
            break;
        case TF_STMT_OP:
            fputs("op ", f);
            if (s->label.text) fprintf(f, "label=%s ", s->label.text);
            fprintf(f, "%s(", s->op.text);
            for (int i = 0; i < s->n_args; i++) {
                if (i) fputs(", ", f);
                ast_print_arg(f, W, &s->args[i]);
            }
            fputc(')', f);
            if (s->dest.text) fprintf(f, " -> %s", s->dest.text);
            fputc('\n', f);
            break;
        case TF_STMT_REPEAT:
            fprintf(f, "repeat %ld {\n", s->value);
            dump_stmts(f, W, s->body, depth + 1);
            fprintf(f, "%*s}\n", 2 * depth, "");
            break;
        case TF_STMT_MODEL:
            fputs("model {\n", f);
            for (int i = 0; i < s->n_settings; i++) {
                const TfSetting *st = &s->settings[i];
                fprintf(f, "%*s%s", 2 * depth + 2, "", st->key.text);
                for (int j = 0; j < st->n_values; j++) {
                    const TfValue *v = &st->values[j];
                    fputs(j ? ", " : " ", f);
                    if (v->kind == TF_VALUE_NAME) fputs(v->text, f);
                    else if (v->kind == TF_VALUE_INT) fprintf(f, "%ld", v->ival);
                    else if (v->kind == TF_VALUE_NUMBER) fprintf(f, "%g", v->number);
                    else {
                        fputc('"', f);
                        for (const char *c = v->text; *c; c++) dump_char(f, (unsigned char)*c, '"');
                        fputc('"', f);
                    }
                }
                fputc('\n', f);
            }
            fprintf(f, "%*s}\n", 2 * depth, "");
            break;
        default: fputs("?\n", f);
        }
    }
}

void ast_print(FILE *f, const TfProgram *p) {
    dump_stmts(f, (const char *const *)p->words, p->stmts, 0);
}

void ast_dump(const TfProgram *p, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    FILE *f = open_memstream(out, len);
    if (!f) return;
    ast_print(f, p);
    fclose(f);
}
