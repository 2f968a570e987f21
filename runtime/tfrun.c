/* tfrun: run a .tfw weight file as a transformer, generating tokens.
 *
 *   tfrun WEIGHTS.tfw [-n N] PROMPT
 *   tfrun WEIGHTS.tfw [-n N] --batch FILE     (FILE may be -, standard input)
 *   tfrun WEIGHTS.tfw [-n N] --check FILE     (lines prompt<TAB>expected completion)
 *   tfrun WEIGHTS.tfw [-n N] [--trace | --trace-all] [--step K] [--report FILE.html]
 *         [--svg DIR] PROMPT                  (look inside: runtime/inspect.h)
 *   tfrun WEIGHTS.tfw --dump FILE.safetensors PROMPT   (activations: runtime/dump.h)
 *
 * Prints each prompt followed by its generated tokens, one line per prompt
 * (a model with a stop token stops at it and does not print it; -n is then
 * the most). A model read at every position prints each prompt, a TAB and
 * the token at every position (after the BOS position when it has a bos).
 * --check prints how many completions match, the first failures and the
 * throughput. --batch and --check stream their input through several
 * engines at once (runtime/batch.h).
 * Exit status: 0 success; 1 a bad weight file or prompt, or a failed check
 * (one-line message on stderr; the other lines still run); 2 usage error.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "dump.h"
#include "infer.h"
#include "inspect.h"
#ifdef TF_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include "tfw.h"

#define TFRUN_EXIT_ERROR 1
#define TFRUN_EXIT_USAGE 2
#define TFRUN_DEFAULT_BATCH 256 /* per thread; the fastest in bench/engine.sh */
#define TFRUN_MAX_BATCH 4096
#define TFRUN_MAX_THREADS 64
#define TFRUN_SHOW_FAILURES 10

static void usage(FILE *f) {
    fprintf(f, "usage: tfrun WEIGHTS.tfw [-n N] PROMPT\n"
               "       tfrun WEIGHTS.tfw [-n N] --batch FILE|-\n"
               "       tfrun WEIGHTS.tfw [-n N] --check FILE|-\n"
               "  -n N             generate N tokens (default: the program's `generate`;\n"
               "                   with a stop token, at most N)\n"
               "  --batch FILE     read one prompt per line ('-': standard input)\n"
               "  --check FILE     read lines prompt<TAB>expected completion (or the tokens\n"
               "                   at every position); print the\n"
               "                   number passed and failed, the first failures, the speed\n"
               "  --batch-size B   prompts per engine, 1 to %d (default %d)\n"
               "  --threads T      engines running at once (default: the CPUs online)\n"
               "  --no-cache       recompute every position at every step (no KV cache)\n"
               "  --trace          print the registers each layer wrote, decoded (step 0)\n"
               "  --trace-all      the same for every generation step\n"
               "  --step K         the step traced, reported and drawn (default 0)\n"
               "  --report FILE    write an HTML report of that step\n"
               "  --svg DIR        write its heatmaps and attention maps as SVG files\n"
               "  --dump FILE      write the prompt's activations (residual stream, attention\n"
               "                   patterns; TransformerLens names) as a safetensors file\n",
            TFRUN_MAX_BATCH, TFRUN_DEFAULT_BATCH);
}

static int parse_count(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

/* Checks and tokenizes a prompt; on failure prints "tfrun: WHERE: problem". */
static int *prepare_prompt(const TfModel *m, const char *text, int len, int n_new,
                           const char *where) {
    TfError err = {""};
    int *ids = malloc(((size_t)len + 1) * sizeof(int));
    if (!ids) {
        fprintf(stderr, "tfrun: %s: out of memory\n", where);
        return NULL;
    }
    if (batch_prepare_prompt(m, text, len, n_new, ids, &err) < 0) {
        fprintf(stderr, "tfrun: %s: %s\n", where, err.msg);
        free(ids);
        return NULL;
    }
    return ids;
}

/* --batch and --check. */
static int run_stream(const TfModel *m, const char *path, const TfBatchOptions *o) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tfrun: cannot open '%s': %s\n", path, strerror(errno));
        return TFRUN_EXIT_ERROR;
    }
    TfBatchStats st;
    TfError err = {""};
    const char *name = f == stdin ? "<stdin>" : path;
    int rc = batch_run(m, f, name, stdout, stderr, o, &st, &err);
    if (f != stdin) fclose(f);
    if (rc < 0) {
        fprintf(stderr, "tfrun: %s\n", err.msg);
        return TFRUN_EXIT_ERROR;
    }
    if (o->check) {
        if (st.failed > o->show_failures)
            printf("... and %ld more failures\n", st.failed - o->show_failures);
        printf("%ld passed, %ld failed", st.passed, st.failed);
        if (st.bad) printf(", %ld bad lines", st.bad);
        printf(" (%ld cases in %.2f s: %.0f cases/s, %d thread%s, batch size %d)\n", st.run,
               st.seconds, st.seconds > 0 ? (double)st.run / st.seconds : 0.0, o->n_threads,
               o->n_threads == 1 ? "" : "s", o->batch_size);
        if (st.run > 0)
            printf("engine: %.0f FLOP per case, %.2f GFLOP/s\n", st.flops / (double)st.run,
                   st.seconds > 0 ? st.flops / st.seconds * 1e-9 : 0.0);
    }
    return st.bad || st.failed ? TFRUN_EXIT_ERROR : 0;
}

/* Prints one prompt's result: prompt + completion, or for a model read at
 * every position prompt<TAB>the tokens at each position. */
static void print_result(const TfModel *m, const char *prompt, size_t len, const int *out, int n) {
    if (m->every_position)
        batch_print_outputs(stdout, m, prompt, len, out, n);
    else
        batch_print_completion(stdout, m, prompt, len, out, n);
}

/* --dump: one pass over the prompt, its activations to path (dump.h). */
static int run_dump(const TfModel *m, const char *prompt, const char *path) {
    size_t len = strlen(prompt);
    if (len > INT_MAX / 2) len = INT_MAX / 2;
    int *ids = prepare_prompt(m, prompt, (int)len, 0, "prompt");
    if (!ids) return TFRUN_EXIT_ERROR;
    TfError err = {""};
    int rc = dump_activations(m, prompt, ids, (int)len, path, &err);
    if (rc < 0) fprintf(stderr, "tfrun: %s\n", err.msg);
    free(ids);
    return rc < 0 ? TFRUN_EXIT_ERROR : 0;
}

/* --trace, --report, --svg: one prompt, one full pass per step (inspect.h). */
static int run_inspect(const TfModel *m, const char *prompt, int n_new, const TfInspectOptions *io) {
    size_t len = strlen(prompt);
    if (len > INT_MAX / 2) len = INT_MAX / 2;
    int *ids = prepare_prompt(m, prompt, (int)len, n_new, "prompt");
    size_t cap = (size_t)(n_new > (int)len ? n_new : (int)len) + 1;
    int *out = malloc(cap * sizeof(int));
    TfError err = {""};
    int status = 0, n_out = 0;
    if (!ids || !out || inspect_run(m, ids, (int)len, n_new, io, stdout, out, &n_out, &err) < 0) {
        if (ids) fprintf(stderr, "tfrun: %s\n", out ? err.msg : "out of memory");
        status = TFRUN_EXIT_ERROR;
    } else if (m->output_kind != TF_OUTPUT_CLASSIFY) {
        print_result(m, prompt, len, out, n_out);
    }
    free(ids);
    free(out);
    return status;
}

static int run_one(const TfModel *m, const char *prompt, int n_new, int use_cache) {
    size_t len = strlen(prompt);
    if (len > INT_MAX / 2) len = INT_MAX / 2;
    int *ids = prepare_prompt(m, prompt, (int)len, n_new, "prompt");
    if (!ids) return TFRUN_EXIT_ERROR;
    TfError err = {""};
    TfInfer *inf = infer_new(m, 1, &err);
    if (inf) infer_set_cache(inf, use_cache);
    size_t cap = (size_t)(n_new > (int)len ? n_new : (int)len) + 1;
    int *out = malloc(cap * sizeof(int));
    int status = 0, n_out = n_new, rc = -1;
    const int *idp = ids;
    int ilen = (int)len;
    if (inf && out) {
        if (m->every_position) {
            rc = infer_every_position(inf, &idp, &ilen, 1, &out, &err);
            n_out = ilen;
        } else if (m->stop_token >= 0) {
            rc = infer_generate_until(inf, &idp, &ilen, 1, n_new, m->stop_token, out, &n_out, &err);
        } else {
            rc = infer_generate(inf, &idp, &ilen, 1, n_new, out, &err);
        }
    }
    if (rc < 0) {
        fprintf(stderr, "tfrun: %s\n", out ? err.msg : "out of memory");
        status = TFRUN_EXIT_ERROR;
    } else {
        print_result(m, prompt, len, out, n_out);
    }
    infer_free(inf);
    free(out);
    free(ids);
    return status;
}

/* Classifier models (a learned `predict classes` model): each input (the
 * prompt, or every line of `path`) is printed with its class and that
 * class's probability, tab-separated. 0, or 1 after any bad input. */
static int run_classify(const TfModel *m, const char *prompt, const char *path) {
    TfError err = {""};
    TfInfer *inf = infer_new(m, 1, &err);
    float *probs = malloc((size_t)m->n_classes * sizeof *probs);
    FILE *f = !path ? NULL : strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!inf || !probs || (path && !f)) {
        fprintf(stderr, "tfrun: %s\n", !inf ? err.msg : path && !f ? strerror(errno) : "out of memory");
        infer_free(inf);
        free(probs);
        return TFRUN_EXIT_ERROR;
    }
    int status = 0;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    for (;;) {
        const char *text = prompt;
        if (f) {
            ssize_t n = getline(&line, &cap, f);
            if (n < 0) break;
            if (n > 0 && line[n - 1] == '\n') line[n - 1] = '\0';
            text = line;
            lineno++;
        }
        int len = (int)strlen(text);
        int *ids = len > 0 && len <= m->max_len ? malloc((size_t)len * sizeof *ids) : NULL;
        if (!ids || infer_tokenize(m, text, len, ids, &err) < 0 ||
            infer_classify(inf, (const int *const *)&ids, &len, 1, probs, &err) < 0) {
            if (!ids) tf_error_set(&err, "input of %d characters (1 to %d allowed)", len, m->max_len);
            if (f) fprintf(stderr, "tfrun: line %ld: %s\n", lineno, err.msg);
            else fprintf(stderr, "tfrun: %s\n", err.msg);
            status = TFRUN_EXIT_ERROR;
        } else {
            int best = 0;
            for (int c = 1; c < m->n_classes; c++)
                if (probs[c] > probs[best]) best = c;
            printf("%s\t%s\t%.4f\n", text, m->class_names[best], probs[best]);
        }
        free(ids);
        if (!f) break;
    }
    free(line);
    if (f && f != stdin) fclose(f);
    free(probs);
    infer_free(inf);
    return status;
}

int main(int argc, char **argv) {
    const char *weights = NULL, *prompt = NULL, *batch_path = NULL, *dump_path = NULL;
    int n_new = -1, batch = TFRUN_DEFAULT_BATCH, threads = batch_default_threads(), check = 0;
    int use_cache = 1;
    TfInspectOptions io = {0, 0, 0, NULL, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-n") == 0 || strcmp(a, "--batch") == 0 || strcmp(a, "--batch-size") == 0 ||
            strcmp(a, "--check") == 0 || strcmp(a, "--threads") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tfrun: %s needs a value\n", a);
                usage(stderr);
                return TFRUN_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--batch") == 0 || strcmp(a, "--check") == 0) {
                if (batch_path) {
                    fprintf(stderr, "tfrun: give one --batch or --check file\n");
                    return TFRUN_EXIT_USAGE;
                }
                batch_path = v;
                check = strcmp(a, "--check") == 0;
            } else if (strcmp(a, "--threads") == 0) {
                if (parse_count(v, &threads) < 0 || threads < 1 || threads > TFRUN_MAX_THREADS) {
                    fprintf(stderr, "tfrun: --threads wants a number from 1 to %d, not '%s'\n",
                            TFRUN_MAX_THREADS, v);
                    return TFRUN_EXIT_USAGE;
                }
            } else if (parse_count(v, strcmp(a, "-n") == 0 ? &n_new : &batch) < 0 ||
                       (strcmp(a, "--batch-size") == 0 && (batch < 1 || batch > TFRUN_MAX_BATCH))) {
                if (strcmp(a, "-n") == 0)
                    fprintf(stderr, "tfrun: -n wants a non-negative number, not '%s'\n", v);
                else
                    fprintf(stderr, "tfrun: --batch-size wants a number from 1 to %d, not '%s'\n",
                            TFRUN_MAX_BATCH, v);
                return TFRUN_EXIT_USAGE;
            }
        } else if (strcmp(a, "--no-cache") == 0) {
            use_cache = 0;
        } else if (strcmp(a, "--trace") == 0 || strcmp(a, "--trace-all") == 0) {
            io.trace = 1;
            io.trace_all |= strcmp(a, "--trace-all") == 0;
        } else if (strcmp(a, "--report") == 0 || strcmp(a, "--svg") == 0 ||
                   strcmp(a, "--step") == 0 || strcmp(a, "--dump") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tfrun: %s needs a value\n", a);
                return TFRUN_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--report") == 0) {
                io.report_path = v;
            } else if (strcmp(a, "--dump") == 0) {
                dump_path = v;
            } else if (strcmp(a, "--svg") == 0) {
                io.svg_dir = v;
            } else if (parse_count(v, &io.step) < 0) {
                fprintf(stderr, "tfrun: --step wants a non-negative number, not '%s'\n", v);
                return TFRUN_EXIT_USAGE;
            }
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tfrun: unknown option '%s'\n", a);
            usage(stderr);
            return TFRUN_EXIT_USAGE;
        } else if (!weights) {
            weights = a;
        } else if (!prompt) {
            prompt = a;
        } else {
            fprintf(stderr, "tfrun: more than one prompt given (quote the prompt)\n");
            return TFRUN_EXIT_USAGE;
        }
    }
    if (!weights || (!prompt && !batch_path) || (prompt && batch_path)) {
        fprintf(stderr, "tfrun: %s\n",
                !weights ? "no weight file given"
                         : prompt ? "give either a prompt or --batch/--check, not both"
                                  : "no prompt given");
        usage(stderr);
        return TFRUN_EXIT_USAGE;
    }

#ifdef TF_HAVE_OPENBLAS
    // These matrices are small: OpenBLAS's threads cost more than they
    // save (bench/batch.sh). An explicit OPENBLAS_NUM_THREADS still wins.
    if (!getenv("OPENBLAS_NUM_THREADS")) openblas_set_num_threads(1);
#endif
    TfError err = {""};
    TfModel *m = tfw_read(weights, &err);
    if (!m) {
        fprintf(stderr, "tfrun: %s\n", err.msg);
        return TFRUN_EXIT_ERROR;
    }
    if (n_new < 0) n_new = m->generate;
    int inspect = io.trace || io.report_path || io.svg_dir;
    if ((inspect || dump_path) && batch_path) {
        fprintf(stderr, "tfrun: --trace, --report, --svg and --dump take one prompt, not a file\n");
        model_free(m);
        return TFRUN_EXIT_USAGE;
    }
    TfBatchOptions bo = {n_new, batch, threads, use_cache, check, TFRUN_SHOW_FAILURES};
    int status = dump_path && run_dump(m, prompt, dump_path) != 0 ? TFRUN_EXIT_ERROR
                 : inspect      ? run_inspect(m, prompt, n_new, &io)
                 : m->output_kind == TF_OUTPUT_CLASSIFY ? run_classify(m, prompt, batch_path)
                 : batch_path ? run_stream(m, batch_path, &bo)
                              : run_one(m, prompt, n_new, use_cache);
    model_free(m);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "tfrun: error writing output: %s\n", strerror(errno));
        status = TFRUN_EXIT_ERROR;
    }
    return status;
}
