/* blas.h: which BLAS library and kernel core the engine's matrix products
 * run on, and the core this CPU could run instead.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels for the CPU
 * when it loads; a CPU it does not know (OpenBLAS 0.3.21 on recent Intel
 * Xeons) gets a generic fallback (Prescott: SSE3 kernels), several times
 * slower, and with sums rounded differently from the AVX2/AVX-512 kernels'.
 * OPENBLAS_CORETYPE, read when the library loads, overrides the choice
 * (docs/training.md#what-is-reproducible-where).
 *
 * Every string returned is static: the caller frees nothing.
 */
#ifndef TF_BLAS_H
#define TF_BLAS_H

/* The library as it describes itself ("OpenBLAS 0.3.21 NO_LAPACKE
 * DYNAMIC_ARCH ... Haswell MAX_THREADS=64"), or "a BLAS other than OpenBLAS
 * (its kernels are not known)". */
const char *blas_library(void);

/* The kernel core OpenBLAS runs ("Haswell", "SkylakeX", "Prescott"), or NULL
 * for a BLAS other than OpenBLAS. */
const char *blas_core(void);

/* The best OpenBLAS core for this CPU's vectors: "SkylakeX" (AVX-512),
 * "Zen" (an AMD CPU with AVX2), "Haswell" (AVX2 and FMA); NULL for a CPU
 * without AVX2, or not x86. */
const char *blas_best_core(void);

/* Whether core (a blas_core() name) is one without AVX2 kernels while this
 * CPU has AVX2: a generic fallback that wastes the CPU's vectors. 0 for
 * NULL. */
int blas_core_is_fallback(const char *core);

#endif
