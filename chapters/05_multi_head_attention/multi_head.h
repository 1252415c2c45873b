/* multi_head.h - chapter 05: multi-head self-attention in 4 big matmuls.
 *
 * Chapter 04's self-attention has ONE set of queries, keys and values, so
 * each output position gets ONE weighted average of the values. Multi-head
 * attention runs H of those layers ("heads") side by side, each with its own
 * projections of size D_H (the head dimension), and mixes their outputs with
 * one more matrix W_O. Lecture notation, one sequence X [N, D]:
 *
 *   W_Q, W_K, W_V [D, H*D_H]     W_O [H*D_H, D_out]
 *   Q = X W_Q, K = X W_K, V = X W_V     [N, H*D_H], read as [H, N, D_H]
 *   E = Q K^T / sqrt(D_H)               [H, N, N]   one N x N block per head
 *   A_h = softmax(E_h, dim=1)           [H, N, N]   per head, over the keys
 *   Y = A V                             [H, N, D_H], stored as [N, H*D_H]
 *   O = Y W_O + b_O                     [N, D_out]
 *
 * and it all runs as 4 big matrix products:
 *   1. [Q|K|V] = X [W_Q|W_K|W_V]   (N x D)(D x 3 H D_H)  ONE sgemm for all heads
 *   2. E = Q K^T                   (H x N x D_H)(H x D_H x N), one sgemm per head
 *   3. Y = A V                     (H x N x N)(H x N x D_H),   one sgemm per head
 *   4. O = Y W_O                   (N x H D_H)(H D_H x D_out) ONE sgemm
 * Steps 2-3 (with the mask and the softmax between them) are chapter 03's
 * attention layer, dot_attention_forward/backward, called once per
 * (sequence, head). No head is ever copied out: head h's queries are the
 * columns h*D_H .. h*D_H + D_H - 1 of Q inside the [N, 3*H*D_H] matrix
 * [Q|K|V], and chapter 03's code reaches them with a row stride (leading
 * dimension) of 3*H*D_H. Likewise step 3 writes head h's output straight into
 * its columns of Y (row stride H*D_H), which IS the "reshape to [N, H*D_H]"
 * of the lecture: nothing to move.
 *
 * The layout of the weights follows from that:
 *   W_QKV [D, 3*H*D_H] = [W_Q | W_K | W_V], and inside W_Q (and W_K, W_V)
 *   columns h*D_H .. h*D_H + D_H - 1 belong to head h.
 *
 * Everything works on a batch of B sequences, stored [B, N, .] row-major
 * (steps 1 and 4 treat the B*N positions as one big matrix). Conventions as
 * in chapters 03 and 04: no allocation inside forward or backward (the caller
 * gives the buffers, sized by the *_floats() functions), backward
 * ACCUMULATES (+=) into dX and the weight gradients and skips NULL ones. */
#ifndef MULTI_HEAD_H
#define MULTI_HEAD_H
#include <stddef.h>
#include "util/rng.h"

/* How steps 2-3 (softmax(Q K^T / sqrt(D_H)) V per head) are computed.
 *   MULTI_HEAD_PLAIN  chapter 03's dot_attention_forward/backward: the N x N
 *                     weights A [B, H, N, N] are written and kept for
 *                     backward (the default; the heatmaps read A).
 *   MULTI_HEAD_FUSED  flash_attention.c: blocks of keys with an online softmax;
 *                     A is neither written nor needed (pass NULL), the cache
 *                     keeps one log-sum-exp per query row instead: O(N) memory.
 * Same results within float rounding. */
typedef enum { MULTI_HEAD_PLAIN = 0, MULTI_HEAD_FUSED = 1 } MultiHeadAttention;

/* "plain" or "fused" -> *out; returns 0, or -1 with fail() for another name. */
int multi_head_attention_from_name(const char *name, MultiHeadAttention *out);

/* The layer's sizes and how it computes steps 2-3. The *_floats()
 * functions below depend on attention and keep_masks: size the buffers with
 * the spec you run.
 *
 * keep_masks = 1 lets forward and backward drop attention weights (dropout
 * on A, as chapter 06's block does in training): they are then given keep
 * [B, H, N, N], one multiplier per weight, 0 or 1/(1-p), and step 3 becomes
 * Y = (A o keep) V per head (chapter 03's dot_attention_forward). A is still
 * the undropped softmax; the cache has room for one head's dropped weights.
 * Plain path only: the fused kernel never forms A, so there is nothing to
 * drop (keep_masks must be 0 with MULTI_HEAD_FUSED). */
typedef struct {
    int D;        /* width of the inputs X */
    int H;        /* number of heads */
    int D_H;      /* head dimension: each head's queries, keys, values */
    int D_out;    /* width of the outputs O (usually D) */
    MultiHeadAttention attention;   /* MULTI_HEAD_PLAIN (0) or MULTI_HEAD_FUSED */
    int keep_masks;                 /* 1: forward and backward may be given keep; 0: keep is NULL */
} MultiHeadSpec;

typedef struct {
    float *W_QKV;   /* [D, 3*H*D_H] = [W_Q | W_K | W_V] */
    float *W_O;     /* [H*D_H, D_out] */
    float *b_O;     /* [D_out], or NULL for no bias */
} MultiHeadWeights;

/* How steps 2-3 score each head and which pairs they block. Chapter 05's
 * layer uses {NULL, causal, 0, lens}; a layer composed of these steps may
 * give each head its own scale or block each query's own key (chapter 07's
 * locality attention does both). */
typedef struct {
    const float *alpha;   /* [H]: head h's scores are alpha[h] Q_h K_h^T; NULL: 1/sqrt(D_H) for every head */
    int causal;           /* 1: query i looks only at keys j <= i */
    int no_self;          /* 1: query i never looks at key i (chapter 03's no_self rule) */
    const int *lens;      /* [B] or NULL: keys j >= lens[b] of sequence b are padding (0: the whole N) */
} HeadsScoring;

/* Returns 0, or -1 with fail() for a spec the layer cannot run (a size
 * below 1). */
int multi_head_spec_check(const MultiHeadSpec *s);
/* Parameters of one layer: W_QKV, W_O and b_O. */
size_t multi_head_param_count(const MultiHeadSpec *s);
/* Point w into base (multi_head_param_count floats): W_QKV | W_O | b_O. */
MultiHeadWeights multi_head_weights_view(const MultiHeadSpec *s, float *base);
/* W_Q, W_K, W_V each Xavier-uniform for [D, H*D_H], W_O for [H*D_H, D_out],
 * b_O = 0. */
void multi_head_init(const MultiHeadSpec *s, const MultiHeadWeights *w, Rng *rng);

/* Attention weights A [B, H, N, N]: B*H*N*N floats, the O(N^2) part
 * (0 with s->attention == MULTI_HEAD_FUSED). */
size_t multi_head_attention_floats(const MultiHeadSpec *s, int B, int N);
/* Cache forward keeps for backward: [Q|K|V] [B, N, 3*H*D_H] | Y [B, N, H*D_H]
 * (fused, and then: | lse [B, H, N] | forward's block scratch; plain with
 * keep_masks: | one head's dropped weights [N, N] per thread, threads_slots(B)
 * of them). */
size_t multi_head_cache_floats(const MultiHeadSpec *s, int B, int N);
/* Scratch backward needs: d[Q|K|V] [B, N, 3*H*D_H] | dY [B, N, H*D_H] |
 * dA, dE [N, N] per thread, threads_slots(B) of them (chapter 03's, one head at
 * a time; fused: flash_attention_scratch_floats). */
size_t multi_head_scratch_floats(const MultiHeadSpec *s, int B, int N);

/* The layer's steps, each on its own (multi_head_forward and _backward call
 * them in order; the coursework grades each). R = B*N rows, HD = H*D_H.
 * Step 1, the three input products in one: [Q|K|V] [R, 3 HD] = X [R, D] W_QKV
 * (written). Its backward: dW_QKV [D, 3 HD] += X^T d[Q|K|V] and
 * dX [R, D] += d[Q|K|V] W_QKV^T (either may be NULL). */
void multi_head_qkv_forward(float *QKV, const float *X, const MultiHeadSpec *s, const MultiHeadWeights *w, int R);
void multi_head_qkv_backward(float *dX, float *dW_QKV, const float *dQKV, const float *X, const MultiHeadSpec *s,
                             const MultiHeadWeights *w, int R);
/* Step 4, the output projection: O [R, D_out] = Y [R, HD] W_O + b_O (written;
 * no bias when w->b_O is NULL). Its backward: dY [R, HD] = dO W_O^T (written),
 * dW_O [HD, D_out] += Y^T dO, db_O += the column sums of dO (dw or its fields may
 * be NULL). */
void multi_head_output_forward(float *O, const float *Y, const MultiHeadSpec *s, const MultiHeadWeights *w, int R);
void multi_head_output_backward(float *dY, MultiHeadWeights *dw, const float *dO, const float *Y,
                                const MultiHeadSpec *s, const MultiHeadWeights *w, int R);
/* Steps 2-3 of the plain path, the heads split and merged: QKV [B, N, 3 HD],
 * keep [B, H, N, N] or NULL -> A [B, H, N, N], Y [B, N, HD] (written), head h
 * of sequence b by chapter 03's dot_attention_forward on the column blocks h
 * of Q, K and V, its Y_h into columns h D_H.. of Y, scored and masked as sc
 * says. dropped [threads_slots(B), N, N]: each thread's room for one head's
 * A o keep (unused, may be NULL, without keep). */
void multi_head_heads_forward(float *Y, float *A, const float *keep, float *dropped, const float *QKV,
                              const HeadsScoring *sc, int H, int D_H, int B, int N);
/* Their backward: dY [B, N, HD], A, keep, QKV, sc as forward saw them ->
 * d[Q|K|V] [B, N, 3 HD] += (dQ_h, dK_h, dV_h into their column blocks).
 * scratch [threads_slots(B), 2, N, N]: each thread's dA, dE (chapter 03's). */
void multi_head_heads_backward(float *dQKV, float *scratch, const float *dY, const float *A, const float *keep,
                               const float *QKV, const HeadsScoring *sc, int H, int D_H, int B, int N);

/* Steps 2-3 on a cache (the layout above: [Q|K|V] first, then Y): from its
 * [Q|K|V], which step 1 wrote, Y = softmax(E) V per sequence and head into
 * its Y (written), plain or fused as s->attention says; A [B, H, N, N]
 * written on the plain path (NULL on the fused one), keep as below.
 * Their backward, on a scratch laid out as above (d[Q|K|V] first, then dY):
 * from its dY (step 4' wrote it), its d[Q|K|V] (written). multi_head_forward
 * and _backward call them between steps 1 and 4; a layer that changes Q and
 * K between steps 1 and 2 (chapter 06's rotary positions) calls the four
 * steps itself. */
void multi_head_attend_forward(float *A, const float *keep, float *cache, const MultiHeadSpec *s, int causal,
                               const int *lens, int B, int N);
void multi_head_attend_backward(float *scratch, const float *A, const float *keep, const float *cache,
                                const MultiHeadSpec *s, int causal, const int *lens, int B, int N);

/* X [B, N, D] -> O [B, N, D_out] (written), A [B, H, N, N] (written),
 * cache [multi_head_cache_floats] (written).
 * keep [B, H, N, N] (or NULL): dropout multipliers of the weights, 0 or
 * 1/(1-p); only with s->keep_masks (see MultiHeadSpec).
 * causal: output i may only look at inputs j <= i.
 * lens [B] (or NULL): sequence b is lens[b] long (0 = the whole N);
 * positions j >= lens[b] are padding and no output attends to them.
 * Same masks, same meaning as chapter 04. */
void multi_head_forward(float *O, float *A, const float *keep, float *cache, const float *X,
                        const MultiHeadSpec *s, const MultiHeadWeights *w,
                        int causal, const int *lens, int B, int N);

/* dO [B, N, D_out] -> dX [B, N, D] +=, dw->W_QKV, dw->W_O, dw->b_O +=.
 * dX, dw and any field of dw may be NULL. A, keep, cache, X, w, causal, lens
 * are what forward saw and wrote. (The plain path needs no mask: a blocked
 * pair has A = 0, so no gradient flows through it; the fused path recomputes
 * the blocks of weights and needs causal and lens to skip the blocked ones.) */
void multi_head_backward(float *dX, MultiHeadWeights *dw, float *scratch, const float *dO,
                         const float *A, const float *keep, const float *cache, const float *X,
                         const MultiHeadSpec *s, const MultiHeadWeights *w,
                         int causal, const int *lens, int B, int N);

#endif
