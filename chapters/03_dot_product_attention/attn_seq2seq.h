/* attn_seq2seq.h - chapter 03: an encoder-decoder whose decoder calls the
 * general attention layer (attention.h) with any of its four score functions.
 *
 * Encoder: chapter 01's RnnEncoder, unchanged. Its states (one source per
 * row, by chapter 02's encoder_states_to_rows()) are the data
 * vectors of the attention layer:  X = [h_1 ; ... ; h_T]   [T, S].
 * Keys and values are X itself (K = V = X, as in Bahdanau and Luong), or,
 * with project_kv, the cross-attention layer's K = X W_K and V = X W_V.
 *
 * Two places to put the layer in the decoder (the "placement"):
 *
 * PLACEMENT_LUONG (Luong, Pham and Manning 2015, without input feeding):
 *   s_t  = g_U(embed(y_{t-1}), s_{t-1})          the decoder RNN runs on its own
 *   c_t  = attention(query s_t, data X)          a_t = softmax(score(s_t, K))
 *   h~_t = tanh([c_t ; s_t] W_c + b_c)           the "attentional state"
 *   p(y_t | ...) = softmax(h~_t W_out + b_out)
 *   With teacher forcing every s_t is known before any attention is done, so
 *   training runs the layer ONCE per sequence with all T' queries at once:
 *   Q = [s_1 ; ... ; s_T'] [T', S],  E = score(Q, K) [T', T],  A = softmax(E),
 *   C = A V [T', S]: the matrix form of the lecture.
 *
 * PLACEMENT_BAHDANAU (chapter 02's wiring, one query per step):
 *   c_t  = attention(query s_{t-1}, data X)
 *   s_t  = g_U([embed(y_{t-1}) ; c_t], s_{t-1})
 *   p(y_t | ...) = softmax(s_t W_out + b_out)
 *   With the additive score and chapter 02's weights this IS chapter 02's
 *   model (tests/test_attn_seq2seq.c checks weights and contexts).
 *
 * Both: s_0 = h_T (and the LSTM's c_0 = c_T), padded source positions are
 * masked (weight exactly 0), and the scores are
 *   dot             e = s . h_i
 *   scaled_dot      e = s . h_i / sqrt(S)
 *   multiplicative  e = s^T W h_i           att.W [S, S]
 *   additive        e = v^T tanh(W_1 h_i + W_2 s)   att.W_1 [S, D_A], att.W_2 [S, D_A], att.v [D_A]
 * (with project_kv, h_i is replaced by the key k_i = h_i W_K).
 *
 * S is the RNN state size, D_E the embedding size, D_A the additive score's
 * hidden size. The encoder and decoder are chapter 01's RnnEncoder and
 * RnnDecoder. Parameter names and shapes follow chapters 01 and 02: enc.*, dec.emb,
 * dec.W_x ([D_E, G*S] for Luong, [D_E+S, G*S] for Bahdanau), dec.W_h, dec.b,
 * out.W [S, V], out.b; Luong adds comb.W_c [2H, S], comb.b_c [S]; the score
 * adds att.W or att.W_1/att.W_2/att.v; project_kv adds att.W_K, att.W_V [S, S]. */
#ifndef ATTN_SEQ2SEQ_H
#define ATTN_SEQ2SEQ_H
#include <stdint.h>
#include "01_rnn_seq2seq/rnn_seq2seq.h"
#include "03_dot_product_attention/attention.h"

typedef enum { PLACEMENT_LUONG = 0, PLACEMENT_BAHDANAU = 1 } Placement;

/* "luong", "bahdanau" -> placement; -1 with fail() otherwise. */
int placement_from_name(const char *name, Placement *out);
const char *placement_name(Placement p);

/* The model's configuration: what a checkpoint's text records of it. */
typedef struct {
    CellType cell;                /* the cells of encoder and decoder */
    int D_E;                      /* embedding size */
    int S;                        /* state size (queries, keys and values have this size) */
    ScoreType score;              /* the score function */
    Placement placement;          /* where the layer sits in the decoder */
    int D_A;                      /* the additive score's hidden size */
    int project_kv;               /* 1: K = X W_K and V = X W_V; 0: K = V = X */
} AttnSeq2SeqConfig;
/* Its keys in the checkpoint's text (io/config.h): cell, embed, state
 * (hidden= in older checkpoints, still read), score, placement, attn, project_kv. */
extern const ConfigField ATTN_SEQ2SEQ_CONFIG_FIELDS[];
extern const int ATTN_SEQ2SEQ_CONFIG_N;

typedef struct {
    ScoreType score;
    Placement placement;
    int project_kv;
    Params params;
    RnnEncoder enc;
    RnnDecoder dec;               /* chapter 01's; cell input I = D_E (Luong) or D_E + S (Bahdanau) */
    size_t comb_W, comb_b;                        /* Luong only */
    size_t att_W, att_W1, att_W2, att_v;          /* score parameters (by type) */
    size_t att_WK, att_WV;                        /* project_kv only */
    /* the attention layer's description and views of its weights / gradients
     * (they point into params.data / params.grad) */
    CrossAttentionSpec layer;     /* layer.score: {score, D_Q = S, D_K = S, D_A} */
    CrossAttentionWeights w, dw;
    int max_B, max_T;
    size_t attn_cache_size;       /* floats of one attention call's cache, at the max sizes */

    /* encoder side, batch-major: row b is one source sequence */
    float *ann, *dann;            /* [max_B, max_T, S] the encoder states h_i (X of each row) */
    float *dH;                    /* [max_T, max_B, S] time-major, for rnn_encoder_backward */
    /* decoder's attention (the RNN's own buffers are in dec) */
    float *query, *dquery;        /* [max_B, max_Tt, S] batch-major queries and their gradient */
    float *attn;                  /* [max_B, max_Tt, max_T] a_t for every row and step */
    float *ctx, *dctx;            /* [max_B, max_Tt, S] c_t */
    float *attn_cache;            /* Luong: one cache per row; Bahdanau: per row and step */
    float *attn_scratch;          /* one backward call's scratch */
    float *comb, *dcomb;          /* Luong: [max_Tt, max_B, 2S] [c_t ; s_t] */
    float *htilde, *dhtilde;      /* Luong: [max_Tt, max_B, S] tanh([c_t ; s_t] W_c + b_c) */
    float *logits, *probs, *dlogits;   /* [max_Tt * max_B, V] time-major rows */
    /* decoding: encode() keeps ann and the lengths; step() attends row by row */
    int enc_T;
    int *enc_lens;                /* [max_B] */
    float *step_ctx, *step_attn;  /* [max_B, S], [max_B, max_T] */
    float *step_comb, *step_htilde;   /* [max_B, 2S], [max_B, S] */
    float *step_attn_cache;       /* one single-query attention call's cache */
} AttnSeq2Seq;

/* Build the model for vocabularies V_src, V_tgt, batches of up to max_B
 * sources of up to max_T_src tokens and targets of up to max_T_tgt, with
 * parameters initialised from seed. Returns 0 or -1 with fail(). */
int attn_seq2seq_create(AttnSeq2Seq *r, const AttnSeq2SeqConfig *c, int V_src, int V_tgt, int max_B,
                        int max_T_src, int max_T_tgt, uint64_t seed);
/* An AttnSeq2Seq on the heap, sized for the data set d, as the seq2seq
 * driver's model m (m->destroy frees it). Returns 0 or -1 with fail(). */
int attn_seq2seq_build(Seq2Seq *m, const Dataset *d, const AttnSeq2SeqConfig *c, int max_batch, uint64_t seed);
double attn_seq2seq_train_step(void *self, const Batch *b, int backward);
void attn_seq2seq_encode(void *self, const Batch *b, float *states);
void attn_seq2seq_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                       float *next, float *logprobs, float *attn);
void attn_seq2seq_free(AttnSeq2Seq *r);
void attn_seq2seq_destroy(void *self);      /* attn_seq2seq_free + free(self) */
void attn_seq2seq_interface(AttnSeq2Seq *r, Seq2Seq *m);

#endif
