/* layer_checks.c - the layer tests' shared fills and checks (see
 * layer_checks.h). */
#include "layer_checks.h"

#include <math.h>
#include <stdlib.h>

#include <stdarg.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

void fill_uniform(float *x, size_t n, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
}

float *zeroed_floats(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
}

void expect_gradient(GradCheckResult res, double tol, const char *what) {
    if (!(res.max_rel_err < tol) || res.n_checked == 0)
        fail_msg("%s: max_rel_err %.3g at index %zu (numeric %.6g, analytic %.6g), %zu checked", what,
                 res.max_rel_err, res.worst_index, res.worst_numeric, res.worst_analytic, res.n_checked);
}

void expect_close(const float *got, const float *want, size_t n, float tol, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= tol * (1.0f + fabsf(want[i]))))
            fail_msg("%s: entry %zu is %.8g, expected %.8g", what, i, got[i], want[i]);
}
