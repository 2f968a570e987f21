/* test_tfw.c: .tfw round trips, and every way the reader rejects a file;
 * the line reader of text input (lines.h). */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "lines.h"
#include "testutil.h"
#include "tfw.h"

/* A small model: d_model 6, vocab "ab\n", one attention and one MLP layer
 * that share a tensor, three registers. */
static TfModel *small_model(void) {
    TfError err = {""};
    TfModel *m = model_new();
    m->d_model = 6;
    m->n_vocab = 3;
    m->vocab = malloc(3);
    memcpy(m->vocab, "ab\n", 3);
    m->period = 5;
    m->max_len = 5;
    m->generate = 2;
    int64_t vd[2] = {3, 6}, pd[2] = {5, 6}, dd[2] = {6, 6}, hd[2] = {4, 6}, dh[2] = {6, 4};
    int64_t h[1] = {4}, d1[1] = {6};
    m->tok_embed = model_add_tensor(m, TF_TENSOR_TOKEN_EMBED, 2, vd, &err);
    m->pos_embed = model_add_tensor(m, TF_TENSOR_POS_EMBED, 2, pd, &err);
    m->unembed = model_add_tensor(m, TF_TENSOR_UNEMBED, 2, vd, &err);
    int sq = model_add_tensor(m, "shared.square", 2, dd, &err);
    int w1 = model_add_tensor(m, "mlp.fc1.weight", 2, hd, &err);
    int b1 = model_add_tensor(m, "mlp.fc1.bias", 1, h, &err);
    int w2 = model_add_tensor(m, "mlp.fc2.weight", 2, dh, &err);
    int b2 = model_add_tensor(m, "mlp.fc2.bias", 1, d1, &err);
    ck_assert_int_ge(b2, 0);
    for (int t = 0; t < m->n_tensors; t++)
        for (size_t i = 0; i < m->tensors[t].nelem; i++)
            m->tensors[t].data[i] = (float)(t * 1000 + (int)i) / 7.0f - 3.0f;
    TfLayer a = model_layer_init(TF_LAYER_ATTENTION);
    a.name = "attn0";
    a.op = "Test";
    a.line = 7;
    a.n_heads = 2;
    a.d_head = 3;
    a.d_vhead = 3;
    a.scale = 0.1f;
    a.causal = 1;
    a.query = a.key = a.value = sq;
    a.output = sq;
    ck_assert_int_eq(model_add_layer(m, &a, &err), 0);
    TfLayer f = model_layer_init(TF_LAYER_MLP);
    f.name = "mlp1";
    f.d_hidden = 4;
    f.act = TF_ACT_RELU;
    f.fc1_weight = w1;
    f.fc1_bias = b1;
    f.fc2_weight = w2;
    f.fc2_bias = -1;
    (void)b2;
    ck_assert_int_eq(model_add_layer(m, &f, &err), 1);
    model_add_register(m, "tokens", TF_REG_TOKEN, 0, 3, &err);
    model_add_register(m, "pos", TF_REG_POSITION, 3, 2, &err);
    model_add_register(m, "s", TF_REG_SCALAR, 5, 1, &err);
    m->output_reg = 0;
    m->source = strdup("vocab \"ab\\n\";\n");
    m->source_name = strdup("small.tfp");
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    return m;
}

static void assert_same_model(const TfModel *a, const TfModel *b) {
    ck_assert_int_eq(a->d_model, b->d_model);
    ck_assert_int_eq(a->n_vocab, b->n_vocab);
    ck_assert(memcmp(a->vocab, b->vocab, (size_t)a->n_vocab) == 0);
    ck_assert_int_eq(a->period, b->period);
    ck_assert_int_eq(a->max_len, b->max_len);
    ck_assert_int_eq(a->generate, b->generate);
    ck_assert_int_eq(a->output_reg, b->output_reg);
    ck_assert_int_eq(a->n_tensors, b->n_tensors);
    for (int t = 0; t < a->n_tensors; t++) {
        int u = model_find_tensor(b, a->tensors[t].name);
        ck_assert_int_ge(u, 0);
        ck_assert_int_eq(a->tensors[t].ndim, b->tensors[u].ndim);
        ck_assert_int_eq(a->tensors[t].nelem, b->tensors[u].nelem);
        ck_assert(memcmp(a->tensors[t].data, b->tensors[u].data, a->tensors[t].nelem * 4) == 0);
    }
    ck_assert_int_eq(a->n_layers, b->n_layers);
    for (int l = 0; l < a->n_layers; l++) {
        const TfLayer *x = &a->layers[l], *y = &b->layers[l];
        ck_assert_int_eq(x->kind, y->kind);
        ck_assert_str_eq(x->name, y->name);
        ck_assert(x->op == y->op || (x->op && y->op && strcmp(x->op, y->op) == 0));
        ck_assert_int_eq(x->line, y->line);
        ck_assert(x->scale == y->scale); /* bit-exact */
        ck_assert_int_eq(x->n_heads, y->n_heads);
        ck_assert_int_eq(x->causal, y->causal);
        ck_assert_int_eq(x->act, y->act);
        ck_assert_int_eq(x->d_hidden, y->d_hidden);
        ck_assert_int_eq(x->fc2_bias < 0, y->fc2_bias < 0);
        ck_assert_int_eq(x->output < 0, y->output < 0);
    }
    ck_assert_int_eq(b->layers[0].query, b->layers[0].key); /* still shared */
    ck_assert_int_eq(a->n_regs, b->n_regs);
    for (int r = 0; r < a->n_regs; r++) {
        ck_assert_str_eq(a->regs[r].name, b->regs[r].name);
        ck_assert_int_eq(a->regs[r].kind, b->regs[r].kind);
        ck_assert_int_eq(a->regs[r].offset, b->regs[r].offset);
    }
    ck_assert_str_eq(a->source, b->source);
    ck_assert_str_eq(a->source_name, b->source_name);
}

static void on_alarm(int sig) { (void)sig; }

/* A child that writes two lines to a pipe, 0.4 s apart; its pid, the read
 * end in *rd. SIGALRM, whose handler does not restart reads, comes 0.1 s
 * on, while the reader waits for the second line. */
static pid_t pausing_writer(int *rd, struct sigaction *old) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        struct timespec pause = {0, 400 * 1000 * 1000};
        int ok = write(fds[1], "1+2=\t3\n", 7) == 7;
        nanosleep(&pause, NULL);
        ok &= write(fds[1], "4+5=\t9\n", 7) == 7;
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; // no SA_RESTART
    ck_assert_int_eq(sigaction(SIGALRM, &sa, old), 0);
    struct itimerval it = {{0, 0}, {0, 100 * 1000}};
    ck_assert_int_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
    *rd = fds[0];
    return pid;
}

static void writer_done(pid_t pid, const struct sigaction *old) {
    sigaction(SIGALRM, old, NULL);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A signal arrives while a reader waits on a pipe: read(2) ends with EINTR,
 * and the line reader (tfrun --check - under mpirun) and the whole-file
 * reader (a program or weights from a pipe) read on instead of ending the
 * input with an error (file.h, tf_read_interrupted). */
START_TEST(test_read_after_interrupt) {
    struct sigaction old;
    int rd;
    pid_t pid = pausing_writer(&rd, &old);
    FILE *f = fdopen(rd, "r");
    ck_assert_ptr_nonnull(f);
    TfLine l = {0};
    ck_assert_int_eq(tf_line_read(f, 100, &l), TF_LINE_OK);
    ck_assert_str_eq(l.buf, "1+2=\t3\n");
    ck_assert_int_eq(tf_line_read(f, 100, &l), TF_LINE_OK);
    ck_assert_str_eq(l.buf, "4+5=\t9\n");
    ck_assert_int_eq(tf_line_read(f, 100, &l), TF_LINE_END);
    tf_line_free(&l);
    fclose(f);
    writer_done(pid, &old);

    pid = pausing_writer(&rd, &old);
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", rd);
    size_t len = 0;
    char *text = tf_file_read(path, &len);
    ck_assert_msg(text != NULL, "%s", strerror(errno));
    ck_assert_str_eq(text, "1+2=\t3\n4+5=\t9\n");
    free(text);
    close(rd);
    writer_done(pid, &old);
}
END_TEST

START_TEST(test_round_trip_buffer) {
    TfModel *m = small_model();
    unsigned char *buf;
    size_t len;
    TfError err = {""};
    ck_assert_int_eq(tfw_write_buffer(m, &buf, &len, &err), 0);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    ck_assert_int_eq((8 + hlen) % 8, 0); /* padded for aligned data */
    TfModel *back = tfw_read_buffer(buf, len, &err);
    ck_assert_msg(back != NULL, "%s", err.msg);
    assert_same_model(m, back);
    model_free(back);
    free(buf);
    model_free(m);
}
END_TEST

START_TEST(test_round_trip_file) {
    TfModel *m = small_model();
    char path[] = "/tmp/tfw_test_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    TfError err = {""};
    ck_assert_msg(tfw_write(m, path, &err) == 0, "%s", err.msg);
    TfModel *back = tfw_read(path, &err);
    ck_assert_msg(back != NULL, "%s", err.msg);
    assert_same_model(m, back);
    model_free(back);
    model_free(m);
    remove(path);
}
END_TEST

START_TEST(test_write_failure_leaves_nothing) {
    TfModel *m = small_model();
    TfError err = {""};
    ck_assert_int_eq(tfw_write(m, "/nonexistent-dir/x.tfw", &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent-dir/x.tfw: cannot create"));
    model_free(m);
}
END_TEST

START_TEST(test_missing_file) {
    TfError err = {""};
    ck_assert_ptr_null(tfw_read("/nonexistent-dir/x.tfw", &err));
    ck_assert_str_eq(err.msg, "/nonexistent-dir/x.tfw: cannot open: No such file or directory");
}
END_TEST

/* ---- rejections: a valid file, changed in one way ------------------------ */

static unsigned char *valid_bytes(size_t *len) {
    TfModel *m = small_model();
    unsigned char *buf;
    TfError err = {""};
    ck_assert_int_eq(tfw_write_buffer(m, &buf, len, &err), 0);
    model_free(m);
    return buf;
}

/* The header of a valid file as JSON, and its data section. */
static cJSON *valid_header(unsigned char **data, size_t *dlen) {
    size_t len;
    unsigned char *buf = valid_bytes(&len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    cJSON *root = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hlen);
    *dlen = len - 8 - (size_t)hlen;
    *data = malloc(*dlen);
    memcpy(*data, buf + 8 + hlen, *dlen);
    free(buf);
    return root;
}

static unsigned char *assemble(const char *json, const unsigned char *data, size_t dlen,
                               size_t *len) {
    size_t hlen = strlen(json);
    *len = 8 + hlen + dlen;
    unsigned char *buf = malloc(*len);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, json, hlen);
    memcpy(buf + 8 + hlen, data, dlen);
    return buf;
}

static void expect_rejected(const unsigned char *buf, size_t len, const char *want) {
    TfError err = {""};
    TfModel *m = tfw_read_buffer(buf, len, &err);
    if (m) model_free(m);
    ck_assert_msg(m == NULL, "accepted a file that should fail with: %s", want);
    ck_assert_msg(strstr(err.msg, want) != NULL, "message '%s' does not say '%s'", err.msg, want);
}

typedef void (*Mutation)(cJSON *root, size_t *dlen);

static void expect_header_rejected(Mutation mutate, const char *want) {
    unsigned char *data;
    size_t dlen;
    cJSON *root = valid_header(&data, &dlen);
    mutate(root, &dlen);
    char *json = cJSON_PrintUnformatted(root);
    size_t len;
    unsigned char *buf = assemble(json, data, dlen, &len);
    expect_rejected(buf, len, want);
    free(buf);
    cJSON_free(json);
    cJSON_Delete(root);
    free(data);
}

static cJSON *meta(cJSON *root) { return cJSON_GetObjectItemCaseSensitive(root, "__metadata__"); }
static cJSON *entry(cJSON *root, const char *t) { return cJSON_GetObjectItemCaseSensitive(root, t); }
static void set_meta(cJSON *root, const char *key, const char *value) {
    cJSON_ReplaceItemInObjectCaseSensitive(meta(root), key, cJSON_CreateString(value));
}
static void set_offsets(cJSON *root, const char *t, double b, double e) {
    cJSON *o = cJSON_CreateArray();
    cJSON_AddItemToArray(o, cJSON_CreateNumber(b));
    cJSON_AddItemToArray(o, cJSON_CreateNumber(e));
    cJSON_ReplaceItemInObjectCaseSensitive(entry(root, t), "data_offsets", o);
}
/* The layers metadata with one field of layer l replaced by raw JSON. */
static void set_layer_field(cJSON *root, int l, const char *key, const char *json) {
    cJSON *layers = cJSON_Parse(cJSON_GetObjectItemCaseSensitive(meta(root), "layers")->valuestring);
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetArrayItem(layers, l), key, cJSON_Parse(json));
    char *s = cJSON_PrintUnformatted(layers);
    set_meta(root, "layers", s);
    cJSON_free(s);
    cJSON_Delete(layers);
}

#define MUTATION(name, body) \
    static void name(cJSON *root, size_t *dlen) { (void)root; (void)dlen; body; }

MUTATION(no_metadata, cJSON_DeleteItemFromObjectCaseSensitive(root, "__metadata__"))
MUTATION(foreign_format, set_meta(root, "format", "gguf"))
MUTATION(future_version, set_meta(root, "format_version", "2"))
MUTATION(f16, cJSON_ReplaceItemInObjectCaseSensitive(entry(root, "mlp.fc1.bias"), "dtype",
                                                      cJSON_CreateString("F16")))
MUTATION(no_shape, cJSON_DeleteItemFromObjectCaseSensitive(entry(root, "mlp.fc1.bias"), "shape"))
MUTATION(negative_shape, cJSON_ReplaceItemInObjectCaseSensitive(entry(root, "mlp.fc1.bias"), "shape",
                                                                cJSON_Parse("[-4]")))
MUTATION(fraction_shape, cJSON_ReplaceItemInObjectCaseSensitive(entry(root, "mlp.fc1.bias"), "shape",
                                                                cJSON_Parse("[2.5]")))
MUTATION(rank5, cJSON_ReplaceItemInObjectCaseSensitive(entry(root, "mlp.fc1.bias"), "shape",
                                                       cJSON_Parse("[1,1,1,1,4]")))
MUTATION(huge_shape, cJSON_ReplaceItemInObjectCaseSensitive(entry(root, "mlp.fc1.bias"), "shape",
                                                            cJSON_Parse("[4294967296,4294967296]")))
MUTATION(entry_not_object, cJSON_ReplaceItemInObjectCaseSensitive(root, "mlp.fc1.bias",
                                                                  cJSON_CreateNumber(1)))
MUTATION(backwards, set_offsets(root, "embed.token.weight", 72, 0))
MUTATION(wrong_span, set_offsets(root, "embed.token.weight", 0, 68))
MUTATION(bad_offsets, cJSON_ReplaceItemInObjectCaseSensitive(entry(root, "embed.token.weight"),
                                                             "data_offsets", cJSON_Parse("[0]")))
MUTATION(gap, set_offsets(root, "embed.token.weight", 8, 80))
MUTATION(overlap, set_offsets(root, "embed.position.weight", 0, 120))
static void data_past_end(cJSON *root, size_t *dlen) {
    cJSON *zz = cJSON_Parse("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}");
    cJSON_AddItemToObject(root, "zz", zz);
    set_offsets(root, "zz", (double)*dlen, (double)*dlen + 4);
}
MUTATION(no_d_model, cJSON_DeleteItemFromObjectCaseSensitive(meta(root), "d_model"))
MUTATION(bad_d_model, set_meta(root, "d_model", "six"))
MUTATION(d_model_not_string, cJSON_ReplaceItemInObjectCaseSensitive(meta(root), "d_model",
                                                                    cJSON_CreateNumber(6)))
MUTATION(vocab_not_json, set_meta(root, "vocab", "[\"a\","))
MUTATION(vocab_empty_token, set_meta(root, "vocab", "[\"a\",\"\",\"d\"]"))
MUTATION(vocab_blank_word, set_meta(root, "vocab", "[\"a\",\"b c\",\"d\"]"))
MUTATION(vocab_same_word, set_meta(root, "vocab", "[\"ab\",\"c\",\"ab\"]"))
MUTATION(layer_kind, set_layer_field(root, 0, "kind", "\"conv\""))
MUTATION(layer_tensor, set_layer_field(root, 0, "query", "\"nope.weight\""))
MUTATION(layer_act, set_layer_field(root, 1, "activation", "\"tanh\""))
MUTATION(layer_causal, set_layer_field(root, 0, "causal", "1"))
MUTATION(layer_heads, set_layer_field(root, 0, "heads", "0"))
MUTATION(layer_shape, set_layer_field(root, 0, "heads", "3"))
MUTATION(output_unknown, set_meta(root, "output", "nowhere"))
MUTATION(registers_overlap, cJSON_DeleteItemFromObjectCaseSensitive(meta(root), "output");
         set_meta(root, "registers",
    "[{\"name\":\"a\",\"kind\":\"scalar\",\"offset\":1,\"size\":1},"
    "{\"name\":\"b\",\"kind\":\"position\",\"offset\":0,\"size\":2}]"))
#define LIVE_REGS(live_s, s2)                                                       \
    "[{\"name\":\"tokens\",\"kind\":\"token\",\"offset\":0,\"size\":3},"           \
    "{\"name\":\"pos\",\"kind\":\"position\",\"offset\":3,\"size\":2},"            \
    "{\"name\":\"s\",\"kind\":\"scalar\",\"offset\":5,\"size\":1" live_s "}" s2 "]"
MUTATION(live_backwards, set_meta(root, "registers", LIVE_REGS(",\"live\":[2,1]", "")))
MUTATION(live_not_pair, set_meta(root, "registers", LIVE_REGS(",\"live\":\"1..2\"", "")))
MUTATION(live_fraction, set_meta(root, "registers", LIVE_REGS(",\"live\":[0.5,2]", "")))
MUTATION(live_negative, set_meta(root, "registers", LIVE_REGS(",\"live\":[-1,2]", "")))
MUTATION(live_past_layers, set_meta(root, "registers", LIVE_REGS(",\"live\":[3,9]", "")))
MUTATION(live_meet, set_meta(root, "registers",
    LIVE_REGS(",\"live\":[0,1]", ",{\"name\":\"s2\",\"kind\":\"scalar\",\"offset\":5,"
              "\"size\":1,\"live\":[1,2]}")))
MUTATION(live_meet_default, set_meta(root, "registers",
    LIVE_REGS("", ",{\"name\":\"s2\",\"kind\":\"scalar\",\"offset\":5,\"size\":1,"
              "\"live\":[2,2]}")))
MUTATION(live_output_dead, set_meta(root, "registers",
    "[{\"name\":\"tokens\",\"kind\":\"token\",\"offset\":0,\"size\":3,\"live\":[0,1]},"
    "{\"name\":\"pos\",\"kind\":\"position\",\"offset\":3,\"size\":2},"
    "{\"name\":\"s\",\"kind\":\"scalar\",\"offset\":5,\"size\":1}]"))
MUTATION(d_model_mismatch, set_meta(root, "d_model", "7"))
MUTATION(made_by_not_object, cJSON_AddStringToObject(meta(root), "made_by", "[\"tfc\"]"))
MUTATION(learned_not_json, cJSON_AddStringToObject(meta(root), "learned", "{\"dropout\":"))
MUTATION(no_unembed, cJSON_AddItemToObject(root, "unembed2.weight",
    cJSON_DetachItemFromObjectCaseSensitive(root, "unembed.weight")))

START_TEST(test_rejects_bad_headers) {
    static const struct {
        Mutation mutate;
        const char *message;
    } cases[] = {
        {no_metadata, "not a tfw file: no __metadata__ object"},
        {foreign_format, "not a tfw file: __metadata__.format is 'gguf'"},
        {future_version, "format_version 2 is not supported"},
        {f16, "tensor 'mlp.fc1.bias': dtype 'F16' is not supported (only F32)"},
        {no_shape, "tensor 'mlp.fc1.bias': missing shape"},
        {negative_shape, "tensor 'mlp.fc1.bias': shape[0] is not a non-negative integer"},
        {fraction_shape, "tensor 'mlp.fc1.bias': shape[0] is not a non-negative integer"},
        {rank5, "tensor 'mlp.fc1.bias': rank 5 is not between 1 and 4"},
        {huge_shape, "tensor 'mlp.fc1.bias': shape overflows"},
        {entry_not_object, "tensor 'mlp.fc1.bias': header entry is not an object"},
        {backwards, "tensor 'embed.token.weight': data_offsets [72, 0] run backwards"},
        {wrong_span, "tensor 'embed.token.weight': data_offsets span 68 bytes, but its shape needs 72"},
        {bad_offsets, "tensor 'embed.token.weight': data_offsets is not two non-negative integers"},
        {gap, "data bytes 0..7 belong to no tensor (gap before 'embed.token.weight')"},
        {overlap, "overlap"},
        {data_past_end, "tensor data ends at byte 644, past the end of the file (640 data bytes)"},
        {no_d_model, "__metadata__.d_model is missing"},
        {bad_d_model, "__metadata__.d_model is 'six', not an integer"},
        {d_model_not_string, "__metadata__.d_model is not a string"},
        {vocab_not_json, "__metadata__.vocab is not valid JSON: unexpected end at byte 5"},
        {vocab_empty_token, "__metadata__.vocab[1] is not a non-empty string"},
        {vocab_blank_word, "__metadata__.vocab: vocabulary entry 1 'b c' is not a token of a vocabulary of words"},
        {vocab_same_word, "vocabulary entries 0 and 2 are the same name"},
        {layer_kind, "__metadata__.layers[0]: unknown kind 'conv'"},
        {layer_tensor, "__metadata__.layers[0].query names tensor 'nope.weight', which is not in the file"},
        {layer_act, "__metadata__.layers[1].activation 'tanh' is not one of gelu, relu, gelu_tanh"},
        {layer_causal, "__metadata__.layers[0].causal is not true or false"},
        {layer_heads, "needs positive integers heads, d_head, d_vhead"},
        {layer_shape, "layer 0 'attn0': query: tensor 'shared.square' has shape [6, 6], expected [9, 6]"},
        {output_unknown, "__metadata__.output names register 'nowhere', which is not declared"},
        {registers_overlap, "registers 'a' and 'b' overlap"},
        {live_backwards, "__metadata__.registers[2]: live is not [from, to], integers 0 <= from <= to"},
        {live_not_pair, "__metadata__.registers[2]: live is not [from, to]"},
        {live_fraction, "__metadata__.registers[2]: live is not [from, to]"},
        {live_negative, "__metadata__.registers[2]: live is not [from, to]"},
        {live_past_layers, "register 's': live range 3..9 is not within states 0..2"},
        {live_meet, "registers 's' and 's2' overlap"},
        {live_meet_default, "registers 's' and 's2' overlap"},
        {live_output_dead, "output register 'tokens' does not hold its columns after the last layer"},
        {d_model_mismatch, "embed.token.weight: tensor 'embed.token.weight' has shape [3, 6], expected [3, 7]"},
        {no_unembed, "tensor 'unembed.weight' is missing"},
        {made_by_not_object, "__metadata__.made_by is not a JSON object"},
        {learned_not_json, "__metadata__.learned is not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_header_rejected(cases[i].mutate, cases[i].message);
}
END_TEST

START_TEST(test_rejects_bad_framing) {
    size_t len;
    unsigned char *buf = valid_bytes(&len);
    expect_rejected(buf, 7, "file of 7 bytes is too short for a safetensors header");
    expect_rejected(buf, len - 4, "past the end of the file");
    unsigned char *copy = malloc(len + 4);
    memcpy(copy, buf, len);
    memset(copy + len, 0, 4);
    expect_rejected(copy, len + 4, "file has 4 bytes after the last tensor");
    memset(copy, 0, 8);
    expect_rejected(copy, len, "header length is 0");
    copy[7] = 0x7f;
    expect_rejected(copy, len, "exceeds the limit of");
    memset(copy, 0, 8);
    copy[0] = 0xff;
    copy[1] = 0xff;
    expect_rejected(copy, 200, "header length 65535 exceeds the file size (200 bytes)");
    size_t n;
    unsigned char *junk = assemble("{not json", (const unsigned char *)"", 0, &n);
    expect_rejected(junk, n, "header is not valid JSON");
    free(junk);
    junk = assemble("[1,2]", (const unsigned char *)"", 0, &n);
    expect_rejected(junk, n, "header is not a JSON object");
    free(junk);
    free(copy);
    free(buf);
}
END_TEST

START_TEST(test_validate_catches_layer_errors) {
    TfModel *m = small_model();
    TfError err = {""};
    m->layers[1].d_hidden = 5;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "layer 1 'mlp1': fc1_weight: tensor 'mlp.fc1.weight' has shape [4, 6], "
                              "expected [5, 6]");
    m->layers[1].d_hidden = 4;
    m->layers[0].output = -1;
    m->layers[0].d_vhead = 2;
    m->layers[0].value = m->layers[1].fc1_weight; /* [4, 6]: heads x d_vhead = 4 */
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "layer 0 'attn0': without an output tensor, heads x d_vhead (4) must "
                              "equal d_model (6)");
    model_free(m);
}
END_TEST

/* A learned-model layout: a pre-norm attention layer with biases and an
 * output projection, a norm layer, a classifier head with a bias. */
static TfModel *classifier_model(void) {
    TfError err = {""};
    TfModel *m = model_new();
    m->d_model = 4;
    m->n_vocab = 3;
    m->vocab = malloc(3);
    memcpy(m->vocab, "#01", 3);
    m->period = 6;
    m->max_len = 6;
    m->generate = 1;
    int64_t vd[2] = {3, 4}, pd[2] = {6, 4}, dd[2] = {4, 4}, cd[2] = {2, 4}, d1[1] = {4},
            c1[1] = {2};
    m->tok_embed = model_add_tensor(m, TF_TENSOR_TOKEN_EMBED, 2, vd, &err);
    m->pos_embed = model_add_tensor(m, TF_TENSOR_POS_EMBED, 2, pd, &err);
    m->unembed = model_add_tensor(m, TF_TENSOR_UNEMBED, 2, cd, &err);
    m->unembed_bias = model_add_tensor(m, TF_TENSOR_UNEMBED_BIAS, 1, c1, &err);
    const char *names[] = {"q", "k", "v", "o", "qb", "kb", "vb", "ob", "ln1.w", "ln1.b", "ln2.w",
                           "ln2.b"};
    int ix[12];
    for (int i = 0; i < 12; i++) ix[i] = model_add_tensor(m, names[i], i < 4 ? 2 : 1, i < 4 ? dd : d1, &err);
    for (int t = 0; t < m->n_tensors; t++)
        for (size_t i = 0; i < m->tensors[t].nelem; i++)
            m->tensors[t].data[i] = (float)(t * 100 + (int)i) / 3.0f - 1.0f;
    TfLayer a = model_layer_init(TF_LAYER_ATTENTION);
    a.name = "attn";
    a.n_heads = 2;
    a.d_head = 2;
    a.d_vhead = 2;
    a.scale = 0.70710678f;
    a.causal = 0;
    a.query = ix[0], a.key = ix[1], a.value = ix[2], a.output = ix[3];
    a.query_bias = ix[4], a.key_bias = ix[5], a.value_bias = ix[6], a.output_bias = ix[7];
    a.norm_weight = ix[8], a.norm_bias = ix[9];
    a.norm_eps = 1e-6f;
    ck_assert_int_eq(model_add_layer(m, &a, &err), 0);
    TfLayer n = model_layer_init(TF_LAYER_NORM);
    n.name = "final_norm";
    n.norm_weight = ix[10], n.norm_bias = ix[11];
    ck_assert_int_eq(model_add_layer(m, &n, &err), 1);
    m->output_kind = TF_OUTPUT_CLASSIFY;
    m->n_classes = 2;
    m->class_names = malloc(2 * sizeof *m->class_names);
    m->class_names[0] = strdup("reject");
    m->class_names[1] = strdup("accept");
    m->classify_at_last = 1;
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    return m;
}

START_TEST(test_round_trip_learned_fields) {
    TfModel *m = classifier_model();
    unsigned char *buf;
    size_t len;
    TfError err = {""};
    ck_assert_msg(tfw_write_buffer(m, &buf, &len, &err) == 0, "%s", err.msg);
    TfModel *b = tfw_read_buffer(buf, len, &err);
    ck_assert_msg(b != NULL, "%s", err.msg);
    ck_assert_int_eq(b->output_kind, TF_OUTPUT_CLASSIFY);
    ck_assert_int_eq(b->n_classes, 2);
    ck_assert_str_eq(b->class_names[0], "reject");
    ck_assert_str_eq(b->class_names[1], "accept");
    ck_assert_int_eq(b->classify_at_last, 1);
    ck_assert_int_eq(b->unembed_bias, model_find_tensor(b, TF_TENSOR_UNEMBED_BIAS));
    ck_assert_int_ge(b->unembed_bias, 0);
    ck_assert_int_eq(b->n_layers, 2);
    const TfLayer *x = &m->layers[0], *y = &b->layers[0];
    const int fx[] = {x->query, x->key, x->value, x->output, x->query_bias, x->key_bias,
                      x->value_bias, x->output_bias, x->norm_weight, x->norm_bias};
    const int fy[] = {y->query, y->key, y->value, y->output, y->query_bias, y->key_bias,
                      y->value_bias, y->output_bias, y->norm_weight, y->norm_bias};
    for (int i = 0; i < 10; i++) {
        ck_assert_int_ge(fy[i], 0);
        ck_assert_str_eq(m->tensors[fx[i]].name, b->tensors[fy[i]].name);
        ck_assert(memcmp(m->tensors[fx[i]].data, b->tensors[fy[i]].data,
                         m->tensors[fx[i]].nelem * 4) == 0);
    }
    ck_assert(y->norm_eps == 1e-6f);
    ck_assert_int_eq(y->causal, 0);
    ck_assert_int_eq(b->layers[1].kind, TF_LAYER_NORM);
    ck_assert_str_eq(b->layers[1].name, "final_norm");
    ck_assert(b->layers[1].norm_eps == 1e-5f);
    ck_assert_str_eq(b->tensors[b->layers[1].norm_weight].name, "ln2.w");
    model_free(b);
    free(buf);

    /* A next-token model writes no classifier fields and reads back as one. */
    m->output_kind = TF_OUTPUT_NEXT_TOKEN;
    ck_assert_int_eq(model_validate(m, &err), -1); /* unembed is [2, 4], vocab is 3 */
    model_free(m);
}
END_TEST

/* Rewrites one metadata key of the classifier's file and expects `want`. */
static void expect_meta_rejected(const char *key, const char *value, const char *want) {
    TfModel *m = classifier_model();
    unsigned char *buf;
    size_t len;
    TfError err = {""};
    ck_assert_int_eq(tfw_write_buffer(m, &buf, &len, &err), 0);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    cJSON *root = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hlen);
    cJSON *meta = cJSON_GetObjectItem(root, "__metadata__");
    cJSON_ReplaceItemInObject(meta, key, cJSON_CreateString(value));
    char *json = cJSON_PrintUnformatted(root);
    size_t jl = strlen(json), pad = (8 - (8 + jl) % 8) % 8, data = len - 8 - (size_t)hlen;
    unsigned char *out = malloc(8 + jl + pad + data);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)(jl + pad) >> (8 * i));
    memcpy(out + 8, json, jl);
    memset(out + 8 + jl, ' ', pad);
    memcpy(out + 8 + jl + pad, buf + 8 + hlen, data);
    TfModel *b = tfw_read_buffer(out, 8 + jl + pad + data, &err);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(err.msg, want) != NULL, "got '%s', want '%s'", err.msg, want);
    free(out);
    cJSON_free(json);
    cJSON_Delete(root);
    free(buf);
    model_free(m);
}

START_TEST(test_rejects_bad_learned_fields) {
    expect_meta_rejected("output_kind", "regress", "output_kind 'regress' is not next_token");
    expect_meta_rejected("classify_at", "middle", "classify_at 'middle' is not first or last");
    expect_meta_rejected("classes", "[\"a\"]", "expected [1, 4]");
    expect_meta_rejected("classes", "[\"a\", 3]", "classes[1] is not a non-empty string");
    expect_meta_rejected("classes", "{}", "classes is not a JSON array");
    expect_meta_rejected("layers",
                         "[{\"kind\":\"norm\",\"name\":\"n\",\"norm_weight\":\"ln1.w\"}]",
                         "layers[0].norm_bias is missing");
    expect_meta_rejected("layers",
                         "[{\"kind\":\"norm\",\"name\":\"n\",\"norm_weight\":\"ln1.w\","
                         "\"norm_bias\":\"ln1.b\",\"norm_eps\":-1}]",
                         "layers[0].norm_eps is not a positive number");
    expect_meta_rejected("layers",
                         "[{\"kind\":\"norm\",\"name\":\"n\",\"norm_weight\":\"q\","
                         "\"norm_bias\":\"ln1.b\"}]",
                         "tensor 'q' has shape [4, 4], expected [4]");
}
END_TEST

/* ---- general-language fields: categorical registers, output mode, bos,
 * stop token ---------------------------------------------------------------- */

/* small_model with its token register replaced by a categorical one "t"
 * over 3 labels (columns 0..2) and its scalar by a one-value categorical
 * "c" (column 5); read at every position, with 'b' as the BOS token. */
static TfModel *general_model(void) {
    TfModel *m = small_model();
    TfError err = {""};
    free(m->regs[2].name);
    free(m->regs[0].name);
    m->regs[0] = m->regs[1];
    m->n_regs = 1;
    const char *labels[] = {"0", "'a'", "T"};
    ck_assert_int_eq(model_add_categorical(m, "t", 0, 3, labels, &err), 1);
    const char *one[] = {"16"};
    ck_assert_int_eq(model_add_categorical(m, "c", 5, 1, one, &err), 2);
    m->output_reg = 1;
    m->every_position = 1;
    m->bos = 1;        /* 'b' */
    m->stop_token = -1;
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    return m;
}

static TfModel *round_trip(const TfModel *m) {
    unsigned char *buf;
    size_t len;
    TfError err = {""};
    ck_assert_msg(tfw_write_buffer(m, &buf, &len, &err) == 0, "%s", err.msg);
    TfModel *b = tfw_read_buffer(buf, len, &err);
    ck_assert_msg(b != NULL, "%s", err.msg);
    free(buf);
    return b;
}

START_TEST(test_round_trip_general_fields) {
    TfModel *m = general_model();
    TfModel *b = round_trip(m);
    ck_assert_int_eq(b->n_regs, 3);
    ck_assert_int_eq(b->regs[1].kind, TF_REG_CATEGORICAL);
    ck_assert_str_eq(b->regs[1].name, "t");
    ck_assert_int_eq(b->regs[1].size, 3);
    ck_assert_str_eq(b->regs[1].values[0], "0");
    ck_assert_str_eq(b->regs[1].values[1], "'a'");
    ck_assert_str_eq(b->regs[1].values[2], "T");
    ck_assert_int_eq(b->regs[2].offset, 5);
    ck_assert_str_eq(b->regs[2].values[0], "16");
    ck_assert_ptr_null(b->regs[0].values); /* the position register */
    ck_assert_int_eq(b->output_reg, 1);
    ck_assert_int_eq(b->every_position, 1);
    ck_assert_int_eq(b->bos, 1);
    ck_assert_int_eq(b->stop_token, -1);
    model_free(b);

    // Generation with a stop token, no bos.
    m->every_position = 0;
    m->bos = -1;
    m->stop_token = 2; /* '\n' */
    b = round_trip(m);
    ck_assert_int_eq(b->every_position, 0);
    ck_assert_int_eq(b->bos, -1);
    ck_assert_int_eq(b->stop_token, 2);
    model_free(b);
    model_free(m);

    // Old files (no output_mode, bos, stop_token) read with the defaults.
    m = small_model();
    b = round_trip(m);
    ck_assert_int_eq(b->every_position, 0);
    ck_assert_int_eq(b->bos, -1);
    ck_assert_int_eq(b->stop_token, -1);
    ck_assert_ptr_null(b->regs[0].values);
    model_free(b);
    model_free(m);
}
END_TEST

START_TEST(test_validate_general_fields) {
    TfError err = {""};
    TfModel *m = general_model();
    m->stop_token = 0;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "a model read at every position generates nothing: it has no stop token");
    m->stop_token = -1;
    m->bos = 3;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "the beginning-of-sequence token 3 is outside the vocabulary");
    m->bos = -1;
    m->every_position = 2;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "every_position is 2, not 0 or 1");
    m->every_position = 0;
    m->stop_token = -2;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "the stop token -2 is outside the vocabulary");
    m->stop_token = -1;
    free(m->regs[1].values[2]);
    m->regs[1].values[2] = strdup("0");
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "register 't': value label '0' appears twice");
    model_free(m);

    m = general_model();
    const char *bad[] = {"x", ""};
    ck_assert_int_eq(model_add_categorical(m, "u", 4, 2, bad, &err), -1);
    ck_assert_str_eq(err.msg, "categorical register 'u': value 1 has no label");
    ck_assert_int_eq(model_add_categorical(m, "u", 4, 0, bad, &err), -1);
    ck_assert_int_eq(m->n_regs, 3);
    // A scalar with labels, and a categorical register without.
    m->regs[2].kind = TF_REG_SCALAR;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "register 'c': only categorical registers have value labels");
    model_free(m);
    m = small_model();
    m->regs[2].kind = TF_REG_CATEGORICAL;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "register 's': a categorical register needs a label for each column");
    model_free(m);
}
END_TEST

/* `make`'s file with one metadata key set to `value` (NULL: deleted) is
 * rejected with a message containing `want`. */
static void expect_model_rejected(TfModel *(*make)(void), const char *key, const char *value,
                                  const char *want) {
    TfModel *m = make();
    unsigned char *buf;
    size_t len;
    TfError err = {""};
    ck_assert_int_eq(tfw_write_buffer(m, &buf, &len, &err), 0);
    model_free(m);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    cJSON *root = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hlen);
    cJSON *md = cJSON_GetObjectItem(root, "__metadata__");
    cJSON_DeleteItemFromObject(md, key);
    if (value) cJSON_AddStringToObject(md, key, value);
    char *json = cJSON_PrintUnformatted(root);
    size_t out_len;
    unsigned char *out = assemble(json, buf + 8 + hlen, len - 8 - (size_t)hlen, &out_len);
    expect_rejected(out, out_len, want);
    free(out);
    cJSON_free(json);
    cJSON_Delete(root);
    free(buf);
}

/* The general model's file with one metadata key set to `value` (added
 * when absent; NULL: deleted) is rejected with a message containing `want`. */
static void expect_general_rejected(const char *key, const char *value, const char *want) {
    expect_model_rejected(general_model, key, value, want);
}

START_TEST(test_rejects_bad_general_fields) {
    expect_general_rejected("output_mode", "sometimes",
                            "__metadata__.output_mode 'sometimes' is not next_token or every_position");
    expect_general_rejected("bos", "^", "__metadata__.bos '^' is not in the vocabulary");
    expect_general_rejected("bos", "ab", "__metadata__.bos 'ab' is not in the vocabulary");
    expect_general_rejected("bos", "", "__metadata__.bos '' is not in the vocabulary");
    expect_general_rejected("stop_token", "z", "__metadata__.stop_token 'z' is not in the vocabulary");
    // Every-position with a stop token: the model is inconsistent.
    expect_general_rejected("stop_token", "a", "it has no stop token");
    const char *pos = "{\"name\":\"pos\",\"kind\":\"position\",\"offset\":3,\"size\":2}";
    char regs[512];
    snprintf(regs, sizeof regs,
             "[%s,{\"name\":\"t\",\"kind\":\"categorical\",\"offset\":0,\"size\":3}]", pos);
    expect_general_rejected("registers", regs,
                            "__metadata__.registers[1] 't': a categorical register needs a values array");
    snprintf(regs, sizeof regs,
             "[%s,{\"name\":\"t\",\"kind\":\"categorical\",\"offset\":0,\"size\":3,"
             "\"values\":[\"0\",\"1\"]}]",
             pos);
    expect_general_rejected("registers", regs, "__metadata__.registers[1] 't': 2 values for 3 columns");
    snprintf(regs, sizeof regs,
             "[%s,{\"name\":\"t\",\"kind\":\"categorical\",\"offset\":0,\"size\":3,"
             "\"values\":[\"0\",1,\"2\"]}]",
             pos);
    expect_general_rejected("registers", regs,
                            "__metadata__.registers[1] 't': values[1] is not a non-empty string");
    snprintf(regs, sizeof regs,
             "[%s,{\"name\":\"t\",\"kind\":\"categorical\",\"offset\":0,\"size\":3,"
             "\"values\":[\"0\",\"1\",\"0\"]}]",
             pos);
    expect_general_rejected("registers", regs, "register 't': value label '0' appears twice");
    snprintf(regs, sizeof regs,
             "[%s,{\"name\":\"t\",\"kind\":\"scalar\",\"offset\":0,\"size\":1,"
             "\"values\":[\"0\"]}]",
             pos);
    expect_general_rejected("registers", regs,
                            "__metadata__.registers[1] 't': a scalar register has no values");
    snprintf(regs, sizeof regs, "[%s,{\"name\":\"t\",\"kind\":\"categorical\",\"offset\":0,"
                                "\"size\":3,\"values\":\"0 1 2\"}]",
             pos);
    expect_general_rejected("registers", regs, "needs a values array");
}
END_TEST

/* ---- output-only tokens and UTF-8 token names ---------------------------- */

/* general_model with the words "a", "b" and the output-only "not spam". */
static TfModel *output_only_model(void) {
    TfModel *m = general_model();
    TfError err = {""};
    const char *names[] = {"a", "b", "not spam"};
    ck_assert_msg(model_set_vocab(m, names, 3, 1, &err) == 0, "%s", err.msg);
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    return m;
}

START_TEST(test_output_only_tokens) {
    TfModel *m = output_only_model();
    TfModel *b = round_trip(m);
    ck_assert_int_eq(b->n_vocab, 3);
    ck_assert_int_eq(b->n_output_only, 1);
    ck_assert_str_eq(b->token_names[2], "not spam");
    model_free(b);
    model_free(m);
    // Files without the key have none.
    m = general_model();
    b = round_trip(m);
    ck_assert_int_eq(b->n_output_only, 0);
    model_free(b);
    model_free(m);

    TfError err = {""};
    m = general_model();
    const char *spaced[] = {"a", "not spam", "c"};
    ck_assert_int_eq(model_set_vocab(m, spaced, 3, 1, &err), -1); /* typed: no space */
    ck_assert_str_eq(err.msg, "vocabulary entry 1 'not spam' is not a token of a vocabulary of "
                              "words (1 to 32 bytes of UTF-8, no space or control character)");
    const char *tab[] = {"a", "b", "no\tspam"};
    ck_assert_int_eq(model_set_vocab(m, tab, 3, 1, &err), -1);
    ck_assert_str_eq(err.msg, "vocabulary entry 2 'no\tspam' is not a token of a vocabulary of "
                              "words (1 to 32 bytes of UTF-8, no control character)");
    const char *all[] = {"a", "b", "c"};
    ck_assert_int_eq(model_set_vocab(m, all, 3, 3, &err), -1);
    ck_assert_str_eq(err.msg, "3 output-only tokens of 3: a prompt must be able to hold one");
    // UTF-8 names, and bytes that are not UTF-8.
    const char *emoji[] = {"^", "\xf0\x9f\x98\x8a", "\xc3\xa9t\xc3\xa9"};
    ck_assert_msg(model_set_vocab(m, emoji, 3, 0, &err) == 0, "%s", err.msg);
    const char *bad[][3] = {{"^", "\xf0\x9f\x98", "x"},  /* truncated */
                            {"^", "\x98x", "x"},           /* a stray continuation byte */
                            {"^", "\xc0\xaf", "x"},       /* overlong */
                            {"^", "\xed\xa0\x80", "x"},  /* a surrogate */
                            {"^", "\xf4\x90\x80\x80", "x"}}; /* over U+10FFFF */
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(model_set_vocab(m, bad[i], 3, 0, &err), -1);
        ck_assert_msg(strstr(err.msg, "vocabulary entry 1") != NULL, "%s", err.msg);
    }
    // The BOS is no output-only token; a model that generates has none.
    ck_assert_msg(model_set_vocab(m, (const char *[]){"a", "b", "c"}, 3, 2, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "the beginning-of-sequence token 1 is an output-only token");
    ck_assert_msg(model_set_vocab(m, (const char *[]){"a", "b", "c"}, 3, 1, &err) == 0, "%s",
                  err.msg);
    m->every_position = 0;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "1 output-only tokens in a model not read at every position (a "
                              "generated token is read back as input)");
    model_free(m);

    expect_model_rejected(output_only_model, "output_only_tokens", "3",
                          "__metadata__.output_only_tokens is '3', not an integer between 0 and 2");
    expect_model_rejected(output_only_model, "output_only_tokens", "-1", "not an integer");
    expect_model_rejected(output_only_model, "output_only_tokens", "0",
                          "vocabulary entry 2 'not spam' is not a token of a vocabulary of words");
    expect_model_rejected(output_only_model, "output_only_tokens", "2",
                          "the beginning-of-sequence token 1 is an output-only token");
    expect_model_rejected(output_only_model, "output_mode", NULL,
                          "1 output-only tokens in a model not read at every position");
    // (the header's JSON is checked for UTF-8 before the vocabulary is read)
    expect_model_rejected(output_only_model, "vocab", "[\"a\",\"b\",\"\xff\"]",
                          "header is not valid JSON: invalid UTF-8");
}
END_TEST

/* ---- how the file was made, and tensor names ------------------------------ */

START_TEST(test_round_trip_made_by_and_learned) {
    TfModel *m = small_model();
    TfError err = {""};
    TfLearnedSettings set;
    ck_assert_int_eq(tfw_learned_settings(m, &set, &err), -1);
    ck_assert_msg(strstr(err.msg, "no learned-model settings") != NULL, "%s", err.msg);
    m->made_by = strdup("{\"tool\":\"tfc\",\"version\":\"0.1.0\",\"options\":{\"O\":1}}");
    m->learned = strdup("{\"d_model\":6,\"dropout\":0.25,\"positions\":\"none\",\"seed\":42}");
    unsigned char *buf;
    size_t len;
    ck_assert_int_eq(tfw_write_buffer(m, &buf, &len, &err), 0);
    TfModel *back = tfw_read_buffer(buf, len, &err);
    ck_assert_msg(back != NULL, "%s", err.msg);
    ck_assert_str_eq(back->made_by, m->made_by);
    ck_assert_str_eq(back->learned, m->learned);
    ck_assert_int_eq(tfw_learned_settings(back, &set, &err), 0);
    ck_assert(set.dropout == 0.25f);
    ck_assert_int_eq(set.learned_positions, 0);
    ck_assert_int_eq(set.seed, 42);
    free(back->learned);
    back->learned = strdup("{\"dropout\":1.5,\"positions\":\"learned\",\"seed\":1}");
    ck_assert_int_eq(tfw_learned_settings(back, &set, &err), -1);
    ck_assert_str_eq(err.msg, "__metadata__.learned.dropout is missing or out of range");
    model_free(back);
    free(buf);
    model_free(m);
}
END_TEST

START_TEST(test_write_tensors_drops_the_rest) {
    TfModel *m = small_model();
    TfError err = {""};
    int64_t one = 1;
    ck_assert_int_ge(model_add_tensor(m, "optim.step", 1, &one, &err), 0);
    char path[] = "/tmp/tfw_first_XXXXXX";
    close(mkstemp(path));
    ck_assert_msg(tfw_write_tensors(m, m->n_tensors - 1, path, &err) == 0, "%s", err.msg);
    TfModel *back = tfw_read(path, &err);
    ck_assert_msg(back != NULL, "%s", err.msg);
    ck_assert_int_eq(back->n_tensors, m->n_tensors - 1);
    ck_assert_int_lt(model_find_tensor(back, "optim.step"), 0);
    remove(path);
    model_free(back);
    model_free(m);
}
END_TEST

START_TEST(test_tensor_names_carry_the_layer) {
    // small_model: layer 0 uses shared.square four times (one layer: not
    // shared), layer 1 its MLP tensors; a third layer sharing fc1 with
    // layer 1 makes that tensor shared. Unused and fixed tensors keep their names.
    TfModel *m = small_model();
    TfError err = {""};
    TfLayer f = m->layers[1];
    f.name = "mlp2";
    f.op = NULL;
    f.fc1_bias = -1;
    f.fc2_weight = model_find_tensor(m, "mlp.fc2.weight");
    ck_assert_int_eq(model_add_layer(m, &f, &err), 2);
    int64_t six = 6;
    int b = model_add_tensor(m, "x", 1, &six, &err);
    m->layers[2].fc2_bias = b;
    ck_assert_int_eq(model_name_tensors(m, &err), 0);
    const char *want[] = {"embed.token.weight", "embed.position.weight", "unembed.weight",
                          "layers.0.attn.query.weight", "shared.0.mlp.fc1.weight",
                          "layers.1.mlp.fc1.bias", "shared.1.mlp.fc2.weight", "mlp.fc2.bias",
                          "layers.2.mlp.fc2.bias"};
    ck_assert_int_eq(m->n_tensors, 9);
    for (int t = 0; t < m->n_tensors; t++) ck_assert_str_eq(m->tensors[t].name, want[t]);
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    model_free(m);
}
END_TEST

/* ---- hardening (issue 13): what fuzzing and the two readers' differences found */

/* The valid file with its header text edited: `at` is found in the header
 * and `insert` put before it (the header length and padding fixed). */
static unsigned char *edit_header(const char *at, const char *insert, size_t *len) {
    unsigned char *data;
    size_t dlen, vlen;
    unsigned char *buf = valid_bytes(&vlen);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    data = buf + 8 + hlen;
    dlen = vlen - 8 - (size_t)hlen;
    char *json = malloc((size_t)hlen + strlen(insert) + 1);
    memcpy(json, buf + 8, (size_t)hlen);
    json[hlen] = '\0';
    char *p = strstr(json, at);
    ck_assert_ptr_nonnull(p);
    char *edited = malloc((size_t)hlen + strlen(insert) + 1);
    size_t pre = (size_t)(p - json);
    memcpy(edited, json, pre);
    strcpy(edited + pre, insert);
    strcat(edited, p);
    unsigned char *out = assemble(edited, data, dlen, len);
    free(edited);
    free(json);
    free(buf);
    return out;
}

static void expect_edit_rejected(const char *at, const char *insert, const char *want) {
    size_t len;
    unsigned char *buf = edit_header(at, insert, &len);
    expect_rejected(buf, len, want);
    free(buf);
}

START_TEST(test_rejects_what_the_readers_would_read_differently) {
    /* cJSON keeps the first of two keys, Python's json the last. */
    expect_edit_rejected("\"format\":", "\"format\":\"tfw\",",
                         "header: the key 'format' appears twice in one object");
    expect_edit_rejected("\"__metadata__\"", "\"embed.token.weight\":{},",
                         "header: the key 'embed.token.weight' appears twice");
    /* invalid UTF-8, raw control characters, NUL escapes, lone surrogates */
    expect_edit_rejected("\"format\":", "\"note\":\"caf\xe9\",", "header is not valid JSON: invalid UTF-8");
    expect_edit_rejected("\"format\":", "\"note\":\"\xed\xa0\x80\",", "invalid UTF-8");
    expect_edit_rejected("\"format\":", "\"note\":\"\xc0\xaf\",", "invalid UTF-8");
    expect_edit_rejected("\"format\":", "\"note\":\"a\tb\",", "a control character in a string");
    expect_edit_rejected("\"format\":", "\"note\":\"a\\u0000b\",", "the escape \\u0000");
    expect_edit_rejected("\"format\":", "\"note\":\"\\ud800\",", "an unpaired surrogate escape");
    /* what cJSON alone accepts and Python's json does not */
    expect_edit_rejected("\"format\":", "\"note\":01,", "a missing ',' or '}' in an object");
    expect_edit_rejected("\"format\":", "\"note\":1.,", "a malformed number");
    expect_edit_rejected("\"format\":", "\"note\":\x01\"x\",", "not JSON");
    expect_edit_rejected("\"format\":", "\"note\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],",
                         "nesting deeper than 32");
    /* a metadata value that is not a string (safetensors: strings only) */
    expect_edit_rejected("\"format\":", "\"note\":1,", "__metadata__.note is not a string");
    /* text after the header's JSON value (cJSON alone ignores it) */
    size_t len;
    unsigned char *buf, *data;
    size_t dlen;
    cJSON *root = valid_header(&data, &dlen);
    char *json = cJSON_PrintUnformatted(root);
    char *tail = malloc(strlen(json) + 3);
    strcpy(tail, json);
    strcat(tail, "x ");
    buf = assemble(tail, data, dlen, &len);
    expect_rejected(buf, len, "header is not valid JSON: text after the JSON value");
    free(buf);
    free(tail);
    cJSON_free(json);
    cJSON_Delete(root);
    free(data);
}
END_TEST

MUTATION(vocab_trailing, set_meta(root, "vocab", "[\"a\",\"b\",\"c\"] x"))
MUTATION(generate_plus, set_meta(root, "generate", "+4"))
MUTATION(generate_space, set_meta(root, "generate", " 4"))
MUTATION(layers_dup_key, set_meta(root, "layers", "[{\"kind\":\"norm\",\"kind\":\"mlp\"}]"))

START_TEST(test_rejects_bad_metadata_json) {
    expect_header_rejected(vocab_trailing, "__metadata__.vocab is not valid JSON: text after");
    expect_header_rejected(generate_plus, "__metadata__.generate is '+4', not an integer");
    expect_header_rejected(generate_space, "__metadata__.generate is ' 4', not an integer");
    expect_header_rejected(layers_dup_key,
                           "__metadata__.layers: the key 'kind' appears twice in one object");
}
END_TEST

/* Fuzzing found NaN weights reaching exp_vec (UBSan: NaN converted to int). */
START_TEST(test_rejects_non_finite_weights) {
    size_t len;
    unsigned char *buf = valid_bytes(&len);
    float bad[2] = {NAN, INFINITY};
    const char *want[2] = {"tensor 'embed.token.weight': element 0 is NaN, not a finite number",
                           "tensor 'embed.token.weight': element 0 is infinite"};
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    /* the first tensor in the data section is embed.token.weight */
    for (int k = 0; k < 2; k++) {
        unsigned char *copy = malloc(len);
        memcpy(copy, buf, len);
        memcpy(copy + 8 + hlen, &bad[k], 4);
        expect_rejected(copy, len, want[k]);
        free(copy);
    }
    free(buf);
    /* and the writer refuses to write them */
    TfModel *m = small_model();
    TfError err = {""};
    unsigned char *out;
    m->tensors[1].data[3] = NAN;
    ck_assert_int_eq(tfw_write_buffer(m, &out, &len, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "element 3 is NaN, not a finite number"));
    model_free(m);
}
END_TEST

/* A 50 MB identifier gave a header over the reader's limit: the writer says
 * so instead of writing a file the reader refuses. */
START_TEST(test_writer_refuses_oversized_header) {
    TfModel *m = small_model();
    size_t n = TFW_MAX_HEADER + 16;
    char *name = malloc(n + 1);
    memset(name, 'x', n);
    name[n] = '\0';
    free(m->layers[0].name);
    m->layers[0].name = name;
    TfError err = {""};
    unsigned char *out;
    size_t len;
    ck_assert_int_eq(tfw_write_buffer(m, &out, &len, &err), -1);
    ck_assert_msg(strstr(err.msg, "over the readers' limit of 67108864 bytes") != NULL, "%s",
                  err.msg);
    model_free(m);
}
END_TEST

/* tfrun /dev/zero grew to 18.8 GB: devices are refused at once, files read
 * with a cap. */
START_TEST(test_read_refuses_devices_and_caps) {
    TfError err = {""};
    ck_assert_ptr_null(tfw_read("/dev/zero", &err));
    ck_assert_str_eq(err.msg, "/dev/zero: not a regular file (a character device)");
    ck_assert_ptr_null(tfw_read("/tmp", &err));
    ck_assert_str_eq(err.msg, "/tmp: not a regular file (a directory)");
    char path[] = "/tmp/tfw_cap_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_eq(write(fd, "0123456789", 10), 10);
    close(fd);
    size_t len;
    char *buf = tf_file_read_max(path, 9, &len, &err);
    ck_assert_ptr_null(buf);
    ck_assert_ptr_nonnull(strstr(err.msg, ": 10 bytes, over the limit of 9 bytes"));
    buf = tf_file_read_max(path, 10, &len, &err);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(len, 10);
    free(buf);
    remove(path);
}
END_TEST

/* A header of 200,000 tensors took minutes (each tensor and each layer field
 * searched the tensors one by one): now sorted, and read in well under a
 * second. Found by reading the code after fuzzing; no timing asserted. */
START_TEST(test_many_tensors_read) {
    unsigned char *data;
    size_t dlen;
    cJSON *root = valid_header(&data, &dlen);
    int n = 200000;
    unsigned char *more = calloc(dlen + 4 * (size_t)n, 1);
    memcpy(more, data, dlen);
    for (int i = 0; i < n; i++) {
        char name[32], entry[160];
        snprintf(name, sizeof name, "extra.%d", i);
        snprintf(entry, sizeof entry, "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%zu,%zu]}",
                 dlen + 4 * (size_t)i, dlen + 4 * (size_t)i + 4);
        cJSON_AddItemToObject(root, name, cJSON_Parse(entry));
    }
    char *json = cJSON_PrintUnformatted(root);
    size_t len;
    unsigned char *buf = assemble(json, more, dlen + 4 * (size_t)n, &len);
    TfError err = {""};
    TfModel *m = tfw_read_buffer(buf, len, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    ck_assert_int_eq(m->n_tensors, 8 + n);
    model_free(m);
    free(buf);
    cJSON_free(json);
    cJSON_Delete(root);
    free(more);
    free(data);
}
END_TEST

/* ---- run-time checks and numbers as outputs ------------------------------ */

/* general_model with a check of `t` after layer 1 and one of `c` after layer 0. */
static TfModel *checked_model(void) {
    TfModel *m = general_model();
    TfError err = {""};
    ck_assert_int_eq(model_add_check(m, 1, 1, 7, "Aggregate -> t", 0.0125, &err), 0);
    ck_assert_int_eq(model_add_check(m, 2, 0, 0, "Map -> c", -1, &err), 1);
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    return m;
}

/* small_model read at every position, printing its scalar `s`, without an
 * unembedding. */
static TfModel *numeric_model(void) {
    TfModel *m = small_model();
    TfError err = {""};
    m->every_position = 1;
    m->output_reg = 2; /* s */
    m->output_error_bound = 3.5e-7;
    free(m->tensors[m->unembed].name);
    m->tensors[m->unembed].name = strdup("spare.weight"); /* no longer the unembedding */
    m->unembed = -1;
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(model_numeric_output(m), 1);
    return m;
}

/* Numbers as tfrun prints them: the shortest text that reads back as the
 * float32, without an exponent from 1 to 1e16 (issue 27: 10, not 1e+01);
 * tests/torch.sh holds the Python twin to the same table. */
START_TEST(test_value_text) {
    static const struct {
        float v;
        const char *text;
    } cases[] = {{10.0f, "10"}, {-10.0f, "-10"}, {100.0f, "100"}, {2.5f, "2.5"},
                 {1234.5f, "1234.5"}, {12345678.0f, "12345678"}, {1.5e10f, "15000000000"},
                 {6241.0f, "6241"}, {0.1f, "0.1"}, {1e-5f, "1e-05"}, {0.0f, "0"},
                 {1.0f / 3, "0.33333334"}, {3.4e38f, "3.4e+38"}, {1e17f, "1e+17"},
                 {INFINITY, "inf"}, {NAN, "nan"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[TF_VALUE_TEXT_MAX];
        int n = model_value_text(cases[i].v, buf);
        ck_assert_str_eq(buf, cases[i].text);
        ck_assert_int_eq(n, (int)strlen(cases[i].text));
        if (!isnan(cases[i].v)) ck_assert(strtof(buf, NULL) == cases[i].v);
    }
}
END_TEST

START_TEST(test_round_trip_checks_and_numbers) {
    TfModel *m = checked_model();
    TfModel *b = round_trip(m);
    ck_assert_int_eq(b->n_checks, 2);
    ck_assert_int_eq(b->checks[0].reg, 1);
    ck_assert_int_eq(b->checks[0].layer, 1);
    ck_assert_int_eq(b->checks[0].line, 7);
    ck_assert_str_eq(b->checks[0].op, "Aggregate -> t");
    ck_assert_int_eq(b->checks[1].reg, 2);
    ck_assert_int_eq(b->checks[1].layer, 0);
    ck_assert_int_eq(b->checks[1].line, 0);
    ck_assert_str_eq(b->checks[1].op, "Map -> c");
    ck_assert_double_eq(b->checks[0].bound, 0.0125); /* written, read back exactly */
    ck_assert_double_eq(b->checks[1].bound, -1);     /* none given: none written */
    ck_assert_int_eq(model_numeric_output(b), 0);
    model_free(b);
    model_free(m);

    m = numeric_model();
    b = round_trip(m);
    ck_assert_int_eq(b->unembed, -1);
    ck_assert_int_eq(b->output_reg, 2);
    ck_assert_int_eq(model_numeric_output(b), 1);
    ck_assert(b->output_error_bound == 3.5e-7); /* the shortest text reads back exactly */
    ck_assert_int_eq(b->n_checks, 0);
    model_free(b);
    model_free(m);

    // Files without checks or a bound read as before.
    m = small_model();
    b = round_trip(m);
    ck_assert_int_eq(b->n_checks, 0);
    ck_assert_ptr_null(b->checks);
    ck_assert(b->output_error_bound == 0);
    model_free(b);
    model_free(m);
}
END_TEST

START_TEST(test_validate_checks_and_numbers) {
    TfError err = {""};
    TfModel *m = checked_model();
    m->checks[1].reg = 0; /* the position register */
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "check 1: register 0 is not a categorical register");
    m->checks[1].reg = 2;
    m->checks[0].layer = 2;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "check 0: layer 2 does not exist (the model has 2)");
    m->checks[0].layer = 1;
    m->checks[0].line = -1;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "check 0: needs a source line (0 or more) and the op's text");
    ck_assert_int_eq(model_add_check(m, 1, 0, 1, "", -1, &err), -1);
    ck_assert_str_eq(err.msg, "a run-time check needs the text of its op");
    ck_assert_int_eq(model_add_check(m, 1, 0, 1, "x", 0.5, &err), -1);
    ck_assert_str_eq(err.msg, "a run-time check's bound 0.5 is not a number in [0, 0.5)");
    model_free(m);

    m = numeric_model();
    m->output_error_bound = -1;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "the output error bound -1 is not a non-negative number");
    m->output_error_bound = 0;
    m->every_position = 0; /* a scalar output, but generating: an unembedding decodes it */
    m->unembed = -1;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "unembed.weight: no such tensor");
    model_free(m);
    // Only a model that prints a number may leave out unembed.weight.
    m = general_model();
    m->unembed = -1;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "unembed.weight: no such tensor");
    model_free(m);
}
END_TEST


/* Registers that share columns in states they do not both hold (a dead
 * register's columns reused: compiler/schedule.c): valid, written as
 * "live" [from, to] on those two only, read back the same; decoded by
 * state (model_find_register_at). Ranges that meet, a check where its
 * register is gone, an output gone before the end: refused. */
START_TEST(test_live_ranges) {
    TfError err = {""};
    TfModel *m = general_model(); /* t 0-2 (output), pos 3-4, c 5; two layers */
    int c = model_find_register(m, "c");
    int late = model_add_register(m, "late", TF_REG_SCALAR, 5, 1, &err);
    ck_assert_int_ge(late, 0);
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "registers 'c' and 'late' overlap");
    m->regs[c].live_to = 1;
    m->regs[late].live_from = 2;
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    ck_assert(model_reg_reused(m, c) && model_reg_reused(m, late));
    ck_assert(!model_reg_reused(m, model_find_register(m, "t")));
    ck_assert_int_eq(model_find_register_at(m, "c", 1), c);
    ck_assert_int_eq(model_find_register_at(m, "c", 2), -1);
    ck_assert_int_eq(model_find_register_at(m, "late", 1), -1);
    ck_assert_int_eq(model_find_register_at(m, "late", 2), late);
    unsigned char *buf;
    size_t len;
    ck_assert_int_eq(tfw_write_buffer(m, &buf, &len, &err), 0);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    char *header = strndup((const char *)buf + 8, (size_t)hlen);
    int n_live = 0;
    for (const char *p = header; (p = strstr(p, "live\\\":")) != NULL; p++) n_live++;
    ck_assert_int_eq(n_live, 2);
    ck_assert_ptr_nonnull(strstr(header, "\\\"live\\\":[0,1]"));
    ck_assert_ptr_nonnull(strstr(header, "\\\"live\\\":[2,2]"));
    free(header), free(buf);
    TfModel *b = round_trip(m);
    int bc = model_find_register(b, "c"), bl = model_find_register(b, "late");
    ck_assert_int_eq(b->regs[bc].live_from, 0);
    ck_assert_int_eq(b->regs[bc].live_to, 1);
    ck_assert_int_eq(b->regs[bl].live_from, 2);
    ck_assert_int_eq(b->regs[bl].live_to, 2);
    model_free(b);
    // A check of c after layer 1 (state 2): c is gone there.
    ck_assert_int_eq(model_add_check(m, c, 1, 3, "Map -> c", -1, &err), 0);
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "check 0: register 'c' does not hold its columns after layer 1");
    m->checks[0].layer = 0;
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    // The output gone before the last state.
    m->regs[m->output_reg].live_to = 1;
    ck_assert_int_eq(model_validate(m, &err), -1);
    ck_assert_str_eq(err.msg, "output register 't' does not hold its columns after the last layer");
    model_free(m);
}
END_TEST

START_TEST(test_rejects_bad_checks_and_numbers) {
    expect_model_rejected(checked_model, "checks", "{}", "__metadata__.checks is not a JSON array");
    expect_model_rejected(checked_model, "checks", "[1,", "__metadata__.checks is not valid JSON");
    expect_model_rejected(checked_model, "checks", "[{\"register\":\"t\",\"layer\":0,\"line\":1}]",
                          "__metadata__.checks[0] needs a register, a layer, a line and an op");
    expect_model_rejected(checked_model, "checks",
                          "[{\"register\":\"t\",\"layer\":0,\"line\":1,\"op\":\"\"}]",
                          "__metadata__.checks[0] needs a register, a layer, a line and an op");
    expect_model_rejected(checked_model, "checks",
                          "[{\"register\":\"t\",\"layer\":0,\"line\":-1,\"op\":\"x\"}]",
                          "__metadata__.checks[0] needs a register, a layer, a line and an op");
    expect_model_rejected(checked_model, "checks",
                          "[{\"register\":\"t\",\"layer\":0.5,\"line\":1,\"op\":\"x\"}]",
                          "__metadata__.checks[0] needs a register, a layer, a line and an op");
    expect_model_rejected(checked_model, "checks",
                          "[{\"register\":\"t\",\"layer\":0,\"line\":1,\"op\":\"x\"},"
                          "{\"register\":\"u\",\"layer\":0,\"line\":1,\"op\":\"x\"}]",
                          "__metadata__.checks[1]: register 'u' is not declared");
    expect_model_rejected(checked_model, "checks",
                          "[{\"register\":\"pos\",\"layer\":0,\"line\":1,\"op\":\"x\"}]",
                          "__metadata__.checks[0]: register 'pos' is not categorical");
    expect_model_rejected(checked_model, "checks",
                          "[{\"register\":\"t\",\"layer\":2,\"line\":1,\"op\":\"x\"}]",
                          "__metadata__.checks[0]: layer 2 does not exist (2 layers)");
    // bound: optional, a number in [0, 0.5) (0.5 could not tell one value from two).
    static const char *bad_bounds[] = {"-0.01", "0.5", "7", "\"0.1\"", "null", "[0.1]"};
    for (size_t i = 0; i < sizeof bad_bounds / sizeof *bad_bounds; i++) {
        char checks[160];
        snprintf(checks, sizeof checks,
                 "[{\"register\":\"t\",\"layer\":0,\"line\":1,\"op\":\"x\",\"bound\":%s}]",
                 bad_bounds[i]);
        expect_model_rejected(checked_model, "checks", checks,
                              "__metadata__.checks[0]: bound is not a number in [0, 0.5)");
    }
    expect_model_rejected(numeric_model, "output_error_bound", "-1e-7",
                          "__metadata__.output_error_bound '-1e-7' is not a number >= 0");
    expect_model_rejected(numeric_model, "output_error_bound", "tiny",
                          "__metadata__.output_error_bound 'tiny' is not a number >= 0");
    expect_model_rejected(numeric_model, "output_error_bound", "inf",
                          "__metadata__.output_error_bound 'inf' is not a number >= 0");
    expect_model_rejected(numeric_model, "output_error_bound", "1e999",
                          "__metadata__.output_error_bound '1e999' is not a number >= 0");
    // Plain decimal text only, as tools/tfw_torch.py reads it.
    expect_model_rejected(numeric_model, "output_error_bound", " 1e-7",
                          "__metadata__.output_error_bound ' 1e-7' is not a number >= 0");
    expect_model_rejected(numeric_model, "output_error_bound", "0x1p-20",
                          "__metadata__.output_error_bound '0x1p-20' is not a number >= 0");
    expect_model_rejected(general_model, "output_error_bound", "1e-7",
                          "__metadata__.output_error_bound is only for a model whose output is a number");
    // Without every_position, the scalar output prints no number.
    expect_model_rejected(numeric_model, "output_mode", "next_token",
                          "__metadata__.output_error_bound is only for a model whose output is a number");
}
END_TEST

/* ---- parts: the ops a scheduled layer holds ------------------------------- */

/* small_model with its layers merged as compiler/schedule.c merges them:
 * the attention layer's 3 heads hold two ops (head 0: n, heads 1-2: hist),
 * the MLP's 4 hidden units two (units 0-2: out, unit 3: x, which has no op
 * or line); a final norm layer, which holds no parts. */
static TfModel *parts_model(void) {
    TfModel *m = small_model();
    TfError err = {""};
    TfLayer *a = &m->layers[0], *f = &m->layers[1];
    a->n_heads = 3;
    a->d_head = a->d_vhead = 2;
    TfLayerPart ap[] = {{"n", "Count", 10, 0, 1}, {"hist", "Aggregate", 11, 1, 2}};
    TfLayerPart fp[] = {{"out", "Map", 12, 0, 3}, {"x", NULL, 0, 3, 1}};
    TfLayer la = *a, lf = *f;
    la.name = "n+hist", la.op = "Count", la.line = 10, la.parts = ap, la.n_parts = 2;
    lf.name = "out+x", lf.op = "Map", lf.line = 12, lf.parts = fp, lf.n_parts = 2;
    // Re-add both layers with their parts (model_add_layer copies them).
    for (int l = 0; l < m->n_layers; l++) free(m->layers[l].name), free(m->layers[l].op);
    m->n_layers = 0;
    ck_assert_int_eq(model_add_layer(m, &la, &err), 0);
    ck_assert_int_eq(model_add_layer(m, &lf, &err), 1);
    int64_t d[1] = {6};
    TfLayer nl = model_layer_init(TF_LAYER_NORM);
    nl.name = "final_norm";
    nl.norm_weight = model_add_tensor(m, "norm.weight", 1, d, &err);
    nl.norm_bias = model_add_tensor(m, "norm.bias", 1, d, &err);
    nl.norm_eps = 1e-5f;
    ck_assert_int_eq(model_add_layer(m, &nl, &err), 2);
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
    return m;
}

/* Whether the n bytes at buf hold the text s. */
static int has_text(const unsigned char *buf, size_t n, const char *s) {
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(buf + i, s, k) == 0) return 1;
    return 0;
}

static void assert_part(const TfLayerPart *p, const char *name, const char *op, int line,
                        int first, int count) {
    ck_assert_str_eq(p->name, name);
    if (op)
        ck_assert_str_eq(p->op, op);
    else
        ck_assert_ptr_null(p->op);
    ck_assert_int_eq(p->line, line);
    ck_assert_int_eq(p->first, first);
    ck_assert_int_eq(p->count, count);
}

START_TEST(test_round_trip_parts) {
    TfModel *m = parts_model();
    unsigned char *buf;
    size_t len;
    TfError err = {""};
    ck_assert_msg(tfw_write_buffer(m, &buf, &len, &err) == 0, "%s", err.msg);
    // The header holds them as docs/weight-format.md shows.
    ck_assert(has_text(buf, len, "\\\"parts\\\":[{\\\"name\\\":\\\"n\\\",\\\"op\\\":"
                                 "\\\"Count\\\",\\\"line\\\":10,\\\"heads\\\":[0,1]}"));
    ck_assert(has_text(buf, len, "{\\\"name\\\":\\\"x\\\",\\\"units\\\":[3,1]}"));
    TfModel *b = tfw_read_buffer(buf, len, &err);
    ck_assert_msg(b != NULL, "%s", err.msg);
    free(buf);
    ck_assert_int_eq(b->n_layers, 3);
    const TfLayer *a = &b->layers[0], *f = &b->layers[1];
    ck_assert_str_eq(a->name, "n+hist");
    ck_assert_int_eq(a->n_heads, 3);
    ck_assert_int_eq(a->n_parts, 2);
    assert_part(&a->parts[0], "n", "Count", 10, 0, 1);
    assert_part(&a->parts[1], "hist", "Aggregate", 11, 1, 2);
    ck_assert_int_eq(f->n_parts, 2);
    assert_part(&f->parts[0], "out", "Map", 12, 0, 3);
    assert_part(&f->parts[1], "x", NULL, 0, 3, 1);
    ck_assert_int_eq(b->layers[2].n_parts, 0);
    ck_assert_ptr_null(b->layers[2].parts);
    model_free(b);
    model_free(m);

    // A layer of one op has no parts key, and reads back without parts.
    m = small_model();
    ck_assert_int_eq(tfw_write_buffer(m, &buf, &len, &err), 0);
    ck_assert(!has_text(buf, len, "parts"));
    b = tfw_read_buffer(buf, len, &err);
    ck_assert_int_eq(b->layers[0].n_parts, 0);
    ck_assert_ptr_null(b->layers[0].parts);
    model_free(b);
    free(buf);
    model_free(m);

    // The writer refuses parts the reader would refuse.
    m = parts_model();
    m->layers[0].parts[1].count = 1; /* head 2 belongs to no part */
    ck_assert_int_eq(tfw_write_buffer(m, &buf, &len, &err), -1);
    ck_assert_str_eq(err.msg, "the file would be refused by the reader: __metadata__.layers[0].parts "
                              "cover heads 0 to 1 of the layer's 3");
    model_free(m);
}
END_TEST

/* parts_model's file with layer l's parts replaced by raw JSON (NULL:
 * deleted) is rejected with exactly `want`. */
static void expect_parts_rejected(int l, const char *parts, const char *want) {
    TfModel *m = parts_model();
    unsigned char *buf;
    size_t len;
    TfError err = {""};
    ck_assert_int_eq(tfw_write_buffer(m, &buf, &len, &err), 0);
    model_free(m);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    cJSON *root = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hlen);
    cJSON *layers = cJSON_Parse(cJSON_GetObjectItemCaseSensitive(meta(root), "layers")->valuestring);
    cJSON *layer = cJSON_GetArrayItem(layers, l);
    cJSON_DeleteItemFromObjectCaseSensitive(layer, "parts");
    if (parts) {
        cJSON *j = cJSON_Parse(parts);
        ck_assert_msg(j != NULL, "test JSON %s", parts);
        cJSON_AddItemToObject(layer, "parts", j);
    }
    char *s = cJSON_PrintUnformatted(layers);
    set_meta(root, "layers", s);
    cJSON_free(s);
    cJSON_Delete(layers);
    char *json = cJSON_PrintUnformatted(root);
    size_t out_len;
    unsigned char *out = assemble(json, buf + 8 + hlen, len - 8 - (size_t)hlen, &out_len);
    TfModel *back = tfw_read_buffer(out, out_len, &err);
    if (back) model_free(back);
    ck_assert_msg(back == NULL, "accepted parts %s", parts);
    ck_assert_str_eq(err.msg, want);
    free(out);
    cJSON_free(json);
    cJSON_Delete(root);
    free(buf);
}

#define H0 "{\"name\":\"n\",\"op\":\"Count\",\"line\":10,\"heads\":[0,1]}"
#define U0 "{\"name\":\"out\",\"units\":[0,3]}"

START_TEST(test_rejects_bad_parts) {
    expect_parts_rejected(0, "{\"name\":\"n\"}", "__metadata__.layers[0].parts is not a non-empty array");
    expect_parts_rejected(0, "[]", "__metadata__.layers[0].parts is not a non-empty array");
    expect_parts_rejected(0, "\"n\"", "__metadata__.layers[0].parts is not a non-empty array");
    // Each part: a name, an op that is text, a line, the right key for the layer's kind.
    expect_parts_rejected(0, "[" H0 ",{\"heads\":[1,2]}]", "__metadata__.layers[0].parts[1] needs a name");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"\",\"heads\":[1,2]}]",
                          "__metadata__.layers[0].parts[1] needs a name");
    expect_parts_rejected(0, "[" H0 ",{\"name\":7,\"heads\":[1,2]}]",
                          "__metadata__.layers[0].parts[1] needs a name");
    expect_parts_rejected(0, "[" H0 ",3]", "__metadata__.layers[0].parts[1] needs a name");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\",\"op\":1,\"heads\":[1,2]}]",
                          "__metadata__.layers[0].parts[1].op is not a string");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\",\"line\":-1,\"heads\":[1,2]}]",
                          "__metadata__.layers[0].parts[1].line is not a line number");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\",\"line\":2147483648,\"heads\":[1,2]}]",
                          "__metadata__.layers[0].parts[1].line is not a line number");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\",\"line\":1.5,\"heads\":[1,2]}]",
                          "__metadata__.layers[0].parts[1].line is not a line number");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\",\"units\":[1,2]}]",
                          "__metadata__.layers[0].parts[1] has units, but a part of an attention "
                          "layer has heads");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\",\"heads\":[1,2],\"units\":[1,2]}]",
                          "__metadata__.layers[0].parts[1] has units, but a part of an attention "
                          "layer has heads");
    expect_parts_rejected(1, "[{\"name\":\"out\",\"heads\":[0,4]}]",
                          "__metadata__.layers[1].parts[0] has heads, but a part of an mlp layer "
                          "has units");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\"}]",
                          "__metadata__.layers[0].parts[1].heads is not two non-negative integers "
                          "[first, count]");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\",\"heads\":[1,2,0]}]",
                          "__metadata__.layers[0].parts[1].heads is not two non-negative integers "
                          "[first, count]");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\",\"heads\":[1,-2]}]",
                          "__metadata__.layers[0].parts[1].heads is not two non-negative integers "
                          "[first, count]");
    expect_parts_rejected(1, "[" U0 ",{\"name\":\"x\",\"units\":\"3,1\"}]",
                          "__metadata__.layers[1].parts[1].units is not two non-negative integers "
                          "[first, count]");
    // count < 1
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"e\",\"heads\":[1,0]},{\"name\":\"h\",\"heads\":[1,2]}]",
                          "__metadata__.layers[0].parts[1].heads: a part holds at least one head");
    expect_parts_rejected(1, "[" U0 ",{\"name\":\"x\",\"units\":[3,0]}]",
                          "__metadata__.layers[1].parts[1].units: a part holds at least one hidden "
                          "unit");
    // Heads 0..2 (units 0..3) exactly, in order: no gap, no overlap, nothing past the end.
    expect_parts_rejected(0, "[{\"name\":\"n\",\"heads\":[1,2]},{\"name\":\"h\",\"heads\":[0,1]}]",
                          "__metadata__.layers[0].parts[0].heads starts at head 1, not 0 (the parts "
                          "cover the layer's heads in order, no gap, no overlap)");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\",\"heads\":[2,1]}]",
                          "__metadata__.layers[0].parts[1].heads starts at head 2, not 1 (the parts "
                          "cover the layer's heads in order, no gap, no overlap)");
    expect_parts_rejected(0, "[{\"name\":\"n\",\"heads\":[0,2]},{\"name\":\"h\",\"heads\":[1,2]}]",
                          "__metadata__.layers[0].parts[1].heads starts at head 1, not 2 (the parts "
                          "cover the layer's heads in order, no gap, no overlap)");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\",\"heads\":[1,3]}]",
                          "__metadata__.layers[0].parts[1].heads [1, 3] runs past the layer's 3 "
                          "heads");
    expect_parts_rejected(0, "[" H0 ",{\"name\":\"h\",\"heads\":[1,2147483647]}]",
                          "__metadata__.layers[0].parts[1].heads [1, 2147483647] runs past the "
                          "layer's 3 heads");
    expect_parts_rejected(0, "[" H0 "]", "__metadata__.layers[0].parts cover heads 0 to 0 of the "
                                         "layer's 3");
    expect_parts_rejected(1, "[" U0 "]", "__metadata__.layers[1].parts cover hidden units 0 to 2 "
                                         "of the layer's 4");
    expect_parts_rejected(2, "[{\"name\":\"z\",\"units\":[0,6]}]",
                          "__metadata__.layers[2].parts: a norm layer has no parts");
}
END_TEST

int main(void) {
    Suite *s = suite_create("tfw");
    TCase *tc = tcase_create("tfw");
    tcase_add_test(tc, test_round_trip_buffer);
    tcase_add_test(tc, test_round_trip_file);
    tcase_add_test(tc, test_write_failure_leaves_nothing);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_rejects_bad_headers);
    tcase_add_test(tc, test_rejects_bad_framing);
    tcase_add_test(tc, test_validate_catches_layer_errors);
    tcase_add_test(tc, test_round_trip_learned_fields);
    tcase_add_test(tc, test_rejects_bad_learned_fields);
    tcase_add_test(tc, test_round_trip_general_fields);
    tcase_add_test(tc, test_validate_general_fields);
    tcase_add_test(tc, test_rejects_bad_general_fields);
    tcase_add_test(tc, test_output_only_tokens);
    tcase_add_test(tc, test_round_trip_made_by_and_learned);
    tcase_add_test(tc, test_write_tensors_drops_the_rest);
    tcase_add_test(tc, test_tensor_names_carry_the_layer);
    tcase_add_test(tc, test_rejects_what_the_readers_would_read_differently);
    tcase_add_test(tc, test_rejects_bad_metadata_json);
    tcase_add_test(tc, test_rejects_non_finite_weights);
    tcase_add_test(tc, test_writer_refuses_oversized_header);
    tcase_add_test(tc, test_read_refuses_devices_and_caps);
    tcase_add_test(tc, test_many_tensors_read);
    tcase_add_test(tc, test_round_trip_checks_and_numbers);
    tcase_add_test(tc, test_value_text);
    tcase_add_test(tc, test_validate_checks_and_numbers);
    tcase_add_test(tc, test_rejects_bad_checks_and_numbers);
    tcase_add_test(tc, test_live_ranges);
    tcase_add_test(tc, test_round_trip_parts);
    tcase_add_test(tc, test_rejects_bad_parts);
    tcase_add_test(tc, test_read_after_interrupt);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
