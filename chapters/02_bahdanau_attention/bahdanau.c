/* bahdanau.c - chapter 02: additive attention on top of chapter 01's
 * encoder-decoder, forward and hand-written backward (see bahdanau.h).
 *
 * Reading order: the four attention kernels, then encode_sources() (the
 * encoder states h_i and keys W_1 h_i, computed once per sequence), then
 * bahdanau_train_step() (the decoder loop with a new c_t per step, and its
 * backward pass), then encode()/step() for decoding. */
#include "bahdanau.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "util/error.h"
#include "nn/layers.h"
#include "util/util.h"

/* ====================================================== attention kernels */

/* Shapes: keys [B,T,A], query [B,A], v [A], lens [B] -> feat [B,T,A], weights [B,T].
 *   e_i = v . tanh(keys_i + query)   for i < lens[b],   -inf (weight 0) otherwise
 *   a   = softmax(e) */
void additive_attention_forward(float *weights, float *feat, const float *keys, const float *query,
                                const float *v, const int *lens, int B, int T, int A) {
    for (int b = 0; b < B; b++) {
        const float *q = query + (size_t)b * A;
        float *scores = weights + (size_t)b * T;   /* the softmax runs in place */
        for (int i = 0; i < T; i++) {
            if (i >= lens[b]) {
                scores[i] = -INFINITY;
                continue;
            }
            const float *k = keys + ((size_t)b * T + i) * A;
            float *f = feat + ((size_t)b * T + i) * A;
            float e = 0.0f;
            for (int j = 0; j < A; j++) {
                f[j] = tanhf(k[j] + q[j]);
                e += v[j] * f[j];
            }
            scores[i] = e;
        }
        softmax_forward(scores, scores, 1, T);
    }
}

/* Shapes: dweights [B,T] -> dkeys [B,T,A] +=, dquery [B,A] +=, dv [A] +=.
 *   de_i  = softmax backward of dweights           (0 at padded positions)
 *   dv   += de_i * feat_i
 *   dz    = de_i * v * (1 - feat_i^2)              (through the tanh)
 *   dkeys_i += dz,   dquery += dz */
void additive_attention_backward(float *dkeys, float *dquery, float *dv, float *dscores,
                                 const float *dweights, const float *weights, const float *feat,
                                 const float *v, const int *lens, int B, int T, int A) {
    memset(dscores, 0, sizeof(float) * (size_t)B * T);
    softmax_backward(dscores, dweights, weights, B, T);
    for (int b = 0; b < B; b++) {
        float *dq = dquery + (size_t)b * A;
        for (int i = 0; i < lens[b]; i++) {
            float de = dscores[(size_t)b * T + i];
            const float *f = feat + ((size_t)b * T + i) * A;
            float *dk = dkeys + ((size_t)b * T + i) * A;
            for (int j = 0; j < A; j++) {
                dv[j] += de * f[j];
                float dz = de * v[j] * (1.0f - f[j] * f[j]);
                dk[j] += dz;
                dq[j] += dz;
            }
        }
    }
}

/* Shapes: weights [B,T], values [B,T,D] -> context [B,D] = sum_i weights_i values_i */
void attention_context_forward(float *context, const float *weights, const float *values,
                               int B, int T, int D) {
    memset(context, 0, sizeof(float) * (size_t)B * D);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            float w = weights[(size_t)b * T + i];
            if (w == 0.0f) continue;   /* padding */
            const float *val = values + ((size_t)b * T + i) * D;
            float *c = context + (size_t)b * D;
            for (int d = 0; d < D; d++) c[d] += w * val[d];
        }
}

/* Shapes: dcontext [B,D] -> dweights [B,T] +=, dvalues [B,T,D] +=
 *   dweights_i = dcontext . values_i,   dvalues_i += weights_i * dcontext */
void attention_context_backward(float *dweights, float *dvalues, const float *dcontext,
                                const float *weights, const float *values, int B, int T, int D) {
    for (int b = 0; b < B; b++) {
        const float *dc = dcontext + (size_t)b * D;
        for (int i = 0; i < T; i++) {
            const float *val = values + ((size_t)b * T + i) * D;
            float *dval = dvalues + ((size_t)b * T + i) * D;
            float w = weights[(size_t)b * T + i];
            double dot = 0.0;
            for (int d = 0; d < D; d++) {
                dot += (double)dc[d] * val[d];
                dval[d] += w * dc[d];
            }
            dweights[(size_t)b * T + i] += (float)dot;
        }
    }
}

/* Tests only: all the weight on the last real position, a_t = one-hot(lens[b] - 1). */
static void pin_on_last(float *weights, const int *lens, int B, int T) {
    memset(weights, 0, sizeof(float) * (size_t)B * T);
    for (int b = 0; b < B; b++) weights[(size_t)b * T + lens[b] - 1] = 1.0f;
}

/* ================================================================ model */

/* Cell weights as chapter 01: U(-1/sqrt(H), 1/sqrt(H)), LSTM forget bias 1. */
static void init_decoder_cell(CellType cell, float *W_x, float *W_h, float *b, int I, int H, Rng *rng) {
    int G = cell_gates(cell);
    float limit = 1.0f / sqrtf((float)H);
    init_uniform(W_x, (size_t)I * G * H, limit, rng);
    init_uniform(W_h, (size_t)H * G * H, limit, rng);
    init_uniform(b, (size_t)G * H, limit, rng);
    if (cell == CELL_LSTM) init_constant(b + H, (size_t)H, 1.0f);
}

int bahdanau_create(Bahdanau *r, CellType cell, int V_src, int V_tgt, int E, int H, int A,
                    int bidirectional, int max_B, int max_T_src, int max_T_tgt, uint64_t seed) {
    memset(r, 0, sizeof *r);
    r->cell = cell;
    r->V_src = V_src;
    r->V_tgt = V_tgt;
    r->E = E;
    r->H = H;
    r->A = A;
    r->bidirectional = bidirectional;
    r->Hc = bidirectional ? 2 * H : H;
    int G = cell_gates(cell), Hc = r->Hc, I = E + Hc;
    Params *p = &r->params;
    params_init(p);
    rnn_encoder_declare(&r->enc, p, "enc", cell, V_src, E, H);
    if (bidirectional) rnn_encoder_declare(&r->enc_bwd, p, "enc_bwd", cell, V_src, E, H);
    r->dec_emb = params_add(p, "dec.emb", 2, (int[]){V_tgt, E});
    r->dec_W_x = params_add(p, "dec.W_x", 2, (int[]){I, G * H});
    r->dec_W_h = params_add(p, "dec.W_h", 2, (int[]){H, G * H});
    r->dec_b = params_add(p, "dec.b", 1, (int[]){G * H});
    r->out_W = params_add(p, "out.W", 2, (int[]){H, V_tgt});
    r->out_b = params_add(p, "out.b", 1, (int[]){V_tgt});
    r->att_W1 = params_add(p, "att.W_1", 2, (int[]){Hc, A});
    r->att_W2 = params_add(p, "att.W_2", 2, (int[]){H, A});
    r->att_v = params_add(p, "att.v", 1, (int[]){A});
    if (bidirectional) {
        r->bridge_W = params_add(p, "bridge.W_s", 2, (int[]){2 * H, H});
        r->bridge_b = params_add(p, "bridge.b_s", 1, (int[]){H});
    }
    if (params_alloc(p) < 0) return -1;

    Rng rng;
    rng_seed(&rng, seed, 1);
    rnn_encoder_init(&r->enc, p, &rng);
    if (bidirectional) rnn_encoder_init(&r->enc_bwd, p, &rng);
    init_normal(params_data(p, r->dec_emb), (size_t)V_tgt * E, 1.0f / sqrtf((float)E), &rng);
    init_decoder_cell(cell, params_data(p, r->dec_W_x), params_data(p, r->dec_W_h),
                      params_data(p, r->dec_b), I, H, &rng);
    init_xavier(params_data(p, r->out_W), H, V_tgt, &rng);
    init_constant(params_data(p, r->out_b), (size_t)V_tgt, 0.0f);
    init_xavier(params_data(p, r->att_W1), Hc, A, &rng);
    init_xavier(params_data(p, r->att_W2), H, A, &rng);
    init_uniform(params_data(p, r->att_v), (size_t)A, 1.0f / sqrtf((float)A), &rng);
    if (bidirectional) {
        init_xavier(params_data(p, r->bridge_W), 2 * H, H, &rng);
        init_constant(params_data(p, r->bridge_b), (size_t)H, 0.0f);
    }

    /* activations, allocated once */
    rnn_encoder_alloc(&r->enc, max_B, max_T_src);
    if (bidirectional) rnn_encoder_alloc(&r->enc_bwd, max_B, max_T_src);
    r->max_B = max_B;
    r->max_T = max_T_src;
    r->max_Tt = max_T_tgt + 1;  /* + <eos> */
    r->cache_size = cell_cache_size(cell, H);
    size_t BT = (size_t)max_B * max_T_src, BTt = (size_t)max_B * r->max_Tt;
    r->src_rev = xcalloc(BT, sizeof(int));
    r->ann = xcalloc(BT * Hc, sizeof(float));
    r->dann = xcalloc(BT * Hc, sizeof(float));
    r->keys = xcalloc(BT * A, sizeof(float));
    r->dkeys = xcalloc(BT * A, sizeof(float));
    r->dH_fwd = xcalloc(BT * H, sizeof(float));
    r->dH_bwd = xcalloc(BT * H, sizeof(float));
    r->bridge_in = xcalloc((size_t)max_B * 2 * H, sizeof(float));
    r->dbridge_in = xcalloc((size_t)max_B * 2 * H, sizeof(float));
    r->dfinal_fwd = xcalloc((size_t)max_B * H, sizeof(float));
    r->dfinal_bwd = xcalloc((size_t)max_B * H, sizeof(float));
    r->tgt_in = xcalloc(BTt, sizeof(int));
    r->tgt_out = xcalloc(BTt, sizeof(int));
    r->query = xcalloc((size_t)max_B * A, sizeof(float));
    r->dquery = xcalloc((size_t)max_B * A, sizeof(float));
    r->feat = xcalloc(BTt * max_T_src * A, sizeof(float));
    r->attn = xcalloc(BTt * max_T_src, sizeof(float));
    r->dattn = xcalloc(BT, sizeof(float));
    r->dscores = xcalloc(BT, sizeof(float));
    r->ctx = xcalloc((size_t)max_B * Hc, sizeof(float));
    r->dctx = xcalloc((size_t)max_B * Hc, sizeof(float));
    r->in = xcalloc(BTt * I, sizeof(float));
    r->s = xcalloc((size_t)max_B * (r->max_Tt + 1) * H, sizeof(float));
    r->cs = xcalloc((size_t)max_B * (r->max_Tt + 1) * H, sizeof(float));
    r->cache = xcalloc(BTt * r->cache_size, sizeof(float));
    r->logits = xcalloc(BTt * V_tgt, sizeof(float));
    r->probs = xcalloc(BTt * V_tgt, sizeof(float));
    r->dlogits = xcalloc(BTt * V_tgt, sizeof(float));
    r->dS = xcalloc(BTt * H, sizeof(float));
    r->scratch = xcalloc((size_t)max_B * 2 * G * H, sizeof(float));
    r->din = xcalloc((size_t)max_B * I, sizeof(float));
    r->demb = xcalloc((size_t)max_B * E, sizeof(float));
    r->dh = xcalloc((size_t)max_B * H, sizeof(float));
    r->dc = xcalloc((size_t)max_B * H, sizeof(float));
    r->dh_prev = xcalloc((size_t)max_B * H, sizeof(float));
    r->dc_prev = xcalloc((size_t)max_B * H, sizeof(float));
    r->enc_lens = xcalloc((size_t)max_B, sizeof(int));
    r->step_lens = xcalloc((size_t)max_B, sizeof(int));
    r->step_ann = xcalloc(BT * Hc, sizeof(float));
    r->step_keys = xcalloc(BT * A, sizeof(float));
    r->step_feat = xcalloc(BT * A, sizeof(float));
    r->step_attn = xcalloc(BT, sizeof(float));
    r->step_query = xcalloc((size_t)max_B * A, sizeof(float));
    r->step_ctx = xcalloc((size_t)max_B * Hc, sizeof(float));
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

void bahdanau_free(Bahdanau *r) {
    rnn_encoder_free(&r->enc);
    if (r->bidirectional) rnn_encoder_free(&r->enc_bwd);
    free(r->src_rev); free(r->ann); free(r->dann); free(r->keys); free(r->dkeys);
    free(r->dH_fwd); free(r->dH_bwd); free(r->bridge_in); free(r->dbridge_in);
    free(r->dfinal_fwd); free(r->dfinal_bwd); free(r->tgt_in); free(r->tgt_out);
    free(r->query); free(r->dquery); free(r->feat); free(r->attn); free(r->dattn);
    free(r->dscores); free(r->ctx); free(r->dctx); free(r->in); free(r->s); free(r->cs);
    free(r->cache); free(r->logits); free(r->probs); free(r->dlogits); free(r->dS);
    free(r->scratch); free(r->din); free(r->demb); free(r->dh); free(r->dc);
    free(r->dh_prev); free(r->dc_prev); free(r->enc_lens); free(r->step_lens);
    free(r->step_ann); free(r->step_keys); free(r->step_feat); free(r->step_attn);
    free(r->step_query); free(r->step_ctx); free(r->step_in); free(r->step_h); free(r->step_c);
    free(r->step_h_next); free(r->step_c_next); free(r->step_cache); free(r->step_scratch);
    free(r->step_logits);
    params_free(&r->params);
}

void bahdanau_destroy(void *self) {
    bahdanau_free(self);
    free(self);
}


/* Run the encoder(s) over src [B, T] and lay the states out for attention.
 * Shapes: ann [B, T, Hc] row b, position i = h_i = [h_fwd_i ; h_bwd_i]
 *         (zeros at padded positions); keys [B, T, A] = ann W_1;
 *         s[0] [B, H] = s_0 (and cs[0] = c_0 for the LSTM). */
static void encode_sources(Bahdanau *r, const int *src, const int *lens, int B, int T) {
    Params *p = &r->params;
    int H = r->H, Hc = r->Hc;
    size_t hs = (size_t)B * H;
    rnn_encoder_forward(&r->enc, p, src, lens, B, T);
    if (r->bidirectional) {
        /* the backward encoder reads each row's real tokens last to first */
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                r->src_rev[b * T + t] = t < lens[b] ? src[b * T + lens[b] - 1 - t] : PAD_ID;
        rnn_encoder_forward(&r->enc_bwd, p, r->src_rev, lens, B, T);
    }
    memset(r->ann, 0, sizeof(float) * (size_t)B * T * Hc);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < lens[b]; i++) {
            float *h_i = r->ann + ((size_t)b * T + i) * Hc;
            /* enc.h[i+1] is the state after x_i (time-major [T+1, B, H]) */
            memcpy(h_i, r->enc.h + (i + 1) * hs + (size_t)b * H, sizeof(float) * (size_t)H);
            if (r->bidirectional)   /* after reading x_T .. x_i: step lens[b] - i */
                memcpy(h_i + H, r->enc_bwd.h + (lens[b] - i) * hs + (size_t)b * H,
                       sizeof(float) * (size_t)H);
        }
    linear_forward(r->keys, r->ann, params_data(p, r->att_W1), NULL, B * T, Hc, r->A);

    if (!r->bidirectional) {   /* s_0 = h_T, as in chapter 01 */
        memcpy(r->s, rnn_encoder_final_h(&r->enc), sizeof(float) * hs);
        if (r->cell == CELL_LSTM) memcpy(r->cs, rnn_encoder_final_c(&r->enc), sizeof(float) * hs);
    } else {                   /* s_0 = tanh([h_fwd_T ; h_bwd_1] W_s + b_s), c_0 = 0 */
        put_columns(r->bridge_in, 2 * H, 0, rnn_encoder_final_h(&r->enc), B, H);
        put_columns(r->bridge_in, 2 * H, H, rnn_encoder_final_h(&r->enc_bwd), B, H);
        linear_forward(r->s, r->bridge_in, params_data(p, r->bridge_W), params_data(p, r->bridge_b),
                       B, 2 * H, H);
        tanh_forward(r->s, r->s, B * H);
        memset(r->cs, 0, sizeof(float) * hs);
    }
}

/* Backward of encode_sources: from dann [B,T,Hc] and dkeys [B,T,A] (gradients
 * w.r.t. every h_i through the context and through the keys) and ds_0 = dh,
 * dc_0 = dc [B,H], down into the encoders' parameters. */
static void encode_sources_backward(Bahdanau *r, const int *lens, int B, int T) {
    Params *p = &r->params;
    int H = r->H, Hc = r->Hc;
    size_t hs = (size_t)B * H;
    linear_backward(r->dann, params_grad(p, r->att_W1), NULL, r->dkeys, r->ann,
                    params_data(p, r->att_W1), B * T, Hc, r->A);
    /* back to the encoders' time-major layout: dH[t] is d loss / d h[t+1] */
    memset(r->dH_fwd, 0, sizeof(float) * (size_t)T * hs);
    memset(r->dH_bwd, 0, sizeof(float) * (size_t)T * hs);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < lens[b]; i++) {
            const float *dh_i = r->dann + ((size_t)b * T + i) * Hc;
            memcpy(r->dH_fwd + i * hs + (size_t)b * H, dh_i, sizeof(float) * (size_t)H);
            if (r->bidirectional)
                memcpy(r->dH_bwd + (lens[b] - 1 - i) * hs + (size_t)b * H, dh_i + H,
                       sizeof(float) * (size_t)H);
        }
    if (!r->bidirectional) {
        rnn_encoder_backward(&r->enc, p, r->dH_fwd, r->dh, r->cell == CELL_LSTM ? r->dc : NULL);
        return;
    }
    /* through the bridge: s_0 = tanh(bridge_in W_s + b_s) */
    memset(r->dh_prev, 0, sizeof(float) * hs);   /* d(pre-activation) */
    tanh_backward(r->dh_prev, r->dh, r->s, B * H);
    memset(r->dbridge_in, 0, sizeof(float) * hs * 2);
    linear_backward(r->dbridge_in, params_grad(p, r->bridge_W), params_grad(p, r->bridge_b),
                    r->dh_prev, r->bridge_in, params_data(p, r->bridge_W), B, 2 * H, H);
    for (int b = 0; b < B; b++) {
        memcpy(r->dfinal_fwd + (size_t)b * H, r->dbridge_in + (size_t)b * 2 * H, sizeof(float) * (size_t)H);
        memcpy(r->dfinal_bwd + (size_t)b * H, r->dbridge_in + (size_t)b * 2 * H + H,
               sizeof(float) * (size_t)H);
    }
    rnn_encoder_backward(&r->enc, p, r->dH_fwd, r->dfinal_fwd, NULL);
    rnn_encoder_backward(&r->enc_bwd, p, r->dH_bwd, r->dfinal_bwd, NULL);
}

/* One training (or evaluation) pass over a batch.
 * Shapes: B sequences; source T; target Tt steps (with <eos>); E embed; H
 * decoder state; Hc encoder state; A attention size.
 *   encoder:  ann [B, T, Hc] the h_i,  keys [B, T, A] = ann W_1
 *   step t:   query = s_{t-1} W_2 [B, A]
 *             a_t [B, T] = softmax(v . tanh(keys + query)),  c_t [B, Hc] = sum_i a_{t,i} h_i
 *             in[t] = [embed(y_{t-1}) ; c_t] [B, E+Hc],  s_t = g_U(in[t], s_{t-1}) [B, H]
 *   output:   logits = S W_out + b_out  [Tt*B, V]  (row t*B + b) */
double bahdanau_train_step(void *self, const Batch *batch, int backward) {
    Bahdanau *r = self;
    Params *p = &r->params;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len;
    int E = r->E, H = r->H, Hc = r->Hc, A = r->A, V = r->V_tgt, I = E + Hc;
    const int *lens = batch->src_lens;
    size_t hs = (size_t)B * H;
    int lstm = r->cell == CELL_LSTM;

    /* ---- encoder, and the keys W_1 h_i once per sequence */
    encode_sources(r, batch->src, lens, B, T);

    /* ---- decoder, teacher forcing; a new context c_t at every step */
    for (int t = 0; t < Tt; t++)
        for (int b = 0; b < B; b++) {
            r->tgt_in[t * B + b] = batch->tgt_in[b * Tt + t];
            r->tgt_out[t * B + b] = batch->tgt_out[b * Tt + t];
        }
    for (int t = 0; t < Tt; t++) {
        const float *s_prev = r->s + t * hs;
        float *a_t = r->attn + (size_t)t * B * T;
        float *in = r->in + (size_t)t * B * I;
        if (r->pin_last) {
            pin_on_last(a_t, lens, B, T);
        } else {
            linear_forward(r->query, s_prev, params_data(p, r->att_W2), NULL, B, H, A);
            additive_attention_forward(a_t, r->feat + (size_t)t * B * T * A, r->keys, r->query,
                                       params_data(p, r->att_v), lens, B, T, A);
        }
        attention_context_forward(r->ctx, a_t, r->ann, B, T, Hc);
        embedding_forward(r->demb, r->tgt_in + t * B, params_data(p, r->dec_emb), B, E);
        put_columns(in, I, 0, r->demb, B, E);
        put_columns(in, I, E, r->ctx, B, Hc);
        cell_forward(r->cell, r->s + (t + 1) * hs, lstm ? r->cs + (t + 1) * hs : NULL,
                     r->cache + (size_t)t * B * r->cache_size, r->scratch, in, s_prev,
                     lstm ? r->cs + t * hs : NULL, params_data(p, r->dec_W_x),
                     params_data(p, r->dec_W_h), params_data(p, r->dec_b), NULL, B, I, H);
    }
    /* ---- output layer and loss: chapter 01's (with backward, d loss / d s_t into dS) */
    int n_tokens = 0;
    double loss = output_layer_loss(p, r->out_W, r->out_b, r->s + hs, r->tgt_out, Tt * B, H, V,
                                    r->logits, r->probs, r->dlogits, r->dS, backward, &n_tokens);
    if (!backward || n_tokens == 0) return loss;

    /* ---- backward through the decoder's time steps */
    memset(r->dh, 0, sizeof(float) * hs);
    memset(r->dc, 0, sizeof(float) * hs);
    memset(r->dann, 0, sizeof(float) * (size_t)B * T * Hc);
    memset(r->dkeys, 0, sizeof(float) * (size_t)B * T * A);
    for (int t = Tt - 1; t >= 0; t--) {
        const float *s_prev = r->s + t * hs;
        const float *a_t = r->attn + (size_t)t * B * T;
        for (size_t i = 0; i < hs; i++) r->dh[i] += r->dS[(size_t)t * hs + i];
        memset(r->din, 0, sizeof(float) * (size_t)B * I);
        memset(r->dh_prev, 0, sizeof(float) * hs);
        memset(r->dc_prev, 0, sizeof(float) * hs);
        cell_backward(r->cell, r->din, r->dh_prev, lstm ? r->dc_prev : NULL,
                      params_grad(p, r->dec_W_x), params_grad(p, r->dec_W_h), params_grad(p, r->dec_b),
                      r->dh, lstm ? r->dc : NULL, r->cache + (size_t)t * B * r->cache_size,
                      r->scratch, r->in + (size_t)t * B * I, s_prev, lstm ? r->cs + t * hs : NULL,
                      params_data(p, r->dec_W_x), params_data(p, r->dec_W_h), NULL, B, I, H);
        /* split d[in] = [d embed ; d c_t] */
        for (int b = 0; b < B; b++) {
            memcpy(r->demb + (size_t)b * E, r->din + (size_t)b * I, sizeof(float) * (size_t)E);
            memcpy(r->dctx + (size_t)b * Hc, r->din + (size_t)b * I + E, sizeof(float) * (size_t)Hc);
        }
        embedding_backward(params_grad(p, r->dec_emb), r->demb, r->tgt_in + t * B, B, E);
        /* c_t = sum_i a_{t,i} h_i: gradient to the weights and to every h_i */
        memset(r->dattn, 0, sizeof(float) * (size_t)B * T);
        attention_context_backward(r->dattn, r->dann, r->dctx, a_t, r->ann, B, T, Hc);
        if (!r->pin_last) {
            /* a_t = softmax(v . tanh(keys + s_{t-1} W_2)): to the keys, v, and s_{t-1} */
            memset(r->dquery, 0, sizeof(float) * (size_t)B * A);
            additive_attention_backward(r->dkeys, r->dquery, params_grad(p, r->att_v), r->dscores,
                                        r->dattn, a_t, r->feat + (size_t)t * B * T * A,
                                        params_data(p, r->att_v), lens, B, T, A);
            linear_backward(r->dh_prev, params_grad(p, r->att_W2), NULL, r->dquery, s_prev,
                            params_data(p, r->att_W2), B, H, A);
        }
        float *swap = r->dh; r->dh = r->dh_prev; r->dh_prev = swap;
        swap = r->dc; r->dc = r->dc_prev; r->dc_prev = swap;
    }
    /* now dh = d loss / d s_0 (dc = d loss / d c_0): into the encoders */
    encode_sources_backward(r, lens, B, T);
    return loss;
}

/* Decoding. A row's state is [s (H) | c (H, LSTM only)]. encode() keeps the
 * encoder states ann, the keys and the lengths of the batch in the model. */
void bahdanau_encode(void *self, const Batch *b, float *states) {
    Bahdanau *r = self;
    int B = b->batch, H = r->H, lstm = r->cell == CELL_LSTM;
    encode_sources(r, b->src, b->src_lens, B, b->src_len);
    r->enc_B = B;
    r->enc_T = b->src_len;
    memcpy(r->enc_lens, b->src_lens, sizeof(int) * (size_t)B);
    decoder_states_pack(states, r->s, lstm ? r->cs : NULL, B, H);
}

/* One decoder step for n rows; row i continues source src_row[i] of the last
 * encode(). The same computation as one time step of bahdanau_train_step.
 * Shapes: gathered ann [n, T, Hc] and keys [n, T, A]; query [n, A];
 * a_t [n, T] (written to attn when not NULL); c_t [n, Hc]; in [n, E+Hc];
 * s [n, H] -> s' [n, H] -> logits [n, V]. */
void bahdanau_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                   float *next, float *logprobs, float *attn) {
    Bahdanau *r = self;
    Params *p = &r->params;
    int E = r->E, H = r->H, Hc = r->Hc, A = r->A, I = E + Hc, T = r->enc_T;
    int lstm = r->cell == CELL_LSTM;
    for (int i = 0; i < n; i++) {   /* each row's source */
        int src = src_row[i];
        r->step_lens[i] = r->enc_lens[src];
        memcpy(r->step_ann + (size_t)i * T * Hc, r->ann + (size_t)src * T * Hc, sizeof(float) * (size_t)T * Hc);
        memcpy(r->step_keys + (size_t)i * T * A, r->keys + (size_t)src * T * A, sizeof(float) * (size_t)T * A);
    }
    decoder_states_unpack(r->step_h, lstm ? r->step_c : NULL, states, n, H);
    if (r->pin_last) {
        pin_on_last(r->step_attn, r->step_lens, n, T);
    } else {
        linear_forward(r->step_query, r->step_h, params_data(p, r->att_W2), NULL, n, H, A);
        additive_attention_forward(r->step_attn, r->step_feat, r->step_keys, r->step_query,
                                   params_data(p, r->att_v), r->step_lens, n, T, A);
    }
    if (attn) memcpy(attn, r->step_attn, sizeof(float) * (size_t)n * T);
    attention_context_forward(r->step_ctx, r->step_attn, r->step_ann, n, T, Hc);
    embedding_forward(r->demb, prev, params_data(p, r->dec_emb), n, E);
    put_columns(r->step_in, I, 0, r->demb, n, E);
    put_columns(r->step_in, I, E, r->step_ctx, n, Hc);
    cell_forward(r->cell, r->step_h_next, lstm ? r->step_c_next : NULL, r->step_cache, r->step_scratch,
                 r->step_in, r->step_h, lstm ? r->step_c : NULL, params_data(p, r->dec_W_x),
                 params_data(p, r->dec_W_h), params_data(p, r->dec_b), NULL, n, I, H);
    decoder_states_pack(next, r->step_h_next, lstm ? r->step_c_next : NULL, n, H);
    linear_forward(r->step_logits, r->step_h_next, params_data(p, r->out_W), params_data(p, r->out_b),
                   n, H, r->V_tgt);
    log_softmax_forward(logprobs, r->step_logits, n, r->V_tgt);
}

void bahdanau_interface(Bahdanau *r, Seq2Seq *m) {
    memset(m, 0, sizeof *m);
    m->self = r;
    m->params = &r->params;
    m->train_step = bahdanau_train_step;
    m->encode = bahdanau_encode;
    m->step = bahdanau_step;
    m->destroy = bahdanau_destroy;
    m->state_size = r->cell == CELL_LSTM ? 2 * r->H : r->H;
    m->vocab_size = r->V_tgt;
    m->has_attention = 1;
}

int bahdanau_build(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    char cell_name[16];
    int E, H, A, bidirectional;
    CellType cell;
    if (config_get(config, "cell", cell_name, sizeof cell_name) < 0 ||
        config_get_int(config, "embed", &E) < 0 || config_get_int(config, "hidden", &H) < 0 ||
        config_get_int(config, "attn", &A) < 0 ||
        config_get_int(config, "bidirectional", &bidirectional) < 0)
        return -1;
    if (cell_type_parse(cell_name, &cell) < 0) return -1;
    if (E < 1 || E > 4096 || H < 1 || H > 4096 || A < 1 || A > 4096)
        return fail("model sizes out of range: embed %d, hidden %d, attn %d (expected 1..4096)", E, H, A);
    Bahdanau *r = xmalloc(sizeof *r);
    if (bahdanau_create(r, cell, d->src_vocab.size, d->tgt_vocab.size, E, H, A, bidirectional != 0,
                        max_batch, d->max_src_len, d->max_tgt_len, seed) < 0) {
        free(r);
        return -1;
    }
    bahdanau_interface(r, m);
    return 0;
}
