/* parse.h: the one entry point to the lexer and parser.
 *
 * tf_parse owns the reentrant flex scanner and the pure bison parser for the
 * duration of the call; no yy* symbol leaks out of grammar/.
 *
 * Memory: the returned program belongs to the caller (ast_free_program). The
 * source must stay alive only during the call.
 */
#ifndef TF_PARSE_H
#define TF_PARSE_H

#include <stddef.h>

#include "ast.h"
#include "diag.h"

/* The largest program tf_parse reads (bytes): readers refuse a larger file
 * before reading it. A string literal holds at most TF_MAX_STRING bytes of
 * source text (the vocabulary, 256 tokens escaped, is far below). */
#define TF_MAX_SOURCE (64 * 1024 * 1024)
#define TF_MAX_STRING 65536

/* Parses a whole program. Syntax errors are reported to diag (several per
 * run: the parser recovers at ';' and '}'); the return value is the tree of
 * everything that parsed, never NULL except when out of memory. The caller
 * checks diag->n_errors. */
TfProgram *tf_parse(const char *source, size_t len, TfDiag *diag);

#endif
