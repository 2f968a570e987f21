/* compile.c: parse, check, lower; the source goes into the model. */
#include "compile.h"

#include <stdlib.h>
#include <string.h>

#include "checker.h"
#include "diag.h"
#include "learned.h"
#include "lower.h"
#include "parse.h"

static char *dup_text(const char *s, size_t len) {
    char *p = malloc(len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

TfModel *compile_source(const char *filename, const char *source, size_t len, int opt_level,
                        FILE *diag_out, int *n_errors, TfError *err) {
    TfDiag diag;
    diag_init(&diag, filename, source, len, diag_out);
    *n_errors = 0;
    TfProgram *prog = tf_parse(source, len, &diag);
    if (!prog) {
        tf_error_set(err, "out of memory while parsing");
        return NULL;
    }
    TfModel *m = NULL;
    // A program with syntax errors is not checked further: its missing
    // statements would only produce follow-on errors.
    TfIr *ir = diag.n_errors == 0 ? check_program(prog, &diag) : NULL;
    if (ir && diag.n_errors == 0) {
        if (ir->model) {
            TfLearnedSpec spec;
            if (learned_check(ir->model, ir->n_vocab, ir->generate, &diag, &spec) == 0)
                m = learned_build(&spec, ir->vocab, ir->n_vocab, ir->generate, err);
            learned_spec_free(&spec);
        } else {
            m = lower_program(ir, opt_level, err);
        }
        if (m) {
            const char *base = strrchr(filename, '/');
            m->source = dup_text(source, len);
            m->source_name = dup_text(base ? base + 1 : filename, strlen(base ? base + 1 : filename));
            if (!m->source || !m->source_name) {
                tf_error_set(err, "out of memory");
                model_free(m);
                m = NULL;
            }
        }
    }
    check_free(ir);
    ast_free_program(prog);
    diag_finish(&diag);
    *n_errors = diag.n_errors;
    return m;
}
