/* interval.h: closed intervals of reals with outward rounding, for the
 * validator (compiler/prove.h).
 *
 * Which rounding: every bound is a double, and every operation is done in
 * double then moved outward on each side by 2^-51 of its size plus 2^-1022
 * (iv_down, iv_up: at least two ulps, and more than any subnormal's
 * error): a round-to-nearest result lies within half an ulp of the exact
 * one, and the move itself rounds by at most half an ulp, so the moved
 * interval encloses the exact result of the operation on any reals in the
 * operands (nextafter does the same, one ulp, at ten times the cost).
 * iv_exp moves twice as far (glibc's exp is within one ulp).
 *
 * The engine's own float32 rounding is not modelled here but by the caller,
 * as a proven relative error (compiler/prove_net.c): a float32 sum or dot
 * product of n terms is within gamma_n = n u / (1 - n u) (u = 2^-24) of
 * sum |terms| of the exact one (Higham, "Accuracy and Stability of
 * Numerical Algorithms", 3.1), whatever order BLAS adds in.
 */
#ifndef TF_INTERVAL_H
#define TF_INTERVAL_H

#include <math.h>

typedef struct TfIv {
    double lo, hi;
} TfIv;

#define TF_F32_U 5.9604644775390625e-08 /* 2^-24, float32's unit roundoff */

static inline double iv_down(double r) { return isfinite(r) ? r - fabs(r) * 0x1p-51 - 0x1p-1022 : r; }
static inline double iv_up(double r) { return isfinite(r) ? r + fabs(r) * 0x1p-51 + 0x1p-1022 : r; }
static inline double iv_min(double a, double b) { return a < b ? a : b; }
static inline double iv_max(double a, double b) { return a > b ? a : b; }
static inline TfIv iv_out(double lo, double hi) { return (TfIv){iv_down(lo), iv_up(hi)}; }
static inline TfIv iv_pt(double x) { return (TfIv){x, x}; }
static inline TfIv iv_add(TfIv a, TfIv b) { return iv_out(a.lo + b.lo, a.hi + b.hi); }
static inline TfIv iv_sub(TfIv a, TfIv b) { return iv_out(a.lo - b.hi, a.hi - b.lo); }
static inline TfIv iv_mul(TfIv a, TfIv b) {
    double p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
    double lo = p[0], hi = p[0];
    for (int i = 1; i < 4; i++) {
        lo = iv_min(lo, p[i]);
        hi = iv_max(hi, p[i]);
    }
    return iv_out(lo, hi);
}
/* a / b for b not containing 0 (the caller's to ensure); else everything. */
static inline TfIv iv_div(TfIv a, TfIv b) {
    if (b.lo <= 0 && b.hi >= 0) return (TfIv){-INFINITY, INFINITY};
    TfIv r = {1.0 / b.hi, 1.0 / b.lo};
    r = iv_out(r.lo, r.hi);
    return iv_mul(a, r);
}
static inline TfIv iv_scale(TfIv a, double c) { return iv_mul(a, iv_pt(c)); }
static inline TfIv iv_hull(TfIv a, TfIv b) { return (TfIv){iv_min(a.lo, b.lo), iv_max(a.hi, b.hi)}; }
/* a widened by r >= 0 on each side. */
static inline TfIv iv_widen(TfIv a, double r) { return iv_out(a.lo - r, a.hi + r); }
static inline double iv_mag(TfIv a) { return iv_max(fabs(a.lo), fabs(a.hi)); }
static inline double iv_mid(TfIv a) { return 0.5 * a.lo + 0.5 * a.hi; }
static inline TfIv iv_relu(TfIv a) { return (TfIv){iv_max(a.lo, 0), iv_max(a.hi, 0)}; }
static inline TfIv iv_exp(TfIv a) {
    double lo = exp(a.lo), hi = exp(a.hi);
    lo = iv_down(iv_down(lo));
    hi = iv_up(iv_up(hi));
    return (TfIv){lo < 0 ? 0 : lo, hi};
}
/* gamma_n: the float32 rounding of a sum of n terms, relative to sum |terms|. */
static inline double iv_gamma(int n) {
    double nu = (double)n * TF_F32_U;
    return iv_up(nu / (1.0 - nu));
}
/* A tighter bound for a float32 sum of n nonzero terms, in any order or
 * tree (BLAS's blocks, FMA or not), when the positive terms total at most
 * pos and the negative ones at most neg in magnitude: every partial sum is
 * a subset sum, within [-neg, pos] up to the errors E made so far, so each
 * of the n - 1 additions errs by at most u (max(pos, neg) + E) and each
 * product by u |term|: E <= (u (n - 1) max + u (pos + neg)) / (1 - u (n - 1)).
 * Never much above gamma_n (pos + neg), and about half of it where the
 * terms nearly cancel (a staircase's steps: pos and neg alike). */
static inline double iv_sum_err(double pos, double neg, int n) {
    if (n <= 1) return iv_up(TF_F32_U * (pos + neg));
    double k = (double)(n - 1) * TF_F32_U;
    double e = (k * iv_max(pos, neg) + TF_F32_U * (pos + neg)) / (1.0 - k);
    return iv_up(iv_up(e) * (1.0 + 0x1p-50));
}

#endif
