/* gradcheck.c - compare an analytic gradient with central finite differences
 * (see gradcheck.h).
 *
 * For each checked entry x_i:
 *   numeric_i = (L(x_i + eps) - L(x_i - eps)) / (2 eps)
 * whose error is O(eps^2) from the Taylor series, plus the rounding noise of
 * L divided by 2 eps. Since x is float, x_i + eps is rounded to a float; the
 * step actually taken, (x_i + eps) - (x_i - eps) as stored, is used as the
 * denominator so that this rounding does not count as a gradient error. */
#include "nn/gradcheck.h"

#include <math.h>

GradCheckResult gradcheck(LossFn loss, void *ctx, float *x, const float *analytic,
                          size_t n, float eps, size_t max_checks) {
    GradCheckResult res = {0};
    if (max_checks == 0 || max_checks > n) max_checks = n;   /* 0 = check all */
    for (size_t k = 0; k < max_checks; k++) {
        /* evenly spread: k * n / max_checks covers the whole array */
        size_t i = (max_checks == n) ? k : (size_t)((double)k * (double)n / (double)max_checks);
        float original = x[i];
        float plus = original + eps, minus = original - eps;
        x[i] = plus;
        double loss_plus = loss(ctx);
        x[i] = minus;
        double loss_minus = loss(ctx);
        x[i] = original;

        double numeric = (loss_plus - loss_minus) / ((double)plus - (double)minus);
        double ana = analytic[i];
        double abs_err = fabs(numeric - ana);
        double denom = fabs(numeric) + fabs(ana);
        if (denom < GRADCHECK_FLOOR) denom = GRADCHECK_FLOOR;
        double rel_err = abs_err / denom;
        /* a NaN anywhere must fail the check, not slip past the comparisons */
        if (isnan(numeric) || isnan(ana)) rel_err = abs_err = INFINITY;

        if (abs_err > res.max_abs_err) res.max_abs_err = abs_err;
        if (rel_err > res.max_rel_err || res.n_checked == 0) {
            if (rel_err > res.max_rel_err) res.max_rel_err = rel_err;
            res.worst_index = i;
            res.worst_numeric = numeric;
            res.worst_analytic = ana;
        }
        res.n_checked++;
    }
    return res;
}
