/* kernels.c: matmul, activations and attention, each with its naive twin. */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS (blas_reserve) */
#include "kernels.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__unix__) && !defined(__EMSCRIPTEN__)
#include <sys/mman.h>
#endif

/* x86-64 (gcc, clang): kernels compiled for AVX2 and AVX-512 besides the
 * baseline, chosen at run time (simd_best). Elsewhere (the WebAssembly
 * build) only the portable loops. */
#if defined(__x86_64__) && defined(__GNUC__)
#define TF_SIMD_X86 1
#endif

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

#include "exp_vec.h"
#include "vec8.h"
#include "vec_psabi.h" /* the ABI note on 64-byte vectors, off */

/* ---- attention over a block of rows (kernels.h) --------------------------- */

/* e^z for a softmax exponent z <= 0 (or NaN): exp_vec, and below -80 as
 * e^(z + 40) e^-40, so that the tiny weights down to expf's underflow at
 * -104 stay (exp_vec stops at -87): which weights are exactly 0 is the
 * same as with expf. */
static inline float exp_softmax(float z) {
    int low = z < -80.0f;
    float y = exp_vec(low ? z + 40.0f : z);
    y = low ? y * 4.24835426e-18f : y; /* e^-40 */
    return z < -104.0f ? 0.0f : y;
}

/* Lane i of position t of a cache block: how the lanes' sequences lie. */
enum { LANES_GATHER, LANES_SAME, LANES_CONTIGUOUS };

#define B TF_ATT_LANES
/* The lanes as one vector (GCC's and clang's vector extension): the loops
 * below then run over positions with the lanes in a register, whatever the
 * compiler would have chosen to vectorize. */
/* Passing a 64-byte vector without AVX-512 changes the ABI, say gcc and
 * clang: these helpers are static and always inlined, so there is no call
 * to disagree about. */
typedef float Lanes __attribute__((vector_size(B * sizeof(float))));
typedef int32_t LaneMask __attribute__((vector_size(B * sizeof(float))));
_Static_assert(B == 16, "lanes_at broadcasts to 16 lanes");

static inline __attribute__((always_inline)) Lanes lanes_load(const float *p) {
    Lanes v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* A macro, as LANES_SELECT below: a function taking a vector would draw
 * GCC's note that the ABI of passing one changed. */
#define LANES_STORE(p, v)                                                                        \
    do {                                                                                         \
        Lanes lanes_v_ = (v);                                                                    \
        memcpy((p), &lanes_v_, sizeof lanes_v_);                                                 \
    } while (0)

/* 1 when some lane of the mask *m is set: halves ORed in registers (a
 * copy to memory and eight scalar loads cost a tenth of the kernel). */
typedef int32_t Mask8 __attribute__((vector_size(8 * sizeof(int32_t))));
typedef int32_t Mask4 __attribute__((vector_size(4 * sizeof(int32_t))));
static inline __attribute__((always_inline)) uint32_t lanes_or(const LaneMask *m) {
    LaneMask v = *m;
    Mask8 h = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) |
              __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    Mask4 g = __builtin_shufflevector(h, h, 0, 1, 2, 3) | __builtin_shufflevector(h, h, 4, 5, 6, 7);
    g |= __builtin_shufflevector(g, g, 2, 3, 0, 1);
    return (uint32_t)(g[0] | g[1]);
}
static inline __attribute__((always_inline)) int lanes_any(const LaneMask *m) {
    return lanes_or(m) != 0;
}

/* The largest lane of *m, by halves in registers. */
#define MASK_MAX(a, b) ((((a) > (b)) & (a)) | (~((a) > (b)) & (b)))
static inline __attribute__((always_inline)) int lanes_max(const LaneMask *m) {
    LaneMask v = *m;
    Mask8 h = MASK_MAX(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
                       __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
    Mask4 g = MASK_MAX(__builtin_shufflevector(h, h, 0, 1, 2, 3),
                       __builtin_shufflevector(h, h, 4, 5, 6, 7));
    g = MASK_MAX(g, __builtin_shufflevector(g, g, 2, 3, 0, 1));
    return g[1] > g[0] ? g[1] : g[0];
}
#undef MASK_MAX

/* Lane i of a where m[i] is set (all ones), else of b. */
#define LANES_SELECT(m, a, b) ((Lanes)(((m) & (LaneMask)(a)) | (~(m) & (LaneMask)(b))))

/* exp_softmax (through exp_vec, exp_vec.h) of every lane, as vector
 * operations: the same operations in the same order, so the same bits, and
 * vectors whatever the compiler would make of a loop over the lanes. */
static inline __attribute__((always_inline)) Lanes lanes_exp_softmax(Lanes z) {
    const Lanes zero = {0};
    LaneMask low = z < -80.0f;
    Lanes x = LANES_SELECT(low, z + 40.0f, z), y;
    EXP_VEC_LANES(Lanes, LaneMask, y, x); /* exp_vec(x) */
    // back in exp_softmax
    y = LANES_SELECT(low, y * 4.24835426e-18f, y); /* e^-40 */
    return LANES_SELECT(z < -104.0f, zero, y);
}

/* Lane i of position t: c[t * stride + seq[i]], the lanes' sequences one
 * (a broadcast), consecutive (a vector load) or any. */
static inline __attribute__((always_inline)) Lanes lanes_at(const float *restrict c, long t,
                                                            long stride, const int *seq,
                                                            int mode) {
    Lanes x;
    if (mode == LANES_SAME) {
        float ct = c[t * stride + seq[0]];
        x = (Lanes){ct, ct, ct, ct, ct, ct, ct, ct, ct, ct, ct, ct, ct, ct, ct, ct};
    } else if (mode == LANES_CONTIGUOUS) {
        x = lanes_load(c + t * stride + seq[0]);
    } else {
        for (int i = 0; i < B; i++) x[i] = c[t * stride + seq[i]];
    }
    return x;
}

/* Output channels j..j+nj-1 (nj <= VCHUNK, a constant where this is
 * inlined, so that the sums stay in registers): out[(j - j0 + jj) ldo +
 * col[i]] = sum over the positions pos[0..n-1] (increasing), in order, of
 * the non-zero att[t * B + i] times c[jj * S + t * stride + seq[i]] (c:
 * channel j's values); their sums are independent chains. A zero weight
 * adds +0 (a skipped term), so positions where every lane's weight is 0 are
 * left out of pos (NULL: positions 0..n-1). add: out gains the sums
 * (out + sum), and *chk gains out - out, which is NaN in the lanes where
 * that came out infinite or NaN (+0 elsewhere). */
enum { VCHUNK = 8 };
static inline __attribute__((always_inline)) void
lanes_weighted_sums(float *out, int ldo, const int *col, int W, int out_contiguous,
                    const float *restrict att, const float *restrict c, long S, long stride,
                    const int *seq, const int *pos, int n, int mode, int nj, int add,
                    Lanes *chk) {
    Lanes acc[VCHUNK], zero = {0};
    for (int jj = 0; jj < nj; jj++) acc[jj] = zero;
    // One position of weight 1 in every lane (hard attention where every
    // lane reads the same position): each sum is +0 + v, the same bits.
    if (n == 1) {
        int t = pos ? pos[0] : 0;
        LaneMask not_one = lanes_load(att + t * B) != 1.0f;
        if (!lanes_any(&not_one)) {
            for (int jj = 0; jj < nj; jj++)
                acc[jj] = zero + lanes_at(c + jj * S, t, stride, seq, mode);
            n = 0;
        }
    }
    for (int x = 0; x < n; x++) {
        int t = pos ? pos[x] : x;
        Lanes a = lanes_load(att + t * B);
        LaneMask keep = a != zero;
        for (int jj = 0; jj < nj; jj++) {
            Lanes term = a * lanes_at(c + jj * S, t, stride, seq, mode);
            acc[jj] += (Lanes)((LaneMask)term & keep);
        }
    }
    for (int jj = 0; jj < nj; jj++) {
        float *oj = out + (long)jj * ldo;
        if (out_contiguous && add) {
            Lanes r = lanes_load(oj + col[0]) + acc[jj];
            LANES_STORE(oj + col[0], r);
            *chk += r - r;
        } else if (out_contiguous) {
            LANES_STORE(oj + col[0], acc[jj]);
        } else if (add) {
            for (int i = 0; i < W; i++) {
                oj[col[i]] += acc[jj][i];
                (*chk)[i] += oj[col[i]] - oj[col[i]];
            }
        } else {
            for (int i = 0; i < W; i++) oj[col[i]] = acc[jj][i];
        }
    }
}

/* The scores of a head with NP <= 4 live channel pairs (a compiled head's
 * few; 0: every score 0): each lane's channels added in order at each
 * position, scaled, -inf past the lane's T; returns each lane's maximum. The queries stay in
 * registers (the general loop keeps them in an array indexed at run time,
 * through memory); a channel whose query is 0 in every lane is not left out
 * here, which changes no sum (it adds +-0 to a sum that starts at +0: the
 * keys are finite). */
static inline __attribute__((always_inline)) Lanes
scores_few(float *att, const float *q, int ldq, const int *col, int out_contiguous, int W,
           const int *pq, const int *pk, const float *k, long S, long kstride, const int *sq,
           int Tmax, LaneMask tlv, Lanes sc, int mode, int NP) {
    Lanes w[4], mxv = (Lanes){0} - INFINITY, minf = mxv;
    const float *kp[4];
    for (int p = 0; p < NP; p++) {
        const float *qp = q + (long)pq[p] * ldq;
        if (out_contiguous)
            w[p] = lanes_load(qp + col[0]);
        else
            for (int i = 0; i < B; i++) w[p][i] = i < W ? qp[col[i]] : 0.0f;
        kp[p] = k + (long)pk[p] * S;
    }
    for (int t = 0; t < Tmax; t++) {
        Lanes acc = {0};
        for (int p = 0; p < NP; p++) acc += w[p] * lanes_at(kp[p], t, kstride, sq, mode);
        LaneMask seen = ((LaneMask){0} + t) < tlv, more;
        acc = LANES_SELECT(seen, acc * sc, minf);
        more = acc > mxv;
        mxv = LANES_SELECT(more, acc, mxv);
        LANES_STORE(att + t * B, acc);
    }
    return mxv;
}

/* The body of attention_block_forward, for one lane mode. Lanes past W
 * repeat lane 0's sequence at T = 1 with a zero query (kept finite, then
 * dropped). Adding a skipped (zero-weight) term as +0 changes no sum: a sum
 * that starts at +0 never becomes -0. */
static inline __attribute__((always_inline)) void
attention_block_body(float *out, int ldo, float *sums, int *used, float *att, float *scores,
                     const float *q, int ldq, const int *col, const int *pq, const int *pk, int np,
                     const float *k, int nk, const float *v, int nv, int j0, int j1, int S,
                     const int *sq, const int *tl, int Tmax, int W, float scale, int add, int mode,
                     int kmode) {
    // Scores, the channels of a chunk added in order at each position;
    // the last chunk scales them, gives the positions a lane does not see
    // -inf (weight 0), and keeps each lane's maximum.
    enum { CHUNK = 16 };
    Lanes w[CHUNK], zero = {0}, mxv, minf, sc;
    LaneMask tlv;
    const float *kp[CHUNK];
    long kstride = (long)nk * S;
    mxv = minf = (Lanes){0} - INFINITY;
    sc = (Lanes){0} + scale;
    memcpy(&tlv, tl, sizeof tlv);
    int out_contiguous = W == B;
    if (out_contiguous) {
        const LaneMask iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
        LaneMask c, m;
        memcpy(&c, col, sizeof c);
        m = (c - col[0]) != iota;
        out_contiguous = !lanes_any(&m);
    }
#define SCORES_FEW(NP)                                                                           \
    scores_few(att, q, ldq, col, out_contiguous, W, pq, pk, k, S, kstride, sq, Tmax, tlv, sc,    \
               kmode, NP)
    switch (np) {
    case 0: mxv = SCORES_FEW(0); break;
    case 1: mxv = SCORES_FEW(1); break;
    case 2: mxv = SCORES_FEW(2); break;
    case 3: mxv = SCORES_FEW(3); break;
    case 4: mxv = SCORES_FEW(4); break;
    default: break;
    }
#undef SCORES_FEW
    for (int p0 = 0; np > 4 && p0 < np; p0 += CHUNK) {
        int nc = np - p0 < CHUNK ? np - p0 : CHUNK, nl = 0, last = p0 + CHUNK >= np;
        // A channel where every lane's query is 0 adds +-0 at every
        // position (the keys are finite: attention_layer checks them), which
        // changes no sum that starts at +0: it is left out. The lanes of
        // consecutive rows are one vector load.
        for (int p = 0; p < nc; p++) {
            const float *qp = q + (long)pq[p0 + p] * ldq;
            if (out_contiguous)
                w[nl] = lanes_load(qp + col[0]);
            else
                for (int i = 0; i < B; i++) w[nl][i] = i < W ? qp[col[i]] : 0.0f;
            LaneMask nz = w[nl] != zero;
            kp[nl] = k + (long)pk[p0 + p] * S;
            nl += lanes_any(&nz);
        }
        for (int t = 0; t < Tmax && (nl > 0 || p0 == 0 || last); t++) {
            Lanes acc = {0};
            if (p0 > 0) acc = lanes_load(att + t * B);
            for (int p = 0; p < nl; p++) acc += w[p] * lanes_at(kp[p], t, kstride, sq, kmode);
            if (last) {
                LaneMask seen = ((LaneMask){0} + t) < tlv, more;
                acc = LANES_SELECT(seen, acc * sc, minf);
                more = acc > mxv;
                mxv = LANES_SELECT(more, acc, mxv);
            }
            LANES_STORE(att + t * B, acc);
        }
    }
    // The positions where some lane's weight may be non-zero, when they
    // fit in pos (hard attention weighs one or two of many).
    enum { MAX_POS = 1024 };
    int pos[MAX_POS], n_pos = 0;
    Lanes smv = {0};
    LaneMask cntv = {0};
    if (scores)
        for (int x = 0; x < Tmax * B; x++) scores[x] = att[x];
    for (int t0 = 0; t0 < Tmax; t0 += 32) {
        // Where every lane's exponent is below -104 the weights are 0
        // (exp_softmax's own answer there), and the sums gain +0. Which
        // positions of 32 some lane sees live: a bit per position in every
        // lane, then one OR across the lanes.
        int t1 = Tmax - t0 < 32 ? Tmax : t0 + 32;
        LaneMask bits = {0};
        for (int t = t0; t < t1; t++) {
            Lanes z = lanes_load(att + t * B) - mxv;
            LaneMask live = ~(z < -104.0f); /* NaN included */
            bits |= live & (int32_t)(1u << (t - t0));
        }
        uint32_t any = lanes_or(&bits);
        for (int t = t0; t < t1; t++) {
            if (!(any >> (t - t0) & 1u)) {
                LANES_STORE(att + t * B, (Lanes){0});
                continue;
            }
            if (n_pos < MAX_POS) pos[n_pos] = t;
            n_pos++;
            // Hard attention: each lane's exponent 0 (e^0 = 1) or below
            // -104 (0), exp_softmax's own answers, without its long chain
            // of dependent operations (the kernel waited on it).
            Lanes z = lanes_load(att + t * B) - mxv, e;
            LaneMask at_max = z == 0.0f, soft = ~(at_max | (z < -104.0f)); /* NaN: soft */
            if (lanes_any(&soft))
                e = lanes_exp_softmax(z);
            else
                e = (Lanes)(at_max & (LaneMask)((Lanes){0} + 1.0f));
            LANES_STORE(att + t * B, e);
            smv += e;
        }
    }
    Lanes inv = 1.0f / smv;
    LaneMask unfit = ~((smv - smv) == 0.0f); /* a sum infinite or NaN */
    if (n_pos <= MAX_POS && !lanes_any(&unfit)) {
        // The weights left out of pos are +0 already, and stay so.
        for (int x = 0; x < n_pos; x++) {
            Lanes a = lanes_load(att + pos[x] * B) * inv;
            LANES_STORE(att + pos[x] * B, a);
            cntv -= a != 0.0f; /* -1 where true */
        }
    } else {
        for (int t = 0; t < Tmax; t++) {
            Lanes a = lanes_load(att + t * B) * inv;
            LANES_STORE(att + t * B, a);
            cntv -= a != 0.0f;
        }
    }
    Lanes chk = {0};
    for (int jc = j0; jc < j1; jc += VCHUNK) {
        const float *vj = v + (long)jc * S;
        const int *pp = n_pos <= MAX_POS ? pos : NULL, np_ = n_pos <= MAX_POS ? n_pos : Tmax;
        float *oj = out + (long)(jc - j0) * ldo;
#define WEIGHTED_SUMS(NJ)                                                                        \
    lanes_weighted_sums(oj, ldo, col, W, out_contiguous, att, vj, S, (long)nv * S, sq, pp, np_,  \
                        mode, NJ, add, &chk)
        switch (j1 - jc < VCHUNK ? j1 - jc : VCHUNK) {
        case 1: WEIGHTED_SUMS(1); break;
        case 2: WEIGHTED_SUMS(2); break;
        case 3: WEIGHTED_SUMS(3); break;
        case 4: WEIGHTED_SUMS(4); break;
        case 5: WEIGHTED_SUMS(5); break;
        case 6: WEIGHTED_SUMS(6); break;
        case 7: WEIGHTED_SUMS(7); break;
        default: WEIGHTED_SUMS(8); break;
        }
#undef WEIGHTED_SUMS
    }
    if (add) { /* an output that overflowed: a NaN sum, as an overflowed score gives */
        LaneMask bad = chk != chk;
        smv = (Lanes)(((LaneMask)smv & ~bad) | ((LaneMask)((Lanes){0} + NAN) & bad));
    }
    if (W == B) {
        LANES_STORE(sums, smv);
        memcpy(used, &cntv, sizeof cntv);
    } else {
        for (int i = 0; i < W; i++) {
            sums[i] = smv[i];
            used[i] = cntv[i];
        }
    }
}

static inline __attribute__((always_inline)) void
attention_block_dispatch(float *out, int ldo, float *sums, int *used, float *att, float *scores,
                         const float *q, int ldq, const int *rows, const int *pq, const int *pk,
                         int np,
                         const float *k, int nk, const float *v, int nv, int j0, int j1, int S,
                         const int *seq, const int *T, int W, float scale, int k_same, int add) {
    int sq[B], tl[B], col[B], Tmax = 1, same = 1, contig = W == B;
    if (W == B) { /* a full block (most): the same, by vectors */
        const LaneMask iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
        LaneMask s, t, d, m;
        memcpy(&s, seq, sizeof s);
        memcpy(&t, T, sizeof t);
        memcpy(sq, seq, sizeof sq);
        memcpy(tl, T, sizeof tl);
        if (rows)
            memcpy(col, rows, sizeof col);
        else
            memcpy(col, &iota, sizeof col);
        d = s - s[0];
        m = d != 0;
        same = !lanes_any(&m);
        m = d != iota;
        contig = !lanes_any(&m);
        Tmax = lanes_max(&t);
        Tmax = Tmax > 1 ? Tmax : 1;
    } else
        for (int i = 0; i < B; i++) {
            col[i] = i < W ? (rows ? rows[i] : i) : 0;
            sq[i] = seq[i < W ? i : 0];
            tl[i] = i < W ? T[i] : 1;
            Tmax = tl[i] > Tmax ? tl[i] : Tmax;
            same &= sq[i] == sq[0];
            contig &= sq[i] == sq[0] + i;
        }
    int mode = same ? LANES_SAME : contig ? LANES_CONTIGUOUS : LANES_GATHER;
#define BODY(MODE, KMODE)                                                                        \
    attention_block_body(out, ldo, sums, used, att, scores, q, ldq, col, pq, pk, np, k, nk, v, nv, \
                         j0, j1, S, sq, tl, Tmax, W, scale, add, MODE, KMODE)
    if (mode == LANES_SAME)
        BODY(LANES_SAME, LANES_SAME);
    else if (mode == LANES_CONTIGUOUS && k_same)
        BODY(LANES_CONTIGUOUS, LANES_SAME);
    else if (mode == LANES_CONTIGUOUS)
        BODY(LANES_CONTIGUOUS, LANES_CONTIGUOUS);
    else if (k_same)
        BODY(LANES_GATHER, LANES_SAME);
    else
        BODY(LANES_GATHER, LANES_GATHER);
#undef BODY
}
#undef B

#define ATTENTION_BLOCK_ARGS                                                                     \
    float *out, int ldo, float *sums, int *used, float *att, float *scores, const float *q,      \
        int ldq, const int *rows, const int *pq, const int *pk, int np, const float *k, int nk, const float *v,   \
        int nv, int j0, int j1, int S, const int *seq, const int *T, int W, float scale,         \
        int k_same, int add
#define ATTENTION_BLOCK_PASS                                                                     \
    out, ldo, sums, used, att, scores, q, ldq, rows, pq, pk, np, k, nk, v, nv, j0, j1, S, seq, T, W,   \
        scale, k_same, add

static void attention_block_generic(ATTENTION_BLOCK_ARGS) {
    attention_block_dispatch(ATTENTION_BLOCK_PASS);
}
#ifdef TF_SIMD_X86
__attribute__((target("avx2,fma"))) static void attention_block_avx2(ATTENTION_BLOCK_ARGS) {
    attention_block_dispatch(ATTENTION_BLOCK_PASS);
}
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"))) static void
attention_block_avx512(ATTENTION_BLOCK_ARGS) {
    attention_block_dispatch(ATTENTION_BLOCK_PASS);
}
#endif

void attention_block_forward_simd(ATTENTION_BLOCK_ARGS, TfSimd s) {
    switch (s) {
#ifdef TF_SIMD_X86
    case TF_SIMD_AVX2: attention_block_avx2(ATTENTION_BLOCK_PASS); break;
    case TF_SIMD_AVX512: attention_block_avx512(ATTENTION_BLOCK_PASS); break;
#endif
    default: attention_block_generic(ATTENTION_BLOCK_PASS); break;
    }
}

void attention_block_forward(ATTENTION_BLOCK_ARGS) {
    attention_block_forward_simd(ATTENTION_BLOCK_PASS, simd_active());
}

void attention_block_forward_naive(ATTENTION_BLOCK_ARGS) {
    const int B = TF_ATT_LANES;
    (void)k_same; /* each lane reads its own keys */
    for (int i = 0; i < W; i++) {
        int s = seq[i], c = rows ? rows[i] : i;
        float maxv = -INFINITY;
        for (int t = 0; t < T[i]; t++) {
            float dot = 0.0f;
            for (int p = 0; p < np; p++)
                dot += q[(long)pq[p] * ldq + c] * k[((long)t * nk + pk[p]) * S + s];
            att[t * B + i] = dot * scale;
            if (att[t * B + i] > maxv) maxv = att[t * B + i];
        }
        if (scores)
            for (int t = 0; t < T[i]; t++) scores[t * B + i] = att[t * B + i];
        float sum = 0.0f;
        for (int t = 0; t < T[i]; t++) {
            float z = att[t * B + i] - maxv;
            att[t * B + i] = z < -104.0f ? 0.0f : expf(z);
            sum += att[t * B + i];
        }
        sums[i] = sum;
        used[i] = 0;
        float inv = 1.0f / sum;
        for (int t = 0; t < T[i]; t++) {
            att[t * B + i] *= inv;
            used[i] += att[t * B + i] != 0.0f;
        }
        for (int j = j0; j < j1; j++) {
            float acc = 0.0f;
            for (int t = 0; t < T[i]; t++)
                if (att[t * B + i] != 0.0f) acc += att[t * B + i] * v[((long)t * nv + j) * S + s];
            float *o = &out[(long)(j - j0) * ldo + c];
            *o = add ? *o + acc : acc;
            if (add && !(fabsf(*o) <= FLT_MAX)) sums[i] = NAN;
        }
    }
}

/* Keys that take few values (kernels.h): group, then per-group prefix sums. */
int attention_groups(float *keys, float *counts, float *vsums, int *cls, const float *k,
                     const float *v, int T, int np, int nj, int max_groups) {
    int n = 0;
    for (int t = 0; t < T; t++) {
        const float *kt = k + (long)t * np;
        int g = 0;
        while (g < n && memcmp(keys + (long)g * np, kt, (size_t)np * sizeof(float)) != 0) g++;
        if (g == n) {
            if (n == max_groups) return 0;
            memcpy(keys + (long)n * np, kt, (size_t)np * sizeof(float));
            n++;
        }
        cls[t] = g;
    }
    for (int t = 0; t < T; t++) {
        float *ct = counts + (long)t * n, *vt = vsums + (long)t * n * nj;
        if (t == 0) {
            memset(ct, 0, (size_t)n * sizeof(float));
            memset(vt, 0, (size_t)n * nj * sizeof(float));
        } else {
            memcpy(ct, ct - n, (size_t)n * sizeof(float));
            memcpy(vt, vt - (long)n * nj, (size_t)n * nj * sizeof(float));
        }
        ct[cls[t]] += 1.0f;
        for (int j = 0; j < nj; j++) vt[cls[t] * nj + j] += v[(long)t * nj + j];
    }
    return n;
}

void attention_grouped_forward(float *out, int ldo, float *sums, int *used, const float *q,
                               int ldq, const int *rows, const int *pq, int np, const float *keys,
                               int n_groups, const float *counts, const float *vsums, int nj,
                               const int *T, int W, float scale, int add) {
    float s[TF_ATT_GROUPS], e[TF_ATT_GROUPS];
    for (int i = 0; i < W; i++) {
        int c = rows ? rows[i] : i;
        const float *nt = counts + (long)(T[i] - 1) * n_groups;
        const float *vt = vsums + (long)(T[i] - 1) * n_groups * nj;
        float mx = -INFINITY;
        for (int g = 0; g < n_groups; g++) {
            if (nt[g] == 0.0f) continue;
            float acc = 0.0f; // the channels in order, as attention_block_forward adds them
            for (int p = 0; p < np; p++) acc += q[(long)pq[p] * ldq + c] * keys[(long)g * np + p];
            s[g] = acc * scale;
            mx = s[g] > mx ? s[g] : mx;
        }
        float sum = 0.0f;
        for (int g = 0; g < n_groups; g++) {
            e[g] = nt[g] == 0.0f ? 0.0f : exp_softmax(s[g] - mx);
            sum += e[g] * nt[g];
        }
        float inv = 1.0f / sum;
        int u = 0;
        for (int g = 0; g < n_groups; g++) {
            e[g] *= inv;
            u += e[g] != 0.0f ? (int)nt[g] : 0;
        }
        sums[i] = sum;
        used[i] = u;
        for (int j = 0; j < nj; j++) {
            float acc = 0.0f;
            for (int g = 0; g < n_groups; g++)
                if (e[g] != 0.0f) acc += e[g] * vt[g * nj + j];
            float *o = &out[(long)j * ldo + c];
            *o = add ? *o + acc : acc;
            if (add && !(fabsf(*o) <= FLT_MAX)) sums[i] = NAN;
        }
    }
}

const char *const tf_simd_names[] = {"generic", "avx2", "avx512"};
_Static_assert(sizeof tf_simd_names / sizeof *tf_simd_names == TF_SIMD_COUNT, "tf_simd_names");

int simd_supported(TfSimd s) {
    switch (s) {
    case TF_SIMD_GENERIC: return 1;
#ifdef TF_SIMD_X86
    case TF_SIMD_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case TF_SIMD_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               simd_supported(TF_SIMD_AVX2);
#endif
    default: return 0;
    }
}

TfSimd simd_best(void) {
    for (int s = TF_SIMD_COUNT - 1; s > 0; s--)
        if (simd_supported((TfSimd)s)) return (TfSimd)s;
    return TF_SIMD_GENERIC;
}

TfSimd simd_active(void) {
    static _Thread_local TfSimd best = TF_SIMD_COUNT;
    if (best == TF_SIMD_COUNT) best = simd_best();
    return best;
}

/* erfc(z) for z >= 0, with relative error below 1.2e-7 in exact arithmetic
 * (Numerical Recipes' Chebyshev fit, erfcc) and a few float roundings. */
static inline __attribute__((always_inline)) float erfc_vec(float z) {
    float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    return t * exp_vec(-z * z + p);
}

/* Exact GELU, 0.5 x (1 + erf(x / sqrt 2)), written as 0.5 x erfc(-x / sqrt 2)
 * so that the negative side keeps its relative precision (and large x gives
 * x exactly: the seed's +1000 bias trick relies on it); branch-free, so the
 * loop vectorizes (1.5x the engine's speed on the seed's GELU-heavy -O0
 * weights). Within 1.4e-7 x max(1, |GELU|) of the true value, and 5e-6
 * relative wherever |GELU| > 1e-10 (tests/test_kernels.c sweeps it); the
 * erff form it replaces lost all relative precision below x = -5. */
/* GELU_U vectors of 16 at x, as the scalar loop below computes each: the
 * same operations in the same order, so the same bits. Written out as
 * vectors, several at once, because the loop the compiler makes of the
 * scalar one takes a vector at a time through the two polynomials' long
 * chain of dependent operations, and waited on it (8 % of the adder's
 * time). */
enum { GELU_U = 4 };
static inline __attribute__((always_inline)) void gelu_lanes(float *x) {
    const float inv_sqrt2 = 0.70710678118654752440f;
    const LaneMask abs_bits = (LaneMask){0} + 0x7fffffff;
    Lanes v[GELU_U], z[GELU_U], t[GELU_U], p[GELU_U], e[GELU_U];
    // Saturated inputs and zeros (a compiled program's biases put most
    // there): at x >= 8 erfc's c is below 1.2e-15, so 2 - c rounds to 2
    // and the result is 0.5 x 2 = x; at +-0 it is 0.5 x (2 - c) = x; at
    // x <= -14 the exponent is below -87 and c is 0 (0.5 x 0). The same
    // bits, without the polynomials.
    LaneMask mid = {0};
    for (int u = 0; u < GELU_U; u++) {
        v[u] = lanes_load(x + 16 * u);
        mid |= ~((v[u] >= 8.0f) | (v[u] == 0.0f) | (v[u] <= -14.0f)); /* NaN: mid */
    }
    if (!lanes_any(&mid)) {
        for (int u = 0; u < GELU_U; u++)
            LANES_STORE(x + 16 * u, LANES_SELECT(v[u] <= -14.0f, 0.5f * v[u] * 0.0f, v[u]));
        return;
    }
    for (int u = 0; u < GELU_U; u++) {
        z[u] = (Lanes)((LaneMask)v[u] & abs_bits) * inv_sqrt2; /* fabsf */
        t[u] = 1.0f / (1.0f + 0.5f * z[u]);
        p[u] = 0.17087277f * t[u] - 0.82215223f;
    }
    for (int u = 0; u < GELU_U; u++) p[u] = p[u] * t[u] + 1.48851587f;
    for (int u = 0; u < GELU_U; u++) p[u] = p[u] * t[u] - 1.13520398f;
    for (int u = 0; u < GELU_U; u++) p[u] = p[u] * t[u] + 0.27886807f;
    for (int u = 0; u < GELU_U; u++) p[u] = p[u] * t[u] - 0.18628806f;
    for (int u = 0; u < GELU_U; u++) p[u] = p[u] * t[u] + 0.09678418f;
    for (int u = 0; u < GELU_U; u++) p[u] = p[u] * t[u] + 0.37409196f;
    for (int u = 0; u < GELU_U; u++) p[u] = p[u] * t[u] + 1.00002368f;
    for (int u = 0; u < GELU_U; u++) p[u] = p[u] * t[u] - 1.26551223f;
    for (int u = 0; u < GELU_U; u++) EXP_VEC_LANES(Lanes, LaneMask, e[u], -z[u] * z[u] + p[u]);
    for (int u = 0; u < GELU_U; u++) {
        Lanes c = t[u] * e[u];
        Lanes y = 0.5f * v[u] * LANES_SELECT(v[u] >= 0.0f, 2.0f - c, c);
        LANES_STORE(x + 16 * u, y);
    }
}

static inline __attribute__((always_inline)) void gelu_body(float *x, long n) {
    const float inv_sqrt2 = 0.70710678118654752440f;
    long i0 = 0;
    for (; i0 + 16 * GELU_U <= n; i0 += 16 * GELU_U) gelu_lanes(x + i0);
    for (long i = i0; i < n; i++) {
        float v = x[i], z = fabsf(v) * inv_sqrt2, c = erfc_vec(z);
        x[i] = 0.5f * v * (v >= 0.0f ? 2.0f - c : c);
    }
}

/* The loop above compiled three times, as the attention kernel is: the
 * same operations lane by lane, so the same bits on every path
 * (test_gelu_simd_paths_agree). */
static void gelu_generic(float *x, long n) { gelu_body(x, n); }
#ifdef TF_SIMD_X86
__attribute__((target("avx2"))) static void gelu_avx2(float *x, long n) { gelu_body(x, n); }
__attribute__((target("avx512f,avx512dq,avx2"))) static void gelu_avx512(float *x, long n) {
    gelu_body(x, n);
}
#endif

void gelu_forward_simd(float *x, long n, TfSimd s) {
    switch (s) {
#ifdef TF_SIMD_X86
    case TF_SIMD_AVX2: gelu_avx2(x, n); break;
    case TF_SIMD_AVX512: gelu_avx512(x, n); break;
#endif
    default: gelu_generic(x, n); break;
    }
}

void gelu_forward(float *x, long n) {
    gelu_forward_simd(x, n, simd_active());
}

/* The tanh GELU (GPT-2's "gelu_new"), 0.5 x (1 + tanh(u)) with
 * u = sqrt(2/pi) (x + 0.044715 x^3), written as x / (1 + e^(-2u)) (the same
 * function: 0.5 (1 + tanh u) is the logistic of 2u) so that the loop
 * vectorizes through exp_vec. Within 3e-7 x max(1, |value|) of the double
 * twin below (tests/test_kernels.c sweeps it). */
void gelu_tanh_forward(float *x, long n) {
    const float c = 0.79788456080286535588f, a = 0.044715f;
    for (long i = 0; i < n; i++) {
        float v = x[i], u = c * (v + a * v * v * v);
        x[i] = v / (1.0f + exp_vec(-2.0f * u));
    }
}

void gelu_tanh_forward_naive(float *x, long n) {
    for (long i = 0; i < n; i++) {
        double v = x[i], u = 0.79788456080286535588 * (v + 0.044715 * v * v * v);
        x[i] = (float)(0.5 * v * (1.0 + tanh(u)));
    }
}

void relu_forward(float *x, long n) {
    for (long i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* softmax_forward's work in blocks of SM_LANES values, the last one padded
 * with -inf (whose exp_vec is 0), so that every loop is whole vectors (a row
 * of 27 scores would otherwise run 11 of them one at a time); partial
 * maxima and sums per lane, combined in a fixed order. */
#define SM_LANES 16

/* The lanes' largest (a tree: a maximum does not depend on the order) and
 * their sum, in the fixed order ((h0 + h4) + (h1 + h5)) + ((h2 + h6) + (h3 +
 * h7)), h[k] = s[k] + s[k + 8]: in registers, by shuffles (by pointer:
 * GCC notes an ABI change for a vector passed by value). */
static inline __attribute__((always_inline)) float sm_max(const Lanes *mp) {
    Lanes m = *mp;
    Lanes t = __builtin_shufflevector(m, m, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    m = LANES_SELECT(t > m, t, m);
    t = __builtin_shufflevector(m, m, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3);
    m = LANES_SELECT(t > m, t, m);
    t = __builtin_shufflevector(m, m, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1);
    m = LANES_SELECT(t > m, t, m);
    return m[1] > m[0] ? m[1] : m[0];
}

static inline __attribute__((always_inline)) float sm_sum(const Lanes *sp) {
    Lanes s = *sp;
    Lanes h = s + __builtin_shufflevector(s, s, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    Lanes g = h + __builtin_shufflevector(h, h, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3);
    Lanes f = g + __builtin_shufflevector(g, g, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2);
    return f[0] + f[2];
}

/* e^x of every lane (exp_vec, vectorized). */
#define LANES_EXP(out, v)                                                                          \
    do {                                                                                           \
        Lanes lanes_x_ = (v);                                                                      \
        for (int k_ = 0; k_ < SM_LANES; k_++) (out)[k_] = exp_vec(lanes_x_[k_]);                   \
    } while (0)

void softmax_exp_rows(float *restrict x, int rows, int np, const int *n, float *sums) {
    const LaneMask iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const Lanes ninf = (Lanes){0} - INFINITY;
    float mx[TF_SOFTMAX_ROWS];
    // All the rows' maxima, then all their exponentials: each pass's rows
    // are independent, so that one row's chains of dependent operations
    // overlap the next row's.
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (long)r * np;
        Lanes m = ninf;
        for (int i = 0; i < n[r]; i += SM_LANES) {
            Lanes v = LANES_SELECT(iota < n[r] - i, lanes_load(xr + i), ninf);
            m = LANES_SELECT(v > m, v, m);
        }
        mx[r] = sm_max(&m);
    }
    for (int r = 0; r < rows; r++) {
        float *xr = x + (long)r * np;
        Lanes s = {0}, e;
        int i = 0;
        for (; i < n[r]; i += SM_LANES) {
            LANES_EXP(e, LANES_SELECT(iota < n[r] - i, lanes_load(xr + i), ninf) - mx[r]);
            LANES_STORE(xr + i, e);
            s += e;
        }
        for (; i < np; i += SM_LANES) LANES_STORE(xr + i, (Lanes){0}); /* blocks past n[r]: no exp */
        sums[r] = sm_sum(&s);
    }
}

float softmax_exp(float *restrict x, int n, float *maxv) {
    const int full = n / SM_LANES * SM_LANES, r = n - full;
    float tail[SM_LANES];
    for (int k = 0; k < SM_LANES; k++) tail[k] = k < r ? x[full + k] : -INFINITY;
    Lanes m = lanes_load(tail);
    for (int i = 0; i < full; i += SM_LANES) {
        Lanes v = lanes_load(x + i);
        m = LANES_SELECT(v > m, v, m);
    }
    const float mx = sm_max(&m);
    Lanes s = {0}, e;
    for (int i = 0; i < full; i += SM_LANES) {
        LANES_EXP(e, lanes_load(x + i) - mx);
        LANES_STORE(x + i, e);
        s += e;
    }
    LANES_EXP(e, lanes_load(tail) - mx);
    s += e;
    LANES_STORE(tail, e);
    memcpy(x + full, tail, (size_t)r * sizeof *x);
    *maxv = mx;
    return sm_sum(&s);
}

void softmax_forward(float *x, int n) {
    float mx;
    const float inv = 1.0f / softmax_exp(x, n, &mx);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * C;
        float *y = out + (long)n * C;
        float m = sum8(x, C) / (float)C;
        for (int c = 0; c < C; c++) y[c] = x[c] - m; /* y holds x - mean for now */
        float var = dot8(y, y, C) / (float)C;
        float s = 1.0f / sqrtf(var + eps);
        for (int c = 0; c < C; c++) y[c] = y[c] * s * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

/* The sums of layernorm_forward (sum8 and dot8: lane c % 8 adds element
 * c, in order of c; the lanes combined as vec8_combine does) for 16 rows at
 * once, a row to a lane: the same operations per row. */
#define LN_COMBINE(p) ((((p)[0] + (p)[1]) + ((p)[2] + (p)[3])) + (((p)[4] + (p)[5]) + ((p)[6] + (p)[7])))

void layernorm_forward_fm(float *y, const float *x, long ld, int C, int n, const float *weight,
                          const float *bias, float eps, float *row) {
    int r0 = 0;
    for (; r0 + TF_ATT_LANES <= n; r0 += TF_ATT_LANES) {
        Lanes p[8] = {{0}}, m, v, s;
        for (int c = 0; c < C; c++) p[c & 7] += lanes_load(x + c * ld + r0);
        m = LN_COMBINE(p) / (float)C;
        for (int k = 0; k < 8; k++) p[k] = (Lanes){0};
        for (int c = 0; c < C; c++) {
            Lanes d = lanes_load(x + c * ld + r0) - m; /* y holds x - mean for now */
            LANES_STORE(y + c * ld + r0, d);
            p[c & 7] += d * d;
        }
        v = LN_COMBINE(p) / (float)C;
        for (int i = 0; i < TF_ATT_LANES; i++) s[i] = 1.0f / sqrtf(v[i] + eps);
        for (int c = 0; c < C; c++)
            LANES_STORE(y + c * ld + r0, lanes_load(y + c * ld + r0) * s * weight[c] + bias[c]);
    }
    for (int r = r0; r < n; r++) { /* the rest one at a time, through row[0 .. 2C) */
        float mean, rstd;
        for (int c = 0; c < C; c++) row[c] = x[c * ld + r];
        layernorm_forward(row + C, &mean, &rstd, row, weight, bias, 1, C, eps);
        for (int c = 0; c < C; c++) y[c * ld + r] = row[C + c];
    }
}
#undef LN_COMBINE

void layernorm_forward_naive(float *out, const float *inp, const float *weight,
                             const float *bias, int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * C;
        double mean = 0, var = 0;
        for (int c = 0; c < C; c++) mean += x[c];
        mean /= C;
        for (int c = 0; c < C; c++) var += (x[c] - mean) * (x[c] - mean);
        var /= C;
        for (int c = 0; c < C; c++)
            out[(long)n * C + c] = (float)((x[c] - mean) / sqrt(var + eps) * weight[c] + bias[c]);
    }
}

/* Softmax in place over att[T], max-subtracted; exp of -inf is 0. */
void softmax_naive(float *att, int T) {
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
    softmax_naive(att, T);
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
    softmax_naive(att, T);
    for (int j = 0; j < DV; j++) {
        float acc = 0.0f;
        for (int t = 0; t < T; t++) acc += att[t] * v[(long)t * vstride + j];
        out[j] = acc;
    }
}

/* One buffer's address space, taken and given back untouched: mmap, not
 * malloc, so that no allocator writes to it (AddressSanitizer's malloc
 * poisons and fills every byte of a large block, 0.15 s of CPU per tool run). */
static int reserve_one(void **p) {
#if defined(__unix__) && !defined(__EMSCRIPTEN__)
    *p = mmap(NULL, TF_BLAS_BUFFER, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*p == MAP_FAILED) *p = NULL;
#else
    *p = malloc(TF_BLAS_BUFFER);
#endif
    return *p != NULL;
}

static void release_one(void *p) {
#if defined(__unix__) && !defined(__EMSCRIPTEN__)
    if (p) munmap(p, TF_BLAS_BUFFER);
#else
    free(p);
#endif
}

int blas_reserve(int n_threads, TfError *err) {
    if (n_threads < 1) n_threads = 1;
    void **p = calloc((size_t)n_threads, sizeof *p);
    int ok = p != NULL;
    // All at once: the address space is what runs out (ulimit -v).
    for (int i = 0; ok && i < n_threads; i++) ok = reserve_one(&p[i]);
    for (int i = 0; p && i < n_threads; i++) release_one(p[i]);
    free(p);
    if (!ok)
        tf_error_set(err, "out of memory: OpenBLAS needs a work buffer of %zu MiB for each of %d "
                          "thread%s (raise the memory limit, or use fewer threads)",
                     TF_BLAS_BUFFER >> 20, n_threads, n_threads == 1 ? "" : "s");
    return ok ? 0 : -1;
}

int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* ---- training kernels (kernels.h: "training") ------------------------------ */

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC, int accumulate) {
    if (dinp) // dinp[N,C] (+)= dout[N,OC] @ weight[OC,C]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight,
                    C, accumulate ? 1.0f : 0.0f, dinp, C);
    if (dweight) // dweight[OC,C] += dout^T[OC,N] @ inp[N,C]
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C,
                    1.0f, dweight, C);
    if (dbias) { // row by row, in order; 16 columns at a time held in a register
        int o0 = 0;
        for (; o0 + 16 <= OC; o0 += 16) {
            Lanes acc = lanes_load(dbias + o0);
            for (int n = 0; n < N; n++) acc += lanes_load(dout + (long)n * OC + o0);
            LANES_STORE(dbias + o0, acc);
        }
        for (int n = 0; n < N; n++) {
            const float *row = dout + (long)n * OC;
            for (int o = o0; o < OC; o++) dbias[o] += row[o];
        }
    }
}

void gelu_backward(float *dinp, const float *inp, const float *dout, long n) {
    const float inv_sqrt2 = 0.70710678118654752440f, inv_sqrt2pi = 0.39894228040143267794f;
    for (long i = 0; i < n; i++) {
        float x = inp[i];
        float cdf = 0.5f * (1.0f + erff(x * inv_sqrt2));
        float pdf = inv_sqrt2pi * expf(-0.5f * x * x);
        dinp[i] += dout[i] * (cdf + x * pdf);
    }
}

/* d/dx of 0.5 x (1 + tanh u): 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'. */
void gelu_tanh_backward(float *dinp, const float *inp, const float *dout, long n) {
    const float c = 0.79788456080286535588f, a = 0.044715f;
    for (long i = 0; i < n; i++) {
        float x = inp[i], u = c * (x + a * x * x * x), t = tanhf(u);
        float du = c * (1.0f + 3.0f * a * x * x);
        dinp[i] += dout[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
    }
}

void relu_backward(float *dinp, const float *inp, const float *dout, long n) {
    for (long i = 0; i < n; i++) dinp[i] += inp[i] > 0.0f ? dout[i] : 0.0f;
}

void embedding_forward(float *out, const int *tokens, const int *pos, const float *wte,
                       const float *wpe, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *te = wte + (long)tokens[n] * C, *pe = wpe + (long)pos[n] * C;
        float *o = out + (long)n * C;
        for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
    }
}

void embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                        const int *pos, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *g = dout + (long)n * C;
        float *te = dwte + (long)tokens[n] * C;
        for (int c = 0; c < C; c++) te[c] += g[c];
        if (dwpe) {
            float *pe = dwpe + (long)pos[n] * C;
            for (int c = 0; c < C; c++) pe[c] += g[c];
        }
    }
}
