/* stack.h - chapter 06: a stack of L transformer blocks, and the final norm
 * a pre-norm stack ends with.
 *
 *   X_0 [B, N, D]                 written by the model (embeddings + positions)
 *   X_l = Block_l(X_{l-1})        l = 1..L   (block.h)
 *   out = Norm(X_L)               pre-norm stacks (the residual stream is never
 *                                 normalised inside them, so the last norm is here)
 *   out = X_L                     post-norm stacks (each block already ends with a norm)
 *
 * Every transformer in the project is one or two stacks plus what feeds X_0
 * and what reads out: the encoder and the decoder of transformer.c, the GPT
 * of gpt.c (one causal stack), the ViT of chapter 07 (one stack over image
 * patches). The stack keeps the activations and caches backward needs; the
 * weights live in the model's Params, the stack knows their offsets.
 *
 * Batch norm (spec.norm BLOCK_BATCHNORM) has running statistics besides
 * the weights, which are not parameters (the optimizer, clipping and the
 * gradient checker never see them): the stack carries them, running_mean
 * and running_var, D floats each per norm, block 0's norms (block.h's
 * BlockWeights order) first and the final norm's last, and names them for
 * the checkpoints as "<prefix>.running_mean" and "<prefix>.running_var"
 * (stack_running_items).
 *
 * Stochastic depth: spec.drop_path is the LAST block's rate; block l (0-based)
 * drops its branches with p_l = drop_path (l + 1) / L, the linear rule of
 * Huang et al. 2016 (the first blocks, which everything after them reads,
 * are dropped least). stack_layer_spec gives block l's spec.
 *
 * Usage (see transformer.c and gpt.c):
 *   Stack st;
 *   stack_declare(&st, &spec, L, &params, "dec");     declares dec0 .. dec<L-1>
 *   st.norm_g = params_add(...); st.norm_b = ...      the final norm, if any (stack_has_final_norm)
 *   params_alloc(&params);  stack_init_weights(&st, &rng);
 *   stack_alloc(&st, max_B, max_N, N_M);
 *   ... write st.x[0] ...;  stack_forward(&st, lens, mem, B, N, train, &rng);   -> st.out
 *   float *dX0 = stack_backward(&st, dout, lens, mem, dM, B, N);        -> every gradient, d X_0 */
#ifndef STACK_H
#define STACK_H
#include <stddef.h>
#include "06_transformer/block.h"
#include "io/checkpoint.h"
#include "nn/params.h"

#define STACK_MAX_LAYERS 16

typedef struct {
    BlockSpec spec;
    int L;
    Params *params;                     /* the model's parameters (not owned) */
    size_t block[STACK_MAX_LAYERS];     /* offset of block l's one tensor */
    size_t norm_g, norm_b;              /* the final norm's gamma and beta (0: none) */
    /* activations, for up to max_B sequences of max_N positions */
    float *x[STACK_MAX_LAYERS + 1];     /* [B, N, D] X_0 .. X_L (the model writes X_0) */
    BlockCache cache[STACK_MAX_LAYERS]; /* each block's saved activations (block_cache_alloc) */
    float *out, *mean, *rstd;           /* [B, N, D] the output; the final norm's row statistics
                                         * (batch norm: its feature statistics [D]) */
    float *batch_stats;                 /* [1] the final batch norm's (block.h's BlockSublayerCache) */
    /* batch norm's running statistics (NULL for the other norms): [L block_running_floats + D (the final
     * norm, if any)] each, means 0 and variances 1 at stack_declare */
    float *running_mean, *running_var;
    char running_names[2][PARAMS_NAME_LEN];   /* "<prefix>.running_mean", "<prefix>.running_var" */
    int hold_running;                   /* 1: the next training forward leaves the running statistics
                                         * as they are (a second pass over the same batch) */
    /* backward */
    float *grad_a, *grad_b, *scratch;
} Stack;

/* 1 when the spec is pre-norm with a norm: the stack ends with one more norm. */
int stack_has_final_norm(const BlockSpec *s);

/* Declare L blocks of spec s in p, named "<prefix>0" .. "<prefix><L-1>",
 * and remember where they start. Returns 0, or -1 with fail() for L outside
 * 1 .. STACK_MAX_LAYERS. The final norm's tensors are the caller's to
 * declare (into st->norm_g, st->norm_b), so a model keeps its tensor order. */
int stack_declare(Stack *st, const BlockSpec *s, int L, Params *p, const char *prefix);
/* After params_alloc: every block's weights (block_init, in order), the
 * final norm's gamma = 1, beta = 0. */
void stack_init_weights(Stack *st, Rng *rng);
/* Room for B <= max_B sequences of N <= max_N positions (and a memory of
 * N_M positions for decoder blocks; 0 otherwise). */
void stack_alloc(Stack *st, int max_B, int max_N, int N_M);
void stack_free(Stack *st);

/* Block l's spec: st->spec with drop_path scaled to (l + 1) / L of it. */
BlockSpec stack_layer_spec(const Stack *st, int l);

/* Block l's weights (grad 0: with its running statistics) or their gradients (grad 1). */
BlockWeights stack_block_weights(const Stack *st, int l, int grad);

/* Floats of each of running_mean and running_var (0 without batch norm). */
size_t stack_running_floats(const Stack *st);
/* The final norm's running statistics (NULL, NULL without batch norm or a final norm). */
float *stack_final_running_mean(const Stack *st);
float *stack_final_running_var(const Stack *st);
/* The running statistics as checkpoint items (io/checkpoint.h's StateItem,
 * kind STATE_FLOAT): into items[0..2) under the stack's names; returns how
 * many (2 with batch norm, else 0). A model lists them with its weights, so
 * that its checkpoints save them and --load and --resume put them back. */
int stack_running_items(Stack *st, StateItem *items);

/* st->x[0] [B, N, D] -> st->out [B, N, D], through the L blocks and the final
 * norm. lens and mem as in block_forward; train 1 draws dropout masks from rng
 * (and batch norm normalises with the pass's statistics, updating the running
 * ones unless hold_running, which the pass then clears); train 0: evaluation. */
void stack_forward(Stack *st, const int *lens, const BlockMemory *mem, int B, int N, int train, Rng *rng);

/* dout [B, N, D] (the gradient of st->out) -> every block's and the final
 * norm's gradients +=, and (decoder stacks) dM [B, N_M, D] +=. lens, mem, B,
 * N: what forward saw. Returns the gradient of X_0 [B, N, D], in one of the
 * stack's own buffers (valid until its next backward): the model passes it
 * on to its embeddings. */
float *stack_backward(Stack *st, const float *dout, const int *lens, const BlockMemory *mem, float *dM,
                            int B, int N);

/* The attention weights block l's last forward kept (NULL when fused):
 * self-attention [B, H, N, N]; cross-attention [B, H, N, N_M]. */
const float *stack_attention(const Stack *st, int l, int B, int N, int N_M);
const float *stack_cross_attention(const Stack *st, int l, int B, int N, int N_M);

#endif
