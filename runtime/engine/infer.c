/* infer.c: batched, incremental forward passes and greedy generation.
 *
 * Layout. Activations are feature-major: feature i of step row r is
 * x[i * n + r], n the rows of the step, so one feature over the batch is a
 * contiguous vector (linear.h). A step's rows are ordered with the *output
 * rows* first (the rows whose logits are read: the last prompt position, or
 * the one new token, of each sequence), then the others by position, then
 * sequence (so that each position's keys and values go into the caches as
 * one copy per channel: store_cache).
 *
 * What is skipped, and why it changes nothing:
 * - Weights: every linear map is packed to the rows and columns that can be
 *   non-zero (linear.c); the others multiply zeros.
 * - Attention channels: a query/key channel contributes to the score only
 *   if both its query row and its key row are non-zero; a value channel
 *   only if its value row is.
 * - Rows: the residual of a row that is not an output row is read later
 *   only through the keys and values of attention layers. A backward pass
 *   over the layers (plan_liveness) finds the columns those keys and values
 *   depend on; a layer writing none of them runs on the output rows only,
 *   and an attention layer computes its queries and outputs there only
 *   (keys and values at every row). Within a layer that must run at every
 *   row, its parts do the same (a scheduled layer holds several ops): only
 *   the heads, or the groups of hidden units writing common columns, whose
 *   output a live column needs run at every row; the others at the output
 *   rows (plan_split_heads, plan_split_mlp). Hooks turn this off: they see
 *   every row.
 *   A register with a run-time check (model.h's TfCheck) is tested at every
 *   row, so the pass counts it as read at every row after its layer. The
 *   columns no row past the output rows reads or writes start each step at
 *   0 at the output rows only (TfPlan's all_rows).
 * - Passes: a CSR map's or a small dense block's ReLU, and its addition to
 *   the residual stream, are done in its products' loop
 *   (linear_forward_fused), as the separate passes would do them.
 *
 * Dimension legend: n rows in this step, nf output rows (the first nf), S
 * sequences, L the model's max_len, d d_model, nk/nv kept key/value rows.
 */
#include "infer.h"
#include "utf8.h"

#include <float.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "intervene.h"
#include "kernels.h"
#include "linear.h"

typedef struct LayerPlan {
    TfLayerKind kind;
    int full;             /* runs at every row (else at output rows only) */
    const float *norm_w;  /* pre-norm (or the norm of a TF_LAYER_NORM), NULL when none */
    const float *norm_b;
    float eps;

    /* attention */
    TfLinear q, k, v, o;  /* o: output projection, reading packed value rows */
    int has_o;
    int o_col; /* o copies head channel j, weight 1, into residual column o_col + j; else -1 */
    int n_heads, d_head, d_vhead, causal;
    float scale;
    int k_from, v_from;   /* an earlier layer whose keys / values these are, or -1 */
    /* Keys that depend on the position only (plan_static_keys): n_static
     * packed key rows static_ch, their values static_val [L, n_static],
     * stored in the cache once (fill_static_keys); kd computes the other
     * key rows, packed key row kd_ch[j] each. n_static 0: k computes all. */
    int n_static, *static_ch, *kd_ch;
    float *static_val;
    TfLinear kd;
    int *pair_start;      /* [n_heads + 1] into pair_q / pair_k */
    int *pair_q, *pair_k; /* packed query / key row of each live channel */
    int *v_start;         /* [n_heads + 1]: kept value rows of head h are v_start[h]..v_start[h+1]-1 */
    char *head_full;      /* [n_heads] with split_heads: 1 where the head runs at every row */
    int split_heads;      /* some heads run at every row, the others at output rows only */

    /* MLP */
    TfLinear fc1, fc2;    /* fc2 reads packed hidden units */
    TfActivation act;
    /* With split_units, the hidden units in two groups that write disjoint
     * columns: fc1a/fc2a (with the bias of every column they do not share)
     * run at every row, fc1b/fc2b at output rows only (plan_split_mlp). */
    int split_units;
    TfLinear fc1a, fc2a, fc1b, fc2b;
    /* ReLU maps of one-to-one pairs (linear_mlp_pairs): fc1/fc2, fc1a/fc2a,
     * fc1b/fc2b, run in one pass */
    char pairs[3];

    /* run-time checks after this layer: model checks check_idx[0..n_checks-1] */
    int n_checks;
    int *check_idx;
} LayerPlan;

struct TfPlan {
    const TfModel *m;
    LayerPlan *layers;
    int *emb_cols;        /* columns where an embedding is non-zero */
    int n_emb_cols;
    float *emb_tok, *emb_pos; /* [n_emb_cols, n_vocab], [n_emb_cols, max_len]: those columns */
    /* [n_emb_cols] 1: every token's entry is +0 (embedded by runs of
     * positions); every position's entry is +0 (by token alone) */
    char *emb_pos_only, *emb_tok_only;
    /* [n_emb_cols] a by-token column that one token alone sets (every other
     * token's entry +-0: a one-hot token register): that token, else -1 */
    int *emb_one_tok;
    /* 1: every embedded value is finite (both tables finite, and no
     * column's largest token and position entries sum past FLT_MAX), so a
     * step's embedding needs no overflow test */
    int emb_finite;
    /* [d] 1: the column is read or written at rows past the output rows
     * (plan_liveness), so a step's every row starts at 0 there; elsewhere
     * only the output rows do (the other rows are never read). */
    char *all_rows;
    TfLinear unembed;     /* logits, with unembed.bias */
    int max_q, max_k, max_v, max_hidden, max_out, max_cols;
    int has_norm;
    int incremental;      /* 0 when a bidirectional layer forces full recompute */
    int numeric;          /* the output is a number (no unembedding): model_numeric_output */
};

struct TfInfer {
    const TfModel *m;
    const TfPlan *plan;
    TfPlan *own_plan;
    int max_seqs, max_rows;
    int use_cache;

    /* Per attention layer: keys [L, nk, S] and values [L, nv, S],
     * sequence-minor (kernels.h's attention_block_forward): the rows of a
     * block of sequences at one position and channel are one vector. */
    float **kcache, **vcache;
    int *seq_len;             /* [S] positions held in the caches */
    int static_stale;         /* an intervention overwrote static keys (fill_static_keys) */

    float *x;       /* [d, n] residual stream */
    float *xn;      /* [d, n] normalized input of a pre-norm layer */
    float *q, *k, *v;
    float *heads;   /* [nv, nf] attention outputs, packed value rows */
    float *hidden;  /* [F, nf] */
    float *delta;   /* [rows written, nf] what a layer adds */
    float *scratch; /* gathered inputs of dense blocks */
    float *att;     /* [L, TF_ATT_LANES] attention weights of a block of rows */
    float *scores;  /* [L, TF_ATT_LANES] their scaled scores, for the attention hook */
    float *hook_att, *hook_scores; /* [L] one row's, for the attention hook */
    /* attention_heads: the rows in block order, scratch, each row's T, and
     * the counting sort's buckets [max(L + 1, S) + 1]. */
    int *order, *order_tmp, *row_t, *bucket;
    /* attention_heads's blocks for order_key: block b takes rows order[r]
     * for blk[b].r0 <= r < blk[b].r0 + blk[b].w; ord_seq[r] and ord_t[r]
     * are row order[r]'s sequence and positions seen */
    struct AttBlockPlan {
        int r0, w, one_seq;
        long n_t; /* the positions its lanes see */
    } *blk;
    int n_blk, *ord_seq, *ord_t;
    int order_key; /* what order and row_t were computed for (-1: nothing) */
    /* The step's rows as runs of positions (embed_runs): run i covers rows
     * run_r0[i] .. run_r0[i + 1] - 1, at positions run_p0[i] + dp * j,
     * dp = run_dp[i] (0 or 1); n_runs of them. */
    int *run_r0, *run_p0, *run_dp, n_runs;
    /* store_cache's order of the step's rows [R]: by block of
     * STORE_BLOCK sequences, then position, then sequence; row_blk [R] each
     * row's block, st_off [R] scratch, st_start [S / STORE_BLOCK + 2] where
     * each block's rows start in pos_order, n_st_blocks of them. */
    int *pos_order, *row_blk, *st_start, n_st_blocks;
    int st_contig; /* the rows are one position's, of consecutive sequences, in order */
    long *st_off;
    /* Or the rows as runs of one position's consecutive sequences, in
     * order (a prompt pass: fill_rows puts its rows so): run i covers rows
     * st_run[i] .. st_run[i + 1] - 1, n_st_runs of them (0: not in use). */
    int *st_run, n_st_runs;
    /* One sequence's keys [L, live pairs] and values [L, kept value rows]
     * of every head, gathered for blocks of that sequence's rows; ident
     * [max_q + 1] = 0, 1, 2, ... */
    float *kg, *vg;
    int *ident;
    /* Heads whose gathered keys take few values (attention_groups): per
     * head h, its n_groups[h] (0: not grouped) distinct keys at
     * gkeys + TF_ATT_GROUPS * pair_start[h], the prefix counts at
     * gcounts + L * TF_ATT_GROUPS * h and value sums at
     * gvsums + L * TF_ATT_GROUPS * v_start[h]; gcls [L] scratch. Allocated
     * for models whose sequences can reach GATHER_MIN_T; grouped 0 turns
     * the grouping off (infer_set_grouped). */
    float *gkeys, *gcounts, *gvsums;
    int *gcls, *n_groups, grouped;
    float *stat;    /* [2 d] one row for LayerNorm (layernorm_forward_fm) */
    float *logits;  /* [n_out, max_seqs] */
    float *rowmajor; /* [n, d] for the layer hook */
    float *hookbuf;  /* [n, widest activation] for the activation hook */
    int *row_seq, *row_pos, *row_tok;

    /* Run-time checks (models with checks only): the first failure of each
     * sequence in the current call, at layer fail_layer[s] (-1: none) and
     * position fail_pos[s], described in fail_err[s]. */
    int n_failed;
    int *fail_layer, *fail_pos;
    TfError *fail_err;

    double flops;   /* floating-point operations done so far (2 per multiply-add) */

    /* Float32 overflow: set by the layer whose attention scores or output
     * became infinite or NaN (weights finite but too large), at output
     * row bad_row of the step; forward_rows then fails. */
    int bad, bad_row;

    TfLayerHook hook;
    void *hook_user;
    TfAttentionHook att_hook;
    void *att_hook_user;
    TfActivationHook act_hook;
    void *act_hook_user;
    const TfIntervention *iv; /* edits applied while running (intervene.h), or NULL */
};

/* Sequences at least this long have their keys and values gathered for
 * blocks of their rows (attention_heads). */
#define GATHER_MIN_T 64
/* Sequences per block of store_cache: a cache line of floats. */
#define STORE_BLOCK 16

static const float *tensor(const TfModel *m, int idx) {
    return idx >= 0 ? m->tensors[idx].data : NULL;
}

static int imax(int a, int b) { return a > b ? a : b; }

static inline int nonfinite(float v) { return !(fabsf(v) <= FLT_MAX); }

/* ------------------------------------------------------------------------ */
/* The plan                                                                 */
/* ------------------------------------------------------------------------ */

static void layer_plan_free(LayerPlan *lp) {
    linear_free(&lp->q);
    linear_free(&lp->k);
    linear_free(&lp->kd);
    free(lp->static_ch);
    free(lp->kd_ch);
    free(lp->static_val);
    linear_free(&lp->v);
    linear_free(&lp->o);
    linear_free(&lp->fc1);
    linear_free(&lp->fc2);
    linear_free(&lp->fc1a);
    linear_free(&lp->fc2a);
    linear_free(&lp->fc1b);
    linear_free(&lp->fc2b);
    free(lp->head_full);
    free(lp->pair_start);
    free(lp->pair_q);
    free(lp->pair_k);
    free(lp->v_start);
    free(lp->check_idx);
}

void plan_free(TfPlan *p) {
    if (!p) return;
    if (p->layers)
        for (int l = 0; l < p->m->n_layers; l++) layer_plan_free(&p->layers[l]);
    free(p->layers);
    free(p->emb_cols);
    free(p->emb_tok);
    free(p->emb_pos);
    free(p->emb_pos_only);
    free(p->emb_tok_only);
    free(p->emb_one_tok);
    free(p->all_rows);
    linear_free(&p->unembed);
    free(p);
}

/* Index of each output row of a packed map within its packed output, -1
 * for rows it never writes (their value is zero). */
static int *packed_index(const TfLinear *L) {
    int *map = malloc(((size_t)L->n_out + 1) * sizeof(int));
    if (!map) return NULL;
    for (int i = 0; i < L->n_out; i++) map[i] = -1;
    for (int k = 0; k < L->n_rows; k++) map[L->rows[k]] = k;
    return map;
}

static int plan_attention(const TfModel *m, const TfLayer *ly, LayerPlan *lp, TfError *err) {
    int d = m->d_model, H = ly->n_heads, dh = ly->d_head, dv = ly->d_vhead;
    if (linear_pack(&lp->q, tensor(m, ly->query), tensor(m, ly->query_bias), H * dh, d, NULL,
                    err) < 0 ||
        linear_pack(&lp->k, tensor(m, ly->key), tensor(m, ly->key_bias), H * dh, d, NULL, err) <
            0 ||
        linear_pack(&lp->v, tensor(m, ly->value), tensor(m, ly->value_bias), H * dv, d, NULL,
                    err) < 0)
        return -1;
    lp->n_heads = H;
    lp->d_head = dh;
    lp->d_vhead = dv;
    lp->causal = ly->causal;
    lp->scale = ly->scale;
    int *qi = packed_index(&lp->q), *ki = packed_index(&lp->k), *vi = packed_index(&lp->v);
    lp->pair_start = malloc(((size_t)H + 1) * sizeof(int));
    lp->pair_q = malloc(((size_t)H * dh + 1) * sizeof(int));
    lp->pair_k = malloc(((size_t)H * dh + 1) * sizeof(int));
    lp->v_start = malloc(((size_t)H + 1) * sizeof(int));
    int rc = -1;
    if (!qi || !ki || !vi || !lp->pair_start || !lp->pair_q || !lp->pair_k || !lp->v_start) {
        tf_error_set(err, "out of memory");
        goto done;
    }
    int np = 0;
    for (int h = 0; h < H; h++) {
        lp->pair_start[h] = np;
        for (int c = h * dh; c < (h + 1) * dh; c++)
            if (qi[c] >= 0 && ki[c] >= 0) {
                lp->pair_q[np] = qi[c];
                lp->pair_k[np] = ki[c];
                np++;
            }
    }
    lp->pair_start[H] = np;
    // Kept value rows are increasing, so each head's are consecutive.
    for (int h = 0, j = 0; h <= H; h++) {
        while (j < lp->v.n_rows && lp->v.rows[j] / dv < h) j++;
        lp->v_start[h] = j;
    }
    lp->has_o = ly->output >= 0;
    if (lp->has_o &&
        linear_pack(&lp->o, tensor(m, ly->output), tensor(m, ly->output_bias), d, H * dv, vi,
                    err) < 0)
        goto done;
    // An output projection that copies the heads into consecutive columns
    // (a seed op's read, a copy): the kernel adds them there itself, which
    // gives the bits o's pass would (1 * h is h).
    const TfLinear *O = &lp->o;
    int copy = lp->has_o && !O->dense && !O->bias && O->n_rows == lp->v.n_rows && O->n_rows > 0;
    for (int j = 0; copy && j < O->n_rows; j++)
        copy = O->ptr[j + 1] == O->ptr[j] + 1 && O->idx[O->ptr[j]] == j &&
               O->w[O->ptr[j]] == 1.0f && O->rows[j] == O->rows[0] + j;
    lp->o_col = copy ? O->rows[0] : -1;
    rc = 0;
done:
    free(qi);
    free(ki);
    free(vi);
    return rc;
}

static int plan_mlp(const TfModel *m, const TfLayer *ly, LayerPlan *lp, TfError *err) {
    int d = m->d_model, F = ly->d_hidden;
    lp->act = ly->act;
    if (linear_pack(&lp->fc1, tensor(m, ly->fc1_weight), tensor(m, ly->fc1_bias), F, d, NULL,
                    err) < 0)
        return -1;
    // A hidden unit fc1 never writes is act(0) = 0: fc2 drops its column.
    int *hi = packed_index(&lp->fc1);
    if (!hi) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    int rc = linear_pack(&lp->fc2, tensor(m, ly->fc2_weight), tensor(m, ly->fc2_bias), d, F, hi,
                         err);
    free(hi);
    return rc;
}

/* Marks the residual columns a layer reads (into `reads`); returns 1 when
 * the layer writes any column marked in `live`. */
static int layer_reads_writes(const TfModel *m, const LayerPlan *lp, char *reads, char *kv_reads,
                              const char *live) {
    int d = m->d_model, writes_live = 0;
    if (lp->kind == TF_LAYER_NORM || lp->norm_w) {
        for (int c = 0; c < d; c++) reads[c] = kv_reads[c] = 1;
        if (lp->kind == TF_LAYER_NORM) {
            for (int c = 0; c < d; c++) writes_live |= live[c];
            return writes_live;
        }
    }
    if (lp->kind == TF_LAYER_ATTENTION) {
        for (int j = 0; j < lp->k.n_cols; j++) kv_reads[lp->k.cols[j]] = 1;
        for (int j = 0; j < lp->v.n_cols; j++) kv_reads[lp->v.cols[j]] = 1;
        for (int j = 0; j < lp->q.n_cols; j++) reads[lp->q.cols[j]] = 1;
        if (lp->has_o)
            for (int j = 0; j < lp->o.n_rows; j++) writes_live |= live[lp->o.rows[j]];
        else
            for (int j = 0; j < lp->v.n_rows; j++) writes_live |= live[lp->v.rows[j]];
    } else {
        for (int j = 0; j < lp->fc1.n_cols; j++) reads[lp->fc1.cols[j]] = 1;
        for (int j = 0; j < lp->fc2.n_rows; j++) writes_live |= live[lp->fc2.rows[j]];
    }
    return writes_live;
}

/* Union-find: the root of u, halving the path. */
static int uf_root(int *parent, int u) {
    while (parent[u] != u) u = parent[u] = parent[parent[u]];
    return u;
}

/* W [rows, cols] with the rows where keep[r] == want kept and the others
 * zeroed (columns, with by_col); b likewise by rows, NULL stays NULL. */
static float *masked(const float *W, int rows, int cols, const char *keep, int want, int by_col) {
    float *w = malloc(((size_t)rows * cols + 1) * sizeof *w);
    if (!w) return NULL;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)r * cols + c;
            w[i] = keep[by_col ? c : r] == want ? W[i] : 0.0f;
        }
    return w;
}

/* One group of an MLP's units as its own packed pair: the units u with
 * unit_full[u] == want, and the output bias of the columns col_full[c] ==
 * want. */
static int pack_group(const TfModel *m, const TfLayer *ly, const char *unit_full,
                      const char *col_full, int want, TfLinear *fc1, TfLinear *fc2, TfError *err) {
    int d = m->d_model, F = ly->d_hidden, rc = -1, *hi = NULL;
    const float *b1 = tensor(m, ly->fc1_bias), *b2 = tensor(m, ly->fc2_bias);
    float *w1 = masked(tensor(m, ly->fc1_weight), F, d, unit_full, want, 0);
    float *w2 = masked(tensor(m, ly->fc2_weight), d, F, unit_full, want, 1);
    float *c1 = b1 ? masked(b1, F, 1, unit_full, want, 0) : NULL;
    float *c2 = b2 ? masked(b2, d, 1, col_full, want, 0) : NULL;
    if (!w1 || !w2 || (b1 && !c1) || (b2 && !c2)) goto done;
    if (linear_pack(fc1, w1, c1, F, d, NULL, err) < 0 || !(hi = packed_index(fc1))) goto done;
    rc = linear_pack(fc2, w2, c2, d, F, hi, err);
done:
    if (rc < 0 && !err->msg[0]) tf_error_set(err, "out of memory");
    free(w1), free(w2), free(c1), free(c2), free(hi);
    return rc;
}

/* Per-part rows in an MLP that runs at every row (it writes a column in
 * `live`): a scheduled layer holds several ops' units side by side, and
 * only the units whose output later keys, values or checks read need every
 * row. Units writing a common column are one group (union-find over fc2's
 * columns), so the two groups write disjoint columns and every column's
 * sum is formed from the same terms as in the whole layer; a group runs at
 * every row when it writes a live column. When both groups have units,
 * sets split_units and marks in `reads` only the columns the every-row
 * units read (so that the layers before may skip more). */
static int plan_split_mlp(const TfModel *m, const TfLayer *ly, LayerPlan *lp, const char *live,
                          char *reads, TfError *err) {
    int d = m->d_model, F = ly->d_hidden, n_full = 0, rc = -1;
    const float *W1 = tensor(m, ly->fc1_weight), *W2 = tensor(m, ly->fc2_weight);
    int *parent = malloc(((size_t)F + 1) * sizeof *parent);
    int *first = malloc(((size_t)d + 1) * sizeof *first);
    char *root_full = calloc((size_t)F + 1, 1), *unit_full = calloc((size_t)F + 1, 1);
    char *col_full = calloc((size_t)d + 1, 1);
    if (!parent || !first || !root_full || !unit_full || !col_full) {
        tf_error_set(err, "out of memory");
        goto done;
    }
    for (int u = 0; u < F; u++) parent[u] = u;
    for (int c = 0; c < d; c++) {
        first[c] = -1;
        for (int u = 0; u < F; u++) {
            if (W2[(size_t)c * F + u] == 0.0f) continue;
            if (first[c] < 0) first[c] = u;
            else parent[uf_root(parent, u)] = uf_root(parent, first[c]);
        }
    }
    for (int c = 0; c < d; c++)
        if (live[c] && first[c] >= 0) root_full[uf_root(parent, first[c])] = 1;
    for (int u = 0; u < F; u++) n_full += unit_full[u] = root_full[uf_root(parent, u)];
    rc = 0;
    if (n_full == 0 || n_full == F) goto done; /* one group: the layer runs whole */
    // A column no unit writes (its bias alone) goes with the every-row units.
    for (int c = 0; c < d; c++) col_full[c] = first[c] < 0 || unit_full[first[c]];
    if ((rc = pack_group(m, ly, unit_full, col_full, 1, &lp->fc1a, &lp->fc2a, err)) < 0 ||
        (rc = pack_group(m, ly, unit_full, col_full, 0, &lp->fc1b, &lp->fc2b, err)) < 0)
        goto done;
    lp->split_units = lp->fc1a.n_rows > 0 && lp->fc1b.n_rows > 0;
    if (!lp->split_units) goto done;
    memset(reads, 0, (size_t)d);
    for (int u = 0; u < F; u++)
        for (int c = 0; c < d && unit_full[u]; c++) reads[c] |= W1[(size_t)u * d + c] != 0.0f;
done:
    free(parent), free(first), free(root_full), free(unit_full), free(col_full);
    return rc;
}

/* Per-part rows in an attention layer that runs at every row: its heads
 * side by side (a scheduled layer's parts), of which only those writing a
 * live column need their queries and outputs at every row; the others run
 * at the output rows (their outputs elsewhere are 0, and the output
 * projection's live columns have zero weights on them). Keys and values
 * stay at every row: the output rows attend to them. Sets split_heads and
 * marks in `reads` only the every-row heads' query columns. */
static int plan_split_heads(const TfModel *m, const TfLayer *ly, LayerPlan *lp, const char *live,
                            char *reads, TfError *err) {
    int d = m->d_model, H = lp->n_heads, dh = lp->d_head, dv = lp->d_vhead, n_full = 0;
    const float *Wo = tensor(m, ly->output), *Wq = tensor(m, ly->query);
    if (H < 2) return 0;
    if (!(lp->head_full = calloc((size_t)H, 1))) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int h = 0; h < H; h++) {
        for (int k = lp->v_start[h]; k < lp->v_start[h + 1] && !lp->head_full[h]; k++) {
            int j = lp->v.rows[k]; /* a value channel: residual column j without output */
            if (!lp->has_o) lp->head_full[h] = live[j];
            for (int c = 0; c < d && lp->has_o && !lp->head_full[h]; c++)
                lp->head_full[h] = live[c] && Wo[(size_t)c * H * dv + j] != 0.0f;
        }
        n_full += lp->head_full[h];
    }
    lp->split_heads = n_full > 0 && n_full < H;
    if (!lp->split_heads) return 0;
    memset(reads, 0, (size_t)d);
    for (int r = 0; r < H * dh; r++)
        for (int c = 0; c < d && lp->head_full[r / dh]; c++)
            reads[c] |= Wq[(size_t)r * d + c] != 0.0f;
    return 0;
}

/* Which layers must run at rows that are not output rows (see the top):
 * those that later keys and values depend on, and those that run-time
 * checks depend on (a checked register is tested at every row). */
static int plan_liveness(TfPlan *p, TfError *err) {
    const TfModel *m = p->m;
    int d = m->d_model;
    char *live = calloc((size_t)d, 1), *reads = calloc((size_t)d, 1);
    char *kv = calloc((size_t)d, 1);
    if (!live || !reads || !kv) {
        free(live), free(reads), free(kv);
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int l = m->n_layers - 1; l >= 0; l--) {
        LayerPlan *lp = &p->layers[l];
        memset(reads, 0, (size_t)d);
        memset(kv, 0, (size_t)d);
        // A register checked after this layer is checked at every row: its
        // columns are live from here back.
        for (int k = 0; k < lp->n_checks; k++) {
            const TfRegister *reg = &m->regs[m->checks[lp->check_idx[k]].reg];
            memset(live + reg->offset, 1, (size_t)reg->size);
        }
        lp->full = layer_reads_writes(m, lp, reads, kv, live);
        const TfLayer *ly = &m->layers[l];
        if (lp->full && !lp->norm_w &&
            ((lp->kind == TF_LAYER_MLP && plan_split_mlp(m, ly, lp, live, reads, err) < 0) ||
             (lp->kind == TF_LAYER_ATTENTION && plan_split_heads(m, ly, lp, live, reads, err) < 0))) {
            free(live), free(reads), free(kv);
            return -1;
        }
        // Keys and values are needed at every row; the rest only if the
        // layer's output is.
        for (int c = 0; c < d; c++) live[c] |= kv[c] | (lp->full ? reads[c] : 0);
    }
    // Columns read at every row (live at the embedding) or written there
    // by a layer that runs at every row (all it writes, whatever part).
    for (int l = 0; l < m->n_layers; l++) {
        const LayerPlan *lp = &p->layers[l];
        if (!lp->full) continue;
        if (lp->kind == TF_LAYER_NORM) memset(live, 1, (size_t)d);
        const TfLinear *out = lp->kind == TF_LAYER_MLP ? &lp->fc2 : lp->has_o ? &lp->o : &lp->v;
        if (lp->kind != TF_LAYER_NORM)
            for (int j = 0; j < out->n_rows; j++) live[out->rows[j]] = 1;
    }
    p->all_rows = live;
    free(reads), free(kv);
    return 0;
}

/* Sets mark[c] = 1 for every residual column c layer l writes (a norm
 * layer writes them all). */
static void mark_written(const TfPlan *p, int l, char *mark) {
    const LayerPlan *lp = &p->layers[l];
    if (lp->kind == TF_LAYER_NORM) memset(mark, 1, (size_t)p->m->d_model);
    else if (lp->kind == TF_LAYER_MLP)
        for (int j = 0; j < lp->fc2.n_rows; j++) mark[lp->fc2.rows[j]] = 1;
    else if (lp->has_o)
        for (int j = 0; j < lp->o.n_rows; j++) mark[lp->o.rows[j]] = 1;
    else
        for (int j = 0; j < lp->v.n_rows; j++) mark[lp->v.rows[j]] = 1;
}

/* Keys (values) that an earlier layer computes already: the same weight and
 * bias tensors reading only columns no layer before writes (the token and
 * position embeddings, at compiled models; a later layer may clear them for
 * another register: compiler/schedule.c). The adder's eight
 * GetRelativeToken heads share one key and one value cache this way. */
static int plan_sharing(TfPlan *p, TfError *err) {
    const TfModel *m = p->m;
    int d = m->d_model;
    char *written = calloc((size_t)d, 1);
    if (!written) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int l = 0; l < m->n_layers; l++) {
        LayerPlan *lp = &p->layers[l];
        lp->k_from = lp->v_from = -1;
        if (l > 0) mark_written(p, l - 1, written); // written: by the layers before l
        if (lp->kind != TF_LAYER_ATTENTION || lp->norm_w) continue;
        const TfLayer *ly = &m->layers[l];
        int k_const = 1, v_const = 1;
        for (int j = 0; j < lp->k.n_cols; j++) k_const &= !written[lp->k.cols[j]];
        for (int j = 0; j < lp->v.n_cols; j++) v_const &= !written[lp->v.cols[j]];
        for (int e = 0; e < l; e++) {
            const LayerPlan *ep = &p->layers[e];
            const TfLayer *ey = &m->layers[e];
            if (ep->kind != TF_LAYER_ATTENTION || ep->norm_w) continue;
            if (lp->k_from < 0 && k_const && ep->k_from < 0 && ey->key == ly->key &&
                ey->key_bias == ly->key_bias)
                lp->k_from = e;
            if (lp->v_from < 0 && v_const && ep->v_from < 0 && ey->value == ly->value &&
                ey->value_bias == ly->value_bias)
                lp->v_from = e;
        }
    }
    free(written);
    return 0;
}

/* The columns either embedding can make non-zero; the others start at 0. */
static int plan_embedding(TfPlan *p, TfError *err) {
    const TfModel *m = p->m;
    int d = m->d_model;
    p->emb_cols = malloc(((size_t)d + 1) * sizeof(int));
    if (!p->emb_cols) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    const float *te = tensor(m, m->tok_embed), *pe = tensor(m, m->pos_embed);
    for (int c = 0; c < d; c++) {
        int any = 0;
        for (int t = 0; t < m->n_vocab && !any; t++) any = te[(size_t)t * d + c] != 0.0f;
        for (int i = 0; i < m->max_len && !any; i++) any = pe[(size_t)i * d + c] != 0.0f;
        if (any) p->emb_cols[p->n_emb_cols++] = c;
    }
    // Each kept column of both tables as one short vector: a row's
    // embedding then reads two cached values per column.
    size_t nc = (size_t)p->n_emb_cols;
    p->emb_tok = malloc((nc * (size_t)m->n_vocab + 1) * sizeof(float));
    p->emb_pos = malloc((nc * (size_t)m->max_len + 1) * sizeof(float));
    p->emb_pos_only = malloc(nc + 1);
    p->emb_tok_only = malloc(nc + 1);
    p->emb_one_tok = malloc((nc + 1) * sizeof(int));
    if (!p->emb_tok || !p->emb_pos || !p->emb_pos_only || !p->emb_tok_only || !p->emb_one_tok) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (size_t k = 0; k < nc; k++) {
        int c = p->emb_cols[k];
        p->emb_pos_only[k] = 1;
        for (int t = 0; t < m->n_vocab; t++) {
            float v = p->emb_tok[k * m->n_vocab + t] = te[(size_t)t * d + c];
            p->emb_pos_only[k] &= v == 0.0f && !signbit(v);
        }
        p->emb_tok_only[k] = 1;
        for (int i = 0; i < m->max_len; i++) {
            float v = p->emb_pos[k * m->max_len + i] = pe[(size_t)i * d + c];
            p->emb_tok_only[k] &= v == 0.0f && !signbit(v);
        }
        int one = -1, n_set = 0;
        for (int t = 0; t < m->n_vocab; t++)
            if (p->emb_tok[k * m->n_vocab + t] != 0.0f) one = t, n_set++;
        p->emb_one_tok[k] = p->emb_tok_only[k] && n_set == 1 ? one : -1;
    }
    p->emb_finite = 1;
    for (size_t k = 0; k < nc && p->emb_finite; k++) {
        float mt = 0.0f, mp = 0.0f; /* the largest magnitudes; an infinity or NaN ends it */
        for (int t = 0; t < m->n_vocab && p->emb_finite; t++) {
            float a = fabsf(p->emb_tok[k * m->n_vocab + t]);
            p->emb_finite = a <= FLT_MAX;
            mt = a > mt ? a : mt;
        }
        for (int i = 0; i < m->max_len && p->emb_finite; i++) {
            float a = fabsf(p->emb_pos[k * m->max_len + i]);
            p->emb_finite = a <= FLT_MAX;
            mp = a > mp ? a : mp;
        }
        p->emb_finite = p->emb_finite && (double)mt + (double)mp <= FLT_MAX;
    }
    return 0;
}

/* Key rows that depend on the position only: every weight they have reads
 * a column that only the position embedding writes (no layer before this
 * one writes it, the token embedding is 0 there) in an attention layer
 * without a norm.
 * Their values at each position are computed once, by the same packed
 * map on the embedding of each position, and stored in the caches once
 * (fill_static_keys); the layer computes only its other key rows (kd).
 * An intervention may edit the residual stream: the engine then computes
 * every key row (attention_layer) and refills the static ones once it is
 * cleared (fill_static_keys). */
static int plan_static_keys(TfPlan *p, TfError *err) {
    const TfModel *m = p->m;
    int d = m->d_model, L = m->max_len, rc = -1;
    const float *te = tensor(m, m->tok_embed), *pe = tensor(m, m->pos_embed);
    char *pos_only = malloc((size_t)d + 1), *is_static = NULL;
    char *written = calloc((size_t)d + 1, 1); /* by the layers before the one planned */
    float *x = malloc(((size_t)d * L + 1) * sizeof(float)), *y = NULL, *scratch = NULL;
    float *w = NULL, *b = NULL;
    int *ki = NULL;
    if (!pos_only || !x || !written) goto oom;
    memset(pos_only, 1, (size_t)d);
    for (int c = 0; c < d; c++)
        for (int t = 0; t < m->n_vocab && pos_only[c]; t++)
            pos_only[c] = te[(size_t)t * d + c] == 0.0f;
    // Row t of x: position t's embedding in the columns that hold only it,
    // formed as forward_rows forms it (+0 plus the position's value).
    for (int c = 0; c < d; c++)
        for (int t = 0; t < L; t++)
            x[(size_t)c * L + t] = pos_only[c] ? 0.0f + pe[(size_t)t * d + c] : 0.0f;
    for (int l = 0; l < m->n_layers; l++) {
        LayerPlan *lp = &p->layers[l];
        const TfLayer *ly = &m->layers[l];
        if (l > 0) mark_written(p, l - 1, written);
        if (lp->kind != TF_LAYER_ATTENTION || lp->norm_w || lp->k_from >= 0 || lp->k.n_rows == 0)
            continue;
        int nk = lp->k.n_rows, rows = ly->n_heads * ly->d_head, n_static = 0;
        const float *W = tensor(m, ly->key), *B = tensor(m, ly->key_bias);
        free(is_static);
        is_static = calloc((size_t)rows + 1, 1);
        if (!is_static) goto oom;
        for (int k = 0; k < nk; k++) {
            int r = lp->k.rows[k], st = 1;
            for (int c = 0; c < d && st; c++)
                st = W[(size_t)r * d + c] == 0.0f || (pos_only[c] && !written[c]);
            is_static[r] = (char)st;
            n_static += st;
        }
        if (n_static == 0) continue;
        free(y), free(scratch);
        y = malloc(((size_t)nk * L + 1) * sizeof(float));
        scratch = malloc(((size_t)lp->k.n_cols * L + 1) * sizeof(float));
        if (!y || !scratch) goto oom;
        linear_forward(&lp->k, y, L, x, L, L, scratch);
        int finite = 1;
        for (int k = 0; k < nk; k++)
            for (int t = 0; t < L && is_static[lp->k.rows[k]]; t++)
                finite &= !nonfinite(y[(size_t)k * L + t]);
        if (!finite) continue; /* the cache would hold what the engine reports as an overflow */
        free(w), free(b), free(ki);
        w = masked(W, rows, d, is_static, 0, 0);
        b = B ? masked(B, rows, 1, is_static, 0, 0) : NULL;
        ki = packed_index(&lp->k);
        lp->static_ch = malloc(((size_t)n_static + 1) * sizeof(int));
        lp->static_val = malloc(((size_t)n_static * L + 1) * sizeof(float));
        if (!w || (B && !b) || !ki || !lp->static_ch || !lp->static_val) goto oom;
        if (linear_pack(&lp->kd, w, b, rows, d, NULL, err) < 0) goto done;
        lp->kd_ch = malloc(((size_t)lp->kd.n_rows + 1) * sizeof(int));
        if (!lp->kd_ch) goto oom;
        for (int j = 0; j < lp->kd.n_rows; j++) lp->kd_ch[j] = ki[lp->kd.rows[j]];
        for (int k = 0, i = 0; k < nk; k++) {
            if (!is_static[lp->k.rows[k]]) continue;
            lp->static_ch[i] = k;
            for (int t = 0; t < L; t++)
                lp->static_val[(size_t)t * n_static + i] = y[(size_t)k * L + t];
            i++;
        }
        lp->n_static = n_static;
    }
    rc = 0;
    goto done;
oom:
    tf_error_set(err, "out of memory");
done:
    free(pos_only), free(written), free(is_static), free(x), free(y), free(scratch), free(w), free(b);
    free(ki);
    return rc;
}

/* Each layer's run-time checks (model.h's TfCheck), in the model's order. */
static int plan_checks(TfPlan *p, TfError *err) {
    const TfModel *m = p->m;
    for (int i = 0; i < m->n_checks; i++) {
        LayerPlan *lp = &p->layers[m->checks[i].layer];
        int *idx = realloc(lp->check_idx, ((size_t)lp->n_checks + 1) * sizeof *idx);
        if (!idx) {
            tf_error_set(err, "out of memory");
            return -1;
        }
        lp->check_idx = idx;
        idx[lp->n_checks++] = i;
    }
    return 0;
}

TfPlan *plan_new(const TfModel *m, TfError *err) {
    TfPlan *p = calloc(1, sizeof *p);
    if (!p) {
        tf_error_set(err, "out of memory");
        return NULL;
    }
    p->m = m;
    p->incremental = 1;
    p->layers = calloc((size_t)m->n_layers + 1, sizeof *p->layers);
    if (!p->layers) {
        tf_error_set(err, "out of memory");
        goto fail;
    }
    p->max_cols = m->d_model;
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        LayerPlan *lp = &p->layers[l];
        lp->kind = ly->kind;
        lp->norm_w = tensor(m, ly->norm_weight);
        lp->norm_b = tensor(m, ly->norm_bias);
        lp->eps = ly->norm_eps;
        if (lp->norm_w) p->has_norm = 1;
        if (ly->kind == TF_LAYER_ATTENTION) {
            if (plan_attention(m, ly, lp, err) < 0) goto fail;
            if (!ly->causal) p->incremental = 0;
            p->max_q = imax(p->max_q, lp->q.n_rows);
            p->max_k = imax(p->max_k, lp->k.n_rows);
            p->max_v = imax(p->max_v, lp->v.n_rows);
            p->max_out = imax(p->max_out, lp->o.n_rows);
        } else if (ly->kind == TF_LAYER_MLP) {
            if (plan_mlp(m, ly, lp, err) < 0) goto fail;
            p->max_hidden = imax(p->max_hidden, lp->fc1.n_rows);
            p->max_out = imax(p->max_out, lp->fc2.n_rows);
        }
    }
    p->max_cols = imax(p->max_cols, imax(p->max_hidden, p->max_v));
    int n_out = m->output_kind == TF_OUTPUT_CLASSIFY ? m->n_classes : m->n_vocab;
    // A model that prints a number reads its output register: no logits.
    p->numeric = model_numeric_output(m);
    if ((!p->numeric && linear_pack(&p->unembed, tensor(m, m->unembed), tensor(m, m->unembed_bias),
                                    n_out, m->d_model, NULL, err) < 0) ||
        plan_checks(p, err) < 0 || plan_liveness(p, err) < 0 || plan_sharing(p, err) < 0 ||
        plan_embedding(p, err) < 0 || plan_static_keys(p, err) < 0)
        goto fail;
    for (int l = 0; l < m->n_layers; l++) {
        LayerPlan *lp = &p->layers[l];
        if (lp->kind != TF_LAYER_MLP || lp->act != TF_ACT_RELU) continue;
        lp->pairs[0] = (char)linear_mlp_pairs(&lp->fc1, &lp->fc2);
        lp->pairs[1] = (char)(lp->split_units && linear_mlp_pairs(&lp->fc1a, &lp->fc2a));
        lp->pairs[2] = (char)(lp->split_units && linear_mlp_pairs(&lp->fc1b, &lp->fc2b));
    }
    return p;
fail:
    plan_free(p);
    return NULL;
}

int plan_static_key_rows(const TfPlan *p) {
    int n = 0;
    for (int l = 0; l < p->m->n_layers; l++) n += p->layers[l].n_static;
    return n;
}

long plan_row_cost(const TfPlan *p, long *dense_cost) {
    const TfModel *m = p->m;
    long cost = 0, dense = 0, d = m->d_model;
    for (int l = 0; l < m->n_layers; l++) {
        const LayerPlan *lp = &p->layers[l];
        const TfLayer *ly = &m->layers[l];
        if (lp->kind == TF_LAYER_ATTENTION) {
            cost += linear_cost(&lp->q) + linear_cost(&lp->k) + linear_cost(&lp->v) +
                    linear_cost(&lp->o);
            long hd = (long)ly->n_heads * ly->d_head, hv = (long)ly->n_heads * ly->d_vhead;
            dense += d * (2 * hd + hv) + (ly->output >= 0 ? hv * d : 0);
        } else if (lp->kind == TF_LAYER_MLP) {
            cost += linear_cost(&lp->fc1) + linear_cost(&lp->fc2);
            dense += 2 * d * ly->d_hidden;
        }
    }
    if (dense_cost) *dense_cost = dense;
    return cost;
}

/* ------------------------------------------------------------------------ */
/* The engine                                                               */
/* ------------------------------------------------------------------------ */

void infer_free(TfInfer *inf) {
    if (!inf) return;
    // Shared caches belong to the layer that computes them.
    for (int l = 0; l < inf->m->n_layers; l++) {
        const LayerPlan *lp = &inf->plan->layers[l];
        if (lp->kind != TF_LAYER_ATTENTION) continue;
        if (inf->kcache && lp->k_from < 0) free(inf->kcache[l]);
        if (inf->vcache && lp->v_from < 0) free(inf->vcache[l]);
    }
    free(inf->kcache);
    free(inf->vcache);
    free(inf->seq_len);
    free(inf->x);
    free(inf->xn);
    free(inf->q);
    free(inf->k);
    free(inf->v);
    free(inf->heads);
    free(inf->hidden);
    free(inf->delta);
    free(inf->scratch);
    free(inf->att);
    free(inf->scores);
    free(inf->hook_att);
    free(inf->hook_scores);
    free(inf->order);
    free(inf->order_tmp);
    free(inf->row_t);
    free(inf->blk);
    free(inf->ord_seq);
    free(inf->ord_t);
    free(inf->pos_order);
    free(inf->row_blk);
    free(inf->run_r0);
    free(inf->run_p0);
    free(inf->run_dp);
    free(inf->st_off);
    free(inf->st_start);
    free(inf->st_run);
    free(inf->kg);
    free(inf->vg);
    free(inf->gkeys);
    free(inf->gcounts);
    free(inf->gvsums);
    free(inf->gcls);
    free(inf->n_groups);
    free(inf->ident);
    free(inf->bucket);
    free(inf->stat);
    free(inf->logits);
    free(inf->rowmajor);
    free(inf->hookbuf);
    free(inf->row_seq);
    free(inf->row_pos);
    free(inf->row_tok);
    free(inf->fail_layer);
    free(inf->fail_pos);
    free(inf->fail_err);
    plan_free(inf->own_plan);
    free(inf);
}

static float *alloc_floats(size_t n) {
    return malloc((n ? n : 1) * sizeof(float));
}

TfInfer *infer_new_with_plan(const TfPlan *plan, int max_seqs, TfError *err) {
    if (max_seqs < 1) {
        tf_error_set(err, "batch size must be at least 1, not %d", max_seqs);
        return NULL;
    }
    const TfModel *m = plan->m;
    TfInfer *inf = calloc(1, sizeof *inf);
    if (!inf) goto oom;
    inf->m = m;
    inf->plan = plan;
    inf->max_seqs = max_seqs;
    inf->use_cache = 1;
    size_t L = (size_t)m->max_len, d = (size_t)m->d_model;
    size_t R = (size_t)max_seqs * L;
    inf->max_rows = (int)R;
    inf->kcache = calloc((size_t)m->n_layers + 1, sizeof(float *));
    inf->vcache = calloc((size_t)m->n_layers + 1, sizeof(float *));
    if (!inf->kcache || !inf->vcache) goto oom;
    for (int l = 0; l < m->n_layers; l++) {
        const LayerPlan *lp = &plan->layers[l];
        if (lp->kind != TF_LAYER_ATTENTION) continue;
        inf->kcache[l] = lp->k_from >= 0 ? inf->kcache[lp->k_from]
                                          : alloc_floats((size_t)max_seqs * L * (size_t)lp->k.n_rows);
        inf->vcache[l] = lp->v_from >= 0 ? inf->vcache[lp->v_from]
                                          : alloc_floats((size_t)max_seqs * L * (size_t)lp->v.n_rows);
        if (!inf->kcache[l] || !inf->vcache[l]) goto oom;
    }
    int n_out = plan->unembed.n_out;
    inf->seq_len = calloc((size_t)max_seqs, sizeof(int));
    inf->x = alloc_floats(R * d);
    inf->xn = plan->has_norm ? alloc_floats(R * d) : NULL;
    inf->q = alloc_floats(R * (size_t)plan->max_q);
    inf->k = alloc_floats(R * (size_t)plan->max_k);
    inf->v = alloc_floats(R * (size_t)plan->max_v);
    inf->heads = alloc_floats(R * (size_t)plan->max_v);
    inf->hidden = alloc_floats(R * (size_t)plan->max_hidden);
    inf->delta = alloc_floats(R * (size_t)imax(imax(plan->max_out, (int)d), n_out));
    inf->scratch = alloc_floats(R * (size_t)plan->max_cols);
    inf->att = alloc_floats(L * TF_ATT_LANES);
    inf->scores = alloc_floats(L * TF_ATT_LANES);
    inf->hook_att = alloc_floats(L);
    inf->hook_scores = alloc_floats(L);
    inf->order = malloc(R * sizeof(int));
    inf->order_tmp = malloc(R * sizeof(int));
    inf->row_t = malloc(R * sizeof(int));
    inf->blk = malloc((R + 1) * sizeof *inf->blk);
    inf->ord_seq = malloc(R * sizeof(int));
    inf->ord_t = malloc(R * sizeof(int));
    inf->pos_order = malloc(R * sizeof(int));
    inf->row_blk = malloc(R * sizeof(int));
    inf->run_r0 = malloc((R + 1) * sizeof(int));
    inf->run_p0 = malloc(R * sizeof(int));
    inf->run_dp = malloc(R * sizeof(int));
    inf->st_off = malloc(R * sizeof(long));
    inf->st_start = malloc(((size_t)max_seqs / STORE_BLOCK + 2) * sizeof(int));
    inf->st_run = malloc((R + 1) * sizeof(int));
    inf->kg = alloc_floats(L * (size_t)plan->max_q);
    inf->vg = alloc_floats(L * (size_t)plan->max_v);
    inf->ident = malloc(((size_t)plan->max_q + 1) * sizeof(int));
    if (L >= GATHER_MIN_T) {
        int max_heads = 1;
        for (int l = 0; l < m->n_layers; l++) max_heads = imax(max_heads, plan->layers[l].n_heads);
        inf->grouped = 1;
        inf->gkeys = alloc_floats((size_t)TF_ATT_GROUPS * plan->max_q);
        inf->gcounts = alloc_floats(L * TF_ATT_GROUPS * (size_t)max_heads);
        inf->gvsums = alloc_floats(L * TF_ATT_GROUPS * (size_t)plan->max_v);
        inf->gcls = malloc(L * sizeof(int));
        inf->n_groups = calloc((size_t)max_heads, sizeof(int));
        if (!inf->gkeys || !inf->gcounts || !inf->gvsums || !inf->gcls || !inf->n_groups) goto oom;
    }
    for (int i = 0; inf->ident && i <= plan->max_q; i++) inf->ident[i] = i;
    inf->static_stale = 1; /* fill_static_keys before the first step */
    inf->bucket = malloc(((L + 1 > (size_t)max_seqs ? L + 1 : (size_t)max_seqs) + 1) * sizeof(int));
    inf->stat = alloc_floats(2 * (size_t)m->d_model);
    inf->logits = alloc_floats((size_t)n_out * L * (size_t)max_seqs);
    inf->row_seq = malloc(R * sizeof(int));
    inf->row_pos = malloc(R * sizeof(int));
    inf->row_tok = malloc(R * sizeof(int));
    if (m->n_checks > 0) {
        inf->fail_layer = malloc((size_t)max_seqs * sizeof(int));
        inf->fail_pos = malloc((size_t)max_seqs * sizeof(int));
        inf->fail_err = malloc((size_t)max_seqs * sizeof(TfError));
        if (!inf->fail_layer || !inf->fail_pos || !inf->fail_err) goto oom;
        for (int s = 0; s < max_seqs; s++) inf->fail_layer[s] = -1;
    }
    if (!inf->seq_len || !inf->x || (plan->has_norm && !inf->xn) || !inf->q || !inf->k ||
        !inf->v || !inf->heads || !inf->hidden || !inf->delta || !inf->scratch || !inf->att ||
        !inf->scores || !inf->hook_att || !inf->hook_scores || !inf->order || !inf->order_tmp ||
        !inf->row_t || !inf->blk || !inf->ord_seq || !inf->ord_t || !inf->pos_order ||
        !inf->row_blk || !inf->run_r0 || !inf->run_p0 || !inf->run_dp || !inf->st_off ||
        !inf->st_start || !inf->st_run || !inf->bucket ||
        !inf->kg || !inf->vg || !inf->ident || !inf->stat ||
        !inf->logits || !inf->row_seq || !inf->row_pos || !inf->row_tok)
        goto oom;
    return inf;
oom:
    infer_free(inf);
    tf_error_set(err, "out of memory for a batch of %d sequences", max_seqs);
    return NULL;
}

TfInfer *infer_new(const TfModel *m, int max_seqs, TfError *err) {
    TfPlan *p = plan_new(m, err);
    if (!p) return NULL;
    TfInfer *inf = infer_new_with_plan(p, max_seqs, err);
    if (!inf) {
        plan_free(p);
        return NULL;
    }
    inf->own_plan = p;
    return inf;
}

void infer_set_hook(TfInfer *inf, TfLayerHook hook, void *user) {
    inf->hook = hook;
    inf->hook_user = user;
}

void infer_set_attention_hook(TfInfer *inf, TfAttentionHook hook, void *user) {
    inf->att_hook = hook;
    inf->att_hook_user = user;
}

void infer_set_activation_hook(TfInfer *inf, TfActivationHook hook, void *user) {
    inf->act_hook = hook;
    inf->act_hook_user = user;
}

int infer_set_intervention(TfInfer *inf, const TfIntervention *iv, TfError *err) {
    if (!iv) {
        inf->iv = NULL;
        return 0;
    }
    const TfPlan *p = inf->plan;
    for (int i = 0; i < iv->n; i++) {
        const TfEdit *e = &iv->edits[i];
        if (iv->m != inf->m || e->layer < -1 || e->layer >= inf->m->n_layers) {
            tf_error_set(err, "--ablate: '%s' is not an edit of this model", e->label);
            return -1;
        }
        if (e->mode != TF_EDIT_ZERO && !e->values) {
            tf_error_set(err, "--ablate: '%s': no %s values recorded", e->label,
                         tf_edit_mode_names[e->mode]);
            return -1;
        }
        if (e->site != TF_SITE_RESID) continue;
        // Keys and values that a later layer shares with an earlier one are
        // computed once, from columns no layer writes: editing those
        // columns in between would not reach them.
        for (int l = e->layer + 1; l < inf->m->n_layers; l++) {
            const LayerPlan *lp = &p->layers[l];
            if (lp->kind != TF_LAYER_ATTENTION) continue;
            for (int kv = 0; kv < 2; kv++) {
                int from = kv ? lp->v_from : lp->k_from;
                const TfLinear *lin = kv ? &lp->v : &lp->k;
                if (from < 0 || from > e->layer) continue;
                for (int j = 0; j < lin->n_cols; j++)
                    if (lin->cols[j] >= e->lo && lin->cols[j] < e->hi) {
                        tf_error_set(err, "--ablate: '%s': layer %d shares its %s with layer %d, "
                                          "computed before the edit from these columns; edit "
                                          "them at the embedding (@embed) instead",
                                     e->label, l, kv ? "values" : "keys", from);
                        return -1;
                    }
            }
        }
    }
    inf->iv = iv;
    return 0;
}

/* The value edit e puts at column c of a row at position pos (old: the
 * value there). */
static float edit_value(const TfEdit *e, int c, int pos, float old) {
    if (e->mode == TF_EDIT_ZERO) return 0.0f;
    if (e->mode == TF_EDIT_MEAN) return e->values[c];
    return pos < e->n_pos ? e->values[(size_t)pos * e->width + c] : old;
}

/* The edits of layer l at `site` on the first n rows of a feature-major
 * block: packed feature k of row r is buf[k * ld + r], its column cols[k]
 * (NULL: k). Columns the engine packed away are 0 in every run. */
static void apply_edits(TfInfer *inf, int l, TfEditSite site, float *buf, int ld, const int *cols,
                        int n_packed, int n) {
    const TfIntervention *iv = inf->iv;
    for (int i = 0; i < iv->n; i++) {
        const TfEdit *e = &iv->edits[i];
        if (e->layer != l || e->site != site) continue;
        for (int k = 0; k < n_packed; k++) {
            int c = cols ? cols[k] : k;
            if (c < e->lo || c >= e->hi) continue;
            float *f = buf + (size_t)k * ld;
            for (int r = 0; r < n; r++) f[r] = edit_value(e, c, inf->row_pos[r], f[r]);
        }
    }
}

int infer_hook_width(const TfModel *m, const TfLayer *ly, TfHookPoint point) {
    int attn = ly->kind == TF_LAYER_ATTENTION, mlp = ly->kind == TF_LAYER_MLP;
    switch (point) {
    case TF_HOOK_NORMALIZED: return (attn || mlp) && ly->norm_weight >= 0 ? m->d_model : 0;
    case TF_HOOK_Q:
    case TF_HOOK_K: return attn ? ly->n_heads * ly->d_head : 0;
    case TF_HOOK_V:
    case TF_HOOK_Z: return attn ? ly->n_heads * ly->d_vhead : 0;
    case TF_HOOK_MLP_PRE:
    case TF_HOOK_MLP_POST: return mlp ? ly->d_hidden : 0;
    case TF_HOOK_OUT: return attn || mlp ? m->d_model : 0;
    default: return 0;
    }
}

void infer_set_cache(TfInfer *inf, int use_cache) { inf->use_cache = use_cache != 0; }

void infer_set_grouped(TfInfer *inf, int grouped) { inf->grouped = grouped && inf->gcls; }

double infer_flops(const TfInfer *inf) { return inf->flops; }

/* Whether v is infinite or NaN (a compare that vectorizes). */

/* The first of rows 0..n_run-1 where one of the columns cols[k] (NULL: k
 * itself, k < n_cols) of x (feature-major, ld n) is infinite or NaN; -1
 * when none is. */
static int first_nonfinite_row(const float *x, int n, const int *cols, int n_cols, int n_run) {
    int first = -1;
    for (int k = 0; k < n_cols; k++) {
        const float *xr = x + (size_t)(cols ? cols[k] : k) * n;
        int bad = 0;
        for (int r = 0; r < n_run; r++) bad |= nonfinite(xr[r]);
        if (!bad) continue;
        for (int r = 0; r < n_run && (first < 0 || r < first); r++)
            if (nonfinite(xr[r])) first = r;
    }
    return first;
}

/* Adds packed rows delta[k] (ld nd) to the residual columns rows[k]; on an
 * infinite or NaN sum, marks the layer bad. */
static void add_rows(TfInfer *inf, float *x, int n, const float *delta, int nd, const int *rows,
                     int n_rows, int n_run) {
    // An exponent of all ones (infinite or NaN) carries into bit 31 when
    // one more is added: an OR of integers, which vectorizes.
    uint32_t bad = 0;
    for (int k = 0; k < n_rows; k++) {
        float *restrict xr = x + (size_t)rows[k] * n;
        const float *restrict dr = delta + (size_t)k * nd;
        for (int r = 0; r < n_run; r++) {
            float v = xr[r] + dr[r];
            uint32_t u;
            memcpy(&u, &v, sizeof u);
            xr[r] = v;
            bad |= (u & 0x7f800000u) + 0x00800000u;
        }
    }
    if ((bad >> 31) && !inf->bad) {
        inf->bad = 1;
        inf->bad_row = first_nonfinite_row(x, n, rows, n_rows, n_run);
    }
}

/* linear_forward, counting its operations. */
static void linear(TfInfer *inf, const TfLinear *L, float *y, int ldy, const float *x, int ldx,
                   int n) {
    linear_forward(L, y, ldy, x, ldx, n, inf->scratch);
    inf->flops += 2.0 * (double)linear_cost(L) * n;
}

static void activation(TfActivation act, float *h, long n) {
    if (act == TF_ACT_GELU)
        gelu_forward(h, n);
    else if (act == TF_ACT_GELU_TANH)
        gelu_tanh_forward(h, n);
    else
        relu_forward(h, n);
}

/* linear into inf->hidden [fc1 rows, n_run], then the activation; a CSR map
 * or a small dense block (linear_fused) with a ReLU takes it in its loop
 * (the same bits, one pass less). */
static void linear_activation(TfInfer *inf, TfActivation act, const TfLinear *fc1,
                              const float *in, int n, int n_run) {
    if (act == TF_ACT_RELU && linear_fused(fc1)) {
        linear_forward_fused(fc1, TF_LINEAR_RELU, inf->hidden, n_run, in, n, n_run, simd_active());
        inf->flops += 2.0 * (double)linear_cost(fc1) * n_run;
        return;
    }
    linear(inf, fc1, inf->hidden, n_run, in, n, n_run);
    activation(act, inf->hidden, (long)fc1->n_rows * n_run);
}

/* The residual's rows 0..n_run-1 (of n) += L (inputs in, ld ldi): through
 * inf->delta and add_rows, or for a CSR map or a small dense block in its
 * loop (the same bits). */
static void linear_residual(TfInfer *inf, const TfLinear *L, const float *in, int ldi, int n,
                            int n_run) {
    if (!linear_fused(L)) {
        linear(inf, L, inf->delta, n_run, in, ldi, n_run);
        add_rows(inf, inf->x, n, inf->delta, n_run, L->rows, L->n_rows, n_run);
        return;
    }
    int bad = linear_forward_fused(L, TF_LINEAR_ADD, inf->x, n, in, ldi, n_run, simd_active());
    inf->flops += 2.0 * (double)linear_cost(L) * n_run;
    if (bad && !inf->bad) {
        inf->bad = 1;
        inf->bad_row = first_nonfinite_row(inf->x, n, L->rows, L->n_rows, n_run);
    }
}

/* Rows of a feature-major block src [ns, n] into a sequence-minor cache
 * [L, nf, S] (row j of src into channel ch[j], or j when ch is NULL),
 * block by block of inf->pos_order (STORE_BLOCK sequences at each
 * position: a cache line of the cache per channel and position, and the
 * block's rows of src are few, near each other in the step). */
static void store_cache(TfInfer *inf, float *cache, const float *src, int ns, const int *ch,
                        int nf, int n) {
    const int *order = inf->pos_order;
    long *off = inf->st_off, S = inf->max_seqs;
    if (inf->st_contig && n > 0) { /* one position, consecutive sequences in order */
        long o = (long)inf->row_pos[0] * nf * S + inf->row_seq[0];
        for (int j = 0; j < ns; j++)
            memcpy(cache + (size_t)(ch ? ch[j] : j) * S + o, src + (size_t)j * n,
                   (size_t)n * sizeof(float));
        return;
    }
    if (inf->n_st_runs) { /* the same, run by run */
        for (int i = 0; i < inf->n_st_runs; i++) {
            int r0 = inf->st_run[i], len = inf->st_run[i + 1] - r0;
            long o = (long)inf->row_pos[r0] * nf * S + inf->row_seq[r0];
            for (int j = 0; j < ns; j++)
                memcpy(cache + (size_t)(ch ? ch[j] : j) * S + o, src + (size_t)j * n + r0,
                       (size_t)len * sizeof(float));
        }
        return;
    }
    for (int k = 0; k < n; k++) {
        int r = order[k];
        off[k] = (long)inf->row_pos[r] * nf * S + inf->row_seq[r];
    }
    for (int b = 0; b < inf->n_st_blocks; b++) {
        int k0 = inf->st_start[b], k1 = inf->st_start[b + 1];
        for (int j = 0; j < ns; j++) {
            const float *sj = src + (size_t)j * n;
            float *cj = cache + (size_t)(ch ? ch[j] : j) * S;
            for (int k = k0; k < k1; k++) cj[off[k]] = sj[order[k]];
        }
    }
}

/* The static keys of every layer (plan_static_keys) into its cache, at
 * every position of every sequence. */
static void fill_static_keys(TfInfer *inf) {
    long S = inf->max_seqs, L = inf->m->max_len;
    for (int l = 0; l < inf->m->n_layers; l++) {
        const LayerPlan *lp = &inf->plan->layers[l];
        if (lp->kind != TF_LAYER_ATTENTION || lp->k_from >= 0 || !lp->n_static) continue;
        long nk = lp->k.n_rows;
        for (long t = 0; t < L; t++)
            for (int i = 0; i < lp->n_static; i++) {
                float v = lp->static_val[t * lp->n_static + i];
                float *c = inf->kcache[l] + (t * nk + lp->static_ch[i]) * S;
                for (long s = 0; s < S; s++) c[s] = v;
            }
    }
    inf->static_stale = 0;
}

/* The activation hook on the first n rows of the step: packed feature k of
 * row r is src[k * ld + r] or, with `cache` ([L, n_packed, S], src NULL),
 * the row's entry there; rows[k] is its column (NULL: k itself), the other
 * columns are 0. */
static void call_act_hook(TfInfer *inf, int l, TfHookPoint point, const float *src, int ld,
                          const float *cache, const int *rows, int n_packed, int n) {
    int width = infer_hook_width(inf->m, &inf->m->layers[l], point);
    float *y = inf->hookbuf;
    memset(y, 0, (size_t)n * (size_t)width * sizeof(float));
    for (int r = 0; r < n; r++) {
        float *yr = y + (size_t)r * width;
        long S = inf->max_seqs, s = inf->row_seq[r], pos = inf->row_pos[r];
        const float *cr = cache ? cache + pos * n_packed * S + s : src + r;
        size_t step = cache ? (size_t)S : (size_t)ld;
        for (int k = 0; k < n_packed; k++) yr[rows ? rows[k] : k] = cr[(size_t)k * step];
    }
    inf->act_hook(inf->act_hook_user, l, point, y, width, n, inf->row_seq, inf->row_pos);
}

/* Sequence s's keys of every live channel pair and its kept values, head
 * by head, for attention_block_forward as one sequence of caches [L, np]
 * and [L, nv_h] (S = 1): head h's at kg + L * pair_start[h] and
 * vg + L * v_start[h]. A head whose keys take at most a quarter as many
 * values as there are positions is grouped (n_groups[h] > 0). */
static void gather_sequence(TfInfer *inf, int l, int s) {
    const LayerPlan *lp = &inf->plan->layers[l];
    long S = inf->max_seqs, L = inf->m->max_len, nk = lp->k.n_rows, nv = lp->v.n_rows;
    const float *kc = inf->kcache[l], *vc = inf->vcache[l];
    int T = inf->seq_len[s];
    for (int h = 0; h < lp->n_heads; h++) {
        int p0 = lp->pair_start[h], np = lp->pair_start[h + 1] - p0;
        int j0 = lp->v_start[h], nj = lp->v_start[h + 1] - j0;
        float *kg = inf->kg + L * p0, *vg = inf->vg + L * j0;
        for (int t = 0; t < T; t++) {
            for (int p = 0; p < np; p++) kg[(long)t * np + p] = kc[(t * nk + lp->pair_k[p0 + p]) * S + s];
            for (int j = 0; j < nj; j++) vg[(long)t * nj + j] = vc[(t * nv + j0 + j) * S + s];
        }
        if (inf->grouped) {
            int G = TF_ATT_GROUPS, n;
            n = attention_groups(inf->gkeys + (long)G * p0, inf->gcounts + L * G * h,
                                 inf->gvsums + L * G * j0, inf->gcls, kg, vg, T, np, nj, G);
            inf->n_groups[h] = 4 * n <= T ? n : 0;
            inf->flops += (double)T * nj; /* the prefix sums */
        }
    }
}

/* Stable counting sort of dst[0..n-1] by key[dst[i]] in 0..nk-1, through tmp. */
static void sort_rows(int *dst, int *tmp, const int *key, int n, int nk, int *bucket) {
    memset(bucket, 0, ((size_t)nk + 1) * sizeof(int));
    for (int i = 0; i < n; i++) bucket[key[dst[i]] + 1]++;
    for (int b = 0; b < nk; b++) bucket[b + 1] += bucket[b];
    for (int i = 0; i < n; i++) tmp[bucket[key[dst[i]]]++] = dst[i];
    memcpy(dst, tmp, (size_t)n * sizeof(int));
}

/* Every head of attention layer l at the first n_run rows of the step, in
 * blocks of TF_ATT_LANES rows. The blocks take the rows by the positions
 * they see, then by sequence: at each position the rows of consecutive
 * sequences (a vector load per position and channel), and no lane of a
 * block waits on a longer one. Every row's result is the same in any
 * block. While an attention hook wants each row's scores and weights, one
 * row at a time, in order. */
/* Attention of rows 0..n_run-1 for the heads `which` selects (-1 every
 * head; 1 or 0 those with head_full[h] == which), the queries' rows ld
 * apart: value channel j of the heads into out + j * ldo (inf->heads,
 * ldo = ld), or with add onto it (the residual stream's columns of a
 * copying output projection, LayerPlan.o_col). */
static void attention_heads(TfInfer *inf, int l, int n_run, int ld, int which, float *out,
                            int ldo, int add) {
    const LayerPlan *lp = &inf->plan->layers[l];
    int S = inf->max_seqs, L = inf->m->max_len, nk = lp->k.n_rows, nv = lp->v.n_rows;
    int lanes = inf->att_hook ? 1 : TF_ATT_LANES, bad_row = -1;
    int used[TF_ATT_LANES];
    float sums[TF_ATT_LANES];
    int *order = inf->order;
    // The order and blocks of the previous layer's call serve while its
    // rows, lanes and masking are the same (forward_rows forgets them each
    // step).
    int key = n_run * 4 + lp->causal * 2 + (lanes > 1);
    if (inf->order_key != key) {
        inf->order_key = key;
        for (int r = 0; r < n_run; r++) {
            order[r] = r;
            inf->row_t[r] = lp->causal ? inf->row_pos[r] + 1 : inf->seq_len[inf->row_seq[r]];
        }
        int sorted = 1; /* already by T, then sequence (a generation step's rows) */
        for (int r = 1; r < n_run && sorted; r++)
            sorted = inf->row_t[r - 1] < inf->row_t[r] ||
                     (inf->row_t[r - 1] == inf->row_t[r] && inf->row_seq[r - 1] < inf->row_seq[r]);
        if (lanes > 1 && !sorted) { // by sequence, then stably by T
            sort_rows(order, inf->order_tmp, inf->row_seq, n_run, S, inf->bucket);
            sort_rows(order, inf->order_tmp, inf->row_t, n_run, L + 1, inf->bucket);
        }
        for (int r = 0; r < n_run; r++) {
            inf->ord_seq[r] = inf->row_seq[order[r]];
            inf->ord_t[r] = inf->row_t[order[r]];
        }
        // A block holds rows of one sequence (keys and values broadcast to
        // the lanes) or rows of different ones, never both: it ends where a
        // run of one sequence's rows starts or stops.
        const int *rs = inf->ord_seq;
        inf->n_blk = 0;
        for (int r0 = 0, W; r0 < n_run; r0 += W) {
            int max_w = n_run - r0 < lanes ? n_run - r0 : lanes, one_seq = lanes > 1;
            W = 1;
            if (max_w > 1 && rs[r0 + 1] == rs[r0])
                while (W < max_w && rs[r0 + W] == rs[r0]) W++;
            else
                while (W < max_w && rs[r0 + W] != rs[r0 + W - 1] &&
                       (W + 1 >= max_w || rs[r0 + W + 1] != rs[r0 + W]))
                    W++;
            long n_t = 0;
            for (int i = 0; i < W; i++) {
                one_seq &= rs[r0 + i] == rs[r0];
                n_t += inf->ord_t[r0 + i];
            }
            inf->blk[inf->n_blk++] = (struct AttBlockPlan){r0, W, one_seq, n_t};
        }
    }
    const int zero[TF_ATT_LANES] = {0};
    int gathered = -1; /* the sequence in kg and vg */
    // Keys of the position alone (every row static: fill_static_keys), the
    // same in every sequence unless an intervention computes them.
    const LayerPlan *kl = lp->k_from >= 0 ? &inf->plan->layers[lp->k_from] : lp;
    int k_same = kl->n_static == nk && !inf->iv;
    for (int b = 0; b < inf->n_blk; b++) {
        int r0 = inf->blk[b].r0, W = inf->blk[b].w, one_seq = inf->blk[b].one_seq;
        const int *rows = order + r0, *seq = inf->ord_seq + r0, *T = inf->ord_t + r0;
        // A block of one long sequence reads its keys and values at every
        // position, each a cache line apart in the caches: gathered once
        // for all its blocks, they are read in order.
        int gather = one_seq && inf->seq_len[seq[0]] >= GATHER_MIN_T;
        if (gather && gathered != seq[0]) {
            gather_sequence(inf, l, seq[0]);
            gathered = seq[0];
        }
        for (int h = 0; h < lp->n_heads; h++) {
            if (which >= 0 && lp->head_full[h] != which) continue;
            int p0 = lp->pair_start[h], np = lp->pair_start[h + 1] - p0;
            int j0 = lp->v_start[h], j1 = lp->v_start[h + 1];
            int G = TF_ATT_GROUPS, n_groups = gather && inf->grouped ? inf->n_groups[h] : 0;
            if (n_groups)
                attention_grouped_forward(out + (size_t)j0 * ldo, ldo, sums, used, inf->q, ld,
                                          rows, lp->pair_q + p0, np, inf->gkeys + (size_t)G * p0,
                                          n_groups, inf->gcounts + (size_t)L * G * h,
                                          inf->gvsums + (size_t)L * G * j0, j1 - j0, T, W,
                                          lp->scale, add);
            else if (gather)
                attention_block_forward(out + (size_t)j0 * ldo, ldo, sums, used,
                                        inf->att, NULL, inf->q, ld, rows, lp->pair_q + p0,
                                        inf->ident, np, inf->kg + (size_t)L * p0, np,
                                        inf->vg + (size_t)L * j0, j1 - j0, 0, j1 - j0, 1, zero, T,
                                        W, lp->scale, 0, add);
            else
                attention_block_forward(out + (size_t)j0 * ldo, ldo, sums, used,
                                        inf->att, inf->att_hook ? inf->scores : NULL, inf->q,
                                        ld, rows, lp->pair_q + p0, lp->pair_k + p0, np,
                                        inf->kcache[l], nk, inf->vcache[l], nv, j0, j1, S, seq, T,
                                        W, lp->scale, k_same, add);
            long n_t = inf->blk[b].n_t, n_used = 0;
            int any_nan = 0;
            if (W == TF_ATT_LANES) { /* a full block (most): a count known, vectors */
                int u = 0;
                for (int i = 0; i < TF_ATT_LANES; i++) {
                    u += used[i];
                    any_nan |= sums[i] != sums[i];
                }
                n_used = u;
            } else {
                for (int i = 0; i < W; i++) {
                    n_used += used[i];
                    any_nan |= sums[i] != sums[i];
                }
            }
            for (int i = 0; any_nan && i < W; i++) // an infinite or NaN score (overflow)
                if (isnan(sums[i]) && (bad_row < 0 || rows[i] < bad_row)) bad_row = rows[i];
            if (n_groups) // one score and one value sum per group
                inf->flops += 2.0 * W * n_groups * (np + j1 - j0);
            else
                inf->flops += 2.0 * n_t * np + 2.0 * n_used * (j1 - j0);
            if (inf->att_hook) {
                for (int t = 0; t < T[0]; t++) {
                    inf->hook_scores[t] = inf->scores[t * TF_ATT_LANES];
                    inf->hook_att[t] = inf->att[t * TF_ATT_LANES];
                }
                inf->att_hook(inf->att_hook_user, l, h, seq[0], inf->row_pos[rows[0]],
                              inf->hook_scores, inf->hook_att, T[0]);
            }
        }
    }
    if (bad_row >= 0 && !inf->bad) {
        inf->bad = 1;
        inf->bad_row = bad_row;
    }
}

/* Layer l at rows 0..n_run-1, its parts that need only the output rows
 * (plan_split_heads) at rows 0..n_part-1. */
static void attention_layer(TfInfer *inf, int l, const float *in, int n, int n_run, int n_part) {
    const LayerPlan *lp = &inf->plan->layers[l];
    int nk = lp->k.n_rows, nv = lp->v.n_rows;

    // Keys and values of every row into the cache first, so that a row can
    // attend to rows of the same step.
    float *kc = inf->kcache[l], *vc = inf->vcache[l];
    if (lp->k_from < 0) {
        // Static keys are in the cache already, unless an intervention may
        // change them.
        const TfLinear *K = lp->n_static && !inf->iv ? &lp->kd : &lp->k;
        linear(inf, K, inf->k, n, in, n, n);
        store_cache(inf, kc, inf->k, K->n_rows, K == &lp->kd ? lp->kd_ch : NULL, nk, n);
        if (lp->n_static && inf->iv) inf->static_stale = 1;
        // A key that overflowed makes the scores of the rows that see it
        // NaN or infinite (0 times it included): the step fails here, which
        // lets attention_block_forward leave out the queries' zero channels.
        int bad_row = inf->bad ? -1 : first_nonfinite_row(inf->k, n, NULL, K->n_rows, n);
        if (bad_row >= 0) {
            inf->bad = 1;
            inf->bad_row = bad_row;
        }
    }
    if (lp->v_from < 0) {
        linear(inf, &lp->v, inf->v, n, in, n, n);
        store_cache(inf, vc, inf->v, nv, NULL, nv, n);
    }
    linear(inf, &lp->q, inf->q, n_run, in, n, n_run);
    if (inf->act_hook) {
        call_act_hook(inf, l, TF_HOOK_Q, inf->q, n_run, NULL, lp->q.rows, lp->q.n_rows, n_run);
        call_act_hook(inf, l, TF_HOOK_K, NULL, 0, kc, lp->k.rows, nk, n);
        call_act_hook(inf, l, TF_HOOK_V, NULL, 0, vc, lp->v.rows, nv, n);
    }

    if (lp->o_col >= 0 && !inf->iv && !inf->act_hook && !(lp->split_heads && n_part < n_run)) {
        // The output projection copies: the heads go straight into the
        // residual stream (an overflow there fails the step as o's would).
        attention_heads(inf, l, n_run, n_run, -1, inf->x + (size_t)lp->o_col * n, n, 1);
        inf->flops += (double)lp->o.nnz * n_run; /* an addition each */
        return;
    }
    if (lp->split_heads && n_part < n_run) {
        attention_heads(inf, l, n_run, n_run, 1, inf->heads, n_run, 0);
        attention_heads(inf, l, n_part, n_run, 0, inf->heads, n_run, 0);
        for (int h = 0; h < lp->n_heads; h++)
            for (int j = lp->v_start[h]; j < lp->v_start[h + 1] && !lp->head_full[h]; j++)
                memset(inf->heads + (size_t)j * n_run + n_part, 0,
                       (size_t)(n_run - n_part) * sizeof(float));
    } else {
        attention_heads(inf, l, n_run, n_run, -1, inf->heads, n_run, 0);
    }
    if (inf->iv) apply_edits(inf, l, TF_SITE_HEADS, inf->heads, n_run, lp->v.rows, nv, n_run);
    if (inf->act_hook)
        call_act_hook(inf, l, TF_HOOK_Z, inf->heads, n_run, NULL, lp->v.rows, nv, n_run);
    if (lp->has_o && !inf->iv && !inf->act_hook) {
        linear_residual(inf, &lp->o, inf->heads, n_run, n, n_run);
    } else if (lp->has_o) {
        linear(inf, &lp->o, inf->delta, n_run, inf->heads, n_run, n_run);
        if (inf->iv)
            apply_edits(inf, l, TF_SITE_OUTPUT, inf->delta, n_run, lp->o.rows, lp->o.n_rows, n_run);
        if (inf->act_hook)
            call_act_hook(inf, l, TF_HOOK_OUT, inf->delta, n_run, NULL, lp->o.rows, lp->o.n_rows,
                          n_run);
        add_rows(inf, inf->x, n, inf->delta, n_run, lp->o.rows, lp->o.n_rows, n_run);
    } else {
        // Head channel c is residual column c.
        if (inf->iv) apply_edits(inf, l, TF_SITE_OUTPUT, inf->heads, n_run, lp->v.rows, nv, n_run);
        if (inf->act_hook)
            call_act_hook(inf, l, TF_HOOK_OUT, inf->heads, n_run, NULL, lp->v.rows, nv, n_run);
        add_rows(inf, inf->x, n, inf->heads, n_run, lp->v.rows, nv, n_run);
    }
}

/* One group of a split MLP's units (plan_split_mlp) at rows 0..n_run-1. */
static void mlp_group(TfInfer *inf, TfActivation act, const TfLinear *fc1, const TfLinear *fc2,
                      int pairs, const float *in, int n, int n_run) {
    if (pairs) { /* one-to-one pairs of units and columns: one pass */
        int bad = linear_mlp_pairs_forward(fc1, fc2, inf->x, n, in, n, n_run, simd_active());
        inf->flops += 2.0 * (double)(2 * fc2->n_rows) * n_run;
        if (bad && !inf->bad) {
            inf->bad = 1;
            inf->bad_row = first_nonfinite_row(inf->x, n, fc2->rows, fc2->n_rows, n_run);
        }
        return;
    }
    linear_activation(inf, act, fc1, in, n, n_run);
    linear_residual(inf, fc2, inf->hidden, n_run, n, n_run);
}

/* Layer l at rows 0..n_run-1, its units that need only the output rows
 * (plan_split_mlp) at rows 0..n_part-1. */
static void mlp_layer(TfInfer *inf, int l, const float *in, int n, int n_run, int n_part) {
    const LayerPlan *lp = &inf->plan->layers[l];
    if (lp->split_units && n_part < n_run) {
        mlp_group(inf, lp->act, &lp->fc1a, &lp->fc2a, lp->pairs[1], in, n, n_run);
        mlp_group(inf, lp->act, &lp->fc1b, &lp->fc2b, lp->pairs[2], in, n, n_part);
        return;
    }
    if (!inf->act_hook && !inf->iv) { /* nothing to see or edit between the maps */
        mlp_group(inf, lp->act, &lp->fc1, &lp->fc2, lp->pairs[0], in, n, n_run);
        return;
    }
    linear(inf, &lp->fc1, inf->hidden, n_run, in, n, n_run);
    const int *units = lp->fc1.rows; /* hidden unit of each packed row */
    int nu = lp->fc1.n_rows;
    if (inf->act_hook)
        call_act_hook(inf, l, TF_HOOK_MLP_PRE, inf->hidden, n_run, NULL, units, nu, n_run);
    activation(lp->act, inf->hidden, (long)nu * n_run);
    if (inf->iv) apply_edits(inf, l, TF_SITE_UNITS, inf->hidden, n_run, units, nu, n_run);
    if (inf->act_hook)
        call_act_hook(inf, l, TF_HOOK_MLP_POST, inf->hidden, n_run, NULL, units, nu, n_run);
    // The layer's output, bias included, is formed before it is added: the
    // seed's StepPosition relies on (h W2 + b2) being exact before x + (...).
    linear(inf, &lp->fc2, inf->delta, n_run, inf->hidden, n_run, n_run);
    if (inf->iv)
        apply_edits(inf, l, TF_SITE_OUTPUT, inf->delta, n_run, lp->fc2.rows, lp->fc2.n_rows, n_run);
    if (inf->act_hook)
        call_act_hook(inf, l, TF_HOOK_OUT, inf->delta, n_run, NULL, lp->fc2.rows, lp->fc2.n_rows,
                      n_run);
    add_rows(inf, inf->x, n, inf->delta, n_run, lp->fc2.rows, lp->fc2.n_rows, n_run);
}

/* Layer l's checks at the n_run rows it computed, but the BOS position of a
 * model with a bos (it holds no value: its output means nothing); a
 * sequence keeps its first failure (the earliest layer, then position). */
static void run_checks(TfInfer *inf, int l, int n, int n_run) {
    const TfModel *m = inf->m;
    const LayerPlan *lp = &inf->plan->layers[l];
    int first = check_first_position(m);
    for (int k = 0; k < lp->n_checks; k++) {
        const TfCheck *c = &m->checks[lp->check_idx[k]];
        const TfRegister *reg = &m->regs[c->reg];
        const float *col = inf->x + (size_t)reg->offset * n;
        double bound = model_check_bound(m, c);
        for (int r = 0; r < n_run; r++) {
            if (inf->row_pos[r] < first || check_holds_one(col + r, reg->size, (size_t)n, bound)) continue;
            int s = inf->row_seq[r], pos = inf->row_pos[r];
            if (inf->fail_layer[s] >= 0 && (inf->fail_layer[s] < l || inf->fail_pos[s] <= pos))
                continue;
            if (inf->fail_layer[s] < 0) inf->n_failed++;
            inf->fail_layer[s] = l;
            inf->fail_pos[s] = pos;
            check_describe(m, c, pos, col + r, (size_t)n, &inf->fail_err[s]);
        }
    }
}

static void call_hook(TfInfer *inf, int layer, int n) {
    int d = inf->m->d_model;
    for (int r = 0; r < n; r++)
        for (int c = 0; c < d; c++) inf->rowmajor[(size_t)r * d + c] = inf->x[(size_t)c * n + r];
    inf->hook(inf->hook_user, layer, inf->rowmajor, n, inf->row_seq, inf->row_pos);
}

/* The error of a step whose activations overflowed float32 at layer l
 * (-1: the embedding, n_layers: the logits), row inf->bad_row: -1. */
static int overflow_error(TfInfer *inf, int l, TfError *err) {
    const TfModel *m = inf->m;
    inf->bad = 1;
    char where[160];
    if (l < 0)
        snprintf(where, sizeof where, "the embedding");
    else if (l >= m->n_layers)
        snprintf(where, sizeof where, "the logits");
    else
        snprintf(where, sizeof where, "layer %d (%.100s)", l, m->layers[l].name);
    tf_error_set(err, "%s overflows float32 at position %d: a value is infinite or NaN (weights too "
                      "large for float32 arithmetic)", where, inf->row_pos[inf->bad_row]);
    return -1;
}

/* The step's n rows as runs of equal or consecutive positions (a
 * generation step: one run of equal positions; a prompt step: a run per
 * prompt). */
static void embed_runs(TfInfer *inf, int n) {
    const int *pos = inf->row_pos;
    int k = 0;
    for (int r = 0; r < n;) {
        int dp = r + 1 < n && pos[r + 1] == pos[r] + 1, e = r + 1;
        while (e < n && pos[e] == pos[e - 1] + dp) e++;
        inf->run_r0[k] = r, inf->run_p0[k] = pos[r], inf->run_dp[k] = dp;
        k++;
        r = e;
    }
    inf->run_r0[k] = n;
    inf->n_runs = k;
}

/* A column the position embedding alone writes (its token entries all +0):
 * xc[r] = +0 + pk[pos[r]], run by run. */
static void embed_position_column(const TfInfer *inf, float *restrict xc,
                                  const float *restrict pk) {
    for (int i = 0; i < inf->n_runs; i++) {
        int r0 = inf->run_r0[i], len = inf->run_r0[i + 1] - r0;
        const float *restrict p = pk + inf->run_p0[i];
        float *restrict x = xc + r0;
        if (inf->run_dp[i])
            for (int j = 0; j < len; j++) x[j] = 0.0f + p[j];
        else
            for (int j = 0; j < len; j++) x[j] = 0.0f + p[0];
    }
}

/* A column the token embedding alone writes (its position entries all +0):
 * xc[r] = tk[tok[r]] + +0. */
static void embed_token_column(float *restrict xc, const float *restrict tk,
                               const int *restrict tok, int n) {
    for (int r = 0; r < n; r++) xc[r] = tk[tok[r]] + 0.0f;
}

/* A column of embed_token_column that token t alone sets (to v): the
 * same sums, tk[tok[r]] + +0, as a compare and a select (a gather per row
 * was half the time of a step outside its layers). Every other token's
 * +-0 plus +0 is +0. */
static void embed_one_token_column(float *restrict xc, float v, int t, const int *restrict tok,
                                   int n) {
    float vt = v + 0.0f;
    for (int r = 0; r < n; r++) xc[r] = tok[r] == t ? vt : 0.0f;
}

/* One embedded column: xc[r] = tk[tok[r]] + pk[pos[r]]. */
static void embed_column(float *restrict xc, const float *restrict tk, const float *restrict pk,
                         const int *restrict tok, const int *restrict pos, int n) {
    for (int r = 0; r < n; r++) xc[r] = tk[tok[r]] + pk[pos[r]];
}

/* Runs the n rows of the step (row_seq, row_pos, row_tok filled, the nf
 * output rows first) through the model, then the unembedding of the output
 * rows into logits [n_out, nf]. Returns -1 when out of memory or when a
 * value overflows float32 (overflow_error). */
static int forward_rows(TfInfer *inf, int n, int nf, TfError *err) {
    const TfModel *m = inf->m;
    int d = m->d_model;
    int everything = inf->hook || inf->att_hook || inf->act_hook || inf->iv;
    if (inf->hook && !inf->rowmajor) {
        inf->rowmajor = alloc_floats((size_t)inf->max_rows * d);
        if (!inf->rowmajor) {
            tf_error_set(err, "out of memory");
            return -1;
        }
    }
    if (inf->act_hook && !inf->hookbuf) {
        int width = 0;
        for (int l = 0; l < m->n_layers; l++)
            for (int p = 0; p < TF_HOOK_POINT_COUNT; p++)
                width = imax(width, infer_hook_width(m, &m->layers[l], (TfHookPoint)p));
        inf->hookbuf = alloc_floats((size_t)inf->max_rows * (size_t)width);
        if (!inf->hookbuf) {
            tf_error_set(err, "out of memory");
            return -1;
        }
    }
    const TfPlan *plan = inf->plan;
    // Columns no embedding writes start at 0: at every row where a row
    // past the output rows reads or writes them, else at the output rows.
    for (int c = 0, k = 0; c < d; c++) {
        if (k < plan->n_emb_cols && plan->emb_cols[k] == c) {
            k++;
            continue;
        }
        int rows = everything || plan->all_rows[c] ? n : nf;
        memset(inf->x + (size_t)c * n, 0, (size_t)rows * sizeof(float));
    }
    embed_runs(inf, n);
    for (int k = 0; k < plan->n_emb_cols; k++) {
        float *xc = inf->x + (size_t)plan->emb_cols[k] * n;
        const float *tk = plan->emb_tok + (size_t)k * m->n_vocab;
        const float *pk = plan->emb_pos + (size_t)k * m->max_len;
        if (plan->emb_pos_only[k])
            embed_position_column(inf, xc, pk);
        else if (plan->emb_one_tok[k] >= 0)
            embed_one_token_column(xc, tk[plan->emb_one_tok[k]], plan->emb_one_tok[k],
                                   inf->row_tok, n);
        else if (plan->emb_tok_only[k])
            embed_token_column(xc, tk, inf->row_tok, n);
        else
            embed_column(xc, tk, pk, inf->row_tok, inf->row_pos, n);
    }
    for (int r = 0; r < n; r++) {
        int s = inf->row_seq[r];
        if (inf->row_pos[r] + 1 > inf->seq_len[s]) inf->seq_len[s] = inf->row_pos[r] + 1;
        inf->pos_order[r] = r;
        inf->row_blk[r] = s / STORE_BLOCK;
    }
    // A prompt pass's rows as runs of one position's consecutive
    // sequences (fill_rows), when they are few: each run is copied into
    // the caches channel by channel.
    inf->n_st_runs = 0;
    for (int r = 0; r < n && inf->n_st_runs * STORE_BLOCK <= n; r++)
        if (r == 0 || inf->row_pos[r] != inf->row_pos[r - 1] ||
            inf->row_seq[r] != inf->row_seq[r - 1] + 1)
            inf->st_run[inf->n_st_runs++] = r;
    inf->st_run[inf->n_st_runs] = n;
    if (inf->n_st_runs * STORE_BLOCK > n || inf->n_st_runs == 1) inf->n_st_runs = 0;
    // A generation step's rows are in that order already.
    int sorted = 1, n_blk = (inf->max_seqs + STORE_BLOCK - 1) / STORE_BLOCK;
    for (int r = 1; r < n && sorted; r++) {
        const int *b = inf->row_blk, *p = inf->row_pos, *q = inf->row_seq;
        sorted = b[r - 1] < b[r] ||
                 (b[r - 1] == b[r] && (p[r - 1] < p[r] || (p[r - 1] == p[r] && q[r - 1] < q[r])));
    }
    if (!sorted && !inf->n_st_runs) {
        sort_rows(inf->pos_order, inf->order_tmp, inf->row_seq, n, inf->max_seqs, inf->bucket);
        sort_rows(inf->pos_order, inf->order_tmp, inf->row_pos, n, m->max_len, inf->bucket);
        sort_rows(inf->pos_order, inf->order_tmp, inf->row_blk, n, n_blk, inf->bucket);
    }
    inf->n_st_blocks = 0;
    for (int k = 0; k < n && !inf->n_st_runs; k++)
        if (k == 0 || inf->row_blk[inf->pos_order[k]] != inf->row_blk[inf->pos_order[k - 1]])
            inf->st_start[inf->n_st_blocks++] = k;
    inf->st_start[inf->n_st_blocks] = n;
    inf->st_contig = sorted;
    for (int r = 1; r < n && inf->st_contig; r++)
        inf->st_contig =
            inf->row_pos[r] == inf->row_pos[0] && inf->row_seq[r] == inf->row_seq[0] + r;
    inf->order_key = -1;
    if (inf->static_stale && !inf->iv) fill_static_keys(inf);
    inf->bad = 0;
    if (!plan->emb_finite &&
        (inf->bad_row = first_nonfinite_row(inf->x, n, plan->emb_cols, plan->n_emb_cols, n)) >= 0)
        return overflow_error(inf, -1, err);
    if (inf->iv) apply_edits(inf, -1, TF_SITE_RESID, inf->x, n, NULL, d, n);
    if (inf->hook) call_hook(inf, -1, n);
    for (int l = 0; l < m->n_layers; l++) {
        const LayerPlan *lp = &inf->plan->layers[l];
        int n_run = everything || lp->full ? n : nf;
        int n_part = everything ? n : nf; /* rows of the parts only output rows need */
        const float *in = inf->x;
        if (lp->norm_w) {
            // Keys and values read the normalized input at every row.
            int n_norm = lp->kind == TF_LAYER_ATTENTION ? n : n_run;
            float *dst = lp->kind == TF_LAYER_NORM ? inf->delta : inf->xn;
            layernorm_forward_fm(dst, inf->x, n, d, n_norm, lp->norm_w, lp->norm_b, lp->eps,
                                 inf->stat);
            if (lp->kind == TF_LAYER_NORM) {
                for (int c = 0; c < d; c++)
                    memcpy(inf->x + (size_t)c * n, dst + (size_t)c * n, (size_t)n_norm * sizeof(float));
                if ((inf->bad_row = first_nonfinite_row(inf->x, n, NULL, d, n_norm)) >= 0)
                    inf->bad = 1;
            }
            in = inf->xn;
            if (inf->act_hook && lp->kind != TF_LAYER_NORM)
                call_act_hook(inf, l, TF_HOOK_NORMALIZED, inf->xn, n, NULL, NULL, d, n_norm);
        }
        if (lp->kind == TF_LAYER_ATTENTION)
            attention_layer(inf, l, in, n, n_run, n_part);
        else if (lp->kind == TF_LAYER_MLP)
            mlp_layer(inf, l, in, n, n_run, n_part);
        if (inf->bad) return overflow_error(inf, l, err);
        if (inf->iv) apply_edits(inf, l, TF_SITE_RESID, inf->x, n, NULL, d, n);
        if (lp->n_checks) run_checks(inf, l, n, n_run);
        if (inf->hook) call_hook(inf, l, n);
    }
    if (plan->numeric) return 0; /* the output register is read directly */
    // Logits of the output rows; rows the unembedding never writes are 0.
    const TfLinear *U = &inf->plan->unembed;
    float *lg = inf->logits;
    memset(lg, 0, (size_t)U->n_out * nf * sizeof(float));
    linear(inf, U, inf->delta, nf, inf->x, n, nf);
    for (int k = 0; k < U->n_rows; k++)
        memcpy(lg + (size_t)U->rows[k] * nf, inf->delta + (size_t)k * nf, (size_t)nf * sizeof(float));
    if ((inf->bad_row = first_nonfinite_row(inf->delta, nf, NULL, U->n_rows, nf)) >= 0)
        return overflow_error(inf, m->n_layers, err);
    return 0;
}

static int check_prompts(const TfInfer *inf, const int *const *prompts, const int *lens,
                         int n_seqs, int n_new, TfError *err) {
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
        if ((long)lens[s] + (n_new > 0 ? n_new - 1 : 0) > m->max_len) {
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
    return 0;
}

/* Fills the rows of one step for the sequences act[0..n_act-1]: with `all`,
 * every position of each (the output row `out_pos[s]` of each first), else
 * only the last one. Output row k belongs to sequence act[k]. */
static int fill_rows(TfInfer *inf, int *const *seqs, const int *len, const int *out_pos,
                     const int *act, int n_act, int all) {
    int n = 0;
    for (int k = 0; k < n_act; k++) {
        int s = act[k];
        int p = all ? out_pos[s] : len[s] - 1;
        inf->row_seq[n] = s;
        inf->row_pos[n] = p;
        inf->row_tok[n] = seqs[s][p];
        n++;
        if (all) inf->seq_len[s] = 0;
    }
    if (!all) return n;
    // The others by position, then sequence: the caches take each
    // position's consecutive sequences as one copy (store_cache).
    int max_len = 0;
    for (int k = 0; k < n_act; k++) max_len = imax(max_len, len[act[k]]);
    for (int p = 0; p < max_len; p++)
        for (int k = 0; k < n_act; k++) {
            int s = act[k];
            if (p >= len[s] || p == out_pos[s]) continue;
            inf->row_seq[n] = s;
            inf->row_pos[n] = p;
            inf->row_tok[n] = seqs[s][p];
            n++;
        }
    return n;
}

/* Forgets the failures of the previous call (of any number of sequences). */
static void reset_failures(TfInfer *inf) {
    inf->bad = 0;
    if (!inf->fail_layer) return;
    for (int s = 0; s < inf->max_seqs; s++) inf->fail_layer[s] = -1;
    inf->n_failed = 0;
}

/* 0, or -1 with err set to the first failed sequence's failure. */
static int report_failures(const TfInfer *inf, int n_seqs, TfError *err) {
    if (!inf->n_failed) return 0;
    for (int s = 0; s < n_seqs; s++)
        if (inf->fail_layer[s] >= 0) {
            tf_error_set(err, "%s", inf->fail_err[s].msg);
            break;
        }
    return -1;
}

int infer_n_failed(const TfInfer *inf) { return inf->n_failed; }

int infer_overflowed(const TfInfer *inf) { return inf->bad; }

const char *infer_failure(const TfInfer *inf, int s) {
    if (!inf->fail_layer || s < 0 || s >= inf->max_seqs || inf->fail_layer[s] < 0) return NULL;
    return inf->fail_err[s].msg;
}

/* The argmax (first maximum) of output row r of the last step's logits. */
static int logits_argmax(const TfInfer *inf, int r, int nf) {
    int best = 0;
    for (int t = 1; t < inf->m->n_vocab; t++)
        if (inf->logits[(size_t)t * nf + r] > inf->logits[(size_t)best * nf + r]) best = t;
    return best;
}

/* Greedy generation of up to cap[s] tokens per sequence; a sequence stops
 * early after generating `stop` (-1: never). n_out[s]: the tokens kept
 * (the stop token excluded). Finished sequences leave the batch. */
static int generate(TfInfer *inf, const int *const *prompts, const int *lens, int n_seqs,
                    int n_new, const int *cap, int stop, int *out, int *n_out, TfError *err) {
    // Step 0: every prompt position of every sequence, in one stack of rows.
    // Later steps: one row per sequence, the token generated last. Without
    // incremental decoding (a bidirectional layer, or the cache turned off),
    // each step recomputes all.
    int incremental = inf->plan->incremental && inf->use_cache;
    reset_failures(inf);
    int *len = malloc((size_t)n_seqs * sizeof(int));
    int *last = malloc((size_t)n_seqs * sizeof(int));
    int *act = malloc((size_t)n_seqs * sizeof(int));
    int **seqs = calloc((size_t)n_seqs, sizeof(int *));
    size_t total = 0; /* every sequence's tokens, in one block */
    for (int s = 0; s < n_seqs; s++) total += (size_t)lens[s] + (size_t)n_new;
    int *toks = malloc((total + 1) * sizeof(int));
    int rc = -1, n_act = 0;
    if (!len || !last || !act || !seqs || !toks) goto oom;
    for (int s = 0, *t = toks; s < n_seqs; t += lens[s] + n_new, s++) {
        seqs[s] = t;
        memcpy(seqs[s], prompts[s], (size_t)lens[s] * sizeof(int));
        len[s] = lens[s];
        n_out[s] = 0;
        if (cap[s] > 0) act[n_act++] = s;
    }
    for (int step = 0; n_act > 0; step++) {
        for (int k = 0; k < n_act; k++) last[act[k]] = len[act[k]] - 1;
        int n = fill_rows(inf, seqs, len, last, act, n_act, step == 0 || !incremental);
        if (forward_rows(inf, n, n_act, err) < 0) goto done;
        int kept = 0;
        for (int k = 0; k < n_act; k++) {
            int s = act[k], best = logits_argmax(inf, k, n_act);
            if (inf->n_failed && inf->fail_layer[s] >= 0) continue; /* a check failed: done */
            out[(long)s * n_new + n_out[s]] = best;
            if (best == stop) continue; /* done; the stop token is not kept */
            seqs[s][len[s]++] = best;
            if (++n_out[s] < cap[s]) act[kept++] = s;
        }
        n_act = kept;
    }
    rc = report_failures(inf, n_seqs, err);
    goto done;
oom:
    tf_error_set(err, "out of memory");
done:
    free(toks);
    free(seqs);
    free(len);
    free(last);
    free(act);
    return rc;
}

/* Checks that this is a generating (next-token) model. */
static int check_generating(const TfModel *m, TfError *err) {
    if (m->output_kind == TF_OUTPUT_CLASSIFY) {
        tf_error_set(err, "this model classifies; it does not generate tokens");
        return -1;
    }
    if (m->every_position) {
        tf_error_set(err, "this model is read at every position; it does not generate tokens");
        return -1;
    }
    return 0;
}

int infer_generate(TfInfer *inf, const int *const *prompts, const int *lens, int n_seqs, int n_new,
                   int *out, TfError *err) {
    if (check_generating(inf->m, err) < 0 ||
        check_prompts(inf, prompts, lens, n_seqs, n_new, err) < 0)
        return -1;
    if (n_new == 0 || n_seqs == 0) return 0;
    int *cap = malloc((size_t)n_seqs * sizeof(int)), *n_out = malloc((size_t)n_seqs * sizeof(int));
    int rc = -1;
    if (!cap || !n_out)
        tf_error_set(err, "out of memory");
    else {
        for (int s = 0; s < n_seqs; s++) cap[s] = n_new;
        rc = generate(inf, prompts, lens, n_seqs, n_new, cap, -1, out, n_out, err);
    }
    free(cap);
    free(n_out);
    return rc;
}

int infer_generate_until(TfInfer *inf, const int *const *prompts, const int *lens, int n_seqs,
                         int max_new, int stop, int *out, int *n_out, TfError *err) {
    const TfModel *m = inf->m;
    if (check_generating(m, err) < 0 || check_prompts(inf, prompts, lens, n_seqs, 1, err) < 0)
        return -1;
    if (max_new < 0) {
        tf_error_set(err, "cannot generate a negative number of tokens (%d)", max_new);
        return -1;
    }
    if (stop < -1 || stop >= m->n_vocab) {
        tf_error_set(err, "stop token %d is outside the vocabulary", stop);
        return -1;
    }
    for (int s = 0; s < n_seqs; s++) n_out[s] = 0;
    if (max_new == 0 || n_seqs == 0) return 0;
    int *cap = malloc((size_t)n_seqs * sizeof(int));
    if (!cap) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    // The last token generated is never fed back: positions up to max_len - 1
    // produce up to max_len - len + 1 tokens.
    for (int s = 0; s < n_seqs; s++) {
        int room = m->max_len - lens[s] + 1;
        cap[s] = max_new < room ? max_new : room;
    }
    int rc = generate(inf, prompts, lens, n_seqs, max_new, cap, stop, out, n_out, err);
    free(cap);
    return rc;
}

/* One pass over each whole sequence; the token (toks) or the output
 * register's value (vals) at every position. */
static int every_position(TfInfer *inf, const int *const *seqs, const int *lens, int n_seqs,
                          int *const *toks, float *const *vals, TfError *err) {
    const TfModel *m = inf->m;
    if (m->output_kind == TF_OUTPUT_CLASSIFY) {
        tf_error_set(err, "this model classifies; it has no output at every position");
        return -1;
    }
    if (inf->plan->numeric != (vals != NULL)) {
        tf_error_set(err, inf->plan->numeric ? "this model prints a number at every position"
                                             : "this model's output is a token, not a number");
        return -1;
    }
    if (check_prompts(inf, seqs, lens, n_seqs, 0, err) < 0) return -1;
    reset_failures(inf);
    if (n_seqs == 0) return 0;
    int *at = calloc((size_t)n_seqs, sizeof(int)), *act = malloc((size_t)n_seqs * sizeof(int));
    if (!at || !act) {
        free(at);
        free(act);
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int s = 0; s < n_seqs; s++) act[s] = s;
    // Every row is an output row: nothing is skipped, one pass.
    int n = fill_rows(inf, (int *const *)seqs, lens, at, act, n_seqs, 1);
    free(at);
    free(act);
    if (forward_rows(inf, n, n, err) < 0) return -1;
    if (vals) {
        const float *col = inf->x + (size_t)m->regs[m->output_reg].offset * n;
        for (int r = 0; r < n; r++) vals[inf->row_seq[r]][inf->row_pos[r]] = col[r];
    } else {
        for (int r = 0; r < n; r++)
            toks[inf->row_seq[r]][inf->row_pos[r]] = logits_argmax(inf, r, n);
    }
    return report_failures(inf, n_seqs, err);
}

int infer_every_position(TfInfer *inf, const int *const *seqs, const int *lens, int n_seqs,
                         int *const *out, TfError *err) {
    return every_position(inf, seqs, lens, n_seqs, out, NULL, err);
}

int infer_every_position_values(TfInfer *inf, const int *const *seqs, const int *lens, int n_seqs,
                                float *const *out, TfError *err) {
    return every_position(inf, seqs, lens, n_seqs, NULL, out, err);
}

int infer_classify(TfInfer *inf, const int *const *seqs, const int *lens, int n_seqs, float *probs,
                   TfError *err) {
    const TfModel *m = inf->m;
    if (m->output_kind != TF_OUTPUT_CLASSIFY) {
        tf_error_set(err, "this model predicts tokens; it does not classify");
        return -1;
    }
    if (check_prompts(inf, seqs, lens, n_seqs, 0, err) < 0) return -1;
    int *at = calloc((size_t)n_seqs + 1, sizeof(int));
    if (!at) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    int *act = calloc((size_t)n_seqs + 1, sizeof(int));
    if (!act) {
        free(at);
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int s = 0; s < n_seqs; s++) {
        at[s] = m->classify_at_last ? lens[s] - 1 : 0;
        act[s] = s;
    }
    int n = fill_rows(inf, (int *const *)seqs, lens, at, act, n_seqs, 1);
    free(at);
    free(act);
    reset_failures(inf);
    if (forward_rows(inf, n, n_seqs, err) < 0) return -1;
    int C = m->n_classes;
    for (int s = 0; s < n_seqs; s++) {
        float *p = probs + (size_t)s * C;
        for (int c = 0; c < C; c++) p[c] = inf->logits[(size_t)c * n_seqs + s];
        softmax_forward(p, C);
    }
    return report_failures(inf, n_seqs, err);
}

/* A prompt of words: tokens separated by spaces, tabs or line ends. */
static int tokenize_words(const TfModel *m, const char *text, int len, int *ids, TfError *err) {
    int n = 0, i = 0;
    for (;;) {
        while (i < len && strchr(" \t\r\n", text[i])) i++;
        if (i >= len) return n;
        int start = i;
        while (i < len && !strchr(" \t\r\n", text[i])) i++;
        const char *w = text + start;
        size_t wl = (size_t)(i - start);
        size_t bad = tf_utf8_bad(w, wl);
        if (bad < wl) { // tokens are UTF-8 text: say so, not "did you mean"
            tf_error_set(err, "word %d holds the byte 0x%02x, which is not valid UTF-8", n + 1,
                         (unsigned char)w[bad]);
            return -1;
        }
        int id = model_token_id(m, w, wl);
        if (id < 0) {
            int near = model_token_near(m, w, wl);
            char hint[TF_TOKEN_TEXT_MAX + 24] = "";
            if (near >= 0) snprintf(hint, sizeof hint, "; did you mean '%s'?", m->token_names[near]);
            tf_error_set(err, "word %d '%.*s' is not in the vocabulary%s", n + 1,
                         wl > 40 ? 40 : (int)wl, w, hint);
            return -1;
        }
        if (id >= m->n_vocab - m->n_output_only) {
            tf_error_set(err, "word %d '%.*s' is an output-only token: outputs print it, no "
                              "prompt holds it",
                         n + 1, wl > 40 ? 40 : (int)wl, w);
            return -1;
        }
        ids[n++] = id;
    }
}

int infer_tokenize(const TfModel *m, const char *text, int len, int *ids, TfError *err) {
    if (m->token_names) return tokenize_words(m, text, len, ids, err);
    int map[256];
    for (int i = 0; i < 256; i++) map[i] = -1;
    for (int i = 0; i < m->n_vocab; i++) map[(unsigned char)m->vocab[i]] = i;
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (map[c] < 0 || map[c] >= m->n_vocab - m->n_output_only) {
            char shown[8];
            if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
                snprintf(shown, sizeof shown, "%c", c);
            else if (c == '\n')
                snprintf(shown, sizeof shown, "\\n");
            else if (c == '\t')
                snprintf(shown, sizeof shown, "\\t");
            else
                snprintf(shown, sizeof shown, "\\x%02x", c);
            if (map[c] >= 0)
                tf_error_set(err, "character '%s' at index %d is an output-only token: outputs "
                                  "print it, no prompt holds it",
                             shown, i);
            else
                tf_error_set(err, "character '%s' at index %d is not in the vocabulary", shown, i);
            return -1;
        }
        ids[i] = map[c];
    }
    return len;
}

