/* loop.c - the one training loop (see loop.h). */
#include "train/loop.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/finite.h"
#include "train/progress.h"
#include "util/error.h"
#include "util/util.h"

int train_loop(const Trainer *t, const TrainOptions *o, TrainLog *log) {
    const int every = o->eval_every > 0 ? o->eval_every : (o->steps > 0 ? o->steps : 1);
    const int max_points = o->steps / every + 2;
    *log = (TrainLog){.step = xcalloc((size_t)max_points, sizeof(float)),
                      .train = xcalloc((size_t)max_points, sizeof(float)),
                      .valid = xcalloc((size_t)max_points, sizeof(float)), .last_loss = NAN};
    Adam opt;
    if (adam_init(&opt, t->params, o->lr, o->weight_decay) < 0) return -1;
    Progress pr;   /* in a log file: a line at each validation, or four in all */
    progress_start(&pr, o->steps, t->validate ? every : (o->steps / 4 > 0 ? o->steps / 4 : 1), o->unit, o->quiet);
    double t0 = now_seconds(), window = 0.0;
    int window_n = 0;
    for (int step = 0; step < o->steps; step++) {
        params_zero_grad(t->params);
        long count = 0;
        const double loss = t->gradient(t->self, step, &count);
        if (grads_check_finite(t->params, loss) < 0) {   /* before any update (finite.h) */
            progress_end(&pr);
            adam_free(&opt);
            log->seconds = now_seconds() - t0;
            return fail("training diverged at step %d: %s; no update was made and no checkpoint written: "
                        "try a lower --lr", step + 1, last_error());
        }
        if (o->clip > 0) clip_grad_norm(t->params, o->clip);
        adam_step(&opt, t->params, lr_schedule(step, o->steps, o->warmup, o->lr, o->lr_floor));
        if (t->updated) t->updated(t->self);
        log->steps_done = step + 1;
        log->last_loss = loss;
        log->count += count;
        window += loss;
        window_n++;
        if ((step + 1) % every != 0 && step + 1 != o->steps) {
            progress_update(&pr, step + 1, (float)loss, log->count, NULL);
            continue;
        }
        /* a point of the curve: the mean since the last one, and the validation loss */
        const double valid = t->validate ? t->validate(t->self) : NAN;
        log->step[log->n] = (float)(step + 1);
        log->train[log->n] = (float)(window / window_n);
        log->valid[log->n++] = (float)valid;
        char extra[64] = "";
        if (t->validate) snprintf(extra, sizeof extra, "valid loss %.4f", valid);
        progress_update(&pr, step + 1, (float)(window / window_n), log->count, t->validate ? extra : NULL);
        window = 0.0;
        window_n = 0;
        if (t->save && step + 1 < o->steps && t->save(t->self) < 0) {   /* the checkpoint so far */
            progress_end(&pr);
            adam_free(&opt);
            log->seconds = now_seconds() - t0;
            return -1;
        }
    }
    progress_end(&pr);
    log->seconds = now_seconds() - t0;
    adam_free(&opt);
    return 0;
}

void train_log_free(TrainLog *log) {
    free(log->step);
    free(log->train);
    free(log->valid);
    *log = (TrainLog){0};
}
