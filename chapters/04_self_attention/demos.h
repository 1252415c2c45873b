/* demos.h - chapter 04's demonstrations besides training. */
#ifndef SELF_ATTENTION_DEMOS_H
#define SELF_ATTENTION_DEMOS_H
#include <stdint.h>

/* Prints Y(sigma X) beside sigma Y(X) for one random self-attention layer,
 * without and with sinusoidal positions: equal without, not with. */
void equivariance_demo(uint64_t seed);

/* Heatmaps of the sinusoidal encodings P [64, D] and of their dot products
 * P_s . P_t, written to out/pos_encoding and out/pos_dot_products.
 * Returns 0 or -1 with fail(). */
int plot_sinusoids(const char *out, int D);

#endif
