/* mkgeneral: writes small hand-built models of the general language's
 * runtime features, for tests/cli.sh and tests/torch.sh (the compiler does
 * not build them yet).
 *
 *   mkgeneral DIR     writes DIR/every.tfw, stop.tfw, tie.tfw, tie_gen.tfw and frac.tfw
 *
 * every.tfw: vocab "^abcx", bos '^', read at every position. A categorical
 * register `rot` holds the next letter (a->b, b->c, c->a; an MLP of three
 * ReLU units); a bidirectional attention averages "is c" over the whole
 * input into `frac_c` (its query and key are constant biases), an MLP turns it into `any_c` (0 or 1); the output is
 * 'x' at every position when the input holds a 'c' anywhere (also after the
 * position), else `rot`. "^abab" -> "bcbc", "^abca" -> "xxxx".
 *
 * stop.tfw: vocab "abc$", max_len 4, generate 10, stop token '$'. The next
 * token follows the last one: a->b, b->c, c->$. "a" -> "abc", "c" -> "c",
 * "aaaa" -> "aaaab" (the position encoding ends).
 *
 * tie.tfw: vocab "^abc", bos '^', read at every position, a run-time check.
 * Layer 0 (attention, "Aggregate -> b", tie.tfp line 2) averages the letter
 * one-hots of positions 1..i into the categorical register `b` (the BOS
 * position holds nothing, as in compiled programs: the check skips it):
 * where those letters differ, b holds a mix, and the model's check of b
 * after layer 0 fails. Layer 1 (MLP) writes the next
 * letter of b (a->b, b->c, c->a) into `out`, which the output reads.
 * The check's bound is 0.01 (b is an exact mean of one-hots). "^aaa" ->
 * "bbb"; "^aaab" fails at position 4 ('a' 0.75, 'b' 0.25: a mixture, not one
 * value); "^ab" fails at position 2 ('a' 0.50, 'b' 0.50).
 * tie_gen.tfw is the same model generating 2 tokens: "^a" -> "^ab", then
 * "^ab" fails at step 1; "^abaa" fails at position 2, a row whose output
 * nobody reads.
 *
 * frac.tfw: vocab "^helo", bos '^', prints a number at every position: the
 * scalar register `frac` (no unembed.weight) is the fraction of 'l' among
 * positions 1..i (tracr's frac_prevs), by one attention layer;
 * output_error_bound 1e-06. "^hello" -> "0 0 0.333333343 0.5 0.400000006".
 *
 *   mkgeneral --split IN.tfw REG STATE NEW OUT.tfw
 *
 * writes IN with its register REG split at residual state STATE (model.h's
 * live ranges: state 0 the embedding's output, state i + 1 layer i's): REG
 * holds its columns up to state STATE - 1, a new register NEW of the same
 * kind and columns from STATE on (REG's checks after layer STATE - 1 or
 * later become NEW's). A model whose registers share columns, as the
 * compiler makes them when it gives a dead register's columns to another:
 * the adder's `left` split at 13 (its second clear_lro, layer 12, zeroes
 * it) is `left` in the first round and `left2` after, for tests/cli.sh,
 * tests/interventions.sh and tests/onnx.sh.
 *
 * Exit status 0, or 1 with a message on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfw.h"

static int tensor(TfModel *m, const char *name, int rows, int cols) {
    TfError err = {""};
    int64_t shape[2] = {rows, cols};
    int t = model_add_tensor(m, name, cols > 0 ? 2 : 1, shape, &err);
    if (t < 0) {
        fprintf(stderr, "mkgeneral: %s\n", err.msg);
        exit(1);
    }
    return t;
}

static float *W(TfModel *m, int t) { return m->tensors[t].data; }

static void check(int rc, const TfError *err) {
    if (rc < 0) {
        fprintf(stderr, "mkgeneral: %s\n", err->msg);
        exit(1);
    }
}

/* Columns of every.tfw. */
enum { E_TOK = 0, E_ROT = 5, E_FRAC = 8, E_ANY = 9, E_D = 10, E_LEN = 16 };

static TfModel *every_model(void) {
    TfModel *m = model_new();
    TfError err = {""};
    const char *vocab = "^abcx";
    m->d_model = E_D;
    m->n_vocab = 5;
    m->vocab = malloc(5);
    memcpy(m->vocab, vocab, 5);
    m->period = E_LEN;
    m->max_len = E_LEN;
    m->generate = 0;
    m->every_position = 1;
    m->bos = 0;
    m->tok_embed = tensor(m, TF_TENSOR_TOKEN_EMBED, 5, E_D);
    m->pos_embed = tensor(m, TF_TENSOR_POS_EMBED, E_LEN, E_D);
    m->unembed = tensor(m, TF_TENSOR_UNEMBED, 5, E_D);
    for (int t = 0; t < 5; t++) W(m, m->tok_embed)[t * E_D + E_TOK + t] = 1.0f;

    // rot: unit j fires on letter j (token 1 + j) and writes the next letter.
    TfLayer f = model_layer_init(TF_LAYER_MLP);
    f.name = "rotate";
    f.op = "Map";
    f.d_hidden = 3;
    f.act = TF_ACT_RELU;
    f.fc1_weight = tensor(m, "rotate.fc1.weight", 3, E_D);
    f.fc2_weight = tensor(m, "rotate.fc2.weight", E_D, 3);
    for (int j = 0; j < 3; j++) {
        W(m, f.fc1_weight)[j * E_D + E_TOK + 1 + j] = 1.0f;
        W(m, f.fc2_weight)[(E_ROT + (j + 1) % 3) * 3 + j] = 1.0f;
    }
    check(model_add_layer(m, &f, &err), &err);

    // frac_c: every position attends to every position alike (zero scores).
    TfLayer a = model_layer_init(TF_LAYER_ATTENTION);
    a.name = "count_c";
    a.op = "Aggregate";
    a.n_heads = 1;
    a.d_head = 1;
    a.d_vhead = 1;
    a.scale = 1.0f;
    a.causal = 0;
    a.query = tensor(m, "count_c.query", 1, E_D);
    a.key = tensor(m, "count_c.key", 1, E_D);
    a.value = tensor(m, "count_c.value", 1, E_D);
    a.output = tensor(m, "count_c.output", E_D, 1);
    // Query and key biases (a constant score: still uniform) exercise the
    // peers' bias paths.
    a.query_bias = tensor(m, "count_c.query_bias", 1, 0);
    a.key_bias = tensor(m, "count_c.key_bias", 1, 0);
    W(m, a.query_bias)[0] = 1.0f;
    W(m, a.key_bias)[0] = 0.5f;
    W(m, a.value)[E_TOK + 3] = 1.0f;
    W(m, a.output)[E_FRAC] = 1.0f;
    check(model_add_layer(m, &a, &err), &err);

    // any_c = min(1, 16 frac_c) = ReLU(16 f) - ReLU(16 f - 1): frac_c >= 1/16.
    TfLayer g = model_layer_init(TF_LAYER_MLP);
    g.name = "any_c";
    g.op = "Map";
    g.d_hidden = 2;
    g.act = TF_ACT_RELU;
    g.fc1_weight = tensor(m, "any_c.fc1.weight", 2, E_D);
    g.fc1_bias = tensor(m, "any_c.fc1.bias", 2, 0);
    g.fc2_weight = tensor(m, "any_c.fc2.weight", E_D, 2);
    W(m, g.fc1_weight)[0 * E_D + E_FRAC] = (float)E_LEN;
    W(m, g.fc1_weight)[1 * E_D + E_FRAC] = (float)E_LEN;
    W(m, g.fc1_bias)[1] = -1.0f;
    W(m, g.fc2_weight)[E_ANY * 2 + 0] = 1.0f;
    W(m, g.fc2_weight)[E_ANY * 2 + 1] = -1.0f;
    check(model_add_layer(m, &g, &err), &err);

    // Logits: letter t reads rot's column of t; 'x' reads 2 any_c.
    for (int j = 0; j < 3; j++) W(m, m->unembed)[(1 + j) * E_D + E_ROT + j] = 1.0f;
    W(m, m->unembed)[4 * E_D + E_ANY] = 2.0f;

    check(model_add_register(m, "tokens", TF_REG_TOKEN, E_TOK, 5, &err), &err);
    const char *letters[] = {"'a'", "'b'", "'c'"};
    int rot = model_add_categorical(m, "rot", E_ROT, 3, letters, &err);
    check(rot, &err);
    check(model_add_register(m, "frac_c", TF_REG_SCALAR, E_FRAC, 1, &err), &err);
    const char *flags[] = {"1"};
    check(model_add_categorical(m, "any_c", E_ANY, 1, flags, &err), &err);
    m->output_reg = rot;
    return m;
}

/* Columns of stop.tfw. */
enum { S_TOK = 0, S_NEXT = 4, S_D = 8, S_LEN = 4 };

static TfModel *stop_model(void) {
    TfModel *m = model_new();
    TfError err = {""};
    m->d_model = S_D;
    m->n_vocab = 4;
    m->vocab = malloc(4);
    memcpy(m->vocab, "abc$", 4);
    m->period = S_LEN;
    m->max_len = S_LEN;
    m->generate = 10;
    m->stop_token = 3;
    m->tok_embed = tensor(m, TF_TENSOR_TOKEN_EMBED, 4, S_D);
    m->pos_embed = tensor(m, TF_TENSOR_POS_EMBED, S_LEN, S_D);
    m->unembed = tensor(m, TF_TENSOR_UNEMBED, 4, S_D);
    for (int t = 0; t < 4; t++) W(m, m->tok_embed)[t * S_D + S_TOK + t] = 1.0f;
    // next: token t (a, b, c) -> t + 1 (b, c, $), a one-hot over the vocabulary.
    TfLayer f = model_layer_init(TF_LAYER_MLP);
    f.name = "follow";
    f.op = "Map";
    f.d_hidden = 3;
    f.act = TF_ACT_RELU;
    f.fc1_weight = tensor(m, "follow.fc1.weight", 3, S_D);
    f.fc2_weight = tensor(m, "follow.fc2.weight", S_D, 3);
    for (int j = 0; j < 3; j++) {
        W(m, f.fc1_weight)[j * S_D + S_TOK + j] = 1.0f;
        W(m, f.fc2_weight)[(S_NEXT + j + 1) * 3 + j] = 1.0f;
    }
    check(model_add_layer(m, &f, &err), &err);
    for (int t = 0; t < 4; t++) W(m, m->unembed)[t * S_D + S_NEXT + t] = 1.0f;
    check(model_add_register(m, "tokens", TF_REG_TOKEN, S_TOK, 4, &err), &err);
    int next = model_add_register(m, "next", TF_REG_TOKEN, S_NEXT, 4, &err);
    check(next, &err);
    m->output_reg = next;
    return m;
}

/* A model of vocab `vocab`, bos its first token, read at every position,
 * d columns, max_len len, the token one-hot at columns 0.. (register
 * "tokens"); unembed.weight only when `unembed`. */
static TfModel *every_base(const char *vocab, int d, int len, int unembed) {
    TfModel *m = model_new();
    TfError err = {""};
    int v = (int)strlen(vocab);
    m->d_model = d;
    m->n_vocab = v;
    m->vocab = malloc((size_t)v);
    memcpy(m->vocab, vocab, (size_t)v);
    m->period = len;
    m->max_len = len;
    m->every_position = 1;
    m->bos = 0;
    m->tok_embed = tensor(m, TF_TENSOR_TOKEN_EMBED, v, d);
    m->pos_embed = tensor(m, TF_TENSOR_POS_EMBED, len, d);
    if (unembed) m->unembed = tensor(m, TF_TENSOR_UNEMBED, v, d);
    for (int t = 0; t < v; t++) W(m, m->tok_embed)[t * d + t] = 1.0f;
    check(model_add_register(m, "tokens", TF_REG_TOKEN, 0, v, &err), &err);
    return m;
}

/* An attention layer whose every position attends alike to positions 1..i
 * (the BOS position, key -1000, gets weight 0; it sees only itself), one
 * head of d_vhead dv; the caller fills value and output. */
static TfLayer mean_after_bos(TfModel *m, const char *name, int dv) {
    int d = m->d_model;
    TfLayer a = model_layer_init(TF_LAYER_ATTENTION);
    a.name = (char *)name; /* copied by model_add_layer */
    a.op = "Aggregate";
    a.n_heads = 1;
    a.d_head = 1;
    a.d_vhead = dv;
    a.scale = 1.0f;
    a.causal = 1;
    char t[64];
    snprintf(t, sizeof t, "%s.query_bias", name);
    a.query_bias = tensor(m, t, 1, 0);
    snprintf(t, sizeof t, "%s.query", name);
    a.query = tensor(m, t, 1, d);
    snprintf(t, sizeof t, "%s.key", name);
    a.key = tensor(m, t, 1, d);
    snprintf(t, sizeof t, "%s.value", name);
    a.value = tensor(m, t, dv, d);
    snprintf(t, sizeof t, "%s.output", name);
    a.output = tensor(m, t, d, dv);
    W(m, a.query_bias)[0] = 1.0f;
    W(m, a.key)[0] = -1000.0f; /* column 0: the BOS token */
    return a;
}

/* Columns of tie.tfw. */
enum { T_B = 4, T_OUT = 7, T_D = 10, T_LEN = 8 };

static TfModel *tie_model(void) {
    TfModel *m = every_base("^abc", T_D, T_LEN, 1);
    TfError err = {""};
    m->source_name = malloc(8);
    memcpy(m->source_name, "tie.tfp", 8);
    // b: the mean of the letter one-hots (token 1 + j -> value j); the BOS
    // position, which sees only itself, gets nothing.
    TfLayer a = mean_after_bos(m, "b", 3);
    for (int j = 0; j < 3; j++) {
        W(m, a.value)[j * T_D + 1 + j] = 1.0f;
        W(m, a.output)[(T_B + j) * 3 + j] = 1.0f;
    }
    a.line = 2;
    check(model_add_layer(m, &a, &err), &err);
    // out: the next letter of b, one ReLU unit per letter.
    TfLayer f = model_layer_init(TF_LAYER_MLP);
    f.name = "rot";
    f.op = "Map";
    f.line = 3;
    f.d_hidden = 3;
    f.act = TF_ACT_RELU;
    f.fc1_weight = tensor(m, "rot.fc1.weight", 3, T_D);
    f.fc2_weight = tensor(m, "rot.fc2.weight", T_D, 3);
    for (int j = 0; j < 3; j++) {
        W(m, f.fc1_weight)[j * T_D + T_B + j] = 1.0f;
        W(m, f.fc2_weight)[(T_OUT + (j + 1) % 3) * 3 + j] = 1.0f;
    }
    check(model_add_layer(m, &f, &err), &err);
    for (int j = 0; j < 3; j++) W(m, m->unembed)[(1 + j) * T_D + T_OUT + j] = 1.0f;
    const char *letters[] = {"'a'", "'b'", "'c'"};
    int b = model_add_categorical(m, "b", T_B, 3, letters, &err);
    check(b, &err);
    int out = model_add_categorical(m, "out", T_OUT, 3, letters, &err);
    check(out, &err);
    m->output_reg = out;
    check(model_add_check(m, b, 0, 2, "Aggregate -> b", 0.01, &err), &err);
    return m;
}

/* Columns of frac.tfw. */
enum { F_FRAC = 5, F_D = 6, F_LEN = 16 };

static TfModel *frac_model(void) {
    TfModel *m = every_base("^helo", F_D, F_LEN, 0);
    TfError err = {""};
    TfLayer a = mean_after_bos(m, "frac_l", 1);
    W(m, a.value)[3] = 1.0f; /* 'l' */
    W(m, a.output)[F_FRAC] = 1.0f;
    check(model_add_layer(m, &a, &err), &err);
    int frac = model_add_register(m, "frac", TF_REG_SCALAR, F_FRAC, 1, &err);
    check(frac, &err);
    m->output_reg = frac;
    m->output_error_bound = 1e-6;
    return m;
}

/* mkgeneral --split (see the top). */
static int split(const char *in, const char *name, const char *state_text, const char *new_name,
                 const char *out) {
    TfError err = {""};
    TfModel *m = tfw_read(in, &err);
    if (!m) {
        fprintf(stderr, "mkgeneral: %s\n", err.msg);
        return 1;
    }
    int r = model_find_register(m, name), state = atoi(state_text), n = -1;
    if (r < 0 || state <= m->regs[r].live_from || state > m->n_layers) {
        fprintf(stderr, "mkgeneral: no register '%s' to split at state %s\n", name, state_text);
        model_free(m);
        return 1;
    }
    TfRegister old = m->regs[r];
    n = old.kind == TF_REG_CATEGORICAL
            ? model_add_categorical(m, new_name, old.offset, old.size,
                                    (const char *const *)old.values, &err)
            : model_add_register(m, new_name, old.kind, old.offset, old.size, &err);
    if (n >= 0) {
        m->regs[n].live_from = state;
        m->regs[n].live_to = old.live_to;
        m->regs[r].live_to = state - 1;
        for (int k = 0; k < m->n_checks; k++)
            if (m->checks[k].reg == r && m->checks[k].layer + 1 >= state) m->checks[k].reg = n;
    }
    int rc = n < 0 ? -1 : tfw_write(m, out, &err);
    model_free(m);
    if (rc < 0) fprintf(stderr, "mkgeneral: %s\n", err.msg);
    return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 7 && strcmp(argv[1], "--split") == 0)
        return split(argv[2], argv[3], argv[4], argv[5], argv[6]);
    if (argc != 2) {
        fprintf(stderr, "usage: mkgeneral DIR\n       mkgeneral --split IN.tfw REG STATE NEW "
                        "OUT.tfw\n");
        return 2;
    }
    TfModel *gen = tie_model();
    gen->every_position = 0;
    gen->generate = 2;
    TfModel *models[5] = {every_model(), stop_model(), tie_model(), gen, frac_model()};
    const char *names[5] = {"every.tfw", "stop.tfw", "tie.tfw", "tie_gen.tfw", "frac.tfw"};
    for (int i = 0; i < 5; i++) {
        char path[4096];
        TfError err = {""};
        snprintf(path, sizeof path, "%s/%s", argv[1], names[i]);
        int rc = tfw_write(models[i], path, &err);
        model_free(models[i]);
        if (rc < 0) {
            fprintf(stderr, "mkgeneral: %s\n", err.msg);
            return 1;
        }
    }
    return 0;
}
