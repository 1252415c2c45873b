/* bench_vecmath.c - nanoseconds per element of the naive and AVX2 element-wise kernels, softmax rows and
 * LayerNorm.
 *
 *   build/bench/bench_vecmath [--out DIR] [--reps R] [--min-ms MS]
 *
 * 1. Element-wise (vecmath.h), n = 262144 floats (1 MiB in, 1 MiB out):
 *    exp, tanh, sigmoid (forward), GELU and its tanh form (forward, and
 *    backward dx += dy gelu'(x)). Inputs uniform in [-5, 5], where every
 *    branch of the kernels is taken.
 * 2. LayerNorm (layernorm.h), forward and backward (dx, dgamma, dbeta), at
 *    D = 64, 128, 256, 512 with N = 262144 / D rows (x is 1 MiB).
 * 3. Softmax along rows (vecmath.h), forward and backward, at C = 50 (the
 *    attention rows of chapter 07's ViT: 49 patches and the class token)
 *    and C = 256, over the same 1 MiB, scores as above.
 * Each figure is the median of --reps samples (default 9) taken after a
 * warm-up call (which also touches every page); one sample repeats the call
 * until at least --min-ms milliseconds (default 2) have passed. The naive
 * and AVX2 versions of a kernel take turns sample by sample, so a slow spell
 * of this shared machine hits both alike. One thread (the kernels have no
 * threads of their own).
 *
 * Writes DIR/vecmath.tsv (kernel impl n ns_per_elem; n is the number of
 * elements one call processes, N x D for LayerNorm) and prints a table with
 * the ratio naive/avx2. Without AVX2/FMA only the naive rows are measured.
 * Prints figures and ratios, never passes or fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "util/rng.h"
#include "util/util.h"
#include "kernels/vecmath.h"

enum { N_ELEMENTS = 262144, MAX_REPS = 64 };

/* ------------------------------------------------------------ the kernels */

/* One benchmark: a call of the naive (impl 0) or the AVX2 (impl 1) version on
 * fixed buffers. */
typedef struct Bench Bench;
struct Bench {
    char kernel[40];
    long elements;                        /* per call */
    void (*call)(const Bench *b, int impl);
    /* element-wise */
    void (*forward[2])(float *y, const float *x, int n);
    void (*backward[2])(float *dx, const float *dy, const float *x, int n);
    /* LayerNorm; softmax: N rows of C = D */
    int N, D;
};

/* Shared buffers, big enough for every benchmark. */
static float *g_x, *g_y, *g_dy, *g_dx, *g_gamma, *g_beta, *g_dgamma, *g_dbeta, *g_mean, *g_rstd;

static void call_forward(const Bench *b, int impl) { b->forward[impl](g_y, g_x, (int)b->elements); }
static void call_backward(const Bench *b, int impl) { b->backward[impl](g_dx, g_dy, g_x, (int)b->elements); }

static void call_layernorm_forward(const Bench *b, int impl) {
    if (impl) layernorm_forward_avx2(g_y, g_mean, g_rstd, g_x, g_gamma, g_beta, b->N, b->D, 1e-5f);
    else layernorm_forward_naive(g_y, g_mean, g_rstd, g_x, g_gamma, g_beta, b->N, b->D, 1e-5f);
}

static void call_layernorm_backward(const Bench *b, int impl) {
    if (impl) layernorm_backward_avx2(g_dx, g_dgamma, g_dbeta, g_dy, g_mean, g_rstd, g_x, g_gamma, b->N, b->D);
    else layernorm_backward_naive(g_dx, g_dgamma, g_dbeta, g_dy, g_mean, g_rstd, g_x, g_gamma, b->N, b->D);
}

static void call_softmax_forward(const Bench *b, int impl) {
    (impl ? vec_softmax_rows_avx2 : vec_softmax_rows_naive)(g_y, g_x, b->N, b->D);
}

static void call_softmax_backward(const Bench *b, int impl) {
    (impl ? vec_softmax_backward_rows_avx2 : vec_softmax_backward_rows_naive)(g_dx, g_dy, g_y, b->N, b->D);
}

static Bench elementwise(const char *name, void (*naive)(float *, const float *, int),
                         void (*avx2)(float *, const float *, int)) {
    Bench b = {.elements = N_ELEMENTS, .call = call_forward, .forward = {naive, avx2}};
    snprintf(b.kernel, sizeof b.kernel, "%s", name);
    return b;
}

static Bench gradient(const char *name, void (*naive)(float *, const float *, const float *, int),
                      void (*avx2)(float *, const float *, const float *, int)) {
    Bench b = {.elements = N_ELEMENTS, .call = call_backward, .backward = {naive, avx2}};
    snprintf(b.kernel, sizeof b.kernel, "%s", name);
    return b;
}

static Bench layernorm(int backward, int D) {
    Bench b = {.elements = N_ELEMENTS, .call = backward ? call_layernorm_backward : call_layernorm_forward,
               .N = N_ELEMENTS / D, .D = D};
    snprintf(b.kernel, sizeof b.kernel, "layernorm_%s_D%d", backward ? "bwd" : "fwd", D);
    return b;
}

/* Rows of C that fill at most the 1 MiB buffers. */
static Bench softmax(int backward, int C) {
    Bench b = {.call = backward ? call_softmax_backward : call_softmax_forward, .N = N_ELEMENTS / C, .D = C};
    b.elements = (long)b.N * C;
    snprintf(b.kernel, sizeof b.kernel, "softmax_rows_%s_C%d", backward ? "bwd" : "fwd", C);
    return b;
}

/* ------------------------------------------------------------ timing */

/* How many calls make one sample last at least min_ms (from one timed call). */
static int calls_per_sample(const Bench *b, int impl, double min_ms) {
    double t0 = bench_now_ms();
    b->call(b, impl);
    double one = bench_now_ms() - t0;
    if (one <= 0.0) one = 1e-3;
    int calls = (int)(min_ms / one) + 1;
    return calls < 1 ? 1 : calls;
}

/* Median ns per element of the naive (out[0]) and AVX2 (out[1]) versions,
 * sampled in turns; has_avx2 == 0 leaves out[1] at 0. */
static void time_pair(const Bench *b, int has_avx2, int reps, double min_ms, double out[2]) {
    double samples[2][MAX_REPS];
    int calls[2] = {0, 0};
    for (int impl = 0; impl <= has_avx2; impl++) {
        b->call(b, impl);                         /* warm-up: pages touched, code and data cached */
        calls[impl] = calls_per_sample(b, impl, min_ms);
    }
    for (int r = 0; r < reps; r++)
        for (int impl = 0; impl <= has_avx2; impl++) {
            double t0 = bench_now_ms();
            for (int c = 0; c < calls[impl]; c++) b->call(b, impl);
            samples[impl][r] = (bench_now_ms() - t0) * 1e6 / ((double)calls[impl] * (double)b->elements);
        }
    out[1] = 0.0;
    for (int impl = 0; impl <= has_avx2; impl++) {
        qsort(samples[impl], (size_t)reps, sizeof(double), bench_compare_doubles);
        out[impl] = samples[impl][reps / 2];
    }
}

static void usage(FILE *f) {
    fprintf(f, "usage: bench_vecmath [--out DIR] [--reps R] [--min-ms MS]\n"
               "  --out DIR     where vecmath.tsv goes (default bench/results)\n"
               "  --reps R      samples per figure, median taken (default 9, 1..%d)\n"
               "  --min-ms MS   minimum length of one sample in milliseconds (default 2)\n",
            MAX_REPS);
}

int main(int argc, char **argv) {
    const char *out_dir = "bench/results";
    int reps = 9;
    double min_ms = 2.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            if (bench_int_arg("bench_vecmath", "--reps", argv[++i], 1, MAX_REPS, &reps) != 0) return 2;
        } else if (strcmp(argv[i], "--min-ms") == 0 && i + 1 < argc) {
            if (bench_positive_arg("bench_vecmath", "--min-ms", argv[++i], &min_ms) != 0) return 2;
        } else {
            fprintf(stderr, "bench_vecmath: unknown or incomplete argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    AtomicFile tsv_file;
    FILE *tsv = bench_open_result(&tsv_file, "bench_vecmath", out_dir, "vecmath.tsv");
    if (!tsv) return 1;

    /* buffers: 1 MiB each (x, y, dy, dx), gamma/beta and statistics for the smallest D */
    g_x = xmalloc(sizeof(float) * N_ELEMENTS);
    g_y = xmalloc(sizeof(float) * N_ELEMENTS);
    g_dy = xmalloc(sizeof(float) * N_ELEMENTS);
    g_dx = xcalloc(N_ELEMENTS, sizeof(float));
    g_gamma = xmalloc(sizeof(float) * 512);
    g_beta = xmalloc(sizeof(float) * 512);
    g_dgamma = xcalloc(512, sizeof(float));
    g_dbeta = xcalloc(512, sizeof(float));
    g_mean = xmalloc(sizeof(float) * (N_ELEMENTS / 64));
    g_rstd = xmalloc(sizeof(float) * (N_ELEMENTS / 64));
    Rng rng;
    rng_seed(&rng, 1, 0);
    for (int i = 0; i < N_ELEMENTS; i++) {
        g_x[i] = 10.0f * rng_uniform(&rng) - 5.0f;
        g_dy[i] = 2.0f * rng_uniform(&rng) - 1.0f;
    }
    for (int d = 0; d < 512; d++) {
        g_gamma[d] = 0.5f + rng_uniform(&rng);
        g_beta[d] = rng_uniform(&rng) - 0.5f;
    }

    Bench benches[32];
    int n_benches = 0;
    benches[n_benches++] = elementwise("exp_fwd", vec_exp_naive, vec_exp_avx2);
    benches[n_benches++] = elementwise("tanh_fwd", vec_tanh_naive, vec_tanh_avx2);
    benches[n_benches++] = elementwise("sigmoid_fwd", vec_sigmoid_naive, vec_sigmoid_avx2);
    benches[n_benches++] = elementwise("gelu_fwd", vec_gelu_naive, vec_gelu_avx2);
    benches[n_benches++] = gradient("gelu_bwd", vec_gelu_backward_naive, vec_gelu_backward_avx2);
    benches[n_benches++] = elementwise("gelu_tanh_fwd", vec_gelu_tanh_naive, vec_gelu_tanh_avx2);
    benches[n_benches++] = gradient("gelu_tanh_bwd", vec_gelu_tanh_backward_naive, vec_gelu_tanh_backward_avx2);
    for (int D = 64; D <= 512; D *= 2) {
        benches[n_benches++] = layernorm(0, D);
        benches[n_benches++] = layernorm(1, D);
    }
    static const int softmax_widths[2] = {50, 256};
    for (int k = 0; k < 2; k++) {
        benches[n_benches++] = softmax(0, softmax_widths[k]);
        benches[n_benches++] = softmax(1, softmax_widths[k]);
    }

    const int has_avx2 = cpu_has_avx2_fma();
    printf("element-wise kernels, LayerNorm and softmax rows: ns per element, 1 thread, median of %d samples of >= %g ms\n"
           "(after a warm-up call); load average %.2f%s\n\n",
           reps, min_ms, bench_load_average(), has_avx2 ? "" : "; no AVX2/FMA on this CPU: naive only");
    printf("  | kernel                |      n | naive ns | avx2 ns | naive/avx2 |\n");
    printf("  |-----------------------|-------:|---------:|--------:|-----------:|\n");
    fprintf(tsv, "kernel\timpl\tn\tns_per_elem\n");
    for (int k = 0; k < n_benches; k++) {
        double ns[2] = {0.0, 0.0};
        time_pair(&benches[k], has_avx2, reps, min_ms, ns);
        fprintf(tsv, "%s\tnaive\t%ld\t%.4f\n", benches[k].kernel, benches[k].elements, ns[0]);
        if (has_avx2) fprintf(tsv, "%s\tavx2\t%ld\t%.4f\n", benches[k].kernel, benches[k].elements, ns[1]);
        fflush(tsv);
        char avx2_ns[32] = "-", ratio[32] = "-";
        if (has_avx2) {
            snprintf(avx2_ns, sizeof avx2_ns, "%.3f", ns[1]);
            snprintf(ratio, sizeof ratio, "%.1fx", ns[0] / ns[1]);
        }
        printf("  | %-21s | %6ld | %8.3f | %7s | %10s |\n", benches[k].kernel, benches[k].elements, ns[0], avx2_ns,
               ratio);
        fflush(stdout);
    }
    if (bench_close_result(&tsv_file, "bench_vecmath") != 0) return 1;
    printf("\nn: elements per call (LayerNorm: N x D, N = %d / D rows; softmax: N x C likewise). naive/avx2 > 1x:\n"
           "the AVX2 kernel is faster.\n", N_ELEMENTS);
    printf("wrote %s/vecmath.tsv\n", out_dir);
    free(g_x); free(g_y); free(g_dy); free(g_dx); free(g_gamma); free(g_beta);
    free(g_dgamma); free(g_dbeta); free(g_mean); free(g_rstd);
    return 0;
}
