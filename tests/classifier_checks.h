/* classifier_checks.h - what the tests of chapter 07's baselines behind the
 * Classifier face (model/classifier.h) share: pixel_mlp.h's MLP and cnn.h's
 * CNN (test_pixel_mlp.c, test_cnn.c). Static functions, as layer_checks.h
 * (only cmocka test programs include it). */
#ifndef CLASSIFIER_CHECKS_H
#define CLASSIFIER_CHECKS_H
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "model/classifier.h"
#include "nn/optim.h"

/* Backward accumulates: after one forward of e, a second backward call adds
 * the same gradient again (within tol of twice the first). */
static inline void expect_backward_accumulates(Classifier *m, const Examples *e, float tol) {
    float *once = malloc(sizeof(float) * m->params->size);
    params_zero_grad(m->params);
    m->forward(m->self, e);
    m->backward(m->self, e);
    memcpy(once, m->params->grad, sizeof(float) * m->params->size);
    m->backward(m->self, e);
    for (size_t i = 0; i < m->params->size; i++) assert_float_equal(m->params->grad[i], 2.0f * once[i], tol);
    free(once);
}

/* steps AdamW steps (lr 1e-2, no decay) on the one batch e bring its loss
 * below a tenth of the first. */
static inline void expect_fits_a_batch(Classifier *m, const Examples *e, int steps) {
    Adam opt;
    assert_int_equal(adam_init(&opt, m->params, 1e-2f, 0.0f), 0);
    double first = 0.0, last = 0.0;
    for (int step = 0; step < steps; step++) {
        params_zero_grad(m->params);
        last = m->forward(m->self, e);
        if (step == 0) first = last;
        m->backward(m->self, e);
        adam_step(&opt, m->params, 1e-2f);
    }
    assert_true(last < 0.1 * first);
    adam_free(&opt);
}
#endif
