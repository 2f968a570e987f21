/* nn.c: the trainer's numerical layers (nn.h): one softmax, one LayerNorm,
 * attention over a sequence and over selected rows, the cross-entropy; each
 * fast kernel beside its naive twin. */
#include "nn.h"
#include "kernels.h" /* runtime/engine: softmax_naive, softmax_forward, layernorm_forward */

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>


#include "exp_vec.h" /* runtime/engine */
#include "vec8.h"    /* runtime/engine: dot8, sum8 */

/* ---- training kernels (kernels.h: "training") ------------------------------ */

/* Sum of a[i] * b[i] in eight interleaved partial sums, added in a fixed
 * order: the same result every run, and independent chains the compiler can
 * put in one vector register (a single running sum is one long chain of
 * dependent additions). */
/* y[i] += alpha * x[i] */
static inline void axpy(float *restrict y, float alpha, const float *restrict x, int n) {
    for (int i = 0; i < n; i++) y[i] += alpha * x[i];
}


/* ---- softmax ---------------------------------------------------------------- */

/* Vectors of SV floats: LayerNorm's partial sums per lane, combined in a
 * fixed order. */
#define SV 16

static float reduce_sum(const float *s) {
    float h[SV / 2];
    for (int k = 0; k < SV / 2; k++) h[k] = s[k] + s[k + SV / 2];
    return ((h[0] + h[4]) + (h[1] + h[5])) + ((h[2] + h[6]) + (h[3] + h[7]));
}

/* The softmax is the engine's softmax_forward (runtime/engine/kernels.c):
 * one for the whole runtime. */
void nn_softmax(float *x, int n) { softmax_forward(x, n); }

/* ---- LayerNorm -------------------------------------------------------------- */

void nn_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * C, *dy = dout + (long)n * C;
        float m = mean[n], s = rstd[n];
        // dnorm = dy * weight; dx = s * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat))
        // Partial sums per lane (SV of them, the last block's lanes padded
        // with 0), combined in a fixed order.
        float an[SV] = {0}, ax[SV] = {0};
        int c0 = 0;
        for (; c0 + SV <= C; c0 += SV)
            for (int k = 0; k < SV; k++) {
                float xhat = (x[c0 + k] - m) * s, dn = dy[c0 + k] * weight[c0 + k];
                an[k] += dn;
                ax[k] += dn * xhat;
            }
        for (int k = 0; c0 + k < C; k++) {
            float xhat = (x[c0 + k] - m) * s, dn = dy[c0 + k] * weight[c0 + k];
            an[k] += dn;
            ax[k] += dn * xhat;
        }
        float dmean = reduce_sum(an), dmean_x = reduce_sum(ax);
        dmean /= (float)C;
        dmean_x /= (float)C;
        if (dbias) axpy(dbias, 1.0f, dy, C);
        if (dweight) {
            float *restrict dw = dweight;
            for (int c = 0; c < C; c++) dw[c] += dy[c] * ((x[c] - m) * s);
        }
        if (dinp) {
            float *restrict di = dinp + (long)n * C;
            for (int c = 0; c < C; c++)
                di[c] += s * (dy[c] * weight[c] - dmean - ((x[c] - m) * s) * dmean_x);
        }
    }
}

/* ---- cross-entropy ---------------------------------------------------------- */

double nn_crossentropy_forward(float *probs, const float *logits, const int *targets, int M, int V) {
    double loss = 0.0;
    for (int m = 0; m < M; m++) {
        float *p = probs + (long)m * V, maxv;
        const float *x = logits + (long)m * V;
        memcpy(p, x, (size_t)V * sizeof *p);
        float sum = softmax_exp(p, V, &maxv);
        const float inv = 1.0f / sum;
        for (int v = 0; v < V; v++) p[v] *= inv;
        loss += log((double)sum) - (double)(x[targets[m]] - maxv); /* -log_softmax, stable */
    }
    return loss;
}

void nn_crossentropy_backward(float *dlogits, const float *probs, const int *targets, int M, int V,
                           float scale) {
    for (int m = 0; m < M; m++) {
        const float *p = probs + (long)m * V;
        float *d = dlogits + (long)m * V;
        for (int v = 0; v < V; v++) d[v] += (p[v] - (v == targets[m] ? 1.0f : 0.0f)) * scale;
    }
}

/* ---- attention --------------------------------------------------------------- */

void nn_attention_forward(float *out, float *preatt, float *att, const float *q, const float *k,
                       const float *v, int T, int H, int D, int DV, float scale, int causal) {
    const int qs = H * D, vs = H * DV;
    for (int h = 0; h < H; h++) {
        float *pre = preatt + (long)h * T * T, *a = att + (long)h * T * T;
        // pre[T,T] = scale * q_h[T,D] @ k_h[T,D]^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, scale, q + h * D, qs,
                    k + h * D, qs, 0.0f, pre, T);
        for (int i = 0; i < T; i++) {
            int n = causal ? i + 1 : T;
            float *row = a + (long)i * T;
            memcpy(row, pre + (long)i * T, (size_t)n * sizeof *row);
            nn_softmax(row, n);
            for (int j = n; j < T; j++) row[j] = 0.0f;
        }
        // out_h[T,DV] = att[T,T] @ v_h[T,DV]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, DV, T, 1.0f, a, T, v + h * DV,
                    vs, 0.0f, out + h * DV, vs);
    }
}

void nn_attention_forward_naive(float *out, float *preatt, float *att, const float *q,
                             const float *k, const float *v, int T, int H, int D, int DV,
                             float scale, int causal) {
    const int qs = H * D, vs = H * DV;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            float *pre = preatt + ((long)h * T + i) * T, *a = att + ((long)h * T + i) * T;
            for (int j = 0; j < T; j++) {
                float dot = 0.0f;
                for (int d = 0; d < D; d++) dot += q[(long)i * qs + h * D + d] * k[(long)j * qs + h * D + d];
                pre[j] = dot * scale;
            }
            int n = causal ? i + 1 : T;
            for (int j = 0; j < T; j++) a[j] = pre[j];
            softmax_naive(a, n);
            for (int j = n; j < T; j++) a[j] = 0.0f;
            for (int e = 0; e < DV; e++) {
                float acc = 0.0f;
                for (int j = 0; j < T; j++) acc += a[j] * v[(long)j * vs + h * DV + e];
                out[(long)i * vs + h * DV + e] = acc;
            }
        }
}

void nn_attention_backward_naive(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                              const float *dpreatt, const float *q, const float *k,
                              const float *v, const float *att, int T, int H, int D, int DV,
                              float scale, int causal) {
    const int qs = H * D, vs = H * DV;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            int n = causal ? i + 1 : T;
            const float *a = att + ((long)h * T + i) * T;
            const float *go = dout + (long)i * vs + h * DV;
            const float *qi = q + (long)i * qs + h * D;
            float *dqi = dq + (long)i * qs + h * D;
            // da[j] = dout_i . v_j (into scratch) and dv_j += a[j] dout_i
            for (int j = 0; j < n; j++) {
                scratch[j] = dot8(go, v + (long)j * vs + h * DV, DV);
                axpy(dv + (long)j * vs + h * DV, a[j], go, DV);
            }
            float dot = dot8(scratch, a, n);
            // dpre[j] = a[j] (da[j] - sum a da) (+ the extra gradient), then
            // dq_i += scale dpre[j] k_j and dk_j += scale dpre[j] q_i
            const float *extra = dpreatt ? dpreatt + ((long)h * T + i) * T : NULL;
            int m = extra ? T : n;
            for (int j = 0; j < m; j++) {
                float g = j < n ? a[j] * (scratch[j] - dot) : 0.0f;
                if (extra) g += extra[j];
                g *= scale;
                axpy(dqi, g, k + (long)j * qs + h * D, D);
                axpy(dk + (long)j * qs + h * D, g, qi, D);
            }
        }
}

void nn_attention_rows_forward_naive(float *out, float *preatt, float *att, const float *q,
                                  const float *k, const float *v, const int *pos, int R, int T,
                                  int H, int D, int DV, float scale, int causal) {
    const int qs = H * D, vs = H * DV;
    for (int r = 0; r < R; r++) {
        int n = causal ? pos[r] + 1 : T;
        for (int h = 0; h < H; h++) {
            const float *qr = q + (long)r * qs + h * D;
            float *pre = preatt + ((long)r * H + h) * T, *a = att + ((long)r * H + h) * T;
            for (int j = 0; j < n; j++) pre[j] = scale * dot8(qr, k + (long)j * qs + h * D, D);
            for (int j = n; j < T; j++) pre[j] = 0.0f; /* masked: not computed */
            memcpy(a, pre, (size_t)n * sizeof *a);
            softmax_naive(a, n);
            for (int j = n; j < T; j++) a[j] = 0.0f;
            float *o = out + (long)r * vs + h * DV;
            for (int e = 0; e < DV; e++) o[e] = 0.0f;
            for (int j = 0; j < n; j++) axpy(o, a[j], v + (long)j * vs + h * DV, DV);
        }
    }
}

void nn_attention_rows_backward_naive(float *dq, float *dk, float *dv, float *scratch,
                                   const float *dout, const float *q, const float *k,
                                   const float *v, const float *att, const int *pos, int R, int T,
                                   int H, int D, int DV, float scale, int causal) {
    const int qs = H * D, vs = H * DV;
    for (int r = 0; r < R; r++) {
        int n = causal ? pos[r] + 1 : T;
        for (int h = 0; h < H; h++) {
            const float *a = att + ((long)r * H + h) * T;
            const float *go = dout + (long)r * vs + h * DV;
            const float *qr = q + (long)r * qs + h * D;
            float *dqr = dq + (long)r * qs + h * D;
            for (int j = 0; j < n; j++) {
                scratch[j] = dot8(go, v + (long)j * vs + h * DV, DV);
                axpy(dv + (long)j * vs + h * DV, a[j], go, DV);
            }
            float dot = dot8(scratch, a, n);
            for (int j = 0; j < n; j++) {
                float g = a[j] * (scratch[j] - dot) * scale;
                axpy(dqr, g, k + (long)j * qs + h * D, D);
                axpy(dk + (long)j * qs + h * D, g, qr, D);
            }
        }
    }
}

/* ---- attention over one head's columns ---------------------------------------
 * The fast attention kernels work on one head at a time with its keys and
 * values turned into columns (kt [D, TP]: feature d of every position
 * together, TP = T rounded up to a multiple of 16, zero beyond T), so that
 * every inner loop runs over positions in whole vectors of 16, where the
 * naive twins above run over the D = 8 or so features of one position.
 * Gradients for keys and values gather in the same layout and are added
 * back at the end. Weights past a row's last live position are 0, so the
 * padding adds nothing. */

#define VEC 16
#define FOR_TP(j, TP) for (int j##0 = 0; j##0 < (TP); j##0 += VEC) for (int j = j##0; j < j##0 + VEC; j++)

static int padded(int T) { return (T + VEC - 1) / VEC * VEC; }

size_t nn_attention_scratch_floats(int T, int D, int DV) {
    return (size_t)padded(T) * (4 + 2 * (size_t)D + 2 * (size_t)DV);
}

/* xt[d, j] = x[j, d] for T rows of n features at stride `stride`; zero for
 * j in [T, TP). */
static void to_columns(float *restrict xt, const float *restrict x, int T, int TP, int n,
                       int stride) {
    for (int d = 0; d < n; d++) {
        float *restrict col = xt + (long)d * TP;
        for (int j = 0; j < T; j++) col[j] = x[(long)j * stride + d];
        for (int j = T; j < TP; j++) col[j] = 0.0f;
    }
}

/* x[j, d] += xt[d, j] */
static void add_columns(float *restrict x, const float *restrict xt, int T, int TP, int n,
                        int stride) {
    for (int j = 0; j < T; j++)
        for (int d = 0; d < n; d++) x[(long)j * stride + d] += xt[(long)d * TP + j];
}

/* A copy of a[0..n) padded with zeros to TP. */
static void pad_row(float *restrict ap, const float *restrict a, int n, int TP) {
    memcpy(ap, a, (size_t)n * sizeof *ap);
    for (int j = n; j < TP; j++) ap[j] = 0.0f;
}

/* One query row's backward pass against columns kt, vt (TP apart): ap the
 * row's weights (padded), go its output's gradient, ep (optional) the
 * scores' own gradient (padded); accumulates into dqi and the columns dkt,
 * dvt at positions [0, M) (M a multiple of VEC, past the last non-zero
 * weight and extra gradient). da and g hold TP floats. */
static void row_backward(float *restrict dqi, float *restrict dkt, float *restrict dvt,
                         float *restrict da, float *restrict g, const float *restrict ap,
                         const float *restrict go, const float *restrict ep,
                         const float *restrict qi, const float *restrict kt,
                         const float *restrict vt, int M, int TP, int D, int DV, float scale) {
    // da[j] = go . v_j; dv_j += a[j] go
    FOR_TP(j, M) da[j] = 0.0f;
    for (int e = 0; e < DV; e++) {
        const float ge = go[e], *restrict vr = vt + (long)e * TP;
        float *restrict dvr = dvt + (long)e * TP;
        FOR_TP(j, M) {
            da[j] += ge * vr[j];
            dvr[j] += ap[j] * ge;
        }
    }
    // dpre[j] = a[j] (da[j] - sum a da) (+ extra); dq_i += scale dpre k_j, dk_j += scale dpre q_i
    const float dot = dot8(da, ap, M);
    if (ep) FOR_TP(j, M) g[j] = (ap[j] * (da[j] - dot) + ep[j]) * scale;
    else FOR_TP(j, M) g[j] = ap[j] * (da[j] - dot) * scale;
    for (int d = 0; d < D; d++) {
        const float qd = qi[d];
        float *restrict dkr = dkt + (long)d * TP;
        dqi[d] += dot8(g, kt + (long)d * TP, M);
        FOR_TP(j, M) dkr[j] += g[j] * qd;
    }
}

/* Scratch of the fast kernels: da, g, ap, ep [TP]; kt, dkt [D, TP]; vt, dvt [DV, TP]. */
typedef struct HeadScratch {
    float *da, *g, *ap, *ep, *kt, *vt, *dkt, *dvt;
} HeadScratch;

static HeadScratch head_scratch(float *s, int TP, int D, int DV) {
    HeadScratch h;
    h.da = s, h.g = s + TP, h.ap = s + 2 * TP, h.ep = s + 3 * TP, h.kt = s + 4 * TP;
    h.dkt = h.kt + (long)D * TP, h.vt = h.dkt + (long)D * TP, h.dvt = h.vt + (long)DV * TP;
    return h;
}

void nn_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                        const float *dpreatt, const float *q, const float *k, const float *v,
                        const float *att, int T, int H, int D, int DV, float scale, int causal) {
    const int qs = H * D, vs = H * DV, TP = padded(T);
    HeadScratch w = head_scratch(scratch, TP, D, DV);
    for (int h = 0; h < H; h++) {
        to_columns(w.kt, k + h * D, T, TP, D, qs);
        to_columns(w.vt, v + h * DV, T, TP, DV, vs);
        memset(w.dkt, 0, (size_t)D * (size_t)TP * sizeof(float));
        memset(w.dvt, 0, (size_t)DV * (size_t)TP * sizeof(float));
        for (int i = 0; i < T; i++) {
            int n = causal ? i + 1 : T;
            pad_row(w.ap, att + ((long)h * T + i) * T, n, TP);
            if (dpreatt) pad_row(w.ep, dpreatt + ((long)h * T + i) * T, T, TP);
            row_backward(dq + (long)i * qs + h * D, w.dkt, w.dvt, w.da, w.g, w.ap,
                         dout + (long)i * vs + h * DV, dpreatt ? w.ep : NULL,
                         q + (long)i * qs + h * D, w.kt, w.vt, dpreatt ? TP : padded(n), TP, D,
                         DV, scale);
        }
        add_columns(dk + h * D, w.dkt, T, TP, D, qs);
        add_columns(dv + h * DV, w.dvt, T, TP, DV, vs);
    }
}

void nn_attention_rows_forward(float *out, float *preatt, float *att, float *scratch,
                            const float *q, const float *k, const float *v, const int *pos, int R,
                            int T, int H, int D, int DV, float scale, int causal) {
    const int qs = H * D, vs = H * DV, TP = padded(T);
    HeadScratch w = head_scratch(scratch, TP, D, DV);
    for (int h = 0; h < H; h++) {
        to_columns(w.kt, k + h * D, T, TP, D, qs);
        to_columns(w.vt, v + h * DV, T, TP, DV, vs);
        for (int r = 0; r < R; r++) {
            int n = causal ? pos[r] + 1 : T;
            const float *qr = q + (long)r * qs + h * D;
            float *pre = preatt + ((long)r * H + h) * T, *a = att + ((long)r * H + h) * T;
            float *restrict s = w.da;
            FOR_TP(j, TP) s[j] = 0.0f;
            for (int d = 0; d < D; d++) {
                const float qd = qr[d], *restrict kr = w.kt + (long)d * TP;
                FOR_TP(j, TP) s[j] += qd * kr[j];
            }
            for (int j = 0; j < n; j++) pre[j] = s[j] * scale;
            for (int j = n; j < T; j++) pre[j] = 0.0f; /* masked: not computed */
            pad_row(w.ap, pre, n, TP);
            nn_softmax(w.ap, n);
            memcpy(a, w.ap, (size_t)T * sizeof *a);
            float *o = out + (long)r * vs + h * DV;
            for (int e = 0; e < DV; e++) o[e] = dot8(w.ap, w.vt + (long)e * TP, TP);
        }
    }
}

void nn_attention_rows_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                             const float *q, const float *k, const float *v, const float *att,
                             const int *pos, int R, int T, int H, int D, int DV, float scale,
                             int causal) {
    const int qs = H * D, vs = H * DV, TP = padded(T);
    HeadScratch w = head_scratch(scratch, TP, D, DV);
    for (int h = 0; h < H; h++) {
        to_columns(w.kt, k + h * D, T, TP, D, qs);
        to_columns(w.vt, v + h * DV, T, TP, DV, vs);
        memset(w.dkt, 0, (size_t)D * (size_t)TP * sizeof(float));
        memset(w.dvt, 0, (size_t)DV * (size_t)TP * sizeof(float));
        for (int r = 0; r < R; r++) {
            int n = causal ? pos[r] + 1 : T;
            pad_row(w.ap, att + ((long)r * H + h) * T, n, TP);
            row_backward(dq + (long)r * qs + h * D, w.dkt, w.dvt, w.da, w.g, w.ap,
                         dout + (long)r * vs + h * DV, NULL, q + (long)r * qs + h * D, w.kt,
                         w.vt, padded(n), TP, D, DV, scale);
        }
        add_columns(dk + h * D, w.dkt, T, TP, D, qs);
        add_columns(dv + h * DV, w.dvt, T, TP, DV, vs);
    }
}
