/* main.c - chapter 06: the encoder-decoder transformer on chapters 01-03's tasks.
 *
 *   ./build/06_transformer                                   dates, 2+2 pre-norm blocks, quick default
 *   ./build/06_transformer --task reverse --max-len 80
 *   ./build/06_transformer --preset long                     g2p, the long run of the README
 *   ./build/06_transformer --norm post --norm-type rmsnorm --mlp swiglu
 *   ./build/06_transformer --norm-experiment                 post-LN vs pre-LN at depth 2, 6, 12
 *   ./build/06_transformer --load out/06_transformer/model.ckpt --translate "21 Nov 2026" --plot
 *
 * Everything but the model (flags, data, training loop, evaluation, beam
 * search, plots, checkpoint) is common/train/seq2seq.c, as for chapters
 * 01-03; the model is transformer.c over block.c. */
#include <stdio.h>
#include <string.h>

#include "train/seq2seq.h"
#include "06_transformer/norm_experiment.h"
#include "06_transformer/transformer.h"
#include "io/args.h"
#include "kernels/matmul.h"
#include "util/error.h"
#include "util/output.h"

static int layers_flag = 2;
static int dim_flag = 64;
static int heads_flag = 4;
static int ff_flag = 256;
static const char *norm_flag = "pre";
static const char *norm_type_flag = "layernorm";
static const char *mlp_flag = "gelu";
static float dropout_flag = 0.0f;
static float attn_dropout_flag = 0.0f;
static const char *pos_flag = "sinusoidal";
static float label_smoothing_flag = 0.1f;
static int no_kv_cache_flag = 0;
static int norm_experiment_flag = 0;

static int write_config(char *config, int cap) {
    if (dim_flag % heads_flag != 0)
        return fail("--dim %d is not a multiple of --heads %d: each head gets dim / heads numbers", dim_flag,
                    heads_flag);
    size_t used = strlen(config);
    int n = snprintf(config + used, (size_t)cap - used,
                     "model=transformer\nlayers=%d\ndim=%d\nheads=%d\nff=%d\nnorm=%s\nnorm_type=%s\nmlp=%s\n"
                     "dropout=%g\nattn_dropout=%g\npos=%s\nlabel_smoothing=%g\nkv_cache=%d\n",
                     layers_flag, dim_flag, heads_flag, ff_flag, norm_flag, norm_type_flag, mlp_flag,
                     (double)dropout_flag, (double)attn_dropout_flag, pos_flag, (double)label_smoothing_flag,
                     no_kv_cache_flag ? 0 : 1);
    return n < cap - (int)used ? 0 : fail("configuration text too long");
}

/* The transformer the config text names, for data set d. */
static int build(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    TransformerConfig cfg = {0};
    if (config_read(config, TRANSFORMER_CONFIG_FIELDS, TRANSFORMER_CONFIG_N, &cfg) < 0) return -1;
    return transformer_build(m, d, &cfg, max_batch, seed);
}

/* The program; main() below adds the check that its output was written. */
static int run(int argc, char **argv) {
    const ArgSpec model_args[] = {
        {"layers", ARG_INT, &layers_flag, "blocks in the encoder, and in the decoder", 1, TRANSFORMER_MAX_LAYERS, NULL, ARG_MODEL},
        {"dim", ARG_INT, &dim_flag, "model width D (a multiple of --heads)", 1, 4096, NULL, ARG_MODEL},
        {"heads", ARG_INT, &heads_flag, "attention heads H (each of width D / H)", 1, 256, NULL, ARG_MODEL},
        {"ff", ARG_INT, &ff_flag, "hidden width F of the position-wise MLP", 1, 65536, NULL, ARG_MODEL},
        {"norm", ARG_STRING, &norm_flag, "norms after (2017) or before (GPT-2) each sublayer", 0, 0, "post,pre", ARG_MODEL},
        {"norm-type", ARG_STRING, &norm_type_flag, "which norm", 0, 0, "layernorm,rmsnorm,none", ARG_MODEL},
        {"mlp", ARG_STRING, &mlp_flag, "the position-wise MLP", 0, 0, "gelu,relu,swiglu,none", ARG_MODEL},
        {"dropout", ARG_FLOAT, &dropout_flag, "dropout on embeddings and sublayer outputs (training only)", 0, 0.95,
         NULL, ARG_TRAINING},
        {"attn-dropout", ARG_FLOAT, &attn_dropout_flag,
         "dropout on the attention weights (training only)", 0, 0.95, NULL, ARG_TRAINING},
        {"pos", ARG_STRING, &pos_flag, "positions (chapter 04)", 0, 0, "sinusoidal,learned", ARG_MODEL},
        {"label-smoothing", ARG_FLOAT, &label_smoothing_flag, "eps of label smoothing (0 = off)", 0, 0.95, NULL, ARG_TRAINING},
        {"no-kv-cache", ARG_BOOL, &no_kv_cache_flag,
         "decode by recomputing the whole prefix at every step (slower; same outputs)", 0, 0, NULL, ARG_OUTPUT},
        {"norm-experiment", ARG_BOOL, &norm_experiment_flag,
         "only run the post-LN vs pre-LN experiment (depth 2, 6, 12)", 0, 0, NULL, ARG_OUTPUT},
    };
    /* --norm-experiment is a program of its own: it takes only --out and
     * --threads, parsed and checked like every flag. */
    if (args_given(argc, argv, "norm-experiment")) {
        const char *out_dir = "out/06_transformer";
        int threads = 0;
        const ArgSpec experiment_args[] = {
            {"norm-experiment", ARG_BOOL, &norm_experiment_flag, "run the post-LN vs pre-LN experiment", 0, 0, NULL, ARG_OUTPUT},
            {"out", ARG_STRING, &out_dir, "directory for its table and plot", 0, 0, NULL, ARG_OUTPUT},
            {"threads", ARG_INT, &threads, "threads (0 = all cores)", 0, 256, NULL, ARG_SHARED},
        };
        int rc = args_parse(argc, argv, experiment_args, 3);
        if (rc < 0) {
            fprintf(stderr, "06_transformer: error: %s (with --norm-experiment only --out and --threads apply)\n",
                    last_error());
            return 1;
        }
        if (rc == 1) {
            args_print_help(argv[0], "The post-LN vs pre-LN experiment of chapter 06.", experiment_args, 3,
                            "./build/06_transformer --norm-experiment");
            return 0;
        }
        if (threads > 0) threads_set(threads);
        if (norm_experiment_run(out_dir) < 0) {
            fprintf(stderr, "06_transformer: error: %s\n", last_error());
            return 1;
        }
        return 0;
    }
    ChapterSpec spec = {
        .chapter = "06_transformer",
        .model_name = "transformer",
        .summary = "Chapter 06: the transformer encoder-decoder. Blocks of attention and MLP, each with a residual\n"
                   "and a norm; the decoder adds causal self-attention and cross-attention, and a KV cache.",
        .examples = "./build/06_transformer\n"
                    "./build/06_transformer --task reverse --layers 2 --norm post\n"
                    "./build/06_transformer --norm-experiment\n"
                    "./build/06_transformer --load out/06_transformer/model.ckpt --translate \"12th of Feb. 2042\" --plot",
        .model_args = model_args,
        .n_model_args = (int)(sizeof model_args / sizeof model_args[0]),
        .write_config = write_config,
        .build = build,
        .default_steps = 1200,
        .default_batch = 64,
        .default_lr = 3e-3f,
        .preset_long = "--task g2p --steps 4000 --layers 2 --dim 256 --heads 4 --ff 1024 --batch 128 "
                       "--lr 1e-3 --warmup 800 --dropout 0.1 --label-smoothing 0.1 --beam 5",
    };
    return seq2seq_main(argc, argv, &spec);
}

int main(int argc, char **argv) {
    output_guard();
    return output_exit_status("06_transformer", run(argc, argv));
}
