/* blas.c: see blas.h. */
#define _POSIX_C_SOURCE 200809L
#include "blas.h"

#include <stddef.h>
#include <strings.h>

#ifdef TF_HAVE_OPENBLAS
#include <cblas.h>
#endif

const char *blas_library(void) {
#ifdef TF_HAVE_OPENBLAS
    return openblas_get_config();
#else
    return "a BLAS other than OpenBLAS (its kernels are not known)";
#endif
}

const char *blas_core(void) {
#ifdef TF_HAVE_OPENBLAS
    return openblas_get_corename();
#else
    return NULL;
#endif
}

const char *blas_best_core(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    // SkylakeX's kernels use AVX-512 F, CD, BW, DQ and VL; Zen's and
    // Haswell's AVX2 and FMA.
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return __builtin_cpu_is("amd") ? "Zen" : "Haswell";
#endif
    return NULL;
}

int blas_core_is_fallback(const char *core) {
    // OpenBLAS's x86 cores with AVX2 kernels (dynamic.c's corename table).
    static const char *const avx2_cores[] = {"Haswell",  "Zen",        "SkylakeX", "Cooperlake",
                                             "SapphireRapids", "Excavator"};
    if (!core || !blas_best_core()) return 0;
    for (size_t i = 0; i < sizeof avx2_cores / sizeof avx2_cores[0]; i++)
        if (strcasecmp(core, avx2_cores[i]) == 0) return 0;
    return 1;
}
