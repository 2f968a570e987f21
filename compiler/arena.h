/* arena.h: the allocator that owns a TfIr's contents.
 *
 * Everything reachable from a TfIr that does not grow (op arguments, plans,
 * value sets, column labels, hidden registers' names) is carved from the
 * TfIr's arena and released all at once with it (check_free): no stage frees
 * a piece, and a stage added later allocates the same way.
 *
 * Memory: an arena owns its blocks; arena_free releases them, and every
 * pointer it handed out, together.
 */
#ifndef TF_ARENA_H
#define TF_ARENA_H

#include <stddef.h>

typedef struct TfArenaBlock TfArenaBlock;

typedef struct TfArena {
    TfArenaBlock *blocks; /* newest first */
    int failed;           /* an allocation failed (memory ran out) */
} TfArena;

/* n zeroed bytes, aligned for any type; NULL (and a->failed set) when memory
 * ran out. */
void *arena_alloc(TfArena *a, size_t n);
/* A copy of s in the arena; NULL (a->failed set) when memory ran out. */
char *arena_strdup(TfArena *a, const char *s);
void arena_free(TfArena *a);

#endif
