/* train.h: training a TfModel: forward pass with saved activations, backward
 * pass, optimizers, checkpoints.
 *
 *   TfTrainer *t = trainer_new(model, &opts, max_rows, max_seqs, max_len, &err);
 *   for each step:
 *       loss = trainer_forward_backward(t, &batch, step);   (gradients)
 *       trainer_step(t, lr);                                  (optimizer)
 *   trainer_save(t, "out.tfw", &err);                  (the model)
 *   trainer_save_checkpoint(t, "out.ckpt.tfw", &err);  (and the optimizer state)
 *
 * A batch is several sequences of any lengths, their rows stacked (as in
 * runtime/engine/infer.c): every matrix product runs once for the whole batch, only
 * attention treats the sequences one by one.
 *
 * Parameters live in ONE flat buffer (every tensor of the model, in model
 * order); gradients and the optimizer's state (m, v) mirror it, so the
 * optimizer, zeroing, clipping and saving are flat loops. A trained model is
 * written alone; checkpoints are .tfw files that add the optimizer state as
 * tensors "optim.m.<name>", "optim.v.<name>" and the step count as
 * "optim.step" [1].
 *
 * Dimension legend: N rows of the batch, C d_model, V vocabulary (or
 * classes), F feed-forward width, H heads, D head width, T sequence length.
 *
 * Memory: the trainer borrows the model (which must outlive it) and writes
 * trained values back into its tensors in trainer_sync_model / trainer_save.
 */
#ifndef TF_TRAIN_H
#define TF_TRAIN_H

#include <stdint.h>

#include "model.h"

typedef enum TfOptimizer { TF_OPT_SGD, TF_OPT_ADAM, TF_OPT_ADAMW, TF_OPT_COUNT } TfOptimizer;
extern const char *const tf_optimizer_names[]; /* "sgd", "adam", "adamw" */

typedef struct TfTrainOptions {
    TfOptimizer optimizer;
    float momentum;     /* SGD */
    float beta1, beta2, eps;
    float weight_decay; /* SGD and Adam: added to the gradient; AdamW: decoupled */
    float clip;         /* global gradient norm limit; 0: none */
    float dropout;      /* on each sublayer's output, before the residual add */
    int train_positions; /* 0: embed.position.weight is fixed (sinusoidal, none) */
    uint64_t seed;      /* dropout masks */
    int threads;        /* threads for the per-sequence attention work (0 or 1: one);
                           the result does not depend on it */
    /* Which tensors train: per tensor of the model, non-zero trains
     * (runtime/train/finetune.h makes it from --freeze/--train); borrowed,
     * it must outlive the trainer. NULL: every tensor but a fixed position
     * table (train_positions 0). A tensor that does not train keeps its
     * values bit for bit and has no optimizer state; the backward pass
     * stops below the lowest layer that reads a trained tensor (unless an
     * embedding trains), so gradients below it are not computed (0). */
    const int *trainable;
} TfTrainOptions;

/* An attention target: on sequence `seq` of the batch, head `head` of the
 * `layer`-th attention layer should have
 *   TF_ATTN_SCORES:  the scaled pre-softmax scores `target` (T x T, T the
 *                    sequence's length); loss weight x mean squared error;
 *   TF_ATTN_PATTERN: the attention weights `target` (T x T, each row a
 *                    distribution over the positions it sees: distillation);
 *                    loss weight x the mean over rows of the KL divergence
 *                    KL(target row || attention row).
 * Summed over the targets of a sequence (its heads, as seed 003 sums them)
 * and averaged over the sequences of the batch that have targets. */
typedef enum TfAttnKind { TF_ATTN_SCORES, TF_ATTN_PATTERN } TfAttnKind;

typedef struct TfAttnTarget {
    int seq, layer, head;
    const float *target;
    float weight;
    TfAttnKind kind;
} TfAttnTarget;

typedef struct TfBatch {
    int n_seqs;
    const int *tokens;    /* all rows, sequence after sequence */
    const int *seq_start; /* n_seqs + 1 offsets into tokens */
    const int *targets;   /* next-token models: per row, the token that follows, or -1 */
    const int *labels;    /* classifiers: per sequence, its class */
    const TfAttnTarget *attn;
    int n_attn;
    /* A chunk of a larger batch (runtime/train/dataparallel.h); all 0 for a whole
     * batch. The loss and its gradient are then the chunk's share of the
     * whole batch's: the cross-entropy is divided by the whole batch's
     * output rows, the attention-score loss by its sequences with targets. */
    int chunk;          /* which chunk of the batch: picks its dropout masks */
    int loss_rows;      /* the whole batch's output rows (0: this batch's) */
    int loss_attn_seqs; /* the whole batch's sequences with attention targets */
} TfBatch;

typedef struct TfTrainer TfTrainer;

/* max_rows bounds the rows of a batch, max_seqs its sequences, and sequences
 * are at most the model's max_len long. NULL with err set on bad options or
 * when out of memory. */
TfTrainer *trainer_new(TfModel *m, const TfTrainOptions *opts, int max_rows, int max_seqs,
                       TfError *err);
void trainer_free(TfTrainer *t);

/* A trainer for data parallelism (runtime/train/dataparallel.h): it reads
 * `master`'s parameters (shared, never copied; the master must outlive it)
 * and has its own activations and gradient buffer, for batches of up to
 * max_rows rows and max_seqs sequences, and room for the master's threads. It has no optimizer state: only
 * trainer_forward_backward, trainer_evaluate and the setters below. */
TfTrainer *trainer_new_worker(TfTrainer *master, int max_rows, int max_seqs, TfError *err);
/* Points the gradient buffer at g (n_params floats, borrowed), NULL: back
 * to the trainer's own. */
void trainer_set_grads(TfTrainer *t, float *g);
/* Threads for the attention and LayerNorm work from now on (1 up to the
 * number it was made with); the results do not depend on it. */
void trainer_set_threads(TfTrainer *t, int threads);

/* Checks a batch against the trainer's bounds and the model (tokens in the
 * vocabulary, lengths, targets, labels); 0 or -1 with err set. */
int trainer_check_batch(const TfTrainer *t, const TfBatch *b, TfError *err);

/* Loss of the batch and, into the gradient buffer (zeroed first), its
 * gradient. `step` picks the dropout masks (the same step, the same masks).
 * *ce_out (optional) receives the cross-entropy part alone. */
double trainer_forward_backward(TfTrainer *t, const TfBatch *b, long step, double *ce_out);

/* Evaluation, no dropout: the loss, and the number of sequences whose every
 * target (next-token) or label (classifier) the model predicts (argmax). */
double trainer_evaluate(TfTrainer *t, const TfBatch *b, int *n_correct);

/* The predicted class (argmax) of each sequence of a classifier batch, and
 * its probability; or, for next-token models, whether each sequence is all
 * correct (pred[i] 1/0, prob unset). No dropout. */
void trainer_predict(TfTrainer *t, const TfBatch *b, int *pred, float *prob);

/* After trainer_predict: the attention scores (scaled, before softmax,
 * T x T) of a sequence, head and attention layer; NULL when out of range.
 * (Training passes skip what the loss does not read, scores included.) The
 * block is a copy, valid until the next call or batch. */
const float *trainer_attention_scores(const TfTrainer *t, int seq, int layer, int head, int *T);

/* The same for the attention weights (after the softmax, T x T). */
const float *trainer_attention_weights(const TfTrainer *t, int seq, int layer, int head, int *T);

/* Clips the gradient (opts.clip), then one optimizer update at learning rate
 * lr. Returns the gradient norm before clipping; infinity when the gradient
 * or Adam's moments overflowed float32 (compiled weights' extreme scales). */
double trainer_step(TfTrainer *t, float lr);

long trainer_steps_done(const TfTrainer *t);
const TfModel *trainer_model(const TfTrainer *t);
float *trainer_params(TfTrainer *t, size_t *n);
float *trainer_grads(TfTrainer *t, size_t *n);
/* The flat offset of tensor i of the model. */
size_t trainer_tensor_offset(const TfTrainer *t, int i);

/* Copies the trained parameters into the model's tensors. */
void trainer_sync_model(TfTrainer *t);
/* Writes the trained model alone (no optimizer state). */
int trainer_save(TfTrainer *t, const char *path, TfError *err);
/* Writes a checkpoint: the model with the optimizer state. */
int trainer_save_checkpoint(TfTrainer *t, const char *path, TfError *err);
/* Loads optimizer state and step from a model read from a checkpoint (the
 * same model the trainer trains): 1 loaded, 0 none there, -1 bad. */
int trainer_load_state(TfTrainer *t, TfError *err);

/* Learning rate at `step` of `total`: linear warm-up over `warmup` steps,
 * then constant, or cosine decay to min_lr when cosine is set. */
float train_lr_at(long step, long total, float lr, long warmup, int cosine, float min_lr);

#endif
