/* x86_stubs.c - the x86 kernels' entry points on a CPU that is not x86.
 *
 * The AVX2 and AVX-512 files (*_avx2.c, *_avx512.c, *_bf16.c) are built only
 * for x86: their instructions exist nowhere else. Code and tests that call
 * them still link everywhere, because every such call sits behind a run-time
 * check (cpu_has_avx2_fma(), backend_uses_avx2(), ...) that is 0 on other
 * CPUs. These stand in for them there, so the program links, and stop the
 * program with a message if one is ever reached (a missing check is a bug).
 *
 * On x86 this file is empty. */
#if !defined(__x86_64__) && !defined(__i386__)

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"
#include "kernels/vecmath.h"
#include "nn/optim.h"

static void no_x86(const char *function) {
    fprintf(stderr, "%s: an x86 kernel, called on a CPU that is not x86 (a missing cpu_has_* check)\n",
            function);
    abort();
}

void sgemm_avx2(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                const float *B, int ldb, float beta, float *C, int ldc) {
    (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda;
    (void)B, (void)ldb, (void)beta, (void)C, (void)ldc;
    no_x86(__func__);
}

void sgemm_small_avx2(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                      int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    sgemm_avx2(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sgemm_avx512(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    sgemm_avx2(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sgemm_avx512_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    sgemm_avx2(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const GemmKernel *gemm_kernel_avx2(void) {
    no_x86(__func__);
    return NULL;
}
const GemmKernel *gemm_kernel_avx512(void) { return gemm_kernel_avx2(); }
const GemmKernel *gemm_kernel_avx512_bf16(void) { return gemm_kernel_avx2(); }

/* The element-wise kernels of vecmath.h: y[n] from x[n], dx[n] from dy[n], x[n]. */
static void no_vec(float *y, const float *x, int n) {
    (void)y, (void)x, (void)n;
    no_x86("vec_*_avx2");
}
static void no_vec_gradient(float *dx, const float *dy, const float *x, int n) {
    (void)dx, (void)dy, (void)x, (void)n;
    no_x86("vec_*_backward_avx2");
}
void vec_exp_avx2(float *y, const float *x, int n) { no_vec(y, x, n); }
void vec_tanh_avx2(float *y, const float *x, int n) { no_vec(y, x, n); }
void vec_sigmoid_avx2(float *y, const float *x, int n) { no_vec(y, x, n); }
void vec_relu_avx2(float *y, const float *x, int n) { no_vec(y, x, n); }
void vec_gelu_avx2(float *y, const float *x, int n) { no_vec(y, x, n); }
void vec_gelu_tanh_avx2(float *y, const float *x, int n) { no_vec(y, x, n); }
void vec_relu_backward_avx2(float *dx, const float *dy, const float *x, int n) { no_vec_gradient(dx, dy, x, n); }
void vec_gelu_backward_avx2(float *dx, const float *dy, const float *x, int n) { no_vec_gradient(dx, dy, x, n); }
void vec_gelu_tanh_backward_avx2(float *dx, const float *dy, const float *x, int n) {
    no_vec_gradient(dx, dy, x, n);
}
void vec_softmax_rows_avx2(float *y, const float *x, int rows, int C) { no_vec(y, x, rows * C); }
void vec_softmax_backward_rows_avx2(float *dx, const float *dy, const float *y, int rows, int C) {
    no_vec_gradient(dx, dy, y, rows * C);
}

void layernorm_forward_avx2(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                            const float *beta, int N, int D, float eps) {
    (void)out, (void)mean, (void)rstd, (void)x, (void)gamma, (void)beta, (void)N, (void)D, (void)eps;
    no_x86(__func__);
}

void layernorm_backward_avx2(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                             const float *rstd, const float *x, const float *gamma, int N, int D) {
    (void)dx, (void)dgamma, (void)dbeta, (void)dout, (void)mean, (void)rstd, (void)x, (void)gamma;
    (void)N, (void)D;
    no_x86(__func__);
}

size_t adam_update_avx2(float *w, const float *g, float *m, float *v, size_t n, float beta1, float beta2,
                        float eps, float weight_decay, float lr, double correction1, double correction2) {
    (void)w, (void)g, (void)m, (void)v, (void)n, (void)beta1, (void)beta2, (void)eps, (void)weight_decay;
    (void)lr, (void)correction1, (void)correction2;
    no_x86(__func__);
    return 0;
}

#endif /* not x86 */
