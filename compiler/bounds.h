/* bounds.h: how far the register an MLP plan writes can be from its exact
 * value in float32, worked out from the plan itself (the weights
 * compiler/lower_general.c writes for it, rounded to float32 as it rounds
 * them), the same way for a plan the analysis made (compiler/map.c) and one
 * fusion composed (compiler/fuse.c): a composed plan whose bound is wider
 * than the one the analysis gave its register, and that later ops relied
 * on, is not used.
 *
 * The model holds whatever order the BLAS kernel adds in (issue 22:
 * OpenBLAS's SSE kernels, Prescott and Nehalem, add a staircase's units in
 * another order than AVX2's and made 5 times the bound a fixed count of
 * roundings gave). A float32 sum of n terms in any order is within
 * u sum|terms| + gamma_(n-1) (1 + u) max(sum of the positive terms, sum of
 * the negative ones) of the exact sum (u = 2^-24; with both sums equal to
 * sum |terms| this is Higham's gamma_n sum |terms|, the validator's model,
 * compiler/interval.h). Each unit's pre-activation is such a sum (its
 * input columns, the bias), and so is each output column (the units on at
 * that input, the bias, the residual it is added to). Outside their ramps
 * (the analysis's margins) steps are exactly 0 or 1 in real arithmetic, so
 * the inputs' own errors move the units' sizes, not the result; the off
 * units add an exact 0. A staircase's errors grow with x and with the steps
 * it has crossed, so its bound is taken at x's largest value (every step
 * on); a table's at its worst cube (one is on at a time).
 */
#ifndef TF_BOUNDS_H
#define TF_BOUNDS_H

#include "values.h"

/* The bound for a TABLE, STAIRCASE, SPLIT or GATED plan, categorical
 * (every column against its one-hot) or numeric, not counting values merged
 * as equal (the analysis adds those); -1 for the other forms, whose bound
 * the analysis derives. */
double bounds_mlp(const TfIr *ir, const TfOpPlan *p);

/* The bound for a number the units of a TABLE or STAIRCASE plan with a
 * categorical dest write besides it (TfOpPlan.feat): per_col[c] where dest
 * holds its column c's value. -1 for the other forms, or out of memory. */
double bounds_mlp_values(const TfIr *ir, const TfOpPlan *p, const double *per_col);

#endif
