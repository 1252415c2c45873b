/* skip_threads.h - for the tests that compare thread counts (1 thread and 2
 * must give the same bits): a build without OpenMP (make OMP=0) has one
 * thread only, so there they skip, with a note, rather than compare a
 * thread with itself. Include after <cmocka.h>. */
#ifndef SKIP_THREADS_H
#define SKIP_THREADS_H
#include "util/openmp.h"

/* Inside a cmocka test: returns in a build with OpenMP; in one without, says
 * so and skips the test. */
static inline void skip_without_threads(void) {
    if (openmp_enabled()) return;
    print_message("note: built without OpenMP (make OMP=0): one thread, nothing to compare it with; skipped\n");
    skip();
}

#endif
