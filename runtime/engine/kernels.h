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

#include "error.h"

#include <stddef.h>

/* out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]  (bias may be NULL).
 * With accumulate != 0 the product is added to out instead of replacing it. */
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                    int C, int OC, int accumulate);
void matmul_forward_naive(float *out, const float *inp, const float *weight, const float *bias,
                          int N, int C, int OC, int accumulate);

/* In place, n values: exact GELU 0.5 x (1 + erf(x / sqrt 2)), and ReLU. */
void gelu_forward(float *x, long n);
void relu_forward(float *x, long n);
/* In place: the tanh GELU 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
 * GPT-2's "gelu_new"; the naive twin computes it in double. */
void gelu_tanh_forward(float *x, long n);
void gelu_tanh_forward_naive(float *x, long n);

/* One query row against T keys and values (one head):
 *   out[DV] = softmax(q . k[t] * scale for t < T) @ v[t]
 * k rows are `kstride` floats apart, v rows `vstride` apart; att[T] is
 * scratch and receives the attention weights. */
void attention_row_forward(float *out, float *att, const float *q, const float *k, const float *v,
                           int T, int D, int DV, int kstride, int vstride, float scale);
void attention_row_forward_naive(float *out, float *att, const float *q, const float *k,
                                 const float *v, int T, int D, int DV, int kstride, int vstride,
                                 float scale);

/* The instruction sets the vectorized kernels are compiled for (x86-64
 * only; elsewhere, as in the WebAssembly build, only TF_SIMD_GENERIC). */
typedef enum TfSimd { TF_SIMD_GENERIC, TF_SIMD_AVX2, TF_SIMD_AVX512, TF_SIMD_COUNT } TfSimd;
extern const char *const tf_simd_names[TF_SIMD_COUNT];
/* 1 when this CPU (and build) can run path s. */
int simd_supported(TfSimd s);
/* The best supported path: what the dispatching kernels run. */
TfSimd simd_best(void);
/* simd_best, found once per thread: the path gelu_forward, linear_forward
 * and attention_block_forward take. */
TfSimd simd_active(void);
/* gelu_forward on instruction set s (simd_supported(s) must hold). */
void gelu_forward_simd(float *x, long n, TfSimd s);

/* Attention of a block of W <= TF_ATT_LANES query rows (lanes) of one head
 * against the engine's caches (infer.c), one lane per SIMD lane: every loop
 * runs over the lanes, so each lane's sums keep the order of a row-by-row
 * loop. The caches are sequence-minor: key channel c of sequence s at
 * position t is k[(t * nk + c) * S + s], value channel j is
 * v[(t * nv + j) * S + s]. Lane i belongs to sequence seq[i] and sees
 * positions 0..T[i]-1 (T[i] >= 1) and is column rows[i] of q and out
 * (rows NULL: column i); its query channel pq[p] (live channel p < np) is
 * q[pq[p] * ldq + rows[i]] and meets key channel pk[p]. Then:
 *   score[t] = scale * sum over p of q . k       (channels in order)
 *   att[t]   = softmax over t < T[i] (an exponent below -104 gives 0;
 *              within 2 ulp of expf above it, tiny ones included)
 *   out[(j - j0) * ldo + rows[i]] = sum over t, in order, of att[t] v[t][j] for
 *              the value channels j0 <= j < j1, positions of weight 0 skipped
 * sums[i] gets the softmax's sum (NaN: a NaN or infinite score), used[i]
 * the positions of non-zero weight. att is scratch of TF_ATT_LANES floats
 * per position (max T[i]) and keeps the weights, lane i of position t at
 * att[t * TF_ATT_LANES + i]; scores (NULL: not wanted) gets the scaled
 * scores the same way. A channel whose query is 0 in every lane is left
 * out (it adds +-0 where the keys are finite, which the engine checks
 * before: infer.c's attention_layer). k_same: every sequence's keys are
 * equal (keys of the position alone), so each lane reads lane 0's, one
 * value broadcast (the naive loops read each lane's own). add: out gains
 * the sums instead (out + sum: out is the residual stream's columns that a
 * one-to-one output projection of weight 1 would write), and a lane whose
 * output comes out infinite or NaN gets a NaN in sums (as an overflowed
 * score does: the engine's overflow test). Runs simd_best's
 * instruction set; every path does the same operations in the same order
 * (-ffp-contract=off), so all give the same bits. */
#define TF_ATT_LANES 16
void attention_block_forward(float *out, int ldo, float *sums, int *used, float *att,
                             float *scores, const float *q, int ldq, const int *rows, const int *pq,
                             const int *pk, int np, const float *k, int nk, const float *v,
                             int nv, int j0, int j1, int S, const int *seq, const int *T, int W,
                             float scale, int k_same, int add);
/* The row-by-row loops the engine ran before (expf, one running sum). */
void attention_block_forward_naive(float *out, int ldo, float *sums, int *used, float *att,
                                   float *scores, const float *q, int ldq, const int *rows, const int *pq,
                                   const int *pk, int np, const float *k, int nk, const float *v,
                                   int nv, int j0, int j1, int S, const int *seq, const int *T,
                                   int W, float scale, int k_same, int add);
/* attention_block_forward on path s (supported), for the tests. */
void attention_block_forward_simd(float *out, int ldo, float *sums, int *used, float *att,
                                  float *scores, const float *q, int ldq, const int *rows, const int *pq,
                                  const int *pk, int np, const float *k, int nk, const float *v,
                                  int nv, int j0, int j1, int S, const int *seq, const int *T,
                                  int W, float scale, int k_same, int add, TfSimd s);

/* Attention over keys that take few values (a Count's keys read a token
 * class, a copy's keys a handful of registers): sum over t of
 * e^(s_t) v_t = sum over groups g of e^(s_g) (sum of v_t over g's
 * positions), so with the per-group prefix sums a row costs one score per
 * group, not one per position. attention_groups sorts positions 0..T-1 of
 * one sequence's keys k[t * np + p] into groups of bit-identical keys
 * (keys[g * np + p], cls[t] scratch), and writes at each t the number of
 * positions 0..t in group g, counts[t * n + g], and their values' sums in
 * position order, vsums[(t * n + g) * nj + j] (v[t * nj + j]). Returns n,
 * or 0 when there are more than max_groups (<= TF_ATT_GROUPS) groups.
 * attention_grouped_forward is then attention_block_forward for W rows of
 * that sequence (rows, pq, q, ldq, T, out, ldo, sums, used, add as there, the
 * value channels 0..nj-1): the same scores, maximum and weights per group,
 * but the softmax's sum is sum over g of e_g * count_g and each output
 * sum over g of weight_g * vsum_g, so its results match the direct sums
 * within their rounding (tests/test_kernels.c compares it with
 * attention_block_forward_naive). */
#define TF_ATT_GROUPS 16
int attention_groups(float *keys, float *counts, float *vsums, int *cls, const float *k,
                     const float *v, int T, int np, int nj, int max_groups);
void attention_grouped_forward(float *out, int ldo, float *sums, int *used, const float *q,
                               int ldq, const int *rows, const int *pq, int np, const float *keys,
                               int n_groups, const float *counts, const float *vsums, int nj,
                               const int *T, int W, float scale, int add);

/* Index of the largest of n values; the first one on ties. */
/* Softmax in place over att[T], max-subtracted, with expf; exp of -inf is
 * 0. The plain one: the engine's attention row and the trainer's naive twin
 * (runtime/train/nn.c) both use it. */
void softmax_naive(float *att, int T);
/* The runtime's one fast softmax, in place over x[n], with exp_vec (within
 * 2 ulp of expf) in blocks of 16 lanes: the trainer's attention weights and
 * loss, the engine's class probabilities. Its naive twin is softmax_naive. */
void softmax_forward(float *x, int n);
/* Its first half: x[i] = exp(x[i] - max x) in place; returns their sum,
 * *maxv the max (the trainer's cross-entropy takes its log). */
float softmax_exp(float *x, int n, float *maxv);
/* The same on rows (at most TF_SOFTMAX_ROWS) of np floats each (np a
 * multiple of 16), x's row r over its first n[r] (at most np): row r's
 * floats from n[r] on become 0, sums[r] gets its sum. The same bits as
 * softmax_exp row by row, a few times faster on short rows (the trainer's
 * attention), whose work is mostly chains of dependent operations. */
#define TF_SOFTMAX_ROWS 8
void softmax_exp_rows(float *x, int rows, int np, const int *n, float *sums);

/* LayerNorm, the runtime's one: out[N,C] = (inp - mean) * rstd * weight +
 * bias per row, mean[N] and rstd[N] (1/sqrt(var + eps), biased variance)
 * saved for the trainer's backward pass (runtime/train/nn.c); sums in eight
 * lanes (vec8.h). */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C, float eps);
/* layernorm_forward of rows 0..n-1 of x laid out feature-major (column c
 * at x + c ld, a row's C values ld apart; y likewise), with the same bits:
 * 16 rows at a time, one per lane (the engine's residual stream is laid
 * out so). row: 2C floats of scratch for the last n % 16 rows. */
void layernorm_forward_fm(float *y, const float *x, long ld, int C, int n, const float *weight,
                          const float *bias, float eps, float *row);
/* Its naive twin: plain loops in double. */
void layernorm_forward_naive(float *out, const float *inp, const float *weight,
                             const float *bias, int N, int C, float eps);
int argmax(const float *x, int n);

/* OpenBLAS takes a work buffer of about 128 MiB per thread at its first
 * matrix product, and when the allocation fails it retries for ever (out of
 * memory hung tfrun and tftrain). blas_reserve checks that n_threads such
 * buffers can be had now (allocated together, then freed), so that a tool
 * can refuse cleanly before it computes. 0, or -1 with err set. */
#define TF_BLAS_BUFFER (((size_t)128 << 20) + ((size_t)1 << 20))
int blas_reserve(int n_threads, TfError *err);

#endif

/* ---- training: forward kernels with saved state, and backward kernels ----
 *
 * Backward kernels take the gradient of the loss with respect to a forward
 * kernel's output (dout) and ACCUMULATE (+=) into the gradients of its inputs
 * and weights, as in llm.c: the caller zeroes them first. Any gradient
 * pointer documented as optional may be NULL (not wanted). tests/test_train.c
 * checks each against finite differences.
 */

/* dinp[N,C] += dout[N,OC] @ weight[OC,C] (= when !accumulate: the caller
 * need not zero a buffer this call writes first); dweight[OC,C] += dout^T @
 * inp[N,C]; dbias[OC] += column sums of dout. dinp, dweight, dbias
 * optional. */
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC, int accumulate);

/* dinp[n] += dout[n] * act'(inp[n]), inp being the pre-activation values. */
void gelu_backward(float *dinp, const float *inp, const float *dout, long n);
void relu_backward(float *dinp, const float *inp, const float *dout, long n);
void gelu_tanh_backward(float *dinp, const float *inp, const float *dout, long n);

/* Token and position embedding: out[n] = wte[tokens[n]] + wpe[pos[n]] (C
 * wide); backward accumulates into dwte and (optional) dwpe. */
void embedding_forward(float *out, const int *tokens, const int *pos, const float *wte,
                       const float *wpe, int N, int C);
void embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                        const int *pos, int N, int C);

