/* prove_col.c: residual columns as functions of base variables.
 *
 * A column's content at the positions after the BOS is an interval per
 * combination of the values of a few base variables (its deps), in mixed
 * radix over them (the lowest base variable fastest). A column no layer
 * writes depends on nothing; the embedding's on tokens and indices.
 */
#include <stdlib.h>
#include <string.h>

#include "prove_internal.h"

int pv_col_set(PvCol *c, PvDeps d, long n) {
    TfIv *v = calloc((size_t)n, sizeof *v);
    if (!v) return -1;
    free(c->v);
    c->v = v;
    c->deps = d;
    c->n = n;
    return 0;
}

void pv_col_free(PvCol *c) {
    free(c->v);
    memset(c, 0, sizeof *c);
}

TfIv pv_col_get(const PvNet *N, const PvCol *c, const int *assign) {
    return c->v[pv_deps_index(N->S, c->deps, assign)];
}

/* c += add, rounded to float32, over the union of their deps: an
 * odometer over the union's base variables (the lowest fastest, as
 * pv_deps_index) keeps both tables' indices; in place where c already
 * depends on every variable add does. */
int pv_col_add(PvNet *N, PvCol *c, const PvCol *add) {
    const PvSem *S = N->S;
    PvDeps d = c->deps | add->deps;
    long n = pv_deps_size(S, d, PV_TABLE_LIMIT);
    if (n < 0) return -1;
    TfIv *v = d == c->deps && c->n == n ? c->v : malloc((size_t)n * sizeof *v);
    if (!v) return -1;
    long radix[TF_PROOF_MAX_BASE], sc[TF_PROOF_MAX_BASE], sa[TF_PROOF_MAX_BASE], digit[TF_PROOF_MAX_BASE];
    long mc = 1, ma = 1;
    int nb = 0;
    for (int b = 0; b < S->n_base; b++) {
        long r = S->base[b].n, bc = c->deps >> b & 1 ? mc : 0, ba = add->deps >> b & 1 ? ma : 0;
        if (bc) mc *= r;
        if (ba) ma *= r;
        if (!(d >> b & 1)) continue;
        radix[nb] = r, sc[nb] = bc, sa[nb] = ba, digit[nb] = 0;
        nb++;
    }
    long ic = 0, ia = 0;
    for (long i = 0; i < n; i++) {
        TfIv s = iv_add(c->v[ic], add->v[ia]);
        v[i] = iv_widen(s, TF_F32_U * iv_mag(s)); // x + y rounded to float32
        for (int k = 0; k < nb; k++) {
            ic += sc[k], ia += sa[k];
            if (++digit[k] < radix[k]) break;
            ic -= sc[k] * radix[k], ia -= sa[k] * radix[k], digit[k] = 0;
        }
    }
    if (v != c->v) free(c->v);
    c->v = v;
    c->deps = d;
    c->n = n;
    return 0;
}

PvDeps pv_read_cols(const PvNet *N, const float *W, int r0, int r1, unsigned char *reads) {
    int d = N->m->d_model;
    PvDeps deps = 0;
    memset(reads, 0, (size_t)d);
    for (int r = r0; r < r1; r++)
        for (int c = 0; c < d; c++)
            if (W[(size_t)r * (size_t)d + (size_t)c] != 0) reads[c] = 1;
    for (int c = 0; c < d; c++)
        if (reads[c]) deps |= N->col[c].deps;
    return deps;
}
