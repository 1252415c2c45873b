/* rng.h - a small seeded pseudo-random generator owned by the caller.
 *
 * PCG32 (O'Neill 2014): 64-bit state, 32-bit output. The same seed gives the
 * same stream on every machine, so runs and data splits are reproducible. */
#ifndef RNG_H
#define RNG_H
#include <stdint.h>

typedef struct { uint64_t state, inc; } Rng;

void rng_seed(Rng *r, uint64_t seed, uint64_t stream);
uint32_t rng_u32(Rng *r);
/* Uniform integer in [0, n), without modulo bias. n >= 1. */
uint32_t rng_below(Rng *r, uint32_t n);
/* Uniform float in [0, 1). */
float rng_uniform(Rng *r);
/* Standard normal (Box-Muller). */
float rng_normal(Rng *r);
/* Fisher-Yates shuffle of an int array. */
void rng_shuffle(Rng *r, int *a, int n);

#endif
