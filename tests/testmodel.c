/* testmodel.c: see testmodel.h. */
#define _POSIX_C_SOURCE 200809L
#include "testmodel.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "testutil.h"

static TfModel *compile_or_fail(const char *name, const char *src, size_t len, int opt_level,
                                int no_schedule) {
    char *diags = NULL;
    size_t diags_len = 0;
    FILE *out = open_memstream(&diags, &diags_len);
    ck_assert_ptr_nonnull(out);
    int n_errors = 0;
    TfError err = {""};
    TfCompileOptions opts = {.opt_level = opt_level, .max_params = 0, .no_schedule = no_schedule};
    TfModel *m = compile_source_opts(name, src, len, &opts, out, &n_errors, &err);
    fclose(out);
    if (!m) ck_abort_msg("%s does not compile (%d errors): %s%s", name, n_errors, err.msg, diags);
    free(diags);
    return m;
}

TfModel *tf_compile_program(const char *relpath) { return tf_compile_program_opt(relpath, 0); }

TfModel *tf_compile_program_opt(const char *relpath, int opt_level) {
    return tf_compile_program_opts(relpath, opt_level, 0);
}

TfModel *tf_compile_program_opts(const char *relpath, int opt_level, int no_schedule) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", tf_env_path("TF_SOURCE_DIR"), relpath);
    size_t len = 0;
    char *src = tf_read_file(path, &len);
    ck_assert_msg(src != NULL, "cannot read %s", path);
    TfModel *m = compile_or_fail(relpath, src, len, opt_level, no_schedule);
    free(src);
    return m;
}

TfModel *tf_compile_text(const char *source) {
    return compile_or_fail("<test>", source, strlen(source), 0, 0);
}

void tf_split_register(TfModel *m, const char *name, int state, const char *new_name) {
    int r = model_find_register(m, name);
    ck_assert_msg(r >= 0, "no register '%s'", name);
    TfRegister old = m->regs[r];
    ck_assert_int_gt(state, old.live_from);
    ck_assert_int_le(state, old.live_to < m->n_layers ? old.live_to : m->n_layers);
    TfError err = {""};
    int n = old.kind == TF_REG_CATEGORICAL
                ? model_add_categorical(m, new_name, old.offset, old.size,
                                        (const char *const *)old.values, &err)
                : model_add_register(m, new_name, old.kind, old.offset, old.size, &err);
    ck_assert_msg(n >= 0, "%s", err.msg);
    m->regs[n].live_from = state;
    m->regs[n].live_to = old.live_to;
    m->regs[r].live_to = state - 1;
    for (int k = 0; k < m->n_checks; k++)
        if (m->checks[k].reg == r && m->checks[k].layer + 1 >= state) m->checks[k].reg = n;
    ck_assert_msg(model_validate(m, &err) == 0, "%s", err.msg);
}

int tf_compare_floats(const float *got, const float *want, size_t n, double rtol, double atol,
                      char *msg, size_t msgsz) {
    int bad = 0;
    size_t worst = 0;
    double worst_excess = -1;
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - (double)want[i]);
        double tol = atol + rtol * fabs((double)want[i]);
        int nan = isnan(got[i]) || isnan(want[i]);
        if (nan || diff > tol) {
            bad++;
            double excess = nan ? INFINITY : diff - tol;
            if (excess > worst_excess) {
                worst_excess = excess;
                worst = i;
            }
        }
    }
    if (bad)
        snprintf(msg, msgsz, "%d of %zu values differ; worst at index %zu: got %.9g, want %.9g",
                 bad, n, worst, got[worst], want[worst]);
    else
        snprintf(msg, msgsz, "all %zu values agree", n);
    return bad;
}

int tf_check_gradients(TfTrainer *t, const TfBatch *b, const TfModel *m, const float *g,
                       size_t stride, size_t skip_lo, size_t skip_hi, const char *what,
                       int *nonzero) {
    size_t n;
    float *p = trainer_params(t, &n);
    int checked = 0;
    if (nonzero) *nonzero = 0;
    for (size_t i = 0; i < n; i += stride) {
        if (i >= skip_lo && i < skip_hi) continue;
        float keep = p[i];
        double fd = 0, tol = 0;
        /* A ReLU kink within eps of the point bends the central difference:
           a quarter of the step, where the first disagrees, tells a kink
           from a wrong gradient. */
        for (float eps = 1e-3f; eps >= 2e-4f; eps /= 4) {
            p[i] = keep + eps;
            double lp = trainer_forward_backward(t, b, 0, NULL);
            p[i] = keep - eps;
            double lm = trainer_forward_backward(t, b, 0, NULL);
            p[i] = keep;
            fd = (lp - lm) / (2 * eps);
            tol = 2e-2 * fmax(fabs(fd), fabs(g[i])) + 2e-3;
            if (fabs(fd - g[i]) <= tol) break;
        }
        int ti = 0;
        while (ti + 1 < m->n_tensors && trainer_tensor_offset(t, ti + 1) <= i) ti++;
        ck_assert_msg(fabs(fd - g[i]) <= tol,
                      "%s, parameter %zu (%s): analytic %.6g, finite difference %.6g", what, i,
                      m->tensors[ti].name, g[i], fd);
        checked++;
        if (nonzero) *nonzero += fabs(g[i]) > 1e-3;
    }
    return checked;
}
