/* multi_head_cross.h - chapter 06: multi-head CROSS-attention, the decoder's
 * second attention sublayer.
 *
 * Chapter 05's layer takes queries, keys and values from ONE sequence X.
 * In the decoder of an encoder-decoder transformer the queries come from the
 * decoder's positions X [N, D] and the keys and values from the encoder's
 * outputs M [N_M, D] (the "memory"): the same idea as chapter 03's
 * cross-attention, with H heads and chapter 05's four big products:
 *
 *   1a. Q      = X W_Q             [N, H D_H]      W_Q  [D, H D_H]
 *   1b. [K|V]  = M W_KV            [N_M, 2 H D_H]  W_KV [D, 2 H D_H] = [W_K | W_V]
 *   2.  E_h    = Q_h K_h^T / sqrt(D_H)   [N, N_M] per head, padded memory masked
 *   3.  Y_h    = softmax(E_h) V_h        [N, D_H] into head h's columns of Y
 *   4.  O      = Y W_O + b_O       [N, D_out]
 *
 * Steps 2-3 are chapter 03's dot_attention_forward/backward per (sequence,
 * head), on column blocks reached through row strides, as in chapter 05.
 * No causal mask here: every decoder position may look at every real source
 * position. When decoding one token at a time, step 1b does not depend on the
 * token, so it is computed once per source (multi_head_cross_memory) and each
 * step only projects its query and attends (multi_head_cross_attend).
 *
 * Conventions as in chapter 05: [B, N, .] row-major, no allocation inside
 * forward or backward, backward ACCUMULATES (+=) and skips NULL gradients.
 * Only the plain path (chapter 03's, A kept for the heatmaps). Dropout on
 * the weights as in chapter 05: with s->keep_masks, forward and backward
 * may be given keep [B, H, N, N_M] (0 or 1/(1-p) per weight), step 3 is
 * then Y_h = (A_h o keep_h) V_h, and A stays the undropped softmax. */
#ifndef MULTI_HEAD_CROSS_H
#define MULTI_HEAD_CROSS_H
#include <stddef.h>
#include "05_multi_head_attention/multi_head.h"
#include "util/rng.h"

typedef struct {
    float *W_Q;     /* [D, H D_H] */
    float *W_KV;    /* [D, 2 H D_H] = [W_K | W_V]; head h owns columns h D_H.. of each */
    float *W_O;     /* [H D_H, D_out] */
    float *b_O;     /* [D_out] */
} MultiHeadCrossWeights;

/* The sizes are chapter 05's MultiHeadSpec {D, H, D_H, D_out} (the memory
 * has width D too). */
size_t multi_head_cross_param_count(const MultiHeadSpec *s);
/* Point w into base: W_Q | W_KV | W_O | b_O. */
MultiHeadCrossWeights multi_head_cross_weights_view(const MultiHeadSpec *s, float *base);
/* W_Q, W_K, W_V Xavier-uniform for [D, H D_H], W_O for [H D_H, D_out], b_O = 0. */
void multi_head_cross_init(const MultiHeadSpec *s, const MultiHeadCrossWeights *w, Rng *rng);

/* A [B, H, N, N_M]: the attention weights (for backward and the heatmaps). */
size_t multi_head_cross_attention_floats(const MultiHeadSpec *s, int B, int N, int N_M);
/* Cache: Q [B N, H D_H] | [K|V] [B N_M, 2 H D_H] | Y [B N, H D_H]
 * (| with s->keep_masks: one head's dropped weights [N, N_M] per thread,
 * threads_slots(B) of them). */
size_t multi_head_cross_cache_floats(const MultiHeadSpec *s, int B, int N, int N_M);
/* Scratch of backward: dQ | d[K|V] | dY (as the cache) | dA, dE [N, N_M] per
 * thread, threads_slots(B) of them. */
size_t multi_head_cross_scratch_floats(const MultiHeadSpec *s, int B, int N, int N_M);

/* X [B, N, D], M [B, N_M, D] -> O [B, N, D_out], A [B, H, N, N_M], cache.
 * keep [B, H, N, N_M] (or NULL): dropout multipliers of the weights (only
 * with s->keep_masks). mem_lens [B] (or NULL): memory b has mem_lens[b] real
 * positions (0 = all); no query attends to the padding after them. */
void multi_head_cross_forward(float *O, float *A, const float *keep, float *cache, const float *X,
                              const float *M, const MultiHeadSpec *s, const MultiHeadCrossWeights *w,
                              const int *mem_lens, int B, int N, int N_M);

/* dO [B, N, D_out] -> dX [B, N, D] +=, dM [B, N_M, D] +=, dw += (any may be
 * NULL). A, keep, cache are what forward saw and wrote. */
void multi_head_cross_backward(float *dX, float *dM, MultiHeadCrossWeights *dw, float *scratch,
                               const float *dO, const float *A, const float *keep, const float *cache,
                               const float *X,
                               const float *M, const MultiHeadSpec *s, const MultiHeadCrossWeights *w,
                               const int *mem_lens, int B, int N, int N_M);

/* ------------------------------------------------ decoding, a step at a time */
/* Step 1b alone: [K|V] [R_M, 2 H D_H] = M [R_M, D] W_KV (every memory row). */
void multi_head_cross_memory(float *KV, const float *M, const MultiHeadSpec *s,
                             const MultiHeadCrossWeights *w, int R_M);

/* Steps 1a, 2, 3, 4 for n decoder rows with ONE query each: row r attends
 * over its own memory KV_rows[r] [N_M, 2 H D_H], of which the first
 * mem_lens[r] positions are real. X [n, D] -> O [n, D_out], A [n, H, N_M]
 * (or NULL). work: n (2 H D_H + H N_M) floats. */
void multi_head_cross_attend(float *O, float *A, float *work, const float *X, const float *const *KV_rows,
                             const int *mem_lens, const MultiHeadSpec *s, const MultiHeadCrossWeights *w,
                             int n, int N_M);

#endif
