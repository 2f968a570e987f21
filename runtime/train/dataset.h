/* dataset.h: training and held-out examples, from text files or from the
 * built-in generators of the seed tasks, and batches made of them.
 *
 * Text format, one example per line:
 *   next-token models:  PROMPT<TAB>ANSWER   (loss on the answer tokens only)
 *   classifiers:        INPUT<TAB>LABEL     (LABEL one of the model's classes)
 *   models read at every position (compiled `output R at every position`):
 *                       INPUT<TAB>OUTPUT    (one output token per input position,
 *                       the bos's excepted: what tfrun --batch prints)
 * Every character must be in the model's vocabulary; an example must fit in
 * max_len positions.
 *
 * Generators (dataset_generate), "name" or "name:N":
 *   binary-add:N    N-bit a+b (default 8), prompt "a+b=" (MSB first), answer the N+1-bit
 *                   sum written least-significant bit first (seed 000)
 *   binary-add-msb:N  the same with the sum most-significant bit first, as the
 *                   seed writes it ("101+011=" -> "1000")
 *   decimal-add:N   the same in decimal, N digits (default 3; the compiled adder's task)
 *   first-token:L   L tokens from '1'..'4' (default 20), class = the first token (seed 004)
 *   xor:K           '0'/'1', K noise letters from 'a'..'h' (default 4), '0'/'1';
 *                   class = xor of the first and last token (seed 002)
 *   secret-code     "#" + a number below 100000; class accept only for 2013;
 *                   training = rounds of (random negative of 1 to 5 digits,
 *                   half of them from 2013's digits; one of 88 near misses;
 *                   2013 with three 5x5 attention targets) (seed 003);
 *                   held-out = distinct uniform negatives
 * The held-out set is drawn first; no training example equals a held-out one.
 *
 * Memory: a TfDataset owns its arrays (dataset_free).
 */
#ifndef TF_DATASET_H
#define TF_DATASET_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "train.h"

typedef struct TfExample {
    long off;     /* into tokens */
    int len;      /* tokens in the sequence the model sees */
    int n_prompt; /* next-token: the first target is at row n_prompt - 1 */
    int label;    /* classifiers */
    int attn;     /* 1: the dataset's attention targets apply */
} TfExample;

/* A target picture for head `head` of attention layer `layer`. */
typedef struct TfAttnSpec {
    int layer, head, T;
    float *target; /* T x T */
} TfAttnSpec;

typedef struct TfDataset {
    TfExample *ex;
    int n, cap;
    int *tokens; /* for next-token examples, the answer's last token is kept
                    after the sequence: tokens[off + len]; with `every`, the
                    targets of rows n_prompt - 1 .. len - 1 follow it */
    int every;   /* the model is read at every position (set by the first example) */
    long n_tokens, cap_tokens;
    int max_len;
    TfAttnSpec attn[4];
    int n_attn;
} TfDataset;

void dataset_free(TfDataset *d);

/* Appends the examples of a text file; -1 with err naming the line. */
int dataset_load_text(TfDataset *d, const TfModel *m, const char *path, TfError *err);

/* Fills train and heldout with a generator's examples; -1 with err set. */
int dataset_generate(TfDataset *train, TfDataset *heldout, const TfModel *m, const char *task,
                     int n_train, int n_heldout, uint64_t seed, TfError *err);

/* Writes examples in the text format; 0 or -1. */
int dataset_write_text(const TfDataset *d, const TfModel *m, FILE *f);

/* Room for a batch of up to max_seqs examples (of at most max_len tokens). */
typedef struct TfBatchBuf {
    TfBatch batch;
    int *tokens, *seq_start, *targets, *labels;
    TfAttnTarget *attn;
    int max_seqs, max_len;
} TfBatchBuf;

int batchbuf_init(TfBatchBuf *b, int max_seqs, int max_len);
void batchbuf_free(TfBatchBuf *b);
/* The batch of examples idx[0..n) of d (n <= max_seqs). */
void batchbuf_fill(TfBatchBuf *b, const TfDataset *d, const int *idx, int n);

#endif
