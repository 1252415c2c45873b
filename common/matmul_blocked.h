/* matmul_blocked.h - the cache-blocked SGEMM driver shared by the SIMD kernels.
 *
 * The GotoBLAS / BLIS recipe has two halves:
 *   - what depends on the instruction set: the register tile (MR x NR), the
 *     micro-kernel that computes it, and the packing routines that lay op(A)
 *     and op(B) out in the order that kernel reads them;
 *   - what does not: the five loops around the kernel that choose which block
 *     lives in which cache, the packing buffers, the threads.
 * Each SIMD file (matmul_avx2.c, matmul_avx512.c) fills one GemmKernel with
 * its half; sgemm_blocked() (matmul_blocked.c) is the other half, written
 * once. */
#ifndef MATMUL_BLOCKED_H
#define MATMUL_BLOCKED_H

typedef struct {
    const char *name;
    int mr, nr;     /* register tile: rows and columns of C per kernel call */
    int kc, mc, nc; /* cache blocks: depth, rows of A, columns of B (mc % mr == 0, nc % nr == 0) */

    /* sliver[p * mr + i] = op(A)[i0 + i, p0 + p] for p < kc, i < mr; rows >= `rows`
     * are zero. */
    void (*pack_a)(float *sliver, const float *A, int lda, int trans_a, int i0, int rows,
                   int p0, int kc);
    /* sliver[p * nr + j] = op(B)[p0 + p, j0 + j] for p < kc, j < nr; columns >= `cols`
     * are zero. sliver is 64-byte aligned. */
    void (*pack_b)(float *sliver, const float *B, int ldb, int trans_b, int p0, int kc, int j0,
                   int cols);
    /* C tile [rows, cols] (rows <= mr, cols <= nr, row stride ldc)
     *   = alpha * a_sliver^T @ b_sliver + beta * C tile.
     * beta == 0 never reads C. Every element must get the same bits whether
     * its tile is full or ragged: only then does the result not depend on
     * where the tile edges fall (different kernels, different thread splits). */
    void (*tile)(int kc, const float *a_sliver, const float *b_sliver, float *c, int ldc,
                 int rows, int cols, float alpha, float beta);
} GemmKernel;

/* For a ragged tile: the kernel has left the raw sums of products in
 * sums[rows, cols] (row stride sums_ld, computed with alpha = 1, beta = 0);
 * write c = alpha * sums + beta * c with exactly the operations the vector
 * stores use (a multiply for beta == 0, else one fused multiply-add), so an
 * element gets the same bits whether its tile was full or ragged. */
void tile_store_sums(float *c, int ldc, const float *sums, int sums_ld, int rows, int cols,
                     float alpha, float beta);

/* C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C[M,N] (see matmul.h),
 * computed with `kernel`'s tile and packing. */
void sgemm_blocked(const GemmKernel *kernel, int trans_a, int trans_b, int M, int N, int K,
                   float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc);

/* How many times a thread of ours was found switched out by another program
 * (a barrier wait of over 1 ms), each time sending the next second of products
 * to one thread. For benchmarks and the curious; see matmul_blocked.c. */
long sgemm_busy_backoffs(void);

#endif
