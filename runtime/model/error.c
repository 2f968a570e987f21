/* error.c: see error.h. */
#define _POSIX_C_SOURCE 200809L
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void tf_error_set(TfError *err, const char *fmt, ...) {
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
}

void tf_error_prefix(TfError *err, const char *prefix) {
    if (!err) return;
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof err->msg - n - 3, len = strnlen(old, sizeof old - 1);
    if (len > room) len = room;
    memcpy(err->msg + n + 2, old, len);
    err->msg[n + 2 + len] = '\0';
}
