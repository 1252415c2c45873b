/* moe.h - chapter 06: a mixture of experts in place of the block's MLP.
 *
 * Learn E different MLPs (the experts), use k < E of them per position:
 * the parameters grow E times, the work per position k times. A linear
 * router scores the experts for each position u (a row of U [R, D]):
 *
 *   p = softmax(u W_r)                     W_r [D, E], p [E]
 *   C = the k experts with the largest p   (ties: the lower index)
 *   g_e = p_e                  (renorm 0, the Switch Transformer's choice)
 *   g_e = p_e / sum_{c in C} p_c   (renorm 1, Mixtral's: the k weights sum to 1)
 *   MoE(u) = sum_{e in C} g_e MLP_e(u)
 *
 * With k = 1 and renorm 1 the weight is always 1 and the router would learn
 * from the balancing loss alone; Switch (k = 1) keeps g = p for that reason.
 *
 * Load balancing (Switch Transformer, Fedus et al. 2021), over the R rows:
 *   f_e = share of the R k choices that picked e     (counted, no gradient)
 *   P_e = (1/R) sum_r p_e(u_r)                       (differentiable)
 *   aux = E sum_e f_e P_e                            1 when perfectly balanced
 * The training objective adds alpha * aux (BlockMoe.aux is alpha): its
 * gradient, alpha E f_e / R on each p_e(u_r), pushes probability away from
 * the experts that take more than their share.
 *
 * Capacity (training only): each expert takes at most ceil(c R k / E) of the
 * pairs (position, choice), first choices before second ones, positions in
 * order; a pair over it is dropped (contributes 0: the residual connection
 * carries the position on). At evaluation and in generation every pair is
 * kept, so a position's output never depends on the other positions in the
 * batch (and generation with the KV cache equals generation without it).
 *
 * Forward gathers each expert's rows into one block (Ug), runs the expert
 * (mlp.h's mlp_forward) on them, and scatters g * output back;
 * backward walks the same steps in reverse. An expert that got no rows does
 * no work and gets no gradient. */
#ifndef MOE_H
#define MOE_H
#include <stddef.h>
#include "06_transformer/block.h"

/* Returns 0, or -1 with fail() for a mixture the layer cannot run. */
int moe_spec_check(const BlockSpec *s);

/* W_r | expert 0 | .. | expert E-1, and expert e's views into base. */
size_t moe_param_count(const BlockSpec *s);
BlockWeights moe_expert(const BlockSpec *s, float *experts, int e);
/* W_r Xavier-uniform, then each expert as block_init's MLP. */
void moe_init(const BlockSpec *s, const BlockWeights *w, Rng *rng);

/* The cache for up to R rows from base (or only the count, base NULL). */
size_t moe_cache_layout(const BlockSpec *s, int R, float *base, BlockMoeCache *c);
/* Floats of backward's scratch for up to R rows. */
size_t moe_scratch_floats(const BlockSpec *s, int R);

/* U [R, D] -> out [R, D] (written), c (written; laid out for >= R rows).
 * train 1: the capacity limit applies. */
void moe_forward(float *out, const BlockMoeCache *c, const float *U, const BlockSpec *s, const BlockWeights *w,
                 int R, int train);
/* dout [R, D] -> dU [R, D] +=, dw->W_r and each expert's tensors += (dU and
 * dw's pointers may be NULL); the gradient of alpha * aux is added too.
 * scratch: moe_scratch_floats(s, R). */
void moe_backward(float *dU, BlockWeights *dw, float *scratch, const float *dout, const BlockMoeCache *c,
                  const float *U, const BlockSpec *s, const BlockWeights *w, int R);

#endif
