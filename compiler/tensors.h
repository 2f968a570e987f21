/* tensors.h: a model's tensors, an identical one stored once.
 *
 * compiler/lower.c and compiler/schedule.c add every tensor through a
 * TfTensorSet: with TENSORS_FIND, a tensor equal (rank, shape and bytes) to
 * one stored earlier with TENSORS_FINDABLE is not stored again, and the
 * earlier one's index is returned. Sharing changes no output: the runtime
 * reads a tensor by index, whoever uses it.
 *
 * Memory: a TfTensorSet owns its per-tensor hashes and flags
 * (tensors_free); it borrows the model, which owns the tensors.
 */
#ifndef TF_TENSORS_H
#define TF_TENSORS_H

#include <stdint.h>

#include "model.h"

#define TENSORS_FIND 1u     /* look for an identical tensor before storing */
#define TENSORS_FINDABLE 2u /* later tensors may be found to be this one */

typedef struct TfTensorSet {
    TfModel *m;
    uint64_t *hash;          /* per tensor of m */
    unsigned char *findable; /* per tensor of m */
    int cap;
} TfTensorSet;

/* Stores the floats w (shape[0] x shape[1], or shape[0] when ndim is 1) as
 * tensor `name` of S->m, a name no tensor has yet, or with TENSORS_FIND
 * returns an identical findable tensor. w is copied, not freed. Returns the
 * tensor's index, or -1 with err set. */
int tensors_store(TfTensorSet *S, const char *name, int ndim, const int64_t *shape,
                  const float *w, unsigned flags, TfError *err);
void tensors_free(TfTensorSet *S);

#endif
