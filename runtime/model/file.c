/* file.c: see file.h. */
#define _POSIX_C_SOURCE 200809L
#include "file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int tf_read_interrupted(FILE *f) {
    if (!ferror(f) || errno != EINTR) return 0;
    clearerr(f);
    return 1;
}

/* Reads f to its end into a buffer that grows by doubling, up to max bytes;
 * EFBIG when there are more. */
static char *read_stream(FILE *f, size_t hint, size_t max, size_t *len) {
    size_t cap = hint + 1 < 65536 ? 65536 : hint + 1, n = 0;
    if (cap > max + 1) cap = max + 1;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) {
            errno = ENOMEM;
            return NULL;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap && tf_read_interrupted(f)) continue;
        if (n < cap) break;
        if (n > max) {
            free(buf);
            errno = EFBIG;
            return NULL;
        }
        size_t bigger = cap > max / 2 ? max + 1 : 2 * cap;
        char *grown = realloc(buf, bigger + 1);
        if (!grown) free(buf);
        buf = grown;
        cap = bigger;
    }
    if (ferror(f)) {
        int saved = errno ? errno : EIO;
        free(buf);
        errno = saved;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

char *tf_file_read_max(const char *path, size_t max, size_t *len, TfError *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        tf_error_set(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        tf_error_set(err, "%s: cannot open: %s", path, strerror(errno));
        fclose(f);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        tf_error_set(err, "%s: not a regular file (%s)", path,
                     S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a file");
        fclose(f);
        errno = ENODEV;
        return NULL;
    }
    if (S_ISREG(st.st_mode) && (unsigned long long)st.st_size > max) {
        tf_error_set(err, "%s: %lld bytes, over the limit of %zu bytes", path,
                     (long long)st.st_size, max);
        fclose(f);
        errno = EFBIG;
        return NULL;
    }
    size_t hint = S_ISREG(st.st_mode) ? (size_t)st.st_size : 0;
    char *buf = read_stream(f, hint, max, len);
    int saved = errno;
    fclose(f);
    if (!buf) {
        if (saved == EFBIG)
            tf_error_set(err, "%s: over the limit of %zu bytes", path, max);
        else
            tf_error_set(err, "%s: cannot read: %s", path, strerror(saved));
        errno = saved;
    }
    return buf;
}

char *tf_file_read(const char *path, size_t *len) {
    return tf_file_read_max(path, TF_FILE_MAX, len, NULL);
}
