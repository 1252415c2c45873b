/* scaling_experiment.c - softmax saturation with and without 1/sqrt(D)
 * (see scaling_experiment.h). */
#include "03_dot_product_attention/scaling_experiment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "io/plot.h"
#include "util/error.h"
#include "nn/layers.h"
#include "util/rng.h"
#include "util/util.h"

int scaling_experiment(ScalingCurves *out, const int *dims, int n_dims, int n_queries, int n_keys,
                       uint64_t seed) {
    if (n_dims < 1 || n_dims > SCALING_MAX_DIMS)
        return fail("scaling experiment: %d sizes, expected 1..%d", n_dims, SCALING_MAX_DIMS);
    if (n_queries < 1 || n_keys < 2)
        return fail("scaling experiment: need >= 1 query and >= 2 keys, got %d and %d", n_queries, n_keys);
    int max_D = 0;
    for (int d = 0; d < n_dims; d++) {
        if (dims[d] < 1) return fail("scaling experiment: dimension %d is not positive", dims[d]);
        if (dims[d] > max_D) max_D = dims[d];
    }
    const int N_Q = n_queries, N_X = n_keys;
    const size_t NN = (size_t)N_Q * N_X;
    float *Q = xmalloc(sizeof(float) * (size_t)N_Q * max_D);
    float *K = xmalloc(sizeof(float) * (size_t)N_X * max_D);
    float *V = xcalloc((size_t)N_X, sizeof(float));      /* values do not matter here: D_V = 1 */
    float *Y = xmalloc(sizeof(float) * (size_t)N_Q);
    float *A = xmalloc(sizeof(float) * NN);
    float *E = xmalloc(sizeof(float) * NN);               /* the cache of the dot scores: just E */
    float *G = xmalloc(sizeof(float) * NN);               /* upstream gradient dA */
    float *dE = xmalloc(sizeof(float) * NN);
    memset(out, 0, sizeof *out);
    out->n_dims = n_dims;
    Rng rng;
    for (int d = 0; d < n_dims; d++) {
        const int D = dims[d];
        rng_seed(&rng, seed, (uint64_t)D);                /* same draws for both scores */
        for (size_t n = 0; n < (size_t)N_Q * D; n++) Q[n] = rng_normal(&rng);
        for (size_t n = 0; n < (size_t)N_X * D; n++) K[n] = rng_normal(&rng);
        for (size_t n = 0; n < NN; n++) G[n] = rng_normal(&rng);
        for (int scaled = 0; scaled <= 1; scaled++) {
            ScoreSpec s = {scaled ? SCORE_SCALED_DOT : SCORE_DOT, D, D, 0};
            ScoreWeights none = {NULL, NULL, NULL, NULL};
            attention_forward(Y, A, E, Q, K, V, &s, &none, NULL, N_Q, N_X, 1);
            memset(dE, 0, sizeof(float) * NN);
            softmax_backward(dE, G, A, N_Q, N_X);
            double sum_e = 0, sum_e2 = 0, entropy = 0, max_w = 0, grad = 0;
            for (int i = 0; i < N_Q; i++) {
                const float *a = A + (size_t)i * N_X, *e = E + (size_t)i * N_X, *g = dE + (size_t)i * N_X;
                double row_max = 0, row_grad = 0;
                entropy += attention_row_entropy(a, N_X, &row_max);
                for (int j = 0; j < N_X; j++) {
                    sum_e += e[j];
                    sum_e2 += (double)e[j] * e[j];
                    row_grad += (double)g[j] * g[j];
                }
                max_w += row_max;
                grad += sqrt(row_grad);
            }
            double mean_e = sum_e / (double)NN;
            out->score_std[scaled][d] = (float)sqrt(fmax(sum_e2 / (double)NN - mean_e * mean_e, 0.0));
            out->entropy[scaled][d] = (float)(entropy / N_Q);
            out->max_weight[scaled][d] = (float)(max_w / N_Q);
            out->grad_norm[scaled][d] = (float)(grad / N_Q);
        }
    }
    free(Q); free(K); free(V); free(Y); free(A); free(E); free(G); free(dE);
    return 0;
}

/* The chapter's experiment (see scaling_experiment.h). */
int scaling_experiment_run(const char *out_dir) {
    enum { N_DIMS = 11, N_QUERIES = 512, N_KEYS = 16 };
    const int dims[N_DIMS] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
    ScalingCurves c;
    if (scaling_experiment(&c, dims, N_DIMS, N_QUERIES, N_KEYS, 3) < 0) return -1;
    printf("Scaling experiment: %d random queries over %d random keys, q, k ~ N(0, I_D).\n"
           "Without 1/sqrt(D) the scores spread as sqrt(D), softmax goes one-hot and the gradient\n"
           "reaching the scores vanishes; with it nothing depends on D. (uniform entropy: log %d = %.2f)\n",
           N_QUERIES, N_KEYS, N_KEYS, logf((float)N_KEYS));
    printf("  %6s | %-17s | %-17s | %-17s | %-19s\n", "", "std of scores", "entropy of a_i", "max_j a_ij",
           "||dE_i|| (grad)");
    printf("  %6s | %8s %8s | %8s %8s | %8s %8s | %9s %9s\n", "D", "dot", "scaled", "dot", "scaled", "dot",
           "scaled", "dot", "scaled");
    for (int d = 0; d < N_DIMS; d++)
        printf("  %6d | %8.2f %8.2f | %8.3f %8.3f | %8.3f %8.3f | %9.2e %9.2e\n", dims[d], c.score_std[0][d],
               c.score_std[1][d], c.entropy[0][d], c.entropy[1][d], c.max_weight[0][d], c.max_weight[1][d],
               c.grad_norm[0][d], c.grad_norm[1][d]);
    float log2_dim[N_DIMS], uniform[N_DIMS];
    for (int d = 0; d < N_DIMS; d++) {
        log2_dim[d] = log2f((float)dims[d]);
        uniform[d] = logf((float)N_KEYS);
    }
    if (out_dir_prepare("--out", out_dir) < 0) return -1;
    char stem[1024];
    const char *names[3] = {"dot  q.k", "scaled dot  q.k / sqrt(D)", "uniform weights (log N)"};
    const float *entropy[3] = {c.entropy[0], c.entropy[1], uniform};
    if (path_format(stem, sizeof stem, "%s/scaling_entropy", out_dir) < 0) return -1;
    if (plot_lines(stem, "Entropy of softmax(scores) for random q, k in R^D", "log2 D", "entropy (nats)",
                   log2_dim, entropy, names, 3, N_DIMS, 0) < 0)
        return -1;
    printf("  plot: %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    const float *grad[2] = {c.grad_norm[0], c.grad_norm[1]};
    if (path_format(stem, sizeof stem, "%s/scaling_grad", out_dir) < 0) return -1;
    if (plot_lines(stem, "Gradient reaching the scores, ||dE_i||, for dA_i ~ N(0, I)", "log2 D",
                   "mean ||dE_i||", log2_dim, grad, names, 2, N_DIMS, 1) < 0)
        return -1;
    printf("  plot: %s.%s\n\n", stem, gnuplot_available() ? "png" : "gp");
    return 0;
}
