/* checks.h: the run-time check of a categorical value the compiler could not
 * prove single-valued (a TfCheck of the model, model.h).
 *
 * A categorical register holds one value at a row when one of its columns
 * is within the check's bound b of 1 and every other within b of 0 (NaN is
 * neither): b is what the compiler proved for a single value (the softmax's
 * leak and rounding), so that a mixture, three 'a' and one 'b' averaged to
 * 0.75 and 0.25, fails, and three equal values (exactly that value's
 * one-hot) pass. A check without a bound (a file from before the bound was
 * written) gets 1 / (2 max_len): among at most max_len positions a second
 * value holds at least 1 / max_len, so every mixture still fails. The
 * engine (infer.c) tests each check's register after
 * the check's layer at every row, that is every position of every input
 * but the BOS position (its liveness pass computes that layer everywhere);
 * the trace (inspect.c)
 * marks the positions that fail. docs/weight-format.md documents both
 * thresholds.
 */
#ifndef TF_CHECKS_H
#define TF_CHECKS_H

#include <stddef.h>

#include "model.h"

/* The first position checked: 1 when the model has a bos (the BOS position
 * holds no value; compiled programs leave it empty), else 0. */
int check_first_position(const TfModel *m);

/* 1 when the `size` values v[0], v[stride], ..., v[(size - 1) * stride]
 * hold one value within bound (one within it of 1, the rest of 0), else 0. */
int check_holds_one(const float *v, int size, size_t stride, double bound);

/* Sets err to the failure of check c at position pos, whose register's
 * columns are v[0], v[stride], ...:
 *   "sort.tfp:7: Aggregate -> place: position 3 does not hold one value
 *    within 0.001 ('a' 0.50, 'b' 0.50); the compiler could not prove it"
 * (the source file is the model's source_name; without one, "line 7"). */
void check_describe(const TfModel *m, const TfCheck *c, int pos, const float *v, size_t stride,
                    TfError *err);

#endif
