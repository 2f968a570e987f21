/* finetune.h: training a model that starts from a weight file (tftrain
 * --init FILE.tfw): what it can train, and which tensors train (--freeze,
 * --train).
 *
 *   TfFinetuneRules sel = {0};
 *   finetune_rule_add(&sel, 0, "all");            --freeze all
 *   finetune_rule_add(&sel, 1, "layers.3");       --train layers.3
 *   int *mask = calloc(m->n_tensors, sizeof *mask);
 *   finetune_mask(m, &sel, fixed_positions, mask, &err);   -> TfTrainOptions.trainable
 *
 * A rule's SPEC is a comma-separated list of items, each naming tensors:
 *   all                  every tensor
 *   layers.N, layers.A-B every tensor layer N (A to B) reads, its shared ones
 *                        and the embedding it reads included
 *   layers.N.ROLE        the tensors of those roles there: layers.2.mlp,
 *                        layers.0.attn.query, layers.4.mlp.fc2.bias
 *   NAME                 a tensor (as tfinfo lists it) or every tensor whose
 *                        name starts with NAME and a dot: embed, unembed,
 *                        shared.3, embed.token.weight
 *   LAYER, LAYER.ROLE    every layer of that name (a compiled op's label, as
 *                        tfinfo lists it), as layers.N and layers.N.ROLE
 * Rules apply in order, each freezing (--freeze) or training (--train) what
 * it names, starting from: every tensor trains but a fixed position table.
 * An optimizer state tensor (optim.*) is never a parameter.
 *
 * Memory: a TfFinetuneRules borrows its SPEC strings (argv) and owns its rule array
 * (finetune_rules_free).
 */
#ifndef TF_FINETUNE_H
#define TF_FINETUNE_H

#include <stdio.h>

#include "dataset.h"
#include "model.h"

typedef struct TfFinetuneRule {
    int train; /* 1: --train, 0: --freeze */
    const char *spec;
} TfFinetuneRule;

typedef struct TfFinetuneRules {
    TfFinetuneRule *rules;
    int n, cap;
} TfFinetuneRules;

/* Appends a rule; -1 when out of memory. */
int finetune_rule_add(TfFinetuneRules *s, int train, const char *spec);
void finetune_rules_free(TfFinetuneRules *s);

/* Fills mask (m->n_tensors ints) with 1 for the tensors that train: the
 * rules applied in order to the default set (every parameter tensor, but
 * embed.position.weight when fixed_positions). 0, or -1 with err set: an
 * item that names nothing ("--train: 'embd' names no tensor or layer
 * (did you mean 'embed'?)"), a layer out of range, or nothing left to train. */
int finetune_mask(const TfModel *m, const TfFinetuneRules *s, int fixed_positions, int *mask,
                TfError *err);

/* The rules as text, "--freeze all --train layers.3" (made_by); NULL when
 * out of memory. The caller frees it. */
char *finetune_rules_text(const TfFinetuneRules *s);

/* Writes what trains to f: "training 4 of 15 tensors (2182 of 7590
 * parameters): NAME, ..." and, for each trained tensor that several layers
 * (or the embedding and a layer) read, which ones it changes. */
void finetune_describe(const TfModel *m, const int *mask, FILE *f);

/* Whether tftrain can train the model: 0, or -1 with err naming what it
 * cannot (a number read at every position: no unembedding, no cross-entropy). */
int finetune_check_model(const TfModel *m, TfError *err);

/* Whether the examples fit the model: with a bos, every example starts
 * with it (as tfrun requires of a prompt). 0, or -1 with err naming the
 * example. */
int finetune_check_data(const TfModel *m, const TfDataset *d, TfError *err);

/* Drops a checkpoint's optimizer state tensors (optim.*, after every
 * parameter): training from a file starts a fresh optimizer. */
void finetune_drop_state(TfModel *m);

/* When resuming: the checkpoint's optimizer state must be there for exactly
 * the tensors that train (the same --freeze/--train as the run that wrote
 * it). 0, or -1 with err naming the first tensor that differs. */
int finetune_check_state(const TfModel *m, const int *mask, TfError *err);

#endif
