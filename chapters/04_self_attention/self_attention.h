/* self_attention.h - chapter 04: self-attention, positional encodings, masks.
 *
 * Chapter 03's layer had two inputs: queries Q and data X. Self-attention
 * has ONE input X [N, D_in] and makes all three from it:
 *
 *   Q = X W_Q   [N, D]      W_Q, W_K, W_V [D_in, D]
 *   K = X W_K   [N, D]
 *   V = X W_V   [N, D]
 *   E = Q K^T / sqrt(D)     [N, N]   E_ij = Q_i . K_j / sqrt(D)
 *   A = softmax(E, dim=1)   [N, N]
 *   Y = A V                 [N, D]
 *
 * Steps E, A, Y are chapter 03's attention layer with the scaled dot score;
 * this file only adds the projections, and calls it.
 *
 * Two consequences the chapter shows:
 *  - permutation equivariance: permute the rows of X and the rows of Y are
 *    permuted the same way; the layer does not know the order of its inputs.
 *    Positional encodings P [N, D] added to X give it that order.
 *  - masking: with a causal mask output i only sees inputs 1..i; with a
 *    padding mask no output sees a padded position.
 *
 * All functions work on a batch of B sequences of N vectors, stored
 * [B, N, .] row-major; forward stores everything backward needs in a
 * caller-provided cache; backward ACCUMULATES (+=). */
#ifndef SELF_ATTENTION_H
#define SELF_ATTENTION_H
#include <stddef.h>

typedef struct {
    float *W_Q, *W_K, *W_V;   /* [D_in, D] each */
} SelfAttentionWeights;

/* Cache: Q, K, V [B, N, D] | attention caches (E) [B, N, N]. */
size_t self_attention_cache_floats(int B, int N, int D);
/* Scratch: dQ, dK, dV [B, N, D] | attention scratch [2 N N]. */
size_t self_attention_scratch_floats(int B, int N, int D);

/* X [B, N, D_in] -> Y [B, N, D], A [B, N, N] (attention weights), cache.
 * causal: output i may only look at inputs j <= i.
 * lens [B] (or NULL): sequence b is lens[b] long; positions j >= lens[b]
 * are padding, and no output attends to them. */
void self_attention_forward(float *Y, float *A, float *cache, const float *X,
                            const SelfAttentionWeights *w, int causal, const int *lens,
                            int B, int N, int D_in, int D);

/* dY [B, N, D] -> dX [B, N, D_in] +=, dw += (dX, dw and its fields may be NULL). */
void self_attention_backward(float *dX, SelfAttentionWeights *dw, float *scratch, const float *dY,
                             const float *A, const float *cache, const float *X,
                             const SelfAttentionWeights *w, int B, int N, int D_in, int D);

/* --------------------------------------------------------- positional encodings */
/* Sinusoidal (Vaswani et al. 2017): position t = 0..N-1, k = 0..D/2-1,
 *   P[t, 2k]   = sin(omega_k t),   P[t, 2k+1] = cos(omega_k t),
 *   omega_k = 1 / 10000^(2k/D).
 * A fixed function of the index: bounded, unique per position, and
 * P[t] . P[t+s] depends on the offset s only (the heatmap in the README). */
void positional_encoding_sinusoidal(float *P, int N, int D);

/* X[b, t, :] += P[t, :] for every sequence b (P [N, D], X [B, N, D]). */
void add_positional_encoding(float *X, const float *P, int B, int N, int D);
/* dP[t, :] += sum_b dX[b, t, :]  (the gradient of a LEARNED table). */
void add_positional_encoding_backward(float *dP, const float *dX, int B, int N, int D);

#endif
