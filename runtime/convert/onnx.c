/* onnx.c: a model to an ONNX file (convert.h), through protobuf-c and the
 * onnx.proto of Debian's python3-onnx (runtime/convert/onnx.proto).
 *
 * The graph computes what docs/weight-format.md's "Running the model"
 * says, at every position of a batch of sequences of one length:
 *
 *   input_ids int64 [batch, seq]
 *   x = Gather(embed.token.weight, input_ids) + embed.position.weight[:seq]
 *   per layer: LayerNormalization (opset 17) for a pre-norm or a norm layer;
 *     attention: MatMul by the transposed weights (+ bias), Reshape and
 *     Transpose to heads, MatMul, Mul by the scale, + a causal mask of
 *     -inf, Softmax, MatMul by the values, back to [batch, seq, H*DV],
 *     the output projection; MLP: MatMul, Relu, exact GELU (Erf) or tanh
 *     GELU (Tanh), MatMul; x = x + the layer's output
 *   logits float [batch, seq, outputs] = x unembed.weight^T (+ unembed.bias)
 *   (a model that prints a number: values float [batch, seq], its output
 *   register's column of x)
 *
 * Generation runs it on the sequence so far and takes the argmax at the
 * last position. The run-time checks of a compiled model are not in the
 * graph. The vocabulary, registers and how the model is read are in the
 * model's metadata_props ("tfw.vocab", "tfw.registers", ...).
 *
 * Memory: every message of the graph is allocated from an arena that
 * onnx_write frees; tensor data points into the model or the arena.
 */
#include "convert.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "onnx.pb-c.h"
#include "outfile.h"

#define ONNX_OPSET 17 /* LayerNormalization */
#define ONNX_IR_VERSION 8

typedef struct Arena {
    void **ptrs;
    size_t n, cap;
} Arena;

typedef struct Onnx {
    Arena ar;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    int tmp; /* counter for intermediate names */
    int failed;
    const TfModel *m;
    const char **plain, **trans; /* per model tensor: its initializer's name, once made */
} Onnx;

static void *ar_alloc(Onnx *o, size_t size) {
    if (o->failed) return NULL;
    if (o->ar.n == o->ar.cap) {
        size_t cap = o->ar.cap ? 2 * o->ar.cap : 256;
        void **p = realloc(o->ar.ptrs, cap * sizeof *p);
        if (!p) {
            o->failed = 1;
            return NULL;
        }
        o->ar.ptrs = p, o->ar.cap = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (!p) {
        o->failed = 1;
        return NULL;
    }
    return o->ar.ptrs[o->ar.n++] = p;
}

static char *ar_printf(Onnx *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = ar_alloc(o, (size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* A fresh intermediate name, "t17". */
static char *tmp_name(Onnx *o) { return ar_printf(o, "t%d", o->tmp++); }

static void push(Onnx *o, void ***arr, size_t *n, size_t *cap, void *item) {
    if (o->failed || !item) {
        o->failed = 1;
        return;
    }
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        void **p = realloc(*arr, c * sizeof *p);
        if (!p) {
            o->failed = 1;
            return;
        }
        *arr = p, *cap = c;
    }
    (*arr)[(*n)++] = item;
}

/* A node op(inputs) -> out (NULL: a fresh name); returns the node (NULL
 * when out of memory) and its output in *out_name. */
static Onnx__NodeProto *node(Onnx *o, const char *op, int n_in, const char *const *ins,
                             const char *out, const char **out_name) {
    Onnx__NodeProto *nd = ar_alloc(o, sizeof *nd);
    char **in = ar_alloc(o, (size_t)n_in * sizeof *in);
    char **outs = ar_alloc(o, sizeof *outs);
    char *name = out ? ar_printf(o, "%s", out) : tmp_name(o);
    if (!nd || !in || !outs || !name) {
        o->failed = 1;
        *out_name = "";
        return NULL;
    }
    onnx__node_proto__init(nd);
    for (int i = 0; i < n_in; i++) in[i] = (char *)ins[i];
    nd->n_input = (size_t)n_in, nd->input = in;
    outs[0] = name;
    nd->n_output = 1, nd->output = outs;
    nd->op_type = (char *)op;
    nd->name = ar_printf(o, "n%zu_%s", o->n_nodes, op);
    push(o, (void ***)&o->nodes, &o->n_nodes, &o->cap_nodes, nd);
    *out_name = name;
    return nd;
}

static Onnx__AttributeProto *attr(Onnx *o, Onnx__NodeProto *nd, const char *name) {
    if (!nd) return NULL;
    Onnx__AttributeProto *a = ar_alloc(o, sizeof *a);
    Onnx__AttributeProto **as = ar_alloc(o, (nd->n_attribute + 1) * sizeof *as);
    if (!a || !as) return NULL;
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    if (nd->n_attribute) memcpy(as, nd->attribute, nd->n_attribute * sizeof *as);
    as[nd->n_attribute++] = a;
    nd->attribute = as;
    return a;
}

static void attr_int(Onnx *o, Onnx__NodeProto *nd, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr(o, nd, name);
    if (!a) return;
    a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1, a->i = v;
}

static void attr_float(Onnx *o, Onnx__NodeProto *nd, const char *name, float v) {
    Onnx__AttributeProto *a = attr(o, nd, name);
    if (!a) return;
    a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    a->has_f = 1, a->f = v;
}

static void attr_ints(Onnx *o, Onnx__NodeProto *nd, const char *name, const int64_t *v, int n) {
    Onnx__AttributeProto *a = attr(o, nd, name);
    int64_t *copy = ar_alloc(o, (size_t)n * sizeof *copy);
    if (!a || !copy) return;
    memcpy(copy, v, (size_t)n * sizeof *copy);
    a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->n_ints = (size_t)n, a->ints = copy;
}

/* An initializer (a constant tensor) of `bytes` bytes at data (not
 * copied: it must outlive the write); its name. */
static const char *init(Onnx *o, const char *name, int32_t type, const int64_t *dims, int ndim,
                        const void *data, size_t bytes) {
    Onnx__TensorProto *t = ar_alloc(o, sizeof *t);
    int64_t *d = ar_alloc(o, (size_t)ndim * sizeof *d);
    char *nm = name ? ar_printf(o, "%s", name) : tmp_name(o);
    if (!t || !d || !nm) return "";
    onnx__tensor_proto__init(t);
    if (ndim) memcpy(d, dims, (size_t)ndim * sizeof *d); /* a scalar: dims may be NULL */
    t->n_dims = (size_t)ndim, t->dims = d;
    t->has_data_type = 1, t->data_type = type;
    t->name = nm;
    t->has_raw_data = 1;
    t->raw_data.len = bytes;
    t->raw_data.data = (uint8_t *)data;
    push(o, (void ***)&o->inits, &o->n_inits, &o->cap_inits, t);
    return nm;
}

static const char *init_i64(Onnx *o, const int64_t *v, int n) {
    int64_t *copy = ar_alloc(o, (size_t)n * sizeof *copy);
    if (!copy) return "";
    memcpy(copy, v, (size_t)n * sizeof *copy);
    int64_t dims[1] = {n};
    return init(o, NULL, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, dims, 1, copy, (size_t)n * 8);
}

static const char *init_scalar(Onnx *o, float v) {
    float *copy = ar_alloc(o, sizeof *copy);
    if (!copy) return "";
    *copy = v;
    return init(o, NULL, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, NULL, 0, copy, 4);
}

/* Model tensor idx as it is (its own name); once, however many layers use it. */
static const char *init_tensor(Onnx *o, int idx) {
    const TfTensor *t = &o->m->tensors[idx];
    if (!o->plain[idx])
        o->plain[idx] = init(o, t->name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, t->shape, t->ndim,
                             t->data, t->nelem * sizeof(float));
    return o->plain[idx];
}

/* A linear weight [out, in] transposed to [in, out], for MatMul; once. */
static const char *init_transposed(Onnx *o, int idx) {
    const TfTensor *t = &o->m->tensors[idx];
    if (o->trans[idx]) return o->trans[idx];
    int64_t r = t->shape[0], c = t->shape[1], dims[2] = {c, r};
    float *w = ar_alloc(o, t->nelem * sizeof *w);
    if (!w) return "";
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) w[j * r + i] = t->data[i * c + j];
    return o->trans[idx] = init(o, ar_printf(o, "%s.T", t->name), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                                dims, 2, w, t->nelem * sizeof(float));
}

static const char *op1(Onnx *o, const char *op, const char *a) {
    const char *out;
    node(o, op, 1, (const char *[]){a}, NULL, &out);
    return out;
}

static const char *op2(Onnx *o, const char *op, const char *a, const char *b) {
    const char *out;
    node(o, op, 2, (const char *[]){a, b}, NULL, &out);
    return out;
}

/* x W^T (+ b), W [out, in] of tensor w, b tensor index or -1. */
static const char *linear(Onnx *o, const TfModel *m, const char *x, int w, int b) {
    (void)m;
    const char *y = op2(o, "MatMul", x, init_transposed(o, w));
    return b >= 0 ? op2(o, "Add", y, init_tensor(o, b)) : y;
}

static const char *layernorm(Onnx *o, const TfModel *m, const char *x, const TfLayer *ly) {
    (void)m;
    const char *out;
    Onnx__NodeProto *nd = node(o, "LayerNormalization", 3,
                               (const char *[]){x, init_tensor(o, ly->norm_weight),
                                                init_tensor(o, ly->norm_bias)},
                               NULL, &out);
    attr_int(o, nd, "axis", -1);
    attr_float(o, nd, "epsilon", ly->norm_eps);
    return out;
}

static const char *transpose(Onnx *o, const char *x, const int64_t perm[4]) {
    const char *out;
    Onnx__NodeProto *nd = node(o, "Transpose", 1, (const char *[]){x}, NULL, &out);
    attr_ints(o, nd, "perm", perm, 4);
    return out;
}

/* [B, T, H*D] -> [B, H, T, D] (keys: [B, H, D, T]). */
static const char *heads(Onnx *o, const char *x, int H, int D, int keys) {
    static const int64_t qv[4] = {0, 2, 1, 3}, k[4] = {0, 2, 3, 1};
    const char *r = op2(o, "Reshape", x, init_i64(o, (const int64_t[]){0, 0, H, D}, 4));
    return transpose(o, r, keys ? k : qv);
}

static const char *attention(Onnx *o, const TfModel *m, const char *h, const TfLayer *ly,
                             const char *mask) {
    int H = ly->n_heads, D = ly->d_head, DV = ly->d_vhead;
    const char *q = heads(o, linear(o, m, h, ly->query, ly->query_bias), H, D, 0);
    const char *k = heads(o, linear(o, m, h, ly->key, ly->key_bias), H, D, 1);
    const char *v = heads(o, linear(o, m, h, ly->value, ly->value_bias), H, DV, 0);
    const char *s = op2(o, "Mul", op2(o, "MatMul", q, k), init_scalar(o, ly->scale));
    if (ly->causal) s = op2(o, "Add", s, mask);
    const char *p;
    Onnx__NodeProto *nd = node(o, "Softmax", 1, (const char *[]){s}, NULL, &p);
    attr_int(o, nd, "axis", -1);
    static const int64_t back[4] = {0, 2, 1, 3};
    const char *z = transpose(o, op2(o, "MatMul", p, v), back);
    z = op2(o, "Reshape", z, init_i64(o, (const int64_t[]){0, 0, (int64_t)H * DV}, 3));
    if (ly->output >= 0) return linear(o, m, z, ly->output, ly->output_bias);
    return ly->output_bias >= 0 ? op2(o, "Add", z, init_tensor(o, ly->output_bias)) : z;
}

static const char *mlp(Onnx *o, const TfModel *m, const char *h, const TfLayer *ly) {
    const char *a = linear(o, m, h, ly->fc1_weight, ly->fc1_bias);
    if (ly->act == TF_ACT_RELU) {
        a = op1(o, "Relu", a);
    } else if (ly->act == TF_ACT_GELU) { /* 0.5 x (1 + erf(x / sqrt 2)) */
        const char *e = op1(o, "Erf", op2(o, "Mul", a, init_scalar(o, 0.70710678118654752440f)));
        a = op2(o, "Mul", op2(o, "Mul", a, init_scalar(o, 0.5f)),
                op2(o, "Add", e, init_scalar(o, 1.0f)));
    } else { /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        const char *x3 = op2(o, "Mul", op2(o, "Mul", a, a), a);
        const char *u = op2(o, "Add", a, op2(o, "Mul", x3, init_scalar(o, 0.044715f)));
        const char *t = op1(o, "Tanh", op2(o, "Mul", u, init_scalar(o, 0.79788456080286535588f)));
        a = op2(o, "Mul", op2(o, "Mul", a, init_scalar(o, 0.5f)),
                op2(o, "Add", t, init_scalar(o, 1.0f)));
    }
    return linear(o, m, a, ly->fc2_weight, ly->fc2_bias);
}

/* A graph input or output: elem type, [batch, seq] or [batch, seq, n]. */
static Onnx__ValueInfoProto *value_info(Onnx *o, const char *name, int32_t type, int64_t n) {
    Onnx__ValueInfoProto *vi = ar_alloc(o, sizeof *vi);
    Onnx__TypeProto *tp = ar_alloc(o, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ar_alloc(o, sizeof *tt);
    Onnx__TensorShapeProto *sh = ar_alloc(o, sizeof *sh);
    int nd = n ? 3 : 2;
    Onnx__TensorShapeProto__Dimension **dims = ar_alloc(o, 3 * sizeof *dims);
    if (!vi || !tp || !tt || !sh || !dims) return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    static const char *const params[2] = {"batch", "seq"};
    for (int i = 0; i < nd; i++) {
        dims[i] = ar_alloc(o, sizeof **dims);
        if (!dims[i]) return NULL;
        onnx__tensor_shape_proto__dimension__init(dims[i]);
        if (i < 2) {
            dims[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dims[i]->dim_param = (char *)params[i];
        } else {
            dims[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dims[i]->dim_value = n;
        }
    }
    sh->n_dim = (size_t)nd, sh->dim = dims;
    tt->has_elem_type = 1, tt->elem_type = type, tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tp->tensor_type = tt;
    vi->name = (char *)name, vi->type = tp;
    return vi;
}

/* The metadata_props: how to read the model (docs/convert.md). */
static int add_meta(Onnx *o, Onnx__ModelProto *mp, const char *key, const char *value) {
    Onnx__StringStringEntryProto *e = ar_alloc(o, sizeof *e);
    Onnx__StringStringEntryProto **es =
        ar_alloc(o, (mp->n_metadata_props + 1) * sizeof *es);
    char *k = ar_printf(o, "%s", key), *v = ar_printf(o, "%s", value);
    if (!e || !es || !k || !v) return -1;
    onnx__string_string_entry_proto__init(e);
    e->key = k, e->value = v;
    if (mp->n_metadata_props) memcpy(es, mp->metadata_props, mp->n_metadata_props * sizeof *es);
    es[mp->n_metadata_props++] = e;
    mp->metadata_props = es;
    return 0;
}

static int add_meta_json(Onnx *o, Onnx__ModelProto *mp, const char *key, cJSON *j) {
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    int rc = text ? add_meta(o, mp, key, text) : -1;
    cJSON_free(text);
    cJSON_Delete(j);
    return rc;
}

static int metadata(Onnx *o, Onnx__ModelProto *mp, const TfModel *m) {
    cJSON *vocab = cJSON_CreateArray(), *regs = cJSON_CreateArray();
    for (int i = 0; i < m->n_vocab; i++) {
        char s[2] = {m->vocab[i], 0};
        cJSON_AddItemToArray(vocab, cJSON_CreateString(m->token_names ? m->token_names[i] : s));
    }
    for (int r = 0; r < m->n_regs; r++) {
        const TfRegister *g = &m->regs[r];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", g->name);
        cJSON_AddStringToObject(j, "kind", tf_reg_kind_names[g->kind]);
        cJSON_AddNumberToObject(j, "offset", g->offset);
        cJSON_AddNumberToObject(j, "size", g->size);
        if (model_reg_reused(m, r)) { /* "live": [from, to], as the .tfw has it */
            int live[2] = {g->live_from, g->live_to < m->n_layers ? g->live_to : m->n_layers};
            cJSON_AddItemToObject(j, "live", cJSON_CreateIntArray(live, 2));
        }
        if (g->values) {
            cJSON *v = cJSON_AddArrayToObject(j, "values");
            for (int i = 0; i < g->size; i++) cJSON_AddItemToArray(v, cJSON_CreateString(g->values[i]));
        }
        cJSON_AddItemToArray(regs, j);
    }
    char buf[64];
    int rc = add_meta_json(o, mp, "tfw.vocab", vocab) | add_meta_json(o, mp, "tfw.registers", regs);
    snprintf(buf, sizeof buf, "%d", m->generate);
    rc |= add_meta(o, mp, "tfw.generate", buf);
    snprintf(buf, sizeof buf, "%d", m->period);
    rc |= add_meta(o, mp, "tfw.period", buf);
    snprintf(buf, sizeof buf, "%d", m->max_len);
    rc |= add_meta(o, mp, "tfw.max_len", buf);
    rc |= add_meta(o, mp, "tfw.output_kind", m->output_kind == TF_OUTPUT_CLASSIFY ? "classify" : "next_token");
    rc |= add_meta(o, mp, "tfw.output_mode", m->every_position ? "every_position" : "next_token");
    if (m->output_reg >= 0) rc |= add_meta(o, mp, "tfw.output", m->regs[m->output_reg].name);
    char t[TF_TOKEN_TEXT_MAX];
    if (m->bos >= 0) rc |= add_meta(o, mp, "tfw.bos", model_token_name(m, m->bos, t));
    if (m->stop_token >= 0) rc |= add_meta(o, mp, "tfw.stop_token", model_token_name(m, m->stop_token, t));
    if (m->output_kind == TF_OUTPUT_CLASSIFY) {
        cJSON *c = cJSON_CreateArray();
        for (int i = 0; i < m->n_classes; i++) cJSON_AddItemToArray(c, cJSON_CreateString(m->class_names[i]));
        rc |= add_meta_json(o, mp, "tfw.classes", c);
        rc |= add_meta(o, mp, "tfw.classify_at", m->classify_at_last ? "last" : "first");
    }
    if (m->made_by) rc |= add_meta(o, mp, "tfw.made_by", m->made_by);
    if (m->source_name) rc |= add_meta(o, mp, "tfw.source_name", m->source_name);
    if (m->n_checks) rc |= add_meta(o, mp, "tfw.checks", "not in the graph: tfrun performs them");
    return rc ? -1 : 0;
}

int convert_to_onnx(const TfModel *m, const char *path, TfError *err) {
    Onnx o = {0};
    o.m = m;
    o.plain = calloc((size_t)m->n_tensors + 1, sizeof *o.plain);
    o.trans = calloc((size_t)m->n_tensors + 1, sizeof *o.trans);
    if (!o.plain || !o.trans) o.failed = 1;
    int L = m->max_len, numeric = model_numeric_output(m), causal = 0;
    for (int l = 0; l < m->n_layers; l++) causal |= m->layers[l].kind == TF_LAYER_ATTENTION && m->layers[l].causal;
    // The sequence length T as a [1] tensor, and the position rows 0..T-1.
    const char *shape = op1(&o, "Shape", "input_ids");
    const char *T1 = NULL, *out;
    Onnx__NodeProto *nd = node(&o, "Slice", 3,
                               (const char *[]){shape, init_i64(&o, (const int64_t[]){1}, 1),
                                                init_i64(&o, (const int64_t[]){2}, 1)},
                               NULL, &T1);
    const char *tok;
    nd = node(&o, "Gather", 2, (const char *[]){init_tensor(&o, m->tok_embed), "input_ids"},
              NULL, &tok);
    attr_int(&o, nd, "axis", 0);
    const char *zero1 = init_i64(&o, (const int64_t[]){0}, 1);
    const char *pos;
    node(&o, "Slice", 4,
         (const char *[]){init_tensor(&o, m->pos_embed), zero1, T1, zero1}, NULL, &pos);
    const char *x = op2(&o, "Add", tok, pos), *mask = NULL;
    if (causal) { // [T, T]: 0 on and below the diagonal, -inf above
        float *mk = ar_alloc(&o, (size_t)L * L * sizeof *mk);
        if (mk)
            for (int i = 0; i < L; i++)
                for (int j = 0; j < L; j++) mk[(size_t)i * L + j] = j <= i ? 0.0f : -INFINITY;
        const char *TT = NULL;
        nd = node(&o, "Concat", 2, (const char *[]){T1, T1}, NULL, &TT);
        attr_int(&o, nd, "axis", 0);
        node(&o, "Slice", 4,
             (const char *[]){init(&o, "causal_mask", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                                   (const int64_t[]){L, L}, 2, mk, (size_t)L * L * 4),
                              init_i64(&o, (const int64_t[]){0, 0}, 2), TT,
                              init_i64(&o, (const int64_t[]){0, 1}, 2)},
             NULL, &mask);
    }
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        if (ly->kind == TF_LAYER_NORM) {
            x = layernorm(&o, m, x, ly);
            continue;
        }
        const char *h = ly->norm_weight >= 0 ? layernorm(&o, m, x, ly) : x;
        const char *y = ly->kind == TF_LAYER_ATTENTION ? attention(&o, m, h, ly, mask) : mlp(&o, m, h, ly);
        x = op2(&o, "Add", x, y);
    }
    int64_t n_out = 0;
    if (numeric) {
        nd = node(&o, "Gather", 2,
                  (const char *[]){x, init(&o, NULL, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, NULL, 0,
                                           ar_alloc(&o, 8), 8)},
                  "values", &out);
        int64_t *col = o.n_inits ? (int64_t *)o.inits[o.n_inits - 1]->raw_data.data : NULL;
        if (col) *col = m->regs[m->output_reg].offset;
        attr_int(&o, nd, "axis", 2);
    } else {
        n_out = m->tensors[m->unembed].shape[0];
        const char *lg = op2(&o, "MatMul", x, init_transposed(&o, m->unembed));
        if (m->unembed_bias >= 0)
            node(&o, "Add", 2, (const char *[]){lg, init_tensor(&o, m->unembed_bias)},
                 "logits", &out);
        else
            node(&o, "Identity", 1, (const char *[]){lg}, "logits", &out);
    }

    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    Onnx__ValueInfoProto *in = value_info(&o, "input_ids", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0);
    Onnx__ValueInfoProto *outv = value_info(&o, numeric ? "values" : "logits",
                                            ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, n_out);
    g.name = "tfw";
    g.n_node = o.n_nodes, g.node = o.nodes;
    g.n_initializer = o.n_inits, g.initializer = o.inits;
    g.n_input = 1, g.input = &in;
    g.n_output = 1, g.output = &outv;
    opset.domain = "", opset.has_version = 1, opset.version = ONNX_OPSET;
    mp.has_ir_version = 1, mp.ir_version = ONNX_IR_VERSION;
    mp.n_opset_import = 1, mp.opset_import = opsets;
    mp.producer_name = "tfconvert", mp.producer_version = TF_VERSION;
    mp.graph = &g;
    int rc = -1;
    unsigned char *buf = NULL;
    if (!o.failed && in && outv && metadata(&o, &mp, m) == 0 && !o.failed) {
        size_t len = onnx__model_proto__get_packed_size(&mp);
        if ((buf = malloc(len ? len : 1))) {
            onnx__model_proto__pack(&mp, buf);
            rc = outfile_write(path, buf, len, err);
        }
    }
    if (rc < 0 && !err->msg[0]) tf_error_set(err, "out of memory writing the ONNX graph");
    free(buf);
    for (size_t i = 0; i < o.ar.n; i++) free(o.ar.ptrs[i]);
    free(o.ar.ptrs);
    free(o.nodes);
    free(o.inits);
    free(o.plain);
    free(o.trans);
    return rc;
}
