/* schedule.c: ops side by side in fewer, wider layers; dead columns out
 * (schedule.h says what and why). */
#include "schedule.h"

#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h" /* ast_char_text */
#include "tensors.h"

typedef struct Sched {
    const TfModel *m;
    int d, n;             /* d_model, layers */
    unsigned char *R, *W; /* [n][d]: the columns each layer reads, writes */
    unsigned char *live;  /* [n]: the layer is not dead */
    unsigned char *col;   /* [d]: the column stays */
    int *reg_of;          /* [d]: the register holding each column, -1 */
    int *slot;            /* [n] */
    int *newcol;          /* [d]: the column's index in the new model, -1 */
    int d2;
    /* Reused columns (step 4): each one a dead register's column another
     * register takes, cleared by a pair of units in MLP slot `slot`. */
    struct Clear { int col, slot, reg, taker; } *clears;
    int n_clears;
    int *slot_layer; /* [slots]: the new model's layer of an MLP slot, -1 */
    TfModel *out;
    TfError *err;
    int failed;
    TfTensorSet tensors; /* out's tensors, each stored once (compiler/tensors.h) */
} Sched;

/* ---- what each layer reads and writes -------------------------------------------- */

static const float *tensor_data(const TfModel *m, int t) { return t >= 0 ? m->tensors[t].data : NULL; }

/* Columns a [rows, d] weight reads: those with a non-zero entry. */
static void mark_read(const Sched *S, int t, unsigned char *set) {
    const float *w = tensor_data(S->m, t);
    if (!w) return;
    size_t rows = S->m->tensors[t].nelem / (size_t)S->d;
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < S->d; c++)
            if (w[r * (size_t)S->d + (size_t)c] != 0.0f) set[c] = 1;
}

/* Rows of a [d, cols] weight (or a [d] bias) that are written: non-zero. */
static void mark_written(const Sched *S, int t, unsigned char *set) {
    const float *w = tensor_data(S->m, t);
    if (!w) return;
    size_t cols = S->m->tensors[t].nelem / (size_t)S->d;
    for (int r = 0; r < S->d; r++)
        for (size_t c = 0; c < cols; c++)
            if (w[(size_t)r * cols + c] != 0.0f) {
                set[r] = 1;
                break;
            }
}

/* Whether row j of a [d, cols] weight's transpose (its column j) writes a
 * column that stays (keep; NULL: every column). */
static int reaches(const Sched *S, int t, int j, const unsigned char *keep) {
    const float *w = tensor_data(S->m, t);
    size_t cols = S->m->tensors[t].nelem / (size_t)S->d;
    for (int r = 0; r < S->d; r++)
        if ((!keep || keep[r]) && w[(size_t)r * cols + (size_t)j] != 0.0f) return 1;
    return 0;
}

/* The columns of a [rows, d] weight that rows reaching a kept column read
 * (through `out`, a [d, rows] weight: a value channel, a hidden unit). */
static void mark_read_live(const Sched *S, int t, int out, const unsigned char *keep,
                           unsigned char *set) {
    const float *w = tensor_data(S->m, t);
    if (!w) return;
    size_t rows = S->m->tensors[t].nelem / (size_t)S->d;
    for (size_t r = 0; r < rows; r++) {
        if (out >= 0 && !reaches(S, out, (int)r, keep)) continue;
        for (int c = 0; c < S->d; c++)
            if (w[r * (size_t)S->d + (size_t)c] != 0.0f) set[c] = 1;
    }
}

/* What layer i reads and writes. With keep, a value channel or hidden unit
 * that writes no kept column reads nothing (it goes: channel_live,
 * unit_live), so what only it reads may go too. */
static void layer_sets(Sched *S, int i, const unsigned char *keep) {
    const TfLayer *l = &S->m->layers[i];
    unsigned char *R = S->R + (size_t)i * (size_t)S->d, *W = S->W + (size_t)i * (size_t)S->d;
    memset(R, 0, (size_t)S->d);
    memset(W, 0, (size_t)S->d);
    if (l->kind == TF_LAYER_ATTENTION) {
        mark_read(S, l->query, R);
        mark_read(S, l->key, R);
        mark_read_live(S, l->value, keep ? l->output : -1, keep, R);
        mark_written(S, l->output, W);
        mark_written(S, l->output_bias, W);
    } else {
        mark_read_live(S, l->fc1_weight, keep ? l->fc2_weight : -1, keep, R);
        mark_written(S, l->fc2_weight, W);
        mark_written(S, l->fc2_bias, W);
    }
}

/* A layer the scheduler can take: attention with an output projection, or an MLP. */
static int schedulable(const TfLayer *l) {
    if (l->norm_weight >= 0) return 0;
    return (l->kind == TF_LAYER_ATTENTION && l->output >= 0) || l->kind == TF_LAYER_MLP;
}

/* ---- 1. dead ops, dead columns ---------------------------------------------------- */

static void mark_register(const Sched *S, int r, unsigned char *cols) {
    const TfRegister *g = &S->m->regs[r];
    for (int c = 0; c < g->size; c++) cols[g->offset + c] = 1;
}

/* A register that keeps all its columns when one is read: the output, a
 * checked one (its check reads every column), and any but a one-hot (a
 * position, a number). */
static int kept_whole(const TfModel *m, int r) {
    TfRegKind kind = m->regs[r].kind;
    if (r == m->output_reg || (kind != TF_REG_CATEGORICAL && kind != TF_REG_TOKEN)) return 1;
    for (int k = 0; k < m->n_checks; k++)
        if (m->checks[k].reg == r) return 1;
    return 0;
}

/* Columns something reads: the unembedding, the output register, the
 * checked registers and every live layer. A one-hot register keeps only
 * the columns read: a value nothing reads needs no column (its positions
 * hold none of the kept values, which every reader weighs as they weighed
 * its 1: by 0). `tokens` keeps the BOS's column where the embedding holds
 * what the Maps of the token make. Returns 1 when a layer turned out dead. */
static int find_dead(Sched *S) {
    const TfModel *m = S->m;
    memset(S->col, 0, (size_t)S->d);
    if (m->unembed >= 0) mark_read(S, m->unembed, S->col);
    if (m->output_reg >= 0) mark_register(S, m->output_reg, S->col);
    for (int k = 0; k < m->n_checks; k++) mark_register(S, m->checks[k].reg, S->col);
    for (int i = 0; i < S->n; i++)
        if (S->live[i])
            for (int c = 0; c < S->d; c++) S->col[c] |= S->R[(size_t)i * (size_t)S->d + (size_t)c];
    for (int c = 0; c < S->d; c++)
        if (S->col[c] && S->reg_of[c] >= 0 && kept_whole(m, S->reg_of[c]))
            mark_register(S, S->reg_of[c], S->col);
    int changed = 0;
    for (int i = 0; i < S->n; i++) {
        if (!S->live[i]) continue;
        int writes = 0;
        for (int c = 0; c < S->d && !writes; c++)
            writes = S->W[(size_t)i * (size_t)S->d + (size_t)c] && S->col[c];
        if (!writes) S->live[i] = 0, changed = 1;
    }
    return changed;
}

/* A categorical register's column that neither the embeddings nor any
 * live layer writes is always 0: reading it adds nothing, so it goes (a
 * value only the BOS position could hold, a joint value with position 0). */
static void drop_unwritten_values(Sched *S) {
    const TfModel *m = S->m;
    unsigned char *w = calloc((size_t)S->d, 1);
    if (!w) return; // keeping the columns is always right
    mark_read(S, m->tok_embed, w);
    mark_read(S, m->pos_embed, w);
    for (int i = 0; i < S->n; i++)
        if (S->live[i])
            for (int c = 0; c < S->d; c++) w[c] |= S->W[(size_t)i * (size_t)S->d + (size_t)c];
    for (int r = 0; r < m->n_regs; r++) {
        const TfRegister *g = &m->regs[r];
        int live = 0;
        for (int c = 0; c < g->size; c++) live |= S->col[g->offset + c];
        if (g->kind != TF_REG_CATEGORICAL || !live) continue;
        int kept = 0;
        for (int c = 0; c < g->size; c++) kept += w[g->offset + c] != 0;
        if (kept == 0) continue; // never written at all: leave it whole
        for (int c = 0; c < g->size; c++)
            if (!w[g->offset + c]) S->col[g->offset + c] = 0;
    }
    free(w);
}

/* ---- 2. slots --------------------------------------------------------------------- */

static int compatible(const TfLayer *a, const TfLayer *b) {
    if (a->kind != b->kind) return 0;
    return a->kind == TF_LAYER_ATTENTION ? a->causal == b->causal : a->act == b->act;
}

/* Longest-path placement: after the last writer of what the layer reads or
 * writes, not before the last reader of what it writes; even slots hold
 * attention, odd ones MLPs. Returns the number of slots. */
static int place(Sched *S) {
    int d = S->d, n_slots = 0;
    int *wslot = malloc((size_t)d * sizeof *wslot), *rslot = malloc((size_t)d * sizeof *rslot);
    int *first = NULL; // per slot: its first layer, whose kind every other must match
    if (!wslot || !rslot) goto oom;
    for (int c = 0; c < d; c++) wslot[c] = rslot[c] = -1;
    first = malloc((size_t)(2 * S->n + 2) * sizeof *first);
    if (!first) goto oom;
    for (int s = 0; s < 2 * S->n + 2; s++) first[s] = -1;
    for (int i = 0; i < S->n; i++) {
        if (!S->live[i]) continue;
        const unsigned char *R = S->R + (size_t)i * (size_t)d, *W = S->W + (size_t)i * (size_t)d;
        int lo = 0;
        for (int c = 0; c < d; c++) {
            if (R[c] && wslot[c] + 1 > lo) lo = wslot[c] + 1;
            if (W[c] && wslot[c] + 1 > lo) lo = wslot[c] + 1;
            if (W[c] && rslot[c] > lo) lo = rslot[c];
        }
        const TfLayer *l = &S->m->layers[i];
        int s = lo + ((lo & 1) != (l->kind == TF_LAYER_MLP));
        while (first[s] >= 0 && !compatible(&S->m->layers[first[s]], l)) s += 2;
        if (first[s] < 0) first[s] = i;
        S->slot[i] = s;
        if (s + 1 > n_slots) n_slots = s + 1;
        for (int c = 0; c < d; c++) {
            if (R[c] && s > rslot[c]) rslot[c] = s;
            if (W[c] && s > wslot[c]) wslot[c] = s;
        }
    }
    free(wslot), free(rslot), free(first);
    return n_slots;
oom:
    free(wslot), free(rslot), free(first);
    return -1;
}

/* ---- 4. columns: dead registers' columns reused -------------------------------------- */

/* When register r is written, read and must stay (slots; Life.keep: an
 * output, a checked register, one the unembedding reads). */
typedef struct Life {
    int kept;          /* its columns that stay */
    int first_use;     /* the first slot reading or writing it; -1: the embedding writes it
                          (or nothing does: it is 0 from the start) */
    int last_use;      /* the last slot reading or writing it */
    int keep;          /* never dead */
} Life;

static void register_lives(const Sched *S, Life *L) {
    const TfModel *m = S->m;
    const float *te = tensor_data(m, m->tok_embed), *pe = tensor_data(m, m->pos_embed);
    const float *un = tensor_data(m, m->unembed);
    for (int r = 0; r < m->n_regs; r++) {
        const TfRegister *g = &m->regs[r];
        Life *l = &L[r];
        l->kept = 0, l->first_use = INT32_MAX, l->last_use = -1;
        int embedded = 0, written = 0;
        l->keep = r == m->output_reg;
        for (int k = 0; k < m->n_checks; k++) l->keep |= m->checks[k].reg == r;
        for (int j = 0; j < g->size; j++) {
            int c = g->offset + j;
            if (!S->col[c]) continue;
            l->kept++;
            for (int t = 0; te && t < m->n_vocab; t++)
                if (te[(size_t)t * (size_t)S->d + (size_t)c] != 0) embedded = 1;
            for (int t = 0; pe && t < m->max_len; t++)
                if (pe[(size_t)t * (size_t)S->d + (size_t)c] != 0) embedded = 1;
            for (int t = 0; un && t < (int)m->tensors[m->unembed].shape[0]; t++)
                if (un[(size_t)t * (size_t)S->d + (size_t)c] != 0) l->keep = 1;
            for (int i = 0; i < S->n; i++) {
                if (!S->live[i]) continue;
                int s = S->slot[i];
                size_t at = (size_t)i * (size_t)S->d + (size_t)c;
                written |= S->W[at];
                if ((S->R[at] || S->W[at]) && s < l->first_use) l->first_use = s;
                if ((S->R[at] || S->W[at]) && s > l->last_use) l->last_use = s;
            }
        }
        // Read before it is written, or never written, a register reads 0
        // there: its columns must be 0 from the start.
        if (embedded || !written || l->first_use == INT32_MAX) l->first_use = -1;
    }
}

/* MLP slots that can hold a clear: slots of ReLU MLPs (the pair is exact there). */
static void clear_slots(const Sched *S, int n_slots, unsigned char *ok) {
    memset(ok, 0, (size_t)n_slots + 1);
    for (int i = 0; i < S->n; i++)
        if (S->live[i] && S->m->layers[i].kind == TF_LAYER_MLP) ok[S->slot[i]] = 1;
    for (int i = 0; i < S->n; i++)
        if (S->live[i] && S->m->layers[i].kind == TF_LAYER_MLP && S->m->layers[i].act != TF_ACT_RELU)
            ok[S->slot[i]] = 0;
}

/* The first MLP slot after `after` and before `before` that can clear, -1. */
static int clear_slot(const unsigned char *ok, int after, int before) {
    for (int z = after + 1; z < before; z++)
        if (ok[z]) return z;
    return -1;
}

/* New columns for the kept ones (S->newcol, S->d2): each register's kept
 * columns side by side. With reuse, a register first read or written in
 * slot f takes columns whose register is done with them (last read or
 * written before an MLP slot z < f), first fit; the MLP of slot z clears them
 * (S->clears), so the register finds them at 0 as it would fresh ones. A
 * slot's layers then never touch a column that another of its layers
 * clears: the clear is the column's only reader and writer there.
 * Returns -1 when out of memory. */
static int assign_columns(Sched *S, int n_slots, int reuse) {
    const TfModel *m = S->m;
    int nr = m->n_regs;
    Life *L = calloc((size_t)(nr > 0 ? nr : 1), sizeof *L);
    int *order = malloc((size_t)(nr > 0 ? nr : 1) * sizeof *order);
    int *base = malloc((size_t)(nr > 0 ? nr : 1) * sizeof *base);
    int *owner = malloc(((size_t)S->d + 1) * sizeof *owner); /* per new column: its register, -1 */
    unsigned char *ok = malloc((size_t)n_slots + 2);
    free(S->clears);
    S->clears = malloc(((size_t)S->d + 1) * sizeof *S->clears);
    S->n_clears = 0;
    S->d2 = 0;
    if (!reuse) { // the kept columns in their order
        for (int c = 0; c < S->d; c++) S->newcol[c] = S->col[c] ? S->d2++ : -1;
        free(L), free(order), free(base), free(owner), free(ok);
        return S->clears ? 0 : -1;
    }
    int rc = -1;
    if (!L || !order || !base || !owner || !ok || !S->clears) goto done;
    register_lives(S, L);
    clear_slots(S, n_slots, ok);
    for (int c = 0; c < S->d; c++) S->newcol[c] = -1;
    // Columns of no register stay where they are, first.
    for (int c = 0; c < S->d; c++)
        if (S->col[c] && S->reg_of[c] < 0) owner[S->d2] = -1, S->newcol[c] = S->d2++;
    int n = 0;
    for (int r = 0; r < nr; r++)
        if (L[r].kept) order[n++] = r;
    for (int i = 1; i < n; i++) { // by first use, then declaration (insertion sort: stable)
        int r = order[i], j = i;
        while (j > 0 && L[order[j - 1]].first_use > L[r].first_use) order[j] = order[j - 1], j--;
        order[j] = r;
    }
    for (int i = 0; i < n; i++) {
        int r = order[i], k = L[r].kept, f = L[r].first_use, at = -1;
        for (int p = 0; f >= 0 && p + k <= S->d2 && at < 0; p++) {
            int fits = 1;
            for (int j = p; j < p + k && fits; j++) {
                int o = owner[j];
                fits = o >= 0 && !L[o].keep && clear_slot(ok, L[o].last_use, f) >= 0;
            }
            if (fits) at = p;
        }
        if (at >= 0) {
            for (int j = at; j < at + k; j++) {
                int o = owner[j];
                S->clears[S->n_clears++] = (struct Clear){j, clear_slot(ok, L[o].last_use, f), o, r};
                owner[j] = r;
            }
        } else {
            at = S->d2;
            for (int j = 0; j < k; j++) owner[S->d2++] = r;
        }
        base[r] = at;
    }
    for (int r = 0; r < nr; r++) {
        const TfRegister *g = &m->regs[r];
        for (int j = 0, at = 0; j < g->size; j++)
            if (S->col[g->offset + j]) S->newcol[g->offset + j] = base[r] + at++;
    }
    rc = 0;
done:
    free(L), free(order), free(base), free(owner), free(ok);
    return rc;
}

/* ---- 3. the new model's tensors and layers ---------------------------------------- */

/* Stores w (rows x cols; a vector when rows is 0) once: an identical tensor
 * already stored is used again. Frees w; returns the index or -1. */
static int emit(Sched *S, const char *name, int rows, int cols, float *w) {
    if (S->failed || !w) {
        free(w);
        S->failed = 1;
        return -1;
    }
    int ndim = rows > 0 ? 2 : 1;
    int64_t shape[2] = {rows > 0 ? rows : cols, cols};
    // The embeddings and the unembedding keep their names and are never
    // shared; the rest are named by their place.
    int fixed = strncmp(name, "embed.", 6) == 0 || strncmp(name, "unembed.", 8) == 0;
    char tmp[48];
    if (!fixed) snprintf(tmp, sizeof tmp, "scheduled.%d", S->out->n_tensors);
    int t = tensors_store(&S->tensors, fixed ? name : tmp, ndim, shape, w,
                          fixed ? 0 : TENSORS_FIND | TENSORS_FINDABLE, S->err);
    if (t < 0) S->failed = 1;
    free(w);
    return t;
}

static float *zeros(Sched *S, size_t n) {
    float *w = calloc(n > 0 ? n : 1, sizeof *w);
    if (!w) {
        tf_error_set(S->err, "out of memory");
        S->failed = 1;
    }
    return w;
}

/* Rows [from, from + n) of an old [*, d] weight into rows [to, to + n) of a
 * new [*, d2] one, scaled by f, the dead columns left out. Two old columns
 * may share a new one (registers whose lives do not meet: step 4); a
 * weight reads or writes at most one of them, so a zero never replaces a
 * non-zero entry. */
static void copy_rows_in(const Sched *S, const float *src, int from, float *dst, int to, int n,
                         float f) {
    for (int r = 0; r < n; r++)
        for (int c = 0; c < S->d; c++) {
            float w = src[(size_t)(from + r) * (size_t)S->d + (size_t)c];
            if (S->newcol[c] < 0) continue;
            float *at = &dst[(size_t)(to + r) * (size_t)S->d2 + (size_t)S->newcol[c]];
            if (w != 0.0f || *at == 0.0f) *at = w * f; // a -0 kept, where it clobbers nothing
        }
}

/* Columns [from, from + n) of an old [d, cols] weight into columns
 * [to, to + n) of a new [d2, cols2] one, the dead rows left out. */
static void copy_cols_out(const Sched *S, const float *src, int cols, int from, float *dst,
                          int cols2, int to, int n) {
    for (int r = 0; r < S->d; r++)
        if (S->newcol[r] >= 0)
            for (int c = 0; c < n; c++) {
                float w = src[(size_t)r * (size_t)cols + (size_t)(from + c)];
                float *at = &dst[(size_t)S->newcol[r] * (size_t)cols2 + (size_t)(to + c)];
                if (w != 0.0f || *at == 0.0f) *at = w;
            }
}

static void add_bias_out(const Sched *S, const float *src, float *dst) {
    if (!src) return;
    for (int r = 0; r < S->d; r++)
        if (S->newcol[r] >= 0) dst[S->newcol[r]] += src[r];
}

static void copy_vec(const float *src, int from, float *dst, int to, int n, float f) {
    if (!src) return;
    for (int i = 0; i < n; i++) dst[to + i] = src[from + i] * f;
}

/* The layer's name: its ops' names joined with '+'. */
static char *joined_name(const TfModel *m, const int *members, int k) {
    size_t len = 1;
    for (int j = 0; j < k; j++) len += strlen(m->layers[members[j]].name) + 1;
    char *s = malloc(len);
    if (!s) return NULL;
    s[0] = '\0';
    for (int j = 0; j < k; j++) {
        if (j) strcat(s, "+");
        strcat(s, m->layers[members[j]].name);
    }
    return s;
}

/* Whether value channel j of attention layer l (its column of the output
 * projection) reaches a column that stays; a channel that reaches only
 * dropped ones goes. */
static int channel_live(const Sched *S, const TfLayer *l, int j) {
    const float *o = tensor_data(S->m, l->output);
    int cols = l->n_heads * l->d_vhead;
    for (int r = 0; r < S->d; r++)
        if (S->newcol[r] >= 0 && o[(size_t)r * (size_t)cols + (size_t)j] != 0) return 1;
    return 0;
}

/* The most live value channels a head of layer l has: its d_vhead once
 * the channels that reach only dropped columns are gone. */
static int live_vhead(const Sched *S, const TfLayer *l) {
    int most = 0;
    for (int h = 0; h < l->n_heads; h++) {
        int n = 0;
        for (int c = 0; c < l->d_vhead; c++) n += channel_live(S, l, h * l->d_vhead + c);
        most = n > most ? n : most;
    }
    return most;
}

static void merge_attention(Sched *S, const int *members, int k, TfLayer *ly, TfLayerPart *parts) {
    const TfModel *m = S->m;
    int H = 0, D = 0, Dv = 0, any_qb = 0, any_kb = 0, any_vb = 0, any_ob = 0;
    float scale = 0.0f;
    for (int j = 0; j < k; j++) {
        const TfLayer *l = &m->layers[members[j]];
        parts[j].first = H;
        parts[j].count = l->n_heads;
        H += l->n_heads;
        if (l->d_head > D) D = l->d_head;
        if (live_vhead(S, l) > Dv) Dv = live_vhead(S, l);
        if (l->scale > scale) scale = l->scale;
        any_qb |= l->query_bias >= 0, any_kb |= l->key_bias >= 0;
        any_vb |= l->value_bias >= 0, any_ob |= l->output_bias >= 0;
    }
    size_t d2 = (size_t)S->d2;
    float *q = zeros(S, (size_t)H * D * d2), *kk = zeros(S, (size_t)H * D * d2),
          *v = zeros(S, (size_t)H * Dv * d2), *o = zeros(S, d2 * (size_t)H * Dv);
    float *qb = any_qb ? zeros(S, (size_t)H * D) : NULL, *kb = any_kb ? zeros(S, (size_t)H * D) : NULL;
    float *vb = any_vb ? zeros(S, (size_t)H * Dv) : NULL, *ob = any_ob ? zeros(S, d2) : NULL;
    if (!S->failed) {
        int h0 = 0;
        for (int j = 0; j < k; j++) {
            const TfLayer *l = &m->layers[members[j]];
            // The layer's scale is the largest; a head of a smaller one
            // carries the ratio in its query (exact for the compiler's scales,
            // whose query entries are 0 and 1).
            float f = l->scale == scale ? 1.0f : l->scale / scale;
            int dh = l->d_head, dv = l->d_vhead;
            for (int h = 0; h < l->n_heads; h++) {
                copy_rows_in(S, tensor_data(m, l->query), h * dh, q, (h0 + h) * D, dh, f);
                copy_rows_in(S, tensor_data(m, l->key), h * dh, kk, (h0 + h) * D, dh, 1.0f);
                if (qb) copy_vec(tensor_data(m, l->query_bias), h * dh, qb, (h0 + h) * D, dh, f);
                if (kb) copy_vec(tensor_data(m, l->key_bias), h * dh, kb, (h0 + h) * D, dh, 1.0f);
                for (int c = 0, at = (h0 + h) * Dv; c < dv; c++) {
                    int j = h * dv + c;
                    if (!channel_live(S, l, j)) continue;
                    copy_rows_in(S, tensor_data(m, l->value), j, v, at, 1, 1.0f);
                    if (vb) copy_vec(tensor_data(m, l->value_bias), j, vb, at, 1, 1.0f);
                    copy_cols_out(S, tensor_data(m, l->output), l->n_heads * dv, j, o, H * Dv, at, 1);
                    at++;
                }
            }
            if (ob) add_bias_out(S, tensor_data(m, l->output_bias), ob);
            h0 += l->n_heads;
        }
    }
    ly->n_heads = H;
    ly->d_head = D;
    ly->d_vhead = Dv;
    ly->scale = scale;
    ly->causal = m->layers[members[0]].causal;
    ly->query = emit(S, "q", H * D, S->d2, q);
    ly->key = emit(S, "k", H * D, S->d2, kk);
    ly->value = emit(S, "v", H * Dv, S->d2, v);
    ly->output = emit(S, "o", S->d2, H * Dv, o);
    if (qb) ly->query_bias = emit(S, "qb", 0, H * D, qb);
    if (kb) ly->key_bias = emit(S, "kb", 0, H * D, kb);
    if (vb) ly->value_bias = emit(S, "vb", 0, H * Dv, vb);
    if (ob) ly->output_bias = emit(S, "ob", 0, S->d2, ob);
}

/* Whether hidden unit u of MLP l writes a column that stays: a unit that
 * writes only dropped ones adds nothing anything reads, and goes. */
static int unit_live(const Sched *S, const TfLayer *l, int u) {
    const float *w2 = tensor_data(S->m, l->fc2_weight);
    for (int r = 0; r < S->d; r++)
        if (S->newcol[r] >= 0 && w2[(size_t)r * (size_t)l->d_hidden + (size_t)u] != 0) return 1;
    return 0;
}

/* The clears of MLP slot `slot` (step 4), grouped by the register whose
 * columns they clear: clear_regs[0..n) those registers, in order. */
static int slot_clears(const Sched *S, int slot, int *clear_regs) {
    int n = 0;
    for (int i = 0; i < S->n_clears; i++) {
        if (S->clears[i].slot != slot) continue;
        int j = 0;
        while (j < n && clear_regs[j] != S->clears[i].reg) j++;
        if (j == n) clear_regs[n++] = S->clears[i].reg;
    }
    return n;
}

static void merge_mlp(Sched *S, const int *members, int k, int slot, TfLayer *ly,
                      TfLayerPart *parts, const int *clear_regs, int n_clear) {
    const TfModel *m = S->m;
    int Hd = 0, any_b1 = 0, any_b2 = 0;
    for (int j = 0; j < k; j++) {
        const TfLayer *l = &m->layers[members[j]];
        parts[j].first = Hd;
        parts[j].count = 0;
        for (int u = 0; u < l->d_hidden; u++) parts[j].count += unit_live(S, l, u);
        Hd += parts[j].count;
        any_b1 |= l->fc1_bias >= 0, any_b2 |= l->fc2_bias >= 0;
    }
    // A cleared column c: units ReLU(x_c) and ReLU(-x_c) write -x_c, exactly.
    for (int g = 0; g < n_clear; g++) {
        parts[k + g].first = Hd;
        parts[k + g].count = 0;
        for (int i = 0; i < S->n_clears; i++)
            if (S->clears[i].slot == slot && S->clears[i].reg == clear_regs[g]) parts[k + g].count += 2;
        Hd += parts[k + g].count;
    }
    size_t d2 = (size_t)S->d2;
    float *w1 = zeros(S, (size_t)Hd * d2), *w2 = zeros(S, d2 * (size_t)Hd);
    float *b1 = any_b1 ? zeros(S, (size_t)Hd) : NULL, *b2 = any_b2 ? zeros(S, d2) : NULL;
    if (!S->failed) {
        for (int j = 0; j < k; j++) {
            const TfLayer *l = &m->layers[members[j]];
            int at = parts[j].first, h = l->d_hidden;
            for (int u = 0; u < h; u++) {
                if (!unit_live(S, l, u)) continue;
                copy_rows_in(S, tensor_data(m, l->fc1_weight), u, w1, at, 1, 1.0f);
                if (b1) copy_vec(tensor_data(m, l->fc1_bias), u, b1, at, 1, 1.0f);
                copy_cols_out(S, tensor_data(m, l->fc2_weight), h, u, w2, Hd, at, 1);
                at++;
            }
            if (b2) add_bias_out(S, tensor_data(m, l->fc2_bias), b2);
        }
        for (int g = 0; g < n_clear; g++) {
            int at = parts[k + g].first;
            for (int i = 0; i < S->n_clears; i++) {
                if (S->clears[i].slot != slot || S->clears[i].reg != clear_regs[g]) continue;
                size_t c = (size_t)S->clears[i].col;
                w1[(size_t)at * d2 + c] = 1.0f, w2[c * (size_t)Hd + (size_t)at] = -1.0f;
                w1[(size_t)(at + 1) * d2 + c] = -1.0f, w2[c * (size_t)Hd + (size_t)at + 1] = 1.0f;
                at += 2;
            }
        }
    }
    ly->d_hidden = Hd;
    ly->act = m->layers[members[0]].act;
    ly->fc1_weight = emit(S, "w1", Hd, S->d2, w1);
    ly->fc2_weight = emit(S, "w2", S->d2, Hd, w2);
    if (b1) ly->fc1_bias = emit(S, "b1", 0, Hd, b1);
    if (b2) ly->fc2_bias = emit(S, "b2", 0, S->d2, b2);
}

/* One new layer from the layers of a slot; returns its index or -1. */
static int merge_slot(Sched *S, const int *members, int k, int slot) {
    const TfModel *m = S->m;
    const TfLayer *first = &m->layers[members[0]];
    TfLayer ly = model_layer_init(first->kind);
    int *clear_regs = malloc((size_t)(m->n_regs > 0 ? m->n_regs : 1) * sizeof *clear_regs);
    int n_clear = first->kind == TF_LAYER_MLP && clear_regs ? slot_clears(S, slot, clear_regs) : 0;
    int np = k + n_clear;
    TfLayerPart *parts = calloc((size_t)np, sizeof *parts);
    char *name = joined_name(m, members, k);
    for (int g = 0; name && clear_regs && g < n_clear; g++) { // "hist+clear_x"
        size_t len = strlen(name) + strlen(m->regs[clear_regs[g]].name) + 8;
        char *longer = realloc(name, len);
        if (!longer) {
            free(name);
            name = NULL;
            break;
        }
        name = longer;
        strcat(name, "+clear_");
        strcat(name, m->regs[clear_regs[g]].name);
    }
    char **clear_names = calloc((size_t)n_clear + 1, sizeof *clear_names);
    int ok = parts && name && clear_regs && clear_names;
    for (int g = 0; ok && g < n_clear; g++) {
        const char *rn = m->regs[clear_regs[g]].name;
        size_t len = strlen(rn) + 7;
        ok = (clear_names[g] = malloc(len)) != NULL;
        if (ok) snprintf(clear_names[g], len, "clear_%s", rn);
    }
    if (!ok) {
        for (int g = 0; clear_names && g < n_clear; g++) free(clear_names[g]);
        free(parts), free(name), free(clear_regs), free(clear_names);
        tf_error_set(S->err, "out of memory");
        S->failed = 1;
        return -1;
    }
    for (int j = 0; j < k; j++) {
        const TfLayer *l = &m->layers[members[j]];
        parts[j].name = l->name;
        parts[j].op = l->op;
        parts[j].line = l->line;
    }
    for (int g = 0; g < n_clear; g++) {
        parts[k + g].name = clear_names[g];
        parts[k + g].op = "Clear";
    }
    if (first->kind == TF_LAYER_ATTENTION) merge_attention(S, members, k, &ly, parts);
    else merge_mlp(S, members, k, slot, &ly, parts, clear_regs, n_clear);
    ly.name = name;
    ly.op = first->op;
    ly.line = first->line;
    if (np > 1) {
        ly.parts = parts;
        ly.n_parts = np;
    }
    int li = S->failed ? -1 : model_add_layer(S->out, &ly, S->err);
    if (li < 0) S->failed = 1;
    for (int g = 0; g < n_clear; g++) free(clear_names[g]);
    free(parts), free(name), free(clear_regs), free(clear_names);
    return li;
}

/* The parameters of heads members[a..b) as one layer, padded to the widest. */
static double heads_cost(const Sched *S, const int *members, int a, int b) {
    int H = 0, D = 0, Dv = 0;
    for (int j = a; j < b; j++) {
        const TfLayer *l = &S->m->layers[members[j]];
        H += l->n_heads;
        D = l->d_head > D ? l->d_head : D;
        Dv = live_vhead(S, l) > Dv ? live_vhead(S, l) : Dv;
    }
    if (D == 0 || Dv == 0) return INFINITY; // a layer of empty tensors cannot be stored
    return (double)H * (2.0 * D + 2.0 * Dv) * S->d2 + 2.0 * H * D;
}

static int by_head_size(const void *a, const void *b) {
    const int *x = a, *y = b; // {d_head, d_vhead, program order, layer}
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* The attention ops of one slot as layers: one layer of all their heads,
 * each padded to the widest, unless consecutive layers of heads of alike
 * sizes have fewer parameters (a Count's 3 rows beside a selection's 37
 * pay 34 rows of zeros): then members[0..k) are reordered by head size and
 * cut into groups, cut[g] the end of group g. The ops of a slot read
 * nothing the others write, so layers one after another compute the same.
 * Returns the number of groups. */
static int head_groups(const Sched *S, int *members, int k, int *cut) {
    cut[0] = k;
    if (k < 2 || k > 64 || S->m->layers[members[0]].kind != TF_LAYER_ATTENTION) return 1;
    int key[64][4];
    for (int j = 0; j < k; j++) {
        const TfLayer *l = &S->m->layers[members[j]];
        key[j][0] = l->d_head, key[j][1] = live_vhead(S, l), key[j][2] = j, key[j][3] = members[j];
    }
    qsort(key, (size_t)k, sizeof key[0], by_head_size);
    int sorted[64], from[65];
    double best[65];
    for (int j = 0; j < k; j++) sorted[j] = key[j][3];
    best[0] = 0;
    for (int b = 1; b <= k; b++) { // best[b]: heads sorted[0..b) in groups
        best[b] = INFINITY;
        for (int a = 0; a < b; a++) {
            double c = best[a] + heads_cost(S, sorted, a, b);
            if (c < best[b]) best[b] = c, from[b] = a;
        }
    }
    if (!(best[k] < heads_cost(S, members, 0, k))) return 1;
    int n = 0, ends[64];
    for (int b = k; b > 0; b = from[b]) ends[n++] = b;
    for (int g = 0; g < n; g++) cut[g] = ends[n - 1 - g];
    // Within a group, program order.
    for (int g = 0, a = 0; g < n; a = cut[g++]) {
        for (int j = a; j < cut[g]; j++) key[j][0] = key[j][1] = g;
    }
    qsort(key, (size_t)k, sizeof key[0], by_head_size);
    for (int j = 0; j < k; j++) members[j] = key[j][3];
    return n;
}

/* An embedding-like [rows, d] tensor with the dead columns left out. */
static int emit_columns(Sched *S, int t) {
    if (t < 0) return -1;
    const TfTensor *T = &S->m->tensors[t];
    int rows = (int)T->shape[0];
    float *w = zeros(S, (size_t)rows * (size_t)S->d2);
    if (w) copy_rows_in(S, T->data, 0, w, 0, rows, 1.0f);
    return emit(S, T->name, rows, S->d2, w);
}

static int copy_tensor(Sched *S, int t) {
    if (t < 0) return -1;
    const TfTensor *T = &S->m->tensors[t];
    float *w = zeros(S, T->nelem);
    if (w) memcpy(w, T->data, T->nelem * sizeof *w);
    return emit(S, T->name, T->ndim == 2 ? (int)T->shape[0] : 0,
                (int)T->shape[T->ndim == 2 ? 1 : 0], w);
}

static char *dup_or_null(const char *s) {
    if (!s) return NULL;
    char *p = malloc(strlen(s) + 1);
    if (p) strcpy(p, s);
    return p;
}

/* The label of token t, as the compiler labels a token value ('a', '\n',
 * 'word'): a token register that keeps some of its columns becomes a
 * categorical one of those tokens. */
static void token_label(const TfModel *m, int t, char *buf, size_t n) {
    char cb[8];
    const char *text = m->token_names ? m->token_names[t] : ast_char_text((unsigned char)m->vocab[t], '\'', cb);
    snprintf(buf, n, "'%s'", text);
}

/* The new model's header: m's settings, the live registers moved down. */
static int start_model(Sched *S, int *new_reg) {
    const TfModel *m = S->m;
    TfModel *o = model_new_like(m); // every setting; the owned arrays are made below
    if (!o) return -1;
    S->out = o;
    S->tensors.m = o;
    o->d_model = S->d2;
    TfError verr;
    o->vocab = NULL; /* model_new_like left it empty */
    if (model_copy_vocab(o, m, &verr) < 0) return -1;
    if (m->source) {
        if (!(o->source = dup_or_null(m->source))) return -1;
    }
    if (m->source_name) {
        if (!(o->source_name = dup_or_null(m->source_name))) return -1;
    }
    const char **labels = malloc((size_t)(S->d > 0 ? S->d : 1) * sizeof *labels);
    char (*tok)[TF_TOKEN_TEXT_MAX + 4] = malloc((size_t)(m->n_vocab > 0 ? m->n_vocab : 1) * sizeof *tok);
    if (!labels || !tok) {
        free(labels), free(tok);
        return -1;
    }
    for (int r = 0; r < m->n_regs; r++) {
        const TfRegister *g = &m->regs[r];
        new_reg[r] = -1;
        int off = -1, size = 0;
        for (int c = 0; c < g->size; c++) {
            if (S->newcol[g->offset + c] < 0) continue;
            if (off < 0) off = S->newcol[g->offset + c];
            if (g->values) labels[size] = g->values[c];
            if (g->kind == TF_REG_TOKEN) {
                token_label(m, c, tok[size], sizeof tok[size]);
                labels[size] = tok[size];
            }
            size++;
        }
        if (size == 0) continue;
        int cat = g->kind == TF_REG_CATEGORICAL || (g->kind == TF_REG_TOKEN && size < g->size);
        new_reg[r] = cat ? model_add_categorical(o, g->name, off, size, labels, S->err)
                         : model_add_register(o, g->name, g->kind, off, size, S->err);
        if (new_reg[r] < 0) {
            free(labels), free(tok);
            return -1;
        }
    }
    free(labels), free(tok);
    o->output_reg = m->output_reg >= 0 ? new_reg[m->output_reg] : -1;
    o->tok_embed = emit_columns(S, m->tok_embed);
    o->pos_embed = emit_columns(S, m->pos_embed);
    o->unembed = emit_columns(S, m->unembed);
    o->unembed_bias = copy_tensor(S, m->unembed_bias);
    return S->failed ? -1 : 0;
}

static int build(Sched *S, int n_slots) {
    const TfModel *m = S->m;
    int *new_reg = malloc((size_t)(m->n_regs > 0 ? m->n_regs : 1) * sizeof *new_reg);
    int *new_layer = malloc((size_t)(S->n > 0 ? S->n : 1) * sizeof *new_layer);
    int *members = malloc((size_t)(S->n > 0 ? S->n : 1) * sizeof *members);
    int *start = calloc((size_t)n_slots + 1, sizeof *start);
    int *fill = calloc((size_t)n_slots + 1, sizeof *fill);
    int rc = -1;
    if (!new_reg || !new_layer || !members || !start || !fill || start_model(S, new_reg) < 0)
        goto done;
    // The live layers by slot, in program order within a slot (a counting sort).
    for (int i = 0; i < S->n; i++)
        if (S->live[i]) start[S->slot[i] + 1]++;
    for (int s = 0; s < n_slots; s++) start[s + 1] += start[s];
    for (int i = 0; i < S->n; i++)
        if (S->live[i]) members[start[S->slot[i]] + fill[S->slot[i]]++] = i;
    for (int s = 0; s < n_slots; s++) {
        int k = start[s + 1] - start[s], cut[64];
        if (k == 0) continue;
        int n_cut = head_groups(S, members + start[s], k, cut);
        for (int g = 0, j0 = 0; g < n_cut; j0 = cut[g++]) {
            int li = merge_slot(S, members + start[s] + j0, cut[g] - j0, s);
            if (li < 0) goto done;
            if (s & 1) S->slot_layer[s] = li;
            for (int j = j0; j < cut[g]; j++) new_layer[members[start[s] + j]] = li;
        }
    }
    // A register whose columns another takes holds them up to the state
    // its clear reads; the taker from the state after the clear on.
    for (int i = 0; i < S->n_clears; i++) {
        const struct Clear *k = &S->clears[i];
        int lz = S->slot_layer[k->slot];
        TfRegister *from = &S->out->regs[new_reg[k->reg]], *to = &S->out->regs[new_reg[k->taker]];
        if (lz < from->live_to) from->live_to = lz;
        if (lz + 1 > to->live_from) to->live_from = lz + 1;
    }
    for (int c = 0; c < m->n_checks; c++) {
        const TfCheck *ck = &m->checks[c];
        if (model_add_check(S->out, new_reg[ck->reg], new_layer[ck->layer], ck->line, ck->op,
                            ck->bound, S->err) < 0)
            goto done;
    }
    rc = 0;
done:
    if (rc < 0 && !S->failed) tf_error_set(S->err, "out of memory");
    free(new_reg), free(new_layer), free(members), free(start), free(fill);
    return rc;
}

TfModel *schedule_model(const TfModel *m, int flags, TfError *err) {
    int reuse_columns = !!(flags & TF_SCHED_REUSE), keep = !!(flags & TF_SCHED_KEEP);
    Sched S = {0};
    S.m = m;
    S.d = m->d_model;
    S.n = m->n_layers;
    S.err = err;
    for (int i = 0; i < S.n; i++)
        if (!schedulable(&m->layers[i])) {
            tf_error_set(err, "layer %d '%s' cannot be scheduled", i, m->layers[i].name);
            return NULL;
        }
    size_t nd = (size_t)(S.n > 0 ? S.n : 1) * (size_t)S.d;
    S.R = calloc(nd, 1);
    S.W = calloc(nd, 1);
    S.live = malloc((size_t)S.n + 1);
    S.col = calloc((size_t)S.d, 1);
    S.reg_of = malloc((size_t)S.d * sizeof *S.reg_of);
    S.slot = calloc((size_t)S.n + 1, sizeof *S.slot);
    S.newcol = malloc((size_t)S.d * sizeof *S.newcol);
    TfModel *out = NULL;
    if (!S.R || !S.W || !S.live || !S.col || !S.reg_of || !S.slot || !S.newcol) goto oom;
    memset(S.live, 1, (size_t)S.n + 1);
    for (int c = 0; c < S.d; c++) S.reg_of[c] = -1;
    for (int r = 0; r < m->n_regs; r++)
        for (int c = 0; c < m->regs[r].size; c++) S.reg_of[m->regs[r].offset + c] = r;
    for (int i = 0; i < S.n; i++) layer_sets(&S, i, NULL);
    if (keep) { // every op and every column stays (step 1 skipped)
        memset(S.col, 1, (size_t)S.d);
    } else {
        while (find_dead(&S)) {}
        // Reads of channels and units that reach no kept column go, and what
        // only they read with them (a copy's one-hot that only a dead table
        // read: compiler/angles.c's chains), until nothing more goes.
        unsigned char *before = malloc((size_t)S.d);
        if (!before) goto oom;
        do {
            memcpy(before, S.col, (size_t)S.d);
            for (int i = 0; i < S.n; i++)
                if (S.live[i]) layer_sets(&S, i, before);
            while (find_dead(&S)) {}
        } while (memcmp(before, S.col, (size_t)S.d) != 0);
        free(before);
        drop_unwritten_values(&S);
    }
    int n_slots = place(&S);
    if (n_slots < 0 || !(S.slot_layer = malloc(((size_t)n_slots + 1) * sizeof *S.slot_layer)))
        goto oom;
    // Built twice, with and without reused columns; the smaller stays (a
    // clear's two units per column can cost more than the columns save).
    for (int reuse = 0; reuse < 1 + (reuse_columns != 0); reuse++) {
        for (int z = 0; z <= n_slots; z++) S.slot_layer[z] = -1;
        S.out = NULL;
        S.failed = 0;
        memset(&S.tensors, 0, sizeof S.tensors);
        TfModel *o = NULL;
        if (assign_columns(&S, n_slots, reuse) < 0) goto oom;
        if (reuse && S.n_clears == 0) break;
        if (build(&S, n_slots) == 0 && model_name_tensors(S.out, err) == 0 &&
            model_validate(S.out, err) == 0)
            o = S.out;
        else
            model_free(S.out);
        tensors_free(&S.tensors);
        if (!o) {
            model_free(out);
            out = NULL;
            break;
        }
        if (!out || model_param_count(o) < model_param_count(out)) {
            model_free(out);
            out = o;
        } else {
            model_free(o);
        }
    }
    goto done;
oom:
    model_free(out);
    out = NULL;
    tf_error_set(err, "out of memory");
done:
    free(S.R), free(S.W), free(S.live), free(S.col), free(S.reg_of), free(S.slot), free(S.newcol);
    free(S.clears), free(S.slot_layer);
    return out;
}
