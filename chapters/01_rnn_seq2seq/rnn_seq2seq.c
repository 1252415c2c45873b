/* rnn_seq2seq.c - chapter 01: the RNN encoder-decoder, forward and the
 * hand-written backward pass through time (see rnn_seq2seq.h).
 *
 * Reading order: the encoder (RnnEncoder), the decoder's pieces (RnnDecoder,
 * which chapters 02 and 03 reuse), small helpers, then the seq2seq model:
 * rnn_seq2seq_train_step() ties encoder and decoder together through the one
 * context vector c, then encode()/step() for decoding. */
#include "rnn_seq2seq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "nn/layers.h"
#include "util/util.h"
#include "train/memory.h"

/* The cell's tensors W_x, W_h, b in p: their values, or (grad 1) their gradients. */
static CellWeights cell_weights(Params *p, size_t W_x, size_t W_h, size_t b, int grad) {
    float *(*get)(Params *, size_t) = grad ? params_grad : params_data;
    return (CellWeights){get(p, W_x), get(p, W_h), get(p, b)};
}

/* ================================================================= encoder */

void rnn_encoder_declare(RnnEncoder *enc, Params *p, const char *prefix, CellType cell,
                         int V, int D_E, int S) {
    memset(enc, 0, sizeof *enc);
    enc->cell = cell;
    enc->V = V;
    enc->D_E = D_E;
    enc->S = S;
    int G = cell_gates(cell);
    char name[PARAMS_NAME_LEN];
    snprintf(name, sizeof name, "%s.emb", prefix);
    enc->emb = params_add(p, name, 2, (int[]){V, D_E});
    snprintf(name, sizeof name, "%s.W_x", prefix);
    enc->W_x = params_add(p, name, 2, (int[]){D_E, G * S});
    snprintf(name, sizeof name, "%s.W_h", prefix);
    enc->W_h = params_add(p, name, 2, (int[]){S, G * S});
    snprintf(name, sizeof name, "%s.b", prefix);
    enc->b = params_add(p, name, 1, (int[]){G * S});
}

void rnn_cell_init(CellType cell, float *W_x, float *W_h, float *b, int I, int S, Rng *rng) {
    int G = cell_gates(cell);
    float limit = 1.0f / sqrtf((float)S);
    init_uniform(W_x, (size_t)I * G * S, limit, rng);
    init_uniform(W_h, (size_t)S * G * S, limit, rng);
    init_uniform(b, (size_t)G * S, limit, rng);
    if (cell == CELL_LSTM) init_constant(b + S, (size_t)S, 1.0f);
}

void rnn_encoder_init(RnnEncoder *enc, Params *p, Rng *rng) {
    init_normal(params_data(p, enc->emb), (size_t)enc->V * enc->D_E, 1.0f / sqrtf((float)enc->D_E), rng);
    rnn_cell_init(enc->cell, params_data(p, enc->W_x), params_data(p, enc->W_h),
                  params_data(p, enc->b), enc->D_E, enc->S, rng);
}

void rnn_encoder_alloc(RnnEncoder *enc, int max_B, int max_T) {
    int D_E = enc->D_E, S = enc->S, G = cell_gates(enc->cell);
    enc->max_B = max_B;
    enc->max_T = max_T;
    enc->cache_size = cell_cache_size(enc->cell, S);
    size_t BT = (size_t)max_B * max_T;
    enc->ids = xcalloc(BT, sizeof(int));
    enc->mask = xcalloc(BT, sizeof(int));
    enc->x = xcalloc(BT * D_E, sizeof(float));
    enc->h = xcalloc((size_t)max_B * (max_T + 1) * S, sizeof(float));
    enc->c = cell_has_c(enc->cell) ? xcalloc((size_t)max_B * (max_T + 1) * S, sizeof(float)) : NULL;
    enc->cache = xcalloc(BT * enc->cache_size, sizeof(float));
    enc->scratch = xcalloc((size_t)max_B * 2 * G * S, sizeof(float));
    enc->dx = xcalloc((size_t)max_B * D_E, sizeof(float));
    state_grads_alloc(&enc->g, max_B, S);
}

void rnn_encoder_free(RnnEncoder *enc) {
    free(enc->ids); free(enc->mask); free(enc->x); free(enc->h); free(enc->c);
    free(enc->cache); free(enc->scratch); free(enc->dx);
    state_grads_free(&enc->g);
}

float *rnn_encoder_final_h(RnnEncoder *enc) { return enc->h + (size_t)enc->T * enc->B * enc->S; }
float *rnn_encoder_final_c(RnnEncoder *enc) {
    return enc->c ? enc->c + (size_t)enc->T * enc->B * enc->S : NULL;
}

/* Shapes: src[B,T] -> x[t] [B,D_E] -> h[t+1] [B,S] for t = 0..T-1. */
void rnn_encoder_forward(RnnEncoder *enc, Params *p, const int *src, const int *lens, int B, int T) {
    int D_E = enc->D_E, S = enc->S;
    enc->B = B;
    enc->T = T;
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++) {
            enc->ids[t * B + b] = src[b * T + t];
            enc->mask[t * B + b] = t < lens[b];
        }
    memset(enc->h, 0, sizeof(float) * (size_t)B * S);   /* h_0 = 0 */
    if (enc->c) memset(enc->c, 0, sizeof(float) * (size_t)B * S);
    embedding_forward(enc->x, enc->ids, params_data(p, enc->emb), B * T, D_E);
    const CellWeights w = cell_weights(p, enc->W_x, enc->W_h, enc->b, 0);
    for (int t = 0; t < T; t++) {
        size_t hs = (size_t)B * S;
        const CellStep step = {enc->cell, B, D_E, S, enc->mask + t * B, enc->x + (size_t)t * B * D_E,
                               enc->h + t * hs, enc->c ? enc->c + t * hs : NULL};
        cell_forward(enc->h + (t + 1) * hs, enc->c ? enc->c + (t + 1) * hs : NULL,
                     enc->cache + (size_t)t * B * enc->cache_size, enc->scratch, &step, &w);
    }
}

void rnn_encoder_backward(RnnEncoder *enc, Params *p, const float *dH,
                          const float *dh_final, const float *dc_final) {
    int B = enc->B, T = enc->T, D_E = enc->D_E, S = enc->S;
    size_t hs = (size_t)B * S;
    StateGrads *g = &enc->g;
    memcpy(g->dh, dh_final, sizeof(float) * hs);
    if (enc->c) {
        if (dc_final) memcpy(g->dc, dc_final, sizeof(float) * hs);
        else memset(g->dc, 0, sizeof(float) * hs);
    }
    const CellWeights w = cell_weights(p, enc->W_x, enc->W_h, enc->b, 0);
    const CellWeights dw = cell_weights(p, enc->W_x, enc->W_h, enc->b, 1);
    /* Exercise 01.encoder_bptt (3 points): backpropagation through time, from h_T back to h_0. */
    for (int t = T - 1; t >= 0; t--) {
        if (dH)  /* gradient arriving directly at h[t+1] from later layers */
            for (size_t i = 0; i < hs; i++) g->dh[i] += dH[(size_t)t * hs + i];
        memset(enc->dx, 0, sizeof(float) * (size_t)B * D_E);
        memset(g->dh_prev, 0, sizeof(float) * hs);
        if (enc->c) memset(g->dc_prev, 0, sizeof(float) * hs);
        const CellStep step = {enc->cell, B, D_E, S, enc->mask + t * B, enc->x + (size_t)t * B * D_E,
                               enc->h + t * hs, enc->c ? enc->c + t * hs : NULL};
        cell_backward(enc->dx, g->dh_prev, enc->c ? g->dc_prev : NULL, &dw, g->dh, enc->c ? g->dc : NULL,
                      enc->cache + (size_t)t * B * enc->cache_size, enc->scratch, &step, &w);
        embedding_backward(params_grad(p, enc->emb), enc->dx, enc->ids + t * B, B, D_E);
        state_grads_swap(g);
    }
    /* End of exercise 01.encoder_bptt. */
}

/* ================================================================= decoder */

void rnn_decoder_declare(RnnDecoder *dec, Params *p, CellType cell, int V, int D_E, int I, int S) {
    memset(dec, 0, sizeof *dec);
    dec->cell = cell;
    dec->V = V;
    dec->D_E = D_E;
    dec->I = I;
    dec->S = S;
    int G = cell_gates(cell);
    dec->emb = params_add(p, "dec.emb", 2, (int[]){V, D_E});
    dec->W_x = params_add(p, "dec.W_x", 2, (int[]){I, G * S});
    dec->W_h = params_add(p, "dec.W_h", 2, (int[]){S, G * S});
    dec->b = params_add(p, "dec.b", 1, (int[]){G * S});
    dec->out_W = params_add(p, "out.W", 2, (int[]){S, V});
    dec->out_b = params_add(p, "out.b", 1, (int[]){V});
}

void rnn_decoder_init(RnnDecoder *dec, Params *p, Rng *rng) {
    init_normal(params_data(p, dec->emb), (size_t)dec->V * dec->D_E, 1.0f / sqrtf((float)dec->D_E), rng);
    rnn_cell_init(dec->cell, params_data(p, dec->W_x), params_data(p, dec->W_h),
                  params_data(p, dec->b), dec->I, dec->S, rng);
    init_xavier(params_data(p, dec->out_W), dec->S, dec->V, rng);
    init_constant(params_data(p, dec->out_b), (size_t)dec->V, 0.0f);
}

void rnn_decoder_alloc(RnnDecoder *dec, int max_B, int max_T) {
    int I = dec->I, S = dec->S, G = cell_gates(dec->cell);
    dec->max_B = max_B;
    dec->max_T = max_T;
    dec->cache_size = cell_cache_size(dec->cell, S);
    size_t BT = (size_t)max_B * max_T;
    dec->tgt_in = xcalloc(BT, sizeof(int));
    dec->tgt_out = xcalloc(BT, sizeof(int));
    dec->in = xcalloc(BT * I, sizeof(float));
    dec->s = xcalloc((size_t)max_B * (max_T + 1) * S, sizeof(float));
    dec->cs = xcalloc((size_t)max_B * (max_T + 1) * S, sizeof(float));
    dec->cache = xcalloc(BT * dec->cache_size, sizeof(float));
    dec->dS = xcalloc(BT * S, sizeof(float));
    dec->scratch = xcalloc((size_t)max_B * 2 * G * S, sizeof(float));
    dec->din = xcalloc((size_t)max_B * I, sizeof(float));
    dec->demb = xcalloc((size_t)max_B * dec->D_E, sizeof(float));
    state_grads_alloc(&dec->g, max_B, S);
    dec->step_in = xcalloc((size_t)max_B * I, sizeof(float));
    dec->step_h = xcalloc((size_t)max_B * S, sizeof(float));
    dec->step_c = xcalloc((size_t)max_B * S, sizeof(float));
    dec->step_h_next = xcalloc((size_t)max_B * S, sizeof(float));
    dec->step_c_next = xcalloc((size_t)max_B * S, sizeof(float));
    dec->step_cache = xcalloc((size_t)max_B * dec->cache_size, sizeof(float));
    dec->step_scratch = xcalloc((size_t)max_B * 2 * G * S, sizeof(float));
    dec->step_logits = xcalloc((size_t)max_B * dec->V, sizeof(float));
}

void rnn_decoder_free(RnnDecoder *dec) {
    free(dec->tgt_in); free(dec->tgt_out); free(dec->in); free(dec->s); free(dec->cs);
    free(dec->cache); free(dec->dS); free(dec->scratch); free(dec->din); free(dec->demb);
    state_grads_free(&dec->g);
    free(dec->step_in); free(dec->step_h); free(dec->step_c); free(dec->step_h_next);
    free(dec->step_c_next); free(dec->step_cache); free(dec->step_scratch); free(dec->step_logits);
}

int rnn_decoder_state_size(const RnnDecoder *dec) { return dec->cell == CELL_LSTM ? 2 * dec->S : dec->S; }

void rnn_decoder_targets(RnnDecoder *dec, const Batch *batch) {
    int B = batch->batch, Tt = batch->tgt_len;
    for (int t = 0; t < Tt; t++)
        for (int b = 0; b < B; b++) {
            dec->tgt_in[t * B + b] = batch->tgt_in[b * Tt + t];
            dec->tgt_out[t * B + b] = batch->tgt_out[b * Tt + t];
        }
}

void rnn_decoder_embed(RnnDecoder *dec, Params *p, int t, int B) {
    embedding_forward(dec->demb, dec->tgt_in + t * B, params_data(p, dec->emb), B, dec->D_E);
    put_columns(dec->in + (size_t)t * B * dec->I, dec->I, 0, dec->demb, B, dec->D_E);
}

void rnn_decoder_cell_forward(RnnDecoder *dec, Params *p, int t, int B) {
    size_t hs = (size_t)B * dec->S;
    int lstm = dec->cell == CELL_LSTM;
    const CellStep step = {dec->cell, B, dec->I, dec->S, NULL, dec->in + (size_t)t * B * dec->I, dec->s + t * hs,
                           lstm ? dec->cs + t * hs : NULL};
    const CellWeights w = cell_weights(p, dec->W_x, dec->W_h, dec->b, 0);
    cell_forward(dec->s + (t + 1) * hs, lstm ? dec->cs + (t + 1) * hs : NULL,
                 dec->cache + (size_t)t * B * dec->cache_size, dec->scratch, &step, &w);
}

int rnn_decoder_loss(RnnDecoder *dec, Params *p, const Batch *batch, const float *top, float *dtop,
                     float *logits, float *probs, float *dlogits, int backward, double *loss) {
    int n_tokens = 0;
    size_t hs = (size_t)batch->batch * dec->S;
    *loss = output_layer_loss(p, dec->out_W, dec->out_b, top, dec->tgt_out, batch->tgt_len * batch->batch,
                              dec->S, dec->V, logits, probs, dlogits, dtop, backward, &n_tokens);
    if (!backward || n_tokens == 0) return 0;
    memset(dec->g.dh, 0, sizeof(float) * hs);
    memset(dec->g.dc, 0, sizeof(float) * hs);
    return 1;
}

void rnn_decoder_cell_backward(RnnDecoder *dec, Params *p, int t, int B) {
    size_t hs = (size_t)B * dec->S;
    int lstm = dec->cell == CELL_LSTM;
    StateGrads *g = &dec->g;
    for (size_t i = 0; i < hs; i++) g->dh[i] += dec->dS[(size_t)t * hs + i];
    memset(dec->din, 0, sizeof(float) * (size_t)B * dec->I);
    memset(g->dh_prev, 0, sizeof(float) * hs);
    memset(g->dc_prev, 0, sizeof(float) * hs);
    const CellStep step = {dec->cell, B, dec->I, dec->S, NULL, dec->in + (size_t)t * B * dec->I, dec->s + t * hs,
                           lstm ? dec->cs + t * hs : NULL};
    const CellWeights w = cell_weights(p, dec->W_x, dec->W_h, dec->b, 0);
    const CellWeights dw = cell_weights(p, dec->W_x, dec->W_h, dec->b, 1);
    cell_backward(dec->din, g->dh_prev, lstm ? g->dc_prev : NULL, &dw, g->dh, lstm ? g->dc : NULL,
                  dec->cache + (size_t)t * B * dec->cache_size, dec->scratch, &step, &w);
}

void rnn_decoder_embed_backward(RnnDecoder *dec, Params *p, int t, int B) {
    int D_E = dec->D_E, I = dec->I;
    for (int b = 0; b < B; b++)
        memcpy(dec->demb + (size_t)b * D_E, dec->din + (size_t)b * I, sizeof(float) * (size_t)D_E);
    embedding_backward(params_grad(p, dec->emb), dec->demb, dec->tgt_in + t * B, B, D_E);
}

void rnn_decoder_initial_states(RnnDecoder *dec, float *states, int B) {
    decoder_states_pack(states, dec->s, dec->cell == CELL_LSTM ? dec->cs : NULL, B, dec->S);
}

void rnn_decoder_step_begin(RnnDecoder *dec, const float *states, int n) {
    decoder_states_unpack(dec->step_h, dec->cell == CELL_LSTM ? dec->step_c : NULL, states, n, dec->S);
}

void rnn_decoder_step_embed(RnnDecoder *dec, Params *p, const int *prev, int n) {
    embedding_forward(dec->demb, prev, params_data(p, dec->emb), n, dec->D_E);
    put_columns(dec->step_in, dec->I, 0, dec->demb, n, dec->D_E);
}

void rnn_decoder_step_cell(RnnDecoder *dec, Params *p, int n) {
    int lstm = dec->cell == CELL_LSTM;
    const CellStep step = {dec->cell, n, dec->I, dec->S, NULL, dec->step_in, dec->step_h,
                           lstm ? dec->step_c : NULL};
    const CellWeights w = cell_weights(p, dec->W_x, dec->W_h, dec->b, 0);
    cell_forward(dec->step_h_next, lstm ? dec->step_c_next : NULL, dec->step_cache, dec->step_scratch, &step, &w);
}

void rnn_decoder_step_end(RnnDecoder *dec, Params *p, const float *top, int n, float *next, float *logprobs) {
    decoder_states_pack(next, dec->step_h_next, dec->cell == CELL_LSTM ? dec->step_c_next : NULL, n, dec->S);
    linear_forward(dec->step_logits, top, params_data(p, dec->out_W), params_data(p, dec->out_b),
                   n, dec->S, dec->V);
    log_softmax_forward(logprobs, dec->step_logits, n, dec->V);
}

/* ========================================================= small helpers */

void put_columns(float *dst, int width, int offset, const float *src, int B, int D) {
    for (int b = 0; b < B; b++)
        memcpy(dst + (size_t)b * width + offset, src + (size_t)b * D, sizeof(float) * (size_t)D);
}

void decoder_states_pack(float *states, const float *h, const float *c, int n, int S) {
    int row = c ? 2 * S : S;
    for (int i = 0; i < n; i++) {
        memcpy(states + (size_t)i * row, h + (size_t)i * S, sizeof(float) * (size_t)S);
        if (c) memcpy(states + (size_t)i * row + S, c + (size_t)i * S, sizeof(float) * (size_t)S);
    }
}

void decoder_states_unpack(float *h, float *c, const float *states, int n, int S) {
    int row = c ? 2 * S : S;
    for (int i = 0; i < n; i++) {
        memcpy(h + (size_t)i * S, states + (size_t)i * row, sizeof(float) * (size_t)S);
        if (c) memcpy(c + (size_t)i * S, states + (size_t)i * row + S, sizeof(float) * (size_t)S);
    }
}

double output_layer_loss(Params *p, size_t out_W, size_t out_b, const float *top, const int *targets,
                         int N, int S, int V, float *logits, float *probs, float *dlogits, float *dtop,
                         int backward, int *n_tokens) {
    linear_forward(logits, top, params_data(p, out_W), params_data(p, out_b), N, S, V);
    *n_tokens = 0;
    double loss_sum = cross_entropy_forward(probs, logits, targets, N, V, PAD_ID, n_tokens);
    double loss = *n_tokens ? loss_sum / *n_tokens : 0.0;
    if (!backward || *n_tokens == 0) return loss;
    memset(dlogits, 0, sizeof(float) * (size_t)N * V);
    cross_entropy_backward(dlogits, probs, targets, N, V, PAD_ID, 1.0f / (float)*n_tokens);
    memset(dtop, 0, sizeof(float) * (size_t)N * S);
    linear_backward(dtop, params_grad(p, out_W), params_grad(p, out_b), dlogits, top,
                    params_data(p, out_W), N, S, V);
    return loss;
}

/* ================================================================= seq2seq */

const ConfigField RNN_CONFIG_FIELDS[] = {
    {"cell", CONFIG_CHOICE, offsetof(RnnConfig, cell), .choices = "rnn,gru,lstm"},
    {"embed", CONFIG_INT, offsetof(RnnConfig, D_E), .lo = 1, .hi = 4096},
    {"state", CONFIG_INT, offsetof(RnnConfig, S), .lo = 1, .hi = 4096, .old_key = "hidden"},
};
const int RNN_CONFIG_N = (int)(sizeof RNN_CONFIG_FIELDS / sizeof RNN_CONFIG_FIELDS[0]);

int rnn_seq2seq_create(RnnSeq2Seq *r, const RnnConfig *c, int V_src, int V_tgt, int max_B, int max_T_src,
                       int max_T_tgt, uint64_t seed) {
    const CellType cell = c->cell;
    const int D_E = c->D_E, S = c->S;
    memset(r, 0, sizeof *r);
    params_init(&r->params);
    rnn_encoder_declare(&r->enc, &r->params, "enc", cell, V_src, D_E, S);
    rnn_decoder_declare(&r->dec, &r->params, cell, V_tgt, D_E, D_E + S, S);
    if (params_alloc(&r->params) < 0) return -1;

    Rng rng;
    rng_seed(&rng, seed, 1);
    rnn_encoder_init(&r->enc, &r->params, &rng);
    rnn_decoder_init(&r->dec, &r->params, &rng);

    rnn_encoder_alloc(&r->enc, max_B, max_T_src);
    rnn_decoder_alloc(&r->dec, max_B, max_T_tgt + 1);   /* + <eos> */
    size_t BTt = (size_t)max_B * (max_T_tgt + 1);
    r->logits = xcalloc(BTt * V_tgt, sizeof(float));
    r->probs = xcalloc(BTt * V_tgt, sizeof(float));
    r->dlogits = xcalloc(BTt * V_tgt, sizeof(float));
    r->dctx = xcalloc((size_t)max_B * S, sizeof(float));
    r->ctx = xcalloc((size_t)max_B * S, sizeof(float));
    r->ctx_c = xcalloc((size_t)max_B * S, sizeof(float));
    return 0;
}

void rnn_seq2seq_free(RnnSeq2Seq *r) {
    rnn_encoder_free(&r->enc);
    rnn_decoder_free(&r->dec);
    free(r->logits); free(r->probs); free(r->dlogits); free(r->dctx); free(r->ctx); free(r->ctx_c);
    params_free(&r->params);
}

void rnn_seq2seq_destroy(void *self) {
    rnn_seq2seq_free(self);
    free(self);
}

/* One training (or evaluation) pass over a batch.
 * Shapes: B sequences; source T; target Tt steps (with <eos>); D_E embed; S state.
 *   encoder:  h[1..T]  [T, B, S], context c = h_T  [B, S]
 *   decoder:  in[t] = [embed(y_{t-1}) ; c]  [B, D_E+S],  s[t+1] = g_U(in[t], s[t])  [B, S]
 *   output:   logits = [s_1 ; ... ; s_Tt] W_out + b_out   [Tt*B, V]  (row t*B + b) */
double rnn_seq2seq_train_step(void *self, const Batch *batch, int backward) {
    RnnSeq2Seq *r = self;
    Params *p = &r->params;
    RnnDecoder *dec = &r->dec;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len;
    int D_E = dec->D_E, S = dec->S, I = dec->I;
    size_t hs = (size_t)B * S;

    /* ---- encoder */
    rnn_encoder_forward(&r->enc, p, batch->src, batch->src_lens, B, T);
    const float *context = rnn_encoder_final_h(&r->enc);
    const float *context_c = rnn_encoder_final_c(&r->enc);

    /* ---- decoder, teacher forcing: the input at step t is the true y_{t-1} */
    rnn_decoder_targets(dec, batch);
    memcpy(dec->s, context, sizeof(float) * hs);   /* s_0 = c */
    if (context_c) memcpy(dec->cs, context_c, sizeof(float) * hs);
    /* Exercise 01.decoder (3 points): the decoder's steps, fed [embed(y_{t-1}) ; c]. */
    for (int t = 0; t < Tt; t++) {
        rnn_decoder_embed(dec, p, t, B);
        put_columns(dec->in + (size_t)t * B * I, I, D_E, context, B, S);
        rnn_decoder_cell_forward(dec, p, t, B);
    }
    /* End of exercise 01.decoder. */
    /* ---- output layer and loss (and, with backward, d loss / d s_t into dS) */
    double loss;
    if (!rnn_decoder_loss(dec, p, batch, dec->s + hs, dec->dS, r->logits, r->probs, r->dlogits, backward, &loss))
        return loss;

    /* ---- backward through the decoder's time steps */
    /* Exercise 01.decoder, continued: backward through the decoder's steps, and into the context c. */
    memset(r->dctx, 0, sizeof(float) * hs);
    for (int t = Tt - 1; t >= 0; t--) {
        rnn_decoder_cell_backward(dec, p, t, B);
        /* split d[in] = [d embed ; d context] */
        for (int b = 0; b < B; b++)
            for (int j = 0; j < S; j++) r->dctx[(size_t)b * S + j] += dec->din[(size_t)b * I + D_E + j];
        rnn_decoder_embed_backward(dec, p, t, B);
        state_grads_swap(&dec->g);
    }
    /* the context fed every step and s_0 are the same vector h_T: sum both paths */
    for (size_t i = 0; i < hs; i++) dec->g.dh[i] += r->dctx[i];
    /* End of exercise 01.decoder. */
    rnn_encoder_backward(&r->enc, p, NULL, dec->g.dh, context_c ? dec->g.dc : NULL);
    return loss;
}

/* Decoding. A row's state is [s (S) | c (S, LSTM only)]; the context of each
 * encoded source is kept in r->ctx (and r->ctx_c) for the steps that follow. */
void rnn_seq2seq_encode(void *self, const Batch *b, float *states) {
    RnnSeq2Seq *r = self;
    int B = b->batch, S = r->dec.S, lstm = r->dec.cell == CELL_LSTM;
    rnn_encoder_forward(&r->enc, &r->params, b->src, b->src_lens, B, b->src_len);
    memcpy(r->ctx, rnn_encoder_final_h(&r->enc), sizeof(float) * (size_t)B * S);
    if (lstm) memcpy(r->ctx_c, rnn_encoder_final_c(&r->enc), sizeof(float) * (size_t)B * S);
    decoder_states_pack(states, r->ctx, lstm ? r->ctx_c : NULL, B, S);
}

/* Shapes: n rows; in [n, D_E+S] = [embed(prev) ; c of the row's source];
 * s [n, S] -> s' [n, S] -> logits [n, V]. */
void rnn_seq2seq_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                      float *next, float *logprobs, float *attn) {
    RnnSeq2Seq *r = self;
    RnnDecoder *dec = &r->dec;
    int D_E = dec->D_E, S = dec->S, I = dec->I;
    (void)attn;  /* no attention in chapter 01 */
    rnn_decoder_step_embed(dec, &r->params, prev, n);
    for (int i = 0; i < n; i++)   /* the context of the row's source */
        memcpy(dec->step_in + (size_t)i * I + D_E, r->ctx + (size_t)src_row[i] * S, sizeof(float) * (size_t)S);
    rnn_decoder_step_begin(dec, states, n);
    rnn_decoder_step_cell(dec, &r->params, n);
    rnn_decoder_step_end(dec, &r->params, dec->step_h_next, n, next, logprobs);
}

void rnn_seq2seq_interface(RnnSeq2Seq *r, Seq2Seq *m) {
    *m = (Seq2Seq){.self = r, .params = &r->params, .train_step = rnn_seq2seq_train_step,
                   .encode = rnn_seq2seq_encode, .step = rnn_seq2seq_step, .destroy = rnn_seq2seq_destroy,
                   .state_size = rnn_decoder_state_size(&r->dec), .vocab_size = r->dec.V, .has_attention = 0};
}

int rnn_seq2seq_build(Seq2Seq *m, const Dataset *d, const RnnConfig *c, int max_batch, uint64_t seed) {
    /* its allocations counted against the memory this process may use (train/memory.h) */
    memory_budget_begin("01_rnn_seq2seq", "a smaller --batch, --state or --embed, or shorter examples");
    RnnSeq2Seq *r = xmalloc(sizeof *r);
    int err = rnn_seq2seq_create(r, c, d->src_vocab.size, d->tgt_vocab.size, max_batch, d->max_src_len,
                                 d->max_tgt_len, seed);
    memory_budget_end();
    if (err == 0) rnn_seq2seq_interface(r, m);
    else free(r);
    return err;
}
