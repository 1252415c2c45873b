/* vecmath.h - element-wise exp, tanh and sigmoid over arrays, with a backend.
 *
 * Outside the matrix products, a recurrent model spends its time in the gate
 * non-linearities: chapter 01's GRU calls tanhf and expf 4 * B * H times per
 * time step, and libm computes them one at a time. These functions take a
 * whole array, and dispatch like sgemm() (matmul.h) on backend_current():
 *
 *   naive  the plain libm loop, y[i] = expf(x[i]) etc.: the specification.
 *          Results are bit-identical to calling libm yourself.
 *   avx2   8 floats at a time with AVX2/FMA (vecmath_avx2.c), within a few
 *          units in the last place (ulp) of the naive result; the bound of
 *          each kernel is stated at its definition and checked by
 *          tests/test_vecmath.c over a dense sweep of inputs.
 *
 * All take y[n] and x[n]; y may equal x (in place); no alignment needed;
 * n may be any count >= 0. NaN in gives NaN out. */
#ifndef VECMATH_H
#define VECMATH_H

/* y = e^x.          +-inf -> inf / 0; overflow (x > 88.72) -> inf. */
void vec_exp(float *y, const float *x, int n);
/* y = tanh(x).      saturates to exactly +-1 for large |x|. */
void vec_tanh(float *y, const float *x, int n);
/* y = 1 / (1 + e^-x). in [0, 1]. */
void vec_sigmoid(float *y, const float *x, int n);

/* ReLU and its gradient, same bits on both backends (max and compare are
 * exact); the avx2 form has no branch, the naive loop's if mispredicts on
 * about half of its inputs, which chapter 04's profile shows.
 *   forward:  y = x > 0 ? x : 0                 (NaN -> 0, -0 -> 0)
 *   backward: dx += dy where x > 0 (x is the forward INPUT), else dx unchanged */
void vec_relu(float *y, const float *x, int n);
void vec_relu_backward(float *dx, const float *dy, const float *x, int n);

/* The two implementations, for tests and benchmarks. Call the _avx2 ones
 * only when cpu_has_avx2_fma() is true. */
void vec_exp_naive(float *y, const float *x, int n);
void vec_tanh_naive(float *y, const float *x, int n);
void vec_sigmoid_naive(float *y, const float *x, int n);
void vec_exp_avx2(float *y, const float *x, int n);
void vec_tanh_avx2(float *y, const float *x, int n);
void vec_sigmoid_avx2(float *y, const float *x, int n);
void vec_relu_naive(float *y, const float *x, int n);
void vec_relu_backward_naive(float *dx, const float *dy, const float *x, int n);
void vec_relu_avx2(float *y, const float *x, int n);
void vec_relu_backward_avx2(float *dx, const float *dy, const float *x, int n);

#endif
