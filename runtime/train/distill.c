/* distill.c: a teacher model labels a student's data (distill.h). */
#define _POSIX_C_SOURCE 200809L
#include "distill.h"
#include "hash.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "infer.h"
#include "rng.h"

#define LABEL_BATCH 256

/* ---- models ------------------------------------------------------------------ */

static int token_of(const TfModel *m, char c) {
    for (int i = 0; i < m->n_vocab; i++)
        if (m->vocab[i] == c) return i;
    return -1;
}

/* The model layer index of the `layer`-th attention layer, or -1. */
static int attention_layer(const TfModel *m, int layer) {
    for (int l = 0, k = 0; l < m->n_layers; l++)
        if (m->layers[l].kind == TF_LAYER_ATTENTION && k++ == layer) return l;
    return -1;
}

static int n_attention_layers(const TfModel *m) {
    int n = 0;
    for (int l = 0; l < m->n_layers; l++) n += m->layers[l].kind == TF_LAYER_ATTENTION;
    return n;
}

static const char *output_kind(const TfModel *m) {
    return m->output_kind == TF_OUTPUT_CLASSIFY ? "a classifier"
           : m->every_position                  ? "read at every position"
                                                : "a generating (next-token) model";
}

/* A layer or head index at *p: decimal digits only (no sign, no space), at
 * most 9 of them; advances *p. 0, or -1. */
static int parse_index(const char **p, int *out) {
    long v = 0;
    int n = 0;
    for (; **p >= '0' && **p <= '9'; (*p)++, n++) {
        if (n == 9) return -1;
        v = v * 10 + (**p - '0');
    }
    *out = (int)v;
    return n > 0 ? 0 : -1;
}

int distill_parse_heads(const char *spec, TfDistillOptions *o, TfError *err) {
    o->n_heads = 0;
    const char *p = spec;
    for (;;) {
        int v[4];
        // S_LAYER.S_HEAD=T_LAYER.T_HEAD, strictly: what sscanf's %d took
        // (signs, spaces, wrapping) names heads the user did not write.
        if (parse_index(&p, &v[0]) < 0 || *p++ != '.' || parse_index(&p, &v[1]) < 0 ||
            *p++ != '=' || parse_index(&p, &v[2]) < 0 || *p++ != '.' ||
            parse_index(&p, &v[3]) < 0 || (*p != ',' && *p != '\0')) {
            tf_error_set(err, "bad head pairs '%.200s' (expected S_LAYER.S_HEAD=T_LAYER.T_HEAD,..., "
                              "e.g. 0.0=0.0: student head = teacher head, attention layers "
                              "counted from 0)", spec);
            return -1;
        }
        if (o->n_heads == TF_DISTILL_MAX_HEADS) {
            tf_error_set(err, "at most %d matched heads", TF_DISTILL_MAX_HEADS);
            return -1;
        }
        o->heads[o->n_heads++] = (TfDistillHead){v[0], v[1], v[2], v[3]};
        if (*p == '\0') return 0;
        p++;
    }
}

static int check_head(const TfModel *m, const char *who, int layer, int head, TfError *err) {
    int l = attention_layer(m, layer);
    if (l < 0) {
        tf_error_set(err, "the %s has no attention layer %d (it has %d, counted from 0)", who,
                     layer, n_attention_layers(m));
        return -1;
    }
    if (head >= m->layers[l].n_heads) {
        tf_error_set(err, "the %s's attention layer %d has no head %d (it has %d)", who, layer,
                     head, m->layers[l].n_heads);
        return -1;
    }
    return 0;
}

int distill_check(const TfModel *t, const TfModel *s, const TfDistillOptions *o, TfError *err) {
    char a[TF_TOKEN_TEXT_MAX], b[TF_TOKEN_TEXT_MAX];
    if (t->token_names || s->token_names) {
        tf_error_set(err, "distillation needs vocabularies of characters; the %s has words",
                     t->token_names ? "teacher" : "student");
        return -1;
    }
    if (t->output_kind == TF_OUTPUT_CLASSIFY) {
        if (s->output_kind != TF_OUTPUT_CLASSIFY) {
            tf_error_set(err, "the teacher is a classifier, the student %s (declare `predict "
                              "classes` with the teacher's classes)", output_kind(s));
            return -1;
        }
        for (int i = 0; i < t->n_classes; i++) {
            int found = 0;
            for (int j = 0; j < s->n_classes; j++)
                found |= strcmp(t->class_names[i], s->class_names[j]) == 0;
            if (!found) {
                tf_error_set(err, "the teacher's class \"%s\" is not one of the student's",
                             t->class_names[i]);
                return -1;
            }
        }
    } else if (model_numeric_output(t)) {
        tf_error_set(err, "the teacher prints a number at every position; a student learns "
                          "tokens");
        return -1;
    } else if (s->output_kind == TF_OUTPUT_CLASSIFY || s->every_position != t->every_position) {
        tf_error_set(err, "the teacher is %s, the student %s (declare `predict %s`)",
                     output_kind(t), output_kind(s),
                     t->every_position ? "every_position" : "next_token");
        return -1;
    }
    for (int v = 0; v < t->n_vocab; v++)
        if (token_of(s, t->vocab[v]) < 0) {
            model_token_text(t, v, a);
            tf_error_set(err, "incompatible vocabularies: the teacher's token '%s' is not in the "
                              "student's (%d tokens)", a, s->n_vocab);
            return -1;
        }
    if (t->every_position && (s->bos < 0) != (t->bos < 0)) {
        tf_error_set(err, "the teacher %s a BOS token, the student %s (declare the same `bos`)",
                     t->bos >= 0 ? "has" : "has no", s->bos >= 0 ? "has" : "has none");
        return -1;
    }
    if (t->every_position && t->bos >= 0 && s->vocab[s->bos] != t->vocab[t->bos]) {
        model_token_text(t, t->bos, a);
        model_token_text(s, s->bos, b);
        tf_error_set(err, "the teacher's BOS is '%s', the student's '%s'", a, b);
        return -1;
    }
    for (int k = 0; k < o->n_heads; k++)
        if (check_head(s, "student", o->heads[k].s_layer, o->heads[k].s_head, err) < 0 ||
            check_head(t, "teacher", o->heads[k].t_layer, o->heads[k].t_head, err) < 0)
            return -1;
    return 0;
}

/* ---- inputs ------------------------------------------------------------------ */

/* Where inputs come from: random strings, or a file's lines in an order
 * drawn from the seed. Inputs are teacher token ids, with the BOS. */
typedef struct Source {
    TfRng rng;
    int max_len;       /* of an input, BOS included */
    int chars[256], n_chars;
    int bos;
    /* a file: */
    int *ids;    /* every line's tokens */
    long *start; /* n_lines + 1 offsets */
    int *order, n_lines, next;
} Source;

static void source_free(Source *src) {
    free(src->ids);
    free(src->start);
    free(src->order);
}

/* Room left for the input: the teacher's and the student's max_len, and for
 * a generating teacher the tokens it generates. */
static int input_room(const TfModel *t, const TfModel *s) {
    int room = t->max_len < s->max_len ? t->max_len : s->max_len;
    if (t->output_kind == TF_OUTPUT_NEXT_TOKEN && !t->every_position) room -= t->generate;
    return room;
}

static int source_random(Source *src, const TfModel *t, const TfModel *s, const char *spec,
                         TfError *err) {
    const char *p = spec ? spec + 7 : NULL; /* after "random:" */
    int room = input_room(t, s);
    long len = room - (t->bos >= 0);
    if (p) {
        char *end;
        errno = 0;
        len = strtol(p, &end, 10);
        if (end == p || errno || len < 1 || (*end != '\0' && *end != ':')) {
            tf_error_set(err, "bad inputs '%s' (expected random:LEN, random:LEN:CHARS or a file)",
                         spec);
            return -1;
        }
        p = *end == ':' ? end + 1 : NULL;
        if (len + (t->bos >= 0) > room) {
            tf_error_set(err, "inputs of %ld tokens%s do not fit: at most %d", len,
                         t->bos >= 0 ? " after the BOS" : "", room - (t->bos >= 0));
            return -1;
        }
    }
    if (len < 1) {
        tf_error_set(err, "the models leave no room for an input (max_len %d and %d)", t->max_len,
                     s->max_len);
        return -1;
    }
    src->max_len = (int)len + (t->bos >= 0);
    src->bos = t->bos;
    for (int v = 0; v < t->n_vocab; v++) {
        if (p) {
            if (!strchr(p, t->vocab[v])) continue;
        } else if (v == t->bos || v == t->stop_token) {
            continue;
        }
        int dup = 0;
        for (int i = 0; i < src->n_chars; i++) dup |= t->vocab[src->chars[i]] == t->vocab[v];
        if (!dup) src->chars[src->n_chars++] = v;
    }
    for (; p && *p; p++)
        if (token_of(t, *p) < 0) {
            tf_error_set(err, "'%c' of random:...:%s is not in the teacher's vocabulary", *p,
                         strrchr(spec, ':') + 1);
            return -1;
        }
    if (src->n_chars == 0) {
        tf_error_set(err, "no characters to draw inputs from");
        return -1;
    }
    return 0;
}

static int source_file(Source *src, const TfModel *t, const TfModel *s, const char *path,
                       TfError *err) {
    size_t n = 0;
    char *text = tf_file_read(path, &n);
    if (!text) {
        tf_error_set(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    int room = input_room(t, s), rc = -1, line = 0;
    long cap = 16;
    src->ids = malloc(n * sizeof *src->ids + 1);
    src->start = malloc((size_t)cap * sizeof *src->start);
    if (!src->ids || !src->start) goto oom;
    src->start[0] = 0;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && text[e] != '\n') e++;
        size_t len = e > i && text[e - 1] == '\r' ? e - 1 - i : e - i;
        line++;
        if (len > 0) {
            if ((int)len > room) {
                tf_error_set(err, "%s:%d: %zu tokens, but the models leave room for %d", path,
                             line, len, room);
                goto done;
            }
            long at = src->start[src->n_lines];
            for (size_t k = 0; k < len; k++) {
                int id = token_of(t, text[i + k]);
                if (id < 0) {
                    char c[8];
                    unsigned char u = (unsigned char)text[i + k];
                    snprintf(c, sizeof c, u >= 0x20 && u < 0x7f ? "%c" : "\\x%02x", u);
                    tf_error_set(err, "%s:%d: character '%s' is not in the teacher's vocabulary",
                                 path, line, c);
                    goto done;
                }
                src->ids[at + (long)k] = id;
            }
            if (t->bos >= 0 && src->ids[at] != t->bos) {
                char b[TF_TOKEN_TEXT_MAX];
                model_token_text(t, t->bos, b);
                tf_error_set(err, "%s:%d: the input does not start with the BOS '%s'", path, line,
                             b);
                goto done;
            }
            if (src->n_lines + 2 > cap) {
                long *st = realloc(src->start, (size_t)(cap *= 2) * sizeof *st);
                if (!st) goto oom;
                src->start = st;
            }
            src->start[++src->n_lines] = at + (long)len;
            if ((int)len > src->max_len) src->max_len = (int)len;
        }
        i = e + 1;
    }
    if (src->n_lines == 0) {
        tf_error_set(err, "%s: no inputs", path);
        goto done;
    }
    if (!(src->order = malloc((size_t)src->n_lines * sizeof *src->order))) goto oom;
    for (int i = 0; i < src->n_lines; i++) src->order[i] = i;
    for (int i = src->n_lines - 1; i > 0; i--) {
        int x = (int)rng_below(&src->rng, (uint64_t)i + 1), tmp = src->order[i];
        src->order[i] = src->order[x];
        src->order[x] = tmp;
    }
    rc = 0;
    goto done;
oom:
    tf_error_set(err, "out of memory");
done:
    free(text);
    return rc;
}

/* The next input into buf (room for max_len); its length, or 0 at the end. */
static int source_next(Source *src, int *buf) {
    if (src->order) {
        if (src->next == src->n_lines) return 0;
        int l = src->order[src->next++];
        int len = (int)(src->start[l + 1] - src->start[l]);
        memcpy(buf, src->ids + src->start[l], (size_t)len * sizeof *buf);
        return len;
    }
    int n = 0;
    if (src->bos >= 0) buf[n++] = src->bos;
    int len = 1 + (int)rng_below(&src->rng, (uint64_t)(src->max_len - n));
    for (int i = 0; i < len; i++)
        buf[n++] = src->chars[rng_below(&src->rng, (uint64_t)src->n_chars)];
    return n;
}

/* ---- the held-out inputs, as a set ----------------------------------------------- */

typedef struct Seen {
    int *keys;       /* the inputs, back to back */
    long n_keys, cap_keys;
    long *off;       /* n + 1 offsets */
    int n, cap;
    int *slot;       /* input index + 1, 0 empty; n_slots a power of two */
    int n_slots;
} Seen;

static void seen_free(Seen *h) {
    free(h->keys);
    free(h->off);
    free(h->slot);
}

static uint64_t hash_ids(const int *ids, int n) {
    uint64_t h = HASH_INIT;
    for (int i = 0; i < n; i++) h = hash_word(h, (uint64_t)(ids[i] + 1));
    return h ^ (h >> 29);
}

/* The slot of ids: where it is, or the empty slot where it would go. */
static int seen_slot(const Seen *h, const int *ids, int len) {
    int mask = h->n_slots - 1, sl = (int)(hash_ids(ids, len) & (uint64_t)mask);
    for (; h->slot[sl]; sl = (sl + 1) & mask) {
        int e = h->slot[sl] - 1;
        if (h->off[e + 1] - h->off[e] == len &&
            memcmp(h->keys + h->off[e], ids, (size_t)len * sizeof *ids) == 0)
            break;
    }
    return sl;
}

static int seen_has(const Seen *h, const int *ids, int len) {
    return h->n_slots && h->slot[seen_slot(h, ids, len)] != 0;
}

static int seen_add(Seen *h, const int *ids, int len) {
    if (2 * (h->n + 1) > h->n_slots) { /* grow and rehash */
        int n_slots = h->n_slots ? 2 * h->n_slots : 1024;
        free(h->slot);
        if (!(h->slot = calloc((size_t)n_slots, sizeof *h->slot))) return -1;
        h->n_slots = n_slots;
        for (int e = 0; e < h->n; e++)
            h->slot[seen_slot(h, h->keys + h->off[e], (int)(h->off[e + 1] - h->off[e]))] = e + 1;
    }
    if (h->n + 2 > h->cap) {
        int cap = h->cap ? 2 * h->cap : 1024;
        long *off = realloc(h->off, (size_t)cap * sizeof *off);
        if (!off) return -1;
        h->off = off;
        h->cap = cap;
        if (h->n == 0) h->off[0] = 0;
    }
    if (h->n_keys + len > h->cap_keys) {
        long cap = h->cap_keys ? 2 * h->cap_keys : 16384;
        while (cap < h->n_keys + len) cap *= 2;
        int *k = realloc(h->keys, (size_t)cap * sizeof *k);
        if (!k) return -1;
        h->keys = k;
        h->cap_keys = cap;
    }
    memcpy(h->keys + h->n_keys, ids, (size_t)len * sizeof *ids);
    h->n_keys += len;
    h->off[h->n + 1] = h->n_keys;
    h->slot[seen_slot(h, ids, len)] = ++h->n;
    return 0;
}

/* ---- labelling --------------------------------------------------------------- */

typedef struct Labeller {
    const TfModel *t, *s;
    const TfDistillOptions *o;
    TfInfer *inf;
    int t2s[256];
    int head_layer[TF_DISTILL_MAX_HEADS]; /* the teacher's model layer of each matched head */
    int L;                                /* the longest sequence */
    int B;                                /* inputs labelled at once, up to LABEL_BATCH */
    float *pat;                           /* [B][n_heads][L][L] when heads are matched */
    int *seq, *lens, **outs, *gen, *n_gen, *ids, *rt;
    float *probs, *one;
    const int **ptrs;
} Labeller;

static void on_attention(void *user, int layer, int head, int seq, int pos,
                         const float *scores, const float *att, int T) {
    (void)scores;
    Labeller *lb = user;
    const int L = lb->L, H = lb->o->n_heads;
    for (int k = 0; k < H; k++)
        if (lb->head_layer[k] == layer && lb->o->heads[k].t_head == head && pos < L && T <= L)
            memcpy(lb->pat + (((long)seq * H + k) * L + pos) * L, att, (size_t)T * sizeof *att);
}

static void labeller_free(Labeller *lb) {
    infer_free(lb->inf);
    free(lb->pat);
    free(lb->seq);
    free(lb->lens);
    if (lb->outs) free(lb->outs[0]);
    free(lb->outs);
    free(lb->gen);
    free(lb->n_gen);
    free(lb->ids);
    free(lb->rt);
    free(lb->probs);
    free(lb->one);
    free(lb->ptrs);
}

static int labeller_init(Labeller *lb, const TfModel *t, const TfModel *s,
                         const TfDistillOptions *o, int max_input, TfError *err) {
    memset(lb, 0, sizeof *lb);
    lb->t = t;
    lb->s = s;
    lb->o = o;
    for (int v = 0; v < t->n_vocab; v++) lb->t2s[v] = token_of(s, t->vocab[v]);
    for (int k = 0; k < o->n_heads; k++) lb->head_layer[k] = attention_layer(t, o->heads[k].t_layer);
    int gen = t->output_kind == TF_OUTPUT_NEXT_TOKEN && !t->every_position ? t->generate : 0;
    lb->L = max_input + gen;
    const int L = lb->L, H = o->n_heads;
    // The patterns of a batch stay under 2^24 floats (64 MB).
    long per = (long)H * L * L;
    lb->B = per > 0 && per * LABEL_BATCH > (1L << 24) ? (int)((1L << 24) / per) : LABEL_BATCH;
    if (lb->B < 1) lb->B = 1;
    const int B = lb->B;
    if (!(lb->inf = infer_new(t, B, err))) return -1;
    lb->pat = malloc(((size_t)B * (H ? per : 1)) * sizeof *lb->pat);
    lb->seq = malloc((size_t)B * L * sizeof *lb->seq);
    lb->lens = malloc((size_t)B * sizeof *lb->lens);
    lb->outs = malloc((size_t)B * sizeof *lb->outs);
    lb->gen = malloc((size_t)B * (gen + 1) * sizeof *lb->gen);
    lb->n_gen = malloc((size_t)B * sizeof *lb->n_gen);
    lb->ids = malloc((size_t)L * sizeof *lb->ids);
    lb->rt = malloc((size_t)L * sizeof *lb->rt);
    lb->probs = malloc((size_t)B * (t->n_classes + 1) * sizeof *lb->probs);
    lb->one = malloc((size_t)(H ? per : 1) * sizeof *lb->one);
    lb->ptrs = malloc((size_t)B * sizeof *lb->ptrs);
    if (!lb->pat || !lb->seq || !lb->lens || !lb->outs || !lb->gen || !lb->n_gen || !lb->ids ||
        !lb->rt || !lb->probs || !lb->one || !lb->ptrs || !(lb->outs[0] = malloc((size_t)B * L * sizeof(int)))) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int i = 0; i < B; i++) {
        lb->outs[i] = lb->outs[0] + (long)i * L;
        lb->ptrs[i] = lb->seq + (long)i * L;
    }
    return 0;
}

/* Runs the teacher on the n inputs in lb->seq (lens in lb->lens); a run
 * that fails a run-time check marks its sequence (ok[i] 0). The pattern
 * pass sets the attention hook. */
static int teacher_pass(Labeller *lb, int n, int with_hook, int kind, int *ok, TfError *err) {
    const int H = lb->o->n_heads, L = lb->L;
    if (with_hook && H) {
        memset(lb->pat, 0, (size_t)n * H * L * L * sizeof *lb->pat);
        infer_set_attention_hook(lb->inf, on_attention, lb);
    }
    int rc;
    const int *const *ptrs = (const int *const *)lb->ptrs;
    if (kind == 0)
        rc = infer_every_position(lb->inf, ptrs, lb->lens, n, lb->outs, err);
    else if (kind == 1)
        rc = infer_generate_until(lb->inf, ptrs, lb->lens, n, lb->t->generate,
                                  lb->t->stop_token, lb->gen, lb->n_gen, err);
    else
        rc = infer_classify(lb->inf, ptrs, lb->lens, n, lb->probs, err);
    infer_set_attention_hook(lb->inf, NULL, NULL);
    if (rc < 0 && infer_n_failed(lb->inf) == 0) return -1;
    for (int i = 0; i < n; i++) ok[i] &= rc == 0 || infer_failure(lb->inf, i) == NULL;
    return 0;
}

/* Labels the n inputs in lb->seq and appends them to d; *rejected counts
 * those a run-time check refused. */
static int label_batch(Labeller *lb, int n, TfDataset *d, int *rejected, TfError *err) {
    const TfModel *t = lb->t, *s = lb->s;
    const int H = lb->o->n_heads, L = lb->L;
    int ok[LABEL_BATCH];
    for (int i = 0; i < n; i++) ok[i] = 1;
    int gen = t->output_kind == TF_OUTPUT_NEXT_TOKEN && !t->every_position;
    int kind = t->output_kind == TF_OUTPUT_CLASSIFY ? 2 : gen ? 1 : 0;
    if (teacher_pass(lb, n, !gen, kind, ok, err) < 0) return -1;
    int plen[LABEL_BATCH];
    if (gen) {
        // The student sees prompt + answer (the stop token too, when the
        // teacher stopped): the patterns come from a pass over that.
        for (int i = 0; i < n; i++) {
            plen[i] = lb->lens[i];
            int na = lb->n_gen[i];
            if (t->stop_token >= 0 && na < t->generate) lb->gen[i * t->generate + na++] = t->stop_token;
            for (int k = 0; k < na; k++) lb->seq[(long)i * L + plen[i] + k] = lb->gen[i * t->generate + k];
            lb->n_gen[i] = na;
            lb->lens[i] = plen[i] + na - 1; /* the rows the student sees */
            if (na == 0) ok[i] = 0;
        }
        if (H && teacher_pass(lb, n, 1, 0, ok, err) < 0) return -1;
    }
    for (int i = 0; i < n; i++) {
        if (!ok[i]) {
            ++*rejected;
            continue;
        }
        const int *in = lb->seq + (long)i * L;
        int len = lb->lens[i], n_ids = gen ? len + 1 : len, label = 0;
        for (int k = 0; k < n_ids; k++) lb->ids[k] = lb->t2s[in[k]];
        if (kind == 0)
            for (int p = 0; p < len; p++)
                lb->rt[p] = p < (t->bos >= 0) ? -1 : lb->t2s[lb->outs[i][p]];
        if (kind == 2) {
            const float *pr = lb->probs + (long)i * t->n_classes;
            int best = 0;
            for (int c = 1; c < t->n_classes; c++)
                if (pr[c] > pr[best]) best = c;
            for (int c = 0; c < s->n_classes; c++)
                if (strcmp(s->class_names[c], t->class_names[best]) == 0) label = c;
        }
        if (dataset_add_ids(d, s, lb->ids, n_ids, gen ? plen[i] : 0, label,
                            kind == 0 ? lb->rt : NULL, err) < 0)
            return -1;
        if (H) {
            for (int k = 0; k < H; k++)
                for (int r = 0; r < len; r++)
                    memcpy(lb->one + ((long)k * len + r) * len,
                           lb->pat + (((long)i * H + k) * L + r) * L, (size_t)len * sizeof(float));
            if (dataset_add_patterns(d, lb->one, (long)H * len * len, err) < 0) return -1;
        }
    }
    return 0;
}

/* ---- the sets ---------------------------------------------------------------- */

int distill_make_data(const TfModel *t, const TfModel *s, const TfDistillOptions *o,
                      TfDataset *train, TfDataset *held, TfDistillStats *stats, TfError *err) {
    Source src = {0};
    Labeller lb;
    Seen seen = {0};
    int *buf = NULL, rc = -1, is_file = o->inputs && strncmp(o->inputs, "random:", 7) != 0;
    memset(stats, 0, sizeof *stats);
    memset(&lb, 0, sizeof lb);
    rng_seed(&src.rng, o->seed * 104729u + 17u);
    if ((is_file ? source_file(&src, t, s, o->inputs, err)
                 : source_random(&src, t, s, o->inputs, err)) < 0)
        goto done;
    stats->input_len = src.max_len - (t->bos >= 0);
    if (labeller_init(&lb, t, s, o, src.max_len, err) < 0) goto done;
    if (!(buf = malloc((size_t)lb.L * sizeof *buf))) goto oom;
    for (TfDataset *d = held; d; d = d == held ? train : NULL) {
        d->n_attn = o->n_heads;
        d->attn_weight = o->weight;
        for (int k = 0; k < o->n_heads; k++)
            d->attn[k] = (TfAttnSpec){o->heads[k].s_layer, o->heads[k].s_head, 0, NULL};
    }
    // The held-out inputs are distinct (a set of them); no training input
    // is one of them. A random source gives up after many draws.
    for (int phase = 0; phase < 2; phase++) {
        TfDataset *d = phase ? train : held;
        int want = phase ? o->n_train : o->n_heldout, ended = 0;
        long draws = 0, max_draws = 100L * want + 10000;
        while (d->n < want && !ended) {
            int n = 0;
            while (n < lb.B && d->n + n < want) {
                int len = is_file || draws++ < max_draws ? source_next(&src, buf) : 0;
                if (len == 0) {
                    ended = 1;
                    break;
                }
                if (seen_has(&seen, buf, len)) continue;
                if (!phase && seen_add(&seen, buf, len) < 0) goto oom;
                memcpy(lb.seq + (long)n * lb.L, buf, (size_t)len * sizeof *buf);
                lb.lens[n++] = len;
            }
            if (n && label_batch(&lb, n, d, &stats->rejected, err) < 0) goto done;
        }
        if (d->n == 0 || (!phase && !is_file && d->n < want)) {
            tf_error_set(err, "%s %d %s inputs %s (%d rejected by the teacher's run-time checks)",
                         is_file ? "the file leaves" : "found only", d->n,
                         phase ? "training" : "distinct held-out",
                         is_file ? "after the held-out ones" : "in many draws: the input domain is "
                                                               "too small for the sizes asked",
                         stats->rejected);
            goto done;
        }
    }
    rc = 0;
    goto done;
oom:
    tf_error_set(err, "out of memory");
done:
    free(buf);
    labeller_free(&lb);
    source_free(&src);
    seen_free(&seen);
    return rc;
}

void distill_head_distance(TfTrainer *t, TfBatchBuf *bb, const TfDataset *d,
                           const TfDistillOptions *o, double *tv) {
    double rows[TF_DISTILL_MAX_HEADS] = {0};
    int *idx = malloc((size_t)bb->max_seqs * sizeof *idx);
    int *pred = malloc((size_t)bb->max_seqs * sizeof *pred);
    for (int k = 0; k < o->n_heads; k++) tv[k] = 0;
    for (int i = 0; idx && pred && d->patterns && i < d->n; i += bb->max_seqs) {
        int n = d->n - i < bb->max_seqs ? d->n - i : bb->max_seqs;
        for (int j = 0; j < n; j++) idx[j] = i + j;
        batchbuf_fill(bb, d, idx, n);
        trainer_predict(t, &bb->batch, pred, NULL);
        for (int j = 0; j < n; j++) {
            const TfExample *e = &d->ex[i + j];
            if (!e->attn) continue;
            for (int k = 0; k < o->n_heads; k++) {
                int T = 0;
                const float *a = trainer_attention_weights(t, j, o->heads[k].s_layer,
                                                           o->heads[k].s_head, &T);
                if (!a || T != e->len) continue;
                const float *p = d->patterns + e->pat + (long)k * T * T;
                for (int r = 0; r < T; r++) {
                    double sum = 0;
                    for (int c = 0; c < T; c++) sum += fabs((double)a[r * T + c] - p[r * T + c]);
                    tv[k] += 0.5 * sum;
                }
                rows[k] += T;
            }
        }
    }
    for (int k = 0; k < o->n_heads; k++) tv[k] = rows[k] > 0 ? tv[k] / rows[k] : 1.0;
    free(idx);
    free(pred);
}
