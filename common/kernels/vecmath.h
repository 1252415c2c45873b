/* vecmath.h - element-wise exp, tanh, sigmoid, ReLU and GELU over arrays, and
 * softmax along rows, with a backend.
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
 *          tests/test_vecmath.c over a dense sweep of inputs. The avx512
 *          backend (wider matrix products) uses these same AVX2 forms.
 *   neon   4 floats at a time with AArch64 NEON (vecmath_neon.c), the AVX2
 *          forms' operations lane for lane: the same bits
 *          (tests/test_vecmath_neon.c).
 *
 * All take y[n] and x[n]; y may equal x (in place); no alignment needed;
 * n may be any count >= 0. NaN in gives NaN out. (GELU's naive forms
 * compute in double and round once: see below.) */
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

/* GELU, the activation of the transformer's MLP (chapter 06), two forms:
 *   exact:  y = x Phi(x) = x/2 (1 + erf(x / sqrt 2))     (BERT, ViT; PyTorch nn.GELU())
 *   tanh:   y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 *                                   (GPT-2, llm.c; PyTorch nn.GELU(approximate='tanh'))
 * Phi is the standard normal CDF: GELU weighs x by the probability that a
 * standard normal variable is below it. The two forms differ by at most
 * 4.7e-4 (near x = +-2.7) and are different functions: use the one a model
 * was trained with.
 * Backward takes the forward INPUT x and accumulates dx += dy * gelu'(x);
 * dx, dy and x may be the same array.
 * The naive forms are the specification: each value computed in double with
 * libm (erfc, exp) and rounded once to float. They stay accurate in the
 * negative tail, where 1 + erf(x / sqrt 2) in float (or even in double, as
 * PyTorch's float64 kernel does) cancels to 0: GELU(-10) is -7.7e-23, not 0.
 * At the infinities they give the limits, gelu(-inf) = -0, gelu(inf) = inf,
 * gelu'(-inf) = 0, gelu'(inf) = 1 (PyTorch gives NaN there).
 * The avx2 forms' error bounds are stated in vecmath_avx2.c. */
void vec_gelu(float *y, const float *x, int n);
void vec_gelu_backward(float *dx, const float *dy, const float *x, int n);
void vec_gelu_tanh(float *y, const float *x, int n);
void vec_gelu_tanh_backward(float *dx, const float *dy, const float *x, int n);

/* Softmax along each row of x[rows, C] and its backward, on one thread
 * (layers.h's softmax_forward and softmax_backward give each thread a band
 * of rows and are what models call):
 *   forward:  y_j = e^(x_j - max) / sum_k e^(x_k - max); an entry -inf gets
 *             exactly 0, a row of all -inf gives all zeros; y may equal x.
 *   backward: dx_j += y_j (dy_j - sum_i dy_i y_i), given the forward OUTPUT y.
 * Both sums are accumulated in double. The avx2 forms differ from the naive
 * ones only by exp (<= 2 ulp, as vec_exp) and by the order of the sums:
 * about 3 ulp of y, checked by tests/test_vecmath.c. With C = 50 (a ViT's
 * attention rows) the naive loops are scalar and took 13% of chapter 07's
 * training step. */
void vec_softmax_rows(float *y, const float *x, int rows, int C);
void vec_softmax_backward_rows(float *dx, const float *dy, const float *y, int rows, int C);

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
void vec_gelu_naive(float *y, const float *x, int n);
void vec_gelu_backward_naive(float *dx, const float *dy, const float *x, int n);
void vec_gelu_tanh_naive(float *y, const float *x, int n);
void vec_gelu_tanh_backward_naive(float *dx, const float *dy, const float *x, int n);
void vec_gelu_avx2(float *y, const float *x, int n);
void vec_gelu_backward_avx2(float *dx, const float *dy, const float *x, int n);
void vec_gelu_tanh_avx2(float *y, const float *x, int n);
void vec_gelu_tanh_backward_avx2(float *dx, const float *dy, const float *x, int n);
void vec_softmax_rows_naive(float *y, const float *x, int rows, int C);
void vec_softmax_backward_rows_naive(float *dx, const float *dy, const float *y, int rows, int C);
void vec_softmax_rows_avx2(float *y, const float *x, int rows, int C);
void vec_softmax_backward_rows_avx2(float *dx, const float *dy, const float *y, int rows, int C);

/* The NEON forms (vecmath_neon.c, AArch64 only; backend neon): the AVX2
 * forms' operations 4 lanes at a time, the same bounds. */
void vec_exp_neon(float *y, const float *x, int n);
void vec_tanh_neon(float *y, const float *x, int n);
void vec_sigmoid_neon(float *y, const float *x, int n);
void vec_relu_neon(float *y, const float *x, int n);
void vec_relu_backward_neon(float *dx, const float *dy, const float *x, int n);
void vec_gelu_neon(float *y, const float *x, int n);
void vec_gelu_backward_neon(float *dx, const float *dy, const float *x, int n);
void vec_gelu_tanh_neon(float *y, const float *x, int n);
void vec_gelu_tanh_backward_neon(float *dx, const float *dy, const float *x, int n);
void vec_softmax_rows_neon(float *y, const float *x, int rows, int C);
void vec_softmax_backward_rows_neon(float *dx, const float *dy, const float *y, int rows, int C);

#endif
