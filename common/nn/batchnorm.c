/* batchnorm.c - batch normalisation over the rows of [R, D] (see batchnorm.h).
 *
 * The statistics run down the columns of a row-major matrix. To read the rows
 * in order (one cache line after the next) and still sum in double without
 * allocating, the features are taken in blocks of FEATURE_BLOCK, with the
 * block's double accumulators on the stack. */
#include "nn/batchnorm.h"

#include <math.h>
#include <stddef.h>

enum { FEATURE_BLOCK = 64 };

/* 1 when row n of sequence b is counted in the statistics */
static int counted(const int *lens, int b, int n) {
    return lens == NULL || lens[b] == 0 || n < lens[b];
}

int batchnorm_counted_rows(const int *lens, int B, int N) {
    int M = 0;
    for (int b = 0; b < B; b++) M += (lens == NULL || lens[b] == 0) ? N : lens[b];
    return M;
}

void batchnorm_forward(float *out, float *mean, float *rstd, float *running_mean, float *running_var, const float *x,
                       const float *gamma, const float *beta, const int *lens, int B, int N, int D, float eps,
                       float momentum) {
    const int M = batchnorm_counted_rows(lens, B, N);
    for (int d0 = 0; d0 < D; d0 += FEATURE_BLOCK) {
        const int nd = D - d0 < FEATURE_BLOCK ? D - d0 : FEATURE_BLOCK;
        double mu[FEATURE_BLOCK] = {0}, var[FEATURE_BLOCK] = {0};
        for (int b = 0; b < B; b++)   /* pass 1: the means */
            for (int n = 0; n < N; n++) {
                if (!counted(lens, b, n)) continue;
                const float *xr = x + ((size_t)b * N + n) * D + d0;
                for (int j = 0; j < nd; j++) mu[j] += xr[j];
            }
        for (int j = 0; j < nd; j++) mu[j] = M > 0 ? mu[j] / M : 0.0;
        for (int b = 0; b < B; b++)   /* pass 2: the squared distances to them */
            for (int n = 0; n < N; n++) {
                if (!counted(lens, b, n)) continue;
                const float *xr = x + ((size_t)b * N + n) * D + d0;
                for (int j = 0; j < nd; j++) {
                    const double c = xr[j] - mu[j];
                    var[j] += c * c;
                }
            }
        double r[FEATURE_BLOCK];
        for (int j = 0; j < nd; j++) {
            const double biased = M > 0 ? var[j] / M : 0.0;
            r[j] = 1.0 / sqrt(biased + eps);
            if (mean) mean[d0 + j] = (float)mu[j];
            if (rstd) rstd[d0 + j] = (float)r[j];
            if (running_mean && running_var) {
                const double unbiased = M > 1 ? var[j] / (M - 1) : biased;
                running_mean[d0 + j] = (float)((1.0 - momentum) * running_mean[d0 + j] + momentum * mu[j]);
                running_var[d0 + j] = (float)((1.0 - momentum) * running_var[d0 + j] + momentum * unbiased);
            }
        }
        for (size_t row = 0; row < (size_t)B * N; row++) {   /* every row, padding too */
            const float *xr = x + row * D + d0;
            float *o = out + row * D + d0;
            for (int j = 0; j < nd; j++) o[j] = (float)((xr[j] - mu[j]) * r[j] * gamma[d0 + j] + beta[d0 + j]);
        }
    }
}

void batchnorm_forward_running(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                               const float *beta, const float *running_mean, const float *running_var, int R, int D,
                               float eps) {
    for (int d = 0; d < D; d++) {
        if (mean) mean[d] = running_mean[d];
        if (rstd) rstd[d] = (float)(1.0 / sqrt((double)running_var[d] + eps));
    }
    for (size_t row = 0; row < (size_t)R; row++) {
        const float *xr = x + row * D;
        float *o = out + row * D;
        for (int d = 0; d < D; d++)
            o[d] = (float)(((double)xr[d] - running_mean[d]) / sqrt((double)running_var[d] + eps) * gamma[d] + beta[d]);
    }
}

/* y = gamma xhat + beta with xhat = (x - mu) rstd. Through the statistics
 * (M counted rows, c_r = 1 for a counted row): d mu / d x_r = c_r / M and
 * d var / d x_r = 2 c_r (x_r - mu) / M (the mean's own term sums to zero),
 * d rstd / d var = -rstd^3 / 2, so with g = dout gamma,
 *   dx_r = rstd g_r - (c_r rstd / M) sum_r' g_r' - (c_r rstd / M) xhat_r sum_r' g_r' xhat_r'. */
void batchnorm_backward(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                        const float *rstd, const float *x, const float *gamma, const int *lens, int B, int N, int D,
                        int batch_statistics) {
    const int M = batchnorm_counted_rows(lens, B, N);
    const size_t R = (size_t)B * N;
    for (int d0 = 0; d0 < D; d0 += FEATURE_BLOCK) {
        const int nd = D - d0 < FEATURE_BLOCK ? D - d0 : FEATURE_BLOCK;
        double sum_g[FEATURE_BLOCK] = {0}, sum_g_xhat[FEATURE_BLOCK] = {0};
        double sum_dout[FEATURE_BLOCK] = {0}, sum_dout_xhat[FEATURE_BLOCK] = {0};
        for (size_t row = 0; row < R; row++) {
            const float *xr = x + row * D + d0, *dr = dout + row * D + d0;
            for (int j = 0; j < nd; j++) {
                const double xhat = ((double)xr[j] - mean[d0 + j]) * rstd[d0 + j];
                sum_dout[j] += dr[j];
                sum_dout_xhat[j] += dr[j] * xhat;
            }
        }
        for (int j = 0; j < nd; j++) {
            sum_g[j] = sum_dout[j] * gamma[d0 + j];
            sum_g_xhat[j] = sum_dout_xhat[j] * gamma[d0 + j];
            if (dgamma) dgamma[d0 + j] += (float)sum_dout_xhat[j];
            if (dbeta) dbeta[d0 + j] += (float)sum_dout[j];
        }
        if (dx == NULL) continue;
        const int through = batch_statistics && M > 0;
        for (int b = 0; b < B; b++)
            for (int n = 0; n < N; n++) {
                const size_t row = (size_t)b * N + n;
                const float *xr = x + row * D + d0, *dr = dout + row * D + d0;
                float *o = dx + row * D + d0;
                const int c = through && counted(lens, b, n);
                for (int j = 0; j < nd; j++) {
                    const double r = rstd[d0 + j], g = (double)dr[j] * gamma[d0 + j];
                    double v = g;
                    if (c) {
                        const double xhat = ((double)xr[j] - mean[d0 + j]) * r;
                        v -= (sum_g[j] + xhat * sum_g_xhat[j]) / M;
                    }
                    o[j] += (float)(r * v);
                }
            }
    }
}
