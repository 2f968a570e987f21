/* rng.h: a small deterministic random number generator (splitmix64).
 *
 * The same seed gives the same stream on every machine: initialisation of
 * learned models, data generators, batch order and dropout all draw from it,
 * so training is reproducible bit for bit.
 */
#ifndef TF_RNG_H
#define TF_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct TfRng {
    uint64_t state;
} TfRng;

static inline void rng_seed(TfRng *r, uint64_t seed) { r->state = seed * 0x9E3779B97F4A7C15ull + 1; }

static inline uint64_t rng_next(TfRng *r) {
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 24 random bits (exact in float). */
static inline float rng_float(TfRng *r) { return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f); }

/* Uniform in [lo, hi). */
static inline float rng_uniform(TfRng *r, float lo, float hi) { return lo + (hi - lo) * rng_float(r); }

/* Uniform integer in [0, n), n >= 1. */
static inline uint64_t rng_below(TfRng *r, uint64_t n) { return rng_next(r) % n; }

/* Standard normal (Box-Muller on doubles). */
static inline float rng_normal(TfRng *r) {
    double u1 = ((double)(rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif
