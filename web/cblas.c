/* cblas.c: sgemm and sgemv for the WebAssembly build (cblas.h says why).
 *
 * Row-major only at the core; a column-major call is the same product
 * transposed (C^T = op(B)^T op(A)^T) and is turned into a row-major one.
 * The inner loops run along contiguous rows so that clang vectorizes them
 * with -msimd128; sums run in order of k, like the engine's naive twins
 * (runtime/engine/kernels.c), so results may differ from OpenBLAS's in the
 * last bits only. */
#include "cblas.h"

#include <stddef.h>

static void scale_rows(float *C, int M, int N, int ldc, float beta) {
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        if (beta == 0.0f)
            for (int j = 0; j < N; j++) c[j] = 0.0f;
        else if (beta != 1.0f)
            for (int j = 0; j < N; j++) c[j] *= beta;
    }
}

static void sgemm_rows(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc) {
    scale_rows(C, M, N, ldc, beta);
    if (M == 0 || N == 0 || K == 0 || alpha == 0.0f) return;
    if (!tb) {
        // C[i,:] += alpha A(i,k) B[k,:]: rows of B and C, contiguous.
        for (int i = 0; i < M; i++) {
            float *restrict c = C + (size_t)i * ldc;
            for (int k = 0; k < K; k++) {
                float a = alpha * (ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
                if (a == 0.0f) continue;
                const float *restrict b = B + (size_t)k * ldb;
                for (int j = 0; j < N; j++) c[j] += a * b[j];
            }
        }
        return;
    }
    // op(B) = B^T: C[i,j] += alpha dot(op(A)[i,:], B[j,:]).
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        for (int j = 0; j < N; j++) {
            const float *restrict b = B + (size_t)j * ldb;
            float acc = 0.0f;
            if (!ta) {
                const float *restrict a = A + (size_t)i * lda;
                for (int k = 0; k < K; k++) acc += a[k] * b[k];
            } else {
                for (int k = 0; k < K; k++) acc += A[(size_t)k * lda + i] * b[k];
            }
            c[j] += alpha * acc;
        }
    }
}

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M,
                 int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc) {
    int at = ta != CblasNoTrans, bt = tb != CblasNoTrans;
    if (order == CblasRowMajor)
        sgemm_rows(at, bt, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        sgemm_rows(bt, at, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc);
}

void cblas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, int M, int N, float alpha,
                 const float *A, int lda, const float *x, int incx, float beta, float *y,
                 int incy) {
    // A row-major A^T is a column-major A: one case is a dot per row, the
    // other a sum of rows.
    int rows = (order == CblasRowMajor) == (ta == CblasNoTrans);
    int ny = ta == CblasNoTrans ? M : N, nx = ta == CblasNoTrans ? N : M;
    for (int i = 0; i < ny; i++) {
        float *yi = y + (size_t)i * incy;
        *yi = beta == 0.0f ? 0.0f : beta * *yi;
    }
    if (alpha == 0.0f) return;
    if (rows) {
        for (int i = 0; i < ny; i++) {
            const float *restrict a = A + (size_t)i * lda;
            float acc = 0.0f;
            if (incx == 1)
                for (int k = 0; k < nx; k++) acc += a[k] * x[k];
            else
                for (int k = 0; k < nx; k++) acc += a[k] * x[(size_t)k * incx];
            y[(size_t)i * incy] += alpha * acc;
        }
    } else {
        for (int k = 0; k < nx; k++) {
            float xk = alpha * x[(size_t)k * incx];
            if (xk == 0.0f) continue;
            const float *restrict a = A + (size_t)k * lda;
            if (incy == 1)
                for (int i = 0; i < ny; i++) y[i] += xk * a[i];
            else
                for (int i = 0; i < ny; i++) y[(size_t)i * incy] += xk * a[i];
        }
    }
}
