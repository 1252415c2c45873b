/* examples.c - allocating a batch of examples (see examples.h). */
#include "data/examples.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

void examples_alloc(Examples *e, int max_B, int n_in, int n_out, int float_inputs) {
    memset(e, 0, sizeof *e);
    e->n_in = n_in;
    e->n_out = n_out;
    if (float_inputs) e->values = xcalloc((size_t)max_B * n_in, sizeof(float));
    else e->tokens = xcalloc((size_t)max_B * n_in, sizeof(int));
    e->targets = xcalloc((size_t)max_B * n_out, sizeof(int));
}

void examples_free(Examples *e) {
    free(e->tokens);
    free(e->values);
    free(e->targets);
    memset(e, 0, sizeof *e);
}
