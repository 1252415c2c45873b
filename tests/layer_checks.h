/* layer_checks.h - what the attention layer tests (test_self_attention.c,
 * test_multi_head.c, test_locality.c) share: random inputs, zeroed buffers,
 * and the two ways a layer is held to the truth, its gradients against
 * finite differences (nn/gradcheck.h) and its outputs against the same
 * numbers computed another way. Each check fails the cmocka test with one
 * line naming what differs. */
#ifndef LAYER_CHECKS_H
#define LAYER_CHECKS_H
#include <stddef.h>
#include "nn/gradcheck.h"
#include "util/rng.h"

/* x[i] uniform in [-scale, scale), i < n. */
void fill_uniform(float *x, size_t n, float scale, Rng *r);
/* n zeroed floats (at least one), freed with free(). */
float *zeroed_floats(size_t n);
/* Fails unless the largest relative error is below tol and something was checked. */
void expect_gradient(GradCheckResult res, double tol, const char *what);
/* Fails unless |got[i] - want[i]| <= tol (1 + |want[i]|) for every i < n. */
void expect_close(const float *got, const float *want, size_t n, float tol, const char *what);
#endif
