/* fuse.c: consecutive table MLPs composed into one (fuse.h). */
#include "fuse.h"

#include <string.h>

#include "values_internal.h"

#define MAX_FUSED_COMBOS (1 << 16)

/* Hidden units of a table or staircase plan, as compiler/plans.c counts them. */
static long plan_units(const TfIr *ir, const TfGenOp *p) {
    int dest_cat = ir->regs[p->dest].kind == TF_REG_CATEGORICAL;
    long n = 0;
    if (p->form == TF_GEN_TABLE) {
        for (int c = 0; c < p->n_combo; c++)
            n += dest_cat ? p->combo_col[c] >= 0 : p->combo_num[c] != 0;
        return 2 * (n > 0 ? n : 1);
    }
    for (int i = 0; i + 1 < p->n_x; i++)
        n += dest_cat ? p->x_col[i] != p->x_col[i + 1] : p->x_num[i] != p->x_num[i + 1];
    return 1 + 2 * n;
}

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
        radix *= ir->gen_regs[regs[q]].n_vals;
    }
    return c;
}

/* i (a table over categorical inputs, writing categorical r) feeds table j:
 * one table over i's inputs and j's others. NULL when it cannot be built or
 * is larger than the two. */
static TfGenOp *fuse_tables(Gen *G, const TfGenOp *pi, const TfGenOp *pj, int r) {
    const TfIr *ir = G->ir;
    int z[TF_GEN_MAX_INPUTS], nz = 0;
    for (int q = 0; q < pi->n_in; q++) z[nz++] = pi->in[q];
    for (int q = 0; q < pj->n_in; q++) {
        if (pj->in[q] == r) continue;
        int seen = 0;
        for (int k = 0; k < nz; k++) seen |= z[k] == pj->in[q];
        if (seen) continue;
        if (nz == TF_GEN_MAX_INPUTS) return NULL;
        z[nz++] = pj->in[q];
    }
    long total = 1;
    double err = 0;
    for (int k = 0; k < nz; k++) {
        total *= ir->gen_regs[z[k]].n_vals;
        err += ir->gen_regs[z[k]].err;
        if (total > MAX_FUSED_COMBOS) return NULL;
    }
    if (err >= 0.25) return NULL; // the steps' margin (compiler/map.c)
    int dest_cat = ir->regs[pj->dest].kind == TF_REG_CATEGORICAL;
    TfGenOp *p = va_alloc(G, sizeof *p);
    if (!p) return NULL;
    *p = *pj;
    p->n_in = nz;
    memcpy(p->in, z, sizeof z);
    p->n_combo = (int)total;
    p->combo_col = dest_cat ? va_alloc(G, (size_t)total * sizeof *p->combo_col) : NULL;
    p->combo_num = dest_cat ? NULL : va_alloc(G, (size_t)total * sizeof *p->combo_num);
    if (dest_cat ? !p->combo_col : !p->combo_num) return NULL;
    int idx[TF_GEN_MAX_INPUTS] = {0};
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
        for (int k = 0; k < nz && ++idx[k] == ir->gen_regs[z[k]].n_vals; k++) idx[k] = 0;
    }
    return p;
}

/* i (a staircase over a number, writing categorical r) feeds a table j of
 * r alone: a staircase over that number. */
static TfGenOp *fuse_staircase(Gen *G, const TfGenOp *pi, const TfGenOp *pj) {
    const TfIr *ir = G->ir;
    int dest_cat = ir->regs[pj->dest].kind == TF_REG_CATEGORICAL;
    TfGenOp *p = va_alloc(G, sizeof *p);
    if (!p) return NULL;
    *p = *pj;
    p->form = TF_GEN_STAIRCASE;
    p->n_in = pi->n_in; // one number, or a LINEAR Map's inputs (x_linear)
    memcpy(p->in, pi->in, sizeof p->in);
    p->x_linear = pi->x_linear;
    memcpy(p->coef, pi->coef, sizeof p->coef);
    p->c0 = pi->c0;
    p->n_combo = 0;
    p->combo_col = NULL;
    p->combo_num = NULL;
    p->n_x = pi->n_x;
    p->xs = pi->xs;
    p->x_col = dest_cat ? va_alloc(G, (size_t)pi->n_x * sizeof *p->x_col) : NULL;
    p->x_num = dest_cat ? NULL : va_alloc(G, (size_t)pi->n_x * sizeof *p->x_num);
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
static TfGenOp *fuse_linear(Gen *G, const TfGenOp *pi, const TfGenOp *pj) {
    TfGenOp *p = va_alloc(G, sizeof *p);
    if (!p) return NULL;
    *p = *pj;
    p->n_in = pi->n_in;
    memcpy(p->in, pi->in, sizeof p->in);
    memcpy(p->coef, pi->coef, sizeof p->coef);
    p->c0 = pi->c0;
    p->x_linear = 1;
    return p;
}

/* The op before j that wrote r, when r is written once, by a table or a
 * staircase into a categorical register, or by a LINEAR Map into a number,
 * without a run-time check. */
static int table_writer(const TfIr *ir, int j, int r) {
    int w = -1;
    for (int i = 0; i < j; i++)
        if (ir->ops[i].gen && ir->ops[i].gen->dest == r) {
            if (w >= 0) return -1;
            w = i;
        }
    if (w < 0) return -1;
    const TfGenOp *p = ir->ops[w].gen;
    if (p->check) return -1;
    if (ir->regs[r].kind != TF_REG_CATEGORICAL) return p->form == TF_GEN_LINEAR ? w : -1;
    if (p->form == TF_GEN_TABLE || p->form == TF_GEN_STAIRCASE) return w;
    return -1;
}

/* Whether any op between i and j (exclusive) writes one of i's inputs. */
static int inputs_rewritten(const TfIr *ir, int i, int j) {
    const TfGenOp *pi = ir->ops[i].gen;
    for (int k = i + 1; k < j; k++)
        for (int q = 0; q < pi->n_in; q++)
            if (ir->ops[k].gen && ir->ops[k].gen->dest == pi->in[q]) return 1;
    return 0;
}

int fuse_ops(TfIr *ir) {
    Gen G = {0};
    G.ir = ir;
    G.st = ir->gen_store;
    int fused = 0;
    for (int j = 0; j < ir->n_ops; j++) {
        TfGenOp *pj = ir->ops[j].gen;
        if (pj && pj->form == TF_GEN_STAIRCASE && !pj->x_linear) {
            int i = table_writer(ir, j, pj->in[0]);
            if (i >= 0 && ir->ops[i].gen->form == TF_GEN_LINEAR && !inputs_rewritten(ir, i, j)) {
                TfGenOp *p = fuse_linear(&G, ir->ops[i].gen, pj);
                if (!p) return -1;
                ir->ops[j].gen = pj = p;
                fused++;
            }
        }
        if (!pj || pj->form != TF_GEN_TABLE) continue;
        // Compose with the writer of each input in turn, as long as it pays.
        for (int changed = 1; changed;) {
            changed = 0;
            for (int q = 0; q < pj->n_in && !changed; q++) {
                int r = pj->in[q], i = table_writer(ir, j, r);
                if (i < 0 || inputs_rewritten(ir, i, j)) continue;
                const TfGenOp *pi = ir->ops[i].gen;
                TfGenOp *p = NULL;
                if (pi->form == TF_GEN_TABLE) p = fuse_tables(&G, pi, pj, r);
                else if (pi->form == TF_GEN_STAIRCASE && pj->n_in == 1)
                    p = fuse_staircase(&G, pi, pj);
                if (G.failed) return -1;
                if (!p || plan_units(ir, p) > plan_units(ir, pi) + plan_units(ir, pj)) continue;
                ir->ops[j].gen = pj = p;
                fused++;
                changed = p->form == TF_GEN_TABLE;
            }
            if (pj->form != TF_GEN_TABLE) break;
        }
    }
    return fused;
}
