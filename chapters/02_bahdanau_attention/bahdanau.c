/* bahdanau.c - chapter 02: additive attention on top of chapter 01's
 * encoder-decoder, forward and hand-written backward (see bahdanau.h).
 *
 * Reading order: the four attention kernels, encoder_states_to_rows() (the
 * encoder states laid out one source per row, also used by chapter 03), then
 * encode_sources() (the encoder states h_i and keys W_1 h_i, computed once
 * per sequence), then bahdanau_train_step() (the decoder loop with a new c_t
 * per step on chapter 01's RnnDecoder, and its backward pass), then
 * encode()/step() for decoding. */
#include "bahdanau.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "nn/layers.h"
#include "util/util.h"
#include "train/memory.h"

/* ====================================================== attention kernels */

/* Shapes: keys [B,T,D_A], query [B,D_A], v [D_A], lens [B] -> feat [B,T,D_A], weights [B,T].
 *   e_i = v . tanh(keys_i + query)   for i < lens[b],   -inf (weight 0) otherwise
 *   a   = softmax(e) */
void additive_attention_forward(float *weights, float *feat, const float *keys, const float *query,
                                const float *v, const int *lens, int B, int T, int D_A) {
    /* Exercise 02.additive_score (5 points): e_i = v . tanh(keys_i + query), a = softmax(e), padding at -inf. */
    for (int b = 0; b < B; b++) {
        const float *q = query + (size_t)b * D_A;
        float *scores = weights + (size_t)b * T;   /* the softmax runs in place */
        for (int i = 0; i < T; i++) {
            if (i >= lens[b]) {
                scores[i] = -INFINITY;
                continue;
            }
            const float *k = keys + ((size_t)b * T + i) * D_A;
            float *f = feat + ((size_t)b * T + i) * D_A;
            float e = 0.0f;
            for (int j = 0; j < D_A; j++) {
                f[j] = tanhf(k[j] + q[j]);
                e += v[j] * f[j];
            }
            scores[i] = e;
        }
        softmax_forward(scores, scores, 1, T);
    }
    /* End of exercise 02.additive_score. */
}

/* Shapes: dweights [B,T] -> dkeys [B,T,D_A] +=, dquery [B,D_A] +=, dv [D_A] +=.
 *   de_i  = softmax backward of dweights           (0 at padded positions)
 *   dv   += de_i * feat_i
 *   dz    = de_i * v * (1 - feat_i^2)              (through the tanh)
 *   dkeys_i += dz,   dquery += dz */
void additive_attention_backward(float *dkeys, float *dquery, float *dv, float *dscores,
                                 const float *dweights, const float *weights, const float *feat,
                                 const float *v, const int *lens, int B, int T, int D_A) {
    /* Exercise 02.additive_score, continued: its backward, to the keys, the query and v. */
    memset(dscores, 0, sizeof(float) * (size_t)B * T);
    softmax_backward(dscores, dweights, weights, B, T);
    for (int b = 0; b < B; b++) {
        float *dq = dquery + (size_t)b * D_A;
        for (int i = 0; i < lens[b]; i++) {
            float de = dscores[(size_t)b * T + i];
            const float *f = feat + ((size_t)b * T + i) * D_A;
            float *dk = dkeys + ((size_t)b * T + i) * D_A;
            for (int j = 0; j < D_A; j++) {
                dv[j] += de * f[j];
                float dz = de * v[j] * (1.0f - f[j] * f[j]);
                dk[j] += dz;
                dq[j] += dz;
            }
        }
    }
    /* End of exercise 02.additive_score. */
}

/* Shapes: weights [B,T], values [B,T,D] -> context [B,D] = sum_i weights_i values_i */
void attention_context_forward(float *context, const float *weights, const float *values,
                               int B, int T, int D) {
    /* Exercise 02.context (2 points): c = sum_i a_i h_i, the context of one decoder step. */
    memset(context, 0, sizeof(float) * (size_t)B * D);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            float w = weights[(size_t)b * T + i];
            if (w == 0.0f) continue;   /* padding */
            const float *val = values + ((size_t)b * T + i) * D;
            float *c = context + (size_t)b * D;
            for (int d = 0; d < D; d++) c[d] += w * val[d];
        }
    /* End of exercise 02.context. */
}

/* Shapes: dcontext [B,D] -> dweights [B,T] +=, dvalues [B,T,D] +=
 *   dweights_i = dcontext . values_i,   dvalues_i += weights_i * dcontext */
void attention_context_backward(float *dweights, float *dvalues, const float *dcontext,
                                const float *weights, const float *values, int B, int T, int D) {
    /* Exercise 02.context, continued: its backward, to the weights a_i and to every h_i. */
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
    /* End of exercise 02.context. */
}

/* Tests only: all the weight on the last real position, a_t = one-hot(lens[b] - 1). */
static void pin_on_last(float *weights, const int *lens, int B, int T) {
    memset(weights, 0, sizeof(float) * (size_t)B * T);
    for (int b = 0; b < B; b++) weights[(size_t)b * T + lens[b] - 1] = 1.0f;
}

/* ============================================= encoder states as rows */

/* Shapes: enc.h [T+1, B, S] time-major (h[i+1] = state after x_i) -> ann [B, T, S_enc]. */
void encoder_states_to_rows(float *ann, const RnnEncoder *enc, const RnnEncoder *enc_bwd,
                            const int *lens, int B, int T) {
    int S = enc->S, S_enc = enc_bwd ? 2 * S : S;
    size_t hs = (size_t)B * S;
    memset(ann, 0, sizeof(float) * (size_t)B * T * S_enc);
    /* Exercise 02.annotations (3 points): h_i = [h_fwd_i ; h_bwd_i] for every real position i. */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < lens[b]; i++) {
            float *h_i = ann + ((size_t)b * T + i) * S_enc;
            memcpy(h_i, enc->h + (i + 1) * hs + (size_t)b * S, sizeof(float) * (size_t)S);
            if (enc_bwd)   /* after reading x_T .. x_i: step lens[b] - i */
                memcpy(h_i + S, enc_bwd->h + (lens[b] - i) * hs + (size_t)b * S, sizeof(float) * (size_t)S);
        }
    /* End of exercise 02.annotations. */
}

/* Shapes: dann [B, T, S_enc] -> dH_fwd, dH_bwd [T, B, S]: dH[t] is d loss / d h[t+1]. */
void encoder_grads_from_rows(float *dH_fwd, float *dH_bwd, const float *dann, const int *lens,
                             int B, int T, int S) {
    int S_enc = dH_bwd ? 2 * S : S;
    size_t hs = (size_t)B * S;
    memset(dH_fwd, 0, sizeof(float) * (size_t)T * hs);
    if (dH_bwd) memset(dH_bwd, 0, sizeof(float) * (size_t)T * hs);
    /* Exercise 02.annotations, continued: the gradients of the h_i back to each encoder's states. */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < lens[b]; i++) {
            const float *dh_i = dann + ((size_t)b * T + i) * S_enc;
            memcpy(dH_fwd + i * hs + (size_t)b * S, dh_i, sizeof(float) * (size_t)S);
            if (dH_bwd)
                memcpy(dH_bwd + (lens[b] - 1 - i) * hs + (size_t)b * S, dh_i + S, sizeof(float) * (size_t)S);
        }
    /* End of exercise 02.annotations. */
}

/* ================================================================ model */

const ConfigField BAHDANAU_CONFIG_FIELDS[] = {
    {"cell", CONFIG_CHOICE, offsetof(BahdanauConfig, cell), .choices = "rnn,gru,lstm"},
    {"embed", CONFIG_INT, offsetof(BahdanauConfig, D_E), .lo = 1, .hi = 4096},
    {"state", CONFIG_INT, offsetof(BahdanauConfig, S), .lo = 1, .hi = 4096, .old_key = "hidden"},
    {"attn", CONFIG_INT, offsetof(BahdanauConfig, D_A), .lo = 1, .hi = 4096},
    {"bidirectional", CONFIG_INT, offsetof(BahdanauConfig, bidirectional), .lo = 0, .hi = 1},
};
const int BAHDANAU_CONFIG_N = (int)(sizeof BAHDANAU_CONFIG_FIELDS / sizeof BAHDANAU_CONFIG_FIELDS[0]);

int bahdanau_create(Bahdanau *r, const BahdanauConfig *c, int V_src, int V_tgt, int max_B, int max_T_src,
                    int max_T_tgt, uint64_t seed) {
    const CellType cell = c->cell;
    const int D_E = c->D_E, S = c->S, D_A = c->D_A, bidirectional = c->bidirectional != 0;
    memset(r, 0, sizeof *r);
    r->D_A = D_A;
    r->bidirectional = bidirectional;
    r->S_enc = bidirectional ? 2 * S : S;
    int S_enc = r->S_enc;
    Params *p = &r->params;
    params_init(p);
    rnn_encoder_declare(&r->enc, p, "enc", cell, V_src, D_E, S);
    if (bidirectional) rnn_encoder_declare(&r->enc_bwd, p, "enc_bwd", cell, V_src, D_E, S);
    rnn_decoder_declare(&r->dec, p, cell, V_tgt, D_E, D_E + S_enc, S);
    r->att_W1 = params_add(p, "att.W_1", 2, (int[]){S_enc, D_A});
    r->att_W2 = params_add(p, "att.W_2", 2, (int[]){S, D_A});
    r->att_v = params_add(p, "att.v", 1, (int[]){D_A});
    if (bidirectional) {
        r->bridge_W = params_add(p, "bridge.W_s", 2, (int[]){2 * S, S});
        r->bridge_b = params_add(p, "bridge.b_s", 1, (int[]){S});
    }
    if (params_alloc(p) < 0) return -1;

    Rng rng;
    rng_seed(&rng, seed, 1);
    rnn_encoder_init(&r->enc, p, &rng);
    if (bidirectional) rnn_encoder_init(&r->enc_bwd, p, &rng);
    rnn_decoder_init(&r->dec, p, &rng);
    init_xavier(params_data(p, r->att_W1), S_enc, D_A, &rng);
    init_xavier(params_data(p, r->att_W2), S, D_A, &rng);
    init_uniform(params_data(p, r->att_v), (size_t)D_A, 1.0f / sqrtf((float)D_A), &rng);
    if (bidirectional) {
        init_xavier(params_data(p, r->bridge_W), 2 * S, S, &rng);
        init_constant(params_data(p, r->bridge_b), (size_t)S, 0.0f);
    }

    /* activations, allocated once */
    rnn_encoder_alloc(&r->enc, max_B, max_T_src);
    if (bidirectional) rnn_encoder_alloc(&r->enc_bwd, max_B, max_T_src);
    int Tt = max_T_tgt + 1;   /* + <eos> */
    rnn_decoder_alloc(&r->dec, max_B, Tt);
    r->max_B = max_B;
    r->max_T = max_T_src;
    size_t BT = (size_t)max_B * max_T_src, BTt = (size_t)max_B * Tt;
    r->src_rev = xcalloc(BT, sizeof(int));
    r->ann = xcalloc(BT * S_enc, sizeof(float));
    r->dann = xcalloc(BT * S_enc, sizeof(float));
    r->keys = xcalloc(BT * D_A, sizeof(float));
    r->dkeys = xcalloc(BT * D_A, sizeof(float));
    r->dH_fwd = xcalloc(BT * S, sizeof(float));
    r->dH_bwd = xcalloc(BT * S, sizeof(float));
    r->bridge_in = xcalloc((size_t)max_B * 2 * S, sizeof(float));
    r->dbridge_in = xcalloc((size_t)max_B * 2 * S, sizeof(float));
    r->dfinal_fwd = xcalloc((size_t)max_B * S, sizeof(float));
    r->dfinal_bwd = xcalloc((size_t)max_B * S, sizeof(float));
    r->query = xcalloc((size_t)max_B * D_A, sizeof(float));
    r->dquery = xcalloc((size_t)max_B * D_A, sizeof(float));
    r->feat = xcalloc(BTt * max_T_src * D_A, sizeof(float));
    r->attn = xcalloc(BTt * max_T_src, sizeof(float));
    r->dattn = xcalloc(BT, sizeof(float));
    r->dscores = xcalloc(BT, sizeof(float));
    r->ctx = xcalloc((size_t)max_B * S_enc, sizeof(float));
    r->dctx = xcalloc((size_t)max_B * S_enc, sizeof(float));
    r->logits = xcalloc(BTt * V_tgt, sizeof(float));
    r->probs = xcalloc(BTt * V_tgt, sizeof(float));
    r->dlogits = xcalloc(BTt * V_tgt, sizeof(float));
    r->enc_lens = xcalloc((size_t)max_B, sizeof(int));
    r->step_lens = xcalloc((size_t)max_B, sizeof(int));
    r->step_ann = xcalloc(BT * S_enc, sizeof(float));
    r->step_keys = xcalloc(BT * D_A, sizeof(float));
    r->step_feat = xcalloc(BT * D_A, sizeof(float));
    r->step_attn = xcalloc(BT, sizeof(float));
    r->step_query = xcalloc((size_t)max_B * D_A, sizeof(float));
    r->step_ctx = xcalloc((size_t)max_B * S_enc, sizeof(float));
    return 0;
}

void bahdanau_free(Bahdanau *r) {
    rnn_encoder_free(&r->enc);
    if (r->bidirectional) rnn_encoder_free(&r->enc_bwd);
    rnn_decoder_free(&r->dec);
    free(r->src_rev); free(r->ann); free(r->dann); free(r->keys); free(r->dkeys);
    free(r->dH_fwd); free(r->dH_bwd); free(r->bridge_in); free(r->dbridge_in);
    free(r->dfinal_fwd); free(r->dfinal_bwd);
    free(r->query); free(r->dquery); free(r->feat); free(r->attn); free(r->dattn);
    free(r->dscores); free(r->ctx); free(r->dctx);
    free(r->logits); free(r->probs); free(r->dlogits); free(r->enc_lens); free(r->step_lens);
    free(r->step_ann); free(r->step_keys); free(r->step_feat); free(r->step_attn);
    free(r->step_query); free(r->step_ctx);
    params_free(&r->params);
}

void bahdanau_destroy(void *self) {
    bahdanau_free(self);
    free(self);
}


/* Run the encoder(s) over src [B, T] and lay the states out for attention.
 * Shapes: ann [B, T, S_enc] row b, position i = h_i = [h_fwd_i ; h_bwd_i]
 *         (zeros at padded positions); keys [B, T, D_A] = ann W_1;
 *         dec.s[0] [B, S] = s_0 (and dec.cs[0] = c_0 for the LSTM). */
static void encode_sources(Bahdanau *r, const int *src, const int *lens, int B, int T) {
    Params *p = &r->params;
    RnnDecoder *dec = &r->dec;
    int S = dec->S, S_enc = r->S_enc;
    size_t hs = (size_t)B * S;
    rnn_encoder_forward(&r->enc, p, src, lens, B, T);
    if (r->bidirectional) {
        /* the backward encoder reads each row's real tokens last to first */
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                r->src_rev[b * T + t] = t < lens[b] ? src[b * T + lens[b] - 1 - t] : PAD_ID;
        rnn_encoder_forward(&r->enc_bwd, p, r->src_rev, lens, B, T);
    }
    encoder_states_to_rows(r->ann, &r->enc, r->bidirectional ? &r->enc_bwd : NULL, lens, B, T);
    linear_forward(r->keys, r->ann, params_data(p, r->att_W1), NULL, B * T, S_enc, r->D_A);

    if (!r->bidirectional) {   /* s_0 = h_T, as in chapter 01 */
        memcpy(dec->s, rnn_encoder_final_h(&r->enc), sizeof(float) * hs);
        if (dec->cell == CELL_LSTM) memcpy(dec->cs, rnn_encoder_final_c(&r->enc), sizeof(float) * hs);
    } else {                   /* s_0 = tanh([h_fwd_T ; h_bwd_1] W_s + b_s), c_0 = 0 */
        put_columns(r->bridge_in, 2 * S, 0, rnn_encoder_final_h(&r->enc), B, S);
        put_columns(r->bridge_in, 2 * S, S, rnn_encoder_final_h(&r->enc_bwd), B, S);
        linear_forward(dec->s, r->bridge_in, params_data(p, r->bridge_W), params_data(p, r->bridge_b),
                       B, 2 * S, S);
        tanh_forward(dec->s, dec->s, B * S);
        memset(dec->cs, 0, sizeof(float) * hs);
    }
}

/* Backward of encode_sources: from dann [B,T,S_enc] and dkeys [B,T,D_A]
 * (gradients w.r.t. every h_i through the context and through the keys) and
 * ds_0 = dec.g.dh, dc_0 = dec.g.dc [B,S], down into the encoders' parameters. */
static void encode_sources_backward(Bahdanau *r, const int *lens, int B, int T) {
    Params *p = &r->params;
    RnnDecoder *dec = &r->dec;
    int S = dec->S, S_enc = r->S_enc;
    size_t hs = (size_t)B * S;
    linear_backward(r->dann, params_grad(p, r->att_W1), NULL, r->dkeys, r->ann,
                    params_data(p, r->att_W1), B * T, S_enc, r->D_A);
    encoder_grads_from_rows(r->dH_fwd, r->bidirectional ? r->dH_bwd : NULL, r->dann, lens, B, T, S);
    if (!r->bidirectional) {
        rnn_encoder_backward(&r->enc, p, r->dH_fwd, dec->g.dh, dec->cell == CELL_LSTM ? dec->g.dc : NULL);
        return;
    }
    /* through the bridge: s_0 = tanh(bridge_in W_s + b_s) */
    memset(dec->g.dh_prev, 0, sizeof(float) * hs);   /* d(pre-activation) */
    tanh_backward(dec->g.dh_prev, dec->g.dh, dec->s, B * S);
    memset(r->dbridge_in, 0, sizeof(float) * hs * 2);
    linear_backward(r->dbridge_in, params_grad(p, r->bridge_W), params_grad(p, r->bridge_b),
                    dec->g.dh_prev, r->bridge_in, params_data(p, r->bridge_W), B, 2 * S, S);
    for (int b = 0; b < B; b++) {
        memcpy(r->dfinal_fwd + (size_t)b * S, r->dbridge_in + (size_t)b * 2 * S, sizeof(float) * (size_t)S);
        memcpy(r->dfinal_bwd + (size_t)b * S, r->dbridge_in + (size_t)b * 2 * S + S,
               sizeof(float) * (size_t)S);
    }
    rnn_encoder_backward(&r->enc, p, r->dH_fwd, r->dfinal_fwd, NULL);
    rnn_encoder_backward(&r->enc_bwd, p, r->dH_bwd, r->dfinal_bwd, NULL);
}

/* One training (or evaluation) pass over a batch.
 * Shapes: B sequences; source T; target Tt steps (with <eos>); D_E embed; S
 * decoder state; S_enc encoder state; D_A attention size.
 *   encoder:  ann [B, T, S_enc] the h_i,  keys [B, T, D_A] = ann W_1
 *   step t:   query = s_{t-1} W_2 [B, D_A]
 *             a_t [B, T] = softmax(v . tanh(keys + query)),  c_t [B, S_enc] = sum_i a_{t,i} h_i
 *             in[t] = [embed(y_{t-1}) ; c_t] [B, D_E+S_enc],  s_t = g_U(in[t], s_{t-1}) [B, S]
 *   output:   logits = [s_1 ; ... ; s_Tt] W_out + b_out  [Tt*B, V]  (row t*B + b) */
double bahdanau_train_step(void *self, const Batch *batch, int backward) {
    Bahdanau *r = self;
    Params *p = &r->params;
    RnnDecoder *dec = &r->dec;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len;
    int D_E = dec->D_E, S = dec->S, S_enc = r->S_enc, D_A = r->D_A, I = dec->I;
    const int *lens = batch->src_lens;
    size_t hs = (size_t)B * S;

    /* ---- encoder, and the keys W_1 h_i once per sequence */
    encode_sources(r, batch->src, lens, B, T);

    /* ---- decoder, teacher forcing; a new context c_t at every step */
    rnn_decoder_targets(dec, batch);
    for (int t = 0; t < Tt; t++) {
        const float *s_prev = dec->s + t * hs;
        float *a_t = r->attn + (size_t)t * B * T;
        if (r->pin_last) {
            pin_on_last(a_t, lens, B, T);
        } else {
            linear_forward(r->query, s_prev, params_data(p, r->att_W2), NULL, B, S, D_A);
            additive_attention_forward(a_t, r->feat + (size_t)t * B * T * D_A, r->keys, r->query,
                                       params_data(p, r->att_v), lens, B, T, D_A);
        }
        attention_context_forward(r->ctx, a_t, r->ann, B, T, S_enc);
        rnn_decoder_embed(dec, p, t, B);
        put_columns(dec->in + (size_t)t * B * I, I, D_E, r->ctx, B, S_enc);
        rnn_decoder_cell_forward(dec, p, t, B);
    }
    /* ---- output layer and loss: chapter 01's (with backward, d loss / d s_t into dS) */
    double loss;
    if (!rnn_decoder_loss(dec, p, batch, dec->s + hs, dec->dS, r->logits, r->probs, r->dlogits, backward, &loss))
        return loss;

    /* ---- backward through the decoder's time steps */
    memset(r->dann, 0, sizeof(float) * (size_t)B * T * S_enc);
    memset(r->dkeys, 0, sizeof(float) * (size_t)B * T * D_A);
    for (int t = Tt - 1; t >= 0; t--) {
        const float *s_prev = dec->s + t * hs;
        const float *a_t = r->attn + (size_t)t * B * T;
        rnn_decoder_cell_backward(dec, p, t, B);
        /* split d[in] = [d embed ; d c_t] */
        for (int b = 0; b < B; b++)
            memcpy(r->dctx + (size_t)b * S_enc, dec->din + (size_t)b * I + D_E, sizeof(float) * (size_t)S_enc);
        rnn_decoder_embed_backward(dec, p, t, B);
        /* c_t = sum_i a_{t,i} h_i: gradient to the weights and to every h_i */
        memset(r->dattn, 0, sizeof(float) * (size_t)B * T);
        attention_context_backward(r->dattn, r->dann, r->dctx, a_t, r->ann, B, T, S_enc);
        if (!r->pin_last) {
            /* a_t = softmax(v . tanh(keys + s_{t-1} W_2)): to the keys, v, and s_{t-1} */
            memset(r->dquery, 0, sizeof(float) * (size_t)B * D_A);
            additive_attention_backward(r->dkeys, r->dquery, params_grad(p, r->att_v), r->dscores,
                                        r->dattn, a_t, r->feat + (size_t)t * B * T * D_A,
                                        params_data(p, r->att_v), lens, B, T, D_A);
            linear_backward(dec->g.dh_prev, params_grad(p, r->att_W2), NULL, r->dquery, s_prev,
                            params_data(p, r->att_W2), B, S, D_A);
        }
        state_grads_swap(&dec->g);
    }
    /* now g.dh = d loss / d s_0 (g.dc = d loss / d c_0): into the encoders */
    encode_sources_backward(r, lens, B, T);
    return loss;
}

/* Decoding. A row's state is [s (S) | c (S, LSTM only)]. encode() keeps the
 * encoder states ann, the keys and the lengths of the batch in the model. */
void bahdanau_encode(void *self, const Batch *b, float *states) {
    Bahdanau *r = self;
    encode_sources(r, b->src, b->src_lens, b->batch, b->src_len);
    r->enc_T = b->src_len;
    memcpy(r->enc_lens, b->src_lens, sizeof(int) * (size_t)b->batch);
    rnn_decoder_initial_states(&r->dec, states, b->batch);
}

/* One decoder step for n rows; row i continues source src_row[i] of the last
 * encode(). The same computation as one time step of bahdanau_train_step.
 * Shapes: gathered ann [n, T, S_enc] and keys [n, T, D_A]; query [n, D_A];
 * a_t [n, T] (written to attn when not NULL); c_t [n, S_enc]; in [n, D_E+S_enc];
 * s [n, S] -> s' [n, S] -> logits [n, V]. */
void bahdanau_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                   float *next, float *logprobs, float *attn) {
    Bahdanau *r = self;
    Params *p = &r->params;
    RnnDecoder *dec = &r->dec;
    int S = dec->S, S_enc = r->S_enc, D_A = r->D_A, T = r->enc_T;
    for (int i = 0; i < n; i++) {   /* each row's source */
        int src = src_row[i];
        r->step_lens[i] = r->enc_lens[src];
        memcpy(r->step_ann + (size_t)i * T * S_enc, r->ann + (size_t)src * T * S_enc,
               sizeof(float) * (size_t)T * S_enc);
        memcpy(r->step_keys + (size_t)i * T * D_A, r->keys + (size_t)src * T * D_A,
               sizeof(float) * (size_t)T * D_A);
    }
    rnn_decoder_step_begin(dec, states, n);
    if (r->pin_last) {
        pin_on_last(r->step_attn, r->step_lens, n, T);
    } else {
        linear_forward(r->step_query, dec->step_h, params_data(p, r->att_W2), NULL, n, S, D_A);
        additive_attention_forward(r->step_attn, r->step_feat, r->step_keys, r->step_query,
                                   params_data(p, r->att_v), r->step_lens, n, T, D_A);
    }
    if (attn) memcpy(attn, r->step_attn, sizeof(float) * (size_t)n * T);
    attention_context_forward(r->step_ctx, r->step_attn, r->step_ann, n, T, S_enc);
    rnn_decoder_step_embed(dec, p, prev, n);
    put_columns(dec->step_in, dec->I, dec->D_E, r->step_ctx, n, S_enc);
    rnn_decoder_step_cell(dec, p, n);
    rnn_decoder_step_end(dec, p, dec->step_h_next, n, next, logprobs);
}

void bahdanau_interface(Bahdanau *r, Seq2Seq *m) {
    *m = (Seq2Seq){.self = r, .params = &r->params, .train_step = bahdanau_train_step,
                   .encode = bahdanau_encode, .step = bahdanau_step, .destroy = bahdanau_destroy,
                   .state_size = rnn_decoder_state_size(&r->dec), .vocab_size = r->dec.V, .has_attention = 1};
}

int bahdanau_build(Seq2Seq *m, const Dataset *d, const BahdanauConfig *c, int max_batch, uint64_t seed) {
    /* its allocations counted against the memory this process may use (train/memory.h) */
    memory_budget_begin("02_bahdanau_attention", "a smaller --batch, --state or --embed, or shorter examples");
    Bahdanau *r = xmalloc(sizeof *r);
    int err = bahdanau_create(r, c, d->src_vocab.size, d->tgt_vocab.size, max_batch, d->max_src_len,
                              d->max_tgt_len, seed);
    memory_budget_end();
    if (err == 0) bahdanau_interface(r, m);
    else free(r);
    return err;
}
