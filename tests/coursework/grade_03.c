/* grade_03.c - the coursework grader of chapter 03 (see grade.h): the four
 * score functions for one query, the scaled dot score's 1/sqrt(D_Q), the
 * multiplicative and additive scores as matrices with their backward.
 *
 * All against PyTorch (tests/golden/attention.bin): score_one through
 * attention_single_query; the others through attention_forward/backward,
 * the scaled dot on the dot cases (scaled, and plain: a factor applied to
 * both is wrong) and the learned scores on theirs, so that each exercise
 * meets only its own code. */
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "grade_attention.h"

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
};
static const GradeExercise EXERCISES[] = {
    {"03.score_functions", SCORE_FUNCTIONS, GRADE_COUNT(SCORE_FUNCTIONS)},
    {"03.scaled_dot", SCALED_DOT, GRADE_COUNT(SCALED_DOT)},
    {"03.learned_scores", LEARNED_SCORES, GRADE_COUNT(LEARNED_SCORES)},
};

int main(int argc, char **argv) { return grade_main(argc, argv, EXERCISES, GRADE_COUNT(EXERCISES)); }
