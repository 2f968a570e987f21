/* test_expr.c: the expression evaluator, value sets and error bounds of the
 * value analysis, and the layer plans (compiler/expr.c, compiler/values.c,
 * compiler/plans.c).
 *
 * Expressions are parsed from a one-Map program and evaluated on chosen
 * register values; the analysis runs on small programs and its value sets
 * and bounds are compared with what the constructions guarantee.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker.h"
#include "compile.h"
#include "expr.h"
#include "infer.h"
#include "parse.h"
#include "plans.h"
#include "testutil.h"
#include "values.h"

/* A parsed and checked program, its diagnostics in `out`. */
typedef struct Prog {
    TfDiag diag;
    TfProgram *prog;
    TfIr *ir;
    char out[4096];
    FILE *f;
} Prog;

static void prog_open(Prog *P, const char *src, int analyse) {
    memset(P, 0, sizeof *P);
    P->f = fmemopen(P->out, sizeof P->out - 1, "w");
    ck_assert_ptr_nonnull(P->f);
    diag_init(&P->diag, "t.tfp", src, strlen(src), P->f);
    P->prog = tf_parse(src, strlen(src), &P->diag);
    ck_assert_ptr_nonnull(P->prog);
    P->ir = check_program(P->prog, &P->diag);
    if (P->ir && analyse) values_analyze(P->ir, 1, &P->diag);
    fflush(P->f);
}

static void prog_close(Prog *P) {
    check_free(P->ir);
    ast_free_program(P->prog);
    fclose(P->f);
}

static int reg(const Prog *P, const char *name) {
    int r = check_find_reg(P->ir, name);
    ck_assert_msg(r >= 0, "no register %s", name);
    return r;
}

/* Evaluates Map(expr) with x = xv and y = yv (integers, or tokens when the
 * value is negative: -c is the token c); 0 or -1 (then *msg). */
static int eval_with(const char *expr, double xv, double yv, int true_division, TfVal *out,
                     char *msg, size_t n) {
    char src[512];
    snprintf(src, sizeof src, "vocab \"^ab\"; bos '^'; maxlen 4; num x, y, r;\nMap(%s) -> r;\n"
                              "output r at every position;",
             expr);
    Prog P;
    prog_open(&P, src, 0);
    ck_assert_msg(P.ir != NULL, "%s", P.out);
    TfVal *cur = calloc((size_t)P.ir->n_regs, sizeof *cur);
    cur[reg(&P, "x")] = xv < 0 ? (TfVal){TF_VAL_TOKEN, -xv} : val_num(xv, xv == floor(xv));
    cur[reg(&P, "y")] = yv < 0 ? (TfVal){TF_VAL_TOKEN, -yv} : val_num(yv, yv == floor(yv));
    ExprEnv E = {.ir = P.ir, .cur = cur, .true_division = true_division};
    const TfStmt *s = P.prog->stmts;
    while (s && s->kind != TF_STMT_OP) s = s->next;
    ck_assert_msg(s != NULL, "%s", P.out);
    int rc = expr_eval(&E, s->args[0].expr, out);
    if (rc < 0) snprintf(msg, n, "%s", E.msg);
    free(cur);
    prog_close(&P);
    return rc;
}

static double ev(const char *expr, double x, double y, int true_division) {
    TfVal v;
    char msg[200];
    ck_assert_msg(eval_with(expr, x, y, true_division, &v, msg, sizeof msg) == 0, "%s: %s", expr,
                  msg);
    return v.x;
}

START_TEST(test_arithmetic_like_python) {
    ck_assert_double_eq(ev("x / y", 7, 2, 0), 3);   // floor division of integers
    ck_assert_double_eq(ev("x / y", 7, 2, 1), 3.5); // true division (a Map into num)
    ck_assert_double_eq(ev("(0 - x) / y", 7, 2, 0), -4);
    ck_assert_double_eq(ev("x % y", 7, 3, 0), 1);
    ck_assert_double_eq(ev("(0 - x) % y", 7, 3, 0), 2); // Python's sign: of the divisor
    ck_assert_double_eq(ev("x * 1.0 / y", 7, 2, 0), 3.5); // a real operand: true division
    ck_assert_double_eq(ev("round(x / y)", 5, 2, 1), 2);  // halves to even, as Python's round
    ck_assert_double_eq(ev("round(0 - x / y)", 5, 2, 1), -2);
    ck_assert_double_eq(ev("round(x / y)", 7, 2, 1), 4);
    ck_assert_double_eq(ev("round(x / y)", 1, 2, 1), 0);
    ck_assert_double_eq(ev("floor(x * 0.1 * 10)", 3, 0, 0), 3); // a hair of tolerance
    ck_assert_double_eq(ev("min(x, y, 1) + max(x, y)", 4, 2, 0), 5);
    ck_assert_double_eq(ev("abs(y - x)", 4, 2, 0), 2);
    ck_assert_double_eq(ev("x < y and not (x == 0) or y == 9", 1, 2, 0), 1);
    ck_assert_double_eq(ev("x > 0 ? 10 : 20", 0, 0, 0), 20);
    ck_assert_double_eq(ev("[x, y: (1, 2) => 7, _ => 8]", 1, 2, 0), 7);
    ck_assert_double_eq(ev("[x, y: (1, 2) => 7, _ => 8]", 2, 1, 0), 8);
}
END_TEST

START_TEST(test_tokens) {
    TfVal v;
    char msg[200];
    ck_assert_int_eq(eval_with("ord(x)", -'a', 0, 0, &v, msg, sizeof msg), 0);
    ck_assert_double_eq(v.x, 'a');
    ck_assert_int_eq(eval_with("chr(ord(x) + 1)", -'a', 0, 0, &v, msg, sizeof msg), 0);
    ck_assert_int_eq(v.kind, TF_VAL_TOKEN);
    ck_assert_double_eq(v.x, 'b');
    ck_assert_int_eq(eval_with("x < y", -'a', -'b', 0, &v, msg, sizeof msg), 0);
    ck_assert_double_eq(v.x, 1);
    ck_assert_int_eq(eval_with("len(x)", -'a', 0, 0, &v, msg, sizeof msg), 0); // a character: 1
    ck_assert_double_eq(v.x, 1);
    ck_assert_int_eq(eval_with("len(y)", -'a', 3, 0, &v, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "takes len of the number 3");
    // a token and a number are never equal, as in Python ('a' == 1 is False)
    ck_assert_int_eq(eval_with("x == y", -'a', 1, 0, &v, msg, sizeof msg), 0);
    ck_assert_double_eq(v.x, 0);
    ck_assert_int_eq(eval_with("x != y", -'a', 1, 0, &v, msg, sizeof msg), 0);
    ck_assert_double_eq(v.x, 1);
}
END_TEST

START_TEST(test_failures_say_why) {
    TfVal v;
    char msg[200];
    ck_assert_int_eq(eval_with("x / y", 1, 0, 0, &v, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "divides by zero");
    ck_assert_int_eq(eval_with("x % y", 1, 0, 0, &v, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "takes a remainder by zero");
    ck_assert_int_eq(eval_with("1 + x", -'a', 0, 0, &v, msg, sizeof msg), -1);
    ck_assert_ptr_nonnull(strstr(msg, "adds an int and a string"));
    ck_assert_int_eq(eval_with("int(sorted(x))", -'a', 0, 0, &v, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "takes int of the list ['a']");
    ck_assert_int_eq(eval_with("float(list(x))", -'a', 0, 0, &v, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "takes float of the list ['a']");
    ck_assert_int_eq(eval_with("x[1.0]", -'a', 0, 0, &v, msg, sizeof msg), -1);
    ck_assert_ptr_nonnull(strstr(msg, "indices must be integers"));
    ck_assert_int_eq(eval_with("chr(200).upper()", 0, 0, 0, &v, msg, sizeof msg), -1);
    ck_assert_ptr_nonnull(strstr(msg, "beyond ASCII"));
    ck_assert_int_eq(eval_with("ord(x + x)", -'a', 0, 0, &v, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "takes ord of 'aa', which is not one character");
    ck_assert_int_eq(eval_with("x - 1", -'a', 0, 0, &v, msg, sizeof msg), -1);
    ck_assert_ptr_nonnull(strstr(msg, "arithmetic on a token"));
    ck_assert_int_eq(eval_with("x < 1", -'a', 0, 0, &v, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "orders a token and a number");
    ck_assert_int_eq(eval_with("[x: 1 => 2]", 3, 0, 0, &v, msg, sizeof msg), -1);
    ck_assert_ptr_nonnull(strstr(msg, "no entry"));
}
END_TEST

/* Python's strings (compiler/expr_str.c): each expression and the value
 * Python 3 gives it (as val_label writes it: 'olleh', 1 for True). */
START_TEST(test_strings_like_python) {
    static const struct { const char *expr, *want; } cases[] = {
        {"\"hello\"[::-1]", "'olleh'"},          {"\"hello\"[1:3]", "'el'"},
        {"\"hello\"[-2:]", "'lo'"},              {"\"hello\"[:-10]", "''"},
        {"\"hello\"[10:]", "''"},                {"\"hello\"[::2]", "'hlo'"},
        {"\"hello\"[4:0:-2]", "'ol'"},           {"\"hello\"[:-2-1:-1]", "'ol'"},
        {"\"hello\"[-1]", "'o'"},                {"\"abc\"[5:1]", "''"},
        {"\"ab\" + \"cd\"", "'abcd'"},           {"\"ab\" * 3", "'ababab'"},
        {"0 * \"ab\"", "''"},                    {"-1 * \"ab\"", "''"},
        {"\"ell\" in \"hello\"", "1"},           {"\"\" in \"x\"", "1"},
        {"\"z\" not in \"hello\"", "1"},         {"\"Hello World\".lower()", "'hello world'"},
        {"\"Hello World\".upper()", "'HELLO WORLD'"},
        {"\"hELLO wORLD\".capitalize()", "'Hello world'"},
        {"\"Hello World\".swapcase()", "'hELLO wORLD'"},
        {"\"they\\'re bill\\'s\".title()", "'They'Re Bill'S'"},
        {"\"123\".isdigit()", "1"},              {"\"\".isdigit()", "0"},
        {"\"12a\".isdigit()", "0"},              {"\"abC\".isalpha()", "1"},
        {"\"ab1\".isalnum()", "1"},              {"\"ab1\".islower()", "1"},
        {"\"1\".islower()", "0"},                {"\"AB1\".isupper()", "1"},
        {"\" \\t\".isspace()", "1"},             {"\"hello\".startswith(\"he\")", "1"},
        {"\"hello\".endswith(\"lo\")", "1"},     {"\"hello\".count(\"l\")", "2"},
        {"\"aaaa\".count(\"aa\")", "2"},         {"\"abc\".count(\"\")", "4"},
        {"\"hello\".find(\"l\")", "2"},          {"\"hello\".find(\"z\")", "-1"},
        {"\"-\".join(\"abc\")", "'a-b-c'"},      {"\"\".join(sorted(\"listen\"))", "'eilnst'"},
        {"sorted(\"listen\") == sorted(\"silent\")", "1"},
        {"sorted(\"ab\") == \"ab\"", "0"},       {"len(sorted(\"abc\"))", "3"},
        {"\"b\" in sorted(\"abc\")", "1"},       {"\"ab\" in sorted(\"abc\")", "0"},
        {"min(\"hello\")", "'e'"},               {"max(\"hello\")", "'o'"},
        {"\"abc\" < \"abd\"", "1"},              {"\"ab\" < \"abc\"", "1"},
        {"\"B\" < \"a\"", "1"},                  {"max(\"cat\", \"dog\", \"ant\")", "'dog'"},
        {"len(\"\")", "0"},                      {"\"ab\" + \"\" == \"ab\"", "1"},
        {"(\"a\" + \"b\")[::-1] == \"ba\"", "1"}, {"x * 2 + \"c\"", "'aac'"},
        {"x[1:] ? 1 : 2", "2"},                    {"not \"\" and x and sorted(x) ? 3 : 4", "3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char src[512];
        snprintf(src, sizeof src, "vocab \"^ab\"; bos '^'; maxlen 4; num x, y, r;\nMap(%s) -> r;\n"
                                  "output r at every position;", cases[i].expr);
        Prog P;
        prog_open(&P, src, 0);
        ck_assert_msg(P.ir != NULL, "%s: %s", cases[i].expr, P.out);
        TfVal *cur = calloc((size_t)P.ir->n_regs, sizeof *cur), v;
        cur[reg(&P, "x")] = (TfVal){TF_VAL_TOKEN, 'a'};
        ExprEnv E = {.ir = P.ir, .cur = cur};
        const TfStmt *s = P.prog->stmts;
        while (s && s->kind != TF_STMT_OP) s = s->next;
        ck_assert_msg(expr_eval(&E, s->args[0].expr, &v) == 0, "%s: %s", cases[i].expr, E.msg);
        char got[64];
        val_label(P.ir, v, got, sizeof got);
        ck_assert_msg(strcmp(got, cases[i].want) == 0, "%s gives %s, Python %s", cases[i].expr, got,
                      cases[i].want);
        free(cur);
        prog_close(&P);
    }
}
END_TEST

/* A string made twice is one word (one code); the program's words keep theirs. */
START_TEST(test_strings_are_interned) {
    Prog P;
    prog_open(&P, "vocab [\"^\", \"cat\", \"tac\"]; bos \"^\"; maxlen 4; cat r;\n"
                  "r: Map(tokens[::-1]) -> r;\noutput r at every position;", 1);
    ck_assert_msg(P.diag.n_errors == 0, "%s", P.out);
    const TfRegFacts *r = &P.ir->regs[reg(&P, "r")].facts;
    ck_assert_int_eq(r->n_vals, 2); // 'tac' and 'cat': the vocabulary's own words
    for (int i = 0; i < r->n_vals; i++) ck_assert_int_eq(r->vals[i].kind, TF_VAL_TOKEN);
    int before = P.ir->words->n;
    char b[2];
    int n;
    int code = check_word(P.ir, "tacocat", 7);
    ck_assert_int_eq(check_word(P.ir, "tacocat", 7), code);
    ck_assert_int_eq(P.ir->words->n, before + 1);
    ck_assert_str_eq(check_code_text(P.ir, code, b, &n), "tacocat");
    ck_assert_int_eq(check_word(P.ir, "cat", 3), P.ir->vocab[1]); // the program's "cat"
    ck_assert_int_eq(check_word(P.ir, "x", 1), 'x');                 // one byte: its code
    prog_close(&P);
}
END_TEST

START_TEST(test_values_equal_within_the_bound_are_one) {
    TfVal v[5] = {val_num(0.1 + 0.2, 0), val_num(0.3, 0), val_num(1, 1), val_num(1 + 1e-6, 0),
                  {TF_VAL_TOKEN, 'a'}};
    double moved;
    ck_assert_int_eq(val_unique(v, 5, 1e-9, &moved), 4); // 0.1 + 0.2 and 0.3 are one value
    ck_assert_double_eq(moved, (0.1 + 0.2) - 0.3);      // the bound widens by their distance
    ck_assert_double_eq_tol(v[0].x, 0.3, 1e-15);
    ck_assert_double_eq(v[1].x, 1);
    ck_assert_double_eq(v[2].x, 1 + 1e-6); // a millionth apart: two values
    ck_assert_int_eq(v[3].kind, TF_VAL_TOKEN);
    TfVal w[2] = {val_num(0.1 + 0.2, 0), val_num(0.3, 0)};
    ck_assert_int_eq(val_unique(w, 2, 0, &moved), 2); // exact
}
END_TEST

/* The analysis's bounds on small programs: a table Map is within tens of roundings, a
 * linear one adds its coefficients times its inputs' bounds, Count's steps
 * one rounding per step; Clear and IsZero (seed ops) map each value. */
START_TEST(test_error_bounds) {
    Prog P;
    prog_open(&P,
              "vocab \"^ab12\"; bos '^'; maxlen 5; cat c, k; num n, m, z;\n"
              "c: Map(tokens == 'a' ? 1 : 2) -> c;\n"
              "n: Map(c == 1 ? 3 : -2) -> n;\n"
              "m: Map(2 * n + 1) -> m;\n"
              "k: Count(k.tokens == 'a') -> k;\n"
              "Clear(n);\n"
              "z: Map(c == 1 ? 0 : 1) -> z;\n"
              "IsZero(z);\n"
              "output c at every position;",
              1);
    ck_assert_msg(P.diag.n_errors == 0, "%s", P.out);
    // A table's pair of units adds a few terms near 1 each, and its column
    // the pair: tens of float32 roundings in any order of the sums
    // (compiler/bounds.c), times the result's size for a number (3, -2).
    double u = 1.0 / (1 << 24), ec = P.ir->regs[reg(&P, "c")].facts.err,
           en = P.ir->regs[reg(&P, "n")].facts.err;
    ck_assert_msg(ec > 8 * u && ec < 64 * u, "c within %g", ec);
    ck_assert_msg(en > 3 * 8 * u && en < 3 * 64 * u, "n within %g", en);
    // 2 n + 1 within 2 n's bound plus four roundings of |values| up to 2*3 + 1.
    ck_assert_double_eq_tol(P.ir->regs[reg(&P, "m")].facts.err, 2 * en + 7 * 4 * u, 1e-15);
    ck_assert_int_eq(P.ir->regs[reg(&P, "k")].facts.n_vals, 5); // counts 0..4
    ck_assert(P.ir->regs[reg(&P, "k")].facts.err < 0.25);
    // Clear: 3 -> 0, -2 stays.
    const TfRegFacts *n = &P.ir->regs[reg(&P, "n")].facts;
    ck_assert_int_eq(n->n_vals, 2);
    ck_assert_double_eq(n->vals[0].x, -2);
    ck_assert_double_eq(n->vals[1].x, 0);
    // IsZero: 0 -> 1, 1 -> 0 (within its bound), and 1 at the BOS.
    const TfRegFacts *z = &P.ir->regs[reg(&P, "z")].facts;
    ck_assert_int_eq(z->n_vals, 2);
    ck_assert_double_eq_tol(z->vals[0].x, 0, 1e-6);
    ck_assert_double_eq_tol(z->vals[1].x, 1, 1e-6);
    ck_assert(z->err < 1e-4);
    ck_assert_int_eq(z->bos_dirty, 1);
    prog_close(&P);
}
END_TEST

/* Two routes to the same rational are one value: pair_balance's opens -
 * closes reaches 1/6 as 1/2 - 1/3 and as 2/3 - 1/2 (in double, 2.8e-17
 * apart), and every difference the analysis lists is a different rational,
 * so the Map that reads it can put its steps between them. The bound widens
 * by how far apart the merged numbers lay (here less than 1e-15). */
START_TEST(test_same_rational_one_value) {
    Prog P;
    prog_open(&P,
              "vocab \"^()+-0\"; bos '^'; maxlen 7; num o, c, fo, fc, b; cat out;\n"
              "o: Map(tokens == '(') -> o;\n"
              "c: Map(tokens == ')') -> c;\n"
              "fo: Aggregate(k.indices <= q.indices, o, causal) -> fo;\n"
              "fc: Aggregate(k.indices <= q.indices, c, causal) -> fc;\n"
              "b: Map(fo - fc) -> b;\n"
              "out: Map(b < 0 ? '-' : b > 0 ? '+' : '0') -> out;\n"
              "output out at every position;",
              1);
    ck_assert_msg(P.diag.n_errors == 0, "%s", P.out);
    const TfRegFacts *b = &P.ir->regs[reg(&P, "b")].facts;
    ck_assert(1.0 / 2 - 1.0 / 3 != 2.0 / 3 - 1.0 / 2); // two routes, two doubles
    int sixth = 0;
    for (int i = 0; i < b->n_vals; i++) {
        if (fabs(b->vals[i].x - 1.0 / 6) < 1e-12) sixth++;
        // every pair of listed values is two different rationals (denominators <= 36)
        if (i > 0) ck_assert(b->vals[i].x - b->vals[i - 1].x > 1.0 / (36 * 36) - 1e-12);
    }
    ck_assert_int_eq(sixth, 1);
    // The differences of two fractions a/i - b/j with i, j <= 6 (13 fractions): 59 numbers.
    ck_assert_int_eq(b->n_vals, 59);
    double merged = fabs((2.0 / 3 - 1.0 / 2) - (1.0 / 2 - 1.0 / 3));
    ck_assert(b->err >= P.ir->regs[reg(&P, "fo")].facts.err + P.ir->regs[reg(&P, "fc")].facts.err + merged);
    prog_close(&P);
}
END_TEST

/* A numeric output carries its bound to the model. */
START_TEST(test_numeric_output_bound) {
    Prog P;
    prog_open(&P,
              "vocab \"^ab\"; bos '^'; maxlen 6; num a, f;\n"
              "a: Map(tokens == 'a' ? 1 : 0) -> a;\n"
              "f: Aggregate(k.indices <= q.indices, a, causal) -> f;\n"
              "output f at every position;",
              1);
    ck_assert_msg(P.diag.n_errors == 0, "%s", P.out);
    ck_assert(P.ir->output_error_bound > 0);
    ck_assert(P.ir->output_error_bound < 1e-5);
    ck_assert_double_eq(P.ir->output_error_bound, P.ir->regs[reg(&P, "f")].facts.err);
    prog_close(&P);
}
END_TEST

/* No compiled model is larger than its plan, and the plan is what the
 * --max-params limit compares. */
static size_t layer_params(const TfModel *m) {
    size_t n = 0;
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        int t[] = {ly->query, ly->key, ly->value, ly->output, ly->query_bias, ly->key_bias,
                   ly->value_bias, ly->output_bias, ly->fc1_weight, ly->fc1_bias,
                   ly->fc2_weight, ly->fc2_bias};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            if (t[i] >= 0) n += m->tensors[t[i]].nelem;
    }
    return n;
}

static void plan_bounds_model(const char *relpath, int opt) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", tf_env_path("TF_SOURCE_DIR"), relpath);
    size_t len;
    char *src = tf_read_file(path, &len);
    ck_assert_ptr_nonnull(src);
    Prog P;
    memset(&P, 0, sizeof P);
    P.f = fmemopen(P.out, sizeof P.out - 1, "w");
    diag_init(&P.diag, relpath, src, len, P.f);
    P.prog = tf_parse(src, len, &P.diag);
    P.ir = check_program(P.prog, &P.diag);
    ck_assert_ptr_nonnull(P.ir);
    values_analyze(P.ir, opt, &P.diag);
    TfPlans plans;
    ck_assert_int_eq(plans_make(P.ir, opt, TF_DEFAULT_MAX_PARAMS, &P.diag, &plans), 0);
    int n_errors;
    TfError err;
    // The plans are per op: the model before scheduling (compiler/schedule.h).
    TfCompileOptions opts = {.opt_level = opt, .max_params = 0, .no_schedule = 1};
    TfModel *m = compile_source_opts(relpath, src, len, &opts, P.f, &n_errors, &err);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->n_layers, plans.n_layers);
    size_t got = layer_params(m);
    ck_assert_msg(got <= plans.n_params - plans.n_embed, "%s -O%d: %zu parameters, planned %zu",
                  relpath, opt, got, plans.n_params - plans.n_embed);
    for (int l = 0; l < m->n_layers; l++) ck_assert_int_eq(m->layers[l].kind, plans.layers[l].kind);
    // Within a few biases of the plan (the plan counts a key bias always).
    ck_assert_msg(plans.n_params - plans.n_embed - got <= (size_t)(64 * m->n_layers),
                  "%s: planned %zu, built %zu", relpath, plans.n_params - plans.n_embed, got);
    model_free(m);
    plans_free(&plans);
    prog_close(&P);
    free(src);
}

START_TEST(test_plans_bound_the_models) {
    const char *progs[] = {"programs/adder.tfp", "programs/sort.tfp", "programs/add_decimal.tfp",
                           "programs/frac_prevs.tfp", "programs/prefix_sum.tfp",
                           "programs/dyck2.tfp"};
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        plan_bounds_model(progs[i], 1);
        if (i == 0) plan_bounds_model(progs[i], 0);
    }
}
END_TEST

/* The limit: refused before any weight exists, naming the op and the option. */
START_TEST(test_max_params_refuses) {
    const char *src = "vocab \"^abc\"; bos '^'; maxlen 20; cat x, y, z, w;\n"
                      "x: Map(indices) -> x;\ny: Map(indices) -> y;\nz: Map(indices) -> z;\n"
                      "w: Map(x + y * 20 + z * 400) -> w;\noutput tokens;";
    char out[4096] = "";
    FILE *f = fmemopen(out, sizeof out - 1, "w");
    int n_errors;
    TfError err;
    // Unscheduled: fusion would compose w with the three tables (one table over indices).
    TfCompileOptions opts = {.opt_level = 1, .max_params = 10000000, .no_schedule = 1};
    TfModel *m = compile_source_opts("t.tfp", src, strlen(src), &opts, f, &n_errors, &err);
    fclose(f);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(n_errors, 1);
    ck_assert_msg(strstr(out, "t.tfp:5:4: error: this Map becomes a layer of") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "--max-params") != NULL, "%s", out);
}
END_TEST

/* 100,000 registers: the lookups are hashed (this would take minutes with
 * a linear scan per name; the test asserts the result, not the time). */
START_TEST(test_many_registers) {
    int n = 100000;
    size_t cap = (size_t)n * 12 + 200;
    char *src = malloc(cap);
    size_t len = (size_t)snprintf(src, cap, "vocab \"ab\"; token ");
    for (int i = 0; i < n; i++) len += (size_t)snprintf(src + len, cap - len, "%sr%d", i ? "," : "", i);
    len += (size_t)snprintf(src + len, cap - len, ";\noutput r99999;");
    Prog P;
    prog_open(&P, src, 0);
    ck_assert_msg(P.ir != NULL, "%s", P.out);
    ck_assert_int_eq(P.ir->n_regs, n + 2);
    ck_assert_int_eq(check_find_reg(P.ir, "r77777"), 77777 + 2);
    ck_assert_int_eq(check_find_reg(P.ir, "r100000"), -1);
    ck_assert_int_eq(P.ir->output_reg, n + 1);
    prog_close(&P);
    free(src);
}
END_TEST


/* Item 3 of issue 11: values equal within the bound are one value (two means
 * reach the same rational two ways), and a staircase has no step between
 * neighbours with the same result (the fractions k/i up to 199 are closer
 * than their error bound, but only 0.5 separates different results). */
START_TEST(test_value_sets_do_not_explode) {
    Prog P;
    prog_open(&P,
              "vocab \"^()01\"; bos '^'; maxlen 200; num o, fo; cat half;\n"
              "o: Map(tokens == '(' ? 1 : 0) -> o;\n"
              "fo: Aggregate(k.indices <= q.indices, o, causal) -> fo;\n"
              "half: Map(fo >= 0.5 ? 1 : 0) -> half;\n"
              "output half at every position;",
              1);
    ck_assert_msg(P.diag.n_errors == 0, "%s", P.out);
    const TfIrOp *half = NULL;
    for (int i = 0; i < P.ir->n_ops; i++)
        if (P.ir->ops[i].plan && P.ir->ops[i].dest == reg(&P, "half")) half = &P.ir->ops[i];
    ck_assert_ptr_nonnull(half);
    ck_assert_int_eq(half->plan->form, TF_PLAN_STAIRCASE);
    ck_assert_int_gt(half->plan->n_x, 1000);
    ck_assert_int_eq(plans_staircase_steps(P.ir, half->plan), 1);
    prog_close(&P);
    // fo - fc: 1/3 - 1/6 and 1/6 are one value, whichever way they were reached.
    prog_open(&P,
              "vocab \"^()01\"; bos '^'; maxlen 12; num o, c, fo, fc, bal; cat up;\n"
              "o: Map(tokens == '(' ? 1 : 0) -> o;\n"
              "c: Map(tokens == ')' ? 1 : 0) -> c;\n"
              "fo: Aggregate(k.indices <= q.indices, o, causal) -> fo;\n"
              "fc: Aggregate(k.indices <= q.indices, c, causal) -> fc;\n"
              "bal: Map(fo - fc) -> bal;\n"
              "up: Map(bal > 0 ? 1 : 0) -> up;\n"
              "output up at every position;",
              1);
    ck_assert_msg(P.diag.n_errors == 0, "%s", P.out);
    const TfRegFacts *b = &P.ir->regs[reg(&P, "bal")].facts;
    ck_assert(b->known);
    for (int i = 1; i < b->n_vals; i++)
        ck_assert_msg(b->vals[i].x - b->vals[i - 1].x > 1e-9, "%.17g and %.17g", b->vals[i - 1].x,
                      b->vals[i].x);
    prog_close(&P);
}
END_TEST

/* Issue 27: what a Map reads is what occurs after the BOS, `indices` from 1
 * beside `tokens`: `x * indices` of a letter is never the empty string, and
 * `10 / indices` never divides by zero; the values of a table, a gated Map
 * and a linear one of `indices` leave out what only index 0 would make, and
 * the table still holds one value at every position. */
START_TEST(test_values_after_the_bos) {
    Prog P;
    prog_open(&P,
              "vocab \"^ab\"; bos '^'; maxlen 4; cat m; num x, d, g, s;\n"
              "m: Map(tokens * indices) -> m;\n"
              "d: Map(10 / indices) -> d;\n"
              "x: Map(tokens == 'a' ? 1 : 2) -> x;\n"
              "g: Map(x * indices) -> g;\n"
              "s: Map(x + 10 * indices) -> s;\n"
              "output tokens;",
              1);
    ck_assert_msg(P.diag.n_errors == 0, "%s", P.out);
    const TfRegFacts *m = &P.ir->regs[reg(&P, "m")].facts;
    ck_assert_int_eq(m->n_vals, 6); // a b aa bb aaa bbb
    char lab[48];
    for (int i = 0; i < m->n_vals; i++) {
        val_label(P.ir, m->vals[i], lab, sizeof lab);
        ck_assert_msg(strcmp(lab, "''") != 0, "m holds the empty string");
    }
    ck_assert(m->one_value);
    const double d[] = {10.0 / 3, 5, 10}, g[] = {1, 2, 3, 4, 6}, s[] = {11, 12, 21, 22, 31, 32};
    const struct { const char *name; const double *v; int n; } want[] = {
        {"d", d, 3}, {"g", g, 5}, {"s", s, 6}};
    for (int k = 0; k < 3; k++) {
        const TfRegFacts *f = &P.ir->regs[reg(&P, want[k].name)].facts;
        ck_assert_msg(f->known && f->n_vals == want[k].n, "%s: %d values", want[k].name, f->n_vals);
        for (int i = 0; i < f->n_vals; i++) ck_assert_double_eq_tol(f->vals[i].x, want[k].v[i], 1e-12);
    }
    prog_close(&P);
    // Without a BOS, index 0 is a position like any other.
    prog_open(&P, "vocab \"ab\"; maxlen 4; cat m;\nm: Map(tokens * indices) -> m;\noutput tokens;", 1);
    ck_assert_msg(P.diag.n_errors == 0, "%s", P.out);
    ck_assert_int_eq(P.ir->regs[reg(&P, "m")].facts.n_vals, 7); // '' too
    prog_close(&P);
}
END_TEST

/* A linear Map reads numbers: a categorical input among numeric ones
 * (`x + indices`) is a gated Map over its one-hot, a + b x per value, and
 * gives x + indices at every position (a linear plan read its first column
 * as the number). Run at both levels on "^abba": x is 1 for 'a', 2 for 'b'. */
START_TEST(test_linear_map_of_a_categorical) {
    const char *src = "vocab \"^ab\"; bos '^'; maxlen 6; num x, s, t;\n"
                      "x: Map(tokens == 'a' ? 1 : 2) -> x;\n"
                      "s: Map(x + 10 * indices) -> s;\n"
                      "t: Map(s - x) -> t;\n" // numeric inputs only: linear
                      "output s at every position;\n";
    Prog P;
    prog_open(&P, src, 1);
    ck_assert_msg(P.diag.n_errors == 0, "%s", P.out);
    for (int i = 0; i < P.ir->n_ops; i++) {
        const TfOpPlan *p = P.ir->ops[i].plan;
        if (p && P.ir->ops[i].dest == reg(&P, "s")) ck_assert_int_eq(p->form, TF_PLAN_GATED);
        if (p && P.ir->ops[i].dest == reg(&P, "t")) ck_assert_int_eq(p->form, TF_PLAN_LINEAR);
    }
    prog_close(&P);
    for (int opt = 0; opt <= 1; opt++) {
        char out[4096] = "";
        FILE *f = fmemopen(out, sizeof out - 1, "w");
        int n_errors;
        TfError err = {""};
        TfModel *m = compile_source("t.tfp", src, strlen(src), opt, f, &n_errors, &err);
        fclose(f);
        ck_assert_msg(m != NULL, "%s%s", out, err.msg);
        TfInfer *inf = infer_new(m, 1, &err);
        ck_assert_msg(inf != NULL, "%s", err.msg);
        int ids[5], len = 5;
        ck_assert_int_eq(infer_tokenize(m, "^abba", len, ids, &err), len);
        float got[5];
        const int *idp = ids;
        float *gp = got;
        ck_assert_msg(infer_every_position_values(inf, &idp, &len, 1, &gp, &err) == 0, "%s", err.msg);
        const float want[5] = {0, 11, 22, 32, 41};
        for (int p = 1; p < len; p++)
            ck_assert_msg(fabsf(got[p] - want[p]) < 1e-3f, "-O%d, position %d: %g, want %g", opt, p,
                          (double)got[p], (double)want[p]);
        infer_free(inf);
        model_free(m);
    }
}
END_TEST

/* `/` into a num register is true division; into a cat register floor. */
START_TEST(test_division_follows_the_destination) {
    Prog P;
    prog_open(&P,
              "vocab \"^ab\"; bos '^'; maxlen 4; cat x, q; num r;\n"
              "x: Map(tokens == 'a' ? 7 : 4) -> x;\n"
              "r: Map(x * 3 / 2) -> r;\n"
              "q: Map(x * 3 / 2) -> q;\n"
              "output q at every position;",
              1);
    ck_assert_msg(P.diag.n_errors == 0 || strstr(P.out, "no token") != NULL, "%s", P.out);
    const TfRegFacts *r = &P.ir->regs[reg(&P, "r")].facts, *q = &P.ir->regs[reg(&P, "q")].facts;
    ck_assert_int_eq(r->n_vals, 2);
    ck_assert_double_eq(r->vals[0].x, 6);
    ck_assert_double_eq(r->vals[1].x, 10.5);
    ck_assert_int_eq(q->n_vals, 2);
    ck_assert_double_eq(q->vals[0].x, 6);
    ck_assert_double_eq(q->vals[1].x, 10);
    prog_close(&P);
}
END_TEST

/* Program 1 of issue 11: the copy is accepted with a run-time check of its
 * destination after its layer, naming the source line and op. */
START_TEST(test_unproven_copy_gets_a_check) {
    const char *src = "vocab \"^abcd\"; bos '^'; maxlen 17; cat b;\n"
                      "b: Aggregate(k.indices <= q.indices, tokens) -> b;\n"
                      "output b at every position;\n";
    char out[4096] = "";
    FILE *f = fmemopen(out, sizeof out - 1, "w");
    int n_errors;
    TfError err;
    TfModel *m = compile_source("t.tfp", src, strlen(src), 1, f, &n_errors, &err);
    fclose(f);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(strstr(out, "t.tfp:2:4: warning: Aggregate"));
    ck_assert_int_eq(m->n_checks, 1);
    ck_assert_str_eq(m->regs[m->checks[0].reg].name, "b");
    // The check reads the attention's result (layer 0) at every position
    // after the BOS: no layer of its own (the runtime skips the BOS).
    ck_assert_int_eq(m->n_layers, 1);
    ck_assert_int_eq(m->checks[0].layer, 0);
    ck_assert_int_eq(m->layers[0].kind, TF_LAYER_ATTENTION);
    ck_assert_str_eq(m->layers[0].op, "Aggregate");
    ck_assert_int_eq(m->checks[0].line, 2);
    ck_assert_str_eq(m->checks[0].op, "Aggregate -> b");
    model_free(m);
    // A copy through `indices` is proven: no check.
    const char *shift = "vocab \"^abcd\"; bos '^'; maxlen 17; cat b;\n"
                        "b: Aggregate(k.indices == q.indices - 1, tokens, default: 'a') -> b;\n"
                        "output b at every position;\n";
    f = fmemopen(out, sizeof out - 1, "w");
    m = compile_source("t.tfp", shift, strlen(shift), 1, f, &n_errors, &err);
    fclose(f);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->n_checks, 0);
    model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("expr");
    TCase *tc = tcase_create("expr");
    tcase_add_test(tc, test_arithmetic_like_python);
    tcase_add_test(tc, test_tokens);
    tcase_add_test(tc, test_failures_say_why);
    tcase_add_test(tc, test_strings_like_python);
    tcase_add_test(tc, test_strings_are_interned);
    tcase_add_test(tc, test_values_equal_within_the_bound_are_one);
    tcase_add_test(tc, test_error_bounds);
    tcase_add_test(tc, test_same_rational_one_value);
    tcase_add_test(tc, test_numeric_output_bound);
    tcase_add_test(tc, test_plans_bound_the_models);
    tcase_add_test(tc, test_max_params_refuses);
    tcase_add_test(tc, test_many_registers);
    tcase_add_test(tc, test_value_sets_do_not_explode);
    tcase_add_test(tc, test_values_after_the_bos);
    tcase_add_test(tc, test_linear_map_of_a_categorical);
    tcase_add_test(tc, test_division_follows_the_destination);
    tcase_add_test(tc, test_unproven_copy_gets_a_check);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
