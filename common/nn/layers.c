/* layers.c - the basic layers as forward/backward pairs (see layers.h).
 *
 * Every backward ACCUMULATES (+=) into its gradient outputs and skips any
 * gradient pointer that is NULL. Matrix products go through matmul.h so the
 * chosen backend (naive or avx2) serves every layer. */
#include "nn/layers.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/vecmath.h"

#include <math.h>
#include "util/openmp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Linear                                                                    */
/* ------------------------------------------------------------------------ */

/* out[N,O] = in[N,I] @ W[I,O] + b[O] */
void linear_forward(float *out, const float *in, const float *W, const float *b,
                    int N, int I, int O) {
    matmul(out, in, W, N, O, I, 0);
    if (b == NULL) return;
    for (int n = 0; n < N; n++)
#pragma omp simd   /* vectorised: the compiler cannot prove out and b apart, we can */
        for (int o = 0; o < O; o++) out[(size_t)n * O + o] += b[o];
}

/* dout[N,O] -> din[N,I] += dout @ W^T,  dW[I,O] += in^T @ dout,  db[O] += sum_n dout */
void linear_backward(float *din, float *dW, float *db, const float *dout,
                     const float *in, const float *W, int N, int I, int O) {
    if (din) matmul_nt(din, dout, W, N, I, O, 1);   /* W [I,O] read as [N=I, K=O] */
    if (dW) matmul_tn(dW, in, dout, I, O, N, 1);    /* in [N,I] read as [K=N, M=I] */
    if (db)
        for (int n = 0; n < N; n++)
#pragma omp simd   /* across o: each db[o] still sums over n in order */
            for (int o = 0; o < O; o++) db[o] += dout[(size_t)n * O + o];
}

/* ------------------------------------------------------------------------ */
/* Embedding                                                                 */
/* ------------------------------------------------------------------------ */

/* ids[N], table[V,D] -> out[N,D] = table[ids[n]] (ids must be in [0, V)) */
void embedding_forward(float *out, const int *ids, const float *table, int N, int D) {
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * D, table + (size_t)ids[n] * D, (size_t)D * sizeof(float));
}

/* dtable[ids[n]] += dout[n]; a token seen twice gets both gradients. */
void embedding_backward(float *dtable, const float *dout, const int *ids, int N, int D) {
    for (int n = 0; n < N; n++) {
        float *row = dtable + (size_t)ids[n] * D;
        const float *g = dout + (size_t)n * D;
        for (int d = 0; d < D; d++) row[d] += g[d];
    }
}

/* ------------------------------------------------------------------------ */
/* Element-wise activations: x[n] -> y[n]                                    */
/* ------------------------------------------------------------------------ */

/* y = tanh(x): tanhf on the naive backend, the AVX2 kernel of vecmath.h otherwise. */
void tanh_forward(float *y, const float *x, int n) { vec_tanh(y, x, n); }

/* d tanh(x)/dx = 1 - tanh(x)^2 = 1 - y^2 */
void tanh_backward(float *dx, const float *dy, const float *y, int n) {
    for (int i = 0; i < n; i++) dx[i] += dy[i] * (1.0f - y[i] * y[i]);
}

/* y = 1 / (1 + e^-x), written so that exp never overflows (vecmath.c). */
void sigmoid_forward(float *y, const float *x, int n) { vec_sigmoid(y, x, n); }

/* d sigmoid(x)/dx = y (1 - y) */
void sigmoid_backward(float *dx, const float *dy, const float *y, int n) {
    for (int i = 0; i < n; i++) dx[i] += dy[i] * y[i] * (1.0f - y[i]);
}

/* y = x > 0 ? x : 0 (vecmath.c: the same bits on both backends). */
void relu_forward(float *y, const float *x, int n) { vec_relu(y, x, n); }

/* Gradient 1 where x > 0, else 0 (x here is the forward INPUT): dx += dy there. */
void relu_backward(float *dx, const float *dy, const float *x, int n) { vec_relu_backward(dx, dy, x, n); }

/* GELU: the naive (double) or AVX2 kernels of vecmath.h, by backend. */
void gelu_forward(float *y, const float *x, int n) { vec_gelu(y, x, n); }
void gelu_backward(float *dx, const float *dy, const float *x, int n) { vec_gelu_backward(dx, dy, x, n); }
void gelu_tanh_forward(float *y, const float *x, int n) { vec_gelu_tanh(y, x, n); }
void gelu_tanh_backward(float *dx, const float *dy, const float *x, int n) {
    vec_gelu_tanh_backward(dx, dy, x, n);
}

/* ------------------------------------------------------------------------ */
/* LayerNorm: layernorm.c (the specification), layernorm_avx2.c or          */
/* layernorm_neon.c (AArch64), by backend                                   */
/* ------------------------------------------------------------------------ */

/* Rows [n0, n1) of layernorm_forward. */
static void layernorm_forward_rows(float *out, float *mean, float *rstd, const float *x,
                                   const float *gamma, const float *beta, int n0, int n1, int D,
                                   float eps) {
    const size_t at = (size_t)n0 * D;
    float *band_mean = mean ? mean + n0 : NULL, *band_rstd = rstd ? rstd + n0 : NULL;
    if (backend_uses_avx2())
        layernorm_forward_avx2(out + at, band_mean, band_rstd, x + at, gamma, beta, n1 - n0, D, eps);
#if defined(__aarch64__)
    else if (backend_uses_neon())
        layernorm_forward_neon(out + at, band_mean, band_rstd, x + at, gamma, beta, n1 - n0, D, eps);
#endif
    else layernorm_forward_naive(out + at, band_mean, band_rstd, x + at, gamma, beta, n1 - n0, D, eps);
}

/* Rows are independent: a long input is cut into one band of rows per
 * thread, each computed as in one call (the same bits). One thread (a short
 * input, or a call from inside a parallel loop over sequences) runs the rows
 * directly, without entering an OpenMP region: even a region of one thread
 * costs system calls (futex) in libgomp, a few microseconds each on a virtual
 * machine, thousands of times a step when attention calls this per sequence. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *gamma,
                       const float *beta, int N, int D, float eps) {
    const int threads = threads_for_elements((size_t)N * D, THREAD_COSTS.layernorm_ns);
    if (threads <= 1) {
        layernorm_forward_rows(out, mean, rstd, x, gamma, beta, 0, N, D, eps);
        return;
    }
    long long started = threads_now_ns(), done = 0;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), bands = omp_get_num_threads();
        int n0 = (int)((long long)N * t / bands), n1 = (int)((long long)N * (t + 1) / bands);
        layernorm_forward_rows(out, mean, rstd, x, gamma, beta, n0, n1, D, eps);
        if (t == 0) done = threads_now_ns();
    }
    threads_note_join(started, done);
}

void layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                        const float *rstd, const float *x, const float *gamma, int N, int D) {
    if (backend_uses_avx2())
        layernorm_backward_avx2(dx, dgamma, dbeta, dout, mean, rstd, x, gamma, N, D);
#if defined(__aarch64__)
    else if (backend_uses_neon())
        layernorm_backward_neon(dx, dgamma, dbeta, dout, mean, rstd, x, gamma, N, D);
#endif
    else layernorm_backward_naive(dx, dgamma, dbeta, dout, mean, rstd, x, gamma, N, D);
}

/* ------------------------------------------------------------------------ */
/* Softmax                                                                   */
/* ------------------------------------------------------------------------ */

/* x[N,C] -> y[N,C], each row y_j = e^(x_j - max) / sum_k e^(x_k - max)
 * (vecmath.h's vec_softmax_rows, on the backend's kernel). Subtracting the
 * max keeps exp() <= 1 (no overflow). A masked entry x_j = -INFINITY gives
 * e^-inf = 0 exactly; a fully masked row (max = -inf) would give 0/0, so it
 * is defined as all zeros. */
void softmax_forward(float *y, const float *x, int N, int C) {
    const int threads = threads_for_elements((size_t)N * C, THREAD_COSTS.softmax_ns);
    if (threads <= 1) {
        vec_softmax_rows(y, x, N, C);
        return;
    }
    long long started = threads_now_ns(), done = 0;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), bands = omp_get_num_threads();
        int n0 = (int)((long long)N * t / bands), n1 = (int)((long long)N * (t + 1) / bands);
        vec_softmax_rows(y + (size_t)n0 * C, x + (size_t)n0 * C, n1 - n0, C);
        if (t == 0) done = threads_now_ns();
    }
    threads_note_join(started, done);
}

/* Jacobian of softmax: dy_i/dx_j = y_i (delta_ij - y_j), so
 * dx_j = y_j (dy_j - sum_i dy_i y_i) (vec_softmax_backward_rows). Masked
 * entries have y = 0: no gradient. */
void softmax_backward(float *dx, const float *dy, const float *y, int N, int C) {
    const int threads = threads_for_elements((size_t)N * C, THREAD_COSTS.softmax_ns);   /* as in softmax_forward */
    if (threads <= 1) {
        vec_softmax_backward_rows(dx, dy, y, N, C);
        return;
    }
    long long started = threads_now_ns(), done = 0;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), bands = omp_get_num_threads();
        int n0 = (int)((long long)N * t / bands), n1 = (int)((long long)N * (t + 1) / bands);
        size_t at = (size_t)n0 * C;
        vec_softmax_backward_rows(dx + at, dy + at, y + at, n1 - n0, C);
        if (t == 0) done = threads_now_ns();
    }
    threads_note_join(started, done);
}

/* ------------------------------------------------------------------------ */
/* Cross-entropy                                                             */
/* ------------------------------------------------------------------------ */

/* logits[N,C], targets[N] -> probs[N,C] (all rows), returns
 * sum over counted rows of -log p(target) = logsumexp(row) - logit[target].
 * Computing it from the logits (not log(probs)) stays finite even when the
 * target's probability underflows to 0 in float. */
double cross_entropy_forward(float *probs, const float *logits, const int *targets,
                             int N, int C, int ignore_id, int *n_counted) {
    double loss = 0.0;
    int counted = 0;
    softmax_forward(probs, logits, N, C);
    for (int n = 0; n < N; n++) {
        int t = targets[n];
        if (t == ignore_id) continue;
        if (t < 0 || t >= C) {
            fprintf(stderr, "cross_entropy_forward: target %d at row %d is outside [0, %d)\n",
                    t, n, C);
            abort();
        }
        const float *row = logits + (size_t)n * C;
        float max = -INFINITY;
        for (int c = 0; c < C; c++) if (row[c] > max) max = row[c];
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += exp((double)row[c] - max);
        double log_sum_exp = max + log(sum);
        loss += log_sum_exp - row[t];
        counted++;
    }
    if (n_counted) *n_counted = counted;
    return loss;
}

/* d(-log p_t)/d logit_c = p_c - [c == t] */
void cross_entropy_backward(float *dlogits, const float *probs, const int *targets,
                            int N, int C, int ignore_id, float scale) {
    for (int n = 0; n < N; n++) {
        int t = targets[n];
        if (t == ignore_id) continue;
        const float *p = probs + (size_t)n * C;
        float *d = dlogits + (size_t)n * C;
        for (int c = 0; c < C; c++) d[c] += scale * p[c];
        d[t] -= scale;
    }
}

/* Label smoothing: the target distribution is (1 - eps) onehot(t) + eps / C,
 * so d/d logit_c = p_c - (1 - eps) [c == t] - eps / C. */
void cross_entropy_smoothed_backward(float *dlogits, const float *probs, const int *targets,
                                     int N, int C, int ignore_id, float eps, float scale) {
    const float uniform = eps / (float)C;
    for (int n = 0; n < N; n++) {
        int t = targets[n];
        if (t == ignore_id) continue;
        const float *p = probs + (size_t)n * C;
        float *d = dlogits + (size_t)n * C;
        for (int c = 0; c < C; c++) d[c] += scale * (p[c] - uniform);
        d[t] -= scale * (1.0f - eps);
    }
}

/* x[N,C] -> out[N,C] = x - logsumexp(x) per row (a fully -inf row stays -inf). */
void log_softmax_forward(float *out, const float *x, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float max = -INFINITY;
        for (int c = 0; c < C; c++) if (xr[c] > max) max = xr[c];
        if (max == -INFINITY) {
            for (int c = 0; c < C; c++) o[c] = -INFINITY;
            continue;
        }
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += exp((double)xr[c] - max);
        double log_sum_exp = max + log(sum);
        for (int c = 0; c < C; c++) o[c] = (float)(xr[c] - log_sum_exp);
    }
}
