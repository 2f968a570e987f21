/* tfw.c: .tfw files (safetensors + the tfw metadata profile) read and written.
 *
 * The reader distrusts every byte: each field it reads is checked, and each
 * failure names the field. The JSON header goes through cJSON.
 */
#define _POSIX_C_SOURCE 200809L
#include "tfw.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "json.h"
#include "outfile.h"

#define META "__metadata__"

static int host_is_little_endian(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* ---- reading ------------------------------------------------------------- */

/* A JSON number that is a whole number in [lo, hi]. */
static int json_int(const cJSON *j, double lo, double hi, int64_t *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double v = j->valuedouble;
    if (!(v >= lo && v <= hi) || floor(v) != v) return -1;
    *out = (int64_t)v;
    return 0;
}

/* A decimal string (an optional '-' and ASCII digits, nothing else) that is
 * a whole number in [lo, hi]. */
static int parse_int_string(const char *s, long lo, long hi, long *out) {
    if (!s) return -1;
    const char *d = s + (*s == '-');
    if (!*d || strspn(d, "0123456789") != strlen(d)) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

typedef struct Entry {
    const char *name;
    int64_t shape[TF_MAX_NDIM];
    int ndim;
    uint64_t begin, end;
    size_t nelem;
} Entry;

static int cmp_entry(const void *a, const void *b) {
    const Entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Checks one tensor entry of the header. */
static int read_entry(const cJSON *j, Entry *e, TfError *err) {
    e->name = j->string;
    if (!cJSON_IsObject(j)) {
        tf_error_set(err, "tensor '%s': header entry is not an object", e->name);
        return -1;
    }
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
    if (!dtype || !shape || !offs) {
        tf_error_set(err, "tensor '%s': missing %s", e->name,
                     !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
        return -1;
    }
    if (!cJSON_IsString(dtype)) {
        tf_error_set(err, "tensor '%s': dtype is not a string", e->name);
        return -1;
    }
    if (strcmp(dtype->valuestring, "F32") != 0) {
        tf_error_set(err, "tensor '%s': dtype '%s' is not supported (only F32)", e->name,
                     dtype->valuestring);
        return -1;
    }
    if (!cJSON_IsArray(shape)) {
        tf_error_set(err, "tensor '%s': shape is not an array", e->name);
        return -1;
    }
    e->ndim = cJSON_GetArraySize(shape);
    if (e->ndim < 1 || e->ndim > TF_MAX_NDIM) {
        tf_error_set(err, "tensor '%s': rank %d is not between 1 and %d", e->name, e->ndim,
                     TF_MAX_NDIM);
        return -1;
    }
    uint64_t n = 1;
    for (int d = 0; d < e->ndim; d++) {
        int64_t v;
        if (json_int(cJSON_GetArrayItem(shape, d), 0, 9007199254740992.0, &v) < 0) {
            tf_error_set(err, "tensor '%s': shape[%d] is not a non-negative integer", e->name, d);
            return -1;
        }
        if (v != 0 && n > UINT64_MAX / 4 / (uint64_t)v) {
            tf_error_set(err, "tensor '%s': shape overflows", e->name);
            return -1;
        }
        e->shape[d] = v;
        n *= (uint64_t)v;
    }
    if (n == 0) {
        tf_error_set(err, "tensor '%s': has no elements", e->name);
        return -1;
    }
    int64_t b, en;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        json_int(cJSON_GetArrayItem(offs, 0), 0, 9007199254740992.0, &b) < 0 ||
        json_int(cJSON_GetArrayItem(offs, 1), 0, 9007199254740992.0, &en) < 0) {
        tf_error_set(err, "tensor '%s': data_offsets is not two non-negative integers", e->name);
        return -1;
    }
    if (b > en) {
        tf_error_set(err, "tensor '%s': data_offsets [%lld, %lld] run backwards", e->name,
                     (long long)b, (long long)en);
        return -1;
    }
    if ((uint64_t)(en - b) != n * 4) {
        tf_error_set(err, "tensor '%s': data_offsets span %lld bytes, but its shape needs %llu",
                     e->name, (long long)(en - b), (unsigned long long)(n * 4));
        return -1;
    }
    if (n > SIZE_MAX / sizeof(float)) {
        tf_error_set(err, "tensor '%s': too large for this machine", e->name);
        return -1;
    }
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    e->nelem = (size_t)n;
    return 0;
}

/* The tensors tile the data section exactly: no gap, no overlap, no tail. */
static int check_tiling(Entry *es, int n, uint64_t data_len, TfError *err) {
    qsort(es, (size_t)n, sizeof *es, cmp_entry);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (es[i].begin > at) {
            tf_error_set(err, "data bytes %llu..%llu belong to no tensor (gap before '%s')",
                         (unsigned long long)at, (unsigned long long)es[i].begin - 1, es[i].name);
            return -1;
        }
        if (es[i].begin < at) {
            tf_error_set(err, "tensors '%s' and '%s' overlap", es[i - 1].name, es[i].name);
            return -1;
        }
        at = es[i].end;
    }
    if (at > data_len) {
        tf_error_set(err, "tensor data ends at byte %llu, past the end of the file (%llu data bytes)",
                     (unsigned long long)at, (unsigned long long)data_len);
        return -1;
    }
    if (at < data_len) {
        tf_error_set(err, "file has %llu bytes after the last tensor",
                     (unsigned long long)(data_len - at));
        return -1;
    }
    return 0;
}

/* Every weight is a finite number: a NaN or an infinity would reach the
 * kernels (exp of NaN) and print garbage. */
static int check_finite(const TfTensor *t, TfError *err) {
    for (size_t i = 0; i < t->nelem; i++) {
        if (!isfinite(t->data[i])) {
            tf_error_set(err, "tensor '%s': element %zu is %s, not a finite number", t->name, i,
                         isnan(t->data[i]) ? "NaN" : "infinite");
            return -1;
        }
    }
    return 0;
}

/* A metadata value: must be present (unless optional) and a string. */
static const char *meta_string(const cJSON *meta, const char *key, int optional, TfError *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, key);
    if (!v) {
        if (!optional) tf_error_set(err, "__metadata__.%s is missing", key);
        return NULL;
    }
    if (!cJSON_IsString(v)) {
        tf_error_set(err, "__metadata__.%s is not a string", key);
        return NULL;
    }
    return v->valuestring;
}

static int meta_int(const cJSON *meta, const char *key, long lo, long hi, int *out, TfError *err) {
    const char *s = meta_string(meta, key, 0, err);
    long v;
    if (!s) return -1;
    if (parse_int_string(s, lo, hi, &v) < 0) {
        tf_error_set(err, "__metadata__.%s is '%.40s', not an integer between %ld and %ld", key, s,
                     lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A metadata string that holds JSON of the given kind. */
static cJSON *meta_json(const cJSON *meta, const char *key, int want_array, TfError *err) {
    const char *s = meta_string(meta, key, 0, err);
    if (!s) return NULL;
    char what[64];
    snprintf(what, sizeof what, "__metadata__.%s", key);
    cJSON *j = tf_json_parse(s, strlen(s), what, err);
    if (j && want_array && !cJSON_IsArray(j)) {
        tf_error_set(err, "__metadata__.%s is not a JSON array", key);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* A list of one-character strings (a vocabulary of characters), or of
 * names when some token is a word (docs/weight-format.md, "Vocabulary"). */
static int read_vocab(TfModel *m, const cJSON *meta, TfError *err) {
    cJSON *v = meta_json(meta, "vocab", 1, err);
    if (!v) return -1;
    int n = cJSON_GetArraySize(v);
    if (n < 1 || n > 256) {
        tf_error_set(err, "__metadata__.vocab has %d entries, not 1 to 256", n);
        cJSON_Delete(v);
        return -1;
    }
    const char *names[256];
    for (int i = 0; i < n; i++) {
        const cJSON *t = cJSON_GetArrayItem(v, i);
        if (!cJSON_IsString(t) || t->valuestring[0] == '\0') {
            tf_error_set(err, "__metadata__.vocab[%d] is not a non-empty string", i);
            cJSON_Delete(v);
            return -1;
        }
        names[i] = t->valuestring;
    }
    // output_only_tokens: how many of the last are output-only (default 0).
    int n_out = 0;
    if (cJSON_GetObjectItemCaseSensitive(meta, "output_only_tokens") &&
        meta_int(meta, "output_only_tokens", 0, n - 1, &n_out, err) < 0) {
        cJSON_Delete(v);
        return -1;
    }
    int rc = model_set_vocab(m, names, n, n_out, err);
    if (rc < 0) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        tf_error_set(err, "__metadata__.vocab: %s", why);
    }
    cJSON_Delete(v);
    return rc;
}

static int obj_int(const cJSON *o, const char *key, int64_t lo, int64_t hi, int optional,
                   int64_t dflt, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v && optional) {
        *out = dflt;
        return 0;
    }
    return json_int(v, (double)lo, (double)hi, out);
}

static const char *obj_str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A categorical register: its "values", one non-empty string per column. */
static int read_labels(TfModel *m, const cJSON *r, int i, const char *name, int off, int size,
                       TfError *err) {
    const cJSON *values = cJSON_GetObjectItemCaseSensitive(r, "values");
    if (!cJSON_IsArray(values)) {
        tf_error_set(err, "__metadata__.registers[%d] '%.40s': a categorical register needs a "
                          "values array",
                     i, name);
        return -1;
    }
    int n = cJSON_GetArraySize(values);
    if (n != size) {
        tf_error_set(err, "__metadata__.registers[%d] '%.40s': %d values for %d columns", i, name,
                     n, size);
        return -1;
    }
    const char **labels = calloc((size_t)n, sizeof *labels);
    if (!labels) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int v = 0; v < n; v++) {
        const cJSON *lab = cJSON_GetArrayItem(values, v);
        if (!cJSON_IsString(lab) || !*lab->valuestring) {
            tf_error_set(err, "__metadata__.registers[%d] '%.40s': values[%d] is not a non-empty "
                              "string",
                         i, name, v);
            free(labels);
            return -1;
        }
        labels[v] = lab->valuestring;
    }
    int rc = model_add_categorical(m, name, off, size, labels, err);
    free(labels);
    return rc < 0 ? -1 : 0;
}

/* A register's "live" (optional): [from, to], two integers, the residual
 * states that hold it (TfRegister.live_from; model_validate checks them
 * against the layers and the other registers). */
static int read_live(TfRegister *g, const cJSON *r, int i, TfError *err) {
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(r, "live");
    if (!l) return 0;
    const cJSON *a = cJSON_IsArray(l) && cJSON_GetArraySize(l) == 2 ? l->child : NULL;
    const cJSON *b = a ? a->next : NULL;
    if (!a || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !(a->valuedouble >= 0) ||
        !(b->valuedouble >= a->valuedouble) || b->valuedouble > INT32_MAX - 1 ||
        a->valuedouble != (double)(int)a->valuedouble || b->valuedouble != (double)(int)b->valuedouble) {
        tf_error_set(err, "__metadata__.registers[%d]: live is not [from, to], integers 0 <= from <= to",
                     i);
        return -1;
    }
    g->live_from = (int)a->valuedouble;
    g->live_to = (int)b->valuedouble;
    return 0;
}

static int read_registers(TfModel *m, const cJSON *meta, TfError *err) {
    cJSON *regs = meta_json(meta, "registers", 1, err);
    if (!regs) return -1;
    int i = 0, rc = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, regs) {
        const char *name = obj_str(r, "name"), *kind = obj_str(r, "kind");
        int64_t off, size;
        int k = -1;
        for (int j = 0; kind && j < TF_REG_KIND_COUNT; j++)
            if (strcmp(kind, tf_reg_kind_names[j]) == 0) k = j;
        if (!name || !kind || obj_int(r, "offset", 0, INT32_MAX, 0, 0, &off) < 0 ||
            obj_int(r, "size", 1, INT32_MAX, 0, 0, &size) < 0) {
            tf_error_set(err, "__metadata__.registers[%d] needs a name, a kind, an offset and a size",
                         i);
            rc = -1;
            break;
        }
        if (k < 0) {
            tf_error_set(err, "__metadata__.registers[%d]: unknown kind '%s'", i, kind);
            rc = -1;
            break;
        }
        const cJSON *values = cJSON_GetObjectItemCaseSensitive(r, "values");
        if (k == TF_REG_CATEGORICAL) {
            if (read_labels(m, r, i, name, (int)off, (int)size, err) < 0) {
                rc = -1;
                break;
            }
        } else if (values) {
            tf_error_set(err, "__metadata__.registers[%d] '%.40s': a %s register has no values", i,
                         name, kind);
            rc = -1;
            break;
        } else if (model_add_register(m, name, (TfRegKind)k, (int)off, (int)size, err) < 0) {
            rc = -1;
            break;
        }
        if (read_live(&m->regs[m->n_regs - 1], r, i, err) < 0) {
            rc = -1;
            break;
        }
        i++;
    }
    cJSON_Delete(regs);
    return rc;
}

/* The model being read, and its tensors sorted by name: a header may hold a
 * million tensors, and each layer names several. */
typedef struct Named {
    const char *name;
    int index;
} Named;

typedef struct Reader {
    TfModel *m;
    Named *by_name;
} Reader;

static int cmp_named(const void *a, const void *b) {
    return strcmp(((const Named *)a)->name, ((const Named *)b)->name);
}

static int reader_init(Reader *r, TfModel *m) {
    r->m = m;
    r->by_name = malloc(((size_t)m->n_tensors + 1) * sizeof *r->by_name);
    if (!r->by_name) return -1;
    for (int i = 0; i < m->n_tensors; i++) r->by_name[i] = (Named){m->tensors[i].name, i};
    qsort(r->by_name, (size_t)m->n_tensors, sizeof *r->by_name, cmp_named);
    return 0;
}

static int reader_find(const Reader *r, const char *name) {
    Named key = {name, -1};
    const Named *hit =
        bsearch(&key, r->by_name, (size_t)r->m->n_tensors, sizeof *r->by_name, cmp_named);
    return hit ? hit->index : -1;
}

/* The tensor a layer field names: required or optional (-1 when absent). */
static int layer_tensor(const Reader *r, const cJSON *l, int li, const char *key, int optional,
                        int *out, TfError *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(l, key);
    if (!v && optional) {
        *out = -1;
        return 0;
    }
    if (!cJSON_IsString(v)) {
        tf_error_set(err, "__metadata__.layers[%d].%s is %s", li, key,
                     v ? "not a string" : "missing");
        return -1;
    }
    *out = reader_find(r, v->valuestring);
    if (*out < 0) {
        tf_error_set(err, "__metadata__.layers[%d].%s names tensor '%s', which is not in the file",
                     li, key, v->valuestring);
        return -1;
    }
    return 0;
}

/* The optional pre-norm of an attention or MLP layer, or the tensors of a
 * norm layer (required then): norm_weight, norm_bias, norm_eps. */
static int read_layer_norm(const Reader *r, const cJSON *l, int li, int required, TfLayer *ly,
                           TfError *err) {
    if (layer_tensor(r, l, li, "norm_weight", !required, &ly->norm_weight, err) < 0 ||
        layer_tensor(r, l, li, "norm_bias", !required, &ly->norm_bias, err) < 0)
        return -1;
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(l, "norm_eps");
    if (eps) {
        if (!cJSON_IsNumber(eps) || !isfinite(eps->valuedouble) || !(eps->valuedouble > 0)) {
            tf_error_set(err, "__metadata__.layers[%d].norm_eps is not a positive number", li);
            return -1;
        }
        ly->norm_eps = (float)eps->valuedouble;
    }
    return 0;
}

/* parts (optional; attention and MLP layers only): the ops a scheduled
 * layer holds side by side, [{"name", "op", "line", "heads": [first,
 * count]}, ...] ("units" for an MLP's hidden units), which must cover every
 * head (unit) 0..n-1 in order, no gap, no overlap. On success *parts is a
 * calloc'd array whose strings point into l (model_add_layer copies them),
 * *n its length; no parts: NULL, 0. */
static int read_layer_parts(const cJSON *l, int li, TfLayerKind kind, int n_units,
                            TfLayerPart **parts, int *n, TfError *err) {
    *parts = NULL;
    *n = 0;
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(l, "parts");
    if (!ps) return 0;
    if (kind == TF_LAYER_NORM) {
        tf_error_set(err, "__metadata__.layers[%d].parts: a norm layer has no parts", li);
        return -1;
    }
    int count = cJSON_GetArraySize(ps);
    if (!cJSON_IsArray(ps) || count < 1) {
        tf_error_set(err, "__metadata__.layers[%d].parts is not a non-empty array", li);
        return -1;
    }
    const char *key = kind == TF_LAYER_ATTENTION ? "heads" : "units";
    const char *other = kind == TF_LAYER_ATTENTION ? "units" : "heads";
    const char *what = kind == TF_LAYER_ATTENTION ? "head" : "hidden unit";
    TfLayerPart *out = calloc((size_t)count, sizeof *out);
    if (!out) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    int i = 0, next = 0; /* the first head (unit) no part has covered yet */
    const cJSON *p;
    cJSON_ArrayForEach(p, ps) {
        const char *name = obj_str(p, "name");
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(p, "op");
        const cJSON *range = cJSON_GetObjectItemCaseSensitive(p, key);
        int64_t line, first, cnt;
        if (!cJSON_IsObject(p) || !name || !*name) {
            tf_error_set(err, "__metadata__.layers[%d].parts[%d] needs a name", li, i);
            goto fail;
        }
        if (op && !cJSON_IsString(op)) {
            tf_error_set(err, "__metadata__.layers[%d].parts[%d].op is not a string", li, i);
            goto fail;
        }
        if (obj_int(p, "line", 0, INT32_MAX, 1, 0, &line) < 0) {
            tf_error_set(err, "__metadata__.layers[%d].parts[%d].line is not a line number", li, i);
            goto fail;
        }
        if (cJSON_GetObjectItemCaseSensitive(p, other)) {
            tf_error_set(err, "__metadata__.layers[%d].parts[%d] has %s, but a part of an %s "
                              "layer has %s",
                         li, i, other, tf_layer_kind_names[kind], key);
            goto fail;
        }
        if (!cJSON_IsArray(range) || cJSON_GetArraySize(range) != 2 ||
            json_int(cJSON_GetArrayItem(range, 0), 0, INT32_MAX, &first) < 0 ||
            json_int(cJSON_GetArrayItem(range, 1), 0, INT32_MAX, &cnt) < 0) {
            tf_error_set(err, "__metadata__.layers[%d].parts[%d].%s is not two non-negative "
                              "integers [first, count]",
                         li, i, key);
            goto fail;
        }
        if (cnt < 1) {
            tf_error_set(err, "__metadata__.layers[%d].parts[%d].%s: a part holds at least one %s",
                         li, i, key, what);
            goto fail;
        }
        if (first != next) {
            tf_error_set(err, "__metadata__.layers[%d].parts[%d].%s starts at %s %lld, not %d "
                              "(the parts cover the layer's %ss in order, no gap, no overlap)",
                         li, i, key, what, (long long)first, next, what);
            goto fail;
        }
        if (cnt > n_units - first) {
            tf_error_set(err, "__metadata__.layers[%d].parts[%d].%s [%lld, %lld] runs past the "
                              "layer's %d %ss",
                         li, i, key, (long long)first, (long long)cnt, n_units, what);
            goto fail;
        }
        out[i] = (TfLayerPart){(char *)name, op ? op->valuestring : NULL, (int)line, (int)first,
                               (int)cnt};
        next = (int)(first + cnt);
        i++;
    }
    if (next != n_units) {
        tf_error_set(err, "__metadata__.layers[%d].parts cover %ss 0 to %d of the layer's %d", li,
                     what, next - 1, n_units);
        goto fail;
    }
    *parts = out;
    *n = count;
    return 0;
fail:
    free(out);
    return -1;
}

static int read_layer(const Reader *r, const cJSON *l, int li, TfError *err) {
    TfLayer ly = model_layer_init(TF_LAYER_ATTENTION);
    const char *kind = obj_str(l, "kind");
    const char *name = obj_str(l, "name");
    if (!cJSON_IsObject(l) || !kind || !name) {
        tf_error_set(err, "__metadata__.layers[%d] needs a kind and a name", li);
        return -1;
    }
    ly.name = (char *)name;
    ly.op = (char *)obj_str(l, "op");
    int64_t line, v1, v2, v3;
    if (obj_int(l, "line", 0, INT32_MAX, 1, 0, &line) < 0) {
        tf_error_set(err, "__metadata__.layers[%d].line is not a line number", li);
        return -1;
    }
    ly.line = (int)line;
    if (strcmp(kind, "attention") == 0) {
        ly.kind = TF_LAYER_ATTENTION;
        const cJSON *scale = cJSON_GetObjectItemCaseSensitive(l, "scale");
        const cJSON *causal = cJSON_GetObjectItemCaseSensitive(l, "causal");
        if (obj_int(l, "heads", 1, 65536, 0, 0, &v1) < 0 ||
            obj_int(l, "d_head", 1, INT32_MAX, 0, 0, &v2) < 0 ||
            obj_int(l, "d_vhead", 1, INT32_MAX, 0, 0, &v3) < 0) {
            tf_error_set(err, "__metadata__.layers[%d] needs positive integers heads, d_head, d_vhead",
                         li);
            return -1;
        }
        if (!cJSON_IsNumber(scale) || !isfinite(scale->valuedouble)) {
            tf_error_set(err, "__metadata__.layers[%d].scale is not a finite number", li);
            return -1;
        }
        if (!cJSON_IsBool(causal)) {
            tf_error_set(err, "__metadata__.layers[%d].causal is not true or false", li);
            return -1;
        }
        ly.n_heads = (int)v1;
        ly.d_head = (int)v2;
        ly.d_vhead = (int)v3;
        ly.scale = (float)scale->valuedouble;
        ly.causal = cJSON_IsTrue(causal);
        if (layer_tensor(r, l, li, "query", 0, &ly.query, err) < 0 ||
            layer_tensor(r, l, li, "key", 0, &ly.key, err) < 0 ||
            layer_tensor(r, l, li, "value", 0, &ly.value, err) < 0 ||
            layer_tensor(r, l, li, "output", 1, &ly.output, err) < 0 ||
            layer_tensor(r, l, li, "query_bias", 1, &ly.query_bias, err) < 0 ||
            layer_tensor(r, l, li, "key_bias", 1, &ly.key_bias, err) < 0 ||
            layer_tensor(r, l, li, "value_bias", 1, &ly.value_bias, err) < 0 ||
            layer_tensor(r, l, li, "output_bias", 1, &ly.output_bias, err) < 0 ||
            read_layer_norm(r, l, li, 0, &ly, err) < 0)
            return -1;
    } else if (strcmp(kind, "mlp") == 0) {
        ly.kind = TF_LAYER_MLP;
        const char *act = obj_str(l, "activation");
        int a = -1;
        for (int j = 0; act && j < TF_ACT_COUNT; j++)
            if (strcmp(act, tf_activation_names[j]) == 0) a = j;
        if (a < 0) {
            tf_error_set(err,
                         "__metadata__.layers[%d].activation '%s' is not one of gelu, relu, "
                         "gelu_tanh",
                         li, act ? act : "(missing)");
            return -1;
        }
        if (obj_int(l, "d_hidden", 1, INT32_MAX, 0, 0, &v1) < 0) {
            tf_error_set(err, "__metadata__.layers[%d].d_hidden is not a positive integer", li);
            return -1;
        }
        ly.act = (TfActivation)a;
        ly.d_hidden = (int)v1;
        if (layer_tensor(r, l, li, "fc1_weight", 0, &ly.fc1_weight, err) < 0 ||
            layer_tensor(r, l, li, "fc1_bias", 1, &ly.fc1_bias, err) < 0 ||
            layer_tensor(r, l, li, "fc2_weight", 0, &ly.fc2_weight, err) < 0 ||
            layer_tensor(r, l, li, "fc2_bias", 1, &ly.fc2_bias, err) < 0 ||
            read_layer_norm(r, l, li, 0, &ly, err) < 0)
            return -1;
    } else if (strcmp(kind, "norm") == 0) {
        ly.kind = TF_LAYER_NORM;
        if (read_layer_norm(r, l, li, 1, &ly, err) < 0) return -1;
    } else {
        tf_error_set(err, "__metadata__.layers[%d]: unknown kind '%s'", li, kind);
        return -1;
    }
    if (read_layer_parts(l, li, ly.kind, ly.kind == TF_LAYER_ATTENTION ? ly.n_heads : ly.d_hidden,
                         &ly.parts, &ly.n_parts, err) < 0)
        return -1;
    int rc = model_add_layer(r->m, &ly, err);
    free(ly.parts); /* the strings were l's; model_add_layer copied them */
    return rc < 0 ? -1 : 0;
}

/* output_kind ("next_token", the default, or "classify"); for a classifier
 * also classes (a JSON array of names) and classify_at ("first" or "last"). */
static int read_output_kind(TfModel *m, const cJSON *meta, TfError *err) {
    const char *kind = meta_string(meta, "output_kind", 1, err);
    if (!kind) {
        if (cJSON_GetObjectItemCaseSensitive(meta, "output_kind")) return -1;
        return 0;
    }
    if (strcmp(kind, "next_token") == 0) return 0;
    if (strcmp(kind, "classify") != 0) {
        tf_error_set(err, "__metadata__.output_kind '%.40s' is not next_token or classify", kind);
        return -1;
    }
    m->output_kind = TF_OUTPUT_CLASSIFY;
    const char *at = meta_string(meta, "classify_at", 0, err);
    if (!at) return -1;
    if (strcmp(at, "first") != 0 && strcmp(at, "last") != 0) {
        tf_error_set(err, "__metadata__.classify_at '%.40s' is not first or last", at);
        return -1;
    }
    m->classify_at_last = strcmp(at, "last") == 0;
    cJSON *cls = meta_json(meta, "classes", 1, err);
    if (!cls) return -1;
    int n = cJSON_GetArraySize(cls);
    if (n < 1 || n > 65536) {
        tf_error_set(err, "__metadata__.classes has %d entries, not 1 to 65536", n);
        cJSON_Delete(cls);
        return -1;
    }
    m->class_names = calloc((size_t)n, sizeof *m->class_names);
    if (!m->class_names) {
        cJSON_Delete(cls);
        tf_error_set(err, "out of memory");
        return -1;
    }
    m->n_classes = n;
    for (int i = 0; i < n; i++) {
        const cJSON *c = cJSON_GetArrayItem(cls, i);
        if (!cJSON_IsString(c) || !*c->valuestring) {
            tf_error_set(err, "__metadata__.classes[%d] is not a non-empty string", i);
            cJSON_Delete(cls);
            return -1;
        }
        if (!(m->class_names[i] = dup_str(c->valuestring))) {
            tf_error_set(err, "out of memory");
            cJSON_Delete(cls);
            return -1;
        }
    }
    cJSON_Delete(cls);
    return 0;
}

/* An optional metadata key naming one token of the vocabulary: its id, or
 * -1 when the key is absent. Returns -2 (err set) when malformed. */
static int meta_token(const TfModel *m, const cJSON *meta, const char *key, TfError *err) {
    const char *s = meta_string(meta, key, 1, err);
    if (!s) return cJSON_GetObjectItemCaseSensitive(meta, key) ? -2 : -1;
    int id = model_token_id(m, s, strlen(s));
    if (id >= 0) return id;
    tf_error_set(err, "__metadata__.%s '%.40s' is not in the vocabulary", key, s);
    return -2;
}

/* output_mode ("next_token", the default, or "every_position"), bos and
 * stop_token (optional, one token each). */
static int read_output_mode(TfModel *m, const cJSON *meta, TfError *err) {
    const char *mode = meta_string(meta, "output_mode", 1, err);
    if (!mode && cJSON_GetObjectItemCaseSensitive(meta, "output_mode")) return -1;
    if (mode) {
        if (strcmp(mode, "every_position") == 0) {
            m->every_position = 1;
        } else if (strcmp(mode, "next_token") != 0) {
            tf_error_set(err, "__metadata__.output_mode '%.40s' is not next_token or every_position",
                         mode);
            return -1;
        }
    }
    if ((m->bos = meta_token(m, meta, "bos", err)) == -2 ||
        (m->stop_token = meta_token(m, meta, "stop_token", err)) == -2)
        return -1;
    return 0;
}

/* An optional metadata key whose string is a JSON object, kept as text. */
static int read_object_text(const cJSON *meta, const char *key, char **out, TfError *err) {
    if (!cJSON_GetObjectItemCaseSensitive(meta, key)) return 0;
    const char *s = meta_string(meta, key, 0, err);
    if (!s) return -1;
    cJSON *j = meta_json(meta, key, 0, err);
    if (!j) return -1;
    int ok = cJSON_IsObject(j);
    cJSON_Delete(j);
    if (!ok) {
        tf_error_set(err, "__metadata__.%s is not a JSON object", key);
        return -1;
    }
    if (!(*out = dup_str(s))) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    return 0;
}

/* A check's "bound" (optional; -1 when absent): a number in [0, 0.5).
 * 0, or -1 with err set. */
static int read_check_bound(const cJSON *c, int i, double *bound, TfError *err) {
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(c, "bound");
    *bound = -1;
    if (!b) return 0;
    if (!cJSON_IsNumber(b) || !(b->valuedouble >= 0 && b->valuedouble < 0.5)) {
        tf_error_set(err, "__metadata__.checks[%d]: bound is not a number in [0, 0.5)", i);
        return -1;
    }
    *bound = b->valuedouble;
    return 0;
}

/* checks (optional): a JSON array of {"register", "layer", "line", "op",
 * "bound"}; read after the registers and layers, which it names. */
static int read_checks(TfModel *m, const cJSON *meta, TfError *err) {
    if (!cJSON_GetObjectItemCaseSensitive(meta, "checks")) return 0;
    cJSON *cs = meta_json(meta, "checks", 1, err);
    if (!cs) return -1;
    int i = 0, rc = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cs) {
        const char *reg = obj_str(c, "register"), *op = obj_str(c, "op");
        int64_t layer, line;
        if (!cJSON_IsObject(c) || !reg || !op || !*op ||
            obj_int(c, "layer", 0, INT32_MAX, 0, 0, &layer) < 0 ||
            obj_int(c, "line", 0, INT32_MAX, 0, 0, &line) < 0) {
            tf_error_set(err, "__metadata__.checks[%d] needs a register, a layer, a line and an op",
                         i);
            rc = -1;
            break;
        }
        int r = model_find_register(m, reg);
        if (r < 0 || m->regs[r].kind != TF_REG_CATEGORICAL) {
            tf_error_set(err, "__metadata__.checks[%d]: register '%.40s' is %s", i, reg,
                         r < 0 ? "not declared" : "not categorical");
            rc = -1;
            break;
        }
        if (layer >= m->n_layers) {
            tf_error_set(err, "__metadata__.checks[%d]: layer %lld does not exist (%d layers)", i,
                         (long long)layer, m->n_layers);
            rc = -1;
            break;
        }
        double bound;
        if (read_check_bound(c, i, &bound, err) < 0 ||
            model_add_check(m, r, (int)layer, (int)line, op, bound, err) < 0) {
            rc = -1;
            break;
        }
        i++;
    }
    cJSON_Delete(cs);
    return rc;
}

/* output_error_bound (optional, models that print a number): a decimal
 * number >= 0, finite as a double. */
static int read_error_bound(TfModel *m, const cJSON *meta, TfError *err) {
    const char *s = meta_string(meta, "output_error_bound", 1, err);
    if (!s) return cJSON_GetObjectItemCaseSensitive(meta, "output_error_bound") ? -1 : 0;
    if (!model_numeric_output(m)) {
        tf_error_set(err, "__metadata__.output_error_bound is only for a model whose output is a "
                          "number (a scalar register read at every position, no unembedding)");
        return -1;
    }
    char *end;
    double v = strtod(s, &end);
    /* A plain decimal (as tools/tfw_torch.py reads it): no spaces, no hex;
     * one that underflows reads as 0 or a subnormal, as Python's float(). */
    if (end == s || *end || !isfinite(v) || v < 0 || strpbrk(s, "xXpP") ||
        !(isdigit((unsigned char)s[0]) || s[0] == '+' || s[0] == '-' || s[0] == '.')) {
        tf_error_set(err, "__metadata__.output_error_bound '%.40s' is not a number >= 0", s);
        return -1;
    }
    m->output_error_bound = v;
    return 0;
}

static int read_metadata(TfModel *m, const cJSON *meta, TfError *err) {
    const cJSON *v;
    cJSON_ArrayForEach(v, meta) {
        if (!cJSON_IsString(v)) { /* safetensors: a map of strings to strings */
            tf_error_set(err, "__metadata__.%.60s is not a string", v->string);
            return -1;
        }
    }
    const char *fmt = meta_string(meta, "format", 1, err);
    if (!fmt || strcmp(fmt, TF_FORMAT_NAME) != 0) {
        tf_error_set(err, "not a tfw file: __metadata__.format is %s%.40s%s",
                     fmt ? "'" : "", fmt ? fmt : "missing", fmt ? "'" : "");
        return -1;
    }
    int version;
    if (meta_int(meta, "format_version", 0, 1000000, &version, err) < 0) return -1;
    if (version != TF_FORMAT_VERSION) {
        tf_error_set(err, "format_version %d is not supported (this build reads version %d)",
                     version, TF_FORMAT_VERSION);
        return -1;
    }
    if (meta_int(meta, "d_model", 1, 1 << 24, &m->d_model, err) < 0 ||
        meta_int(meta, "period", 1, 1 << 24, &m->period, err) < 0 ||
        meta_int(meta, "generate", 0, 1 << 24, &m->generate, err) < 0 ||
        read_vocab(m, meta, err) < 0 || read_registers(m, meta, err) < 0)
        return -1;

    cJSON *layers = meta_json(meta, "layers", 1, err);
    if (!layers) return -1;
    Reader r;
    if (reader_init(&r, m) < 0) {
        cJSON_Delete(layers);
        tf_error_set(err, "out of memory");
        return -1;
    }
    int li = 0;
    const cJSON *l;
    cJSON_ArrayForEach(l, layers) {
        if (read_layer(&r, l, li++, err) < 0) {
            free(r.by_name);
            cJSON_Delete(layers);
            return -1;
        }
    }
    free(r.by_name);
    cJSON_Delete(layers);

    const char *out = meta_string(meta, "output", 1, err);
    if (out) {
        m->output_reg = model_find_register(m, out);
        if (m->output_reg < 0) {
            tf_error_set(err, "__metadata__.output names register '%.40s', which is not declared",
                         out);
            return -1;
        }
    }
    if (read_output_kind(m, meta, err) < 0 || read_output_mode(m, meta, err) < 0 ||
        read_error_bound(m, meta, err) < 0 || read_checks(m, meta, err) < 0)
        return -1;
    const char *src = meta_string(meta, "source", 1, err);
    const char *src_name = meta_string(meta, "source_name", 1, err);
    if ((src && !(m->source = dup_str(src))) || (src_name && !(m->source_name = dup_str(src_name)))) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    if (read_object_text(meta, "made_by", &m->made_by, err) < 0 ||
        read_object_text(meta, "learned", &m->learned, err) < 0)
        return -1;
    return 0;
}

/* The tensors of a safetensors buffer (F32 only), every check of the
 * header and the data made, into a new model holding nothing else; *root
 * receives the parsed header (the caller deletes it). NULL with err set. */
static TfModel *read_tensors(const unsigned char *buf, size_t len, cJSON **root_out,
                             TfError *err) {
    *root_out = NULL;
    if (!host_is_little_endian()) {
        tf_error_set(err, "this build reads weight files on little-endian machines only");
        return NULL;
    }
    if (len < 8) {
        tf_error_set(err, "file of %zu bytes is too short for a safetensors header", len);
        return NULL;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen == 0) {
        tf_error_set(err, "header length is 0");
        return NULL;
    }
    if (hlen > TFW_MAX_HEADER) {
        tf_error_set(err, "header length %llu exceeds the limit of %u bytes",
                     (unsigned long long)hlen, TFW_MAX_HEADER);
        return NULL;
    }
    if (hlen > len - 8) {
        tf_error_set(err, "header length %llu exceeds the file size (%zu bytes)",
                     (unsigned long long)hlen, len);
        return NULL;
    }
    cJSON *root = tf_json_parse((const char *)buf + 8, (size_t)hlen, "header", err);
    if (!root) return NULL;
    TfModel *m = NULL;
    Entry *es = NULL;
    if (!cJSON_IsObject(root)) {
        tf_error_set(err, "header is not a JSON object");
        goto fail;
    }
    // tfrun --dump's activations hold -inf scores: name the file's kind
    // before its tensors are blamed.
    const cJSON *meta0 = cJSON_GetObjectItemCaseSensitive(root, META);
    const cJSON *fmt = cJSON_IsObject(meta0) ? cJSON_GetObjectItemCaseSensitive(meta0, "format") : NULL;
    if (cJSON_IsString(fmt) && strcmp(fmt->valuestring, "tfw-activations") == 0) {
        tf_error_set(err, "an activations file (tfrun --dump), not a weight file: read it as "
                          "safetensors (docs/python.md)");
        goto fail;
    }
    int n = 0;
    const cJSON *j;
    cJSON_ArrayForEach(j, root) n += strcmp(j->string, META) != 0;
    es = calloc((size_t)(n > 0 ? n : 1), sizeof *es);
    if (!es) {
        tf_error_set(err, "out of memory");
        goto fail;
    }
    int k = 0;
    cJSON_ArrayForEach(j, root) {
        if (strcmp(j->string, META) == 0) continue;
        if (read_entry(j, &es[k++], err) < 0) goto fail;
    }
    const unsigned char *data = buf + 8 + hlen;
    if (check_tiling(es, n, len - 8 - hlen, err) < 0) goto fail;

    m = model_new();
    if (!m) {
        tf_error_set(err, "out of memory");
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        /* no two tensors share a name (tf_json_parse refuses repeated keys) */
        int t = model_add_new_tensor(m, es[i].name, es[i].ndim, es[i].shape, err);
        if (t < 0) goto fail;
        memcpy(m->tensors[t].data, data + es[i].begin, es[i].nelem * sizeof(float));
        if (check_finite(&m->tensors[t], err) < 0) goto fail;
    }
    free(es);
    *root_out = root;
    return m;
fail:
    free(es);
    model_free(m);
    cJSON_Delete(root);
    return NULL;
}

TfModel *tfw_read_tensors(const char *path, TfError *err) {
    size_t len = 0;
    char *buf = tf_file_read_max(path, TFW_MAX_FILE, &len, err);
    if (!buf) return NULL;
    cJSON *root = NULL;
    TfModel *m = read_tensors((const unsigned char *)buf, len, &root, err);
    free(buf);
    cJSON_Delete(root);
    if (!m) tf_error_prefix(err, path);
    return m;
}

TfModel *tfw_read_buffer(const unsigned char *buf, size_t len, TfError *err) {
    cJSON *root = NULL;
    TfModel *m = read_tensors(buf, len, &root, err);
    if (!m) return NULL;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, META);
    if (!cJSON_IsObject(meta)) {
        tf_error_set(err, "not a tfw file: no __metadata__ object");
        goto fail;
    }
    // Whether the model prints numbers depends on its unembedding
    // (model_numeric_output), which the metadata's reader asks.
    m->unembed = model_find_tensor(m, TF_TENSOR_UNEMBED);
    if (read_metadata(m, meta, err) < 0) goto fail;
    m->tok_embed = model_find_tensor(m, TF_TENSOR_TOKEN_EMBED);
    m->pos_embed = model_find_tensor(m, TF_TENSOR_POS_EMBED);
    // A model that prints a number needs no unembedding.
    const char *missing = m->tok_embed < 0                             ? TF_TENSOR_TOKEN_EMBED
                          : m->pos_embed < 0                           ? TF_TENSOR_POS_EMBED
                          : m->unembed < 0 && !model_numeric_output(m) ? TF_TENSOR_UNEMBED
                                                                       : NULL;
    if (missing) {
        tf_error_set(err, "tensor '%s' is missing", missing);
        goto fail;
    }
    m->unembed_bias = model_find_tensor(m, TF_TENSOR_UNEMBED_BIAS);
    m->max_len = (int)m->tensors[m->pos_embed].shape[0];
    if (model_validate(m, err) < 0) goto fail;
    cJSON_Delete(root);
    return m;
fail:
    model_free(m);
    cJSON_Delete(root);
    return NULL;
}

TfModel *tfw_read(const char *path, TfError *err) {
    size_t len = 0;
    char *buf = tf_file_read_max(path, TFW_MAX_FILE, &len, err);
    if (!buf) return NULL;
    TfModel *m = tfw_read_buffer((const unsigned char *)buf, len, err);
    free(buf);
    if (!m) tf_error_prefix(err, path);
    return m;
}

/* ---- writing ------------------------------------------------------------- */

/* A layer's parts as the reader wants them (read_layer_parts); NULL when
 * out of memory. */
static cJSON *parts_json(const TfLayer *l) {
    const char *key = l->kind == TF_LAYER_ATTENTION ? "heads" : "units";
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < l->n_parts; i++) {
        const TfLayerPart *p = &l->parts[i];
        cJSON *o = cJSON_CreateObject();
        if (o && !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            o = NULL;
        }
        // Once in the array, o is deleted with it.
        int ok = o && cJSON_AddStringToObject(o, "name", p->name) &&
                 (!p->op || cJSON_AddStringToObject(o, "op", p->op)) &&
                 (p->line <= 0 || cJSON_AddNumberToObject(o, "line", p->line));
        cJSON *range = ok ? cJSON_CreateArray() : NULL;
        ok = range && cJSON_AddItemToObject(o, key, range);
        if (!ok) cJSON_Delete(range);
        ok = ok && cJSON_AddItemToArray(range, cJSON_CreateNumber(p->first)) &&
             cJSON_AddItemToArray(range, cJSON_CreateNumber(p->count));
        if (!ok) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

static cJSON *layer_json(const TfModel *m, const TfLayer *l) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    const TfTensor *t = m->tensors;
    cJSON_AddStringToObject(o, "kind", tf_layer_kind_names[l->kind]);
    cJSON_AddStringToObject(o, "name", l->name);
    if (l->op) cJSON_AddStringToObject(o, "op", l->op);
    if (l->line > 0) cJSON_AddNumberToObject(o, "line", l->line);
    if (l->n_parts > 0) {
        cJSON *parts = parts_json(l);
        if (!parts || !cJSON_AddItemToObject(o, "parts", parts)) {
            cJSON_Delete(parts);
            cJSON_Delete(o);
            return NULL;
        }
    }
    if (l->norm_weight >= 0) {
        cJSON_AddStringToObject(o, "norm_weight", t[l->norm_weight].name);
        cJSON_AddStringToObject(o, "norm_bias", t[l->norm_bias].name);
        cJSON_AddNumberToObject(o, "norm_eps", (double)l->norm_eps);
    }
    if (l->kind == TF_LAYER_NORM) return o;
    if (l->kind == TF_LAYER_ATTENTION) {
        cJSON_AddNumberToObject(o, "heads", l->n_heads);
        cJSON_AddNumberToObject(o, "d_head", l->d_head);
        cJSON_AddNumberToObject(o, "d_vhead", l->d_vhead);
        cJSON_AddNumberToObject(o, "scale", (double)l->scale);
        cJSON_AddBoolToObject(o, "causal", l->causal);
        cJSON_AddStringToObject(o, "query", t[l->query].name);
        cJSON_AddStringToObject(o, "key", t[l->key].name);
        cJSON_AddStringToObject(o, "value", t[l->value].name);
        if (l->output >= 0) cJSON_AddStringToObject(o, "output", t[l->output].name);
        if (l->query_bias >= 0) cJSON_AddStringToObject(o, "query_bias", t[l->query_bias].name);
        if (l->key_bias >= 0) cJSON_AddStringToObject(o, "key_bias", t[l->key_bias].name);
        if (l->value_bias >= 0) cJSON_AddStringToObject(o, "value_bias", t[l->value_bias].name);
        if (l->output_bias >= 0)
            cJSON_AddStringToObject(o, "output_bias", t[l->output_bias].name);
    } else {
        cJSON_AddNumberToObject(o, "d_hidden", l->d_hidden);
        cJSON_AddStringToObject(o, "activation", tf_activation_names[l->act]);
        cJSON_AddStringToObject(o, "fc1_weight", t[l->fc1_weight].name);
        if (l->fc1_bias >= 0) cJSON_AddStringToObject(o, "fc1_bias", t[l->fc1_bias].name);
        cJSON_AddStringToObject(o, "fc2_weight", t[l->fc2_weight].name);
        if (l->fc2_bias >= 0) cJSON_AddStringToObject(o, "fc2_bias", t[l->fc2_bias].name);
    }
    return o;
}

/* Adds `value`, serialized, as a metadata string; consumes value. */
static int add_json_string(cJSON *meta, const char *key, cJSON *value) {
    if (!value) return -1;
    char *s = cJSON_PrintUnformatted(value);
    cJSON_Delete(value);
    if (!s) return -1;
    int ok = cJSON_AddStringToObject(meta, key, s) != NULL;
    cJSON_free(s);
    return ok ? 0 : -1;
}

static int add_int_string(cJSON *meta, const char *key, long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", v);
    return cJSON_AddStringToObject(meta, key, buf) ? 0 : -1;
}

/* The checks as a JSON array (an empty one when there are none). */
static cJSON *checks_json(const TfModel *m) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < m->n_checks; i++) {
        const TfCheck *c = &m->checks[i];
        cJSON *o = cJSON_CreateObject();
        if (o && !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            o = NULL;
        }
        // Once in the array, o is deleted with it.
        if (!o || !cJSON_AddStringToObject(o, "register", m->regs[c->reg].name) ||
            !cJSON_AddNumberToObject(o, "layer", c->layer) ||
            !cJSON_AddNumberToObject(o, "line", c->line) ||
            !cJSON_AddStringToObject(o, "op", c->op) ||
            (c->bound >= 0 && !cJSON_AddNumberToObject(o, "bound", c->bound))) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* The shortest decimal text that reads back as v. */
static void shortest_double(char *buf, size_t n, double v) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static cJSON *build_metadata(const TfModel *m) {
    cJSON *meta = cJSON_CreateObject();
    cJSON *vocab = cJSON_CreateArray(), *regs = cJSON_CreateArray(), *layers = cJSON_CreateArray();
    int ok = meta && vocab && regs && layers;
    for (int i = 0; ok && i < m->n_vocab; i++) {
        char tok[2] = {m->vocab[i], '\0'};
        ok = cJSON_AddItemToArray(vocab, cJSON_CreateString(m->token_names ? m->token_names[i] : tok));
    }
    for (int i = 0; ok && i < m->n_regs; i++) {
        cJSON *r = cJSON_CreateObject();
        ok = r && cJSON_AddItemToArray(regs, r);
        if (!ok) {
            cJSON_Delete(r);
            break;
        }
        cJSON_AddStringToObject(r, "name", m->regs[i].name);
        cJSON_AddStringToObject(r, "kind", tf_reg_kind_names[m->regs[i].kind]);
        cJSON_AddNumberToObject(r, "offset", m->regs[i].offset);
        cJSON_AddNumberToObject(r, "size", m->regs[i].size);
        if (model_reg_reused(m, i)) {
            int live[2] = {m->regs[i].live_from,
                           m->regs[i].live_to < m->n_layers ? m->regs[i].live_to : m->n_layers};
            cJSON *l = cJSON_CreateIntArray(live, 2);
            ok = l && cJSON_AddItemToObject(r, "live", l);
            if (!ok) {
                cJSON_Delete(l);
                break;
            }
        }
        if (m->regs[i].kind == TF_REG_CATEGORICAL) {
            cJSON *vals = cJSON_CreateArray();
            ok = vals && cJSON_AddItemToObject(r, "values", vals);
            if (!ok) {
                cJSON_Delete(vals);
                break;
            }
            for (int v = 0; ok && v < m->regs[i].size; v++)
                ok = cJSON_AddItemToArray(vals, cJSON_CreateString(m->regs[i].values[v]));
        }
    }
    for (int i = 0; ok && i < m->n_layers; i++) {
        cJSON *l = layer_json(m, &m->layers[i]);
        ok = l && cJSON_AddItemToArray(layers, l);
        if (!ok) cJSON_Delete(l);
    }
    if (!ok) {
        cJSON_Delete(meta), cJSON_Delete(vocab), cJSON_Delete(regs), cJSON_Delete(layers);
        return NULL;
    }
    ok = cJSON_AddStringToObject(meta, "format", TF_FORMAT_NAME) &&
         add_int_string(meta, "format_version", TF_FORMAT_VERSION) == 0 &&
         add_int_string(meta, "d_model", m->d_model) == 0 &&
         add_int_string(meta, "period", m->period) == 0 &&
         add_int_string(meta, "generate", m->generate) == 0;
    // add_json_string consumes its value whatever happens.
    ok = add_json_string(meta, "vocab", vocab) == 0 && ok;
    if (ok && m->n_output_only > 0)
        ok = add_int_string(meta, "output_only_tokens", m->n_output_only) == 0;
    ok = add_json_string(meta, "registers", regs) == 0 && ok;
    ok = add_json_string(meta, "layers", layers) == 0 && ok;
    if (ok && m->output_reg >= 0)
        ok = cJSON_AddStringToObject(meta, "output", m->regs[m->output_reg].name) != NULL;
    if (ok && m->output_kind == TF_OUTPUT_CLASSIFY) {
        cJSON *cls = cJSON_CreateArray();
        ok = cls != NULL;
        for (int i = 0; ok && i < m->n_classes; i++)
            ok = cJSON_AddItemToArray(cls, cJSON_CreateString(m->class_names[i]));
        if (!ok) cJSON_Delete(cls);
        ok = ok && cJSON_AddStringToObject(meta, "output_kind", "classify") &&
             cJSON_AddStringToObject(meta, "classify_at", m->classify_at_last ? "last" : "first") &&
             add_json_string(meta, "classes", cls) == 0;
    }
    if (ok && m->every_position)
        ok = cJSON_AddStringToObject(meta, "output_mode", "every_position") != NULL;
    if (ok && m->bos >= 0) {
        char tok[2] = {m->vocab[m->bos], '\0'};
        ok = cJSON_AddStringToObject(meta, "bos", m->token_names ? m->token_names[m->bos] : tok) != NULL;
    }
    if (ok && m->stop_token >= 0) {
        char tok[2] = {m->vocab[m->stop_token], '\0'};
        const char *name = m->token_names ? m->token_names[m->stop_token] : tok;
        ok = cJSON_AddStringToObject(meta, "stop_token", name) != NULL;
    }
    if (ok && model_numeric_output(m)) {
        char bound[32];
        shortest_double(bound, sizeof bound, m->output_error_bound);
        ok = cJSON_AddStringToObject(meta, "output_error_bound", bound) != NULL;
    }
    if (ok && m->n_checks > 0) ok = add_json_string(meta, "checks", checks_json(m)) == 0;
    if (ok && m->source) ok = cJSON_AddStringToObject(meta, "source", m->source) != NULL;
    if (ok && m->source_name)
        ok = cJSON_AddStringToObject(meta, "source_name", m->source_name) != NULL;
    if (ok && m->made_by) ok = cJSON_AddStringToObject(meta, "made_by", m->made_by) != NULL;
    if (ok && m->learned) ok = cJSON_AddStringToObject(meta, "learned", m->learned) != NULL;
    if (!ok) {
        cJSON_Delete(meta);
        return NULL;
    }
    return meta;
}

/* A safetensors file of the F32 tensors ts[0..n-1] with the metadata object
 * meta (consumed) into a malloc'd buffer. */
static int serialize(cJSON *meta, const TfTensor *ts, int n, unsigned char **out, size_t *len,
                     TfError *err) {
    *out = NULL;
    *len = 0;
    cJSON *root = cJSON_CreateObject();
    int ok = root && meta && cJSON_AddItemToObject(root, META, meta);
    if (!ok) cJSON_Delete(meta);
    uint64_t offset = 0;
    for (int i = 0; ok && i < n; i++) {
        const TfTensor *t = &ts[i];
        cJSON *e = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *offs = cJSON_CreateArray();
        ok = e && shape && offs;
        for (int d = 0; ok && d < t->ndim; d++)
            ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        ok = ok && cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset)) &&
             cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + 4 * t->nelem)));
        if (ok) {
            cJSON_AddStringToObject(e, "dtype", "F32");
            cJSON_AddItemToObject(e, "shape", shape);
            cJSON_AddItemToObject(e, "data_offsets", offs);
            ok = cJSON_AddItemToObject(root, t->name, e);
        } else {
            cJSON_Delete(e), cJSON_Delete(shape), cJSON_Delete(offs);
        }
        offset += 4 * t->nelem;
    }
    char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!json) {
        tf_error_set(err, "out of memory while writing the header");
        return -1;
    }
    size_t hlen = strlen(json);
    size_t padded = hlen + (8 - (8 + hlen) % 8) % 8;
    if (padded > TFW_MAX_HEADER) {
        cJSON_free(json);
        tf_error_set(err, "the header would be %zu bytes, over the readers' limit of %u bytes "
                          "(names, labels or layers too many or too long)",
                     padded, TFW_MAX_HEADER);
        return -1;
    }
    size_t total = 8 + padded + (size_t)offset;
    unsigned char *buf = malloc(total);
    if (!buf) {
        cJSON_free(json);
        tf_error_set(err, "out of memory for a %zu-byte file", total);
        return -1;
    }
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, json, hlen);
    memset(buf + 8 + hlen, ' ', padded - hlen);
    cJSON_free(json);
    unsigned char *p = buf + 8 + padded;
    for (int i = 0; i < n; i++) {
        size_t bytes = ts[i].nelem * sizeof(float);
        memcpy(p, ts[i].data, bytes);
        p += bytes;
    }
    *out = buf;
    *len = total;
    return 0;
}

/* The model with its first n_tensors tensors, checked as the reader checks. */
static int write_buffer(const TfModel *m, int n_tensors, unsigned char **out, size_t *len,
                        TfError *err) {
    *out = NULL;
    *len = 0;
    if (model_validate(m, err) < 0) return -1;
    for (int i = 0; !m->token_names && i < m->n_vocab; i++) {
        unsigned char c = (unsigned char)m->vocab[i];
        if (c == '\0' || c >= 0x80) {
            tf_error_set(err, "the vocabulary holds the byte 0x%02x, which the file cannot store "
                              "(only ASCII characters other than NUL)",
                         c);
            return -1;
        }
    }
    for (int i = 0; i < n_tensors; i++)
        if (check_finite(&m->tensors[i], err) < 0) return -1;
    if (m->source && !tf_utf8_valid((const unsigned char *)m->source, strlen(m->source))) {
        tf_error_set(err, "the program is not valid UTF-8 text, which the file cannot store");
        return -1;
    }
    if (m->source_name &&
        !tf_utf8_valid((const unsigned char *)m->source_name, strlen(m->source_name))) {
        tf_error_set(err, "the program's file name is not valid UTF-8, which the file cannot store");
        return -1;
    }
    unsigned char *buf;
    size_t total;
    if (serialize(build_metadata(m), m->tensors, n_tensors, &buf, &total, err) < 0) return -1;
    /* Never write a file the reader refuses: read it back. */
    TfError back_err;
    TfModel *back = tfw_read_buffer(buf, total, &back_err);
    if (!back) {
        free(buf);
        tf_error_set(err, "the file would be refused by the reader: %s", back_err.msg);
        return -1;
    }
    model_free(back);
    *out = buf;
    *len = total;
    return 0;
}

int tfw_write_buffer(const TfModel *m, unsigned char **out, size_t *len, TfError *err) {
    return write_buffer(m, m->n_tensors, out, len, err);
}

int tfw_write(const TfModel *m, const char *path, TfError *err) {
    return tfw_write_tensors(m, m->n_tensors, path, err);
}

int tfw_write_tensors(const TfModel *m, int n_tensors, const char *path, TfError *err) {
    unsigned char *buf;
    size_t len;
    if (n_tensors < 0 || n_tensors > m->n_tensors) n_tensors = m->n_tensors;
    if (write_buffer(m, n_tensors, &buf, &len, err) < 0) {
        tf_error_prefix(err, path);
        return -1;
    }
    int rc = outfile_write(path, buf, len, err);
    free(buf);
    return rc;
}

int tfw_write_safetensors(const char *path, const TfTensor *ts, int n, const char *const *meta,
                          int n_meta, TfError *err) {
    cJSON *mj = cJSON_CreateObject();
    for (int i = 0; mj && i < n_meta; i++)
        if (!cJSON_AddStringToObject(mj, meta[2 * i], meta[2 * i + 1])) {
            cJSON_Delete(mj);
            mj = NULL;
        }
    unsigned char *buf;
    size_t len;
    if (serialize(mj, ts, n, &buf, &len, err) < 0) {
        tf_error_prefix(err, path);
        return -1;
    }
    int rc = outfile_write(path, buf, len, err);
    free(buf);
    return rc;
}

/* ---- how the file was made ------------------------------------------------ */

void tfw_float_text(float f, char buf[static 32]) {
    char text[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(text, sizeof text, "%.*g", prec, (double)f);
        if (strtof(text, NULL) == f) break;
    }
    memcpy(buf, text, sizeof text);
}

int tfw_learned_settings(const TfModel *m, TfLearnedSettings *s, TfError *err) {
    if (!m->learned) {
        tf_error_set(err, "no learned-model settings (__metadata__.learned, which tfc writes "
                          "for a program with a model block)");
        return -1;
    }
    cJSON *j = cJSON_Parse(m->learned);
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(j, "dropout");
    const cJSON *pos = cJSON_GetObjectItemCaseSensitive(j, "positions");
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(j, "seed");
    const char *bad = !cJSON_IsNumber(drop) || !(drop->valuedouble >= 0 && drop->valuedouble < 1)
                          ? "dropout"
                      : !cJSON_IsString(pos) ? "positions"
                      : !cJSON_IsNumber(seed) || !(seed->valuedouble >= 0 && seed->valuedouble < 9e15) ||
                              floor(seed->valuedouble) != seed->valuedouble
                          ? "seed"
                          : NULL;
    if (bad) {
        tf_error_set(err, "__metadata__.learned.%s is missing or out of range", bad);
        cJSON_Delete(j);
        return -1;
    }
    s->dropout = (float)drop->valuedouble;
    s->learned_positions = strcmp(pos->valuestring, "learned") == 0;
    s->seed = (uint64_t)seed->valuedouble;
    cJSON_Delete(j);
    return 0;
}
