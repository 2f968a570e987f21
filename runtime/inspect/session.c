/* session.c: see session.h. */
#define _POSIX_C_SOURCE 200809L
#include "session.h"

#include <stdlib.h>
#include <string.h>

#include "inspect.h"
#include "report.h"

/* --- tfrun's entry point ---------------------------------------------------- */

int inspect_generate(const TfModel *m, const int *prompt, int len, int n_new,
                     const TfInspectOptions *opt, FILE *trace_out, int *out, TfError *err) {
    int n_out;
    return inspect_run(m, prompt, len, n_new, opt, trace_out, out, NULL, &n_out, err);
}

int inspect_run(const TfModel *m, const int *prompt, int len, int n_new,
                const TfInspectOptions *opt, FILE *trace_out, int *out, float *values, int *n_out,
                TfError *err) {
    *n_out = 0;
    int one_pass = m->output_kind == TF_OUTPUT_CLASSIFY || m->every_position;
    int stops = !one_pass && m->stop_token >= 0;
    if (one_pass) n_new = 0; /* one pass, nothing generated */
    // With a stop token, n_new is the most; the position encoding caps it.
    if (stops && len >= 1 && len <= m->max_len && n_new > m->max_len - len + 1)
        n_new = m->max_len - len + 1;
    int steps = n_new > 0 ? n_new : 1;
    if (opt->step < 0 || opt->step >= steps) {
        tf_error_set(err, "--step %d: the steps run are 0 to %d", opt->step, steps - 1);
        return -1;
    }
    // The capture of step s runs len + s positions (the token it predicts is
    // never fed back, as in tfrun): the last runs len + steps - 1.
    if (len < 1 || (long)len + steps - 1 > m->max_len) {
        tf_error_set(err, "%d prompt tokens and %d step%s do not fit the %d positions", len, steps,
                     steps == 1 ? "" : "s", m->max_len);
        return -1;
    }
    if ((opt->report_path || opt->svg_dir) &&
        inspect_check_size(m, len + opt->step, 0, TF_REPORT_MAX_CELLS,
                           opt->report_path ? "the report" : "the pictures", err) < 0)
        return -1;
    int *seq = malloc(((size_t)len + (size_t)steps) * sizeof(int));
    if (!seq) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    memcpy(seq, prompt, (size_t)len * sizeof(int));
    int rc = 0, stopped = 0, ran = 0;
    for (int step = 0; step < steps && rc == 0 && !stopped; step++) {
        int wanted = step == opt->step || (opt->trace && opt->trace_all);
        TfCapture *c = inspect_capture_with(m, seq, len + step, 0, opt->intervention, err);
        if (!c) {
            rc = -1;
            break;
        }
        c->step = step;
        ran = step + 1;
        if (c->failed) {
            stopped = 1; /* traced below, then reported */
        } else if (c->values) {
            if (values) memcpy(values, c->values, (size_t)len * sizeof(float));
            *n_out = len;
        } else if (c->outputs) {
            memcpy(out, c->outputs, (size_t)len * sizeof(int));
            *n_out = len;
        } else if (step < n_new) {
            if (stops && c->next == m->stop_token) {
                stopped = 1;
            } else {
                out[step] = c->next;
                seq[len + step] = c->next;
                *n_out = step + 1;
            }
        }
        if (wanted && opt->trace) {
            if (step > 0 && opt->trace_all) fputc('\n', trace_out);
            inspect_print_trace(c, trace_out);
        }
        if (step == opt->step && opt->report_path &&
            report_write_html(c, opt->report_path, err) < 0)
            rc = -1;
        if (rc == 0 && step == opt->step && opt->svg_dir &&
            report_write_svgs(c, opt->svg_dir, err) < 0)
            rc = -1;
        if (rc == 0 && c->failed) {
            tf_error_set(err, "%s", c->failure.msg);
            rc = -1;
        }
        capture_free(c);
    }
    if (rc == 0 && opt->step >= ran) {
        tf_error_set(err, "--step %d: generation stopped; the steps run are 0 to %d", opt->step,
                     ran - 1);
        rc = -1;
    }
    free(seq);
    return rc;
}
