/* classifier.h - the driver of every model that predicts a class per position
 * or per example (chapters 04 and 05; next the GPT of chapter 06 and the ViT
 * of chapter 07): the model interface, the training step, evaluation, and the
 * whole program behind each such chapter's main().
 *
 * The sequence-to-sequence chapters (01-03, and 06's encoder-decoder) have
 * their own driver, seq2seq.h; everything else goes through this one:
 *
 *   Classifier      a model: forward with loss, backward, predict, the
 *                   attention weights of a layer and head (for plots)
 *   ExampleTask     where its examples come from (data/examples.h)
 *   ClassifierRun   one model to train: a name and its config text (the
 *                   same text its checkpoint keeps, which rebuilds it)
 *   classifier_main()  flags, training with progress, evaluation, results
 *                   table, heatmaps, loss curves, results.json, checkpoints,
 *                   and --load / --input / --plot on a saved model
 *
 * A chapter's main.c is its flags, the runs they ask for, and a build
 * function; demos of the chapter's idea go in its before/after hooks. */
#ifndef CLASSIFIER_H
#define CLASSIFIER_H
#include <stdint.h>
#include "data/examples.h"
#include "model/classifier.h"
#include "io/args.h"
#include "io/config.h"
#include "io/results.h"
#include "nn/optim.h"
#include "nn/params.h"
#include "train/loop.h"


/* The common flags every such chapter has (the chapter adds its own). */
typedef struct {
    TrainOptions train;   /* --steps --lr --warmup --clip --weight-decay --eval-every --quiet (train/loop.h) */
    const char *out, *backend, *load, *input;
    int batch, seed, threads, test_size, plot;
    int replicas;         /* data parallelism: replicas (copies) of the model, one thread each (1: one) */
    const char *matmul_precision; /* "float" (NULL: the same) or "bf16" (kernels/matmul.h) */
    float ema;            /* > 0: evaluate and keep the moving average of the weights with this decay
                           * (nn/optim.h); 0: the last step's weights, the default */
    float sam;            /* > 0: sharpness-aware steps with this radius rho (classifier_train_step_parallel);
                           * 0: plain steps, the default */
} ClassifierFlags;

#define CLASSIFIER_MAX_REPLICAS 8   /* --replicas: data-parallel replicas (copies) of a model */
#define CLASSIFIER_CONFIG_MAX 1024
typedef struct {
    char key[24];      /* "reverse_sinusoidal": file names, results.json keys */
    char label[128];   /* "reverse, sinusoidal positions": the table, titles */
    char config[CLASSIFIER_CONFIG_MAX];   /* "model=...\ntask=...\n...seed=1\n" */
} ClassifierRun;

/* A run's config text, the one its checkpoint keeps: "model=" model,
 * "task=" task, the lines of the model's config struct cfg (its table
 * fields, io/config.h), "seed=" seed. Returns 0, or -1 with fail() when it
 * does not fit. */
int classifier_config_text(ClassifierRun *run, const char *model, const char *task, const ConfigField *fields,
                           int n, const void *cfg, int seed);

/* What a run measured. */
#define SOLVED_LOSS 0.5   /* "solved at step": the first point of the loss curve below it */
typedef struct {
    double exact, token_acc, seconds, final_loss;
    /* with --ema: the last step's weights' figures (exact, token_acc are the average's) */
    double exact_last_weights, token_acc_last_weights;
    int solved_step;      /* 0: never */
    int n_out;            /* outputs per example: 1 for a classifier of whole inputs (chapter 07's images) */
    TrainLog log;         /* the loss curve: a point every --eval-every steps (train_log_free) */
    char checkpoint[1024];
    char checkpoint_last_weights[1024];   /* with --ema: the last step's weights; "" without */
} ClassifierResult;

/* The gradient of the mean loss over the batch e, left in m[0]'s
 * params->grad (which the caller has zeroed), data-parallel over n_replicas
 * replicas of one model: m[0] is the model trained, m[1..n_replicas-1] were
 * built from the same config (each for at least its slice of e). The batch
 * is cut into n_replicas slices in order (slice r: examples
 * [B r / n, B (r + 1) / n)); m[0]'s parameters are copied into every
 * replica, each replica runs forward and backward on its slice on its own
 * thread (its products then run on that one thread; with fewer threads than
 * replicas, a thread takes them in turn), and the replicas' gradients, each
 * weighted by its slice's share of the B examples, are summed into m[0]'s.
 * The sum is the gradient of the whole batch's mean loss when every example
 * has the same number of targets (every task here), up to the order of float
 * additions; n_replicas = 1 (sam = 0) is one forward and one backward of
 * m[0]. Why: on 2 cores, two replicas each working on half the batch keep
 * both cores busier than one model whose products are split between them
 * (the numbers are in bench/README.md). Returns the batch's mean loss; NaN
 * with fail() when the batch has fewer examples than replicas.
 *
 * With sam = rho > 0, each replica's gradient is the sharpness-aware one
 * (SAM, Foret et al. 2021): with g the gradient of its slice's loss L at the
 * weights w, it steps to the nearby point w + rho g / |g| (|g|: the L2 norm
 * over all its parameters), where to first order L rises the most within
 * radius rho, and takes the gradient there on the same slice (the same
 * random choices when the model has replay); w is then put back and that
 * gradient is the one summed and applied. The update so favours weights
 * whose whole neighbourhood has a low loss, a flat minimum, which tends to
 * generalise better. Each replica finds its own w + rho g / |g| from its own
 * slice (the paper's "m-sharpness" with m the slice's size). It costs a
 * second forward and backward; the loss returned is the first pass's, at w.
 * sam = 0 is the plain gradient. */
double classifier_gradient(Classifier *m, int n_replicas, const Examples *e, float sam);

/* One training step outside train_loop (the benches, the tests): zero the
 * gradients, classifier_gradient, the check that the loss and every
 * gradient are finite, clip the gradient norm to clip (> 0), one Adam
 * update at lr. Returns the loss; or, when the loss or a gradient is not
 * finite, NaN with fail() naming the first tensor whose gradient is not
 * (train/finite.h), and no update made. classifier_train_step is the step
 * of one model (n_replicas = 1, sam = 0). */
double classifier_train_step_parallel(Classifier *m, int n_replicas, Adam *opt, const Examples *e, float clip,
                                      float lr, float sam);
double classifier_train_step(Classifier *m, Adam *opt, const Examples *e, float clip, float lr);

/* Train m[0] (with n_replicas data-parallel replicas m[0..n_replicas-1], or 1)
 * through train_loop (train/loop.h: o's steps, learning rate and schedule,
 * clipping, weight decay, a point of the loss curve every o->eval_every
 * steps) on batches of batch examples of task's training stream (stream 1
 * of seed), the gradient classifier_gradient's (sharpness-aware with radius
 * sam > 0). Before each step each replica's set_progress is told the step.
 * Fills r's loss curve (r->log), solved step, final loss and seconds.
 * With average (else NULL, made from m[0]'s parameters): updated after every
 * step; m[0] itself ends with the last step's weights. Returns 0, or -1 with
 * fail() (a loss or gradient that is not finite: no update was made then). */
int classifier_train(Classifier *m, int n_replicas, const ExampleTask *task, const TrainOptions *o, int batch,
                     float sam, WeightAverage *average, uint64_t seed, ClassifierResult *r);

/* Exact match (every output right) and per-output accuracy over n_test
 * examples of the test stream (stream 99 of seed), in batches of m->max_B. */
void classifier_evaluate(Classifier *m, const ExampleTask *task, int n_test, uint64_t seed,
                         double *exact, double *token_acc);

/* What a chapter gives classifier_main. */
typedef struct {
    const char *chapter;          /* "04_self_attention" */
    const char *model_name;       /* the "model=" its checkpoints carry */
    const char *summary;          /* a paragraph for --help */
    const ArgSpec *model_args;    /* the chapter's own flags */
    int n_model_args;
    const char *load_flags;       /* those of them that still act with --load ("attention"), or NULL */
    const char *load_hint;        /* what to try with a saved model, printed after "--load CKPT"; NULL: --input "..." */
    const char *examples;         /* --help's example lines, '\n' between them */
    int typed_input;              /* 1: --load CKPT --input "3 1 4" runs the model on typed digits (--plot draws it);
                                   * 0: those two flags are refused */
    int vit_recipe;               /* 1: offer --ema, --sam and --replicas (chapter 07's long recipe); 0: refuse them */
    ClassifierFlags defaults;     /* the common flags' defaults (out is set from chapter) */
    /* The runs the parsed flags ask for, written to runs (room for max);
     * returns how many, or -1 with fail(). *headline: the run whose figures
     * lead results.json. */
    int (*plan)(const ClassifierFlags *f, ClassifierRun *runs, int max, int *headline);
    /* Build the model a config text describes, for batches of up to max_B,
     * parameters initialised from seed (a checkpoint then overwrites them).
     * Returns 0, or -1 with fail() (for example: a checkpoint of another model). */
    int (*build)(Classifier *m, const char *config, int max_B, uint64_t seed);
    /* The task a config text names ("task=reverse", "len=8"); the task may
     * point into storage the chapter owns. Returns 0 or -1 with fail(). */
    int (*task)(const char *config, ExampleTask *task);
    /* Optional: before training (a demonstration of the chapter's idea) and
     * after it (more plots); both may add keys to res. Return 0 or -1 with fail(). */
    int (*before)(const ClassifierFlags *f, Results *res);
    int (*after)(const ClassifierFlags *f, Results *res);
    /* Optional: called after each run is trained, evaluated and saved (r:
     * what the driver measured), with the model still alive (pictures of what it learned, more figures for
     * res). Returns 0 or -1 with fail(). */
    int (*trained)(const ClassifierFlags *f, const ClassifierRun *run, const ClassifierResult *r, Classifier *m,
                   const ExampleTask *t, Results *res);
    /* Optional: --load without --input, after the checkpoint is loaded into
     * m: the chapter's own use of a saved model (its own flags, e.g. an image
     * file). Returns 1 to let the driver evaluate on the test set as usual,
     * 0 when done, -1 with fail(). f->out is the evaluation directory (not
     * yet made). */
    int (*loaded)(const ClassifierFlags *f, Classifier *m, const ExampleTask *t);
} ClassifierChapter;

/* The whole program of such a chapter. Returns the process exit code. */
int classifier_main(int argc, char **argv, const ClassifierChapter *chapter);

#endif
