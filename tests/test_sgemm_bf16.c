/* test_sgemm_bf16.c - the "bf16" matmul precision: bf16_round, the bf16
 * kernel (matmul_bf16.c) against its specification (sgemm_naive_bf16), and
 * the choice of precision in sgemm().
 *
 * The kernel rounds each input to bf16 and sums the (exact) products in
 * float, so against the specification, which rounds the same way and sums in
 * double, it owes only the float summation error: the budget of
 * test_sgemm_simd.c, (K + 3) eps sum_k |bf16(a_ik) bf16(b_kj)|. That budget is
 * far below what rounding the inputs changes (up to 2^-7 of each product),
 * so a kernel that forgot to round, or paired the wrong k, fails it; and one
 * test checks that the bf16 result is NOT within the float budget of the
 * float product. The kernel's tests skip on a CPU without AVX512_BF16;
 * bf16_round and the naive path run everywhere. */
#include <float.h>
#include <math.h>
#include "util/openmp.h"
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "util/error.h" /* before cmocka.h, whose fail() macro would rename ours */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static uint32_t to_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* xorshift64*: uniform floats in [-1, 1), independent of the rest of the code */
static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float uniform_pm1(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint32_t bits = (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 40);
    return (float)bits / 8388608.0f - 1.0f;
}

static void skip_without_bf16(void) {
    if (!cpu_has_avx512_bf16()) skip();
}

/* ---- bf16_round --------------------------------------------------------- */

static void test_bf16_round(void **state) {
    (void)state;
    static const struct {
        uint32_t in, out;
    } cases[] = {
        {0x3F800000u, 0x3F800000u}, /* 1 stays 1                                  */
        {0x3F807FFFu, 0x3F800000u}, /* just below half way: down                  */
        {0x3F808000u, 0x3F800000u}, /* half way, kept bits even (...0): down      */
        {0x3F818000u, 0x3F820000u}, /* half way, kept bits odd (...1): up to even */
        {0x3F808001u, 0x3F810000u}, /* just above half way: up                    */
        {0xBF808001u, 0xBF810000u}, /* the same for a negative number             */
        {0x3FFFFFFFu, 0x40000000u}, /* the carry runs into the exponent: 2        */
        {0x7F7FFFFFu, 0x7F800000u}, /* the largest float: past bf16's, to inf     */
        {0x7F800000u, 0x7F800000u}, /* +inf                                       */
        {0xFF800000u, 0xFF800000u}, /* -inf                                       */
        {0x00000001u, 0x00000000u}, /* the smallest subnormal: +0                 */
        {0x807FFFFFu, 0x80000000u}, /* a negative subnormal: -0                   */
        {0x00800000u, 0x00800000u}, /* the smallest normal float stays            */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t got = to_bits(bf16_round(from_bits(cases[c].in)));
        if (got != cases[c].out) fail_msg("bf16_round(0x%08X) = 0x%08X, want 0x%08X", cases[c].in, got, cases[c].out);
    }
    assert_true(isnan(bf16_round(NAN)));
    assert_true(isnan(bf16_round(from_bits(0x7F800001u)))); /* a NaN whose top bits look like inf */
    /* Always within half a unit of bf16's last place (8 significant bits):
     * at most 2^-8 of the value. */
    for (int t = 0; t < 100000; t++) {
        float x = uniform_pm1() * 1000.0f;
        assert_true(fabsf(bf16_round(x) - x) <= ldexpf(fabsf(x), -8));
        assert_int_equal(to_bits(bf16_round(x)) & 0xFFFFu, 0);
    }
}

/* The CPU's rounding (VCVTNEPS2BF16 in the packing) is bf16_round's: with
 * K = 1 and B = 1, C[i, 0] = bf16(a_i) * 1, exact. Ties, both signs,
 * subnormals, huge and random values. (Compared as values: the kernel's sum
 * starts at +0, and +0 + -0 is +0, so a zero's sign does not survive.) */
static void test_cpu_rounding_is_bf16_round(void **state) {
    (void)state;
    skip_without_bf16();
    enum { M = 64 };
    float a[M], b[1] = {1.0f}, c[M];
    const uint32_t special[] = {0x3F808000u, 0x3F818000u, 0xBF808000u, 0xBF818000u, 0x3F807FFFu, 0x3F808001u,
                                0x3FFFFFFFu, 0x7F7FFFFFu, 0x00000001u, 0x807FFFFFu, 0x00800000u, 0x3F800000u};
    const int n_special = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < M; i++) a[i] = i < n_special ? from_bits(special[i]) : uniform_pm1() * 100.0f;
    sgemm_avx512_bf16(0, 0, M, 1, 1, 1.0f, a, 1, b, 1, 0.0f, c, 1);
    for (int i = 0; i < M; i++)
        if (c[i] != bf16_round(a[i]))
            fail_msg("a = 0x%08X: the CPU gives 0x%08X, bf16_round 0x%08X", to_bits(a[i]), to_bits(c[i]),
                     to_bits(bf16_round(a[i])));
}

/* ---- the kernel against the specification ------------------------------ */

typedef struct {
    int trans_a, trans_b, M, N, K;
    float alpha, beta;
    int pad; /* ld = width + pad; the matrices start one float past an aligned address */
} Case;

static float *matrix_new(int rows, int ld) {
    float *m = malloc(((size_t)rows * ld + 1) * sizeof(float));
    assert_non_null(m);
    for (size_t i = 0; i < (size_t)rows * ld + 1; i++) m[i] = uniform_pm1();
    return m;
}

/* Runs the case with the bf16 kernel on `threads` threads; checks every
 * element against sgemm_naive_bf16 within the float budget and returns C
 * (the caller frees it) for bit-for-bit comparisons. */
static float *run_bf16_case(const Case *t, int threads) {
    int lda = (t->trans_a ? t->M : t->K) + t->pad, ldb = (t->trans_b ? t->K : t->N) + t->pad, ldc = t->N + t->pad;
    float *A = matrix_new(t->trans_a ? t->K : t->M, lda), *B = matrix_new(t->trans_b ? t->N : t->K, ldb);
    float *C = matrix_new(t->M, ldc), *want = malloc(((size_t)t->M * ldc + 1) * sizeof(float));
    assert_non_null(want);
    memcpy(want, C, ((size_t)t->M * ldc + 1) * sizeof(float));
    float *c_before = malloc(((size_t)t->M * ldc + 1) * sizeof(float));
    assert_non_null(c_before);
    memcpy(c_before, C, ((size_t)t->M * ldc + 1) * sizeof(float));
    /* +1: unaligned starts */
    sgemm_naive_bf16(t->trans_a, t->trans_b, t->M, t->N, t->K, t->alpha, A + 1, lda, B + 1, ldb, t->beta, want + 1,
                     ldc);
    omp_set_num_threads(threads);
    sgemm_avx512_bf16(t->trans_a, t->trans_b, t->M, t->N, t->K, t->alpha, A + 1, lda, B + 1, ldb, t->beta, C + 1,
                      ldc);
    int bad = 0;
    for (int i = 0; i < t->M; i++) {
        for (int j = 0; j < ldc; j++) {
            size_t at = 1 + (size_t)i * ldc + j;
            if (j >= t->N) { /* the gap between rows of C is untouched */
                if (to_bits(C[at]) != to_bits(c_before[at]) && bad++ < 5) print_error("wrote outside C at %d,%d\n", i, j);
                continue;
            }
            double magnitude = 0.0;
            for (int k = 0; k < t->K; k++) {
                float a = t->trans_a ? A[1 + (size_t)k * lda + i] : A[1 + (size_t)i * lda + k];
                float b = t->trans_b ? B[1 + (size_t)j * ldb + k] : B[1 + (size_t)k * ldb + j];
                magnitude += fabs((double)bf16_round(a) * bf16_round(b));
            }
            magnitude = magnitude * fabs(t->alpha) + fabs((double)t->beta * c_before[at]);
            double budget = (t->K + 3) * (double)FLT_EPSILON * magnitude + 1e-30;
            if (!(fabs((double)C[at] - want[at]) <= budget) && bad++ < 5)
                print_error("ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g threads=%d: C[%d,%d] = %.9g, want %.9g\n",
                            t->trans_a, t->trans_b, t->M, t->N, t->K, (double)t->alpha, (double)t->beta, threads, i,
                            j, (double)C[at], (double)want[at]);
        }
    }
    assert_int_equal(bad, 0);
    free(A);
    free(B);
    free(want);
    free(c_before);
    return C;
}

/* Within budget on 1 and 2 threads, and the same bits on both (on 1 thread
 * alone in a build without OpenMP, make OMP=0). */
static void check_case(Case t) {
    uint64_t seed = rng_state;
    float *one = run_bf16_case(&t, 1);
    if (openmp_enabled()) {
        rng_state = seed;
        float *two = run_bf16_case(&t, 2);
        if (memcmp(one, two, ((size_t)t.M * (t.N + t.pad) + 1) * sizeof(float)) != 0)
            fail_msg("1 and 2 threads differ: ta=%d tb=%d M=%d N=%d K=%d", t.trans_a, t.trans_b, t.M, t.N, t.K);
        free(two);
    }
    free(one);
}

/* Odd sizes (ragged tiles, an odd K whose last pair is half empty, K past
 * one 256-deep block), all four transposes, beta 0 / 1 / other, strides. */
static void test_kernel_against_specification(void **state) {
    (void)state;
    skip_without_bf16();
    static const int sizes[] = {1, 2, 7, 17, 33, 257};
    const int n = (int)(sizeof sizes / sizeof sizes[0]);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int m = 0; m < n; m++)
                for (int k = 0; k < n; k++) {
                    int N = sizes[(m + k + ta) % n];
                    float beta = (m + k) % 3 == 0 ? 0.0f : (m + k) % 3 == 1 ? 1.0f : -0.5f;
                    check_case((Case){ta, tb, sizes[m], N, sizes[k], (k % 2) ? 1.0f : 0.75f, beta, (m + k) % 3});
                }
    /* the chapters' kind of product, big enough to be split between threads */
    check_case((Case){0, 0, 200, 96, 288, 1.0f, 0.0f, 0});
    check_case((Case){1, 0, 96, 288, 600, 1.0f, 1.0f, 0});
    check_case((Case){0, 1, 130, 50, 24, 0.2f, 0.0f, 0});
}

/* The inputs really are rounded: on random data the bf16 result is farther
 * from the float product than a float sum's budget allows, somewhere. */
static void test_bf16_is_not_float(void **state) {
    (void)state;
    skip_without_bf16();
    enum { M = 16, N = 32, K = 64 };
    float *A = matrix_new(M, K), *B = matrix_new(K, N), c16[M * N], c32[M * N];
    sgemm_avx512_bf16(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, c16, N);
    sgemm_naive(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, c32, N);
    double worst = 0.0;
    for (int i = 0; i < M * N; i++) {   /* (not fmax: AArch64 gcc 12.2 crashes vectorising that reduction) */
        double error = fabs((double)c16[i] - c32[i]);
        if (error > worst) worst = error;
    }
    assert_true(worst > (K + 3) * (double)FLT_EPSILON * K); /* |a b| <= 1: the float budget at most */
    assert_true(worst < K * ldexp(1.0, -7));                 /* but a bf16-sized error, not a wrong product */
    free(A);
    free(B);
}

/* ---- choosing the precision --------------------------------------------- */

static void test_precision_select(void **state) {
    (void)state;
    enum { M = 72, N = 80, K = 33 }; /* M N / (M + N) = 37.9: bf16 pays */
    float *A = matrix_new(M, K), *B = matrix_new(K, N), got[M * N], want[M * N];

    assert_int_equal(matmul_precision_current(), PRECISION_FLOAT);
    assert_int_equal(matmul_precision_select("fp8"), -1);
    assert_non_null(strstr(last_error(), "expected float or bf16"));
    assert_int_equal(matmul_precision_current(), PRECISION_FLOAT);

    /* naive backend: sgemm() is the specification */
    assert_int_equal(backend_select("naive"), 0);
    assert_int_equal(matmul_precision_select("bf16"), 0);
    assert_int_equal(matmul_precision_current(), PRECISION_BF16);
    assert_string_equal(matmul_precision_name(matmul_precision_current()), "bf16");
    sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, got, N);
    sgemm_naive_bf16(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, want, N);
    assert_memory_equal(got, want, sizeof got);

    if (cpu_has_avx2_fma()) { /* refused on avx2, and the precision stays what it was */
        assert_int_equal(matmul_precision_select("float"), 0);
        assert_int_equal(backend_select("avx2"), 0);
        assert_int_equal(matmul_precision_select("bf16"), -1);
        assert_non_null(strstr(last_error(), "the backend is avx2"));
        assert_int_equal(matmul_precision_current(), PRECISION_FLOAT);
    }
    if (cpu_has_avx512_bf16()) { /* avx512: sgemm() is the bf16 kernel */
        assert_int_equal(backend_select("avx512"), 0);
        assert_int_equal(matmul_precision_select("bf16"), 0);
        sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, got, N);
        sgemm_avx512_bf16(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, want, N);
        assert_memory_equal(got, want, sizeof got);
    }
    /* A product where bf16 does not pay (M N / (M + N) = 31.5 < 32) stays float. */
    assert_int_equal(backend_select("naive"), 0);
    assert_int_equal(matmul_precision_select("bf16"), 0);
    sgemm(0, 0, 63, 64, K, 1.0f, A, K, B, N, 0.0f, got, 64);
    sgemm_naive(0, 0, 63, 64, K, 1.0f, A, K, B, N, 0.0f, want, 64);
    assert_memory_equal(got, want, 63 * 64 * sizeof(float));
    sgemm(0, 0, 64, 64, K, 1.0f, A, K, B, N, 0.0f, got, 64); /* 32: it does */
    sgemm_naive_bf16(0, 0, 64, 64, K, 1.0f, A, K, B, N, 0.0f, want, 64);
    assert_memory_equal(got, want, 64 * 64 * sizeof(float));
    sgemm_naive(0, 0, 64, 64, K, 1.0f, A, K, B, N, 0.0f, want, 64);
    assert_memory_not_equal(got, want, 64 * 64 * sizeof(float));

    /* back to float: sgemm() is the backend's float product again */
    assert_int_equal(matmul_precision_select("float"), 0);
    assert_int_equal(backend_select("naive"), 0);
    sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, got, N);
    sgemm_naive(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, want, N);
    assert_memory_equal(got, want, sizeof got);
    assert_int_equal(backend_select(NULL), 0);
    free(A);
    free(B);
}

int main(void) {
    threads_model_set(0);   /* 2 threads split even small products: their bits are compared with 1's */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_round),
        cmocka_unit_test(test_cpu_rounding_is_bf16_round),
        cmocka_unit_test(test_kernel_against_specification),
        cmocka_unit_test(test_bf16_is_not_float),
        cmocka_unit_test(test_precision_select),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
