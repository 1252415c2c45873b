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
#include <stddef.h>

typedef double (*LossFn)(void *ctx);

typedef struct {
    double max_abs_err;   /* max |numeric - analytic| */
    double max_rel_err;   /* max |num - ana| / max(|num| + |ana|, floor) */
    size_t worst_index;   /* entry with the largest relative error */
    double worst_numeric, worst_analytic;
    size_t n_checked;
} GradCheckResult;

/* Checks up to max_checks entries of x (all of them when n <= max_checks,
 * otherwise an evenly spread subset). x is restored afterwards.
 * eps: step (1e-3 is a good float32 default when the loss is computed in double). */
GradCheckResult gradcheck(LossFn loss, void *ctx, float *x, const float *analytic,
                          size_t n, float eps, size_t max_checks);

/* Relative error floor used above: differences smaller than this in absolute
 * terms are not blown up by tiny denominators. */
#define GRADCHECK_FLOOR 1e-2

#endif
