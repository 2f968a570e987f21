/* intervene.c: what --ablate and --patch-from name, and the values they
 * put in (intervene.h). The engine applies the edits (infer.c, apply_edits);
 * this file turns SPEC items into edits and records means and patches
 * from an unedited run through the engine's hooks. */
#include "intervene.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"

const char *const tf_edit_mode_names[] = {"zero", "mean", "patch"};
_Static_assert(sizeof tf_edit_mode_names / sizeof *tf_edit_mode_names == TF_EDIT_MODE_COUNT,
               "names");

void intervention_free(TfIntervention *iv) {
    if (!iv) return;
    for (int i = 0; i < iv->n; i++) {
        free(iv->edits[i].label);
        free(iv->edits[i].values);
    }
    free(iv->edits);
    free(iv);
}

int intervention_has(const TfIntervention *iv, TfEditMode mode) {
    for (int i = 0; iv && i < iv->n; i++)
        if (iv->edits[i].mode == mode) return 1;
    return 0;
}

static int add_edit(TfIntervention *iv, TfEditMode mode, TfEditSite site, int layer, int lo,
                    int hi, int width, const char *label, TfError *err) {
    TfEdit *e = realloc(iv->edits, (size_t)(iv->n + 1) * sizeof *e);
    if (!e) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    iv->edits = e;
    e = &iv->edits[iv->n];
    *e = (TfEdit){mode, site, layer, lo, hi, width, malloc(strlen(label) + 1), NULL, 0};
    if (!e->label) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    strcpy(e->label, label);
    iv->n++;
    return 0;
}

/* Heads [first, first + count) of attention layer l. */
static int add_heads(TfIntervention *iv, TfEditMode mode, int l, int first, int count,
                     const char *item, TfError *err) {
    const TfLayer *ly = &iv->m->layers[l];
    if (ly->kind != TF_LAYER_ATTENTION) {
        tf_error_set(err, "--ablate: '%s': layer %d (%s) is not an attention layer", item, l,
                     ly->name);
        return -1;
    }
    if (first < 0 || count < 1 || first + count > ly->n_heads) {
        tf_error_set(err, "--ablate: '%s': layer %d (%s) has heads 0 to %d", item, l, ly->name,
                     ly->n_heads - 1);
        return -1;
    }
    return add_edit(iv, mode, TF_SITE_HEADS, l, first * ly->d_vhead, (first + count) * ly->d_vhead,
                    ly->n_heads * ly->d_vhead, item, err);
}

/* What layer l adds. */
static int add_output(TfIntervention *iv, TfEditMode mode, int l, const char *item, TfError *err) {
    const TfLayer *ly = &iv->m->layers[l];
    if (ly->kind == TF_LAYER_NORM) {
        tf_error_set(err, "--ablate: '%s': layer %d (%s) is a norm layer, which adds nothing",
                     item, l, ly->name);
        return -1;
    }
    return add_edit(iv, mode, TF_SITE_OUTPUT, l, 0, iv->m->d_model, iv->m->d_model, item, err);
}

/* An op of a merged layer (a part): its heads or hidden units. */
static int add_part(TfIntervention *iv, TfEditMode mode, int l, const TfLayerPart *p,
                    const char *item, TfError *err) {
    const TfLayer *ly = &iv->m->layers[l];
    if (ly->kind == TF_LAYER_ATTENTION) return add_heads(iv, mode, l, p->first, p->count, item, err);
    return add_edit(iv, mode, TF_SITE_UNITS, l, p->first, p->first + p->count, ly->d_hidden, item,
                    err);
}

/* "layers.N" -> N (and the rest after it into *rest); -1 when s is not that. */
static int layer_index(const TfModel *m, const char *s, const char **rest) {
    int n = 0, k = -1;
    if (sscanf(s, "layers.%d%n", &k, &n) != 1 || n == 0 || k < 0) return -1;
    *rest = s + n;
    return k < m->n_layers ? k : m->n_layers; /* out of range: the caller says so */
}

/* The layers WHERE names (layers.N, a layer name, an op of a merged
 * layer), as flags in `hit`; their number, -1 with err set. */
static int find_layers(const TfModel *m, const char *where, const char *item, char *hit,
                       TfError *err) {
    const char *rest;
    int k = layer_index(m, where, &rest), n = 0;
    if (k >= 0 && !*rest) {
        if (k >= m->n_layers) {
            tf_error_set(err, "--ablate: '%s': the model has layers 0 to %d", item, m->n_layers - 1);
            return -1;
        }
        hit[k] = 1;
        return 1;
    }
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        int match = strcmp(ly->name, where) == 0;
        for (int p = 0; p < ly->n_parts && !match; p++) match = strcmp(ly->parts[p].name, where) == 0;
        if (match) hit[l] = 1, n++;
    }
    return n;
}

/* The closest layer, op or register name to s, for a hint ("" when none is close). */
static const char *nearest_name(const TfModel *m, const char *s) {
    const char *best = "";
    int bd = 3;
    size_t ls = strlen(s);
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        int dist = tf_edit_distance(s, ls, ly->name);
        if (dist < bd) bd = dist, best = ly->name;
        for (int p = 0; p < ly->n_parts; p++)
            if ((dist = tf_edit_distance(s, ls, ly->parts[p].name)) < bd)
                bd = dist, best = ly->parts[p].name;
    }
    for (int r = 0; r < m->n_regs; r++) {
        int dist = tf_edit_distance(s, ls, m->regs[r].name);
        if (dist < bd) bd = dist, best = m->regs[r].name;
    }
    return best;
}

static int no_such(const TfModel *m, const char *item, const char *name, TfError *err) {
    const char *near = nearest_name(m, name);
    if (*near)
        tf_error_set(err, "--ablate: '%s' names no layer, op or register (did you mean '%s'?)",
                     item, near);
    else
        tf_error_set(err, "--ablate: '%s' names no layer, op or register (tfinfo lists them)", item);
    return -1;
}

/* REG@WHERE names a state where no register REG holds its columns. */
static int not_live(const TfModel *m, const char *item, const char *name, const char *where,
                    TfError *err) {
    char range[192];
    model_live_text(m, model_find_register(m, name), range, sizeof range);
    tf_error_set(err, "--ablate: '%s': register '%s' holds its columns in %s only, not %s", item,
                 name, range, where);
    return -1;
}

/* REG@WHERE: the register's columns after each layer WHERE names where it
 * holds them (TfRegister.live_from: another register may hold them in the
 * other states); refused when that is after none of them. */
static int parse_register(TfIntervention *iv, TfEditMode mode, char *target, const char *item,
                          TfError *err) {
    const TfModel *m = iv->m;
    char *at = strchr(target, '@');
    *at = '\0';
    if (model_find_register(m, target) < 0) return no_such(m, item, target, err);
    if (strcmp(at + 1, "embed") == 0) {
        int r = model_find_register_at(m, target, 0);
        if (r < 0) return not_live(m, item, target, "after the embedding", err);
        return add_edit(iv, mode, TF_SITE_RESID, -1, m->regs[r].offset,
                        m->regs[r].offset + m->regs[r].size, m->d_model, item, err);
    }
    char *hit = calloc((size_t)m->n_layers + 1, 1);
    if (!hit) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    int n = find_layers(m, at + 1, item, hit, err), rc = 0, added = 0, last = -1;
    if (n == 0) rc = no_such(m, item, at + 1, err);
    for (int l = 0; n > 0 && rc == 0 && l < m->n_layers; l++) {
        if (!hit[l]) continue;
        last = l;
        int r = model_find_register_at(m, target, l + 1);
        if (r < 0) continue;
        const TfRegister *reg = &m->regs[r];
        rc = add_edit(iv, mode, TF_SITE_RESID, l, reg->offset, reg->offset + reg->size,
                      m->d_model, item, err);
        added++;
    }
    free(hit);
    if (n > 0 && rc == 0 && added == 0) {
        char where[160];
        if (n == 1)
            snprintf(where, sizeof where, "after layer %d (%.100s)", last, m->layers[last].name);
        else
            snprintf(where, sizeof where, "after any of the %d layers '%.100s' names", n, at + 1);
        return not_live(m, item, target, where, err);
    }
    return n < 0 ? -1 : rc;
}

/* One TARGET (intervene.h). */
static int parse_target(TfIntervention *iv, TfEditMode mode, char *target, const char *item,
                        TfError *err) {
    const TfModel *m = iv->m;
    if (strchr(target, '@')) return parse_register(iv, mode, target, item, err);
    const char *rest;
    int l = layer_index(m, target, &rest), a, b, n = 0;
    if (l >= m->n_layers) {
        tf_error_set(err, "--ablate: '%s': the model has layers 0 to %d", item, m->n_layers - 1);
        return -1;
    }
    if (l >= 0) {
        const TfLayer *ly = &m->layers[l];
        if (!*rest) return add_output(iv, mode, l, item, err);
        if (!strcmp(rest, ".attn") || !strcmp(rest, ".mlp")) {
            if ((ly->kind == TF_LAYER_ATTENTION) != (rest[1] == 'a')) {
                tf_error_set(err, "--ablate: '%s': layer %d (%s) is %s layer", item, l, ly->name,
                             ly->kind == TF_LAYER_MLP ? "an MLP" : ly->kind == TF_LAYER_NORM
                                                                        ? "a norm"
                                                                        : "an attention");
                return -1;
            }
            return add_output(iv, mode, l, item, err);
        }
        if (sscanf(rest, ".head.%d%n", &a, &n) == 1 && !rest[n])
            return add_heads(iv, mode, l, a, 1, item, err);
        if (sscanf(rest, ".heads.%d-%d%n", &a, &b, &n) == 2 && !rest[n])
            return add_heads(iv, mode, l, a, b - a + 1, item, err);
        tf_error_set(err, "--ablate: '%s': after layers.%d, want nothing, .attn, .mlp, .head.H "
                          "or .heads.A-B", item, l);
        return -1;
    }
    // A layer name (every layer of that name), NAME.head.H, or an op of a merged layer.
    char *dot = strstr(target, ".head.");
    int head = -1;
    if (dot && sscanf(dot, ".head.%d%n", &head, &n) == 1 && !dot[n]) *dot = '\0';
    else head = -1;
    int found = 0;
    for (l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        int rc = 0;
        if (strcmp(ly->name, target) == 0) {
            rc = head >= 0 ? add_heads(iv, mode, l, head, 1, item, err)
                           : add_output(iv, mode, l, item, err);
            found = 1;
        } else {
            for (int p = 0; p < ly->n_parts && rc == 0; p++) {
                const TfLayerPart *pt = &ly->parts[p];
                if (strcmp(pt->name, target) != 0) continue;
                found = 1;
                if (head >= 0 && head >= pt->count) {
                    tf_error_set(err, "--ablate: '%s': op %s has heads 0 to %d", item, pt->name,
                                 pt->count - 1);
                    rc = -1;
                } else {
                    rc = head >= 0 ? add_heads(iv, mode, l, pt->first + head, 1, item, err)
                                   : add_part(iv, mode, l, pt, item, err);
                }
            }
        }
        if (rc < 0) return -1;
    }
    return found ? 0 : no_such(m, item, target, err);
}

TfIntervention *intervention_parse(const TfModel *m, const char *const *specs, int n_specs,
                                   int patching, TfError *err) {
    TfIntervention *iv = calloc(1, sizeof *iv);
    if (!iv) {
        tf_error_set(err, "out of memory");
        return NULL;
    }
    iv->m = m;
    for (int s = 0; s < n_specs; s++) {
        char *copy = malloc(strlen(specs[s]) + 1);
        if (!copy) {
            tf_error_set(err, "out of memory");
            goto fail;
        }
        strcpy(copy, specs[s]);
        int rc = 0;
        for (char *item = copy, *next; item && rc == 0; item = next) {
            next = strchr(item, ',');
            if (next) *next++ = '\0';
            if (!*item) {
                tf_error_set(err, "--ablate: '%s' has an empty item", specs[s]);
                rc = -1;
                break;
            }
            char label[256];
            snprintf(label, sizeof label, "%s", item);
            TfEditMode mode = patching ? TF_EDIT_PATCH : TF_EDIT_ZERO;
            char *target = item, *colon = strchr(item, ':');
            if (colon) {
                *colon = '\0';
                int k = -1;
                for (int i = 0; i < TF_EDIT_MODE_COUNT; i++)
                    if (!strcmp(item, tf_edit_mode_names[i])) k = i;
                if (k < 0) {
                    tf_error_set(err, "--ablate: '%s': the mode '%s' is not zero, mean or patch",
                                 label, item);
                    rc = -1;
                    break;
                }
                if (k == TF_EDIT_PATCH && !patching) {
                    tf_error_set(err, "--ablate: '%s': patch wants --patch-from PROMPT", label);
                    rc = -1;
                    break;
                }
                mode = (TfEditMode)k;
                target = colon + 1;
            }
            rc = parse_target(iv, mode, target, label, err);
        }
        if (rc == 0 && iv->n == 0) {
            tf_error_set(err, "--ablate: '%s' names nothing", specs[s]);
            rc = -1;
        }
        free(copy);
        if (rc < 0) goto fail;
    }
    return iv;
fail:
    intervention_free(iv);
    return NULL;
}

/* ---- recording means and patches ---------------------------------------- */

typedef struct Recorder {
    TfIntervention *iv;
    TfEditMode mode;
    double **sum;   /* per edit: mean's running sums [width], NULL otherwise */
    long *rows;     /* per edit: rows summed */
    int failed;
} Recorder;

/* Rows x[n, width] of activation (layer, site) go to every edit there. */
static void record(Recorder *rc, int layer, TfEditSite site, const float *x, int width, int n,
                   const int *row_pos) {
    for (int i = 0; i < rc->iv->n; i++) {
        TfEdit *e = &rc->iv->edits[i];
        if (e->mode != rc->mode || e->layer != layer || e->site != site || e->width != width)
            continue;
        for (int r = 0; r < n; r++) {
            const float *row = x + (size_t)r * width;
            if (e->mode == TF_EDIT_MEAN) {
                for (int c = e->lo; c < e->hi; c++) rc->sum[i][c] += row[c];
                rc->rows[i]++;
            } else {
                int p = row_pos[r];
                memcpy(e->values + (size_t)p * width + e->lo, row + e->lo,
                       (size_t)(e->hi - e->lo) * sizeof(float));
                if (p + 1 > e->n_pos) e->n_pos = p + 1;
            }
        }
    }
}

static void record_layer(void *user, int layer, const float *x, int n_rows, const int *row_seq,
                         const int *row_pos) {
    (void)row_seq;
    Recorder *rc = user;
    record(rc, layer, TF_SITE_RESID, x, rc->iv->m->d_model, n_rows, row_pos);
}

static void record_activation(void *user, int layer, TfHookPoint point, const float *x, int width,
                              int n_rows, const int *row_seq, const int *row_pos) {
    (void)row_seq;
    TfEditSite site = point == TF_HOOK_Z          ? TF_SITE_HEADS
                      : point == TF_HOOK_MLP_POST ? TF_SITE_UNITS
                      : point == TF_HOOK_OUT      ? TF_SITE_OUTPUT
                                                  : TF_SITE_COUNT;
    if (site != TF_SITE_COUNT) record(user, layer, site, x, width, n_rows, row_pos);
}

/* One run of the prompt as tfrun makes it; -1 with err set. */
static int run_prompt(TfInfer *inf, const TfModel *m, const int *ids, int len, int n_new,
                      TfError *err) {
    size_t cap = (size_t)(len > n_new ? len : n_new) + 1;
    int *out = malloc(cap * sizeof *out);
    float *vals = malloc(((size_t)(m->n_classes > (int)cap ? m->n_classes : (int)cap)) * sizeof *vals);
    int rc = -1, n_out = 0;
    if (!out || !vals) tf_error_set(err, "out of memory");
    else if (m->output_kind == TF_OUTPUT_CLASSIFY)
        rc = infer_classify(inf, &ids, &len, 1, vals, err);
    else if (model_numeric_output(m))
        rc = infer_every_position_values(inf, &ids, &len, 1, &vals, err);
    else if (m->every_position)
        rc = infer_every_position(inf, &ids, &len, 1, &out, err);
    else if (m->stop_token >= 0)
        rc = infer_generate_until(inf, &ids, &len, 1, n_new > 0 ? n_new : 1, m->stop_token, out,
                                  &n_out, err);
    else
        rc = infer_generate(inf, &ids, &len, 1, n_new > 0 ? n_new : 1, out, err);
    free(out);
    free(vals);
    return rc;
}

int intervention_prepare(TfIntervention *iv, TfEditMode mode, const int *ids, int len, int n_new,
                         TfError *err) {
    const TfModel *m = iv->m;
    Recorder rc = {iv, mode, calloc((size_t)iv->n + 1, sizeof(double *)),
                   calloc((size_t)iv->n + 1, sizeof(long)), 0};
    int status = -1;
    TfInfer *inf = NULL;
    if (!rc.sum || !rc.rows) goto oom;
    for (int i = 0; i < iv->n; i++) {
        TfEdit *e = &iv->edits[i];
        if (e->mode != mode) continue;
        free(e->values);
        e->n_pos = 0;
        size_t rows = mode == TF_EDIT_PATCH ? (size_t)m->max_len : 1;
        if (!(e->values = calloc(rows * (size_t)e->width, sizeof(float)))) goto oom;
        if (mode == TF_EDIT_MEAN && !(rc.sum[i] = calloc((size_t)e->width, sizeof(double))))
            goto oom;
    }
    if (!(inf = infer_new(m, 1, err))) goto done;
    infer_set_hook(inf, record_layer, &rc);
    infer_set_activation_hook(inf, record_activation, &rc);
    if (run_prompt(inf, m, ids, len, n_new, err) < 0) {
        if (infer_n_failed(inf) > 0) tf_error_prefix(err, "the unedited run");
        goto done;
    }
    for (int i = 0; mode == TF_EDIT_MEAN && i < iv->n; i++) {
        TfEdit *e = &iv->edits[i];
        if (e->mode != mode || rc.rows[i] == 0) continue;
        for (int c = e->lo; c < e->hi; c++) e->values[c] = (float)(rc.sum[i][c] / (double)rc.rows[i]);
        e->n_pos = 1;
    }
    status = 0;
    goto done;
oom:
    tf_error_set(err, "out of memory");
done:
    infer_free(inf);
    for (int i = 0; rc.sum && i < iv->n; i++) free(rc.sum[i]);
    free(rc.sum);
    free(rc.rows);
    return status;
}
