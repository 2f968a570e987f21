/* prove.c: the validator's driver (compiler/prove.h): the program's meaning,
 * the embedding as the first columns, then every layer in order, each
 * declared register after the last layer that writes it, and the output.
 */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "prove.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prove_internal.h"

void pv_line(TfProof *P, const char *fmt, ...) {
    if (P->n_lines == P->cap_lines) {
        int cap = P->cap_lines ? 2 * P->cap_lines : 16;
        char **l = realloc(P->lines, (size_t)cap * sizeof *l);
        if (!l) return;
        P->lines = l;
        P->cap_lines = cap;
    }
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = malloc(strlen(buf) + 1);
    if (!s) return;
    strcpy(s, buf);
    P->lines[P->n_lines++] = s;
}

/* The proof's verdict, its reason (fmt, ap) and where: the op's line, the layer. */
static void set_verdict(TfProof *P, TfProofVerdict v, int line, int layer, const char *fmt,
                        va_list ap) {
    P->verdict = v;
    vsnprintf(P->reason, sizeof P->reason, fmt, ap);
    P->fail_line = line;
    P->fail_layer = layer;
}

void pv_fail(PvNet *N, int line, int layer, const int *assign, PvDeps d, const char *fmt, ...) {
    N->failed = 1;
    TfProof *P = N->P;
    if (P->verdict == TF_PROOF_FAILED && P->fail_line == line && P->fail_layer == layer && assign &&
        P->n_cases < 16) {
        struct TfProofCase *k = &P->cases[P->n_cases++];
        k->n = 0;
        for (int b = 0; b < N->S->n_base; b++)
            if (d >> b & 1) k->base[k->n] = b, k->idx[k->n++] = assign[b];
    }
    if (P->verdict == TF_PROOF_FAILED) return;
    va_list ap;
    va_start(ap, fmt);
    set_verdict(P, TF_PROOF_FAILED, line, layer, fmt, ap);
    va_end(ap);
    P->n_assign = 0;
    for (int b = 0; assign && b < N->S->n_base; b++) {
        if (!(d >> b & 1)) continue;
        int k = P->n_assign++;
        pv_base_name(N->S, b, P->assign_reg[k], sizeof P->assign_reg[k]);
        pv_base_label(N->S, b, assign[b], P->assign_val[k], sizeof P->assign_val[k]);
        P->assign_idx[k] = assign[b];
        P->assign_base[k] = b;
    }
    if (assign) {
        struct TfProofCase *k = &P->cases[0];
        P->n_cases = 1;
        k->n = 0;
        for (int i = 0; i < P->n_assign; i++) k->base[k->n] = P->assign_base[i], k->idx[k->n++] = P->assign_idx[i];
    }
}

void pv_unproven(PvNet *N, int line, int layer, const char *fmt, ...) {
    N->unproven = 1;
    TfProof *P = N->P;
    if (P->verdict != TF_PROOF_PROVEN) return;
    va_list ap;
    va_start(ap, fmt);
    set_verdict(P, TF_PROOF_UNPROVEN, line, layer, fmt, ap);
    va_end(ap);
}

TfIv pv_dot(const float *row, const TfIv *x, const unsigned char *reads, int d, float bias) {
    TfIv s = iv_pt(bias);
    double mag = fabs(bias);
    int n = 1;
    for (int c = 0; c < d; c++) {
        if (!reads[c] || row[c] == 0) continue;
        s = iv_add(s, iv_scale(x[c], row[c]));
        mag += fabs(row[c]) * iv_mag(x[c]);
        n++;
    }
    return iv_widen(s, iv_gamma(n) * mag);
}

/* pv_dot's float32 rounding of row . x + bias: gamma_n times its terms. */
static double dot_rounding(const float *row, const TfIv *x, const unsigned char *reads, int d,
                           float bias) {
    double mag = fabs(bias);
    int n = 1;
    for (int c = 0; c < d; c++) {
        if (!reads[c] || row[c] == 0) continue;
        mag += fabs(row[c]) * iv_mag(x[c]);
        n++;
    }
    return iv_gamma(n) * mag;
}

/* The least of logit e less logit t over the tokens t != e: the real dot
 * product of their rows' difference with x (a column both read, such as
 * a number the unembedding decodes, counts once), less each logit's
 * float32 rounding. */
double pv_logit_margin(const float *U, const float *ub, int nv, int e, const TfIv *x,
                       const unsigned char *reads, int d) {
    const float *ue = U + (size_t)e * d;
    double be = ub ? ub[e] : 0, re = dot_rounding(ue, x, reads, d, (float)be), worst = INFINITY;
    for (int t = 0; t < nv; t++) {
        if (t == e) continue;
        const float *ut = U + (size_t)t * d;
        double bt = ub ? ub[t] : 0;
        TfIv s = iv_add(iv_pt(be), iv_pt(-bt));
        for (int c = 0; c < d; c++)
            if (reads[c] && (ue[c] != 0 || ut[c] != 0))
                s = iv_add(s, iv_scale(x[c], (double)ue[c] - (double)ut[c]));
        worst = fmin(worst, s.lo - re - dot_rounding(ut, x, reads, d, (float)bt));
    }
    return worst;
}

/* The token index of a token value, -1. */
static int token_index(const TfIr *ir, TfVal v) {
    for (int t = 0; t < ir->n_vocab; t++)
        if (ir->vocab[t] == (int)v.x) return t;
    return -1;
}

/* Program registers to model columns: by name; categorical values by label. */
static int map_registers(PvNet *N) {
    const TfIr *ir = N->S->ir;
    const TfModel *m = N->m;
    int n = ir->n_regs;
    N->reg_col = malloc((size_t)n * sizeof *N->reg_col);
    N->reg_size = calloc((size_t)n, sizeof *N->reg_size);
    N->reg_model = malloc((size_t)n * sizeof *N->reg_model);
    N->last_write = malloc((size_t)n * sizeof *N->last_write);
    N->val_col = calloc((size_t)n, sizeof *N->val_col);
    if (!N->reg_col || !N->reg_size || !N->reg_model || !N->last_write || !N->val_col) return -1;
    for (int r = 0; r < n; r++) {
        const TfIrReg *R = &ir->regs[r];
        int mr = model_find_register(m, R->name);
        N->reg_model[r] = mr;
        N->reg_col[r] = mr >= 0 ? m->regs[mr].offset : -1;
        N->reg_size[r] = mr >= 0 ? m->regs[mr].size : 0;
        N->last_write[r] = -1;
        if (mr < 0 || !R->facts.known || R->kind == TF_REG_SCALAR) continue;
        N->val_col[r] = malloc(((size_t)R->facts.n_vals + 1) * sizeof(int));
        if (!N->val_col[r]) return -1;
        for (int i = 0; i < R->facts.n_vals; i++) {
            int col = -1;
            if (m->regs[mr].kind == TF_REG_TOKEN) {
                col = token_index(ir, R->facts.vals[i]);
            } else if (m->regs[mr].values) {
                /* By label, as the file names its columns (values whose
                   9-digit labels agree, 1 and 1 + 1e-14, get 17 digits:
                   compiler/values.c). */
                char lab[128];
                val_label(ir, R->facts.vals[i], lab, sizeof lab);
                const char *want = R->facts.labels && R->facts.labels[i] ? R->facts.labels[i] : lab;
                for (int k = 0; k < m->regs[mr].size; k++)
                    if (strcmp(m->regs[mr].values[k], want) == 0) col = k;
            }
            N->val_col[r][i] = col;
        }
    }
    return 0;
}

/* Columns a layer writes: nonzero rows of its output (or fc2) and bias. */
void pv_layer_writes(const TfModel *m, const TfLayer *ly, unsigned char *w) {
    int d = m->d_model;
    memset(w, 0, (size_t)d);
    int t = ly->kind == TF_LAYER_MLP ? ly->fc2_weight : ly->output;
    int b = ly->kind == TF_LAYER_MLP ? ly->fc2_bias : ly->output_bias;
    if (ly->kind == TF_LAYER_ATTENTION && t < 0) { // the heads' values: the rows that are not all zero
        const TfTensor *V = &m->tensors[ly->value];
        const float *vb = ly->value_bias >= 0 ? m->tensors[ly->value_bias].data : NULL;
        for (int c = 0; c < ly->n_heads * ly->d_vhead && c < d; c++) {
            w[c] = vb && vb[c] != 0;
            for (int k = 0; k < d && !w[c]; k++) w[c] = V->data[(size_t)c * (size_t)d + (size_t)k] != 0;
        }
    } else if (t >= 0) {
        const TfTensor *T = &m->tensors[t];
        long in = T->shape[1];
        for (int c = 0; c < d; c++)
            for (long k = 0; k < in; k++)
                if (T->data[(size_t)c * (size_t)in + (size_t)k] != 0) w[c] = 1;
    }
    if (b >= 0)
        for (int c = 0; c < d; c++)
            if (m->tensors[b].data[c] != 0) w[c] = 1;
}

static int last_writes(PvNet *N) {
    unsigned char *w = malloc((size_t)N->m->d_model);
    if (!w) return -1;
    for (int li = 0; li < N->m->n_layers; li++) {
        pv_layer_writes(N->m, &N->m->layers[li], w);
        for (int r = 0; r < N->S->ir->n_regs; r++) {
            // Only while the columns are r's: a later layer may clear them
            // for another register (TfRegister.live_from).
            if (N->reg_model[r] < 0 || !model_reg_live(N->m, N->reg_model[r], li + 1)) continue;
            for (int k = 0; k < N->reg_size[r]; k++)
                if (w[N->reg_col[r] + k]) N->last_write[r] = li;
        }
    }
    free(w);
    return 0;
}

/* The embedding: token row + position row, per token and index. */
static int embed(PvNet *N) {
    const TfModel *m = N->m;
    const PvSem *S = N->S;
    int d = m->d_model;
    const float *te = m->tensors[m->tok_embed].data, *pe = m->tensors[m->pos_embed].data;
    const PvBase *bt = &S->base[S->b_tokens], *bi = &S->base[S->b_indices];
    int assign[TF_PROOF_MAX_BASE];
    for (int c = 0; c < d; c++) {
        PvDeps dep = 0;
        for (int k = 1; k < bt->n; k++)
            if (te[token_index(S->ir, bt->vals[k]) * d + c] != te[token_index(S->ir, bt->vals[0]) * d + c])
                dep |= (PvDeps)1 << S->b_tokens;
        for (int k = 1; k < bi->n; k++)
            if (pe[(int)bi->vals[k].x * d + c] != pe[(int)bi->vals[0].x * d + c])
                dep |= (PvDeps)1 << S->b_indices;
        long n = pv_deps_size(S, dep, PV_TABLE_LIMIT);
        if (pv_col_set(&N->col[c], dep, n) < 0) return -1;
        for (long i = 0; i < n; i++) {
            assign[S->b_tokens] = assign[S->b_indices] = 0;
            pv_deps_decode(S, dep, i, assign);
            int t = token_index(S->ir, bt->vals[assign[S->b_tokens]]);
            int p = (int)bi->vals[assign[S->b_indices]].x;
            double x = (double)te[t * d + c] + (double)pe[p * d + c];
            N->col[c].v[i] = iv_widen(iv_pt(x), TF_F32_U * fabs(x));
        }
        double xb = (double)te[S->ir->bos * d + c] + (double)pe[c];
        N->bos[c] = iv_widen(iv_pt(xb), TF_F32_U * fabs(xb));
    }
    return 0;
}

static int prove_layers(PvNet *N) {
    const TfModel *m = N->m;
    // A register no layer writes holds what the embedding gave it (tfc puts
    // a Map of tokens or indices alone there): checked before the layers.
    if (pv_check_regs(N, -1) < 0) return -1;
    for (int li = 0; li < m->n_layers && !N->failed && !N->unproven; li++) {
        const TfLayer *ly = &m->layers[li];
        int rc = 0;
        if (ly->kind == TF_LAYER_NORM || ly->norm_weight >= 0)
            pv_unproven(N, ly->line, li, "layer %d (%s): not proven: a layer norm", li, ly->name);
        else if (ly->kind == TF_LAYER_MLP)
            rc = pv_mlp_layer(N, li);
        else
            rc = pv_attn_layer(N, li);
        if (rc < 0) return -1;
        if (!N->failed && !N->unproven && pv_check_regs(N, li) < 0) return -1;
        if (!N->failed && !N->unproven && pv_check_runtime(N, li) < 0) return -1;
    }
    if (!N->failed && !N->unproven) return pv_check_output(N);
    return 0;
}

static void net_free(PvNet *N) {
    for (int c = 0; N->col && c < N->m->d_model; c++) pv_col_free(&N->col[c]);
    free(N->col);
    free(N->bos);
    for (int r = 0; N->val_col && r < N->S->ir->n_regs; r++) free(N->val_col[r]);
    free(N->val_col);
    free(N->reg_col);
    free(N->reg_size);
    free(N->reg_model);
    free(N->last_write);
}

/* FNV-1a of the residual stream as the proof left it: every column's table and the BOS row. */
static uint64_t net_digest(const PvNet *N) {
    uint64_t h = 1469598103934665603ull;
    for (int c = 0; c <= N->m->d_model; c++) {
        const unsigned char *b = c < N->m->d_model ? (const unsigned char *)N->col[c].v : (const unsigned char *)N->bos;
        size_t n = (c < N->m->d_model ? (size_t)N->col[c].n : (size_t)N->m->d_model) * sizeof(TfIv);
        PvDeps d = c < N->m->d_model ? N->col[c].deps : 0;
        for (size_t i = 0; i < sizeof d; i++) h = (h ^ (d >> (8 * i) & 0xff)) * 1099511628211ull;
        for (size_t i = 0; b && i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    }
    return h;
}

static int prove_run(const TfModel *m, int threads, int naive, TfProof *P, uint64_t *digest, TfError *err);

int prove_model(const TfModel *m, TfProof *P, TfError *err) { return prove_run(m, 0, 0, P, NULL, err); }

int prove_model_threads(const TfModel *m, int threads, TfProof *P, TfError *err) {
    return prove_run(m, threads, 0, P, NULL, err);
}

int pv_prove_twin(const TfModel *m, int naive, TfProof *P, uint64_t *digest, TfError *err) {
    *digest = 0;
    return prove_run(m, 1, naive, P, digest, err);
}

/* The proof runs with float results below the smallest normal flushed to
 * zero (FTZ; not DAZ: subnormal weights are still read as they are).
 * Every bound the validator computes is moved outward by 2^-1022 at least
 * (compiler/interval.h), more than a flushed result's error, so the proof
 * stays sound; and it runs about three times as fast: interval ends of
 * +-2^-1022 times a weight are subnormal, which x86 computes in microcode.
 * The caller's mode is restored (the counterexample search after it runs
 * the engine, which must round as tfrun does); threads the proof starts
 * inherit the mode. */
#if defined(__SSE2__)
#include <xmmintrin.h>
static unsigned ftz_enter(void) {
    unsigned s = _mm_getcsr();
    _mm_setcsr(s | 0x8000u);
    return s;
}
static void ftz_leave(unsigned s) { _mm_setcsr(s); }
#else
static unsigned ftz_enter(void) { return 0; }
static void ftz_leave(unsigned s) { (void)s; }
#endif

static int prove_body(const TfModel *m, int threads, int naive, TfProof *P, uint64_t *digest, TfError *err);

static int prove_run(const TfModel *m, int threads, int naive, TfProof *P, uint64_t *digest, TfError *err) {
    unsigned mode = ftz_enter();
    int rc = prove_body(m, threads, naive, P, digest, err);
    ftz_leave(mode);
    return rc;
}

static int prove_body(const TfModel *m, int threads, int naive, TfProof *P, uint64_t *digest, TfError *err) {
    memset(P, 0, sizeof *P);
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1 : n > PV_MAX_THREADS ? PV_MAX_THREADS : (int)n;
    }
    P->fail_layer = -1;
    if (!m->source) {
        tf_error_set(err, "the file carries no source: there is no program to prove it against");
        return -1;
    }
    PvSem S;
    if (pv_sem_load(&S, m, m->source, strlen(m->source), err) < 0) {
        pv_sem_free(&S);
        return -1;
    }
    if (S.unsupported[0] && pv_seed_program(&S)) {
        int rc = pv_seed_prove(m, &S, P);
        if (rc < 0) tf_error_set(err, "out of memory");
        pv_sem_free(&S);
        return rc;
    }
    if (S.unsupported[0]) {
        P->verdict = TF_PROOF_UNPROVEN;
        P->fail_line = S.unsupported_line;
        snprintf(P->reason, sizeof P->reason, "line %d: %s", S.unsupported_line, S.unsupported);
        pv_sem_free(&S);
        return 0;
    }
    PvNet N = {.m = m, .S = &S, .P = P, .maxlen = S.ir->maxlen, .threads = threads, .naive = naive};
    int rc = -1;
    N.col = calloc((size_t)m->d_model, sizeof *N.col);
    N.bos = calloc((size_t)m->d_model, sizeof *N.bos);
    if (N.col && N.bos && map_registers(&N) == 0 && last_writes(&N) == 0 && embed(&N) == 0)
        rc = prove_layers(&N);
    if (rc == 0 && digest) *digest = net_digest(&N);
    if (rc < 0) tf_error_set(err, "out of memory (or a table of more than 2^22 combinations)");
    net_free(&N);
    pv_sem_free(&S);
    return rc;
}

void prove_free(TfProof *P) {
    for (int i = 0; i < P->n_lines; i++) free(P->lines[i]);
    free(P->lines);
    free(P->any_len), free(P->any_prompt), free(P->any_expect);
    memset(P, 0, sizeof *P);
}
