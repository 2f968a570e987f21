/* bounds.h: how far the register an MLP plan writes can be from its exact
 * value in float32, worked out from the plan itself (its steps' slopes,
 * heights and inputs' ranges), the same way for a plan the analysis made
 * (compiler/map.c, compiler/select.c) and one fusion composed
 * (compiler/fuse.c): a composed plan whose bound is wider than the one the
 * analysis gave its register, and that later ops relied on, is not used.
 *
 * The model: a step pair's pre-activations u +- 1/2, u = K (x - m), cost
 * about 4 float32 roundings each of the largest term they add
 * (K |x|, K |m|, the gate); each, times the step's height in fc2, costs a
 * few more of height |u|. ROUND_ONE (16 roundings) per unit of |u| covers
 * them. (A Map(c * c) of a Count at maxlen 80 composed into one staircase
 * over the Count's fraction: steps of height 157 and |u| up to 12,640.)
 * Outside their ramps (the analysis's margins) steps are exactly 0 or 1 in
 * real arithmetic, so the inputs' own errors do not reach the result.
 */
#ifndef TF_BOUNDS_H
#define TF_BOUNDS_H

#include "values.h"

/* The bound for a TABLE plan, or a STAIRCASE or SPLIT plan writing a
 * number, not counting values merged as equal (the analysis adds those);
 * -1 for the other forms, whose bound the analysis derives. A staircase
 * writing a categorical register is left to the analysis's model (ROUND_ONE
 * a step): a step pair's difference, +-1 into a column, is exact in float32
 * unless a power of two lies between its two pre-activations, and its
 * weights in fc2 are +-1; only a number's heights multiply the rounding. */
double bounds_mlp(const TfIr *ir, const TfOpPlan *p);

#endif
