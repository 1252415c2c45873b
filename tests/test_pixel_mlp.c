/* test_pixel_mlp.c - chapter 07's baseline without attention, the MLP on
 * the pixels (pixel_mlp.h), through its Classifier face:
 *  - the gradient of every parameter against central finite differences,
 *    with one and with three hidden layers (eps = 3e-3, max_rel_err < 3e-2, as
 *    the ViT's model checks in test_vit.c);
 *  - backward accumulates: two backward calls after one forward give twice
 *    the gradient of one;
 *  - its loss is the mean cross-entropy of its logits, written out here from
 *    the definition, and predict takes each row's largest logit;
 *  - the config's checkpoint lines round trip, and bad shapes are refused
 *    with one clear message;
 *  - a few AdamW steps fit a fixed batch (the loss falls). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "07_vision_transformer/pixel_mlp.h"
#include "nn/gradcheck.h"
#include "util/rng.h"

#include "classifier_checks.h"

enum { B = 3, PIXELS = 12, CLASSES = 4 };

typedef struct {
    Classifier *m;
    Examples e;
} Ctx;

static double loss(void *p) {
    Ctx *c = p;
    return c->m->forward(c->m->self, &c->e);
}

static void fill(float *x, size_t n, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
}

static void check_gradients(int layers) {
    PixelMlpConfig cfg = {.inputs = PIXELS, .hidden = 5, .layers = layers, .classes = CLASSES};
    Classifier m;
    assert_int_equal(pixel_mlp_build(&m, &cfg, B, 3), 0);
    Rng r;
    rng_seed(&r, 17, 0);
    fill(m.params->data, m.params->size, 0.7f, &r);   /* biases away from 0 too */
    float pixels[B * PIXELS];
    fill(pixels, B * PIXELS, 1.0f, &r);
    int targets[B] = {0, 3, 1};
    Ctx c = {&m, {.B = B, .values = pixels, .targets = targets}};
    params_zero_grad(m.params);
    loss(&c);
    m.backward(m.self, &c.e);
    GradCheckResult res = gradcheck(loss, &c, m.params->data, m.params->grad, m.params->size, 3e-3f, 1000);
    if (!(res.max_rel_err < 3e-2))
        fail_msg("MLP with %d hidden layers: max_rel_err %.3g at %zu (numeric %.6g, analytic %.6g)", layers,
                 res.max_rel_err, res.worst_index, res.worst_numeric, res.worst_analytic);
    assert_int_equal(res.n_checked, m.params->size);

    expect_backward_accumulates(&m, &c.e, 1e-6f);
    m.destroy(m.self);
}

static void test_gradients(void **state) {
    (void)state;
    check_gradients(1);
    check_gradients(3);
}

static void test_loss_and_predict(void **state) {
    (void)state;
    PixelMlpConfig cfg = {.inputs = PIXELS, .hidden = 6, .layers = 2, .classes = CLASSES};
    Classifier m;
    assert_int_equal(pixel_mlp_build(&m, &cfg, B, 9), 0);
    Rng r;
    rng_seed(&r, 5, 0);
    float pixels[B * PIXELS];
    fill(pixels, B * PIXELS, 1.0f, &r);
    int targets[B] = {2, 0, 1}, pred[B];
    Examples e = {.B = B, .values = pixels, .targets = targets};
    double got = m.forward(m.self, &e), want = 0.0;
    const float *z = m.logits(m.self);
    m.predict(m.self, pred);
    for (int b = 0; b < B; b++) {
        double mx = z[b * CLASSES], sum = 0.0;
        int best = 0;
        for (int k = 1; k < CLASSES; k++)
            if (z[b * CLASSES + k] > mx) {
                mx = z[b * CLASSES + k];
                best = k;
            }
        for (int k = 0; k < CLASSES; k++) sum += exp(z[b * CLASSES + k] - mx);
        want += -(z[b * CLASSES + targets[b]] - mx - log(sum)) / B;
        assert_int_equal(pred[b], best);
    }
    assert_true(fabs(got - want) < 1e-5);
    /* without targets: the logits, and a loss of 0 */
    Examples no_targets = {.B = B, .values = pixels};
    assert_true(m.forward(m.self, &no_targets) == 0.0);
    m.destroy(m.self);
}

static void test_config_and_errors(void **state) {
    (void)state;
    PixelMlpConfig cfg = {.inputs = 784, .hidden = 80, .layers = 2, .classes = 10}, back;
    char text[256] = "";
    assert_true(config_write(text, sizeof text, PIXEL_MLP_CONFIG_FIELDS, PIXEL_MLP_CONFIG_N, &cfg) >= 0);
    memset(&back, 0, sizeof back);
    assert_int_equal(config_read(text, PIXEL_MLP_CONFIG_FIELDS, PIXEL_MLP_CONFIG_N, &back), 0);
    assert_memory_equal(&cfg, &back, sizeof cfg);
    Classifier m;
    PixelMlpConfig bad = cfg;
    bad.layers = PIXEL_MLP_MAX_LAYERS + 1;
    assert_int_equal(pixel_mlp_build(&m, &bad, 4, 1), -1);
    bad = cfg;
    bad.hidden = 0;
    assert_int_equal(pixel_mlp_build(&m, &bad, 4, 1), -1);
    bad = cfg;
    bad.classes = 1;
    assert_int_equal(pixel_mlp_build(&m, &bad, 4, 1), -1);
    assert_int_equal(pixel_mlp_build(&m, &cfg, 0, 1), -1);
}

static void test_fits_a_batch(void **state) {
    (void)state;
    PixelMlpConfig cfg = {.inputs = PIXELS, .hidden = 16, .layers = 2, .classes = CLASSES};
    Classifier m;
    assert_int_equal(pixel_mlp_build(&m, &cfg, B, 2), 0);
    Rng r;
    rng_seed(&r, 8, 0);
    float pixels[B * PIXELS];
    fill(pixels, B * PIXELS, 1.0f, &r);
    int targets[B] = {1, 2, 3};
    Examples e = {.B = B, .values = pixels, .targets = targets};
    expect_fits_a_batch(&m, &e, 60);
    m.destroy(m.self);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_loss_and_predict),
        cmocka_unit_test(test_config_and_errors),
        cmocka_unit_test(test_fits_a_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
