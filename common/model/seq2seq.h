/* seq2seq.h (model/) - what a sequence-to-sequence model is to the code
 * that trains and uses it: a padded batch of examples, the Seq2Seq face
 * every such model shows (a training step, and an encoder and a decoder
 * step for decoding), and greedy and beam-search decoding over that face.
 *
 * The models of chapters 01, 02, 03, 06 and 07's captioner fill a Seq2Seq;
 * the training driver (train/seq2seq.h) and the programs use only this. */
#ifndef MODEL_SEQ2SEQ_H
#define MODEL_SEQ2SEQ_H
#include <stdint.h>
#include "data/dataset.h"
#include "util/rng.h"
#include "io/checkpoint.h"
#include "nn/params.h"

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
    /* What step()'s attn is, for its picture's title, when it is not the
     * model's one attention: e.g. "the last decoder block's cross-attention,
     * the mean over its 4 heads" ("": the one attention, nothing to say). */
    char attention_name[96];
    void (*encode)(void *self, const Batch *b, float *states);
    void (*step)(void *self, int n, const int *src_row, const float *states, const int *prev,
                 float *next, float *logprobs, float *attn);
    void (*destroy)(void *self);
    /* Optional (NULL: none): the model's own random stream (dropout's), which
     * a resumed training run puts back (train/loop.h). */
    Rng *rng;
    /* Optional (n_buffers 0: none): the model's state that is not parameters
     * (PyTorch's buffers: batch norm's running statistics), named arrays the
     * model owns. Its checkpoints keep them after the tensors (io/checkpoint.h's
     * items), --load and a resumed run put them back. */
    StateItem *buffers;
    int n_buffers;
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

#endif
