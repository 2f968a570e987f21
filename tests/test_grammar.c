/* test_grammar.c: lexer, parser, syntax tree and diagnostics text. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "checker.h"
#include "diag.h"
#include "parse.h"
#include "testutil.h"

typedef struct Parsed {
    TfProgram *prog;
    char *diags; /* everything reported */
    int n_errors;
} Parsed;

static Parsed parse_text(const char *src, size_t len) {
    Parsed p = {NULL, NULL, 0};
    size_t dlen = 0;
    FILE *out = open_memstream(&p.diags, &dlen);
    TfDiag d;
    diag_init(&d, "t.tfp", src, len, out);
    p.prog = tf_parse(src, len, &d);
    diag_finish(&d);
    fclose(out);
    p.n_errors = d.n_errors;
    ck_assert_ptr_nonnull(p.prog);
    return p;
}

static Parsed parse(const char *src) { return parse_text(src, strlen(src)); }

static void parsed_free(Parsed *p) {
    ast_free_program(p->prog);
    free(p->diags);
}

static char *dump(const TfProgram *prog) {
    char *out;
    size_t len;
    ast_dump(prog, &out, &len);
    return out;
}

START_TEST(test_adder_parses) {
    char path[2048];
    snprintf(path, sizeof path, "%s/programs/adder.tfp", tf_env_path("TF_SOURCE_DIR"));
    size_t len;
    char *src = tf_read_file(path, &len);
    ck_assert_ptr_nonnull(src);
    Parsed p = parse_text(src, len);
    ck_assert_msg(p.n_errors == 0, "%s", p.diags);
    char *d = dump(p.prog);
    ck_assert_str_eq(d, "vocab \"0123456789+= \\n\"\n"
                        "period 100\n"
                        "decl position left_pos, right_pos, out_pos\n"
                        "decl token left, right, out\n"
                        "decl scalar carry, distance\n"
                        "decl token final\n"
                        "op label=find_plus FindAndStore('+') -> left_pos\n"
                        "op label=find_equal FindAndStore('=') -> right_pos\n"
                        "op label=find_out FindAndStore('=') -> out_pos\n"
                        "op label=step_out StepPosition(out_pos: -1)\n"
                        "repeat 4 {\n"
                        "  op label=clear_lro Clear(left, right, out)\n"
                        "  op label=step_pos StepPosition(left_pos: -1, right_pos: -1, out_pos: +1)\n"
                        "  op label=read_left GetRelativeToken(left_pos + 0) -> left\n"
                        "  op label=read_right GetRelativeToken(right_pos + 0) -> right\n"
                        "  op label=multiply Multiply(left, right, carry) -> out\n"
                        "  op label=diff_pos DiffPos(pos, out_pos) -> distance\n"
                        "  op label=is_zero IsZero(distance)\n"
                        "  op label=copy_out CopyOnMatch(distance, out) -> final\n"
                        "}\n"
                        "output final\n"
                        "generate 4\n");
    free(d);
    free(src);
    parsed_free(&p);
}
END_TEST

START_TEST(test_every_argument_kind) {
    Parsed p = parse("Op(a, 'x', 3, -4, +5, b + 6, c - 7, d: 8, e: -9, f: +10, '\\n', '\\'');");
    ck_assert_int_eq(p.n_errors, 0);
    const TfStmt *s = p.prog->stmts;
    ck_assert_int_eq(s->kind, TF_STMT_OP);
    ck_assert_int_eq(s->n_args, 12);
    // The parser keeps each argument as an expression; the checker says its shape.
    const TfArgKind kinds[] = {TF_ARG_NAME,   TF_ARG_CHAR,   TF_ARG_INT,  TF_ARG_INT,
                               TF_ARG_INT,    TF_ARG_OFFSET, TF_ARG_OFFSET, TF_ARG_STEP,
                               TF_ARG_STEP,   TF_ARG_STEP,   TF_ARG_CHAR, TF_ARG_CHAR};
    const long values[] = {0, 0, 3, -4, 5, 6, -7, 8, -9, 10, 0, 0};
    TfArgShape sh[12];
    for (int i = 0; i < 12; i++) {
        ck_assert_ptr_nonnull(s->args[i].expr);
        sh[i] = check_arg_shape(&s->args[i]);
        ck_assert_int_eq(sh[i].kind, kinds[i]);
        if (kinds[i] != TF_ARG_NAME && kinds[i] != TF_ARG_CHAR)
            ck_assert_int_eq(sh[i].value, values[i]);
    }
    ck_assert_int_eq(sh[1].ch, 'x');
    ck_assert_int_eq(sh[10].ch, '\n');
    ck_assert_int_eq(sh[11].ch, '\'');
    ck_assert_str_eq(sh[6].name->text, "c");
    ck_assert_str_eq(sh[7].name->text, "d");
    ck_assert_int_eq(s->args[5].expr->kind, TF_EXPR_BINARY);
    ck_assert_ptr_null(s->dest.text);
    ck_assert_ptr_null(s->label.text);
    char *d = dump(p.prog);
    ck_assert_str_eq(d, "op Op(a, 'x', 3, -4, +5, b + 6, c - 7, d: 8, e: -9, f: +10, '\\n', '\\'')\n");
    free(d);
    parsed_free(&p);
}
END_TEST

/* `**` binds tighter than unary minus and groups to the right, as Python's. */
START_TEST(test_power_precedence) {
    Parsed p = parse("m: Map(-x ** 2 * y + 2 ** 3 ** z) -> r;");
    ck_assert_msg(p.n_errors == 0, "%s", p.diags);
    char *d = dump(p.prog);
    ck_assert_str_eq(d, "op label=m Map(((-(x ** 2)) * y) + (2 ** (3 ** z))) -> r\n");
    free(d);
    parsed_free(&p);
}
END_TEST

START_TEST(test_escapes_in_vocab) {
    Parsed p = parse("vocab \"a\\n\\t\\s\\\\\\\"\\0\\r'\";");
    ck_assert_msg(p.n_errors == 0, "%s", p.diags);
    const TfStmt *s = p.prog->stmts;
    ck_assert_int_eq(s->vocab_len, 9);
    for (int i = 0; i < 9; i++) ck_assert_int_eq(s->vocab_codes[i], (unsigned char)"a\n\t \\\"\0\r'"[i]);
    // each byte knows the text it came from: a, \n, \t, ...
    ck_assert_int_eq(s->vocab_locs[0].col, 8);
    ck_assert_int_eq(s->vocab_locs[1].col, 9);
    ck_assert_int_eq(s->vocab_locs[1].end_col, 10);
    ck_assert_int_eq(s->vocab_locs[8].col, 23); /* the quote after \\r */
    parsed_free(&p);
}
END_TEST

/* vocab [...]: one code per string, words interned once, a one-character
 * string the same code as its character literal; the dump reads back. */
START_TEST(test_vocab_list_and_words) {
    Parsed p = parse("vocab [\"^\", \"the\", \"cat\", \"10\"];\nbos \"^\";\n"
                     "generate until \"cat\";\nm: Map(tokens == \"the\" ? 1 : 0) -> x;");
    ck_assert_msg(p.n_errors == 0, "%s", p.diags);
    const TfStmt *s = p.prog->stmts;
    ck_assert_int_eq(s->vocab_len, 4);
    ck_assert_int_eq(s->vocab_list, 1);
    ck_assert_int_eq(s->vocab_codes[0], '^');
    ck_assert_int_eq(s->vocab_codes[1], TF_TOKEN_WORD + 0);
    ck_assert_int_eq(s->vocab_codes[3], TF_TOKEN_WORD + 2);
    ck_assert_int_eq(p.prog->n_words, 3);
    ck_assert_str_eq(p.prog->words[1], "cat");
    ck_assert_int_eq(s->vocab_locs[1].col, 13);
    ck_assert_int_eq(s->next->ch, '^');
    ck_assert_int_eq(s->next->next->ch, TF_TOKEN_WORD + 1);
    char *d = dump(p.prog);
    ck_assert_str_eq(d, "vocab [\"^\", \"the\", \"cat\", \"10\"]\nbos '^'\ngenerate 0 until \"cat\"\n"
                        "op label=m Map(((tokens == \"the\") ? 1 : 0)) -> x\n");
    free(d);
    parsed_free(&p);
}
END_TEST

START_TEST(test_vocab_output_only_and_utf8) {
    // Output-only tokens follow the input ones; UTF-8 bytes are copied, located at the
    // character's first byte.
    Parsed p = parse("vocab [\"^\", \"\xf0\x9f\x98\x8a\"] output [\"None\", \"not spam\"];\n"
                     "vocab \"ab\" output [\"c\"];");
    ck_assert_msg(p.n_errors == 0, "%s", p.diags);
    const TfStmt *s = p.prog->stmts;
    ck_assert_int_eq(s->vocab_len, 4);
    ck_assert_int_eq(s->vocab_n_out, 2);
    ck_assert_str_eq(p.prog->words[0], "\xf0\x9f\x98\x8a");
    ck_assert_str_eq(p.prog->words[2], "not spam");
    ck_assert_int_eq(s->vocab_locs[2].col, 29);
    ck_assert_int_eq(s->next->vocab_len, 3);
    ck_assert_int_eq(s->next->vocab_n_out, 1);
    ck_assert_int_eq(s->next->vocab_codes[2], 'c');
    char *d = dump(p.prog);
    ck_assert_str_eq(d, "vocab [\"^\", \"\xf0\x9f\x98\x8a\"] output [\"None\", \"not spam\"]\n"
                        "vocab \"ab\" output [\"c\"]\n");
    free(d);
    parsed_free(&p);
    // Bytes that are not UTF-8: one error a literal, at the first.
    p = parse("vocab [\"^\", \"a\x80\x80\", \"\xe0\x80\xaf\"];");
    ck_assert_int_eq(p.n_errors, 2);
    ck_assert_msg(strstr(p.diags, "1:15: error: byte 0x80 is not valid UTF-8 in a literal") != NULL,
                  "%s", p.diags);
    ck_assert_msg(strstr(p.diags, "1:21: error: byte 0xe0 is not valid UTF-8 in a literal") != NULL,
                  "%s", p.diags);
    parsed_free(&p);
}
END_TEST

START_TEST(test_locations) {
    Parsed p = parse("# comment\n"
                     "  lbl: Op(left_pos + 12) -> dst ;\n"
                     "repeat 3 {\n"
                     "\tOp(x);\n"
                     "}\n");
    ck_assert_int_eq(p.n_errors, 0);
    const TfStmt *s = p.prog->stmts;
    ck_assert_int_eq(s->loc.line, 2);
    ck_assert_int_eq(s->loc.col, 3);
    ck_assert_int_eq(s->loc.end_col, 33); /* the ; */
    ck_assert_int_eq(s->label.loc.col, 3);
    ck_assert_int_eq(s->label.loc.end_col, 5);
    ck_assert_int_eq(s->op.loc.col, 8);
    ck_assert_int_eq(s->args[0].loc.col, 11);
    ck_assert_int_eq(s->args[0].loc.end_col, 23);
    ck_assert_int_eq(check_arg_shape(&s->args[0]).value_loc.col, 22);
    ck_assert_int_eq(s->dest.loc.col, 29);
    ck_assert_int_eq(s->dest.loc.end_col, 31);
    const TfStmt *r = s->next;
    ck_assert_int_eq(r->kind, TF_STMT_REPEAT);
    ck_assert_int_eq(r->value, 3);
    ck_assert_int_eq(r->value_loc.col, 8);
    ck_assert_int_eq(r->loc.line, 3);
    ck_assert_int_eq(r->loc.end_line, 5);
    ck_assert_int_eq(r->body->loc.line, 4);
    ck_assert_int_eq(r->body->loc.col, 2); /* a tab is one column */
    parsed_free(&p);
}
END_TEST

START_TEST(test_nested_repeat) {
    Parsed p = parse("repeat 2 { A(); repeat 3 { B(); } C(); }");
    ck_assert_int_eq(p.n_errors, 0);
    char *d = dump(p.prog);
    ck_assert_str_eq(d, "repeat 2 {\n  op A()\n  repeat 3 {\n    op B()\n  }\n  op C()\n}\n");
    free(d);
    parsed_free(&p);
}
END_TEST

START_TEST(test_lexical_errors) {
    static const struct {
        const char *src, *message;
    } cases[] = {
        {"token a; @", "t.tfp:1:10: error: stray '@' in program\n"},
        {"vocab \"ab", "t.tfp:1:7: error: unterminated string literal\n"},
        {"Op('a", "t.tfp:1:4: error: unterminated character literal\n"},
        {"vocab \"\\q\";", "t.tfp:1:8: error: unknown escape sequence '\\q'\n"},
        {"Op('');", "t.tfp:1:4: error: empty character literal\n"},
        {"Op('ab');", "t.tfp:1:4: error: character literal holds more than one character\n"},
        {"period 12345678901;", "t.tfp:1:8: error: integer literal too large\n"},
        {"token a;\x01", "t.tfp:1:9: error: stray '\\x01' in program\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Parsed p = parse(cases[i].src);
        ck_assert_int_ge(p.n_errors, 1);
        ck_assert_msg(strncmp(p.diags, cases[i].message, strlen(cases[i].message)) == 0,
                      "for %s:\n%s\nwant first line %s", cases[i].src, p.diags, cases[i].message);
        parsed_free(&p);
    }
}
END_TEST

START_TEST(test_several_errors_recovered) {
    Parsed p = parse("token a,;\n"
                     "Op(a b);\n"
                     "Op(a) ->;\n"
                     "output a;\n");
    ck_assert_int_eq(p.n_errors, 3);
    // What follows the errors still parses.
    const TfStmt *last = p.prog->stmts;
    while (last && last->next) last = last->next;
    ck_assert_ptr_nonnull(last);
    ck_assert_int_eq(last->kind, TF_STMT_OUTPUT);
    parsed_free(&p);
}
END_TEST

START_TEST(test_diagnostic_format) {
    const char *src = "a\n\tbc defg;\n";
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    TfDiag d;
    diag_init(&d, "x.tfp", src, strlen(src), f);
    TfLoc loc = {2, 5, 2, 8};
    diag_error(&d, loc, "bad %s", "thing");
    diag_hint(&d, "try %d", 3);
    TfLoc none = {0, 0, 0, 0};
    diag_note(&d, none, "whole file");
    diag_file_error(&d, "no output");
    fclose(f);
    ck_assert_str_eq(out, "x.tfp:2:5: error: bad thing\n"
                          "    2 | \tbc defg;\n"
                          "      | \t   ^~~~\n"
                          "hint: try 3\n"
                          "x.tfp: note: whole file\n"
                          "x.tfp: error: no output\n");
    ck_assert_int_eq(d.n_errors, 2);
    free(out);
}
END_TEST

START_TEST(test_too_many_errors_stop) {
    char src[4096] = "";
    for (int i = 0; i < 80; i++) strcat(src, "@\n");
    Parsed p = parse(src);
    ck_assert_int_eq(p.n_errors, 80);
    int lines = 0;
    for (char *c = p.diags; *c; c++) lines += *c == '\n';
    ck_assert_int_eq(lines, 3 * TF_DIAG_MAX_ERRORS + 1);
    ck_assert_ptr_nonnull(strstr(p.diags, "t.tfp: 60 more errors not shown\n"));
    parsed_free(&p);
}
END_TEST

/* 4 MB of random bytes took 17 s (the text of every syntax error was found
 * by scanning the source from its start): now the errors past the shown
 * ones cost nothing but a count, and the output stays small. */
START_TEST(test_random_megabytes_stay_bounded) {
    size_t len = 4u << 20;
    char *src = malloc(len);
    unsigned seed = 13;
    for (size_t i = 0; i < len; i++) {
        seed = seed * 1103515245u + 12345u;
        src[i] = (char)(seed >> 16);
    }
    Parsed p = parse_text(src, len);
    ck_assert_int_gt(p.n_errors, TF_DIAG_MAX_ERRORS);
    ck_assert_uint_lt(strlen(p.diags), 3 * TF_DIAG_MAX_ERRORS * (TF_DIAG_MAX_TEXT + 40) + 100);
    ck_assert_ptr_nonnull(strstr(p.diags, " more errors not shown\n"));
    parsed_free(&p);
    free(src);
}
END_TEST

START_TEST(test_random_input_never_crashes) {
    unsigned seed = 4242;
    const char alphabet[] = "vocab token position repeat{}();:,->+-'\"\\#\n\t 0123456789abcXYZ_@\x01\xff";
    for (int round = 0; round < 2000; round++) {
        char buf[128];
        int len = rand_r(&seed) % (int)sizeof buf;
        for (int i = 0; i < len; i++) buf[i] = alphabet[rand_r(&seed) % (sizeof alphabet - 1)];
        Parsed p = parse_text(buf, (size_t)len);
        ck_assert_int_ge(p.n_errors, 0);
        parsed_free(&p);
    }
}
END_TEST

START_TEST(test_model_block) {
    Parsed p = parse("vocab \"ab\";\n"
                     "model { d_model 8; dropout 0.25; lr 3e-3; activation gelu;\n"
                     "        predict classes \"no\", \"yes\" \"maybe\"; }\n");
    ck_assert_msg(p.n_errors == 0, "%s", p.diags);
    char *d = dump(p.prog);
    ck_assert_str_eq(d, "vocab \"ab\"\n"
                        "model {\n"
                        "  d_model 8\n"
                        "  dropout 0.25\n"
                        "  lr 0.003\n"
                        "  activation gelu\n"
                        "  predict classes, \"no\", \"yes\", \"maybe\"\n"
                        "}\n");
    const TfSetting *st = &p.prog->stmts->next->settings[1];
    ck_assert_int_eq(st->values[0].kind, TF_VALUE_NUMBER);
    ck_assert_int_eq(st->key.loc.line, 2);
    ck_assert_int_eq(st->key.loc.col, 20);
    free(d);
    parsed_free(&p);
    // A bad setting is reported and the parser goes on to the next one.
    p = parse("model { d_model 8; heads; seed 1; }\nvocab \"a\";\n");
    ck_assert_int_eq(p.n_errors, 1);
    ck_assert_ptr_nonnull(strstr(p.diags, "t.tfp:1:25: error: expected"));
    d = dump(p.prog);
    ck_assert_str_eq(d, "model {\n  d_model 8\n  seed 1\n}\nvocab \"a\"\n");
    free(d);
    parsed_free(&p);
}
END_TEST

int main(void) {
    Suite *s = suite_create("grammar");
    TCase *tc = tcase_create("grammar");
    tcase_add_test(tc, test_adder_parses);
    tcase_add_test(tc, test_every_argument_kind);
    tcase_add_test(tc, test_escapes_in_vocab);
    tcase_add_test(tc, test_power_precedence);
    tcase_add_test(tc, test_vocab_list_and_words);
    tcase_add_test(tc, test_vocab_output_only_and_utf8);
    tcase_add_test(tc, test_locations);
    tcase_add_test(tc, test_nested_repeat);
    tcase_add_test(tc, test_lexical_errors);
    tcase_add_test(tc, test_several_errors_recovered);
    tcase_add_test(tc, test_diagnostic_format);
    tcase_add_test(tc, test_too_many_errors_stop);
    tcase_add_test(tc, test_random_megabytes_stay_bounded);
    tcase_add_test(tc, test_random_input_never_crashes);
    tcase_add_test(tc, test_model_block);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
