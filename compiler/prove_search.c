/* prove_search.c: a counterexample for a proof that fails (prove_search.h):
 * prompts that reach the failing case, run by the weights (runtime/engine)
 * and by the program (prove_eval.c), the first on which they disagree.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "prove_search.h"

#define MAX_PROMPTS 400000
#define MAX_PROMPT_LEN 8
#define MAX_RUNS 20000 /* prompts the weights run on when no prompt reaching a case disagrees */

/* Token tok as tfrun prints it (\n escaped, model_token_text) into buf
 * (TF_TOKEN_TEXT_MAX bytes at least). */
static const char *tok_text(const TfModel *m, int tok, char *buf) {
    model_token_text(m, tok, buf);
    return buf;
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

/* The weights' output at every position of toks; 0, or -1 (a run-time
 * check failed, or the run did: why in err). */
static int run_weights(TfInfer *inf, const TfModel *m, const int *toks, int n, int *out, float *num,
                       TfError *err) {
    const int *seq = toks;
    if (model_numeric_output(m)) return infer_every_position_values(inf, &seq, &n, 1, &num, err);
    return infer_every_position(inf, &seq, &n, 1, &out, err);
}

/* Tokens 1..n-1 as tfrun prints an every-position output ('?': no value). */
static void out_text(const TfModel *m, const int *t, int n, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
    for (int p = 1; p < n && k + 40 < size; p++) {
        char tb[64];
        k += (size_t)snprintf(buf + k, size - k, "%s%s", p > 1 && m->token_names ? " " : "",
                              t[p] < 0 ? "?" : tok_text(m, t[p], tb));
    }
}

/* A generating model's disagreement at position p of toks, as generation
 * meets it: the prompt cut after p, the next token the program and the
 * weights give there (which tfrun -n 1 shows). 0 where the cut prompt
 * leaves no room for a token (p is the last position) or, the model not
 * being causal, the weights agree there. */
static int next_disagree(TfInfer *inf, TfProveRef *R, const TfProof *P, const TfModel *m, const int *toks, int p,
                         char *why, size_t size) {
    int out[4096], ref[4096];
    double refnum[4096];
    float num[4096];
    TfError err;
    if (p + 2 > m->max_len || p + 1 > 4096 || prove_ref_run(R, toks, p + 1, P, ref, refnum) < 0 ||
        run_weights(inf, m, toks, p + 1, out, num, &err) < 0 || ref[p] < 0 || ref[p] == out[p])
        return 0;
    char text[4096], a[64], b[64];
    prompt_text(m, toks, p + 1, text, sizeof text);
    snprintf(why, size, "prompt '%s': the program gives '%s' next, the weights '%s'", text,
             tok_text(m, ref[p], a), tok_text(m, out[p], b));
    return 1;
}

/* The weights stop on toks (a run-time check fails) where the program
 * answers: for every position, the program's output and the error (1); a
 * generating model, the shortest prompt on which they stop and the token
 * the program gives next there, which tfrun -n 1 shows (2, why naming the
 * prompt). 0 when the program has no answer there either. */
static int stopped(TfInfer *inf, const TfModel *m, const int *toks, int n, const int *ref, TfProveRef *R,
                   const TfProof *P, int gen, char *why, size_t size) {
    int out[4096], cut[4096];
    double refnum[4096];
    float num[4096];
    TfError err;
    char text[4096], a[64];
    if (!gen) {
        int any = 0;
        for (int p = 1; p < n; p++) any |= ref[p] >= 0;
        if (!any && !model_numeric_output(m)) return 0;
        run_weights(inf, m, toks, n, out, num, &err);
        out_text(m, ref, n, text, sizeof text);
        if (model_numeric_output(m)) snprintf(why, size, "the weights stop: %s", err.msg);
        else snprintf(why, size, "the program prints '%s', the weights stop: %s", text, err.msg);
        return 1;
    }
    for (int p = 1; p < n && p + 2 <= m->max_len; p++) {
        if (run_weights(inf, m, toks, p + 1, out, num, &err) == 0) continue;
        if (prove_ref_run(R, toks, p + 1, P, cut, refnum) < 0 || cut[p] < 0) return 0;
        prompt_text(m, toks, p + 1, text, sizeof text);
        snprintf(why, size, "prompt '%s': the program gives '%s' next, the weights stop: %s", text,
                 tok_text(m, cut[p], a), err.msg);
        return 2;
    }
    return 0;
}

/* 1 when the weights and the program disagree on toks (text in why; when
 * they agree on a token output, why says what both print). With R, a
 * generating model's disagreement is the next token of a cut prompt
 * (next_disagree): 2, why then naming the prompt (print_counterexample). */
static int disagree(TfInfer *inf, const TfModel *m, const int *toks, int n, const int *ref,
                    const double *refnum, TfProveRef *R, const TfProof *P, char *why, size_t size) {
    int out[4096];
    float num[4096];
    TfError err;
    if (n > 4096) return 0;
    int gen = R && !m->every_position && !model_numeric_output(m);
    if (run_weights(inf, m, toks, n, out, num, &err) < 0)
        return stopped(inf, m, toks, n, ref, R, P, gen, why, size);
    for (int p = 1; p < n; p++) {
        char a[64], b[64];
        if (model_numeric_output(m)) {
            if (isnan(refnum[p]) || fabs(num[p] - refnum[p]) <= m->output_error_bound) continue;
            snprintf(why, size, "at position %d the program gives %g, the weights %g", p, refnum[p], num[p]);
            return 1;
        }
        if (ref[p] < 0 || ref[p] == out[p]) continue;
        if (gen) {
            if (next_disagree(inf, R, P, m, toks, p, why, size)) return 2;
            continue;
        }
        char pa[2048], pb[2048];
        out_text(m, ref, n, pa, sizeof pa);
        out_text(m, out, n, pb, sizeof pb);
        snprintf(why, size, "at position %d the program gives '%s', the weights '%s' (the program prints '%s', the weights '%s')", p,
                 tok_text(m, ref[p], a), tok_text(m, out[p], b), pa, pb);
        return 1;
    }
    if (!model_numeric_output(m)) {
        char pa[2048];
        out_text(m, ref, n, pa, sizeof pa);
        snprintf(why, size, "the program and the weights both print '%s'", pa);
    }
    return 0;
}

/* The counterexample line: disagree's why, after the prompt text unless
 * why names its own (d == 2). */
static void print_counterexample(FILE *out, const char *text, const char *why, int d) {
    if (d == 2) fprintf(out, "counterexample: %s\n", why);
    else fprintf(out, "counterexample: prompt '%s': %s\n", text, why);
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
    double work, pairs; /* this phase's engine multiply-adds and program position pairs */
    double params;      /* the model's parameters (model_param_count) */
    FILE *out; /* where the counterexample is printed */
} Search;

/* Each phase of the search has a budget, so that a large model's or a
 * long maxlen's search ends in seconds, on the same prompts on every
 * machine: the weights run on at most SEARCH_WORK multiply-adds (a prompt
 * of n tokens: n times the parameters, plus n^2 times the width for the
 * attention), the program on at most SEARCH_PAIRS pairs of positions (a
 * prompt of n tokens: n^2, what its selections compare). */
#define SEARCH_WORK 2e11
#define SEARCH_PAIRS 2e8
static void phase(Search *X) { X->work = X->pairs = 0; }
static int spent(const Search *X) { return X->work > SEARCH_WORK || X->pairs > SEARCH_PAIRS; }
static int ref_run(Search *X, const int *toks, int n) {
    X->pairs += (double)n * n;
    return prove_ref_run(X->R, toks, n, X->P, X->ref, X->refnum);
}
/* 1 where the budget is spent (the weights then not run), else counts a run. */
static int over_budget(Search *X, int n) {
    if (spent(X)) return 1;
    X->work += (double)n * X->params + (double)n * n * X->m->d_model;
    return 0;
}
/* The next length a long phase tries: every one up to 32, then an eighth
 * longer each time (and the longest). */
static int next_len(int n, int max_len) {
    int next = n < 32 ? n + 1 : n + n / 8;
    return n < max_len && next > max_len ? max_len : next;
}

/* 1 when toks reaches a failing case and the weights disagree there (printed). */
static int try_prompt(Search *X, const int *toks, int n) {
    char text[4096], why[4600] = "";
    X->tried++;
    if (spent(X) || ref_run(X, toks, n) != 1 || over_budget(X, n)) return 0;
    prompt_text(X->m, toks, n, text, sizeof text);
    int d = disagree(X->inf, X->m, toks, n, X->ref, X->refnum, X->R, X->P, why, sizeof why);
    if (d) {
        print_counterexample(X->out, text, why, d);
        return 1;
    }
    if (!X->first[0]) snprintf(X->first, sizeof X->first, "'%s' (%s: the margin is what is not proven)", text, why[0] ? why : "the weights agree with the program");
    return 0;
}

/* Every prompt of up to MAX_PROMPT_LEN tokens, shortest first. */
static int search_short(Search *X, const int *alph, int na, int *toks) {
    int maxn = X->m->max_len < MAX_PROMPT_LEN + 1 ? X->m->max_len : MAX_PROMPT_LEN + 1;
    for (int n = 2; n <= maxn && X->tried < MAX_PROMPTS && !spent(X); n++) {
        int idx[MAX_PROMPT_LEN + 1] = {0};
        for (;;) {
            for (int i = 1; i < n; i++) toks[i] = alph[idx[i]];
            if (try_prompt(X, toks, n)) return 1;
            int i = n - 1;
            while (i >= 1 && ++idx[i] == na) idx[i--] = 0;
            if (i < 1 || X->tried >= MAX_PROMPTS || spent(X)) break;
        }
    }
    return 0;
}

/* Hill climbing towards the failing case (a fixed seed): from a random
 * prompt of a random length, one token changed at a time, the change kept
 * when the prompt comes no less near the case (prove_ref_near); one that
 * reaches it is run (try_prompt) and the walk goes on among those that do,
 * since reaching the case is not yet disagreeing. A restart after
 * CLIMB_STUCK steps without progress. The budget is in evaluations, scaled
 * by what one costs (the length squared times the layers): the same
 * prompts on every machine. */
#define CLIMB_WORK 4e8
#define CLIMB_MAX 100000
#define CLIMB_STUCK 400
static int search_climb(Search *X, const int *alph, int na, int *toks) {
    const TfModel *m = X->m;
    double cost = (double)m->max_len * m->max_len * (m->n_layers + 1);
    long steps = (long)fmin(CLIMB_MAX, CLIMB_WORK / cost), ran = 0;
    unsigned long long rng = 0xd1b54a32d192ed03ull;
#define CLIMB_NEXT() (rng = rng * 6364136223846793005ull + 1442695040888963407ull, (unsigned)(rng >> 33))
    while (ran < steps && !spent(X)) {
        int n = 2 + (int)(CLIMB_NEXT() % (unsigned)(m->max_len - 1));
        for (int i = 1; i < n; i++) toks[i] = alph[CLIMB_NEXT() % (unsigned)na];
        int r = ref_run(X, toks, n);
        double near = r < 0 ? -1 : prove_ref_near(X->R);
        ran++;
        for (long stuck = 0; stuck < CLIMB_STUCK && ran < steps && !spent(X); ran++) {
            int i = 1 + (int)(CLIMB_NEXT() % (unsigned)(n - 1)), old = toks[i];
            toks[i] = alph[CLIMB_NEXT() % (unsigned)na];
            r = ref_run(X, toks, n);
            double now = r < 0 ? -1 : prove_ref_near(X->R);
            if (now < near) {
                toks[i] = old, stuck++;
                continue;
            }
            stuck = now > near ? 0 : stuck + 1;
            near = now;
            if (r == 1 && try_prompt(X, toks, n)) return 1;
        }
    }
#undef CLIMB_NEXT
    return 0;
}

/* Longer prompts: one token repeated, then random mixes (a fixed seed). */
static int search_long(Search *X, const int *alph, int na, int *toks) {
    unsigned long long rng = 0x9e3779b97f4a7c15ull;
    for (int n = MAX_PROMPT_LEN + 2; n <= X->m->max_len && !spent(X); n = next_len(n, X->m->max_len)) {
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

/* 1 when the weights and the program disagree on toks (printed). */
static int try_any(Search *X, const int *toks, int n) {
    char text[4096], why[4600];
    X->tried++;
    if (spent(X) || ref_run(X, toks, n) < 0 || over_budget(X, n)) return 0;
    int d = disagree(X->inf, X->m, toks, n, X->ref, X->refnum, X->R, X->P, why, sizeof why);
    if (!d) return 0;
    prompt_text(X->m, toks, n, text, sizeof text);
    print_counterexample(X->out, text, why, d);
    return 1;
}

/* The weights on any prompt, failing case or not (the cases P keeps are the
 * first few of the first check that fails, which no prompt may reach, while
 * the change shows at a later layer): every prompt shortest first while they
 * fit MAX_RUNS in all, then at each longer length every token repeated, 8
 * random prompts and 16 of two tokens in a random share. */
static int search_any(Search *X, const int *alph, int na, int *toks, int *idx) {
    long runs = 0, level = na;
    int n = 2;
    for (; n <= X->m->max_len && runs + level <= MAX_RUNS && !spent(X); n++, level *= na) {
        memset(idx, 0, (size_t)n * sizeof *idx);
        for (;;) {
            for (int i = 1; i < n; i++) toks[i] = alph[idx[i]];
            runs++;
            if (try_any(X, toks, n)) return 1;
            int i = n - 1;
            while (i >= 1 && ++idx[i] == na) idx[i--] = 0;
            if (i < 1 || spent(X)) break;
        }
    }
    unsigned long long rng = 0x2545f4914f6cdd1dull;
#define ANY_NEXT() (rng = rng * 6364136223846793005ull + 1442695040888963407ull, (unsigned)(rng >> 33))
    for (; n <= X->m->max_len && !spent(X); n = next_len(n, X->m->max_len)) {
        for (int t = 0; t < na; t++) { // one token repeated
            for (int i = 1; i < n; i++) toks[i] = alph[t];
            if (try_any(X, toks, n)) return 1;
        }
        for (int r = 0; r < 24; r++) { // uniform, then two tokens in a random share
            int a = alph[ANY_NEXT() % (unsigned)na], b = alph[ANY_NEXT() % (unsigned)na];
            unsigned cut = ANY_NEXT() % 1000;
            for (int i = 1; i < n; i++) toks[i] = r < 8 ? alph[ANY_NEXT() % (unsigned)na] : ANY_NEXT() % 1000 < cut ? a : b;
            if (try_any(X, toks, n)) return 1;
        }
    }
#undef ANY_NEXT
    return 0;
}

/* Prompts that reach P's failing cases: the first on which the weights
 * disagree with the program; else any prompt on which they do
 * (search_any); else the first that reaches a case. Nothing when the
 * program cannot be evaluated (a learned model). */
static void counterexample(const TfModel *m, const TfProof *P, FILE *out) {
    TfError err;
    Search X = {.m = m, .P = P, .out = out, .params = (double)model_param_count(m)};
    X.R = prove_ref_new(m, &err);
    X.inf = X.R ? infer_new(m, 1, &err) : NULL;
    int *toks = malloc((size_t)m->max_len * sizeof(int)), alph[256], na = 0;
    int *idx = malloc((size_t)m->max_len * sizeof(int));
    X.ref = malloc((size_t)m->max_len * sizeof(int));
    X.refnum = malloc((size_t)m->max_len * sizeof(double));
    for (int t = 0; t < m->n_vocab - m->n_output_only; t++) // the tokens a prompt holds
        if (t != m->bos) alph[na++] = t;
    int found = 0;
    int ran = X.R && X.inf && toks && idx && X.ref && X.refnum && na && m->bos >= 0;
    if (ran) {
        toks[0] = m->bos;
        found = P->n_assign && ((phase(&X), search_short(&X, alph, na, toks)) ||
                                (phase(&X), search_climb(&X, alph, na, toks)) ||
                                (phase(&X), search_long(&X, alph, na, toks)));
        long reached = X.tried;
        X.tried = 0;
        phase(&X);
        found = found || search_any(&X, alph, na, toks, idx);
        if (!found && X.first[0])
            fprintf(out, "prompt reaching the case: %s\n", X.first);
        else if (!found && P->n_assign)
            fprintf(out, "no prompt tried reaches the case (%ld tried); the weights agree with the "
                   "program on the %ld prompts run\n", reached, X.tried);
        else if (!found)
            fprintf(out, "the weights agree with the program on the %ld prompts run\n", X.tried);
    }
    free(toks), free(idx), free(X.ref), free(X.refnum);
    infer_free(X.inf);
    prove_ref_free(X.R);
}

/* A seed program's failing case (compiler/prove_seed.c): the prompts that
 * reach it, each run by the weights for one token; the first on which the
 * weights and the program give different next tokens is a counterexample.
 * Else the other prompts that hold the input facts (P->any_*): the check
 * that failed first may not be the one these weights get wrong. */
static void seed_counterexample(const TfModel *m, const TfProof *P, FILE *out) {
    TfError err;
    TfInfer *inf = infer_new(m, 1, &err);
    char text[4096], a[64], b[64], first[4400] = "";
    int n_all = P->n_prompts + P->n_any, ran_any = 0;
    for (int k = 0; inf && k < n_all; k++) {
        int any = k >= P->n_prompts, i = k - P->n_prompts;
        const int *seq = any ? P->any_prompt + (size_t)i * TF_PROOF_MAX_PROMPT : P->prompt[k];
        int len = any ? P->any_len[i] : P->prompt_len[k], got = -1;
        if (len + 1 > m->max_len || infer_generate(inf, &seq, &len, 1, 1, &got, &err) < 0) continue;
        ran_any += any;
        int want = any ? P->any_expect[i] : P->prompt_expect[k];
        if (want >= 0 && got != want) {
            prompt_text(m, seq, len, text, sizeof text);
            fprintf(out, "counterexample: prompt '%s': the program gives '%s' next, the weights '%s'\n", text,
                   tok_text(m, want, a), tok_text(m, got, b));
            infer_free(inf);
            return;
        }
        if (!first[0] && !any) {
            prompt_text(m, seq, len, text, sizeof text);
            if (want >= 0)
                snprintf(first, sizeof first, "'%s' (the program and the weights both give '%s' next: the margin is what is not proven)", text, tok_text(m, want, a));
            else
                snprintf(first, sizeof first, "'%s' (the program gives no value there; the weights '%s')", text, tok_text(m, got, b));
        }
    }
    infer_free(inf);
    if (first[0]) fprintf(out, "prompt reaching the case: %s\n", first);
    else if (P->n_prompts) fprintf(out, "no prompt tried reaches the case\n");
    if (ran_any) fprintf(out, "the weights agree with the program on the %d other prompts run\n", ran_any);
}


void prove_search(const TfModel *m, const TfProof *P, FILE *out) {
    if (P->n_prompts || P->n_any) seed_counterexample(m, P, out); // a seed program's failing case
    else counterexample(m, P, out);
}
