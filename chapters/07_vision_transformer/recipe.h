/* recipe.h - chapter 07's long training recipe, on top of the plain one
 * every classifier program trains with (train/classifier.h): data-parallel
 * replicas of the model (--replicas), sharpness-aware steps (--sam) and a
 * moving average of the weights (--ema). It hands classifier_train its own
 * gradient step (a ClassifierRecipe): the same loop, schedule, checkpoints
 * and resume. */
#ifndef RECIPE_H
#define RECIPE_H
#include "io/args.h"
#include "io/results.h"
#include "nn/optim.h"
#include "train/classifier.h"

#define RECIPE_MAX_REPLICAS 8   /* --replicas: data-parallel replicas (copies) of a model */

/* The recipe's flags (defaults: one replica, no SAM, no average). */
typedef struct {
    int replicas;   /* --replicas: data parallelism, replicas (copies) of the model, one thread each */
    float ema;      /* --ema: > 0: evaluate and keep the moving average of the weights with this decay
                     * (nn/optim.h); 0: the last step's weights */
    float sam;      /* --sam: > 0: sharpness-aware steps with this radius rho (recipe_gradient); 0: plain */
} RecipeFlags;

enum { RECIPE_FLAG_SPECS = 3 };
/* The three flags' specs, pointing into f, into specs[0..RECIPE_FLAG_SPECS).
 * Returns RECIPE_FLAG_SPECS. */
int recipe_flag_specs(RecipeFlags *f, ArgSpec *specs);
/* After parsing: --replicas at most --batch. Returns 0, or -1 with fail(). */
int recipe_flags_check(const RecipeFlags *f, int batch);

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
double recipe_gradient(Classifier *m, int n_replicas, const Examples *e, float sam);

/* One training step outside train_loop (the tests): zero the gradients,
 * recipe_gradient, the check that the loss and every
 * gradient are finite, clip the gradient norm to clip (> 0), one Adam
 * update at lr. Returns the loss; or, when the loss or a gradient is not
 * finite, NaN with fail() naming the first tensor whose gradient is not
 * (train/finite.h), and no update made. */
double recipe_train_step(Classifier *m, int n_replicas, Adam *opt, const Examples *e, float clip, float lr,
                         float sam);


/* Train m[0] as classifier_train does, with the recipe: the gradient
 * recipe_gradient's over f->replicas replicas m[0..replicas-1] (built from
 * the same config, each for its slice of a batch), sharpness-aware with
 * radius f->sam > 0; with average (else NULL, made from m[0]'s parameters),
 * the average updated after every step (m[0] itself ends with the last
 * step's weights). A resume puts back the replicas' streams and the average
 * too. Returns what classifier_train returns. */
int recipe_train(Classifier *m, const RecipeFlags *f, const ExampleTask *task, const TrainOptions *o, int batch,
                 WeightAverage *average, uint64_t seed, ClassifierResult *r);

/* With --ema, after training with the average avg: the last step's
 * weights' figures on the test set (printed, and into r), their checkpoint
 * model_<key>_last_weights.ckpt; then m's weights become the average.
 * Returns 0 or -1 with fail(). */
int recipe_use_average(const ClassifierRuns *runs, const ClassifierRun *run, Classifier *m, const ExampleTask *t,
                       const WeightAverage *avg, float ema, ClassifierResult *r);

/* The recipe's settings into results.json's keys: ema, sam, replicas. */
void recipe_results(Results *res, const RecipeFlags *f);
#endif
