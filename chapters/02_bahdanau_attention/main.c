/* main.c - chapter 02: train an encoder-decoder with Bahdanau (additive)
 * attention and draw where it looks.
 *
 *   ./build/02_bahdanau_attention                        dates, GRU, quick default
 *   ./build/02_bahdanau_attention --task reverse --min-len 5 --max-len 50
 *   ./build/02_bahdanau_attention --task g2p --steps 30000 --state 256 --bidirectional --beam 5
 *   ./build/02_bahdanau_attention --load out/02_bahdanau_attention/model.ckpt \
 *                                 --translate "21 Nov 2026" --plot
 *
 * The program, top to bottom: flags, data, model, (with --load: the saved
 * weights, a translation and its attention map), training, evaluation,
 * outputs. Each step is one call of the seq2seq driver
 * (common/train/seq2seq.h: the training runs train/loop.h's train_loop);
 * the model is bahdanau.c. */
#include "02_bahdanau_attention/bahdanau.h"
#include "io/args.h"
#include "train/seq2seq.h"
#include "util/output.h"

static const Seq2SeqProgram PROGRAM = {
    .chapter = "02_bahdanau_attention",
    .model_name = "bahdanau",
    .summary = "Chapter 02: chapter 01's encoder-decoder with additive (Bahdanau) attention: at every step\n"
               "e_{t,i} = v^T tanh(W_1 h_i + W_2 s_{t-1}), a_t = softmax(e_t), c_t = sum_i a_{t,i} h_i.",
    .examples = "./build/02_bahdanau_attention\n"
                "./build/02_bahdanau_attention --task reverse --bidirectional\n"
                "./build/02_bahdanau_attention --load out/02_bahdanau_attention/model.ckpt "
                "--translate \"12th of Feb. 2042\" --plot",
    .preset_long = "--task g2p --steps 30000 --state 256 --embed 64 --attn 128 --bidirectional --beam 5",
    /* about 30 minutes on 2 cores */
    .preset_translate = "--task translate --steps 7000 --batch 32 --eval-every 1000",
};

int main(int argc, char **argv) {
    output_guard();

    /* 1. Flags: the model's configuration (its defaults here), then the
     *    flags every seq2seq program shares (--task, --steps, --beam ...). */
    BahdanauConfig cfg = {.cell = CELL_GRU, .D_E = 32, .S = 96, .D_A = 32, .bidirectional = 0};
    const char *cell = "gru";
    const ArgSpec model_flags[] = {
        {"cell", ARG_STRING, &cell, "recurrent cell of encoder and decoder", 0, 0, "rnn,gru,lstm",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"embed", ARG_INT, &cfg.D_E, "embedding size D_E", 1, 4096, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"state", ARG_INT, &cfg.S, "state size S of encoder and decoder", 1, 4096, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        args_refused("hidden", "the RNN state size S is --state (the letter table's S)"),
        {"attn", ARG_INT, &cfg.D_A, "attention size D_A (columns of W_1, W_2; length of v)", 1, 4096, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"bidirectional", ARG_BOOL, &cfg.bidirectional,
         "add an encoder reading right to left: h_i = [h_fwd_i ; h_bwd_i] (2S)", 0, 0, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
    };
    Seq2SeqRun run;
    seq2seq_init(&run, &PROGRAM);
    run.flags.shared.train.steps = 2000;   /* this chapter's quick default */
    int rc = seq2seq_parse_flags(&run, argc, argv, model_flags, (int)(sizeof model_flags / sizeof model_flags[0]));
    if (rc == 0) rc = cell_type_parse(cell, &cfg.cell);

    /* 2. The data: the task's examples (with --load, the task the checkpoint names). */
    if (rc == 0) rc = seq2seq_load_data(&run);

    /* 3. The model, from its configuration (with --load, the checkpoint's). */
    if (rc == 0) rc = seq2seq_model_config(&run, BAHDANAU_CONFIG_FIELDS, BAHDANAU_CONFIG_N, &cfg);
    if (rc == 0) rc = bahdanau_build(&run.model, &run.data, &cfg, seq2seq_max_batch(&run),
                                     (uint64_t)run.flags.shared.seed);

    /* 4. With --load: the saved weights; --translate "..." decodes the text
     *    (--plot: and draws its attention map) and stops. */
    if (rc == 0 && run.flags.shared.load) rc = seq2seq_use_saved(&run);

    /* 5. Training: train_loop over batches of the training split. */
    if (rc == 0 && !run.flags.shared.load) rc = seq2seq_train(&run);

    /* 6. Evaluation on the test split, 7. the checkpoint, plots (the
     *    attention of three test inputs) and results.json. */
    if (rc == 0) rc = seq2seq_evaluate(&run);
    if (rc == 0) rc = seq2seq_write_outputs(&run);
    return seq2seq_finish(&run, rc);
}
