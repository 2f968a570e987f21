/* learned.h: learned models declared in a program's `model { ... }` block.
 *
 * learned_check reads the block's settings (docs/language.md, "Learned
 * models") into a TfLearnedSpec, reporting every bad setting to the TfDiag;
 * learned_build makes the initial model: the layers the spec describes,
 * initialised as PyTorch initialises the same layers (nn.Embedding N(0, 1),
 * nn.Linear U(-1/sqrt(in), 1/sqrt(in)) for weights and biases, LayerNorm
 * weight 1 and bias 0), drawn from the spec's seed.
 *
 * The trainer (runtime/train/train.h) needs what the weight file does not say
 * (dropout, which positions are learned); learned_spec_from_source reads it
 * from the program text, which the weight file carries.
 *
 * Memory: a TfLearnedSpec owns its class names (learned_spec_free); the model
 * belongs to the caller (model_free).
 */
#ifndef TF_LEARNED_H
#define TF_LEARNED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ast.h"
#include "diag.h"
#include "model.h"

typedef enum TfNormPlace { TF_NORM_NONE, TF_NORM_PRE, TF_NORM_POST, TF_NORM_PLACE_COUNT } TfNormPlace;
typedef enum TfPositions {
    TF_POS_LEARNED,
    TF_POS_SINUSOIDAL,
    TF_POS_NONE,
    TF_POS_KIND_COUNT
} TfPositions;

typedef struct TfLearnedSpec {
    int d_model, n_layers, n_heads, d_ff; /* d_ff 0: no feed-forward layers */
    TfActivation act;
    TfNormPlace norm;
    float dropout;
    TfPositions positions;
    int max_len;
    int causal;
    int classify;          /* 0: next token; 1: classes */
    int every_position;    /* predict every_position: a token read at every position */
    int bos;               /* the program's `bos` token (-1: none); set before learned_build */
    int n_classes;
    char **class_names;    /* owned */
    int classify_at_last;
    uint64_t seed;
} TfLearnedSpec;

/* 0, or -1 after reporting to diag. spec is always safe to free. */
int learned_check(const TfStmt *model, int n_vocab, int generate, TfDiag *diag,
                  TfLearnedSpec *spec);
TfModel *learned_build(const TfLearnedSpec *spec, const char *vocab, int n_vocab, int generate,
                       TfError *err);
void learned_spec_free(TfLearnedSpec *spec);

/* Parses and checks program text that declares a model; diagnostics go to
 * diag_out. 0, or -1 with err set. */
int learned_spec_from_source(const char *name, const char *src, size_t len, FILE *diag_out,
                             TfLearnedSpec *spec, TfError *err);

extern const char *const tf_norm_place_names[];
extern const char *const tf_positions_names[];

#endif
