/* numbers.h: categorical registers held as numbers.
 *
 * A register the program declares `cat` whose values are all numbers costs
 * one column per value as a one-hot. When nothing in the program needs the
 * one-hot (no selection compares it, no Count writes it) and holding it as a number cannot change what the program
 * computes, the compiler may hold it in one column instead, as if it were
 * declared `num`: its Maps become staircases and linear maps of the number,
 * its copies attention over the number. compile.c tries it at -O and keeps
 * it where the model comes out smaller; the validator (prove_sem.c) reads
 * which registers a file holds as numbers from its register table and
 * proves the weights against the program as written.
 *
 * The output too, when its values are tokens: the unembedding decodes the
 * number into the nearest value's token (compiler/lower.c), and a value
 * that is no number (`'T'`) is held as a code above the numbers
 * (numbers_value), when nothing but the unembedding reads the output.
 *
 * A register held so keeps its declared meaning: `/` into it stays floor
 * division (expr_true_division). What could change the meaning, and is
 * refused: an Aggregate the compiler cannot prove copies one value (a `cat`
 * copy is checked at run time where a `num` mean would average). An
 * Aggregate's value register and its result are held the same way: one
 * group. */
#ifndef TF_NUMBERS_H
#define TF_NUMBERS_H

#include "checker.h"

/* ir: analysed (values_analyze) with the kinds as declared; n_declared: its
 * registers after check_program (the program's own; the analysis adds
 * hidden ones after them). group[r] (n_declared entries) gets the group of
 * register r, 0.. (the returned count), or -1 when r must stay as it is. */
int numbers_groups(const TfIr *ir, int n_declared, int *group);

/* Registers as_number[r] != 0 (n entries, r < ir->n_regs) become numeric:
 * call after check_program, before values_analyze. */
void numbers_apply(TfIr *ir, const unsigned char *as_number, int n);

/* The number an output held as a number holds for its value v, among its
 * values vals (n, any order, repeats allowed): v itself when v is a number,
 * else the next integer above the numbers' largest (0 when there are none)
 * plus v's rank among the other values that are no numbers. */
double numbers_value(const TfVal *vals, int n, TfVal v);

#endif
