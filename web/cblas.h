/* cblas.h: the part of CBLAS the runtime calls (sgemm, sgemv), for the
 * WebAssembly build of tools/playground.sh, where there is no OpenBLAS.
 *
 * The native build includes OpenBLAS's <cblas.h>; the playground's build puts
 * web/ first on the include path, so the engine's kernels (runtime/engine/)
 * compile unchanged against web/cblas.c, plain loops written to vectorize
 * with wasm SIMD (-msimd128). Same argument conventions as the reference
 * CBLAS; only what the runtime uses is declared. */
#ifndef TF_WEB_CBLAS_H
#define TF_WEB_CBLAS_H

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 };

/* C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C (beta 0: C is not read). */
void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M,
                 int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc);

/* y = alpha op(A) x + beta y, A of M rows and N columns (beta 0: y is not read). */
void cblas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, int M, int N, float alpha,
                 const float *A, int lda, const float *x, int incx, float beta, float *y, int incy);

#endif
