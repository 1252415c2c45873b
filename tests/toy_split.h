/* toy_split.h - a hand-made split for the model tests: n examples over the
 * symbols 4 .. 4+n_sym-1 (ids 0..3 are the specials), with random lengths in
 * [min_len, max_len], target = the source copied or reversed. Small enough to
 * gradient-check a whole model on, and padded (lengths differ). */
#ifndef TOY_SPLIT_H
#define TOY_SPLIT_H
#include <stdint.h>
#include "data/dataset.h"

#define TOY_MAX_EXAMPLES 512
#define TOY_MAX_LEN 16

typedef struct {
    Split split;
    Example ex[TOY_MAX_EXAMPLES];
    int storage[TOY_MAX_EXAMPLES][2][TOY_MAX_LEN];
    int *refs_ptr[TOY_MAX_EXAMPLES];
} ToySplit;

/* reverse: 0 = copy task, 1 = reverse task. */
void toy_split(ToySplit *ts, int n, int n_sym, int min_len, int max_len, int reverse, uint64_t seed);

#endif
