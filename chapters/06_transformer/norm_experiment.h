/* norm_experiment.h - chapter 06: post-LN against pre-LN as the stack gets
 * deeper, trained WITHOUT a learning-rate warm-up.
 *
 * Xiong et al. 2020 ("On Layer Normalization in the Transformer
 * Architecture") show that in a post-LN stack the gradients of the last
 * layers are large at initialisation, so a full learning rate from step 0
 * can derail training unless it is warmed up; pre-LN keeps an identity path
 * through every block and trains without the warm-up. Here: the dates task,
 * depth 2, 6 and 12 (encoder and decoder), both placements, the same seed,
 * batch and constant learning rate from step 0; the training loss of each
 * run in one plot, and a table of where each run ended.
 *
 * The pieces of the experiment; main.c's --norm-experiment trains each run
 * with the one training loop (train/loop.h), in this order:
 *
 *   norm_experiment_start(&e, out_dir)              the data, the table's header
 *   for r in 0 .. NORM_EXPERIMENT_RUNS-1:
 *       norm_run_create(&run, &e, r)                run r's transformer and batches
 *       train_loop over norm_run_gradient           NORM_EXPERIMENT_STEPS steps
 *       norm_experiment_record(&e, r, ...)          its curve and its row of the table
 *       norm_run_free(&run)
 *   norm_experiment_finish(&e)                      the plot and norm_experiment.json */
#ifndef NORM_EXPERIMENT_H
#define NORM_EXPERIMENT_H

#include "06_transformer/transformer.h"

/* Six runs (post-LN, then pre-LN, each at depth 2, 6, 12) of STEPS steps of
 * BATCH examples; a point of the curve is the mean loss of WINDOW steps. */
enum { NORM_EXPERIMENT_RUNS = 6, NORM_EXPERIMENT_STEPS = 400, NORM_EXPERIMENT_WINDOW = 10, NORM_EXPERIMENT_BATCH = 32 };
#define NORM_EXPERIMENT_LR 1e-3f   /* Adam's rate, constant from step 0 */

typedef struct {
    float curve[NORM_EXPERIMENT_STEPS / NORM_EXPERIMENT_WINDOW];   /* NAN from a divergence on */
    int diverged_at;   /* the step (0-based) whose loss or gradient was not finite, or -1 */
    double seconds;
} NormRunResult;

typedef struct {
    const char *out_dir;
    Dataset d;   /* the dates task */
    NormRunResult runs[NORM_EXPERIMENT_RUNS];
} NormExperiment;

/* One run: its model and the stream of random batches it trains on (the
 * same stream in every run). */
typedef struct {
    Transformer t;
    const Dataset *d;
    Batch batch;
    Rng rng;
} NormRun;

/* Prepares out_dir, loads the task and prints the table's header.
 * Returns 0 or -1 with fail(). */
int norm_experiment_start(NormExperiment *e, const char *out_dir);
/* Run r's transformer (D = 64, 4 heads, F = 256, LayerNorm, no dropout; the
 * placement and depth of run r) and its batches. Returns 0 or -1 with fail(). */
int norm_run_create(NormRun *run, const NormExperiment *e, int r);
/* The training loop's call: the next batch, forward and backward; returns
 * the batch's mean loss (self is a NormRun). */
double norm_run_gradient(void *self, int step, long *count);
void norm_run_free(NormRun *run);
/* Keeps run r's curve (the loop's n points; the rest NAN) and prints its
 * row of the table. */
void norm_experiment_record(NormExperiment *e, int r, const float *curve, int n, int diverged_at, double seconds);
/* Writes out_dir/norm_experiment.{dat,gp,png} and norm_experiment.json and
 * frees e. Returns 0 or -1 with fail(). */
int norm_experiment_finish(NormExperiment *e);
void norm_experiment_free(NormExperiment *e);

#endif
