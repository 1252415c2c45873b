/* block.c - chapter 06: one transformer block (see block.h).
 *
 * A block is two sublayers (three in a decoder), each the same four steps
 * around a different "branch" F (self-attention, cross-attention, MLP),
 * from its input X_k to its output Z_k, R = B*N positions as rows:
 *
 *   (pre-norm)  U = Norm_k(X_k)      else U = X_k
 *               O = F(U)             chapter 05, multi_head_cross.c, or the MLP
 *                                    (attention: weights dropped by keep masks in training)
 *               O = dropout(O)
 *               S = X_k + O          the residual connection
 *   (post-norm) Z_k = Norm_k(S)      else Z_k = S
 *
 * sublayer_forward() is those steps once; block_forward() calls it for each
 * sublayer in turn. Backward walks them in reverse (sublayer_backward): the
 * residual sum hands its gradient to both of its inputs, so dX_k collects
 * the gradient straight from dZ_k plus the one through the branch.
 *
 * block_step() runs the same sublayers for one new position per row, with
 * the attention branches reading and extending each row's KV cache. */
#include "06_transformer/block.h"
#include "06_transformer/mlp.h"
#include "06_transformer/moe.h"
#include "06_transformer/rope_attention.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "kernels/matmul.h"
#include "nn/batchnorm.h"
#include "nn/layers.h"
#include "nn/params.h"
#include "nn/rope.h"
#include "nn/transformer_layers.h"
#include "util/error.h"
#include "util/util.h"

/* The sublayers, in order. */
enum { SUB_SELF = 0, SUB_CROSS = 1, SUB_MLP = 2, N_SUBLAYERS = 3 };

/* 1: the MLP sublayer is one dense MLP (0: none, or a mixture of experts) */
static int dense_mlp(const BlockSpec *s) {
    return s->mlp != BLOCK_NO_MLP && s->moe.E == 0;
}

static int has_sublayer(const BlockSpec *s, int k) {
    if (k == SUB_CROSS) return s->cross;
    if (k == SUB_MLP) return s->mlp != BLOCK_NO_MLP;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Layout of the parameters                                                  */
/* ------------------------------------------------------------------------ */

int block_norm_has_beta(const BlockSpec *s) {
    return s->norm == BLOCK_LAYERNORM || s->norm == BLOCK_BATCHNORM;   /* RMSNorm has none */
}

static size_t norm_params(const BlockSpec *s, int beta) {
    if (s->norm == BLOCK_NO_NORM) return 0;
    if (beta && !block_norm_has_beta(s)) return 0;
    return (size_t)s->D;
}

/* Sublayers with a norm, and which of them sublayer k is (its running statistics' place). */
static int norms_before(const BlockSpec *s, int k) {
    int n = 0;
    for (int j = 0; j < k; j++) n += has_sublayer(s, j);
    return n;
}

size_t block_running_floats(const BlockSpec *s) {
    return s->norm == BLOCK_BATCHNORM ? (size_t)norms_before(s, N_SUBLAYERS) * s->D : 0;
}

MultiHeadSpec block_attention_spec(const BlockSpec *s) {
    const int keep_masks = s->attn_dropout > 0.0f && s->attention == MULTI_HEAD_PLAIN;
    MultiHeadSpec a = {s->D, s->H, s->D_H, s->D, s->attention, keep_masks};
    return a;
}

int block_spec_check(const BlockSpec *s) {
    if (!(s->dropout >= 0.0f && s->dropout < 1.0f))
        return fail("dropout %g: expected a probability in [0, 1)", (double)s->dropout);
    if (!(s->drop_path >= 0.0f && s->drop_path < 1.0f))
        return fail("drop path %g: expected a probability in [0, 1)", (double)s->drop_path);
    if (!(s->attn_dropout >= 0.0f && s->attn_dropout < 1.0f))
        return fail("attention dropout %g: expected a probability in [0, 1)", (double)s->attn_dropout);
    if (s->attn_dropout > 0.0f && s->attention == MULTI_HEAD_FUSED)
        return fail("attention dropout %g needs the plain attention: the fused kernel never forms the "
                    "weights it would drop (use attention=plain, or attention dropout 0)",
                    (double)s->attn_dropout);
    if (moe_spec_check(s) != 0) return -1;
    const MultiHeadSpec as = block_attention_spec(s);
    if (s->self_attention && s->rope)
        return fail("%s with rotary positions: the block has one self-attention (choose one of them)",
                    s->self_attention->name);
    const BlockSelfAttention *sa = s->self_attention;
    if (sa) return sa->check(sa->options, &as, s->causal, s->cross);
    return s->rope ? rope_attention_check(&as) : multi_head_spec_check(&as);
}

/* Lays the parameters out from base (or only counts them, base NULL);
 * returns how many floats they take. */
static size_t weights_layout(const BlockSpec *s, float *base, BlockWeights *w) {
    const MultiHeadSpec as = block_attention_spec(s);
    const int mlp = s->mlp != BLOCK_NO_MLP;
    size_t used = 0;
    memset(w, 0, sizeof *w);
    float *attn = floats_take(base, &used, multi_head_param_count(&as));
    if (attn) w->attn = multi_head_weights_view(&as, attn);
    const BlockSelfAttention *sa = s->self_attention;
    w->attn_extra = floats_take(base, &used, sa ? sa->extra_params(sa->options, &as) : 0);
    w->norm1_gamma = floats_take(base, &used, norm_params(s, 0));
    w->norm1_beta = floats_take(base, &used, norm_params(s, 1));
    float *cross = floats_take(base, &used, s->cross ? multi_head_cross_param_count(&as) : 0);
    if (cross) w->cross = multi_head_cross_weights_view(&as, cross);
    w->normc_gamma = floats_take(base, &used, s->cross ? norm_params(s, 0) : 0);
    w->normc_beta = floats_take(base, &used, s->cross ? norm_params(s, 1) : 0);
    if (dense_mlp(s)) {
        used += mlp_layout(s, base ? base + used : NULL, w);
    } else if (mlp) {   /* a mixture of experts: the router, then the E experts */
        w->W_r = floats_take(base, &used, (size_t)s->D * s->moe.E);
        w->experts = floats_take(base, &used, (size_t)s->moe.E * mlp_param_count(s));
    }
    w->norm2_gamma = floats_take(base, &used, mlp ? norm_params(s, 0) : 0);
    w->norm2_beta = floats_take(base, &used, mlp ? norm_params(s, 1) : 0);
    return used;
}

size_t block_param_count(const BlockSpec *s) {
    BlockWeights w;
    return weights_layout(s, NULL, &w);
}

BlockWeights block_weights_view(const BlockSpec *s, float *base) {
    BlockWeights w;
    weights_layout(s, base, &w);
    return w;
}

static void init_norm(float *gamma, float *beta, size_t D) {
    if (gamma) init_constant(gamma, D, 1.0f);
    if (beta) init_constant(beta, D, 0.0f);
}

void block_init(const BlockSpec *s, const BlockWeights *w, Rng *rng) {
    const MultiHeadSpec as = block_attention_spec(s);
    multi_head_init(&as, &w->attn, rng);
    if (s->self_attention) s->self_attention->init_extra(s->self_attention->options, w->attn_extra, &as);
    const size_t D = (size_t)s->D, F = (size_t)s->F;
    init_norm(w->norm1_gamma, w->norm1_beta, D);
    if (s->cross) multi_head_cross_init(&as, &w->cross, rng);
    init_norm(w->normc_gamma, w->normc_beta, D);
    if (w->W_1) init_xavier(w->W_1, s->D, s->F, rng);
    if (w->b_1) init_constant(w->b_1, F, 0.0f);
    if (w->W_3) init_xavier(w->W_3, s->D, s->F, rng);
    if (w->W_2) init_xavier(w->W_2, s->F, s->D, rng);
    if (w->b_2) init_constant(w->b_2, D, 0.0f);
    if (w->W_r) moe_init(s, w, rng);
    init_norm(w->norm2_gamma, w->norm2_beta, D);
}

/* The norm of sublayer k. */
static const float *sub_gamma(const BlockWeights *w, int k) {
    return k == SUB_SELF ? w->norm1_gamma : k == SUB_CROSS ? w->normc_gamma : w->norm2_gamma;
}
static const float *sub_beta(const BlockWeights *w, int k) {
    return k == SUB_SELF ? w->norm1_beta : k == SUB_CROSS ? w->normc_beta : w->norm2_beta;
}
static float *sub_dgamma(BlockWeights *w, int k) {
    return k == SUB_SELF ? w->norm1_gamma : k == SUB_CROSS ? w->normc_gamma : w->norm2_gamma;
}
static float *sub_dbeta(BlockWeights *w, int k) {
    return k == SUB_SELF ? w->norm1_beta : k == SUB_CROSS ? w->normc_beta : w->norm2_beta;
}

/* ------------------------------------------------------------------------ */
/* Layout of the cache and the scratch                                       */
/* ------------------------------------------------------------------------ */

/* The cache's buffers (block.h's BlockCache) from base, or only their
 * count (base NULL). Returns how many floats they take. */
static size_t cache_layout(const BlockSpec *s, int B, int N, int N_M, float *base, BlockCache *c) {
    const MultiHeadSpec as = block_attention_spec(s);
    const size_t R = (size_t)B * N, RD = R * s->D;
    const int norm = s->norm != BLOCK_NO_NORM, bn = s->norm == BLOCK_BATCHNORM;
    const size_t RF = dense_mlp(s) ? R * s->F : 0;
    size_t used = 0;
    memset(c, 0, sizeof *c);
    for (int k = 0; k < N_SUBLAYERS; k++) {
        if (!has_sublayer(s, k)) continue;
        BlockSublayerCache *sc = &c->sub[k];
        sc->n = floats_take(base, &used, norm ? RD : 0);
        sc->mean = floats_take(base, &used, s->norm == BLOCK_LAYERNORM ? R : bn ? (size_t)s->D : 0);
        sc->rstd = floats_take(base, &used, bn ? (size_t)s->D : norm ? R : 0);
        sc->batch_stats = floats_take(base, &used, bn ? 1 : 0);
        sc->mask = floats_take(base, &used, s->dropout > 0.0f ? RD : 0);
        sc->path_keep = floats_take(base, &used, s->drop_path > 0.0f ? (size_t)B : 0);
        sc->out = floats_take(base, &used, RD);
    }
    const int attn_drop = s->attn_dropout > 0.0f;
    c->A = floats_take(base, &used, multi_head_attention_floats(&as, B, N));
    c->keep = floats_take(base, &used, attn_drop ? multi_head_attention_floats(&as, B, N) : 0);
    const BlockSelfAttention *sa = s->self_attention;
    c->attn_cache = floats_take(base, &used, sa ? sa->cache_floats(sa->options, &as, B, N)
                                                : multi_head_cache_floats(&as, B, N));
    if (s->cross) {
        c->cross_A = floats_take(base, &used, multi_head_cross_attention_floats(&as, B, N, N_M));
        c->cross_keep = floats_take(base, &used, attn_drop ? multi_head_cross_attention_floats(&as, B, N, N_M) : 0);
        c->cross_cache = floats_take(base, &used, multi_head_cross_cache_floats(&as, B, N, N_M));
    }
    c->pre_act = floats_take(base, &used, RF);
    c->gate = floats_take(base, &used, s->mlp == BLOCK_MLP_SWIGLU ? RF : 0);
    c->hidden = floats_take(base, &used, RF);
    if (s->moe.E > 0 && s->mlp != BLOCK_NO_MLP)
        used += moe_cache_layout(s, (int)R, base ? base + used : NULL, &c->moe);
    return used;
}

size_t block_cache_floats(const BlockSpec *s, int B, int N, int N_M) {
    BlockCache c;
    return cache_layout(s, B, N, N_M, NULL, &c);
}

BlockCache block_cache_view(const BlockSpec *s, int max_B, int max_N, int N_M, float *memory) {
    BlockCache c;
    cache_layout(s, max_B, max_N, N_M, memory, &c);
    return c;
}

void block_cache_alloc(BlockCache *c, const BlockSpec *s, int max_B, int max_N, int N_M) {
    const size_t n = block_cache_floats(s, max_B, max_N, N_M);
    float *memory = xcalloc(n > 0 ? n : 1, sizeof(float));
    *c = block_cache_view(s, max_B, max_N, N_M, memory);
    c->memory = memory;
}

void block_cache_free(BlockCache *c) {
    free(c->memory);
    memset(c, 0, sizeof *c);
}

/* Scratch of backward. */
typedef struct {
    float *grad_a, *grad_b; /* [R, D] gradients of the sublayer outputs inside the block */
    float *dsum;            /* [R, D] gradient of S (post-norm) */
    float *dbranch;         /* [R, D] gradient of a branch's output after dropout */
    float *ddrop;           /* [R, D] ... and before dropout */
    float *dpath;           /* [R, D] ... and before drop path (drop_path > 0) */
    float *din;             /* [R, D] gradient of a branch's input U (pre-norm) */
    float *dhidden, *dpre_act, *dgate;   /* [R, F] */
    float *attn_scratch;    /* chapter 05's scratch */
    float *cross_scratch;   /* multi_head_cross's scratch */
    float *moe_scratch;     /* moe.h's scratch (a mixture of experts) */
} BlockScratch;

static size_t scratch_layout(const BlockSpec *s, int B, int N, int N_M, float *base, BlockScratch *k) {
    const MultiHeadSpec as = block_attention_spec(s);
    const size_t R = (size_t)B * N, RD = R * s->D;
    const size_t RF = dense_mlp(s) ? R * s->F : 0;
    size_t used = 0;
    memset(k, 0, sizeof *k);
    k->grad_a = floats_take(base, &used, RD);
    k->grad_b = floats_take(base, &used, RD);
    k->dsum = floats_take(base, &used, RD);
    k->dbranch = floats_take(base, &used, RD);
    k->ddrop = floats_take(base, &used, RD);
    k->dpath = floats_take(base, &used, s->drop_path > 0.0f ? RD : 0);
    k->din = floats_take(base, &used, RD);
    k->dhidden = floats_take(base, &used, RF);
    k->dpre_act = floats_take(base, &used, RF);
    k->dgate = floats_take(base, &used, s->mlp == BLOCK_MLP_SWIGLU ? RF : 0);
    const BlockSelfAttention *sa = s->self_attention;
    k->attn_scratch = floats_take(base, &used, sa ? sa->scratch_floats(sa->options, &as, B, N)
                                                  : multi_head_scratch_floats(&as, B, N));
    if (s->cross) k->cross_scratch = floats_take(base, &used, multi_head_cross_scratch_floats(&as, B, N, N_M));
    if (s->moe.E > 0 && s->mlp != BLOCK_NO_MLP) k->moe_scratch = floats_take(base, &used, moe_scratch_floats(s, (int)R));
    return used;
}

size_t block_scratch_floats(const BlockSpec *s, int B, int N, int N_M) {
    BlockScratch k;
    return scratch_layout(s, B, N, N_M, NULL, &k);
}

/* ------------------------------------------------------------------------ */
/* The pieces: the norm (the MLP is mlp.c)                                   */
/* ------------------------------------------------------------------------ */

void block_norm_forward_batch(float *out, float *mean, float *rstd, float *batch_stats, const float *x,
                              const BlockSpec *s, const float *gamma, const float *beta, float *running_mean,
                              float *running_var, const int *lens, int B, int N, int train) {
    const int R = B * N;
    if (s->norm == BLOCK_LAYERNORM) {
        layernorm_forward(out, mean, rstd, x, gamma, beta, R, s->D, BLOCK_NORM_EPS);
    } else if (s->norm == BLOCK_RMSNORM) {
        rmsnorm_forward(out, rstd, x, gamma, R, s->D, BLOCK_NORM_EPS);
    } else if (!train && running_mean && running_var) {   /* evaluation: the running statistics */
        batchnorm_forward_running(out, mean, rstd, x, gamma, beta, running_mean, running_var, R, s->D,
                                  BLOCK_NORM_EPS);
        if (batch_stats) batch_stats[0] = 0.0f;
    } else {   /* training (or nothing kept): the pass's own, updating the running ones */
        batchnorm_forward(out, mean, rstd, train ? running_mean : NULL, train ? running_var : NULL, x, gamma, beta,
                          lens, B, N, s->D, BLOCK_NORM_EPS, BATCHNORM_MOMENTUM);
        if (batch_stats) batch_stats[0] = 1.0f;
    }
}

void block_norm_backward_batch(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                               const float *rstd, const float *batch_stats, const float *x, const BlockSpec *s,
                               const float *gamma, const int *lens, int B, int N) {
    const int R = B * N;
    if (s->norm == BLOCK_LAYERNORM) layernorm_backward(dx, dgamma, dbeta, dout, mean, rstd, x, gamma, R, s->D);
    else if (s->norm == BLOCK_RMSNORM) rmsnorm_backward(dx, dgamma, dout, rstd, x, gamma, R, s->D);
    else batchnorm_backward(dx, dgamma, dbeta, dout, mean, rstd, x, gamma, lens, B, N, s->D,
                            batch_stats == NULL || batch_stats[0] != 0.0f);
}

void block_norm_forward(float *out, float *mean, float *rstd, const float *x, const BlockSpec *s,
                        const float *gamma, const float *beta, int R) {
    block_norm_forward_batch(out, mean, rstd, NULL, x, s, gamma, beta, NULL, NULL, NULL, 1, R, 1);
}

void block_norm_backward(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                         const float *rstd, const float *x, const BlockSpec *s, const float *gamma, int R) {
    block_norm_backward_batch(dx, dgamma, dbeta, dout, mean, rstd, NULL, x, s, gamma, NULL, 1, R);
}

/* Sublayer k's running statistics in w (NULL: none kept, or not batch norm). */
static float *sub_running(const BlockSpec *s, float *running, int k) {
    return running && s->norm == BLOCK_BATCHNORM ? running + (size_t)norms_before(s, k) * s->D : NULL;
}

/* ------------------------------------------------------------------------ */
/* One sublayer, forward and backward                                        */
/* ------------------------------------------------------------------------ */

/* Everything one forward or backward pass of the block needs. */
typedef struct {
    const BlockSpec *s;
    const BlockWeights *w;
    const int *lens;
    const BlockMemory *mem;
    int B, N;
    const BlockCache *c;
} Pass;

/* Dropout on the weights of attention sublayer k: its keep masks in the
 * cache [B, H, N, N or N_M], drawn from rng in training; at evaluation
 * they are ones (so a backward after it is still right) and the attention
 * runs without them, the bits of attn_dropout 0. Returns the masks forward
 * uses, or NULL (evaluation, or attn_dropout 0: no masks in the cache). */
static const float *draw_attention_keep(const Pass *p, int k, int train, Rng *rng) {
    const MultiHeadSpec as = block_attention_spec(p->s);
    float *keep = k == SUB_SELF ? p->c->keep : p->c->cross_keep;
    if (keep == NULL) return NULL;
    const size_t n = k == SUB_SELF ? multi_head_attention_floats(&as, p->B, p->N)
                                   : multi_head_cross_attention_floats(&as, p->B, p->N, p->mem->N_M);
    dropout_mask(keep, (int)n, train ? p->s->attn_dropout : 0.0f, rng);
    return train ? keep : NULL;
}

/* O [R, D] = F_k(U): the branch of sublayer k */
static void branch_forward(float *O, const float *U, const Pass *p, int k, int train, Rng *rng) {
    const MultiHeadSpec as = block_attention_spec(p->s);
    const BlockCache *c = p->c;
    if (k == SUB_SELF) {
        const float *keep = draw_attention_keep(p, k, train, rng);   /* dropout on A, or NULL */
        const BlockSelfAttention *sa = p->s->self_attention;
        if (sa)   /* a later chapter's, composed of chapter 05's steps */
            sa->forward(sa->options, O, c->A, keep, c->attn_cache, U, &as, &p->w->attn, p->w->attn_extra,
                        p->s->causal, p->lens, p->B, p->N);
        else if (p->s->rope)   /* chapter 05's steps with the rotation after the first (rope_attention.h) */
            rope_attention_forward(O, c->A, keep, c->attn_cache, U, &as, &p->w->attn, p->s->causal, p->lens, p->B,
                                   p->N);
        else
            multi_head_forward(O, c->A, keep, c->attn_cache, U, &as, &p->w->attn, p->s->causal, p->lens, p->B,
                               p->N);
    } else if (k == SUB_CROSS) {
        const float *keep = draw_attention_keep(p, k, train, rng);
        multi_head_cross_forward(O, c->cross_A, keep, c->cross_cache, U, p->mem->M, &as, &p->w->cross,
                                 p->mem->lens, p->B, p->N, p->mem->N_M);
    } else if (p->s->moe.E > 0) {
        moe_forward(O, &c->moe, U, p->s, p->w, p->B * p->N, train);
    } else {
        mlp_forward(O, c->pre_act, c->gate, c->hidden, U, p->s, p->w, p->B * p->N);
    }
}

/* dO [R, D] -> dU +=, dM += (cross), the branch's weight gradients += */
static void branch_backward(float *dU, float *dM, BlockWeights *dw, const BlockScratch *sc, const float *dO,
                            const float *U, const Pass *p, int k) {
    const MultiHeadSpec as = block_attention_spec(p->s);
    const BlockCache *c = p->c;
    if (k == SUB_SELF && p->s->self_attention)
        p->s->self_attention->backward(p->s->self_attention->options, dU, &dw->attn, dw->attn_extra,
                                       sc->attn_scratch, dO, c->A, c->keep, c->attn_cache, U, &as, &p->w->attn,
                                       p->w->attn_extra, p->s->causal, p->lens, p->B, p->N);
    else if (k == SUB_SELF && p->s->rope)
        rope_attention_backward(dU, &dw->attn, sc->attn_scratch, dO, c->A, c->keep, c->attn_cache, U, &as,
                                &p->w->attn, p->s->causal, p->lens, p->B, p->N);
    else if (k == SUB_SELF)
        multi_head_backward(dU, &dw->attn, sc->attn_scratch, dO, c->A, c->keep, c->attn_cache, U, &as,
                            &p->w->attn, p->s->causal, p->lens, p->B, p->N);
    else if (k == SUB_CROSS)
        multi_head_cross_backward(dU, dM, &dw->cross, sc->cross_scratch, dO, c->cross_A, c->cross_keep,
                                  c->cross_cache, U, p->mem->M, &as, &p->w->cross, p->mem->lens, p->B, p->N,
                                  p->mem->N_M);
    else if (p->s->moe.E > 0)
        moe_backward(dU, dw, sc->moe_scratch, dO, &c->moe, U, p->s, p->w, p->B * p->N);
    else
        mlp_backward(dU, dw, sc->dhidden, sc->dpre_act, sc->dgate, dO, c->pre_act, c->gate, c->hidden, U,
                           p->s, p->w, p->B * p->N);
}

/* X_k [R, D] -> Z_k = the sublayer's output (cache.sub[k].out) */
static void sublayer_forward(const float *X, const Pass *p, int k, int train, Rng *rng) {
    const BlockSpec *s = p->s;
    const BlockSublayerCache *sc = &p->c->sub[k];
    const int R = p->B * p->N, RD = R * s->D;
    const int pre = s->norm_place == BLOCK_PRE_NORM, norm = s->norm != BLOCK_NO_NORM;
    const float *U = X;
    float *run_mean = sub_running(s, p->w->running_mean, k), *run_var = sub_running(s, p->w->running_var, k);
    if (pre && norm) {   /* U = Norm_k(X_k) */
        block_norm_forward_batch(sc->n, sc->mean, sc->rstd, sc->batch_stats, X, s, sub_gamma(p->w, k),
                                 sub_beta(p->w, k), run_mean, run_var, p->lens, p->B, p->N, train);
        U = sc->n;
    }
    float *S = (!pre && norm) ? sc->n : sc->out;   /* without a norm after it, the sum is Z_k */
    branch_forward(S, U, p, k, train, rng);                                    /* O = F(U) */
    if (s->dropout > 0.0f) dropout_forward(S, sc->mask, S, RD, s->dropout, train, rng);
    if (s->drop_path > 0.0f)                                                   /* whole examples dropped */
        drop_path_forward(S, sc->path_keep, S, p->B, p->N * s->D, s->drop_path, train, rng);
    residual_forward(S, X, S, RD);                                             /* S = X_k + O */
    if (!pre && norm)                                                          /* Z_k = Norm_k(S) */
        block_norm_forward_batch(sc->out, sc->mean, sc->rstd, sc->batch_stats, S, s, sub_gamma(p->w, k),
                                 sub_beta(p->w, k), run_mean, run_var, p->lens, p->B, p->N, train);
}

/* dZ [R, D] -> dX +=, dM += (cross), the sublayer's weight gradients += */
static void sublayer_backward(float *dX, float *dM, BlockWeights *dw, const BlockScratch *k_, const float *dZ,
                              const float *X, const Pass *p, int k) {
    const BlockSpec *s = p->s;
    const BlockSublayerCache *sc = &p->c->sub[k];
    const int R = p->B * p->N, RD = R * s->D;
    const size_t RD_bytes = sizeof(float) * (size_t)RD;
    const int pre = s->norm_place == BLOCK_PRE_NORM, norm = s->norm != BLOCK_NO_NORM;
    /* Exercise 06.block_backward (5 points): one sublayer backward, through its norm, residual and branch. */
    const float *dS = dZ;
    if (!pre && norm) {   /* through Z_k = Norm_k(S) */
        memset(k_->dsum, 0, RD_bytes);
        block_norm_backward_batch(k_->dsum, sub_dgamma(dw, k), sub_dbeta(dw, k), dZ, sc->mean, sc->rstd,
                                  sc->batch_stats, sc->n, s, sub_gamma(p->w, k), p->lens, p->B, p->N);
        dS = k_->dsum;
    }
    memset(k_->dbranch, 0, RD_bytes);
    residual_backward(dX, k_->dbranch, dS, RD);   /* S = X_k + O: dX += dS, dO = dS */
    const float *dO = k_->dbranch;
    if (s->drop_path > 0.0f) {
        memset(k_->dpath, 0, RD_bytes);
        drop_path_backward(k_->dpath, dO, sc->path_keep, p->B, p->N * s->D);
        dO = k_->dpath;
    }
    if (s->dropout > 0.0f) {
        memset(k_->ddrop, 0, RD_bytes);
        dropout_backward(k_->ddrop, dO, sc->mask, RD);
        dO = k_->ddrop;
    }
    if (pre && norm) {    /* through O = F(Norm_k(X_k)) */
        memset(k_->din, 0, RD_bytes);
        branch_backward(k_->din, dM, dw, k_, dO, sc->n, p, k);
        block_norm_backward_batch(dX, sub_dgamma(dw, k), sub_dbeta(dw, k), k_->din, sc->mean, sc->rstd,
                                  sc->batch_stats, X, s, sub_gamma(p->w, k), p->lens, p->B, p->N);
    } else {              /* through O = F(X_k) */
        branch_backward(dX, dM, dw, k_, dO, X, p, k);
    }
    /* End of exercise 06.block_backward. */
}

/* ------------------------------------------------------------------------ */
/* The block: its sublayers in turn                                          */
/* ------------------------------------------------------------------------ */

static Pass make_pass(const BlockSpec *s, const BlockWeights *w, const int *lens, const BlockMemory *mem,
                      int B, int N, const BlockCache *cache) {
    return (Pass){.s = s, .w = w, .lens = lens, .mem = mem, .B = B, .N = N, .c = cache};
}

void block_forward(float *Y, const BlockCache *cache, const float *X, const BlockSpec *s, const BlockWeights *w,
                   const int *lens, const BlockMemory *mem, int B, int N, int train, Rng *rng) {
    const Pass p = make_pass(s, w, lens, mem, B, N, cache);
    const float *in = X;
    for (int k = 0; k < N_SUBLAYERS; k++) {
        if (!has_sublayer(s, k)) continue;
        sublayer_forward(in, &p, k, train, rng);
        in = p.c->sub[k].out;
    }
    memcpy(Y, in, sizeof(float) * (size_t)B * N * s->D);
}

void block_backward(float *dX, float *dM, BlockWeights *dw, float *scratch, const float *dY,
                    const BlockCache *cache, const float *X, const BlockSpec *s, const BlockWeights *w,
                    const int *lens, const BlockMemory *mem, int B, int N) {
    const Pass p = make_pass(s, w, lens, mem, B, N, cache);
    const size_t RD_bytes = sizeof(float) * (size_t)B * N * s->D;
    BlockScratch k;
    scratch_layout(s, B, N, mem ? mem->N_M : 0, scratch, &k);
    BlockWeights no_gradients;
    memset(&no_gradients, 0, sizeof no_gradients);
    if (dw == NULL) dw = &no_gradients;
    /* the sublayers present, first to last */
    int order[N_SUBLAYERS], n = 0;
    for (int j = 0; j < N_SUBLAYERS; j++)
        if (has_sublayer(s, j)) order[n++] = j;
    /* last to first: the gradient of sublayer i's output flows to its input,
     * which is sublayer i-1's output (a zeroed buffer) or, for the first, X */
    const float *dZ = dY;
    float *bufs[2] = {k.grad_a, k.grad_b};
    for (int i = n - 1; i >= 0; i--) {
        const float *in = i > 0 ? p.c->sub[order[i - 1]].out : X;
        float *dIn = dX;   /* the first sublayer accumulates into dX ... */
        if (i > 0 || dX == NULL) {   /* ... the others (and a dX nobody wants) into a zeroed buffer */
            dIn = bufs[i % 2];
            memset(dIn, 0, RD_bytes);
        }
        sublayer_backward(dIn, dM, dw, &k, dZ, in, &p, order[i]);
        dZ = dIn;
    }
}

/* ------------------------------------------------------------------------ */
/* Decoding: one new position per row, with the KV cache                     */
/* ------------------------------------------------------------------------ */

/* Work of one step, for n rows:
 *   per sublayer: n_, mean, rstd [n D | n | n], out [n, D]
 *   QKV [n, 3 H D_H], Y [n, H D_H], A [T_cap]; cross: multi_head_cross_attend's
 *   work; MLP: pre_act, gate, hidden [n, F] */
typedef struct {
    float *n[N_SUBLAYERS], *mean[N_SUBLAYERS], *rstd[N_SUBLAYERS], *out[N_SUBLAYERS];
    float *QKV, *Y, *A;
    float *cross_work;
    float *pre_act, *gate, *hidden;
    BlockMoeCache moe;      /* a mixture of experts: its cache for the n rows */
} StepWork;

static size_t step_layout(const BlockSpec *s, int n, int T_cap, int N_M, float *base, StepWork *k) {
    const size_t nD = (size_t)n * s->D, HD = (size_t)s->H * s->D_H;
    const size_t nF = dense_mlp(s) ? (size_t)n * s->F : 0;
    size_t used = 0;
    memset(k, 0, sizeof *k);
    const size_t stats = s->norm == BLOCK_BATCHNORM ? (size_t)s->D : (size_t)n;   /* batch norm: per feature */
    for (int j = 0; j < N_SUBLAYERS; j++) {
        k->n[j] = floats_take(base, &used, nD);
        k->mean[j] = floats_take(base, &used, stats);
        k->rstd[j] = floats_take(base, &used, stats);
        k->out[j] = floats_take(base, &used, nD);
    }
    k->QKV = floats_take(base, &used, (size_t)n * 3 * HD);
    k->Y = floats_take(base, &used, (size_t)n * HD);
    k->A = floats_take(base, &used, (size_t)T_cap);
    k->cross_work = floats_take(base, &used, s->cross ? (size_t)n * (2 * HD + (size_t)s->H * N_M) : 0);
    k->pre_act = floats_take(base, &used, nF);
    k->gate = floats_take(base, &used, nF);
    k->hidden = floats_take(base, &used, nF);
    if (s->moe.E > 0 && s->mlp != BLOCK_NO_MLP) used += moe_cache_layout(s, n, base ? base + used : NULL, &k->moe);
    return used;
}

size_t block_step_work_floats(const BlockSpec *s, int n, int T_cap, int N_M) {
    StepWork k;
    return step_layout(s, n, T_cap, N_M, NULL, &k);
}

/* Self-attention of one new row per decoding row, over its KV cache:
 * U [n, D] -> O [n, D]. Row r's new key and value go to position pos of
 * its cache, then its query attends over positions 0..pos (chapter 03's
 * core, one query, per head). */
static void step_self_attention(float *O, const float *U, const BlockSpec *s, const BlockWeights *w,
                                const BlockStepRow *rows, int n, const StepWork *k) {
    const int H = s->H, D_H = s->D_H, HD = H * D_H;
    const float scale = 1.0f / sqrtf((float)D_H);
    /* 1. [q|k|v] [n, 3 H D_H] = U W_QKV: only the new rows */
    sgemm(0, 0, n, 3 * HD, s->D, 1.0f, U, s->D, w->attn.W_QKV, 3 * HD, 0.0f, k->QKV, 3 * HD);
    /*    rope: row r's q and k [1, H D_H] rotated at its own position */
    if (s->rope)
        for (int r = 0; r < n; r++) {
            rope_forward(k->QKV + (size_t)r * 3 * HD, 3 * HD, 1, H, D_H, rows[r].pos);
            rope_forward(k->QKV + (size_t)r * 3 * HD + HD, 3 * HD, 1, H, D_H, rows[r].pos);
        }
    /* Exercise 06.kv_cache (3 points): append the new k and v to the cache; the new q attends over keys 0..t. */
    for (int r = 0; r < n; r++) {
        const float *qkv = k->QKV + (size_t)r * 3 * HD;
        const int t = rows[r].pos;
        memcpy(rows[r].K + (size_t)t * HD, qkv + HD, sizeof(float) * (size_t)HD);       /* append k */
        memcpy(rows[r].V + (size_t)t * HD, qkv + 2 * HD, sizeof(float) * (size_t)HD);   /* append v */
        for (int h = 0; h < H; h++) {   /* 2.-3. one query over keys 0..t, head h */
            const DotHead head = {qkv + h * D_H, 3 * HD, rows[r].K + h * D_H, HD, rows[r].V + h * D_H, HD,
                                  1, t + 1, D_H, D_H, scale};
            dot_attention_forward(k->Y + (size_t)r * HD + h * D_H, HD, k->A, k->A, &head, NULL, NULL);
        }
    }
    /* End of exercise 06.kv_cache. */
    /* 4. O = Y W_O + b_O */
    linear_forward(O, k->Y, w->attn.W_O, w->attn.b_O, n, HD, s->D);
}

void block_step(float *Y, float *cross_A, const float *X, const BlockSpec *s, const BlockWeights *w,
                const BlockStepRow *rows, int n, int T_cap, int N_M, float *work) {
    assert(s->self_attention == NULL);   /* the steps are chapter 05's attention (or rope), a causal stack's */
    StepWork k;
    step_layout(s, n, T_cap, N_M, work, &k);
    const MultiHeadSpec as = block_attention_spec(s);
    const int nD = n * s->D;
    const int pre = s->norm_place == BLOCK_PRE_NORM, norm = s->norm != BLOCK_NO_NORM;
    const float *KV_rows[n > 0 ? n : 1];
    int mem_lens[n > 0 ? n : 1];
    for (int r = 0; r < n; r++) {
        KV_rows[r] = rows[r].mem_KV;
        mem_lens[r] = rows[r].mem_len;
    }
    /* the same four steps per sublayer as sublayer_forward, on n rows */
    const float *in = X;
    for (int j = 0; j < N_SUBLAYERS; j++) {
        if (!has_sublayer(s, j)) continue;
        const float *U = in;
        float *run_mean = sub_running(s, w->running_mean, j), *run_var = sub_running(s, w->running_var, j);
        if (pre && norm) {   /* (evaluation: batch norm with its running statistics) */
            block_norm_forward_batch(k.n[j], k.mean[j], k.rstd[j], NULL, in, s, sub_gamma(w, j), sub_beta(w, j),
                                     run_mean, run_var, NULL, 1, n, 0);
            U = k.n[j];
        }
        float *S = (!pre && norm) ? k.n[j] : k.out[j];
        if (j == SUB_SELF) step_self_attention(S, U, s, w, rows, n, &k);
        else if (j == SUB_CROSS)
            multi_head_cross_attend(S, cross_A, k.cross_work, U, KV_rows, mem_lens, &as, &w->cross, n, N_M);
        else if (s->moe.E > 0) moe_forward(S, &k.moe, U, s, w, n, 0);
        else mlp_forward(S, k.pre_act, k.gate, k.hidden, U, s, w, n);
        residual_forward(S, in, S, nD);
        if (!pre && norm)
            block_norm_forward_batch(k.out[j], k.mean[j], k.rstd[j], NULL, S, s, sub_gamma(w, j), sub_beta(w, j),
                                     run_mean, run_var, NULL, 1, n, 0);
        in = k.out[j];
    }
    memcpy(Y, in, sizeof(float) * (size_t)nD);
}
