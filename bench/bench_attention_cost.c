/* bench_attention_cost.c - the cost of attention as N grows: full, fused,
 * sliding-window and BigBird attention (chapter 06's sparse_attention.h),
 * Linformer (linformer.h), and how much of a whole block's step attention
 * takes.
 *
 *   build/bench/bench_attention_cost [--out DIR] [--reps R] [--max-n N] [--threads T]
 *
 * 1. One multi-head self-attention layer of chapter 06's GPT width (D = 128,
 *    H = 4, D_H = 32), one sequence, no mask, N = 256, 512, ..., --max-n
 *    (16384): forward + backward, X -> O with the projections, as
 *      full      chapter 05's plain layer (A [H, N, N] kept, dA and dE in backward)
 *      fused     chapter 05's fused kernel: the same N^2 work, no N x N buffer
 *      window    blocks of 64, one block each side (3 blocks: 192 keys a query)
 *      bigbird   the window, 1 global block and 2 random blocks (BigBird's union)
 *      linformer keys and values projected to k = 256 rows (E, F [256, N] learned)
 *    The methods take turns: each repetition times every method once, so a
 *    slow moment of the machine falls on all of them; ms is the median over
 *    --reps repetitions after one warm-up. bytes: what that layer holds
 *    beyond the O(N) activations ([Q|K|V], Y and their gradients): full
 *    3 H N^2 floats, the sparse ones the log-sum-exp [H, N] and a block or two,
 *    Linformer its weights A [H, N, k], [K~|V~], their gradients, and E, F
 *    with theirs (4 k N floats).
 *    full is skipped where its N x N buffers would pass 6 GiB.
 * 2. A whole pre-norm block at the same width (the GELU MLP of F = 4 D), fused
 *    attention: the share of its forward + backward spent in attention's
 *    steps 2-3 (the fused kernel alone), against N. SIZE.md's formula says
 *    attention's FLOPs pass the rest of the block at N = 6 D = 768.
 *
 * Writes DIR/attention_cost.tsv (method N ms bytes; method "share": N, the
 * block's ms, the kernel's ms), DIR/attention_cost.gp (time and memory
 * against N, log-log; gnuplot renders it to attention_cost.png) and prints
 * the tables. Figures and ratios only: it never passes or fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "05_multi_head_attention/flash_attention.h"
#include "05_multi_head_attention/multi_head.h"
#include "06_transformer/block.h"
#include "06_transformer/linformer.h"
#include "06_transformer/sparse_attention.h"
#include "kernels/matmul.h"
#include "kernels/threads.h"
#include "util/rng.h"
#include "util/util.h"

enum { D = 128, H = 4, D_H = 32, P = 64, K_LIN = 256, MAX_REPS = 64, N_METHODS = 5 };

/* One method's layer at one N, its buffers made once. */
typedef struct {
    const char *name;
    MultiHeadSpec s;
    const BlockSelfAttention *hook;   /* NULL: chapter 05's layer */
    SparseLayout layout;
    SparseAttention options;
    Linformer lin;
    BlockSelfAttention own;           /* the sparse or the Linformer hook */
    float *params, *dparams, *X, *dO, *O, *dX, *A, *cache, *scratch;
    float *extra, *dextra;            /* the hook's own parameters (Linformer's E | F) and their gradients */
    MultiHeadWeights w, dw;
    double bytes;
} Layer;

static void layer_make(Layer *L, const char *name, MultiHeadAttention attention, const SparsePattern *pattern,
                       int linformer_k, int N) {
    memset(L, 0, sizeof *L);
    L->name = name;
    L->s = (MultiHeadSpec){D, H, D_H, D, attention, 0};
    if (pattern) {
        if (sparse_layout_create(&L->layout, pattern, N, 0) != 0) {   /* the patterns below are valid */
            fprintf(stderr, "bench_attention_cost: %s\n", last_error());
            exit(1);
        }
        L->options = (SparseAttention){&L->layout, 0};
        L->own = sparse_attention_hook(&L->options);
        L->hook = &L->own;
    } else if (linformer_k > 0) {
        L->lin = (Linformer){linformer_k < N ? linformer_k : N, N};
        L->own = linformer_hook(&L->lin);
        L->hook = &L->own;
    }
    const size_t R = (size_t)N, linear = R * 4 * H * D_H;
    const size_t n_A = L->hook ? 0 : multi_head_attention_floats(&L->s, 1, N);
    const size_t n_cache = L->hook ? L->hook->cache_floats(L->hook->options, &L->s, 1, N)
                                   : multi_head_cache_floats(&L->s, 1, N);
    const size_t n_scratch = L->hook ? L->hook->scratch_floats(L->hook->options, &L->s, 1, N)
                                     : multi_head_scratch_floats(&L->s, 1, N);
    const size_t n_extra = L->hook ? L->hook->extra_params(L->hook->options, &L->s) : 0;
    L->bytes = sizeof(float) * (double)(n_A + (n_cache - linear) + (n_scratch - linear) + 2 * n_extra);
    Rng rng;
    rng_seed(&rng, 1, 0);
    const size_t n_params = multi_head_param_count(&L->s);
    L->params = xcalloc(n_params, sizeof(float));
    L->dparams = xcalloc(n_params, sizeof(float));
    L->w = multi_head_weights_view(&L->s, L->params);
    L->dw = multi_head_weights_view(&L->s, L->dparams);
    multi_head_init(&L->s, &L->w, &rng);
    L->X = xcalloc(R * D, sizeof(float));
    L->dO = xcalloc(R * D, sizeof(float));
    L->O = xcalloc(R * D, sizeof(float));
    L->dX = xcalloc(R * D, sizeof(float));
    for (size_t i = 0; i < R * D; i++) L->X[i] = 2.0f * rng_uniform(&rng) - 1.0f;
    for (size_t i = 0; i < R * D; i++) L->dO[i] = 2.0f * rng_uniform(&rng) - 1.0f;
    L->A = n_A ? xcalloc(n_A, sizeof(float)) : NULL;
    L->cache = xcalloc(n_cache, sizeof(float));
    L->scratch = xcalloc(n_scratch, sizeof(float));
    L->extra = n_extra ? xcalloc(n_extra, sizeof(float)) : NULL;
    L->dextra = n_extra ? xcalloc(n_extra, sizeof(float)) : NULL;
    if (n_extra) L->hook->init_extra(L->hook->options, L->extra, &L->s);
}

/* ms of one forward + backward */
static double layer_time(Layer *L, int N) {
    const double t0 = bench_now_ms();
    if (L->hook) {
        L->hook->forward(L->hook->options, L->O, NULL, NULL, L->cache, L->X, &L->s, &L->w, L->extra, 0, NULL, 1, N);
        L->hook->backward(L->hook->options, L->dX, &L->dw, L->dextra, L->scratch, L->dO, NULL, NULL, L->cache, L->X,
                          &L->s, &L->w, L->extra, 0, NULL, 1, N);
    } else {
        multi_head_forward(L->O, L->A, NULL, L->cache, L->X, &L->s, &L->w, 0, NULL, 1, N);
        multi_head_backward(L->dX, &L->dw, L->scratch, L->dO, L->A, NULL, L->cache, L->X, &L->s, &L->w, 0, NULL,
                            1, N);
    }
    return bench_now_ms() - t0;
}

static void layer_free(Layer *L) {
    free(L->params); free(L->dparams); free(L->X); free(L->dO); free(L->O); free(L->dX);
    free(L->A); free(L->cache); free(L->scratch); free(L->extra); free(L->dextra);
    sparse_layout_free(&L->layout);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof(double), bench_compare_doubles);
    return x[n / 2];
}

/* 2. The block's ms and its fused kernel's ms (forward + backward), medians taking turns. */
static void block_share(int N, int reps, double *block_ms, double *kernel_ms) {
    BlockSpec s = {.D = D, .H = H, .D_H = D_H, .F = 4 * D, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM,
                   .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_FUSED};
    Rng rng;
    rng_seed(&rng, 2, 0);
    const size_t nP = block_param_count(&s), RD = (size_t)N * D, ld = 3 * H * D_H;
    float *params = xcalloc(nP, sizeof(float)), *grads = xcalloc(nP, sizeof(float));
    BlockWeights w = block_weights_view(&s, params), dw = block_weights_view(&s, grads);
    block_init(&s, &w, &rng);
    BlockCache c;
    block_cache_alloc(&c, &s, 1, N, 0);
    float *X = xcalloc(RD, sizeof(float)), *Y = xcalloc(RD, sizeof(float)), *dY = xcalloc(RD, sizeof(float));
    float *dX = xcalloc(RD, sizeof(float)), *scratch = xcalloc(block_scratch_floats(&s, 1, N, 0), sizeof(float));
    for (size_t i = 0; i < RD; i++) X[i] = 2.0f * rng_uniform(&rng) - 1.0f;
    for (size_t i = 0; i < RD; i++) dY[i] = 2.0f * rng_uniform(&rng) - 1.0f;
    float *QKV = xcalloc((size_t)N * ld, sizeof(float)), *dQKV = xcalloc((size_t)N * ld, sizeof(float));
    float *Yk = xcalloc((size_t)N * H * D_H, sizeof(float)), *lse = xcalloc((size_t)H * N, sizeof(float));
    float *block = xcalloc(flash_attention_scratch_floats(FLASH_BLOCK_Q, FLASH_BLOCK_K), sizeof(float));
    for (size_t i = 0; i < (size_t)N * ld; i++) QKV[i] = 2.0f * rng_uniform(&rng) - 1.0f;
    double tb[MAX_REPS], tk[MAX_REPS];
    for (int r = -1; r < reps; r++) {
        double t0 = bench_now_ms();
        block_forward(Y, &c, X, &s, &w, NULL, NULL, 1, N, 0, NULL);
        block_backward(dX, NULL, &dw, scratch, dY, &c, X, &s, &w, NULL, NULL, 1, N);
        const double b = bench_now_ms() - t0;
        t0 = bench_now_ms();
        flash_attention_forward_heads(Yk, lse, QKV, 1, N, H, D_H, 0, NULL, FLASH_BLOCK_Q, FLASH_BLOCK_K, block);
        flash_attention_backward_heads(dQKV, dY, QKV, Yk, lse, 1, N, H, D_H, 0, NULL, FLASH_BLOCK_Q, FLASH_BLOCK_K,
                                       block);
        if (r >= 0) {
            tb[r] = b;
            tk[r] = bench_now_ms() - t0;
        }
    }
    *block_ms = median(tb, reps);
    *kernel_ms = median(tk, reps);
    block_cache_free(&c);
    free(params); free(grads); free(X); free(Y); free(dY); free(dX); free(scratch);
    free(QKV); free(dQKV); free(Yk); free(lse); free(block);
}

static void write_gp(FILE *f) {
    fprintf(f,
            "# attention_cost.gp - written by bench_attention_cost: one attention layer (D 128, H 4) against N.\n"
            "set terminal pngcairo size 1100,450 font ',10'\n"
            "set output 'attention_cost.png'\n"
            "set multiplot layout 1,2\n"
            "set logscale xy 2\n"
            "set key top left\n"
            "set grid\n"
            "set xlabel 'N (sequence length)'\n"
            "set title 'forward + backward of one layer (log-log)'\n"
            "set ylabel 'ms (median)'\n"
            "plot for [m in 'full fused window bigbird linformer'] '< grep ^'.m.' attention_cost.tsv' using 2:3 "
            "with linespoints title m\n"
            "set title 'memory beyond the O(N) activations (log-log)'\n"
            "set ylabel 'bytes'\n"
            "set logscale y 10\n"
            "plot for [m in 'full fused window bigbird linformer'] '< grep ^'.m.' attention_cost.tsv' using 2:4 "
            "with linespoints title m\n"
            "unset multiplot\n");
}

int main(int argc, char **argv) {
    const char *out = "bench/results";
    int reps = 3, max_n = 16384, threads = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            printf("usage: bench_attention_cost [--out DIR] [--reps R] [--max-n N] [--threads T]\n");
            return 0;
        } else if (i + 1 < argc && strcmp(argv[i], "--out") == 0) {
            out = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) {
            if (bench_int_arg("bench_attention_cost", "--reps", argv[++i], 1, MAX_REPS, &reps) != 0) return 2;
        } else if (i + 1 < argc && strcmp(argv[i], "--max-n") == 0) {
            if (bench_int_arg("bench_attention_cost", "--max-n", argv[++i], 256, 65536, &max_n) != 0) return 2;
        } else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0) {
            if (bench_int_arg("bench_attention_cost", "--threads", argv[++i], 0, 256, &threads) != 0) return 2;
        } else {
            fprintf(stderr, "bench_attention_cost: unknown flag or missing value '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (backend_select(NULL) != 0) {
        fprintf(stderr, "bench_attention_cost: %s\n", last_error());
        return 1;
    }
    threads_set(threads);
    AtomicFile tsv_file;
    FILE *tsv = bench_open_result(&tsv_file, "bench_attention_cost", out, "attention_cost.tsv");
    if (!tsv) return 1;
    fprintf(tsv, "method\tN\tms\tbytes\n");
    printf("one self-attention layer, D = %d, H = %d, forward + backward, %s backend, %d thread(s), median of %d\n"
           "(window: blocks of %d, one each side; bigbird: the window, 1 global and 2 random blocks;\n"
           "linformer: keys and values projected to k = %d rows)\n\n", D, H,
           backend_name(backend_current()), threads_current(), reps, P, K_LIN);
    printf("  |     N |   full ms |  fused ms | window ms | bigbird ms | linformer ms |  full MiB | fused KiB |"
           " bigbird KiB | linformer KiB | bigbird density |\n");
    printf("  |------:|----------:|----------:|----------:|-----------:|-------------:|----------:|----------:|"
           "------------:|--------------:|----------------:|\n");
    const SparsePattern window = {P, 1, 0, 0, 1}, bigbird = {P, 1, 1, 2, 1};
    for (int N = 256; N <= max_n; N *= 2) {
        Layer L[N_METHODS];
        const int with_full = 3.0 * H * sizeof(float) * (double)N * N <= 6.0 * 1024 * 1024 * 1024;
        layer_make(&L[0], "full", MULTI_HEAD_PLAIN, NULL, 0, with_full ? N : 1);
        layer_make(&L[1], "fused", MULTI_HEAD_FUSED, NULL, 0, N);
        layer_make(&L[2], "window", MULTI_HEAD_FUSED, &window, 0, N);
        layer_make(&L[3], "bigbird", MULTI_HEAD_FUSED, &bigbird, 0, N);
        layer_make(&L[4], "linformer", MULTI_HEAD_PLAIN, NULL, K_LIN, N);
        double t[N_METHODS][MAX_REPS], ms[N_METHODS];
        for (int r = -1; r < reps; r++)   /* r = -1: the warm-up, touching every page */
            for (int m = with_full ? 0 : 1; m < N_METHODS; m++) {
                const double x = layer_time(&L[m], N);
                if (r >= 0) t[m][r] = x;
            }
        for (int m = with_full ? 0 : 1; m < N_METHODS; m++) {
            ms[m] = median(t[m], reps);
            fprintf(tsv, "%s\t%d\t%.3f\t%.0f\n", L[m].name, N, ms[m], L[m].bytes);
        }
        char full_ms[32] = "skipped", full_mib[32] = "-";
        if (with_full) {
            snprintf(full_ms, sizeof full_ms, "%.1f", ms[0]);
            snprintf(full_mib, sizeof full_mib, "%.0f", L[0].bytes / (1024.0 * 1024.0));
        }
        printf("  | %5d | %9s | %9.1f | %9.1f | %10.1f | %12.1f | %9s | %9.0f | %11.0f | %13.0f | %15.3f |\n", N,
               full_ms, ms[1], ms[2], ms[3], ms[4], full_mib, L[1].bytes / 1024.0, L[3].bytes / 1024.0,
               L[4].bytes / 1024.0, sparse_density(&L[3].layout, N));
        fflush(stdout);
        for (int m = 0; m < N_METHODS; m++) layer_free(&L[m]);
    }
    printf("\na whole pre-norm block (D = %d, H = %d, GELU MLP of F = %d, fused attention), forward + backward:\n"
           "  |     N | block ms | attention's steps 2-3 ms | share |\n"
           "  |------:|---------:|-------------------------:|------:|\n", D, H, 4 * D);
    for (int N = 256; N <= max_n; N *= 2) {
        double block_ms, kernel_ms;
        block_share(N, reps, &block_ms, &kernel_ms);
        fprintf(tsv, "share\t%d\t%.3f\t%.3f\n", N, block_ms, kernel_ms);
        printf("  | %5d | %8.1f | %24.1f | %4.0f%% |\n", N, block_ms, kernel_ms, 100.0 * kernel_ms / block_ms);
        fflush(stdout);
    }
    if (bench_close_result(&tsv_file, "bench_attention_cost") != 0) return 1;
    AtomicFile gp_file;
    FILE *gp = bench_open_result(&gp_file, "bench_attention_cost", out, "attention_cost.gp");
    if (!gp) return 1;
    write_gp(gp);
    if (bench_close_result(&gp_file, "bench_attention_cost") != 0) return 1;
    printf("\nwrote %s/attention_cost.tsv, %s/attention_cost.gp\n", out, out);
    return 0;
}
