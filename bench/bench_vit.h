/* bench_vit.h - what the benchmarks of chapter 07's ViT training step share
 * (bench_data_parallel.c, bench_fetch.c, bench_bf16.c): one batch of Fashion-MNIST training
 * images, and a model built as classifier_train builds it, in replicas that
 * split the batch, with their AdamW. Static inline, as in bench_common.h. */
#ifndef BENCH_VIT_H
#define BENCH_VIT_H

#include <stdio.h>
#include <string.h>

#include "07_vision_transformer/recipe.h"
#include "07_vision_transformer/vit.h"
#include "data/fashion_mnist.h"
#include "nn/optim.h"
#include "train/classifier.h"
#include "util/error.h"
#include "util/rng.h"

enum { BENCH_VIT_MAX_REPLICAS = 2 };

/* Loads Fashion-MNIST (the Debian package's files) into *data and draws one
 * training batch of B images into *batch (the training stream of seed 1,
 * augmented as the task draws it). 0, or -1 with the reason printed. */
static inline int bench_vit_batch(const char *program, FashionMnist *data, Examples *batch, int B) {
    if (fashion_mnist_load(data, NULL, 1) < 0) {
        fprintf(stderr, "%s: %s\n", program, last_error());
        return -1;
    }
    FashionMnistTask ft = {.d = data};
    ExampleTask task;
    fashion_mnist_task(&ft, &task);
    examples_alloc(batch, B, task.n_in, task.n_out, 1);
    Rng rng;
    rng_seed(&rng, 1, 1);
    task.train_batch(task.self, batch, B, &rng);
    return 0;
}

/* n replicas of the ViT of cfg, each for B / n images, and the AdamW of
 * replica 0's parameters (the long presets' lr and weight decay). */
typedef struct {
    Classifier replicas[BENCH_VIT_MAX_REPLICAS];
    int n;
    Adam opt;
} BenchVit;

static inline int bench_vit_create(BenchVit *m, const VitConfig *cfg, int n, int B) {
    memset(m, 0, sizeof *m);
    m->n = n;
    for (int k = 0; k < n; k++)
        if (vit_build(&m->replicas[k], cfg, B / n, 1 + (uint64_t)k) < 0) return -1;
    return adam_init(&m->opt, m->replicas[0].params, 1.5e-3f, 0.05f);
}

static inline void bench_vit_free(BenchVit *m) {
    for (int k = 0; k < m->n; k++)
        if (m->replicas[k].destroy) m->replicas[k].destroy(m->replicas[k].self);
    adam_free(&m->opt);
}

#endif
