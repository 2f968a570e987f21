/* cubes.c: a table's combinations grouped into cubes of one result (cubes.h).
 *
 * For a set S of fixed inputs, an assignment a of values to S names a box:
 * the combinations that agree with a. A box is a leaf when the result is the
 * same over it (and the inputs it leaves free may be free), or when no
 * combination in it has a result. Otherwise the tree splits it on one of the
 * inputs still free, into one box per value, and the best tree for the box
 * splits on the input whose boxes need the fewest leaves with a result in
 * all (then the fewest columns read). Every box of every set is solved once,
 * the sets with more inputs first: prod (1 + size) boxes in all, each split
 * costing its size per input. An input of one value is never worth fixing
 * (it splits nothing): it is free when it may be, fixed otherwise, and left
 * out of the sets. A table whose boxes would be more than MAX_BOXES keeps one
 * cube per combination with a result, as before.
 */
#include "cubes.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY (-1) /* no combination of the box has a result */
#define MIXED (-2) /* not a leaf: results differ, or a free input may hold no value */
#define MAX_BOXES (1L << 22)

typedef struct Boxes {
    int n;                           /* inputs of more than one value */
    int in[TF_GEN_MAX_INPUTS];       /* their indices in the table */
    int size[TF_GEN_MAX_INPUTS];
    unsigned may_free;               /* bit j: in[j] may be free */
    long off[1 << TF_GEN_MAX_INPUTS]; /* where set S's boxes start */
    long count[1 << TF_GEN_MAX_INPUTS];
    int *val;     /* per box: its one result, EMPTY or MIXED */
    int *leaves;  /* leaves with a result of its best tree */
    int *reads;   /* and the columns they read in all */
    signed char *split; /* the input it splits on, -1: a leaf */
} Boxes;

/* The stride of input j among S's (mixed radix over S's inputs, first fastest). */
static long stride_in(const Boxes *B, unsigned S, int j) {
    long st = 1;
    for (int i = 0; i < j; i++)
        if (S >> i & 1) st *= B->size[i];
    return st;
}

/* Box a of S, split on j (not in S): its child for value x, in S | j's boxes. */
static long child(const Boxes *B, unsigned S, int j, long a, int x) {
    long st = stride_in(B, S, j);
    return a % st + st * (x + (long)B->size[j] * (a / st));
}

static int n_set(unsigned S) {
    int k = 0;
    for (; S; S &= S - 1) k++;
    return k;
}

/* Solves every box of S from the boxes of its supersets. */
static void solve_set(Boxes *B, unsigned S, const int *result) {
    unsigned all = (1u << B->n) - 1;
    long m = B->count[S], o = B->off[S];
    int *val = B->val + o, *lv = B->leaves + o, *rd = B->reads + o;
    signed char *sp = B->split + o;
    if (S == all) {
        memcpy(val, result, (size_t)m * sizeof *val);
    } else {
        // The result over the box, from the boxes one input larger.
        int j = 0;
        while (S >> j & 1) j++;
        unsigned T = S | 1u << j;
        const int *tv = B->val + B->off[T];
        for (long a = 0; a < m; a++) {
            int v = tv[child(B, S, j, a, 0)];
            for (int x = 1; x < B->size[j] && v != MIXED; x++)
                if (tv[child(B, S, j, a, x)] != v) v = MIXED;
            if (v >= 0 && !(B->may_free >> j & 1)) v = MIXED;
            val[a] = v;
        }
    }
    int k = n_set(S);
    for (long a = 0; a < m; a++) {
        lv[a] = val[a] >= 0;
        rd[a] = val[a] >= 0 ? k : 0;
        sp[a] = -1;
    }
    for (int j = 0; j < B->n; j++) {
        if (S >> j & 1) continue;
        unsigned T = S | 1u << j;
        const int *tl = B->leaves + B->off[T], *tr = B->reads + B->off[T];
        for (long a = 0; a < m; a++) {
            if (val[a] != MIXED) continue;
            long l = 0, r = 0;
            for (int x = 0; x < B->size[j]; x++) {
                long c = child(B, S, j, a, x);
                l += tl[c];
                r += tr[c];
            }
            if (sp[a] < 0 || l < lv[a] || (l == lv[a] && r < rd[a])) {
                lv[a] = (int)l;
                rd[a] = (int)r;
                sp[a] = (signed char)j;
            }
        }
    }
}

/* Appends the leaves with a result of box a of S to out. */
static void emit(const Boxes *B, unsigned S, long a, int *fix, const long *combo_stride,
                 const int *fixed_one, int n_in, TfCubes *out) {
    long o = B->off[S];
    if (B->val[o + a] == EMPTY) return;
    int j = B->split[o + a];
    if (j >= 0) {
        for (int x = 0; x < B->size[j]; x++) {
            fix[j] = x;
            emit(B, S | 1u << j, child(B, S, j, a, x), fix, combo_stride, fixed_one, n_in, out);
        }
        fix[j] = -1;
        return;
    }
    TfCube *cb = &out->cube[out->n++];
    cb->combo = 0;
    for (int i = 0; i < TF_GEN_MAX_INPUTS; i++) cb->val[i] = i < n_in && fixed_one[i] ? 0 : -1;
    for (int q = 0; q < B->n; q++) {
        if (!(S >> q & 1)) continue;
        cb->val[B->in[q]] = fix[q];
        cb->combo += (int)(fix[q] * combo_stride[B->in[q]]);
    }
}

static int by_combo(const void *a, const void *b) {
    const TfCube *x = a, *y = b;
    return (x->combo > y->combo) - (x->combo < y->combo);
}

int cubes_partition(const int *size, int n_in, const int *result, unsigned may_free,
                    TfCubes *out) {
    *out = (TfCubes){0};
    long n_combo = 1, n_result = 0, combo_stride[TF_GEN_MAX_INPUTS];
    for (int i = 0; i < n_in; i++) combo_stride[i] = n_combo, n_combo *= size[i];
    if (n_combo <= 0) return 0;
    for (long c = 0; c < n_combo; c++) n_result += result[c] >= 0;
    out->cube = malloc((size_t)(n_result > 0 ? n_result : 1) * sizeof *out->cube);
    Boxes *B = calloc(1, sizeof *B);
    if (!out->cube || !B) {
        free(B);
        cubes_free(out);
        return -1;
    }
    // Inputs of one value stay out of the sets (their digit is always 0, so
    // the combination numbers are the same over the others).
    int fixed_one[TF_GEN_MAX_INPUTS] = {0};
    for (int i = 0; i < n_in; i++) {
        if (size[i] > 1) {
            B->in[B->n] = i;
            B->size[B->n] = size[i];
            if (may_free >> i & 1) B->may_free |= 1u << B->n;
            B->n++;
        } else {
            fixed_one[i] = !(may_free >> i & 1);
        }
    }
    long total = 0;
    for (unsigned S = 0; S < 1u << B->n && total <= MAX_BOXES; S++) {
        B->off[S] = total;
        B->count[S] = 1;
        for (int j = 0; j < B->n; j++)
            if (S >> j & 1) B->count[S] *= B->size[j];
        total += B->count[S];
    }
    if (total <= MAX_BOXES) {
        B->val = malloc((size_t)total * sizeof *B->val);
        B->leaves = malloc((size_t)total * sizeof *B->leaves);
        B->reads = malloc((size_t)total * sizeof *B->reads);
        B->split = malloc((size_t)total);
    }
    int rc = 0;
    if (B->val && B->leaves && B->reads && B->split) {
        for (unsigned S = 1u << B->n; S-- > 0;) solve_set(B, S, result);
        int fix[TF_GEN_MAX_INPUTS];
        for (int j = 0; j < TF_GEN_MAX_INPUTS; j++) fix[j] = -1;
        emit(B, 0, 0, fix, combo_stride, fixed_one, n_in, out);
        qsort(out->cube, (size_t)out->n, sizeof *out->cube, by_combo);
    } else if (total > MAX_BOXES) {
        // Too many boxes: one cube per combination with a result.
        for (long c = 0; c < n_combo; c++) {
            if (result[c] < 0) continue;
            TfCube *cb = &out->cube[out->n++];
            cb->combo = (int)c;
            for (int i = 0; i < TF_GEN_MAX_INPUTS; i++)
                cb->val[i] = i < n_in ? (int)(c / combo_stride[i] % size[i]) : -1;
        }
    } else {
        cubes_free(out);
        rc = -1;
    }
    free(B->val), free(B->leaves), free(B->reads), free(B->split);
    free(B);
    return rc;
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
