/* linear.c: packing a linear map to its non-zero block, and applying it. */
#include "linear.h"
#include "kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include "vec_psabi.h" /* the ABI note on 64-byte vectors, off */

/* A kept block at least this dense is multiplied with sgemm; sparser ones
 * one weight at a time. sgemm does about four times the multiply-adds per
 * cycle of a vector multiply-add that loads and stores its output. */
#define DENSE_MIN_FILL 0.25
/* ... and with at least this many outputs: sgemm packs its whole input block
 * on every call, which for one output (an MLP's units summed into a number
 * held in one column: balance's 576) costs more than the product itself
 * (balance: 22 % of its time in sgemm_itcopy, the case rate 20 % lower). */
#define DENSE_MIN_ROWS 4
/* A dense block of at most this many columns and weights is multiplied by
 * the loops below (four rows at a time), not by sgemm, whose packing and
 * call cost more than such a product (seed 001's adder: 24 x 19, 12 x 6;
 * the 10-digit add_decimal's 25 x 25). A learned model's 32 x 32 blocks
 * ran about 3 % slower by the loops (no fused multiply-adds) than by
 * sgemm: they stay with sgemm. */
#define SMALL_DENSE_COLS 32
#define SMALL_DENSE 640

void linear_free(TfLinear *L) {
    if (!L) return;
    free(L->rows);
    free(L->cols);
    free(L->w);
    free(L->ptr);
    free(L->idx);
    free(L->bias);
    free(L->lead);
    free(L->same_ptr);
    free(L->same);
    memset(L, 0, sizeof *L);
}

/* The repeated rows of a small dense block (TfLinear.lead; sgemm's
 * blocks form every row), when at least two rows repeat another; 0, or -1
 * (out of memory). */
static int pack_repeats(TfLinear *L) {
    int n = L->n_rows, nc = L->n_cols, *of = malloc(((size_t)n + 1) * sizeof(int)), n_lead = 0;
    if (!of) return -1;
    for (int k = 0; k < n; k++) { /* of[k]: the first row equal to row k */
        of[k] = k;
        for (int j = 0; j < k && of[k] == k; j++)
            if (of[j] == j && memcmp(L->w + (size_t)j * nc, L->w + (size_t)k * nc,
                                     (size_t)nc * sizeof(float)) == 0)
                of[k] = j;
        n_lead += of[k] == k;
    }
    if (n - n_lead < 2) {
        free(of);
        return 0;
    }
    L->lead = malloc((size_t)n_lead * sizeof(int));
    L->same_ptr = malloc(((size_t)n_lead + 1) * sizeof(int));
    L->same = malloc((size_t)n * sizeof(int));
    if (!L->lead || !L->same_ptr || !L->same) {
        free(of);
        return -1;
    }
    int g = 0, m = 0;
    for (int k = 0; k < n; k++) {
        if (of[k] != k) continue;
        L->lead[g] = k;
        L->same_ptr[g++] = m;
        for (int j = k; j < n; j++)
            if (of[j] == k) L->same[m++] = j;
    }
    L->same_ptr[g] = m;
    L->n_lead = n_lead;
    free(of);
    return 0;
}

int linear_pack(TfLinear *L, const float *W, const float *b, int n_out, int n_in,
                const int *in_map, TfError *err) {
    memset(L, 0, sizeof *L);
    L->n_out = n_out;
    L->n_in = n_in;
    int n_feat = 0; /* size of the input buffer's index space */
    for (int c = 0; c < n_in; c++) {
        int f = in_map ? in_map[c] : c;
        if (f + 1 > n_feat) n_feat = f + 1;
    }
    char *row_used = calloc((size_t)n_out + 1, 1);
    char *feat_used = calloc((size_t)n_feat + 1, 1);
    L->rows = malloc(((size_t)n_out + 1) * sizeof(int));
    if (!row_used || !feat_used || !L->rows) goto oom;

    int has_bias = 0;
    for (int o = 0; o < n_out; o++) {
        int any = b && b[o] != 0.0f;
        has_bias |= any;
        for (int c = 0; c < n_in; c++) {
            int f = in_map ? in_map[c] : c;
            if (f >= 0 && W[(size_t)o * n_in + c] != 0.0f) {
                any = 1;
                feat_used[f] = 1;
                L->nnz++;
            }
        }
        if (any) L->rows[L->n_rows++] = o;
    }
    L->cols = malloc(((size_t)n_feat + 1) * sizeof(int));
    if (!L->cols) goto oom;
    for (int f = 0; f < n_feat; f++)
        if (feat_used[f]) L->cols[L->n_cols++] = f;

    // Position of each used feature within cols (for the dense block).
    int *feat_pos = malloc(((size_t)n_feat + 1) * sizeof(int));
    if (!feat_pos) goto oom;
    for (int k = 0; k < L->n_cols; k++) feat_pos[L->cols[k]] = k;

    double block = (double)L->n_rows * (double)L->n_cols;
    L->dense = block > 0 && L->n_rows >= DENSE_MIN_ROWS && (double)L->nnz >= DENSE_MIN_FILL * block;
    if (L->dense) {
        L->w = calloc((size_t)L->n_rows * (size_t)L->n_cols + 1, sizeof(float));
        if (!L->w) goto oom_pos;
        for (int k = 0; k < L->n_rows; k++)
            for (int c = 0; c < n_in; c++) {
                int f = in_map ? in_map[c] : c;
                float v = W[(size_t)L->rows[k] * n_in + c];
                // Several columns may map to one feature: their weights add.
                if (f >= 0 && v != 0.0f) L->w[(size_t)k * L->n_cols + feat_pos[f]] += v;
            }
    } else {
        L->ptr = malloc(((size_t)L->n_rows + 1) * sizeof(int));
        L->w = malloc(((size_t)L->nnz + 1) * sizeof(float));
        L->idx = malloc(((size_t)L->nnz + 1) * sizeof(int));
        if (!L->ptr || !L->w || !L->idx) goto oom_pos;
        long j = 0;
        for (int k = 0; k < L->n_rows; k++) {
            L->ptr[k] = (int)j;
            for (int c = 0; c < n_in; c++) {
                int f = in_map ? in_map[c] : c;
                float v = W[(size_t)L->rows[k] * n_in + c];
                if (f < 0 || v == 0.0f) continue;
                L->idx[j] = f;
                L->w[j] = v;
                j++;
            }
        }
        L->ptr[L->n_rows] = (int)j;
    }
    if (has_bias) {
        L->bias = malloc(((size_t)L->n_rows + 1) * sizeof(float));
        if (!L->bias) goto oom_pos;
        for (int k = 0; k < L->n_rows; k++) L->bias[k] = b[L->rows[k]];
    }
    if (L->dense && linear_fused(L) && pack_repeats(L) < 0) goto oom_pos;
    free(feat_pos);
    free(row_used);
    free(feat_used);
    return 0;
oom_pos:
    free(feat_pos);
oom:
    free(row_used);
    free(feat_used);
    linear_free(L);
    tf_error_set(err, "out of memory packing a %dx%d matrix", n_out, n_in);
    return -1;
}

long linear_cost(const TfLinear *L) {
    return L->dense ? (long)(L->lead ? L->n_lead : L->n_rows) * L->n_cols : L->nnz;
}

static void zero_rows(const TfLinear *L, float *y, int ldy, int n) {
    for (int k = 0; k < L->n_rows; k++) memset(y + (size_t)k * ldy, 0, (size_t)n * sizeof(float));
}

/* The bias is added last, after the products, as PyTorch's addmm does: the
 * seed's StepPosition (x R + 1000) depends on that order to the last bit. */
static void add_bias(const TfLinear *L, float *y, int ldy, int n) {
    if (!L->bias) return;
    for (int k = 0; k < L->n_rows; k++) {
        float *yk = y + (size_t)k * ldy, b = L->bias[k];
        for (int r = 0; r < n; r++) yk[r] += b;
    }
}

/* Rows to a chunk of csr_row: sums that stay in registers. */
enum { CSR_CHUNK = 32 };

/* One packed row of a CSR map over n batch rows: y[r] = (((+0 + w[0]
 * x[idx[0]][r]) + w[1] x[idx[1]][r]) + ...) + b, the sum in the order of
 * the weights and the bias last (with_bias), as the row-by-row loop forms
 * it; the running sums are kept in a chunk of CSR_CHUNK rows, so y is
 * written once and never read. */
/* Sixteen batch rows as one vector (GCC's and clang's vector extension),
 * so that a chunk's sums are registers whatever the compiler would choose
 * to vectorize (left alone, it vectorized over the weights, with gathers).
 * No such vector is passed or returned, so the ABI note (-Wpsabi) is moot. */
typedef float Rows16 __attribute__((vector_size(16 * sizeof(float))));
typedef uint32_t RowBits __attribute__((vector_size(16 * sizeof(uint32_t))));

/* What csr_row does with a row's sum (linear.h's TfLinearMode). */
enum { CSR_STORE = TF_LINEAR_STORE, CSR_RELU = TF_LINEAR_RELU, CSR_ADD = TF_LINEAR_ADD };

/* An exponent of all ones (infinite or NaN) carries into bit 31 when one
 * more is added: an OR of integers, which vectorizes. */
#define NONFINITE_BITS(u) (((u) & 0x7f800000u) + 0x00800000u)

/* Sixteen finished sums v (bias included) to dst as mode says; an added
 * sum's non-finite bits into *bits. */
#define FINISH16(dst, v, mode, bits)                                                             \
    do {                                                                                         \
        Rows16 f_ = (v);                                                                         \
        if ((mode) == CSR_RELU) { /* x > 0 ? x : +0, as relu_forward */                          \
            f_ = (Rows16)((RowBits)f_ & (RowBits)(f_ > 0.0f));                                   \
        } else if ((mode) == CSR_ADD) {                                                          \
            Rows16 y_;                                                                           \
            memcpy(&y_, (dst), sizeof y_);                                                       \
            f_ = y_ + f_;                                                                        \
            (bits) |= NONFINITE_BITS((RowBits)f_);                                               \
        }                                                                                        \
        memcpy((dst), &f_, sizeof f_);                                                           \
    } while (0)

/* One finished sum acc (bias included) to *dst as mode says. */
static inline __attribute__((always_inline)) void finish1(float *dst, float acc, int mode,
                                                          uint32_t *bad) {
    if (mode == CSR_RELU) {
        acc = acc > 0.0f ? acc : 0.0f;
    } else if (mode == CSR_ADD) {
        uint32_t u;
        acc = *dst + acc;
        memcpy(&u, &acc, sizeof u);
        *bad |= NONFINITE_BITS(u);
    }
    *dst = acc;
}

static inline __attribute__((always_inline)) void csr_row(float *restrict y, const float *x,
                                                          int ldx, const float *w, const int *idx,
                                                          int nw, float b, int with_bias, int n,
                                                          int mode, RowBits *vbad, uint32_t *bad) {
    int r0 = 0;
    RowBits bits = *vbad;
    for (; r0 + CSR_CHUNK <= n; r0 += CSR_CHUNK) {
        Rows16 a0 = {0}, a1 = {0};
        for (int j = 0; j < nw; j++) {
            const float *xj = x + (size_t)idx[j] * ldx + r0;
            float wj = w[j];
            Rows16 x0, x1; /* memcpy: no vector passed or returned (a psabi change) */
            memcpy(&x0, xj, sizeof x0);
            memcpy(&x1, xj + 16, sizeof x1);
            a0 += wj * x0;
            a1 += wj * x1;
        }
        if (with_bias) {
            a0 += b;
            a1 += b;
        }
        FINISH16(y + r0, a0, mode, bits);
        FINISH16(y + r0 + 16, a1, mode, bits);
    }
    for (int r = r0; r < n; r++) {
        float acc = 0.0f;
        for (int j = 0; j < nw; j++) acc += w[j] * x[(size_t)idx[j] * ldx + r];
        finish1(y + r, with_bias ? acc + b : acc, mode, bad);
    }
    *vbad = bits;
}

/* The non-finite bits of a map's added sums, lane by lane, into one. */
static inline __attribute__((always_inline)) uint32_t fold_bits(RowBits v) {
    typedef uint32_t Bits8 __attribute__((vector_size(8 * sizeof(uint32_t))));
    typedef uint32_t Bits4 __attribute__((vector_size(4 * sizeof(uint32_t))));
    Bits8 h = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) |
              __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    Bits4 g = __builtin_shufflevector(h, h, 0, 1, 2, 3) | __builtin_shufflevector(h, h, 4, 5, 6, 7);
    return (g[0] | g[1]) | (g[2] | g[3]);
}

/* Every row of a CSR map (csr_row), compiled three times from this one body
 * as the attention kernel is (kernels.h): the baseline's vectors, AVX2's
 * and AVX-512's, chosen at run time. Each lane adds the same terms in the
 * same order and -ffp-contract=off keeps FMA out, so the three give the
 * same bits (tests/test_engine.c, test_linear_matches_naive, runs each path
 * against the naive twin); a Rows16 is one AVX-512
 * register, two AVX2 ones or four SSE ones. Packed row k goes to y + k ldy,
 * or with CSR_ADD to y + rows[k] ldy. */
static inline __attribute__((always_inline)) uint32_t csr_rows(const TfLinear *L, float *y,
                                                               int ldy, const float *x, int ldx,
                                                               int n, int mode) {
    uint32_t bad = 0;
    RowBits vbad = {0};
    for (int k = 0; k < L->n_rows; k++) {
        float *yk = y + (size_t)(mode == CSR_ADD ? L->rows[k] : k) * ldy;
        int nw = L->ptr[k + 1] - L->ptr[k];
        const float *w = L->w + L->ptr[k];
        const int *idx = L->idx + L->ptr[k];
        float b = L->bias ? L->bias[k] : 0.0f;
        // Rows of one and two weights (a compiled program's most) with
        // their loops' counts known.
        if (nw == 1)
            csr_row(yk, x, ldx, w, idx, 1, b, L->bias != NULL, n, mode, &vbad, &bad);
        else if (nw == 2)
            csr_row(yk, x, ldx, w, idx, 2, b, L->bias != NULL, n, mode, &vbad, &bad);
        else
            csr_row(yk, x, ldx, w, idx, nw, b, L->bias != NULL, n, mode, &vbad, &bad);
    }
    return bad | fold_bits(vbad);
}

/* The sums of KN <= 4 rows of a dense block (row kk's weights wr[kk], one
 * per column) over the batch rows r0..r0+31, each in the order of the
 * columns from +0: a[kk][h] for the rows r0 + 16 h onwards. */
static inline __attribute__((always_inline)) void
dense_sums(const TfLinear *L, const float *const *wr, const float *x, int ldx, int r0,
           Rows16 a[4][2], int KN) {
    for (int kk = 0; kk < KN; kk++) a[kk][0] = a[kk][1] = (Rows16){0};
    for (int c = 0; c < L->n_cols; c++) {
        const float *xc = x + (size_t)L->cols[c] * ldx + r0;
        Rows16 x0, x1;
        memcpy(&x0, xc, sizeof x0);
        memcpy(&x1, xc + 16, sizeof x1);
        for (int kk = 0; kk < KN; kk++) {
            float wk = wr[kk][c];
            a[kk][0] += wk * x0;
            a[kk][1] += wk * x1;
        }
    }
}

/* KN <= 4 consecutive packed rows k0.. of a dense block (weights w, n_cols
 * apart) at once, so that each input vector loaded serves KN sums: each
 * sum in the order of the columns, the bias last, as the naive twin forms
 * it; then what mode says (csr_row). */
static inline __attribute__((always_inline)) void
dense_block(const TfLinear *L, int k0, float *y, int ldy, const float *x, int ldx, int n,
            int mode, RowBits *vbad, uint32_t *bad, int KN) {
    const int nc = L->n_cols, *cols = L->cols;
    const float *w = L->w + (size_t)k0 * nc, *wr[4];
    float *yk[4];
    for (int kk = 0; kk < KN; kk++) {
        yk[kk] = y + (size_t)(mode == CSR_ADD ? L->rows[k0 + kk] : k0 + kk) * ldy;
        wr[kk] = w + (size_t)kk * nc;
    }
    RowBits bits = *vbad;
    int r0 = 0;
    for (; r0 + 32 <= n; r0 += 32) {
        Rows16 a[4][2];
        dense_sums(L, wr, x, ldx, r0, a, KN);
        for (int kk = 0; kk < KN; kk++)
            for (int h = 0; h < 2; h++) {
                Rows16 v = a[kk][h];
                if (L->bias) v += L->bias[k0 + kk];
                FINISH16(yk[kk] + r0 + 16 * h, v, mode, bits);
            }
    }
    for (int kk = 0; kk < KN; kk++)
        for (int r = r0; r < n; r++) {
            float acc = 0.0f;
            for (int c = 0; c < nc; c++)
                acc += w[(size_t)kk * nc + c] * x[(size_t)cols[c] * ldx + r];
            finish1(yk[kk] + r, L->bias ? acc + L->bias[k0 + kk] : acc, mode, bad);
        }
    *vbad = bits;
}

/* Every row of a small dense block (linear_fused), four at a time. */
static inline __attribute__((always_inline)) uint32_t dense_rows(const TfLinear *L, float *y,
                                                                 int ldy, const float *x, int ldx,
                                                                 int n, int mode) {
    uint32_t bad = 0;
    RowBits vbad = {0};
    int k0 = 0;
    for (; k0 + 4 <= L->n_rows; k0 += 4)
        dense_block(L, k0, y, ldy, x, ldx, n, mode, &vbad, &bad, 4);
    switch (L->n_rows - k0) {
    case 3: dense_block(L, k0, y, ldy, x, ldx, n, mode, &vbad, &bad, 3); break;
    case 2: dense_block(L, k0, y, ldy, x, ldx, n, mode, &vbad, &bad, 2); break;
    case 1: dense_block(L, k0, y, ldy, x, ldx, n, mode, &vbad, &bad, 1); break;
    default: break;
    }
    return bad | fold_bits(vbad);
}

/* KN <= 4 distinct rows lead[g0..] of a dense block whose rows repeat
 * (TfLinear.lead) over the batch rows r0..r0+31: each sum formed once, as
 * dense_block forms it, then each row equal to it adds its own bias and
 * finishes as mode says. */
static inline __attribute__((always_inline)) void
repeat_block(const TfLinear *L, int g0, float *y, int ldy, const float *x, int ldx, int r0,
             int mode, RowBits *bits, int KN) {
    const float *wr[4];
    for (int kk = 0; kk < KN; kk++) wr[kk] = L->w + (size_t)L->lead[g0 + kk] * L->n_cols;
    Rows16 a[4][2];
    dense_sums(L, wr, x, ldx, r0, a, KN);
    for (int kk = 0; kk < KN; kk++)
        for (int i = L->same_ptr[g0 + kk]; i < L->same_ptr[g0 + kk + 1]; i++) {
            int k = L->same[i];
            float *yk = y + (size_t)(mode == CSR_ADD ? L->rows[k] : k) * ldy + r0;
            for (int h = 0; h < 2; h++) {
                Rows16 v = a[kk][h];
                if (L->bias) v += L->bias[k];
                FINISH16(yk + 16 * h, v, mode, *bits);
            }
        }
}

/* Every row of a small dense block whose rows repeat, 32 batch rows at a
 * time, four distinct rows at once. */
static inline __attribute__((always_inline)) uint32_t repeat_rows(const TfLinear *L, float *y,
                                                                  int ldy, const float *x,
                                                                  int ldx, int n, int mode) {
    uint32_t bad = 0;
    RowBits vbad = {0};
    const int nc = L->n_cols, *cols = L->cols;
    int r0 = 0;
    for (; r0 + 32 <= n; r0 += 32) {
        int g0 = 0;
        for (; g0 + 4 <= L->n_lead; g0 += 4)
            repeat_block(L, g0, y, ldy, x, ldx, r0, mode, &vbad, 4);
        switch (L->n_lead - g0) {
        case 3: repeat_block(L, g0, y, ldy, x, ldx, r0, mode, &vbad, 3); break;
        case 2: repeat_block(L, g0, y, ldy, x, ldx, r0, mode, &vbad, 2); break;
        case 1: repeat_block(L, g0, y, ldy, x, ldx, r0, mode, &vbad, 1); break;
        default: break;
        }
    }
    for (int g = 0; g < L->n_lead; g++)
        for (int r = r0; r < n; r++) {
            const float *w = L->w + (size_t)L->lead[g] * nc;
            float acc = 0.0f;
            for (int c = 0; c < nc; c++) acc += w[c] * x[(size_t)cols[c] * ldx + r];
            for (int i = L->same_ptr[g]; i < L->same_ptr[g + 1]; i++) {
                int k = L->same[i];
                float *yk = y + (size_t)(mode == CSR_ADD ? L->rows[k] : k) * ldy;
                finish1(yk + r, L->bias ? acc + L->bias[k] : acc, mode, &bad);
            }
        }
    return bad | fold_bits(vbad);
}

/* A CSR map or a small dense block (linear_fused), rows as mode says. */
static inline __attribute__((always_inline)) uint32_t fused_rows(const TfLinear *L, float *y,
                                                                 int ldy, const float *x, int ldx,
                                                                 int n, int mode) {
    if (!L->dense) return csr_rows(L, y, ldy, x, ldx, n, mode);
    return L->lead ? repeat_rows(L, y, ldy, x, ldx, n, mode)
                   : dense_rows(L, y, ldy, x, ldx, n, mode);
}

/* The loops below compiled three times, as the attention kernel is
 * (kernels.h): the baseline's vectors, AVX2's and AVX-512's; NAME_pick(s)
 * is the copy for instruction set s. PARAMS and ARGS: the parameter list
 * and the call's arguments, in parentheses. */
#if defined(__x86_64__) && defined(__GNUC__)
#define SIMD_COPIES(NAME, BODY, PARAMS, ARGS)                                                    \
    static uint32_t NAME##_generic PARAMS { return BODY ARGS; }                                  \
    __attribute__((target("avx2"))) static uint32_t NAME##_avx2 PARAMS { return BODY ARGS; }     \
    __attribute__((target("avx512f,avx2"))) static uint32_t NAME##_avx512 PARAMS {               \
        return BODY ARGS;                                                                        \
    }                                                                                            \
    static uint32_t(*NAME##_pick(TfSimd s)) PARAMS {                                             \
        return s == TF_SIMD_AVX512 ? NAME##_avx512                                               \
               : s == TF_SIMD_AVX2 ? NAME##_avx2                                                 \
                                   : NAME##_generic;                                             \
    }
#else
#define SIMD_COPIES(NAME, BODY, PARAMS, ARGS)                                                    \
    static uint32_t NAME##_generic PARAMS { return BODY ARGS; }                                  \
    static uint32_t(*NAME##_pick(TfSimd s)) PARAMS {                                             \
        (void)s;                                                                                 \
        return NAME##_generic;                                                                   \
    }
#endif

SIMD_COPIES(csr, fused_rows,
            (const TfLinear *L, float *y, int ldy, const float *x, int ldx, int n, int mode),
            (L, y, ldy, x, ldx, n, mode))

int linear_mlp_pairs(const TfLinear *fc1, const TfLinear *fc2) {
    if (fc1->dense || fc2->dense || fc2->n_rows == 0 || fc2->nnz != fc2->n_rows) return 0;
    int n_feat = 0; /* the residual columns either map names */
    for (int k = 0; k < fc2->n_rows; k++) {
        int u = fc2->idx[k];
        if (fc1->ptr[u + 1] - fc1->ptr[u] != 1) return 0;
        if (fc2->rows[k] + 1 > n_feat) n_feat = fc2->rows[k] + 1;
        if (fc1->idx[fc1->ptr[u]] + 1 > n_feat) n_feat = fc1->idx[fc1->ptr[u]] + 1;
    }
    // Pair k may not read a column an earlier pair wrote (the two passes
    // read every input before writing any output).
    int *writer = malloc(((size_t)n_feat + 1) * sizeof(int)), ok = writer != NULL;
    for (int c = 0; ok && c < n_feat; c++) writer[c] = -1;
    for (int k = 0; ok && k < fc2->n_rows; k++) {
        int w = writer[fc1->idx[fc1->ptr[fc2->idx[k]]]];
        ok = w < 0 || w == k;
        writer[fc2->rows[k]] = k;
    }
    free(writer);
    return ok;
}

/* linear_mlp_pairs_forward's rows: pair k's unit u = fc2->idx[k] reads
 * column c with w1 (bias b1), fc2's row adds w2 times its ReLU (bias b2)
 * to column fc2->rows[k]: per row, ((+0 + w1 x) + b1) through the ReLU,
 * then y + ((+0 + w2 h) + b2), the operations and order of the two maps'
 * loops (csr_row), in one pass. */
static inline __attribute__((always_inline)) uint32_t pair_rows(const TfLinear *fc1,
                                                                const TfLinear *fc2, float *y,
                                                                int ldy, const float *x, int ldx,
                                                                int n) {
    uint32_t bad = 0;
    RowBits bits = {0};
    const Rows16 zero = {0};
    for (int k = 0; k < fc2->n_rows; k++) {
        int u = fc2->idx[k], j = fc1->ptr[u];
        const float *xc = x + (size_t)fc1->idx[j] * ldx;
        float w1 = fc1->w[j], w2 = fc2->w[k];
        float b1 = fc1->bias ? fc1->bias[u] : 0.0f, b2 = fc2->bias ? fc2->bias[k] : 0.0f;
        float *yk = y + (size_t)fc2->rows[k] * ldy;
        int r = 0;
        for (; r + 16 <= n; r += 16) {
            Rows16 a;
            memcpy(&a, xc + r, sizeof a);
            Rows16 h = zero + w1 * a;
            if (fc1->bias) h += b1;
            FINISH16(&a, h, CSR_RELU, bits); /* a = ReLU(h) */
            Rows16 o = zero + w2 * a;
            if (fc2->bias) o += b2;
            FINISH16(yk + r, o, CSR_ADD, bits);
        }
        for (; r < n; r++) {
            float h = 0.0f + w1 * xc[r];
            if (fc1->bias) h += b1;
            h = h > 0.0f ? h : 0.0f;
            float o = 0.0f + w2 * h;
            finish1(yk + r, fc2->bias ? o + b2 : o, CSR_ADD, &bad);
        }
    }
    return bad | fold_bits(bits);
}

SIMD_COPIES(pairs, pair_rows,
            (const TfLinear *fc1, const TfLinear *fc2, float *y, int ldy, const float *x, int ldx,
             int n),
            (fc1, fc2, y, ldy, x, ldx, n))

int linear_mlp_pairs_forward(const TfLinear *fc1, const TfLinear *fc2, float *y, int ldy,
                             const float *x, int ldx, int n, TfSimd s) {
    if (n == 0) return 0;
    return pairs_pick(s)(fc1, fc2, y, ldy, x, ldx, n) >> 31 ? 1 : 0;
}

void linear_forward(const TfLinear *L, float *y, int ldy, const float *x, int ldx, int n,
                    float *scratch) {
    linear_forward_simd(L, y, ldy, x, ldx, n, scratch, simd_active());
}

void linear_forward_simd(const TfLinear *L, float *y, int ldy, const float *x, int ldx, int n,
                         float *scratch, TfSimd s) {
    if (L->n_rows == 0 || n == 0) return;
    if (L->n_cols == 0) {
        zero_rows(L, y, ldy, n);
        add_bias(L, y, ldy, n);
        return;
    }
    if (L->dense && !linear_fused(L)) {
        // Contiguous columns are read in place; others are gathered first.
        const float *xb = x + (size_t)L->cols[0] * ldx;
        int ldb = ldx;
        if (L->cols[L->n_cols - 1] - L->cols[0] != L->n_cols - 1) {
            for (int k = 0; k < L->n_cols; k++)
                memcpy(scratch + (size_t)k * n, x + (size_t)L->cols[k] * ldx,
                       (size_t)n * sizeof(float));
            xb = scratch;
            ldb = n;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L->n_rows, n, L->n_cols, 1.0f,
                    L->w, L->n_cols, xb, ldb, 0.0f, y, ldy);
        add_bias(L, y, ldy, n);
        return;
    }
    csr_pick(s)(L, y, ldy, x, ldx, n, CSR_STORE);
}

int linear_fused(const TfLinear *L) {
    return !L->dense ||
           (L->n_cols <= SMALL_DENSE_COLS && (long)L->n_rows * L->n_cols <= SMALL_DENSE);
}

int linear_forward_fused(const TfLinear *L, TfLinearMode mode, float *y, int ldy, const float *x,
                         int ldx, int n, TfSimd s) {
    if (L->n_rows == 0 || n == 0) return 0;
    return csr_pick(s)(L, y, ldy, x, ldx, n, (int)mode) >> 31 ? 1 : 0;
}

void linear_forward_naive(const TfLinear *L, float *y, int ldy, const float *x, int ldx, int n) {
    for (int k = 0; k < L->n_rows; k++) {
        for (int r = 0; r < n; r++) {
            float acc = 0.0f;
            if (L->dense) {
                for (int c = 0; c < L->n_cols; c++)
                    acc += L->w[(size_t)k * L->n_cols + c] * x[(size_t)L->cols[c] * ldx + r];
            } else {
                for (int j = L->ptr[k]; j < L->ptr[k + 1]; j++)
                    acc += L->w[j] * x[(size_t)L->idx[j] * ldx + r];
            }
            y[(size_t)k * ldy + r] = acc + (L->bias ? L->bias[k] : 0.0f);
        }
    }
}
