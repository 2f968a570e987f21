/* model.c: building, validating and freeing a TfModel. */
#include "model.h"
#include "utf8.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const tf_reg_kind_names[] = {"token", "position", "scalar",
                                                                "categorical"};
const char *const tf_layer_kind_names[] = {"attention", "mlp", "norm"};
const char *const tf_activation_names[] = {"gelu", "relu", "gelu_tanh"};
static_assert(sizeof tf_reg_kind_names / sizeof *tf_reg_kind_names == TF_REG_KIND_COUNT, "names");
static_assert(sizeof tf_layer_kind_names / sizeof *tf_layer_kind_names == TF_LAYER_KIND_COUNT,
              "names");
static_assert(sizeof tf_activation_names / sizeof *tf_activation_names == TF_ACT_COUNT, "names");

static char *dup_str(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

TfModel *model_new(void) {
    TfModel *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->output_reg = -1;
    m->tok_embed = m->pos_embed = m->unembed = m->unembed_bias = -1;
    m->output_kind = TF_OUTPUT_NEXT_TOKEN;
    m->every_position = 0;
    m->bos = m->stop_token = -1;
    return m;
}

static void layer_parts_free(TfLayerPart *parts, int n) {
    for (int i = 0; i < n; i++) {
        free(parts[i].name);
        free(parts[i].op);
    }
    free(parts);
}

void model_free(TfModel *m) {
    if (!m) return;
    for (int i = 0; i < m->n_regs; i++) {
        free(m->regs[i].name);
        for (int v = 0; m->regs[i].values && v < m->regs[i].size; v++) free(m->regs[i].values[v]);
        free(m->regs[i].values);
    }
    for (int i = 0; i < m->n_layers; i++) {
        free(m->layers[i].name);
        free(m->layers[i].op);
        layer_parts_free(m->layers[i].parts, m->layers[i].n_parts);
    }
    for (int i = 0; i < m->n_tensors; i++) {
        free(m->tensors[i].name);
        free(m->tensors[i].data);
    }
    for (int i = 0; i < m->n_classes && m->class_names; i++) free(m->class_names[i]);
    free(m->class_names);
    for (int i = 0; i < m->n_checks; i++) free(m->checks[i].op);
    free(m->checks);
    free(m->regs);
    free(m->layers);
    free(m->tensors);
    free(m->vocab);
    for (int i = 0; m->token_names && i < m->n_vocab; i++) free(m->token_names[i]);
    free(m->token_names);
    free(m->source);
    free(m->source_name);
    free(m->made_by);
    free(m->learned);
    free(m);
}

/* Keep in step with model_free: what it releases is what is left empty here. */
TfModel *model_new_like(const TfModel *src) {
    TfModel *m = model_new();
    if (!m) return NULL;
    *m = *src;
    m->regs = NULL, m->n_regs = 0;
    m->layers = NULL, m->n_layers = 0;
    m->tensors = NULL, m->n_tensors = 0;
    m->class_names = NULL, m->n_classes = 0;
    m->checks = NULL, m->n_checks = 0;
    m->vocab = m->source = m->source_name = m->made_by = m->learned = NULL;
    m->token_names = NULL;
    return m;
}

/* Room for element n of an array of n: the capacity is the smallest power of
 * two >= n, so it doubles when n is one (n appends cost O(n) copying, with any
 * allocator). NULL when out of memory (arr is kept). */
static void *grow(void *arr, int n, size_t elem) {
    if (n > 0 && (n & (n - 1)) != 0) return arr;
    return realloc(arr, (n > 0 ? 2 * (size_t)n : 1) * elem);
}

int model_find_tensor(const TfModel *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return i;
    return -1;
}

int model_find_register(const TfModel *m, const char *name) {
    for (int i = 0; i < m->n_regs; i++)
        if (strcmp(m->regs[i].name, name) == 0) return i;
    return -1;
}

int model_reg_live(const TfModel *m, int r, int state) {
    const TfRegister *g = &m->regs[r];
    return state >= g->live_from && state <= g->live_to && state <= m->n_layers;
}

int model_find_register_at(const TfModel *m, const char *name, int state) {
    for (int i = 0; i < m->n_regs; i++)
        if (strcmp(m->regs[i].name, name) == 0 && model_reg_live(m, i, state)) return i;
    return -1;
}

/* The one non-zero entry of a length-n vector read with stride `step` (its
 * index in *at), or 0 when it has none or more than one. */
static float only_entry(const float *v, int n, size_t step, int *at) {
    float w = 0;
    *at = -1;
    for (int i = 0; i < n; i++) {
        if (v[(size_t)i * step] == 0) continue;
        if (*at >= 0) return 0;
        *at = i, w = v[(size_t)i * step];
    }
    return w;
}

int model_mlp_clears(const TfModel *m, const TfLayer *ly, int *col) {
    int d = m->d_model, F = ly->d_hidden, n = 0;
    for (int u = 0; u < F; u++) col[u] = -1;
    if (ly->kind != TF_LAYER_MLP || ly->act != TF_ACT_RELU || ly->norm_weight >= 0) return 0;
    const float *w1 = m->tensors[ly->fc1_weight].data, *w2 = m->tensors[ly->fc2_weight].data;
    const float *b1 = ly->fc1_bias >= 0 ? m->tensors[ly->fc1_bias].data : NULL;
    const float *b2 = ly->fc2_bias >= 0 ? m->tensors[ly->fc2_bias].data : NULL;
    for (int u = 0; u + 1 < F; u++) {
        int c, c2, r, r2;
        if (only_entry(w1 + (size_t)u * d, d, 1, &c) != 1.0f ||
            only_entry(w1 + (size_t)(u + 1) * d, d, 1, &c2) != -1.0f || c2 != c ||
            (b1 && (b1[u] != 0 || b1[u + 1] != 0)) ||
            only_entry(w2 + u, d, (size_t)F, &r) != -1.0f || r != c ||
            only_entry(w2 + u + 1, d, (size_t)F, &r2) != 1.0f || r2 != c || (b2 && b2[c] != 0))
            continue;
        int writers = 0;
        for (int k = 0; k < F; k++) writers += w2[(size_t)c * F + k] != 0;
        if (writers != 2) continue;
        col[u] = col[u + 1] = c;
        n++;
        u++;
    }
    return n;
}

/* The last residual state register r holds (TfRegister.live_to, capped). */
static int live_end(const TfModel *m, const TfRegister *r) {
    return r->live_to < m->n_layers ? r->live_to : m->n_layers;
}

/* State s in words: "the embedding", "after layer 4". */
static void state_words(int s, char *buf, size_t n) {
    if (s == 0)
        snprintf(buf, n, "the embedding");
    else
        snprintf(buf, n, "after layer %d", s - 1);
}

void model_live_text(const TfModel *m, int r, char *buf, size_t n) {
    const TfRegister *reg = &m->regs[r];
    int from = reg->live_from, to = live_end(m, reg);
    char a[32], b[32];
    state_words(from, a, sizeof a);
    state_words(to, b, sizeof b);
    if (from == to)
        snprintf(buf, n, "state %d (%s)", from, a);
    else
        snprintf(buf, n, "states %d..%d (%s to %s)", from, to, a, b);
}

int model_reg_reused(const TfModel *m, int r) {
    const TfRegister *g = &m->regs[r];
    return g->live_from > 0 || g->live_to < m->n_layers;
}

int model_add_tensor(TfModel *m, const char *name, int ndim, const int64_t *shape, TfError *err) {
    if (name && model_find_tensor(m, name) >= 0) {
        tf_error_set(err, "tensor '%s' exists already", name);
        return -1;
    }
    return model_add_new_tensor(m, name, ndim, shape, err);
}

int model_add_new_tensor(TfModel *m, const char *name, int ndim, const int64_t *shape,
                         TfError *err) {
    if (!name || !*name) {
        tf_error_set(err, "a tensor needs a name");
        return -1;
    }
    if (ndim < 1 || ndim > TF_MAX_NDIM) {
        tf_error_set(err, "tensor '%s': rank %d is not between 1 and %d", name, ndim, TF_MAX_NDIM);
        return -1;
    }
    size_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 1 || (uint64_t)shape[d] > SIZE_MAX / sizeof(float) / n) {
            tf_error_set(err, "tensor '%s': dimension %d of size %lld is not allowed", name, d,
                         (long long)shape[d]);
            return -1;
        }
        n *= (size_t)shape[d];
    }
    TfTensor *ts = grow(m->tensors, m->n_tensors, sizeof *ts);
    if (!ts) goto oom;
    m->tensors = ts;
    TfTensor *t = &ts[m->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = dup_str(name);
    t->data = calloc(n, sizeof(float));
    if (!t->name || !t->data) {
        free(t->name);
        free(t->data);
        goto oom;
    }
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->nelem = n;
    return m->n_tensors++;
oom:
    tf_error_set(err, "out of memory for tensor '%s'", name);
    return -1;
}

int model_add_layer(TfModel *m, const TfLayer *layer, TfError *err) {
    TfLayer *ls = grow(m->layers, m->n_layers, sizeof *ls);
    if (!ls) goto oom;
    m->layers = ls;
    TfLayer *l = &ls[m->n_layers];
    *l = *layer;
    l->name = dup_str(layer->name ? layer->name : tf_layer_kind_names[layer->kind]);
    l->op = dup_str(layer->op);
    l->parts = NULL;
    l->n_parts = 0;
    int parts_ok = 1;
    if (layer->n_parts > 0) {
        l->parts = calloc((size_t)layer->n_parts, sizeof *l->parts);
        parts_ok = l->parts != NULL;
        for (int i = 0; parts_ok && i < layer->n_parts; i++) {
            const TfLayerPart *from = &layer->parts[i];
            TfLayerPart *to = &l->parts[i];
            *to = *from;
            to->name = dup_str(from->name ? from->name : "");
            to->op = dup_str(from->op);
            l->n_parts = i + 1;
            parts_ok = to->name && (!from->op || to->op);
        }
    }
    if (!l->name || (layer->op && !l->op) || !parts_ok) {
        free(l->name);
        free(l->op);
        layer_parts_free(l->parts, l->n_parts);
        goto oom;
    }
    return m->n_layers++;
oom:
    tf_error_set(err, "out of memory for a layer");
    return -1;
}

int model_add_register(TfModel *m, const char *name, TfRegKind kind, int offset, int size,
                       TfError *err) {
    TfRegister *rs = grow(m->regs, m->n_regs, sizeof *rs);
    if (!rs) goto oom;
    m->regs = rs;
    TfRegister *r = &rs[m->n_regs];
    r->name = dup_str(name);
    if (!r->name) goto oom;
    r->kind = kind;
    r->offset = offset;
    r->size = size;
    r->values = NULL;
    r->live_from = 0;
    r->live_to = TF_LIVE_END;
    return m->n_regs++;
oom:
    tf_error_set(err, "out of memory for a register");
    return -1;
}

int model_add_categorical(TfModel *m, const char *name, int offset, int size,
                          const char *const *labels, TfError *err) {
    if (size < 1 || !labels) {
        tf_error_set(err, "categorical register '%s' needs at least one value label",
                     name ? name : "");
        return -1;
    }
    for (int i = 0; i < size; i++) {
        if (!labels[i] || !*labels[i]) {
            tf_error_set(err, "categorical register '%s': value %d has no label", name ? name : "",
                         i);
            return -1;
        }
    }
    char **values = calloc((size_t)size, sizeof *values);
    if (!values) goto oom;
    for (int i = 0; i < size; i++) {
        if (!(values[i] = dup_str(labels[i]))) {
            for (int j = 0; j < i; j++) free(values[j]);
            free(values);
            goto oom;
        }
    }
    int r = model_add_register(m, name, TF_REG_CATEGORICAL, offset, size, err);
    if (r < 0) {
        for (int i = 0; i < size; i++) free(values[i]);
        free(values);
        return -1;
    }
    m->regs[r].values = values;
    return r;
oom:
    tf_error_set(err, "out of memory for a register");
    return -1;
}

/* The tensor fields of a layer and the role each gives its tensor. */
typedef struct Role {
    size_t field;
    const char *attn, *mlp, *norm; /* role in a layer of each kind; NULL: none */
} Role;

#define ROLE(f, a, m, n) {offsetof(TfLayer, f), a, m, n}
static const Role roles[] = {
    ROLE(norm_weight, "attn.norm.weight", "mlp.norm.weight", "norm.weight"),
    ROLE(norm_bias, "attn.norm.bias", "mlp.norm.bias", "norm.bias"),
    ROLE(query, "attn.query.weight", NULL, NULL),
    ROLE(query_bias, "attn.query.bias", NULL, NULL),
    ROLE(key, "attn.key.weight", NULL, NULL),
    ROLE(key_bias, "attn.key.bias", NULL, NULL),
    ROLE(value, "attn.value.weight", NULL, NULL),
    ROLE(value_bias, "attn.value.bias", NULL, NULL),
    ROLE(output, "attn.output.weight", NULL, NULL),
    ROLE(output_bias, "attn.output.bias", NULL, NULL),
    ROLE(fc1_weight, NULL, "mlp.fc1.weight", NULL),
    ROLE(fc1_bias, NULL, "mlp.fc1.bias", NULL),
    ROLE(fc2_weight, NULL, "mlp.fc2.weight", NULL),
    ROLE(fc2_bias, NULL, "mlp.fc2.bias", NULL),
};
#undef ROLE

static_assert(sizeof roles / sizeof *roles == TF_LAYER_MAX_TENSORS, "roles");

int model_layer_tensors(const TfLayer *ly, int *tensors, const char **role_names) {
    int n = 0;
    for (size_t r = 0; r < sizeof roles / sizeof *roles; r++) {
        const char *what = ly->kind == TF_LAYER_ATTENTION ? roles[r].attn
                           : ly->kind == TF_LAYER_MLP     ? roles[r].mlp
                                                          : roles[r].norm;
        int t = *(const int *)((const char *)ly + roles[r].field);
        if (!what || t < 0) continue;
        tensors[n] = t;
        role_names[n++] = what;
    }
    return n;
}

int model_name_tensors(TfModel *m, TfError *err) {
    size_t n = (size_t)(m->n_tensors > 0 ? m->n_tensors : 1);
    int *first = malloc(n * sizeof *first), *users = calloc(n, sizeof *users);
    const char **role = calloc(n, sizeof *role);
    char **names = calloc(n, sizeof *names);
    int rc = -1;
    if (!first || !users || !role || !names) goto done;
    for (int t = 0; t < m->n_tensors; t++) first[t] = -1;
    // Who uses each tensor: its first layer and role, and how many layers.
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        for (size_t r = 0; r < sizeof roles / sizeof *roles; r++) {
            const char *what = ly->kind == TF_LAYER_ATTENTION ? roles[r].attn
                               : ly->kind == TF_LAYER_MLP     ? roles[r].mlp
                                                              : roles[r].norm;
            int t = *(const int *)((const char *)ly + roles[r].field);
            if (!what || t < 0 || t >= m->n_tensors) continue;
            if (first[t] < 0) {
                first[t] = l;
                role[t] = what;
                users[t] = 1;
            } else if (first[t] != l && users[t] < 2) {
                users[t] = 2;
            }
        }
    }
    int shared = 0;
    // Shared tensors are numbered in order of first use: by layer, then role.
    for (int l = 0; l < m->n_layers; l++)
        for (size_t r = 0; r < sizeof roles / sizeof *roles; r++) {
            int t = *(const int *)((const char *)&m->layers[l] + roles[r].field);
            if (t < 0 || t >= m->n_tensors || first[t] != l || names[t] ||
                t == m->tok_embed || t == m->pos_embed || t == m->unembed || t == m->unembed_bias)
                continue;
            char buf[64];
            if (users[t] > 1) snprintf(buf, sizeof buf, "shared.%d.%s", shared++, role[t]);
            else snprintf(buf, sizeof buf, "layers.%d.%s", l, role[t]);
            if (!(names[t] = dup_str(buf))) goto done;
        }
    for (int t = 0; t < m->n_tensors; t++)
        if (names[t]) {
            free(m->tensors[t].name);
            m->tensors[t].name = names[t];
            names[t] = NULL;
        }
    rc = 0;
done:
    if (rc < 0) tf_error_set(err, "out of memory");
    for (size_t t = 0; names && t < n; t++) free(names[t]);
    free(first), free(users), free(role), free(names);
    return rc;
}

int model_add_check(TfModel *m, int reg, int layer, int line, const char *op, double bound,
                    TfError *err) {
    if (!op || !*op) {
        tf_error_set(err, "a run-time check needs the text of its op");
        return -1;
    }
    if (bound != -1 && !(bound >= 0 && bound < 0.5)) {
        tf_error_set(err, "a run-time check's bound %g is not a number in [0, 0.5)", bound);
        return -1;
    }
    TfCheck *cs = realloc(m->checks, ((size_t)m->n_checks + 1) * sizeof *cs);
    if (!cs) goto oom;
    m->checks = cs;
    TfCheck *c = &cs[m->n_checks];
    if (!(c->op = dup_str(op))) goto oom;
    c->reg = reg;
    c->layer = layer;
    c->line = line;
    c->bound = bound;
    return m->n_checks++;
oom:
    tf_error_set(err, "out of memory for a run-time check");
    return -1;
}

double model_check_bound(const TfModel *m, const TfCheck *c) {
    if (c->bound >= 0) return c->bound;
    return m->max_len > 2 ? 0.5 / m->max_len : 0.25;
}

int model_numeric_output(const TfModel *m) {
    return m->every_position && m->output_kind == TF_OUTPUT_NEXT_TOKEN && m->unembed < 0 &&
           m->output_reg >= 0 && m->output_reg < m->n_regs &&
           m->regs[m->output_reg].kind == TF_REG_SCALAR;
}

/* The tensor indices a layer names (-1 where it has none). */
enum { LAYER_TENSOR_FIELDS = 14 };
static void layer_tensor_fields(const TfLayer *ly, int f[LAYER_TENSOR_FIELDS]) {
    const int fields[LAYER_TENSOR_FIELDS] = {
        ly->query,      ly->key,        ly->value,      ly->output,      ly->query_bias,
        ly->key_bias,   ly->value_bias, ly->output_bias, ly->fc1_weight, ly->fc1_bias,
        ly->fc2_weight, ly->fc2_bias,   ly->norm_weight, ly->norm_bias};
    memcpy(f, fields, sizeof fields);
}

int model_tensor_uses(const TfModel *m, int idx) {
    int n = (idx == m->tok_embed) + (idx == m->pos_embed) + (idx == m->unembed) +
            (idx == m->unembed_bias);
    int f[LAYER_TENSOR_FIELDS];
    for (int l = 0; l < m->n_layers; l++) {
        layer_tensor_fields(&m->layers[l], f);
        for (int i = 0; i < LAYER_TENSOR_FIELDS; i++) n += f[i] == idx;
    }
    return n;
}

void model_tensor_use_counts(const TfModel *m, int *uses) {
    for (int i = 0; i < m->n_tensors; i++) uses[i] = 0;
    const int model_fields[] = {m->tok_embed, m->pos_embed, m->unembed, m->unembed_bias};
    for (size_t i = 0; i < sizeof model_fields / sizeof *model_fields; i++)
        if (model_fields[i] >= 0 && model_fields[i] < m->n_tensors) uses[model_fields[i]]++;
    int f[LAYER_TENSOR_FIELDS];
    for (int l = 0; l < m->n_layers; l++) {
        layer_tensor_fields(&m->layers[l], f);
        for (int i = 0; i < LAYER_TENSOR_FIELDS; i++)
            if (f[i] >= 0 && f[i] < m->n_tensors) uses[f[i]]++;
    }
}

size_t model_param_count(const TfModel *m) {
    size_t n = 0;
    int *uses = malloc((size_t)(m->n_tensors > 0 ? m->n_tensors : 1) * sizeof *uses);
    if (uses) model_tensor_use_counts(m, uses);
    for (int i = 0; i < m->n_tensors; i++)
        if ((uses ? uses[i] : model_tensor_uses(m, i)) > 0) n += m->tensors[i].nelem;
    free(uses);
    return n;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int model_param_counts(const TfModel *m, TfParamCounts *c, TfError *err) {
    memset(c, 0, sizeof *c);
    int *uses = malloc((size_t)(m->n_tensors > 0 ? m->n_tensors : 1) * sizeof *uses);
    if (!uses) {
        tf_error_set(err, "out of memory counting parameters");
        return -1;
    }
    model_tensor_use_counts(m, uses);
    for (int i = 0; i < m->n_tensors; i++) {
        if (!uses[i]) continue;
        c->stored += m->tensors[i].nelem;
        for (size_t k = 0; k < m->tensors[i].nelem; k++) c->nonzero += m->tensors[i].data[k] != 0;
    }
    // Distinct values: the non-zero ones' bits, sorted (-0 is 0: not counted).
    uint32_t *bits = malloc((c->nonzero > 0 ? c->nonzero : 1) * sizeof *bits);
    if (!bits) {
        free(uses);
        tf_error_set(err, "out of memory counting distinct parameters");
        return -1;
    }
    size_t n = 0;
    for (int i = 0; i < m->n_tensors; i++)
        for (size_t k = 0; uses[i] && k < m->tensors[i].nelem; k++)
            if (m->tensors[i].data[k] != 0) memcpy(&bits[n++], &m->tensors[i].data[k], sizeof *bits);
    qsort(bits, n, sizeof *bits, cmp_u32);
    for (size_t k = 0; k < n; k++) c->distinct += k == 0 || bits[k] != bits[k - 1];
    free(bits);
    free(uses);
    return 0;
}

/* Multiply-adds of one row through a [rows, cols] weight: all, and the non-zero. */
static void matrix_flops(const TfModel *m, int idx, TfTokenFlops *f) {
    if (idx < 0) return;
    const TfTensor *t = &m->tensors[idx];
    size_t nz = 0;
    for (size_t k = 0; k < t->nelem; k++) nz += t->data[k] != 0;
    f->dense += 2.0 * (double)t->nelem;
    f->nonzero += 2.0 * (double)nz;
}

void model_token_flops(const TfModel *m, TfTokenFlops *f) {
    memset(f, 0, sizeof *f);
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        if (ly->kind == TF_LAYER_ATTENTION) {
            matrix_flops(m, ly->query, f);
            matrix_flops(m, ly->key, f);
            matrix_flops(m, ly->value, f);
            matrix_flops(m, ly->output, f);
            f->per_position += 2.0 * ly->n_heads * (ly->d_head + ly->d_vhead);
        } else if (ly->kind == TF_LAYER_MLP) {
            matrix_flops(m, ly->fc1_weight, f);
            matrix_flops(m, ly->fc2_weight, f);
        }
    }
    matrix_flops(m, m->unembed, f);
}

/* Checks tensor `idx` (named by `role` in messages) has the given 1-D or
 * 2-D shape (cols < 0 for 1-D). */
static int check_shape(const TfModel *m, int li, const char *role, int idx, int64_t rows,
                       int64_t cols, TfError *err) {
    char where[160];
    if (li >= 0)
        snprintf(where, sizeof where, "layer %d '%s': %s", li, m->layers[li].name, role);
    else
        snprintf(where, sizeof where, "%s", role);
    if (idx < 0 || idx >= m->n_tensors) {
        tf_error_set(err, "%s: no such tensor", where);
        return -1;
    }
    const TfTensor *t = &m->tensors[idx];
    int want_ndim = cols < 0 ? 1 : 2;
    if (t->ndim != want_ndim || t->shape[0] != rows || (cols >= 0 && t->shape[1] != cols)) {
        char have[96] = "[", want[64];
        for (int d = 0; d < t->ndim; d++) {
            size_t len = strlen(have);
            snprintf(have + len, sizeof have - len, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        }
        strcat(have, "]");
        if (cols < 0)
            snprintf(want, sizeof want, "[%lld]", (long long)rows);
        else
            snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
        tf_error_set(err, "%s: tensor '%s' has shape %s, expected %s", where, t->name, have, want);
        return -1;
    }
    return 0;
}

TfLayer model_layer_init(TfLayerKind kind) {
    TfLayer l;
    memset(&l, 0, sizeof l);
    l.kind = kind;
    l.norm_weight = l.norm_bias = -1;
    l.norm_eps = 1e-5f;
    l.query = l.key = l.value = l.output = -1;
    l.query_bias = l.key_bias = l.value_bias = l.output_bias = -1;
    l.fc1_weight = l.fc1_bias = l.fc2_weight = l.fc2_bias = -1;
    return l;
}

/* An optional bias: absent (-1) or a vector of n. */
static int check_bias(const TfModel *m, int li, const char *role, int idx, int64_t n,
                      TfError *err) {
    return idx < 0 ? 0 : check_shape(m, li, role, idx, n, -1, err);
}

static int validate_layer(const TfModel *m, int li, TfError *err) {
    const TfLayer *l = &m->layers[li];
    int64_t d = m->d_model;
    if ((l->norm_weight >= 0) != (l->norm_bias >= 0) ||
        (l->kind == TF_LAYER_NORM && l->norm_weight < 0)) {
        tf_error_set(err, "layer %d '%s': a LayerNorm needs both norm_weight and norm_bias", li,
                     l->name);
        return -1;
    }
    if (l->norm_weight >= 0) {
        if (!(l->norm_eps > 0) || !isfinite(l->norm_eps)) {
            tf_error_set(err, "layer %d '%s': LayerNorm eps must be positive", li, l->name);
            return -1;
        }
        if (check_shape(m, li, "norm_weight", l->norm_weight, d, -1, err) < 0 ||
            check_shape(m, li, "norm_bias", l->norm_bias, d, -1, err) < 0)
            return -1;
    }
    if (l->kind == TF_LAYER_NORM) return 0;
    if (l->kind == TF_LAYER_ATTENTION) {
        if (l->n_heads < 1 || l->d_head < 1 || l->d_vhead < 1) {
            tf_error_set(err, "layer %d '%s': heads %d, d_head %d, d_vhead %d must be positive", li,
                         l->name, l->n_heads, l->d_head, l->d_vhead);
            return -1;
        }
        if (!isfinite(l->scale)) {
            tf_error_set(err, "layer %d '%s': attention scale is not finite", li, l->name);
            return -1;
        }
        int64_t hd = (int64_t)l->n_heads * l->d_head, hv = (int64_t)l->n_heads * l->d_vhead;
        if (check_shape(m, li, "query", l->query, hd, d, err) < 0 ||
            check_shape(m, li, "key", l->key, hd, d, err) < 0 ||
            check_shape(m, li, "value", l->value, hv, d, err) < 0 ||
            check_bias(m, li, "query_bias", l->query_bias, hd, err) < 0 ||
            check_bias(m, li, "key_bias", l->key_bias, hd, err) < 0 ||
            check_bias(m, li, "value_bias", l->value_bias, hv, err) < 0 ||
            check_bias(m, li, "output_bias", l->output_bias, d, err) < 0)
            return -1;
        if (l->output >= 0) return check_shape(m, li, "output", l->output, d, hv, err);
        if (hv != d) {
            tf_error_set(err,
                         "layer %d '%s': without an output tensor, heads x d_vhead (%lld) must "
                         "equal d_model (%lld)",
                         li, l->name, (long long)hv, (long long)d);
            return -1;
        }
        return 0;
    }
    if (l->kind == TF_LAYER_MLP) {
        if (l->d_hidden < 1) {
            tf_error_set(err, "layer %d '%s': d_hidden %d must be positive", li, l->name,
                         l->d_hidden);
            return -1;
        }
        if ((unsigned)l->act >= TF_ACT_COUNT) {
            tf_error_set(err, "layer %d '%s': unknown activation %d", li, l->name, (int)l->act);
            return -1;
        }
        if (check_shape(m, li, "fc1_weight", l->fc1_weight, l->d_hidden, d, err) < 0 ||
            check_bias(m, li, "fc1_bias", l->fc1_bias, l->d_hidden, err) < 0 ||
            check_shape(m, li, "fc2_weight", l->fc2_weight, d, l->d_hidden, err) < 0 ||
            check_bias(m, li, "fc2_bias", l->fc2_bias, d, err) < 0)
            return -1;
        return 0;
    }
    tf_error_set(err, "layer %d '%s': unknown layer kind %d", li, l->name, (int)l->kind);
    return -1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A categorical register: size >= 1 non-empty, distinct labels. */
static int validate_labels(const TfRegister *r, TfError *err) {
    if (r->size < 1 || !r->values) {
        tf_error_set(err, "register '%s': a categorical register needs a label for each column",
                     r->name);
        return -1;
    }
    for (int i = 0; i < r->size; i++) {
        if (!r->values[i] || !*r->values[i]) {
            tf_error_set(err, "register '%s': value %d has no label", r->name, i);
            return -1;
        }
    }
    /* sorted, repeated labels are neighbours (a register may have a million) */
    const char **sorted = malloc((size_t)r->size * sizeof *sorted);
    if (!sorted) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    memcpy(sorted, r->values, (size_t)r->size * sizeof *sorted);
    qsort(sorted, (size_t)r->size, sizeof *sorted, cmp_str);
    int rc = 0;
    for (int i = 1; i < r->size && rc == 0; i++) {
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            tf_error_set(err, "register '%s': value label '%.40s' appears twice", r->name,
                         sorted[i]);
            rc = -1;
        }
    }
    free(sorted);
    return rc;
}

static int cmp_reg_name(const void *a, const void *b) {
    const TfRegister *x = *(const TfRegister *const *)a, *y = *(const TfRegister *const *)b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x > y) - (x < y);
}

static int cmp_reg_offset(const void *a, const void *b) {
    const TfRegister *x = *(const TfRegister *const *)a, *y = *(const TfRegister *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x > y) - (x < y);
}


/* No two registers share a name, nor a column in a state both hold: sorted
 * by offset and swept, in O(n log n) when no columns are shared (a file may
 * declare a million registers). The registers still open at an offset all
 * hold that column, so in a valid file there are at most n_layers + 1 of
 * them. A pair is named in declaration order. */
static int registers_distinct(const TfModel *m, TfError *err) {
    if (m->n_regs < 2) return 0;
    const TfRegister **s = malloc((size_t)m->n_regs * sizeof *s);
    const TfRegister **open = malloc((size_t)m->n_regs * sizeof *open);
    if (!s || !open) {
        free(s), free(open);
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int i = 0; i < m->n_regs; i++) s[i] = &m->regs[i];
    int rc = 0, n_open = 0;
    qsort(s, (size_t)m->n_regs, sizeof *s, cmp_reg_name);
    for (int i = 1; i < m->n_regs && rc == 0; i++) {
        if (strcmp(s[i - 1]->name, s[i]->name) == 0) {
            tf_error_set(err, "register '%s' appears twice", s[i]->name);
            rc = -1;
        }
    }
    qsort(s, (size_t)m->n_regs, sizeof *s, cmp_reg_offset);
    for (int i = 0; i < m->n_regs && rc == 0; i++) {
        int kept = 0;
        for (int j = 0; j < n_open; j++)
            if (open[j]->offset + open[j]->size > s[i]->offset) open[kept++] = open[j];
        n_open = kept;
        for (int j = 0; j < n_open && rc == 0; j++) {
            const TfRegister *o = open[j];
            if (o->live_from > live_end(m, s[i]) || s[i]->live_from > live_end(m, o)) continue;
            const TfRegister *a = o < s[i] ? o : s[i], *b = o < s[i] ? s[i] : o;
            tf_error_set(err, "registers '%s' and '%s' overlap", a->name, b->name);
            rc = -1;
        }
        open[n_open++] = s[i];
    }
    free(s), free(open);
    return rc;
}

static int validate_registers(const TfModel *m, TfError *err) {
    for (int i = 0; i < m->n_regs; i++) {
        const TfRegister *r = &m->regs[i];
        if (!r->name || !*r->name) {
            tf_error_set(err, "register %d has no name", i);
            return -1;
        }
        if ((unsigned)r->kind >= TF_REG_KIND_COUNT) {
            tf_error_set(err, "register '%s': unknown kind %d", r->name, (int)r->kind);
            return -1;
        }
        if (r->kind == TF_REG_CATEGORICAL) {
            if (validate_labels(r, err) < 0) return -1;
        } else if (r->values) {
            tf_error_set(err, "register '%s': only categorical registers have value labels",
                         r->name);
            return -1;
        }
        int want = r->kind == TF_REG_TOKEN      ? m->n_vocab - m->n_output_only
                   : r->kind == TF_REG_POSITION ? 2
                   : r->kind == TF_REG_SCALAR   ? 1
                                                : r->size;
        if (r->size != want) {
            tf_error_set(err, "register '%s': a %s register has %d columns, not %d", r->name,
                         tf_reg_kind_names[r->kind], want, r->size);
            return -1;
        }
        if (r->offset < 0 || r->offset > m->d_model - r->size) {
            tf_error_set(err, "register '%s': columns %d..%d lie outside d_model %d", r->name,
                         r->offset, r->offset + r->size - 1, m->d_model);
            return -1;
        }
        if (r->live_from < 0 || r->live_from > r->live_to || r->live_from > m->n_layers) {
            tf_error_set(err, "register '%s': live range %d..%d is not within states 0..%d",
                         r->name, r->live_from, r->live_to, m->n_layers);
            return -1;
        }
    }
    if (registers_distinct(m, err) < 0) return -1;
    if (m->output_reg != -1) {
        if (m->output_reg < 0 || m->output_reg >= m->n_regs) {
            tf_error_set(err, "output register %d does not exist", m->output_reg);
            return -1;
        }
        // A scalar output prints a number at every position when the
        // model has no unembedding (model_numeric_output); otherwise the
        // unembedding decodes it: a `cat` output held as a number
        // (docs/weight-format.md, "Numbers as outputs").
        if (!model_reg_live(m, m->output_reg, m->n_layers)) {
            tf_error_set(err, "output register '%s' does not hold its columns after the last layer",
                         m->regs[m->output_reg].name);
            return -1;
        }
        TfRegKind k = m->regs[m->output_reg].kind;
        if (k != TF_REG_TOKEN && k != TF_REG_CATEGORICAL && k != TF_REG_SCALAR) {
            tf_error_set(err, "output register '%s' is not a token, categorical or scalar register",
                         m->regs[m->output_reg].name);
            return -1;
        }
    }
    if (!(m->output_error_bound >= 0) || !isfinite(m->output_error_bound)) {
        tf_error_set(err, "the output error bound %g is not a non-negative number",
                     m->output_error_bound);
        return -1;
    }
    return 0;
}

/* Each check names a categorical register, a layer, a line and its op. */
static int validate_checks(const TfModel *m, TfError *err) {
    for (int i = 0; i < m->n_checks; i++) {
        const TfCheck *c = &m->checks[i];
        if (c->reg < 0 || c->reg >= m->n_regs || m->regs[c->reg].kind != TF_REG_CATEGORICAL) {
            tf_error_set(err, "check %d: register %d is not a categorical register", i, c->reg);
            return -1;
        }
        if (c->layer < 0 || c->layer >= m->n_layers) {
            tf_error_set(err, "check %d: layer %d does not exist (the model has %d)", i, c->layer,
                         m->n_layers);
            return -1;
        }
        if (c->line < 0 || !c->op || !*c->op) {
            tf_error_set(err, "check %d: needs a source line (0 or more) and the op's text", i);
            return -1;
        }
        if (!model_reg_live(m, c->reg, c->layer + 1)) {
            tf_error_set(err, "check %d: register '%s' does not hold its columns after layer %d",
                         i, m->regs[c->reg].name, c->layer);
            return -1;
        }
    }
    return 0;
}

/* every_position, bos and stop_token. */
static int validate_output_mode(const TfModel *m, TfError *err) {
    if (m->every_position != 0 && m->every_position != 1) {
        tf_error_set(err, "every_position is %d, not 0 or 1", m->every_position);
        return -1;
    }
    if (m->bos < -1 || m->bos >= m->n_vocab) {
        tf_error_set(err, "the beginning-of-sequence token %d is outside the vocabulary", m->bos);
        return -1;
    }
    if (m->stop_token < -1 || m->stop_token >= m->n_vocab) {
        tf_error_set(err, "the stop token %d is outside the vocabulary", m->stop_token);
        return -1;
    }
    if (m->output_kind == TF_OUTPUT_CLASSIFY && (m->every_position || m->stop_token >= 0)) {
        tf_error_set(err, "a classifier has no every-position output and no stop token");
        return -1;
    }
    if (m->every_position && m->stop_token >= 0) {
        tf_error_set(err, "a model read at every position generates nothing: it has no stop token");
        return -1;
    }
    if (m->n_output_only > 0 && (!m->every_position || m->output_kind == TF_OUTPUT_CLASSIFY)) {
        tf_error_set(err, "%d output-only tokens in a model not read at every position (a "
                          "generated token is read back as input)",
                     m->n_output_only);
        return -1;
    }
    if (m->bos >= m->n_vocab - m->n_output_only) {
        tf_error_set(err, "the beginning-of-sequence token %d is an output-only token", m->bos);
        return -1;
    }
    return 0;
}

int model_validate(const TfModel *m, TfError *err) {
    if (m->d_model < 1 || m->n_vocab < 1) {
        tf_error_set(err, "d_model (%d) and the vocabulary size (%d) must be positive", m->d_model,
                     m->n_vocab);
        return -1;
    }
    if (!m->vocab) {
        tf_error_set(err, "the model has no vocabulary");
        return -1;
    }
    for (int i = 0; i < m->n_vocab; i++)
        for (int j = 0; j < i; j++)
            if (m->token_names ? strcmp(m->token_names[i], m->token_names[j]) == 0
                               : m->vocab[i] == m->vocab[j]) {
                tf_error_set(err, "vocabulary entries %d and %d are the same %s", j, i,
                             m->token_names ? "name" : "character");
                return -1;
            }
    if (m->period < 1 || m->max_len < 1 || m->generate < 0) {
        tf_error_set(err, "period (%d), max_len (%d) and generate (%d) are out of range",
                     m->period, m->max_len, m->generate);
        return -1;
    }
    if (m->output_kind == TF_OUTPUT_CLASSIFY) {
        if (m->n_classes < 1 || !m->class_names) {
            tf_error_set(err, "a classifier needs at least one named class");
            return -1;
        }
        for (int i = 0; i < m->n_classes; i++)
            if (!m->class_names[i] || !*m->class_names[i]) {
                tf_error_set(err, "class %d has no name", i);
                return -1;
            }
    } else if (m->output_kind != TF_OUTPUT_NEXT_TOKEN) {
        tf_error_set(err, "unknown output kind %d", (int)m->output_kind);
        return -1;
    }
    if (validate_output_mode(m, err) < 0) return -1;
    int n_out = m->output_kind == TF_OUTPUT_CLASSIFY ? m->n_classes : m->n_vocab;
    // A model that prints a number reads its output register, not logits:
    // its unembedding is optional (and unused).
    int need_unembed = m->unembed >= 0 || !model_numeric_output(m);
    if (check_shape(m, -1, TF_TENSOR_TOKEN_EMBED, m->tok_embed, m->n_vocab, m->d_model, err) < 0 ||
        check_shape(m, -1, TF_TENSOR_POS_EMBED, m->pos_embed, m->max_len, m->d_model, err) < 0 ||
        (need_unembed &&
         check_shape(m, -1, TF_TENSOR_UNEMBED, m->unembed, n_out, m->d_model, err) < 0) ||
        check_bias(m, -1, TF_TENSOR_UNEMBED_BIAS, m->unembed_bias, n_out, err) < 0)
        return -1;
    for (int li = 0; li < m->n_layers; li++)
        if (validate_layer(m, li, err) < 0) return -1;
    if (validate_registers(m, err) < 0) return -1;
    return validate_checks(m, err);
}

int model_value_text(float v, char *buf) {
    int k = 0, prec = 1;
    if (!buf) return 0;
    if (isnan(v)) return snprintf(buf, TF_VALUE_TEXT_MAX, "nan"); /* never "-nan" */
    for (; prec <= 9; prec++) {
        k = snprintf(buf, TF_VALUE_TEXT_MAX, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    // %g writes 10 with 1 digit as "1e+01": below 1e16 (Python's repr's
    // rule) a large number is written out, the same digits then zeros.
    if (strchr(buf, 'e') && isfinite(v) && fabsf(v) >= 1 && fabsf(v) < 1e16f) {
        char sci[TF_VALUE_TEXT_MAX], digits[16];
        snprintf(sci, sizeof sci, "%.*e", prec - 1, fabs((double)v)); // d.ddde+XX
        int nd = 0, exp10 = atoi(strchr(sci, 'e') + 1);
        for (const char *c = sci; *c != 'e'; c++)
            if (*c != '.') digits[nd++] = *c;
        k = v < 0 ? snprintf(buf, TF_VALUE_TEXT_MAX, "-") : 0;
        for (int i = 0; i <= exp10 || i < nd; i++) {
            if (i == exp10 + 1) buf[k++] = '.';
            buf[k++] = i < nd ? digits[i] : '0';
        }
        buf[k] = '\0';
    }
    return k;
}

/* Whether a name can be a token of a vocabulary of words: 1..max bytes of
 * UTF-8, no blank, control character or DEL; an output-only token, never
 * typed, may hold spaces ("not spam"). */
static int word_ok(const char *s, size_t len, int output_only) {
    if (len < 1 || len > TF_TOKEN_NAME_MAX || tf_utf8_bad(s, len) != len) return 0;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] <= 0x20 && !(output_only && s[i] == ' ')) || s[i] == 0x7f)
            return 0;
    return 1;
}

int model_set_vocab(TfModel *m, const char *const *names, int n, int n_output_only,
                    TfError *err) {
    if (n < 1 || n > 256) {
        tf_error_set(err, "the vocabulary has %d tokens, not 1 to 256", n);
        return -1;
    }
    if (n_output_only < 0 || n_output_only >= n) {
        tf_error_set(err, "%d output-only tokens of %d: a prompt must be able to hold one",
                     n_output_only, n);
        return -1;
    }
    int words = 0;
    for (int i = 0; i < n; i++) words |= strlen(names[i]) != 1;
    char *vocab = calloc((size_t)n, 1);
    char **tn = words ? calloc((size_t)n, sizeof *tn) : NULL;
    if (!vocab || (words && !tn)) {
        free(vocab), free(tn);
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (len == 1) vocab[i] = names[i][0];
        if (!words) continue;
        if (!word_ok(names[i], len, i >= n - n_output_only)) {
            tf_error_set(err,
                         "vocabulary entry %d '%.40s' is not a token of a vocabulary of words "
                         "(1 to %d bytes of UTF-8, no %scontrol character)",
                         i, names[i], TF_TOKEN_NAME_MAX, i >= n - n_output_only ? "" : "space or ");
            for (int j = 0; j < i; j++) free(tn[j]);
            free(tn), free(vocab);
            return -1;
        }
        tn[i] = malloc(len + 1);
        if (!tn[i]) {
            for (int j = 0; j < i; j++) free(tn[j]);
            free(tn), free(vocab);
            tf_error_set(err, "out of memory");
            return -1;
        }
        memcpy(tn[i], names[i], len + 1);
    }
    free(m->vocab);
    for (int i = 0; m->token_names && i < m->n_vocab; i++) free(m->token_names[i]);
    free(m->token_names);
    m->vocab = vocab;
    m->token_names = tn;
    m->n_vocab = n;
    m->n_output_only = n_output_only;
    return 0;
}

const char *model_token_name(const TfModel *m, int tok, char *buf) {
    if (m->token_names) return m->token_names[tok];
    buf[0] = m->vocab[tok];
    buf[1] = '\0';
    return buf;
}

int model_copy_vocab(TfModel *dst, const TfModel *src, TfError *err) {
    const char *names[256];
    char one[256][2];
    for (int i = 0; i < src->n_vocab && i < 256; i++) {
        one[i][0] = src->vocab[i];
        one[i][1] = '\0';
        names[i] = src->token_names ? src->token_names[i] : one[i];
    }
    return model_set_vocab(dst, names, src->n_vocab, src->n_output_only, err);
}

int model_token_id(const TfModel *m, const char *name, size_t len) {
    for (int i = 0; i < m->n_vocab; i++) {
        if (m->token_names ? strlen(m->token_names[i]) == len &&
                                 memcmp(m->token_names[i], name, len) == 0
                           : len == 1 && m->vocab[i] == name[0])
            return i;
    }
    return -1;
}

int model_token_near(const TfModel *m, const char *name, size_t len) {
    int best = -1, best_d = 3;
    char t[TF_TOKEN_TEXT_MAX];
    for (int i = 0; i < m->n_vocab - m->n_output_only; i++) { // the tokens a prompt holds
        model_token_text(m, i, t);
        int d = tf_edit_distance(name, len, t);
        if (d < best_d) {
            best_d = d;
            best = i;
        }
    }
    return best;
}

int model_token_text(const TfModel *m, int tok, char *buf) {
    if (m->token_names) {
        size_t len = strlen(m->token_names[tok]);
        memcpy(buf, m->token_names[tok], len + 1);
        return (int)len;
    }
    unsigned char c = (unsigned char)m->vocab[tok];
    switch (c) {
    case '\n': return sprintf(buf, "\\n");
    case '\t': return sprintf(buf, "\\t");
    case '\r': return sprintf(buf, "\\r");
    case '\\': return sprintf(buf, "\\\\");
    default:
        if (c < 0x20 || c >= 0x7f) return sprintf(buf, "\\x%02x", c);
        buf[0] = (char)c;
        buf[1] = '\0';
        return 1;
    }
}
