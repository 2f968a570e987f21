/* diag.h: compiler diagnostics, printed as
 *
 *   adder.tfp:12:18: error: unknown register 'lef'
 *      12 | GetRelativeToken(lef) -> left;
 *         |                  ^~~
 *   hint: did you mean 'left'?
 *
 * A TfDiag collects the errors of one compilation; the compiler keeps going
 * after an error where it can, so one run reports several. Messages are
 * written to `out` as they are reported; with `out` NULL they are only
 * counted (tfc compiles a program a second time, unfused, to compare).
 *
 * Memory: a TfDiag borrows the file name and source text; they must outlive it.
 */
#ifndef TF_DIAG_H
#define TF_DIAG_H

#include <stddef.h>
#include <stdio.h>

#include "ast.h"

/* Errors printed per compilation; the rest are counted (diag_finish). */
#define TF_DIAG_MAX_ERRORS 20
/* A message, and a source line, are cut to about this many bytes ("..."). */
#define TF_DIAG_MAX_TEXT 240

typedef struct TfDiag {
    const char *filename;
    const char *source;
    size_t source_len;
    FILE *out;
    int n_errors;
    int n_warnings;
} TfDiag;

void diag_init(TfDiag *d, const char *filename, const char *source, size_t len, FILE *out);

#if defined(__GNUC__)
#define TF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TF_PRINTF(a, b)
#endif

/* "file:line:col: error: msg", the source line and a caret span under loc.
 * After TF_DIAG_MAX_ERRORS errors, further ones are counted, not printed.
 * Long messages and source lines are cut (TF_DIAG_MAX_TEXT), so that the
 * output stays small whatever the input. */
void diag_error(TfDiag *d, TfLoc loc, const char *fmt, ...) TF_PRINTF(3, 4);
void diag_warning(TfDiag *d, TfLoc loc, const char *fmt, ...) TF_PRINTF(3, 4);
/* "file:line:col: note: msg" with the source line, for a related place. */
void diag_note(TfDiag *d, TfLoc loc, const char *fmt, ...) TF_PRINTF(3, 4);
/* "hint: msg", no location: advice attached to the previous error. */
void diag_hint(TfDiag *d, const char *fmt, ...) TF_PRINTF(2, 3);
/* "file: error: msg", for errors of the whole file (no location). */
void diag_file_error(TfDiag *d, const char *fmt, ...) TF_PRINTF(2, 3);
/* At the end of a compilation: "file: N more errors not shown" when errors
 * were counted but not printed. */
void diag_finish(TfDiag *d);
/* 1 once errors are no longer printed: callers may skip work that only
 * serves the message. */
int diag_quiet(const TfDiag *d);

#endif
