/* layernorm.c - the specification of LayerNorm (see layers.h for the
 * contract, layernorm.h for the two implementations).
 *
 * Plain loops, one row at a time, in double: the row's mean, then its
 * variance from the distances to that mean (the two-pass formula: no
 * cancellation however far the row sits from 0), then each output computed
 * in double and rounded once to float. layernorm_avx2.c is checked against
 * these functions. */
#include "kernels/layernorm.h"

#include <math.h>
#include <stddef.h>

/* x[N,D], gamma[D], beta[D] -> out[N,D], mean[N], rstd[N] (mean, rstd may be NULL) */
void layernorm_forward_naive(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                             const float *beta, int N, int D, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x_row = x + (size_t)n * D;
        float *out_row = out + (size_t)n * D;
        double sum = 0.0;
        for (int d = 0; d < D; d++) sum += x_row[d];
        double row_mean = sum / D;
        double squares = 0.0;
        for (int d = 0; d < D; d++) {
            double centered = x_row[d] - row_mean;
            squares += centered * centered;
        }
        double row_rstd = 1.0 / sqrt(squares / D + eps);
        for (int d = 0; d < D; d++) {
            double xhat = (x_row[d] - row_mean) * row_rstd;
            out_row[d] = (float)(xhat * gamma[d] + beta[d]);
        }
        if (mean) mean[n] = (float)row_mean;
        if (rstd) rstd[n] = (float)row_rstd;
    }
}

/* dout[N,D] -> dx[N,D] +=, dgamma[D] +=, dbeta[D] += (any may be NULL).
 * xhat is recomputed from x and the saved (float) mean and rstd. With
 * g = dout * gamma and means over the row:
 *   dx = rstd (g - mean(g) - xhat mean(g xhat)),
 * the gradient of out = xhat gamma + beta through xhat = (x - mean) rstd,
 * where mean and rstd depend on every x of the row. */
void layernorm_backward_naive(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                              const float *rstd, const float *x, const float *gamma, int N, int D) {
    for (int n = 0; n < N; n++) {
        const float *x_row = x + (size_t)n * D, *dout_row = dout + (size_t)n * D;
        double row_mean = mean[n], row_rstd = rstd[n];
        double sum_g = 0.0, sum_g_xhat = 0.0;
        for (int d = 0; d < D; d++) {
            double xhat = (x_row[d] - row_mean) * row_rstd;
            double g = (double)dout_row[d] * gamma[d];
            sum_g += g;
            sum_g_xhat += g * xhat;
            if (dgamma) dgamma[d] += (float)(dout_row[d] * xhat);
            if (dbeta) dbeta[d] += dout_row[d];
        }
        if (dx == NULL) continue;
        double mean_g = sum_g / D, mean_g_xhat = sum_g_xhat / D;
        float *dx_row = dx + (size_t)n * D;
        for (int d = 0; d < D; d++) {
            double xhat = (x_row[d] - row_mean) * row_rstd;
            double g = (double)dout_row[d] * gamma[d];
            dx_row[d] += (float)(row_rstd * (g - mean_g - xhat * mean_g_xhat));
        }
    }
}
