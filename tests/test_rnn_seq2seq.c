/* test_rnn_seq2seq.c - chapter 01 as a whole: the hand-written backward pass
 * through time against finite differences (every cell type, padded batches),
 * greedy decoding against the teacher-forced forward pass, and an end-to-end
 * run in which a tiny encoder-decoder learns to copy short strings. */
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
#include "01_rnn_seq2seq/rnn_seq2seq.h"
#include "nn/gradcheck.h"
#include "nn/layers.h"
#include "kernels/matmul.h"
#include "nn/optim.h"
#include "util/util.h"


typedef struct {
    RnnSeq2Seq *model;
    Batch *batch;
} LossCtx;

static double model_loss(void *ctx) {
    LossCtx *c = ctx;
    return rnn_seq2seq_train_step(c->model, c->batch, 0);
}

/* Whole-model gradient check: every parameter tensor, on a padded batch of
 * sequences of different lengths. */
static void check_model_gradients(CellType cell) {
    ToySplit ts;
    toy_split(&ts, 5, 5, 2, 6, 1, 11);
    RnnSeq2Seq model;
    assert_int_equal(rnn_seq2seq_create(&model, &(RnnConfig){.cell = cell, .D_E = 5, .S = 7}, 9, 9, 5, 6, 6, 123), 0);
    Batch batch;
    batch_alloc(&batch, 5, 6, 6);
    int idx[5] = {0, 1, 2, 3, 4};
    batch_fill(&batch, &ts.split, idx, 5);
    params_zero_grad(&model.params);
    double loss = rnn_seq2seq_train_step(&model, &batch, 1);
    assert_true(isfinite(loss) && loss > 0);

    LossCtx ctx = {&model, &batch};
    for (int k = 0; k < model.params.n_tensors; k++) {
        const ParamTensor *pt = &model.params.tensors[k];
        GradCheckResult res = gradcheck(model_loss, &ctx, model.params.data + pt->offset,
                                        model.params.grad + pt->offset, pt->count, 1e-3f, 60);
        if (res.max_rel_err > 2e-2)
            print_error("%s %s: worst entry %zu numeric %.6g analytic %.6g (rel %.3g)\n",
                        cell_type_name(cell), pt->name, res.worst_index, res.worst_numeric,
                        res.worst_analytic, res.max_rel_err);
        /* float32 forward, double loss, central differences with eps 1e-3:
         * a correct backward agrees to about 1e-3 relative; a wrong one is off by O(1). */
        assert_true(res.max_rel_err < 2e-2);
    }
    batch_free(&batch);
    rnn_seq2seq_free(&model);
}

static void test_gradients_rnn(void **state) { (void)state; check_model_gradients(CELL_RNN); }
static void test_gradients_gru(void **state) { (void)state; check_model_gradients(CELL_GRU); }
static void test_gradients_lstm(void **state) { (void)state; check_model_gradients(CELL_LSTM); }

/* Decoding through encode/step must compute the same probabilities as the
 * batched teacher-forced pass when fed the same tokens. */
static void test_step_matches_batch(void **state) {
    (void)state;
    ToySplit ts;
    toy_split(&ts, 4, 5, 2, 6, 0, 5);
    CellType cells[3] = {CELL_RNN, CELL_GRU, CELL_LSTM};
    for (int k = 0; k < 3; k++) {
        RnnSeq2Seq model;
        assert_int_equal(rnn_seq2seq_create(&model, &(RnnConfig){.cell = cells[k], .D_E = 6, .S = 8}, 9, 9, 4, 6, 6, 77), 0);
        Seq2Seq m;
        rnn_seq2seq_interface(&model, &m);
        Batch batch;
        batch_alloc(&batch, 4, 6, 6);
        int idx[4] = {0, 1, 2, 3};
        batch_fill(&batch, &ts.split, idx, 4);
        rnn_seq2seq_train_step(&model, &batch, 0);
        check_decoding_matches_training(&m, &batch, model.probs, NULL, ATTN_NONE);
        batch_free(&batch);
        rnn_seq2seq_free(&model);
    }
}

/* End to end: a small GRU encoder-decoder learns to copy strings of 1-4
 * symbols from an alphabet of 6, and decodes held-out strings exactly. */
static void test_learns_copy(void **state) {
    (void)state;
    ToySplit *train = xmalloc(sizeof *train), *test = xmalloc(sizeof *test);
    toy_split(train, 512, 6, 1, 4, 0, 1);
    toy_split(test, 200, 6, 1, 4, 0, 2);
    RnnSeq2Seq model;
    assert_int_equal(rnn_seq2seq_create(&model, &(RnnConfig){.cell = CELL_GRU, .D_E = 16, .S = 48}, 10, 10, 32, 4, 4, 9), 0);
    Seq2Seq m;
    rnn_seq2seq_interface(&model, &m);
    Adam opt;
    assert_int_equal(adam_init(&opt, &model.params, 1e-2f, 0.0f), 0);
    Batch batch;
    batch_alloc(&batch, 32, 4, 4);
    Rng rng;
    rng_seed(&rng, 4, 4);
    int idx[32];
    double first = 0, last = 0;
    int steps = 600;
    for (int step = 0; step < steps; step++) {
        for (int i = 0; i < 32; i++) idx[i] = (int)rng_below(&rng, 512);
        batch_fill(&batch, &train->split, idx, 32);
        params_zero_grad(&model.params);
        double loss = rnn_seq2seq_train_step(&model, &batch, 1);
        if (step == 0) first = loss;
        last = loss;
        clip_grad_norm(&model.params, 1.0f);
        adam_step(&opt, &model.params, lr_schedule(step, steps, 20, 1e-2f, 0.1f));
    }
    assert_true(last < 0.2 * first);
    /* greedy decoding, 25 held-out strings at a time; and beam search on a few */
    int exact = 0, out[25 * 8], out_lens[25], idx25[25];
    for (int start = 0; start < test->split.n; start += 25) {
        for (int i = 0; i < 25; i++) idx25[i] = start + i;
        batch_fill(&batch, &test->split, idx25, 25);
        decode_greedy(&m, &batch, 8, out, out_lens, NULL);
        for (int i = 0; i < 25; i++) {
            const Example *e = &test->ex[start + i];
            exact += out_lens[i] == e->tgt_len && memcmp(out + i * 8, e->tgt, sizeof(int) * (size_t)e->tgt_len) == 0;
        }
    }
    int beam_exact = 0;
    for (int i = 0; i < 40; i++) {
        const Example *e = &test->ex[i];
        int n = decode_beam(&m, e->src, e->src_len, 8, 4, out);
        beam_exact += n == e->tgt_len && memcmp(out, e->tgt, sizeof(int) * (size_t)n) == 0;
    }
    assert_true(beam_exact >= 36);
    print_message("copy task: first loss %.3f, last %.3f, held-out exact match %d/%d (beam 4: %d/40)\n", first, last,
                  exact, test->split.n, beam_exact);
    assert_true(exact >= 180);
    adam_free(&opt);
    batch_free(&batch);
    rnn_seq2seq_free(&model);
    free(train);
    free(test);
}

int main(void) {
    backend_select(NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_rnn),
        cmocka_unit_test(test_gradients_gru),
        cmocka_unit_test(test_gradients_lstm),
        cmocka_unit_test(test_step_matches_batch),
        cmocka_unit_test(test_learns_copy),
    };
    return cmocka_run_group_tests_name("rnn_seq2seq", tests, NULL, NULL);
}
