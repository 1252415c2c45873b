/* grade_05.c - the coursework grader of chapter 05 (see grade.h): the heads
 * as column blocks of [Q|K|V] (plain path), the online softmax of the fused
 * forward, the fused backward.
 *
 * The plain layer against PyTorch (tests/golden/multi_head.bin); the fused
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

/* ------------------------------------------------------------ 05.heads */

static int multi_head_case(const GoldCase *c, MultiHeadAttention attention, int with_backward) {
    const GoldTensor *X = grade_tensor(c, "X"), *W_O = grade_tensor(c, "W_O");
    const int B = X->dims[0], N = X->dims[1], D = X->dims[2], H = grade_i32(c, "heads")[0];
    const int HD = W_O->dims[0], D_out = W_O->dims[1], causal = grade_i32(c, "causal")[0];
    const int *lens = grade_i32_or_null(c, "lens");
    const MultiHeadSpec s = {D, H, HD / H, D_out, attention, 0, 0, 0};
    MultiHeadWeights w = {(float *)grade_f32(c, "W_QKV"), (float *)W_O->data, (float *)grade_f32_or_null(c, "b_O"), NULL};
    float *O = grade_floats((size_t)B * N * D_out), *A = grade_floats(multi_head_attention_floats(&s, B, N));
    float *cache = grade_floats(multi_head_cache_floats(&s, B, N));
    multi_head_forward(O, attention == MULTI_HEAD_PLAIN ? A : NULL, NULL, cache, X->data, &s, &w, causal, lens, B, N);
    if (grade_golden_close(c, "O", O, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT)) return -1;
    if (attention == MULTI_HEAD_PLAIN && grade_golden_close(c, "A", A, 1, GRADE_RTOL_OUT, GRADE_ATOL_OUT)) return -1;
    if (!with_backward) return 0;
    float *scratch = grade_floats(multi_head_scratch_floats(&s, B, N)), *dX = grade_floats((size_t)B * N * D);
    MultiHeadWeights dw = {grade_floats((size_t)D * 3 * HD), grade_floats((size_t)HD * D_out),
                           w.b_O ? grade_floats((size_t)D_out) : NULL, NULL};
    for (int times = 1; times <= 2; times++) {
        multi_head_backward(dX, &dw, scratch, grade_f32(c, "dO"), A, NULL, cache, X->data, &s, &w, causal, lens, B, N);
        if (grade_golden_close(c, "dX", dX, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dW_QKV", dw.W_QKV, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD) ||
            grade_golden_close(c, "dW_O", dw.W_O, times, GRADE_RTOL_GRAD, GRADE_ATOL_GRAD))
            return -1;
    }
    return 0;
}

static int plain_forward_case(const GoldCase *c) { return multi_head_case(c, MULTI_HEAD_PLAIN, 0); }
static int plain_backward_case(const GoldCase *c) { return multi_head_case(c, MULTI_HEAD_PLAIN, 1); }
static int fused_forward_case(const GoldCase *c) { return multi_head_case(c, MULTI_HEAD_FUSED, 0); }
static int heads_forward(void) { return grade_golden_cases("multi_head", NULL, plain_forward_case); }
static int heads_backward(void) { return grade_golden_cases("multi_head", NULL, plain_backward_case); }
static int fused_layer_forward(void) { return grade_golden_cases("multi_head", NULL, fused_forward_case); }

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
    dot_attention_forward(h->Y, HEAD_DH, h->A, h->E, h->Q, HEAD_DH, h->K, HEAD_DH, h->V, HEAD_DH, alpha, &mask, NULL,
                          HEAD_N, HEAD_N, HEAD_DH, HEAD_DH);
    for (int i = 0; i < HEAD_N; i++) {   /* lse_i = log sum_j exp(E_ij), the masked E_ij being -inf */
        double m = -INFINITY, sum = 0.0;
        for (int j = 0; j < HEAD_N; j++) m = fmax(m, h->E[i * HEAD_N + j]);
        for (int j = 0; j < HEAD_N; j++) sum += exp((double)h->E[i * HEAD_N + j] - m);
        h->lse[i] = (float)(m + log(sum));
    }
    float scratch[2 * HEAD_N * HEAD_N];
    dot_attention_backward(h->dQ, HEAD_DH, h->dK, HEAD_DH, h->dV, HEAD_DH, scratch, h->dO, HEAD_DH, h->A, NULL, h->Q,
                           HEAD_DH, h->K, HEAD_DH, h->V, HEAD_DH, alpha, HEAD_N, HEAD_N, HEAD_DH, HEAD_DH);
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
        flash_attention_forward(O, HEAD_DH, lse, h.Q, HEAD_DH, h.K, HEAD_DH, h.V, HEAD_DH, HEAD_N, HEAD_DH, h.causal,
                                h.key_len, BLOCK_Q, BLOCK_K, scratch);
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
        flash_attention_backward(dQ, dK, dV, HEAD_DH, h.dO, HEAD_DH, h.Q, HEAD_DH, h.K, HEAD_DH, h.V, HEAD_DH, h.Y,
                                 HEAD_DH, h.lse, HEAD_N, HEAD_DH, h.causal, h.key_len, BLOCK_Q, BLOCK_K, scratch);
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

/* ------------------------------------------------------------ the exercises */

static const GradeCheck HEADS[] = {
    {"O and A against PyTorch (plain path)", heads_forward},
    {"dX, dW_QKV, dW_O against PyTorch's autograd (plain path)", heads_backward},
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
    {"05.online_softmax", ONLINE_SOFTMAX, GRADE_COUNT(ONLINE_SOFTMAX)},
    {"05.flash_backward", FLASH_BACKWARD, GRADE_COUNT(FLASH_BACKWARD)},
};

int main(int argc, char **argv) { return grade_main(argc, argv, EXERCISES, GRADE_COUNT(EXERCISES)); }
