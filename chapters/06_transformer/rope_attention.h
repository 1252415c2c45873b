/* rope_attention.h - chapter 06: chapter 05's multi-head self-attention with
 * rotary positions (RoPE, Su et al. 2021; common/nn/rope.h), composed of
 * chapter 05's steps with the rotation between steps 1 and 2:
 *
 *   1. [Q|K|V] = X W_QKV                      multi_head_qkv_forward
 *      Q_h <- rotate(Q_h), K_h <- rotate(K_h)  [N, D_H] each, row n at position n; V untouched
 *   2.-3. Y = softmax(Q K^T / sqrt(D_H)) V     multi_head_attend_forward (plain or fused)
 *   4. O = Y W_O + b_O                         multi_head_output_forward
 *
 * so E = Q_h K_h^T / sqrt(D_H) depends on positions only through their
 * differences. The cache keeps the rotated Q and K (steps 2-3 and their
 * backward read them); backward turns dQ_h and dK_h back before step 1'.
 * The shapes, buffers and masks are multi_head_forward's (multi_head.h):
 * the same cache and scratch sizes, the same weights. */
#ifndef ROPE_ATTENTION_H
#define ROPE_ATTENTION_H
#include "05_multi_head_attention/multi_head.h"

/* Returns 0, or -1 with fail(): the rotation turns pairs of numbers, so D_H
 * must be even (and the spec one chapter 05 runs). */
int rope_attention_check(const MultiHeadSpec *s);

/* The rotation itself, for a later part composing its own attention (part
 * 5's sparse attention): the Q and K columns of QKV [B, N, 3 H D_H] (or of
 * d[Q|K|V]) rotated in place, row n of each sequence at position n; back = 1
 * turns a gradient back (rope_backward). */
void rope_attention_rotate(float *QKV, int H, int D_H, int B, int N, int back);

/* X [B, N, D] -> O [B, N, D_out], A [B, H, N, N] (plain path), cache: as
 * multi_head_forward, with the queries and keys rotated. */
void rope_attention_forward(float *O, float *A, const float *keep, float *cache, const float *X,
                            const MultiHeadSpec *s, const MultiHeadWeights *w, int causal, const int *lens, int B,
                            int N);
/* dO [B, N, D_out] -> dX [B, N, D] +=, dw +=: as multi_head_backward. */
void rope_attention_backward(float *dX, MultiHeadWeights *dw, float *scratch, const float *dO, const float *A,
                             const float *keep, const float *cache, const float *X, const MultiHeadSpec *s,
                             const MultiHeadWeights *w, int causal, const int *lens, int B, int N);
#endif
