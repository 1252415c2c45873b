/* test_classifier.c - the driver of the per-position models
 * (common/train/classifier.h) and chapter 07's recipe on top of it
 * (07_vision_transformer/recipe.h):
 *  - recipe_train_step of one model (no replicas, no sam) is
 *    zero grad, forward, backward, clip, Adam: the same parameters as those
 *    calls made by hand;
 *  - recipe_train_step over 2 and 3 replicas (3: slices
 *    of unequal size) gives the gradient and the update of the one-model
 *    step, step after step (the replicas get the trained parameters), for chapter
 *    04's model and chapter 07's ViT;
 *  - classifier_evaluate counts exact matches and per-output accuracy right,
 *    on oracle models that are always right, or wrong at one position, and
 *    classifier_confusion each (true, predicted) pair;
 *  - classifier_train (train_loop with the classifier's gradient) on
 *    chapter 04's model learns the reverse task and fills the loss curve;
 *  - recipe_train with a moving average of the weights trains the same
 *    weights, bit for bit, as recipe_train_step called by hand
 *    with the schedule, and the average is the recurrence over those steps;
 *  - recipe_train tells each replica each step before it is taken
 *    (set_progress, which chapter 07's patch dropout reads);
 *  - the sharpness-aware step (sam > 0) over 1 and 2 replicas leaves the
 *    gradient each slice has at its own w + rho g / |g|, summed by the
 *    slices' shares, not the plain one, and puts the weights back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "04_self_attention/digit_model.h"
#include "07_vision_transformer/recipe.h"
#include "07_vision_transformer/vit.h"
#include "data/digit_tasks.h"
#include "train/classifier.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

enum { N = 6, B = 16 };

static int build_small(Classifier *c, DigitTask task, uint64_t seed) {
    const DigitConfig cfg = {.N = N, .D = 16, .F = 32, .L = 1, .C = digit_task_classes(task, N), .pos = POS_LEARNED};
    return digit_model_build(c, &cfg, B, seed);
}

/* The loop's options of these tests: the chapters' schedule (warm-up over
 * steps / 20, the decay to 0.05 of lr, clip 1), a point of the loss curve
 * every steps / 50 (at least 1), no progress line. */
static TrainOptions options(int steps, float lr, float weight_decay) {
    TrainOptions o = TRAIN_DEFAULTS;
    o.steps = steps;
    o.lr = lr;
    o.weight_decay = weight_decay;
    o.warmup = steps / 20;
    o.eval_every = steps / 50 > 0 ? steps / 50 : 1;
    o.quiet = 1;
    return o;
}

/* t: the reverse task of length N; e: B of its training examples, drawn with seed */
static void reverse_batch(ExampleTask *t, Examples *e, uint64_t seed) {
    static DigitTaskSpec spec = {TASK_REVERSE, N};   /* static: the task points at it (t->self) */
    digit_example_task(t, &spec);
    examples_alloc(e, B, N, N, 0);
    Rng r;
    rng_seed(&r, seed, 1);
    t->train_batch(t->self, e, B, &r);
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
        double la = recipe_train_step(&a, 1, &oa, &e, 0.5f, 1e-2f, 0.0f);
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

/* Largest |a - b| / (1 + |b|) over n floats. */
static double max_diff(const float *a, const float *b, size_t n) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
        if (d > worst) worst = d;
    }
    return worst;
}

/* one trained by the one-model step, replicas[0..n-1] by the data-parallel
 * step, on the same batches: after each step the loss, the summed gradient
 * (left in params->grad) and the updated parameters agree up to float
 * rounding. The batches change the parameters, so a replica that kept stale
 * ones would show from the second step on. */
static void check_parallel_step(Classifier *one, Classifier *replicas, int n, Examples *batches, int n_batches) {
    Adam o1, on;
    assert_int_equal(adam_init(&o1, one->params, 1e-2f, 0.01f), 0);
    assert_int_equal(adam_init(&on, replicas[0].params, 1e-2f, 0.01f), 0);
    assert_int_equal(one->params->size, replicas[0].params->size);
    assert_memory_equal(one->params->data, replicas[0].params->data, sizeof(float) * one->params->size);
    for (int k = 0; k < n_batches; k++) {
        double l1 = recipe_train_step(one, 1, &o1, &batches[k], 0.0f, 1e-2f, 0.0f);
        double ln = recipe_train_step(replicas, n, &on, &batches[k], 0.0f, 1e-2f, 0.0f);
        if (!(fabs(l1 - ln) < 1e-5 * (1.0 + fabs(l1)))) fail_msg("%d replicas, step %d: loss %.9g, one model %.9g", n, k, ln, l1);
        double dg = max_diff(replicas[0].params->grad, one->params->grad, one->params->size);
        double dp = max_diff(replicas[0].params->data, one->params->data, one->params->size);
        if (dg > 1e-5 || dp > 1e-5) fail_msg("%d replicas, step %d: gradients differ by %g, parameters by %g", n, k, dg, dp);
    }
    adam_free(&o1);
    adam_free(&on);
}

static void test_parallel_step_is_the_one_model_step(void **state) {
    (void)state;
    DigitTaskSpec spec = {TASK_REVERSE, N};
    ExampleTask t;
    digit_example_task(&t, &spec);
    Examples batches[3];
    Rng r;
    rng_seed(&r, 4, 1);
    for (int k = 0; k < 3; k++) {
        examples_alloc(&batches[k], B, N, N, 0);
        t.train_batch(t.self, &batches[k], B, &r);
    }
    for (int n = 2; n <= 3; n++) {
        Classifier one, replicas[3];
        assert_int_equal(build_small(&one, TASK_REVERSE, 5), 0);
        for (int k = 0; k < n; k++) assert_int_equal(build_small(&replicas[k], TASK_REVERSE, 5 + (uint64_t)k), 0);
        memcpy(replicas[0].params->data, one.params->data, sizeof(float) * one.params->size);
        check_parallel_step(&one, replicas, n, batches, 3);
        one.destroy(one.self);
        for (int k = 0; k < n; k++) replicas[k].destroy(replicas[k].self);
    }
    for (int k = 0; k < 3; k++) examples_free(&batches[k]);
}

static void test_parallel_step_vit(void **state) {
    (void)state;
    enum { VB = 7 };   /* 7 images: slices of 3 and 4 */
    VitConfig cfg = {.patch = {.channels = 1, .rows = 8, .cols = 8, .P = 4, .D = 16}, .layers = 2, .heads = 2,
                     .ff = 24, .pool = VIT_POOL_CLS, .pos = VIT_POS_LEARNED, .classes = 3, .label_smoothing = 0.1f};
    Examples batches[2];
    Rng r;
    rng_seed(&r, 9, 1);
    for (int k = 0; k < 2; k++) {
        examples_alloc(&batches[k], VB, 64, 1, 1);
        batches[k].B = VB;
        for (int i = 0; i < VB * 64; i++) batches[k].values[i] = rng_uniform(&r);
        for (int b = 0; b < VB; b++) batches[k].targets[b] = b % 3;
    }
    Classifier one, replicas[2];
    assert_int_equal(vit_build(&one, &cfg, VB, 3), 0);
    assert_int_equal(vit_build(&replicas[0], &cfg, 4, 3), 0);
    assert_int_equal(vit_build(&replicas[1], &cfg, 4, 4), 0);
    check_parallel_step(&one, replicas, 2, batches, 2);
    one.destroy(one.self);
    replicas[0].destroy(replicas[0].self);
    replicas[1].destroy(replicas[1].self);
    for (int k = 0; k < 2; k++) examples_free(&batches[k]);
}

/* The sharpness-aware gradient of one slice s at the weights w of model c,
 * added times share into sum: the gradient g at w, then the plain gradient at
 * w + rho g / |g|; c's weights are put back to w. */
static void sam_gradient_by_hand(Classifier *c, const Examples *s, float rho, float share, float *sum) {
    Params *p = c->params;
    float *w = malloc(sizeof(float) * p->size);
    memcpy(w, p->data, sizeof(float) * p->size);
    params_zero_grad(p);
    c->forward(c->self, s);
    c->backward(c->self, s);
    double sq = 0.0;
    for (size_t i = 0; i < p->size; i++) sq += (double)p->grad[i] * p->grad[i];
    for (size_t i = 0; i < p->size; i++) p->data[i] += (float)(rho / sqrt(sq)) * p->grad[i];
    params_zero_grad(p);
    c->forward(c->self, s);
    c->backward(c->self, s);
    for (size_t i = 0; i < p->size; i++) sum[i] += share * p->grad[i];
    memcpy(p->data, w, sizeof(float) * p->size);
    free(w);
}

static void test_sam_step(void **state) {
    (void)state;
    const float rho = 0.05f;
    ExampleTask t;
    Examples e;
    reverse_batch(&t, &e, 6);
    for (int n = 1; n <= 2; n++) {
        Classifier ref, plain, replicas[2];
        assert_int_equal(build_small(&ref, TASK_REVERSE, 5), 0);
        assert_int_equal(build_small(&plain, TASK_REVERSE, 5), 0);
        for (int k = 0; k < n; k++) assert_int_equal(build_small(&replicas[k], TASK_REVERSE, 5), 0);
        const size_t P = ref.params->size;
        float *w = malloc(sizeof(float) * P), *want = calloc(P, sizeof(float));
        memcpy(w, ref.params->data, sizeof(float) * P);
        for (int k = 0; k < n; k++) {   /* slice k of n: the first and second half of the batch */
            Examples s = e;
            s.B = B / n;
            s.tokens += (size_t)k * (B / n) * N;
            s.targets += (size_t)k * (B / n) * N;
            sam_gradient_by_hand(&ref, &s, rho, 1.0f / n, want);
        }
        Adam opt, opt_plain;   /* lr 0: the update leaves the weights as they were */
        assert_int_equal(adam_init(&opt, replicas[0].params, 0.0f, 0.0f), 0);
        assert_int_equal(adam_init(&opt_plain, plain.params, 0.0f, 0.0f), 0);
        double loss = recipe_train_step(replicas, n, &opt, &e, 0.0f, 0.0f, rho);
        double plain_loss = recipe_train_step(&plain, 1, &opt_plain, &e, 0.0f, 0.0f, 0.0f);
        double d = max_diff(replicas[0].params->grad, want, P);
        if (d > 1e-5) fail_msg("%d replicas: the sharpness-aware gradient differs from the one by hand by %g", n, d);
        /* not the plain gradient: the climbed weights' gradient differs */
        d = max_diff(replicas[0].params->grad, plain.params->grad, P);
        if (!(d > 1e-4)) fail_msg("%d replicas: the sharpness-aware gradient is the plain one (%g apart)", n, d);
        /* the loss reported is the one at w, and w is back */
        if (!(fabs(loss - plain_loss) < 1e-5 * (1.0 + fabs(plain_loss))))
            fail_msg("%d replicas: loss %.9g, at the weights %.9g", n, loss, plain_loss);
        assert_memory_equal(replicas[0].params->data, w, sizeof(float) * P);
        adam_free(&opt);
        adam_free(&opt_plain);
        free(w);
        free(want);
        ref.destroy(ref.self);
        plain.destroy(plain.self);
        for (int k = 0; k < n; k++) replicas[k].destroy(replicas[k].self);
    }
    examples_free(&e);
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

/* A task of one class per example: example i of the test stream is the
 * token i % 4 and its class; the oracle below names it right when the
 * token is even, and class + 1 when it is odd. */
typedef struct { int next; } ParityTask;
static void parity_test_batch(void *self, Examples *e, int B, Rng *rng) {
    ParityTask *pt = self;
    (void)rng;
    for (int b = 0; b < B; b++, pt->next++) e->tokens[b] = e->targets[b] = pt->next % 4;
}
static void parity_test_reset(void *self) { ((ParityTask *)self)->next = 0; }
typedef struct { int B, tokens[64]; } ParityOracle;
static double parity_forward(void *self, const Examples *e) {
    ParityOracle *o = self;
    o->B = e->B;
    memcpy(o->tokens, e->tokens, sizeof(int) * (size_t)e->B);
    return 0.0;
}
static void parity_predict(void *self, int *pred) {
    ParityOracle *o = self;
    for (int b = 0; b < o->B; b++) pred[b] = o->tokens[b] % 2 ? (o->tokens[b] + 1) % 4 : o->tokens[b];
}

/* classifier_confusion counts each (true, predicted) pair of classifier_test's examples, a partial batch too. */
static void test_confusion_counts(void **state) {
    (void)state;
    ParityTask pt = {0};
    ExampleTask t = {.self = &pt, .name = "parity", .n_in = 1, .n_out = 1, .test_batch = parity_test_batch,
                     .test_reset = parity_test_reset};
    ParityOracle o = {0};
    Classifier c;
    memset(&c, 0, sizeof c);
    c.self = &o;
    c.max_B = 64;
    c.n_out = 1;
    c.classes = 4;
    c.forward = parity_forward;
    c.predict = parity_predict;
    static ClassifierRuns runs;
    runs.flags.test_size = 150;   /* 150 = 2 batches of 64 and one of 22: classes 0, 1 seen 38 times, 2, 3 37 */
    runs.flags.shared.seed = 7;
    long confusion[16];
    pt.next = 99;                 /* classifier_confusion starts the test stream again */
    classifier_confusion(&runs, &c, &t, 4, confusion);
    const long want[16] = {38, 0, 0, 0, 0, 0, 38, 0, 0, 0, 37, 0, 37, 0, 0, 0};
    for (int i = 0; i < 16; i++) assert_int_equal(confusion[i], want[i]);
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
    const TrainOptions o = options(300, 1e-2f, 0.0f);
    assert_int_equal(classifier_train(&c, &t, &o, B, 1, NULL, &r), 0);
    assert_int_equal(r.log.n, 50);   /* a point every 300 / 50 steps */
    assert_true(r.log.step[49] == 300.0f);
    assert_true(r.log.train[49] < 0.5f * r.log.train[0]);
    assert_true(r.solved_step > 0);
    assert_true(r.final_loss == r.log.last_loss);
    train_log_free(&r.log);
    double exact, token_acc;
    classifier_evaluate(&c, &t, 200, 1, &exact, &token_acc);
    assert_true(token_acc > 0.9);
    c.destroy(c.self);
}

/* set_progress of replicas 0 and 1 (their models' self pointers in
 * replica_self) records each call's (self, step, steps) here */
static void *replica_self[2];
static struct {
    void *self[2][8];
    int step[2][8], steps[2][8], calls[2];
} told;

static void record_progress(void *self, int step, int steps) {
    const int r = self == replica_self[0] ? 0 : 1, k = told.calls[r]++;
    if (k >= 8) return;
    told.self[r][k] = self;
    told.step[r][k] = step;
    told.steps[r][k] = steps;
}

static void test_train_tells_the_step(void **state) {
    (void)state;
    enum { STEPS = 5 };
    Classifier m[2];
    assert_int_equal(build_small(&m[0], TASK_REVERSE, 3), 0);
    assert_int_equal(build_small(&m[1], TASK_REVERSE, 3), 0);
    for (int k = 0; k < 2; k++) {
        m[k].set_progress = record_progress;
        replica_self[k] = m[k].self;
    }
    memset(&told, 0, sizeof told);
    DigitTaskSpec spec = {TASK_REVERSE, N};
    ExampleTask t;
    digit_example_task(&t, &spec);
    ClassifierResult r;
    memset(&r, 0, sizeof r);
    const TrainOptions o = options(STEPS, 1e-2f, 0.0f);
    const RecipeFlags two = {.replicas = 2};
    assert_int_equal(recipe_train(m, &two, &t, &o, B, NULL, 1, &r), 0);
    train_log_free(&r.log);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(told.calls[k], STEPS);   /* once a step, each replica */
        for (int i = 0; i < STEPS; i++) {
            assert_ptr_equal(told.self[k][i], m[k].self);
            assert_int_equal(told.step[k][i], i);
            assert_int_equal(told.steps[k][i], STEPS);
        }
    }
    for (int k = 0; k < 2; k++) m[k].destroy(m[k].self);
}

static void test_train_keeps_the_average(void **state) {
    (void)state;
    enum { STEPS = 40 };
    const float decay = 0.9f, lr = 1e-2f;
    Classifier a, b;
    assert_int_equal(build_small(&a, TASK_REVERSE, 3), 0);
    assert_int_equal(build_small(&b, TASK_REVERSE, 3), 0);
    DigitTaskSpec spec = {TASK_REVERSE, N};
    ExampleTask t;
    digit_example_task(&t, &spec);
    ClassifierResult r;
    memset(&r, 0, sizeof r);
    WeightAverage avg;
    assert_int_equal(weight_average_init(&avg, a.params, decay), 0);
    const TrainOptions o = options(STEPS, lr, 0.01f);
    const RecipeFlags averaged = {.replicas = 1, .ema = decay};
    assert_int_equal(recipe_train(&a, &averaged, &t, &o, B, &avg, 4, &r), 0);
    train_log_free(&r.log);
    /* by hand: the same batches (stream 1 of seed 4), schedule and clip as recipe_train */
    const size_t n = b.params->size;
    double *expect = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) expect[i] = b.params->data[i];
    Adam opt;
    assert_int_equal(adam_init(&opt, b.params, lr, 0.01f), 0);
    Examples e;
    examples_alloc(&e, B, N, N, 0);
    Rng rng;
    rng_seed(&rng, 4, 1);
    for (int step = 0; step < STEPS; step++) {
        t.train_batch(t.self, &e, B, &rng);
        recipe_train_step(&b, 1, &opt, &e, 1.0f, lr_schedule(step, STEPS, STEPS / 20, lr, 0.05f), 0.0f);
        for (size_t i = 0; i < n; i++) expect[i] = decay * expect[i] + (1.0 - decay) * b.params->data[i];
    }
    /* the weights trained are the same bits; the average is the recurrence */
    assert_memory_equal(a.params->data, b.params->data, sizeof(float) * n);
    double worst = 0.0, moved = 0.0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs(avg.avg[i] - expect[i]));
        moved = fmax(moved, fabs(avg.avg[i] - a.params->data[i]));
    }
    assert_true(worst < 1e-5);
    assert_true(moved > 1e-3);   /* and it is not the last weights */
    free(expect);
    examples_free(&e);
    adam_free(&opt);
    weight_average_free(&avg);
    a.destroy(a.self);
    b.destroy(b.self);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_step_is_the_textbook_step),
        cmocka_unit_test(test_parallel_step_is_the_one_model_step),
        cmocka_unit_test(test_parallel_step_vit),
        cmocka_unit_test(test_sam_step),
        cmocka_unit_test(test_evaluate_counts),
        cmocka_unit_test(test_confusion_counts),
        cmocka_unit_test(test_train_learns_reverse),
        cmocka_unit_test(test_train_keeps_the_average),
        cmocka_unit_test(test_train_tells_the_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
