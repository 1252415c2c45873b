/* progress.h - the line a user watches while a model trains.
 *
 * On a terminal: one line redrawn in place (\r) with step, loss, examples/s
 * and ETA. When stdout is not a terminal (CI, a log file): a plain line every
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
} Progress;

void progress_start(Progress *pr, long total_steps, long every, int quiet);
/* examples_done: cumulative examples (or tokens) processed so far. */
void progress_update(Progress *pr, long step, float loss, long examples_done, const char *extra);
/* Finish the line (newline on a terminal). */
void progress_end(Progress *pr);

/* Wall-clock seconds (monotonic). */
double now_seconds(void);

#endif
