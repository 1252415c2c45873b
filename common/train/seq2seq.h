/* seq2seq.h - what every sequence-to-sequence chapter shares (01, 02, 03, 06):
 * the model interface, batching, the training loop, greedy and beam decoding,
 * evaluation, and the experiment driver behind each chapter's main().
 *
 * A chapter supplies a model (a Seq2Seq: a training step and a decoding step)
 * and a few model flags; seq2seq_main() does the rest: parse flags, load the
 * task, train with a progress line, evaluate on the test split, print the
 * results table, sample predictions and accuracy by input length, and write
 * out/NN_name/{results.json, model.ckpt, loss.png, acc_by_len.png, attn_*.png}. */
#ifndef SEQ2SEQ_H
#define SEQ2SEQ_H
#include <stdint.h>
#include "io/args.h"
#include "model/seq2seq.h"
#include "data/dataset.h"
#include "nn/params.h"
#include "io/results.h"

/* What a chapter gives seq2seq_main. */
typedef struct {
    const char *chapter;        /* "01_rnn_seq2seq" */
    const char *model_name;     /* the "model=" its checkpoints carry: "rnn_seq2seq" */
    const char *summary;        /* one paragraph for --help */
    const char *examples;       /* --help's example lines, '\n' between them */
    int no_attention;           /* 1: the model has no attention weights, so --plot is refused */
    const ArgSpec *model_args;  /* the chapter's own flags (model hyper-parameters) */
    int n_model_args;
    /* Append the model's hyper-parameters (from its parsed flags) as
     * "key=value\n" lines to config (a buffer of size cap, already holding
     * the task's lines). Returns 0 or -1 with fail(). */
    int (*write_config)(char *config, int cap);
    /* Build a model for this dataset from the config text (the same text is
     * stored in the checkpoint, so a loaded model is rebuilt identically),
     * with parameters initialised from seed. max_batch sizes the activation
     * buffers. Returns 0 or -1 with fail(). */
    int (*build)(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed);
    /* Defaults for the common flags that differ per chapter (0 = keep). */
    int default_steps;
    int default_batch;
    float default_lr;
    /* Flags that --preset long stands for: a longer, bigger run to chase the
     * published g2p results (flags the user gives as well still win). NULL = none. */
    const char *preset_long;
    /* Optional, for a chapter whose sources are images (chapter 07's
     * captions); NULL for the token tasks. The chapter's own flags choose
     * the data: --task, --n-train, --min-len, --max-len, --translate and
     * --plot are not offered, and write_config writes the data's keys too.
     *   load_data:  build the data set d from the config text (training: the
     *               text write_config made; --load: the checkpoint's), with
     *               d->value_size > 0. Returns 0 or -1 with fail().
     *   load_flags: the chapter's flags that still act with --load
     *               (comma-separated, e.g. "image"), or NULL.
     *   use_loaded: with --load, before the evaluation: the chapter's own use
     *               of the model (captioning the user's --image). Returns 1
     *               when it did the whole run, 0 to go on and evaluate, -1
     *               with fail().
     *   after_eval: after the evaluation of a trained or loaded model: the
     *               chapter's pictures into out_dir and more keys into res
     *               (the driver's attention heatmaps, which label source
     *               tokens, are not drawn). Returns 0 or -1 with fail(). */
    int (*load_data)(Dataset *d, const char *config);
    const char *load_flags;
    int (*use_loaded)(Seq2Seq *m, const Dataset *d, const char *out_dir);
    int (*after_eval)(Seq2Seq *m, const Dataset *d, const char *out_dir, Results *res);
} ChapterSpec;

/* The whole program of a seq2seq chapter. Returns the process exit code. */
int seq2seq_main(int argc, char **argv, const ChapterSpec *spec);

#endif
