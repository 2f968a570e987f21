/* testutil.h: what every Check test program shares.
 *
 * tf_run_suite runs a suite and turns the result into an exit status that
 * fails when any test failed or when no test ran at all.
 */
#ifndef TF_TESTUTIL_H
#define TF_TESTUTIL_H

#include <check.h>
#include <stddef.h>

int tf_run_suite(Suite *s);

/* Whole file, NUL-terminated, malloc'd; NULL when it cannot be read. */
char *tf_read_file(const char *path, size_t *len);

/* getenv(var), or the running test fails naming the variable. */
const char *tf_env_path(const char *var);

/* The repository's file at `rel` ("programs/sort.tfp"; under $TF_SOURCE_DIR),
 * as tf_read_file reads it; the running test fails when it cannot be read. */
char *tf_read_source(const char *rel, size_t *len);

/* A chain of Counts, each read only by the next: the third takes the
 * first's columns once an MLP clears them (compiler/schedule.c, step 4). */
#define TF_COUNT_CHAIN_SRC                                                                    \
    "vocab \"^abcd0123456\"; bos '^'; maxlen 7;\n"                                            \
    "cat a, b, c, out;\n"                                                                     \
    "a: Count(k.tokens == q.tokens) -> a;\n"                                                  \
    "b: Count(k.a == q.a) -> b;\n"                                                            \
    "c: Count(k.b == q.b) -> c;\n"                                                            \
    "out: Map(chr(ord('0') + c)) -> out;\n"                                                   \
    "output out at every position;\n"

#endif
