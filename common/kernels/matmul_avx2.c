/* matmul_avx2.c - the AVX2/FMA half of the blocked SGEMM: a 6x16 register
 * tile, its micro-kernel, and the packing for it.
 *
 *   C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C[M,N]      (see matmul.h)
 *
 * This is the GotoBLAS / BLIS recipe, written out one step at a time
 * (common/README.md is the lesson that goes with it):
 *
 *   1. The micro-kernel computes one 6x16 tile of C entirely in registers:
 *      12 ymm accumulators (6 rows x 2 vectors of 8 floats). Each step of k
 *      loads 16 floats of B (two vectors), broadcasts 6 floats of A, and issues
 *      12 fused multiply-adds. 12 independent FMAs per step keep both FMA
 *      units busy despite the 4-cycle FMA latency.
 *   2. Packing (matmul_pack_avx2.h) copies a 6-row sliver of op(A) and a
 *      16-column sliver of op(B) into small contiguous buffers laid out in
 *      exactly the order the kernel reads them (k-major). The kernel then walks
 *      memory linearly with no strides, whatever the transposes, strides or
 *      alignment of the caller's matrices were; the ragged edges are padded
 *      with zeros.
 *   3. Five loops around the micro-kernel (matmul_blocked.c) choose which
 *      block of each matrix lives in which cache level (KC, MC, NC below), so
 *      every float the kernel loads comes from L1 or L2, not from memory.
 *   4. OpenMP threads (also matmul_blocked.c) share the packing and the tiles.
 *      Each C element is computed by exactly one thread, in the same k order,
 *      so the result does not depend on the number of threads.
 *
 * Compiled with -mavx2 -mfma (Makefile rule for *_avx2.c); call it only when
 * cpu_has_avx2_fma() says the CPU has those instructions. */
#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"
#include "kernels/matmul_pack_avx2.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- Register tile --------------------------------------------------------- */

enum {
    MR = 6,  /* rows of C per micro-kernel tile (one ymm broadcast each)     */
    NR = 16, /* columns of C per tile (two ymm vectors of 8 floats)          */
};

/* ---- Cache blocking -------------------------------------------------------
 * KC (depth of one block): the kernel streams a 6 x KC sliver of packed A and
 *   a KC x 16 sliver of packed B. (6 + 16) * 4 bytes * KC = 88 * KC bytes;
 *   KC = 256 gives 22.5 KiB, under the 32-48 KiB L1d of any recent x86, so
 *   the B sliver (16 KiB, reused by every A sliver) stays in L1 while the A
 *   slivers and the C tile pass through.
 * MC (rows of A per block) and NC (columns of B per block) come from the
 *   caches the CPU reports (gemm_blocking in matmul_blocked.c: the packed A
 *   block fills half of L2, the B panel a quarter of L3). The values below
 *   are used only when the CPU reports no sizes: an A block of 384 KiB, a B
 *   panel of 4 MiB.
 * MC is a multiple of MR and NC of NR, so only the last block has ragged
 * tiles. (bench/bench_sgemm.c measures the result; common/README.md shows
 * the numbers.) */
enum {
    KC = 256,
    MC = 384,  /* 64 * MR */
    NC = 4096, /* 256 * NR */
};

/* ---- Micro-kernel ------------------------------------------------------------- */

/* Write one row of up to 16 results: c[0..cols) = alpha * acc + beta * c,
 * columns 0..7 from acc0 and 8..15 from acc1; the full tiles of the blocked
 * kernel pass cols = 16, the direct and small-product paths their ragged
 * right edge. beta == 0 never reads c (it may hold NaN); beta == 1 is the
 * accumulate of a backward pass. Only the edge's lanes use a masked load,
 * and no lane a masked store (store_first_lanes in lanes_avx2.h: slow on
 * AMD); this runs once per tile, after hundreds of FMAs. */
static inline __m256 load_first_lanes(const float *c, int n) {
    return n == 8 ? _mm256_loadu_ps(c) : _mm256_maskload_ps(c, first_lanes(n));
}

static inline void store_row(float *c, __m256 acc0, __m256 acc1, int cols, __m256 alpha, float beta) {
    int n0 = cols < 8 ? cols : 8, n1 = cols > 8 ? cols - 8 : 0;
    __m256 r0, r1;
    if (beta == 0.0f) {
        r0 = _mm256_mul_ps(alpha, acc0);
        r1 = _mm256_mul_ps(alpha, acc1);
    } else if (beta == 1.0f) {
        r0 = _mm256_fmadd_ps(alpha, acc0, load_first_lanes(c, n0));
        r1 = _mm256_fmadd_ps(alpha, acc1, load_first_lanes(c + 8, n1));
    } else {
        __m256 vbeta = _mm256_set1_ps(beta);
        r0 = _mm256_fmadd_ps(alpha, acc0, _mm256_mul_ps(vbeta, load_first_lanes(c, n0)));
        r1 = _mm256_fmadd_ps(alpha, acc1, _mm256_mul_ps(vbeta, load_first_lanes(c + 8, n1)));
    }
    store_first_lanes(c, r0, n0);
    store_first_lanes(c + 8, r1, n1);
}

/* C tile [6,16] = alpha * a_sliver^T @ b_sliver + beta * C tile.
 * Shapes: a_sliver[kc * 6] (k-major, packed), b_sliver[kc * 16] (k-major,
 * packed, 32-byte aligned), c with row stride ldc. */
static void kernel_6x16(int kc, const float *restrict a_sliver, const float *restrict b_sliver,
                        float *c, int ldc, float alpha, float beta) {
    /* Accumulator c<row><half>: row of the tile, half 0 = columns 0..7, 1 = 8..15. */
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    const float *a = a_sliver, *b = b_sliver;

    /* Ask for the C tile now; it arrives while the k loop runs. C is the one
     * operand that is not packed, and for a big C it comes from L3 or memory,
     * which would otherwise cost a stall of ~100 ns at the store. */
    for (int i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (size_t)i * ldc + NR - 1), _MM_HINT_T0);
    }

#pragma GCC unroll 4
    for (int p = 0; p < kc; p++) {
        __m256 b0 = _mm256_load_ps(b);     /* op(B)[p, 0..7]  */
        __m256 b1 = _mm256_load_ps(b + 8); /* op(B)[p, 8..15] */
        __m256 ai;                         /* op(A)[i, p] in all 8 lanes */
        ai = _mm256_broadcast_ss(a + 0);
        c00 = _mm256_fmadd_ps(ai, b0, c00);
        c01 = _mm256_fmadd_ps(ai, b1, c01);
        ai = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(ai, b0, c10);
        c11 = _mm256_fmadd_ps(ai, b1, c11);
        ai = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(ai, b0, c20);
        c21 = _mm256_fmadd_ps(ai, b1, c21);
        ai = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(ai, b0, c30);
        c31 = _mm256_fmadd_ps(ai, b1, c31);
        ai = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(ai, b0, c40);
        c41 = _mm256_fmadd_ps(ai, b1, c41);
        ai = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(ai, b0, c50);
        c51 = _mm256_fmadd_ps(ai, b1, c51);
        a += MR;
        b += NR;
    }

    __m256 valpha = _mm256_set1_ps(alpha);
    store_row(c + 0 * (size_t)ldc, c00, c01, NR, valpha, beta);
    store_row(c + 1 * (size_t)ldc, c10, c11, NR, valpha, beta);
    store_row(c + 2 * (size_t)ldc, c20, c21, NR, valpha, beta);
    store_row(c + 3 * (size_t)ldc, c30, c31, NR, valpha, beta);
    store_row(c + 4 * (size_t)ldc, c40, c41, NR, valpha, beta);
    store_row(c + 5 * (size_t)ldc, c50, c51, NR, valpha, beta);
}

/* The same tile reading op(A) where it is, for small products
 * (GemmKernel.kernel_direct in matmul_blocked.h):
 *   op(A)[i, p] = a[i * a_row + p * a_col]  for i < rows <= 6 (a missing row
 *                 repeats the last one, computed and not stored),
 *   op(B)[p, j] = b[p * b_row + j]          a packed, zero-padded sliver
 *                 (b_row = 16); only columns j < cols are stored.
 * The same FMA chain per element as kernel_6x16: the same bits.
 * Shape: c [rows, cols] with row stride ldc. */
static void kernel_6x16_direct(int kc, const float *a, size_t a_row, size_t a_col, int rows,
                               const float *restrict b, size_t b_row, int cols, float *c, int ldc,
                               float alpha, float beta) {
    const float *a_rows[MR]; /* op(A)[i, 0] of each row of the tile */
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) a_rows[i] = a + (size_t)(i < rows ? i : rows - 1) * a_row;
    __m256 acc0[MR], acc1[MR]; /* row i, columns 0..7 and 8..15 */
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) acc0[i] = acc1[i] = _mm256_setzero_ps();
    if (a_col == 1) { /* A stored [M, K]: one index p walks the six rows */
#pragma GCC unroll 2
        for (int p = 0; p < kc; p++) {
            __m256 b0 = _mm256_load_ps(b + (size_t)p * b_row);
            __m256 b1 = _mm256_load_ps(b + (size_t)p * b_row + 8);
#pragma GCC unroll 6
            for (int i = 0; i < MR; i++) {
                __m256 ai = _mm256_broadcast_ss(a_rows[i] + p);
                acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
                acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
            }
        }
    } else { /* A stored [K, M]: a step's values sit a_row apart in one row of A */
        for (int p = 0; p < kc; p++) {
            const float *a_p = a + (size_t)p * a_col;
            __m256 b0 = _mm256_load_ps(b + (size_t)p * b_row);
            __m256 b1 = _mm256_load_ps(b + (size_t)p * b_row + 8);
#pragma GCC unroll 6
            for (int i = 0; i < MR; i++) {
                __m256 ai = _mm256_broadcast_ss(a_p + (size_t)(i < rows ? i : rows - 1) * a_row);
                acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
                acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
            }
        }
    }
    __m256 valpha = _mm256_set1_ps(alpha);
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
        if (i < rows) store_row(c + (size_t)i * ldc, acc0[i], acc1[i], cols, valpha, beta);
}

/* The packing of matmul_pack_avx2.h, for this file's tile. */
static void pack_a_6(float *sliver, const float *A, int lda, int trans_a, int i0, int rows,
                     int p0, int kc) {
    pack_a_sliver_avx2(MR, sliver, A, lda, trans_a, i0, rows, p0, kc);
}
static void pack_b_16(float *sliver, const float *B, int ldb, int trans_b, int p0, int kc,
                      int j0, int cols) {
    pack_b_sliver_avx2(NR, sliver, B, ldb, trans_b, p0, kc, j0, cols);
}

/* ---- Small products, without packing -------------------------------------------
 * The chapters also multiply many tiny matrices: per sequence and per head,
 * S = Q K^T is 8x8x16 in chapter 05, and its backward pass adds four more
 * products of that size. For those, packing costs more than the product, and
 * a 6x16 tile of which 8x8 is used wastes most of the kernel. So products
 * with K <= KC and few multiply-adds (small_max_work, matmul_blocked.c) take
 * this path: the same register-tile idea (4 rows x 16 columns in 8 ymm
 * accumulators) reading A and B where they are, with masked loads and partial stores
 * at the right edge instead of padding.
 *
 * Each C element is the same chain of FMAs, in the same k order, from the
 * same +0 start, finished with the same alpha/beta operations as in the
 * blocked kernels, so for K <= KC the bits are the same whichever path runs.
 * A transposed B ([N,K]) is first copied to [K,N] in a small scratch buffer;
 * a transposed A is read with strides (one broadcast per element anyway). */
enum { SMALL_ROWS = 4, SMALL_MAX_B_FLOATS = 32 * 1024 }; /* 128 KiB per thread */

static _Thread_local float small_b_scratch[SMALL_MAX_B_FLOATS];

/* C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C[M,N] for small products
 * (K <= KC so the bits match the blocked path; with B transposed, K * N <=
 * SMALL_MAX_B_FLOATS, which the driver's M*N*K <= 2^14 always satisfies).
 * Shapes as in matmul.h. */
void sgemm_small_avx2(int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc) {
    if (trans_b) { /* B stored [N, K]: copy it to [K, N] */
        if ((size_t)K * N > SMALL_MAX_B_FLOATS) {
            fprintf(stderr, "sgemm_small_avx2: K x N = %d x %d exceeds its %d-float scratch; "
                    "use sgemm() for larger products\n", K, N, (int)SMALL_MAX_B_FLOATS);
            abort();
        }
        for (int p = 0; p < K; p++)
            for (int j = 0; j < N; j++) small_b_scratch[(size_t)p * N + j] = B[(size_t)j * ldb + p];
        B = small_b_scratch;
        ldb = N;
    }
    /* op(A)[i, p] = A[i * a_row + p * a_col] */
    size_t a_row = trans_a ? 1 : (size_t)lda, a_col = trans_a ? (size_t)lda : 1;
    __m256 valpha = _mm256_set1_ps(alpha);
    for (int j0 = 0; j0 < N; j0 += 16) {
        int cols = N - j0 < 16 ? N - j0 : 16;
        __m256i mask0 = first_lanes(cols < 8 ? cols : 8);
        __m256i mask1 = first_lanes(cols > 8 ? cols - 8 : 0);
        for (int i0 = 0; i0 < M; i0 += SMALL_ROWS) {
            int rows = M - i0 < SMALL_ROWS ? M - i0 : SMALL_ROWS;
            /* Rows past the end repeat the last row (read, never stored). */
            const float *a_rows[SMALL_ROWS];
            for (int r = 0; r < SMALL_ROWS; r++) a_rows[r] = A + (size_t)(i0 + (r < rows ? r : rows - 1)) * a_row;
            __m256 acc0[SMALL_ROWS], acc1[SMALL_ROWS];
            for (int r = 0; r < SMALL_ROWS; r++) acc0[r] = acc1[r] = _mm256_setzero_ps();
            for (int p = 0; p < K; p++) {
                const float *b = B + (size_t)p * ldb + j0;
                __m256 b0 = _mm256_maskload_ps(b, mask0);     /* op(B)[p, j0..j0+7]   */
                __m256 b1 = _mm256_maskload_ps(b + 8, mask1); /* op(B)[p, j0+8..j0+15] */
#pragma GCC unroll 4
                for (int r = 0; r < SMALL_ROWS; r++) {
                    __m256 a = _mm256_broadcast_ss(a_rows[r] + (size_t)p * a_col);
                    acc0[r] = _mm256_fmadd_ps(a, b0, acc0[r]);
                    acc1[r] = _mm256_fmadd_ps(a, b1, acc1[r]);
                }
            }
            for (int r = 0; r < rows; r++)
                store_row(C + (size_t)(i0 + r) * ldc + j0, acc0[r], acc1[r], cols, valpha, beta);
        }
    }
}

static const GemmKernel AVX2_KERNEL = {
    .name = "avx2 6x16",
    .mr = MR, .nr = NR, .kc = KC, .mc = MC, .nc = NC,
    .pack_a = pack_a_6, .pack_b = pack_b_16, .kernel = kernel_6x16,
    .kernel_direct = kernel_6x16_direct, .b_in_place = 0,
    .small = sgemm_small_avx2, .small_max_work = 16384.0, /* 2^14: matmul_blocked.c */
};

const GemmKernel *gemm_kernel_avx2(void) { return &AVX2_KERNEL; }

void sgemm_avx2(int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta,
                float *C, int ldc) {
    sgemm_blocked(&AVX2_KERNEL, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
