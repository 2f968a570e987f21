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

#endif
