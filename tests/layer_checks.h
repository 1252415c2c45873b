/* layer_checks.h - what the attention layer tests (test_self_attention.c,
 * test_multi_head.c, test_locality.c) share: random inputs, zeroed buffers,
 * and the two ways a layer is held to the truth, its gradients against
 * finite differences (nn/gradcheck.h) and its outputs against the same
 * numbers computed another way. Each check fails the cmocka test with one
 * line naming what differs. Written here as static functions: only cmocka
 * test programs include it (the graders link the tests' other support
 * files without cmocka). */
#ifndef LAYER_CHECKS_H
#define LAYER_CHECKS_H
#include <math.h>
#include <stdlib.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "nn/gradcheck.h"
#include "util/rng.h"

/* x[i] uniform in [-scale, scale), i < n. */
static inline void fill_uniform(float *x, size_t n, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
}

/* n zeroed floats (at least one), freed with free(). */
static inline float *zeroed_floats(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
}

/* Fails unless the largest relative error is below tol and something was checked. */
static inline void expect_gradient(GradCheckResult res, double tol, const char *what) {
    if (!(res.max_rel_err < tol) || res.n_checked == 0)
        fail_msg("%s: max_rel_err %.3g at index %zu (numeric %.6g, analytic %.6g), %zu checked", what,
                 res.max_rel_err, res.worst_index, res.worst_numeric, res.worst_analytic, res.n_checked);
}

/* Fails unless |got[i] - want[i]| <= tol (1 + |want[i]|) for every i < n. */
static inline void expect_close(const float *got, const float *want, size_t n, float tol, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= tol * (1.0f + fabsf(want[i]))))
            fail_msg("%s: entry %zu is %.8g, expected %.8g", what, i, got[i], want[i]);
}
#endif
