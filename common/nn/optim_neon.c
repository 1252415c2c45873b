/* optim_neon.c - the Adam update of optim.c, four parameters at a time with
 * AArch64 Advanced SIMD (NEON): the form of optim_avx2.c (read it for why).
 *
 * The moments in float (4 lanes), the update in double (two halves of 2
 * lanes); every +, *, / and sqrt the scalar loop's, in its order, and no
 * fused multiply-add (it would round once where the scalar loop rounds
 * twice). Each rounds the same in a lane as in a scalar register, so the
 * result is the scalar loop's bits, and so the AVX2 form's (test_optim).
 *
 * Compiled only on AArch64 (on any other CPU this file is empty); optim.c
 * calls it only when backend_uses_neon(). */
#if defined(__aarch64__)

#include "nn/optim.h"

#include <arm_neon.h>

/* One half (2 lanes) of the update in double:
 *   w - lr * (m / c1 / (sqrt(v / c2) + eps) + wd * w)   (see optim.c) */
static inline float32x2_t adam_update_half(float32x2_t w, float32x2_t m, float32x2_t v, float64x2_t c1,
                                           float64x2_t c2, float64x2_t eps, float64x2_t wd, float64x2_t lr) {
    float64x2_t w_d = vcvt_f64_f32(w);
    float64x2_t m_hat = vdivq_f64(vcvt_f64_f32(m), c1);
    float64x2_t v_hat = vdivq_f64(vcvt_f64_f32(v), c2);
    float64x2_t update = vaddq_f64(vdivq_f64(m_hat, vaddq_f64(vsqrtq_f64(v_hat), eps)), vmulq_f64(wd, w_d));
    return vcvt_f32_f64(vsubq_f64(w_d, vmulq_f64(lr, update)));
}

/* The first n - n % 4 parameters of one Adam update; returns how many were
 * done (the caller's scalar loop does the rest). Shapes: w, g, m, v [n]. */
size_t adam_update_neon(float *w, const float *g, float *m, float *v, size_t n, float beta1, float beta2,
                        float eps, float weight_decay, float lr, double correction1, double correction2) {
    const float32x4_t b1 = vdupq_n_f32(beta1), b2 = vdupq_n_f32(beta2);
    const float32x4_t one_minus_b1 = vdupq_n_f32(1.0f - beta1), one_minus_b2 = vdupq_n_f32(1.0f - beta2);
    const float64x2_t c1 = vdupq_n_f64(correction1), c2 = vdupq_n_f64(correction2);
    const float64x2_t eps_d = vdupq_n_f64((double)eps), wd_d = vdupq_n_f64((double)weight_decay);
    const float64x2_t lr_d = vdupq_n_f64((double)lr);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t gi = vld1q_f32(g + i);
        /* m = b1 m + (1 - b1) g;  v = b2 v + ((1 - b2) g) g, in float as in optim.c (unfused) */
        float32x4_t mi = vaddq_f32(vmulq_f32(b1, vld1q_f32(m + i)), vmulq_f32(one_minus_b1, gi));
        float32x4_t vi = vaddq_f32(vmulq_f32(b2, vld1q_f32(v + i)), vmulq_f32(vmulq_f32(one_minus_b2, gi), gi));
        vst1q_f32(m + i, mi);
        vst1q_f32(v + i, vi);
        float32x4_t wi = vld1q_f32(w + i);
        float32x2_t low = adam_update_half(vget_low_f32(wi), vget_low_f32(mi), vget_low_f32(vi), c1, c2, eps_d,
                                           wd_d, lr_d);
        float32x2_t high = adam_update_half(vget_high_f32(wi), vget_high_f32(mi), vget_high_f32(vi), c1, c2, eps_d,
                                            wd_d, lr_d);
        vst1q_f32(w + i, vcombine_f32(low, high));
    }
    return i;
}

#endif /* __aarch64__ */
