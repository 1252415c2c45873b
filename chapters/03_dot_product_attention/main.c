/* main.c - chapter 03: the general attention layer, first on random vectors
 * (why the Transformer divides by sqrt(D)), then inside an encoder-decoder
 * with any of its four score functions.
 *
 *   ./build/03_dot_product_attention                         dates, GRU, scaled dot, Luong placement
 *   ./build/03_dot_product_attention --score additive --placement bahdanau   chapter 02's model
 *   ./build/03_dot_product_attention --score multiplicative --project-kv
 *   ./build/03_dot_product_attention --scaling-experiment   only the scaling table and plots
 *   ./build/03_dot_product_attention --load out/03_dot_product_attention/model.ckpt \
 *                                    --translate "21 Nov 2026" --plot
 *
 * A training run first runs the scaling experiment (a fraction of a second)
 * and prints its table; then common/train/seq2seq.c does flags, data, training,
 * evaluation, plots and the checkpoint, with the model of attn_seq2seq.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train/seq2seq.h"
#include "03_dot_product_attention/attn_seq2seq.h"
#include "03_dot_product_attention/scaling_experiment.h"
#include "util/error.h"
#include "io/plot.h"
#include "util/util.h"
#include "util/output.h"

static const char *cell_flag = "gru";
static int embed_flag = 64;
static int hidden_flag = 128;
static const char *score_flag = "scaled_dot";
static const char *placement_flag = "luong";
static int attn_flag = 64;
static int project_kv_flag = 0;
static int scaling_only_flag = 0;

/* The scaling experiment: random queries and keys q, k ~ N(0, I_D), with the
 * dot score and the scaled dot score, for D = 1 .. 1024. Prints the table and
 * writes out_dir/scaling_entropy.{dat,gp,png} and scaling_grad.{...}. */
static int run_scaling_experiment(const char *out_dir) {
    enum { N_DIMS = 11, N_QUERIES = 512, N_KEYS = 16 };
    const int dims[N_DIMS] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
    ScalingCurves c;
    if (scaling_experiment(&c, dims, N_DIMS, N_QUERIES, N_KEYS, 3) < 0) return -1;
    printf("Scaling experiment: %d random queries over %d random keys, q, k ~ N(0, I_D).\n"
           "Without 1/sqrt(D) the scores spread as sqrt(D), softmax goes one-hot and the gradient\n"
           "reaching the scores vanishes; with it nothing depends on D. (uniform entropy: log %d = %.2f)\n",
           N_QUERIES, N_KEYS, N_KEYS, logf((float)N_KEYS));
    printf("  %6s | %-17s | %-17s | %-17s | %-19s\n", "", "std of scores", "entropy of a_i", "max_j a_ij",
           "||dE_i|| (grad)");
    printf("  %6s | %8s %8s | %8s %8s | %8s %8s | %9s %9s\n", "D", "dot", "scaled", "dot", "scaled", "dot",
           "scaled", "dot", "scaled");
    for (int d = 0; d < N_DIMS; d++)
        printf("  %6d | %8.2f %8.2f | %8.3f %8.3f | %8.3f %8.3f | %9.2e %9.2e\n", dims[d], c.score_std[0][d],
               c.score_std[1][d], c.entropy[0][d], c.entropy[1][d], c.max_weight[0][d], c.max_weight[1][d],
               c.grad_norm[0][d], c.grad_norm[1][d]);
    float log2_dim[N_DIMS], uniform[N_DIMS];
    for (int d = 0; d < N_DIMS; d++) {
        log2_dim[d] = log2f((float)dims[d]);
        uniform[d] = logf((float)N_KEYS);
    }
    if (out_dir_prepare("--out", out_dir) < 0) return -1;
    char stem[1024];
    const char *names[3] = {"dot  q.k", "scaled dot  q.k / sqrt(D)", "uniform weights (log N)"};
    const float *entropy[3] = {c.entropy[0], c.entropy[1], uniform};
    if (path_format(stem, sizeof stem, "%s/scaling_entropy", out_dir) < 0) return -1;
    if (plot_lines(stem, "Entropy of softmax(scores) for random q, k in R^D", "log2 D", "entropy (nats)",
                   log2_dim, entropy, names, 3, N_DIMS, 0) < 0)
        return -1;
    printf("  plot: %s.%s\n", stem, gnuplot_available() ? "png" : "gp");
    const float *grad[2] = {c.grad_norm[0], c.grad_norm[1]};
    if (path_format(stem, sizeof stem, "%s/scaling_grad", out_dir) < 0) return -1;
    if (plot_lines(stem, "Gradient reaching the scores, ||dE_i||, for dA_i ~ N(0, I)", "log2 D",
                   "mean ||dE_i||", log2_dim, grad, names, 2, N_DIMS, 1) < 0)
        return -1;
    printf("  plot: %s.%s\n\n", stem, gnuplot_available() ? "png" : "gp");
    return 0;
}

/* Where the scaling experiment writes its plots: --out, read ahead in main(). */
static const char *scaling_out_dir = "out/03_dot_product_attention";

/* seq2seq_main calls this once per training run, after every flag has been
 * checked and before the model is built: the moment for the first step of
 * the chapter, the scaling experiment. Then the model's lines for the config. */
static int write_config(char *config, int cap) {
    if (run_scaling_experiment(scaling_out_dir) < 0) return -1;
    size_t used = strlen(config);
    int n = snprintf(config + used, (size_t)cap - used,
                     "model=attn_seq2seq\ncell=%s\nembed=%d\nhidden=%d\nscore=%s\nplacement=%s\nattn=%d\n"
                     "project_kv=%d\n",
                     cell_flag, embed_flag, hidden_flag, score_flag, placement_flag, attn_flag,
                     project_kv_flag);
    return n < cap - (int)used ? 0 : fail("configuration text too long");
}

/* The program; main() below adds the check that its output was written. */
static int run(int argc, char **argv) {
    const ArgSpec model_args[] = {
        {"cell", ARG_STRING, &cell_flag, "recurrent cell of encoder and decoder", 0, 0, "rnn,gru,lstm", ARG_MODEL},
        {"embed", ARG_INT, &embed_flag, "embedding size D_E", 1, 4096, NULL, ARG_MODEL},
        {"hidden", ARG_INT, &hidden_flag, "state size S (queries, keys and values have this size)", 1, 4096, NULL, ARG_MODEL},
        {"score", ARG_STRING, &score_flag, "score function", 0, 0,
         "dot,scaled_dot,multiplicative,additive", ARG_MODEL},
        {"placement", ARG_STRING, &placement_flag,
         "where attention sits (luong: after the cell, bahdanau: before)", 0, 0,
         "luong,bahdanau", ARG_MODEL},
        {"attn", ARG_INT, &attn_flag, "additive score only: hidden size D_A of v^T tanh(W_1 k + W_2 q)", 1, 4096, NULL, ARG_MODEL},
        {"project-kv", ARG_BOOL, &project_kv_flag,
         "keys K = X W_K and values V = X W_V (cross-attention) instead of K = V = X", 0, 0, NULL, ARG_MODEL},
        {"scaling-experiment", ARG_BOOL, &scaling_only_flag,
         "only run the scaling experiment (softmax entropy against D)", 0, 0, NULL, ARG_OUTPUT},
    };
    /* Look ahead at two flags (seq2seq_main parses and checks them all):
     * --scaling-experiment runs only the experiment; --out is where it writes. */
    int scaling_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--scaling-experiment") == 0) scaling_only = 1;
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) scaling_out_dir = argv[i + 1];
        else if (strncmp(argv[i], "--out=", 6) == 0) scaling_out_dir = argv[i] + 6;
    }
    if (scaling_only) {
        if (run_scaling_experiment(scaling_out_dir) < 0) {
            fprintf(stderr, "03_dot_product_attention: error: %s\n", last_error());
            return 1;
        }
        return 0;
    }
    ChapterSpec spec = {
        .chapter = "03_dot_product_attention",
        .model_name = "attn_seq2seq",
        .summary = "Chapter 03: the attention layer E = score(Q, K), A = softmax(E, dim=1), Y = A V (dot, scaled\n"
                   "dot, multiplicative or additive score) in chapter 01's encoder-decoder; first, the scaling test.",
        .examples = "./build/03_dot_product_attention\n"
                    "./build/03_dot_product_attention --score additive --placement bahdanau\n"
                    "./build/03_dot_product_attention --scaling-experiment\n"
                    "./build/03_dot_product_attention --load out/03_dot_product_attention/model.ckpt "
                    "--translate \"12th of Feb. 2042\" --plot",
        .model_args = model_args,
        .n_model_args = (int)(sizeof model_args / sizeof model_args[0]),
        .write_config = write_config,
        .build = attn_seq2seq_build,
        .default_steps = 1000,
        .default_batch = 64,
        .default_lr = 3e-3f,
        .preset_long = "--task g2p --steps 30000 --hidden 256 --embed 64 --beam 5",
    };
    return seq2seq_main(argc, argv, &spec);
}

int main(int argc, char **argv) {
    output_guard();
    return output_exit_status("03_dot_product_attention", run(argc, argv));
}
