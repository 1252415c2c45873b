/* loop.c - the one training loop (see loop.h). */
#include "train/loop.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ------------------------------------------- the state a resume needs */

/* Where the loop stands, as the checkpoint so far keeps it. */
typedef struct {
    int options[4];     /* --steps, --warmup, --eval-every, the batch: a resume checks they are this run's */
    float rates[4];     /* --lr, the rate's floor, --clip, --weight-decay: the same */
    int position[3];    /* steps done, points of the curve, steps in the window since the last point */
    double sums[3];     /* the window's loss sum, seconds trained, the last step's loss */
    long count;         /* examples or tokens seen */
} LoopState;

static const char *const OPTION_NAMES[4] = {"--steps", "--warmup", "--eval-every", "--batch"};
static const char *const RATE_NAMES[4] = {"--lr", "the learning rate's floor", "--clip", "--weight-decay"};

/* items [TRAIN_STATE_MAX + 11]: the loop's state (ls, the curve, Adam's), then the Trainer's. Returns their number. */
static int state_items(StateItem *items, const Trainer *t, LoopState *ls, TrainLog *log, int max_points, Adam *opt) {
    int n = 0;
    items[n++] = (StateItem){"loop.options", STATE_INT, ls->options, 4};
    items[n++] = (StateItem){"loop.rates", STATE_FLOAT, ls->rates, 4};
    items[n++] = (StateItem){"loop.position", STATE_INT, ls->position, 3};
    items[n++] = (StateItem){"loop.sums", STATE_DOUBLE, ls->sums, 3};
    items[n++] = (StateItem){"loop.count", STATE_LONG, &ls->count, 1};
    items[n++] = (StateItem){"curve.step", STATE_FLOAT, log->step, (size_t)max_points};
    items[n++] = (StateItem){"curve.train", STATE_FLOAT, log->train, (size_t)max_points};
    items[n++] = (StateItem){"curve.valid", STATE_FLOAT, log->valid, (size_t)max_points};
    items[n++] = (StateItem){"adam.step", STATE_LONG, &opt->step, 1};
    items[n++] = (StateItem){"adam.m", STATE_FLOAT, opt->m, opt->size};
    items[n++] = (StateItem){"adam.v", STATE_FLOAT, opt->v, opt->size};
    for (int i = 0; i < t->n_state && i < TRAIN_STATE_MAX; i++) items[n++] = t->state[i];
    return n;
}

/* Continue t->resume: its config and flags must be this run's; then its
 * weights, its state (into the items, ls among them). Returns 0 or -1 with fail(). */
static int resume_from(const Trainer *t, StateItem *items, int n, LoopState *ls) {
    char *config;
    if (checkpoint_read_config(t->resume, &config) < 0) return -1;
    const char *here = t->config ? t->config : "";
    if (strcmp(config, here) != 0) {
        size_t i = 0, line = 0;
        while (config[i] && config[i] == here[i]) {
            if (config[i] == '\n') line = i + 1;
            i++;
        }
        char there[64], ours[64];
        snprintf(there, sizeof there, "%.*s", (int)strcspn(config + line, "\n"), config + line);
        snprintf(ours, sizeof ours, "%.*s", (int)strcspn(here + line, "\n"), here + line);
        free(config);
        return fail("--resume: %s was written by another configuration ('%s' there, '%s' here): resume with the "
                    "command that started that run", t->resume, there[0] ? there : "(nothing)",
                    ours[0] ? ours : "(nothing)");
    }
    free(config);
    const LoopState want = *ls;
    if (checkpoint_load_state(t->resume, items, 2) < 0) return -1;   /* the flags first (state_items' order) */
    for (int k = 0; k < 4; k++) {
        if (ls->options[k] != want.options[k])
            return fail("--resume: the stopped run in %s trained with %s %d, this command says %d: resume with the "
                        "command that started it", t->resume, OPTION_NAMES[k], ls->options[k], want.options[k]);
        if (memcmp(&ls->rates[k], &want.rates[k], sizeof(float)) != 0)
            return fail("--resume: the stopped run in %s trained with %s %g, this command says %g: resume with the "
                        "command that started it", t->resume, RATE_NAMES[k], (double)ls->rates[k],
                        (double)want.rates[k]);
    }
    if (checkpoint_load_state(t->resume, items, n) < 0) return -1;
    return checkpoint_load(t->resume, t->params);
}

/* ---------------------------------------------------------------- the loop */

static int train_steps(const Trainer *t, const TrainOptions *o, TrainLog *log) {
    const int every = o->eval_every > 0 ? o->eval_every : (o->steps > 0 ? o->steps : 1);
    const int max_points = o->steps / every + 2;
    *log = (TrainLog){.step = xcalloc((size_t)max_points, sizeof(float)),
                      .train = xcalloc((size_t)max_points, sizeof(float)),
                      .valid = xcalloc((size_t)max_points, sizeof(float)), .last_loss = NAN};
    Adam opt;
    if (adam_init(&opt, t->params, o->lr, o->weight_decay) < 0) return -1;
    LoopState ls = {.options = {o->steps, o->warmup, every, t->batch},
                    .rates = {o->lr, o->lr_floor, o->clip, o->weight_decay}};
    StateItem items[TRAIN_STATE_MAX + 11];
    const int n_items = state_items(items, t, &ls, log, max_points, &opt);
    int start = 0, window_n = 0;
    double window = 0.0, before = 0.0;   /* the window's loss sum; seconds trained before a resume */
    if (t->resume) {
        if (resume_from(t, items, n_items, &ls) < 0) {
            adam_free(&opt);
            return -1;
        }
        start = log->steps_done = ls.position[0];
        log->n = ls.position[1];
        window_n = ls.position[2];
        window = ls.sums[0];
        before = ls.sums[1];
        log->last_loss = ls.sums[2];
        log->count = ls.count;
        printf("resuming %s at step %d of %d\n", t->resume, start, o->steps);
    }
    Progress pr;   /* in a log file: a line at each validation, or four in all */
    progress_start(&pr, o->steps, t->validate ? every : (o->steps / 4 > 0 ? o->steps / 4 : 1), o->unit, o->quiet);
    const double t0 = now_seconds();
    int rc = 0;
    for (int step = start; step < o->steps && rc == 0; step++) {
        params_zero_grad(t->params);
        long count = 0;
        const double loss = t->gradient(t->self, step, &count);
        if (grads_check_finite(t->params, loss) < 0) {   /* before any update (finite.h) */
            rc = fail("training diverged at step %d: %s; no update was made and no checkpoint written: "
                      "try a lower --lr", step + 1, last_error());
            break;
        }
        if (o->clip > 0) clip_grad_norm(t->params, o->clip);
        adam_step(&opt, t->params, lr_schedule(step, o->steps, o->warmup, o->lr, o->lr_floor));
        if (t->updated) t->updated(t->self);
        log->steps_done = step + 1;
        log->last_loss = loss;
        log->count += count;
        window += loss;
        window_n++;
        const int point = (step + 1) % every == 0 || step + 1 == o->steps;
        if (point) {   /* a point of the curve: the mean since the last one, and the validation loss */
            const double valid = t->validate ? t->validate(t->self) : NAN;
            log->step[log->n] = (float)(step + 1);
            log->train[log->n] = (float)(window / window_n);
            log->valid[log->n++] = (float)valid;
            char extra[64] = "";
            if (t->validate) snprintf(extra, sizeof extra, "valid loss %.4f", valid);
            progress_update(&pr, step + 1, (float)(window / window_n), log->count, t->validate ? extra : NULL);
            window = 0.0;
            window_n = 0;
        } else {
            progress_update(&pr, step + 1, (float)loss, log->count, NULL);
        }
        /* the checkpoint so far: at each point of the curve but the last, and at a Ctrl-C */
        if (t->checkpoint && ((point && step + 1 < o->steps) || interrupted)) {
            ls.position[0] = step + 1;
            ls.position[1] = log->n;
            ls.position[2] = window_n;
            ls.sums[0] = window;
            ls.sums[1] = before + (now_seconds() - t0);
            ls.sums[2] = loss;
            ls.count = log->count;
            if (checkpoint_save_so_far(t->checkpoint, t->config, t->params, items, n_items) < 0) rc = -1;
        }
        if (interrupted && rc == 0) {   /* Ctrl-C: this step's weights are kept; say where and how to go on */
            char so_far[1200] = "";
            if (t->checkpoint) checkpoint_so_far_path(so_far, sizeof so_far, t->checkpoint);
            rc = so_far[0] ? fail("interrupted (Ctrl-C) after step %d of %d: the weights of that step and the "
                                  "training state are in %s: the same command with --resume continues the run, "
                                  "--load evaluates them, --force trains anew over them", step + 1, o->steps, so_far)
                           : fail("interrupted (Ctrl-C) after step %d of %d: nothing saved", step + 1, o->steps);
        }
    }
    progress_end(&pr);
    log->seconds = before + (now_seconds() - t0);
    adam_free(&opt);
    return rc;
}

void train_log_free(TrainLog *log) {
    free(log->step);
    free(log->train);
    free(log->valid);
    *log = (TrainLog){0};
}
