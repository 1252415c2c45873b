/* optim.c - Adam / AdamW, global gradient-norm clipping, the learning-rate
 * schedule and the moving average of the weights (see optim.h). All of them
 * run over the one flat Params buffer. */
#include "nn/optim.h"
#include "kernels/matmul.h"
#include "util/error.h"

#include <math.h>
#include "util/openmp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int adam_init(Adam *opt, const Params *p, float lr, float weight_decay) {
    memset(opt, 0, sizeof *opt);
    opt->lr = lr;
    opt->beta1 = 0.9f;
    opt->beta2 = 0.999f;
    opt->eps = 1e-8f;
    opt->weight_decay = weight_decay;
    opt->step = 0;
    opt->size = p->size;
    opt->m = calloc(p->size ? p->size : 1, sizeof(float));
    opt->v = calloc(p->size ? p->size : 1, sizeof(float));
    if (opt->m == NULL || opt->v == NULL) {
        adam_free(opt);
        return fail("out of memory allocating Adam moments for %zu parameters", p->size);
    }
    return 0;
}

void adam_free(Adam *opt) {
    free(opt->m);
    free(opt->v);
    opt->m = opt->v = NULL;
    opt->size = 0;
}

/* Adam (Kingma & Ba 2015) with decoupled weight decay (AdamW, Loshchilov &
 * Hutter 2019). At update t = 1, 2, ...:
 *   m = beta1 m + (1 - beta1) g            running mean of the gradient
 *   v = beta2 v + (1 - beta2) g^2          running mean of its square
 *   m_hat = m / (1 - beta1^t)              bias correction: m, v start at 0
 *   v_hat = v / (1 - beta2^t)
 *   w -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * w)
 * The decay term uses w before this update and is not scaled by the moments
 * ("decoupled"). It applies to every entry of the buffer, biases included. */
/* Parameters [i0, i1) of one update (adam_step): the AVX2 form on the first
 * multiple of 8 (the NEON form on the first multiple of 4), the scalar loop
 * on the rest; the same bits either way. */
static void adam_update_range(Adam *opt, Params *p, float lr, size_t i0, size_t i1,
                              double correction1, double correction2) {
    float b1 = opt->beta1, b2 = opt->beta2, eps = opt->eps, wd = opt->weight_decay;
    float *w = p->data;
    const float *g = p->grad;
    size_t i = i0;
    if (backend_uses_avx2()) /* the same operations 8 at a time (optim_avx2.c): same bits */
        i += adam_update_avx2(w + i0, g + i0, opt->m + i0, opt->v + i0, i1 - i0, b1, b2, eps, wd,
                              lr, correction1, correction2);
#if defined(__aarch64__)
    else if (backend_uses_neon()) /* the same operations 4 at a time (optim_neon.c): same bits */
        i += adam_update_neon(w + i0, g + i0, opt->m + i0, opt->v + i0, i1 - i0, b1, b2, eps, wd,
                              lr, correction1, correction2);
#endif
    for (; i < i1; i++) {
        opt->m[i] = b1 * opt->m[i] + (1.0f - b1) * g[i];
        opt->v[i] = b2 * opt->v[i] + (1.0f - b2) * g[i] * g[i];
        double m_hat = opt->m[i] / correction1;
        double v_hat = opt->v[i] / correction2;
        double update = m_hat / (sqrt(v_hat) + eps) + (double)wd * w[i];
        w[i] = (float)(w[i] - lr * update);
    }
}

void adam_step(Adam *opt, Params *p, float lr) {
    if (opt->size != p->size || opt->m == NULL) {
        fprintf(stderr, "adam_step: optimizer built for %zu parameters, model has %zu\n",
                opt->size, p->size);
        abort();
    }
    opt->step++;
    double correction1 = 1.0 - pow((double)opt->beta1, (double)opt->step);
    double correction2 = 1.0 - pow((double)opt->beta2, (double)opt->step);
    /* Each parameter's update is independent of the others: one band per
     * thread (bands of whole 64-parameter blocks) gives the same bits. */
    const int threads = threads_for_elements(p->size, THREAD_COSTS.adam_ns);
    if (threads <= 1) {
        adam_update_range(opt, p, lr, 0, p->size, correction1, correction2);
        return;
    }
    long long started = threads_now_ns(), done = 0;
#pragma omp parallel num_threads(threads)
    {
        size_t blocks = (p->size + 63) / 64, t = (size_t)omp_get_thread_num(), n = (size_t)omp_get_num_threads();
        size_t i0 = blocks * t / n * 64, i1 = blocks * (t + 1) / n * 64;
        if (i1 > p->size) i1 = p->size;
        if (i0 < i1) adam_update_range(opt, p, lr, i0, i1, correction1, correction2);
        if (t == 0) done = threads_now_ns();
    }
    threads_note_join(started, done);
}

/* Global L2 norm over every gradient; if it exceeds max_norm, every gradient
 * is multiplied by max_norm / norm (direction kept, length capped). */
float clip_grad_norm(Params *p, float max_norm) {
    double sum_sq = 0.0;
    for (size_t i = 0; i < p->size; i++) sum_sq += (double)p->grad[i] * p->grad[i];
    double norm = sqrt(sum_sq);
    if (max_norm > 0.0f && norm > max_norm) {
        float scale = (float)(max_norm / norm);
        for (size_t i = 0; i < p->size; i++) p->grad[i] *= scale;
    }
    return (float)norm;
}

/* step < warmup:   base_lr * step / warmup               (0 at step 0)
 * afterwards:      base_lr * (min_ratio + (1 - min_ratio) * (1 + cos(pi * t)) / 2)
 *                  with t = (step - warmup) / (total - warmup) going 0 -> 1,
 * so lr = base_lr right at the end of warm-up and min_ratio * base_lr at step
 * total (and after it). */
float lr_schedule(long step, long total, long warmup, float base_lr, float min_ratio) {
    if (step < 0) step = 0;
    if (warmup > 0 && step < warmup) return base_lr * (float)step / (float)warmup;
    if (total <= warmup) return base_lr;   /* no room for a decay phase */
    double t = (double)(step - warmup) / (double)(total - warmup);
    if (t > 1.0) t = 1.0;
    double cosine = 0.5 * (1.0 + cos(M_PI * t));
    return (float)(base_lr * (min_ratio + (1.0 - min_ratio) * cosine));
}

int weight_average_init(WeightAverage *a, const Params *p, float decay) {
    memset(a, 0, sizeof *a);
    if (!(decay > 0.0f && decay < 1.0f)) return fail("weight average: decay %g, expected 0 < decay < 1", (double)decay);
    a->avg = malloc(sizeof(float) * (p->size ? p->size : 1));
    if (a->avg == NULL) return fail("out of memory allocating the average of %zu parameters", p->size);
    memcpy(a->avg, p->data, sizeof(float) * p->size);
    a->decay = decay;
    a->size = p->size;
    return 0;
}

void weight_average_free(WeightAverage *a) {
    free(a->avg);
    a->avg = NULL;
    a->size = 0;
}

/* avg [size] = decay avg + (1 - decay) w [size] */
void weight_average_update(WeightAverage *a, const Params *p) {
    const float keep = a->decay, take = 1.0f - a->decay;
    const float *w = p->data;
    for (size_t i = 0; i < a->size; i++) a->avg[i] = keep * a->avg[i] + take * w[i];
}
