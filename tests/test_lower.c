/* test_lower.c: the matrices each op lowers to.
 *
 * The compiled adder is compared with tests/data/seed001_layers.txt
 * (shapes, non-zero counts, the layer sequence, the residual layout), and
 * each op's construction is checked entry by entry against seed 001's code.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "testmodel.h"
#include "testutil.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static TfModel *adder;

static void load_adder(void) { adder = tf_compile_program("programs/adder.tfp"); }
static void free_adder(void) { model_free(adder); }

static const TfLayer *layer_named(const TfModel *m, const char *name) {
    for (int l = 0; l < m->n_layers; l++)
        if (strcmp(m->layers[l].name, name) == 0) return &m->layers[l];
    return NULL;
}

static const TfTensor *T(const TfModel *m, int idx) {
    ck_assert_int_ge(idx, 0);
    return &m->tensors[idx];
}

static size_t nnz(const TfTensor *t) {
    size_t n = 0;
    for (size_t i = 0; i < t->nelem; i++) n += t->data[i] != 0.0f;
    return n;
}

/* W(o, i) of a 2-D [out, in] tensor */
static float W(const TfTensor *t, int o, int i) {
    ck_assert_int_eq(t->ndim, 2);
    return t->data[(size_t)o * (size_t)t->shape[1] + (size_t)i];
}

/* The tensor of layer ly that plays the seed's role `field`. */
static const TfTensor *seed_field(const TfModel *m, const TfLayer *ly, const char *field,
                                  int *transposed) {
    *transposed = 0;
    if (strcmp(field, "query") == 0) return T(m, ly->query);
    if (strcmp(field, "key") == 0) return T(m, ly->key);
    if (strcmp(field, "value") == 0) return T(m, ly->value);
    *transposed = 1;
    if (strcmp(field, "first_weights") == 0) return T(m, ly->fc1_weight);
    if (strcmp(field, "second_weights") == 0) return T(m, ly->fc2_weight);
    *transposed = 0;
    if (strcmp(field, "first_bias") == 0) return T(m, ly->fc1_bias);
    if (strcmp(field, "second_bias") == 0) return T(m, ly->fc2_bias);
    return NULL;
}

START_TEST(test_adder_matches_seed_layer_table) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/seed001_layers.txt", tf_env_path("TF_SOURCE_DIR"));
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[4096], layer[64] = "";
    int checked = 0, layers_seen = 0;
    while (fgets(line, sizeof line, f)) {
        char name[64], field[64], shape[64];
        long count;
        if (strncmp(line, "sequence: ", 10) == 0) {
            // find_plus, find_equal, ..., final_projection
            int l = 0;
            for (char *tok = strtok(line + 10, ", \n"); tok; tok = strtok(NULL, ", \n")) {
                if (strcmp(tok, "final_projection") == 0) break;
                ck_assert_int_lt(l, adder->n_layers);
                ck_assert_str_eq(adder->layers[l].name, tok);
                l++;
            }
            ck_assert_int_eq(l, adder->n_layers);
            ck_assert_int_eq(l, 36);
        } else if (line[0] != ' ' && sscanf(line, "%63s", name) == 1 &&
                   (strncmp(line + strlen(name), " = ", 3) == 0 || strcmp(name, "final_projection") == 0)) {
            snprintf(layer, sizeof layer, "%s", name);
            layers_seen++;
        } else if (line[0] == ' ' && sscanf(line, " %63s shape %63s nnz %ld", field, shape, &count) == 3) {
            int rows = 0, cols = 0;
            int dims = sscanf(shape, "%dx%d", &rows, &cols);
            const TfTensor *t;
            int transposed = 0;
            if (strcmp(layer, "final_projection") == 0) {
                // The seed projects onto 80 columns of which the first 14 are
                // the vocabulary; we project onto the vocabulary only.
                t = T(adder, adder->unembed);
                ck_assert_int_eq(t->shape[0], adder->n_vocab);
                ck_assert_int_eq(t->shape[1], rows);
                ck_assert_int_eq((long)nnz(t), count);
                checked++;
                continue;
            }
            if (strcmp(field, "query@key.T") == 0) continue;
            const TfLayer *ly = layer_named(adder, layer);
            ck_assert_msg(ly != NULL, "no layer named %s", layer);
            t = seed_field(adder, ly, field, &transposed);
            ck_assert_msg(t != NULL, "%s: unknown field %s", layer, field);
            if (strcmp(layer, "is_zero") == 0 && strcmp(field, "first_bias") == 0) {
                // The seed's bias has shape (1,) and PyTorch broadcasts it
                // to both hidden units; we store the broadcast explicitly.
                ck_assert_int_eq(t->shape[0], 2);
                ck_assert_float_eq(t->data[0], 10.0f);
                ck_assert_float_eq(t->data[1], 10.0f);
                checked++;
                continue;
            }
            if (dims == 2) {
                ck_assert_int_eq(t->ndim, 2);
                ck_assert_msg(t->shape[0] == (transposed ? cols : rows) &&
                                  t->shape[1] == (transposed ? rows : cols),
                              "%s.%s: shape [%lld, %lld] vs seed %s", layer, field,
                              (long long)t->shape[0], (long long)t->shape[1], shape);
            } else {
                ck_assert_int_eq(t->ndim, 1);
                ck_assert_int_eq(t->shape[0], rows);
            }
            ck_assert_msg((long)nnz(t) == count, "%s.%s: %zu non-zeros, seed has %ld", layer,
                          field, nnz(t), count);
            checked++;
        }
    }
    fclose(f);
    ck_assert_int_eq(layers_seen, 13); /* 12 layer objects + final_projection */
    ck_assert_int_ge(checked, 40);
}
END_TEST

START_TEST(test_adder_layout_is_the_seeds) {
    const char *names[] = {"tokens", "pos", "left_pos", "right_pos", "out_pos", "left",
                           "right", "out", "carry", "distance", "final"};
    const int offsets[] = {0, 14, 16, 18, 20, 22, 36, 50, 64, 65, 66};
    ck_assert_int_eq(adder->d_model, 80);
    ck_assert_int_eq(adder->n_regs, 11);
    for (int r = 0; r < 11; r++) {
        ck_assert_str_eq(adder->regs[r].name, names[r]);
        ck_assert_int_eq(adder->regs[r].offset, offsets[r]);
    }
    ck_assert_str_eq(adder->regs[adder->output_reg].name, "final");
    ck_assert_int_eq(adder->generate, 4);
    ck_assert_int_eq(adder->max_len, 36); /* the positions the seed's FindAndStore holds for */
    ck_assert(memcmp(adder->vocab, "0123456789+= \n", 14) == 0);
}
END_TEST

START_TEST(test_find_and_store_weights) {
    const TfLayer *ly = layer_named(adder, "find_plus");
    ck_assert_int_eq(ly->kind, TF_LAYER_ATTENTION);
    ck_assert_float_eq_tol(ly->scale, 1.0 / sqrt(80.0), 1e-9);
    const TfTensor *q = T(adder, ly->query), *k = T(adder, ly->key), *v = T(adder, ly->value);
    for (int o = 0; o < 80; o++)
        for (int i = 0; i < 80; i++) {
            ck_assert_float_eq(W(q, o, i), o == 10 ? 1e10f : -1e10f); /* '+' is token 10 */
            ck_assert_float_eq(W(k, o, i), o == i ? 1.0f : 0.0f);
        }
    ck_assert_float_eq(W(v, 16, 14), 1.0f); /* pos.sin -> left_pos.sin */
    ck_assert_float_eq(W(v, 17, 15), 1.0f);
    ck_assert_int_eq(nnz(v), 2);
    // find_equal and find_out differ only in the value (their target).
    const TfLayer *eq = layer_named(adder, "find_equal"), *out = layer_named(adder, "find_out");
    ck_assert_int_eq(eq->query, out->query);
    ck_assert_int_ne(eq->value, out->value);
    ck_assert_int_ne(eq->query, ly->query);
}
END_TEST

START_TEST(test_step_position_weights) {
    const TfLayer *ly = layer_named(adder, "step_pos"); /* left -1, right -1, out +1 */
    const TfTensor *w1 = T(adder, ly->fc1_weight), *b1 = T(adder, ly->fc1_bias);
    const TfTensor *w2 = T(adder, ly->fc2_weight), *b2 = T(adder, ly->fc2_bias);
    const int regs[] = {16, 18, 20};
    const int steps[] = {-1, -1, 1};
    for (int r = 0; r < 3; r++) {
        double a = -steps[r] * (2 * M_PI) / 100;
        int c = regs[r];
        ck_assert_float_eq(W(w1, c, c), (float)(cos(a) - 1));
        ck_assert_float_eq(W(w1, c, c + 1), (float)-sin(a));
        ck_assert_float_eq(W(w1, c + 1, c), (float)sin(a));
        ck_assert_float_eq(W(w1, c + 1, c + 1), (float)(cos(a) - 1));
    }
    for (int c = 0; c < 80; c++) {
        ck_assert_float_eq(b1->data[c], 1000.0f);
        ck_assert_float_eq(b2->data[c], -1000.0f);
        ck_assert_float_eq(W(w2, c, c), 1.0f);
    }
}
END_TEST

START_TEST(test_get_relative_token_weights) {
    const TfLayer *ly = layer_named(adder, "read_right"); /* right_pos + 0 -> right */
    const TfTensor *q = T(adder, ly->query), *k = T(adder, ly->key), *v = T(adder, ly->value);
    ck_assert_float_eq(W(q, 14, 18), 1.0f); /* cos 0 */
    ck_assert_float_eq(W(q, 15, 19), 1.0f);
    ck_assert_float_eq(W(q, 14, 19), 0.0f); /* -sin 0 */
    ck_assert_float_eq(W(k, 14, 14), 1e10f);
    ck_assert_float_eq(W(k, 15, 15), 1e10f);
    for (int t = 0; t < 14; t++) ck_assert_float_eq(W(v, 36 + t, t), 1.0f);
}
END_TEST

START_TEST(test_multiply_table) {
    const TfLayer *ly = layer_named(adder, "multiply");
    const TfTensor *w1 = T(adder, ly->fc1_weight), *b1 = T(adder, ly->fc1_bias);
    const TfTensor *w2 = T(adder, ly->fc2_weight);
    const float carry_scale = (float)(0.01 * (1.0 / 0.99));
    for (int i = 0; i < 10; i++) {
        for (int j = 0; j < 10; j++) {
            int u = 2 * (10 * i + j);
            ck_assert_float_eq(W(w1, u, 22 + i), 500);
            ck_assert_float_eq(W(w1, u, 36 + j), 500);
            ck_assert_float_eq(W(w1, u, 64), -1000);
            ck_assert_float_eq(b1->data[u], -900);
            ck_assert_float_eq(W(w2, 50 + (i + j) % 10, u), 0.01f);
            ck_assert_float_eq(W(w2, 64, u), i + j >= 10 ? 0.01f : 0.0f);
            ck_assert_float_eq(W(w1, u + 1, 22 + i), 333);
            ck_assert_float_eq(W(w1, u + 1, 64), 333);
            ck_assert_float_eq(W(w2, 50 + (i + j + 1) % 10, u + 1), carry_scale);
            ck_assert_float_eq(W(w2, 64, u + 1), i + j + 1 >= 10 ? 0.0f : -carry_scale);
        }
    }
}
END_TEST

START_TEST(test_small_mlp_ops) {
    const TfLayer *ly = layer_named(adder, "clear_lro");
    const TfTensor *w1 = T(adder, ly->fc1_weight), *w2 = T(adder, ly->fc2_weight);
    for (int c = 0; c < 80; c++) {
        int cleared = c >= 22 && c < 64;
        ck_assert_float_eq(W(w1, c, c), cleared ? 100.0f : 0.0f);
        ck_assert_float_eq(W(w2, c, c), cleared ? -0.01f : 0.0f);
    }
    ly = layer_named(adder, "diff_pos"); /* DiffPos(pos, out_pos) -> distance */
    w1 = T(adder, ly->fc1_weight);
    w2 = T(adder, ly->fc2_weight);
    ck_assert_float_eq(W(w1, 0, 14), 100);
    ck_assert_float_eq(W(w1, 0, 15), 1000);
    ck_assert_float_eq(W(w1, 0, 20), -100);
    ck_assert_float_eq(W(w1, 0, 21), -1000);
    ck_assert_float_eq(W(w1, 1, 14), -100);
    ck_assert_float_eq(W(w1, 1, 21), 1000);
    ck_assert_float_eq(W(w2, 65, 0), 1);
    ck_assert_float_eq(W(w2, 65, 1), 1);
    ly = layer_named(adder, "is_zero");
    w1 = T(adder, ly->fc1_weight);
    w2 = T(adder, ly->fc2_weight);
    ck_assert_float_eq(W(w1, 0, 65), -100);
    ck_assert_float_eq(W(w1, 1, 65), 1);
    ck_assert_float_eq(W(w2, 65, 0), 0.1f);
    ck_assert_float_eq(W(w2, 65, 1), -1);
    ck_assert_float_eq(T(adder, ly->fc2_bias)->data[65], 10);
    ly = layer_named(adder, "copy_out"); /* CopyOnMatch(distance, out) -> final */
    w1 = T(adder, ly->fc1_weight);
    w2 = T(adder, ly->fc2_weight);
    for (int i = 0; i < 14; i++) {
        ck_assert_float_eq(W(w1, i, 65), 100);
        ck_assert_float_eq(W(w1, i, 50 + i), 100);
        ck_assert_float_eq(T(adder, ly->fc1_bias)->data[i], -190);
        ck_assert_float_eq(W(w2, 66 + i, i), 0.1f);
    }
}
END_TEST

START_TEST(test_embeddings) {
    const TfTensor *te = T(adder, adder->tok_embed), *pe = T(adder, adder->pos_embed);
    const TfTensor *un = T(adder, adder->unembed);
    /* Rows 0..35, the seed's to the float: past them its FindAndStore takes
     * another key (compiler/lower.c, seed_positions). */
    ck_assert_int_eq(pe->shape[0], 36);
    for (int t = 0; t < 14; t++) {
        ck_assert_float_eq(W(te, t, t), 1.0f);
        ck_assert_float_eq(W(un, t, 66 + t), 1.0f);
    }
    ck_assert_int_eq(nnz(te), 14);
    for (int p = 0; p < 36; p++) {
        ck_assert_float_eq(W(pe, p, 14), (float)sin(p * (2 * M_PI) / 100));
        ck_assert_float_eq(W(pe, p, 15), (float)cos(p * (2 * M_PI) / 100));
    }
}
END_TEST

START_TEST(test_repeated_layers_share_tensors) {
    // The 4 applications of each layer of the loop body are one set of weights.
    int clears = 0, first = -1;
    for (int l = 0; l < adder->n_layers; l++) {
        if (strcmp(adder->layers[l].name, "clear_lro") != 0) continue;
        if (first < 0) first = l;
        ck_assert_int_eq(adder->layers[l].fc1_weight, adder->layers[first].fc1_weight);
        ck_assert_int_eq(adder->layers[l].line, adder->layers[first].line);
        clears++;
    }
    ck_assert_int_eq(clears, 4);
    ck_assert_int_lt(model_param_count(adder), 200000); /* not 4x the loop body */
}
END_TEST

START_TEST(test_relative_offsets_and_other_period) {
    TfModel *m = tf_compile_text("vocab \"ab\"; period 12; position p; token t;\n"
                                 "g: GetRelativeToken(p - 3) -> t;\n"
                                 "s: StepPosition(p: 5);\n"
                                 "output t; generate 2;\n");
    ck_assert_int_eq(m->d_model, 2 + 2 + 2 + 2);
    ck_assert_int_eq(m->max_len, 12);
    const TfTensor *q = T(m, layer_named(m, "g")->query);
    double a = 3 * (2 * M_PI) / 12; /* reading at p - 3 rotates by +3 steps */
    ck_assert_float_eq(W(q, 2, 4), (float)cos(a));
    ck_assert_float_eq(W(q, 2, 5), (float)-sin(a));
    ck_assert_float_eq(W(q, 3, 4), (float)sin(a));
    const TfTensor *w1 = T(m, layer_named(m, "s")->fc1_weight);
    double b = -5 * (2 * M_PI) / 12;
    ck_assert_float_eq(W(w1, 4, 4), (float)(cos(b) - 1));
    ck_assert_float_eq(W(w1, 5, 4), (float)sin(b));
    ck_assert_str_eq(layer_named(m, "g")->op, "GetRelativeToken");
    ck_assert_int_eq(layer_named(m, "s")->line, 3);
    model_free(m);
}
END_TEST

START_TEST(test_unlabelled_layers_take_the_op_name) {
    TfModel *m = tf_compile_text("vocab \"0123456789\"; token a, b, o; scalar c;\n"
                                 "repeat 2 { repeat 3 { Multiply(a, b, c) -> o; } Clear(a); }\n"
                                 "output o;\n");
    ck_assert_int_eq(m->n_layers, 8);
    ck_assert_str_eq(m->layers[0].name, "multiply");
    ck_assert_str_eq(m->layers[3].name, "clear");
    ck_assert_int_eq(m->generate, 1);
    ck_assert_int_eq(m->max_len, 100);
    model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("lower");
    TCase *tc = tcase_create("adder");
    tcase_add_unchecked_fixture(tc, load_adder, free_adder);
    tcase_add_test(tc, test_adder_matches_seed_layer_table);
    tcase_add_test(tc, test_adder_layout_is_the_seeds);
    tcase_add_test(tc, test_find_and_store_weights);
    tcase_add_test(tc, test_step_position_weights);
    tcase_add_test(tc, test_get_relative_token_weights);
    tcase_add_test(tc, test_multiply_table);
    tcase_add_test(tc, test_small_mlp_ops);
    tcase_add_test(tc, test_embeddings);
    tcase_add_test(tc, test_repeated_layers_share_tensors);
    suite_add_tcase(s, tc);
    TCase *small = tcase_create("small");
    tcase_add_test(small, test_relative_offsets_and_other_period);
    tcase_add_test(small, test_unlabelled_layers_take_the_op_name);
    suite_add_tcase(s, small);
    return tf_run_suite(s);
}
