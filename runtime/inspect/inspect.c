/* inspect.c: captures, register decoding, traces. See inspect.h.
 *
 * Dimension legend: P positions of the captured sequence, d d_model, H heads
 * of an attention layer, V outputs of the unembedding (n_vocab, or n_classes
 * for a classifier).
 */
#include "inspect.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "infer.h"

#define INSPECT_PI 3.14159265358979323846

/* --- decoding ------------------------------------------------------------ */

/* t into buf of n bytes, cut short when longer (a token's name in a cell). */
static void copy_text(char *buf, size_t n, const char *t) {
    size_t k = strlen(t);
    if (k >= n) k = n - 1;
    memcpy(buf, t, k);
    buf[k] = '\0';
}

/* The label of column i of a one-hot register: a token's text, or a
 * categorical value's label. */
static void onehot_label(const TfModel *m, const TfRegister *reg, int i, char *buf, size_t n) {
    if (reg->kind == TF_REG_CATEGORICAL) {
        snprintf(buf, n, "%s", reg->values && i >= 0 && i < reg->size ? reg->values[i] : "?");
    } else {
        char t[TF_TOKEN_TEXT_MAX];
        model_token_text(m, i >= 0 && i < m->n_vocab ? i : 0, t);
        copy_text(buf, n, t);
    }
}

/* Token and categorical registers: one-hot over their columns. */
static void decode_token(const TfModel *m, const TfRegister *reg, const float *v, TfDecoded *o) {
    int best = 0, second = -1;
    for (int i = 1; i < reg->size; i++) {
        if (v[i] > v[best]) {
            second = best;
            best = i;
        } else if (second < 0 || v[i] > v[second]) {
            second = i;
        }
    }
    float maxabs = 0;
    int n_hot = 0; /* values that are not near 0 */
    for (int i = 0; i < reg->size; i++) {
        if (fabsf(v[i]) > maxabs || isnan(v[i])) maxabs = isnan(v[i]) ? INFINITY : fabsf(v[i]);
        if (!(fabsf(v[i]) <= TF_DECODE_TOL)) n_hot++;
    }
    o->index = best;
    o->runner_up = second;
    o->value = v[best];
    o->margin = second >= 0 ? v[best] - v[second] : v[best];
    if (maxabs < TF_DECODE_ZERO) {
        o->status = TF_DECODE_EMPTY;
        return;
    }
    char a[16], b[16];
    onehot_label(m, reg, best, a, sizeof a);
    if (n_hot > 1) { /* a mix of values (NaN counts as away from 0) */
        o->status = TF_DECODE_FLAGGED;
        onehot_label(m, reg, second >= 0 ? second : best, b, sizeof b);
        snprintf(o->why, sizeof o->why, "not one-hot: %d values away from 0; '%.8s' %.3g, '%.8s' %.3g",
                 n_hot, a, (double)v[best], b, second >= 0 ? (double)v[second] : 0.0);
    } else if (!(fabsf(v[best] - 1.0f) <= TF_DECODE_TOL)) { /* one token, but not at 1 */
        o->status = TF_DECODE_FLAGGED;
        snprintf(o->why, sizeof o->why, "not one-hot: '%.8s' is %.3g, not 1", a, (double)v[best]);
    } else {
        o->status = TF_DECODE_CLEAN;
    }
}

static void decode_position(const TfModel *m, const float *v, TfDecoded *o) {
    double s = v[0], c = v[1];
    double r = sqrt(s * s + c * c);
    double period = m->period > 0 ? m->period : 1;
    double p = atan2(s, c) * period / (2 * INSPECT_PI);
    if (p < 0) p += period;
    if (p >= period) p -= period;
    long k = lround(p);
    double off = fabs(p - (double)k);
    if (k >= (long)period) k -= (long)period;
    o->index = (int)k;
    o->runner_up = -1;
    o->value = (float)p;
    o->margin = (float)r;
    if (isnan(r)) {
        o->status = TF_DECODE_FLAGGED;
        o->index = -1;
        snprintf(o->why, sizeof o->why, "not a number (sin %g, cos %g)", s, c);
    } else if (r < TF_DECODE_ZERO) {
        o->status = TF_DECODE_EMPTY;
    } else if (fabs(r - 1) > TF_DECODE_TOL) {
        o->status = TF_DECODE_FLAGGED;
        snprintf(o->why, sizeof o->why, "length %.3g, not 1 (a mix of positions?); angle says %.2f",
                 r, p);
    } else if (off > TF_DECODE_POS_TOL) {
        long lo = (long)floor(p), hi = (lo + 1) % (long)period;
        o->status = TF_DECODE_FLAGGED;
        snprintf(o->why, sizeof o->why, "between %ld and %ld (%.2f)", lo, hi, p);
    } else {
        o->status = TF_DECODE_CLEAN;
    }
}

void inspect_decode(const TfModel *m, const TfRegister *reg, const float *row, TfDecoded *out) {
    memset(out, 0, sizeof *out);
    const float *v = row + reg->offset;
    switch (reg->kind) {
    case TF_REG_TOKEN:
    case TF_REG_CATEGORICAL: decode_token(m, reg, v, out); break;
    case TF_REG_POSITION: decode_position(m, v, out); break;
    default:
        out->index = out->runner_up = -1;
        out->value = v[0];
        if (isfinite(v[0])) {
            out->status = TF_DECODE_CLEAN;
        } else {
            out->status = TF_DECODE_FLAGGED;
            snprintf(out->why, sizeof out->why, "not a finite number");
        }
        break;
    }
}

/* --- capture ------------------------------------------------------------- */

const float *capture_row(const TfCapture *c, int block, int pos) {
    return c->resid + ((size_t)block * (size_t)c->n_pos + (size_t)pos) * (size_t)c->m->d_model;
}

float capture_att(const TfCapture *c, int layer, int h, int q, int k) {
    size_t P = (size_t)c->n_pos;
    return c->att[layer][((size_t)h * P + (size_t)q) * P + (size_t)k];
}

void capture_free(TfCapture *c) {
    if (!c) return;
    if (c->att)
        for (int l = 0; l < c->m->n_layers; l++) free(c->att[l]);
    free(c->att);
    if (c->inner)
        for (int i = 0; i < c->m->n_layers * TF_HOOK_POINT_COUNT; i++) free(c->inner[i]);
    free(c->inner);
    if (c->scores)
        for (int l = 0; l < c->m->n_layers; l++) free(c->scores[l]);
    free(c->scores);
    free(c->outputs);
    free(c->values);
    free(c->resid);
    free(c->tokens);
    free(c);
}

/* infer's layer hook: the rows just computed go to their block. */
static void capture_layer_hook(void *user, int layer, const float *x, int n_rows,
                               const int *row_seq, const int *row_pos) {
    TfCapture *c = user;
    int d = c->m->d_model;
    for (int r = 0; r < n_rows; r++) {
        if (row_seq[r] != 0 || row_pos[r] < 0 || row_pos[r] >= c->n_pos) continue;
        memcpy((float *)capture_row(c, layer + 1, row_pos[r]), x + (size_t)r * (size_t)d,
               (size_t)d * sizeof(float));
    }
}

/* infer's attention hook: one head's weights (and scores) for one query row. */
static void capture_att_hook(void *user, int layer, int head, int seq, int pos,
                             const float *scores, const float *att, int T) {
    TfCapture *c = user;
    if (seq != 0 || pos < 0 || pos >= c->n_pos || !c->att[layer]) return;
    if (head < 0 || head >= c->m->layers[layer].n_heads) return;
    if (T > c->n_pos) T = c->n_pos;
    size_t P = (size_t)c->n_pos, at = ((size_t)head * P + (size_t)pos) * P;
    float *dst = c->att[layer] + at;
    memset(dst, 0, P * sizeof(float));
    memcpy(dst, att, (size_t)T * sizeof(float));
    if (c->scores && c->scores[layer]) {
        dst = c->scores[layer] + at;
        memcpy(dst, scores, (size_t)T * sizeof(float));
        for (size_t k = (size_t)T; k < P; k++) dst[k] = -INFINITY;
    }
}

/* infer's activation hook: the rows of sequence 0 go to their activation. */
static void capture_inner_hook(void *user, int layer, TfHookPoint point, const float *x, int width,
                               int n_rows, const int *row_seq, const int *row_pos) {
    TfCapture *c = user;
    float *dst = c->inner[layer * TF_HOOK_POINT_COUNT + point];
    if (!dst) return;
    for (int r = 0; r < n_rows; r++) {
        if (row_seq[r] != 0 || row_pos[r] < 0 || row_pos[r] >= c->n_pos) continue;
        memcpy(dst + (size_t)row_pos[r] * (size_t)width, x + (size_t)r * (size_t)width,
               (size_t)width * sizeof(float));
    }
}

/* The arrays of inspect_capture_inner; -1 when out of memory. */
static int capture_alloc_inner(TfCapture *c) {
    const TfModel *m = c->m;
    size_t P = (size_t)c->n_pos;
    c->inner = calloc((size_t)m->n_layers * TF_HOOK_POINT_COUNT + 1, sizeof(float *));
    c->scores = calloc((size_t)m->n_layers + 1, sizeof(float *));
    if (!c->inner || !c->scores) return -1;
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        for (int p = 0; p < TF_HOOK_POINT_COUNT; p++) {
            int w = infer_hook_width(m, ly, (TfHookPoint)p);
            if (w == 0) continue;
            c->inner[l * TF_HOOK_POINT_COUNT + p] = calloc(P * (size_t)w, sizeof(float));
            if (!c->inner[l * TF_HOOK_POINT_COUNT + p]) return -1;
        }
        if (!c->att[l]) continue;
        c->scores[l] = calloc((size_t)ly->n_heads * P * P, sizeof(float));
        if (!c->scores[l]) return -1;
    }
    return 0;
}

double inspect_cells(const TfModel *m, int n_pos, int inner) {
    double P = n_pos, cells = (double)(m->n_layers + 1) * P * m->d_model;
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        if (ly->kind == TF_LAYER_ATTENTION) cells += (inner ? 2.0 : 1.0) * ly->n_heads * P * P;
        for (int p = 0; inner && p < TF_HOOK_POINT_COUNT; p++)
            cells += P * infer_hook_width(m, ly, (TfHookPoint)p);
    }
    return cells;
}

int inspect_check_size(const TfModel *m, int n_pos, int inner, double limit, const char *what,
                       TfError *err) {
    double cells = inspect_cells(m, n_pos, inner);
    if (cells <= limit) return 0;
    tf_error_set(err, "%s would hold %.0f values (%d layers, %d positions, d_model %d), over the "
                      "limit of %.0f: inspect a shorter prompt, or fewer layers",
                 what, cells, m->n_layers, n_pos, m->d_model, limit);
    return -1;
}

TfCapture *inspect_capture_with(const TfModel *m, const int *tokens, int n_pos, int inner,
                                const TfIntervention *iv, TfError *err) {
    if (n_pos < 1) {
        tf_error_set(err, "nothing to inspect: the sequence is empty");
        return NULL;
    }
    // Refused before anything is allocated: memory and output grow with it.
    if (inspect_check_size(m, n_pos, inner, TF_CAPTURE_MAX_CELLS,
                           inner ? "the activations" : "the capture", err) < 0)
        return NULL;
    TfCapture *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    c->m = m;
    c->n_pos = n_pos;
    c->n_blocks = m->n_layers + 1;
    c->tokens = malloc((size_t)n_pos * sizeof(int));
    c->resid = calloc((size_t)c->n_blocks * (size_t)n_pos * (size_t)m->d_model, sizeof(float));
    c->att = calloc((size_t)m->n_layers + 1, sizeof(float *));
    if (!c->tokens || !c->resid || !c->att) goto oom;
    memcpy(c->tokens, tokens, (size_t)n_pos * sizeof(int));
    for (int l = 0; l < m->n_layers; l++) {
        const TfLayer *ly = &m->layers[l];
        if (ly->kind != TF_LAYER_ATTENTION || ly->n_heads < 1) continue;
        c->att[l] = calloc((size_t)ly->n_heads * (size_t)n_pos * (size_t)n_pos, sizeof(float));
        if (!c->att[l]) goto oom;
    }
    if (inner && capture_alloc_inner(c) < 0) goto oom;

    TfInfer *inf = infer_new(m, 1, err);
    if (!inf) {
        capture_free(c);
        return NULL;
    }
    if (infer_set_intervention(inf, iv, err) < 0) {
        infer_free(inf);
        capture_free(c);
        return NULL;
    }
    infer_set_hook(inf, capture_layer_hook, c);
    infer_set_attention_hook(inf, capture_att_hook, c);
    if (inner) infer_set_activation_hook(inf, capture_inner_hook, c);
    int rc;
    if (m->output_kind == TF_OUTPUT_CLASSIFY) {
        // A classifier: one pass, the likeliest class is the "next" output.
        float *probs = malloc(((size_t)m->n_classes + 1) * sizeof(float));
        rc = probs ? infer_classify(inf, &tokens, &n_pos, 1, probs, err) : -1;
        if (!probs) tf_error_set(err, "out of memory");
        for (int k = 1; rc == 0 && k < m->n_classes; k++)
            if (probs[k] > probs[c->next]) c->next = k;
        free(probs);
    } else if (model_numeric_output(m)) {
        // One pass; no token: the output register's value at each position.
        c->next = -1;
        c->values = calloc((size_t)n_pos, sizeof(float));
        rc = c->values ? infer_every_position_values(inf, &tokens, &n_pos, 1, &c->values, err) : -1;
        if (!c->values) tf_error_set(err, "out of memory");
    } else if (m->every_position) {
        // One pass; "next" is the token at the last position.
        // calloc: a sequence that fails a run-time check leaves them unset.
        c->outputs = calloc((size_t)n_pos, sizeof(int));
        rc = c->outputs ? infer_every_position(inf, &tokens, &n_pos, 1, &c->outputs, err) : -1;
        if (!c->outputs) tf_error_set(err, "out of memory");
        if (rc == 0) c->next = c->outputs[n_pos - 1];
    } else {
        rc = infer_generate(inf, &tokens, &n_pos, 1, 1, &c->next, err);
    }
    if (rc < 0 && infer_n_failed(inf) > 0) { /* a run-time check: keep the capture */
        c->failed = 1;
        tf_error_set(&c->failure, "%s", infer_failure(inf, 0));
        rc = 0;
    }
    infer_free(inf);
    if (rc < 0) {
        capture_free(c);
        return NULL;
    }
    return c;
oom:
    capture_free(c);
    tf_error_set(err, "out of memory capturing %d positions", n_pos);
    return NULL;
}

TfCapture *inspect_capture(const TfModel *m, const int *tokens, int n_pos, TfError *err) {
    return inspect_capture_with(m, tokens, n_pos, 0, NULL, err);
}

TfCapture *inspect_capture_inner(const TfModel *m, const int *tokens, int n_pos, TfError *err) {
    return inspect_capture_with(m, tokens, n_pos, 1, NULL, err);
}

int inspect_layer_wrote(const TfCapture *c, int layer, const TfRegister *reg) {
    if (layer >= 0 && c->m->layers[layer].kind == TF_LAYER_NORM) return 1;
    for (int p = 0; p < c->n_pos; p++) {
        const float *after = capture_row(c, layer + 1, p) + reg->offset;
        const float *before = layer >= 0 ? capture_row(c, layer, p) + reg->offset : NULL;
        for (int i = 0; i < reg->size; i++) {
            float b = before ? before[i] : 0.0f;
            float diff = fabsf(after[i] - b);
            if (!(diff <= 1e-6f * fmaxf(1.0f, fabsf(b)))) return 1;
        }
    }
    return 0;
}

int inspect_register_wrote(const TfCapture *c, int block, int r) {
    const TfModel *m = c->m;
    if (!model_reg_live(m, r, block)) return 0;
    if (block == 0 || model_reg_live(m, r, block - 1))
        return inspect_layer_wrote(c, block - 1, &m->regs[r]);
    // It takes its columns here: what they held before was not its value.
    const TfRegister *reg = &m->regs[r];
    for (int p = 0; p < c->n_pos; p++) {
        const float *v = capture_row(c, block, p) + reg->offset;
        for (int i = 0; i < reg->size; i++)
            if (!(fabsf(v[i]) <= 1e-6f)) return 1;
    }
    return 0;
}

/* The register that next holds column col of register r, after r's live
 * range: of those that hold it later, the earliest to start; -1: none. */
static int column_next(const TfModel *m, int r, int col) {
    int next = -1;
    for (int j = 0; j < m->n_regs; j++) {
        const TfRegister *o = &m->regs[j];
        if (o->live_from <= m->regs[r].live_to || col < o->offset || col >= o->offset + o->size)
            continue;
        if (next < 0 || o->live_from < m->regs[next].live_from) next = j;
    }
    return next;
}

void inspect_handover_text(const TfModel *m, int r, char *buf, size_t n) {
    const TfRegister *reg = &m->regs[r];
    size_t at = 0;
    buf[0] = '\0';
    for (int c = reg->offset; c < reg->offset + reg->size && at < n;) {
        int t = column_next(m, r, c), e = c + 1;
        while (e < reg->offset + reg->size && column_next(m, r, e) == t) e++;
        int k, one = e - c == 1;
        char cols[40];
        if (one) snprintf(cols, sizeof cols, "column %d", c);
        else snprintf(cols, sizeof cols, "columns %d-%d", c, e - 1);
        const char *pre = c == reg->offset ? "its " : ", ", *verb = c > reg->offset ? "" : one ? " is" : " are";
        if (t >= 0)
            k = snprintf(buf + at, n - at, "%s%s%s %s's from state %d", pre, cols, verb,
                         m->regs[t].name, m->regs[t].live_from);
        else
            k = snprintf(buf + at, n - at, "%s%s%s no register's after it", pre, cols, verb);
        at = k < 0 ? n : at + (size_t)k;
        c = e;
    }
}

/* --- what the output reads ------------------------------------------------ */

/* Marks the columns (of d) matrix t [rows, d] reads: its non-zero columns. */
static void mark_read(const TfModel *m, int t, char *cols) {
    if (t < 0) return;
    const TfTensor *T = &m->tensors[t];
    int d = m->d_model;
    size_t rows = T->nelem / (size_t)d;
    for (size_t r = 0; r < rows; r++)
        for (int j = 0; j < d; j++) cols[j] |= T->data[r * (size_t)d + (size_t)j] != 0.0f;
}

/* Marks the rows (of d) matrix or bias t [d, k] writes: its non-zero rows. */
static void mark_written(const TfModel *m, int t, char *cols) {
    if (t < 0) return;
    const TfTensor *T = &m->tensors[t];
    size_t k = T->nelem / (size_t)m->d_model;
    for (int i = 0; i < m->d_model; i++)
        for (size_t j = 0; j < k && !cols[i]; j++) cols[i] = T->data[(size_t)i * k + j] != 0.0f;
}

/* Columns layer ly reads at the query row (q), at every visible key (k) and
 * at the keys it attends to (v), and the columns it writes (w). A pre-norm
 * or norm layer reads everything. */
static void layer_columns(const TfModel *m, const TfLayer *ly, char *q, char *k, char *v, char *w) {
    int d = m->d_model;
    memset(q, 0, (size_t)d), memset(k, 0, (size_t)d), memset(v, 0, (size_t)d), memset(w, 0, (size_t)d);
    if (ly->kind == TF_LAYER_NORM || ly->norm_weight >= 0) {
        memset(q, 1, (size_t)d);
        if (ly->kind == TF_LAYER_ATTENTION) memset(k, 1, (size_t)d), memset(v, 1, (size_t)d);
        if (ly->kind == TF_LAYER_NORM) memset(w, 1, (size_t)d);
    } else if (ly->kind == TF_LAYER_ATTENTION) {
        mark_read(m, ly->query, q);
        mark_read(m, ly->key, k);
        mark_read(m, ly->value, v);
    } else {
        mark_read(m, ly->fc1_weight, q);
    }
    if (ly->kind == TF_LAYER_ATTENTION) {
        if (ly->output >= 0) {
            mark_written(m, ly->output, w);
            mark_written(m, ly->output_bias, w);
        } else { /* head channel c is residual column c: value row c */
            const TfTensor *T = &m->tensors[ly->value];
            for (int c = 0; c < d && (size_t)(c + 1) * (size_t)d <= T->nelem; c++)
                for (int j = 0; j < d && !w[c]; j++) w[c] = T->data[(size_t)c * d + j] != 0.0f;
            if (ly->value_bias >= 0 && m->tensors[ly->value_bias].nelem >= (size_t)d)
                for (int c = 0; c < d; c++) w[c] |= m->tensors[ly->value_bias].data[c] != 0.0f;
        }
    } else if (ly->kind == TF_LAYER_MLP) {
        mark_written(m, ly->fc2_weight, w);
        mark_written(m, ly->fc2_bias, w);
    }
}

char *inspect_live(const TfCapture *c) {
    const TfModel *m = c->m;
    int d = m->d_model, P = c->n_pos, L = m->n_layers;
    size_t plane = (size_t)P * (size_t)d;
    char *live = calloc((size_t)c->n_blocks * plane, 1);
    char *q = malloc((size_t)d * 4), *k = q ? q + d : NULL, *v = q ? q + 2 * d : NULL,
         *w = q ? q + 3 * d : NULL;
    if (!live || !q) {
        free(live), free(q);
        return NULL;
    }
    // After the last layer: what the unembedding reads, where it is read.
    char *out = live + (size_t)L * plane;
    if (model_numeric_output(m)) {
        const TfRegister *r = &m->regs[m->output_reg];
        for (int p = 0; p < P; p++) memset(out + (size_t)p * d + r->offset, 1, (size_t)r->size);
    } else {
        memset(q, 0, (size_t)d);
        mark_read(m, m->unembed, q);
        for (int p = 0; p < P; p++) {
            int read = m->every_position ||
                       (m->output_kind == TF_OUTPUT_CLASSIFY ? p == (m->classify_at_last ? P - 1 : 0)
                                                             : p == P - 1);
            if (read) memcpy(out + (size_t)p * d, q, (size_t)d);
        }
    }
    for (int l = L - 1; l >= 0; l--) {
        const TfLayer *ly = &m->layers[l];
        char *after = live + (size_t)(l + 1) * plane, *before = live + (size_t)l * plane;
        // A register checked after this layer is read at every position.
        for (int j = 0; j < m->n_checks; j++)
            if (m->checks[j].layer == l)
                for (int p = 0; p < P; p++)
                    memset(after + (size_t)p * d + m->regs[m->checks[j].reg].offset, 1,
                           (size_t)m->regs[m->checks[j].reg].size);
        memcpy(before, after, plane); /* the residual connection */
        layer_columns(m, ly, q, k, v, w);
        for (int p = 0; p < P; p++) {
            const char *a = after + (size_t)p * d;
            int needed = 0;
            for (int j = 0; j < d && !needed; j++) needed = a[j] && w[j];
            if (!needed) continue;
            for (int j = 0; j < d; j++) before[(size_t)p * d + j] |= q[j];
            if (ly->kind != TF_LAYER_ATTENTION) continue;
            int T = ly->causal ? p + 1 : P;
            for (int t = 0; t < T; t++) {
                int attended = 0;
                for (int h = 0; h < ly->n_heads && !attended; h++)
                    attended = capture_att(c, l, h, p, t) > 1e-6f;
                for (int j = 0; j < d; j++)
                    before[(size_t)t * d + j] |= k[j] | (attended ? v[j] : 0);
            }
        }
    }
    free(q);
    return live;
}

int inspect_register_live(const TfCapture *c, const char *live, int block, int pos,
                          const TfRegister *reg) {
    if (!live) return 1;
    const char *row = live + ((size_t)block * (size_t)c->n_pos + (size_t)pos) * (size_t)c->m->d_model;
    for (int i = 0; i < reg->size; i++)
        if (row[reg->offset + i]) return 1;
    return 0;
}

/* --- logit lens ---------------------------------------------------------- */

static const float *tensor_data(const TfModel *m, int idx) {
    return idx >= 0 && idx < m->n_tensors ? m->tensors[idx].data : NULL;
}

/* Number of outputs of the unembedding. */
static int n_outputs(const TfModel *m) { return (int)m->tensors[m->unembed].shape[0]; }

void inspect_logit_lens(const TfCapture *c, int block, int pos, int k, int *ids, float *probs) {
    const TfModel *m = c->m;
    int d = m->d_model, V = n_outputs(m);
    const float *x = capture_row(c, block, pos);
    float *tmp = malloc((size_t)d * sizeof(float));
    double *logit = malloc((size_t)V * sizeof(double));
    if (!tmp || !logit) {
        free(tmp);
        free(logit);
        for (int i = 0; i < k; i++) ids[i] = -1, probs[i] = 0;
        return;
    }
    memcpy(tmp, x, (size_t)d * sizeof(float));
    // A final norm (the last layer) is what the unembedding expects to see.
    const TfLayer *last = m->n_layers > 0 ? &m->layers[m->n_layers - 1] : NULL;
    if (last && last->kind == TF_LAYER_NORM && block < c->n_blocks - 1) {
        double mean = 0, var = 0;
        for (int i = 0; i < d; i++) mean += tmp[i];
        mean /= d;
        for (int i = 0; i < d; i++) var += (tmp[i] - mean) * (tmp[i] - mean);
        var /= d;
        double inv = 1 / sqrt(var + (double)last->norm_eps);
        const float *w = tensor_data(m, last->norm_weight), *b = tensor_data(m, last->norm_bias);
        for (int i = 0; i < d; i++)
            tmp[i] = (float)((tmp[i] - mean) * inv * (w ? w[i] : 1) + (b ? b[i] : 0));
    }
    const float *U = m->tensors[m->unembed].data, *ub = tensor_data(m, m->unembed_bias);
    double mx = -INFINITY;
    for (int v = 0; v < V; v++) {
        double s = ub ? ub[v] : 0;
        for (int i = 0; i < d; i++) s += (double)U[(size_t)v * d + i] * tmp[i];
        logit[v] = s;
        if (s > mx) mx = s;
    }
    double z = 0;
    for (int v = 0; v < V; v++) z += exp(logit[v] - mx);
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int v = 0; v < V; v++) {
            int taken = 0;
            for (int j = 0; j < i; j++) taken |= ids[j] == v;
            if (!taken && (best < 0 || logit[v] > logit[best])) best = v;
        }
        ids[i] = best;
        probs[i] = best >= 0 ? (float)(exp(logit[best] - mx) / z) : 0.0f;
    }
    free(tmp);
    free(logit);
}

void inspect_token_text(const TfModel *m, int id, char *buf, size_t bufsz) {
    if (id >= 0 && id < m->n_vocab && bufsz >= 8) {
        char t[TF_TOKEN_TEXT_MAX];
        model_token_text(m, id, t);
        copy_text(buf, bufsz, strcmp(t, " ") == 0 ? "' '" : t);
    } else {
        snprintf(buf, bufsz, "#%d", id);
    }
}

void inspect_value_text(const TfRegister *reg, int i, char *buf, size_t bufsz) {
    if (reg->kind == TF_REG_CATEGORICAL && reg->values && i >= 0 && i < reg->size)
        snprintf(buf, bufsz, "%s", reg->values[i]);
    else
        snprintf(buf, bufsz, "#%d", i);
}

int inspect_part_of(const TfLayer *ly, int unit) {
    for (int i = 0; i < ly->n_parts; i++)
        if (unit >= ly->parts[i].first && unit < ly->parts[i].first + ly->parts[i].count) return i;
    return -1;
}

/* Appends printf text at buf[*at] (n bytes in all), keeping *at within the
 * buffer when the text is cut. */
static void append(char *buf, size_t n, size_t *at, const char *fmt, ...) {
    if (*at >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *at, n - *at, fmt, ap);
    va_end(ap);
    *at = k < 0 ? n : *at + (size_t)k;
}

void inspect_part_text(const TfLayer *ly, int i, int flags, char *buf, size_t n) {
    const TfLayerPart *p = &ly->parts[i];
    const char *unit = ly->kind == TF_LAYER_ATTENTION ? "head" : "unit";
    int line = flags & INSPECT_PART_LINE ? p->line : 0;
    size_t at = 0;
    buf[0] = '\0';
    if (!(flags & INSPECT_PART_UNITS))
        append(buf, n, &at, "%s", p->name);
    else if (p->count == 1)
        append(buf, n, &at, "%s %d: %s", unit, p->first, p->name);
    else
        append(buf, n, &at, "%ss %d-%d: %s", unit, p->first, p->first + p->count - 1, p->name);
    if (p->op && line > 0)
        append(buf, n, &at, " (%s, line %d)", p->op, line);
    else if (p->op)
        append(buf, n, &at, " (%s)", p->op);
    else if (line > 0)
        append(buf, n, &at, " (line %d)", line);
}

void inspect_layer_text(const TfLayer *ly, int with_kind, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    if (with_kind) append(buf, n, &at, "%s", tf_layer_kind_names[ly->kind]);
    if (ly->n_parts == 0) {
        if (ly->op) append(buf, n, &at, "%s%s", at ? ", " : "", ly->op);
        if (!with_kind && !ly->op) append(buf, n, &at, "%s", tf_layer_kind_names[ly->kind]);
        if (ly->line > 0) append(buf, n, &at, ", line %d", ly->line);
        return;
    }
    for (int i = 0; i < ly->n_parts; i++) {
        char part[160];
        inspect_part_text(ly, i, INSPECT_PART_UNITS | INSPECT_PART_LINE, part, sizeof part);
        append(buf, n, &at, "%s%s", at ? "; " : "", part);
    }
    if (at >= n && n > 4) memcpy(buf + n - 4, "...", 4); /* cut: say so */
}

void inspect_output_text(const TfModel *m, int id, char *buf, size_t bufsz) {
    if (m->output_kind == TF_OUTPUT_CLASSIFY && m->class_names && id >= 0 && id < m->n_classes) {
        snprintf(buf, bufsz, "%s", m->class_names[id]);
    } else if (m->output_kind != TF_OUTPUT_CLASSIFY && id >= 0 && id < m->n_vocab && bufsz >= 8) {
        char t[TF_TOKEN_TEXT_MAX];
        model_token_text(m, id, t);
        copy_text(buf, bufsz, strcmp(t, " ") == 0 ? "' '" : t);
    } else {
        snprintf(buf, bufsz, "#%d", id);
    }
}

int inspect_read_position(const TfCapture *c) {
    return c->m->output_kind == TF_OUTPUT_CLASSIFY && !c->m->classify_at_last ? 0 : c->n_pos - 1;
}

int inspect_output_read(const TfCapture *c, int pos, TfDecoded *d) {
    const TfModel *m = c->m;
    const TfRegister *reg = &m->regs[m->output_reg];
    const float *row = capture_row(c, c->n_blocks - 1, pos);
    inspect_decode(m, reg, row, d);
    if (reg->kind == TF_REG_SCALAR && m->unembed >= 0 && m->output_kind != TF_OUTPUT_CLASSIFY) {
        // A number the unembedding decodes (a `cat` output held as one):
        // the token is the argmax of the logits, U y + b.
        const float *U = m->tensors[m->unembed].data;
        const float *b = m->unembed_bias >= 0 ? m->tensors[m->unembed_bias].data : NULL;
        int best = -1;
        double top = -INFINITY;
        for (int v = 0; v < n_outputs(m); v++) {
            double z = b ? b[v] : 0;
            for (int k = 0; k < m->d_model; k++) z += (double)U[(size_t)v * m->d_model + k] * row[k];
            if (z > top) top = z, best = v;
        }
        return best;
    }
    if (d->status == TF_DECODE_EMPTY || d->index < 0 || m->output_kind == TF_OUTPUT_CLASSIFY)
        return -1;
    // The unembedding's column of the hot residual column: its largest
    // weight names the token (a compiled unembedding is 0/1).
    const float *U = m->tensors[m->unembed].data;
    size_t dm = (size_t)m->d_model, col = (size_t)(reg->offset + d->index);
    int best = -1;
    float top = 0;
    for (int v = 0; v < n_outputs(m); v++)
        if (U[(size_t)v * dm + col] > top) top = U[(size_t)v * dm + col], best = v;
    return best;
}

/* --- the text trace ------------------------------------------------------ */

#define CELL 6                 /* characters per position column (plus a space) */
#define MAX_NOTES 4            /* flagged cells described per register and layer */
#define ATT_CELL 4             /* characters per key column of an attention matrix */
#define TF_MARGIN_SHOWN 0.995f /* a token row gets a margin row when some margin is below */

typedef struct Printer {
    const TfCapture *c;
    FILE *out;
    int label_w; /* width of the row labels */
    int cell_w;  /* characters per position column: CELL, or wider for full precision */
} Printer;

/* A number as the shortest text that reads back as the same float32, as
 * tfrun prints a numeric output (model_value_text): the trace shows every
 * scalar register at full precision. */
static void fmt_num(char *buf, size_t n, double v) {
    char text[TF_VALUE_TEXT_MAX];
    model_value_text(v == 0 ? 0.0f : (float)v, text); /* no "-0" */
    snprintf(buf, n, "%s", text);
}

/* The widest scalar cell (and its '!') sets the column width. */
static void set_width(Printer *pr) {
    const TfCapture *c = pr->c;
    const TfModel *m = c->m;
    pr->cell_w = CELL;
    for (int r = 0; r < m->n_regs; r++) {
        if (m->regs[r].kind != TF_REG_SCALAR) continue;
        for (int b = 0; b < c->n_blocks; b++)
            for (int p = 0; p < c->n_pos && model_reg_live(m, r, b); p++) {
                char buf[32];
                fmt_num(buf, sizeof buf, capture_row(c, b, p)[m->regs[r].offset]);
                int w = (int)strlen(buf) + 1; /* room for a '!' */
                if (w > pr->cell_w) pr->cell_w = w;
            }
    }
    if (c->values) /* a numeric output's row */
        for (int p = 0; p < c->n_pos; p++) {
            char buf[32];
            fmt_num(buf, sizeof buf, c->values[p]);
            int w = (int)strlen(buf) + 1;
            if (w > pr->cell_w) pr->cell_w = w;
        }
}

static void row_label(const Printer *pr, const char *label) {
    fprintf(pr->out, "    %-*s", pr->label_w, label);
}

static void print_cells(const Printer *pr, const char *label, char (*cells)[32]) {
    row_label(pr, label);
    for (int p = 0; p < pr->c->n_pos; p++) fprintf(pr->out, " %*s", pr->cell_w, cells[p]);
    fputc('\n', pr->out);
}

/* The rows of one register after `block`, and its flagged cells as notes. */
static void print_register(const Printer *pr, int block, const TfRegister *reg, char (*cells)[32]) {
    const TfCapture *c = pr->c;
    const TfModel *m = c->m;
    TfDecoded *dec = malloc((size_t)c->n_pos * sizeof *dec);
    if (!dec) return;
    int n_flagged = 0;
    for (int p = 0; p < c->n_pos; p++) {
        inspect_decode(m, reg, capture_row(c, block, p), &dec[p]);
        const TfDecoded *d = &dec[p];
        char *cell = cells[p];
        if (d->status == TF_DECODE_FLAGGED) n_flagged++;
        if (d->status == TF_DECODE_EMPTY) {
            snprintf(cell, 32, ".");
        } else if (reg->kind == TF_REG_TOKEN) {
            inspect_token_text(m, d->index, cell, 31);
        } else if (reg->kind == TF_REG_CATEGORICAL) {
            inspect_value_text(reg, d->index, cell, CELL + 1);
        } else if (reg->kind == TF_REG_POSITION) {
            if (d->status == TF_DECODE_FLAGGED && d->index >= 0 &&
                fabsf(d->margin - 1) <= TF_DECODE_TOL)
                snprintf(cell, 32, "%.1f", (double)d->value);
            else if (d->index >= 0)
                snprintf(cell, 32, "%d", d->index);
            else
                snprintf(cell, 32, "nan");
        } else {
            fmt_num(cell, 32, d->value);
        }
        if (d->status == TF_DECODE_FLAGGED) strcat(cell, "!");
    }
    print_cells(pr, reg->name, cells);
    // Margins only where they say something: some one-hot is not clear-cut.
    int unsure = 0;
    for (int p = 0; p < c->n_pos; p++)
        unsure |= dec[p].status != TF_DECODE_EMPTY && !(dec[p].margin >= TF_MARGIN_SHOWN);
    if ((reg->kind == TF_REG_TOKEN || reg->kind == TF_REG_CATEGORICAL) && unsure) {
        for (int p = 0; p < c->n_pos; p++) {
            if (dec[p].status == TF_DECODE_EMPTY)
                snprintf(cells[p], 32, ".");
            else
                snprintf(cells[p], 32, "%.2f", (double)dec[p].margin);
        }
        print_cells(pr, "  margin", cells);
    }
    // One line of notes per register: "! left_pos at 1: between 0 and 1 (0.50); at 3: ...".
    if (n_flagged) {
        fprintf(pr->out, "    ! %s", reg->name);
        int shown = 0;
        for (int p = 0; p < c->n_pos && shown < MAX_NOTES; p++) {
            if (dec[p].status != TF_DECODE_FLAGGED) continue;
            fprintf(pr->out, "%s at %d: %s", shown ? ";" : "", p, dec[p].why);
            shown++;
        }
        if (n_flagged > shown) fprintf(pr->out, "; %d more", n_flagged - shown);
        fputc('\n', pr->out);
    }
    free(dec);
}

/* Compiled models: per head, the key position each query attends to most;
 * "~" when that weight is under 0.9 (the attention is spread). */
static void print_attends(const Printer *pr, int layer, char (*cells)[32]) {
    const TfCapture *c = pr->c;
    for (int h = 0; h < c->m->layers[layer].n_heads; h++) {
        for (int q = 0; q < c->n_pos; q++) {
            int best = 0;
            for (int k = 1; k <= q || (k < c->n_pos && !c->m->layers[layer].causal); k++)
                if (k < c->n_pos &&
                    capture_att(c, layer, h, q, k) > capture_att(c, layer, h, q, best))
                    best = k;
            snprintf(cells[q], 32, "%d%s", best,
                     capture_att(c, layer, h, q, best) < 0.9f ? "~" : "");
        }
        char label[32];
        snprintf(label, sizeof label, "attends h%d", h);
        print_cells(pr, label, cells);
    }
}

/* Learned models: the full matrix of each head, weights in percent. */
static void print_att_matrix(const Printer *pr, int layer) {
    const TfCapture *c = pr->c;
    for (int h = 0; h < c->m->layers[layer].n_heads; h++) {
        fprintf(pr->out, "    head %d (%% of query row's attention; rows query, columns key)\n", h);
        fprintf(pr->out, "      %*s", 9, "");
        for (int k = 0; k < c->n_pos; k++) fprintf(pr->out, "%*d", ATT_CELL, k);
        fputc('\n', pr->out);
        for (int q = 0; q < c->n_pos; q++) {
            char tok[32];
            inspect_token_text(c->m, c->tokens[q], tok, sizeof tok);
            fprintf(pr->out, "      %3d %-5.5s", q, tok);
            for (int k = 0; k < c->n_pos; k++) {
                float w = capture_att(c, layer, h, q, k);
                if (w < 0.005f)
                    fprintf(pr->out, "%*s", ATT_CELL, ".");
                else
                    fprintf(pr->out, "%*d", ATT_CELL, (int)lroundf(w * 100));
            }
            fputc('\n', pr->out);
        }
    }
}

/* Learned models: the two likeliest outputs after `block`, with p. */
static void print_lens(const Printer *pr, int block, char (*cells)[32]) {
    const TfCapture *c = pr->c;
    int V = n_outputs(c->m), k = V < 2 ? V : 2;
    int *ids = malloc((size_t)c->n_pos * 2 * sizeof(int));
    float *probs = malloc((size_t)c->n_pos * 2 * sizeof(float));
    if (!ids || !probs) {
        free(ids);
        free(probs);
        return;
    }
    for (int p = 0; p < c->n_pos; p++)
        inspect_logit_lens(c, block, p, k, ids + 2 * p, probs + 2 * p);
    for (int j = 0; j < k; j++) {
        char label[32];
        for (int p = 0; p < c->n_pos; p++) inspect_output_text(c->m, ids[2 * p + j], cells[p], 31);
        snprintf(label, sizeof label, "lens top%d", j + 1);
        print_cells(pr, label, cells);
        for (int p = 0; p < c->n_pos; p++) snprintf(cells[p], 32, "%.2f", (double)probs[2 * p + j]);
        print_cells(pr, "  p", cells);
    }
    free(ids);
    free(probs);
}

/* Whether column col after `block` is empty (TF_DECODE_ZERO) at every position. */
static int column_empty(const TfCapture *c, int block, int col) {
    for (int p = 0; p < c->n_pos; p++)
        if (!(fabsf(capture_row(c, block, p)[col]) < TF_DECODE_ZERO)) return 0;
    return 1;
}

/* Columns outside every register that `layer` changed (compiled models):
 * outside every register that holds its columns after it, but for the
 * columns of a register (whose range ended or is to come) the layer
 * cleared. */
static void note_unassigned(const Printer *pr, int layer) {
    const TfCapture *c = pr->c;
    const TfModel *m = c->m;
    int d = m->d_model, first = -1, count = 0;
    for (int col = 0; col < d; col++) {
        int owned = 0, some = 0;
        for (int r = 0; r < m->n_regs && !owned; r++) {
            int in = col >= m->regs[r].offset && col < m->regs[r].offset + m->regs[r].size;
            owned = in && model_reg_live(m, r, layer + 1);
            some |= in;
        }
        if (owned || (some && column_empty(c, layer + 1, col))) continue;
        TfRegister one = {.name = "", .kind = TF_REG_SCALAR, .offset = col, .size = 1};
        if (inspect_layer_wrote(c, layer, &one)) {
            if (first < 0) first = col;
            count++;
        }
    }
    if (count)
        fprintf(pr->out, "    ! %d column%s outside every register changed (first: %d)\n", count,
                count == 1 ? "" : "s", first);
}

/* The positions where a run-time check of `layer` fails (checks.h). */
static void note_checks(const Printer *pr, int layer) {
    const TfCapture *c = pr->c;
    const TfModel *m = c->m;
    for (int k = 0; k < m->n_checks; k++) {
        const TfCheck *ck = &m->checks[k];
        if (ck->layer != layer) continue;
        const TfRegister *reg = &m->regs[ck->reg];
        int shown = 0, n_bad = 0;
        for (int p = check_first_position(m); p < c->n_pos; p++) {
            const float *v = capture_row(c, layer + 1, p) + reg->offset;
            if (check_holds_one(v, reg->size, 1, model_check_bound(m, ck))) continue;
            if (shown++ < MAX_NOTES) {
                TfError e;
                check_describe(m, ck, p, v, 1, &e);
                fprintf(pr->out, "    ! check of %s fails: %s\n", reg->name, e.msg);
            }
            n_bad++;
        }
        if (n_bad > MAX_NOTES)
            fprintf(pr->out, "    ! check of %s fails at %d more positions\n", reg->name,
                    n_bad - MAX_NOTES);
    }
}

/* What the unembedding reads at the last position (compiled models). */
static void note_output(const Printer *pr, char (*cells)[32]) {
    const TfCapture *c = pr->c;
    const TfModel *m = c->m;
    if (c->values) {
        // A number at every position: the output register's values.
        for (int p = 0; p < c->n_pos; p++) fmt_num(cells[p], 32, c->values[p]);
        if (m->bos >= 0 && c->tokens[0] == m->bos) snprintf(cells[0], 32, "-");
        print_cells(pr, "output", cells);
        return;
    }
    if (c->outputs) {
        // Every position: what the unembedding makes of each row.
        for (int p = 0; p < c->n_pos; p++) inspect_token_text(m, c->outputs[p], cells[p], 31);
        if (m->bos >= 0 && c->tokens[0] == m->bos) snprintf(cells[0], 32, "-");
        print_cells(pr, "output", cells);
    }
    if (m->output_reg < 0 || m->output_kind != TF_OUTPUT_NEXT_TOKEN || c->outputs) return;
    const TfRegister *reg = &m->regs[m->output_reg];
    TfDecoded d;
    char tok[32], val[32];
    int pos = c->n_pos - 1, t = inspect_output_read(c, pos, &d);
    inspect_token_text(m, t, tok, sizeof tok);
    if (d.status == TF_DECODE_EMPTY) {
        fprintf(pr->out,
                "  ! output: %s is empty at position %d: the next token is the argmax of "
                "near-zero logits\n",
                reg->name, pos);
    } else if (d.status == TF_DECODE_FLAGGED) {
        fprintf(pr->out, "  ! output: %s at position %d: %s\n", reg->name, pos, d.why);
    } else if (t < 0) {
        inspect_value_text(reg, d.index, val, sizeof val);
        fprintf(pr->out,
                "  ! output: %s at position %d holds %s, which the unembedding maps to no token\n",
                reg->name, pos, val);
    } else if (reg->kind == TF_REG_CATEGORICAL) {
        inspect_value_text(reg, d.index, val, sizeof val);
        fprintf(pr->out, "  output: %s at position %d reads %s (value %s)\n", reg->name, pos, tok,
                val);
    } else if (reg->kind == TF_REG_SCALAR) {
        fmt_num(val, sizeof val, d.value);
        fprintf(pr->out, "  output: %s at position %d reads %s (the number %s, decoded)\n", reg->name,
                pos, tok, val);
    } else {
        fprintf(pr->out, "  output: %s at position %d reads %s\n", reg->name, pos, tok);
    }
}

/* The registers whose live range ends before `block` (held after block - 1,
 * not after it): "~ left ends: held in states 0..12 (the embedding to after
 * layer 11); its columns 22-35 are left2's from state 13". */
static void note_ended(const Printer *pr, int block) {
    const TfModel *m = pr->c->m;
    for (int r = 0; r < m->n_regs; r++) {
        const TfRegister *reg = &m->regs[r];
        if (!model_reg_live(m, r, block - 1) || model_reg_live(m, r, block)) continue;
        char range[96];
        model_live_text(m, r, range, sizeof range);
        fprintf(pr->out, "    ~ %s ends: held in %s", reg->name, range);
        char where[512];
        inspect_handover_text(m, r, where, sizeof where);
        fprintf(pr->out, "; %s\n", where);
    }
}

/* The live ranges narrower than every state, for the trace's head. */
static void note_live_ranges(const Printer *pr) {
    const TfModel *m = pr->c->m;
    int n = 0;
    for (int r = 0; r < m->n_regs; r++) {
        if (!model_reg_reused(m, r)) continue;
        int to = m->regs[r].live_to < m->n_layers ? m->regs[r].live_to : m->n_layers;
        if (n++ == 0)
            fprintf(pr->out, "(registers that hold their columns in some states only, state 0 "
                             "the embedding's output and i+1 layer i's:");
        fprintf(pr->out, "%s %s %d..%d", n > 1 ? "," : "", m->regs[r].name, m->regs[r].live_from,
                to);
    }
    if (n) fprintf(pr->out, "; each shows only there)\n");
}

/* Models without registers: the model's own prediction, with p. */
static void note_prediction(const Printer *pr) {
    const TfCapture *c = pr->c;
    int pos = inspect_read_position(c), id;
    float p;
    char out[32];
    inspect_logit_lens(c, c->n_blocks - 1, pos, 1, &id, &p);
    inspect_output_text(c->m, id, out, sizeof out);
    fprintf(pr->out, "  output: %s %s at position %d (p %.4f)\n",
            c->m->output_kind == TF_OUTPUT_CLASSIFY ? "class" : "next", out, pos, (double)p);
}

void inspect_print_trace(const TfCapture *c, FILE *out) {
    const TfModel *m = c->m;
    Printer pr = {c, out, 12, CELL};
    set_width(&pr);
    for (int r = 0; r < m->n_regs; r++) {
        int n = (int)strlen(m->regs[r].name);
        if (n > pr.label_w) pr.label_w = n;
    }
    char(*cells)[32] = malloc((size_t)c->n_pos * sizeof *cells);
    if (!cells) return;

    char next[32];
    inspect_output_text(m, c->next, next, sizeof next);
    fprintf(out, "step %d: %d positions \"", c->step, c->n_pos);
    for (int p = 0; p < c->n_pos; p++) {
        char t[TF_TOKEN_TEXT_MAX];
        model_token_text(m, c->tokens[p], t);
        if (p > 0 && m->token_names) fputc(' ', out); /* words apart */
        fputs(t, out);
    }
    if (c->values) {
        fprintf(out, "\" -> every position");
        for (int p = 0; p < c->n_pos; p++) {
            char v[TF_VALUE_TEXT_MAX];
            model_value_text(c->values[p], v);
            fprintf(out, " %s", v);
        }
        fputc('\n', out);
    } else if (c->outputs) {
        fprintf(out, "\" -> every position \"");
        for (int p = 0; p < c->n_pos; p++) {
            char t[TF_TOKEN_TEXT_MAX];
            model_token_text(m, c->outputs[p], t);
            if (p > 0 && m->token_names) fputc(' ', out);
            fputs(t, out);
        }
        fprintf(out, "\"\n");
    } else {
        fprintf(out, "\" -> %s %s\n", m->output_kind == TF_OUTPUT_CLASSIFY ? "class" : "next",
                next);
    }
    if (m->n_regs == 0)
        fprintf(out, "(no registers: logit lens and attention per layer)\n");
    else
        fprintf(out, "(after each layer, the registers it wrote, decoded; '.' empty, '!' flagged; "
                     "margin rows when some one-hot is not clear-cut)\n");
    note_live_ranges(&pr);
    for (int p = 0; p < c->n_pos; p++) snprintf(cells[p], 32, "%d", p);
    print_cells(&pr, "position", cells);
    for (int p = 0; p < c->n_pos; p++) inspect_token_text(m, c->tokens[p], cells[p], 31);
    print_cells(&pr, "token", cells);

    for (int block = 0; block < c->n_blocks; block++) {
        int layer = block - 1;
        if (layer < 0) {
            fprintf(out, "  embedding\n");
        } else {
            const TfLayer *ly = &m->layers[layer];
            char what[512];
            inspect_layer_text(ly, 1, what, sizeof what);
            fprintf(out, "  layer %d %s  (%s)\n", layer, ly->name, what);
        }
        if (m->n_regs > 0) {
            int wrote = 0;
            for (int r = 0; r < m->n_regs; r++) {
                if (!inspect_register_wrote(c, block, r)) continue;
                print_register(&pr, block, &m->regs[r], cells);
                wrote++;
            }
            if (layer >= 0) note_ended(&pr, block);
            if (layer >= 0 && m->layers[layer].kind == TF_LAYER_ATTENTION && c->att[layer])
                print_attends(&pr, layer, cells);
            if (layer >= 0) note_unassigned(&pr, layer);
            if (layer >= 0 && m->n_checks) note_checks(&pr, layer);
            if (!wrote) fprintf(out, "    (no register changed)\n");
            if (block == c->n_blocks - 1) note_output(&pr, cells);
        } else {
            print_lens(&pr, block, cells);
            if (layer >= 0 && m->layers[layer].kind == TF_LAYER_ATTENTION && c->att[layer])
                print_att_matrix(&pr, layer);
            if (block == c->n_blocks - 1 && !c->outputs) note_prediction(&pr);
        }
    }
    free(cells);
}
