/* attn_seq2seq.c - chapter 03: the encoder-decoder with the general attention
 * layer in its decoder, forward and hand-written backward (see attn_seq2seq.h).
 *
 * Reading order: attend_forward()/attend_backward() (the only place the
 * attention layer is called), encode_sources() (chapter 01's encoder), the
 * two decoders luong_forward()/luong_backward() and
 * bahdanau_forward()/bahdanau_backward(), attn_seq2seq_train_step() which
 * ties them together, then encode()/step() for decoding. */
#include "03_dot_product_attention/attn_seq2seq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "util/error.h"
#include "nn/layers.h"
#include "util/util.h"

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

/* One source sequence: queries Q [N_Q, H] over its encoder states X [T, H],
 * of which the first len are real (the rest is padding, masked).
 * Writes the contexts C [N_Q, H], the weights A [N_Q, T] and cache.
 *   K = V = X                        (the encoder states are keys and values)
 *   or K = X W_K, V = X W_V          (project_kv: the cross-attention layer) */
static void attend_forward(AttnSeq2Seq *r, float *C, float *A, float *cache, const float *Q,
                           const float *X, int len, int N_Q, int T) {
    AttentionMask mask = {NULL, 0, len};
    if (r->project_kv)
        cross_attention_forward(C, A, cache, Q, X, &r->layer, &r->w, &mask, N_Q, T);
    else
        attention_forward(C, A, cache, Q, X, X, &r->layer.score, &r->w.score, &mask, N_Q, T, r->H);
}

/* From dC [N_Q, H]: dQ [N_Q, H] +=, dX [T, H] += (as a key AND as a value),
 * and the layer's parameter gradients +=. */
static void attend_backward(AttnSeq2Seq *r, float *dQ, float *dX, const float *dC, const float *A,
                            const float *cache, const float *Q, const float *X, int N_Q, int T) {
    if (r->project_kv)
        cross_attention_backward(dQ, dX, &r->dw, r->attn_scratch, dC, A, cache, Q, X, &r->layer, &r->w,
                                 N_Q, T);
    else
        attention_backward(dQ, dX, dX, &r->dw.score, r->attn_scratch, dC, A, cache, Q, X, X,
                           &r->layer.score, &r->w.score, N_Q, T, r->H);
}

/* ================================================================ model */

/* Cell weights as chapters 01 and 02: U(-1/sqrt(H), 1/sqrt(H)), LSTM forget bias 1. */
static void init_decoder_cell(CellType cell, float *W_x, float *W_h, float *b, int I, int H, Rng *rng) {
    int G = cell_gates(cell);
    float limit = 1.0f / sqrtf((float)H);
    init_uniform(W_x, (size_t)I * G * H, limit, rng);
    init_uniform(W_h, (size_t)H * G * H, limit, rng);
    init_uniform(b, (size_t)G * H, limit, rng);
    if (cell == CELL_LSTM) init_constant(b + H, (size_t)H, 1.0f);
}

int attn_seq2seq_create(AttnSeq2Seq *r, CellType cell, ScoreType score, Placement placement,
                        int project_kv, int V_src, int V_tgt, int E, int H, int A,
                        int max_B, int max_T_src, int max_T_tgt, uint64_t seed) {
    memset(r, 0, sizeof *r);
    r->cell = cell;
    r->score = score;
    r->placement = placement;
    r->project_kv = project_kv;
    r->V_src = V_src;
    r->V_tgt = V_tgt;
    r->E = E;
    r->H = H;
    r->A = A;
    r->I = placement == PLACEMENT_LUONG ? E : E + H;
    int G = cell_gates(cell), I = r->I;
    int luong = placement == PLACEMENT_LUONG;

    /* the attention layer: queries, keys and values all of size H */
    r->layer.score = (ScoreSpec){score, H, H, score == SCORE_ADDITIVE ? A : 0};
    r->layer.D_in_Q = H;
    r->layer.D_X = H;
    r->layer.D_V = H;
    r->layer.project_q = 0;

    Params *p = &r->params;
    params_init(p);
    rnn_encoder_declare(&r->enc, p, "enc", cell, V_src, E, H);
    r->dec_emb = params_add(p, "dec.emb", 2, (int[]){V_tgt, E});
    r->dec_W_x = params_add(p, "dec.W_x", 2, (int[]){I, G * H});
    r->dec_W_h = params_add(p, "dec.W_h", 2, (int[]){H, G * H});
    r->dec_b = params_add(p, "dec.b", 1, (int[]){G * H});
    r->out_W = params_add(p, "out.W", 2, (int[]){H, V_tgt});
    r->out_b = params_add(p, "out.b", 1, (int[]){V_tgt});
    if (luong) {
        r->comb_W = params_add(p, "comb.W_c", 2, (int[]){2 * H, H});
        r->comb_b = params_add(p, "comb.b_c", 1, (int[]){H});
    }
    if (score == SCORE_MULTIPLICATIVE) r->att_W = params_add(p, "att.W", 2, (int[]){H, H});
    if (score == SCORE_ADDITIVE) {
        r->att_W1 = params_add(p, "att.W_1", 2, (int[]){H, A});
        r->att_W2 = params_add(p, "att.W_2", 2, (int[]){H, A});
        r->att_v = params_add(p, "att.v", 1, (int[]){A});
    }
    if (project_kv) {
        r->att_WK = params_add(p, "att.W_K", 2, (int[]){H, H});
        r->att_WV = params_add(p, "att.W_V", 2, (int[]){H, H});
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
    init_normal(params_data(p, r->dec_emb), (size_t)V_tgt * E, 1.0f / sqrtf((float)E), &rng);
    init_decoder_cell(cell, params_data(p, r->dec_W_x), params_data(p, r->dec_W_h),
                      params_data(p, r->dec_b), I, H, &rng);
    init_xavier(params_data(p, r->out_W), H, V_tgt, &rng);
    init_constant(params_data(p, r->out_b), (size_t)V_tgt, 0.0f);
    if (luong) {
        init_xavier(params_data(p, r->comb_W), 2 * H, H, &rng);
        init_constant(params_data(p, r->comb_b), (size_t)H, 0.0f);
    }
    score_init(&r->layer.score, &r->w.score, &rng);
    if (project_kv) {
        init_xavier(r->w.W_K, H, H, &rng);
        init_xavier(r->w.W_V, H, H, &rng);
    }

    /* activations, allocated once */
    rnn_encoder_alloc(&r->enc, max_B, max_T_src);
    r->max_B = max_B;
    r->max_T = max_T_src;
    r->max_Tt = max_T_tgt + 1;   /* + <eos> */
    r->cell_cache_size = cell_cache_size(cell, H);
    int Tt = r->max_Tt, T = max_T_src;
    size_t BT = (size_t)max_B * T, BTt = (size_t)max_B * Tt;
    /* Luong: one call per row with all Tt queries; Bahdanau: one per row and step */
    r->attn_cache_size = luong ? call_cache_floats(r, Tt, T) : call_cache_floats(r, 1, T);
    size_t n_calls = luong ? (size_t)max_B : BTt;
    r->ann = xcalloc(BT * H, sizeof(float));
    r->dann = xcalloc(BT * H, sizeof(float));
    r->dH = xcalloc(BT * H, sizeof(float));
    r->tgt_in = xcalloc(BTt, sizeof(int));
    r->tgt_out = xcalloc(BTt, sizeof(int));
    r->in = xcalloc(BTt * I, sizeof(float));
    r->s = xcalloc((size_t)max_B * (Tt + 1) * H, sizeof(float));
    r->cs = xcalloc((size_t)max_B * (Tt + 1) * H, sizeof(float));
    r->cell_cache = xcalloc(BTt * r->cell_cache_size, sizeof(float));
    r->query = xcalloc(BTt * H, sizeof(float));
    r->dquery = xcalloc(BTt * H, sizeof(float));
    r->attn = xcalloc(BTt * T, sizeof(float));
    r->ctx = xcalloc(BTt * H, sizeof(float));
    r->dctx = xcalloc(BTt * H, sizeof(float));
    r->attn_cache = xcalloc(n_calls * r->attn_cache_size, sizeof(float));
    r->attn_scratch = xcalloc(call_scratch_floats(r, Tt, T), sizeof(float));
    if (luong) {
        r->comb = xcalloc(BTt * 2 * H, sizeof(float));
        r->dcomb = xcalloc(BTt * 2 * H, sizeof(float));
        r->htilde = xcalloc(BTt * H, sizeof(float));
        r->dhtilde = xcalloc(BTt * H, sizeof(float));
    }
    r->logits = xcalloc(BTt * V_tgt, sizeof(float));
    r->probs = xcalloc(BTt * V_tgt, sizeof(float));
    r->dlogits = xcalloc(BTt * V_tgt, sizeof(float));
    r->dS = xcalloc(BTt * H, sizeof(float));
    r->cell_scratch = xcalloc((size_t)max_B * 2 * G * H, sizeof(float));
    r->din = xcalloc((size_t)max_B * I, sizeof(float));
    r->demb = xcalloc((size_t)max_B * E, sizeof(float));
    r->dh = xcalloc((size_t)max_B * H, sizeof(float));
    r->dc = xcalloc((size_t)max_B * H, sizeof(float));
    r->dh_prev = xcalloc((size_t)max_B * H, sizeof(float));
    r->dc_prev = xcalloc((size_t)max_B * H, sizeof(float));
    r->enc_lens = xcalloc((size_t)max_B, sizeof(int));
    r->step_h = xcalloc((size_t)max_B * H, sizeof(float));
    r->step_c = xcalloc((size_t)max_B * H, sizeof(float));
    r->step_h_next = xcalloc((size_t)max_B * H, sizeof(float));
    r->step_c_next = xcalloc((size_t)max_B * H, sizeof(float));
    r->step_ctx = xcalloc((size_t)max_B * H, sizeof(float));
    r->step_attn = xcalloc(BT, sizeof(float));
    r->step_in = xcalloc((size_t)max_B * I, sizeof(float));
    r->step_comb = xcalloc((size_t)max_B * 2 * H, sizeof(float));
    r->step_htilde = xcalloc((size_t)max_B * H, sizeof(float));
    r->step_attn_cache = xcalloc(call_cache_floats(r, 1, T), sizeof(float));
    r->step_cell_cache = xcalloc((size_t)max_B * r->cell_cache_size, sizeof(float));
    r->step_cell_scratch = xcalloc((size_t)max_B * 2 * G * H, sizeof(float));
    r->step_logits = xcalloc((size_t)max_B * V_tgt, sizeof(float));
    return 0;
}

void attn_seq2seq_free(AttnSeq2Seq *r) {
    rnn_encoder_free(&r->enc);
    free(r->ann); free(r->dann); free(r->dH); free(r->tgt_in); free(r->tgt_out); free(r->in);
    free(r->s); free(r->cs); free(r->cell_cache); free(r->query); free(r->dquery); free(r->attn);
    free(r->ctx); free(r->dctx); free(r->attn_cache); free(r->attn_scratch);
    free(r->comb); free(r->dcomb); free(r->htilde); free(r->dhtilde);
    free(r->logits); free(r->probs); free(r->dlogits); free(r->dS);
    free(r->cell_scratch); free(r->din); free(r->demb);
    free(r->dh); free(r->dc); free(r->dh_prev); free(r->dc_prev); free(r->enc_lens);
    free(r->step_h); free(r->step_c); free(r->step_h_next); free(r->step_c_next);
    free(r->step_ctx); free(r->step_attn); free(r->step_in); free(r->step_comb); free(r->step_htilde);
    free(r->step_attn_cache); free(r->step_cell_cache); free(r->step_cell_scratch); free(r->step_logits);
    params_free(&r->params);
}

void attn_seq2seq_destroy(void *self) {
    attn_seq2seq_free(self);
    free(self);
}


/* Chapter 01's encoder over src [B, T], its states laid out as the data of
 * the attention layer: ann [B, T, H], row b position i = h_i (zeros past the
 * row's length); s[0] = h_T (cs[0] = c_T for the LSTM). */
static void encode_sources(AttnSeq2Seq *r, const int *src, const int *lens, int B, int T) {
    int H = r->H;
    size_t hs = (size_t)B * H;
    rnn_encoder_forward(&r->enc, &r->params, src, lens, B, T);
    memset(r->ann, 0, sizeof(float) * (size_t)B * T * H);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < lens[b]; i++)   /* enc.h[i+1] is the state after x_i, time-major */
            memcpy(r->ann + ((size_t)b * T + i) * H, r->enc.h + (i + 1) * hs + (size_t)b * H,
                   sizeof(float) * (size_t)H);
    memcpy(r->s, rnn_encoder_final_h(&r->enc), sizeof(float) * hs);
    if (r->cell == CELL_LSTM) memcpy(r->cs, rnn_encoder_final_c(&r->enc), sizeof(float) * hs);
}

/* Backward of encode_sources: dann [B, T, H] (every h_i's gradient from the
 * attention) and dh, dc [B, H] (d s_0, d c_0) into the encoder's parameters. */
static void encode_sources_backward(AttnSeq2Seq *r, const int *lens, int B, int T) {
    int H = r->H;
    size_t hs = (size_t)B * H;
    memset(r->dH, 0, sizeof(float) * (size_t)T * hs);   /* dH[i] = d loss / d enc.h[i+1] */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < lens[b]; i++)
            memcpy(r->dH + i * hs + (size_t)b * H, r->dann + ((size_t)b * T + i) * H,
                   sizeof(float) * (size_t)H);
    rnn_encoder_backward(&r->enc, &r->params, r->dH, r->dh, r->cell == CELL_LSTM ? r->dc : NULL);
}

/* ------------------------------------------------ the Luong decoder */
/* Shapes: B rows, source T, target Tt steps.
 *   in[t] = embed(y_{t-1})  [B, E];  s_{t+1} = g_U(in[t], s_t)  [B, H]     (s index t+1 = step t)
 *   query [B, Tt, H] = the states s_1..s_Tt of each row
 *   per row b: C_b [Tt, H], A_b [Tt, T] = attention(query_b, ann_b)   ONE call, Tt queries
 *   comb [Tt, B, 2H] = [c_t ; s_t],  htilde [Tt*B, H] = tanh(comb W_c + b_c)
 * Returns the rows the output layer reads: htilde. */
static const float *luong_forward(AttnSeq2Seq *r, const Batch *batch) {
    Params *p = &r->params;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len, E = r->E, H = r->H;
    size_t hs = (size_t)B * H;
    int lstm = r->cell == CELL_LSTM;
    for (int t = 0; t < Tt; t++) {
        float *in = r->in + (size_t)t * B * E;
        embedding_forward(in, r->tgt_in + t * B, params_data(p, r->dec_emb), B, E);
        cell_forward(r->cell, r->s + (t + 1) * hs, lstm ? r->cs + (t + 1) * hs : NULL,
                     r->cell_cache + (size_t)t * B * r->cell_cache_size, r->cell_scratch, in,
                     r->s + t * hs, lstm ? r->cs + t * hs : NULL, params_data(p, r->dec_W_x),
                     params_data(p, r->dec_W_h), params_data(p, r->dec_b), NULL, B, E, H);
    }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tt; t++)
            memcpy(r->query + ((size_t)b * Tt + t) * H, r->s + (t + 1) * hs + (size_t)b * H,
                   sizeof(float) * (size_t)H);
    size_t cache_row = call_cache_floats(r, Tt, T);
    for (int b = 0; b < B; b++)   /* all Tt queries of row b at once: E = score(Q, K), A, C = A V */
        attend_forward(r, r->ctx + (size_t)b * Tt * H, r->attn + (size_t)b * Tt * T,
                       r->attn_cache + b * cache_row, r->query + (size_t)b * Tt * H,
                       r->ann + (size_t)b * T * H, batch->src_lens[b], Tt, T);
    for (int t = 0; t < Tt; t++)
        for (int b = 0; b < B; b++) {
            float *row = r->comb + ((size_t)t * B + b) * 2 * H;
            memcpy(row, r->ctx + ((size_t)b * Tt + t) * H, sizeof(float) * (size_t)H);
            memcpy(row + H, r->s + (t + 1) * hs + (size_t)b * H, sizeof(float) * (size_t)H);
        }
    linear_forward(r->htilde, r->comb, params_data(p, r->comb_W), params_data(p, r->comb_b), Tt * B, 2 * H, H);
    tanh_forward(r->htilde, r->htilde, Tt * B * H);
    return r->htilde;
}

/* From dhtilde [Tt*B, H] (the output layer's gradient) back to dh = d s_0,
 * dc = d c_0 and dann; accumulates the decoder's parameter gradients. */
static void luong_backward(AttnSeq2Seq *r, const Batch *batch) {
    Params *p = &r->params;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len, E = r->E, H = r->H;
    size_t hs = (size_t)B * H, n = (size_t)Tt * B;
    int lstm = r->cell == CELL_LSTM;
    /* through htilde = tanh(pre): d pre = d htilde * (1 - htilde^2), in place */
    for (size_t i = 0; i < n * H; i++) r->dhtilde[i] *= 1.0f - r->htilde[i] * r->htilde[i];
    memset(r->dcomb, 0, sizeof(float) * n * 2 * H);
    linear_backward(r->dcomb, params_grad(p, r->comb_W), params_grad(p, r->comb_b), r->dhtilde, r->comb,
                    params_data(p, r->comb_W), (int)n, 2 * H, H);
    /* split d[c_t ; s_t]: dctx batch-major for the attention, dS time-major for the RNN */
    for (int t = 0; t < Tt; t++)
        for (int b = 0; b < B; b++) {
            const float *row = r->dcomb + ((size_t)t * B + b) * 2 * H;
            memcpy(r->dctx + ((size_t)b * Tt + t) * H, row, sizeof(float) * (size_t)H);
            memcpy(r->dS + t * hs + (size_t)b * H, row + H, sizeof(float) * (size_t)H);
        }
    /* the attention layer, row by row: to the queries (the states s_t) and to every h_i */
    memset(r->dquery, 0, sizeof(float) * n * H);
    memset(r->dann, 0, sizeof(float) * (size_t)B * T * H);
    size_t cache_row = call_cache_floats(r, Tt, T);
    for (int b = 0; b < B; b++)
        attend_backward(r, r->dquery + (size_t)b * Tt * H, r->dann + (size_t)b * T * H,
                        r->dctx + (size_t)b * Tt * H, r->attn + (size_t)b * Tt * T,
                        r->attn_cache + b * cache_row, r->query + (size_t)b * Tt * H,
                        r->ann + (size_t)b * T * H, Tt, T);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tt; t++) {
            const float *dq = r->dquery + ((size_t)b * Tt + t) * H;
            float *ds = r->dS + t * hs + (size_t)b * H;
            for (int h = 0; h < H; h++) ds[h] += dq[h];
        }
    /* the decoder RNN, last step first */
    memset(r->dh, 0, sizeof(float) * hs);
    memset(r->dc, 0, sizeof(float) * hs);
    for (int t = Tt - 1; t >= 0; t--) {
        for (size_t i = 0; i < hs; i++) r->dh[i] += r->dS[t * hs + i];
        memset(r->din, 0, sizeof(float) * (size_t)B * E);
        memset(r->dh_prev, 0, sizeof(float) * hs);
        memset(r->dc_prev, 0, sizeof(float) * hs);
        cell_backward(r->cell, r->din, r->dh_prev, lstm ? r->dc_prev : NULL, params_grad(p, r->dec_W_x),
                      params_grad(p, r->dec_W_h), params_grad(p, r->dec_b), r->dh, lstm ? r->dc : NULL,
                      r->cell_cache + (size_t)t * B * r->cell_cache_size, r->cell_scratch,
                      r->in + (size_t)t * B * E, r->s + t * hs, lstm ? r->cs + t * hs : NULL,
                      params_data(p, r->dec_W_x), params_data(p, r->dec_W_h), NULL, B, E, H);
        embedding_backward(params_grad(p, r->dec_emb), r->din, r->tgt_in + t * B, B, E);
        float *swap = r->dh; r->dh = r->dh_prev; r->dh_prev = swap;
        swap = r->dc; r->dc = r->dc_prev; r->dc_prev = swap;
    }
}

/* ------------------------------------------------ the Bahdanau-placed decoder */
/* Shapes: as above, I = E + H.
 *   step t, row b: c_t, a_t = attention(query s_t[b] (that is s_{t-1} in 1-based
 *                  steps), ann_b)        one call, ONE query [1, H]
 *   in[t] = [embed(y_{t-1}) ; c_t]  [B, I];  s_{t+1} = g_U(in[t], s_t)
 * Returns the rows the output layer reads: s_1..s_Tt. */
static const float *bahdanau_forward(AttnSeq2Seq *r, const Batch *batch) {
    Params *p = &r->params;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len, E = r->E, H = r->H, I = r->I;
    size_t hs = (size_t)B * H, cache1 = call_cache_floats(r, 1, T);
    int lstm = r->cell == CELL_LSTM;
    for (int t = 0; t < Tt; t++) {
        const float *s_prev = r->s + t * hs;
        float *in = r->in + (size_t)t * B * I;
        for (int b = 0; b < B; b++) {
            size_t bt = (size_t)b * Tt + t;
            attend_forward(r, r->ctx + bt * H, r->attn + bt * T, r->attn_cache + bt * cache1,
                           s_prev + (size_t)b * H, r->ann + (size_t)b * T * H, batch->src_lens[b], 1, T);
            memcpy(in + (size_t)b * I + E, r->ctx + bt * H, sizeof(float) * (size_t)H);
        }
        embedding_forward(r->demb, r->tgt_in + t * B, params_data(p, r->dec_emb), B, E);
        put_columns(in, I, 0, r->demb, B, E);
        cell_forward(r->cell, r->s + (t + 1) * hs, lstm ? r->cs + (t + 1) * hs : NULL,
                     r->cell_cache + (size_t)t * B * r->cell_cache_size, r->cell_scratch, in, s_prev,
                     lstm ? r->cs + t * hs : NULL, params_data(p, r->dec_W_x),
                     params_data(p, r->dec_W_h), params_data(p, r->dec_b), NULL, B, I, H);
    }
    return r->s + hs;
}

/* From dS [Tt, B, H] (the output layer's gradient w.r.t. s_1..s_Tt) back to
 * dh = d s_0, dc = d c_0 and dann. */
static void bahdanau_backward(AttnSeq2Seq *r, const Batch *batch) {
    Params *p = &r->params;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len, E = r->E, H = r->H, I = r->I;
    size_t hs = (size_t)B * H, cache1 = call_cache_floats(r, 1, T);
    int lstm = r->cell == CELL_LSTM;
    memset(r->dann, 0, sizeof(float) * (size_t)B * T * H);
    memset(r->dh, 0, sizeof(float) * hs);
    memset(r->dc, 0, sizeof(float) * hs);
    for (int t = Tt - 1; t >= 0; t--) {
        const float *s_prev = r->s + t * hs;
        for (size_t i = 0; i < hs; i++) r->dh[i] += r->dS[t * hs + i];
        memset(r->din, 0, sizeof(float) * (size_t)B * I);
        memset(r->dh_prev, 0, sizeof(float) * hs);
        memset(r->dc_prev, 0, sizeof(float) * hs);
        cell_backward(r->cell, r->din, r->dh_prev, lstm ? r->dc_prev : NULL, params_grad(p, r->dec_W_x),
                      params_grad(p, r->dec_W_h), params_grad(p, r->dec_b), r->dh, lstm ? r->dc : NULL,
                      r->cell_cache + (size_t)t * B * r->cell_cache_size, r->cell_scratch,
                      r->in + (size_t)t * B * I, s_prev, lstm ? r->cs + t * hs : NULL,
                      params_data(p, r->dec_W_x), params_data(p, r->dec_W_h), NULL, B, I, H);
        /* split d[in] = [d embed ; d c_t] */
        for (int b = 0; b < B; b++) {
            memcpy(r->demb + (size_t)b * E, r->din + (size_t)b * I, sizeof(float) * (size_t)E);
            memcpy(r->dctx + ((size_t)b * Tt + t) * H, r->din + (size_t)b * I + E, sizeof(float) * (size_t)H);
        }
        embedding_backward(params_grad(p, r->dec_emb), r->demb, r->tgt_in + t * B, B, E);
        /* the attention layer: to the query s_{t-1} (a second path into dh_prev) and to every h_i */
        for (int b = 0; b < B; b++) {
            size_t bt = (size_t)b * Tt + t;
            attend_backward(r, r->dh_prev + (size_t)b * H, r->dann + (size_t)b * T * H, r->dctx + bt * H,
                            r->attn + bt * T, r->attn_cache + bt * cache1, s_prev + (size_t)b * H,
                            r->ann + (size_t)b * T * H, 1, T);
        }
        float *swap = r->dh; r->dh = r->dh_prev; r->dh_prev = swap;
        swap = r->dc; r->dc = r->dc_prev; r->dc_prev = swap;
    }
}

/* One training (or evaluation) pass over a batch: encoder, decoder, output
 * layer logits [Tt*B, V] (row t*B + b), cross-entropy; then the backward pass
 * in reverse. After it, attn [B, Tt, T] and ctx [B, Tt, H] hold every a_t and
 * c_t (row b, step t). */
double attn_seq2seq_train_step(void *self, const Batch *batch, int backward) {
    AttnSeq2Seq *r = self;
    Params *p = &r->params;
    int B = batch->batch, T = batch->src_len, Tt = batch->tgt_len, H = r->H, V = r->V_tgt;
    int luong = r->placement == PLACEMENT_LUONG;

    encode_sources(r, batch->src, batch->src_lens, B, T);
    for (int t = 0; t < Tt; t++)
        for (int b = 0; b < B; b++) {
            r->tgt_in[t * B + b] = batch->tgt_in[b * Tt + t];
            r->tgt_out[t * B + b] = batch->tgt_out[b * Tt + t];
        }
    const float *top = luong ? luong_forward(r, batch) : bahdanau_forward(r, batch);   /* [Tt*B, H] */
    /* output layer and loss: chapter 01's (with backward, d loss / d top into dtop) */
    float *dtop = luong ? r->dhtilde : r->dS;
    int n_tokens = 0;
    double loss = output_layer_loss(p, r->out_W, r->out_b, top, r->tgt_out, Tt * B, H, V,
                                    r->logits, r->probs, r->dlogits, dtop, backward, &n_tokens);
    if (!backward || n_tokens == 0) return loss;
    if (luong) luong_backward(r, batch);
    else bahdanau_backward(r, batch);
    /* now dh = d loss / d s_0 (dc = d c_0) and dann = d loss / d h_i: into the encoder */
    encode_sources_backward(r, batch->src_lens, B, T);
    return loss;
}

/* ============================================================== decoding */
/* A row's state is [s (H) | c (H, LSTM only)]. encode() keeps ann and the
 * lengths of the encoded batch in the model. */
void attn_seq2seq_encode(void *self, const Batch *b, float *states) {
    AttnSeq2Seq *r = self;
    int B = b->batch, H = r->H, lstm = r->cell == CELL_LSTM;
    encode_sources(r, b->src, b->src_lens, B, b->src_len);
    r->enc_B = B;
    r->enc_T = b->src_len;
    memcpy(r->enc_lens, b->src_lens, sizeof(int) * (size_t)B);
    decoder_states_pack(states, r->s, lstm ? r->cs : NULL, B, H);
}

/* One decoder step for n rows, the same computation as one column of the
 * training pass. Row i continues source src_row[i]: its attention data is
 * ann [src_row[i]] [T, H]. Shapes: s [n, H] -> s' [n, H]; c_t [n, H];
 * a_t [n, T]; logits [n, V]. */
void attn_seq2seq_step(void *self, int n, const int *src_row, const float *states, const int *prev,
                       float *next, float *logprobs, float *attn) {
    AttnSeq2Seq *r = self;
    Params *p = &r->params;
    int E = r->E, H = r->H, I = r->I, T = r->enc_T;
    int lstm = r->cell == CELL_LSTM;
    int luong = r->placement == PLACEMENT_LUONG;
    decoder_states_unpack(r->step_h, lstm ? r->step_c : NULL, states, n, H);
    /* Luong asks with the new state s_t, Bahdanau with the previous one s_{t-1} */
    if (luong) {
        embedding_forward(r->step_in, prev, params_data(p, r->dec_emb), n, E);
        cell_forward(r->cell, r->step_h_next, lstm ? r->step_c_next : NULL, r->step_cell_cache,
                     r->step_cell_scratch, r->step_in, r->step_h, lstm ? r->step_c : NULL,
                     params_data(p, r->dec_W_x), params_data(p, r->dec_W_h), params_data(p, r->dec_b),
                     NULL, n, I, H);
    }
    const float *queries = luong ? r->step_h_next : r->step_h;
    for (int i = 0; i < n; i++) {
        int src = src_row[i];
        attend_forward(r, r->step_ctx + (size_t)i * H, r->step_attn + (size_t)i * T, r->step_attn_cache,
                       queries + (size_t)i * H, r->ann + (size_t)src * T * H, r->enc_lens[src], 1, T);
    }
    if (attn) memcpy(attn, r->step_attn, sizeof(float) * (size_t)n * T);
    const float *top;
    if (luong) {   /* htilde = tanh([c_t ; s_t] W_c + b_c) */
        put_columns(r->step_comb, 2 * H, 0, r->step_ctx, n, H);
        put_columns(r->step_comb, 2 * H, H, r->step_h_next, n, H);
        linear_forward(r->step_htilde, r->step_comb, params_data(p, r->comb_W), params_data(p, r->comb_b),
                       n, 2 * H, H);
        tanh_forward(r->step_htilde, r->step_htilde, n * H);
        top = r->step_htilde;
    } else {       /* s_t = g_U([embed(y_{t-1}) ; c_t], s_{t-1}) */
        embedding_forward(r->demb, prev, params_data(p, r->dec_emb), n, E);
        put_columns(r->step_in, I, 0, r->demb, n, E);
        put_columns(r->step_in, I, E, r->step_ctx, n, H);
        cell_forward(r->cell, r->step_h_next, lstm ? r->step_c_next : NULL, r->step_cell_cache,
                     r->step_cell_scratch, r->step_in, r->step_h, lstm ? r->step_c : NULL,
                     params_data(p, r->dec_W_x), params_data(p, r->dec_W_h), params_data(p, r->dec_b),
                     NULL, n, I, H);
        top = r->step_h_next;
    }
    decoder_states_pack(next, r->step_h_next, lstm ? r->step_c_next : NULL, n, H);
    linear_forward(r->step_logits, top, params_data(p, r->out_W), params_data(p, r->out_b), n, H, r->V_tgt);
    log_softmax_forward(logprobs, r->step_logits, n, r->V_tgt);
}

void attn_seq2seq_interface(AttnSeq2Seq *r, Seq2Seq *m) {
    memset(m, 0, sizeof *m);
    m->self = r;
    m->params = &r->params;
    m->train_step = attn_seq2seq_train_step;
    m->encode = attn_seq2seq_encode;
    m->step = attn_seq2seq_step;
    m->destroy = attn_seq2seq_destroy;
    m->state_size = r->cell == CELL_LSTM ? 2 * r->H : r->H;
    m->vocab_size = r->V_tgt;
    m->has_attention = 1;
}

int attn_seq2seq_build(Seq2Seq *m, const Dataset *d, const char *config, int max_batch, uint64_t seed) {
    char cell_name[16], score_text[32], placement_text[32];
    int E, H, A, project_kv;
    CellType cell = CELL_GRU;
    ScoreType score = SCORE_SCALED_DOT;
    Placement placement = PLACEMENT_LUONG;
    if (config_get(config, "cell", cell_name, sizeof cell_name) < 0 ||
        config_get(config, "score", score_text, sizeof score_text) < 0 ||
        config_get(config, "placement", placement_text, sizeof placement_text) < 0 ||
        config_get_int(config, "embed", &E) < 0 || config_get_int(config, "hidden", &H) < 0 ||
        config_get_int(config, "attn", &A) < 0 || config_get_int(config, "project_kv", &project_kv) < 0)
        return -1;
    if (cell_type_parse(cell_name, &cell) < 0 || score_from_name(score_text, &score) < 0 ||
        placement_from_name(placement_text, &placement) < 0)
        return -1;
    if (E < 1 || E > 4096 || H < 1 || H > 4096 || A < 1 || A > 4096)
        return fail("model sizes out of range: embed %d, hidden %d, attn %d (expected 1..4096)", E, H, A);
    AttnSeq2Seq *r = xmalloc(sizeof *r);
    if (attn_seq2seq_create(r, cell, score, placement, project_kv != 0, d->src_vocab.size,
                            d->tgt_vocab.size, E, H, A, max_batch, d->max_src_len, d->max_tgt_len,
                            seed) < 0) {
        free(r);
        return -1;
    }
    attn_seq2seq_interface(r, m);
    return 0;
}
