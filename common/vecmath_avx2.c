/* vecmath_avx2.c - exp, tanh and sigmoid on 8 floats at a time (AVX2 + FMA).
 *
 * Compiled with -mavx2 -mfma (the Makefile rule for *_avx2.c); reached only
 * through vecmath.c when the avx2 backend is selected (CPUID checked).
 *
 * (And ReLU forward and backward, which need no approximation: see the end.)
 *
 * One idea carries all three: e^x = 2^k * e^r with k = round(x / ln 2) and
 * r = x - k ln 2, so |r| <= ln(2)/2 = 0.347, where a degree-7 polynomial
 * (Cephes' expf: 1 + r + r^2 P5(r)) is accurate to float precision; 2^k is
 * built by writing k into a float's exponent bits. tanh and sigmoid are
 * rewritten in terms of e^x (plus a small-|x| polynomial for tanh, where
 * the e^x form would lose digits to cancellation).
 *
 * Arrays of any length: full vectors of 8, then the 0..7 leftover floats
 * through a masked load and store (nothing read or written past x[n-1],
 * y[n-1]). Error bounds are in ulps (units in the last place) of the naive
 * libm result, and are checked by tests/test_vecmath.c. */
#include <immintrin.h>

#include "vecmath.h"

/* Lane i of the mask is on when i < count (count 0..8). */
static __m256i tail_mask(int count) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lanes);
}

/* e^x for 8 floats.
 * Error: <= 2 ulp of expf(x) for every x (1 measured), where an ulp is never
 * taken smaller than 2^-149, the subnormal spacing (so for x < -87.3, where
 * the result is subnormal, the error is <= 2^-148 absolute). x > 88.7228
 * gives +inf, x < -103.98 gives exactly 0 (so does -inf: a masked softmax
 * entry gets weight 0), +inf gives inf, NaN gives NaN.
 * 2^k is applied in two halves, 2^(k/2) * 2^(k - k/2), so k can range over
 * [-159, 128] (results from 0 through subnormals to inf) while each half is a
 * normal float. */
static __m256 exp8(__m256 x) {
    /* Clamp (max/min return their SECOND operand when one is NaN: x, so NaN passes). */
    x = _mm256_max_ps(_mm256_set1_ps(-110.0f), x);
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
    /* k = round(x / ln 2); r = x - k ln 2 with ln 2 split in two (Cody-Waite):
     * k * LN2_HIGH is exact, so r keeps its low bits. */
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    /* e^r = 1 + r + r^2 (p5 + r (p4 + ... r p0)) on |r| <= 0.347. */
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^k = 2^k1 * 2^k2 with k1 = floor(k/2), k2 = k - k1: float bits (k_i + 127) << 23. */
    __m256i ki = _mm256_cvtps_epi32(k);
    __m256i k1 = _mm256_srai_epi32(ki, 1);
    __m256i k2 = _mm256_sub_epi32(ki, k1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 scale1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    __m256 scale2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, scale1), scale2);
}

/* tanh(x) for 8 floats.
 * Error: <= 3 ulp of tanhf(x) for every x (2 measured).
 *   |x| <  0.625: x + x^3 P4(x^2) (Cephes' tanhf polynomial), no cancellation;
 *   |x| >= 0.625: 1 - 2 / (e^(2|x|) + 1), result >= 0.55, so exp's relative
 *                 error stays relative; e^(2|x|) = inf gives exactly 1.
 * The sign of x is put back at the end (tanh is odd). */
static __m256 tanh8(__m256 x) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign_bit, x);   /* |x| */
    __m256 sign = _mm256_and_ps(sign_bit, x);

    __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);

    __m256 e = exp8(_mm256_add_ps(ax, ax));
    __m256 large = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                                 _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    large = _mm256_or_ps(large, sign);

    /* NaN compares false: it takes the large branch, where it stays NaN. */
    __m256 use_small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ);
    return _mm256_blendv_ps(large, small, use_small);
}

/* 1 / (1 + e^-x) for 8 floats, as e / (1 + e) with e = e^-|x| <= 1 (so exp
 * never overflows, and for very negative x the tiny result keeps exp's
 * accuracy, as in the naive form), and 1 / (1 + e) for x >= 0.
 * Error: <= 3 ulp of the naive sigmoid for every x (2 measured), where an
 * ulp is never taken smaller than 2^-149 (the subnormal spacing). */
static __m256 sigmoid8(__m256 x) {
    __m256 minus_abs = _mm256_or_ps(x, _mm256_set1_ps(-0.0f));      /* -|x| */
    __m256 e = exp8(minus_abs);
    __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    __m256 numerator = _mm256_blendv_ps(_mm256_set1_ps(1.0f), e, negative);
    return _mm256_div_ps(numerator, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* The three array loops: 8 at a time, then the masked tail. */
void vec_exp_avx2(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, mask, exp8(_mm256_maskload_ps(x + i, mask)));
    }
}

void vec_tanh_avx2(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, tanh8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, mask, tanh8(_mm256_maskload_ps(x + i, mask)));
    }
}

void vec_sigmoid_avx2(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, sigmoid8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, mask, sigmoid8(_mm256_maskload_ps(x + i, mask)));
    }
}

/* y = x > 0 ? x : 0. Exact (0 ulp): MAXPS returns its first operand when it
 * is greater, else the second, which is the naive ternary, NaN and -0 included. */
void vec_relu_avx2(float *y, const float *x, int n) {
    const __m256 zero = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_max_ps(_mm256_loadu_ps(x + i), zero));
    if (i < n) {
        __m256i mask = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, mask, _mm256_max_ps(_mm256_maskload_ps(x + i, mask), zero));
    }
}

/* dx += dy where x > 0. Exact (0 ulp): the lanes where x > 0 get the same
 * dx + dy as the naive loop, the others keep dx (a blend, not an add of 0). */
static __m256 relu_backward8(__m256 dx, __m256 dy, __m256 x) {
    __m256 active = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ);
    return _mm256_blendv_ps(dx, _mm256_add_ps(dx, dy), active);
}

void vec_relu_backward_avx2(float *dx, const float *dy, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dx + i, relu_backward8(_mm256_loadu_ps(dx + i), _mm256_loadu_ps(dy + i),
                                                _mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = tail_mask(n - i);
        _mm256_maskstore_ps(dx + i, mask,
                            relu_backward8(_mm256_maskload_ps(dx + i, mask), _mm256_maskload_ps(dy + i, mask),
                                           _mm256_maskload_ps(x + i, mask)));
    }
}
