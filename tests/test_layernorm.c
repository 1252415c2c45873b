/* test_layernorm.c - the SIMD LayerNorm of this CPU (AVX2 on x86, NEON on
 * AArch64) against the naive one (layernorm.h).
 *
 * For forward and backward:
 *   - the error bounds stated in layernorm_avx2.c (the NEON form gives the
 *     AVX2 bits, so the same bounds), element by element, on
 *     shapes with D = 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 257, 768
 *     (D not a multiple of 8 exercises the row tails), rows centred at 0, 3
 *     and -50, on pointers one float past an aligned address, with a
 *     sentinel after every output array (nothing written past the end);
 *   - constant rows (variance 0): out = beta exactly, rstd = 1/sqrt(eps);
 *   - rows far from 0 (x = 1e4 + noise, where a one-pass float variance is
 *     shown to fail): the normalized rows have mean 0 and variance
 *     var / (var + eps), and the bounds hold;
 *   - backward accumulates (+=), skips NULL gradients without changing the
 *     others, and dbeta has the naive bits;
 *   - the dispatching layernorm_forward/backward (layers.h) give the naive
 *     bits on the naive backend, the avx2 bits on avx2 and avx512, the neon
 *     bits on neon;
 *   - the same bits as AVX2: the outputs of the SIMD form on rows made by
 *     integer arithmetic (odd lengths, unaligned) are hashed; the hashes
 *     were taken from the AVX2 form on x86, so the NEON form giving them
 *     means the AVX2 bits, and the AVX2 form giving them means its bits did
 *     not change.
 * The SIMD tests skip on an x86 CPU without AVX2/FMA. Gradients against
 * finite differences: tests/test_layers.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "float_bits.h"
#include "kernels/layernorm.h"
#include "nn/layers.h"
#include "kernels/matmul.h"
#include "util/rng.h"

static const float SENTINEL = -12345.0f;
static const double U = 5.9604644775390625e-08;   /* 2^-24, the float unit roundoff */
static const float EPS = 1e-5f;

typedef void (*Forward)(float *out, float *mean, float *rstd, const float *x, const float *gamma, const float *beta,
                        int N, int D, float eps);
typedef void (*Backward)(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                         const float *rstd, const float *x, const float *gamma, int N, int D);

/* The SIMD forms of this CPU: NEON on AArch64, AVX2 on x86 (0 without). */
static int simd_forms(Forward *forward, Backward *backward) {
#if defined(__aarch64__)
    *forward = layernorm_forward_neon;
    *backward = layernorm_backward_neon;
    return 1;
#else
    *forward = layernorm_forward_avx2;
    *backward = layernorm_backward_avx2;
    return cpu_has_avx2_fma();
#endif
}

static int skip_without_simd(void) {
    Forward forward;
    Backward backward;
    if (simd_forms(&forward, &backward)) return 0;
    printf("  (no AVX2/FMA on this CPU: skipped)\n");
    return 1;
}

/* n floats one past a 32-byte boundary, followed by one sentinel; free with
 * free(p - 1). */
static float *unaligned(size_t n) {
    size_t bytes = ((n + 2) * sizeof(float) + 31) / 32 * 32;
    float *base = aligned_alloc(32, bytes);
    assert_non_null(base);
    for (size_t i = 0; i < n + 2; i++) base[i] = SENTINEL;
    return base + 1;
}

static void fill(float *x, size_t n, float center, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = center + scale * (2.0f * rng_uniform(r) - 1.0f);
}

/* One problem: inputs, and the outputs of both implementations. */
typedef struct {
    int N, D;
    float *x, *gamma, *beta, *dout;
    float *out[2], *mean[2], *rstd[2];            /* [0] naive, [1] SIMD */
    float *dx[2], *dgamma[2], *dbeta[2];
} Problem;

static Problem problem_new(int N, int D, float center, float scale, Rng *r) {
    Problem p = {N, D, 0, 0, 0, 0, {0}, {0}, {0}, {0}, {0}, {0}};
    size_t nd = (size_t)N * D;
    p.x = unaligned(nd);
    p.gamma = unaligned((size_t)D);
    p.beta = unaligned((size_t)D);
    p.dout = unaligned(nd);
    fill(p.x, nd, center, scale, r);
    fill(p.gamma, (size_t)D, 0.0f, 2.0f, r);
    fill(p.beta, (size_t)D, 0.0f, 1.0f, r);
    fill(p.dout, nd, 0.0f, 1.0f, r);
    for (int k = 0; k < 2; k++) {
        p.out[k] = unaligned(nd);
        p.mean[k] = unaligned((size_t)N);
        p.rstd[k] = unaligned((size_t)N);
        p.dx[k] = unaligned(nd);
        p.dgamma[k] = unaligned((size_t)D);
        p.dbeta[k] = unaligned((size_t)D);
        memset(p.dx[k], 0, nd * sizeof(float));
        memset(p.dgamma[k], 0, (size_t)D * sizeof(float));
        memset(p.dbeta[k], 0, (size_t)D * sizeof(float));
    }
    return p;
}

static void problem_free(Problem *p) {
    free(p->x - 1); free(p->gamma - 1); free(p->beta - 1); free(p->dout - 1);
    for (int k = 0; k < 2; k++) {
        free(p->out[k] - 1); free(p->mean[k] - 1); free(p->rstd[k] - 1);
        free(p->dx[k] - 1); free(p->dgamma[k] - 1); free(p->dbeta[k] - 1);
    }
}

/* Both forwards, then both backwards from the SAME saved statistics (the
 * naive ones), so the backward comparison measures the backward alone. */
static void run_both(Problem *p) {
    Forward simd_forward;
    Backward simd_backward;
    assert_true(simd_forms(&simd_forward, &simd_backward));
    layernorm_forward_naive(p->out[0], p->mean[0], p->rstd[0], p->x, p->gamma, p->beta, p->N, p->D, EPS);
    simd_forward(p->out[1], p->mean[1], p->rstd[1], p->x, p->gamma, p->beta, p->N, p->D, EPS);
    layernorm_backward_naive(p->dx[0], p->dgamma[0], p->dbeta[0], p->dout, p->mean[0], p->rstd[0], p->x,
                             p->gamma, p->N, p->D);
    simd_backward(p->dx[1], p->dgamma[1], p->dbeta[1], p->dout, p->mean[0], p->rstd[0], p->x, p->gamma, p->N,
                  p->D);
}

/* Nothing written past the end of any output. */
static void expect_sentinels(const Problem *p) {
    size_t nd = (size_t)p->N * p->D;
    for (int k = 0; k < 2; k++) {
        assert_true(p->out[k][nd] == SENTINEL && p->out[k][-1] == SENTINEL);
        assert_true(p->mean[k][p->N] == SENTINEL && p->rstd[k][p->N] == SENTINEL);
        assert_true(p->dx[k][nd] == SENTINEL && p->dgamma[k][p->D] == SENTINEL);
        assert_true(p->dbeta[k][p->D] == SENTINEL);
    }
}

/* The row's exact statistics (double, two passes) for the bounds. */
static void reference_row(const float *x, int D, double *mean, double *rstd, double *max_abs) {
    double sum = 0.0, squares = 0.0, biggest = 0.0;
    for (int d = 0; d < D; d++) {
        sum += x[d];
        if (fabs(x[d]) > biggest) biggest = fabs(x[d]);
    }
    *mean = sum / D;
    for (int d = 0; d < D; d++) squares += (x[d] - *mean) * (x[d] - *mean);
    *rstd = 1.0 / sqrt(squares / D + EPS);
    *max_abs = biggest;
}

/* Forward: the bound of layernorm_forward_avx2, and mean/rstd within 1 ulp.
 * Returns the largest fraction of its bound any element used. */
static double check_forward_bound(const Problem *p) {
    double worst = 0.0;
    for (int n = 0; n < p->N; n++) {
        const float *x = p->x + (size_t)n * p->D;
        double mean, rstd, max_abs;
        reference_row(x, p->D, &mean, &rstd, &max_abs);
        assert_true(fabs((double)p->mean[1][n] - p->mean[0][n]) <= ulp_of(p->mean[0][n]));
        assert_true(fabs((double)p->rstd[1][n] - p->rstd[0][n]) <= ulp_of(p->rstd[0][n]));
        for (int d = 0; d < p->D; d++) {
            size_t i = (size_t)n * p->D + d;
            double xhat = (x[d] - mean) * rstd, gamma = p->gamma[d];
            double bound = 8.0 * U * (fabs(xhat * gamma) + fabs(p->beta[d])) +
                           (p->D + 16) * ldexp(1.0, -50) * max_abs * rstd * fabs(gamma);
            double diff = fabs((double)p->out[1][i] - p->out[0][i]);
            if (bound > 0.0 && diff / bound > worst) worst = diff / bound;
            if (!(diff <= bound))
                fail_msg("forward N=%d D=%d [%d,%d]: simd %.9g naive %.9g, |diff| %.3g > bound %.3g", p->N, p->D,
                         n, d, (double)p->out[1][i], (double)p->out[0][i], diff, bound);
        }
    }
    return worst;
}

/* Backward: the bounds of layernorm_backward_avx2 (from zeroed gradients). */
static double check_backward_bound(const Problem *p) {
    double worst = 0.0;
    int N = p->N, D = p->D;
    double *dgamma_scale = calloc((size_t)D, sizeof(double));
    for (int n = 0; n < N; n++) {
        const float *x = p->x + (size_t)n * D, *dout = p->dout + (size_t)n * D;
        double mean = p->mean[0][n], rstd = p->rstd[0][n];
        double mean_abs_g = 0.0, mean_abs_g_xhat = 0.0;
        for (int d = 0; d < D; d++) {
            double xhat = (x[d] - mean) * rstd, g = (double)dout[d] * p->gamma[d];
            mean_abs_g += fabs(g) / D;
            mean_abs_g_xhat += fabs(g * xhat) / D;
            dgamma_scale[d] += fabs(dout[d] * xhat);
        }
        for (int d = 0; d < D; d++) {
            size_t i = (size_t)n * D + d;
            double xhat = (x[d] - mean) * rstd, g = (double)dout[d] * p->gamma[d];
            double bound = 8.0 * U * rstd * (fabs(g) + mean_abs_g + fabs(xhat) * mean_abs_g_xhat) +
                           2.0 * U * fabs(p->dx[0][i]);
            double diff = fabs((double)p->dx[1][i] - p->dx[0][i]);
            if (bound > 0.0 && diff / bound > worst) worst = diff / bound;
            if (!(diff <= bound))
                fail_msg("dx N=%d D=%d [%d,%d]: simd %.9g naive %.9g, |diff| %.3g > bound %.3g", N, D, n, d,
                         (double)p->dx[1][i], (double)p->dx[0][i], diff, bound);
        }
    }
    for (int d = 0; d < D; d++) {
        double bound = (2.0 * N + 4.0) * U * dgamma_scale[d];
        double diff = fabs((double)p->dgamma[1][d] - p->dgamma[0][d]);
        if (!(diff <= bound))
            fail_msg("dgamma N=%d D=%d [%d]: simd %.9g naive %.9g, |diff| %.3g > bound %.3g", N, D, d,
                     (double)p->dgamma[1][d], (double)p->dgamma[0][d], diff, bound);
    }
    assert_memory_equal(p->dbeta[1], p->dbeta[0], sizeof(float) * (size_t)D);
    free(dgamma_scale);
    return worst;
}

static const int LENGTHS[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 257, 768};
enum { N_LENGTHS = sizeof LENGTHS / sizeof LENGTHS[0] };

static void test_bounds_on_shapes(void **state) {
    (void)state;
    if (skip_without_simd()) return;
    Rng r;
    rng_seed(&r, 61, 0);
    const float centers[3][2] = {{0.0f, 1.0f}, {3.0f, 0.5f}, {-50.0f, 10.0f}};
    double worst_forward = 0.0, worst_backward = 0.0;
    for (int l = 0; l < N_LENGTHS; l++)
        for (int c = 0; c < 3; c++)
            for (int N = 1; N <= 5; N += 4) {
                Problem p = problem_new(N, LENGTHS[l], centers[c][0], centers[c][1], &r);
                run_both(&p);
                double f = check_forward_bound(&p), b = check_backward_bound(&p);
                worst_forward = f > worst_forward ? f : worst_forward;
                worst_backward = b > worst_backward ? b : worst_backward;
                expect_sentinels(&p);
                problem_free(&p);
            }
    printf("  forward used at most %.2f of its bound, dx %.2f\n", worst_forward, worst_backward);
}

/* Variance 0: every x equals the mean exactly, so xhat = 0, out = beta
 * exactly and rstd = 1/sqrt(eps); D = 1 is always such a row, and its dx
 * is exactly 0 (g - mean(g) = 0 with one column). */
static void test_constant_rows(void **state) {
    (void)state;
    if (skip_without_simd()) return;
    Rng r;
    rng_seed(&r, 62, 0);
    const float values[] = {0.0f, 3.5f, -1e4f, 1e-30f, 7e30f};
    const int lengths[] = {1, 7, 8, 33};
    for (int l = 0; l < 4; l++)
        for (int v = 0; v < 5; v++) {
            int N = 2, D = lengths[l];
            Problem p = problem_new(N, D, 0.0f, 1.0f, &r);
            for (int i = 0; i < N * D; i++) p.x[i] = values[v];
            run_both(&p);
            for (int k = 0; k < 2; k++)
                for (int n = 0; n < N; n++) {
                    assert_memory_equal(p.out[k] + n * D, p.beta, sizeof(float) * D);
                    assert_true(p.mean[k][n] == values[v]);
                    assert_float_equal(p.rstd[k][n], 1.0 / sqrt((double)EPS), ulp_of(p.rstd[k][n]));
                }
            check_backward_bound(&p);
            if (D == 1)
                for (int k = 0; k < 2; k++) assert_true(p.dx[k][0] == 0.0f && p.dx[k][1] == 0.0f);
            expect_sentinels(&p);
            problem_free(&p);
        }
}

/* Rows 1e4 + noise of size 0.1: a one-pass float variance E[x^2] - E[x]^2
 * fails here (shown first, so the case is known to be hard), the two-pass
 * statistics do not. */
static void test_rows_far_from_zero(void **state) {
    (void)state;
    if (skip_without_simd()) return;
    Rng r;
    rng_seed(&r, 63, 0);
    const int lengths[] = {64, 512, 1000};
    for (int l = 0; l < 3; l++) {
        int N = 3, D = lengths[l];
        Problem p = problem_new(N, D, 1e4f, 0.1f, &r);
        for (int d = 0; d < D; d++) {   /* gamma = 1, beta = 0: out = xhat */
            p.gamma[d] = 1.0f;
            p.beta[d] = 0.0f;
        }
        /* the one-pass float variance of row 0 against the true one */
        float sum = 0.0f, sum_squares = 0.0f;
        for (int d = 0; d < D; d++) {
            sum += p.x[d];
            sum_squares += p.x[d] * p.x[d];
        }
        float one_pass = sum_squares / D - (sum / D) * (sum / D);
        double mean, rstd, max_abs;
        reference_row(p.x, D, &mean, &rstd, &max_abs);
        double var = 1.0 / (rstd * rstd) - EPS;
        assert_true(fabs(one_pass - var) > 0.5 * var);   /* the naive formula is useless here */

        run_both(&p);
        check_forward_bound(&p);
        check_backward_bound(&p);
        for (int k = 0; k < 2; k++)
            for (int n = 0; n < N; n++) {
                reference_row(p.x + (size_t)n * D, D, &mean, &rstd, &max_abs);
                var = 1.0 / (rstd * rstd) - EPS;
                double out_sum = 0.0, out_squares = 0.0;
                for (int d = 0; d < D; d++) {
                    out_sum += p.out[k][n * D + d];
                    out_squares += (double)p.out[k][n * D + d] * p.out[k][n * D + d];
                }
                assert_true(fabs(out_sum / D) < 1e-5);
                assert_float_equal(out_squares / D, var / (var + EPS), 1e-5);
            }
        expect_sentinels(&p);
        problem_free(&p);
    }
}

/* Backward adds to what is there, and a NULL gradient is skipped without
 * changing the others, for both implementations. */
static void test_backward_accumulates_and_skips_null(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 64, 0);
    int N = 3, D = 19;
    Forward simd_forward;
    Backward simd_backward;
    int have_simd = simd_forms(&simd_forward, &simd_backward);
    Problem p = problem_new(N, D, 1.0f, 2.0f, &r);
    layernorm_forward_naive(p.out[0], p.mean[0], p.rstd[0], p.x, p.gamma, p.beta, N, D, EPS);
    for (int k = 0; k < 1 + have_simd; k++) {
        Backward backward = k ? simd_backward : layernorm_backward_naive;
        float dx[3 * 19], dgamma[19], dbeta[19];
        memset(dx, 0, sizeof dx); memset(dgamma, 0, sizeof dgamma); memset(dbeta, 0, sizeof dbeta);
        backward(dx, dgamma, dbeta, p.dout, p.mean[0], p.rstd[0], p.x, p.gamma, N, D);
        /* every subset of the three gradients */
        for (int mask = 0; mask < 8; mask++) {
            float sdx[3 * 19], sdgamma[19], sdbeta[19];
            memset(sdx, 0, sizeof sdx); memset(sdgamma, 0, sizeof sdgamma); memset(sdbeta, 0, sizeof sdbeta);
            backward(mask & 1 ? sdx : NULL, mask & 2 ? sdgamma : NULL, mask & 4 ? sdbeta : NULL, p.dout, p.mean[0],
                     p.rstd[0], p.x, p.gamma, N, D);
            if (mask & 1) assert_memory_equal(sdx, dx, sizeof dx);
            if (mask & 2) assert_memory_equal(sdgamma, dgamma, sizeof dgamma);
            if (mask & 4) assert_memory_equal(sdbeta, dbeta, sizeof dbeta);
        }
        /* += : from a start of 1, a second call gives start + the gradient */
        float adx[3 * 19], adgamma[19], adbeta[19];
        for (int i = 0; i < N * D; i++) adx[i] = 1.0f;
        for (int d = 0; d < D; d++) adgamma[d] = adbeta[d] = 1.0f;
        backward(adx, adgamma, adbeta, p.dout, p.mean[0], p.rstd[0], p.x, p.gamma, N, D);
        for (int i = 0; i < N * D; i++) assert_float_equal(adx[i], 1.0f + dx[i], 1e-5 * (1.0 + fabs(dx[i])));
        for (int d = 0; d < D; d++) {
            assert_float_equal(adgamma[d], 1.0f + dgamma[d], 1e-5 * (1.0 + fabs(dgamma[d])));
            assert_float_equal(adbeta[d], 1.0f + dbeta[d], 1e-5 * (1.0 + fabs(dbeta[d])));
        }
    }
    problem_free(&p);
}

/* mean and rstd may be NULL (no backward follows): the same out. */
static void test_forward_without_saved_statistics(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 65, 0);
    int N = 4, D = 13;
    Forward simd_forward;
    Backward simd_backward;
    int have_simd = simd_forms(&simd_forward, &simd_backward);
    Problem p = problem_new(N, D, 0.5f, 1.0f, &r);
    for (int k = 0; k < 1 + have_simd; k++) {
        Forward forward = k ? simd_forward : layernorm_forward_naive;
        float out[4 * 13];
        forward(p.out[k], p.mean[k], p.rstd[k], p.x, p.gamma, p.beta, N, D, EPS);
        forward(out, NULL, NULL, p.x, p.gamma, p.beta, N, D, EPS);
        assert_memory_equal(out, p.out[k], sizeof out);
    }
    problem_free(&p);
}

/* layernorm_forward/backward (layers.h) follow the backend. */
static void test_dispatch(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 66, 0);
    int N = 3, D = 21;
    size_t nd = (size_t)N * D;
    Problem p = problem_new(N, D, 0.0f, 1.0f, &r);
    float *out = calloc(nd, sizeof(float)), *mean = calloc((size_t)N, sizeof(float));
    float *rstd = calloc((size_t)N, sizeof(float)), *dx = calloc(nd, sizeof(float));
    float *dgamma = calloc((size_t)D, sizeof(float)), *dbeta = calloc((size_t)D, sizeof(float));
    /* avx512 has no LayerNorm of its own: it must give the AVX2 kernel's bits. */
    Forward simd_forward;
    Backward simd_backward;
    int have_simd = simd_forms(&simd_forward, &simd_backward);
#if defined(__aarch64__)
    const char *backends[3] = {"naive", "neon", NULL};
    int n_backends = 1 + have_simd;
#else
    const char *backends[3] = {"naive", "avx2", "avx512"};
    int n_backends = cpu_has_avx512f() ? 3 : 1 + have_simd;
#endif
    for (int k = 0; k < n_backends; k++) {
        assert_int_equal(backend_select(backends[k]), 0);
        memset(dx, 0, nd * sizeof(float));
        memset(dgamma, 0, (size_t)D * sizeof(float));
        memset(dbeta, 0, (size_t)D * sizeof(float));
        layernorm_forward(out, mean, rstd, p.x, p.gamma, p.beta, N, D, EPS);
        layernorm_backward(dx, dgamma, dbeta, p.dout, mean, rstd, p.x, p.gamma, N, D);
        if (k == 0) {
            layernorm_forward_naive(p.out[0], p.mean[0], p.rstd[0], p.x, p.gamma, p.beta, N, D, EPS);
            layernorm_backward_naive(p.dx[0], p.dgamma[0], p.dbeta[0], p.dout, p.mean[0], p.rstd[0], p.x, p.gamma,
                                     N, D);
        } else {
            simd_forward(p.out[0], p.mean[0], p.rstd[0], p.x, p.gamma, p.beta, N, D, EPS);
            memset(p.dx[0], 0, nd * sizeof(float));
            memset(p.dgamma[0], 0, (size_t)D * sizeof(float));
            memset(p.dbeta[0], 0, (size_t)D * sizeof(float));
            simd_backward(p.dx[0], p.dgamma[0], p.dbeta[0], p.dout, p.mean[0], p.rstd[0], p.x, p.gamma, N, D);
        }
        assert_memory_equal(out, p.out[0], nd * sizeof(float));
        assert_memory_equal(mean, p.mean[0], (size_t)N * sizeof(float));
        assert_memory_equal(rstd, p.rstd[0], (size_t)N * sizeof(float));
        assert_memory_equal(dx, p.dx[0], nd * sizeof(float));
        assert_memory_equal(dgamma, p.dgamma[0], (size_t)D * sizeof(float));
        assert_memory_equal(dbeta, p.dbeta[0], (size_t)D * sizeof(float));
    }
    assert_int_equal(backend_select(NULL), 0);
    free(out); free(mean); free(rstd); free(dx); free(dgamma); free(dbeta);
    problem_free(&p);
}

/* Integer-made values (no libm, no Rng: the same on every CPU) of size about
 * scale around center. */
static void fill_integer(float *x, size_t n, int seed, float center, float scale) {
    for (size_t i = 0; i < n; i++) {
        long k = (long)i + 131L * seed;
        x[i] = center + scale * (float)((k * 7919) % 601 - 300) / 300.0f;
    }
}

/* The AVX2 forms' hashes of the problems below (forward: out, mean, rstd;
 * backward: dx, dgamma, dbeta), printed by this test on x86. */
static const uint64_t EXPECTED_FORWARD = 0x19c3d4720ded04d3ull, EXPECTED_BACKWARD = 0x0735e81f0ea58378ull;

/* The SIMD form's bits over lengths 1..40 and 64, 100, 257 (every tail of
 * the 8-float sums and of the 4- and 8-float element passes), rows centred
 * at 0 and far from 0, on pointers one float past an aligned address,
 * backward adding to nonzero gradients: hashed, and the hashes compared
 * with the AVX2 form's. */
static void test_same_bits_as_avx2(void **state) {
    (void)state;
    if (skip_without_simd()) return;
    Forward simd_forward;
    Backward simd_backward;
    simd_forms(&simd_forward, &simd_backward);
    static const float centers[2][2] = {{0.0f, 1.5f}, {-300.0f, 0.25f}};
    uint64_t h_forward = 0xCBF29CE484222325ull, h_backward = 0xCBF29CE484222325ull;
    static const int longer[3] = {64, 100, 257};
    for (int l = 0; l < 43; l++) {
        const int D = l < 40 ? l + 1 : longer[l - 40];
        for (int c = 0; c < 2; c++) {
            const int N = 3;
            const size_t nd = (size_t)N * D;
            float *x = unaligned(nd), *gamma = unaligned((size_t)D), *beta = unaligned((size_t)D);
            float *dout = unaligned(nd), *out = unaligned(nd), *mean = unaligned(N), *rstd = unaligned(N);
            float *dx = unaligned(nd), *dgamma = unaligned((size_t)D), *dbeta = unaligned((size_t)D);
            fill_integer(x, nd, D + c, centers[c][0], centers[c][1]);
            fill_integer(gamma, (size_t)D, 2 * D + 1, 1.0f, 0.5f);
            fill_integer(beta, (size_t)D, 3 * D + 2, 0.0f, 0.25f);
            fill_integer(dout, nd, 5 * D + 3, 0.0f, 1.0f);
            fill_integer(dx, nd, 7 * D + 4, 0.0f, 0.125f);
            fill_integer(dgamma, (size_t)D, 11 * D + 5, 0.0f, 0.5f);
            fill_integer(dbeta, (size_t)D, 13 * D + 6, 0.0f, 0.5f);
            simd_forward(out, mean, rstd, x, gamma, beta, N, D, EPS);
            simd_backward(dx, dgamma, dbeta, dout, mean, rstd, x, gamma, N, D);
            assert_true(out[nd] == SENTINEL && dx[nd] == SENTINEL && dgamma[D] == SENTINEL && dbeta[D] == SENTINEL);
            h_forward = hash_floats(hash_floats(hash_floats(h_forward, out, nd), mean, N), rstd, N);
            h_backward = hash_floats(hash_floats(hash_floats(h_backward, dx, nd), dgamma, D), dbeta, D);
            float *all[] = {x, gamma, beta, dout, out, mean, rstd, dx, dgamma, dbeta};
            for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) free(all[k] - 1);
        }
    }
    printf("  forward hash 0x%016llxull, backward 0x%016llxull\n", (unsigned long long)h_forward,
           (unsigned long long)h_backward);
    if (EXPECTED_FORWARD != 0) assert_true(h_forward == EXPECTED_FORWARD);
    if (EXPECTED_BACKWARD != 0) assert_true(h_backward == EXPECTED_BACKWARD);
}

/* N = 0 writes nothing. */
static void test_no_rows(void **state) {
    (void)state;
    float x[1] = {1.0f}, gamma[1] = {1.0f}, beta[1] = {0.0f}, out[1] = {SENTINEL};
    float mean[1] = {SENTINEL}, rstd[1] = {SENTINEL}, dx[1] = {SENTINEL};
    layernorm_forward_naive(out, mean, rstd, x, gamma, beta, 0, 1, EPS);
    layernorm_backward_naive(dx, NULL, NULL, x, mean, rstd, x, gamma, 0, 1);
    Forward simd_forward;
    Backward simd_backward;
    if (simd_forms(&simd_forward, &simd_backward)) {
        simd_forward(out, mean, rstd, x, gamma, beta, 0, 1, EPS);
        simd_backward(dx, NULL, NULL, x, mean, rstd, x, gamma, 0, 1);
    }
    assert_true(out[0] == SENTINEL && mean[0] == SENTINEL && rstd[0] == SENTINEL && dx[0] == SENTINEL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_on_shapes),
        cmocka_unit_test(test_constant_rows),
        cmocka_unit_test(test_rows_far_from_zero),
        cmocka_unit_test(test_backward_accumulates_and_skips_null),
        cmocka_unit_test(test_forward_without_saved_statistics),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_same_bits_as_avx2),
        cmocka_unit_test(test_no_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
