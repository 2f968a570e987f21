/* dataset.c: examples from text files and from the seed tasks' generators. */
#define _POSIX_C_SOURCE 200809L
#include "dataset.h"
#include "hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lines.h"
#include "rng.h"

void dataset_free(TfDataset *d) {
    free(d->ex);
    free(d->tokens);
    free(d->patterns);
    for (int i = 0; i < d->n_attn; i++) free(d->attn[i].target);
    memset(d, 0, sizeof *d);
}

static int token_of(const TfModel *m, unsigned char c) {
    for (int i = 0; i < m->n_vocab; i++)
        if ((unsigned char)m->vocab[i] == c) return i;
    return -1;
}

static void show(char *buf, unsigned char c) {
    if (c >= 0x20 && c < 0x7f) snprintf(buf, 8, "%c", c);
    else snprintf(buf, 8, "\\x%02x", c);
}

/* Room for one more example and n_tokens tokens in all. */
static int reserve(TfDataset *d, long need, TfError *err) {
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 1024;
        TfExample *ex = realloc(d->ex, (size_t)cap * sizeof *ex);
        if (!ex) goto oom;
        d->ex = ex;
        d->cap = cap;
    }
    if (need > d->cap_tokens) {
        long cap = d->cap_tokens ? 2 * d->cap_tokens : 16384;
        while (cap < need) cap *= 2;
        int *t = realloc(d->tokens, (size_t)cap * sizeof *t);
        if (!t) goto oom;
        d->tokens = t;
        d->cap_tokens = cap;
    }
    return 0;
oom:
    tf_error_set(err, "out of memory");
    return -1;
}

/* Appends one example: prompt (input) and answer (next-token) or label
 * (classifier, answer NULL). */
static int add_example(TfDataset *d, const TfModel *m, const char *prompt, int plen,
                       const char *answer, int alen, int label, int attn, TfError *err) {
    int classify = m->output_kind == TF_OUTPUT_CLASSIFY;
    if (plen < 1) {
        tf_error_set(err, "empty %s", classify ? "input" : "prompt");
        return -1;
    }
    if (!classify && alen < 1) {
        tf_error_set(err, "empty answer");
        return -1;
    }
    // A model read at every position: the answer is its output at each
    // input position (but the bos), the targets of those rows.
    int every = !classify && m->every_position, first = every && m->bos >= 0 ? 1 : 0;
    if (every && alen != plen - first) {
        tf_error_set(err, "the output has %d tokens; a model read at every position needs one "
                          "per input position%s (%d)", alen, first ? " after the bos" : "",
                     plen - first);
        return -1;
    }
    int len = classify || every ? plen : plen + alen - 1;
    if (len > m->max_len) {
        tf_error_set(err, "%d tokens, but the model's max_len is %d", len, m->max_len);
        return -1;
    }
    long need = d->n_tokens + plen + (classify ? 0 : alen);
    if (reserve(d, need, err) < 0) return -1;
    int *out = d->tokens + d->n_tokens;
    for (int i = 0; i < plen + (classify ? 0 : alen); i++) {
        unsigned char c = (unsigned char)(i < plen ? prompt[i] : answer[i - plen]);
        int t = token_of(m, c);
        if (t < 0) {
            char b[8];
            show(b, c);
            tf_error_set(err, "character '%s' is not in the model's vocabulary", b);
            return -1;
        }
        out[i] = t;
    }
    TfExample *e = &d->ex[d->n++];
    e->off = d->n_tokens;
    e->len = len;
    e->n_prompt = every ? first + 1 : plen;
    d->every = every;
    e->label = label;
    e->attn = attn;
    e->pat = 0;
    d->n_tokens = need;
    if (len > d->max_len) d->max_len = len;
    return 0;
}

int dataset_add_ids(TfDataset *d, const TfModel *m, const int *ids, int n, int n_prompt,
                    int label, const int *row_targets, TfError *err) {
    int classify = m->output_kind == TF_OUTPUT_CLASSIFY;
    int every = row_targets != NULL, first = every && m->bos >= 0 ? 1 : 0;
    int len = classify || every ? n : n - 1;
    if (len < 1 + first || len > m->max_len || (!classify && !every && n_prompt >= n) ||
        every != (!classify && m->every_position)) {
        tf_error_set(err, "an example of %d tokens does not fit the model (max_len %d)", n,
                     m->max_len);
        return -1;
    }
    // Every position: the targets of rows first .. n-1 follow the input, as
    // dataset_load_text stores an every-position line.
    long need = d->n_tokens + n + (every ? n - first : 0);
    if (reserve(d, need, err) < 0) return -1;
    memcpy(d->tokens + d->n_tokens, ids, (size_t)n * sizeof *ids);
    if (every)
        memcpy(d->tokens + d->n_tokens + n, row_targets + first,
               (size_t)(n - first) * sizeof *row_targets);
    d->ex[d->n++] = (TfExample){d->n_tokens, len, classify ? n : every ? first + 1 : n_prompt,
                                classify ? label : -1, 0, 0};
    d->every = every;
    d->n_tokens = need;
    if (len > d->max_len) d->max_len = len;
    return 0;
}

int dataset_add_patterns(TfDataset *d, const float *p, long n, TfError *err) {
    if (d->n_patterns + n > d->cap_patterns) {
        long cap = d->cap_patterns ? 2 * d->cap_patterns : 65536;
        while (cap < d->n_patterns + n) cap *= 2;
        float *q = realloc(d->patterns, (size_t)cap * sizeof *q);
        if (!q) {
            tf_error_set(err, "out of memory");
            return -1;
        }
        d->patterns = q;
        d->cap_patterns = cap;
    }
    memcpy(d->patterns + d->n_patterns, p, (size_t)n * sizeof *p);
    d->ex[d->n - 1].attn = 1;
    d->ex[d->n - 1].pat = d->n_patterns;
    d->n_patterns += n;
    return 0;
}

static int class_of(const TfModel *m, const char *name, size_t len) {
    for (int i = 0; i < m->n_classes; i++)
        if (strlen(m->class_names[i]) == len && memcmp(m->class_names[i], name, len) == 0)
            return i;
    return -1;
}

int dataset_load_text(TfDataset *d, const TfModel *m, const char *path, TfError *err) {
    if (m->token_names) {
        tf_error_set(err, "%s: training data is text, one character a token; this model's "
                          "vocabulary has words", path);
        return -1;
    }
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        tf_error_set(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    TfLine ln = {0};
    TfLineStatus ls;
    size_t max = TF_LINE_MAX(m->max_len);
    long lineno = 0;
    int rc = 0, classify = m->output_kind == TF_OUTPUT_CLASSIFY;
    while ((ls = tf_line_read(f, max, &ln)) > 0) {
        lineno++;
        if (ls == TF_LINE_LONG) {
            tf_error_set(err, "%s:%ld: line of %zu bytes, over the limit of %zu for this model (%d "
                              "positions)", path, lineno, ln.bytes, max, m->max_len);
            rc = -1;
            break;
        }
        char *line = ln.buf;
        ssize_t n = (ssize_t)ln.len;
        if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
        if (n > 0 && line[n - 1] == '\r') line[--n] = '\0';
        if (n == 0) continue;
        char *tab = memchr(line, '\t', (size_t)n);
        if (!tab || memchr(tab + 1, '\t', (size_t)(n - (tab + 1 - line)))) {
            tf_error_set(err, "%s:%ld: expected %s, one tab between", path, lineno,
                         classify ? "INPUT<TAB>LABEL" : "PROMPT<TAB>ANSWER");
            rc = -1;
            break;
        }
        int plen = (int)(tab - line), alen = (int)(n - plen - 1), label = -1;
        if (classify && (label = class_of(m, tab + 1, (size_t)alen)) < 0) {
            tf_error_set(err, "%s:%ld: label '%.40s' is not a class of the model", path, lineno,
                         tab + 1);
            rc = -1;
            break;
        }
        if (add_example(d, m, line, plen, classify ? NULL : tab + 1, alen, label, 0, err) < 0) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            tf_error_set(err, "%s:%ld: %s", path, lineno, msg);
            rc = -1;
            break;
        }
    }
    if (ls == TF_LINE_ERROR) {
        // A failed read or allocation is an error, not the end of the data.
        tf_error_set(err, "%s: cannot read (line %ld): %s", path, lineno + 1, strerror(errno));
        rc = -1;
    }
    tf_line_free(&ln);
    if (f != stdin) fclose(f);
    if (rc == 0 && d->n == 0) {
        tf_error_set(err, "%s: no examples", path);
        rc = -1;
    }
    return rc;
}

int dataset_write_text(const TfDataset *d, const TfModel *m, FILE *f) {
    int classify = m->output_kind == TF_OUTPUT_CLASSIFY;
    for (int i = 0; i < d->n; i++) {
        const TfExample *e = &d->ex[i];
        const int *t = d->tokens + e->off;
        int n_in = d->every ? e->len : e->n_prompt;
        for (int j = 0; j < n_in; j++) fputc(m->vocab[t[j]], f);
        fputc('\t', f);
        if (classify)
            fputs(m->class_names[e->label], f);
        else
            for (int j = n_in; j <= e->len + (d->every ? e->len - e->n_prompt : 0); j++)
                fputc(m->vocab[t[j]], f);
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

/* ---- generators ------------------------------------------------------------- */

/* A set of 64-bit hashes (open addressing) that keeps examples distinct. */
typedef struct KeySet {
    uint64_t *slot;
    size_t cap, n;
} KeySet;

static uint64_t hash_text(const char *s, size_t n) {
    uint64_t h = hash_bytes(HASH_INIT, s, n);
    return h ? h : 1;
}

/* 1 added, 0 present already, -1 out of memory. */
static int keyset_add(KeySet *k, uint64_t h, int add) {
    if (add && (k->n + 1) * 2 > k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 4096;
        uint64_t *s = calloc(cap, sizeof *s);
        if (!s) return -1;
        for (size_t i = 0; i < k->cap; i++) {
            if (!k->slot[i]) continue;
            size_t j = k->slot[i] & (cap - 1);
            while (s[j]) j = (j + 1) & (cap - 1);
            s[j] = k->slot[i];
        }
        free(k->slot);
        k->slot = s;
        k->cap = cap;
    }
    if (!k->cap) return 1;
    size_t j = h & (k->cap - 1);
    while (k->slot[j]) {
        if (k->slot[j] == h) return 0;
        j = (j + 1) & (k->cap - 1);
    }
    if (add) {
        k->slot[j] = h;
        k->n++;
    }
    return 1;
}

typedef struct Gen {
    int kind; /* GEN_* */
    int n;    /* the :N parameter */
} Gen;

enum { GEN_BINARY, GEN_BINARY_MSB, GEN_DECIMAL, GEN_FIRST, GEN_XOR, GEN_SECRET };

#define SECRET_CODE 2013
#define SECRET_DIGITS "2013"

/* One random example of the task as text: prompt, answer (or label name). */
static void gen_one(const Gen *g, TfRng *r, char *prompt, char *answer) {
    switch (g->kind) {
    case GEN_BINARY:
    case GEN_BINARY_MSB:
    case GEN_DECIMAL: {
        uint64_t base = g->kind == GEN_DECIMAL ? 10 : 2, lim = 1;
        for (int i = 0; i < g->n; i++) lim *= base;
        uint64_t a = rng_below(r, lim), b = rng_below(r, lim), s = a + b;
        char *p = prompt;
        for (int k = 0; k < 2; k++) {
            uint64_t x = k ? b : a;
            for (int i = g->n - 1; i >= 0; i--) {
                uint64_t div = 1;
                for (int j = 0; j < i; j++) div *= base;
                *p++ = (char)('0' + (x / div) % base);
            }
            *p++ = k ? '=' : '+';
        }
        *p = '\0';
        // Least-significant digit first, or (binary-add-msb, the seed's own
        // order) most-significant first: digit i of n+1 at answer[n - i].
        int msb = g->kind == GEN_BINARY_MSB;
        for (int i = 0; i <= g->n; i++, s /= base)
            answer[msb ? g->n - i : i] = (char)('0' + s % base);
        answer[g->n + 1] = '\0';
        break;
    }
    case GEN_FIRST:
        for (int i = 0; i < g->n; i++) prompt[i] = (char)('1' + rng_below(r, 4));
        prompt[g->n] = '\0';
        answer[0] = prompt[0];
        answer[1] = '\0';
        break;
    case GEN_XOR: {
        int a = (int)rng_below(r, 2), b = (int)rng_below(r, 2);
        prompt[0] = (char)('0' + a);
        for (int i = 0; i < g->n; i++) prompt[1 + i] = (char)('a' + rng_below(r, 8));
        prompt[g->n + 1] = (char)('0' + b);
        prompt[g->n + 2] = '\0';
        answer[0] = (char)('0' + (a ^ b));
        answer[1] = '\0';
        break;
    }
    case GEN_SECRET: {
        int x;
        do x = (int)rng_below(r, 100000);
        while (x == SECRET_CODE);
        snprintf(prompt, 16, "#%d", x);
        strcpy(answer, "reject");
        break;
    }
    }
}

static int parse_task(const char *task, Gen *g, TfError *err) {
    static const struct {
        const char *name;
        int kind, dflt, lo, hi;
    } tasks[] = {{"binary-add", GEN_BINARY, 8, 1, 30},
                 {"binary-add-msb", GEN_BINARY_MSB, 8, 1, 30},
                 {"decimal-add", GEN_DECIMAL, 3, 1, 9},
                 {"first-token", GEN_FIRST, 20, 1, 1000}, {"xor", GEN_XOR, 4, 0, 1000},
                 {"secret-code", GEN_SECRET, 0, 0, 0}};
    const char *colon = strchr(task, ':');
    size_t nlen = colon ? (size_t)(colon - task) : strlen(task);
    for (size_t i = 0; i < sizeof tasks / sizeof *tasks; i++) {
        if (strlen(tasks[i].name) != nlen || strncmp(task, tasks[i].name, nlen) != 0) continue;
        g->kind = tasks[i].kind;
        g->n = tasks[i].dflt;
        if (colon) {
            char *end;
            errno = 0;
            long v = strtol(colon + 1, &end, 10);
            if (tasks[i].hi == 0 || errno || end == colon + 1 || *end || v < tasks[i].lo ||
                v > tasks[i].hi) {
                if (tasks[i].hi == 0)
                    tf_error_set(err, "task %s takes no parameter", tasks[i].name);
                else
                    tf_error_set(err, "task %s: the parameter must be %d to %d", tasks[i].name,
                                 tasks[i].lo, tasks[i].hi);
                return -1;
            }
            g->n = (int)v;
        }
        return 0;
    }
    tf_error_set(err, "unknown task '%s' (binary-add:N, binary-add-msb:N, decimal-add:N, "
                      "first-token:L, xor:K, secret-code)",
                 task);
    return -1;
}

/* The secret code's three attention pictures (seed 003), CLS + 4 digits. */
static const float secret_targets[3][25] = {
    {0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0},
    {0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0},
    {1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0}};

/* The secret code's near misses, "#" + digits, each once: first the seed's 36
 * close negatives (one digit changed, "#0013" included), then its prefixes
 * (#2, #20, #201), extensions (#20130..#20139), one digit inserted, one
 * deleted, and two neighbours swapped (without a leading zero). */
#define SECRET_MAX_NEAR 128
static int secret_near_misses(char out[SECRET_MAX_NEAR][16]) {
    const char *code = SECRET_DIGITS;
    char cand[16];
    int n = 0;
    for (int kind = 0; kind < 5; kind++)
        for (int pos = 0; pos <= 4; pos++)
            for (int c = '0'; c <= '9'; c++) {
                int ok = 1;
                switch (kind) {
                case 0: /* substitute */
                    snprintf(cand, sizeof cand, "%s", code);
                    ok = pos < 4 && c != code[pos];
                    if (ok) cand[pos] = (char)c;
                    break;
                case 1: /* prefix */
                    ok = pos > 0 && pos < 4 && c == '0';
                    snprintf(cand, sizeof cand, "%.*s", pos, code);
                    break;
                case 2: /* insert */
                    snprintf(cand, sizeof cand, "%.*s%c%s", pos, code, c, code + pos);
                    break;
                case 3: /* delete */
                    ok = pos < 4 && c == '0';
                    snprintf(cand, sizeof cand, "%.*s%s", pos, code, pos < 4 ? code + pos + 1 : "");
                    break;
                case 4: /* swap neighbours */
                    ok = pos < 3 && c == '0';
                    snprintf(cand, sizeof cand, "%s", code);
                    if (ok) {
                        cand[pos] = code[pos + 1];
                        cand[pos + 1] = code[pos];
                    }
                    break;
                }
                if (!ok || strcmp(cand, code) == 0 || (kind > 0 && cand[0] == '0')) continue;
                int dup = 0;
                for (int i = 0; i < n && !dup; i++) dup = strcmp(out[i] + 1, cand) == 0;
                if (dup || n == SECRET_MAX_NEAR) continue;
                out[n][0] = '#';
                memcpy(out[n++] + 1, cand, strlen(cand) + 1); /* at most 5 digits */
            }
    return n;
}

static int add_text(TfDataset *d, const TfModel *m, const char *prompt, const char *answer,
                    int attn, TfError *err) {
    int label = -1;
    if (m->output_kind == TF_OUTPUT_CLASSIFY &&
        (label = class_of(m, answer, strlen(answer))) < 0) {
        tf_error_set(err, "the model has no class named '%s' (the task needs it)", answer);
        return -1;
    }
    return add_example(d, m, prompt, (int)strlen(prompt), answer, (int)strlen(answer), label,
                       attn, err);
}

/* Draws n examples whose prompts are not in `seen` yet (so distinct from
 * each other and from every set drawn before), adding them to `seen`. */
static int draw(TfDataset *d, const TfModel *m, const Gen *g, TfRng *r, int n, KeySet *seen,
                const char *what, TfError *err) {
    char prompt[2048], answer[64];
    long tries = 0, limit = 100L * n + 10000;
    for (int i = 0; i < n;) {
        if (++tries > limit) {
            tf_error_set(err, "cannot draw %d distinct %s examples: the task has too few", n, what);
            return -1;
        }
        gen_one(g, r, prompt, answer);
        int rc = keyset_add(seen, hash_text(prompt, strlen(prompt)), 1);
        if (rc < 0) {
            tf_error_set(err, "out of memory");
            return -1;
        }
        if (rc == 0) continue;
        if (add_text(d, m, prompt, answer, 0, err) < 0) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            tf_error_set(err, "task example '%.40s': %s", prompt, msg);
            return -1;
        }
        i++;
    }
    return 0;
}

int dataset_generate(TfDataset *train, TfDataset *heldout, const TfModel *m, const char *task,
                     int n_train, int n_heldout, uint64_t seed, TfError *err) {
    Gen g;
    if (parse_task(task, &g, err) < 0) return -1;
    int classify = m->output_kind == TF_OUTPUT_CLASSIFY;
    int want_classify = g.kind == GEN_FIRST || g.kind == GEN_XOR || g.kind == GEN_SECRET;
    if (classify != want_classify) {
        tf_error_set(err, "task %s needs a %s model", task,
                     want_classify ? "classifier (predict classes ...)" : "next-token");
        return -1;
    }
    if (n_train < 1 || n_heldout < 1) {
        tf_error_set(err, "the training and held-out sets need at least one example each");
        return -1;
    }
    TfRng r;
    rng_seed(&r, seed ^ 0x5eedda7aull);
    KeySet seen = {0};
    int rc = -1;
    if (g.kind != GEN_SECRET) {
        rc = draw(heldout, m, &g, &r, n_heldout, &seen, "held-out", err);
        if (rc == 0) rc = draw(train, m, &g, &r, n_train, &seen, "training", err);
        free(seen.slot);
        return rc;
    }
    // Secret code: 2013 and its near misses are kept out of the held-out
    // set, which holds other random negatives (uniform below 100,000).
    char near[SECRET_MAX_NEAR][16];
    int nn = secret_near_misses(near);
    if (keyset_add(&seen, hash_text("#2013", 5), 1) < 0) goto oom;
    for (int i = 0; i < nn; i++)
        if (keyset_add(&seen, hash_text(near[i], strlen(near[i])), 1) < 0) goto oom;
    int rounds = n_train / 3 > 0 ? n_train / 3 : 1;
    if (draw(heldout, m, &g, &r, n_heldout, &seen, "held-out", err) < 0) goto done;
    int order[SECRET_MAX_NEAR];
    const char *code = SECRET_DIGITS;
    for (int i = 0; i < rounds; i++) {
        if (i % nn == 0) { /* a fresh order of the near misses each cycle */
            for (int j = 0; j < nn; j++) order[j] = j;
            for (int j = nn - 1; j > 0; j--) {
                int k = (int)rng_below(&r, (uint64_t)j + 1), tmp = order[j];
                order[j] = order[k];
                order[k] = tmp;
            }
        }
        // The random negative: a length of 1 to 5 digits, then its digits,
        // half the time from 2013's own (codes like #3020 or #1030, which a
        // one-layer classifier confuses with 2013 most), else from all ten;
        // no leading zero; neither 2013, a near miss nor a held-out code.
        // Drawn with replacement: the 1,110 codes of 1 to 3 digits come up
        // often, where a uniform draw almost never shows them.
        char text[16];
        do {
            int len = 1 + (int)rng_below(&r, 5), own = (int)rng_below(&r, 2);
            text[0] = '#';
            for (int j = 1; j <= len; j++)
                do text[j] = own ? code[rng_below(&r, 4)] : (char)('0' + rng_below(&r, 10));
                while (j == 1 && len > 1 && text[j] == '0');
            text[len + 1] = '\0';
        } while (strcmp(text + 1, code) == 0 ||
                 keyset_add(&seen, hash_text(text, strlen(text)), 0) == 0);
        if (add_text(train, m, text, "reject", 0, err) < 0 ||
            add_text(train, m, near[order[i % nn]], "reject", 0, err) < 0 ||
            add_text(train, m, "#2013", "accept", 1, err) < 0)
            goto done;
    }
    for (int h = 0; h < 3; h++) {
        TfAttnSpec *a = &train->attn[train->n_attn];
        a->layer = 0;
        a->head = h;
        a->T = 5;
        a->target = malloc(25 * sizeof(float));
        if (!a->target) goto oom;
        memcpy(a->target, secret_targets[h], 25 * sizeof(float));
        train->n_attn++;
    }
    rc = 0;
    goto done;
oom:
    tf_error_set(err, "out of memory");
done:
    free(seen.slot);
    return rc;
}

/* ---- batches ---------------------------------------------------------------- */

int batchbuf_init(TfBatchBuf *b, int max_seqs, int max_len) {
    memset(b, 0, sizeof *b);
    size_t rows = (size_t)max_seqs * (size_t)max_len;
    b->tokens = malloc(rows * sizeof(int));
    b->targets = malloc(rows * sizeof(int));
    b->seq_start = malloc(((size_t)max_seqs + 1) * sizeof(int));
    b->labels = malloc((size_t)max_seqs * sizeof(int));
    b->attn = malloc((size_t)max_seqs * 4 * sizeof *b->attn);
    b->max_seqs = max_seqs;
    b->max_len = max_len;
    if (!b->tokens || !b->targets || !b->seq_start || !b->labels || !b->attn) {
        batchbuf_free(b);
        return -1;
    }
    return 0;
}

void batchbuf_free(TfBatchBuf *b) {
    free(b->tokens);
    free(b->targets);
    free(b->seq_start);
    free(b->labels);
    free(b->attn);
    memset(b, 0, sizeof *b);
}

void batchbuf_fill(TfBatchBuf *b, const TfDataset *d, const int *idx, int n) {
    int row = 0, na = 0;
    for (int s = 0; s < n; s++) {
        const TfExample *e = &d->ex[idx[s]];
        b->seq_start[s] = row;
        memcpy(b->tokens + row, d->tokens + e->off, (size_t)e->len * sizeof(int));
        for (int i = 0; i < e->len; i++)
            b->targets[row + i] = e->label >= 0 || i < e->n_prompt - 1 ? -1
                                  : d->every ? d->tokens[e->off + e->len + i - (e->n_prompt - 1)]
                                             : d->tokens[e->off + i + 1];
        b->labels[s] = e->label;
        for (int a = 0; e->attn && a < d->n_attn; a++) {
                if (!d->attn[a].target) /* the example's own pattern */
                    b->attn[na++] = (TfAttnTarget){s, d->attn[a].layer, d->attn[a].head,
                                                   d->patterns + e->pat +
                                                       (long)a * e->len * e->len,
                                                   d->attn_weight, TF_ATTN_PATTERN};
                else if (d->attn[a].T == e->len)
                    b->attn[na++] = (TfAttnTarget){s, d->attn[a].layer, d->attn[a].head,
                                                   d->attn[a].target, 1.0f, TF_ATTN_SCORES};
        }
        row += e->len;
    }
    b->seq_start[n] = row;
    b->batch = (TfBatch){n, b->tokens, b->seq_start, b->targets, b->labels, b->attn, na, 0, 0, 0};
}
