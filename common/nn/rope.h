/* rope.h - rotary position embeddings (RoPE, Su et al. 2021, "RoFormer"):
 * positions put into attention itself instead of added to the input.
 *
 * The query and the key of position t are rotated by an angle that grows
 * with t. Within each head, the D_H numbers form D_H / 2 pairs, and pair i
 * (entries 2i and 2i+1) turns in its plane by the angle t theta_i:
 *
 *   theta_i = ROPE_BASE^(-2i / D_H)        i = 0 .. D_H/2 - 1
 *   q'_{2i}   = q_{2i} cos(t theta_i) - q_{2i+1} sin(t theta_i)
 *   q'_{2i+1} = q_{2i} sin(t theta_i) + q_{2i+1} cos(t theta_i)
 *
 * (the same for k). A rotation keeps lengths and turns both vectors of a
 * pair by their own angles, so the score of query position t and key
 * position s, q'_t . k'_s, depends on their positions only through t - s:
 * the attention sees RELATIVE positions, and nothing is added to X. The
 * pairs turn at geometrically spaced speeds, from one radian per position
 * (i = 0) to almost none, like the sinusoids of chapter 04.
 *
 * The rotation has no parameters. Its backward is the transposed rotation,
 * the angle -t theta_i, applied to dq' (and dk'). Both work in place on rows
 * of H heads of D_H numbers, as the columns of Q (or K) inside [Q|K|V]. */
#ifndef ROPE_H
#define ROPE_H

/* theta_i = ROPE_BASE^(-2i / D_H), as in the paper and LLaMA */
#define ROPE_BASE 10000.0

/* X [N, H D_H] (row stride ld), row n at position pos0 + n; D_H even:
 * every head's pairs rotated by (pos0 + n) theta_i, in place. */
void rope_forward(float *X, int ld, int N, int H, int D_H, int pos0);

/* dX [N, H D_H] (row stride ld), the gradient of forward's output -> the
 * gradient of its input, in place: each pair rotated back by -(pos0 + n) theta_i. */
void rope_backward(float *dX, int ld, int N, int H, int D_H, int pos0);

#endif
