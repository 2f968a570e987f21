/* infer.h: running a TfModel: tokenization, batched incremental generation.
 *
 * Many sequences go through each layer together: the rows of every sequence
 * are stacked, each layer is one pass over all of them, and only attention
 * looks at sequences one by one. Generation is incremental: every attention
 * layer keeps the keys and values of the positions computed so far (a KV
 * cache), so each new token costs one row per sequence. The first step (the
 * prompts) may mix sequences of different lengths; results are those of
 * running each sequence alone.
 *
 * The engine computes only what can change the output (see infer.c):
 * weights are packed to their non-zero blocks (linear.h), and rows whose
 * output nobody reads (prompt positions before the last) go only through
 * the layers that later keys and values depend on.
 *
 * A TfPlan is the packed, read-only form of a model; one plan can serve
 * several engines, one per thread. A TfInfer owns the buffers and caches
 * for up to max_seqs sequences of the model's max_len positions. Both borrow
 * the model, which must outlive them.
 */
#ifndef TF_INFER_H
#define TF_INFER_H

#include "model.h"

typedef struct TfPlan TfPlan;
typedef struct TfInfer TfInfer;

/* Called after the embedding (layer == -1) and after each layer, with the
 * residual rows just computed: x[n_rows, d_model] (row-major), row r
 * belonging to sequence row_seq[r] at position row_pos[r]. */
typedef void (*TfLayerHook)(void *user, int layer, const float *x, int n_rows, const int *row_seq,
                            const int *row_pos);

/* Called for every attention row computed: the softmax weights att[0..T-1]
 * of head `head` in layer `layer`, for the row of sequence `seq` at
 * position `pos` (T is the number of positions it sees). */
typedef void (*TfAttentionHook)(void *user, int layer, int head, int seq, int pos,
                                const float *att, int T);

TfPlan *plan_new(const TfModel *m, TfError *err);
void plan_free(TfPlan *p);
/* Multiply-adds of the packed linear maps for one row through every layer
 * (attention scores excluded), and the same for the dense matrices. */
long plan_row_cost(const TfPlan *p, long *dense_cost);

/* An engine with its own plan, or one sharing `plan` (which must outlive it). */
TfInfer *infer_new(const TfModel *m, int max_seqs, TfError *err);
TfInfer *infer_new_with_plan(const TfPlan *plan, int max_seqs, TfError *err);
void infer_free(TfInfer *inf);

/* Hooks see every row of every layer: while one is set the engine computes
 * everything, skipping nothing. Pass NULL to remove. */
void infer_set_hook(TfInfer *inf, TfLayerHook hook, void *user);
void infer_set_attention_hook(TfInfer *inf, TfAttentionHook hook, void *user);

/* use_cache 0: every step recomputes every position (no KV cache), for
 * checking that the cache changes nothing. Default 1. */
void infer_set_cache(TfInfer *inf, int use_cache);

/* Floating-point operations this engine has done (2 per multiply-add of a
 * linear map or an attention score or sum; activations, softmax and
 * LayerNorm not counted). */
double infer_flops(const TfInfer *inf);

/* Generates n_new tokens for each of n_seqs prompts (token ids), greedily.
 * out[s * n_new + i] is the i-th token generated for prompt s. Fails (-1,
 * err set) on an empty prompt, an id outside the vocabulary, or a prompt
 * plus n_new longer than the model's max_len. */
int infer_generate(TfInfer *inf, const int *const *prompts, const int *lens, int n_seqs, int n_new,
                   int *out, TfError *err);

/* For classifier models: one forward pass per sequence, probs[s *
 * n_classes + c] the softmax probability of class c. */
int infer_classify(TfInfer *inf, const int *const *seqs, const int *lens, int n_seqs, float *probs,
                   TfError *err);

/* Prompt text -> token ids (one byte, one token). ids must hold len entries.
 * Fails with a message naming the first character not in the vocabulary. */
int infer_tokenize(const TfModel *m, const char *text, int len, int *ids, TfError *err);

/* Writes token `tok` as printable text into buf (at least 5 bytes):
 * printable ASCII as itself, \n \t \r \\ escaped, other bytes as \xHH.
 * Returns the number of bytes written (no NUL counted; buf is terminated). */
int infer_token_text(const TfModel *m, int tok, char *buf);

#endif
