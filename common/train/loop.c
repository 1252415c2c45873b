/* loop.c - the one training loop (see loop.h). */
#include "train/loop.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/finite.h"
#include "train/progress.h"
#include "util/error.h"
#include "util/util.h"

/* Ctrl-C (SIGINT) while the loop runs: a flag the loop reads after each
 * update, so the step in flight ends and its weights are kept. The handler
 * is reset by the signal (SA_RESETHAND): a second Ctrl-C stops the program
 * at once. A SIGINT the program was started ignoring (nohup, a background
 * job) stays ignored. */
static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig) {
    (void)sig;
    interrupted = 1;
}

/* Install the handler; returns 1 when it did (old then holds the one to put back). */
static int catch_interrupt(struct sigaction *old) {
    interrupted = 0;
    if (sigaction(SIGINT, NULL, old) != 0 || old->sa_handler == SIG_IGN) return 0;
    struct sigaction sa;
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_RESTART;   /* a write in flight (the checkpoint) goes on */
    return sigaction(SIGINT, &sa, NULL) == 0;
}

static int train_steps(const Trainer *t, const TrainOptions *o, TrainLog *log);

int train_loop_interrupted(void) {
    return interrupted;
}

int train_loop(const Trainer *t, const TrainOptions *o, TrainLog *log) {
    struct sigaction old_int;
    const int caught = catch_interrupt(&old_int);
    const int rc = train_steps(t, o, log);
    if (caught) sigaction(SIGINT, &old_int, NULL);
    return rc;
}

static int train_steps(const Trainer *t, const TrainOptions *o, TrainLog *log) {
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
        if (interrupted) {   /* Ctrl-C: keep this step's weights, and say where they are */
            progress_end(&pr);
            adam_free(&opt);
            log->seconds = now_seconds() - t0;
            if (!t->save)
                return fail("interrupted (Ctrl-C) after step %d of %d: nothing saved", step + 1, o->steps);
            if (t->save(t->self) < 0) return -1;
            return fail("interrupted (Ctrl-C) after step %d of %d: the weights of that step are in the checkpoint "
                        "so far (NAME_so_far.ckpt in --out; --load evaluates them). The same command again refuses "
                        "to replace them: --force trains anew over them", step + 1, o->steps);
        }
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
