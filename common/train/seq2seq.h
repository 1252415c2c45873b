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
#include "data/dataset.h"
#include "nn/params.h"
#include "io/results.h"

/* A padded batch. Sequences shorter than the batch's lengths are filled
 * with PAD_ID. The decoder reads tgt_in and predicts tgt_out:
 *   tgt_in  = <bos> y1 ... yn  <pad>...
 *   tgt_out = y1 ... yn <eos>  <pad>...      (tgt_lens[b] = n + 1) */
typedef struct {
    int batch, src_len, tgt_len;
    int *src;       /* [batch, src_len] */
    int *src_lens;  /* [batch] */
    int *tgt_in;    /* [batch, tgt_len] */
    int *tgt_out;   /* [batch, tgt_len] */
    int *tgt_lens;  /* [batch] */
    /* Image tasks (Dataset.value_size > 0, chapter 07's captions): the
     * sources as floats, [batch, value_size]; src holds no tokens then
     * (<pad>s), src_lens what the data set's src_len counts. NULL otherwise. */
    int value_size;
    float *values;
} Batch;

/* Fill b from examples idx[0..n) of split (b's arrays must hold n * max lengths;
 * with b->values, each example's values are copied too). */
void batch_fill(Batch *b, const Split *split, const int *idx, int n);
/* Allocate a batch able to hold max_batch examples of the dataset's max lengths. */
void batch_alloc(Batch *b, int max_batch, int max_src_len, int max_tgt_len);
/* After batch_alloc, for image tasks: room for max_batch sources of value_size floats. */
void batch_alloc_values(Batch *b, int max_batch, int value_size);
void batch_free(Batch *b);

typedef struct {
    void *self;
    Params *params;
    /* Forward over a batch; when backward != 0, also accumulate d(loss)/d(params)
     * into params->grad. Returns the mean cross-entropy per target token
     * (padding ignored). */
    double (*train_step)(void *self, const Batch *b, int backward);
    /* Decoding, a batch at a time (greedy decodes a whole batch together;
     * beam search decodes the hypotheses of one source as a batch):
     *   encode(): run the encoder over b->src / b->src_lens, keep what the
     *             decoder needs (the encoder states), and write each row's
     *             initial decoder state into states [b->batch, state_size].
     *   step():   advance n decoder rows by one token. Row r continues source
     *             src_row[r] of the last encode() call, from states[r] after
     *             token prev[r]; it writes next [n, state_size] and
     *             logprobs [n, vocab_size], and, when attn != NULL and the model
     *             has attention, attn [n, src_len]: the weights over the
     *             encoded batch's (padded) source positions, 0 past a row's end.
     * n is at most the max_batch the model was built for. A state is
     * state_size floats, so beam search can copy and reorder states. */
    int state_size;
    int vocab_size;      /* target vocabulary size: length of a logprobs row */
    int has_attention;
    void (*encode)(void *self, const Batch *b, float *states);
    void (*step)(void *self, int n, const int *src_row, const float *states, const int *prev,
                 float *next, float *logprobs, float *attn);
    void (*destroy)(void *self);
    /* Optional (NULL: none): more attention maps for one source and its
     * greedy output out[out_len], written as stem_*.png (a model with several
     * layers and heads draws them all). Returns 0 or -1 with fail(). */
    int (*plot_layers)(void *self, const Dataset *d, const int *src, int src_len, const int *out, int out_len,
                       const char *stem);
} Seq2Seq;

/* Greedy decoding of every source in batch b (its targets are not used):
 * out [b->batch, max_out] gets each row's tokens (without <eos>), out_lens [b->batch]
 * their counts. attn (may be NULL) gets [b->batch, max_out, b->src_len]. */
void decode_greedy(Seq2Seq *m, const Batch *b, int max_out, int *out, int *out_lens, float *attn);
/* Beam search for one source (src_len tokens) with beam_width hypotheses
 * (1 = greedy), scored by log-probability per token. Returns the length. */
int decode_beam(Seq2Seq *m, const int *src, int src_len, int max_out, int beam_width, int *out);
/* The same for one example of a data set of either kind (token or image
 * sources; value_size as the data set's). */
int decode_beam_example(Seq2Seq *m, const Example *e, int value_size, int max_out, int beam_width, int *out);

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
