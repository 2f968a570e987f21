/* prove_attn.c: an attention head against its Aggregate or Count.
 *
 * For each query scenario (the base variables the query columns and the
 * selection's query side depend on, with the index) and each key class
 * (likewise for the key and value columns, the selection's key side and
 * the value register), the score is an interval; the selection, evaluated
 * from the source, says which classes are selected. Keys are the positions
 * 1..index (causal) or 1..maxlen-1, each of the class of its values, and
 * the BOS. For every number n of selected keys and m <= maxlen - 1 - n of
 * others, the head's output is a weighted mean: with E the exponentiated
 * score intervals and u the value (after the output projection) intervals,
 *   out in (n E_sel u_sel + E_bos u_bos + [0, m] E_oth u_oth) / (same weights)
 * (Count: a table over the count n), or within a proven distance of the
 * mean of the selected keys' values (mean Aggregate: affine in the mean;
 * copy: the one value, as the run-time check requires where the source does
 * not guarantee it). The engine's float32: scores widened by gamma_D, exp by
 * 3e-7 relative (runtime/engine/exp_vec.h: 2 ulp of expf), the softmax sum
 * and the weighted sum by gamma_(maxlen+1), the output projection by
 * gamma_(dv+1).
 */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prove_internal.h"

#define PV_EXP_REL 3e-7

typedef struct Head {
    PvNet *N;
    const PvOp *o;
    int li, h, D, DV, d, nw, n_out;
    float scale;
    const float *wq, *wk, *wv, *wo, *bq, *bk, *bv;
    unsigned char *rq, *rk;
    PvDeps dq, dk;
    int *wcol;    /* nw written columns */
    double *wmag; /* per written column: sum_j |Wo[c,j]| max|v_j|, for the rounding */
    long nk;
    TfIv *kv, *uv; /* per class: D key, nw values */
    int *kidx, *kval, *kdead;
    TfVal *kcur;   /* per class: every register's value */
    unsigned char *knone;
    TfIv *kb, *ub; /* the BOS key */
    ExprReads R;   /* the registers the selection reads */
    double nq_seen; /* distinct query scenarios so far */
    int *sp_start, *sp_col; /* the head's query, key and value rows, their nonzero entries */
    float *sp_w;
} Head;

/* Row r of the head (0..D-1 query, D..2D-1 key, then value) on x. */
static TfIv sdot(const Head *H, int r, const TfIv *x, float bias) {
    TfIv s = iv_pt(bias);
    double mag = fabs(bias);
    int a = H->sp_start[r], b = H->sp_start[r + 1];
    for (int e = a; e < b; e++) {
        s = iv_add(s, iv_scale(x[H->sp_col[e]], H->sp_w[e]));
        mag += fabs(H->sp_w[e]) * iv_mag(x[H->sp_col[e]]);
    }
    return iv_widen(s, iv_gamma(b - a + 1) * mag);
}

static const float *head_row(const Head *H, int r) {
    if (r < H->D) return H->wq + (size_t)(H->h * H->D + r) * H->d;
    if (r < 2 * H->D) return H->wk + (size_t)(H->h * H->D + r - H->D) * H->d;
    return H->wv + (size_t)(H->h * H->DV + r - 2 * H->D) * H->d;
}

static int sparse_rows(Head *H) {
    int rows = 2 * H->D + H->DV;
    long nnz = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < H->d; c++) nnz += head_row(H, r)[c] != 0;
    H->sp_start = malloc(((size_t)rows + 1) * sizeof(int));
    H->sp_col = malloc(((size_t)nnz + 1) * sizeof(int));
    H->sp_w = malloc(((size_t)nnz + 1) * sizeof(float));
    if (!H->sp_start || !H->sp_col || !H->sp_w) return -1;
    int k = 0;
    for (int r = 0; r < rows; r++) {
        H->sp_start[r] = k;
        const float *w = head_row(H, r);
        for (int c = 0; c < H->d; c++)
            if (w[c] != 0) H->sp_col[k] = c, H->sp_w[k++] = w[c];
    }
    H->sp_start[rows] = k;
    return 0;
}

/* A set of byte strings of one length (scenarios that look alike to a head:
 * one is enough). */
typedef struct SigSet {
    size_t len, cap, n;
    uint64_t *h;
    unsigned char *store; /* cap strings */
    long *slot;           /* 2 cap: index into store, -1 */
} SigSet;

static uint64_t fnv(const unsigned char *b, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int sig_init(SigSet *T, size_t len, size_t cap) {
    T->len = len, T->cap = cap, T->n = 0;
    T->h = malloc(cap * sizeof *T->h);
    T->store = malloc(cap * len + 1);
    T->slot = malloc(2 * cap * sizeof *T->slot);
    if (!T->h || !T->store || !T->slot) return -1;
    for (size_t i = 0; i < 2 * cap; i++) T->slot[i] = -1;
    return 0;
}

static void sig_free(SigSet *T) { free(T->h), free(T->store), free(T->slot); }

/* 1 when b is new (added), 0 when seen before. */
static int sig_add(SigSet *T, const unsigned char *b) {
    uint64_t h = fnv(b, T->len);
    size_t i = (size_t)(h % (2 * T->cap));
    for (; T->slot[i] >= 0; i = (i + 1) % (2 * T->cap)) {
        long k = T->slot[i];
        if (T->h[k] == h && memcmp(T->store + (size_t)k * T->len, b, T->len) == 0) return 0;
    }
    if (T->n == T->cap) return 1; // full: treat as new (no saving, still sound)
    T->slot[i] = (long)T->n;
    T->h[T->n] = h;
    memcpy(T->store + T->n * T->len, b, T->len);
    T->n++;
    return 1;
}

/* The bytes of a scenario: its vector (key and values, or query), index,
 * and the values of the registers rs[0..nr) (with their none flags). */
static size_t sig_make(unsigned char *b, const TfIv *v, int nv, int idx, int val, const int *rs, int nr,
                       const TfVal *cur, const unsigned char *none) {
    size_t k = 0;
    memset(b, 0, (size_t)nv * sizeof *v + 2 * sizeof(int) + (size_t)nr * 13);
    memcpy(b + k, v, (size_t)nv * sizeof *v), k += (size_t)nv * sizeof *v;
    memcpy(b + k, &idx, sizeof idx), k += sizeof idx;
    memcpy(b + k, &val, sizeof val), k += sizeof val;
    for (int i = 0; i < nr; i++) {
        TfVal x = none[rs[i]] ? (TfVal){TF_VAL_INT, 0} : cur[rs[i]];
        int kind = (int)x.kind;
        memcpy(b + k, &kind, sizeof kind), k += sizeof kind;
        memcpy(b + k, &x.x, sizeof x.x), k += sizeof x.x;
        b[k++] = none[rs[i]];
    }
    return k;
}

static TfIv nan_iv(void) { return (TfIv){NAN, NAN}; }

/* Engine exp of a score interval, relative to ref, enclosing its error. */
static TfIv eng_exp(TfIv s, double ref) {
    TfIv x = iv_sub(s, iv_pt(ref));
    x = iv_widen(x, TF_F32_U * iv_mag(x)); // s - ref rounds relative to itself
    TfIv e = iv_exp(x);
    e.lo = x.lo < -87 ? 0 : e.lo * (1 - PV_EXP_REL);
    e.hi = fmax(e.hi * (1 + PV_EXP_REL), 1.7e-38);
    return e;
}

static TfIv score(const Head *H, const TfIv *q, const TfIv *k) {
    TfIv s = iv_pt(0);
    double mag = 0;
    for (int j = 0; j < H->D; j++) {
        s = iv_add(s, iv_mul(q[j], k[j]));
        mag += iv_mag(q[j]) * iv_mag(k[j]);
    }
    s = iv_widen(s, iv_gamma(H->D) * mag);
    s = iv_scale(s, H->scale);
    return iv_widen(s, TF_F32_U * iv_mag(s));
}

/* Key, and value after the output projection, of a row x. */
static void key_value(const Head *H, const TfIv *x, TfIv *k, TfIv *u,
                      TfIv *v) {
    for (int j = 0; j < H->D; j++)
        k[j] = sdot(H, H->D + j, x, H->bk ? H->bk[H->h * H->D + j] : 0);
    for (int j = 0; j < H->DV; j++)
        v[j] = sdot(H, 2 * H->D + j, x, H->bv ? H->bv[H->h * H->DV + j] : 0);
    for (int w = 0; w < H->nw; w++) {
        int c = H->wcol[w];
        if (!H->wo) {
            u[w] = v[c - H->h * H->DV];
            H->wmag[w] = fmax(H->wmag[w], iv_mag(u[w]));
            continue;
        }
        TfIv s = iv_pt(0);
        double mag = 0;
        for (int j = 0; j < H->DV; j++) {
            float wo = H->wo[(size_t)c * H->n_out + H->h * H->DV + j];
            s = iv_add(s, iv_scale(v[j], wo));
            mag += fabs(wo) * iv_mag(v[j]);
        }
        u[w] = s;
        if (!isnan(mag)) H->wmag[w] = fmax(H->wmag[w], mag);
    }
}

static int any_nan(const TfIv *x, const unsigned char *reads, int d) {
    for (int c = 0; c < d; c++)
        if (reads[c] && isnan(x[c].lo)) return 1;
    return 0;
}

/* Key classes that look alike to the head (key, value, index, the
 * selection's key registers, the copied value) are one: keeps the first. */
static int dedupe_keys(Head *H) {
    int nr = H->N->S->ir->n_regs, nv = H->D + H->nw;
    size_t len = (size_t)nv * sizeof(TfIv) + 2 * sizeof(int) + (size_t)H->R.nk * 13;
    SigSet T;
    unsigned char *b = malloc(len + 64);
    TfIv *v = malloc(((size_t)nv + 1) * sizeof *v);
    if (!b || !v || sig_init(&T, len, (size_t)H->nk + 1) < 0) {
        free(b), free(v);
        sig_free(&T);
        return -1;
    }
    long n = 0;
    for (long i = 0; i < H->nk; i++) {
        if (H->kdead[i]) continue;
        memcpy(v, H->kv + i * H->D, (size_t)H->D * sizeof *v);
        memcpy(v + H->D, H->uv + i * H->nw, (size_t)H->nw * sizeof *v);
        sig_make(b, v, nv, H->kidx[i], H->kval[i], H->R.kregs, H->R.nk, H->kcur + i * nr, H->knone + i * nr);
        if (!sig_add(&T, b)) continue;
        if (n != i) {
            memcpy(H->kv + n * H->D, H->kv + i * H->D, (size_t)H->D * sizeof *v);
            memcpy(H->uv + n * H->nw, H->uv + i * H->nw, (size_t)H->nw * sizeof *v);
            memcpy(H->kcur + n * nr, H->kcur + i * nr, (size_t)nr * sizeof *H->kcur);
            memcpy(H->knone + n * nr, H->knone + i * nr, (size_t)nr);
            H->kidx[n] = H->kidx[i], H->kval[n] = H->kval[i], H->kdead[n] = 0;
        }
        n++;
    }
    H->nk = n;
    free(b), free(v);
    sig_free(&T);
    return 0;
}

/* Every key class: its key, its projected value, its semantics. */
static int key_classes(Head *H, TfIv *x) {
    PvNet *N = H->N;
    const PvSem *S = N->S;
    int nr = S->ir->n_regs;
    H->kv = malloc((size_t)H->nk * H->D * sizeof *H->kv);
    H->uv = malloc((size_t)H->nk * (H->nw + 1) * sizeof *H->uv);
    H->kidx = malloc((size_t)H->nk * sizeof(int));
    H->kval = malloc((size_t)H->nk * sizeof(int));
    H->kdead = calloc((size_t)H->nk, sizeof(int));
    H->kcur = malloc((size_t)H->nk * nr * sizeof *H->kcur);
    H->knone = malloc((size_t)H->nk * nr);
    TfIv *v = malloc(((size_t)H->DV + 1) * sizeof *v);
    if (!H->kv || !H->uv || !H->kidx || !H->kval || !H->kdead || !H->kcur || !H->knone || !v) {
        free(v);
        return -1;
    }
    int assign[TF_PROOF_MAX_BASE];
    for (long i = 0; i < H->nk; i++) {
        for (int b = 0; b < S->n_base; b++) assign[b] = -1;
        pv_deps_decode(S, H->dk, i, assign);
        for (int c = 0; c < H->d; c++)
            if (H->rk[c]) x[c] = pv_col_get(N, &N->col[c], assign);
        H->kdead[i] = any_nan(x, H->rk, H->d);
        key_value(H, x, H->kv + i * H->D, H->uv + i * H->nw, v);
        pv_eval_regs(S, assign, H->kcur + i * nr, H->knone + i * nr);
        H->kidx[i] = (int)S->base[S->b_indices].vals[assign[S->b_indices]].x;
        H->kval[i] = -1;
        if (H->kdead[i]) continue;
        if (H->o->kind == TF_OP_AGGREGATE && !H->knone[i * nr + H->o->vreg]) {
            const PvBase *B = &S->base[H->o->base];
            TfVal val = H->kcur[i * nr + H->o->vreg];
            for (int a = 0; a < B->n - B->has_none; a++)
                if (val_cmp(B->vals[a], val) == 0 ||
                    (val_is_num(val) && fabs(B->vals[a].x - val.x) <= 1e-9 * (1 + fabs(val.x))))
                    H->kval[i] = a;
        }
    }
    free(v);
    return dedupe_keys(H);
}


static void head_free(Head *H) {
    free(H->sp_start), free(H->sp_col), free(H->sp_w);
    free(H->rq);
    free(H->rk);
    free(H->wcol);
    free(H->wmag);
    free(H->kv);
    free(H->uv);
    free(H->kidx);
    free(H->kval);
    free(H->kdead);
    free(H->kcur);
    free(H->knone);
    free(H->kb);
    free(H->ub);
}

/* What one query scenario sees: the BOS and the selected and other classes. */
typedef struct Seen {
    int avail, has_s, has_u;
    TfIv eb, es, eu;
    TfIv *ub, *vs, *vu; /* nw each */
} Seen;

static TfIv mix(TfIv n, TfIv es, TfIv vs, TfIv eb, TfIv vb, TfIv m, TfIv eu, TfIv vu) {
    TfIv num = iv_add(iv_mul(n, iv_mul(es, vs)), iv_mul(eb, vb));
    TfIv den = iv_add(iv_mul(n, es), eb);
    if (m.hi > 0) {
        num = iv_add(num, iv_mul(m, iv_mul(eu, vu)));
        den = iv_add(den, iv_mul(m, eu));
    }
    return iv_div(num, den);
}

static double slack(const Head *H, int w) {
    double g = PV_EXP_REL + 2 * iv_gamma(H->N->maxlen + 1) + 2 * TF_F32_U + iv_gamma(H->DV + 1);
    return g * H->wmag[w];
}

static void hull_into(TfIv *t, TfIv x) {
    if (isnan(t->lo)) *t = x;
    else *t = iv_hull(*t, x);
}

/* Count: the output for every count n this query can see, into tab[w * nB + n's index]. */
static void count_mix(const Head *H, const Seen *V, int qidx, TfIv *tab) {
    const PvBase *B = &H->N->S->base[H->o->base];
    int causal = H->o->causal;
    for (int n = 0; n <= V->avail; n++) {
        if (n > 0 && !V->has_s) continue;
        int m = V->avail - n;
        if (!V->has_u) {
            if (causal ? n != qidx : n < qidx) continue;
            m = 0;
        }
        int a = -1;
        for (int k = 0; k < B->n; k++)
            if (B->vals[k].x == n) a = k;
        if (a < 0) continue;
        for (int w = 0; w < H->nw; w++) {
            TfIv out = mix(iv_pt(n), V->es, V->vs[w], V->eb, V->ub[w], (TfIv){0, m}, V->eu, V->vu[w]);
            hull_into(&tab[(size_t)w * B->n + a], iv_widen(out, slack(H, w)));
        }
    }
}

/* Nothing selected: the BOS's value (the default), leaked into by the others. */
static void none_mix(const Head *H, const Seen *V, int a, TfIv *tab, int nB) {
    if (a < 0) return;
    for (int w = 0; w < H->nw; w++) {
        TfIv out = mix(iv_pt(0), V->es, V->vs[w], V->eb, V->ub[w], (TfIv){0, V->has_u ? V->avail : 0},
                       V->eu, V->vu[w]);
        hull_into(&tab[(size_t)w * nB + a], iv_widen(out, slack(H, w)));
    }
}

/* The index of the value the Aggregate gives when nothing is selected. */
static int default_index(const Head *H) {
    const PvBase *B = &H->N->S->base[H->o->base];
    if (B->has_none) return B->n - 1;
    TfVal d = H->o->has_default ? H->o->dflt : val_num(0, 1);
    for (int a = 0; a < B->n; a++)
        if (val_cmp(B->vals[a], d) == 0 || (val_is_num(d) && B->vals[a].x == d.x)) return a;
    return -1;
}

/* Per query: the classes' exponentiated scores and selection. */
typedef struct Work {
    TfIv *e;             /* nk */
    signed char *sel;    /* nk: 1 selected, 0 other, -1 absent */
    TfIv *esa, *A;       /* per value: selected weight, values (nw each) */
    int *firstidx;       /* per value: the index of its first selected key, -2 none, -1 several */
    int multi;           /* some query may select keys of different values at different positions */
    double *err;         /* mean: per written column, the largest distance from the mean */
    double *alpha, *beta, *resid;
} Work;

/* Copy: per value a the selected keys hold, the output when they all hold a. */
static void copy_mix(const Head *H, const Seen *V, Work *W, TfIv *tab) {
    const PvBase *B = &H->N->S->base[H->o->base];
    int nB = B->n, nw = H->nw, nvals = 0, multi_pos = 0, pos = -2;
    for (int a = 0; a < nB; a++) W->firstidx[a] = -2;
    for (long i = 0; i < H->nk; i++) {
        int a = H->kval[i];
        if (W->sel[i] != 1 || a < 0) continue;
        if (pos == -2) pos = H->kidx[i];
        else if (pos != H->kidx[i]) multi_pos = 1;
        if (W->firstidx[a] == -2) {
            nvals++;
            W->firstidx[a] = 0;
            W->esa[a] = W->e[i];
            for (int w = 0; w < nw; w++) W->A[(size_t)a * nw + w] = H->uv[i * nw + w];
        } else {
            W->esa[a] = iv_hull(W->esa[a], W->e[i]);
            for (int w = 0; w < nw; w++)
                W->A[(size_t)a * nw + w] = iv_hull(W->A[(size_t)a * nw + w], H->uv[i * nw + w]);
        }
    }
    if (nvals > 1 && multi_pos) W->multi = 1;
    double oth = V->eb.hi + (V->has_u ? V->avail * V->eu.hi : 0);
    for (int a = 0; a < nB; a++) {
        if (W->firstidx[a] == -2) continue;
        double lam = W->esa[a].lo > 0 ? oth / W->esa[a].lo : INFINITY;
        for (int w = 0; w < nw; w++) {
            TfIv A = W->A[(size_t)a * nw + w], O = V->ub[w];
            if (V->has_u) O = iv_hull(O, V->vu[w]);
            TfIv out = {A.lo - lam * fmax(0, A.lo - O.lo), A.hi + lam * fmax(0, O.hi - A.hi)};
            if (lam == INFINITY) out = (TfIv){-INFINITY, INFINITY};
            hull_into(&tab[(size_t)w * nB + a], iv_widen(out, slack(H, w)));
        }
    }
}

/* Mean: how far the output can be from alpha * mean + beta. */
static void mean_mix(const Head *H, const Seen *V, Work *W) {
    if (!V->has_s) return;
    double rho = V->es.lo > 0 ? V->es.hi / V->es.lo : INFINITY;
    double lam = V->es.lo > 0 ? (V->eb.hi + (V->has_u ? V->avail * V->eu.hi : 0)) / V->es.lo : INFINITY;
    for (int w = 0; w < H->nw; w++) {
        double smax = iv_mag(V->vs[w]), omax = fmax(iv_mag(V->ub[w]), V->has_u ? iv_mag(V->vu[w]) : 0);
        double e = (rho - 1) * smax + W->resid[w] + lam * (omax + smax) + slack(H, w);
        W->err[w] = fmax(W->err[w], e);
    }
}

/* The mean's values as an affine function of the value register's. */
static void mean_fit(const Head *H, Work *W) {
    const PvBase *B = &H->N->S->base[H->o->base];
    long lo = -1, hi = -1;
    for (long i = 0; i < H->nk; i++) {
        if (H->kdead[i] || H->kval[i] < 0) continue;
        double x = B->vals[H->kval[i]].x;
        if (lo < 0 || x < B->vals[H->kval[lo]].x) lo = i;
        if (hi < 0 || x > B->vals[H->kval[hi]].x) hi = i;
    }
    for (int w = 0; w < H->nw; w++) {
        W->alpha[w] = W->beta[w] = W->resid[w] = 0;
        W->err[w] = 0;
        if (lo < 0) continue;
        double x0 = B->vals[H->kval[lo]].x, x1 = B->vals[H->kval[hi]].x;
        double y0 = iv_mid(H->uv[lo * H->nw + w]), y1 = iv_mid(H->uv[hi * H->nw + w]);
        W->alpha[w] = x1 > x0 ? (y1 - y0) / (x1 - x0) : 0;
        W->beta[w] = y0 - W->alpha[w] * x0;
        for (long i = 0; i < H->nk; i++) {
            if (H->kdead[i] || H->kval[i] < 0) continue;
            double t = W->alpha[w] * B->vals[H->kval[i]].x + W->beta[w];
            TfIv u = H->uv[i * H->nw + w];
            double r = fmax(fabs(u.lo - t), fabs(u.hi - t)) * (1 + 1e-12) + 1e-15;
            W->resid[w] = fmax(W->resid[w], r);
        }
    }
}

static int any_none(const unsigned char *none, const int *regs, int n) {
    for (int i = 0; i < n; i++)
        if (none[regs[i]]) return 1;
    return 0;
}

static void query_scenario(Head *H, Work *W, Seen *V, const TfIv *q, const TfVal *qcur,
                           const unsigned char *qnone, int qidx, TfIv *tab, double *gap) {
    const PvSem *S = H->N->S;
    int nr = S->ir->n_regs, qnone_any = any_none(qnone, H->R.qregs, H->R.nq);
    V->avail = H->o->causal ? qidx : H->N->maxlen - 1;
    TfIv sb = score(H, q, H->kb);
    double ref = sb.hi, smin_sel = INFINITY, smax_oth = -INFINITY;
    for (long i = 0; i < H->nk; i++) {
        W->sel[i] = -1;
        if (H->kdead[i] || (H->o->causal && H->kidx[i] > qidx)) continue;
        W->e[i] = score(H, q, H->kv + i * H->D);
        ref = fmax(ref, W->e[i].hi);
        W->sel[i] = !qnone_any && !any_none(H->knone + i * nr, H->R.kregs, H->R.nk) &&
                    pv_select(S, H->o, H->kcur + i * nr, qcur) == 1; // no value: not selected
        if (W->sel[i]) smin_sel = fmin(smin_sel, W->e[i].lo);
        else smax_oth = fmax(smax_oth, W->e[i].hi);
    }
    if (smin_sel < INFINITY && smax_oth > -INFINITY) *gap = fmin(*gap, smin_sel - smax_oth);
    V->eb = eng_exp(sb, ref);
    V->has_s = V->has_u = 0;
    for (long i = 0; i < H->nk; i++) {
        if (W->sel[i] < 0) continue;
        W->e[i] = eng_exp(W->e[i], ref);
        int s = W->sel[i];
        int *has = s ? &V->has_s : &V->has_u;
        TfIv *e = s ? &V->es : &V->eu, *vv = s ? V->vs : V->vu;
        for (int w = 0; w < H->nw; w++)
            vv[w] = *has ? iv_hull(vv[w], H->uv[i * H->nw + w]) : H->uv[i * H->nw + w];
        *e = *has ? iv_hull(*e, W->e[i]) : W->e[i];
        *has = 1;
    }
    int nB = S->base[H->o->base].n;
    if (H->o->kind == TF_OP_COUNT_MATCHES) {
        count_mix(H, V, qidx, tab);
        return;
    }
    none_mix(H, V, default_index(H), tab, nB);
    if (H->N->S->ir->regs[H->o->dest].kind == TF_REG_SCALAR) mean_mix(H, V, W);
    else copy_mix(H, V, W, tab);
}

static int queries(Head *H, Work *W, TfIv *tab, TfIv *x, double *gap) {
    PvNet *N = H->N;
    const PvSem *S = N->S;
    int nr = S->ir->n_regs;
    long nq = pv_deps_size(S, H->dq, PV_TABLE_LIMIT);
    TfIv *q = malloc((size_t)H->D * sizeof *q), *buf = malloc((size_t)H->nw * 3 * sizeof *buf);
    TfVal *qcur = malloc((size_t)nr * sizeof *qcur);
    unsigned char *qnone = malloc((size_t)nr);
    if (!q || !buf || !qcur || !qnone) {
        free(q), free(buf), free(qcur), free(qnone);
        return -1;
    }
    Seen V = {.ub = H->ub, .vs = buf, .vu = buf + H->nw};
    int assign[TF_PROOF_MAX_BASE];
    SigSet T;
    size_t len = (size_t)H->D * sizeof(TfIv) + 2 * sizeof(int) + (size_t)H->R.nq * 13;
    unsigned char *sig = malloc(len + 64);
    if (!sig || sig_init(&T, len, (size_t)(nq < 1000000 ? nq : 1000000) + 1) < 0) {
        free(q), free(buf), free(qcur), free(qnone), free(sig);
        sig_free(&T);
        return -1;
    }
    int too_many = 0;
    for (long i = 0; i < nq; i++) {
        for (int b = 0; b < S->n_base; b++) assign[b] = -1;
        pv_deps_decode(S, H->dq, i, assign);
        for (int c = 0; c < H->d; c++)
            if (H->rq[c]) x[c] = pv_col_get(N, &N->col[c], assign);
        if (any_nan(x, H->rq, H->d)) continue;
        for (int j = 0; j < H->D; j++)
            q[j] = sdot(H, j, x, H->bq ? H->bq[H->h * H->D + j] : 0);
        pv_eval_regs(S, assign, qcur, qnone);
        int qidx = (int)S->base[S->b_indices].vals[assign[S->b_indices]].x;
        sig_make(sig, q, H->D, qidx, 0, H->R.qregs, H->R.nq, qcur, qnone);
        if (!sig_add(&T, sig)) continue;
        if (++H->nq_seen * (double)H->nk > 5e8) {
            too_many = 1;
            break;
        }
        query_scenario(H, W, &V, q, qcur, qnone, qidx, tab, gap);
    }
    free(q), free(buf), free(qcur), free(qnone), free(sig);
    sig_free(&T);
    return too_many;
}

/* The BOS row's output: causal, the BOS alone; else mixed with any key. */
static void bos_out(Head *H, TfIv *x, TfIv *out) {
    unsigned char *all = malloc((size_t)H->d);
    TfIv *q = malloc((size_t)H->D * sizeof *q);
    if (!all || !q) {
        for (int w = 0; w < H->nw; w++) out[w] = (TfIv){-INFINITY, INFINITY};
        free(all), free(q);
        return;
    }
    memset(all, 1, (size_t)H->d);
    for (int j = 0; j < H->D; j++)
        q[j] = sdot(H, j, H->N->bos, H->bq ? H->bq[H->h * H->D + j] : 0);
    TfIv sb = score(H, q, H->kb), ea = {0, 0};
    double ref = sb.hi;
    int any = 0;
    for (long i = 0; i < H->nk && !H->o->causal; i++)
        if (!H->kdead[i]) ref = fmax(ref, score(H, q, H->kv + i * H->D).hi);
    for (long i = 0; i < H->nk && !H->o->causal; i++) {
        if (H->kdead[i]) continue;
        TfIv e = eng_exp(score(H, q, H->kv + i * H->D), ref);
        ea = any ? iv_hull(ea, e) : e;
        for (int w = 0; w < H->nw; w++)
            x[w] = any ? iv_hull(x[w], H->uv[i * H->nw + w]) : H->uv[i * H->nw + w];
        any = 1;
    }
    TfIv eb = eng_exp(sb, ref);
    for (int w = 0; w < H->nw; w++) {
        TfIv o = any ? mix(iv_pt(0), ea, x[w], eb, H->ub[w], (TfIv){0, H->N->maxlen - 1}, ea, x[w])
                     : H->ub[w];
        out[w] = iv_widen(o, slack(H, w));
    }
    free(all), free(q);
}

/* The head's reads, key classes and written columns. */
static int head_setup(Head *H, TfIv *x) {
    PvNet *N = H->N;
    const PvSem *S = N->S;
    int d = H->d;
    H->rq = malloc((size_t)d);
    H->rk = malloc((size_t)d);
    unsigned char *rv = malloc((size_t)d);
    H->wcol = malloc(((size_t)d + 1) * sizeof(int));
    H->wmag = calloc((size_t)d + 1, sizeof(double));
    H->kb = malloc(((size_t)H->D + 1) * sizeof(TfIv));
    H->ub = malloc(((size_t)d + 1) * sizeof(TfIv));
    TfIv *v = malloc(((size_t)H->DV + 1) * sizeof *v);
    if (!H->rq || !H->rk || !rv || !H->wcol || !H->wmag || !H->kb || !H->ub || !v) {
        free(rv), free(v);
        return -1;
    }
    ExprReads R = {0};
    TfDiag quiet;
    diag_init(&quiet, "", "", 0, S->sink);
    expr_reads(S->ir, &quiet, H->o->expr, 1, &R);
    H->R = R;
    if (sparse_rows(H) < 0) {
        free(rv), free(v);
        return -1;
    }
    H->dq = pv_read_cols(N, H->wq, H->h * H->D, (H->h + 1) * H->D, H->rq) | (PvDeps)1 << S->b_indices;
    H->dk = pv_read_cols(N, H->wk, H->h * H->D, (H->h + 1) * H->D, H->rk) | (PvDeps)1 << S->b_indices;
    H->dk |= pv_read_cols(N, H->wv, H->h * H->DV, (H->h + 1) * H->DV, rv);
    for (int c = 0; c < d; c++) H->rk[c] |= rv[c];
    for (int i = 0; i < R.nq; i++) H->dq |= S->deps[R.qregs[i]];
    for (int i = 0; i < R.nk; i++) H->dk |= S->deps[R.kregs[i]];
    if (H->o->vreg >= 0) H->dk |= S->deps[H->o->vreg];
    H->nw = 0;
    for (int c = 0; c < d; c++) {
        int w = 0;
        for (int j = 0; j < H->DV; j++)
            w |= H->wo ? H->wo[(size_t)c * H->n_out + H->h * H->DV + j] != 0 : c == H->h * H->DV + j;
        if (w) H->wcol[H->nw++] = c;
    }
    memset(rv, 1, (size_t)d);
    key_value(H, N->bos, H->kb, H->ub, v);
    free(rv), free(v);
    H->nk = pv_deps_size(S, H->dk, PV_TABLE_LIMIT);
    long nq = pv_deps_size(S, H->dq, PV_TABLE_LIMIT);
    if (H->nk < 0 || nq < 0) return 1;
    return key_classes(H, x);
}

static int has_check(const PvNet *N, int reg) {
    for (int i = 0; i < N->m->n_checks; i++)
        if (N->m->checks[i].reg == N->reg_model[reg]) return 1;
    return 0;
}

/* The head's output per value of its op's result, into stage (over {B}). */
static int contributions(Head *H, Work *W, TfIv *tab, PvCol *stage) {
    PvNet *N = H->N;
    const PvBase *B = &N->S->base[H->o->base];
    int numeric = H->o->kind == TF_OP_AGGREGATE && N->S->ir->regs[H->o->dest].kind == TF_REG_SCALAR;
    PvCol c = {0};
    int rc = 0;
    for (int w = 0; w < H->nw && rc == 0; w++) {
        rc = pv_col_set(&c, (PvDeps)1 << H->o->base, B->n);
        for (int a = 0; a < B->n && rc == 0; a++) {
            TfIv t = tab[(size_t)w * B->n + a];
            if (numeric) {
                double y = W->alpha[w] * B->vals[a].x + W->beta[w];
                TfIv m = iv_widen(iv_pt(y), W->err[w] + 1e-12 * fabs(y));
                t = isnan(t.lo) ? m : iv_hull(t, m);
            }
            c.v[a] = t;
        }
        if (rc == 0) rc = pv_col_add(N, &stage[H->wcol[w]], &c);
    }
    pv_col_free(&c);
    return rc;
}

static int head_run(PvNet *N, int li, int h, const PvOp *o, TfIv *x, PvCol *stage, TfIv *bos_add) {
    const TfModel *m = N->m;
    const TfLayer *ly = &m->layers[li];
    Head H = {.N = N, .o = o, .li = li, .h = h, .D = ly->d_head, .DV = ly->d_vhead, .d = m->d_model,
              .scale = ly->scale, .n_out = ly->n_heads * ly->d_vhead};
    H.wq = m->tensors[ly->query].data, H.wk = m->tensors[ly->key].data, H.wv = m->tensors[ly->value].data;
    H.wo = ly->output >= 0 ? m->tensors[ly->output].data : NULL;
    H.bq = ly->query_bias >= 0 ? m->tensors[ly->query_bias].data : NULL;
    H.bk = ly->key_bias >= 0 ? m->tensors[ly->key_bias].data : NULL;
    H.bv = ly->value_bias >= 0 ? m->tensors[ly->value_bias].data : NULL;
    int rc = head_setup(&H, x);
    if (rc == 1) {
        pv_unproven(N, o->stmt->loc.line, li, "layer %d head %d: not proven: more than 2^22 query or key combinations, or 5e8 pairs of distinct ones", li, h);
        head_free(&H);
        return 0;
    }
    int nB = N->S->base[o->base].n;
    Work W = {0};
    W.e = malloc((size_t)H.nk * sizeof *W.e + 1);
    W.sel = malloc((size_t)H.nk + 1);
    W.esa = malloc((size_t)nB * sizeof *W.esa);
    W.A = malloc((size_t)nB * (H.nw + 1) * sizeof *W.A);
    W.firstidx = malloc((size_t)nB * sizeof(int));
    W.err = calloc((size_t)H.nw + 1, sizeof(double));
    W.alpha = calloc((size_t)H.nw + 1, sizeof(double));
    W.beta = calloc((size_t)H.nw + 1, sizeof(double));
    W.resid = calloc((size_t)H.nw + 1, sizeof(double));
    TfIv *tab = malloc((size_t)nB * (H.nw + 1) * sizeof *tab);
    double gap = INFINITY;
    if (rc == 0 && (!W.e || !W.sel || !W.esa || !W.A || !W.firstidx || !W.err || !W.alpha || !W.beta || !W.resid || !tab)) rc = -1;
    if (rc == 0) {
        for (long i = 0; i < (long)nB * H.nw; i++) tab[i] = nan_iv();
        mean_fit(&H, &W);
        rc = queries(&H, &W, tab, x, &gap);
        if (rc == 1) {
            pv_unproven(N, o->stmt->loc.line, li, "layer %d head %d: not proven: more than 5e8 pairs of distinct query and key scenarios", li, h);
            rc = 0;
            W.multi = 0;
            gap = NAN;
        }
    }
    if (rc == 0) rc = contributions(&H, &W, tab, stage);
    if (rc == 0) {
        TfIv *out = malloc(((size_t)H.nw + 1) * sizeof *out), *tmp = malloc(((size_t)H.nw + 1) * sizeof *tmp);
        if (out && tmp) {
            bos_out(&H, tmp, out);
            for (int w = 0; w < H.nw; w++) bos_add[H.wcol[w]] = iv_add(bos_add[H.wcol[w]], out[w]);
        } else rc = -1;
        free(out), free(tmp);
    }
    const char *dest = N->S->ir->regs[o->dest].name;
    if (rc == 0 && W.multi && !has_check(N, o->dest))
        pv_fail(N, o->stmt->loc.line, li, NULL, 0, "line %d: %s -> %s (layer %d head %d): the selection may pick positions holding different values and the file has no run-time check of '%s'", o->stmt->loc.line, tf_ops[o->kind].name, dest, li, h, dest);
    if (rc == 0)
        pv_line(N->P, "line %d: %s -> %s: layer %d head %d: score gap %.3g (selected over others)%s",
                o->stmt->loc.line, tf_ops[o->kind].name, dest, li, h, gap,
                W.multi ? "; one value per selection: relies on the run-time check" : "");
    free(W.e), free(W.sel), free(W.esa), free(W.A), free(W.firstidx), free(W.err), free(W.alpha), free(W.beta), free(W.resid), free(tab);
    head_free(&H);
    return rc;
}

int pv_attn_layer(PvNet *N, int li) {
    const TfModel *m = N->m;
    const TfLayer *ly = &m->layers[li];
    int d = m->d_model, rc = 0;
    PvCol *stage = calloc((size_t)d, sizeof *stage);
    TfIv *bos_add = calloc((size_t)d, sizeof *bos_add), *x = calloc((size_t)d, sizeof *x);
    if (!stage || !bos_add || !x) rc = -1;
    for (int c = 0; c < d && rc == 0; c++) rc = pv_col_set(&stage[c], 0, 1);
    int np = ly->n_parts ? ly->n_parts : 1;
    for (int p = 0; p < np && rc == 0 && !N->failed && !N->unproven; p++) {
        int first = ly->n_parts ? ly->parts[p].first : 0;
        int count = ly->n_parts ? ly->parts[p].count : ly->n_heads;
        int line = ly->n_parts ? ly->parts[p].line : ly->line;
        int oi = pv_op_at_line(N->S, line);
        if (oi < 0) {
            pv_unproven(N, line, li, "layer %d: not proven: its heads %d..%d name no Aggregate or Count of the source (line %d)", li, first, first + count - 1, line);
            break;
        }
        for (int h = first; h < first + count && rc == 0; h++)
            rc = head_run(N, li, h, &N->S->ops[oi], x, stage, bos_add);
        if (count > 1) pv_unproven(N, line, li, "layer %d: not proven: an op on %d heads", li, count);
    }
    const float *bo = ly->output_bias >= 0 ? m->tensors[ly->output_bias].data : NULL;
    for (int c = 0; c < d && rc == 0; c++) {
        if (bo && bo[c] != 0) {
            for (long i = 0; i < stage[c].n; i++) stage[c].v[i] = iv_add(stage[c].v[i], iv_pt(bo[c]));
        }
        if (stage[c].deps || stage[c].v[0].lo != 0 || stage[c].v[0].hi != 0) {
            if (pv_col_add(N, &N->col[c], &stage[c]) < 0) rc = -1;
        }
        TfIv y = bo ? iv_add(bos_add[c], iv_pt(bo[c])) : bos_add[c];
        if (y.lo != 0 || y.hi != 0) {
            TfIv s = iv_add(N->bos[c], y);
            N->bos[c] = iv_widen(s, TF_F32_U * iv_mag(s));
        }
    }
    for (int c = 0; stage && c < d; c++) pv_col_free(&stage[c]);
    free(stage), free(bos_add), free(x);
    return rc;
}
