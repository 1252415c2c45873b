/* matmul_pack_avx2.h - packing op(A) and op(B) into the micro-kernel's
 * reading order, with AVX2 loads, stores and 8x8 register transposes.
 *
 * Shared by matmul_avx2.c (6x16 tile) and matmul_avx512.c (wider tile):
 * the layout of a packed sliver depends only on the tile size (mr, nr), which
 * each file passes as a constant, so the compiler specialises these inline
 * functions for it. Include only from files compiled with -mavx2 (or wider).
 *
 *   A sliver: sliver[p * mr + i] = op(A)[i0 + i, p0 + p],  rows padded with zeros to mr
 *   B sliver: sliver[p * nr + j] = op(B)[p0 + p, j0 + j],  columns padded with zeros to nr
 *
 * nr must be a multiple of 8; mr may be anything up to 16. */
#ifndef MATMUL_PACK_AVX2_H
#define MATMUL_PACK_AVX2_H

#include <immintrin.h>
#include <stddef.h>

#include "kernels/lanes_avx2.h"

/* One element of op(A) (M x K) and of op(B) (K x N) as the caller stored them. */
static inline float packed_op_a(const float *A, int lda, int trans_a, int i, int p) {
    return trans_a ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
}
static inline float packed_op_b(const float *B, int ldb, int trans_b, int p, int j) {
    return trans_b ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
}

/* Transpose an 8x8 block held in 8 registers: lane j of r[i] goes to lane i
 * of r[j]. Three rounds: interleave pairs of rows (unpack), then pairs of
 * pairs (shuffle), then swap 128-bit halves (permute2f128). */
static inline void transpose_8x8(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]); /* r00 r10 r01 r11 | r04 r14 r05 r15 */
    __m256 t1 = _mm256_unpackhi_ps(r[0], r[1]); /* r02 r12 r03 r13 | r06 r16 r07 r17 */
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]);
    __m256 t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]);
    __m256 t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]);
    __m256 t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)); /* r00 r10 r20 r30 | r04 .. */
    __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)); /* r01 r11 r21 r31 | r05 .. */
    __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)); /* r40 r50 r60 r70 | r44 .. */
    __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20); /* r00 r10 ... r70 */
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31); /* r04 r14 ... r74 */
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* Pack rows [i0, i0+rows) x depth [p0, p0+kc) of op(A) into an mr-row sliver.
 * Shape: A as stored, sliver[kc * mr]. */
static inline void pack_a_sliver_avx2(int mr, float *sliver, const float *A, int lda,
                                      int trans_a, int i0, int rows, int p0, int kc) {
    int p = 0;
    if (!trans_a && rows == mr) {
        /* A stored [M, K]: each row is contiguous in k. Take 8 rows x 8 k at a
         * time (the missing rows of the last group are zeros), transpose the
         * 8x8 block, and register r[q] = column p+q = the (up to) 8 values the
         * kernel wants for step p+q, stored at their place in the sliver. */
        for (; p + 8 <= kc; p += 8) {
            for (int g = 0; g < mr; g += 8) {
                int lanes = mr - g < 8 ? mr - g : 8;
                const float *row = A + (size_t)(i0 + g) * lda + p0 + p;
                __m256 r[8];
                for (int i = 0; i < 8; i++)
                    r[i] = i < lanes ? _mm256_loadu_ps(row + (size_t)i * lda) : _mm256_setzero_ps();
                transpose_8x8(r);
                if (lanes == 8) {
                    for (int q = 0; q < 8; q++) _mm256_storeu_ps(sliver + (p + q) * mr + g, r[q]);
                } else {
                    for (int q = 0; q < 8; q++) store_first_lanes(sliver + (p + q) * mr + g, r[q], lanes);
                }
            }
        }
    } else if (trans_a && rows == mr) {
        /* A stored [K, M]: the mr values for one k are already adjacent. */
        for (; p < kc; p++) {
            const float *src = A + (size_t)(p0 + p) * lda + i0;
            for (int g = 0; g < mr; g += 8) {
                int lanes = mr - g < 8 ? mr - g : 8;
                store_first_lanes(sliver + p * mr + g, _mm256_maskload_ps(src + g, first_lanes(lanes)), lanes);
            }
        }
    }
    for (; p < kc; p++) /* what is left: the k remainder, or a ragged last sliver */
        for (int i = 0; i < mr; i++)
            sliver[p * mr + i] = i < rows ? packed_op_a(A, lda, trans_a, i0 + i, p0 + p) : 0.0f;
}

/* Pack depth [p0, p0+kc) x columns [j0, j0+cols) of op(B) into an nr-column
 * sliver. Shape: B as stored, sliver[kc * nr] (32-byte aligned).
 * A ragged last sliver (cols < nr) takes the same vector path as a full one,
 * its missing columns read as zeros: attention's products have such an edge
 * in every product (N = 50 tokens is 3 slivers of 16 and one of 2; a head's
 * 24 columns, one of 16 and one of 8), and packing it element by element
 * (strided for K^T) made chapter 07's long training step 1.2x slower on the
 * Zen 3 (60 steps taking turns, medians of 3: 20.2 against 16.8 s). */
static inline void pack_b_sliver_avx2(int nr, float *sliver, const float *B, int ldb,
                                      int trans_b, int p0, int kc, int j0, int cols) {
    int p = 0;
    if (!trans_b) {
        /* B stored [K, N]: rows are contiguous in n, a straight copy. */
        for (; p < kc; p++) {
            const float *src = B + (size_t)(p0 + p) * ldb + j0;
            for (int j = 0; j < nr; j += 8) {
                int lanes = cols - j;   /* columns of these 8 that exist: 8 or more, some, or none */
                __m256 v = lanes >= 8 ? _mm256_loadu_ps(src + j)
                         : lanes > 0  ? _mm256_maskload_ps(src + j, first_lanes(lanes))
                                      : _mm256_setzero_ps();
                _mm256_store_ps(sliver + p * nr + j, v);
            }
        }
    } else {
        /* B stored [N, K]: column j of op(B) is row j of B, contiguous in k.
         * Transpose 8x8 blocks: 8 rows of B x 8 k -> 8 k x 8 columns (rows
         * past cols are zeros). */
        for (; p + 8 <= kc; p += 8) {
            for (int j = 0; j < nr; j += 8) {
                const float *src = B + (size_t)(j0 + j) * ldb + p0 + p;
                __m256 r[8];
                for (int q = 0; q < 8; q++)
                    r[q] = j + q < cols ? _mm256_loadu_ps(src + (size_t)q * ldb) : _mm256_setzero_ps();
                transpose_8x8(r);
                for (int q = 0; q < 8; q++) _mm256_store_ps(sliver + (p + q) * nr + j, r[q]);
            }
        }
    }
    for (; p < kc; p++) /* what is left: the k remainder of a transposed B */
        for (int j = 0; j < nr; j++)
            sliver[p * nr + j] = j < cols ? packed_op_b(B, ldb, trans_b, p0 + p, j0 + j) : 0.0f;
}

#endif
