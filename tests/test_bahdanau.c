/* test_bahdanau.c - chapter 02 as a whole: the hand-written backward pass of
 * the attention model against finite differences (every tensor, every cell
 * type, uni- and bidirectional, padded batches); "against the previous
 * chapter": with the attention pinned on the last encoder state it computes
 * exactly what chapter 01 computes with the same weights; decoding step by
 * step against the batched training pass; masking of padded positions. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "seq2seq_checks.h"

#include "toy_split.h"
#include "02_bahdanau_attention/bahdanau.h"
#include "nn/gradcheck.h"
#include "nn/layers.h"
#include "kernels/matmul.h"
#include "util/util.h"


/* A padded batch of the first n examples (lengths 2..6, so rows are padded). */
static void make_batch(Batch *batch, ToySplit *ts, int n) {
    batch_alloc(batch, n, 6, 6);
    int idx[16];
    for (int i = 0; i < n; i++) idx[i] = i;
    batch_fill(batch, &ts->split, idx, n);
}

typedef struct {
    Bahdanau *model;
    Batch *batch;
} LossCtx;

static double model_loss(void *ctx) {
    LossCtx *c = ctx;
    return bahdanau_train_step(c->model, c->batch, 0);
}

/* Whole-model gradient check: every parameter tensor. */
static void check_model_gradients(CellType cell, int bidirectional) {
    ToySplit ts;
    toy_split(&ts, 5, 5, 2, 6, 1, 11);
    Bahdanau model;
    const BahdanauConfig cfg = {.cell = cell, .D_E = 5, .S = 7, .D_A = 6, .bidirectional = bidirectional};
    assert_int_equal(bahdanau_create(&model, &cfg, 9, 9, 5, 6, 6, 123), 0);
    Batch batch;
    make_batch(&batch, &ts, 5);
    assert_true(batch.src_lens[0] != batch.src_len || batch.src_lens[1] != batch.src_len);
    params_zero_grad(&model.params);
    double loss = bahdanau_train_step(&model, &batch, 1);
    assert_true(isfinite(loss) && loss > 0);

    LossCtx ctx = {&model, &batch};
    for (int k = 0; k < model.params.n_tensors; k++) {
        const ParamTensor *pt = &model.params.tensors[k];
        GradCheckResult res = gradcheck(model_loss, &ctx, model.params.data + pt->offset,
                                        model.params.grad + pt->offset, pt->count, 1e-2f, 60);
        if (res.max_rel_err > 1e-3)
            print_error("%s%s %s: worst entry %zu numeric %.6g analytic %.6g (rel %.3g)\n",
                        bidirectional ? "bidirectional " : "", cell_type_name(cell), pt->name,
                        res.worst_index, res.worst_numeric, res.worst_analytic, res.max_rel_err);
        /* The gradients here are small (about 1e-3), so float32 rounding noise
         * in the loss matters: eps 1e-2 keeps it near 1e-4 relative (the
         * truncation error is smaller still; a correct backward measures at
         * most 2.3e-4 here), and a bound of 1e-3 then catches a missing path
         * such as the query's gradient into s_{t-1} (off by 4e-3 to 3e-2). */
        assert_true(res.max_rel_err < 1e-3);
    }
    batch_free(&batch);
    bahdanau_free(&model);
}

static void test_gradients_rnn(void **state) { (void)state; check_model_gradients(CELL_RNN, 0); }
static void test_gradients_gru(void **state) { (void)state; check_model_gradients(CELL_GRU, 0); }
static void test_gradients_lstm(void **state) { (void)state; check_model_gradients(CELL_LSTM, 0); }
static void test_gradients_rnn_bi(void **state) { (void)state; check_model_gradients(CELL_RNN, 1); }
static void test_gradients_gru_bi(void **state) { (void)state; check_model_gradients(CELL_GRU, 1); }
static void test_gradients_lstm_bi(void **state) { (void)state; check_model_gradients(CELL_LSTM, 1); }

/* The attention kernels on their own, with a loss L = sum_b,i w_bi * a_bi
 * (random w), including padded positions: d/d keys, query, v. */
typedef struct {
    float *weights, *feat, *keys, *query, *v, *w;
    const int *lens;
    int B, T, A;
} KernelCtx;

static double kernel_loss(void *ctx) {
    KernelCtx *k = ctx;
    additive_attention_forward(k->weights, k->feat, k->keys, k->query, k->v, k->lens, k->B, k->T, k->A);
    double loss = 0;
    for (int i = 0; i < k->B * k->T; i++) loss += (double)k->w[i] * k->weights[i];
    return loss;
}

static void test_additive_kernel_gradients(void **state) {
    (void)state;
    enum { B = 3, T = 7, A = 5 };
    int lens[B] = {7, 3, 1};
    float weights[B * T], feat[B * T * A], keys[B * T * A], query[B * A], v[A], w[B * T];
    float dkeys[B * T * A] = {0}, dquery[B * A] = {0}, dv[A] = {0}, dscores[B * T];
    Rng rng;
    rng_seed(&rng, 5, 5);
    init_uniform(keys, B * T * A, 1.0f, &rng);
    init_uniform(query, B * A, 1.0f, &rng);
    init_uniform(v, A, 1.0f, &rng);
    init_uniform(w, B * T, 1.0f, &rng);
    KernelCtx k = {weights, feat, keys, query, v, w, lens, B, T, A};
    kernel_loss(&k);
    /* masking: padded positions get exactly 0, real ones sum to 1 */
    for (int b = 0; b < B; b++) {
        double sum = 0;
        for (int i = 0; i < T; i++) {
            if (i >= lens[b]) assert_true(weights[b * T + i] == 0.0f);
            sum += weights[b * T + i];
        }
        assert_float_equal(sum, 1.0, 1e-6);
    }
    additive_attention_backward(dkeys, dquery, dv, dscores, w, weights, feat, v, lens, B, T, A);
    GradCheckResult res = gradcheck(kernel_loss, &k, keys, dkeys, B * T * A, 1e-3f, 1000);
    assert_true(res.max_rel_err < 1e-2);
    res = gradcheck(kernel_loss, &k, query, dquery, B * A, 1e-3f, 1000);
    assert_true(res.max_rel_err < 1e-2);
    res = gradcheck(kernel_loss, &k, v, dv, A, 1e-3f, 1000);
    assert_true(res.max_rel_err < 1e-2);
}

/* Against the previous chapter: copy a chapter-01 model's tensors by name into
 * a chapter-02 model, pin a_t on the last real encoder state, and compare the
 * teacher-forced probabilities and the greedy outputs. */
static void test_pinned_matches_chapter01(void **state) {
    (void)state;
    ToySplit ts;
    toy_split(&ts, 6, 5, 2, 6, 1, 21);
    CellType cells[3] = {CELL_RNN, CELL_GRU, CELL_LSTM};
    for (int k = 0; k < 3; k++) {
        RnnSeq2Seq ch01;
        Bahdanau ch02;
        assert_int_equal(rnn_seq2seq_create(&ch01, &(RnnConfig){.cell = cells[k], .D_E = 6, .S = 8}, 9, 9, 6, 6, 6, 31), 0);
        assert_int_equal(bahdanau_create(&ch02, &(BahdanauConfig){.cell = cells[k], .D_E = 6, .S = 8, .D_A = 4}, 9, 9, 6, 6, 6, 32), 0);
        for (int i = 0; i < ch01.params.n_tensors; i++) {
            const ParamTensor *src = &ch01.params.tensors[i];
            const ParamTensor *dst = params_find(&ch02.params, src->name);
            assert_non_null(dst);
            assert_int_equal(dst->count, src->count);
            memcpy(ch02.params.data + dst->offset, ch01.params.data + src->offset,
                   sizeof(float) * src->count);
        }
        ch02.pin_last = 1;

        Batch batch;
        make_batch(&batch, &ts, 6);
        double loss01 = rnn_seq2seq_train_step(&ch01, &batch, 0);
        double loss02 = bahdanau_train_step(&ch02, &batch, 0);
        assert_float_equal(loss01, loss02, 1e-5);
        size_t n = (size_t)batch.tgt_len * batch.batch * ch01.dec.V;
        for (size_t i = 0; i < n; i++) {
            assert_float_equal(ch01.logits[i], ch02.logits[i], 1e-5);
            assert_float_equal(ch01.probs[i], ch02.probs[i], 1e-5);
        }

        Seq2Seq m01, m02;
        rnn_seq2seq_interface(&ch01, &m01);
        bahdanau_interface(&ch02, &m02);
        enum { MAX_OUT = 12 };
        int out01[6 * MAX_OUT], out02[6 * MAX_OUT], len01[6], len02[6];
        float *attn = xmalloc(sizeof(float) * 6 * MAX_OUT * (size_t)batch.src_len);
        decode_greedy(&m01, &batch, MAX_OUT, out01, len01, NULL);
        decode_greedy(&m02, &batch, MAX_OUT, out02, len02, attn);
        for (int b = 0; b < batch.batch; b++) {
            assert_int_equal(len01[b], len02[b]);
            assert_memory_equal(out01 + b * MAX_OUT, out02 + b * MAX_OUT, sizeof(int) * (size_t)len01[b]);
            /* first step of row b: all the weight on its last real position */
            assert_true(attn[(size_t)b * MAX_OUT * batch.src_len + batch.src_lens[b] - 1] == 1.0f);
        }
        free(attn);
        batch_free(&batch);
        rnn_seq2seq_free(&ch01);
        bahdanau_free(&ch02);
    }
}

/* Decoding (encode + step, the path greedy and beam search use) must give the
 * batched teacher-forced probabilities and attention weights when fed the
 * same tokens; the rows are given in reverse order to check that step()
 * follows src_row. */
static void test_step_matches_batch(void **state) {
    (void)state;
    ToySplit ts;
    toy_split(&ts, 4, 5, 2, 6, 1, 5);
    CellType cells[3] = {CELL_RNN, CELL_GRU, CELL_LSTM};
    for (int k = 0; k < 6; k++) {
        int bidirectional = k >= 3;
        Bahdanau model;
        const BahdanauConfig cfg = {.cell = cells[k % 3], .D_E = 6, .S = 8, .D_A = 5, .bidirectional = bidirectional};
        assert_int_equal(bahdanau_create(&model, &cfg, 9, 9, 4, 6, 6, 77), 0);
        Seq2Seq m;
        bahdanau_interface(&model, &m);
        Batch batch;
        make_batch(&batch, &ts, 4);
        bahdanau_train_step(&model, &batch, 0);
        check_decoding_matches_training(&m, &batch, model.probs, model.attn, ATTN_TIME_MAJOR);
        batch_free(&batch);
        bahdanau_free(&model);
    }
}

int main(void) {
    backend_select(NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_additive_kernel_gradients),
        cmocka_unit_test(test_gradients_rnn),
        cmocka_unit_test(test_gradients_gru),
        cmocka_unit_test(test_gradients_lstm),
        cmocka_unit_test(test_gradients_rnn_bi),
        cmocka_unit_test(test_gradients_gru_bi),
        cmocka_unit_test(test_gradients_lstm_bi),
        cmocka_unit_test(test_pinned_matches_chapter01),
        cmocka_unit_test(test_step_matches_batch),
    };
    return cmocka_run_group_tests_name("bahdanau", tests, NULL, NULL);
}
