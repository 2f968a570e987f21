/* infer.h: running a TfModel: tokenization, batched incremental generation.
 *
 * Many sequences go through each layer together: the rows of every sequence
 * are stacked, each layer is one matrix product over all of them, and only
 * attention looks at sequences one by one. Generation is incremental: every
 * attention layer keeps the keys and values of the positions computed so far
 * (a KV cache), so each new token costs one row per sequence. The first step
 * (the prompts) may mix sequences of different lengths; results are exactly
 * those of running each sequence alone.
 *
 * Memory: a TfInfer borrows the model (which must outlive it) and owns its
 * buffers, sized at infer_new for up to max_seqs sequences of the model's
 * max_len positions.
 */
#ifndef TF_INFER_H
#define TF_INFER_H

#include "model.h"

typedef struct TfInfer TfInfer;

/* Called after the embedding (layer == -1) and after each layer, with the
 * residual rows just computed: x[n_rows, d_model], row r belonging to
 * sequence row_seq[r] at position row_pos[r]. */
typedef void (*TfLayerHook)(void *user, int layer, const float *x, int n_rows, const int *row_seq,
                            const int *row_pos);

/* Called for every attention row computed: the softmax weights att[0..T-1]
 * of head `head` in layer `layer`, for the row of sequence `seq` at
 * position `pos` (T is the number of positions it sees). */
typedef void (*TfAttentionHook)(void *user, int layer, int head, int seq, int pos,
                                const float *att, int T);

TfInfer *infer_new(const TfModel *m, int max_seqs, TfError *err);
void infer_free(TfInfer *inf);
/* Hooks see every row of every layer: while one is set the engine computes
 * everything, skipping nothing (see infer.c). Pass NULL to remove. */
void infer_set_hook(TfInfer *inf, TfLayerHook hook, void *user);
void infer_set_attention_hook(TfInfer *inf, TfAttentionHook hook, void *user);

/* Generates n_new tokens for each of n_seqs prompts (token ids), greedily.
 * out[s * n_new + i] is the i-th token generated for prompt s. Fails (-1,
 * err set) on an empty prompt, an id outside the vocabulary, or a prompt
 * plus n_new longer than the model's max_len. */
int infer_generate(TfInfer *inf, const int *const *prompts, const int *lens, int n_seqs, int n_new,
                   int *out, TfError *err);

/* Prompt text -> token ids (one byte, one token). ids must hold len entries.
 * Fails with a message naming the first character not in the vocabulary. */
int infer_tokenize(const TfModel *m, const char *text, int len, int *ids, TfError *err);

/* Writes token `tok` as printable text into buf (at least 5 bytes):
 * printable ASCII as itself, \n \t \r \\ escaped, other bytes as \xHH.
 * Returns the number of bytes written (no NUL counted; buf is terminated). */
int infer_token_text(const TfModel *m, int tok, char *buf);

#endif
