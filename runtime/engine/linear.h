/* linear.h: a linear map packed so that it costs only what it touches.
 *
 * Compiled programs are sparse: seed 001's adder multiplies 80x80 matrices
 * of which about 5 % of the entries are non-zero, and each layer reads and
 * writes a few registers. A TfLinear keeps, of y = W x + b, only the output
 * rows that can be non-zero (a non-zero weight or bias) and the input
 * columns they read, and stores the kept block either dense (multiplied with
 * sgemm) or, when most of it is zero, as compressed rows (CSR: one
 * multiply-add per non-zero weight). Which form is chosen changes the speed,
 * never the meaning.
 *
 * Activations are feature-major: feature i of row r is x[i * ld + r], so a
 * feature of a whole batch is one contiguous vector and a sparse weight is
 * one vectorized multiply-add over the batch.
 *
 * Memory: a TfLinear owns its arrays; linear_free releases them.
 */
#ifndef TF_LINEAR_H
#define TF_LINEAR_H

#include "error.h"
#include "kernels.h"

typedef struct TfLinear {
    int n_out, n_in;   /* shape of the full map */
    int n_rows;        /* output rows kept */
    int *rows;         /* [n_rows] their indices in 0..n_out-1, increasing */
    int n_cols;        /* input features read */
    int *cols;         /* [n_cols] their indices into the input buffer, increasing */
    int dense;         /* 1: w is [n_rows, n_cols]; 0: CSR over the kept rows */
    float *w;          /* dense block, or the CSR values */
    int *ptr;          /* CSR: [n_rows + 1] offsets into w and idx */
    int *idx;          /* CSR: input feature of each value (an index into the input buffer) */
    float *bias;       /* [n_rows], NULL when every kept bias is zero */
    long nnz;          /* non-zero weights */
    /* A dense block whose rows repeat (a table of thresholds on one sum:
     * ReLU(s - 1), ReLU(s - 2), ...): the n_lead distinct rows lead[g]
     * (packed rows) and the rows equal to each, same[same_ptr[g] ..
     * same_ptr[g + 1] - 1], lead[g] among them. Each distinct sum is formed
     * once and each of its rows adds its own bias: the same bits (a row's
     * products, in order, then its bias). lead NULL: no row repeats. */
    int n_lead;
    int *lead, *same_ptr, *same;
} TfLinear;

/* Packs W [n_out, n_in] (row-major, PyTorch's [out, in]) and bias b [n_out]
 * (may be NULL). in_map, when not NULL, renumbers inputs: column c of W
 * reads input feature in_map[c], and in_map[c] < 0 means that input is known
 * to be zero (the column is dropped). Returns 0, or -1 (out of memory). */
int linear_pack(TfLinear *L, const float *W, const float *b, int n_out, int n_in,
                const int *in_map, TfError *err);
void linear_free(TfLinear *L);

/* y[k * ldy + r] = bias[k] + sum over c of W[rows[k], c] x[c * ldx + r], for
 * every kept row k < n_rows and batch row r < n (feature-major, packed
 * output). scratch must hold n_cols * n floats (used by the dense form when
 * the columns are not contiguous). */
void linear_forward(const TfLinear *L, float *y, int ldy, const float *x, int ldx, int n,
                    float *scratch);
/* The same on instruction set s (kernels.h's TfSimd; simd_supported(s) must
 * hold): linear_forward runs simd_best's. */
void linear_forward_simd(const TfLinear *L, float *y, int ldy, const float *x, int ldx, int n,
                         float *scratch, TfSimd s);
/* What linear_forward_fused does with each output: stores it (as
 * linear_forward), stores its ReLU (x > 0 ? x : +0, as relu_forward), or
 * adds it to y[rows[k] * ldy + r] (the residual stream: the output, bias
 * included, is formed first, then added, as a buffer and a second pass
 * would), in the products' loop. */
typedef enum { TF_LINEAR_STORE, TF_LINEAR_RELU, TF_LINEAR_ADD } TfLinearMode;
/* 1 when linear_forward_fused takes L: a CSR map, or a dense block small
 * enough for its loops (which linear_forward then uses too: each sum in the
 * order of the columns, the bias last, as linear_forward_naive forms it). */
int linear_fused(const TfLinear *L);
/* L (linear_fused(L)) on instruction set s, its outputs as mode says; with
 * TF_LINEAR_ADD, returns 1 when some sum it stored is infinite or NaN,
 * else 0. */
int linear_forward_fused(const TfLinear *L, TfLinearMode mode, float *y, int ldy, const float *x,
                         int ldx, int n, TfSimd s);
/* 1 when a ReLU MLP's two packed maps are one-to-one pairs that
 * linear_mlp_pairs_forward takes: each row of fc2 one weight, reading a
 * unit that fc1 forms from one weight, and no pair reading a column an
 * earlier pair writes (a Clear, a copy: x_c += w2 ReLU(w1 x_c' + b1) + b2). */
int linear_mlp_pairs(const TfLinear *fc1, const TfLinear *fc2);
/* Such an MLP added into the residual, y[fc2->rows[k] * ldy + r] +=, at
 * rows r < n of x (ld ldx; x may be y), on instruction set s: each row's
 * operations and order those of linear_forward_fused's two passes (fc1 with
 * its ReLU, fc2 added), so the same bits, without the hidden units written
 * and read. Returns 1 when some sum it stored is infinite or NaN. */
int linear_mlp_pairs_forward(const TfLinear *fc1, const TfLinear *fc2, float *y, int ldy,
                             const float *x, int ldx, int n, TfSimd s);
/* The same with plain loops, for the tests. */
void linear_forward_naive(const TfLinear *L, float *y, int ldy, const float *x, int ldx, int n);

/* Multiply-adds one forward costs per batch row: the non-zero weights for
 * CSR, the whole kept block when dense (its distinct rows only when rows
 * repeat: TfLinear.lead). */
long linear_cost(const TfLinear *L);

#endif
