/* testmodel.h: test helpers that compile programs and compare float arrays.
 *
 * They fail the running Check test (ck_abort_msg) on any problem, so a test
 * can use their results without checking. Compiled models belong to the
 * caller (model_free).
 */
#ifndef TF_TESTMODEL_H
#define TF_TESTMODEL_H

#include <stddef.h>

#include "model.h"
#include "train.h"

/* Compiles a program of the source tree ($TF_SOURCE_DIR/relpath), with
 * seed 001's constructions (-O0). */
TfModel *tf_compile_program(const char *relpath);
/* The same at a given optimization level (0: -O0, 1: -O). */
TfModel *tf_compile_program_opt(const char *relpath, int opt_level);
/* The same, one layer per op when no_schedule (tfc --no-schedule). */
TfModel *tf_compile_program_opts(const char *relpath, int opt_level, int no_schedule);
/* Compiles program text given inline (-O0). */
TfModel *tf_compile_text(const char *source);

/* Splits register `name` of m at residual state `state` (model.h's live
 * ranges): it holds its columns in states live_from..state - 1, and a new
 * register `new_name` of the same kind and columns from `state` to its end
 * (the checks of `name` after layer state - 1 or later move to it); then
 * validates m. A model whose registers share columns, as the compiler
 * makes them when it gives a dead register's columns to a later one. */
void tf_split_register(TfModel *m, const char *name, int state, const char *new_name);

/* Counts the i where |got - want| > atol + rtol * |want| (or either is NaN);
 * describes the worst of them (index, both values) in msg. */
int tf_compare_floats(const float *got, const float *want, size_t n, double rtol, double atol,
                      char *msg, size_t msgsz);

/* The finite-difference gradient check every backward pass has: at every
 * stride-th parameter outside [skip_lo, skip_hi), the central difference of
 * trainer t's loss on b (eps 1e-3) against g, the gradient its backward pass
 * gave (a copy: the check runs forward-backward again). Fails the running
 * test naming `what`, the parameter and its tensor of m. Returns how many
 * were checked; *nonzero (may be NULL) counts those with |g| > 1e-3. */
int tf_check_gradients(TfTrainer *t, const TfBatch *b, const TfModel *m, const float *g,
                       size_t stride, size_t skip_lo, size_t skip_hi, const char *what,
                       int *nonzero);

#endif
