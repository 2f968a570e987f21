/* nn.h: the trainer's numerical layers: the softmax and LayerNorm (whose
 * forward kernels are the runtime's one softmax and one LayerNorm, in
 * runtime/engine/kernels.c), the attention of a head over a sequence (every
 * row, or selected query rows) and the softmax cross-entropy, each with its
 * forward kernel (which saves what its backward needs) and its backward
 * kernel.
 *
 * Dimension legend (as in llm.c and runtime/engine/kernels.h):
 *   N  rows (positions of all sequences in a batch, stacked)
 *   C  channels (d_model)
 *   T  rows of one sequence; R selected query rows of it
 *   H  heads, D head width of queries and keys, DV of values
 *   M  rows the loss reads, V their logits (vocabulary or classes)
 *
 * Arguments are ordered outputs, inputs, weights, sizes. Backward kernels
 * take the gradient of the loss with respect to the forward kernel's output
 * (dout) and ACCUMULATE (+=) into the gradients of its inputs and weights,
 * as in llm.c: the caller zeroes them first; a gradient documented as
 * optional may be NULL. Every fast kernel has a `_naive` twin (plain loops,
 * libm's expf) that tests/test_train.c compares it with, and every backward
 * kernel is checked there against finite differences. Kernels never allocate
 * and never fail; scratch is the caller's.
 */
#ifndef TF_NN_H
#define TF_NN_H

#include <stddef.h>

/* Softmax in place over x[0..n), max-subtracted (an x of -inf gives 0). */
void nn_softmax(float *x, int n);
/* Its naive twin is the engine's softmax_naive (runtime/engine/kernels.h). */

/* The LayerNorm's forward is the engine's layernorm_forward (kernels.h),
 * one for the whole runtime; it saves mean[N] and rstd[N] for this: */
/* dinp, dweight and dbias optional. */
void nn_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, const float *mean,
                           const float *rstd, int N, int C);

/* Softmax cross-entropy over M rows of V logits: probs[M,V] = softmax, and
 * returns the sum over rows of -log probs[m, targets[m]]. */
double nn_crossentropy_forward(float *probs, const float *logits, const int *targets, int M,
                               int V);
/* dlogits[M,V] += (probs - onehot(targets)) * scale. */
void nn_crossentropy_backward(float *dlogits, const float *probs, const int *targets, int M, int V,
                              float scale);

/* Multi-head attention over one sequence of T rows. q, k [T, H*D] and
 * v [T, H*DV] hold the heads side by side; out [T, H*DV]. For head h and row i:
 *   preatt[h,i,j] = scale * q_h[i] . k_h[j]             (every j; saved)
 *   att[h,i,:]    = softmax over j (j <= i when causal; masked weights are 0)
 *   out_h[i]      = sum_j att[h,i,j] v_h[j]
 * preatt and att are [H, T, T]. scratch holds nn_attention_scratch_floats(T,
 * D, DV) floats. */
void nn_attention_forward(float *out, float *preatt, float *att, float *scratch, const float *q,
                          const float *k, const float *v, int T, int H, int D, int DV,
                          float scale, int causal);
void nn_attention_forward_naive(float *out, float *preatt, float *att, const float *q,
                                const float *k, const float *v, int T, int H, int D, int DV,
                                float scale, int causal);
/* Accumulates into dq, dk [T, H*D] and dv [T, H*DV]. dpreatt [H, T, T]
 * (optional) is an extra gradient with respect to preatt, from a loss on the
 * attention scores themselves. scratch holds nn_attention_scratch_floats(T,
 * D, DV) floats (the naive twin's: T). */
void nn_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                           const float *dpreatt, const float *q, const float *k, const float *v,
                           const float *att, int T, int H, int D, int DV, float scale, int causal);
void nn_attention_backward_naive(float *dq, float *dk, float *dv, float *scratch,
                                 const float *dout, const float *dpreatt, const float *q,
                                 const float *k, const float *v, const float *att, int T, int H,
                                 int D, int DV, float scale, int causal);
/* The scratch the fast attention kernels need for sequences of T rows. */
size_t nn_attention_scratch_floats(int T, int D, int DV);

/* Attention for R selected query rows of one sequence of T rows (training
 * computes only the rows its loss reads in the last attention layer): query
 * row r is at position pos[r] and sees keys 0..pos[r] (causal) or all T.
 * q and out hold the R rows ([R, H*D], [R, H*DV]); k and v the whole
 * sequence; preatt and att are [R, H, T] (masked scores are left 0). The
 * backward pass accumulates into dq [R, H*D], dk and dv [T, ...]. scratch
 * holds nn_attention_scratch_floats(T, D, DV) floats (the naive twins':
 * none forward, T backward). */
void nn_attention_rows_forward(float *out, float *preatt, float *att, float *scratch,
                               const float *q, const float *k, const float *v, const int *pos,
                               int R, int T, int H, int D, int DV, float scale, int causal);
void nn_attention_rows_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                                const float *q, const float *k, const float *v, const float *att,
                                const int *pos, int R, int T, int H, int D, int DV, float scale,
                                int causal);
void nn_attention_rows_forward_naive(float *out, float *preatt, float *att, const float *q,
                                     const float *k, const float *v, const int *pos, int R, int T,
                                     int H, int D, int DV, float scale, int causal);
void nn_attention_rows_backward_naive(float *dq, float *dk, float *dv, float *scratch,
                                      const float *dout, const float *q, const float *k,
                                      const float *v, const float *att, const int *pos, int R,
                                      int T, int H, int D, int DV, float scale, int causal);

/* Attention across sequences: a group of G <= NN_LANES sequences of T
 * rows each, side by side (one per lane of a vector: no padding, no masked
 * work), each with the results it would have in any other group or lane;
 * the trainer's kernels for sequences longer than NN_SHORT_T (the kernels
 * above vectorise over positions, which pays for short ones). Sequence g's
 * keys and values are rows row[g] .. row[g] + T - 1 of k and v; its query
 * rows (and out, dout, dq rows) start at qrow[g]. The group's scores and
 * weights are interleaved, G floats to a score: score j of query row r of
 * head h, sequence g, at preatt or att + at + ((h R + r) T + j) G + g, with
 * R = T when pos is NULL (every row a query), else at + ((r H + h) T + j)
 * G + g for R query rows at positions pos[0..R) (the same in every
 * sequence of the group). With G = 1, the layouts of the one-sequence
 * kernels above. extra (backward, optional) is the scores' own gradient,
 * laid out as they are but from extra[0] (at 0). Forward: preatt may be
 * NULL (not saved); with all_scores every score is saved (causal or not),
 * else masked scores are saved as 0. scratch holds
 * nn_attention_group_scratch_floats(T, H, D, DV) floats. */
enum { NN_LANES = 16, NN_SHORT_T = 20 };
typedef struct NnGroup {
    int G;
    long row[NN_LANES], qrow[NN_LANES], at;
    const float *extra;
} NnGroup;
size_t nn_attention_group_scratch_floats(int T, int H, int D, int DV);
void nn_attention_group_forward(float *out, float *preatt, float *att, float *scratch,
                                const float *q, const float *k, const float *v,
                                const NnGroup *grp, const int *pos, int R, int T, int H, int D,
                                int DV, float scale, int causal, int all_scores);
void nn_attention_group_backward(float *dq, float *dk, float *dv, float *scratch,
                                 const float *dout, const float *q, const float *k,
                                 const float *v, const float *att, const NnGroup *grp,
                                 const int *pos, int R, int T, int H, int D, int DV, float scale,
                                 int causal);

#endif
