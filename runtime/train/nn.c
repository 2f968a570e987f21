/* nn.c: the trainer's numerical layers (nn.h): one softmax, one LayerNorm,
 * attention over a sequence and over selected rows, the cross-entropy; each
 * fast kernel beside its naive twin. */
#include "nn.h"
#include "kernels.h" /* runtime/engine: softmax_naive, softmax_forward, layernorm_forward */

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "exp_vec.h"   /* runtime/engine */
#include "vec8.h"      /* runtime/engine: dot8, sum8 */
#include "vec_psabi.h" /* runtime/engine: the ABI note on 64-byte vectors, off */

/* ---- training kernels (kernels.h: "training") ------------------------------ */

/* Vectors of 8 floats (GCC's and clang's vector extension), so that the
 * loops below keep their sums in registers. LayerNorm's partial sums are SV
 * = 16 lanes (two vectors of 8), combined in the fixed order ((h0 + h4) +
 * (h1 + h5)) + ((h2 + h6) + (h3 + h7)), h[k] = lane k + lane k + 8, by
 * shuffles. Vectors go to functions by pointer: GCC notes an ABI change for
 * one passed by value. */
#define SV 16
typedef float F8 __attribute__((vector_size(8 * sizeof(float))));

static inline __attribute__((always_inline)) float lanes16_sum(const F8 *lo, const F8 *hi) {
    F8 h = *lo + *hi;
    F8 g = h + __builtin_shufflevector(h, h, 4, 5, 6, 7, 0, 1, 2, 3);
    F8 f = g + __builtin_shufflevector(g, g, 1, 0, 3, 2, 1, 0, 3, 2);
    return f[0] + f[2];
}

/* y[i] += alpha * x[i] */
static inline void axpy(float *restrict y, float alpha, const float *restrict x, int n) {
    for (int i = 0; i < n; i++) y[i] += alpha * x[i];
}

/* ---- softmax ---------------------------------------------------------------- */

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
        F8 an0 = {0}, an1 = {0}, ax0 = {0}, ax1 = {0};
        int c0 = 0;
        for (; c0 + SV <= C; c0 += SV) {
            F8 x0, x1, d0, d1, w0, w1;
            memcpy(&x0, x + c0, sizeof x0), memcpy(&x1, x + c0 + 8, sizeof x1);
            memcpy(&d0, dy + c0, sizeof d0), memcpy(&d1, dy + c0 + 8, sizeof d1);
            memcpy(&w0, weight + c0, sizeof w0), memcpy(&w1, weight + c0 + 8, sizeof w1);
            F8 xh0 = (x0 - m) * s, xh1 = (x1 - m) * s, dn0 = d0 * w0, dn1 = d1 * w1;
            an0 += dn0, an1 += dn1;
            ax0 += dn0 * xh0, ax1 += dn1 * xh1;
        }
        if (c0 < C) {
            float an[SV] = {0}, ax[SV] = {0};
            for (int k = 0; c0 + k < C; k++) {
                float xhat = (x[c0 + k] - m) * s, dn = dy[c0 + k] * weight[c0 + k];
                an[k] = dn;
                ax[k] = dn * xhat;
            }
            F8 t;
            memcpy(&t, an, sizeof t), an0 += t, memcpy(&t, an + 8, sizeof t), an1 += t;
            memcpy(&t, ax, sizeof t), ax0 += t, memcpy(&t, ax + 8, sizeof t), ax1 += t;
        }
        float dmean = lanes16_sum(&an0, &an1), dmean_x = lanes16_sum(&ax0, &ax1);
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

/* ---- attention over one head's columns (sequences up to NN_SHORT_T) -----------
 * The fast attention kernels work on one head at a time. Scores and their
 * gradients run over positions: the keys and values turned into columns
 * (kt [D, TP]: feature d of every position together, TP = T rounded up to
 * a multiple of 16, zero beyond T), so that each inner loop is whole
 * vectors of 16 positions, its sums held in registers (columns_dot). A
 * row's output and its query's gradient run over features: the value or
 * key rows weighted and added, 8 features to a vector (add_weighted_rows).
 * The naive twins above run over the D = 8 or so features of one position.
 * Gradients for keys and values gather as columns and are added back at the
 * end. Weights past a row's last live position are 0, so the padding adds
 * nothing. Nothing here sums across a vector's lanes but the softmax and
 * one dot product per row. */

#define VEC 16
#define FOR_TP(j, TP) for (int j##0 = 0; j##0 < (TP); j##0 += VEC) for (int j = j##0; j < j##0 + VEC; j++)

static int padded(int T) { return (T + VEC - 1) / VEC * VEC; }

size_t nn_attention_scratch_floats(int T, int D, int DV) {
    return (size_t)padded(T) * (2 * (size_t)D + 2 * (size_t)DV + 5 * TF_SOFTMAX_ROWS);
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

/* o[0..n) = (add ? o[0..n) : 0) + sum over j < rows of w[j] x_j, x's rows
 * `stride` apart: the rows weighted and added in blocks of 8 features, each
 * block's sums kept in four vectors across the rows (rows j, j + 4, ... in
 * each), combined in a fixed order; no sum across a vector's lanes. */
static void add_weighted_rows(float *restrict o, const float *restrict w,
                              const float *restrict x, int stride, int rows, int n, int add) {
    int e0 = 0;
    for (; e0 + 8 <= n; e0 += 8) {
        F8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, x0, x1, x2, x3, oe;
        const float *restrict xe = x + e0;
        int j = 0;
        for (; j + 4 <= rows; j += 4) {
            memcpy(&x0, xe + (long)j * stride, sizeof x0);
            memcpy(&x1, xe + (long)(j + 1) * stride, sizeof x1);
            memcpy(&x2, xe + (long)(j + 2) * stride, sizeof x2);
            memcpy(&x3, xe + (long)(j + 3) * stride, sizeof x3);
            a0 += w[j] * x0, a1 += w[j + 1] * x1, a2 += w[j + 2] * x2, a3 += w[j + 3] * x3;
        }
        for (; j < rows; j++) {
            memcpy(&x0, xe + (long)j * stride, sizeof x0);
            a0 += w[j] * x0;
        }
        oe = (a0 + a1) + (a2 + a3);
        if (add) {
            F8 o0;
            memcpy(&o0, o + e0, sizeof o0);
            oe = o0 + oe;
        }
        memcpy(o + e0, &oe, sizeof oe);
    }
    if (e0 < n) {
        float acc[8] = {0};
        for (int j = 0; j < rows; j++)
            for (int k = 0; k < n - e0; k++) acc[k] += w[j] * x[(long)j * stride + e0 + k];
        for (int k = 0; k < n - e0; k++) o[e0 + k] = add ? o[e0 + k] + acc[k] : acc[k];
    }
}

/* s[j] = sum over i < n of c[i] xt[i, j] (xt's rows TP apart), in order of
 * i, for j in [0, M) (M a multiple of VEC): 16 positions at a time, their
 * sums held in registers across the rows. */
static void columns_dot(float *restrict s, const float *restrict c, const float *restrict xt,
                        int n, int M, int TP) {
    for (int j0 = 0; j0 < M; j0 += VEC) {
        F8 a0 = {0}, a1 = {0}, x0, x1;
        for (int i = 0; i < n; i++) {
            const float *restrict xr = xt + (long)i * TP + j0;
            memcpy(&x0, xr, sizeof x0);
            memcpy(&x1, xr + 8, sizeof x1);
            a0 += c[i] * x0, a1 += c[i] * x1;
        }
        memcpy(s + j0, &a0, sizeof a0);
        memcpy(s + j0 + 8, &a1, sizeof a1);
    }
}

/* Rows [0, R) of one head's forward pass: row r's query at q + r qs, its
 * position pos[r] (pos NULL: r, every position a query), the key columns kt
 * (TP apart), the value rows vh (vs apart). Row r's scaled scores go to pre
 * + r pstride (all T when pos is NULL, else those it sees, 0 beyond), its
 * weights to att + r pstride, its output to out + r vs. The rows go
 * TF_SOFTMAX_ROWS at a time through S (that many rows of TP floats), so
 * that their softmaxes run side by side (softmax_exp_rows). */
static void head_forward(float *restrict out, float *restrict pre, float *restrict att,
                         long pstride, float *restrict S, const float *restrict q, int qs,
                         const float *restrict kt, const float *restrict vh, int vs,
                         const int *pos, int causal, int R, int T, int TP, int D, int DV,
                         float scale) {
    for (int r0 = 0; r0 < R; r0 += TF_SOFTMAX_ROWS) {
        const int cnt = R - r0 < TF_SOFTMAX_ROWS ? R - r0 : TF_SOFTMAX_ROWS;
        int nr[TF_SOFTMAX_ROWS];
        float sums[TF_SOFTMAX_ROWS];
        for (int c = 0; c < cnt; c++) {
            const int r = r0 + c;
            float *restrict s = S + (long)c * TP, *restrict pr = pre + r * pstride;
            nr[c] = causal ? (pos ? pos[r] : r) + 1 : T;
            const int np = pos ? nr[c] : T; /* the full pass saves every score */
            columns_dot(s, q + (long)r * qs, kt, D, TP, TP);
            // pr from s before s is scaled in place: a plain copy would become
            // a call to memcpy, which costs more than the row.
            for (int j = 0; j < np; j++) pr[j] = s[j] * scale;
            for (int j = np; j < T; j++) pr[j] = 0.0f; /* masked: not computed */
            FOR_TP(j, TP) s[j] *= scale;
        }
        softmax_exp_rows(S, cnt, TP, nr, sums); /* masked weights become 0 */
        for (int c = 0; c < cnt; c++) {
            const int r = r0 + c;
            const float inv = 1.0f / sums[c], *restrict s = S + (long)c * TP;
            float *restrict a = att + r * pstride;
            for (int j = 0; j < T; j++) a[j] = s[j] * inv;
            add_weighted_rows(out + (long)r * vs, a, vh, vs, nr[c], DV, 0);
        }
    }
}

/* Rows [0, R) of one head's backward pass: row r's query at q + r qs and
 * position pos[r] (pos NULL: r), its weights at att + r pstride, its
 * output's gradient at dout + r vs, its scores' own gradient (optional) at
 * dpre + r pstride; accumulates into dq + r qs (from the key rows kh, qs
 * apart) and the columns dkt, dvt (TP apart), against the value columns vt.
 * The rows go TF_SOFTMAX_ROWS at a time through w's A, DA, G and E (that
 * many rows of TP floats each): first every row's da and value gradient,
 * then every row's score gradient g, query and key gradients, so that the
 * rows' chains of dependent operations overlap. Rows add to dkt and dvt in
 * order. Row r reads positions [0, M) (M a multiple of VEC, past its last
 * non-zero weight and extra gradient; at most TP). */
static void head_backward(float *restrict dq, float *restrict dkt, float *restrict dvt,
                          float *restrict A, float *restrict DA, float *restrict G,
                          float *restrict E, const float *restrict att,
                          const float *restrict dpre, long pstride, const float *restrict dout,
                          int vs, const float *restrict q, int qs, const float *restrict kh,
                          const float *restrict vt, const int *pos, int causal, int R, int T,
                          int TP, int D, int DV, float scale) {
    for (int r0 = 0; r0 < R; r0 += TF_SOFTMAX_ROWS) {
        const int cnt = R - r0 < TF_SOFTMAX_ROWS ? R - r0 : TF_SOFTMAX_ROWS;
        int Ms[TF_SOFTMAX_ROWS];
        // da[j] = go . v_j; dv_j += a[j] go
        for (int c = 0; c < cnt; c++) {
            const int r = r0 + c, n = causal ? (pos ? pos[r] : r) + 1 : T;
            const int M = dpre ? TP : padded(n);
            float *restrict ap = A + (long)c * TP, *restrict da = DA + (long)c * TP;
            const float *restrict go = dout + (long)r * vs;
            Ms[c] = M;
            pad_row(ap, att + r * pstride, n, M);
            if (dpre) pad_row(E + (long)c * TP, dpre + r * pstride, T, TP);
            columns_dot(da, go, vt, DV, M, TP);
            for (int e = 0; e < DV; e++) {
                const float ge = go[e];
                float *restrict dvr = dvt + (long)e * TP;
                FOR_TP(j, M) dvr[j] += ap[j] * ge;
            }
        }
        // dpre[j] = a[j] (da[j] - sum a da) (+ extra); dq_i += scale dpre k_j, dk_j += scale dpre q_i
        for (int c = 0; c < cnt; c++) {
            const int r = r0 + c, M = Ms[c];
            const float *restrict ap = A + (long)c * TP, *restrict da = DA + (long)c * TP;
            const float *restrict ep = E + (long)c * TP, *restrict qi = q + (long)r * qs;
            float *restrict g = G + (long)c * TP;
            const float dot = dot8(da, ap, M);
            if (dpre) FOR_TP(j, M) g[j] = (ap[j] * (da[j] - dot) + ep[j]) * scale;
            else FOR_TP(j, M) g[j] = ap[j] * (da[j] - dot) * scale;
            add_weighted_rows(dq + (long)r * qs, g, kh, qs, M < T ? M : T, D, 1);
            for (int d = 0; d < D; d++) {
                const float qd = qi[d];
                float *restrict dkr = dkt + (long)d * TP;
                FOR_TP(j, M) dkr[j] += g[j] * qd;
            }
        }
    }
}

/* Scratch of the fast kernels: kt, dkt [D, TP]; vt, dvt [DV, TP]; rows, and the
 * backward pass's A, DA, G, E [TF_SOFTMAX_ROWS, TP]. */
typedef struct HeadScratch {
    float *kt, *vt, *dkt, *dvt, *rows, *A, *DA, *G, *E;
} HeadScratch;

static HeadScratch head_scratch(float *s, int TP, int D, int DV) {
    const long B = (long)TF_SOFTMAX_ROWS * TP;
    HeadScratch h;
    h.kt = s, h.dkt = h.kt + (long)D * TP, h.vt = h.dkt + (long)D * TP;
    h.dvt = h.vt + (long)DV * TP, h.rows = h.dvt + (long)DV * TP;
    h.A = h.rows + B, h.DA = h.A + B, h.G = h.DA + B, h.E = h.G + B;
    return h;
}

void nn_attention_forward(float *out, float *preatt, float *att, float *scratch, const float *q,
                          const float *k, const float *v, int T, int H, int D, int DV,
                          float scale, int causal) {
    const int qs = H * D, vs = H * DV, TP = padded(T);
    HeadScratch w = head_scratch(scratch, TP, D, DV);
    for (int h = 0; h < H; h++) {
        to_columns(w.kt, k + h * D, T, TP, D, qs);
        head_forward(out + h * DV, preatt + (long)h * T * T, att + (long)h * T * T, T, w.rows,
                     q + h * D, qs, w.kt, v + h * DV, vs, NULL, causal, T, T, TP, D, DV, scale);
    }
}

void nn_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                        const float *dpreatt, const float *q, const float *k, const float *v,
                        const float *att, int T, int H, int D, int DV, float scale, int causal) {
    const int qs = H * D, vs = H * DV, TP = padded(T);
    HeadScratch w = head_scratch(scratch, TP, D, DV);
    for (int h = 0; h < H; h++) {
        to_columns(w.vt, v + h * DV, T, TP, DV, vs);
        memset(w.dkt, 0, (size_t)D * (size_t)TP * sizeof(float));
        memset(w.dvt, 0, (size_t)DV * (size_t)TP * sizeof(float));
        head_backward(dq + h * D, w.dkt, w.dvt, w.A, w.DA, w.G, w.E, att + (long)h * T * T,
                      dpreatt ? dpreatt + (long)h * T * T : NULL, T, dout + h * DV, vs, q + h * D,
                      qs, k + h * D, w.vt, NULL, causal, T, T, TP, D, DV, scale);
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
        head_forward(out + h * DV, preatt + (long)h * T, att + (long)h * T, (long)H * T, w.rows,
                     q + h * D, qs, w.kt, v + h * DV, vs, pos, causal, R, T, TP, D, DV, scale);
    }
}

void nn_attention_rows_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                             const float *q, const float *k, const float *v, const float *att,
                             const int *pos, int R, int T, int H, int D, int DV, float scale,
                             int causal) {
    const int qs = H * D, vs = H * DV, TP = padded(T);
    HeadScratch w = head_scratch(scratch, TP, D, DV);
    for (int h = 0; h < H; h++) {
        to_columns(w.vt, v + h * DV, T, TP, DV, vs);
        memset(w.dkt, 0, (size_t)D * (size_t)TP * sizeof(float));
        memset(w.dvt, 0, (size_t)DV * (size_t)TP * sizeof(float));
        head_backward(dq + h * D, w.dkt, w.dvt, w.A, w.DA, w.G, w.E, att + (long)h * T, NULL,
                      (long)H * T, dout + h * DV, vs, q + h * D, qs, k + h * D, w.vt, pos, causal,
                      R, T, TP, D, DV, scale);
        add_columns(dk + h * D, w.dkt, T, TP, D, qs);
        add_columns(dv + h * DV, w.dvt, T, TP, DV, vs);
    }
}

/* ---- attention across sequences ----------------------------------------------
 * The group kernels (nn.h) run up to NN_LANES sequences of one length side
 * by side, one sequence per lane of a vector (GCC's and clang's vector
 * extension): the group's queries, keys and values, every head's, are
 * gathered into lane-minor arrays (Q[h][r][d] holds feature d of head h's
 * query row r of every sequence), and every loop is over rows, positions
 * and features with a whole vector per step: no padding, no masked work,
 * no sum across lanes. Each lane runs the same operations in the same order
 * whichever group or lane its sequence is in, so a sequence's results do
 * not depend on the others (tests/test_train.c,
 * test_attention_group_lanes_independent), and the trainer's results do not
 * depend on how its batch is split. The naive twins are the one-sequence
 * kernels' above. */

/* may_alias: the lane arrays are written a float at a time (gather), read
 * a vector at a time. */
typedef float Lv __attribute__((vector_size(NN_LANES * sizeof(float)), may_alias));
typedef int32_t LvMask __attribute__((vector_size(NN_LANES * sizeof(float))));
#define LV_SEL(m, a, b) EXP_VEC_SEL(Lv, LvMask, m, a, b)
#define LV(p) (*(Lv *)(p)) /* scratch is aligned: see lanes_base */

/* The lane arrays of one group, in scratch: every head's queries, keys,
 * values, their gradients and the outputs (head h's block first, then the
 * rows, then the features: Q[h][r][d]); and one row's S, A, X [T]. */
typedef struct GroupScratch {
    float *Q, *K, *V, *dQ, *dK, *dV, *O, *S, *A, *X;
    float *row1, *row2; /* [max(D, DV)]: a row's sums at any head width (HEAD_WIDTHS) */
} GroupScratch;

/* Per lane: Q, dQ [R][H D] and O [R][H DV] with R <= T; K, dK [T][H D];
 * V, dV [T][H DV]; S, A, X [T]; row1, row2 [max(D, DV)]; and one vector
 * more, to align the start. */
size_t nn_attention_group_scratch_floats(int T, int H, int D, int DV) {
    const size_t HD = (size_t)H * D, HV = (size_t)H * DV, W = (size_t)(D > DV ? D : DV);
    return (size_t)NN_LANES * ((size_t)T * (4 * HD + 3 * HV + 3) + 2 * W + 1);
}

/* scratch rounded up to a vector's alignment. */
static float *lanes_base(float *scratch) {
    uintptr_t a = (uintptr_t)scratch, al = sizeof(Lv);
    return (float *)((a + al - 1) / al * al);
}

static GroupScratch group_scratch(float *scratch, int R, int T, int H, int D, int DV) {
    GroupScratch g;
    const long L = NN_LANES, HD = (long)H * D, HV = (long)H * DV;
    g.Q = lanes_base(scratch);
    g.dQ = g.Q + L * R * HD, g.O = g.dQ + L * R * HD;
    g.K = g.O + L * R * HV, g.dK = g.K + L * T * HD;
    g.V = g.dK + L * T * HD, g.dV = g.V + L * T * HV;
    g.S = g.dV + L * T * HV, g.A = g.S + L * T, g.X = g.A + L * T;
    g.row1 = g.X + L * T, g.row2 = g.row1 + L * (D > DV ? D : DV);
    return g;
}

/* The 16 x 16 transpose of x (rows of one vector each), in place: four
 * rounds, each swapping the off-diagonal b x b blocks of every 2b x 2b
 * block (b = 8, 4, 2, 1), two shuffles per pair of rows. */
#define TRANSPOSE_ROUND(b, ...)                                                                  \
    for (int i_ = 0; i_ < 16; i_++)                                                              \
        if (!(i_ & (b))) {                                                                       \
            Lv lo_ = x[i_], hi_ = x[i_ + (b)];                                                   \
            TRANSPOSE_PAIR(__VA_ARGS__);                                                         \
        }
static inline __attribute__((always_inline)) void transpose16(Lv *x) {
    static_assert(NN_LANES == 16, "transpose16 is for 16 lanes");
#define TRANSPOSE_PAIR(...) __VA_ARGS__
    TRANSPOSE_ROUND(8, x[i_] = __builtin_shufflevector(lo_, hi_, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17,
                                                       18, 19, 20, 21, 22, 23);
                    x[i_ + 8] = __builtin_shufflevector(lo_, hi_, 8, 9, 10, 11, 12, 13, 14, 15,
                                                        24, 25, 26, 27, 28, 29, 30, 31))
    TRANSPOSE_ROUND(4, x[i_] = __builtin_shufflevector(lo_, hi_, 0, 1, 2, 3, 16, 17, 18, 19, 8,
                                                       9, 10, 11, 24, 25, 26, 27);
                    x[i_ + 4] = __builtin_shufflevector(lo_, hi_, 4, 5, 6, 7, 20, 21, 22, 23, 12,
                                                        13, 14, 15, 28, 29, 30, 31))
    TRANSPOSE_ROUND(2, x[i_] = __builtin_shufflevector(lo_, hi_, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9,
                                                       24, 25, 12, 13, 28, 29);
                    x[i_ + 2] = __builtin_shufflevector(lo_, hi_, 2, 3, 18, 19, 6, 7, 22, 23, 10,
                                                        11, 26, 27, 14, 15, 30, 31))
    TRANSPOSE_ROUND(1, x[i_] = __builtin_shufflevector(lo_, hi_, 0, 16, 2, 18, 4, 20, 6, 22, 8,
                                                       24, 10, 26, 12, 28, 14, 30);
                    x[i_ + 1] = __builtin_shufflevector(lo_, hi_, 1, 17, 3, 19, 5, 21, 7, 23, 9,
                                                        25, 11, 27, 13, 29, 15, 31))
#undef TRANSPOSE_PAIR
}
#undef TRANSPOSE_ROUND

/* Where feature c (of W = heads x w) of row i lives in a lane array of n
 * rows: head c / w's block, row i, feature c % w. */
static inline long lane_index(int i, int c, int n, int w) {
    return (((long)(c / w) * n + i) * w + c % w) * NN_LANES;
}

/* dst (lanes) = rows row[g] + i, features [0, W) (in heads of w) of src
 * (rows stride apart) for each sequence g, i < n; lanes past G are 0.
 * Sixteen features at a time by a transpose. */
static void gather(float *restrict dst, const float *restrict src, const long *row, int G, int n,
                   long stride, int W, int w) {
    Lv x[16];
    for (int i = 0; i < n; i++) {
        int c0 = 0;
        for (; c0 + 16 <= W; c0 += 16) {
            for (int g = 0; g < 16; g++)
                if (g < G) memcpy(&x[g], src + (row[g] + i) * stride + c0, sizeof x[g]);
                else x[g] = (Lv){0};
            transpose16(x);
            for (int c = 0; c < 16; c++) LV(dst + lane_index(i, c0 + c, n, w)) = x[c];
        }
        for (; c0 < W; c0++) {
            float *d = dst + lane_index(i, c0, n, w);
            for (int g = 0; g < NN_LANES; g++) d[g] = g < G ? src[(row[g] + i) * stride + c0] : 0.0f;
        }
    }
}

/* The reverse: rows row[g] + i of dst (features [0, W)) = src's lanes, or
 * += with add. */
static void scatter(float *restrict dst, const float *restrict src, const long *row, int G, int n,
                    long stride, int W, int w, int add) {
    Lv x[16];
    for (int i = 0; i < n; i++) {
        int c0 = 0;
        for (; c0 + 16 <= W; c0 += 16) {
            for (int c = 0; c < 16; c++) x[c] = LV(src + lane_index(i, c0 + c, n, w));
            transpose16(x);
            for (int g = 0; g < G; g++) {
                float *d = dst + (row[g] + i) * stride + c0;
                if (add) {
                    Lv y;
                    memcpy(&y, d, sizeof y);
                    x[g] += y;
                }
                memcpy(d, &x[g], sizeof x[g]);
            }
        }
        for (; c0 < W; c0++) {
            const float *s = src + lane_index(i, c0, n, w);
            for (int g = 0; g < G; g++) {
                float *d = dst + (row[g] + i) * stride + c0;
                *d = add ? *d + s[g] : s[g];
            }
        }
    }
}

/* A row of G lanes at p (G floats apart: the scores' layout, nn.h). */
static inline void lanes_put(float *restrict p, const Lv *v, int G) {
    if (G == NN_LANES) memcpy(p, v, sizeof *v);
    else for (int g = 0; g < G; g++) p[g] = (*v)[g];
}

static inline void lanes_get(Lv *v, const float *restrict p, int G) {
    if (G == NN_LANES) {
        memcpy(v, p, sizeof *v);
    } else {
        *v = (Lv){0};
        for (int g = 0; g < G; g++) (*v)[g] = p[g];
    }
}

/* Where query row r of head h keeps its scores: nn.h's layout. */
static inline long scores_at(const NnGroup *grp, const int *pos, int R, int T, int H, int h,
                             int r) {
    return grp->at + (pos ? (long)r * H + h : (long)h * R + r) * T * grp->G;
}

/* The head functions below are compiled for D = DV = 4, 8 and 16 as
 * constants (HEAD_WIDTHS), so that a row's query, output and gradient
 * vectors stay in registers, and once for any width. The same operations
 * in the same order either way. */

/* Scores, weights and outputs of head h for the group's query rows (O:
 * DV vectors, the sums of a row). */
static inline __attribute__((always_inline)) void
group_head_forward(float *preatt, float *att, const GroupScratch *w,
                   const NnGroup *grp, const int *pos, int R, int T, int H, int h, int D, int DV,
                   float scale, int causal, int all_scores, Lv *restrict O) {
    const int G = grp->G;
    Lv *restrict S = (Lv *)w->S, *restrict A = (Lv *)w->A;
    const Lv *restrict K = (const Lv *)w->K + (long)h * T * D;
    const Lv *restrict V = (const Lv *)w->V + (long)h * T * DV;
    for (int r = 0; r < R; r++) {
        const int i = pos ? pos[r] : r, n = causal ? i + 1 : T, ns = all_scores ? T : n;
        const Lv *restrict q = (const Lv *)w->Q + ((long)h * R + r) * D;
        const long at = scores_at(grp, pos, R, T, H, h, r);
        Lv mx = (Lv){0} - INFINITY;
        for (int j = 0; j < ns; j++) {
            Lv dot = {0};
            for (int d = 0; d < D; d++) dot += q[d] * K[(long)j * D + d];
            S[j] = dot * scale;
            if (j < n) mx = LV_SEL(S[j] > mx, S[j], mx);
        }
        if (preatt) {
            for (int j = 0; j < ns; j++) lanes_put(preatt + at + (long)j * G, &S[j], G);
            memset(preatt + at + (long)ns * G, 0, (size_t)(T - ns) * G * sizeof(float));
        }
        Lv sum = {0};
        for (int j = 0; j < n; j++) {
            Lv e;
            EXP_VEC_LANES(Lv, LvMask, e, S[j] - mx);
            A[j] = e;
            sum += e;
        }
        const Lv inv = 1.0f / sum;
        for (int e = 0; e < DV; e++) O[e] = (Lv){0};
        for (int j = 0; j < n; j++) {
            const Lv a = A[j] * inv;
            lanes_put(att + at + (long)j * G, &a, G);
            for (int e = 0; e < DV; e++) O[e] += a * V[(long)j * DV + e];
        }
        memset(att + at + (long)n * G, 0, (size_t)(T - n) * G * sizeof(float)); /* masked */
        Lv *restrict o = (Lv *)w->O + ((long)h * R + r) * DV;
        for (int e = 0; e < DV; e++) o[e] = O[e];
    }
}

/* Head h's backward pass for the group's query rows (as forward; GO, dQ:
 * DV and D vectors, a row's output gradient and query gradient). */
static inline __attribute__((always_inline)) void
group_head_backward(const float *att, const GroupScratch *w,
                    const NnGroup *grp, const int *pos, int R, int T, int H, int h, int D, int DV,
                    float scale, int causal, Lv *restrict GO, Lv *restrict dQ) {
    const int G = grp->G;
    const int extra = grp->extra != NULL;
    Lv *restrict A = (Lv *)w->A, *restrict DA = (Lv *)w->S, *restrict E = (Lv *)w->X;
    Lv *restrict dK = (Lv *)w->dK + (long)h * T * D, *restrict dV = (Lv *)w->dV + (long)h * T * DV;
    const Lv *restrict K = (const Lv *)w->K + (long)h * T * D;
    const Lv *restrict V = (const Lv *)w->V + (long)h * T * DV;
    for (int r = 0; r < R; r++) {
        const int i = pos ? pos[r] : r, n = causal ? i + 1 : T, M = extra ? T : n;
        const Lv *restrict q = (const Lv *)w->Q + ((long)h * R + r) * D;
        const Lv *restrict go = (const Lv *)w->O + ((long)h * R + r) * DV;
        const long at = scores_at(grp, pos, R, T, H, h, r);
        for (int j = 0; j < n; j++) lanes_get(&A[j], att + at + (long)j * G, G);
        for (int j = 0; extra && j < T; j++) /* laid out as the scores, from 0 */
            lanes_get(&E[j], grp->extra + (at - grp->at) + (long)j * G, G);
        for (int e = 0; e < DV; e++) GO[e] = go[e];
        // da[j] = dout . v_j; dv_j += a[j] dout; dot = sum a da
        Lv dot = {0};
        for (int j = 0; j < n; j++) {
            Lv da = {0};
            for (int e = 0; e < DV; e++) {
                da += GO[e] * V[(long)j * DV + e];
                dV[(long)j * DV + e] += A[j] * GO[e];
            }
            DA[j] = da;
            dot += A[j] * da;
        }
        // g = (a (da - dot) + extra) scale; dq += g k_j; dk_j += g q
        for (int d = 0; d < D; d++) dQ[d] = (Lv){0};
        for (int j = 0; j < M; j++) {
            Lv gj = {0};
            if (j < n) gj = A[j] * (DA[j] - dot);
            if (extra) gj += E[j];
            gj *= scale;
            for (int d = 0; d < D; d++) {
                dQ[d] += gj * K[(long)j * D + d];
                dK[(long)j * D + d] += gj * q[d];
            }
        }
        Lv *restrict dq = (Lv *)w->dQ + ((long)h * R + r) * D;
        for (int d = 0; d < D; d++) dq[d] = dQ[d];
    }
}

/* HEAD_WIDTHS(CALL): CALL(W) (a block) with W a constant where D = DV = W is one of
 * the widths compiled apart, else CALL(0) (any width). */
#define HEAD_WIDTHS(CALL)                                                                        \
    do {                                                                                         \
        if (D == 8 && DV == 8) CALL(8)                                                           \
        else if (D == 4 && DV == 4) CALL(4)                                                      \
        else if (D == 16 && DV == 16) CALL(16)                                                   \
        else CALL(0)                                                                             \
    } while (0)

void nn_attention_group_forward(float *out, float *preatt, float *att, float *scratch,
                                const float *q, const float *k, const float *v,
                                const NnGroup *grp, const int *pos, int R, int T, int H, int D,
                                int DV, float scale, int causal, int all_scores) {
    const int qs = H * D, vs = H * DV, G = grp->G;
    GroupScratch w = group_scratch(scratch, R, T, H, D, DV);
    gather(w.Q, q, grp->qrow, G, R, qs, qs, D);
    gather(w.K, k, grp->row, G, T, qs, qs, D);
    gather(w.V, v, grp->row, G, T, vs, vs, DV);
    for (int h = 0; h < H; h++) {
#define FORWARD(W)                                                                               \
    {                                                                                            \
        Lv O_[W ? W : 1];                                                                        \
        group_head_forward(preatt, att, &w, grp, pos, R, T, H, h, W ? W : D, W ? W : DV, scale,  \
                           causal, all_scores, W ? O_ : (Lv *)w.row1);                           \
    }
        HEAD_WIDTHS(FORWARD);
#undef FORWARD
    }
    scatter(out, w.O, grp->qrow, G, R, vs, vs, DV, 0);
}

void nn_attention_group_backward(float *dq, float *dk, float *dv, float *scratch,
                                 const float *dout, const float *q, const float *k,
                                 const float *v, const float *att, const NnGroup *grp,
                                 const int *pos, int R, int T, int H, int D, int DV, float scale,
                                 int causal) {
    const int qs = H * D, vs = H * DV, G = grp->G;
    GroupScratch w = group_scratch(scratch, R, T, H, D, DV);
    gather(w.Q, q, grp->qrow, G, R, qs, qs, D);
    gather(w.K, k, grp->row, G, T, qs, qs, D);
    gather(w.V, v, grp->row, G, T, vs, vs, DV);
    gather(w.O, dout, grp->qrow, G, R, vs, vs, DV);
    memset(w.dK, 0, (size_t)T * qs * NN_LANES * sizeof(float));
    memset(w.dV, 0, (size_t)T * vs * NN_LANES * sizeof(float));
    for (int h = 0; h < H; h++) {
#define BACKWARD(W)                                                                              \
    {                                                                                            \
        Lv GO_[W ? W : 1], dQ_[W ? W : 1];                                                       \
        group_head_backward(att, &w, grp, pos, R, T, H, h, W ? W : D, W ? W : DV, scale, causal, \
                            W ? GO_ : (Lv *)w.row1, W ? dQ_ : (Lv *)w.row2);                     \
    }
        HEAD_WIDTHS(BACKWARD);
#undef BACKWARD
    }
    scatter(dq, w.dQ, grp->qrow, G, R, qs, qs, D, 1);
    scatter(dk, w.dK, grp->row, G, T, qs, qs, D, 1);
    scatter(dv, w.dV, grp->row, G, T, vs, vs, DV, 1);
}
