/* attention.h - chapter 03: the general attention layer.
 *
 * Chapter 02 let a decoder state s look back at every encoder state h_i.
 * Strip the RNN away and give the pieces general names (lecture notation):
 *
 *   data vectors   X [N_X, D_X]   (were the encoder states h_i)
 *   query vectors  Q [N_Q, D_Q]   (were the decoder states s_t)
 *   keys           K = X W_K  [N_X, D_K]   where to attend
 *   values         V = X W_V  [N_X, D_V]   what to bring back
 *
 *   E = score(Q, K)         [N_Q, N_X]   similarities, E_ij = score(q_i, k_j)
 *   A = softmax(E, dim=1)   [N_Q, N_X]   each row sums to 1
 *   Y = A V                 [N_Q, D_V]   Y_i = sum_j A_ij V_j
 *
 * The score function is the one thing that differs between the papers:
 *   dot             e = q . k                      (D_K == D_Q)
 *   scaled dot      e = q . k / sqrt(D_Q)          (D_K == D_Q; the Transformer's)
 *   multiplicative  e = q^T W k,  W [D_Q, D_K]     (Luong's "general")
 *   additive        e = v^T tanh(W_1 k + W_2 q)    (Bahdanau, chapter 02),
 *                   W_1 [D_K, D_A], W_2 [D_Q, D_A], v [D_A]
 *
 * A mask blocks pairs (i, j): their score becomes -INFINITY, so their weight
 * is exactly 0 and no gradient flows through them (causal: a query may not
 * look at later positions; padding: keys past the real length).
 *
 * Conventions as in layers.h: flat row-major arrays, no allocation inside
 * forward or backward (the caller gives the buffers, sized by the *_floats()
 * functions), backward ACCUMULATES (+=) into every gradient and skips NULL
 * gradient pointers. */
#ifndef ATTENTION_H
#define ATTENTION_H
#include <stddef.h>
#include "util/rng.h"

/* ------------------------------------------------------------ score functions */
typedef enum {
    SCORE_DOT = 0,
    SCORE_SCALED_DOT,
    SCORE_MULTIPLICATIVE,
    SCORE_ADDITIVE,
    SCORE_N_TYPES
} ScoreType;

/* "dot", "scaled_dot", "multiplicative", "additive" */
const char *score_name(ScoreType type);
/* Parse a name; returns 0, or -1 with fail() listing the valid names. */
int score_from_name(const char *name, ScoreType *type);

/* The score function's kind and sizes. D_K must equal D_Q for the two dot
 * products; D_A is used by the additive score only. */
typedef struct {
    ScoreType type;
    int D_Q, D_K, D_A;
} ScoreSpec;

/* The score function's parameters (NULL where the type has none). The same
 * struct, pointing at gradient buffers, carries their gradients. */
typedef struct {
    float *W;     /* multiplicative: [D_Q, D_K] */
    float *W_1;   /* additive: keys    [D_K, D_A] */
    float *W_2;   /* additive: queries [D_Q, D_A] */
    float *v;     /* additive: [D_A] */
} ScoreWeights;

/* Number of parameters of the score function (0 for the dot products). */
size_t score_param_count(const ScoreSpec *s);
/* Point w into base (score_param_count floats), laid out W | W_1 | W_2 | v. */
ScoreWeights score_weights_view(const ScoreSpec *s, float *base);

/* Initial values: matrices Xavier-uniform, v uniform in +-1/sqrt(D_A). */
void score_init(const ScoreSpec *s, ScoreWeights *w, Rng *rng);

/* One score, written as the formula: e = score(q, k), q [D_Q], k [D_K]. */
float score_one(const ScoreSpec *s, const ScoreWeights *w, const float *q, const float *k);

/* ------------------------------------------------------------------- masking */
/* Which pairs (query i, key j) are blocked. Any NULL/0 field blocks nothing;
 * a pair is blocked when ANY rule blocks it. A NULL AttentionMask* = no mask. */
typedef struct {
    const int *allowed;   /* [N_Q, N_X]: 0 = blocked, nonzero = may attend; or NULL */
    int causal;           /* 1: query i may not look at keys j > i */
    int key_len;          /* > 0: keys j >= key_len are padding (blocked); 0 = none */
    int no_self;          /* 1: query i may not look at key i, its own position (the
                           * diagonal of a self-attention; chapter 07's locality
                           * attention, locality_attention.h) */
} AttentionMask;

/* The keys the causal and key_len rules leave to query i: keys
 * 0 .. limit-1, where limit = min(N_X, i + 1 if causal, key_len if > 0).
 * (NULL mask: N_X.) Every key j >= limit is blocked; `allowed` may block
 * more below it. The one place these two rules are written: mask_allows,
 * the masking of E and chapter 05's fused kernel all ask it. */
int mask_key_limit(const AttentionMask *m, int i, int N_X);

/* 1 when the mask lets query i look at key j (all the rules above). */
int mask_allows(const AttentionMask *m, int i, int j, int N_X);

/* ------------------------------------------- the attention layer, matrix form */
/* Floats forward keeps for backward (besides A): the scores E, plus the score
 * function's intermediate values (Q W for multiplicative; Q W_2, K W_1 and
 * tanh(.) [N_Q, N_X, D_A] for additive). */
size_t attention_cache_floats(const ScoreSpec *s, int N_Q, int N_X);
/* Floats of temporary space backward needs. */
size_t attention_scratch_floats(const ScoreSpec *s, int N_Q, int N_X);

/* Q [N_Q, D_Q], K [N_X, D_K], V [N_X, D_V] ->
 *   Y [N_Q, D_V] (written), A [N_Q, N_X] (written, the attention weights),
 *   cache [attention_cache_floats] (written; cache starts with E [N_Q, N_X],
 *   masked entries -INFINITY). mask may be NULL. A fully blocked row gets
 *   A = 0 and Y = 0. */
void attention_forward(float *Y, float *A, float *cache,
                       const float *Q, const float *K, const float *V,
                       const ScoreSpec *s, const ScoreWeights *w,
                       const AttentionMask *mask, int N_Q, int N_X, int D_V);

/* dY [N_Q, D_V] -> dQ [N_Q, D_Q] +=, dK [N_X, D_K] +=, dV [N_X, D_V] +=,
 * dw (score parameters) +=. Any of dQ, dK, dV, dw may be NULL (dw's fields
 * too). scratch has attention_scratch_floats() floats. A, cache, Q, K, V, w
 * are what forward saw and wrote. */
void attention_backward(float *dQ, float *dK, float *dV, ScoreWeights *dw, float *scratch,
                        const float *dY, const float *A, const float *cache,
                        const float *Q, const float *K, const float *V,
                        const ScoreSpec *s, const ScoreWeights *w,
                        int N_Q, int N_X, int D_V);

/* ------------------------------- the dot-product core, on blocks in place */
/* The two dot scores (dot: alpha = 1; scaled dot: alpha = 1/sqrt(D_K)) are
 * the ones that need no parameters, so their four steps can work on blocks
 * inside bigger matrices: Q [N_Q, D_K], K [N_X, D_K], V [N_X, D_V] and
 * Y [N_Q, D_V] are each read or written through a row stride (ldq, ldk, ldv,
 * ldy >= the block's width). attention_forward/backward call these with the
 * strides equal to the widths; chapter 05 calls them once per (sequence,
 * head) on head h's columns of [Q|K|V] (stride 3*H*D_H), without copying.
 *
 *   1. E = alpha Q K^T  2. masked E_ij = -INFINITY  3. A = softmax(E)  4. Y = A V
 *
 * E [N_Q, N_X] and A [N_Q, N_X] are dense (row stride N_X). E may equal A:
 * the softmax then runs in place and only A is kept. mask may be NULL.
 *
 * Dropout on the attention weights (the Transformer's, in training only):
 * keep [N_Q, N_X] (dense) holds one multiplier per weight, 0 (dropped) or
 * 1/(1-p) (kept; dropout_mask in nn/transformer_layers.h draws them), and
 * step 4 becomes
 *   4. Y = (A o keep) V          (o: entry by entry)
 * A stays the weights softmax wrote (the heatmaps show them, and backward's
 * softmax' needs them); the dropped weights A o keep go into E, which then
 * must be a buffer of its own (E != A) and ends holding them instead of the
 * scores. keep NULL: no dropout, the same bits as before keep existed.
 *
 * What one call reads, the blocks with their row strides and the sizes, is
 * a DotHead; the gradients backward adds to, a DotHeadGrads. */
typedef struct {
    const float *Q; int ldq;   /* [N_Q, D_K] the queries */
    const float *K; int ldk;   /* [N_X, D_K] the keys */
    const float *V; int ldv;   /* [N_X, D_V] the values */
    int N_Q, N_X, D_K, D_V;
    float alpha;               /* the factor on Q K^T: 1 (dot) or 1/sqrt(D_K) (scaled dot), or a head's own */
} DotHead;

typedef struct {
    float *dQ; int lddq;       /* [N_Q, D_K] +=, or NULL */
    float *dK; int lddk;       /* [N_X, D_K] +=, or NULL */
    float *dV; int lddv;       /* [N_X, D_V] +=, or NULL */
} DotHeadGrads;

/* h's Q, K, V -> Y [N_Q, D_V] (row stride ldy), A and E [N_Q, N_X] (written). */
void dot_attention_forward(float *Y, int ldy, float *A, float *E, const DotHead *h, const AttentionMask *mask,
                           const float *keep);

/* dY [N_Q, D_V] (row stride lddy) -> g's dQ, dK, dV += (any may be NULL).
 * A, keep and h are what forward saw and wrote (no mask: a blocked pair has
 * A = 0, so no gradient flows through it). scratch: 2 N_Q N_X floats (dA,
 * dE). With keep (or NULL), step 4 runs backward as
 *   dA' = dY V^T,  dV += (A o keep)^T dY,  dA = dA' o keep,
 * the dE half of scratch holding A o keep until dE = softmax'(dA) needs it. */
void dot_attention_backward(const DotHeadGrads *g, float *scratch, const float *dY, int lddy, const float *A,
                            const float *keep, const DotHead *h);

/* How one row of attention weights a [N_X] (summing to 1) spreads: returns
 * its entropy in nats, -sum_j a_j log a_j (log N_X when uniform, 0 when one
 * weight is 1), and writes its largest weight to *max_weight. */
double attention_row_entropy(const float *a, int N_X, double *max_weight);

/* ------------------------------------------- one query, written as loops */
/* The lesson's picture, one query q [D_Q] over the data: for each j,
 * e_j = score(q, k_j); a = softmax(e); y = sum_j a_j v_j. Writes e [N_X]
 * (masked: -INFINITY), a [N_X], y [D_V]. query_index is q's row i for the
 * mask (causal and allowed rules). Plain loops, no matmul: the specification
 * the matrix form is tested against. */
void attention_single_query(float *y, float *a, float *e, const float *q,
                            const float *K, const float *V,
                            const ScoreSpec *s, const ScoreWeights *w,
                            const AttentionMask *mask, int query_index, int N_X, int D_V);

/* --------------------------------------------------------- cross-attention */
/* The cross-attention layer: queries attend over data vectors X through
 * learned projections
 *   Q = Q_in W_Q   (when project_q; else Q = Q_in and D_in_Q must equal D_Q)
 *   K = X W_K,  V = X W_V,  Y = attention(Q, K, V).
 * The score's sizes come from spec.score (D_Q, D_K, D_A). */
typedef struct {
    ScoreSpec score;
    int D_in_Q;     /* size of the incoming query vectors */
    int D_X;        /* size of the data vectors */
    int D_V;        /* size of the values and of the output Y */
    int project_q;  /* 1: learn W_Q [D_in_Q, D_Q]; 0: use the queries as they are */
} CrossAttentionSpec;

typedef struct {
    float *W_Q;     /* [D_in_Q, D_Q], NULL unless project_q */
    float *W_K;     /* [D_X, D_K] */
    float *W_V;     /* [D_X, D_V] */
    ScoreWeights score;
} CrossAttentionWeights;

size_t cross_attention_param_count(const CrossAttentionSpec *c);
/* Point w into base (cross_attention_param_count floats): W_Q | W_K | W_V | score. */
CrossAttentionWeights cross_attention_weights_view(const CrossAttentionSpec *c, float *base);
/* Fill base with initial values: every matrix Xavier-uniform, v uniform in
 * +-1/sqrt(D_A). */
void cross_attention_init(const CrossAttentionSpec *c, float *base, Rng *rng);

/* Cache layout: Q [N_Q, D_Q] | K [N_X, D_K] | V [N_X, D_V] | attention cache. */
size_t cross_attention_cache_floats(const CrossAttentionSpec *c, int N_Q, int N_X);
size_t cross_attention_scratch_floats(const CrossAttentionSpec *c, int N_Q, int N_X);

/* Q_in [N_Q, D_in_Q], X [N_X, D_X] -> Y [N_Q, D_V], A [N_Q, N_X], cache. */
void cross_attention_forward(float *Y, float *A, float *cache,
                             const float *Q_in, const float *X,
                             const CrossAttentionSpec *c, const CrossAttentionWeights *w,
                             const AttentionMask *mask, int N_Q, int N_X);
/* dY [N_Q, D_V] -> dQ_in +=, dX +=, dw += (any may be NULL). */
void cross_attention_backward(float *dQ_in, float *dX, CrossAttentionWeights *dw, float *scratch,
                              const float *dY, const float *A, const float *cache,
                              const float *Q_in, const float *X,
                              const CrossAttentionSpec *c, const CrossAttentionWeights *w,
                              int N_Q, int N_X);

#endif
