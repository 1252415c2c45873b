/* layernorm_avx2.c - LayerNorm forward and backward, 8 floats at a time (AVX2 + FMA).
 *
 * Compiled with -mavx2 -mfma (the Makefile rule for *_avx2.c); reached only
 * through layers.c when the avx2 backend is selected (CPUID checked).
 *
 * The same passes over each row as the specification (layernorm.c), with
 * one choice that decides the accuracy: the row SUMS stay in double.
 * In float, each of the 8 lanes of a sum over D = 512 numbers near 1e4
 * adds 64 of them at a spacing (ulp) of up to 0.06, and the mean can end
 * up 0.03 off: a third of a standard deviation if the row is 1e4 + noise
 * of size 0.1, and every normalized value shifts by that much. In double (each 8 floats converted into two vectors of 4
 * doubles, which costs two conversions and one more add) the statistics
 * agree with the naive ones to about 1e-15 for any D, and the error bounds
 * below do not grow with D except through that tiny term. The per-element
 * work (centering, scaling, the gradients) is in float.
 *
 * Error bounds against the naive functions, u = 2^-24 (the float unit
 * roundoff), are stated at each function with how they arise, and checked
 * by tests/test_layernorm.c on many shapes, constant rows and rows far from
 * 0. Row tails (D not a multiple of 8): the sums take the last D mod 8
 * floats one at a time, the writing passes a masked load and a store of
 * only those lanes (lanes_avx2.h: nothing read or written past the row). */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#include "kernels/lanes_avx2.h"
#include "kernels/layernorm.h"

/* The sum of the 4 lanes of a double vector. */
static double sum4(__m256d v) {
    double lanes[4];
    _mm256_storeu_pd(lanes, v);
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

/* first += lanes 0-3 of v, last += lanes 4-7, in double (exact conversions). */
static void accumulate8(__m256d *first, __m256d *last, __m256 v) {
    *first = _mm256_add_pd(*first, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    *last = _mm256_add_pd(*last, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

/* first += (lanes 0-3 of x - mean)^2, last += (lanes 4-7 - mean)^2, in double. */
static void accumulate_squares8(__m256d *first, __m256d *last, __m256 x, __m256d mean) {
    __m256d centered_first = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), mean);
    __m256d centered_last = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)), mean);
    *first = _mm256_fmadd_pd(centered_first, centered_first, *first);
    *last = _mm256_fmadd_pd(centered_last, centered_last, *last);
}

/* x[D] -> its mean and biased variance, two passes, sums in double. */
static void row_statistics(const float *x, int D, double *mean, double *var) {
    __m256d sum_first = _mm256_setzero_pd(), sum_last = _mm256_setzero_pd();
    int d = 0;
    for (; d + 8 <= D; d += 8) accumulate8(&sum_first, &sum_last, _mm256_loadu_ps(x + d));
    double sum = sum4(_mm256_add_pd(sum_first, sum_last));
    for (; d < D; d++) sum += x[d];
    double row_mean = sum / D;

    __m256d squares_first = _mm256_setzero_pd(), squares_last = _mm256_setzero_pd();
    const __m256d mean4 = _mm256_set1_pd(row_mean);
    for (d = 0; d + 8 <= D; d += 8)
        accumulate_squares8(&squares_first, &squares_last, _mm256_loadu_ps(x + d), mean4);
    double squares = sum4(_mm256_add_pd(squares_first, squares_last));
    for (; d < D; d++) squares += ((double)x[d] - row_mean) * ((double)x[d] - row_mean);
    *mean = row_mean;
    *var = squares / D;
}

/* x[N,D], gamma[D], beta[D] -> out[N,D], mean[N], rstd[N] (mean, rstd may be NULL).
 *
 * out = ((x - mean_high) - mean_low) * rstd * gamma + beta, where the double
 * mean is split into two floats, mean_high + mean_low, so that centering a
 * row far from 0 does not lose the mean's low digits (x - mean_high is
 * exact when x is near the mean, by Sterbenz's lemma).
 *
 * Error, per element, against the naive result (xhat, rstd: the row's, D: its length):
 *   |out_avx2 - out_naive| <= 8u (|xhat gamma| + |beta|) + (D + 16) 2^-50 max_j|x_j| rstd |gamma|
 * The first term is the float work: centering (2 roundings), rstd rounded
 * to float, the product, the fma, and the naive result's own rounding,
 * about 6u in all. The second is the double statistics: the two sums of
 * the row differ in order (at most D 2^-52 max|x| apart), and mean_low is
 * itself rounded (u^2 |mean|); for ordinary rows it is far below the first.
 * mean[n], rstd[n]: within 1 ulp of the naive ones (both round double
 * statistics that agree to ~1e-15). */
void layernorm_forward_avx2(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                            const float *beta, int N, int D, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x_row = x + (size_t)n * D;
        float *out_row = out + (size_t)n * D;
        double row_mean, row_var;
        row_statistics(x_row, D, &row_mean, &row_var);
        double row_rstd = 1.0 / sqrt(row_var + eps);
        float mean_high_f = (float)row_mean;
        const __m256 mean_high = _mm256_set1_ps(mean_high_f);
        const __m256 mean_low = _mm256_set1_ps((float)(row_mean - mean_high_f));
        const __m256 rstd8 = _mm256_set1_ps((float)row_rstd);
        int d = 0;
        for (; d + 8 <= D; d += 8) {
            __m256 centered = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x_row + d), mean_high), mean_low);
            __m256 xhat = _mm256_mul_ps(centered, rstd8);
            _mm256_storeu_ps(out_row + d, _mm256_fmadd_ps(xhat, _mm256_loadu_ps(gamma + d), _mm256_loadu_ps(beta + d)));
        }
        if (d < D) {
            __m256i mask = first_lanes(D - d);
            __m256 centered = _mm256_sub_ps(_mm256_sub_ps(_mm256_maskload_ps(x_row + d, mask), mean_high), mean_low);
            __m256 xhat = _mm256_mul_ps(centered, rstd8);
            store_first_lanes(out_row + d,
                              _mm256_fmadd_ps(xhat, _mm256_maskload_ps(gamma + d, mask),
                                              _mm256_maskload_ps(beta + d, mask)),
                              D - d);
        }
        if (mean) mean[n] = mean_high_f;
        if (rstd) rstd[n] = (float)row_rstd;
    }
}

/* dout[N,D] -> dx[N,D] +=, dgamma[D] +=, dbeta[D] += (any may be NULL).
 * Per row, with xhat = (x - mean) rstd and g = dout gamma in float:
 *   pass 1: sum_g and sum_g_xhat in double; dgamma += dout xhat, dbeta += dout;
 *   pass 2: dx += rstd (g - sum_g / D - xhat sum_g_xhat / D).
 *
 * Error against the naive backward, given the same saved mean and rstd:
 *   dx:     |dx_avx2 - dx_naive| <= 8u rstd (|g| + mean_j|g_j| + |xhat| mean_j|g_j xhat_j|) + 2u |dx|
 *           Each of the three terms carries a few float roundings (xhat 2,
 *           g 1, the products and the fma); the sums themselves are in double.
 *           It is a bound on the terms, not on dx: dx can cancel to near 0
 *           (dout = constant gives dx = 0 exactly in exact arithmetic).
 *           2u |dx|: adding to the incoming dx (one rounding here, two in naive).
 *   dgamma: |dgamma_avx2 - dgamma_naive| <= (2N + 4) u sum_n |dout xhat|
 *           (from a zero start: both add the N rows in the same order in float;
 *           each row's term differs by ~3u, and each addition may round apart).
 *   dbeta:  the same bits (the same float additions in the same order). */
void layernorm_backward_avx2(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                             const float *rstd, const float *x, const float *gamma, int N, int D) {
    for (int n = 0; n < N; n++) {
        const float *x_row = x + (size_t)n * D, *dout_row = dout + (size_t)n * D;
        const __m256 mean8 = _mm256_set1_ps(mean[n]), rstd8 = _mm256_set1_ps(rstd[n]);

        /* pass 1: the two row sums (double), and the parameter gradients */
        __m256d sum_g_first = _mm256_setzero_pd(), sum_g_last = _mm256_setzero_pd();
        __m256d sum_g_xhat_first = _mm256_setzero_pd(), sum_g_xhat_last = _mm256_setzero_pd();
        int d = 0;
        for (; d + 8 <= D; d += 8) {
            __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x_row + d), mean8), rstd8);
            __m256 dout8 = _mm256_loadu_ps(dout_row + d);
            __m256 g = _mm256_mul_ps(dout8, _mm256_loadu_ps(gamma + d));
            accumulate8(&sum_g_first, &sum_g_last, g);
            accumulate8(&sum_g_xhat_first, &sum_g_xhat_last, _mm256_mul_ps(g, xhat));
            if (dgamma) _mm256_storeu_ps(dgamma + d, _mm256_fmadd_ps(dout8, xhat, _mm256_loadu_ps(dgamma + d)));
            if (dbeta) _mm256_storeu_ps(dbeta + d, _mm256_add_ps(_mm256_loadu_ps(dbeta + d), dout8));
        }
        double sum_g = sum4(_mm256_add_pd(sum_g_first, sum_g_last));
        double sum_g_xhat = sum4(_mm256_add_pd(sum_g_xhat_first, sum_g_xhat_last));
        for (; d < D; d++) {   /* the last D mod 8 columns, the same float steps one at a time */
            float xhat = (x_row[d] - mean[n]) * rstd[n];
            float g = dout_row[d] * gamma[d];
            sum_g += g;
            sum_g_xhat += g * xhat;
            if (dgamma) dgamma[d] = fmaf(dout_row[d], xhat, dgamma[d]);
            if (dbeta) dbeta[d] += dout_row[d];
        }
        if (dx == NULL) continue;

        /* pass 2: dx += rstd (g - mean(g) - xhat mean(g xhat)) */
        float *dx_row = dx + (size_t)n * D;
        const __m256 mean_g = _mm256_set1_ps((float)(sum_g / D));
        const __m256 mean_g_xhat = _mm256_set1_ps((float)(sum_g_xhat / D));
        for (d = 0; d + 8 <= D; d += 8) {
            __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x_row + d), mean8), rstd8);
            __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dout_row + d), _mm256_loadu_ps(gamma + d));
            __m256 inner = _mm256_fnmadd_ps(xhat, mean_g_xhat, _mm256_sub_ps(g, mean_g));
            _mm256_storeu_ps(dx_row + d, _mm256_fmadd_ps(rstd8, inner, _mm256_loadu_ps(dx_row + d)));
        }
        if (d < D) {
            __m256i mask = first_lanes(D - d);
            __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x_row + d, mask), mean8), rstd8);
            __m256 g = _mm256_mul_ps(_mm256_maskload_ps(dout_row + d, mask), _mm256_maskload_ps(gamma + d, mask));
            __m256 inner = _mm256_fnmadd_ps(xhat, mean_g_xhat, _mm256_sub_ps(g, mean_g));
            store_first_lanes(dx_row + d, _mm256_fmadd_ps(rstd8, inner, _mm256_maskload_ps(dx_row + d, mask)),
                              D - d);
        }
    }
}
