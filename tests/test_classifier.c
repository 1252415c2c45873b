/* test_classifier.c - the driver of the per-position models
 * (common/train/classifier.h):
 *  - classifier_train_step is zero grad, forward, backward, clip, Adam: the
 *    same parameters as those calls made by hand;
 *  - classifier_evaluate counts exact matches and per-output accuracy right,
 *    on oracle models that are always right, or wrong at one position;
 *  - classifier_train on chapter 04's model learns the reverse task and
 *    fills the loss curve. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "04_self_attention/digit_model.h"
#include "data/digit_tasks.h"
#include "train/classifier.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

enum { N = 6, B = 16 };

static int build_small(Classifier *c, DigitTask task, uint64_t seed) {
    DigitModelSizes s = {N, 16, 32, 1, digit_task_classes(task, N), POS_LEARNED, 0};
    char config[CLASSIFIER_CONFIG_MAX];
    digit_model_config_text(config, sizeof config, DIGIT_MODEL_NAME, digit_task_name(task), &s, "", 1);
    return digit_model_build(c, config, B, seed);
}

static void test_train_step_is_the_textbook_step(void **state) {
    (void)state;
    Classifier a, b;
    assert_int_equal(build_small(&a, TASK_REVERSE, 5), 0);
    assert_int_equal(build_small(&b, TASK_REVERSE, 5), 0);
    DigitTaskSpec spec = {TASK_REVERSE, N};
    ExampleTask t;
    digit_example_task(&t, &spec);
    Examples e;
    examples_alloc(&e, B, N, N, 0);
    Rng r;
    rng_seed(&r, 2, 1);
    Adam oa, ob;
    assert_int_equal(adam_init(&oa, a.params, 1e-2f, 0.0f), 0);
    assert_int_equal(adam_init(&ob, b.params, 1e-2f, 0.0f), 0);
    for (int step = 0; step < 3; step++) {
        t.train_batch(t.self, &e, B, &r);
        double la = classifier_train_step(&a, &oa, &e, 0.5f, 1e-2f);
        params_zero_grad(b.params);
        double lb = b.forward(b.self, &e);
        b.backward(b.self, &e);
        clip_grad_norm(b.params, 0.5f);
        adam_step(&ob, b.params, 1e-2f);
        assert_true(la == lb);
        assert_memory_equal(a.params->data, b.params->data, sizeof(float) * a.params->size);
    }
    adam_free(&oa);
    adam_free(&ob);
    examples_free(&e);
    a.destroy(a.self);
    b.destroy(b.self);
}

/* An oracle for the reverse task: right everywhere, except (when wrong_at
 * >= 0) at one position. It looks at the tokens of the last forward. */
typedef struct {
    int wrong_at;
    int B, tokens[64 * N];
} Oracle;

static double oracle_forward(void *self, const Examples *e) {
    Oracle *o = self;
    o->B = e->B;
    memcpy(o->tokens, e->tokens, sizeof(int) * (size_t)e->B * N);
    return 0.0;
}

static void oracle_predict(void *self, int *pred) {
    Oracle *o = self;
    for (int b = 0; b < o->B; b++) {
        digit_task_targets(TASK_REVERSE, o->tokens + b * N, pred + b * N, N);
        if (o->wrong_at >= 0) pred[b * N + o->wrong_at] = (pred[b * N + o->wrong_at] + 1) % 10;
    }
}

static void test_evaluate_counts(void **state) {
    (void)state;
    DigitTaskSpec spec = {TASK_REVERSE, N};
    ExampleTask t;
    digit_example_task(&t, &spec);
    for (int wrong_at = -1; wrong_at < N; wrong_at += N) {   /* -1: always right; N-1: one wrong */
        Oracle o = {wrong_at, 0, {0}};
        Classifier c;
        memset(&c, 0, sizeof c);
        c.self = &o;
        c.max_B = 64;
        c.n_out = N;
        c.classes = 10;
        c.forward = oracle_forward;
        c.predict = oracle_predict;
        double exact, token_acc;
        classifier_evaluate(&c, &t, 150, 7, &exact, &token_acc);   /* 150: a last, partial batch */
        if (wrong_at < 0) {
            assert_true(exact == 1.0 && token_acc == 1.0);
        } else {
            assert_true(exact == 0.0);
            assert_true(fabs(token_acc - (double)(N - 1) / N) < 1e-12);
        }
    }
}

static void test_train_learns_reverse(void **state) {
    (void)state;
    Classifier c;
    assert_int_equal(build_small(&c, TASK_REVERSE, 3), 0);
    DigitTaskSpec spec = {TASK_REVERSE, N};
    ExampleTask t;
    digit_example_task(&t, &spec);
    ClassifierResult r;
    memset(&r, 0, sizeof r);
    assert_int_equal(classifier_train(&c, &t, 300, B, 1e-2f, 0.0f, 1, 1, &r), 0);
    assert_int_equal(r.n_curve, CURVE_POINTS);
    assert_true(r.curve_step[CURVE_POINTS - 1] == 300.0f);
    assert_true(r.curve[CURVE_POINTS - 1] < 0.5f * r.curve[0]);
    assert_true(r.solved_step > 0);
    double exact, token_acc;
    classifier_evaluate(&c, &t, 200, 1, &exact, &token_acc);
    assert_true(token_acc > 0.9);
    c.destroy(c.self);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_step_is_the_textbook_step),
        cmocka_unit_test(test_evaluate_counts),
        cmocka_unit_test(test_train_learns_reverse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
