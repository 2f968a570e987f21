/* angles.h: equality selections compared on angles.
 *
 * A one-hot term of a selection takes a row of the head per query value and
 * a column per value on each side. A term in which each query value picks
 * at most one key value (`k.nstop == q.want`: add_decimal's carry) can
 * instead compare points on the unit circle: key value ki (of nk) is the
 * point at angle 2 pi ki / nk, a query value the point of the key value it
 * picks ((0, 0) when it picks none), and the score
 *
 *   s (q . k - cos c),   c = 2 pi / nk,   s = 1 / (1 - cos c)
 *
 * is 1 for the key value picked, 0 or less for every other (their angles
 * differ by c to 2 pi - c), -s cos c <= 0 for every key when the query
 * picks none (nk >= 4), and 0 for the BOS (whose points are (0, 0); the
 * constant is off there), as the one-hot rows give. Three rows instead of
 * one per query value, and two columns a side instead of one per value.
 *
 * The points are written by what writes each side's one-hot (a table's or
 * a staircase's units, the position embedding for `indices`: TfIrReg.feat)
 * into hidden scalar registers named after the selection (carry.t1.qcos,
 * carry.t1.qsin, carry.t1.kcos, carry.t1.ksin; .t1: its second part). A
 * term is compared so only where a side's one-hot is then read by nothing
 * but such terms (its columns go: compiler/schedule.c; two terms with the
 * same points share them), and where the points' float32
 * error (compiler/bounds.h), times s, keeps the scores' error below 0.15;
 * the head's scale grows so that beta (1/2 - 2 delta), and with it what its
 * softmax leaks, stays what the analysis had: every bound derived from the
 * selection stands; and where no key's softmax weight lands where float32's
 * exp is subnormal (slow on x86: few points). A staircase that writes points steps from the top
 * (TfOpPlan.x_down) where that bounds them closer: a Count's fractions
 * crowd near 0, where the steps are steepest. Aggregates only (a Count's
 * 1/(count + 1) is proven with the one-hot rows' scores), under -O
 * scheduled; compiler/compile.c compiles again without angles and keeps
 * the smaller model.
 */
#ifndef TF_ANGLES_H
#define TF_ANGLES_H

#include "checker.h"

/* Marks the terms compared on angles, adds their registers (after the
 * layout: d_model grows) and the writers' points. Returns how many terms,
 * or -1 when memory ran out. */
int angles_plan(TfIr *ir);

#endif
