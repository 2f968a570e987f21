/* arena.c: blocks of at least ARENA_BLOCK bytes, each handed out front to
 * back (arena.h). */
#include "arena.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK ((size_t)64 << 10)

struct TfArenaBlock {
    TfArenaBlock *next;
    size_t used, cap;
    alignas(max_align_t) unsigned char data[];
};

void *arena_alloc(TfArena *a, size_t n) {
    const size_t align = alignof(max_align_t);
    size_t need = (n ? n : 1) + align - 1;
    if (need < n) { // overflow
        a->failed = 1;
        return NULL;
    }
    need -= need % align;
    TfArenaBlock *b = a->blocks;
    if (!b || b->cap - b->used < need) {
        // A large piece gets a block of its own behind the current one,
        // which stays open for the small pieces.
        int own = need > ARENA_BLOCK / 4;
        size_t cap = own ? need : ARENA_BLOCK;
        if (cap > (size_t)-1 - sizeof *b || !(b = malloc(sizeof *b + cap))) {
            a->failed = 1;
            return NULL;
        }
        b->used = 0;
        b->cap = cap;
        if (own && a->blocks) {
            b->next = a->blocks->next;
            a->blocks->next = b;
        } else {
            b->next = a->blocks;
            a->blocks = b;
        }
    }
    void *p = b->data + b->used;
    b->used += need;
    memset(p, 0, need);
    return p;
}

char *arena_strdup(TfArena *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = arena_alloc(a, n);
    if (p) memcpy(p, s, n);
    return p;
}

void arena_free(TfArena *a) {
    while (a->blocks) {
        TfArenaBlock *next = a->blocks->next;
        free(a->blocks);
        a->blocks = next;
    }
    a->failed = 0;
}
