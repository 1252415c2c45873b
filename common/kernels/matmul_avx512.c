/* matmul_avx512.c - the AVX-512 half of the blocked SGEMM: an 8x32 register
 * tile, its micro-kernel, and the packing for it.
 *
 *   C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C[M,N]      (see matmul.h)
 *
 * The same recipe as matmul_avx2.c, one size up. AVX-512 doubles the width
 * of a vector (16 floats in a zmm register instead of 8 in a ymm) and the
 * number of vector registers (32 instead of 16):
 *
 *   tile   accumulators               loads per k step       lanes of FMA per k step
 *   6x16   12 ymm (6 rows x 2 x 8)    2 vectors + 6 floats   12 x  8 =  96
 *   8x32   16 zmm (8 rows x 2 x 16)   2 vectors + 8 floats   16 x 16 = 256
 *
 * 2.7 times the arithmetic per k step for 1.25 times the loads, and 16
 * independent accumulators cover the FMA latency (4 cycles x 2 units = 8 in
 * flight). The registers would allow a taller tile (12x32 or 14x32: 24 or 28
 * accumulators); measured on an Intel Xeon (interleaved runs, 1 thread, sizes
 * 128-1024) they were no faster, and on an AMD EPYC (Zen 5) 12x32 was slower:
 * 0.72x of 8x32 at 1024^3, 0.84x at 64^3, 0.86-0.97x at 128^3, 256^3 and the
 * chapters' 2048x128x128 and 2176x64x64 (same program, interleaved medians of
 * 11). And 8 rows divide every size the chapters use, so their products have
 * no ragged tiles at all.
 *
 * The blocking keeps KC = 256, the same depth as the AVX2 kernel, on purpose:
 * each element of C is then the same chain of float FMAs in the same k order
 * in both kernels, so the two backends give the same bits (tests/
 * test_sgemm_avx2.c checks it), and a student switching between them sees only
 * the speed change. The B sliver (32 x 256 floats = 32 KiB) fills two thirds
 * of the 48 KiB L1, with the 8 KiB A sliver streaming through the rest.
 *
 * Small products (up to MC rows of A) take kernel_8x32_direct, which reads A
 * and B where they are, with masked loads and stores at the right edge (the
 * masks AVX-512 has and AVX2 lacks); see matmul_blocked.c for when.
 *
 * Compiled with -mavx512f -mavx2 -mfma (Makefile rule for *_avx512.c); call it
 * only when cpu_has_avx512f() says the CPU and the OS support AVX-512. */
#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"
#include "kernels/matmul_pack_avx2.h"
#include "kernels/matmul_tile_avx512.h"

#include <immintrin.h>

enum {
    MR = 8,   /* rows of C per tile (one broadcast each)                  */
    NR = 32,  /* columns of C per tile (two zmm vectors of 16 floats)     */
    KC = 256, /* as in matmul_avx2.c: the same k blocks, the same bits    */
    MC = 256, /* used when the CPU reports no cache sizes (gemm_blocking) */
    NC = 4096 /* 128 * NR: 256 x 4096 x 4 B = 4 MiB of packed B, in L3 */
};

/* C tile [8,32] = alpha * a_sliver^T @ b_sliver + beta * C tile.
 * Shapes: a_sliver[kc * 8] (k-major, packed), b_sliver[kc * 32] (k-major,
 * packed, 64-byte aligned), c with row stride ldc.
 * acc_lo[i] holds row i, columns 0..15; acc_hi[i] columns 16..31. The loops
 * over i have constant bounds and are fully unrolled, so each array element
 * is a register of its own. */
static void kernel_8x32(int kc, const float *restrict a_sliver,
                                const float *restrict b_sliver, float *c, int ldc, float alpha,
                                float beta) {
    __m512 acc_lo[MR], acc_hi[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) acc_lo[i] = acc_hi[i] = _mm512_setzero_ps();
    prefetch_tile_512(c, ldc);

    const float *a = a_sliver, *b = b_sliver;
    for (int p = 0; p < kc; p++) {
        __m512 b_lo = _mm512_load_ps(b);      /* op(B)[p, 0..15]  */
        __m512 b_hi = _mm512_load_ps(b + 16); /* op(B)[p, 16..31] */
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m512 a_i = _mm512_set1_ps(a[i]); /* op(A)[i, p] in all 16 lanes */
            acc_lo[i] = _mm512_fmadd_ps(a_i, b_lo, acc_lo[i]);
            acc_hi[i] = _mm512_fmadd_ps(a_i, b_hi, acc_hi[i]);
        }
        a += MR;
        b += NR;
    }

    store_tile_512(c, ldc, acc_lo, acc_hi, alpha, beta);
}

/* The same tile reading op(A) and op(B) where they are, for small products
 * (GemmKernel.kernel_direct in matmul_blocked.h):
 *   op(A)[i, p] = a[i * a_row + p * a_col]  for i < rows <= 8 (a missing row
 *                 repeats the last one, computed and not stored),
 *   op(B)[p, j] = b[p * b_row + j]          for j < cols <= 32 (masked loads:
 *                 the columns past cols are never read, so b may be the
 *                 caller's B or a packed sliver).
 * The same FMA chain per element as kernel_8x32: the same bits.
 * Shape: c [rows, cols] with row stride ldc. */
static void kernel_8x32_direct(int kc, const float *a, size_t a_row, size_t a_col, int rows,
                               const float *b, size_t b_row, int cols, float *c, int ldc,
                               float alpha, float beta) {
    const float *a_rows[MR]; /* op(A)[i, 0] of each row of the tile */
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) a_rows[i] = a + (size_t)(i < rows ? i : rows - 1) * a_row;
    __mmask16 mask_lo = cols >= 16 ? 0xFFFF : (__mmask16)((1u << cols) - 1u);
    __mmask16 mask_hi = cols >= 32 ? 0xFFFF : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1u);
    __m512 acc_lo[MR], acc_hi[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) acc_lo[i] = acc_hi[i] = _mm512_setzero_ps();
    if (a_col == 1) { /* A stored [M, K]: one index p walks the eight rows */
#pragma GCC unroll 2
        for (int p = 0; p < kc; p++) {
            __m512 b_lo = _mm512_maskz_loadu_ps(mask_lo, b + (size_t)p * b_row);
            __m512 b_hi = _mm512_maskz_loadu_ps(mask_hi, b + (size_t)p * b_row + 16);
#pragma GCC unroll 8
            for (int i = 0; i < MR; i++) {
                __m512 a_i = _mm512_set1_ps(a_rows[i][p]);
                acc_lo[i] = _mm512_fmadd_ps(a_i, b_lo, acc_lo[i]);
                acc_hi[i] = _mm512_fmadd_ps(a_i, b_hi, acc_hi[i]);
            }
        }
    } else { /* A stored [K, M]: a step's values sit a_row apart in one row of A */
        for (int p = 0; p < kc; p++) {
            const float *a_p = a + (size_t)p * a_col;
            __m512 b_lo = _mm512_maskz_loadu_ps(mask_lo, b + (size_t)p * b_row);
            __m512 b_hi = _mm512_maskz_loadu_ps(mask_hi, b + (size_t)p * b_row + 16);
#pragma GCC unroll 8
            for (int i = 0; i < MR; i++) {
                __m512 a_i = _mm512_set1_ps(a_p[(size_t)(i < rows ? i : rows - 1) * a_row]);
                acc_lo[i] = _mm512_fmadd_ps(a_i, b_lo, acc_lo[i]);
                acc_hi[i] = _mm512_fmadd_ps(a_i, b_hi, acc_hi[i]);
            }
        }
    }
    __m512 valpha = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
        if (i < rows)
            store_row_512(c + (size_t)i * ldc, acc_lo[i], acc_hi[i], mask_lo, mask_hi, valpha, beta);
}

/* The packing of matmul_pack_avx2.h, for this file's tile. */
static void pack_a_8(float *sliver, const float *A, int lda, int trans_a, int i0, int rows,
                      int p0, int kc) {
    pack_a_sliver_avx2(MR, sliver, A, lda, trans_a, i0, rows, p0, kc);
}
static void pack_b_32(float *sliver, const float *B, int ldb, int trans_b, int p0, int kc,
                      int j0, int cols) {
    pack_b_sliver_avx2(NR, sliver, B, ldb, trans_b, p0, kc, j0, cols);
}

static const GemmKernel AVX512_KERNEL = {
    .name = "avx512 8x32",
    .mr = MR, .nr = NR, .kc = KC, .mc = MC, .nc = NC,
    .pack_a = pack_a_8, .pack_b = pack_b_32, .kernel = kernel_8x32,
    .kernel_direct = kernel_8x32_direct, .b_in_place = 1,
    .small = sgemm_small_avx2, /* same bits, and at these sizes 8 lanes are enough */
    .small_max_work = 4096.0,  /* 2^12: the direct tile is faster above, see matmul_blocked.c */
};

const GemmKernel *gemm_kernel_avx512(void) { return &AVX512_KERNEL; }

void sgemm_avx512(int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta,
                  float *C, int ldc) {
    sgemm_blocked(&AVX512_KERNEL, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
