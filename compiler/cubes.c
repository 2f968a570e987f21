/* cubes.c: a table's combinations grouped into cubes of one result (cubes.h).
 *
 * For a set S of fixed inputs, an assignment a of values to S names a box:
 * the combinations that agree with a. The box is a leaf of every tree that
 * reaches it when the result is the same over it (and its free inputs may be
 * free). N(S) counts the assignments to S whose box is such a leaf with a
 * result. A tree that fixes the inputs in the order s_1, s_2, ... reaches
 * S_j = {s_1..s_j} at every assignment whose parent box (on S_{j-1}) is not
 * a leaf; the leaves with a result among them are N(S_j) less the children
 * of leaves above, N(S_{j-1}) times the size of s_j (a leaf's children are
 * leaves with its result). So a tree's count is a sum along its path of
 * sets from {} to all inputs, and the best order is a shortest path over the
 * 2^n sets (n <= TF_GEN_MAX_INPUTS), each N(S) one pass over the table.
 */
#include "cubes.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY (-1) /* every combination of the box is without a result */
#define MIXED (-2) /* not a leaf: results differ, or a free input may hold no value */
#define UNSET (-3)

typedef struct Table {
    const int *size;
    int n;
    long n_combo;
    const int *result;
    unsigned may_free;
} Table;

/* The boxes of the inputs in S: box[t] for the assignment t (mixed radix over
 * S's inputs, first fastest) is its one result, EMPTY or MIXED. Returns how
 * many are leaves with a result. */
static long boxes(const Table *T, unsigned S, int *box) {
    long stride[TF_GEN_MAX_INPUTS], m = 1;
    for (int i = 0; i < T->n; i++) {
        stride[i] = S >> i & 1 ? m : 0;
        if (S >> i & 1) m *= T->size[i];
    }
    for (long t = 0; t < m; t++) box[t] = UNSET;
    int idx[TF_GEN_MAX_INPUTS] = {0};
    long t = 0;
    for (long c = 0; c < T->n_combo; c++) {
        int r = T->result[c];
        if (box[t] == UNSET) box[t] = r;
        else if (box[t] != r) box[t] = MIXED;
        for (int i = 0; i < T->n; i++) { // the next combination, first input fastest
            if (++idx[i] < T->size[i]) {
                t += stride[i];
                break;
            }
            t -= stride[i] * (T->size[i] - 1);
            idx[i] = 0;
        }
    }
    unsigned all = (1u << T->n) - 1;
    int may_leaf = (all & ~S & ~T->may_free) == 0;
    long n = 0;
    for (t = 0; t < m; t++) {
        if (box[t] >= 0 && !may_leaf) box[t] = MIXED;
        n += box[t] >= 0;
    }
    return n;
}

typedef struct Cost {
    long leaves, reads; /* leaves with a result; columns they read in all */
} Cost;

static int n_set(unsigned S) {
    int k = 0;
    for (; S; S &= S - 1) k++;
    return k;
}

static int cheaper(Cost a, Cost b) {
    return a.leaves != b.leaves ? a.leaves < b.leaves : a.reads < b.reads;
}

static int by_combo(const void *a, const void *b) {
    const TfCube *x = a, *y = b;
    return (x->combo > y->combo) - (x->combo < y->combo);
}

/* The best order (see the top of the file) into order[0..n). */
static void best_order(const Table *T, int *box, int *order) {
    int n = T->n;
    unsigned all = (1u << n) - 1;
    long N[1u << TF_GEN_MAX_INPUTS];
    Cost best[1u << TF_GEN_MAX_INPUTS];
    int last[1u << TF_GEN_MAX_INPUTS];
    for (unsigned S = 0; S <= all; S++)
        // A box that leaves free an input which may hold no value is no leaf
        // with a result: no pass needed.
        N[S] = (all & ~S & ~T->may_free) ? 0 : boxes(T, S, box);
    best[0] = (Cost){N[0], 0};
    for (unsigned S = 1; S <= all; S++) {
        int k = n_set(S);
        best[S] = (Cost){LONG_MAX, LONG_MAX};
        for (int i = 0; i < n; i++) {
            if (!(S >> i & 1)) continue;
            unsigned P = S & ~(1u << i);
            long add = N[S] - N[P] * T->size[i];
            Cost c = {best[P].leaves + add, best[P].reads + k * add};
            if (cheaper(c, best[S])) {
                best[S] = c;
                last[S] = i;
            }
        }
    }
    for (unsigned S = all; S; S &= ~(1u << last[S])) order[n_set(S) - 1] = last[S];
}

int cubes_partition(const int *size, int n_in, const int *result, unsigned may_free,
                    TfCubes *out) {
    *out = (TfCubes){0};
    Table T = {size, n_in, 1, result, may_free};
    for (int i = 0; i < n_in; i++) T.n_combo *= size[i];
    if (T.n_combo <= 0) return 0;
    int *box = malloc((size_t)T.n_combo * sizeof *box);
    int *prev = malloc((size_t)T.n_combo * sizeof *prev);
    long cap = 0;
    for (long c = 0; c < T.n_combo; c++) cap += result[c] >= 0;
    out->cube = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *out->cube);
    if (!box || !prev || !out->cube) {
        free(box), free(prev), cubes_free(out);
        return -1;
    }
    int order[TF_GEN_MAX_INPUTS];
    best_order(&T, box, order);

    long combo_stride[TF_GEN_MAX_INPUTS], m = 1;
    for (int i = 0; i < n_in; i++) combo_stride[i] = m, m *= size[i];
    // Walk the tree level by level: at S_j, the leaves with a result whose
    // parent box (on S_{j-1}) is not a leaf.
    unsigned S = 0;
    long n_prev = 0; /* leaves with a result on S_{j-1} */
    for (int j = 0; j <= n_in; j++) {
        int s = j ? order[j - 1] : -1;
        S |= j ? 1u << s : 0;
        long n_here = boxes(&T, S, box);
        long st = 1; /* s's stride in S_j's boxes */
        for (int i = 0; i < s; i++) st *= S >> i & 1 ? size[i] : 1;
        long n_box = 1;
        for (int i = 0; i < n_in; i++) n_box *= S >> i & 1 ? size[i] : 1;
        for (long t = 0; t < n_box && n_here; t++) {
            if (box[t] < 0) continue;
            if (j && n_prev) {
                long parent = t % st + st * (t / (st * size[s]));
                if (prev[parent] >= 0) continue;
            }
            TfCube *cb = &out->cube[out->n++];
            cb->combo = 0;
            long rest = t;
            for (int i = 0; i < TF_GEN_MAX_INPUTS; i++) {
                cb->val[i] = -1;
                if (i >= n_in || !(S >> i & 1)) continue;
                cb->val[i] = (int)(rest % size[i]);
                rest /= size[i];
                cb->combo += (int)(cb->val[i] * combo_stride[i]);
            }
        }
        int *tmp = prev;
        prev = box;
        box = tmp;
        n_prev = n_here;
    }
    free(box);
    free(prev);
    qsort(out->cube, (size_t)out->n, sizeof *out->cube, by_combo);
    return 0;
}

typedef struct Numbered {
    double x;
    int c;
} Numbered;

static int by_number(const void *a, const void *b) {
    const Numbered *x = a, *y = b;
    return (x->x > y->x) - (x->x < y->x);
}

int cubes_of_table(const TfIr *ir, const TfGenOp *p, TfCubes *out) {
    *out = (TfCubes){0};
    int size[TF_GEN_MAX_INPUTS];
    unsigned may_free = 0;
    for (int i = 0; i < p->n_in; i++) {
        const TfGenReg *g = &ir->gen_regs[p->in[i]];
        size[i] = g->n_vals;
        if (g->one_value) may_free |= 1u << i;
    }
    int n = p->n_combo;
    if (n <= 0) return 0;
    int *result = malloc((size_t)n * sizeof *result);
    if (!result) return -1;
    if (ir->regs[p->dest].kind == TF_REG_CATEGORICAL) {
        memcpy(result, p->combo_col, (size_t)n * sizeof *result);
    } else {
        // Numbers: equal ones one class, 0 none (a unit adding 0 is no unit).
        Numbered *num = malloc((size_t)n * sizeof *num);
        if (!num) {
            free(result);
            return -1;
        }
        for (int c = 0; c < n; c++) num[c] = (Numbered){p->combo_num[c], c};
        qsort(num, (size_t)n, sizeof *num, by_number);
        for (int k = 0, cls = -1; k < n; k++) {
            if (k == 0 || num[k].x != num[k - 1].x) cls++;
            result[num[k].c] = num[k].x != 0 ? cls : -1;
        }
        free(num);
    }
    int rc = cubes_partition(size, p->n_in, result, may_free, out);
    free(result);
    return rc;
}

void cubes_free(TfCubes *c) {
    free(c->cube);
    *c = (TfCubes){0};
}
