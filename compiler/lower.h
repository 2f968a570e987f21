/* lower.h: checked program -> weights.
 *
 * Each op application becomes exactly one attention or MLP layer, built with
 * seed 001's constructions at opt_level 0 (docs/language.md gives every
 * matrix) or with the optimized ones at opt_level 1 (lower.c). Identical
 * tensors are stored once: the layers of a repeated body share their weights.
 *
 * Memory: the returned model belongs to the caller (model_free); it copies
 * every name it needs from the TfIr.
 */
#ifndef TF_LOWER_H
#define TF_LOWER_H

#include "checker.h"
#include "model.h"

TfModel *lower_program(const TfIr *ir, int opt_level, TfError *err);

#endif
