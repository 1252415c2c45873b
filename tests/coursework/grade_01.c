/* grade_01.c - the coursework grader of chapter 01 (see grade.h): the GRU
 * step, the encoder's backpropagation through time, the decoder.
 *
 * Each exercise's checks avoid the others: the GRU against PyTorch's
 * GRUCell; the encoder and the decoder on the tanh RNN cell (not an
 * exercise), their gradients against finite differences. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "01_rnn_seq2seq/rnn_seq2seq.h"
#include "data/vocab.h"
#include "nn/cells.h"

/* ------------------------------------------------------------ 01.gru_step */

/* One case of gru_cell.bin: forward, then backward twice into the same buffers. */
static int gru_case(const GoldCase *c, int with_backward) {
    const GoldTensor *x = grade_tensor(c, "x"), *h_prev = grade_tensor(c, "h_prev");
    const int B = x->dims[0], I = x->dims[1], S = h_prev->dims[1];
    const int *mask = grade_i32_or_null(c, "mask");
    float *h = grade_floats((size_t)B * S), *cache = grade_floats((size_t)B * cell_cache_size(CELL_GRU, S));
    float *scratch = grade_floats((size_t)B * 6 * S);
    cell_forward(h, NULL, cache, scratch, &(CellStep){CELL_GRU, B, I, S, mask, grade_f32(c, "x"), grade_f32(c,
                 "h_prev"), NULL}, &(CellWeights){(float *)grade_f32(c, "W_x"), (float *)grade_f32(c, "W_h"),
                 (float *)grade_f32(c, "b")});
    if (grade_golden_close(c, "h", h, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT)) return -1;
    if (!with_backward) return 0;
    float *dx = grade_floats((size_t)B * I), *dh_prev = grade_floats((size_t)B * S);
    float *dW_x = grade_floats((size_t)I * 3 * S), *dW_h = grade_floats((size_t)S * 3 * S);
    float *db = grade_floats((size_t)3 * S);
    for (int times = 1; times <= 2; times++) {
        cell_backward(dx, dh_prev, NULL, &(CellWeights){dW_x, dW_h, db}, grade_f32(c, "dh"), NULL, cache, scratch,
                      &(CellStep){CELL_GRU, B, I, S, mask, grade_f32(c, "x"), grade_f32(c, "h_prev"), NULL},
                      &(CellWeights){(float *)grade_f32(c, "W_x"), (float *)grade_f32(c, "W_h"), NULL});
        if (grade_golden_close(c, "dh_prev", dh_prev, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dx", dx, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dW_x", dW_x, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dW_h", dW_h, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "db", db, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
            return -1;
    }
    return 0;
}

static int gru_forward_case(const GoldCase *c) { return gru_case(c, 0); }
static int gru_backward_case(const GoldCase *c) { return gru_case(c, 1); }
static int gru_forward(void) { return grade_golden_cases("gru_cell", NULL, gru_forward_case); }
static int gru_backward(void) { return grade_golden_cases("gru_cell", NULL, gru_backward_case); }

/* Large inputs: pre-activations past 50 (n's near +-70, r's and z's up to 60).
 * h' = (1 - z) n + z h stays within [-1, 1] when h does; a tanh written
 * through exp gives inf / inf there. The gradients must stay finite too. */
static int gru_large(void) {
    enum { B = 2, I = 3, S = 4 };
    float *x = grade_floats(B * I), *h_prev = grade_floats(B * S), *dh = grade_floats(B * S);
    float *W_x = grade_floats(I * 3 * S), *W_h = grade_floats(S * 3 * S), *b = grade_floats(3 * S);
    grade_fill(x, B * I, 1.0f, 31);
    grade_fill(h_prev, B * S, 1.0f, 32);
    grade_fill(dh, B * S, 1.0f, 33);
    grade_fill(W_x, I * 3 * S, 5.0f, 34);
    grade_fill(W_h, S * 3 * S, 5.0f, 35);
    grade_fill(b, 3 * S, 60.0f, 36);
    for (int j = 0; j < S; j++) b[2 * S + j] = j % 2 ? -70.0f : 70.0f;   /* n's pre-activations near +-70 */
    float *h = grade_floats(B * S), *cache = grade_floats((size_t)B * cell_cache_size(CELL_GRU, S));
    float *scratch = grade_floats(B * 6 * S);
    cell_forward(h, NULL, cache, scratch, &(CellStep){CELL_GRU, B, I, S, NULL, x, h_prev, NULL},
                 &(CellWeights){W_x, W_h, b});
    if (grade_finite("h' with pre-activations past 50", h, 2, (int[]){B, S}, 1.0f)) return -1;
    float *dx = grade_floats(B * I), *dh_prev = grade_floats(B * S);
    float *dW_x = grade_floats(I * 3 * S), *dW_h = grade_floats(S * 3 * S), *db = grade_floats(3 * S);
    cell_backward(dx, dh_prev, NULL, &(CellWeights){dW_x, dW_h, db}, dh, NULL, cache, scratch,
                  &(CellStep){CELL_GRU, B, I, S, NULL, x, h_prev, NULL}, &(CellWeights){W_x, W_h, NULL});
    if (grade_finite("dh_prev with pre-activations past 50", dh_prev, 2, (int[]){B, S}, INFINITY)) return -1;
    return grade_finite("dW_h with pre-activations past 50", dW_h, 2, (int[]){S, 3 * S}, INFINITY);
}

/* ------------------------------------------------------------ 01.encoder_bptt */

enum { ENC_B = 3, ENC_T = 5, ENC_V = 7, ENC_DE = 3, ENC_S = 4 };

/* An encoder over a padded batch, and L = sum_t w_t . h_t + u . h_T (+ u_c . c_T). */
typedef struct {
    RnnEncoder enc;
    Params p;
    int src[ENC_B * GRADE_LONG], lens[ENC_B];
    int T;                /* the batch's length (ENC_T, or GRADE_LONG) */
    float *w, *u, *u_c;   /* [T, B, S], [B, S], [B, S] */
} EncoderLoss;

static double encoder_loss(void *ctx) {
    EncoderLoss *e = ctx;
    RnnEncoder *enc = &e->enc;
    const int T = e->T ? e->T : ENC_T;
    rnn_encoder_forward(enc, &e->p, e->src, e->lens, ENC_B, T);
    const size_t hs = (size_t)ENC_B * ENC_S;
    double L = 0.0;
    for (size_t i = 0; i < (size_t)T * hs; i++) L += (double)e->w[i] * enc->h[hs + i];
    const float *h_T = rnn_encoder_final_h(enc), *c_T = rnn_encoder_final_c(enc);
    for (size_t i = 0; i < hs; i++) L += (double)e->u[i] * h_T[i] + (c_T ? (double)e->u_c[i] * c_T[i] : 0.0);
    return L;
}

/* T: ENC_T, or GRADE_LONG (longer than the sheet's 40-letter strings:
 * nothing may hold the steps in a fixed array of 32). */
static int encoder_gradients(CellType cell, int T) {
    EncoderLoss e;
    memset(&e, 0, sizeof e);
    e.T = T;
    params_init(&e.p);
    rnn_encoder_declare(&e.enc, &e.p, "enc", cell, ENC_V, ENC_DE, ENC_S);
    if (params_alloc(&e.p) < 0) return grade_fail("params_alloc failed");
    Rng rng;
    rng_seed(&rng, 1, 1);
    rnn_encoder_init(&e.enc, &e.p, &rng);
    rnn_encoder_alloc(&e.enc, ENC_B, T);
    const int lens[ENC_B] = {T, T * 2 / 5, T - 1};   /* padded rows: their last states pass through */
    for (int b = 0; b < ENC_B; b++) {
        e.lens[b] = lens[b];
        for (int t = 0; t < T; t++) e.src[b * T + t] = t < lens[b] ? 3 + (b + 2 * t) % (ENC_V - 3) : PAD_ID;
    }
    const size_t hs = (size_t)ENC_B * ENC_S;
    e.w = grade_floats(T * hs);
    e.u = grade_floats(hs);
    e.u_c = grade_floats(hs);
    grade_fill(e.w, T * hs, T > ENC_T ? 0.3f : 1.0f, 2);
    grade_fill(e.u, hs, 1.0f, 3);
    grade_fill(e.u_c, hs, 1.0f, 4);

    encoder_loss(&e);
    params_zero_grad(&e.p);
    rnn_encoder_backward(&e.enc, &e.p, e.w, e.u, cell_has_c(cell) ? e.u_c : NULL);
    int result = 0;
    for (int k = 0; k < e.p.n_tensors && result == 0; k++) {
        const ParamTensor *t = &e.p.tensors[k];
        char what[96];
        snprintf(what, sizeof what, "%s cell: d %s", cell_type_name(cell), t->name);
        result = grade_gradient(what, encoder_loss, &e, e.p.data + t->offset, e.p.grad + t->offset, t->ndim,
                                t->dims, 1e-2f, 1e-2);
    }
    rnn_encoder_free(&e.enc);
    params_free(&e.p);
    return result;
}

static int encoder_rnn(void) { return encoder_gradients(CELL_RNN, ENC_T); }
static int encoder_lstm(void) { return encoder_gradients(CELL_LSTM, ENC_T); }
static int encoder_long(void) { return encoder_gradients(CELL_RNN, GRADE_LONG); }

/* ------------------------------------------------------------ 01.decoder */

enum { DEC_B = 3, DEC_T = 4, DEC_TT = 4, DEC_V = 8, DEC_DE = 3, DEC_S = 5 };

typedef struct {
    RnnSeq2Seq model;
    Batch batch;
} Decoder;

/* A tanh-RNN encoder-decoder and a padded batch (targets of 4, 2, 3 tokens, <eos> included). */
static int decoder_make(Decoder *d) {
    memset(d, 0, sizeof *d);
    const RnnConfig cfg = {.cell = CELL_RNN, .D_E = DEC_DE, .S = DEC_S};
    if (rnn_seq2seq_create(&d->model, &cfg, DEC_V, DEC_V, DEC_B, DEC_T, DEC_TT - 1, 5) < 0)
        return grade_fail("rnn_seq2seq_create failed");
    Batch *b = &d->batch;
    b->batch = DEC_B;
    b->src_len = DEC_T;
    b->tgt_len = DEC_TT;
    b->src = grade_ints(DEC_B * DEC_T);
    b->src_lens = grade_ints(DEC_B);
    b->tgt_in = grade_ints(DEC_B * DEC_TT);
    b->tgt_out = grade_ints(DEC_B * DEC_TT);
    b->tgt_lens = grade_ints(DEC_B);
    const int src_lens[DEC_B] = {4, 3, 2}, tgt_lens[DEC_B] = {4, 2, 3};
    for (int r = 0; r < DEC_B; r++) {
        b->src_lens[r] = src_lens[r];
        b->tgt_lens[r] = tgt_lens[r];
        for (int t = 0; t < DEC_T; t++) b->src[r * DEC_T + t] = t < src_lens[r] ? 3 + (r + t) % 5 : PAD_ID;
        for (int t = 0; t < DEC_TT; t++) {
            int y = 3 + (2 * r + 3 * t) % 5;   /* the target token y_t */
            b->tgt_out[r * DEC_TT + t] = t < tgt_lens[r] - 1 ? y : t == tgt_lens[r] - 1 ? EOS_ID : PAD_ID;
            b->tgt_in[r * DEC_TT + t] = t == 0 ? BOS_ID : t < tgt_lens[r] ? b->tgt_out[r * DEC_TT + t - 1] : PAD_ID;
        }
    }
    return 0;
}

static double decoder_loss(void *ctx) {
    Decoder *d = ctx;
    return rnn_seq2seq_train_step(&d->model, &d->batch, 0);
}

/* The training loss against decoding the true tokens one step at a time
 * (encode + step, which are not part of the exercise). */
static int teacher_forcing(void) {
    Decoder d;
    if (decoder_make(&d)) return -1;
    const double loss = decoder_loss(&d);
    const int S = d.model.dec.S;
    float *states = grade_floats((size_t)DEC_B * S), *next = grade_floats((size_t)DEC_B * S);
    float *logprobs = grade_floats((size_t)DEC_B * DEC_V);
    int src_row[DEC_B], prev[DEC_B], n_tokens = 0;
    double sum = 0.0;
    rnn_seq2seq_encode(&d.model, &d.batch, states);
    for (int r = 0; r < DEC_B; r++) src_row[r] = r;
    for (int t = 0; t < DEC_TT; t++) {
        for (int r = 0; r < DEC_B; r++) prev[r] = d.batch.tgt_in[r * DEC_TT + t];
        rnn_seq2seq_step(&d.model, DEC_B, src_row, states, prev, next, logprobs, NULL);
        for (int r = 0; r < DEC_B; r++) {
            const int y = d.batch.tgt_out[r * DEC_TT + t];
            if (y == PAD_ID) continue;
            sum -= logprobs[r * DEC_V + y];
            n_tokens++;
        }
        memcpy(states, next, sizeof(float) * (size_t)DEC_B * S);
    }
    const double want = sum / n_tokens;
    rnn_seq2seq_free(&d.model);
    const float got_loss = (float)loss, want_loss = (float)want;
    if (grade_close("the teacher-forced loss", "the loss of decoding the true tokens step by step", &got_loss,
                    &want_loss, 1, (int[]){1}, 1e-5, 1e-5))
        return grade_fail("the teacher-forced loss %.6f differs from %.6f, the loss of decoding the true tokens "
                          "step by step", loss, want);
    return 0;
}

/* Every gradient of the decoder's parameters (dec.*, and out.* through it). */
static int decoder_gradients(void) {
    Decoder d;
    if (decoder_make(&d)) return -1;
    Params *p = &d.model.params;
    params_zero_grad(p);
    rnn_seq2seq_train_step(&d.model, &d.batch, 1);
    int result = 0;
    for (int k = 0; k < p->n_tensors && result == 0; k++) {
        const ParamTensor *t = &p->tensors[k];
        if (strncmp(t->name, "enc.", 4) == 0) continue;   /* the encoder's: exercise 01.encoder_bptt */
        char what[64];
        snprintf(what, sizeof what, "d %s", t->name);
        result = grade_gradient(what, decoder_loss, &d, p->data + t->offset, p->grad + t->offset, t->ndim, t->dims,
                                1e-3f, 1e-2);
    }
    rnn_seq2seq_free(&d.model);
    return result;
}

/* The gradient the decoder hands to the context c = h_T (dec.g.dh after the
 * backward pass: through s_0 and through every step's input). With the
 * encoder's W_x = W_h = 0 every h_t is tanh(b), so the loss depends on the
 * encoder's bias b through c alone, and dL/db_j = sum_rows dL/dc_j (1 - c_j^2)
 * can be compared with finite differences without the encoder's own backward. */
static int context_gradient(void) {
    Decoder d;
    if (decoder_make(&d)) return -1;
    Params *p = &d.model.params;
    RnnEncoder *enc = &d.model.enc;
    memset(params_data(p, enc->W_x), 0, sizeof(float) * (size_t)enc->D_E * enc->S);
    memset(params_data(p, enc->W_h), 0, sizeof(float) * (size_t)enc->S * enc->S);
    params_zero_grad(p);
    rnn_seq2seq_train_step(&d.model, &d.batch, 1);
    const int S = enc->S;
    float *b_enc = params_data(p, enc->b), *analytic = grade_floats((size_t)S);
    for (int j = 0; j < S; j++) {
        const double c = tanh((double)b_enc[j]);
        for (int r = 0; r < DEC_B; r++) analytic[j] += (float)(d.model.dec.g.dh[r * S + j] * (1.0 - c * c));
    }
    int result = grade_gradient("the gradient reaching the context c (through b of a constant encoder)",
                                decoder_loss, &d, b_enc, analytic, 1, (int[]){S}, 1e-3f, 1e-2);
    rnn_seq2seq_free(&d.model);
    return result;
}

/* Two training steps on the same batch and state, without zeroing the
 * gradients between them: every decoder gradient twice that of one step,
 * and the gradient handed to the context the same both times (nothing may
 * be cleared on the first call only). */
static int decoder_twice(void) {
    Decoder d;
    if (decoder_make(&d)) return -1;
    Params *p = &d.model.params;
    const int S = d.model.dec.S;
    params_zero_grad(p);
    rnn_seq2seq_train_step(&d.model, &d.batch, 1);
    float *once = grade_floats(p->size), *dc_once = grade_floats((size_t)DEC_B * S);
    memcpy(once, p->grad, sizeof(float) * p->size);
    memcpy(dc_once, d.model.dec.g.dh, sizeof(float) * (size_t)DEC_B * S);
    rnn_seq2seq_train_step(&d.model, &d.batch, 1);
    int result = grade_close("the gradient reaching the context c on the second step", "the first step's",
                             d.model.dec.g.dh, dc_once, 2, (int[]){DEC_B, S}, 1e-5, 1e-6);
    for (int k = 0; k < p->n_tensors && result == 0; k++) {
        const ParamTensor *t = &p->tensors[k];
        if (strncmp(t->name, "enc.", 4) == 0) continue;   /* the encoder's: exercise 01.encoder_bptt */
        char what[64];
        snprintf(what, sizeof what, "d %s", t->name);
        result = grade_added(what, p->grad + t->offset, NULL, once + t->offset, 2, t->ndim, t->dims, 1e-5, 1e-6);
    }
    rnn_seq2seq_free(&d.model);
    return result;
}

/* ------------------------------------------------------------ hidden checks
 *
 * make grade-submissions only (grade.h): shapes, lengths, tokens and weights
 * drawn from the teacher's seed, outputs and gradients compared with the
 * reference solution's. As above, the encoder and the decoder run on the
 * tanh RNN and the LSTM, never the GRU, and the decoder's check compares
 * only the decoder's gradients. */

/* with_mask: a drawn mask with at least one padded row (its state passes through). */
static int hidden_gru_with(int with_mask) {
    const int B = grade_draw(1, 4), I = grade_draw(1, 5), S = grade_draw(1, 5);
    int *mask = with_mask ? grade_ints((size_t)B) : NULL;
    for (int b = 0; mask && b < B; b++) mask[b] = grade_draw(0, 1);
    if (mask) mask[grade_draw(0, B - 1)] = 0;
    float *x = grade_floats((size_t)B * I), *h_prev = grade_floats((size_t)B * S), *dh = grade_floats((size_t)B * S);
    float *W_x = grade_floats((size_t)I * 3 * S), *W_h = grade_floats((size_t)S * 3 * S),
                              *b = grade_floats((size_t)3 * S);
    grade_draw_fill(x, (size_t)B * I, 1.0f);
    grade_draw_fill(h_prev, (size_t)B * S, 1.0f);
    grade_draw_fill(dh, (size_t)B * S, 1.0f);
    grade_draw_fill(W_x, (size_t)I * 3 * S, 0.8f);
    grade_draw_fill(W_h, (size_t)S * 3 * S, 0.8f);
    grade_draw_fill(b, (size_t)3 * S, 0.5f);
    float *h = grade_floats((size_t)B * S), *cache = grade_floats((size_t)B * cell_cache_size(CELL_GRU, S));
    float *scratch = grade_floats((size_t)B * 6 * S);
    cell_forward(h, NULL, cache, scratch, &(CellStep){CELL_GRU, B, I, S, mask, x, h_prev, NULL},
                 &(CellWeights){W_x, W_h, b});
    if (grade_reference("h", h, 2, (int[]){B, S}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) return -1;
    float *dx = grade_floats((size_t)B * I), *dh_prev = grade_floats((size_t)B * S);
    float *dW_x = grade_floats((size_t)I * 3 * S), *dW_h = grade_floats((size_t)S * 3 * S),
                               *db = grade_floats((size_t)3 * S);
    grade_draw_fill(dW_x, (size_t)I * 3 * S, 1.0f);   /* backward adds to what is there */
    grade_draw_fill(dW_h, (size_t)S * 3 * S, 1.0f);
    grade_draw_fill(db, (size_t)3 * S, 1.0f);
    cell_backward(dx, dh_prev, NULL, &(CellWeights){dW_x, dW_h, db}, dh, NULL, cache, scratch,
                  &(CellStep){CELL_GRU, B, I, S, mask, x, h_prev, NULL}, &(CellWeights){W_x, W_h, NULL});
    if (grade_reference("dh_prev", dh_prev, 2, (int[]){B, S}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
        grade_reference("dx", dx, 2, (int[]){B, I}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
        grade_reference("dW_x", dW_x, 2, (int[]){I, 3 * S}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
        grade_reference("dW_h", dW_h, 2, (int[]){S, 3 * S}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
        return -1;
    return grade_reference("db", db, 1, (int[]){3 * S}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

/* Every parameter's gradient of a drawn tanh-RNN or LSTM encoder under the
 * loss of encoder_loss, on drawn lengths and tokens. */
static int hidden_encoder(void) {
    const CellType cell = grade_draw(0, 1) ? CELL_LSTM : CELL_RNN;
    const int B = grade_draw(1, ENC_B), T = grade_draw(1, ENC_T);
    EncoderLoss e;
    memset(&e, 0, sizeof e);
    params_init(&e.p);
    rnn_encoder_declare(&e.enc, &e.p, "enc", cell, ENC_V, ENC_DE, ENC_S);
    if (params_alloc(&e.p) < 0) return grade_fail("params_alloc failed");
    Rng rng;
    rng_seed(&rng, (uint64_t)grade_draw(1, 1 << 30), 1);
    rnn_encoder_init(&e.enc, &e.p, &rng);
    rnn_encoder_alloc(&e.enc, B, T);
    for (int b = 0; b < B; b++) {
        e.lens[b] = grade_draw(1, T);
        for (int t = 0; t < T; t++) e.src[b * T + t] = t < e.lens[b] ? grade_draw(3, ENC_V - 1) : PAD_ID;
    }
    const size_t hs = (size_t)B * ENC_S;
    e.w = grade_floats(T * hs);
    e.u = grade_floats(hs);
    e.u_c = grade_floats(hs);
    grade_draw_fill(e.w, T * hs, 1.0f);
    grade_draw_fill(e.u, hs, 1.0f);
    grade_draw_fill(e.u_c, hs, 1.0f);
    rnn_encoder_forward(&e.enc, &e.p, e.src, e.lens, B, T);
    params_zero_grad(&e.p);
    rnn_encoder_backward(&e.enc, &e.p, e.w, e.u, cell_has_c(cell) ? e.u_c : NULL);
    const int n = (int)e.p.size;
    const int result = grade_reference("every encoder parameter's gradient", e.p.grad, 1, (int[]){n}, GRADE_RTOL_GRAD,
                                       GRADE_ATOL_GRAD);
    rnn_encoder_free(&e.enc);
    params_free(&e.p);
    return result;
}

/* The loss, the decoder's gradients (dec.*, out.*) and the one it hands to
 * the context, of a drawn batch. */
static int hidden_decoder(void) {
    const CellType cell = grade_draw(0, 1) ? CELL_LSTM : CELL_RNN;
    const int B = grade_draw(1, 3), T = grade_draw(1, 5), TT = grade_draw(2, 5), V = grade_draw(5, 9);
    const RnnConfig cfg = {.cell = cell, .D_E = grade_draw(1, 4), .S = grade_draw(1, 5)};
    RnnSeq2Seq model;
    if (rnn_seq2seq_create(&model, &cfg, V, V, B, T, TT - 1, (uint64_t)grade_draw(1, 1 << 30)) < 0)
        return grade_fail("rnn_seq2seq_create failed");
    Batch batch = {0};
    batch.batch = B;
    batch.src_len = T;
    batch.tgt_len = TT;
    batch.src = grade_ints((size_t)B * T);
    batch.src_lens = grade_ints((size_t)B);
    batch.tgt_in = grade_ints((size_t)B * TT);
    batch.tgt_out = grade_ints((size_t)B * TT);
    batch.tgt_lens = grade_ints((size_t)B);
    for (int r = 0; r < B; r++) {
        batch.src_lens[r] = grade_draw(1, T);
        batch.tgt_lens[r] = grade_draw(1, TT);
        for (int t = 0; t < T; t++) batch.src[r * T + t] = t < batch.src_lens[r] ? grade_draw(3, V - 1) : PAD_ID;
        for (int t = 0; t < TT; t++) {
            const int y = grade_draw(3, V - 1), len = batch.tgt_lens[r];
            batch.tgt_out[r * TT + t] = t < len - 1 ? y : t == len - 1 ? EOS_ID : PAD_ID;
            batch.tgt_in[r * TT + t] = t == 0 ? BOS_ID : t < len ? batch.tgt_out[r * TT + t - 1] : PAD_ID;
        }
    }
    Params *p = &model.params;
    params_zero_grad(p);
    const float loss = (float)rnn_seq2seq_train_step(&model, &batch, 1);
    int result = grade_reference("the loss", &loss, 1, (int[]){1}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
    if (result == 0)   /* dec.g.dh: what the decoder hands back to the context c = h_T */
        result = grade_reference("the gradient reaching the context c", model.dec.g.dh, 2, (int[]){B, cfg.S},
                                 GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
    for (int k = 0; k < p->n_tensors && result == 0; k++) {
        const ParamTensor *t = &p->tensors[k];
        if (strncmp(t->name, "enc.", 4) == 0) continue;   /* the encoder's: exercise 01.encoder_bptt */
        char what[64];
        snprintf(what, sizeof what, "d %s", t->name);
        result = grade_reference(what, p->grad + t->offset, t->ndim, t->dims, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
    }
    rnn_seq2seq_free(&model);
    return result;
}

static int hidden_gru(void) { return hidden_gru_with(0); }
static int hidden_gru_masked(void) { return hidden_gru_with(1); }

/* ------------------------------------------------------------ end to end */

/* The chapter's GRU encoder-decoder trained GRADE_TRAIN_STEPS steps on reverse (grade.h):
 * each step's loss the solution's. */
static int training(void) {
    RnnSeq2Seq model;
    const RnnConfig cfg = {.cell = CELL_GRU, .D_E = 8, .S = 16};
    if (rnn_seq2seq_create(&model, &cfg, GRADE_TRAIN_V, GRADE_TRAIN_V, GRADE_TRAIN_B, GRADE_TRAIN_T,
                           GRADE_TRAIN_T + 1, 3) < 0) return grade_fail("rnn_seq2seq_create failed");
    Seq2Seq m;
    rnn_seq2seq_interface(&model, &m);
    const int rc = grade_seq2seq_training("01 GRU encoder-decoder on reverse", &m);
    rnn_seq2seq_free(&model);
    return rc;
}

static const GradeCheck HIDDEN_GRU_STEP[] = {
    {"h and every gradient of a GRU step on a drawn shape", hidden_gru},
    {"the same with padded rows (a drawn mask)", hidden_gru_masked},
    {"end to end: 40 training steps of the GRU encoder-decoder, each loss the solution's", training},
};
static const GradeCheck HIDDEN_ENCODER_BPTT[] = {
    {"every gradient of a drawn encoder (RNN or LSTM), lengths and tokens", hidden_encoder},
    {"the same for another drawn encoder", hidden_encoder},
    {"end to end: 40 training steps of the GRU encoder-decoder, each loss the solution's", training},
};
static const GradeCheck HIDDEN_DECODER[] = {
    {"the loss and the decoder's gradients on a drawn model and batch", hidden_decoder},
    {"the same on another drawn model and batch", hidden_decoder},
    {"end to end: 40 training steps of the GRU encoder-decoder, each loss the solution's", training},
};
static const GradeExercise HIDDEN[] = {
    {"01.gru_step", HIDDEN_GRU_STEP, GRADE_COUNT(HIDDEN_GRU_STEP)},
    {"01.encoder_bptt", HIDDEN_ENCODER_BPTT, GRADE_COUNT(HIDDEN_ENCODER_BPTT)},
    {"01.decoder", HIDDEN_DECODER, GRADE_COUNT(HIDDEN_DECODER)},
};

/* ------------------------------------------------------------ the exercises */

static const GradeCheck GRU_STEP[] = {
    {"h' against PyTorch's GRUCell", gru_forward},
    {"the step's gradients against PyTorch's autograd", gru_backward},
    {"large inputs (pre-activations past 50): h' within [-1, 1], gradients finite", gru_large},
};
static const GradeCheck ENCODER_BPTT[] = {
    {"encoder gradients, tanh RNN cell, padded batch, against finite differences", encoder_rnn},
    {"encoder gradients, LSTM cell, padded batch, against finite differences", encoder_lstm},
    {"encoder gradients over 48 steps (longer than the sheet's 40-letter strings), against finite differences",
     encoder_long},
};
static const GradeCheck DECODER[] = {
    {"teacher forcing: the training loss against step-by-step decoding", teacher_forcing},
    {"decoder gradients against finite differences", decoder_gradients},
    {"the gradient reaching the context c against finite differences", context_gradient},
    {"two training steps on the same batch: the gradients add up, the context's the same again", decoder_twice},
};
static const GradeExercise EXERCISES[] = {
    {"01.gru_step", GRU_STEP, GRADE_COUNT(GRU_STEP)},
    {"01.encoder_bptt", ENCODER_BPTT, GRADE_COUNT(ENCODER_BPTT)},
    {"01.decoder", DECODER, GRADE_COUNT(DECODER)},
};

int main(int argc, char **argv) {
    return grade_main_hidden(argc, argv, EXERCISES, GRADE_COUNT(EXERCISES), HIDDEN, GRADE_COUNT(HIDDEN));
}
