/* rnn_seq2seq.h - chapter 01: the RNN encoder-decoder (seq2seq).
 *
 * The encoder reads the source x_1..x_T:      h_t = f_W(x_t, h_{t-1})
 * Its last state is the context:              c = h_T
 * The decoder starts from it and writes y:    s_t = g_U(y_{t-1}, s_{t-1}, c),  s_0 = c
 *                                             p(y_t | ...) = softmax(s_t W_out + b_out)
 * The decoder's input at step t is [embed(y_{t-1}) ; c], so the context is seen
 * at every step - yet it is the SAME c for every step, whatever the length of
 * the input: that single vector is the bottleneck chapter 02 removes.
 *
 * f_W and g_U are any of the cells in common/nn/cells.h (tanh RNN, GRU, LSTM).
 * The encoder (RnnEncoder) and the decoder (RnnDecoder: embedding, cell, output
 * layer, one step forward, backward and for decoding) are exported on their
 * own: chapters 02 and 03 build their models from them. */
#ifndef RNN_SEQ2SEQ_H
#define RNN_SEQ2SEQ_H
#include <stdint.h>
#include "nn/cells.h"
#include "data/dataset.h"
#include "nn/params.h"
#include "util/rng.h"
#include "io/config.h"
#include "model/seq2seq.h"

/* Sizes (the project's table of names): B batch, T source
 * length, T' target length, V vocabulary, D_E embedding size, S the RNN state
 * size (h_t and s_t have S entries), G the cell's number of gates. */

/* ------------------------------------------------------------------ encoder */
/* An embedding followed by one recurrent layer, run over a padded batch.
 * Activations are stored time-major so that step t is one [B, .] block. */
typedef struct {
    CellType cell;
    int V, D_E, S;                /* source vocabulary, embedding and state sizes */
    size_t emb, W_x, W_h, b;      /* parameter handles: [V,D_E], [D_E,G*S], [S,G*S], [G*S] */
    int max_B, max_T, cache_size;
    int B, T;                     /* shape of the last forward call */
    int *ids;                     /* [max_T, max_B] source ids, time-major */
    int *mask;                    /* [max_T, max_B] 1 where t < length */
    float *x;                     /* [max_T, max_B, D_E] embedded inputs */
    float *h;                     /* [max_T+1, max_B, S] h[0] = 0, h[t+1] = state after x_t */
    float *c;                     /* [max_T+1, max_B, S] LSTM cell states (else NULL) */
    float *cache;                 /* [max_T, max_B, cache_size] */
    float *scratch;               /* [max_B, 2*G*S] */
    float *dx;                    /* [max_B, D_E] */
    StateGrads g;                 /* [max_B, S] gradients w.r.t. the states, for BPTT */
} RnnEncoder;

/* Declare the encoder's tensors in p under names "<prefix>.emb", ".W_x", ".W_h", ".b". */
void rnn_encoder_declare(RnnEncoder *enc, Params *p, const char *prefix, CellType cell,
                         int V, int D_E, int S);
/* After params_alloc: initial values. */
void rnn_encoder_init(RnnEncoder *enc, Params *p, Rng *rng);
/* Activation buffers for batches of up to max_B sequences of up to max_T tokens. */
void rnn_encoder_alloc(RnnEncoder *enc, int max_B, int max_T);
void rnn_encoder_free(RnnEncoder *enc);
/* src[B, T] batch-major padded ids, lens[B]. Afterwards the state after the
 * real last token of row b is rnn_encoder_final_h(enc)[b] (padded steps keep it). */
void rnn_encoder_forward(RnnEncoder *enc, Params *p, const int *src, const int *lens, int B, int T);
/* Pointer to h_T (or c_T) for all rows: [B, S]. */
float *rnn_encoder_final_h(RnnEncoder *enc);
float *rnn_encoder_final_c(RnnEncoder *enc);   /* NULL unless LSTM */
/* Backpropagation through time. dH [T, B, S] (may be NULL) is the gradient
 * w.r.t. every state h[1..T] (attention reads them all, chapter 02);
 * dh_final/dc_final [B, S] the gradient w.r.t. the final state (dc_final
 * NULL unless LSTM). Accumulates into p->grad. */
void rnn_encoder_backward(RnnEncoder *enc, Params *p, const float *dH,
                          const float *dh_final, const float *dc_final);

/* Cell weights W_x [I, G*S], W_h [S, G*S], b [G*S]: U(-1/sqrt(S), 1/sqrt(S))
 * as in PyTorch; an LSTM's forget-gate bias starts at 1 so that early on the
 * cell remembers by default. */
void rnn_cell_init(CellType cell, float *W_x, float *W_h, float *b, int I, int S, Rng *rng);

/* ------------------------------------------------------------------ decoder */
/* The decoder of chapters 01-03: an embedding of the previous target token,
 * one recurrent cell, and the output layer's parameters. The cell's input
 * in[t] [B, I] is [embed(y_{t-1}) ; what the chapter feeds it]: the fixed
 * context c in chapter 01 (I = D_E + S), a fresh c_t in chapters 02-03, or
 * nothing (I = D_E, chapter 03's Luong placement). The parameters keep their
 * names in every chapter: dec.emb [V, D_E], dec.W_x [I, G*S], dec.W_h [S, G*S],
 * dec.b [G*S], out.W [S, V], out.b [V]. Activations are time-major. */
typedef struct {
    CellType cell;
    int V, D_E, I, S;             /* target vocabulary, embedding, cell input and state sizes */
    size_t emb, W_x, W_h, b, out_W, out_b;   /* parameter handles */
    int max_B, max_T, cache_size; /* max_T: target steps, <eos> included */
    int *tgt_in, *tgt_out;        /* [max_T, max_B] the batch's targets, time-major */
    float *in;                    /* [max_T, max_B, I] cell inputs */
    float *s, *cs;                /* [max_T+1, max_B, S] s[0] = s_0, s[t+1] = s after in[t]; cs: LSTM */
    float *cache;                 /* [max_T, max_B, cache_size] */
    float *dS;                    /* [max_T, max_B, S] d loss / d s_1..s_T' from the layers above */
    float *scratch, *din, *demb;  /* [max_B, 2*G*S], [max_B, I], [max_B, D_E] */
    StateGrads g;                 /* [max_B, S] gradients w.r.t. the states, for BPTT */
    /* one decoding step for up to max_B rows */
    float *step_in;               /* [max_B, I] */
    float *step_h, *step_c, *step_h_next, *step_c_next;   /* [max_B, S] */
    float *step_cache, *step_scratch, *step_logits;
} RnnDecoder;

/* Declare dec.emb, dec.W_x, dec.W_h, dec.b, out.W, out.b in p (in that order). */
void rnn_decoder_declare(RnnDecoder *dec, Params *p, CellType cell, int V, int D_E, int I, int S);
/* After params_alloc: initial values (embedding, cell, output layer, in that order). */
void rnn_decoder_init(RnnDecoder *dec, Params *p, Rng *rng);
/* Activation buffers for up to max_B rows of up to max_T target steps (<eos> included). */
void rnn_decoder_alloc(RnnDecoder *dec, int max_B, int max_T);
void rnn_decoder_free(RnnDecoder *dec);
/* Floats of a row's decoding state: S, or 2S for the LSTM (see decoder_states_pack). */
int rnn_decoder_state_size(const RnnDecoder *dec);

/* Teacher forcing, step t = 0 .. T'-1 of a batch of B rows:
 *   rnn_decoder_targets:      tgt_in, tgt_out <- the batch's targets, time-major
 *   rnn_decoder_embed:        columns [0, D_E) of in[t] = embed(y_{t-1})
 *   rnn_decoder_cell_forward: s[t+1] = g_U(in[t], s[t])  (the caller fills the
 *                             rest of in[t] and s[0] before) */
void rnn_decoder_targets(RnnDecoder *dec, const Batch *batch);
void rnn_decoder_embed(RnnDecoder *dec, Params *p, int t, int B);
void rnn_decoder_cell_forward(RnnDecoder *dec, Params *p, int t, int B);
/* The output layer and loss (output_layer_loss) over the batch's T' x B rows
 * top [T'*B, S], time-major (chapter 01: the states s_1..s_T'), against
 * tgt_out; logits, probs, dlogits [T'*B, V] are the caller's. *loss gets the
 * mean loss. With backward, dtop [T'*B, S] gets d loss / d top, and g.dh, g.dc
 * are zeroed for the backward pass through time. Returns 1 when there are
 * gradients to propagate (backward, and some target token counted), else 0. */
int rnn_decoder_loss(RnnDecoder *dec, Params *p, const Batch *batch, const float *top, float *dtop,
                     float *logits, float *probs, float *dlogits, int backward, double *loss);
/* Backward of step t, last step first. Before the first call zero g.dh and
 * g.dc (then they carry d loss / d s[t+1] from step t+1).
 *   rnn_decoder_cell_backward:  g.dh += dS[t]; din = d loss / d in[t],
 *                               g.dh_prev (g.dc_prev) = d loss / d s[t] (c[t])
 *   rnn_decoder_embed_backward: the embedding columns of din into dec.emb's gradient
 * The caller reads din's other columns, may add to g.dh_prev, then calls
 * state_grads_swap(&dec->g) to step back. */
void rnn_decoder_cell_backward(RnnDecoder *dec, Params *p, int t, int B);
void rnn_decoder_embed_backward(RnnDecoder *dec, Params *p, int t, int B);

/* Decoding, n rows:
 *   rnn_decoder_initial_states: states [B, state size] <- s[0] (and cs[0])
 *   rnn_decoder_step_begin:     step_h (step_c) <- states [n, state size]
 *   rnn_decoder_step_embed:     columns [0, D_E) of step_in = embed(prev)
 *   rnn_decoder_step_cell:      step_h_next = g_U(step_in, step_h)
 *   rnn_decoder_step_end:       next <- step_h_next (step_c_next);
 *                               logprobs [n, V] = log softmax(top W_out + b_out), top [n, S] */
void rnn_decoder_initial_states(RnnDecoder *dec, float *states, int B);
void rnn_decoder_step_begin(RnnDecoder *dec, const float *states, int n);
void rnn_decoder_step_embed(RnnDecoder *dec, Params *p, const int *prev, int n);
void rnn_decoder_step_cell(RnnDecoder *dec, Params *p, int n);
void rnn_decoder_step_end(RnnDecoder *dec, Params *p, const float *top, int n, float *next, float *logprobs);

/* ---------------------------------------------- small helpers, shared 01-03 */
/* Copy the rows of src [B, D] into columns [offset, offset+D) of dst [B, width]
 * (builds a concatenation such as [embed(y) ; c] row by row). */
void put_columns(float *dst, int width, int offset, const float *src, int B, int D);
/* Decoder states as the Seq2Seq decoding interface stores them: row i of
 * states is [s_i (S) | c_i (S, LSTM only)], so a row has S floats, or 2S when
 * c is given. pack: h [n, S] (and c) -> states; unpack: states -> h (and c).
 * Pass c = NULL for cells without a second state. */
void decoder_states_pack(float *states, const float *h, const float *c, int n, int S);
void decoder_states_unpack(float *h, float *c, const float *states, int n, int S);

/* ------------------------------------------------- output layer and loss */
/* The decoder's output layer and its loss, shared by chapters 01-03:
 *   logits [N, V] = top [N, S] W_out + b_out,   probs = softmax(logits)
 * Returns the mean cross-entropy of targets [N] (<pad> ignored); *n_tokens
 * gets how many counted. When backward != 0 and some counted: dlogits is
 * overwritten, dtop [N, S] is OVERWRITTEN with d loss / d top, and the output
 * layer's gradients are accumulated into p->grad. */
double output_layer_loss(Params *p, size_t out_W, size_t out_b, const float *top, const int *targets,
                         int N, int S, int V, float *logits, float *probs, float *dlogits, float *dtop,
                         int backward, int *n_tokens);

/* ------------------------------------------------------------ the seq2seq */
/* The model's configuration: what a checkpoint's text records of it. */
typedef struct {
    CellType cell;                /* f_W and g_U: CELL_RNN, CELL_GRU or CELL_LSTM */
    int D_E;                      /* embedding size */
    int S;                        /* state size: h_t, s_t and the context c */
} RnnConfig;
/* Its keys in the checkpoint's text (io/config.h): cell, embed, state (hidden= in
 * checkpoints saved before the letter table's names, still read). */
extern const ConfigField RNN_CONFIG_FIELDS[];
extern const int RNN_CONFIG_N;

typedef struct {
    Params params;
    RnnEncoder enc;
    RnnDecoder dec;               /* cell input I = D_E + S: [embed(y) ; c] */
    float *logits, *probs;        /* [max_T' * max_B, V_tgt] the output layer, time-major rows */
    float *dlogits;               /* [max_T' * max_B, V_tgt] */
    float *dctx;                  /* [max_B, S] gradient w.r.t. the context c */
    /* decoding (Seq2Seq encode/step), up to max_B rows at a time */
    float *ctx, *ctx_c;           /* [max_B, S] the context of each encoded source */
} RnnSeq2Seq;

/* Build the model for vocabularies V_src, V_tgt, batches of up to max_B
 * sources of up to max_T_src tokens and targets of up to max_T_tgt, with
 * parameters initialised from seed. Returns 0 or -1 with fail(). */
int rnn_seq2seq_create(RnnSeq2Seq *r, const RnnConfig *c, int V_src, int V_tgt, int max_B, int max_T_src,
                       int max_T_tgt, uint64_t seed);
/* An RnnSeq2Seq on the heap, sized for the data set d, as the seq2seq
 * driver's model m (m->destroy frees it). Returns 0 or -1 with fail(). */
int rnn_seq2seq_build(Seq2Seq *m, const Dataset *d, const RnnConfig *c, int max_batch, uint64_t seed);
double rnn_seq2seq_train_step(void *self, const Batch *b, int backward);
void rnn_seq2seq_encode(void *self, const Batch *b, float *states);
void rnn_seq2seq_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                      float *next, float *logprobs, float *attn);
void rnn_seq2seq_free(RnnSeq2Seq *r);     /* frees what create allocated */
void rnn_seq2seq_destroy(void *self);     /* rnn_seq2seq_free + free(self): for models from build */
/* Wrap an RnnSeq2Seq in the Seq2Seq interface. */
void rnn_seq2seq_interface(RnnSeq2Seq *r, Seq2Seq *m);

#endif
