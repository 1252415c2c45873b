/* bench_fetch.c - what fetching the next block while the kernel computes
 * (kernels/matmul_blocked.c, "Fetching the next block") buys on chapter 07's
 * long ViT, where the products' operands come cold from memory.
 *
 *   build/bench/bench_fetch [--out DIR] [--reps N]
 *
 * The training step of `--preset long-d96` as it trains (a batch of 128
 * Fashion-MNIST training images split between two replicas of the model, one
 * thread each: zero the gradients, forward, backward, sum, clip, AdamW), at
 * two sizes: that preset (patch 4 through 8 x 8 kernels, 6 blocks of D 96,
 * F 192, float products) and the wider model of its README (D 128, F 256,
 * bf16 products, when the CPU has AVX512_BF16). Each step runs with the
 * fetching on and off by turns (gemm_set_fetch_next; the bits are the same
 * either way, which this program checks on the loss); each figure is the
 * median of --reps steps (default 21) after one warm-up step of each. Only
 * the bf16 kernel fetches (GemmKernel.fetch_next), so the float model's two
 * columns run the same code: their ratio shows how far apart two equal
 * things are measured on this machine.
 *
 * Writes DIR/fetch.tsv (model fetch_on_ms fetch_off_ms) and prints the
 * ratio off / on (above 1: fetching is faster). Never passes or fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_vit.h"
#include "kernels/matmul.h"
#include "kernels/matmul_blocked.h"

enum { BATCH = 128, REPLICAS = 2, MAX_REPS = 101 };

typedef struct {
    const char *name;
    VitConfig cfg;
    int bf16;
} ModelSize;

/* One step from the same weights every time (replica 0's are reset to
 * `weights` first), so that the two ways compute the same thing; its loss
 * in *loss. */
static double timed_step(BenchVit *m, const Examples *batch, int fetch, const float *weights, double *loss) {
    Params *p = m->replicas[0].params;
    memcpy(p->data, weights, sizeof(float) * p->size);
    gemm_set_fetch_next(fetch);
    double t0 = bench_now_ms();
    *loss = recipe_train_step(m->replicas, m->n, &m->opt, batch, 1.0f, 1e-4f, 0.0f);
    return bench_now_ms() - t0;
}

int main(int argc, char **argv) {
    const char *program = "bench_fetch", *out_dir = "bench/results";
    int reps = 21;
    if (bench_out_reps_args(program, argc, argv, &out_dir, &reps, MAX_REPS) < 0) return 2;
    static FashionMnist data;
    Examples batch;
    if (bench_vit_batch(program, &data, &batch, BATCH) < 0) return 1;
    threads_set(REPLICAS);

    const ModelSize sizes[] = {
        {"long-d96 preset (P4 K8 L6 D96 F192, float)",
         {.patch = {.channels = 1, .rows = 28, .cols = 28, .P = 4, .K = 8, .D = 96}, .layers = 6, .heads = 4,
          .ff = 192, .classes = FASHION_MNIST_CLASSES},
         0},
        {"wider (P4 K8 L6 D128 F256, bf16)",
         {.patch = {.channels = 1, .rows = 28, .cols = 28, .P = 4, .K = 8, .D = 128}, .layers = 6, .heads = 4,
          .ff = 256, .classes = FASHION_MNIST_CLASSES},
         1},
    };
    AtomicFile tsv_file;
    FILE *tsv = bench_open_result(&tsv_file, program, out_dir, "fetch.tsv");
    if (!tsv) return 1;
    fprintf(tsv, "model\tfetch_on_ms\tfetch_off_ms\n");
    printf("%s: a training step of %d images on %d replicas (one thread each), fetching the next block on and off "
           "by turns, median of %d steps (backend %s, load average %.2f)\n\n", program, BATCH, REPLICAS, reps,
           backend_name(backend_current()), bench_load_average());
    printf("  %-40s | %11s | %12s | %s\n", "model", "on: ms/step", "off: ms/step", "off / on");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        if (sizes[s].bf16 && !cpu_has_avx512_bf16()) {
            printf("  %-40s | skipped: this CPU has no AVX512_BF16\n", sizes[s].name);
            continue;
        }
        if (matmul_precision_select(sizes[s].bf16 ? "bf16" : "float") < 0) {
            fprintf(stderr, "%s: %s\n", program, last_error());
            return 1;
        }
        BenchVit m;
        if (bench_vit_create(&m, &sizes[s].cfg, REPLICAS, BATCH) < 0) {
            fprintf(stderr, "%s: %s\n", program, last_error());
            return 1;
        }
        Params *p = m.replicas[0].params;
        float *weights = xmalloc(sizeof(float) * p->size);
        memcpy(weights, p->data, sizeof(float) * p->size);
        static double samples[2][MAX_REPS];
        double loss[2];
        for (int fetch = 0; fetch < 2; fetch++) timed_step(&m, &batch, fetch, weights, &loss[fetch]); /* warm-up */
        if (loss[0] != loss[1]) {
            fprintf(stderr, "%s: the loss differs with the fetching on (%.9g) and off (%.9g): it must not\n",
                    program, loss[1], loss[0]);
            return 1;
        }
        for (int r = 0; r < reps; r++)
            for (int fetch = 1; fetch >= 0; fetch--) samples[fetch][r] = timed_step(&m, &batch, fetch, weights, &loss[fetch]);
        double median[2];
        for (int fetch = 0; fetch < 2; fetch++) {
            qsort(samples[fetch], (size_t)reps, sizeof(double), bench_compare_doubles);
            median[fetch] = samples[fetch][reps / 2];
        }
        printf("  %-40s | %11.2f | %12.2f | %.3fx\n", sizes[s].name, median[1], median[0], median[0] / median[1]);
        fprintf(tsv, "%s\t%.3f\t%.3f\n", sizes[s].name, median[1], median[0]);
        free(weights);
        bench_vit_free(&m);
    }
    gemm_set_fetch_next(1);
    matmul_precision_select("float");
    examples_free(&batch);
    fashion_mnist_free(&data);
    if (bench_close_result(&tsv_file, program) < 0) return 1;
    printf("\n  %s/fetch.tsv\n", out_dir);
    return 0;
}
