/* kernels.h: the numerical building blocks of a forward pass.
 *
 * Dimension legend (as in llm.c):
 *   N  rows (positions of all sequences in a batch, stacked)
 *   C  input channels, OC output channels
 *   T  positions a query row may attend to
 *   D  head dimension of queries/keys, DV of values
 *
 * Arguments are ordered outputs, inputs, weights, sizes. Weights are in
 * PyTorch's [out, in] order. Every fast kernel has a `_naive` twin, plain
 * loops in double-free float arithmetic, that the tests compare against.
 * Kernels never allocate and never fail.
 */
#ifndef TF_KERNELS_H
#define TF_KERNELS_H

/* out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]  (bias may be NULL).
 * With accumulate != 0 the product is added to out instead of replacing it. */
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                    int C, int OC, int accumulate);
void matmul_forward_naive(float *out, const float *inp, const float *weight, const float *bias,
                          int N, int C, int OC, int accumulate);

/* In place, n values: exact GELU 0.5 x (1 + erf(x / sqrt 2)), and ReLU. */
void gelu_forward(float *x, long n);
void relu_forward(float *x, long n);

/* One query row against T keys and values (one head):
 *   out[DV] = softmax(q . k[t] * scale for t < T) @ v[t]
 * k rows are `kstride` floats apart, v rows `vstride` apart; att[T] is
 * scratch and receives the attention weights. */
void attention_row_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           int T, int D, int DV, int kstride, int vstride, float scale);
void attention_row_forward_naive(float *out, float *att, const float *q, const float *k,
                                 const float *v, int T, int D, int DV, int kstride, int vstride,
                                 float scale);

/* Index of the largest of n values; the first one on ties. */
int argmax(const float *x, int n);

#endif
