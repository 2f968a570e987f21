/* tfrun: run a .tfw weight file as a transformer, generating tokens.
 *
 *   tfrun WEIGHTS.tfw [-n N] PROMPT
 *   tfrun WEIGHTS.tfw [-n N] --batch FILE     (FILE may be -, standard input)
 *
 * Prints each prompt followed by its generated tokens, one line per prompt.
 * Exit status: 0 success; 1 a bad weight file or prompt (one-line message
 * on stderr; in --batch mode the other prompts still run); 2 usage error.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#ifdef TF_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include "tfw.h"

#define TFRUN_EXIT_ERROR 1
#define TFRUN_EXIT_USAGE 2
#define TFRUN_DEFAULT_BATCH 64 /* the fastest in bench/batch.sh */
#define TFRUN_MAX_BATCH 4096

static void usage(FILE *f) {
    fprintf(f, "usage: tfrun WEIGHTS.tfw [-n N] PROMPT\n"
               "       tfrun WEIGHTS.tfw [-n N] --batch FILE|-\n"
               "  -n N             generate N tokens (default: the program's `generate`)\n"
               "  --batch FILE     read one prompt per line ('-': standard input)\n"
               "  --batch-size B   prompts run together, 1 to %d (default %d)\n",
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

static void print_completion(const TfModel *m, const char *prompt, size_t len, const int *toks,
                             int n) {
    fwrite(prompt, 1, len, stdout);
    char buf[8];
    for (int i = 0; i < n; i++) {
        int k = infer_token_text(m, toks[i], buf);
        fwrite(buf, 1, (size_t)k, stdout);
    }
    fputc('\n', stdout);
}

/* A prompt of the batch being gathered. */
typedef struct Pending {
    char *text;
    int len;
    int *ids;
} Pending;

/* Runs the gathered prompts and prints their lines; 0 or -1. */
static int flush_batch(TfInfer *inf, const TfModel *m, Pending *p, int n, int n_new, int *out,
                       const int **ids, int *lens) {
    if (n == 0) return 0;
    for (int i = 0; i < n; i++) {
        ids[i] = p[i].ids;
        lens[i] = p[i].len;
    }
    TfError err = {""};
    int rc = infer_generate(inf, ids, lens, n, n_new, out, &err);
    if (rc < 0) fprintf(stderr, "tfrun: %s\n", err.msg);
    for (int i = 0; i < n; i++) {
        if (rc == 0) print_completion(m, p[i].text, (size_t)p[i].len, out + (long)i * n_new, n_new);
        free(p[i].text);
        free(p[i].ids);
    }
    return rc;
}

/* Checks one prompt; on failure prints "tfrun: WHERE: problem". */
static int *prepare_prompt(const TfModel *m, const char *text, int len, int n_new,
                           const char *where) {
    TfError err = {""};
    if (len == 0) {
        fprintf(stderr, "tfrun: %s: empty prompt\n", where);
        return NULL;
    }
    if ((long)len + n_new > m->max_len) {
        fprintf(stderr,
                "tfrun: %s: %d prompt tokens plus %d to generate exceed the %d positions of the "
                "position encoding\n",
                where, len, n_new, m->max_len);
        return NULL;
    }
    int *ids = malloc((size_t)len * sizeof(int));
    if (!ids) {
        fprintf(stderr, "tfrun: %s: out of memory\n", where);
        return NULL;
    }
    if (infer_tokenize(m, text, len, ids, &err) < 0) {
        fprintf(stderr, "tfrun: %s: %s\n", where, err.msg);
        free(ids);
        return NULL;
    }
    return ids;
}

static int run_batch(const TfModel *m, const char *path, int n_new, int batch) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tfrun: cannot open '%s': %s\n", path, strerror(errno));
        return TFRUN_EXIT_ERROR;
    }
    TfError err = {""};
    TfInfer *inf = infer_new(m, batch, &err);
    Pending *pend = calloc((size_t)batch, sizeof *pend);
    int *out = malloc((size_t)batch * (size_t)(n_new > 0 ? n_new : 1) * sizeof(int));
    const int **ids = malloc((size_t)batch * sizeof *ids);
    int *lens = malloc((size_t)batch * sizeof *lens);
    int status = 0;
    if (!inf || !pend || !out || !ids || !lens) {
        fprintf(stderr, "tfrun: %s\n", inf ? "out of memory" : err.msg);
        status = TFRUN_EXIT_ERROR;
        goto done;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long lineno = 0;
    int n = 0;
    while ((got = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (got > 0 && line[got - 1] == '\n') line[--got] = '\0';
        char where[64];
        snprintf(where, sizeof where, "line %ld", lineno);
        if (got > INT_MAX / 2) {
            fprintf(stderr, "tfrun: %s: prompt too long\n", where);
            status = TFRUN_EXIT_ERROR;
            continue;
        }
        int *tok = prepare_prompt(m, line, (int)got, n_new, where);
        if (!tok) {
            status = TFRUN_EXIT_ERROR;
            continue;
        }
        pend[n].text = malloc((size_t)got + 1);
        if (!pend[n].text) {
            free(tok);
            fprintf(stderr, "tfrun: %s: out of memory\n", where);
            status = TFRUN_EXIT_ERROR;
            continue;
        }
        memcpy(pend[n].text, line, (size_t)got + 1);
        pend[n].len = (int)got;
        pend[n].ids = tok;
        if (++n == batch) {
            if (flush_batch(inf, m, pend, n, n_new, out, ids, lens) < 0) status = TFRUN_EXIT_ERROR;
            n = 0;
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "tfrun: error reading '%s': %s\n", path, strerror(errno));
        status = TFRUN_EXIT_ERROR;
    }
    if (flush_batch(inf, m, pend, n, n_new, out, ids, lens) < 0) status = TFRUN_EXIT_ERROR;
    free(line);
done:
    if (f != stdin) fclose(f);
    infer_free(inf);
    free(pend);
    free(out);
    free(ids);
    free(lens);
    return status;
}

static int run_one(const TfModel *m, const char *prompt, int n_new) {
    size_t len = strlen(prompt);
    if (len > INT_MAX / 2) len = INT_MAX / 2;
    int *ids = prepare_prompt(m, prompt, (int)len, n_new, "prompt");
    if (!ids) return TFRUN_EXIT_ERROR;
    TfError err = {""};
    TfInfer *inf = infer_new(m, 1, &err);
    int *out = malloc((size_t)(n_new > 0 ? n_new : 1) * sizeof(int));
    int status = 0;
    const int *idp = ids;
    int ilen = (int)len;
    if (!inf || !out || infer_generate(inf, &idp, &ilen, 1, n_new, out, &err) < 0) {
        fprintf(stderr, "tfrun: %s\n", out ? err.msg : "out of memory");
        status = TFRUN_EXIT_ERROR;
    } else {
        print_completion(m, prompt, len, out, n_new);
    }
    infer_free(inf);
    free(out);
    free(ids);
    return status;
}

int main(int argc, char **argv) {
    const char *weights = NULL, *prompt = NULL, *batch_path = NULL;
    int n_new = -1, batch = TFRUN_DEFAULT_BATCH;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-n") == 0 || strcmp(a, "--batch") == 0 || strcmp(a, "--batch-size") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tfrun: %s needs a value\n", a);
                usage(stderr);
                return TFRUN_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (strcmp(a, "--batch") == 0) {
                batch_path = v;
            } else if (parse_count(v, strcmp(a, "-n") == 0 ? &n_new : &batch) < 0 ||
                       (strcmp(a, "--batch-size") == 0 && (batch < 1 || batch > TFRUN_MAX_BATCH))) {
                if (strcmp(a, "-n") == 0)
                    fprintf(stderr, "tfrun: -n wants a non-negative number, not '%s'\n", v);
                else
                    fprintf(stderr, "tfrun: --batch-size wants a number from 1 to %d, not '%s'\n",
                            TFRUN_MAX_BATCH, v);
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
                         : prompt ? "give either a prompt or --batch, not both" : "no prompt given");
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
    int status = batch_path ? run_batch(m, batch_path, n_new, batch) : run_one(m, prompt, n_new);
    model_free(m);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "tfrun: error writing output: %s\n", strerror(errno));
        status = TFRUN_EXIT_ERROR;
    }
    return status;
}
