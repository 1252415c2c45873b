/* progress.h - the line a user watches while a model trains.
 *
 * On a terminal: one line redrawn in place (\r) with every number labelled:
 *   step  250/2000  train loss 1.0206  valid loss 0.3181  5.5k examples/s  ETA 20s
 * (the validation figure only on the steps that measure it). When stdout is not a terminal (CI, a log file): a plain line every
 * `every` steps and at least once a minute, so logs stay readable. */
#ifndef PROGRESS_H
#define PROGRESS_H

typedef struct {
    long total_steps;
    long every;         /* print interval when not a terminal */
    int is_tty;
    double t_start;     /* seconds */
    double t_last_draw;
    int quiet;
    const char *unit;   /* what is counted per second: "examples", "tokens" */
} Progress;

void progress_start(Progress *pr, long total_steps, long every, const char *unit, int quiet);
/* loss: the training loss; examples_done: cumulative examples (or tokens)
 * so far; extra: a labelled figure printed after the training loss (for
 * example "valid loss 0.3181"), or NULL. */
void progress_update(Progress *pr, long step, float loss, long examples_done, const char *extra);
/* Finish the line (newline on a terminal). */
void progress_end(Progress *pr);


#endif
