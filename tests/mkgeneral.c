/* mkgeneral: writes two small hand-built models of the general language's
 * runtime features, for tests/cli.sh and tests/torch.sh (the compiler does
 * not build them yet).
 *
 *   mkgeneral DIR     writes DIR/every.tfw and DIR/stop.tfw
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

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: mkgeneral DIR\n");
        return 2;
    }
    TfModel *models[2] = {every_model(), stop_model()};
    const char *names[2] = {"every.tfw", "stop.tfw"};
    for (int i = 0; i < 2; i++) {
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
