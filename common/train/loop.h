/* loop.h - the one training loop every program of the project runs.
 *
 * One step, as llm.c's train_gpt2.c writes it:
 *
 *   zero the gradients
 *   loss = forward and backward over the next batch      (the model's own call)
 *   stop if the loss or a gradient is not finite          (train/finite.h)
 *   clip the gradients' global norm to --clip
 *   one AdamW update at the scheduled learning rate       (warm-up, then cosine decay)
 *   every --eval-every steps: the validation loss, a point of the loss curve,
 *                             and the checkpoint so far
 *
 * The checkpoint so far holds, besides the weights, all a run needs to go
 * on: the step, Adam's moments, the curve, and what the model's part names
 * (its batch sampler's random stream and position, a dropout stream). A run
 * stopped by Ctrl-C resumes from it (--resume): the same steps follow, and
 * at one thread the same bits as a run that never stopped.
 *
 * The model's part is a Trainer: a function that draws the next batch and
 * leaves the gradient of its mean loss in params->grad, and, optionally, one
 * that measures the validation loss. The rest (the schedule, clipping, the
 * progress line, the curve) is the same for every model, with the same flags
 * and defaults (TRAIN_DEFAULTS); a program that needs another default sets
 * it in its main, where a reader sees it. */
#ifndef LOOP_H
#define LOOP_H
#include "io/checkpoint.h"
#include "nn/optim.h"
#include "nn/params.h"

typedef struct {
    int steps;          /* optimizer steps (batches) */
    float lr;           /* peak learning rate */
    int warmup;         /* steps of linear warm-up from 0 to lr */
    float lr_floor;     /* the cosine decay ends at lr * lr_floor (1: a constant rate) */
    float clip;         /* clip the global gradient norm to this (0: off) */
    float weight_decay; /* AdamW's decoupled weight decay (0: plain Adam) */
    int eval_every;     /* steps between curve points and validation checks */
    int quiet;          /* 1: no progress line */
    const char *unit;   /* what a step counts: "examples" or "tokens" */
} TrainOptions;

/* The defaults every program starts from (--warmup 100, --clip 1, ...). */
#define TRAIN_DEFAULTS                                                                                          \
    ((TrainOptions){.steps = 1000, .lr = 3e-3f, .warmup = 100, .lr_floor = 0.05f, .clip = 1.0f,              \
                    .weight_decay = 0.0f, .eval_every = 250, .quiet = 0, .unit = "examples"})

enum { TRAIN_STATE_MAX = 16 };   /* state items a Trainer may name */

typedef struct {
    void *self;         /* the model and its data: what the two calls below receive */
    Params *params;     /* the parameters the optimizer updates */
    /* Draw the next training batch, run forward and backward over it, and
     * leave d loss / d params in params->grad (the loop has zeroed it).
     * Returns the batch's mean loss; *count = what the step counted
     * (examples or tokens). step is 0-based. */
    double (*gradient)(void *self, int step, long *count);
    /* Optional (NULL: none): the mean validation loss, without gradients. */
    double (*validate)(void *self);
    /* Optional (NULL: none): called after every update (a moving average
     * of the weights, chapter 07). */
    void (*updated)(void *self);
    /* Optional (NULL: nothing saved while training): the program's
     * checkpoint path and its config text. At every point of the curve
     * before the last, and at a Ctrl-C, the loop writes the weights so far
     * and the training state beside it (io/checkpoint.h's
     * checkpoint_save_so_far), so that a run stopped early keeps its latest
     * weights and can resume. The program writes the final checkpoint
     * itself after training. A failed write stops the loop. */
    const char *checkpoint, *config;
    int batch;          /* examples (or windows) a step draws: a resume checks it is the same */
    /* What else changes as the model's part trains, for a resume to put
     * back: its batch sampler's random stream and position, the model's
     * dropout stream, a moving average ... (the loop adds its own) */
    StateItem state[TRAIN_STATE_MAX];
    int n_state;
    /* Optional (NULL: from step 0): a stopped run's checkpoint so far to
     * continue from. Its config text and training flags must be this run's;
     * the loop loads its weights and state and goes on from its step. */
    const char *resume;
} Trainer;

/* What a run of the loop leaves: the loss curve (a point every eval_every
 * steps and at the last step) and the figures of the run. */
typedef struct {
    int n;              /* curve points */
    float *step;        /* [n] the step each point ends */
    float *train;       /* [n] the mean training loss of the steps since the previous point */
    float *valid;       /* [n] the validation loss there (NaN without validate) */
    int steps_done;     /* steps whose update was made */
    double last_loss;   /* the training loss of the last step */
    double seconds;     /* wall-clock time of the loop */
    long count;         /* examples or tokens seen */
} TrainLog;

/* Train t for o->steps steps with AdamW, filling log (free it with
 * train_log_free). Returns 0; or -1 with fail()
 * at a Ctrl-C (train_loop_interrupted), or
 * when a loss or a gradient was not finite: no update was made at that
 * step (log->steps_done says how many were), and the caller writes no
 * checkpoint. */
int train_loop(const Trainer *t, const TrainOptions *o, TrainLog *log);
void train_log_free(TrainLog *log);

/* 1 when the last train_loop stopped at a Ctrl-C (SIGINT): it ended the step
 * in flight, wrote the checkpoint so far and returned -1 with a message
 * saying where it is; a program running several trainings stops there too. */
int train_loop_interrupted(void);

#endif
