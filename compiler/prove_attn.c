/* prove_attn.c: an attention head against its Aggregate or Count.
 *
 * For each query scenario (the base variables the query columns and the
 * selection's query side depend on, with the index) and each key class
 * (likewise for the key and value columns, the selection's key side and
 * the value register), the score is an interval; the selection, evaluated
 * from the source, says which classes are selected. Keys are the positions
 * 1..index (causal) or 1..maxlen-1, each of the class of its values, and
 * the BOS; the query's own position is one of them, so where the
 * selection's key registers depend only on what the query scenario
 * assigns, whether it selects itself is known (a Count that does counts at
 * least 1, an Aggregate that does never gives its default). For every number n of selected keys and m <= maxlen - 1 - n of
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
 *
 * How it scales: a key class is a combination of a key vector, a value and
 * the selection's key registers (each a table over only its own base
 * variables, rows alike made one) with an index, the tables that share no
 * base variable crossed rather than enumerated together (class_tuples);
 * query scenarios that
 * differ only in their index are one group. Per group the scores with
 * every key are one pass in midpoint-radius form (scores_all), then the
 * keys are swept in order of index: what a query at index t sees (causal:
 * the keys up to t) is a running hull, so each group costs one pass over
 * the keys whatever its number of indices. Groups are shared among threads
 * (a pthread loop of its own: tf_prove does not link the engine and its
 * pool); each thread's results are hulls, minima and maxima, merged the
 * same way, so the proof does not depend on the number of threads.
 */
#define _POSIX_C_SOURCE 200809L /* pthread */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
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
    unsigned char *rq, *rk, *rv; /* the columns the query, key and value read */
    PvDeps dq, dkk, dkv; /* query, key, value (a key class: key_classes) */
    int *wcol;    /* nw written columns */
    double *wmag; /* per written column: sum_j |Wo[c,j]| max|v_j|, for the rounding */
    long nk;
    TfIv *kv, *uv; /* per class: D key, nw values */
    int *kidx, *kval, *kdead;
    int anypos; /* bidirectional, the index in no other factor: a class stands for its
                   keys at every index (kidx 0), see class_tuples */
    TfVal *kcur;   /* per class: every register's value */
    unsigned char *knone;
    TfIv *kb, *ub; /* the BOS key */
    ExprReads R;   /* the registers the selection reads */
    /* After key_index: the keys in order of index, each with its kind (the
       selection's key registers: kid, one representative krep per kind),
       midpoint km, radius kr and |km| + kr of each key component, D rows of
       nk (component j of key i at [j * nk + i]); kend[t] the keys at
       indices <= t. */
    int *kid;
    long nkid, *krep, *kend;
    double *km, *kr, *ka;
    /* The query groups (query_groups): scenarios alike but for their index,
       gq (D each), gcur, gnone (n_regs each), gself (whether the query's own
       position is selected: 1, 0, -1 unknown); their indices gidx[gstart[g]
       .. gstart[g + 1]), ascending. */
    long ng, *gstart;
    int *gidx;
    TfIv *gq;
    TfVal *gcur;
    unsigned char *gnone;
    signed char *gself;
    int threads;
    double *alpha, *beta, *resid; /* mean: the fit of the values (mean_fit) */
    /* The base variable the table of outputs is over (tb, nB values: the
       op's own, a sum's count) and the value register's values a key's
       kval indexes (xv, nx: the mean's values, a sum's value register's). */
    int tb, nB, nx;
    const TfVal *xv;
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

/* A set of byte strings of one length, each with its index in order of
 * arrival (scenarios that look alike to a head: one is enough). */
typedef struct SigSet {
    size_t len, cap, n;
    uint64_t *h;
    unsigned char *store; /* n strings */
    long *slot;           /* 2 cap: index into store, -1 */
} SigSet;

static uint64_t fnv(const unsigned char *b, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int sig_grow(SigSet *T) {
    size_t cap = T->cap ? 2 * T->cap : 256;
    uint64_t *h = realloc(T->h, cap * sizeof *h);
    if (!h) return -1;
    T->h = h;
    unsigned char *st = realloc(T->store, cap * T->len + 1);
    if (!st) return -1;
    T->store = st;
    long *slot = malloc(2 * cap * sizeof *slot);
    if (!slot) return -1;
    for (size_t i = 0; i < 2 * cap; i++) slot[i] = -1;
    for (size_t k = 0; k < T->n; k++) {
        size_t i = (size_t)(T->h[k] % (2 * cap));
        while (slot[i] >= 0) i = (i + 1) % (2 * cap);
        slot[i] = (long)k;
    }
    free(T->slot);
    T->slot = slot;
    T->cap = cap;
    return 0;
}

static int sig_init(SigSet *T, size_t len) {
    memset(T, 0, sizeof *T);
    T->len = len;
    return sig_grow(T);
}

static void sig_free(SigSet *T) { free(T->h), free(T->store), free(T->slot); }

/* The index of b in T, added when new (*added 1); -1 out of memory. */
static long sig_add(SigSet *T, const unsigned char *b, int *added) {
    uint64_t h = fnv(b, T->len);
    size_t i = (size_t)(h % (2 * T->cap));
    *added = 0;
    for (; T->slot[i] >= 0; i = (i + 1) % (2 * T->cap)) {
        long k = T->slot[i];
        if (T->h[k] == h && memcmp(T->store + (size_t)k * T->len, b, T->len) == 0) return k;
    }
    if (T->n == T->cap) {
        if (sig_grow(T) < 0) return -1;
        for (i = (size_t)(h % (2 * T->cap)); T->slot[i] >= 0; i = (i + 1) % (2 * T->cap)) {}
    }
    T->slot[i] = (long)T->n;
    T->h[T->n] = h;
    memcpy(T->store + T->n * T->len, b, T->len);
    *added = 1;
    return (long)T->n++;
}

/* The bytes of a scenario: its vector (key and values, or query), index,
 * and the values of the registers rs[0..nr) (with their none flags). */
static size_t sig_make(unsigned char *b, const TfIv *v, int nv, int idx, int val, const int *rs, int nr,
                       const TfVal *cur, const unsigned char *none) {
    size_t k = 0;
    memset(b, 0, (size_t)nv * sizeof *v + 2 * sizeof(int) + (size_t)nr * 13);
    if (nv) memcpy(b + k, v, (size_t)nv * sizeof *v), k += (size_t)nv * sizeof *v;
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

/* The value after the output projection of a row x (v: DV scratch); the
 * largest term magnitude of each written column into wmag (its rounding). */
static void value_of(Head *H, const TfIv *x, TfIv *u, TfIv *v) {
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

/* Key, and value after the output projection, of a row x. */
static void key_value(Head *H, const TfIv *x, TfIv *k, TfIv *u, TfIv *v) {
    for (int j = 0; j < H->D; j++)
        k[j] = sdot(H, H->D + j, x, H->bk ? H->bk[H->h * H->D + j] : 0);
    value_of(H, x, u, v);
}

static int any_nan(const TfIv *x, const unsigned char *reads, int d) {
    for (int c = 0; c < d; c++)
        if (reads[c] && isnan(x[c].lo)) return 1;
    return 0;
}

/* The keys in order of index (a query at index t sees a prefix of them
 * when causal), their kinds for the selection, and the midpoint-radius
 * form of their key vectors (scores_all). 1 when some key's vector or
 * value is not finite (not proven), -1 out of memory. */
static int key_index(Head *H) {
    const PvSem *S = H->N->S;
    int nr = S->ir->n_regs, D = H->D, nw = H->nw, maxlen = H->N->maxlen;
    long nk = H->nk;
    for (long i = 0; i < nk * D; i++)
        if (!isfinite(H->kv[i].lo) || !isfinite(H->kv[i].hi)) return 1;
    for (long i = 0; i < nk * nw; i++)
        if (!isfinite(H->uv[i].lo) || !isfinite(H->uv[i].hi)) return 1;
    // Counting sort by index (stable).
    long *perm = malloc(((size_t)nk + 1) * sizeof *perm);
    H->kend = calloc((size_t)maxlen + 2, sizeof *H->kend);
    TfIv *kv = malloc(((size_t)nk * D + 1) * sizeof *kv), *uv = malloc(((size_t)nk * nw + 1) * sizeof *uv);
    int *kidx = malloc(((size_t)nk + 1) * sizeof *kidx), *kval = malloc(((size_t)nk + 1) * sizeof *kval);
    TfVal *kcur = malloc(((size_t)nk * nr + 1) * sizeof *kcur);
    unsigned char *knone = malloc((size_t)nk * nr + 1);
    if (!perm || !H->kend || !kv || !uv || !kidx || !kval || !kcur || !knone) {
        free(perm), free(kv), free(uv), free(kidx), free(kval), free(kcur), free(knone);
        return -1;
    }
    for (long i = 0; i < nk; i++) H->kend[H->kidx[i] + 1]++;
    for (int t = 1; t <= maxlen + 1; t++) H->kend[t] += H->kend[t - 1];
    for (long i = 0; i < nk; i++) perm[H->kend[H->kidx[i]]++] = i;
    // kend[t] is now the number of keys at indices <= t.
    for (long n = 0; n < nk; n++) {
        long i = perm[n];
        memcpy(kv + n * D, H->kv + i * D, (size_t)D * sizeof *kv);
        memcpy(uv + n * nw, H->uv + i * nw, (size_t)nw * sizeof *uv);
        memcpy(kcur + n * nr, H->kcur + i * nr, (size_t)nr * sizeof *kcur);
        memcpy(knone + n * nr, H->knone + i * nr, (size_t)nr);
        kidx[n] = H->kidx[i], kval[n] = H->kval[i];
    }
    free(H->kv), free(H->uv), free(H->kidx), free(H->kval), free(H->kcur), free(H->knone), free(perm);
    H->kv = kv, H->uv = uv, H->kidx = kidx, H->kval = kval, H->kcur = kcur, H->knone = knone;
    memset(H->kdead, 0, (size_t)nk * sizeof *H->kdead);
    // Kinds: keys alike in the registers the selection reads.
    SigSet T = {0};
    size_t len = (size_t)H->R.nk * 13 + 2 * sizeof(int);
    unsigned char *b = malloc(len + 64);
    H->kid = malloc(((size_t)nk + 1) * sizeof *H->kid);
    H->krep = malloc(((size_t)nk + 1) * sizeof *H->krep);
    H->km = malloc(((size_t)nk * D + 1) * sizeof *H->km);
    H->kr = malloc(((size_t)nk * D + 1) * sizeof *H->kr);
    H->ka = malloc(((size_t)nk * D + 1) * sizeof *H->ka);
    if (!b || !H->kid || !H->krep || !H->km || !H->kr || !H->ka || sig_init(&T, len) < 0) {
        free(b), sig_free(&T);
        return -1;
    }
    H->nkid = 0;
    for (long i = 0; i < nk; i++) {
        int added;
        sig_make(b, NULL, 0, 0, 0, H->R.kregs, H->R.nk, kcur + i * nr, knone + i * nr);
        long k = sig_add(&T, b, &added);
        if (k < 0) {
            free(b), sig_free(&T);
            return -1;
        }
        if (added) H->krep[H->nkid++] = i;
        H->kid[i] = (int)k;
    }
    free(b), sig_free(&T);
    for (long i = 0; i < nk; i++)
        for (int j = 0; j < D; j++) {
            TfIv k = kv[i * D + j];
            double m = iv_mid(k), r = iv_up(fmax(k.hi - m, m - k.lo));
            H->km[j * nk + i] = m;
            H->kr[j * nk + i] = r;
            H->ka[j * nk + i] = iv_up(fabs(m) + r);
        }
    return 0;
}

/* The distinct rows of a table over the combinations of d: id[i] the row
 * of combination i (-1: unreachable), rows (w each) in order of first
 * appearance; fill(H, assign, row) computes one, 0 when unreachable. */
typedef int (*RowFn)(Head *H, const int *assign, TfIv *x, TfIv *row, void *aux, long i);

static int distinct_rows(Head *H, PvDeps d, int w, RowFn fill, TfIv *x, void *aux, long **id, TfIv **rows) {
    const PvSem *S = H->N->S;
    long n = pv_deps_size(S, d, PV_TABLE_LIMIT);
    SigSet T = {0};
    TfIv *row = malloc(((size_t)w + 1) * sizeof *row);
    *id = malloc(((size_t)n + 1) * sizeof **id);
    *rows = NULL;
    int assign[TF_PROOF_MAX_BASE], rc = -1;
    long cap = 0;
    if (n < 0 || !row || !*id || sig_init(&T, (size_t)w * sizeof *row + 1) < 0) goto out;
    for (long i = 0; i < n; i++) {
        for (int b = 0; b < S->n_base; b++) assign[b] = -1;
        pv_deps_decode(S, d, i, assign);
        memset(row, 0, ((size_t)w + 1) * sizeof *row);
        if (!fill(H, assign, x, row, aux, i)) {
            (*id)[i] = -1;
            continue;
        }
        int added;
        long k = sig_add(&T, (const unsigned char *)row, &added);
        if (k < 0) goto out;
        if (added && k >= cap) {
            cap = cap ? 2 * cap : 64;
            TfIv *r = realloc(*rows, (size_t)cap * ((size_t)w + 1) * sizeof *r);
            if (!r) goto out;
            *rows = r;
        }
        if (added) memcpy(*rows + k * w, row, (size_t)w * sizeof *row);
        (*id)[i] = k;
    }
    rc = 0;
out:
    free(row);
    sig_free(&T);
    return rc;
}

/* The key of a row's combination. */
static int key_row(Head *H, const int *assign, TfIv *x, TfIv *k, void *aux, long i) {
    (void)aux, (void)i;
    for (int c = 0; c < H->d; c++)
        if (H->rk[c]) x[c] = pv_col_get(H->N, &H->N->col[c], assign);
    if (any_nan(x, H->rk, H->d)) return 0;
    for (int j = 0; j < H->D; j++) k[j] = sdot(H, H->D + j, x, H->bk ? H->bk[H->h * H->D + j] : 0);
    return 1;
}

/* The value after the output projection (aux: DV scratch). */
static int value_row(Head *H, const int *assign, TfIv *x, TfIv *u, void *aux, long i) {
    (void)i;
    for (int c = 0; c < H->d; c++)
        if (H->rv[c]) x[c] = pv_col_get(H->N, &H->N->col[c], assign);
    if (any_nan(x, H->rv, H->d)) return 0;
    value_of(H, x, u, aux);
    return 1;
}

/* The semantics: the selection's key registers and the value's index
 * (aux: scratch for the registers' values, n_regs). */
typedef struct SemAux {
    TfVal *cur;
    unsigned char *none;
} SemAux;

static int sem_row(Head *H, const int *assign, TfIv *x, TfIv *row, void *aux, long i) {
    (void)x, (void)i;
    const PvSem *S = H->N->S;
    SemAux *A = aux;
    pv_eval_regs(S, assign, A->cur, A->none);
    int kval = -1;
    if (H->o->kind == TF_OP_AGGREGATE && !A->none[H->o->vreg]) {
        TfVal val = A->cur[H->o->vreg];
        kval = pv_val_find(H->xv, H->nx, val);
    }
    // The row: the value's index, then the registers' values as bytes (a TfIv holds 16).
    unsigned char *b = (unsigned char *)row;
    size_t k = 0;
    memcpy(b, &kval, sizeof kval), k += sizeof kval;
    for (int r = 0; r < H->R.nk; r++) {
        int reg = H->R.kregs[r];
        TfVal v = A->none[reg] ? (TfVal){TF_VAL_INT, 0} : A->cur[reg];
        int kind = (int)v.kind;
        memcpy(b + k, &kind, sizeof kind), k += sizeof kind;
        memcpy(b + k, &v.x, sizeof v.x), k += sizeof v.x;
        b[k++] = A->none[reg];
    }
    return 1;
}

/* A key class is a tuple of four factors: its key row, value row and
 * semantics row (each a table over its own base variables: fid[f][i] the
 * row of combination i of fd[f], -1 unreachable) and its index. */
enum { KF_KEY, KF_VAL, KF_SEM, KF_IDX, KF_COUNT };

typedef struct KTuple {
    int t[KF_COUNT];
    long rep; /* a combination of the semantics' base variables giving its row */
} KTuple;

typedef struct Tuples {
    long n, cap;
    KTuple *v;
} Tuples;

static int tuples_push(Tuples *T, const int *t, long rep) {
    if (T->n == T->cap) {
        long cap = T->cap ? 2 * T->cap : 64;
        KTuple *v = realloc(T->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        T->v = v;
        T->cap = cap;
    }
    memcpy(T->v[T->n].t, t, sizeof T->v[T->n].t);
    T->v[T->n++].rep = rep;
    return 0;
}

/* The tuples of the factors in mask that occur: every combination of the
 * base variables they depend on, each distinct tuple once (the factors
 * outside mask 0). 1 when more than 2^22 combinations, -1 out of memory. */
static int factor_tuples(const Head *H, unsigned mask, const PvDeps *fd, long *const *fid, Tuples *out) {
    const PvSem *S = H->N->S;
    PvDeps d = 0;
    for (int f = 0; f < KF_COUNT; f++)
        if (mask >> f & 1) d |= fd[f];
    long n = pv_deps_size(S, d, PV_TABLE_LIMIT);
    if (n < 0) return 1;
    SigSet U = {0};
    if (sig_init(&U, KF_COUNT * sizeof(int)) < 0) return -1;
    int assign[TF_PROOF_MAX_BASE], rc = 0;
    for (long i = 0; i < n && rc == 0; i++) {
        for (int b = 0; b < S->n_base; b++) assign[b] = -1;
        pv_deps_decode(S, d, i, assign);
        int t[KF_COUNT] = {0}, dead = 0, added;
        for (int f = KF_KEY; f <= KF_SEM; f++) {
            if (!(mask >> f & 1)) continue;
            long v = fid[f][pv_deps_index(S, fd[f], assign)];
            dead |= v < 0;
            t[f] = (int)v;
        }
        if (mask >> KF_IDX & 1) t[KF_IDX] = (int)S->base[S->b_indices].vals[assign[S->b_indices]].x;
        if (dead) continue;
        if (sig_add(&U, (const unsigned char *)t, &added) < 0) rc = -1;
        else if (added) rc = tuples_push(out, t, mask >> KF_SEM & 1 ? pv_deps_index(S, fd[KF_SEM], assign) : 0);
    }
    sig_free(&U);
    return rc;
}

static int tuple_cmp(const void *a, const void *b) {
    const int *x = ((const KTuple *)a)->t, *y = ((const KTuple *)b)->t;
    static const int key[KF_COUNT] = {KF_IDX, KF_KEY, KF_VAL, KF_SEM};
    for (int i = 0; i < KF_COUNT; i++)
        if (x[key[i]] != y[key[i]]) return x[key[i]] < y[key[i]] ? -1 : 1;
    return 0;
}

/* Every tuple that occurs, in order of index, then key, value and
 * semantics rows. Factors that share no base variable combine freely, so
 * the factors are grouped by the base variables they share, each group's
 * tuples found over its own variables and the groups' tuples crossed
 * (a key class over more than 2^22 combinations of base variables, as
 * long as no group is). A bidirectional head whose index is a group of
 * its own sees every class at every index, whatever the query's: one class
 * then stands for all its indices (H->anypos; the sweep knows its keys lie
 * at several positions). naive: every combination of them all at once
 * (the twin, for tests). 1 when a group has more than 2^22 combinations. */
static int class_tuples(Head *H, const PvDeps *fd, long *const *fid, int naive, Tuples *out) {
    unsigned group[KF_COUNT]; // the factors of each group
    int ng = 0;
    if (naive) group[ng++] = (1u << KF_COUNT) - 1;
    for (int f = 0; f < KF_COUNT && !naive; f++) {
        unsigned m = 1u << f;
        PvDeps d = fd[f];
        for (int g = 0; g < ng;) { // merge every group sharing a variable with it
            PvDeps dg = 0;
            for (int e = 0; e < KF_COUNT; e++)
                if (group[g] >> e & 1) dg |= fd[e];
            if (dg & d) {
                m |= group[g], d |= dg;
                group[g] = group[--ng];
                g = 0;
            } else g++;
        }
        group[ng++] = m;
    }
    Tuples G[KF_COUNT] = {{0}};
    int rc = 0, zero[KF_COUNT] = {0};
    H->anypos = 0;
    for (int g = 0; g < ng && rc == 0; g++) {
        if (group[g] == 1u << KF_IDX && !H->o->causal) {
            H->anypos = 1;
            rc = tuples_push(&G[g], zero, 0);
        } else rc = factor_tuples(H, group[g], fd, fid, &G[g]);
    }
    // The product of the groups' tuples.
    long total = 1;
    for (int g = 0; g < ng && rc == 0; g++) {
        total *= G[g].n;
        if (total > PV_TABLE_LIMIT) rc = 1;
    }
    for (long k = 0; k < total && rc == 0; k++) {
        int t[KF_COUNT] = {0};
        long rest = k, rep = 0;
        for (int g = 0; g < ng; g++) {
            long j = rest % G[g].n;
            rest /= G[g].n;
            for (int f = 0; f < KF_COUNT; f++)
                if (group[g] >> f & 1) t[f] = G[g].v[j].t[f];
            if (group[g] >> KF_SEM & 1) rep = G[g].v[j].rep;
        }
        rc = tuples_push(out, t, rep);
    }
    if (rc == 0 && out->n > 1) qsort(out->v, (size_t)out->n, sizeof *out->v, tuple_cmp);
    for (int g = 0; g < ng; g++) free(G[g].v);
    return rc;
}

/* Every key class: a combination of its key, its projected value, its
 * semantics (each a table over the base variables it depends on, rows
 * alike made one) and its index that occurs (class_tuples). 1 when too
 * many combinations, 2 when a key or value is not finite, -1 out of memory. */
static int key_classes(Head *H, TfIv *x) {
    PvNet *N = H->N;
    const PvSem *S = N->S;
    int nr = S->ir->n_regs, D = H->D, nw = H->nw;
    PvDeps dsem = 0;
    for (int i = 0; i < H->R.nk; i++) dsem |= S->deps[H->R.kregs[i]];
    if (H->o->vreg >= 0) dsem |= S->deps[H->o->vreg];
    int wsem = (int)((sizeof(int) + (size_t)H->R.nk * 13) / sizeof(TfIv)) + 1;
    if (pv_deps_size(S, H->dkk, PV_TABLE_LIMIT) < 0 || pv_deps_size(S, H->dkv, PV_TABLE_LIMIT) < 0 ||
        pv_deps_size(S, dsem, PV_TABLE_LIMIT) < 0)
        return 1;
    long *fid[KF_COUNT] = {NULL};
    TfIv *k1 = NULL, *u2 = NULL, *s3 = NULL;
    TfVal *cur = malloc((size_t)nr * sizeof *cur);
    unsigned char *none = malloc((size_t)nr + 1);
    TfIv *v = malloc(((size_t)H->DV + 1) * sizeof *v);
    SemAux A = {cur, none};
    Tuples T = {0};
    int assign[TF_PROOF_MAX_BASE], rc = -1;
    if (!cur || !none || !v) goto out;
    if (distinct_rows(H, H->dkk, D, key_row, x, NULL, &fid[KF_KEY], &k1) < 0 ||
        distinct_rows(H, H->dkv, nw, value_row, x, v, &fid[KF_VAL], &u2) < 0 ||
        distinct_rows(H, dsem, wsem, sem_row, x, &A, &fid[KF_SEM], &s3) < 0)
        goto out;
    PvDeps fd[KF_COUNT] = {H->dkk, H->dkv, dsem, (PvDeps)1 << S->b_indices};
    rc = class_tuples(H, fd, fid, H->N->naive, &T);
    if (rc != 0) goto out;
    rc = -1;
    long nk = T.n;
    H->nk = nk;
    H->kv = malloc(((size_t)nk * D + 1) * sizeof *H->kv);
    H->uv = malloc(((size_t)nk * nw + 1) * sizeof *H->uv);
    H->kidx = malloc(((size_t)nk + 1) * sizeof(int));
    H->kval = malloc(((size_t)nk + 1) * sizeof(int));
    H->kdead = calloc((size_t)nk + 1, sizeof(int));
    H->kcur = malloc(((size_t)nk * nr + 1) * sizeof *H->kcur);
    H->knone = malloc((size_t)nk * nr + 1);
    if (!H->kv || !H->uv || !H->kidx || !H->kval || !H->kdead || !H->kcur || !H->knone) goto out;
    for (long k = 0; k < nk; k++) {
        const int *t = T.v[k].t;
        memcpy(H->kv + k * D, k1 + (long)t[KF_KEY] * D, (size_t)D * sizeof *H->kv);
        memcpy(H->uv + k * nw, u2 + (long)t[KF_VAL] * nw, (size_t)nw * sizeof *H->uv);
        // Its registers' values: those of a combination giving its semantics row.
        for (int b = 0; b < S->n_base; b++) assign[b] = -1;
        pv_deps_decode(S, dsem, T.v[k].rep, assign);
        pv_eval_regs(S, assign, H->kcur + k * nr, H->knone + k * nr);
        memcpy(&H->kval[k], s3 + (long)t[KF_SEM] * wsem, sizeof(int));
        H->kidx[k] = t[KF_IDX];
    }
    rc = key_index(H);
    if (rc == 1) rc = 2;
out:
    for (int f = 0; f < KF_COUNT; f++) free(fid[f]);
    free(k1), free(u2), free(s3), free(cur), free(none), free(v);
    free(T.v);
    return rc;
}

static void head_free(Head *H) {
    free(H->sp_start), free(H->sp_col), free(H->sp_w);
    free(H->rq);
    free(H->rk);
    free(H->rv);
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
    free(H->kid), free(H->krep), free(H->kend), free(H->km), free(H->kr), free(H->ka);
    free(H->gstart), free(H->gidx), free(H->gq), free(H->gcur), free(H->gnone), free(H->gself);
    free(H->alpha), free(H->beta), free(H->resid);
}

/* What one query scenario sees: the BOS and the selected and other classes. */
typedef struct Seen {
    int avail, has_s, has_u;
    int self; /* the query's own position: 1 selected, 0 not, -1 unknown */
    int single; /* every selected key stands at one position (a mean's sweep_key) */
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
    const PvBase *B = &H->N->S->base[H->tb];
    int causal = H->o->causal;
    for (int n = 0; n <= V->avail; n++) {
        if (n > 0 && !V->has_s) continue;
        if ((V->self == 1 && n == 0) || (V->self == 0 && n == V->avail)) continue;
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

/* One thread's share of the queries: its results (merged by hull, min and
 * max, so they do not depend on the number of threads) and its scratch. */
typedef struct Work {
    TfIv *tab;     /* nB x nw outputs, NaN where none */
    double *err;   /* mean: per written column, the largest distance from the mean */
    double gap;    /* the smallest score gap, selected over others */
    int multi;     /* some query may select keys of different values at different positions */
    int wild;      /* a query vector not finite */
    double *c, *r, *g; /* nk: score midpoints, radii, magnitudes */
    TfIv *s;           /* nk scores */
    unsigned char *selk; /* per key kind: selected */
    /* The sweep: what the keys seen so far give. */
    int has_s, has_u, nvals, pos, multi_pos;
    TfIv ss, su;       /* score hulls: selected, others */
    double ref;        /* the largest score */
    TfIv *vs, *vu;     /* nw value hulls */
    unsigned char *hasa; /* copy, per value: some selected key holds it */
    TfIv *ssa, *A;       /* per value: its keys' score hull, values (nw each) */
} Work;

static void work_free(Work *W) {
    free(W->tab), free(W->err), free(W->c), free(W->r), free(W->g), free(W->s), free(W->selk);
    free(W->vs), free(W->vu), free(W->hasa), free(W->ssa), free(W->A);
}

static int work_init(Work *W, const Head *H) {
    int nB = H->nB, nw = H->nw;
    size_t nk = (size_t)H->nk + 1;
    memset(W, 0, sizeof *W);
    W->tab = malloc((size_t)nB * (nw + 1) * sizeof *W->tab);
    W->err = calloc((size_t)nw + 1, sizeof *W->err);
    W->c = malloc(nk * sizeof *W->c), W->r = malloc(nk * sizeof *W->r), W->g = malloc(nk * sizeof *W->g);
    W->s = malloc(nk * sizeof *W->s);
    W->selk = malloc((size_t)H->nkid + 1);
    W->vs = malloc(((size_t)nw + 1) * sizeof *W->vs), W->vu = malloc(((size_t)nw + 1) * sizeof *W->vu);
    W->hasa = malloc((size_t)nB + 1);
    W->ssa = malloc(((size_t)nB + 1) * sizeof *W->ssa);
    W->A = malloc((size_t)nB * (nw + 1) * sizeof *W->A);
    if (!W->tab || !W->err || !W->c || !W->r || !W->g || !W->s || !W->selk || !W->vs || !W->vu || !W->hasa ||
        !W->ssa || !W->A)
        return -1;
    for (long i = 0; i < (long)nB * nw; i++) W->tab[i] = nan_iv();
    W->gap = INFINITY;
    return 0;
}

/* Copy: per value a the selected keys hold, the output when they all hold a. */
static void copy_mix(const Head *H, const Seen *V, Work *W, double ref) {
    const PvBase *B = &H->N->S->base[H->o->base];
    int nB = B->n, nw = H->nw;
    if (W->nvals > 1 && W->multi_pos) W->multi = 1;
    double oth = V->eb.hi + (V->has_u ? V->avail * V->eu.hi : 0);
    for (int a = 0; a < nB; a++) {
        if (!W->hasa[a]) continue;
        TfIv esa = eng_exp(W->ssa[a], ref);
        double lam = esa.lo > 0 ? oth / esa.lo : INFINITY;
        for (int w = 0; w < nw; w++) {
            TfIv A = W->A[(size_t)a * nw + w], O = V->ub[w];
            if (V->has_u) O = iv_hull(O, V->vu[w]);
            TfIv out = {A.lo - lam * fmax(0, A.lo - O.lo), A.hi + lam * fmax(0, O.hi - A.hi)};
            if (lam == INFINITY) out = (TfIv){-INFINITY, INFINITY};
            hull_into(&W->tab[(size_t)w * nB + a], iv_widen(out, slack(H, w)));
        }
    }
}

/* Mean: how far the output can be from alpha * mean + beta. */
static void mean_mix(const Head *H, const Seen *V, const double *resid, double *err) {
    if (!V->has_s) return;
    // Selected keys at one position are one key in any input: the mean
    // mixes its value with the BOS's and the others' only (lam), whatever
    // spread its score's interval has.
    double rho = V->single ? 1 : V->es.lo > 0 ? V->es.hi / V->es.lo : INFINITY;
    double lam = V->es.lo > 0 ? (V->eb.hi + (V->has_u ? V->avail * V->eu.hi : 0)) / V->es.lo : INFINITY;
    for (int w = 0; w < H->nw; w++) {
        double smax = iv_mag(V->vs[w]), omax = fmax(iv_mag(V->ub[w]), V->has_u ? iv_mag(V->vu[w]) : 0);
        double e = (rho - 1) * smax + resid[w] + lam * (omax + smax) + slack(H, w);
        err[w] = fmax(err[w], e);
    }
}

/* The mean's values as an affine function of the value register's. */
static void mean_fit(const Head *H, double *alpha, double *beta, double *resid) {
    const TfVal *X = H->xv;
    long lo = -1, hi = -1;
    for (long i = 0; i < H->nk; i++) {
        if (H->kdead[i] || H->kval[i] < 0) continue;
        double x = X[H->kval[i]].x;
        if (lo < 0 || x < X[H->kval[lo]].x) lo = i;
        if (hi < 0 || x > X[H->kval[hi]].x) hi = i;
    }
    for (int w = 0; w < H->nw; w++) {
        alpha[w] = beta[w] = resid[w] = 0;
        if (lo < 0) continue;
        double x0 = X[H->kval[lo]].x, x1 = X[H->kval[hi]].x;
        double y0 = iv_mid(H->uv[lo * H->nw + w]), y1 = iv_mid(H->uv[hi * H->nw + w]);
        alpha[w] = x1 > x0 ? (y1 - y0) / (x1 - x0) : 0;
        beta[w] = y0 - alpha[w] * x0;
        for (long i = 0; i < H->nk; i++) {
            if (H->kdead[i] || H->kval[i] < 0) continue;
            double t = alpha[w] * X[H->kval[i]].x + beta[w];
            TfIv u = H->uv[i * H->nw + w];
            double r = fmax(fabs(u.lo - t), fabs(u.hi - t)) * (1 + 1e-12) + 1e-15;
            resid[w] = fmax(resid[w], r);
        }
    }
}

static int any_none(const unsigned char *none, const int *regs, int n) {
    for (int i = 0; i < n; i++)
        if (none[regs[i]]) return 1;
    return 0;
}

/* The scores of query q with every key, W->s (1 when one is not finite): one pass over the keys per
 * component, in midpoint-radius form (q.k lies within c +- r, c the dot
 * product of the midpoints, r of the radii against the magnitudes, g the
 * magnitudes' own, which bounds the engine's float32 rounding gamma_D g);
 * the double rounding of the three sums is within (D + 4) 2^-52 of g. */
static int scores_all(const Head *H, const TfIv *q, Work *W) {
    long nk = H->nk;
    int D = H->D;
    double *c = W->c, *r = W->r, *g = W->g;
    memset(c, 0, (size_t)nk * sizeof *c);
    memset(r, 0, (size_t)nk * sizeof *r);
    memset(g, 0, (size_t)nk * sizeof *g);
    for (int j = 0; j < D; j++) {
        double qm = iv_mid(q[j]), qr = iv_up(fmax(q[j].hi - qm, qm - q[j].lo));
        double aq = fabs(qm), qa = iv_up(aq + qr);
        const double *km = H->km + (size_t)j * nk, *kr = H->kr + (size_t)j * nk, *ka = H->ka + (size_t)j * nk;
        for (long i = 0; i < nk; i++) {
            c[i] += qm * km[i];
            r[i] += aq * kr[i] + qr * ka[i];
            g[i] += qa * ka[i];
        }
    }
    double gd = (D + 4) * 0x1p-52, g32 = iv_gamma(D);
    int wild = 0;
    for (long i = 0; i < nk; i++) {
        double R = (r[i] + (g32 + gd) * g[i]) * (1 + gd) + 1e-290;
        TfIv s = iv_out(c[i] - R, c[i] + R);
        s = iv_scale(s, H->scale);
        W->s[i] = iv_widen(s, TF_F32_U * iv_mag(s));
        wild |= !isfinite(W->s[i].lo) || !isfinite(W->s[i].hi);
    }
    return wild;
}

void pv_score_twins(int D, float scale, const TfIv *q, const TfIv *k, TfIv *naive, TfIv *fast) {
    double km[TF_PV_TWIN_MAX], kr[TF_PV_TWIN_MAX], ka[TF_PV_TWIN_MAX], c, r, g;
    Head H = {.D = D, .scale = scale, .nk = 1, .km = km, .kr = kr, .ka = ka};
    Work W = {.c = &c, .r = &r, .g = &g, .s = fast};
    for (int j = 0; j < D; j++) {
        double m = iv_mid(k[j]), rad = iv_up(fmax(k[j].hi - m, m - k[j].lo));
        km[j] = m, kr[j] = rad, ka[j] = iv_up(fabs(m) + rad);
    }
    *naive = score(&H, q, k);
    scores_all(&H, q, &W);
}

static void hull_set(TfIv *t, TfIv x, int first) { *t = first ? x : iv_hull(*t, x); }

/* Key i (in index order) joins what the query sees. */
static void sweep_key(const Head *H, Work *W, long i, int copy) {
    int nw = H->nw;
    TfIv s = W->s[i];
    const TfIv *u = H->uv + i * nw;
    W->ref = fmax(W->ref, s.hi);
    if (!W->selk[H->kid[i]]) {
        hull_set(&W->su, s, !W->has_u);
        for (int w = 0; w < nw; w++) hull_set(&W->vu[w], u[w], !W->has_u);
        W->has_u = 1;
        return;
    }
    hull_set(&W->ss, s, !W->has_s);
    for (int w = 0; w < nw; w++) hull_set(&W->vs[w], u[w], !W->has_s);
    W->has_s = 1;
    int a = H->kval[i];
    if (copy && a < 0) return;
    if (H->anypos && H->N->S->base[H->N->S->b_indices].n > 1) W->multi_pos = 1; // at two indices, as classes per index
    if (W->pos == -2) W->pos = H->kidx[i];
    else if (W->pos != H->kidx[i]) W->multi_pos = 1;
    if (!copy) return;
    hull_set(&W->ssa[a], s, !W->hasa[a]);
    for (int w = 0; w < nw; w++) hull_set(&W->A[(size_t)a * nw + w], u[w], !W->hasa[a]);
    if (!W->hasa[a]) W->nvals++;
    W->hasa[a] = 1;
}

/* Query group g: every key once, in index order; at each of the group's
 * indices, what the query sees then (causal: the keys up to it). The
 * exponentials of a hull of scores enclose each score's (exp is monotone). */
static void query_group(const Head *H, Work *W, long g) {
    const PvSem *S = H->N->S;
    int D = H->D, nr = S->ir->n_regs, nB = H->nB;
    const TfIv *q = H->gq + g * D;
    const TfVal *qcur = H->gcur + g * nr;
    const unsigned char *qnone = H->gnone + g * nr;
    for (int j = 0; j < D; j++)
        if (!isfinite(q[j].lo) || !isfinite(q[j].hi)) {
            W->wild = 1;
            return;
        }
    int qnone_any = any_none(qnone, H->R.qregs, H->R.nq);
    for (long k = 0; k < H->nkid; k++) {
        long i = H->krep[k];
        W->selk[k] = !qnone_any && !any_none(H->knone + i * nr, H->R.kregs, H->R.nk) &&
                     pv_select(S, H->o, H->kcur + i * nr, qcur) == 1; // no value: not selected
    }
    TfIv sb = score(H, q, H->kb);
    if (scores_all(H, q, W) || !isfinite(sb.lo) || !isfinite(sb.hi)) {
        W->wild = 1; // an overflowing score: not proven
        return;
    }
    int copy = H->o->kind == TF_OP_AGGREGATE && S->ir->regs[H->o->dest].kind != TF_REG_SCALAR;
    W->has_s = W->has_u = W->nvals = W->multi_pos = 0;
    W->pos = -2;
    W->ref = sb.hi;
    memset(W->hasa, 0, (size_t)nB);
    long p = 0;
    for (long e = H->gstart[g]; e < H->gstart[g + 1]; e++) {
        int qidx = H->gidx[e];
        long lim = H->o->causal ? H->kend[qidx] : H->nk;
        for (; p < lim; p++) sweep_key(H, W, p, copy);
        Seen V = {.avail = H->o->causal ? qidx : H->N->maxlen - 1, .has_s = W->has_s, .has_u = W->has_u,
                  .self = H->gself[g], .single = !copy && W->has_s && !W->multi_pos,
                  .ub = H->ub, .vs = W->vs, .vu = W->vu};
        V.eb = eng_exp(sb, W->ref);
        if (W->has_s) V.es = eng_exp(W->ss, W->ref);
        if (W->has_u) V.eu = eng_exp(W->su, W->ref);
        if (W->has_s && W->has_u) W->gap = fmin(W->gap, W->ss.lo - W->su.hi);
        if (H->o->kind == TF_OP_COUNT_MATCHES || H->o->sum) {
            count_mix(H, &V, qidx, W->tab); // a sum: per count, and
            if (H->o->sum) mean_mix(H, &V, H->resid, W->err); // near the mean (contributions)
            continue;
        }
        if (V.self != 1) none_mix(H, &V, default_index(H), W->tab, nB);
        if (copy) copy_mix(H, &V, W, W->ref);
        else mean_mix(H, &V, H->resid, W->err);
    }
}

/* The query scenarios, grouped: those with the same query vector and the
 * same values of the selection's query registers differ only in their
 * index. 1 when too many, -1 out of memory. */
static int query_groups(Head *H, TfIv *x) {
    PvNet *N = H->N;
    const PvSem *S = N->S;
    int nr = S->ir->n_regs, D = H->D;
    long nq = pv_deps_size(S, H->dq, PV_TABLE_LIMIT);
    TfIv *q = malloc(((size_t)D + 1) * sizeof *q);
    TfVal *qcur = malloc((size_t)nr * sizeof *qcur);
    unsigned char *qnone = malloc((size_t)nr);
    size_t len = (size_t)D * sizeof(TfIv) + 2 * sizeof(int) + (size_t)H->R.nq * 13;
    unsigned char *sig = malloc(len + 64);
    long *sg = malloc(((size_t)nq + 1) * sizeof *sg);
    int *si = malloc(((size_t)nq + 1) * sizeof *si);
    SigSet T = {0};
    int rc = -1;
    long ns = 0, capg = 0;
    int assign[TF_PROOF_MAX_BASE];
    PvDeps kdeps = 0;
    for (int i = 0; i < H->R.nk; i++) kdeps |= S->deps[H->R.kregs[i]];
    if (!q || !qcur || !qnone || !sig || !sg || !si || sig_init(&T, len) < 0) goto out;
    for (long i = 0; i < nq; i++) {
        for (int b = 0; b < S->n_base; b++) assign[b] = -1;
        pv_deps_decode(S, H->dq, i, assign);
        for (int c = 0; c < H->d; c++)
            if (H->rq[c]) x[c] = pv_col_get(N, &N->col[c], assign);
        if (any_nan(x, H->rq, H->d)) continue;
        for (int j = 0; j < D; j++) q[j] = sdot(H, j, x, H->bq ? H->bq[H->h * H->D + j] : 0);
        pv_eval_regs(S, assign, qcur, qnone);
        int qidx = (int)S->base[S->b_indices].vals[assign[S->b_indices]].x, added;
        // The query's own position is a key: its key registers' values are
        // the query's where they depend only on what the scenario assigns.
        int self = -1;
        if ((kdeps & ~H->dq) == 0)
            self = !any_none(qnone, H->R.qregs, H->R.nq) && !any_none(qnone, H->R.kregs, H->R.nk) &&
                   pv_select(S, H->o, qcur, qcur) == 1;
        sig_make(sig, q, D, 0, self, H->R.qregs, H->R.nq, qcur, qnone);
        long g = sig_add(&T, sig, &added);
        if (g < 0) goto out;
        if (added) {
            if (g >= capg) {
                capg = capg ? 2 * capg : 64;
                TfIv *gq = realloc(H->gq, (size_t)capg * D * sizeof *gq + 1);
                if (gq) H->gq = gq;
                TfVal *gc = realloc(H->gcur, (size_t)capg * nr * sizeof *gc);
                if (gc) H->gcur = gc;
                unsigned char *gn = realloc(H->gnone, (size_t)capg * nr);
                if (gn) H->gnone = gn;
                signed char *gs = realloc(H->gself, (size_t)capg);
                if (gs) H->gself = gs;
                if (!gq || !gc || !gn || !gs) goto out;
            }
            memcpy(H->gq + g * D, q, (size_t)D * sizeof *q);
            memcpy(H->gcur + g * nr, qcur, (size_t)nr * sizeof *qcur);
            memcpy(H->gnone + g * nr, qnone, (size_t)nr);
            H->gself[g] = (signed char)self;
        }
        sg[ns] = g, si[ns++] = qidx;
    }
    H->ng = (long)T.n;
    rc = 0;
    if ((double)H->ng * (double)H->nk > 2e9) {
        rc = 1;
        goto out;
    }
    // The scenarios by group, then index (counting sort twice), alike ones once.
    H->gstart = calloc((size_t)H->ng + 2, sizeof *H->gstart);
    H->gidx = malloc(((size_t)ns + 1) * sizeof *H->gidx);
    long *by = malloc(((size_t)ns + 1) * sizeof *by), *cnt = calloc((size_t)N->maxlen + 2, sizeof *cnt);
    if (!H->gstart || !H->gidx || !by || !cnt) {
        free(by), free(cnt);
        rc = -1;
        goto out;
    }
    for (long e = 0; e < ns; e++) cnt[si[e] + 1]++;
    for (int t = 1; t <= N->maxlen + 1; t++) cnt[t] += cnt[t - 1];
    for (long e = 0; e < ns; e++) by[cnt[si[e]]++] = e; // by index
    for (long e = 0; e < ns; e++) H->gstart[sg[e] + 1]++;
    for (long g = 1; g <= H->ng; g++) H->gstart[g] += H->gstart[g - 1];
    long *fill = realloc(cnt, ((size_t)H->ng + 1) * sizeof *fill); // the next free slot of each group
    if (!fill) {
        free(by), free(cnt);
        rc = -1;
        goto out;
    }
    memcpy(fill, H->gstart, (size_t)H->ng * sizeof *fill);
    for (long k = 0; k < ns; k++) {
        long e = by[k];
        H->gidx[fill[sg[e]]++] = si[e];
    }
    // Drop repeats within each group (same index).
    long w = 0;
    for (long g = 0; g < H->ng; g++) {
        long a = H->gstart[g], b = H->gstart[g + 1];
        H->gstart[g] = w;
        for (long e = a; e < b; e++)
            if (e == a || H->gidx[e] != H->gidx[e - 1]) H->gidx[w++] = H->gidx[e];
    }
    H->gstart[H->ng] = w;
    free(by), free(fill);
out:
    free(q), free(qcur), free(qnone), free(sig), free(sg), free(si);
    sig_free(&T);
    return rc;
}

/* The threads: each takes the next query group until none is left. */
typedef struct Pool {
    const Head *H;
    Work *W;
    atomic_long next;
} Pool;

typedef struct PoolArg {
    Pool *P;
    int t;
} PoolArg;

static void *pool_worker(void *arg) {
    PoolArg *A = arg;
    Pool *P = A->P;
    for (long g; (g = atomic_fetch_add(&P->next, 1)) < P->H->ng;) query_group(P->H, &P->W[A->t], g);
    return NULL;
}

/* Every query group on H->threads threads, merged into W[0]. */
static int queries(Head *H, Work *W) {
    int nt = H->threads;
    if (nt > H->ng) nt = H->ng > 0 ? (int)H->ng : 1;
    Pool P = {.H = H, .W = W};
    atomic_init(&P.next, 0);
    pthread_t tid[PV_MAX_THREADS];
    PoolArg arg[PV_MAX_THREADS];
    int started = 1, rc = 0;
    for (int t = 1; t < nt; t++) {
        if (work_init(&W[t], H) < 0) {
            work_free(&W[t]);
            break;
        }
        arg[t] = (PoolArg){&P, t};
        if (pthread_create(&tid[t], NULL, pool_worker, &arg[t]) != 0) {
            work_free(&W[t]);
            break;
        }
        started++;
    }
    arg[0] = (PoolArg){&P, 0};
    pool_worker(&arg[0]);
    if (started > H->N->P->threads_run) H->N->P->threads_run = started;
    int nB = H->nB;
    for (int t = 1; t < started; t++) {
        pthread_join(tid[t], NULL);
        for (long i = 0; i < (long)nB * H->nw; i++)
            if (!isnan(W[t].tab[i].lo)) hull_into(&W[0].tab[i], W[t].tab[i]);
        for (int w = 0; w < H->nw; w++) W[0].err[w] = fmax(W[0].err[w], W[t].err[w]);
        W[0].gap = fmin(W[0].gap, W[t].gap);
        W[0].multi |= W[t].multi;
        W[0].wild |= W[t].wild;
        work_free(&W[t]);
    }
    return rc;
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
    unsigned char *rv = H->rv = malloc((size_t)d), *all = malloc((size_t)d);
    H->wcol = malloc(((size_t)d + 1) * sizeof(int));
    H->wmag = calloc((size_t)d + 1, sizeof(double));
    H->kb = malloc(((size_t)H->D + 1) * sizeof(TfIv));
    H->ub = malloc(((size_t)d + 1) * sizeof(TfIv));
    TfIv *v = malloc(((size_t)H->DV + 1) * sizeof *v);
    if (!H->rq || !H->rk || !rv || !all || !H->wcol || !H->wmag || !H->kb || !H->ub || !v) {
        free(all), free(v);
        return -1;
    }
    ExprReads R = {0};
    TfDiag quiet;
    diag_init(&quiet, "", "", 0, S->sink);
    expr_reads(S->ir, &quiet, H->o->expr, 1, &R);
    H->R = R;
    if (sparse_rows(H) < 0) {
        free(all), free(v);
        return -1;
    }
    H->dq = pv_read_cols(N, H->wq, H->h * H->D, (H->h + 1) * H->D, H->rq) | (PvDeps)1 << S->b_indices;
    H->dkk = pv_read_cols(N, H->wk, H->h * H->D, (H->h + 1) * H->D, H->rk);
    H->dkv = pv_read_cols(N, H->wv, H->h * H->DV, (H->h + 1) * H->DV, rv);
    for (int i = 0; i < R.nq; i++) H->dq |= S->deps[R.qregs[i]];
    H->nw = 0;
    for (int c = 0; c < d; c++) {
        int w = 0;
        for (int j = 0; j < H->DV; j++)
            w |= H->wo ? H->wo[(size_t)c * H->n_out + H->h * H->DV + j] != 0 : c == H->h * H->DV + j;
        if (w) H->wcol[H->nw++] = c;
    }
    memset(all, 1, (size_t)d);
    key_value(H, N->bos, H->kb, H->ub, v);
    free(all), free(v);
    const PvBase *B = &S->base[H->o->base];
    H->tb = H->o->sum ? H->o->nbase : H->o->base;
    H->nB = S->base[H->tb].n;
    H->xv = B->vals, H->nx = B->n - B->has_none;
    if (H->o->sum) H->xv = S->ir->regs[H->o->vreg].facts.vals, H->nx = S->ir->regs[H->o->vreg].facts.n_vals;
    if (pv_deps_size(S, H->dq, PV_TABLE_LIMIT) < 0) return 1;
    int rc = key_classes(H, x);
    return rc != 0 ? rc : query_groups(H, x);
}

static int has_check(const PvNet *N, int reg) {
    for (int i = 0; i < N->m->n_checks; i++)
        if (N->m->checks[i].reg == N->reg_model[reg]) return 1;
    return 0;
}

/* A `sum` Aggregate's head, its output per sum and count, into stage: at
 * count n, the table's (count_mix: a Count's reading) and, for n >= 1,
 * alpha sum / n + beta within err (mean_mix: a mean's reading); both
 * enclose it, so their intersection does, whichever the head is (the
 * count's or the mean's, the weights do not say). No value where no input
 * makes that sum with that count (prove_sem.c), nor where no query sees
 * that count. */
static int sum_contributions(Head *H, const Work *W, PvCol *stage) {
    PvNet *N = H->N;
    const PvOp *o = H->o;
    const PvBase *B = &N->S->base[o->base];
    int nS = B->n, nn = H->nB, rc = 0;
    PvCol c = {0};
    for (int w = 0; w < H->nw && rc == 0; w++) {
        rc = pv_col_set(&c, (PvDeps)1 << o->base | (PvDeps)1 << o->nbase, (long)nS * nn);
        int assign[TF_PROOF_MAX_BASE];
        for (long i = 0; i < c.n && rc == 0; i++) {
            pv_deps_decode(N->S, c.deps, i, assign);
            int j = assign[o->base], n = assign[o->nbase];
            TfIv t = W->tab[(size_t)w * nn + n];
            if (!o->reach[(size_t)n * nS + j]) t = nan_iv();
            if (n > 0 && !isnan(t.lo)) {
                double y = H->alpha[w] * (B->vals[j].x / n) + H->beta[w];
                TfIv m = iv_widen(iv_pt(y), W->err[w] + 1e-12 * fabs(y));
                TfIv both = {fmax(t.lo, m.lo), fmin(t.hi, m.hi)};
                t = both.lo <= both.hi ? both : iv_hull(t, m);
            }
            c.v[i] = t;
        }
        if (rc == 0) rc = pv_col_add(N, &stage[H->wcol[w]], &c);
    }
    pv_col_free(&c);
    return rc;
}

/* The head's output per value of its op's result, into stage (over {B}). */
static int contributions(Head *H, const Work *W, PvCol *stage) {
    PvNet *N = H->N;
    if (H->o->sum) return sum_contributions(H, W, stage);
    const PvBase *B = &N->S->base[H->o->base];
    int numeric = H->o->kind == TF_OP_AGGREGATE && N->S->ir->regs[H->o->dest].kind == TF_REG_SCALAR;
    PvCol c = {0};
    int rc = 0;
    for (int w = 0; w < H->nw && rc == 0; w++) {
        rc = pv_col_set(&c, (PvDeps)1 << H->o->base, B->n);
        for (int a = 0; a < B->n && rc == 0; a++) {
            TfIv t = W->tab[(size_t)w * B->n + a];
            if (numeric) {
                double y = H->alpha[w] * B->vals[a].x + H->beta[w];
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
              .scale = ly->scale, .n_out = ly->n_heads * ly->d_vhead, .threads = N->threads};
    H.wq = m->tensors[ly->query].data, H.wk = m->tensors[ly->key].data, H.wv = m->tensors[ly->value].data;
    H.wo = ly->output >= 0 ? m->tensors[ly->output].data : NULL;
    H.bq = ly->query_bias >= 0 ? m->tensors[ly->query_bias].data : NULL;
    H.bk = ly->key_bias >= 0 ? m->tensors[ly->key_bias].data : NULL;
    H.bv = ly->value_bias >= 0 ? m->tensors[ly->value_bias].data : NULL;
    if (H.threads < 1) H.threads = 1;
    if (H.threads > PV_MAX_THREADS) H.threads = PV_MAX_THREADS;
    int rc = head_setup(&H, x);
    if (rc > 0) {
        pv_unproven(N, o->stmt->loc.line, li, "layer %d head %d: not proven: %s", li, h,
                    rc == 2 ? "a key or value that is not finite"
                            : rc == 1 && H.ng ? "more than 2e9 pairs of distinct query groups and key classes"
                                              : "more than 2^22 query or key combinations");
        head_free(&H);
        return 0;
    }
    Work W[PV_MAX_THREADS];
    memset(W, 0, sizeof W);
    H.alpha = calloc((size_t)H.nw + 1, sizeof(double));
    H.beta = calloc((size_t)H.nw + 1, sizeof(double));
    H.resid = calloc((size_t)H.nw + 1, sizeof(double));
    if (rc == 0 && (!H.alpha || !H.beta || !H.resid || work_init(&W[0], &H) < 0)) rc = -1;
    if (rc == 0) {
        mean_fit(&H, H.alpha, H.beta, H.resid);
        rc = queries(&H, W);
    }
    if (rc == 0 && W[0].wild) {
        pv_unproven(N, o->stmt->loc.line, li, "layer %d head %d: not proven: a query or a score that is not finite", li, h);
        work_free(&W[0]);
        head_free(&H);
        return 0;
    }
    if (rc == 0) rc = contributions(&H, &W[0], stage);
    if (rc == 0) {
        TfIv *out = malloc(((size_t)H.nw + 1) * sizeof *out), *tmp = malloc(((size_t)H.nw + 1) * sizeof *tmp);
        if (out && tmp) {
            bos_out(&H, tmp, out);
            for (int w = 0; w < H.nw; w++) bos_add[H.wcol[w]] = iv_add(bos_add[H.wcol[w]], out[w]);
        } else rc = -1;
        free(out), free(tmp);
    }
    const char *dest = N->S->ir->regs[o->dest].name;
    // Keys of different values at different positions, but never two
    // picked at once: a Count numbers the positions the selection picks.
    int numbered = W[0].multi && pv_numbered_selection(N->S, o);
    int multi = W[0].multi && !numbered;
    if (rc == 0 && multi && !has_check(N, o->dest))
        pv_fail(N, o->stmt->loc.line, li, NULL, 0, "line %d: %s -> %s (layer %d head %d): the selection may pick positions holding different values and the file has no run-time check of '%s'", o->stmt->loc.line, tf_ops[o->kind].name, dest, li, h, dest);
    if (rc == 0)
        pv_line(N->P, "line %d: %s -> %s: layer %d head %d: score gap %.3g (selected over others)%s",
                o->stmt->loc.line, tf_ops[o->kind].name, dest, li, h, W[0].gap,
                multi ? "; one value per selection: relies on the run-time check"
                      : numbered ? "; one position per selection: a Count numbers the positions it picks"
                                 : "");
    work_free(&W[0]);
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
