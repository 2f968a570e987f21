/* cubes.c: a table's combinations grouped into cubes of one result (cubes.h).
 *
 * For a set S of fixed inputs, an assignment a of values to S names a box:
 * the combinations that agree with a. A box is a leaf when the result is the
 * same over it (and the inputs it leaves free may be free), or when no
 * combination in it has a result. Otherwise the tree splits it on one of the
 * inputs still free, into one box per value; boxes whose tables (the result
 * over their free inputs) are the same share a branch when the input's
 * values may share a set, and a branch costs what its box's best tree does.
 * The best tree of a box splits on the input whose branches need the fewest
 * leaves with a result in all (then the fewest columns read).
 *
 * Every box of every set of inputs is solved once, the sets with more inputs
 * first: prod (1 + size) boxes in all. Boxes of one set with the same table
 * get the same id (the first such box's number), from the ids of their
 * children, so sharing is a lookup. An input of one value is never worth
 * fixing (it splits nothing): it is free when it may be, fixed otherwise,
 * and left out of the sets. A table whose boxes would be more than MAX_BOXES
 * keeps one cube per combination with a result, as before.
 */
#include "cubes.h"
#include "hash.h"

#include <stdlib.h>
#include <string.h>

#define EMPTY (-1) /* no combination of the box has a result */
#define MIXED (-2) /* not a leaf: results differ, or a free input may hold no value */
#define MAX_BOXES (1L << 22)

typedef struct Boxes {
    int n;                            /* inputs of more than one value */
    int in[TF_PLAN_MAX_INPUTS];        /* their indices in the table */
    int size[TF_PLAN_MAX_INPUTS];
    unsigned may_free, may_share;     /* bit j: in[j] may be free / share sets */
    long off[1 << TF_PLAN_MAX_INPUTS]; /* where set S's boxes start */
    long count[1 << TF_PLAN_MAX_INPUTS];
    int *val;           /* per box: its one result, EMPTY or MIXED */
    int *id;            /* the first box of its set with the same table */
    int *leaves;        /* leaves with a result of its best tree */
    int *reads;         /* and the columns they read in all */
    signed char *split; /* the input it splits on, -1: a leaf */
    int *slot;          /* a hash table of boxes by table, per set (n_slot) */
    long n_slot;
    int *cnt;           /* per id: branch sizes while splitting one box */
} Boxes;

/* The stride of input j among S's (mixed radix over S's inputs, first fastest). */
static long stride_in(const Boxes *B, unsigned S, int j) {
    long st = 1;
    for (int i = 0; i < j; i++)
        if (S >> i & 1) st *= B->size[i];
    return st;
}

/* Box a of S, split on an input of `size` values and stride st among S's
 * (stride_in): its child for value x, in the boxes of S and that input. */
static long child(long a, long st, int size, int x) {
    return a % st + st * (x + (long)size * (a / st));
}

static int n_set(unsigned S) {
    int k = 0;
    for (; S; S &= S - 1) k++;
    return k;
}

/* The ids of S's boxes: a box's table is its children's tables (on the
 * first input not in S), so equal children ids, equal ids. */
static void set_ids(Boxes *B, unsigned S, int j) {
    long m = B->count[S], o = B->off[S];
    const int *cid = B->id + B->off[S | 1u << j];
    long st = stride_in(B, S, j), mask = 1;
    int sj = B->size[j];
    while (mask < 2 * m) mask <<= 1;
    for (long h = 0; h < mask; h++) B->slot[h] = -1;
    mask--;
    for (long a = 0; a < m; a++) {
        uint64_t h = HASH_INIT;
        for (int x = 0; x < sj; x++) h = hash_word(h, (uint64_t)cid[child(a, st, sj, x)]);
        for (h &= (uint64_t)mask;; h = (h + 1) & (uint64_t)mask) {
            long b = B->slot[h];
            if (b < 0) {
                B->slot[h] = (int)a;
                B->id[o + a] = (int)a;
                break;
            }
            int same = 1;
            for (int x = 0; x < sj && same; x++)
                same = cid[child(a, st, sj, x)] == cid[child(b, st, sj, x)];
            if (same) {
                B->id[o + a] = (int)b;
                break;
            }
        }
    }
}

/* Solves every box of S from the boxes of its supersets. */
static void solve_set(Boxes *B, unsigned S, const int *result) {
    unsigned all = (1u << B->n) - 1;
    long m = B->count[S], o = B->off[S];
    int *val = B->val + o, *lv = B->leaves + o, *rd = B->reads + o;
    signed char *sp = B->split + o;
    if (S == all) {
        for (long a = 0; a < m; a++) {
            val[a] = result[a];
            B->id[o + a] = result[a] + 1; // the table of one combination: its result
        }
    } else {
        // The result over the box, from the boxes one input larger.
        int j = 0;
        while (S >> j & 1) j++;
        const int *tv = B->val + B->off[S | 1u << j];
        long st = stride_in(B, S, j);
        int sj = B->size[j];
        for (long a = 0; a < m; a++) {
            int v = tv[child(a, st, sj, 0)];
            for (int x = 1; x < sj && v != MIXED; x++)
                if (tv[child(a, st, sj, x)] != v) v = MIXED;
            if (v >= 0 && !(B->may_free >> j & 1)) v = MIXED;
            val[a] = v;
        }
        set_ids(B, S, j);
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
        const int *tl = B->leaves + B->off[T], *tr = B->reads + B->off[T], *ti = B->id + B->off[T];
        int share = B->may_share >> j & 1, sj = B->size[j];
        long st = stride_in(B, S, j);
        for (long a = 0; a < m; a++) {
            if (val[a] != MIXED) continue;
            // One branch per value, or per table of the values' boxes: a
            // branch of g values reads g columns of j in each of its leaves.
            long l = 0, r = 0;
            if (share) {
                for (int x = 0; x < sj; x++) B->cnt[ti[child(a, st, sj, x)]] = 0;
                for (int x = 0; x < sj; x++) B->cnt[ti[child(a, st, sj, x)]]++;
            }
            for (int x = 0; x < sj; x++) {
                long c = child(a, st, sj, x);
                int g = share ? B->cnt[ti[c]] : 1;
                if (g == 0) continue; // the branch was counted at its first value
                l += tl[c];
                r += tr[c] + (long)(g - 1) * tl[c];
                if (share) B->cnt[ti[c]] = 0;
            }
            if (sp[a] < 0 || l < lv[a] || (l == lv[a] && r < rd[a])) {
                lv[a] = (int)l;
                rd[a] = (int)r;
                sp[a] = (signed char)j;
            }
        }
    }
}

/* A new set of n values (ascending); its number, -1 when memory runs out. */
static int new_set(TfCubes *C, const int *v, int n) {
    if (C->n_sets + 2 > C->cap_sets) {
        int cap = C->cap_sets ? 2 * C->cap_sets : 64;
        int *s = realloc(C->start, (size_t)cap * sizeof *s);
        if (!s) return -1;
        C->start = s;
        C->cap_sets = cap;
    }
    if (C->n_vals + n > C->cap_vals) {
        int cap = C->cap_vals ? 2 * C->cap_vals : 256;
        while (cap < C->n_vals + n) cap *= 2;
        int *s = realloc(C->vals, (size_t)cap * sizeof *s);
        if (!s) return -1;
        C->vals = s;
        C->cap_vals = cap;
    }
    memcpy(C->vals + C->n_vals, v, (size_t)n * sizeof *v);
    C->start[C->n_sets] = C->n_vals;
    C->n_vals += n;
    C->start[C->n_sets + 1] = C->n_vals;
    return C->n_sets++;
}

const int *cubes_set(const TfCubes *c, int s, int *n) {
    *n = c->start[s + 1] - c->start[s];
    return c->vals + c->start[s];
}

typedef struct Emit {
    const Boxes *B;
    TfCubes *out;
    int set[TF_PLAN_MAX_INPUTS];  /* per input of the sets on the path: its set */
    int base[TF_PLAN_MAX_INPUTS]; /* per table input of one value: its set, -1: free */
    const long *combo_stride;
    int n_in, max_size;
    int *vals;   /* scratch: a set's values */
    int *head;   /* per id: the first value of its branch (-1 between splits) */
    int *next;   /* per value: the next of its branch, -1 */
    int *branch; /* per depth: the first value and the set of each branch */
} Emit;

/* Appends the leaves with a result of box a of S; -1 when memory runs out. */
static int emit(Emit *E, unsigned S, long a) {
    const Boxes *B = E->B;
    long o = B->off[S];
    if (B->val[o + a] == EMPTY) return 0;
    int j = B->split[o + a];
    if (j < 0) {
        TfCube *cb = &E->out->cube[E->out->n++];
        cb->combo = 0;
        for (int i = 0; i < TF_PLAN_MAX_INPUTS; i++) cb->set[i] = i < E->n_in ? E->base[i] : -1;
        for (int q = 0; q < B->n; q++) {
            if (!(S >> q & 1)) continue;
            int n;
            const int *v = cubes_set(E->out, E->set[q], &n);
            cb->set[B->in[q]] = E->set[q];
            cb->combo += (int)(v[0] * E->combo_stride[B->in[q]]);
        }
        return 0;
    }
    // The branches (values whose boxes share a table, when they may), each a
    // set, before the recursion reuses the scratch.
    unsigned T = S | 1u << j;
    const int *ti = B->id + B->off[T];
    int share = B->may_share >> j & 1, sj = B->size[j], n_br = 0;
    long st = stride_in(B, S, j);
    int *first = E->branch + (size_t)n_set(S) * 2 * (size_t)E->max_size, *set = first + E->max_size;
    for (int x = sj - 1; x >= 0; x--) {
        int id = share ? ti[child(a, st, sj, x)] : 0;
        E->next[x] = share ? E->head[id] : -1;
        if (share) E->head[id] = x;
    }
    for (int x = 0; x < sj; x++) {
        if (share && E->head[ti[child(a, st, sj, x)]] != x) continue;
        int n = 0;
        for (int y = x; y >= 0; y = E->next[y]) E->vals[n++] = y;
        first[n_br] = x;
        if ((set[n_br++] = new_set(E->out, E->vals, n)) < 0) return -1;
    }
    for (int x = 0; x < sj && share; x++) E->head[ti[child(a, st, sj, x)]] = -1;
    for (int b = 0; b < n_br; b++) {
        E->set[j] = set[b];
        if (emit(E, T, child(a, st, sj, first[b])) < 0) return -1;
    }
    return 0;
}

static int by_combo(const void *a, const void *b) {
    const TfCube *x = a, *y = b;
    return (x->combo > y->combo) - (x->combo < y->combo);
}

/* Too many boxes: one cube per combination with a result, every input
 * fixed to its value. */
static int one_per_combination(const int *size, int n_in, const int *result, long n_combo,
                               const long *combo_stride, TfCubes *out) {
    int first[TF_PLAN_MAX_INPUTS];
    for (int i = 0; i < n_in; i++)
        for (int v = 0; v < size[i]; v++) {
            int s = new_set(out, &v, 1);
            if (s < 0) return -1;
            if (v == 0) first[i] = s;
        }
    for (long c = 0; c < n_combo; c++) {
        if (result[c] < 0) continue;
        TfCube *cb = &out->cube[out->n++];
        cb->combo = (int)c;
        for (int i = 0; i < TF_PLAN_MAX_INPUTS; i++)
            cb->set[i] = i < n_in ? first[i] + (int)(c / combo_stride[i] % size[i]) : -1;
    }
    return 0;
}

static void free_boxes(Boxes *B) {
    free(B->val), free(B->id), free(B->leaves), free(B->reads), free(B->split);
    free(B->slot), free(B->cnt);
    free(B);
}

int cubes_partition(const int *size, int n_in, const int *result, unsigned may_free,
                    unsigned may_share, TfCubes *out) {
    *out = (TfCubes){0};
    long n_combo = 1, n_result = 0, combo_stride[TF_PLAN_MAX_INPUTS];
    for (int i = 0; i < n_in; i++) combo_stride[i] = n_combo, n_combo *= size[i];
    if (n_combo <= 0) return 0;
    int max_result = 0;
    for (long c = 0; c < n_combo; c++) {
        n_result += result[c] >= 0;
        if (result[c] > max_result) max_result = result[c];
    }
    out->cube = malloc((size_t)(n_result > 0 ? n_result : 1) * sizeof *out->cube);
    Boxes *B = calloc(1, sizeof *B);
    Emit E = {.B = B, .out = out, .combo_stride = combo_stride, .n_in = n_in};
    if (!out->cube || !B) goto oom;
    // Inputs of one value stay out of the sets (their digit is always 0, so
    // the combination numbers are the same over the others).
    int max_size = 1;
    for (int i = 0; i < n_in; i++) {
        E.base[i] = -1;
        if (size[i] > 1) {
            B->in[B->n] = i;
            B->size[B->n] = size[i];
            if (may_free >> i & 1) B->may_free |= 1u << B->n;
            if (may_share >> i & 1) B->may_share |= 1u << B->n;
            B->n++;
            if (size[i] > max_size) max_size = size[i];
        } else if (!(may_free >> i & 1) && (E.base[i] = new_set(out, (int[]){0}, 1)) < 0) {
            goto oom;
        }
    }
    long total = 0, most = 1;
    for (unsigned S = 0; S < 1u << B->n && total <= MAX_BOXES; S++) {
        B->off[S] = total;
        B->count[S] = 1;
        for (int j = 0; j < B->n; j++)
            if (S >> j & 1) B->count[S] *= B->size[j];
        total += B->count[S];
        if (B->count[S] > most) most = B->count[S];
    }
    if (total > MAX_BOXES) {
        free_boxes(B);
        cubes_free(out);
        *out = (TfCubes){0};
        out->cube = malloc((size_t)(n_result > 0 ? n_result : 1) * sizeof *out->cube);
        if (!out->cube || one_per_combination(size, n_in, result, n_combo, combo_stride, out) < 0) {
            cubes_free(out);
            return -1;
        }
        return 0;
    }
    B->n_slot = 2;
    while (B->n_slot < 2 * most) B->n_slot <<= 1;
    B->val = malloc((size_t)total * sizeof *B->val);
    B->id = malloc((size_t)total * sizeof *B->id);
    B->leaves = malloc((size_t)total * sizeof *B->leaves);
    B->reads = malloc((size_t)total * sizeof *B->reads);
    B->split = malloc((size_t)total);
    B->slot = malloc((size_t)B->n_slot * sizeof *B->slot);
    // Ids: a box number of a set, or a result + 1.
    B->cnt = calloc((size_t)(most > max_result ? most : max_result) + 2, sizeof *B->cnt);
    long n_ids = (most > max_result ? most : max_result) + 2;
    E.max_size = max_size;
    E.vals = malloc((size_t)max_size * sizeof *E.vals);
    E.next = malloc((size_t)max_size * sizeof *E.next);
    E.head = malloc((size_t)n_ids * sizeof *E.head);
    E.branch = malloc((size_t)(B->n + 1) * 2 * (size_t)max_size * sizeof *E.branch);
    if (!B->val || !B->id || !B->leaves || !B->reads || !B->split || !B->slot || !B->cnt ||
        !E.vals || !E.next || !E.head || !E.branch)
        goto oom;
    for (long i = 0; i < n_ids; i++) E.head[i] = -1;
    for (unsigned S = 1u << B->n; S-- > 0;) solve_set(B, S, result);
    if (emit(&E, 0, 0) < 0) goto oom;
    qsort(out->cube, (size_t)out->n, sizeof *out->cube, by_combo);
    free(E.vals), free(E.next), free(E.head), free(E.branch);
    free_boxes(B);
    return 0;
oom:
    free(E.vals), free(E.next), free(E.head), free(E.branch);
    if (B) free_boxes(B);
    cubes_free(out);
    return -1;
}

typedef struct Numbered {
    double x;
    int c;
} Numbered;

static int by_number(const void *a, const void *b) {
    const Numbered *x = a, *y = b;
    return (x->x > y->x) - (x->x < y->x);
}

int cubes_of_table(const TfIr *ir, const TfOpPlan *p, TfCubes *out) {
    *out = (TfCubes){0};
    int size[TF_PLAN_MAX_INPUTS];
    unsigned may_free = 0;
    double worst = 0; /* the margin's use if every one-value input shared all its values */
    for (int i = 0; i < p->n_in; i++) {
        const TfRegFacts *g = &ir->regs[p->in[i]].facts;
        size[i] = g->n_vals;
        if (g->one_value) may_free |= 1u << i;
        worst += (g->one_value ? g->n_vals : 1) * g->err;
    }
    unsigned may_share = worst < 0.25 ? may_free : 0;
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
    int rc = cubes_partition(size, p->n_in, result, may_free, may_share, out);
    free(result);
    return rc;
}

void cubes_free(TfCubes *c) {
    free(c->cube);
    free(c->start);
    free(c->vals);
    *c = (TfCubes){0};
}
