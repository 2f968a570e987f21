/* dump.h: a forward pass's activations as a safetensors file, under the
 * names TransformerLens gives them (docs/python.md).
 *
 * One pass over the prompt (inspect_capture: the engine with its hooks on,
 * nothing skipped), one "block" per layer of the model:
 *
 *   hook_embed                   [1, n_pos, d_model]  embed.token.weight rows
 *   hook_pos_embed               [1, n_pos, d_model]  embed.position.weight rows
 *   blocks.<i>.hook_resid_pre    [1, n_pos, d_model]  before layer i
 *   blocks.<i>.hook_resid_post   [1, n_pos, d_model]  after layer i
 *   blocks.<i>.attn.hook_pattern [1, n_heads, n_pos, n_pos]  softmax weights
 *                                (query row, key column; 0 where masked)
 *   ln_final.hook_normalized     [1, n_pos, d_model]  when the last layer is
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

#include "model.h"

/* Runs tokens[0..n_pos-1] (the prompt's token ids; `prompt` its text) and
 * writes the activations to path. 0, or -1 with err set. */
int dump_activations(const TfModel *m, const char *prompt, const int *tokens, int n_pos,
                     const char *path, TfError *err);

#endif
