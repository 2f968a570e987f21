/* finetune.c: what trains when training starts from a weight file
 * (finetune.h). */
#define _POSIX_C_SOURCE 200809L
#include "finetune.h"

#include <stdlib.h>
#include <string.h>

#define OPTIM_PREFIX "optim."

int finetune_rule_add(TfFinetuneRules *s, int train, const char *spec) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        TfFinetuneRule *r = realloc(s->rules, (size_t)cap * sizeof *r);
        if (!r) return -1;
        s->rules = r;
        s->cap = cap;
    }
    s->rules[s->n++] = (TfFinetuneRule){train, spec};
    return 0;
}

void finetune_rules_free(TfFinetuneRules *s) {
    free(s->rules);
    *s = (TfFinetuneRules){0};
}

/* The tensors that are parameters: those before any optimizer state. */
static int n_params(const TfModel *m) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strncmp(m->tensors[i].name, OPTIM_PREFIX, strlen(OPTIM_PREFIX)) == 0) return i;
    return m->n_tensors;
}

/* Whether `name` is `prefix` or starts with `prefix` and a dot. */
static int dot_prefix(const char *name, const char *prefix, size_t n) {
    return strncmp(name, prefix, n) == 0 && (name[n] == '\0' || name[n] == '.');
}

/* Marks the tensors of layers lo..hi whose role starts with `role` (n
 * bytes; n 0: every role). Returns how many uses it matched. */
static int mark_layers(const TfModel *m, int lo, int hi, const char *role, size_t n, int *hit) {
    int count = 0, np = n_params(m);
    for (int l = lo; l <= hi; l++) {
        int ts[TF_LAYER_MAX_TENSORS];
        const char *roles[TF_LAYER_MAX_TENSORS];
        int k = model_layer_tensors(&m->layers[l], ts, roles);
        for (int j = 0; j < k; j++)
            if ((n == 0 || dot_prefix(roles[j], role, n)) && ts[j] < np) {
                count++;
                hit[ts[j]] = 1;
            }
    }
    return count;
}

/* Parses "layers.A[-B][.ROLE]": 1 with the range and role, 0 when the item
 * has another form. */
static int parse_layers(const char *item, size_t len, long *lo, long *hi, const char **role,
                        size_t *role_len) {
    const char *p = item + 7, *end = item + len;
    if (len < 8 || strncmp(item, "layers.", 7) != 0 || *p < '0' || *p > '9') return 0;
    *lo = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) *lo = *lo > 100000000 ? *lo : *lo * 10 + (*p - '0');
    *hi = *lo;
    if (p < end && *p == '-') {
        if (++p == end || *p < '0' || *p > '9') return 0;
        *hi = 0;
        for (; p < end && *p >= '0' && *p <= '9'; p++) *hi = *hi > 100000000 ? *hi : *hi * 10 + (*p - '0');
    }
    if (p < end && *p != '.') return 0;
    *role = p < end ? p + 1 : p;
    *role_len = p < end ? (size_t)(end - p - 1) : 0;
    return p == end || *role_len > 0;
}

/* The closest name an item could have meant, into best: a tensor name or
 * one of its dot prefixes, a layer name, or "all"; "" when none is close. */
static void suggest(const TfModel *m, const char *item, size_t len, char *best, size_t size) {
    int best_d = (int)(len / 3 > 2 ? len / 3 : 2) + 1;
    best[0] = '\0';
    char cand[128];
    for (int i = -1; i < n_params(m) + m->n_layers; i++) {
        const char *name = i < 0 ? "all" : i < n_params(m) ? m->tensors[i].name
                                                            : m->layers[i - n_params(m)].name;
        // The name and each of its dot prefixes.
        size_t n = strlen(name);
        for (size_t k = 1; k <= n && k < sizeof cand; k++) {
            if (name[k] != '.' && name[k] != '\0') continue;
            memcpy(cand, name, k);
            cand[k] = '\0';
            int d = tf_edit_distance(item, len, cand);
            if (d < best_d) {
                best_d = d;
                snprintf(best, size, "%s", cand);
            }
        }
    }
}

/* Marks what one item names; -1 with err set when it names nothing. */
static int mark_item(const TfModel *m, const char *opt, const char *item, size_t len, int *hit,
                     TfError *err) {
    const int np = n_params(m);
    if (len == 3 && strncmp(item, "all", 3) == 0) {
        for (int i = 0; i < np; i++) hit[i] = 1;
        return 0;
    }
    long lo, hi;
    const char *role;
    size_t role_len;
    if (parse_layers(item, len, &lo, &hi, &role, &role_len)) {
        if (lo > hi) {
            tf_error_set(err, "%s: '%.*s': a range of layers goes from the lower to the higher",
                         opt, (int)len, item);
            return -1;
        }
        if (hi >= m->n_layers) {
            tf_error_set(err, "%s: '%.*s': the model has %d layers (layers.0-%d)", opt, (int)len,
                         item, m->n_layers, m->n_layers - 1);
            return -1;
        }
        if (mark_layers(m, (int)lo, (int)hi, role, role_len, hit) == 0 && role_len > 0) {
            tf_error_set(err, "%s: '%.*s': no tensor of %s has a role starting '%.*s' (roles as "
                              "tfinfo lists them: attn.query.weight, mlp.fc1, mlp, ...)",
                         opt, (int)len, item, lo == hi ? "that layer" : "those layers",
                         (int)role_len, role);
            return -1;
        }
        return 0;
    }
    int found = 0;
    for (int i = 0; i < np; i++)
        if (dot_prefix(m->tensors[i].name, item, len)) hit[i] = found = 1;
    // A layer name, or a layer name and a role: every layer of that name.
    const char *dot = memchr(item, '.', len);
    size_t name_len = dot ? (size_t)(dot - item) : len;
    role = dot ? dot + 1 : "";
    role_len = dot ? len - name_len - 1 : 0;
    int layers = 0;
    for (int l = 0; !found && l < m->n_layers; l++)
        if (strlen(m->layers[l].name) == name_len && strncmp(m->layers[l].name, item, name_len) == 0) {
            layers++;
            found |= mark_layers(m, l, l, role, role_len, hit) > 0;
        }
    if (found) return 0;
    if (layers && role_len) {
        tf_error_set(err, "%s: '%.*s': no tensor of layer '%.*s' has a role starting '%.*s' "
                          "(roles as tfinfo lists them: attn.query.weight, mlp.fc1, mlp, ...)",
                     opt, (int)len, item, (int)name_len, item, (int)role_len, role);
        return -1;
    }
    char best[128];
    suggest(m, item, len, best, sizeof best);
    if (len == 0)
        tf_error_set(err, "%s: an empty item (SPEC is a comma-separated list of tensor or layer "
                          "names)", opt);
    else if (best[0])
        tf_error_set(err, "%s: '%.*s' names no tensor or layer (did you mean '%s'?)", opt, (int)len,
                     item, best);
    else
        tf_error_set(err, "%s: '%.*s' names no tensor or layer (tfinfo lists them)", opt, (int)len,
                     item);
    return -1;
}

int finetune_mask(const TfModel *m, const TfFinetuneRules *s, int fixed_positions, int *mask,
                  TfError *err) {
    const int np = n_params(m);
    int *hit = calloc((size_t)(m->n_tensors > 0 ? m->n_tensors : 1), sizeof *hit);
    if (!hit) {
        tf_error_set(err, "out of memory");
        return -1;
    }
    for (int i = 0; i < m->n_tensors; i++)
        mask[i] = i < np && !(fixed_positions && i == m->pos_embed);
    for (int r = 0; r < s->n; r++) {
        const char *opt = s->rules[r].train ? "--train" : "--freeze", *p = s->rules[r].spec;
        memset(hit, 0, (size_t)m->n_tensors * sizeof *hit);
        for (;;) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            if (mark_item(m, opt, p, len, hit, err) < 0) {
                free(hit);
                return -1;
            }
            if (!comma) break;
            p = comma + 1;
        }
        for (int i = 0; i < np; i++)
            if (hit[i]) mask[i] = s->rules[r].train;
    }
    free(hit);
    int any = 0;
    for (int i = 0; i < np; i++) any |= mask[i];
    if (!any) {
        tf_error_set(err, "nothing to train: every tensor is frozen%s",
                     s->n ? " (add --train SPEC after --freeze)" : "");
        return -1;
    }
    return 0;
}

char *finetune_rules_text(const TfFinetuneRules *s) {
    size_t n = 1;
    for (int r = 0; r < s->n; r++) n += strlen(s->rules[r].spec) + 11;
    char *text = malloc(n), *p = text;
    if (!text) return NULL;
    *p = '\0';
    for (int r = 0; r < s->n; r++)
        p += sprintf(p, "%s--%s %s", r ? " " : "", s->rules[r].train ? "train" : "freeze",
                     s->rules[r].spec);
    return text;
}

void finetune_describe(const TfModel *m, const int *mask, FILE *f) {
    const int np = n_params(m);
    int n_train = 0;
    size_t p_train = 0, p_all = 0;
    for (int i = 0; i < np; i++) {
        p_all += m->tensors[i].nelem;
        if (mask[i]) n_train++, p_train += m->tensors[i].nelem;
    }
    fprintf(f, "training %d of %d tensors (%zu of %zu parameters)", n_train, np, p_train, p_all);
    if (n_train == np) {
        fprintf(f, ": all\n");
        return;
    }
    const char *sep = ": ";
    for (int i = 0; i < np; i++)
        if (mask[i]) {
            fprintf(f, "%s%s", sep, m->tensors[i].name);
            sep = ", ";
        }
    fprintf(f, "\n");
    // A trained tensor that several layers read changes each of them.
    for (int i = 0; i < np; i++) {
        if (!mask[i] || model_tensor_uses(m, i) < 2) continue;
        fprintf(f, "%s is shared: it changes", m->tensors[i].name);
        const char *sep2 = " ";
        if (i == m->tok_embed || i == m->pos_embed) fprintf(f, " the embedding"), sep2 = ", ";
        if (i == m->unembed || i == m->unembed_bias) fprintf(f, "%sthe unembedding", sep2), sep2 = ", ";
        for (int l = 0; l < m->n_layers; l++) {
            int ts[TF_LAYER_MAX_TENSORS];
            const char *roles[TF_LAYER_MAX_TENSORS];
            int k = model_layer_tensors(&m->layers[l], ts, roles), reads = 0;
            for (int q = 0; q < k; q++) reads |= ts[q] == i;
            if (reads) fprintf(f, "%slayer %d %s", sep2, l, m->layers[l].name), sep2 = ", ";
        }
        fprintf(f, "\n");
    }
}

int finetune_check_model(const TfModel *m, TfError *err) {
    if (model_numeric_output(m)) {
        tf_error_set(err, "the model prints a number at every position (register '%s'); tftrain "
                          "trains models whose output is a token or a class",
                     m->regs[m->output_reg].name);
        return -1;
    }
    return 0;
}

int finetune_check_data(const TfModel *m, const TfDataset *d, TfError *err) {
    if (m->bos < 0) return 0;
    for (int i = 0; i < d->n; i++)
        if (d->tokens[d->ex[i].off] != m->bos) {
            char t[TF_TOKEN_TEXT_MAX];
            model_token_text(m, m->bos, t);
            tf_error_set(err, "example %d does not start with the model's beginning-of-sequence "
                              "token '%s'", i + 1, t);
            return -1;
        }
    return 0;
}

void finetune_drop_state(TfModel *m) {
    int np = n_params(m);
    for (int i = np; i < m->n_tensors; i++) {
        free(m->tensors[i].name);
        free(m->tensors[i].data);
    }
    m->n_tensors = np;
}

int finetune_check_state(const TfModel *m, const int *mask, TfError *err) {
    if (model_find_tensor(m, OPTIM_PREFIX "step") < 0) return 0;
    for (int i = 0; i < n_params(m); i++) {
        char name[512];
        snprintf(name, sizeof name, OPTIM_PREFIX "m.%s", m->tensors[i].name);
        int has = model_find_tensor(m, name) >= 0;
        if (has != (mask[i] != 0)) {
            tf_error_set(err, "the checkpoint %s '%s' but these options %s it (give the "
                              "--freeze and --train options of the run that wrote it)",
                         has ? "trained" : "froze", m->tensors[i].name, has ? "freeze" : "train");
            return -1;
        }
    }
    return 0;
}
