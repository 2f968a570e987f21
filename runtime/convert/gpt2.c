/* gpt2.c: a Hugging Face GPT-2-style folder to a TfModel (convert.h).
 *
 * GPT-2, as transformers' modeling_gpt2.py computes it, is a pre-norm
 * decoder, which the .tfw format holds layer for layer:
 *
 *   x  = wte[t] + wpe[i]
 *   per block:  x += c_proj(attn(ln_1(x)))      -> an attention layer with a pre-norm
 *               x += c_proj(act(c_fc(ln_2(x)))) -> an MLP layer with a pre-norm
 *   x  = ln_f(x)                                -> a norm layer
 *   logits = lm_head(x)  (wte when tied)
 *
 * Conv1D stores its weight [in, out] (y = x W + b); the .tfw wants PyTorch's
 * Linear order [out, in], so every Conv1D weight is transposed, and c_attn's
 * [d, 3d] is cut into the query, key and value matrices. The attention scale
 * is 1/sqrt(d_head) (1 without scale_attn_weights; divided by the layer's
 * number with scale_attn_by_inverse_layer_idx).
 */
#include "convert.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "file.h"
#include "outfile.h"
#include "json.h"
#include "tfw.h"

#define CONFIG_MAX ((size_t)1 << 20) /* config.json and vocab.json: 1 MiB is plenty */

typedef struct Gpt2 {
    const TfModel *st; /* the tensors of model.safetensors */
    char *used;        /* per tensor of st: read by the conversion */
    const char *prefix;
    TfModel *m;
    TfError *err;
} Gpt2;

/* The JSON file dir/name, strictly parsed; NULL with err set. */
static cJSON *read_json(const char *dir, const char *name, TfError *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t len = 0;
    char *text = tf_file_read_max(path, CONFIG_MAX, &len, err);
    if (!text) return NULL;
    cJSON *j = tf_json_parse(text, len, name, err);
    free(text);
    if (j && !cJSON_IsObject(j)) {
        tf_error_set(err, "%s is not a JSON object", name);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* config.json's integer `key` in [lo, hi] into *out; absent: def, or an
 * error when def < lo. */
static int config_int(const cJSON *c, const char *key, int lo, int hi, int def, int *out,
                      TfError *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    if (!v || cJSON_IsNull(v)) {
        if (def < lo) {
            tf_error_set(err, "config.json: no %s", key);
            return -1;
        }
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi) {
        tf_error_set(err, "config.json: %s is not an integer from %d to %d", key, lo, hi);
        return -1;
    }
    *out = (int)v->valuedouble;
    return 0;
}

static int config_bool(const cJSON *c, const char *key, int def, int *out, TfError *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v)) {
        tf_error_set(err, "config.json: %s is not true or false", key);
        return -1;
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

/* The tensor prefix + name of model.safetensors, which must have the given
 * shape (d1 0: rank 1); NULL with err set. Marks it used. */
static const float *get(Gpt2 *g, const char *name, int64_t d0, int64_t d1) {
    char full[256];
    snprintf(full, sizeof full, "%s%s", g->prefix, name);
    int t = model_find_tensor(g->st, full);
    if (t < 0 && strncmp(name, "lm_head.", 8) == 0) t = model_find_tensor(g->st, name);
    if (t < 0) {
        tf_error_set(g->err, "model.safetensors: no tensor '%s'", full);
        return NULL;
    }
    const TfTensor *x = &g->st->tensors[t];
    int ndim = d1 ? 2 : 1;
    if (x->ndim != ndim || x->shape[0] != d0 || (d1 && x->shape[1] != d1)) {
        char have[64] = "", *p = have;
        for (int i = 0; i < x->ndim; i++)
            p += snprintf(p, (size_t)(have + sizeof have - p), "%s%lld", i ? ", " : "",
                          (long long)x->shape[i]);
        if (d1)
            tf_error_set(g->err, "model.safetensors: tensor '%s' has shape [%s], not [%lld, %lld]",
                         x->name, have, (long long)d0, (long long)d1);
        else
            tf_error_set(g->err, "model.safetensors: tensor '%s' has shape [%s], not [%lld]",
                         x->name, have, (long long)d0);
        return NULL;
    }
    g->used[t] = 1;
    return x->data;
}

/* A new tensor of the model, [d0, d1] (d1 0: [d0]); -1 with err set. */
static int add(Gpt2 *g, const char *name, int64_t d0, int64_t d1) {
    int64_t shape[2] = {d0, d1};
    return model_add_tensor(g->m, name, d1 ? 2 : 1, shape, g->err);
}

/* dst[o, i] = src[i, col0 + o] for o < n_out, i < n_in: a Conv1D block
 * [n_in, stride] read in PyTorch's Linear order. */
static void transpose_cols(float *dst, const float *src, int n_in, int stride, int col0, int n_out) {
    for (int o = 0; o < n_out; o++)
        for (int i = 0; i < n_in; i++) dst[(size_t)o * n_in + i] = src[(size_t)i * stride + col0 + o];
}

/* Copies prefix+name ([d0] or [d0, d1]) into a new tensor `to`; its index or -1. */
static int copy(Gpt2 *g, const char *name, const char *to, int64_t d0, int64_t d1) {
    const float *src = get(g, name, d0, d1);
    int t = src ? add(g, to, d0, d1) : -1;
    if (t >= 0) memcpy(g->m->tensors[t].data, src, g->m->tensors[t].nelem * sizeof(float));
    return t;
}

/* A Conv1D weight [n_in, stride], columns col0..col0+n_out-1, as a Linear
 * weight [n_out, n_in]; -1 with err set. */
static int conv1d(Gpt2 *g, const char *name, const char *to, int n_in, int stride, int col0,
                  int n_out) {
    const float *src = get(g, name, n_in, stride);
    int t = src ? add(g, to, n_out, n_in) : -1;
    if (t >= 0) transpose_cols(g->m->tensors[t].data, src, n_in, stride, col0, n_out);
    return t;
}

/* A Conv1D bias [stride], entries col0..col0+n-1; -1 with err set. */
static int bias_part(Gpt2 *g, const char *name, const char *to, int stride, int col0, int n) {
    const float *src = get(g, name, stride, 0);
    int t = src ? add(g, to, n, 0) : -1;
    if (t >= 0) memcpy(g->m->tensors[t].data, src + col0, (size_t)n * sizeof(float));
    return t;
}

/* The byte a vocabulary token stands for: itself when it is one ASCII
 * character, or the byte GPT-2's byte-level tokenizer writes as that
 * character (bytes_to_unicode: 'Ġ' is the space, 'Ċ' the newline). -1 when
 * the token is not one character. */
static int token_byte(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    int cp;
    if (u[0] && !u[1]) cp = u[0];
    else if ((u[0] & 0xE0) == 0xC0 && (u[1] & 0xC0) == 0x80 && !u[2])
        cp = (u[0] & 0x1F) << 6 | (u[1] & 0x3F);
    else return -1;
    if (cp < 256) return cp;
    // bytes_to_unicode maps the bytes that are not printable (0-32, 127-160,
    // 173), in order, to 256, 257, ...
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        if (printable) continue;
        if (cp == 256 + n) return b;
        n++;
    }
    return -1;
}

/* A vocab.json key as the bytes it stands for (token_byte of each of its
 * characters) into out (max bytes, NUL-terminated): its length, or -1 when
 * some character stands for no byte, for NUL or for a byte above ASCII (a
 * word's bytes must be text), or it is longer than max - 1. */
static int token_bytes(const char *s, char *out, int max) {
    int n = 0;
    for (const unsigned char *u = (const unsigned char *)s; *u;) {
        char one[3] = {(char)u[0], 0, 0};
        int k = (u[0] & 0xE0) == 0xC0 && u[1] ? 2 : 1;
        if (k == 2) one[1] = (char)u[1];
        int b = token_byte(one);
        if (b <= 0 || b >= 0x80 || n >= max - 1) return -1;
        out[n++] = (char)b;
        u += k;
    }
    out[n] = '\0';
    return n;
}

/* The model's vocabulary from opt->vocab or dir/vocab.json: characters, or
 * words when a token stands for several bytes. */
static int read_vocab(TfModel *m, const char *dir, const TfConvertOptions *opt, int n_vocab,
                      TfError *err) {
    if (n_vocab > 256) {
        tf_error_set(err, "config.json: vocab_size %d: a .tfw vocabulary holds at most 256 "
                          "tokens", n_vocab);
        return -1;
    }
    char names[256][TF_TOKEN_NAME_MAX + 1];
    const char *np[256];
    for (int i = 0; i < n_vocab; i++) names[i][0] = '\0', np[i] = names[i];
    if (opt->vocab) {
        if (opt->vocab_len != n_vocab) {
            tf_error_set(err, "--vocab has %d characters, but config.json's vocab_size is %d",
                         opt->vocab_len, n_vocab);
            return -1;
        }
        for (int i = 0; i < n_vocab; i++) {
            unsigned char c = (unsigned char)opt->vocab[i];
            if (c == 0 || c >= 0x80) { // what a .tfw file can store (runtime/model/tfw.c)
                tf_error_set(err, "--vocab: character %d is the byte 0x%02x: a .tfw vocabulary "
                                  "holds ASCII characters only (a word vocabulary: vocab.json)",
                             i + 1, c);
                return -1;
            }
            names[i][0] = (char)c, names[i][1] = '\0';
        }
    } else {
        cJSON *v = read_json(dir, "vocab.json", err);
        if (!v) {
            if (strstr(err->msg, "cannot open"))
                tf_error_set(err, "%s/vocab.json: cannot open (a character model: give --vocab "
                                  "CHARS, token i the i-th character)", dir);
            return -1;
        }
        int n = 0, rc = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, v) {
            char bytes[TF_TOKEN_NAME_MAX + 1];
            int len = token_bytes(t->string, bytes, sizeof bytes);
            int b = len == 1 ? (unsigned char)bytes[0] : -1;
            if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) ||
                t->valuedouble < 0 || t->valuedouble >= n_vocab) {
                tf_error_set(err, "vocab.json: token '%s' has no id from 0 to %d", t->string,
                             n_vocab - 1);
                rc = -1;
            } else if (len < 1 || (len == 1 && (b < 1 || b > 126))) {
                tf_error_set(err, "vocab.json: token '%.40s' (id %d) is not one printable ASCII "
                                  "character or control byte, nor a word of at most %d bytes",
                             t->string, (int)t->valuedouble, TF_TOKEN_NAME_MAX);
                rc = -1;
            } else if (names[(int)t->valuedouble][0]) {
                tf_error_set(err, "vocab.json: two tokens have id %d", (int)t->valuedouble);
                rc = -1;
            } else {
                memcpy(names[(int)t->valuedouble], bytes, (size_t)len + 1);
                n++;
            }
            if (rc < 0) break;
        }
        cJSON_Delete(v);
        if (rc < 0) return -1;
        if (n != n_vocab) {
            int miss = 0;
            while (miss < n_vocab && names[miss][0]) miss++;
            tf_error_set(err, "vocab.json: no token has id %d (config.json: vocab_size %d)", miss,
                         n_vocab);
            return -1;
        }
    }
    for (int i = 0; i < n_vocab; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0) {
                if (names[i][1])
                    tf_error_set(err, "vocab.json: tokens %d and %d are the same word '%s'", j, i,
                                 names[i]);
                else
                    tf_error_set(err, "%s: tokens %d and %d are the same character (byte 0x%02x)",
                                 opt->vocab ? "--vocab" : "vocab.json", j, i,
                                 (unsigned char)names[i][0]);
                return -1;
            }
    return model_set_vocab(m, np, n_vocab, 0, err);
}

/* The settings of a GPT-2 config.json. */
typedef struct Gpt2Config {
    int d, n_layer, n_head, n_pos, n_vocab, d_ff;
    TfActivation act;
    const char *act_name; /* a static string */
    float eps;
    int tied, scale_attn, scale_by_layer;
} Gpt2Config;

static int read_config(const cJSON *c, Gpt2Config *k, TfError *err) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "model_type");
    if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "gpt2") != 0)) {
        tf_error_set(err, "config.json: model_type '%s' is not gpt2",
                     cJSON_IsString(type) ? type->valuestring : "?");
        return -1;
    }
    int cross = 0, n_ctx = 0;
    if (config_int(c, "n_embd", 1, 1 << 16, 0, &k->d, err) < 0 ||
        config_int(c, "n_layer", 1, 1 << 12, 0, &k->n_layer, err) < 0 ||
        config_int(c, "n_head", 1, 1 << 12, 0, &k->n_head, err) < 0 ||
        config_int(c, "n_ctx", 0, 1 << 20, 0, &n_ctx, err) < 0 ||
        config_int(c, "n_positions", 1, 1 << 20, n_ctx > 0 ? n_ctx : 0, &k->n_pos, err) < 0 ||
        config_int(c, "vocab_size", 1, 1 << 30, 0, &k->n_vocab, err) < 0 ||
        config_bool(c, "tie_word_embeddings", 1, &k->tied, err) < 0 ||
        config_bool(c, "scale_attn_weights", 1, &k->scale_attn, err) < 0 ||
        config_bool(c, "scale_attn_by_inverse_layer_idx", 0, &k->scale_by_layer, err) < 0 ||
        config_bool(c, "add_cross_attention", 0, &cross, err) < 0)
        return -1;
    if (config_int(c, "n_inner", 1, 1 << 20, 4 * k->d, &k->d_ff, err) < 0) return -1;
    if (cross) {
        tf_error_set(err, "config.json: add_cross_attention: cross-attention cannot be "
                          "represented (a .tfw is a decoder alone)");
        return -1;
    }
    if (k->d % k->n_head != 0) {
        tf_error_set(err, "config.json: n_embd %d is not a multiple of n_head %d", k->d,
                     k->n_head);
        return -1;
    }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(c, "activation_function");
    k->act_name = cJSON_IsString(act) ? act->valuestring : "gelu_new";
    if (act && !cJSON_IsString(act)) {
        tf_error_set(err, "config.json: activation_function is not a string");
        return -1;
    }
    // (act_name then points at the static names, not into the JSON tree.)
    static const struct {
        const char *name;
        TfActivation act;
    } acts[] = {{"gelu_new", TF_ACT_GELU_TANH}, {"gelu_pytorch_tanh", TF_ACT_GELU_TANH},
                {"gelu", TF_ACT_GELU}, {"relu", TF_ACT_RELU}};
    int found = 0;
    for (size_t i = 0; i < sizeof acts / sizeof *acts && !found; i++)
        if (!strcmp(k->act_name, acts[i].name)) {
            k->act_name = acts[i].name, k->act = acts[i].act;
            found = 1;
        }
    if (!found) {
        tf_error_set(err, "config.json: activation_function '%s' cannot be represented (gelu_new, "
                          "gelu_pytorch_tanh, gelu and relu can)", k->act_name);
        return -1;
    }
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(c, "layer_norm_epsilon");
    k->eps = 1e-5f;
    if (eps) {
        if (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0) || !((float)eps->valuedouble > 0)) {
            tf_error_set(err, "config.json: layer_norm_epsilon is not a positive number");
            return -1;
        }
        k->eps = (float)eps->valuedouble;
    }
    return 0;
}

/* One block's two layers (block b, layers 2b and 2b+1). */
static int convert_block(Gpt2 *g, const Gpt2Config *k, int b) {
    int d = k->d, F = k->d_ff, H = k->n_head;
    char src[128], dst[128], lname[32];
    TfLayer a = model_layer_init(TF_LAYER_ATTENTION);
    snprintf(lname, sizeof lname, "h.%d.attn", b);
    a.name = lname;
    a.n_heads = H;
    a.d_head = a.d_vhead = d / H;
    a.scale = k->scale_attn ? 1.0f / sqrtf((float)a.d_head) : 1.0f;
    if (k->scale_by_layer) a.scale /= (float)(b + 1);
    a.causal = 1;
    a.norm_eps = k->eps;
#define NAME(s, fmt) snprintf(s, sizeof s, fmt, b)
    NAME(src, "h.%d.ln_1.weight"), snprintf(dst, sizeof dst, "layers.%d.attn.norm.weight", 2 * b);
    a.norm_weight = copy(g, src, dst, d, 0);
    NAME(src, "h.%d.ln_1.bias"), snprintf(dst, sizeof dst, "layers.%d.attn.norm.bias", 2 * b);
    if (a.norm_weight < 0 || (a.norm_bias = copy(g, src, dst, d, 0)) < 0) return -1;
    static const char *const qkv[3] = {"query", "key", "value"};
    int *w[3] = {&a.query, &a.key, &a.value}, *bias[3] = {&a.query_bias, &a.key_bias, &a.value_bias};
    for (int i = 0; i < 3; i++) {
        char to[128];
        NAME(src, "h.%d.attn.c_attn.weight");
        snprintf(to, sizeof to, "layers.%d.attn.%s.weight", 2 * b, qkv[i]);
        if ((*w[i] = conv1d(g, src, to, d, 3 * d, i * d, d)) < 0) return -1;
        NAME(src, "h.%d.attn.c_attn.bias");
        snprintf(to, sizeof to, "layers.%d.attn.%s.bias", 2 * b, qkv[i]);
        if ((*bias[i] = bias_part(g, src, to, 3 * d, i * d, d)) < 0) return -1;
    }
    NAME(src, "h.%d.attn.c_proj.weight"), snprintf(dst, sizeof dst, "layers.%d.attn.output.weight", 2 * b);
    if ((a.output = conv1d(g, src, dst, d, d, 0, d)) < 0) return -1;
    NAME(src, "h.%d.attn.c_proj.bias"), snprintf(dst, sizeof dst, "layers.%d.attn.output.bias", 2 * b);
    if ((a.output_bias = copy(g, src, dst, d, 0)) < 0) return -1;
    if (model_add_layer(g->m, &a, g->err) < 0) return -1;

    TfLayer f = model_layer_init(TF_LAYER_MLP);
    snprintf(lname, sizeof lname, "h.%d.mlp", b);
    f.name = lname;
    f.d_hidden = F;
    f.act = k->act;
    f.norm_eps = k->eps;
    NAME(src, "h.%d.ln_2.weight"), snprintf(dst, sizeof dst, "layers.%d.mlp.norm.weight", 2 * b + 1);
    if ((f.norm_weight = copy(g, src, dst, d, 0)) < 0) return -1;
    NAME(src, "h.%d.ln_2.bias"), snprintf(dst, sizeof dst, "layers.%d.mlp.norm.bias", 2 * b + 1);
    if ((f.norm_bias = copy(g, src, dst, d, 0)) < 0) return -1;
    NAME(src, "h.%d.mlp.c_fc.weight"), snprintf(dst, sizeof dst, "layers.%d.mlp.fc1.weight", 2 * b + 1);
    if ((f.fc1_weight = conv1d(g, src, dst, d, F, 0, F)) < 0) return -1;
    NAME(src, "h.%d.mlp.c_fc.bias"), snprintf(dst, sizeof dst, "layers.%d.mlp.fc1.bias", 2 * b + 1);
    if ((f.fc1_bias = copy(g, src, dst, F, 0)) < 0) return -1;
    NAME(src, "h.%d.mlp.c_proj.weight"), snprintf(dst, sizeof dst, "layers.%d.mlp.fc2.weight", 2 * b + 1);
    if ((f.fc2_weight = conv1d(g, src, dst, F, d, 0, d)) < 0) return -1;
    NAME(src, "h.%d.mlp.c_proj.bias"), snprintf(dst, sizeof dst, "layers.%d.mlp.fc2.bias", 2 * b + 1);
    if ((f.fc2_bias = copy(g, src, dst, d, 0)) < 0) return -1;
#undef NAME
    return model_add_layer(g->m, &f, g->err) < 0 ? -1 : 0;
}

/* Whether tensor `name` (the prefix removed) is a buffer GPT-2 checkpoints
 * may carry that is no parameter: the causal mask h.N.attn.bias and
 * h.N.attn.masked_bias. */
static int is_mask_buffer(const char *name) {
    int n = 0, b;
    if (sscanf(name, "h.%d.attn.%n", &b, &n) != 1 || n == 0) return 0;
    return !strcmp(name + n, "bias") || !strcmp(name + n, "masked_bias");
}

/* made_by: the tool, the folder and the settings read from config.json. */
static char *made_by(const char *source, const Gpt2Config *k, int vocab_given) {
    cJSON *o = cJSON_CreateObject(), *from = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "tool", "tfconvert");
    cJSON_AddStringToObject(o, "version", TF_VERSION);
    cJSON_AddStringToObject(from, "format", "gpt2");
    cJSON_AddStringToObject(from, "path", source);
    cJSON_AddStringToObject(from, "vocab", vocab_given ? "--vocab" : "vocab.json");
    cJSON_AddStringToObject(from, "activation_function", k->act_name);
    cJSON_AddBoolToObject(from, "tie_word_embeddings", k->tied);
    cJSON_AddItemToObject(o, "from", from);
    char *text = cJSON_PrintUnformatted(o), *copy_ = text ? malloc(strlen(text) + 1) : NULL;
    if (copy_) strcpy(copy_, text);
    cJSON_free(text);
    cJSON_Delete(o);
    return copy_;
}

/* learned: what tftrain --init needs (a learned model: its positions train,
 * no dropout, seed 0) and the shape, as tfc writes it for a model block. */
static char *learned(const Gpt2Config *k) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "d_model", k->d);
    cJSON_AddNumberToObject(o, "layers", k->n_layer);
    cJSON_AddNumberToObject(o, "heads", k->n_head);
    cJSON_AddNumberToObject(o, "d_ff", k->d_ff);
    cJSON_AddStringToObject(o, "activation", tf_activation_names[k->act]);
    cJSON_AddStringToObject(o, "norm", "pre");
    cJSON_AddNumberToObject(o, "dropout", 0);
    cJSON_AddStringToObject(o, "positions", "learned");
    cJSON_AddNumberToObject(o, "max_len", k->n_pos);
    cJSON_AddStringToObject(o, "attention", "causal");
    cJSON_AddStringToObject(o, "predict", "next_token");
    cJSON_AddNumberToObject(o, "seed", 0);
    char *text = cJSON_PrintUnformatted(o), *copy_ = text ? malloc(strlen(text) + 1) : NULL;
    if (copy_) strcpy(copy_, text);
    cJSON_free(text);
    cJSON_Delete(o);
    return copy_;
}

TfModel *convert_from_gpt2(const char *dir, const TfConvertOptions *opt, TfError *err) {
    Gpt2Config k;
    cJSON *config = read_json(dir, "config.json", err);
    if (!config) return NULL;
    int rc = read_config(config, &k, err);
    cJSON_Delete(config);
    if (rc < 0) return NULL;

    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    TfModel *st = tfw_read_tensors(path, err);
    if (!st) return NULL;
    Gpt2 g = {st, calloc((size_t)st->n_tensors + 1, 1), "", model_new(), err};
    TfModel *m = g.m;
    if (!g.used || !m) {
        tf_error_set(err, "out of memory");
        goto fail;
    }
    if (model_find_tensor(st, "transformer.wte.weight") >= 0) g.prefix = "transformer.";
    else if (model_find_tensor(st, "wte.weight") < 0) {
        tf_error_set(err, "model.safetensors: no tensor 'wte.weight' (nor "
                          "'transformer.wte.weight'): not a GPT-2 model");
        goto fail;
    }
    if (read_vocab(m, dir, opt, k.n_vocab, err) < 0) goto fail;
    m->d_model = k.d;
    m->period = k.n_pos;
    m->max_len = k.n_pos;
    m->output_reg = -1;
    m->generate = opt->generate > 0 ? opt->generate : 1;
    if ((m->tok_embed = copy(&g, "wte.weight", TF_TENSOR_TOKEN_EMBED, k.n_vocab, k.d)) < 0 ||
        (m->pos_embed = copy(&g, "wpe.weight", TF_TENSOR_POS_EMBED, k.n_pos, k.d)) < 0)
        goto fail;
    for (int b = 0; b < k.n_layer; b++)
        if (convert_block(&g, &k, b) < 0) goto fail;
    TfLayer n = model_layer_init(TF_LAYER_NORM);
    n.name = "ln_f";
    n.norm_eps = k.eps;
    char dst[64];
    snprintf(dst, sizeof dst, "layers.%d.norm.weight", 2 * k.n_layer);
    if ((n.norm_weight = copy(&g, "ln_f.weight", dst, k.d, 0)) < 0) goto fail;
    snprintf(dst, sizeof dst, "layers.%d.norm.bias", 2 * k.n_layer);
    if ((n.norm_bias = copy(&g, "ln_f.bias", dst, k.d, 0)) < 0 || model_add_layer(m, &n, err) < 0)
        goto fail;
    // The unembedding: wte when tied (as transformers ties it, whatever
    // lm_head.weight holds), else lm_head.weight.
    int has_head = model_find_tensor(st, "lm_head.weight") >= 0 ||
                   model_find_tensor(st, "transformer.lm_head.weight") >= 0;
    if (k.tied) {
        m->unembed = copy(&g, "wte.weight", TF_TENSOR_UNEMBED, k.n_vocab, k.d);
        if (has_head && m->unembed >= 0 && !get(&g, "lm_head.weight", k.n_vocab, k.d)) goto fail;
    } else if (!has_head) {
        tf_error_set(err, "model.safetensors: no tensor 'lm_head.weight', and config.json says "
                          "tie_word_embeddings false");
        goto fail;
    } else {
        m->unembed = copy(&g, "lm_head.weight", TF_TENSOR_UNEMBED, k.n_vocab, k.d);
    }
    if (m->unembed < 0) goto fail;
    if (model_find_tensor(st, "lm_head.bias") >= 0) {
        if ((m->unembed_bias = copy(&g, "lm_head.bias", TF_TENSOR_UNEMBED_BIAS, k.n_vocab, 0)) < 0)
            goto fail;
    }
    size_t plen = strlen(g.prefix);
    for (int t = 0; t < st->n_tensors; t++) {
        const char *name = st->tensors[t].name;
        if (g.used[t] || (strncmp(name, g.prefix, plen) == 0 && is_mask_buffer(name + plen)))
            continue;
        tf_error_set(err, "model.safetensors: tensor '%s' is not part of a GPT-2 model of "
                          "config.json's %d layers", name, k.n_layer);
        goto fail;
    }
    m->made_by = made_by(opt->source ? opt->source : dir, &k, opt->vocab != NULL);
    m->learned = learned(&k);
    if (!m->made_by || !m->learned) {
        tf_error_set(err, "out of memory");
        goto fail;
    }
    if (model_validate(m, err) < 0) goto fail;
    free(g.used);
    model_free(st);
    return m;
fail:
    free(g.used);
    model_free(st);
    model_free(m);
    return NULL;
}

/* ---- a model to a GPT-2-style folder -------------------------------------- */

/* Whether m is exactly a GPT-2 (convert.h); 0, or -1 with err naming why not. */
static int fits_gpt2(const TfModel *m, TfError *err) {
    if (m->output_kind == TF_OUTPUT_CLASSIFY || model_numeric_output(m) || m->unembed < 0) {
        tf_error_set(err, "a %s: a GPT-2 folder holds a next-token model",
                     m->output_kind == TF_OUTPUT_CLASSIFY ? "classifier" : "model that prints a number");
        return -1;
    }
    if (m->unembed_bias >= 0) {
        tf_error_set(err, "unembed.bias: GPT-2's lm_head has no bias");
        return -1;
    }
    if (m->n_layers < 3 || m->n_layers % 2 == 0) {
        tf_error_set(err, "%d layers: GPT-2 is blocks of an attention and an MLP layer, then a "
                          "norm layer", m->n_layers);
        return -1;
    }
    const TfLayer *a0 = &m->layers[0], *f0 = &m->layers[1];
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        TfLayerKind want = l == m->n_layers - 1 ? TF_LAYER_NORM : l % 2 ? TF_LAYER_MLP : TF_LAYER_ATTENTION;
        const char *why = NULL;
        if (ly->kind != want) why = want == TF_LAYER_NORM ? "is not the final norm layer"
                                    : want == TF_LAYER_MLP ? "is not an MLP after an attention layer"
                                                           : "is not an attention layer";
        else if (ly->norm_weight < 0)
            why = "has no pre-norm: GPT-2 normalizes the input of every attention and MLP layer";
        else if (ly->norm_eps != a0->norm_eps) why = "has another LayerNorm eps than layer 0";
        else if (want == TF_LAYER_ATTENTION) {
            if (!ly->causal) why = "is bidirectional: GPT-2's attention is causal";
            else if (ly->n_heads != a0->n_heads || ly->n_heads * ly->d_head != m->d_model ||
                     ly->d_vhead != ly->d_head)
                why = "does not split d_model into the same heads of d_head = d_vhead as layer 0";
            else if (ly->output < 0) why = "has no output projection (GPT-2's c_proj)";
            else if (ly->scale != 1.0f / sqrtf((float)ly->d_head))
                why = "has another scale than 1/sqrt(d_head)";
        } else if (want == TF_LAYER_MLP) {
            if (ly->d_hidden != f0->d_hidden || ly->act != f0->act)
                why = "has another width or activation than layer 1";
        }
        if (why) {
            tf_error_set(err, "layer %d (%s) %s", l, ly->name, why);
            return -1;
        }
    }
    for (int i = 0; i < m->n_vocab; i++)
        if (m->vocab[i] < 0) {
            tf_error_set(err, "token %d is not ASCII", i);
            return -1;
        }
    return 0;
}

/* A new zero tensor ts[*n] named name, [d0] (d1 0) or [d0, d1]; NULL when
 * out of memory. */
static TfTensor *out_tensor(TfTensor *ts, int *n, const char *name, int64_t d0, int64_t d1) {
    TfTensor *t = &ts[*n];
    t->ndim = d1 ? 2 : 1;
    t->shape[0] = d0, t->shape[1] = d1;
    t->nelem = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    t->name = malloc(strlen(name) + 1);
    t->data = calloc(t->nelem, sizeof(float));
    if (!t->name || !t->data) {
        free(t->name), free(t->data);
        t->name = NULL, t->data = NULL;
        return NULL;
    }
    strcpy(t->name, name);
    (*n)++;
    return t;
}

/* Model tensor idx under a new name (idx -1: zeros of `zeros` floats). */
static int out_copy(TfTensor *ts, int *n, const TfModel *m, const char *name, int idx, int zeros) {
    const TfTensor *src = idx >= 0 ? &m->tensors[idx] : NULL;
    TfTensor *t = src ? out_tensor(ts, n, name, src->shape[0], src->ndim > 1 ? src->shape[1] : 0)
                      : out_tensor(ts, n, name, zeros, 0);
    if (t && src) memcpy(t->data, src->data, src->nelem * sizeof(float));
    return t ? 0 : -1;
}

/* Builds the tensors of the folder's model.safetensors into ts (names and
 * data owned by ts); their number, or -1 (out of memory). */
static int gpt2_tensors(const TfModel *m, TfTensor *ts) {
    int n = 0, d = m->d_model;
    char name[96];
    TfTensor *t;
    if (out_copy(ts, &n, m, "transformer.wte.weight", m->tok_embed, 0) < 0 ||
        out_copy(ts, &n, m, "transformer.wpe.weight", m->pos_embed, 0) < 0)
        return -1;
    for (int b = 0; b < m->n_layers / 2; b++) {
        const TfLayer *a = &m->layers[2 * b], *f = &m->layers[2 * b + 1];
        int F = f->d_hidden;
#define NAME(what) snprintf(name, sizeof name, "transformer.h.%d.%s", b, what)
        NAME("ln_1.weight");
        if (out_copy(ts, &n, m, name, a->norm_weight, 0) < 0) return -1;
        NAME("ln_1.bias");
        if (out_copy(ts, &n, m, name, a->norm_bias, 0) < 0) return -1;
        NAME("attn.c_attn.weight");
        if (!(t = out_tensor(ts, &n, name, d, (int64_t)3 * d))) return -1;
        const int w[3] = {a->query, a->key, a->value};
        const int bias[3] = {a->query_bias, a->key_bias, a->value_bias};
        for (int k = 0; k < 3; k++)
            for (int o = 0; o < d; o++)
                for (int i = 0; i < d; i++)
                    t->data[(size_t)i * 3 * d + (size_t)k * d + o] = m->tensors[w[k]].data[(size_t)o * d + i];
        NAME("attn.c_attn.bias");
        if (!(t = out_tensor(ts, &n, name, (int64_t)3 * d, 0))) return -1;
        for (int k = 0; k < 3; k++)
            if (bias[k] >= 0)
                memcpy(t->data + (size_t)k * d, m->tensors[bias[k]].data, (size_t)d * sizeof(float));
        NAME("attn.c_proj.weight");
        if (!(t = out_tensor(ts, &n, name, d, d))) return -1;
        transpose_cols(t->data, m->tensors[a->output].data, d, d, 0, d);
        NAME("attn.c_proj.bias");
        if (out_copy(ts, &n, m, name, a->output_bias, d) < 0) return -1;
        NAME("ln_2.weight");
        if (out_copy(ts, &n, m, name, f->norm_weight, 0) < 0) return -1;
        NAME("ln_2.bias");
        if (out_copy(ts, &n, m, name, f->norm_bias, 0) < 0) return -1;
        NAME("mlp.c_fc.weight");
        if (!(t = out_tensor(ts, &n, name, d, F))) return -1;
        transpose_cols(t->data, m->tensors[f->fc1_weight].data, F, d, 0, d);
        NAME("mlp.c_fc.bias");
        if (out_copy(ts, &n, m, name, f->fc1_bias, F) < 0) return -1;
        NAME("mlp.c_proj.weight");
        if (!(t = out_tensor(ts, &n, name, F, d))) return -1;
        transpose_cols(t->data, m->tensors[f->fc2_weight].data, d, F, 0, F);
        NAME("mlp.c_proj.bias");
        if (out_copy(ts, &n, m, name, f->fc2_bias, d) < 0) return -1;
#undef NAME
    }
    const TfLayer *ln = &m->layers[m->n_layers - 1];
    if (out_copy(ts, &n, m, "transformer.ln_f.weight", ln->norm_weight, 0) < 0 ||
        out_copy(ts, &n, m, "transformer.ln_f.bias", ln->norm_bias, 0) < 0)
        return -1;
    const TfTensor *e = &m->tensors[m->tok_embed], *u = &m->tensors[m->unembed];
    if (memcmp(e->data, u->data, e->nelem * sizeof(float)) != 0 &&
        out_copy(ts, &n, m, "lm_head.weight", m->unembed, 0) < 0)
        return -1;
    return n;
}

/* The GPT-2 byte-level spelling of byte b (token_byte's inverse), UTF-8 into out[3]. */
static void byte_level(int b, char out[3]) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    int cp = b;
    if (!printable) {
        int n = 0;
        for (int c = 0; c < b; c++)
            n += !((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE));
        cp = 256 + n;
    }
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

static int write_json(const char *dir, const char *name, cJSON *j, TfError *err) {
    char path[4096], *text = j ? cJSON_Print(j) : NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = text ? outfile_write(path, text, strlen(text), err) : -1;
    if (!text) tf_error_set(err, "out of memory");
    cJSON_free(text);
    cJSON_Delete(j);
    return rc;
}

int convert_to_gpt2(const TfModel *m, const char *dir, TfError *err) {
    if (fits_gpt2(m, err) < 0) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        tf_error_set(err, "not a GPT-2 exactly: %s", why);
        return -1;
    }
    int cap = 16 * m->n_layers + 8;
    TfTensor *ts = calloc((size_t)cap, sizeof *ts);
    int n = ts ? gpt2_tensors(m, ts) : -1, rc = -1;
    const TfLayer *a = &m->layers[0], *f = &m->layers[1];
    if (n < 0) {
        tf_error_set(err, "out of memory");
    } else if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
        tf_error_set(err, "%s: cannot make the folder: %s", dir, strerror(errno));
    } else {
        char path[4096];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        const char *meta[] = {"format", "pt"};
        cJSON *c = cJSON_CreateObject(), *v = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "model_type", "gpt2");
        cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
        cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
        cJSON_AddNumberToObject(c, "n_embd", m->d_model);
        cJSON_AddNumberToObject(c, "n_layer", m->n_layers / 2);
        cJSON_AddNumberToObject(c, "n_head", a->n_heads);
        cJSON_AddNumberToObject(c, "n_positions", m->max_len);
        cJSON_AddNumberToObject(c, "n_ctx", m->max_len);
        cJSON_AddNumberToObject(c, "n_inner", f->d_hidden);
        cJSON_AddNumberToObject(c, "vocab_size", m->n_vocab);
        cJSON_AddStringToObject(c, "activation_function", f->act == TF_ACT_GELU_TANH ? "gelu_new"
                                                          : f->act == TF_ACT_GELU    ? "gelu"
                                                                                     : "relu");
        char eps[32];
        tfw_float_text(a->norm_eps, eps); /* 1e-05, not 9.99999974737875e-06 */
        cJSON_AddItemToObject(c, "layer_norm_epsilon", cJSON_CreateRaw(eps));
        cJSON_AddBoolToObject(c, "tie_word_embeddings", strcmp(ts[n - 1].name, "lm_head.weight") != 0);
        cJSON_AddBoolToObject(c, "scale_attn_weights", 1);
        if (m->bos >= 0) cJSON_AddNumberToObject(c, "bos_token_id", m->bos);
        if (m->stop_token >= 0) cJSON_AddNumberToObject(c, "eos_token_id", m->stop_token);
        for (int i = 0; i < m->n_vocab; i++) { /* each byte of the token's name */
            char s[2 * TF_TOKEN_NAME_MAX + 1] = "", one[3];
            const char *name = m->token_names ? m->token_names[i] : (char[]){m->vocab[i], 0};
            for (const char *c = name; *c; c++) {
                byte_level((unsigned char)*c, one);
                strcat(s, one);
            }
            cJSON_AddNumberToObject(v, s, i);
        }
        rc = tfw_write_safetensors(path, ts, n, meta, 1, err);
        rc = rc == 0 ? write_json(dir, "config.json", c, err) : (cJSON_Delete(c), -1);
        rc = rc == 0 ? write_json(dir, "vocab.json", v, err) : (cJSON_Delete(v), -1);
    }
    for (int i = 0; ts && i < n; i++) {
        free(ts[i].name);
        free(ts[i].data);
    }
    free(ts);
    return rc;
}
