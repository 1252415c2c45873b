/* test_cnn.c - chapter 07's convolutional baseline (cnn.h), through its
 * Classifier face:
 *  - the gradient of every parameter against central finite differences
 *    (within 3e-2, as the ViT's model checks in test_vit.c), on one and on
 *    two input channels, skipping the few entries whose step crosses a kink
 *    of ReLU or max-pool (the estimates at two step sizes disagree there);
 *  - backward accumulates: two backward calls after one forward give twice
 *    the gradient of one;
 *  - the shapes: conv1.W [F, channels, 3, 3], conv2.W [2F, F, 3, 3], the head
 *    over the 2F (rows/4) (cols/4) pooled features;
 *  - the config's checkpoint lines round trip, and bad shapes are refused
 *    with one clear message;
 *  - a few AdamW steps fit a fixed batch (the loss falls). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "07_vision_transformer/cnn.h"
#include "util/rng.h"

#include "classifier_checks.h"

enum { B = 3, SIDE = 8, CLASSES = 4 };

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

static void check_gradients(int channels, int filters) {
    CnnConfig cfg = {.channels = channels, .rows = SIDE, .cols = SIDE + 4, .filters = filters, .classes = CLASSES};
    Classifier m;
    assert_int_equal(cnn_build(&m, &cfg, B, 3), 0);
    /* conv1.W, conv1.b, conv2.W, conv2.b, out.W over 2F x 2 x 3 pooled values, out.b */
    const size_t F = (size_t)filters, want = F * channels * 9 + F + 2 * F * F * 9 + 2 * F +
                                             2 * F * (SIDE / 4) * ((SIDE + 4) / 4) * CLASSES + CLASSES;
    assert_int_equal(m.params->size, want);
    Rng r;
    rng_seed(&r, 17, 0);
    fill(m.params->data, m.params->size, 0.7f, &r);   /* biases away from 0 too */
    float pixels[B * 2 * SIDE * (SIDE + 4)];   /* up to 2 channels */
    assert_true(channels <= 2);
    fill(pixels, (size_t)B * channels * SIDE * (SIDE + 4), 1.0f, &r);
    int targets[B] = {0, 3, 1};
    Ctx c = {&m, {.B = B, .values = pixels, .targets = targets}};
    params_zero_grad(m.params);
    loss(&c);
    m.backward(m.self, &c.e);
    /* Central differences at two steps, eps and eps / 2: ReLU and max-pool are not differentiable where an
     * input crosses 0 or two pixels of a window swap, and where the two estimates disagree such a kink lies
     * within eps of the point: that entry is skipped (counted; at most 1 in 10). Elsewhere the estimate
     * must match the analytic gradient. */
    const float eps = 1e-3f;   /* float rounding of the loss: about 2e-4 in the estimate, below the 1e-3 floor */
    size_t skipped = 0;
    for (size_t i = 0; i < m.params->size; i++) {
        float *w = &m.params->data[i];
        const float w0 = *w;
        double f[4];
        const float steps[4] = {eps, -eps, eps / 2, -eps / 2};
        for (int k = 0; k < 4; k++) {
            *w = w0 + steps[k];
            f[k] = loss(&c);
        }
        *w = w0;
        const double wide = (f[0] - f[1]) / (2.0 * eps), narrow = (f[2] - f[3]) / (double)eps;
        const double scale = fmax(fmax(fabs(wide), fabs(narrow)), 1e-3);
        if (fabs(wide - narrow) > 0.01 * scale) {
            skipped++;
            continue;
        }
        const double analytic = m.params->grad[i];
        if (fabs(analytic - narrow) > 3e-2 * fmax(fabs(analytic), fabs(narrow)) + 1e-3)
            fail_msg("CNN, %d channels, %d filters: parameter %zu: numeric %.6g, analytic %.6g", channels, filters, i,
                     narrow, analytic);
    }
    if (getenv("CNN_TEST_VERBOSE")) printf("CNN, %d channels, %d filters: %zu of %zu skipped\n", channels, filters, skipped, m.params->size);
    if (skipped * 10 > m.params->size)
        fail_msg("CNN, %d channels, %d filters: %zu of %zu entries near a kink", channels, filters, skipped,
                 m.params->size);

    expect_backward_accumulates(&m, &c.e, 1e-5f);
    m.destroy(m.self);
}

static void test_gradients(void **state) {
    (void)state;
    check_gradients(1, 2);
    check_gradients(2, 3);
}

static void refused(const CnnConfig *c, int max_B, const char *message) {
    Classifier m;
    assert_int_equal(cnn_build(&m, c, max_B, 1), -1);
    if (!strstr(last_error(), message)) fail_msg("expected '%s' in: %s", message, last_error());
}

static void test_config_and_errors(void **state) {
    (void)state;
    CnnConfig cfg = {.channels = 1, .rows = 28, .cols = 28, .filters = 16, .classes = 10}, back;
    char text[256] = "";
    assert_true(config_write(text, sizeof text, CNN_CONFIG_FIELDS, CNN_CONFIG_N, &cfg) >= 0);
    assert_string_equal(text, "channels=1\nrows=28\ncols=28\nfilters=16\nclasses=10\n");
    memset(&back, 0, sizeof back);
    assert_int_equal(config_read(text, CNN_CONFIG_FIELDS, CNN_CONFIG_N, &back), 0);
    assert_memory_equal(&cfg, &back, sizeof cfg);
    CnnConfig bad = cfg;
    bad.rows = 30;
    refused(&bad, 4, "rows=30 cols=28: expected sides divisible by 4");
    bad = cfg;
    bad.filters = 0;
    refused(&bad, 4, "filters=0");
    bad = cfg;
    bad.classes = 1;
    refused(&bad, 4, "classes=1");
    refused(&cfg, 0, "batch 0");
}

static void test_fits_a_batch(void **state) {
    (void)state;
    CnnConfig cfg = {.channels = 1, .rows = SIDE, .cols = SIDE, .filters = 4, .classes = CLASSES};
    Classifier m;
    assert_int_equal(cnn_build(&m, &cfg, B, 2), 0);
    Rng r;
    rng_seed(&r, 8, 0);
    float pixels[B * SIDE * SIDE];
    fill(pixels, B * SIDE * SIDE, 1.0f, &r);
    int targets[B] = {1, 2, 3};
    Examples e = {.B = B, .values = pixels, .targets = targets};
    expect_fits_a_batch(&m, &e, 80);
    m.destroy(m.self);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_config_and_errors),
        cmocka_unit_test(test_fits_a_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
