/* main.c - chapter 02: train an encoder-decoder with Bahdanau (additive)
 * attention and draw where it looks.
 *
 *   ./build/02_bahdanau_attention                        dates, GRU, quick default
 *   ./build/02_bahdanau_attention --task reverse --min-len 5 --max-len 50
 *   ./build/02_bahdanau_attention --task g2p --steps 30000 --hidden 256 --bidirectional --beam 5
 *   ./build/02_bahdanau_attention --load out/02_bahdanau_attention/model.ckpt \
 *                                 --translate "21 Nov 2026" --plot
 *
 * Everything but the model (flags, data, training loop, evaluation, plots,
 * checkpoint) is common/train/seq2seq.c; the model is bahdanau.c. */
#include <stdio.h>
#include <string.h>

#include "train/seq2seq.h"
#include "02_bahdanau_attention/bahdanau.h"
#include "util/error.h"
#include "util/output.h"

static const char *cell_flag = "gru";
static int embed_flag = 32;
static int hidden_flag = 96;
static int attn_flag = 32;
static int bidirectional_flag = 0;

static int write_config(char *config, int cap) {
    size_t used = strlen(config);
    int n = snprintf(config + used, (size_t)cap - used,
                     "model=bahdanau\ncell=%s\nembed=%d\nhidden=%d\nattn=%d\nbidirectional=%d\n",
                     cell_flag, embed_flag, hidden_flag, attn_flag, bidirectional_flag);
    return n < cap - (int)used ? 0 : fail("configuration text too long");
}

int main(int argc, char **argv) {
    output_guard();
    const ArgSpec model_args[] = {
        {"cell", ARG_STRING, &cell_flag, "recurrent cell of encoder and decoder", 0, 0, "rnn,gru,lstm", ARG_MODEL},
        {"embed", ARG_INT, &embed_flag, "embedding size D_E", 1, 4096, NULL, ARG_MODEL},
        {"hidden", ARG_INT, &hidden_flag, "state size S of encoder and decoder", 1, 4096, NULL, ARG_MODEL},
        {"attn", ARG_INT, &attn_flag, "attention size D_A (columns of W_1, W_2; length of v)", 1, 4096, NULL, ARG_MODEL},
        {"bidirectional", ARG_BOOL, &bidirectional_flag,
         "add an encoder reading right to left: h_i = [h_fwd_i ; h_bwd_i] (2S)", 0, 0, NULL, ARG_MODEL},
    };
    ChapterSpec spec = {
        .chapter = "02_bahdanau_attention",
        .model_name = "bahdanau",
        .summary = "Chapter 02: chapter 01's encoder-decoder with additive (Bahdanau) attention: at every step\n"
                   "e_{t,i} = v^T tanh(W_1 h_i + W_2 s_{t-1}), a_t = softmax(e_t), c_t = sum_i a_{t,i} h_i.",
        .examples = "./build/02_bahdanau_attention\n"
                    "./build/02_bahdanau_attention --task reverse --bidirectional\n"
                    "./build/02_bahdanau_attention --load out/02_bahdanau_attention/model.ckpt "
                    "--translate \"12th of Feb. 2042\" --plot",
        .model_args = model_args,
        .n_model_args = (int)(sizeof model_args / sizeof model_args[0]),
        .write_config = write_config,
        .build = bahdanau_build,
        .default_steps = 2000,
        .default_batch = 64,
        .default_lr = 3e-3f,
        .preset_long = "--task g2p --steps 30000 --hidden 256 --embed 64 --attn 128 --bidirectional --beam 5",
    };
    return output_exit_status("02_bahdanau_attention", seq2seq_main(argc, argv, &spec));
}
