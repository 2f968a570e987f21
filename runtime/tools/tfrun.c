/* tfrun: run a .tfw weight file as a transformer, generating tokens.
 *
 *   tfrun [-n N] WEIGHTS.tfw [--] PROMPT
 *   tfrun [-n N] WEIGHTS.tfw --batch FILE     (FILE may be -, standard input)
 *   tfrun [-n N] WEIGHTS.tfw --check FILE     (lines prompt<TAB>expected completion)
 *   tfrun [-n N] WEIGHTS.tfw [--trace | --trace-all] [--step K] [--report FILE.html]
 *         [--svg DIR] PROMPT                  (look inside: runtime/inspect/inspect.h)
 *   tfrun WEIGHTS.tfw --dump FILE.safetensors PROMPT   (activations: runtime/inspect/dump.h)
 *   tfrun [-n N] A.tfw --compare B.tfw [--report FILE.html] [--svg DIR] PROMPT
 *                                             (side by side: runtime/inspect/compare.h)
 *   tfrun WEIGHTS.tfw --ablate SPEC [--patch-from PROMPT2] [any of the above] PROMPT
 *                                             (interventions: runtime/engine/intervene.h;
 *                                              with --compare, on A only)
 *
 * Options may come before or after the file names; a prompt that starts
 * with '-' follows "--". Prints each prompt followed by its generated
 * tokens, one line per prompt (a model with a stop token stops at it and
 * does not print it; -n is then the most). A model read at every position
 * prints each prompt, a TAB and the token at every position (after the BOS
 * position when it has a bos), or, when its output is a number, the values
 * separated by spaces. An input that fails one of the model's run-time
 * checks is an error (infer.h). --check prints how many completions match,
 * the first failures and the throughput. --batch and --check stream their
 * input through several engines at once (runtime/engine/runner.h), with a progress
 * line on stderr when it is a terminal (or with --progress); under mpirun or
 * srun the ranks share them (runtime/dist/shard.h, docs/cluster.md).
 * Exit status (the same in every tool, runtime/tools/cli.h): 0 success; 1 a
 * bad weight file or prompt, or a failed check (one-line message on stderr;
 * the other lines still run); 2 usage error (-n beyond the model's positions
 * and a refused output path included); 3 out of memory, or an output that
 * could not be written.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runner.h"
#include "blas.h"
#include "cli.h"
#include "compare.h"
#include "distributed.h"
#include "dump.h"
#include "file.h"
#include "infer.h"
#include "kernels.h"
#include "inspect.h"
#include "intervene.h"
#include "session.h"
#include "lines.h"
#include "outfile.h"
#ifdef TF_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include "shard.h"
#include "tfw.h"

#define TFRUN_DEFAULT_BATCH 256 /* per thread; the fastest in bench/engine.sh */
#define TFRUN_MAX_BATCH 4096
#define TFRUN_MAX_THREADS 64
#define TFRUN_SHOW_FAILURES 10
#define TFRUN_MAX_ABLATE 64

static void usage(FILE *f) {
    fprintf(f, "usage: tfrun [options] WEIGHTS.tfw [--] PROMPT\n"
               "       tfrun [options] WEIGHTS.tfw --batch FILE|-\n"
               "       tfrun [options] WEIGHTS.tfw --check FILE|-\n"
               "  -n N             generate N tokens (default: the program's `generate`;\n"
               "                   with a stop token, at most N)\n"
               "  --batch FILE     read one prompt per line ('-': standard input)\n"
               "  --tokens FILE    the prompt is FILE's text (a model of words: its words,\n"
               "                   whitespace-separated; else its text less a final newline)\n"
               "  --check FILE     read lines prompt<TAB>expected completion (or the tokens\n"
               "                   at every position, or numbers: decimals or p/q, each\n"
               "                   within the model's error bound, or a classifier's class);\n"
               "                   print the number passed and failed, the first failures,\n"
               "                   the speed\n"
               "  --batch-size B   prompts per engine, 1 to %d (default %d)\n"
               "  --threads T      engines running at once (default: the CPUs online)\n"
               "  --shard-input    under mpirun: every rank reads its own input (its own\n"
               "                   generator's share; docs/cluster.md), not a share of one\n"
               "  --no-cache       recompute every position at every step (no KV cache)\n"
               "  --progress       show --batch/--check progress on stderr (default: when\n"
               "                   stderr is a terminal, after the first second)\n"
               "  --trace          print the registers each layer wrote, decoded (step 0)\n"
               "  --trace-all      the same for every generation step\n"
               "  --step K         the step traced, reported and drawn (default 0)\n"
               "  --report FILE    write an HTML report of that step\n"
               "  --svg DIR        write its heatmaps and attention maps as SVG files\n"
               "  --dump FILE      write the prompt's activations (residual stream, q, k, v,\n"
               "                   scores, patterns, MLP units; TransformerLens names) as a\n"
               "                   safetensors file\n"
               "  --compare B.tfw  with --report and/or --svg: this model and B on the prompt,\n"
               "                   side by side, every head against every head of B\n"
               "  --ablate SPEC    edit activations while running: [zero:|mean:|patch:]TARGET,\n"
               "                   comma-separated; TARGET layers.N, a layer or op name,\n"
               "                   layers.N.head.H, REG@layers.N, REG@LAYER, REG@embed\n"
               "                   (repeatable; with --compare, on this model only)\n"
               "  --patch-from P   patch the --ablate targets with their values in prompt\n"
               "                   P's run (P as long as the prompt)\n"
               "  -h, --help       this help;  --version  the version\n"
               "Options and files come in any order; --opt=V is --opt V; \"--\" ends the\n"
               "options (for a prompt that starts with '-'). Input lines end in LF or CRLF.\n"
               "-n beyond the model's positions is a usage error (2).\n" CLI_EXIT_HELP,
            TFRUN_MAX_BATCH, TFRUN_DEFAULT_BATCH);
}

/* --tokens FILE's text, freed at exit. */
static char *tokens_text;
static void free_tokens_text(void) { free(tokens_text); }

/* --tokens: the prompt in a file. For a model of words, its words joined by
 * single spaces (as tfrun prints them); else its text without a final line
 * end. NULL after a one-line message. */
static char *read_tokens(const char *path, const TfModel *m) {
    TfError err = {""};
    size_t len;
    char *t = tf_file_read_max(path, (size_t)1 << 24, &len, &err);
    if (!t) {
        fprintf(stderr, "tfrun: --tokens %s\n", err.msg);
        return NULL;
    }
    if (memchr(t, '\0', len)) {
        fprintf(stderr, "tfrun: --tokens %s: the file holds a NUL byte\n", path);
        free(t);
        return NULL;
    }
    if (m->token_names) {
        size_t k = 0;
        for (size_t i = 0; i < len; i++) {
            int blank = strchr(" \t\r\n", t[i]) != NULL;
            if (!blank) t[k++] = t[i];
            else if (k > 0 && t[k - 1] != ' ') t[k++] = ' ';
        }
        if (k > 0 && t[k - 1] == ' ') k--;
        len = k;
    } else {
        if (len > 0 && t[len - 1] == '\n') len--;
        if (len > 0 && t[len - 1] == '\r') len--;
    }
    t[len] = '\0';
    return t;
}

static int parse_count(const char *s, int *out) {
    long v;
    if (cli_parse_long(s, 0, INT_MAX, &v) < 0) return -1;
    *out = (int)v;
    return 0;
}

/* Checks and tokenizes a prompt (its tokens: *n_ids); on failure prints
 * "tfrun: WHERE: problem". */
static int *prepare_prompt(const TfModel *m, const char *text, int len, int n_new,
                           const char *where, int *n_ids) {
    TfError err = {""};
    int *ids = malloc(((size_t)len + 1) * sizeof(int));
    if (!ids) {
        fprintf(stderr, "tfrun: %s: out of memory\n", where);
        return NULL;
    }
    if ((*n_ids = runner_prepare_prompt(m, text, len, n_new, ids, &err)) < 0) {
        fprintf(stderr, "tfrun: %s: %s\n", where, err.msg);
        free(ids);
        return NULL;
    }
    return ids;
}

/* The progress line of --batch and --check: how far into the input (when
 * its size is known), how many cases, how fast. */
typedef struct StreamProgress {
    CliProgress bar;
    long long total; /* input bytes, or 0 when not known (a pipe) */
    int check;
} StreamProgress;

/* "12345 cases (41%), 3 failed, 45678 cases/s" */
static void stream_progress_text(const StreamProgress *p, const TfRunnerStats *st, char *buf,
                                 size_t size) {
    const char *unit = p->check ? "cases" : "prompts";
    double rate = st->seconds > 0 ? (double)st->run / st->seconds : 0.0;
    char pct[32] = "", failed[48] = "";
    if (p->total > 0) snprintf(pct, sizeof pct, " (%.0f%%)", 100.0 * (double)st->bytes / (double)p->total);
    if (p->check) snprintf(failed, sizeof failed, ", %ld failed", st->failed);
    snprintf(buf, size, "%ld %s%s%s, %.0f %s/s", st->run, unit, pct, failed, rate, unit);
}

static void stream_progress(void *ctx, const TfRunnerStats *st) {
    StreamProgress *p = ctx;
    if (!st) {
        cli_progress_clear(&p->bar);
        return;
    }
    char text[160];
    stream_progress_text(p, st, text, sizeof text);
    cli_progress_update(&p->bar, p->total > 0 ? (double)st->bytes / (double)p->total : -1, "%s", text);
}

/* --batch and --check; under mpirun split over the ranks (shard.h). */
static int run_stream(const TfModel *m, const char *path, const TfRunnerOptions *opts,
                      int force_progress, int shard_input) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tfrun: cannot open '%s': %s\n", path, strerror(errno));
        return CLI_EXIT_INPUT;
    }
    StreamProgress sp = {.check = opts->check};
    cli_progress_init(&sp.bar, force_progress);
    struct stat fs;
    long pos = ftell(f);
    if (fstat(fileno(f), &fs) == 0 && S_ISREG(fs.st_mode) && pos >= 0) sp.total = fs.st_size - pos;
    TfRunnerOptions bo = *opts, *o = &bo;
    if (sp.bar.on) {
        bo.progress = stream_progress;
        bo.progress_ctx = &sp;
    }
    TfRunnerStats st;
    TfError err = {""};
    const char *name = f == stdin ? "<stdin>" : path;
    int rc = dist_size() > 1 ? shard_run(m, f, name, shard_input, stdout, stderr, o, &st, &err)
                             : runner_run(m, f, name, stdout, stderr, o, &st, &err);
    if (f != stdin) fclose(f);
    if (rc == 0) {
        char text[160];
        stream_progress_text(&sp, &st, text, sizeof text);
        cli_progress_end(&sp.bar, "%s", text);
    } else {
        cli_progress_clear(&sp.bar);
    }

    if (rc < 0) {
        fprintf(stderr, "tfrun: %s\n", err.msg);
        return cli_error_status(&err);
    }
    if (o->check) {
        if (st.failed > o->show_failures)
            printf("... and %ld more failures\n", st.failed - o->show_failures);
        printf("%ld passed, %ld failed", st.passed, st.failed);
        if (st.bad) printf(", %ld bad lines", st.bad);
        printf(" (%ld cases in %.2f s: %.0f cases/s, %d thread%s", st.run, st.seconds,
               st.seconds > 0 ? (double)st.run / st.seconds : 0.0, o->n_threads,
               o->n_threads == 1 ? "" : "s");
        if (dist_size() > 1) printf(" x %d ranks", dist_size());
        printf(", batch size %d)\n", o->batch_size);
        if (st.run > 0)
            printf("engine: %.0f FLOP per case, %.2f GFLOP/s\n", st.flops / (double)st.run,
                   st.seconds > 0 ? st.flops / st.seconds * 1e-9 : 0.0);
    }
    return st.bad || st.failed || st.errors ? CLI_EXIT_INPUT : 0;
}

/* Prints one prompt's result: prompt + completion, or for a model read at
 * every position prompt<TAB>the tokens (or numbers, vals) at each position. */
static void print_result(FILE *f, const TfModel *m, const char *prompt, size_t len,
                         const int *out, const float *vals, int n) {
    if (model_numeric_output(m))
        runner_print_values(f, m, prompt, len, vals, n);
    else if (m->every_position)
        runner_print_outputs(f, m, prompt, len, out, n);
    else
        runner_print_completion(f, m, prompt, len, out, n);
}

static int run_classify(const TfModel *m, const char *prompt, const char *path, int check,
                        int force_progress, const TfIntervention *iv);

/* --dump: one pass over the prompt, its activations to path (dump.h). */
static int run_dump(const TfModel *m, const char *prompt, const char *path,
                    const TfIntervention *iv) {
    size_t len = strlen(prompt);
    if (len > INT_MAX / 2) len = INT_MAX / 2;
    int n_ids;
    int *ids = prepare_prompt(m, prompt, (int)len, 0, "prompt", &n_ids);
    if (!ids) return CLI_EXIT_INPUT;
    TfError err = {""};
    int rc = dump_activations(m, prompt, ids, n_ids, iv, path, &err);
    if (rc < 0) fprintf(stderr, "tfrun: %s\n", err.msg);
    free(ids);
    return rc < 0 ? cli_error_status(&err) : 0;
}

/* --trace, --report, --svg: one prompt, one full pass per step (inspect.h),
 * then the result line that tfrun prints without them. */
static int run_inspect(const TfModel *m, const char *prompt, int n_new, const TfInspectOptions *io) {
    size_t len = strlen(prompt);
    if (len > INT_MAX / 2) len = INT_MAX / 2;
    int n_ids = 0;
    int *ids = prepare_prompt(m, prompt, (int)len, n_new, "prompt", &n_ids);
    size_t cap = (size_t)(n_new > (int)len ? n_new : (int)len) + 1;
    int *out = malloc(cap * sizeof(int));
    float *vals = malloc(cap * sizeof(float));
    TfError err = {""};
    int status = 0, n_out = 0;
    if (!ids || !out || !vals ||
        inspect_run(m, ids, n_ids, n_new, io, stdout, out, vals, &n_out, &err) < 0) {
        if (ids) fprintf(stderr, "tfrun: %s\n", out && vals ? err.msg : "out of memory");
        status = !ids ? CLI_EXIT_INPUT : !(out && vals) ? CLI_EXIT_SYSTEM : cli_error_status(&err);
    } else if (m->output_kind == TF_OUTPUT_CLASSIFY) {
        status = run_classify(m, prompt, NULL, 0, 0, io->intervention);
    } else {
        print_result(stdout, m, prompt, len, out, vals, n_out);
    }
    free(ids);
    free(out);
    free(vals);
    return status;
}

static int run_one(const TfModel *m, const char *prompt, int n_new, int use_cache,
                   const TfIntervention *iv) {
    size_t len = strlen(prompt);
    if (len > INT_MAX / 2) len = INT_MAX / 2;
    int n_ids;
    int *ids = prepare_prompt(m, prompt, (int)len, n_new, "prompt", &n_ids);
    if (!ids) return CLI_EXIT_INPUT;
    TfError err = {""};
    TfInfer *inf = infer_new(m, 1, &err);
    if (inf) infer_set_cache(inf, use_cache);
    if (inf && infer_set_intervention(inf, iv, &err) < 0) {
        infer_free(inf);
        inf = NULL;
    }
    size_t cap = (size_t)(n_new > (int)len ? n_new : (int)len) + 1;
    int *out = malloc(cap * sizeof(int));
    float *vals = malloc(cap * sizeof(float));
    int status = 0, n_out = n_new, rc = -1;
    const int *idp = ids;
    int ilen = n_ids;
    if (inf && out && vals) {
        if (model_numeric_output(m)) {
            rc = infer_every_position_values(inf, &idp, &ilen, 1, &vals, &err);
            n_out = ilen;
        } else if (m->every_position) {
            rc = infer_every_position(inf, &idp, &ilen, 1, &out, &err);
            n_out = ilen;
        } else if (m->stop_token >= 0) {
            rc = infer_generate_until(inf, &idp, &ilen, 1, n_new, m->stop_token, out, &n_out, &err);
        } else {
            rc = infer_generate(inf, &idp, &ilen, 1, n_new, out, &err);
        }
    }
    if (rc < 0) {
        fprintf(stderr, "tfrun: %s\n", out && vals ? err.msg : "out of memory");
        status = out && vals ? cli_error_status(&err) : CLI_EXIT_SYSTEM;
    } else {
        print_result(stdout, m, prompt, len, out, vals, n_out);
    }
    infer_free(inf);
    free(out);
    free(vals);
    free(ids);
    return status;
}

/* One classifier input: its class into *best and that class's probability
 * into probs[*best]; 0, or -1 with err set. */
static int classify_text(TfInfer *inf, const TfModel *m, const char *text, float *probs,
                         int *best, TfError *err) {
    int len = (int)strlen(text);
    int *ids = len > 0 && len <= m->max_len ? malloc((size_t)len * sizeof *ids) : NULL;
    int rc = -1;
    if (!ids)
        tf_error_set(err, "input of %d characters (1 to %d allowed)", len, m->max_len);
    else if ((len = infer_tokenize(m, text, len, ids, err)) > 0 &&
             infer_classify(inf, (const int *const *)&ids, &len, 1, probs, err) == 0) {
        *best = 0;
        for (int c = 1; c < m->n_classes; c++)
            if (probs[c] > probs[*best]) *best = c;
        rc = 0;
    }
    free(ids);
    return rc;
}

/* One classifier input: its line, text<TAB>class<TAB>probability, to f. */
static int classify_one(TfInfer *inf, const TfModel *m, const char *text, float *probs, FILE *f,
                        TfError *err) {
    int best;
    if (classify_text(inf, m, text, probs, &best, err) < 0) return -1;
    fprintf(f, "%s\t%s\t%.4f\n", text, m->class_names[best], probs[best]);
    return 0;
}

/* Classifier models (a learned `predict classes` model): each input (the
 * prompt, or every line of `path`) is printed with its class and that
 * class's probability, tab-separated. With check, each line of `path` is
 * INPUT<TAB>CLASS: the failures are printed (the first TFRUN_SHOW_FAILURES)
 * and a 'passed, failed' line, as for other models. 0, or 1 after any bad
 * input or failed case. */
static int run_classify(const TfModel *m, const char *prompt, const char *path, int check,
                        int force_progress, const TfIntervention *iv) {
    TfError err = {""};
    TfInfer *inf = infer_new(m, 1, &err);
    if (inf && infer_set_intervention(inf, iv, &err) < 0) {
        infer_free(inf);
        inf = NULL;
    }
    float *probs = malloc((size_t)m->n_classes * sizeof *probs);
    FILE *f = !path ? NULL : strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!inf || !probs || (path && !f)) {
        if (path && !f) fprintf(stderr, "tfrun: cannot open '%s': %s\n", path, strerror(errno));
        else fprintf(stderr, "tfrun: %s\n", !inf ? err.msg : "out of memory");
        int bad_input = (path && !f) || (!inf && !tf_error_is_memory(&err));
        infer_free(inf);
        free(probs);
        return bad_input ? CLI_EXIT_INPUT : CLI_EXIT_SYSTEM;
    }
    StreamProgress sp = {.check = check};
    cli_progress_init(&sp.bar, force_progress && f);
    struct stat fs;
    long pos = f ? ftell(f) : -1;
    if (f && fstat(fileno(f), &fs) == 0 && S_ISREG(fs.st_mode) && pos >= 0)
        sp.total = fs.st_size - pos;
    TfRunnerStats st = {0};
    double t0 = cli_now();
    int status = 0;
    TfLine ln = {0};
    size_t max = TF_LINE_MAX(m->max_len);
    long lineno = 0;
    for (;;) {
        const char *text = prompt, *want = NULL;
        if (f) {
            TfLineStatus ls = tf_line_read(f, max, &ln);
            if (ls == TF_LINE_END) break;
            if (ls == TF_LINE_ERROR) {
                cli_progress_clear(&sp.bar);
                fprintf(stderr, "tfrun: error reading '%s' (line %ld): %s\n", path, lineno + 1,
                        strerror(errno));
                status = CLI_EXIT_INPUT;
                break;
            }
            st.bytes += (long long)ln.bytes;
            char *line = ln.buf;
            size_t n = ln.len;
            if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
            if (n > 0 && line[n - 1] == '\r') line[--n] = '\0';
            text = line;
            lineno++;
            if (ls == TF_LINE_LONG) {
                cli_progress_clear(&sp.bar);
                fprintf(stderr, "tfrun: line %ld: line of %zu bytes, over the limit of %zu for this "
                                "model (%d positions)\n", lineno, ln.bytes, max, m->max_len);
                st.bad++;
                status = CLI_EXIT_INPUT;
                continue;
            }
            if (check) {
                char *tab = strrchr(line, '\t');
                if (!tab) {
                    fprintf(stderr, "tfrun: line %ld: expected INPUT<TAB>CLASS\n", lineno);
                    st.bad++;
                    continue;
                }
                *tab = '\0';
                want = tab + 1;
            }
        }
        int best = -1, rc = check ? classify_text(inf, m, text, probs, &best, &err)
                                  : classify_one(inf, m, text, probs, stdout, &err);
        if (rc == 0) st.run++;
        if (rc < 0) {
            cli_progress_clear(&sp.bar);
            if (f) fprintf(stderr, "tfrun: line %ld: %s\n", lineno, err.msg);
            else fprintf(stderr, "tfrun: %s\n", err.msg);
            if (check) st.bad++;
            if (status != CLI_EXIT_SYSTEM) status = cli_error_status(&err);
        } else if (check && strcmp(m->class_names[best], want) == 0) {
            st.passed++;
        } else if (check && st.failed++ < TFRUN_SHOW_FAILURES) {
            cli_progress_clear(&sp.bar);
            printf("FAIL line %ld: %s -> %s (expected %s)\n", lineno, text, m->class_names[best],
                   want);
        }
        if (!f) break;
        if (sp.bar.on && (st.run & 1023) == 0) {
            st.seconds = cli_now() - t0;
            char text_[160];
            stream_progress_text(&sp, &st, text_, sizeof text_);
            cli_progress_update(&sp.bar, sp.total > 0 ? (double)st.bytes / (double)sp.total : -1,
                                "%s", text_);
        }
    }
    st.seconds = cli_now() - t0;
    if (sp.bar.on) {
        char text_[160];
        stream_progress_text(&sp, &st, text_, sizeof text_);
        cli_progress_end(&sp.bar, "%s", text_);
    }
    if (check) {
        if (st.failed > TFRUN_SHOW_FAILURES)
            printf("... and %ld more failures\n", st.failed - TFRUN_SHOW_FAILURES);
        printf("%ld passed, %ld failed", st.passed, st.failed);
        if (st.bad) printf(", %ld bad lines", st.bad);
        printf(" (%ld cases in %.2f s: %.0f cases/s, 1 thread)\n", st.run, st.seconds,
               st.seconds > 0 ? (double)st.run / st.seconds : 0.0);
        if (st.failed || st.bad || (st.run == 0 && lineno == 0)) status = CLI_EXIT_INPUT;
    }
    tf_line_free(&ln);
    if (f && f != stdin) fclose(f);
    free(probs);
    infer_free(inf);
    return status;
}

/* The line tfrun prints for the prompt (ids[0..len-1]), without its
 * newline, into *text (the caller frees it): the generation inspect_run
 * does (one full pass per step), or a classifier's class. */
static int result_text(const TfModel *m, const char *prompt, const int *ids, int len, int n_new,
                       const TfIntervention *iv, char **text, TfError *err) {
    size_t prompt_len = strlen(prompt);
    size_t cap = (size_t)(n_new > len ? n_new : len) + 1, size = 0;
    int *out = malloc(cap * sizeof(int));
    float *vals = malloc(cap * sizeof(float));
    TfInfer *inf = m->output_kind == TF_OUTPUT_CLASSIFY ? infer_new(m, 1, err) : NULL;
    float *probs = inf ? malloc((size_t)m->n_classes * sizeof *probs) : NULL;
    TfInspectOptions none = {0, 0, 0, NULL, NULL, iv};
    FILE *f = open_memstream(text, &size);
    int n_out = 0, rc = -1;
    if (inf && infer_set_intervention(inf, iv, err) < 0) {
        infer_free(inf);
        inf = NULL;
    }
    if (m->output_kind == TF_OUTPUT_CLASSIFY && !inf)
        ; /* err says why */
    else if (!out || !vals || !f || (inf && !probs))
        tf_error_set(err, "out of memory");
    else if (inf)
        rc = classify_one(inf, m, prompt, probs, f, err);
    else if ((rc = inspect_run(m, ids, len, n_new, &none, NULL, out, vals, &n_out, err)) == 0)
        print_result(f, m, prompt, prompt_len, out, vals, n_out);
    if (f && fclose(f) != 0 && rc == 0) {
        tf_error_set(err, "out of memory");
        rc = -1;
    }
    if (!f) *text = NULL;
    if (rc == 0 && size > 0 && (*text)[size - 1] == '\n') (*text)[size - 1] = '\0';
    infer_free(inf);
    free(probs);
    free(out);
    free(vals);
    return rc;
}

/* --compare: models m[0] (A) and m[1] (B), read from files path[0] and
 * path[1], on the same prompt: the comparison page (--report) and pictures
 * (--svg) of the prompt's pass (compare.h), then each model's result line
 * as tfrun prints it, A's first. */
static int run_compare(TfModel *const m[2], const char *const path[2], const char *prompt,
                       const int n_new[2], const TfInspectOptions *io) {
    const TfIntervention *iv[2] = {io->intervention, NULL}; /* A's edits only */
    size_t len = strlen(prompt);
    if (len > INT_MAX / 2) len = INT_MAX / 2;
    int *ids[2] = {NULL, NULL}, n_ids[2] = {0, 0}, status = CLI_EXIT_INPUT, s = 0;
    char *text[2] = {NULL, NULL};
    TfCapture *cap[2] = {NULL, NULL};
    TfCompare *cmp = NULL;
    TfError err = {""};
    for (s = 0; s < 2; s++) {
        size_t n = strlen(path[s]) + 16;
        char *where = malloc(n);
        if (where) snprintf(where, n, "prompt for %s", path[s]);
        ids[s] = prepare_prompt(m[s], prompt, (int)len, n_new[s], where ? where : "prompt",
                                &n_ids[s]);
        free(where);
        if (!ids[s]) goto done;
    }
    for (s = 0; s < 2; s++) /* refused before either model runs */
        if (inspect_check_size(m[s], n_ids[s], 0, TF_REPORT_MAX_CELLS, "the comparison", &err) < 0) {
            fprintf(stderr, "tfrun: %s: %s\n", path[s], err.msg);
            goto done;
        }
    for (s = 0; s < 2; s++) {
        if (result_text(m[s], prompt, ids[s], n_ids[s], n_new[s], iv[s], &text[s], &err) < 0 ||
            !(cap[s] = inspect_capture_with(m[s], ids[s], n_ids[s], 0, iv[s], &err))) {
            fprintf(stderr, "tfrun: %s: %s\n", path[s], err.msg);
            goto done;
        }
    }
    cmp = compare_new(cap[0], path[0], cap[1], path[1], &err);
    if (cmp) {
        cmp->result[0] = text[0], cmp->result[1] = text[1];
    }
    if (!cmp || (io->report_path && compare_write_html(cmp, io->report_path, &err) < 0) ||
        (io->svg_dir && compare_write_svgs(cmp, io->svg_dir, &err) < 0)) {
        fprintf(stderr, "tfrun: %s\n", err.msg);
        goto done;
    }
    printf("%s\n%s\n", text[0], text[1]);
    status = 0;
done:
    if (status && err.msg[0]) status = cli_error_status(&err);
    compare_free(cmp);
    for (s = 0; s < 2; s++) {
        capture_free(cap[s]);
        free(text[s]);
        free(ids[s]);
    }
    return status;
}

/* --ablate and --patch-from: the edits, their means (the prompt's own
 * run) and patches (patch_from's run) recorded, into *out. 0, or an exit
 * status after a one-line message. */
static int make_intervention(const TfModel *m, const char *const *specs, int n_specs,
                             const char *patch_from, const char *prompt, int batch, int n_new,
                             TfIntervention **out) {
    TfError err = {""};
    *out = NULL;
    if (n_specs == 0) {
        if (!patch_from) return 0;
        fprintf(stderr, "tfrun: --patch-from wants --ablate SPEC: what to patch\n");
        return CLI_EXIT_USAGE;
    }
    TfIntervention *iv = intervention_parse(m, specs, n_specs, patch_from != NULL, &err);
    if (!iv) {
        fprintf(stderr, "tfrun: %s\n", err.msg);
        return tf_error_is_memory(&err) ? CLI_EXIT_SYSTEM : CLI_EXIT_USAGE;
    }
    int per_prompt = intervention_has(iv, TF_EDIT_MEAN) || intervention_has(iv, TF_EDIT_PATCH);
    if (batch && (per_prompt || patch_from)) {
        fprintf(stderr, "tfrun: --ablate mean: and --patch-from take one prompt, not a file "
                        "(zero: edits take --batch and --check)\n");
        intervention_free(iv);
        return CLI_EXIT_USAGE;
    }
    int status = 0, len = prompt ? (int)strnlen(prompt, INT_MAX / 2) : 0, n_src = 0;
    int *ids = per_prompt ? prepare_prompt(m, prompt, len, n_new, "prompt", &len) : NULL;
    int *src = ids && patch_from ? prepare_prompt(m, patch_from, (int)strnlen(patch_from, INT_MAX / 2),
                                                  n_new, "--patch-from", &n_src)
                                 : NULL;
    if (per_prompt && (!ids || (patch_from && !src))) {
        status = CLI_EXIT_INPUT;
    } else if (src && n_src != len) {
        fprintf(stderr, "tfrun: --patch-from: '%s' has %d tokens, the prompt %d: patching pairs "
                        "positions, give prompts of one length\n", patch_from, n_src, len);
        status = CLI_EXIT_USAGE;
    } else if ((intervention_has(iv, TF_EDIT_MEAN) &&
                intervention_prepare(iv, TF_EDIT_MEAN, ids, len, n_new, &err) < 0) ||
               (src && intervention_prepare(iv, TF_EDIT_PATCH, src, len, n_new, &err) < 0)) {
        fprintf(stderr, "tfrun: %s\n", err.msg);
        status = cli_error_status(&err);
    }
    free(ids);
    free(src);
    if (status) intervention_free(iv);
    else *out = iv;
    return status;
}

int main(int argc, char **argv) {
    // OpenBLAS's generic fallback on a CPU with AVX2 or AVX-512: run again on
    // the CPU's own kernels, before anything else (runtime/engine/blas.h);
    // and for a long run without OpenBLAS's threads (cli.h).
    const char *core = blas_core();
    cli_blas_prefer_core(argv, blas_core_is_fallback(core) ? core : NULL, blas_best_core(),
                         core && (cli_argv_has(argv, "--batch") || cli_argv_has(argv, "--check")));
    // Under mpirun or srun: one of several ranks, which share --batch and
    // --check input; rank 0 alone prints (runtime/dist/shard.h).
    TfError dist_err = {""};
    if (dist_init(&argc, &argv, &dist_err) < 0) {
        fprintf(stderr, "tfrun: %s\n", dist_err.msg);
        return CLI_EXIT_SYSTEM;
    }
    if (dist_rank() > 0 && !freopen("/dev/null", "w", stdout)) return CLI_EXIT_SYSTEM;
    int shard_input = 0;
    const char *weights = NULL, *prompt = NULL, *batch_path = NULL, *dump_path = NULL;
    const char *compare_path = NULL, *patch_from = NULL, *tokens_path = NULL;
    const char *ablate[TFRUN_MAX_ABLATE];
    int n_ablate = 0;
    int step_given = 0;
    int n_new = -1, batch = TFRUN_DEFAULT_BATCH, threads = runner_default_threads(), check = 0;
    int use_cache = 1, progress = 0;
    TfInspectOptions io = {0, 0, 0, NULL, NULL, NULL};
    enum {
        OPT_BATCH = 256, OPT_CHECK, OPT_BATCH_SIZE, OPT_THREADS, OPT_NO_CACHE, OPT_PROGRESS,
        OPT_SHARD_INPUT,
        OPT_TRACE, OPT_TRACE_ALL, OPT_STEP, OPT_REPORT, OPT_SVG, OPT_DUMP, OPT_COMPARE, OPT_VERSION,
        OPT_ABLATE, OPT_PATCH_FROM, OPT_TOKENS
    };
    static const struct option longopts[] = {
        {"batch", required_argument, NULL, OPT_BATCH},
        {"check", required_argument, NULL, OPT_CHECK},
        {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"no-cache", no_argument, NULL, OPT_NO_CACHE},
        {"progress", no_argument, NULL, OPT_PROGRESS},
        {"shard-input", no_argument, NULL, OPT_SHARD_INPUT},
        {"trace", no_argument, NULL, OPT_TRACE},
        {"trace-all", no_argument, NULL, OPT_TRACE_ALL},
        {"step", required_argument, NULL, OPT_STEP},
        {"report", required_argument, NULL, OPT_REPORT},
        {"svg", required_argument, NULL, OPT_SVG},
        {"dump", required_argument, NULL, OPT_DUMP},
        {"compare", required_argument, NULL, OPT_COMPARE},
        {"ablate", required_argument, NULL, OPT_ABLATE},
        {"patch-from", required_argument, NULL, OPT_PATCH_FROM},
        {"tokens", required_argument, NULL, OPT_TOKENS},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":n:h", longopts, NULL)) != -1) {
        const char *v = optarg;
        switch (c) {
        case 'n':
            if (parse_count(v, &n_new) < 0) {
                fprintf(stderr, "tfrun: -n wants a non-negative number, not '%s'\n", v);
                return CLI_EXIT_USAGE;
            }
            break;
        case OPT_BATCH:
        case OPT_CHECK:
            if (batch_path) {
                fprintf(stderr, "tfrun: give one --batch or --check file\n");
                return CLI_EXIT_USAGE;
            }
            batch_path = v;
            check = c == OPT_CHECK;
            break;
        case OPT_BATCH_SIZE:
            if (parse_count(v, &batch) < 0 || batch < 1 || batch > TFRUN_MAX_BATCH) {
                fprintf(stderr, "tfrun: --batch-size wants a number from 1 to %d, not '%s'\n",
                        TFRUN_MAX_BATCH, v);
                return CLI_EXIT_USAGE;
            }
            break;
        case OPT_THREADS:
            if (parse_count(v, &threads) < 0 || threads < 1 || threads > TFRUN_MAX_THREADS) {
                fprintf(stderr, "tfrun: --threads wants a number from 1 to %d, not '%s'\n",
                        TFRUN_MAX_THREADS, v);
                return CLI_EXIT_USAGE;
            }
            break;
        case OPT_NO_CACHE: use_cache = 0; break;
        case OPT_PROGRESS: progress = 1; break;
        case OPT_SHARD_INPUT: shard_input = 1; break;
        case OPT_TRACE: io.trace = 1; break;
        case OPT_TRACE_ALL: io.trace = io.trace_all = 1; break;
        case OPT_STEP:
            if (parse_count(v, &io.step) < 0) {
                fprintf(stderr, "tfrun: --step wants a non-negative number, not '%s'\n", v);
                return CLI_EXIT_USAGE;
            }
            step_given = 1;
            break;
        case OPT_REPORT: io.report_path = v; break;
        case OPT_SVG: io.svg_dir = v; break;
        case OPT_DUMP: dump_path = v; break;
        case OPT_COMPARE: compare_path = v; break;
        case OPT_ABLATE:
            if (n_ablate == TFRUN_MAX_ABLATE) {
                fprintf(stderr, "tfrun: more than %d --ablate options (join them with commas)\n",
                        TFRUN_MAX_ABLATE);
                return CLI_EXIT_USAGE;
            }
            ablate[n_ablate++] = v;
            break;
        case OPT_PATCH_FROM: patch_from = v; break;
        case OPT_TOKENS: tokens_path = v; break;
        case 'h': usage(stdout); return cli_flush_stdout("tfrun") < 0 ? CLI_EXIT_SYSTEM : 0;
        case OPT_VERSION:
            cli_version("tfrun", blas_library(), blas_core(), blas_core_is_fallback(blas_core()),
                        blas_best_core());
            // The engine's own vectorized kernels (kernels.h: attention).
            printf("attention: %s (the best of generic, avx2, avx512 this CPU and build run)\n",
                   tf_simd_names[simd_best()]);
            return cli_flush_stdout("tfrun") < 0 ? CLI_EXIT_SYSTEM : 0;
        default: cli_option_error("tfrun", c, argv, longopts); return CLI_EXIT_USAGE;
        }
    }
    if (optind < argc) weights = argv[optind++];
    if (optind < argc) prompt = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "tfrun: more than one prompt given (quote the prompt)\n");
        return CLI_EXIT_USAGE;
    }
    if (tokens_path && (prompt || batch_path)) {
        fprintf(stderr, "tfrun: give a prompt, --tokens or --batch/--check, one of them\n");
        return CLI_EXIT_USAGE;
    }
    if (tokens_path) prompt = tokens_path; /* read once the model is known */
    if (!weights || (!prompt && !batch_path) || (prompt && batch_path)) {
        fprintf(stderr, "tfrun: %s\n",
                !weights ? "no weight file given"
                         : prompt ? "give either a prompt or --batch/--check, not both"
                                  : "no prompt given");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    int inspect = io.trace || io.report_path || io.svg_dir;
    if ((inspect || dump_path || compare_path) && batch_path) {
        fprintf(stderr, "tfrun: --trace, --report, --svg, --dump and --compare take one prompt, "
                        "not a file\n");
        return CLI_EXIT_USAGE;
    }
    if (compare_path && (!(io.report_path || io.svg_dir) || io.trace || step_given || dump_path)) {
        fprintf(stderr, "tfrun: --compare %s\n",
                !(io.report_path || io.svg_dir)
                    ? "wants --report FILE or --svg DIR (what to write the comparison to)"
                    : "compares the prompt's pass: not with --trace, --step or --dump");
        return CLI_EXIT_USAGE;
    }

#ifdef TF_HAVE_OPENBLAS
    // These matrices are small: OpenBLAS's threads cost more than they
    // save (bench/batch.sh). An explicit OPENBLAS_NUM_THREADS still wins.
    if (!getenv("OPENBLAS_NUM_THREADS")) openblas_set_num_threads(1);
#endif
    TfError err = {""};
    // OpenBLAS hangs when its buffer cannot be had (its own worker thread,
    // started with the library, too): refuse now instead.
    // _Exit: its exit handler would wait for its own worker thread, which
    // retries the same allocation for ever.
    if (blas_reserve(batch_path ? threads : 1, &err) < 0) {
        fprintf(stderr, "tfrun: %s\n", err.msg);
        fflush(stdout);
        _Exit(CLI_EXIT_SYSTEM);
    }
    if (cli_expect_weights("tfrun", weights) < 0) return CLI_EXIT_INPUT;
    // An output that cannot be written is found now, not after the run.
    const char *outs[2] = {io.report_path, dump_path};
    for (int i = 0; i < 2; i++) {
        if (outs[i] && (cli_refuse_same_file("tfrun", outs[i], weights) < 0 ||
                        cli_refuse_same_file("tfrun", outs[i], compare_path) < 0))
            return CLI_EXIT_USAGE;
        if (outs[i] && outfile_check(outs[i], &err) < 0) {
            fprintf(stderr, "tfrun: %s\n", err.msg);
            return tf_error_is_memory(&err) ? CLI_EXIT_SYSTEM : CLI_EXIT_USAGE;
        }
    }
    TfModel *m = tfw_read(weights, &err);
    if (!m) {
        fprintf(stderr, "tfrun: %s\n", err.msg);
        return cli_error_status(&err);
    }
    if (tokens_path) {
        atexit(free_tokens_text);
        if (!(prompt = tokens_text = read_tokens(tokens_path, m))) {
            model_free(m);
            return CLI_EXIT_INPUT;
        }
    }
    // -n beyond the positions is refused before anything is sized by it.
    int n_given = n_new;
    if (n_new < 0) n_new = m->generate;
    if (runner_limit_new_tokens(m, n_new, &n_new, &err) < 0) {
        fprintf(stderr, "tfrun: -n %s\n", err.msg);
        model_free(m);
        return CLI_EXIT_USAGE;
    }
    TfIntervention *iv = NULL;
    int iv_status = make_intervention(m, ablate, n_ablate, patch_from, prompt, batch_path != NULL,
                                      n_new, &iv);
    if (iv_status) {
        model_free(m);
        return iv_status;
    }
    io.intervention = iv;
    if (compare_path) { /* the second model, its own -n limit */
        TfModel *b = cli_expect_weights("tfrun", compare_path) < 0 ? NULL
                                                                   : tfw_read(compare_path, &err);
        int n_b = n_given < 0 && b ? b->generate : n_given, status = CLI_EXIT_INPUT;
        if (b && runner_limit_new_tokens(b, n_b, &n_b, &err) < 0) {
            fprintf(stderr, "tfrun: -n %s (%s)\n", err.msg, compare_path);
            status = CLI_EXIT_USAGE;
        } else if (b) {
            TfModel *const ms[2] = {m, b};
            const char *const paths[2] = {weights, compare_path};
            const int ns[2] = {n_new, n_b};
            status = run_compare(ms, paths, prompt, ns, &io);
        } else if (err.msg[0]) {
            fprintf(stderr, "tfrun: %s\n", err.msg);
            status = cli_error_status(&err);
        }
        model_free(b);
        intervention_free(iv);
        model_free(m);
        if (cli_flush_stdout("tfrun") < 0) status = CLI_EXIT_SYSTEM;
        return status;
    }
    TfRunnerOptions bo = {.n_new = n_new, .batch_size = batch, .n_threads = threads,
                         .use_cache = use_cache, .check = check,
                         .show_failures = TFRUN_SHOW_FAILURES, .intervention = iv};
    int dumped = dump_path ? run_dump(m, prompt, dump_path, iv) : 0;
    int status = dumped         ? dumped
                 : inspect      ? run_inspect(m, prompt, n_new, &io)
                 : m->output_kind == TF_OUTPUT_CLASSIFY ? run_classify(m, prompt, batch_path, check, progress, iv)
                 : batch_path ? run_stream(m, batch_path, &bo, progress, shard_input)
                              : run_one(m, prompt, n_new, use_cache, iv);
    intervention_free(iv);
    model_free(m);
    if (cli_flush_stdout("tfrun") < 0) status = CLI_EXIT_SYSTEM;
    return status;
}
