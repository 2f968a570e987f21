/* exp_vec.h: the runtime's one vectorizable exp, shared by the engine's
 * kernels (kernels.c) and the trainer's (runtime/train/nn.c), so that both
 * round alike. */
#ifndef TF_EXP_VEC_H
#define TF_EXP_VEC_H

#include <math.h>
#include <stdint.h>

/* k = round(x / ln 2), r = x - k ln 2 and p = e^r, for x a float or a
 * vector of floats (zero: 0 of x's type, so that the first coefficient
 * takes it): the one sequence of operations both exp_vec and the attention
 * kernel's vector form (kernels.c, lanes_exp_softmax) run. */
#define EXP_VEC_POLY(k, r, p, x, zero)                                                           \
    do {                                                                                         \
        (k) = ((x) * 1.44269504088896341f + 12582912.0f) - 12582912.0f;                          \
        (r) = (x) - (k) * 0.693359375f + (k) * 2.12194440e-4f;                                   \
        (p) = (zero) + 1.9875691500e-4f;                                                         \
        (p) = (p) * (r) + 1.3981999507e-3f;                                                      \
        (p) = (p) * (r) + 8.3334519073e-3f;                                                      \
        (p) = (p) * (r) + 4.1665795894e-2f;                                                      \
        (p) = (p) * (r) + 1.6666665459e-1f;                                                      \
        (p) = (p) * (r) + 5.0000001201e-1f;                                                      \
        (p) = (p) * (r) * (r) + (r) + 1.0f;                                                      \
    } while (0)

/* y = exp_vec(x) on every lane of a vector x of type VT (GCC's and clang's
 * vector extension; MT the int32_t vector of as many lanes): the same
 * operations, so the same bits, as exp_vec below. SEL(m, a, b) picks a's
 * lanes where m is true. The vector form of the trainer's attention
 * (runtime/train/nn.c) and of the engine's (kernels.c, lanes_exp_softmax). */
#define EXP_VEC_SEL(VT, MT, m, a, b) ((VT)(((m) & (MT)(a)) | (~(m) & (MT)(b))))
#define EXP_VEC_LANES(VT, MT, y, xin)                                                            \
    do {                                                                                         \
        const VT zero_ = {0};                                                                    \
        VT x_ = (xin), k_, r_, p_;                                                               \
        MT nan_ = x_ != x_;                                                                      \
        x_ = EXP_VEC_SEL(VT, MT, x_ > -87.0f, x_, zero_ - 87.0f); /* NaN too */                  \
        x_ = EXP_VEC_SEL(VT, MT, x_ < 88.0f, x_, zero_ + 88.0f);                                 \
        EXP_VEC_POLY(k_, r_, p_, x_, zero_);                                                     \
        MT two_k_ = (__builtin_convertvector(k_, MT) + 127) << 23;                               \
        (y) = p_ * (VT)two_k_;                                                                   \
        (y) = EXP_VEC_SEL(VT, MT, x_ <= -87.0f, zero_, (y));                                     \
        (y) = EXP_VEC_SEL(VT, MT, nan_, zero_ + NAN, (y));                                       \
    } while (0)

/* e^x without a library call, so that loops over it vectorize: x = k ln 2 + r
 * with |r| <= ln 2 / 2, e^r by its degree-7 Taylor-like minimax polynomial
 * (Cephes' expf), times 2^k built in the exponent bits. Within 2 ulp of
 * expf for x in [-87, 88]; 0 below, NaN for NaN (the clamp keeps the
 * conversion to int defined: a NaN score or GELU input is the callers' to
 * report). */
static inline __attribute__((always_inline)) float exp_vec(float x) {
    int nan = x != x;
    x = x > -87.0f ? x : -87.0f; /* NaN too: the int conversion below must see a number */
    x = x < 88.0f ? x : 88.0f;
    // k = round(x / ln 2), by the 1.5 * 2^23 trick (floorf is a call unless
    // traps are off).
    float k, r, p;
    EXP_VEC_POLY(k, r, p, x, 0.0f);
    union {
        int32_t i;
        float f;
    } two_k = {.i = ((int32_t)k + 127) << 23};
    return nan ? NAN : x <= -87.0f ? 0.0f : p * two_k.f;
}

#endif
