/* bench_flash.c - plain against fused (FlashAttention-style) attention.
 *
 *   build/bench/bench_flash [--out DIR] [--reps R] [--max-n N] [--threads T]
 *
 * 1. One head, D_H = 64, one sequence, N = 256, 512, ..., --max-n (8192):
 *    forward + backward of chapter 05's multi-head layer with H = 1, D = 64,
 *    once with MULTI_HEAD_PLAIN (A [N, N] kept, dA and dE [N, N] in backward)
 *    and once with MULTI_HEAD_FUSED (flash_attention.c). Both include the same
 *    projections (N x 64 x 192 and N x 64 x 64, small next to the N^2 part).
 *    ms: median of --reps samples after one warm-up run (buffers allocated
 *    and touched before timing). extra_bytes: the buffers only that path
 *    needs: plain 3 N^2 floats (A, dA, dE), fused the log-sum-exp [N], the
 *    recorded masks and two score blocks (forward and backward scratch).
 *    Plain is skipped when its N x N buffers would exceed 1 GiB.
 * 2. Chapter 05's own sizes (training batch B = 64, N = 8, H = 4, D_H = 16,
 *    and its N^2 table's single sequences), to choose the default.
 *
 * Writes DIR/flash.tsv (impl N ms extra_bytes) and DIR/flash.gp (log-log time
 * and memory against N; bench/run.sh renders it). Prints figures and ratios,
 * never passes or fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "05_multi_head_attention/multi_head.h"
#include "kernels/matmul.h"
#include "util/rng.h"
#include "util/util.h"

/* Median ms of forward + backward of one multi-head layer computing attention
 * as told; *extra_bytes: the buffers beyond [Q|K|V], Y and their gradients. */
static double time_layer(MultiHeadAttention attention, int B, int N, int H, int D_H, int causal, int reps,
                         double *extra_bytes) {
    const MultiHeadSpec s = {H * D_H, H, D_H, H * D_H, attention, 0};
    const size_t R = (size_t)B * N, linear = R * 4 * H * D_H;
    const size_t n_A = multi_head_attention_floats(&s, B, N);
    const size_t n_cache = multi_head_cache_floats(&s, B, N), n_scratch = multi_head_scratch_floats(&s, B, N);
    *extra_bytes = sizeof(float) * (double)(n_A + (n_cache - linear) + (n_scratch - linear));
    Rng rng;
    rng_seed(&rng, 1, 0);
    float *params = xcalloc(multi_head_param_count(&s), sizeof(float));
    float *dparams = xcalloc(multi_head_param_count(&s), sizeof(float));
    MultiHeadWeights w = multi_head_weights_view(&s, params), dw = multi_head_weights_view(&s, dparams);
    multi_head_init(&s, &w, &rng);
    float *X = xcalloc(R * s.D, sizeof(float)), *dO = xcalloc(R * s.D_out, sizeof(float));
    float *O = xcalloc(R * s.D_out, sizeof(float)), *dX = xcalloc(R * s.D, sizeof(float));
    for (size_t i = 0; i < R * s.D; i++) X[i] = 2.0f * rng_uniform(&rng) - 1.0f;
    for (size_t i = 0; i < R * s.D_out; i++) dO[i] = 2.0f * rng_uniform(&rng) - 1.0f;
    float *A = n_A ? xcalloc(n_A, sizeof(float)) : NULL;
    float *cache = xcalloc(n_cache, sizeof(float)), *scratch = xcalloc(n_scratch, sizeof(float));
    double samples[64];
    if (reps > 64) reps = 64;
    for (int r = -1; r < reps; r++) {          /* r = -1: warm-up, touches every page */
        const double t0 = bench_now_ms();
        multi_head_forward(O, A, NULL, cache, X, &s, &w, causal, NULL, B, N);
        multi_head_backward(dX, &dw, scratch, dO, A, NULL, cache, X, &s, &w, causal, NULL, B, N);
        if (r >= 0) samples[r] = bench_now_ms() - t0;
    }
    qsort(samples, (size_t)reps, sizeof(double), bench_compare_doubles);
    free(params); free(dparams); free(X); free(dO); free(O); free(dX); free(A); free(cache); free(scratch);
    return samples[reps / 2];
}

static void write_gp(FILE *f) {
    fprintf(f,
            "# flash.gp - written by bench_flash: plain against fused attention, one head, D_H = 64.\n"
            "set terminal pngcairo size 1100,450 font ',10'\n"
            "set output 'flash.png'\n"
            "set multiplot layout 1,2\n"
            "set logscale xy 2\n"
            "set key top left\n"
            "set grid\n"
            "set xrange [181:11585]\n"
            "set xlabel 'N (sequence length)'\n"
            "set title 'forward + backward, one head (log-log)'\n"
            "set ylabel 'ms (median)'\n"
            "plot \"< grep '^plain' flash.tsv\" using 2:3 with linespoints title 'plain', \\\n"
            "     \"< grep '^fused' flash.tsv\" using 2:3 with linespoints title 'fused'\n"
            "set title 'extra memory beyond the O(N) activations (log-log)'\n"
            "set ylabel 'bytes'\n"
            "set logscale y 10\n"
            "plot \"< grep '^plain' flash.tsv\" using 2:4 with linespoints title 'plain: 3 N^2 floats', \\\n"
            "     \"< grep '^fused' flash.tsv\" using 2:4 with linespoints title 'fused: O(N)'\n"
            "unset multiplot\n");
}

int main(int argc, char **argv) {
    const char *out = "bench/results";
    int reps = 3, max_n = 8192, threads = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            printf("usage: bench_flash [--out DIR] [--reps R] [--max-n N] [--threads T]\n");
            return 0;
        } else if (i + 1 < argc && strcmp(argv[i], "--out") == 0) {
            out = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) {
            if (bench_int_arg("bench_flash", "--reps", argv[++i], 1, 64, &reps) != 0) return 2;
        } else if (i + 1 < argc && strcmp(argv[i], "--max-n") == 0) {
            if (bench_int_arg("bench_flash", "--max-n", argv[++i], 1, 65536, &max_n) != 0) return 2;
        } else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0) {
            if (bench_int_arg("bench_flash", "--threads", argv[++i], 0, 256, &threads) != 0) return 2;
        } else {
            fprintf(stderr, "bench_flash: unknown flag or missing value '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (backend_select(NULL) != 0) {
        fprintf(stderr, "bench_flash: %s\n", last_error());
        return 1;
    }
    threads_set(threads);
    AtomicFile tsv_file;
    FILE *tsv = bench_open_result(&tsv_file, "bench_flash", out, "flash.tsv");
    if (!tsv) return 1;
    fprintf(tsv, "impl\tN\tms\textra_bytes\n");
    printf("plain against fused attention: one head, D_H = 64, forward + backward, %s backend, %d thread(s),\n"
           "median of %d\n\n", backend_name(backend_current()), threads_current(), reps);
    printf("  |     N | plain ms | fused ms | plain/fused | plain extra | fused extra |\n");
    printf("  |------:|---------:|---------:|------------:|------------:|------------:|\n");
    for (int N = 256; N <= max_n; N *= 2) {
        double plain_ms = -1.0, plain_bytes = 3.0 * sizeof(float) * (double)N * N, fused_bytes;
        if (plain_bytes <= 1024.0 * 1024 * 1024) {
            plain_ms = time_layer(MULTI_HEAD_PLAIN, 1, N, 1, 64, 0, reps, &plain_bytes);
            fprintf(tsv, "plain\t%d\t%.3f\t%.0f\n", N, plain_ms, plain_bytes);
        }
        const double fused_ms = time_layer(MULTI_HEAD_FUSED, 1, N, 1, 64, 0, reps, &fused_bytes);
        fprintf(tsv, "fused\t%d\t%.3f\t%.0f\n", N, fused_ms, fused_bytes);
        char ratio[32] = "-", pms[32] = "skipped";
        if (plain_ms >= 0) {
            snprintf(ratio, sizeof ratio, "%.2fx", plain_ms / fused_ms);
            snprintf(pms, sizeof pms, "%.1f", plain_ms);
        }
        printf("  | %5d | %8s | %8.1f | %11s | %7.1f MiB | %7.1f KiB |\n", N, pms, fused_ms, ratio,
               plain_bytes / (1024.0 * 1024.0), fused_bytes / 1024.0);
        fflush(stdout);
    }
    if (bench_close_result(&tsv_file, "bench_flash") != 0) return 1;
    AtomicFile gp_file;
    FILE *gp = bench_open_result(&gp_file, "bench_flash", out, "flash.gp");
    if (!gp) return 1;
    write_gp(gp);
    if (bench_close_result(&gp_file, "bench_flash") != 0) return 1;

    /* 2. chapter 05's sizes: the training batch, and the N^2 table's sequences */
    printf("\nchapter 05's sizes (D = 64, H = 4, D_H = 16), forward + backward, median of %d:\n", 5 * reps);
    const int sizes[][2] = {{64, 8}, {1, 64}, {1, 256}, {1, 1024}, {1, 2048}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        double b_plain, b_fused;
        const double tp = time_layer(MULTI_HEAD_PLAIN, sizes[k][0], sizes[k][1], 4, 16, 0, 5 * reps, &b_plain);
        const double tf = time_layer(MULTI_HEAD_FUSED, sizes[k][0], sizes[k][1], 4, 16, 0, 5 * reps, &b_fused);
        printf("  B = %2d, N = %4d:  plain %8.3f ms   fused %8.3f ms   plain/fused %.2fx\n", sizes[k][0],
               sizes[k][1], tp, tf, tp / tf);
    }
    printf("\nwrote %s/flash.tsv, %s/flash.gp\n", out, out);
    return 0;
}
