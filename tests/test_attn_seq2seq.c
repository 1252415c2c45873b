/* test_attn_seq2seq.c - chapter 03's encoder-decoder with the general
 * attention layer in its decoder (chapters/03_dot_product_attention/attn_seq2seq.c):
 *  - the whole model's hand-written backward pass against finite differences,
 *    for every score function, both placements, every cell, and with the
 *    cross-attention projections W_K, W_V, on a padded batch;
 *  - against the previous chapter: with the additive score, the Bahdanau
 *    placement and chapter 02's weights, the layer produces chapter 02's
 *    attention weights and contexts (and so its probabilities and greedy output);
 *  - decoding step by step (one query per call) against the batched training
 *    pass (the Luong placement runs all queries of a sequence in one call there),
 *    with padded positions getting weight exactly 0. */
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
#include "03_dot_product_attention/attn_seq2seq.h"
#include "nn/gradcheck.h"
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
    AttnSeq2Seq *model;
    Batch *batch;
} LossCtx;

static double model_loss(void *ctx) {
    LossCtx *c = ctx;
    return attn_seq2seq_train_step(c->model, c->batch, 0);
}

/* Whole-model gradient check: every parameter tensor. */
static void check_model_gradients(CellType cell, ScoreType score, Placement placement, int project_kv) {
    ToySplit ts;
    toy_split(&ts, 5, 5, 2, 6, 1, 11);
    AttnSeq2Seq model;
    const AttnSeq2SeqConfig cfg = {.cell = cell, .D_E = 5, .S = 7, .score = score, .placement = placement,
                                   .D_A = 6, .project_kv = project_kv};
    assert_int_equal(attn_seq2seq_create(&model, &cfg, 9, 9, 5, 6, 6, 123), 0);
    Batch batch;
    make_batch(&batch, &ts, 5);
    assert_true(batch.src_lens[0] != batch.src_len || batch.src_lens[1] != batch.src_len);
    params_zero_grad(&model.params);
    double loss = attn_seq2seq_train_step(&model, &batch, 1);
    assert_true(isfinite(loss) && loss > 0);

    LossCtx ctx = {&model, &batch};
    for (int k = 0; k < model.params.n_tensors; k++) {
        const ParamTensor *pt = &model.params.tensors[k];
        GradCheckResult res = gradcheck(model_loss, &ctx, model.params.data + pt->offset,
                                        model.params.grad + pt->offset, pt->count, 1e-2f, 60);
        if (res.max_rel_err > 1e-3)
            print_error("%s %s %s%s %s: worst entry %zu numeric %.6g analytic %.6g (rel %.3g)\n",
                        cell_type_name(cell), score_name(score), placement_name(placement),
                        project_kv ? " project-kv" : "", pt->name, res.worst_index, res.worst_numeric,
                        res.worst_analytic, res.max_rel_err);
        /* as in test_bahdanau.c: eps 1e-2 keeps the float32 rounding noise of
         * the loss near 1e-4 relative; a missing path is off by far more */
        assert_true(res.max_rel_err < 1e-3);
    }
    batch_free(&batch);
    attn_seq2seq_free(&model);
}

static void gradients_all_scores(Placement placement) {
    for (int s = 0; s < SCORE_N_TYPES; s++) check_model_gradients(CELL_GRU, (ScoreType)s, placement, 0);
}
static void test_gradients_luong(void **state) { (void)state; gradients_all_scores(PLACEMENT_LUONG); }
static void test_gradients_bahdanau(void **state) { (void)state; gradients_all_scores(PLACEMENT_BAHDANAU); }
static void test_gradients_cells(void **state) {
    (void)state;
    check_model_gradients(CELL_RNN, SCORE_SCALED_DOT, PLACEMENT_LUONG, 0);
    check_model_gradients(CELL_LSTM, SCORE_SCALED_DOT, PLACEMENT_LUONG, 0);
    check_model_gradients(CELL_LSTM, SCORE_MULTIPLICATIVE, PLACEMENT_BAHDANAU, 0);
}
static void test_gradients_project_kv(void **state) {
    (void)state;
    check_model_gradients(CELL_GRU, SCORE_SCALED_DOT, PLACEMENT_LUONG, 1);
    check_model_gradients(CELL_GRU, SCORE_ADDITIVE, PLACEMENT_LUONG, 1);
    check_model_gradients(CELL_GRU, SCORE_DOT, PLACEMENT_BAHDANAU, 1);
}

/* Against the previous chapter: a chapter-02 model and a chapter-03 model
 * (additive score, Bahdanau placement) with the same weights, copied by name,
 * compute the same attention weights a_t, contexts c_t, probabilities and
 * greedy outputs. */
static void test_additive_matches_chapter02(void **state) {
    (void)state;
    ToySplit ts;
    toy_split(&ts, 6, 5, 2, 6, 1, 21);
    CellType cells[3] = {CELL_RNN, CELL_GRU, CELL_LSTM};
    for (int k = 0; k < 3; k++) {
        Bahdanau ch02;
        AttnSeq2Seq ch03;
        const int E = 6, H = 8, A = 5;
        const BahdanauConfig cfg02 = {.cell = cells[k], .D_E = E, .S = H, .D_A = A, .bidirectional = 0};
        const AttnSeq2SeqConfig cfg03 = {.cell = cells[k], .D_E = E, .S = H, .score = SCORE_ADDITIVE,
                                         .placement = PLACEMENT_BAHDANAU, .D_A = A, .project_kv = 0};
        assert_int_equal(bahdanau_create(&ch02, &cfg02, 9, 9, 6, 6, 6, 31), 0);
        assert_int_equal(attn_seq2seq_create(&ch03, &cfg03, 9, 9, 6, 6, 6, 32), 0);
        /* every chapter-03 tensor has a chapter-02 twin of the same name and size */
        assert_int_equal(ch02.params.size, ch03.params.size);
        for (int i = 0; i < ch03.params.n_tensors; i++) {
            const ParamTensor *dst = &ch03.params.tensors[i];
            const ParamTensor *src = params_find(&ch02.params, dst->name);
            assert_non_null(src);
            assert_int_equal(dst->count, src->count);
            memcpy(ch03.params.data + dst->offset, ch02.params.data + src->offset, sizeof(float) * src->count);
        }

        Batch batch;
        make_batch(&batch, &ts, 6);
        double loss02 = bahdanau_train_step(&ch02, &batch, 0);
        double loss03 = attn_seq2seq_train_step(&ch03, &batch, 0);
        assert_float_equal(loss02, loss03, 1e-5);
        int B = batch.batch, T = batch.src_len, Tt = batch.tgt_len, I = E + H;
        for (int t = 0; t < Tt; t++)
            for (int b = 0; b < B; b++) {
                /* chapter 02 keeps a_t time-major [Tt, B, T] and c_t inside the
                 * cell input [embed ; c_t]; chapter 03 keeps both batch-major */
                for (int j = 0; j < T; j++)
                    assert_float_equal(ch02.attn[((size_t)t * B + b) * T + j],
                                       ch03.attn[((size_t)b * Tt + t) * T + j], 1e-5);
                for (int h = 0; h < H; h++)
                    assert_float_equal(ch02.dec.in[((size_t)t * B + b) * I + E + h],
                                       ch03.ctx[((size_t)b * Tt + t) * H + h], 1e-5);
            }
        size_t n = (size_t)Tt * B * ch02.dec.V;
        for (size_t i = 0; i < n; i++) assert_float_equal(ch02.probs[i], ch03.probs[i], 1e-5);

        Seq2Seq m02, m03;
        bahdanau_interface(&ch02, &m02);
        attn_seq2seq_interface(&ch03, &m03);
        enum { MAX_OUT = 12 };
        int out02[6 * MAX_OUT], out03[6 * MAX_OUT], len02[6], len03[6];
        float *attn02 = xmalloc(sizeof(float) * 6 * MAX_OUT * (size_t)T);
        float *attn03 = xmalloc(sizeof(float) * 6 * MAX_OUT * (size_t)T);
        decode_greedy(&m02, &batch, MAX_OUT, out02, len02, attn02);
        decode_greedy(&m03, &batch, MAX_OUT, out03, len03, attn03);
        for (int b = 0; b < B; b++) {
            assert_int_equal(len02[b], len03[b]);
            assert_memory_equal(out02 + b * MAX_OUT, out03 + b * MAX_OUT, sizeof(int) * (size_t)len02[b]);
            for (int t = 0; t <= len02[b] && t < MAX_OUT; t++)
                for (int j = 0; j < T; j++) {
                    size_t at = ((size_t)b * MAX_OUT + t) * T + j;
                    assert_float_equal(attn02[at], attn03[at], 1e-5);
                }
        }
        free(attn02);
        free(attn03);
        batch_free(&batch);
        bahdanau_free(&ch02);
        attn_seq2seq_free(&ch03);
    }
}

/* Decoding (encode + step, one query per call) against the batched
 * teacher-forced pass, rows given in reverse order to check src_row. */
static void check_step_matches_batch(CellType cell, ScoreType score, Placement placement, int project_kv) {
    ToySplit ts;
    toy_split(&ts, 4, 5, 2, 6, 1, 5);
    AttnSeq2Seq model;
    const AttnSeq2SeqConfig cfg = {.cell = cell, .D_E = 6, .S = 8, .score = score, .placement = placement,
                                   .D_A = 5, .project_kv = project_kv};
    assert_int_equal(attn_seq2seq_create(&model, &cfg, 9, 9, 4, 6, 6, 77), 0);
    Seq2Seq m;
    attn_seq2seq_interface(&model, &m);
    Batch batch;
    make_batch(&batch, &ts, 4);
    attn_seq2seq_train_step(&model, &batch, 0);
    check_decoding_matches_training(&m, &batch, model.probs, model.attn, ATTN_BATCH_MAJOR);
    batch_free(&batch);
    attn_seq2seq_free(&model);
}

static void test_step_matches_batch(void **state) {
    (void)state;
    for (int s = 0; s < SCORE_N_TYPES; s++)
        for (int placement = 0; placement < 2; placement++)
            check_step_matches_batch(CELL_GRU, (ScoreType)s, (Placement)placement, 0);
    check_step_matches_batch(CELL_LSTM, SCORE_SCALED_DOT, PLACEMENT_LUONG, 0);
    check_step_matches_batch(CELL_LSTM, SCORE_ADDITIVE, PLACEMENT_BAHDANAU, 0);
    check_step_matches_batch(CELL_GRU, SCORE_MULTIPLICATIVE, PLACEMENT_LUONG, 1);
}

int main(void) {
    backend_select(NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_luong),
        cmocka_unit_test(test_gradients_bahdanau),
        cmocka_unit_test(test_gradients_cells),
        cmocka_unit_test(test_gradients_project_kv),
        cmocka_unit_test(test_additive_matches_chapter02),
        cmocka_unit_test(test_step_matches_batch),
    };
    return cmocka_run_group_tests_name("attn_seq2seq", tests, NULL, NULL);
}
