/* tfprove: proves a weight file against the program in its `source`
 * (compiler/prove.h), whatever made it; on a failure, searches short
 * prompts for one that reaches the failing case and runs the weights on it
 * (runtime/engine) to show whether they and the program disagree there.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "infer.h"
#include "prove.h"
#include "tfw.h"

#define MAX_PROMPTS 400000
#define MAX_PROMPT_LEN 8

static void usage(FILE *f) {
    fprintf(f, "usage: tfprove FILE.tfw\n"
               "Proves that the weights compute the program in the file's source, on every input\n"
               "up to maxlen: per op its margin, per numeric output its bound. On a failure it\n"
               "names the op, its line, the layer and a prompt on which to look (run by the\n"
               "weights: whether they and the program disagree there).\n"
               "  -h, --help   this help;  --version  the version\n"
               "A file that is not proven (a failure, or a part it cannot prove) exits 1.\n"
               CLI_EXIT_HELP);
}

static void prompt_text(const TfModel *m, const int *toks, int n, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && k + 40 < size; i++) {
        char tb[64];
        const char *s = model_token_name(m, toks[i], tb);
        k += (size_t)snprintf(buf + k, size - k, "%s%s", i && m->token_names ? " " : "", s);
    }
}

/* The weights' output at every position of toks; 0, or -1 (a run-time check failed). */
static int run_weights(TfInfer *inf, const TfModel *m, const int *toks, int n, int *out, float *num) {
    TfError err;
    const int *seq = toks;
    if (model_numeric_output(m)) return infer_every_position_values(inf, &seq, &n, 1, &num, &err);
    return infer_every_position(inf, &seq, &n, 1, &out, &err);
}

/* Tokens 1..n-1 as tfrun prints an every-position output ('?': no value). */
static void out_text(const TfModel *m, const int *t, int n, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
    for (int p = 1; p < n && k + 40 < size; p++) {
        char tb[64];
        k += (size_t)snprintf(buf + k, size - k, "%s%s", p > 1 && m->token_names ? " " : "",
                              t[p] < 0 ? "?" : model_token_name(m, t[p], tb));
    }
}

/* 1 when the weights and the program disagree on toks (text in why; when
 * they agree on a token output, why says what both print). */
static int disagree(TfInfer *inf, const TfModel *m, const int *toks, int n, const int *ref,
                    const double *refnum, char *why, size_t size) {
    int out[4096];
    float num[4096];
    if (n > 4096 || run_weights(inf, m, toks, n, out, num) < 0) return 0;
    for (int p = 1; p < n; p++) {
        char a[64], b[64];
        if (model_numeric_output(m)) {
            if (isnan(refnum[p]) || fabs(num[p] - refnum[p]) <= m->output_error_bound) continue;
            snprintf(why, size, "at position %d the program gives %g, the weights %g", p, refnum[p], num[p]);
            return 1;
        }
        if (ref[p] < 0 || ref[p] == out[p]) continue;
        char pa[2048], pb[2048];
        out_text(m, ref, n, pa, sizeof pa);
        out_text(m, out, n, pb, sizeof pb);
        snprintf(why, size, "at position %d the program gives '%s', the weights '%s' (the program prints '%s', the weights '%s')", p,
                 model_token_name(m, ref[p], a), model_token_name(m, out[p], b), pa, pb);
        return 1;
    }
    if (!model_numeric_output(m)) {
        char pa[2048];
        out_text(m, ref, n, pa, sizeof pa);
        snprintf(why, size, "the program and the weights both print '%s'", pa);
    }
    return 0;
}

typedef struct Search {
    const TfModel *m;
    const TfProof *P;
    TfProveRef *R;
    TfInfer *inf;
    int *ref;
    double *refnum;
    char first[8192];
    long tried;
} Search;

/* 1 when toks reaches a failing case and the weights disagree there (printed). */
static int try_prompt(Search *X, const int *toks, int n) {
    char text[4096], why[4600] = "";
    X->tried++;
    if (prove_ref_run(X->R, toks, n, X->P, X->ref, X->refnum) != 1) return 0;
    prompt_text(X->m, toks, n, text, sizeof text);
    if (disagree(X->inf, X->m, toks, n, X->ref, X->refnum, why, sizeof why)) {
        printf("counterexample: prompt '%s': %s\n", text, why);
        return 1;
    }
    if (!X->first[0]) snprintf(X->first, sizeof X->first, "'%s' (%s: the margin is what is not proven)", text, why[0] ? why : "the weights agree with the program");
    return 0;
}

/* Every prompt of up to MAX_PROMPT_LEN tokens, shortest first. */
static int search_short(Search *X, const int *alph, int na, int *toks) {
    int maxn = X->m->max_len < MAX_PROMPT_LEN + 1 ? X->m->max_len : MAX_PROMPT_LEN + 1;
    for (int n = 2; n <= maxn && X->tried < MAX_PROMPTS; n++) {
        int idx[MAX_PROMPT_LEN + 1] = {0};
        for (;;) {
            for (int i = 1; i < n; i++) toks[i] = alph[idx[i]];
            if (try_prompt(X, toks, n)) return 1;
            int i = n - 1;
            while (i >= 1 && ++idx[i] == na) idx[i--] = 0;
            if (i < 1 || X->tried >= MAX_PROMPTS) break;
        }
    }
    return 0;
}

/* Longer prompts: one token repeated, then random mixes (a fixed seed). */
static int search_long(Search *X, const int *alph, int na, int *toks) {
    unsigned long long rng = 0x9e3779b97f4a7c15ull;
    for (int n = MAX_PROMPT_LEN + 2; n <= X->m->max_len; n++) {
        for (int t = 0; t < na; t++) {
            for (int i = 1; i < n; i++) toks[i] = alph[t];
            if (try_prompt(X, toks, n)) return 1;
        }
        for (int r = 0; r < 40; r++) {
            int a = alph[r % na], b = alph[(r / na + 1 + r) % na];
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            unsigned cut = (unsigned)(rng >> 33) % 1000;
            for (int i = 1; i < n; i++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                unsigned x = (unsigned)(rng >> 33) % 1000;
                toks[i] = r % 2 ? (x < cut ? a : b) : alph[x % (unsigned)na];
            }
            if (try_prompt(X, toks, n)) return 1;
        }
    }
    return 0;
}

/* Prompts that reach P's failing cases: the first on which the weights
 * disagree with the program, else the first that reaches one. */
static void counterexample(const TfModel *m, const TfProof *P) {
    TfError err;
    Search X = {.m = m, .P = P};
    X.R = prove_ref_new(m, &err);
    X.inf = X.R ? infer_new(m, 1, &err) : NULL;
    int *toks = malloc((size_t)m->max_len * sizeof(int)), alph[256], na = 0;
    X.ref = malloc((size_t)m->max_len * sizeof(int));
    X.refnum = malloc((size_t)m->max_len * sizeof(double));
    for (int t = 0; t < m->n_vocab; t++)
        if (t != m->bos) alph[na++] = t;
    int found = 0;
    if (X.R && X.inf && toks && X.ref && X.refnum && na && m->bos >= 0) {
        toks[0] = m->bos;
        found = search_short(&X, alph, na, toks) || search_long(&X, alph, na, toks);
    }
    if (!found && X.first[0])
        printf("prompt reaching the case: %s\n", X.first);
    else if (!found)
        printf("no prompt tried reaches the case (%ld tried)\n", X.tried);
    free(toks), free(X.ref), free(X.refnum);
    infer_free(X.inf);
    prove_ref_free(X.R);
}

/* A seed program's failing case (compiler/prove_seed.c): the prompts that
 * reach it, each run by the weights for one token; the first on which the
 * weights and the program give different next tokens is a counterexample. */
static void seed_counterexample(const TfModel *m, const TfProof *P) {
    TfError err;
    TfInfer *inf = infer_new(m, 1, &err);
    char text[4096], a[64], b[64], first[4400] = "";
    for (int k = 0; inf && k < P->n_prompts; k++) {
        const int *seq = P->prompt[k];
        int len = P->prompt_len[k], out = -1;
        if (len + 1 > m->max_len || infer_generate(inf, &seq, &len, 1, 1, &out, &err) < 0) continue;
        prompt_text(m, seq, len, text, sizeof text);
        int want = P->prompt_expect[k];
        if (want >= 0 && out != want) {
            printf("counterexample: prompt '%s': the program gives '%s' next, the weights '%s'\n", text,
                   model_token_name(m, want, a), model_token_name(m, out, b));
            infer_free(inf);
            return;
        }
        if (!first[0]) {
            if (want >= 0)
                snprintf(first, sizeof first, "'%s' (the program and the weights both give '%s' next: the margin is what is not proven)", text, model_token_name(m, want, a));
            else
                snprintf(first, sizeof first, "'%s' (the program gives no value there; the weights '%s')", text, model_token_name(m, out, b));
        }
    }
    infer_free(inf);
    if (first[0]) printf("prompt reaching the case: %s\n", first);
    else printf("no prompt tried reaches the case\n");
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}, {0, 0, 0, 0}};
    int c;
    opterr = 0; /* cli_option_error says it once */
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': usage(stdout); return cli_flush_stdout("tfprove") < 0 ? CLI_EXIT_SYSTEM : 0;
        case 'V':
            cli_version("tfprove", NULL, NULL, 0, NULL);
            return cli_flush_stdout("tfprove") < 0 ? CLI_EXIT_SYSTEM : 0;
        default: cli_option_error("tfprove", c, argv, longopts); return CLI_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *path = argv[optind];
    if (cli_expect_weights("tfprove", path) < 0) return CLI_EXIT_INPUT;
    TfError err;
    TfModel *m = tfw_read(path, &err);
    if (!m) {
        fprintf(stderr, "tfprove: %s\n", err.msg);
        return cli_error_status(&err);
    }
    TfProof P;
    if (prove_model(m, &P, &err) < 0) {
        fprintf(stderr, "tfprove: %s: %s\n", path, err.msg);
        model_free(m);
        return cli_error_status(&err);
    }
    for (int i = 0; i < P.n_lines; i++) printf("%s\n", P.lines[i]);
    int rc = 0;
    if (P.verdict == TF_PROOF_PROVEN) {
        printf("%s: proven\n", path);
    } else {
        printf("%s: %s: %s\n", path, P.verdict == TF_PROOF_FAILED ? "NOT PROVEN" : "not proven", P.reason);
        for (int k = 0; k < P.n_assign; k++)
            printf("  case: %s = %s\n", P.assign_reg[k], P.assign_val[k]);
        if (P.n_cases > 1) printf("  (and %d more failing cases of this check)\n", P.n_cases - 1);
        if (P.verdict == TF_PROOF_FAILED && P.n_prompts) seed_counterexample(m, &P);
        else if (P.verdict == TF_PROOF_FAILED && P.n_assign) counterexample(m, &P);
        rc = CLI_EXIT_INPUT;
    }
    prove_free(&P);
    model_free(m);
    if (cli_flush_stdout("tfprove") < 0) return CLI_EXIT_SYSTEM;
    return rc;
}
