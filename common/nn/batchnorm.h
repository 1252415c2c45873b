/* batchnorm.h - batch normalisation (Ioffe and Szegedy 2015) over the rows of
 * a matrix, as PyTorch's nn.BatchNorm1d(D) on an [R, D] input.
 *
 * LayerNorm (layers.h) normalises each ROW (one position) over its D
 * features; batch norm normalises each FEATURE d over the rows, here the
 * R = B N positions of B sequences of N (every position of every example of
 * the batch):
 *
 *   mu_d  = (1/M) sum_r x_rd,    var_d = (1/M) sum_r (x_rd - mu_d)^2   (biased; M counted rows)
 *   rstd_d = 1 / sqrt(var_d + eps),   xhat_rd = (x_rd - mu_d) rstd_d,
 *   out_rd = gamma_d xhat_rd + beta_d                  (gamma [D], beta [D])
 *
 * So a row's output depends on every other row of the batch: on the other
 * examples, and on the other positions of its own sequence (the reason a
 * causal model cannot use it, chapter 06's gpt.c). Padding: with lens, row
 * (b, n) is counted in the statistics only when n < lens[b] (lens[b] = 0:
 * all N), so padded positions never move the real ones; every row is
 * normalised (a padded row's output is the caller's to ignore).
 *
 * In training the statistics are the batch's, and running averages of them
 * are kept for evaluation, as PyTorch does with momentum m = 0.1:
 *   running_mean = (1 - m) running_mean + m mu,
 *   running_var  = (1 - m) running_var  + m var M / (M - 1)   (the unbiased variance; M = 1: var)
 * (they start at 0 and 1). In evaluation the running averages are the
 * statistics: out = gamma (x - running_mean) / sqrt(running_var + eps) + beta,
 * the same affine map for every row, so a row no longer depends on the
 * others. Sums are taken in double (two passes: the means, then the squared
 * distances), each output computed in double and rounded once, the
 * specification style of kernels/layernorm.c. Nothing is allocated. */
#ifndef BATCHNORM_H
#define BATCHNORM_H

#define BATCHNORM_MOMENTUM 0.1f   /* PyTorch's default for the running averages */

/* Rows counted in the statistics: sum_b lens[b] (lens[b] = 0, or lens NULL: N each). */
int batchnorm_counted_rows(const int *lens, int B, int N);

/* Training: x [B, N, D] (R = B N rows) -> out [R, D], mean [D], rstd [D]
 * (the batch's statistics, kept for backward); and, when running_mean and
 * running_var [D] are not NULL, those updated with momentum. lens [B] or
 * NULL as above. With no row counted, mean 0 and var 0. */
void batchnorm_forward(float *out, float *mean, float *rstd, float *running_mean, float *running_var, const float *x,
                       const float *gamma, const float *beta, const int *lens, int B, int N, int D, float eps,
                       float momentum);

/* Evaluation: x [R, D] -> out [R, D] with the running statistics
 * running_mean, running_var [D]; mean [D] and rstd [D] get the statistics
 * used (running_mean, 1 / sqrt(running_var + eps)) for a backward (either
 * may be NULL). */
void batchnorm_forward_running(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                               const float *beta, const float *running_mean, const float *running_var, int R, int D,
                               float eps);

/* dout [B, N, D] -> dx [B, N, D] +=, dgamma [D] +=, dbeta [D] += (any may be
 * NULL). mean, rstd: what forward kept; x, gamma, lens as forward saw them.
 * batch_statistics 1 (after batchnorm_forward): the full gradient, through
 * the statistics, with g = dout gamma and M counted rows,
 *   dx_rd = rstd_d (g_rd - [r counted] (sum_r' g_r'd + xhat_rd sum_r' g_r'd xhat_r'd) / M)
 * (the sums over every row, counted or not: a padded row's output depends on
 * the statistics too); 0 (after batchnorm_forward_running): the statistics
 * were constants, dx_rd = rstd_d g_rd. In both,
 *   dgamma_d = sum_r dout_rd xhat_rd,   dbeta_d = sum_r dout_rd. */
void batchnorm_backward(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                        const float *rstd, const float *x, const float *gamma, const int *lens, int B, int N, int D,
                        int batch_statistics);

#endif
