/* lanes_avx2.h - the first n of a vector's 8 float lanes: a mask for masked
 * loads, and a store that writes only those lanes. The AVX2 kernels use them
 * at the ragged end of a row (a row of 50 floats is 6 full vectors and 2
 * lanes) so that nothing is read or written past the row.
 *
 * Loads use AVX2's masked load (vmaskmovps): as fast as a plain load on the
 * CPUs measured, and the lanes masked off read as 0 without touching memory.
 * Stores do NOT use the masked store: AMD's cores run it as a long microcoded
 * sequence. On an AMD EPYC of the Zen 3 generation, a throwaway loop of pairs
 * of 8-float stores to L1 took 12.5 ns a pair masked (all lanes on or some)
 * against 1.1 ns plain; a plain store of the whole vector to a buffer on the
 * stack followed by n scalar copies took 1.3-1.6 ns. In the blocked matrix
 * product every tile ended in 12 masked stores, which made the packing and
 * the tiles of chapter 07's training step 1.2x slower there.
 *
 * Include only from files compiled with -mavx2 (the Makefile's *_avx2.c
 * rule, or wider). */
#ifndef LANES_AVX2_H
#define LANES_AVX2_H

#include <immintrin.h>

/* Lane i of the mask is on when i < n (0 <= n <= 8). */
static inline __m256i first_lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* dst[0..n) = lanes 0..n-1 of v (0 <= n <= 8); nothing else is written. */
static inline void store_first_lanes(float *dst, __m256 v, int n) {
    if (n == 8) {
        _mm256_storeu_ps(dst, v);
    } else if (n > 0) {
        float lanes[8];
        _mm256_storeu_ps(lanes, v);
        for (int l = 0; l < n; l++) dst[l] = lanes[l];
    }
}

#endif
