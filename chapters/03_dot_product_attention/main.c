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
 * The program, top to bottom: flags, the scaling experiment (a fraction of
 * a second; scaling_experiment.c), data, model, (with --load: the saved
 * weights, a translation and its attention map), training, evaluation,
 * outputs. Each step is one call of the seq2seq driver
 * (common/train/seq2seq.h: the training runs train/loop.h's train_loop);
 * the model is attn_seq2seq.c. */
#include "03_dot_product_attention/attn_seq2seq.h"
#include "03_dot_product_attention/scaling_experiment.h"
#include "io/args.h"
#include "train/seq2seq.h"
#include "util/output.h"

static const Seq2SeqProgram PROGRAM = {
    .chapter = "03_dot_product_attention",
    .model_name = "attn_seq2seq",
    .summary = "Chapter 03: the attention layer E = score(Q, K), A = softmax(E, dim=1), Y = A V (dot, scaled\n"
               "dot, multiplicative or additive score) in chapter 01's encoder-decoder; first, the scaling test.",
    .examples = "./build/03_dot_product_attention\n"
                "./build/03_dot_product_attention --score additive --placement bahdanau\n"
                "./build/03_dot_product_attention --scaling-experiment\n"
                "./build/03_dot_product_attention --load out/03_dot_product_attention/model.ckpt "
                "--translate \"12th of Feb. 2042\" --plot",
    .preset_long = "--task g2p --steps 30000 --state 256 --embed 64 --beam 5",
    /* about 30 minutes on 2 cores */
    .preset_translate = "--task translate --steps 7000 --batch 32 --eval-every 1000",
};

int main(int argc, char **argv) {
    output_guard();

    /* 1. Flags: the model's configuration (its defaults here), then the
     *    flags every seq2seq program shares (--task, --steps, --beam ...). */
    AttnSeq2SeqConfig cfg = {.cell = CELL_GRU, .D_E = 64, .S = 128, .score = SCORE_SCALED_DOT,
                             .placement = PLACEMENT_LUONG, .D_A = 64, .project_kv = 0};
    const char *cell = "gru", *score = "scaled_dot", *placement = "luong";
    int scaling_only = 0;
    const ArgSpec model_flags[] = {
        {"cell", ARG_STRING, &cell, "recurrent cell of encoder and decoder", 0, 0, "rnn,gru,lstm",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"embed", ARG_INT, &cfg.D_E, "embedding size D_E", 1, 4096, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"state", ARG_INT, &cfg.S, "state size S (queries, keys and values have this size)", 1, 4096, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        args_refused("hidden", "the RNN state size S is --state (the letter table's S)"),
        {"score", ARG_STRING, &score, "score function", 0, 0, "dot,scaled_dot,multiplicative,additive",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"placement", ARG_STRING, &placement, "where attention sits (luong: after the cell, bahdanau: before)", 0, 0,
         "luong,bahdanau", ARG_MODEL, ARG_TRAINING_ONLY},
        {"attn", ARG_INT, &cfg.D_A, "additive score only: hidden size D_A of v^T tanh(W_1 k + W_2 q)", 1, 4096, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"project-kv", ARG_BOOL, &cfg.project_kv,
         "keys K = X W_K and values V = X W_V (cross-attention) instead of K = V = X", 0, 0, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"scaling-experiment", ARG_BOOL, &scaling_only,
         "only run the scaling experiment (softmax entropy against D)", 0, 0, NULL, ARG_OUTPUT, ARG_TRAINING_ONLY},
    };
    Seq2SeqRun run;
    seq2seq_init(&run, &PROGRAM);
    int rc = seq2seq_parse_flags(&run, argc, argv, model_flags, (int)(sizeof model_flags / sizeof model_flags[0]));
    if (rc == 0) rc = cell_type_parse(cell, &cfg.cell);
    if (rc == 0) rc = score_from_name(score, &cfg.score);
    if (rc == 0) rc = placement_from_name(placement, &cfg.placement);

    /* 2. The chapter's first step: the scaling experiment, its table and two
     *    plots (with --scaling-experiment, the whole run). */
    if (rc == 0 && !run.flags.shared.load) rc = scaling_experiment_run(run.out_dir);
    if (rc == 0 && scaling_only) rc = 1;   /* done */

    /* 3. The data: the task's examples (with --load, the task the checkpoint names). */
    if (rc == 0) rc = seq2seq_load_data(&run);

    /* 4. The model, from its configuration (with --load, the checkpoint's). */
    if (rc == 0) rc = seq2seq_model_config(&run, ATTN_SEQ2SEQ_CONFIG_FIELDS, ATTN_SEQ2SEQ_CONFIG_N, &cfg);
    if (rc == 0)
        rc = attn_seq2seq_build(&run.model, &run.data, &cfg, seq2seq_max_batch(&run), (uint64_t)run.flags.shared.seed);

    /* 5. With --load: the saved weights; --translate "..." decodes the text
     *    (--plot: and draws its attention map) and stops. */
    if (rc == 0 && run.flags.shared.load) rc = seq2seq_use_saved(&run);

    /* 6. Training: train_loop over batches of the training split. */
    if (rc == 0 && !run.flags.shared.load) rc = seq2seq_train(&run);

    /* 7. Evaluation on the test split, 8. the checkpoint, plots (the
     *    attention of three test inputs) and results.json. */
    if (rc == 0) rc = seq2seq_evaluate(&run);
    if (rc == 0) rc = seq2seq_write_outputs(&run);
    return seq2seq_finish(&run, rc);
}
