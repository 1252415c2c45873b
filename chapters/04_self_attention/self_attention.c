/* self_attention.c - chapter 04: self-attention on top of chapter 03's
 * attention layer, positional encodings (see self_attention.h). */
#include "04_self_attention/self_attention.h"

#include <math.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "nn/layers.h"

/* The score of self-attention: scaled dot product over D-dimensional queries. */
static ScoreSpec scaled_dot(int D) {
    ScoreSpec s = {SCORE_SCALED_DOT, D, D, 0};
    return s;
}

size_t self_attention_cache_floats(int B, int N, int D) {
    ScoreSpec s = scaled_dot(D);
    return 3 * (size_t)B * N * D + (size_t)B * attention_cache_floats(&s, N, N);
}

size_t self_attention_scratch_floats(int B, int N, int D) {
    ScoreSpec s = scaled_dot(D);
    return 3 * (size_t)B * N * D + attention_scratch_floats(&s, N, N);
}

/* X [B, N, D_in] -> Y [B, N, D], A [B, N, N] */
void self_attention_forward(float *Y, float *A, float *cache, const float *X,
                            const SelfAttentionWeights *w, int causal, const int *lens,
                            int B, int N, int D_in, int D) {
    const ScoreSpec s = scaled_dot(D);
    const ScoreWeights no_weights = {NULL, NULL, NULL, NULL};
    const size_t ND = (size_t)N * D, per_seq_cache = attention_cache_floats(&s, N, N);
    float *Q = cache, *K = Q + (size_t)B * ND, *V = K + (size_t)B * ND;
    float *attn_cache = V + (size_t)B * ND;
    /* the projections, for all B*N positions at once */
    /* Exercise 04.projections (4 points): Q = X W_Q, K = X W_K, V = X W_V. */
    linear_forward(Q, X, w->W_Q, NULL, B * N, D_in, D);     /* Q = X W_Q */
    linear_forward(K, X, w->W_K, NULL, B * N, D_in, D);     /* K = X W_K */
    linear_forward(V, X, w->W_V, NULL, B * N, D_in, D);     /* V = X W_V */
    /* End of exercise 04.projections. */
    /* E = Q K^T / sqrt(D), A = softmax(E, dim=1), Y = A V: chapter 03, per sequence */
    for (int b = 0; b < B; b++) {
        AttentionMask mask = {NULL, causal, lens ? lens[b] : 0, 0};
        attention_forward(Y + b * ND, A + (size_t)b * N * N, attn_cache + b * per_seq_cache,
                          Q + b * ND, K + b * ND, V + b * ND, &s, &no_weights, &mask, N, N, D);
    }
}

/* dY [B, N, D] -> dX [B, N, D_in] +=, dW_Q, dW_K, dW_V [D_in, D] += */
void self_attention_backward(float *dX, SelfAttentionWeights *dw, float *scratch, const float *dY,
                             const float *A, const float *cache, const float *X,
                             const SelfAttentionWeights *w, int B, int N, int D_in, int D) {
    const ScoreSpec s = scaled_dot(D);
    const ScoreWeights no_weights = {NULL, NULL, NULL, NULL};
    const size_t ND = (size_t)N * D, per_seq_cache = attention_cache_floats(&s, N, N);
    const float *Q = cache, *K = Q + (size_t)B * ND, *V = K + (size_t)B * ND;
    const float *attn_cache = V + (size_t)B * ND;
    float *dQ = scratch, *dK = dQ + (size_t)B * ND, *dV = dK + (size_t)B * ND;
    float *attn_scratch = dV + (size_t)B * ND;
    memset(dQ, 0, sizeof(float) * 3 * (size_t)B * ND);
    for (int b = 0; b < B; b++)
        attention_backward(dQ + b * ND, dK + b * ND, dV + b * ND, NULL, attn_scratch, dY + b * ND,
                           A + (size_t)b * N * N, attn_cache + b * per_seq_cache, Q + b * ND,
                           K + b * ND, V + b * ND, &s, &no_weights, N, N, D);
    /* X feeds all three projections, so dX collects three terms */
    /* Exercise 04.projections, continued: their backward, dQ, dK, dV to dX and dW_Q, dW_K, dW_V. */
    linear_backward(dX, dw ? dw->W_Q : NULL, NULL, dQ, X, w->W_Q, B * N, D_in, D);
    linear_backward(dX, dw ? dw->W_K : NULL, NULL, dK, X, w->W_K, B * N, D_in, D);
    linear_backward(dX, dw ? dw->W_V : NULL, NULL, dV, X, w->W_V, B * N, D_in, D);
    /* End of exercise 04.projections. */
}

/* ------------------------------------------------------- positional encodings */

/* P [N, D]: P[t, 2k] = sin(omega_k t), P[t, 2k+1] = cos(omega_k t) */
void positional_encoding_sinusoidal(float *P, int N, int D) {
    /* Exercise 04.sinusoidal (2 points): P[t, 2k] = sin(omega_k t), P[t, 2k+1] = cos(omega_k t). */
    for (int t = 0; t < N; t++)
        for (int k = 0; 2 * k < D; k++) {
            double omega = 1.0 / pow(10000.0, 2.0 * k / D);
            P[(size_t)t * D + 2 * k] = (float)sin(omega * t);
            if (2 * k + 1 < D) P[(size_t)t * D + 2 * k + 1] = (float)cos(omega * t);
        }
    /* End of exercise 04.sinusoidal. */
}

/* X [B, N, D] += P [N, D] broadcast over the batch */
void add_positional_encoding(float *X, const float *P, int B, int N, int D) {
    const size_t ND = (size_t)N * D;
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < ND; i++) X[b * ND + i] += P[i];
}

/* dP [N, D] += sum over the batch of dX [B, N, D] */
void add_positional_encoding_backward(float *dP, const float *dX, int B, int N, int D) {
    const size_t ND = (size_t)N * D;
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < ND; i++) dP[i] += dX[b * ND + i];
}
