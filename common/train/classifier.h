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
    const ClassifierPreset *presets;   /* --preset's choices, the first the default (NULL: no --preset) */
    int n_presets;
} ClassifierProgram;

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
    /* with a moving average (chapter 07's --ema): the last step's weights' figures (exact, token_acc are the average's) */
    double exact_last_weights, token_acc_last_weights;
    int solved_step;      /* 0: never */
    int n_out;            /* outputs per example: 1 for a classifier of whole inputs (chapter 07's images) */
    TrainLog log;         /* the loss curve: a point every --eval-every steps (train_log_free) */
    char checkpoint[1024];   /* --out/model_KEY.ckpt (classifier_add_run; "": none while training) */
    char checkpoint_last_weights[1024];   /* with an average: the last step's weights; "" without */
    const char *config;      /* the run's config text, which its checkpoints keep */
    int resume;              /* --resume: continue from the checkpoint so far when there is one */
} ClassifierResult;

/* How a training recipe of a later chapter makes a step's gradient
 * (chapter 07's data-parallel replicas, sharpness-aware steps and moving
 * average of the weights: its recipe.h). gradient: the batch e (drawn by
 * classifier_train) -> the gradient of its mean loss in the model's
 * params->grad, which the loop has zeroed; returns the loss (NaN with fail()
 * stops the run). updated: after every update, or NULL. state: what a
 * resume puts back besides the model's own (its other replicas' streams, the
 * average). */
#define CLASSIFIER_RECIPE_STATE 9
typedef struct {
    void *self;
    double (*gradient)(void *self, int step, const Examples *e);
    void (*updated)(void *self);
    StateItem state[CLASSIFIER_RECIPE_STATE];
    int n_state;
} ClassifierRecipe;

/* Train m through train_loop (train/loop.h: o's steps, learning rate and
 * schedule, clipping, weight decay, a point of the loss curve every
 * o->eval_every steps) on batches of batch examples of task's training
 * stream (stream 1 of seed). The gradient: one forward and one backward of m
 * on the batch, or recipe's (NULL: the plain one). Before each step m's
 * set_progress is told the step. Fills r's loss curve (r->log), solved
 * step, final loss and seconds. With r->checkpoint set (classifier_add_run
 * does), m's weights so far are written beside it (checkpoint_save_so_far)
 * at each point of the curve, so a run stopped early keeps them;
 * classifier_save removes them. Returns 0, or -1 with fail() (a loss or
 * gradient that is not finite: no update was made then). */
int classifier_train(Classifier *m, const ExampleTask *task, const TrainOptions *o, int batch, uint64_t seed,
                     const ClassifierRecipe *recipe, ClassifierResult *r);

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
    const char *eval_split;      /* the evaluated split's name in the table: "test" when NULL */
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
 * --test-size 1000, the program's first preset; and
 * results.json's first keys (chapter, then the headline's figures, filled
 * in by classifier_report). A chapter changes a default in its main, after
 * this call. */
void classifier_init(ClassifierRuns *runs, const ClassifierProgram *program);

/* Parse argv: the chapter's own flags own[0..n_own) (destinations its own),
 * then the shared ones; --preset NAME first puts the preset's flags in front
 * of the user's, so a flag the user gives still wins. Checks what goes
 * together (--input needs --load; with --load
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
/* The same test examples as classifier_test, for a task of one class per
 * example (of C): confusion [C, C], zeroed, then the count of each (true
 * class, predicted class) pair (row: true). */
void classifier_confusion(const ClassifierRuns *runs, Classifier *m, const ExampleTask *t, int C, long *confusion);


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
