/* test_trace.c: the compiled adder against seed 001, layer by layer.
 *
 * tests/data/seed001_trace_0999+0111.txt holds the residual stream
 * (10 positions x 80 columns) of the seed's first generate() step on
 * "0999+0111=" after the embedding, after each of the 36 layers and after
 * the final projection. We run programs/adder.tfp's weights on the same
 * prompt and compare every value of every block.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "kernels.h"
#include "model.h"
#include "testmodel.h"
#include "testutil.h"

#define POSITIONS 10
#define WIDTH 80
#define BLOCKS 38 /* embed, 36 layers, final projection */

typedef struct Trace {
    char names[BLOCKS][64];
    float rows[BLOCKS][POSITIONS][WIDTH];
    int n_blocks;
} Trace;

static Trace *read_reference(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/seed001_trace_0999+0111.txt",
             tf_env_path("TF_SOURCE_DIR"));
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    Trace *tr = calloc(1, sizeof *tr);
    char *line = NULL;
    size_t cap = 0;
    int block = -1, row = 0;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "## ", 3) == 0) {
            block++;
            ck_assert_int_lt(block, BLOCKS);
            // "## 01/37 find_plus (AttentionLayer/FindAndStore)"
            ck_assert_int_eq(sscanf(line, "## %*d/%*d %63s", tr->names[block]), 1);
            row = 0;
        } else if (block >= 0 && line[0] != '#' && line[0] != '\n') {
            ck_assert_int_lt(row, POSITIONS);
            char *p = line;
            for (int c = 0; c < WIDTH; c++) {
                char *end;
                tr->rows[block][row][c] = strtof(p, &end);
                ck_assert_msg(end != p, "block %d row %d: column %d missing", block, row, c);
                p = end;
            }
            row++;
        }
    }
    free(line);
    fclose(f);
    tr->n_blocks = block + 1;
    return tr;
}

typedef struct Capture {
    float rows[BLOCKS][POSITIONS][WIDTH];
    int seen[BLOCKS];
} Capture;

static void capture_hook(void *user, int layer, const float *x, int n_rows, const int *row_seq,
                         const int *row_pos) {
    Capture *cap = user;
    ck_assert_int_eq(n_rows, POSITIONS); /* the first step computes the whole prompt */
    for (int r = 0; r < n_rows; r++) {
        ck_assert_int_eq(row_seq[r], 0);
        memcpy(cap->rows[layer + 1][row_pos[r]], x + (long)r * WIDTH, sizeof(float) * WIDTH);
    }
    cap->seen[layer + 1]++;
}

/* |got - want| <= 1e-3 * max(1, |want|): the seed's float32 arithmetic and
 * ours differ in summation order, and StepPosition's +-1000 bias rounds
 * positions to 6.1e-5. */
static void compare_block(const Trace *tr, int b, float got[POSITIONS][WIDTH]) {
    for (int p = 0; p < POSITIONS; p++)
        for (int c = 0; c < WIDTH; c++) {
            float want = tr->rows[b][p][c], g = got[p][c];
            ck_assert_msg(fabsf(g - want) <= 1e-3f * fmaxf(1.0f, fabsf(want)),
                          "block %d (%s), position %d, column %d: got %.9g, seed has %.9g", b,
                          tr->names[b], p, c, g, want);
        }
}

START_TEST(test_adder_matches_seed_trace) {
    Trace *tr = read_reference();
    ck_assert_int_eq(tr->n_blocks, BLOCKS);
    TfModel *m = tf_compile_program("programs/adder.tfp");
    ck_assert_int_eq(m->d_model, WIDTH);
    ck_assert_int_eq(m->n_layers, BLOCKS - 2);
    for (int l = 0; l < m->n_layers; l++) ck_assert_str_eq(m->layers[l].name, tr->names[l + 1]);

    TfError err = {""};
    TfInfer *inf = infer_new(m, 1, &err);
    ck_assert_msg(inf != NULL, "%s", err.msg);
    Capture *cap = calloc(1, sizeof *cap);
    infer_set_hook(inf, capture_hook, cap);
    int ids[POSITIONS], next;
    ck_assert_int_eq(infer_tokenize(m, "0999+0111=", POSITIONS, ids, &err), POSITIONS);
    const int *idp = ids;
    int len = POSITIONS;
    ck_assert_int_eq(infer_generate(inf, &idp, &len, 1, 1, &next, &err), 0);
    for (int b = 0; b < BLOCKS - 1; b++) {
        ck_assert_int_eq(cap->seen[b], 1);
        compare_block(tr, b, cap->rows[b]);
    }

    // The final projection: the output register read onto the vocabulary at
    // every position; the seed's remaining 66 columns are zero.
    float proj[POSITIONS][WIDTH] = {{0}};
    const TfTensor *un = &m->tensors[m->unembed];
    for (int p = 0; p < POSITIONS; p++)
        matmul_forward_naive(proj[p], cap->rows[BLOCKS - 2][p], un->data, NULL, 1, WIDTH,
                             m->n_vocab, 0);
    compare_block(tr, BLOCKS - 1, proj);
    ck_assert_int_eq(m->vocab[next], '0'); /* "argmax of last row -> '0'" */

    infer_free(inf);
    model_free(m);
    free(cap);
    free(tr);
}
END_TEST

int main(void) {
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("seed001");
    tcase_add_test(tc, test_adder_matches_seed_trace);
    suite_add_tcase(s, tc);
    return tf_run_suite(s);
}
