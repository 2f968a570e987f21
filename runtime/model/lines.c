/* lines.c: see lines.h. */
#define _POSIX_C_SOURCE 200809L
#include "lines.h"

#include <errno.h>
#include <stdlib.h>

#include "file.h"

/* Room for n bytes and a NUL in l->buf; -1 when out of memory. */
static int reserve(TfLine *l, size_t n) {
    if (n + 1 <= l->cap) return 0;
    size_t cap = l->cap < 256 ? 256 : l->cap;
    while (cap < n + 1) cap *= 2;
    char *b = realloc(l->buf, cap);
    if (!b) return -1;
    l->buf = b;
    l->cap = cap;
    return 0;
}

TfLineStatus tf_line_read(FILE *f, size_t max, TfLine *l) {
    l->len = l->bytes = 0;
    if (reserve(l, 0) < 0) {
        errno = ENOMEM;
        return TF_LINE_ERROR;
    }
    l->buf[0] = '\0';
    int c = EOF;
    flockfile(f);
    for (;;) {
        if ((c = getc_unlocked(f)) == EOF) {
            if (tf_read_interrupted(f)) continue; // nothing was consumed: the line goes on
            break;
        }
        l->bytes++;
        if (l->len < max) {
            if (l->len + 1 >= l->cap && reserve(l, l->len + 1 < max ? 2 * l->cap : max) < 0) {
                funlockfile(f);
                errno = ENOMEM;
                return TF_LINE_ERROR;
            }
            l->buf[l->len++] = (char)c;
        }
        if (c == '\n') break;
    }
    int err = ferror(f);
    funlockfile(f);
    l->buf[l->len] = '\0';
    if (err) {
        if (!errno) errno = EIO;
        return TF_LINE_ERROR;
    }
    if (l->bytes == 0) return TF_LINE_END;
    return l->bytes > l->len ? TF_LINE_LONG : TF_LINE_OK;
}

void tf_line_free(TfLine *l) {
    free(l->buf);
    l->buf = NULL;
    l->len = l->bytes = l->cap = 0;
}
