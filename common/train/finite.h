/* finite.h - stop training at the first step whose loss or gradient is not a
 * finite number.
 *
 * A learning rate far too large (or a bug) makes the weights blow up; once a
 * NaN or an infinity is in a gradient, one Adam step spreads it to every
 * weight, the rest of the run is wasted and its checkpoint would be garbage.
 * The training drivers (seq2seq.c, classifier.c, chapter 06's GPT) call
 * grads_check_finite after each backward pass and BEFORE clipping and the
 * optimizer step, so the parameters still hold the last good step's values;
 * on -1 they stop with one line naming the step and the tensor
 * ("training diverged at step 12: the gradient of 'enc.W_x' (tensor 3 of 9)
 * is nan at element 40 (loss 7.1); ..."), exit non-zero, and write no
 * checkpoint, so the last good one stays as it was. */
#ifndef FINITE_H
#define FINITE_H
#include "nn/params.h"

/* 0 when loss and every gradient in p->grad are finite. Otherwise -1 with
 * fail() naming the first tensor of the Params table (declaration order)
 * whose gradient holds a NaN or an infinity, the element and its value, and
 * the loss; or, with every gradient finite, saying the loss is not. The
 * caller adds the step. */
int grads_check_finite(const Params *p, double loss);

#endif
