/* expr_str.c: Python's strings in expressions, for expr.c: indexing and
 * slicing, `+` and `*`, `in`, the string methods and sorted()/list().
 *
 * A string is a token value (its code: a byte, or a word of ir->words); a
 * string an expression makes is interned there (check_word), so two
 * strings are equal exactly when their codes are. Every operation follows
 * Python 3's str on ASCII text; where Python raises (TypeError,
 * IndexError, ValueError) the expression fails with a message. Methods
 * that depend on letter case refuse characters beyond ASCII (Python's
 * rules for them are Unicode's), and a string made here holds at most
 * TF_EXPR_STRING_MAX bytes and no NUL (a word cannot).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"

/* The text of a string or list value (buf: 2 bytes for a byte). */
static const char *text_of(const ExprEnv *E, TfVal v, char *buf, int *len) {
    return check_code_text(E->ir, (int)v.x, buf, len);
}

/* A new string (or list, kind TF_VAL_LIST) of bytes[0..len). */
static int make_str(ExprEnv *E, const TfExpr *e, const char *bytes, int len, TfValKind kind,
                    TfVal *out) {
    if (len > TF_EXPR_STRING_MAX)
        return expr_fail(E, e, "makes a string of %d bytes, over the limit of %d", len,
                         TF_EXPR_STRING_MAX);
    if (len > 1 && memchr(bytes, '\0', (size_t)len))
        return expr_fail(E, e, "makes a string of several characters holding NUL, which no word can");
    int code = check_word(E->ir, bytes, len);
    if (code < 0) return expr_fail(E, e, "ran out of memory");
    out->kind = kind;
    out->x = code;
    return 0;
}

/* A value's Python type, with its article: "an int", "a string". */
static const char *type_name(TfVal v) {
    return v.kind == TF_VAL_INT ? "an int" : v.kind == TF_VAL_REAL ? "a float"
         : v.kind == TF_VAL_TOKEN ? "a string" : "a list";
}

static int is_text(TfVal v) { return v.kind == TF_VAL_TOKEN || v.kind == TF_VAL_LIST; }

int str_order(const ExprEnv *E, TfVal a, TfVal b) {
    char ba[2], bb[2];
    int la, lb;
    const char *ta = text_of(E, a, ba, &la), *tb = text_of(E, b, bb, &lb);
    int c = memcmp(ta, tb, (size_t)(la < lb ? la : lb));
    return c ? c : la - lb;
}

/* a + b, a * n, n * a of strings and lists (e->op '+' or '*'); 1 when
 * neither operand is one. */
int str_arith(ExprEnv *E, const TfExpr *e, TfVal a, TfVal b, TfVal *out) {
    if (!is_text(a) && !is_text(b)) return 1;
    char ba[2], bb[2], buf[TF_EXPR_STRING_MAX + 1];
    int la, lb;
    if (e->op == '+') {
        if (a.kind != b.kind)
            return expr_fail(E, e, "adds %s and %s (Python's TypeError: a string adds only a "
                             "string, a list only a list)", type_name(a), type_name(b));
        const char *ta = text_of(E, a, ba, &la), *tb = text_of(E, b, bb, &lb);
        if (la + lb > TF_EXPR_STRING_MAX)
            return expr_fail(E, e, "makes a string of %d bytes, over the limit of %d", la + lb,
                             TF_EXPR_STRING_MAX);
        memcpy(buf, ta, (size_t)la);
        memcpy(buf + la, tb, (size_t)lb);
        return make_str(E, e, buf, la + lb, a.kind, out);
    }
    // e->op is '*' (expr.c sends only + and * here)
    TfVal s = is_text(a) ? a : b, n = is_text(a) ? b : a;
    if (n.kind != TF_VAL_INT)
        return expr_fail(E, e, "multiplies %s by %s (Python's TypeError: a sequence "
                         "repeats an integer number of times)", type_name(s), type_name(n));
    const char *ts = text_of(E, s, ba, &la);
    double reps = n.x > 0 ? n.x : 0;
    if (la * reps > TF_EXPR_STRING_MAX)
        return expr_fail(E, e, "makes a string of %.0f bytes, over the limit of %d", la * reps,
                         TF_EXPR_STRING_MAX);
    int total = (int)(la * reps);
    for (int i = 0; i < total; i++) buf[i] = ts[i % la];
    return make_str(E, e, buf, total, s.kind, out);
}

/* a in b, a not in b: a substring of a string, an element of a list. */
int str_in(ExprEnv *E, const TfExpr *e, TfVal a, TfVal b, TfVal *out) {
    char ba[2], bb[2];
    int la, lb, found = 0;
    if (!is_text(b))
        return expr_fail(E, e, "asks whether a value is in %s (Python's TypeError: a number "
                         "holds nothing)", type_name(b));
    const char *tb = text_of(E, b, bb, &lb);
    if (b.kind == TF_VAL_TOKEN) {
        if (a.kind != TF_VAL_TOKEN)
            return expr_fail(E, e, "asks whether %s is in a string (Python's TypeError: only a "
                             "string can be)", type_name(a));
        const char *ta = text_of(E, a, ba, &la);
        for (int i = 0; i + la <= lb && !found; i++) found = memcmp(tb + i, ta, (size_t)la) == 0;
    } else if (a.kind == TF_VAL_TOKEN) {
        // A list's elements are strings of one character.
        const char *ta = text_of(E, a, ba, &la);
        found = la == 1 && memchr(tb, ta[0], (size_t)lb) != NULL;
    }
    *out = val_num(e->op == TF_EX_IN ? found : !found, 1);
    return 0;
}

/* An integer operand of indexing or slicing, which Python requires. */
static int int_index(ExprEnv *E, const TfExpr *e, TfVal v, const char *what, long *out) {
    if (v.kind != TF_VAL_INT)
        return expr_fail(E, e, "%s %s (Python's TypeError: indices must be integers)", what,
                         type_name(v));
    double x = v.x > 1e9 ? 1e9 : v.x < -1e9 ? -1e9 : v.x; // far beyond any string's length
    *out = (long)x;
    return 0;
}

/* s[i]: the character at i (from the end when negative). */
int str_index(ExprEnv *E, const TfExpr *e, TfVal s, TfVal i, TfVal *out) {
    if (!is_text(s)) return expr_fail(E, e, "indexes %s (only strings and lists have items)",
                                      type_name(s));
    long k = 0;
    if (int_index(E, e, i, "indexes a string with", &k) < 0) return -1;
    char bs[2];
    int ls;
    const char *ts = text_of(E, s, bs, &ls);
    if (k < 0) k += ls;
    if (k < 0 || k >= ls)
        return expr_fail(E, e, "indexes %s of length %d at %.0f (Python's IndexError)",
                         type_name(s), ls, i.x);
    return make_str(E, e, ts + k, 1, TF_VAL_TOKEN, out);
}

/* s[start:stop:step], any part left out (given[k] 0): CPython's
 * PySlice_AdjustIndices. */
int str_slice(ExprEnv *E, const TfExpr *e, TfVal s, const TfVal *part, const int *given,
              TfVal *out) {
    if (!is_text(s)) return expr_fail(E, e, "slices %s (only strings and lists have items)",
                                      type_name(s));
    long v[3] = {0, 0, 1};
    for (int k = 0; k < 3; k++)
        if (given[k] && int_index(E, e, part[k], "slices with", &v[k]) < 0) return -1;
    if (v[2] == 0) return expr_fail(E, e, "slices with a step of 0 (Python's ValueError)");
    char bs[2], buf[TF_EXPR_STRING_MAX + 1];
    int ls;
    const char *ts = text_of(E, s, bs, &ls);
    long step = v[2], start, stop;
    for (int k = 0; k < 2; k++) {
        long *x = k == 0 ? &start : &stop;
        if (!given[k]) {
            *x = k == 0 ? (step < 0 ? ls - 1 : 0) : (step < 0 ? -1 : ls);
            continue;
        }
        *x = v[k];
        if (*x < 0) {
            *x += ls;
            if (*x < 0) *x = step < 0 ? -1 : 0;
        } else if (*x >= ls) {
            *x = step < 0 ? ls - 1 : ls;
        }
    }
    int n = 0;
    for (long i = start; step > 0 ? i < stop : i > stop; i += step) buf[n++] = ts[i];
    return make_str(E, e, buf, n, s.kind, out);
}

/* ---- methods and functions ------------------------------------------------------- */

#define METHOD_LIST "lower, upper, capitalize, swapcase, title, isdigit, isalpha, isalnum, " \
                    "islower, isupper, isspace, startswith, endswith, count, find, join"

static int is_upper(int c) { return c >= 'A' && c <= 'Z'; }
static int is_lower(int c) { return c >= 'a' && c <= 'z'; }
static int is_alpha(int c) { return is_upper(c) || is_lower(c); }
static int is_digit(int c) { return c >= '0' && c <= '9'; }
/* Python's str.isspace on ASCII: \t \n \v \f \r, the separators \x1c-\x1f, space. */
static int is_space(int c) { return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f) || c == ' '; }
static int to_upper(int c) { return is_lower(c) ? c - 32 : c; }
static int to_lower(int c) { return is_upper(c) ? c + 32 : c; }

/* A method without arguments that maps each character (lower ... title). */
static int case_map(ExprEnv *E, const TfExpr *e, const char *m, const char *t, int n, TfVal *out) {
    char buf[TF_EXPR_STRING_MAX + 1];
    int prev_cased = 0;
    for (int i = 0; i < n; i++) {
        int c = (unsigned char)t[i];
        buf[i] = (char)(strcmp(m, "lower") == 0      ? to_lower(c)
                        : strcmp(m, "upper") == 0    ? to_upper(c)
                        : strcmp(m, "swapcase") == 0 ? (is_upper(c) ? to_lower(c) : to_upper(c))
                        : strcmp(m, "capitalize") == 0 ? (i == 0 ? to_upper(c) : to_lower(c))
                        /* title: a letter after a letter is lower, else upper */
                        : prev_cased ? to_lower(c) : to_upper(c));
        prev_cased = is_alpha(c);
    }
    return make_str(E, e, buf, n, TF_VAL_TOKEN, out);
}

/* isdigit ... isspace: a truth value. */
static int char_class(const char *m, const char *t, int n) {
    if (strcmp(m, "islower") == 0 || strcmp(m, "isupper") == 0) {
        // At least one cased character, and none of the other case.
        int want_lower = m[2] == 'l', cased = 0;
        for (int i = 0; i < n; i++) {
            int c = (unsigned char)t[i];
            if (is_alpha(c)) {
                if (is_lower(c) != want_lower) return 0;
                cased = 1;
            }
        }
        return cased;
    }
    if (n == 0) return 0;
    for (int i = 0; i < n; i++) {
        int c = (unsigned char)t[i];
        int ok = strcmp(m, "isdigit") == 0   ? is_digit(c)
                 : strcmp(m, "isalpha") == 0 ? is_alpha(c)
                 : strcmp(m, "isalnum") == 0 ? is_alpha(c) || is_digit(c)
                                             : is_space(c);
        if (!ok) return 0;
    }
    return 1;
}

/* s.count(sub): non-overlapping occurrences (len + 1 of the empty string);
 * s.find(sub): the first index, or -1. */
static long count_find(const char *t, int n, const char *sub, int ns, int find) {
    long count = 0;
    for (int i = 0; i + ns <= n;) {
        if (memcmp(t + i, sub, (size_t)ns) == 0) {
            if (find) return i;
            count++;
            i += ns ? ns : 1;
        } else {
            i++;
        }
    }
    if (ns == 0 && !find) return n + 1;
    return find ? -1 : count;
}

int str_method(ExprEnv *E, const TfExpr *e, TfVal self, const TfVal *arg, TfVal *out) {
    static const char *const methods[] = {
        "lower", "upper", "capitalize", "swapcase", "title", "isdigit", "isalpha", "isalnum",
        "islower", "isupper", "isspace", "startswith", "endswith", "count", "find", "join"};
    const char *m = e->name.text;
    int known = 0;
    for (size_t i = 0; i < sizeof methods / sizeof *methods; i++) known |= strcmp(m, methods[i]) == 0;
    if (!known)
        return expr_fail(E, e, "calls an unknown method '%s' (strings have: " METHOD_LIST ")", m);
    if (self.kind != TF_VAL_TOKEN)
        return expr_fail(E, e, "calls %s() on %s (a method of strings)", m, type_name(self));
    int takes = strcmp(m, "startswith") == 0 || strcmp(m, "endswith") == 0 ||
                strcmp(m, "count") == 0 || strcmp(m, "find") == 0 || strcmp(m, "join") == 0;
    if (e->n_args != takes)
        return expr_fail(E, e, takes ? "calls %s() with %d arguments: it takes one"
                                     : "calls %s() with %d arguments: it takes none", m, e->n_args);
    char bs[2], ba[2];
    int n, na = 0;
    const char *t = text_of(E, self, bs, &n), *a = NULL;
    if (takes && strcmp(m, "join") != 0) {
        if (arg[0].kind != TF_VAL_TOKEN)
            return expr_fail(E, e, "calls %s() with %s: it takes a string", m, type_name(arg[0]));
        a = text_of(E, arg[0], ba, &na);
    }
    if (!takes)
        for (int i = 0; i < n; i++)
            if ((unsigned char)t[i] > 0x7e)
                return expr_fail(E, e, "calls %s() on a string holding a character beyond ASCII "
                                 "(Python's rules for it are Unicode's)", m);
    if (strncmp(m, "is", 2) == 0) {
        *out = val_num(char_class(m, t, n), 1);
        return 0;
    }
    if (strcmp(m, "startswith") == 0 || strcmp(m, "endswith") == 0) {
        int at = m[0] == 's' ? 0 : n - na;
        *out = val_num(na <= n && memcmp(t + at, a, (size_t)na) == 0, 1);
        return 0;
    }
    if (strcmp(m, "count") == 0 || strcmp(m, "find") == 0) {
        *out = val_num((double)count_find(t, n, a, na, m[0] == 'f'), 1);
        return 0;
    }
    if (strcmp(m, "join") == 0) {
        // sep.join(s): the characters of a string, or the items of a list, sep between.
        if (!is_text(arg[0]))
            return expr_fail(E, e, "calls join() with %s: it takes a string or a list",
                             type_name(arg[0]));
        a = text_of(E, arg[0], ba, &na);
        char buf[TF_EXPR_STRING_MAX + 1];
        long total = na + (long)n * (na > 1 ? na - 1 : 0);
        if (total > TF_EXPR_STRING_MAX)
            return expr_fail(E, e, "makes a string of %ld bytes, over the limit of %d", total,
                             TF_EXPR_STRING_MAX);
        int k = 0;
        for (int i = 0; i < na; i++) {
            if (i) memcpy(buf + k, t, (size_t)n), k += n;
            buf[k++] = a[i];
        }
        return make_str(E, e, buf, k, TF_VAL_TOKEN, out);
    }
    return case_map(E, e, m, t, n, out);
}

static int byte_cmp(const void *a, const void *b) {
    return *(const unsigned char *)a - *(const unsigned char *)b;
}

int str_call(ExprEnv *E, const TfExpr *e, const TfVal *arg, TfVal *out) {
    const char *f = e->name.text;
    if (strcmp(f, "sorted") != 0 && strcmp(f, "list") != 0) return 1;
    if (e->n_args != 1) return expr_fail(E, e, "calls %s() with %d arguments: it takes one", f,
                                         e->n_args);
    if (!is_text(arg[0]))
        return expr_fail(E, e, "takes %s() of %s (Python's TypeError: not iterable)", f,
                         type_name(arg[0]));
    char b[2], buf[TF_EXPR_STRING_MAX + 1];
    int n;
    const char *t = text_of(E, arg[0], b, &n);
    memcpy(buf, t, (size_t)n);
    if (f[0] == 's') qsort(buf, (size_t)n, 1, byte_cmp);
    return make_str(E, e, buf, n, TF_VAL_LIST, out);
}

/* min(s), max(s) of one string or list: its least or greatest character. */
int str_minmax(ExprEnv *E, const TfExpr *e, TfVal s, TfVal *out) {
    char b[2];
    int n;
    const char *t = text_of(E, s, b, &n);
    if (n == 0)
        return expr_fail(E, e, "takes %s() of an empty %s (Python's ValueError)", e->name.text,
                         s.kind == TF_VAL_LIST ? "list" : "string");
    unsigned char best = (unsigned char)t[0];
    for (int i = 1; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (e->name.text[1] == 'i' ? c < best : c > best) best = c;
    }
    return make_str(E, e, (const char *)&best, 1, TF_VAL_TOKEN, out);
}

void str_label(const TfIr *ir, TfVal v, char *buf, size_t size) {
    char b[2];
    int n;
    const char *t = check_code_text(ir, (int)v.x, b, &n);
    size_t k = 0;
    k += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < n && k < size; i++) {
        char cb[8];
        k += (size_t)snprintf(buf + k, size - k, "%s'%s'", i ? ", " : "",
                              ast_char_text((unsigned char)t[i], '\'', cb));
    }
    if (k < size) snprintf(buf + k, size - k, "]");
}
