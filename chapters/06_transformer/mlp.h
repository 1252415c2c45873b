/* mlp.h - chapter 06: the position-wise MLP, D -> F -> D, the same for
 * every position (a row of U [R, D], R = B N):
 *
 *   MLP(U) = act(U W_1 + b_1) W_2 + b_2             act = GELU or ReLU
 *   MLP(U) = (silu(U W_1) * (U W_3)) W_2            SwiGLU (no biases, as LLaMA)
 *
 * The block (block.c) runs one of them as its MLP sublayer; a mixture of
 * experts (moe.c) runs E of them, each on the rows routed to it. The
 * tensors lie one after another, W_1 | b_1 | W_3 | W_2 | b_2 (absent ones
 * take no room), as views of a BlockWeights (block.h). */
#ifndef MLP_H
#define MLP_H
#include <stddef.h>
#include "06_transformer/block.h"

/* The MLP's tensors from base into w's W_1 .. b_2 views (base NULL: only
 * their count). Returns the floats they take. */
size_t mlp_layout(const BlockSpec *s, float *base, BlockWeights *w);
/* The floats of one MLP (one expert's), and a BlockWeights with only those
 * views, into base. */
size_t mlp_param_count(const BlockSpec *s);
BlockWeights mlp_view(const BlockSpec *s, float *base);

/* U [R, D] -> out [R, D] (written); keeps pre_act, gate (SwiGLU), hidden
 * [R, F] for the backward. */
void mlp_forward(float *out, float *pre_act, float *gate, float *hidden, const float *U, const BlockSpec *s,
                 const BlockWeights *w, int R);
/* dout [R, D] -> dU [R, D] +=, dW_1, db_1, dW_3, dW_2, db_2 += (any may be
 * NULL); dhidden, dpre_act, dgate [R, F]: scratch. */
void mlp_backward(float *dU, BlockWeights *dw, float *dhidden, float *dpre_act, float *dgate, const float *dout,
                  const float *pre_act, const float *gate, const float *hidden, const float *U, const BlockSpec *s,
                  const BlockWeights *w, int R);
#endif
