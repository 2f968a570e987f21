/* file.c: see file.h. */
#include "file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

char *tf_file_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *bigger = realloc(buf, 2 * cap + 1);
        if (!bigger) free(buf);
        buf = bigger;
        cap *= 2;
    }
    int saved = errno;
    if (!buf || ferror(f)) {
        free(buf);
        fclose(f);
        errno = buf ? (saved ? saved : EIO) : ENOMEM;
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}
