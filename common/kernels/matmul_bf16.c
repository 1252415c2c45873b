/* matmul_bf16.c - the AVX-512 tile of matmul_avx512.c with bf16 inputs: the
 * products of the matmul precision "bf16" (matmul.h), for CPUs with
 * AVX512_BF16.
 *
 *   C[M,N] = alpha * bf16(op(A))[M,K] @ bf16(op(B))[K,N] + beta * C[M,N]
 *
 * bf16 ("brain float") is a float with its low 16 bits dropped: the same 8
 * exponent bits, so the same range, and 8 significant bits instead of 24
 * (about 2-3 decimal digits). Rounding an input to bf16 changes it by at
 * most 2^-8 of itself (half a unit in the 8th significant bit). The product
 * of two bf16 numbers has at most 16 significant bits, so it is exact in
 * float, and the sums are kept in float: only the inputs lose precision,
 * which is what mixed-precision training (float weights, optimizer and
 * element-wise passes; bf16 products) accepts.
 *
 * Why: one instruction, VDPBF16PS, multiplies 16 PAIRS of bf16 numbers and
 * adds both products of each pair into a float lane,
 *
 *   acc[j] += a[2j] * b[2j] + a[2j+1] * b[2j+1]        (j = 0..15, a zmm each)
 *
 * at the rate of the float FMA, which does one product per lane: twice the
 * multiply-adds per instruction. The pairs are two consecutive k of a dot
 * product, so the packing below stores op(A) and op(B) as pairs along k:
 *
 *   A sliver  a[q * 8 + i]   = (op(A)[i, 2q], op(A)[i, 2q+1])     one uint32 per pair
 *   B sliver  b[q * 32 + j]  = (op(B)[2q, j], op(B)[2q+1, j])
 *
 * and the kernel broadcasts A's pair for row i into all 16 lanes and takes
 * 16 columns of B's pairs: the float kernel's loop with k stepping by 2.
 * An odd K ends with a pair whose second half is 0.
 *
 * The rounding is the CPU's (VCVTNEPS2BF16: to nearest, ties to even;
 * subnormal inputs and results are taken as zero), the specification is
 * sgemm_naive_bf16 (matmul.c), and tests/test_sgemm_bf16.c holds the two
 * within the float budget of a sum. Every product given to this kernel is
 * packed (it has no direct or small-product variant), so its inputs are
 * always rounded; which products it is given is sgemm()'s choice (matmul.c:
 * those where the packing pays).
 *
 * Compiled with -mavx512f -mavx512bf16 -mavx512bw -mavx2 -mfma (Makefile rule
 * for *_bf16.c); call it only when cpu_has_avx512_bf16() says so. */
#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"
#include "kernels/matmul_pack_avx2.h"   /* transpose_8x8 */
#include "kernels/matmul_tile_avx512.h"

#include <immintrin.h>
#include <stdint.h>

enum {
    MR = 8,   /* rows of C per tile, as in matmul_avx512.c           */
    NR = 32,  /* columns of C per tile (two zmm of 16 float sums)     */
    KC = 256, /* k per block (even: a pair never straddles two blocks) */
    MC = 256, /* used when the CPU reports no cache sizes             */
    NC = 4096
};

/* Lane j = bf16(r0[j]) | bf16(r1[j]) << 16 for the lanes in `lanes` (0
 * elsewhere); r1 == NULL gives 0 in the high halves (the last pair of an odd K).
 * One conversion makes the 32 bf16 r0[0..15], r1[0..15] (16-bit elements
 * 0..15 and 16..31), and one shuffle interleaves them: element 2j takes
 * element j, element 2j + 1 takes element 16 + j. */
static __m512i pairs_across_rows(const float *r0, const float *r1, __mmask16 lanes) {
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    __m512 x0 = _mm512_maskz_loadu_ps(lanes, r0);
    __m512 x1 = r1 ? _mm512_maskz_loadu_ps(lanes, r1) : _mm512_setzero_ps();
    return _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(x1, x0));
}

/* Lane j = bf16(row[2j]) | bf16(row[2j+1]) << 16: 16 pairs from 32
 * consecutive floats, of which the first n (0..32) are read and the rest
 * taken as 0. */
static __m512i pairs_along_row(const float *row, int n) {
    __mmask16 lo = n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1u);
    __mmask16 hi = n >= 32 ? 0xFFFF : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1u);
    __m512 x_lo = _mm512_maskz_loadu_ps(lo, row), x_hi = _mm512_maskz_loadu_ps(hi, row + 16);
    /* element e of the 32 bf16 is row[e]: as uint32 lanes, exactly the pairs */
    return (__m512i)_mm512_cvtne2ps_pbh(x_hi, x_lo);
}

/* A sliver or B sliver of `width` (8 or 32) lines, where op(X)[line, p]
 * runs along memory (A stored [M, K], B stored [N, K]):
 *   sliver[q * width + l] = pair of first[l * line_stride + 2q], [... + 2q + 1]
 * for l < lines, q < (kc + 1) / 2; lines >= `lines` are 0.
 * Each group of 8 lines is converted 16 pairs at a time, a line per
 * register, and turned by two 8 x 8 transposes into 16 registers of one
 * pair index q each, stored whole. */
static void pack_pairs_along(uint32_t *sliver, int width, const float *first, size_t line_stride,
                             int lines, int kc) {
    const int pairs = (kc + 1) / 2;
    for (int l0 = 0; l0 < width; l0 += 8) {
        for (int p = 0; p < kc; p += 32) {
            __m256 lo[8], hi[8]; /* pairs q = p/2 + 0..7 and p/2 + 8..15 of lines l0..l0+7 */
            for (int l = 0; l < 8; l++) {
                __m512i v = l0 + l < lines
                                ? pairs_along_row(first + (size_t)(l0 + l) * line_stride + p, kc - p < 32 ? kc - p : 32)
                                : _mm512_setzero_si512();
                lo[l] = _mm256_castsi256_ps(_mm512_castsi512_si256(v));
                hi[l] = _mm256_castsi256_ps(_mm512_extracti64x4_epi64(v, 1));
            }
            transpose_8x8(lo);
            transpose_8x8(hi);
            for (int t = 0; t < 16 && p / 2 + t < pairs; t++)
                _mm256_storeu_ps((float *)(sliver + (size_t)(p / 2 + t) * width + l0), t < 8 ? lo[t] : hi[t - 8]);
        }
    }
}

/* The same where op(X)[line, p] runs across memory (A stored [K, M], B
 * stored [K, N]): row p of the storage holds the lines side by side.
 *   sliver[q * width + l] = pair of first[2q * k_stride + l], [(2q + 1) * k_stride + l] */
static void pack_pairs_across(uint32_t *sliver, int width, const float *first, size_t k_stride,
                              int lines, int kc) {
    for (int p = 0, q = 0; p < kc; p += 2, q++) {
        const float *r0 = first + (size_t)p * k_stride;
        const float *r1 = p + 1 < kc ? r0 + k_stride : NULL;
        for (int l0 = 0; l0 < width; l0 += 16) {
            int n = lines - l0; /* lines of this group of 16 that exist */
            __mmask16 lanes = n >= 16 ? 0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1u);
            __m512i v = pairs_across_rows(r0 + l0, r1 ? r1 + l0 : NULL, lanes);
            if (width - l0 >= 16)
                _mm512_storeu_si512((void *)(sliver + (size_t)q * width + l0), v);
            else /* width 8: the low half */
                _mm256_storeu_si256((__m256i *)(sliver + (size_t)q * width + l0), _mm512_castsi512_si256(v));
        }
    }
}

/* sliver = the pairs of op(A)[i0 .. i0+7, p0 .. p0+kc-1]; rows >= `rows` are 0. */
static void pack_a_bf16(float *sliver, const float *A, int lda, int trans_a, int i0, int rows, int p0,
                        int kc) {
    if (!trans_a) /* A stored [M, K]: op(A)[i, p] = A[i * lda + p] */
        pack_pairs_along((uint32_t *)sliver, MR, A + (size_t)i0 * lda + p0, (size_t)lda, rows, kc);
    else          /* A stored [K, M]: op(A)[i, p] = A[p * lda + i] */
        pack_pairs_across((uint32_t *)sliver, MR, A + (size_t)p0 * lda + i0, (size_t)lda, rows, kc);
}

/* sliver = the pairs of op(B)[p0 .. p0+kc-1, j0 .. j0+31]; columns >= `cols` are 0. */
static void pack_b_bf16(float *sliver, const float *B, int ldb, int trans_b, int p0, int kc, int j0,
                        int cols) {
    if (!trans_b) /* B stored [K, N]: op(B)[p, j] = B[p * ldb + j] */
        pack_pairs_across((uint32_t *)sliver, NR, B + (size_t)p0 * ldb + j0, (size_t)ldb, cols, kc);
    else          /* B stored [N, K]: op(B)[p, j] = B[j * ldb + p] */
        pack_pairs_along((uint32_t *)sliver, NR, B + (size_t)j0 * ldb + p0, (size_t)ldb, cols, kc);
}

/* C tile [8,32] = alpha * a_sliver^T @ b_sliver + beta * C tile.
 * Shapes: a_sliver [(kc+1)/2 * 8] pairs, b_sliver [(kc+1)/2 * 32] pairs
 * (64-byte aligned), both as packed above; c with row stride ldc.
 * acc_lo[i] holds row i, columns 0..15; acc_hi[i] columns 16..31. */
static void kernel_8x32_bf16(int kc, const float *a_sliver, const float *b_sliver, float *c, int ldc,
                             float alpha, float beta) {
    const uint32_t *a = (const uint32_t *)a_sliver;
    const uint32_t *b = (const uint32_t *)b_sliver;
    __m512 acc_lo[MR], acc_hi[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) acc_lo[i] = acc_hi[i] = _mm512_setzero_ps();
    prefetch_tile_512(c, ldc);
    const int pairs = (kc + 1) / 2;
    for (int q = 0; q < pairs; q++) {
        __m512bh b_lo = (__m512bh)_mm512_load_si512((const void *)b);        /* pairs of columns 0..15  */
        __m512bh b_hi = (__m512bh)_mm512_load_si512((const void *)(b + 16)); /* pairs of columns 16..31 */
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m512bh a_i = (__m512bh)_mm512_set1_epi32((int)a[i]); /* row i's pair in all 16 lanes */
            acc_lo[i] = _mm512_dpbf16_ps(acc_lo[i], a_i, b_lo);
            acc_hi[i] = _mm512_dpbf16_ps(acc_hi[i], a_i, b_hi);
        }
        a += MR;
        b += NR;
    }
    store_tile_512(c, ldc, acc_lo, acc_hi, alpha, beta);
}

static const GemmKernel BF16_KERNEL = {
    .name = "avx512 bf16 8x32",
    .mr = MR, .nr = NR, .kc = KC, .mc = MC, .nc = NC,
    .pack_a = pack_a_bf16, .pack_b = pack_b_bf16, .kernel = kernel_8x32_bf16,
    .kernel_direct = NULL, /* both operands are always packed: the packing rounds them */
    .b_in_place = 0,
    .small = NULL, .small_max_work = 0.0, /* no float shortcut for small products */
    .fetch_next = 1, /* its packing of cold operands took as long as the kernel: matmul_blocked.c */
};

const GemmKernel *gemm_kernel_avx512_bf16(void) { return &BF16_KERNEL; }

void sgemm_avx512_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb, float beta,
                       float *C, int ldc) {
    sgemm_blocked(&BF16_KERNEL, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
