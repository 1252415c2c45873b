/* openmp.h - OpenMP's run-time calls, or their one-thread answers in a build
 * without OpenMP (make OMP=0, or Apple's clang without Homebrew's libomp).
 *
 * Include this instead of <omp.h>. With OpenMP (-fopenmp: the compiler
 * defines _OPENMP) it is <omp.h> itself. Without it, the `#pragma omp` lines
 * are ignored, every loop runs on the calling thread, and the calls below
 * answer what OpenMP answers on one thread: thread 0 of 1, one processor,
 * not inside a parallel region; setting the count changes nothing. The
 * results are the bits of an OpenMP build on one thread (OMP_NUM_THREADS=1).
 *
 * openmp_enabled() tells the tests which build they are in (1: OpenMP): a test
 * that compares 1 thread with 2 skips itself when there is only one. */
#ifndef OPENMP_H
#define OPENMP_H

#ifdef _OPENMP
#include <omp.h>

static inline int openmp_enabled(void) { return 1; }

#else

static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_num_procs(void) { return 1; }
static inline int omp_in_parallel(void) { return 0; }
static inline void omp_set_num_threads(int n) { (void)n; }

static inline int openmp_enabled(void) { return 0; }

#endif
#endif
