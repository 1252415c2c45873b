/* optim.h - Adam/AdamW over a whole Params buffer, gradient-norm clipping,
 * a learning-rate schedule (linear warm-up, then cosine decay), and an
 * exponential moving average of the weights. */
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

/* adam_step's loop over the first n - n % 8 parameters with AVX2 (optim_avx2.c;
 * only when backend_uses_avx2()): the same bits. Returns how many it did. */
size_t adam_update_avx2(float *w, const float *g, float *m, float *v, size_t n, float beta1,
                        float beta2, float eps, float weight_decay, float lr, double correction1,
                        double correction2);
/* The same over the first n - n % 4 with NEON (optim_neon.c; AArch64 only,
 * when backend_uses_neon()): the same bits. */
size_t adam_update_neon(float *w, const float *g, float *m, float *v, size_t n, float beta1,
                        float beta2, float eps, float weight_decay, float lr, double correction1,
                        double correction2);

/* Global L2 norm of p->grad; when it exceeds max_norm (> 0), scale all
 * gradients down to max_norm. Returns the norm before clipping. */
float clip_grad_norm(Params *p, float max_norm);

/* lr at step (0-based) of total: linear warm-up over warmup steps from 0 to
 * base_lr, then cosine down to min_ratio * base_lr at step total. */
float lr_schedule(long step, long total, long warmup, float base_lr, float min_ratio);

/* An exponential moving average of the weights (Polyak averaging; the "EMA"
 * of the DeiT recipe): after each update, avg = decay avg + (1 - decay) w,
 * starting from the weights it was made from. It averages about the last
 * 1 / (1 - decay) updates (0.9995: 2,000), and is evaluated in place of w
 * after training: a smoother point than wherever the last noisy steps left w. */
typedef struct {
    float decay;          /* in (0, 1) */
    float *avg;           /* [size] the averaged weights */
    size_t size;
} WeightAverage;

/* avg = a copy of p->data. Returns 0 or -1 (fail). */
int weight_average_init(WeightAverage *a, const Params *p, float decay);
void weight_average_free(WeightAverage *a);
/* avg = decay avg + (1 - decay) p->data, after an update of p. */
void weight_average_update(WeightAverage *a, const Params *p);

#endif
