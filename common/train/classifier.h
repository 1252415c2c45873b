/* classifier.h - the calls a program that trains models predicting a class
 * per position or per example is made of (chapters 04 and 05's digit
 * models, chapter 07's ViT): flags, training through train_loop
 * (train/loop.h), evaluation, checkpoints, the results table, pictures and
 * results.json, and --load on a saved model. The model is a Classifier
 * (model/classifier.h), its examples an ExampleTask (data/examples.h).
 *
 * A program trains one or more models (runs: a task with each positional
 * encoding, each head count, each patch size) and keeps them in a
 * ClassifierRuns. Its main chains the calls, top to bottom:
 *
 *   classifier_init            the shared flags' defaults (ClassifierFlags)
 *   classifier_parse_flags     the chapter's own flags, then the shared ones
 *   (with --load: classifier_read_config, the chapter builds the model,
 *    classifier_use_saved evaluates it or runs it on typed digits)
 *   classifier_add_run         each model to train: its key, label and config text
 *   classifier_start           the line that says what is trained
 *   for each run: the chapter builds the model, then
 *     classifier_train         train_loop over batches of the task's training stream
 *     classifier_test          exact match and accuracy on the test stream
 *     classifier_save          its checkpoint
 *     classifier_show_first_test_example   the prediction and the attention heatmaps
 *   classifier_report          the results table and the loss curves
 *   classifier_write_results   results.json and the checkpoints' list
 *   classifier_finish          free, report an error; the exit code
 *
 * Each returns 0, or -1 with fail() (classifier_finish prints the message);
 * classifier_parse_flags returns 1 when the program is done (--help). */
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
#include "train/flags.h"
#include "train/loop.h"
#include "util/util.h"


/* The flags of every such program (classifier_init sets the defaults). */
typedef struct {
    TrainFlags shared;    /* the training flags every program shares (train/flags.h) */
    int test_size;        /* --test-size: test examples */
    const char *input;    /* --input: with --load, run the model on these typed digits */
    int plot;             /* --plot: with --input, draw its attention */
    int replicas;         /* --replicas: data parallelism, replicas (copies) of the model, one thread each */
    float ema;            /* --ema: > 0: evaluate and keep the moving average of the weights with this decay
                           * (nn/optim.h); 0: the last step's weights, the default */
    float sam;            /* --sam: > 0: sharpness-aware steps with this radius rho (classifier_gradient);
                           * 0: plain steps, the default */
} ClassifierFlags;

/* A preset: a name for a set of flags (chapter 07's long runs). */
typedef struct {
    const char *name;     /* "long" */
    const char *flags;    /* "--patch 4 --kernel 8 ...", put in front of the user's ("": none) */
} ClassifierPreset;

/* What a program is, for --help, messages and its checkpoints (no code). */
typedef struct {
    const char *chapter;      /* "04_self_attention": messages, the default --out out/<chapter> */
    const char *model_name;   /* the "model=" line of its checkpoints */
    const char *summary;      /* --help's paragraph */
    const char *examples;     /* --help's example lines, '\n' between them */
    const char *load_hint;    /* what to try with a saved model, after "--load CKPT"; NULL: --input "..." */
    int typed_input;          /* 1: --load CKPT --input "3 1 4" runs the model on typed digits (--plot draws
                               * it); 0: those two flags are refused */
    int long_recipe;          /* 1: offer --ema, --sam and --replicas (chapter 07's long runs); 0: refuse them */
    const ClassifierPreset *presets;   /* --preset's choices, the first the default (NULL: no --preset) */
    int n_presets;
} ClassifierProgram;

#define CLASSIFIER_MAX_REPLICAS 8   /* --replicas: data-parallel replicas (copies) of a model */
#define CLASSIFIER_MAX_RUNS 16      /* models one program trains */
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
    char checkpoint[1024];   /* --out/model_KEY.ckpt (classifier_add_run; "": none while training) */
    char checkpoint_last_weights[1024];   /* with --ema: the last step's weights; "" without */
    const char *config;      /* the run's config text, which its checkpoints keep */
    int resume;              /* --resume: continue from the checkpoint so far when there is one */
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
 * (train/finite.h), and no update made. */
double classifier_train_step_parallel(Classifier *m, int n_replicas, Adam *opt, const Examples *e, float clip,
                                      float lr, float sam);

/* Train m[0] (with n_replicas data-parallel replicas m[0..n_replicas-1], or 1)
 * through train_loop (train/loop.h: o's steps, learning rate and schedule,
 * clipping, weight decay, a point of the loss curve every o->eval_every
 * steps) on batches of batch examples of task's training stream (stream 1
 * of seed), the gradient classifier_gradient's (sharpness-aware with radius
 * sam > 0). Before each step each replica's set_progress is told the step.
 * Fills r's loss curve (r->log), solved step, final loss and seconds.
 * With average (else NULL, made from m[0]'s parameters): updated after every
 * step; m[0] itself ends with the last step's weights. With r->checkpoint
 * set (classifier_add_run does), m[0]'s weights so far are written beside it
 * (checkpoint_save_so_far) at each point of the curve, so a run stopped
 * early keeps them; classifier_save removes them. Returns 0, or -1 with
 * fail() (a loss or gradient that is not finite: no update was made then). */
int classifier_train(Classifier *m, int n_replicas, const ExampleTask *task, const TrainOptions *o, int batch,
                     float sam, WeightAverage *average, uint64_t seed, ClassifierResult *r);

/* Exact match (every output right) and per-output accuracy over n_test
 * examples of the test stream (stream 99 of seed), in batches of m->max_B. */
void classifier_evaluate(Classifier *m, const ExampleTask *task, int n_test, uint64_t seed,
                         double *exact, double *token_acc);

/* ------------------------------------------------------------ the program */

/* A program's state: its flags, the runs it trains and what they measured,
 * results.json's keys, and with --load the checkpoint's config text. */
typedef struct {
    const ClassifierProgram *program;
    ClassifierFlags flags;
    int n, headline;             /* runs; the one whose figures lead results.json */
    ClassifierRun run[CLASSIFIER_MAX_RUNS];
    ClassifierResult result[CLASSIFIER_MAX_RUNS];
    Results results;             /* results.json's keys; a chapter may add its own */
    char *config;                /* --load: the checkpoint's config text (classifier_read_config) */
    int saved_seed;              /* --load: its seed= line, the seed of its test stream */
    double t_start;              /* when the program started (classifier_init): its whole time */
    char default_out[256];       /* out/<chapter> */
    char eval_out[OUT_DIR_MAX + 1];   /* --load: where its outputs go */
    char preset_choices[256];    /* --preset's choices, "quick,long,..." */
    char **preset_argv;          /* --preset: its flags in front of the user's */
} ClassifierRuns;

/* The shared flags' defaults into runs->flags: TRAIN_DEFAULTS (the steps,
 * learning rate, warm-up, clip, curve points), --batch 64, --seed 1,
 * --test-size 1000, one replica, the program's first preset; and
 * results.json's first keys (chapter, then the headline's figures, filled
 * in by classifier_report). A chapter changes a default in its main, after
 * this call. */
void classifier_init(ClassifierRuns *runs, const ClassifierProgram *program);

/* Parse argv: the chapter's own flags own[0..n_own) (destinations its own),
 * then the shared ones; --preset NAME first puts the preset's flags in front
 * of the user's, so a flag the user gives still wins. Checks what goes
 * together (--input needs --load, --replicas at most --batch; with --load
 * only the flags that still act), selects the backend and threads, and
 * sets runs->flags.shared.out (training: --out, checked writable now; --load: an
 * eval_* directory). Returns 0; 1 after printing --help; -1 with fail(). */
int classifier_parse_flags(ClassifierRuns *runs, int argc, char **argv, const ArgSpec *own, int n_own);

/* --load: the checkpoint's config text into runs->config (its model= line
 * checked against the program's), the model's config struct cfg from it
 * through its table of fields (io/config.h), and its seed= line into
 * runs->saved_seed. Errors name the checkpoint. Returns 0 or -1 with fail(). */
int classifier_read_config(ClassifierRuns *runs, const ConfigField *fields, int n_fields, void *cfg);

/* --load, with m built from that config and t its task: prints the config
 * and loads the saved weights into m (classifier_load_weights); then either
 * runs m on the digits of --input (and draws its attention with --plot), or
 * evaluates it on --test-size examples of the test stream. Returns 0 or -1
 * with fail(). */
int classifier_use_saved(ClassifierRuns *runs, Classifier *m, const ExampleTask *t);
int classifier_load_weights(ClassifierRuns *runs, Classifier *m, const ExampleTask *t);

/* The next run: key ("reverse_sinusoidal": file names, results.json keys)
 * and label ("reverse, sinusoidal positions": the table, titles) as
 * printf formats them; the caller writes its config text
 * (classifier_config_text). NULL with fail() when there are already
 * CLASSIFIER_MAX_RUNS. */
ClassifierRun *classifier_add_run(ClassifierRuns *runs, const char *key, const char *label_format, ...)
    __attribute__((format(printf, 3, 4)));

/* Before training: a note when --out holds another configuration's results,
 * and the line that says what is trained (runs, steps, batch, backend,
 * threads). */
void classifier_start(ClassifierRuns *runs);

/* The figures on the test set: exact match and per-output accuracy of
 * --test-size examples of the test stream (classifier_evaluate), into r. */
void classifier_test(const ClassifierRuns *runs, Classifier *m, const ExampleTask *t, ClassifierResult *r);

/* With --ema, after training with the average avg: the last step's
 * weights' figures on the test set (printed, and into r), their checkpoint
 * model_<key>_last_weights.ckpt; then m's weights become the average.
 * Returns 0 or -1 with fail(). */
int classifier_use_average(const ClassifierRuns *runs, const ClassifierRun *run, Classifier *m,
                           const ExampleTask *t, const WeightAverage *avg, ClassifierResult *r);

/* The run's checkpoint: its config text and m's weights, to
 * <out>/model_<key>.ckpt (r->checkpoint). Returns 0 or -1 with fail(). */
int classifier_save(const ClassifierRuns *runs, const ClassifierRun *run, const Classifier *m, ClassifierResult *r);

/* The first test example: the prediction beside the truth and, for a task
 * of one output per input of up to 64 inputs, a heatmap of every layer's
 * and head's attention (<out>/attn_<key>_layer<l>[_head<h>]). Returns 0 or
 * -1 with fail(). */
int classifier_show_first_test_example(const ClassifierRuns *runs, const ClassifierRun *run, Classifier *m,
                                       const ExampleTask *t);

/* After the runs: the results table on the test set, the run's figures
 * into results.json's keys, the total time, and the loss curves
 * (<out>/loss). Returns 0 or -1 with fail(). */
int classifier_report(ClassifierRuns *runs);

/* results.json, then the list of checkpoints with what to try with them.
 * Returns 0 or -1 with fail(). */
int classifier_write_results(ClassifierRuns *runs);

/* Free everything, print the error of rc < 0; the exit code (0 after
 * --help, rc 1). */
int classifier_finish(ClassifierRuns *runs, int rc);

#endif
