/* main.c - chapter 01: train an RNN encoder-decoder and show its bottleneck.
 *
 *   ./build/01_rnn_seq2seq                        dates, GRU, quick default
 *   ./build/01_rnn_seq2seq --task reverse --max-len 40
 *   ./build/01_rnn_seq2seq --task g2p --steps 20000
 *   ./build/01_rnn_seq2seq --load out/01_rnn_seq2seq/model.ckpt --translate "21 Nov 2026"
 *
 * Everything but the model (flags, data, training loop, evaluation, plots,
 * checkpoint) is common/train/seq2seq.c; the model is rnn_seq2seq.c. */
#include <stdio.h>
#include <string.h>

#include "train/seq2seq.h"
#include "01_rnn_seq2seq/rnn_seq2seq.h"
#include "util/error.h"
#include "util/output.h"

static const char *cell_flag = "gru";
static int embed_flag = 32;
static int hidden_flag = 128;

static int write_config(char *config, int cap) {
    size_t used = strlen(config);
    int n = snprintf(config + used, (size_t)cap - used, "model=rnn_seq2seq\ncell=%s\nembed=%d\nhidden=%d\n",
                     cell_flag, embed_flag, hidden_flag);
    return n < cap - (int)used ? 0 : fail("configuration text too long");
}

int main(int argc, char **argv) {
    output_guard();
    const ArgSpec model_args[] = {
        {"cell", ARG_STRING, &cell_flag, "recurrent cell of encoder and decoder", 0, 0, "rnn,gru,lstm", ARG_MODEL},
        {"embed", ARG_INT, &embed_flag, "embedding size D_E", 1, 4096, NULL, ARG_MODEL},
        {"hidden", ARG_INT, &hidden_flag, "state size S (the context c has this size)", 1, 4096, NULL, ARG_MODEL},
    };
    ChapterSpec spec = {
        .chapter = "01_rnn_seq2seq",
        .model_name = "rnn_seq2seq",
        .summary = "Chapter 01: an RNN encoder-decoder. The encoder's last state (the context c) is all the\n"
                   "decoder knows about the input, a bottleneck that shows as inputs grow.",
        .examples = "./build/01_rnn_seq2seq\n"
                    "./build/01_rnn_seq2seq --task reverse --cell lstm\n"
                    "./build/01_rnn_seq2seq --load out/01_rnn_seq2seq/model.ckpt --translate \"12th of Feb. 2042\"",
        .no_attention = 1,
        .model_args = model_args,
        .n_model_args = (int)(sizeof model_args / sizeof model_args[0]),
        .write_config = write_config,
        .build = rnn_seq2seq_build,
        .default_steps = 2000,
        .default_batch = 64,
        .default_lr = 3e-3f,
        .preset_long = "--task g2p --steps 30000 --hidden 512 --embed 64 --beam 5",
    };
    return output_exit_status("01_rnn_seq2seq", seq2seq_main(argc, argv, &spec));
}
