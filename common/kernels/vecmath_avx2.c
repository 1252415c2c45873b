/* vecmath_avx2.c - exp, tanh, sigmoid and GELU on 8 floats at a time (AVX2 + FMA).
 *
 * Compiled with -mavx2 -mfma (the Makefile rule for *_avx2.c); reached only
 * through vecmath.c when the avx2 backend is selected (CPUID checked).
 *
 * (And ReLU forward and backward, which need no approximation, GELU with
 * its gradient, both forms, built on exp8, and softmax along rows: see the
 * end.)
 *
 * One idea carries all three: e^x = 2^k * e^r with k = round(x / ln 2) and
 * r = x - k ln 2, so |r| <= ln(2)/2 = 0.347, where a degree-7 polynomial
 * (Cephes' expf: 1 + r + r^2 P5(r)) is accurate to float precision; 2^k is
 * built by writing k into a float's exponent bits. tanh and sigmoid are
 * rewritten in terms of e^x (plus a small-|x| polynomial for tanh, where
 * the e^x form would lose digits to cancellation).
 *
 * Arrays of any length: full vectors of 8, then the 0..7 leftover floats
 * through a masked load and a store of only those lanes (lanes_avx2.h:
 * nothing read or written past x[n-1], y[n-1]). Error bounds are in ulps (units in the last place) of the naive
 * libm result, and are checked by tests/test_vecmath.c. */
#include <immintrin.h>
#include <math.h>

#include "kernels/lanes_avx2.h"
#include "kernels/vecmath.h"

/* e^x for 8 floats, as p * scale1 * scale2 (exp8 below multiplies them out).
 * Error: <= 2 ulp of expf(x) for every x (1 measured), where an ulp is never
 * taken smaller than 2^-149, the subnormal spacing (so for x < -87.3, where
 * the result is subnormal, the error is <= 2^-148 absolute). x > 88.7228
 * gives +inf, x < -103.98 gives exactly 0 (so does -inf: a masked softmax
 * entry gets weight 0), +inf gives inf, NaN gives NaN.
 * 2^k is applied in two halves, 2^(k/2) * 2^(k - k/2), so k can range over
 * [-159, 128] (results from 0 through subnormals to inf) while each half is a
 * normal float. */
static __m256 exp8_parts(__m256 x, __m256 *scale1, __m256 *scale2) {
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
    *scale1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    *scale2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    return p;
}

static __m256 exp8(__m256 x) {
    __m256 scale1, scale2;
    __m256 p = exp8_parts(x, &scale1, &scale2);
    return _mm256_mul_ps(_mm256_mul_ps(p, scale1), scale2);
}

/* factor * e^x for 8 floats. The factor multiplies the polynomial before the
 * two power-of-two scalings, so when the product is subnormal it is rounded
 * once, at the end: GELU needs x e^(-x^2/2) where e^(-x^2/2) alone would be
 * subnormal and the product is not, or is less so. */
static __m256 exp8_times(__m256 x, __m256 factor) {
    __m256 scale1, scale2;
    __m256 p = exp8_parts(x, &scale1, &scale2);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(p, factor), scale1), scale2);
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

/* The three array loops: 8 at a time, then the tail of 1..7 (lanes_avx2.h). */
void vec_exp_avx2(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = first_lanes(n - i);
        store_first_lanes(y + i, exp8(_mm256_maskload_ps(x + i, mask)), n - i);
    }
}

void vec_tanh_avx2(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, tanh8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = first_lanes(n - i);
        store_first_lanes(y + i, tanh8(_mm256_maskload_ps(x + i, mask)), n - i);
    }
}

void vec_sigmoid_avx2(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, sigmoid8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = first_lanes(n - i);
        store_first_lanes(y + i, sigmoid8(_mm256_maskload_ps(x + i, mask)), n - i);
    }
}

/* y = x > 0 ? x : 0. Exact (0 ulp): MAXPS returns its first operand when it
 * is greater, else the second, which is the naive ternary, NaN and -0 included. */
void vec_relu_avx2(float *y, const float *x, int n) {
    const __m256 zero = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_max_ps(_mm256_loadu_ps(x + i), zero));
    if (i < n) {
        __m256i mask = first_lanes(n - i);
        store_first_lanes(y + i, _mm256_max_ps(_mm256_maskload_ps(x + i, mask), zero), n - i);
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
        __m256i mask = first_lanes(n - i);
        store_first_lanes(dx + i,
                          relu_backward8(_mm256_maskload_ps(dx + i, mask), _mm256_maskload_ps(dy + i, mask),
                                         _mm256_maskload_ps(x + i, mask)),
                          n - i);
    }
}

/* ------------------------------------------------------------------------ */
/* GELU, exact: y = x Phi(x)                                                 */
/* ------------------------------------------------------------------------ */

/* Beyond |x| = 16, Phi(x) and the density phi(x) are 0 or 1 in float
 * (GELU(-16) = -1e-56 rounds to -0, gelu'(16) rounds to 1), so x can be
 * clamped to [-16, 16] where it multiplies them, turning inf * 0 = NaN at
 * x = +-inf into the limit (min/max pass a NaN in x through). */
static __m256 clamp8(__m256 x, float low, float high) {
    return _mm256_max_ps(_mm256_set1_ps(low), _mm256_min_ps(_mm256_set1_ps(high), x));
}

/* Phi(x) is computed in two pieces, each accurate RELATIVE to its value
 * (tools/fit_normal_tail.py fits both polynomials and prints them):
 *
 *   center, |x| < 0.75:  Phi(x) = 1/2 + x R(x^2), R(w) of degree 4
 *                        (relative error 2.8e-8, the rounding of R(0) = 1/sqrt(2 pi));
 *   tail,   u >= 0.75:   Phi(-u) = e^(-u^2/2) q(u), q(u) = t P(t), t = 2 / (2 + u),
 *                        P of degree 9 (relative error 7e-9 over [0.75, 14.5]);
 *                        Phi(u) = 1 - Phi(-u).
 *
 * Why two pieces: t is rounded, and q passes that rounding on up to 1.6-fold
 * (more as u goes to 0), which costs the tail a few ulps. The center piece
 * has no such variable and stays within 2 ulps where most activations are;
 * its own weakness is cancellation for negative x (Phi(-0.75) = 0.5 - 0.27),
 * which grows with |x|, so it stops at 0.75. */
static const float GELU_CENTER_LIMIT = 0.75f;

/* x R(x^2) = Phi(x) - 1/2, for |x| < 0.75 */
static __m256 normal_center8(__m256 x) {
    __m256 w = _mm256_mul_ps(x, x);
    __m256 r = _mm256_set1_ps(1.165367503e-04f);
    r = _mm256_fmadd_ps(r, w, _mm256_set1_ps(-1.196836936e-03f));
    r = _mm256_fmadd_ps(r, w, _mm256_set1_ps(9.977946989e-03f));
    r = _mm256_fmadd_ps(r, w, _mm256_set1_ps(-6.649094820e-02f));
    r = _mm256_fmadd_ps(r, w, _mm256_set1_ps(3.989422917e-01f));
    return _mm256_mul_ps(x, r);
}

/* The lower tail Phi(-u) for 8 values u in [0.75, 16], as q * e^exponent
 * (lanes with u < 0.75 get finite values, which the callers discard):
 *   q = t P(t), between 0.024 and 0.31, never subnormal;
 *   exponent = -u^2 / 2, or rather its float part (see below); e^exponent
 *   may be subnormal (u > 13.2) or 0 (u > 14.4).
 * Phi(-u) falls like e^(-u^2/2), so an absolute error d in the exponent
 * becomes a relative error d in the result: computing u^2 / 2 in float
 * near u = 13 (u^2 = 169, ulp 1.5e-5) would cost about 100 ulps. So u^2 is
 * split exactly into hi + lo (hi = u * u rounded, lo = fma(u, u, -hi) its
 * rounding error), the exponent is -hi/2 (exact), and e^(-lo/2) = 1 - lo/2
 * (|lo/2| < 8e-6) is folded into q. */
static void normal_tail8(__m256 u, __m256 *q, __m256 *exponent) {
    __m256 u2_hi = _mm256_mul_ps(u, u);
    __m256 u2_lo = _mm256_fmsub_ps(u, u, u2_hi);
    *exponent = _mm256_mul_ps(_mm256_set1_ps(-0.5f), u2_hi);

    __m256 t = _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(_mm256_set1_ps(2.0f), u));
    __m256 p = _mm256_set1_ps(7.670188695e-02f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-2.168093920e-01f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.142467484e-01f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(2.470154315e-01f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-3.192021251e-01f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.474763826e-02f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(3.292367235e-02f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.518194675e-01f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.993119866e-01f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.994759589e-01f));
    __m256 tp = _mm256_mul_ps(t, p);
    *q = _mm256_fnmadd_ps(tp, _mm256_mul_ps(_mm256_set1_ps(0.5f), u2_lo), tp);   /* t P(t) (1 - lo/2) */
}

/* GELU(x) = x Phi(x) for 8 floats:
 *   |x| < 0.75: y = x/2 + x (x R(x^2))
 *   x <= -0.75: y = (x q) e^exponent, one call exp8_times: the product is
 *               rounded once even where e^exponent alone would be subnormal;
 *   x >=  0.75: y = x (1 - q e^exponent), Phi(x) >= 0.77: no cancellation.
 * Error: <= 6 ulp of the naive (double) result for every x, where an ulp is
 * never taken smaller than 2^-149 (the subnormal spacing: GELU(x) is
 * subnormal for x < -13.1 and rounds to -0 below -14.4). Checked over all
 * 2^32 floats (ATTN_VECMATH_EXHAUSTIVE=1, tests/test_vecmath.c): at most
 * 6.0 ulp for x <= -0.75 (near x = -2.2, where q carries up to 4 ulps: t's
 * rounding passed on 1.6-fold, and the polynomial's, on top of exp8's), and
 * at most 2.0 ulp for |x| < 0.75 and for x >= 0.75. */
static __m256 gelu8(__m256 x) {
    __m256 u = _mm256_min_ps(_mm256_set1_ps(16.0f), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x));
    __m256 q, exponent;
    normal_tail8(u, &q, &exponent);
    __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    __m256 x_low = _mm256_max_ps(_mm256_set1_ps(-16.0f), x);   /* -inf -> -16: -16 * 0 = -0 */
    /* negative lanes: x q e^exponent = y;  the others: q e^exponent = Phi(-x) */
    __m256 tail = exp8_times(exponent, _mm256_blendv_ps(q, _mm256_mul_ps(x_low, q), negative));
    __m256 positive_y = _mm256_mul_ps(x, _mm256_sub_ps(_mm256_set1_ps(1.0f), tail));
    __m256 y = _mm256_blendv_ps(positive_y, tail, negative);

    __m256 center_y = _mm256_fmadd_ps(x, normal_center8(x), _mm256_mul_ps(_mm256_set1_ps(0.5f), x));
    /* NaN compares false: it takes the tail branch (positive_y), where it stays NaN. */
    __m256 in_center = _mm256_cmp_ps(u, _mm256_set1_ps(GELU_CENTER_LIMIT), _CMP_LT_OQ);
    return _mm256_blendv_ps(y, center_y, in_center);
}

/* gelu'(x) = Phi(x) + x phi(x) for 8 floats, phi(x) = e^(-x^2/2) / sqrt(2 pi)
 * the normal density; with e = e^exponent (= e^(-x^2/2) to 1e-5 relative,
 * plenty for an absolute bound):
 *   |x| < 0.75: 1/2 + x R(x^2) + x e / sqrt(2 pi)
 *   x <= -0.75: e (q + x / sqrt(2 pi))
 *   x >=  0.75: 1 + e (x / sqrt(2 pi) - q)
 * Error: <= 2^-22 ABSOLUTE against the naive (double) gradient (at most
 * 2^-23 over all 2^32 floats). An absolute bound, because gelu' crosses
 * zero at x = -0.7518 (GELU's minimum), where ulps mean nothing; gelu' lies
 * in [-0.129, 1.129], so 2^-22 is 2 ulps of its values near 1. */
static __m256 gelu_grad8(__m256 x) {
    __m256 xc = clamp8(x, -16.0f, 16.0f);
    __m256 u = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), xc);
    __m256 q, exponent;
    normal_tail8(u, &q, &exponent);
    __m256 e = exp8(exponent);
    __m256 x_over_sqrt_2pi = _mm256_mul_ps(xc, _mm256_set1_ps(0.398942280f));
    __m256 negative = _mm256_mul_ps(e, _mm256_add_ps(q, x_over_sqrt_2pi));
    __m256 positive = _mm256_fmadd_ps(e, _mm256_sub_ps(x_over_sqrt_2pi, q), _mm256_set1_ps(1.0f));
    __m256 grad = _mm256_blendv_ps(positive, negative, _mm256_cmp_ps(xc, _mm256_setzero_ps(), _CMP_LT_OQ));

    __m256 center_cdf = _mm256_add_ps(_mm256_set1_ps(0.5f), normal_center8(xc));
    __m256 center_grad = _mm256_fmadd_ps(x_over_sqrt_2pi, e, center_cdf);
    __m256 in_center = _mm256_cmp_ps(u, _mm256_set1_ps(GELU_CENTER_LIMIT), _CMP_LT_OQ);
    return _mm256_blendv_ps(grad, center_grad, in_center);
}

/* ------------------------------------------------------------------------ */
/* GELU, tanh form: y = x/2 (1 + tanh(u)) = x / (1 + e^-v), v = 2u           */
/* ------------------------------------------------------------------------ */

/* v = 2u = 2 sqrt(2/pi) (x + 0.044715 x^3) = x (C1 + C3 x^2) */
#define GELU_TANH_C1 1.5957691216057308       /* 2 sqrt(2 / pi) */
#define GELU_TANH_C3 0.071354816272017267     /* 2 sqrt(2 / pi) * 0.044715 */

/* |v| for 4 lanes, computed in double and returned as two floats,
 * |v| = high + low (low the part of |v| that high could not hold).
 * Why double: y = x / (1 + e^-v) falls like e^v for negative v, so an
 * absolute error d in v is a relative error d in y. v in float near
 * v = -90 (x = -10.1, y about 1e-38) carries d ~ 1e-5, 100 ulps; the float
 * constants C1, C3 alone are off by 3e-8 relative. In double, d is 1e-14.
 * |v| is capped at 200 (e^-200 is 0 in float), so x = +-inf gives 200, not
 * inf - inf = NaN in low. */
static void gelu_tanh_abs_v4(__m128 x4, __m128 *high, __m128 *low) {
    __m256d x = _mm256_cvtps_pd(x4);
    __m256d v = _mm256_mul_pd(x, _mm256_fmadd_pd(_mm256_set1_pd(GELU_TANH_C3), _mm256_mul_pd(x, x),
                                                 _mm256_set1_pd(GELU_TANH_C1)));
    __m256d abs_v = _mm256_andnot_pd(_mm256_set1_pd(-0.0), v);
    abs_v = _mm256_min_pd(_mm256_set1_pd(200.0), abs_v);      /* NaN passes (second operand) */
    *high = _mm256_cvtpd_ps(abs_v);
    *low = _mm256_cvtpd_ps(_mm256_sub_pd(abs_v, _mm256_cvtps_pd(*high)));
}

/* GELU, tanh form, for 8 floats: with e = e^-|v| (never overflows),
 *   x >= 0: y = x / (1 + e)
 *   x <  0: y = x e / (1 + e)
 * e^-|v| = e^-high * e^-low = e^-high (1 - low), |low| <= 2^-17.
 * For x < -10.0, e is below 2^-126 (subnormal) while y = x e / (1 + e) is
 * not yet: so e is made as E = 2^24 e^-high with exp8_times (normal down to
 * e = 2^-150), and y = (x (1 - low) / (1 + e)) E 2^-24, where only the last,
 * exact, scaling can meet the subnormal range.
 * Error: <= 4 ulp of the naive (double) result for every x, where an ulp is
 * never taken smaller than 2^-149 (y is subnormal for x < -10.1 and rounds
 * to -0 below -10.8). Checked over all 2^32 floats: at most 4.0 ulp (near
 * x = -1.8: exp8's error, the division and the products). */
static __m256 gelu_tanh8(__m256 x) {
    __m128 high_first, low_first, high_last, low_last;
    gelu_tanh_abs_v4(_mm256_castps256_ps128(x), &high_first, &low_first);     /* lanes 0-3 */
    gelu_tanh_abs_v4(_mm256_extractf128_ps(x, 1), &high_last, &low_last);     /* lanes 4-7 */
    __m256 abs_v_high = _mm256_set_m128(high_last, high_first);
    __m256 abs_v_low = _mm256_set_m128(low_last, low_first);

    const __m256 two_to_24 = _mm256_set1_ps(16777216.0f), two_to_minus_24 = _mm256_set1_ps(5.96046448e-8f);
    __m256 big_e = exp8_times(_mm256_xor_ps(abs_v_high, _mm256_set1_ps(-0.0f)), two_to_24);   /* 2^24 e^-high */
    __m256 one_minus_low = _mm256_sub_ps(_mm256_set1_ps(1.0f), abs_v_low);
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(big_e, two_to_minus_24), one_minus_low);        /* e^-|v| */
    __m256 x_low = _mm256_max_ps(_mm256_set1_ps(-16.0f), x);   /* -inf -> -16: -16 * 0 = -0 */
    __m256 r = _mm256_div_ps(x_low, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    /* times E first, then the exact 2^-24 (only a subnormal result is rounded there) */
    __m256 negative = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(r, one_minus_low), big_e), two_to_minus_24);
    return _mm256_blendv_ps(r, negative, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}

/* gelu'(x) for the tanh form, 8 floats. With s = 1 / (1 + e^-v) (y = x s):
 *   gelu'(x) = s + x v' s (1 - s),  v' = C1 + 3 C3 x^2,
 * and s (1 - s) = e / (1 + e)^2 for either sign of v (e = e^-|v|), so no
 * 1 - s is ever formed by subtraction. All in float: the gradient's bound
 * is absolute, and float v is plenty for that.
 * Error: <= 2^-22 ABSOLUTE against the naive (double) gradient (reached:
 * at most 2^-22 over all 2^32 floats, 2 ulps of values near 1, at x = 0.75).
 * Absolute, because the gradient crosses zero at x = -0.7525; it lies in
 * [-0.129, 1.129]. */
static __m256 gelu_tanh_grad8(__m256 x) {
    __m256 xc = clamp8(x, -16.0f, 16.0f);
    __m256 x2 = _mm256_mul_ps(xc, xc);
    __m256 v = _mm256_mul_ps(xc, _mm256_fmadd_ps(_mm256_set1_ps((float)GELU_TANH_C3), x2,
                                                 _mm256_set1_ps((float)GELU_TANH_C1)));
    __m256 dv_dx = _mm256_fmadd_ps(_mm256_set1_ps((float)(3.0 * GELU_TANH_C3)), x2,
                                   _mm256_set1_ps((float)GELU_TANH_C1));
    __m256 e = exp8(_mm256_or_ps(v, _mm256_set1_ps(-0.0f)));                  /* e^-|v| */
    __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    __m256 s = _mm256_blendv_ps(inv, _mm256_mul_ps(e, inv), _mm256_cmp_ps(xc, _mm256_setzero_ps(), _CMP_LT_OQ));
    __m256 s_times_1_minus_s = _mm256_mul_ps(_mm256_mul_ps(e, inv), inv);
    return _mm256_fmadd_ps(_mm256_mul_ps(xc, dv_dx), s_times_1_minus_s, s);
}

/* ------------------------------------------------------------------------ */
/* The GELU array loops: 8 at a time, then the masked tail                   */
/* ------------------------------------------------------------------------ */

void vec_gelu_avx2(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = first_lanes(n - i);
        store_first_lanes(y + i, gelu8(_mm256_maskload_ps(x + i, mask)), n - i);
    }
}

void vec_gelu_tanh_avx2(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu_tanh8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = first_lanes(n - i);
        store_first_lanes(y + i, gelu_tanh8(_mm256_maskload_ps(x + i, mask)), n - i);
    }
}

/* dx += dy * gelu'(x) */
void vec_gelu_backward_avx2(float *dx, const float *dy, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 grad = gelu_grad8(_mm256_loadu_ps(x + i));
        _mm256_storeu_ps(dx + i, _mm256_fmadd_ps(_mm256_loadu_ps(dy + i), grad, _mm256_loadu_ps(dx + i)));
    }
    if (i < n) {
        __m256i mask = first_lanes(n - i);
        __m256 grad = gelu_grad8(_mm256_maskload_ps(x + i, mask));
        store_first_lanes(dx + i,
                          _mm256_fmadd_ps(_mm256_maskload_ps(dy + i, mask), grad, _mm256_maskload_ps(dx + i, mask)),
                          n - i);
    }
}

void vec_gelu_tanh_backward_avx2(float *dx, const float *dy, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 grad = gelu_tanh_grad8(_mm256_loadu_ps(x + i));
        _mm256_storeu_ps(dx + i, _mm256_fmadd_ps(_mm256_loadu_ps(dy + i), grad, _mm256_loadu_ps(dx + i)));
    }
    if (i < n) {
        __m256i mask = first_lanes(n - i);
        __m256 grad = gelu_tanh_grad8(_mm256_maskload_ps(x + i, mask));
        store_first_lanes(dx + i,
                          _mm256_fmadd_ps(_mm256_maskload_ps(dy + i, mask), grad, _mm256_maskload_ps(dx + i, mask)),
                          n - i);
    }
}

/* ------------------------------------------------------------------------ */
/* Softmax along rows                                                        */
/* ------------------------------------------------------------------------ */

/* Lanes 0..7 of v, added in double into the two accumulators. */
static void add8_double(__m256 v, __m256d *low, __m256d *high) {
    *low = _mm256_add_pd(*low, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    *high = _mm256_add_pd(*high, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

static double sum4_double(__m256d v) {
    __m128d pair = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(pair, _mm_unpackhi_pd(pair, pair)));
}

/* x[rows, C] -> y[rows, C], each row in three passes: the max (max_ps
 * returns its second operand when one is NaN, so NaN is skipped as in the
 * naive loop), y = e^(x - max) with its sum in double, y *= 1 / sum. The
 * last C mod 8 entries of a row go through masked loads: masked-off lanes
 * read as 0, so the max starts from -inf in every lane and the tail's
 * excess lanes are set to -inf before it. */
void vec_softmax_rows_avx2(float *y, const float *x, int rows, int C) {
    const int full = C - C % 8;
    const __m256i mask = first_lanes(C % 8);
    const __m256 minus_inf = _mm256_set1_ps(-INFINITY);
    for (int n = 0; n < rows; n++) {
        const float *xr = x + (size_t)n * C;
        float *yr = y + (size_t)n * C;
        __m256 max8 = minus_inf;
        for (int c = 0; c < full; c += 8) max8 = _mm256_max_ps(_mm256_loadu_ps(xr + c), max8);
        if (full < C) {
            __m256 tail = _mm256_blendv_ps(minus_inf, _mm256_maskload_ps(xr + full, mask),
                                           _mm256_castsi256_ps(mask));
            max8 = _mm256_max_ps(tail, max8);
        }
        __m128 max4 = _mm_max_ps(_mm256_castps256_ps128(max8), _mm256_extractf128_ps(max8, 1));
        max4 = _mm_max_ps(max4, _mm_movehl_ps(max4, max4));
        max4 = _mm_max_ss(max4, _mm_shuffle_ps(max4, max4, 1));
        const float max = _mm_cvtss_f32(max4);
        if (max == -INFINITY) {                 /* fully masked: 0/0, defined as zeros */
            for (int c = 0; c < C; c++) yr[c] = 0.0f;
            continue;
        }
        const __m256 shift = _mm256_set1_ps(max);
        __m256d sum_low = _mm256_setzero_pd(), sum_high = _mm256_setzero_pd();
        for (int c = 0; c < full; c += 8) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(xr + c), shift));
            _mm256_storeu_ps(yr + c, e);
            add8_double(e, &sum_low, &sum_high);
        }
        if (full < C) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(xr + full, mask), shift));
            e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));          /* lanes past C add 0 */
            store_first_lanes(yr + full, e, C % 8);
            add8_double(e, &sum_low, &sum_high);
        }
        const __m256 inv = _mm256_set1_ps((float)(1.0 / sum4_double(_mm256_add_pd(sum_low, sum_high))));
        for (int c = 0; c < full; c += 8) _mm256_storeu_ps(yr + c, _mm256_mul_ps(_mm256_loadu_ps(yr + c), inv));
        if (full < C)
            store_first_lanes(yr + full, _mm256_mul_ps(_mm256_maskload_ps(yr + full, mask), inv), C % 8);
    }
}

/* acc + a[0..3] b[0..3], the products and the sum in double. */
static __m256d fma4_double(const float *a, const float *b, __m256d acc) {
    return _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(a)), _mm256_cvtps_pd(_mm_loadu_ps(b)), acc);
}

/* dx_j += y_j (dy_j - dot), dot = sum_i dy_i y_i, as the naive loop: the
 * products, the dot and dy_j - dot in double, rounded to float before
 * multiplying by y_j. The dot takes 8 entries at a time (two accumulators of
 * 4), then 4 if there are, then the last C mod 4 one by one. */
static __m256 minus_dot8(__m256 dy, __m256d dot) {
    __m128 low = _mm256_cvtpd_ps(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(dy)), dot));
    __m128 high = _mm256_cvtpd_ps(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(dy, 1)), dot));
    return _mm256_insertf128_ps(_mm256_castps128_ps256(low), high, 1);
}

void vec_softmax_backward_rows_avx2(float *dx, const float *dy, const float *y, int rows, int C) {
    const int full = C - C % 8;
    const __m256i mask = first_lanes(C % 8);
    for (int n = 0; n < rows; n++) {
        const float *dyr = dy + (size_t)n * C;
        const float *yr = y + (size_t)n * C;
        float *dxr = dx + (size_t)n * C;
        __m256d dot_low = _mm256_setzero_pd(), dot_high = _mm256_setzero_pd();
        int c = 0;
        for (; c + 8 <= C; c += 8) {
            dot_low = fma4_double(dyr + c, yr + c, dot_low);
            dot_high = fma4_double(dyr + c + 4, yr + c + 4, dot_high);
        }
        if (c + 4 <= C) {
            dot_low = fma4_double(dyr + c, yr + c, dot_low);
            c += 4;
        }
        double dot = sum4_double(_mm256_add_pd(dot_low, dot_high));
        for (; c < C; c++) dot += (double)dyr[c] * yr[c];
        const __m256d dot4 = _mm256_set1_pd(dot);
        for (int c = 0; c < full; c += 8) {
            __m256 g = _mm256_mul_ps(_mm256_loadu_ps(yr + c), minus_dot8(_mm256_loadu_ps(dyr + c), dot4));
            _mm256_storeu_ps(dxr + c, _mm256_add_ps(_mm256_loadu_ps(dxr + c), g));
        }
        if (full < C) {
            __m256 g = _mm256_mul_ps(_mm256_maskload_ps(yr + full, mask),
                                     minus_dot8(_mm256_maskload_ps(dyr + full, mask), dot4));
            store_first_lanes(dxr + full, _mm256_add_ps(_mm256_maskload_ps(dxr + full, mask), g), C % 8);
        }
    }
}
