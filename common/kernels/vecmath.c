/* vecmath.c - the specification of the element-wise functions and of softmax
 * along rows (plain libm loops) and the dispatch on the backend (see vecmath.h):
 * the AVX2 forms on avx2 and avx512, the NEON forms on neon (AArch64 only).
 * GELU's specification computes in double (see the GELU section). */
#include "kernels/vecmath.h"

#include <math.h>
#include "util/openmp.h"

#include "kernels/matmul.h"

void vec_exp_naive(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] = expf(x[i]);
}

void vec_tanh_naive(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] = tanhf(x[i]);
}

/* 1 / (1 + e^-x), written so that exp never overflows (the form layers.c
 * and cells.c always used: the naive backend gives their exact bits). */
void vec_sigmoid_naive(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) {
        if (x[i] >= 0.0f) {
            y[i] = 1.0f / (1.0f + expf(-x[i]));
        } else {
            float e = expf(x[i]);
            y[i] = e / (1.0f + e);
        }
    }
}

void vec_relu_naive(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void vec_relu_backward_naive(float *dx, const float *dy, const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (x[i] > 0.0f) dx[i] += dy[i];
}

/* ------------------------------------------------------------------------ */
/* GELU: each value in double, rounded once to float                         */
/* ------------------------------------------------------------------------ */

/* Where x multiplies a quantity that is exactly 0 in double beyond |x| = 40
 * (Phi(-40) = erfc(28.3) / 2 and e^(-40^2 / 2) both underflow), x is
 * clamped to [-40, 40]: this changes no finite result, and turns inf * 0 =
 * NaN at x = +-inf into the limit. */
static const double GELU_CLAMP = 40.0;
static const double SQRT_2_OVER_PI = 0.79788456080286535588;      /* sqrt(2 / pi) */
static const double INV_SQRT_2PI = 0.39894228040143267794;        /* 1 / sqrt(2 pi) */
static const double GELU_TANH_CUBIC = 0.044715;

static double clamp_double(double v, double low, double high) {
    return v < low ? low : v > high ? high : v;   /* NaN stays NaN */
}

/* Phi(v) = P(Z <= v) for a standard normal Z, = erfc(-v / sqrt 2) / 2.
 * erfc, not 1 + erf: for v = -10, 1 + erf(-7.07) cancels to 0 in double,
 * while erfc(7.07) = 1.5e-22 keeps all its digits. */
static double normal_cdf(double v) { return 0.5 * erfc(-v * M_SQRT1_2); }

/* y = x Phi(x). */
void vec_gelu_naive(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) {
        double v = x[i];
        double v_low = v < -GELU_CLAMP ? -GELU_CLAMP : v;   /* -inf * Phi(-inf) = -40 * 0 */
        y[i] = (float)(v_low * normal_cdf(v));
    }
}

/* gelu'(x) = Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi) the normal density. */
void vec_gelu_backward_naive(float *dx, const float *dy, const float *x, int n) {
    for (int i = 0; i < n; i++) {
        double v = clamp_double(x[i], -GELU_CLAMP, GELU_CLAMP);
        double grad = normal_cdf(v) + v * INV_SQRT_2PI * exp(-0.5 * v * v);
        dx[i] += dy[i] * (float)grad;
    }
}

/* y = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), evaluated as
 * x / (1 + e^(-2u)): the same function, since (1 + tanh u) / 2 = 1 / (1 + e^-2u),
 * but without the cancellation of 1 + tanh(u) for very negative u (the
 * tanh formula in double gives exactly 0 from x = -7.2 on, where the true
 * value is -2e-16). e^(-2u) = inf gives -0, as it should. */
void vec_gelu_tanh_naive(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) {
        double v = x[i];
        double u = SQRT_2_OVER_PI * (v + GELU_TANH_CUBIC * v * v * v);
        double v_low = v < -GELU_CLAMP ? -GELU_CLAMP : v;   /* -inf / inf would be NaN */
        y[i] = (float)(v_low / (1.0 + exp(-2.0 * u)));
    }
}

/* With s = 1 / (1 + e^(-2u)) (so y = x s) and u' = du/dx:
 * gelu'(x) = s + x s (1 - s) 2u', where 1 - s = 1 / (1 + e^(2u)) is computed
 * as such (not by subtracting s from 1). */
void vec_gelu_tanh_backward_naive(float *dx, const float *dy, const float *x, int n) {
    for (int i = 0; i < n; i++) {
        double v = clamp_double(x[i], -GELU_CLAMP, GELU_CLAMP);
        double u = SQRT_2_OVER_PI * (v + GELU_TANH_CUBIC * v * v * v);
        double du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_CUBIC * v * v);
        double s = 1.0 / (1.0 + exp(-2.0 * u)), one_minus_s = 1.0 / (1.0 + exp(2.0 * u));
        double grad = s + v * s * one_minus_s * 2.0 * du;
        dx[i] += dy[i] * (float)grad;
    }
}

/* ------------------------------------------------------------------------ */
/* Softmax along rows                                                        */
/* ------------------------------------------------------------------------ */

/* Subtracting the row's max keeps every e^(x - max) <= 1 (no overflow). The
 * max skips NaN (a NaN entry still makes the whole row NaN through the sum). */
void vec_softmax_rows_naive(float *y, const float *x, int rows, int C) {
    for (int n = 0; n < rows; n++) {
        const float *xr = x + (size_t)n * C;
        float *yr = y + (size_t)n * C;
        float max = -INFINITY;
        for (int c = 0; c < C; c++) if (xr[c] > max) max = xr[c];
        if (max == -INFINITY) {                 /* fully masked: 0/0, defined as zeros */
            for (int c = 0; c < C; c++) yr[c] = 0.0f;
            continue;
        }
        for (int c = 0; c < C; c++) yr[c] = expf(xr[c] - max);
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += yr[c];
        float inv = (float)(1.0 / sum);
        for (int c = 0; c < C; c++) yr[c] *= inv;
    }
}

/* The Jacobian of softmax, dy_i/dx_j = y_i (delta_ij - y_j), applied to dy:
 * dx_j = y_j (dy_j - sum_i dy_i y_i). Masked entries have y = 0: no gradient. */
void vec_softmax_backward_rows_naive(float *dx, const float *dy, const float *y, int rows, int C) {
    for (int n = 0; n < rows; n++) {
        const float *dyr = dy + (size_t)n * C;
        const float *yr = y + (size_t)n * C;
        float *dxr = dx + (size_t)n * C;
        double dot = 0.0;
        for (int c = 0; c < C; c++) dot += (double)dyr[c] * yr[c];
        for (int c = 0; c < C; c++) dxr[c] += yr[c] * (float)(dyr[c] - dot);
    }
}

/* ------------------------------------------------------------------------ */
/* Dispatch on the backend                                                   */
/* ------------------------------------------------------------------------ */

/* GELU's passes (the dearest element-wise ones, THREAD_COSTS.gelu_ns a value)
 * share a long array out: one piece per thread. The cuts fall on multiples of
 * 64 elements, so each value goes through the same code (the vector loop, or
 * the last n mod 8 values through the tail) as in one call over the whole
 * array: the bits do not depend on the thread count. */
typedef void (*VecFunction)(float *y, const float *x, int n);
typedef void (*VecGradient)(float *dx, const float *dy, const float *x, int n);

static void piece_of(int n, int *start, int *count) {
    int t = omp_get_thread_num(), threads = omp_get_num_threads();
    int blocks = (n + 63) / 64;
    int b0 = (int)((long long)blocks * t / threads), b1 = (int)((long long)blocks * (t + 1) / threads);
    int i0 = b0 * 64, i1 = b1 * 64 < n ? b1 * 64 : n;
    *start = i0;
    *count = i1 > i0 ? i1 - i0 : 0;
}

static void vec_apply(VecFunction f, float *y, const float *x, int n) {
    int threads = threads_for_elements((size_t)n, THREAD_COSTS.gelu_ns);
    if (threads <= 1) {
        f(y, x, n);
        return;
    }
    long long started = threads_now_ns(), done = 0;
#pragma omp parallel num_threads(threads)
    {
        int start, count;
        piece_of(n, &start, &count);
        if (count > 0) f(y + start, x + start, count);
        if (omp_get_thread_num() == 0) done = threads_now_ns();
    }
    threads_note_join(started, done);
}

static void vec_apply_gradient(VecGradient f, float *dx, const float *dy, const float *x, int n) {
    int threads = threads_for_elements((size_t)n, THREAD_COSTS.gelu_ns);
    if (threads <= 1) {
        f(dx, dy, x, n);
        return;
    }
    long long started = threads_now_ns(), done = 0;
#pragma omp parallel num_threads(threads)
    {
        int start, count;
        piece_of(n, &start, &count);
        if (count > 0) f(dx + start, dy + start, x + start, count);
        if (omp_get_thread_num() == 0) done = threads_now_ns();
    }
    threads_note_join(started, done);
}

void vec_exp(float *y, const float *x, int n) {
    if (backend_uses_avx2()) vec_exp_avx2(y, x, n);
#if defined(__aarch64__)
    else if (backend_uses_neon()) vec_exp_neon(y, x, n);
#endif
    else vec_exp_naive(y, x, n);
}

void vec_tanh(float *y, const float *x, int n) {
    if (backend_uses_avx2()) vec_tanh_avx2(y, x, n);
#if defined(__aarch64__)
    else if (backend_uses_neon()) vec_tanh_neon(y, x, n);
#endif
    else vec_tanh_naive(y, x, n);
}

void vec_sigmoid(float *y, const float *x, int n) {
    if (backend_uses_avx2()) vec_sigmoid_avx2(y, x, n);
#if defined(__aarch64__)
    else if (backend_uses_neon()) vec_sigmoid_neon(y, x, n);
#endif
    else vec_sigmoid_naive(y, x, n);
}

void vec_relu(float *y, const float *x, int n) {
    if (backend_uses_avx2()) vec_relu_avx2(y, x, n);
#if defined(__aarch64__)
    else if (backend_uses_neon()) vec_relu_neon(y, x, n);
#endif
    else vec_relu_naive(y, x, n);
}

void vec_relu_backward(float *dx, const float *dy, const float *x, int n) {
    if (backend_uses_avx2()) vec_relu_backward_avx2(dx, dy, x, n);
#if defined(__aarch64__)
    else if (backend_uses_neon()) vec_relu_backward_neon(dx, dy, x, n);
#endif
    else vec_relu_backward_naive(dx, dy, x, n);
}

/* The GELU forms of the backend: AVX2 (avx2, avx512), NEON (neon) or naive. */
static VecFunction backend_form(VecFunction avx2, VecFunction neon, VecFunction naive) {
    if (backend_uses_avx2()) return avx2;
    if (neon != NULL && backend_uses_neon()) return neon;
    return naive;
}

static VecGradient backend_gradient(VecGradient avx2, VecGradient neon, VecGradient naive) {
    if (backend_uses_avx2()) return avx2;
    if (neon != NULL && backend_uses_neon()) return neon;
    return naive;
}

/* The NEON forms exist only on AArch64 (vecmath_neon.c). */
#if defined(__aarch64__)
#define GELU_NEON vec_gelu_neon
#define GELU_BACKWARD_NEON vec_gelu_backward_neon
#define GELU_TANH_NEON vec_gelu_tanh_neon
#define GELU_TANH_BACKWARD_NEON vec_gelu_tanh_backward_neon
#else
#define GELU_NEON NULL
#define GELU_BACKWARD_NEON NULL
#define GELU_TANH_NEON NULL
#define GELU_TANH_BACKWARD_NEON NULL
#endif

void vec_gelu(float *y, const float *x, int n) {
    vec_apply(backend_form(vec_gelu_avx2, GELU_NEON, vec_gelu_naive), y, x, n);
}

void vec_gelu_backward(float *dx, const float *dy, const float *x, int n) {
    vec_apply_gradient(backend_gradient(vec_gelu_backward_avx2, GELU_BACKWARD_NEON, vec_gelu_backward_naive), dx,
                       dy, x, n);
}

void vec_gelu_tanh(float *y, const float *x, int n) {
    vec_apply(backend_form(vec_gelu_tanh_avx2, GELU_TANH_NEON, vec_gelu_tanh_naive), y, x, n);
}

void vec_gelu_tanh_backward(float *dx, const float *dy, const float *x, int n) {
    vec_apply_gradient(
        backend_gradient(vec_gelu_tanh_backward_avx2, GELU_TANH_BACKWARD_NEON, vec_gelu_tanh_backward_naive), dx,
        dy, x, n);
}

void vec_softmax_rows(float *y, const float *x, int rows, int C) {
    if (backend_uses_avx2()) vec_softmax_rows_avx2(y, x, rows, C);
#if defined(__aarch64__)
    else if (backend_uses_neon()) vec_softmax_rows_neon(y, x, rows, C);
#endif
    else vec_softmax_rows_naive(y, x, rows, C);
}

void vec_softmax_backward_rows(float *dx, const float *dy, const float *y, int rows, int C) {
    if (backend_uses_avx2()) vec_softmax_backward_rows_avx2(dx, dy, y, rows, C);
#if defined(__aarch64__)
    else if (backend_uses_neon()) vec_softmax_backward_rows_neon(dx, dy, y, rows, C);
#endif
    else vec_softmax_backward_rows_naive(dx, dy, y, rows, C);
}
