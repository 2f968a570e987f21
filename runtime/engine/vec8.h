/* vec8.h: sums and dot products in eight lanes, combined in a fixed order
 * (the result does not depend on how the compiler vectorizes the loop):
 * shared by the engine's LayerNorm (kernels.c) and the trainer's layers
 * (runtime/train/nn.c). */
#ifndef TF_VEC8_H
#define TF_VEC8_H

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

#endif
