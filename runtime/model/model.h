/* model.h: a transformer held in memory, as a weight file describes it.
 *
 * A TfModel is what `tfc` builds and writes, and what `tfrun` reads and runs.
 * It is a plain decoder-only transformer without LayerNorm:
 *
 *   x[i]   = embed.token.weight[t_i] + embed.position.weight[i]     (d_model)
 *   layers : x += Attention(x)   or   x += MLP(x), in order
 *   logits = unembed.weight @ x[last]                                 (n_vocab)
 *
 * Registers are named slices of the residual stream. The runtime never needs
 * them to compute; they are there so that people and tools can decode the
 * stream. Every tensor is float32, row-major, linear weights in PyTorch's
 * [out, in] order (y = x W^T + b).
 *
 * Memory: a TfModel owns every string, array and tensor it points to;
 * model_free releases all of it. Layers refer to tensors by index, so several
 * layers may share one tensor (a `repeat` body compiles to shared weights).
 */
#ifndef TF_MODEL_H
#define TF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define TF_FORMAT_NAME "tfw"
#define TF_FORMAT_VERSION 1
#define TF_MAX_NDIM 4

/* Fixed tensor names every weight file has. */
#define TF_TENSOR_TOKEN_EMBED "embed.token.weight"       /* [n_vocab, d_model] */
#define TF_TENSOR_POS_EMBED "embed.position.weight"      /* [max_len, d_model] */
#define TF_TENSOR_UNEMBED "unembed.weight"               /* [n_vocab, d_model]; optional
                                                            when the output is a number */
#define TF_TENSOR_UNEMBED_BIAS "unembed.bias"            /* [n_vocab], optional */

typedef enum TfRegKind {
    TF_REG_TOKEN,    /* one-hot over the vocabulary, n_vocab columns */
    TF_REG_POSITION, /* sin, cos of 2*pi*p/period, 2 columns */
    TF_REG_SCALAR,   /* one column */
    TF_REG_CATEGORICAL, /* one-hot over `size` values, column i labelled values[i] */
    TF_REG_KIND_COUNT
} TfRegKind;

typedef struct TfRegister {
    char *name;
    TfRegKind kind;
    int offset; /* first residual column */
    int size;   /* number of columns */
    /* Categorical registers: the label of each column's value ("0", "16",
     * "'a'", "T"), size non-empty strings, owned. NULL for other kinds. */
    char **values;
    /* The residual states whose columns [offset, offset + size) are this
     * register's: state 0 is the embedding's output, state i + 1 layer i's.
     * From live_from to live_to inclusive (live_to TF_LIVE_END: to the last
     * state). Outside that range the columns may hold another register, one
     * whose range does not meet this one (the compiler reuses a dead
     * register's columns: compiler/schedule.h). model_add_register: every
     * state. */
    int live_from, live_to;
} TfRegister;

#define TF_LIVE_END 0x7fffffff

typedef struct TfTensor {
    char *name;
    int ndim;
    int64_t shape[TF_MAX_NDIM];
    size_t nelem;
    float *data; /* owned, nelem floats */
} TfTensor;

/* TF_LAYER_NORM replaces x by LayerNorm(x) (post-norm models, and the final
 * norm of pre-norm models); it is not a residual update. */
typedef enum TfLayerKind {
    TF_LAYER_ATTENTION,
    TF_LAYER_MLP,
    TF_LAYER_NORM,
    TF_LAYER_KIND_COUNT
} TfLayerKind;

/* TF_ACT_GELU is the exact erf GELU; TF_ACT_GELU_TANH its tanh approximation
 * (GPT-2's "gelu_new", models converted by tfconvert). */
typedef enum TfActivation { TF_ACT_GELU, TF_ACT_RELU, TF_ACT_GELU_TANH, TF_ACT_COUNT } TfActivation;

/* One op's share of a layer that compiler/schedule.c built from several ops:
 * heads [first, first + count) of an attention layer, or hidden units
 * [first, first + count) of an MLP (its fc1 rows and fc2 columns). */
typedef struct TfLayerPart {
    char *name; /* the op's layer name ("hist"), owned, never NULL */
    char *op;   /* its source op ("Count"), owned, NULL when unknown */
    int line;   /* its source line, 0 when none */
    int first, count;
} TfLayerPart;

typedef struct TfLayer {
    TfLayerKind kind;
    char *name; /* e.g. "find_plus"; never NULL */
    char *op;   /* source op, e.g. "FindAndStore"; NULL when not compiled */
    int line;   /* source line of the op, 0 when none */
    /* The ops the layer holds side by side, in head / hidden-unit order;
     * n_parts 0 (parts NULL): the layer is one op, named above. When there
     * are parts, name, op and line are the first part's (name joins them all
     * with '+'), and the parts cover every head / hidden unit, in order. */
    TfLayerPart *parts;
    int n_parts;

    /* Pre-norm (attention and MLP; -1 when absent): the layer reads
     * LayerNorm(x) * norm_weight + norm_bias instead of x, and still adds
     * its output to x. TF_LAYER_NORM layers use these two tensors too. */
    int norm_weight, norm_bias; /* [d_model] each */
    float norm_eps;             /* 1e-5 unless the file says otherwise */

    /* Attention: q = x Wq^T [n_heads*d_head], k = x Wk^T, v = x Wv^T
     * [n_heads*d_vhead]; per head softmax(q k^T * scale + causal mask) v;
     * the heads concatenated, then times Wo^T when there is an output
     * tensor (else n_heads*d_vhead must equal d_model). */
    int n_heads, d_head, d_vhead;
    float scale;
    int causal; /* 1: position i sees 0..i; 0: sees every position */
    int query, key, value, output; /* tensor indices; output is -1 when absent */
    int query_bias, key_bias, value_bias, output_bias; /* -1 when absent */

    /* MLP: x W1^T + b1 -> activation -> W2^T + b2 */
    int d_hidden;
    TfActivation act;
    int fc1_weight, fc1_bias, fc2_weight, fc2_bias; /* biases are -1 when absent */
} TfLayer;

typedef enum TfOutputKind { TF_OUTPUT_NEXT_TOKEN, TF_OUTPUT_CLASSIFY } TfOutputKind;

/* A run-time check of a categorical value the compiler could not prove
 * single-valued: after layer `layer` runs, register `reg` must hold one value
 * at every position of the input after the BOS (runtime/engine/checks.h says what
 * that means).
 * `line` and `op` name the source op ("Aggregate -> place") in the error. */
typedef struct TfCheck {
    int reg;   /* index into regs: a categorical register */
    int layer; /* index into layers: the last layer that writes it */
    int line;  /* source line of the op, 0 when unknown */
    char *op;  /* short op text, owned; never NULL */
    double bound; /* how far a single value's columns may be from its one-hot, the
                     bound the compiler proved (0 <= bound < 0.5); -1: the file gave
                     none (model_check_bound) */
} TfCheck;

typedef struct TfModel {
    int d_model;
    int n_vocab;
    char *vocab;   /* n_vocab bytes: token i is the character vocab[i] ('\0' for a word) */
    char **token_names; /* NULL: a vocabulary of characters; else, when some token is a
                           word (several bytes), n_vocab names: prompts and outputs are
                           words separated by spaces (model_set_vocab) */
    int n_output_only;  /* the last n_output_only tokens are output-only: outputs print
                           them, no prompt holds them, `tokens` has no column for them
                           (its register is n_vocab - n_output_only wide) and their
                           embedding rows are unused (docs/weight-format.md) */
    int period;    /* of the sin/cos position encoding */
    int max_len;   /* rows of embed.position.weight: the longest sequence */

    TfRegister *regs;
    int n_regs;
    int output_reg; /* index into regs, -1 when the model has no registers */
    int generate;   /* default number of tokens to generate */

    /* What the unembedding produces. TF_OUTPUT_NEXT_TOKEN: unembed.weight is
     * [n_vocab, d_model], logits over the vocabulary at the last position,
     * generation. TF_OUTPUT_CLASSIFY: unembed.weight is [n_classes, d_model],
     * one forward pass, class logits read at position 0 (a CLS token) or at
     * the last position; class_names[i] names class i. */
    TfOutputKind output_kind;
    int n_classes;
    char **class_names;   /* n_classes strings, owned; NULL for next-token */
    int classify_at_last; /* 0: read at position 0, 1: at the last position */
    int unembed_bias;     /* tensor index of unembed.bias, -1 when absent */

    /* Next-token models only. every_position 0: generation, the logits read
     * at the last position. 1: one forward pass over the whole input, the
     * argmax token read at every position (at 1..n-1 when there is a bos).
     * bos: the token every input starts with (-1: none). stop_token:
     * generation ends when this token is generated, which is not part of
     * the completion; `generate` is then the most tokens generated (-1:
     * none, always `generate` tokens). */
    int every_position;
    int bos;
    int stop_token;

    /* A model read at every position whose output register is a scalar and
     * which has no unembed.weight prints that register's value at every
     * position (model_numeric_output); with one, the unembedding decodes
     * the number into tokens, as in a generating model (docs/weight-format.md,
     * "Numbers as outputs"). output_error_bound is
     * the absolute float32 error the compiler proved for those values (0
     * when none was given): --check accepts a value within it. */
    double output_error_bound;

    /* Run-time checks (model_add_check), in any order; n_checks 0: none. */
    TfCheck *checks;
    int n_checks;

    TfLayer *layers;
    int n_layers;

    TfTensor *tensors;
    int n_tensors;
    int tok_embed, pos_embed, unembed; /* tensor indices */

    char *source;      /* program text, may be NULL */
    char *source_name; /* file name of the program, may be NULL */

    /* How the file was made (docs/weight-format.md), JSON object text or
     * NULL: made_by names the tool, its version and options (for tftrain the
     * optimizer, schedule, data and steps, and what it started from);
     * learned holds a learned model's `model { ... }` settings. */
    char *made_by;
    char *learned;
} TfModel;

extern const char *const tf_reg_kind_names[];     /* "token", ..., "categorical" */
extern const char *const tf_layer_kind_names[]; /* "attention", "mlp", "norm" */
extern const char *const tf_activation_names[];        /* "gelu", "relu", "gelu_tanh" */

/* An empty model (no tensors, no layers); fields set by the caller. */
TfModel *model_new(void);
void model_free(TfModel *m);
/* An empty model with src's settings: every field of src but the arrays and
 * strings a model owns (registers, layers, tensors, class names, checks,
 * vocabulary, source, made_by, learned), which are left empty. Tensor
 * indices (tok_embed, ...) are copied as they are. NULL: out of memory. */
TfModel *model_new_like(const TfModel *src);

/* Adds a zero-filled float32 tensor, returns its index, or -1 with err set
 * (duplicate name, bad shape, out of memory). */
int model_add_tensor(TfModel *m, const char *name, int ndim, const int64_t *shape, TfError *err);
/* The same for a caller that knows no tensor has this name yet (no search:
 * adding n tensors costs O(n), not O(n^2)). */
int model_add_new_tensor(TfModel *m, const char *name, int ndim, const int64_t *shape,
                         TfError *err);
int model_find_tensor(const TfModel *m, const char *name);
int model_find_register(const TfModel *m, const char *name);
/* Whether register r holds its columns in residual state `state` (0 the
 * embedding's output, i + 1 layer i's; TfRegister.live_from). */
int model_reg_live(const TfModel *m, int r, int state);
/* The register named `name` that holds its columns in `state`, -1: none
 * (two registers of one name never share a state). */
int model_find_register_at(const TfModel *m, const char *name, int state);
/* Whether register r has a live range narrower than every state. */
int model_reg_reused(const TfModel *m, int r);
/* Register r's live range as text: "states 0..12 (the embedding to after
 * layer 11)", "state 3 (after layer 2)". */
void model_live_text(const TfModel *m, int r, char *buf, size_t n);

/* The clears of MLP layer ly (compiler/schedule.c reuses a dead register's
 * columns after one): pairs of hidden units u, u + 1 whose fc1 rows read one
 * column c alone, by +1 and -1 with no bias, and whose fc2 columns write
 * -1 and +1 to c alone, no other unit and no bias writing c. Such a layer
 * leaves exactly 0 in c wherever c held a finite value (ReLU(x) and
 * ReLU(-x) are exact and one is 0; -ReLU(x) + ReLU(-x) is -x; x + -x is 0),
 * whatever x was. col[u] and col[u + 1] = c for each pair, -1 for every
 * other unit (col: d_hidden ints). Returns the number of pairs. */
int model_mlp_clears(const TfModel *m, const TfLayer *ly, int *col);

/* A layer of the given kind with every optional tensor absent (-1). */
TfLayer model_layer_init(TfLayerKind kind);

/* Appends a layer (copied; strings duplicated), returns its index or -1. */
int model_add_layer(TfModel *m, const TfLayer *layer, TfError *err);
int model_add_register(TfModel *m, const char *name, TfRegKind kind, int offset, int size,
                       TfError *err);
/* Appends a categorical register of `size` columns whose column i holds
 * the value labelled labels[i] (copied; non-empty, distinct). Returns its
 * index or -1 with err set. */
int model_add_categorical(TfModel *m, const char *name, int offset, int size,
                          const char *const *labels, TfError *err);

/* Appends a run-time check (op copied; bound as TfCheck.bound, -1: none).
 * Returns its index, or -1 with err set (out of memory, no op text, a bound
 * outside [0, 0.5) other than -1); model_validate checks the rest. */
int model_add_check(TfModel *m, int reg, int layer, int line, const char *op, double bound,
                    TfError *err);

/* 1 when the model prints a number at every position: read at every
 * position, its output register a scalar, no unembedding. */
int model_numeric_output(const TfModel *m);
/* Check c's bound: its own, or 1 / (2 max_len) when the file gave none (at
 * most 0.25): how far a checked register's columns may be from the one-hot
 * of a single value (runtime/engine/checks.h; the validator proves it). */
double model_check_bound(const TfModel *m, const TfCheck *c);

/* Checks that the model is a consistent transformer: embeddings, unembedding
 * and every layer's tensors exist with the shapes the dimensions imply,
 * registers tile within d_model (categorical ones with a label per column),
 * the output mode, bos and stop token are consistent, every check names a
 * categorical register and a layer. Returns 0, or -1 with err naming the problem. */
int model_validate(const TfModel *m, TfError *err);

/* Names every tensor a layer uses by the layer index (docs/weight-format.md,
 * "Tensor names"): a tensor used by one layer only is
 * "layers.<i>.<role>" (role "attn.query.weight", "mlp.fc1.bias",
 * "attn.norm.weight", "norm.weight", ...); one that several layers use (the
 * compiler stores identical matrices once) is "shared.<k>.<role>", k
 * counting the shared tensors in order of first use, role its role there.
 * The fixed tensors keep their names. 0, or -1 with err set (out of memory). */
int model_name_tensors(TfModel *m, TfError *err);


/* The tensors layer `ly` reads and the role each has there
 * ("attn.query.weight", "mlp.fc2.bias", "norm.weight", as in tensor names):
 * writes up to TF_LAYER_MAX_TENSORS of each, returns how many. */
#define TF_LAYER_MAX_TENSORS 14
int model_layer_tensors(const TfLayer *ly, int *tensors, const char **roles);

/* How many of the model's tensor fields (embeddings, unembedding, every
 * layer's) name tensor idx: 0 for a tensor the model does not read, such
 * as a checkpoint's optimizer state. */
int model_tensor_uses(const TfModel *m, int idx);
/* The same for every tensor in one pass over the layers (model_tensor_uses
 * in a loop over tensors is quadratic): uses holds n_tensors ints. */
void model_tensor_use_counts(const TfModel *m, int *uses);

/* The model's parameters: the floats of the tensors it reads (tensors
 * shared by several layers counted once; optimizer state not at all). */
size_t model_param_count(const TfModel *m);

/* The parameters three ways, over the tensors the model reads (shared ones
 * once): stored (model_param_count), non-zero, and distinct non-zero values
 * (as float32 values: AdderBoard's strict count, where a weight repeated
 * anywhere in the model counts once and zeros not at all). 0, or -1 when
 * memory ran out (err set). */
typedef struct TfParamCounts {
    size_t stored, nonzero, distinct;
} TfParamCounts;
int model_param_counts(const TfModel *m, TfParamCounts *c, TfError *err);

/* The floating-point operations of one token's pass through the layers
 * (2 per multiply-add, as tfrun --check counts them): the matrices every
 * row multiplies (each layer's weight matrices and the unembedding, not the
 * embedding's table lookups, biases, norms or activations), all stored
 * weights (dense) and only the non-zero ones (what a sparse kernel does,
 * nonzero); and per earlier position the token attends to (a KV cache's
 * context), every head's score and weighted value sum (per_position). */
typedef struct TfTokenFlops {
    double dense, nonzero, per_position;
} TfTokenFlops;
void model_token_flops(const TfModel *m, TfTokenFlops *f);

/* Writes v as the shortest "%.{1..9}g" text that reads back (strtof) as the
 * same float32 ("nan" for any NaN), into buf (TF_VALUE_TEXT_MAX bytes), a
 * number from 1 to 1e16 without an exponent ("10", not "1e+01"; as Python's
 * repr). Returns its length. */
#define TF_VALUE_TEXT_MAX 32
int model_value_text(float v, char *buf);

/* Writes token `tok` as printable text into buf (TF_TOKEN_TEXT_MAX bytes):
 * printable ASCII as itself, \n \t \r \\ escaped, other bytes as \xHH;
 * in a vocabulary of words, the token's name.
 * Returns the number of bytes written (no NUL counted; buf is terminated). */
#define TF_TOKEN_NAME_MAX 32 /* bytes of a token's name */
#define TF_TOKEN_TEXT_MAX (TF_TOKEN_NAME_MAX + 1)
int model_token_text(const TfModel *m, int tok, char *buf);

/* Sets the vocabulary from n (1..256) names, the last n_output_only of them
 * output-only tokens (0..n-1 of them): a vocabulary of characters when
 * each is one byte, else of words (token_names), each a distinct name of
 * 1..TF_TOKEN_NAME_MAX bytes of UTF-8 with no byte below 0x21 nor 0x7f (a
 * prompt of words is split at spaces), but for spaces in an output-only
 * token. Returns 0, or -1 with err naming the bad entry. */
int model_set_vocab(TfModel *m, const char *const *names, int n, int n_output_only,
                    TfError *err);

/* Token tok's name, unescaped: its character, or its word (buf: 2 bytes at least). */
const char *model_token_name(const TfModel *m, int tok, char *buf);

/* dst's vocabulary a copy of src's. Returns 0, or -1 with err set. */
int model_copy_vocab(TfModel *dst, const TfModel *src, TfError *err);

/* The token named name[0..len) (a character, or a word), -1 when none is. */
int model_token_id(const TfModel *m, const char *name, size_t len);

/* The prompt token whose name is closest to name[0..len) (edit distance at most 2),
 * -1 when none is: "did you mean" for an unknown word. */
int model_token_near(const TfModel *m, const char *name, size_t len);

#endif
