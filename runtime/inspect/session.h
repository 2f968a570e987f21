/* session.h: what tfrun's --trace, --trace-all, --step, --report and --svg
 * do with one prompt: run it step by step, capturing each step (inspect.h),
 * and print the trace, write the report and the pictures (report.h) of the
 * steps asked for. The one place that uses both inspect.c and report.c, so
 * that report.c depends on inspect.c and never the other way round.
 */
#ifndef TF_SESSION_H
#define TF_SESSION_H

#include <stdio.h>

#include "infer.h"
#include "model.h"

/* What tfrun's --trace, --trace-all, --step, --report and --svg ask for. */
typedef struct TfInspectOptions {
    int trace;               /* print a trace */
    int trace_all;           /* ... of every generation step */
    int step;                /* the step traced, reported and drawn (0: the prompt) */
    const char *report_path; /* write an HTML report there, or NULL */
    const char *svg_dir;     /* write SVG pictures into this directory, or NULL */
    const TfIntervention *intervention; /* edits of every pass (intervene.h), or NULL */
} TfInspectOptions;

/* Generates n_new tokens after prompt[0..len-1] into out[0..n_new-1] (one
 * full forward pass per step) and does what opt asks, traces going to
 * trace_out. With n_new 0 the prompt still runs once and is inspected.
 * 0, or -1 with err set (a step beyond those generated, an unwritable
 * report, out of memory, ...). */
int inspect_generate(const TfModel *m, const int *prompt, int len, int n_new,
                     const TfInspectOptions *opt, FILE *trace_out, int *out, TfError *err);

/* inspect_generate for every kind of model, saying how many outputs it
 * wrote to out (*n_out): a model with a stop token stops when it generates
 * it (not counted; at most n_new tokens, and as many as max_len allows); a
 * model read at every position runs one pass (step 0) and writes the token
 * at each of its len positions (out holds at least len entries then), or,
 * when it prints a number, the value at each into `values` (len floats;
 * may be NULL otherwise); a classifier writes nothing. A step that fails a
 * run-time check is traced (and reported, drawn) and ends the run: -1, err
 * the failure. */
int inspect_run(const TfModel *m, const int *prompt, int len, int n_new,
                const TfInspectOptions *opt, FILE *trace_out, int *out, float *values, int *n_out,
                TfError *err);

#endif
