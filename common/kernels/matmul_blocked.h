/* matmul_blocked.h - the cache-blocked SGEMM driver shared by the SIMD kernels.
 *
 * The GotoBLAS / BLIS recipe has two halves:
 *   - what depends on the instruction set: the register tile (MR x NR), the
 *     micro-kernel that computes it, and the packing routines that lay op(A)
 *     and op(B) out in the order that kernel reads them;
 *   - what does not: the five loops around the kernel that choose which block
 *     lives in which cache, the packing buffers, the threads.
 * Each SIMD file (matmul_avx2.c, matmul_avx512.c, matmul_neon.c) fills one
 * GemmKernel with its half; sgemm_blocked() (matmul_blocked.c) is the other
 * half, written once. */
#ifndef MATMUL_BLOCKED_H
#define MATMUL_BLOCKED_H

#include <stddef.h>

typedef struct {
    const char *name;
    int mr, nr;     /* register tile: rows and columns of C per kernel call (mr * nr <= 512) */
    int kc, mc, nc; /* cache blocks: depth, rows of A, columns of B (mc % mr == 0, nc % nr == 0) */

    /* sliver[p * mr + i] = op(A)[i0 + i, p0 + p] for p < kc, i < mr; rows >= `rows`
     * are zero. */
    void (*pack_a)(float *sliver, const float *A, int lda, int trans_a, int i0, int rows,
                   int p0, int kc);
    /* sliver[p * nr + j] = op(B)[p0 + p, j0 + j] for p < kc, j < nr; columns >= `cols`
     * are zero. sliver is 64-byte aligned. */
    void (*pack_b)(float *sliver, const float *B, int ldb, int trans_b, int p0, int kc, int j0,
                   int cols);
    /* The micro-kernel: a full C tile [mr, nr] (row stride ldc)
     *   = alpha * a_sliver^T @ b_sliver + beta * C tile,
     * with beta == 0 never reading C, alpha applied with one multiply
     * (beta == 0) or one fused multiply-add (alpha * sum + C, or
     * alpha * sum + beta * C): the driver finishes ragged tiles with the same
     * operations (so an element gets the same bits wherever the tile edges
     * fall). */
    void (*kernel)(int kc, const float *a_sliver, const float *b_sliver, float *c, int ldc,
                   float alpha, float beta);
    /* The same micro-kernel reading op(A) where the caller keeps it instead
     * of from a packed sliver, for products small enough that packing A costs
     * more than it saves (see matmul_blocked.c):
     *   C tile [rows, cols] = alpha * op(A) op(B) + beta * C tile, with
     *   op(A)[i, p] = a[i * a_row + p * a_col]   for i < rows <= mr,
     *   op(B)[p, j] = b[p * b_row + j]           for j < cols <= nr.
     * Only those rows and columns of C are read or written. A kernel with
     * b_in_place set never reads b's columns >= cols (masked loads), so b may
     * be the caller's own B (not transposed); the others read all nr columns,
     * so b must be a packed, zero-padded sliver (b_row = nr). Each element of
     * C is the same chain of FMAs as in `kernel`: the same bits.
     * NULL: the kernel has no such variant, and every product packs both
     * operands (the bf16 kernel, whose packing rounds them). */
    void (*kernel_direct)(int kc, const float *a, size_t a_row, size_t a_col, int rows,
                          const float *b, size_t b_row, int cols, float *c, int ldc, float alpha,
                          float beta);
    int b_in_place;
    /* The whole product without packing or tiles, for the smallest ones (K <= kc
     * and M*N*K up to small_max_work, see matmul_blocked.c): same bits as the
     * blocked path. Never called when small_max_work is 0. */
    void (*small)(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);
    double small_max_work;
    /* 1: while the kernel computes on a block, the driver asks the cache for
     * the rows of the next block to pack (matmul_blocked.c, "Fetching the
     * next block"). Set for the kernel whose packing costs as much as its
     * arithmetic (bf16); the float kernels are better without it. */
    int fetch_next;
} GemmKernel;

/* The small-product path of matmul_avx2.c (both SIMD kernels use it). */
void sgemm_small_avx2(int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc);

/* C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C[M,N] (see matmul.h),
 * computed with `kernel`'s tile and packing. */
void sgemm_blocked(const GemmKernel *kernel, int trans_a, int trans_b, int M, int N, int K,
                   float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc);

/* The two kernels' halves (matmul_avx2.c, matmul_avx512.c), for tests and
 * benchmarks that call sgemm_blocked_path() with one of them. */
const GemmKernel *gemm_kernel_avx2(void);
const GemmKernel *gemm_kernel_avx512(void);
const GemmKernel *gemm_kernel_avx512_bf16(void); /* matmul_bf16.c */
const GemmKernel *gemm_kernel_neon(void);        /* matmul_neon.c, AArch64 only */

/* Which loop nest runs. GEMM_AUTO is what sgemm_blocked() does: the small
 * path without tiles for the tiniest products; A read in place (and B too
 * when the kernel can) when A's rows lie at most 2 KiB apart and N <= 512;
 * both packed otherwise (the rules and their measurements: matmul_blocked.c).
 * Tests (tests/test_sgemm_simd.c) force GEMM_PACKED or GEMM_DIRECT to compare
 * the two on the same product: they give the same bits. */
typedef enum { GEMM_AUTO, GEMM_PACKED, GEMM_DIRECT } GemmPath;
void sgemm_blocked_path(GemmPath path, const GemmKernel *kernel, int trans_a, int trans_b, int M,
                        int N, int K, float alpha, const float *A, int lda, const float *B,
                        int ldb, float beta, float *C, int ldc);

/* 1 when GEMM_AUTO reads op(A) in place (the direct path) for a thread's
 * block of N columns with A's rows lda floats apart, 0 when it packs A (0 too
 * for a kernel without a direct form); products small enough for the small
 * path skip both (K <= kc and M N K <= small_max_work). The driver's rule
 * (matmul_blocked.c, "2."), public so that bench/bench_direct.c can print
 * which path it picks beside the time of each, and the tests can check it. */
int gemm_reads_a_in_place(const GemmKernel *kernel, int N, int lda);

/* The grid of blocks of C the threads of one product take (matmul_blocked.c):
 * row_parts x col_parts <= threads blocks of whole mr x nr tiles of an M x N
 * C, the most blocks that fit, then the fewest floats packed per thread. For
 * the tests. */
void gemm_choose_grid(int threads, int M, int N, int mr, int nr, int *row_parts, int *col_parts);

/* The cache blocks sgemm_blocked uses with `kernel` on this CPU: KC is the
 * kernel's (fixed, see matmul_avx512.c), MC and NC are derived from the L2
 * and L3 sizes the CPU reports (sysconf), see matmul_blocked.c. */
void gemm_blocking(const GemmKernel *kernel, int *kc, int *mc, int *nc);

/* Whether the driver asks the cache for the next block's rows while a
 * kernel with fetch_next set computes on this one (on by default; see
 * matmul_blocked.c). For benchmarks, which time the products both ways: the
 * bits are the same. */
void gemm_set_fetch_next(int on);

#endif
