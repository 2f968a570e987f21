/* kernels.c: matmul, activations and attention, each with its naive twin. */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* e^x without a library call, so that loops over it vectorize: x = k ln 2 + r
 * with |r| <= ln 2 / 2, e^r by its degree-7 Taylor-like minimax polynomial
 * (Cephes' expf), times 2^k built in the exponent bits. Within 2 ulp of
 * expf for x in [-87, 88]; 0 below, NaN for NaN (the clamp keeps the
 * conversion to int defined: a NaN score or GELU input is the callers' to
 * report). */
static inline float exp_vec(float x) {
    int nan = x != x;
    x = x > -87.0f ? x : -87.0f; /* NaN too: the int conversion below must see a number */
    x = x < 88.0f ? x : 88.0f;
    // k = round(x / ln 2), by the 1.5 * 2^23 trick (floorf is a call unless
    // traps are off).
    float k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - k * 0.693359375f + k * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } two_k = {.i = ((int32_t)k + 127) << 23};
    return nan ? NAN : x <= -87.0f ? 0.0f : p * two_k.f;
}

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
#if defined(__GNUC__) && !defined(__clang__)
/* Passing a 64-byte vector without AVX-512 changes the ABI, says gcc: these
 * helpers are always inlined, so there is no call to disagree about. */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float Lanes __attribute__((vector_size(B * sizeof(float))));
typedef int32_t LaneMask __attribute__((vector_size(B * sizeof(float))));
_Static_assert(B == 16, "lanes_at broadcasts to 16 lanes");

static inline __attribute__((always_inline)) Lanes lanes_load(const float *p) {
    Lanes v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) void lanes_store(float *p, Lanes v) {
    memcpy(p, &v, sizeof v);
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

/* out[jj] = sum over t < n, in order, of the non-zero att[t * B + i] times
 * c[jj * S + t * stride + seq[i]], for nj <= VCHUNK channels at once (their
 * sums are independent chains); a zero weight adds +0 (a skipped term). */
enum { VCHUNK = 8 };
static inline __attribute__((always_inline)) void lanes_weighted_sums(Lanes *out,
                                                                      const float *restrict att,
                                                                      const float *restrict c,
                                                                      int nj, long S, long stride,
                                                                      const int *seq, int n,
                                                                      int mode) {
    Lanes acc[VCHUNK], zero = {0};
    for (int jj = 0; jj < VCHUNK; jj++) acc[jj] = zero;
    for (int t = 0; t < n; t++) {
        Lanes a = lanes_load(att + t * B);
        LaneMask keep = a != zero;
        for (int jj = 0; jj < nj; jj++) {
            Lanes term = a * lanes_at(c + jj * S, t, stride, seq, mode);
            acc[jj] += (Lanes)((LaneMask)term & keep);
        }
    }
    for (int jj = 0; jj < nj; jj++) out[jj] = acc[jj];
}

/* The body of attention_block_forward, for one lane mode. Lanes past W
 * repeat lane 0's sequence at T = 1 with a zero query (kept finite, then
 * dropped). Adding a skipped (zero-weight) term as +0 changes no sum: a sum
 * that starts at +0 never becomes -0. */
static inline __attribute__((always_inline)) void
attention_block_body(float *out, int ldo, float *sums, int *used, float *att, float *scores,
                     const float *q, int ldq, const int *col, const int *pq, const int *pk, int np,
                     const float *k, int nk, const float *v, int nv, int j0, int j1, int S,
                     const int *sq, const int *tl, int Tmax, int W, float scale, int mode) {
    // Scores, the channels of a chunk added in order at each position.
    enum { CHUNK = 16 };
    Lanes w[CHUNK];
    const float *kp[CHUNK];
    long kstride = (long)nk * S;
    for (int p0 = 0; p0 == 0 || p0 < np; p0 += CHUNK) {
        int nc = np - p0 < CHUNK ? np - p0 : CHUNK;
        for (int p = 0; p < nc; p++) {
            for (int i = 0; i < B; i++) w[p][i] = i < W ? q[(long)pq[p0 + p] * ldq + col[i]] : 0.0f;
            kp[p] = k + (long)pk[p0 + p] * S;
        }
        for (int t = 0; t < Tmax; t++) {
            Lanes acc = {0};
            if (p0 > 0) acc = lanes_load(att + t * B);
            for (int p = 0; p < nc; p++) acc += w[p] * lanes_at(kp[p], t, kstride, sq, mode);
            lanes_store(att + t * B, acc);
        }
    }
    int out_contiguous = W == B;
    for (int i = 1; i < W; i++) out_contiguous &= col[i] == col[0] + i;
    float mx[B], sm[B] = {0};
    int cnt[B] = {0};
    for (int i = 0; i < B; i++) mx[i] = -INFINITY;
    for (int t = 0; t < Tmax; t++)
        for (int i = 0; i < B; i++) {
            // Positions a lane does not see score -inf: weight 0.
            float a = t < tl[i] ? att[t * B + i] * scale : -INFINITY;
            att[t * B + i] = a;
            mx[i] = a > mx[i] ? a : mx[i];
        }
    if (scores)
        for (int x = 0; x < Tmax * B; x++) scores[x] = att[x];
    for (int t = 0; t < Tmax; t++)
        for (int i = 0; i < B; i++) {
            float e = exp_softmax(att[t * B + i] - mx[i]);
            att[t * B + i] = e;
            sm[i] += e;
        }
    float inv[B];
    for (int i = 0; i < B; i++) inv[i] = 1.0f / sm[i];
    for (int t = 0; t < Tmax; t++)
        for (int i = 0; i < B; i++) {
            float a = att[t * B + i] * inv[i];
            att[t * B + i] = a;
            cnt[i] += a != 0.0f;
        }
    for (int jc = j0; jc < j1; jc += VCHUNK) {
        int nj = j1 - jc < VCHUNK ? j1 - jc : VCHUNK;
        Lanes o[VCHUNK];
        lanes_weighted_sums(o, att, v + (long)jc * S, nj, S, (long)nv * S, sq, Tmax, mode);
        for (int jj = 0; jj < nj; jj++) {
            float *oj = out + (long)(jc + jj - j0) * ldo;
            if (out_contiguous)
                lanes_store(oj + col[0], o[jj]);
            else
                for (int i = 0; i < W; i++) oj[col[i]] = o[jj][i];
        }
    }
    for (int i = 0; i < W; i++) {
        sums[i] = sm[i];
        used[i] = cnt[i];
    }
}

static inline __attribute__((always_inline)) void
attention_block_dispatch(float *out, int ldo, float *sums, int *used, float *att, float *scores,
                         const float *q, int ldq, const int *rows, const int *pq, const int *pk,
                         int np,
                         const float *k, int nk, const float *v, int nv, int j0, int j1, int S,
                         const int *seq, const int *T, int W, float scale) {
    int sq[B], tl[B], col[B], Tmax = 1, same = 1, contig = W == B;
    for (int i = 0; i < B; i++) {
        col[i] = i < W ? (rows ? rows[i] : i) : 0;
        sq[i] = seq[i < W ? i : 0];
        tl[i] = i < W ? T[i] : 1;
        Tmax = tl[i] > Tmax ? tl[i] : Tmax;
        same &= sq[i] == sq[0];
        contig &= sq[i] == sq[0] + i;
    }
    int mode = same ? LANES_SAME : contig ? LANES_CONTIGUOUS : LANES_GATHER;
    if (mode == LANES_SAME)
        attention_block_body(out, ldo, sums, used, att, scores, q, ldq, col, pq, pk, np, k, nk, v, nv,
                             j0, j1, S, sq, tl, Tmax, W, scale, LANES_SAME);
    else if (mode == LANES_CONTIGUOUS)
        attention_block_body(out, ldo, sums, used, att, scores, q, ldq, col, pq, pk, np, k, nk, v, nv,
                             j0, j1, S, sq, tl, Tmax, W, scale, LANES_CONTIGUOUS);
    else
        attention_block_body(out, ldo, sums, used, att, scores, q, ldq, col, pq, pk, np, k, nk, v, nv,
                             j0, j1, S, sq, tl, Tmax, W, scale, LANES_GATHER);
}
#undef B

#define ATTENTION_BLOCK_ARGS                                                                     \
    float *out, int ldo, float *sums, int *used, float *att, float *scores, const float *q,      \
        int ldq, const int *rows, const int *pq, const int *pk, int np, const float *k, int nk, const float *v,   \
        int nv, int j0, int j1, int S, const int *seq, const int *T, int W, float scale
#define ATTENTION_BLOCK_PASS                                                                     \
    out, ldo, sums, used, att, scores, q, ldq, rows, pq, pk, np, k, nk, v, nv, j0, j1, S, seq, T, W,   \
        scale

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
    static _Thread_local TfSimd best = TF_SIMD_COUNT;
    if (best == TF_SIMD_COUNT) best = simd_best();
    attention_block_forward_simd(ATTENTION_BLOCK_PASS, best);
}

void attention_block_forward_naive(ATTENTION_BLOCK_ARGS) {
    const int B = TF_ATT_LANES;
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
            out[(long)(j - j0) * ldo + c] = acc;
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

/* erfc(z) for z >= 0, with relative error below 1.2e-7 in exact arithmetic
 * (Numerical Recipes' Chebyshev fit, erfcc) and a few float roundings. */
static inline float erfc_vec(float z) {
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
void gelu_forward(float *x, long n) {
    const float inv_sqrt2 = 0.70710678118654752440f;
    for (long i = 0; i < n; i++) {
        float v = x[i], z = fabsf(v) * inv_sqrt2, c = erfc_vec(z);
        x[i] = 0.5f * v * (v >= 0.0f ? 2.0f - c : c);
    }
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

static void softmax_vec(float *att, int n);

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

int blas_reserve(int n_threads, TfError *err) {
    if (n_threads < 1) n_threads = 1;
    void **p = calloc((size_t)n_threads, sizeof *p);
    int ok = p != NULL;
    for (int i = 0; ok && i < n_threads; i++) {
        // Touch nothing: the address space is what runs out (ulimit -v).
        p[i] = malloc(TF_BLAS_BUFFER);
        ok = p[i] != NULL;
    }
    for (int i = 0; p && i < n_threads; i++) free(p[i]);
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

/* Sum of a[i] * b[i] in eight interleaved partial sums, added in a fixed
 * order: the same result every run, and independent chains the compiler can
 * put in one vector register (a single running sum is one long chain of
 * dependent additions). */
static inline float dot8(const float *restrict a, const float *restrict b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += a[i + k] * b[i + k];
    for (; i < n; i++) acc[i & 7] += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static inline float sum8(const float *restrict a, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += a[i + k];
    for (; i < n; i++) acc[i & 7] += a[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* y[i] += alpha * x[i] */
static inline void axpy(float *restrict y, float alpha, const float *restrict x, int n) {
    for (int i = 0; i < n; i++) y[i] += alpha * x[i];
}

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC) {
    if (dinp) // dinp[N,C] += dout[N,OC] @ weight[OC,C]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight,
                    C, 1.0f, dinp, C);
    if (dweight) // dweight[OC,C] += dout^T[OC,N] @ inp[N,C]
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C,
                    1.0f, dweight, C);
    if (dbias)
        for (int n = 0; n < N; n++) {
            const float *row = dout + (long)n * OC;
            for (int o = 0; o < OC; o++) dbias[o] += row[o];
        }
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

void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (long)n * C, *dy = dout + (long)n * C;
        float m = mean[n], s = rstd[n];
        // dnorm = dy * weight; dx = s * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat))
        float dmean = 0.0f, dmean_x = 0.0f;
        {
            float an[8] = {0}, ax[8] = {0};
            for (int c = 0; c < C; c++) {
                float xhat = (x[c] - m) * s, dn = dy[c] * weight[c];
                an[c & 7] += dn;
                ax[c & 7] += dn * xhat;
            }
            for (int k = 0; k < 8; k++) {
                dmean += an[k];
                dmean_x += ax[k];
            }
        }
        dmean /= (float)C;
        dmean_x /= (float)C;
        if (dbias) axpy(dbias, 1.0f, dy, C);
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s, dn = dy[c] * weight[c];
            if (dweight) dweight[c] += dy[c] * xhat;
            if (dinp) dinp[(long)n * C + c] += s * (dn - dmean - xhat * dmean_x);
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

void attention_forward(float *out, float *preatt, float *att, const float *q, const float *k,
                       const float *v, int T, int H, int D, int DV, float scale, int causal) {
    const int qs = H * D, vs = H * DV;
    for (int h = 0; h < H; h++) {
        float *pre = preatt + (long)h * T * T, *a = att + (long)h * T * T;
        // pre[T,T] = scale * q_h[T,D] @ k_h[T,D]^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, scale, q + h * D, qs,
                    k + h * D, qs, 0.0f, pre, T);
        for (int i = 0; i < T; i++) {
            int n = causal ? i + 1 : T;
            float *row = a + (long)i * T;
            memcpy(row, pre + (long)i * T, (size_t)n * sizeof *row);
            softmax_vec(row, n);
            for (int j = n; j < T; j++) row[j] = 0.0f;
        }
        // out_h[T,DV] = att[T,T] @ v_h[T,DV]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, DV, T, 1.0f, a, T, v + h * DV,
                    vs, 0.0f, out + h * DV, vs);
    }
}

void attention_forward_naive(float *out, float *preatt, float *att, const float *q,
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
            softmax_inplace(a, n);
            for (int j = n; j < T; j++) a[j] = 0.0f;
            for (int e = 0; e < DV; e++) {
                float acc = 0.0f;
                for (int j = 0; j < T; j++) acc += a[j] * v[(long)j * vs + h * DV + e];
                out[(long)i * vs + h * DV + e] = acc;
            }
        }
}

void attention_backward_naive(float *dq, float *dk, float *dv, float *scratch, const float *dout,
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

double crossentropy_forward(float *probs, const float *logits, const int *targets, int M, int V) {
    double loss = 0.0;
    for (int m = 0; m < M; m++) {
        float *p = probs + (long)m * V;
        const float *x = logits + (long)m * V;
        float maxv = -INFINITY;
        for (int v = 0; v < V; v++) maxv = x[v] > maxv ? x[v] : maxv;
        double sum = 0.0;
        for (int v = 0; v < V; v++) {
            p[v] = expf(x[v] - maxv);
            sum += p[v];
        }
        float inv = (float)(1.0 / sum);
        for (int v = 0; v < V; v++) p[v] *= inv;
        loss += log(sum) - (double)(x[targets[m]] - maxv); /* -log_softmax, stable */
    }
    return loss;
}

void crossentropy_backward(float *dlogits, const float *probs, const int *targets, int M, int V,
                           float scale) {
    for (int m = 0; m < M; m++) {
        const float *p = probs + (long)m * V;
        float *d = dlogits + (long)m * V;
        for (int v = 0; v < V; v++) d[v] += (p[v] - (v == targets[m] ? 1.0f : 0.0f)) * scale;
    }
}

void attention_rows_forward_naive(float *out, float *preatt, float *att, const float *q,
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
            softmax_inplace(a, n);
            for (int j = n; j < T; j++) a[j] = 0.0f;
            float *o = out + (long)r * vs + h * DV;
            for (int e = 0; e < DV; e++) o[e] = 0.0f;
            for (int j = 0; j < n; j++) axpy(o, a[j], v + (long)j * vs + h * DV, DV);
        }
    }
}

void attention_rows_backward_naive(float *dq, float *dk, float *dv, float *scratch,
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

/* ---- attention over one head's columns ---------------------------------------
 * The fast attention kernels work on one head at a time with its keys and
 * values turned into columns (kt [D, TP]: feature d of every position
 * together, TP = T rounded up to a multiple of 16, zero beyond T), so that
 * every inner loop runs over positions in whole vectors of 16, where the
 * naive twins above run over the D = 8 or so features of one position.
 * Gradients for keys and values gather in the same layout and are added
 * back at the end. Weights past a row's last live position are 0, so the
 * padding adds nothing. */

#define VEC 16
#define FOR_TP(j, TP) for (int j##0 = 0; j##0 < (TP); j##0 += VEC) for (int j = j##0; j < j##0 + VEC; j++)

static int padded(int T) { return (T + VEC - 1) / VEC * VEC; }

size_t attention_scratch_floats(int T, int D, int DV) {
    return (size_t)padded(T) * (4 + 2 * (size_t)D + 2 * (size_t)DV);
}

/* Softmax in place over att[n] with exp_vec (vectorized; within 2 ulp of
 * softmax_inplace's expf): the training kernels' softmax. */
static void softmax_vec(float *att, int n) {
    float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                  -INFINITY, -INFINITY, -INFINITY, -INFINITY}; /* eight running maxima */
    int t = 0;
    for (; t + 8 <= n; t += 8)
        for (int k = 0; k < 8; k++) m[k] = att[t + k] > m[k] ? att[t + k] : m[k];
    for (; t < n; t++) m[0] = att[t] > m[0] ? att[t] : m[0];
    float maxv = m[0];
    for (int k = 1; k < 8; k++) maxv = m[k] > maxv ? m[k] : maxv;
    for (t = 0; t < n; t++) att[t] = exp_vec(att[t] - maxv);
    float inv = 1.0f / sum8(att, n);
    for (t = 0; t < n; t++) att[t] *= inv;
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

/* One query row's backward pass against columns kt, vt (TP apart): ap the
 * row's weights (padded), go its output's gradient, ep (optional) the
 * scores' own gradient (padded); accumulates into dqi and the columns dkt,
 * dvt at positions [0, M) (M a multiple of VEC, past the last non-zero
 * weight and extra gradient). da and g hold TP floats. */
static void row_backward(float *restrict dqi, float *restrict dkt, float *restrict dvt,
                         float *restrict da, float *restrict g, const float *restrict ap,
                         const float *restrict go, const float *restrict ep,
                         const float *restrict qi, const float *restrict kt,
                         const float *restrict vt, int M, int TP, int D, int DV, float scale) {
    // da[j] = go . v_j; dv_j += a[j] go
    FOR_TP(j, M) da[j] = 0.0f;
    for (int e = 0; e < DV; e++) {
        const float ge = go[e], *restrict vr = vt + (long)e * TP;
        float *restrict dvr = dvt + (long)e * TP;
        FOR_TP(j, M) {
            da[j] += ge * vr[j];
            dvr[j] += ap[j] * ge;
        }
    }
    // dpre[j] = a[j] (da[j] - sum a da) (+ extra); dq_i += scale dpre k_j, dk_j += scale dpre q_i
    const float dot = dot8(da, ap, M);
    if (ep) FOR_TP(j, M) g[j] = (ap[j] * (da[j] - dot) + ep[j]) * scale;
    else FOR_TP(j, M) g[j] = ap[j] * (da[j] - dot) * scale;
    for (int d = 0; d < D; d++) {
        const float qd = qi[d];
        float *restrict dkr = dkt + (long)d * TP;
        dqi[d] += dot8(g, kt + (long)d * TP, M);
        FOR_TP(j, M) dkr[j] += g[j] * qd;
    }
}

/* Scratch of the fast kernels: da, g, ap, ep [TP]; kt, dkt [D, TP]; vt, dvt [DV, TP]. */
typedef struct HeadScratch {
    float *da, *g, *ap, *ep, *kt, *vt, *dkt, *dvt;
} HeadScratch;

static HeadScratch head_scratch(float *s, int TP, int D, int DV) {
    HeadScratch h;
    h.da = s, h.g = s + TP, h.ap = s + 2 * TP, h.ep = s + 3 * TP, h.kt = s + 4 * TP;
    h.dkt = h.kt + (long)D * TP, h.vt = h.dkt + (long)D * TP, h.dvt = h.vt + (long)DV * TP;
    return h;
}

void attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                        const float *dpreatt, const float *q, const float *k, const float *v,
                        const float *att, int T, int H, int D, int DV, float scale, int causal) {
    const int qs = H * D, vs = H * DV, TP = padded(T);
    HeadScratch w = head_scratch(scratch, TP, D, DV);
    for (int h = 0; h < H; h++) {
        to_columns(w.kt, k + h * D, T, TP, D, qs);
        to_columns(w.vt, v + h * DV, T, TP, DV, vs);
        memset(w.dkt, 0, (size_t)D * (size_t)TP * sizeof(float));
        memset(w.dvt, 0, (size_t)DV * (size_t)TP * sizeof(float));
        for (int i = 0; i < T; i++) {
            int n = causal ? i + 1 : T;
            pad_row(w.ap, att + ((long)h * T + i) * T, n, TP);
            if (dpreatt) pad_row(w.ep, dpreatt + ((long)h * T + i) * T, T, TP);
            row_backward(dq + (long)i * qs + h * D, w.dkt, w.dvt, w.da, w.g, w.ap,
                         dout + (long)i * vs + h * DV, dpreatt ? w.ep : NULL,
                         q + (long)i * qs + h * D, w.kt, w.vt, dpreatt ? TP : padded(n), TP, D,
                         DV, scale);
        }
        add_columns(dk + h * D, w.dkt, T, TP, D, qs);
        add_columns(dv + h * DV, w.dvt, T, TP, DV, vs);
    }
}

void attention_rows_forward(float *out, float *preatt, float *att, float *scratch,
                            const float *q, const float *k, const float *v, const int *pos, int R,
                            int T, int H, int D, int DV, float scale, int causal) {
    const int qs = H * D, vs = H * DV, TP = padded(T);
    HeadScratch w = head_scratch(scratch, TP, D, DV);
    for (int h = 0; h < H; h++) {
        to_columns(w.kt, k + h * D, T, TP, D, qs);
        to_columns(w.vt, v + h * DV, T, TP, DV, vs);
        for (int r = 0; r < R; r++) {
            int n = causal ? pos[r] + 1 : T;
            const float *qr = q + (long)r * qs + h * D;
            float *pre = preatt + ((long)r * H + h) * T, *a = att + ((long)r * H + h) * T;
            float *restrict s = w.da;
            FOR_TP(j, TP) s[j] = 0.0f;
            for (int d = 0; d < D; d++) {
                const float qd = qr[d], *restrict kr = w.kt + (long)d * TP;
                FOR_TP(j, TP) s[j] += qd * kr[j];
            }
            for (int j = 0; j < n; j++) pre[j] = s[j] * scale;
            for (int j = n; j < T; j++) pre[j] = 0.0f; /* masked: not computed */
            pad_row(w.ap, pre, n, TP);
            softmax_vec(w.ap, n);
            memcpy(a, w.ap, (size_t)T * sizeof *a);
            float *o = out + (long)r * vs + h * DV;
            for (int e = 0; e < DV; e++) o[e] = dot8(w.ap, w.vt + (long)e * TP, TP);
        }
    }
}

void attention_rows_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout,
                             const float *q, const float *k, const float *v, const float *att,
                             const int *pos, int R, int T, int H, int D, int DV, float scale,
                             int causal) {
    const int qs = H * D, vs = H * DV, TP = padded(T);
    HeadScratch w = head_scratch(scratch, TP, D, DV);
    for (int h = 0; h < H; h++) {
        to_columns(w.kt, k + h * D, T, TP, D, qs);
        to_columns(w.vt, v + h * DV, T, TP, DV, vs);
        memset(w.dkt, 0, (size_t)D * (size_t)TP * sizeof(float));
        memset(w.dvt, 0, (size_t)DV * (size_t)TP * sizeof(float));
        for (int r = 0; r < R; r++) {
            int n = causal ? pos[r] + 1 : T;
            pad_row(w.ap, att + ((long)r * H + h) * T, n, TP);
            row_backward(dq + (long)r * qs + h * D, w.dkt, w.dvt, w.da, w.g, w.ap,
                         dout + (long)r * vs + h * DV, NULL, q + (long)r * qs + h * D, w.kt,
                         w.vt, padded(n), TP, D, DV, scale);
        }
        add_columns(dk + h * D, w.dkt, T, TP, D, qs);
        add_columns(dv + h * DV, w.dvt, T, TP, DV, vs);
    }
}
