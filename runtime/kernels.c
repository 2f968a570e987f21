/* kernels.c: matmul, activations and attention, each with its naive twin. */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                    int C, int OC, int accumulate) {
    // out[N,OC] (+)= inp[N,C] @ weight[OC,C]^T, then + bias
    float beta = accumulate ? 1.0f : 0.0f;
    if (N == 1) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, OC, C, 1.0f, weight, C, inp, 1, beta, out, 1);
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C,
                    beta, out, OC);
    }
    if (bias) {
        for (int n = 0; n < N; n++) {
            float *row = out + (long)n * OC;
            for (int o = 0; o < OC; o++) row[o] += bias[o];
        }
    }
}

void matmul_forward_naive(float *out, const float *inp, const float *weight, const float *bias,
                          int N, int C, int OC, int accumulate) {
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OC; o++) {
            float acc = 0.0f;
            for (int c = 0; c < C; c++) acc += inp[(long)n * C + c] * weight[(long)o * C + c];
            float *dst = &out[(long)n * OC + o];
            *dst = (accumulate ? *dst : 0.0f) + acc + (bias ? bias[o] : 0.0f);
        }
    }
}

void gelu_forward(float *x, long n) {
    const float inv_sqrt2 = 0.70710678118654752440f;
    for (long i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * inv_sqrt2));
}

void relu_forward(float *x, long n) {
    for (long i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* Softmax in place over att[T], max-subtracted; exp of -inf is 0. */
static void softmax_inplace(float *att, int T) {
    float maxv = -INFINITY;
    for (int t = 0; t < T; t++) maxv = att[t] > maxv ? att[t] : maxv;
    float sum = 0.0f;
    for (int t = 0; t < T; t++) {
        att[t] = expf(att[t] - maxv);
        sum += att[t];
    }
    float inv = 1.0f / sum;
    for (int t = 0; t < T; t++) att[t] *= inv;
}

void attention_row_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           int T, int D, int DV, int kstride, int vstride, float scale) {
    // att[T] = scale * k[T,D] @ q[D]; out[DV] = v[T,DV]^T @ att[T]
    cblas_sgemv(CblasRowMajor, CblasNoTrans, T, D, scale, k, kstride, q, 1, 0.0f, att, 1);
    softmax_inplace(att, T);
    cblas_sgemv(CblasRowMajor, CblasTrans, T, DV, 1.0f, v, vstride, att, 1, 0.0f, out, 1);
}

void attention_row_forward_naive(float *out, float *att, const float *q, const float *k,
                                 const float *v, int T, int D, int DV, int kstride, int vstride,
                                 float scale) {
    for (int t = 0; t < T; t++) {
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += q[d] * k[(long)t * kstride + d];
        att[t] = dot * scale;
    }
    softmax_inplace(att, T);
    for (int j = 0; j < DV; j++) {
        float acc = 0.0f;
        for (int t = 0; t < T; t++) acc += att[t] * v[(long)t * vstride + j];
        out[j] = acc;
    }
}

int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}
