/* inspect.h: looking inside a running model: captured residual streams and
 * attention patterns, registers decoded, traces printed.
 *
 * A capture is one forward pass of one sequence (one generation step) with
 * everything kept:
 *
 *   block 0          the residual stream after the embedding
 *   block l + 1      the residual stream after layer l
 *   att[l]           for an attention layer l, every head's softmax weights,
 *                    [n_heads, n_pos, n_pos] (row = query, column = key;
 *                    keys a causal row cannot see hold 0); NULL otherwise
 *
 * and, from inspect_capture_inner only, what happens inside each layer:
 *
 *   inner[l * TF_HOOK_POINT_COUNT + p]  activation p (infer.h's TfHookPoint:
 *                    queries, keys, values, the heads' sums, hidden units,
 *                    the layer's output...) of layer l, [n_pos, width]
 *                    (infer_hook_width), NULL when the layer has none
 *   scores[l]        an attention layer's scaled scores, [n_heads, n_pos,
 *                    n_pos], -INFINITY at keys a causal row cannot see
 *
 * Decoding reads a register the way its kind says (docs/weight-format.md):
 *
 *   token     a one-hot over the vocabulary: the argmax token, and its margin
 *             over the runner-up; flagged unless it is one value near 1 and
 *             the rest near 0
 *   position  (sin, cos) of 2*pi*p/period: the p it points to; flagged when
 *             the angle lies between two positions or the vector is not of
 *             length 1
 *   categorical  the same as token, over its columns: the label of the hot
 *             column (e.g. "16", "'a'"), its margin over the runner-up, the
 *             same flags
 *   scalar    its value
 *
 * An all-zero token or position register decodes as empty (nothing stored
 * yet, or cleared): that is a normal state, not a flag.
 *
 * A trace prints, after each layer (its header names the layer's op and
 * line, or each op of a layer that holds several, inspect_layer_text), the
 * registers the layer wrote (those
 * whose columns changed at some position) decoded at every position, and
 * the positions where one of the layer's run-time checks fails. A register
 * whose live range (model.h's TfRegister.live_from) is narrower than every
 * state shows only in the states it holds its columns (another register
 * may hold them in the others: inspect_register_wrote), the trace's head
 * lists those ranges, and the layer after which one ends says so. A model
 * that prints a number shows its scalar registers at full precision
 * ("%.9g", the columns as wide as needed); other traces keep 3 digits. For a
 * model without registers (a learned model) it prints the logit lens (the
 * unembedding applied to the residual stream) and every head's attention.
 *
 * Memory: inspect_capture returns a TfCapture the caller frees with
 * capture_free; it borrows the model, which must outlive it.
 */
#ifndef TF_INSPECT_H
#define TF_INSPECT_H

#include <stdio.h>

#include "infer.h"
#include "model.h"

/* Thresholds of clean decoding. A token register is clean when its largest
 * value is within TF_DECODE_TOL of 1 and every other within TF_DECODE_TOL of
 * 0; a position register when its length is within TF_DECODE_TOL of 1 and
 * its angle within TF_DECODE_POS_TOL positions of a whole position. Below
 * TF_DECODE_ZERO (largest absolute value, or length) a register is empty. */
#define TF_DECODE_TOL 0.1f
#define TF_DECODE_POS_TOL 0.1f
#define TF_DECODE_ZERO 0.01f

typedef enum TfDecodeStatus {
    TF_DECODE_CLEAN,   /* reads as one token / one position / a number */
    TF_DECODE_EMPTY,   /* all (near) zero */
    TF_DECODE_FLAGGED, /* does not decode cleanly; `why` says how */
    TF_DECODE_STATUS_COUNT
} TfDecodeStatus;

typedef struct TfDecoded {
    TfDecodeStatus status;
    /* token: the argmax token id; position: the nearest whole position in
     * 0..period-1; scalar: -1 */
    int index;
    int runner_up; /* token: the second largest token id (-1 with one token) */
    /* token: the largest value; position: the exact (fractional) position
     * in [0, period); scalar: the value */
    float value;
    /* token: largest minus second largest; position: the vector's length;
     * scalar: 0 */
    float margin;
    char why[96]; /* when flagged: what is wrong, e.g. "between 3 and 4 (3.47)" */
} TfDecoded;

/* Decodes one register from one residual row (d_model floats). */
void inspect_decode(const TfModel *m, const TfRegister *reg, const float *row, TfDecoded *out);

typedef struct TfCapture {
    const TfModel *m; /* borrowed */
    int n_pos;        /* positions of the sequence */
    int n_blocks;     /* n_layers + 1 */
    int *tokens;      /* [n_pos] the sequence */
    float *resid;     /* [n_blocks, n_pos, d_model] */
    float **att;      /* [n_layers]: [n_heads, n_pos, n_pos] or NULL */
    int next;         /* the token (or class) the pass predicts */
    int *outputs;     /* every-position models: [n_pos] the argmax token at
                         each position; NULL otherwise */
    float *values;    /* models that print a number: [n_pos] the output
                         register's value at each position; NULL otherwise */
    int step;         /* generation step: n_pos minus the prompt length */
    int failed;       /* 1: a run-time check failed (model.h's TfCheck); the
                         capture still holds every layer */
    TfError failure;  /* what failed, when failed */
    float **inner;    /* inspect_capture_inner: see the top; NULL otherwise */
    float **scores;   /* inspect_capture_inner: see the top; NULL otherwise */
} TfCapture;

/* The residual row of `pos` after block `block` (0: embedding). */
const float *capture_row(const TfCapture *c, int block, int pos);
/* Attention weight of head h of layer l, query row q, key column k. */
float capture_att(const TfCapture *c, int layer, int h, int q, int k);

/* The values a capture of n_pos positions holds (residual streams,
 * attention weights; with inner, every activation and the scores too):
 * what memory, a report and a dump grow with. */
double inspect_cells(const TfModel *m, int n_pos, int inner);
/* Limits on them: a capture (TF_CAPTURE_MAX_CELLS, 1 GiB of floats) and a
 * report or set of pictures (TF_REPORT_MAX_CELLS: about 100 MB of page).
 * inspect_check_size: 0, or -1 with err saying that `what` would be too
 * large. */
#define TF_CAPTURE_MAX_CELLS ((double)(1 << 28))
#define TF_REPORT_MAX_CELLS ((double)(1 << 22))
int inspect_check_size(const TfModel *m, int n_pos, int inner, double limit, const char *what,
                       TfError *err);

/* Runs one forward pass of tokens[0..n_pos-1] with hooks on, recording
 * everything. NULL with err set (bad tokens, too long, out of memory). A
 * failed run-time check is not an error here: see `failed`. */
TfCapture *inspect_capture(const TfModel *m, const int *tokens, int n_pos, TfError *err);
/* inspect_capture, recording inner and scores as well. */
TfCapture *inspect_capture_inner(const TfModel *m, const int *tokens, int n_pos, TfError *err);
/* Either of them (inner 1: the second) with the edits of iv applied to the
 * run (intervene.h; NULL: none). */
TfCapture *inspect_capture_with(const TfModel *m, const int *tokens, int n_pos, int inner,
                                const TfIntervention *iv, TfError *err);
void capture_free(TfCapture *c);

/* Whether layer `layer` changed register `reg` at some position: any column
 * moved by more than 1e-6 (relative to max(1, |before|)). Norm layers write
 * everything. It reads the columns only: see inspect_register_wrote. */
int inspect_layer_wrote(const TfCapture *c, int layer, const TfRegister *reg);
/* What a trace and a report show after block `block`: whether register r
 * of c's model holds its columns there (model_reg_live) and layer block - 1
 * wrote it. A register that takes its columns at `block` (from a register
 * whose live range ended, or unused) was written when it holds anything
 * there (its columns before were not its own). 0 wherever r is not live. */
int inspect_register_wrote(const TfCapture *c, int block, int r);
/* Where register r's columns go after its live range, per run of columns:
 * "its columns 22-35 are left2's from state 13"; "its column 20 is out's
 * from state 5, columns 21-26 no register's after it". */
void inspect_handover_text(const TfModel *m, int r, char *buf, size_t n);
/* (A live range as text: model_live_text.) */

/* Which residual cells the output depends on: live[(block * n_pos + pos) *
 * d_model + col] is 1 when column col at position pos after block `block`
 * is read by a later layer on a path to what the unembedding reads (at the
 * positions it reads), or by a run-time check; attention reads values only
 * where it attends (weight above 1e-6) and keys wherever the query sees.
 * malloc'd, the caller frees it; NULL when out of memory. */
char *inspect_live(const TfCapture *c);
/* Whether any column of reg at pos after block is live (1 when live is
 * NULL: nothing known). */
int inspect_register_live(const TfCapture *c, const char *live, int block, int pos,
                          const TfRegister *reg);

/* Logit lens at block `block`, position `pos`: the k most likely outputs
 * (ids into the vocabulary, or classes) and their softmax probabilities,
 * best first. When the model ends in a norm layer, that norm is applied
 * first (as the model itself does before unembedding). k <= n outputs. */
void inspect_logit_lens(const TfCapture *c, int block, int pos, int k, int *ids, float *probs);

/* Token `id` as model_token_text writes it, a space as ' ' ("#id" when
 * outside the vocabulary). buf holds at least 8 bytes. */
void inspect_token_text(const TfModel *m, int id, char *buf, size_t bufsz);
/* Column i of a categorical register as its value label ("#i" otherwise),
 * cut to bufsz - 1 characters. */
void inspect_value_text(const TfRegister *reg, int i, char *buf, size_t bufsz);
/* Output `id` of the unembedding: a token as above, or for a classifier
 * the class name. */
void inspect_output_text(const TfModel *m, int id, char *buf, size_t bufsz);

/* A layer of several ops (model.h's TfLayerPart): the part that holds head
 * (an MLP: hidden unit) `unit`, or -1 (no parts, or outside them). */
int inspect_part_of(const TfLayer *ly, int unit);
/* Part i of a layer as text: "head 0: n (Count, line 10)", "heads 1-2: hist
 * (Aggregate, line 11)", "units 0-3: out (Map, line 12)", "unit 4: x" with
 * both of these flags; without INSPECT_PART_UNITS, "hist (Aggregate, line
 * 11)"; without INSPECT_PART_LINE, "heads 1-2: hist (Aggregate)". */
#define INSPECT_PART_UNITS 1 /* its heads or hidden units */
#define INSPECT_PART_LINE 2  /* its source line */
void inspect_part_text(const TfLayer *ly, int i, int flags, char *buf, size_t n);
/* What a layer is, for its label: "attention, FindAndStore, line 39" (with
 * its kind) or "FindAndStore, line 39" (without; the kind when there is no
 * op); a layer of several ops names each part, "; " between them
 * ("attention; head 0: n (Count, line 10); heads 1-2: hist (Aggregate, line
 * 11)"), ending in "..." when cut to n bytes. */
void inspect_layer_text(const TfLayer *ly, int with_kind, char *buf, size_t n);

/* The position whose logits give the prediction: the last, or for a
 * classifier reading its first position, 0. */
int inspect_read_position(const TfCapture *c);

/* What the unembedding reads at `pos` after the last layer, for a compiled
 * model (output_reg >= 0): the output register decoded into *d, and the
 * vocabulary token its largest column maps to through the unembedding (for
 * a categorical register, the token of the value: its column index is not a
 * token id). -1 when the register is empty there or its column maps to no
 * token. */
int inspect_output_read(const TfCapture *c, int pos, TfDecoded *d);

/* Prints the trace of one captured step to out (see the top of this file). */
void inspect_print_trace(const TfCapture *c, FILE *out);

#endif
