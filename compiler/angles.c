/* angles.c: equality selections compared on angles (angles.h). */
#include "angles.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "values_internal.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define ANGLE_MIN_KEYS 4 /* cos(2 pi / nk) >= 0: a query that picks none scores <= 0 */

#define EMBEDDING (-2) /* point_writer: `indices`, the position embedding writes it */

/* Who writes categorical r and can write its points too: the op before
 * `before` (a table or a staircase without a run-time check), EMBEDDING
 * for `indices`, -1 none. */
static int point_writer(const TfIr *ir, int r, int before) {
    if (r < 0 || r == TF_IR_REG_TOKENS || ir->regs[r].kind != TF_REG_CATEGORICAL ||
        ir->regs[r].n_feat + 2 > TF_REG_MAX_FEATS)
        return -1;
    if (r == ir->indices_reg) return EMBEDDING;
    for (int i = 0; i < before; i++) {
        const TfOpPlan *p = ir->ops[i].plan;
        if (!p || p->dest != r) continue;
        if ((p->form != TF_PLAN_TABLE && p->form != TF_PLAN_STAIRCASE) || p->check) return -1;
        return i;
    }
    return -1;
}

/* tq[qi]: the one key value query value qi picks, -1 none; 0 when some
 * query value picks two. ka[ki]: the point of key value ki, its rank among
 * the key values some query value picks, -1 for the others (which then
 * score 0 or less at every query, as the BOS). Returns the number of
 * points (key values picked). */
static int picks_one(const TfIr *ir, const struct TfPlanTerm *T, int *tq, int *ka) {
    for (int ki = 0; ki < T->nk; ki++) ka[ki] = -1;
    for (int qi = 0; qi < T->nq; qi++) {
        tq[qi] = -1;
        for (int ki = 0; ki < T->nk; ki++) {
            if (!T->P[(size_t)qi * (size_t)T->nk + (size_t)ki]) continue;
            if (T->kreg == ir->indices_reg && ir->regs[T->kreg].facts.vals[ki].x == 0)
                continue; // the BOS's position: the BOS scores apart
            if (tq[qi] >= 0) return 0;
            tq[qi] = ki;
            ka[ki] = 0;
        }
    }
    int n = 0;
    for (int ki = 0; ki < T->nk; ki++)
        if (ka[ki] == 0) ka[ki] = 1 + n++;
    for (int ki = 0; ki < T->nk; ki++) ka[ki]--;
    return n;
}

/* Register r's points, per column: cos (k = 0) or sin of 2 pi a / n, with
 * a = ka[tq[i]] for its value i (the query side), ka[i] (the key side,
 * tq NULL); (0, 0) where there is none. */
static double *points(TfIr *ir, int r, const int *tq, const int *ka, int n, int k) {
    const TfRegFacts *g = &ir->regs[r].facts;
    double *val = arena_alloc(&ir->arena, (size_t)(ir->regs[r].size > 0 ? ir->regs[r].size : 1) * sizeof *val);
    if (!val) return NULL;
    for (int c = 0; c < ir->regs[r].size; c++) val[c] = 0;
    for (int i = 0; i < g->n_vals; i++) {
        int c = values_column(ir, r, g->vals[i]), t = tq ? tq[i] : i;
        int a = t < 0 ? -1 : ka[t];
        if (c < 0 || a < 0) continue;
        val[c] = k ? sin(2 * M_PI * a / n) : cos(2 * M_PI * a / n);
    }
    return val;
}

/* The larger bound of writer w's two points (bounds.h); -1 out of memory. */
static double points_err(const TfIr *ir, const TfOpPlan *w, double *const val[2]) {
    double e0 = bounds_mlp_values(ir, w, val[0]), e1 = bounds_mlp_values(ir, w, val[1]);
    return e0 < 0 || e1 < 0 ? -1 : fmax(e0, e1);
}

/* Whether op k's result is read, by the output or a later op whose result
 * is (one pass from the end: general ops write each register once, in
 * order; a seed op counts as read). */
static int *live_ops(const TfIr *ir) {
    int *live = calloc((size_t)(ir->n_ops > 0 ? ir->n_ops : 1), sizeof *live);
    unsigned char *reg = calloc((size_t)(ir->n_regs > 0 ? ir->n_regs : 1), 1);
    if (!live || !reg) {
        free(live), free(reg);
        return NULL;
    }
    if (ir->output_reg >= 0) reg[ir->output_reg] = 1;
    for (int k = ir->n_ops - 1; k >= 0; k--) {
        const TfOpPlan *p = ir->ops[k].plan;
        if (!p) continue;
        live[k] = p->form == TF_PLAN_SEED || p->dest < 0 || reg[p->dest] || p->check;
        if (!live[k]) continue;
        if (p->vreg >= 0) reg[p->vreg] = 1;
        for (int q = 0; q < p->n_in; q++) reg[p->in[q]] = 1;
        for (int u = 0; u < p->n_terms; u++) {
            if (p->terms[u].qreg >= 0) reg[p->terms[u].qreg] = 1;
            if (p->terms[u].kreg >= 0) reg[p->terms[u].kreg] = 1;
        }
        for (int a = 0; p->form == TF_PLAN_SEED && a < p->n_args; a++)
            if (p->args[a].reg >= 0) reg[p->args[a].reg] = 1;
    }
    free(reg);
    return live;
}

/* Whether term u of op k may go on angles, as far as its form says: an
 * Aggregate's part over two registers whose writers can write points, more
 * than 3 query values, each picking at most one of at least
 * ANGLE_MIN_KEYS key values. */
static int angle_form(const TfIr *ir, int k, int u) {
    const TfOpPlan *p = ir->ops[k].plan;
    if (!p || p->form != TF_PLAN_ATTEND || p->sum || u >= p->n_terms) return 0;
    const struct TfPlanTerm *T = &p->terms[u];
    if (T->angle) return 1;
    if (T->qreg < 0 || T->kreg < 0 || T->nq <= 3 || point_writer(ir, T->qreg, k) == -1 ||
        point_writer(ir, T->kreg, k) == -1)
        return 0;
    int *tq = malloc((size_t)T->nq * sizeof *tq), *ka = malloc((size_t)T->nk * sizeof *ka);
    int n = tq && ka ? picks_one(ir, T, tq, ka) : 0;
    free(tq), free(ka);
    return n >= ANGLE_MIN_KEYS;
}

/* Whether register r is read by nothing that is read (live) but term t of
 * op j and parts on angles (strict), or that may go on angles too
 * (angle_form), and is not the output: its one-hot then loses its
 * columns. The ops gone[] marks (a chain's links, whose one-hots die with
 * it) do not count. */
static int read_by_term_only(const TfIr *ir, int r, int j, int t, int strict,
                             const unsigned char *gone) {
    if (r == ir->output_reg) return 0;
    int *live = live_ops(ir);
    if (!live) return 0;
    for (int k = 0; k < ir->n_ops; k++) {
        const TfOpPlan *p = ir->ops[k].plan;
        if (!p || !live[k] || (k != j && p->dest == r) || (gone && gone[k])) continue;
        int reads = p->vreg == r;
        for (int q = 0; q < p->n_in; q++) reads |= p->in[q] == r;
        for (int u = 0; u < p->n_terms; u++) // a term on angles reads its points
            reads |= (k != j || u != t) && (p->terms[u].qreg == r || p->terms[u].kreg == r) &&
                     !(strict ? p->terms[u].angle : angle_form(ir, k, u));
        for (int a = 0; p->form == TF_PLAN_SEED && a < p->n_args; a++) reads |= p->args[a].reg == r;
        if (reads) {
            free(live);
            return 0;
        }
    }
    free(live);
    return 1;
}

/* The bound of the points op i's plan writes; *down set when its staircase
 * turned to steps from the top (x_down) has a smaller one, and its one-hot
 * stays within the bound its readers were checked with (or nothing but
 * this term and parts on angles reads it; *onehot_err: its new bound). -1
 * out of memory. */
static double points_err_best(const TfIr *ir, int i, double *const val[2], int j, int t,
                              const unsigned char *gone, int *down, double *onehot_err) {
    *down = 0;
    if (i == EMBEDDING) { // cos and sin rounded to float32, exact otherwise
        *onehot_err = 0;
        return EPS32;
    }
    const TfOpPlan *w = ir->ops[i].plan;
    double e = points_err(ir, w, val);
    *onehot_err = ir->regs[w->dest].facts.err;
    if (e < 0 || w->form != TF_PLAN_STAIRCASE || w->x_linear || w->x_down ||
        ir->regs[w->dest].n_feat > 0) // points bounded with the steps as they are
        return e;
    TfOpPlan d = *w;
    d.x_down = 1;
    double ed = points_err(ir, &d, val), eh = bounds_mlp(ir, &d);
    if (ed < 0) return -1;
    if (ed < e && eh >= 0 &&
        (eh <= *onehot_err || (eh < 0.25 && read_by_term_only(ir, w->dest, j, t, 1, gone)))) {
        *down = 1;
        *onehot_err = fmax(eh, *onehot_err);
        return ed;
    }
    return e;
}

/* A hidden scalar register after every other column, which the writer
 * of `owner` writes. */
static int add_point(TfIr *ir, int owner, int wi, const char *name, double *val, double err) {
    char *copy = arena_strdup(&ir->arena, name);
    TfLoc none = {0, 0, 0, 0};
    int r = copy ? check_add_reg(ir, copy, TF_REG_SCALAR, none) : -1;
    if (r < 0) return -1;
    TfIrReg *R = &ir->regs[r];
    R->size = 1;
    R->offset = ir->d_model++;
    R->facts.err = err;
    R->facts.writer = wi; // EMBEDDING for `indices`
    ir->regs[owner].feat[ir->regs[owner].n_feat++] = (TfRegFeat){r, val, -1, 0};
    return r;
}

/* The registers of owner's points equal to val[0] (cos) and val[1] (sin),
 * written already for another part: pts[0..1]; 0 when there are none. */
static int same_points(const TfIr *ir, int owner, double *const val[2], int pts[2]) {
    const TfIrReg *R = &ir->regs[owner];
    size_t size = (size_t)(R->size > 0 ? R->size : 1) * sizeof(double);
    pts[0] = pts[1] = -1;
    for (int f = 0; f < R->n_feat; f++)
        for (int k = 0; k < 2; k++)
            if (pts[k] < 0 && memcmp(R->feat[f].val, val[k], size) == 0) pts[k] = R->feat[f].reg;
    return pts[0] >= 0 && pts[1] >= 0;
}

/* Op i's plan its own (a merged table's may serve several ops). */
static int own_plan(TfIr *ir, int i) {
    TfOpPlan *p = arena_alloc(&ir->arena, sizeof *p);
    if (!p) return -1;
    *p = *ir->ops[i].plan;
    ir->ops[i].plan = p;
    return 0;
}

/* Largest score error (before beta) a selection may have on angles: its
 * inverse temperature grows to keep beta (1/2 - 2 delta), and with it what
 * the softmax leaks, as the analysis had it (compiler/select.c). */
#define ANGLE_MAX_DELTA 0.15

/* Whether some key's softmax weight e^(beta (score - top)) would fall
 * where float32's exp is subnormal (below e^-87.3; 0 below e^-104), which
 * x86 multiplies many times slower, where the one-hot rows' integer scores
 * do not put it. The angle term scores s (cos(d c) - cos c) for a key d
 * points away (0 for the nearest, as a one-hot row's miss), -s cos c where
 * a side has no point, and every other term of the selection adds 0 or 1.
 * Few points (a small s) put the next neighbours there; many put them far
 * below e^-104, an exact 0. A margin of one for the scores' error. */
static int subnormal_weights(const TfOpPlan *p, double beta, int n, double s, double c) {
    for (int d = 2; d <= n; d++) { // d = n: no point; d = n - 1 is d = 1's twin
        if (d == n - 1) continue;
        double x = d == n ? -s * c : s * (cos(d * 2 * M_PI / n) - c);
        for (int miss = 0; miss < p->n_terms; miss++) { // other terms that fail
            double e = beta * (x - 1 - miss);
            if (e < -86.3 && e > -105.0) return 1;
        }
    }
    return 0;
}

/* ---- a query side read through a chain ---------------------------------- */

/* A query register whose writer cannot write points may still be read
 * through its writer (add10's `want = m + 1`, `m` a copy of `nstop`): a
 * one-input table (its points are a function of its input's values) or an
 * Aggregate's copy (whose head copies the value register's points with
 * it, the default's point at the BOS), each read by nothing but the next
 * link, down to a register whose writer writes points. The links' one-hots
 * are then read by nothing (the table's layer and the copy's one-hot
 * channels go: compiler/schedule.c). Tables first, then copies: a copy
 * reads points its value register holds. */
#define CHAIN_MAX 4
enum { LINK_NONE, LINK_TABLE, LINK_COPY };

static int link_kind(const TfIr *ir, int w) {
    const TfOpPlan *p = ir->ops[w].plan;
    if (!p || p->check || p->dest < 0 || ir->regs[p->dest].kind != TF_REG_CATEGORICAL)
        return LINK_NONE;
    if (p->form == TF_PLAN_TABLE && p->n_in == 1 && !p->clean &&
        ir->regs[p->in[0]].kind == TF_REG_CATEGORICAL &&
        p->n_combo == ir->regs[p->in[0]].facts.n_vals)
        return LINK_TABLE;
    if (p->form == TF_PLAN_ATTEND && !p->sum && !p->value_numeric && p->vreg >= 0 &&
        ir->regs[p->vreg].kind == TF_REG_CATEGORICAL && ir->regs[p->dest].n_feat + 2 <= TF_REG_MAX_FEATS)
        return LINK_COPY;
    return LINK_NONE;
}

/* Whether plan p reads r anywhere but in its term `skip` (-1: none). */
static int plan_reads(const TfOpPlan *p, int r, int skip) {
    int reads = p->vreg == r;
    for (int q = 0; q < p->n_in; q++) reads |= p->in[q] == r;
    for (int u = 0; u < p->n_terms; u++)
        reads |= u != skip && (p->terms[u].qreg == r || p->terms[u].kreg == r);
    for (int a = 0; p->form == TF_PLAN_SEED && a < p->n_args; a++) reads |= p->args[a].reg == r;
    return reads;
}

/* Whether r (not the output) is read by no live op but j: its term t
 * alone when t >= 0, anything of it when t < 0. */
static int read_only_by(const TfIr *ir, const int *live, int r, int j, int t) {
    if (r == ir->output_reg) return 0;
    for (int k = 0; k < ir->n_ops; k++) {
        const TfOpPlan *p = ir->ops[k].plan;
        if (!p || !live[k] || (k == j && t < 0)) continue;
        if (plan_reads(p, r, k == j ? t : -1)) return 0;
    }
    return 1;
}

/* The links term t of op j reads its query side through (links[0] writes
 * the query register), *base the register whose writer writes the points.
 * Returns how many, 0 for none, -1 out of memory. */
static int chain_links(const TfIr *ir, int j, int t, int *links, int *base) {
    int *live = live_ops(ir);
    if (!live) return -1;
    int r = ir->ops[j].plan->terms[t].qreg, n = 0, reader = j, term = t, copies = 0;
    while (n < CHAIN_MAX) {
        int w = -1;
        for (int i = 0; i < j && w < 0; i++)
            if (ir->ops[i].plan && ir->ops[i].plan->dest == r) w = i;
        int kind = w >= 0 ? link_kind(ir, w) : LINK_NONE;
        if (!kind || (kind == LINK_TABLE && copies) || !read_only_by(ir, live, r, reader, term)) break;
        links[n++] = w;
        copies |= kind == LINK_COPY;
        reader = w, term = -1;
        r = kind == LINK_TABLE ? ir->ops[w].plan->in[0] : ir->ops[w].plan->vreg;
    }
    free(live);
    // Back to the last register whose writer writes points. Not through
    // to `indices`: its Maps are held by the position embedding, which
    // writes their points as cheaply (fold_table), and they stay as before.
    while (n > 0 && (point_writer(ir, r, j) == -1 || r == ir->indices_reg))
        r = ir->ops[links[--n]].plan->dest;
    *base = r;
    return n;
}

/* val over r's columns (r written by link w) as a function of w's input's
 * (a table's) or value register's (a copy's) values, over its columns. */
static double *pull_back(TfIr *ir, int w, int r, const double *val) {
    const TfOpPlan *p = ir->ops[w].plan;
    int s = p->form == TF_PLAN_TABLE ? p->in[0] : p->vreg;
    const TfRegFacts *g = &ir->regs[s].facts;
    int size = ir->regs[s].size;
    double *out = arena_alloc(&ir->arena, (size_t)(size > 0 ? size : 1) * sizeof *out);
    if (!out) return NULL;
    for (int c = 0; c < size; c++) out[c] = 0;
    for (int i = 0; i < g->n_vals; i++) {
        int c = values_column(ir, s, g->vals[i]);
        int cr = p->form == TF_PLAN_TABLE ? p->combo_col[i] : values_column(ir, r, g->vals[i]);
        if (c >= 0 && cr >= 0) out[c] = val[cr];
    }
    return out;
}

/* How much more a point copied by link w's head (a copy: its head's leak
 * and its softmax's rounding) may be off than its value register's: twice
 * what they move a one-hot column, the number being within [-1, 1]. 0 for
 * a table link, whose points the next link writes. */
static double copy_err(const TfIr *ir, int w) {
    const TfOpPlan *p = ir->ops[w].plan;
    if (p->form != TF_PLAN_ATTEND) return 0;
    return 2 * fmax(0, ir->regs[p->dest].facts.err - ir->regs[p->vreg].facts.err) + 4 * EPS32;
}

/* The hidden registers of point k (0 cos, 1 sin) of a query side read
 * through links[0..nl) (chain_links): the base's, written by its writer
 * wq (shared with another part's where equal), then each copy's, copied
 * by its head; regs[k] the last. lv[i][k]: the points over the register
 * links[i] writes (lv[nl]: the base's). *err: the last one's bound. */
static int chain_points(TfIr *ir, const TfOpPlan *p, const char *tn, int base, int wq,
                        double fbase, const int *links, int nl, double *(*lv)[2], int regs[2],
                        double *err) {
    const char *side[2] = {"qcos", "qsin"};
    char name[200];
    int copies = 0; // the last link's points are the ones the head reads
    for (int i = 0; i < nl; i++) copies |= ir->ops[links[i]].plan->form == TF_PLAN_ATTEND;
    int have = same_points(ir, base, lv[nl], regs);
    for (int k = 0; k < 2 && !have; k++) {
        snprintf(name, sizeof name, "%s%s.%s%s%s", p->name, tn, side[k], copies ? "." : "",
                 copies ? ir->regs[base].name : "");
        if (check_find_reg(ir, name) >= 0) return 0;
        regs[k] = add_point(ir, base, wq, name, lv[nl][k], fbase);
        if (regs[k] < 0) return -1;
    }
    double e = fbase, from_bos[2] = {0, 0};
    for (int i = nl - 1; i >= 0; i--) {
        const TfOpPlan *w = ir->ops[links[i]].plan;
        if (w->form != TF_PLAN_ATTEND) continue;
        int r = w->dest;
        e += copy_err(ir, links[i]);
        for (int k = 0; k < 2; k++) {
            int top = i == 0 || ir->ops[links[i - 1]].plan->form == TF_PLAN_TABLE;
            snprintf(name, sizeof name, "%s%s.%s%s%s", p->name, tn, side[k], top ? "" : ".",
                     top ? "" : ir->regs[r].name);
            if (check_find_reg(ir, name) >= 0) return 0;
            int pr = add_point(ir, r, links[i], name, lv[i][k], e);
            if (pr < 0) return -1;
            TfRegFeat *F = &ir->regs[r].feat[ir->regs[r].n_feat - 1];
            F->from = regs[k];
            F->at_bos = w->default_col >= 0 ? lv[i][k][w->default_col] : 0;
            F->at_bos -= from_bos[k]; // what the value register holds at the BOS
            from_bos[k] += F->at_bos;
            regs[k] = pr;
        }
    }
    *err = e;
    return 1;
}

/* Term t of op j on angles, its query side read through links[0..nl)
 * (gone[] marks them) from qbase: 1 done, 0 not, -1 out of memory. */
static int angle_term_from(TfIr *ir, int j, int t, const int *links, int nl, int qbase,
                           const unsigned char *gone) {
    TfOpPlan *p = ir->ops[j].plan;
    struct TfPlanTerm *T = &p->terms[t];
    // Only where a side's one-hot is then read by nothing: the columns go,
    // where the four points would only add to them (and to the head's
    // rows, but for the query values' rows they replace).
    if (nl == 0 && !read_by_term_only(ir, T->qreg, j, t, 0, NULL) &&
        !read_by_term_only(ir, T->kreg, j, t, 0, NULL))
        return 0;
    int wq = point_writer(ir, qbase, j), wk = point_writer(ir, T->kreg, j);
    if (wq == -1 || wk == -1 ||
        (qbase == T->kreg && ir->regs[qbase].n_feat + 4 > TF_REG_MAX_FEATS))
        return 0;
    int *tq = malloc((size_t)T->nq * sizeof *tq), *ka = malloc((size_t)T->nk * sizeof *ka);
    int n = tq && ka ? picks_one(ir, T, tq, ka) : -1;
    double *lv[CHAIN_MAX + 1][2] = {{NULL, NULL}}, *kv[2] = {NULL, NULL};
    for (int k = 0; n >= ANGLE_MIN_KEYS && k < 2; k++) {
        lv[0][k] = points(ir, T->qreg, tq, ka, n, k);
        kv[k] = points(ir, T->kreg, NULL, ka, n, k);
        for (int i = 0; i < nl && lv[i][k]; i++)
            lv[i + 1][k] = pull_back(ir, links[i], ir->ops[links[i]].plan->dest, lv[i][k]);
        if (!lv[nl][k] || !kv[k]) n = -1;
    }
    free(tq), free(ka);
    if (n < ANGLE_MIN_KEYS) return n < 0 ? -1 : 0;
    int dq, dk;
    double hq, hk;
    double fq = points_err_best(ir, wq, lv[nl], j, t, gone, &dq, &hq);
    double fk = points_err_best(ir, wk, kv, j, t, gone, &dk, &hk);
    if (fq < 0 || fk < 0) return -1;
    double fbase = fq;
    for (int i = 0; i < nl; i++) fq += copy_err(ir, links[i]); // chain_points' bound
    // The scores' error before beta: the one-hot term's (compiler/select.c,
    // select_terms) against the points' (two products of numbers within 1
    // of 0 and their errors, times s; the float32 rounding of the head's
    // few sums of terms below 2 s).
    double c = cos(2 * M_PI / n), s = 1 / (1 - c);
    double one_hot = T->nq * ir->regs[T->qreg].facts.err + T->nk * ir->regs[T->kreg].facts.err +
                     2 * EPS32;
    double delta = p->delta - one_hot + s * (2 * (fq + fk + fq * fk) + 16 * EPS32);
    if (delta > ANGLE_MAX_DELTA) return 0;
    double beta = delta > p->delta ? p->beta * (0.5 - 2 * p->delta) / (0.5 - 2 * delta) : p->beta;
    if (subnormal_weights(p, beta, n, s, c)) return 0;
    if ((dq && own_plan(ir, wq) < 0) || (dk && wk != wq && own_plan(ir, wk) < 0)) return -1;
    if (dq) ir->ops[wq].plan->x_down = 1, ir->regs[qbase].facts.err = hq;
    if (dk) ir->ops[wk].plan->x_down = 1, ir->regs[T->kreg].facts.err = hk;
    char name[160], tn[16] = "";
    if (t > 0) snprintf(tn, sizeof tn, ".t%d", t);
    int regs[4];
    int rc = chain_points(ir, p, tn, qbase, wq, fbase, links, nl, lv, regs, &fq);
    if (rc <= 0) return rc;
    // Another part's points of the same values are read again (`word` and
    // `seen` copy from the same position).
    int have_k = same_points(ir, T->kreg, kv, regs + 2);
    const char *side[2] = {"kcos", "ksin"};
    for (int k = 0; k < 2 && !have_k; k++) {
        snprintf(name, sizeof name, "%s%s.%s", p->name, tn, side[k]);
        if (check_find_reg(ir, name) >= 0) return 0; // a name taken (cannot happen twice)
        regs[2 + k] = add_point(ir, T->kreg, wk, name, kv[k], fk);
        if (regs[2 + k] < 0) return -1;
    }
    T->angle = 1;
    T->qa[0] = regs[0], T->qa[1] = regs[1], T->ka[0] = regs[2], T->ka[1] = regs[3];
    T->a_scale = s;
    T->a_cos = c;
    p->beta = beta;
    p->delta = delta;
    return 1;
}

/* Term t of op j on angles, where its writers can write the points: 1
 * done, 0 not, -1 out of memory. */
static int angle_term(TfIr *ir, int j, int t) {
    if (ir->ops[j].plan->terms[t].nq <= 3) return 0;
    int links[CHAIN_MAX], qbase, nl = chain_links(ir, j, t, links, &qbase);
    unsigned char *gone = nl < 0 ? NULL : calloc((size_t)ir->n_ops, 1);
    if (!gone) return -1;
    for (int i = 0; i < nl; i++) gone[links[i]] = 1; // their one-hots die
    int rc = angle_term_from(ir, j, t, links, nl, qbase, gone);
    free(gone);
    return rc;
}

int angles_plan(TfIr *ir) {
    int n = 0;
    for (int j = 0; j < ir->n_ops; j++) {
        TfOpPlan *p = ir->ops[j].plan;
        if (!p || p->form != TF_PLAN_ATTEND || p->sum) continue;
        if (own_plan(ir, j) < 0) return -1; // its terms change
        p = ir->ops[j].plan;
        for (int t = 0; t < p->n_terms; t++) {
            if (p->terms[t].qreg < 0 || p->terms[t].kreg < 0) continue;
            int r = angle_term(ir, j, t);
            if (r < 0) return -1;
            n += r;
        }
    }
    return n;
}
