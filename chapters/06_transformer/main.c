/* main.c - chapter 06: the encoder-decoder transformer on chapters 01-03's tasks.
 *
 *   ./build/06_transformer                                   dates, 2+2 pre-norm blocks, quick default
 *   ./build/06_transformer --task reverse --max-len 80
 *   ./build/06_transformer --preset long                     g2p, the long run of the README
 *   ./build/06_transformer --norm post --norm-type rmsnorm --mlp swiglu
 *   ./build/06_transformer --norm-experiment                 post-LN vs pre-LN at depth 2, 6, 12
 *   ./build/06_transformer --load out/06_transformer/model.ckpt --translate "21 Nov 2026" --plot
 *
 * The program, top to bottom, as chapters 01-03's: flags, data, model,
 * (with --load: the saved weights, a translation and its attention maps),
 * training, evaluation, outputs. Each step is one call of the seq2seq
 * driver (common/train/seq2seq.h: the training runs train/loop.h's
 * train_loop); the model is transformer.c over block.c. The norm
 * experiment's six runs go through the same loop (run_norm_experiment). */
#include <string.h>

#include "06_transformer/norm_experiment.h"
#include "06_transformer/transformer.h"
#include "io/args.h"
#include "io/checkpoint.h"
#include "train/loop.h"
#include "train/seq2seq.h"
#include "util/error.h"
#include "util/output.h"

static const Seq2SeqProgram PROGRAM = {
    .chapter = "06_transformer",
    .model_name = "transformer",
    .summary = "Chapter 06: the transformer encoder-decoder. Blocks of attention and MLP, each with a residual\n"
               "and a norm; the decoder adds causal self-attention and cross-attention, and a KV cache.",
    .examples = "./build/06_transformer\n"
                "./build/06_transformer --task reverse --layers 2 --norm post\n"
                "./build/06_transformer --norm-experiment\n"
                "./build/06_transformer --load out/06_transformer/model.ckpt --translate \"12th of Feb. 2042\" --plot",
    .preset_long = "--task g2p --steps 4000 --layers 2 --dim 256 --heads 4 --ff 1024 --batch 128 "
                   "--lr 1e-3 --warmup 800 --dropout 0.1 --label-smoothing 0.1 --beam 5",
    /* about 30 minutes on 2 cores */
    .preset_translate = "--task translate --steps 3500 --batch 32 --eval-every 500 --dropout 0.1",
};

/* The block's choices from the flags' names (args_parse has checked each
 * is one of them), as BlockSpec holds them. */
static void block_choices(BlockSpec *b, const char *norm, const char *norm_type, const char *mlp) {
    b->norm_place = strcmp(norm, "post") == 0 ? BLOCK_POST_NORM : BLOCK_PRE_NORM;
    b->norm = strcmp(norm_type, "rmsnorm") == 0 ? BLOCK_RMSNORM
              : strcmp(norm_type, "none") == 0  ? BLOCK_NO_NORM
              : strcmp(norm_type, "batchnorm") == 0 ? BLOCK_BATCHNORM
                                                : BLOCK_LAYERNORM;
    b->mlp = strcmp(mlp, "relu") == 0     ? BLOCK_MLP_RELU
             : strcmp(mlp, "swiglu") == 0 ? BLOCK_MLP_SWIGLU
             : strcmp(mlp, "none") == 0   ? BLOCK_NO_MLP
                                          : BLOCK_MLP_GELU;
}

/* With --load: the learned tables' rows as the checkpoint's config gives
 * them. A file written by training has src_pos_rows and tgt_pos_rows above
 * 0 with pos=learned and 0 otherwise; a missing line (a file from before the
 * keys) means the data's lengths. Returns 0, or -1 with fail() naming the
 * file, the line and what was expected. */
static int check_pos_rows(const char *path, const char *config, const TransformerConfig *cfg) {
    const char *keys[2] = {"src_pos_rows", "tgt_pos_rows"};
    const int rows[2] = {cfg->src_pos_rows, cfg->tgt_pos_rows};
    for (int i = 0; i < 2; i++) {
        char line[32];
        if (config_get_or(config, keys[i], "", line, sizeof line) < 0) return -1;
        if (!line[0]) continue;
        if (cfg->pos == POSITIONS_LEARNED && rows[i] == 0)
            return fail("%s: %s=0 with pos=learned: expected the rows of the learned table (1 or more), as "
                        "training writes them", path, keys[i]);
        if (cfg->pos != POSITIONS_LEARNED && rows[i] != 0)
            return fail("%s: %s=%d, but only learned positions have a table (pos is not learned): expected 0", path,
                        keys[i], rows[i]);
    }
    return 0;
}

/* --norm-experiment (norm_experiment.h): post-LN against pre-LN at depth 2,
 * 6 and 12, each run through the one training loop with this chapter's
 * settings written out: Adam at a constant rate from step 0 (no warm-up, a
 * floor of 1: no decay), no clipping and no weight decay, since each would
 * hide the effect; a point of the curve every WINDOW steps. A run that
 * diverges stops at that step. */
static int run_norm_experiment(const char *out_dir) {
    NormExperiment e;
    if (norm_experiment_start(&e, out_dir) < 0) return -1;
    const TrainOptions o = {.steps = NORM_EXPERIMENT_STEPS, .lr = NORM_EXPERIMENT_LR, .warmup = 0, .lr_floor = 1.0f,
                            .clip = 0.0f, .weight_decay = 0.0f, .eval_every = NORM_EXPERIMENT_WINDOW, .quiet = 1,
                            .unit = "examples"};
    for (int r = 0; r < NORM_EXPERIMENT_RUNS; r++) {
        NormRun run;
        if (norm_run_create(&run, &e, r) < 0) {
            norm_experiment_free(&e);
            return -1;
        }
        const Trainer trainer = {.self = &run, .params = &run.t.params, .gradient = norm_run_gradient};
        TrainLog log;
        const int diverged_at = train_loop(&trainer, &o, &log) < 0 ? log.steps_done : -1;
        if (diverged_at >= 0 && train_loop_interrupted()) {   /* Ctrl-C: not a divergence; stop */
            train_log_free(&log);
            norm_run_free(&run);
            norm_experiment_free(&e);
            return -1;
        }
        norm_experiment_record(&e, r, log.train, log.n, diverged_at, log.seconds);
        train_log_free(&log);
        norm_run_free(&run);
    }
    return norm_experiment_finish(&e);
}

int main(int argc, char **argv) {
    output_guard();

    /* 1. Flags: the model's configuration (its defaults here), then the
     *    flags every seq2seq program shares (--task, --steps, --beam ...). */
    /* D = 128 (4 heads of 32): at D = 64 the model kept up on short strings but lost a third of the reversed
     * strings of 68-80 letters, swapping neighbours (POSITIONS_AND_EXPERTS.md); wider heads at D = 64 did not help */
    TransformerConfig cfg = {
        .layers = 2,
        .block = {.D = 128, .H = 4, .F = 512, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM,
                  .mlp = BLOCK_MLP_GELU, .dropout = 0.0f, .attn_dropout = 0.0f, .attention = MULTI_HEAD_PLAIN},
        .pos = POSITIONS_SINUSOIDAL,
        .label_smoothing = 0.1f,
        .kv_cache = 1,
    };
    const char *norm = "pre", *norm_type = "layernorm", *mlp = "gelu", *pos = "sinusoidal";
    int no_kv_cache = 0, norm_experiment = 0;
    const ArgSpec model_flags[] = {
        {"layers", ARG_INT, &cfg.layers, "blocks in the encoder, and in the decoder", 1, TRANSFORMER_MAX_LAYERS, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"dim", ARG_INT, &cfg.block.D, "model width D (a multiple of --heads)", 1, 4096, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"heads", ARG_INT, &cfg.block.H, "attention heads H (each of width D / H)", 1, 256, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"ff", ARG_INT, &cfg.block.F, "hidden width F of the position-wise MLP", 1, 65536, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"norm", ARG_STRING, &norm, "norms after (2017) or before (GPT-2) each sublayer", 0, 0, "post,pre",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"norm-type", ARG_STRING, &norm_type, "which norm", 0, 0, "layernorm,rmsnorm,none,batchnorm",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"mlp", ARG_STRING, &mlp, "the position-wise MLP", 0, 0, "gelu,relu,swiglu,none", ARG_MODEL, ARG_TRAINING_ONLY},
        {"dropout", ARG_FLOAT, &cfg.block.dropout, "dropout on embeddings and sublayer outputs (training only)", 0,
         0.95, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"attn-dropout", ARG_FLOAT, &cfg.block.attn_dropout, "dropout on the attention weights (training only)", 0,
         0.95, NULL, ARG_TRAINING, ARG_TRAINING_ONLY},
        {"pos", ARG_STRING, &pos, "positions: added to X (chapter 04) or rotary on Q, K", 0, 0, "sinusoidal,learned,rope",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"label-smoothing", ARG_FLOAT, &cfg.label_smoothing, "eps of label smoothing (0 = off)", 0, 0.95, NULL,
         ARG_TRAINING, ARG_TRAINING_ONLY},
        {"no-kv-cache", ARG_BOOL, &no_kv_cache,
         "decode by recomputing the whole prefix at every step (slower; same outputs)", 0, 0, NULL, ARG_OUTPUT,
         ARG_ACTS_WITH_LOAD},   /* a decoding option: it acts on a saved model too */
        {"norm-experiment", ARG_BOOL, &norm_experiment,
         "only run the post-LN vs pre-LN experiment at depth 2, 6, 12 (into --out; the model, data and "
         "training flags do not apply)", 0, 0, NULL, ARG_OUTPUT, ARG_TRAINING_ONLY},
    };
    Seq2SeqRun run;
    seq2seq_init(&run, &PROGRAM);
    run.flags.shared.train.steps = 1200;   /* this chapter's quick default */
    int rc = seq2seq_parse_flags(&run, argc, argv, model_flags, (int)(sizeof model_flags / sizeof model_flags[0]));
    if (rc == 0) rc = positions_from_name(pos, &cfg.pos);
    if (rc == 0 && cfg.block.D % cfg.block.H != 0)
        rc = fail("--dim %d is not a multiple of --heads %d: each head gets dim / heads numbers", cfg.block.D,
                  cfg.block.H);
    block_choices(&cfg.block, norm, norm_type, mlp);
    cfg.kv_cache = !no_kv_cache;

    /* --norm-experiment: post-LN against pre-LN as the stacks deepen, the whole run. */
    if (rc == 0 && norm_experiment) rc = run_norm_experiment(run.out_dir) < 0 ? -1 : 1;

    /* 2. The data: the task's examples (with --load, the task the checkpoint names). */
    if (rc == 0) rc = seq2seq_load_data(&run);

    /* 3. The model, from its configuration (with --load, the checkpoint's). */
    if (rc == 0 && !run.flags.shared.load) transformer_pos_rows(&cfg, &run.data);
    if (rc == 0) rc = seq2seq_model_config(&run, TRANSFORMER_CONFIG_FIELDS, TRANSFORMER_CONFIG_N, &cfg);
    if (rc == 0 && run.flags.shared.load) rc = check_pos_rows(run.flags.shared.load, run.config, &cfg);
    /* decoding: the saved model's choice, or the flag */
    if (rc == 0 && run.flags.shared.load && no_kv_cache) cfg.kv_cache = 0;
    if (rc == 0)
        rc = transformer_build(&run.model, &run.data, &cfg, seq2seq_max_batch(&run), (uint64_t)run.flags.shared.seed);

    /* 4. With --load: the saved weights; --translate "..." decodes the text
     *    (--plot: and draws every layer's and head's attention) and stops. */
    if (rc == 0 && run.flags.shared.load) rc = seq2seq_use_saved(&run);

    /* 5. Training: train_loop over batches of the training split. */
    if (rc == 0 && !run.flags.shared.load) rc = seq2seq_train(&run);

    /* 6. Evaluation on the test split (greedy or --beam, with the KV cache),
     *    7. the checkpoint, plots and results.json. */
    if (rc == 0) rc = seq2seq_evaluate(&run);
    if (rc == 0) rc = seq2seq_write_outputs(&run);
    return seq2seq_finish(&run, rc);
}
