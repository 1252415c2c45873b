/* transformer_layers.c - residual, RMSNorm, SwiGLU, dropout and drop path as
 * forward/backward pairs (see transformer_layers.h).
 *
 * Plain loops: these layers are element-wise or one pass over a row, cheap
 * next to the block's matrix products. RMSNorm and SwiGLU compute in double
 * and round once, like the naive LayerNorm and GELU specifications. */
#include "nn/transformer_layers.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Residual                                                                  */
/* ------------------------------------------------------------------------ */

/* out[n] = x[n] + branch[n] */
void residual_forward(float *out, const float *x, const float *branch, int n) {
#pragma omp simd   /* vectorised even if out is x or branch (no value carries from i to i + 1) */
    for (int i = 0; i < n; i++) out[i] = x[i] + branch[i];
}

/* dout[n] -> dx[n] +=, dbranch[n] += */
void residual_backward(float *dx, float *dbranch, const float *dout, int n) {
    if (dx)
#pragma omp simd   /* as in residual_forward */
        for (int i = 0; i < n; i++) dx[i] += dout[i];
    if (dbranch)
#pragma omp simd
        for (int i = 0; i < n; i++) dbranch[i] += dout[i];
}

/* ------------------------------------------------------------------------ */
/* RMSNorm                                                                   */
/* ------------------------------------------------------------------------ */

/* x[N,D], gamma[D] -> out[N,D], rstd[N] (rstd may be NULL) */
void rmsnorm_forward(float *out, float *rstd, const float *x, const float *gamma, int N, int D,
                     float eps) {
    for (int n = 0; n < N; n++) {
        const float *x_row = x + (size_t)n * D;
        float *out_row = out + (size_t)n * D;
        double squares = 0.0;
        for (int d = 0; d < D; d++) squares += (double)x_row[d] * x_row[d];
        double row_rstd = 1.0 / sqrt(squares / D + eps);
        for (int d = 0; d < D; d++) out_row[d] = (float)(x_row[d] * row_rstd * gamma[d]);
        if (rstd) rstd[n] = (float)row_rstd;
    }
}

/* dout[N,D] -> dx[N,D] +=, dgamma[D] += (either may be NULL).
 * out = xhat gamma with xhat = x rstd and rstd = (mean(x^2) + eps)^(-1/2):
 * d rstd / d x_j = -rstd^3 x_j / D, so with g = dout gamma,
 *   dx_j = g_j rstd - (rstd^3 x_j / D) sum_d g_d x_d
 *        = rstd (g_j - xhat_j mean_d(g_d xhat_d)). */
void rmsnorm_backward(float *dx, float *dgamma, const float *dout, const float *rstd, const float *x,
                      const float *gamma, int N, int D) {
    for (int n = 0; n < N; n++) {
        const float *x_row = x + (size_t)n * D, *dout_row = dout + (size_t)n * D;
        double row_rstd = rstd[n];
        double sum_g_xhat = 0.0;
        for (int d = 0; d < D; d++) {
            double xhat = x_row[d] * row_rstd;
            sum_g_xhat += (double)dout_row[d] * gamma[d] * xhat;
            if (dgamma) dgamma[d] += (float)(dout_row[d] * xhat);
        }
        if (dx == NULL) continue;
        double mean_g_xhat = sum_g_xhat / D;
        float *dx_row = dx + (size_t)n * D;
        for (int d = 0; d < D; d++) {
            double xhat = x_row[d] * row_rstd;
            double g = (double)dout_row[d] * gamma[d];
            dx_row[d] += (float)(row_rstd * (g - xhat * mean_g_xhat));
        }
    }
}

/* ------------------------------------------------------------------------ */
/* SwiGLU                                                                    */
/* ------------------------------------------------------------------------ */

/* sigmoid(a) = 1 / (1 + e^-a), written so that exp never overflows */
static double sigmoid(double a) {
    if (a >= 0.0) return 1.0 / (1.0 + exp(-a));
    double e = exp(a);
    return e / (1.0 + e);
}

/* a[n], g[n] -> h[n] = silu(a) g */
void swiglu_forward(float *h, const float *a, const float *g, int n) {
    for (int i = 0; i < n; i++) {
        double silu = a[i] * sigmoid(a[i]);
        h[i] = (float)(silu * g[i]);
    }
}

/* dh[n] -> da[n] += dh g silu'(a), dg[n] += dh silu(a) */
void swiglu_backward(float *da, float *dg, const float *dh, const float *a, const float *g, int n) {
    for (int i = 0; i < n; i++) {
        double s = sigmoid(a[i]);
        if (da) da[i] += (float)((double)dh[i] * g[i] * s * (1.0 + a[i] * (1.0 - s)));
        if (dg) dg[i] += (float)((double)dh[i] * a[i] * s);
    }
}

/* ------------------------------------------------------------------------ */
/* Dropout                                                                   */
/* ------------------------------------------------------------------------ */

/* x[n] -> y[n] = x mask, mask[n] (NULL allowed only for the identity) */
void dropout_forward(float *y, float *mask, const float *x, int n, float p, int train, Rng *rng) {
    if (!train || p == 0.0f) {   /* the identity: same bits, nothing drawn */
        if (y != x) memcpy(y, x, sizeof(float) * (size_t)n);
        if (mask)
            for (int i = 0; i < n; i++) mask[i] = 1.0f;
        return;
    }
    dropout_mask(mask, n, p, rng);
    for (int i = 0; i < n; i++) y[i] = x[i] * mask[i];
}

/* mask[i] = 0 with probability p, else 1/(1-p) */
void dropout_mask(float *mask, int n, float p, Rng *rng) {
    if (p == 0.0f) {   /* nothing dropped, nothing drawn */
        for (int i = 0; i < n; i++) mask[i] = 1.0f;
        return;
    }
    const float scale = 1.0f / (1.0f - p);
    for (int i = 0; i < n; i++) mask[i] = rng_uniform(rng) < p ? 0.0f : scale;
}

/* dy[n] -> dx[n] += dy mask */
void dropout_backward(float *dx, const float *dy, const float *mask, int n) {
    for (int i = 0; i < n; i++) dx[i] += dy[i] * mask[i];
}

/* x[B, n] -> y[B, n] = x[b, i] keep[b], keep[B] = 0 (probability p) or 1/(1-p) */
void drop_path_forward(float *y, float *keep, const float *x, int B, int n, float p, int train, Rng *rng) {
    if (!train || p == 0.0f) {   /* the identity: same bits, nothing drawn */
        if (y != x) memcpy(y, x, sizeof(float) * (size_t)B * n);
        if (keep)
            for (int b = 0; b < B; b++) keep[b] = 1.0f;
        return;
    }
    dropout_mask(keep, B, p, rng);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++) y[(size_t)b * n + i] = x[(size_t)b * n + i] * keep[b];
}

/* dy[B, n] -> dx[B, n] += dy keep[b] */
void drop_path_backward(float *dx, const float *dy, const float *keep, int B, int n) {
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++) dx[(size_t)b * n + i] += dy[(size_t)b * n + i] * keep[b];
}
