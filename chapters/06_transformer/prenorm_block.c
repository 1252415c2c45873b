/* prenorm_block.c - chapter 06: the pre-norm LayerNorm GELU block as plain
 * calls (see prenorm_block.h): forward top to bottom, backward bottom to top,
 * each line one layer of common/nn or chapter 05. */
#include "06_transformer/prenorm_block.h"

#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "nn/transformer_layers.h"
#include "util/error.h"
#include "util/util.h"

int prenorm_block_check(const BlockSpec *s) {
    if (s->norm_place != BLOCK_PRE_NORM || s->norm != BLOCK_LAYERNORM || s->mlp != BLOCK_MLP_GELU || s->cross ||
        s->dropout > 0.0f || s->attn_dropout > 0.0f || s->drop_path > 0.0f || s->self_attention ||
        s->rope || s->attention != MULTI_HEAD_PLAIN)
        return fail("prenorm_block: the spec is not the pre-norm LayerNorm GELU encoder block of chapter 05's "
                    "attention without dropout or rotary positions");
    return 0;
}

void prenorm_block_acts_alloc(PrenormBlockActs *a, const BlockSpec *s, int B, int N) {
    const MultiHeadSpec as = block_attention_spec(s);
    const size_t R = (size_t)B * N, RD = R * (size_t)s->D, RF = R * (size_t)s->F;
    /* name and size of every buffer, in one allocation */
    float **bufs[] = {&a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->att, &a->A, &a->attn_cache, &a->res1, &a->ln2,
                      &a->ln2_mean, &a->ln2_rstd, &a->pre_act, &a->hidden, &a->mlp, &a->d_res1, &a->d_att,
                      &a->d_ln1, &a->d_mlp, &a->d_hidden, &a->d_pre_act, &a->d_ln2, &a->attn_scratch};
    const size_t sizes[] = {RD, R, R, RD, multi_head_attention_floats(&as, B, N), multi_head_cache_floats(&as, B, N),
                            RD, RD, R, R, RF, RF, RD, RD, RD, RD, RD, RF, RF, RD,
                            multi_head_scratch_floats(&as, B, N)};
    const int n = (int)(sizeof sizes / sizeof sizes[0]);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += sizes[i];
    a->memory = xcalloc(total, sizeof(float));
    float *p = a->memory;
    for (int i = 0; i < n; i++) {
        *bufs[i] = p;
        p += sizes[i];
    }
}

void prenorm_block_acts_free(PrenormBlockActs *a) {
    free(a->memory);
    memset(a, 0, sizeof *a);
}

/* X [B, N, D] -> Y [B, N, D] */
void prenorm_block_forward(float *Y, PrenormBlockActs *a, const float *X, const BlockSpec *s,
                           const BlockWeights *w, const int *lens, int B, int N) {
    const MultiHeadSpec as = block_attention_spec(s);
    const int R = B * N, D = s->D, F = s->F;
    /* Z = X + MHA(LN_1(X)) */
    layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, X, w->norm1_gamma, w->norm1_beta, R, D, BLOCK_NORM_EPS);
    multi_head_forward(a->att, a->A, NULL, a->attn_cache, a->ln1, &as, &w->attn, s->causal, lens, B, N);
    residual_forward(a->res1, X, a->att, R * D);
    /* Y = Z + MLP(LN_2(Z)) */
    layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res1, w->norm2_gamma, w->norm2_beta, R, D,
                      BLOCK_NORM_EPS);
    linear_forward(a->pre_act, a->ln2, w->W_1, w->b_1, R, D, F);
    gelu_forward(a->hidden, a->pre_act, R * F);
    linear_forward(a->mlp, a->hidden, w->W_2, w->b_2, R, F, D);
    residual_forward(Y, a->res1, a->mlp, R * D);
}

/* dY [B, N, D] -> dX +=, dw += */
void prenorm_block_backward(float *dX, BlockWeights *dw, PrenormBlockActs *a, const float *dY, const float *X,
                            const BlockSpec *s, const BlockWeights *w, const int *lens, int B, int N) {
    const MultiHeadSpec as = block_attention_spec(s);
    const int R = B * N, D = s->D, F = s->F;
    const size_t RD = sizeof(float) * (size_t)R * D, RF = sizeof(float) * (size_t)R * F;
    /* the gradients of this block's own activations start at zero; backward adds into them */
    memset(a->d_res1, 0, RD);
    memset(a->d_att, 0, RD);
    memset(a->d_ln1, 0, RD);
    memset(a->d_mlp, 0, RD);
    memset(a->d_hidden, 0, RF);
    memset(a->d_pre_act, 0, RF);
    memset(a->d_ln2, 0, RD);
    /* Y = Z + MLP(LN_2(Z)), backwards */
    residual_backward(a->d_res1, a->d_mlp, dY, R * D);
    linear_backward(a->d_hidden, dw->W_2, dw->b_2, a->d_mlp, a->hidden, w->W_2, R, F, D);
    gelu_backward(a->d_pre_act, a->d_hidden, a->pre_act, R * F);
    linear_backward(a->d_ln2, dw->W_1, dw->b_1, a->d_pre_act, a->ln2, w->W_1, R, D, F);
    layernorm_backward(a->d_res1, dw->norm2_gamma, dw->norm2_beta, a->d_ln2, a->ln2_mean, a->ln2_rstd, a->res1,
                       w->norm2_gamma, R, D);
    /* Z = X + MHA(LN_1(X)), backwards */
    residual_backward(dX, a->d_att, a->d_res1, R * D);
    multi_head_backward(a->d_ln1, &dw->attn, a->attn_scratch, a->d_att, a->A, NULL, a->attn_cache, a->ln1, &as,
                        &w->attn, s->causal, lens, B, N);
    layernorm_backward(dX, dw->norm1_gamma, dw->norm1_beta, a->d_ln1, a->ln1_mean, a->ln1_rstd, X,
                       w->norm1_gamma, R, D);
}
