/* dump.c: tfrun --dump, a forward pass's activations as safetensors. */
#include "dump.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"
#include "tfw.h"

/* Appends a zeroed tensor ts[*n] of that name and shape; -1 when out of memory
 * (what was allocated is still freed with the rest). */
static int add(TfTensor *ts, int *n, const char *name, int ndim, const int64_t *shape) {
    TfTensor *t = &ts[*n];
    memset(t, 0, sizeof *t);
    t->name = malloc(strlen(name) + 1);
    t->ndim = ndim;
    t->nelem = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->nelem *= (size_t)shape[d];
    }
    t->data = calloc(t->nelem, sizeof(float));
    (*n)++;
    if (!t->name || !t->data) return -1;
    strcpy(t->name, name);
    return 0;
}

/* Appends a tensor of that name and shape holding a copy of src (nelem
 * floats); -1 when out of memory. */
static int add_copy(TfTensor *ts, int *n, const char *name, int ndim, const int64_t *shape,
                    const float *src) {
    if (add(ts, n, name, ndim, shape) < 0) return -1;
    memcpy(ts[*n - 1].data, src, ts[*n - 1].nelem * sizeof(float));
    return 0;
}

/* Layer l's activations inside it (inspect_capture_inner), as the module
 * names them: "<block>ln1.hook_normalized", "<block>attn.hook_q", ... */
static int add_inner(TfTensor *ts, int *n, const TfCapture *c, int l, const char *block) {
    const TfModel *m = c->m;
    const TfLayer *ly = &m->layers[l];
    int attn = ly->kind == TF_LAYER_ATTENTION;
    static const struct {
        TfHookPoint point;
        const char *attn, *mlp; /* names in an attention / MLP layer */
        int per_head;           /* [1, P, H, width / H] rather than [1, P, width] */
    } points[] = {
        {TF_HOOK_NORMALIZED, "ln1.hook_normalized", "ln2.hook_normalized", 0},
        {TF_HOOK_Q, "attn.hook_q", NULL, 1},
        {TF_HOOK_K, "attn.hook_k", NULL, 1},
        {TF_HOOK_V, "attn.hook_v", NULL, 1},
        {TF_HOOK_Z, "attn.hook_z", NULL, 1},
        {TF_HOOK_MLP_PRE, NULL, "mlp.hook_pre", 0},
        {TF_HOOK_MLP_POST, NULL, "mlp.hook_post", 0},
        {TF_HOOK_OUT, "hook_attn_out", "hook_mlp_out", 0},
    };
    char name[96];
    int64_t P = c->n_pos;
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        const float *x = c->inner[l * TF_HOOK_POINT_COUNT + points[i].point];
        const char *suffix = attn ? points[i].attn : points[i].mlp;
        if (!x || !suffix) continue;
        int64_t w = infer_hook_width(m, ly, points[i].point);
        const int64_t row[3] = {1, P, w}, head[4] = {1, P, ly->n_heads, attn ? w / ly->n_heads : 0};
        snprintf(name, sizeof name, "%s%s", block, suffix);
        int per_head = points[i].per_head;
        if (add_copy(ts, n, name, per_head ? 4 : 3, per_head ? head : row, x) < 0) return -1;
    }
    if (!attn) return 0;
    const int64_t att[4] = {1, ly->n_heads, P, P};
    snprintf(name, sizeof name, "%sattn.hook_attn_scores", block);
    if (add_copy(ts, n, name, 4, att, c->scores[l]) < 0) return -1;
    snprintf(name, sizeof name, "%sattn.hook_pattern", block);
    return add_copy(ts, n, name, 4, att, c->att[l]);
}

int dump_activations(const TfModel *m, const char *prompt, const int *tokens, int n_pos,
                     const TfIntervention *iv, const char *path, TfError *err) {
    // The file holds every activation: bounded (a 21 MB file of 72,000
    // layers gave 838 MB at 2.6 GB of memory), refused before the run.
    if (inspect_check_size(m, n_pos, 1, TF_DUMP_MAX_VALUES, "the activations file", err) < 0)
        return -1;
    TfCapture *c = inspect_capture_with(m, tokens, n_pos, 1, iv, err);
    if (!c) return -1;
    /* at most 2 residual streams, 1 pattern and scores, and every hook point per layer */
    int d = m->d_model, cap = (4 + TF_HOOK_POINT_COUNT) * m->n_layers + 3, n = 0, failed = 0;
    TfTensor *ts = calloc((size_t)cap, sizeof *ts);
    char *ids = malloc((size_t)n_pos * 12 + 3);
    if (!ts || !ids) failed = 1;
    const int64_t row[3] = {1, n_pos, d};
    size_t rowbytes = (size_t)d * sizeof(float);
    // The two embeddings, gathered from the model's tables.
    if (!failed && add(ts, &n, "hook_embed", 3, row) == 0 && add(ts, &n, "hook_pos_embed", 3, row) == 0) {
        for (int p = 0; p < n_pos; p++) {
            memcpy(ts[0].data + (size_t)p * d,
                   m->tensors[m->tok_embed].data + (size_t)tokens[p] * d, rowbytes);
            memcpy(ts[1].data + (size_t)p * d, m->tensors[m->pos_embed].data + (size_t)p * d,
                   rowbytes);
        }
    } else {
        failed = 1;
    }
    char block[32], name[64];
    for (int l = 0; !failed && l < m->n_layers; l++) {
        snprintf(block, sizeof block, "blocks.%d.", l);
        snprintf(name, sizeof name, "%shook_resid_pre", block);
        if (add_copy(ts, &n, name, 3, row, capture_row(c, l, 0)) < 0 ||
            add_inner(ts, &n, c, l, block) < 0)
            failed = 1;
        snprintf(name, sizeof name, "%shook_resid_post", block);
        if (!failed && add_copy(ts, &n, name, 3, row, capture_row(c, l + 1, 0)) < 0) failed = 1;
    }
    if (!failed && m->n_layers > 0 && m->layers[m->n_layers - 1].kind == TF_LAYER_NORM) {
        const float *out = capture_row(c, m->n_layers, 0);
        if (add_copy(ts, &n, "ln_final.hook_normalized", 3, row, out) < 0) failed = 1;
    }
    int rc = -1;
    if (failed) {
        tf_error_set(err, "out of memory for the activations of %d positions", n_pos);
    } else {
        size_t k = 0;
        ids[k++] = '[';
        for (int p = 0; p < n_pos; p++) k += (size_t)sprintf(ids + k, "%s%d", p ? "," : "", tokens[p]);
        strcpy(ids + k, "]");
        const char *meta[] = {"format", "tfw-activations", "prompt", prompt, "tokens", ids,
                              "made_by", "{\"tool\":\"tfrun\",\"version\":\"" TF_VERSION "\"}"};
        rc = tfw_write_safetensors(path, ts, n, meta, 4, err);
    }
    for (int i = 0; ts && i < n; i++) {
        free(ts[i].name);
        free(ts[i].data);
    }
    free(ts);
    free(ids);
    capture_free(c);
    return rc;
}
