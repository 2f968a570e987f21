/* runner.c: streaming prompts through several engines at once. */
#define _POSIX_C_SOURCE 200809L

#include "runner.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infer.h"
#include "lines.h"
#include "parallel.h"

int runner_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); /* ranks on this machine */
    if (local && atol(local) > 1) n /= atol(local);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

int runner_prepare_prompt(const TfModel *m, const char *text, int len, int n_new, int *ids,
                         TfError *err) {
    // Characters are counted before they are read; words must be read.
    int n = len > 0 && m->token_names ? infer_tokenize(m, text, len, ids, err) : len;
    if (n < 0) return -1;
    if (n == 0) {
        tf_error_set(err, "empty prompt");
        return -1;
    }
    if (m->every_position || m->stop_token >= 0) {
        // One pass over the prompt; or generation that stops, at the latest,
        // when the position encoding ends.
        if (n > m->max_len) {
            tf_error_set(err, "%d prompt tokens exceed the %d positions of the position encoding",
                         n, m->max_len);
            return -1;
        }
    } else if ((long)n + (n_new > 0 ? n_new - 1 : 0) > m->max_len) {
        // The last generated token is never fed back: n + n_new - 1 positions.
        tf_error_set(err,
                     "%d prompt tokens plus %d to generate exceed the %d positions of the "
                     "position encoding",
                     n, n_new, m->max_len);
        return -1;
    }
    if (!m->token_names && infer_tokenize(m, text, len, ids, err) < 0) return -1;
    if (m->bos >= 0 && ids[0] != m->bos) {
        char t[TF_TOKEN_TEXT_MAX];
        model_token_text(m, m->bos, t);
        tf_error_set(err, "the input must start with the beginning-of-sequence token '%s'", t);
        return -1;
    }
    return n;
}

int runner_limit_new_tokens(const TfModel *m, int n_new, int *limited, TfError *err) {
    *limited = n_new;
    if (n_new <= m->max_len) return 0;
    // Generation that stops by itself, or none (one pass: n_new is not used).
    if (m->stop_token >= 0 || m->every_position || m->output_kind == TF_OUTPUT_CLASSIFY) {
        *limited = m->max_len;
        return 0;
    }
    tf_error_set(err, "%d tokens to generate exceed the %d positions of the position encoding",
                 n_new, m->max_len);
    return -1;
}

int runner_output_start(const TfModel *m) { return m->bos >= 0 ? 1 : 0; }

void runner_print_outputs(FILE *f, const TfModel *m, const char *prompt, size_t len,
                         const int *toks, int n) {
    fwrite(prompt, 1, len, f);
    fputc('\t', f);
    char buf[TF_TOKEN_TEXT_MAX];
    for (int i = runner_output_start(m); i < n; i++) {
        if (m->token_names && i > runner_output_start(m)) fputc(' ', f);
        int k = model_token_text(m, toks[i], buf);
        fwrite(buf, 1, (size_t)k, f);
    }
    fputc('\n', f);
}

/* The values of positions runner_output_start(m)..n-1, separated by single
 * spaces, into buf (at least n * TF_VALUE_TEXT_MAX bytes). Returns the length. */
static size_t values_text(char *buf, const TfModel *m, const float *vals, int n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = runner_output_start(m); i < n; i++) {
        if (i > runner_output_start(m)) buf[k++] = ' ';
        k += (size_t)model_value_text(vals[i], buf + k);
    }
    return k;
}

void runner_print_values(FILE *f, const TfModel *m, const char *prompt, size_t len,
                        const float *vals, int n) {
    fwrite(prompt, 1, len, f);
    fputc('\t', f);
    char buf[TF_VALUE_TEXT_MAX + 1];
    for (int i = runner_output_start(m); i < n; i++) {
        if (i > runner_output_start(m)) fputc(' ', f);
        model_value_text(vals[i], buf);
        fputs(buf, f);
    }
    fputc('\n', f);
}

int runner_parse_values(const char *text, double *out, int max, TfError *err) {
    int n = 0;
    const char *p = text;
    while (*p == ' ') p++;
    while (*p) {
        size_t len = strcspn(p, " ");
        char tok[64];
        if (len >= sizeof tok) {
            tf_error_set(err, "expected value %d is too long", n + 1);
            return -1;
        }
        memcpy(tok, p, len);
        tok[len] = '\0';
        // A decimal number, or a fraction p/q of two.
        char *end;
        double v = strtod(tok, &end);
        int ok = end != tok;
        if (ok && *end == '/') {
            char *den = end + 1, *end2;
            double q = strtod(den, &end2);
            ok = end2 != den && *end2 == '\0' && q != 0 && isfinite(q);
            v /= q;
        } else {
            ok = ok && *end == '\0';
        }
        if (!ok || !isfinite(v)) {
            tf_error_set(err, "expected value %d '%s' is not a number or a fraction p/q", n + 1,
                         tok);
            return -1;
        }
        if (n < max) out[n] = v;
        n++;
        p += len;
        while (*p == ' ') p++;
    }
    return n;
}

int runner_values_match(const TfModel *m, const float *vals, int n, const double *want,
                       int n_want) {
    int start = runner_output_start(m);
    if (n - start != n_want) return 0;
    for (int i = 0; i < n_want; i++) {
        double e = want[i];
        if (!(fabs((double)vals[start + i] - e) <= m->output_error_bound + 1e-6 * fabs(e)))
            return 0;
    }
    return 1;
}

void runner_print_completion(FILE *f, const TfModel *m, const char *prompt, size_t len,
                            const int *toks, int n) {
    fwrite(prompt, 1, len, f);
    char buf[TF_TOKEN_TEXT_MAX];
    for (int i = 0; i < n; i++) {
        if (m->token_names) fputc(' ', f);
        int k = model_token_text(m, toks[i], buf);
        fwrite(buf, 1, (size_t)k, f);
    }
    fputc('\n', f);
}

/* One prompt of the chunk being gathered; buffers are reused. */
typedef struct Slot {
    char *text;    /* the prompt, NUL-terminated */
    int len;
    int n_ids;     /* its tokens */
    char *expect;  /* check mode: the expected completion (points into text) */
    double *want;  /* check mode, numeric models: the expected values */
    int n_want, want_cap;
    int *ids;
    int ids_cap;
    size_t text_cap;
    long lineno;
} Slot;

/* What one thread generates: slots [first, first + n). */
typedef struct Work {
    const TfModel *m;
    TfInfer *inf;
    const int **ids;
    int *lens;
    int n, n_new;
    int *out;    /* [n, stride]: generated tokens, or the token at every position */
    int stride;
    int *n_out;  /* [n]: tokens kept (stop token or every position) */
    int **rows;  /* [n]: every position: out + i * stride */
    float *vals; /* numeric models: [n, stride] the value at every position */
    float **vrows; /* [n]: vals + i * stride */
    char *failed;  /* models with checks: [n] 1 when prompt i failed one */
    TfError *why;  /* [n] its failure */
    int rc;
    TfError err;
} Work;

static void work_run(Work *w) {
    w->rc = 0;
    if (!w->n) return;
    const TfModel *m = w->m;
    if (model_numeric_output(m)) {
        for (int i = 0; i < w->n; i++) {
            w->vrows[i] = w->vals + (size_t)i * (size_t)w->stride;
            w->n_out[i] = w->lens[i];
        }
        w->rc = infer_every_position_values(w->inf, w->ids, w->lens, w->n, w->vrows, &w->err);
    } else if (m->every_position) {
        for (int i = 0; i < w->n; i++) {
            w->rows[i] = w->out + (size_t)i * (size_t)w->stride;
            w->n_out[i] = w->lens[i];
        }
        w->rc = infer_every_position(w->inf, w->ids, w->lens, w->n, w->rows, &w->err);
    } else if (m->stop_token >= 0) {
        w->rc = infer_generate_until(w->inf, w->ids, w->lens, w->n, w->n_new, m->stop_token,
                                     w->out, w->n_out, &w->err);
    } else {
        for (int i = 0; i < w->n; i++) w->n_out[i] = w->n_new;
        w->rc = infer_generate(w->inf, w->ids, w->lens, w->n, w->n_new, w->out, &w->err);
    }
    if (!m->n_checks) return;
    // A prompt that failed a run-time check fails alone.
    memset(w->failed, 0, (size_t)w->n);
    if (w->rc < 0 && infer_n_failed(w->inf) > 0) {
        w->rc = 0;
        for (int i = 0; i < w->n; i++) {
            const char *why = infer_failure(w->inf, i);
            if (!why) continue;
            w->failed[i] = 1;
            tf_error_set(&w->why[i], "%s", why);
        }
    }
}

/* parallel_ranges's work: the shares lo..hi-1 of a chunk. */
static void run_shares(void *ctx, int lo, int hi, int worker) {
    (void)worker;
    Work *work = ctx;
    for (int t = lo; t < hi; t++) work_run(&work[t]);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct Runner {
    const TfModel *m;
    const TfRunnerOptions *o;
    FILE *out, *errs;
    const char *in_name;
    TfRunnerStats *st;
    TfInfer **engines;
    Work *work;
    Slot *slots;
    int cap;          /* n_threads * batch_size */
    const int **ids;  /* [cap] */
    int *lens;        /* [cap] */
    int n_new;        /* o->n_new, limited (runner_limit_new_tokens) */
    int stride;       /* tokens per prompt: n_new, or max_len for every position */
    int *toks;        /* [cap * stride] */
    int *n_out;       /* [cap] tokens kept per prompt */
    int **rows;       /* [cap] */
    float *vals;      /* numeric models: [cap * stride] */
    float **vrows;    /* [cap] */
    char *failed;     /* [cap] */
    TfError *why;     /* [cap] */
    char *text_buf;   /* one completion as text */
} Runner;

/* Tells the progress callback that something is about to be printed. */
static void notify_output(const Runner *R) {
    if (R->o->progress) R->o->progress(R->o->progress_ctx, NULL);
}

/* Generates the n gathered prompts on the engines, then prints or checks
 * them in order. */
static int run_chunk(Runner *R, int n, TfError *err) {
    const TfRunnerOptions *o = R->o;
    int n_new = R->n_new, stride = R->stride;
    for (int i = 0; i < n; i++) {
        R->ids[i] = R->slots[i].ids;
        R->lens[i] = R->slots[i].n_ids;
    }
    int per = o->batch_size, used = 0;
    for (int t = 0; t < o->n_threads; t++) {
        Work *w = &R->work[t];
        int first = t * per;
        w->n = first >= n ? 0 : (n - first < per ? n - first : per);
        w->ids = R->ids + first;
        w->lens = R->lens + first;
        w->out = R->toks + (size_t)first * (size_t)stride;
        w->n_out = R->n_out + first;
        w->rows = R->rows + first;
        w->vals = R->vals ? R->vals + (size_t)first * (size_t)stride : NULL;
        w->vrows = R->vrows + first;
        w->failed = R->failed + first;
        w->why = R->why ? R->why + first : NULL;
        w->stride = stride;
        w->m = R->m;
        w->n_new = n_new;
        w->rc = 0;
        if (w->n) used = t + 1;
    }
    // One share per thread of the runtime's pool (parallel.h), each on its
    // own engine.
    parallel_ranges(used, NULL, o->n_threads, run_shares, R->work);
    for (int t = 0; t < used; t++)
        if (R->work[t].rc < 0) {
            tf_error_set(err, "%s", R->work[t].err.msg);
            return -1;
        }

    if (!o->check && n > 0) notify_output(R);
    const TfModel *m = R->m;
    int numeric = model_numeric_output(m);
    for (int i = 0; i < n; i++) {
        const Slot *s = &R->slots[i];
        const int *toks = R->toks + (size_t)i * (size_t)stride;
        const float *vals = R->vals ? R->vals + (size_t)i * (size_t)stride : NULL;
        int n_tok = R->n_out[i];
        R->st->run++;
        if (m->n_checks && R->failed[i]) { /* a run-time check failed */
            if (!o->check) {
                R->st->errors++;
                notify_output(R);
                fprintf(R->errs, "tfrun: %s:%ld: %s\n", R->in_name, s->lineno, R->why[i].msg);
            } else if (R->st->failed++ < o->show_failures) {
                notify_output(R);
                fprintf(R->out, "FAIL line %ld: %.*s: %s (expected %s)\n", s->lineno, s->len,
                        s->text, R->why[i].msg, s->expect);
            }
            continue;
        }
        if (!o->check) {
            if (numeric)
                runner_print_values(R->out, m, s->text, (size_t)s->len, vals, n_tok);
            else if (m->every_position)
                runner_print_outputs(R->out, m, s->text, (size_t)s->len, toks, n_tok);
            else
                runner_print_completion(R->out, m, s->text, (size_t)s->len, toks, n_tok);
            continue;
        }
        char *p = R->text_buf;
        *p = '\0';
        int pass;
        if (numeric) {
            values_text(p, m, vals, n_tok);
            pass = runner_values_match(m, vals, n_tok, s->want, s->n_want);
        } else {
            int k0 = m->every_position ? runner_output_start(m) : 0;
            for (int k = k0; k < n_tok; k++) {
                if (m->token_names && k > k0) *p++ = ' ';
                p += model_token_text(m, toks[k], p);
            }
            pass = strcmp(R->text_buf, s->expect) == 0;
        }
        if (pass) {
            R->st->passed++;
            continue;
        }
        if (R->st->failed++ < o->show_failures) {
            notify_output(R);
            fprintf(R->out, "FAIL line %ld: %.*s -> %s (expected %s)\n", s->lineno, s->len,
                    s->text, R->text_buf, s->expect);
        }
    }
    return 0;
}

/* Takes one input line into slot s; 0, or -1 (the line is bad, reported). */
static int take_line(Runner *R, Slot *s, char *line, size_t got, long lineno, const char *in_name) {
    const TfRunnerOptions *o = R->o;
    TfError err = {""};
    char *expect = NULL;
    if (o->check) {
        char *tab = memchr(line, '\t', got);
        if (!tab) {
            notify_output(R);
            fprintf(R->errs, "tfrun: %s:%ld: no TAB between the prompt and the expected completion\n",
                    in_name, lineno);
            return -1;
        }
        *tab = '\0';
        expect = tab + 1;
    }
    size_t len = expect ? (size_t)(expect - 1 - line) : got;
    if (len > INT_MAX / 4) {
        notify_output(R);
        fprintf(R->errs, "tfrun: %s:%ld: prompt too long\n", in_name, lineno);
        return -1;
    }
    if (s->ids_cap < (int)len + 1) {
        int *ids = realloc(s->ids, (len + 1) * sizeof(int));
        if (!ids) goto oom;
        s->ids = ids;
        s->ids_cap = (int)len + 1;
    }
    int n_ids = runner_prepare_prompt(R->m, line, (int)len, R->n_new, s->ids, &err);
    if (n_ids < 0) {
        notify_output(R);
        fprintf(R->errs, "tfrun: %s:%ld: %s\n", in_name, lineno, err.msg);
        return -1;
    }
    if (s->text_cap < got + 1) {
        char *t = realloc(s->text, got + 1);
        if (!t) goto oom;
        s->text = t;
        s->text_cap = got + 1;
    }
    if (expect && model_numeric_output(R->m)) {
        int n = runner_parse_values(expect, s->want, s->want_cap, &err);
        if (n > s->want_cap) { /* room for them, and parse again */
            double *w = realloc(s->want, (size_t)n * sizeof *w);
            if (!w) goto oom;
            s->want = w;
            s->want_cap = n;
            n = runner_parse_values(expect, s->want, s->want_cap, &err);
        }
        if (n < 0) {
            notify_output(R);
            fprintf(R->errs, "tfrun: %s:%ld: %s\n", in_name, lineno, err.msg);
            return -1;
        }
        s->n_want = n;
    }
    memcpy(s->text, line, got + 1); /* the TAB, if any, is a NUL already */
    s->len = (int)len;
    s->n_ids = n_ids;
    s->expect = expect ? s->text + (expect - line) : NULL;
    s->lineno = lineno;
    return 0;
oom:
    notify_output(R);
    fprintf(R->errs, "tfrun: %s:%ld: out of memory\n", in_name, lineno);
    return -1;
}

static void runner_free(Runner *R) {
    if (R->engines)
        for (int t = 0; t < R->o->n_threads; t++)
            if (R->engines[t]) R->st->flops += infer_flops(R->engines[t]);
    if (R->engines)
        for (int t = 0; t < R->o->n_threads; t++) infer_free(R->engines[t]);
    if (R->slots)
        for (int i = 0; i < R->cap; i++) {
            free(R->slots[i].text);
            free(R->slots[i].ids);
            free(R->slots[i].want);
        }
    free(R->engines);
    free(R->work);
    free(R->slots);
    free(R->ids);
    free(R->lens);
    free(R->toks);
    free(R->n_out);
    free(R->rows);
    free(R->vals);
    free(R->vrows);
    free(R->failed);
    free(R->why);
    free(R->text_buf);
}

int runner_run(const TfModel *m, FILE *in, const char *in_name, FILE *out, FILE *errs,
              const TfRunnerOptions *o, TfRunnerStats *st, TfError *err) {
    memset(st, 0, sizeof *st);
    double t0 = now_seconds();
    if (o->n_threads < 1 || o->batch_size < 1 || o->n_new < 0) {
        tf_error_set(err, "threads, batch size and tokens to generate must be positive");
        return -1;
    }
    Runner R = {0};
    R.m = m;
    R.o = o;
    R.out = out;
    R.errs = errs;
    R.in_name = in_name;
    R.st = st;
    if (runner_limit_new_tokens(m, o->n_new, &R.n_new, err) < 0) return -1;
    R.cap = o->n_threads * o->batch_size;
    R.stride = m->every_position ? m->max_len : R.n_new > 0 ? R.n_new : 1;
    R.engines = calloc((size_t)o->n_threads, sizeof *R.engines);
    R.work = calloc((size_t)o->n_threads, sizeof *R.work);
    R.slots = calloc((size_t)R.cap, sizeof *R.slots);
    R.ids = calloc((size_t)R.cap, sizeof *R.ids);
    R.lens = calloc((size_t)R.cap, sizeof *R.lens);
    R.toks = calloc((size_t)R.cap * (size_t)R.stride, sizeof *R.toks);
    R.n_out = calloc((size_t)R.cap, sizeof *R.n_out);
    R.rows = calloc((size_t)R.cap, sizeof *R.rows);
    R.vrows = calloc((size_t)R.cap, sizeof *R.vrows);
    R.failed = calloc((size_t)R.cap, 1);
    int numeric = model_numeric_output(m);
    if (numeric) R.vals = calloc((size_t)R.cap * (size_t)R.stride, sizeof *R.vals);
    if (m->n_checks) R.why = calloc((size_t)R.cap, sizeof *R.why);
    R.text_buf = malloc((size_t)R.stride * (numeric ? TF_VALUE_TEXT_MAX : TF_TOKEN_TEXT_MAX + 1) + 1);
    TfPlan *plan = plan_new(m, err);
    int rc = -1;
    if (!plan) goto done;
    if (!R.engines || !R.work || !R.slots || !R.ids || !R.lens || !R.toks ||
        !R.n_out || !R.rows || !R.vrows || !R.failed || (numeric && !R.vals) ||
        (m->n_checks && !R.why) || !R.text_buf) {
        tf_error_set(err, "out of memory");
        goto done;
    }
    for (int t = 0; t < o->n_threads; t++) {
        R.engines[t] = infer_new_with_plan(plan, o->batch_size, err);
        if (!R.engines[t]) goto done;
        infer_set_cache(R.engines[t], o->use_cache);
        if (infer_set_intervention(R.engines[t], o->intervention, err) < 0) goto done;
        R.work[t].inf = R.engines[t];
    }
    TfLine ln = {0};
    TfLineStatus ls;
    size_t max = TF_LINE_MAX(m->max_len);
    int n = 0;
    while ((ls = tf_line_read(in, max, &ln)) > 0) {
        st->lines++;
        st->bytes += (long long)ln.bytes;
        char *line = ln.buf;
        size_t got = ln.len;
        if (got > 0 && line[got - 1] == '\n') line[--got] = '\0';
        if (got > 0 && line[got - 1] == '\r') line[--got] = '\0';
        long lineno = st->lines + (o->first_line > 1 ? o->first_line - 1 : 0);
        if (ls == TF_LINE_LONG) {
            // Read no further than the cap: a prompt and its answer fit.
            notify_output(&R);
            fprintf(R.errs, "tfrun: %s:%ld: line of %zu bytes, over the limit of %zu for this model "
                            "(%d positions)\n", in_name, lineno, ln.bytes, max, m->max_len);
            st->bad++;
            continue;
        }
        if (take_line(&R, &R.slots[n], line, got, lineno, in_name) < 0) {
            st->bad++;
            continue;
        }
        if (++n == R.cap) {
            if (run_chunk(&R, n, err) < 0) {
                tf_line_free(&ln);
                goto done;
            }
            n = 0;
            if (o->progress) {
                st->seconds = now_seconds() - t0;
                o->progress(o->progress_ctx, st);
            }
        }
    }
    tf_line_free(&ln);
    if (ls == TF_LINE_ERROR) {
        // Out of memory is an error too, not the end of the input.
        tf_error_set(err, "error reading '%s' (line %ld): %s", in_name,
                     st->lines + (o->first_line > 1 ? o->first_line : 1), strerror(errno));
        goto done;
    }
    if (run_chunk(&R, n, err) < 0) goto done;
    rc = 0;
done:
    runner_free(&R);
    plan_free(plan);
    st->seconds = now_seconds() - t0;
    return rc;
}
