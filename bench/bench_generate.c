/* bench_generate.c - chapter 06's GPT generating text, with and without its KV cache.
 *
 *   build/bench/bench_generate [--out DIR] [--reps R] [--max-n N] [--threads T]
 *
 * The model is build/06_gpt's default on characters (4 pre-norm blocks,
 * D = 128, 4 heads, F = 512, learned positions, the Brown corpus's character
 * vocabulary) with a context of N = 512 positions; its weights are the
 * untrained ones of seed 1 (the work per token does not depend on them).
 * From a prompt of one token, gpt_generate draws n tokens greedily
 * (GptSampling {temperature 0, top_k 0, kv_cache}), so the last token is
 * predicted from a window of n positions, for n = 64, 128, 256, 512 (up to
 * --max-n):
 *   kv_cache 1  each new token runs one row through every block (block_step),
 *               attending over the keys and values kept for the positions
 *               before it: O(t) work for the token at position t;
 *   kv_cache 0  each new token runs the whole window again (the forward pass
 *               of training, on 1 x t positions): O(t) rows, O(t^2) attention.
 * tokens/s = n / the time for all n: the throughput up to a context of n.
 * Median of --reps runs; for every n the two modes take turns run by run, so
 * a slow spell of this shared machine hits both alike. Both modes must give
 * the same tokens (the cache is exact; tests/test_gpt.c checks the logits).
 *
 * Writes DIR/generate.tsv (mode n ms tokens_per_s) and DIR/generate.dat,
 * DIR/generate.gp (tokens/s against the context, both modes, log-log;
 * common/io/plot.h renders generate.png when gnuplot is installed). Prints
 * figures and ratios, never passes or fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "06_transformer/gpt.h"
#include "data/brown.h"
#include "io/plot.h"
#include "kernels/matmul.h"
#include "util/rng.h"
#include "util/util.h"

enum { CONTEXT = 512, MAX_REPS = 64 };
static const int SIZES[] = {64, 128, 256, 512};
enum { N_SIZES = sizeof SIZES / sizeof SIZES[0] };

/* ms to generate n tokens after prompt (one token); out [n] gets them. */
static double time_generate(Gpt *g, int prompt, int n, int kv_cache, int *out) {
    const GptSampling s = {0.0f, 0, kv_cache};
    Rng rng;
    rng_seed(&rng, 1, 11);
    const double t0 = bench_now_ms();
    if (gpt_generate(g, &prompt, 1, n, &s, &rng, out, NULL) < 0) return -1.0;
    return bench_now_ms() - t0;
}

int main(int argc, char **argv) {
    const char *out_dir = "bench/results";
    int reps = 5, max_n = CONTEXT, threads = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: bench_generate [--out DIR] [--reps R] [--max-n N] [--threads T]\n"
                   "  --out DIR     where to write generate.tsv, generate.dat, generate.gp (default bench/results)\n"
                   "  --reps R      runs per figure, the median is reported (default 5, max %d)\n"
                   "  --max-n N     the longest generation, among 64, 128, 256, 512 (default 512)\n"
                   "  --threads T   threads (default 1)\n",
                   MAX_REPS);
            return 0;
        } else if (i + 1 < argc && strcmp(argv[i], "--out") == 0) {
            out_dir = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) {
            if (bench_int_arg("bench_generate", "--reps", argv[++i], 1, MAX_REPS, &reps) != 0) return 2;
        } else if (i + 1 < argc && strcmp(argv[i], "--max-n") == 0) {
            if (bench_int_arg("bench_generate", "--max-n", argv[++i], SIZES[0], CONTEXT, &max_n) != 0) return 2;
        } else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0) {
            if (bench_int_arg("bench_generate", "--threads", argv[++i], 1, 256, &threads) != 0) return 2;
        } else {
            fprintf(stderr, "bench_generate: unknown flag or missing value '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (backend_select(NULL) != 0) {
        fprintf(stderr, "bench_generate: %s\n", last_error());
        return 1;
    }
    threads_set(threads);

    /* the vocabulary of the character model: the Brown corpus's */
    BrownCorpus c;
    if (brown_load(&c, NULL, BROWN_CHARS) < 0) {
        fprintf(stderr, "bench_generate: %s\n", last_error());
        return 1;
    }
    const int V = c.V, prompt = brown_id(&c, "T");   /* (<unk>, id 0, if it had no "T") */
    brown_free(&c);
    GptConfig cfg = {.layers = 4,
                     .block = {.D = 128, .H = 4, .D_H = 32, .F = 512, .norm_place = BLOCK_PRE_NORM,
                               .norm = BLOCK_LAYERNORM, .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN,
                               .causal = 1},
                     .pos = POSITIONS_LEARNED, .context = CONTEXT, .V = V};
    Gpt g;
    if (gpt_create(&g, &cfg, 1, 1) < 0) {
        fprintf(stderr, "bench_generate: %s\n", last_error());
        gpt_free(&g);
        return 1;
    }

    int n_sizes = 0;
    while (n_sizes < N_SIZES && SIZES[n_sizes] <= max_n) n_sizes++;
    static double samples[2][N_SIZES][MAX_REPS];
    int *out_cached = xmalloc(sizeof(int) * CONTEXT), *out_plain = xmalloc(sizeof(int) * CONTEXT);
    const double load = bench_load_average();
    printf("GPT generation, greedy, from a prompt of 1 token: 4 blocks, D = 128, 4 heads, F = 512, context %d,\n"
           "V = %d; %s backend, %d thread(s); ms for n tokens, median of %d runs; load average %.2f\n",
           CONTEXT, V, backend_name(backend_current()), threads_current(), reps, load);
    if (load > 0.5) printf("WARNING: load average %.2f: other processes share the CPU; figures are noisy\n", load);

    /* warm-up: first touch of the caches and buffers, both modes */
    time_generate(&g, prompt, SIZES[0], 1, out_cached);
    time_generate(&g, prompt, SIZES[0], 0, out_plain);
    int same = 1;
    for (int k = 0; k < n_sizes; k++) {
        const int n = SIZES[k];
        for (int r = 0; r < reps; r++) {   /* the two modes take turns */
            samples[1][k][r] = time_generate(&g, prompt, n, 1, out_cached);
            samples[0][k][r] = time_generate(&g, prompt, n, 0, out_plain);
            if (samples[0][k][r] < 0 || samples[1][k][r] < 0) {
                fprintf(stderr, "bench_generate: %s\n", last_error());
                gpt_free(&g);
                return 1;
            }
        }
        same &= memcmp(out_cached, out_plain, sizeof(int) * (size_t)n) == 0;
    }

    AtomicFile tsv_file;
    FILE *tsv = bench_open_result(&tsv_file, "bench_generate", out_dir, "generate.tsv");
    if (!tsv) {
        gpt_free(&g);
        return 1;
    }
    fprintf(tsv, "mode\tn\tms\ttokens_per_s\n");
    float x[N_SIZES], tps[2][N_SIZES];
    printf("\n  | context n | KV cache ms | tokens/s | no cache ms | tokens/s | cache speed-up |\n");
    printf("  |----------:|------------:|---------:|------------:|---------:|---------------:|\n");
    for (int k = 0; k < n_sizes; k++) {
        const int n = SIZES[k];
        double ms[2];
        for (int mode = 0; mode < 2; mode++) {
            qsort(samples[mode][k], (size_t)reps, sizeof(double), bench_compare_doubles);
            ms[mode] = samples[mode][k][reps / 2];
            tps[mode][k] = (float)(n / (ms[mode] * 1e-3));
            fprintf(tsv, "%s\t%d\t%.3f\t%.1f\n", mode ? "kv_cache" : "no_cache", n, ms[mode], (double)tps[mode][k]);
        }
        x[k] = (float)n;
        printf("  | %9d | %11.1f | %8.0f | %11.1f | %8.0f | %13.1fx |\n", n, ms[1], (double)tps[1][k], ms[0],
               (double)tps[0][k], ms[0] / ms[1]);
    }
    int rc = bench_close_result(&tsv_file, "bench_generate");
    char stem[1024];
    snprintf(stem, sizeof stem, "%s/generate", out_dir);
    const float *ys[2] = {tps[1], tps[0]};
    const char *names[2] = {"KV cache (one row per block per token)", "no cache (the whole window per token)"};
    if (plot_lines(stem, "GPT generation, greedy: tokens/s up to a context of n (log-log)",
                   "context n (positions; 1-token prompt, n tokens generated)", "tokens/s", x, ys, names, 2,
                   n_sizes, 2) < 0) {
        fprintf(stderr, "bench_generate: %s\n", last_error());
        rc = -1;
    }
    printf("%s\n", same ? "both modes generated the same tokens"
                        : "WARNING: the two modes generated different tokens: a near-tie of the untrained model's\n"
                          "         logits rounded apart, or a broken KV cache (tests/test_gpt.c checks it)");
    if (rc == 0)
        printf("wrote %s/generate.tsv, %s.dat, %s.gp%s\n", out_dir, stem, stem,
               gnuplot_available() ? " and the .png" : "");
    free(out_cached);
    free(out_plain);
    gpt_free(&g);
    return rc == 0 ? 0 : 1;
}
