/* cubes.h: a table's combinations grouped into cubes of one result.
 *
 * A TABLE plan (values.h) gives a result for every combination of its
 * inputs' values. A cube fixes some inputs to one value each and leaves the
 * others free; its pair of MLP units reads only the fixed inputs' columns
 * (compiler/lower_general.c), so a Map whose result ignores an input in a
 * branch (`a < 10 ? f(a) : g(a, b)`) pays for the combinations of the
 * inputs it reads there, not for all of them.
 *
 * The cubes are the leaves of a decision tree: at a node the result is the
 * same over the inputs still free (a leaf), or the node splits on the next
 * input of an order. Every order of the inputs is tried; the one with the
 * fewest leaves that have a result wins (then the one that reads the fewest
 * columns in all). Such a leaf covers only combinations with a result, so
 * there are never more cubes than today's units, one per combination with
 * a result; a table that needs every input everywhere gets exactly those,
 * in the same order.
 *
 * A leaf leaves an input free only when that input holds exactly one value
 * at every position after the BOS (TfGenReg.one_value). Where an input
 * holds none (a Map's undefined combination, an Aggregate without a default
 * that selects nothing), the unit of the full table that reads it stays
 * off; a cube that did not read it would fire. A leaf whose result is empty
 * needs no unit, so any input may be free in it.
 *
 * Memory: cubes_free releases what cubes_partition and cubes_of_table fill.
 */
#ifndef TF_CUBES_H
#define TF_CUBES_H

#include "values.h"

typedef struct TfCube {
    int combo;                  /* the cube's first combination (free inputs at their first
                                   value), whose result is the cube's */
    int val[TF_GEN_MAX_INPUTS]; /* per input: the index of the value it is fixed to, -1: free */
} TfCube;

typedef struct TfCubes {
    TfCube *cube; /* by ascending combo */
    int n;
} TfCubes;

/* The cubes with a result of a table over n_in inputs of size[i] values:
 * result[c] per combination c (mixed radix, first input fastest) is -1 for
 * none, else a class (equal classes, equal results). Bit i of may_free: a
 * cube may leave input i free. Returns 0, or -1 when memory runs out. */
int cubes_partition(const int *size, int n_in, const int *result, unsigned may_free,
                    TfCubes *out);

/* The cubes of TABLE plan p (its result: a column, or a non-zero number);
 * an input may be free when its register's one_value says so. */
int cubes_of_table(const TfIr *ir, const TfGenOp *p, TfCubes *out);

void cubes_free(TfCubes *c);

#endif
