/* prove_seed.c: programs of seed ops (docs/language.md, "Ops"), proven from
 * the weights at the position whose next token is read.
 *
 * What each seed op computes (the page's meaning, at the position p whose
 * next token is read; a register that no op wrote holds no value, a scalar 0):
 *   FindAndStore('c') -> P    P := the position of the one 'c' at or before p
 *   StepPosition(P: n)        P := P + n (mod the period)
 *   GetRelativeToken(P+n) -> T  T := the token at position P + n
 *   Multiply(a, b, carry) -> out  s = digit(a) + digit(b) + carry:
 *                             out := s mod 10, carry := [s >= 10]
 *   Clear(r)                  r := no value (a scalar: min(r, 0))
 *   DiffPos(x, y) -> s        s := s + (0 where x = y, a positive number elsewhere)
 *   IsZero(z)                 z := 1 where z = 0, 0 where z > 0
 *   CopyOnMatch(f, src) -> d  d := src where f = 1 (d had no value), unchanged where f = 0
 * A store into a register that holds a value, or a read of one that holds
 * none, has no meaning: such a program is not proven.
 *
 * Input facts (said in the report, each with the meaning that needs it):
 * every character a FindAndStore finds occurs exactly once at or before p
 * (FindAndStore stores the position of the one); every position a
 * GetRelativeToken reads exists (0 .. p); Multiply's two tokens are digits.
 * Nothing else: the found characters may stand in any order, anywhere, and
 * any token may fill the positions no op reads. Positions run up to the
 * position encoding's last row (or period - 1).
 *
 * How. The base variables are the scenario (each found character's
 * position, and p), the token at
 * p, each GetRelativeToken's token, and "cut" variables: where a register's
 * value depends on two or more data variables (Multiply's out and carry,
 * CopyOnMatch's destination), its columns are re-tabulated over its value
 * (the hull of the columns over every case with that value) and the
 * scenario variables its value depends on, so tables stay small and every
 * correlation through the scenario is kept. Every column at p is a table of
 * intervals over base variables (compiler/prove_col.c); an MLP is evaluated
 * on every combination its inputs depend on (ReLU or the exact GELU);
 * a head is evaluated for every scenario, and every key position 0..p and
 * token, from the embedding rows (its keys and values must read only
 * columns no earlier layer writes, which then hold the embedding at every
 * position). After each op, each register it writes must decode to the
 * meaning above in every case; the output must pick the right token
 * wherever it holds one.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prove_internal.h"
#include "values.h"

static TfIv iv_f32(TfIv a);
static TfIv unit_pre_f32(const float *w1u, const int *idx, int n_idx, const TfIv *x, float bias);

enum { SV_UNK, SV_NONE, SV_POS, SV_TOK, SV_NUM, SV_PLUS, SV_BAD };
typedef struct Sv {
    int k;    /* SV_*: unknown (a variable not given), no value, a position, a token, a number,
                 some positive number, no meaning */
    double x; /* the position, token index or number */
} Sv;

#define MAX_ANCHOR 8

typedef struct Seed {
    PvNet *N;
    PvSem *S;
    const TfIr *ir;
    const TfModel *m;
    int period, maxpos, d, nr;
    int n_anchor, anchor_tok[MAX_ANCHOR], anchor_var[MAX_ANCHOR];
    int v_p, v_tp;  /* the position read; the token at p */
    PvDeps scen;    /* the scenario's variables */
    unsigned char *scen_ok; /* per scenario (an index over scen): no input fact broken by any op */
    int *cut;       /* [op * nr + r]: the variable op's cut made r's value, -1 */
    int *ncut;      /* per op: how many registers its cuts made a variable of */
    int *grt_var;   /* per op: GetRelativeToken's token variable, -1 */
    PvDeps *sdeps;  /* per register: the variables its value depends on */
    int *col, *size; /* per register: first model column, columns (0: absent) */
    Sv *vals[TF_PROOF_MAX_BASE];
    char vname[TF_PROOF_MAX_BASE][96];
    unsigned char *written; /* per column: some earlier layer writes it, other than by a constant (cdelta) */
    TfIv *cdelta;           /* per column: what earlier layers added to it at every position alike (mlp_const) */
    int *wlayer;            /* per column: the one earlier layer that writes it, -1 none, -2 several */
    struct STrack **trk;    /* per layer: followed at every position (strack_build), or NULL */
    unsigned char *need_trk; /* per layer: a later key (or a followed layer's query) reads what it writes */
    /* the first failing case */
    int fail_assign[TF_PROOF_MAX_BASE];
    PvDeps fail_deps;
    int have_fail;
} Seed;

/* Where sem_run reports the last op's read position (GetRelativeToken,
 * FindAndStore), and p. */
typedef struct SemInfo {
    int p, target;
} SemInfo;

static int new_var(Seed *Z, int n, const char *fmt, const char *a, int b) {
    PvSem *S = Z->S;
    if (S->n_base >= TF_PROOF_MAX_BASE || n < 1) return -1;
    int v = S->n_base;
    Z->vals[v] = calloc((size_t)n, sizeof(Sv));
    if (!Z->vals[v]) return -1;
    S->base[v] = (PvBase){.reg = 0, .n = n, .vals = NULL, .has_none = 0, .op = -1};
    snprintf(Z->vname[v], sizeof Z->vname[v], fmt, a, b);
    S->n_base++;
    return v;
}

static int digit_of(const Seed *Z, int t) {
    int c = t >= 0 && t < Z->ir->n_vocab ? Z->ir->vocab[t] : -1;
    return c >= '0' && c <= '9' ? c - '0' : -1;
}

static int token_of_char(const Seed *Z, int ch) {
    for (int t = 0; t < Z->ir->n_vocab; t++)
        if (Z->ir->vocab[t] == ch) return t;
    return -1;
}

static int anchor_index(const Seed *Z, int tok) {
    for (int i = 0; i < Z->n_anchor; i++)
        if (Z->anchor_tok[i] == tok) return i;
    return -1;
}

static const TfOpPlan *plan_of(const Seed *Z, int oi) { return Z->ir->ops[oi].plan; }

/* The value of variable v in assign (SV_UNK when not given). */
static Sv var_val(const Seed *Z, const int *assign, int v) {
    if (v < 0 || assign[v] < 0) return (Sv){SV_UNK, 0};
    return Z->vals[v][assign[v]];
}

static int var_find(const Seed *Z, int v, Sv x) {
    for (int i = 0; i < Z->S->base[v].n; i++)
        if (Z->vals[v][i].k == x.k && Z->vals[v][i].x == x.x) return i;
    return -1;
}

/* One op's meaning on val (see the top). 1: the case breaks an input fact. */
static int sem_op(const Seed *Z, int oi, int *assign, const int *toks, Sv *val, SemInfo *I) {
    const TfIrOp *op = &Z->ir->ops[oi];
    const TfOpPlan *pl = plan_of(Z, oi);
    const TfSeedArg *a = pl->args;
    int dest = op->dest, p = I->p;
    I->target = -1;
    switch (op->op) {
    case TF_OP_FIND_AND_STORE: {
        int i = anchor_index(Z, a[0].tok);
        Sv A = var_val(Z, assign, Z->anchor_var[i]);
        I->target = A.k == SV_POS ? (int)A.x : -1;
        if (val[dest].k == SV_UNK || A.k == SV_UNK) val[dest] = (Sv){SV_UNK, 0};
        else val[dest] = val[dest].k == SV_NONE ? A : (Sv){SV_BAD, 0};
        break;
    }
    case TF_OP_STEP_POSITION:
        for (int k = 0; k < pl->n_args; k++) {
            Sv *x = &val[a[k].reg];
            if (x->k == SV_POS) x->x += (double)a[k].value; // the encoding is periodic; the index is not
        }
        break;
    case TF_OP_GET_RELATIVE_TOKEN: {
        Sv P = val[a[0].reg];
        int v = Z->grt_var[oi];
        if (P.k == SV_NONE || P.k == SV_BAD || val[dest].k == SV_BAD) {
            val[dest] = (Sv){SV_BAD, 0};
            break;
        }
        int t = -1;
        if (P.k == SV_POS) {
            long tl = (long)P.x + a[0].value;
            if (tl < 0 || tl > Z->maxpos) return 1; // the position read exists
            t = (int)tl;
        }
        I->target = t;
        if (t >= 0 && p >= 0 && t > p) return 1;
        if (toks && t >= 0) assign[v] = toks[t];
        int tok = assign[v];
        if (tok >= 0 && t >= 0 && p >= 0) { // the token there: the facts
            int ai = -1;
            for (int i = 0; i < Z->n_anchor; i++) {
                Sv A = var_val(Z, assign, Z->anchor_var[i]);
                if (A.k == SV_POS && (int)A.x == t) ai = i;
            }
            if (ai >= 0 ? tok != Z->anchor_tok[ai] : anchor_index(Z, tok) >= 0) return 1;
            if (t == p && assign[Z->v_tp] >= 0 && assign[Z->v_tp] != tok) return 1;
        }
        if (tok < 0 && t >= 0) // a found character's position holds that character
            for (int i = 0; i < Z->n_anchor; i++) {
                Sv A = var_val(Z, assign, Z->anchor_var[i]);
                if (A.k == SV_POS && (int)A.x == t) tok = Z->anchor_tok[i];
            }
        if (val[dest].k == SV_UNK) break;
        if (val[dest].k != SV_NONE) val[dest] = (Sv){SV_BAD, 0};
        else val[dest] = tok >= 0 ? (Sv){SV_TOK, tok} : (Sv){SV_UNK, 0};
        break;
    }
    case TF_OP_MULTIPLY: {
        Sv x = val[a[0].reg], y = val[a[1].reg], c = val[a[2].reg], *o = &val[dest];
        if ((x.k == SV_TOK && digit_of(Z, (int)x.x) < 0) || (y.k == SV_TOK && digit_of(Z, (int)y.x) < 0))
            return 1; // Multiply reads digits
        if (x.k == SV_UNK || y.k == SV_UNK || c.k == SV_UNK || o->k == SV_UNK) {
            *o = val[a[2].reg] = (Sv){SV_UNK, 0};
            break;
        }
        if (x.k != SV_TOK || y.k != SV_TOK || c.k != SV_NUM || (c.x != 0 && c.x != 1) || o->k != SV_NONE) {
            *o = val[a[2].reg] = (Sv){SV_BAD, 0};
            break;
        }
        int s = digit_of(Z, (int)x.x) + digit_of(Z, (int)y.x) + (int)c.x;
        int t = token_of_char(Z, '0' + s % 10);
        *o = t >= 0 ? (Sv){SV_TOK, t} : (Sv){SV_BAD, 0};
        val[a[2].reg] = (Sv){SV_NUM, s >= 10};
        break;
    }
    case TF_OP_CLEAR:
        for (int k = 0; k < pl->n_args; k++) {
            Sv *x = &val[a[k].reg];
            if (Z->ir->regs[a[k].reg].kind != TF_REG_SCALAR) *x = (Sv){SV_NONE, 0};
            else if (x->k == SV_NUM) x->x = x->x < 0 ? x->x : 0;
            else if (x->k == SV_PLUS) *x = (Sv){SV_NUM, 0};
        }
        break;
    case TF_OP_DIFF_POS: {
        Sv x = val[a[0].reg], y = val[a[1].reg], *s = &val[dest];
        if (x.k == SV_UNK || y.k == SV_UNK || s->k == SV_UNK) *s = (Sv){SV_UNK, 0};
        else if (x.k != SV_POS || y.k != SV_POS || s->k == SV_BAD || (s->k == SV_NUM && s->x < 0)) *s = (Sv){SV_BAD, 0};
        else if (fmod(fabs(x.x - y.x), Z->period) != 0) *s = (Sv){SV_PLUS, 0};
        else if (s->k == SV_NONE) *s = (Sv){SV_NUM, 0};
        break;
    }
    case TF_OP_IS_ZERO: {
        Sv *z = &val[a[0].reg];
        if (z->k == SV_NUM && z->x == 0) *z = (Sv){SV_NUM, 1};
        else if (z->k == SV_PLUS || (z->k == SV_NUM && z->x > 0)) *z = (Sv){SV_NUM, 0};
        else if (z->k != SV_UNK) *z = (Sv){SV_BAD, 0};
        break;
    }
    case TF_OP_COPY_ON_MATCH: {
        Sv f = val[a[0].reg], s = val[a[1].reg], *o = &val[dest];
        if (f.k == SV_UNK || s.k == SV_UNK || o->k == SV_UNK) *o = (Sv){SV_UNK, 0};
        else if (f.k != SV_NUM || (f.x != 0 && f.x != 1) || s.k == SV_BAD || o->k == SV_BAD) *o = (Sv){SV_BAD, 0};
        else if (f.x == 1 && s.k == SV_TOK) *o = o->k == SV_NONE ? s : (Sv){SV_BAD, 0};
        break;
    }
    default: break;
    }
    return 0;
}

/* Every register's value after ops [0, upto] on the variables in assign (-1:
 * not given). With toks (a prompt of p + 1 tokens) the data variables are
 * read from it and written into assign. 1: the case breaks an input fact. */
static int sem_run(const Seed *Z, int upto, int *assign, const int *toks, Sv *val, SemInfo *I) {
    Sv Pv = var_val(Z, assign, Z->v_p);
    int p = Pv.k == SV_NUM ? (int)Pv.x : -1;
    for (int i = 0; i < Z->n_anchor; i++) { // once each, at or before p
        Sv A = var_val(Z, assign, Z->anchor_var[i]);
        if (A.k != SV_POS) continue;
        if (p >= 0 && A.x > p) return 1;
        for (int k = 0; k < i; k++) {
            Sv B = var_val(Z, assign, Z->anchor_var[k]);
            if (B.k == SV_POS && B.x == A.x) return 1;
        }
    }
    if (p > Z->maxpos) return 1;
    if (Z->scen_ok) { // a scenario some op's facts exclude: whatever op upto is
        int all = 1;
        for (int b = 0; b < Z->S->n_base && all; b++)
            if (Z->scen >> b & 1) all = assign[b] >= 0;
        if (all && !Z->scen_ok[pv_deps_index(Z->S, Z->scen, assign)]) return 1;
    }
    if (toks && p >= 0) assign[Z->v_tp] = toks[p];
    int tp = assign[Z->v_tp];
    if (tp >= 0 && p >= 0) {
        int ai = -1;
        for (int i = 0; i < Z->n_anchor; i++) {
            Sv A = var_val(Z, assign, Z->anchor_var[i]);
            if (A.k == SV_POS && (int)A.x == p) ai = i;
        }
        if (ai >= 0 ? tp != Z->anchor_tok[ai] : anchor_index(Z, tp) >= 0) return 1;
    }
    for (int r = 0; r < Z->nr; r++)
        val[r] = Z->ir->regs[r].kind == TF_REG_SCALAR ? (Sv){SV_NUM, 0} : (Sv){SV_NONE, 0};
    val[TF_IR_REG_TOKENS] = tp >= 0 ? (Sv){SV_TOK, tp} : (Sv){SV_UNK, 0};
    val[TF_IR_REG_POS] = p >= 0 ? (Sv){SV_POS, p} : (Sv){SV_UNK, 0};
    SemInfo J = {p, -1};
    for (int j = 0; j <= upto; j++) {
        if (sem_op(Z, j, assign, toks, val, &J)) return 1;
        for (int r = 0; r < Z->nr && Z->ncut[j]; r++) {
            int v = Z->cut[(size_t)j * Z->nr + r];
            if (v < 0) continue;
            if (toks) assign[v] = val[r].k == SV_UNK ? -1 : var_find(Z, v, val[r]);
            val[r] = var_val(Z, assign, v);
        }
    }
    if (I) *I = J;
    return 0;
}

static void sv_label(const Seed *Z, Sv x, char *buf, size_t n) {
    char tb[64];
    switch (x.k) {
    case SV_NONE: snprintf(buf, n, "no value"); break;
    case SV_POS: snprintf(buf, n, "position %d", (int)x.x); break;
    case SV_TOK: snprintf(buf, n, "'%s'", model_token_name(Z->m, (int)x.x, tb)); break;
    case SV_NUM: snprintf(buf, n, "%g", x.x); break;
    case SV_PLUS: snprintf(buf, n, "a positive number"); break;
    case SV_BAD: snprintf(buf, n, "no meaning"); break;
    default: snprintf(buf, n, "unknown");
    }
}

/* Interval GELU, x Phi(x): decreasing below its minimum at -0.75179..
 * (-0.16997..), increasing above; the engine within 1.4e-7 max(1, |GELU|)
 * (runtime/engine/kernels.c), taken as 2e-7, and x exactly from 8 up (its
 * 0.5 x (2 - erfc(x / sqrt 2)): an erfc below 1e-13 leaves 2 - erfc at 2,
 * and the seed's GELU(1000 + z) - 1000 relies on it). */
static double gelu_d(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static TfIv iv_gelu(TfIv z) {
    if (z.lo >= 8) return z; // the engine's 0.5 x (2 - erfc): 2 - erfc rounds to 2, x exactly
    const double xm = -0.7517916, gmin = -0.1699712; // below the true minimum -0.16997120...
    double a = gelu_d(z.lo), b = gelu_d(z.hi);
    TfIv r;
    if (z.hi <= xm) r = (TfIv){b, a};
    else if (z.lo >= xm) r = (TfIv){a, b};
    else r = (TfIv){gmin - 1e-7, iv_max(a, b)};
    double e = 2e-7 * iv_max(1.0, iv_mag(r)) + 1e-15 * iv_mag(r);
    return iv_widen(r, e);
}

/* Float32 rounding to nearest is monotone: a float known to be the rounding
 * of a real in [lo, hi] (or to lie there itself) lies in [f32(lo), f32(hi)].
 * The bounds are moved outward first, so that the double arithmetic that
 * made them is covered too. Float32's subnormals are rounded to in double:
 * the proof runs with the hardware flushing them (compiler/prove.c). */
static double f32_round(double x) {
    if (fabs(x) < FLT_MIN) return rint(x * 0x1p149) * 0x1p-149; // to float32's subnormal grid (nearest, ties even)
    return fabs(x) <= FLT_MAX ? (double)(float)x : x;
}
static double f32_lo(double lo) { return f32_round(iv_down(lo)); }
static double f32_hi(double hi) { return f32_round(iv_up(hi)); }
static TfIv iv_f32(TfIv a) { return (TfIv){f32_lo(a.lo), f32_hi(a.hi)}; }

/* A unit's pre-activation as the engine forms it: the float32 dot product
 * S of its weights and the row, in any order (within iv_sum_err of the
 * exact one), then its bias added last and rounded once
 * (runtime/engine/linear.c, as PyTorch's addmm). Where the unit is on its
 * exact side (ReLU at or above 0, the engine's GELU at or above 8), its
 * output is this float itself; the seed's StepPosition, GELU(x R + 1000)
 * - 1000, rounds x R + 1000 to float32's grid at 1000 once, so knowing S
 * within far less than that grid gives the one float it rounds to. */
static TfIv unit_pre_f32(const float *w1u, const int *idx, int n_idx, const TfIv *x, float bias) {
    TfIv s = iv_pt(0);
    double pos = 0, neg = 0;
    int n = 0, exact = 1; // one term by a power of two (a value copying a column) is exact
    for (int k = 0; k < n_idx; k++) {
        int c = idx ? idx[k] : k;
        if (w1u[c] == 0) continue;
        TfIv t = iv_scale(x[c], w1u[c]);
        s = iv_add(s, t);
        pos += fmax(t.hi, 0), neg += fmax(-t.lo, 0), n++;
        int e;
        exact &= fabs(frexp((double)w1u[c], &e)) == 0.5;
    }
    exact &= n == 1 && (pos + neg == 0 || (pos + neg >= 1e-30 && pos + neg <= 1e30));
    if (n > 0 && !exact) s = iv_widen(s, iv_sum_err(pos, neg, n));
    return iv_f32(iv_add(s, iv_pt(bias)));
}

/* The column a single unit u writes (its only nonzero fc2 weight wt), the
 * unit exact on h: the product wt h (exact in double, then rounded once),
 * the output bias added last and rounded, and the residual x + y rounded
 * (self: the layer reads and writes the column; else y alone, which the
 * caller adds). Sums of zeros the engine adds beside it are exact. */
static TfIv unit_col_f32(TfIv h, double wt, const float *b2, int c, int self, TfIv x) {
    TfIv y = wt >= 0 ? (TfIv){wt * h.lo, wt * h.hi} : (TfIv){wt * h.hi, wt * h.lo};
    y = iv_f32(y);
    if (b2) y = iv_f32(iv_add(y, iv_pt(b2[c])));
    return self ? iv_f32(iv_add(x, y)) : y;
}

/* Every entry exactly 0 (the seed's GELU(1000) - 1000 on a column its
 * StepPosition does not move), or no case's (NaN: an input fact excludes
 * it, scen_ok): adding it changes no float, and keeps the column's table
 * over its own variables. */
static int col_zero(const PvCol *c) {
    for (long i = 0; i < c->n; i++)
        if (!(c->v[i].lo == 0 && c->v[i].hi == 0) && !isnan(c->v[i].lo)) return 0;
    return 1;
}

/* Each unit's nonzero weights: the returned nzc[nzo[u] .. nzo[u + 1]]
 * (NULL when memory runs out). */
static int *unit_nonzeros(const float *w1, int F, int d, int *nzo) {
    if (!nzo) return NULL;
    size_t nnz = 0;
    for (size_t i = 0; i < (size_t)F * d; i++) nnz += w1[i] != 0;
    int *nzc = malloc((nnz + 1) * sizeof *nzc);
    nzo[0] = 0;
    for (int u = 0; u < F && nzc; u++) {
        nzo[u + 1] = nzo[u];
        for (int c = 0; c < d; c++)
            if (w1[(size_t)u * d + c] != 0) nzc[nzo[u + 1]++] = c;
    }
    return nzc;
}

/* The columns an MLP writes (a unit's weight or the bias) into wc, and
 * for each the one unit that writes it, or -1 (none, or several). */
static int written_cols(const float *w2, const float *b2, int F, int d, int *wc, int *one) {
    int nw = 0;
    for (int c = 0; c < d; c++) {
        int nu = 0, u1 = -1;
        for (int u = 0; u < F; u++)
            if (w2[(size_t)c * F + u] != 0) u1 = u, nu++;
        if (nu == 0 && !(b2 && b2[c] != 0)) continue;
        one[nw] = nu == 1 ? u1 : -1;
        wc[nw++] = c;
    }
    return nw;
}

/* An MLP's new columns into the net: a column it reads is replaced (the
 * residual is in add), another has add added (nothing where add is 0). */
static int install_cols(PvNet *N, const unsigned char *reads, const int *wc, int nw, PvCol *add) {
    for (int k = 0; k < nw; k++) {
        if (reads[wc[k]]) { // the new column itself
            pv_col_free(&N->col[wc[k]]);
            N->col[wc[k]] = add[k];
            memset(&add[k], 0, sizeof add[k]);
        } else if (!col_zero(&add[k]) && pv_col_add(N, &N->col[wc[k]], &add[k]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* An MLP layer on every combination of what its units read. A unit whose
 * pre-activation keeps to its linear side on the whole box (ReLU at or
 * above 0; GELU at or above 6, where x - GELU(x) = x Phi(-x) is under
 * 1e-8) is composed with the others' into one affine form before it is
 * evaluated, and so is the residual of a column the layer reads and writes:
 * IsZero's v - GELU(v + 10) + 10 cancels exactly instead of doubling v's
 * width. The rest are intervals. A column one unit on its exact side
 * writes is also rounded as the engine rounds it (unit_col_f32), and the
 * two enclosures intersected: the affine form keeps what the residual and
 * the unit share (Clear's x - ReLU(x) is 0, not x's width). */
static int seed_mlp(Seed *Z, int li) {
    PvNet *N = Z->N;
    const TfModel *m = Z->m;
    const TfLayer *ly = &m->layers[li];
    int d = Z->d, F = ly->d_hidden, gelu = ly->act == TF_ACT_GELU;
    if (!gelu && ly->act != TF_ACT_RELU) {
        pv_unproven(N, ly->line, li, "layer %d (%s): not proven: a %s MLP (ReLU and the exact GELU are)", li,
                    ly->name, tf_activation_names[ly->act]);
        return 0;
    }
    const float *w1 = m->tensors[ly->fc1_weight].data, *w2 = m->tensors[ly->fc2_weight].data;
    const float *b1 = ly->fc1_bias >= 0 ? m->tensors[ly->fc1_bias].data : NULL;
    const float *b2 = ly->fc2_bias >= 0 ? m->tensors[ly->fc2_bias].data : NULL;
    unsigned char *reads = malloc((size_t)d), *w = calloc((size_t)d, 1);
    TfIv *x = calloc((size_t)d, sizeof *x), *z = calloc((size_t)F + 1, sizeof *z), *tz = calloc((size_t)F + 1, sizeof *tz);
    double *rw = calloc((size_t)F + 1, sizeof *rw), *coef = calloc((size_t)d, sizeof *coef),
           *cmag = calloc((size_t)d, sizeof *cmag);
    int *wc = malloc(((size_t)d + 1) * sizeof *wc), nw = 0, rc = 0, *one = malloc(((size_t)d + 1) * sizeof *one);
    PvCol *add = calloc((size_t)d + 1, sizeof *add);
    int *nzo = malloc(((size_t)F + 1) * sizeof *nzo), *touch = malloc(((size_t)d + 1) * sizeof *touch);
    int *nzc = unit_nonzeros(w1, F, d, nzo);
    rc = -(!reads || !w || !x || !z || !tz || !rw || !coef || !cmag || !wc || !add || !one || !nzo || !nzc || !touch);
    PvDeps D = rc ? 0 : pv_read_cols(N, w1, 0, F, reads);
    long n = pv_deps_size(Z->S, D, PV_TABLE_LIMIT);
    if (rc == 0 && n < 0) {
        pv_unproven(N, ly->line, li, "layer %d: not proven: its units read more than 2^22 combinations", li);
        n = 0;
    }
    if (rc == 0) {
        nw = written_cols(w2, b2, F, d, wc, one);
        for (int k = 0; k < nw && rc == 0 && n > 0; k++) rc = pv_col_set(&add[k], D, n);
    }
    int assign[TF_PROOF_MAX_BASE];
    for (long i = 0; i < n && rc == 0; i++) {
        pv_deps_decode(Z->S, D, i, assign);
        int dead = 0;
        for (int c = 0; c < d; c++)
            if (reads[c]) x[c] = pv_col_get(N, &N->col[c], assign), dead |= isnan(x[c].lo);
        for (int u = 0; u < F && !dead; u++) {
            TfIv s = iv_pt(b1 ? b1[u] : 0);
            double mag = fabs(s.lo);
            int cnt = 1;
            for (int e = nzo[u]; e < nzo[u + 1]; e++) {
                int c = nzc[e];
                float wt = w1[(size_t)u * d + c];
                s = iv_add(s, iv_scale(x[c], wt));
                mag += fabs(wt) * iv_mag(x[c]);
                cnt++;
            }
            rw[u] = iv_gamma(cnt) * mag;
            z[u] = iv_widen(s, rw[u]);
            tz[u] = unit_pre_f32(w1 + (size_t)u * d, nzc + nzo[u], nzo[u + 1] - nzo[u], x, b1 ? b1[u] : 0);
        }
        for (int k = 0; k < nw; k++) {
            if (dead) {
                add[k].v[i] = (TfIv){NAN, NAN};
                continue;
            }
            int c = wc[k], self = reads[c]; // self: the residual joins the affine form
            // One exact unit: the column as the engine rounds it, intersected below with the affine form
            int u1 = one[k], ex = u1 >= 0 && (gelu ? tz[u1].lo >= 8 : tz[u1].lo >= 0);
            TfIv yex = ex ? unit_col_f32(tz[u1], w2[(size_t)c * F + u1], b2, c, self, self ? x[c] : iv_pt(0))
                          : iv_pt(0);
            double bias = b2 ? b2[c] : 0, cst = bias, slack = 0, mag = fabs(bias);
            double pos = fmax(bias, 0), neg = fmax(-bias, 0); // the terms' sums by sign, for iv_sum_err
            TfIv nonlin = iv_pt(0);
            int nt = 0, nterm = 1, ntouch = 0;
            if (self) coef[c] += 1, cmag[c] += 1, touch[ntouch++] = c;
            for (int u = 0; u < F; u++) {
                double wt = w2[(size_t)c * F + u];
                if (wt == 0) continue;
                TfIv h = gelu ? iv_gelu(z[u]) : iv_relu(z[u]);
                mag += fabs(wt) * iv_mag(h);
                TfIv th = iv_scale(h, wt);
                pos += fmax(th.hi, 0), neg += fmax(-th.lo, 0), nterm++;
                int lin = gelu ? z[u].lo >= 6 : z[u].lo >= 0;
                if (!lin) {
                    nonlin = iv_add(nonlin, iv_scale(h, wt));
                    continue;
                }
                if (gelu && z[u].lo < 8) { // GELU(z) = z - z Phi(-z), within the engine's 2e-7 max(1, |GELU|) (at 8 and above: z exactly)
                    double e = z[u].lo * 0.5 * erfc(z[u].lo / sqrt(2.0)) * 1.01 + 1e-300;
                    double err = 2e-7 * iv_max(1.0, iv_mag(h));
                    nonlin = iv_add(nonlin, iv_scale((TfIv){-e - err, err}, wt));
                }
                slack += fabs(wt) * rw[u];
                cst += wt * (b1 ? b1[u] : 0);
                nt++;
                for (int e = nzo[u]; e < nzo[u + 1]; e++) {
                    int j = nzc[e];
                    float a = w1[(size_t)u * d + j];
                    if (cmag[j] == 0) touch[ntouch++] = j;
                    coef[j] += wt * a;
                    cmag[j] += fabs(wt * a);
                }
            }
            TfIv y = iv_add(nonlin, iv_pt(cst));
            double dbl = (nt + 3) * 2.3e-16; // the double sums of the composed coefficients
            slack += dbl * (fabs(cst) + fabs(bias));
            for (int e = 0; e < ntouch; e++) {
                int j = touch[e];
                if (cmag[j] == 0) continue;
                y = iv_add(y, iv_scale(x[j], coef[j]));
                slack += dbl * cmag[j] * iv_mag(x[j]);
                coef[j] = cmag[j] = 0;
            }
            y = iv_widen(y, slack + iv_min(iv_gamma(F + 1) * mag, iv_sum_err(pos, neg, nterm)));
            if (self) y = iv_widen(y, TF_F32_U * iv_mag(y)); // the residual's addition
            if (ex && yex.lo <= y.hi && y.lo <= yex.hi) y = (TfIv){iv_max(y.lo, yex.lo), iv_min(y.hi, yex.hi)};
            add[k].v[i] = y;
        }
    }
    if (rc == 0 && n > 0) rc = install_cols(N, reads, wc, nw, add);
    for (int k = 0; add && k < nw; k++) pv_col_free(&add[k]);
    free(reads), free(w), free(x), free(z), free(tz), free(rw), free(coef), free(cmag), free(wc), free(add);
    free(one), free(nzo), free(nzc), free(touch);
    return rc;
}

static void note_fail(Seed *Z, const int *assign, PvDeps D) {
    if (Z->have_fail) return;
    Z->have_fail = 1;
    Z->fail_deps = D;
    memcpy(Z->fail_assign, assign, sizeof Z->fail_assign);
}

/* A set of fixed-length byte strings (query scenarios seen). */
typedef struct Seen {
    size_t len, cap, n;
    unsigned char *keys;
    long *slot;
} Seen;

static uint64_t fnv1a(const unsigned char *b, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* k's index in the set, added when new (-1: new and the set is full). */
static long seen_index(Seen *T, const unsigned char *k) {
    size_t i = (size_t)(fnv1a(k, T->len) % (2 * T->cap));
    for (; T->slot[i] >= 0; i = (i + 1) % (2 * T->cap))
        if (memcmp(T->keys + (size_t)T->slot[i] * T->len, k, T->len) == 0) return T->slot[i];
    if (T->n == T->cap) return -1;
    T->slot[i] = (long)T->n;
    memcpy(T->keys + T->n * T->len, k, T->len);
    return (long)T->n++;
}

#define PV_EXP_REL 3e-7 /* runtime/engine/exp_vec.h: 2 ulp of expf (as compiler/prove_attn.c) */

/* Queries' scores against every key vector, in midpoint-radius form
 * (q = m + r e, |e| <= 1, K_v's entries that are not (near) zero):
 * scale q . K_v lies in E_v = scale (m . K_v) widened by
 * scale (r . |K_v| + tiny_v) + (g + u)(|q| . |K_v| + tiny_v), with the
 * engine's rounding (shead_diff's terms split per key), so a score
 * difference is E_a - E_b and the hull over the other tokens of a
 * position is one interval, Hj (for the oth[] it was made for). A head's
 * many (position, target) cases of one query share them: one slot per
 * query id (shead_cache), direct-mapped where they do not all fit, and
 * one slot for a query without an id, found by its value. */
typedef struct SQCache {
    int nslot;
    long *tag;            /* [nslot]: the query id held; -1 none, -2 the value in q */
    unsigned char *hv;    /* [nslot]: Hj is for oth */
    unsigned char *oth;   /* [nslot][nt] */
    TfIv *q;              /* [D]: the query of the last slot */
    TfIv *E;              /* [nslot][nt * np] */
    TfIv *Hj;             /* [nslot][np]: hull of E over the tokens in oth */
    int uhv;              /* UH is for uoth */
    unsigned char uoth[256];
    TfIv *UH;             /* [np][nw]: shead_uhull */
} SQCache;

/* A seed op's head: keys and values from the embedding rows. */
typedef struct SHead {
    int d, D, DV, nt, np, nw; /* d: the model's width */
    float scale;
    TfIv *K;      /* [t][j][D] */
    int *nzn, *nzi; /* per key vector: how many entries are not (near) zero, and which: nzi[v * D ..] */
    double *nzt;  /* per key vector: the sum of the others' magnitudes */
    TfIv *U;      /* [t][j][nw] */
    int *wcol;
    double wmag;
    const float *wq, *bq;
    unsigned char *rq;
    int direct;   /* no output projection: the head's output is its weighted values */
    SQCache *qc;  /* the queries' scores (shead_prep) */
    int *wqo, *wqi; /* the query rows' nonzero entries (unit_nonzeros) */
} SHead;


/* w . x + bias with float32's rounding, over w's nonzero entries nz[0..n)
 * (unit_nonzeros), in order. */
static TfIv row_dot(const float *w, const int *nz, int n, const TfIv *x, float bias) {
    TfIv s = iv_pt(bias);
    double mag = fabs(bias);
    for (int i = 0; i < n; i++) {
        int c = nz[i];
        s = iv_add(s, iv_scale(x[c], w[c]));
        mag += fabs(w[c]) * iv_mag(x[c]);
    }
    return iv_widen(s, iv_gamma(n + 1) * mag);
}

/* Entry i of the query of residual row x. */
static TfIv shead_query(const SHead *H, int i, const TfIv *x) {
    int o = H->wqo[i], n = H->wqo[i + 1] - o;
    return row_dot(H->wq + (size_t)i * H->d, H->wqi + o, n, x, H->bq ? H->bq[i] : 0);
}

/* Keys and values of every token at every position, from the embedding. */
static int shead_keys(Seed *Z, const TfLayer *ly, SHead *H) {
    const TfModel *m = Z->m;
    int d = Z->d, D = H->D, DV = H->DV;
    const float *te = m->tensors[m->tok_embed].data, *pe = m->tensors[m->pos_embed].data;
    const float *wk = m->tensors[ly->key].data, *wv = m->tensors[ly->value].data;
    const float *wo = ly->output >= 0 ? m->tensors[ly->output].data : NULL;
    const float *bk = ly->key_bias >= 0 ? m->tensors[ly->key_bias].data : NULL;
    const float *bv = ly->value_bias >= 0 ? m->tensors[ly->value_bias].data : NULL;
    int n_out = ly->n_heads * DV;
    H->K = malloc((size_t)H->nt * H->np * D * sizeof *H->K);
    H->U = malloc((size_t)H->nt * H->np * (H->nw + 1) * sizeof *H->U);
    TfIv *x = malloc((size_t)d * sizeof *x), *v = malloc(((size_t)DV + 1) * sizeof *v);
    int *kno = malloc(((size_t)D + 1) * sizeof *kno), *kni = unit_nonzeros(wk, D, d, kno);
    H->wqo = malloc(((size_t)D + 1) * sizeof *H->wqo);
    H->wqi = unit_nonzeros(H->wq, D, d, H->wqo);
    if (!H->K || !H->U || !x || !v || !kni || !H->wqi) {
        free(x), free(v), free(kno), free(kni);
        return -1;
    }
    for (int t = 0; t < H->nt; t++)
        for (int j = 0; j < H->np; j++) {
            for (int c = 0; c < d; c++) {
                double e = (double)te[(size_t)t * d + c] + (double)pe[(size_t)j * d + c];
                x[c] = iv_add(iv_f32(iv_pt(e)), Z->cdelta[c]); // the float token + position row
            }
            TfIv *k = H->K + ((size_t)t * H->np + (size_t)j) * D, *u = H->U + ((size_t)t * H->np + (size_t)j) * H->nw;
            for (int i = 0; i < D; i++) k[i] = row_dot(wk + (size_t)i * d, kni + kno[i], kno[i + 1] - kno[i], x, bk ? bk[i] : 0);
            for (int i = 0; i < DV; i++) v[i] = unit_pre_f32(wv + (size_t)i * d, NULL, d, x, bv ? bv[i] : 0);
            for (int w = 0; w < H->nw; w++) {
                int c = H->wcol[w];
                H->direct = !wo;
                if (!wo) {
                    u[w] = v[c];
                    H->wmag = fmax(H->wmag, iv_mag(u[w]));
                    continue;
                }
                TfIv s = iv_pt(0);
                double mag = 0;
                for (int i = 0; i < DV; i++) {
                    float o = wo[(size_t)c * n_out + i];
                    s = iv_add(s, iv_scale(v[i], o));
                    mag += fabs(o) * iv_mag(v[i]);
                }
                u[w] = s;
                H->wmag = fmax(H->wmag, mag);
            }
        }
    free(x), free(v), free(kno), free(kni);
    size_t nv = (size_t)H->nt * H->np;
    H->nzn = malloc(nv * sizeof *H->nzn + 1), H->nzi = malloc(nv * D * sizeof *H->nzi + 1);
    H->nzt = calloc(nv + 1, sizeof *H->nzt);
    H->qc = NULL;
    if (!H->nzn || !H->nzi || !H->nzt) return -1;
    for (size_t k = 0; k < nv; k++) {
        H->nzn[k] = 0;
        for (int i = 0; i < D; i++) {
            double a = iv_mag(H->K[k * D + i]);
            if (a < 1e-280) H->nzt[k] += a;
            else H->nzi[k * D + H->nzn[k]++] = i;
        }
    }
    return 0;
}

static void sqcache_free(SQCache *c) {
    if (c) free(c->tag), free(c->hv), free(c->oth), free(c->q), free(c->E), free(c->Hj), free(c->UH);
    free(c);
}

/* Room for n query ids (fewer where their scores would pass 2^21
 * intervals) and one query without an id. -1: out of memory. */
static int shead_cache(SHead *H, long n) {
    size_t nv = (size_t)H->nt * (size_t)H->np, room = ((size_t)1 << 21) / (nv + 1);
    size_t ns = (size_t)(n < 0 ? 0 : n);
    if (ns > room) ns = room;
    ns++;
    sqcache_free(H->qc);
    SQCache *c = H->qc = calloc(1, sizeof *c);
    if (!c) return -1;
    c->nslot = (int)ns;
    c->tag = malloc(ns * sizeof *c->tag);
    c->hv = calloc(ns, 1);
    c->oth = malloc(ns * (size_t)H->nt + 1);
    c->q = malloc((size_t)H->D * sizeof *c->q + 1);
    c->E = malloc(ns * nv * sizeof *c->E);
    c->Hj = malloc(ns * (size_t)H->np * sizeof *c->Hj);
    c->UH = malloc((size_t)H->np * ((size_t)H->nw + 1) * sizeof *c->UH);
    if (!c->tag || !c->hv || !c->oth || !c->q || !c->E || !c->Hj || !c->UH) return -1;
    for (size_t i = 0; i < ns; i++) c->tag[i] = -1;
    return 0;
}

static void hull_nan(TfIv *t, TfIv x) {
    if (isnan(t->lo)) *t = x;
    else *t = iv_hull(*t, x);
}

/* scale * (q . (k - r)) with the engine's rounding of both scores (each
 * within scale gamma_D sum |q||k| + u |score| of scale q . k). */
static TfIv shead_diff(const SHead *H, const TfIv *q, double qmax, const TfIv *k, const TfIv *r) {
    TfIv s = iv_pt(0);
    double mk = 0, mr = 0;
    size_t ka = (size_t)(k - H->K) / (size_t)H->D, kb = (size_t)(r - H->K) / (size_t)H->D;
    const int *ia = H->nzi + ka * (size_t)H->D, *ib = H->nzi + kb * (size_t)H->D;
    int na = H->nzn[ka], nb = H->nzn[kb], x = 0, y = 0;
    while (x < na || y < nb) { // the entries not (near) zero in either
        int i = y >= nb || (x < na && ia[x] < ib[y]) ? ia[x] : ib[y];
        x += x < na && ia[x] == i;
        y += y < nb && ib[y] == i;
        s = iv_add(s, iv_mul(q[i], iv_sub(k[i], r[i])));
        mk += iv_mag(q[i]) * iv_mag(k[i]);
        mr += iv_mag(q[i]) * iv_mag(r[i]);
    }
    double tiny = qmax * (H->nzt[ka] + H->nzt[kb]); // the others' products with q, as a width
    s = iv_scale(iv_widen(s, iv_up(tiny)), H->scale);
    double g = iv_gamma(H->D) * H->scale, u = 2 * TF_F32_U * H->scale;
    return iv_widen(s, (g + u) * (mk + mr + tiny));
}

static void shead_free(SHead *H) {
    free(H->rq), free(H->wcol), free(H->K), free(H->U), free(H->nzn), free(H->nzi), free(H->nzt);
    sqcache_free(H->qc);
    free(H->wqo), free(H->wqi);
}

/* The slot of query q (its id qid, or -1) with its scores against every
 * key vector (SQCache), computed unless there already; -1 where there is
 * no cache or q is not finite (shead_diff then). */
static int shead_prep(const SHead *H, const TfIv *q, long qid) {
    SQCache *c = H->qc;
    size_t D = (size_t)H->D, nv = (size_t)H->nt * (size_t)H->np;
    if (!c || D > 256 || H->nt > 256) return -1;
    int sl = qid >= 0 && c->nslot > 1 ? (int)(qid % (c->nslot - 1)) : c->nslot - 1;
    if (qid >= 0 && c->tag[sl] == qid) return sl;
    if (qid < 0 && c->tag[sl] == -2 && memcmp(c->q, q, D * sizeof *q) == 0) return sl;
    c->tag[sl] = -1, c->hv[sl] = 0;
    double m[256], r[256], g[256], qmax = 0;
    for (size_t i = 0; i < D; i++) {
        m[i] = iv_mid(q[i]);
        r[i] = iv_up(fmax(q[i].hi - m[i], m[i] - q[i].lo));
        g[i] = iv_mag(q[i]);
        if (!isfinite(m[i]) || !isfinite(r[i])) return -1;
        qmax = fmax(qmax, g[i]);
    }
    double ga = iv_up(iv_gamma(H->D) * H->scale + 2 * TF_F32_U * H->scale);
    TfIv *E = c->E + (size_t)sl * nv;
    for (size_t v = 0; v < nv; v++) {
        const TfIv *k = H->K + v * D;
        const int *nz = H->nzi + v * D;
        TfIv a = iv_pt(0);
        double R = 0, M = 0, tiny = iv_up(qmax * H->nzt[v]);
        for (int x = 0; x < H->nzn[v]; x++) {
            int i = nz[x];
            a = iv_add(a, iv_scale(k[i], m[i]));
            double km = iv_mag(k[i]);
            R = iv_up(R + iv_up(r[i] * km));
            M = iv_up(M + iv_up(g[i] * km));
        }
        TfIv s = iv_scale(iv_widen(a, iv_up(R + tiny)), H->scale);
        E[v] = iv_widen(s, iv_up(ga * iv_up(M + tiny)));
    }
    if (qid < 0) memcpy(c->q, q, D * sizeof *q);
    c->tag[sl] = qid >= 0 ? qid : -2;
    return sl;
}

/* Slot sl's Hj for oth[] (its scores prepared: shead_prep). */
static const TfIv *shead_hull(const SHead *H, int sl, const unsigned char *oth) {
    SQCache *c = H->qc;
    unsigned char *o = c->oth + (size_t)sl * H->nt;
    TfIv *Hj = c->Hj + (size_t)sl * H->np;
    const TfIv *E = c->E + (size_t)sl * H->nt * H->np;
    if (c->hv[sl] && memcmp(o, oth, (size_t)H->nt) == 0) return Hj;
    memcpy(o, oth, (size_t)H->nt);
    for (int j = 0; j < H->np; j++) {
        int any = 0;
        for (int k = 0; k < H->nt; k++) {
            if (!oth[k]) continue;
            TfIv e = E[(size_t)k * H->np + (size_t)j];
            Hj[j] = any ? iv_hull(Hj[j], e) : e;
            any = 1;
        }
        if (!any) Hj[j] = (TfIv){NAN, NAN};
    }
    c->hv[sl] = 1;
    return Hj;
}

/* Each key's score minus the selected key's (position t, token k0) for
 * query q at p, into dj[0..p] (the selected's own: -inf); ex (NULL: none):
 * what the columns earlier layers wrote add to each position's score
 * (shead_ex). Returns the highest. */
static double shead_scores(const SHead *H, const TfIv *q, long qid, int p, int t, int k0,
                           const unsigned char *oth, const TfIv *ex, TfIv *dj) {
    const TfIv *kr = H->K + ((size_t)k0 * H->np + (size_t)t) * H->D;
    double top = -INFINITY, qmax = 0;
    int sl = shead_prep(H, q, qid);
    const TfIv *Hj = sl >= 0 ? shead_hull(H, sl, oth) : NULL;
    TfIv er = iv_pt(0);
    if (Hj) er = H->qc->E[((size_t)sl * H->nt + (size_t)k0) * H->np + (size_t)t];
    else
        for (int i = 0; i < H->D; i++) qmax = fmax(qmax, iv_mag(q[i]));
    for (int j = 0; j <= p; j++) {
        int any = 0;
        if (Hj && j != t && !isnan(Hj[j].lo)) {
            dj[j] = iv_sub(Hj[j], er);
            any = 1;
        }
        for (int k = 0; k < H->nt && j != t && !Hj; k++) {
            if (!oth[k]) continue;
            TfIv x = shead_diff(H, q, qmax, H->K + ((size_t)k * H->np + (size_t)j) * H->D, kr);
            dj[j] = any ? iv_hull(dj[j], x) : x;
            any = 1;
        }
        if (!any) dj[j] = (TfIv){-INFINITY, -INFINITY};
        else if (ex) dj[j] = iv_add(dj[j], iv_sub(ex[j], ex[t]));
        top = fmax(top, dj[j].hi);
    }
    return top;
}

/* The head's output given the scores dj (shead_scores, top their highest)
 * of a query at p selecting position t (its token k0 or, where they share
 * k0's key, any other of sel[]), the others any token of oth[]; hulled
 * into tab over the result variable: tab[res * nw + w] (res < 0: per
 * selected token). The softmax is taken relative to the selected key:
 * each other key's weight over the selected one's is exp(s_j - s_sel), so
 * the scores' common error (the query's) cancels. */
/* The hull over the tokens of oth[] of position j's output vector (U)
 * into h (nw intervals; unchanged where oth[] is empty). */
static void u_hull(const SHead *H, const unsigned char *oth, int j, TfIv *h) {
    int any = 0;
    for (int k = 0; k < H->nt; k++) {
        if (!oth[k]) continue;
        const TfIv *u = H->U + ((size_t)k * H->np + (size_t)j) * H->nw;
        for (int w = 0; w < H->nw; w++) h[w] = any ? iv_hull(h[w], u[w]) : u[w];
        any = 1;
    }
}

/* The hull over the tokens of oth[] of each position's output vector
 * (U), per position: UH[j * nw + w]; NULL without a cache (shead_cache). */
static const TfIv *shead_uhull(const SHead *H, const unsigned char *oth) {
    SQCache *c = H->qc;
    if (!c || H->nt > 256) return NULL;
    if (c->uhv && memcmp(c->uoth, oth, (size_t)H->nt) == 0) return c->UH;
    memcpy(c->uoth, oth, (size_t)H->nt);
    for (int j = 0; j < H->np; j++) u_hull(H, oth, j, c->UH + (size_t)j * H->nw);
    c->uhv = 1;
    return c->UH;
}

static void shead_out(const SHead *H, const TfIv *dj, double top, int p, int t, int k0, const unsigned char *sel,
                      const unsigned char *oth, int res, TfIv *tab, unsigned char *done, TfIv *buf) {
    TfIv *A = buf + H->np, *Uj = A + H->nw;
    const TfIv *kr = H->K + ((size_t)k0 * H->np + (size_t)t) * H->D;
    const TfIv *UH = shead_uhull(H, oth);
    double dm = fmax(0, top), floor_hi = 1.7e-38 * exp(dm) * 2;
    TfIv B = iv_pt(0);
    for (int w = 0; w < H->nw; w++) A[w] = iv_pt(0);
    /* The float sums (softmax denominator, weighted values): an addition
       errs by at most u |result| and at most |its smaller operand| (that
       operand's other side is a float), so over any order a sum of n
       terms, n_big of them at least u of the total, errs by at most
       n_big u M + (n + 1) (the small terms' sum); doubled for the
       second order. The weights relative to the selected key's: r_j.
       Every other key more than 87 below the selected (its score minus the
       highest, rounded, within x): the engine's exp gives exactly 0 there
       and exactly 1 for the selected key, the highest (runtime/engine/
       exp_vec.h), so the softmax is exactly one-hot and, without an output
       projection, the output is the selected key's value vector itself. */
    int n_big = 1, onehot = H->direct;
    double small = 0;
    for (int j = 0; j <= p; j++) {
        if (j == t || dj[j].hi == -INFINITY) continue;
        TfIv x = iv_widen(dj[j], TF_F32_U * (iv_mag(dj[j]) + 2 * dm)); // s - max rounded
        double eh = x.hi < -746 ? 0 : exp(x.hi); // exp underflows to 0 below -745.2
        TfIv r;
        r.lo = x.lo < -80 ? 0 : fmax(0, iv_down(iv_down(exp(x.lo)))) * (1 - PV_EXP_REL) * (1 - PV_EXP_REL);
        r.hi = fmax(iv_up(iv_up(eh)) * (1 + 3 * PV_EXP_REL), floor_hi);
        B = iv_add(B, r);
        if (eh * (1 + 3 * PV_EXP_REL) >= TF_F32_U) n_big++;
        else small += fmax(eh * (1 + 3 * PV_EXP_REL), floor_hi);
        onehot &= x.hi < -88;
        const TfIv *uj = UH ? UH + (size_t)j * H->nw : Uj;
        if (!UH) u_hull(H, oth, j, Uj);
        for (int w = 0; w < H->nw; w++) A[w] = iv_add(A[w], iv_mul(r, uj[w]));
    }
    double g = 2 * PV_EXP_REL + 4 * TF_F32_U * n_big + 2 * TF_F32_U + 4 * (p + 2) * small +
               iv_gamma(H->DV + 1);
    TfIv den = iv_add(iv_pt(1), B);
    for (int k = k0; k < H->nt; k++) {
        if (!sel[k] || done[k]) continue;
        const TfIv *kk = H->K + ((size_t)k * H->np + (size_t)t) * H->D;
        if (k != k0 && memcmp(kk, kr, (size_t)H->D * sizeof *kk) != 0) continue;
        done[k] = 1;
        const TfIv *u = H->U + ((size_t)k * H->np + (size_t)t) * H->nw;
        int rr = res >= 0 ? res : k;
        for (int w = 0; w < H->nw; w++) {
            TfIv dev = iv_div(iv_sub(A[w], iv_mul(u[w], B)), den);
            TfIv out = onehot ? u[w] : iv_widen(iv_add(u[w], dev), g * H->wmag);
            hull_nan(&tab[(size_t)rr * H->nw + w], out);
        }
    }
}

/* For every selected token (those sharing a key once): the scores, the
 * gap, the output (shead_out). */
static void shead_case(const SHead *H, const TfIv *q, long qid, int p, int t, const unsigned char *sel,
                       const unsigned char *oth, int res, TfIv *tab, double *gap, const TfIv *ex, TfIv *buf) {
    unsigned char done[256] = {0};
    for (int k0 = 0; k0 < H->nt && k0 < 256; k0++) {
        if (!sel[k0] || done[k0]) continue;
        double top = shead_scores(H, q, qid, p, t, k0, oth, ex, buf);
        *gap = fmin(*gap, -top);
        shead_out(H, buf, top, p, t, k0, sel, oth, res, tab, done, buf);
    }
}

/* Layers followed at every position. A later layer's key may read what an
 * earlier attention layer wrote at the key's position (the seed's
 * FindAndStore at -O0: its key is the whole row, the positions earlier
 * FindAndStores wrote included). Such a layer (one head, a FindAndStore,
 * its value reading only the embedding) is followed at every position j
 * for every place of its character: found at a <= j (found[j][a]: proven
 * as at the last position, its query at j and every key 0..j enumerated
 * over every place, 0..j or later, of the other characters that the
 * layers they read follow), or not yet (no key 0..j holds it: whatever
 * the scores, the softmax mixes the keys' values, so the output lies in
 * the convex hull of what each key alone gives, cand, widened by the
 * rounding of any mixture). Where a found case is not proven, its output
 * is that hull too. A later key's score for query q then adds, per key
 * position, q . Wk u for the found case's u, or the hull over the
 * candidates of q . Wk u, exact in the query's direction (shead_ex). */
typedef struct STrack {
    int anchor, tok, nw;
    int *wcol;   /* [nw]: the columns it writes */
    TfIv *found; /* [np][np][nw]: at j, its character at a <= j */
    TfIv *cand;  /* [nt][np][nw]: key (t, k) alone, widened for any mixture */
    int *aoff, *aent; /* not yet at j: the keys t * np + k within reach of the top, aent[aoff[j] .. aoff[j + 1]) */
} STrack;

/* A followed layer as a key reads it: Wk (its columns) applied to each
   found case and candidate. */
typedef struct SKx {
    const STrack *T;
    TfIv *KF; /* [np][np][D] */
    int *rows, nrows; /* the entries of KF's and KX's vectors that Wk lets be nonzero */
    TfIv *KX; /* [nt][np][D] */
} SKx;

static void strack_free(STrack *T) {
    if (!T) return;
    free(T->wcol), free(T->found), free(T->cand), free(T->aoff), free(T->aent), free(T);
}

/* Wk restricted to T's columns applied to u (nw intervals), into kv (D),
   with the rounding of the key's whole dot product (n: its terms). */
static void skx_apply(const SHead *H, const float *wk, int d, const STrack *T, const TfIv *u, TfIv *kv) {
    for (int i = 0; i < H->D; i++) {
        TfIv s = iv_pt(0);
        double mag = 0;
        int any = 0;
        for (int w = 0; w < T->nw; w++) {
            float a = wk[(size_t)i * d + T->wcol[w]];
            if (a == 0) continue;
            s = iv_add(s, iv_scale(u[w], a));
            mag += fabs(a) * iv_mag(u[w]);
            any = 1;
        }
        kv[i] = any ? iv_widen(s, iv_gamma(d + 1) * mag) : iv_pt(0);
    }
}

static int skx_build(const SHead *H, const float *wk, int d, const STrack *T, SKx *e) {
    size_t np = (size_t)H->np, D = (size_t)H->D;
    e->T = T;
    e->KF = malloc(np * np * D * sizeof *e->KF + 1);
    e->KX = malloc((size_t)H->nt * np * D * sizeof *e->KX + 1);
    e->rows = malloc(D * sizeof *e->rows + 1);
    if (!e->KF || !e->KX || !e->rows) return -1;
    e->nrows = 0;
    for (int i = 0; i < H->D; i++) {
        int any = 0;
        for (int w = 0; w < T->nw; w++) any |= wk[(size_t)i * d + T->wcol[w]] != 0;
        if (any) e->rows[e->nrows++] = i;
    }
    for (size_t j = 0; j < np; j++)
        for (size_t a = 0; a <= j; a++)
            skx_apply(H, wk, d, T, T->found + (j * np + a) * (size_t)T->nw, e->KF + (j * np + a) * D);
    for (size_t t = 0; t < (size_t)H->nt; t++)
        for (size_t k = 0; k < np; k++)
            skx_apply(H, wk, d, T, T->cand + (t * np + k) * (size_t)T->nw, e->KX + (t * np + k) * D);
    return 0;
}

/* scale (q . v), with its share of the score's rounding; v's entries
   other than rows[0..n) are 0 (rows NULL: any may not be). */
static TfIv shead_dot(const SHead *H, const TfIv *q, const TfIv *v, const int *rows, int n) {
    TfIv s = iv_pt(0);
    double mag = 0;
    for (int k = 0; k < (rows ? n : H->D); k++) {
        int i = rows ? rows[k] : k;
        if (v[i].lo == 0 && v[i].hi == 0) continue;
        s = iv_add(s, iv_mul(q[i], v[i]));
        mag += iv_mag(q[i]) * iv_mag(v[i]);
    }
    double g = (iv_gamma(H->D) + 2 * TF_F32_U) * H->scale;
    return iv_widen(iv_scale(s, H->scale), g * mag);
}

/* What the followed layers add to the score of query q at each key
   position 0..p, apos[i] the place of character i (-1: after p). */
static void shead_ex(const SHead *H, const SKx *kx, int nkx, const TfIv *q, const int *apos, int p, TfIv *ex) {
    size_t np = (size_t)H->np, D = (size_t)H->D;
    for (int j = 0; j <= p; j++) ex[j] = iv_pt(0);
    for (int e = 0; e < nkx; e++) {
        const STrack *T = kx[e].T;
        int b = apos[T->anchor];
        for (int j = 0; j <= p; j++) {
            if (b >= 0 && b <= j) {
                ex[j] = iv_add(ex[j], shead_dot(H, q, kx[e].KF + ((size_t)j * np + (size_t)b) * D, kx[e].rows, kx[e].nrows));
                continue;
            }
            TfIv run = {NAN, NAN};
            for (int i = T->aoff[j]; i < T->aoff[j + 1]; i++)
                hull_nan(&run, shead_dot(H, q, kx[e].KX + (size_t)T->aent[i] * D, kx[e].rows, kx[e].nrows));
            ex[j] = iv_add(ex[j], run);
        }
    }
}

#define STRACK_MAX_QUERIES 4096
#define STRACK_REACH 100.0 /* a key this far below the top weighs at most e^-100 of it */

/* The queries at j (apos: each character's place, -1 after j; the token at
 * j: tok where own == j, any other where not) into qs (H->D each): their
 * number, or -1 (more than STRACK_MAX_QUERIES). A followed layer the query
 * reads gives its found case, or where its character is not yet, each key
 * within reach (a query in between is a mixture of these: every score is
 * linear in it). x: d intervals of scratch. */
static int strack_queries(const Seed *Z, const SHead *H, const STrack *const *qT, int nq, const int *apos, int j,
                          int tok, int own, const TfIv *qe, TfIv *qs) {
    int d = Z->d, np = H->np, nt = H->nt, n = 0, idx[8] = {0}, ncand[8];
    long total = 1;
    for (int i = 0; i < nq; i++) {
        int b = apos[qT[i]->anchor];
        ncand[i] = b >= 0 ? 1 : qT[i]->aoff[j + 1] - qT[i]->aoff[j];
        total *= ncand[i] > 0 ? ncand[i] : 1;
        if (ncand[i] < 1 || total > STRACK_MAX_QUERIES) return -1;
    }
    for (int tj = 0; tj < nt; tj++) {
        if (own == j ? tj != tok : tj == tok) continue;
        for (int i = 0; i < nq; i++) idx[i] = 0;
        for (;;) {
            if (n == STRACK_MAX_QUERIES) return -1;
            TfIv *q = qs + (size_t)n * H->D;
            /* The embedding's part (qe), then each followed layer's
               columns, with their share of the dot product's rounding. */
            memcpy(q, qe + ((size_t)tj * np + (size_t)j) * H->D, (size_t)H->D * sizeof *q);
            for (int i = 0; i < nq; i++) {
                const STrack *Q = qT[i];
                int b = apos[Q->anchor];
                const TfIv *u = b >= 0 ? Q->found + ((size_t)j * np + (size_t)b) * Q->nw
                                       : Q->cand + (size_t)Q->aent[Q->aoff[j] + idx[i]] * Q->nw;
                for (int r = 0; r < H->D; r++) {
                    double mag = 0;
                    for (int w = 0; w < Q->nw; w++) {
                        float a = H->wq[(size_t)r * d + Q->wcol[w]];
                        if (a == 0) continue;
                        q[r] = iv_add(q[r], iv_scale(u[w], a));
                        mag += fabs(a) * iv_mag(u[w]);
                    }
                    q[r] = iv_widen(q[r], iv_gamma(d + 1) * mag);
                }
            }
            n++;
            int i = 0;
            while (i < nq && ++idx[i] == ncand[i]) idx[i++] = 0;
            if (i == nq) break;
        }
    }
    return n;
}

/* The next place of the other characters (o[i]: -1 after j, or 0..j; none
   at a, no two at one place): 0 when done. */
static int next_places(int *o, int no, int j, int a) {
    for (;;) {
        int i = 0;
        while (i < no && ++o[i] > j) o[i++] = -1;
        if (i == no) return 0;
        int ok = 1;
        for (int k = 0; k < no; k++) ok &= o[k] < 0 || (o[k] != a && (k == 0 || o[k] != o[0]));
        if (ok) return 1;
    }
}

/* strack_build's scratch: what the followed layer's query and keys read,
 * and the buffers its two passes share. */
typedef struct {
    const STrack *qT[8]; /* the followed layers its query reads */
    int nq, oth_a[2], no, own, tok, nkx;
    const SKx *kx;
    TfIv *qs, *qe, *ex, *sc, *dj, *djh, *buf, *tab;
    unsigned char *sel, *oth, *near;
    double *gapk;
} SFollow;

#define SFOLLOW_LOCALS                                                                             \
    int np = H->np, nt = H->nt, nw = H->nw, tok = W->tok, nkx = W->nkx, no = W->no, nq = W->nq;   \
    const SKx *kx = W->kx;                                                                         \
    const STrack *const *qT = W->qT;                                                               \
    const int *oth_a = W->oth_a;                                                                   \
    TfIv *qe = W->qe, *qs = W->qs, *ex = W->ex;                                                    \
    int apos[MAX_ANCHOR], o[2];                                                                    \
    (void)nw, (void)oth_a

/* Not yet at j: the keys within reach of the top for some query (T->aoff,
 * T->aent). */
static void strack_not_yet(Seed *Z, const SHead *H, SFollow *W, STrack *T) {
    SFOLLOW_LOCALS;
    TfIv *sc = W->sc;
    unsigned char *near = W->near;
    double *gapk = W->gapk;
    for (int j = 0; j < np; j++) {
        memset(near, 0, (size_t)nt * np);
        int all = 0;
        o[0] = o[1] = -1;
        do {
            for (int i = 0; i < Z->n_anchor; i++) apos[i] = -1;
            for (int i = 0; i < no; i++) apos[oth_a[i]] = o[i];
            /* A query between the ones listed is a mixture of them, and
               every key's score minus one key's is linear in it: a key is
               out of reach where it is that far below one reference key
               r (the first query's top) for every query listed. */
            int n = strack_queries(Z, H, qT, nq, apos, j, tok, -1, qe, qs), r = -1;
            if (n < 0) all = 1;
            for (int i = 0; i < nt * np; i++) gapk[i] = -INFINITY;
            for (int qi = 0; qi < n && !all; qi++) {
                const TfIv *q = qs + (size_t)qi * H->D;
                if (nkx) shead_ex(H, kx, nkx, q, apos, j, ex);
                for (int t = 0; t < nt; t++)
                    for (int k = 0; k <= j && t != tok; k++) {
                        TfIv s = shead_dot(H, q, H->K + ((size_t)t * np + (size_t)k) * H->D, NULL, 0);
                        sc[t * np + k] = nkx ? iv_add(s, ex[k]) : s;
                        if (qi == 0 && (r < 0 || sc[t * np + k].lo > sc[r].lo)) r = t * np + k;
                    }
                for (int t = 0; t < nt; t++)
                    for (int k = 0; k <= j && t != tok; k++)
                        gapk[t * np + k] = fmax(gapk[t * np + k], sc[t * np + k].hi - sc[r].lo);
            }
            for (int t = 0; t < nt && !all; t++)
                for (int k = 0; k <= j && t != tok; k++) near[t * np + k] |= !(gapk[t * np + k] < -STRACK_REACH);
        } while (!all && next_places(o, no, j, -1));
        T->aoff[j + 1] = T->aoff[j];
        for (int t = 0; t < nt; t++)
            for (int k = 0; k <= j && t != tok; k++)
                if (all || near[t * np + k]) T->aent[T->aoff[j + 1]++] = t * np + k;
    }
}

/* Found at a <= j: the output at j of every place a of the character
 * (T->found). */
static void strack_found(Seed *Z, const SHead *H, SFollow *W, STrack *T) {
    SFOLLOW_LOCALS;
    int own = W->own;
    TfIv *dj = W->dj, *djh = W->djh, *buf = W->buf, *tab = W->tab;
    unsigned char *sel = W->sel, *oth = W->oth;
    for (int j = 0; j < np; j++)
        for (int a = 0; a <= j; a++) {
            for (int i = 0; i <= j; i++) djh[i] = (TfIv){NAN, NAN};
            int ok = 1;
            o[0] = o[1] = -1;
            do {
                for (int i = 0; i < Z->n_anchor; i++) apos[i] = -1;
                apos[own] = a;
                for (int i = 0; i < no; i++) apos[oth_a[i]] = o[i];
                int n = strack_queries(Z, H, qT, nq, apos, j, tok, a, qe, qs);
                if (n < 0) ok = 0;
                for (int qi = 0; qi < n && ok; qi++) {
                    const TfIv *q = qs + (size_t)qi * H->D;
                    if (nkx) shead_ex(H, kx, nkx, q, apos, j, ex);
                    shead_scores(H, q, -1, j, a, tok, oth, nkx ? ex : NULL, dj);
                    for (int i = 0; i <= j; i++)
                        if (i != a) hull_nan(&djh[i], dj[i]);
                }
            } while (ok && next_places(o, no, j, a));
            double top = -INFINITY;
            djh[a] = (TfIv){-INFINITY, -INFINITY};
            for (int i = 0; i <= j; i++) {
                if (isnan(djh[i].lo)) djh[i] = (TfIv){-INFINITY, -INFINITY};
                top = fmax(top, djh[i].hi);
            }
            TfIv *f = T->found + ((size_t)j * np + (size_t)a) * nw;
            for (int w = 0; w < nw; w++) tab[w] = (TfIv){NAN, NAN};
            if (ok && top < 0) {
                unsigned char done[256] = {0};
                shead_out(H, djh, top, j, a, tok, sel, oth, 0, tab, done, buf);
            }
            for (int w = 0; w < nw; w++) {
                f[w] = tab[w];
                if (!isnan(tab[w].lo)) continue;
                for (int t = 0; t < nt; t++) // not proven selected: any mixture of keys 0..j
                    for (int k = 0; k <= j; k++) hull_nan(&f[w], T->cand[((size_t)t * np + (size_t)k) * nw + w]);
            }
        }
}

/* Follows layer li (a FindAndStore of token tok, its head H) at every
 * position: *out, or NULL where it cannot (its query reads a column no
 * followed layer alone writes, more than two other characters). kx: the
 * followed layers its key reads. */
static int strack_build(Seed *Z, const SHead *H, int tok, const SKx *kx, int nkx, STrack **out) {
    int d = Z->d, np = H->np, nt = H->nt, nw = H->nw;
    *out = NULL;
    const STrack *qT[8];
    int nq = 0, oth_a[2], no = 0, own = anchor_index(Z, tok);
    for (int c = 0; c < d; c++) {
        if (!H->rq[c] || !Z->written[c]) continue;
        const STrack *T = Z->wlayer[c] >= 0 ? Z->trk[Z->wlayer[c]] : NULL;
        if (!T) return 0;
        int k = 0;
        while (k < nq && qT[k] != T) k++;
        if (k == nq) {
            if (nq == 8) return 0;
            qT[nq++] = T;
        }
    }
    for (int i = 0; i < nq + nkx; i++) {
        int an = i < nq ? qT[i]->anchor : kx[i - nq].T->anchor, k = 0;
        if (an == own) continue;
        while (k < no && oth_a[k] != an) k++;
        if (k < no) continue;
        if (no == 2) return 0;
        oth_a[no++] = an;
    }
    STrack *T = calloc(1, sizeof *T);
    if (!T) return -1;
    T->anchor = own, T->tok = tok, T->nw = nw;
    T->wcol = malloc((size_t)nw * sizeof *T->wcol + 1);
    T->found = malloc((size_t)np * np * nw * sizeof *T->found + 1);
    T->cand = malloc((size_t)nt * np * nw * sizeof *T->cand + 1);
    T->aoff = calloc((size_t)np + 1, sizeof *T->aoff);
    T->aent = malloc((size_t)np * nt * np * sizeof *T->aent + 1);
    TfIv *x = malloc((size_t)d * sizeof *x), *qs = malloc((size_t)STRACK_MAX_QUERIES * H->D * sizeof *qs);
    TfIv *qe = malloc((size_t)nt * np * H->D * sizeof *qe + 1);
    TfIv *ex = malloc((size_t)np * sizeof *ex), *sc = malloc((size_t)nt * np * sizeof *sc);
    TfIv *dj = malloc((size_t)np * sizeof *dj), *djh = malloc((size_t)np * sizeof *djh);
    TfIv *buf = malloc(((size_t)np + 2 * nw + 2) * sizeof *buf), *tab = malloc(((size_t)nw + 1) * sizeof *tab);
    unsigned char *sel = calloc((size_t)nt, 1), *oth = malloc((size_t)nt), *near = malloc((size_t)nt * np);
    double *gapk = malloc((size_t)nt * np * sizeof *gapk); // per key: its score over r's, highest over the queries
    int rc = 0;
    if (!T->wcol || !T->found || !T->cand || !T->aoff || !T->aent || !x || !qs || !qe || !ex || !sc || !dj || !djh || !buf ||
        !tab || !sel || !oth || !near || !gapk)
        rc = -1;
    if (rc == 0) {
        memcpy(T->wcol, H->wcol, (size_t)nw * sizeof *T->wcol);
        /* Any mixture of the values: its weights sum to 1 within the
           rounding of the denominator and of the weighted sum (each gamma
           over np + 2 terms), then the output projection; the keys out of
           reach add at most np e^-100 of the largest value. */
        double g = 3 * iv_gamma(np + 2) + iv_gamma(H->DV + 1) + 4 * TF_F32_U + 2 * PV_EXP_REL + 1e-30;
        for (size_t i = 0; i < (size_t)nt * np * nw; i++) T->cand[i] = iv_widen(H->U[i], 2 * g * H->wmag);
        for (int t = 0; t < nt; t++) oth[t] = t != tok;
        sel[tok] = 1;
        /* The query of every token at every position, from the embedding
           (and what earlier layers added alike everywhere); the followed
           columns are added by strack_queries. */
        const TfModel *m = Z->m;
        const float *te = m->tensors[m->tok_embed].data, *pe = m->tensors[m->pos_embed].data;
        for (int t = 0; t < nt; t++)
            for (int j = 0; j < np; j++) {
                for (int c = 0; c < d; c++) {
                    double e = (double)te[(size_t)t * d + c] + (double)pe[(size_t)j * d + c];
                    x[c] = iv_add(iv_widen(iv_pt(e), TF_F32_U * fabs(e)), Z->cdelta[c]);
                }
                TfIv *q = qe + ((size_t)t * np + (size_t)j) * H->D;
                for (int i = 0; i < H->D; i++) q[i] = shead_query(H, i, x);
            }
    }
    if (rc == 0) {
        SFollow W = {.nq = nq, .no = no, .own = own, .tok = tok, .nkx = nkx, .kx = kx, .qs = qs, .qe = qe, .ex = ex,
                     .sc = sc, .dj = dj, .djh = djh, .buf = buf, .tab = tab, .sel = sel, .oth = oth, .near = near,
                     .gapk = gapk};
        memcpy(W.qT, qT, sizeof qT);
        memcpy(W.oth_a, oth_a, sizeof oth_a);
        strack_not_yet(Z, H, &W, T);
        strack_found(Z, H, &W, T);
    }
    free(x), free(qs), free(qe), free(ex), free(sc), free(dj), free(djh), free(buf), free(tab), free(sel), free(oth), free(near), free(gapk);
    if (rc) strack_free(T);
    else *out = T;
    return rc;
}

/* The query's columns grouped by the variables they depend on: per group
 * and value of its variables, each query entry's partial dot product
 * (part, with sum |w| |x| in mag; NULL where the group has more than
 * QGROUP_MAX values: summed per case instead). */
#define QGROUP_MAX 65536
typedef struct QGroup {
    PvDeps deps;
    int ncol, *cols;
    long n;
    TfIv *part;          /* [n][D] */
    double *mag;         /* [n][D] */
    unsigned char *dead; /* [n]: a column holds no value */
} QGroup;

/* Column c's terms of the query entries into s and mag (x: its value). */
static void qcol_add(const SHead *H, int c, TfIv x, TfIv *s, double *mag) {
    for (int i = 0; i < H->D; i++) {
        float w = H->wq[(size_t)i * H->d + c];
        if (w == 0) continue;
        s[i] = iv_add(s[i], iv_scale(x, w));
        mag[i] += fabs(w) * iv_mag(x);
    }
}

static int qgroup_fill(Seed *Z, const SHead *H, QGroup *g) {
    int assign[TF_PROOF_MAX_BASE];
    size_t D = (size_t)H->D;
    g->part = malloc((size_t)g->n * D * sizeof *g->part + 1);
    g->mag = malloc((size_t)g->n * D * sizeof *g->mag + 1);
    g->dead = calloc((size_t)g->n + 1, 1);
    if (!g->part || !g->mag || !g->dead) return -1;
    for (long k = 0; k < g->n; k++) {
        pv_deps_decode(Z->S, g->deps, k, assign);
        TfIv *s = g->part + (size_t)k * D;
        double *mg = g->mag + (size_t)k * D;
        for (size_t i = 0; i < D; i++) s[i] = iv_pt(0), mg[i] = 0;
        for (int j = 0; j < g->ncol && !g->dead[k]; j++) {
            TfIv x = pv_col_get(Z->N, &Z->N->col[g->cols[j]], assign);
            g->dead[k] = isnan(x.lo);
            qcol_add(H, g->cols[j], x, s, mg);
        }
    }
    return 0;
}

/* The query of each of the nqc cases of Dq and its id among the distinct
 * ones, which T collects (qid: -1 where a column read holds no value).
 * Each entry is row_dot's: the exact w . x + bias enclosed (here as a sum
 * of the groups' partial sums), widened by float32's rounding of the
 * whole dot product. -1: out of memory. */
static int query_ids(Seed *Z, const SHead *H, PvDeps Dq, long nqc, long *qid, Seen *T) {
    PvSem *S = Z->S;
    int d = Z->d, D = H->D, ng = 0, rc = 0, assign[TF_PROOF_MAX_BASE];
    QGroup *g = calloc((size_t)d + 1, sizeof *g);
    int *cols = malloc(((size_t)d + 1) * sizeof *cols);
    TfIv *q = malloc(((size_t)D + 1) * sizeof *q);
    double *mag = malloc(((size_t)D + 1) * sizeof *mag);
    if (!g || !cols || !q || !mag) rc = -1;
    for (int c = 0; rc == 0 && c < d; c++) {
        if (!H->rq[c]) continue;
        PvDeps dc = Z->N->col[c].deps;
        int k = 0;
        while (k < ng && g[k].deps != dc) k++;
        if (k == ng) g[ng++] = (QGroup){.deps = dc, .n = pv_deps_size(S, dc, PV_TABLE_LIMIT)};
    }
    /* each group's columns, contiguous in cols */
    for (int k = 0, at = 0; rc == 0 && k < ng; k++) {
        g[k].cols = cols + at;
        for (int c = 0; c < d; c++)
            if (H->rq[c] && Z->N->col[c].deps == g[k].deps) g[k].cols[g[k].ncol++] = c, at++;
        if (g[k].n >= 0 && g[k].n <= QGROUP_MAX) rc = qgroup_fill(Z, H, &g[k]);
    }
    for (long i = 0; rc == 0 && i < nqc; i++) {
        pv_deps_decode(S, Dq, i, assign);
        int dead = 0;
        for (int r = 0; r < D; r++) q[r] = iv_pt(H->bq ? H->bq[r] : 0), mag[r] = fabs(H->bq ? H->bq[r] : 0);
        for (int k = 0; k < ng && !dead; k++) {
            if (!g[k].part) { // a large group: its columns one by one
                for (int j = 0; j < g[k].ncol && !dead; j++) {
                    TfIv x = pv_col_get(Z->N, &Z->N->col[g[k].cols[j]], assign);
                    dead = isnan(x.lo);
                    qcol_add(H, g[k].cols[j], x, q, mag);
                }
                continue;
            }
            long at = pv_deps_index(S, g[k].deps, assign);
            dead = g[k].dead[at];
            const TfIv *ps = g[k].part + (size_t)at * (size_t)D;
            const double *pm = g[k].mag + (size_t)at * (size_t)D;
            for (int r = 0; r < D; r++) q[r] = iv_add(q[r], ps[r]), mag[r] += pm[r];
        }
        qid[i] = -1;
        if (dead) continue;
        for (int r = 0; r < D; r++) q[r] = iv_widen(q[r], iv_gamma(H->wqo[r + 1] - H->wqo[r] + 1) * mag[r]);
        qid[i] = seen_index(T, (const unsigned char *)q);
    }
    for (int k = 0; g && k < ng; k++) free(g[k].part), free(g[k].mag), free(g[k].dead);
    free(g), free(cols), free(q), free(mag);
    return rc;
}

/* An attention layer of FindAndStore or GetRelativeToken: for every
 * scenario (its p and the position read) and every query its columns can
 * give, the output per value of the op's result. */
/* The head of seed op oi at layer li: which columns its query, key and
 * value read and its output writes, and the followed layers its key reads
 * (kx, *nkx_out). -1: out of memory; 1: not proven (said); 0: set. */
static int shead_setup(Seed *Z, int oi, int li, SHead *H, SKx *kx, int *nkx_out) {
    PvNet *N = Z->N;
    const TfModel *m = Z->m;
    const TfLayer *ly = &m->layers[li];
    const TfIrOp *op = &Z->ir->ops[oi];
    int d = Z->d, line = op->stmt->loc.line;
    const float *wk = m->tensors[ly->key].data, *wv = m->tensors[ly->value].data;
    unsigned char *rk = calloc((size_t)d, 1);
    H->rq = calloc((size_t)d, 1);
    H->wcol = malloc(((size_t)d + 1) * sizeof(int));
    if (!rk || !H->rq || !H->wcol) {
        free(rk), free(H->rq), free(H->wcol);
        return -1;
    }
    for (int c = 0; c < d; c++) {
        for (int i = 0; i < H->D; i++) rk[c] |= wk[(size_t)i * d + c] != 0, H->rq[c] |= H->wq[(size_t)i * d + c] != 0;
        for (int i = 0; i < H->DV; i++) rk[c] |= (unsigned char)((wv[(size_t)i * d + c] != 0) << 1);
    }
    /* A key may read what a followed layer wrote (STrack); a value only
       the embedding. */
    int nkx = 0;
    for (int c = 0; c < d; c++) {
        const struct STrack *T = Z->written[c] && Z->wlayer[c] >= 0 ? Z->trk[Z->wlayer[c]] : NULL;
        if (rk[c] == 1 && T) {
            int k = 0;
            while (k < nkx && kx[k].T != T) k++;
            if (k < nkx) continue;
            if (nkx < 8) {
                kx[nkx++] = (SKx){.T = T};
                continue;
            }
        }
        if (rk[c] && Z->written[c]) {
            pv_unproven(N, line, li, "layer %d: %s: not proven: its %s read column %d, which an earlier layer writes (the validator follows the rows at other positions only where they hold the embedding or the output of one FindAndStore it follows)", li, tf_ops[op->op].name, rk[c] & 2 ? "values" : "keys", c);
            free(rk), free(H->rq), free(H->wcol);
            return 1;
        }
    }
    H->nw = 0;
    unsigned char *lw = malloc((size_t)d);
    if (!lw) {
        free(rk), free(H->rq), free(H->wcol);
        return -1;
    }
    pv_layer_writes(m, ly, lw);
    int obias = 0;
    for (int c = 0; c < d; c++) {
        if (lw[c]) H->wcol[H->nw++] = c;
        obias |= ly->output_bias >= 0 && m->tensors[ly->output_bias].data[c] != 0;
    }
    free(lw);
    if (obias) {
        pv_unproven(N, line, li, "layer %d: %s: not proven: an output bias", li, tf_ops[op->op].name);
        free(rk), free(H->rq), free(H->wcol);
        return 1;
    }
    free(rk);
    *nkx_out = nkx;
    return 0;
}

static int seed_attn(Seed *Z, int oi, int li) {
    PvNet *N = Z->N;
    PvSem *S = Z->S;
    const TfModel *m = Z->m;
    const TfLayer *ly = &m->layers[li];
    const TfIrOp *op = &Z->ir->ops[oi];
    int d = Z->d, line = op->stmt->loc.line;
    if (ly->n_heads != 1 || (op->op != TF_OP_FIND_AND_STORE && op->op != TF_OP_GET_RELATIVE_TOKEN)) {
        pv_unproven(N, line, li, "layer %d: not proven: an attention layer of %d heads for %s", li, ly->n_heads,
                    tf_ops[op->op].name);
        return 0;
    }
    SHead H = {.d = d, .D = ly->d_head, .DV = ly->d_vhead, .nt = m->n_vocab, .np = Z->maxpos + 1, .scale = ly->scale,
               .wq = m->tensors[ly->query].data, .bq = ly->query_bias >= 0 ? m->tensors[ly->query_bias].data : NULL};
    const float *wk = m->tensors[ly->key].data;
    SKx kx[8];
    int nkx = 0, st = shead_setup(Z, oi, li, &H, kx, &nkx);
    if (st) return st < 0 ? -1 : 0;
    int rc = shead_keys(Z, ly, &H);
    for (int k = 0; k < nkx && rc == 0; k++) rc = skx_build(&H, wk, d, kx[k].T, &kx[k]);
    /* The result variable: the found character's position, or the token read. */
    int tok = op->op == TF_OP_FIND_AND_STORE ? plan_of(Z, oi)->args[0].tok : -1;
    int res_var = tok >= 0 ? Z->anchor_var[anchor_index(Z, tok)] : Z->grt_var[oi];
    int nres = S->base[res_var].n;
    PvDeps Dq = 0;
    for (int c = 0; c < d; c++)
        if (H.rq[c]) Dq |= N->col[c].deps;
    PvDeps Dr = Dq & ~Z->scen; /* what the query depends on beyond the scenario */
    long nqc = pv_deps_size(S, Dq, PV_TABLE_LIMIT), nsc = pv_deps_size(S, Z->scen, 1L << 26);
    long nrc = pv_deps_size(S, Dr, PV_TABLE_LIMIT);
    if (rc == 0 && (nqc < 0 || nsc < 0 || nrc < 0)) {
        pv_unproven(N, line, li, "layer %d: not proven: too many query scenarios", li);
        nqc = nsc = nrc = 0;
    }
    TfIv *tab = malloc(((size_t)nres * H.nw + 1) * sizeof *tab);
    TfIv *buf = malloc(((size_t)H.np + 2 * H.nw + 2) * sizeof *buf);
    long *qid = malloc(((size_t)nqc + 1) * sizeof *qid), nuq = 0;
    Sv *val = malloc((size_t)Z->nr * sizeof *val);
    unsigned char *sel = malloc((size_t)H.nt), *oth = malloc((size_t)H.nt);
    size_t klen = (size_t)H.D * sizeof(TfIv);
    Seen T = {.len = klen, .cap = (size_t)nqc + 1};
    T.keys = malloc(T.cap * klen + 1);
    T.slot = malloc(2 * T.cap * sizeof *T.slot);
    if (rc || !tab || !buf || !qid || !val || !sel || !oth || !T.keys || !T.slot) rc = -1;
    for (size_t i = 0; rc == 0 && i < 2 * T.cap; i++) T.slot[i] = -1;
    for (long i = 0; rc == 0 && i < (long)nres * H.nw; i++) tab[i] = (TfIv){NAN, NAN};
    int assign[TF_PROOF_MAX_BASE], apos[MAX_ANCHOR];
    /* Every query the columns can give: its id among the distinct ones. */
    if (rc == 0 && query_ids(Z, &H, Dq, nqc, qid, &T) < 0) rc = -1;
    if (rc == 0 && shead_cache(&H, nuq = (long)T.n) < 0) rc = -1;
    size_t ndone = (size_t)nuq * H.np * H.np * (size_t)(Z->n_anchor + 1);
    unsigned char *done = calloc(ndone + 1, 1);
    /* With followed layers the keys depend on every character's place:
       a query is done once per scenario. */
    long *last = nkx ? malloc(((size_t)nuq + 1) * sizeof *last) : NULL;
    TfIv *ex = nkx ? malloc(((size_t)H.np + 1) * sizeof *ex) : NULL;
    if (!done || (nkx && (!last || !ex))) rc = -1;
    for (long i = 0; last && i < nuq; i++) last[i] = -1;
    double gap = INFINITY;
    for (long s = 0; s < nsc && rc == 0 && gap > 0; s++) {
        for (int b = 0; b < S->n_base; b++) assign[b] = -1;
        pv_deps_decode(S, Z->scen, s, assign);
        SemInfo I = {-1, -1};
        if (sem_run(Z, oi, assign, NULL, val, &I) || I.p < 0 || I.target < 0) continue;
        int ai = -1;
        for (int a = 0; a < Z->n_anchor; a++) {
            Sv A = var_val(Z, assign, Z->anchor_var[a]);
            if (A.k == SV_POS && (int)A.x == I.target) ai = a;
        }
        for (long r = 0; r < nrc && gap > 0; r++) {
            pv_deps_decode(S, Dr, r, assign);
            long qi = qid[pv_deps_index(S, Dq, assign)];
            if (qi < 0) continue;
            if (nkx) {
                if (last[qi] == s) continue;
                last[qi] = s;
            } else {
                size_t key = (((size_t)qi * H.np + (size_t)I.p) * H.np + (size_t)I.target) * (size_t)(Z->n_anchor + 1) + (size_t)(ai + 1);
                if (done[key]) continue;
                done[key] = 1;
            }
            for (int k = 0; k < H.nt; k++) {
                if (tok >= 0) sel[k] = k == tok, oth[k] = k != tok;
                else sel[k] = ai >= 0 ? k == Z->anchor_tok[ai] : anchor_index(Z, k) < 0, oth[k] = 1;
            }
            int res = tok >= 0 ? var_find(Z, res_var, (Sv){SV_POS, I.target}) : -1;
            if (tok >= 0 && res < 0) continue;
            const TfIv *qq = (const TfIv *)(T.keys + (size_t)qi * klen);
            if (nkx) {
                for (int a = 0; a < Z->n_anchor; a++) {
                    Sv A = var_val(Z, assign, Z->anchor_var[a]);
                    apos[a] = A.k == SV_POS ? (int)A.x : -1;
                }
                shead_ex(&H, kx, nkx, qq, apos, I.p, ex);
            }
            shead_case(&H, qq, qi, I.p, I.target, sel, oth, res, tab, &gap, ex, buf);
            if (!(gap > 0)) note_fail(Z, assign, Z->scen | Dr); // the first that fails: the report's
        }
    }
    PvCol c = {0};
    for (int w = 0; w < H.nw && rc == 0; w++) {
        rc = pv_col_set(&c, (PvDeps)1 << res_var, nres);
        for (int a = 0; a < nres && rc == 0; a++) c.v[a] = tab[(size_t)a * H.nw + w];
        if (rc == 0) rc = pv_col_add(N, &N->col[H.wcol[w]], &c);
    }
    pv_col_free(&c);
    if (rc == 0 && !N->unproven)
        pv_line(N->P, "line %d: %s -> %s: layer %d head 0: score gap %.3g (the position read over the others)", line,
                tf_ops[op->op].name, Z->ir->regs[op->dest].name, li, gap);
    if (rc == 0 && !(gap > 0) && !N->unproven)
        pv_fail(N, line, li, NULL, 0, "line %d: %s -> %s (layer %d): the position read does not score above the others (gap %.3g)", line, tf_ops[op->op].name, Z->ir->regs[op->dest].name, li, gap);
    /* Followed at every position, where a later key reads it. */
    if (rc == 0 && !N->failed && !N->unproven && Z->need_trk[li] && tok >= 0)
        rc = strack_build(Z, &H, tok, kx, nkx, &Z->trk[li]);
    shead_free(&H);
    free(tab), free(buf), free(qid), free(val);
    free(sel), free(oth), free(T.keys), free(T.slot), free(done), free(last), free(ex);
    for (int k = 0; k < nkx; k++) free(kx[k].KF), free(kx[k].KX), free(kx[k].rows);
    return rc;
}

/* The registers op oi writes, into w (n of them). */
static int op_writes(const Seed *Z, int oi, int *w) {
    const TfIrOp *op = &Z->ir->ops[oi];
    const TfOpPlan *pl = plan_of(Z, oi);
    int n = 0;
    switch (op->op) {
    case TF_OP_STEP_POSITION:
    case TF_OP_CLEAR:
        for (int k = 0; k < pl->n_args; k++) w[n++] = pl->args[k].reg;
        break;
    case TF_OP_IS_ZERO: w[n++] = pl->args[0].reg; break;
    case TF_OP_MULTIPLY: w[n++] = op->dest, w[n++] = pl->args[2].reg; break;
    default: w[n++] = op->dest;
    }
    return n;
}

/* The variables each written register's value depends on, after op oi. */
static void op_deps(Seed *Z, int oi) {
    const TfIrOp *op = &Z->ir->ops[oi];
    const TfOpPlan *pl = plan_of(Z, oi);
    PvDeps in = 0;
    for (int k = 0; k < pl->n_args; k++)
        if (pl->args[k].reg >= 0) in |= Z->sdeps[pl->args[k].reg];
    switch (op->op) {
    case TF_OP_FIND_AND_STORE:
        Z->sdeps[op->dest] |= (PvDeps)1 << Z->anchor_var[anchor_index(Z, pl->args[0].tok)];
        break;
    case TF_OP_GET_RELATIVE_TOKEN: Z->sdeps[op->dest] |= (PvDeps)1 << Z->grt_var[oi]; break;
    case TF_OP_CLEAR:
        for (int k = 0; k < pl->n_args; k++)
            if (Z->ir->regs[pl->args[k].reg].kind != TF_REG_SCALAR) Z->sdeps[pl->args[k].reg] = 0;
        break;
    case TF_OP_STEP_POSITION: break;
    case TF_OP_IS_ZERO: break;
    case TF_OP_MULTIPLY: Z->sdeps[pl->args[2].reg] = Z->sdeps[op->dest] = Z->sdeps[op->dest] | in; break;
    default: Z->sdeps[op->dest] |= in;
    }
}

/* The margin of one case of a register check_cut checks (> 0: the columns
   hold the value v), and the worst margin or error so far in *worst. */
static double cut_margin(Seed *Z, int kind, int off, int size, Sv v, const int *assign,
                         double *worst_io) {
    PvNet *N = Z->N;
    double mg = INFINITY, worst = *worst_io;
    if (kind == TF_REG_TOKEN || kind == TF_REG_CATEGORICAL) {
        int e = v.k == SV_TOK ? (int)v.x : -1;
        double top = -INFINITY;
        for (int k = 0; k < size; k++)
            if (k != e) top = fmax(top, pv_col_get(N, &N->col[off + k], assign).hi);
        mg = e < 0 ? 0.5 - top : pv_col_get(N, &N->col[off + e], assign).lo - top;
        worst = fmin(worst, mg);
    } else if (kind == TF_REG_POSITION) {
        for (int k = 0; k < 2; k++) {
            double want = 0;
            if (v.k == SV_POS) {
                double ang = 2 * 3.14159265358979323846 * v.x / Z->period;
                want = k == 0 ? sin(ang) : cos(ang);
            }
            TfIv c = pv_col_get(N, &N->col[off + k], assign);
            worst = fmax(worst, fmax(fabs(c.lo - want), fabs(c.hi - want)));
        }
        mg = worst < 0.25 ? 1 : -1; // a position is a point on the circle: a quarter is no position
    } else {
        TfIv c = pv_col_get(N, &N->col[off], assign);
        if (v.k == SV_PLUS) mg = c.lo;
        else worst = fmax(worst, fmax(fabs(c.lo - v.x), fabs(c.hi - v.x)));
        if (!(worst < 1e30)) mg = -1;
    }
    *worst_io = worst;
    return mg;
}

/* The variables of Dc register r's value depends on (of its own, Z->sdeps[r]),
   from the values sv of its n cases: into *keep. -1: out of memory. */
static int cut_keep(Seed *Z, int r, PvDeps Dc, const Sv *sv, long n, PvDeps *keep_out) {
    PvSem *S = Z->S;
    int assign[TF_PROOF_MAX_BASE];
    PvDeps keep = Z->sdeps[r];
    for (int b = 0; b < S->n_base; b++) {
        if (!(keep >> b & 1) || Z->scen >> b & 1) continue; // the scenario: kept (a hull over it loses what IsZero needs)
        PvDeps rest = Dc & ~((PvDeps)1 << b);
        long m = pv_deps_size(S, rest, PV_TABLE_LIMIT);
        Sv *first = malloc((size_t)m * sizeof *first);
        if (!first) return -1;
        for (long k = 0; k < m; k++) first[k].k = SV_UNK;
        int dep = 0;
        for (long i = 0; i < n && !dep; i++) {
            if (sv[i].k == SV_UNK) continue;
            pv_deps_decode(S, Dc, i, assign);
            long k = pv_deps_index(S, rest, assign);
            if (first[k].k == SV_UNK) first[k] = sv[i];
            else dep = first[k].k != sv[i].k || first[k].x != sv[i].x;
        }
        free(first);
        if (!dep) keep &= ~((PvDeps)1 << b);
    }
    *keep_out = keep;
    return 0;
}

/* Register r after op oi (layer li): its columns against its value in
 * every case, then re-tabulated over what its value depends on. */
static int check_cut(Seed *Z, int oi, int li, int r) {
    PvNet *N = Z->N;
    PvSem *S = Z->S;
    const TfIrOp *op = &Z->ir->ops[oi];
    int off = Z->col[r], size = Z->size[r], kind = Z->ir->regs[r].kind, line = op->stmt->loc.line;
    const char *name = Z->ir->regs[r].name;
    PvDeps Dc = Z->sdeps[r];
    for (int k = 0; k < size; k++) Dc |= N->col[off + k].deps;
    long n = pv_deps_size(S, Dc, PV_TABLE_LIMIT);
    if (n < 0) {
        pv_unproven(N, line, li, "line %d: %s -> %s (layer %d): not proven: more than 2^22 cases", line, tf_ops[op->op].name, name, li);
        return 0;
    }
    Sv *sv = malloc((size_t)n * sizeof *sv), *val = malloc((size_t)Z->nr * sizeof *val);
    if (!sv || !val) {
        free(sv), free(val);
        return -1;
    }
    int assign[TF_PROOF_MAX_BASE];
    double worst = kind == TF_REG_SCALAR || kind == TF_REG_POSITION ? 0 : INFINITY;
    int failed = 0, bad = 0;
    for (long i = 0; i < n; i++) {
        for (int b = 0; b < S->n_base; b++) assign[b] = -1;
        pv_deps_decode(S, Dc, i, assign);
        sv[i].k = SV_UNK;
        int dead = 0;
        for (int k = 0; k < size && !dead; k++) dead = isnan(pv_col_get(N, &N->col[off + k], assign).lo);
        if (dead || sem_run(Z, oi, assign, NULL, val, NULL)) continue;
        Sv v = val[r];
        sv[i] = v;
        if (v.k == SV_UNK || v.k == SV_BAD) {
            bad = 1;
            break;
        }
        char lab[80];
        double mg = cut_margin(Z, kind, off, size, v, assign, &worst);
        if (!(mg > 0) && !failed) {
            failed = 1;
            sv_label(Z, v, lab, sizeof lab);
            note_fail(Z, assign, Dc);
            pv_fail(N, line, li, NULL, 0, "line %d: %s -> %s (layer %d): the columns do not hold %s (margin %.3g)", line,
                    tf_ops[op->op].name, name, li, lab, mg);
        }
    }
    if (bad) {
        pv_unproven(N, line, li, "line %d: %s -> %s (layer %d): not proven: the program gives '%s' no meaning in some case (a store into a register that holds a value, or a read of one that holds none)", line, tf_ops[op->op].name, name, li, name);
        free(sv), free(val);
        return 0;
    }
    if (!failed) {
        if (kind == TF_REG_TOKEN || kind == TF_REG_CATEGORICAL)
            pv_line(N->P, "line %d: %s -> %s: layer %d: decodes with margin %.3g", line, tf_ops[op->op].name, name, li, worst);
        else
            pv_line(N->P, "line %d: %s -> %s: layer %d: within %.3g of the value", line, tf_ops[op->op].name, name, li, worst);
    }
    /* The variables its value depends on: drop each it does not. */
    PvDeps keep;
    if (cut_keep(Z, r, Dc, sv, n, &keep) < 0) {
        free(sv), free(val);
        return -1;
    }
    /* The table keeps the variables the value depends on; the evaluation
       (sem_run) needs the scenario's all the same. Two or more data
       variables: one for the value instead. */
    PvDeps sd = Z->sdeps[r], data = sd & ~Z->scen;
    int v = -1;
    if (data & (data - 1)) {
        Sv seen[64];
        int ns = 0;
        for (long i = 0; i < n && ns < 64; i++) {
            if (sv[i].k == SV_UNK) continue;
            int k = 0;
            while (k < ns && !(seen[k].k == sv[i].k && seen[k].x == sv[i].x)) k++;
            if (k == ns) seen[ns++] = sv[i];
        }
        v = new_var(Z, ns, "%s after line %d", name, line);
        if (v < 0) {
            pv_unproven(N, line, li, "line %d: not proven: more than 64 base variables", line);
            free(sv), free(val);
            return 0;
        }
        memcpy(Z->vals[v], seen, (size_t)ns * sizeof *seen);
        keep = (keep & Z->scen) | (PvDeps)1 << v;
        sd = (sd & Z->scen) | (PvDeps)1 << v;
        Z->cut[(size_t)oi * Z->nr + r] = v;
        Z->ncut[oi]++;
    }
    long nn = pv_deps_size(S, keep, PV_TABLE_LIMIT);
    int rc = 0;
    for (int k = 0; k < size && rc == 0; k++) {
        PvCol c = {0};
        rc = pv_col_set(&c, keep, nn);
        for (long j = 0; j < nn && rc == 0; j++) c.v[j] = (TfIv){NAN, NAN};
        for (long i = 0; i < n && rc == 0; i++) {
            if (sv[i].k == SV_UNK) continue;
            pv_deps_decode(S, Dc, i, assign);
            if (v >= 0) assign[v] = var_find(Z, v, sv[i]);
            hull_nan(&c.v[pv_deps_index(S, keep, assign)], pv_col_get(N, &N->col[off + k], assign));
        }
        if (rc == 0) {
            pv_col_free(&N->col[off + k]);
            N->col[off + k] = c;
        } else {
            pv_col_free(&c);
        }
    }
    Z->sdeps[r] = sd;
    free(sv), free(val);
    return rc;
}

/* The unembedding: the right token wherever the output holds one. */
static int seed_output(Seed *Z) {
    PvNet *N = Z->N;
    PvSem *S = Z->S;
    const TfModel *m = Z->m;
    int d = Z->d, nv = m->n_vocab, r = Z->ir->output_reg, line = Z->ir->output_loc.line;
    const float *U = m->tensors[m->unembed].data;
    const float *ub = m->unembed_bias >= 0 ? m->tensors[m->unembed_bias].data : NULL;
    unsigned char *reads = malloc((size_t)d);
    TfIv *x = calloc((size_t)d, sizeof *x);
    Sv *val = malloc((size_t)Z->nr * sizeof *val);
    if (!reads || !x || !val) {
        free(reads), free(x), free(val);
        return -1;
    }
    PvDeps D = pv_read_cols(N, U, 0, nv, reads) | Z->sdeps[r];
    long n = pv_deps_size(S, D, PV_TABLE_LIMIT);
    if (n < 0) pv_unproven(N, line, -1, "the output: not proven: more than 2^22 combinations");
    double worst = INFINITY;
    long none = 0;
    int assign[TF_PROOF_MAX_BASE];
    for (long i = 0; i < n && !N->failed; i++) {
        for (int b = 0; b < S->n_base; b++) assign[b] = -1;
        pv_deps_decode(S, D, i, assign);
        int dead = 0;
        for (int c = 0; c < d && !dead; c++)
            if (reads[c]) x[c] = pv_col_get(N, &N->col[c], assign), dead = isnan(x[c].lo);
        if (dead || sem_run(Z, Z->ir->n_ops - 1, assign, NULL, val, NULL)) continue;
        if (val[r].k == SV_NONE) {
            none++;
            continue;
        }
        if (val[r].k != SV_TOK) {
            pv_unproven(N, line, -1, "the output '%s': not proven: it has no meaning in some case", Z->ir->regs[r].name);
            break;
        }
        int e = (int)val[r].x;
        double mg = pv_logit_margin(U, ub, nv, e, x, reads, d);
        if (!(mg > 0)) {
            char lab[80];
            sv_label(Z, val[r], lab, sizeof lab);
            note_fail(Z, assign, D);
            pv_fail(N, line, m->n_layers, NULL, 0, "the output '%s': the unembedding does not pick %s (margin %.3g)",
                    Z->ir->regs[r].name, lab, mg);
            break;
        }
        worst = fmin(worst, mg);
    }
    if (!N->failed && !N->unproven)
        pv_line(N->P, "output %s: the right token by a logit margin of %.3g wherever it holds one%s",
                Z->ir->regs[r].name, worst, none ? " (elsewhere no value: no token is claimed)" : "");
    free(reads), free(x), free(val);
    return 0;
}

/* Random prompts that hold the input facts: each found character once at
 * a random place (the first within 12 positions, the second within 24,
 * ...), the last position p at or after them, the other positions digits
 * (or any token but the found ones), into toks[0..p] and assign (its
 * anchors and p); with `fail`, the failing case's variables where it has
 * them. 0, or -1 where this draw does not fit. */
static int draw_prompt(Seed *Z, int fail, const int *fill, int nf, unsigned long long *rng, int *toks, int *assign) {
#define RND(n) (*rng = *rng * 6364136223846793005ull + 1442695040888963407ull, (int)((*rng >> 33) % (unsigned)(n)))
    PvSem *S = Z->S;
    for (int b = 0; b < S->n_base; b++) assign[b] = -1;
    int pos[MAX_ANCHOR], last = 0, ok = 1;
    for (int i = 0; i < Z->n_anchor; i++) {
        int v = Z->anchor_var[i];
        pos[i] = fail && Z->fail_deps >> v & 1 ? Z->fail_assign[v] : RND(12 * (i + 1));
        for (int k = 0; k < i; k++) ok &= pos[k] != pos[i];
        last = pos[i] > last ? pos[i] : last;
        assign[v] = pos[i];
    }
    int p = fail && Z->fail_deps >> Z->v_p & 1 ? Z->fail_assign[Z->v_p] : last + RND(8);
    if (!ok || p < last || p > Z->maxpos || p + 1 > TF_PROOF_MAX_PROMPT) return -1;
    assign[Z->v_p] = p;
    for (int j = 0; j <= p; j++) toks[j] = fill[RND(nf)];
    for (int i = 0; i < Z->n_anchor; i++) toks[pos[i]] = Z->anchor_tok[i];
    if (fail && Z->fail_deps >> Z->v_tp & 1 && anchor_index(Z, toks[p]) < 0) toks[p] = Z->fail_assign[Z->v_tp];
#undef RND
    return p;
}

#define ANY_PROMPTS 2000

/* Prompts that reach the failing case (random ones of its scenario), and
 * up to ANY_PROMPTS others of any scenario (P->any_*), each with the token
 * the program gives after it. */
static void fail_prompts(Seed *Z, int reach) {
    TfProof *P = Z->N->P;
    PvSem *S = Z->S;
    int assign[TF_PROOF_MAX_BASE], toks[TF_PROOF_MAX_PROMPT], fill[256], nf = 0;
    Sv *val = malloc((size_t)Z->nr * sizeof *val);
    P->any_len = malloc(ANY_PROMPTS * sizeof *P->any_len);
    P->any_prompt = malloc((size_t)ANY_PROMPTS * TF_PROOF_MAX_PROMPT * sizeof *P->any_prompt);
    P->any_expect = malloc(ANY_PROMPTS * sizeof *P->any_expect);
    if (!val || !P->any_len || !P->any_prompt || !P->any_expect) {
        free(val);
        return;
    }
    for (int t = 0; t < Z->ir->n_vocab; t++)
        if (digit_of(Z, t) >= 0) fill[nf++] = t;
    for (int t = 0; nf == 0 && t < Z->ir->n_vocab; t++)
        if (anchor_index(Z, t) < 0) fill[nf++] = t;
    unsigned long long rng = 0x9e3779b97f4a7c15ull;
    for (long tries = 0; reach && tries < 200000 && P->n_prompts < TF_PROOF_MAX_PROMPTS && nf; tries++) {
        int p = draw_prompt(Z, 1, fill, nf, &rng, toks, assign);
        if (p < 0 || sem_run(Z, Z->ir->n_ops - 1, assign, toks, val, NULL)) continue;
        int match = 1;
        for (int b = 0; b < S->n_base && match; b++)
            if (Z->fail_deps >> b & 1) match = assign[b] == Z->fail_assign[b];
        if (!match) continue;
        int k = P->n_prompts++;
        P->prompt_len[k] = p + 1;
        memcpy(P->prompt[k], toks, (size_t)(p + 1) * sizeof *toks);
        Sv o = val[Z->ir->output_reg];
        P->prompt_expect[k] = o.k == SV_TOK ? (int)o.x : -1;
    }
    for (long tries = 0; tries < 20 * ANY_PROMPTS && P->n_any < ANY_PROMPTS && nf; tries++) {
        int p = draw_prompt(Z, 0, fill, nf, &rng, toks, assign);
        if (p < 0 || sem_run(Z, Z->ir->n_ops - 1, assign, toks, val, NULL)) continue;
        Sv o = val[Z->ir->output_reg];
        if (o.k != SV_TOK) continue;
        int k = P->n_any++;
        P->any_len[k] = p + 1;
        memcpy(P->any_prompt + (size_t)k * TF_PROOF_MAX_PROMPT, toks, (size_t)(p + 1) * sizeof *toks);
        P->any_expect[k] = (int)o.x;
    }
    free(val);
}

static void var_label(const Seed *Z, int v, int i, char *buf, size_t n) {
    if (v == Z->v_p) snprintf(buf, n, "%d", i);
    else sv_label(Z, Z->vals[v][i], buf, n);
}

/* The failing case's variables, for the report. */
static void fail_case(Seed *Z) {
    TfProof *P = Z->N->P;
    P->n_assign = 0;
    for (int b = 0; b < Z->S->n_base && P->n_assign < TF_PROOF_MAX_BASE; b++) {
        if (!(Z->fail_deps >> b & 1)) continue;
        int k = P->n_assign++;
        snprintf(P->assign_reg[k], sizeof P->assign_reg[k], "%s", Z->vname[b]);
        var_label(Z, b, Z->fail_assign[b], P->assign_val[k], sizeof P->assign_val[k]);
        P->assign_idx[k] = Z->fail_assign[b];
        P->assign_base[k] = b;
    }
}

/* The scenario's variables, the registers' columns, the embedding at p. */
static int seed_setup(Seed *Z) {
    PvNet *N = Z->N;
    const TfIr *ir = Z->ir;
    const TfModel *m = Z->m;
    int d = Z->d;
    char lab[64];
    int assign[TF_PROOF_MAX_BASE];
    for (int oi = 0; oi < ir->n_ops; oi++) {
        if (ir->ops[oi].op != TF_OP_FIND_AND_STORE) continue;
        int t = plan_of(Z, oi)->args[0].tok;
        if (anchor_index(Z, t) >= 0) continue;
        if (Z->n_anchor == MAX_ANCHOR) return 1;
        int v = new_var(Z, Z->maxpos + 1, "the position of '%s'%.0d", model_token_name(m, t, lab), 0);
        if (v < 0) return -1;
        for (int i = 0; i <= Z->maxpos; i++) Z->vals[v][i] = (Sv){SV_POS, i};
        Z->anchor_tok[Z->n_anchor] = t;
        Z->anchor_var[Z->n_anchor++] = v;
        Z->scen |= (PvDeps)1 << v;
    }
    Z->v_p = new_var(Z, Z->maxpos + 1, "the last position%s%.0d", "", 0);
    Z->v_tp = new_var(Z, m->n_vocab, "the last token%s%.0d", "", 0);
    if (Z->v_p < 0 || Z->v_tp < 0) return -1;
    for (int i = 0; i <= Z->maxpos; i++) Z->vals[Z->v_p][i] = (Sv){SV_NUM, i};
    for (int t = 0; t < m->n_vocab; t++) Z->vals[Z->v_tp][t] = (Sv){SV_TOK, t};
    Z->scen |= (PvDeps)1 << Z->v_p;
    for (int oi = 0; oi < ir->n_ops; oi++) {
        if (ir->ops[oi].op != TF_OP_GET_RELATIVE_TOKEN) continue;
        int v = new_var(Z, m->n_vocab, "the token %s reads (line %d)", ir->ops[oi].stmt->label.text ? ir->ops[oi].stmt->label.text : "GetRelativeToken", ir->ops[oi].stmt->loc.line);
        if (v < 0) return 1;
        for (int t = 0; t < m->n_vocab; t++) Z->vals[v][t] = (Sv){SV_TOK, t};
        Z->grt_var[oi] = v;
    }
    /* The scenarios every op's facts allow (the positions read exist, ...):
       a case outside them is no prompt's. */
    long nsc = pv_deps_size(Z->S, Z->scen, 1L << 26);
    Sv *sv = malloc((size_t)Z->nr * sizeof *sv);
    unsigned char *ok = nsc > 0 ? malloc((size_t)nsc) : NULL;
    if (!sv || (nsc > 0 && !ok)) {
        free(sv), free(ok);
        return -1;
    }
    for (long i = 0; i < nsc; i++) {
        for (int b = 0; b < Z->S->n_base; b++) assign[b] = -1;
        pv_deps_decode(Z->S, Z->scen, i, assign);
        ok[i] = !sem_run(Z, ir->n_ops - 1, assign, NULL, sv, NULL);
    }
    free(sv);
    Z->scen_ok = ok;
    PvDeps pdeps = (PvDeps)1 << Z->v_p;
    Z->sdeps[TF_IR_REG_TOKENS] = (PvDeps)1 << Z->v_tp;
    Z->sdeps[TF_IR_REG_POS] = pdeps;
    /* The embedding at p: the token row plus the position row. */
    const float *te = m->tensors[m->tok_embed].data, *pe = m->tensors[m->pos_embed].data;
    Sv *val = malloc((size_t)Z->nr * sizeof *val);
    if (!val) return -1;
    for (int c = 0; c < d; c++) {
        PvDeps dep = 0;
        for (int t = 1; t < m->n_vocab; t++)
            if (te[(size_t)t * d + c] != te[c]) dep |= (PvDeps)1 << Z->v_tp;
        for (int j = 1; j <= Z->maxpos; j++)
            if (pe[(size_t)j * d + c] != pe[c]) dep |= pdeps;
        long n = pv_deps_size(Z->S, dep, PV_TABLE_LIMIT);
        if (n < 0 || pv_col_set(&N->col[c], dep, n) < 0) {
            free(val);
            return -1;
        }
        for (long i = 0; i < n; i++) {
            for (int b = 0; b < Z->S->n_base; b++) assign[b] = -1;
            pv_deps_decode(Z->S, dep, i, assign);
            SemInfo I = {-1, -1};
            if (sem_run(Z, -1, assign, NULL, val, &I)) {
                N->col[c].v[i] = (TfIv){NAN, NAN};
                continue;
            }
            int t = assign[Z->v_tp] >= 0 ? assign[Z->v_tp] : 0;
            int p = I.p >= 0 ? I.p : 0;
            double x = (double)te[(size_t)t * d + c] + (double)pe[(size_t)p * d + c];
            N->col[c].v[i] = iv_widen(iv_pt(x), TF_F32_U * fabs(x));
        }
    }
    free(val);
    return 0;
}

int pv_seed_program(const PvSem *S) {
    const TfIr *ir = S->ir;
    if (!ir || ir->model || ir->n_ops == 0 || ir->every_position || ir->bos >= 0) return 0;
    for (int i = 0; i < ir->n_ops; i++)
        if (tf_ops[ir->ops[i].op].general || !ir->ops[i].plan) return 0;
    return 1;
}

/* An MLP's columns whose every unit reads nothing (the seed's Clear and
 * StepPosition at -O0: GELU(1000) - 1000 on every column they do not
 * change): it adds the same to them at every position, into cdelta (and
 * into the followed layer's cases, where one wrote the column), and takes
 * them out of lw, the columns it writes otherwise. */
static void mlp_const(Seed *Z, int li, unsigned char *lw) {
    const TfModel *m = Z->m;
    const TfLayer *ly = &m->layers[li];
    int d = Z->d, F = ly->d_hidden, gelu = ly->act == TF_ACT_GELU;
    if (!gelu && ly->act != TF_ACT_RELU) return;
    const float *w1 = m->tensors[ly->fc1_weight].data, *w2 = m->tensors[ly->fc2_weight].data;
    const float *b1 = ly->fc1_bias >= 0 ? m->tensors[ly->fc1_bias].data : NULL;
    const float *b2 = ly->fc2_bias >= 0 ? m->tensors[ly->fc2_bias].data : NULL;
    const float *te = m->tensors[m->tok_embed].data, *pe = m->tensors[m->pos_embed].data;
    for (int c = 0; c < d; c++) {
        if (!lw[c]) continue;
        TfIv s = iv_pt(b2 ? b2[c] : 0);
        double pos = fmax(s.hi, 0), neg = fmax(-s.lo, 0);
        int cst = 1, nterm = 1;
        for (int u = 0; u < F && cst; u++) {
            float wt = w2[(size_t)c * F + u];
            if (wt == 0) continue;
            for (int i = 0; i < d && cst; i++) cst = w1[(size_t)u * d + i] == 0;
            TfIv z = iv_pt(b1 ? b1[u] : 0), h = iv_scale(gelu ? iv_gelu(z) : iv_relu(z), wt);
            s = iv_add(s, h);
            pos += fmax(h.hi, 0), neg += fmax(-h.lo, 0), nterm++;
        }
        if (!cst) continue;
        int nu = 0, u1 = -1;
        for (int u = 0; u < F; u++)
            if (w2[(size_t)c * F + u] != 0) nu++, u1 = u;
        if (nu == 1) { // one unit on its exact side, adding exactly 0 (the seed's GELU(1000) - 1000): x + 0 = x
            TfIv z = iv_f32(iv_pt(b1 ? b1[u1] : 0));
            TfIv y = (gelu ? z.lo >= 8 : z.lo >= 0) ? unit_col_f32(z, w2[(size_t)c * F + u1], b2, c, 0, iv_pt(0))
                                                    : iv_pt(NAN);
            if (y.lo == 0 && y.hi == 0) {
                lw[c] = 0;
                continue;
            }
        }
        /* The column's largest value at any position, for the residual's
           addition: the embedding's, what was added, a followed layer's. */
        double xm = iv_mag(Z->cdelta[c]);
        for (int t = 0; t < m->n_vocab; t++)
            for (int j = 0; j <= Z->maxpos; j++) xm = fmax(xm, fabs((double)te[(size_t)t * d + c]) + fabs((double)pe[(size_t)j * d + c]) + iv_mag(Z->cdelta[c]));
        STrack *T = Z->wlayer[c] >= 0 ? Z->trk[Z->wlayer[c]] : NULL;
        int w = -1;
        for (int k = 0; T && k < T->nw; k++)
            if (T->wcol[k] == c) w = k;
        size_t np = (size_t)Z->maxpos + 1, nt = (size_t)m->n_vocab;
        if (T && w >= 0) {
            for (size_t i = 0; i < np * np; i++) xm = fmax(xm, iv_mag(T->found[i * (size_t)T->nw + (size_t)w]));
            for (size_t i = 0; i < nt * np; i++) xm = fmax(xm, iv_mag(T->cand[i * (size_t)T->nw + (size_t)w]));
        } else if (Z->written[c]) {
            continue; // a layer not followed wrote it: no case to add to
        }
        TfIv dl = iv_widen(s, iv_sum_err(pos, neg, nterm) + TF_F32_U * (xm + iv_mag(s)) * 1.01);
        if (T && w >= 0) {
            for (size_t i = 0; i < np * np; i++) {
                TfIv *f = &T->found[i * (size_t)T->nw + (size_t)w];
                if (!isnan(f->lo)) *f = iv_add(*f, dl);
            }
            for (size_t i = 0; i < nt * np; i++) T->cand[i * (size_t)T->nw + (size_t)w] = iv_add(T->cand[i * (size_t)T->nw + (size_t)w], dl);
        } else {
            Z->cdelta[c] = iv_add(Z->cdelta[c], dl);
        }
        lw[c] = 0;
    }
}

/* Which layers to follow at every position (STrack): the one writer of a
 * column that a later attention's key reads before another layer writes
 * it, and so on for a followed layer's query and key, latest first. */
static int need_tracks(Seed *Z) {
    const TfModel *m = Z->m;
    int d = Z->d, L = m->n_layers;
    unsigned char *lw = malloc((size_t)d);
    int *fw = malloc((size_t)d * sizeof *fw), *sw = malloc((size_t)d * sizeof *sw);
    if (!lw || !fw || !sw) {
        free(lw), free(fw), free(sw);
        return -1;
    }
    for (int c = 0; c < d; c++) fw[c] = sw[c] = L; // the first and second layer that write it
    for (int li = 0; li < L; li++) {
        pv_layer_writes(m, &m->layers[li], lw);
        for (int c = 0; c < d; c++)
            if (lw[c] && fw[c] == L) fw[c] = li;
            else if (lw[c] && sw[c] == L) sw[c] = li;
    }
    for (int l2 = L - 1; l2 > 0; l2--) {
        const TfLayer *ly = &m->layers[l2];
        if (ly->kind != TF_LAYER_ATTENTION) continue;
        const float *wk = m->tensors[ly->key].data, *wq = m->tensors[ly->query].data;
        int D = ly->n_heads * ly->d_head;
        for (int c = 0; c < d; c++) {
            if (fw[c] >= l2 || sw[c] < l2) continue;
            int rd = 0;
            for (int i = 0; i < D && !rd; i++)
                rd = wk[(size_t)i * d + c] != 0 || (Z->need_trk[l2] && wq[(size_t)i * d + c] != 0);
            if (rd) Z->need_trk[fw[c]] = 1;
        }
    }
    free(lw), free(fw), free(sw);
    return 0;
}

static int seed_prove_model(const TfModel *m, PvSem *S, TfProof *P) {
    const TfIr *ir = S->ir;
    PvNet N = {.m = m, .S = S, .P = P};
    Seed Z = {.N = &N, .S = S, .ir = ir, .m = m, .period = ir->period, .d = m->d_model, .nr = ir->n_regs};
    int ready = 0; // seed_setup done: the program can be evaluated on prompts
    Z.maxpos = (m->max_len < ir->period ? m->max_len : ir->period) - 1;
    S->n_base = 0;
    int rc = 0;
    N.col = calloc((size_t)Z.d, sizeof *N.col);
    N.bos = calloc((size_t)Z.d, sizeof *N.bos);
    Z.cut = malloc((size_t)ir->n_ops * Z.nr * sizeof *Z.cut);
    Z.ncut = calloc((size_t)ir->n_ops + 1, sizeof *Z.ncut);
    Z.grt_var = malloc((size_t)ir->n_ops * sizeof *Z.grt_var);
    Z.sdeps = calloc((size_t)Z.nr, sizeof *Z.sdeps);
    Z.col = malloc((size_t)Z.nr * sizeof *Z.col);
    Z.size = calloc((size_t)Z.nr, sizeof *Z.size);
    Z.written = calloc((size_t)Z.d, 1);
    Z.cdelta = calloc((size_t)Z.d, sizeof *Z.cdelta);
    Z.wlayer = malloc((size_t)Z.d * sizeof *Z.wlayer);
    Z.trk = calloc((size_t)m->n_layers + 1, sizeof *Z.trk);
    Z.need_trk = calloc((size_t)m->n_layers + 1, 1);
    if (!N.col || !N.bos || !Z.cut || !Z.ncut || !Z.grt_var || !Z.sdeps || !Z.col || !Z.size || !Z.written || !Z.cdelta || !Z.wlayer ||
        !Z.trk || !Z.need_trk)
        rc = -1;
    for (int c = 0; rc == 0 && c < Z.d; c++) Z.wlayer[c] = -1;
    if (rc == 0) rc = need_tracks(&Z);
    for (long i = 0; rc == 0 && i < (long)ir->n_ops * Z.nr; i++) Z.cut[i] = -1;
    for (int i = 0; rc == 0 && i < ir->n_ops; i++) Z.grt_var[i] = -1;
    for (int r = 0; rc == 0 && r < Z.nr; r++) {
        int mr = model_find_register(m, ir->regs[r].name);
        Z.col[r] = mr >= 0 ? m->regs[mr].offset : -1;
        Z.size[r] = mr >= 0 ? m->regs[mr].size : 0;
        if (mr < 0 || m->regs[mr].size != ir->regs[r].size || Z.size[r] < 1) {
            pv_unproven(&N, 0, -1, "register '%s' is not in the file as the source declares it", ir->regs[r].name);
            break;
        }
    }
    if (rc == 0 && !N.unproven && (m->n_layers != ir->n_ops || m->unembed < 0 || Z.maxpos < 0))
        pv_unproven(&N, 0, -1, "not proven: the file's %d layers are not the source's %d seed ops, one each", m->n_layers, ir->n_ops);
    for (int li = 0; rc == 0 && !N.unproven && li < m->n_layers; li++) {
        const TfLayer *ly = &m->layers[li];
        if (ly->line != ir->ops[li].stmt->loc.line || ly->kind != tf_ops[ir->ops[li].op].layer || ly->n_parts || ly->norm_weight >= 0)
            pv_unproven(&N, ly->line, li, "layer %d (%s): not proven: it is not the source's op %d (line %d, %s) alone", li, ly->name, li, ir->ops[li].stmt->loc.line, tf_ops[ir->ops[li].op].name);
    }
    if (rc == 0 && !N.unproven) {
        rc = seed_setup(&Z);
        ready = rc == 0;
        if (rc == 1) {
            pv_unproven(&N, 0, -1, "not proven: more than 64 base variables (found characters, tokens read)");
            rc = 0;
        }
    }
    if (rc == 0 && !N.unproven) {
        char facts[400];
        int k = snprintf(facts, sizeof facts, "input facts: ");
        for (int i = 0; i < Z.n_anchor; i++) {
            char tb[64];
            k += snprintf(facts + k, sizeof facts - (size_t)k, "%s'%s'", i ? ", " : "", model_token_name(m, Z.anchor_tok[i], tb));
        }
        /* Each what an op's meaning needs, and nothing else. */
        if (Z.n_anchor)
            snprintf(facts + k, sizeof facts - (size_t)k, " once each at or before the last position, in any order (FindAndStore stores the position of the one); every position a GetRelativeToken reads exists; Multiply reads digits (it adds digits); any other token anywhere");
        else
            snprintf(facts + k, sizeof facts - (size_t)k, "every position a GetRelativeToken reads exists; Multiply reads digits (it adds digits); any other token anywhere");
        pv_line(P, "%s (positions 0..%d)", facts, Z.maxpos);
    }
    int w[TF_OP_MAX_PARAMS * 16];
    unsigned char *lw = calloc((size_t)Z.d, 1);
    if (!lw) rc = -1;
    for (int li = 0; rc == 0 && !N.failed && !N.unproven && li < m->n_layers; li++) {
        const TfLayer *ly = &m->layers[li];
        rc = ly->kind == TF_LAYER_MLP ? seed_mlp(&Z, li) : seed_attn(&Z, li, li);
        if (rc || N.failed || N.unproven) break;
        op_deps(&Z, li);
        int nw = op_writes(&Z, li, w);
        for (int k = 0; k < nw && rc == 0 && !N.failed && !N.unproven; k++) rc = check_cut(&Z, li, li, w[k]);
        pv_layer_writes(Z.m, ly, lw);
        if (ly->kind == TF_LAYER_MLP) mlp_const(&Z, li, lw);
        for (int c = 0; c < Z.d; c++) {
            if (lw[c]) Z.wlayer[c] = Z.written[c] ? -2 : li;
            Z.written[c] |= lw[c];
        }
    }
    free(lw);
    if (rc == 0 && !N.failed && !N.unproven) rc = seed_output(&Z);
    if (rc == 0 && N.failed && Z.have_fail) fail_case(&Z);
    if (rc == 0 && ready && (N.failed || N.unproven)) fail_prompts(&Z, N.failed && Z.have_fail);
    for (int c = 0; N.col && c < Z.d; c++) pv_col_free(&N.col[c]);
    free(Z.scen_ok);
    free(N.col), free(N.bos), free(Z.cut), free(Z.ncut), free(Z.grt_var), free(Z.sdeps), free(Z.col), free(Z.size), free(Z.written), free(Z.cdelta);
    for (int li = 0; Z.trk && li < m->n_layers; li++) strack_free(Z.trk[li]);
    free(Z.wlayer), free(Z.trk), free(Z.need_trk);
    for (int b = 0; b < S->n_base; b++) free(Z.vals[b]);
    return rc;
}

/* A scheduled model (ops side by side, moved earlier) is proven as the
 * model of one layer per op in the source's order that it computes the
 * same as (compiler/prove_split.c), or left unproven saying why. */
int pv_seed_prove(const TfModel *m, PvSem *S, TfProof *P) {
    if (!pv_split_needed(m, S->ir)) return seed_prove_model(m, S, P);
    PvSplit sp;
    char why[400];
    int line = 0, rc = pv_split_seed(m, S->ir, &sp, why, sizeof why, &line);
    if (rc < 0) return -1;
    if (rc == 1) {
        PvNet N = {.m = m, .S = S, .P = P};
        pv_unproven(&N, line, -1, "%s", why);
        return 0;
    }
    char map[600];
    int k = 0;
    for (int oi = 0; oi < sp.u.n_layers && k < (int)sizeof map - 16; oi++)
        k += snprintf(map + k, sizeof map - (size_t)k, "%s%d", oi ? " " : "", sp.file_layer[oi]);
    pv_line(P, "the file's %d layers taken apart into the source's %d ops, one layer each in the source's order "
               "(\"layer i\" below is op i; op i's layer in the file: %s)", m->n_layers, sp.u.n_layers, map);
    rc = seed_prove_model(&sp.u, S, P);
    if (P->fail_layer >= 0 && P->fail_layer < sp.u.n_layers) P->fail_layer = sp.file_layer[P->fail_layer];
    pv_split_free(&sp);
    return rc;
}
