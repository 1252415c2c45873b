/* progress.c - the line a user watches while a model trains (see progress.h).
 *
 * On a terminal the line is redrawn in place ("\r", then "\033[K" to clear
 * what is left of the previous, longer line), at most about ten times a
 * second so printing never slows training down. When stdout is a file or a
 * pipe (CI logs), a plain line is printed every `every` steps instead, and
 * at least once a minute, so that the log of a long run (nohup ... > log)
 * shows that it is alive and when it will end. */
#include "train/progress.h"
#include "util/util.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

void progress_start(Progress *pr, long total_steps, long every, const char *unit, int quiet) {
    pr->unit = unit ? unit : "examples";
    pr->total_steps = total_steps;
    pr->every = every > 0 ? every : 1;
    pr->is_tty = isatty(1);
    pr->t_start = now_seconds();
    pr->t_last_draw = 0.0;          /* 0 = nothing drawn yet */
    pr->quiet = quiet;
    fflush(stdout);    /* what the program printed before training, into the log now */
}

/* A plain line at least this often, whatever `every` says. */
static const double PLAIN_LINE_MAX_GAP_S = 60.0;

/* "1h02m", "3m05s" or "12s". */
static void format_duration(char *out, size_t outlen, double seconds) {
    if (!(seconds >= 0) || seconds > 1e7) {        /* also catches NaN */
        snprintf(out, outlen, "--");
        return;
    }
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(out, outlen, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
    else if (s >= 60) snprintf(out, outlen, "%ldm%02lds", s / 60, s % 60);
    else snprintf(out, outlen, "%lds", s);
}

/* "850", "12.3k", "4.56M" examples per second. */
static void format_rate(char *out, size_t outlen, double per_second) {
    if (per_second >= 1e6) snprintf(out, outlen, "%.2fM", per_second / 1e6);
    else if (per_second >= 1e4) snprintf(out, outlen, "%.1fk", per_second / 1e3);
    else snprintf(out, outlen, "%.0f", per_second);
}

void progress_update(Progress *pr, long step, float loss, long examples_done, const char *extra) {
    if (pr->quiet) return;
    double now = now_seconds();
    int last_step = step >= pr->total_steps;

    if (pr->is_tty) {
        /* Throttle: about 10 redraws a second, but always draw the last step. */
        if (pr->t_last_draw > 0 && now - pr->t_last_draw < 0.1 && !last_step) return;
    } else {
        double last = pr->t_last_draw > 0 ? pr->t_last_draw : pr->t_start;
        if (step % pr->every != 0 && !last_step && now - last < PLAIN_LINE_MAX_GAP_S) return;
    }
    pr->t_last_draw = now;

    double elapsed = now - pr->t_start;
    char rate[32], eta[32];
    format_rate(rate, sizeof rate, elapsed > 0 ? (double)examples_done / elapsed : 0.0);
    /* Time left = time per step so far x steps still to do. */
    if (step > 0) format_duration(eta, sizeof eta, elapsed / (double)step * (double)(pr->total_steps - step));
    else format_duration(eta, sizeof eta, -1.0);

    if (pr->is_tty) fputs("\r", stdout);
    printf("step %*ld/%ld  train loss %.4f", pr->total_steps >= 10000 ? 6 : 4, step, pr->total_steps, (double)loss);
    if (extra != NULL && extra[0] != '\0') printf("  %s", extra);
    printf("  %s %s/s  ETA %s", rate, pr->unit, eta);
    if (pr->is_tty) fputs("\033[K", stdout);    /* clear the rest of the old line */
    else fputc('\n', stdout);
    fflush(stdout);
}

void progress_end(Progress *pr) {
    if (pr->quiet) return;
    double elapsed = now_seconds() - pr->t_start;
    char took[32];
    if (elapsed < 60) snprintf(took, sizeof took, "%.1fs", elapsed);
    else format_duration(took, sizeof took, elapsed);
    if (pr->is_tty && pr->t_last_draw > 0) fputc('\n', stdout);
    printf("done in %s\n", took);
    fflush(stdout);
}
