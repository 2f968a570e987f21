/* test_finetune.c: training compiled models (runtime/train/finetune.h): the
 * trainer's gradient on compiled layer structures against finite
 * differences, which tensors --freeze/--train name, frozen tensors kept bit
 * for bit, and what the trainer refuses. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "finetune.h"
#include "rng.h"
#include "testmodel.h"
#include "testutil.h"
#include "train.h"

/* A batch of three sequences of lengths 5, 3, 6; every row after the first
 * of a sequence has a target. Sequences start with the model's bos. */
static void small_batch(const TfModel *m, TfBatch *b, int *tok, int *start, int *tgt) {
    static const int lens[3] = {5, 3, 6};
    int row = 0;
    TfRng r;
    rng_seed(&r, 9);
    for (int s = 0; s < 3; s++) {
        start[s] = row;
        for (int i = 0; i < lens[s]; i++, row++) {
            tok[row] = i == 0 && m->bos >= 0 ? m->bos : (int)rng_below(&r, (uint64_t)m->n_vocab);
            tgt[row] = i >= 1 ? (int)rng_below(&r, (uint64_t)m->n_vocab) : -1;
        }
    }
    start[3] = row;
    *b = (TfBatch){3, tok, start, tgt, NULL, NULL, 0, 0, 0, 0};
}

static TfTrainOptions opts(TfOptimizer opt, const int *trainable) {
    TfTrainOptions o = {opt, 0.9f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.0f, 0.0f, 1, 7, 1, trainable};
    return o;
}

/* ---- the gradient on compiled structures -------------------------------------
 * Compiled models have what learned ones do not: attention without an output
 * projection (-O0), one tensor in several layers and roles (an attention key
 * that is also an MLP's fc2 at -O0; embed.token.weight as a head's value at
 * -O), heads of rank 1, a query bias alone, ReLU and GELU MLPs, no LayerNorm.
 * Their weights are replaced by small random values (the compiled ones are
 * saturated: softmax weights of exactly 0 and 1, ReLU kinks at 0, where
 * finite differences say nothing) and attention scales kept at most 1; the
 * structure, sharing included, stays. */
static const struct {
    const char *path;
    int opt;
} compiled[] = {
    {"programs/adder.tfp", 0},
    {"programs/adder.tfp", 1},
    {"tests/data/segments.tfp", 1},
};

START_TEST(test_compiled_gradient) {
    TfModel *m = tf_compile_program_opt(compiled[_i].path, compiled[_i].opt);
    TfRng r;
    rng_seed(&r, 5 + (uint64_t)_i);
    for (int i = 0; i < m->n_tensors; i++) {
        TfTensor *t = &m->tensors[i];
        float a = 1.0f / sqrtf((float)t->shape[t->ndim - 1]);
        for (size_t j = 0; j < t->nelem; j++) t->data[j] = (2.0f * rng_float(&r) - 1.0f) * a;
    }
    for (int l = 0; l < m->n_layers; l++)
        if (m->layers[l].scale > 1.0f) m->layers[l].scale = 1.0f;
    TfTrainOptions o = opts(TF_OPT_ADAMW, NULL);
    TfError err = {""};
    TfTrainer *t = trainer_new(m, &o, 64, 8, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    int tok[14], start[4], tgt[14];
    TfBatch b;
    small_batch(m, &b, tok, start, tgt);
    ck_assert_msg(trainer_check_batch(t, &b, &err) == 0, "%s", err.msg);
    double loss = trainer_forward_backward(t, &b, 0, NULL);
    ck_assert(isfinite(loss) && loss > 0);
    size_t n;
    trainer_params(t, &n);
    float *g = malloc(n * sizeof *g);
    memcpy(g, trainer_grads(t, &n), n * sizeof *g);
    char what[96];
    snprintf(what, sizeof what, "%s -O%d", compiled[_i].path, compiled[_i].opt);
    int nonzero;
    int checked = tf_check_gradients(t, &b, m, g, 1 + n / 400, 0, 0, what, &nonzero);
    ck_assert_int_gt(checked, 150);
    ck_assert_int_gt(nonzero, checked / 4);
    free(g);
    trainer_free(t);
    model_free(m);
}
END_TEST

/* ---- which tensors train ------------------------------------------------------ */

/* The names of the tensors that train under the rules (alternating
 * --freeze, --train from `first_train`), space-separated, or the error. */
static void mask_of(const TfModel *m, const char *const *specs, int n, int first_train,
                    char *out, size_t size) {
    TfFinetuneRules rules = {0};
    for (int i = 0; i < n; i++) ck_assert(finetune_rule_add(&rules, (i + first_train) % 2, specs[i]) == 0);
    int *mask = calloc((size_t)m->n_tensors, sizeof *mask);
    TfError err = {""};
    out[0] = '\0';
    if (finetune_mask(m, &rules, 1, mask, &err) < 0) {
        snprintf(out, size, "error: %s", err.msg);
    } else {
        for (int i = 0; i < m->n_tensors; i++)
            if (mask[i]) {
                size_t k = strlen(out);
                snprintf(out + k, size - k, "%s%s", k ? " " : "", m->tensors[i].name);
            }
    }
    free(mask);
    finetune_rules_free(&rules);
}

START_TEST(test_rules) {
    TfModel *m = tf_compile_program_opts("tests/data/segments_bug.tfp", 1, 1);
    char got[2048];
    static const struct {
        const char *specs[3];
        int n, first_train;
        const char *want;
    } cases[] = {
        {{"all", "seg.mlp.fc2.weight"}, 2, 0, "layers.0.mlp.fc2.weight"},
        {{"all", "layers.0"}, 2, 0,
         "layers.0.mlp.fc1.weight layers.0.mlp.fc1.bias layers.0.mlp.fc2.weight shared.0.mlp.fc2.bias"},
        {{"embed,unembed,layers.0-1"}, 1, 0,
         "layers.2.attn.query.weight layers.2.attn.query.bias layers.2.attn.key.weight "
         "layers.2.attn.value.weight layers.2.attn.output.weight"},
        {{"all", "layers.2.attn.query", "layers.2.attn.query.bias"}, 3, 0,
         "layers.2.attn.query.weight"},
        {{"all", "shared,out"}, 2, 0,
         "shared.0.mlp.fc2.bias layers.2.attn.query.weight layers.2.attn.query.bias "
         "layers.2.attn.key.weight layers.2.attn.value.weight layers.2.attn.output.weight"},
        {{"embed.position.weight"}, 1, 1, /* a fixed position table trains when named */
         "embed.token.weight embed.position.weight unembed.weight layers.0.mlp.fc1.weight "
         "layers.0.mlp.fc1.bias layers.0.mlp.fc2.weight shared.0.mlp.fc2.bias "
         "layers.1.mlp.fc1.weight layers.1.mlp.fc1.bias layers.1.mlp.fc2.weight "
         "layers.2.attn.query.weight layers.2.attn.query.bias layers.2.attn.key.weight "
         "layers.2.attn.value.weight layers.2.attn.output.weight"},
        {{"embd"}, 1, 0, "error: --freeze: 'embd' names no tensor or layer (did you mean 'embed'?)"},
        {{"all", "layers.2.atn"}, 2, 0,
         "error: --train: 'layers.2.atn': no tensor of that layer has a role starting 'atn' (roles "
         "as tfinfo lists them: attn.query.weight, mlp.fc1, mlp, ...)"},
        {{"all", "shared.0.mlp.fc2.bias.x"}, 2, 0,
         "error: --train: 'shared.0.mlp.fc2.bias.x' names no tensor or layer (did you mean "
         "'shared.0.mlp.fc2.bias'?)"},
        {{"layers.3"}, 1, 0, "error: --freeze: 'layers.3': the model has 3 layers (layers.0-2)"},
        {{"layers.2-1"}, 1, 0,
         "error: --freeze: 'layers.2-1': a range of layers goes from the lower to the higher"},
        {{"layer.1"}, 1, 0, "error: --freeze: 'layer.1' names no tensor or layer (did you mean 'layers.1'?)"},
        {{"all"}, 1, 0, "error: nothing to train: every tensor is frozen (add --train SPEC after --freeze)"},
        {{"zzzzzzzz"}, 1, 0, "error: --freeze: 'zzzzzzzz' names no tensor or layer (tfinfo lists them)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        mask_of(m, cases[c].specs, cases[c].n, cases[c].first_train, got, sizeof got);
        ck_assert_msg(strcmp(got, cases[c].want) == 0, "case %zu: got '%s', want '%s'", c, got,
                      cases[c].want);
    }
    TfFinetuneRules rules = {0};
    finetune_rule_add(&rules, 0, "all");
    finetune_rule_add(&rules, 1, "seg,cp");
    char *text = finetune_rules_text(&rules);
    ck_assert_str_eq(text, "--freeze all --train seg,cp");
    free(text);
    finetune_rules_free(&rules);
    model_free(m);
}
END_TEST

/* AdamW with weight decay for a few steps: every frozen tensor keeps its
 * bytes, every trained one moves; the checkpoint has optimizer state for
 * the trained tensors alone. */
START_TEST(test_frozen_tensors_keep_their_bytes) {
    TfModel *m = tf_compile_program_opts("tests/data/segments_bug.tfp", 1, 1);
    TfModel *before = tf_compile_program_opts("tests/data/segments_bug.tfp", 1, 1);
    TfFinetuneRules rules = {0};
    finetune_rule_add(&rules, 0, "all");
    finetune_rule_add(&rules, 1, "seg,layers.2.attn.value");
    int *mask = calloc((size_t)m->n_tensors, sizeof *mask);
    TfError err = {""};
    ck_assert_msg(finetune_mask(m, &rules, 1, mask, &err) == 0, "%s", err.msg);
    TfTrainOptions o = opts(TF_OPT_ADAMW, mask);
    TfTrainer *t = trainer_new(m, &o, 64, 8, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    int tok[14], start[4], tgt[14];
    TfBatch b;
    small_batch(m, &b, tok, start, tgt);
    for (int s = 0; s < 5; s++) {
        trainer_forward_backward(t, &b, s, NULL);
        trainer_step(t, 1e-2f);
    }
    trainer_sync_model(t);
    int n_trained = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        int same = memcmp(m->tensors[i].data, before->tensors[i].data,
                          m->tensors[i].nelem * sizeof(float)) == 0;
        ck_assert_msg(same == !mask[i], "%s: %s", m->tensors[i].name,
                      mask[i] ? "trained but unchanged" : "frozen but changed");
        n_trained += mask[i];
    }
    ck_assert_int_eq(n_trained, 5);
    char path[] = "/tmp/test_finetune_XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    ck_assert_msg(trainer_save_checkpoint(t, path, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(finetune_check_state(m, mask, &err), 0);
    mask[m->tok_embed] = 1;
    ck_assert_int_eq(finetune_check_state(m, mask, &err), -1);
    ck_assert_str_eq(err.msg, "the checkpoint froze 'embed.token.weight' but these options train "
                              "it (give the --freeze and --train options of the run that wrote it)");
    mask[m->tok_embed] = 0;
    // A checkpoint as a starting point: its optimizer state is dropped.
    int n_params = m->n_tensors;
    while (n_params > 0 && strncmp(m->tensors[n_params - 1].name, "optim.", 6) == 0) n_params--;
    ck_assert_int_lt(n_params, m->n_tensors);
    finetune_drop_state(m);
    ck_assert_int_eq(m->n_tensors, n_params);
    unlink(path);
    trainer_free(t);
    free(mask);
    finetune_rules_free(&rules);
    model_free(before);
    model_free(m);
}
END_TEST

/* With layers frozen the backward pass stops below the lowest trained one:
 * the trained tensors' gradients are those of the full pass, bit for bit. */
START_TEST(test_frozen_layers_cut_the_backward_pass) {
    TfModel *m = tf_compile_program_opt("programs/adder.tfp", 1);
    static const char *const specs[] = {"layers.20-35", "unembed", "layers.8,layers.32.mlp"};
    TfFinetuneRules rules = {0};
    finetune_rule_add(&rules, 0, "all");
    finetune_rule_add(&rules, 1, specs[_i]);
    int *mask = calloc((size_t)m->n_tensors, sizeof *mask);
    TfError err = {""};
    ck_assert_msg(finetune_mask(m, &rules, 1, mask, &err) == 0, "%s", err.msg);
    TfTrainOptions all = opts(TF_OPT_ADAMW, NULL), some = opts(TF_OPT_ADAMW, mask);
    TfTrainer *t_all = trainer_new(m, &all, 64, 8, &err), *t_some = trainer_new(m, &some, 64, 8, &err);
    ck_assert(t_all && t_some);
    int tok[14], start[4], tgt[14];
    TfBatch b;
    small_batch(m, &b, tok, start, tgt);
    double l1 = trainer_forward_backward(t_all, &b, 0, NULL);
    double l2 = trainer_forward_backward(t_some, &b, 0, NULL);
    ck_assert(l1 == l2);
    size_t n;
    const float *g1 = trainer_grads(t_all, &n), *g2 = trainer_grads(t_some, &n);
    int compared = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        if (!mask[i]) continue;
        size_t off = trainer_tensor_offset(t_all, i);
        ck_assert_msg(memcmp(g1 + off, g2 + off, m->tensors[i].nelem * sizeof(float)) == 0,
                      "%s: %s", specs[_i], m->tensors[i].name);
        compared++;
    }
    ck_assert_int_gt(compared, 0);
    // Below layer 8 nothing trains (unembed, layers.8...): layer 0 gets no gradient.
    if (_i > 0) {
        int k = model_find_tensor(m, "layers.0.attn.output.weight");
        size_t off = trainer_tensor_offset(t_all, k);
        int zero_all = 1, zero_some = 1;
        for (size_t j = 0; j < m->tensors[k].nelem; j++) {
            zero_all &= g1[off + j] == 0.0f;
            zero_some &= g2[off + j] == 0.0f;
        }
        ck_assert(!zero_all && zero_some);
    }
    trainer_free(t_all);
    trainer_free(t_some);
    free(mask);
    finetune_rules_free(&rules);
    model_free(m);
}
END_TEST

START_TEST(test_refusals) {
    TfError err = {""};
    TfModel *m = tf_compile_text("vocab \"ab\";\nmaxlen 4;\nnum n;\nn: Map(indices * 2) -> n;\n"
                                 "output n at every position;\n");
    ck_assert_int_eq(finetune_check_model(m, &err), -1);
    ck_assert_str_eq(err.msg, "the model prints a number at every position (register 'n'); "
                              "tftrain trains models whose output is a token or a class");
    model_free(m);
    m = tf_compile_program_opt("tests/data/segments.tfp", 1);
    ck_assert_int_eq(finetune_check_model(m, &err), 0);
    int tokens[] = {0, 1, 2, 3, 4, 11, 2, 1, 2, 3, 4, 11};
    TfExample ex[2] = {{0, 6, 6, 0, 0, 0}, {6, 6, 6, 0, 0, 0}};
    TfDataset d = {.ex = ex, .n = 2, .tokens = tokens, .n_tokens = 12, .max_len = 6};
    ck_assert_int_eq(finetune_check_data(m, &d, &err), -1);
    ck_assert_str_eq(err.msg, "example 2 does not start with the model's beginning-of-sequence token '^'");
    d.n = 1;
    ck_assert_int_eq(finetune_check_data(m, &d, &err), 0);
    model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("finetune");
    TCase *tc = tcase_create("finetune");
    tcase_add_loop_test(tc, test_compiled_gradient, 0, 3);
    tcase_add_test(tc, test_rules);
    tcase_add_test(tc, test_frozen_tensors_keep_their_bytes);
    tcase_add_loop_test(tc, test_frozen_layers_cut_the_backward_pass, 0, 3);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
