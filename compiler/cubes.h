/* cubes.h: a table's combinations grouped into cubes of one result.
 *
 * A TABLE plan (values.h) gives a result for every combination of its
 * inputs' values. A cube restricts some inputs to a set of values each
 * (most often one value) and leaves the others free; its pair of MLP units
 * reads only the restricted inputs' columns of those values
 * (compiler/lower_general.c), so a Map whose result ignores an input in a
 * branch (`a < 10 ? f(a) : g(a, b)`) pays for the combinations of the inputs
 * it reads there, and one that treats many values of an input alike
 * (`t < 'a' ? x : y`) pays for the two cases, not for every value.
 *
 * The cubes are the leaves of a decision tree: a node is a leaf when the
 * result is the same over the inputs still free; otherwise it splits on one
 * of them, one branch per value, except that values under which the rest of
 * the table is the same share a branch (a set). Each node splits on the
 * input that gives it the fewest leaves with a result (then the fewest
 * columns read). A leaf covers only combinations with a result, so there are
 * never more cubes than one per combination with a result (today's units);
 * a table that needs every input everywhere gets exactly those, in the same
 * order.
 *
 * A leaf leaves an input free only when that input holds exactly one value
 * at every position after the BOS (TfRegFacts.one_value). Where an input holds
 * none (a Map's undefined combination, an Aggregate without a default that
 * selects nothing), the full table's unit that reads it stays off; a cube
 * that did not read it would fire. A leaf without a result needs no unit,
 * so any input may be free in it. Values share a set only on such inputs
 * too, and only while each input's set of columns, each off by at most the
 * input's error, keeps the unit's margin: the sum over the inputs of their
 * number of values times their error stays below 1/4.
 *
 * Memory: cubes_free releases what cubes_partition and cubes_of_table fill.
 */
#ifndef TF_CUBES_H
#define TF_CUBES_H

#include "values.h"

typedef struct TfCube {
    int combo;                  /* the cube's first combination (each input at the first
                                   value of its set, free ones at their first): its result
                                   is the cube's */
    int set[TF_PLAN_MAX_INPUTS]; /* per input: the set of values it is restricted to, -1: free */
} TfCube;

typedef struct TfCubes {
    TfCube *cube; /* by ascending combo */
    int n;
    /* Set s holds the value indices vals[start[s] .. start[s + 1]), ascending. */
    int *start, *vals;
    int n_sets, cap_sets, n_vals, cap_vals;
} TfCubes;

/* The cubes with a result of a table over n_in inputs of size[i] values:
 * result[c] per combination c (mixed radix, first input fastest) is -1 for
 * none, else a class (equal classes, equal results). Bit i of may_free:
 * input i may be free; of may_share: its values may share a set. Returns 0,
 * or -1 when memory runs out. */
int cubes_partition(const int *size, int n_in, const int *result, unsigned may_free,
                    unsigned may_share, TfCubes *out);

/* The cubes of TABLE plan p (its result: a column, or a non-zero number),
 * with the inputs' one_value and errors deciding what may be free and what
 * may share a set (above). */
int cubes_of_table(const TfIr *ir, const TfOpPlan *p, TfCubes *out);

/* The values of set s: *n of them. */
const int *cubes_set(const TfCubes *c, int s, int *n);

void cubes_free(TfCubes *c);

#endif
