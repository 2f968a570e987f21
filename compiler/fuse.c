/* fuse.c: consecutive MLPs composed into one, selections that read through
 * Maps, repeated tables merged (fuse.h). */
#include "fuse.h"
#include "hash.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "plans.h"
#include "values_internal.h"

#define MAX_FUSED_COMBOS (1 << 16)

/* The combination index (mixed radix, first fastest) of a table over regs,
 * each register's value index taken from zidx (its place in zregs), or
 * r_idx for r_fixed. */
static int combo_of(const TfIr *ir, const int *regs, int n, const int *zregs, int nz,
                    const int *zidx, int r_fixed, int r_idx) {
    int c = 0, radix = 1;
    for (int q = 0; q < n; q++) {
        int v = -1;
        if (regs[q] == r_fixed) {
            v = r_idx;
        } else {
            for (int z = 0; z < nz; z++)
                if (zregs[z] == regs[q]) v = zidx[z];
        }
        c += v * radix;
        radix *= ir->regs[regs[q]].facts.n_vals;
    }
    return c;
}

/* i (a table over categorical inputs, writing categorical r) feeds table j:
 * one table over i's inputs and j's others. NULL when it cannot be built or
 * is larger than the two. */
static TfOpPlan *fuse_tables(TfIr *ir, const TfOpPlan *pi, const TfOpPlan *pj, int r) {
    int z[TF_PLAN_MAX_INPUTS], nz = 0;
    for (int q = 0; q < pi->n_in; q++) z[nz++] = pi->in[q];
    for (int q = 0; q < pj->n_in; q++) {
        if (pj->in[q] == r) continue;
        int seen = 0;
        for (int k = 0; k < nz; k++) seen |= z[k] == pj->in[q];
        if (seen) continue;
        if (nz == TF_PLAN_MAX_INPUTS) return NULL;
        z[nz++] = pj->in[q];
    }
    long total = 1;
    double err = 0;
    for (int k = 0; k < nz; k++) {
        total *= ir->regs[z[k]].facts.n_vals;
        err += ir->regs[z[k]].facts.err;
        if (total > MAX_FUSED_COMBOS) return NULL;
    }
    if (err >= 0.25) return NULL; // the steps' margin (compiler/map.c)
    int dest_cat = ir->regs[pj->dest].kind == TF_REG_CATEGORICAL;
    TfOpPlan *p = arena_alloc(&ir->arena, sizeof *p);
    if (!p) return NULL;
    *p = *pj;
    p->n_in = nz;
    memcpy(p->in, z, sizeof z);
    p->n_combo = (int)total;
    p->combo_col = dest_cat ? arena_alloc(&ir->arena, (size_t)total * sizeof *p->combo_col) : NULL;
    p->combo_num = dest_cat ? NULL : arena_alloc(&ir->arena, (size_t)total * sizeof *p->combo_num);
    if (dest_cat ? !p->combo_col : !p->combo_num) return NULL;
    int idx[TF_PLAN_MAX_INPUTS] = {0};
    for (long c = 0; c < total; c++) {
        int ci = combo_of(ir, pi->in, pi->n_in, z, nz, idx, -1, 0);
        int col = pi->combo_col[ci]; // r's column, its value index; -1: none
        if (col < 0) { // r holds no value: no unit of j fired
            if (dest_cat) p->combo_col[c] = -1;
            else p->combo_num[c] = 0;
        } else {
            int cj = combo_of(ir, pj->in, pj->n_in, z, nz, idx, r, col);
            if (dest_cat) p->combo_col[c] = pj->combo_col[cj];
            else p->combo_num[c] = pj->combo_num[cj];
        }
        for (int k = 0; k < nz && ++idx[k] == ir->regs[z[k]].facts.n_vals; k++) idx[k] = 0;
    }
    return p;
}

/* i (a staircase over a number, writing categorical r) feeds a table j of
 * r alone: a staircase over that number. */
static TfOpPlan *fuse_staircase(TfIr *ir, const TfOpPlan *pi, const TfOpPlan *pj) {
    int dest_cat = ir->regs[pj->dest].kind == TF_REG_CATEGORICAL;
    TfOpPlan *p = arena_alloc(&ir->arena, sizeof *p);
    if (!p) return NULL;
    *p = *pj;
    p->form = TF_PLAN_STAIRCASE;
    p->n_in = pi->n_in; // one number, or a LINEAR Map's inputs (x_linear)
    memcpy(p->in, pi->in, sizeof p->in);
    p->x_linear = pi->x_linear;
    memcpy(p->coef, pi->coef, sizeof p->coef);
    memcpy(p->in_coef, pi->in_coef, sizeof p->in_coef);
    p->c0 = pi->c0;
    p->n_combo = 0;
    p->combo_col = NULL;
    p->combo_num = NULL;
    p->n_x = pi->n_x;
    p->xs = pi->xs;
    p->x_col = dest_cat ? arena_alloc(&ir->arena, (size_t)pi->n_x * sizeof *p->x_col) : NULL;
    p->x_num = dest_cat ? NULL : arena_alloc(&ir->arena, (size_t)pi->n_x * sizeof *p->x_num);
    if (dest_cat ? !p->x_col : !p->x_num) return NULL;
    for (int k = 0; k < pi->n_x; k++) {
        int col = pi->x_col[k];
        if (dest_cat) p->x_col[k] = col < 0 ? -1 : pj->combo_col[col];
        else p->x_num[k] = col < 0 ? 0 : pj->combo_num[col];
    }
    return p;
}

/* i (a LINEAR Map writing number r) feeds staircase j over r: a staircase
 * over the linear combination itself. */
static TfOpPlan *fuse_linear(TfIr *ir, const TfOpPlan *pi, const TfOpPlan *pj) {
    TfOpPlan *p = arena_alloc(&ir->arena, sizeof *p);
    if (!p) return NULL;
    *p = *pj;
    p->n_in = pi->n_in;
    memcpy(p->in, pi->in, sizeof p->in);
    memcpy(p->coef, pi->coef, sizeof p->coef);
    memset(p->in_coef, 0, sizeof p->in_coef); // a LINEAR Map's inputs are numbers
    p->c0 = pi->c0;
    p->x_linear = 1;
    return p;
}

/* The program, and per register the op that writes it (general ops write
 * a register once). */
typedef struct Fz {
    TfIr *ir;
    const int *writers;
} Fz;

/* The op that wrote r, -1 when none before op j. */
static int writer_of(const Fz *F, int j, int r) {
    const TfIr *ir = F->ir;
    if (r < 0) return -1;
    int w = F->writers[r];
    if (w < 0 || w >= j || !ir->ops[w].plan || ir->ops[w].plan->dest != r) return -1;
    return w;
}

/* The op before j that wrote r, when it is a table or a staircase into a
 * categorical register, or a LINEAR Map into a number, without a run-time
 * check. */
static int table_writer(const Fz *F, int j, int r) {
    const TfIr *ir = F->ir;
    int w = writer_of(F, j, r);
    if (w < 0) return -1;
    const TfOpPlan *p = ir->ops[w].plan;
    if (p->check) return -1;
    if (ir->regs[r].kind != TF_REG_CATEGORICAL) return p->form == TF_PLAN_LINEAR ? w : -1;
    if (p->form == TF_PLAN_TABLE || p->form == TF_PLAN_STAIRCASE) return w;
    return -1;
}

/* Whether one of op i's inputs is written again after i, before j (never,
 * as general ops write a register once; kept as the condition fusion needs). */
static int inputs_rewritten(const Fz *F, int i, int j) {
    const TfOpPlan *pi = F->ir->ops[i].plan;
    for (int q = 0; q < pi->n_in; q++) {
        int w = F->writers[pi->in[q]];
        if (w > i && w < j) return 1;
    }
    return 0;
}

/* Two staircases over numbers x1, x2 (Counts' steps) feed a table j of
 * their two results: when j's result is a function of x1 - x2 (or of
 * x1 + x2) over every pair of their values, with steps wide enough for the
 * errors (compiler/map.c's margin), a staircase over that sum. */
typedef struct Pt {
    double x;
    int col;
    double num;
} Pt;

static int pt_cmp(const void *a, const void *b) {
    double x = ((const Pt *)a)->x, y = ((const Pt *)b)->x;
    return x < y ? -1 : x > y;
}

static TfOpPlan *fuse_two_staircases(TfIr *ir, const TfOpPlan *p1, const TfOpPlan *p2,
                                    const TfOpPlan *pj) {
    if (pj->n_in != 2 || p1->x_linear || p2->x_linear || p1->n_in != 1 || p2->n_in != 1 ||
        p1->in[0] == p2->in[0])
        return NULL;
    int dest_cat = ir->regs[pj->dest].kind == TF_REG_CATEGORICAL;
    int n1 = p1->n_x, n2 = p2->n_x, n = n1 * n2, n_a = ir->regs[pj->in[0]].facts.n_vals;
    Pt *pts = malloc((size_t)n * sizeof *pts);
    if (!pts) return NULL;
    double e = ir->regs[p1->in[0]].facts.err + ir->regs[p2->in[0]].facts.err;
    static const double signs[2] = {-1.0, 1.0};
    for (int si = 0; si < 2; si++) {
        double b = signs[si], xmax = 0, gap = INFINITY;
        for (int a = 0; a < n1; a++)
            for (int c = 0; c < n2; c++) {
                Pt *t = &pts[a * n2 + c];
                t->x = p1->xs[a] + b * p2->xs[c];
                int ca = p1->x_col[a], cb = p2->x_col[c];
                int cj = ca < 0 || cb < 0 ? -1 : ca + cb * n_a;
                t->col = cj < 0 || !dest_cat ? -1 : pj->combo_col[cj];
                t->num = cj < 0 || dest_cat ? 0 : pj->combo_num[cj];
                xmax = fmax(xmax, fabs(t->x));
            }
        qsort(pts, (size_t)n, sizeof *pts, pt_cmp);
        int ok = 1, m = 0;
        for (int k = 0; k < n && ok; k++) {
            int same_x = m > 0 && pts[k].x - pts[m - 1].x <= 1e-9 * fmax(1.0, fabs(pts[k].x));
            int same_r = m > 0 && pts[k].col == pts[m - 1].col && pts[k].num == pts[m - 1].num;
            if (same_x) {
                ok = same_r; // one sum, two results: not a function of the sum
                continue;
            }
            if (m > 0 && !same_r) gap = fmin(gap, pts[k].x - pts[m - 1].x);
            pts[m++] = pts[k];
        }
        double rounding = gap < INFINITY ? 2 * xmax * 4 * EPS32 : 0;
        if (!ok || (gap < INFINITY && gap / 4 - e - rounding - xmax * 4 * EPS32 <= 0)) continue;
        TfOpPlan *p = arena_alloc(&ir->arena, sizeof *p);
        double *xs = arena_alloc(&ir->arena, (size_t)m * sizeof *xs);
        int *cols = dest_cat ? arena_alloc(&ir->arena, (size_t)m * sizeof *cols) : NULL;
        double *nums = dest_cat ? NULL : arena_alloc(&ir->arena, (size_t)m * sizeof *nums);
        if (!p || !xs || (dest_cat ? !cols : !nums)) break;
        *p = *pj;
        p->form = TF_PLAN_STAIRCASE;
        p->n_in = 2;
        p->in[0] = p1->in[0];
        p->in[1] = p2->in[0];
        p->x_linear = 1;
        memset(p->coef, 0, sizeof p->coef);
        p->coef[0] = 1.0;
        p->coef[1] = b;
        p->c0 = 0;
        p->n_combo = 0;
        p->combo_col = NULL;
        p->combo_num = NULL;
        p->n_x = m;
        p->xs = xs;
        p->x_col = cols;
        p->x_num = nums;
        for (int k = 0; k < m; k++) {
            xs[k] = pts[k].x;
            if (dest_cat) cols[k] = pts[k].col;
            else nums[k] = pts[k].num;
        }
        free(pts);
        return p;
    }
    free(pts);
    return NULL;
}

/* A staircase i over a number x writing categorical r feeds a table j of r
 * and one other categorical register A (frac_prevs: the count and the
 * position): per value of A, a staircase over x (TF_PLAN_SPLIT), when each
 * step keeps its margin with x's and A's errors and the gate's size. */
static TfOpPlan *fuse_split(TfIr *ir, const TfOpPlan *pi, const TfOpPlan *pj, int r) {
    if (pj->n_in != 2 || pi->x_linear || pi->n_in != 1) return NULL;
    int qr = pj->in[0] == r ? 0 : 1, A = pj->in[1 - qr];
    if (pj->in[qr] != r || A == pi->in[0] || ir->regs[A].kind != TF_REG_CATEGORICAL) return NULL;
    const TfRegFacts *ga = &ir->regs[A].facts, *gx = &ir->regs[pi->in[0]].facts;
    int na = ga->n_vals, nx = pi->n_x, n0 = ir->regs[pj->in[0]].facts.n_vals;
    int dest_cat = ir->regs[pj->dest].kind == TF_REG_CATEGORICAL;
    double xmax = 1.0; // what x can hold at the BOS, as compiler/lower_general.c bounds it
    for (int v = 0; v < gx->n_vals; v++) xmax = fmax(xmax, fabs(gx->vals[v].x));
    for (int k = 0; k < nx; k++) xmax = fmax(xmax, fabs(pi->xs[k]));
    TfOpPlan *p = arena_alloc(&ir->arena, sizeof *p);
    int *cols = dest_cat ? arena_alloc(&ir->arena, (size_t)na * (size_t)nx * sizeof *cols) : NULL;
    double *nums = dest_cat ? NULL : arena_alloc(&ir->arena, (size_t)na * (size_t)nx * sizeof *nums);
    if (!p || (dest_cat ? !cols : !nums)) return NULL;
    for (int a = 0; a < na; a++)
        for (int k = 0; k < nx; k++) {
            int cr = pi->x_col[k], c = -1;
            if (cr >= 0) c = qr == 0 ? cr + a * n0 : a + cr * n0;
            size_t at = (size_t)a * (size_t)nx + (size_t)k;
            if (dest_cat) cols[at] = c < 0 ? -1 : pj->combo_col[c];
            else nums[at] = c < 0 ? 0 : pj->combo_num[c];
            if (k == 0) continue;
            int differ = dest_cat ? cols[at] != cols[at - 1] : nums[at] != nums[at - 1];
            if (!differ) continue;
            // The step K (x - m) + G (a's column - 1) must stay within a
            // quarter of its half-unit margin of the exact value.
            double m = (pi->xs[k - 1] + pi->xs[k]) / 2, K = 2.0 / (pi->xs[k] - pi->xs[k - 1]);
            double Gs = K * (xmax + fabs(m)) + 2.0;
            if (K * (gx->err + 4 * EPS32 * (xmax + fabs(m))) + Gs * (ga->err + 4 * EPS32) > 0.25)
                return NULL;
        }
    *p = *pj;
    p->form = TF_PLAN_SPLIT;
    p->n_in = 2;
    p->in[0] = pi->in[0];
    p->in[1] = A;
    p->n_combo = na;
    p->combo_col = NULL;
    p->combo_num = NULL;
    p->n_x = nx;
    p->xs = pi->xs;
    p->x_col = cols;
    p->x_num = nums;
    p->x_linear = 0;
    return p;
}

/* The single-input table that wrote a selection side's register r (before
 * op j), when it can stand in the selection: its input holds nothing at the
 * BOS. -1 otherwise. */
static int side_table(const Fz *F, int j, int r) {
    const TfIr *ir = F->ir;
    if (r < 0) return -1;
    int i = table_writer(F, j, r);
    if (i < 0) return -1;
    const TfOpPlan *p = ir->ops[i].plan;
    if (p->form != TF_PLAN_TABLE || p->n_in != 1 || p->clean || inputs_rewritten(F, i, j)) return -1;
    const TfRegFacts *g = &ir->regs[p->in[0]].facts;
    if (g->bos_dirty || g->bos_value || !g->known) return -1;
    return i;
}

/* A selection reads a Map of one register: the selection reads that
 * register, its truth table through the Map's (a value the Map gives no
 * result for selects nothing, as before). */
static int fuse_selection_sides(const Fz *F, TfIr *ir, TfOpPlan *ps, int j) {
    int n = 0;
    for (int t = 0; t < ps->n_terms; t++) {
        struct TfPlanTerm *T = &ps->terms[t];
        for (int side = 0; side < 2; side++) {
            int r = side == 0 ? T->qreg : T->kreg, i = side_table(F, j, r);
            if (i < 0) continue;
            const TfOpPlan *pm = ir->ops[i].plan;
            int a = pm->in[0], na = ir->regs[a].facts.n_vals;
            int nq = side == 0 ? na : T->nq, nk = side == 0 ? T->nk : na;
            unsigned char *P = arena_alloc(&ir->arena, (size_t)nq * (size_t)nk);
            if (!P) return -1;
            for (int qi = 0; qi < nq; qi++)
                for (int ki = 0; ki < nk; ki++) {
                    int oq = side == 0 ? pm->combo_col[qi] : qi;
                    int ok = side == 0 ? ki : pm->combo_col[ki];
                    P[(size_t)qi * (size_t)nk + (size_t)ki] =
                        oq < 0 || ok < 0 ? 0 : T->P[(size_t)oq * (size_t)T->nk + (size_t)ok];
                }
            T->P = P;
            if (side == 0) T->qreg = a, T->nq = na;
            else T->kreg = a, T->nk = na;
            n++;
        }
    }
    return n;
}

/* Under a causal mask, a term comparing the positions that every visible
 * key satisfies (k.indices <= q.indices) selects every key: the term
 * becomes `true`, and the selection no longer reads the positions. */
static int drop_causal_order(TfIr *ir, TfOpPlan *ps) {
    int n = 0, r = ir->indices_reg;
    if (!ps->causal || r < 0) return 0;
    const TfRegFacts *g = &ir->regs[r].facts;
    for (int t = 0; t < ps->n_terms; t++) {
        struct TfPlanTerm *T = &ps->terms[t];
        if (T->qreg != r || T->kreg != r) continue;
        int all = 1;
        for (int qi = 0; qi < T->nq && all; qi++)
            for (int ki = 0; ki < T->nk && all; ki++)
                if (g->vals[ki].x >= 1 && g->vals[ki].x <= g->vals[qi].x)
                    all = T->P[(size_t)qi * (size_t)T->nk + (size_t)ki];
        if (!all) continue;
        unsigned char *P = arena_alloc(&ir->arena, 1);
        if (!P) return -1;
        P[0] = 1;
        T->qreg = T->kreg = -1;
        T->nq = T->nk = 1;
        T->P = P;
        n++;
    }
    return n;
}

/* Position 0 is the BOS, where every general op writes zeros: a table's
 * combinations with indices = 0 never occur. One whose result no other
 * combination gives writes nothing, so that its value loses its column
 * (compiler/schedule.c; a joint register's (x, 0) values); the others keep
 * their result, which leaves the cubes free to ignore the position. A Map's
 * table is so already (compiler/values.c, va_combo_at_bos, at every level):
 * what is left is the joint registers of selections, whose values are every
 * combination's at -O0. */
static void drop_bos_combos(TfIr *ir) {
    int r = ir->indices_reg;
    if (ir->bos < 0 || r < 0) return;
    for (int j = 0; j < ir->n_ops; j++) {
        TfOpPlan *p = ir->ops[j].plan;
        if (!p || p->form != TF_PLAN_TABLE) continue;
        int at = -1, radix = 1;
        for (int q = 0; q < p->n_in; q++) {
            if (p->in[q] == r) {
                at = q;
                break;
            }
            radix *= ir->regs[p->in[q]].facts.n_vals;
        }
        if (at < 0) continue;
        const TfRegFacts *g = &ir->regs[r].facts;
        int zero = -1;
        for (int v = 0; v < g->n_vals; v++)
            if (g->vals[v].x == 0) zero = v;
        if (zero < 0) continue;
        if (!p->combo_col) continue;
        int n_cols = ir->regs[p->dest].facts.n_vals;
        unsigned char *elsewhere = calloc((size_t)(n_cols > 0 ? n_cols : 1), 1);
        if (!elsewhere) continue; // keeping every result is always right
        for (int c = 0; c < p->n_combo; c++)
            if ((c / radix) % g->n_vals != zero && p->combo_col[c] >= 0)
                elsewhere[p->combo_col[c]] = 1;
        for (int c = 0; c < p->n_combo; c++)
            if ((c / radix) % g->n_vals == zero && p->combo_col[c] >= 0 &&
                !elsewhere[p->combo_col[c]])
                p->combo_col[c] = -1;
        free(elsewhere);
    }
}

/* Op j reads alias[r] wherever it read r (alias[r] < 0: r itself). */
static void rename_reads(TfOpPlan *p, const int *alias) {
    for (int q = 0; q < p->n_in; q++)
        if (alias[p->in[q]] >= 0) p->in[q] = alias[p->in[q]];
    for (int t = 0; t < p->n_terms; t++) {
        if (p->terms[t].qreg >= 0 && alias[p->terms[t].qreg] >= 0)
            p->terms[t].qreg = alias[p->terms[t].qreg];
        if (p->terms[t].kreg >= 0 && alias[p->terms[t].kreg] >= 0)
            p->terms[t].kreg = alias[p->terms[t].kreg];
    }
    if (p->vreg >= 0 && alias[p->vreg] >= 0) p->vreg = alias[p->vreg];
}

static int same_table(const TfIr *ir, const TfOpPlan *a, const TfOpPlan *b) {
    if (a->form != TF_PLAN_TABLE || b->form != TF_PLAN_TABLE || a->n_in != b->n_in ||
        a->n_combo != b->n_combo || !a->combo_col || !b->combo_col || a->check || b->check ||
        a->clean != b->clean) // a clean one-hot stays one (select.c)
        return 0;
    if (memcmp(a->in, b->in, (size_t)a->n_in * sizeof *a->in) != 0 ||
        memcmp(a->combo_col, b->combo_col, (size_t)a->n_combo * sizeof *a->combo_col) != 0)
        return 0;
    const TfRegFacts *ga = &ir->regs[a->dest].facts, *gb = &ir->regs[b->dest].facts;
    if (ga->n_vals != gb->n_vals) return 0;
    for (int v = 0; v < ga->n_vals; v++)
        if (ga->vals[v].x != gb->vals[v].x || ga->vals[v].kind != gb->vals[v].kind) return 0;
    return 1;
}

static uint64_t table_hash(const TfOpPlan *p) {
    uint64_t h = HASH_INIT ^ (uint64_t)p->n_in;
    for (int q = 0; q < p->n_in; q++) h = hash_word(h, (uint64_t)p->in[q]);
    for (int c = 0; c < p->n_combo; c++) h = hash_word(h, (uint64_t)(uint32_t)p->combo_col[c]);
    return h;
}

/* Two tables of the same inputs with the same results (a selection's
 * query and key sides over the same registers): later ops read the first's
 * register; the second is left to compiler/schedule.c as dead. A hash of
 * the tables finds the candidates. */
static int merge_same_tables(const Fz *F) {
    TfIr *ir = F->ir;
    int cap = 16, n = 0;
    while (cap < 2 * ir->n_ops) cap *= 2;
    int *slot = malloc((size_t)cap * sizeof *slot);
    uint64_t *hash = malloc((size_t)cap * sizeof *hash);
    if (!slot || !hash) {
        free(slot), free(hash);
        return 0; // leaving the tables apart is always right
    }
    int *alias = malloc((size_t)(ir->n_regs > 0 ? ir->n_regs : 1) * sizeof *alias);
    if (!alias) {
        free(slot), free(hash);
        return 0;
    }
    for (int r = 0; r < ir->n_regs; r++) alias[r] = -1;
    for (int k = 0; k < cap; k++) slot[k] = -1;
    for (int j = 0; j < ir->n_ops; j++) {
        TfOpPlan *pj = ir->ops[j].plan;
        if (!pj) continue;
        rename_reads(pj, alias); // earlier merges: every alias is of an earlier op's register
        if (pj->form != TF_PLAN_TABLE || !pj->combo_col || pj->check) continue;
        uint64_t h = table_hash(pj);
        size_t k = (size_t)(h & (uint64_t)(cap - 1));
        int merged = 0;
        for (; slot[k] >= 0; k = (k + 1) & (size_t)(cap - 1)) {
            const TfOpPlan *pi = ir->ops[slot[k]].plan;
            if (hash[k] == h && same_table(ir, pi, pj) && pj->dest != ir->output_reg &&
                !inputs_rewritten(F, slot[k], j)) {
                alias[pj->dest] = pi->dest;
                n++;
                merged = 1;
                break;
            }
        }
        if (!merged && slot[k] < 0) {
            slot[k] = j;
            hash[k] = h;
        }
    }
    free(slot), free(hash), free(alias);
    return n;
}

/* Whether an op after j that is a table reads register r. */
static int read_by_table(const Fz *F, int j, int r) {
    for (int k = j + 1; k < F->ir->n_ops; k++) {
        const TfOpPlan *p = F->ir->ops[k].plan;
        if (!p || p->form != TF_PLAN_TABLE) continue;
        for (int q = 0; q < p->n_in; q++)
            if (p->in[q] == r) return 1;
    }
    return 0;
}

/* Whether staircase p over number r (not composed) keeps its steps' margin
 * (compiler/map.c) when r may be off by e. */
static int stair_margin_holds(const TfOpPlan *p, double e) {
    int cat = p->x_col != NULL;
    double gap = INFINITY, xmax = 0;
    for (int i = 0; i < p->n_x; i++) {
        xmax = fmax(xmax, fabs(p->xs[i]));
        if (i && (cat ? p->x_col[i] != p->x_col[i - 1] : p->x_num[i] != p->x_num[i - 1]))
            gap = fmin(gap, p->xs[i] - p->xs[i - 1]);
    }
    return gap == INFINITY || gap / 4 - e - 2 * xmax * 4 * EPS32 - xmax * 4 * EPS32 > 0;
}

/* Whether op k tolerates its input r off by e instead of its bound: a
 * table whose inputs' errors still add up to less than 0.25, a staircase
 * whose steps keep their margin (compiler/map.c); any other reader derived
 * something from r's bound that is not checked again here. */
static int reader_tolerates(const TfIr *ir, const TfOpPlan *pk, int r, double e) {
    int reads = pk->vreg == r, as_in = 0;
    for (int t = 0; t < pk->n_terms; t++) reads |= pk->terms[t].qreg == r || pk->terms[t].kreg == r;
    for (int a = 0; pk->form == TF_PLAN_SEED && a < pk->n_args; a++) reads |= pk->args[a].reg == r;
    double sum = 0;
    for (int q = 0; q < pk->n_in; q++) {
        as_in |= pk->in[q] == r;
        sum += pk->in[q] == r ? e : ir->regs[pk->in[q]].facts.err;
    }
    if (reads) return 0;
    if (!as_in) return 1;
    if (pk->form == TF_PLAN_TABLE) return sum < 0.25;
    if (pk->form == TF_PLAN_STAIRCASE && !pk->x_linear && pk->n_in == 1)
        return stair_margin_holds(pk, e);
    return 0;
}

/* Whether op j may write its register r with plan p, whose error bound
 * (compiler/bounds.c) may be wider than the one the analysis gave r: the
 * ops after j checked their margins against that one, so a wider bound is
 * taken only when every reader still keeps its margin and it stays below
 * 0.25 (a categorical output's one-hot stays clear; a printed number, whose
 * bound goes into the weight file, cannot be read as another integer). r's
 * bound becomes p's. */
static int keeps_bound(const Fz *F, int j, const TfOpPlan *p) {
    TfIr *ir = F->ir;
    int r = p->dest, cat = ir->regs[r].kind == TF_REG_CATEGORICAL;
    double e = bounds_mlp(ir, p), old = ir->regs[r].facts.err;
    if (e < 0 || e <= old) return 1;
    if (e >= 0.25) return 0; // a one-hot no longer clear, a printed integer misread
    for (int k = j + 1; k < ir->n_ops; k++)
        if (ir->ops[k].plan && !reader_tolerates(ir, ir->ops[k].plan, r, e)) return 0;
    ir->regs[r].facts.err = e;
    if (r == ir->output_reg && !cat) ir->output_error_bound = e;
    return 1;
}

/* Every composition, op by op in program order (so that chains compose). */
static int fuse_all(const Fz *F) {
    TfIr *ir = F->ir;
    drop_bos_combos(ir);
    int fused = merge_same_tables(F);
    for (int j = 0; j < ir->n_ops; j++) {
        TfOpPlan *pj = ir->ops[j].plan;
        if (pj && pj->form == TF_PLAN_STAIRCASE && !pj->x_linear) {
            int i = table_writer(F, j, pj->in[0]);
            if (i >= 0 && ir->ops[i].plan->form == TF_PLAN_LINEAR && !inputs_rewritten(F, i, j)) {
                TfOpPlan *p = fuse_linear(ir, ir->ops[i].plan, pj);
                if (!p) return -1;
                if (keeps_bound(F, j, p)) {
                    ir->ops[j].plan = pj = p;
                    fused++;
                }
            }
        }
        if (pj && (pj->form == TF_PLAN_ATTEND || pj->form == TF_PLAN_COUNT)) {
            int a = drop_causal_order(ir, pj), b = a < 0 ? -1 : fuse_selection_sides(F, ir, pj, j);
            if (a < 0 || b < 0) return -1;
            fused += a + b;
            continue;
        }
        if (pj && pj->form == TF_PLAN_TABLE && pj->n_in == 2) {
            int i1 = table_writer(F, j, pj->in[0]), i2 = table_writer(F, j, pj->in[1]);
            if (i1 >= 0 && i2 >= 0 && ir->ops[i1].plan->form == TF_PLAN_STAIRCASE &&
                ir->ops[i2].plan->form == TF_PLAN_STAIRCASE && !inputs_rewritten(F, i1, j) &&
                !inputs_rewritten(F, i2, j)) {
                TfOpPlan *p = fuse_two_staircases(ir, ir->ops[i1].plan, ir->ops[i2].plan, pj);
                if (ir->arena.failed) return -1;
                if (p && plans_mlp_units(ir, p) <= plans_mlp_units(ir, pj) + plans_mlp_units(ir, ir->ops[i1].plan) +
                                                  plans_mlp_units(ir, ir->ops[i2].plan) &&
                    keeps_bound(F, j, p)) {
                    ir->ops[j].plan = pj = p;
                    fused++;
                    continue;
                }
            }
        }
        if (!pj || pj->form != TF_PLAN_TABLE || pj->clean) continue;
        // Compose with the writer of each input in turn, as long as it pays.
        // (a composition into a staircase ends it: pj is no longer a table).
        for (int changed = 1; changed && pj->form == TF_PLAN_TABLE;) {
            changed = 0;
            for (int q = 0; q < pj->n_in && !changed; q++) {
                int r = pj->in[q], i = table_writer(F, j, r);
                if (i < 0 || inputs_rewritten(F, i, j)) continue;
                const TfOpPlan *pi = ir->ops[i].plan;
                TfOpPlan *p = NULL;
                if (pi->form == TF_PLAN_TABLE) p = fuse_tables(ir, pi, pj, r);
                else if (pi->form == TF_PLAN_STAIRCASE && pj->n_in == 1)
                    p = fuse_staircase(ir, pi, pj);
                else if (pi->form == TF_PLAN_STAIRCASE && pj->n_in == 2 &&
                         !read_by_table(F, j, pj->dest)) // a table after j composes with it instead
                    p = fuse_split(ir, pi, pj, r);
                if (ir->arena.failed) return -1;
                if (!p || plans_mlp_units(ir, p) > plans_mlp_units(ir, pi) + plans_mlp_units(ir, pj) ||
                    !keeps_bound(F, j, p))
                    continue;
                ir->ops[j].plan = pj = p;
                fused++;
                changed = 1;
            }
        }
    }
    return fused;
}

int fuse_ops(TfIr *ir) {
    // Who writes each register: general ops write a register once.
    int *w = malloc((size_t)(ir->n_regs > 0 ? ir->n_regs : 1) * sizeof *w);
    if (!w) return -1;
    for (int r = 0; r < ir->n_regs; r++) w[r] = -1;
    for (int j = 0; j < ir->n_ops; j++)
        if (ir->ops[j].plan && ir->ops[j].plan->dest >= 0) w[ir->ops[j].plan->dest] = j;
    Fz F = {ir, w};
    int fused = fuse_all(&F);
    free(w);
    return fused;
}
