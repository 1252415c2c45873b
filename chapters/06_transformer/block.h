/* block.h - chapter 06: the transformer block.
 *
 * Chapter 05's multi-head attention mixes information ACROSS positions. A
 * transformer block wraps it with three more ideas and adds a second layer
 * that works on each position alone:
 *   - residual connections: each sublayer's output is ADDED to its input,
 *     so a deep stack starts close to the identity and gradients flow;
 *   - normalisation (LayerNorm, or RMSNorm) of each position's D numbers;
 *   - a position-wise MLP, D -> F -> D, the same for every position.
 * Lecture notation, one sequence X [N, D]:
 *
 *   post-norm (the 2017 paper, BERT):     pre-norm (GPT-2, LLaMA, ViT):
 *     Z = Norm1(X + MHA(X))                 Z = X + MHA(Norm1(X))
 *     Y = Norm2(Z + MLP(Z))                 Y = Z + MLP(Norm2(Z))
 *
 *   MLP(U) = act(U W_1 + b_1) W_2 + b_2             act = GELU or ReLU
 *   MLP(U) = (silu(U W_1) * (U W_3)) W_2            SwiGLU (no biases, as LLaMA)
 *
 * Pre-norm keeps an un-normalised path from X to Y (only additions), which
 * is why deep pre-norm stacks train without a learning-rate warm-up.
 *
 * Each choice can be switched off, which is how the tests tie this chapter
 * to the previous one: with norm NONE and mlp NONE the block is exactly
 * X + multi_head_forward(X) (chapter 05), bit for bit on the naive backend.
 * With mlp NONE the whole second sublayer (its norm too) is left out: Y = Z.
 *
 * Dropout (probability p, training only) is applied to each sublayer's
 * output before it is added to the residual stream, as in the 2017 paper.
 *
 * Everything works on B sequences of N positions, [B, N, D] row-major: the
 * norms, the MLP and the residual sums treat the R = B*N positions as one
 * [R, D] matrix; only attention looks across positions (chapter 05).
 * Conventions as in chapter 05: no allocation inside forward or backward
 * (buffers sized by the *_floats() functions), backward ACCUMULATES (+=)
 * into dX and the weight gradients. */
#ifndef BLOCK_H
#define BLOCK_H
#include <stddef.h>
#include "05_multi_head_attention/multi_head.h"
#include "util/rng.h"

/* Where the norms sit: after each residual sum, or at the start of each branch. */
typedef enum { BLOCK_POST_NORM = 0, BLOCK_PRE_NORM = 1 } BlockNormPlace;
/* Which norm: LayerNorm (gamma, beta), RMSNorm (gamma only), or none. */
typedef enum { BLOCK_LAYERNORM = 0, BLOCK_RMSNORM = 1, BLOCK_NO_NORM = 2 } BlockNorm;
/* The position-wise MLP: GELU (exact erf form), ReLU, SwiGLU, or none. */
typedef enum { BLOCK_MLP_GELU = 0, BLOCK_MLP_RELU = 1, BLOCK_MLP_SWIGLU = 2, BLOCK_NO_MLP = 3 } BlockMlp;

/* The eps of both norms: PyTorch's default for nn.LayerNorm. */
#define BLOCK_NORM_EPS 1e-5f

typedef struct {
    int D;                        /* model width: X and Y are [B, N, D] */
    int H;                        /* attention heads */
    int D_H;                      /* width of one head */
    int F;                        /* MLP hidden width (unused with BLOCK_NO_MLP) */
    BlockNormPlace norm_place;    /* BLOCK_POST_NORM or BLOCK_PRE_NORM */
    BlockNorm norm;
    BlockMlp mlp;
    float dropout;                /* p in [0, 1): 0 = no dropout */
    MultiHeadAttention attention; /* chapter 05's MULTI_HEAD_PLAIN or MULTI_HEAD_FUSED */
    int causal;                   /* 1: position i attends only to j <= i */
} BlockSpec;

/* Views into one contiguous block of parameters (block_weights_view).
 * A pointer is NULL when the spec has no such tensor. */
typedef struct {
    MultiHeadWeights attn;        /* W_QKV [D, 3 H D_H], W_O [H D_H, D], b_O [D] */
    float *norm1_gamma;           /* [D]  LayerNorm and RMSNorm */
    float *norm1_beta;            /* [D]  LayerNorm only */
    float *W_1;                   /* [D, F] */
    float *b_1;                   /* [F]  GELU and ReLU only */
    float *W_3;                   /* [D, F] SwiGLU's gate product only */
    float *W_2;                   /* [F, D] */
    float *b_2;                   /* [D]  GELU and ReLU only */
    float *norm2_gamma;           /* [D] */
    float *norm2_beta;            /* [D] */
} BlockWeights;

/* Chapter 05's spec for the block's attention: {D, H, D_H, D, attention}. */
MultiHeadSpec block_attention_spec(const BlockSpec *s);

/* Number of parameters, in the order of the views:
 * attn | norm1_gamma | norm1_beta | W_1 | b_1 | W_3 | W_2 | b_2 | norm2_gamma | norm2_beta
 * (absent tensors take no room). */
size_t block_param_count(const BlockSpec *s);
/* Point w into base (block_param_count floats). */
BlockWeights block_weights_view(const BlockSpec *s, float *base);
/* Attention as chapter 05 (multi_head_init), W_1, W_3, W_2 Xavier-uniform,
 * biases 0, norm gammas 1 and betas 0. */
void block_init(const BlockSpec *s, const BlockWeights *w, Rng *rng);

/* What forward keeps for backward, for B sequences of N positions:
 * the norms' inputs, outputs and row statistics, chapter 05's A and cache,
 * the MLP's hidden activations [B N, F] (two or three of them) and the
 * dropout masks. */
size_t block_cache_floats(const BlockSpec *s, int B, int N);
/* Scratch backward needs: five [B N, D] gradients, the MLP's [B N, F] ones
 * and chapter 05's multi_head_scratch_floats. */
size_t block_scratch_floats(const BlockSpec *s, int B, int N);

/* The attention weights A [B, H, N, N] forward wrote into the cache (for
 * heatmaps); NULL with fused attention, which keeps no A. */
const float *block_attention_weights(const BlockSpec *s, const float *cache, int B, int N);

/* X [B, N, D] -> Y [B, N, D] (written), cache [block_cache_floats] (written).
 * lens [B] (or NULL): sequence b has lens[b] real positions (0 = all N), as
 * in chapter 05: no position attends to padding (padding rows are still
 * computed, and are the caller's to ignore). train: 1 applies dropout,
 * drawing the masks from rng; 0 is evaluation: no dropout, the same output
 * as p = 0 bit for bit. rng may be NULL when spec->dropout is 0 or train is 0. */
void block_forward(float *Y, float *cache, const float *X, const BlockSpec *s, const BlockWeights *w,
                   const int *lens, int B, int N, int train, Rng *rng);

/* dY [B, N, D] -> dX [B, N, D] +=, every tensor of dw += (dX, and any field
 * of dw, may be NULL). cache, X, w and lens are what forward saw and wrote.
 * scratch: block_scratch_floats. */
void block_backward(float *dX, BlockWeights *dw, float *scratch, const float *dY, const float *cache,
                    const float *X, const BlockSpec *s, const BlockWeights *w, const int *lens, int B,
                    int N);

#endif
