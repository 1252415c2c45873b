/* test_sgemm_simd.c - the AVX2 and AVX-512 kernels against the specification
 * (sgemm_naive), and against each other.
 *
 * Every case builds op(A), op(B) and C inside bigger buffers: the matrices
 * start one float past an aligned address (so nothing is 32-byte aligned) and
 * their row strides are wider than the rows (lda > width), with the gaps
 * filled with a sentinel. We check that
 *   - every C element is within the error budget of the naive result,
 *   - the gaps between C's rows still hold the sentinel (nothing written
 *     outside the M x N block),
 *   - beta == 0 ignores C completely (C starts as NaN),
 *   - 1 and 2 threads give bit-identical results, and so do 3, 4 and 6
 *     (C cut into a grid of blocks, 2 x 2 among them; in a build with
 *     OpenMP, the only one with more than one thread),
 *   - the AVX-512 kernel (8x32 tiles) gives the same bits as the AVX2 one
 *     (6x16 tiles): same k blocks, same FMA chain per element, ragged tiles
 *     finished with the same operations as full ones;
 *   - the small-product path (no packing) gives the blocked path's bits.
 * All tests skip on a CPU without AVX2/FMA; the AVX-512 runs are left out
 * (with a note) on a CPU without AVX-512F. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "skip_threads.h"

#include <float.h>
#include <math.h>
#include "util/openmp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"

static const float SENTINEL = -12345.0f;

/* A small local generator (xorshift64*), so the test data does not depend
 * on any other file: uniform floats in [-1, 1). */
static uint64_t test_rng_state = 0x9E3779B97F4A7C15ull;
static float uniform_pm1(void) {
    test_rng_state ^= test_rng_state >> 12;
    test_rng_state ^= test_rng_state << 25;
    test_rng_state ^= test_rng_state >> 27;
    uint32_t bits = (uint32_t)((test_rng_state * 0x2545F4914F6CDD1Dull) >> 40); /* 24 bits */
    return (float)bits / 8388608.0f - 1.0f;
}

/* A rows x cols matrix with row stride ld, starting `offset` floats into a
 * 64-byte-aligned allocation; the gap columns [cols, ld) hold SENTINEL. */
typedef struct {
    float *alloc, *data;
    int rows, cols, ld;
} Matrix;

static Matrix matrix_new(int rows, int cols, int ld, int offset) {
    Matrix m = {0};
    size_t floats = (size_t)offset + (size_t)rows * ld + 16;
    m.alloc = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    assert_non_null(m.alloc);
    m.data = m.alloc + offset;
    m.rows = rows, m.cols = cols, m.ld = ld;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < ld; j++) m.data[(size_t)i * ld + j] = j < cols ? uniform_pm1() : SENTINEL;
    return m;
}

static void matrix_free(Matrix *m) { free(m->alloc); }

/* One element of op(X), the way sgemm reads it. */
static float op_element(const Matrix *x, int trans, int r, int c) {
    return trans ? x->data[(size_t)c * x->ld + r] : x->data[(size_t)r * x->ld + c];
}

typedef struct {
    int trans_a, trans_b, M, N, K;
    float alpha, beta;
    int offset; /* floats past a 64-byte boundary: 1 = unaligned */
    int pad;    /* extra floats per row: ld = width + pad */
} Case;

typedef void (*SgemmFunction)(int trans_a, int trans_b, int M, int N, int K, float alpha,
                              const float *A, int lda, const float *B, int ldb, float beta,
                              float *C, int ldc);

/* Run one case with the given kernel and thread count; returns the C buffer
 * (caller frees) so callers can compare runs bit for bit. */
static float *run_case(const Case *t, SgemmFunction kernel, const char *kernel_name, int threads) {
    int a_rows = t->trans_a ? t->K : t->M, a_cols = t->trans_a ? t->M : t->K;
    int b_rows = t->trans_b ? t->N : t->K, b_cols = t->trans_b ? t->K : t->N;
    Matrix A = matrix_new(a_rows, a_cols, a_cols + t->pad, t->offset);
    Matrix B = matrix_new(b_rows, b_cols, b_cols + t->pad, t->offset);
    Matrix C = matrix_new(t->M, t->N, t->N + t->pad, t->offset);
    if (t->beta == 0.0f) /* beta == 0 must not read C: poison it */
        for (int i = 0; i < t->M; i++)
            for (int j = 0; j < t->N; j++) C.data[(size_t)i * C.ld + j] = NAN;

    size_t c_floats = (size_t)t->M * C.ld;
    float *want = malloc(c_floats * sizeof(float));
    float *c_before = malloc(c_floats * sizeof(float));
    assert_non_null(want);
    assert_non_null(c_before);
    memcpy(want, C.data, c_floats * sizeof(float));
    memcpy(c_before, C.data, c_floats * sizeof(float));

    sgemm_naive(t->trans_a, t->trans_b, t->M, t->N, t->K, t->alpha, A.data, A.ld, B.data, B.ld,
                t->beta, want, C.ld);
    omp_set_num_threads(threads);
    kernel(t->trans_a, t->trans_b, t->M, t->N, t->K, t->alpha, A.data, A.ld, B.data, B.ld,
               t->beta, C.data, C.ld);

    /* Error budget. Summing K products in float (in any order, with or
     * without FMA) has a forward error of at most gamma_K * sum_k |a_ik b_kj|
     * with gamma_K = K u / (1 - K u), u = 2^-24 (Higham, "Accuracy and
     * Stability of Numerical Algorithms", section 3.1). Scaling by alpha,
     * adding beta * C and the naive result's own rounding from double to
     * float add about 3 more roundings. So with eps = 2u = FLT_EPSILON:
     *   |got - want| <= (K + 3) * eps * (|alpha| sum_k |a_ik b_kj| + |beta c_ij|)
     * which is about twice the worst case; the typical error is far smaller
     * (random signs make it grow like sqrt(K)), so a real bug (a wrong
     * element, a missed k block, a wrong stride) blows through it at once. */
    int bad = 0;
    for (int i = 0; i < t->M; i++) {
        for (int j = 0; j < t->N; j++) {
            double magnitude = 0.0;
            for (int k = 0; k < t->K; k++)
                magnitude += fabs((double)op_element(&A, t->trans_a, i, k) *
                                  (double)op_element(&B, t->trans_b, k, j));
            magnitude *= fabs(t->alpha);
            if (t->beta != 0.0f) magnitude += fabs((double)t->beta * c_before[(size_t)i * C.ld + j]);
            double budget = (t->K + 3) * (double)FLT_EPSILON * magnitude + 1e-30;
            float got = C.data[(size_t)i * C.ld + j], ref = want[(size_t)i * C.ld + j];
            if (!(fabs((double)got - (double)ref) <= budget)) {
                if (bad++ < 5)
                    print_error("%s ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g threads=%d: "
                                "C[%d,%d] = %.9g, want %.9g (budget %.3g)\n",
                                kernel_name, t->trans_a, t->trans_b, t->M, t->N, t->K, (double)t->alpha,
                                (double)t->beta, threads, i, j, (double)got, (double)ref, budget);
            }
        }
        for (int j = t->N; j < C.ld; j++) /* the gap between rows is untouched */
            if (memcmp(&C.data[(size_t)i * C.ld + j], &SENTINEL, sizeof(float)) != 0 && bad++ < 5)
                print_error("wrote outside C: row %d, gap column %d\n", i, j);
    }
    assert_int_equal(bad, 0);

    float *result = malloc(c_floats * sizeof(float));
    assert_non_null(result);
    memcpy(result, C.data, c_floats * sizeof(float));
    free(want);
    free(c_before);
    matrix_free(&A);
    matrix_free(&B);
    matrix_free(&C);
    return result;
}

/* Run the AVX2 kernel with 1 and with 2 threads, and the AVX-512 kernel
 * likewise when the CPU has it, all on the same inputs; every result must be
 * within budget and bit-identical to the first (each C element is computed by
 * one thread, in a fixed k order, with the same operations in both kernels).
 * Without OpenMP (make OMP=0) the 2-thread runs are left out. */
static void check_case(Case t) {
    static const struct {
        SgemmFunction kernel;
        const char *name;
        int threads;
    } runs[] = {{sgemm_avx2, "avx2", 1}, {sgemm_avx2, "avx2", 2},
                {sgemm_avx512, "avx512", 1}, {sgemm_avx512, "avx512", 2}};
    int n_runs = cpu_has_avx512f() ? 4 : 2;
    uint64_t seed = test_rng_state;
    size_t c_floats = (size_t)t.M * (t.N + t.pad);
    float *first = NULL;
    for (int r = 0; r < n_runs; r++) {
        if (runs[r].threads > 1 && !openmp_enabled()) continue;
        test_rng_state = seed; /* the same inputs for every run */
        float *got = run_case(&t, runs[r].kernel, runs[r].name, runs[r].threads);
        if (first == NULL) {
            first = got;
            continue;
        }
        if (memcmp(first, got, c_floats * sizeof(float)) != 0)
            fail_msg("%s on %d thread(s) differs from avx2 on 1 thread: ta=%d tb=%d M=%d N=%d K=%d",
                     runs[r].name, runs[r].threads, t.trans_a, t.trans_b, t.M, t.N, t.K);
        free(got);
    }
    free(first);
}

static void skip_without_avx2(void) {
    if (!cpu_has_avx2_fma()) skip();
}

static const int ODD_SIZES[] = {1, 3, 7, 17, 33, 257};
enum { N_ODD_SIZES = sizeof ODD_SIZES / sizeof ODD_SIZES[0] };

/* All shapes from {1,3,7,17,33,257}^3, every transpose form, dense storage. */
static void test_odd_shapes_all_transposes(void **state) {
    (void)state;
    skip_without_avx2();
    for (int trans = 0; trans < 4; trans++)
        for (int mi = 0; mi < N_ODD_SIZES; mi++)
            for (int ni = 0; ni < N_ODD_SIZES; ni++)
                for (int ki = 0; ki < N_ODD_SIZES; ki++)
                    check_case((Case){trans >> 1, trans & 1, ODD_SIZES[mi], ODD_SIZES[ni],
                                      ODD_SIZES[ki], 1.0f, 0.0f, 0, 0});
}

/* The same shapes, unaligned (offset 1 float) with strides wider than rows. */
static void test_unaligned_and_strided(void **state) {
    (void)state;
    skip_without_avx2();
    for (int trans = 0; trans < 4; trans++)
        for (int mi = 0; mi < N_ODD_SIZES; mi++)
            for (int ni = 0; ni < N_ODD_SIZES; ni++)
                for (int ki = 0; ki < N_ODD_SIZES; ki += 2)
                    check_case((Case){trans >> 1, trans & 1, ODD_SIZES[mi], ODD_SIZES[ni],
                                      ODD_SIZES[ki], 1.0f, 1.0f, 1, 5});
}

/* Shapes that cross the cache blocks: M > MC (384 for avx2, 256 for
 * avx512), K > KC (256, so the later k blocks accumulate onto the first),
 * N > NC (4096). */
static void test_big_shapes(void **state) {
    (void)state;
    skip_without_avx2();
    for (int trans = 0; trans < 4; trans++) {
        check_case((Case){trans >> 1, trans & 1, 300, 200, 513, 1.0f, 0.0f, 1, 3});
        check_case((Case){trans >> 1, trans & 1, 401, 35, 600, 1.0f, 1.0f, 0, 0});
        check_case((Case){trans >> 1, trans & 1, 7, 4100, 40, 1.0f, 0.5f, 1, 1}); /* 2 threads */
    }
    check_case((Case){0, 0, 64, 384, 128, 1.0f, 0.0f, 0, 0}); /* chapter-sized shapes */
    check_case((Case){0, 1, 2048, 128, 128, 1.0f, 0.0f, 0, 0});
    check_case((Case){1, 0, 64, 64, 512, 1.0f, 1.0f, 0, 0});
}

/* More threads than this machine has cores: the driver cuts C into a grid
 * of row_parts x col_parts blocks (3 x 1, 2 x 2, 2 x 3, ...). Every grid
 * must give the 1-thread bits, and stay within budget (run_case checks). */
static void test_thread_grids(void **state) {
    (void)state;
    skip_without_avx2();
    skip_without_threads();
    threads_model_set(0);   /* split even small work between the threads: their bits are compared */
    static const Case cases[] = {
        {0, 0, 300, 200, 513, 1.0f, 0.0f, 1, 3},  /* 4 threads: 2 x 2 */
        {1, 1, 130, 260, 70, 0.3f, 1.0f, 0, 2},   /* 4: 2 x 2, 6: 2 x 3, ragged */
        {0, 1, 1000, 40, 64, 1.0f, -1.5f, 1, 0},  /* rows only: N is 2-3 tiles */
        {1, 0, 20, 1000, 64, 1.0f, 0.0f, 0, 1},   /* columns only: M is 3-4 tiles */
        {0, 0, 257, 257, 257, 1.0f, 0.0f, 1, 1},
    };
    static const int thread_counts[] = {3, 4, 6};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t seed = test_rng_state;
        size_t c_floats = (size_t)cases[c].M * (cases[c].N + cases[c].pad);
        float *one = run_case(&cases[c], sgemm_avx2, "avx2", 1);
        for (size_t k = 0; k < sizeof thread_counts / sizeof thread_counts[0]; k++) {
            test_rng_state = seed; /* the same inputs */
            float *got = run_case(&cases[c], sgemm_avx2, "avx2", thread_counts[k]);
            if (memcmp(one, got, c_floats * sizeof(float)) != 0)
                fail_msg("avx2 on %d threads differs from 1 thread: ta=%d tb=%d M=%d N=%d K=%d",
                         thread_counts[k], cases[c].trans_a, cases[c].trans_b, cases[c].M,
                         cases[c].N, cases[c].K);
            free(got);
        }
        free(one);
    }
}

/* alpha and beta: 0 (C is NaN and must be ignored), 1 (accumulate), others;
 * K = 300 > KC so beta is applied once, not once per k block. */
static void test_alpha_beta(void **state) {
    (void)state;
    skip_without_avx2();
    const float alphas[] = {1.0f, -0.5f, 0.3f}; /* 0.3: alpha * sum is inexact */
    const float betas[] = {0.0f, 1.0f, -1.5f, 0.25f};
    for (int ai = 0; ai < 3; ai++)
        for (int bi = 0; bi < 4; bi++)
            for (int trans = 0; trans < 4; trans++) {
                check_case((Case){trans >> 1, trans & 1, 19, 37, 300, alphas[ai], betas[bi], 1, 2});
                check_case((Case){trans >> 1, trans & 1, 12, 32, 5, alphas[ai], betas[bi], 0, 0});
            }
}

/* K == 0 and alpha == 0: C = beta * C without touching A or B; with beta == 0
 * a NaN in C becomes 0. M == 0 or N == 0: nothing at all happens. */
static void check_degenerate(SgemmFunction kernel) {
    float C[6] = {NAN, NAN, NAN, 1.0f, 2.0f, 3.0f};
    kernel(0, 0, 1, 3, 0, 1.0f, NULL, 1, NULL, 3, 0.0f, C, 3);
    for (int j = 0; j < 3; j++) assert_true(C[j] == 0.0f);
    kernel(0, 0, 1, 3, 0, 1.0f, NULL, 1, NULL, 3, 2.0f, C + 3, 3);
    assert_true(C[3] == 2.0f && C[4] == 4.0f && C[5] == 6.0f);
    float A[4] = {NAN, NAN, NAN, NAN}, B[4] = {1, 2, 3, 4}, D[4] = {1, 1, 1, 1};
    kernel(0, 0, 2, 2, 2, 0.0f, A, 2, B, 2, 3.0f, D, 2); /* alpha == 0: A not read */
    for (int j = 0; j < 4; j++) assert_true(D[j] == 3.0f);
    kernel(0, 0, 0, 2, 2, 1.0f, A, 2, B, 2, 0.0f, D, 2);
    kernel(0, 0, 2, 0, 2, 1.0f, A, 2, B, 2, 0.0f, D, 2);
    for (int j = 0; j < 4; j++) assert_true(D[j] == 3.0f);
}

static void test_degenerate(void **state) {
    (void)state;
    skip_without_avx2();
    check_degenerate(sgemm_avx2);
    if (cpu_has_avx512f()) check_degenerate(sgemm_avx512);
}

/* first and second on the same inputs must give the same bits, for every
 * shape, transpose, alpha and beta, with strides (lda, ldb and ldc wider than
 * the rows) and unaligned data. */
static void check_same_bits(const char *what, SgemmFunction first, SgemmFunction second,
                            const int (*shapes)[3], int n_shapes) {
    const float alphas[] = {1.0f, 0.3f}, betas[] = {0.0f, 1.0f, -1.5f};
    for (int s = 0; s < n_shapes; s++)
        for (int trans = 0; trans < 4; trans++)
            for (int ai = 0; ai < 2; ai++)
                for (int bi = 0; bi < 3; bi++) {
                    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    int ta = trans >> 1, tb = trans & 1;
                    Matrix A = matrix_new(ta ? K : M, ta ? M : K, (ta ? M : K) + 3, 1);
                    Matrix B = matrix_new(tb ? N : K, tb ? K : N, (tb ? K : N) + 2, 1);
                    Matrix one = matrix_new(M, N, N + 1, 1);
                    Matrix two = matrix_new(M, N, N + 1, 1);
                    memcpy(two.alloc, one.alloc, sizeof(float) * ((size_t)1 + (size_t)M * (N + 1)));
                    first(ta, tb, M, N, K, alphas[ai], A.data, A.ld, B.data, B.ld, betas[bi], one.data, one.ld);
                    second(ta, tb, M, N, K, alphas[ai], A.data, A.ld, B.data, B.ld, betas[bi], two.data, two.ld);
                    if (memcmp(one.data, two.data, sizeof(float) * (size_t)M * (N + 1)) != 0)
                        fail_msg("%s: ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g", what, ta, tb, M, N, K,
                                 (double)alphas[ai], (double)betas[bi]);
                    matrix_free(&A);
                    matrix_free(&B);
                    matrix_free(&one);
                    matrix_free(&two);
                }
}

/* Each kernel's two blocked loop nests, forced (sgemm_blocked_path). */
static void avx2_packed(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc) {
    sgemm_blocked_path(GEMM_PACKED, gemm_kernel_avx2(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
static void avx2_direct(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc) {
    sgemm_blocked_path(GEMM_DIRECT, gemm_kernel_avx2(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
static void avx512_packed(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                          const float *B, int ldb, float beta, float *C, int ldc) {
    sgemm_blocked_path(GEMM_PACKED, gemm_kernel_avx512(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
static void avx512_direct(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                          const float *B, int ldb, float beta, float *C, int ldc) {
    sgemm_blocked_path(GEMM_DIRECT, gemm_kernel_avx512(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* The small-product path (no tiles, no packing, used below small_max_work
 * multiply-adds) must give the packed path's bits: the same FMA chain per
 * element, the same alpha and beta operations (K <= KC here). */
static void test_small_path_same_bits(void **state) {
    (void)state;
    skip_without_avx2();
    static const int shapes[][3] = {{37, 45, 200}, {7, 300, 33}, {64, 64, 64}, {1, 257, 100},
                                    {130, 3, 256}, {29, 31, 19}};
    check_same_bits("small path differs from packed", avx2_packed, sgemm_small_avx2, shapes, 6);
}

/* The direct path (op(A) read in place, and B too for the AVX-512 kernel)
 * must give the packed path's bits, for each kernel, with ragged tiles (rows
 * and columns not multiples of the tile) and K over one KC block. */
static void test_direct_path_same_bits(void **state) {
    (void)state;
    skip_without_avx2();
    static const int shapes[][3] = {{37, 45, 200}, {7, 300, 33}, {64, 64, 64}, {1, 257, 100},
                                    {130, 3, 300}, {29, 31, 19}, {50, 50, 24}, {8, 32, 513}};
    check_same_bits("avx2: direct path differs from packed", avx2_packed, avx2_direct, shapes, 8);
    if (cpu_has_avx512f())
        check_same_bits("avx512: direct path differs from packed", avx512_packed, avx512_direct, shapes, 8);
}

/* Which path GEMM_AUTO takes (matmul_blocked.c, "2."): A read in place
 * when its rows are close and C has at most 512 columns, however tall (a C
 * of 16 MiB too), never with rows over 2 KiB apart or over 512 columns. And
 * a tall product of chapter 07's long ViT (3200 x 288 x 96) gives the same
 * bits down GEMM_AUTO as down both forced paths. */
static void avx2_auto(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) {
    sgemm_blocked_path(GEMM_AUTO, gemm_kernel_avx2(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void test_direct_rule(void **state) {
    (void)state;
    skip_without_avx2();
    const GemmKernel *avx2 = gemm_kernel_avx2(), *avx512 = gemm_kernel_avx512();
    assert_true(gemm_reads_a_in_place(avx2, 64, 64));
    assert_true(gemm_reads_a_in_place(avx2, 24, 288));   /* one head's attention */
    assert_true(gemm_reads_a_in_place(avx2, 512, 96));   /* 8192 x 512: C 16 MiB */
    assert_true(gemm_reads_a_in_place(avx512, 512, 96));
    assert_false(gemm_reads_a_in_place(avx2, 64, 1024));  /* rows 4 KiB apart */
    assert_false(gemm_reads_a_in_place(avx512, 600, 64)); /* over 512 columns */
    assert_false(gemm_reads_a_in_place(avx2, 600, 64));
    static const int tall[][3] = {{3200, 288, 96}};
    check_same_bits("avx2: auto path differs from direct", avx2_direct, avx2_auto, tall, 1);
    check_same_bits("avx2: auto path differs from packed", avx2_packed, avx2_auto, tall, 1);
}

/* The chapters reach the kernels through sgemm(): "auto" takes the widest
 * kernel the CPU has, "avx512" is refused with an error on a CPU without it,
 * and whatever the SIMD backend, sgemm() gives the kernels' bits. */
static void test_backend_dispatch(void **state) {
    (void)state;
    skip_without_avx2();
    assert_int_equal(backend_select("auto"), 0);
    assert_int_equal(backend_current(), cpu_has_avx512f() ? BACKEND_AVX512 : BACKEND_AVX2);
    if (!cpu_has_avx512f()) {
        assert_int_equal(backend_select("avx512"), -1);
        print_message("note: no AVX-512F here: only the avx2 kernel was tested\n");
        return;
    }
    enum { M = 37, N = 45, K = 300 };
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *via_sgemm = malloc(sizeof(float) * M * N), *direct = malloc(sizeof(float) * M * N);
    assert_true(A && B && via_sgemm && direct);
    for (int i = 0; i < M * K; i++) A[i] = uniform_pm1();
    for (int i = 0; i < K * N; i++) B[i] = uniform_pm1();
    omp_set_num_threads(1);
    assert_int_equal(backend_select("avx512"), 0);
    assert_int_equal(backend_current(), BACKEND_AVX512);
    assert_true(backend_uses_avx2());
    sgemm(0, 1, M, N, K, 0.5f, A, K, B, K, 0.0f, via_sgemm, N); /* B read as [N,K]^T */
    sgemm_avx2(0, 1, M, N, K, 0.5f, A, K, B, K, 0.0f, direct, N);
    assert_memory_equal(via_sgemm, direct, sizeof(float) * M * N);
    assert_int_equal(backend_select("auto"), 0);
    free(A);
    free(B);
    free(via_sgemm);
    free(direct);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd_shapes_all_transposes),
        cmocka_unit_test(test_unaligned_and_strided),
        cmocka_unit_test(test_big_shapes),
        cmocka_unit_test(test_thread_grids),
        cmocka_unit_test(test_alpha_beta),
        cmocka_unit_test(test_degenerate),
        cmocka_unit_test(test_small_path_same_bits),
        cmocka_unit_test(test_direct_path_same_bits),
        cmocka_unit_test(test_direct_rule),
        cmocka_unit_test(test_backend_dispatch),
    };
    return cmocka_run_group_tests_name("sgemm_simd", tests, NULL, NULL);
}
