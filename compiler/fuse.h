/* fuse.h: MLP fusion, consecutive tables compiled as one.
 *
 * After the value analysis (compiler/values.c), under -O, a Map compiled to
 * a table (TF_PLAN_TABLE) whose input r was written by an earlier table, or
 * by a staircase over a number (Count's steps), is composed with it when
 * the composed plan has no more hidden units than the two together; a
 * staircase over a LINEAR Map's result is a staircase over its sum:
 *
 *   table(X) -> r, table(r, Y) -> dest     becomes  table(X, Y) -> dest
 *   staircase(x) -> r, table(r) -> dest    becomes  staircase(x) -> dest
 *   linear(X) -> r, staircase(r) -> dest   becomes  staircase(sum c_i x_i) -> dest
 *
 *
 * Selections and Counts' pairs:
 *
 *   a selection side reading a table of one register r reads r itself, its
 *   truth table composed with the table's (detect_pattern's q.p1, p1 = indices - 1);
 *   under a causal mask, a term every visible key satisfies (k.indices <=
 *   q.indices) becomes `true`, so the selection no longer reads positions;
 *   a table of two Counts' results that is a function of the difference (or
 *   sum) of their fractions becomes a staircase over it (shuffle_dyck's
 *   balance: o > c exactly when o's fraction is below c's), when its steps
 *   keep compiler/map.c's margin; a table of a Count's result and one other
 *   categorical register becomes a staircase over the fraction per value of
 *   that register (TF_PLAN_SPLIT: frac_prevs's count and position), unless a
 *   later table reads its result (that table composes with it instead);
 *   the query and key joint tables of a selection over the same registers
 *   are one register.
 *
 * The composition reads what the first read, so the Map no longer waits for
 * the first op's MLP: Count and the Map that prints it are one attention
 * layer and one MLP. The first op stays in the program; when nothing else
 * reads r, compiler/schedule.c drops it and r's columns. An r that may
 * hold no value keeps that meaning: where the first table has no result,
 * the composed one has none either. A first op with a run-time check is
 * never composed (the check is what makes r one value).
 *
 * Each composition is judged alone; compiler/compile.c compiles the program
 * again without fusion and keeps the smaller model (smaller_unfused).
 */
#ifndef TF_FUSE_H
#define TF_FUSE_H

#include "checker.h"

/* Composes what can be composed (above); returns how many compositions,
 * -1 when memory ran out. */
int fuse_ops(TfIr *ir);

#endif
