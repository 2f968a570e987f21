/* lower.h: checked program -> weights.
 *
 * Each op of the analysed program (compiler/values.c, after which a general
 * op may have become several ops, and compiler/plans.c, which sized them)
 * becomes one attention or MLP layer: a seed op with seed 001's
 * constructions at opt_level 0 (docs/language.md gives every matrix) or with
 * the optimized ones at opt_level 1 (lower.c), a general op from its plan
 * (lower_general.c). Lowering reports no diagnostics: everything it could
 * refuse was refused before. Identical tensors are stored once: the layers
 * of a repeated body share their weights. Plans that ask for a run-time
 * check become the model's checks (model_add_check).
 *
 * Memory: the returned model belongs to the caller (model_free); it copies
 * every name it needs from the TfIr.
 */
#ifndef TF_LOWER_H
#define TF_LOWER_H

#include "checker.h"
#include "model.h"

/* fold (a scheduled program, compiler/compile.c): a table Map of `tokens`
 * alone or of `indices` alone has no layer; the token or position
 * embedding holds its result (lower.c, fold_table); and unless all_rows, a
 * selection's head has no row for a query value that picks no key
 * (lower_general.c, row_live). */
TfModel *lower_program(const TfIr *ir, int opt_level, int fold, int all_rows, TfError *err);

#endif
