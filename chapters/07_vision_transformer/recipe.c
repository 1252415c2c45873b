/* recipe.c - chapter 07's long training recipe: replicas, sharpness-aware
 * steps, the moving average (see recipe.h). */
#include "07_vision_transformer/recipe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "kernels/threads.h"
#include "train/finite.h"
#include "util/error.h"
#include "util/util.h"

int recipe_flag_specs(RecipeFlags *f, ArgSpec *specs) {
    const ArgSpec table[RECIPE_FLAG_SPECS] = {
        {"ema", ARG_FLOAT, &f->ema, "keep a moving average of the weights, this decay (0: off)", 0, 0.99999, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"sam", ARG_FLOAT, &f->sam, "sharpness-aware steps of this radius rho (0: plain steps)", 0, 1, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"replicas", ARG_INT, &f->replicas, "data parallelism: copies of the model, one thread each", 1,
         RECIPE_MAX_REPLICAS, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
    };
    for (int i = 0; i < RECIPE_FLAG_SPECS; i++) specs[i] = table[i];
    return RECIPE_FLAG_SPECS;
}

int recipe_flags_check(const RecipeFlags *f, int batch) {
    if (f->replicas > batch)
        return fail("--replicas %d: more replicas of the model than the %d examples of a batch", f->replicas, batch);
    return 0;
}

/* ------------------------------------------------------- the gradient */

/* Slice r of n of e: examples [B r / n, B (r + 1) / n), the same arrays from there on. */
static Examples slice_of(const Examples *e, int r, int n) {
    const int b0 = (int)((long)e->B * r / n), b1 = (int)((long)e->B * (r + 1) / n);
    Examples s = *e;
    s.B = b1 - b0;
    if (s.tokens) s.tokens += (size_t)b0 * e->n_in;
    if (s.values) s.values += (size_t)b0 * e->n_in;
    if (s.targets) s.targets += (size_t)b0 * e->n_out;
    return s;
}

/* One replica's gradient on its slice s, left in m->params->grad; returns
 * the slice's loss at the weights. With sam > 0 the sharpness-aware gradient
 * (recipe.h); the replica's weights are then left at w + sam g / |g|
 * and the caller puts them back. */
static double replica_gradient(Classifier *m, const Examples *s, float sam) {
    const double loss = m->forward(m->self, s);
    m->backward(m->self, s);
    if (sam <= 0) return loss;
    Params *p = m->params;
    double sq = 0.0;
    for (size_t i = 0; i < p->size; i++) sq += (double)p->grad[i] * p->grad[i];
    /* a zero gradient has no direction to climb; one that is not finite is
     * caught by the check after the sum (no update is made) */
    if (!(sq > 0.0) || !isfinite(sq)) return loss;
    const float step = (float)(sam / sqrt(sq));
    for (size_t i = 0; i < p->size; i++) p->data[i] += step * p->grad[i];
    params_zero_grad(p);
    if (m->replay) m->replay(m->self);   /* the same dropped patches and masks as the first pass */
    m->forward(m->self, s);
    m->backward(m->self, s);
    return loss;
}

double recipe_gradient(Classifier *m, int n_replicas, const Examples *e, float sam) {
    if (n_replicas < 1) n_replicas = 1;
    if (n_replicas == 1 && sam <= 0) {   /* one model, the plain gradient */
        const double loss = m->forward(m->self, e);
        m->backward(m->self, e);
        return loss;
    }
    if (e->B < n_replicas) {
        fail("a batch of %d examples cannot be split between %d replicas of the model", e->B, n_replicas);
        return NAN;
    }
    Params *p = m[0].params;
    double losses[RECIPE_MAX_REPLICAS];
    for (int r = 0; r < n_replicas; r++) {
        if (r > 0) memcpy(m[r].params->data, p->data, sizeof(float) * p->size);
        params_zero_grad(m[r].params);
    }
    /* sam moves m[0]'s weights: a copy to put back (the other replicas get
     * m[0]'s at the next step) */
    float *w = NULL;
    if (sam > 0) {
        w = xmalloc(sizeof(float) * p->size);
        memcpy(w, p->data, sizeof(float) * p->size);
    }
    if (n_replicas == 1) {
        losses[0] = replica_gradient(&m[0], e, sam);   /* one model: its products split between the threads */
    } else {
        /* one replica per thread (with fewer threads than replicas, a thread
         * takes them in turn); inside the region every product runs on its
         * caller's thread (matmul.h); the count is written in the pragma, which a
         * build without OpenMP ignores. A replica's work, forward and backward,
         * is at least 3 multiply-adds per parameter and example, on its copy of
         * the weights: the cost model's count (threads.h), at most one thread
         * per replica. */
#pragma omp parallel for schedule(static, 1) \
    num_threads(threads_for_items(n_replicas, 3.0 * (double)p->size * e->B / n_replicas, 4.0 * (double)p->size))
        for (int r = 0; r < n_replicas; r++) {
            Examples s = slice_of(e, r, n_replicas);
            losses[r] = replica_gradient(&m[r], &s, sam);
        }
    }
    if (w) {
        memcpy(p->data, w, sizeof(float) * p->size);
        free(w);
    }
    /* the whole batch's mean = the slices' means weighted by their shares of the examples */
    double loss = 0.0;
    for (int r = 0; r < n_replicas; r++) {
        const float share = (float)slice_of(e, r, n_replicas).B / (float)e->B;
        loss += (double)share * losses[r];
        float *g = p->grad;
        const float *g_r = m[r].params->grad;
        if (r == 0)
            for (size_t i = 0; i < p->size; i++) g[i] *= share;
        else
            for (size_t i = 0; i < p->size; i++) g[i] += share * g_r[i];
    }
    return loss;
}

double recipe_train_step(Classifier *m, int n_replicas, Adam *opt, const Examples *e, float clip, float lr,
                         float sam) {
    params_zero_grad(m[0].params);
    const double loss = recipe_gradient(m, n_replicas, e, sam);
    if (isnan(loss) && e->B < n_replicas) return NAN;            /* fail() said why */
    if (grads_check_finite(m[0].params, loss) < 0) return NAN;   /* no update: the caller stops (finite.h) */
    if (clip > 0) clip_grad_norm(m[0].params, clip);
    adam_step(opt, m[0].params, lr);
    return loss;
}

/* ---------------------------------------------------- the training run */

/* What the recipe's gradient step works on. */
typedef struct {
    Classifier *m;             /* [n_replicas]: m[0] is the model trained */
    int n_replicas, steps;
    float sam;
    WeightAverage *average;    /* or NULL */
} Recipe;

static double recipe_step_gradient(void *self, int step, const Examples *e) {
    Recipe *c = self;
    for (int k = 1; k < c->n_replicas; k++)   /* (classifier_train tells m[0]) */
        if (c->m[k].set_progress) c->m[k].set_progress(c->m[k].self, step, c->steps);
    return recipe_gradient(c->m, c->n_replicas, e, c->sam);
}

static void recipe_updated(void *self) {
    Recipe *c = self;
    if (c->average) weight_average_update(c->average, c->m->params);
}

int recipe_train(Classifier *m, const RecipeFlags *f, const ExampleTask *task, const TrainOptions *o, int batch,
                 WeightAverage *average, uint64_t seed, ClassifierResult *r) {
    const int n = f->replicas;
    if (n < 1 || n > RECIPE_MAX_REPLICAS || n > batch)
        return fail("%d replicas of the model: expected 1 to %d, and at most the %d examples of a batch", n,
                    RECIPE_MAX_REPLICAS, batch);
    Recipe c = {.m = m, .n_replicas = n, .steps = o->steps, .sam = f->sam, .average = average};
    ClassifierRecipe recipe = {.self = &c, .gradient = recipe_step_gradient, .updated = recipe_updated};
    /* what a resume puts back besides m[0]'s: the other replicas' streams, the average */
    static const char *const replica_rng[RECIPE_MAX_REPLICAS] = {
        "", "replica1.rng", "replica2.rng", "replica3.rng", "replica4.rng", "replica5.rng", "replica6.rng",
        "replica7.rng"};
    for (int k = 1; k < n; k++)
        if (m[k].rng) recipe.state[recipe.n_state++] = (StateItem){replica_rng[k], STATE_U64, m[k].rng, 2};
    if (average) recipe.state[recipe.n_state++] = (StateItem){"average", STATE_FLOAT, average->avg, average->size};
    for (int k = 1; k < n; k++)
        if (m[k].set_training) m[k].set_training(m[k].self, 1);
    const int rc = classifier_train(&m[0], task, o, batch, seed, &recipe, r);
    for (int k = 1; k < n; k++)
        if (m[k].set_training) m[k].set_training(m[k].self, 0);
    return rc;
}

int recipe_use_average(const ClassifierRuns *runs, const ClassifierRun *run, Classifier *m, const ExampleTask *t,
                       const WeightAverage *avg, float ema, ClassifierResult *r) {
    const ClassifierFlags *f = &runs->flags;
    classifier_evaluate(m, t, f->test_size, (uint64_t)f->shared.seed, &r->exact_last_weights,
                        &r->token_acc_last_weights);
    if (t->n_out == 1)
        printf("  the last step's weights: test accuracy %.2f%%", 100 * r->exact_last_weights);
    else
        printf("  the last step's weights: exact match %.2f%%, token accuracy %.2f%%", 100 * r->exact_last_weights,
               100 * r->token_acc_last_weights);
    printf("; from here on the model is their moving average (--ema %g)\n", (double)ema);
    if (path_format(r->checkpoint_last_weights, sizeof r->checkpoint_last_weights, "%s/model_%.24s_last_weights.ckpt",
                    f->shared.out, run->key) < 0 ||
        checkpoint_save_with_state(r->checkpoint_last_weights, run->config, m->params, m->buffers, m->n_buffers) < 0)
        return -1;
    memcpy(m->params->data, avg->avg, sizeof(float) * m->params->size);
    return 0;
}

void recipe_results(Results *res, const RecipeFlags *f) {
    results_set_num(res, "ema", f->ema);
    results_set_num(res, "sam", f->sam);
    results_set_num(res, "replicas", f->replicas);
}
