/* error.h: how library code reports a failure.
 *
 * Library functions never print and never exit: they return a failure value
 * (-1 or NULL) and write one line, without a trailing newline, into a TfError
 * the caller owns. Only a program's main decides what to print and how to exit.
 */
#ifndef TF_ERROR_H
#define TF_ERROR_H

#include <stddef.h>

typedef struct TfError {
    char msg[512];
} TfError;

/* Sets err->msg from a printf format; err may be NULL. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void tf_error_set(TfError *err, const char *fmt, ...);

/* Whether the failure was memory running out: every allocation failure is
 * reported with a message that says "out of memory" (the tools exit with
 * a status of their own for it: runtime/tools/cli.h). */
int tf_error_is_memory(const TfError *err);

/* Prefixes err->msg with "<prefix>: ". */
void tf_error_prefix(TfError *err, const char *prefix);

/* Levenshtein distance between the first la bytes of a and the string b,
 * for "did you mean" hints (the compiler's and the tools'); 1000 when
 * either is longer than 63 bytes. */
int tf_edit_distance(const char *a, size_t la, const char *b);

#endif
