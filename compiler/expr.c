/* expr.c: values, the expression evaluator, the registers an expression reads. */
#include "expr.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int val_is_num(TfVal v) { return v.kind == TF_VAL_INT || v.kind == TF_VAL_REAL; }

/* Numbers, then strings, then lists. */
static int val_class(TfVal v) { return v.kind == TF_VAL_TOKEN ? 1 : v.kind == TF_VAL_LIST ? 2 : 0; }

int val_cmp(TfVal a, TfVal b) {
    if (val_class(a) != val_class(b)) return val_class(a) - val_class(b);
    return a.x < b.x ? -1 : a.x > b.x ? 1 : 0;
}

static int val_cmp_qsort(const void *a, const void *b) {
    return val_cmp(*(const TfVal *)a, *(const TfVal *)b);
}

static int val_close(TfVal a, TfVal b, double tol) {
    if (val_cmp(a, b) == 0) return 1;
    if (tol <= 0 || !val_is_num(a) || !val_is_num(b)) return 0;
    return fabs(a.x - b.x) <= tol * fmax(1.0, fmax(fabs(a.x), fabs(b.x)));
}

int val_unique(TfVal *v, int n, double tol, double *moved) {
    qsort(v, (size_t)n, sizeof *v, val_cmp_qsort);
    int m = 0;
    double lo = 0, spread = 0; // the smallest number of the current value; the widest value
    for (int i = 0; i < n; i++) {
        if (m > 0 && val_close(v[m - 1], v[i], tol)) {
            if (v[i].kind == TF_VAL_INT) v[m - 1] = v[i]; // an integer names the value best
            spread = fmax(spread, v[i].x - lo);
            continue;
        }
        lo = v[i].x;
        v[m++] = v[i];
    }
    if (moved) *moved = spread;
    return m;
}

void val_label(const TfIr *ir, TfVal v, char *buf, size_t n) {
    char cb[8];
    if (v.kind == TF_VAL_TOKEN)
        snprintf(buf, n, "'%s'", ast_token_text(ir->words->text, (int)v.x, '\'', cb));
    else if (v.kind == TF_VAL_LIST)
        str_label(ir, v, buf, n);
    else if (v.kind == TF_VAL_INT)
        snprintf(buf, n, "%.0f", v.x);
    else
        snprintf(buf, n, "%.9g", v.x);
}


/* ---- expressions -------------------------------------------------------------- */


static int fail(ExprEnv *E, const TfExpr *e, const char *fmt, const char *a) {
    snprintf(E->msg, sizeof E->msg, fmt, a);
    E->where = e->loc;
    return -1;
}

int expr_fail(ExprEnv *E, const TfExpr *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(E->msg, sizeof E->msg, fmt, ap);
    va_end(ap);
    E->where = e->loc;
    return -1;
}

int expr_truthy(ExprEnv *E, const TfExpr *e, TfVal v, int *out) {
    (void)e;
    if (v.kind == TF_VAL_TOKEN || v.kind == TF_VAL_LIST) {
        // As Python: a string or a list is true when it is not empty.
        char b[2];
        int n;
        check_code_text(E->ir, (int)v.x, b, &n);
        *out = n > 0;
        return 0;
    }
    *out = v.x != 0;
    return 0;
}

/* A number as a value; -0 is 0 (the language has one zero: `-x` of a
 * cleared register prints 0, and a table has one row for it). */
TfVal val_num(double x, int integer) {
    TfVal v = {integer ? TF_VAL_INT : TF_VAL_REAL, x == 0 ? 0.0 : x};
    return v;
}


static int eval_pow(ExprEnv *E, const TfExpr *e, TfVal a, TfVal b, TfVal *out);

static int eval_binary(ExprEnv *E, const TfExpr *e, TfVal *out) {
    TfVal a, b;
    if (e->op == TF_EX_AND || e->op == TF_EX_OR) {
        int ta, tb;
        if (expr_eval(E, e->a, &a) < 0 || expr_truthy(E, e->a, a, &ta) < 0) return -1;
        if (e->op == TF_EX_AND && !ta) return *out = val_num(0, 1), 0;
        if (e->op == TF_EX_OR && ta) return *out = val_num(1, 1), 0;
        if (expr_eval(E, e->b, &b) < 0 || expr_truthy(E, e->b, b, &tb) < 0) return -1;
        *out = val_num(tb, 1);
        return 0;
    }
    if (expr_eval(E, e->a, &a) < 0 || expr_eval(E, e->b, &b) < 0) return -1;
    int cmp_op = e->op == TF_EX_EQ || e->op == TF_EX_NE || e->op == '<' || e->op == '>' ||
                 e->op == TF_EX_LE || e->op == TF_EX_GE;
    if (cmp_op) {
        if (val_class(a) != val_class(b)) {
            // As Python: a token and a number are never equal ("None" == 0 is
            // False), and have no order (TypeError); nor a string and a list
            if (e->op == TF_EX_EQ || e->op == TF_EX_NE) return *out = val_num(e->op == TF_EX_NE, 1), 0;
            if (val_class(a) && val_class(b)) return fail(E, e, "orders a string and a list%s", "");
            return fail(E, e, "orders a token and a number%s", "");
        }
        // Strings in Python's order (by characters), not by their codes
        int c = val_class(a) ? str_order(E, a, b) : val_cmp(a, b);
        int r = e->op == TF_EX_EQ ? c == 0 : e->op == TF_EX_NE ? c != 0 : e->op == '<' ? c < 0
              : e->op == '>' ? c > 0 : e->op == TF_EX_LE ? c <= 0 : c >= 0;
        *out = val_num(r, 1);
        return 0;
    }
    if (e->op == TF_EX_IN || e->op == TF_EX_NOT_IN) return str_in(E, e, a, b, out);
    if (e->op == TF_EX_POW) return eval_pow(E, e, a, b, out);
    if ((e->op == '+' || e->op == '*') && (!val_is_num(a) || !val_is_num(b)))
        return str_arith(E, e, a, b, out);
    if (!val_is_num(a) || !val_is_num(b))
        return fail(E, e, "does arithmetic on a token (use ord() for its code)%s", "");
    int integer = a.kind == TF_VAL_INT && b.kind == TF_VAL_INT;
    double x = a.x, y = b.x, r;
    switch (e->op) {
    case '+': r = x + y; break;
    case '-': r = x - y; break;
    case '*': r = x * y; break;
    case '/':
        if (y == 0) return fail(E, e, "divides by zero%s", "");
        r = integer && !E->true_division ? floor(x / y) : x / y;
        break;
    case '%':
        if (y == 0) return fail(E, e, "takes a remainder by zero%s", "");
        r = x - y * floor(x / y);
        break;
    default: return fail(E, e, "unknown operator%s", "");
    }
    if (!isfinite(r)) return fail(E, e, "overflows (beyond a double)%s", "");
    *out = val_num(r, integer);
    return 0;
}

/* ---- functions ----------------------------------------------------------------- */

/* How a math function's argument can be outside its domain (Python's math
 * raises ValueError there). */
typedef enum { DOM_ALL, DOM_POSITIVE, DOM_NONNEG, DOM_UNIT } MathDomain;

static const struct {
    const char *name;
    double (*fn)(double);
    MathDomain domain;
} math_fns[] = {
    {"sin", sin, DOM_ALL},     {"cos", cos, DOM_ALL},       {"tan", tan, DOM_ALL},
    {"asin", asin, DOM_UNIT},  {"acos", acos, DOM_UNIT},    {"atan", atan, DOM_ALL},
    {"sinh", sinh, DOM_ALL},   {"cosh", cosh, DOM_ALL},     {"tanh", tanh, DOM_ALL},
    {"exp", exp, DOM_ALL},     {"log", log, DOM_POSITIVE},  {"log2", log2, DOM_POSITIVE},
    {"log10", log10, DOM_POSITIVE}, {"sqrt", sqrt, DOM_NONNEG},
};

#define FUNCTION_LIST "min, max, abs, floor, ceil, round, int, float, pow, ord, chr, len, sin, cos, " \
                      "tan, asin, acos, atan, sinh, cosh, tanh, exp, log, log2, log10, sqrt"

/* A failure that names a value: "takes sqrt of -3, which is negative". */
static int fail_value(ExprEnv *E, const TfExpr *e, const char *fmt, TfVal v) {
    char label[64];
    val_label(E->ir, v, label, sizeof label);
    snprintf(E->msg, sizeof E->msg, fmt, e->name.text, label);
    E->where = e->loc;
    return -1;
}

/* A number's result: an error where Python raises OverflowError (not finite). */
static int math_result(ExprEnv *E, const TfExpr *e, double r, TfVal arg, TfVal *out) {
    if (!isfinite(r)) return fail_value(E, e, "overflows (%s of %s is beyond a double)", arg);
    *out = val_num(r, 0);
    return 0;
}

/* sin(x) ... sqrt(x), log(x, base): Python's math, in double. */
static int eval_math(ExprEnv *E, const TfExpr *e, int k, const TfVal *a, TfVal *out) {
    const char *f = e->name.text;
    int base = strcmp(f, "log") == 0 && e->n_args == 2;
    if (e->n_args != 1 && !base)
        return fail(E, e, strcmp(f, "log") == 0 ? "%s takes a number and an optional base"
                                                : "%s takes one number", f);
    for (int i = 0; i < e->n_args; i++)
        if (!val_is_num(a[i])) return fail_value(E, e, "takes %s of the token %s", a[i]);
    double x = a[0].x;
    switch (math_fns[k].domain) {
    case DOM_ALL: break;
    case DOM_POSITIVE:
        if (x <= 0) return fail_value(E, e, "takes %s of %s (not positive)", a[0]);
        break;
    case DOM_NONNEG:
        if (x < 0) return fail_value(E, e, "takes %s of %s (negative)", a[0]);
        break;
    case DOM_UNIT:
        if (x < -1 || x > 1) return fail_value(E, e, "takes %s of %s (outside -1..1)", a[0]);
        break;
    }
    double r = math_fns[k].fn(x);
    if (base) {
        // Python's math.log(x, b) is log(x) / log(b).
        if (a[1].x <= 0) return fail_value(E, e, "takes %s to the base %s (not positive)", a[1]);
        if (log(a[1].x) == 0) return fail_value(E, e, "takes %s to the base %s (divides by zero)", a[1]);
        r /= log(a[1].x);
    }
    return math_result(E, e, r, a[0], out);
}

/* x ** y, pow(x, y): Python's `**`. Integers to a power of 0 or more stay
 * integers (exact up to 2^53); otherwise a real. */
static int eval_pow(ExprEnv *E, const TfExpr *e, TfVal a, TfVal b, TfVal *out) {
    if (!val_is_num(a) || !val_is_num(b))
        return fail(E, e, "does arithmetic on a token (use ord() for its code)%s", "");
    char la[32], lb[32], msg[80];
    val_label(E->ir, a, la, sizeof la);
    val_label(E->ir, b, lb, sizeof lb);
    snprintf(msg, sizeof msg, a.x < 0 ? "(%s) ** %s" : "%s ** %s", la, lb);
    if (a.x == 0 && b.x < 0)
        return fail(E, e, "raises 0 to a negative power (%s)", msg);
    if (a.x < 0 && b.x != floor(b.x))
        return fail(E, e, "raises a negative number to a fraction (%s is complex)", msg);
    double r = pow(a.x, b.x);
    int integer = a.kind == TF_VAL_INT && b.kind == TF_VAL_INT && b.x >= 0;
    if (!isfinite(r) || (integer && fabs(r) > 9007199254740992.0))
        return fail(E, e, "overflows (%s is beyond a double's exact integers)", msg);
    *out = val_num(r, integer);
    return 0;
}

/* int(x): truncation toward zero, as Python; int of a token whose text is
 * an integer ('7', "10", "-1") is that integer. float(x): x as a real; of
 * a token whose text is a number ("0.5", "-1") that number. */
static int eval_int(ExprEnv *E, const TfExpr *e, TfVal a, TfVal *out) {
    int real = e->name.text[0] == 'f';
    if (a.kind == TF_VAL_LIST) return fail_value(E, e, "takes %s of the list %s", a);
    if (a.kind != TF_VAL_TOKEN && real) {
        *out = val_num(a.x, 0);
        return 0;
    }
    if (a.kind != TF_VAL_TOKEN) {
        if (fabs(a.x) > 9007199254740992.0)
            return fail_value(E, e, "overflows (%s of %s is beyond a double's exact integers)", a);
        *out = val_num(trunc(a.x), 1);
        return 0;
    }
    char cb[8], *end;
    const char *text = ast_token_text(E->ir->words->text, (int)a.x, '\'', cb);
    double v = real ? strtod(text, &end) : (double)strtol(text, &end, 10);
    if (end == text || *end || !isfinite(v) || (a.x < TF_TOKEN_WORD && (a.x < '0' || a.x > '9')))
        return fail_value(E, e, real ? "takes %s of the token %s (not a number)"
                                     : "takes %s of the token %s (not an integer)", a);
    *out = val_num(v, !real);
    return 0;
}

/* min(...), max(...): the least or greatest of its arguments. */
static int eval_minmax(ExprEnv *E, const TfExpr *e, const TfVal *a, TfVal *out) {
    const char *f = e->name.text;
    TfVal best = a[0];
    if (e->n_args == 1 && !val_is_num(a[0])) return str_minmax(E, e, a[0], out);
    for (int i = 0; i < e->n_args; i++) {
        if (val_class(a[i]) != val_class(a[0]))
            return fail(E, e, "%s mixes tokens and numbers", f);
        int c = val_class(a[0]) ? str_order(E, a[i], best) : val_cmp(a[i], best);
        if (f[1] == 'i' ? c < 0 : c > 0) best = a[i];
    }
    *out = best;
    return 0;
}

/* The functions of one argument that are no math: floor ceil round abs
 * float ord chr len int; 1 when f is none of them. */
static int eval_unary_fn(ExprEnv *E, const TfExpr *e, TfVal a, TfVal *out) {
    const char *f = e->name.text;
    int rounding = strcmp(f, "floor") == 0 || strcmp(f, "ceil") == 0 || strcmp(f, "round") == 0;
    if (rounding || strcmp(f, "abs") == 0)
        if (!val_is_num(a)) return fail_value(E, e, "takes %s of the token %s", a);
    if (rounding) {
        // floor, ceil: a hair of tolerance for values like 0.3 * 10; round:
        // Python's round, halves to even (nearbyint in the default rounding mode).
        double x = a.x;
        *out = val_num(f[0] == 'f' ? floor(x + 1e-9) : f[0] == 'c' ? ceil(x - 1e-9) : nearbyint(x), 1);
    } else if (strcmp(f, "abs") == 0) {
        *out = val_num(fabs(a.x), a.kind == TF_VAL_INT);
    } else if (strcmp(f, "float") == 0 || strcmp(f, "int") == 0) {
        return eval_int(E, e, a, out);
    } else if (strcmp(f, "ord") == 0) {
        if (a.kind != TF_VAL_TOKEN) return fail(E, e, "ord of a number%s", "");
        if (a.x >= TF_TOKEN_WORD)  // Python's TypeError: ord takes one character
            return fail_value(E, e, "takes %s of %s, which is not one character", a);
        *out = val_num(a.x, 1);
    } else if (strcmp(f, "len") == 0) {
        // Python's len of a string: the token's text ("cat" is 3); a number has none
        if (val_is_num(a)) return fail_value(E, e, "takes %s of the number %s", a);
        char b[2];
        int n;
        check_code_text(E->ir, (int)a.x, b, &n);
        *out = val_num(n, 1);
    } else if (strcmp(f, "chr") == 0) {
        if (a.kind != TF_VAL_INT || a.x < 1 || a.x > 255)
            return fail(E, e, "chr needs an integer 1..255%s", "");
        out->kind = TF_VAL_TOKEN;
        out->x = a.x;
    } else {
        return 1;
    }
    return 0;
}

static int eval_call(ExprEnv *E, const TfExpr *e, TfVal *out) {
    const char *f = e->name.text;
    TfVal a[8];
    if (e->n_args > 8) return fail(E, e, "%s takes at most 8 arguments", f);
    for (int i = 0; i < e->n_args; i++)
        if (expr_eval(E, e->args[i], &a[i]) < 0) return -1;
    int r = str_call(E, e, a, out);
    if (r <= 0) return r;
    if (strcmp(f, "min") == 0 || strcmp(f, "max") == 0) {
        if (e->n_args < 1) return fail(E, e, "%s needs arguments", f);
        return eval_minmax(E, e, a, out);
    }
    for (int k = 0; k < (int)(sizeof math_fns / sizeof math_fns[0]); k++)
        if (strcmp(f, math_fns[k].name) == 0) return eval_math(E, e, k, a, out);
    if (strcmp(f, "pow") == 0) {
        if (e->n_args != 2) return fail(E, e, "%s takes two numbers", f);
        return eval_pow(E, e, a[0], a[1], out);
    }
    if (e->n_args == 1) {
        int r = eval_unary_fn(E, e, a[0], out);
        if (r <= 0) return r;
    }
    return fail(E, e, "calls an unknown function '%s' (known: " FUNCTION_LIST ")", f);
}

int expr_literal(const TfExpr *e, TfVal *v) {
    switch (e->kind) {
    case TF_EXPR_INT: *v = val_num((double)e->ival, 1); return 0;
    case TF_EXPR_REAL: *v = val_num(e->real, 0); return 0;
    case TF_EXPR_CHAR: v->kind = TF_VAL_TOKEN; v->x = e->ch; return 0;
    case TF_EXPR_TRUE: *v = val_num(1, 1); return 0;
    default: return -1;
    }
}

int expr_eval(ExprEnv *E, const TfExpr *e, TfVal *out) {
    if (expr_literal(e, out) == 0) return 0;
    switch (e->kind) {
    case TF_EXPR_NAME: {
        int r = check_find_reg(E->ir, e->name.text);
        if (r < 0 || !E->cur) return fail(E, e, "'%s' is not a value here", e->name.text);
        *out = E->cur[r];
        return 0;
    }
    case TF_EXPR_FIELD: {
        int r = check_find_reg(E->ir, e->name.text);
        const TfVal *side = e->side == 'k' ? E->kcur : E->qcur;
        if (r < 0 || !side) return fail(E, e, "'%s' is not a value here", e->name.text);
        *out = side[r];
        return 0;
    }
    case TF_EXPR_UNARY: {
        TfVal a;
        if (expr_eval(E, e->a, &a) < 0) return -1;
        if (e->op == TF_EX_NOT) {
            int t;
            if (expr_truthy(E, e->a, a, &t) < 0) return -1;
            *out = val_num(!t, 1);
            return 0;
        }
        if (!val_is_num(a)) return fail(E, e, "negates a token%s", "");
        *out = a;
        out->x = -a.x;
        return 0;
    }
    case TF_EXPR_BINARY: return eval_binary(E, e, out);
    case TF_EXPR_COND: {
        TfVal c;
        int t;
        if (expr_eval(E, e->a, &c) < 0 || expr_truthy(E, e->a, c, &t) < 0) return -1;
        return expr_eval(E, t ? e->b : e->c, out);
    }
    case TF_EXPR_CALL: return eval_call(E, e, out);
    case TF_EXPR_INDEX: {
        TfVal s, i;
        if (expr_eval(E, e->a, &s) < 0 || expr_eval(E, e->b, &i) < 0) return -1;
        return str_index(E, e, s, i, out);
    }
    case TF_EXPR_SLICE: {
        TfVal s, part[3] = {{TF_VAL_INT, 0}, {TF_VAL_INT, 0}, {TF_VAL_INT, 0}};
        int given[3];
        if (expr_eval(E, e->a, &s) < 0) return -1;
        for (int k = 0; k < 3; k++)
            if ((given[k] = e->args[k] != NULL) && expr_eval(E, e->args[k], &part[k]) < 0) return -1;
        return str_slice(E, e, s, part, given, out);
    }
    case TF_EXPR_METHOD: {
        TfVal self, arg[8];
        if (e->n_args > 8) return fail(E, e, "%s takes at most 8 arguments", e->name.text);
        if (expr_eval(E, e->a, &self) < 0) return -1;
        for (int i = 0; i < e->n_args; i++)
            if (expr_eval(E, e->args[i], &arg[i]) < 0) return -1;
        return str_method(E, e, self, arg, out);
    }
    case TF_EXPR_TABLE: {
        TfVal in[TF_EXPR_MAX_INPUTS];
        if (e->n_inputs > TF_EXPR_MAX_INPUTS) return fail(E, e, "a table has at most 8 inputs%s", "");
        for (int i = 0; i < e->n_inputs; i++) {
            int r = check_find_reg(E->ir, e->inputs[i].text);
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
                if (expr_literal(t->keys[k], &kv) < 0 || val_is_num(kv) != val_is_num(in[k]) ||
                    val_cmp(kv, in[k]) != 0)
                    match = 0;
            }
            if (match) return expr_eval(E, t->value, out);
        }
        if (dflt) return expr_eval(E, dflt->value, out);
        return fail(E, e, "has no entry for these inputs and no default `_ => ...`%s", "");
    }
    default: return fail(E, e, "cannot be evaluated%s", "");
    }
}

/* Registers an expression reads: names (Map) or k./q. fields (selections).
 * Reports unknown names; returns -1 after an error. */

static int add_unique(int *list, int *n, int r) {
    for (int i = 0; i < *n; i++)
        if (list[i] == r) return 0;
    if (*n == TF_EXPR_MAX_INPUTS) return -1;
    list[(*n)++] = r;
    return 0;
}

/* A literal that `tokens` is compared with (or a table over `tokens` has
 * as a key) must be a token of the vocabulary: else the comparison could
 * never hold (issue 22). Elsewhere a literal is a string like any other
 * (a Map may make words no prompt holds). -1 after reporting. */
static int literal_is_token(const TfIr *ir, TfDiag *diag, const TfExpr *lit) {
    if (lit->kind != TF_EXPR_CHAR) return 0;
    for (int i = 0; i < ir->n_vocab; i++)
        if (ir->vocab[i] == lit->ch) return 0;
    check_unknown_token(diag, ir, lit->loc, lit->ch, 0);
    return -1;
}

/* tokens (or k.tokens, q.tokens) compared with a literal: a warning (the
 * comparison is legal Python, and constant: case 37 of TracrBench excludes
 * a word its vocabulary lacks). */
static void literal_vs_tokens(const TfIr *ir, TfDiag *diag, const TfExpr *reg, const TfExpr *lit) {
    if (lit->kind != TF_EXPR_CHAR) return;
    if ((reg->kind != TF_EXPR_NAME && reg->kind != TF_EXPR_FIELD) ||
        check_find_reg(ir, reg->name.text) != TF_IR_REG_TOKENS)
        return;
    for (int i = 0; i < ir->n_vocab; i++)
        if (ir->vocab[i] == lit->ch) return;
    check_unknown_token(diag, ir, lit->loc, lit->ch, 1);
}

int expr_reads(const TfIr *ir, TfDiag *diag, const TfExpr *e, int selection, ExprReads *R) {
    if (!e) return 0;
    int bad = 0;
    switch (e->kind) {
    case TF_EXPR_CHAR: return 0;
    case TF_EXPR_NAME:
    case TF_EXPR_FIELD: {
        if (e->kind == TF_EXPR_NAME && selection) {
            diag_error(diag, e->loc,
                       "in a selection, write k.%s (at the key position) or q.%s (at the query "
                       "position)",
                       e->name.text, e->name.text);
            return -1;
        }
        if (e->kind == TF_EXPR_FIELD && !selection) {
            diag_error(diag, e->loc, "k. and q. belong in the selection of Aggregate or Count");
            return -1;
        }
        int r = check_find_reg(ir, e->name.text);
        if (r < 0) {
            diag_error(diag, e->name.loc, "unknown register '%s'", e->name.text);
            check_hint_reg(diag, ir, e->name.text);
            return -1;
        }
        int *list = !selection ? R->regs : e->side == 'k' ? R->kregs : R->qregs;
        int *n = !selection ? &R->n : e->side == 'k' ? &R->nk : &R->nq;
        if (add_unique(list, n, r) < 0) {
            diag_error(diag, e->loc, "an expression reads at most %d registers",
                       TF_EXPR_MAX_INPUTS);
            return -1;
        }
        return 0;
    }
    case TF_EXPR_TABLE:
        for (int i = 0; i < e->n_inputs; i++) {
            int r = check_find_reg(ir, e->inputs[i].text);
            if (r < 0) {
                diag_error(diag, e->inputs[i].loc, "unknown register '%s'", e->inputs[i].text);
                check_hint_reg(diag, ir, e->inputs[i].text);
                return -1;
            }
            if (selection) {
                diag_error(diag, e->loc, "a table cannot be part of a selection");
                return -1;
            }
            if (add_unique(R->regs, &R->n, r) < 0) return -1;
        }
        for (int i = 0; i < e->n_entries; i++) {
            for (int k = 0; k < e->entries[i].n_keys; k++) {
                TfVal v;
                if (expr_literal(e->entries[i].keys[k], &v) < 0) {
                    diag_error(diag, e->entries[i].keys[k]->loc,
                               "a table key is a literal (3, 'a', 0.5) or `_`");
                    bad = 1;
                } else if (k < e->n_inputs &&
                           check_find_reg(ir, e->inputs[k].text) == TF_IR_REG_TOKENS &&
                           literal_is_token(ir, diag, e->entries[i].keys[k]) < 0) {
                    bad = 1;
                }
            }
            if (e->entries[i].n_keys && e->entries[i].n_keys != e->n_inputs) {
                diag_error(diag, e->entries[i].loc, "this key has %d value%s for %d input%s",
                           e->entries[i].n_keys, e->entries[i].n_keys == 1 ? "" : "s",
                           e->n_inputs, e->n_inputs == 1 ? "" : "s");
                bad = 1;
            }
            if (expr_reads(ir, diag, e->entries[i].value, selection, R) < 0) bad = 1;
        }
        return bad ? -1 : 0;
    default: break;
    }
    if (e->kind == TF_EXPR_BINARY && (e->op == TF_EX_EQ || e->op == TF_EX_NE)) {
        literal_vs_tokens(ir, diag, e->a, e->b);
        literal_vs_tokens(ir, diag, e->b, e->a);
    }
    if (expr_reads(ir, diag, e->a, selection, R) < 0) bad = 1;
    if (expr_reads(ir, diag, e->b, selection, R) < 0) bad = 1;
    if (expr_reads(ir, diag, e->c, selection, R) < 0) bad = 1;
    for (int i = 0; i < e->n_args; i++)
        if (expr_reads(ir, diag, e->args[i], selection, R) < 0) bad = 1;
    return bad ? -1 : 0;
}

static int expr_has_names(const TfExpr *e) {
    if (!e) return 0;
    if (e->kind == TF_EXPR_NAME || e->kind == TF_EXPR_TABLE) return 1;
    if (expr_has_names(e->a) || expr_has_names(e->b) || expr_has_names(e->c)) return 1;
    for (int i = 0; i < e->n_args; i++)
        if (expr_has_names(e->args[i])) return 1;
    return 0;
}

int expr_linear(const TfExpr *e) {
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

int expr_divides(const TfExpr *e) {
    if (!e) return 0;
    if (e->kind == TF_EXPR_BINARY && e->op == '/') return 1;
    if (expr_divides(e->a) || expr_divides(e->b) || expr_divides(e->c)) return 1;
    for (int i = 0; i < e->n_args; i++)
        if (expr_divides(e->args[i])) return 1;
    for (int i = 0; i < e->n_entries; i++)
        if (expr_divides(e->entries[i].value)) return 1;
    return 0;
}

int expr_true_division(const TfIr *ir, int dest) {
    return ir->regs[dest].kind == TF_REG_SCALAR && !ir->regs[dest].as_number;
}


/* ---- a selection numbered by a Count ------------------------------------------ */

/* The one register e reads through k. fields (*kreg, -1 while none) and
 * whether it reads a q. field (*q): -1 when it reads a bare register, a
 * table or a second k. register. */
static int side_regs(const TfIr *ir, const TfExpr *e, int *kreg, int *q) {
    if (!e) return 0;
    if (e->kind == TF_EXPR_NAME || e->kind == TF_EXPR_TABLE) return -1;
    if (e->kind == TF_EXPR_FIELD) {
        if (e->side == 'q') {
            *q = 1;
            return 0;
        }
        int r = check_find_reg(ir, e->name.text);
        if (r < 0 || (*kreg >= 0 && *kreg != r)) return -1;
        *kreg = r;
        return 0;
    }
    if (side_regs(ir, e->a, kreg, q) < 0 || side_regs(ir, e->b, kreg, q) < 0 ||
        side_regs(ir, e->c, kreg, q) < 0)
        return -1;
    for (int i = 0; i < e->n_args; i++)
        if (side_regs(ir, e->args[i], kreg, q) < 0) return -1;
    return 0;
}

/* The conjuncts of e (`a and b and ...`) into c[*n] (at most max). */
static void conjuncts(const TfExpr *e, const TfExpr **c, int *n, int max) {
    if (e->kind == TF_EXPR_BINARY && e->op == TF_EX_AND) {
        conjuncts(e->a, c, n, max);
        conjuncts(e->b, c, n, max);
    } else if (*n < max) {
        c[(*n)++] = e;
    }
}

/* The register K of a conjunct k.K == X or X == k.K whose X reads only q.
 * fields: K, or -1. */
static int numbered_by(const TfIr *ir, const TfExpr *e) {
    if (e->kind != TF_EXPR_BINARY || e->op != TF_EX_EQ) return -1;
    for (int side = 0; side < 2; side++) {
        const TfExpr *f = side ? e->b : e->a, *x = side ? e->a : e->b;
        if (f->kind != TF_EXPR_FIELD || f->side != 'k') continue;
        int kreg = -1, q = 0;
        if (side_regs(ir, x, &kreg, &q) < 0 || kreg >= 0) continue;
        return check_find_reg(ir, f->name.text);
    }
    return -1;
}

/* Whether a implies b on every value of register c (both read only k.c). */
static int implies_on(const TfIr *ir, const TfExpr *a, const TfExpr *b, int c) {
    const TfRegFacts *F = &ir->regs[c].facts;
    TfVal *cur = calloc((size_t)ir->n_regs + 1, sizeof *cur);
    if (!cur || !F->known) {
        free(cur);
        return 0;
    }
    ExprEnv E = {.ir = ir, .kcur = cur, .qcur = cur};
    int ok = 1;
    for (int i = 0; i < F->n_vals && ok; i++) {
        TfVal va, vb;
        int ta, tb;
        cur[c] = F->vals[i];
        if (expr_eval(&E, a, &va) < 0 || expr_truthy(&E, a, va, &ta) < 0 ||
            expr_eval(&E, b, &vb) < 0 || expr_truthy(&E, b, vb, &tb) < 0)
            ok = 0;
        else if (ta && !tb)
            ok = 0;
    }
    free(cur);
    return ok;
}

int expr_numbered_selection(const TfIr *ir, const TfExpr *sel,
                            const TfExpr *(*count_of)(const void *ctx, int reg), const void *ctx) {
    enum { MAX_TERMS = 16 };
    const TfExpr *c[MAX_TERMS];
    int n = 0;
    conjuncts(sel, c, &n, MAX_TERMS);
    for (int i = 0; i < n; i++) {
        int K = numbered_by(ir, c[i]);
        const TfExpr *counted = K >= 0 ? count_of(ctx, K) : NULL;
        int creg = -1, q = 0;
        if (!counted || side_regs(ir, counted, &creg, &q) < 0 || q || creg < 0) continue;
        for (int j = 0; j < n; j++) {
            int kreg = -1, qj = 0;
            if (j == i || side_regs(ir, c[j], &kreg, &qj) < 0 || qj || kreg != creg) continue;
            if (implies_on(ir, c[j], counted, creg)) return 1;
        }
    }
    return 0;
}
