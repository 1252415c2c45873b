/* scaling_experiment.c - softmax saturation with and without 1/sqrt(D)
 * (see scaling_experiment.h). */
#include "03_dot_product_attention/scaling_experiment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
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
