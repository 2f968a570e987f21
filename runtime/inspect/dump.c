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

int dump_activations(const TfModel *m, const char *prompt, const int *tokens, int n_pos,
                     const char *path, TfError *err) {
    TfCapture *c = inspect_capture(m, tokens, n_pos, err);
    if (!c) return -1;
    int d = m->d_model, cap = 3 * m->n_layers + 3, n = 0, failed = 0; /* 3 per layer at most */
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
    char name[64];
    for (int l = 0; !failed && l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        for (int post = 0; !failed && post < 2; post++) {
            snprintf(name, sizeof name, "blocks.%d.hook_resid_%s", l, post ? "post" : "pre");
            if (add(ts, &n, name, 3, row) < 0) failed = 1;
            else memcpy(ts[n - 1].data, capture_row(c, l + post, 0), (size_t)n_pos * rowbytes);
        }
        if (failed || ly->kind != TF_LAYER_ATTENTION) continue;
        const int64_t att[4] = {1, ly->n_heads, n_pos, n_pos};
        snprintf(name, sizeof name, "blocks.%d.attn.hook_pattern", l);
        if (add(ts, &n, name, 4, att) < 0) failed = 1;
        else memcpy(ts[n - 1].data, c->att[l], ts[n - 1].nelem * sizeof(float));
    }
    if (!failed && m->n_layers > 0 && m->layers[m->n_layers - 1].kind == TF_LAYER_NORM) {
        if (add(ts, &n, "ln_final.hook_normalized", 3, row) < 0) failed = 1;
        else memcpy(ts[n - 1].data, capture_row(c, m->n_layers, 0), (size_t)n_pos * rowbytes);
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
