/* bench_common.h - the clock, the load average and the sort every benchmark
 * program uses (bench/bench_*.c; each is its own program, so these small
 * functions live here as static inline ones instead of in the library). */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdio.h>
#include <time.h>

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

#endif
