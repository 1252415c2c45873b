/* bench_bf16.c - what the bf16 matmul precision (kernels/matmul.h,
 * matmul_bf16.c) buys on chapter 07's long ViT: its products one by one,
 * and its whole training step.
 *
 *   build/bench/bench_bf16 [--out DIR] [--reps N] [--min-ms MS]
 *
 * 1. The products of one replica's step of `--preset long-d96` (64 images, 50
 *    tokens: 3200 rows; D 96, F 192, 4 heads of 24; weights stored [in, out],
 *    so forward is nn, dX is nt, dW is tn; one head's attention over one
 *    image's 50 tokens; the patch embedding's 3136 x 64 -> 96), each through
 *    sgemm() with the float precision and with bf16, on 1 thread (a replica's
 *    thread). Products where bf16 does not pay stay float under it (matmul.c),
 *    so their ratio is 1 by construction, and they are marked.
 * 0. The instruction: a register-only loop of VDPBF16PS against bench_fma.h's
 *    loop of float FMAs (12 independent accumulators each, 1 thread), in
 *    GFLOP/s (a VDPBF16PS on zmm = 32 multiply-adds, an FMA 16).
 * 2. The whole training step of that model on one batch of 64 training
 *    images (zero the gradients, forward, backward, AdamW), 1 thread, float
 *    against bf16.
 * The two precisions take turns sample by sample (a slow spell of this shared
 * machine hits both alike); each figure is the median of --reps samples
 * (default 9), a product's sample repeating it for at least --min-ms
 * milliseconds (default 20). Needs AVX512_BF16; without it prints why and
 * exits 0 having measured nothing.
 *
 * Writes DIR/bf16.tsv (what M N K op float_ms bf16_ms; the peak row holds
 * GFLOP/s in those two columns) and prints a table
 * with the ratio float / bf16 (above 1: bf16 is faster). Never passes or
 * fails. */
#include <immintrin.h>
#include <math.h>
#include "util/openmp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_fma.h"
#include "bench_vit.h"
#include "07_vision_transformer/vit.h"
#include "data/fashion_mnist.h"
#include "kernels/matmul.h"
#include "nn/optim.h"
#include "nn/params.h"
#include "train/classifier.h"
#include "util/rng.h"

enum { MAX_REPS = 64, ROWS = 64 * 50, BATCH = 64 };

typedef struct {
    int M, N, K, trans_a, trans_b;
    const char *what;
} Product;

static const Product PRODUCTS[] = {
    {ROWS, 288, 96, 0, 0, "Q K V projection, forward"},
    {ROWS, 96, 96, 0, 0, "output projection, forward"},
    {ROWS, 192, 96, 0, 0, "MLP up, forward"},
    {ROWS, 96, 192, 0, 0, "MLP down, forward"},
    {ROWS, 96, 288, 0, 1, "Q K V projection, dX"},
    {ROWS, 96, 192, 0, 1, "MLP up, dX"},
    {96, 288, ROWS, 1, 0, "Q K V projection, dW"},
    {192, 96, ROWS, 1, 0, "MLP down, dW"},
    {3136, 96, 64, 0, 0, "patch embedding (8 x 8 kernels), forward"},
    {50, 50, 24, 0, 1, "one head's scores Q K^T"},
    {50, 24, 50, 0, 0, "one head's output A V"},
};
enum { N_PRODUCTS = sizeof PRODUCTS / sizeof PRODUCTS[0] };

/* The bf16 twin of bench_fma.h's fma_loop_avx512: 12 chains of VDPBF16PS. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static float dpbf16_loop(long iterations) {
    __m512 acc[12];
    for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_ps((float)i * 1e-3f);
    __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-7f), _mm512_set1_ps(1e-7f));
    for (long it = 0; it < iterations; it++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) acc[i] = _mm512_dpbf16_ps(acc[i], x, x);
    }
    __m512 sum = acc[0];
    for (int i = 1; i < 12; i++) sum = _mm512_add_ps(sum, acc[i]);
    return _mm512_reduce_add_ps(sum);
}

/* GFLOP/s of dpbf16_loop on 1 thread, best of 3 (12 instructions an iteration, 64 flops each). */
static double dpbf16_peak(void) { return loop_peak(dpbf16_loop, 1, 12.0 * 64.0); }

static void product(const Product *p, const float *A, const float *B, float *C) {
    int lda = p->trans_a ? p->M : p->K, ldb = p->trans_b ? p->K : p->N;
    sgemm(p->trans_a, p->trans_b, p->M, p->N, p->K, 1.0f, A, lda, B, ldb, 0.0f, C, p->N);
}

static void set_precision(int bf16) {
    if (matmul_precision_select(bf16 ? "bf16" : "float") < 0) {
        fprintf(stderr, "bench_bf16: %s\n", last_error());
        exit(1);
    }
}

/* Milliseconds per call of one product: `calls` calls timed together. */
static double time_product(const Product *p, const float *A, const float *B, float *C, long calls) {
    double t0 = bench_now_ms();
    for (long c = 0; c < calls; c++) product(p, A, B, C);
    return (bench_now_ms() - t0) / (double)calls;
}

/* The D 96 long preset's model (`--preset long-d96`, chapters/07_vision_transformer/main.c) for one
 * replica's 64 images. */
static int build_long_vit(Classifier *model) {
    const VitConfig cfg = {.patch = {.channels = 1, .rows = 28, .cols = 28, .P = 4, .K = 8, .D = 96}, .layers = 6,
                           .heads = 4, .ff = 192, .dropout = 0.0f, .pool = VIT_POOL_CLS, .pos = VIT_POS_LEARNED,
                           .classes = FASHION_MNIST_CLASSES};
    return vit_build(model, &cfg, BATCH, 1);
}

static double timed_step(Classifier *m, Adam *opt, const Examples *batch, double *loss) {
    double t0 = bench_now_ms();
    params_zero_grad(m->params);
    *loss = m->forward(m->self, batch);
    m->backward(m->self, batch);
    adam_step(opt, m->params, 1e-4f);
    return bench_now_ms() - t0;
}

int main(int argc, char **argv) {
    const char *out_dir = "bench/results";
    int reps = 9;
    double min_ms = 20.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            if (bench_int_arg("bench_bf16", "--reps", argv[++i], 1, MAX_REPS, &reps) < 0) return 2;
        } else if (strcmp(argv[i], "--min-ms") == 0 && i + 1 < argc) {
            if (bench_positive_arg("bench_bf16", "--min-ms", argv[++i], &min_ms) < 0) return 2;
        } else {
            fprintf(stderr, "usage: bench_bf16 [--out DIR] [--reps N] [--min-ms MS]\n");
            return 2;
        }
    }
    if (!cpu_has_avx512_bf16()) {
        printf("bench_bf16: this CPU has no AVX512_BF16: nothing to measure\n");
        return 0;
    }
    if (backend_select("avx512") < 0) {
        fprintf(stderr, "bench_bf16: %s\n", last_error());
        return 1;
    }
    omp_set_num_threads(1);
    double load = bench_load_average();
    AtomicFile tsv_file;
    FILE *tsv = bench_open_result(&tsv_file, "bench_bf16", out_dir, "bf16.tsv");
    if (!tsv) return 1;
    fprintf(tsv, "what\tM\tN\tK\top\tfloat_ms\tbf16_ms\n");

    /* 0. The instruction. */
    double fma = fma_peak(1, 16), dp = dpbf16_peak();
    printf("register-only peak, 1 thread: float FMA %.1f GFLOP/s, VDPBF16PS %.1f GFLOP/s (%.2fx)\n\n", fma, dp,
           dp / fma);
    fprintf(tsv, "peak (register-only loop)\t0\t0\t0\t-\t%.3f\t%.3f\n", fma, dp);

    /* 1. The products. */
    size_t most = 0;
    for (int p = 0; p < N_PRODUCTS; p++) {
        size_t a = (size_t)PRODUCTS[p].M * PRODUCTS[p].K, b = (size_t)PRODUCTS[p].K * PRODUCTS[p].N;
        size_t c = (size_t)PRODUCTS[p].M * PRODUCTS[p].N;
        if (a > most) most = a;
        if (b > most) most = b;
        if (c > most) most = c;
    }
    float *A = xmalloc(most * sizeof(float)), *B = xmalloc(most * sizeof(float)), *C = xmalloc(most * sizeof(float));
    Rng rng;
    rng_seed(&rng, 5, 0);
    for (size_t i = 0; i < most; i++) {
        A[i] = rng_uniform(&rng) - 0.5f;
        B[i] = rng_uniform(&rng) - 0.5f;
    }
    printf("bf16 against float products on chapter 07's long ViT, 1 thread, medians of %d (load average %.2f at start)\n\n",
           reps, load);
    printf("%-42s %-16s %-3s %10s %10s %13s\n", "product", "M x N x K", "op", "float ms", "bf16 ms", "float/bf16");
    for (int p = 0; p < N_PRODUCTS; p++) {
        const Product *pr = &PRODUCTS[p];
        long calls[2];
        double samples[2][MAX_REPS];
        for (int bf16 = 0; bf16 < 2; bf16++) { /* warm-up, and how many calls make min_ms */
            set_precision(bf16);
            product(pr, A, B, C);
            double one = time_product(pr, A, B, C, 1);
            calls[bf16] = one > 0 ? (long)ceil(min_ms / one) : 1000;
        }
        for (int r = 0; r < reps; r++)
            for (int bf16 = 0; bf16 < 2; bf16++) {
                set_precision(bf16);
                samples[bf16][r] = time_product(pr, A, B, C, calls[bf16]);
            }
        for (int bf16 = 0; bf16 < 2; bf16++) qsort(samples[bf16], reps, sizeof(double), bench_compare_doubles);
        double f = samples[0][reps / 2], h = samples[1][reps / 2];
        const char *op = pr->trans_a ? "tn" : pr->trans_b ? "nt" : "nn";
        int pays = matmul_bf16_pays(pr->M, pr->N);
        char dims[32];
        snprintf(dims, sizeof dims, "%dx%dx%d", pr->M, pr->N, pr->K);
        printf("%-42s %-16s %-3s %10.4f %10.4f %12.2fx%s\n", pr->what, dims, op, f, h, f / h,
               pays ? "" : "  (stays float)");
        fprintf(tsv, "%s\t%d\t%d\t%d\t%s\t%.5f\t%.5f\n", pr->what, pr->M, pr->N, pr->K, op, f, h);
    }
    free(A);
    free(B);
    free(C);

    /* 2. The whole step. */
    set_precision(0);
    static FashionMnist data;
    Classifier model;
    Examples batch;
    if (bench_vit_batch("bench_bf16", &data, &batch, BATCH) < 0) {
        fprintf(stderr, "bench_bf16: the ViT step is skipped\n");
    } else if (build_long_vit(&model) < 0) {
        fprintf(stderr, "bench_bf16: the ViT step is skipped: %s\n", last_error());
        examples_free(&batch);
    } else {
        Adam opt;
        if (adam_init(&opt, model.params, 1e-4f, 0.05f) == 0) {
            double samples[2][MAX_REPS], loss = 0.0;
            for (int bf16 = 0; bf16 < 2; bf16++) {
                set_precision(bf16);
                timed_step(&model, &opt, &batch, &loss);
            }
            for (int r = 0; r < reps; r++)
                for (int bf16 = 0; bf16 < 2; bf16++) {
                    set_precision(bf16);
                    samples[bf16][r] = timed_step(&model, &opt, &batch, &loss);
                }
            for (int bf16 = 0; bf16 < 2; bf16++) qsort(samples[bf16], reps, sizeof(double), bench_compare_doubles);
            double f = samples[0][reps / 2], h = samples[1][reps / 2];
            printf("\n%-42s %-16s %-3s %10.2f %10.2f %12.2fx   (loss %.3f)\n", "whole training step, 64 images", "-",
                   "-", f, h, f / h, loss);
            fprintf(tsv, "training step\t0\t0\t0\t-\t%.3f\t%.3f\n", f, h);
            adam_free(&opt);
        }
        examples_free(&batch);
        model.destroy(model.self);
    }
    set_precision(0);
    if (bench_close_result(&tsv_file, "bench_bf16") != 0) return 1;
    double load_end = bench_load_average();
    if (load_end > 1.5)
        printf("WARNING: load average %.2f at the end: other processes shared the CPU; the ratios hold better "
               "than the times\n", load_end);
    printf("wrote %s/bf16.tsv\n", out_dir);
    return 0;
}
