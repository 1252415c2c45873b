/* params.h - all of a model's parameters in ONE contiguous buffer, its
 * gradients in a twin buffer of the same size, and a table of named views.
 *
 * Building a model is two passes:
 *   Params p; params_init(&p);
 *   size_t w = params_add(&p, "enc.W_x", 2, (int[]){E, H});   // declare
 *   ...
 *   params_alloc(&p);                                          // allocate once
 *   float *W = params_data(&p, w), *dW = params_grad(&p, w);   // views
 * The optimizer, gradient clipping, the checkpoint and the gradient checker
 * then each work on p.data / p.grad as one array of p.size floats. */
#ifndef PARAMS_H
#define PARAMS_H
#include <stddef.h>
#include "util/rng.h"

#define PARAMS_MAX_TENSORS 256
#define PARAMS_NAME_LEN 48
#define PARAMS_MAX_DIMS 4

typedef struct {
    char name[PARAMS_NAME_LEN];
    int ndim;
    int dims[PARAMS_MAX_DIMS];
    size_t offset;   /* in floats, from the start of data/grad */
    size_t count;    /* product of dims */
} ParamTensor;

typedef struct {
    float *data;     /* [size] parameters */
    float *grad;     /* [size] gradients, same layout */
    size_t size;
    int n_tensors;
    ParamTensor tensors[PARAMS_MAX_TENSORS];
} Params;

void params_init(Params *p);
/* Declare a tensor; returns its offset (a handle for params_data/grad).
 * Names must be unique. Aborts (programming error, not user input) when the
 * table is full or after params_alloc. */
size_t params_add(Params *p, const char *name, int ndim, const int *dims);
/* Allocate data and grad (zeroed), 64-byte aligned. Returns 0 or -1 (fail). */
int params_alloc(Params *p);
void params_free(Params *p);
float *params_data(Params *p, size_t offset);
float *params_grad(Params *p, size_t offset);
void params_zero_grad(Params *p);
/* Look a tensor up by name; NULL when absent. */
const ParamTensor *params_find(const Params *p, const char *name);

/* Initialisers (fill count floats at x). */
void init_uniform(float *x, size_t count, float limit, Rng *r);          /* U(-limit, limit) */
void init_normal(float *x, size_t count, float std, Rng *r);
void init_xavier(float *x, int fan_in, int fan_out, Rng *r);             /* Glorot uniform, fan_in*fan_out floats */
void init_constant(float *x, size_t count, float value);

#endif
