/* mlp.c - chapter 06: the position-wise MLP (see mlp.h). */
#include "06_transformer/mlp.h"

#include <string.h>

#include "nn/layers.h"
#include "nn/transformer_layers.h"
#include "util/util.h"

size_t mlp_layout(const BlockSpec *s, float *base, BlockWeights *w) {
    const int swiglu = s->mlp == BLOCK_MLP_SWIGLU;
    const size_t DF = (size_t)s->D * s->F;
    size_t used = 0;
    w->W_1 = floats_take(base, &used, DF);
    w->b_1 = floats_take(base, &used, !swiglu ? (size_t)s->F : 0);
    w->W_3 = floats_take(base, &used, swiglu ? DF : 0);
    w->W_2 = floats_take(base, &used, DF);
    w->b_2 = floats_take(base, &used, !swiglu ? (size_t)s->D : 0);
    return used;
}

size_t mlp_param_count(const BlockSpec *s) {
    BlockWeights w;
    return mlp_layout(s, NULL, &w);
}

BlockWeights mlp_view(const BlockSpec *s, float *base) {
    BlockWeights w;
    memset(&w, 0, sizeof w);
    mlp_layout(s, base, &w);
    return w;
}

/* U [R, D] -> out [R, D] = MLP(U); keeps pre_act, gate, hidden ([R, F] each) */
void mlp_forward(float *out, float *pre_act, float *gate, float *hidden, const float *U, const BlockSpec *s,
                 const BlockWeights *w, int R) {
    const int D = s->D, F = s->F, RF = R * F;
    if (s->mlp == BLOCK_MLP_SWIGLU) {
        linear_forward(pre_act, U, w->W_1, NULL, R, D, F);   /* a = U W_1 */
        linear_forward(gate, U, w->W_3, NULL, R, D, F);      /* g = U W_3 */
        swiglu_forward(hidden, pre_act, gate, RF);           /* h = silu(a) g */
    } else {
        linear_forward(pre_act, U, w->W_1, w->b_1, R, D, F);
        if (s->mlp == BLOCK_MLP_GELU) gelu_forward(hidden, pre_act, RF);
        else relu_forward(hidden, pre_act, RF);
    }
    linear_forward(out, hidden, w->W_2, w->b_2, R, F, D);    /* b_2 NULL for SwiGLU */
}

/* dout [R, D] -> dU [R, D] +=, dW_1, db_1, dW_3, dW_2, db_2 += */
void mlp_backward(float *dU, BlockWeights *dw, float *dhidden, float *dpre_act, float *dgate, const float *dout,
                  const float *pre_act, const float *gate, const float *hidden, const float *U, const BlockSpec *s,
                  const BlockWeights *w, int R) {
    const int D = s->D, F = s->F, RF = R * F;
    memset(dhidden, 0, sizeof(float) * (size_t)RF);
    linear_backward(dhidden, dw->W_2, dw->b_2, dout, hidden, w->W_2, R, F, D);
    memset(dpre_act, 0, sizeof(float) * (size_t)RF);
    if (s->mlp == BLOCK_MLP_SWIGLU) {
        memset(dgate, 0, sizeof(float) * (size_t)RF);
        swiglu_backward(dpre_act, dgate, dhidden, pre_act, gate, RF);
        linear_backward(dU, dw->W_3, NULL, dgate, U, w->W_3, R, D, F);
    } else if (s->mlp == BLOCK_MLP_GELU) {
        gelu_backward(dpre_act, dhidden, pre_act, RF);
    } else {
        relu_backward(dpre_act, dhidden, pre_act, RF);
    }
    linear_backward(dU, dw->W_1, dw->b_1, dpre_act, U, w->W_1, R, D, F);
}
