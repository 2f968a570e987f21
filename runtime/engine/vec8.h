/* vec8.h: sums and dot products in eight lanes, combined in a fixed order
 * (the result does not depend on how the compiler vectorizes the loop):
 * shared by the engine's LayerNorm (kernels.c) and the trainer's layers
 * (runtime/train/nn.c). Lane k sums elements k, k + 8, k + 16, ...; the
 * lanes are combined as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
 * The lanes are one vector (GCC's and clang's vector extension) and the
 * combination is done by shuffles, in registers. */
#ifndef TF_VEC8_H
#define TF_VEC8_H

#include <string.h>

typedef float Vec8 __attribute__((vector_size(8 * sizeof(float))));

/* The lanes of *v combined in the order above (by pointer: GCC notes an ABI
 * change for a vector passed by value). */
static inline __attribute__((always_inline)) float vec8_combine(const Vec8 *v) {
    Vec8 f = *v + __builtin_shufflevector(*v, *v, 1, 0, 3, 2, 5, 4, 7, 6);
    Vec8 g = f + __builtin_shufflevector(f, f, 2, 3, 0, 1, 6, 7, 4, 5);
    return g[0] + g[4];
}

static inline float dot8(const float *restrict a, const float *restrict b, int n) {
    Vec8 acc = {0}, x, y;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&x, a + i, sizeof x), memcpy(&y, b + i, sizeof y);
        acc += x * y;
    }
    for (; i < n; i++) acc[i & 7] += a[i] * b[i];
    return vec8_combine(&acc);
}

static inline float sum8(const float *restrict a, int n) {
    Vec8 acc = {0}, x;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&x, a + i, sizeof x);
        acc += x;
    }
    for (; i < n; i++) acc[i & 7] += a[i];
    return vec8_combine(&acc);
}

#endif
