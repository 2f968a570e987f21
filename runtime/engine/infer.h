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

/* Called for every attention row computed: the scaled scores
 * scores[0..T-1] (query . key times the layer's scale) and their softmax
 * weights att[0..T-1] of head `head` in layer `layer`, for the row of
 * sequence `seq` at position `pos` (T is the number of positions it sees:
 * pos + 1 in a causal layer). */
typedef void (*TfAttentionHook)(void *user, int layer, int head, int seq, int pos,
                                const float *scores, const float *att, int T);

/* The activations inside a layer that an activation hook sees (docs/python.md
 * gives TransformerLens's names). Widths per row (infer_hook_width): */
typedef enum TfHookPoint {
    TF_HOOK_NORMALIZED, /* a pre-norm layer's normalized input [d_model] */
    TF_HOOK_Q,          /* attention: the queries [n_heads * d_head], biases included */
    TF_HOOK_K,          /* the keys [n_heads * d_head] */
    TF_HOOK_V,          /* the values [n_heads * d_vhead] */
    TF_HOOK_Z,          /* each head's softmax-weighted sum of values [n_heads * d_vhead] */
    TF_HOOK_MLP_PRE,    /* MLP: the hidden units before the activation [d_hidden] */
    TF_HOOK_MLP_POST,   /* after it */
    TF_HOOK_OUT,        /* what the layer adds to the residual stream [d_model] */
    TF_HOOK_POINT_COUNT
} TfHookPoint;

/* Called with activation `point` of layer `layer` at the rows just
 * computed: x[n_rows, width] (row-major, width infer_hook_width's), row r
 * belonging to sequence row_seq[r] at position row_pos[r]. Channels the
 * engine skips because they are always 0 are passed as 0. */
typedef void (*TfActivationHook)(void *user, int layer, TfHookPoint point, const float *x,
                                 int width, int n_rows, const int *row_seq, const int *row_pos);

/* Columns of `point` in layer `ly` of `m`; 0 when the layer has no such
 * activation (an MLP's queries, a norm layer's anything, a layer without a
 * pre-norm's TF_HOOK_NORMALIZED). */
int infer_hook_width(const TfModel *m, const TfLayer *ly, TfHookPoint point);

TfPlan *plan_new(const TfModel *m, TfError *err);
void plan_free(TfPlan *p);
/* Multiply-adds of the packed linear maps for one row through every layer
 * (attention scores excluded), and the same for the dense matrices. */
long plan_row_cost(const TfPlan *p, long *dense_cost);
/* Key rows the plan computes once per position, not per row: they read
 * only columns that the position embedding alone writes (an engine keeps
 * their values in its caches from the start). */
int plan_static_key_rows(const TfPlan *p);

/* An engine with its own plan, or one sharing `plan` (which must outlive it). */
TfInfer *infer_new(const TfModel *m, int max_seqs, TfError *err);
TfInfer *infer_new_with_plan(const TfPlan *plan, int max_seqs, TfError *err);
void infer_free(TfInfer *inf);

/* Hooks see every row of every layer: while one is set the engine computes
 * everything, skipping nothing. Pass NULL to remove. */
void infer_set_hook(TfInfer *inf, TfLayerHook hook, void *user);
void infer_set_attention_hook(TfInfer *inf, TfAttentionHook hook, void *user);
void infer_set_activation_hook(TfInfer *inf, TfActivationHook hook, void *user);

/* Edits every run of this engine (intervene.h: --ablate, --patch-from);
 * NULL removes them. While set, nothing is skipped (as with a hook). 0, or
 * -1 with err set: an edit whose mean or patch values were not recorded,
 * or a register edit after a layer whose columns feed keys or values a
 * later layer shares with an earlier one. The intervention must outlive
 * the engine's runs. */
typedef struct TfIntervention TfIntervention;
int infer_set_intervention(TfInfer *inf, const TfIntervention *iv, TfError *err);

/* use_cache 0: every step recomputes every position (no KV cache), for
 * checking that the cache changes nothing. Default 1. */
void infer_set_cache(TfInfer *inf, int use_cache);
/* grouped 0: every head scores every position, even where its keys take
 * few values (attention_groups in kernels.h; on by default for models
 * whose sequences reach 64 positions), for the tests and bench/ to compare
 * the two. */
void infer_set_grouped(TfInfer *inf, int grouped);

/* Floating-point operations this engine has done (2 per multiply-add of a
 * linear map or an attention score or sum; activations, softmax and
 * LayerNorm not counted). */
double infer_flops(const TfInfer *inf);

/* Generates n_new tokens for each of n_seqs prompts (token ids), greedily.
 * out[s * n_new + i] is the i-th token generated for prompt s. Fails (-1,
 * err set) on an empty prompt, an id outside the vocabulary, a prompt plus
 * n_new longer than the model's max_len, or a model that does not generate
 * (a classifier, or one read at every position). The model's stop token is
 * ignored here: see infer_generate_until. */
int infer_generate(TfInfer *inf, const int *const *prompts, const int *lens, int n_seqs, int n_new,
                   int *out, TfError *err);

/* Like infer_generate, for a model with a stop token: generates for each
 * prompt until it produces `stop` (a token id; -1: never), at most max_new
 * tokens and at most as many as the position encoding allows (max_len -
 * lens[s] + 1: the last token is never fed back). out[s * max_new + i] is
 * the i-th token of prompt s, n_out[s] how many it kept: the stop token is
 * not counted (out may hold it at index n_out[s]). Prompts that have
 * stopped leave the batch; the step loop ends when every prompt has. Fails
 * on an empty prompt, an id outside the vocabulary, or a prompt longer than
 * max_len. Attention is causal in generating models, so the result equals
 * generating max_new tokens and cutting at the first stop token. */
int infer_generate_until(TfInfer *inf, const int *const *prompts, const int *lens, int n_seqs,
                         int max_new, int stop, int *out, int *n_out, TfError *err);

/* For every-position models whose output is a token (and any next-token
 * model): one forward pass over each whole sequence, nothing skipped;
 * out[s][p] (p < lens[s]) is the
 * argmax token (the first maximum) of the logits at position p. Fails on an
 * empty sequence, an id outside the vocabulary, or a sequence longer than
 * max_len. */
int infer_every_position(TfInfer *inf, const int *const *seqs, const int *lens, int n_seqs,
                         int *const *out, TfError *err);

/* For models that print a number at every position (model_numeric_output):
 * one forward pass over each whole sequence; out[s][p] (p < lens[s]) is the
 * output register's value at position p. Fails as infer_every_position. */
int infer_every_position_values(TfInfer *inf, const int *const *seqs, const int *lens, int n_seqs,
                                float *const *out, TfError *err);

/* Run-time checks (model.h's TfCheck). Each call above tests the model's
 * checks at every row it computes. A sequence that fails one stops there
 * (a generating call keeps the tokens it had generated before; its other
 * outputs mean nothing), the others run on, and the call returns -1 with
 * err set to the first failed sequence's message. infer_n_failed then says
 * how many sequences of the last call failed (0: a -1 was another error)
 * and infer_failure(inf, s) describes sequence s's failure (NULL: none).
 * A model without checks does no work for them. */
int infer_n_failed(const TfInfer *inf);
/* 1 when the last call failed because a value overflowed float32: finite
 * weights whose products are infinite or NaN (err names the layer and
 * position); like a failed check, a verdict on the model, not a bug. */
int infer_overflowed(const TfInfer *inf);
const char *infer_failure(const TfInfer *inf, int s);

/* For classifier models: one forward pass per sequence, probs[s *
 * n_classes + c] the softmax probability of class c. */
int infer_classify(TfInfer *inf, const int *const *seqs, const int *lens, int n_seqs, float *probs,
                   TfError *err);

/* Prompt text -> token ids: one byte, one token; or, in a vocabulary of
 * words (TfModel.token_names), the words between spaces, tabs and line ends.
 * ids must hold len entries. Returns the number of tokens, or -1 with a
 * message naming the first character (or word, with the closest token as a
 * hint) not in the vocabulary. */
int infer_tokenize(const TfModel *m, const char *text, int len, int *ids, TfError *err);


#endif
