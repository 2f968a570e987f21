/* vec_psabi.h: for the files that use 64-byte vectors (GCC's and clang's
 * vector extension) in code that may be compiled without AVX-512, where gcc
 * and clang note that passing such a vector to a function changes the ABI
 * (-Wpsabi). Those files keep their vectors in static, always-inlined
 * helpers or pass them by pointer, so no call can disagree: the note is
 * turned off for the rest of the file that includes this. */
#ifndef TF_VEC_PSABI_H
#define TF_VEC_PSABI_H

#if defined(__clang__)
#if __has_warning("-Wpsabi")
#pragma clang diagnostic ignored "-Wpsabi"
#endif
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#endif
