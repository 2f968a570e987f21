/* prove_split.c: a scheduled model of seed ops, one layer per op again.
 *
 * Under -O the ops of a seed program share layers (compiler/schedule.h):
 * the heads of one attention layer, the hidden units of one MLP
 * (TfLayer.parts), and an op moves to the earliest layer its inputs allow.
 * The seed proof (prove_seed.c) takes one layer per op in program order, so
 * the model is first cut into pieces (each part of a layer, or a layer
 * without parts) and the pieces put back in program order, one layer each,
 * where that is the same computation:
 *
 *  - pieces of one layer all read the residual stream before it: taken one
 *    after another in the source's order, no piece may read or write a
 *    column an earlier one writes (it may write one an earlier piece reads:
 *    that one read it first). Then the layer adds to each column what its
 *    one writer adds (the other pieces' terms are products with zero
 *    weights: exact zeros of finite values), which is what the pieces add
 *    one after another;
 *  - two pieces whose order changes must neither read nor write a column
 *    the other writes (a sequence of swaps of neighbours that commute).
 *
 * The validator does not trust the compiler for any of this: it reads which
 * columns each piece reads and writes from the weights, and refuses (not
 * proven, saying why) whatever it cannot reorder. A piece is the op of its
 * source line: the k-th piece of a line, in the file's order, is the k-th
 * op on that line (`repeat`'s copies); a line without as many pieces as ops
 * is refused too. An output bias goes with the piece that writes its
 * column (the first piece where none does).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prove_internal.h"

typedef struct Piece {
    int layer, part;   /* file layer; its part, -1: the whole layer */
    int first, count;  /* heads or hidden units */
    int line, op;      /* source line; the op it is (-1 until matched) */
    unsigned char *r, *w; /* [d]: the columns it reads, writes */
} Piece;

static int piece_set(const TfModel *m, Piece *p) {
    const TfLayer *ly = &m->layers[p->layer];
    int d = m->d_model;
    if (!(p->r = calloc((size_t)d, 1)) || !(p->w = calloc((size_t)d, 1))) return -1;
    if (ly->kind == TF_LAYER_MLP) {
        const float *w1 = m->tensors[ly->fc1_weight].data, *w2 = m->tensors[ly->fc2_weight].data;
        int F = ly->d_hidden;
        for (int u = p->first; u < p->first + p->count; u++)
            for (int c = 0; c < d; c++) {
                if (w1[(size_t)u * d + c] != 0) p->r[c] = 1;
                if (w2[(size_t)c * F + u] != 0) p->w[c] = 1;
            }
    } else {
        int dh = ly->d_head, dv = ly->d_vhead, D = ly->n_heads * dv;
        const float *wq = m->tensors[ly->query].data, *wk = m->tensors[ly->key].data;
        const float *wv = m->tensors[ly->value].data, *wo = m->tensors[ly->output].data;
        for (int i = p->first * dh; i < (p->first + p->count) * dh; i++)
            for (int c = 0; c < d; c++)
                if (wq[(size_t)i * d + c] != 0 || wk[(size_t)i * d + c] != 0) p->r[c] = 1;
        for (int i = p->first * dv; i < (p->first + p->count) * dv; i++)
            for (int c = 0; c < d; c++) {
                if (wv[(size_t)i * d + c] != 0) p->r[c] = 1;
                if (wo[(size_t)c * D + i] != 0) p->w[c] = 1;
            }
    }
    return 0;
}

static int meets(const unsigned char *a, const unsigned char *b, int d) {
    for (int c = 0; c < d; c++)
        if (a[c] && b[c]) return c;
    return -1;
}

/* A new [rows, cols] tensor of sp->u from src's rows [r0, r0 + rows) and
 * columns [c0, c0 + cols); its index, -1 out of memory. */
static int slice(PvSplit *sp, const TfTensor *src, long r0, long rows, long c0, long cols) {
    TfModel *u = &sp->u;
    TfTensor *t = &u->tensors[u->n_tensors];
    long in = src->ndim > 1 ? (long)src->shape[1] : 1;
    memset(t, 0, sizeof *t);
    t->ndim = src->ndim;
    t->shape[0] = rows;
    if (src->ndim > 1) t->shape[1] = cols;
    t->nelem = (size_t)rows * (size_t)(src->ndim > 1 ? cols : 1);
    t->data = malloc((t->nelem ? t->nelem : 1) * sizeof *t->data);
    if (!t->data) return -1;
    for (long r = 0; r < rows; r++)
        for (long c = 0; c < (src->ndim > 1 ? cols : 1); c++)
            t->data[(size_t)r * (size_t)(src->ndim > 1 ? cols : 1) + (size_t)c] =
                src->data[(size_t)(r0 + r) * (size_t)in + (size_t)(src->ndim > 1 ? c0 + c : 0)];
    sp->n_own++;
    return u->n_tensors++;
}

/* The output bias columns piece p adds (those it writes; every one not
 * written by a piece of its layer when p is the layer's first). */
static int bias_slice(PvSplit *sp, const TfModel *m, int b, const Piece *pc, int np, int p) {
    if (b < 0) return -1;
    int t = slice(sp, &m->tensors[b], 0, m->d_model, 0, 1);
    if (t < 0) return -2;
    float *x = sp->u.tensors[t].data;
    for (int c = 0; c < m->d_model; c++) {
        int owner = -1;
        for (int q = 0; q < np && owner < 0; q++)
            if (pc[q].layer == pc[p].layer && pc[q].w[c]) owner = q;
        if (owner < 0)
            for (int q = 0; q < np && owner < 0; q++)
                if (pc[q].layer == pc[p].layer) owner = q;
        if (owner != p) x[c] = 0;
    }
    return t;
}

static void refuse(char *why, size_t n, int *why_line, int line, const char *fmt, ...) TF_PRINTF(5, 6);
static void refuse(char *why, size_t n, int *why_line, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    *why_line = line;
}

int pv_split_needed(const TfModel *m, const TfIr *ir) {
    if (m->n_layers != ir->n_ops) return 1;
    for (int li = 0; li < m->n_layers; li++)
        if (m->layers[li].n_parts) return 1;
    return 0;
}

int pv_split_seed(const TfModel *m, const TfIr *ir, PvSplit *sp, char *why, size_t n_why, int *why_line) {
    memset(sp, 0, sizeof *sp);
    int d = m->d_model, np = 0, rc = 0;
    for (int li = 0; li < m->n_layers; li++) np += m->layers[li].n_parts ? m->layers[li].n_parts : 1;
    Piece *pc = calloc((size_t)np + 1, sizeof *pc);
    int *order = malloc(((size_t)ir->n_ops + 1) * sizeof *order);
    if (!pc || !order) {
        free(pc), free(order);
        return -1;
    }
    /* The pieces, in the file's order, and what each reads and writes. */
    int k = 0;
    for (int li = 0; li < m->n_layers && rc == 0; li++) {
        const TfLayer *ly = &m->layers[li];
        if (ly->norm_weight >= 0 || ly->kind == TF_LAYER_NORM ||
            (ly->kind == TF_LAYER_ATTENTION && ly->output < 0)) {
            refuse(why, n_why, why_line, ly->line, "layer %d (%s): not one of the layers seed ops become", li, ly->name);
            rc = 1;
            break;
        }
        int n = ly->n_parts ? ly->n_parts : 1;
        for (int p = 0; p < n && rc == 0; p++, k++) {
            pc[k] = (Piece){li, ly->n_parts ? p : -1, ly->n_parts ? ly->parts[p].first : 0,
                            ly->n_parts ? ly->parts[p].count : (ly->kind == TF_LAYER_MLP ? ly->d_hidden : ly->n_heads),
                            ly->n_parts ? ly->parts[p].line : ly->line, -1, NULL, NULL};
            if (piece_set(m, &pc[k]) < 0) rc = -1;
        }
    }
    /* Each op its piece: the k-th of its line. */
    for (int oi = 0; oi < ir->n_ops && rc == 0; oi++) {
        int line = ir->ops[oi].stmt->loc.line, nth = 0, found = -1;
        for (int j = 0; j < oi; j++) nth += ir->ops[j].stmt->loc.line == line;
        for (int q = 0; q < np && found < 0; q++)
            if (pc[q].line == line && nth-- == 0) found = q;
        if (found < 0) {
            refuse(why, n_why, why_line, line, "not proven: the source's op %d (line %d, %s) has no layer or part of its own in the file", oi, line, tf_ops[ir->ops[oi].op].name);
            rc = 1;
        } else {
            pc[found].op = oi;
            order[oi] = found;
        }
    }
    for (int q = 0; q < np && rc == 0; q++)
        if (pc[q].op < 0) {
            refuse(why, n_why, why_line, pc[q].line, "not proven: layer %d (%s) holds a part that is no op of the source (line %d)", pc[q].layer, m->layers[pc[q].layer].name, pc[q].line);
            rc = 1;
        }
    /* The same computation in program order. */
    for (int a = 0; a < np && rc == 0; a++)
        for (int b = a + 1; b < np && rc == 0; b++) {
            const Piece *A = &pc[a], *B = &pc[b];
            int c = -1;
            if (A->layer == B->layer) { // side by side: the later op must not see the earlier's writes
                const Piece *E = A->op < B->op ? A : B, *L = A->op < B->op ? B : A;
                if ((c = meets(E->w, L->w, d)) < 0) c = meets(E->w, L->r, d);
            } else if (A->op > B->op) { // A before B in the file, after it in the program
                if ((c = meets(A->w, B->w, d)) < 0 && (c = meets(A->w, B->r, d)) < 0) c = meets(B->w, A->r, d);
            }
            if (c >= 0) {
                refuse(why, n_why, why_line, m->layers[A->layer].line, "not proven: the ops of lines %d (layer %d) and %d (layer %d) cannot be taken one after the other in the source's order: both touch column %d, and one of them writes it", A->line, A->layer, B->line, B->layer, c);
                rc = 1;
            }
        }
    if (rc) goto done;
    /* The split model: m's settings and tensors, and one layer per op. */
    sp->u = *m;
    sp->u.layers = calloc((size_t)ir->n_ops + 1, sizeof *sp->u.layers);
    sp->u.tensors = calloc((size_t)m->n_tensors + 8 * (size_t)np + 1, sizeof *sp->u.tensors);
    sp->file_layer = malloc(((size_t)ir->n_ops + 1) * sizeof *sp->file_layer);
    if (!sp->u.layers || !sp->u.tensors || !sp->file_layer) {
        rc = -1;
        goto done;
    }
    memcpy(sp->u.tensors, m->tensors, (size_t)m->n_tensors * sizeof *m->tensors);
    sp->u.n_tensors = m->n_tensors;
    sp->u.n_layers = ir->n_ops;
    for (int oi = 0; oi < ir->n_ops && rc == 0; oi++) {
        const Piece *P = &pc[order[oi]];
        const TfLayer *ly = &m->layers[P->layer];
        TfLayer *L = &sp->u.layers[oi];
        *L = *ly;
        L->parts = NULL;
        L->n_parts = 0;
        sp->file_layer[oi] = P->layer;
        if (P->part < 0 && ly->n_parts == 0) continue; // a layer of one op: as it is
        const TfLayerPart *part = &ly->parts[P->part];
        L->name = part->name;
        L->op = part->op;
        L->line = part->line;
        int ts[8], n = 0;
        if (ly->kind == TF_LAYER_MLP) {
            L->d_hidden = P->count;
            ts[n++] = L->fc1_weight = slice(sp, &m->tensors[ly->fc1_weight], P->first, P->count, 0, d);
            if (ly->fc1_bias >= 0) ts[n++] = L->fc1_bias = slice(sp, &m->tensors[ly->fc1_bias], P->first, P->count, 0, 1);
            ts[n++] = L->fc2_weight = slice(sp, &m->tensors[ly->fc2_weight], 0, d, P->first, P->count);
            if (ly->fc2_bias >= 0) ts[n++] = L->fc2_bias = bias_slice(sp, m, ly->fc2_bias, pc, np, order[oi]);
        } else {
            int dh = ly->d_head, dv = ly->d_vhead;
            L->n_heads = P->count;
            ts[n++] = L->query = slice(sp, &m->tensors[ly->query], (long)P->first * dh, (long)P->count * dh, 0, d);
            ts[n++] = L->key = slice(sp, &m->tensors[ly->key], (long)P->first * dh, (long)P->count * dh, 0, d);
            ts[n++] = L->value = slice(sp, &m->tensors[ly->value], (long)P->first * dv, (long)P->count * dv, 0, d);
            ts[n++] = L->output = slice(sp, &m->tensors[ly->output], 0, d, (long)P->first * dv, (long)P->count * dv);
            if (ly->query_bias >= 0) ts[n++] = L->query_bias = slice(sp, &m->tensors[ly->query_bias], (long)P->first * dh, (long)P->count * dh, 0, 1);
            if (ly->key_bias >= 0) ts[n++] = L->key_bias = slice(sp, &m->tensors[ly->key_bias], (long)P->first * dh, (long)P->count * dh, 0, 1);
            if (ly->value_bias >= 0) ts[n++] = L->value_bias = slice(sp, &m->tensors[ly->value_bias], (long)P->first * dv, (long)P->count * dv, 0, 1);
            if (ly->output_bias >= 0) ts[n++] = L->output_bias = bias_slice(sp, m, ly->output_bias, pc, np, order[oi]);
        }
        for (int i = 0; i < n; i++)
            if (ts[i] < 0) rc = -1;
    }
done:
    for (int q = 0; q < np; q++) free(pc[q].r), free(pc[q].w);
    free(pc), free(order);
    if (rc) pv_split_free(sp);
    return rc;
}

void pv_split_free(PvSplit *sp) {
    if (sp->u.tensors)
        for (int i = sp->u.n_tensors - sp->n_own; i < sp->u.n_tensors; i++) free(sp->u.tensors[i].data);
    free(sp->u.tensors), free(sp->u.layers), free(sp->file_layer);
    memset(sp, 0, sizeof *sp);
}
