/* train.c: forward pass with saved activations, backward pass, optimizers
 * and checkpoints for a TfModel (train.h), in llm.c's shape (train_gpt2.c):
 *
 *   memory   one allocation per kind, each laid out from one size table:
 *            parameters, gradients, optimizer state (m, v), activations
 *            (layout_activations: every float buffer of the passes) and
 *            indices (layout_indices: the per-tensor layout, per-row and
 *            per-sequence bookkeeping);
 *   forward  embedding, then per layer norm_layer_forward,
 *            attention_layer_forward or mlp_layer_forward (with its pre-norm,
 *            dropout and residual add), then the loss;
 *   backward the mirror, from the loss down, each layer's `_backward`.
 *
 * The numerical kernels are runtime/train/nn.h's (softmax, LayerNorm,
 * attention, cross-entropy) and runtime/engine/kernels.h's (matrix
 * products, activations, embeddings); the per-sequence attention work and
 * large LayerNorms are split over the threads of runtime/train/parallel.h.
 *
 * Dimension legend: N rows of the batch, M rows the loss reads, C d_model,
 * V vocabulary (or classes), F feed-forward width, H heads, D and DV head
 * widths (HD = H*D, HV = H*DV), T sequence length, R max_rows.
 */
#define _POSIX_C_SOURCE 200809L
#include "train.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "nn.h"
#include "parallel.h"
#include "rng.h"
#include "tfw.h"

#define LN_BLOCK 64 /* rows per partial sum of LayerNorm's parameter gradients */

const char *const tf_optimizer_names[] = {"sgd", "adam", "adamw"};
static_assert(sizeof tf_optimizer_names / sizeof *tf_optimizer_names == TF_OPT_COUNT, "names");

#define OPTIM_PREFIX "optim."

/* What a layer's forward pass keeps for its backward pass (NULL: unused). */
typedef struct LayerActs {
    float *lnout, *ln_mean, *ln_rstd; /* [R,C], [R], [R]: pre-norm or norm layer */
    float *q, *k, *v, *attout;        /* [R,HD] x2, [R,HV] x2 */
    float *preatt, *att;              /* sum over sequences of H*T*T */
    float *hpre, *hact;               /* [R,F] */
    float *y;                         /* [R,C] sublayer output, after dropout */
    float *mask;                      /* [R,C] dropout multipliers */
} LayerActs;

struct TfTrainer {
    TfModel *m;
    TfTrainOptions o;
    int max_rows, max_seqs;
    int n_tensors;      /* the model's tensors that are parameters (not optim.*) */
    size_t n_params;
    int shared;         /* a worker: params belong to the master */
    long step;

    /* The five allocations (params is the master's in a worker). */
    float *params;      /* [n_params] every tensor, in model order */
    float *own_grads;   /* [n_params] */
    float *optim;       /* [n_params] m, then [n_params] v (Adam) */
    float *act_mem;     /* layout_activations */
    void *idx_mem;      /* layout_indices */

    float *grads;       /* own_grads unless trainer_set_grads */
    float *mom, *vel;   /* into optim */

    /* ---- indices (idx_mem) ---- */
    size_t *offset;     /* [n_tensors] flat offset of each tensor */
    int *trainable;     /* [n_tensors] */
    LayerActs *acts;    /* [n_layers] */
    int *attn_index;    /* [n_layers] which attention layer it is, or -1 */
    int *pos;           /* [R] position of each row */
    long *att_off;      /* [max_seqs + 1] sum of T*T over the sequences before each; a
                           layer of H heads keeps a sequence's scores at H*att_off */
    int *out_rows, *out_targets; /* [R] the rows the loss reads, their targets */
    int *out_pos;       /* [R] position of each out row in its sequence */
    int *seq_out_start; /* [max_seqs + 1] each sequence's first out row */
    /* The sequences the attention kernels run side by side (make_groups):
     * group i is sequences grp[i] .. grp[i + 1] - 1, grp_cost their
     * cumulative T*T; rgrp, rgrp_cost the same for the compact layer. */
    int *grp, *rgrp;    /* [max_seqs + 1] */
    long *grp_cost, *rgrp_cost; /* [max_seqs + 1] */
    int n_grp, n_rgrp;

    /* ---- activations (act_mem) ---- */
    float *resid;       /* (n_layers + 1) x [R, C] */
    float *qin;         /* [R, C] the out rows' (normalised) input (compact) */
    float *outx, *doutx;         /* [R, C] the rows the loss reads */
    float *logits, *probs, *dlogits; /* [R, V] */
    float *dres, *dres2, *dy, *dain; /* [R, C] */
    float *dq, *dk, *dv, *dattout, *dh, *dhpre; /* [R, wide] */
    float *scratch;     /* [threads, scratch_per] the attention kernels' */
    float *ln_part;     /* [R / LN_BLOCK + 1, 2C] LayerNorm's parameter gradients per block */
    float *dpreatt;     /* [max H*T*T] the attention-score loss's gradient */
    float *picked;      /* [2 maxT^2] one head's scores and weights (pick_head) */

    int n_out;          /* rows the loss reads */
    int n_outputs;      /* V or classes */
    int max_heads;
    int threads;         /* attention's per-sequence work is split over this many */
    int scratch_threads; /* scratch has room for this many */
    size_t scratch_per;  /* floats of scratch per thread */
    int batch_has_dropout;

    /* Only the rows the loss reads need the layers after the last attention
     * layer, and only their queries in it: when `compact` is set (per batch),
     * that layer computes keys and values for every row but everything else
     * for the out_rows alone, and the layers after it work on those M rows. */
    int last_attn;       /* index of the last attention layer, -1 when none */
    /* The backward pass stops below the lowest layer that reads a trained
     * tensor, unless an embedding trains (frozen layers: --freeze). */
    int first_trained, embed_trained;
    int compact, no_compact;
    int all_scores; /* the batch keeps every attention score, masked too (nn.h) */
};

#define P(t, i) ((t)->params + (t)->offset[i])
#define G(t, i) ((t)->grads + (t)->offset[i])
#define OPTP(t, i) ((i) >= 0 ? P(t, i) : NULL)
#define OPTG(t, i) ((i) >= 0 ? G(t, i) : NULL)

/* ---- memory: size tables ------------------------------------------------------
 * A layout function lists every buffer of one allocation with its size;
 * run once on a Layout with no base it only adds the sizes up, run again on
 * the allocated block it points each buffer into place (llm.c's
 * fill_in_activation_sizes and malloc_and_point_activations, in one). */

#define LAYOUT_ALIGN 64 /* bytes: every buffer starts on a cache line */

typedef struct Layout {
    char *base;  /* NULL: count only */
    size_t size; /* bytes so far */
    int overflow;
} Layout;

static void *layout_take(Layout *L, size_t n, size_t size) {
    size_t off = (L->size + LAYOUT_ALIGN - 1) / LAYOUT_ALIGN * LAYOUT_ALIGN;
    if (size && n > (SIZE_MAX - off) / size) {
        L->overflow = 1;
        return NULL;
    }
    L->size = off + n * size;
    return L->base ? L->base + off : NULL;
}

/* ptr = n elements of *ptr's type (NULL while counting). */
#define TAKE(L, ptr, n) ((ptr) = layout_take((L), (size_t)(n), sizeof *(ptr)))

/* The sizes the layouts depend on. */
static size_t max_seq_len(const TfTrainer *t) {
    return (size_t)(t->m->max_len < t->max_rows ? t->m->max_len : t->max_rows);
}

/* Floats of scratch per thread up to which an attention layer's longer
 * sequences run through the group kernels (nn.h; their scratch grows with
 * the heads' total width times the longest sequence); past it, a wide and
 * long model keeps the one-sequence kernels (and a few megabytes). */
#define GROUP_SCRATCH_MAX (4L << 20)

/* Whether layer ly runs its sequences of T rows through the group kernels:
 * a property of the model and the length, so that a sequence's results do
 * not depend on the batch it is in. */
static int grouped(const TfTrainer *t, const TfLayer *ly, int T) {
    return T > NN_SHORT_T &&
           nn_attention_group_scratch_floats((int)max_seq_len(t), ly->n_heads, ly->d_head,
                                             ly->d_vhead) <= GROUP_SCRATCH_MAX;
}

/* Scratch floats an attention layer's kernels need (nn.h): the one-sequence
 * kernels' for short sequences, the group kernels' for longer ones. */
static size_t attention_scratch(const TfTrainer *t, const TfLayer *ly) {
    const int T = (int)max_seq_len(t);
    size_t a = nn_attention_scratch_floats(T, ly->d_head, ly->d_vhead);
    size_t b = grouped(t, ly, T) ? nn_attention_group_scratch_floats(T, ly->n_heads, ly->d_head,
                                                                     ly->d_vhead)
                                 : 0;
    return a > b ? a : b;
}

/* Every index buffer (idx_mem). */
static void layout_indices(TfTrainer *t, Layout *L) {
    const TfModel *m = t->m;
    const size_t R = (size_t)t->max_rows, S = (size_t)t->max_seqs + 1;
    TAKE(L, t->offset, m->n_tensors);
    TAKE(L, t->trainable, m->n_tensors);
    TAKE(L, t->acts, m->n_layers);
    TAKE(L, t->attn_index, m->n_layers);
    TAKE(L, t->pos, R);
    TAKE(L, t->att_off, S);
    TAKE(L, t->out_rows, R);
    TAKE(L, t->out_targets, R);
    TAKE(L, t->out_pos, R);
    TAKE(L, t->seq_out_start, S);
    TAKE(L, t->grp, S);
    TAKE(L, t->rgrp, S);
    TAKE(L, t->grp_cost, S);
    TAKE(L, t->rgrp_cost, S);
}

/* Every float buffer of the forward and backward passes (act_mem): the size
 * table of the activations. Needs t->acts, the model and the thread count. */
static void layout_activations(TfTrainer *t, Layout *L) {
    const TfModel *m = t->m;
    const size_t R = (size_t)t->max_rows, C = (size_t)m->d_model, V = (size_t)t->n_outputs;
    const size_t maxT = max_seq_len(t);
    size_t wide = C, max_att = 0; /* widest per-row buffer of any layer; largest H*T*T */
    TAKE(L, t->resid, ((size_t)m->n_layers + 1) * R * C);
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        LayerActs *a = &t->acts[l];
        if (ly->norm_weight >= 0) {
            if (ly->kind != TF_LAYER_NORM) TAKE(L, a->lnout, R * C);
            TAKE(L, a->ln_mean, R);
            TAKE(L, a->ln_rstd, R);
        }
        if (ly->kind == TF_LAYER_NORM) continue;
        TAKE(L, a->y, R * C);
        if (t->o.dropout > 0) TAKE(L, a->mask, R * C);
        if (ly->kind == TF_LAYER_ATTENTION) {
            size_t hd = (size_t)ly->n_heads * ly->d_head, hv = (size_t)ly->n_heads * ly->d_vhead;
            TAKE(L, a->q, R * hd);
            TAKE(L, a->k, R * hd);
            TAKE(L, a->v, R * hv);
            TAKE(L, a->attout, R * hv);
            TAKE(L, a->preatt, (size_t)ly->n_heads * maxT * R);
            TAKE(L, a->att, (size_t)ly->n_heads * maxT * R);
            if (hd > wide) wide = hd;
            if (hv > wide) wide = hv;
            if ((size_t)ly->n_heads * maxT * maxT > max_att) max_att = (size_t)ly->n_heads * maxT * maxT;
        } else {
            TAKE(L, a->hpre, R * (size_t)ly->d_hidden);
            TAKE(L, a->hact, R * (size_t)ly->d_hidden);
            if ((size_t)ly->d_hidden > wide) wide = (size_t)ly->d_hidden;
        }
    }
    TAKE(L, t->qin, R * C);
    TAKE(L, t->outx, R * C);
    TAKE(L, t->doutx, R * C);
    TAKE(L, t->logits, R * V);
    TAKE(L, t->probs, R * V);
    TAKE(L, t->dlogits, R * V);
    TAKE(L, t->dres, R * C);
    TAKE(L, t->dres2, R * C);
    TAKE(L, t->dy, R * C);
    TAKE(L, t->dain, R * C);
    TAKE(L, t->dq, R * wide);
    TAKE(L, t->dk, R * wide);
    TAKE(L, t->dv, R * wide);
    TAKE(L, t->dattout, R * wide);
    TAKE(L, t->dh, R * wide);
    TAKE(L, t->dhpre, R * wide);
    TAKE(L, t->scratch, t->scratch_per * (size_t)t->scratch_threads);
    TAKE(L, t->ln_part, (R / LN_BLOCK + 1) * 2 * C);
    TAKE(L, t->dpreatt, max_att);
    TAKE(L, t->picked, 2 * maxT * maxT);
}

/* One zeroed allocation for a layout (calloc: pages untouched until used),
 * its buffers on cache lines; returns the block to free, NULL when out of
 * memory. */
static void *layout_alloc(TfTrainer *t, void (*layout)(TfTrainer *, Layout *), double *need) {
    Layout L = {0};
    layout(t, &L);
    *need = L.overflow ? INFINITY : (double)L.size;
    if (L.overflow || L.size > SIZE_MAX - LAYOUT_ALIGN) return NULL;
    char *block = calloc(L.size + LAYOUT_ALIGN, 1);
    if (!block) return NULL;
    L.base = block + (LAYOUT_ALIGN - (uintptr_t)block % LAYOUT_ALIGN) % LAYOUT_ALIGN;
    L.size = 0;
    layout(t, &L);
    return block;
}

void trainer_free(TfTrainer *t) {
    if (!t) return;
    if (!t->shared) free(t->params);
    free(t->own_grads);
    free(t->optim);
    free(t->act_mem);
    free(t->idx_mem);
    free(t);
}

/* The trainer of trainer_new, or with master set a worker sharing its
 * parameters (trainer_new_worker). */
static TfTrainer *trainer_alloc(TfModel *m, const TfTrainOptions *opts, int max_rows,
                                int max_seqs, TfTrainer *master, TfError *err) {
    if (model_validate(m, err) < 0) return NULL;
    if (max_rows < 1 || max_seqs < 1 || max_seqs > max_rows) {
        tf_error_set(err, "a batch needs room for at least one row and sequence");
        return NULL;
    }
    if ((unsigned)opts->optimizer >= TF_OPT_COUNT || !(opts->dropout >= 0 && opts->dropout < 1) ||
        !(opts->clip >= 0) || !(opts->weight_decay >= 0) || !(opts->momentum >= 0) ||
        !(opts->beta1 >= 0 && opts->beta1 < 1) || !(opts->beta2 >= 0 && opts->beta2 < 1) ||
        !(opts->eps > 0)) {
        tf_error_set(err, "training options out of range");
        return NULL;
    }
    TfTrainer *t = calloc(1, sizeof *t);
    if (!t) {
        tf_error_set(err, "out of memory");
        return NULL;
    }
    t->m = m;
    t->o = *opts;
    t->max_rows = max_rows;
    t->max_seqs = max_seqs;
    // Parameters: every tensor but saved optimizer state, which a checkpoint
    // appends after them.
    t->n_tensors = m->n_tensors;
    for (int i = 0; i < m->n_tensors; i++)
        if (strncmp(m->tensors[i].name, OPTIM_PREFIX, strlen(OPTIM_PREFIX)) == 0) {
            t->n_tensors = i;
            break;
        }
    for (int i = t->n_tensors; i < m->n_tensors; i++)
        if (strncmp(m->tensors[i].name, OPTIM_PREFIX, strlen(OPTIM_PREFIX)) != 0) {
            tf_error_set(err, "tensor '%s' comes after the optimizer state", m->tensors[i].name);
            free(t);
            return NULL;
        }
    t->n_outputs = m->output_kind == TF_OUTPUT_CLASSIFY ? m->n_classes : m->n_vocab;
    t->threads = opts->threads < 1 ? 1 : opts->threads > TF_PARALLEL_MAX ? TF_PARALLEL_MAX : opts->threads;
    t->scratch_threads = t->threads;
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        size_t need = ly->kind == TF_LAYER_ATTENTION ? attention_scratch(t, ly) : 0;
        if (need > t->scratch_per) t->scratch_per = need;
        if (ly->kind == TF_LAYER_ATTENTION && ly->n_heads > t->max_heads) t->max_heads = ly->n_heads;
    }

    // Indices first: the per-tensor layout sizes the parameters.
    double act_bytes;
    if (!(t->idx_mem = layout_alloc(t, layout_indices, &act_bytes))) goto oom;
    for (int i = 0; i < t->n_tensors; i++) {
        t->offset[i] = t->n_params;
        t->n_params += m->tensors[i].nelem;
        t->trainable[i] = opts->trainable ? opts->trainable[i] != 0
                                          : i != m->pos_embed || opts->train_positions;
    }
    size_t np = t->n_params ? t->n_params : 1;
    if (!(t->own_grads = t->grads = calloc(np, sizeof(float)))) goto oom;
    if (master) {
        t->shared = 1;
        t->params = master->params;
    } else {
        int moments = opts->optimizer == TF_OPT_SGD ? 1 : 2;
        if (!(t->params = calloc(np, sizeof(float)))) goto oom;
        if (!(t->optim = calloc(np * (size_t)moments, sizeof(float)))) goto oom;
        t->mom = t->optim;
        t->vel = moments == 2 ? t->optim + t->n_params : NULL;
        for (int i = 0; i < t->n_tensors; i++)
            memcpy(P(t, i), m->tensors[i].data, m->tensors[i].nelem * sizeof(float));
    }
    if (!(t->act_mem = layout_alloc(t, layout_activations, &act_bytes))) {
        /* Refused at once, before any buffer is touched, with what it needs. */
        int layers = m->n_layers, d_model = m->d_model;
        trainer_free(t);
        tf_error_set(err, "out of memory for the trainer: %d layers' activations for %d rows "
                          "(d_model %d) need %.1f GiB", layers, max_rows, d_model, act_bytes / (1 << 30));
        return NULL;
    }

    int n_attn = 0;
    t->last_attn = -1;
    for (int l = 0; l < m->n_layers; l++) {
        t->attn_index[l] = m->layers[l].kind == TF_LAYER_ATTENTION ? n_attn++ : -1;
        if (m->layers[l].kind == TF_LAYER_ATTENTION) t->last_attn = l;
    }
    t->embed_trained = t->trainable[m->tok_embed] || t->trainable[m->pos_embed];
    t->first_trained = m->n_layers;
    for (int l = m->n_layers - 1; l >= 0; l--) {
        int ts[TF_LAYER_MAX_TENSORS];
        const char *roles[TF_LAYER_MAX_TENSORS];
        int k = model_layer_tensors(&m->layers[l], ts, roles);
        for (int j = 0; j < k; j++)
            if (t->trainable[ts[j]]) t->first_trained = l;
    }
    if (t->embed_trained) t->first_trained = 0;
    return t;
oom:
    trainer_free(t);
    tf_error_set(err, "out of memory for the trainer");
    return NULL;
}

TfTrainer *trainer_new(TfModel *m, const TfTrainOptions *opts, int max_rows, int max_seqs,
                       TfError *err) {
    return trainer_alloc(m, opts, max_rows, max_seqs, NULL, err);
}

TfTrainer *trainer_new_worker(TfTrainer *master, int max_rows, int max_seqs, TfError *err) {
    return trainer_alloc(master->m, &master->o, max_rows, max_seqs, master, err);
}

void trainer_set_grads(TfTrainer *t, float *g) { t->grads = g ? g : t->own_grads; }

void trainer_set_threads(TfTrainer *t, int threads) {
    // scratch has room for scratch_threads threads: never more.
    t->threads = threads < 1 ? 1 : threads > t->scratch_threads ? t->scratch_threads : threads;
}

long trainer_steps_done(const TfTrainer *t) { return t->step; }
const TfModel *trainer_model(const TfTrainer *t) { return t->m; }
float *trainer_params(TfTrainer *t, size_t *n) {
    *n = t->n_params;
    return t->params;
}
float *trainer_grads(TfTrainer *t, size_t *n) {
    *n = t->n_params;
    return t->grads;
}
size_t trainer_tensor_offset(const TfTrainer *t, int i) { return t->offset[i]; }

int trainer_check_batch(const TfTrainer *t, const TfBatch *b, TfError *err) {
    const TfModel *m = t->m;
    if (b->n_seqs < 1 || b->n_seqs > t->max_seqs) {
        tf_error_set(err, "a batch of %d sequences (1 to %d allowed)", b->n_seqs, t->max_seqs);
        return -1;
    }
    if (b->seq_start[0] != 0) {
        tf_error_set(err, "the first sequence does not start at row 0");
        return -1;
    }
    for (int s = 0; s < b->n_seqs; s++) {
        int len = b->seq_start[s + 1] - b->seq_start[s];
        if (len < 1 || len > m->max_len) {
            tf_error_set(err, "sequence %d has %d tokens (1 to %d allowed)", s, len, m->max_len);
            return -1;
        }
    }
    int N = b->seq_start[b->n_seqs];
    if (N > t->max_rows) {
        tf_error_set(err, "a batch of %d rows (at most %d)", N, t->max_rows);
        return -1;
    }
    for (int n = 0; n < N; n++) {
        if (b->tokens[n] < 0 || b->tokens[n] >= m->n_vocab) {
            tf_error_set(err, "row %d: token %d is outside the vocabulary", n, b->tokens[n]);
            return -1;
        }
    }
    if (m->output_kind == TF_OUTPUT_CLASSIFY) {
        for (int s = 0; s < b->n_seqs; s++)
            if (!b->labels || b->labels[s] < 0 || b->labels[s] >= m->n_classes) {
                tf_error_set(err, "sequence %d has no valid class label", s);
                return -1;
            }
    } else {
        int any = 0;
        for (int n = 0; b->targets && n < N; n++) {
            if (b->targets[n] < -1 || b->targets[n] >= m->n_vocab) {
                tf_error_set(err, "row %d: target %d is outside the vocabulary", n, b->targets[n]);
                return -1;
            }
            any |= b->targets[n] >= 0;
        }
        if (!any) {
            tf_error_set(err, "the batch has no target tokens");
            return -1;
        }
    }
    int n_attn = 0;
    for (int l = 0; l < m->n_layers; l++) n_attn += m->layers[l].kind == TF_LAYER_ATTENTION;
    for (int i = 0; i < b->n_attn; i++) {
        const TfAttnTarget *a = &b->attn[i];
        if (a->seq < 0 || a->seq >= b->n_seqs || a->layer < 0 || a->layer >= n_attn ||
            a->head < 0 || !a->target) {
            tf_error_set(err, "attention target %d names no sequence, layer or head", i);
            return -1;
        }
        for (int l = 0; l < m->n_layers; l++)
            if (t->attn_index[l] == a->layer && a->head >= m->layers[l].n_heads) {
                tf_error_set(err, "attention target %d: layer %d has %d heads", i, a->layer,
                             m->layers[l].n_heads);
                return -1;
            }
    }
    return 0;
}


/* ---- forward ---------------------------------------------------------------- */

static void make_mask(float *mask, long n, float p, TfRng *rng) {
    float keep = 1.0f / (1.0f - p);
    for (long i = 0; i < n; i++) mask[i] = rng_float(rng) < p ? 0.0f : keep;
}

/* The rows the loss reads (out_rows, their targets and positions), and
 * where each sequence's start among them. */
static void find_out_rows(TfTrainer *t, const TfBatch *b) {
    const TfModel *m = t->m;
    int M = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        t->seq_out_start[s] = M;
        if (m->output_kind == TF_OUTPUT_CLASSIFY) {
            t->out_rows[M] = m->classify_at_last ? b->seq_start[s + 1] - 1 : b->seq_start[s];
            t->out_targets[M++] = b->labels ? b->labels[s] : 0;
            continue;
        }
        for (int n = b->seq_start[s]; n < b->seq_start[s + 1]; n++)
            if (b->targets && b->targets[n] >= 0) {
                t->out_rows[M] = n;
                t->out_targets[M++] = b->targets[n];
            }
    }
    t->seq_out_start[b->n_seqs] = M;
    for (int i = 0; i < M; i++) t->out_pos[i] = t->pos[t->out_rows[i]];
    t->n_out = M;
}

static void zero(float *p, size_t n) { memset(p, 0, n * sizeof *p); }
static double attn_loss(const TfTrainer *t, const TfBatch *b, int l, int s, float *dpre);

/* ---- work split over threads -------------------------------------------------
 * LayerNorm over many rows: forward, rows are independent; backward, the
 * input gradient is per row too, and the parameter gradients are summed per
 * block of LN_BLOCK rows, then the blocks in order, so the result depends on
 * the number of rows, never on the number of threads. Small batches take
 * the plain kernels. Attention: each sequence reads and writes only its own
 * rows, so the result is the same for any number of threads. */
#define LN_MIN_ROWS 512

typedef struct LnJob {
    float *out, *mean, *rstd, *dinp, *part;
    const float *inp, *weight, *bias, *dout, *cmean, *crstd;
    int N, C;
    float eps;
} LnJob;

static void ln_forward_range(void *ctx, int lo, int hi, int worker) {
    const LnJob *j = ctx;
    (void)worker;
    long r0 = (long)lo * LN_BLOCK, r1 = (long)hi * LN_BLOCK < j->N ? (long)hi * LN_BLOCK : j->N;
    layernorm_forward(j->out + r0 * j->C, j->mean + r0, j->rstd + r0, j->inp + r0 * j->C,
                         j->weight, j->bias, (int)(r1 - r0), j->C, j->eps);
}

static void ln_backward_range(void *ctx, int lo, int hi, int worker) {
    const LnJob *j = ctx;
    (void)worker;
    for (int b = lo; b < hi; b++) {
        long r0 = (long)b * LN_BLOCK, r1 = r0 + LN_BLOCK < j->N ? r0 + LN_BLOCK : j->N;
        float *pw = j->part + (size_t)b * 2 * j->C, *pb = pw + j->C;
        memset(pw, 0, 2 * (size_t)j->C * sizeof *pw);
        nn_layernorm_backward(j->dinp + r0 * j->C, pw, pb, j->dout + r0 * j->C,
                              j->inp + r0 * j->C, j->weight, j->cmean + r0, j->crstd + r0,
                              (int)(r1 - r0), j->C);
    }
}

/* Threads for one attention layer's per-sequence work: one when the batch is
 * too small for a second thread to pay (the work is about H x sum T^2 x d). */
static int attn_threads(const TfTrainer *t, const TfBatch *b, const TfLayer *ly) {
    long work = (long)ly->n_heads * t->att_off[b->n_seqs] * (ly->d_head + ly->d_vhead);
    return work < 200000 ? 1 : t->threads;
}

typedef struct AttnJob {
    TfTrainer *t;
    const TfBatch *b;
    const TfLayer *ly;
    LayerActs *a;
    const float *dattout;
    int l;
} AttnJob;

/* The group of sequences grp[gi] .. grp[gi + 1] - 1 for the attention
 * kernels (nn.h): keys and values from each sequence's first row; queries
 * from the same row, or (compact) from its first out row. The group's
 * scores, interleaved (nn.h), fill the space its sequences' would: from H x
 * att_off of its first sequence (full), or from `off` (compact). */
static NnGroup group_of(const TfTrainer *t, const TfBatch *b, const int *grp, int gi, int H,
                        int compact, long off) {
    NnGroup g = {.G = grp[gi + 1] - grp[gi], .at = compact ? off : (long)H * t->att_off[grp[gi]]};
    for (int i = 0; i < g.G; i++) {
        const int s = grp[gi] + i;
        g.row[i] = b->seq_start[s];
        g.qrow[i] = compact ? t->seq_out_start[s] : g.row[i];
    }
    return g;
}

/* Full attention (every row a query): activations at H x att_off[s]. */
static void full_forward_range(void *ctx, int lo, int hi, int worker) {
    const AttnJob *j = ctx;
    const TfTrainer *t = j->t;
    const TfLayer *ly = j->ly;
    const int H = ly->n_heads, HD = H * ly->d_head, HV = H * ly->d_vhead;
    float *scratch = t->scratch + (size_t)worker * t->scratch_per;
    for (int gi = lo; gi < hi; gi++) {
        NnGroup g = group_of(t, j->b, t->grp, gi, H, 0, 0);
        const int T = j->b->seq_start[t->grp[gi] + 1] - j->b->seq_start[t->grp[gi]];
        if (!grouped(t, ly, T)) {
            for (int i = 0; i < g.G; i++) {
                const long r0 = g.row[i], at = (long)H * t->att_off[t->grp[gi] + i];
                nn_attention_forward(j->a->attout + r0 * HV, j->a->preatt + at, j->a->att + at,
                                     scratch, j->a->q + r0 * HD, j->a->k + r0 * HD,
                                     j->a->v + r0 * HV, T, H, ly->d_head, ly->d_vhead, ly->scale,
                                     ly->causal);
            }
            continue;
        }
        nn_attention_group_forward(j->a->attout, t->all_scores ? j->a->preatt : NULL, j->a->att,
                                   scratch, j->a->q, j->a->k, j->a->v, &g, NULL, T, T, H,
                                   ly->d_head, ly->d_vhead, ly->scale, ly->causal, t->all_scores);
    }
}

static void full_backward_range(void *ctx, int lo, int hi, int worker) {
    const AttnJob *j = ctx;
    TfTrainer *t = j->t;
    const TfBatch *b = j->b;
    const TfLayer *ly = j->ly;
    const int H = ly->n_heads, HD = H * ly->d_head, HV = H * ly->d_vhead;
    float *scratch = t->scratch + (size_t)worker * t->scratch_per;
    for (int gi = lo; gi < hi; gi++) {
        NnGroup g = group_of(t, b, t->grp, gi, H, 0, 0);
        const int s = t->grp[gi], T = b->seq_start[s + 1] - b->seq_start[s];
        int has = 0;
        for (int i = 0; i < b->n_attn; i++)
            has |= b->attn[i].seq == s && b->attn[i].layer == t->attn_index[j->l];
        if (has) { /* such a sequence is a group of its own (make_groups) */
            zero(t->dpreatt, (size_t)H * T * T);
            attn_loss(t, b, j->l, s, t->dpreatt);
            g.extra = t->dpreatt;
        }
        if (!grouped(t, ly, T)) {
            for (int i = 0; i < g.G; i++) {
                const long r0 = g.row[i], at = (long)H * t->att_off[s + i];
                nn_attention_backward(t->dq + r0 * HD, t->dk + r0 * HD, t->dv + r0 * HV, scratch,
                                      j->dattout + r0 * HV, g.extra, j->a->q + r0 * HD,
                                      j->a->k + r0 * HD, j->a->v + r0 * HV, j->a->att + at, T, H,
                                      ly->d_head, ly->d_vhead, ly->scale, ly->causal);
            }
            continue;
        }
        nn_attention_group_backward(t->dq, t->dk, t->dv, scratch, j->dattout, j->a->q, j->a->k,
                                    j->a->v, j->a->att, &g, NULL, T, T, H, ly->d_head,
                                    ly->d_vhead, ly->scale, ly->causal);
    }
}

/* Compact attention (out rows only): sequence s's activations start at
 * H x (rows of the sequences before it) x their lengths, R x H x T each. */
static long rows_offset(const TfTrainer *t, const TfBatch *b, int s, int H) {
    long off = 0;
    for (int i = 0; i < s; i++)
        off += (long)(t->seq_out_start[i + 1] - t->seq_out_start[i]) * H *
               (b->seq_start[i + 1] - b->seq_start[i]);
    return off;
}

static void rows_range(void *ctx, int lo, int hi, int worker, int backward) {
    const AttnJob *j = ctx;
    TfTrainer *t = j->t;
    const TfBatch *b = j->b;
    const TfLayer *ly = j->ly;
    const int H = ly->n_heads, HD = H * ly->d_head, HV = H * ly->d_vhead;
    long off = rows_offset(t, b, t->rgrp[lo], H);
    float *scratch = t->scratch + (size_t)worker * t->scratch_per;
    for (int gi = lo; gi < hi; gi++) {
        NnGroup g = group_of(t, b, t->rgrp, gi, H, 1, off);
        const int s = t->rgrp[gi], T = b->seq_start[s + 1] - b->seq_start[s];
        const int o0 = t->seq_out_start[s], R = t->seq_out_start[s + 1] - o0;
        const int *pos = t->out_pos + o0; /* the same in every sequence of the group */
        off += (long)g.G * R * H * T;
        if (grouped(t, ly, T)) {
            if (backward)
                nn_attention_group_backward(t->dq, t->dk, t->dv, scratch, j->dattout, j->a->q,
                                            j->a->k, j->a->v, j->a->att, &g, pos, R, T, H,
                                            ly->d_head, ly->d_vhead, ly->scale, ly->causal);
            else
                nn_attention_group_forward(j->a->attout, NULL, j->a->att, scratch, j->a->q,
                                           j->a->k, j->a->v, &g, pos, R, T, H, ly->d_head,
                                           ly->d_vhead, ly->scale, ly->causal, 0);
            continue;
        }
        for (int i = 0; i < g.G; i++) { /* one at a time */
            const long r0 = g.row[i], q0 = g.qrow[i], at = g.at + (long)i * R * H * T;
            if (backward)
                nn_attention_rows_backward(t->dq + q0 * HD, t->dk + r0 * HD, t->dv + r0 * HV,
                                           scratch, j->dattout + q0 * HV, j->a->q + q0 * HD,
                                           j->a->k + r0 * HD, j->a->v + r0 * HV, j->a->att + at,
                                           pos, R, T, H, ly->d_head, ly->d_vhead, ly->scale,
                                           ly->causal);
            else
                nn_attention_rows_forward(j->a->attout + q0 * HV, j->a->preatt + at,
                                          j->a->att + at, scratch, j->a->q + q0 * HD,
                                          j->a->k + r0 * HD, j->a->v + r0 * HV, pos, R, T, H,
                                          ly->d_head, ly->d_vhead, ly->scale, ly->causal);
        }
    }
}

static void rows_forward_range(void *ctx, int lo, int hi, int worker) {
    rows_range(ctx, lo, hi, worker, 0);
}

static void rows_backward_range(void *ctx, int lo, int hi, int worker) {
    rows_range(ctx, lo, hi, worker, 1);
}

/* ---- forward: one function per layer kind -------------------------------------- */

/* out[rows, C] = LayerNorm(in) with the layer's norm_weight and norm_bias;
 * the layer's mean and rstd are saved. */
static void layernorm_layer_forward(TfTrainer *t, const TfLayer *ly, LayerActs *a, float *out,
                                    const float *in, int rows) {
    const int C = t->m->d_model;
    const float *w = P(t, ly->norm_weight), *bias = P(t, ly->norm_bias);
    if (rows < LN_MIN_ROWS) {
        layernorm_forward(out, a->ln_mean, a->ln_rstd, in, w, bias, rows, C, ly->norm_eps);
        return;
    }
    LnJob j = {out, a->ln_mean, a->ln_rstd, NULL, NULL, in, w, bias, NULL, NULL, NULL,
               rows, C, ly->norm_eps};
    parallel_ranges((rows + LN_BLOCK - 1) / LN_BLOCK, NULL, t->threads, ln_forward_range, &j);
}

/* a->y = the attention sublayer of ain [N, C] (its normalised input):
 * queries, keys, values, the heads, the output projection. In the compact
 * layer (see `compact`), keys and values for every row, the rest for the M
 * out rows alone: a->y is then [M, C]. */
static void attention_layer_forward(TfTrainer *t, const TfBatch *b, int l, const float *ain) {
    const TfLayer *ly = &t->m->layers[l];
    LayerActs *a = &t->acts[l];
    const int C = t->m->d_model, N = b->seq_start[b->n_seqs];
    const int H = ly->n_heads, HD = H * ly->d_head, HV = H * ly->d_vhead;
    const int compact = t->compact && l == t->last_attn, rows = compact ? t->n_out : N;
    const float *qin = ain;
    if (compact) {
        for (int i = 0; i < rows; i++)
            memcpy(t->qin + (long)i * C, ain + (long)t->out_rows[i] * C, (size_t)C * sizeof(float));
        qin = t->qin;
    }
    matmul_forward(a->q, qin, P(t, ly->query), OPTP(t, ly->query_bias), rows, C, HD, 0);
    matmul_forward(a->k, ain, P(t, ly->key), OPTP(t, ly->key_bias), N, C, HD, 0);
    matmul_forward(a->v, ain, P(t, ly->value), OPTP(t, ly->value_bias), N, C, HV, 0);
    AttnJob job = {t, b, ly, a, NULL, l};
    if (compact)
        parallel_ranges(t->n_rgrp, t->rgrp_cost, attn_threads(t, b, ly), rows_forward_range, &job);
    else
        parallel_ranges(t->n_grp, t->grp_cost, attn_threads(t, b, ly), full_forward_range, &job);
    if (ly->output >= 0) {
        matmul_forward(a->y, a->attout, P(t, ly->output), OPTP(t, ly->output_bias), rows, HV, C, 0);
    } else {
        memcpy(a->y, a->attout, (size_t)rows * C * sizeof(float));
        if (ly->output_bias >= 0)
            for (int n = 0; n < rows; n++)
                for (int c = 0; c < C; c++) a->y[(long)n * C + c] += P(t, ly->output_bias)[c];
    }
}

/* a->y [rows, C] = fc2(act(fc1(ain))). */
static void mlp_layer_forward(TfTrainer *t, const TfLayer *ly, LayerActs *a, const float *ain,
                              int rows) {
    const int C = t->m->d_model, F = ly->d_hidden;
    matmul_forward(a->hpre, ain, P(t, ly->fc1_weight), OPTP(t, ly->fc1_bias), rows, C, F, 0);
    memcpy(a->hact, a->hpre, (size_t)rows * F * sizeof(float));
    if (ly->act == TF_ACT_GELU) gelu_forward(a->hact, (long)rows * F);
    else if (ly->act == TF_ACT_GELU_TANH) gelu_tanh_forward(a->hact, (long)rows * F);
    else relu_forward(a->hact, (long)rows * F);
    matmul_forward(a->y, a->hact, P(t, ly->fc2_weight), OPTP(t, ly->fc2_bias), rows, F, C, 0);
}

/* out = in + y (dropout applied to y first): rows_out rows; when the layer
 * compacted the stream (rows_out < rows_in), out row i adds in's out row i. */
static void residual_forward(TfTrainer *t, float *out, const float *in, LayerActs *a, int rows_in,
                             int rows_out, TfRng *rng) {
    const int C = t->m->d_model;
    if (t->batch_has_dropout) {
        make_mask(a->mask, (long)rows_out * C, t->o.dropout, rng);
        for (long i = 0; i < (long)rows_out * C; i++) a->y[i] *= a->mask[i];
    }
    if (rows_out == rows_in) {
        for (long i = 0; i < (long)rows_out * C; i++) out[i] = in[i] + a->y[i];
        return;
    }
    for (int i = 0; i < rows_out; i++) {
        const float *x = in + (long)t->out_rows[i] * C, *y = a->y + (long)i * C;
        float *o = out + (long)i * C;
        for (int c = 0; c < C; c++) o[c] = x[c] + y[c];
    }
}

/* Whether sequences s and e of the batch can share a group of the
 * attention kernels (nn.h, NnGroup): the same length and no attention-score
 * targets, longer than NN_SHORT_T (shorter ones run alone, through the
 * one-sequence kernels); with `rows` (the compact layer), also the same out
 * positions. */
static int same_group(const TfTrainer *t, const TfBatch *b, int s, int e, int rows) {
    const int T = b->seq_start[s + 1] - b->seq_start[s];
    if (T <= NN_SHORT_T || b->seq_start[e + 1] - b->seq_start[e] != T) return 0;
    for (int i = 0; i < b->n_attn; i++)
        if (b->attn[i].seq == s || b->attn[i].seq == e) return 0;
    if (!rows) return 1;
    const int o = t->seq_out_start[s], p = t->seq_out_start[e], R = t->seq_out_start[s + 1] - o;
    if (t->seq_out_start[e + 1] - p != R) return 0;
    return memcmp(t->out_pos + o, t->out_pos + p, (size_t)R * sizeof *t->out_pos) == 0;
}

/* The batch's sequences in groups for the attention kernels: runs of at
 * most NN_LANES consecutive sequences that can share one (same_group), each
 * group's first sequence in start, its cumulative T*T in cost (for
 * parallel_ranges). A sequence's results do not depend on its group
 * (nn.h), so neither do the trainer's on how a batch is grouped or split.
 * Returns the number of groups. */
static int make_groups(const TfTrainer *t, const TfBatch *b, int rows, int *start, long *cost) {
    int n = 0;
    cost[0] = 0;
    for (int s = 0; s < b->n_seqs; n++) {
        int e = s + 1;
        while (e < b->n_seqs && e - s < NN_LANES && same_group(t, b, s, e, rows)) e++;
        start[n] = s;
        cost[n + 1] = cost[n] + (t->att_off[e] - t->att_off[s]);
        s = e;
    }
    start[n] = b->n_seqs;
    return n;
}

/* Positions, out rows and the per-sequence score offsets of a batch. */
static void prepare_batch(TfTrainer *t, const TfBatch *b) {
    const int N = b->seq_start[b->n_seqs];
    for (int s = 0; s < b->n_seqs; s++)
        for (int n = b->seq_start[s]; n < b->seq_start[s + 1]; n++) t->pos[n] = n - b->seq_start[s];
    find_out_rows(t, b);
    t->att_off[0] = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        long T = b->seq_start[s + 1] - b->seq_start[s];
        t->att_off[s + 1] = t->att_off[s] + T * T;
    }
    t->compact = t->last_attn >= 0 && t->n_out < N && b->n_attn == 0 && !t->no_compact;
    t->n_grp = make_groups(t, b, 0, t->grp, t->grp_cost);
    t->n_rgrp = make_groups(t, b, 1, t->rgrp, t->rgrp_cost);
}

/* Runs the model on the batch; fills the output rows and returns the summed
 * cross-entropy (not averaged). */
static double forward(TfTrainer *t, const TfBatch *b, int train, long step) {
    const TfModel *m = t->m;
    const int C = m->d_model, N = b->seq_start[b->n_seqs];
    const size_t RC = (size_t)t->max_rows * C;
    prepare_batch(t, b);
    embedding_forward(t->resid, b->tokens, t->pos, P(t, m->tok_embed), P(t, m->pos_embed), N, C);
    t->batch_has_dropout = train && t->o.dropout > 0;
    t->all_scores = !train || b->n_attn > 0; /* trainer_attention_scores shows them all */
    TfRng rng;
    // Masks per step and, in a chunk of a larger batch, per chunk.
    rng_seed(&rng, t->o.seed * 1000003u + (uint64_t)step +
                       (uint64_t)b->chunk * 0x632BE59BD9B4E019ull);
    int rows = N; /* rows of the residual stream now: N, or M after compaction */
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        LayerActs *a = &t->acts[l];
        float *in = t->resid + (size_t)l * RC, *out = t->resid + (size_t)(l + 1) * RC;
        if (ly->kind == TF_LAYER_NORM) {
            layernorm_layer_forward(t, ly, a, out, in, rows);
            continue;
        }
        const float *ain = in;
        if (ly->norm_weight >= 0) { /* pre-norm */
            layernorm_layer_forward(t, ly, a, a->lnout, in, rows);
            ain = a->lnout;
        }
        int rows_in = rows;
        if (ly->kind == TF_LAYER_ATTENTION) {
            attention_layer_forward(t, b, l, ain);
            if (t->compact && l == t->last_attn) rows = t->n_out;
        } else {
            mlp_layer_forward(t, ly, a, ain, rows);
        }
        residual_forward(t, out, in, a, rows_in, rows, &rng);
    }
    // The rows the loss reads, gathered (compacted: rows 0..M-1 already).
    const float *x = t->resid + (size_t)m->n_layers * RC;
    const int M = t->n_out;
    for (int i = 0; i < M; i++)
        memcpy(t->outx + (long)i * C, x + (long)(t->compact ? i : t->out_rows[i]) * C,
               (size_t)C * sizeof(float));
    if (M == 0) return 0.0;
    matmul_forward(t->logits, t->outx, P(t, m->unembed), OPTP(t, m->unembed_bias), M, C,
                   t->n_outputs, 0);
    return nn_crossentropy_forward(t->probs, t->logits, t->out_targets, M, t->n_outputs);
}

/* The attention-score loss of the batch (after forward); with grad set,
 * also its gradient for attention layer `layer`, sequence s, into dpre. */
static double attn_loss(const TfTrainer *t, const TfBatch *b, int l, int s, float *dpre) {
    double loss = 0.0;
    const TfModel *m = t->m;
    int n_seqs = 0; /* sequences with targets */
    for (int i = 0; i < b->n_attn; i++) {
        int first = 1;
        for (int j = 0; j < i; j++) first &= b->attn[j].seq != b->attn[i].seq;
        n_seqs += first;
    }
    if (b->loss_attn_seqs > 0) n_seqs = b->loss_attn_seqs; /* a chunk: the whole batch's */
    for (int i = 0; i < b->n_attn; i++) {
        const TfAttnTarget *a = &b->attn[i];
        int ll = -1;
        for (int j = 0; j < m->n_layers; j++)
            if (t->attn_index[j] == a->layer) ll = j;
        if (l >= 0 && (ll != l || a->seq != s)) continue;
        int T = b->seq_start[a->seq + 1] - b->seq_start[a->seq];
        long at = (long)m->layers[ll].n_heads * t->att_off[a->seq] + (long)a->head * T * T;
        const float *pre = t->acts[ll].preatt + at;
        float *d = dpre ? dpre + (long)a->head * T * T : NULL;
        if (a->kind == TF_ATTN_PATTERN) {
            // KL(p || att) per row, mean over the T rows; its gradient with
            // respect to the scores is att - p (each p row sums to 1).
            const float *att = t->acts[ll].att + at;
            double w = (double)a->weight / ((double)T * n_seqs);
            for (int i = 0; i < T; i++) {
                double psum = 0;
                for (int j = 0; j < T; j++) psum += a->target[i * T + j];
                for (int j = 0; j < T; j++) {
                    double p = a->target[i * T + j], q = att[i * T + j];
                    if (p > 0) loss += w * p * log(p / (q > 1e-30 ? q : 1e-30));
                    if (d) d[i * T + j] += (float)(w * (psum * q - p));
                }
            }
            continue;
        }
        double w = (double)a->weight / ((double)T * T * n_seqs);
        for (int k = 0; k < T * T; k++) {
            double diff = (double)pre[k] - (double)a->target[k];
            loss += w * diff * diff;
            if (d) d[k] += (float)(2.0 * w * diff);
        }
    }
    return loss;
}


/* ---- backward: the mirror of forward ------------------------------------------ */

/* dinp [rows, C] += the gradient of layernorm_layer_forward's input, given
 * dout, the gradient of its output; parameter gradients accumulate. */
static void layernorm_layer_backward(TfTrainer *t, const TfLayer *ly, const LayerActs *a,
                                     float *dinp, const float *dout, const float *in, int rows) {
    const int C = t->m->d_model;
    float *dw = G(t, ly->norm_weight), *db = G(t, ly->norm_bias);
    const float *w = P(t, ly->norm_weight);
    if (rows < LN_MIN_ROWS) {
        nn_layernorm_backward(dinp, dw, db, dout, in, w, a->ln_mean, a->ln_rstd, rows, C);
        return;
    }
    int blocks = (rows + LN_BLOCK - 1) / LN_BLOCK;
    LnJob j = {NULL, NULL, NULL, dinp, t->ln_part, in, w, NULL, dout, a->ln_mean, a->ln_rstd,
               rows, C, 0};
    parallel_ranges(blocks, NULL, t->threads, ln_backward_range, &j);
    for (int blk = 0; blk < blocks; blk++) {
        const float *pw = t->ln_part + (size_t)blk * 2 * C, *pb = pw + C;
        for (int c = 0; c < C; c++) {
            dw[c] += pw[c];
            db[c] += pb[c];
        }
    }
}

/* t->dain [N, C] = the gradient of attention_layer_forward's input ain,
 * given dy, the gradient of a->y ([M, C] in the compact layer). */
static void attention_layer_backward(TfTrainer *t, const TfBatch *b, int l, const float *ain,
                                     const float *dy) {
    const TfLayer *ly = &t->m->layers[l];
    LayerActs *a = &t->acts[l];
    const int C = t->m->d_model, N = b->seq_start[b->n_seqs];
    const int H = ly->n_heads, HD = H * ly->d_head, HV = H * ly->d_vhead;
    const int compact = t->compact && l == t->last_attn, rows = compact ? t->n_out : N;
    const float *dattout = dy;
    if (ly->output >= 0) {
        matmul_backward(t->dattout, G(t, ly->output), OPTG(t, ly->output_bias), dy, a->attout,
                        P(t, ly->output), rows, HV, C, 0);
        dattout = t->dattout;
    } else if (ly->output_bias >= 0) {
        matmul_backward(NULL, NULL, G(t, ly->output_bias), dy, NULL, NULL, rows, 0, C, 1);
    }
    zero(t->dq, (size_t)rows * HD);
    zero(t->dk, (size_t)N * HD);
    zero(t->dv, (size_t)N * HV);
    AttnJob job = {t, b, ly, a, dattout, l};
    if (compact) {
        parallel_ranges(t->n_rgrp, t->rgrp_cost, attn_threads(t, b, ly), rows_backward_range, &job);
        // Queries came from the out rows' inputs: their gradient goes back there.
        matmul_backward(t->doutx, G(t, ly->query), OPTG(t, ly->query_bias), t->dq, t->qin,
                        P(t, ly->query), rows, C, HD, 0);
        zero(t->dain, (size_t)N * C);
        for (int i = 0; i < rows; i++) {
            float *d = t->dain + (long)t->out_rows[i] * C;
            const float *g = t->doutx + (long)i * C;
            for (int c = 0; c < C; c++) d[c] += g[c];
        }
    } else {
        // Attention-score targets share one gradient buffer: one thread then.
        parallel_ranges(t->n_grp, t->grp_cost, b->n_attn ? 1 : attn_threads(t, b, ly),
                        full_backward_range, &job);
        matmul_backward(t->dain, G(t, ly->query), OPTG(t, ly->query_bias), t->dq, ain,
                        P(t, ly->query), N, C, HD, 0);
    }
    matmul_backward(t->dain, G(t, ly->key), OPTG(t, ly->key_bias), t->dk, ain, P(t, ly->key), N,
                    C, HD, 1);
    matmul_backward(t->dain, G(t, ly->value), OPTG(t, ly->value_bias), t->dv, ain,
                    P(t, ly->value), N, C, HV, 1);
}

/* t->dain [rows, C] = the gradient of mlp_layer_forward's input, given dy. */
static void mlp_layer_backward(TfTrainer *t, const TfLayer *ly, const LayerActs *a,
                               const float *ain, const float *dy, int rows) {
    const int C = t->m->d_model, F = ly->d_hidden;
    zero(t->dhpre, (size_t)rows * F);
    matmul_backward(t->dh, G(t, ly->fc2_weight), OPTG(t, ly->fc2_bias), dy, a->hact,
                    P(t, ly->fc2_weight), rows, F, C, 0);
    if (ly->act == TF_ACT_GELU) gelu_backward(t->dhpre, a->hpre, t->dh, (long)rows * F);
    else if (ly->act == TF_ACT_GELU_TANH) gelu_tanh_backward(t->dhpre, a->hpre, t->dh, (long)rows * F);
    else relu_backward(t->dhpre, a->hpre, t->dh, (long)rows * F);
    matmul_backward(t->dain, G(t, ly->fc1_weight), OPTG(t, ly->fc1_bias), t->dhpre, ain,
                    P(t, ly->fc1_weight), rows, C, F, 0);
}

/* The unembedding and the loss: t->dres [rows, C] = the gradient of the top
 * of the residual stream (rows: M compacted, else N). */
static void loss_backward(TfTrainer *t, const TfBatch *b, int rows) {
    const TfModel *m = t->m;
    const int C = m->d_model, M = t->n_out, V = t->n_outputs;
    zero(t->dres, (size_t)rows * C);
    if (M == 0) return;
    zero(t->dlogits, (size_t)M * V);
    int rows_all = b->loss_rows > 0 ? b->loss_rows : M; /* a chunk: the whole batch's */
    nn_crossentropy_backward(t->dlogits, t->probs, t->out_targets, M, V, 1.0f / (float)rows_all);
    matmul_backward(t->doutx, G(t, m->unembed), OPTG(t, m->unembed_bias), t->dlogits, t->outx,
                    P(t, m->unembed), M, C, V, 0);
    for (int i = 0; i < M; i++) {
        float *d = t->dres + (long)(t->compact ? i : t->out_rows[i]) * C;
        const float *g = t->doutx + (long)i * C;
        for (int c = 0; c < C; c++) d[c] += g[c];
    }
}

static void swap_dres(TfTrainer *t) {
    float *tmp = t->dres;
    t->dres = t->dres2;
    t->dres2 = tmp;
}

static void backward(TfTrainer *t, const TfBatch *b) {
    const TfModel *m = t->m;
    const int C = m->d_model, N = b->seq_start[b->n_seqs];
    const size_t RC = (size_t)t->max_rows * C;
    int rows = t->compact ? t->n_out : N; /* rows of the residual stream at the top */
    zero(t->grads, t->n_params);
    loss_backward(t, b, rows);
    for (int l = m->n_layers - 1; l >= t->first_trained; l--) {
        const TfLayer *ly = &m->layers[l];
        LayerActs *a = &t->acts[l];
        const float *in = t->resid + (size_t)l * RC;
        if (ly->kind == TF_LAYER_NORM) {
            zero(t->dres2, (size_t)rows * C);
            layernorm_layer_backward(t, ly, a, t->dres2, t->dres, in, rows);
            swap_dres(t);
            continue;
        }
        const float *ain = ly->norm_weight >= 0 ? a->lnout : in;
        const float *dy = t->dres; /* the gradient of the sublayer's output a->y */
        if (t->batch_has_dropout) {
            for (long i = 0; i < (long)rows * C; i++) t->dy[i] = t->dres[i] * a->mask[i];
            dy = t->dy;
        }
        if (ly->kind == TF_LAYER_ATTENTION) attention_layer_backward(t, b, l, ain, dy);
        else mlp_layer_backward(t, ly, a, ain, dy, rows);
        if (t->compact && l == t->last_attn) {
            // The residual path of the compacted rows: back to their input rows.
            zero(t->dres2, (size_t)N * C);
            for (int i = 0; i < rows; i++) {
                float *d = t->dres2 + (long)t->out_rows[i] * C;
                const float *g = t->dres + (long)i * C;
                for (int c = 0; c < C; c++) d[c] += g[c];
            }
            swap_dres(t);
            rows = N;
        }
        // The residual path passes dres through; the sublayer's input adds to it.
        if (ly->norm_weight >= 0) layernorm_layer_backward(t, ly, a, t->dres, t->dain, in, rows);
        else
            for (long i = 0; i < (long)rows * C; i++) t->dres[i] += t->dain[i];
    }
    if (t->embed_trained)
        embedding_backward(G(t, m->tok_embed),
                           t->trainable[m->pos_embed] ? G(t, m->pos_embed) : NULL, t->dres,
                           b->tokens, t->pos, N, C);
}

double trainer_forward_backward(TfTrainer *t, const TfBatch *b, long step, double *ce_out) {
    double ce = forward(t, b, 1, step);
    int rows = b->loss_rows > 0 ? b->loss_rows : t->n_out;
    double mean_ce = rows > 0 ? ce / rows : 0.0;
    if (ce_out) *ce_out = mean_ce;
    double loss = mean_ce + attn_loss(t, b, -1, -1, NULL);
    backward(t, b);
    return loss;
}

/* Whether output row i's argmax is its target. */
static int row_correct(const TfTrainer *t, int i) {
    return argmax(t->logits + (long)i * t->n_outputs, t->n_outputs) == t->out_targets[i];
}

void trainer_predict(TfTrainer *t, const TfBatch *b, int *pred, float *prob) {
    t->no_compact = 1; /* every row, so that the attention scores are all there */
    forward(t, b, 0, 0);
    t->no_compact = 0;
    if (t->m->output_kind == TF_OUTPUT_CLASSIFY) {
        for (int s = 0; s < b->n_seqs; s++) {
            pred[s] = argmax(t->logits + (long)s * t->n_outputs, t->n_outputs);
            if (prob) prob[s] = t->probs[(long)s * t->n_outputs + pred[s]];
        }
        return;
    }
    for (int s = 0; s < b->n_seqs; s++) pred[s] = 1;
    int s = 0;
    for (int i = 0; i < t->n_out; i++) {
        while (t->out_rows[i] >= b->seq_start[s + 1]) s++;
        if (!row_correct(t, i)) pred[s] = 0;
    }
}

double trainer_evaluate(TfTrainer *t, const TfBatch *b, int *n_correct) {
    double ce = forward(t, b, 0, 0);
    double loss = (t->n_out > 0 ? ce / t->n_out : 0.0) + attn_loss(t, b, -1, -1, NULL);
    int correct = 0;
    if (t->m->output_kind == TF_OUTPUT_CLASSIFY) {
        for (int i = 0; i < t->n_out; i++) correct += row_correct(t, i);
    } else {
        int s = 0, ok = 1, seen = 0;
        for (int i = 0; i < t->n_out; i++) {
            int si = s;
            while (t->out_rows[i] >= b->seq_start[si + 1]) si++;
            if (si != s) {
                correct += seen && ok;
                s = si;
                ok = 1;
            }
            seen = 1;
            ok &= row_correct(t, i);
        }
        correct += seen && ok;
    }
    *n_correct = correct;
    return loss;
}

/* Head `head`'s T x T block of sequence seq of the last batch, from a
 * layer's interleaved scores or weights (x: the layer's preatt or att; a
 * group's, nn.h) into out (t->picked); NULL when out of range. */
static const float *pick_head(const TfTrainer *t, int seq, int layer, int head, int *T, int w) {
    for (int l = 0; l < t->m->n_layers; l++) {
        const int H = t->m->layers[l].n_heads;
        if (t->attn_index[l] != layer || head < 0 || head >= H || seq < 0 || t->n_grp < 1 ||
            seq >= t->grp[t->n_grp])
            continue;
        int gi = 0;
        while (t->grp[gi + 1] <= seq) gi++;
        const int n = (int)(sqrt((double)(t->att_off[seq + 1] - t->att_off[seq])) + 0.5);
        const int one = !grouped(t, &t->m->layers[l], n); /* each sequence's scores apart */
        const int s0 = one ? seq : t->grp[gi], G = one ? 1 : t->grp[gi + 1] - s0, g = seq - s0;
        const float *x = (w ? t->acts[l].att : t->acts[l].preatt) + (long)H * t->att_off[s0];
        float *out = t->picked + (w ? (long)n * n : 0);
        for (long k = 0; k < (long)n * n; k++) out[k] = x[((long)head * n * n + k) * G + g];
        *T = n;
        return out;
    }
    return NULL;
}

const float *trainer_attention_scores(const TfTrainer *t, int seq, int layer, int head, int *T) {
    return pick_head(t, seq, layer, head, T, 0);
}

const float *trainer_attention_weights(const TfTrainer *t, int seq, int layer, int head, int *T) {
    return pick_head(t, seq, layer, head, T, 1);
}

/* ---- optimizer -------------------------------------------------------------- */

double trainer_step(TfTrainer *t, float lr) {
    double sq = 0.0;
    for (int i = 0; i < t->n_tensors; i++) {
        if (!t->trainable[i]) continue;
        const float *g = G(t, i);
        for (size_t j = 0; j < t->m->tensors[i].nelem; j++) sq += (double)g[j] * g[j];
    }
    double norm = sqrt(sq);
    float gscale = 1.0f;
    if (t->o.clip > 0 && norm > t->o.clip) gscale = (float)(t->o.clip / (norm + 1e-6));
    t->step++;
    const float b1 = t->o.beta1, b2 = t->o.beta2, eps = t->o.eps, wd = t->o.weight_decay;
    const double bc1 = 1.0 - pow(b1, (double)t->step), bc2 = 1.0 - pow(b2, (double)t->step);
    const float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    int overflow = !isfinite(norm); /* a gradient or moment beyond float32 */
    for (int i = 0; i < t->n_tensors; i++) {
        if (!t->trainable[i]) continue;
        size_t n = t->m->tensors[i].nelem;
        float *p = P(t, i), *g = G(t, i), *mo = t->mom + t->offset[i];
        float *ve = t->vel ? t->vel + t->offset[i] : NULL;
        switch (t->o.optimizer) {
        case TF_OPT_SGD:
            for (size_t j = 0; j < n; j++) {
                float gj = g[j] * gscale + wd * p[j];
                if (t->o.momentum > 0) {
                    mo[j] = t->o.momentum * mo[j] + gj;
                    gj = mo[j];
                }
                p[j] -= lr * gj;
            }
            break;
        case TF_OPT_ADAM:
        case TF_OPT_ADAMW: {
            // AdamW decays the parameter, Adam adds the decay to the
            // gradient; the other's term is x 1 or + 0 x p, which changes
            // nothing, so that the loop has no branch and vectorizes.
            const int decoupled = t->o.optimizer == TF_OPT_ADAMW;
            const float keep = decoupled ? 1.0f - lr * wd : 1.0f, l2 = decoupled ? 0.0f : wd;
            int bad = 0;
            for (size_t j = 0; j < n; j++) {
                float gj = g[j] * gscale + l2 * p[j];
                p[j] *= keep;
                mo[j] = b1 * mo[j] + (1.0f - b1) * gj;
                ve[j] = b2 * ve[j] + (1.0f - b2) * gj * gj;
                float denom = sqrtf(ve[j]) / bc2_sqrt + eps;
                p[j] -= step_size * mo[j] / denom;
                bad |= !(ve[j] <= FLT_MAX) | !(fabsf(mo[j]) <= FLT_MAX);
            }
            overflow |= bad;
            break;
        }
        default: break;
        }
    }
    return overflow ? INFINITY : norm;
}

float train_lr_at(long step, long total, float lr, long warmup, int cosine, float min_lr) {
    if (warmup > 0 && step < warmup) return lr * (float)(step + 1) / (float)warmup;
    if (!cosine) return lr;
    long span = total - warmup;
    double progress = span > 0 ? (double)(step - warmup) / (double)span : 1.0;
    if (progress > 1.0) progress = 1.0;
    return (float)(min_lr + 0.5 * (lr - min_lr) * (1.0 + cos(3.14159265358979323846 * progress)));
}

/* ---- checkpoints ------------------------------------------------------------ */

void trainer_sync_model(TfTrainer *t) {
    for (int i = 0; i < t->n_tensors; i++)
        memcpy(t->m->tensors[i].data, P(t, i), t->m->tensors[i].nelem * sizeof(float));
}

/* The tensor "optim.<kind>.<name of tensor i>", created when missing. */
static float *state_tensor(TfTrainer *t, const char *kind, int i, int create, TfError *err) {
    char name[512];
    snprintf(name, sizeof name, OPTIM_PREFIX "%s.%s", kind, t->m->tensors[i].name);
    int k = model_find_tensor(t->m, name);
    if (k < 0 && create) {
        int64_t shape[TF_MAX_NDIM];
        for (int d = 0; d < t->m->tensors[i].ndim; d++) shape[d] = t->m->tensors[i].shape[d];
        k = model_add_tensor(t->m, name, t->m->tensors[i].ndim, shape, err);
    }
    if (k < 0) return NULL;
    if (t->m->tensors[k].nelem != t->m->tensors[i].nelem) {
        tf_error_set(err, "tensor '%s' does not have the shape of '%s'", name,
                     t->m->tensors[i].name);
        return NULL;
    }
    return t->m->tensors[k].data;
}

int trainer_save(TfTrainer *t, const char *path, TfError *err) {
    trainer_sync_model(t);
    return tfw_write_tensors(t->m, t->n_tensors, path, err);
}

int trainer_save_checkpoint(TfTrainer *t, const char *path, TfError *err) {
    trainer_sync_model(t);
    for (int i = 0; i < t->n_tensors; i++) {
        if (!t->trainable[i]) continue;
        float *mo = state_tensor(t, "m", i, 1, err);
        float *ve = t->vel ? state_tensor(t, "v", i, 1, err) : NULL;
        if (!mo || (t->vel && !ve)) return -1;
        memcpy(mo, t->mom + t->offset[i], t->m->tensors[i].nelem * sizeof(float));
        if (ve) memcpy(ve, t->vel + t->offset[i], t->m->tensors[i].nelem * sizeof(float));
    }
    int k = model_find_tensor(t->m, OPTIM_PREFIX "step");
    if (k < 0) {
        int64_t one = 1;
        k = model_add_tensor(t->m, OPTIM_PREFIX "step", 1, &one, err);
        if (k < 0) return -1;
    }
    t->m->tensors[k].data[0] = (float)t->step;
    return tfw_write(t->m, path, err);
}

int trainer_load_state(TfTrainer *t, TfError *err) {
    int k = model_find_tensor(t->m, OPTIM_PREFIX "step");
    if (k < 0) return 0;
    float step = t->m->tensors[k].data[0];
    if (t->m->tensors[k].nelem != 1 || !(step >= 0 && step < 16777216.0f) || floorf(step) != step) {
        tf_error_set(err, "tensor 'optim.step' is not a step count");
        return -1;
    }
    for (int i = 0; i < t->n_tensors; i++) {
        if (!t->trainable[i]) continue;
        const float *mo = state_tensor(t, "m", i, 0, err);
        const float *ve = t->vel ? state_tensor(t, "v", i, 0, err) : NULL;
        if (!mo || (t->vel && !ve)) {
            tf_error_set(err, "the checkpoint has no %s optimizer state for '%s' (another optimizer?)",
                         tf_optimizer_names[t->o.optimizer], t->m->tensors[i].name);
            return -1;
        }
        memcpy(t->mom + t->offset[i], mo, t->m->tensors[i].nelem * sizeof(float));
        if (ve) memcpy(t->vel + t->offset[i], ve, t->m->tensors[i].nelem * sizeof(float));
    }
    t->step = (long)step;
    return 1;
}
