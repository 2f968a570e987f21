/* learned.c: the `model { ... }` block: its settings, and the initial model.
 *
 *   model {
 *       d_model 32;  layers 2;  heads 2;  d_ff 64;  activation relu;
 *       norm post;  dropout 0.1;  positions learned;  max_len 32;
 *       attention causal;  predict next_token;  seed 1;
 *   }
 *
 * Each block of the model is an attention layer followed (d_ff > 0) by a
 * feed-forward layer. `norm pre` gives each of them a pre-norm and ends the
 * model with a norm layer; `norm post` follows each of them with a norm layer
 * (x = LN(x + sublayer(x))).
 */
#include "learned.h"

#include <assert.h>
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker.h"
#include "parse.h"
#include "rng.h"
#include "tfw.h"

const char *const tf_norm_place_names[] = {"none", "pre", "post"};
const char *const tf_positions_names[] = {"learned", "sinusoidal", "none"};
static_assert(sizeof tf_norm_place_names / sizeof *tf_norm_place_names == TF_NORM_PLACE_COUNT,
              "names");
static_assert(sizeof tf_positions_names / sizeof *tf_positions_names == TF_POS_KIND_COUNT,
              "names");

#define LEARNED_MAX_DIM 65536
#define LEARNED_MAX_LAYERS 1000
#define LEARNED_MAX_LEN 65536

typedef enum Key {
    K_D_MODEL, K_LAYERS, K_HEADS, K_D_FF, K_ACTIVATION, K_NORM, K_DROPOUT, K_POSITIONS,
    K_MAX_LEN, K_ATTENTION, K_PREDICT, K_CLASSIFY_AT, K_SEED, K_COUNT
} Key;

static const char *const key_names[] = {
    "d_model", "layers", "heads", "d_ff", "activation", "norm", "dropout", "positions",
    "max_len", "attention", "predict", "classify_at", "seed"};
static_assert(sizeof key_names / sizeof *key_names == K_COUNT, "one name per setting");

/* The one-word value of a setting among `words`; -1 after reporting. */
static int word_value(TfDiag *d, const TfSetting *st, const char *const *words, int n) {
    const TfValue *v = &st->values[0];
    if (st->n_values == 1 && v->kind == TF_VALUE_NAME)
        for (int i = 0; i < n; i++)
            if (strcmp(v->text, words[i]) == 0) return i;
    char list[128] = "";
    for (int i = 0; i < n; i++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s", i ? (i == n - 1 ? " or " : ", ") : "",
                 words[i]);
    }
    diag_error(d, st->n_values == 1 ? v->loc : st->loc, "%s must be %s", st->key.text, list);
    return -1;
}

/* A single integer value in [lo, hi]; -1 after reporting. */
static int int_value(TfDiag *d, const TfSetting *st, long lo, long hi, long *out) {
    const TfValue *v = &st->values[0];
    if (st->n_values != 1 || v->kind != TF_VALUE_INT || v->ival < lo || v->ival > hi) {
        diag_error(d, st->n_values == 1 ? v->loc : st->loc,
                   "%s must be an integer between %ld and %ld", st->key.text, lo, hi);
        return -1;
    }
    *out = v->ival;
    return 0;
}

void learned_spec_free(TfLearnedSpec *spec) {
    for (int i = 0; i < spec->n_classes && spec->class_names; i++) free(spec->class_names[i]);
    free(spec->class_names);
    spec->class_names = NULL;
    spec->n_classes = 0;
}

static int read_predict(TfDiag *d, const TfSetting *st, TfLearnedSpec *spec) {
    const TfValue *v = &st->values[0];
    if (st->n_values == 1 && v->kind == TF_VALUE_NAME && strcmp(v->text, "next_token") == 0) {
        spec->classify = 0;
        return 0;
    }
    if (st->n_values == 1 && v->kind == TF_VALUE_NAME && strcmp(v->text, "every_position") == 0) {
        spec->classify = 0;
        spec->every_position = 1;
        return 0;
    }
    if (v->kind != TF_VALUE_NAME || strcmp(v->text, "classes") != 0 || st->n_values < 3) {
        diag_error(d, v->loc, "predict must be next_token, every_position, or classes followed by two or more "
                              "class names");
        diag_hint(d, "for example: predict classes \"reject\", \"accept\";");
        return -1;
    }
    int n = st->n_values - 1;
    spec->class_names = calloc((size_t)n, sizeof *spec->class_names);
    if (!spec->class_names) return -1;
    spec->n_classes = n;
    int ok = 1;
    for (int i = 0; i < n; i++) {
        const TfValue *c = &st->values[i + 1];
        if (c->kind != TF_VALUE_STRING || !c->text[0]) {
            diag_error(d, c->loc, "a class name is a non-empty string such as \"accept\"");
            ok = 0;
            continue;
        }
        for (int j = 0; j < i; j++)
            if (spec->class_names[j] && strcmp(spec->class_names[j], c->text) == 0) {
                diag_error(d, c->loc, "class \"%s\" is named twice", c->text);
                ok = 0;
            }
        size_t len = strlen(c->text) + 1;
        if ((spec->class_names[i] = malloc(len))) memcpy(spec->class_names[i], c->text, len);
    }
    spec->classify = 1;
    return ok ? 0 : -1;
}

int learned_check(const TfStmt *model, int n_vocab, int generate, TfDiag *d, TfLearnedSpec *spec) {
    memset(spec, 0, sizeof *spec);
    spec->bos = -1;
    spec->n_layers = 1;
    spec->n_heads = 1;
    spec->act = TF_ACT_RELU;
    spec->norm = TF_NORM_NONE;
    spec->positions = TF_POS_LEARNED;
    spec->causal = 1;
    spec->seed = 1;
    static const char *const acts[] = {"gelu", "relu"};
    static const char *const attn[] = {"causal", "bidirectional"};
    static const char *const at[] = {"first", "last"};
    const TfSetting *seen[K_COUNT] = {0};
    int errors = d->n_errors;
    for (int i = 0; i < model->n_settings; i++) {
        const TfSetting *st = &model->settings[i];
        int k = -1;
        for (int j = 0; j < K_COUNT; j++)
            if (strcmp(st->key.text, key_names[j]) == 0) k = j;
        if (k < 0) {
            diag_error(d, st->key.loc, "unknown model setting '%s'", st->key.text);
            char list[256] = "";
            for (int j = 0; j < K_COUNT; j++) {
                size_t len = strlen(list);
                snprintf(list + len, sizeof list - len, "%s%s", j ? ", " : "", key_names[j]);
            }
            diag_hint(d, "the settings are %s", list);
            continue;
        }
        if (seen[k]) {
            diag_error(d, st->key.loc, "%s is set twice", st->key.text);
            diag_note(d, seen[k]->loc, "first set here");
            continue;
        }
        seen[k] = st;
        long v = 0;
        int w;
        switch ((Key)k) {
        case K_D_MODEL:
            if (int_value(d, st, 1, LEARNED_MAX_DIM, &v) == 0) spec->d_model = (int)v;
            break;
        case K_LAYERS:
            if (int_value(d, st, 0, LEARNED_MAX_LAYERS, &v) == 0) spec->n_layers = (int)v;
            break;
        case K_HEADS:
            if (int_value(d, st, 1, LEARNED_MAX_DIM, &v) == 0) spec->n_heads = (int)v;
            break;
        case K_D_FF:
            if (int_value(d, st, 0, LEARNED_MAX_DIM, &v) == 0) spec->d_ff = (int)v;
            break;
        case K_MAX_LEN:
            if (int_value(d, st, 2, LEARNED_MAX_LEN, &v) == 0) spec->max_len = (int)v;
            break;
        case K_SEED:
            if (int_value(d, st, 0, 1000000000L, &v) == 0) spec->seed = (uint64_t)v;
            break;
        case K_ACTIVATION:
            if ((w = word_value(d, st, acts, 2)) >= 0) spec->act = (TfActivation)w;
            break;
        case K_NORM:
            if ((w = word_value(d, st, tf_norm_place_names, TF_NORM_PLACE_COUNT)) >= 0)
                spec->norm = (TfNormPlace)w;
            break;
        case K_POSITIONS:
            if ((w = word_value(d, st, tf_positions_names, TF_POS_KIND_COUNT)) >= 0)
                spec->positions = (TfPositions)w;
            break;
        case K_ATTENTION:
            if ((w = word_value(d, st, attn, 2)) >= 0) spec->causal = w == 0;
            break;
        case K_CLASSIFY_AT:
            if ((w = word_value(d, st, at, 2)) >= 0) spec->classify_at_last = w;
            break;
        case K_DROPOUT: {
            const TfValue *x = &st->values[0];
            if (st->n_values != 1 || (x->kind != TF_VALUE_NUMBER && x->kind != TF_VALUE_INT) ||
                !(x->number >= 0 && x->number < 1))
                diag_error(d, x->loc, "dropout must be a number from 0 up to (not including) 1");
            else
                spec->dropout = (float)x->number;
            break;
        }
        case K_PREDICT: read_predict(d, st, spec); break;
        case K_COUNT: break;
        }
    }
    const char *need[] = {"d_model", "max_len"};
    Key need_k[] = {K_D_MODEL, K_MAX_LEN};
    for (int i = 0; i < 2; i++)
        if (!seen[need_k[i]]) {
            diag_error(d, model->loc, "the model block does not set %s", need[i]);
        }
    if (!seen[K_PREDICT]) diag_error(d, model->loc, "the model block does not set predict");
    if (d->n_errors > errors) return -1;
    if (spec->d_model % spec->n_heads != 0) {
        diag_error(d, seen[K_HEADS]->values[0].loc,
                   "d_model %d is not a multiple of the number of heads %d", spec->d_model,
                   spec->n_heads);
    }
    if (!spec->classify && !spec->every_position && !spec->causal) {
        diag_error(d, seen[K_ATTENTION]->values[0].loc,
                   "a next-token model needs causal attention (it is trained on whole sequences)");
    }
    if (!spec->classify && seen[K_CLASSIFY_AT])
        diag_error(d, seen[K_CLASSIFY_AT]->loc, "classify_at is for classifiers (predict classes)");
    if (generate >= spec->max_len)
        diag_error(d, seen[K_MAX_LEN]->values[0].loc,
                   "max_len %d leaves no room for the prompt of `generate %d`", spec->max_len,
                   generate);
    (void)n_vocab;
    return d->n_errors > errors ? -1 : 0;
}

/* ---- the initial model ---------------------------------------------------- */

typedef struct Builder {
    TfModel *m;
    TfRng rng;
    TfError *err;
    int failed;
} Builder;

static int add(Builder *b, const char *name, int64_t rows, int64_t cols) {
    if (b->failed) return -1;
    int64_t shape[2] = {rows, cols};
    int t = model_add_tensor(b->m, name, cols > 0 ? 2 : 1, shape, b->err);
    if (t < 0) b->failed = 1;
    return t;
}

static void fill_uniform(Builder *b, int t, float bound) {
    if (t < 0) return;
    TfTensor *x = &b->m->tensors[t];
    for (size_t i = 0; i < x->nelem; i++) x->data[i] = rng_uniform(&b->rng, -bound, bound);
}

static void fill_normal(Builder *b, int t) {
    if (t < 0) return;
    TfTensor *x = &b->m->tensors[t];
    for (size_t i = 0; i < x->nelem; i++) x->data[i] = rng_normal(&b->rng);
}

static void fill_const(Builder *b, int t, float v) {
    if (t < 0) return;
    TfTensor *x = &b->m->tensors[t];
    for (size_t i = 0; i < x->nelem; i++) x->data[i] = v;
}

/* nn.Linear(in, out): weight [out, in] and bias [out], both U(-1/sqrt(in), 1/sqrt(in)). */
static void linear(Builder *b, const char *prefix, int in, int out, int *w, int *bias) {
    char name[128];
    snprintf(name, sizeof name, "%s.weight", prefix);
    *w = add(b, name, out, in);
    snprintf(name, sizeof name, "%s.bias", prefix);
    *bias = add(b, name, out, 0);
    float bound = 1.0f / sqrtf((float)in);
    fill_uniform(b, *w, bound);
    fill_uniform(b, *bias, bound);
}

/* nn.LayerNorm(d): weight 1, bias 0. */
static void layernorm(Builder *b, const char *prefix, int d, int *w, int *bias) {
    char name[128];
    snprintf(name, sizeof name, "%s.weight", prefix);
    *w = add(b, name, d, 0);
    snprintf(name, sizeof name, "%s.bias", prefix);
    *bias = add(b, name, d, 0);
    fill_const(b, *w, 1.0f);
    fill_const(b, *bias, 0.0f);
}

static void add_layer(Builder *b, TfLayer *l) {
    if (!b->failed && model_add_layer(b->m, l, b->err) < 0) b->failed = 1;
}

static void add_norm_layer(Builder *b, const char *name, const char *prefix, int d) {
    TfLayer n = model_layer_init(TF_LAYER_NORM);
    n.name = (char *)name;
    layernorm(b, prefix, d, &n.norm_weight, &n.norm_bias);
    add_layer(b, &n);
}

/* The shortest decimal that reads back as f (cJSON would print the double). */
static cJSON *float_number(float f) {
    char buf[32];
    tfw_float_text(f, buf);
    return cJSON_CreateRaw(buf);
}

/* __metadata__.learned: the settings of the model block, under their names
 * (docs/weight-format.md); NULL when out of memory. */
static char *spec_json(const TfLearnedSpec *s) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "d_model", s->d_model);
    cJSON_AddNumberToObject(o, "layers", s->n_layers);
    cJSON_AddNumberToObject(o, "heads", s->n_heads);
    cJSON_AddNumberToObject(o, "d_ff", s->d_ff);
    cJSON_AddStringToObject(o, "activation", tf_activation_names[s->act]);
    cJSON_AddStringToObject(o, "norm", tf_norm_place_names[s->norm]);
    cJSON_AddItemToObject(o, "dropout", float_number(s->dropout));
    cJSON_AddStringToObject(o, "positions", tf_positions_names[s->positions]);
    cJSON_AddNumberToObject(o, "max_len", s->max_len);
    cJSON_AddStringToObject(o, "attention", s->causal ? "causal" : "bidirectional");
    cJSON_AddStringToObject(o, "predict", s->classify         ? "classes"
                                          : s->every_position ? "every_position"
                                                              : "next_token");
    if (s->classify) cJSON_AddStringToObject(o, "classify_at", s->classify_at_last ? "last" : "first");
    cJSON_AddNumberToObject(o, "seed", (double)s->seed);
    char *text = cJSON_PrintUnformatted(o), *copy = text ? malloc(strlen(text) + 1) : NULL;
    if (copy) strcpy(copy, text);
    cJSON_free(text);
    cJSON_Delete(o);
    return copy;
}

TfModel *learned_build(const TfLearnedSpec *s, const char *vocab, int n_vocab, int generate,
                       TfError *err) {
    TfModel *m = model_new();
    if (!m) {
        tf_error_set(err, "out of memory");
        return NULL;
    }
    Builder b = {m, {0}, err, 0};
    rng_seed(&b.rng, s->seed);
    int d = s->d_model;
    m->d_model = d;
    m->n_vocab = n_vocab;
    m->vocab = malloc((size_t)n_vocab);
    if (!m->vocab) {
        model_free(m);
        tf_error_set(err, "out of memory");
        return NULL;
    }
    memcpy(m->vocab, vocab, (size_t)n_vocab);
    m->period = s->max_len;
    m->max_len = s->max_len;
    m->generate = generate;
    m->tok_embed = add(&b, TF_TENSOR_TOKEN_EMBED, n_vocab, d);
    fill_normal(&b, m->tok_embed);
    m->pos_embed = add(&b, TF_TENSOR_POS_EMBED, s->max_len, d);
    if (s->positions == TF_POS_LEARNED) fill_normal(&b, m->pos_embed);
    if (s->positions == TF_POS_SINUSOIDAL && m->pos_embed >= 0) {
        float *pe = m->tensors[m->pos_embed].data;
        for (int p = 0; p < s->max_len; p++)
            for (int i = 0; i < d; i += 2) {
                double ang = p / pow(10000.0, (double)i / d);
                pe[(long)p * d + i] = (float)sin(ang);
                if (i + 1 < d) pe[(long)p * d + i + 1] = (float)cos(ang);
            }
    }
    char pre[64], name[64];
    for (int i = 0; i < s->n_layers; i++) {
        TfLayer a = model_layer_init(TF_LAYER_ATTENTION);
        snprintf(name, sizeof name, "block%d.attn", i);
        a.name = name;
        a.n_heads = s->n_heads;
        a.d_head = a.d_vhead = d / s->n_heads;
        a.scale = 1.0f / sqrtf((float)a.d_head);
        a.causal = s->causal;
        if (s->norm == TF_NORM_PRE) {
            snprintf(pre, sizeof pre, "layers.%d.attn.norm", i);
            layernorm(&b, pre, d, &a.norm_weight, &a.norm_bias);
        }
        snprintf(pre, sizeof pre, "layers.%d.attn.query", i);
        linear(&b, pre, d, d, &a.query, &a.query_bias);
        snprintf(pre, sizeof pre, "layers.%d.attn.key", i);
        linear(&b, pre, d, d, &a.key, &a.key_bias);
        snprintf(pre, sizeof pre, "layers.%d.attn.value", i);
        linear(&b, pre, d, d, &a.value, &a.value_bias);
        snprintf(pre, sizeof pre, "layers.%d.attn.output", i);
        linear(&b, pre, d, d, &a.output, &a.output_bias);
        add_layer(&b, &a);
        if (s->norm == TF_NORM_POST) {
            snprintf(name, sizeof name, "block%d.norm1", i);
            snprintf(pre, sizeof pre, "layers.%d.norm1", i);
            add_norm_layer(&b, name, pre, d);
        }
        if (s->d_ff > 0) {
            TfLayer f = model_layer_init(TF_LAYER_MLP);
            snprintf(name, sizeof name, "block%d.mlp", i);
            f.name = name;
            f.d_hidden = s->d_ff;
            f.act = s->act;
            if (s->norm == TF_NORM_PRE) {
                snprintf(pre, sizeof pre, "layers.%d.mlp.norm", i);
                layernorm(&b, pre, d, &f.norm_weight, &f.norm_bias);
            }
            snprintf(pre, sizeof pre, "layers.%d.mlp.fc1", i);
            linear(&b, pre, d, s->d_ff, &f.fc1_weight, &f.fc1_bias);
            snprintf(pre, sizeof pre, "layers.%d.mlp.fc2", i);
            linear(&b, pre, s->d_ff, d, &f.fc2_weight, &f.fc2_bias);
            add_layer(&b, &f);
            if (s->norm == TF_NORM_POST) {
                snprintf(name, sizeof name, "block%d.norm2", i);
                snprintf(pre, sizeof pre, "layers.%d.norm2", i);
                add_norm_layer(&b, name, pre, d);
            }
        }
    }
    if (s->norm == TF_NORM_PRE) add_norm_layer(&b, "final_norm", "final_norm", d);
    int n_out = s->classify ? s->n_classes : n_vocab;
    float bound = 1.0f / sqrtf((float)d);
    m->unembed = add(&b, TF_TENSOR_UNEMBED, n_out, d);
    m->unembed_bias = add(&b, TF_TENSOR_UNEMBED_BIAS, n_out, 0);
    fill_uniform(&b, m->unembed, bound);
    fill_uniform(&b, m->unembed_bias, bound);
    if (s->every_position) {
        m->every_position = 1;
        m->bos = s->bos;
    }
    if (s->classify && !b.failed) {
        m->output_kind = TF_OUTPUT_CLASSIFY;
        m->classify_at_last = s->classify_at_last;
        m->class_names = calloc((size_t)s->n_classes, sizeof *m->class_names);
        if (!m->class_names) b.failed = 1;
        else m->n_classes = s->n_classes;
        for (int i = 0; !b.failed && i < s->n_classes; i++) {
            size_t len = strlen(s->class_names[i]) + 1;
            if (!(m->class_names[i] = malloc(len))) b.failed = 1;
            else memcpy(m->class_names[i], s->class_names[i], len);
        }
        if (b.failed) tf_error_set(err, "out of memory");
    }
    if (!b.failed && !(m->learned = spec_json(s))) {
        tf_error_set(err, "out of memory");
        b.failed = 1;
    }
    if (b.failed || model_name_tensors(m, err) < 0 || model_validate(m, err) < 0) {
        model_free(m);
        return NULL;
    }
    return m;
}

int learned_spec_from_source(const char *name, const char *src, size_t len, FILE *diag_out,
                             TfLearnedSpec *spec, TfError *err) {
    memset(spec, 0, sizeof *spec);
    TfDiag diag;
    diag_init(&diag, name, src, len, diag_out);
    TfProgram *prog = tf_parse(src, len, &diag);
    if (!prog) {
        tf_error_set(err, "out of memory while parsing");
        return -1;
    }
    TfIr *ir = diag.n_errors == 0 ? check_program(prog, &diag) : NULL;
    int rc = -1;
    if (ir && !ir->model)
        tf_error_set(err, "%s declares no model (a `model { ... }` block)", name);
    else if (ir && learned_check(ir->model, ir->n_vocab, ir->generate, &diag, spec) == 0)
        rc = 0;
    diag_finish(&diag);
    if (rc < 0 && diag.n_errors > 0) tf_error_set(err, "%s has %d error%s", name, diag.n_errors,
                                                  diag.n_errors == 1 ? "" : "s");
    check_free(ir);
    ast_free_program(prog);
    return rc;
}
