/* test_sgemm_neon.c - the NEON kernel (matmul_neon.c) against the
 * specification (sgemm_naive), and every SIMD kernel against the FMA chain
 * that makes them give the same bits.
 *
 * The SIMD kernels promise the same bits on every CPU: each element of C is
 *   for each block of KC = 256 depths, in order:
 *     sum = +0; for k in the block: sum = fma(op(A)[i,k], op(B)[k,j], sum)
 *     c = alpha * sum                 (first block, beta == 0)
 *       = fma(alpha, sum, c)          (beta == 1, and every later block)
 *       = fma(alpha, sum, beta * c)   (first block, other beta)
 * fma_chain() below writes that out in C (fmaf rounds once, as the FMA
 * instructions do). On AArch64 the NEON kernel must equal it bit for bit;
 * on x86 the AVX2 and AVX-512 kernels must (test_sgemm_simd.c checks them
 * against each other), so a NEON product equals an x86 one. Both loop nests
 * (A packed, A read in place) and 1 and 2 threads are run, on odd shapes,
 * unaligned data and strides wider than the rows, with sentinels between
 * C's rows (nothing written outside C) and NaN in C when beta == 0 (never
 * read). On x86 the NEON-only tests skip, and the other way round. */
#include <float.h>
#include <math.h>
#include "util/openmp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Before cmocka.h, whose fail() macro would rename error.h's fail(). */
#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"
#include "util/error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

static const float SENTINEL = -12345.0f;
enum { KC = 256 }; /* the SIMD kernels' depth block */

/* xorshift64*: uniform floats in [-1, 1), independent of the library. */
static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float uniform_pm1(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint32_t bits = (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 40);
    return (float)bits / 8388608.0f - 1.0f;
}

/* A rows x cols matrix, row stride ld, `offset` floats past a 64-byte
 * boundary; the gap columns [cols, ld) hold SENTINEL. */
typedef struct {
    float *alloc, *data;
    int rows, cols, ld;
} Matrix;

static Matrix matrix_new(int rows, int cols, int ld, int offset) {
    Matrix m = {.rows = rows, .cols = cols, .ld = ld};
    size_t floats = (size_t)offset + (size_t)rows * ld + 16;
    m.alloc = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    assert_non_null(m.alloc);
    m.data = m.alloc + offset;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < ld; j++) m.data[(size_t)i * ld + j] = j < cols ? uniform_pm1() : SENTINEL;
    return m;
}

static float op(const Matrix *x, int trans, int r, int c) {
    return trans ? x->data[(size_t)c * x->ld + r] : x->data[(size_t)r * x->ld + c];
}

/* The SIMD kernels' bits, one element at a time (see the top). */
static void fma_chain(int ta, int tb, int M, int N, int K, float alpha, const Matrix *A, const Matrix *B,
                      float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float *c = &C[(size_t)i * ldc + j];
            if (K <= 0 || alpha == 0.0f) {
                *c = beta == 0.0f ? 0.0f : beta * *c;
                continue;
            }
            for (int p0 = 0; p0 < K; p0 += KC) {
                float sum = 0.0f;
                for (int k = p0; k < K && k < p0 + KC; k++) sum = fmaf(op(A, ta, i, k), op(B, tb, k, j), sum);
                float block_beta = p0 == 0 ? beta : 1.0f;
                if (block_beta == 0.0f) *c = alpha * sum;
                else if (block_beta == 1.0f) *c = fmaf(alpha, sum, *c);
                else *c = fmaf(alpha, sum, block_beta * *c);
            }
        }
}

/* The kernels of this CPU: NEON on AArch64, AVX2 and AVX-512 on x86 (those
 * it has). */
typedef struct {
    const char *name;
    const GemmKernel *kernel;
} Kernel;

static int cpu_kernels(Kernel out[3]) {
    int n = 0;
#if defined(__aarch64__)
    out[n++] = (Kernel){"neon", gemm_kernel_neon()};
#else
    if (cpu_has_avx2_fma()) out[n++] = (Kernel){"avx2", gemm_kernel_avx2()};
    if (cpu_has_avx512f()) out[n++] = (Kernel){"avx512", gemm_kernel_avx512()};
#endif
    return n;
}

typedef struct {
    int ta, tb, M, N, K;
    float alpha, beta;
    int offset, pad; /* floats past a 64-byte boundary; extra floats per row */
} Case;

/* One case on every kernel of this CPU, both paths (and the automatic
 * choice), 1 and 2 threads: each result equal to fma_chain bit for bit,
 * within the error budget of the naive result, and the gaps untouched. */
static void check_case(Case t) {
    Kernel kernels[3];
    int n_kernels = cpu_kernels(kernels);
    int a_rows = t.ta ? t.K : t.M, a_cols = t.ta ? t.M : t.K;
    int b_rows = t.tb ? t.N : t.K, b_cols = t.tb ? t.K : t.N;
    Matrix A = matrix_new(a_rows, a_cols, a_cols + t.pad, t.offset);
    Matrix B = matrix_new(b_rows, b_cols, b_cols + t.pad, t.offset);
    Matrix C0 = matrix_new(t.M, t.N, t.N + t.pad, t.offset);
    if (t.beta == 0.0f)
        for (int i = 0; i < t.M; i++)
            for (int j = 0; j < t.N; j++) C0.data[(size_t)i * C0.ld + j] = NAN;
    size_t c_floats = (size_t)t.M * C0.ld;
    float *chain = malloc(c_floats * sizeof(float)), *naive = malloc(c_floats * sizeof(float));
    float *got = malloc(c_floats * sizeof(float));
    assert_true(chain && naive && got);
    memcpy(chain, C0.data, c_floats * sizeof(float));
    memcpy(naive, C0.data, c_floats * sizeof(float));
    fma_chain(t.ta, t.tb, t.M, t.N, t.K, t.alpha, &A, &B, t.beta, chain, C0.ld);
    sgemm_naive(t.ta, t.tb, t.M, t.N, t.K, t.alpha, A.data, A.ld, B.data, B.ld, t.beta, naive, C0.ld);

    /* The chain against the naive result: the budget of test_sgemm_simd.c,
     * (K + 3) eps (|alpha| sum_k |a b| + |beta c|). */
    for (int i = 0; i < t.M; i++)
        for (int j = 0; j < t.N; j++) {
            double magnitude = 0.0;
            for (int k = 0; k < t.K; k++) magnitude += fabs((double)op(&A, t.ta, i, k) * op(&B, t.tb, k, j));
            magnitude *= fabs(t.alpha);
            if (t.beta != 0.0f) magnitude += fabs((double)t.beta * C0.data[(size_t)i * C0.ld + j]);
            double budget = (t.K + 3) * (double)FLT_EPSILON * magnitude + 1e-30;
            size_t at = (size_t)i * C0.ld + j;
            if (!(fabs((double)chain[at] - naive[at]) <= budget))
                fail_msg("FMA chain off the naive result: ta=%d tb=%d M=%d N=%d K=%d C[%d,%d] = %.9g, want %.9g",
                         t.ta, t.tb, t.M, t.N, t.K, i, j, (double)chain[at], (double)naive[at]);
        }

    static const GemmPath paths[] = {GEMM_AUTO, GEMM_PACKED, GEMM_DIRECT};
    static const char *path_names[] = {"auto", "packed", "direct"};
    for (int k = 0; k < n_kernels; k++)
        for (int p = 0; p < 3; p++)
            for (int threads = 1; threads <= (openmp_enabled() ? 2 : 1); threads++) {   /* OMP=0: 1 */
                memcpy(got, C0.data, c_floats * sizeof(float));
                omp_set_num_threads(threads);
                sgemm_blocked_path(paths[p], kernels[k].kernel, t.ta, t.tb, t.M, t.N, t.K, t.alpha, A.data,
                                   A.ld, B.data, B.ld, t.beta, got, C0.ld);
                for (int i = 0; i < t.M; i++)
                    for (int j = 0; j < C0.ld; j++) {
                        size_t at = (size_t)i * C0.ld + j;
                        if (memcmp(&got[at], &chain[at], sizeof(float)) != 0)
                            fail_msg("%s (%s path, %d thread(s)) ta=%d tb=%d M=%d N=%d K=%d alpha=%g "
                                     "beta=%g: C[%d,%d] = %.9g, the FMA chain gives %.9g",
                                     kernels[k].name, path_names[p], threads, t.ta, t.tb, t.M, t.N, t.K,
                                     (double)t.alpha, (double)t.beta, i, j, (double)got[at], (double)chain[at]);
                    }
            }
    free(chain);
    free(naive);
    free(got);
    free(A.alloc);
    free(B.alloc);
    free(C0.alloc);
}

static void skip_without_kernels(void) {
    Kernel kernels[3];
    if (cpu_kernels(kernels) == 0) skip();
}

static const int ODD[] = {1, 3, 7, 12, 13, 17, 33, 70};
enum { N_ODD = sizeof ODD / sizeof ODD[0] };

/* Odd shapes (tiles of 12x8 on NEON, ragged in both directions), every
 * transpose, dense and aligned. */
static void test_odd_shapes(void **state) {
    (void)state;
    skip_without_kernels();
    for (int trans = 0; trans < 4; trans++)
        for (int mi = 0; mi < N_ODD; mi++)
            for (int ni = 0; ni < N_ODD; ni++)
                check_case((Case){trans >> 1, trans & 1, ODD[mi], ODD[ni], ODD[(mi + 2 * ni) % N_ODD], 1.0f,
                                  0.0f, 0, 0});
}

/* Unaligned (one float past the boundary), strides wider than the rows,
 * alpha and beta of every kind. */
static void test_unaligned_alpha_beta(void **state) {
    (void)state;
    skip_without_kernels();
    const float alphas[] = {1.0f, -0.5f, 0.3f}, betas[] = {0.0f, 1.0f, -1.5f, 0.25f};
    for (int trans = 0; trans < 4; trans++)
        for (int ai = 0; ai < 3; ai++)
            for (int bi = 0; bi < 4; bi++) {
                check_case((Case){trans >> 1, trans & 1, 19, 37, 40, alphas[ai], betas[bi], 1, 5});
                check_case((Case){trans >> 1, trans & 1, 12, 8, 5, alphas[ai], betas[bi], 1, 1});
            }
}

/* Past the blocks: K over KC (later blocks accumulate onto the first), M
 * over NEON's MC (384), N over 512 (the automatic choice packs A). */
static void test_big_shapes(void **state) {
    (void)state;
    skip_without_kernels();
    for (int trans = 0; trans < 4; trans++) {
        check_case((Case){trans >> 1, trans & 1, 29, 21, 513, 1.0f, 0.0f, 1, 3});
        check_case((Case){trans >> 1, trans & 1, 401, 9, 30, 0.3f, 1.0f, 0, 2});
    }
    check_case((Case){0, 0, 5, 600, 20, 1.0f, -1.5f, 1, 1});
    check_case((Case){1, 0, 50, 50, 24, 1.0f, 0.0f, 0, 0}); /* one head's attention */
}

/* K == 0 and alpha == 0: C = beta * C (with beta == 0, a NaN in C becomes 0). */
static void test_degenerate(void **state) {
    (void)state;
    skip_without_kernels();
    check_case((Case){0, 0, 5, 7, 0, 1.0f, 0.0f, 0, 1});
    check_case((Case){0, 1, 5, 7, 0, 1.0f, 2.0f, 1, 0});
    check_case((Case){1, 1, 6, 9, 4, 0.0f, 3.0f, 0, 0});
}

/* --backend neon: chosen on AArch64 (and by auto), refused elsewhere with a
 * message; sgemm() then gives the kernel's bits; bf16 products refused. */
static void test_backend_neon(void **state) {
    (void)state;
    assert_string_equal(backend_name(BACKEND_NEON), "neon");
    if (!cpu_has_neon()) {
        assert_int_equal(backend_select("neon"), -1);
        assert_non_null(strstr(last_error(), "AArch64"));
        skip();
    }
    assert_int_equal(backend_select("auto"), 0);
    assert_int_equal(backend_current(), BACKEND_NEON);
    assert_false(backend_uses_avx2());
    assert_true(backend_uses_neon());
    assert_int_equal(backend_select("avx2"), -1);
    assert_int_equal(matmul_precision_select("bf16"), -1);
    assert_int_equal(backend_select("neon"), 0);
    enum { M = 37, N = 45, K = 300 };
    Matrix A = matrix_new(M, K, K, 1), B = matrix_new(N, K, K, 0);
    float via_sgemm[M * N], chain[M * N];
    sgemm(0, 1, M, N, K, 0.5f, A.data, A.ld, B.data, B.ld, 0.0f, via_sgemm, N);
    fma_chain(0, 1, M, N, K, 0.5f, &A, &B, 0.0f, chain, N);
    assert_memory_equal(via_sgemm, chain, sizeof chain);
    assert_int_equal(backend_select("naive"), 0);
    assert_false(backend_uses_neon());
    free(A.alloc);
    free(B.alloc);
}

int main(void) {
    threads_model_set(0);   /* 2 threads split even small products: their bits are compared with 1's */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd_shapes),
        cmocka_unit_test(test_unaligned_alpha_beta),
        cmocka_unit_test(test_big_shapes),
        cmocka_unit_test(test_degenerate),
        cmocka_unit_test(test_backend_neon),
    };
    return cmocka_run_group_tests_name("sgemm_neon", tests, NULL, NULL);
}
