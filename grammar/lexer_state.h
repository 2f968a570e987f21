/* lexer_state.h: what the scanner and the parser share (private to grammar/).
 *
 * Memory: a TfLexString belongs to the parser value that holds it; the
 * parser moves its bytes into the syntax tree or frees it.
 */
#ifndef TF_LEXER_STATE_H
#define TF_LEXER_STATE_H

#include "ast.h"
#include "diag.h"
#include "parse.h"

#define TF_MAX_INT_LITERAL 1000000000L

/* The scanner's extra data: where it is, and where to report. */
typedef struct TfLexState {
    TfDiag *diag;
    int line, col;     /* of the next byte */
    TfLoc last_end;    /* the token just scanned */
    TfLoc prev_end;    /* the one before it: "expected ';' after ..." points here */
} TfLexState;

/* A decoded string literal: bytes and the location of each; bad when the
 * scanner reported it (too long, a byte to escape, unterminated). */
typedef struct TfLexString {
    char *bytes;
    int len;
    TfLoc *locs;
    int bad;
} TfLexString;

#endif
