/* test_cubes.c: a table's cubes (compiler/cubes.c) and the MLP they become
 * (compiler/lower_general.c, lower_table).
 *
 * On random tables the cubes must partition the combinations that have a
 * result, each cube holding one result and leaving free only inputs that
 * may be free, and there must be as few as the best decision tree over all
 * orders of the inputs (a brute force written apart). A compiled Map that
 * ignores an input in a branch must get fewer units than one per
 * combination, and at every position of every input up to a length its
 * result must be the table's entry for the values its inputs hold, none
 * where an input that may hold none holds none. programs/sort_case.tfp's
 * Map must get its 992 pairs, and its plan count the layers as built.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker.h"
#include "compile.h"
#include "cubes.h"
#include "infer.h"
#include "parse.h"
#include "plans.h"
#include "testutil.h"
#include "values.h"

/* ---- the partition ------------------------------------------------------------- */

typedef struct Tab {
    int n, size[TF_PLAN_MAX_INPUTS];
    long n_combo;
    int *result;
    unsigned may_free, may_share;
} Tab;

static void digits(const Tab *T, long c, int *v) {
    for (int i = 0; i < T->n; i++) {
        v[i] = (int)(c % T->size[i]);
        c /= T->size[i];
    }
}

static long stride_of(const Tab *T, int s) {
    long st = 1;
    for (int i = 0; i < s; i++) st *= T->size[i];
    return st;
}

/* In the box that fixes the inputs of `fixed` to fix[], the tables under
 * s = x and s = y are the same. */
static int same_table(const Tab *T, unsigned fixed, const int *fix, int s, int x, int y) {
    int v[TF_PLAN_MAX_INPUTS];
    long st = stride_of(T, s);
    for (long c = 0; c < T->n_combo; c++) {
        digits(T, c, v);
        int in = v[s] == x;
        for (int i = 0; i < T->n; i++) in &= !(fixed >> i & 1) || v[i] == fix[i];
        if (in && T->result[c] != T->result[c + (long)(y - x) * st]) return 0;
    }
    return 1;
}

/* Leaves with a result of the best tree below the box that fixes the inputs
 * of `fixed` to fix[]: a leaf, or the best of the splits on each input
 * still free, values with the same table sharing a branch where they may.
 * An independent count, by brute force. */
static long best_tree(const Tab *T, unsigned fixed, int *fix) {
    int v[TF_PLAN_MAX_INPUTS], first = -3, same = 1, free_ok = 1;
    for (int i = 0; i < T->n; i++)
        if (!(fixed >> i & 1) && !(T->may_free >> i & 1)) free_ok = 0;
    for (long c = 0; c < T->n_combo; c++) {
        digits(T, c, v);
        int in = 1;
        for (int i = 0; i < T->n; i++) in &= !(fixed >> i & 1) || v[i] == fix[i];
        if (!in) continue;
        if (first == -3) first = T->result[c];
        else if (T->result[c] != first) same = 0;
    }
    if (same && first == -1) return 0;
    if (same && free_ok) return 1;
    long best = -1;
    for (int s = 0; s < T->n; s++) {
        if (fixed >> s & 1) continue;
        long n = 0;
        for (int x = 0; x < T->size[s]; x++) {
            int seen = 0;
            for (int y = 0; y < x && !seen && (T->may_share >> s & 1); y++)
                seen = same_table(T, fixed, fix, s, y, x);
            if (seen) continue;
            fix[s] = x;
            n += best_tree(T, fixed | 1u << s, fix);
        }
        if (best < 0 || n < best) best = n;
    }
    return best;
}

/* Combination c is in cube cb. */
static int in_cube(const Tab *T, const TfCubes *C, const TfCube *cb, long c) {
    int v[TF_PLAN_MAX_INPUTS];
    digits(T, c, v);
    for (int i = 0; i < T->n; i++) {
        if (cb->set[i] < 0) continue;
        int n, found = 0;
        const int *vals = cubes_set(C, cb->set[i], &n);
        for (int q = 0; q < n; q++) found |= vals[q] == v[i];
        if (!found) return 0;
    }
    return 1;
}

/* The cubes partition the combinations with a result, one result each. */
static void check_partition(const Tab *T, const TfCubes *C) {
    int *covered = calloc((size_t)T->n_combo, sizeof *covered);
    long with_result = 0;
    for (long c = 0; c < T->n_combo; c++) with_result += T->result[c] >= 0;
    ck_assert_int_le(C->n, with_result);
    for (int u = 0; u < C->n; u++) {
        const TfCube *cb = &C->cube[u];
        if (u) ck_assert_int_lt(C->cube[u - 1].combo, cb->combo);
        ck_assert_int_ge(T->result[cb->combo], 0);
        for (int i = 0; i < T->n; i++) {
            if (cb->set[i] < 0) {
                ck_assert_msg(T->may_free >> i & 1, "input %d left free", i);
                continue;
            }
            int n;
            const int *vals = cubes_set(C, cb->set[i], &n);
            ck_assert_int_ge(n, 1);
            if (n > 1) ck_assert_msg(T->may_share >> i & 1, "input %d in a set of %d", i, n);
            for (int q = 1; q < n; q++) ck_assert_int_lt(vals[q - 1], vals[q]);
        }
        long members = 0;
        for (long c = 0; c < T->n_combo; c++) {
            if (!in_cube(T, C, cb, c)) continue;
            members++;
            if (c < cb->combo)
                ck_abort_msg("cube %d's first combination is %d, not %ld", u, cb->combo, c);
            ck_assert_int_eq(T->result[c], T->result[cb->combo]);
            covered[c]++;
        }
        ck_assert_int_ge(members, 1);
    }
    for (long c = 0; c < T->n_combo; c++)
        ck_assert_int_eq(covered[c], T->result[c] >= 0 ? 1 : 0);
    free(covered);
}

/* A random table: per value of input 0, the result reads a random subset of
 * the other inputs (a branch that ignores some), or every entry is random
 * over few results; some entries have none. */
static void random_table(Tab *T, unsigned *seed) {
    T->n = 1 + (int)(rand_r(seed) % 4);
    T->n_combo = 1;
    for (int i = 0; i < T->n; i++) {
        T->size[i] = 1 + (int)(rand_r(seed) % 4);
        T->n_combo *= T->size[i];
    }
    T->may_free = (unsigned)rand_r(seed) & ((1u << T->n) - 1);
    if (rand_r(seed) % 3) T->may_free = (1u << T->n) - 1;
    T->may_share = (unsigned)rand_r(seed) & ((1u << T->n) - 1);
    if (rand_r(seed) % 3) T->may_share = T->may_free;
    T->result = malloc((size_t)T->n_combo * sizeof *T->result);
    int structured = rand_r(seed) % 2, none_pct = (int)(rand_r(seed) % 3) * 10;
    unsigned reads[4];
    for (int x = 0; x < 4; x++) reads[x] = (unsigned)rand_r(seed);
    int v[TF_PLAN_MAX_INPUTS];
    for (long c = 0; c < T->n_combo; c++) {
        digits(T, c, v);
        if ((int)(rand_r(seed) % 100) < none_pct) {
            T->result[c] = -1;
        } else if (structured) {
            unsigned h = 2166136261u ^ (unsigned)v[0];
            for (int i = 1; i < T->n; i++)
                if (reads[v[0]] >> i & 1) h = (h ^ (unsigned)(v[i] + 7 * i)) * 16777619u;
            T->result[c] = (int)(h % 5);
        } else {
            T->result[c] = (int)(rand_r(seed) % 2);
        }
    }
}

START_TEST(test_cubes_partition_random_tables) {
    unsigned seed = 12345;
    int n_fewer = 0, n_tables = 0;
    for (int k = 0; k < 2000; k++) {
        Tab T;
        random_table(&T, &seed);
        TfCubes C;
        ck_assert_int_eq(cubes_partition(T.size, T.n, T.result, T.may_free, T.may_share, &C), 0);
        check_partition(&T, &C);
        int fix[TF_PLAN_MAX_INPUTS] = {0};
        ck_assert_int_eq(C.n, best_tree(&T, 0, fix));
        long with_result = 0;
        for (long c = 0; c < T.n_combo; c++) with_result += T.result[c] >= 0;
        n_fewer += C.n < with_result;
        n_tables++;
        cubes_free(&C);
        free(T.result);
    }
    ck_assert_int_eq(n_tables, 2000);
    ck_assert_int_gt(n_fewer, 500); // the random tables do have cubes
}
END_TEST

/* No input may be free: one cube per combination with a result, in order,
 * fixing every input to its value (today's table). */
START_TEST(test_cubes_no_free_input_is_the_full_table) {
    int size[3] = {3, 2, 4};
    int result[24];
    for (int c = 0; c < 24; c++) result[c] = c % 5 == 0 ? -1 : 1; // constant where defined
    TfCubes C;
    ck_assert_int_eq(cubes_partition(size, 3, result, 0, 0, &C), 0);
    ck_assert_int_eq(C.n, 24 - 5);
    for (int u = 0, c = 0; u < C.n; u++, c++) {
        while (result[c] < 0) c++;
        ck_assert_int_eq(C.cube[u].combo, c);
        int want[3] = {c % 3, c / 3 % 2, c / 6};
        for (int i = 0; i < 3; i++) {
            int n;
            const int *v = cubes_set(&C, C.cube[u].set[i], &n);
            ck_assert_int_eq(n, 1);
            ck_assert_int_eq(v[0], want[i]);
        }
    }
    cubes_free(&C);
    // Every input may be free and the result is everywhere the same: one
    // constant cube.
    for (int c = 0; c < 24; c++) result[c] = 1;
    ck_assert_int_eq(cubes_partition(size, 3, result, 7, 7, &C), 0);
    ck_assert_int_eq(C.n, 1);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(C.cube[0].set[i], -1);
    cubes_free(&C);
}
END_TEST

/* A table of more boxes (sets of fixed values over all sets of inputs) than
 * the solver takes keeps one cube per combination with a result, every
 * input fixed to its value, even where one cube would do. */
START_TEST(test_cubes_too_many_boxes) {
    int size[8] = {2, 2, 2, 2, 2, 2, 2, 8192}; // 3^7 x 8193 boxes
    long n = 128L * 8192;
    int *result = malloc((size_t)n * sizeof *result);
    long with_result = 0;
    for (long c = 0; c < n; c++) with_result += (result[c] = c % 3 == 0 ? -1 : 1) >= 0;
    TfCubes C;
    ck_assert_int_eq(cubes_partition(size, 8, result, 255, 255, &C), 0);
    ck_assert_int_eq(C.n, with_result);
    long bad = 0; // counted, not asserted one by one: 700,000 cubes
    for (int u = 0; u < C.n; u++) {
        const TfCube *cb = &C.cube[u];
        bad += (u && C.cube[u - 1].combo >= cb->combo) || result[cb->combo] < 0;
        for (int i = 0, rest = cb->combo; i < 8; rest /= size[i], i++) {
            int k;
            const int *v = cubes_set(&C, cb->set[i], &k);
            bad += k != 1 || v[0] != rest % size[i];
        }
    }
    ck_assert_int_eq(bad, 0);
    cubes_free(&C);
    free(result);
}
END_TEST

/* A one-key sort of 32 letters with one Map over three registers:
 * Map(t < 'a' ? same : nup + same), t one of 16 upper-case and 16
 * lower-case letters, same and nup counts 0..32. One pair per combination:
 * 34,848; a cube per letter: 16 x 33 + 16 x 33 x 33 = 17,952; the letters
 * of a case sharing a set: 33 + 33 x 33 = 1,122. */
START_TEST(test_cubes_share_the_values_of_a_case) {
    int size[3] = {32, 33, 33};
    int *result = malloc(32 * 33 * 33 * sizeof *result);
    for (int c = 0; c < 32 * 33 * 33; c++) {
        int t = c % 32, same = c / 32 % 33, nup = c / (32 * 33);
        result[c] = t < 16 ? same : nup + same;
    }
    TfCubes C;
    ck_assert_int_eq(cubes_partition(size, 3, result, 7, 0, &C), 0);
    ck_assert_int_eq(C.n, 16 * 33 + 16 * 33 * 33);
    cubes_free(&C);
    ck_assert_int_eq(cubes_partition(size, 3, result, 7, 7, &C), 0);
    ck_assert_int_eq(C.n, 33 + 33 * 33);
    Tab T = {3, {32, 33, 33}, 32 * 33 * 33, result, 7, 7};
    check_partition(&T, &C);
    cubes_free(&C);
    free(result);
}
END_TEST

/* ---- the compiled Map ------------------------------------------------------------ */

/* Hidden units of the op named `name` (a layer, or a part of a merged one). */
static int units_of(const TfModel *m, const char *name) {
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        if (ly->n_parts == 0 && strcmp(ly->name, name) == 0) return ly->d_hidden;
        for (int k = 0; k < ly->n_parts; k++)
            if (strcmp(ly->parts[k].name, name) == 0) return ly->parts[k].count;
    }
    ck_abort_msg("no layer %s", name);
    return -1;
}

static const TfRegister *model_reg(const TfModel *m, const char *name) {
    for (int r = 0; r < m->n_regs; r++)
        if (strcmp(m->regs[r].name, name) == 0) return &m->regs[r];
    ck_abort_msg("no register %s", name);
    return NULL;
}

/* The label of the one column of R within 1e-3 of 1 (the others within
 * 1e-3 of 0): its value ("3", "'a'"; for `tokens` the token), "" when no
 * column is; fails on anything else. */
static const char *decode(const TfModel *m, const TfRegister *R, const float *x, char *buf,
                          size_t n) {
    buf[0] = '\0';
    for (int c = 0; c < R->size; c++) {
        float v = x[R->offset + c];
        if (fabsf(v - 1.0f) <= 1e-3f) {
            ck_assert_msg(buf[0] == '\0', "%s holds two values", R->name);
            if (R->values) snprintf(buf, n, "%s", R->values[c]);
            else snprintf(buf, n, "'%c'", m->vocab[c]);
        } else {
            ck_assert_msg(fabsf(v) <= 1e-3f, "%s column %d is %g", R->name, c, (double)v);
        }
    }
    return buf;
}

typedef struct Final {
    int layer; /* the last layer's index */
    float *x;  /* its rows, [n_rows, d_model] */
    int n_rows, d;
} Final;

static void final_hook(void *user, int layer, const float *x, int n_rows, const int *row_seq,
                       const int *row_pos) {
    (void)row_seq, (void)row_pos;
    Final *F = user;
    if (layer != F->layer) return;
    memcpy(F->x, x, (size_t)n_rows * (size_t)F->d * sizeof *x);
    F->n_rows = n_rows;
}

/* `m` reads tokens, lt (a Count) and indices; for 'a' it ignores indices,
 * otherwise lt. `n` reads prev, which holds nothing after anything but an
 * 'a': even for 'b', whose result ignores prev in the expression, n must hold
 * nothing there, as the table that reads every input gives. */
static const char *ignoring_src =
    "vocab \"^abc\"; bos '^'; maxlen 7;\n"
    "cat lt, prev, m, n;\n"
    "lt:   Count(k.tokens < q.tokens) -> lt;\n"
    "prev: Aggregate(k.indices == q.indices - 1 and k.tokens == 'a', tokens) -> prev;\n"
    "m:    Map(tokens == 'a' ? lt : indices + 10) -> m;\n"
    "n:    Map(tokens == 'b' ? 1 : (prev == 'a' ? 2 : 3)) -> n;\n"
    "output tokens;\n";

START_TEST(test_map_ignoring_an_input) {
    char out[4096] = "";
    FILE *f = fmemopen(out, sizeof out - 1, "w");
    int n_errors;
    TfError err = {""};
    // One layer per op (no fusion), so that the Map's own units can be counted.
    TfCompileOptions opts = {.opt_level = 1, .max_params = 0, .no_schedule = 1};
    TfModel *m = compile_source_opts("t.tfp", ignoring_src, strlen(ignoring_src), &opts, f,
                                     &n_errors, &err);
    fclose(f);
    ck_assert_msg(m != NULL, "%s%s", out, err.msg);
    // The full table: 3 tokens x 6 counts (0..5: of the 6 positions after
    // the BOS no token is less than itself) x 7 indices = 126 pairs; the
    // cubes: 'a' x 6 counts + 'b' or 'c' x 6 indices = 12 (no one order of
    // the inputs gives that: 'a' splits on lt, the others on indices).
    // Index 0 is the BOS's position, never computed: its result, 10, no
    // other combination gives, so it has no unit (values.c, va_combo_at_bos).
    ck_assert_int_eq(units_of(m, "m"), 2 * 12);
    // n: prev (which the analysis knows as 'a' only: its selection picks
    // keys holding 'a') may hold nothing, so every cube reads it: 'b' x 1
    // value of prev + 'a' or 'c' x 1 = 2 pairs of the full table's 3 (the
    // decoding below checks that n holds nothing where prev does not).
    ck_assert_int_eq(units_of(m, "n"), 2 * 2);

    const TfRegister *rt = model_reg(m, "tokens"), *rlt = model_reg(m, "lt"),
                     *rix = model_reg(m, "indices"), *rprev = model_reg(m, "prev"),
                     *rm = model_reg(m, "m"), *rn = model_reg(m, "n");
    TfInfer *inf = infer_new(m, 1, &err);
    ck_assert_msg(inf != NULL, "%s", err.msg);
    Final F = {m->n_layers - 1, malloc(8 * (size_t)m->d_model * sizeof(float)), 0, m->d_model};
    infer_set_hook(inf, final_hook, &F);
    int checked = 0, b_without_prev = 0;
    for (int len = 1; len <= 6; len++) {
        int n_inputs = 1;
        for (int i = 0; i < len; i++) n_inputs *= 3;
        for (int k = 0; k < n_inputs; k++) {
            int ids[8], toks[8];
            ids[0] = 0; // '^'
            for (int i = 0, r = k; i < len; i++, r /= 3) ids[1 + i] = 1 + r % 3;
            const int *idp = ids;
            int L = len + 1, *tp = toks;
            F.n_rows = 0;
            ck_assert_int_eq(infer_every_position(inf, &idp, &L, 1, &tp, &err), 0);
            ck_assert_int_eq(F.n_rows, L);
            for (int p = 1; p < L; p++) {
                const float *x = F.x + (size_t)p * (size_t)F.d;
                char tok[16], lt[16], ix[16], prev[16], got_m[16], got_n[16];
                decode(m, rt, x, tok, sizeof tok);
                decode(m, rlt, x, lt, sizeof lt);
                decode(m, rix, x, ix, sizeof ix);
                decode(m, rprev, x, prev, sizeof prev);
                decode(m, rm, x, got_m, sizeof got_m);
                decode(m, rn, x, got_n, sizeof got_n);
                ck_assert_msg(tok[0] && lt[0] && ix[0], "an input without a value");
                // m's table: 'a' -> lt, else indices + 10.
                char want[16];
                if (strcmp(tok, "'a'") == 0) snprintf(want, sizeof want, "%s", lt);
                else snprintf(want, sizeof want, "%d", atoi(ix) + 10);
                ck_assert_str_eq(got_m, want);
                // n's table reads prev: nothing where prev holds nothing.
                const char *wn = !prev[0]                    ? ""
                                 : strcmp(tok, "'b'") == 0 ? "1"
                                                             : "2";
                ck_assert_msg(strcmp(got_n, wn) == 0, "n at %d: '%s', table '%s'", p, got_n, wn);
                b_without_prev += strcmp(tok, "'b'") == 0 && !prev[0];
                checked++;
            }
        }
    }
    ck_assert_int_gt(checked, 1000);
    ck_assert_int_gt(b_without_prev, 100);
    free(F.x);
    infer_free(inf);
    model_free(m);
}
END_TEST

/* programs/sort_case.tfp, the one-key sort of 32 letters: its Map is 992
 * pairs of units, not one per combination (30,752), and the plan (which
 * the --max-params limit compares) counts the layers as built. */
START_TEST(test_sort_case_plan_is_the_model) {
    char path[1024];
    snprintf(path, sizeof path, "%s/programs/sort_case.tfp", tf_env_path("TF_SOURCE_DIR"));
    size_t len;
    char *src = tf_read_file(path, &len);
    ck_assert_ptr_nonnull(src);
    char out[4096] = "";
    FILE *f = fmemopen(out, sizeof out - 1, "w");
    TfDiag diag;
    diag_init(&diag, "sort_case.tfp", src, len, f);
    TfProgram *prog = tf_parse(src, len, &diag);
    TfIr *ir = check_program(prog, &diag);
    ck_assert_ptr_nonnull(ir);
    values_analyze(ir, 1, &diag);
    TfPlans plans;
    ck_assert_int_eq(plans_make(ir, 1, TF_DEFAULT_MAX_PARAMS, &diag, &plans), 0);
    int n_errors;
    TfError err = {""};
    // The plans are per op: the model before scheduling (compiler/schedule.h).
    TfCompileOptions opts = {.opt_level = 1, .max_params = 0, .no_schedule = 1};
    TfModel *m = compile_source_opts("sort_case.tfp", src, len, &opts, f, &n_errors, &err);
    fclose(f);
    ck_assert_msg(m != NULL, "%s%s", out, err.msg);
    ck_assert_int_eq(units_of(m, "place"), 2 * 992);
    ck_assert_int_eq(m->n_layers, plans.n_layers);
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        if (ly->kind != TF_LAYER_MLP) continue;
        // An MLP's plan is exact: fc1 and fc2 with their biases.
        size_t d = (size_t)m->d_model, h = (size_t)ly->d_hidden;
        ck_assert_int_eq(plans.layers[l].n_params, 2 * h * d + h + d);
    }
    model_free(m);
    plans_free(&plans);
    check_free(ir);
    ast_free_program(prog);
    free(src);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cubes");
    TCase *tc = tcase_create("cubes");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_cubes_partition_random_tables);
    tcase_add_test(tc, test_cubes_no_free_input_is_the_full_table);
    tcase_add_test(tc, test_cubes_share_the_values_of_a_case);
    tcase_add_test(tc, test_cubes_too_many_boxes);
    tcase_add_test(tc, test_map_ignoring_an_input);
    tcase_add_test(tc, test_sort_case_plan_is_the_model);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
