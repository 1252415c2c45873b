/* matmul_tile_avx512.h - what every AVX-512 8x32 micro-kernel (matmul_avx512.c
 * in float, matmul_bf16.c in bf16) does around its k loop: ask for the C
 * tile before the loop, and store it after, one row at a time
 * (store_tile_512):
 *
 *   c[0..31] = alpha * acc + beta * c        (acc: two zmm of 16 float sums)
 *
 * in one place so that both kernels finish their tiles with the same
 * operations. Include it only from files compiled with -mavx512f. */
#ifndef MATMUL_TILE_AVX512_H
#define MATMUL_TILE_AVX512_H

#include <immintrin.h>

/* Ask for the C tile [8, 32] (row stride ldc) now: its lines arrive while
 * the k loop runs, and the store at the end finds them in L1. */
static inline void prefetch_tile_512(const float *c, int ldc) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (size_t)i * ldc + 31), _MM_HINT_T0);
    }
}

/* c[0..31] = alpha * acc + beta * c in the lanes mask_lo (columns 0..15)
 * and mask_hi (16..31) select, with the same operations, in the same order,
 * as the AVX2 kernel's store_row (so both give the same bits). beta == 0
 * never reads c. */
static inline void store_row_512(float *c, __m512 acc0, __m512 acc1, __mmask16 mask_lo,
                                 __mmask16 mask_hi, __m512 alpha, float beta) {
    if (beta == 0.0f) {
        _mm512_mask_storeu_ps(c, mask_lo, _mm512_mul_ps(alpha, acc0));
        _mm512_mask_storeu_ps(c + 16, mask_hi, _mm512_mul_ps(alpha, acc1));
    } else if (beta == 1.0f) {
        _mm512_mask_storeu_ps(c, mask_lo, _mm512_fmadd_ps(alpha, acc0, _mm512_maskz_loadu_ps(mask_lo, c)));
        _mm512_mask_storeu_ps(c + 16, mask_hi,
                              _mm512_fmadd_ps(alpha, acc1, _mm512_maskz_loadu_ps(mask_hi, c + 16)));
    } else {
        __m512 vbeta = _mm512_set1_ps(beta);
        _mm512_mask_storeu_ps(c, mask_lo, _mm512_fmadd_ps(alpha, acc0,
                              _mm512_mul_ps(vbeta, _mm512_maskz_loadu_ps(mask_lo, c))));
        _mm512_mask_storeu_ps(c + 16, mask_hi, _mm512_fmadd_ps(alpha, acc1,
                              _mm512_mul_ps(vbeta, _mm512_maskz_loadu_ps(mask_hi, c + 16))));
    }
}

/* The whole tile: row i of C (row stride ldc) = alpha * (acc_lo[i],
 * acc_hi[i]) + beta * row i, each row by store_row_512. */
static inline void store_tile_512(float *c, int ldc, const __m512 acc_lo[8], const __m512 acc_hi[8], float alpha,
                                  float beta) {
    __m512 valpha = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        store_row_512(c + (size_t)i * ldc, acc_lo[i], acc_hi[i], 0xFFFF, 0xFFFF, valpha, beta);
}

#endif
