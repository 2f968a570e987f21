/* test_schedule.c: ops side by side (compiler/schedule.c) and MLP fusion
 * (compiler/fuse.c).
 *
 * Each program is compiled twice, scheduled (-O) and with one layer per op
 * (TfCompileOptions.no_schedule), and both must give the same output at
 * every position of every input up to a length; the scheduled model's
 * layers, heads, parts, registers and checks are checked as well.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "infer.h"
#include "model.h"
#include "schedule.h"
#include "testutil.h"

static TfModel *compile_with(const char *src, const TfCompileOptions *opts) {
    char out[8192] = "";
    FILE *f = fmemopen(out, sizeof out - 1, "w");
    int n_errors;
    TfError err = {""};
    TfModel *m = compile_source_opts("t.tfp", src, strlen(src), opts, f, &n_errors, &err);
    fclose(f);
    ck_assert_msg(m != NULL, "%s%s", out, err.msg);
    return m;
}

static TfModel *compile_text(const char *src, int no_schedule) {
    TfCompileOptions opts = {.opt_level = 1, .max_params = 0, .no_schedule = no_schedule};
    return compile_with(src, &opts);
}

/* Every input "^" + up to max_n tokens of `alphabet`: the outputs of a and
 * b at every position agree. Returns how many inputs were compared. */
static int same_outputs(const TfModel *a, const TfModel *b, const char *alphabet, int max_n) {
    TfError err = {""};
    TfInfer *ia = infer_new(a, 1, &err), *ib = infer_new(b, 1, &err);
    ck_assert_msg(ia && ib, "%s", err.msg);
    int k = (int)strlen(alphabet), n_inputs = 0;
    int ids[32], oa[32], ob[32];
    for (int n = 1; n <= max_n; n++) {
        long total = 1;
        for (int i = 0; i < n; i++) total *= k;
        for (long c = 0; c < total; c++) {
            char text[33] = "^";
            long x = c;
            for (int i = 0; i < n; i++, x /= k) text[1 + i] = alphabet[x % k];
            text[n + 1] = '\0';
            int len = n + 1;
            ck_assert_int_eq(infer_tokenize(a, text, len, ids, &err), len);
            const int *seq = ids;
            int *pa = oa, *pb = ob;
            ck_assert_msg(infer_every_position(ia, &seq, &len, 1, &pa, &err) == 0, "%s", err.msg);
            ck_assert_msg(infer_every_position(ib, &seq, &len, 1, &pb, &err) == 0, "%s", err.msg);
            for (int p = 1; p < len; p++)
                ck_assert_msg(oa[p] == ob[p], "%s at %d: %c, unscheduled %c", text, p,
                              a->vocab[oa[p]], b->vocab[ob[p]]);
            n_inputs++;
        }
    }
    infer_free(ia), infer_free(ib);
    return n_inputs;
}

static int n_kind(const TfModel *m, TfLayerKind kind) {
    int n = 0;
    for (int l = 0; l < m->n_layers; l++) n += m->layers[l].kind == kind;
    return n;
}

/* Four Counts that read only the tokens: one attention layer of four
 * heads, each head named after its op; the Map that combines them reads
 * the Counts' fractions directly (fused with their steps). */
START_TEST(test_independent_counts_are_heads) {
    const char *src = "vocab \"^abcd01234\"; bos '^'; maxlen 5;\n"
                      "cat na, nb, nc, nd, out;\n"
                      "na: Count(k.tokens == 'a') -> na;\n"
                      "nb: Count(k.tokens == 'b') -> nb;\n"
                      "nc: Count(k.tokens == 'c') -> nc;\n"
                      "nd: Count(k.tokens == 'd') -> nd;\n"
                      "out: Map(na > nb ? (nc > nd ? '1' : '2') : (nc > nd ? '3' : '4')) -> out;\n"
                      "output out at every position;\n";
    TfModel *s = compile_text(src, 0), *u = compile_text(src, 1);
    ck_assert_int_eq(n_kind(u, TF_LAYER_ATTENTION), 4);
    ck_assert_int_eq(n_kind(s, TF_LAYER_ATTENTION), 1);
    ck_assert_int_eq(s->layers[0].kind, TF_LAYER_ATTENTION);
    ck_assert_int_eq(s->layers[0].n_heads, 4);
    ck_assert_int_eq(s->layers[0].n_parts, 4);
    const char *names[] = {"na.attn", "nb.attn", "nc.attn", "nd.attn"};
    for (int h = 0; h < 4; h++) {
        ck_assert_str_eq(s->layers[0].parts[h].name, names[h]);
        ck_assert_str_eq(s->layers[0].parts[h].op, "Count");
        ck_assert_int_eq(s->layers[0].parts[h].first, h);
        ck_assert_int_eq(s->layers[0].parts[h].count, 1);
        ck_assert_int_eq(s->layers[0].parts[h].line, 3 + h);
    }
    ck_assert_int_le(s->n_layers, 3);
    ck_assert_int_lt(s->d_model, u->d_model);
    ck_assert_int_eq(same_outputs(s, u, "abcd", 4), 4 + 16 + 64 + 256);
    model_free(s), model_free(u);
}
END_TEST

/* Heads of alike sizes (compiler/schedule.c, head_groups): two Counts of 3
 * query rows and one whose selection compares the position (a row per
 * value of indices) are independent, but padding the narrow heads to the
 * wide one costs more than a second layer: the narrow ones share a layer,
 * the wide one follows; the model is smaller than one layer of three heads
 * would be, and its outputs are the unscheduled model's on every input. */
START_TEST(test_heads_of_alike_sizes) {
    const char *src = "vocab \"^abcd01234\"; bos '^'; maxlen 9;\n"
                      "cat na, nb, m, out;\n"
                      "na: Count(k.tokens == 'a') -> na;\n"
                      "nb: Count(k.tokens == 'b') -> nb;\n"
                      "m: Count(k.tokens == 'c' and k.indices < q.indices) -> m;\n"
                      "out: Map((na + nb + m) % 5) -> out;\n"
                      "output out at every position;\n";
    TfModel *s = compile_text(src, 0), *u = compile_text(src, 1);
    int narrow = -1, wide = -1;
    for (int l = 0; l < s->n_layers; l++) {
        const TfLayer *ly = &s->layers[l];
        if (ly->kind != TF_LAYER_ATTENTION) continue;
        if (ly->n_heads == 2) narrow = l;
        if (ly->n_heads == 1 && strcmp(ly->name, "m.attn") == 0) wide = l;
    }
    ck_assert_msg(narrow >= 0 && wide == narrow + 1, "narrow layer %d, wide layer %d", narrow, wide);
    ck_assert_int_lt(s->layers[narrow].d_head, s->layers[wide].d_head);
    // Query, key, value and output rows: the two layers against one of
    // three heads padded to the wide one.
    const TfLayer *n = &s->layers[narrow], *w = &s->layers[wide];
    long apart = 2L * (2 * n->d_head + 2 * n->d_vhead) + (2 * w->d_head + 2 * w->d_vhead);
    long padded = 3L * (2 * w->d_head + 2 * (w->d_vhead > n->d_vhead ? w->d_vhead : n->d_vhead));
    ck_assert_int_lt(apart, padded);
    ck_assert_int_eq(same_outputs(s, u, "abcd", 5), 4 + 16 + 64 + 256 + 1024);
    model_free(s), model_free(u);
}
END_TEST

/* A value nothing reads has no column (compiler/schedule.c, find_dead): n
 * counts the a's so far (0..8), but the one selection that reads it asks
 * only for the first or the second a, so n keeps the columns of 1 and 2,
 * and its staircase only the units that write them. */
static const char *unread_src = "vocab \"^ab_\"; bos '^'; maxlen 9;\n"
                                "cat n, w, out;\n"
                                "n: Count(k.tokens == 'a', causal) -> n;\n"
                                "w: Map([tokens: 'a' => 1, _ => 2]) -> w;\n"
                                "out: Aggregate(k.n == q.w and k.tokens == 'a', tokens, default: '_') -> out;\n"
                                "output out at every position;\n";

START_TEST(test_unread_values_lose_columns) {
    TfModel *s = compile_text(unread_src, 0), *u = compile_text(unread_src, 1);
    int rs = model_find_register(s, "n"), ru = model_find_register(u, "n");
    ck_assert_int_ge(rs, 0);
    ck_assert_int_ge(ru, 0);
    ck_assert_int_eq(u->regs[ru].size, 9);
    ck_assert_int_eq(s->regs[rs].size, 2);
    ck_assert_str_eq(s->regs[rs].values[0], "1");
    ck_assert_str_eq(s->regs[rs].values[1], "2");
    int units_s = 0, units_u = 0;
    for (int l = 0; l < s->n_layers; l++)
        if (s->layers[l].kind == TF_LAYER_MLP) units_s += s->layers[l].d_hidden;
    for (int l = 0; l < u->n_layers; l++)
        if (strcmp(u->layers[l].name, "n.steps") == 0) units_u = u->layers[l].d_hidden;
    ck_assert_int_gt(units_u, 0);
    ck_assert_int_lt(units_s, units_u / 2);
    ck_assert_int_eq(same_outputs(s, u, "ab_", 7), 3 + 9 + 27 + 81 + 243 + 729 + 2187);
    model_free(s), model_free(u);
}
END_TEST

/* The token columns nothing reads go too: counting the a's reads the
 * columns of '^' and 'a' only, so `tokens` becomes a categorical register
 * of those two (labelled as the compiler labels tokens), 3 columns fewer. */
START_TEST(test_unread_tokens_lose_columns) {
    const char *src = "vocab \"^abc0123\"; bos '^'; maxlen 4;\n"
                      "cat n, out;\n"
                      "n: Count(k.tokens == 'a') -> n;\n"
                      "out: Map(chr(ord('0') + n)) -> out;\n"
                      "output out at every position;\n";
    TfModel *s = compile_text(src, 0), *u = compile_text(src, 1);
    int ts = model_find_register(s, "tokens"), tu = model_find_register(u, "tokens");
    ck_assert_int_eq(u->regs[tu].kind, TF_REG_TOKEN);
    ck_assert_int_eq(u->regs[tu].size, 8);
    ck_assert_int_eq(s->regs[ts].kind, TF_REG_CATEGORICAL);
    ck_assert_int_eq(s->regs[ts].size, 2);
    ck_assert_str_eq(s->regs[ts].values[0], "'^'");
    ck_assert_str_eq(s->regs[ts].values[1], "'a'");
    ck_assert_int_eq(same_outputs(s, u, "abc0", 3), 4 + 16 + 64);
    model_free(s), model_free(u);
}
END_TEST

/* A copy's value channels follow its values: c copies the previous token,
 * but only `k.c == 'a'` reads it, so c keeps the column of 'a' and the
 * copy's head one value channel of two (compiler/schedule.c,
 * channel_live). */
START_TEST(test_unread_values_lose_value_channels) {
    const char *src = "vocab \"^ab\"; bos '^'; maxlen 6;\n"
                      "cat p, c, n, out;\n"
                      "p: Map(indices - 1) -> p;\n"
                      "c: Aggregate(k.indices == q.p, tokens) -> c;\n"
                      "n: Count(k.c == 'a') -> n;\n"
                      "out: Map(n % 2 == 0 ? 'a' : 'b') -> out;\n"
                      "output out at every position;\n";
    TfModel *s = compile_text(src, 0), *u = compile_text(src, 1);
    int cs = model_find_register(s, "c"), cu = model_find_register(u, "c");
    ck_assert_int_eq(u->regs[cu].size, 2);
    ck_assert_int_eq(s->regs[cs].size, 1);
    ck_assert_str_eq(s->regs[cs].values[0], "'a'");
    int vs = -1, vu = -1;
    for (int l = 0; l < s->n_layers; l++)
        if (strcmp(s->layers[l].name, "c") == 0) vs = s->layers[l].d_vhead;
    for (int l = 0; l < u->n_layers; l++)
        if (strcmp(u->layers[l].name, "c") == 0) vu = u->layers[l].d_vhead;
    ck_assert_int_eq(vu, 2);
    ck_assert_int_eq(vs, 1);
    ck_assert_int_eq(same_outputs(s, u, "ab", 5), 2 + 4 + 8 + 16 + 32);
    model_free(s), model_free(u);
}
END_TEST

/* A query value that picks no key has no row in the head (compiler/
 * lower_general.c, row_live): p = indices - 3 takes -3..4, and for -3..0
 * `k.indices <= q.p` picks no key (positions start at 1), so the Count's
 * head has 4 rows fewer than with every row (TfCompileOptions.all_rows),
 * with the same outputs on every input. */
START_TEST(test_dead_rows_left_out) {
    const char *src = "vocab \"^ab\"; bos '^'; maxlen 8;\n"
                      "cat p, n, out;\n"
                      "p: Map(indices - 3) -> p;\n"
                      "n: Count(k.tokens == 'a' and k.indices <= q.p) -> n;\n"
                      "out: Map(n > 1 ? 'b' : 'a') -> out;\n"
                      "output out at every position;\n";
    TfModel *s = compile_text(src, 0);
    TfCompileOptions all = {.opt_level = 1, .all_rows = 1, .rows_settled = 1};
    TfModel *a = compile_with(src, &all);
    int ds = -1, da = -1;
    for (int l = 0; l < s->n_layers; l++)
        if (s->layers[l].kind == TF_LAYER_ATTENTION) ds = s->layers[l].d_head;
    for (int l = 0; l < a->n_layers; l++)
        if (a->layers[l].kind == TF_LAYER_ATTENTION) da = a->layers[l].d_head;
    ck_assert_int_eq(da - ds, 4);
    ck_assert_ptr_null(strstr(s->made_by, "all_rows"));
    ck_assert_ptr_nonnull(strstr(a->made_by, "\"all_rows\":true"));
    ck_assert_int_lt(model_param_count(s), model_param_count(a));
    ck_assert_int_eq(same_outputs(s, a, "ab", 7), 2 + 4 + 8 + 16 + 32 + 64 + 128);
    model_free(s), model_free(a);
}
END_TEST

/* histogram: Count then a Map of its result: one attention layer and one
 * MLP; the count's own register is gone (nothing reads it), the output stays. */
START_TEST(test_count_fuses_with_its_map) {
    const char *src = "vocab \"^abcd0123456789\"; bos '^'; maxlen 8;\n"
                      "cat hist, out;\n"
                      "hist: Count(k.tokens == q.tokens) -> hist;\n"
                      "out:  Map(chr(ord('0') + hist)) -> out;\n"
                      "output out at every position;\n";
    TfModel *s = compile_text(src, 0), *u = compile_text(src, 1);
    ck_assert_int_eq(u->n_layers, 3);
    ck_assert_int_eq(s->n_layers, 2);
    ck_assert_int_eq(s->layers[0].kind, TF_LAYER_ATTENTION);
    ck_assert_int_eq(s->layers[1].kind, TF_LAYER_MLP);
    ck_assert_int_eq(model_find_register(s, "hist"), -1);
    ck_assert_int_ge(model_find_register(u, "hist"), 0);
    ck_assert_int_ge(s->output_reg, 0);
    ck_assert_str_eq(s->regs[s->output_reg].name, "out");
    // Registers stay contiguous from column 0 and fill d_model.
    int end = 0;
    for (int r = 0; r < s->n_regs; r++) {
        ck_assert_int_eq(s->regs[r].offset, end);
        end += s->regs[r].size;
    }
    ck_assert_int_eq(end, s->d_model);
    ck_assert_int_gt(same_outputs(s, u, "abcd", 5), 1000);
    model_free(s), model_free(u);
}
END_TEST

/* A chain of Counts, each read only by the next: a later register takes
 * the columns of one nothing reads any more (step 4). Registers that share
 * a column have live ranges that do not meet, the first ending in the
 * state the clear reads, the second starting in the one it writes; the
 * clear is an MLP part "clear_<name>" of ReLU pairs on those columns; the
 * model is narrower than its registers side by side and computes what the
 * unscheduled one does. */
START_TEST(test_dead_columns_reused) {
    TfModel *s = compile_text(TF_COUNT_CHAIN_SRC, 0), *u = compile_text(TF_COUNT_CHAIN_SRC, 1);
    int side_by_side = 0, shared = 0;
    for (int r = 0; r < s->n_regs; r++) side_by_side += s->regs[r].size;
    ck_assert_int_lt(s->d_model, side_by_side);
    for (int r = 0; r < s->n_regs; r++)
        for (int q = 0; q < s->n_regs; q++) {
            const TfRegister *x = &s->regs[r], *y = &s->regs[q];
            if (r == q || x->offset >= y->offset + y->size || y->offset >= x->offset + x->size)
                continue;
            if (x->live_from > y->live_from) continue; // each pair once, x first
            shared++;
            ck_assert_int_lt(x->live_to, y->live_from);
        }
    ck_assert_int_ge(shared, 1);
    // A register that ends before the last state: the layer after its last
    // state clears its columns.
    int ends = 0;
    for (int r = 0; r < s->n_regs; r++) {
        const TfRegister *x = &s->regs[r];
        if (x->live_to >= s->n_layers) continue;
        ends++;
        int l = x->live_to; // the clear: layer l reads state l, writes state l + 1
        const TfLayer *ly = &s->layers[l];
        ck_assert_int_eq(ly->kind, TF_LAYER_MLP);
        char want[64];
        snprintf(want, sizeof want, "clear_%s", x->name);
        int part = -1;
        for (int p = 0; p < ly->n_parts; p++)
            if (strcmp(ly->parts[p].name, want) == 0) part = p;
        ck_assert_msg(part >= 0, "layer %d has no part %s", l, want);
        ck_assert_str_eq(ly->parts[part].op, "Clear");
        ck_assert_int_eq(ly->parts[part].count % 2, 0);
        // Each pair: ReLU(x_c) and ReLU(-x_c), written back as -1 and +1,
        // on a column of the register.
        const float *w1 = s->tensors[ly->fc1_weight].data, *w2 = s->tensors[ly->fc2_weight].data;
        int F = ly->d_hidden, d = s->d_model;
        for (int k = ly->parts[part].first; k < ly->parts[part].first + ly->parts[part].count;
             k += 2) {
            int c = 0;
            while (c < d && w1[(size_t)k * d + c] == 0) c++;
            ck_assert_int_lt(c, d);
            ck_assert(c >= x->offset && c < x->offset + x->size);
            ck_assert(w1[(size_t)k * d + c] == 1.0f && w1[(size_t)(k + 1) * d + c] == -1.0f);
            ck_assert(w2[(size_t)c * F + k] == -1.0f && w2[(size_t)c * F + k + 1] == 1.0f);
        }
    }
    ck_assert_int_ge(ends, 1);
    ck_assert_int_gt(same_outputs(s, u, "abcd", 6), 5000);
    model_free(s), model_free(u);
}
END_TEST

/* A generating program whose registers share columns (add_binary, at -O):
 * the same sums as with every register's columns its own (tfc --no-reuse),
 * and about the same arithmetic per sum (the clears' units and the wider
 * dense blocks they make: 17 % more). Keys that read only the position
 * embedding's columns are computed once per position where no layer
 * *before* theirs writes those columns (runtime/engine/infer.c,
 * plan_static_keys, plan_sharing): `indices` is cleared for the carry after
 * its last reader, and its readers' keys stay static (not so: twice the
 * FLOP). */
START_TEST(test_reused_columns_keep_static_keys) {
    size_t len;
    char *src = tf_read_source("programs/add_binary.tfp", &len);
    TfCompileOptions o = {.opt_level = 1};
    TfModel *m[2];
    m[0] = compile_with(src, &o);
    o.no_reuse = 1;
    m[1] = compile_with(src, &o);
    free(src);
    int reused = 0;
    for (int r = 0; r < m[0]->n_regs; r++) reused += model_reg_reused(m[0], r);
    ck_assert_int_gt(reused, 0);
    for (int r = 0; r < m[1]->n_regs; r++) ck_assert(!model_reg_reused(m[1], r));
    ck_assert_int_lt(m[0]->d_model, m[1]->d_model);
    enum { N = 64 };
    int ids[N][32], lens[N], got[2][N * 9];
    const int *idp[N];
    double flops[2];
    unsigned seed = 5;
    for (int s = 0; s < N; s++) {
        char text[32] = "^";
        for (int i = 1; i <= 17; i++) text[i] = i == 9 ? '+' : "01"[rand_r(&seed) % 2];
        text[18] = '=';
        TfError err = {""};
        lens[s] = 19;
        ck_assert_int_eq(infer_tokenize(m[0], text, 19, ids[s], &err), 19);
        idp[s] = ids[s];
    }
    for (int k = 0; k < 2; k++) {
        TfError err = {""};
        TfInfer *inf = infer_new(m[k], N, &err);
        ck_assert_msg(inf != NULL, "%s", err.msg);
        ck_assert_msg(infer_generate(inf, idp, lens, N, 9, got[k], &err) == 0, "%s", err.msg);
        flops[k] = infer_flops(inf);
        infer_free(inf);
    }
    ck_assert_mem_eq(got[0], got[1], sizeof got[0]);
    ck_assert_msg(flops[0] < 1.3 * flops[1], "reused %.0f FLOP, unreused %.0f", flops[0], flops[1]);
    model_free(m[0]), model_free(m[1]);
}
END_TEST

/* A Map of a Map of the tokens: one table of the tokens, which the token
 * embedding holds (compiler/lower.c, fold_table): no layer at all. */
START_TEST(test_maps_compose) {
    const char *src = "vocab \"^abcdxy\"; bos '^'; maxlen 6;\n"
                      "cat v, w;\n"
                      "v: Map(tokens == 'a' ? 1 : (tokens == 'b' ? 2 : 3)) -> v;\n"
                      "w: Map(v == 1 ? 'x' : 'y') -> w;\n"
                      "output w at every position;\n";
    TfModel *s = compile_text(src, 0), *u = compile_text(src, 1);
    ck_assert_int_eq(u->n_layers, 2);
    ck_assert_int_eq(s->n_layers, 0);
    ck_assert_int_ge(model_find_register(s, "w"), 0);
    ck_assert_int_gt(same_outputs(s, u, "abcd", 5), 1000);
    model_free(s), model_free(u);
}
END_TEST

/* A copy from one position (programs/shift.tfp: k.indices == q.src, src a
 * Map of indices) compares by rank 3 scheduled (lower_general.c,
 * rank3_term): 3 query rows and the BOS's 2, where one row per query value
 * makes 17 + 2; the same outputs on every input. */
static const char *shift_src = "vocab \"^abc_\"; bos '^'; maxlen 9;\n"
                               "cat src, out;\n"
                               "src: Map(indices - 2) -> src;\n"
                               "out: Aggregate(k.indices == q.src, tokens, default: '_') -> out;\n"
                               "output out at every position;\n";

START_TEST(test_copy_rank3) {
    TfModel *s = compile_text(shift_src, 0), *u = compile_text(shift_src, 1);
    ck_assert_int_eq(s->n_layers, 1);
    ck_assert_int_eq(s->layers[0].d_head, 5);
    ck_assert_int_gt(u->layers[u->n_layers - 1].d_head, 9);
    ck_assert_int_eq(same_outputs(s, u, "abc_", 8), 87380);
    model_free(s), model_free(u);
}
END_TEST

/* A staircase over a LINEAR Map's result is a staircase over its sum
 * (pair_balance): the two Maps after the Aggregates are one MLP; the two
 * Maps of the tokens before them are in the token embedding. */
START_TEST(test_linear_then_staircase) {
    const char *src = "vocab \"^()+-0\"; bos '^'; maxlen 7;\n"
                      "num is_open, is_close, opens, closes, bal;\ncat out;\n"
                      "is_open:  Map(tokens == '(') -> is_open;\n"
                      "is_close: Map(tokens == ')') -> is_close;\n"
                      "opens:    Aggregate(k.indices <= q.indices, is_open, causal) -> opens;\n"
                      "closes:   Aggregate(k.indices <= q.indices, is_close, causal) -> closes;\n"
                      "bal:      Map(opens - closes) -> bal;\n"
                      "out:      Map(bal < 0 ? '-' : bal > 0 ? '+' : '0') -> out;\n"
                      "output out at every position;\n";
    TfModel *s = compile_text(src, 0), *u = compile_text(src, 1);
    ck_assert_int_eq(u->n_layers, 6);
    ck_assert_int_eq(s->n_layers, 2);
    ck_assert_int_eq(s->layers[0].kind, TF_LAYER_ATTENTION);
    ck_assert_int_eq(model_find_register(s, "bal"), -1);
    // Under the causal mask k.indices <= q.indices holds for every key: the
    // selections no longer read the positions, so they are gone.
    ck_assert_int_eq(model_find_register(s, "indices"), -1);
    ck_assert_int_ge(model_find_register(u, "indices"), 0);
    ck_assert_int_eq(same_outputs(s, u, "()", 6), 126);
    model_free(s), model_free(u);
}
END_TEST

/* A selection reads through a Map of one register (detect_pattern's
 * p1 = indices - 1), and a Map of two Counts that depends on the
 * difference of their fractions is one staircase over it (shuffle_dyck's
 * balance): neither p1 nor the counts need columns. */
START_TEST(test_selection_sides_and_count_pairs) {
    const char *src = "vocab \"^abc01\"; bos '^'; maxlen 7;\n"
                      "cat p1, t1, out;\n"
                      "p1:  Map(indices - 1) -> p1;\n"
                      "t1:  Aggregate(k.indices == q.p1, tokens, default: '0') -> t1;\n"
                      "out: Map(t1 == 'a' and tokens == 'b') -> out;\n"
                      "output out at every position;\n";
    TfModel *s = compile_text(src, 0), *u = compile_text(src, 1);
    ck_assert_int_eq(model_find_register(s, "p1"), -1);
    ck_assert_int_eq(n_kind(s, TF_LAYER_ATTENTION), 1);
    ck_assert_int_eq(s->layers[0].kind, TF_LAYER_ATTENTION);
    ck_assert_int_gt(same_outputs(s, u, "abc", 6), 1000);
    model_free(s), model_free(u);

    // The key side through a Map of the tokens: the BOS key must still
    // score nothing from the term (the tokens after the BOS exclude '^').
    const char *keys = "vocab \"^abc0123456789\"; bos '^'; maxlen 9;\n"
                       "cat p, c;\n"
                       "p: Map(tokens == 'a' ? 1 : 2) -> p;\n"
                       "c: Count(k.p == 1) -> c;\n"
                       "output c at every position;\n";
    s = compile_text(keys, 0), u = compile_text(keys, 1);
    ck_assert_int_eq(model_find_register(s, "p"), -1);
    ck_assert_int_eq(s->n_layers, 2);
    ck_assert_int_gt(same_outputs(s, u, "abc", 7), 3000);
    model_free(s), model_free(u);

    const char *dyck = "vocab \"^()PNZ\"; bos '^'; maxlen 9;\n"
                       "cat o, c, out;\n"
                       "o:   Count(k.tokens == '(', causal) -> o;\n"
                       "c:   Count(k.tokens == ')', causal) -> c;\n"
                       "out: Map(o > c ? 'P' : (o == c ? 'Z' : 'N')) -> out;\n"
                       "output out at every position;\n";
    s = compile_text(dyck, 0), u = compile_text(dyck, 1);
    ck_assert_int_eq(model_find_register(s, "o"), -1);
    ck_assert_int_eq(model_find_register(s, "c"), -1);
    ck_assert_int_eq(s->n_layers, 2);
    ck_assert_int_eq(s->layers[0].n_heads, 2);
    ck_assert_int_eq(same_outputs(s, u, "()", 8), 510);
    model_free(s), model_free(u);
}
END_TEST

/* A Map of a Count and the position (frac_prevs, printed in tenths): one
 * staircase over the Count's fraction per position, so the count needs no
 * columns and the model is one attention layer and one MLP (the output
 * one-hot: held as a number, 'T' as 9, the model is smaller unfused). */
START_TEST(test_staircase_per_position) {
    const char *src = "vocab \"^abc0123456789T\"; bos '^'; maxlen 7;\n"
                      "cat as, out;\n"
                      "as:  Count(k.tokens == 'a', causal) -> as;\n"
                      "out: Map(as >= indices ? 'T' : 10 * as / indices) -> out;\n"
                      "output out at every position;\n";
    TfCompileOptions one_hot = {.opt_level = 1, .one_hot = 1};
    TfModel *s = compile_with(src, &one_hot), *u = compile_text(src, 1), *n = compile_text(src, 0);
    ck_assert_int_eq(model_find_register(s, "as"), -1);
    ck_assert_int_eq(s->n_layers, 2);
    ck_assert_int_eq(same_outputs(s, u, "abc", 6), 1092);
    ck_assert_int_eq(n->regs[n->output_reg].kind, TF_REG_SCALAR);
    ck_assert_int_lt(model_param_count(n), model_param_count(s));
    ck_assert_int_eq(same_outputs(n, u, "abc", 6), 1092);
    model_free(s), model_free(u), model_free(n);
}
END_TEST

/* sort's tie-broken rank (k.tokens < q.tokens or equal tokens at an earlier
 * position): the query and key sides' joint tables over (tokens, indices)
 * are one register, and its values at position 0, which only the BOS could
 * hold, have no columns: 4 tokens x 5 positions, not 2 x 4 x 6. */
START_TEST(test_joint_sides_shared_without_bos_values) {
    const char *src = "vocab \"^1234\"; bos '^'; maxlen 6;\n"
                      "cat rank, place, sorted;\n"
                      "rank: Count(k.tokens < q.tokens or (k.tokens == q.tokens and "
                      "k.indices < q.indices)) -> rank;\n"
                      "place: Map(rank + 1) -> place;\n"
                      "sorted: Aggregate(k.place == q.indices, tokens) -> sorted;\n"
                      "output sorted at every position;\n";
    TfModel *s = compile_text(src, 0), *u = compile_text(src, 1);
    int q = model_find_register(s, "rank.q0");
    ck_assert_int_ge(q, 0);
    ck_assert_int_eq(s->regs[q].size, 20);
    ck_assert_str_eq(s->regs[q].values[0], "('1',1)");
    ck_assert_int_eq(model_find_register(s, "rank.k0"), -1);
    ck_assert_int_eq(u->regs[model_find_register(u, "rank.q0")].size, 24);
    ck_assert_int_ge(model_find_register(u, "rank.k0"), 0);
    ck_assert_int_eq(same_outputs(s, u, "1234", 5), 1364);
    model_free(s), model_free(u);
}
END_TEST

/* MLPs that are ready together share a layer (block-diagonal, parts over
 * the hidden units); an op whose result nothing reads is dropped. (p and q
 * read two registers each, so the Counts cannot read through them.) */
START_TEST(test_mlp_parts_and_dead_ops) {
    const char *src = "vocab \"^abxy\"; bos '^'; maxlen 6;\n"
                      "cat p, q, o, cp, cq, dead;\n"
                      "p: Map(tokens == 'a' and indices > 1 ? 1 : 2) -> p;\n"
                      "q: Map(tokens == 'b' and indices > 2 ? 1 : 2) -> q;\n"
                      "cp: Count(k.p == 1) -> cp;\n"
                      "cq: Count(k.q == 1) -> cq;\n"
                      "dead: Count(k.tokens == 'x') -> dead;\n"
                      "o: Map(cp == cq ? 'x' : 'y') -> o;\n"
                      "output o at every position;\n";
    TfModel *s = compile_text(src, 0), *u = compile_text(src, 1);
    // p and q are ready at once: one MLP whose parts cover its hidden units.
    const TfLayer *l0 = &s->layers[0];
    ck_assert_int_eq(l0->kind, TF_LAYER_MLP);
    ck_assert_int_eq(l0->n_parts, 2);
    ck_assert_str_eq(l0->parts[0].name, "p");
    ck_assert_str_eq(l0->parts[1].name, "q");
    ck_assert_str_eq(l0->name, "p+q");
    int units = 0;
    for (int i = 0; i < l0->n_parts; i++) {
        ck_assert_int_eq(l0->parts[i].first, units);
        ck_assert_int_gt(l0->parts[i].count, 0);
        units += l0->parts[i].count;
    }
    ck_assert_int_eq(units, l0->d_hidden);
    // cp and cq: two heads of one layer.
    ck_assert_int_eq(s->layers[1].kind, TF_LAYER_ATTENTION);
    ck_assert_int_eq(s->layers[1].n_heads, 2);
    ck_assert_int_eq(model_find_register(s, "dead"), -1);
    for (int l = 0; l < s->n_layers; l++) ck_assert_ptr_null(strstr(s->layers[l].name, "dead"));
    ck_assert_int_ge(model_find_register(u, "dead"), 0);
    ck_assert_int_gt(same_outputs(s, u, "abx", 5), 300);
    model_free(s), model_free(u);
}
END_TEST

/* A program with seed ops is scheduled too, without the rewrites that take
 * a register to be written once: folded into its reader, n0's linear Map
 * would read n2 after Clear(n2) zeroed it (tests/mix_check.py found it). */
START_TEST(test_seed_ops_scheduled) {
    const char *src = "vocab \"^ab0123456789\"; bos '^'; maxlen 5;\n"
                      "cat c0, c1, out;\nnum n0, n1, n2;\n"
                      "Count(k.tokens == 'a', causal) -> c0;\n"
                      "Map(c0 == 1 ? 1 : 0) -> n2;\n"
                      "Map(1 * n2 + 0) -> n0;\n"
                      "Clear(n2);\n"
                      "Map(c0 >= -1 ? 1 : 0) -> n1;\n"
                      "Map(n0 > 0.5 ? 1 : 0) -> c1;\n"
                      "out: Map(n0 > 0.5 ? 1 : 0) -> out;\n"
                      "output out at every position;\n";
    TfModel *s = compile_text(src, 0), *u = compile_text(src, 1);
    ck_assert_int_lt(s->n_layers, u->n_layers);
    int parts = 0;
    for (int l = 0; l < s->n_layers; l++) parts += s->layers[l].n_parts;
    ck_assert_int_gt(parts, 0);
    ck_assert_int_eq(same_outputs(s, u, "ab", 4), 30);
    // "^a": c0 is 1 at the a, so n2, n0 and out are 1 there.
    TfError err = {""};
    TfInfer *inf = infer_new(s, 1, &err);
    int ids[3], o[3], len = 2, *po = o;
    ck_assert_int_eq(infer_tokenize(s, "^a", len, ids, &err), len);
    const int *seq = ids;
    ck_assert_msg(infer_every_position(inf, &seq, &len, 1, &po, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(s->vocab[o[1]], '1');
    infer_free(inf);
    model_free(s), model_free(u);
    // The adder scheduled is larger (merged layers do not share the rounds'
    // tensors): -O keeps its 36 layers, the same file as --no-schedule.
    size_t len_a;
    char *adder = tf_read_source("programs/adder.tfp", &len_a);
    s = compile_text(adder, 0), u = compile_text(adder, 1);
    free(adder);
    ck_assert_int_eq(s->n_layers, 36);
    ck_assert_int_eq(model_param_count(s), model_param_count(u));
    for (int l = 0; l < s->n_layers; l++) ck_assert_int_eq(s->layers[l].n_parts, 0);
    ck_assert_ptr_nonnull(strstr(s->made_by, "\"schedule\":false"));
    TfModel *t = schedule_model(u, TF_SCHED_KEEP, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    ck_assert_int_lt(t->n_layers, 36);
    ck_assert_uint_gt(model_param_count(t), model_param_count(u));
    model_free(t), model_free(s), model_free(u);
}
END_TEST

/* A checked Aggregate (sort): the check names the layer that holds its op. */
START_TEST(test_checks_follow_their_op) {
    size_t len;
    char *src = tf_read_source("programs/sort.tfp", &len);
    char out[8192] = "";
    FILE *f = fmemopen(out, sizeof out - 1, "w");
    int n_errors;
    TfError err = {""};
    TfCompileOptions opts = {.opt_level = 1, .max_params = 0, .no_schedule = 0};
    TfModel *m = compile_source_opts("sort.tfp", src, len, &opts, f, &n_errors, &err);
    fclose(f);
    ck_assert_msg(m != NULL, "%s%s", out, err.msg);
    ck_assert_int_ge(m->n_checks, 1);
    for (int c = 0; c < m->n_checks; c++) {
        const TfLayer *l = &m->layers[m->checks[c].layer];
        const char *reg = m->regs[m->checks[c].reg].name;
        int found = strcmp(l->name, reg) == 0;
        for (int i = 0; i < l->n_parts; i++) found |= strcmp(l->parts[i].name, reg) == 0;
        ck_assert_msg(found, "check of %s at layer %s", reg, l->name);
    }
    model_free(m);
    free(src);
}
END_TEST

int main(void) {
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("schedule");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_independent_counts_are_heads);
    tcase_add_test(tc, test_count_fuses_with_its_map);
    tcase_add_test(tc, test_dead_columns_reused);
    tcase_add_test(tc, test_reused_columns_keep_static_keys);
    tcase_add_test(tc, test_maps_compose);
    tcase_add_test(tc, test_linear_then_staircase);
    tcase_add_test(tc, test_copy_rank3);
    tcase_add_test(tc, test_heads_of_alike_sizes);
    tcase_add_test(tc, test_unread_values_lose_columns);
    tcase_add_test(tc, test_unread_tokens_lose_columns);
    tcase_add_test(tc, test_unread_values_lose_value_channels);
    tcase_add_test(tc, test_dead_rows_left_out);
    tcase_add_test(tc, test_selection_sides_and_count_pairs);
    tcase_add_test(tc, test_staircase_per_position);
    tcase_add_test(tc, test_joint_sides_shared_without_bos_values);
    tcase_add_test(tc, test_mlp_parts_and_dead_ops);
    tcase_add_test(tc, test_checks_follow_their_op);
    tcase_add_test(tc, test_seed_ops_scheduled);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
