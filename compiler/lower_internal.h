/* lower_internal.h: what compiler/lower.c shares with compiler/lower_general.c,
 * which lowers the general ops: matrices in PyTorch's [out, in] order and
 * the model they are emitted into. Private to compiler/. */
#ifndef TF_LOWER_INTERNAL_H
#define TF_LOWER_INTERNAL_H

#include "checker.h"
#include "model.h"
#include "tensors.h"
#include "values.h"

typedef struct Mat {
    int rows, cols; /* [out, in]; a vector has rows == 1 */
    float *w;
    int two_d;      /* store a 1-row matrix as [1, cols], not as a vector */
} Mat;

#define AT(M, o, i) ((M).w[(size_t)(o) * (size_t)(M).cols + (size_t)(i)])

typedef struct Lowerer {
    const TfIr *ir;
    int opt;          /* 0: seed constructions; 1: optimized */
    TfModel *m;
    TfError *err;
    TfTensorSet tensors; /* m's tensors, each stored once (compiler/tensors.h) */
    int failed;
    int share;        /* 1: store a tensor identical to an earlier one once */
    int fold;         /* 1: Maps of tokens or indices alone go into the embedding */
    int prune;        /* 1: no row for a query value that picks no key (row_live) */
} Lowerer;

/* Whether op is a Map the embedding holds (L->fold: a table of `tokens` or
 * `indices` alone, lower.c's fold_table): its register is exact. */
int lower_folded(const Lowerer *L, const TfIrOp *op);

/* A zero matrix (sets L->failed when memory runs out). */
Mat lower_mat(Lowerer *L, int rows, int cols);
/* Stores M as tensor `name` (or finds an identical one); frees M; returns
 * the tensor index, -1 after a failure. */
int lower_emit(Lowerer *L, const char *name, Mat M);
/* lower_emit as "layers.<the layer being built>.<what>" ("attn.query.weight"). */
int lower_emit_layer(Lowerer *L, const char *what, Mat M);
/* A layer of that kind named after the op's label (or the op). */
TfLayer lower_layer_header(const Lowerer *L, const TfIrOp *op, TfLayerKind kind);

/* Appends the MLP layer x += act(x W1^T + b1) W2^T + b2 for op. */
void lower_add_mlp(Lowerer *L, const TfIrOp *op, TfActivation act, Mat w1, Mat b1, Mat w2,
                   Mat b2);

/* compiler/lower_general.c: the layer of a general op's plan (any form but
 * TF_PLAN_SEED). */
void lower_general(Lowerer *L, const TfIrOp *op);

/* The op table's lowering functions (compiler/ops.c), each appending a seed
 * op's layer from its plan's arguments: seed 001's construction (-O0) and
 * the optimized one (-O). */
void lower_find_and_store(Lowerer *L, int li, const TfIrOp *op);
void lower_find_and_store_opt(Lowerer *L, int li, const TfIrOp *op);
void lower_get_relative_token(Lowerer *L, int li, const TfIrOp *op);
void lower_get_relative_token_opt(Lowerer *L, int li, const TfIrOp *op);
void lower_multiply(Lowerer *L, int li, const TfIrOp *op);
void lower_multiply_opt(Lowerer *L, int li, const TfIrOp *op);
void lower_clear(Lowerer *L, int li, const TfIrOp *op);
void lower_clear_opt(Lowerer *L, int li, const TfIrOp *op);
void lower_step_position(Lowerer *L, int li, const TfIrOp *op);
void lower_step_position_opt(Lowerer *L, int li, const TfIrOp *op);
void lower_diff_pos(Lowerer *L, int li, const TfIrOp *op);
void lower_diff_pos_opt(Lowerer *L, int li, const TfIrOp *op);
void lower_is_zero(Lowerer *L, int li, const TfIrOp *op);
void lower_copy_on_match(Lowerer *L, int li, const TfIrOp *op);
void lower_copy_on_match_opt(Lowerer *L, int li, const TfIrOp *op);

#endif
