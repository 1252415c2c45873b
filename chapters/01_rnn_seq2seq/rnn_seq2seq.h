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
 * The encoder is exported on its own so later chapters reuse it. */
#ifndef RNN_SEQ2SEQ_H
#define RNN_SEQ2SEQ_H
#include <stdint.h>
#include "nn/cells.h"
#include "data/dataset.h"
#include "nn/params.h"
#include "util/rng.h"
#include "train/seq2seq.h"

/* ------------------------------------------------------------------ encoder */
/* An embedding followed by one recurrent layer, run over a padded batch.
 * Activations are stored time-major so that step t is one [B, .] block. */
typedef struct {
    CellType cell;
    int V, E, H;                  /* source vocabulary, embedding and state sizes */
    size_t emb, W_x, W_h, b;      /* parameter handles: [V,E], [E,G*H], [H,G*H], [G*H] */
    int max_B, max_T, cache_size;
    int B, T;                     /* shape of the last forward call */
    int *ids;                     /* [max_T, max_B] source ids, time-major */
    int *mask;                    /* [max_T, max_B] 1 where t < length */
    float *x;                     /* [max_T, max_B, E] embedded inputs */
    float *h;                     /* [max_T+1, max_B, H] h[0] = 0, h[t+1] = state after x_t */
    float *c;                     /* [max_T+1, max_B, H] LSTM cell states (else NULL) */
    float *cache;                 /* [max_T, max_B, cache_size] */
    float *scratch;               /* [max_B, 2*G*H] */
    float *dx;                    /* [max_B, E] */
    float *dh, *dc, *dh_prev, *dc_prev;   /* [max_B, H] each */
} RnnEncoder;

/* Declare the encoder's tensors in p under names "<prefix>.emb", ".W_x", ".W_h", ".b". */
void rnn_encoder_declare(RnnEncoder *enc, Params *p, const char *prefix, CellType cell,
                         int V, int E, int H);
/* After params_alloc: initial values. */
void rnn_encoder_init(RnnEncoder *enc, Params *p, Rng *rng);
/* Activation buffers for batches of up to max_B sequences of up to max_T tokens. */
void rnn_encoder_alloc(RnnEncoder *enc, int max_B, int max_T);
void rnn_encoder_free(RnnEncoder *enc);
/* src[B, T] batch-major padded ids, lens[B]. Afterwards the state after the
 * real last token of row b is rnn_encoder_final_h(enc)[b] (padded steps keep it). */
void rnn_encoder_forward(RnnEncoder *enc, Params *p, const int *src, const int *lens, int B, int T);
/* Pointer to h_T (or c_T) for all rows: [B, H]. */
float *rnn_encoder_final_h(RnnEncoder *enc);
float *rnn_encoder_final_c(RnnEncoder *enc);   /* NULL unless LSTM */
/* Backpropagation through time. dH [T, B, H] (may be NULL) is the gradient
 * w.r.t. every state h[1..T] (attention reads them all, chapter 02);
 * dh_final/dc_final [B, H] the gradient w.r.t. the final state (dc_final
 * NULL unless LSTM). Accumulates into p->grad. */
void rnn_encoder_backward(RnnEncoder *enc, Params *p, const float *dH,
                          const float *dh_final, const float *dc_final);

/* ---------------------------------------------- small helpers, shared 01-03 */
/* Copy the rows of src [B, D] into columns [offset, offset+D) of dst [B, width]
 * (builds a concatenation such as [embed(y) ; c] row by row). */
void put_columns(float *dst, int width, int offset, const float *src, int B, int D);
/* Decoder states as the Seq2Seq decoding interface stores them: row i of
 * states [n, S] is [s_i (H) | c_i (H, LSTM only)], so S = H, or 2H when c is
 * given. pack: h [n, H] (and c) -> states; unpack: states -> h (and c).
 * Pass c = NULL for cells without a second state. */
void decoder_states_pack(float *states, const float *h, const float *c, int n, int H);
void decoder_states_unpack(float *h, float *c, const float *states, int n, int H);

/* ------------------------------------------------- output layer and loss */
/* The decoder's output layer and its loss, shared by chapters 01-03:
 *   logits [N, V] = top [N, H] W_out + b_out,   probs = softmax(logits)
 * Returns the mean cross-entropy of targets [N] (<pad> ignored); *n_tokens
 * gets how many counted. When backward != 0 and some counted: dlogits is
 * overwritten, dtop [N, H] is OVERWRITTEN with d loss / d top, and the output
 * layer's gradients are accumulated into p->grad. */
double output_layer_loss(Params *p, size_t out_W, size_t out_b, const float *top, const int *targets,
                         int N, int H, int V, float *logits, float *probs, float *dlogits, float *dtop,
                         int backward, int *n_tokens);

/* ------------------------------------------------------------ the seq2seq */
typedef struct {
    CellType cell;
    int V_src, V_tgt, E, H;
    Params params;
    RnnEncoder enc;
    /* decoder parameters: embedding, cell (input [E + H] = [embed(y) ; c]), output layer */
    size_t dec_emb, dec_W_x, dec_W_h, dec_b, out_W, out_b;
    int max_B, max_Tt, cache_size;
    /* decoder activations, time-major */
    int *tgt_in, *tgt_out;        /* [max_Tt, max_B] */
    float *in;                    /* [max_Tt, max_B, E+H] */
    float *s, *cs;                /* [max_Tt+1, max_B, H] */
    float *cache;                 /* [max_Tt, max_B, cache_size] */
    float *logits, *probs;        /* [max_Tt * max_B, V_tgt] */
    float *dlogits, *dS;          /* [max_Tt*max_B, V_tgt], [max_Tt*max_B, H] */
    float *scratch, *din, *demb;  /* [max_B, 2*G*H], [max_B, E+H], [max_B, E] */
    float *dh, *dc, *dh_prev, *dc_prev, *dctx;  /* [max_B, H] */
    /* decoding (Seq2Seq encode/step), up to max_B rows at a time */
    float *ctx, *ctx_c;           /* [max_B, H] the context of each encoded source */
    float *step_in;               /* [max_B, E+H] */
    float *step_h, *step_c;       /* [max_B, H] states unpacked from the rows */
    float *step_h_next, *step_c_next;   /* [max_B, H] */
    float *step_cache, *step_scratch, *step_logits;
} RnnSeq2Seq;

/* Build from a config text with keys cell, embed, hidden (see main.c). */
int rnn_seq2seq_build(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed);
/* The pieces, for tests and for later chapters. */
int rnn_seq2seq_create(RnnSeq2Seq *r, CellType cell, int V_src, int V_tgt, int E, int H,
                       int max_B, int max_T_src, int max_T_tgt, uint64_t seed);
double rnn_seq2seq_train_step(void *self, const Batch *b, int backward);
void rnn_seq2seq_encode(void *self, const Batch *b, float *states);
void rnn_seq2seq_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                      float *next, float *logprobs, float *attn);
void rnn_seq2seq_free(RnnSeq2Seq *r);     /* frees what create allocated */
void rnn_seq2seq_destroy(void *self);     /* rnn_seq2seq_free + free(self): for models from build */
/* Wrap an RnnSeq2Seq in the Seq2Seq interface. */
void rnn_seq2seq_interface(RnnSeq2Seq *r, Seq2Seq *m);

#endif
