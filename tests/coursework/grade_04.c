/* grade_04.c - the coursework grader of chapter 04 (see grade.h): the
 * projections Q, K, V and their backward, the causal mask, the padding mask,
 * the sinusoidal positions.
 *
 * The projections on unmasked cases (PyTorch's golden vectors, and finite
 * differences); each mask through chapter 03's attention layer on the cases
 * that use that mask alone; the sinusoids against PyTorch's. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "grade_attention.h"
#include "04_self_attention/digit_model.h"
#include "04_self_attention/self_attention.h"

/* ------------------------------------------------------------ 04.projections */

static int unmasked_case(const GoldCase *c) {
    return grade_i32(c, "causal")[0] == 0 && grade_tensor(c, "lens") == NULL;
}

static int self_attention_case(const GoldCase *c, int with_backward) {
    const GoldTensor *X = grade_tensor(c, "X"), *W_Q = grade_tensor(c, "W_Q");
    const int B = X->dims[0], N = X->dims[1], D_in = X->dims[2], D = W_Q->dims[1];
    SelfAttentionWeights w = {(float *)W_Q->data, (float *)grade_f32(c, "W_K"), (float *)grade_f32(c, "W_V")};
    float *Y = grade_floats((size_t)B * N * D), *A = grade_floats((size_t)B * N * N);
    float *cache = grade_floats(self_attention_cache_floats(B, N, D));
    self_attention_forward(Y, A, cache, X->data, &w, 0, NULL, B, N, D_in, D);
    if (grade_golden_close(c, "Y", Y, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT) ||
        grade_golden_close(c, "A", A, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT))
        return -1;
    if (!with_backward) return 0;
    float *scratch = grade_floats(self_attention_scratch_floats(B, N, D)), *dX = grade_floats((size_t)B * N * D_in);
    SelfAttentionWeights dw = {grade_floats((size_t)D_in * D), grade_floats((size_t)D_in * D),
                               grade_floats((size_t)D_in * D)};
    for (int times = 1; times <= 2; times++) {
        self_attention_backward(dX, &dw, scratch, grade_f32(c, "dY"), A, cache, X->data, &w, B, N, D_in, D);
        if (grade_golden_close(c, "dX", dX, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dW_Q", dw.W_Q, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dW_K", dw.W_K, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dW_V", dw.W_V, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
            return -1;
    }
    return 0;
}

static int self_attention_forward_case(const GoldCase *c) { return self_attention_case(c, 0); }
static int self_attention_backward_case(const GoldCase *c) { return self_attention_case(c, 1); }
static int projections_forward(void) {
    return grade_golden_cases("self_attention", unmasked_case, self_attention_forward_case);
}
static int projections_backward(void) {
    return grade_golden_cases("self_attention", unmasked_case, self_attention_backward_case);
}

/* L = sum wY . Y of a layer on 2 sequences of 5 inputs of width 4, D = 3. */
enum { FD_B = 2, FD_N = 5, FD_DIN = 4, FD_D = 3 };
typedef struct {
    float X[FD_B * FD_N * FD_DIN], W[3][FD_DIN * FD_D], wY[FD_B * FD_N * FD_D];
    float Y[FD_B * FD_N * FD_D], A[FD_B * FD_N * FD_N], *cache;
} Layer;

static double layer_loss(void *ctx) {
    Layer *L = ctx;
    SelfAttentionWeights w = {L->W[0], L->W[1], L->W[2]};
    self_attention_forward(L->Y, L->A, L->cache, L->X, &w, 0, NULL, FD_B, FD_N, FD_DIN, FD_D);
    double sum = 0.0;
    for (int i = 0; i < FD_B * FD_N * FD_D; i++) sum += (double)L->wY[i] * L->Y[i];
    return sum;
}

static int projections_finite_differences(void) {
    static Layer L;
    L.cache = grade_floats(self_attention_cache_floats(FD_B, FD_N, FD_D));
    grade_fill(L.X, FD_B * FD_N * FD_DIN, 1.0f, 1);
    for (int k = 0; k < 3; k++) grade_fill(L.W[k], FD_DIN * FD_D, 0.8f, 2 + (unsigned)k);
    grade_fill(L.wY, FD_B * FD_N * FD_D, 1.0f, 5);
    layer_loss(&L);
    float *dX = grade_floats(FD_B * FD_N * FD_DIN), *scratch = grade_floats(self_attention_scratch_floats(FD_B, FD_N, FD_D));
    float *dW[3] = {grade_floats(FD_DIN * FD_D), grade_floats(FD_DIN * FD_D), grade_floats(FD_DIN * FD_D)};
    SelfAttentionWeights w = {L.W[0], L.W[1], L.W[2]}, dw = {dW[0], dW[1], dW[2]};
    self_attention_backward(dX, &dw, scratch, L.wY, L.A, L.cache, L.X, &w, FD_B, FD_N, FD_DIN, FD_D);
    static const char *const names[3] = {"dW_Q", "dW_K", "dW_V"};
    for (int k = 0; k < 3; k++)
        if (grade_gradient(names[k], layer_loss, &L, L.W[k], dW[k], 2, (int[]){FD_DIN, FD_D}, 5e-3f, 1e-2)) return -1;
    return grade_gradient("dX", layer_loss, &L, L.X, dX, 3, (int[]){FD_B, FD_N, FD_DIN}, 5e-3f, 1e-2);
}

/* ------------------------------------------------------------ 04.causal_mask, 04.padding_mask */

/* mask_key_limit for every query i of N_X = 6 keys against want(i). */
static int key_limits(const char *what, AttentionMask m, int (*want)(const AttentionMask *m, int i, int N_X)) {
    enum { N_X = 6 };
    float got[N_X], expected[N_X];
    for (int i = 0; i < N_X; i++) {
        got[i] = (float)mask_key_limit(&m, i, N_X);
        expected[i] = (float)want(&m, i, N_X);
    }
    char limits[160];
    snprintf(limits, sizeof limits, "%s: mask_key_limit of each query", what);
    if (grade_close(limits, "the limits the mask asks for", got, expected, 1, (int[]){N_X}, 0.0, 0.0) == 0) return 0;
    for (int i = 0; i < N_X; i++)   /* the message, in the mask's own words */
        if (got[i] != expected[i])
            return grade_fail("%s: query %d of %d sees keys 0..%d, want 0..%d (mask_key_limit %d, want %d)", what, i,
                              N_X, (int)got[i] - 1, (int)expected[i] - 1, (int)got[i], (int)expected[i]);
    return -1;
}

static int causal_limit(const AttentionMask *m, int i, int N_X) { (void)m; (void)N_X; return i + 1; }
static int padded_limit(const AttentionMask *m, int i, int N_X) {
    (void)i;
    return m->key_len > 0 && m->key_len < N_X ? m->key_len : N_X;
}

static int all_keys(const AttentionMask *m, int i, int N_X) { (void)m; (void)i; return N_X; }
static int causal_limits(void) {
    if (key_limits("causal", (AttentionMask){NULL, 1, 0, 0}, causal_limit)) return -1;
    /* a mask applied whether or not causal is set would pass the line above */
    return key_limits("not causal (causal = 0: every key, the mask only when asked for)", (AttentionMask){NULL, 0, 0, 0},
                      all_keys);
}

/* Causal and padded at once: the padding may only lower the limit the causal
 * part alone gives (whatever that is, so this does not grade 04.causal_mask). */
static int padded_causal_limit(const AttentionMask *m, int i, int N_X) {
    const int causal_only = mask_key_limit(&(AttentionMask){NULL, 1, 0, 0}, i, N_X);
    return m->key_len > 0 && m->key_len < causal_only ? m->key_len : causal_only;
}

static int padded_limits(void) {
    for (int key_len = 0; key_len <= 8; key_len += 2)
        if (key_limits("padding", (AttentionMask){NULL, 0, key_len, 0}, padded_limit)) return -1;
    for (int key_len = 1; key_len <= 6; key_len++)
        if (key_limits("padding with a causal mask (the smaller limit wins: padding must not raise the causal one)",
                       (AttentionMask){NULL, 1, key_len, 0}, padded_causal_limit))
            return -1;
    return 0;
}

/* Chapter 03's layer (every score) on a case with a mask: grade_attention.h. */
static int masked_case(const GoldCase *c) { return attention_case(c, 1); }

static int only_causal(const GoldCase *c) {
    return grade_i32(c, "causal")[0] == 1 && grade_i32(c, "key_len")[0] == 0 && grade_tensor(c, "allowed") == NULL;
}
static int only_key_len(const GoldCase *c) {
    return grade_i32(c, "causal")[0] == 0 && grade_i32(c, "key_len")[0] > 0 && grade_tensor(c, "allowed") == NULL;
}
static int causal_attention(void) { return grade_golden_cases("attention", only_causal, masked_case); }
static int padded_attention(void) { return grade_golden_cases("attention", only_key_len, masked_case); }

/* ------------------------------------------------------------ 04.sinusoidal */

static int sinusoid_case(const GoldCase *c) {
    const GoldTensor *P_sin = grade_tensor(c, "P_sin");
    const int N = P_sin->dims[0], D = P_sin->dims[1];
    float *P = grade_floats((size_t)N * D);
    positional_encoding_sinusoidal(P, N, D);
    return grade_golden_close(c, "P_sin", P, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT);
}

static int sinusoids(void) { return grade_golden_cases("positional_encoding", NULL, sinusoid_case); }

/* Wider and longer than the sheet's runs (D = 130, N = GRADE_LONG): nothing
 * may hold the frequencies or the positions in a fixed array of 32; against
 * the formula, in double. */
static int sinusoids_wide(void) {
    enum { N = GRADE_LONG, D = 130 };
    float *P = grade_garbage((size_t)N * D), *want = grade_floats((size_t)N * D);
    for (int t = 0; t < N; t++)
        for (int i = 0; i < D; i++) {
            const double omega = 1.0 / pow(10000.0, (double)(i - i % 2) / D);
            want[t * D + i] = (float)(i % 2 ? cos(omega * t) : sin(omega * t));
        }
    positional_encoding_sinusoidal(P, N, D);
    return grade_close("P (N = 48, D = 130, the buffer pre-filled with garbage)", "sin and cos of omega_k t", P, want,
                       2, (int[]){N, D}, 1e-5, 1e-5);
}

/* ------------------------------------------------------------ hidden checks
 *
 * make grade-submissions only (grade.h): shapes and inputs drawn from the
 * teacher's seed, outputs compared with the reference solution's. */

/* The layer on B, N, D_in, D drawn from the seed: Y, A, then dX and the dW. */
static int hidden_projections(void) {
    const int B = grade_draw(1, 3), N = grade_draw(1, 7), D_in = grade_draw(1, 6), D = grade_draw(1, 5);
    const int causal = grade_draw(0, 1);
    float *X = grade_floats((size_t)B * N * D_in), *dY = grade_floats((size_t)B * N * D);
    float *W[3], *dW[3];
    for (int k = 0; k < 3; k++) {
        W[k] = grade_floats((size_t)D_in * D);
        dW[k] = grade_floats((size_t)D_in * D);
        grade_draw_fill(W[k], (size_t)D_in * D, 0.8f);
    }
    grade_draw_fill(X, (size_t)B * N * D_in, 1.0f);
    grade_draw_fill(dY, (size_t)B * N * D, 1.0f);
    SelfAttentionWeights w = {W[0], W[1], W[2]}, dw = {dW[0], dW[1], dW[2]};
    float *Y = grade_floats((size_t)B * N * D), *A = grade_floats((size_t)B * N * N);
    float *cache = grade_floats(self_attention_cache_floats(B, N, D));
    float *scratch = grade_floats(self_attention_scratch_floats(B, N, D)), *dX = grade_floats((size_t)B * N * D_in);
    self_attention_forward(Y, A, cache, X, &w, causal, NULL, B, N, D_in, D);
    if (grade_reference("Y", Y, 3, (int[]){B, N, D}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
        grade_reference("A", A, 3, (int[]){B, N, N}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
        return -1;
    grade_draw_fill(dX, (size_t)B * N * D_in, 1.0f);   /* backward adds to what is there */
    for (int k = 0; k < 3; k++) grade_draw_fill(dW[k], (size_t)D_in * D, 1.0f);
    self_attention_backward(dX, &dw, scratch, dY, A, cache, X, &w, B, N, D_in, D);
    static const char *const names[3] = {"dW_Q", "dW_K", "dW_V"};
    for (int k = 0; k < 3; k++)
        if (grade_reference(names[k], dW[k], 2, (int[]){D_in, D}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) return -1;
    return grade_reference("dX", dX, 3, (int[]){B, N, D_in}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

/* Scaled dot attention of N_Q = N_X drawn positions under a mask: A and Y. */
static int hidden_masked_attention(int causal, int padded) {
    const int N = grade_draw(1, 9), D = grade_draw(1, 6), D_V = grade_draw(1, 4);
    const int key_len = padded ? grade_draw(1, N + 1) : 0;
    const ScoreSpec s = {SCORE_SCALED_DOT, D, D, 0};
    const ScoreWeights w = {NULL, NULL, NULL, NULL};
    const AttentionMask mask = {NULL, causal, key_len, 0};
    float *Q = grade_floats((size_t)N * D), *K = grade_floats((size_t)N * D), *V = grade_floats((size_t)N * D_V);
    grade_draw_fill(Q, (size_t)N * D, 1.5f);
    grade_draw_fill(K, (size_t)N * D, 1.5f);
    grade_draw_fill(V, (size_t)N * D_V, 1.0f);
    float *Y = grade_floats((size_t)N * D_V), *A = grade_floats((size_t)N * N);
    float *cache = grade_floats(attention_cache_floats(&s, N, N));
    attention_forward(Y, A, cache, Q, K, V, &s, &w, &mask, N, N, D_V);
    if (grade_reference("A", A, 2, (int[]){N, N}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) return -1;
    return grade_reference("Y", Y, 2, (int[]){N, D_V}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

static int hidden_causal(void) { return hidden_masked_attention(1, 0); }
static int hidden_unmasked(void) { return hidden_masked_attention(0, 0); }
static int hidden_padded(void) { return hidden_masked_attention(0, 1); }
static int hidden_padded_causal(void) { return hidden_masked_attention(1, 1); }

static int hidden_sinusoids(void) {
    const int N = grade_draw(1, 40), D = grade_draw(1, 33);
    float *P = grade_floats((size_t)N * D);
    positional_encoding_sinusoidal(P, N, D);
    return grade_reference("P", P, 2, (int[]){N, D}, GRADE_RTOL_OUT, GRADE_ATOL_OUT);
}

/* ------------------------------------------------------------ end to end */

/* The chapter's digit model (sinusoidal positions; causal or not) trained
 * GRADE_TRAIN_STEPS steps on drawn digits (grade.h): each step's loss the solution's. */
static int training_with(int causal, const char *what) {
    Classifier m;
    const DigitConfig cfg = {.N = 6, .D = 16, .F = 32, .L = 2, .C = 10, .pos = POS_SINUSOIDAL, .causal = causal};
    if (digit_model_build(&m, &cfg, GRADE_TRAIN_B, 3) < 0) return grade_fail("digit_model_build failed");
    const int rc = grade_classifier_training(what, &m, 6, 10);
    m.destroy(m.self);
    return rc;
}
static int training(void) { return training_with(0, "04 digit model"); }
static int training_causal(void) { return training_with(1, "04 causal digit model"); }

static const GradeCheck HIDDEN_PROJECTIONS[] = {
    {"Y, A, dW_Q, dW_K, dW_V, dX on a drawn shape", hidden_projections},
    {"the same on another drawn shape", hidden_projections},
    {"end to end: 40 training steps of the chapter's model, each loss the solution's", training},
};
static const GradeCheck HIDDEN_CAUSAL[] = {
    {"causal attention on a drawn shape", hidden_causal},
    {"attention without a mask (causal = 0) on a drawn shape", hidden_unmasked},
    {"end to end: 40 training steps of the causal model, each loss the solution's", training_causal},
};
static const GradeCheck HIDDEN_PADDING[] = {
    {"padded attention on a drawn shape", hidden_padded},
    {"padded causal attention on a drawn shape", hidden_padded_causal},
};
static const GradeCheck HIDDEN_SINUSOIDAL[] = {
    {"P on a drawn N and D", hidden_sinusoids},
    {"end to end: 40 training steps of the chapter's model, each loss the solution's", training},
};
static const GradeExercise HIDDEN[] = {
    {"04.projections", HIDDEN_PROJECTIONS, GRADE_COUNT(HIDDEN_PROJECTIONS)},
    {"04.causal_mask", HIDDEN_CAUSAL, GRADE_COUNT(HIDDEN_CAUSAL)},
    {"04.padding_mask", HIDDEN_PADDING, GRADE_COUNT(HIDDEN_PADDING)},
    {"04.sinusoidal", HIDDEN_SINUSOIDAL, GRADE_COUNT(HIDDEN_SINUSOIDAL)},
};

/* ------------------------------------------------------------ the exercises */

static const GradeCheck PROJECTIONS[] = {
    {"Y and A against PyTorch (no mask)", projections_forward},
    {"dW_Q, dW_K, dW_V, dX against finite differences", projections_finite_differences},
    {"dX, dW_Q, dW_K, dW_V against PyTorch's autograd (no mask), twice: they add up", projections_backward},
};
static const GradeCheck CAUSAL_MASK[] = {
    {"which keys each query sees, with causal set and without", causal_limits},
    {"causal attention (four scores) against PyTorch", causal_attention},
};
static const GradeCheck PADDING_MASK[] = {
    {"which keys each query sees, key_len 0 to 8 of 6, alone and with causal", padded_limits},
    {"attention with padded keys (four scores) against PyTorch", padded_attention},
};
static const GradeCheck SINUSOIDAL[] = {
    {"P against PyTorch's sinusoids (odd D too)", sinusoids},
    {"P on N = 48, D = 130 against the formula (wider than any fixed array of 32)", sinusoids_wide},
};
static const GradeExercise EXERCISES[] = {
    {"04.projections", PROJECTIONS, GRADE_COUNT(PROJECTIONS)},
    {"04.causal_mask", CAUSAL_MASK, GRADE_COUNT(CAUSAL_MASK)},
    {"04.padding_mask", PADDING_MASK, GRADE_COUNT(PADDING_MASK)},
    {"04.sinusoidal", SINUSOIDAL, GRADE_COUNT(SINUSOIDAL)},
};

int main(int argc, char **argv) {
    return grade_main_hidden(argc, argv, EXERCISES, GRADE_COUNT(EXERCISES), HIDDEN, GRADE_COUNT(HIDDEN));
}
