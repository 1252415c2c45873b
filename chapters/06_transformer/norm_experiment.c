/* norm_experiment.c - chapter 06: post-LN vs pre-LN at depth 2, 6 and 12,
 * no warm-up (see norm_experiment.h).
 *
 * Each run: the transformer of transformer.c on the dates task, D = 64,
 * 4 heads, F = 256, LayerNorm, no dropout, batch 32, Adam at a constant
 * 1e-3 from the first step and no gradient clipping (both would hide the
 * effect), the same seed, trained by the one training loop (train/loop.h:
 * an experiment is part of the program, like main). The curve is the
 * loop's: the mean loss of each 10 steps. */
#include "06_transformer/norm_experiment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "06_transformer/transformer.h"
#include "io/plot.h"
#include "io/results.h"
#include "train/loop.h"
#include "util/error.h"
#include "util/util.h"

enum { N_DEPTHS = 3, N_PLACES = 2, N_RUNS = N_DEPTHS * N_PLACES, STEPS = 400, WINDOW = 10, BATCH = 32 };
static const int depths[N_DEPTHS] = {2, 6, 12};
static const float learning_rate = 1e-3f;

typedef struct {
    float curve[STEPS / WINDOW];   /* mean loss of each window of steps (NAN from a divergence on) */
    int diverged_at;               /* the step (0-based) whose loss or gradient was not finite, or -1 */
    double seconds;
} Run;

/* One run's batches: BATCH training examples drawn at random per step
 * (the same stream in every run). */
typedef struct {
    Transformer *t;
    const Dataset *d;
    Batch batch;
    Rng rng;
} RunBatches;

/* The loop's call (train/loop.h): the next batch, forward and backward. */
static double gradient(void *self, int step, long *count) {
    RunBatches *r = self;
    int idx[BATCH];
    (void)step;
    for (int i = 0; i < BATCH; i++) idx[i] = (int)rng_below(&r->rng, (uint32_t)r->d->train.n);
    batch_fill(&r->batch, &r->d->train, idx, BATCH);
    *count = BATCH;
    return transformer_train_step(r->t, &r->batch, 1);
}

/* Train one configuration for STEPS steps with the one training loop; fills run. */
static int train_one(Run *run, const Dataset *d, BlockNormPlace place, int depth) {
    const TransformerConfig cfg = {
        .layers = depth,
        .block = {.D = 64, .H = 4, .D_H = 16, .F = 256, .norm_place = place, .norm = BLOCK_LAYERNORM,
                  .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN},
        .pos = POS_SINUSOIDAL,
        .kv_cache = 1,
    };
    Transformer t;
    if (transformer_create(&t, &cfg, d->src_vocab.size, d->tgt_vocab.size, d->max_src_len, d->max_tgt_len + 1,
                           BATCH, 1) < 0) {
        transformer_free(&t);
        return -1;
    }
    RunBatches r = {.t = &t, .d = d};
    batch_alloc(&r.batch, BATCH, d->max_src_len, d->max_tgt_len);
    rng_seed(&r.rng, 1, 3);
    /* Adam at a constant rate from step 0 (no warm-up, a floor of 1: no
     * decay) and no clipping: each would hide the effect. A point of the
     * curve every WINDOW steps: the mean loss of those steps. */
    const TrainOptions o = {.steps = STEPS, .lr = learning_rate, .warmup = 0, .lr_floor = 1.0f, .clip = 0.0f,
                            .weight_decay = 0.0f, .eval_every = WINDOW, .quiet = 1, .unit = "examples"};
    const Trainer trainer = {.self = &r, .params = &t.params, .gradient = gradient};
    TrainLog log;
    /* a run that diverges stops at that step: no point from its window on */
    run->diverged_at = train_loop(&trainer, &o, &log) < 0 ? log.steps_done : -1;
    for (int i = 0; i < STEPS / WINDOW; i++) run->curve[i] = i < log.n ? log.train[i] : NAN;
    run->seconds = log.seconds;
    train_log_free(&log);
    batch_free(&r.batch);
    transformer_free(&t);
    return 0;
}

int norm_experiment_run(const char *out_dir) {
    /* before the runs: a path too long or a directory that cannot be written (util.h) */
    if (out_dir_prepare("--out", out_dir) < 0) return -1;
    TaskConfig tc;
    Dataset d;
    if (task_defaults(&tc, "dates") < 0 || dataset_load(&d, &tc) < 0) return -1;
    Run runs[N_RUNS];
    const char *place_name[N_PLACES] = {"post-LN", "pre-LN"};
    printf("Post-LN vs pre-LN, no warm-up: dates, D = 64, 4 heads, F = 256, batch %d, Adam at %g from step 0,\n"
           "no gradient clipping, %d steps, the same seed. Loss = cross-entropy per target token\n"
           "(uniform guessing: ln %d = %.2f).\n\n",
           BATCH, (double)learning_rate, STEPS, d.tgt_vocab.size, log((double)d.tgt_vocab.size));
    printf("  %-8s %5s | %9s %9s %9s %9s | %s\n", "norm", "depth", "loss@50", "loss@100", "loss@200", "final",
           "what happened");
    for (int p = 0; p < N_PLACES; p++)
        for (int k = 0; k < N_DEPTHS; k++) {
            Run *run = &runs[p * N_DEPTHS + k];
            if (train_one(run, &d, (BlockNormPlace)p, depths[k]) < 0) {
                dataset_free(&d);
                return -1;
            }
            const int last = STEPS / WINDOW - 1;
            const float final = run->curve[last];
            char what[96];
            if (run->diverged_at >= 0) snprintf(what, sizeof what, "diverged: not finite at step %d", run->diverged_at);
            else if (final > 1.0f) snprintf(what, sizeof what, "stalled (%.1f s)", run->seconds);
            else snprintf(what, sizeof what, "trained (%.1f s)", run->seconds);
            printf("  %-8s %5d | %9.4f %9.4f %9.4f %9.4f | %s\n", place_name[p], depths[k],
                   (double)run->curve[50 / WINDOW - 1], (double)run->curve[100 / WINDOW - 1],
                   (double)run->curve[200 / WINDOW - 1], (double)final, what);
            fflush(stdout);
        }
    dataset_free(&d);

    /* one plot, six curves */
    float xs[STEPS / WINDOW];
    for (int i = 0; i < STEPS / WINDOW; i++) xs[i] = (float)((i + 1) * WINDOW);
    const float *ys[N_RUNS];
    char names[N_RUNS][32];
    const char *name_ptrs[N_RUNS];
    Results res;
    results_init(&res);
    results_set_str(&res, "chapter", "06_transformer");
    results_set_str(&res, "experiment", "norm placement without warm-up (dates)");
    for (int r = 0; r < N_RUNS; r++) {
        ys[r] = runs[r].curve;
        snprintf(names[r], sizeof names[r], "%s, %d layers", place_name[r / N_DEPTHS], depths[r % N_DEPTHS]);
        name_ptrs[r] = names[r];
        char key[64];
        snprintf(key, sizeof key, "%s_%d_final_loss", r / N_DEPTHS ? "pre" : "post", depths[r % N_DEPTHS]);
        results_set_num(&res, key, runs[r].diverged_at >= 0 ? NAN : runs[r].curve[STEPS / WINDOW - 1]);
    }
    char stem[1024];
    if (path_format(stem, sizeof stem, "%s/norm_experiment", out_dir) < 0 || make_dirs(out_dir) < 0 ||
        plot_lines(stem, "Post-LN vs pre-LN without warm-up: training loss (mean of 10 steps)", "step",
                   "cross-entropy per token", xs, ys, name_ptrs, N_RUNS, STEPS / WINDOW, 1) < 0)
        return -1;
    printf("\n  plot: %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    if (path_format(stem, sizeof stem, "%s/norm_experiment.json", out_dir) < 0 || results_write(&res, stem) < 0)
        return -1;
    printf("  %s\n", stem);
    return 0;
}
