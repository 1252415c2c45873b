/* block.h - chapter 06: the transformer block.
 *
 * Chapter 05's multi-head attention mixes information ACROSS positions. A
 * transformer block wraps it with three more ideas and adds a second layer
 * that works on each position alone:
 *   - residual connections: each sublayer's output is ADDED to its input,
 *     so a deep stack starts close to the identity and gradients flow;
 *   - normalisation (LayerNorm, or RMSNorm) of each position's D numbers
 *     (or batch norm: each of the D features over the batch's positions, below);
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
 * The DECODER block of an encoder-decoder transformer (spec.cross = 1) has a
 * third sublayer between those two, wired the same way: multi-head
 * CROSS-attention (multi_head_cross.h), whose queries come from the decoder
 * and whose keys and values come from the encoder's outputs M (the memory):
 *     post-norm: Z' = Norm_c(Z + Cross(Z, M))   pre-norm: Z' = Z + Cross(Norm_c(Z), M)
 * and the MLP sublayer reads Z'. Its self-attention is causal.
 *
 * Each choice can be switched off, which is how the tests tie this chapter
 * to the previous one: with norm NONE and mlp NONE the block is exactly
 * X + multi_head_forward(X) (chapter 05), bit for bit on the naive backend.
 * With mlp NONE the whole MLP sublayer (its norm too) is left out.
 *
 * Dropout (probability p, training only) is applied to each sublayer's
 * output before it is added to the residual stream, as in the 2017 paper,
 * and (probability attn_dropout) to the attention weights, self and cross,
 * after the softmax and before they weight the values: Y = (A o keep) V, as
 * in the paper's reference code and PyTorch's nn.MultiheadAttention(dropout=p).
 * Stochastic depth (drop_path, Huang et al. 2016, as in DeiT and timm)
 * drops a sublayer's whole branch output for an example, after the dropout:
 * that example's sublayer is then the identity, X_k + 0, which trains each
 * block to improve on its input rather than to be needed; one draw per
 * example and sublayer (transformer_layers.h's drop_path_forward).
 * All three are inverted (a kept entry is scaled by 1/(1-p)) and off at
 * evaluation, where the block is the one with p = 0, bit for bit.
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
#include "06_transformer/multi_head_cross.h"
#include "util/rng.h"

/* Where the norms sit: after each residual sum, or at the start of each branch. */
typedef enum { BLOCK_POST_NORM = 0, BLOCK_PRE_NORM = 1 } BlockNormPlace;
/* Which norm: LayerNorm (gamma, beta), RMSNorm (gamma only), none, or batch
 * norm (gamma, beta; common/nn/batchnorm.h): feature d normalised with its
 * mean and variance over the R = B N rows of the pass (padding, by lens,
 * left out of them) while training, and with their running averages at
 * evaluation. Those running statistics are not parameters: the block's
 * owner keeps them (BlockWeights.running_mean, running_var; stack.h) and its
 * checkpoint saves them beside the weights. Batch statistics mix the
 * positions of a sequence: in training, position i's output depends on the
 * later positions j > i too, which a causal language model must not see
 * (chapter 06's GPT refuses it). */
typedef enum { BLOCK_LAYERNORM = 0, BLOCK_RMSNORM = 1, BLOCK_NO_NORM = 2, BLOCK_BATCHNORM = 3 } BlockNorm;
/* The position-wise MLP: GELU (exact erf form), ReLU, SwiGLU, or none. */
typedef enum { BLOCK_MLP_GELU = 0, BLOCK_MLP_RELU = 1, BLOCK_MLP_SWIGLU = 2, BLOCK_NO_MLP = 3 } BlockMlp;

/* A mixture of experts in place of the one MLP (moe.h): E experts, each
 * the MLP above (mlp: gelu, relu or swiglu), a linear router picking k of
 * them per position. E 0: the one dense MLP. */
#define BLOCK_MAX_EXPERTS 64
typedef struct {
    int E;                        /* experts; 0: a dense MLP */
    int k;                        /* experts per position, 1 <= k <= E (Switch: 1, Mixtral: 2) */
    float aux;                    /* alpha, the load-balancing loss's coefficient (>= 0) */
    float capacity;               /* capacity factor: expert slots ceil(c R k / E) in training; 0: no limit */
    int renorm;                   /* 1: the k weights renormalised to sum to 1 (Mixtral); 0: p itself (Switch) */
} BlockMoe;

/* The eps of the norms: PyTorch's default for nn.LayerNorm (and nn.BatchNorm1d). */
#define BLOCK_NORM_EPS 1e-5f

/* A self-attention that a later chapter composes from chapter 05's steps
 * (multi_head.h: qkv, heads, output), which the block's first sublayer then
 * calls in place of chapter 05's layer; chapter 07's locality attention
 * (locality_attention.h) is one. Its parameters are chapter 05's W_QKV,
 * W_O, b_O (BlockWeights.attn) followed by extra_params floats of its own
 * (BlockWeights.attn_extra); A is chapter 05's plain [B, H, N, N]; its cache
 * and scratch are its own sizes. Shapes and masks of every function as in
 * multi_head_forward/backward. Every function is given the attention's own
 * settings first (`options`: a sparse pattern's window, NULL for locality). */
typedef struct {
    const char *name;                                              /* for messages: "locality self-attention" */
    const void *options;                                           /* its settings, passed to each function */
    /* 0, or -1 with fail() for a block it cannot serve (causal, cross, its spec) */
    int (*check)(const void *options, const MultiHeadSpec *s, int causal, int cross);
    size_t (*extra_params)(const void *options, const MultiHeadSpec *s);
    void (*init_extra)(const void *options, float *extra, const MultiHeadSpec *s);   /* its parameters' first values */
    size_t (*cache_floats)(const void *options, const MultiHeadSpec *s, int B, int N);
    size_t (*scratch_floats)(const void *options, const MultiHeadSpec *s, int B, int N);
    /* X [B, N, D] -> O [B, N, D], A [B, H, N, N], cache (written) */
    void (*forward)(const void *options, float *O, float *A, const float *keep, float *cache, const float *X,
                    const MultiHeadSpec *s, const MultiHeadWeights *w, const float *extra, int causal, const int *lens,
                    int B, int N);
    /* dO [B, N, D] -> dX +=, dw +=, dextra += (any may be NULL) */
    void (*backward)(const void *options, float *dX, MultiHeadWeights *dw, float *dextra, float *scratch,
                     const float *dO, const float *A, const float *keep, const float *cache, const float *X,
                     const MultiHeadSpec *s, const MultiHeadWeights *w, const float *extra, int causal,
                     const int *lens, int B, int N);
} BlockSelfAttention;

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
    int cross;                    /* 1: a decoder block, with the cross-attention sublayer */
    float attn_dropout;           /* p on the attention weights in [0, 1): 0 = none; plain attention only */
    const BlockSelfAttention *self_attention;   /* NULL: chapter 05's multi-head attention (with rope:
                                   * rope_attention.h); else a later chapter's (above) */
    float drop_path;              /* stochastic depth: p in [0, 1) of skipping a sublayer's branch for a
                                   * whole example; 0 = none (a stack spreads it over the layers) */
    int rope;                     /* 1: rotary positions on the self-attention's queries and keys
                                   * (rope_attention.h, common/nn/rope.h); D_H even */
    BlockMoe moe;                 /* E 0 (the default): one dense MLP */
} BlockSpec;

/* Returns 0, or -1 with fail() for a spec the block cannot run: a dropout
 * or drop path outside [0, 1), attention dropout with fused attention (which never
 * forms the weights it would drop), or a self_attention whose check refuses
 * the block (or beside rope). */
int block_spec_check(const BlockSpec *s);

/* Views into one contiguous block of parameters (block_weights_view).
 * A pointer is NULL when the spec has no such tensor. */
typedef struct {
    MultiHeadWeights attn;        /* W_QKV [D, 3 H D_H], W_O [H D_H, D], b_O [D] */
    float *attn_extra;            /* the self_attention's own parameters (chapter 07's locality scales [H]) */
    float *norm1_gamma;           /* [D]  LayerNorm and RMSNorm */
    float *norm1_beta;            /* [D]  LayerNorm only */
    MultiHeadCrossWeights cross;  /* decoder: W_Q [D, H D_H], W_KV [D, 2 H D_H], W_O, b_O */
    float *normc_gamma;           /* [D]  decoder: the cross-attention sublayer's norm */
    float *normc_beta;            /* [D] */
    float *W_1;                   /* [D, F] */
    float *b_1;                   /* [F]  GELU and ReLU only */
    float *W_3;                   /* [D, F] SwiGLU's gate product only */
    float *W_2;                   /* [F, D] */
    float *b_2;                   /* [D]  GELU and ReLU only */
    float *W_r;                   /* [D, E] mixture of experts: the router (then W_1 .. b_2 are NULL) */
    float *experts;               /* E experts, each mlp_param_count floats (mlp.h's mlp_view) */
    float *norm2_gamma;           /* [D] */
    float *norm2_beta;            /* [D] */
    /* Batch norm's running statistics (BLOCK_BATCHNORM), NOT parameters and not in the block's parameter
     * buffer: block_running_floats floats each, per sublayer with a norm (self, cross, MLP, in order) its
     * [D]. block_weights_view leaves them NULL; the block's owner points them at its own (stack.h).
     * NULL: none kept (training then updates nothing, evaluation uses the batch's own statistics). */
    float *running_mean;
    float *running_var;
} BlockWeights;

/* What a decoder block's cross-attention reads: the encoder's outputs
 * M [B, N_M, D], memory b having lens[b] real positions (lens NULL: all). */
typedef struct {
    const float *M;
    const int *lens;
    int N_M;
} BlockMemory;

/* Chapter 05's spec for the block's attention: {D, H, D_H, D, attention,
 * keep_masks = 1 when attn_dropout > 0 (plain attention)} (the
 * cross-attention has the same sizes). */
MultiHeadSpec block_attention_spec(const BlockSpec *s);

/* Number of parameters, in the order of the views: attn | attn_extra | norm1_gamma |
 * norm1_beta | cross | normc_gamma | normc_beta | W_1 | b_1 | W_3 | W_2 | b_2 |
 * norm2_gamma | norm2_beta (absent tensors take no room); with experts,
 * W_r | expert 0 | .. | expert E-1 in place of W_1 .. b_2. */
size_t block_param_count(const BlockSpec *s);
/* Point w into base (block_param_count floats). */
BlockWeights block_weights_view(const BlockSpec *s, float *base);
/* 1 when the spec's norm has a beta (LayerNorm, batch norm). */
int block_norm_has_beta(const BlockSpec *s);
/* Floats of one block's running means (and as many of its running
 * variances): D per sublayer with a norm under batch norm; 0 otherwise. */
size_t block_running_floats(const BlockSpec *s);
/* Attention as chapter 05 (multi_head_init; multi_head_cross_init; a
 * self_attention's extra parameters by its init_extra), W_1, W_3, W_2
 * Xavier-uniform, biases 0, norm gammas 1 and betas 0. */
void block_init(const BlockSpec *s, const BlockWeights *w, Rng *rng);

/* What a mixture-of-experts sublayer keeps for R rows (moe.h), S = R k
 * (position, choice) pairs. The int arrays lie in the cache's float memory
 * (each entry only ever read and written as an int). */
typedef struct {
    float *P;               /* [R, E] router probabilities softmax(U W_r) */
    int *choice;            /* [R, k] each position's experts, the most likely first */
    float *g;               /* [R, k] their weights */
    int *slot;              /* [R, k] the pair's row among the gathered rows; -1: dropped (capacity) */
    int *slot_pair;         /* [S] the pair r k + j of each gathered row */
    int *offset;            /* [E + 1] expert e's gathered rows are offset[e] .. offset[e+1] - 1 */
    float *Ug;              /* [S, D] the gathered inputs, expert by expert */
    float *pre_act, *gate, *hidden;   /* [S, F] the experts' MLPs (gate: SwiGLU) */
    float *Yg;              /* [S, D] the experts' outputs */
    float *f;               /* [E] f_e: share of the R k choices that went to e (before capacity) */
    float *stats;           /* [2] aux = E sum_e f_e P_e (without alpha), pairs dropped */
} BlockMoeCache;

/* What forward keeps for backward, one named buffer each (as llm.c's
 * ActivationTensors), laid out once by block_cache_alloc for up to max_B
 * sequences of max_N positions and a memory of N_M positions (0 for an
 * encoder block); a pass over B <= max_B sequences of N <= max_N positions
 * uses the first B N rows of each. A pointer is NULL when the spec does not
 * need the buffer. R = B N rows. Per sublayer (self-attention,
 * cross-attention, MLP: sub[0..2]): */
typedef struct {
    float *n;               /* [R, D] pre-norm: Norm(X_k); post-norm: S = X_k + O */
    float *mean, *rstd;     /* [R] the norm's row statistics (mean: LayerNorm only);
                             * batch norm: [D] its feature statistics */
    float *batch_stats;     /* [1] batch norm: 1 when mean, rstd were the pass's own (training), 0 the
                             * running ones (evaluation), which backward then treats as constants */
    float *mask;            /* [R, D] dropout on the branch output (dropout > 0) */
    float *path_keep;       /* [B] drop path: 0 or 1/(1-p) per example (drop_path > 0) */
    float *out;             /* [R, D] Z_k, the sublayer's output */
} BlockSublayerCache;

typedef struct {
    BlockSublayerCache sub[3];  /* self-attention, cross-attention (decoder), MLP (mlp != NONE) */
    float *A;               /* [B, H, N, N] the self-attention weights (NULL with fused attention,
                             * which keeps none); for heatmaps too */
    float *keep;            /* [B, H, N, N] their dropout multipliers (attn_dropout > 0) */
    float *attn_cache;      /* chapter 05's cache */
    float *cross_A;         /* [B, H, N, N_M] the cross-attention weights (decoder) */
    float *cross_keep;      /* [B, H, N, N_M] their dropout multipliers (attn_dropout > 0) */
    float *cross_cache;     /* multi_head_cross's cache */
    float *pre_act;         /* [R, F] U W_1 (+ b_1) */
    float *gate;            /* [R, F] U W_3 (SwiGLU) */
    float *hidden;          /* [R, F] act(pre_act), or silu(pre_act) gate */
    BlockMoeCache moe;      /* mixture of experts (moe.E > 0) */
    float *memory;          /* the one allocation they all point into */
} BlockCache;

/* Floats of the buffers above for B sequences of N positions (a memory of N_M). */
size_t block_cache_floats(const BlockSpec *s, int B, int N, int N_M);
/* Allocate them (zeroed, one allocation) for up to max_B sequences of max_N
 * positions: once, before the passes. */
void block_cache_alloc(BlockCache *c, const BlockSpec *s, int max_B, int max_N, int N_M);
void block_cache_free(BlockCache *c);
/* Or lay them out in memory the caller holds (block_cache_floats of it;
 * c->memory is then NULL: nothing for block_cache_free). */
BlockCache block_cache_view(const BlockSpec *s, int max_B, int max_N, int N_M, float *memory);
/* Scratch backward needs (one buffer, shared by a stack's blocks). */
size_t block_scratch_floats(const BlockSpec *s, int B, int N, int N_M);

/* X [B, N, D] -> Y [B, N, D] (written), cache (written; block_cache_alloc'd for at least B, N, N_M).
 * lens [B] (or NULL): sequence b has lens[b] real positions (0 = all N), as
 * in chapter 05: no position attends to padding (padding rows are still
 * computed, and are the caller's to ignore). mem: a decoder block's memory
 * (NULL for an encoder block). train: 1 applies dropout, drawing the masks
 * from rng sublayer by sublayer, each attention sublayer's keep masks
 * (dropout_mask over all its weights) before its output's mask, then its
 * drop path's B draws; 0 is evaluation: no dropout, the same output as p = 0
 * bit for bit (the masks kept are ones). rng may be NULL when both dropouts
 * and drop path are 0 or train is 0. Batch norm: train 1 normalises with the
 * pass's statistics over its real rows (lens) and updates w's running ones;
 * 0 normalises with the running ones (block.h's BlockNorm). */
void block_forward(float *Y, const BlockCache *cache, const float *X, const BlockSpec *s, const BlockWeights *w,
                   const int *lens, const BlockMemory *mem, int B, int N, int train, Rng *rng);

/* dY [B, N, D] -> dX [B, N, D] +=, dM [B, N_M, D] += (decoder blocks: the
 * memory's gradient), every tensor of dw += (dX, dM, dw and any field of dw
 * may be NULL). cache, X, w, lens and mem are what forward saw and wrote.
 * scratch: block_scratch_floats. */
void block_backward(float *dX, float *dM, BlockWeights *dw, float *scratch, const float *dY,
                    const BlockCache *cache, const float *X, const BlockSpec *s, const BlockWeights *w,
                    const int *lens, const BlockMemory *mem, int B, int N);

/* ------------------------------------------------ decoding with a KV cache */
/* Generating the token at position t with a causal stack, the new row
 * attends over positions 0..t. Their keys and values never change once
 * computed (causal: an earlier position never sees a later one), so each
 * decoding row keeps them, per block, in its KV cache: a step computes only
 * the new row, O(t) work per block, instead of the whole prefix again. */
typedef struct {
    float *K, *V;          /* [T_cap, H D_H] keys and values of positions 0..pos-1;
                            * the step writes position pos */
    int pos;               /* the new token's position */
    const float *mem_KV;   /* decoder blocks: [N_M, 2 H D_H], multi_head_cross_memory of its source */
    int mem_len;           /* real positions of that memory */
} BlockStepRow;

/* Floats of work block_step needs for n rows, T_cap positions, a memory of N_M. */
size_t block_step_work_floats(const BlockSpec *s, int n, int T_cap, int N_M);

/* One new position for each of n rows (evaluation: no dropout; plain
 * attention): X [n, D] -> Y [n, D], the same numbers as row pos of
 * block_forward over the row's whole prefix. With rope, the new query and
 * key are rotated at position pos before the key joins the cache, so every
 * cached key stays rotated at its own position. cross_A [n, H, N_M] (or NULL)
 * gets the cross-attention weights. Batch norm normalises with w's running
 * statistics (evaluation; none attached: the n rows' own). A block with a
 * later chapter's self_attention (an encoder's) has no step. */
void block_step(float *Y, float *cross_A, const float *X, const BlockSpec *s, const BlockWeights *w,
                const BlockStepRow *rows, int n, int T_cap, int N_M, float *work);

/* The spec's norm over R rows of D (the final norm a pre-norm stack ends
 * with): x [R, D] -> out, mean (LayerNorm) and rstd [R] kept for backward.
 * Batch norm: the statistics of the R rows themselves (as a training pass
 * without running statistics: block_norm_forward_batch says more). */
void block_norm_forward(float *out, float *mean, float *rstd, const float *x, const BlockSpec *s,
                        const float *gamma, const float *beta, int R);
/* dout [R, D] -> dx +=, dgamma +=, dbeta += (LayerNorm, batch norm). */
void block_norm_backward(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                         const float *rstd, const float *x, const BlockSpec *s, const float *gamma, int R);

/* The same norm with what batch norm needs besides: x [B, N, D] -> out
 * [B, N, D]; mean, rstd: [R] (LayerNorm, RMSNorm) or [D] (batch norm);
 * batch_stats [1] (batch norm; may be NULL otherwise): whether the pass's own
 * statistics were used. Batch norm with train 1: the statistics of the real
 * rows (lens as block_forward's; NULL: all), running_mean and running_var
 * [D] updated when not NULL; train 0: the running ones (NULL: the pass's own
 * again). The other norms ignore lens, train and the running pointers. */
void block_norm_forward_batch(float *out, float *mean, float *rstd, float *batch_stats, const float *x,
                              const BlockSpec *s, const float *gamma, const float *beta, float *running_mean,
                              float *running_var, const int *lens, int B, int N, int train);
/* dout [B, N, D] -> dx +=, dgamma +=, dbeta +=; what forward kept and saw. */
void block_norm_backward_batch(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                               const float *rstd, const float *batch_stats, const float *x, const BlockSpec *s,
                               const float *gamma, const int *lens, int B, int N);

#endif
