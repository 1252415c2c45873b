/* gradcheck.c - compare an analytic gradient with central finite differences
 * (see gradcheck.h).
 *
 * For each checked entry x_i:
 *   numeric_i = (L(x_i + eps) - L(x_i - eps)) / (2 eps)
 * whose error is O(eps^2) from the Taylor series, plus the rounding noise of
 * L divided by 2 eps. Since x is float, x_i + eps is rounded to a float; the
 * step actually taken, (x_i + eps) - (x_i - eps) as stored, is used as the
 * denominator so that this rounding does not count as a gradient error.
 *
 * The comparison (gradcheck.h): all numeric values are taken first, for the
 * tensor's scale; then each entry's error, less the rounding noise its two
 * loss values can carry, is divided by
 * max(|numeric| + |analytic|, GRADCHECK_FLOOR * min(1, scale)). */
#include "nn/gradcheck.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

GradCheckResult gradcheck(LossFn loss, void *ctx, float *x, const float *analytic,
                          size_t n, float eps, size_t max_checks) {
    GradCheckResult res = {0};
    if (max_checks == 0 || max_checks > n) max_checks = n;   /* 0 = check all */
    if (max_checks == 0) return res;
    double *numeric = malloc(sizeof(double) * max_checks), *noise = malloc(sizeof(double) * max_checks);
    size_t *index = malloc(sizeof(size_t) * max_checks);
    if (numeric == NULL || noise == NULL || index == NULL) abort();   /* a test tool: no user input here */

    /* 1. the central differences, their noise, and the tensor's scale */
    double scale = 0.0;
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
        const double step = (double)plus - (double)minus;
        index[k] = i;
        numeric[k] = (loss_plus - loss_minus) / step;
        noise[k] = GRADCHECK_NOISE * fmax(fabs(loss_plus), fabs(loss_minus)) / step;
        double size = fabs(numeric[k]) + fabs((double)analytic[i]);
        if (size > scale) scale = size;   /* (a NaN is never larger: it fails below) */
    }
    res.scale = scale;

    /* 2. each entry against the larger of its own size and the tensor's floor */
    const double floor = GRADCHECK_FLOOR * (scale < 1.0 ? scale : 1.0) + 1e-30;   /* (0 / 0 for exact zeros) */
    for (size_t k = 0; k < max_checks; k++) {
        size_t i = index[k];
        double ana = analytic[i];
        double abs_err = fabs(numeric[k] - ana);
        double denom = fabs(numeric[k]) + fabs(ana);
        if (denom < floor) denom = floor;
        double rel_err = fmax(0.0, abs_err - noise[k]) / denom;
        /* a NaN or an infinity anywhere must fail the check, not slip past the comparisons */
        if (!isfinite(numeric[k]) || !isfinite(ana) || !isfinite(noise[k])) rel_err = abs_err = INFINITY;

        if (abs_err > res.max_abs_err) res.max_abs_err = abs_err;
        if (noise[k] > res.noise) res.noise = noise[k];
        if (rel_err > res.max_rel_err || res.n_checked == 0) {
            if (rel_err > res.max_rel_err) res.max_rel_err = rel_err;
            res.worst_index = i;
            res.worst_numeric = numeric[k];
            res.worst_analytic = ana;
        }
        res.n_checked++;
    }
    free(numeric);
    free(noise);
    free(index);
    return res;
}
