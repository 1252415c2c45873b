/* grade_03.c - the coursework grader of chapter 03 (see grade.h): the four
 * score functions for one query, the scaled dot score's 1/sqrt(D_Q), the
 * multiplicative and additive scores as matrices with their backward.
 *
 * All against PyTorch (tests/golden/attention.bin): score_one through
 * attention_single_query; the others through attention_forward/backward,
 * the scaled dot on the dot cases (scaled, and plain: a factor applied to
 * both is wrong) and the learned scores on theirs, so that each exercise
 * meets only its own code. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "grade_attention.h"
#include "03_dot_product_attention/attn_seq2seq.h"

/* ------------------------------------------------------------ 03.score_functions */

/* Every query of the case alone, written as loops: its weights a and output y. */
static int single_query_case(const GoldCase *c) {
    const GoldTensor *Q = grade_tensor(c, "Q"), *K = grade_tensor(c, "K"), *V = grade_tensor(c, "V");
    const int N_Q = Q->dims[0], N_X = K->dims[0], D_V = V->dims[1];
    const ScoreSpec s = case_spec(c);
    const ScoreWeights w = case_weights(c);
    const AttentionMask mask = case_mask(c);
    float *Y = grade_floats((size_t)N_Q * D_V), *A = grade_floats((size_t)N_Q * N_X), *e = grade_floats((size_t)N_X);
    for (int i = 0; i < N_Q; i++)
        attention_single_query(Y + (size_t)i * D_V, A + (size_t)i * N_X, e, grade_f32(c, "Q") + (size_t)i * s.D_Q,
                               K->data, V->data, &s, &w, &mask, i, N_X, D_V);
    if (grade_golden_close(c, "A", A, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT)) return -1;
    return grade_golden_close(c, "Y", Y, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT);
}

static int score_type_is(const GoldCase *c, ScoreType t) { return grade_i32(c, "score")[0] == (int)t; }
static int dot_case(const GoldCase *c) { return score_type_is(c, SCORE_DOT); }
static int scaled_dot_case(const GoldCase *c) { return score_type_is(c, SCORE_SCALED_DOT); }
static int multiplicative_case(const GoldCase *c) { return score_type_is(c, SCORE_MULTIPLICATIVE); }
static int additive_case(const GoldCase *c) { return score_type_is(c, SCORE_ADDITIVE); }
static int learned_case(const GoldCase *c) { return multiplicative_case(c) || additive_case(c); }

static int single_dot(void) { return grade_golden_cases("attention", dot_case, single_query_case); }
static int single_scaled(void) { return grade_golden_cases("attention", scaled_dot_case, single_query_case); }
static int single_multiplicative(void) { return grade_golden_cases("attention", multiplicative_case, single_query_case); }
static int single_additive(void) { return grade_golden_cases("attention", additive_case, single_query_case); }

/* ------------------------------------------------ the layer: 03.scaled_dot, 03.learned_scores */

static int layer_forward_case(const GoldCase *c) { return attention_case(c, 0); }
static int layer_backward_case(const GoldCase *c) { return attention_case(c, 1); }
static int scaled_forward(void) { return grade_golden_cases("attention", scaled_dot_case, layer_forward_case); }
static int plain_dot_forward(void) { return grade_golden_cases("attention", dot_case, layer_forward_case); }
static int scaled_backward(void) { return grade_golden_cases("attention", scaled_dot_case, layer_backward_case); }
static int learned_forward(void) { return grade_golden_cases("attention", learned_case, layer_forward_case); }
static int learned_backward(void) { return grade_golden_cases("attention", learned_case, layer_backward_case); }

/* The learned scores with Y, A and the cache pre-filled with garbage: E
 * (and what it is made from) written, not added to what the buffer held. */
static int learned_garbage(void) {
    attention_garbage = 1;
    const int result = grade_golden_cases("attention", learned_case, layer_forward_case);
    attention_garbage = 0;
    return result;
}

/* Large inputs: the additive score on queries and keys of +-60 (its tanh's
 * arguments past 50): E, A and Y finite (a tanh through exp gives NaN). */
static int additive_large(void) {
    enum { N_Q = 3, N_X = 4, D = 3, D_A = 3, D_V = 2 };
    const ScoreSpec s = {SCORE_ADDITIVE, D, D, D_A};
    float *params = grade_floats(score_param_count(&s));
    const ScoreWeights w = score_weights_view(&s, params);
    grade_fill(params, score_param_count(&s), 1.0f, 51);
    float *Q = grade_floats(N_Q * D), *K = grade_floats(N_X * D), *V = grade_floats(N_X * D_V);
    grade_fill(Q, N_Q * D, 60.0f, 52);
    grade_fill(K, N_X * D, 60.0f, 53);
    grade_fill(V, N_X * D_V, 1.0f, 54);
    const AttentionMask mask = {NULL, 0, 0, 0};
    float *Y = grade_floats(N_Q * D_V), *A = grade_floats(N_Q * N_X), *cache = grade_floats(attention_cache_floats(&s, N_Q, N_X));
    attention_forward(Y, A, cache, Q, K, V, &s, &w, &mask, N_Q, N_X, D_V);
    return grade_finite("A with tanh arguments past 50", A, 2, (int[]){N_Q, N_X}, 1.0f) ||
           grade_finite("Y with tanh arguments past 50", Y, 2, (int[]){N_Q, D_V}, INFINITY);
}

/* ------------------------------------------------------------ hidden checks
 *
 * make grade-submissions only (grade.h): shapes, weights and inputs drawn from
 * the teacher's seed, outputs compared with the reference solution's. */

/* A score of type t on drawn shapes: the spec, its weights, Q, K, V. */
typedef struct {
    ScoreSpec s;
    ScoreWeights w;
    int N_Q, N_X, D_V;
    float *Q, *K, *V;
} DrawnCase;

static DrawnCase draw_case(ScoreType t) {
    DrawnCase c;
    const int D_Q = grade_draw(2, 6);   /* D_Q = 1 would make sqrt(D_Q) = D_Q = 1 */
    const int learned = t == SCORE_MULTIPLICATIVE || t == SCORE_ADDITIVE;
    c.s = (ScoreSpec){t, D_Q, learned ? grade_draw(1, 6) : D_Q, t == SCORE_ADDITIVE ? grade_draw(1, 5) : 0};
    c.N_Q = grade_draw(1, 6);
    c.N_X = grade_draw(2, 7);   /* one key: softmax gives 1 whatever the scores */
    c.D_V = grade_draw(1, 4);
    float *params = grade_floats(score_param_count(&c.s));
    grade_draw_fill(params, score_param_count(&c.s), 0.7f);
    c.w = score_weights_view(&c.s, params);
    c.Q = grade_floats((size_t)c.N_Q * c.s.D_Q);
    c.K = grade_floats((size_t)c.N_X * c.s.D_K);
    c.V = grade_floats((size_t)c.N_X * c.D_V);
    grade_draw_fill(c.Q, (size_t)c.N_Q * c.s.D_Q, 1.5f);
    grade_draw_fill(c.K, (size_t)c.N_X * c.s.D_K, 1.5f);
    grade_draw_fill(c.V, (size_t)c.N_X * c.D_V, 1.0f);
    return c;
}

/* Each query alone (attention_single_query): a and y. */
static int hidden_single(ScoreType t) {
    const DrawnCase c = draw_case(t);
    float *Y = grade_floats((size_t)c.N_Q * c.D_V), *A = grade_floats((size_t)c.N_Q * c.N_X);
    float *e = grade_floats((size_t)c.N_X);
    for (int i = 0; i < c.N_Q; i++)
        attention_single_query(Y + (size_t)i * c.D_V, A + (size_t)i * c.N_X, e, c.Q + (size_t)i * c.s.D_Q, c.K, c.V,
                               &c.s, &c.w, NULL, i, c.N_X, c.D_V);
    if (grade_reference("a", A, 2, (int[]){c.N_Q, c.N_X}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) return -1;
    return grade_reference("y", Y, 2, (int[]){c.N_Q, c.D_V}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

/* The layer (attention_forward, then attention_backward of a drawn dY):
 * A, Y, dQ, dK, dV and the score's weight gradients. */
static int hidden_layer(ScoreType t) {
    const DrawnCase c = draw_case(t);
    const ScoreSpec *s = &c.s;
    float *Y = grade_floats((size_t)c.N_Q * c.D_V), *A = grade_floats((size_t)c.N_Q * c.N_X);
    float *cache = grade_floats(attention_cache_floats(s, c.N_Q, c.N_X));
    float *dY = grade_floats((size_t)c.N_Q * c.D_V);
    grade_draw_fill(dY, (size_t)c.N_Q * c.D_V, 1.0f);
    attention_forward(Y, A, cache, c.Q, c.K, c.V, s, &c.w, NULL, c.N_Q, c.N_X, c.D_V);
    if (grade_reference("A", A, 2, (int[]){c.N_Q, c.N_X}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
        grade_reference("Y", Y, 2, (int[]){c.N_Q, c.D_V}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
        return -1;
    float *scratch = grade_floats(attention_scratch_floats(s, c.N_Q, c.N_X));
    float *dQ = grade_floats((size_t)c.N_Q * s->D_Q), *dK = grade_floats((size_t)c.N_X * s->D_K);
    float *dV = grade_floats((size_t)c.N_X * c.D_V), *dparams = grade_floats(score_param_count(s));
    ScoreWeights dw = score_weights_view(s, dparams);
    grade_draw_fill(dQ, (size_t)c.N_Q * s->D_Q, 1.0f);   /* backward adds to what is there */
    grade_draw_fill(dK, (size_t)c.N_X * s->D_K, 1.0f);
    grade_draw_fill(dV, (size_t)c.N_X * c.D_V, 1.0f);
    grade_draw_fill(dparams, score_param_count(s), 1.0f);
    attention_backward(dQ, dK, dV, &dw, scratch, dY, A, cache, c.Q, c.K, c.V, s, &c.w, c.N_Q, c.N_X, c.D_V);
    if (grade_reference("dQ", dQ, 2, (int[]){c.N_Q, s->D_Q}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
        grade_reference("dK", dK, 2, (int[]){c.N_X, s->D_K}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
        grade_reference("dV", dV, 2, (int[]){c.N_X, c.D_V}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
        return -1;
    const int n_params = (int)score_param_count(s);
    return n_params ? grade_reference("the score's weight gradients", dparams, 1, (int[]){n_params}, GRADE_RTOL_GRAD,
                                      GRADE_ATOL_GRAD)
                    : 0;
}

static int hidden_single_dot(void) { return hidden_single(SCORE_DOT); }
static int hidden_single_scaled(void) { return hidden_single(SCORE_SCALED_DOT); }
static int hidden_single_multiplicative(void) { return hidden_single(SCORE_MULTIPLICATIVE); }
static int hidden_single_additive(void) { return hidden_single(SCORE_ADDITIVE); }
static int hidden_layer_scaled(void) { return hidden_layer(SCORE_SCALED_DOT); }
static int hidden_layer_dot(void) { return hidden_layer(SCORE_DOT); }
static int hidden_layer_multiplicative(void) { return hidden_layer(SCORE_MULTIPLICATIVE); }
static int hidden_layer_additive(void) { return hidden_layer(SCORE_ADDITIVE); }

/* ------------------------------------------------------------ end to end */

/* The chapter's model with the given score, trained GRADE_TRAIN_STEPS steps on reverse
 * (grade.h): each step's loss the solution's. */
static int training_with(ScoreType score, const char *what) {
    AttnSeq2Seq model;
    const AttnSeq2SeqConfig cfg = {.cell = CELL_GRU, .D_E = 8, .S = 12, .score = score,
                                   .placement = PLACEMENT_LUONG, .D_A = 10, .project_kv = 1};
    if (attn_seq2seq_create(&model, &cfg, GRADE_TRAIN_V, GRADE_TRAIN_V, GRADE_TRAIN_B, GRADE_TRAIN_T,
                           GRADE_TRAIN_T + 1, 3) < 0) return grade_fail("attn_seq2seq_create failed");
    Seq2Seq m;
    attn_seq2seq_interface(&model, &m);
    const int rc = grade_seq2seq_training(what, &m);
    attn_seq2seq_free(&model);
    return rc;
}
static int training_scaled(void) { return training_with(SCORE_SCALED_DOT, "03 scaled dot on reverse"); }
static int training_learned(void) {
    return training_with(SCORE_MULTIPLICATIVE, "03 multiplicative on reverse") ||
           training_with(SCORE_ADDITIVE, "03 additive on reverse");
}

static const GradeCheck HIDDEN_SCORE_FUNCTIONS[] = {
    {"dot, one query at a time, on drawn shapes", hidden_single_dot},
    {"scaled dot, one query at a time, on drawn shapes", hidden_single_scaled},
    {"multiplicative, one query at a time, on drawn shapes", hidden_single_multiplicative},
    {"additive, one query at a time, on drawn shapes", hidden_single_additive},
};
static const GradeCheck HIDDEN_SCALED_DOT[] = {
    {"scaled dot attention and its gradients on a drawn shape", hidden_layer_scaled},
    {"plain dot attention and its gradients on a drawn shape", hidden_layer_dot},
    {"end to end: 40 training steps of the chapter's model (scaled dot), each loss the solution's", training_scaled},
};
static const GradeCheck HIDDEN_LEARNED_SCORES[] = {
    {"multiplicative attention and its gradients on a drawn shape", hidden_layer_multiplicative},
    {"additive attention and its gradients on a drawn shape", hidden_layer_additive},
    {"end to end: 40 training steps with the multiplicative, then the additive score, each loss the solution's",
     training_learned},
};
static const GradeExercise HIDDEN[] = {
    {"03.score_functions", HIDDEN_SCORE_FUNCTIONS, GRADE_COUNT(HIDDEN_SCORE_FUNCTIONS)},
    {"03.scaled_dot", HIDDEN_SCALED_DOT, GRADE_COUNT(HIDDEN_SCALED_DOT)},
    {"03.learned_scores", HIDDEN_LEARNED_SCORES, GRADE_COUNT(HIDDEN_LEARNED_SCORES)},
};

/* ------------------------------------------------------------ the exercises */

static const GradeCheck SCORE_FUNCTIONS[] = {
    {"dot: one query's a and y against PyTorch", single_dot},
    {"scaled dot: one query's a and y against PyTorch", single_scaled},
    {"multiplicative: one query's a and y against PyTorch", single_multiplicative},
    {"additive: one query's a and y against PyTorch", single_additive},
};
static const GradeCheck SCALED_DOT[] = {
    {"scaled dot attention: A and Y against PyTorch", scaled_forward},
    {"scaled dot attention: dQ, dK, dV against PyTorch's autograd", scaled_backward},
    {"plain dot attention keeps alpha = 1 (only the scaled score divides by sqrt(D_Q)): A and Y against PyTorch",
     plain_dot_forward},
};
static const GradeCheck LEARNED_SCORES[] = {
    {"multiplicative and additive attention: A and Y against PyTorch", learned_forward},
    {"their gradients (dQ, dK, dV, the score's weights) against PyTorch's autograd", learned_backward},
    {"A and Y against PyTorch with Y, A and the cache pre-filled with garbage (E =, not E +=)", learned_garbage},
    {"large inputs (the additive score's tanh past 50): A and Y finite", additive_large},
};
static const GradeExercise EXERCISES[] = {
    {"03.score_functions", SCORE_FUNCTIONS, GRADE_COUNT(SCORE_FUNCTIONS)},
    {"03.scaled_dot", SCALED_DOT, GRADE_COUNT(SCALED_DOT)},
    {"03.learned_scores", LEARNED_SCORES, GRADE_COUNT(LEARNED_SCORES)},
};

int main(int argc, char **argv) {
    return grade_main_hidden(argc, argv, EXERCISES, GRADE_COUNT(EXERCISES), HIDDEN, GRADE_COUNT(HIDDEN));
}
