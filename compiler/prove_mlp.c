/* prove_mlp.c: an MLP layer, part by part, in interval arithmetic.
 *
 * A part (its hidden units; the whole layer when it has no parts) reads the
 * columns where its fc1 rows are nonzero and writes those where its fc2
 * columns are. It is evaluated on every combination of the base variables
 * its input columns depend on: the result is a table over them for each
 * column it writes, added to the stream. Whether that is the program's
 * value is checked where the register is complete (prove_out.c), so one
 * rule covers tables, staircases, linear, gated and fused MLPs without
 * knowing their form. The float32 rounding of each dot product is
 * gamma_n times the sum of its terms' magnitudes (n: all the layer's terms).
 * It gets there by branch and bound over the base variables (part_bb):
 * only the units that may be positive at a combination are evaluated
 * there, with the same intervals as evaluating every unit (part_naive, the
 * twin the tests compare it with).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prove_internal.h"

typedef struct Mlp {
    const float *w1, *b1, *w2, *b2;
    int d, F;
} Mlp;

/* Hidden unit u on the row x (only the columns in reads). */
static TfIv unit(const Mlp *L, int u, const TfIv *x, const unsigned char *reads) {
    return iv_relu(pv_dot(L->w1 + (size_t)u * (size_t)L->d, x, reads, L->d, L->b1 ? L->b1[u] : 0));
}

/* Column c of fc2 over units [f, f + n) of h (h indexed from f). */
static TfIv out_col(const Mlp *L, int c, const TfIv *h, int f, int n) {
    TfIv s = iv_pt(0);
    double mag = 0;
    for (int u = f; u < f + n; u++) {
        float w = L->w2[(size_t)c * (size_t)L->F + (size_t)u];
        if (w == 0) continue;
        s = iv_add(s, iv_scale(h[u - f], w));
        mag += fabs(w) * iv_mag(h[u - f]);
    }
    return iv_widen(s, iv_gamma(L->F + 1) * mag);
}

static void bos_row(PvNet *N, const Mlp *L, TfIv *h, unsigned char *all) {
    memset(all, 1, (size_t)L->d);
    for (int u = 0; u < L->F; u++) h[u] = unit(L, u, N->bos, all);
    for (int c = 0; c < L->d; c++) {
        TfIv y = out_col(L, c, h, 0, L->F);
        if (L->b2) y = iv_add(y, iv_pt(L->b2[c]));
        if (y.lo == 0 && y.hi == 0) continue;
        TfIv s = iv_add(N->bos[c], y);
        N->bos[c] = iv_widen(s, TF_F32_U * iv_mag(s));
    }
}

/* A part's sparse structure: each unit's nonzero fc1 entries, each written
 * column's nonzero fc2 entries. */
typedef struct Sparse {
    int *u_start, *u_col; /* unit u's fc1 entries: [u_start[u], u_start[u + 1]) */
    float *u_w;
    int *c_start, *c_unit; /* written column k's fc2 entries */
    float *c_w;
    int *wcol, nw;
    int *nnz; /* written column k: nonzero fc2 entries outside the part, + 1 for the bias */
} Sparse;

static void sparse_free(Sparse *Sp) {
    free(Sp->u_start), free(Sp->u_col), free(Sp->u_w);
    free(Sp->c_start), free(Sp->c_unit), free(Sp->c_w), free(Sp->wcol), free(Sp->nnz);
}

static int sparse_make(const Mlp *L, int f, int n, Sparse *Sp) {
    int d = L->d;
    long nu = 0, nc = 0;
    for (int u = f; u < f + n; u++)
        for (int c = 0; c < d; c++) {
            nu += L->w1[(size_t)u * d + c] != 0;
            nc += L->w2[(size_t)c * L->F + u] != 0;
        }
    Sp->u_start = malloc(((size_t)n + 1) * sizeof(int));
    Sp->u_col = malloc(((size_t)nu + 1) * sizeof(int));
    Sp->u_w = malloc(((size_t)nu + 1) * sizeof(float));
    Sp->c_start = malloc(((size_t)d + 1) * sizeof(int));
    Sp->c_unit = malloc(((size_t)nc + 1) * sizeof(int));
    Sp->c_w = malloc(((size_t)nc + 1) * sizeof(float));
    Sp->wcol = malloc(((size_t)d + 1) * sizeof(int));
    Sp->nnz = malloc(((size_t)d + 1) * sizeof(int));
    if (!Sp->nnz || !Sp->u_start || !Sp->u_col || !Sp->u_w || !Sp->c_start || !Sp->c_unit || !Sp->c_w || !Sp->wcol)
        return -1;
    int k = 0;
    for (int u = f; u < f + n; u++) {
        Sp->u_start[u - f] = k;
        for (int c = 0; c < d; c++)
            if (L->w1[(size_t)u * d + c] != 0) Sp->u_col[k] = c, Sp->u_w[k++] = L->w1[(size_t)u * d + c];
    }
    Sp->u_start[n] = k;
    k = 0;
    Sp->nw = 0;
    for (int c = 0; c < d; c++) {
        int k0 = k;
        for (int u = f; u < f + n; u++)
            if (L->w2[(size_t)c * L->F + u] != 0) Sp->c_unit[k] = u - f, Sp->c_w[k++] = L->w2[(size_t)c * L->F + u];
        if (k == k0) continue;
        Sp->c_start[Sp->nw] = k0;
        Sp->nnz[Sp->nw] = 1 - (k - k0);
        for (int u = 0; u < L->F; u++) Sp->nnz[Sp->nw] += L->w2[(size_t)c * L->F + u] != 0;
        Sp->wcol[Sp->nw++] = c;
    }
    Sp->c_start[Sp->nw] = k;
    return 0;
}

/* Written column k on the box x: the units whose pre-activation keeps its
 * sign on the whole box are affine there and are composed into one affine
 * form before it is evaluated (so that steps whose ReLUs cancel cancel
 * exactly); the others are evaluated as intervals. z: each unit's
 * pre-activation, rw its float32 rounding; coef, cmag: d zeros.
 * ent[0..ne): the column's fc2 entries to take (indices into c_unit, in
 * order), NULL for all of them: an entry left out must be of a unit whose
 * pre-activation is at most 0 (its ReLU adds an exact 0, nothing else).
 * touch (d ints) and mark (d zeros): the composed columns are gathered
 * there and, when few, taken in order from there (as the loop over all d,
 * for touch NULL, takes them). */
static TfIv affine_col(const Mlp *L, const Sparse *Sp, int k, const int *ent, int ne, int f, const TfIv *x,
                       const TfIv *z, const double *rw, double *coef, double *cmag, int *touch,
                       unsigned char *mark) {
    TfIv nonlin = iv_pt(0);
    double cst = 0, slack = 0, mag = 0, pos = 0, neg = 0;
    int nt = 0, nc = 0, live = Sp->nnz[k]; // terms that may be nonzero: a ReLU at or below 0 adds an exact 0
    if (!ent) ne = Sp->c_start[k + 1] - Sp->c_start[k];
    for (int i = 0; i < ne; i++) {
        int e = ent ? ent[i] : Sp->c_start[k] + i;
        int u = Sp->c_unit[e];
        double w2 = Sp->c_w[e];
        TfIv h = iv_relu(z[u]);
        mag += fabs(w2) * iv_mag(h);
        if (z[u].hi <= 0) continue;
        live++;
        if (w2 > 0) pos += w2 * h.hi;
        else neg -= w2 * h.hi;
        if (z[u].lo < 0) {
            nonlin = iv_add(nonlin, iv_scale(h, w2));
            continue;
        }
        slack += fabs(w2) * rw[u];
        cst += w2 * (L->b1 ? L->b1[u + f] : 0);
        nt++;
        for (int j = Sp->u_start[u]; j < Sp->u_start[u + 1]; j++) {
            int c = Sp->u_col[j];
            coef[c] += w2 * Sp->u_w[j];
            cmag[c] += fabs(w2 * Sp->u_w[j]);
            if (touch && !mark[c]) mark[c] = 1, touch[nc++] = c;
        }
    }
    TfIv y = iv_add(nonlin, iv_pt(cst));
    double dbl = (nt + 2) * 2.3e-16; // the double sums of the composed coefficients
    slack += dbl * fabs(cst);
    int few = touch && nc * 8 <= L->d; // then sorted (insertion), else all d in order
    for (int i = 1; few && i < nc; i++)
        for (int j = i; j > 0 && touch[j - 1] > touch[j]; j--) {
            int t = touch[j];
            touch[j] = touch[j - 1], touch[j - 1] = t;
        }
    for (int i = 0; touch && i < nc; i++) mark[touch[i]] = 0;
    for (int i = 0; i < (few ? nc : L->d); i++) {
        int c = few ? touch[i] : i;
        if (cmag[c] == 0) continue;
        y = iv_add(y, iv_scale(x[c], coef[c]));
        slack += dbl * cmag[c] * iv_mag(x[c]);
        coef[c] = cmag[c] = 0;
    }
    // The float32 sum over the units: gamma_n, or, when no unit outside
    // the part writes the column (its sum is all here), the partial-sum bound.
    double sum_err = iv_gamma(live) * mag;
    if (Sp->nnz[k] == 1) {
        double grow = 1.0 + (live + 2) * 0x1p-52; // pos and neg summed in double
        sum_err = iv_min(sum_err, iv_sum_err(pos * grow, neg * grow, live - 1));
    }
    // The engine adds fc2's bias to the sum before the stream (one more
    // rounding, of |sum + bias|); the stream's columns take the bias first.
    float b2 = L->b2 ? L->b2[Sp->wcol[k]] : 0;
    if (b2 != 0) sum_err += iv_up(TF_F32_U * (mag * (1 + iv_gamma(live)) + fabs(b2)));
    return iv_widen(y, slack + sum_err);
}

/* Unit u's pre-activation on x (z), and its float32 rounding (rw). */
static void pre_unit(const Mlp *L, const Sparse *Sp, int f, int u, const TfIv *x, TfIv *z, double *rw) {
    TfIv s = iv_pt(L->b1 ? L->b1[u + f] : 0);
    double mag = fabs(s.lo);
    int cnt = 1;
    for (int j = Sp->u_start[u]; j < Sp->u_start[u + 1]; j++) {
        s = iv_add(s, iv_scale(x[Sp->u_col[j]], Sp->u_w[j]));
        mag += fabs(Sp->u_w[j]) * iv_mag(x[Sp->u_col[j]]);
        cnt++;
    }
    *rw = iv_gamma(cnt) * mag;
    *z = iv_widen(s, *rw);
}

/* The naive evaluation of a part: every unit at every combination of D
 * (add: a table over D per written column, NaN where some column read has
 * no value: an unreachable combination stays unreachable). */
static int part_naive(PvNet *N, const Mlp *L, const Sparse *Sp, int f, int n, PvDeps D, long size,
                      const unsigned char *reads, TfIv *x, PvCol *add) {
    int d = L->d;
    TfIv *z = malloc(((size_t)n + 1) * sizeof *z);
    double *rw = malloc(((size_t)n + 1) * sizeof *rw), *coef = calloc((size_t)d, sizeof *coef),
           *cmag = calloc((size_t)d, sizeof *cmag);
    int assign[TF_PROOF_MAX_BASE], rc = !z || !rw || !coef || !cmag ? -1 : 0;
    for (long i = 0; i < size && rc == 0; i++) {
        pv_deps_decode(N->S, D, i, assign);
        int dead = 0;
        for (int c = 0; c < d; c++)
            if (reads[c]) {
                x[c] = pv_col_get(N, &N->col[c], assign);
                dead |= isnan(x[c].lo);
            }
        for (int u = 0; u < n && !dead; u++) pre_unit(L, Sp, f, u, x, &z[u], &rw[u]);
        for (int k = 0; k < Sp->nw; k++)
            add[k].v[i] = dead ? (TfIv){NAN, NAN} : affine_col(L, Sp, k, NULL, 0, f, x, z, rw, coef, cmag, NULL, NULL);
    }
    free(z), free(rw), free(coef), free(cmag);
    return rc;
}

/* The fast path, branch and bound over the base variables (the same
 * tables as part_naive, bit for bit: tests/test_prove.c).
 *
 * A unit's pre-activation is its bias plus one term per group of the
 * columns it reads that depend on the same base variables; a term is a
 * table over its group's variables only (units with the same weights on a
 * group share it). The variables of D are fixed one at a time, the highest
 * first; with some fixed, a term lies within its hull over the others, and
 * a unit whose pre-activation is then at most 0, float32 rounding
 * included, is dropped below: its ReLU adds an exact 0 at every
 * combination there (the engine's float32 sum is within the same rounding
 * of the exact one). At a full combination the units left are evaluated
 * as part_naive evaluates every unit, and the written columns' sums take
 * only their entries (affine_col). A group with no value at some fixed
 * variables (every combination below unreachable) gives NaN there. */
typedef struct BbGroup {
    PvDeps d;
    int nv;               /* its base variables */
    PvDeps pre[TF_PROOF_MAX_BASE + 1]; /* the first j of them in the order they are fixed */
    unsigned char **dead; /* per j <= nv: over pre[j], no combination below with every column valued */
} BbGroup;

typedef struct BbTerm {
    int g, n;    /* its group; its entries: columns and weights */
    int *col;
    float *w;
    uint64_t h;  /* of its entries */
    long id;     /* while they are made one: its place */
    TfIv **t;    /* per j <= nv: over pre[j], the term's hull (j = nv: its value) */
    double **mag; /* per j: the largest sum of |w| |x| */
} BbTerm;

typedef struct Bb {
    PvNet *N;
    const Mlp *L;
    const Sparse *Sp;
    int f, n, d, m;
    int var[TF_PROOF_MAX_BASE]; /* D's base variables, the highest first */
    long span[TF_PROOF_MAX_BASE + 1]; /* combinations of var[L..m) */
    int ng, nt;
    int *gof;      /* per column read: its group, -1 */
    BbGroup *G;
    BbTerm *T;
    int *jl;       /* [g * (m + 1) + L]: group g's variables among var[0..L) */
    int *ut_start, *ut; /* unit u's terms */
    int *ucnt;     /* unit u's fc1 entries + 1 */
    long *gix;     /* [L * ng + g]: group g's combination (over pre[jl]) at level L */
    int *cand, *ncand; /* [L * n]: the units left at level L */
    int assign[TF_PROOF_MAX_BASE];
    /* The full combinations: unit u's fc2 entries (indices into c_unit),
       the written columns' entries taken, scratch. */
    int *ue_start, *ue, *ue_k, *lst, *lcnt, *lk, nlk;
    TfIv *z, *x, *y0;
    double *rw, *coef, *cmag;
    int *touch, *xs, serial;
    unsigned char *mark;
    PvCol *add;
    long entries; /* the terms' table entries */
} Bb;

static void bb_free(Bb *B) {
    for (int g = 0; B->G && g < B->ng; g++) {
        for (int j = 0; B->G[g].dead && j <= B->G[g].nv; j++) free(B->G[g].dead[j]);
        free(B->G[g].dead);
    }
    for (int t = 0; B->T && t < B->nt; t++) {
        for (int j = 0; B->T[t].t && B->T[t].mag && j <= B->G[B->T[t].g].nv; j++) free(B->T[t].t[j]), free(B->T[t].mag[j]);
        free(B->T[t].t), free(B->T[t].mag), free(B->T[t].col), free(B->T[t].w);
    }
    free(B->gof), free(B->G), free(B->T), free(B->jl), free(B->ut_start), free(B->ut), free(B->ucnt);
    free(B->gix), free(B->cand), free(B->ncand), free(B->ue_start), free(B->ue), free(B->ue_k);
    free(B->lst), free(B->lcnt), free(B->lk), free(B->z), free(B->y0), free(B->rw), free(B->coef);
    free(B->cmag), free(B->touch), free(B->xs), free(B->mark);
}

/* The groups of the columns read, and where each is fixed. */
static int bb_groups(Bb *B, const unsigned char *reads) {
    const PvSem *S = B->N->S;
    int d = B->d, m = B->m;
    B->gof = malloc((size_t)d * sizeof *B->gof);
    B->G = calloc((size_t)d + 1, sizeof *B->G);
    if (!B->gof || !B->G) return -1;
    for (int c = 0; c < d; c++) {
        B->gof[c] = -1;
        if (!reads[c]) continue;
        PvDeps dc = B->N->col[c].deps;
        int g = 0;
        while (g < B->ng && B->G[g].d != dc) g++;
        if (g == B->ng) B->G[B->ng++].d = dc;
        B->gof[c] = g;
    }
    B->jl = malloc(((size_t)B->ng * (m + 1) + 1) * sizeof *B->jl);
    if (!B->jl) return -1;
    for (int g = 0; g < B->ng; g++) {
        BbGroup *G = &B->G[g];
        G->pre[0] = 0;
        for (int L = 0; L <= m; L++) {
            B->jl[g * (m + 1) + L] = G->nv;
            if (L < m && (G->d >> B->var[L] & 1)) {
                G->pre[G->nv + 1] = G->pre[G->nv] | (PvDeps)1 << B->var[L];
                G->nv++;
            }
        }
        G->dead = calloc((size_t)G->nv + 1, sizeof *G->dead);
        if (!G->dead) return -1;
        long full = pv_deps_size(S, G->d, PV_TABLE_LIMIT);
        for (int j = 0; j <= G->nv; j++) {
            long nj = pv_deps_size(S, G->pre[j], PV_TABLE_LIMIT);
            G->dead[j] = malloc((size_t)nj);
            if (!G->dead[j]) return -1;
            memset(G->dead[j], j == G->nv ? 0 : 1, (size_t)nj);
        }
        // dead[nv]: some column of the group has no value (its columns are
        // tables over the group's variables: combination i is their row i);
        // dead[j]: every combination below.
        for (int c = 0; c < d; c++)
            for (long i = 0; B->gof[c] == g && i < full; i++) G->dead[G->nv][i] |= isnan(B->N->col[c].v[i].lo);
        for (long i = 0; i < full; i++) {
            if (G->dead[G->nv][i]) continue;
            pv_deps_decode(S, G->d, i, B->assign);
            for (int j = 0; j < G->nv; j++) G->dead[j][pv_deps_index(S, G->pre[j], B->assign)] = 0;
        }
    }
    return 0;
}

static int term_cmp(const void *a, const void *b) {
    const BbTerm *x = a, *y = b;
    if (x->g != y->g) return x->g < y->g ? -1 : 1;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    int r = memcmp(x->col, y->col, (size_t)x->n * sizeof *x->col);
    return r ? r : memcmp(x->w, y->w, (size_t)x->n * sizeof *x->w);
}

/* The units' terms (alike ones once) and their tables. 1: more table
 * entries than the fast path allows itself (then part_naive). */
static int bb_terms(Bb *B) {
    const PvSem *S = B->N->S;
    const Sparse *Sp = B->Sp;
    int n = B->n, ng = B->ng;
    long cap = (long)n * ng + 1, na = 0;
    BbTerm *all = calloc((size_t)cap, sizeof *all); // per unit and group it reads, in that order
    long *tid = malloc((size_t)cap * sizeof *tid);   // their terms
    B->ut_start = malloc(((size_t)n + 1) * sizeof *B->ut_start);
    B->ucnt = malloc(((size_t)n + 1) * sizeof *B->ucnt);
    B->T = calloc((size_t)cap, sizeof *B->T);
    int rc = !all || !tid || !B->ut_start || !B->ucnt || !B->T ? -1 : 0;
    for (int u = 0; u < n && rc == 0; u++) {
        int a = Sp->u_start[u], e = Sp->u_start[u + 1];
        B->ucnt[u] = e - a + 1;
        B->ut_start[u] = (int)na;
        for (int g = 0; g < ng && rc == 0; g++) {
            int cnt = 0;
            for (int j = a; j < e; j++) cnt += B->gof[Sp->u_col[j]] == g;
            if (!cnt) continue;
            BbTerm *T = &all[na];
            T->g = g, T->id = na++;
            T->col = malloc((size_t)cnt * sizeof *T->col);
            T->w = malloc((size_t)cnt * sizeof *T->w);
            if (!T->col || !T->w) {
                rc = -1;
                break;
            }
            for (int j = a; j < e; j++)
                if (B->gof[Sp->u_col[j]] == g) T->col[T->n] = Sp->u_col[j], T->w[T->n++] = Sp->u_w[j];
            T->h = 1469598103934665603ull;
            const unsigned char *bc = (const unsigned char *)T->col, *bw = (const unsigned char *)T->w;
            for (size_t i = 0; i < (size_t)cnt * sizeof(int); i++) T->h = (T->h ^ bc[i]) * 1099511628211ull;
            for (size_t i = 0; i < (size_t)cnt * sizeof(float); i++) T->h = (T->h ^ bw[i]) * 1099511628211ull;
        }
    }
    if (rc == 0) {
        B->ut_start[n] = (int)na;
        B->ut = malloc(((size_t)na + 1) * sizeof *B->ut);
        if (!B->ut) rc = -1;
    }
    // Alike terms made one: sorted, the first of each run kept (with its
    // entries), each next one compared with the kept one (the others' are freed).
    if (rc == 0) qsort(all, (size_t)na, sizeof *all, term_cmp);
    for (long i = 0; i < na; i++) {
        if (rc == 0 && (B->nt == 0 || term_cmp(&all[i], &B->T[B->nt - 1]) != 0)) {
            B->T[B->nt] = all[i];
            B->T[B->nt++].t = NULL;
        } else free(all[i].col), free(all[i].w);
        if (rc == 0) tid[all[i].id] = B->nt - 1;
    }
    for (long k = 0; k < na && rc == 0; k++) B->ut[k] = (int)tid[k];
    free(all), free(tid);
    if (rc != 0) return rc;
    // The tables: per term and j, over pre[j].
    B->entries = 0;
    for (int t = 0; t < B->nt; t++) {
        const BbGroup *G = &B->G[B->T[t].g];
        for (int j = 0; j <= G->nv; j++) B->entries += pv_deps_size(S, G->pre[j], PV_TABLE_LIMIT);
        if (B->entries > PV_TABLE_LIMIT) return 1;
    }
    for (int t = 0; t < B->nt; t++) {
        BbTerm *T = &B->T[t];
        const BbGroup *G = &B->G[T->g];
        T->t = calloc((size_t)G->nv + 1, sizeof *T->t);
        T->mag = calloc((size_t)G->nv + 1, sizeof *T->mag);
        if (!T->t || !T->mag) return -1;
        for (int j = 0; j <= G->nv; j++) {
            long nj = pv_deps_size(S, G->pre[j], PV_TABLE_LIMIT);
            T->t[j] = malloc((size_t)nj * sizeof **T->t);
            T->mag[j] = calloc((size_t)nj, sizeof **T->mag);
            if (!T->t[j] || !T->mag[j]) return -1;
            for (long i = 0; i < nj; i++) T->t[j][i] = (TfIv){NAN, NAN};
        }
        long full = pv_deps_size(S, G->d, PV_TABLE_LIMIT);
        for (long i = 0; i < full; i++) {
            if (G->dead[G->nv][i]) continue;
            pv_deps_decode(S, G->d, i, B->assign);
            TfIv s = iv_pt(0);
            double mag = 0;
            for (int e = 0; e < T->n; e++) {
                TfIv x = B->N->col[T->col[e]].v[i]; // over the group's variables, as i
                s = iv_add(s, iv_scale(x, T->w[e]));
                mag += fabs(T->w[e]) * iv_mag(x);
            }
            mag = iv_up(mag * (1 + (T->n + 2) * 0x1p-52)); // its double sum
            T->t[G->nv][i] = s, T->mag[G->nv][i] = mag;
            for (int j = 0; j < G->nv; j++) {
                long r = pv_deps_index(S, G->pre[j], B->assign);
                TfIv *h = &T->t[j][r];
                *h = isnan(h->lo) ? s : iv_hull(*h, s);
                T->mag[j][r] = fmax(T->mag[j][r], mag);
            }
        }
    }
    return 0;
}

/* Whether unit u may be positive with var[0..L) fixed (gix at level L). */
static int bb_alive(const Bb *B, int u, int L) {
    float b = B->L->b1 ? B->L->b1[u + B->f] : 0;
    TfIv s = iv_pt(b);
    double mag = fabs(b);
    for (int k = B->ut_start[u]; k < B->ut_start[u + 1]; k++) {
        const BbTerm *T = &B->T[B->ut[k]];
        int j = B->jl[T->g * (B->m + 1) + L];
        long i = B->gix[(long)L * B->ng + T->g];
        s = iv_add(s, T->t[j][i]);
        mag += T->mag[j][i];
    }
    // Its engine value is within gamma_cnt mag of the exact one; part_naive's
    // interval within its own double roundings (at most 2^-40 mag) of both.
    double r = iv_gamma(B->ucnt[u]) * mag;
    return !(s.hi + r * (1 + 0x1p-30) + 0x1p-30 * mag + 1e-290 <= 0);
}

/* A full combination (index i): the units left, evaluated. */
static void bb_leaf(Bb *B, long i) {
    const Sparse *Sp = B->Sp;
    const int *cand = B->cand + (long)B->m * B->n;
    B->serial++;
    for (int a = 0; a < B->ncand[B->m]; a++) {
        int u = cand[a];
        for (int j = Sp->u_start[u]; j < Sp->u_start[u + 1]; j++) {
            int c = Sp->u_col[j];
            if (B->xs[c] != B->serial) B->x[c] = pv_col_get(B->N, &B->N->col[c], B->assign), B->xs[c] = B->serial;
        }
        pre_unit(B->L, Sp, B->f, u, B->x, &B->z[u], &B->rw[u]);
        if (B->z[u].hi <= 0) continue; // adds an exact 0, as in part_naive
        for (int e = B->ue_start[u]; e < B->ue_start[u + 1]; e++) {
            int k = B->ue_k[e];
            if (!B->lcnt[k]) B->lk[B->nlk++] = k;
            B->lst[Sp->c_start[k] + B->lcnt[k]++] = B->ue[e];
        }
    }
    for (int k = 0; k < Sp->nw; k++) B->add[k].v[i] = B->y0[k];
    for (int a = 0; a < B->nlk; a++) {
        int k = B->lk[a];
        B->add[k].v[i] = affine_col(B->L, Sp, k, B->lst + Sp->c_start[k], B->lcnt[k], B->f, B->x, B->z, B->rw,
                                    B->coef, B->cmag, B->touch, B->mark);
        B->lcnt[k] = 0;
    }
    B->nlk = 0;
}

/* The combinations with var[0..L) fixed as in assign: indices [i, i + span[L]). */
static void bb_node(Bb *B, int L, long i) {
    const PvSem *S = B->N->S;
    int ng = B->ng, m = B->m;
    long *gix = B->gix + (long)L * ng;
    for (int g = 0; g < ng; g++) {
        const BbGroup *G = &B->G[g];
        int j = B->jl[g * (m + 1) + L];
        gix[g] = pv_deps_index(S, G->pre[j], B->assign);
        if (G->dead[j][gix[g]]) {
            for (long k = i; k < i + B->span[L]; k++)
                for (int w = 0; w < B->Sp->nw; w++) B->add[w].v[k] = (TfIv){NAN, NAN};
            return;
        }
    }
    const int *up = L ? B->cand + (long)(L - 1) * B->n : NULL;
    int *cand = B->cand + (long)L * B->n, nc = 0;
    for (int a = 0; a < (L ? B->ncand[L - 1] : B->n); a++) {
        int u = up ? up[a] : a;
        if (bb_alive(B, u, L)) cand[nc++] = u;
    }
    B->ncand[L] = nc;
    if (L == m) {
        bb_leaf(B, i);
        return;
    }
    int v = B->var[L];
    for (int a = 0; a < S->base[v].n; a++) {
        B->assign[v] = a;
        bb_node(B, L + 1, i + a * B->span[L + 1]);
    }
    B->assign[v] = -1;
}

/* 0: add filled; 1: too large for the fast path (part_naive instead); -1 out of memory. */
static int part_bb(PvNet *N, const Mlp *L, const Sparse *Sp, int f, int n, PvDeps D, const unsigned char *reads,
                   TfIv *x, PvCol *add) {
    const PvSem *S = N->S;
    Bb B = {.N = N, .L = L, .Sp = Sp, .f = f, .n = n, .d = L->d, .x = x, .add = add};
    for (int b = S->n_base - 1; b >= 0; b--)
        if (D >> b & 1) B.var[B.m++] = b;
    B.span[B.m] = 1;
    for (int l = B.m - 1; l >= 0; l--) B.span[l] = B.span[l + 1] * S->base[B.var[l]].n;
    for (int b = 0; b < TF_PROOF_MAX_BASE; b++) B.assign[b] = -1;
    int rc = bb_groups(&B, reads);
    if (rc == 0) rc = bb_terms(&B);
    if (rc != 0) {
        bb_free(&B);
        return rc;
    }
    int d = L->d, ne = Sp->c_start[Sp->nw];
    B.gix = malloc(((size_t)(B.m + 1) * B.ng + 1) * sizeof *B.gix);
    B.cand = malloc(((size_t)(B.m + 1) * n + 1) * sizeof *B.cand);
    B.ncand = malloc(((size_t)B.m + 1) * sizeof *B.ncand);
    B.ue_start = calloc((size_t)n + 2, sizeof *B.ue_start);
    B.ue = malloc(((size_t)ne + 1) * sizeof *B.ue);
    B.ue_k = malloc(((size_t)ne + 1) * sizeof *B.ue_k);
    B.lst = malloc(((size_t)ne + 1) * sizeof *B.lst);
    B.lcnt = calloc((size_t)Sp->nw + 1, sizeof *B.lcnt);
    B.lk = malloc(((size_t)Sp->nw + 1) * sizeof *B.lk);
    B.z = malloc(((size_t)n + 1) * sizeof *B.z);
    B.rw = malloc(((size_t)n + 1) * sizeof *B.rw);
    B.y0 = malloc(((size_t)Sp->nw + 1) * sizeof *B.y0);
    B.coef = calloc((size_t)d, sizeof *B.coef);
    B.cmag = calloc((size_t)d, sizeof *B.cmag);
    B.touch = malloc((size_t)d * sizeof *B.touch);
    B.xs = calloc((size_t)d, sizeof *B.xs);
    B.mark = calloc((size_t)d, 1);
    if (!B.gix || !B.cand || !B.ncand || !B.ue_start || !B.ue || !B.ue_k || !B.lst || !B.lcnt || !B.lk || !B.z ||
        !B.rw || !B.y0 || !B.coef || !B.cmag || !B.touch || !B.xs || !B.mark) {
        bb_free(&B);
        return -1;
    }
    // Unit u's fc2 entries, in order of written column.
    for (int k = 0; k < Sp->nw; k++)
        for (int e = Sp->c_start[k]; e < Sp->c_start[k + 1]; e++) B.ue_start[Sp->c_unit[e] + 2]++;
    for (int u = 0; u <= n; u++) B.ue_start[u + 1] += B.ue_start[u];
    for (int k = 0; k < Sp->nw; k++)
        for (int e = Sp->c_start[k]; e < Sp->c_start[k + 1]; e++) {
            int s = B.ue_start[Sp->c_unit[e] + 1]++;
            B.ue[s] = e, B.ue_k[s] = k;
        }
    // A written column where no unit is positive.
    for (int k = 0; k < Sp->nw; k++) B.y0[k] = affine_col(L, Sp, k, B.lst, 0, f, x, B.z, B.rw, B.coef, B.cmag, B.touch, B.mark);
    bb_node(&B, 0, 0);
    bb_free(&B);
    return 0;
}

/* One part: its contributions, added to the stream's columns. */
static int part(PvNet *N, const Mlp *L, int li, int f, int n, unsigned char *reads, TfIv *x) {
    PvSem *S = N->S;
    PvDeps D = pv_read_cols(N, L->w1, f, f + n, reads);
    long size = pv_deps_size(S, D, PV_TABLE_LIMIT);
    if (size < 0) {
        pv_unproven(N, N->m->layers[li].line, li,
                    "layer %d: not proven: its units read more than 2^22 combinations", li);
        return 0;
    }
    Sparse Sp = {0};
    PvCol *add = calloc((size_t)L->d + 1, sizeof *add);
    int rc = !add || sparse_make(L, f, n, &Sp) < 0 ? -1 : 0;
    for (int k = 0; k < Sp.nw && rc == 0; k++) rc = pv_col_set(&add[k], D, size);
    if (rc == 0 && !N->naive) rc = part_bb(N, L, &Sp, f, n, D, reads, x, add);
    if (rc == 1 || (rc == 0 && N->naive)) rc = part_naive(N, L, &Sp, f, n, D, size, reads, x, add);
    for (int k = 0; k < Sp.nw && rc == 0; k++) {
        if (pv_col_add(N, &N->col[Sp.wcol[k]], &add[k]) < 0) {
            pv_unproven(N, N->m->layers[li].line, li,
                        "layer %d: not proven: a column over more than 2^22 combinations", li);
            break;
        }
    }
    for (int k = 0; add && k < Sp.nw; k++) pv_col_free(&add[k]);
    free(add);
    sparse_free(&Sp);
    return rc;
}

/* Whether units [f, f + n) are clears (model_mlp_clears: unit_col, per
 * unit): pairs, each on its own column; each column in cols[0..n/2). The
 * layer leaves exactly 0 in those columns wherever they hold finite
 * values. */
static int clear_part(const int *unit_col, int f, int n, int *cols) {
    if (n < 2 || n % 2) return 0;
    for (int u = f; u < f + n; u += 2) {
        if (unit_col[u] < 0 || unit_col[u + 1] != unit_col[u]) return 0;
        cols[(u - f) / 2] = unit_col[u];
    }
    return 1;
}

/* Column c holds finite values at every combination that can occur (a
 * NaN entry marks one that cannot) and at the BOS. */
static int col_finite(const PvNet *N, int c) {
    const PvCol *k = &N->col[c];
    for (long i = 0; i < k->n; i++)
        if (!isnan(k->v[i].lo) && (!isfinite(k->v[i].lo) || !isfinite(k->v[i].hi))) return 0;
    return isfinite(N->bos[c].lo) && isfinite(N->bos[c].hi);
}

int pv_mlp_layer(PvNet *N, int li) {
    const TfModel *m = N->m;
    const TfLayer *ly = &m->layers[li];
    if (ly->act != TF_ACT_RELU) {
        pv_unproven(N, ly->line, li, "layer %d (%s): not proven: a %s MLP (only ReLU is)", li,
                    ly->name, tf_activation_names[ly->act]);
        return 0;
    }
    Mlp L = {m->tensors[ly->fc1_weight].data, ly->fc1_bias >= 0 ? m->tensors[ly->fc1_bias].data : NULL,
             m->tensors[ly->fc2_weight].data, ly->fc2_bias >= 0 ? m->tensors[ly->fc2_bias].data : NULL,
             m->d_model, ly->d_hidden};
    int d = m->d_model;
    unsigned char *reads = malloc((size_t)d), *writes = malloc((size_t)d);
    TfIv *x = calloc((size_t)d, sizeof *x), *h = calloc((size_t)L.F, sizeof *h);
    int *cleared = malloc(((size_t)L.F / 2 + 1) * sizeof *cleared), n_cleared = 0;
    int *unit_col = malloc(((size_t)L.F + 1) * sizeof *unit_col);
    int rc = -1;
    if (reads && writes && x && h && cleared && unit_col) {
        model_mlp_clears(m, ly, unit_col);
        // The bias: a constant added to the columns it names.
        PvCol bias = {0};
        rc = 0;
        for (int c = 0; c < d && L.b2 && rc == 0; c++) {
            if (L.b2[c] == 0) continue;
            rc = pv_col_set(&bias, 0, 1);
            if (rc == 0) bias.v[0] = iv_pt(L.b2[c]);
            if (rc == 0) rc = pv_col_add(N, &N->col[c], &bias);
        }
        pv_col_free(&bias);
        int np = ly->n_parts ? ly->n_parts : 1;
        for (int p = 0; p < np && rc == 0 && !N->unproven; p++) {
            int f = ly->n_parts ? ly->parts[p].first : 0;
            int n = ly->n_parts ? ly->parts[p].count : L.F;
            int *cols = cleared + n_cleared, all_finite = 1;
            if (clear_part(unit_col, f, n, cols)) {
                for (int k = 0; k < n / 2; k++) all_finite &= col_finite(N, cols[k]);
                if (all_finite) {
                    n_cleared += n / 2; // the units' exact result, set after the others
                    continue;
                }
            }
            rc = part(N, &L, li, f, n, reads, x);
        }
        if (rc == 0) bos_row(N, &L, h, reads);
        for (int k = 0; k < n_cleared && rc == 0; k++) {
            int c = cleared[k];
            rc = pv_col_set(&N->col[c], 0, 1);
            if (rc == 0) N->col[c].v[0] = N->bos[c] = iv_pt(0);
        }
        if (rc == 0 && n_cleared)
            pv_line(N->P, "layer %d: %d column%s cleared (ReLU(x) and ReLU(-x) subtracted: exactly 0)",
                    li, n_cleared, n_cleared == 1 ? "" : "s");
    }
    free(cleared), free(unit_col);
    free(reads);
    free(writes);
    free(x);
    free(h);
    return rc;
}
