/* matmul_neon.c - the AArch64 Advanced SIMD (NEON) half of the blocked SGEMM:
 * a 12x8 register tile, its micro-kernel, and the packing for it.
 *
 *   C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C[M,N]      (see matmul.h)
 *
 * The same recipe as matmul_avx2.c (read that first), for ARM CPUs: Apple's
 * M-series, ARM Linux boards and cloud instances. A NEON register (q0-q31)
 * holds 4 floats, half an AVX2 ymm, and there are 32 of them, twice AVX2's 16:
 *
 *   tile   accumulators              loads per k step          lanes of FMA per k step
 *   6x16   12 ymm (6 rows x 2 x 8)   2 vectors + 6 broadcasts  12 x 8 = 96   (AVX2)
 *   12x8   24 q   (12 rows x 2 x 4)  2 vectors of B + 3 of A   24 x 4 = 96   (NEON)
 *
 * 24 accumulators + 2 vectors of B + 3 of A = 29 of the 32 registers. NEON
 * multiplies a vector by one lane of another (FMLA by element:
 * vfmaq_laneq_f32), so the 12 values of A for a step are loaded as three
 * vectors and used lane by lane, with no broadcasts. 24 independent FMAs per
 * step cover the FMA latency (4 cycles on 4 units on Apple's big cores).
 * 8 columns divide every width the chapters use (D = 32 ... 256), so only
 * the rows have a ragged edge, which the direct path (below) handles without
 * padding.
 *
 * Same bits as the x86 kernels: KC = 256 as in matmul_avx2.c, and each
 * element of C is the chain of float FMAs over k in order, from +0, finished
 * with the same alpha/beta operations (store_row below, tile_store_sums in
 * matmul_blocked.c). FMA rounds once on every ISA, so a given chain gives the
 * same float on ARM and on x86 (tests/test_sgemm_neon.c checks the kernel
 * against that chain written out in C, which the x86 kernels also match).
 * Unlike the x86 kernels this one has no small-product path: products of any
 * size take the direct or the packed path (matmul_blocked.c), with the same
 * bits.
 *
 * ARM's speed is not measured yet (bench/README.md): KC, MC and NC below
 * follow the x86 reasoning, for caches of Apple's size (128 KiB of L1d,
 * 4-16 MiB of L2); glibc on AArch64 reports no cache sizes to sysconf, so
 * these constants stand there.
 *
 * Compiled only on AArch64 (where NEON and its FMA are always present); on
 * any other CPU this file is empty. */
#if defined(__aarch64__)

#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"

#include <arm_neon.h>
#include <stddef.h>

/* ---- Register tile and cache blocks ---------------------------------------- */

enum {
    MR = 12,   /* rows of C per tile (three vectors of A, one lane each)       */
    NR = 8,    /* columns of C per tile (two vectors of 4 floats)              */
    KC = 256,  /* as in matmul_avx2.c: the same k blocks, the same bits        */
    MC = 384,  /* 32 * MR: a packed A block of 384 KiB, half of a 768 KiB L2   */
    NC = 4096, /* 512 * NR: 256 x 4096 x 4 B = 4 MiB of packed B               */
};

/* ---- Storing a row of the tile ------------------------------------------------
 * c[0..cols) = alpha * acc + beta * c, columns 0..3 from acc_lo and 4..7 from
 * acc_hi, with the operations of matmul_avx2.c's store_row: a multiply when
 * beta == 0 (c never read: it may hold NaN), one fused multiply-add
 * alpha * acc + c when beta == 1, else alpha * acc + (beta * c).
 * vfmaq_f32(x, y, z) is x + y * z rounded once. A ragged right edge
 * (cols < 8) goes through a small buffer: NEON has no masked loads or
 * stores. */
static inline float32x4_t finish(float32x4_t acc, float32x4_t alpha, float beta, float32x4_t old) {
    if (beta == 0.0f) return vmulq_f32(alpha, acc);
    if (beta == 1.0f) return vfmaq_f32(old, alpha, acc);
    return vfmaq_f32(vmulq_f32(vdupq_n_f32(beta), old), alpha, acc);
}

static inline void store_row(float *c, float32x4_t acc_lo, float32x4_t acc_hi, int cols,
                             float32x4_t alpha, float beta) {
    if (cols == NR) {
        float32x4_t old_lo = beta == 0.0f ? vdupq_n_f32(0.0f) : vld1q_f32(c);
        float32x4_t old_hi = beta == 0.0f ? vdupq_n_f32(0.0f) : vld1q_f32(c + 4);
        vst1q_f32(c, finish(acc_lo, alpha, beta, old_lo));
        vst1q_f32(c + 4, finish(acc_hi, alpha, beta, old_hi));
        return;
    }
    float row[NR] = {0};
    for (int j = 0; j < cols && beta != 0.0f; j++) row[j] = c[j];
    vst1q_f32(row, finish(acc_lo, alpha, beta, vld1q_f32(row)));
    vst1q_f32(row + 4, finish(acc_hi, alpha, beta, vld1q_f32(row + 4)));
    for (int j = 0; j < cols; j++) c[j] = row[j];
}

/* ---- Micro-kernel --------------------------------------------------------------- */

/* C tile [12,8] = alpha * a_sliver^T @ b_sliver + beta * C tile.
 * Shapes: a_sliver[kc * 12] (k-major, packed), b_sliver[kc * 8] (k-major,
 * packed), c with row stride ldc.
 * acc_lo[i] holds row i, columns 0..3; acc_hi[i] columns 4..7. The twelve
 * rows are written out (the lane of vfmaq_laneq_f32 must be a constant). */
static void kernel_12x8(int kc, const float *restrict a_sliver, const float *restrict b_sliver,
                        float *c, int ldc, float alpha, float beta) {
    float32x4_t acc_lo[MR], acc_hi[MR];
    for (int i = 0; i < MR; i++) acc_lo[i] = acc_hi[i] = vdupq_n_f32(0.0f);
    /* Ask for the C tile now; it arrives while the k loop runs. */
    for (int i = 0; i < MR; i++) __builtin_prefetch(c + (size_t)i * ldc, 1, 3);

    const float *a = a_sliver, *b = b_sliver;
    for (int p = 0; p < kc; p++) {
        float32x4_t b_lo = vld1q_f32(b);     /* op(B)[p, 0..3] */
        float32x4_t b_hi = vld1q_f32(b + 4); /* op(B)[p, 4..7] */
        float32x4_t a0 = vld1q_f32(a);       /* op(A)[0..3, p]  */
        float32x4_t a1 = vld1q_f32(a + 4);   /* op(A)[4..7, p]  */
        float32x4_t a2 = vld1q_f32(a + 8);   /* op(A)[8..11, p] */
        acc_lo[0] = vfmaq_laneq_f32(acc_lo[0], b_lo, a0, 0);
        acc_hi[0] = vfmaq_laneq_f32(acc_hi[0], b_hi, a0, 0);
        acc_lo[1] = vfmaq_laneq_f32(acc_lo[1], b_lo, a0, 1);
        acc_hi[1] = vfmaq_laneq_f32(acc_hi[1], b_hi, a0, 1);
        acc_lo[2] = vfmaq_laneq_f32(acc_lo[2], b_lo, a0, 2);
        acc_hi[2] = vfmaq_laneq_f32(acc_hi[2], b_hi, a0, 2);
        acc_lo[3] = vfmaq_laneq_f32(acc_lo[3], b_lo, a0, 3);
        acc_hi[3] = vfmaq_laneq_f32(acc_hi[3], b_hi, a0, 3);
        acc_lo[4] = vfmaq_laneq_f32(acc_lo[4], b_lo, a1, 0);
        acc_hi[4] = vfmaq_laneq_f32(acc_hi[4], b_hi, a1, 0);
        acc_lo[5] = vfmaq_laneq_f32(acc_lo[5], b_lo, a1, 1);
        acc_hi[5] = vfmaq_laneq_f32(acc_hi[5], b_hi, a1, 1);
        acc_lo[6] = vfmaq_laneq_f32(acc_lo[6], b_lo, a1, 2);
        acc_hi[6] = vfmaq_laneq_f32(acc_hi[6], b_hi, a1, 2);
        acc_lo[7] = vfmaq_laneq_f32(acc_lo[7], b_lo, a1, 3);
        acc_hi[7] = vfmaq_laneq_f32(acc_hi[7], b_hi, a1, 3);
        acc_lo[8] = vfmaq_laneq_f32(acc_lo[8], b_lo, a2, 0);
        acc_hi[8] = vfmaq_laneq_f32(acc_hi[8], b_hi, a2, 0);
        acc_lo[9] = vfmaq_laneq_f32(acc_lo[9], b_lo, a2, 1);
        acc_hi[9] = vfmaq_laneq_f32(acc_hi[9], b_hi, a2, 1);
        acc_lo[10] = vfmaq_laneq_f32(acc_lo[10], b_lo, a2, 2);
        acc_hi[10] = vfmaq_laneq_f32(acc_hi[10], b_hi, a2, 2);
        acc_lo[11] = vfmaq_laneq_f32(acc_lo[11], b_lo, a2, 3);
        acc_hi[11] = vfmaq_laneq_f32(acc_hi[11], b_hi, a2, 3);
        a += MR;
        b += NR;
    }

    float32x4_t valpha = vdupq_n_f32(alpha);
    for (int i = 0; i < MR; i++) store_row(c + (size_t)i * ldc, acc_lo[i], acc_hi[i], NR, valpha, beta);
}

/* The same tile reading op(A) where it is (GemmKernel.kernel_direct in
 * matmul_blocked.h):
 *   op(A)[i, p] = a[i * a_row + p * a_col]  for i < rows <= 12 (a missing row
 *                 repeats the last one, computed and not stored),
 *   op(B)[p, j] = b[p * b_row + j]          a packed, zero-padded sliver
 *                 (b_row = 8); only columns j < cols are stored.
 * vfmaq_n_f32(acc, b, a) is acc + b * a rounded once: the same FMA chain per
 * element as kernel_12x8, the same bits.
 * Shape: c [rows, cols] with row stride ldc. */
static void kernel_12x8_direct(int kc, const float *a, size_t a_row, size_t a_col, int rows,
                               const float *restrict b, size_t b_row, int cols, float *c, int ldc,
                               float alpha, float beta) {
    const float *a_rows[MR]; /* op(A)[i, 0] of each row of the tile */
    for (int i = 0; i < MR; i++) a_rows[i] = a + (size_t)(i < rows ? i : rows - 1) * a_row;
    float32x4_t acc_lo[MR], acc_hi[MR];
    for (int i = 0; i < MR; i++) acc_lo[i] = acc_hi[i] = vdupq_n_f32(0.0f);
    for (int p = 0; p < kc; p++) {
        float32x4_t b_lo = vld1q_f32(b + (size_t)p * b_row);
        float32x4_t b_hi = vld1q_f32(b + (size_t)p * b_row + 4);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            float a_ip = a_rows[i][(size_t)p * a_col];
            acc_lo[i] = vfmaq_n_f32(acc_lo[i], b_lo, a_ip);
            acc_hi[i] = vfmaq_n_f32(acc_hi[i], b_hi, a_ip);
        }
    }
    float32x4_t valpha = vdupq_n_f32(alpha);
    for (int i = 0; i < rows; i++) store_row(c + (size_t)i * ldc, acc_lo[i], acc_hi[i], cols, valpha, beta);
}

/* ---- Packing ---------------------------------------------------------------------
 * The layouts of matmul_blocked.h:
 *   A sliver: sliver[p * 12 + i] = op(A)[i0 + i, p0 + p],  rows past `rows` zero
 *   B sliver: sliver[p * 8 + j]  = op(B)[p0 + p, j0 + j],  columns past `cols` zero
 * Plain loops, each reading its operand along the direction it is stored in
 * (the compiler vectorises the copies); the x86 kernels' register transposes
 * (matmul_pack_avx2.h) have no NEON counterpart here until an ARM machine
 * shows packing matters. */
static void pack_a_12(float *sliver, const float *A, int lda, int trans_a, int i0, int rows, int p0,
                      int kc) {
    if (trans_a) { /* A stored [K, M]: the values for one k are adjacent */
        for (int p = 0; p < kc; p++) {
            const float *src = A + (size_t)(p0 + p) * lda + i0;
            for (int i = 0; i < MR; i++) sliver[p * MR + i] = i < rows ? src[i] : 0.0f;
        }
        return;
    }
    for (int i = 0; i < MR; i++) { /* A stored [M, K]: row i is contiguous in k */
        const float *src = A + (size_t)(i0 + i) * lda + p0;
        for (int p = 0; p < kc; p++) sliver[p * MR + i] = i < rows ? src[p] : 0.0f;
    }
}

static void pack_b_8(float *sliver, const float *B, int ldb, int trans_b, int p0, int kc, int j0,
                     int cols) {
    if (!trans_b) { /* B stored [K, N]: a row of the sliver is a piece of a row of B */
        for (int p = 0; p < kc; p++) {
            const float *src = B + (size_t)(p0 + p) * ldb + j0;
            if (cols == NR) {
                vst1q_f32(sliver + p * NR, vld1q_f32(src));
                vst1q_f32(sliver + p * NR + 4, vld1q_f32(src + 4));
            } else {
                for (int j = 0; j < NR; j++) sliver[p * NR + j] = j < cols ? src[j] : 0.0f;
            }
        }
        return;
    }
    for (int j = 0; j < NR; j++) { /* B stored [N, K]: column j of op(B) is row j of B */
        const float *src = B + (size_t)(j0 + j) * ldb + p0;
        for (int p = 0; p < kc; p++) sliver[p * NR + j] = j < cols ? src[p] : 0.0f;
    }
}

static const GemmKernel NEON_KERNEL = {
    .name = "neon 12x8",
    .mr = MR, .nr = NR, .kc = KC, .mc = MC, .nc = NC,
    .pack_a = pack_a_12, .pack_b = pack_b_8, .kernel = kernel_12x8,
    .kernel_direct = kernel_12x8_direct, .b_in_place = 0,
    .small = NULL, .small_max_work = 0.0, /* no small-product path: see the top */
};

const GemmKernel *gemm_kernel_neon(void) { return &NEON_KERNEL; }

void sgemm_neon(int trans_a, int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta,
                float *C, int ldc) {
    sgemm_blocked(&NEON_KERNEL, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#endif /* __aarch64__ */
