/* distill.h: distillation, a teacher model (a compiled program) labels the
 * training data of a learned student (docs/training.md, "Distillation").
 *
 *   distill_check(teacher, student, &o, &err);            (compatible?)
 *   distill_make_data(teacher, student, &o, &train, &held, &stats, &err);
 *   ... train the student on train, evaluate on held ...
 *   distill_head_distance(trainer, &bb, &held, &o, tv, &err);
 *
 * Inputs come from the teacher's input domain: random strings
 * ("random:LEN" or "random:LEN:CHARS": lengths 1..LEN over CHARS, by
 * default the teacher's vocabulary without its BOS and stop token, after
 * the BOS when the teacher has one) or a file of prompts, one per line as
 * tfrun takes them. The teacher, run by the engine, labels each one: an
 * every-position program its output at every position (the student must
 * `predict every_position`), a generating program its continuation (the
 * student a next-token model; prompt then answer), a classifier its class
 * (the student a classifier with the same classes). Vocabularies match by
 * character: every token of the teacher's vocabulary must be in the
 * student's, and an every-position student has the teacher's BOS.
 *
 * Matched heads: student head (s_layer, s_head) learns the attention
 * pattern of teacher head (t_layer, t_head) (layers count attention layers
 * from 0). The teacher's pattern on each example (its attention weights,
 * from the engine's attention hook, over the student's whole sequence) is
 * stored with the example, and the loss adds TF_ATTN_PATTERN targets
 * (runtime/train/train.h) of weight o->weight.
 *
 * Memory: the datasets own what is added to them (dataset_free); nothing
 * else is kept.
 */
#ifndef TF_DISTILL_H
#define TF_DISTILL_H

#include <stdint.h>

#include "dataset.h"
#include "model.h"
#include "train.h"

#define TF_DISTILL_MAX_HEADS 4 /* TfDataset's attention specs */

typedef struct TfDistillHead {
    int s_layer, s_head, t_layer, t_head;
} TfDistillHead;

typedef struct TfDistillOptions {
    const char *inputs; /* "random:LEN[:CHARS]" or a file; NULL: random up to max_len */
    TfDistillHead heads[TF_DISTILL_MAX_HEADS];
    int n_heads;
    float weight; /* of the attention-pattern loss */
    int n_train, n_heldout;
    uint64_t seed;
} TfDistillOptions;

typedef struct TfDistillStats {
    int rejected; /* inputs the teacher's run-time checks refused (skipped) */
    int input_len; /* the longest input drawn */
} TfDistillStats;

/* Parses "S_LAYER.S_HEAD=T_LAYER.T_HEAD,..." into o->heads; -1 with err
 * set (the form, or more than TF_DISTILL_MAX_HEADS pairs). */
int distill_parse_heads(const char *spec, TfDistillOptions *o, TfError *err);

/* 0 when the student can learn from the teacher (output kinds, vocabulary,
 * BOS, classes, matched heads that exist); -1 with err set, one line. */
int distill_check(const TfModel *teacher, const TfModel *student, const TfDistillOptions *o,
                  TfError *err);

/* Fills held (drawn first, distinct inputs) and train (no input equal to a
 * held-out one) with examples the teacher labels, with the matched heads'
 * patterns when o->n_heads > 0. -1 with err set. */
int distill_make_data(const TfModel *teacher, const TfModel *student, const TfDistillOptions *o,
                      TfDataset *train, TfDataset *held, TfDistillStats *stats, TfError *err);

/* For each matched head, the mean total-variation distance (half the L1
 * distance, 0 equal .. 1 disjoint) between the student's attention rows and
 * the teacher's on the examples of d (which has their patterns), into
 * tv[0..o->n_heads). bb is room for batches (the trainer's bounds). */
void distill_head_distance(TfTrainer *t, TfBatchBuf *bb, const TfDataset *d,
                           const TfDistillOptions *o, double *tv);

#endif
