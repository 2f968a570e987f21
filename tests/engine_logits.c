/* engine_logits.c WEIGHTS.tfw: the engine's outputs at every position, for
 * tests/onnx_check.py to hold ONNX Runtime's to. A server on standard input
 * and output, one request after another (native byte order):
 *
 *   request   int32 B, int32 T, then B * T int32 token ids (B sequences of
 *             T tokens); B = 0 ends
 *   answer    float32 B * T * W: at every position of every sequence, the
 *             logits (W the model's outputs: vocabulary or classes) as the
 *             unembedding gives them from the engine's final residual
 *             stream, or (a model that prints a number, W = 1) the output
 *             register's value; a classifier answers at its class position
 *             only (B * W)
 *
 * The engine runs the whole sequences in one pass (infer_every_position,
 * infer_every_position_values, infer_classify) and a layer hook takes the
 * final stream; the logits are the unembedding's sums in double. A run the
 * engine refuses (a failed run-time check, an id outside the vocabulary)
 * prints its message and exits 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "infer.h"
#include "tfw.h"

typedef struct Capture {
    const TfModel *m;
    float *out; /* [B, T or 1, W] */
    int T, W;
} Capture;

static void die(const char *what) {
    fprintf(stderr, "engine_logits: %s\n", what);
    exit(1);
}

/* After the last layer: the unembedding of every row computed. */
static void final_stream(void *user, int layer, const float *x, int n_rows, const int *row_seq,
                         const int *row_pos) {
    Capture *c = user;
    const TfModel *m = c->m;
    if (layer != m->n_layers - 1) return;
    int d = m->d_model;
    const float *u = m->tensors[m->unembed].data;
    const float *b = m->unembed_bias >= 0 ? m->tensors[m->unembed_bias].data : NULL;
    int classify = m->output_kind == TF_OUTPUT_CLASSIFY;
    int at = m->classify_at_last ? c->T - 1 : 0;
    for (int r = 0; r < n_rows; r++) {
        if (classify && row_pos[r] != at) continue;
        float *o = c->out + ((size_t)row_seq[r] * (classify ? 1 : c->T) +
                             (size_t)(classify ? 0 : row_pos[r])) * c->W;
        for (int v = 0; v < c->W; v++) {
            double s = b ? b[v] : 0.0;
            for (int k = 0; k < d; k++) s += (double)u[(size_t)v * d + k] * x[(size_t)r * d + k];
            o[v] = (float)s;
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: engine_logits WEIGHTS.tfw < requests > answers\n");
        return 2;
    }
    TfError err = {""};
    TfModel *m = tfw_read(argv[1], &err);
    if (!m) die(err.msg);
    int numeric = model_numeric_output(m), classify = m->output_kind == TF_OUTPUT_CLASSIFY;
    Capture c = {m, NULL, 0, numeric ? 1 : classify ? m->n_classes : m->n_vocab};
    TfInfer *inf = NULL;
    int max_b = 0;
    for (;;) {
        int32_t bt[2];
        if (fread(bt, sizeof bt, 1, stdin) != 1) die("a request cut short");
        int B = bt[0], T = bt[1];
        if (B == 0) break;
        if (B < 0 || T < 1 || T > m->max_len) die("a request of a bad size");
        if (B > max_b) { // an engine for B sequences
            infer_free(inf);
            if (!(inf = infer_new(m, B, &err))) die(err.msg);
            if (!numeric) infer_set_hook(inf, final_stream, &c);
            max_b = B;
        }
        size_t n = (size_t)B * T, n_out = (size_t)B * (classify ? 1 : T) * c.W;
        int32_t *ids32 = malloc(n * sizeof *ids32);
        int *ids = malloc(n * sizeof *ids), **seqs = malloc((size_t)B * sizeof *seqs);
        int *lens = malloc((size_t)B * sizeof *lens);
        float **vals = malloc((size_t)B * sizeof *vals);
        int *toks = malloc(n * sizeof *toks), **tok_rows = malloc((size_t)B * sizeof *tok_rows);
        float *probs = malloc((size_t)B * (classify ? m->n_classes : 1) * sizeof *probs);
        c.out = calloc(n_out, sizeof *c.out);
        c.T = T;
        if (!ids32 || !ids || !seqs || !lens || !vals || !toks || !tok_rows || !probs || !c.out)
            die("out of memory");
        if (fread(ids32, sizeof *ids32, n, stdin) != n) die("a request cut short");
        for (int s = 0; s < B; s++) {
            for (int t = 0; t < T; t++) ids[(size_t)s * T + t] = ids32[(size_t)s * T + t];
            seqs[s] = ids + (size_t)s * T;
            lens[s] = T;
            vals[s] = c.out + (size_t)s * T;
            tok_rows[s] = toks + (size_t)s * T;
        }
        int rc = numeric    ? infer_every_position_values(inf, (const int *const *)seqs, lens, B,
                                                          vals, &err)
                 : classify ? infer_classify(inf, (const int *const *)seqs, lens, B, probs, &err)
                            : infer_every_position(inf, (const int *const *)seqs, lens, B,
                                                   tok_rows, &err);
        if (rc < 0) die(err.msg);
        if (fwrite(c.out, sizeof *c.out, n_out, stdout) != n_out || fflush(stdout) != 0)
            die("cannot write the answer");
        free(ids32);
        free(ids);
        free(seqs);
        free(lens);
        free(vals);
        free(toks);
        free(tok_rows);
        free(probs);
        free(c.out);
    }
    infer_free(inf);
    model_free(m);
    return 0;
}
