/* vecmath.c - the specification of the element-wise functions (plain libm
 * loops) and the dispatch on the backend (see vecmath.h). */
#include "vecmath.h"

#include <math.h>

#include "matmul.h"

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

void vec_exp(float *y, const float *x, int n) {
    if (backend_uses_avx2()) vec_exp_avx2(y, x, n);
    else vec_exp_naive(y, x, n);
}

void vec_tanh(float *y, const float *x, int n) {
    if (backend_uses_avx2()) vec_tanh_avx2(y, x, n);
    else vec_tanh_naive(y, x, n);
}

void vec_sigmoid(float *y, const float *x, int n) {
    if (backend_uses_avx2()) vec_sigmoid_avx2(y, x, n);
    else vec_sigmoid_naive(y, x, n);
}

void vec_relu(float *y, const float *x, int n) {
    if (backend_uses_avx2()) vec_relu_avx2(y, x, n);
    else vec_relu_naive(y, x, n);
}

void vec_relu_backward(float *dx, const float *dy, const float *x, int n) {
    if (backend_uses_avx2()) vec_relu_backward_avx2(dx, dy, x, n);
    else vec_relu_backward_naive(dx, dy, x, n);
}
