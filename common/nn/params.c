/* params.c - one contiguous parameter buffer, a twin gradient buffer, and a
 * table of named views into them (see params.h).
 *
 * Tensors are packed back to back with no padding, so p->size is exactly the
 * model's number of parameters. The two buffers themselves start on a 64-byte
 * boundary (a cache line, and a whole AVX-512 register's worth). */
#include "nn/params.h"
#include "util/error.h"
#include "util/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Misuse of this API is a bug in the calling code, not bad user input:
 * say what went wrong and stop, rather than limp on with a broken model. */
static void params_abort(const char *what, const char *name) {
    fprintf(stderr, "params: %s (tensor '%s')\n", what, name ? name : "(null)");
    abort();
}

void params_init(Params *p) {
    memset(p, 0, sizeof *p);
}

size_t params_add(Params *p, const char *name, int ndim, const int *dims) {
    if (p->data != NULL) params_abort("params_add called after params_alloc", name);
    if (name == NULL || name[0] == '\0') params_abort("empty tensor name", name);
    if (strlen(name) >= PARAMS_NAME_LEN) params_abort("tensor name too long", name);
    if (p->n_tensors >= PARAMS_MAX_TENSORS) params_abort("too many tensors (PARAMS_MAX_TENSORS)", name);
    if (ndim < 1 || ndim > PARAMS_MAX_DIMS) params_abort("ndim must be 1..PARAMS_MAX_DIMS", name);
    if (params_find(p, name) != NULL) params_abort("duplicate tensor name", name);

    ParamTensor *t = &p->tensors[p->n_tensors];
    memset(t, 0, sizeof *t);
    strcpy(t->name, name);
    t->ndim = ndim;
    t->count = 1;
    for (int d = 0; d < ndim; d++) {
        if (dims[d] <= 0) params_abort("every dimension must be >= 1", name);
        t->dims[d] = dims[d];
        t->count *= (size_t)dims[d];
    }
    t->offset = p->size;
    p->size += t->count;
    p->n_tensors++;
    return t->offset;
}

/* aligned_alloc wants the size to be a multiple of the alignment. */
static float *alloc_floats_aligned(size_t count) {
    size_t bytes = count * sizeof(float);
    bytes = (bytes + 63) / 64 * 64;
    if (bytes == 0) bytes = 64;
    xmalloc_count(bytes);   /* while a model is built: counted (train/memory.h) */
    return aligned_alloc(64, bytes);
}

int params_alloc(Params *p) {
    if (p->data != NULL) params_abort("params_alloc called twice", NULL);
    p->data = alloc_floats_aligned(p->size);
    p->grad = alloc_floats_aligned(p->size);
    if (p->data == NULL || p->grad == NULL) {
        free(p->data);
        free(p->grad);
        p->data = p->grad = NULL;
        return fail("out of memory allocating %zu parameters (%zu MiB for data + grad)",
                    p->size, 2 * p->size * sizeof(float) >> 20);
    }
    memset(p->data, 0, p->size * sizeof(float));
    memset(p->grad, 0, p->size * sizeof(float));
    return 0;
}

/* Frees the buffers and returns p to the empty state of params_init. */
void params_free(Params *p) {
    free(p->data);
    free(p->grad);
    params_init(p);
}

float *params_data(Params *p, size_t offset) {
    if (p->data == NULL) params_abort("params_data before params_alloc", NULL);
    if (offset >= p->size) params_abort("offset out of range in params_data", NULL);
    return p->data + offset;
}

float *params_grad(Params *p, size_t offset) {
    if (p->grad == NULL) params_abort("params_grad before params_alloc", NULL);
    if (offset >= p->size) params_abort("offset out of range in params_grad", NULL);
    return p->grad + offset;
}

void params_zero_grad(Params *p) {
    if (p->grad) memset(p->grad, 0, p->size * sizeof(float));
}

const ParamTensor *params_find(const Params *p, const char *name) {
    for (int t = 0; t < p->n_tensors; t++)
        if (strcmp(p->tensors[t].name, name) == 0) return &p->tensors[t];
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Initialisers                                                              */
/* ------------------------------------------------------------------------ */

/* x[i] ~ U(-limit, limit) */
void init_uniform(float *x, size_t count, float limit, Rng *r) {
    for (size_t i = 0; i < count; i++)
        x[i] = (2.0f * rng_uniform(r) - 1.0f) * limit;
}

/* x[i] ~ N(0, std^2) */
void init_normal(float *x, size_t count, float std, Rng *r) {
    for (size_t i = 0; i < count; i++)
        x[i] = std * rng_normal(r);
}

/* Glorot & Bengio (2010): U(-a, a) with a = sqrt(6 / (fan_in + fan_out)) keeps
 * the activation variance roughly equal going forward and backward. */
void init_xavier(float *x, int fan_in, int fan_out, Rng *r) {
    float limit = sqrtf(6.0f / (float)(fan_in + fan_out));
    init_uniform(x, (size_t)fan_in * (size_t)fan_out, limit, r);
}

void init_constant(float *x, size_t count, float value) {
    for (size_t i = 0; i < count; i++) x[i] = value;
}
