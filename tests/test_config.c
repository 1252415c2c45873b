/* test_config.c - a config struct to and from checkpoint text (io/config.c)
 * and the one training loop (train/loop.c).
 *
 * What is checked: config_write then config_read gives the struct back,
 * with today's text byte for byte ("%d", "%g", a choice by its name); an old
 * key is read where the new one is missing, and a fallback fills a key old
 * checkpoints lack; a missing key, a value out of range, an unknown choice, a
 * number with trailing text and a text field too long are each refused with
 * a message naming the key; text that does not fit the buffer is refused.
 * The loop: a quadratic is minimised; the learning rate follows the
 * schedule (warm-up, then cosine decay to the floor); the curve has a point
 * every eval_every steps and at the last; a gradient that is not finite
 * stops the loop before any update, naming the step. */
#include "io/config.h"
#include "temp_dir.h"
#include "train/loop.h"
#include "util/error.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

typedef struct {
    int cell;        /* a choice: 0 rnn, 1 gru, 2 lstm */
    int S;           /* the state size */
    float dropout;
    char task[16];
} Demo;

static const ConfigField DEMO_FIELDS[] = {
    {"cell", CONFIG_CHOICE, offsetof(Demo, cell), .choices = "rnn,gru,lstm"},
    {"state", CONFIG_INT, offsetof(Demo, S), .lo = 1, .hi = 4096, .old_key = "hidden"},
    {"dropout", CONFIG_FLOAT, offsetof(Demo, dropout), .lo = 0, .hi = 0.95, .fallback = "0"},
    {"task", CONFIG_TEXT, offsetof(Demo, task), .size = 16},
};
static const int DEMO_N = (int)(sizeof DEMO_FIELDS / sizeof DEMO_FIELDS[0]);

static void test_round_trip(void **state) {
    (void)state;
    const Demo d = {.cell = 2, .S = 128, .dropout = 0.1f, .task = "dates"};
    char text[256] = "model=demo\n";
    assert_int_equal(config_write(text, sizeof text, DEMO_FIELDS, DEMO_N, &d), 0);
    assert_string_equal(text, "model=demo\ncell=lstm\nstate=128\ndropout=0.1\ntask=dates\n");
    Demo back;
    memset(&back, 0, sizeof back);
    assert_int_equal(config_read(text, DEMO_FIELDS, DEMO_N, &back), 0);
    assert_int_equal(back.cell, 2);
    assert_int_equal(back.S, 128);
    assert_true(back.dropout == 0.1f);
    assert_string_equal(back.task, "dates");
}

static void test_old_key_and_fallback(void **state) {
    (void)state;
    Demo d;
    assert_int_equal(config_read("cell=gru\nhidden=64\ntask=g2p\n", DEMO_FIELDS, DEMO_N, &d), 0);
    assert_int_equal(d.cell, 1);
    assert_int_equal(d.S, 64);            /* the old key */
    assert_true(d.dropout == 0.0f);       /* the fallback */
    /* the new key wins over the old */
    assert_int_equal(config_read("cell=gru\nhidden=64\nstate=32\ntask=g2p\n", DEMO_FIELDS, DEMO_N, &d), 0);
    assert_int_equal(d.S, 32);
}

/* A key added later with omit_fallback: no line at its fallback (the text
 * of before the key), a line otherwise; a choice and an int alike. */
typedef struct {
    int S, norm, k;
} Later;

static void test_omit_fallback(void **state) {
    (void)state;
    static const ConfigField fields[] = {
        {"state", CONFIG_INT, offsetof(Later, S), .lo = 1, .hi = 4096},
        {"norm", CONFIG_CHOICE, offsetof(Later, norm), .choices = "layer,rms", .fallback = "layer", .omit_fallback = 1},
        {"k", CONFIG_INT, offsetof(Later, k), .lo = 0, .hi = 64, .fallback = "0", .omit_fallback = 1},
    };
    char text[128] = "";
    assert_int_equal(config_write(text, sizeof text, fields, 3, &(Later){16, 0, 0}), 0);
    assert_string_equal(text, "state=16\n");
    text[0] = '\0';
    assert_int_equal(config_write(text, sizeof text, fields, 3, &(Later){16, 1, 5}), 0);
    assert_string_equal(text, "state=16\nnorm=rms\nk=5\n");
    Later back = {0, 0, 0};
    assert_int_equal(config_read(text, fields, 3, &back), 0);
    assert_int_equal(back.norm, 1);
    assert_int_equal(back.k, 5);
}

static void refused(const char *text, const char *key_named) {
    Demo d;
    assert_int_equal(config_read(text, DEMO_FIELDS, DEMO_N, &d), -1);
    if (!strstr(last_error(), key_named)) fprintf(stderr, "message: %s\n", last_error());
    assert_non_null(strstr(last_error(), key_named));
}

static void test_bad_text_refused(void **state) {
    (void)state;
    refused("state=8\ntask=x\n", "'cell'");                               /* missing, no fallback */
    refused("cell=gru\nstate=0\ntask=x\n", "'state'");                    /* below the range */
    refused("cell=gru\nstate=5000\ntask=x\n", "'state'");                 /* above */
    refused("cell=gru\nstate=12abc\ntask=x\n", "'state'");                /* trailing text */
    refused("cell=gruu\nstate=8\ntask=x\n", "'cell'");                    /* not a choice */
    refused("cell=gr\nstate=8\ntask=x\n", "'cell'");                      /* a prefix is not a choice */
    refused("cell=gru\nstate=8\ndropout=0.99\ntask=x\n", "'dropout'");    /* above */
    refused("cell=gru\nstate=8\ndropout=nan\ntask=x\n", "'dropout'");     /* not a number in range */
    refused("cell=gru\nstate=8\ntask=a_task_name_too_long\n", "'task'");  /* longer than the field */
}

static void test_write_overflow_refused(void **state) {
    (void)state;
    const Demo d = {.cell = 0, .S = 4096, .dropout = 0.5f, .task = "reverse"};
    char text[24] = "";
    assert_int_equal(config_write(text, sizeof text, DEMO_FIELDS, DEMO_N, &d), -1);
    assert_true(strlen(text) < sizeof text);   /* what was there stays terminated */
}

/* ---- the loop: minimise 0.5 |w - 3|^2 over 4 weights ---- */

typedef struct {
    Params params;
    int calls, validations, poison_step;
    float seen_lr[64];
} Quadratic;

static double quadratic_gradient(void *self, int step, long *count) {
    Quadratic *q = self;
    q->calls++;
    double loss = 0;
    for (size_t i = 0; i < q->params.size; i++) {
        const float d = q->params.data[i] - 3.0f;
        q->params.grad[i] += d;
        loss += 0.5 * d * d;
    }
    if (step == q->poison_step) q->params.grad[1] = NAN;
    *count = 10;
    return loss;
}

static double quadratic_validate(void *self) {
    Quadratic *q = self;
    q->validations++;
    return 0.0;
}

static void quadratic_make(Quadratic *q) {
    memset(q, 0, sizeof *q);
    q->poison_step = -1;
    params_init(&q->params);
    params_add(&q->params, "w", 1, (int[]){4});
    params_alloc(&q->params);
}

static void test_loop_trains_and_logs(void **state) {
    (void)state;
    Quadratic q;
    quadratic_make(&q);
    const Trainer t = {.self = &q, .params = &q.params, .gradient = quadratic_gradient,
                       .validate = quadratic_validate};
    TrainOptions o = TRAIN_DEFAULTS;
    o.steps = 300, o.lr = 0.1f, o.warmup = 10, o.eval_every = 100, o.quiet = 1;
    TrainLog log;
    assert_int_equal(train_loop(&t, &o, &log), 0);
    assert_int_equal(q.calls, 300);
    assert_int_equal(log.steps_done, 300);
    assert_int_equal(log.count, 3000);
    assert_int_equal(log.n, 3);                      /* steps 100, 200, 300 */
    assert_int_equal(q.validations, 3);
    assert_true(log.step[2] == 300.0f);
    assert_true(log.train[0] > log.train[2]);        /* the loss fell */
    for (size_t i = 0; i < q.params.size; i++) assert_true(fabsf(q.params.data[i] - 3.0f) < 0.05f);
    train_log_free(&log);
    params_free(&q.params);
}

static void test_loop_stops_before_a_bad_update(void **state) {
    (void)state;
    Quadratic q;
    quadratic_make(&q);
    q.poison_step = 4;
    const Trainer t = {.self = &q, .params = &q.params, .gradient = quadratic_gradient};
    TrainOptions o = TRAIN_DEFAULTS;
    o.steps = 20, o.quiet = 1, o.eval_every = 3;
    TrainLog log;
    assert_int_equal(train_loop(&t, &o, &log), -1);
    assert_non_null(strstr(last_error(), "step 5"));
    assert_int_equal(log.steps_done, 4);
    for (size_t i = 0; i < q.params.size; i++) assert_true(isfinite(q.params.data[i]));
    assert_int_equal(log.n, 1);                      /* the point at step 3 */
    train_log_free(&log);
    params_free(&q.params);
}

/* A fresh directory for a loop's checkpoint: dir, dir/model.ckpt and the
 * weights-so-far sibling the loop writes beside it. */
typedef struct {
    char dir[256], ckpt[300], so_far[320];
} LoopFiles;

static void loop_files(LoopFiles *f, const char *prefix) {
    assert_int_equal(temp_dir_make(f->dir, sizeof f->dir, prefix), 0);
    snprintf(f->ckpt, sizeof f->ckpt, "%s/model.ckpt", f->dir);
    snprintf(f->so_far, sizeof f->so_far, "%s/model_so_far.ckpt", f->dir);
}

/* The checkpoint so far: written at every curve point but the last (the
 * program writes the final weights itself), with the training state; a
 * failed write stops the loop. */
static void test_loop_saves_the_weights_so_far(void **state) {
    (void)state;
    LoopFiles f;
    loop_files(&f, "loop_so_far");
    Quadratic q;
    quadratic_make(&q);
    int mark = 7;   /* a Trainer's own state item, kept and put back */
    const Trainer t = {.self = &q, .params = &q.params, .gradient = quadratic_gradient, .checkpoint = f.ckpt,
                       .config = "model=quadratic\n", .batch = 10,
                       .state = {{"mark", STATE_INT, &mark, 1}}, .n_state = 1};
    TrainOptions o = TRAIN_DEFAULTS;
    o.steps = 10, o.quiet = 1, o.eval_every = 3;
    TrainLog log;
    assert_int_equal(train_loop(&t, &o, &log), 0);
    assert_int_equal(log.n, 4);                      /* points at steps 3, 6, 9, 10 */
    int position[3] = {0}, got_mark = 0;
    StateItem items[2] = {{"loop.position", STATE_INT, position, 3}, {"mark", STATE_INT, &got_mark, 1}};
    assert_int_equal(checkpoint_load_state(f.so_far, items, 2), 0);
    assert_int_equal(position[0], 9);                /* the last one written: after step 9 */
    assert_int_equal(position[1], 3);
    assert_int_equal(got_mark, 7);
    train_log_free(&log);
    params_free(&q.params);

    quadratic_make(&q);
    Trainer nowhere = t;
    nowhere.checkpoint = "/nonexistent_dir_for_test/model.ckpt";
    assert_int_equal(train_loop(&nowhere, &o, &log), -1);
    assert_non_null(strstr(last_error(), "nonexistent_dir_for_test"));
    assert_int_equal(log.steps_done, 3);             /* stopped at the failed save */
    train_log_free(&log);
    params_free(&q.params);
    temp_dir_remove(f.dir);
}

/* A run resumed from its checkpoint so far ends with the weights, curve
 * and count of the run that never stopped (Adam's moments and step put
 * back: without them the next updates differ); other flags are refused. */
static void test_loop_resumes_to_the_same_bits(void **state) {
    (void)state;
    LoopFiles f;
    loop_files(&f, "loop_resume");
    TrainOptions o = TRAIN_DEFAULTS;
    o.steps = 40, o.quiet = 1, o.eval_every = 15, o.lr = 0.05f, o.warmup = 5;
    Quadratic whole, part;
    quadratic_make(&whole);
    quadratic_make(&part);
    TrainLog log_whole, log_part;
    const Trainer t_whole = {.self = &whole, .params = &whole.params, .gradient = quadratic_gradient};
    assert_int_equal(train_loop(&t_whole, &o, &log_whole), 0);
    /* the same run with a checkpoint so far; its last one is after step 30 */
    const Trainer t_part = {.self = &part, .params = &part.params, .gradient = quadratic_gradient,
                            .checkpoint = f.ckpt, .config = "model=quadratic\n", .batch = 10};
    assert_int_equal(train_loop(&t_part, &o, &log_part), 0);
    train_log_free(&log_part);
    params_free(&part.params);
    /* a fresh model resumed from it: 10 steps more */
    quadratic_make(&part);
    Trainer t_resume = t_part;
    t_resume.self = &part;
    t_resume.params = &part.params;
    t_resume.resume = f.so_far;
    assert_int_equal(train_loop(&t_resume, &o, &log_part), 0);
    assert_int_equal(part.calls, 10);
    assert_memory_equal(part.params.data, whole.params.data, sizeof(float) * whole.params.size);
    assert_int_equal(log_part.n, log_whole.n);
    assert_memory_equal(log_part.train, log_whole.train, sizeof(float) * (size_t)log_whole.n);
    assert_int_equal(log_part.count, log_whole.count);
    train_log_free(&log_part);
    /* another --steps, another config: refused, naming them */
    TrainOptions longer = o;
    longer.steps = 50;
    assert_int_equal(train_loop(&t_resume, &longer, &log_part), -1);
    assert_non_null(strstr(last_error(), "--steps 40"));
    train_log_free(&log_part);
    t_resume.config = "model=cubic\n";
    assert_int_equal(train_loop(&t_resume, &o, &log_part), -1);
    assert_non_null(strstr(last_error(), "'model=quadratic' there, 'model=cubic' here"));
    train_log_free(&log_part);
    train_log_free(&log_whole);
    params_free(&part.params);
    params_free(&whole.params);
    temp_dir_remove(f.dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_old_key_and_fallback),
        cmocka_unit_test(test_omit_fallback),
        cmocka_unit_test(test_bad_text_refused),
        cmocka_unit_test(test_write_overflow_refused),
        cmocka_unit_test(test_loop_trains_and_logs),
        cmocka_unit_test(test_loop_stops_before_a_bad_update),
        cmocka_unit_test(test_loop_saves_the_weights_so_far),
        cmocka_unit_test(test_loop_resumes_to_the_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
