/* norm_experiment.c - chapter 06: post-LN vs pre-LN at depth 2, 6 and 12,
 * no warm-up (see norm_experiment.h).
 *
 * Each run: the transformer of transformer.c on the dates task, D = 64,
 * 4 heads, F = 256, LayerNorm, no dropout, batch 32, the same seed. main.c
 * trains it with the one training loop, Adam at a constant 1e-3 from the
 * first step and no gradient clipping (both would hide the effect); the
 * curve is the loop's: the mean loss of each 10 steps. */
#include "06_transformer/norm_experiment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/plot.h"
#include "io/results.h"
#include "util/error.h"
#include "util/util.h"

enum { N_DEPTHS = 3, N_PLACES = 2, STEPS = NORM_EXPERIMENT_STEPS, WINDOW = NORM_EXPERIMENT_WINDOW,
       BATCH = NORM_EXPERIMENT_BATCH, N_POINTS = STEPS / WINDOW };
static const int depths[N_DEPTHS] = {2, 6, 12};
static const char *const place_name[N_PLACES] = {"post-LN", "pre-LN"};

int norm_experiment_start(NormExperiment *e, const char *out_dir) {
    memset(e, 0, sizeof *e);
    e->out_dir = out_dir;
    /* before the runs: a path too long or a directory that cannot be written (util.h) */
    if (out_dir_prepare("--out", out_dir) < 0) return -1;
    TaskConfig tc;
    if (task_defaults(&tc, "dates") < 0 || dataset_load(&e->d, &tc) < 0) return -1;
    printf("Post-LN vs pre-LN, no warm-up: dates, D = 64, 4 heads, F = 256, batch %d, Adam at %g from step 0,\n"
           "no gradient clipping, %d steps, the same seed. Loss = cross-entropy per target token\n"
           "(uniform guessing: ln %d = %.2f).\n\n",
           BATCH, (double)NORM_EXPERIMENT_LR, STEPS, e->d.tgt_vocab.size, log((double)e->d.tgt_vocab.size));
    printf("  %-8s %5s | %9s %9s %9s %9s | %s\n", "norm", "depth", "loss@50", "loss@100", "loss@200", "final",
           "what happened");
    return 0;
}

int norm_run_create(NormRun *run, const NormExperiment *e, int r) {
    const TransformerConfig cfg = {
        .layers = depths[r % N_DEPTHS],
        .block = {.D = 64, .H = 4, .D_H = 16, .F = 256, .norm_place = (BlockNormPlace)(r / N_DEPTHS),
                  .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN},
        .pos = POSITIONS_SINUSOIDAL,
        .kv_cache = 1,
    };
    const Dataset *d = &e->d;
    memset(run, 0, sizeof *run);
    if (transformer_create(&run->t, &cfg, d->src_vocab.size, d->tgt_vocab.size, d->max_src_len, d->max_tgt_len + 1,
                           BATCH, 1) < 0) {
        transformer_free(&run->t);
        return -1;
    }
    run->d = d;
    batch_alloc(&run->batch, BATCH, d->max_src_len, d->max_tgt_len);
    rng_seed(&run->rng, 1, 3);
    return 0;
}

double norm_run_gradient(void *self, int step, long *count) {
    NormRun *run = self;
    int idx[BATCH];
    (void)step;
    for (int i = 0; i < BATCH; i++) idx[i] = (int)rng_below(&run->rng, (uint32_t)run->d->train.n);
    batch_fill(&run->batch, &run->d->train, idx, BATCH);
    *count = BATCH;
    return transformer_train_step(&run->t, &run->batch, 1);
}

void norm_run_free(NormRun *run) {
    batch_free(&run->batch);
    transformer_free(&run->t);
}

void norm_experiment_record(NormExperiment *e, int r, const float *curve, int n, int diverged_at, double seconds) {
    NormRunResult *run = &e->runs[r];
    for (int i = 0; i < N_POINTS; i++) run->curve[i] = i < n ? curve[i] : NAN;
    run->diverged_at = diverged_at;
    run->seconds = seconds;
    const float final = run->curve[N_POINTS - 1];
    char what[96];
    if (diverged_at >= 0) snprintf(what, sizeof what, "diverged: not finite at step %d", diverged_at);
    else if (final > 1.0f) snprintf(what, sizeof what, "stalled (%.1f s)", seconds);
    else snprintf(what, sizeof what, "trained (%.1f s)", seconds);
    printf("  %-8s %5d | %9.4f %9.4f %9.4f %9.4f | %s\n", place_name[r / N_DEPTHS], depths[r % N_DEPTHS],
           (double)run->curve[50 / WINDOW - 1], (double)run->curve[100 / WINDOW - 1],
           (double)run->curve[200 / WINDOW - 1], (double)final, what);
    fflush(stdout);
}

void norm_experiment_free(NormExperiment *e) {
    dataset_free(&e->d);
}

int norm_experiment_finish(NormExperiment *e) {
    norm_experiment_free(e);
    /* one plot, six curves */
    float xs[N_POINTS];
    for (int i = 0; i < N_POINTS; i++) xs[i] = (float)((i + 1) * WINDOW);
    const float *ys[NORM_EXPERIMENT_RUNS];
    char names[NORM_EXPERIMENT_RUNS][32];
    const char *name_ptrs[NORM_EXPERIMENT_RUNS];
    Results res;
    results_init(&res);
    results_set_str(&res, "chapter", "06_transformer");
    results_set_str(&res, "experiment", "norm placement without warm-up (dates)");
    for (int r = 0; r < NORM_EXPERIMENT_RUNS; r++) {
        ys[r] = e->runs[r].curve;
        snprintf(names[r], sizeof names[r], "%s, %d layers", place_name[r / N_DEPTHS], depths[r % N_DEPTHS]);
        name_ptrs[r] = names[r];
        char key[64];
        snprintf(key, sizeof key, "%s_%d_final_loss", r / N_DEPTHS ? "pre" : "post", depths[r % N_DEPTHS]);
        results_set_num(&res, key, e->runs[r].diverged_at >= 0 ? NAN : e->runs[r].curve[N_POINTS - 1]);
    }
    char stem[1024];
    if (path_format(stem, sizeof stem, "%s/norm_experiment", e->out_dir) < 0 || make_dirs(e->out_dir) < 0 ||
        plot_lines(stem, "Post-LN vs pre-LN without warm-up: training loss (mean of 10 steps)", "step",
                   "cross-entropy per token", xs, ys, name_ptrs, NORM_EXPERIMENT_RUNS, N_POINTS, 1) < 0)
        return -1;
    printf("\n  plot: %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    if (path_format(stem, sizeof stem, "%s/norm_experiment.json", e->out_dir) < 0 || results_write(&res, stem) < 0)
        return -1;
    printf("  %s\n", stem);
    return 0;
}
