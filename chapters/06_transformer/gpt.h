/* gpt.h - chapter 06, part 2: a decoder-only transformer (a GPT) that
 * predicts the next token of English text.
 *
 * Lecture notation, tokens x_1 .. x_N of one window of text:
 *   X_0 = E[x_t] + P[t]                    E [V, D] token embeddings, P [N, D] positions
 *                                          (rope: X_0 = E[x_t]; every block rotates its
 *                                          queries and keys by t, common/nn/rope.h)
 *   X_l = Block_l(X_{l-1})  l = 1..L       causal self-attention and an MLP (block.h), no
 *                                          cross-attention: there is no encoder
 *   Z   = Norm(X_L)                        pre-norm stacks end with a norm (stack.h)
 *   p(x_{t+1} | x_1 .. x_t) = softmax(Z[t] E^T)
 * The output layer is the embedding table again, transposed ("tied" input
 * and output embeddings, Press and Wolf 2017): V D fewer parameters, and a
 * word's input and output vectors are one vector. There is no output bias.
 * Training predicts every position of a window at once; the causal mask
 * keeps position t from seeing x_{t+1} .. x_N. The loss is the mean
 * cross-entropy per predicted token, so exp(loss) is the perplexity.
 *
 * Generation (gpt_generate) feeds the prompt, then draws one token at a
 * time from softmax(logits / temperature), restricted to the top_k most
 * likely. With the KV cache (block_step) each new token costs O(t) per
 * block; without it the whole window is run again for every token. When the
 * window is full (N tokens), the model keeps the last N/2 and starts its
 * positions again from 0 (both ways, so they give the same tokens).
 *
 * Parameter names: tok_emb [V, D], pos_emb [N, D] (learned positions only),
 * blk0 .. blk<L-1> (block.h's tensors), norm.gamma, norm.beta. */
#ifndef GPT_H
#define GPT_H
#include <stdint.h>
#include "06_transformer/positions.h"
#include "06_transformer/sparse_attention.h"
#include "06_transformer/stack.h"
#include "io/config.h"
#include "train/memory.h"
#include "util/rng.h"

typedef struct {
    int layers;             /* L */
    BlockSpec block;        /* D, H, D_H, F, norm place and type, MLP, dropout (causal: set by the model);
                             * D_H 0: D / H (the checkpoint text gives dim and heads) */
    Positions pos;            /* POSITIONS_LEARNED, POSITIONS_SINUSOIDAL or POSITIONS_ROPE */
    float label_smoothing;  /* part 1's key, kept in the text: 0 (the GPT trains on the plain cross-entropy) */
    int kv_cache;           /* part 1's key, kept in the text: 1 (generation takes GptSampling's) */
    int context;            /* N: positions per window */
    int V;                  /* vocabulary size */
    SparsePattern sparse;   /* P 0: every block's full causal attention; else part 5's pattern (window,
                             * global and random blocks, sparse_attention.h; its random blocks drawn
                             * with seed 1, so a checkpoint's pattern is made again exactly) */
} GptConfig;

/* The checkpoint's keys of a GptConfig, in the order of its text
 * (io/config.h): part 1's (transformer.h: layers, dim, heads, ff, norm,
 * norm_type, mlp, dropout, attn_dropout, pos, label_smoothing, kv_cache),
 * then context and vocab; after mlp, the mixture of experts (experts 0:
 * the dense MLP, what a checkpoint without the keys means; moe_top_k,
 * moe_aux, capacity, moe_renorm: block.h's BlockMoe). The program reads
 * and writes them. */
extern const ConfigField GPT_CONFIG_FIELDS[];
extern const int GPT_CONFIG_N;

typedef struct {
    GptConfig cfg;
    Stack st;
    int L, D, N, V, max_B;
    Params params;
    size_t tok_emb, pos_emb;
    float *P;                 /* [N, D] the sinusoidal table (NULL when learned or rope) */
    Rng dropout_rng;
    /* one pass, for up to max_B windows */
    int B;                    /* windows in the last forward */
    float *emb_mask;          /* [B N D] dropout on X_0 */
    float *logits;            /* [B N, V] logits; after backward, their gradient */
    float *probs;             /* [B N, V] */
    float *dtop;              /* [B N, D] */
    int last_counted;         /* targets the last forward scored */
    double moe_aux;           /* mixture of experts: the last forward's aux losses, summed over the blocks */
    long moe_dropped;         /* ... and its (position, expert) pairs dropped by the capacity (training) */
    /* generation, one row: the KV cache and the step's buffers */
    float *kv_K[STACK_MAX_LAYERS], *kv_V[STACK_MAX_LAYERS];   /* [N, H D_H] each */
    float *step_x, *step_y, *step_top, *step_mean, *step_rstd, *step_work, *step_logits;
    /* a sparse pattern (cfg.sparse.P > 0): the blocks' self-attention and the layout it reads */
    SparseLayout sparse_layout;
    SparseAttention sparse_options;           /* the layout, and rope: the hook rotates (pos=rope) */
    BlockSelfAttention sparse_attention;
} Gpt;

/* Build the model (parameters from seed) with room for max_B windows.
 * Returns 0, or -1 with fail() for a configuration it cannot run (batch
 * norm among them: gpt_norm_check). */
int gpt_create(Gpt *g, const GptConfig *cfg, int max_B, uint64_t seed);
/* gpt_create in its two steps, for a model that adds tensors of its own to
 * the GPT's Params (chapter 06's genre classifier, its head): gpt_declare
 * checks cfg and declares the GPT's tensors in g->params (not allocated);
 * the caller may params_add more; gpt_alloc allocates them all, sets the
 * GPT's from seed (the same values gpt_create gives) and makes the buffers
 * for max_B windows. Each returns 0, or -1 with fail(). */
int gpt_declare(Gpt *g, const GptConfig *cfg);
int gpt_alloc(Gpt *g, int max_B, uint64_t seed);
/* 0 for a norm a causal language model can train with; -1 with fail() for
 * batch norm, whose statistics over the batch's positions would let
 * position i's output in training depend on the tokens after it. */
int gpt_norm_check(BlockNorm norm);

/* The memory gpt_create(cfg, max_B) asks for, in parts (train/memory.h):
 * the parameters with their gradients (and, training: 1, AdamW's two
 * moments), the attention maps, the other activations and their backward
 * pass, the logits and probabilities, the KV cache. For memory_check before
 * gpt_create, so a model too large for the machine is refused in one line,
 * not by an allocation that aborts. Returns how many parts (at most
 * GPT_MEMORY_PARTS), or -1 with fail() for a config gpt_create refuses. */
#define GPT_MEMORY_PARTS 5
int gpt_memory_parts(const GptConfig *cfg, int max_B, int training, MemoryPart *parts);
void gpt_free(Gpt *g);

/* tokens [B, N] -> logits [B N, V] (g->logits). With targets [B, N]
 * (target -1: not scored), returns the SUM of -ln p(target) over the
 * scored ones and sets g->last_counted; without, 0. train 1: dropout. */
double gpt_forward(Gpt *g, const int *tokens, const int *targets, int B, int train);
/* After gpt_forward with targets: d (sum / scale_by) / d params, into
 * params.grad (+=). scale_by: usually the number of scored targets. */
void gpt_backward(Gpt *g, const int *tokens, const int *targets, int B, float scale_by);

/* The model without its output layer, for a task of one's own on its
 * features (chapter 06's genre classifier): tokens [B, N] -> Z [B N, D] =
 * Norm(X_L), the last block's output normed (g->st.out, valid until the next
 * forward). train 1: dropout. gpt_features_backward, after it: dZ [B N, D]
 * (read only) -> d params into params.grad (+=); gpt_backward is the tied
 * output layer's gradient, then this. */
const float *gpt_features(Gpt *g, const int *tokens, int B, int train);
void gpt_features_backward(Gpt *g, const int *tokens, int B, const float *dZ);

/* Perplexity pieces over a stream: the sum of -ln p(ids[t] | ids[.. t-1])
 * for t in [first, n), each token predicted with at least N - stride
 * tokens of context (when there are that many before it), in windows of N
 * moved by stride (1 <= stride <= N). ids[0 .. first) are context only.
 * Returns the sum; *counted gets n - first. */
double gpt_stream_nll(Gpt *g, const int *ids, int first, int n, int stride, long *counted);

/* Sampling settings. temperature 0: always the most likely token. */
typedef struct {
    float temperature;   /* > 0, or 0 for greedy */
    int top_k;           /* 0: every token */
    int kv_cache;        /* 1: block_step with the KV cache; 0: the window again per token */
} GptSampling;

/* Continue prompt[0 .. n_prompt) (n_prompt >= 1) by max_new tokens drawn
 * with rng: out[0 .. max_new) (written). logits_out [max_new, V] (or NULL)
 * gets the logits each token was drawn from. Returns 0, or -1 with fail(). */
int gpt_generate(Gpt *g, const int *prompt, int n_prompt, int max_new, const GptSampling *s, Rng *rng, int *out,
                 float *logits_out);

#endif
