/* bench_data_parallel.c - two ways to use two cores for one training step:
 * split each product between the threads (one model, the default), or
 * split the batch between two replicas (copies) of the model, one thread
 * each (--replicas 2, recipe_train_step in chapter 07's recipe.h).
 *
 *   build/bench/bench_data_parallel [--out DIR] [--reps N]
 *
 * For chapter 07's ViT at two sizes (the quick default: patch 7, 2 blocks of
 * D 64; the D 96 long preset, --preset long-d96: patch 4, 6 blocks of D 96, F 192), on a batch of
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
#include "bench_vit.h"
#include "kernels/matmul.h"

enum { BATCH = 128, MAX_REPS = 101, N_WAYS = 3 };

static const char *const WAY_NAMES[N_WAYS] = {"1 model, 1 thread", "1 model, 2 threads", "2 replicas"};
static const char *const WAY_KEYS[N_WAYS] = {"one_model_1_thread", "one_model_2_threads", "two_replicas"};

typedef struct {
    const char *name;
    VitConfig cfg;
} ModelSize;

/* One way of running the step: its replicas of the model (1 or 2), their optimiser, its threads. */
typedef struct {
    BenchVit model;
    int threads;
} Way;

static double timed_step(Way *w, const Examples *batch) {
    threads_set(w->threads);
    double t0 = bench_now_ms();
    recipe_train_step(w->model.replicas, w->model.n, &w->model.opt, batch, 1.0f, 1.5e-3f, 0.0f);
    return bench_now_ms() - t0;
}

int main(int argc, char **argv) {
    const char *program = "bench_data_parallel", *out_dir = "bench/results";
    int reps = 31;   /* the long model's steps vary by 20% on this shared host: 9 were not enough */
    if (bench_out_reps_args(program, argc, argv, &out_dir, &reps, MAX_REPS) < 0) return 2;
    static FashionMnist data;
    Examples batch;
    if (bench_vit_batch(program, &data, &batch, BATCH) < 0) return 1;

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
        Way ways[N_WAYS];
        const int replicas[N_WAYS] = {1, 1, 2}, threads[N_WAYS] = {1, 2, 2};
        for (int w = 0; w < N_WAYS; w++) {
            ways[w].threads = threads[w];
            if (bench_vit_create(&ways[w].model, &sizes[s].cfg, replicas[w], BATCH) < 0) {
                fprintf(stderr, "%s: %s\n", program, last_error());
                return 1;
            }
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
        for (int w = 0; w < N_WAYS; w++) bench_vit_free(&ways[w].model);
    }
    examples_free(&batch);
    fashion_mnist_free(&data);
    if (bench_close_result(&tsv_file, program) < 0) return 1;
    printf("\n  %s/data_parallel.tsv\n", out_dir);
    return 0;
}
