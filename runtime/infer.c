/* infer.c: batched, incremental forward passes and greedy generation.
 *
 * Dimension legend: R rows in this step (stacked over sequences), S
 * sequences, L the model's max_len, d d_model, HD = n_heads*d_head,
 * HV = n_heads*d_vhead, F d_hidden.
 */
#include "infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

struct TfInfer {
    const TfModel *m;
    int max_seqs;
    int max_rows; /* max_seqs * max_len */
    int incremental; /* 0 when a bidirectional layer forces full recompute */

    /* per attention layer l: kcache[l] [S, L, HD], vcache[l] [S, L, HV] */
    float **kcache, **vcache;
    int *seq_len; /* [S] positions held in the caches */

    /* scratch, sized for max_rows */
    float *x;       /* [R, d] residual stream */
    float *q;       /* [R, max HD] */
    float *k, *v;   /* [R, max HD], [R, max HV] */
    float *heads;   /* [R, max HV] concatenated head outputs */
    float *hidden;  /* [R, max F] MLP hidden units */
    float *delta;   /* [R, d] what a layer adds to the residual stream */
    float *att;     /* [L] attention weights of one row */
    float *logits;  /* [V] */
    int *row_seq, *row_pos, *row_tok;

    TfLayerHook hook;
    void *hook_user;
    TfAttentionHook att_hook;
    void *att_hook_user;
};

static const float *tensor(const TfModel *m, int idx) {
    return idx >= 0 ? m->tensors[idx].data : NULL;
}

void infer_free(TfInfer *inf) {
    if (!inf) return;
    if (inf->kcache)
        for (int l = 0; l < inf->m->n_layers; l++) free(inf->kcache[l]);
    if (inf->vcache)
        for (int l = 0; l < inf->m->n_layers; l++) free(inf->vcache[l]);
    free(inf->kcache);
    free(inf->vcache);
    free(inf->seq_len);
    free(inf->x);
    free(inf->q);
    free(inf->k);
    free(inf->v);
    free(inf->heads);
    free(inf->hidden);
    free(inf->delta);
    free(inf->att);
    free(inf->logits);
    free(inf->row_seq);
    free(inf->row_pos);
    free(inf->row_tok);
    free(inf);
}

static float *alloc_floats(size_t n) {
    return malloc((n ? n : 1) * sizeof(float));
}

TfInfer *infer_new(const TfModel *m, int max_seqs, TfError *err) {
    if (max_seqs < 1) {
        tf_error_set(err, "batch size must be at least 1, not %d", max_seqs);
        return NULL;
    }
    TfInfer *inf = calloc(1, sizeof *inf);
    if (!inf) goto oom;
    inf->m = m;
    inf->max_seqs = max_seqs;
    inf->incremental = 1;
    size_t L = (size_t)m->max_len, d = (size_t)m->d_model;
    size_t R = (size_t)max_seqs * L;
    inf->max_rows = (int)R;

    size_t max_hd = 1, max_hv = 1, max_f = d;
    inf->kcache = calloc((size_t)m->n_layers + 1, sizeof(float *));
    inf->vcache = calloc((size_t)m->n_layers + 1, sizeof(float *));
    if (!inf->kcache || !inf->vcache) goto oom;
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        if (ly->kind == TF_LAYER_ATTENTION) {
            size_t hd = (size_t)ly->n_heads * ly->d_head, hv = (size_t)ly->n_heads * ly->d_vhead;
            if (hd > max_hd) max_hd = hd;
            if (hv > max_hv) max_hv = hv;
            if (!ly->causal) inf->incremental = 0;
            inf->kcache[l] = alloc_floats((size_t)max_seqs * L * hd);
            inf->vcache[l] = alloc_floats((size_t)max_seqs * L * hv);
            if (!inf->kcache[l] || !inf->vcache[l]) goto oom;
        } else if ((size_t)ly->d_hidden > max_f) {
            max_f = (size_t)ly->d_hidden;
        }
    }
    inf->seq_len = calloc((size_t)max_seqs, sizeof(int));
    inf->x = alloc_floats(R * d);
    inf->q = alloc_floats(R * max_hd);
    inf->k = alloc_floats(R * max_hd);
    inf->v = alloc_floats(R * max_hv);
    inf->heads = alloc_floats(R * max_hv);
    inf->hidden = alloc_floats(R * max_f);
    inf->delta = alloc_floats(R * d);
    inf->att = alloc_floats(L);
    inf->logits = alloc_floats((size_t)m->n_vocab);
    inf->row_seq = malloc(R * sizeof(int));
    inf->row_pos = malloc(R * sizeof(int));
    inf->row_tok = malloc(R * sizeof(int));
    if (!inf->seq_len || !inf->x || !inf->q || !inf->k || !inf->v || !inf->heads || !inf->hidden ||
        !inf->delta || !inf->att || !inf->logits || !inf->row_seq || !inf->row_pos || !inf->row_tok)
        goto oom;
    return inf;
oom:
    infer_free(inf);
    tf_error_set(err, "out of memory for a batch of %d sequences", max_seqs);
    return NULL;
}

void infer_set_hook(TfInfer *inf, TfLayerHook hook, void *user) {
    inf->hook = hook;
    inf->hook_user = user;
}

void infer_set_attention_hook(TfInfer *inf, TfAttentionHook hook, void *user) {
    inf->att_hook = hook;
    inf->att_hook_user = user;
}

static void attention_layer(TfInfer *inf, int l, int R) {
    const TfModel *m = inf->m;
    const TfLayer *ly = &m->layers[l];
    int d = m->d_model, H = ly->n_heads, dh = ly->d_head, dv = ly->d_vhead;
    int HD = H * dh, HV = H * dv, L = m->max_len;

    matmul_forward(inf->q, inf->x, tensor(m, ly->query), NULL, R, d, HD, 0);
    matmul_forward(inf->k, inf->x, tensor(m, ly->key), NULL, R, d, HD, 0);
    matmul_forward(inf->v, inf->x, tensor(m, ly->value), NULL, R, d, HV, 0);

    // Every row's key and value go into its sequence's cache first, so that a
    // row can attend to rows of the same step.
    float *kc = inf->kcache[l], *vc = inf->vcache[l];
    for (int r = 0; r < R; r++) {
        long slot = (long)inf->row_seq[r] * L + inf->row_pos[r];
        memcpy(kc + slot * HD, inf->k + (long)r * HD, (size_t)HD * sizeof(float));
        memcpy(vc + slot * HV, inf->v + (long)r * HV, (size_t)HV * sizeof(float));
    }
    for (int r = 0; r < R; r++) {
        int s = inf->row_seq[r];
        int T = ly->causal ? inf->row_pos[r] + 1 : inf->seq_len[s];
        const float *ks = kc + (long)s * L * HD, *vs = vc + (long)s * L * HV;
        for (int h = 0; h < H; h++) {
            attention_row_forward(inf->heads + (long)r * HV + h * dv, inf->att,
                                  inf->q + (long)r * HD + h * dh, ks + h * dh, vs + h * dv, T, dh,
                                  dv, HD, HV, ly->scale);
            if (inf->att_hook)
                inf->att_hook(inf->att_hook_user, l, h, s, inf->row_pos[r], inf->att, T);
        }
    }
    const float *delta = inf->heads;
    if (ly->output >= 0) {
        matmul_forward(inf->delta, inf->heads, tensor(m, ly->output), NULL, R, HV, d, 0);
        delta = inf->delta;
    }
    for (long i = 0; i < (long)R * d; i++) inf->x[i] += delta[i];
}

static void mlp_layer(TfInfer *inf, int l, int R) {
    const TfModel *m = inf->m;
    const TfLayer *ly = &m->layers[l];
    int d = m->d_model, F = ly->d_hidden;
    matmul_forward(inf->hidden, inf->x, tensor(m, ly->fc1_weight), tensor(m, ly->fc1_bias), R, d,
                   F, 0);
    if (ly->act == TF_ACT_GELU)
        gelu_forward(inf->hidden, (long)R * F);
    else
        relu_forward(inf->hidden, (long)R * F);
    // The layer's output, bias included, is formed before it is added: the
    // seed's StepPosition relies on (h W2 + b2) being exact before x + (...).
    matmul_forward(inf->delta, inf->hidden, tensor(m, ly->fc2_weight), tensor(m, ly->fc2_bias), R,
                   F, d, 0);
    for (long i = 0; i < (long)R * d; i++) inf->x[i] += inf->delta[i];
}

/* Runs rows (row_seq, row_pos, row_tok already filled) through the model. */
static void forward_rows(TfInfer *inf, int R) {
    const TfModel *m = inf->m;
    int d = m->d_model;
    const float *te = tensor(m, m->tok_embed), *pe = tensor(m, m->pos_embed);
    for (int r = 0; r < R; r++) {
        float *row = inf->x + (long)r * d;
        const float *t = te + (long)inf->row_tok[r] * d, *p = pe + (long)inf->row_pos[r] * d;
        for (int c = 0; c < d; c++) row[c] = t[c] + p[c];
    }
    for (int r = 0; r < R; r++) {
        int s = inf->row_seq[r];
        if (inf->row_pos[r] + 1 > inf->seq_len[s]) inf->seq_len[s] = inf->row_pos[r] + 1;
    }
    if (inf->hook) inf->hook(inf->hook_user, -1, inf->x, R, inf->row_seq, inf->row_pos);
    for (int l = 0; l < m->n_layers; l++) {
        if (m->layers[l].kind == TF_LAYER_ATTENTION)
            attention_layer(inf, l, R);
        else
            mlp_layer(inf, l, R);
        if (inf->hook) inf->hook(inf->hook_user, l, inf->x, R, inf->row_seq, inf->row_pos);
    }
}

static int next_token(TfInfer *inf, int r) {
    const TfModel *m = inf->m;
    matmul_forward(inf->logits, inf->x + (long)r * m->d_model, tensor(m, m->unembed), NULL, 1,
                   m->d_model, m->n_vocab, 0);
    return argmax(inf->logits, m->n_vocab);
}

int infer_generate(TfInfer *inf, const int *const *prompts, const int *lens, int n_seqs, int n_new,
                   int *out, TfError *err) {
    const TfModel *m = inf->m;
    if (n_seqs < 0 || n_seqs > inf->max_seqs) {
        tf_error_set(err, "batch of %d sequences exceeds the %d this engine was made for", n_seqs,
                     inf->max_seqs);
        return -1;
    }
    if (n_new < 0) {
        tf_error_set(err, "cannot generate a negative number of tokens (%d)", n_new);
        return -1;
    }
    for (int s = 0; s < n_seqs; s++) {
        if (lens[s] < 1) {
            tf_error_set(err, "prompt %d is empty", s);
            return -1;
        }
        if ((long)lens[s] + n_new > m->max_len) {
            tf_error_set(err,
                         "prompt %d: %d tokens plus %d to generate exceed the %d positions of the "
                         "position encoding",
                         s, lens[s], n_new, m->max_len);
            return -1;
        }
        for (int i = 0; i < lens[s]; i++) {
            if (prompts[s][i] < 0 || prompts[s][i] >= m->n_vocab) {
                tf_error_set(err, "prompt %d: token id %d at index %d is outside the vocabulary", s,
                             prompts[s][i], i);
                return -1;
            }
        }
    }
    if (n_new == 0 || n_seqs == 0) return 0;

    // Step 0: every prompt position of every sequence, in one stack of rows.
    // Later steps: one row per sequence, the token generated last. Without
    // incremental decoding (a bidirectional layer), each step recomputes all.
    int *last_row = malloc((size_t)n_seqs * sizeof(int));
    int **seqs = malloc((size_t)n_seqs * sizeof(int *));
    if (!last_row || !seqs) {
        free(last_row);
        free(seqs);
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int s = 0; s < n_seqs; s++) {
        seqs[s] = malloc(((size_t)lens[s] + (size_t)n_new) * sizeof(int));
        if (!seqs[s]) {
            for (int j = 0; j < s; j++) free(seqs[j]);
            free(seqs);
            free(last_row);
            tf_error_set(err, "out of memory");
            return -1;
        }
        memcpy(seqs[s], prompts[s], (size_t)lens[s] * sizeof(int));
    }
    for (int step = 0; step < n_new; step++) {
        int R = 0;
        for (int s = 0; s < n_seqs; s++) {
            int len = lens[s] + step;
            int first = (step == 0 || !inf->incremental) ? 0 : len - 1;
            if (first == 0) inf->seq_len[s] = 0;
            for (int p = first; p < len; p++) {
                inf->row_seq[R] = s;
                inf->row_pos[R] = p;
                inf->row_tok[R] = seqs[s][p];
                R++;
            }
            last_row[s] = R - 1;
        }
        forward_rows(inf, R);
        for (int s = 0; s < n_seqs; s++) {
            int tok = next_token(inf, last_row[s]);
            out[(long)s * n_new + step] = tok;
            seqs[s][lens[s] + step] = tok;
        }
    }
    for (int s = 0; s < n_seqs; s++) free(seqs[s]);
    free(seqs);
    free(last_row);
    return 0;
}

int infer_tokenize(const TfModel *m, const char *text, int len, int *ids, TfError *err) {
    int map[256];
    for (int i = 0; i < 256; i++) map[i] = -1;
    for (int i = 0; i < m->n_vocab; i++) map[(unsigned char)m->vocab[i]] = i;
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (map[c] < 0) {
            char shown[8];
            if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
                snprintf(shown, sizeof shown, "%c", c);
            else if (c == '\n')
                snprintf(shown, sizeof shown, "\\n");
            else if (c == '\t')
                snprintf(shown, sizeof shown, "\\t");
            else
                snprintf(shown, sizeof shown, "\\x%02x", c);
            tf_error_set(err, "character '%s' at index %d is not in the vocabulary", shown, i);
            return -1;
        }
        ids[i] = map[c];
    }
    return 0;
}

int infer_token_text(const TfModel *m, int tok, char *buf) {
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
