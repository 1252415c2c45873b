/* attn_seq2seq.c - chapter 03: the encoder-decoder with the general attention
 * layer in its decoder, forward and hand-written backward (see attn_seq2seq.h).
 *
 * Reading order: attend_forward()/attend_backward() (the only place the
 * attention layer is called), encode_sources() (chapter 01's encoder, its
 * states laid out by chapter 02's encoder_states_to_rows()), the two decoders
 * (both on chapter 01's RnnDecoder) luong_forward()/luong_backward() and
 * bahdanau_forward()/bahdanau_backward(), attn_seq2seq_train_step() which
 * ties them together, then encode()/step() for decoding. */
#include "03_dot_product_attention/attn_seq2seq.h"
#include "02_bahdanau_attention/bahdanau.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "nn/layers.h"
#include "util/util.h"
#include "train/memory.h"

int placement_from_name(const char *name, Placement *out) {
    if (strcmp(name, "luong") == 0) *out = PLACEMENT_LUONG;
    else if (strcmp(name, "bahdanau") == 0) *out = PLACEMENT_BAHDANAU;
    else return fail("unknown placement '%s': expected luong or bahdanau", name);
    return 0;
}

const char *placement_name(Placement p) { return p == PLACEMENT_LUONG ? "luong" : "bahdanau"; }

/* ============================================== calling the attention layer */

/* Floats of cache (and of backward scratch) for one call with N_Q queries over T positions. */
static size_t call_cache_floats(const AttnSeq2Seq *r, int N_Q, int T) {
    return r->project_kv ? cross_attention_cache_floats(&r->layer, N_Q, T)
                         : attention_cache_floats(&r->layer.score, N_Q, T);
}
static size_t call_scratch_floats(const AttnSeq2Seq *r, int N_Q, int T) {
    return r->project_kv ? cross_attention_scratch_floats(&r->layer, N_Q, T)
                         : attention_scratch_floats(&r->layer.score, N_Q, T);
}

/* One source sequence: queries Q [N_Q, S] over its encoder states X [T, S],
 * of which the first len are real (the rest is padding, masked).
 * Writes the contexts C [N_Q, S], the weights A [N_Q, T] and cache.
 *   K = V = X                        (the encoder states are keys and values)
 *   or K = X W_K, V = X W_V          (project_kv: the cross-attention layer) */
static void attend_forward(AttnSeq2Seq *r, float *C, float *A, float *cache, const float *Q,
                           const float *X, int len, int N_Q, int T) {
    AttentionMask mask = {NULL, 0, len, 0};
    if (r->project_kv)
        cross_attention_forward(C, A, cache, Q, X, &r->layer, &r->w, &mask, N_Q, T);
    else
        attention_forward(C, A, cache, Q, X, X, &r->layer.score, &r->w.score, &mask, N_Q, T, r->dec.S);
}

/* From dC [N_Q, S]: dQ [N_Q, S] +=, dX [T, S] += (as a key AND as a value),
 * and the layer's parameter gradients +=. */
static void attend_backward(AttnSeq2Seq *r, float *dQ, float *dX, const float *dC, const float *A,
                            const float *cache, const float *Q, const float *X, int N_Q, int T) {
    if (r->project_kv)
        cross_attention_backward(dQ, dX, &r->dw, r->attn_scratch, dC, A, cache, Q, X, &r->layer, &r->w,
                                 N_Q, T);
    else
        attention_backward(dQ, dX, dX, &r->dw.score, r->attn_scratch, dC, A, cache, Q, X, X,
                           &r->layer.score, &r->w.score, N_Q, T, r->dec.S);
}

/* ================================================================ model */

const ConfigField ATTN_SEQ2SEQ_CONFIG_FIELDS[] = {
    {"cell", CONFIG_CHOICE, offsetof(AttnSeq2SeqConfig, cell), .choices = "rnn,gru,lstm"},
    {"embed", CONFIG_INT, offsetof(AttnSeq2SeqConfig, D_E), .lo = 1, .hi = 4096},
    {"state", CONFIG_INT, offsetof(AttnSeq2SeqConfig, S), .lo = 1, .hi = 4096, .old_key = "hidden"},
    {"score", CONFIG_CHOICE, offsetof(AttnSeq2SeqConfig, score), .choices = "dot,scaled_dot,multiplicative,additive"},
    {"placement", CONFIG_CHOICE, offsetof(AttnSeq2SeqConfig, placement), .choices = "luong,bahdanau"},
    {"attn", CONFIG_INT, offsetof(AttnSeq2SeqConfig, D_A), .lo = 1, .hi = 4096},
    {"project_kv", CONFIG_INT, offsetof(AttnSeq2SeqConfig, project_kv), .lo = 0, .hi = 1},
};
const int ATTN_SEQ2SEQ_CONFIG_N = (int)(sizeof ATTN_SEQ2SEQ_CONFIG_FIELDS / sizeof ATTN_SEQ2SEQ_CONFIG_FIELDS[0]);

int attn_seq2seq_create(AttnSeq2Seq *r, const AttnSeq2SeqConfig *c, int V_src, int V_tgt, int max_B,
                        int max_T_src, int max_T_tgt, uint64_t seed) {
    const CellType cell = c->cell;
    const ScoreType score = c->score;
    const Placement placement = c->placement;
    const int project_kv = c->project_kv != 0, D_E = c->D_E, S = c->S, D_A = c->D_A;
    memset(r, 0, sizeof *r);
    r->score = score;
    r->placement = placement;
    r->project_kv = project_kv;
    int luong = placement == PLACEMENT_LUONG;

    /* the attention layer: queries, keys and values all of size S */
    r->layer.score = (ScoreSpec){score, S, S, score == SCORE_ADDITIVE ? D_A : 0};
    r->layer.D_in_Q = S;
    r->layer.D_X = S;
    r->layer.D_V = S;
    r->layer.project_q = 0;

    Params *p = &r->params;
    params_init(p);
    rnn_encoder_declare(&r->enc, p, "enc", cell, V_src, D_E, S);
    /* the decoder cell's input: embed(y_{t-1}) (Luong) or [embed(y_{t-1}) ; c_t] (Bahdanau) */
    rnn_decoder_declare(&r->dec, p, cell, V_tgt, D_E, luong ? D_E : D_E + S, S);
    if (luong) {
        r->comb_W = params_add(p, "comb.W_c", 2, (int[]){2 * S, S});
        r->comb_b = params_add(p, "comb.b_c", 1, (int[]){S});
    }
    if (score == SCORE_MULTIPLICATIVE) r->att_W = params_add(p, "att.W", 2, (int[]){S, S});
    if (score == SCORE_ADDITIVE) {
        r->att_W1 = params_add(p, "att.W_1", 2, (int[]){S, D_A});
        r->att_W2 = params_add(p, "att.W_2", 2, (int[]){S, D_A});
        r->att_v = params_add(p, "att.v", 1, (int[]){D_A});
    }
    if (project_kv) {
        r->att_WK = params_add(p, "att.W_K", 2, (int[]){S, S});
        r->att_WV = params_add(p, "att.W_V", 2, (int[]){S, S});
    }
    if (params_alloc(p) < 0) return -1;

    /* views of the layer's weights and of their gradients */
    r->w = (CrossAttentionWeights){NULL, NULL, NULL, {NULL, NULL, NULL, NULL}};
    r->dw = r->w;
    if (score == SCORE_MULTIPLICATIVE) {
        r->w.score.W = params_data(p, r->att_W);
        r->dw.score.W = params_grad(p, r->att_W);
    }
    if (score == SCORE_ADDITIVE) {
        r->w.score.W_1 = params_data(p, r->att_W1);
        r->w.score.W_2 = params_data(p, r->att_W2);
        r->w.score.v = params_data(p, r->att_v);
        r->dw.score.W_1 = params_grad(p, r->att_W1);
        r->dw.score.W_2 = params_grad(p, r->att_W2);
        r->dw.score.v = params_grad(p, r->att_v);
    }
    if (project_kv) {
        r->w.W_K = params_data(p, r->att_WK);
        r->w.W_V = params_data(p, r->att_WV);
        r->dw.W_K = params_grad(p, r->att_WK);
        r->dw.W_V = params_grad(p, r->att_WV);
    }

    Rng rng;
    rng_seed(&rng, seed, 1);
    rnn_encoder_init(&r->enc, p, &rng);
    rnn_decoder_init(&r->dec, p, &rng);
    if (luong) {
        init_xavier(params_data(p, r->comb_W), 2 * S, S, &rng);
        init_constant(params_data(p, r->comb_b), (size_t)S, 0.0f);
    }
    score_init(&r->layer.score, &r->w.score, &rng);
    if (project_kv) {
        init_xavier(r->w.W_K, S, S, &rng);
        init_xavier(r->w.W_V, S, S, &rng);
    }

    /* activations, allocated once */
    int Tt = max_T_tgt + 1, T = max_T_src;   /* + <eos> */
    rnn_encoder_alloc(&r->enc, max_B, T);
    rnn_decoder_alloc(&r->dec, max_B, Tt);
    r->max_B = max_B;
    r->max_T = T;
    size_t BT = (size_t)max_B * T, BTt = (size_t)max_B * Tt;
    /* Luong: one call per row with all Tt queries; Bahdanau: one per row and step */
    r->attn_cache_size = luong ? call_cache_floats(r, Tt, T) : call_cache_floats(r, 1, T);
    size_t n_calls = luong ? (size_t)max_B : BTt;
    r->ann = xcalloc(BT * S, sizeof(float));
    r->dann = xcalloc(BT * S, sizeof(float));
    r->dH = xcalloc(BT * S, sizeof(float));
    r->query = xcalloc(BTt * S, sizeof(float));
    r->dquery = xcalloc(BTt * S, sizeof(float));
    r->attn = xcalloc(BTt * T, sizeof(float));
    r->ctx = xcalloc(BTt * S, sizeof(float));
    r->dctx = xcalloc(BTt * S, sizeof(float));
    r->attn_cache = xcalloc(n_calls * r->attn_cache_size, sizeof(float));
    r->attn_scratch = xcalloc(call_scratch_floats(r, Tt, T), sizeof(float));
    if (luong) {
        r->comb = xcalloc(BTt * 2 * S, sizeof(float));
        r->dcomb = xcalloc(BTt * 2 * S, sizeof(float));
        r->htilde = xcalloc(BTt * S, sizeof(float));
        r->dhtilde = xcalloc(BTt * S, sizeof(float));
    }
    r->logits = xcalloc(BTt * V_tgt, sizeof(float));
    r->probs = xcalloc(BTt * V_tgt, sizeof(float));
    r->dlogits = xcalloc(BTt * V_tgt, sizeof(float));
    r->enc_lens = xcalloc((size_t)max_B, sizeof(int));
    r->step_ctx = xcalloc((size_t)max_B * S, sizeof(float));
    r->step_attn = xcalloc(BT, sizeof(float));
    r->step_comb = xcalloc((size_t)max_B * 2 * S, sizeof(float));
    r->step_htilde = xcalloc((size_t)max_B * S, sizeof(float));
    r->step_attn_cache = xcalloc(call_cache_floats(r, 1, T), sizeof(float));
    return 0;
}

void attn_seq2seq_free(AttnSeq2Seq *r) {
    rnn_encoder_free(&r->enc);
    rnn_decoder_free(&r->dec);
    free(r->ann); free(r->dann); free(r->dH); free(r->query); free(r->dquery); free(r->attn);
    free(r->ctx); free(r->dctx); free(r->attn_cache); free(r->attn_scratch);
    free(r->comb); free(r->dcomb); free(r->htilde); free(r->dhtilde);
    free(r->logits); free(r->probs); free(r->dlogits); free(r->enc_lens);
    free(r->step_ctx); free(r->step_attn); free(r->step_comb); free(r->step_htilde);
    free(r->step_attn_cache);
    params_free(&r->params);
}

void attn_seq2seq_destroy(void *self) {
    attn_seq2seq_free(self);
    free(self);
}


/* Chapter 01's encoder over src [B, T], its states laid out as the data of
 * the attention layer: ann [B, T, S], row b position i = h_i (zeros past the
 * row's length); dec.s[0] = h_T (dec.cs[0] = c_T for the LSTM). Remembers T
 * and the lengths for decoding. */
static void encode_sources(AttnSeq2Seq *r, const int *src, const int *lens, int B, int T) {
    int S = r->dec.S;
    size_t hs = (size_t)B * S;
    rnn_encoder_forward(&r->enc, &r->params, src, lens, B, T);
    encoder_states_to_rows(r->ann, &r->enc, NULL, lens, B, T);   /* chapter 02's */
    memcpy(r->dec.s, rnn_encoder_final_h(&r->enc), sizeof(float) * hs);
    if (r->dec.cell == CELL_LSTM) memcpy(r->dec.cs, rnn_encoder_final_c(&r->enc), sizeof(float) * hs);
    r->enc_T = T;
    memcpy(r->enc_lens, lens, sizeof(int) * (size_t)B);
}

/* Backward of encode_sources: dann [B, T, S] (every h_i's gradient from the
 * attention) and dec.g.dh, dec.g.dc [B, S] (d s_0, d c_0) into the encoder's parameters. */
static void encode_sources_backward(AttnSeq2Seq *r, const int *lens, int B, int T) {
    encoder_grads_from_rows(r->dH, NULL, r->dann, lens, B, T, r->dec.S);   /* chapter 02's */
    rnn_encoder_backward(&r->enc, &r->params, r->dH, r->dec.g.dh, r->dec.cell == CELL_LSTM ? r->dec.g.dc : NULL);
}

/* ------------------------------------------------ the Luong decoder */
/* Shapes: B rows, source T, target Tt steps.
 *   in[t] = embed(y_{t-1})  [B, D_E];  s_{t+1} = g_U(in[t], s_t)  [B, S]     (s index t+1 = step t)
 *   query [B, Tt, S] = the states s_1..s_Tt of each row
 *   per row b: C_b [Tt, S], A_b [Tt, T] = attention(query_b, ann_b)   ONE call, Tt queries
 *   comb [Tt, B, 2S] = [c_t ; s_t],  htilde [Tt*B, S] = tanh(comb W_c + b_c)
 * Returns the rows the output layer reads: htilde. */
static const float *luong_forward(AttnSeq2Seq *r, const Batch *batch) {
    Params *p = &r->params;
    RnnDecoder *dec = &r->dec;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len, S = dec->S;
    size_t hs = (size_t)B * S;
    for (int t = 0; t < Tt; t++) {
        rnn_decoder_embed(dec, p, t, B);
        rnn_decoder_cell_forward(dec, p, t, B);
    }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tt; t++)
            memcpy(r->query + ((size_t)b * Tt + t) * S, dec->s + (t + 1) * hs + (size_t)b * S,
                   sizeof(float) * (size_t)S);
    size_t cache_row = call_cache_floats(r, Tt, T);
    for (int b = 0; b < B; b++)   /* all Tt queries of row b at once: E = score(Q, K), A, C = A V */
        attend_forward(r, r->ctx + (size_t)b * Tt * S, r->attn + (size_t)b * Tt * T,
                       r->attn_cache + b * cache_row, r->query + (size_t)b * Tt * S,
                       r->ann + (size_t)b * T * S, batch->src_lens[b], Tt, T);
    for (int t = 0; t < Tt; t++)
        for (int b = 0; b < B; b++) {
            float *row = r->comb + ((size_t)t * B + b) * 2 * S;
            memcpy(row, r->ctx + ((size_t)b * Tt + t) * S, sizeof(float) * (size_t)S);
            memcpy(row + S, dec->s + (t + 1) * hs + (size_t)b * S, sizeof(float) * (size_t)S);
        }
    linear_forward(r->htilde, r->comb, params_data(p, r->comb_W), params_data(p, r->comb_b), Tt * B, 2 * S, S);
    tanh_forward(r->htilde, r->htilde, Tt * B * S);
    return r->htilde;
}

/* From dhtilde [Tt*B, S] (the output layer's gradient) back to dec.g.dh = d s_0,
 * dec.g.dc = d c_0 and dann; accumulates the decoder's parameter gradients. */
static void luong_backward(AttnSeq2Seq *r, const Batch *batch) {
    Params *p = &r->params;
    RnnDecoder *dec = &r->dec;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len, S = dec->S;
    size_t hs = (size_t)B * S, n = (size_t)Tt * B;
    /* through htilde = tanh(pre): d pre = d htilde * (1 - htilde^2), in place */
    for (size_t i = 0; i < n * S; i++) r->dhtilde[i] *= 1.0f - r->htilde[i] * r->htilde[i];
    memset(r->dcomb, 0, sizeof(float) * n * 2 * S);
    linear_backward(r->dcomb, params_grad(p, r->comb_W), params_grad(p, r->comb_b), r->dhtilde, r->comb,
                    params_data(p, r->comb_W), (int)n, 2 * S, S);
    /* split d[c_t ; s_t]: dctx batch-major for the attention, dS time-major for the RNN */
    for (int t = 0; t < Tt; t++)
        for (int b = 0; b < B; b++) {
            const float *row = r->dcomb + ((size_t)t * B + b) * 2 * S;
            memcpy(r->dctx + ((size_t)b * Tt + t) * S, row, sizeof(float) * (size_t)S);
            memcpy(dec->dS + t * hs + (size_t)b * S, row + S, sizeof(float) * (size_t)S);
        }
    /* the attention layer, row by row: to the queries (the states s_t) and to every h_i */
    memset(r->dquery, 0, sizeof(float) * n * S);
    memset(r->dann, 0, sizeof(float) * (size_t)B * T * S);
    size_t cache_row = call_cache_floats(r, Tt, T);
    for (int b = 0; b < B; b++)
        attend_backward(r, r->dquery + (size_t)b * Tt * S, r->dann + (size_t)b * T * S,
                        r->dctx + (size_t)b * Tt * S, r->attn + (size_t)b * Tt * T,
                        r->attn_cache + b * cache_row, r->query + (size_t)b * Tt * S,
                        r->ann + (size_t)b * T * S, Tt, T);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tt; t++) {
            const float *dq = r->dquery + ((size_t)b * Tt + t) * S;
            float *ds = dec->dS + t * hs + (size_t)b * S;
            for (int j = 0; j < S; j++) ds[j] += dq[j];
        }
    /* the decoder RNN, last step first (rnn_decoder_loss zeroed g.dh, g.dc) */
    for (int t = Tt - 1; t >= 0; t--) {
        rnn_decoder_cell_backward(dec, p, t, B);
        rnn_decoder_embed_backward(dec, p, t, B);
        state_grads_swap(&dec->g);
    }
}

/* ------------------------------------------------ the Bahdanau-placed decoder */
/* Shapes: as above, I = D_E + S.
 *   step t, row b: c_t, a_t = attention(query s_t[b] (that is s_{t-1} in 1-based
 *                  steps), ann_b)        one call, ONE query [1, S]
 *   in[t] = [embed(y_{t-1}) ; c_t]  [B, I];  s_{t+1} = g_U(in[t], s_t)
 * Returns the rows the output layer reads: s_1..s_Tt. */
static const float *bahdanau_forward(AttnSeq2Seq *r, const Batch *batch) {
    Params *p = &r->params;
    RnnDecoder *dec = &r->dec;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len, D_E = dec->D_E, S = dec->S, I = dec->I;
    size_t hs = (size_t)B * S, cache1 = call_cache_floats(r, 1, T);
    for (int t = 0; t < Tt; t++) {
        const float *s_prev = dec->s + t * hs;
        float *in = dec->in + (size_t)t * B * I;
        for (int b = 0; b < B; b++) {
            size_t bt = (size_t)b * Tt + t;
            attend_forward(r, r->ctx + bt * S, r->attn + bt * T, r->attn_cache + bt * cache1,
                           s_prev + (size_t)b * S, r->ann + (size_t)b * T * S, batch->src_lens[b], 1, T);
            memcpy(in + (size_t)b * I + D_E, r->ctx + bt * S, sizeof(float) * (size_t)S);
        }
        rnn_decoder_embed(dec, p, t, B);
        rnn_decoder_cell_forward(dec, p, t, B);
    }
    return dec->s + hs;
}

/* From dS [Tt, B, S] (the output layer's gradient w.r.t. s_1..s_Tt) back to
 * dec.g.dh = d s_0, dec.g.dc = d c_0 and dann. */
static void bahdanau_backward(AttnSeq2Seq *r, const Batch *batch) {
    Params *p = &r->params;
    RnnDecoder *dec = &r->dec;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len, D_E = dec->D_E, S = dec->S, I = dec->I;
    size_t hs = (size_t)B * S, cache1 = call_cache_floats(r, 1, T);
    memset(r->dann, 0, sizeof(float) * (size_t)B * T * S);   /* (rnn_decoder_loss zeroed g.dh, g.dc) */
    for (int t = Tt - 1; t >= 0; t--) {
        const float *s_prev = dec->s + t * hs;
        rnn_decoder_cell_backward(dec, p, t, B);
        /* split d[in] = [d embed ; d c_t] */
        for (int b = 0; b < B; b++)
            memcpy(r->dctx + ((size_t)b * Tt + t) * S, dec->din + (size_t)b * I + D_E, sizeof(float) * (size_t)S);
        rnn_decoder_embed_backward(dec, p, t, B);
        /* the attention layer: to the query s_{t-1} (a second path into g.dh_prev) and to every h_i */
        for (int b = 0; b < B; b++) {
            size_t bt = (size_t)b * Tt + t;
            attend_backward(r, dec->g.dh_prev + (size_t)b * S, r->dann + (size_t)b * T * S, r->dctx + bt * S,
                            r->attn + bt * T, r->attn_cache + bt * cache1, s_prev + (size_t)b * S,
                            r->ann + (size_t)b * T * S, 1, T);
        }
        state_grads_swap(&dec->g);
    }
}

/* One training (or evaluation) pass over a batch: encoder, decoder, output
 * layer logits [Tt*B, V] (row t*B + b), cross-entropy; then the backward pass
 * in reverse. After it, attn [B, Tt, T] and ctx [B, Tt, S] hold every a_t and
 * c_t (row b, step t). */
double attn_seq2seq_train_step(void *self, const Batch *batch, int backward) {
    AttnSeq2Seq *r = self;
    RnnDecoder *dec = &r->dec;
    int B = batch->batch, T = batch->src_len;
    int luong = r->placement == PLACEMENT_LUONG;

    encode_sources(r, batch->src, batch->src_lens, B, T);
    rnn_decoder_targets(dec, batch);
    const float *top = luong ? luong_forward(r, batch) : bahdanau_forward(r, batch);   /* [Tt*B, S] */
    /* output layer and loss: chapter 01's (with backward, d loss / d top into dtop) */
    float *dtop = luong ? r->dhtilde : dec->dS;
    double loss;
    if (!rnn_decoder_loss(dec, &r->params, batch, top, dtop, r->logits, r->probs, r->dlogits, backward, &loss))
        return loss;
    if (luong) luong_backward(r, batch);
    else bahdanau_backward(r, batch);
    /* now dec.g.dh = d loss / d s_0 (g.dc = d c_0) and dann = d loss / d h_i: into the encoder */
    encode_sources_backward(r, batch->src_lens, B, T);
    return loss;
}

/* ============================================================== decoding */
/* A row's state is [s (S) | c (S, LSTM only)]. encode_sources() keeps ann and
 * the lengths of the encoded batch in the model. */
void attn_seq2seq_encode(void *self, const Batch *b, float *states) {
    AttnSeq2Seq *r = self;
    encode_sources(r, b->src, b->src_lens, b->batch, b->src_len);
    rnn_decoder_initial_states(&r->dec, states, b->batch);
}

/* One decoder step for n rows, the same computation as one column of the
 * training pass. Row i continues source src_row[i]: its attention data is
 * ann [src_row[i]] [T, S]. Shapes: s [n, S] -> s' [n, S]; c_t [n, S];
 * a_t [n, T]; logits [n, V]. */
void attn_seq2seq_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                       float *next, float *logprobs, float *attn) {
    AttnSeq2Seq *r = self;
    int luong = r->placement == PLACEMENT_LUONG;
    Params *p = &r->params;
    RnnDecoder *dec = &r->dec;
    int S = dec->S, T = r->enc_T;
    rnn_decoder_step_begin(dec, states, n);
    /* Luong asks with the new state s_t, Bahdanau with the previous one s_{t-1} */
    if (luong) {
        rnn_decoder_step_embed(dec, p, prev, n);
        rnn_decoder_step_cell(dec, p, n);
    }
    const float *queries = luong ? dec->step_h_next : dec->step_h;
    for (int i = 0; i < n; i++) {
        int src = src_row[i];
        attend_forward(r, r->step_ctx + (size_t)i * S, r->step_attn + (size_t)i * T, r->step_attn_cache,
                       queries + (size_t)i * S, r->ann + (size_t)src * T * S, r->enc_lens[src], 1, T);
    }
    if (attn) memcpy(attn, r->step_attn, sizeof(float) * (size_t)n * T);
    const float *top;
    if (luong) {   /* htilde = tanh([c_t ; s_t] W_c + b_c) */
        put_columns(r->step_comb, 2 * S, 0, r->step_ctx, n, S);
        put_columns(r->step_comb, 2 * S, S, dec->step_h_next, n, S);
        linear_forward(r->step_htilde, r->step_comb, params_data(p, r->comb_W), params_data(p, r->comb_b),
                       n, 2 * S, S);
        tanh_forward(r->step_htilde, r->step_htilde, n * S);
        top = r->step_htilde;
    } else {       /* s_t = g_U([embed(y_{t-1}) ; c_t], s_{t-1}) */
        rnn_decoder_step_embed(dec, p, prev, n);
        put_columns(dec->step_in, dec->I, dec->D_E, r->step_ctx, n, S);
        rnn_decoder_step_cell(dec, p, n);
        top = dec->step_h_next;
    }
    rnn_decoder_step_end(dec, p, top, n, next, logprobs);
}

void attn_seq2seq_interface(AttnSeq2Seq *r, Seq2Seq *m) {
    *m = (Seq2Seq){.self = r, .params = &r->params, .train_step = attn_seq2seq_train_step,
                   .encode = attn_seq2seq_encode, .step = attn_seq2seq_step, .destroy = attn_seq2seq_destroy,
                   .state_size = rnn_decoder_state_size(&r->dec), .vocab_size = r->dec.V, .has_attention = 1};
}

int attn_seq2seq_build(Seq2Seq *m, const Dataset *d, const AttnSeq2SeqConfig *c, int max_batch, uint64_t seed) {
    /* its allocations counted against the memory this process may use (train/memory.h) */
    memory_budget_begin("03_dot_product_attention", "a smaller --batch, --state or --embed, or shorter examples");
    AttnSeq2Seq *r = xmalloc(sizeof *r);
    int err = attn_seq2seq_create(r, c, d->src_vocab.size, d->tgt_vocab.size, max_batch, d->max_src_len,
                                  d->max_tgt_len, seed);
    memory_budget_end();
    if (err == 0) attn_seq2seq_interface(r, m);
    else free(r);
    return err;
}
