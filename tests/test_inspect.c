/* test_inspect.c: register decoding, captures, traces and reports.
 *
 * Decoding is checked on hand-made rows (clean, empty and flagged values of
 * each register kind); captures and traces on the adder; the broken adder
 * (programs/adder.tfp without its `step_out: StepPosition(out_pos: -1)`) on
 * the question the trace exists for: which layer goes wrong first.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compare.h"
#include "compile.h"
#include "infer.h"
#include "inspect.h"
#include "session.h"
#include "model.h"
#include "report.h"
#include "testmodel.h"
#include "testutil.h"

#define PI 3.14159265358979323846

/* A model with only what decoding reads: vocabulary "abc", period 10. */
static TfModel *tiny_model(void) {
    TfModel *m = model_new();
    ck_assert_ptr_nonnull(m);
    m->n_vocab = 3;
    m->vocab = malloc(3);
    memcpy(m->vocab, "abc", 3);
    m->period = 10;
    m->d_model = 6;
    return m;
}

static TfDecoded decode(const TfModel *m, TfRegKind kind, int size, const float *v) {
    TfRegister reg = {.name = "r", .kind = kind, .offset = 0, .size = size};
    TfDecoded d;
    inspect_decode(m, &reg, v, &d);
    return d;
}

/* The labels of a layer that holds several ops (model.h's TfLayerPart). */
START_TEST(test_part_labels) {
    TfLayerPart ap[] = {{"n", "Count", 10, 0, 1}, {"hist", "Aggregate", 11, 1, 2}};
    TfLayerPart fp[] = {{"out", "Map", 12, 0, 4}, {"x", NULL, 13, 4, 1}, {"y", NULL, 0, 5, 1}};
    TfLayer a = model_layer_init(TF_LAYER_ATTENTION), f = model_layer_init(TF_LAYER_MLP);
    a.name = "n+hist", a.op = "Count", a.line = 10, a.n_heads = 3, a.parts = ap, a.n_parts = 2;
    f.name = "out+x+y", f.op = "Map", f.line = 12, f.d_hidden = 6, f.parts = fp, f.n_parts = 3;
    ck_assert_int_eq(inspect_part_of(&a, 0), 0);
    ck_assert_int_eq(inspect_part_of(&a, 1), 1);
    ck_assert_int_eq(inspect_part_of(&a, 2), 1);
    ck_assert_int_eq(inspect_part_of(&a, 3), -1);
    ck_assert_int_eq(inspect_part_of(&f, 5), 2);
    char buf[256];
    const int UL = INSPECT_PART_UNITS | INSPECT_PART_LINE;
    inspect_part_text(&a, 0, UL, buf, sizeof buf);
    ck_assert_str_eq(buf, "head 0: n (Count, line 10)");
    inspect_part_text(&a, 1, UL, buf, sizeof buf);
    ck_assert_str_eq(buf, "heads 1-2: hist (Aggregate, line 11)");
    inspect_part_text(&a, 1, INSPECT_PART_LINE, buf, sizeof buf);
    ck_assert_str_eq(buf, "hist (Aggregate, line 11)");
    inspect_part_text(&a, 1, INSPECT_PART_UNITS, buf, sizeof buf);
    ck_assert_str_eq(buf, "heads 1-2: hist (Aggregate)");
    inspect_part_text(&f, 1, INSPECT_PART_UNITS, buf, sizeof buf);
    ck_assert_str_eq(buf, "unit 4: x");
    inspect_part_text(&f, 0, UL, buf, sizeof buf);
    ck_assert_str_eq(buf, "units 0-3: out (Map, line 12)");
    inspect_part_text(&f, 1, UL, buf, sizeof buf);
    ck_assert_str_eq(buf, "unit 4: x (line 13)");
    inspect_part_text(&f, 2, UL, buf, sizeof buf);
    ck_assert_str_eq(buf, "unit 5: y");
    inspect_layer_text(&a, 1, buf, sizeof buf);
    ck_assert_str_eq(buf, "attention; head 0: n (Count, line 10); heads 1-2: hist (Aggregate, line 11)");
    inspect_layer_text(&f, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "units 0-3: out (Map, line 12); unit 4: x (line 13); unit 5: y");
    // Cut to the buffer, and saying so.
    char small[24];
    inspect_layer_text(&a, 1, small, sizeof small);
    ck_assert_str_eq(small, "attention; head 0: n...");
    // A layer of one op: its own op and line.
    a.n_parts = 0;
    inspect_layer_text(&a, 1, buf, sizeof buf);
    ck_assert_str_eq(buf, "attention, Count, line 10");
    inspect_layer_text(&a, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "Count, line 10");
    a.op = NULL;
    inspect_layer_text(&a, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "attention, line 10");
    ck_assert_int_eq(inspect_part_of(&a, 0), -1);
}
END_TEST

START_TEST(test_decode_token) {
    TfModel *m = tiny_model();
    float hot[] = {0, 1, 0};
    TfDecoded d = decode(m, TF_REG_TOKEN, 3, hot);
    ck_assert_int_eq(d.status, TF_DECODE_CLEAN);
    ck_assert_int_eq(d.index, 1);
    ck_assert_float_eq_tol(d.margin, 1, 1e-6);

    float nearly[] = {0.03f, 0.97f, -0.02f}; /* within the tolerance */
    d = decode(m, TF_REG_TOKEN, 3, nearly);
    ck_assert_int_eq(d.status, TF_DECODE_CLEAN);
    ck_assert_int_eq(d.index, 1);
    ck_assert_int_eq(d.runner_up, 0);
    ck_assert_float_eq_tol(d.margin, 0.94f, 1e-6);

    float two[] = {0.6f, 0, 0.4f}; /* a mix of 'a' and 'c' */
    d = decode(m, TF_REG_TOKEN, 3, two);
    ck_assert_int_eq(d.status, TF_DECODE_FLAGGED);
    ck_assert_int_eq(d.index, 0);
    ck_assert_int_eq(d.runner_up, 2);
    ck_assert_float_eq_tol(d.margin, 0.2f, 1e-6);
    ck_assert_msg(strstr(d.why, "not one-hot") && strstr(d.why, "'c'"), "why: %s", d.why);

    float weak[] = {0, 0, 0.5f}; /* one value, but not 1 */
    d = decode(m, TF_REG_TOKEN, 3, weak);
    ck_assert_int_eq(d.status, TF_DECODE_FLAGGED);
    ck_assert_int_eq(d.index, 2);
    ck_assert_msg(strstr(d.why, "0.5") != NULL, "why: %s", d.why);

    float zero[] = {0, 0.001f, 0};
    ck_assert_int_eq(decode(m, TF_REG_TOKEN, 3, zero).status, TF_DECODE_EMPTY);
    float nan_[] = {0, NAN, 1};
    ck_assert_int_eq(decode(m, TF_REG_TOKEN, 3, nan_).status, TF_DECODE_FLAGGED);
    model_free(m);
}
END_TEST

/* A categorical register decodes as the label of its hot column, with the
 * token register's flags; its label shows in the why text. */
START_TEST(test_decode_categorical) {
    TfModel *m = tiny_model();
    char *labels[] = {"0", "16", "'a'", "T"};
    TfRegister reg = {.name = "c", .kind = TF_REG_CATEGORICAL, .offset = 1, .size = 4,
                      .values = labels};
    float row[5] = {9, 0.02f, 0.01f, 0.98f, 0}; /* column 0 is not the register's */
    TfDecoded d;
    inspect_decode(m, &reg, row, &d);
    ck_assert_int_eq(d.status, TF_DECODE_CLEAN);
    ck_assert_int_eq(d.index, 2);
    ck_assert_int_eq(d.runner_up, 0);
    ck_assert_float_eq_tol(d.margin, 0.96f, 1e-6);
    char buf[8];
    inspect_value_text(&reg, d.index, buf, sizeof buf);
    ck_assert_str_eq(buf, "'a'");
    inspect_value_text(&reg, 7, buf, sizeof buf);
    ck_assert_str_eq(buf, "#7");

    float mix[5] = {0, 0, 0.5f, 0, 0.5f};
    inspect_decode(m, &reg, mix, &d);
    ck_assert_int_eq(d.status, TF_DECODE_FLAGGED);
    ck_assert_str_eq(d.why, "not one-hot: 2 values away from 0; '16' 0.5, 'T' 0.5");
    float low[5] = {0, 0, 0, 0, 0.5f};
    inspect_decode(m, &reg, low, &d);
    ck_assert_int_eq(d.status, TF_DECODE_FLAGGED);
    ck_assert_str_eq(d.why, "not one-hot: 'T' is 0.5, not 1");
    float zero[5] = {1, 0, 0, 0, 0};
    inspect_decode(m, &reg, zero, &d);
    ck_assert_int_eq(d.status, TF_DECODE_EMPTY);
    model_free(m);
}
END_TEST

START_TEST(test_decode_position) {
    TfModel *m = tiny_model(); /* period 10 */
    for (int p = -3; p < 13; p++) {
        float v[2] = {(float)sin(2 * PI * p / 10), (float)cos(2 * PI * p / 10)};
        TfDecoded d = decode(m, TF_REG_POSITION, 2, v);
        ck_assert_int_eq(d.status, TF_DECODE_CLEAN);
        ck_assert_int_eq(d.index, ((p % 10) + 10) % 10); /* -1 is 9, 12 is 2 */
        ck_assert_float_eq_tol(d.margin, 1, 1e-5);
    }
    float half[2] = {(float)sin(2 * PI * 3.5 / 10), (float)cos(2 * PI * 3.5 / 10)};
    TfDecoded d = decode(m, TF_REG_POSITION, 2, half);
    ck_assert_int_eq(d.status, TF_DECODE_FLAGGED);
    ck_assert_float_eq_tol(d.value, 3.5f, 1e-4);
    ck_assert_msg(strstr(d.why, "between 3 and 4") != NULL, "why: %s", d.why);

    float wrap[2] = {(float)sin(2 * PI * 9.5 / 10), (float)cos(2 * PI * 9.5 / 10)};
    d = decode(m, TF_REG_POSITION, 2, wrap);
    ck_assert_msg(strstr(d.why, "between 9 and 0") != NULL, "why: %s", d.why);

    // Two positions averaged: the angle is between them and the vector short.
    float mix[2] = {(float)(sin(2 * PI * 1 / 10) + sin(2 * PI * 4 / 10)) / 2,
                    (float)(cos(2 * PI * 1 / 10) + cos(2 * PI * 4 / 10)) / 2};
    d = decode(m, TF_REG_POSITION, 2, mix);
    ck_assert_int_eq(d.status, TF_DECODE_FLAGGED);
    ck_assert_msg(strstr(d.why, "length") != NULL, "why: %s", d.why);

    float zero[2] = {0, 0};
    ck_assert_int_eq(decode(m, TF_REG_POSITION, 2, zero).status, TF_DECODE_EMPTY);
    model_free(m);
}
END_TEST

START_TEST(test_decode_scalar) {
    TfModel *m = tiny_model();
    float v[] = {-2.5f};
    TfDecoded d = decode(m, TF_REG_SCALAR, 1, v);
    ck_assert_int_eq(d.status, TF_DECODE_CLEAN);
    ck_assert_float_eq(d.value, -2.5f);
    float inf[] = {INFINITY};
    ck_assert_int_eq(decode(m, TF_REG_SCALAR, 1, inf).status, TF_DECODE_FLAGGED);
    model_free(m);
}
END_TEST

/* The adder's text with the line starting `drop` removed (NULL: as is). */
static char *adder_source(const char *drop) {
    char path[2048];
    snprintf(path, sizeof path, "%s/programs/adder.tfp", tf_env_path("TF_SOURCE_DIR"));
    size_t len = 0;
    char *src = tf_read_file(path, &len);
    ck_assert_ptr_nonnull(src);
    if (drop) {
        char *line = strstr(src, drop);
        ck_assert_msg(line != NULL && (line == src || line[-1] == '\n'), "no line '%s'", drop);
        char *end = strchr(line, '\n');
        memmove(line, end + 1, strlen(end + 1) + 1);
    }
    return src;
}

static TfCapture *capture_text(const TfModel *m, const char *text) {
    int ids[128], n = (int)strlen(text);
    TfError err = {""};
    ck_assert_int_eq(infer_tokenize(m, text, n, ids, &err), n);
    TfCapture *c = inspect_capture(m, ids, n, &err);
    ck_assert_msg(c != NULL, "%s", err.msg);
    return c;
}

/* Fails unless `want` occurs in the trace `t` (printed to stderr then:
 * Check's messages are too short for a whole trace). */
static void expect_in(const char *t, const char *want) {
    if (!strstr(t, want)) fprintf(stderr, "--- trace ---\n%s--- lacks ---\n%s\n", t, want);
    ck_assert_msg(strstr(t, want) != NULL, "the trace lacks \"%.200s\"", want);
}

/* The trace's row starting with `label` (after its 4-space indent), its
 * cells separated by single spaces (the column width follows the widest
 * scalar): "left_pos 0 0 4". */
static void expect_row(const char *t, const char *want) {
    char label[64];
    snprintf(label, sizeof label, "\n    %.*s ", (int)strcspn(want, " "), want);
    const char *r = strstr(t, label);
    ck_assert_msg(r != NULL, "the trace has no row \"%s\"", label + 1);
    char got[512];
    size_t n = 0;
    for (r += 5; *r && *r != '\n' && n + 1 < sizeof got; r++)
        if (*r != ' ' || (n && got[n - 1] != ' ')) got[n++] = *r;
    got[n] = 0;
    ck_assert_str_eq(got, want);
}

static char *trace_text(const TfCapture *c) {
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    inspect_print_trace(c, f);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

START_TEST(test_capture_adder) {
    char *src = adder_source(NULL);
    TfModel *m = tf_compile_text(src);
    free(src);
    TfCapture *c = capture_text(m, "0999+0111=");
    ck_assert_int_eq(c->n_pos, 10);
    ck_assert_int_eq(c->n_blocks, m->n_layers + 1);
    ck_assert_int_eq(m->vocab[c->next], '0'); /* 0999+0111=0111: the first digit */

    // Block 0 is the embedding: token one-hot plus position.
    const float *te = m->tensors[m->tok_embed].data, *pe = m->tensors[m->pos_embed].data;
    for (int p = 0; p < 10; p++)
        for (int i = 0; i < m->d_model; i++)
            ck_assert_float_eq_tol(capture_row(c, 0, p)[i],
                                   te[c->tokens[p] * m->d_model + i] + pe[p * m->d_model + i],
                                   1e-6);

    // find_plus writes left_pos and nothing else; every position points at '+'
    // (4) once the '+' is visible.
    ck_assert_str_eq(m->layers[0].name, "find_plus");
    const TfRegister *left_pos = &m->regs[model_find_register(m, "left_pos")];
    for (int r = 0; r < m->n_regs; r++)
        ck_assert_int_eq(inspect_layer_wrote(c, 0, &m->regs[r]), &m->regs[r] == left_pos);
    for (int p = 4; p < 10; p++) {
        TfDecoded d;
        inspect_decode(m, left_pos, capture_row(c, 1, p), &d);
        ck_assert_int_eq(d.status, TF_DECODE_CLEAN);
        ck_assert_int_eq(d.index, 4);
    }
    // Attention rows are distributions over the visible keys; causal rows
    // see nothing after themselves.
    for (int q = 0; q < 10; q++) {
        double sum = 0;
        for (int k = 0; k < 10; k++) {
            float w = capture_att(c, 0, 0, q, k);
            if (k > q) ck_assert_float_eq(w, 0);
            sum += w;
        }
        ck_assert_double_eq_tol(sum, 1, 1e-5);
    }
    ck_assert_float_gt(capture_att(c, 0, 0, 9, 4), 0.99f); /* '=' looks at '+' */
    ck_assert_ptr_null(c->att[3]);                         /* step_out is an MLP */

    // The trace names layers with op and line, decodes, and reads the output.
    char *t = trace_text(c);
    expect_in(t, "layer 0 find_plus  (attention, FindAndStore, line 39)");
    expect_row(t, "left_pos 0 0 0 0 4 4 4 4 4 4");
    expect_in(t, "  output: final at position 9 reads 0\n");
    ck_assert_ptr_null(strstr(t, "\n    ! ")); /* the good adder decodes cleanly */
    ck_assert_ptr_null(strstr(t, "\n  ! "));
    free(t);
    capture_free(c);
    model_free(m);
}
END_TEST

/* The first layer of `bad` (matched to `good` by name and occurrence) that
 * wrote a register which decodes differently from what `good` wrote there.
 * Returns its index in bad, -1 when none; *reg and *pos say where. */
static int first_wrong_layer(const TfCapture *good, const TfCapture *bad, int *reg, int *pos) {
    const TfModel *gm = good->m, *bm = bad->m;
    for (int lb = 0; lb < bm->n_layers; lb++) {
        int occ = 0, lg = -1;
        for (int j = 0; j < lb; j++) occ += strcmp(bm->layers[j].name, bm->layers[lb].name) == 0;
        for (int j = 0; j < gm->n_layers && lg < 0; j++)
            if (strcmp(gm->layers[j].name, bm->layers[lb].name) == 0 && occ-- == 0) lg = j;
        if (lg < 0) continue;
        for (int r = 0; r < bm->n_regs; r++) {
            if (!inspect_layer_wrote(bad, lb, &bm->regs[r]) &&
                !inspect_layer_wrote(good, lg, &gm->regs[r]))
                continue;
            for (int p = 0; p < bad->n_pos; p++) {
                TfDecoded g, b;
                inspect_decode(gm, &gm->regs[r], capture_row(good, lg + 1, p), &g);
                inspect_decode(bm, &bm->regs[r], capture_row(bad, lb + 1, p), &b);
                int same = g.status == b.status && g.index == b.index &&
                           (bm->regs[r].kind != TF_REG_SCALAR ||
                            fabsf(g.value - b.value) <= 1e-3f * fmaxf(1, fabsf(g.value)));
                if (!same) {
                    *reg = r;
                    *pos = p;
                    return lb;
                }
            }
        }
    }
    return -1;
}

START_TEST(test_broken_adder_first_wrong_layer) {
    char *src = adder_source(NULL), *broken_src = adder_source("step_out:");
    TfModel *good = tf_compile_text(src), *bad = tf_compile_text(broken_src);
    free(src);
    free(broken_src);
    ck_assert_int_eq(bad->n_layers, good->n_layers - 1);
    TfCapture *g = capture_text(good, "0999+0111="), *b = capture_text(bad, "0999+0111=");

    // The first wrong write: step_pos moves out_pos to 10 at the '=', which
    // should point at itself (9): the position of the first output digit.
    int reg = -1, pos = -1;
    int lb = first_wrong_layer(g, b, &reg, &pos);
    ck_assert_int_ge(lb, 0);
    ck_assert_str_eq(bad->layers[lb].name, "step_pos");
    ck_assert_int_eq(lb, 4); /* its first occurrence */
    ck_assert_str_eq(bad->regs[reg].name, "out_pos");
    TfDecoded dg, db;
    const TfRegister *out_pos = &bad->regs[reg];
    inspect_decode(good, out_pos, capture_row(g, lb + 2, 9), &dg);
    inspect_decode(bad, out_pos, capture_row(b, lb + 1, 9), &db);
    ck_assert_int_eq(dg.index, 9);
    ck_assert_int_eq(db.index, 10);

    // The broken trace shows it on step_pos's out_pos line, and ends saying
    // the output register is empty where the next token is read.
    char *t = trace_text(b);
    const char *at = strstr(t, "layer 4 step_pos");
    ck_assert_msg(at != NULL, "%s", t);
    at = strstr(at, "    out_pos ");
    ck_assert_ptr_nonnull(at);
    size_t n = (size_t)(strchr(at, '\n') - at);
    ck_assert_msg(n > 3 && strncmp(at + n - 3, " 10", 3) == 0, "out_pos line: %.*s", (int)n, at);
    expect_in(t, "! output: final is empty at position 9");
    free(t);
    capture_free(g);
    capture_free(b);
    model_free(good);
    model_free(bad);
}
END_TEST

START_TEST(test_trace_without_registers) {
    // A compiled adder with its registers dropped stands in for a learned
    // model: the trace shows the logit lens and attention matrices instead.
    char *src = adder_source(NULL);
    TfModel *m = tf_compile_text(src);
    free(src);
    for (int r = 0; r < m->n_regs; r++) free(m->regs[r].name);
    free(m->regs);
    m->regs = NULL;
    m->n_regs = 0;
    m->output_reg = -1;
    TfCapture *c = capture_text(m, "0999+0111=");
    int ids[2];
    float probs[2];
    inspect_logit_lens(c, c->n_blocks - 1, 9, 2, ids, probs);
    ck_assert_int_eq(ids[0], c->next); /* the lens at the end is the prediction */
    ck_assert_float_gt(probs[0], probs[1]);
    ck_assert_float_le(probs[0] + probs[1], 1.0f + 1e-5f);
    char *t = trace_text(c);
    expect_in(t, "(no registers: logit lens and attention per layer)");
    expect_in(t, "    lens top1 ");
    expect_in(t, "    head 0 (");
    // find_plus's matrix: the '=' row (9) puts 100% on the '+' column (4).
    expect_in(t, "        9 =       .   .   .   . 100   .   .   .   .   .\n");

    // A norm layer (nothing produces them yet) counts as writing everything,
    // and a final norm is applied by the lens; neither may crash the trace.
    TfLayerKind kind = m->layers[4].kind;
    m->layers[4].kind = TF_LAYER_NORM;
    TfRegister all = {.name = "x", .kind = TF_REG_SCALAR, .offset = 0, .size = 1};
    ck_assert_int_eq(inspect_layer_wrote(c, 4, &all), 1);
    m->layers[m->n_layers - 1].kind = TF_LAYER_NORM;
    m->layers[m->n_layers - 1].norm_eps = 1e-5f;
    inspect_logit_lens(c, 3, 9, 2, ids, probs);
    ck_assert_int_ge(ids[0], 0);
    free(t);
    t = trace_text(c);
    expect_in(t, "layer 4 clear_lro  (norm");
    m->layers[4].kind = kind;
    free(t);
    capture_free(c);
    model_free(m);
}
END_TEST

/* Number of times `needle` occurs in `hay`. */
static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

START_TEST(test_report_and_svgs) {
    char *src = adder_source(NULL);
    TfModel *m = tf_compile_text(src);
    free(src);
    TfCapture *c = capture_text(m, "0999+0111=");
    int n_att = 0;
    for (int l = 0; l < m->n_layers; l++) n_att += c->att[l] ? m->layers[l].n_heads : 0;

    char dir[] = "/tmp/tf_inspect_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/report.html", dir);
    TfError err = {""};
    ck_assert_int_eq(report_write_html(c, path, &err), 0);
    char *html = tf_read_file(path, NULL);
    ck_assert_ptr_nonnull(html);
    ck_assert_int_eq(count(html, "data-kind=\"resid\""), c->n_blocks);
    ck_assert_int_eq(count(html, "data-kind=\"att\""), n_att);
    // Self-contained: the only URL is SVG's namespace name, which is never fetched.
    ck_assert_int_eq(count(html, "http"), count(html, "http://www.w3.org/2000/svg\""));
    ck_assert_ptr_null(strstr(html, "<script src"));
    ck_assert_ptr_nonnull(strstr(html, ">find_plus:  FindAndStore(&#39;+&#39;) -&gt; left_pos;<"));
    free(html);
    unlink(path);

    snprintf(path, sizeof path, "%s/svg", dir);
    ck_assert_int_eq(report_write_svgs(c, path, &err), 0);
    char file[512];
    snprintf(file, sizeof file, "%s/resid_00_find_plus.svg", path);
    char *svg = tf_read_file(file, NULL);
    ck_assert_msg(svg != NULL, "no %s", file);
    ck_assert_ptr_nonnull(strstr(svg, "<?xml"));
    ck_assert_ptr_nonnull(strstr(svg, ">left_pos</text>"));
    free(svg);
    // Every file name carries the index of the layer its title names, the
    // index tfinfo lists (att_07_read_right_h0.svg: "layer 7 read_right").
    int files = 0;
    for (int b = 0; b < c->n_blocks; b++) {
        int l = b - 1;
        for (int h = -1; h < (l >= 0 && c->att[l] ? m->layers[l].n_heads : 0); h++) {
            char want[160];
            if (l < 0) {
                snprintf(file, sizeof file, "%s/resid_embedding.svg", path);
                snprintf(want, sizeof want, "<title>residual stream after the embedding</title>");
            } else if (h < 0) {
                snprintf(file, sizeof file, "%s/resid_%02d_%s.svg", path, l, m->layers[l].name);
                snprintf(want, sizeof want, "<title>residual stream after layer %d %s (", l,
                         m->layers[l].name);
            } else {
                snprintf(file, sizeof file, "%s/att_%02d_%s_h%d.svg", path, l, m->layers[l].name,
                         h);
                snprintf(want, sizeof want, "<title>attention, layer %d %s, head %d</title>", l,
                         m->layers[l].name, h);
            }
            svg = tf_read_file(file, NULL);
            ck_assert_msg(svg != NULL, "no %s", file);
            ck_assert_msg(strstr(svg, want) != NULL, "%s lacks %s", file, want);
            free(svg);
            files += unlink(file) == 0;
        }
    }
    ck_assert_int_eq(files, c->n_blocks + n_att);
    ck_assert_ptr_nonnull(strstr(m->layers[7].name, "read_right"));
    ck_assert_ptr_nonnull(c->att[7]);
    ck_assert_int_eq(rmdir(path), 0);

    // Unwritable places fail with a message naming them.
    snprintf(path, sizeof path, "%s/no/such/report.html", dir);
    ck_assert_int_eq(report_write_html(c, path, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, path));
    ck_assert_int_eq(rmdir(dir), 0);
    capture_free(c);
    model_free(m);
}
END_TEST

/* The text of layer `layer`'s section of a trace (from its "  layer N "
 * line to the next section), malloc'd. */
static char *trace_section(const char *t, int layer) {
    char head[32];
    snprintf(head, sizeof head, "\n  layer %d ", layer);
    const char *at = strstr(t, head);
    ck_assert_msg(at != NULL, "the trace has no layer %d", layer);
    const char *end = strstr(at + 1, "\n  layer ");
    size_t n = end ? (size_t)(end - at) : strlen(at);
    char *s = malloc(n + 1);
    memcpy(s, at, n);
    s[n] = '\0';
    return s;
}

/* The index of the k-th (0-based) layer named `name`. */
static int nth_layer(const TfModel *m, const char *name, int k) {
    for (int l = 0; l < m->n_layers; l++)
        if (strcmp(m->layers[l].name, name) == 0 && k-- == 0) return l;
    ck_abort_msg("no layer %s", name);
    return -1;
}

/* Registers that share columns (model.h's live ranges): the adder's `left`
 * split where its second clear_lro zeroed it, `left` the first round's
 * digit and `left2` the later rounds'. The trace and the report show each
 * only where it holds the columns and decode the digit under the right
 * name: 4 (the units of 1234) in round 1, 3 (the tens) in round 2. */
START_TEST(test_shared_columns) {
    char *src = adder_source(NULL);
    TfModel *m = tf_compile_text(src);
    free(src);
    int clear2 = nth_layer(m, "clear_lro", 1), read1 = nth_layer(m, "read_left", 0),
        read2 = nth_layer(m, "read_left", 1), clear3 = nth_layer(m, "clear_lro", 2);
    ck_assert_int_eq(clear2, 12);
    tf_split_register(m, "left", clear2 + 1, "left2");
    int left = model_find_register(m, "left"), left2 = model_find_register(m, "left2");
    const TfRegister *lr = &m->regs[left];
    TfCapture *c = capture_text(m, "1234+5678=");

    // What is shown where: each in its own states only; at the split,
    // neither (left is no longer held; left2 holds nothing yet), though the
    // columns changed.
    ck_assert_int_eq(inspect_register_wrote(c, read1 + 1, left), 1);
    ck_assert_int_eq(inspect_register_wrote(c, read1 + 1, left2), 0);
    ck_assert_int_eq(inspect_layer_wrote(c, clear2, lr), 1);
    ck_assert_int_eq(inspect_register_wrote(c, clear2 + 1, left), 0);
    ck_assert_int_eq(inspect_register_wrote(c, clear2 + 1, left2), 0);
    ck_assert_int_eq(inspect_register_wrote(c, read2 + 1, left), 0);
    ck_assert_int_eq(inspect_register_wrote(c, read2 + 1, left2), 1);
    ck_assert_int_eq(inspect_register_wrote(c, clear3 + 1, left2), 1); /* cleared, held */
    char buf[256];
    inspect_handover_text(m, left, buf, sizeof buf);
    ck_assert_str_eq(buf, "its columns 22-35 are left2's from state 13");
    inspect_handover_text(m, left2, buf, sizeof buf);
    ck_assert_str_eq(buf, "its columns 22-35 are no register's after it");
    model_live_text(m, left, buf, sizeof buf);
    ck_assert_str_eq(buf, "states 0..12 (the embedding to after layer 11)");
    model_live_text(m, left2, buf, sizeof buf);
    ck_assert_str_eq(buf, "states 13..36 (after layer 12 to after layer 35)");

    char *t = trace_text(c);
    expect_in(t, "i+1 layer i's: left 0..12, left2 13..36; each shows only there)\n");
    char *sec = trace_section(t, read1);
    expect_row(sec, "left 1 1 1 1 4 4 4 4 4 4");
    ck_assert_ptr_null(strstr(sec, "left2"));
    free(sec);
    sec = trace_section(t, clear2);
    expect_in(sec, "\n    ~ left ends: held in states 0..12 (the embedding to after layer 11); its "
                   "columns 22-35 are left2's from state 13");
    ck_assert_ptr_null(strstr(sec, "\n    left "));
    ck_assert_ptr_null(strstr(sec, "\n    left2 "));
    ck_assert_ptr_null(strstr(sec, "outside every register")); /* the clearing is left's */
    free(sec);
    sec = trace_section(t, read2);
    expect_row(sec, "left2 1 1 1 1 3 3 3 3 3 3");
    free(sec);
    for (int l = clear2; l < m->n_layers; l++) { /* never left's name after its range */
        sec = trace_section(t, l);
        ck_assert_msg(!strstr(sec, "\n    left "), "left shown after layer %d:%s", l, sec);
        free(sec);
    }
    for (int l = 0; l < clear2; l++) {
        sec = trace_section(t, l);
        ck_assert_msg(!strstr(sec, "left2"), "left2 shown after layer %d:%s", l, sec);
        free(sec);
    }
    free(t);

    // The report: each block's heatmap labels the register it holds, the
    // band's hover names the other and both ranges; the tables decode under
    // the right name; the data for the hover carries the ranges.
    char dir[] = "/tmp/tf_inspect_XXXXXX", path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/report.html", dir);
    TfError err = {""};
    ck_assert_int_eq(report_write_html(c, path, &err), 0);
    char *html = tf_read_file(path, NULL);
    ck_assert_ptr_nonnull(html);
    ck_assert_int_eq(count(html, ">left</text>"), clear2 + 1);
    ck_assert_int_eq(count(html, ">left2</text>"), c->n_blocks - clear2 - 1);
    ck_assert_ptr_nonnull(strstr(html, "<title>left2 (columns 22-35, states 13..36 (after layer 12 "
                                       "to after layer 35); shared with left, states 0..12 (the "
                                       "embedding to after layer 11))</title>"));
    ck_assert_ptr_nonnull(strstr(html, "[\"left\",\"token\",22,14,0,12]"));
    ck_assert_ptr_nonnull(strstr(html, "[\"left2\",\"token\",22,14,13,36]"));
    ck_assert_ptr_nonnull(strstr(html, "<code>left</code> ends: held in states 0..12 (the "
                                       "embedding to after layer 11); its columns 22-35 are "
                                       "left2&#39;s from state 13.</p>"));
    ck_assert_ptr_nonnull(strstr(html, "<p id=\"live-ranges\">"));
    // The decoded table of read_left's second run: left2's row, no left row.
    char id[64];
    snprintf(id, sizeof id, "id=\"layer-%d\"", read2);
    const char *at = strstr(html, id), *end = at ? strstr(at, "</details>") : NULL;
    ck_assert_ptr_nonnull(end);
    char *part = strndup(at, (size_t)(end - at));
    ck_assert_ptr_nonnull(strstr(part, "<th class=\"r\">left2</th>"));
    ck_assert_ptr_null(strstr(part, "<th class=\"r\">left</th>"));
    ck_assert_ptr_null(strstr(part, ">left</text>"));
    free(part);
    free(html);
    unlink(path);
    snprintf(path, sizeof path, "%s/svg", dir);
    ck_assert_int_eq(report_write_svgs(c, path, &err), 0);
    for (int b = 0; b < c->n_blocks; b++) {
        char file[512];
        if (b == 0)
            snprintf(file, sizeof file, "%s/resid_embedding.svg", path);
        else
            snprintf(file, sizeof file, "%s/resid_%02d_%s.svg", path, b - 1, m->layers[b - 1].name);
        char *svg = tf_read_file(file, NULL);
        ck_assert_msg(svg != NULL, "no %s", file);
        ck_assert_int_eq(count(svg, ">left</text>"), b <= clear2);
        ck_assert_int_eq(count(svg, ">left2</text>"), b > clear2);
        free(svg);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    capture_free(c);

    // A state between the two ranges, where no register holds the columns:
    // the layer that clears them changed no column outside every register.
    m->regs[left2].live_from = clear2 + 2;
    ck_assert_int_eq(model_validate(m, &err), 0);
    c = capture_text(m, "1234+5678=");
    t = trace_text(c);
    sec = trace_section(t, clear2);
    expect_in(sec, "its columns 22-35 are left2's from state 14");
    ck_assert_msg(!strstr(sec, "outside every register"), "%s", sec);
    free(sec);
    sec = trace_section(t, clear2 + 1); /* left2 holds them, empty: not shown */
    ck_assert_ptr_null(strstr(sec, "\n    left2 "));
    free(sec);
    free(t);
    capture_free(c);
    model_free(m);
}
END_TEST

START_TEST(test_generate_steps) {
    char *src = adder_source(NULL);
    TfModel *m = tf_compile_text(src);
    free(src);
    int ids[10], out[4];
    TfError err = {""};
    ck_assert_int_eq(infer_tokenize(m, "0999+0111=", 10, ids, &err), 10);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    TfInspectOptions all = {1, 1, 0, NULL, NULL, NULL};
    ck_assert_int_eq(inspect_generate(m, ids, 10, 4, &all, f, out, &err), 0);
    fclose(f);
    char got[5] = {m->vocab[out[0]], m->vocab[out[1]], m->vocab[out[2]], m->vocab[out[3]], 0};
    ck_assert_str_eq(got, "0111");              /* the same as plain generation */
    ck_assert_int_eq(count(buf, "\nstep "), 3); /* steps 1..3 after step 0 */
    ck_assert_ptr_nonnull(strstr(buf, "step 3: 13 positions \"0999+0111=011\" -> next 1\n"));
    free(buf);

    TfInspectOptions far = {1, 0, 4, NULL, NULL, NULL};
    ck_assert_int_eq(inspect_generate(m, ids, 10, 4, &far, stdout, out, &err), -1);
    ck_assert_str_eq(err.msg, "--step 4: the steps run are 0 to 3");
    model_free(m);
}
END_TEST

/* Where a dead register's columns go, per run of columns, on the compiled
 * chain of Counts (compiler/schedule.c): a register taken whole names its
 * taker; one whose first column alone goes to the output names the rest as
 * no register's. */
START_TEST(test_handover_by_columns) {
    int n_errors;
    TfError err = {""};
    FILE *null = fopen("/dev/null", "w");
    const char *src = TF_COUNT_CHAIN_SRC;
    TfModel *m = compile_source("t.tfp", src, strlen(src), 1, null, &n_errors, &err);
    fclose(null);
    ck_assert_msg(m != NULL, "%s", err.msg);
    int whole = 0, part = 0;
    for (int r = 0; r < m->n_regs; r++) {
        if (m->regs[r].live_to >= m->n_layers) continue;
        char buf[512];
        inspect_handover_text(m, r, buf, sizeof buf);
        const TfRegister *g = &m->regs[r];
        if (strstr(buf, "no register's after it") && !strstr(buf, "its column")) continue;
        if (strchr(buf, ',')) { // several runs: the first column taken, the rest free
            part++;
            char want[128];
            snprintf(want, sizeof want, "its column %d is ", g->offset);
            ck_assert_msg(strncmp(buf, want, strlen(want)) == 0, "%s", buf);
            snprintf(want, sizeof want, ", columns %d-%d no register's after it", g->offset + 1,
                     g->offset + g->size - 1);
            ck_assert_msg(strstr(buf, want) != NULL, "%s", buf);
        } else if (strstr(buf, " are ") && !strstr(buf, "no register")) {
            whole++;
        }
    }
    ck_assert_int_ge(whole, 1);
    ck_assert_int_ge(part, 1);
    model_free(m);
}
END_TEST

/* What the unembedding reads from a categorical output register: the
 * token of the hot column's value (its column index is no token id). */
START_TEST(test_output_categorical) {
    // add_decimal: `out` holds the values 0..9 in its columns, the
    // vocabulary starts with '^'; 12345678+87654329=100000007.
    TfModel *m = tf_compile_program("programs/add_decimal.tfp");
    TfCapture *c = capture_text(m, "^12345678+87654329=");
    TfDecoded d;
    int t = inspect_output_read(c, c->n_pos - 1, &d);
    ck_assert_int_eq(d.status, TF_DECODE_CLEAN);
    ck_assert_int_eq(t, c->next);
    ck_assert_int_eq(m->vocab[t], '1');
    char *trace = trace_text(c);
    expect_in(trace, "  output: out at position 18 reads 1 (value 1)\n");
    free(trace);
    capture_free(c);
    model_free(m);

    // sort, read at every position: each position's output register maps
    // to the token the model outputs there ('d' at the end, not 'c').
    m = tf_compile_program("programs/sort.tfp");
    c = capture_text(m, "^dcbaabcd");
    ck_assert_ptr_nonnull(c->outputs);
    for (int p = 1; p < c->n_pos; p++) {
        ck_assert_int_eq(inspect_output_read(c, p, &d), c->outputs[p]);
        ck_assert_int_eq(d.status, TF_DECODE_CLEAN);
    }
    ck_assert_int_eq(m->vocab[c->outputs[8]], 'd');
    char dir[] = "/tmp/tf_inspect_XXXXXX", path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/sort.html", dir);
    TfError err = {""};
    ck_assert_int_eq(report_write_html(c, path, &err), 0);
    char *html = tf_read_file(path, NULL);
    ck_assert_ptr_nonnull(html);
    ck_assert_ptr_nonnull(strstr(html, "&#8594; at every position <code>aabbccdd</code>"));
    ck_assert_ptr_nonnull(strstr(html, "<code id=\"unembed-reads\">aabbccdd</code>"));
    free(html);
    unlink(path);
    ck_assert_int_eq(rmdir(dir), 0);
    capture_free(c);
    model_free(m);
}
END_TEST

/* Parameters are what the model reads: a checkpoint's optimizer state, in
 * tensors no layer names, is not counted. */
START_TEST(test_param_count) {
    char *src = adder_source(NULL);
    TfModel *m = tf_compile_text(src);
    free(src);
    size_t n = model_param_count(m), all = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        ck_assert_int_gt(model_tensor_uses(m, i), 0);
        all += m->tensors[i].nelem;
    }
    ck_assert_uint_eq(n, all);
    TfError err = {""};
    int64_t shape[2] = {80, 80};
    int idx = model_add_tensor(m, "optim.adam.m.layers.0.attn.query.weight", 2, shape, &err);
    ck_assert_msg(idx >= 0, "%s", err.msg);
    ck_assert_int_eq(model_tensor_uses(m, idx), 0);
    ck_assert_uint_eq(model_param_count(m), n);
    // Shared tensors count once in the model, however many layers use them.
    ck_assert_int_gt(model_tensor_uses(m, m->layers[1].query), 1);
    model_free(m);
}
END_TEST

/* tfinfo's three counts and FLOP per token (model_param_counts,
 * model_token_flops) against a naive count: distinct values by a linear
 * search, zeros and -0 not counted, a value repeated in another tensor once;
 * the FLOP from each layer's weight matrices by role. */
START_TEST(test_param_counts_three_ways) {
    char *src = adder_source(NULL);
    TfModel *m = tf_compile_text(src);
    free(src);
    // A value that appears nowhere else, twice; a -0.
    int mlp = -1, attn = -1;
    for (int l = 0; l < m->n_layers; l++) {
        if (mlp < 0 && m->layers[l].kind == TF_LAYER_MLP) mlp = l;
        if (attn < 0 && m->layers[l].kind == TF_LAYER_ATTENTION) attn = l;
    }
    ck_assert(mlp >= 0 && attn >= 0);
    m->tensors[m->layers[mlp].fc1_weight].data[0] = 1234.5f;
    m->tensors[m->layers[attn].value].data[0] = 1234.5f;
    m->tensors[m->layers[mlp].fc2_weight].data[1] = -0.0f;
    TfParamCounts c;
    TfError err = {""};
    ck_assert_int_eq(model_param_counts(m, &c, &err), 0);
    size_t nz = 0, nd = 0, cap = 4096;
    float *seen = malloc(cap * sizeof *seen);
    ck_assert_ptr_nonnull(seen);
    for (int i = 0; i < m->n_tensors; i++) {
        if (!model_tensor_uses(m, i)) continue;
        for (size_t k = 0; k < m->tensors[i].nelem; k++) {
            float v = m->tensors[i].data[k];
            if (v == 0) continue;
            nz++;
            size_t j = 0;
            while (j < nd && memcmp(&seen[j], &v, sizeof v) != 0) j++;
            if (j == nd) {
                ck_assert_uint_lt(nd, cap);
                seen[nd++] = v;
            }
        }
    }
    free(seen);
    ck_assert_uint_eq(c.stored, model_param_count(m));
    ck_assert_uint_eq(c.nonzero, nz);
    ck_assert_uint_eq(c.distinct, nd);
    ck_assert_uint_lt(c.distinct, c.nonzero);
    ck_assert_uint_lt(c.nonzero, c.stored);
    TfTokenFlops f;
    model_token_flops(m, &f);
    double dense = 0, nonzero = 0, per_pos = 0;
    for (int l = 0; l < m->n_layers; l++) {
        int t[TF_LAYER_MAX_TENSORS];
        const char *role[TF_LAYER_MAX_TENSORS];
        int n = model_layer_tensors(&m->layers[l], t, role);
        for (int k = 0; k < n; k++) {
            const TfTensor *x = &m->tensors[t[k]];
            if (x->ndim != 2) continue; // the biases, norms
            dense += 2.0 * (double)x->nelem;
            for (size_t e = 0; e < x->nelem; e++) nonzero += x->data[e] != 0 ? 2 : 0;
        }
        if (m->layers[l].kind == TF_LAYER_ATTENTION)
            per_pos += 2.0 * m->layers[l].n_heads * (m->layers[l].d_head + m->layers[l].d_vhead);
    }
    const TfTensor *u = &m->tensors[m->unembed];
    dense += 2.0 * (double)u->nelem;
    for (size_t e = 0; e < u->nelem; e++) nonzero += u->data[e] != 0 ? 2 : 0;
    ck_assert_double_eq(f.dense, dense);
    ck_assert_double_eq(f.nonzero, nonzero);
    ck_assert_double_eq(f.per_position, per_pos);
    ck_assert_double_gt(per_pos, 0);
    model_free(m);
}
END_TEST

/* --compare's similarity (compare.h) on the adder at -O and -O0: the worked
 * cases of docs/inspect.md, exactly 1 against itself, symmetric, in [0, 1],
 * best matches the row maxima; positions that differ are refused. */
START_TEST(test_compare_heads) {
    TfModel *a = tf_compile_program_opt("programs/adder.tfp", 1);
    TfModel *b = tf_compile_program_opt("programs/adder.tfp", 0);
    TfCapture *ca = capture_text(a, "0999+0111="), *cb = capture_text(b, "0999+0111=");
    TfError err = {""};
    TfCompare *ab = compare_new(ca, "a.tfw", cb, "b.tfw", &err);
    TfCompare *ba = compare_new(cb, "b.tfw", ca, "a.tfw", &err);
    TfCompare *aa = compare_new(ca, "a.tfw", ca, "a.tfw", &err);
    ck_assert_msg(ab && ba && aa, "%s", err.msg);
    ck_assert_int_eq(ab->n_heads[0], 11);
    ck_assert_int_eq(ab->n_heads[1], 11);
    ck_assert_int_eq(ab->heads[0][0].layer, 0);
    ck_assert_int_eq(ab->heads[0][3].layer, 6); /* read_left */
    int n = 11;
    // find_plus: -O spreads rows 1..3 evenly over 0..q, -O0 attends to 0.
    ck_assert_double_eq_tol(ab->sim[0], 1.0 - (1.0 / 2 + 2.0 / 3 + 3.0 / 4) / 10, 1e-6);
    // find_equal: rows 1..8 likewise, TV q/(q+1).
    double tv = 0;
    for (int q = 1; q <= 8; q++) tv += (double)q / (q + 1);
    ck_assert_double_eq_tol(ab->sim[1 * n + 1], 1.0 - tv / 10, 1e-6);
    for (int i = 0; i < n; i++) {
        ck_assert(aa->sim[i * n + i] == 1.0);
        ck_assert(aa->sim[i * n + aa->best[0][i]] == 1.0);
        double row_max = 0;
        for (int j = 0; j < n; j++) {
            double v = ab->sim[i * n + j];
            ck_assert(v >= 0 && v <= 1);
            ck_assert(v == ba->sim[j * n + i]);
            ck_assert(v == compare_similarity(ca, ab->heads[0][i].layer, ab->heads[0][i].head, cb,
                                              ab->heads[1][j].layer, ab->heads[1][j].head));
            if (v > row_max) row_max = v;
        }
        ck_assert(ab->sim[i * n + ab->best[0][i]] == row_max);
        ck_assert_int_eq(ba->best[1][i], ab->best[0][i]);
    }
    // A shorter pass cannot be compared head by head.
    TfCapture *short_b = capture_text(b, "0999+0111");
    ck_assert_ptr_null(compare_new(ca, "a.tfw", short_b, "b.tfw", &err));
    ck_assert_str_eq(err.msg, "a.tfw runs 10 positions and b.tfw 9: the heads cannot be compared");
    capture_free(short_b);
    compare_free(ab);
    compare_free(ba);
    compare_free(aa);
    capture_free(ca);
    capture_free(cb);
    model_free(a);
    model_free(b);
}
END_TEST

int main(void) {
    Suite *s = suite_create("inspect");
    TCase *tc = tcase_create("decode");
    tcase_add_test(tc, test_part_labels);
    tcase_add_test(tc, test_decode_token);
    tcase_add_test(tc, test_decode_categorical);
    tcase_add_test(tc, test_decode_position);
    tcase_add_test(tc, test_decode_scalar);
    suite_add_tcase(s, tc);
    tc = tcase_create("adder");
    tcase_add_test(tc, test_capture_adder);
    tcase_add_test(tc, test_broken_adder_first_wrong_layer);
    tcase_add_test(tc, test_trace_without_registers);
    tcase_add_test(tc, test_report_and_svgs);
    tcase_add_test(tc, test_shared_columns);
    tcase_add_test(tc, test_generate_steps);
    tcase_add_test(tc, test_param_count);
    tcase_add_test(tc, test_param_counts_three_ways);
    tcase_add_test(tc, test_compare_heads);
    suite_add_tcase(s, tc);
    tc = tcase_create("general");
    tcase_add_test(tc, test_output_categorical);
    tcase_add_test(tc, test_handover_by_columns);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
