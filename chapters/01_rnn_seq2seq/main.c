/* main.c - chapter 01: train an RNN encoder-decoder and show its bottleneck.
 *
 *   ./build/01_rnn_seq2seq                        dates, GRU, quick default
 *   ./build/01_rnn_seq2seq --task reverse --max-len 40
 *   ./build/01_rnn_seq2seq --task g2p --steps 20000
 *   ./build/01_rnn_seq2seq --load out/01_rnn_seq2seq/model.ckpt --translate "21 Nov 2026"
 *
 * The program, top to bottom: flags, data, model, (with --load: the saved
 * weights, a translation), training, evaluation, outputs. Each step is one
 * call of the seq2seq driver (common/train/seq2seq.h: the training runs
 * train/loop.h's train_loop); the model is rnn_seq2seq.c. */
#include "01_rnn_seq2seq/rnn_seq2seq.h"
#include "io/args.h"
#include "train/seq2seq.h"
#include "util/output.h"

static const Seq2SeqProgram PROGRAM = {
    .chapter = "01_rnn_seq2seq",
    .model_name = "rnn_seq2seq",
    .summary = "Chapter 01: an RNN encoder-decoder. The encoder's last state (the context c) is all the\n"
               "decoder knows about the input, a bottleneck that shows as inputs grow.",
    .examples = "./build/01_rnn_seq2seq\n"
                "./build/01_rnn_seq2seq --task reverse --cell lstm\n"
                "./build/01_rnn_seq2seq --load out/01_rnn_seq2seq/model.ckpt --translate \"12th of Feb. 2042\"",
    .preset_long = "--task g2p --steps 30000 --state 512 --embed 64 --beam 5",
    /* about 30 minutes on 2 cores */
    .preset_translate = "--task translate --steps 10000 --batch 32 --eval-every 1000",
    .no_attention = 1,
};

int main(int argc, char **argv) {
    output_guard();

    /* 1. Flags: the model's configuration (its defaults here), then the
     *    flags every seq2seq program shares (--task, --steps, --beam ...). */
    RnnConfig cfg = {.cell = CELL_GRU, .D_E = 32, .S = 128};
    const char *cell = "gru";
    const ArgSpec model_flags[] = {
        {"cell", ARG_STRING, &cell, "recurrent cell of encoder and decoder", 0, 0, "rnn,gru,lstm",
         ARG_MODEL, ARG_TRAINING_ONLY},
        {"embed", ARG_INT, &cfg.D_E, "embedding size D_E", 1, 4096, NULL, ARG_MODEL, ARG_TRAINING_ONLY},
        {"state", ARG_INT, &cfg.S, "state size S (the context c has this size)", 1, 4096, NULL,
         ARG_MODEL, ARG_TRAINING_ONLY},
        args_refused("hidden", "the RNN state size S is --state (the letter table's S)"),
    };
    Seq2SeqRun run;
    seq2seq_init(&run, &PROGRAM);
    run.flags.shared.train.steps = 2000;   /* this chapter's quick default */
    int rc = seq2seq_parse_flags(&run, argc, argv, model_flags, (int)(sizeof model_flags / sizeof model_flags[0]));
    if (rc == 0) rc = cell_type_parse(cell, &cfg.cell);

    /* 2. The data: the task's examples (with --load, the task the checkpoint names). */
    if (rc == 0) rc = seq2seq_load_data(&run);

    /* 3. The model, from its configuration (with --load, the checkpoint's). */
    if (rc == 0) rc = seq2seq_model_config(&run, RNN_CONFIG_FIELDS, RNN_CONFIG_N, &cfg);
    if (rc == 0) rc = rnn_seq2seq_build(&run.model, &run.data, &cfg, seq2seq_max_batch(&run),
                                        (uint64_t)run.flags.shared.seed);

    /* 4. With --load: the saved weights; --translate "..." decodes the text and stops. */
    if (rc == 0 && run.flags.shared.load) rc = seq2seq_use_saved(&run);

    /* 5. Training: train_loop over batches of the training split. */
    if (rc == 0 && !run.flags.shared.load) rc = seq2seq_train(&run);

    /* 6. Evaluation on the test split, 7. the checkpoint, plots and results.json. */
    if (rc == 0) rc = seq2seq_evaluate(&run);
    if (rc == 0) rc = seq2seq_write_outputs(&run);
    return seq2seq_finish(&run, rc);
}
