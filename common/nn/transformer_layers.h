/* transformer_layers.h - the small layers a transformer block adds to layers.h:
 * the residual connection, RMSNorm, SwiGLU's gating, dropout and stochastic
 * depth (drop path).
 *
 * Same conventions as layers.h: flat row-major float arrays, shapes as int
 * arguments, no allocation, backward ACCUMULATES (+=) into every gradient it
 * writes and skips a NULL gradient pointer. (LayerNorm, GELU and ReLU, which
 * the block also uses, are in layers.h.)
 *
 * Each one in a line, for a row x of width D (or any n entries):
 *   residual   out = x + branch
 *   RMSNorm    out_d = x_d / sqrt(mean_j(x_j^2) + eps) gamma_d      (no mean, no beta)
 *   SwiGLU     h = silu(a) g,  silu(a) = a sigmoid(a),  a = X W_1, g = X W_3
 *   dropout    y = x mask,  mask = 0 (probability p) or 1/(1-p)      (training only)
 *   drop path  y_b = x_b keep_b: one mask value per example b, for all its rows (training only) */
#ifndef TRANSFORMER_LAYERS_H
#define TRANSFORMER_LAYERS_H
#include "util/rng.h"

/* Residual connection: out[n] = x[n] + branch[n].
 * out may be x or branch (in place). */
void residual_forward(float *out, const float *x, const float *branch, int n);
/* dout[n] -> dx[n] += dout, dbranch[n] += dout (the sum passes its gradient
 * to both inputs unchanged). Either may be NULL. */
void residual_backward(float *dx, float *dbranch, const float *dout, int n);

/* RMSNorm over the last axis (Zhang and Sennrich 2019; LLaMA): for each row
 * of x[N,D],
 *   rstd = 1 / sqrt((1/D) sum_d x_d^2 + eps),   xhat_d = x_d rstd,
 *   out_d = xhat_d gamma_d                          (gamma[D]; no beta; D >= 1).
 * LayerNorm without the mean: the row is scaled, not centred. The sum of
 * squares is taken in double and each output computed in double and rounded
 * once (the specification style of kernels/layernorm.c). Forward saves
 * rstd[N] for backward (may be NULL when no backward follows). An all-zero
 * row gives out = 0. */
void rmsnorm_forward(float *out, float *rstd, const float *x, const float *gamma, int N, int D,
                     float eps);
/* Backward, with g_d = dout_d gamma_d, per row:
 *   dx_d     += rstd (g_d - xhat_d mean_j(g_j xhat_j)),
 *   dgamma_d += sum over rows of dout_d xhat_d.
 * dx or dgamma may be NULL. xhat is recomputed from x and the saved rstd. */
void rmsnorm_backward(float *dx, float *dgamma, const float *dout, const float *rstd, const float *x,
                      const float *gamma, int N, int D);

/* SwiGLU's gating (Shazeer 2020), element by element over n = R*F entries:
 * given the two products a = X W_1 and g = X W_3 (each [R, F], computed with
 * linear_forward), h = silu(a) g with silu(a) = a sigmoid(a) = a / (1 + e^-a).
 * Computed in double, rounded once. h may not alias a or g (backward reads
 * them). */
void swiglu_forward(float *h, const float *a, const float *g, int n);
/* dh -> da += dh g silu'(a),  dg += dh silu(a), with
 * silu'(a) = sigmoid(a) (1 + a (1 - sigmoid(a))). Either may be NULL. */
void swiglu_backward(float *da, float *dg, const float *dh, const float *a, const float *g, int n);

/* Dropout (inverted): while training, each entry is kept with probability
 * 1 - p and scaled by 1/(1-p), so the expected output equals x and nothing
 * changes at evaluation:
 *   mask[i] = (uniform < p) ? 0 : 1/(1-p),   y[i] = x[i] mask[i].
 * The caller owns the Rng (the same seed gives the same mask). When train is
 * 0 or p == 0 it is the identity, bit for bit: y = x, mask = 1 (rng is not
 * touched and may be NULL). mask[n] is kept for backward (it may be NULL only
 * when train is 0 or p == 0). y may be x (in place). 0 <= p < 1. */
void dropout_forward(float *y, float *mask, const float *x, int n, float p, int train, Rng *rng);
/* dx[n] += dy[n] mask[n]. */
void dropout_backward(float *dx, const float *dy, const float *mask, int n);

/* The mask alone, for dropout on something other than a plain array (the
 * attention weights, inside chapter 03's layer): n draws from rng,
 *   mask[i] = (uniform < p) ? 0 : 1/(1-p).
 * dropout_forward draws its mask with it. p == 0: every mask[i] = 1, nothing
 * drawn. 0 <= p < 1. */
void dropout_mask(float *mask, int n, float p, Rng *rng);

/* Stochastic depth (Huang et al. 2016; "drop path" in timm and DeiT) on a
 * residual branch x[B, n] (n = N D numbers per example): while training,
 * each example's whole branch is dropped with probability p or kept and
 * scaled by 1/(1-p), so that the block is the identity for that example:
 *   keep[b] = (uniform < p) ? 0 : 1/(1-p),   y[b, i] = x[b, i] keep[b].
 * Dropout with one mask value per example (dropout_mask draws keep[B]).
 * When train is 0 or p == 0 it is the identity, bit for bit: y = x, keep =
 * 1, nothing drawn (rng may be NULL). y may be x (in place). 0 <= p < 1. */
void drop_path_forward(float *y, float *keep, const float *x, int B, int n, float p, int train, Rng *rng);
/* dy[B, n] -> dx[B, n] += dy[b, i] keep[b]. */
void drop_path_backward(float *dx, const float *dy, const float *keep, int B, int n);

#endif
