/* convert.h: other people's models in, standard models out (tfconvert,
 * docs/convert.md).
 *
 *   TfModel *m = convert_from_gpt2("folder", &opt, &err);   Hugging Face GPT-2 -> model
 *   tfw_write(m, "model.tfw", &err);
 *
 * A GPT-2-style folder holds config.json (the Hugging Face GPT2Config keys),
 * model.safetensors (float32 tensors, with or without the "transformer."
 * prefix; Conv1D weights stored [in, out]) and, unless a vocabulary is
 * given, vocab.json. The model it becomes is the same function: pre-norm
 * attention and MLP layers, a final norm layer, learned positions, the
 * unembedding tied or not. What the .tfw format cannot hold is an error
 * naming the key or tensor.
 *
 * Memory: the returned model belongs to the caller (model_free).
 */
#ifndef TF_CONVERT_H
#define TF_CONVERT_H

#include "model.h"

typedef struct TfConvertOptions {
    /* The vocabulary, one byte per token (a character model), in place of
     * vocab.json; NULL: read vocab.json. */
    const char *vocab;
    int vocab_len;
    int generate; /* the default number of tokens to generate; < 1: 1 */
    const char *source; /* how made_by names the folder (the path as given) */
} TfConvertOptions;

TfModel *convert_from_gpt2(const char *dir, const TfConvertOptions *opt, TfError *err);

/* Writes m as an ONNX model (onnx.c says what the graph computes): input
 * input_ids int64 [batch, seq]; output logits float [batch, seq, outputs]
 * (values [batch, seq] for a model that prints a number); the vocabulary,
 * registers and reading settings in metadata_props. 0, or -1 with err set. */
int convert_to_onnx(const TfModel *m, const char *path, TfError *err);

/* Writes m as a GPT-2-style folder dir (made when missing): config.json,
 * model.safetensors ("transformer." names, Conv1D layouts; lm_head.weight
 * unless the unembedding is the token embedding) and vocab.json (GPT-2's
 * byte-level spelling), when m is exactly a GPT-2: blocks of a pre-normed
 * causal attention layer (heads of d_model / n_heads, an output
 * projection, scale 1/sqrt(d_head)) and a pre-normed MLP of one width and
 * activation, then a norm layer, one LayerNorm eps, no unembedding bias,
 * next-token output. Absent biases are written as zeros. 0, or -1 with err
 * naming the layer and what does not fit. */
int convert_to_gpt2(const TfModel *m, const char *dir, TfError *err);

#endif
