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
 */
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
 * pre-activation, rw its float32 rounding; coef, cmag: d zeros. */
static TfIv affine_col(const Mlp *L, const Sparse *Sp, int k, int f, const TfIv *x, const TfIv *z,
                       const double *rw, double *coef, double *cmag) {
    TfIv nonlin = iv_pt(0);
    double cst = 0, slack = 0, mag = 0, pos = 0, neg = 0;
    int nt = 0, live = Sp->nnz[k]; // terms that may be nonzero: a ReLU at or below 0 adds an exact 0
    for (int e = Sp->c_start[k]; e < Sp->c_start[k + 1]; e++) {
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
            coef[Sp->u_col[j]] += w2 * Sp->u_w[j];
            cmag[Sp->u_col[j]] += fabs(w2 * Sp->u_w[j]);
        }
    }
    TfIv y = iv_add(nonlin, iv_pt(cst));
    double dbl = (nt + 2) * 2.3e-16; // the double sums of the composed coefficients
    slack += dbl * fabs(cst);
    for (int c = 0; c < L->d; c++) {
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

/* The units' pre-activations on x, and their float32 rounding. */
static void pre_act(const Mlp *L, const Sparse *Sp, int f, int n, const TfIv *x, TfIv *z, double *rw) {
    for (int u = 0; u < n; u++) {
        TfIv s = iv_pt(L->b1 ? L->b1[u + f] : 0);
        double mag = fabs(s.lo);
        int cnt = 1;
        for (int j = Sp->u_start[u]; j < Sp->u_start[u + 1]; j++) {
            s = iv_add(s, iv_scale(x[Sp->u_col[j]], Sp->u_w[j]));
            mag += fabs(Sp->u_w[j]) * iv_mag(x[Sp->u_col[j]]);
            cnt++;
        }
        rw[u] = iv_gamma(cnt) * mag;
        z[u] = iv_widen(s, rw[u]);
    }
}

/* One part: its contributions, added to the stream's columns. */
static int part(PvNet *N, const Mlp *L, int li, int f, int n, unsigned char *reads, TfIv *x) {
    PvSem *S = N->S;
    int d = L->d, rc = 0;
    PvDeps D = pv_read_cols(N, L->w1, f, f + n, reads);
    long size = pv_deps_size(S, D, PV_TABLE_LIMIT);
    if (size < 0) {
        pv_unproven(N, N->m->layers[li].line, li,
                    "layer %d: not proven: its units read more than 2^22 combinations", li);
        return 0;
    }
    Sparse Sp = {0};
    TfIv *z = malloc(((size_t)n + 1) * sizeof *z);
    double *rw = malloc(((size_t)n + 1) * sizeof *rw), *coef = calloc((size_t)d, sizeof *coef),
           *cmag = calloc((size_t)d, sizeof *cmag);
    PvCol *add = calloc((size_t)d + 1, sizeof *add);
    if (!z || !rw || !coef || !cmag || !add || sparse_make(L, f, n, &Sp) < 0) rc = -1;
    for (int k = 0; k < Sp.nw && rc == 0; k++) rc = pv_col_set(&add[k], D, size);
    int assign[TF_PROOF_MAX_BASE];
    for (long i = 0; i < size && rc == 0; i++) {
        pv_deps_decode(S, D, i, assign);
        int dead = 0; // an unreachable combination (prove_attn.c): stays unreachable
        for (int c = 0; c < d; c++)
            if (reads[c]) {
                x[c] = pv_col_get(N, &N->col[c], assign);
                dead |= isnan(x[c].lo);
            }
        if (!dead) pre_act(L, &Sp, f, n, x, z, rw);
        for (int k = 0; k < Sp.nw; k++)
            add[k].v[i] = dead ? (TfIv){NAN, NAN} : affine_col(L, &Sp, k, f, x, z, rw, coef, cmag);
    }
    for (int k = 0; k < Sp.nw && rc == 0; k++) {
        if (pv_col_add(N, &N->col[Sp.wcol[k]], &add[k]) < 0) {
            pv_unproven(N, N->m->layers[li].line, li,
                        "layer %d: not proven: a column over more than 2^22 combinations", li);
            break;
        }
    }
    for (int k = 0; add && k < Sp.nw; k++) pv_col_free(&add[k]);
    free(add), free(z), free(rw), free(coef), free(cmag);
    sparse_free(&Sp);
    return rc;
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
    int rc = -1;
    if (reads && writes && x && h) {
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
            rc = part(N, &L, li, f, n, reads, x);
        }
        if (rc == 0) bos_row(N, &L, h, reads);
    }
    free(reads);
    free(writes);
    free(x);
    free(h);
    return rc;
}
