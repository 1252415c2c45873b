/* layernorm_neon.c - LayerNorm forward and backward, 4 floats at a time with
 * AArch64 Advanced SIMD (NEON): the forms of layernorm_avx2.c, operation for
 * operation (read that file for the reasoning and the error bounds; the
 * comments here say only where NEON differs).
 *
 * The same bits as the AVX2 forms. Every element goes through the same IEEE
 * operations (a fused multiply-add wherever AVX2 has one, none where it has
 * none), and the double row sums are added in AVX2's order: AVX2 takes 8
 * floats a step, float j of the step going into double lane j of two
 * 4-lane accumulators, and totals them as
 *   ((lane 0 + lane 4) + (lane 1 + lane 5)) + ((lane 2 + lane 6) + (lane 3 + lane 7));
 * here four 2-lane accumulators (Sum8) hold those 8 lanes and are totalled
 * in that order. The row tails (D mod 8 floats for the sums, D mod 4 for
 * the element-wise passes) take the same steps one float at a time, as the
 * AVX2 form's tails do (its masked lanes compute each float alone too).
 *
 * Reached only through layers.c when the neon backend is selected.
 * Compiled only on AArch64; on any other CPU this file is empty. */
#if defined(__aarch64__)

#include <arm_neon.h>
#include <math.h>
#include <stddef.h>

#include "kernels/layernorm.h"

/* Eight double lanes, lane j of a step's 8 floats in lane j: lanes 0-1,
 * 2-3, 4-5, 6-7 (AVX2's "first" vector is lanes 0-3, "last" lanes 4-7). */
typedef struct {
    float64x2_t lanes01, lanes23, lanes45, lanes67;
} Sum8;

static Sum8 sum8_zero(void) {
    Sum8 s = {vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0)};
    return s;
}

/* s += the 8 floats low (0-3) and high (4-7), each converted to double (exact). */
static void sum8_add(Sum8 *s, float32x4_t low, float32x4_t high) {
    s->lanes01 = vaddq_f64(s->lanes01, vcvt_f64_f32(vget_low_f32(low)));
    s->lanes23 = vaddq_f64(s->lanes23, vcvt_high_f64_f32(low));
    s->lanes45 = vaddq_f64(s->lanes45, vcvt_f64_f32(vget_low_f32(high)));
    s->lanes67 = vaddq_f64(s->lanes67, vcvt_high_f64_f32(high));
}

/* AVX2's sum4(first + last): ((0 + 4) + (1 + 5)) + ((2 + 6) + (3 + 7)). */
static double sum8_total(const Sum8 *s) {
    float64x2_t pair01 = vaddq_f64(s->lanes01, s->lanes45), pair23 = vaddq_f64(s->lanes23, s->lanes67);
    return (vgetq_lane_f64(pair01, 0) + vgetq_lane_f64(pair01, 1)) +
           (vgetq_lane_f64(pair23, 0) + vgetq_lane_f64(pair23, 1));
}

/* acc += (x - mean)^2 for 2 lanes, in double, one fused multiply-add
 * (AVX2's accumulate_squares8). */
static float64x2_t add_squares2(float64x2_t acc, float32x2_t x, float64x2_t mean) {
    float64x2_t centered = vsubq_f64(vcvt_f64_f32(x), mean);
    return vfmaq_f64(acc, centered, centered);
}

/* x[D] -> its mean and biased variance, two passes, sums in double. */
static void row_statistics(const float *x, int D, double *mean, double *var) {
    Sum8 sum = sum8_zero();
    int d = 0;
    for (; d + 8 <= D; d += 8) sum8_add(&sum, vld1q_f32(x + d), vld1q_f32(x + d + 4));
    double total = sum8_total(&sum);
    for (; d < D; d++) total += x[d];
    double row_mean = total / D;

    Sum8 squares = sum8_zero();
    const float64x2_t mean2 = vdupq_n_f64(row_mean);
    for (d = 0; d + 8 <= D; d += 8) {
        float32x4_t low = vld1q_f32(x + d), high = vld1q_f32(x + d + 4);
        squares.lanes01 = add_squares2(squares.lanes01, vget_low_f32(low), mean2);
        squares.lanes23 = add_squares2(squares.lanes23, vget_high_f32(low), mean2);
        squares.lanes45 = add_squares2(squares.lanes45, vget_low_f32(high), mean2);
        squares.lanes67 = add_squares2(squares.lanes67, vget_high_f32(high), mean2);
    }
    double total_squares = sum8_total(&squares);
    for (; d < D; d++) {   /* a product, then a sum: two roundings, as the AVX2 form's tail */
        double centered = (double)x[d] - row_mean;
        double square = centered * centered;
        total_squares += square;
    }
    *mean = row_mean;
    *var = total_squares / D;
}

/* ((x - mean_high) - mean_low) * rstd * gamma + beta for one float. */
static float normalize1(float x, float mean_high, float mean_low, float rstd, float gamma, float beta) {
    float centered = (x - mean_high) - mean_low;
    float xhat = centered * rstd;
    return fmaf(xhat, gamma, beta);
}

/* x[N,D], gamma[D], beta[D] -> out[N,D], mean[N], rstd[N] (mean, rstd may be NULL).
 * layernorm_forward_avx2's steps; the same bits. */
void layernorm_forward_neon(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                            const float *beta, int N, int D, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x_row = x + (size_t)n * D;
        float *out_row = out + (size_t)n * D;
        double row_mean, row_var;
        row_statistics(x_row, D, &row_mean, &row_var);
        double row_rstd = 1.0 / sqrt(row_var + eps);
        const float mean_high_f = (float)row_mean, mean_low_f = (float)(row_mean - mean_high_f);
        const float rstd_f = (float)row_rstd;
        const float32x4_t mean_high = vdupq_n_f32(mean_high_f), mean_low = vdupq_n_f32(mean_low_f);
        const float32x4_t rstd4 = vdupq_n_f32(rstd_f);
        int d = 0;
        for (; d + 4 <= D; d += 4) {
            float32x4_t centered = vsubq_f32(vsubq_f32(vld1q_f32(x_row + d), mean_high), mean_low);
            float32x4_t xhat = vmulq_f32(centered, rstd4);
            vst1q_f32(out_row + d, vfmaq_f32(vld1q_f32(beta + d), xhat, vld1q_f32(gamma + d)));
        }
        for (; d < D; d++) out_row[d] = normalize1(x_row[d], mean_high_f, mean_low_f, rstd_f, gamma[d], beta[d]);
        if (mean) mean[n] = mean_high_f;
        if (rstd) rstd[n] = rstd_f;
    }
}

/* dx += rstd (g - mean_g - xhat mean_g_xhat) for one float, two fused
 * multiply-adds (AVX2's fnmadd, then fmadd). */
static float dx1(float dx, float x, float dout, float gamma, float mean, float rstd, float mean_g,
                 float mean_g_xhat) {
    float xhat = (x - mean) * rstd;
    float g = dout * gamma;
    float inner = fmaf(-xhat, mean_g_xhat, g - mean_g);
    return fmaf(rstd, inner, dx);
}

/* dout[N,D] -> dx[N,D] +=, dgamma[D] +=, dbeta[D] += (any may be NULL).
 * layernorm_backward_avx2's two passes per row; the same bits. */
void layernorm_backward_neon(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                             const float *rstd, const float *x, const float *gamma, int N, int D) {
    for (int n = 0; n < N; n++) {
        const float *x_row = x + (size_t)n * D, *dout_row = dout + (size_t)n * D;
        const float32x4_t mean4 = vdupq_n_f32(mean[n]), rstd4 = vdupq_n_f32(rstd[n]);

        /* pass 1: the two row sums (double, 8 floats a step as AVX2), and
         * the parameter gradients */
        Sum8 sum_g8 = sum8_zero(), sum_g_xhat8 = sum8_zero();
        int d = 0;
        for (; d + 8 <= D; d += 8) {
            float32x4_t g[2], g_xhat[2];
            for (int half = 0; half < 2; half++) {
                const int at = d + 4 * half;
                float32x4_t xhat = vmulq_f32(vsubq_f32(vld1q_f32(x_row + at), mean4), rstd4);
                float32x4_t dout4 = vld1q_f32(dout_row + at);
                g[half] = vmulq_f32(dout4, vld1q_f32(gamma + at));
                g_xhat[half] = vmulq_f32(g[half], xhat);
                if (dgamma) vst1q_f32(dgamma + at, vfmaq_f32(vld1q_f32(dgamma + at), dout4, xhat));
                if (dbeta) vst1q_f32(dbeta + at, vaddq_f32(vld1q_f32(dbeta + at), dout4));
            }
            sum8_add(&sum_g8, g[0], g[1]);
            sum8_add(&sum_g_xhat8, g_xhat[0], g_xhat[1]);
        }
        double sum_g = sum8_total(&sum_g8), sum_g_xhat = sum8_total(&sum_g_xhat8);
        for (; d < D; d++) {   /* the last D mod 8 columns, the same float steps one at a time */
            float xhat = (x_row[d] - mean[n]) * rstd[n];
            float g = dout_row[d] * gamma[d];
            float g_xhat = g * xhat;
            sum_g += g;
            sum_g_xhat += g_xhat;
            if (dgamma) dgamma[d] = fmaf(dout_row[d], xhat, dgamma[d]);
            if (dbeta) dbeta[d] += dout_row[d];
        }
        if (dx == NULL) continue;

        /* pass 2: dx += rstd (g - mean(g) - xhat mean(g xhat)) */
        float *dx_row = dx + (size_t)n * D;
        const float mean_g_f = (float)(sum_g / D), mean_g_xhat_f = (float)(sum_g_xhat / D);
        const float32x4_t mean_g = vdupq_n_f32(mean_g_f), mean_g_xhat = vdupq_n_f32(mean_g_xhat_f);
        for (d = 0; d + 4 <= D; d += 4) {
            float32x4_t xhat = vmulq_f32(vsubq_f32(vld1q_f32(x_row + d), mean4), rstd4);
            float32x4_t g = vmulq_f32(vld1q_f32(dout_row + d), vld1q_f32(gamma + d));
            float32x4_t inner = vfmsq_f32(vsubq_f32(g, mean_g), xhat, mean_g_xhat); /* (g - mean_g) - xhat m, fused */
            vst1q_f32(dx_row + d, vfmaq_f32(vld1q_f32(dx_row + d), rstd4, inner));
        }
        for (; d < D; d++)
            dx_row[d] = dx1(dx_row[d], x_row[d], dout_row[d], gamma[d], mean[n], rstd[n], mean_g_f, mean_g_xhat_f);
    }
}

#endif /* __aarch64__ */
