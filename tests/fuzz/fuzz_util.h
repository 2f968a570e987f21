/* fuzz_util.h: what the libFuzzer harnesses share (tests/fuzz/README.md).
 *
 * Memory: fuzz_compile_file returns a model the caller frees (model_free).
 */
#ifndef TF_FUZZ_UTIL_H
#define TF_FUZZ_UTIL_H

#include <stddef.h>
#include <stdio.h>

#include "model.h"

/* A finding: prints what went wrong and aborts (libFuzzer saves the input). */
void fuzz_fail(const char *what, const char *msg);

/* /dev/null for output the harnesses do not read. */
FILE *fuzz_devnull(void);

/* Compiles programs/<name> of the source tree (TF_FUZZ_SOURCE_DIR): the
 * models the line readers run. Aborts when it cannot. */
TfModel *fuzz_compile_file(const char *name);

/* One inference step on the model: a one-token prompt (its bos, else token
 * 0) through generation, every-position output (tokens or numbers) or
 * classification. A model the reader accepted must run: any failure but a
 * failed run-time check is a finding. */
void fuzz_one_step(const TfModel *m);

#endif
