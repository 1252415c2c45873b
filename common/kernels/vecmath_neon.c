/* vecmath_neon.c - exp, tanh, sigmoid, ReLU, GELU and softmax rows on 4 floats
 * at a time with AArch64 Advanced SIMD (NEON): the forms of vecmath_avx2.c,
 * operation for operation (read that file for the mathematics and the error
 * bounds; the comments here say only where NEON differs).
 *
 * Each function works lane by lane, and every lane goes through the same
 * IEEE operations as in the AVX2 form (a fused multiply-add where AVX2 has
 * one, the same polynomials, the same Cody-Waite split, the same double
 * parts), so the results are meant to be the AVX2 results, bit for bit; the
 * sums of softmax keep AVX2's order (8 entries per step in four pairs of
 * double lanes). Where the instructions differ:
 *   - AVX2's max/min return their second operand when one is NaN; NEON's
 *     FMAX/FMIN return NaN. The clamps want NaN to pass, which both do;
 *     ReLU's max(x, 0) (NaN -> 0) is a compare and a select here, and
 *     softmax's row max skips NaN with FMAXNM (the number wins).
 *   - There are no masked loads: the last n mod 4 floats go through a small
 *     buffer (tail_in/tail_out), zeros in the lanes past the end.
 *
 * Reached only through vecmath.c when the neon backend is selected. Compiled
 * only on AArch64; on any other CPU this file is empty. */
#if defined(__aarch64__)

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels/vecmath.h"

static inline float32x4_t splat(float v) { return vdupq_n_f32(v); }

/* bits(x) for the sign tricks */
static inline float32x4_t sign_of(float32x4_t x) {
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u)));
}
static inline float32x4_t or_bits(float32x4_t a, float32x4_t b) {
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}

/* e^x as p * scale1 * scale2 (vecmath_avx2.c's exp8_parts). */
static float32x4_t exp4_parts(float32x4_t x, float32x4_t *scale1, float32x4_t *scale2) {
    x = vmaxq_f32(splat(-110.0f), x); /* NaN stays NaN */
    x = vminq_f32(splat(89.0f), x);
    float32x4_t k = vrndnq_f32(vmulq_f32(x, splat(1.44269504088896341f))); /* to nearest, ties even */
    float32x4_t r = vfmsq_f32(x, k, splat(0.693359375f));                    /* x - k LN2_HIGH, fused */
    r = vfmsq_f32(r, k, splat(-2.12194440e-4f));
    float32x4_t p = splat(1.9875691500e-4f);
    p = vfmaq_f32(splat(1.3981999507e-3f), p, r);
    p = vfmaq_f32(splat(8.3334519073e-3f), p, r);
    p = vfmaq_f32(splat(4.1665795894e-2f), p, r);
    p = vfmaq_f32(splat(1.6666665459e-1f), p, r);
    p = vfmaq_f32(splat(5.0000001201e-1f), p, r);
    float32x4_t r2 = vmulq_f32(r, r);
    p = vfmaq_f32(vaddq_f32(r, splat(1.0f)), p, r2);
    int32x4_t ki = vcvtnq_s32_f32(k); /* k is already whole */
    int32x4_t k1 = vshrq_n_s32(ki, 1);
    int32x4_t k2 = vsubq_s32(ki, k1);
    const int32x4_t bias = vdupq_n_s32(127);
    *scale1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k1, bias), 23));
    *scale2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k2, bias), 23));
    return p;
}

static float32x4_t exp4(float32x4_t x) {
    float32x4_t scale1, scale2;
    float32x4_t p = exp4_parts(x, &scale1, &scale2);
    return vmulq_f32(vmulq_f32(p, scale1), scale2);
}

/* factor * e^x, the factor applied before the scalings (exp8_times). */
static float32x4_t exp4_times(float32x4_t x, float32x4_t factor) {
    float32x4_t scale1, scale2;
    float32x4_t p = exp4_parts(x, &scale1, &scale2);
    return vmulq_f32(vmulq_f32(vmulq_f32(p, factor), scale1), scale2);
}

/* tanh (tanh8): the small-|x| polynomial, else 1 - 2 / (e^(2|x|) + 1). */
static float32x4_t tanh4(float32x4_t x) {
    float32x4_t ax = vabsq_f32(x);
    float32x4_t sign = sign_of(x);
    float32x4_t z = vmulq_f32(x, x);
    float32x4_t p = splat(-5.70498872745e-3f);
    p = vfmaq_f32(splat(2.06390887954e-2f), p, z);
    p = vfmaq_f32(splat(-5.37397155531e-2f), p, z);
    p = vfmaq_f32(splat(1.33314422036e-1f), p, z);
    p = vfmaq_f32(splat(-3.33332819422e-1f), p, z);
    float32x4_t small = vfmaq_f32(x, vmulq_f32(p, z), x);
    float32x4_t e = exp4(vaddq_f32(ax, ax));
    float32x4_t large = vsubq_f32(splat(1.0f), vdivq_f32(splat(2.0f), vaddq_f32(e, splat(1.0f))));
    large = or_bits(large, sign);
    uint32x4_t use_small = vcltq_f32(ax, splat(0.625f)); /* NaN: false, the large branch */
    return vbslq_f32(use_small, small, large);
}

/* 1 / (1 + e^-x) (sigmoid8): e = e^-|x|, e / (1 + e) for x < 0, else 1 / (1 + e). */
static float32x4_t sigmoid4(float32x4_t x) {
    float32x4_t minus_abs = vnegq_f32(vabsq_f32(x));
    float32x4_t e = exp4(minus_abs);
    uint32x4_t negative = vcltq_f32(x, splat(0.0f));
    float32x4_t numerator = vbslq_f32(negative, e, splat(1.0f));
    return vdivq_f32(numerator, vaddq_f32(splat(1.0f), e));
}

/* x > 0 ? x : 0, NaN and -0 giving 0 as in the naive ternary (exact). */
static float32x4_t relu4(float32x4_t x) { return vbslq_f32(vcgtq_f32(x, splat(0.0f)), x, splat(0.0f)); }

/* ---- GELU, exact (gelu8, gelu_grad8) ---------------------------------------- */

static const float GELU_CENTER_LIMIT = 0.75f;

static float32x4_t clamp4(float32x4_t x, float low, float high) {
    return vmaxq_f32(splat(low), vminq_f32(splat(high), x));
}

/* x R(x^2) = Phi(x) - 1/2, for |x| < 0.75 */
static float32x4_t normal_center4(float32x4_t x) {
    float32x4_t w = vmulq_f32(x, x);
    float32x4_t r = splat(1.165367503e-04f);
    r = vfmaq_f32(splat(-1.196836936e-03f), r, w);
    r = vfmaq_f32(splat(9.977946989e-03f), r, w);
    r = vfmaq_f32(splat(-6.649094820e-02f), r, w);
    r = vfmaq_f32(splat(3.989422917e-01f), r, w);
    return vmulq_f32(x, r);
}

/* The lower tail Phi(-u) = q e^exponent for u in [0.75, 16] (normal_tail8). */
static void normal_tail4(float32x4_t u, float32x4_t *q, float32x4_t *exponent) {
    float32x4_t u2_hi = vmulq_f32(u, u);
    float32x4_t u2_lo = vfmaq_f32(vnegq_f32(u2_hi), u, u); /* u u - hi, rounded once */
    *exponent = vmulq_f32(splat(-0.5f), u2_hi);
    float32x4_t t = vdivq_f32(splat(2.0f), vaddq_f32(splat(2.0f), u));
    float32x4_t p = splat(7.670188695e-02f);
    p = vfmaq_f32(splat(-2.168093920e-01f), p, t);
    p = vfmaq_f32(splat(1.142467484e-01f), p, t);
    p = vfmaq_f32(splat(2.470154315e-01f), p, t);
    p = vfmaq_f32(splat(-3.192021251e-01f), p, t);
    p = vfmaq_f32(splat(1.474763826e-02f), p, t);
    p = vfmaq_f32(splat(3.292367235e-02f), p, t);
    p = vfmaq_f32(splat(1.518194675e-01f), p, t);
    p = vfmaq_f32(splat(1.993119866e-01f), p, t);
    p = vfmaq_f32(splat(1.994759589e-01f), p, t);
    float32x4_t tp = vmulq_f32(t, p);
    *q = vfmsq_f32(tp, tp, vmulq_f32(splat(0.5f), u2_lo)); /* t P(t) (1 - lo/2) */
}

static float32x4_t gelu4(float32x4_t x) {
    float32x4_t u = vminq_f32(splat(16.0f), vabsq_f32(x));
    float32x4_t q, exponent;
    normal_tail4(u, &q, &exponent);
    uint32x4_t negative = vcltq_f32(x, splat(0.0f));
    float32x4_t x_low = vmaxq_f32(splat(-16.0f), x);
    float32x4_t tail = exp4_times(exponent, vbslq_f32(negative, vmulq_f32(x_low, q), q));
    float32x4_t positive_y = vmulq_f32(x, vsubq_f32(splat(1.0f), tail));
    float32x4_t y = vbslq_f32(negative, tail, positive_y);
    float32x4_t center_y = vfmaq_f32(vmulq_f32(splat(0.5f), x), x, normal_center4(x));
    uint32x4_t in_center = vcltq_f32(u, splat(GELU_CENTER_LIMIT));
    return vbslq_f32(in_center, center_y, y);
}

static float32x4_t gelu_grad4(float32x4_t x) {
    float32x4_t xc = clamp4(x, -16.0f, 16.0f);
    float32x4_t u = vabsq_f32(xc);
    float32x4_t q, exponent;
    normal_tail4(u, &q, &exponent);
    float32x4_t e = exp4(exponent);
    float32x4_t x_over_sqrt_2pi = vmulq_f32(xc, splat(0.398942280f));
    float32x4_t negative = vmulq_f32(e, vaddq_f32(q, x_over_sqrt_2pi));
    float32x4_t positive = vfmaq_f32(splat(1.0f), e, vsubq_f32(x_over_sqrt_2pi, q));
    float32x4_t grad = vbslq_f32(vcltq_f32(xc, splat(0.0f)), negative, positive);
    float32x4_t center_cdf = vaddq_f32(splat(0.5f), normal_center4(xc));
    float32x4_t center_grad = vfmaq_f32(center_cdf, x_over_sqrt_2pi, e);
    uint32x4_t in_center = vcltq_f32(u, splat(GELU_CENTER_LIMIT));
    return vbslq_f32(in_center, center_grad, grad);
}

/* ---- GELU, tanh form (gelu_tanh8, gelu_tanh_grad8) ---------------------------- */

static const double GELU_TANH_C1 = 1.5957691216057308;   /* 2 sqrt(2 / pi) */
static const double GELU_TANH_C3 = 0.071354816272017267; /* 2 sqrt(2 / pi) * 0.044715 */

/* |v| = high + low for 2 lanes, computed in double (gelu_tanh_abs_v4). */
static void gelu_tanh_abs_v2(float64x2_t x, float32x2_t *high, float32x2_t *low) {
    float64x2_t v = vmulq_f64(x, vfmaq_f64(vdupq_n_f64(GELU_TANH_C1), vdupq_n_f64(GELU_TANH_C3), vmulq_f64(x, x)));
    float64x2_t abs_v = vminq_f64(vdupq_n_f64(200.0), vabsq_f64(v)); /* NaN stays NaN */
    *high = vcvt_f32_f64(abs_v);
    *low = vcvt_f32_f64(vsubq_f64(abs_v, vcvt_f64_f32(*high)));
}

static float32x4_t gelu_tanh4(float32x4_t x) {
    float32x2_t high_first, low_first, high_last, low_last;
    gelu_tanh_abs_v2(vcvt_f64_f32(vget_low_f32(x)), &high_first, &low_first); /* lanes 0-1 */
    gelu_tanh_abs_v2(vcvt_high_f64_f32(x), &high_last, &low_last);            /* lanes 2-3 */
    float32x4_t abs_v_high = vcombine_f32(high_first, high_last);
    float32x4_t abs_v_low = vcombine_f32(low_first, low_last);
    const float32x4_t two_to_24 = splat(16777216.0f), two_to_minus_24 = splat(5.96046448e-8f);
    float32x4_t big_e = exp4_times(vnegq_f32(abs_v_high), two_to_24); /* 2^24 e^-high */
    float32x4_t one_minus_low = vsubq_f32(splat(1.0f), abs_v_low);
    float32x4_t e = vmulq_f32(vmulq_f32(big_e, two_to_minus_24), one_minus_low);
    float32x4_t x_low = vmaxq_f32(splat(-16.0f), x);
    float32x4_t r = vdivq_f32(x_low, vaddq_f32(splat(1.0f), e));
    float32x4_t negative = vmulq_f32(vmulq_f32(vmulq_f32(r, one_minus_low), big_e), two_to_minus_24);
    return vbslq_f32(vcltq_f32(x, splat(0.0f)), negative, r);
}

static float32x4_t gelu_tanh_grad4(float32x4_t x) {
    float32x4_t xc = clamp4(x, -16.0f, 16.0f);
    float32x4_t x2 = vmulq_f32(xc, xc);
    float32x4_t v = vmulq_f32(xc, vfmaq_f32(splat((float)GELU_TANH_C1), splat((float)GELU_TANH_C3), x2));
    float32x4_t dv_dx = vfmaq_f32(splat((float)GELU_TANH_C1), splat((float)(3.0 * GELU_TANH_C3)), x2);
    float32x4_t e = exp4(vnegq_f32(vabsq_f32(v))); /* e^-|v| */
    float32x4_t inv = vdivq_f32(splat(1.0f), vaddq_f32(splat(1.0f), e));
    float32x4_t s = vbslq_f32(vcltq_f32(xc, splat(0.0f)), vmulq_f32(e, inv), inv);
    float32x4_t s_times_1_minus_s = vmulq_f32(vmulq_f32(e, inv), inv);
    return vfmaq_f32(s, vmulq_f32(xc, dv_dx), s_times_1_minus_s);
}

/* ---- The array loops -------------------------------------------------------------
 * 4 at a time, then the last 1..3 through a buffer (zeros past the end). */
typedef float32x4_t (*Lanes4)(float32x4_t);

static inline float32x4_t tail_in(const float *x, int n) {
    float lanes[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    memcpy(lanes, x, (size_t)n * sizeof(float));
    return vld1q_f32(lanes);
}

static inline void tail_out(float *y, float32x4_t v, int n) {
    float lanes[4];
    vst1q_f32(lanes, v);
    memcpy(y, lanes, (size_t)n * sizeof(float));
}

static inline void apply4(Lanes4 f, float *y, const float *x, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, f(vld1q_f32(x + i)));
    if (i < n) tail_out(y + i, f(tail_in(x + i, n - i)), n - i);
}

/* dx += dy * f(x), one fused multiply-add (as the AVX2 loops). */
static inline void apply4_gradient(Lanes4 f, float *dx, const float *dy, const float *x, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(dx + i, vfmaq_f32(vld1q_f32(dx + i), vld1q_f32(dy + i), f(vld1q_f32(x + i))));
    if (i < n)
        tail_out(dx + i, vfmaq_f32(tail_in(dx + i, n - i), tail_in(dy + i, n - i), f(tail_in(x + i, n - i))),
                 n - i);
}

void vec_exp_neon(float *y, const float *x, int n) { apply4(exp4, y, x, n); }
void vec_tanh_neon(float *y, const float *x, int n) { apply4(tanh4, y, x, n); }
void vec_sigmoid_neon(float *y, const float *x, int n) { apply4(sigmoid4, y, x, n); }
void vec_relu_neon(float *y, const float *x, int n) { apply4(relu4, y, x, n); }
void vec_gelu_neon(float *y, const float *x, int n) { apply4(gelu4, y, x, n); }
void vec_gelu_tanh_neon(float *y, const float *x, int n) { apply4(gelu_tanh4, y, x, n); }
void vec_gelu_backward_neon(float *dx, const float *dy, const float *x, int n) {
    apply4_gradient(gelu_grad4, dx, dy, x, n);
}
void vec_gelu_tanh_backward_neon(float *dx, const float *dy, const float *x, int n) {
    apply4_gradient(gelu_tanh_grad4, dx, dy, x, n);
}

/* dx += dy where x > 0, else dx unchanged (a select, not an add of 0: exact). */
static inline float32x4_t relu_backward4(float32x4_t dx, float32x4_t dy, float32x4_t x) {
    return vbslq_f32(vcgtq_f32(x, splat(0.0f)), vaddq_f32(dx, dy), dx);
}

void vec_relu_backward_neon(float *dx, const float *dy, const float *x, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(dx + i, relu_backward4(vld1q_f32(dx + i), vld1q_f32(dy + i), vld1q_f32(x + i)));
    if (i < n)
        tail_out(dx + i, relu_backward4(tail_in(dx + i, n - i), tail_in(dy + i, n - i), tail_in(x + i, n - i)),
                 n - i);
}

/* ---- Softmax along rows (vec_softmax_rows_avx2 and its backward) -----------------
 * The double sums in AVX2's order: a step takes 8 entries, entry c + j
 * going into double lane j of four accumulators (lanes 0-1, 2-3 of the
 * first four entries, "low"; of the next four, "high"), and the total is
 * (low + high) summed as (lane 0 + lane 2) + (lane 1 + lane 3). */
typedef struct {
    float64x2_t low01, low23, high01, high23;
} Sum8;

static inline void sum8_add(Sum8 *s, const float v[8]) {
    float32x4_t lo = vld1q_f32(v), hi = vld1q_f32(v + 4);
    s->low01 = vaddq_f64(s->low01, vcvt_f64_f32(vget_low_f32(lo)));
    s->low23 = vaddq_f64(s->low23, vcvt_high_f64_f32(lo));
    s->high01 = vaddq_f64(s->high01, vcvt_f64_f32(vget_low_f32(hi)));
    s->high23 = vaddq_f64(s->high23, vcvt_high_f64_f32(hi));
}

static inline double sum8_total(const Sum8 *s) {
    float64x2_t lanes01 = vaddq_f64(s->low01, s->high01), lanes23 = vaddq_f64(s->low23, s->high23);
    float64x2_t pair = vaddq_f64(lanes01, lanes23); /* lane 0 + lane 2, lane 1 + lane 3 */
    return vgetq_lane_f64(pair, 0) + vgetq_lane_f64(pair, 1);
}

/* Three passes per row: the max (FMAXNM: a NaN entry is skipped), e^(x - max)
 * with its sum, y *= 1 / sum. */
void vec_softmax_rows_neon(float *y, const float *x, int rows, int C) {
    const int full = C - C % 8;
    for (int n = 0; n < rows; n++) {
        const float *xr = x + (size_t)n * C;
        float *yr = y + (size_t)n * C;
        float32x4_t max4 = splat(-INFINITY);
        int c = 0;
        for (; c + 4 <= C; c += 4) max4 = vmaxnmq_f32(vld1q_f32(xr + c), max4);
        float max = vmaxnmvq_f32(max4);
        for (; c < C; c++) max = fmaxf(xr[c], max); /* fmaxf: the number wins over NaN */
        if (max == -INFINITY) {
            for (int c2 = 0; c2 < C; c2++) yr[c2] = 0.0f;
            continue;
        }
        const float32x4_t shift = splat(max);
        Sum8 sum = {vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0)};
        for (c = 0; c < full; c += 8) {
            vst1q_f32(yr + c, exp4(vsubq_f32(vld1q_f32(xr + c), shift)));
            vst1q_f32(yr + c + 4, exp4(vsubq_f32(vld1q_f32(xr + c + 4), shift)));
            sum8_add(&sum, yr + c);
        }
        if (full < C) {
            float e[8] = {0};
            for (int j = 0; j < C - full; j += 4)
                tail_out(e + j, exp4(vsubq_f32(tail_in(xr + full + j, C - full - j < 4 ? C - full - j : 4), shift)),
                         C - full - j < 4 ? C - full - j : 4);
            memcpy(yr + full, e, (size_t)(C - full) * sizeof(float));
            sum8_add(&sum, e);
        }
        const float32x4_t inv = splat((float)(1.0 / sum8_total(&sum)));
        for (c = 0; c + 4 <= C; c += 4) vst1q_f32(yr + c, vmulq_f32(vld1q_f32(yr + c), inv));
        if (c < C) tail_out(yr + c, vmulq_f32(tail_in(yr + c, C - c), inv), C - c);
    }
}

/* dx_j += y_j (float)(dy_j - dot), dot = sum dy_i y_i in double, summed as
 * the AVX2 form: 8 entries a step (low and high accumulators), then 4 into
 * low if there are, then the last C mod 4 one by one. */
static inline float64x2_t fma2_double(const float *a, const float *b, float64x2_t acc) {
    return vfmaq_f64(acc, vcvt_f64_f32(vld1_f32(a)), vcvt_f64_f32(vld1_f32(b)));
}

static inline float32x4_t minus_dot4(float32x4_t dy, float64x2_t dot) {
    float32x2_t low = vcvt_f32_f64(vsubq_f64(vcvt_f64_f32(vget_low_f32(dy)), dot));
    float32x2_t high = vcvt_f32_f64(vsubq_f64(vcvt_high_f64_f32(dy), dot));
    return vcombine_f32(low, high);
}

void vec_softmax_backward_rows_neon(float *dx, const float *dy, const float *y, int rows, int C) {
    for (int n = 0; n < rows; n++) {
        const float *dyr = dy + (size_t)n * C;
        const float *yr = y + (size_t)n * C;
        float *dxr = dx + (size_t)n * C;
        Sum8 dot8 = {vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0)};
        int c = 0;
        for (; c + 8 <= C; c += 8) {
            dot8.low01 = fma2_double(dyr + c, yr + c, dot8.low01);
            dot8.low23 = fma2_double(dyr + c + 2, yr + c + 2, dot8.low23);
            dot8.high01 = fma2_double(dyr + c + 4, yr + c + 4, dot8.high01);
            dot8.high23 = fma2_double(dyr + c + 6, yr + c + 6, dot8.high23);
        }
        if (c + 4 <= C) {
            dot8.low01 = fma2_double(dyr + c, yr + c, dot8.low01);
            dot8.low23 = fma2_double(dyr + c + 2, yr + c + 2, dot8.low23);
            c += 4;
        }
        double dot = sum8_total(&dot8);
        for (; c < C; c++) dot += (double)dyr[c] * yr[c];
        const float64x2_t dot2 = vdupq_n_f64(dot);
        for (c = 0; c + 4 <= C; c += 4) {
            float32x4_t g = vmulq_f32(vld1q_f32(yr + c), minus_dot4(vld1q_f32(dyr + c), dot2));
            vst1q_f32(dxr + c, vaddq_f32(vld1q_f32(dxr + c), g));
        }
        if (c < C) {
            float32x4_t g = vmulq_f32(tail_in(yr + c, C - c), minus_dot4(tail_in(dyr + c, C - c), dot2));
            tail_out(dxr + c, vaddq_f32(tail_in(dxr + c, C - c), g), C - c);
        }
    }
}

#endif /* __aarch64__ */
