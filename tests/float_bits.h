/* float_bits.h - how the kernel tests compare a SIMD form with the naive
 * loops (errors in ulps) and fingerprint its outputs bit for bit (a hash
 * taken on one CPU, checked on another: tests/test_vecmath_neon.c,
 * test_layernorm.c, test_optim.c). */
#ifndef FLOAT_BITS_H
#define FLOAT_BITS_H
#include <stddef.h>
#include <stdint.h>

/* The spacing of floats at |v|, never less than the smallest subnormal 2^-149. */
double ulp_of(float v);
/* Error of got in ulps of want; both infinite with the same sign, or both
 * NaN, count as 0. */
double ulp_error(float got, float want);

/* FNV-1a over the bits of v[n], every NaN hashed as one pattern; start
 * from FNV_START, or chain: hash_floats(hash_floats(FNV_START, a, n), b, m). */
#define FNV_START 0xCBF29CE484222325ull
uint64_t hash_floats(uint64_t h, const float *v, size_t n);

#endif
