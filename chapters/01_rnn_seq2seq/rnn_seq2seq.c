/* rnn_seq2seq.c - chapter 01: the RNN encoder-decoder, forward and the
 * hand-written backward pass through time (see rnn_seq2seq.h). */
#include "rnn_seq2seq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "util/error.h"
#include "nn/layers.h"
#include "util/util.h"

/* ================================================================= encoder */

void rnn_encoder_declare(RnnEncoder *enc, Params *p, const char *prefix, CellType cell,
                         int V, int E, int H) {
    memset(enc, 0, sizeof *enc);
    enc->cell = cell;
    enc->V = V;
    enc->E = E;
    enc->H = H;
    int G = cell_gates(cell);
    char name[PARAMS_NAME_LEN];
    snprintf(name, sizeof name, "%s.emb", prefix);
    enc->emb = params_add(p, name, 2, (int[]){V, E});
    snprintf(name, sizeof name, "%s.W_x", prefix);
    enc->W_x = params_add(p, name, 2, (int[]){E, G * H});
    snprintf(name, sizeof name, "%s.W_h", prefix);
    enc->W_h = params_add(p, name, 2, (int[]){H, G * H});
    snprintf(name, sizeof name, "%s.b", prefix);
    enc->b = params_add(p, name, 1, (int[]){G * H});
}

/* Cell weights: U(-1/sqrt(H), 1/sqrt(H)) as in PyTorch; an LSTM's forget-gate
 * bias starts at 1 so that early on the cell remembers by default. */
static void init_cell_weights(CellType cell, float *W_x, float *W_h, float *b, int I, int H, Rng *rng) {
    int G = cell_gates(cell);
    float limit = 1.0f / sqrtf((float)H);
    init_uniform(W_x, (size_t)I * G * H, limit, rng);
    init_uniform(W_h, (size_t)H * G * H, limit, rng);
    init_uniform(b, (size_t)G * H, limit, rng);
    if (cell == CELL_LSTM) init_constant(b + H, (size_t)H, 1.0f);
}

void rnn_encoder_init(RnnEncoder *enc, Params *p, Rng *rng) {
    init_normal(params_data(p, enc->emb), (size_t)enc->V * enc->E, 1.0f / sqrtf((float)enc->E), rng);
    init_cell_weights(enc->cell, params_data(p, enc->W_x), params_data(p, enc->W_h),
                      params_data(p, enc->b), enc->E, enc->H, rng);
}

void rnn_encoder_alloc(RnnEncoder *enc, int max_B, int max_T) {
    int E = enc->E, H = enc->H, G = cell_gates(enc->cell);
    enc->max_B = max_B;
    enc->max_T = max_T;
    enc->cache_size = cell_cache_size(enc->cell, H);
    size_t BT = (size_t)max_B * max_T;
    enc->ids = xcalloc(BT, sizeof(int));
    enc->mask = xcalloc(BT, sizeof(int));
    enc->x = xcalloc(BT * E, sizeof(float));
    enc->h = xcalloc((size_t)max_B * (max_T + 1) * H, sizeof(float));
    enc->c = cell_has_c(enc->cell) ? xcalloc((size_t)max_B * (max_T + 1) * H, sizeof(float)) : NULL;
    enc->cache = xcalloc(BT * enc->cache_size, sizeof(float));
    enc->scratch = xcalloc((size_t)max_B * 2 * G * H, sizeof(float));
    enc->dx = xcalloc((size_t)max_B * E, sizeof(float));
    enc->dh = xcalloc((size_t)max_B * H, sizeof(float));
    enc->dc = xcalloc((size_t)max_B * H, sizeof(float));
    enc->dh_prev = xcalloc((size_t)max_B * H, sizeof(float));
    enc->dc_prev = xcalloc((size_t)max_B * H, sizeof(float));
}

void rnn_encoder_free(RnnEncoder *enc) {
    free(enc->ids); free(enc->mask); free(enc->x); free(enc->h); free(enc->c);
    free(enc->cache); free(enc->scratch); free(enc->dx);
    free(enc->dh); free(enc->dc); free(enc->dh_prev); free(enc->dc_prev);
}

float *rnn_encoder_final_h(RnnEncoder *enc) { return enc->h + (size_t)enc->T * enc->B * enc->H; }
float *rnn_encoder_final_c(RnnEncoder *enc) {
    return enc->c ? enc->c + (size_t)enc->T * enc->B * enc->H : NULL;
}

/* Shapes: src[B,T] -> x[t] [B,E] -> h[t+1] [B,H] for t = 0..T-1. */
void rnn_encoder_forward(RnnEncoder *enc, Params *p, const int *src, const int *lens, int B, int T) {
    int E = enc->E, H = enc->H;
    enc->B = B;
    enc->T = T;
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++) {
            enc->ids[t * B + b] = src[b * T + t];
            enc->mask[t * B + b] = t < lens[b];
        }
    memset(enc->h, 0, sizeof(float) * (size_t)B * H);   /* h_0 = 0 */
    if (enc->c) memset(enc->c, 0, sizeof(float) * (size_t)B * H);
    embedding_forward(enc->x, enc->ids, params_data(p, enc->emb), B * T, E);
    for (int t = 0; t < T; t++) {
        size_t hs = (size_t)B * H;
        cell_forward(enc->cell, enc->h + (t + 1) * hs, enc->c ? enc->c + (t + 1) * hs : NULL,
                     enc->cache + (size_t)t * B * enc->cache_size, enc->scratch,
                     enc->x + (size_t)t * B * E, enc->h + t * hs, enc->c ? enc->c + t * hs : NULL,
                     params_data(p, enc->W_x), params_data(p, enc->W_h), params_data(p, enc->b),
                     enc->mask + t * B, B, E, H);
    }
}

void rnn_encoder_backward(RnnEncoder *enc, Params *p, const float *dH,
                          const float *dh_final, const float *dc_final) {
    int B = enc->B, T = enc->T, E = enc->E, H = enc->H;
    size_t hs = (size_t)B * H;
    memcpy(enc->dh, dh_final, sizeof(float) * hs);
    if (enc->c) {
        if (dc_final) memcpy(enc->dc, dc_final, sizeof(float) * hs);
        else memset(enc->dc, 0, sizeof(float) * hs);
    }
    for (int t = T - 1; t >= 0; t--) {
        if (dH)  /* gradient arriving directly at h[t+1] from later layers */
            for (size_t i = 0; i < hs; i++) enc->dh[i] += dH[(size_t)t * hs + i];
        memset(enc->dx, 0, sizeof(float) * (size_t)B * E);
        memset(enc->dh_prev, 0, sizeof(float) * hs);
        if (enc->c) memset(enc->dc_prev, 0, sizeof(float) * hs);
        cell_backward(enc->cell, enc->dx, enc->dh_prev, enc->c ? enc->dc_prev : NULL,
                      params_grad(p, enc->W_x), params_grad(p, enc->W_h), params_grad(p, enc->b),
                      enc->dh, enc->c ? enc->dc : NULL, enc->cache + (size_t)t * B * enc->cache_size,
                      enc->scratch, enc->x + (size_t)t * B * E, enc->h + t * hs,
                      enc->c ? enc->c + t * hs : NULL, params_data(p, enc->W_x),
                      params_data(p, enc->W_h), enc->mask + t * B, B, E, H);
        embedding_backward(params_grad(p, enc->emb), enc->dx, enc->ids + t * B, B, E);
        float *swap = enc->dh; enc->dh = enc->dh_prev; enc->dh_prev = swap;
        swap = enc->dc; enc->dc = enc->dc_prev; enc->dc_prev = swap;
    }
}

/* ================================================================= seq2seq */

int rnn_seq2seq_create(RnnSeq2Seq *r, CellType cell, int V_src, int V_tgt, int E, int H,
                       int max_B, int max_T_src, int max_T_tgt, uint64_t seed) {
    memset(r, 0, sizeof *r);
    r->cell = cell;
    r->V_src = V_src;
    r->V_tgt = V_tgt;
    r->E = E;
    r->H = H;
    int G = cell_gates(cell), I = E + H;
    params_init(&r->params);
    rnn_encoder_declare(&r->enc, &r->params, "enc", cell, V_src, E, H);
    r->dec_emb = params_add(&r->params, "dec.emb", 2, (int[]){V_tgt, E});
    r->dec_W_x = params_add(&r->params, "dec.W_x", 2, (int[]){I, G * H});
    r->dec_W_h = params_add(&r->params, "dec.W_h", 2, (int[]){H, G * H});
    r->dec_b = params_add(&r->params, "dec.b", 1, (int[]){G * H});
    r->out_W = params_add(&r->params, "out.W", 2, (int[]){H, V_tgt});
    r->out_b = params_add(&r->params, "out.b", 1, (int[]){V_tgt});
    if (params_alloc(&r->params) < 0) return -1;

    Rng rng;
    rng_seed(&rng, seed, 1);
    rnn_encoder_init(&r->enc, &r->params, &rng);
    init_normal(params_data(&r->params, r->dec_emb), (size_t)V_tgt * E, 1.0f / sqrtf((float)E), &rng);
    init_cell_weights(cell, params_data(&r->params, r->dec_W_x), params_data(&r->params, r->dec_W_h),
                      params_data(&r->params, r->dec_b), I, H, &rng);
    init_xavier(params_data(&r->params, r->out_W), H, V_tgt, &rng);
    init_constant(params_data(&r->params, r->out_b), (size_t)V_tgt, 0.0f);

    rnn_encoder_alloc(&r->enc, max_B, max_T_src);
    r->max_B = max_B;
    r->max_Tt = max_T_tgt + 1;  /* + <eos> */
    r->cache_size = cell_cache_size(cell, H);
    size_t BT = (size_t)max_B * r->max_Tt;
    r->tgt_in = xcalloc(BT, sizeof(int));
    r->tgt_out = xcalloc(BT, sizeof(int));
    r->in = xcalloc(BT * I, sizeof(float));
    r->s = xcalloc((size_t)max_B * (r->max_Tt + 1) * H, sizeof(float));
    r->cs = xcalloc((size_t)max_B * (r->max_Tt + 1) * H, sizeof(float));
    r->cache = xcalloc(BT * r->cache_size, sizeof(float));
    r->logits = xcalloc(BT * V_tgt, sizeof(float));
    r->probs = xcalloc(BT * V_tgt, sizeof(float));
    r->dlogits = xcalloc(BT * V_tgt, sizeof(float));
    r->dS = xcalloc(BT * H, sizeof(float));
    r->scratch = xcalloc((size_t)max_B * 2 * G * H, sizeof(float));
    r->din = xcalloc((size_t)max_B * I, sizeof(float));
    r->demb = xcalloc((size_t)max_B * E, sizeof(float));
    r->dh = xcalloc((size_t)max_B * H, sizeof(float));
    r->dc = xcalloc((size_t)max_B * H, sizeof(float));
    r->dh_prev = xcalloc((size_t)max_B * H, sizeof(float));
    r->dc_prev = xcalloc((size_t)max_B * H, sizeof(float));
    r->dctx = xcalloc((size_t)max_B * H, sizeof(float));
    r->ctx = xcalloc((size_t)max_B * H, sizeof(float));
    r->ctx_c = xcalloc((size_t)max_B * H, sizeof(float));
    r->step_in = xcalloc((size_t)max_B * I, sizeof(float));
    r->step_h = xcalloc((size_t)max_B * H, sizeof(float));
    r->step_c = xcalloc((size_t)max_B * H, sizeof(float));
    r->step_h_next = xcalloc((size_t)max_B * H, sizeof(float));
    r->step_c_next = xcalloc((size_t)max_B * H, sizeof(float));
    r->step_cache = xcalloc((size_t)max_B * r->cache_size, sizeof(float));
    r->step_scratch = xcalloc((size_t)max_B * 2 * G * H, sizeof(float));
    r->step_logits = xcalloc((size_t)max_B * V_tgt, sizeof(float));
    return 0;
}

void rnn_seq2seq_free(RnnSeq2Seq *r) {
    rnn_encoder_free(&r->enc);
    free(r->tgt_in); free(r->tgt_out); free(r->in); free(r->s); free(r->cs); free(r->cache);
    free(r->logits); free(r->probs); free(r->dlogits); free(r->dS); free(r->scratch);
    free(r->din); free(r->demb); free(r->dh); free(r->dc); free(r->dh_prev); free(r->dc_prev);
    free(r->dctx); free(r->ctx); free(r->ctx_c); free(r->step_in); free(r->step_cache);
    free(r->step_h); free(r->step_c); free(r->step_h_next); free(r->step_c_next);
    free(r->step_scratch); free(r->step_logits);
    params_free(&r->params);
}

void rnn_seq2seq_destroy(void *self) {
    rnn_seq2seq_free(self);
    free(self);
}

void put_columns(float *dst, int width, int offset, const float *src, int B, int D) {
    for (int b = 0; b < B; b++)
        memcpy(dst + (size_t)b * width + offset, src + (size_t)b * D, sizeof(float) * (size_t)D);
}

void decoder_states_pack(float *states, const float *h, const float *c, int n, int H) {
    int S = c ? 2 * H : H;
    for (int i = 0; i < n; i++) {
        memcpy(states + (size_t)i * S, h + (size_t)i * H, sizeof(float) * (size_t)H);
        if (c) memcpy(states + (size_t)i * S + H, c + (size_t)i * H, sizeof(float) * (size_t)H);
    }
}

void decoder_states_unpack(float *h, float *c, const float *states, int n, int H) {
    int S = c ? 2 * H : H;
    for (int i = 0; i < n; i++) {
        memcpy(h + (size_t)i * H, states + (size_t)i * S, sizeof(float) * (size_t)H);
        if (c) memcpy(c + (size_t)i * H, states + (size_t)i * S + H, sizeof(float) * (size_t)H);
    }
}

double output_layer_loss(Params *p, size_t out_W, size_t out_b, const float *top, const int *targets,
                         int N, int H, int V, float *logits, float *probs, float *dlogits, float *dtop,
                         int backward, int *n_tokens) {
    linear_forward(logits, top, params_data(p, out_W), params_data(p, out_b), N, H, V);
    *n_tokens = 0;
    double loss_sum = cross_entropy_forward(probs, logits, targets, N, V, PAD_ID, n_tokens);
    double loss = *n_tokens ? loss_sum / *n_tokens : 0.0;
    if (!backward || *n_tokens == 0) return loss;
    memset(dlogits, 0, sizeof(float) * (size_t)N * V);
    cross_entropy_backward(dlogits, probs, targets, N, V, PAD_ID, 1.0f / (float)*n_tokens);
    memset(dtop, 0, sizeof(float) * (size_t)N * H);
    linear_backward(dtop, params_grad(p, out_W), params_grad(p, out_b), dlogits, top,
                    params_data(p, out_W), N, H, V);
    return loss;
}

/* One training (or evaluation) pass over a batch.
 * Shapes: B sequences; source T; target Tt steps (with <eos>); E embed; H state.
 *   encoder:  h[1..T]  [T, B, H], context c = h_T  [B, H]
 *   decoder:  in[t] = [embed(y_{t-1}) ; c]  [B, E+H],  s[t+1] = g_U(in[t], s[t])  [B, H]
 *   output:   logits = S W_out + b_out   [Tt*B, V]  (row t*B + b) */
double rnn_seq2seq_train_step(void *self, const Batch *batch, int backward) {
    RnnSeq2Seq *r = self;
    Params *p = &r->params;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len;
    int E = r->E, H = r->H, V = r->V_tgt, I = E + H;
    size_t hs = (size_t)B * H;

    /* ---- encoder */
    rnn_encoder_forward(&r->enc, p, batch->src, batch->src_lens, B, T);
    const float *context = rnn_encoder_final_h(&r->enc);
    const float *context_c = rnn_encoder_final_c(&r->enc);

    /* ---- decoder, teacher forcing: the input at step t is the true y_{t-1} */
    for (int t = 0; t < Tt; t++)
        for (int b = 0; b < B; b++) {
            r->tgt_in[t * B + b] = batch->tgt_in[b * Tt + t];
            r->tgt_out[t * B + b] = batch->tgt_out[b * Tt + t];
        }
    memcpy(r->s, context, sizeof(float) * hs);   /* s_0 = c */
    if (context_c) memcpy(r->cs, context_c, sizeof(float) * hs);
    for (int t = 0; t < Tt; t++) {
        float *in = r->in + (size_t)t * B * I;
        embedding_forward(r->demb, r->tgt_in + t * B, params_data(p, r->dec_emb), B, E);
        put_columns(in, I, 0, r->demb, B, E);
        put_columns(in, I, E, context, B, H);
        cell_forward(r->cell, r->s + (t + 1) * hs, context_c ? r->cs + (t + 1) * hs : NULL,
                     r->cache + (size_t)t * B * r->cache_size, r->scratch, in, r->s + t * hs,
                     context_c ? r->cs + t * hs : NULL, params_data(p, r->dec_W_x),
                     params_data(p, r->dec_W_h), params_data(p, r->dec_b), NULL, B, I, H);
    }
    /* ---- output layer and loss (and, with backward, d loss / d s_t into dS) */
    int n_tokens = 0;
    double loss = output_layer_loss(p, r->out_W, r->out_b, r->s + hs, r->tgt_out, Tt * B, H, V,
                                    r->logits, r->probs, r->dlogits, r->dS, backward, &n_tokens);
    if (!backward || n_tokens == 0) return loss;

    /* ---- backward through the decoder's time steps */
    memset(r->dh, 0, sizeof(float) * hs);
    memset(r->dc, 0, sizeof(float) * hs);
    memset(r->dctx, 0, sizeof(float) * hs);
    for (int t = Tt - 1; t >= 0; t--) {
        for (size_t i = 0; i < hs; i++) r->dh[i] += r->dS[(size_t)t * hs + i];
        memset(r->din, 0, sizeof(float) * (size_t)B * I);
        memset(r->dh_prev, 0, sizeof(float) * hs);
        memset(r->dc_prev, 0, sizeof(float) * hs);
        cell_backward(r->cell, r->din, r->dh_prev, context_c ? r->dc_prev : NULL,
                      params_grad(p, r->dec_W_x), params_grad(p, r->dec_W_h), params_grad(p, r->dec_b),
                      r->dh, context_c ? r->dc : NULL, r->cache + (size_t)t * B * r->cache_size,
                      r->scratch, r->in + (size_t)t * B * I, r->s + t * hs,
                      context_c ? r->cs + t * hs : NULL, params_data(p, r->dec_W_x),
                      params_data(p, r->dec_W_h), NULL, B, I, H);
        /* split d[in] = [d embed ; d context] */
        for (int b = 0; b < B; b++) {
            memcpy(r->demb + (size_t)b * E, r->din + (size_t)b * I, sizeof(float) * (size_t)E);
            for (int j = 0; j < H; j++) r->dctx[(size_t)b * H + j] += r->din[(size_t)b * I + E + j];
        }
        embedding_backward(params_grad(p, r->dec_emb), r->demb, r->tgt_in + t * B, B, E);
        float *swap = r->dh; r->dh = r->dh_prev; r->dh_prev = swap;
        swap = r->dc; r->dc = r->dc_prev; r->dc_prev = swap;
    }
    /* the context fed every step and s_0 are the same vector h_T: sum both paths */
    for (size_t i = 0; i < hs; i++) r->dh[i] += r->dctx[i];
    rnn_encoder_backward(&r->enc, p, NULL, r->dh, context_c ? r->dc : NULL);
    return loss;
}

/* Decoding. A row's state is [s (H) | c (H, LSTM only)]; the context of each
 * encoded source is kept in r->ctx (and r->ctx_c) for the steps that follow. */
void rnn_seq2seq_encode(void *self, const Batch *b, float *states) {
    RnnSeq2Seq *r = self;
    int B = b->batch, H = r->H, lstm = r->cell == CELL_LSTM;
    rnn_encoder_forward(&r->enc, &r->params, b->src, b->src_lens, B, b->src_len);
    memcpy(r->ctx, rnn_encoder_final_h(&r->enc), sizeof(float) * (size_t)B * H);
    if (lstm) memcpy(r->ctx_c, rnn_encoder_final_c(&r->enc), sizeof(float) * (size_t)B * H);
    decoder_states_pack(states, r->ctx, lstm ? r->ctx_c : NULL, B, H);
}

/* Shapes: n rows; in [n, E+H] = [embed(prev) ; c of the row's source];
 * s [n, H] -> s' [n, H] -> logits [n, V]. */
void rnn_seq2seq_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                      float *next, float *logprobs, float *attn) {
    RnnSeq2Seq *r = self;
    Params *p = &r->params;
    int E = r->E, H = r->H, I = E + H, lstm = r->cell == CELL_LSTM;
    (void)attn;  /* no attention in chapter 01 */
    embedding_forward(r->demb, prev, params_data(p, r->dec_emb), n, E);
    put_columns(r->step_in, I, 0, r->demb, n, E);
    for (int i = 0; i < n; i++)   /* the context of the row's source */
        memcpy(r->step_in + (size_t)i * I + E, r->ctx + (size_t)src_row[i] * H, sizeof(float) * (size_t)H);
    decoder_states_unpack(r->step_h, lstm ? r->step_c : NULL, states, n, H);
    cell_forward(r->cell, r->step_h_next, lstm ? r->step_c_next : NULL, r->step_cache, r->step_scratch,
                 r->step_in, r->step_h, lstm ? r->step_c : NULL, params_data(p, r->dec_W_x),
                 params_data(p, r->dec_W_h), params_data(p, r->dec_b), NULL, n, I, H);
    decoder_states_pack(next, r->step_h_next, lstm ? r->step_c_next : NULL, n, H);
    linear_forward(r->step_logits, r->step_h_next, params_data(p, r->out_W), params_data(p, r->out_b), n, H, r->V_tgt);
    log_softmax_forward(logprobs, r->step_logits, n, r->V_tgt);
}

void rnn_seq2seq_interface(RnnSeq2Seq *r, Seq2Seq *m) {
    memset(m, 0, sizeof *m);
    m->self = r;
    m->params = &r->params;
    m->train_step = rnn_seq2seq_train_step;
    m->encode = rnn_seq2seq_encode;
    m->step = rnn_seq2seq_step;
    m->destroy = rnn_seq2seq_destroy;
    m->state_size = r->cell == CELL_LSTM ? 2 * r->H : r->H;
    m->vocab_size = r->V_tgt;
    m->has_attention = 0;
}

int rnn_seq2seq_build(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    char cell_name[16];
    int E, H;
    CellType cell;
    if (config_get(config, "cell", cell_name, sizeof cell_name) < 0 ||
        config_get_int(config, "embed", &E) < 0 || config_get_int(config, "hidden", &H) < 0)
        return -1;
    if (cell_type_parse(cell_name, &cell) < 0) return -1;
    if (E < 1 || E > 4096 || H < 1 || H > 4096)
        return fail("model sizes out of range: embed %d, hidden %d (expected 1..4096)", E, H);
    RnnSeq2Seq *r = xmalloc(sizeof *r);
    if (rnn_seq2seq_create(r, cell, d->src_vocab.size, d->tgt_vocab.size, E, H, max_batch,
                           d->max_src_len, d->max_tgt_len, seed) < 0) {
        free(r);
        return -1;
    }
    rnn_seq2seq_interface(r, m);
    return 0;
}
