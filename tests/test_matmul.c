/* test_matmul.c - the naive sgemm (the specification) against an independent
 * direct triple loop, plus the dispatching sgemm, the dense wrappers, backend
 * selection and thread-count control.
 *
 * The reference below never does strided/transposed index arithmetic the way
 * sgemm_naive does: it first copies op(A) and op(B) into plain dense
 * [M,K] / [K,N] matrices, then multiplies those. Padding beyond each row's
 * width is filled with NaN, so reading outside the matrix shows up as NaN,
 * and C's padding is filled with a sentinel that must survive untouched. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Project headers before cmocka.h: cmocka defines a macro fail() that
 * would otherwise clash with error.h's fail(). */
#include "util/error.h"
#include "kernels/matmul.h"
#include "util/openmp.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "skip_threads.h"

#define C_SENTINEL 12345.0f

/* Reference: C = alpha * opA @ opB + beta * C0 on dense copies, in double. */
static void reference_gemm(int M, int N, int K, double alpha, const float *opA, const float *opB,
                           double beta, const float *C0, double *out) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < K; k++) s += (double)opA[i * K + k] * (double)opB[k * N + j];
            out[i * N + j] = alpha * s + (beta == 0.0 ? 0.0 : beta * (double)C0[i * N + j]);
        }
}

/* Fill a stored matrix [rows, ld] whose first `cols` columns are data and the
 * rest NaN padding. */
static float *make_stored(Rng *r, int rows, int cols, int ld) {
    float *m = malloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1) * (size_t)(ld > 0 ? ld : 1));
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < ld; j++) m[i * ld + j] = j < cols ? 2.0f * rng_uniform(r) - 1.0f : NAN;
    return m;
}

/* One case: every transpose combination for shape (M, N, K), strides = width + pad. */
static void check_case(int ta, int tb, int M, int N, int K, int pad, float alpha, float beta,
                       int nan_in_c, Rng *r) {
    int a_rows = ta ? K : M, a_cols = ta ? M : K;
    int b_rows = tb ? N : K, b_cols = tb ? K : N;
    int lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
    float *A = make_stored(r, a_rows, a_cols, lda);
    float *B = make_stored(r, b_rows, b_cols, ldb);
    float *C = malloc(sizeof(float) * (size_t)M * ldc);
    float *C0 = malloc(sizeof(float) * (size_t)M * N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) {
            float v = j < N ? (nan_in_c ? NAN : 2.0f * rng_uniform(r) - 1.0f) : C_SENTINEL;
            C[i * ldc + j] = v;
            if (j < N) C0[i * N + j] = v;
        }
    /* dense op(A), op(B) */
    float *opA = malloc(sizeof(float) * (size_t)M * (K ? K : 1));
    float *opB = malloc(sizeof(float) * (size_t)(K ? K : 1) * N);
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) opA[i * K + k] = ta ? A[k * lda + i] : A[i * lda + k];
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) opB[k * N + j] = tb ? B[j * ldb + k] : B[k * ldb + j];
    double *want = malloc(sizeof(double) * (size_t)M * N);
    reference_gemm(M, N, K, alpha, opA, opB, beta, C0, want);

    sgemm_naive(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);

    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double got = C[i * ldc + j], w = want[i * N + j];
            /* Both sum in double; the only difference is the final rounding
             * to float (relative 6e-8), so 1e-6 relative is already loose. */
            if (!(fabs(got - w) <= 1e-6 * (1.0 + fabs(w))))
                fail_msg("ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g: C[%d,%d] = %.9g, want %.9g",
                         ta, tb, M, N, K, alpha, beta, i, j, got, w);
        }
        for (int j = N; j < ldc; j++)
            if (C[i * ldc + j] != C_SENTINEL)
                fail_msg("padding of C row %d column %d was written (%g)", i, j, C[i * ldc + j]);
    }
    free(A); free(B); free(C); free(C0); free(opA); free(opB); free(want);
}

static const int SIZES[] = {1, 3, 7, 17, 33};
#define N_SIZES 5

static void test_naive_all_shapes_and_transposes(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 1, 1);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int mi = 0; mi < N_SIZES; mi++)
                for (int ni = 0; ni < N_SIZES; ni++)
                    for (int ki = 0; ki < N_SIZES; ki++)
                        check_case(ta, tb, SIZES[mi], SIZES[ni], SIZES[ki], 0, 1.0f, 0.0f, 0, &r);
}

static void test_naive_strides_larger_than_width(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 2, 1);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int mi = 0; mi < N_SIZES; mi++)
                for (int ki = 0; ki < N_SIZES; ki++) {
                    check_case(ta, tb, SIZES[mi], 7, SIZES[ki], 5, 1.0f, 0.0f, 0, &r);
                    check_case(ta, tb, 17, SIZES[mi], SIZES[ki], 1, 1.0f, 1.0f, 0, &r);
                }
}

static void test_naive_alpha_beta(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 3, 1);
    const float alphas[] = {1.0f, -0.5f, 2.25f, 0.0f};
    const float betas[] = {0.0f, 1.0f, -1.5f, 0.3f};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++)
                    check_case(ta, tb, 7, 17, 3, 2, alphas[a], betas[b], 0, &r);
}

/* beta == 0: C's old contents are never read, so NaN there must vanish. */
static void test_naive_beta_zero_ignores_nan_in_c(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 4, 1);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int mi = 0; mi < N_SIZES; mi++)
                check_case(ta, tb, SIZES[mi], 33, 7, 3, 0.75f, 0.0f, 1, &r);
    /* and K == 0 with beta == 0 gives exact zeros, not NaN */
    float C[4] = {NAN, NAN, NAN, NAN};
    float dummy = 1.0f;
    sgemm_naive(0, 0, 2, 2, 0, 1.0f, &dummy, 1, &dummy, 2, 0.0f, C, 2);
    for (int i = 0; i < 4; i++) assert_true(C[i] == 0.0f);
}

/* A hand-worked example, so the test does not rely only on a second loop. */
static void test_naive_hand_example(void **state) {
    (void)state;
    const float A[6] = {1, 2, 3, 4, 5, 6};      /* [2,3] */
    const float B[6] = {7, 8, 9, 10, 11, 12};   /* [3,2] */
    float C[4] = {1, 1, 1, 1};
    sgemm_naive(0, 0, 2, 2, 3, 1.0f, A, 3, B, 2, 2.0f, C, 2);
    /* [1 2 3; 4 5 6] @ [7 8; 9 10; 11 12] = [58 64; 139 154], + 2 */
    assert_true(C[0] == 60.0f && C[1] == 66.0f && C[2] == 141.0f && C[3] == 156.0f);
    /* A^T @ A^T-like: A stored [3,2] read transposed = [1 3 5; 2 4 6] */
    sgemm_naive(1, 1, 2, 2, 3, 1.0f, A, 2, B, 3, 0.0f, C, 2);
    /* op(A) = [1 3 5; 2 4 6], op(B) = B stored [2,3] transposed = [7 10; 8 11; 9 12] */
    assert_true(C[0] == 76.0f && C[1] == 103.0f && C[2] == 100.0f && C[3] == 136.0f);
}

static void test_wrappers_and_dispatch(void **state) {
    (void)state;
    assert_int_equal(backend_select("naive"), 0);
    assert_int_equal(backend_current(), BACKEND_NAIVE);
    Rng r;
    rng_seed(&r, 5, 1);
    enum { M = 7, N = 17, K = 3 };
    float A[M * K], At[K * M], B[K * N], Bt[N * K], C[M * N], want[M * N], base[M * N];
    for (int i = 0; i < M * K; i++) A[i] = rng_uniform(&r) - 0.5f;
    for (int i = 0; i < K * N; i++) B[i] = rng_uniform(&r) - 0.5f;
    for (int i = 0; i < M * N; i++) base[i] = rng_uniform(&r) - 0.5f;
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) At[k * M + i] = A[i * K + k];
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) Bt[j * K + k] = B[k * N + j];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < K; k++) s += (double)A[i * K + k] * B[k * N + j];
            want[i * N + j] = (float)s;
        }
    for (int accumulate = 0; accumulate < 2; accumulate++) {
        for (int form = 0; form < 3; form++) {
            memcpy(C, base, sizeof C);
            if (form == 0) matmul(C, A, B, M, N, K, accumulate);
            if (form == 1) matmul_nt(C, A, Bt, M, N, K, accumulate);
            if (form == 2) matmul_tn(C, At, B, M, N, K, accumulate);
            for (int i = 0; i < M * N; i++) {
                float w = want[i] + (accumulate ? base[i] : 0.0f);
                if (fabsf(C[i] - w) > 1e-5f)
                    fail_msg("form %d accumulate %d: C[%d] = %g, want %g", form, accumulate, i, C[i], w);
            }
        }
    }
    /* sgemm on the naive backend is bit-identical to sgemm_naive */
    float C2[M * N];
    sgemm(0, 1, M, N, K, 0.5f, A, K, Bt, K, 0.0f, C, N);
    sgemm_naive(0, 1, M, N, K, 0.5f, A, K, Bt, K, 0.0f, C2, N);
    assert_memory_equal(C, C2, sizeof C);
}

static void test_backend_select(void **state) {
    (void)state;
    clear_error();
    assert_int_equal(backend_select("fast"), -1);
    assert_non_null(strstr(last_error(), "'fast'"));
    assert_non_null(strstr(last_error(), "naive, avx2, avx512, neon or auto"));

    int has = cpu_has_avx2_fma();
    int has512 = cpu_has_avx512f();
#if defined(__x86_64__) || defined(__i386__)
    /* CPUID as the compiler's own runtime sees it (it also checks OS support) */
    __builtin_cpu_init();
    int builtin = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    assert_int_equal(has, builtin);
    assert_int_equal(has512, builtin && __builtin_cpu_supports("avx512f"));
#else
    assert_int_equal(has, 0); /* no x86 kernels on another CPU */
    assert_int_equal(has512, 0);
#endif
    Backend widest = has512 ? BACKEND_AVX512 : has ? BACKEND_AVX2 : cpu_has_neon() ? BACKEND_NEON : BACKEND_NAIVE;

    clear_error();
    if (has) {
        assert_int_equal(backend_select("avx2"), 0);
        assert_int_equal(backend_current(), BACKEND_AVX2);
    } else {
        assert_int_equal(backend_select("avx2"), -1);
        assert_non_null(strstr(last_error(), "AVX2"));
    }
    clear_error();
    if (has512) {
        assert_int_equal(backend_select("avx512"), 0);
        assert_int_equal(backend_current(), BACKEND_AVX512);
    } else {
        assert_int_equal(backend_select("avx512"), -1);
        assert_non_null(strstr(last_error(), "AVX-512F"));
    }
    assert_int_equal(backend_select("auto"), 0);
    assert_int_equal(backend_current(), widest);

    /* NULL reads ATTN_BACKEND */
    setenv("ATTN_BACKEND", "naive", 1);
    assert_int_equal(backend_select(NULL), 0);
    assert_int_equal(backend_current(), BACKEND_NAIVE);
    setenv("ATTN_BACKEND", "bogus", 1);
    assert_int_equal(backend_select(NULL), -1);
    assert_non_null(strstr(last_error(), "ATTN_BACKEND"));
    assert_non_null(strstr(last_error(), "'bogus'"));
    unsetenv("ATTN_BACKEND");
    assert_int_equal(backend_select(NULL), 0);   /* default: auto */
    assert_int_equal(backend_current(), widest);

    assert_string_equal(backend_name(BACKEND_NAIVE), "naive");
    assert_string_equal(backend_name(BACKEND_AVX2), "avx2");
    assert_string_equal(backend_name(BACKEND_AVX512), "avx512");
    assert_string_equal(backend_name(BACKEND_NEON), "neon");
    assert_int_equal(backend_select("naive"), 0);
}

static void test_threads(void **state) {
    (void)state;
    if (!openmp_enabled()) {   /* make OMP=0: one thread, whatever is asked */
        threads_set(3);
        assert_int_equal(threads_current(), 1);
        threads_set(0);
        assert_int_equal(threads_current(), 1);
        return;
    }
    threads_set(3);
    assert_int_equal(threads_current(), 3);
    setenv("OMP_NUM_THREADS", "2", 1);
    threads_set(0);
    assert_int_equal(threads_current(), 2);
    unsetenv("OMP_NUM_THREADS");
    threads_set(-1);
    assert_true(threads_current() >= 1);
    threads_set(1);
    assert_int_equal(threads_current(), 1);
}

/* A big product crosses the threading threshold: 1 and 2 threads give the
 * same bits, since each output element is one serial double sum. */
static void test_naive_threads_deterministic(void **state) {
    (void)state;
    skip_without_threads();
    threads_model_set(0);   /* split even small work between the threads: their bits are compared */
    enum { M = 67, N = 65, K = 129 };
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C1 = malloc(sizeof(float) * M * N), *C2 = malloc(sizeof(float) * M * N);
    Rng r;
    rng_seed(&r, 6, 1);
    for (int i = 0; i < M * K; i++) A[i] = rng_normal(&r);
    for (int i = 0; i < K * N; i++) B[i] = rng_normal(&r);
    threads_set(1);
    sgemm_naive(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C1, N);
    threads_set(2);
    sgemm_naive(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C2, N);
    threads_set(1);
    assert_memory_equal(C1, C2, sizeof(float) * M * N);
    free(A); free(B); free(C1); free(C2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_naive_hand_example),
        cmocka_unit_test(test_naive_all_shapes_and_transposes),
        cmocka_unit_test(test_naive_strides_larger_than_width),
        cmocka_unit_test(test_naive_alpha_beta),
        cmocka_unit_test(test_naive_beta_zero_ignores_nan_in_c),
        cmocka_unit_test(test_wrappers_and_dispatch),
        cmocka_unit_test(test_backend_select),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_naive_threads_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
