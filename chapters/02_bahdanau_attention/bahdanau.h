/* bahdanau.h - chapter 02: the encoder-decoder of chapter 01 with additive
 * (Bahdanau) attention: a fresh context c_t at every decoder step.
 *
 * Encoder (chapter 01's RnnEncoder):   h_i = f_W(x_i, h_{i-1}),  i = 1..T
 *   --bidirectional: a second encoder reads x_T..x_1 and h_i = [h_fwd_i ; h_bwd_i]
 * Decoder, at every step t = 1, 2, ...:
 *   e_{t,i} = v^T tanh(W_1 h_i + W_2 s_{t-1})       alignment scores  (f_att)
 *   a_t     = softmax(e_t) over the real positions   attention weights
 *   c_t     = sum_i a_{t,i} h_i                      the context for this step
 *   s_t     = g_U(y_{t-1}, s_{t-1}, c_t)             input [embed(y_{t-1}) ; c_t]
 *   p(y_t | ...) = softmax(s_t W_out + b_out)
 *   s_0 = h_T (unidirectional, as chapter 01), or
 *   s_0 = tanh([h_fwd_T ; h_bwd_1] W_s + b_s) (bidirectional: the sizes differ).
 *
 * The decoder is chapter 01's RnnDecoder, its parameters keep their names and
 * shapes (dec.emb, dec.W_x [D_E+S_enc, G*S], dec.W_h, dec.b, out.W, out.b);
 * attention adds att.W_1 [S_enc, D_A], att.W_2 [S, D_A], att.v [D_A] (and
 * bridge.W_s, bridge.b_s when bidirectional). S is the RNN state size, D_E the
 * embedding size, D_A the attention size (A is the attention weights a_t),
 * S_enc the size of an encoder state h_i: S, or 2S. With the
 * attention pinned one-hot on the last real source position (pin_last = 1,
 * tests only) c_t = h_T at every step: exactly chapter 01's model. */
#ifndef BAHDANAU_H
#define BAHDANAU_H
#include <stdint.h>
#include "01_rnn_seq2seq/rnn_seq2seq.h"

/* ------------------------------------------------------- attention kernels */
/* Additive attention weights for one decoder step, batched over B rows.
 *   keys [B, T, D_A]   h_i W_1 for every source position (precomputed once)
 *   query [B, D_A]     s_{t-1} W_2
 *   v [D_A], lens [B]  positions i >= lens[b] are padding and get weight exactly 0
 * Writes feat [B, T, D_A] = tanh(keys + query) (kept for backward) and
 * weights [B, T] = softmax_i(feat[b,i] . v). */
void additive_attention_forward(float *weights, float *feat, const float *keys, const float *query,
                                const float *v, const int *lens, int B, int T, int D_A);
/* From dweights [B, T]: accumulates into dkeys [B, T, D_A], dquery [B, D_A], dv [D_A].
 * dscores [B, T] is work memory. */
void additive_attention_backward(float *dkeys, float *dquery, float *dv, float *dscores,
                                 const float *dweights, const float *weights, const float *feat,
                                 const float *v, const int *lens, int B, int T, int D_A);
/* context [B, D] = sum_i weights[b, i] * values[b, i, :]   (values [B, T, D]) */
void attention_context_forward(float *context, const float *weights, const float *values,
                               int B, int T, int D);
/* Accumulates into dweights [B, T] and dvalues [B, T, D]. */
void attention_context_backward(float *dweights, float *dvalues, const float *dcontext,
                                const float *weights, const float *values, int B, int T, int D);

/* ------------------------------------- encoder states as attention reads them */
/* Lay chapter 01's encoder states out one source per row (chapter 03 calls
 * this too): ann [B, T, S_enc], row b position i = h_i = [h_fwd_i ; h_bwd_i]
 * (enc_bwd, which read each row's real tokens last to first, may be NULL:
 * then h_i = h_fwd_i and S_enc = S), zeros at padded positions i >= lens[b]. */
void encoder_states_to_rows(float *ann, const RnnEncoder *enc, const RnnEncoder *enc_bwd,
                            const int *lens, int B, int T);
/* The way back: dann [B, T, S_enc] -> dH_fwd (and dH_bwd unless NULL)
 * [T, B, S], time-major as rnn_encoder_backward wants them (overwritten). */
void encoder_grads_from_rows(float *dH_fwd, float *dH_bwd, const float *dann, const int *lens,
                             int B, int T, int S);

/* ------------------------------------------------------------- the model */
/* The model's configuration: what a checkpoint's text records of it. */
typedef struct {
    CellType cell;                /* the cells of encoder and decoder */
    int D_E;                      /* embedding size */
    int S;                        /* state size of the encoder and the decoder */
    int D_A;                      /* attention size: columns of W_1, W_2; length of v */
    int bidirectional;            /* 1: a second encoder reads right to left, h_i = [h_fwd_i ; h_bwd_i] */
} BahdanauConfig;
/* Its keys in the checkpoint's text (io/config.h): cell, embed, state (hidden= in older
 * checkpoints, still read), attn, bidirectional. */
extern const ConfigField BAHDANAU_CONFIG_FIELDS[];
extern const int BAHDANAU_CONFIG_N;

typedef struct {
    int D_A;                      /* attention size: columns of W_1, W_2; length of v */
    int bidirectional;
    int S_enc;                    /* size of an encoder state h_i: S, or 2S when bidirectional */
    int pin_last;                 /* tests only: a_t = one-hot on the last real position */
    Params params;
    RnnEncoder enc, enc_bwd;      /* enc_bwd only when bidirectional */
    RnnDecoder dec;               /* chapter 01's decoder; cell input [embed(y_{t-1}) ; c_t] */
    size_t att_W1, att_W2, att_v;                            /* [S_enc,D_A], [S,D_A], [D_A] */
    size_t bridge_W, bridge_b;                               /* [2S,S], [S] (bidirectional) */
    int max_B, max_T;

    /* encoder side, batch-major so that one row is one source sequence */
    int *src_rev;                 /* [max_B, max_T] each row's real tokens reversed */
    float *ann, *dann;            /* [max_B, max_T, S_enc] the encoder states h_i */
    float *keys, *dkeys;          /* [max_B, max_T, D_A]  h_i W_1 */
    float *dH_fwd, *dH_bwd;       /* [max_T, max_B, S]  time-major, for rnn_encoder_backward */
    float *bridge_in, *dbridge_in;   /* [max_B, 2S] [h_fwd_T ; h_bwd_1] */
    float *dfinal_fwd, *dfinal_bwd;  /* [max_B, S] gradients w.r.t. h_fwd_T, h_bwd_1 */
    /* decoder's attention, time-major as in chapter 01 */
    float *query, *dquery;        /* [max_B, D_A]  s_{t-1} W_2 */
    float *feat;                  /* [max_Tt, max_B, max_T, D_A] tanh(keys + query) */
    float *attn;                  /* [max_Tt, max_B, max_T] a_t */
    float *dattn, *dscores;       /* [max_B, max_T] */
    float *ctx, *dctx;            /* [max_B, S_enc] c_t */
    float *logits, *probs;        /* [max_Tt*max_B, V_tgt] */
    float *dlogits;               /* [max_Tt*max_B, V_tgt] */
    /* decoding (Seq2Seq encode/step), up to max_B rows at a time: encode()
     * leaves the sources' ann, keys and lengths in the model; step() gathers
     * for each row the source it continues */
    int enc_T;                    /* source length of the last encode() */
    int *enc_lens;                /* [max_B] */
    int *step_lens;               /* [max_B] */
    float *step_ann;              /* [max_B, max_T, S_enc] */
    float *step_keys, *step_feat; /* [max_B, max_T, D_A] */
    float *step_attn;             /* [max_B, max_T] */
    float *step_query, *step_ctx; /* [max_B, D_A], [max_B, S_enc] */
} Bahdanau;

/* Build the model for vocabularies V_src, V_tgt, batches of up to max_B
 * sources of up to max_T_src tokens and targets of up to max_T_tgt, with
 * parameters initialised from seed. Returns 0 or -1 with fail(). */
int bahdanau_create(Bahdanau *r, const BahdanauConfig *c, int V_src, int V_tgt, int max_B, int max_T_src,
                    int max_T_tgt, uint64_t seed);
/* A Bahdanau model on the heap, sized for the data set d, as the seq2seq
 * driver's model m (m->destroy frees it). Returns 0 or -1 with fail(). */
int bahdanau_build(Seq2Seq *m, const Dataset *d, const BahdanauConfig *c, int max_batch, uint64_t seed);
double bahdanau_train_step(void *self, const Batch *b, int backward);
void bahdanau_encode(void *self, const Batch *b, float *states);
void bahdanau_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                   float *next, float *logprobs, float *attn);
void bahdanau_free(Bahdanau *r);
void bahdanau_destroy(void *self);          /* bahdanau_free + free(self) */
void bahdanau_interface(Bahdanau *r, Seq2Seq *m);

#endif
