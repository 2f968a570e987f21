/* test_prove.c: the validator's interval arithmetic (compiler/interval.h)
 * and the validator on small models (compiler/prove.h).
 *
 * Intervals: on random operands (a fixed seed, magnitudes from 1e-300 to
 * 1e300 and both signs), every operation's interval must contain the exact
 * result, computed in long double (64-bit mantissa: exact for + - and *
 * of doubles up to its rounding, which is 2^11 times finer than the
 * double's) and checked against the closest long double bounds.
 * The validator: a compiled program is proven, the same file with one
 * weight changed so that its output changes is not.
 */
#include <check.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "infer.h"
#include "interval.h"
#include "prove.h"
#include "prove_internal.h" /* pv_score_twins, pv_prove_twin */
#include "schedule.h"
#include "testutil.h"

static uint64_t rng = 88172645463325252ull;
static double rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* A random double of any size and sign. */
static double operand(void) {
    double m = rnd() + 0.5, e = floor(rnd() * 40) - 20;
    if (rnd() < 0.1) e = floor(rnd() * 1200) - 600; // huge and tiny too
    double x = ldexp(m, (int)e);
    return rnd() < 0.5 ? -x : x;
}

static TfIv rand_iv(void) {
    double a = operand(), b = rnd() < 0.3 ? a : a + fabs(operand()) * 1e-3;
    return (TfIv){fmin(a, b), fmax(a, b)};
}

/* The exact result of op on every corner lies in r. */
static int encloses(TfIv r, long double lo, long double hi) {
    return (long double)r.lo <= lo && hi <= (long double)r.hi;
}

START_TEST(test_interval_encloses) {
    for (int i = 0; i < 200000; i++) {
        TfIv a = rand_iv(), b = rand_iv();
        long double al = a.lo, ah = a.hi, bl = b.lo, bh = b.hi;
        ck_assert_msg(encloses(iv_add(a, b), al + bl, ah + bh), "add %.17g %.17g", a.lo, b.lo);
        ck_assert_msg(encloses(iv_sub(a, b), al - bh, ah - bl), "sub %.17g %.17g", a.lo, b.lo);
        long double p[4] = {al * bl, al * bh, ah * bl, ah * bh}, lo = p[0], hi = p[0];
        for (int k = 1; k < 4; k++) lo = fminl(lo, p[k]), hi = fmaxl(hi, p[k]);
        TfIv m = iv_mul(a, b);
        if (isfinite(m.lo) && isfinite(m.hi)) ck_assert_msg(encloses(m, lo, hi), "mul %.17g %.17g", a.lo, b.lo);
        if (b.lo > 0 || b.hi < 0) {
            long double q[4] = {al / bl, al / bh, ah / bl, ah / bh};
            lo = hi = q[0];
            for (int k = 1; k < 4; k++) lo = fminl(lo, q[k]), hi = fmaxl(hi, q[k]);
            TfIv d = iv_div(a, b);
            if (isfinite(d.lo) && isfinite(d.hi) && fabsl(lo) > LDBL_MIN * 1e10)
                ck_assert_msg(encloses(d, lo, hi), "div %.17g %.17g", a.lo, b.lo);
        }
        double x = (rnd() - 0.5) * 200;
        TfIv e = iv_exp((TfIv){x, x});
        ck_assert_msg(encloses(e, expl(x), expl(x)), "exp %.17g", x);
    }
}
END_TEST


/* Sums of float32 products in any order stay within gamma_n of the exact one. */
START_TEST(test_gamma_bounds_float_sums) {
    for (int t = 0; t < 2000; t++) {
        int n = 1 + (int)(rnd() * 200);
        float w[200], x[200];
        long double exact = 0, mag = 0;
        for (int i = 0; i < n; i++) {
            w[i] = (float)operand() * 1e-10f, x[i] = (float)(rnd() - 0.5);
            if (!isfinite(w[i])) w[i] = 1;
            exact += (long double)w[i] * x[i];
            mag += fabsl((long double)w[i] * x[i]);
        }
        float fwd = 0, bwd = 0;
        for (int i = 0; i < n; i++) fwd += w[i] * x[i];
        for (int i = n - 1; i >= 0; i--) bwd += w[i] * x[i];
        long double bound = (long double)iv_gamma(n) * mag;
        ck_assert(fabsl(fwd - exact) <= bound && fabsl(bwd - exact) <= bound);
    }
}
END_TEST

/* Sums a[lo..hi) in float32 as a balanced tree (BLAS's blocks). */
static float tree_sum(const float *a, int lo, int hi) {
    if (hi - lo == 1) return a[lo];
    int mid = (lo + hi) / 2;
    return tree_sum(a, lo, mid) + tree_sum(a, mid, hi);
}

/* iv_sum_err on terms that nearly cancel in pairs (a staircase's steps:
 * ReLUs of up to 1e4 whose differences are 0 or 1), summed in float32 in
 * the worst order (every positive term first), backwards, as a tree and
 * with fused multiply-adds: the error is within the bound, which is below
 * the gamma_n bound where the terms cancel. */
START_TEST(test_sum_err_bounds_float_sums) {
    int below_gamma = 0;
    for (int t = 0; t < 2000; t++) {
        int n = 2 + 2 * (int)(rnd() * 100);
        float w[202], h[202], prod[202], sorted[202];
        long double exact = 0, pos = 0, neg = 0;
        for (int i = 0; i < n; i += 2) {
            float big = (float)(rnd() * 1e4), step = rnd() < 0.5 ? 1.0f : (float)rnd();
            float s = rnd() < 0.5 ? 1.0f : (float)(0.25 + rnd());
            h[i] = big + step, h[i + 1] = big, w[i] = s, w[i + 1] = -s;
        }
        int np = 0;
        for (int i = 0; i < n; i++) {
            prod[i] = w[i] * h[i];
            long double p = (long double)w[i] * h[i];
            exact += p;
            if (p > 0) pos += p, sorted[np++] = prod[i];
            else neg -= p;
        }
        for (int i = 0, k = np; i < n; i++)
            if (prod[i] <= 0) sorted[k++] = prod[i];
        float worst = 0, bwd = 0, fma_acc = 0;
        for (int i = 0; i < n; i++) worst += sorted[i];
        for (int i = n - 1; i >= 0; i--) bwd += prod[i];
        for (int i = 0; i < n; i++) fma_acc = fmaf(w[i], h[i], fma_acc);
        float tree = tree_sum(prod, 0, n);
        long double bound = iv_sum_err((double)pos, (double)neg, n);
        float got[4] = {worst, bwd, fma_acc, tree};
        for (int k = 0; k < 4; k++)
            ck_assert_msg(fabsl(got[k] - exact) <= bound, "order %d: error %Lg above %Lg (n %d)", k,
                          fabsl(got[k] - exact), bound, n);
        below_gamma += bound < (long double)iv_gamma(n) * (pos + neg);
    }
    ck_assert_int_eq(below_gamma, 2000);
}
END_TEST

static const char *count_src = "vocab \"^ab0123456789\"; bos '^'; maxlen 9;\n"
                               "cat c;\n"
                               "c: Count(k.tokens == 'a') -> c;\n"
                               "output c at every position;\n";

static TfModel *compile_text(const char *src, int opt) {
    int n_errors;
    TfError err;
    FILE *null = fopen("/dev/null", "w");
    TfModel *m = compile_source("t.tfp", src, strlen(src), opt, null, &n_errors, &err);
    fclose(null);
    ck_assert_ptr_nonnull(m);
    return m;
}

/* src compiled with options o; its diagnostics are not printed. */
static TfModel *compile_with_opts(const char *src, TfCompileOptions o) {
    int n_errors;
    TfError err;
    FILE *null = fopen("/dev/null", "w");
    TfModel *m = compile_source_opts("t.tfp", src, strlen(src), &o, null, &n_errors, &err);
    fclose(null);
    ck_assert_ptr_nonnull(m);
    return m;
}

/* At -O with every register one-hot (tfc --one-hot): a mutation is then
 * refused at the line of the op whose columns it breaks. Held as a number,
 * the output has no columns of values to decode: the output's logit margin
 * refuses it, at the output's line. */
static TfModel *compile_one_hot(const char *src) {
    return compile_with_opts(src, (TfCompileOptions){.opt_level = 1, .one_hot = 1});
}

/* At -O, every selection's parts one-hot (tfc --no-angles): the tests of
 * those heads' constructions. */
static TfModel *compile_without_angles(const char *src) {
    return compile_with_opts(src, (TfCompileOptions){.opt_level = 1, .no_angles = 1});
}

/* src compiled at -O0 and -O is proven, with a line per op. */
/* m is proven (and nothing else is asked of the proof). */
static void assert_proven(const TfModel *m) {
    TfProof P;
    TfError err = {""};
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_msg(P.verdict == TF_PROOF_PROVEN, "%s", P.reason);
    prove_free(&P);
}

static void assert_proven_both(const char *src) {
    for (int opt = 0; opt <= 1; opt++) {
        TfModel *m = compile_text(src, opt);
        TfProof P;
        TfError err;
        ck_assert_int_eq(prove_model(m, &P, &err), 0);
        ck_assert_msg(P.verdict == TF_PROOF_PROVEN, "-O%d: %s", opt, P.reason);
        ck_assert_int_gt(P.n_lines, 0);
        prove_free(&P);
        model_free(m);
    }
}

START_TEST(test_compiled_program_proven) {
    assert_proven_both(count_src);
}
END_TEST

#if defined(__SSE2__)
/* The proof runs with results below the smallest normal flushed to zero
 * (FTZ: compiler/prove.c): the interval operations stay enclosures there,
 * on operands whose exact results are subnormal (the reference: long
 * double, which x87 computes, untouched by SSE's mode); and the caller's
 * mode is back after a proof. */
START_TEST(test_interval_encloses_flushed) {
    unsigned mode = _mm_getcsr();
    _mm_setcsr(mode | 0x8000u);
    for (int i = 0; i < 200000; i++) {
        double x = ldexp(rnd() + 0.5, -1000 - (int)(rnd() * 60)), y = ldexp(rnd() + 0.5, -(int)(rnd() * 60));
        TfIv a = {rnd() < 0.5 ? -x : x, x}, b = {rnd() < 0.5 ? -y : y, y};
        long double al = a.lo, ah = a.hi, bl = b.lo, bh = b.hi;
        ck_assert_msg(encloses(iv_add(a, b), al + bl, ah + bh), "add %.17g %.17g", a.lo, b.lo);
        ck_assert_msg(encloses(iv_sub(a, a), al - ah, ah - al), "sub %.17g", a.lo);
        long double p[4] = {al * bl, al * bh, ah * bl, ah * bh}, lo = p[0], hi = p[0];
        for (int k = 1; k < 4; k++) lo = fminl(lo, p[k]), hi = fmaxl(hi, p[k]);
        ck_assert_msg(encloses(iv_mul(a, b), lo, hi), "mul %.17g %.17g", a.lo, b.lo);
        ck_assert_msg(encloses(iv_scale(a, y), al * y, ah * y), "scale %.17g %.17g", a.lo, y);
    }
    _mm_setcsr(mode);
    assert_proven_both(count_src);
    ck_assert_uint_eq(_mm_getcsr() & ~0x3Fu, mode & ~0x3Fu); // the control bits (not the sticky flags)
}
END_TEST
#endif

/* Gated Maps (a numeric input among categorical ones): the bound the
 * compiler writes covers what the validator proves (it claimed 1.19e-05
 * for `x * indices` where 1.39e-05 is proven: the gate's columns and bias,
 * about 2 B, were left out of the rounding), with one or two categorical
 * inputs, and results of 0 where both units of a pair are on. */
START_TEST(test_gated_maps_proven) {
    const char *src[] = {
        "vocab \"^ab\"; bos '^'; maxlen 4; num x, g;\n"
        "x: Map(tokens == 'a' ? 1 : 2) -> x;\n"
        "g: Map(x * indices) -> g;\n"
        "output g at every position;\n",
        "vocab \"^abc\"; bos '^'; maxlen 7; num x, g;\n"
        "x: Map(tokens == 'a' ? 0.5 : (tokens == 'b' ? -3 : 7)) -> x;\n"
        "g: Map(tokens == 'c' ? x * (indices - 3) : 100 - x * indices) -> g;\n"
        "output g at every position;\n",
    };
    for (size_t i = 0; i < sizeof src / sizeof *src; i++) assert_proven_both(src[i]);
}
END_TEST

/* The unembedding's row for '1' (token 4) negated: the output is wrong for
 * a count of one, and the proof fails there with that case. */
START_TEST(test_changed_weight_fails) {
    TfModel *m = compile_text(count_src, 1);
    float *U = m->tensors[m->unembed].data;
    for (int c = 0; c < m->d_model; c++) U[4 * m->d_model + c] *= -1;
    TfProof P;
    TfError err;
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_int_eq(P.verdict, TF_PROOF_FAILED);
    ck_assert_int_eq(P.n_assign, 1);
    ck_assert_str_eq(P.assign_reg[0], "c");
    ck_assert_str_eq(P.assign_val[0], "1");
    prove_free(&P);
    model_free(m);
}
END_TEST

/* A `sum` Aggregate (the mean's head, the count's head and steps, the gated
 * product): proven at -O0 and -O; with any one of its three parts' weights
 * scaled by 1.1 (the count's value, the mean's value, the product's fc2),
 * refused: the sum's bound grows (a number's is reported, not checked) and
 * the Map that reads it, line 5, fails on a case naming the sum's count. */
static const char *sum_src = "vocab \"^0123\"; bos '^'; maxlen 9;\n"
                             "num x, total; cat out;\n"
                             "x: Map(ord(tokens) - ord('0')) -> x;\n"
                             "total: Aggregate(k.indices <= q.indices, x, causal, sum) -> total;\n"
                             "out: Map(round(total) % 4) -> out;\n"
                             "output out at every position;\n";

/* The layer named name (-1). */
static int layer_named(const TfModel *m, const char *name) {
    for (int li = 0; li < m->n_layers; li++)
        if (strcmp(m->layers[li].name, name) == 0) return li;
    return -1;
}

/* The model column of value `label` of register `reg` (a value nothing
 * reads has none: compiler/schedule.c), -1. */
static int value_col(const TfModel *m, const char *reg, const char *label) {
    int r = model_find_register(m, reg);
    if (r < 0 || !m->regs[r].values) return -1;
    for (int i = 0; i < m->regs[r].size; i++)
        if (strcmp(m->regs[r].values[i], label) == 0) return m->regs[r].offset + i;
    return -1;
}

/* Scales by f the output weights of the op named name: its heads' value
 * rows, or its hidden units' fc2 columns, whether it has a layer of its own
 * or is a part of a scheduled layer. 0 when no layer holds it. */
static int scale_op(TfModel *m, const char *name, float f) {
    for (int li = 0; li < m->n_layers; li++) {
        const TfLayer *ly = &m->layers[li];
        int first = 0, count = ly->kind == TF_LAYER_MLP ? ly->d_hidden : ly->n_heads;
        int hit = ly->n_parts == 0 && strcmp(ly->name, name) == 0;
        for (int k = 0; k < ly->n_parts && !hit; k++)
            if (strcmp(ly->parts[k].name, name) == 0)
                hit = 1, first = ly->parts[k].first, count = ly->parts[k].count;
        if (!hit) continue;
        int mlp = ly->kind == TF_LAYER_MLP;
        TfTensor *T = &m->tensors[mlp ? ly->fc2_weight : ly->value];
        size_t rows = (size_t)T->shape[0], cols = (size_t)T->shape[1];
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) {
                long at = mlp ? (long)c : (long)r / ly->d_vhead; // the unit, or the head
                if (at >= first && at < first + count) T->data[r * cols + c] *= f;
            }
        return 1;
    }
    return 0;
}

START_TEST(test_sum_proven_and_mutations_refused) {
    assert_proven_both(sum_src);
    const char *part[3] = {"total.count", "total", "total.sum"};
    for (int k = 0; k < 4; k++) { // 3: the default, out held as a number
        TfModel *m = k < 3 ? compile_one_hot(sum_src) : compile_text(sum_src, 1);
        ck_assert_msg(scale_op(m, part[k % 3], 1.1f), "no layer holds %s", part[k % 3]);
        TfProof P;
        TfError err;
        ck_assert_int_eq(prove_model(m, &P, &err), 0);
        ck_assert_msg(P.verdict == TF_PROOF_FAILED, "%s x 1.1: %d %s", part[k % 3], P.verdict, P.reason);
        ck_assert_msg(P.fail_line == (k < 3 ? 5 : 6), "%s: line %d (%s)", part[k % 3], P.fail_line,
                      P.reason);
        int named = 0;
        for (int i = 0; i < P.n_assign; i++) named |= strcmp(P.assign_reg[i], "count(total)") == 0;
        ck_assert_msg(named, "%s: the case does not name the sum's count (%s)", part[k % 3], P.reason);
        prove_free(&P);
        model_free(m);
    }
}
END_TEST

/* m (mutated) is refused, at source line `line`; m is freed. */
static void assert_refused_and_free(TfModel *m, int line) {
    TfProof P;
    TfError err;
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_msg(P.verdict == TF_PROOF_FAILED, "%d %s", P.verdict, P.reason);
    ck_assert_int_eq(P.fail_line, line);
    prove_free(&P);
    model_free(m);
}

/* A copy compared by rank 3 (lower_general.c, rank3_term: rows t, t^2, 1
 * against 2y, -1, 1 - y^2): proven; the key's 2y weight of one position
 * moved by a quarter (its score then 1 - (t - y)^2 + t/2 for that key) is
 * refused, on a case that names the position. */
static const char *rank3_src = "vocab \"^abc_\"; bos '^'; maxlen 9;\n"
                               "cat src, out;\n"
                               "src: Map(indices - 2) -> src;\n"
                               "out: Aggregate(k.indices == q.src, tokens, default: '_') -> out;\n"
                               "output out at every position;\n";

START_TEST(test_rank3_copy_proven_and_mutation_refused) {
    TfModel *m = compile_without_angles(rank3_src);
    ck_assert_int_eq(m->layers[0].d_head, 5);
    TfProof P;
    TfError err;
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_msg(P.verdict == TF_PROOF_PROVEN, "%s", P.reason);
    prove_free(&P);
    // Row 0 of the key reads indices' columns with 2y: position 4's, 8 -> 9.
    int ic = value_col(m, "indices", "4");
    ck_assert_int_ge(ic, 0);
    TfTensor *K = &m->tensors[m->layers[0].key];
    float *w = &K->data[(size_t)ic];
    ck_assert_float_eq(*w, 8.0f);
    *w = 9.0f;
    assert_refused_and_free(m, 4);
}
END_TEST

/* Values nothing reads lose their columns (compiler/schedule.c): n keeps
 * the columns of 1 and 2 of its 0..8, and the validator proves the model,
 * a position holding another value decoding to none of them. A register
 * table that calls the column of 1 the column of 3 is refused: where n is
 * 1 its columns do not decode to 1 (it has no column) but to 3. The token
 * columns nothing reads go too, and the model is proven. */
START_TEST(test_unread_values_proven_and_relabel_refused) {
    const char *src = "vocab \"^ab_\"; bos '^'; maxlen 9;\n"
                      "cat n, w, out;\n"
                      "n: Count(k.tokens == 'a', causal) -> n;\n"
                      "w: Map([tokens: 'a' => 1, _ => 2]) -> w;\n"
                      "out: Aggregate(k.n == q.w and k.tokens == 'a', tokens, default: '_') -> out;\n"
                      "output out at every position;\n";
    TfModel *m = compile_text(src, 1);
    int r = model_find_register(m, "n");
    ck_assert_int_ge(r, 0);
    ck_assert_int_eq(m->regs[r].size, 2);
    assert_proven(m);
    ck_assert_str_eq(m->regs[r].values[0], "1");
    m->regs[r].values[0][0] = '3';
    TfProof P;
    TfError err;
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_msg(P.verdict == TF_PROOF_FAILED, "relabelled: %s", P.reason);
    ck_assert_msg(strstr(P.reason, "-> n") != NULL, "%s", P.reason);
    prove_free(&P);
    model_free(m);

    // tokens keeps the columns of '^' and 'a' (a categorical register):
    // proven (the validator reads the embedding's rows, not their labels).
    m = compile_text("vocab \"^abc0123\"; bos '^'; maxlen 4;\n"
                     "cat n, out;\n"
                     "n: Count(k.tokens == 'a') -> n;\n"
                     "out: Map(chr(ord('0') + n)) -> out;\n"
                     "output out at every position;\n", 1);
    r = model_find_register(m, "tokens");
    ck_assert_int_eq(m->regs[r].kind, TF_REG_CATEGORICAL);
    ck_assert_int_eq(m->regs[r].size, 2);
    assert_proven(m);
    model_free(m);
}
END_TEST

/* A Map of a number and a categorical register that is a function of
 * their sum, (q + c / 2) % 10, is one staircase over u = q + h(c) (h(0) =
 * 0, h(2) = 1: compiler/map.c, map_offset), read from q's column and c's
 * one-hot: u takes 0..10, so 10 steps, 21 units one-hot, where a staircase
 * of q per value of c would take 2 x 9 steps. With the output held as a
 * number (the default) the staircase has a slope: u, less 10 from 10 on,
 * 4 units. Both proven, and on every input up to 3 tokens each position
 * prints its digit, 'b' (q 9, c 2) 0; the slope's weight scaled by 1.1 is
 * refused at the output. */
START_TEST(test_offset_staircase_proven) {
    const char *src = "vocab \"^0123456789b\"; bos '^'; maxlen 4;\n"
                      "num q; cat c, out;\n"
                      "q: Map(tokens == 'b' ? 9 : ord(tokens) - ord('0')) -> q;\n"
                      "c: Map(tokens == 'b' ? 2 : 0) -> c;\n"
                      "out: Map((q + c / 2) % 10) -> out;\n"
                      "output out at every position;\n";
    for (int k = 0; k < 2; k++) {
        TfModel *m = k ? compile_text(src, 1) : compile_one_hot(src);
        int li = layer_named(m, "out");
        ck_assert_int_ge(li, 0);
        ck_assert_int_eq(m->layers[li].d_hidden, k ? 4 : 21);
        ck_assert_int_eq(m->regs[m->output_reg].kind, k ? TF_REG_SCALAR : TF_REG_CATEGORICAL);
        assert_proven(m);
        TfError err = {""};
        TfInfer *inf = infer_new(m, 1, &err);
        ck_assert_msg(inf != NULL, "%s", err.msg);
        const char *alpha = "0123456789b";
        int ids[4], outs[4], n_inputs = 0;
        for (int n = 1; n <= 3; n++)
            for (int code = 0; code < (n == 1 ? 11 : n == 2 ? 121 : 1331); code++, n_inputs++) {
                char text[5] = "^";
                for (int i = 0, c = code; i < n; i++, c /= 11) text[1 + i] = alpha[c % 11];
                text[n + 1] = '\0';
                int len = n + 1, *po = outs;
                const int *seq = ids;
                ck_assert_int_eq(infer_tokenize(m, text, len, ids, &err), len);
                ck_assert_msg(infer_every_position(inf, &seq, &len, 1, &po, &err) == 0, "%s", err.msg);
                for (int p = 1; p < len; p++)
                    ck_assert_msg(m->vocab[outs[p]] == (text[p] == 'b' ? '0' : text[p]), "%s at %d: %c",
                                  text, p, m->vocab[outs[p]]);
            }
        ck_assert_int_eq(n_inputs, 11 + 121 + 1331);
        infer_free(inf);
        if (k) { // the slope unit, the last: its one output weight
            const TfLayer *ly = &m->layers[li];
            float *w2 = m->tensors[ly->fc2_weight].data;
            int oc = m->regs[m->output_reg].offset;
            ck_assert(w2[(size_t)oc * ly->d_hidden + 3] != 0);
            w2[(size_t)oc * ly->d_hidden + 3] *= 1.1f;
            assert_refused_and_free(m, 6);
        } else {
            model_free(m);
        }
    }
}
END_TEST

/* A selection compared on angles (compiler/angles.h): `k.na == q.nb`
 * (the nb-th a, for the b's so far) picks one count of a's per count of
 * b's, so its head compares points on a
 * circle (three rows, two columns a side) instead of a row per value of nb.
 * The same outputs as the one-hot head at every position of all 4,094
 * inputs up to 11 tokens, proven; the key points' cos column read at half
 * its weight is refused at the Aggregate. */
static const char *angle_src = "vocab \"^ab012\"; bos '^'; maxlen 12;\n"
                               "cat na, nb, par, got;\n"
                               "na: Count(k.tokens == 'a', causal) -> na;\n"
                               "nb: Count(k.tokens == 'b', causal) -> nb;\n"
                               "par: Map(indices % 3) -> par;\n"
                               "got: Aggregate(k.tokens == 'a' and k.na == q.nb, par, default: 0) -> got;\n"
                               "output got at every position;\n";

START_TEST(test_angles_proven_same_outputs_and_mutation_refused) {
    TfModel *m = compile_text(angle_src, 1), *o = compile_without_angles(angle_src);
    int li = layer_named(m, "got"), lo = layer_named(o, "got");
    ck_assert_int_ge(li, 0);
    ck_assert_int_ge(lo, 0);
    int kc = model_find_register(m, "got.t1.kcos");
    ck_assert_int_ge(kc, 0);
    ck_assert_int_lt(model_find_register(o, "got.t1.kcos"), 0);
    // tokens == 'a' (1 row), the angles (3), the BOS (2); one-hot: a row per nb
    ck_assert_int_eq(m->layers[li].d_head, 6);
    ck_assert_int_ge(o->layers[lo].d_head, 1 + 8 + 2);
    ck_assert_int_lt(model_param_count(m), model_param_count(o));
    assert_proven(m);
    TfError err = {""};
    TfInfer *a = infer_new(m, 1, &err), *b = infer_new(o, 1, &err);
    ck_assert_msg(a && b, "%s", err.msg);
    int ids[12], oa[12], ob[12], n_inputs = 0;
    for (int n = 1; n <= 11; n++)
        for (int code = 0; code < 1 << n; code++, n_inputs++) {
            char text[13] = "^";
            for (int i = 0; i < n; i++) text[1 + i] = code >> i & 1 ? 'b' : 'a';
            int len = n + 1, *pa = oa, *pb = ob;
            const int *seq = ids;
            ck_assert_int_eq(infer_tokenize(m, text, len, ids, &err), len);
            ck_assert_msg(infer_every_position(a, &seq, &len, 1, &pa, &err) == 0, "%s: %s", text, err.msg);
            ck_assert_msg(infer_every_position(b, &seq, &len, 1, &pb, &err) == 0, "%s", err.msg);
            for (int p = 1; p < len; p++)
                ck_assert_msg(oa[p] == ob[p], "%s at %d: %d against %d", text, p, oa[p], ob[p]);
        }
    ck_assert_int_eq(n_inputs, 4094);
    infer_free(a), infer_free(b);
    model_free(o);
    TfTensor *K = &m->tensors[m->layers[li].key];
    size_t cols = (size_t)K->shape[1];
    for (int64_t h = 0; h < K->shape[0]; h++) K->data[(size_t)h * cols + (size_t)m->regs[kc].offset] *= 0.5f;
    assert_refused_and_free(m, 6);
    // At maxlen 5 the counts have 5 points: a key two points away would
    // weigh e^-98, a subnormal float32 (slow on x86), so the part stays
    // one-hot (compiler/angles.c, subnormal_weights).
    char small[512];
    const char *ml = strstr(angle_src, "maxlen 12");
    ck_assert_ptr_nonnull(ml);
    snprintf(small, sizeof small, "%.*smaxlen 5%s", (int)(ml - angle_src), angle_src, ml + 9);
    m = compile_text(small, 1);
    ck_assert_int_lt(model_find_register(m, "got.t1.kcos"), 0);
    model_free(m);
}
END_TEST

/* A copy of a number (k.indices == q.apos picks one position): the
 * selected keys of a query scenario all stand at that position, so the mean
 * is that key's value mixed only with what leaks from the BOS and the
 * others, however wide the interval of its score (rank 3's products of
 * indices up to 33^2): proven within float32's summation slack, where the
 * spread of the score once counted as a mix of the copied values (a bound
 * of 6.2, and round(adig) refused). The value rows scaled by 1.1 move 6 to
 * 6.6, past round's step at 6.5: refused at the Map. */
static const char *numcopy_src = "vocab \"^0123456789\"; bos '^'; maxlen 34;\n"
                                 "cat apos, out; num dig, adig;\n"
                                 "dig: Map(ord(tokens) - ord('0')) -> dig;\n"
                                 "apos: Map(indices - 11) -> apos;\n"
                                 "adig: Aggregate(k.indices == q.apos, dig, default: 0) -> adig;\n"
                                 "out: Map(round(adig)) -> out;\n"
                                 "output out at every position;\n";

START_TEST(test_numeric_copy_proven_tight_and_mutation_refused) {
    assert_proven_both(numcopy_src);
    TfModel *m = compile_text(numcopy_src, 1);
    TfProof P;
    TfError err;
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_msg(P.verdict == TF_PROOF_PROVEN, "%s", P.reason);
    double bound = -1;
    for (int i = 0; i < P.n_lines; i++) {
        const char *w = strstr(P.lines[i], "within ");
        if (strstr(P.lines[i], "-> adig: layer") && w) bound = strtod(w + 7, NULL);
    }
    ck_assert_msg(bound >= 0 && bound < 1e-3, "adig's bound %g", bound);
    prove_free(&P);
    model_free(m);
    m = compile_one_hot(numcopy_src);
    ck_assert(scale_op(m, "adig", 1.1f));
    assert_refused_and_free(m, 6);
}
END_TEST

/* A Map of a number and a categorical register into a categorical one
 * (compiler/map.c, map_split): per token, a staircase over the number.
 * Proven; the fc1 weights that read the number scaled by 1.5 move every
 * step, refused at the Map (one-hot: held as a number, the output's
 * margin refuses it at the output). */
static const char *split_src = "vocab \"^abc012\"; bos '^'; maxlen 12;\n"
                               "cat out; num x;\n"
                               "x: Map(indices * 2) -> x;\n"
                               "out: Map((x + (tokens == 'a' ? 1 : 0)) % 3) -> out;\n"
                               "output out at every position;\n";

START_TEST(test_split_map_proven_and_mutation_refused) {
    assert_proven_both(split_src);
    TfModel *m = compile_one_hot(split_src);
    int li = layer_named(m, "out"), xr = model_find_register(m, "x");
    ck_assert_int_ge(li, 0);
    ck_assert_int_ge(xr, 0);
    TfTensor *W1 = &m->tensors[m->layers[li].fc1_weight];
    size_t cols = (size_t)W1->shape[1];
    for (int64_t h = 0; h < W1->shape[0]; h++) W1->data[(size_t)h * cols + (size_t)m->regs[xr].offset] *= 1.5f;
    assert_refused_and_free(m, 4);
}
END_TEST

/* Registers of numbers that nothing needs one-hot (compiler/numbers.h):
 * dig and adig, declared `cat`, are held in one column each (a copy's value
 * and result, one group; out reads adig as a number and hc per value), and
 * so is the output, proven. h and its copy hc, one group, stay one-hot (the
 * model is smaller so); a file whose register table claims h alone is a
 * number is not proven: the validator does not take its word. */
static const char *numbers_src = "vocab \"^0123456789\"; bos '^'; maxlen 12;\n"
                                 "cat dig, adig, apos, h, hc, out;\n"
                                 "dig: Map(ord(tokens) - ord('0')) -> dig;\n"
                                 "apos: Map(indices - 3) -> apos;\n"
                                 "adig: Aggregate(k.indices == q.apos, dig, default: 0) -> adig;\n"
                                 "h: Map(dig / 2) -> h;\n"
                                 "hc: Aggregate(k.indices == q.apos, h, default: 0) -> hc;\n"
                                 "out: Map((adig + hc) % 10) -> out;\n"
                                 "output out at every position;\n";

START_TEST(test_numbers_held_proven_and_unsafe_refused) {
    TfModel *m = compile_text(numbers_src, 1);
    const char *held[] = {"dig", "adig", "out"}, *kept[] = {"h", "hc"};
    for (int i = 0; i < 3; i++) {
        int r = model_find_register(m, held[i]);
        ck_assert_msg(r >= 0 && m->regs[r].kind == TF_REG_SCALAR, "%s not held as a number", held[i]);
    }
    for (int i = 0; i < 2; i++) {
        int r = model_find_register(m, kept[i]);
        ck_assert_msg(r >= 0 && m->regs[r].kind == TF_REG_CATEGORICAL, "%s not one-hot", kept[i]);
    }
    ck_assert_ptr_nonnull(strstr(m->made_by, "\"numbers\":[\"dig\",\"adig\",\"out\"]"));
    TfProof P;
    TfError err;
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_msg(P.verdict == TF_PROOF_PROVEN, "%s", P.reason);
    prove_free(&P);
    m->regs[model_find_register(m, "h")].kind = TF_REG_SCALAR;
    ck_assert_msg(prove_model(m, &P, &err) == 0, "%s", err.msg);
    ck_assert_msg(P.verdict != TF_PROOF_PROVEN, "a register proven as a number without its group");
    ck_assert_msg(strstr(P.reason, "'h' as a number") != NULL, "%s", P.reason);
    prove_free(&P);
    model_free(m);
}
END_TEST

/* A Count whose selection compares two Counts (sort_freq's `more`): the
 * compiler reads `hist` through a fresh one-hot (a table MLP, "more.keys"
 * at -O0, compiler/select.c), and the validator proves it at -O0 and -O;
 * that table's output with one weight's sign flipped (the unit that turns
 * on hist = 2's column) is refused. */
static const char *count2_src = "vocab \"^abcd\"; bos '^'; maxlen 17;\n"
                                "cat hist, more, out;\n"
                                "hist: Count(k.tokens == q.tokens) -> hist;\n"
                                "more: Count(k.hist > q.hist) -> more;\n"
                                "out: Map(more % 2 == 0 ? 'a' : 'b') -> out;\n"
                                "output out at every position;\n";

START_TEST(test_count_of_counts_proven_and_mutation_refused) {
    assert_proven_both(count2_src);
    TfModel *m = compile_text(count2_src, 0);
    int li = layer_named(m, "more.keys");
    ck_assert_msg(li >= 0, "no fresh one-hot of hist for the keys");
    // The unit that turns on the column of hist = 2 (the third it writes).
    TfTensor *T = &m->tensors[m->layers[li].fc2_weight];
    int F = m->layers[li].d_hidden, seen = 0, flipped = 0;
    for (int c = 0; c < m->d_model && !flipped; c++) {
        int u = 0;
        while (u < F && T->data[(size_t)c * F + u] <= 0) u++;
        if (u < F && seen++ == 2) T->data[(size_t)c * F + u] *= -1, flipped = 1;
    }
    ck_assert(flipped);
    assert_refused_and_free(m, 4);
}
END_TEST

/* Columns reused (compiler/schedule.c, step 4): a chain of Counts, each
 * read only by the next, so a later one takes a dead one's columns after
 * an MLP clears them. Proven, the clear seen as exactly 0; a clear unit's
 * weight halved (half the old value left under the new register's) is
 * refused; so is a clear whose pair is out of step (+1 then +1). */

/* The first unit of the first part of m named clear_*, and its layer. */
static int clear_unit(const TfModel *m, int *layer) {
    for (int l = 0; l < m->n_layers; l++)
        for (int p = 0; p < m->layers[l].n_parts; p++)
            if (strncmp(m->layers[l].parts[p].name, "clear_", 6) == 0) {
                *layer = l;
                return m->layers[l].parts[p].first;
            }
    return -1;
}

START_TEST(test_reused_columns_proven_and_bad_clear_refused) {
    TfModel *m = compile_text(TF_COUNT_CHAIN_SRC, 1);
    int l = -1, u = clear_unit(m, &l), reused = 0;
    ck_assert_int_ge(u, 0);
    for (int r = 0; r < m->n_regs; r++) reused += model_reg_reused(m, r);
    ck_assert_int_ge(reused, 2);
    TfProof P;
    TfError err = {""};
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_msg(P.verdict == TF_PROOF_PROVEN, "%s", P.reason);
    int said = 0;
    for (int i = 0; i < P.n_lines; i++) said |= strstr(P.lines[i], "cleared") != NULL;
    ck_assert(said);
    prove_free(&P);
    // The unit that adds -ReLU(x) to column c: halved.
    TfTensor *W2 = &m->tensors[m->layers[l].fc2_weight];
    int F = m->layers[l].d_hidden, c = 0;
    while (c < m->d_model && W2->data[(size_t)c * F + u] == 0) c++;
    ck_assert_int_lt(c, m->d_model);
    ck_assert(W2->data[(size_t)c * F + u] == -1.0f);
    W2->data[(size_t)c * F + u] = -0.5f;
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_msg(P.verdict == TF_PROOF_FAILED, "%d %s", P.verdict, P.reason);
    prove_free(&P);
    // Its partner reads -x; reading +x instead, the pair adds -2 ReLU(x).
    W2->data[(size_t)c * F + u] = -1.0f;
    TfTensor *W1 = &m->tensors[m->layers[l].fc1_weight];
    ck_assert(W1->data[(size_t)(u + 1) * m->d_model + c] == -1.0f);
    W1->data[(size_t)(u + 1) * m->d_model + c] = 1.0f;
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_msg(P.verdict == TF_PROOF_FAILED, "%d %s", P.verdict, P.reason);
    prove_free(&P);
    model_free(m);
}
END_TEST

/* Programs of seed ops scheduled (compiler/schedule.h, TF_SCHED_KEEP): tfc
 * keeps one layer per op where that is smaller, which it has been for every
 * such program so far, so the scheduled models are made here. The
 * validator takes them apart into one layer per op in the source's order
 * (compiler/prove_split.c). */
static TfModel *scheduled_seed(const char *src) {
    TfModel *m = compile_with_opts(src, (TfCompileOptions){.opt_level = 1, .no_schedule = 1});
    TfError err = {""};
    TfModel *s = schedule_model(m, TF_SCHED_KEEP, &err);
    ck_assert_msg(s != NULL, "%s", err.msg);
    ck_assert_int_lt(s->n_layers, m->n_layers);
    ck_assert_str_eq(s->source, m->source); // the program the validator reads
    model_free(m);
    return s;
}

static TfProof prove_or_die(const TfModel *m) {
    TfProof P;
    TfError err = {""};
    ck_assert_msg(prove_model(m, &P, &err) == 0, "%s", err.msg);
    return P;
}

static int proof_says(const TfProof *P, const char *text) {
    for (int i = 0; i < P->n_lines; i++)
        if (strstr(P->lines[i], text)) return 1;
    return strstr(P->reason, text) != NULL;
}

/* Layer li's part named name: its first head, or -1. */
static int part_head(const TfModel *m, int li, const char *name) {
    for (int k = 0; k < m->layers[li].n_parts; k++)
        if (strcmp(m->layers[li].parts[k].name, name) == 0) return m->layers[li].parts[k].first;
    return -1;
}

static const char *digit_sum_src = "vocab \"0123456789+=\";\nperiod 16;\n"
                                   "position plus_pos, eq_pos;\ntoken left, right, sum;\nscalar carry;\n"
                                   "find_plus: FindAndStore('+') -> plus_pos;\n"
                                   "find_eq: FindAndStore('=') -> eq_pos;\n"
                                   "read_left: GetRelativeToken(plus_pos - 1) -> left;\n"
                                   "read_right: GetRelativeToken(eq_pos - 1) -> right;\n"
                                   "add: Multiply(left, right, carry) -> sum;\n"
                                   "output sum;\ngenerate 1;\n";

START_TEST(test_scheduled_seed_ops_proven_and_mutations_refused) {
    TfModel *m = scheduled_seed(digit_sum_src);
    // Two FindAndStores side by side, then the two reads: 3 layers for 5 ops.
    ck_assert_int_eq(m->n_layers, 3);
    int reads = 1;
    ck_assert_int_eq(m->layers[0].n_parts, 2);
    ck_assert_int_eq(m->layers[reads].n_parts, 2);
    TfProof P = prove_or_die(m);
    ck_assert_msg(P.verdict == TF_PROOF_PROVEN, "%s", P.reason);
    ck_assert(proof_says(&P, "taken apart into the source's 5 ops"));
    ck_assert(proof_says(&P, "Multiply -> sum"));
    prove_free(&P);
    // Every sum a+b= as the model one layer per op gives it.
    TfModel *u = compile_with_opts(digit_sum_src, (TfCompileOptions){.opt_level = 1, .no_schedule = 1});
    TfError err = {""};
    TfInfer *a = infer_new(m, 1, &err), *b = infer_new(u, 1, &err);
    ck_assert(a && b);
    for (int x = 0; x < 100; x++) {
        char text[8];
        snprintf(text, sizeof text, "%d+%d=", x / 10, x % 10);
        int ids[8], oa[2], ob[2], len = (int)strlen(text);
        ck_assert_int_eq(infer_tokenize(m, text, len, ids, &err), len);
        const int *pr = ids;
        ck_assert_msg(infer_generate(a, &pr, &len, 1, 1, oa, &err) == 0, "%s", err.msg);
        ck_assert_msg(infer_generate(b, &pr, &len, 1, 1, ob, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(oa[0], ob[0]);
        ck_assert_int_eq(oa[0], (x / 10 + x % 10) % 10); // the digits are tokens 0..9
    }
    infer_free(a), infer_free(b);
    model_free(u);
    // read_right's query reads a column read_left writes in the same layer:
    // taken one after the other, it would see what read_left wrote.
    const TfLayer *ly = &m->layers[reads];
    int h = part_head(m, reads, "read_right"), left = m->regs[model_find_register(m, "left")].offset;
    ck_assert_int_ge(h, 0);
    float *wq = m->tensors[ly->query].data;
    size_t at = (size_t)h * (size_t)ly->d_head * (size_t)m->d_model + (size_t)left;
    float keep = wq[at];
    wq[at] = 1e-3f;
    P = prove_or_die(m);
    ck_assert_msg(P.verdict == TF_PROOF_UNPROVEN && strstr(P.reason, "one after the other"), "%d %s", P.verdict, P.reason);
    prove_free(&P);
    wq[at] = keep;
    // A part that says it is another op's line: read_right has no layer.
    int line = m->layers[reads].parts[1].line;
    m->layers[reads].parts[1].line = m->layers[reads].parts[0].line;
    P = prove_or_die(m);
    ck_assert_msg(P.verdict == TF_PROOF_UNPROVEN && strstr(P.reason, "has no layer or part of its own"), "%d %s", P.verdict, P.reason);
    prove_free(&P);
    m->layers[reads].parts[1].line = line;
    // read_left's head, taken apart from its layer, is checked as it is:
    // its values negated, it reads no digit.
    ck_assert(scale_op(m, "read_left", -1.0f));
    P = prove_or_die(m);
    ck_assert_msg(P.verdict == TF_PROOF_FAILED, "%d %s", P.verdict, P.reason);
    ck_assert_int_eq(P.fail_layer, reads); // the file's layer, not the op's
    prove_free(&P);
    model_free(m);
}
END_TEST

/* The adder scheduled: 23 layers for 36 ops, a round's CopyOnMatch beside
 * the next round's Clear, which writes what the CopyOnMatch reads. */
START_TEST(test_scheduled_adder_proven) {
    size_t len;
    char *src = tf_read_source("programs/adder.tfp", &len);
    ck_assert_ptr_nonnull(src);
    TfModel *m = scheduled_seed(src);
    free(src);
    int mixed = 0;
    for (int li = 0; li < m->n_layers; li++)
        if (m->layers[li].n_parts && m->layers[li].parts[0].line > m->layers[li].parts[m->layers[li].n_parts - 1].line)
            mixed = 1; // a later round's op beside an earlier round's
    ck_assert(mixed);
    TfProof P = prove_or_die(m);
    ck_assert_msg(P.verdict == TF_PROOF_PROVEN, "%s", P.reason);
    ck_assert(proof_says(&P, "taken apart into the source's 36 ops"));
    prove_free(&P);
    model_free(m);
}
END_TEST

/* An interval of a query or key component: within 2^+-20, narrow or a point. */
static TfIv score_iv(void) {
    double a = ldexp(rnd() - 0.5, (int)(rnd() * 40) - 20), w = rnd() < 0.3 ? 0 : fabs(a) * rnd() * 1e-2;
    return (TfIv){a, a + w};
}

/* The scores' midpoint-radius pass against its naive twin: both enclose
 * q.k * scale at random points of the intervals (in long double), and the
 * pass is at most 1.5 times as wide as the twin (plus the float32 slack). */
START_TEST(test_scores_twin) {
    int checked = 0;
    for (int t = 0; t < 2000; t++) {
        int D = 1 + (int)(rnd() * 40);
        TfIv q[TF_PV_TWIN_MAX], k[TF_PV_TWIN_MAX], naive, fast;
        for (int j = 0; j < D; j++) q[j] = score_iv(), k[j] = score_iv();
        float scale = (float)(0.1 + 50 * rnd());
        pv_score_twins(D, scale, q, k, &naive, &fast);
        for (int p = 0; p < 20; p++) {
            long double s = 0;
            for (int j = 0; j < D; j++) {
                long double a = q[j].lo + (long double)rnd() * (q[j].hi - q[j].lo);
                long double b = k[j].lo + (long double)rnd() * (k[j].hi - k[j].lo);
                if (a > q[j].hi) a = q[j].hi;
                if (b > k[j].hi) b = k[j].hi;
                s += a * b;
            }
            s *= scale;
            ck_assert_msg(encloses(fast, s, s) && encloses(naive, s, s), "D %d: %.17Lg not in [%.17g, %.17g]", D, s, fast.lo, fast.hi);
            checked++;
        }
        double wn = naive.hi - naive.lo, wf = fast.hi - fast.lo, mag = iv_mag(naive);
        ck_assert_msg(wf <= 1.5 * wn + 1e-6 * mag + 1e-300, "D %d: width %g against the twin's %g", D, wf, wn);
    }
    ck_assert_int_gt(checked, 0);
}
END_TEST

/* sort_case (programs/) in small: an MLP part over three base variables
 * (place) and a bidirectional Aggregate whose key classes stand for every
 * index. */
static const char *sort_small_src =
    "vocab \"^ABCabc\"; bos '^'; maxlen 9;\n"
    "cat same, nup, place, sorted;\n"
    "same:   Count((k.tokens < 'a') == (q.tokens < 'a'), causal) -> same;\n"
    "nup:    Count(k.tokens < 'a') -> nup;\n"
    "place:  Map(tokens < 'a' ? same : nup + same) -> place;\n"
    "sorted: Aggregate(k.place == q.indices, tokens) -> sorted;\n"
    "output sorted at every position;\n";

/* dyck2 (programs/) in small: the Count `failed` reads `bad`, a function of
 * five base variables, and the index apart (key classes from groups of
 * factors). */
static const char *dyck_small_src =
    "vocab \"^(){}PTF\"; bos '^'; maxlen 7;\n"
    "cat opens, closes, depth, okey, ckey, nopen, nclose, same, bad, failed, out;\n"
    "opens:  Count(k.tokens == '(' or k.tokens == '{', causal) -> opens;\n"
    "closes: Count(k.tokens == ')' or k.tokens == '}', causal) -> closes;\n"
    "depth:  Map(max(opens - closes, -1)) -> depth;\n"
    "okey:   Map(depth < 1 ? -1 : (tokens == '(' ? 4 * (depth - 1) + 1 :\n"
    "                              (tokens == '{' ? 4 * (depth - 1) + 2 : -1))) -> okey;\n"
    "ckey:   Map(tokens == ')' ? (depth < 0 ? -2 : 4 * depth + 1) :\n"
    "            (tokens == '}' ? (depth < 0 ? -2 : 4 * depth + 2) : -3)) -> ckey;\n"
    "nopen:  Count(k.okey == q.ckey, causal) -> nopen;\n"
    "nclose: Count(k.ckey == q.ckey, causal) -> nclose;\n"
    "same:   Map(nopen == nclose) -> same;\n"
    "bad:    Map(ckey == -2 or (ckey >= 0 and same == 0)) -> bad;\n"
    "failed: Count(k.bad == 1, causal) -> failed;\n"
    "out:    Map(failed > 0 ? 'F' : (depth == 0 ? 'T' : 'P')) -> out;\n"
    "output out at every position;\n";

/* The fast paths (MLP parts by branch and bound over the base variables,
 * key classes from groups of factors and for every index) against their
 * naive twins (every unit at every combination, every combination of the
 * key's base variables at once): the same verdict, report and residual
 * stream, bit for bit; on two threads, the same report. Also a copy of
 * each with one weight changed. */
static void same_as_twin(const TfModel *m, const char *what) {
    TfProof Pf, Pn;
    TfError err;
    uint64_t hf, hn;
    ck_assert_int_eq(pv_prove_twin(m, 0, &Pf, &hf, &err), 0);
    ck_assert_int_eq(pv_prove_twin(m, 1, &Pn, &hn, &err), 0);
    ck_assert_msg(Pf.verdict == Pn.verdict, "%s: %d (%s) against the twin's %d (%s)", what, Pf.verdict, Pf.reason,
                  Pn.verdict, Pn.reason);
    ck_assert_str_eq(Pf.reason, Pn.reason);
    ck_assert_int_eq(Pf.n_lines, Pn.n_lines);
    for (int i = 0; i < Pf.n_lines; i++) ck_assert_str_eq(Pf.lines[i], Pn.lines[i]);
    ck_assert_msg(hf == hn, "%s: the residual stream differs from the twin's", what);
    // And on two threads: the same report.
    TfProof P2;
    ck_assert_int_eq(prove_model_threads(m, 2, &P2, &err), 0);
    ck_assert_int_eq(P2.verdict, Pf.verdict);
    ck_assert_int_eq(P2.n_lines, Pf.n_lines);
    for (int i = 0; i < Pf.n_lines; i++) ck_assert_str_eq(P2.lines[i], Pf.lines[i]);
    prove_free(&P2);
    prove_free(&Pf);
    prove_free(&Pn);
}

START_TEST(test_fast_paths_twin) {
    const char *dir = tf_env_path("TF_SOURCE_DIR");
    const char *lib[] = {"reverse", "sort", "histogram", "dyck1", "frac_prevs_mean", "double_histogram", "words",
                         "balance", "length", "pattern"};
    int checked = 0;
    for (size_t i = 0; i < sizeof lib / sizeof *lib; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/programs/%s.tfp", dir, lib[i]);
        size_t len;
        char *src = tf_read_file(path, &len);
        ck_assert_msg(src != NULL, "%s", path);
        TfModel *m = compile_text(src, 1);
        same_as_twin(m, lib[i]);
        model_free(m);
        free(src);
        checked++;
    }
    const char *small[] = {sort_small_src, dyck_small_src};
    for (int i = 0; i < 2; i++)
        for (int opt = 0; opt <= 1; opt++) {
            TfModel *m = compile_text(small[i], opt);
            same_as_twin(m, i ? "dyck, small" : "sort_case, small");
            model_free(m);
            checked++;
        }
    ck_assert_int_eq(checked, 14);
}
END_TEST

/* A weight changed where the fast paths run is refused with a failing case,
 * as the twins refuse it: place's fc2 (a unit pair's output), and the key
 * weight of `failed` that reads bad == 1, negated. */
START_TEST(test_fast_paths_refuse_changed_weight) {
    TfModel *m = compile_without_angles(sort_small_src);
    int li = layer_named(m, "place");
    ck_assert_int_ge(li, 0);
    const TfLayer *ly = &m->layers[li];
    // Unit 4: the first unit of the pair for an upper-case letter with
    // same = 1 (place 1, as on ^A), its one output weight (+1) negated.
    float *w2 = m->tensors[ly->fc2_weight].data;
    int changed = 0;
    for (int c = 0; c < m->d_model; c++)
        if (w2[(size_t)c * ly->d_hidden + 4] > 0) w2[(size_t)c * ly->d_hidden + 4] *= -1, changed++;
    ck_assert_int_eq(changed, 1);
    TfProof P;
    TfError err;
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_msg(P.verdict == TF_PROOF_FAILED, "place: %s", P.reason);
    ck_assert_int_gt(P.n_assign, 0);
    ck_assert_ptr_nonnull(strstr(P.reason, "place"));
    prove_free(&P);
    same_as_twin(m, "sort_case, small, changed");
    model_free(m);

    m = compile_one_hot(dyck_small_src);
    li = layer_named(m, "failed.attn");
    ck_assert_int_ge(li, 0);
    ly = &m->layers[li];
    int col = value_col(m, "bad", "1");
    ck_assert_int_ge(col, 0);
    float *wk = m->tensors[ly->key].data;
    changed = 0;
    for (int j = 0; j < ly->n_heads * ly->d_head; j++)
        if (wk[(size_t)j * m->d_model + col] != 0) wk[(size_t)j * m->d_model + col] *= -1, changed++;
    ck_assert_int_eq(changed, 1);
    ck_assert_int_eq(prove_model(m, &P, &err), 0);
    ck_assert_msg(P.verdict == TF_PROOF_FAILED, "failed: %s", P.reason);
    ck_assert_ptr_nonnull(strstr(P.reason, "failed"));
    prove_free(&P);
    same_as_twin(m, "dyck, small, changed");
    model_free(m);
}
END_TEST

/* The proof on one thread and on two is the same, report included, and
 * two did run (one query group per token value: twelve to share). */
START_TEST(test_threads_same_proof) {
    const char *src = "vocab \"^ab0123456789\"; bos '^'; maxlen 9;\n"
                      "cat c;\n"
                      "c: Count(k.tokens == q.tokens) -> c;\n"
                      "output c at every position;\n";
    TfModel *m = compile_text(src, 1);
    TfProof P1, P2;
    TfError err;
    ck_assert_int_eq(prove_model_threads(m, 1, &P1, &err), 0);
    ck_assert_int_eq(prove_model_threads(m, 2, &P2, &err), 0);
    ck_assert_msg(P1.verdict == TF_PROOF_PROVEN, "%s", P1.reason);
    ck_assert_int_eq(P2.verdict, P1.verdict);
    ck_assert_int_eq(P1.threads_run, 1);
    ck_assert_int_eq(P2.threads_run, 2);
    ck_assert_int_eq(P2.n_lines, P1.n_lines);
    for (int i = 0; i < P1.n_lines; i++) ck_assert_str_eq(P2.lines[i], P1.lines[i]);
    prove_free(&P1);
    prove_free(&P2);
    model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("prove");
    TCase *tc = tcase_create("prove");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_interval_encloses);
#if defined(__SSE2__)
    tcase_add_test(tc, test_interval_encloses_flushed);
#endif
    tcase_add_test(tc, test_gamma_bounds_float_sums);
    tcase_add_test(tc, test_sum_err_bounds_float_sums);
    tcase_add_test(tc, test_compiled_program_proven);
    tcase_add_test(tc, test_changed_weight_fails);
    tcase_add_test(tc, test_gated_maps_proven);
    tcase_add_test(tc, test_sum_proven_and_mutations_refused);
    tcase_add_test(tc, test_rank3_copy_proven_and_mutation_refused);
    tcase_add_test(tc, test_unread_values_proven_and_relabel_refused);
    tcase_add_test(tc, test_offset_staircase_proven);
    tcase_add_test(tc, test_angles_proven_same_outputs_and_mutation_refused);
    tcase_add_test(tc, test_numeric_copy_proven_tight_and_mutation_refused);
    tcase_add_test(tc, test_split_map_proven_and_mutation_refused);
    tcase_add_test(tc, test_numbers_held_proven_and_unsafe_refused);
    tcase_add_test(tc, test_count_of_counts_proven_and_mutation_refused);
    tcase_add_test(tc, test_reused_columns_proven_and_bad_clear_refused);
    tcase_add_test(tc, test_scheduled_seed_ops_proven_and_mutations_refused);
    tcase_add_test(tc, test_scheduled_adder_proven);
    tcase_add_test(tc, test_threads_same_proof);
    tcase_add_test(tc, test_scores_twin);
    tcase_add_test(tc, test_fast_paths_twin);
    tcase_add_test(tc, test_fast_paths_refuse_changed_weight);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
