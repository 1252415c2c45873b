/* optim.h - Adam/AdamW over a whole Params buffer, gradient-norm clipping,
 * and a learning-rate schedule (linear warm-up, then cosine decay). */
#ifndef OPTIM_H
#define OPTIM_H
#include <stddef.h>
#include "nn/params.h"

typedef struct {
    float lr, beta1, beta2, eps;
    float weight_decay;   /* AdamW: decoupled decay; 0 = plain Adam */
    long step;            /* number of updates done */
    float *m, *v;         /* [size] first and second moments */
    size_t size;
} Adam;

/* Allocates m and v for p->size floats. Returns 0 or -1 (fail). */
int adam_init(Adam *opt, const Params *p, float lr, float weight_decay);
void adam_free(Adam *opt);
/* One update of p->data from p->grad at learning rate lr (from the schedule). */
void adam_step(Adam *opt, Params *p, float lr);

/* Global L2 norm of p->grad; when it exceeds max_norm (> 0), scale all
 * gradients down to max_norm. Returns the norm before clipping. */
float clip_grad_norm(Params *p, float max_norm);

/* lr at step (0-based) of total: linear warm-up over warmup steps from 0 to
 * base_lr, then cosine down to min_ratio * base_lr at step total. */
float lr_schedule(long step, long total, long warmup, float base_lr, float min_ratio);

#endif
