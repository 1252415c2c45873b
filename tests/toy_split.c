/* toy_split.c - the hand-made splits the model tests train and check on
 * (see toy_split.h). */
#include "toy_split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"

void toy_split(ToySplit *ts, int n, int n_sym, int min_len, int max_len, int reverse, uint64_t seed) {
    if (n > TOY_MAX_EXAMPLES || max_len > TOY_MAX_LEN || min_len < 1 || min_len > max_len) {
        fprintf(stderr, "toy_split: n %d or lengths %d..%d out of range\n", n, min_len, max_len);
        abort();
    }
    Rng rng;
    rng_seed(&rng, seed, 3);
    memset(ts, 0, sizeof *ts);
    for (int i = 0; i < n; i++) {
        Example *e = &ts->ex[i];
        int len = min_len + (int)rng_below(&rng, (uint32_t)(max_len - min_len + 1));
        for (int t = 0; t < len; t++) ts->storage[i][0][t] = 4 + (int)rng_below(&rng, (uint32_t)n_sym);
        for (int t = 0; t < len; t++)
            ts->storage[i][1][t] = ts->storage[i][0][reverse ? len - 1 - t : t];
        e->src = ts->storage[i][0];
        e->src_len = len;
        e->tgt = ts->storage[i][1];
        e->tgt_len = len;
        e->n_refs = 1;
        ts->refs_ptr[i] = e->tgt;
        e->refs = &ts->refs_ptr[i];
        e->ref_lens = &e->tgt_len;
        e->src_text = "";
    }
    ts->split.n = n;
    ts->split.ex = ts->ex;
}
