/* fuzz_util.c: see fuzz_util.h. */
#include "fuzz_util.h"

#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "file.h"
#include "infer.h"

void fuzz_fail(const char *what, const char *msg) {
    fprintf(stderr, "FINDING: %s: %s\n", what, msg);
    abort();
}

FILE *fuzz_devnull(void) {
    static FILE *f;
    if (!f && !(f = fopen("/dev/null", "w"))) fuzz_fail("fopen", "/dev/null");
    return f;
}

TfModel *fuzz_compile_file(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/programs/%s", TF_FUZZ_SOURCE_DIR, name);
    TfError err = {""};
    size_t len;
    char *src = tf_file_read_max(path, TF_FILE_MAX, &len, &err);
    if (!src) fuzz_fail("reading a program", err.msg);
    int n_errors = 0;
    TfModel *m = compile_source(path, src, len, 1, stderr, &n_errors, &err);
    free(src);
    if (!m) fuzz_fail("compiling a program", err.msg);
    return m;
}

void fuzz_one_step(const TfModel *m) {
    TfError err = {""};
    TfInfer *inf = infer_new(m, 1, &err);
    if (!inf) fuzz_fail("infer_new on a model the reader accepted", err.msg);
    int tok = m->bos >= 0 ? m->bos : 0, len = 1, out[2] = {0, 0}, n_out = 0;
    const int *prompts[1] = {&tok};
    int rc;
    if (m->output_kind == TF_OUTPUT_CLASSIFY) {
        float *probs = calloc((size_t)m->n_classes, sizeof *probs);
        if (!probs) fuzz_fail("calloc", "out of memory");
        rc = infer_classify(inf, prompts, &len, 1, probs, &err);
        free(probs);
    } else if (model_numeric_output(m)) {
        float values[1];
        float *outs[1] = {values};
        rc = infer_every_position_values(inf, prompts, &len, 1, outs, &err);
    } else if (m->every_position) {
        int *outs[1] = {out};
        rc = infer_every_position(inf, prompts, &len, 1, outs, &err);
    } else if (m->stop_token >= 0) {
        rc = infer_generate_until(inf, prompts, &len, 1, 1, m->stop_token, out, &n_out, &err);
    } else {
        rc = infer_generate(inf, prompts, &len, 1, 1, out, &err);
    }
    /* A failed run-time check (model.h's TfCheck) is the model's own
     * verdict on its input, and float32 overflow one on its weights, both
     * reported as errors: anything else is not. */
    if (rc < 0 && infer_n_failed(inf) == 0 && !infer_overflowed(inf))
        fuzz_fail("one inference step on a model the reader accepted", err.msg);
    infer_free(inf);
}
