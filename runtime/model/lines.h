/* lines.h: the one line reader of text input (--batch, --check, training
 * data, the ranks' blocks), with a cap on a line's length.
 *
 * A line longer than the cap is consumed but not stored (its first max
 * bytes are kept): a 1 GB line costs max bytes of memory, not 1 GB, and is
 * refused as too long. An allocation that fails is an error, never the end
 * of the input (getline returns -1 for both).
 *
 * Memory: a TfLine's buffer is malloc'd, grows as lines need, and is the
 * caller's to release with tf_line_free.
 */
#ifndef TF_LINES_H
#define TF_LINES_H

#include <stddef.h>
#include <stdio.h>

/* The cap for a model of max_len positions: a prompt and an answer hold at
 * most max_len tokens (one byte each), a numeric answer max_len values of
 * a few dozen characters; the rest is room for '\r' and labels. */
#define TF_LINE_MAX(max_len) ((size_t)(max_len) * 64 + 4096)

typedef struct TfLine {
    char *buf;    /* the line, its '\n' kept (none on a last line without one), NUL-terminated */
    size_t len;   /* bytes in buf */
    size_t bytes; /* bytes consumed from the stream: len, or more for a line too long */
    size_t cap;
} TfLine;

typedef enum TfLineStatus {
    TF_LINE_ERROR = -1, /* a read error or out of memory (errno: ENOMEM); nothing more to read */
    TF_LINE_END = 0,    /* the end of the input: no line */
    TF_LINE_OK = 1,     /* a line in buf */
    TF_LINE_LONG = 2,   /* a line over the cap: consumed, buf holds its first max bytes */
} TfLineStatus;

/* Reads the next line of f (at most max bytes, '\n' included, are kept). */
TfLineStatus tf_line_read(FILE *f, size_t max, TfLine *l);

void tf_line_free(TfLine *l);

#endif
