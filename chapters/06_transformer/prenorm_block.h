/* prenorm_block.h - chapter 06: the transformer block a student meets first,
 * written out as plain calls: pre-norm, LayerNorm, GELU, no dropout (GPT-2's
 * block, and the ViT's).
 *
 *   Z = X + MHA(LN_1(X))                     attention: across positions
 *   Y = Z + W_2 GELU(LN_2(Z) W_1 + b_1) + b_2   MLP: each position alone
 *
 * One sequence of the batch is X [N, D]; the code works on B of them at once,
 * [B, N, D] row-major, so R = B N rows for everything but attention.
 * Read this file first. block.h's configurable block (post-norm, RMSNorm,
 * SwiGLU, dropout, the decoder's cross-attention) computes the same numbers
 * in this setting, bit for bit (tests/test_block.c), and is what the
 * models use, since it also runs the variants.
 *
 * The weights are block.h's BlockWeights of a BlockSpec with norm_place
 * BLOCK_PRE_NORM, norm BLOCK_LAYERNORM, mlp BLOCK_MLP_GELU (no cross, no
 * dropout): attn, norm1_gamma/beta, W_1, b_1, W_2, b_2, norm2_gamma/beta. */
#ifndef PRENORM_BLOCK_H
#define PRENORM_BLOCK_H
#include "06_transformer/block.h"

/* Every activation forward keeps for backward, one named buffer each
 * (llm.c's ActivationTensors), for B sequences of N positions:
 *   ln1 [R, D], ln1_mean [R], ln1_rstd [R]   LN_1(X) and its row statistics
 *   att [R, D]                                MHA(LN_1(X))
 *   A [B, H, N, N], attn_cache                chapter 05's weights and cache
 *   res1 [R, D]                               Z = X + att
 *   ln2 [R, D], ln2_mean [R], ln2_rstd [R]    LN_2(Z)
 *   pre_act [R, F], hidden [R, F]             LN_2(Z) W_1 + b_1, and its GELU
 *   mlp [R, D]                                hidden W_2 + b_2
 * and the gradients backward needs, of the same shapes (d_*). */
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd, *att, *A, *attn_cache, *res1, *ln2, *ln2_mean, *ln2_rstd;
    float *pre_act, *hidden, *mlp;
    float *d_res1, *d_att, *d_ln1, *d_mlp, *d_hidden, *d_pre_act, *d_ln2, *attn_scratch;
    float *memory;   /* the one allocation they all point into */
} PrenormBlockActs;

/* Returns 0, or -1 with fail() for a spec that is not this block. */
int prenorm_block_check(const BlockSpec *s);
/* Allocate the buffers for B sequences of N positions (once, before training). */
void prenorm_block_acts_alloc(PrenormBlockActs *a, const BlockSpec *s, int B, int N);
void prenorm_block_acts_free(PrenormBlockActs *a);

/* X [B, N, D] -> Y [B, N, D]. causal: position i sees j <= i; lens [B] (or
 * NULL): sequence b has lens[b] real positions (chapter 05's masks). */
void prenorm_block_forward(float *Y, PrenormBlockActs *a, const float *X, const BlockSpec *s,
                           const BlockWeights *w, const int *lens, int B, int N);

/* dY [B, N, D] -> dX [B, N, D] +=, every weight gradient of dw +=. a, X, w,
 * lens: what forward saw and wrote. */
void prenorm_block_backward(float *dX, BlockWeights *dw, PrenormBlockActs *a, const float *dY, const float *X,
                            const BlockSpec *s, const BlockWeights *w, const int *lens, int B, int N);
#endif
