/* gradcheck.h - a finite-difference gradient checker for any layer or model.
 *
 * You give it a function that computes a scalar loss from the current values
 * of some float array x (for example a layer's input, or a whole Params
 * buffer), and the analytic gradient dL/dx your backward pass computed.
 * It perturbs entries of x by +-eps, evaluates the loss in between (central
 * difference (L(x+eps) - L(x-eps)) / 2 eps), and compares.
 *
 * A good loss for checking a layer is L = sum_i w_i * out_i with fixed random
 * w_i: then dL/dout = w is the upstream gradient you feed to backward. */
#ifndef GRADCHECK_H
#define GRADCHECK_H
#include <float.h>
#include <stddef.h>

typedef double (*LossFn)(void *ctx);

typedef struct {
    double max_abs_err;   /* max |numeric - analytic| */
    double max_rel_err;   /* max (|num - ana| - noise) / max(|num| + |ana|, floor): see below */
    size_t worst_index;   /* entry with the largest relative error */
    double worst_numeric, worst_analytic;
    size_t n_checked;
    double scale;         /* the tensor's scale: max |num| + |ana| over the checked entries */
    double noise;         /* the largest rounding noise of a numeric value (below) */
} GradCheckResult;

/* Checks up to max_checks entries of x (all of them when n <= max_checks,
 * otherwise an evenly spread subset). x is restored afterwards.
 * eps: step (1e-3 is a good float32 default when the loss is computed in double). */
GradCheckResult gradcheck(LossFn loss, void *ctx, float *x, const float *analytic,
                          size_t n, float eps, size_t max_checks);

/* How an entry is judged: relative to its own size and the tensor's scale,
 * after the noise a finite difference cannot avoid.
 *   rel_err = max(0, |num - ana| - noise) / max(|num| + |ana|, floor)
 *   floor   = GRADCHECK_FLOOR * min(1, scale)
 *   noise   = GRADCHECK_NOISE * max(|L(x + eps)|, |L(x - eps)|) / (2 eps)
 * The floor keeps an entry whose gradient is tiny next to the tensor's largest
 * from being blown up by a tiny denominator; and it shrinks with the tensor,
 * so a small parameter whose gradients are all about 1e-4 is checked at its
 * own scale. With the fixed floor of 1e-2 it replaces, such a tensor passed
 * any error under 1e-4: a 50% error in every entry (test_layers.c,
 * test_gradcheck_sees_a_small_error_in_a_small_parameter). For tensors of
 * scale 1 and above the floor is the old one.
 * The noise is what float32 rounding of the loss (one FLT_EPSILON of it in
 * each of the two values) does to their difference divided by the step: an
 * error below it is no evidence either way, whatever the tensor's scale. A
 * model's loss of about 2 computed in float, at eps 1e-2, puts it near 1e-5,
 * which is what a correct backward shows on gradients of 1e-4 (test_bahdanau,
 * test_attn_seq2seq); a loss summed in double from float outputs puts it
 * lower. */
#define GRADCHECK_FLOOR 1e-2
#define GRADCHECK_NOISE FLT_EPSILON

#endif
