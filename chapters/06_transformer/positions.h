/* positions.h - chapter 06: where a transformer's positions come from.
 *
 * Chapter 04's encodings (PosType: sinusoidal or learned) are added to the
 * token embeddings, X_0 = E[x_t] + P[t]. Rotary positions (RoPE, Su et al.
 * 2021; common/nn/rope.h, rope_attention.h) add nothing to X_0: every
 * block's attention turns its queries and keys by angles that grow with the
 * position, so the scores depend on positions only through their
 * differences. The GPT and the encoder-decoder offer all three; their
 * checkpoints write the choice as pos=none|sinusoidal|learned|rope, in this
 * enum's order (chapter 04's first). */
#ifndef POSITIONS_H
#define POSITIONS_H
#include "04_self_attention/digit_model.h"

typedef enum {
    POSITIONS_NONE = POS_NONE,             /* chapter 04's: none */
    POSITIONS_SINUSOIDAL = POS_SINUSOIDAL, /* chapter 04's: fixed sinusoids added to X_0 */
    POSITIONS_LEARNED = POS_LEARNED,       /* chapter 04's: a learned table [N, D] added to X_0 */
    POSITIONS_ROPE = POS_N_TYPES,          /* rotary, inside every block's attention */
    POSITIONS_N
} Positions;

/* "none", "sinusoidal", "learned", "rope" (or "?") */
const char *positions_name(Positions p);
/* Name -> Positions; returns 0, or -1 with fail() listing the names. */
int positions_from_name(const char *name, Positions *p);
#endif
