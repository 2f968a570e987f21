/* testutil.c: see testutil.h. */
#include "testutil.h"

#include "file.h"

#include <stdio.h>
#include <stdlib.h>

int tf_run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int ran = srunner_ntests_run(sr), failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (ran == 0) {
        fprintf(stderr, "no test ran\n");
        return EXIT_FAILURE;
    }
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

char *tf_read_file(const char *path, size_t *len) {
    size_t n = 0;
    char *buf = tf_file_read(path, &n);
    if (buf && len) *len = n;
    return buf;
}

char *tf_read_source(const char *rel, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", tf_env_path("TF_SOURCE_DIR"), rel);
    char *s = tf_read_file(path, len);
    ck_assert_msg(s != NULL, "cannot read %s", path);
    return s;
}

const char *tf_env_path(const char *var) {
    const char *v = getenv(var);
    ck_assert_msg(v != NULL && *v, "environment variable %s is not set (run the tests with ctest)",
                  var);
    return v;
}
