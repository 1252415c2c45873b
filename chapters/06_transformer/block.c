/* block.c - chapter 06: one transformer block (see block.h).
 *
 * Forward, R = B*N positions as rows, each sublayer in four steps:
 *
 *   attention sublayer                       MLP sublayer
 *   (pre-norm)  U = Norm1(X)                 (pre-norm)  U = Norm2(Z)
 *               O = MHA(U or X)   ch. 05                 M = MLP(U or Z)
 *               O = dropout(O)                           M = dropout(M)
 *               S1 = X + O        residual               S2 = Z + M
 *   (post-norm) Z = Norm1(S1)                (post-norm) Y = Norm2(S2)
 *   (else)      Z = S1                       (else)      Y = S2
 *
 * Backward walks the same steps in reverse: the residual sum hands its
 * gradient to both of its inputs (residual_backward), so dZ collects the
 * gradient straight from dY plus the one through the MLP, and dX the one
 * straight from dZ plus the one through attention.
 *
 * Every step is a call: chapter 05's multi_head_forward/backward, the
 * norms of layers.h and transformer_layers.h, linear_forward for the MLP's
 * products. The only code here is the wiring. */
#include "06_transformer/block.h"

#include <string.h>

#include "nn/layers.h"
#include "nn/params.h"
#include "nn/transformer_layers.h"

/* ------------------------------------------------------------------------ */
/* Layout of the parameters and the cache                                    */
/* ------------------------------------------------------------------------ */

/* Hands out the next n floats of base, counting them in *used. Returns NULL
 * when n is 0 (an absent tensor) or base is NULL (only counting). */
static float *take(float *base, size_t *used, size_t n) {
    float *p = (base == NULL || n == 0) ? NULL : base + *used;
    *used += n;
    return p;
}

static size_t norm_params(const BlockSpec *s, int beta) {
    if (s->norm == BLOCK_NO_NORM) return 0;
    if (beta && s->norm != BLOCK_LAYERNORM) return 0;   /* RMSNorm has no beta */
    return (size_t)s->D;
}

MultiHeadSpec block_attention_spec(const BlockSpec *s) {
    MultiHeadSpec a = {s->D, s->H, s->D_H, s->D, s->attention};
    return a;
}

/* Lays the parameters out from base (or only counts them, base NULL);
 * returns how many floats they take. */
static size_t weights_layout(const BlockSpec *s, float *base, BlockWeights *w) {
    const MultiHeadSpec as = block_attention_spec(s);
    const int mlp = s->mlp != BLOCK_NO_MLP, swiglu = s->mlp == BLOCK_MLP_SWIGLU;
    const size_t DF = mlp ? (size_t)s->D * s->F : 0;
    size_t used = 0;
    float *attn = take(base, &used, multi_head_param_count(&as));
    if (attn) w->attn = multi_head_weights_view(&as, attn);
    w->norm1_gamma = take(base, &used, norm_params(s, 0));
    w->norm1_beta = take(base, &used, norm_params(s, 1));
    w->W_1 = take(base, &used, DF);
    w->b_1 = take(base, &used, mlp && !swiglu ? (size_t)s->F : 0);
    w->W_3 = take(base, &used, swiglu ? DF : 0);
    w->W_2 = take(base, &used, DF);
    w->b_2 = take(base, &used, mlp && !swiglu ? (size_t)s->D : 0);
    w->norm2_gamma = take(base, &used, mlp ? norm_params(s, 0) : 0);
    w->norm2_beta = take(base, &used, mlp ? norm_params(s, 1) : 0);
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

void block_init(const BlockSpec *s, const BlockWeights *w, Rng *rng) {
    const MultiHeadSpec as = block_attention_spec(s);
    multi_head_init(&as, &w->attn, rng);
    const size_t D = (size_t)s->D, F = (size_t)s->F;
    if (w->norm1_gamma) init_constant(w->norm1_gamma, D, 1.0f);
    if (w->norm1_beta) init_constant(w->norm1_beta, D, 0.0f);
    if (w->W_1) init_xavier(w->W_1, s->D, s->F, rng);
    if (w->b_1) init_constant(w->b_1, F, 0.0f);
    if (w->W_3) init_xavier(w->W_3, s->D, s->F, rng);
    if (w->W_2) init_xavier(w->W_2, s->F, s->D, rng);
    if (w->b_2) init_constant(w->b_2, D, 0.0f);
    if (w->norm2_gamma) init_constant(w->norm2_gamma, D, 1.0f);
    if (w->norm2_beta) init_constant(w->norm2_beta, D, 0.0f);
}

/* What forward keeps (NULL when the spec does not need it). */
typedef struct {
    float *n1;              /* [R, D] pre-norm: Norm1(X); post-norm: S1 = X + O */
    float *mean1, *rstd1;   /* [R] Norm1's row statistics (mean1: LayerNorm only) */
    float *A;               /* [B, H, N, N] chapter 05's attention weights (plain only) */
    float *attn_cache;      /* chapter 05's cache */
    float *mask1;           /* [R, D] dropout on the attention output */
    float *Z;               /* [R, D] the attention sublayer's output */
    float *n2;              /* [R, D] pre-norm: Norm2(Z); post-norm: S2 = Z + M */
    float *mean2, *rstd2;   /* [R] Norm2's row statistics */
    float *pre_act;         /* [R, F] U W_1 (+ b_1) */
    float *gate;            /* [R, F] U W_3 (SwiGLU) */
    float *hidden;          /* [R, F] act(pre_act), or silu(pre_act) gate */
    float *mask2;           /* [R, D] dropout on the MLP output */
} BlockCache;

static size_t cache_layout(const BlockSpec *s, int B, int N, float *base, BlockCache *c) {
    const MultiHeadSpec as = block_attention_spec(s);
    const size_t R = (size_t)B * N, RD = R * s->D;
    const int norm = s->norm != BLOCK_NO_NORM, mlp = s->mlp != BLOCK_NO_MLP;
    const size_t RF = mlp ? R * s->F : 0;
    const size_t mask = s->dropout > 0.0f ? RD : 0;
    size_t used = 0;
    c->n1 = take(base, &used, norm ? RD : 0);
    c->mean1 = take(base, &used, s->norm == BLOCK_LAYERNORM ? R : 0);
    c->rstd1 = take(base, &used, norm ? R : 0);
    c->A = take(base, &used, multi_head_attention_floats(&as, B, N));
    c->attn_cache = take(base, &used, multi_head_cache_floats(&as, B, N));
    c->mask1 = take(base, &used, mask);
    c->Z = take(base, &used, RD);
    c->n2 = take(base, &used, mlp && norm ? RD : 0);
    c->mean2 = take(base, &used, mlp && s->norm == BLOCK_LAYERNORM ? R : 0);
    c->rstd2 = take(base, &used, mlp && norm ? R : 0);
    c->pre_act = take(base, &used, RF);
    c->gate = take(base, &used, s->mlp == BLOCK_MLP_SWIGLU ? RF : 0);
    c->hidden = take(base, &used, RF);
    c->mask2 = take(base, &used, mlp ? mask : 0);
    return used;
}

size_t block_cache_floats(const BlockSpec *s, int B, int N) {
    BlockCache c;
    return cache_layout(s, B, N, NULL, &c);
}

const float *block_attention_weights(const BlockSpec *s, const float *cache, int B, int N) {
    BlockCache c;
    cache_layout(s, B, N, (float *)cache, &c);
    return c.A;
}

/* Scratch of backward. */
typedef struct {
    float *dZ;              /* [R, D] gradient of Z */
    float *dsum;            /* [R, D] gradient of S1 or S2 (post-norm) */
    float *dbranch;         /* [R, D] gradient of a branch's output after dropout */
    float *ddrop;           /* [R, D] ... and before dropout */
    float *din;             /* [R, D] gradient of a branch's input U (pre-norm) */
    float *dhidden, *dpre_act, *dgate;   /* [R, F] */
    float *attn_scratch;    /* chapter 05's scratch */
} BlockScratch;

static size_t scratch_layout(const BlockSpec *s, int B, int N, float *base, BlockScratch *k) {
    const MultiHeadSpec as = block_attention_spec(s);
    const size_t R = (size_t)B * N, RD = R * s->D;
    const size_t RF = s->mlp != BLOCK_NO_MLP ? R * s->F : 0;
    size_t used = 0;
    k->dZ = take(base, &used, RD);
    k->dsum = take(base, &used, RD);
    k->dbranch = take(base, &used, RD);
    k->ddrop = take(base, &used, RD);
    k->din = take(base, &used, RD);
    k->dhidden = take(base, &used, RF);
    k->dpre_act = take(base, &used, RF);
    k->dgate = take(base, &used, s->mlp == BLOCK_MLP_SWIGLU ? RF : 0);
    k->attn_scratch = take(base, &used, multi_head_scratch_floats(&as, B, N));
    return used;
}

size_t block_scratch_floats(const BlockSpec *s, int B, int N) {
    BlockScratch k;
    return scratch_layout(s, B, N, NULL, &k);
}

/* ------------------------------------------------------------------------ */
/* The pieces: norm, MLP, dropout's backward                                 */
/* ------------------------------------------------------------------------ */

/* x [R, D] -> out [R, D] by the spec's norm (LayerNorm or RMSNorm) */
static void norm_forward(float *out, float *mean, float *rstd, const float *x, const BlockSpec *s,
                         const float *gamma, const float *beta, int R) {
    if (s->norm == BLOCK_LAYERNORM) layernorm_forward(out, mean, rstd, x, gamma, beta, R, s->D, BLOCK_NORM_EPS);
    else rmsnorm_forward(out, rstd, x, gamma, R, s->D, BLOCK_NORM_EPS);
}

/* dout [R, D] -> dx +=, dgamma +=, dbeta += (LayerNorm only) */
static void norm_backward(float *dx, float *dgamma, float *dbeta, const float *dout, const float *mean,
                          const float *rstd, const float *x, const BlockSpec *s, const float *gamma, int R) {
    if (s->norm == BLOCK_LAYERNORM) layernorm_backward(dx, dgamma, dbeta, dout, mean, rstd, x, gamma, R, s->D);
    else rmsnorm_backward(dx, dgamma, dout, rstd, x, gamma, R, s->D);
}

/* U [R, D] -> out [R, D] = MLP(U); keeps pre_act, gate, hidden in c */
static void mlp_forward(float *out, const BlockCache *c, const float *U, const BlockSpec *s,
                        const BlockWeights *w, int R) {
    const int D = s->D, F = s->F, RF = R * F;
    if (s->mlp == BLOCK_MLP_SWIGLU) {
        linear_forward(c->pre_act, U, w->W_1, NULL, R, D, F);   /* a = U W_1 */
        linear_forward(c->gate, U, w->W_3, NULL, R, D, F);      /* g = U W_3 */
        swiglu_forward(c->hidden, c->pre_act, c->gate, RF);     /* h = silu(a) g */
    } else {
        linear_forward(c->pre_act, U, w->W_1, w->b_1, R, D, F);
        if (s->mlp == BLOCK_MLP_GELU) gelu_forward(c->hidden, c->pre_act, RF);
        else relu_forward(c->hidden, c->pre_act, RF);
    }
    linear_forward(out, c->hidden, w->W_2, w->b_2, R, F, D);    /* b_2 NULL for SwiGLU */
}

/* dout [R, D] -> dU [R, D] +=, dW_1, db_1, dW_3, dW_2, db_2 += */
static void mlp_backward(float *dU, BlockWeights *dw, const BlockScratch *k, const float *dout,
                         const BlockCache *c, const float *U, const BlockSpec *s, const BlockWeights *w,
                         int R) {
    const int D = s->D, F = s->F, RF = R * F;
    memset(k->dhidden, 0, sizeof(float) * (size_t)RF);
    linear_backward(k->dhidden, dw->W_2, dw->b_2, dout, c->hidden, w->W_2, R, F, D);
    memset(k->dpre_act, 0, sizeof(float) * (size_t)RF);
    if (s->mlp == BLOCK_MLP_SWIGLU) {
        memset(k->dgate, 0, sizeof(float) * (size_t)RF);
        swiglu_backward(k->dpre_act, k->dgate, k->dhidden, c->pre_act, c->gate, RF);
        linear_backward(dU, dw->W_3, NULL, k->dgate, U, w->W_3, R, D, F);
    } else if (s->mlp == BLOCK_MLP_GELU) {
        gelu_backward(k->dpre_act, k->dhidden, c->pre_act, RF);
    } else {
        relu_backward(k->dpre_act, k->dhidden, c->pre_act, RF);
    }
    linear_backward(dU, dw->W_1, dw->b_1, k->dpre_act, U, w->W_1, R, D, F);
}

/* The gradient of a branch's output before its dropout: dbranch itself
 * without dropout, else ddrop = dbranch mask. */
static const float *dropout_gradient(float *ddrop, const float *dbranch, const float *mask,
                                     const BlockSpec *s, int n) {
    if (s->dropout == 0.0f) return dbranch;
    memset(ddrop, 0, sizeof(float) * (size_t)n);
    dropout_backward(ddrop, dbranch, mask, n);
    return ddrop;
}

/* ------------------------------------------------------------------------ */
/* Forward and backward                                                      */
/* ------------------------------------------------------------------------ */

void block_forward(float *Y, float *cache, const float *X, const BlockSpec *s, const BlockWeights *w,
                   const int *lens, int B, int N, int train, Rng *rng) {
    const MultiHeadSpec as = block_attention_spec(s);
    const int R = B * N, RD = R * s->D;
    const int pre = s->norm_place == BLOCK_PRE_NORM, norm = s->norm != BLOCK_NO_NORM;
    BlockCache c;
    cache_layout(s, B, N, cache, &c);

    /* the attention sublayer: X -> Z */
    const float *attn_in = X;
    if (pre && norm) {
        norm_forward(c.n1, c.mean1, c.rstd1, X, s, w->norm1_gamma, w->norm1_beta, R);
        attn_in = c.n1;
    }
    float *S1 = (!pre && norm) ? c.n1 : c.Z;   /* without a norm after it, the sum is Z */
    multi_head_forward(S1, c.A, c.attn_cache, attn_in, &as, &w->attn, s->causal, lens, B, N);
    if (s->dropout > 0.0f) dropout_forward(S1, c.mask1, S1, RD, s->dropout, train, rng);
    residual_forward(S1, X, S1, RD);
    if (!pre && norm) norm_forward(c.Z, c.mean1, c.rstd1, S1, s, w->norm1_gamma, w->norm1_beta, R);

    if (s->mlp == BLOCK_NO_MLP) {   /* no second sublayer: Y = Z */
        memcpy(Y, c.Z, sizeof(float) * (size_t)RD);
        return;
    }

    /* the MLP sublayer: Z -> Y */
    const float *mlp_in = c.Z;
    if (pre && norm) {
        norm_forward(c.n2, c.mean2, c.rstd2, c.Z, s, w->norm2_gamma, w->norm2_beta, R);
        mlp_in = c.n2;
    }
    float *S2 = (!pre && norm) ? c.n2 : Y;     /* without a norm after it, the sum is Y */
    mlp_forward(S2, &c, mlp_in, s, w, R);
    if (s->dropout > 0.0f) dropout_forward(S2, c.mask2, S2, RD, s->dropout, train, rng);
    residual_forward(S2, c.Z, S2, RD);
    if (!pre && norm) norm_forward(Y, c.mean2, c.rstd2, S2, s, w->norm2_gamma, w->norm2_beta, R);
}

void block_backward(float *dX, BlockWeights *dw, float *scratch, const float *dY, const float *cache,
                    const float *X, const BlockSpec *s, const BlockWeights *w, const int *lens, int B,
                    int N) {
    const MultiHeadSpec as = block_attention_spec(s);
    const int R = B * N, RD = R * s->D;
    const size_t RD_bytes = sizeof(float) * (size_t)RD;
    const int pre = s->norm_place == BLOCK_PRE_NORM, norm = s->norm != BLOCK_NO_NORM;
    BlockCache c;
    cache_layout(s, B, N, (float *)cache, &c);
    BlockScratch k;
    scratch_layout(s, B, N, scratch, &k);
    BlockWeights no_gradients;
    memset(&no_gradients, 0, sizeof no_gradients);
    if (dw == NULL) dw = &no_gradients;

    /* the MLP sublayer, backwards: dY -> dZ */
    const float *dZ = dY;   /* without an MLP, Y = Z */
    if (s->mlp != BLOCK_NO_MLP) {
        const float *dS2 = dY;
        if (!pre && norm) {
            memset(k.dsum, 0, RD_bytes);
            norm_backward(k.dsum, dw->norm2_gamma, dw->norm2_beta, dY, c.mean2, c.rstd2, c.n2, s,
                          w->norm2_gamma, R);
            dS2 = k.dsum;
        }
        memset(k.dZ, 0, RD_bytes);
        memset(k.dbranch, 0, RD_bytes);
        residual_backward(k.dZ, k.dbranch, dS2, RD);   /* S2 = Z + M */
        const float *dM = dropout_gradient(k.ddrop, k.dbranch, c.mask2, s, RD);
        if (pre && norm) {
            memset(k.din, 0, RD_bytes);
            mlp_backward(k.din, dw, &k, dM, &c, c.n2, s, w, R);
            norm_backward(k.dZ, dw->norm2_gamma, dw->norm2_beta, k.din, c.mean2, c.rstd2, c.Z, s,
                          w->norm2_gamma, R);
        } else {
            mlp_backward(k.dZ, dw, &k, dM, &c, c.Z, s, w, R);
        }
        dZ = k.dZ;
    }

    /* the attention sublayer, backwards: dZ -> dX */
    const float *dS1 = dZ;
    if (!pre && norm) {
        memset(k.dsum, 0, RD_bytes);
        norm_backward(k.dsum, dw->norm1_gamma, dw->norm1_beta, dZ, c.mean1, c.rstd1, c.n1, s,
                      w->norm1_gamma, R);
        dS1 = k.dsum;
    }
    memset(k.dbranch, 0, RD_bytes);
    residual_backward(dX, k.dbranch, dS1, RD);          /* S1 = X + O */
    const float *dO = dropout_gradient(k.ddrop, k.dbranch, c.mask1, s, RD);
    if (pre && norm) {
        memset(k.din, 0, RD_bytes);
        multi_head_backward(k.din, &dw->attn, k.attn_scratch, dO, c.A, c.attn_cache, c.n1, &as, &w->attn,
                            s->causal, lens, B, N);
        norm_backward(dX, dw->norm1_gamma, dw->norm1_beta, k.din, c.mean1, c.rstd1, X, s,
                      w->norm1_gamma, R);
    } else {
        multi_head_backward(dX, &dw->attn, k.attn_scratch, dO, c.A, c.attn_cache, X, &as, &w->attn,
                            s->causal, lens, B, N);
    }
}
