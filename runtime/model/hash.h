/* hash.h: FNV-1a, the one hash of compiler and runtime (register names,
 * tensors, tables, cube children; the trainer's sets of examples). Every use
 * resolves collisions by comparing the keys, or only counts distinct keys
 * with a stated chance of error, so the hash decides where a key is looked
 * for, never what is found.
 */
#ifndef TF_HASH_H
#define TF_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_INIT 1469598103934665603ull /* FNV-1a's offset basis */

/* h with one more word mixed in. */
static inline uint64_t hash_word(uint64_t h, uint64_t x) { return (h ^ x) * 1099511628211ull; }

/* h with n bytes mixed in, one at a time. */
static inline uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = hash_word(h, b[i]);
    return h;
}

#endif
