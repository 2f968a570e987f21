/* tensors.c: store a tensor once (tensors.h). */
#include "tensors.h"

#include <stdlib.h>
#include <string.h>

#include "hash.h"

/* Room for one more tensor's hash and flag. */
static int grow(TfTensorSet *S, TfError *err) {
    if (S->m->n_tensors < S->cap) return 0;
    int cap = S->cap ? 2 * S->cap : 64;
    uint64_t *h = realloc(S->hash, (size_t)cap * sizeof *h);
    if (h) S->hash = h;
    unsigned char *f = h ? realloc(S->findable, (size_t)cap) : NULL;
    if (f) S->findable = f;
    if (!h || !f) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    S->cap = cap;
    return 0;
}

int tensors_store(TfTensorSet *S, const char *name, int ndim, const int64_t *shape,
                  const float *w, unsigned flags, TfError *err) {
    size_t n = (size_t)shape[0] * (size_t)(ndim == 2 ? shape[1] : 1);
    uint64_t h = hash_bytes(HASH_INIT, w, n * sizeof *w);
    for (int t = 0; (flags & TENSORS_FIND) && t < S->m->n_tensors; t++) {
        const TfTensor *T = &S->m->tensors[t];
        if (S->findable[t] && S->hash[t] == h && T->ndim == ndim && T->nelem == n &&
            T->shape[0] == shape[0] && (ndim == 1 || T->shape[1] == shape[1]) &&
            memcmp(T->data, w, n * sizeof *w) == 0)
            return t;
    }
    if (grow(S, err) < 0) return -1;
    int t = model_add_new_tensor(S->m, name, ndim, shape, err);
    if (t < 0) return -1;
    S->hash[t] = h;
    S->findable[t] = (flags & TENSORS_FINDABLE) != 0;
    memcpy(S->m->tensors[t].data, w, n * sizeof *w);
    return t;
}

void tensors_free(TfTensorSet *S) {
    free(S->hash);
    free(S->findable);
    S->hash = NULL;
    S->findable = NULL;
    S->cap = 0;
}
