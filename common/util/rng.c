/* rng.c - PCG32 pseudo-random generator (see rng.h).
 *
 * PCG32 (M. E. O'Neill, "PCG: A Family of Simple Fast Space-Efficient
 * Statistically Good Algorithms for Random Number Generation", 2014): a
 * 64-bit linear congruential state, and an output that is a permuted
 * (xorshift, then random rotation) view of the old state. rng_seed follows the
 * reference pcg32_srandom_r, so seed 42, stream 54 reproduces the reference
 * demo's numbers (tests/test_rng.c checks this). */
#include "util/rng.h"
#include <math.h>

void rng_seed(Rng *r, uint64_t seed, uint64_t stream) {
    r->state = 0;
    r->inc = (stream << 1) | 1u;     /* the increment must be odd */
    rng_u32(r);
    r->state += seed;
    rng_u32(r);
}

uint32_t rng_u32(Rng *r) {
    uint64_t old = r->state;
    r->state = old * 6364136223846793005ULL + r->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18) ^ old) >> 27);
    uint32_t rot = (uint32_t)(old >> 59);
    return (xorshifted >> rot) | (xorshifted << ((32 - rot) & 31));
}

/* Plain u32 % n favours small values when 2^32 is not a multiple of n.
 * Rejecting the lowest (2^32 mod n) outputs leaves a range that is an exact
 * multiple of n. (-n) % n computes 2^32 mod n in 32-bit unsigned arithmetic. */
uint32_t rng_below(Rng *r, uint32_t n) {
    uint32_t threshold = (uint32_t)(-n) % n;
    for (;;) {
        uint32_t x = rng_u32(r);
        if (x >= threshold) return x % n;
    }
}

/* The top 24 bits fill a float's mantissa exactly: k / 2^24, k in [0, 2^24). */
float rng_uniform(Rng *r) {
    return (float)(rng_u32(r) >> 8) * (1.0f / 16777216.0f);
}

/* Box-Muller: sqrt(-2 ln u1) * cos(2 pi u2) is N(0,1) for independent uniform
 * u1 in (0,1], u2 in [0,1). (The second value, with sin, is not kept.) */
float rng_normal(Rng *r) {
    double u1 = 1.0 - (double)rng_uniform(r);   /* (0, 1]: log never sees 0 */
    double u2 = (double)rng_uniform(r);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

/* Fisher-Yates: position i gets a uniformly chosen element of a[0..i]. */
void rng_shuffle(Rng *r, int *a, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint32_t)i + 1u);
        int tmp = a[i];
        a[i] = a[j];
        a[j] = tmp;
    }
}
