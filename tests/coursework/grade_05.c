/* grade_05.c - the coursework grader of chapter 05 (see grade.h): the heads
 * split and merged as column blocks of [Q|K|V] and Y (plain path), the two
 * projections ([Q|K|V] = X W_QKV and O = Y W_O + b_O, forward and backward);
 * the bonus: the online softmax of the fused forward, the fused backward.
 *
 * The heads against PyTorch (tests/golden/multi_head.bin), the projections
 * around them made by the grader's own loops; the projections against those
 * loops on random numbers; the fused
 * kernel's forward and backward, one head at a time, against chapter 03's
 * attention on the same Q, K, V (and the fused layer against PyTorch too).
 * The fused kernel's checks use blocks smaller than N, so the running
 * maximum and sum really are updated block by block. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "03_dot_product_attention/attention.h"
#include "05_multi_head_attention/flash_attention.h"
#include "05_multi_head_attention/multi_head.h"
#include "05_multi_head_attention/multi_head_model.h"

/* ------------------------------------------------ the products, as plain loops */

/* out [M, N] = op(a) op(b) (written), in double: a is [M, K] (a_t: [K, M], used
 * transposed), b is [K, N] (b_t: [N, K]). The grader's own answer for the
 * layer's four products, so that each exercise is checked without the others. */
static void product(float *out, const float *a, int a_t, const float *b, int b_t, int M, int K, int N) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0.0;
            for (int k = 0; k < K; k++)
                sum += (double)(a_t ? a[(size_t)k * M + i] : a[(size_t)i * K + k]) *
                       (b_t ? b[(size_t)j * K + k] : b[(size_t)k * N + j]);
            out[(size_t)i * N + j] = (float)sum;
        }
}

/* ------------------------------------------------------------ 05.heads */

/* The plain path's steps 2-3 (and 3'-2') on their own: the grader makes
 * [Q|K|V] = X W_QKV and O = Y W_O + b_O (and their backward) with its loops,
 * the student's code splits and merges the heads; O, A and the gradients
 * against PyTorch. */
static int heads_case(const GoldCase *c, int with_backward) {
    const GoldTensor *X = grade_tensor(c, "X"), *W_O = grade_tensor(c, "W_O");
    const int B = X->dims[0], N = X->dims[1], D = X->dims[2], H = grade_i32(c, "heads")[0];
    const int HD = W_O->dims[0], D_out = W_O->dims[1], causal = grade_i32(c, "causal")[0], R = B * N;
    const int *lens = grade_i32_or_null(c, "lens");
    const float *W_QKV = grade_f32(c, "W_QKV"), *b_O = grade_f32_or_null(c, "b_O");
    const MultiHeadSpec s = {D, H, HD / H, D_out, MULTI_HEAD_PLAIN, 0};
    const HeadsScoring sc = {NULL, causal, 0, lens};   /* chapter 05's layer: 1/sqrt(D_H), no diagonal rule */
    float *QKV = grade_floats((size_t)R * 3 * HD), *Y = grade_floats((size_t)R * HD);
    float *A = grade_floats(multi_head_attention_floats(&s, B, N)), *O = grade_floats((size_t)R * D_out);
    product(QKV, X->data, 0, W_QKV, 0, R, D, 3 * HD);
    multi_head_heads_forward(Y, A, NULL, NULL, QKV, &sc, H, HD / H, B, N);
    product(O, Y, 0, W_O->data, 0, R, HD, D_out);
    for (int r = 0; b_O && r < R; r++)
        for (int o = 0; o < D_out; o++) O[(size_t)r * D_out + o] += b_O[o];
    if (grade_golden_close(c, "A", A, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT) ||
        grade_golden_close(c, "O", O, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT))
        return -1;
    if (!with_backward) return 0;
    float *dY = grade_floats((size_t)R * HD), *dQKV = grade_floats((size_t)R * 3 * HD);
    float *scratch = grade_floats(multi_head_scratch_floats(&s, B, N));
    float *dX = grade_floats((size_t)R * D), *dW_QKV = grade_floats((size_t)D * 3 * HD);
    product(dY, grade_f32(c, "dO"), 0, W_O->data, 1, R, D_out, HD);
    for (int times = 1; times <= 2; times++) {   /* a second call adds to d[Q|K|V] */
        multi_head_heads_backward(dQKV, scratch, dY, A, NULL, QKV, &sc, H, HD / H, B, N);
        product(dX, dQKV, 0, W_QKV, 1, R, 3 * HD, D);
        product(dW_QKV, X->data, 1, dQKV, 0, D, R, 3 * HD);
        if (grade_golden_close(c, "dX", dX, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dW_QKV", dW_QKV, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
            return -1;
    }
    return 0;
}

static int heads_forward_case(const GoldCase *c) { return heads_case(c, 0); }
static int heads_backward_case(const GoldCase *c) { return heads_case(c, 1); }
static int heads_forward(void) { return grade_golden_cases("multi_head", NULL, heads_forward_case); }
static int heads_backward(void) { return grade_golden_cases("multi_head", NULL, heads_backward_case); }

/* Each head's own scale and the diagonal rule (HeadsScoring's alpha and
 * no_self, which the sheet asks for; chapter 07's locality attention uses
 * both): head h's scores are alpha_h Q_h K_h^T, query i never sees key i.
 * The heads alone on [Q|K|V] drawn by the grader, with alpha = (exp 0.7,
 * exp -0.4) (neither 1/sqrt(D_H)), H = 2, D_H = 3: the backward against
 * finite differences of L = sum wY . Y (a backward with the fixed
 * 1/sqrt(D_H) fails). */
enum { LS_B = 2, LS_N = 4, LS_H = 2, LS_DH = 3, LS_HD = LS_H * LS_DH };
typedef struct {
    float QKV[LS_B * LS_N * 3 * LS_HD], wY[LS_B * LS_N * LS_HD], Y[LS_B * LS_N * LS_HD];
    float A[LS_B * LS_H * LS_N * LS_N], alpha[LS_H];
} OwnScale;

static double head_scale_loss(void *ctx) {
    OwnScale *L = ctx;
    const HeadsScoring sc = {L->alpha, 0, 1, NULL};
    multi_head_heads_forward(L->Y, L->A, NULL, NULL, L->QKV, &sc, LS_H, LS_DH, LS_B, LS_N);
    double sum = 0.0;
    for (int i = 0; i < LS_B * LS_N * LS_HD; i++) sum += (double)L->wY[i] * L->Y[i];
    return sum;
}

static int heads_own_scale(void) {
    static OwnScale L;
    const int n_qkv = LS_B * LS_N * 3 * LS_HD, n_y = LS_B * LS_N * LS_HD;
    grade_fill(L.QKV, (size_t)n_qkv, 1.0f, 61);
    grade_fill(L.wY, (size_t)n_y, 1.0f, 62);
    L.alpha[0] = expf(0.7f);
    L.alpha[1] = expf(-0.4f);
    head_scale_loss(&L);
    const HeadsScoring sc = {L.alpha, 0, 1, NULL};
    float *dQKV = grade_floats((size_t)n_qkv), *scratch = grade_floats(multi_head_scratch_floats(
        &(MultiHeadSpec){LS_HD, LS_H, LS_DH, LS_HD, MULTI_HEAD_PLAIN, 0}, LS_B, LS_N));
    multi_head_heads_backward(dQKV, scratch, L.wY, L.A, NULL, L.QKV, &sc, LS_H, LS_DH, LS_B, LS_N);
    return grade_gradient("d[Q|K|V] with each head's own scale", head_scale_loss, &L, L.QKV, dQKV, 3,
                          (int[]){LS_B, LS_N, 3 * LS_HD}, 1e-3f, 1e-2);
}

/* Attention dropout with a fixed mask, each head's own scale and the
 * diagonal rule (the options the sheet asks for) on an odd shape: H = 2,
 * D_H = 3, N = 5, keep [B, H, N, N] a fixed mask of 0 and 1/(1-p), p = 0.4
 * (different for each head). The forward against the grader's own loops:
 * A = softmax(alpha_h Q_h K_h^T) without the diagonal, undropped;
 * Y_h = (A o keep) V_h. The
 * backward against finite differences of L = sum wY . Y with keep fixed.
 * A fixed 1/sqrt(D_H) in both passes is consistent with itself (finite
 * differences pass it): the forward check is what catches it. */
enum { KD_B = 2, KD_N = 5, KD_H = 2, KD_DH = 3, KD_HD = KD_H * KD_DH };
typedef struct {
    float QKV[KD_B * KD_N * 3 * KD_HD], wY[KD_B * KD_N * KD_HD], Y[KD_B * KD_N * KD_HD];
    float A[KD_B * KD_H * KD_N * KD_N], keep[KD_B * KD_H * KD_N * KD_N], dropped[KD_B * KD_N * KD_N];
    float alpha[KD_H];
} KeptHeads;

static double kept_loss(void *ctx) {
    KeptHeads *L = ctx;
    const HeadsScoring sc = {L->alpha, 0, 1, NULL};
    multi_head_heads_forward(L->Y, L->A, L->keep, L->dropped, L->QKV, &sc, KD_H, KD_DH, KD_B, KD_N);
    double sum = 0.0;
    for (int i = 0; i < KD_B * KD_N * KD_HD; i++) sum += (double)L->wY[i] * L->Y[i];
    return sum;
}

static KeptHeads *kept_heads(void) {
    static KeptHeads L;
    grade_fill(L.QKV, sizeof L.QKV / sizeof(float), 1.0f, 71);
    grade_fill(L.wY, sizeof L.wY / sizeof(float), 1.0f, 72);
    for (size_t i = 0; i < sizeof L.keep / sizeof(float); i++)   /* about 40% dropped, a pattern per head */
        L.keep[i] = (i * 7919u + i / (KD_N * KD_N) * 13u) % 5u < 2u ? 0.0f : 1.0f / 0.6f;
    L.alpha[0] = expf(0.7f);
    L.alpha[1] = expf(-0.4f);
    kept_loss(&L);
    return &L;
}

static int heads_kept_forward(void) {
    const KeptHeads *L = kept_heads();
    float *Y = grade_floats((size_t)KD_B * KD_N * KD_HD), *A = grade_floats((size_t)KD_B * KD_H * KD_N * KD_N);
    for (int b = 0; b < KD_B; b++)
        for (int h = 0; h < KD_H; h++) {
            const float *QKV = L->QKV + (size_t)b * KD_N * 3 * KD_HD;
            float *A_bh = A + ((size_t)b * KD_H + h) * KD_N * KD_N;
            const float *keep = L->keep + ((size_t)b * KD_H + h) * KD_N * KD_N;
            for (int i = 0; i < KD_N; i++) {
                double e[KD_N], max = -INFINITY, sum = 0.0;
                for (int j = 0; j < KD_N; j++) {
                    double dot = 0.0;
                    for (int d = 0; d < KD_DH; d++)
                        dot += (double)QKV[i * 3 * KD_HD + h * KD_DH + d] * QKV[j * 3 * KD_HD + KD_HD + h * KD_DH + d];
                    e[j] = j == i ? -INFINITY : (double)L->alpha[h] * dot;
                    max = fmax(max, e[j]);
                }
                for (int j = 0; j < KD_N; j++) sum += e[j] = exp(e[j] - max);
                for (int j = 0; j < KD_N; j++) A_bh[i * KD_N + j] = (float)(e[j] / sum);
                for (int d = 0; d < KD_DH; d++) {
                    double y = 0.0;
                    for (int j = 0; j < KD_N; j++)
                        y += e[j] / sum * keep[i * KD_N + j] * QKV[j * 3 * KD_HD + 2 * KD_HD + h * KD_DH + d];
                    Y[((size_t)b * KD_N + i) * KD_HD + h * KD_DH + d] = (float)y;
                }
            }
        }
    return grade_close("A", "softmax(alpha_h Q_h K_h^T), the diagonal masked, not dropped", L->A, A, 4,
                       (int[]){KD_B, KD_H, KD_N, KD_N}, 1e-4, 1e-5) ||
           grade_close("Y", "(A o keep) V_h per head, with alpha_h as the scale", L->Y, Y, 3,
                       (int[]){KD_B, KD_N, KD_HD}, 1e-4, 1e-5);
}

static int heads_kept_backward(void) {
    KeptHeads *L = kept_heads();
    const int n_qkv = KD_B * KD_N * 3 * KD_HD;
    const HeadsScoring sc = {L->alpha, 0, 1, NULL};
    float *dQKV = grade_floats((size_t)n_qkv), *scratch = grade_floats(multi_head_scratch_floats(
        &(MultiHeadSpec){KD_HD, KD_H, KD_DH, KD_HD, MULTI_HEAD_PLAIN, 1}, KD_B, KD_N));
    multi_head_heads_backward(dQKV, scratch, L->wY, L->A, L->keep, L->QKV, &sc, KD_H, KD_DH, KD_B, KD_N);
    return grade_gradient("d[Q|K|V] with the keep mask and each head's own scale", kept_loss, L, L->QKV, dQKV, 3,
                          (int[]){KD_B, KD_N, 3 * KD_HD}, 1e-3f, 1e-2);
}

/* The fused kernel on every head of the layer against PyTorch (05.online_softmax's
 * second check): the projections around it by the grader's loops. */
static int fused_forward_case(const GoldCase *c) {
    const GoldTensor *X = grade_tensor(c, "X"), *W_O = grade_tensor(c, "W_O");
    const int B = X->dims[0], N = X->dims[1], D = X->dims[2], H = grade_i32(c, "heads")[0];
    const int HD = W_O->dims[0], D_out = W_O->dims[1], causal = grade_i32(c, "causal")[0], R = B * N;
    const float *b_O = grade_f32_or_null(c, "b_O");
    float *QKV = grade_floats((size_t)R * 3 * HD), *Y = grade_floats((size_t)R * HD);
    float *lse = grade_floats((size_t)B * H * N), *O = grade_floats((size_t)R * D_out);
    float *block = grade_floats(flash_attention_scratch_floats(FLASH_BLOCK_Q, FLASH_BLOCK_K));
    product(QKV, X->data, 0, grade_f32(c, "W_QKV"), 0, R, D, 3 * HD);
    flash_attention_forward_heads(Y, lse, QKV, B, N, H, HD / H, causal, grade_i32_or_null(c, "lens"), FLASH_BLOCK_Q,
                                  FLASH_BLOCK_K, block);
    product(O, Y, 0, W_O->data, 0, R, HD, D_out);
    for (int r = 0; b_O && r < R; r++)
        for (int o = 0; o < D_out; o++) O[(size_t)r * D_out + o] += b_O[o];
    return grade_golden_close(c, "O", O, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT);
}
static int fused_layer_forward(void) { return grade_golden_cases("multi_head", NULL, fused_forward_case); }

/* ------------------------------------------- 05.qkv_projection, 05.output_projection */

/* A small layer with random weights: D = 5, H = 2 heads of D_H = 3, D_out = 4,
 * R = 7 rows. Outputs that are written start as junk (so must be
 * overwritten), gradients that accumulate start as junk too, and backward
 * runs twice (so must add). */
enum { P_D = 5, P_H = 2, P_DH = 3, P_HD = P_H * P_DH, P_DOUT = 4, P_R = 7 };

static int qkv_forward(void) {
    const MultiHeadSpec s = {P_D, P_H, P_DH, P_DOUT, MULTI_HEAD_PLAIN, 0};
    float X[P_R * P_D], W_QKV[P_D * 3 * P_HD], QKV[P_R * 3 * P_HD], want[P_R * 3 * P_HD];
    grade_fill(X, P_R * P_D, 1.0f, 51);
    grade_fill(W_QKV, P_D * 3 * P_HD, 1.0f, 52);
    grade_fill(QKV, P_R * 3 * P_HD, 9.0f, 53);   /* junk: forward writes */
    const MultiHeadWeights w = {W_QKV, NULL, NULL};
    multi_head_qkv_forward(QKV, X, &s, &w, P_R);
    product(want, X, 0, W_QKV, 0, P_R, P_D, 3 * P_HD);
    return grade_close("[Q|K|V]", "X W_QKV as plain loops", QKV, want, 2, (int[]){P_R, 3 * P_HD}, 1e-5, 1e-6);
}

static int qkv_backward(void) {
    const MultiHeadSpec s = {P_D, P_H, P_DH, P_DOUT, MULTI_HEAD_PLAIN, 0};
    float X[P_R * P_D], W_QKV[P_D * 3 * P_HD], dQKV[P_R * 3 * P_HD];
    float dX[P_R * P_D], dW[P_D * 3 * P_HD], dX_want[P_R * P_D], dW_want[P_D * 3 * P_HD];
    float dX0[P_R * P_D], dW0[P_D * 3 * P_HD];
    grade_fill(X, P_R * P_D, 1.0f, 54);
    grade_fill(W_QKV, P_D * 3 * P_HD, 1.0f, 55);
    grade_fill(dQKV, P_R * 3 * P_HD, 1.0f, 56);
    grade_fill(dX, P_R * P_D, 1.0f, 57);          /* what earlier gradients left there: backward adds */
    grade_fill(dW, P_D * 3 * P_HD, 1.0f, 58);
    memcpy(dX0, dX, sizeof dX);
    memcpy(dW0, dW, sizeof dW);
    const MultiHeadWeights w = {W_QKV, NULL, NULL};
    product(dX_want, dQKV, 0, W_QKV, 1, P_R, 3 * P_HD, P_D);
    product(dW_want, X, 1, dQKV, 0, P_D, P_R, 3 * P_HD);
    for (int times = 1; times <= 2; times++) {
        multi_head_qkv_backward(dX, dW, dQKV, X, &s, &w, P_R);
        float want_x[P_R * P_D], want_w[P_D * 3 * P_HD];
        for (int i = 0; i < P_R * P_D; i++) want_x[i] = dX0[i] + (float)times * dX_want[i];
        for (int i = 0; i < P_D * 3 * P_HD; i++) want_w[i] = dW0[i] + (float)times * dW_want[i];
        char what[64];
        snprintf(what, sizeof what, "dX after %d backward call%s", times, times > 1 ? "s" : "");
        if (grade_close(what, "what was there + d[Q|K|V] W_QKV^T (plain loops)", dX, want_x, 2,
                        (int[]){P_R, P_D}, 1e-5, 1e-5))
            return -1;
        snprintf(what, sizeof what, "dW_QKV after %d backward call%s", times, times > 1 ? "s" : "");
        if (grade_close(what, "what was there + X^T d[Q|K|V] (plain loops)", dW, want_w, 2,
                        (int[]){P_D, 3 * P_HD}, 1e-5, 1e-5))
            return -1;
    }
    return 0;
}

static int output_forward(void) {
    const MultiHeadSpec s = {P_D, P_H, P_DH, P_DOUT, MULTI_HEAD_PLAIN, 0};
    float Y[P_R * P_HD], W_O[P_HD * P_DOUT], b_O[P_DOUT], O[P_R * P_DOUT], want[P_R * P_DOUT];
    grade_fill(Y, P_R * P_HD, 1.0f, 61);
    grade_fill(W_O, P_HD * P_DOUT, 1.0f, 62);
    grade_fill(b_O, P_DOUT, 1.0f, 63);
    for (int with_bias = 0; with_bias <= 1; with_bias++) {
        grade_fill(O, P_R * P_DOUT, 9.0f, 64);   /* junk: forward writes */
        const MultiHeadWeights w = {NULL, W_O, with_bias ? b_O : NULL};
        multi_head_output_forward(O, Y, &s, &w, P_R);
        product(want, Y, 0, W_O, 0, P_R, P_HD, P_DOUT);
        for (int r = 0; with_bias && r < P_R; r++)
            for (int o = 0; o < P_DOUT; o++) want[r * P_DOUT + o] += b_O[o];
        if (grade_close(with_bias ? "O (with b_O)" : "O (no bias)", "Y W_O + b_O as plain loops", O, want, 2,
                        (int[]){P_R, P_DOUT}, 1e-5, 1e-6))
            return -1;
    }
    return 0;
}

static int output_backward(void) {
    const MultiHeadSpec s = {P_D, P_H, P_DH, P_DOUT, MULTI_HEAD_PLAIN, 0};
    float Y[P_R * P_HD], W_O[P_HD * P_DOUT], b_O[P_DOUT], dO[P_R * P_DOUT], dY[P_R * P_HD], dY_want[P_R * P_HD];
    float dW[P_HD * P_DOUT], db[P_DOUT], dW0[P_HD * P_DOUT], db0[P_DOUT], dW_want[P_HD * P_DOUT], db_want[P_DOUT];
    grade_fill(Y, P_R * P_HD, 1.0f, 65);
    grade_fill(W_O, P_HD * P_DOUT, 1.0f, 66);
    grade_fill(b_O, P_DOUT, 1.0f, 67);
    grade_fill(dO, P_R * P_DOUT, 1.0f, 68);
    grade_fill(dW, P_HD * P_DOUT, 1.0f, 69);      /* what earlier gradients left there: backward adds */
    grade_fill(db, P_DOUT, 1.0f, 70);
    memcpy(dW0, dW, sizeof dW);
    memcpy(db0, db, sizeof db);
    const MultiHeadWeights w = {NULL, W_O, b_O};
    MultiHeadWeights dw = {NULL, dW, db};
    product(dY_want, dO, 0, W_O, 1, P_R, P_DOUT, P_HD);
    product(dW_want, Y, 1, dO, 0, P_HD, P_R, P_DOUT);
    for (int o = 0; o < P_DOUT; o++) {
        double sum = 0.0;
        for (int r = 0; r < P_R; r++) sum += dO[r * P_DOUT + o];
        db_want[o] = (float)sum;
    }
    for (int times = 1; times <= 2; times++) {
        grade_fill(dY, P_R * P_HD, 9.0f, 71);    /* junk: dY is written */
        multi_head_output_backward(dY, &dw, dO, Y, &s, &w, P_R);
        float want_w[P_HD * P_DOUT], want_b[P_DOUT];
        for (int i = 0; i < P_HD * P_DOUT; i++) want_w[i] = dW0[i] + (float)times * dW_want[i];
        for (int i = 0; i < P_DOUT; i++) want_b[i] = db0[i] + (float)times * db_want[i];
        char what[64];
        snprintf(what, sizeof what, "dY (backward call %d)", times);
        if (grade_close(what, "dO W_O^T as plain loops", dY, dY_want, 2, (int[]){P_R, P_HD}, 1e-5, 1e-5))
            return -1;
        snprintf(what, sizeof what, "dW_O after %d backward call%s", times, times > 1 ? "s" : "");
        if (grade_close(what, "what was there + Y^T dO (plain loops)", dW, want_w, 2, (int[]){P_HD, P_DOUT}, 1e-5,
                        1e-5))
            return -1;
        snprintf(what, sizeof what, "db_O after %d backward call%s", times, times > 1 ? "s" : "");
        if (grade_close(what, "what was there + dO's column sums", db, want_b, 1, (int[]){P_DOUT}, 1e-5, 1e-5))
            return -1;
    }
    return 0;
}

/* ------------------------------------------------ one head: 05.online_softmax, 05.flash_backward */

enum { HEAD_N = 11, HEAD_DH = 5, BLOCK_Q = 4, BLOCK_K = 3 };

/* One head's Q, K, V, dO and chapter 03's answers for them under a mask. */
typedef struct {
    int causal, key_len;
    float Q[HEAD_N * HEAD_DH], K[HEAD_N * HEAD_DH], V[HEAD_N * HEAD_DH], dO[HEAD_N * HEAD_DH];
    float Y[HEAD_N * HEAD_DH], A[HEAD_N * HEAD_N], E[HEAD_N * HEAD_N], lse[HEAD_N];
    float dQ[HEAD_N * HEAD_DH], dK[HEAD_N * HEAD_DH], dV[HEAD_N * HEAD_DH];
} Head;

static const char *mask_name(const Head *h) { return h->causal ? "causal" : h->key_len ? "padded" : "no mask"; }

static void head_make(Head *h, int causal, int key_len, unsigned seed) {
    memset(h, 0, sizeof *h);
    h->causal = causal;
    h->key_len = key_len;
    grade_fill(h->Q, HEAD_N * HEAD_DH, 2.0f, seed);   /* scores of a few units: the maximum moves between blocks */
    grade_fill(h->K, HEAD_N * HEAD_DH, 2.0f, seed + 1);
    grade_fill(h->V, HEAD_N * HEAD_DH, 1.0f, seed + 2);
    grade_fill(h->dO, HEAD_N * HEAD_DH, 1.0f, seed + 3);
    const float alpha = 1.0f / sqrtf((float)HEAD_DH);
    const AttentionMask mask = {NULL, causal, key_len, 0};
    dot_attention_forward(h->Y, HEAD_DH, h->A, h->E, &(DotHead){h->Q, HEAD_DH, h->K, HEAD_DH, h->V, HEAD_DH,
                          HEAD_N, HEAD_N, HEAD_DH, HEAD_DH, alpha}, &mask, NULL);
    for (int i = 0; i < HEAD_N; i++) {   /* lse_i = log sum_j exp(E_ij), the masked E_ij being -inf */
        double m = -INFINITY, sum = 0.0;
        for (int j = 0; j < HEAD_N; j++) m = fmax(m, h->E[i * HEAD_N + j]);
        for (int j = 0; j < HEAD_N; j++) sum += exp((double)h->E[i * HEAD_N + j] - m);
        h->lse[i] = (float)(m + log(sum));
    }
    float scratch[2 * HEAD_N * HEAD_N];
    dot_attention_backward(&(DotHeadGrads){h->dQ, HEAD_DH, h->dK, HEAD_DH, h->dV, HEAD_DH}, scratch, h->dO,
                           HEAD_DH, h->A, NULL, &(DotHead){h->Q, HEAD_DH, h->K, HEAD_DH, h->V, HEAD_DH, HEAD_N,
                           HEAD_N, HEAD_DH, HEAD_DH, alpha});
}

static const int MASKS[3][2] = {{0, 0}, {1, 0}, {0, 7}};   /* {causal, key_len} */

static int online_softmax_head(void) {
    static Head h;
    for (int m = 0; m < 3; m++) {
        head_make(&h, MASKS[m][0], MASKS[m][1], 10 * (unsigned)m);
        float O[HEAD_N * HEAD_DH], lse[HEAD_N];
        float *scratch = grade_floats(flash_attention_scratch_floats(BLOCK_Q, BLOCK_K));
        memset(O, 0, sizeof O);
        memset(lse, 0, sizeof lse);
        flash_attention_forward(O, HEAD_DH, lse, &(FlashHead){h.Q, HEAD_DH, h.K, HEAD_DH, h.V, HEAD_DH, HEAD_N,
                                HEAD_DH, h.causal, h.key_len, BLOCK_Q, BLOCK_K}, scratch);
        char what[64];
        snprintf(what, sizeof what, "O (%s, blocks of %d x %d)", mask_name(&h), BLOCK_Q, BLOCK_K);
        if (grade_close(what, "chapter 03's softmax(Q K^T / sqrt(D_H)) V", O, h.Y, 2, (int[]){HEAD_N, HEAD_DH}, 1e-4,
                        1e-5))
            return -1;
        snprintf(what, sizeof what, "lse (%s)", mask_name(&h));
        if (grade_close(what, "log sum_j exp(E_ij) of chapter 03's scores", lse, h.lse, 1, (int[]){HEAD_N}, 1e-5, 1e-5))
            return -1;
    }
    return 0;
}

static int flash_backward_head(void) {
    static Head h;
    for (int m = 0; m < 3; m++) {
        head_make(&h, MASKS[m][0], MASKS[m][1], 10 * (unsigned)m + 5);
        float dQ[HEAD_N * HEAD_DH], dK[HEAD_N * HEAD_DH], dV[HEAD_N * HEAD_DH];
        memset(dQ, 0, sizeof dQ);
        memset(dK, 0, sizeof dK);
        memset(dV, 0, sizeof dV);
        float *scratch = grade_floats(flash_attention_scratch_floats(BLOCK_Q, BLOCK_K));
        /* chapter 03's outputs and log-sum-exps stand for the fused forward's */
        flash_attention_backward(dQ, dK, dV, HEAD_DH, h.dO, HEAD_DH, h.Y, HEAD_DH, h.lse, &(FlashHead){h.Q,
                                 HEAD_DH, h.K, HEAD_DH, h.V, HEAD_DH, HEAD_N, HEAD_DH, h.causal, h.key_len,
                                 BLOCK_Q, BLOCK_K}, scratch);
        const float *got[3] = {dQ, dK, dV}, *want[3] = {h.dQ, h.dK, h.dV};
        static const char *const names[3] = {"dQ", "dK", "dV"};
        for (int k = 0; k < 3; k++) {
            char what[64];
            snprintf(what, sizeof what, "%s (%s, blocks of %d x %d)", names[k], mask_name(&h), BLOCK_Q, BLOCK_K);
            if (grade_close(what, "chapter 03's backward", got[k], want[k], 2, (int[]){HEAD_N, HEAD_DH}, 1e-4, 1e-5))
                return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ hidden checks
 *
 * make grade-submissions only (grade.h): shapes, masks, block sizes and
 * inputs drawn from the teacher's seed, outputs compared with the reference
 * solution's. */

/* The plain layer on drawn B, N, D, H, D_H, D_out, mask: O, A, dX, dW_QKV, dW_O. */
static int hidden_heads(void) {
    const int B = grade_draw(1, 2), N = grade_draw(1, 6), D = grade_draw(1, 6), H = grade_draw(1, 3);
    const int D_H = grade_draw(1, 3), D_out = grade_draw(1, 5), causal = grade_draw(0, 1), HD = H * D_H;
    int *lens = grade_draw(0, 1) ? grade_ints((size_t)B) : NULL;
    for (int b = 0; lens && b < B; b++) lens[b] = grade_draw(1, N);
    const MultiHeadSpec s = {D, H, D_H, D_out, MULTI_HEAD_PLAIN, 0};
    MultiHeadWeights w = {grade_floats((size_t)D * 3 * HD), grade_floats((size_t)HD * D_out),
                          grade_floats((size_t)D_out)};
    float *X = grade_floats((size_t)B * N * D), *dO = grade_floats((size_t)B * N * D_out);
    grade_draw_fill(w.W_QKV, (size_t)D * 3 * HD, 0.8f);
    grade_draw_fill(w.W_O, (size_t)HD * D_out, 0.8f);
    grade_draw_fill(w.b_O, (size_t)D_out, 0.5f);
    grade_draw_fill(X, (size_t)B * N * D, 1.0f);
    grade_draw_fill(dO, (size_t)B * N * D_out, 1.0f);
    float *O = grade_floats((size_t)B * N * D_out), *A = grade_floats(multi_head_attention_floats(&s, B, N));
    float *cache = grade_floats(multi_head_cache_floats(&s, B, N));
    multi_head_forward(O, A, NULL, cache, X, &s, &w, causal, lens, B, N);
    if (grade_reference("O", O, 3, (int[]){B, N, D_out}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
        grade_reference("A", A, 1, (int[]){(int)multi_head_attention_floats(&s, B, N)}, GRADE_RTOL_GRAD,
                        GRADE_ATOL_GRAD))
        return -1;
    float *scratch = grade_floats(multi_head_scratch_floats(&s, B, N)), *dX = grade_floats((size_t)B * N * D);
    MultiHeadWeights dw = {grade_floats((size_t)D * 3 * HD), grade_floats((size_t)HD * D_out),
                           grade_floats((size_t)D_out)};
    grade_draw_fill(dX, (size_t)B * N * D, 1.0f);   /* backward adds to what is there */
    grade_draw_fill(dw.W_QKV, (size_t)D * 3 * HD, 1.0f);
    grade_draw_fill(dw.W_O, (size_t)HD * D_out, 1.0f);
    multi_head_backward(dX, &dw, scratch, dO, A, NULL, cache, X, &s, &w, causal, lens, B, N);
    if (grade_reference("dX", dX, 3, (int[]){B, N, D}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
        grade_reference("dW_QKV", dw.W_QKV, 2, (int[]){D, 3 * HD}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
        return -1;
    return grade_reference("dW_O", dw.W_O, 2, (int[]){HD, D_out}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

/* One head of drawn N, D_H, mask and block sizes; with the reference
 * answers of chapter 03 (O and lse) for the fused backward. */
typedef struct {
    int N, D_H, causal, key_len, Bq, Bk;
    float *Q, *K, *V, *dO, *Y, *lse;
} DrawnHead;

/* mask: 0 none, 1 causal, 2 padded keys. */
static DrawnHead draw_head(int mask) {
    DrawnHead h;
    h.N = grade_draw(2, 13);
    h.D_H = grade_draw(1, 6);
    h.causal = mask == 1;
    h.key_len = mask == 2 ? grade_draw(1, h.N - 1) : 0;
    h.Bq = grade_draw(1, 5);
    h.Bk = grade_draw(1, 5);
    const size_t n = (size_t)h.N * h.D_H;
    h.Q = grade_floats(n), h.K = grade_floats(n), h.V = grade_floats(n), h.dO = grade_floats(n);
    grade_draw_fill(h.Q, n, 2.0f);
    grade_draw_fill(h.K, n, 2.0f);
    grade_draw_fill(h.V, n, 1.0f);
    grade_draw_fill(h.dO, n, 1.0f);
    h.Y = grade_floats(n);
    h.lse = grade_floats((size_t)h.N);
    float *A = grade_floats((size_t)h.N * h.N), *E = grade_floats((size_t)h.N * h.N);
    const AttentionMask m = {NULL, h.causal, h.key_len, 0};
    dot_attention_forward(h.Y, h.D_H, A, E, &(DotHead){h.Q, h.D_H, h.K, h.D_H, h.V, h.D_H, h.N, h.N, h.D_H, h.D_H,
                          1.0f / sqrtf((float)h.D_H)}, &m, NULL);
    for (int i = 0; i < h.N; i++) {
        double mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < h.N; j++) mx = fmax(mx, E[i * h.N + j]);
        for (int j = 0; j < h.N; j++) sum += exp((double)E[i * h.N + j] - mx);
        h.lse[i] = (float)(mx + log(sum));
    }
    return h;
}

static int hidden_online_softmax(int mask) {
    const DrawnHead h = draw_head(mask);
    float *O = grade_floats((size_t)h.N * h.D_H), *lse = grade_floats((size_t)h.N);
    float *scratch = grade_floats(flash_attention_scratch_floats(h.Bq, h.Bk));
    flash_attention_forward(O, h.D_H, lse, &(FlashHead){h.Q, h.D_H, h.K, h.D_H, h.V, h.D_H, h.N, h.D_H, h.causal,
                            h.key_len, h.Bq, h.Bk}, scratch);
    if (grade_reference("O", O, 2, (int[]){h.N, h.D_H}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD)) return -1;
    return grade_reference("lse", lse, 1, (int[]){h.N}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

static int hidden_flash_backward(int mask) {
    const DrawnHead h = draw_head(mask);
    const size_t n = (size_t)h.N * h.D_H;
    float *dQ = grade_floats(n), *dK = grade_floats(n), *dV = grade_floats(n);
    float *scratch = grade_floats(flash_attention_scratch_floats(h.Bq, h.Bk));
    flash_attention_backward(dQ, dK, dV, h.D_H, h.dO, h.D_H, h.Y, h.D_H, h.lse, &(FlashHead){h.Q, h.D_H, h.K,
                             h.D_H, h.V, h.D_H, h.N, h.D_H, h.causal, h.key_len, h.Bq, h.Bk}, scratch);
    if (grade_reference("dQ", dQ, 2, (int[]){h.N, h.D_H}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
        grade_reference("dK", dK, 2, (int[]){h.N, h.D_H}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
        return -1;
    return grade_reference("dV", dV, 2, (int[]){h.N, h.D_H}, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD);
}

/* ------------------------------------------------------------ end to end */

/* The chapter's model, 2 heads of 8, attention plain or fused, trained
 * GRADE_TRAIN_STEPS steps on drawn digits (grade.h): each step's loss the solution's. */
static int training_with(MultiHeadAttention attention, const char *what) {
    Classifier m;
    const MultiHeadModelConfig cfg = {
        .digit = {.N = 6, .D = 16, .F = 32, .L = 2, .C = 10, .pos = POS_LEARNED, .causal = 0}, .H = 2, .D_H = 8};
    if (mh_model_build(&m, &cfg, attention, GRADE_TRAIN_B, 3) < 0) return grade_fail("mh_model_build failed");
    const int rc = grade_classifier_training(what, &m, 6, 10);
    m.destroy(m.self);
    return rc;
}
static int training_plain(void) { return training_with(MULTI_HEAD_PLAIN, "05 two heads"); }
static int training_fused(void) { return training_with(MULTI_HEAD_FUSED, "05 two heads, fused"); }

static const GradeCheck HIDDEN_HEADS[] = {
    {"O, A, dX, dW_QKV, dW_O on a drawn shape, heads and mask", hidden_heads},
    {"the same on another drawn shape", hidden_heads},
    {"end to end: 40 training steps of the 2-head model, each loss the solution's", training_plain},
};
static int hidden_online_plain(void) { return hidden_online_softmax(0); }
static int hidden_online_causal(void) { return hidden_online_softmax(1); }
static int hidden_online_padded(void) { return hidden_online_softmax(2); }
static int hidden_flash_plain(void) { return hidden_flash_backward(0); }
static int hidden_flash_causal(void) { return hidden_flash_backward(1); }
static int hidden_flash_padded(void) { return hidden_flash_backward(2); }

static const GradeCheck HIDDEN_ONLINE_SOFTMAX[] = {
    {"O and lse of one head, drawn shape and blocks, no mask", hidden_online_plain},
    {"the same, causal", hidden_online_causal},
    {"the same, padded keys", hidden_online_padded},
    {"end to end: 40 training steps of the 2-head model, fused, each loss the solution's", training_fused},
};
static const GradeCheck HIDDEN_FLASH_BACKWARD[] = {
    {"dQ, dK, dV of one head, drawn shape and blocks, no mask", hidden_flash_plain},
    {"the same, causal", hidden_flash_causal},
    {"the same, padded keys", hidden_flash_padded},
    {"end to end: 40 training steps of the 2-head model, fused, each loss the solution's", training_fused},
};
static const GradeCheck HIDDEN_QKV_PROJECTION[] = {
    {"end to end: 40 training steps of the 2-head model, each loss the solution's", training_plain},
};
static const GradeCheck HIDDEN_OUTPUT_PROJECTION[] = {
    {"end to end: 40 training steps of the 2-head model, each loss the solution's", training_plain},
};
static const GradeExercise HIDDEN[] = {
    {"05.heads", HIDDEN_HEADS, GRADE_COUNT(HIDDEN_HEADS)},
    {"05.online_softmax", HIDDEN_ONLINE_SOFTMAX, GRADE_COUNT(HIDDEN_ONLINE_SOFTMAX)},
    {"05.flash_backward", HIDDEN_FLASH_BACKWARD, GRADE_COUNT(HIDDEN_FLASH_BACKWARD)},
    {"05.qkv_projection", HIDDEN_QKV_PROJECTION, GRADE_COUNT(HIDDEN_QKV_PROJECTION)},
    {"05.output_projection", HIDDEN_OUTPUT_PROJECTION, GRADE_COUNT(HIDDEN_OUTPUT_PROJECTION)},
};

/* ------------------------------------------------------------ the exercises */

static const GradeCheck HEADS[] = {
    {"O and A against PyTorch (plain path; the projections by the grader)", heads_forward},
    {"dX, dW_QKV against PyTorch's autograd (plain path; the projections by the grader)", heads_backward},
    {"each head's own scale (HeadsScoring.alpha, no diagonal), H = 2, D_H = 3: d[Q|K|V] against finite "
     "differences", heads_own_scale},
    {"attention dropout (a fixed keep mask) and each head's own scale, N = 5, H = 2, D_H = 3: A and Y against the "
     "grader's loops", heads_kept_forward},
    {"the same: d[Q|K|V] against finite differences", heads_kept_backward},
};
static const GradeCheck QKV_PROJECTION[] = {
    {"[Q|K|V] = X W_QKV", qkv_forward},
    {"dX, dW_QKV: added, twice", qkv_backward},
};
static const GradeCheck OUTPUT_PROJECTION[] = {
    {"O = Y W_O + b_O, with and without the bias", output_forward},
    {"dY written; dW_O, db_O added, twice", output_backward},
};
static const GradeCheck ONLINE_SOFTMAX[] = {
    {"one head's O and lse against chapter 03's attention", online_softmax_head},
    {"the fused layer's O against PyTorch", fused_layer_forward},
};
static const GradeCheck FLASH_BACKWARD[] = {
    {"one head's dQ, dK, dV against chapter 03's backward", flash_backward_head},
};
static const GradeExercise EXERCISES[] = {
    {"05.heads", HEADS, GRADE_COUNT(HEADS)},
    {"05.qkv_projection", QKV_PROJECTION, GRADE_COUNT(QKV_PROJECTION)},
    {"05.output_projection", OUTPUT_PROJECTION, GRADE_COUNT(OUTPUT_PROJECTION)},
    {"05.online_softmax", ONLINE_SOFTMAX, GRADE_COUNT(ONLINE_SOFTMAX)},
    {"05.flash_backward", FLASH_BACKWARD, GRADE_COUNT(FLASH_BACKWARD)},
};

int main(int argc, char **argv) {
    return grade_main_hidden(argc, argv, EXERCISES, GRADE_COUNT(EXERCISES), HIDDEN, GRADE_COUNT(HIDDEN));
}
