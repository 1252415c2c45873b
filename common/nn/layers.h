/* layers.h - the basic layers as forward/backward pairs.
 *
 * Conventions (after llm.c):
 *  - flat row-major float arrays, shapes as explicit int arguments;
 *  - no allocation inside forward or backward;
 *  - backward ACCUMULATES (+=) into every gradient it writes (din, dW, db),
 *    so a weight used at many time steps just sums up; callers zero first.
 *  - a NULL gradient pointer in backward means "not needed", skip it. */
#ifndef LAYERS_H
#define LAYERS_H

/* Linear: out[N,O] = in[N,I] @ W[I,O] + b[O]   (b may be NULL) */
void linear_forward(float *out, const float *in, const float *W, const float *b,
                    int N, int I, int O);
void linear_backward(float *din, float *dW, float *db, const float *dout,
                     const float *in, const float *W, int N, int I, int O);

/* Embedding: out[N,D] = table[ids[n], :]   (table [V,D]) */
void embedding_forward(float *out, const int *ids, const float *table, int N, int D);
void embedding_backward(float *dtable, const float *dout, const int *ids, int N, int D);

/* Element-wise activations; backward uses the forward OUTPUT y. */
void tanh_forward(float *y, const float *x, int n);
void tanh_backward(float *dx, const float *dy, const float *y, int n);
void sigmoid_forward(float *y, const float *x, int n);
void sigmoid_backward(float *dx, const float *dy, const float *y, int n);
void relu_forward(float *y, const float *x, int n);
void relu_backward(float *dx, const float *dy, const float *x, int n);

/* GELU (the transformer MLP's activation; formulas and limits in vecmath.h).
 * Backward, like relu's, uses the forward INPUT x.
 *   gelu:       y = x Phi(x), Phi the standard normal CDF (PyTorch nn.GELU())
 *   gelu_tanh:  y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (GPT-2) */
void gelu_forward(float *y, const float *x, int n);
void gelu_backward(float *dx, const float *dy, const float *x, int n);
void gelu_tanh_forward(float *y, const float *x, int n);
void gelu_tanh_backward(float *dx, const float *dy, const float *x, int n);

/* LayerNorm over the last axis (PyTorch nn.LayerNorm(D, eps=eps)): for each
 * row of x[N,D],
 *   mean = (1/D) sum_d x_d,   var = (1/D) sum_d (x_d - mean)^2   (biased, as PyTorch),
 *   rstd = 1 / sqrt(var + eps),   xhat_d = (x_d - mean) rstd,
 *   out_d = xhat_d gamma_d + beta_d          (gamma[D], beta[D]; D >= 1).
 * Forward saves mean[N] and rstd[N] for backward (both may be NULL when no
 * backward follows). A constant row (var = 0) gives out = beta exactly.
 * The variance is computed from distances to the mean (two passes), so rows
 * far from 0 (x = 1e4 + noise) keep their digits; a one-pass
 * E[x^2] - E[x]^2 in float would cancel to garbage there. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                       const float *beta, int N, int D, float eps);
/* Backward, with g_d = dout_d gamma_d, per row:
 *   dx_d     += rstd (g_d - mean_j(g_j) - xhat_d mean_j(g_j xhat_j)),
 *   dgamma_d += sum over rows of dout_d xhat_d,   dbeta_d += sum over rows of dout_d.
 * Any of dx, dgamma, dbeta may be NULL. xhat is recomputed from x and the
 * saved float mean and rstd. The float mean is off by at most half an ulp of
 * |mean| <= max |x_d|: no more than the rounding the row's largest entries
 * got when they were stored as floats, so even for a row 1e4 + noise the
 * backward pass is as exact as its data (PyTorch also saves a float mean). */
void layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                        const float *rstd, const float *x, const float *gamma, int N, int D);

/* Row-wise softmax over the last axis: y[N,C] = softmax(x[N,C]).
 * Numerically stable (subtracts the row max). Entries equal to -INFINITY get
 * weight exactly 0 (masking); a row of all -INFINITY gives all zeros.
 * y may be x (in place): every entry is read before it is overwritten. */
void softmax_forward(float *y, const float *x, int N, int C);
/* dx += y * (dy - sum_j dy_j y_j), row by row. */
void softmax_backward(float *dx, const float *dy, const float *y, int N, int C);

/* Log-softmax + cross-entropy with integer targets, ignoring target == ignore_id
 * (padding). logits[N,C], targets[N]. Writes probs[N,C] (kept for backward).
 * Returns the SUM of -log p(target) over counted rows; *n_counted gets how many
 * rows counted. */
double cross_entropy_forward(float *probs, const float *logits, const int *targets,
                             int N, int C, int ignore_id, int *n_counted);
/* dlogits += scale * (probs - onehot(target)) for counted rows; scale is
 * usually 1 / n_counted so the loss is a mean per token. */
void cross_entropy_backward(float *dlogits, const float *probs, const int *targets,
                            int N, int C, int ignore_id, float scale);

/* The same with label smoothing eps (Szegedy et al. 2016): the target is
 * (1 - eps) onehot(target) + eps / C, so dlogits += scale * (probs - that).
 * eps = 0 is cross_entropy_backward. */
void cross_entropy_smoothed_backward(float *dlogits, const float *probs, const int *targets,
                                     int N, int C, int ignore_id, float eps, float scale);

/* Row-wise log-softmax, for decoding: out[N,C] = x - logsumexp(x). */
void log_softmax_forward(float *out, const float *x, int N, int C);

#endif
