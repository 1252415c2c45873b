/* locality_attention.h - chapter 07: locality self-attention (Lee, Lee and
 * Song 2021, "Vision Transformer for Small-Size Datasets"), composed of
 * chapter 05's steps; the ViT's blocks use it with --locality.
 *
 * A ViT trained from scratch on a small dataset tends to spread each token's
 * attention evenly, and mostly onto itself. Two changes to chapter 05's
 * layer, both in steps 2-3, make its attention sharper and more local:
 *   - no query attends to its own key (chapter 03's no_self rule: the
 *     diagonal of every E is -inf), so each output is made of the OTHER
 *     positions;
 *   - each head learns its own scale: E_h = exp(t_h) Q_h K_h^T, t_h starting
 *     at log(1/sqrt(D_H)), the fixed scale's value, so a head may sharpen
 *     (or soften) its softmax.
 * The steps, X [B, N, D] -> O [B, N, D_out]:
 *   1. [Q|K|V] = X W_QKV                          multi_head_qkv_forward
 *   2.-3. Y_h = softmax(exp(t_h) Q_h K_h^T) V_h    multi_head_heads_forward,
 *         diagonal blocked                          alpha_h = exp(t_h)
 *   4. O = Y W_O + b_O                             multi_head_output_forward
 * Backward, after chapter 05's 3'-2': dt_h = sum over E_h's entries of
 * dE * E = sum(Q_h o dQ_h), since dQ_h = dE_h K_h exp(t_h) is the only
 * gradient that the head-h columns of d[Q|K|V] receive.
 *
 * Plain attention only (the fused kernel has neither rule), and an
 * encoder's: with a causal mask the first position would have no key left.
 * The parameters are chapter 05's W_QKV | W_O | b_O followed by t [H]
 * (locality_attention's extra parameters in chapter 06's block). */
#ifndef LOCALITY_ATTENTION_H
#define LOCALITY_ATTENTION_H
#include "06_transformer/block.h"

/* The block's self-attention for a BlockSpec (its self_attention field). */
extern const BlockSelfAttention locality_attention;

/* Every function takes the hook's options first (locality has none: NULL).
 * Returns 0, or -1 with fail() where locality attention cannot serve: the
 * fused attention, a causal mask, a decoder block's cross-attention. */
int locality_attention_check(const void *options, const MultiHeadSpec *s, int causal, int cross);
/* The H learned scales t (the extra parameters). */
size_t locality_attention_extra_params(const void *options, const MultiHeadSpec *s);
/* t_h = log(1/sqrt(D_H)) for every head: it starts as chapter 05's layer. */
void locality_attention_init(const void *options, float *t, const MultiHeadSpec *s);
/* Cache: chapter 05's plain one ([Q|K|V] | Y | the dropped weights' room)
 * followed by alpha [H] = exp(t), which backward reads. */
size_t locality_attention_cache_floats(const void *options, const MultiHeadSpec *s, int B, int N);
/* Scratch: chapter 05's plain one (d[Q|K|V] | dY | dA, dE per thread). */
size_t locality_attention_scratch_floats(const void *options, const MultiHeadSpec *s, int B, int N);

/* X [B, N, D] -> O [B, N, D_out], A [B, H, N, N] (written; diagonal 0),
 * cache (written); keep [B, H, N, N] or NULL (dropout on A, as chapter 05);
 * lens [B] or NULL: padding as chapter 05. causal must be 0. */
void locality_attention_forward(const void *options, float *O, float *A, const float *keep, float *cache,
                                const float *X, const MultiHeadSpec *s, const MultiHeadWeights *w, const float *t,
                                int causal, const int *lens, int B, int N);
/* dO [B, N, D_out] -> dX [B, N, D] +=, dw +=, dt [H] += (any may be NULL). */
void locality_attention_backward(const void *options, float *dX, MultiHeadWeights *dw, float *dt, float *scratch,
                                 const float *dO, const float *A, const float *keep, const float *cache,
                                 const float *X, const MultiHeadSpec *s, const MultiHeadWeights *w, const float *t,
                                 int causal, const int *lens, int B, int N);
#endif
