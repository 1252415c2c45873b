/* grade_attention.h - chapter 03's attention layer on a case of
 * tests/golden/attention.bin, for the graders of chapters 03 and 04 (the
 * scores, and the masks through the layer). Header-only, like
 * tests/seq2seq_checks.h: include it after grade.h. */
#ifndef GRADE_ATTENTION_H
#define GRADE_ATTENTION_H
#include "03_dot_product_attention/attention.h"

/* The case's score function and its weights (absent ones NULL). */
static ScoreSpec case_spec(const GoldCase *c) {
    const GoldTensor *Q = grade_tensor(c, "Q"), *K = grade_tensor(c, "K"), *W_1 = grade_tensor(c, "W_1");
    ScoreSpec s = {(ScoreType)grade_i32(c, "score")[0], Q->dims[1], K->dims[1], W_1 ? W_1->dims[1] : 0};
    return s;
}

static ScoreWeights case_weights(const GoldCase *c) {
    ScoreWeights w = {(float *)grade_f32_or_null(c, "W"), (float *)grade_f32_or_null(c, "W_1"),
                      (float *)grade_f32_or_null(c, "W_2"), (float *)grade_f32_or_null(c, "v")};
    return w;
}

static AttentionMask case_mask(const GoldCase *c) {
    AttentionMask m = {grade_i32_or_null(c, "allowed"), grade_i32(c, "causal")[0], grade_i32(c, "key_len")[0], 0};
    return m;
}

/* 1: attention_case's Y, A and cache start as garbage (grade_garbage): the
 * layer must write them, not add to what they held. */
static int attention_garbage = 0;

/* attention_forward against the case's A and Y; with_backward: then
 * attention_backward, twice into the same buffers, against every gradient. */
static int attention_case(const GoldCase *c, int with_backward) {
    const GoldTensor *Q = grade_tensor(c, "Q"), *K = grade_tensor(c, "K"), *V = grade_tensor(c, "V");
    const int N_Q = Q->dims[0], N_X = K->dims[0], D_V = V->dims[1];
    const ScoreSpec s = case_spec(c);
    const ScoreWeights w = case_weights(c);
    const AttentionMask mask = case_mask(c);
    float *(*buffer)(size_t) = attention_garbage ? grade_garbage : grade_floats;
    float *Y = buffer((size_t)N_Q * D_V), *A = buffer((size_t)N_Q * N_X);
    float *cache = buffer(attention_cache_floats(&s, N_Q, N_X));
    attention_forward(Y, A, cache, Q->data, K->data, V->data, &s, &w, &mask, N_Q, N_X, D_V);
    if (grade_golden_close(c, "A", A, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT) ||
        grade_golden_close(c, "Y", Y, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT))
        return -1;
    if (!with_backward) return 0;
    float *scratch = grade_floats(attention_scratch_floats(&s, N_Q, N_X));
    float *dQ = grade_floats((size_t)N_Q * s.D_Q), *dK = grade_floats((size_t)N_X * s.D_K);
    float *dV = grade_floats((size_t)N_X * D_V), *dparams = grade_floats(score_param_count(&s));
    ScoreWeights dw = score_weights_view(&s, dparams);
    for (int times = 1; times <= 2; times++) {
        attention_backward(dQ, dK, dV, &dw, scratch, grade_f32(c, "dY"), A, cache, Q->data, K->data, V->data, &s, &w,
                           N_Q, N_X, D_V);
        if (grade_golden_close(c, "dQ", dQ, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dK", dK, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dV", dV, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            (dw.W && grade_golden_close(c, "dW", dw.W, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) ||
            (dw.W_1 && grade_golden_close(c, "dW_1", dw.W_1, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) ||
            (dw.W_2 && grade_golden_close(c, "dW_2", dw.W_2, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) ||
            (dw.v && grade_golden_close(c, "dv", dw.v, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)))
            return -1;
    }
    return 0;
}

#endif
