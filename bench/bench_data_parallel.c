/* bench_data_parallel.c - two ways to use two cores for one training step:
 * split each product between the threads (one model, the default), or
 * split the batch between two replicas (copies) of the model, one thread
 * each (--replicas 2, classifier_train_step_parallel in train/classifier.h).
 *
 *   build/bench/bench_data_parallel [--out DIR] [--reps N]
 *
 * For chapter 07's ViT at two sizes (the quick default: patch 7, 2 blocks of
 * D 64; the long preset: patch 4, 6 blocks of D 96, F 192), on a batch of
 * 128 Fashion-MNIST training images, it times whole training steps (zero
 * the gradients, forward, backward, clip, AdamW) in three configurations:
 *
 *   1 model, 1 thread    the baseline
 *   1 model, 2 threads   each product's rows or columns split in two
 *   2 replicas           64 images each, one thread each, gradients summed
 *
 * The three take turns step by step (this shared machine's speed drifts by
 * tens of percent over minutes); each figure is the median of --reps (31) steps
 * after one warm-up step. Writes DIR/data_parallel.tsv (model config ms
 * images_per_s). Prints figures and ratios; never passes or fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "07_vision_transformer/vit.h"
#include "data/fashion_mnist.h"
#include "kernels/matmul.h"
#include "nn/optim.h"
#include "train/classifier.h"

enum { BATCH = 128, MAX_REPS = 101, N_WAYS = 3 };

static const char *const WAY_NAMES[N_WAYS] = {"1 model, 1 thread", "1 model, 2 threads", "2 replicas"};
static const char *const WAY_KEYS[N_WAYS] = {"one_model_1_thread", "one_model_2_threads", "two_replicas"};

typedef struct {
    const char *name;
    VitConfig cfg;
} ModelSize;

/* One way of running the step: its replicas of the model (1 or 2) and their optimiser. */
typedef struct {
    Classifier replicas[2];
    int n_replicas, threads;
    Adam opt;
} Way;

static int way_create(Way *w, const char *config, int n_replicas, int threads) {
    memset(w, 0, sizeof *w);
    w->n_replicas = n_replicas;
    w->threads = threads;
    for (int k = 0; k < n_replicas; k++)
        if (vit_build(&w->replicas[k], config, BATCH / n_replicas, 1 + (uint64_t)k) < 0) return -1;
    return adam_init(&w->opt, w->replicas[0].params, 1.5e-3f, 0.05f);
}

static void way_free(Way *w) {
    for (int k = 0; k < w->n_replicas; k++)
        if (w->replicas[k].destroy) w->replicas[k].destroy(w->replicas[k].self);
    adam_free(&w->opt);
}

static double timed_step(Way *w, const Examples *batch) {
    threads_set(w->threads);
    double t0 = bench_now_ms();
    classifier_train_step_parallel(w->replicas, w->n_replicas, &w->opt, batch, 1.0f, 1.5e-3f);
    return bench_now_ms() - t0;
}

int main(int argc, char **argv) {
    const char *program = "bench_data_parallel", *out_dir = "bench/results";
    int reps = 31;   /* the long model's steps vary by 20% on this shared host: 9 were not enough */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            if (bench_int_arg(program, "--reps", argv[++i], 1, MAX_REPS, &reps) < 0) return 2;
        } else {
            fprintf(stderr, "%s: unknown argument '%s'; usage: %s [--out DIR] [--reps N (1..%d)]\n", program,
                    argv[i], program, MAX_REPS);
            return 2;
        }
    }
    FashionMnist data;
    if (fashion_mnist_load(&data, NULL, 1) < 0) {
        fprintf(stderr, "%s: %s\n", program, last_error());
        return 1;
    }
    FashionMnistTask ft = {.d = &data};
    ExampleTask task;
    fashion_mnist_task(&ft, &task);
    Examples batch;
    examples_alloc(&batch, BATCH, task.n_in, task.n_out, 1);
    Rng rng;
    rng_seed(&rng, 1, 1);
    task.train_batch(task.self, &batch, BATCH, &rng);

    const ModelSize sizes[] = {
        {"quick (P7 L2 D64)", {.patch = {1, 28, 28, 7, 64}, .layers = 2, .heads = 4, .ff = 128,
                               .classes = FASHION_MNIST_CLASSES}},
        {"long (P4 L6 D96)", {.patch = {1, 28, 28, 4, 96}, .layers = 6, .heads = 4, .ff = 192,
                              .classes = FASHION_MNIST_CLASSES}},
    };
    AtomicFile tsv_file;
    FILE *tsv = bench_open_result(&tsv_file, program, out_dir, "data_parallel.tsv");
    if (!tsv) return 1;
    fprintf(tsv, "model\tconfig\tms\timages_per_s\n");
    printf("bench_data_parallel: a ViT training step of %d images, median of %d steps, the three ways taking "
           "turns (backend %s, load average %.2f)\n\n", BATCH, reps, backend_name(backend_current()),
           bench_load_average());
    printf("  %-18s | %-18s | %9s | %9s | %s\n", "model", "way", "ms/step", "images/s", "against 1 model, 2 threads");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        char config[CLASSIFIER_CONFIG_MAX];
        vit_config_text(config, sizeof config, &sizes[s].cfg, 1);
        Way ways[N_WAYS];
        const int replicas[N_WAYS] = {1, 1, 2}, threads[N_WAYS] = {1, 2, 2};
        for (int w = 0; w < N_WAYS; w++)
            if (way_create(&ways[w], config, replicas[w], threads[w]) < 0) {
                fprintf(stderr, "%s: %s\n", program, last_error());
                return 1;
            }
        static double samples[N_WAYS][MAX_REPS];
        for (int w = 0; w < N_WAYS; w++) timed_step(&ways[w], &batch);   /* warm-up */
        for (int r = 0; r < reps; r++)
            for (int w = 0; w < N_WAYS; w++) samples[w][r] = timed_step(&ways[w], &batch);
        double median[N_WAYS];
        for (int w = 0; w < N_WAYS; w++) {
            qsort(samples[w], (size_t)reps, sizeof(double), bench_compare_doubles);
            median[w] = samples[w][reps / 2];
        }
        for (int w = 0; w < N_WAYS; w++) {
            const double per_s = BATCH / (median[w] / 1e3);
            printf("  %-18s | %-18s | %9.2f | %9.0f | %.2fx\n", sizes[s].name, WAY_NAMES[w], median[w], per_s,
                   median[1] / median[w]);
            fprintf(tsv, "%s\t%s\t%.3f\t%.1f\n", sizes[s].name, WAY_KEYS[w], median[w], per_s);
        }
        for (int w = 0; w < N_WAYS; w++) way_free(&ways[w]);
    }
    examples_free(&batch);
    fashion_mnist_free(&data);
    if (bench_close_result(&tsv_file, program) < 0) return 1;
    printf("\n  %s/data_parallel.tsv\n", out_dir);
    return 0;
}
