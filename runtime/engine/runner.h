/* runner.h: many prompts through the engine: streaming, batching, threads.
 *
 * runner_run reads one prompt per line (or, to check, `prompt<TAB>expected
 * completion`; for a model read at every position the expected text is
 * the tokens at every position, runner_print_outputs), gathers up to n_threads * batch_size of them, splits them
 * over n_threads engines that share one plan (infer.h), and prints or
 * checks the completions in input order. Memory stays flat however many
 * lines there are: one chunk is held at a time.
 *
 * Bad lines (characters outside the vocabulary, too long, no TAB in check
 * mode) are reported on the error stream with their line number and
 * counted; the other lines still run. So is a prompt that fails one of the
 * model's run-time checks (infer.h): in check mode it is a failed case. A
 * line may end in LF or CRLF.
 */
#ifndef TF_RUNNER_H
#define TF_RUNNER_H

#include <stdio.h>

#include "infer.h"
#include "model.h"

typedef struct TfRunnerStats TfRunnerStats;

typedef struct TfRunnerOptions {
    int n_new;        /* tokens to generate per prompt (with a stop token: at most) */
    int batch_size;   /* prompts per engine call */
    int n_threads;    /* engines running at once, 1 or more */
    int use_cache;    /* 0: recompute every position at every step */
    int check;        /* lines are prompt<TAB>expected; print failures, not completions */
    int show_failures; /* check mode: how many failures to print in full */
    long first_line;  /* the number of the input's first line in messages (0: 1) */
    /* Edits of every run (intervene.h; zero edits only: mean and patch
     * values belong to one prompt), or NULL. */
    const TfIntervention *intervention;
    /* Optional: called after each chunk with the counts so far, and with st
     * NULL just before anything is written to out or errs (so a progress
     * line on a terminal can be cleared first). */
    void (*progress)(void *ctx, const TfRunnerStats *st);
    void *progress_ctx;
} TfRunnerOptions;

struct TfRunnerStats {
    long lines;   /* lines read */
    long run;     /* prompts generated */
    long passed;  /* check mode: completions equal to the expected text */
    long failed;  /* check mode: completions that differ */
    long bad;     /* lines rejected before running */
    long long bytes; /* input bytes read */
    long errors;  /* not in check mode: prompts that failed a run-time check (infer.h) */
    double seconds; /* wall time, reading included */
    double flops;   /* floating-point operations of the engines (infer_flops) */
};

/* The tokens generation can really produce for n_new asked: *limited is
 * n_new, or at most max_len for a model with a stop token (generation stops
 * at the end of the position encoding anyway) or one that does not generate
 * (every position, classifier). -1 with err set when no prompt can be given
 * n_new tokens (a generating model without a stop token, n_new > max_len). */
int runner_limit_new_tokens(const TfModel *m, int n_new, int *limited, TfError *err);

/* Checks and tokenizes one prompt for generating n_new tokens (for a model
 * with a stop token, or read at every position, the prompt alone must fit
 * max_len; for a model with a bos, the prompt must start with it): ids
 * must hold len entries. Returns the number of tokens (len, or the words of
 * a vocabulary of words), or -1 with err naming the problem. */
int runner_prepare_prompt(const TfModel *m, const char *text, int len, int n_new, int *ids,
                         TfError *err);

/* Runs every line of `in` (named in_name in messages). Completions (or, in
 * check mode, the first failures) go to out, problems with lines to errs.
 * Returns 0, or -1 with err set when the run itself failed (out of memory,
 * a read error); bad lines and failed checks are only counted in st. */
int runner_run(const TfModel *m, FILE *in, const char *in_name, FILE *out, FILE *errs,
              const TfRunnerOptions *o, TfRunnerStats *st, TfError *err);

/* Models that print a number (model_numeric_output): writes `prompt`, a
 * TAB, and the values at positions runner_output_start(m)..n-1, separated by
 * single spaces, each the shortest text that reads back as the same float32
 * (model_value_text). That text after the TAB is what --check compares. */
void runner_print_values(FILE *f, const TfModel *m, const char *prompt, size_t len,
                        const float *vals, int n);

/* Parses --check's expected values: numbers (strtod) or fractions p/q,
 * separated by spaces. Stores the first `max` of them in out and returns
 * how many there are, or -1 with err naming the bad one. */
int runner_parse_values(const char *text, double *out, int max, TfError *err);

/* 1 when vals at positions runner_output_start(m)..n-1 are as many as want
 * and each within m->output_error_bound + 1e-6 |want| of its expected value. */
int runner_values_match(const TfModel *m, const float *vals, int n, const double *want, int n_want);

/* Writes `prompt` and the generated tokens (escaped, model_token_text; in a
 * vocabulary of words, each after a space) to f. */
void runner_print_completion(FILE *f, const TfModel *m, const char *prompt, size_t len,
                            const int *toks, int n);

/* Every-position models: writes `prompt`, a TAB, and the tokens at
 * positions runner_output_start(m)..n-1 (escaped, model_token_text; words
 * separated by single spaces) to f.
 * That text after the TAB is what --check expects. */
void runner_print_outputs(FILE *f, const TfModel *m, const char *prompt, size_t len,
                         const int *toks, int n);
/* The first position whose output is printed: 1 when the model has a bos
 * (the BOS position's output means nothing), else 0. */
int runner_output_start(const TfModel *m);

/* The number of CPUs online, at least 1; under mpirun, divided among the
 * ranks it started on this machine (OMPI_COMM_WORLD_LOCAL_SIZE). */
int runner_default_threads(void);

#endif
