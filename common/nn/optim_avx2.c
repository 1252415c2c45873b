/* optim_avx2.c - the Adam update of optim.c, eight parameters at a time.
 *
 * adam_step's scalar loop spends about 30 cycles per parameter, most of them
 * in two double divisions and a double square root; in the small chapters
 * that was 14% of a training step (tools/profile_step.sh, chapter 05). Here
 * the same operations run on vectors: the moments in float (8 lanes), the
 * update in double (two halves of 4 lanes). Each +, *, / and sqrt rounds the
 * same in a vector lane as in a scalar register, and the operations are the
 * scalar loop's, in its order, so the result is the same bits (test_optim
 * compares the two). No fused multiply-add is used: it would round once
 * where the scalar loop rounds twice.
 *
 * Compiled with -mavx2 -mfma (Makefile rule for *_avx2.c); optim.c calls it
 * only when backend_uses_avx2(). */
#include "nn/optim.h"

#include <immintrin.h>

/* One half (4 lanes) of the update in double:
 *   w - lr * (m / c1 / (sqrt(v / c2) + eps) + wd * w)   (see optim.c) */
static inline __m128 adam_update_half(__m128 w, __m128 m, __m128 v, __m256d c1, __m256d c2,
                                      __m256d eps, __m256d wd, __m256d lr) {
    __m256d w_d = _mm256_cvtps_pd(w);
    __m256d m_hat = _mm256_div_pd(_mm256_cvtps_pd(m), c1);
    __m256d v_hat = _mm256_div_pd(_mm256_cvtps_pd(v), c2);
    __m256d update = _mm256_add_pd(_mm256_div_pd(m_hat, _mm256_add_pd(_mm256_sqrt_pd(v_hat), eps)),
                                   _mm256_mul_pd(wd, w_d));
    return _mm256_cvtpd_ps(_mm256_sub_pd(w_d, _mm256_mul_pd(lr, update)));
}

/* The first n - n % 8 parameters of one Adam update; returns how many were
 * done (the caller's scalar loop does the rest). Shapes: w, g, m, v [n]. */
size_t adam_update_avx2(float *w, const float *g, float *m, float *v, size_t n, float beta1,
                        float beta2, float eps, float weight_decay, float lr, double correction1,
                        double correction2) {
    const __m256 b1 = _mm256_set1_ps(beta1), b2 = _mm256_set1_ps(beta2);
    const __m256 one_minus_b1 = _mm256_set1_ps(1.0f - beta1), one_minus_b2 = _mm256_set1_ps(1.0f - beta2);
    const __m256d c1 = _mm256_set1_pd(correction1), c2 = _mm256_set1_pd(correction2);
    const __m256d eps_d = _mm256_set1_pd((double)eps), wd_d = _mm256_set1_pd((double)weight_decay);
    const __m256d lr_d = _mm256_set1_pd((double)lr);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gi = _mm256_loadu_ps(g + i);
        /* m = b1 m + (1 - b1) g;  v = b2 v + ((1 - b2) g) g, in float as in optim.c */
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(one_minus_b1, gi));
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                  _mm256_mul_ps(_mm256_mul_ps(one_minus_b2, gi), gi));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        __m256 wi = _mm256_loadu_ps(w + i);
        __m128 lo = adam_update_half(_mm256_castps256_ps128(wi), _mm256_castps256_ps128(mi),
                                     _mm256_castps256_ps128(vi), c1, c2, eps_d, wd_d, lr_d);
        __m128 hi = adam_update_half(_mm256_extractf128_ps(wi, 1), _mm256_extractf128_ps(mi, 1),
                                     _mm256_extractf128_ps(vi, 1), c1, c2, eps_d, wd_d, lr_d);
        _mm256_storeu_ps(w + i, _mm256_set_m128(hi, lo));
    }
    return i;
}
