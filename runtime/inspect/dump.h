/* dump.h: a forward pass's activations as a safetensors file, under the
 * names TransformerLens gives them (docs/python.md).
 *
 * One pass over the prompt (inspect_capture_inner: the engine with its
 * hooks on, nothing skipped), one "block" per layer of the model (P the
 * prompt's positions, H the layer's heads, F its hidden units):
 *
 *   hook_embed                   [1, P, d_model]  embed.token.weight rows
 *   hook_pos_embed               [1, P, d_model]  embed.position.weight rows
 *   blocks.<i>.hook_resid_pre    [1, P, d_model]  before layer i
 *   blocks.<i>.ln1.hook_normalized  [1, P, d_model]  an attention layer's
 *                                pre-norm output (ln2: an MLP layer's)
 *   blocks.<i>.attn.hook_q, hook_k  [1, P, H, d_head]  biases included
 *   blocks.<i>.attn.hook_v, hook_z  [1, P, H, d_vhead]  values; the heads'
 *                                softmax-weighted sums of them
 *   blocks.<i>.attn.hook_attn_scores [1, H, P, P]  q . k times the layer's
 *                                scale (query row, key column; -inf where
 *                                a causal row cannot see the key)
 *   blocks.<i>.attn.hook_pattern [1, H, P, P]  softmax weights (0 there)
 *   blocks.<i>.hook_attn_out     [1, P, d_model]  what the layer adds
 *   blocks.<i>.mlp.hook_pre, hook_post  [1, P, F]  before and after the
 *                                activation
 *   blocks.<i>.hook_mlp_out      [1, P, d_model]  what the layer adds
 *   blocks.<i>.hook_resid_post   [1, P, d_model]  after layer i
 *   ln_final.hook_normalized     [1, P, d_model]  when the last layer is
 *                                a norm layer: its output
 *
 * The metadata holds "prompt" and "tokens" (JSON array of token ids) and
 * "made_by" ({"tool":"tfrun","version":...}). tools/tfw_torch.py computes
 * the same names (and more) in PyTorch.
 *
 * Memory: nothing is kept; the model is borrowed.
 */
#ifndef TF_DUMP_H
#define TF_DUMP_H

#include "infer.h"
#include "model.h"

/* The most values a dump holds (256 MB of floats). */
#define TF_DUMP_MAX_VALUES ((double)(1 << 26))

/* Runs tokens[0..n_pos-1] (the prompt's token ids; `prompt` its text),
 * with the edits of iv (NULL: none; intervene.h), and writes the
 * activations to path. 0, or -1 with err set (more than
 * TF_DUMP_MAX_VALUES values: refused before the run). */
int dump_activations(const TfModel *m, const char *prompt, const int *tokens, int n_pos,
                     const TfIntervention *iv, const char *path, TfError *err);

#endif
