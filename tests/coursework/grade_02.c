/* grade_02.c - the coursework grader of chapter 02 (see grade.h): the
 * additive score, the context, the bidirectional encoder's annotations.
 *
 * The score and the context against PyTorch (tests/golden/); the
 * annotations against their definition, on encoder states filled with
 * values that say which position they belong to. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "02_bahdanau_attention/bahdanau.h"

/* ------------------------------------------------------------ 02.additive_score */

static int additive_case(const GoldCase *c, int with_backward) {
    const GoldTensor *keys = grade_tensor(c, "keys");
    const int B = keys->dims[0], T = keys->dims[1], D_A = keys->dims[2];
    const int *lens = grade_i32(c, "lens");
    float *weights = grade_floats((size_t)B * T), *feat = grade_floats((size_t)B * T * D_A);
    additive_attention_forward(weights, feat, keys->data, grade_f32(c, "query"), grade_f32(c, "v"), lens, B, T, D_A);
    if (grade_golden_close(c, "weights", weights, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT)) return -1;
    if (!with_backward) return 0;
    float *dkeys = grade_floats((size_t)B * T * D_A), *dquery = grade_floats((size_t)B * D_A);
    float *dv = grade_floats((size_t)D_A), *dscores = grade_floats((size_t)B * T);
    for (int times = 1; times <= 2; times++) {
        additive_attention_backward(dkeys, dquery, dv, dscores, grade_f32(c, "dweights"), weights, feat,
                                    grade_f32(c, "v"), lens, B, T, D_A);
        if (grade_golden_close(c, "dkeys", dkeys, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dquery", dquery, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dv", dv, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
            return -1;
    }
    return 0;
}

static int additive_forward_case(const GoldCase *c) { return additive_case(c, 0); }
static int additive_backward_case(const GoldCase *c) { return additive_case(c, 1); }
static int additive_forward(void) { return grade_golden_cases("additive_attention", NULL, additive_forward_case); }
static int additive_backward(void) { return grade_golden_cases("additive_attention", NULL, additive_backward_case); }

/* Large inputs: v of +-300 over tanh features near +-1 make scores of about
 * +-1e3, where exp overflows (a softmax must subtract the row's maximum):
 * the weights finite, in [0, 1], each row summing to 1; the gradients finite. */
static int additive_large(void) {
    enum { B = 2, T = 6, D_A = 4 };
    const int lens[B] = {T, 4};
    float *keys = grade_floats(B * T * D_A), *query = grade_floats(B * D_A), *v = grade_floats(D_A);
    grade_fill(keys, B * T * D_A, 3.0f, 41);
    grade_fill(query, B * D_A, 3.0f, 42);
    for (int j = 0; j < D_A; j++) v[j] = j % 2 ? -300.0f : 300.0f;
    float *weights = grade_floats(B * T), *feat = grade_floats(B * T * D_A);
    additive_attention_forward(weights, feat, keys, query, v, lens, B, T, D_A);
    if (grade_finite("the weights a with scores of about +-1e3", weights, 2, (int[]){B, T}, 1.0f)) return -1;
    for (int b = 0; b < B; b++) {
        double sum = 0.0;
        for (int i = 0; i < T; i++) sum += weights[b * T + i];
        if (grade_true("each row of weights sums to 1", fabs(sum - 1.0) < 1e-4,
                       "the weights of row %d sum to %g with scores of about +-1e3, want 1", b, sum))
            return -1;
    }
    float *dweights = grade_floats(B * T), *dkeys = grade_floats(B * T * D_A), *dquery = grade_floats(B * D_A);
    float *dv = grade_floats(D_A), *dscores = grade_floats(B * T);
    grade_fill(dweights, B * T, 1.0f, 43);
    additive_attention_backward(dkeys, dquery, dv, dscores, dweights, weights, feat, v, lens, B, T, D_A);
    return grade_finite("dkeys with scores of about +-1e3", dkeys, 3, (int[]){B, T, D_A}, INFINITY) ||
           grade_finite("dv with scores of about +-1e3", dv, 1, (int[]){D_A}, INFINITY);
}

/* ------------------------------------------------------------ 02.context */

static int context_case(const GoldCase *c, int with_backward) {
    const GoldTensor *values = grade_tensor(c, "values");
    const int B = values->dims[0], T = values->dims[1], D = values->dims[2];
    const float *weights = grade_f32(c, "weights");
    float *context = grade_floats((size_t)B * D);
    grade_fill(context, (size_t)B * D, 1.0f, 10);   /* what was there must go: c is written, not added to */
    attention_context_forward(context, weights, values->data, B, T, D);
    if (grade_golden_close(c, "context", context, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT)) return -1;
    if (!with_backward) return 0;
    float *dweights = grade_floats((size_t)B * T), *dvalues = grade_floats((size_t)B * T * D);
    for (int times = 1; times <= 2; times++) {
        attention_context_backward(dweights, dvalues, grade_f32(c, "dcontext"), weights, values->data, B, T, D);
        if (grade_golden_close(c, "dweights", dweights, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dvalues", dvalues, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
            return -1;
    }
    return 0;
}

static int context_forward_case(const GoldCase *c) { return context_case(c, 0); }
static int context_backward_case(const GoldCase *c) { return context_case(c, 1); }
static int context_forward(void) { return grade_golden_cases("attention_context", NULL, context_forward_case); }
static int context_backward(void) { return grade_golden_cases("attention_context", NULL, context_backward_case); }

/* ------------------------------------------------------------ 02.annotations */

enum { ANN_B = 3, ANN_T = 5, ANN_S = 2 };
static const int ANN_LENS[ANN_B] = {5, 2, 3};

/* A value that names what it belongs to: encoder (0 forward, 1 backward),
 * row b, source position i, state entry j. */
static float code(int encoder, int b, int i, int j) { return (float)(1000 * encoder + 100 * b + 10 * (i + 1) + j + 1); }

/* The states of a forward and a backward encoder, as RnnEncoder keeps them:
 * h [T+1, B, S], h[t] = the state after t tokens. The forward encoder has
 * read positions 0..t-1, so h[t] belongs to position t-1; the backward one
 * reads each row's real tokens last to first, so its h[t] belongs to
 * position lens[b] - t. Padded steps keep the state (their values here: 0). */
static void fill_states(RnnEncoder *fwd, RnnEncoder *bwd) {
    memset(fwd, 0, sizeof *fwd);
    memset(bwd, 0, sizeof *bwd);
    fwd->S = bwd->S = ANN_S;
    fwd->h = grade_floats((size_t)(ANN_T + 1) * ANN_B * ANN_S);
    bwd->h = grade_floats((size_t)(ANN_T + 1) * ANN_B * ANN_S);
    for (int t = 1; t <= ANN_T; t++)
        for (int b = 0; b < ANN_B; b++)
            for (int j = 0; j < ANN_S; j++) {
                if (t > ANN_LENS[b]) continue;
                fwd->h[((size_t)t * ANN_B + b) * ANN_S + j] = code(0, b, t - 1, j);
                bwd->h[((size_t)t * ANN_B + b) * ANN_S + j] = code(1, b, ANN_LENS[b] - t, j);
            }
}

/* ann [B, T, S_enc] must be h_i = [h_fwd_i ; h_bwd_i] at real positions, 0 at padded ones. */
static int annotations_with(int bidirectional) {
    RnnEncoder fwd, bwd;
    fill_states(&fwd, &bwd);
    const int S_enc = bidirectional ? 2 * ANN_S : ANN_S;
    float *ann = grade_floats((size_t)ANN_B * ANN_T * S_enc), *want = grade_floats((size_t)ANN_B * ANN_T * S_enc);
    for (int b = 0; b < ANN_B; b++)
        for (int i = 0; i < ANN_LENS[b]; i++)
            for (int j = 0; j < S_enc; j++)
                want[((size_t)b * ANN_T + i) * S_enc + j] = j < ANN_S ? code(0, b, i, j) : code(1, b, i, j - ANN_S);
    grade_fill(ann, (size_t)ANN_B * ANN_T * S_enc, 1.0f, 7);   /* what was there must go */
    encoder_states_to_rows(ann, &fwd, bidirectional ? &bwd : NULL, ANN_LENS, ANN_B, ANN_T);
    return grade_close(bidirectional ? "ann (bidirectional)" : "ann (one encoder)", "[h_fwd_i ; h_bwd_i]", ann,
                       want, 3, (int[]){ANN_B, ANN_T, S_enc}, 0.0, 0.0);
}

static int annotations_one(void) { return annotations_with(0); }
static int annotations_two(void) { return annotations_with(1); }

/* dann [B, T, 2S] back to dH_fwd, dH_bwd [T, B, S]: dH[t] is the gradient
 * of h[t+1], the state after t+1 tokens, so it takes the gradient of the
 * position that state belongs to (0 for padded steps). */
static int annotation_gradients(void) {
    const int S_enc = 2 * ANN_S;
    const size_t per_encoder = (size_t)ANN_T * ANN_B * ANN_S;
    float *dann = grade_floats((size_t)ANN_B * ANN_T * S_enc);
    for (int b = 0; b < ANN_B; b++)
        for (int i = 0; i < ANN_T; i++)
            for (int j = 0; j < S_enc; j++)
                dann[((size_t)b * ANN_T + i) * S_enc + j] = j < ANN_S ? code(0, b, i, j) : code(1, b, i, j - ANN_S);
    float *dH_fwd = grade_floats(per_encoder), *dH_bwd = grade_floats(per_encoder);
    float *want_fwd = grade_floats(per_encoder), *want_bwd = grade_floats(per_encoder);
    for (int t = 0; t < ANN_T; t++)
        for (int b = 0; b < ANN_B; b++)
            for (int j = 0; j < ANN_S; j++) {
                if (t >= ANN_LENS[b]) continue;
                want_fwd[((size_t)t * ANN_B + b) * ANN_S + j] = code(0, b, t, j);
                want_bwd[((size_t)t * ANN_B + b) * ANN_S + j] = code(1, b, ANN_LENS[b] - 1 - t, j);
            }
    grade_fill(dH_fwd, per_encoder, 1.0f, 8);   /* what was there must go */
    grade_fill(dH_bwd, per_encoder, 1.0f, 9);
    encoder_grads_from_rows(dH_fwd, dH_bwd, dann, ANN_LENS, ANN_B, ANN_T, ANN_S);
    const int dims[3] = {ANN_T, ANN_B, ANN_S};
    if (grade_close("dH_fwd", "the gradient of the state each position's h_fwd_i came from", dH_fwd, want_fwd, 3,
                    dims, 0.0, 0.0))
        return -1;
    return grade_close("dH_bwd", "the gradient of the state each position's h_bwd_i came from", dH_bwd, want_bwd, 3,
                       dims, 0.0, 0.0);
}

/* ------------------------------------------------------------ hidden checks
 *
 * make grade-submissions only (grade.h): shapes, lengths and inputs drawn
 * from the teacher's seed, outputs compared with the reference solution's. */

static int *drawn_lens(int B, int T) {
    int *lens = grade_ints((size_t)B);
    for (int b = 0; b < B; b++) lens[b] = grade_draw(1, T);
    return lens;
}

static int hidden_additive(void) {
    const int B = grade_draw(1, 3), T = grade_draw(1, 7), D_A = grade_draw(1, 5);
    const int *lens = drawn_lens(B, T);
    float *keys = grade_floats((size_t)B * T * D_A), *query = grade_floats((size_t)B * D_A), *v = grade_floats((size_t)D_A);
    float *dweights = grade_floats((size_t)B * T);
    grade_draw_fill(keys, (size_t)B * T * D_A, 1.5f);
    grade_draw_fill(query, (size_t)B * D_A, 1.5f);
    grade_draw_fill(v, (size_t)D_A, 1.0f);
    grade_draw_fill(dweights, (size_t)B * T, 1.0f);
    float *weights = grade_floats((size_t)B * T), *feat = grade_floats((size_t)B * T * D_A);
    additive_attention_forward(weights, feat, keys, query, v, lens, B, T, D_A);
    if (grade_reference("weights", weights, 2, (int[]){B, T}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) return -1;
    float *dkeys = grade_floats((size_t)B * T * D_A), *dquery = grade_floats((size_t)B * D_A);
    float *dv = grade_floats((size_t)D_A), *dscores = grade_floats((size_t)B * T);
    grade_draw_fill(dkeys, (size_t)B * T * D_A, 1.0f);   /* backward adds to what is there */
    grade_draw_fill(dquery, (size_t)B * D_A, 1.0f);
    grade_draw_fill(dv, (size_t)D_A, 1.0f);
    additive_attention_backward(dkeys, dquery, dv, dscores, dweights, weights, feat, v, lens, B, T, D_A);
    if (grade_reference("dkeys", dkeys, 3, (int[]){B, T, D_A}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
        grade_reference("dquery", dquery, 2, (int[]){B, D_A}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
        return -1;
    return grade_reference("dv", dv, 1, (int[]){D_A}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

static int hidden_context(void) {
    const int B = grade_draw(1, 3), T = grade_draw(1, 7), D = grade_draw(1, 5);
    float *weights = grade_floats((size_t)B * T), *values = grade_floats((size_t)B * T * D);
    float *dcontext = grade_floats((size_t)B * D), *context = grade_floats((size_t)B * D);
    grade_draw_fill(weights, (size_t)B * T, 1.0f);
    grade_draw_fill(values, (size_t)B * T * D, 1.0f);
    grade_draw_fill(dcontext, (size_t)B * D, 1.0f);
    grade_draw_fill(context, (size_t)B * D, 1.0f);   /* what was there must go */
    attention_context_forward(context, weights, values, B, T, D);
    if (grade_reference("context", context, 2, (int[]){B, D}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) return -1;
    float *dweights = grade_floats((size_t)B * T), *dvalues = grade_floats((size_t)B * T * D);
    grade_draw_fill(dweights, (size_t)B * T, 1.0f);   /* backward adds to what is there */
    grade_draw_fill(dvalues, (size_t)B * T * D, 1.0f);
    attention_context_backward(dweights, dvalues, dcontext, weights, values, B, T, D);
    if (grade_reference("dweights", dweights, 2, (int[]){B, T}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) return -1;
    return grade_reference("dvalues", dvalues, 3, (int[]){B, T, D}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

/* The annotations of drawn encoder states (both encoders), and the
 * gradients of drawn dann back to the states. */
static int hidden_annotations(void) {
    const int B = grade_draw(1, 3), T = grade_draw(1, 6), S = grade_draw(1, 3);
    const int *lens = drawn_lens(B, T);
    RnnEncoder fwd, bwd;
    memset(&fwd, 0, sizeof fwd);
    memset(&bwd, 0, sizeof bwd);
    fwd.S = bwd.S = S;
    const size_t n_states = (size_t)(T + 1) * B * S, per_encoder = (size_t)T * B * S;
    fwd.h = grade_floats(n_states);
    bwd.h = grade_floats(n_states);
    grade_draw_fill(fwd.h, n_states, 1.0f);
    grade_draw_fill(bwd.h, n_states, 1.0f);
    float *ann = grade_floats((size_t)B * T * 2 * S), *dann = grade_floats((size_t)B * T * 2 * S);
    grade_draw_fill(ann, (size_t)B * T * 2 * S, 1.0f);   /* what was there must go */
    grade_draw_fill(dann, (size_t)B * T * 2 * S, 1.0f);
    encoder_states_to_rows(ann, &fwd, &bwd, lens, B, T);
    if (grade_reference("ann", ann, 3, (int[]){B, T, 2 * S}, 0.0, 0.0)) return -1;
    float *dH_fwd = grade_floats(per_encoder), *dH_bwd = grade_floats(per_encoder);
    grade_draw_fill(dH_fwd, per_encoder, 1.0f);   /* what was there must go */
    grade_draw_fill(dH_bwd, per_encoder, 1.0f);
    encoder_grads_from_rows(dH_fwd, dH_bwd, dann, lens, B, T, S);
    if (grade_reference("dH_fwd", dH_fwd, 3, (int[]){T, B, S}, 0.0, 0.0)) return -1;
    return grade_reference("dH_bwd", dH_bwd, 3, (int[]){T, B, S}, 0.0, 0.0);
}

/* ------------------------------------------------------------ end to end */

/* The chapter's model, bidirectional (so both annotations), trained
 * GRADE_TRAIN_STEPS steps on reverse (grade.h): each step's loss the solution's. */
static int training(void) {
    Bahdanau model;
    const BahdanauConfig cfg = {.cell = CELL_GRU, .D_E = 8, .S = 12, .D_A = 10, .bidirectional = 1};
    if (bahdanau_create(&model, &cfg, GRADE_TRAIN_V, GRADE_TRAIN_V, GRADE_TRAIN_B, GRADE_TRAIN_T,
                           GRADE_TRAIN_T + 1, 3) < 0) return grade_fail("bahdanau_create failed");
    Seq2Seq m;
    bahdanau_interface(&model, &m);
    const int rc = grade_seq2seq_training("02 bidirectional attention model on reverse", &m);
    bahdanau_free(&model);
    return rc;
}

static const GradeCheck HIDDEN_ADDITIVE_SCORE[] = {
    {"weights, dkeys, dquery, dv on a drawn shape and lengths", hidden_additive},
    {"the same on another drawn shape", hidden_additive},
    {"end to end: 40 training steps of the bidirectional model, each loss the solution's", training},
};
static const GradeCheck HIDDEN_CONTEXT[] = {
    {"context, dweights, dvalues on a drawn shape", hidden_context},
    {"end to end: 40 training steps of the bidirectional model, each loss the solution's", training},
};
static const GradeCheck HIDDEN_ANNOTATIONS[] = {
    {"ann and the state gradients on drawn states and lengths", hidden_annotations},
    {"end to end: 40 training steps of the bidirectional model, each loss the solution's", training},
};
static const GradeExercise HIDDEN[] = {
    {"02.additive_score", HIDDEN_ADDITIVE_SCORE, GRADE_COUNT(HIDDEN_ADDITIVE_SCORE)},
    {"02.context", HIDDEN_CONTEXT, GRADE_COUNT(HIDDEN_CONTEXT)},
    {"02.annotations", HIDDEN_ANNOTATIONS, GRADE_COUNT(HIDDEN_ANNOTATIONS)},
};

/* ------------------------------------------------------------ the exercises */

static const GradeCheck ADDITIVE_SCORE[] = {
    {"the weights a against PyTorch", additive_forward},
    {"the gradients of keys, query and v against PyTorch's autograd", additive_backward},
    {"large inputs (scores of about +-1e3): the weights finite, summing to 1", additive_large},
};
static const GradeCheck CONTEXT[] = {
    {"the context c against PyTorch, written over what the buffer held (c =, not c +=)", context_forward},
    {"the gradients of the weights and the h_i against PyTorch's autograd", context_backward},
};
static const GradeCheck ANNOTATIONS[] = {
    {"h_i with one encoder", annotations_one},
    {"h_i = [h_fwd_i ; h_bwd_i] with two", annotations_two},
    {"the gradients back to each encoder's states", annotation_gradients},
};
static const GradeExercise EXERCISES[] = {
    {"02.additive_score", ADDITIVE_SCORE, GRADE_COUNT(ADDITIVE_SCORE)},
    {"02.context", CONTEXT, GRADE_COUNT(CONTEXT)},
    {"02.annotations", ANNOTATIONS, GRADE_COUNT(ANNOTATIONS)},
};

int main(int argc, char **argv) {
    return grade_main_hidden(argc, argv, EXERCISES, GRADE_COUNT(EXERCISES), HIDDEN, GRADE_COUNT(HIDDEN));
}
