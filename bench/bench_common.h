/* bench_common.h - the clock, the load average, the sort, the flag parsing
 * and the result files every benchmark program uses (bench/bench_*.c; each is its own program, so these small
 * functions live here as static inline ones instead of in the library). */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/error.h"
#include "util/util.h"

/* Milliseconds on a clock that never jumps (CLOCK_MONOTONIC). */
static inline double bench_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

/* The same clock in seconds. */
static inline double bench_now_seconds(void) { return 1e-3 * bench_now_ms(); }

/* The 1-minute load average: how many processes wanted a CPU lately (this
 * benchmark included, once it has been running a while). */
static inline double bench_load_average(void) {
    double load = 0.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1) load = 0.0;
        fclose(f);
    }
    return load;
}

/* For qsort over doubles, ascending (the medians). */
static inline int bench_compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A whole number in [min, max] from the value of a flag: 0, or -1 after one
 * line on stderr naming the program, the flag, what was given and what was
 * expected ("5x", "", "-3" and out-of-range values are all refused). */
static inline int bench_int_arg(const char *program, const char *flag, const char *text, int min,
                                int max, int *out) {
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < min || value > max) {
        fprintf(stderr, "%s: %s expects a whole number from %d to %d, got '%s'\n", program, flag, min,
                max, text);
        return -1;
    }
    *out = (int)value;
    return 0;
}

/* The flags of a benchmark that takes only `--out DIR` and `--reps N`
 * (1..max_reps): 0, or -1 after one line on stderr naming what was wrong and
 * the usage (the caller exits 2). *out_dir and *reps keep their defaults
 * unless given. */
static inline int bench_out_reps_args(const char *program, int argc, char **argv, const char **out_dir,
                                      int *reps, int max_reps) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            *out_dir = argv[++i];
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            if (bench_int_arg(program, "--reps", argv[++i], 1, max_reps, reps) < 0) return -1;
        } else {
            fprintf(stderr, "%s: unknown argument '%s'; usage: %s [--out DIR] [--reps N (1..%d)]\n", program,
                    argv[i], program, max_reps);
            return -1;
        }
    }
    return 0;
}

/* A positive number from the value of a flag: 0, or -1 with one line on stderr. */
static inline int bench_positive_arg(const char *program, const char *flag, const char *text,
                                     double *out) {
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(value > 0.0) || value > 1e9) {
        fprintf(stderr, "%s: %s expects a positive number, got '%s'\n", program, flag, text);
        return -1;
    }
    *out = value;
    return 0;
}

/* Open DIR/NAME (creating DIR) for a result file, written atomically: the
 * file appears, whole, only at bench_close_result, so a benchmark stopped
 * half-way leaves the previous results as they were. Returns the stream, or
 * NULL after one line on stderr naming the program and the file. */
static inline FILE *bench_open_result(AtomicFile *out, const char *program, const char *dir,
                                      const char *name) {
    char path[1024];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof path) {
        fprintf(stderr, "%s: output path too long: '%s/%s'\n", program, dir, name);
        return NULL;
    }
    if (make_dirs(dir) != 0 || atomic_open(out, path) != 0) {
        fprintf(stderr, "%s: %s\n", program, last_error());
        return NULL;
    }
    return out->f;
}

/* Move a result file opened by bench_open_result into place: 0, or -1
 * after one line on stderr. */
static inline int bench_close_result(AtomicFile *out, const char *program) {
    if (atomic_close(out, 1) != 0) {
        fprintf(stderr, "%s: %s\n", program, last_error());
        return -1;
    }
    return 0;
}

#endif
