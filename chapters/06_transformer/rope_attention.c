/* rope_attention.c - chapter 06: multi-head attention with rotary
 * positions, chapter 05's four steps with the rotation after step 1 (see
 * rope_attention.h). */
#include "06_transformer/rope_attention.h"

#include "nn/rope.h"
#include "util/error.h"

int rope_attention_check(const MultiHeadSpec *s) {
    if (s->D_H % 2 != 0)
        return fail("rotary positions turn pairs of numbers: head width D_H = %d must be even", s->D_H);
    return multi_head_spec_check(s);
}

/* QKV [B, N, 3 H D_H] (or d[Q|K|V]): the Q and K columns rotated in place */
void rope_attention_rotate(float *QKV, int H, int D_H, int B, int N, int back) {
    const int HD = H * D_H, ld_qkv = 3 * HD;
    for (int b = 0; b < B; b++) {
        float *Q_b = QKV + (size_t)b * N * ld_qkv, *K_b = Q_b + HD;
        if (back) {
            rope_backward(Q_b, ld_qkv, N, H, D_H, 0);
            rope_backward(K_b, ld_qkv, N, H, D_H, 0);
        } else {
            rope_forward(Q_b, ld_qkv, N, H, D_H, 0);
            rope_forward(K_b, ld_qkv, N, H, D_H, 0);
        }
    }
}

/* X [B, N, D] -> O [B, N, D_out]; cache [Q|K|V] (rotated) | Y | the path's own */
void rope_attention_forward(float *O, float *A, const float *keep, float *cache, const float *X,
                            const MultiHeadSpec *s, const MultiHeadWeights *w, int causal, const int *lens, int B,
                            int N) {
    const int R = B * N, ld_qkv = 3 * s->H * s->D_H;
    float *QKV = cache, *Y = cache + (size_t)R * ld_qkv;
    multi_head_qkv_forward(QKV, X, s, w, R);                          /* 1. [Q|K|V] = X W_QKV */
    rope_attention_rotate(QKV, s->H, s->D_H, B, N, 0);                  /*    Q_h, K_h rotated at 0..N-1 */
    multi_head_attend_forward(A, keep, cache, s, causal, lens, B, N);   /* 2.-3. Y */
    multi_head_output_forward(O, Y, s, w, R);                         /* 4. O = Y W_O + b_O */
}

/* dO [B, N, D_out] -> dX [B, N, D] +=, dw += */
void rope_attention_backward(float *dX, MultiHeadWeights *dw, float *scratch, const float *dO, const float *A,
                             const float *keep, const float *cache, const float *X, const MultiHeadSpec *s,
                             const MultiHeadWeights *w, int causal, const int *lens, int B, int N) {
    const int R = B * N, ld_qkv = 3 * s->H * s->D_H;
    const float *Y = cache + (size_t)R * ld_qkv;
    float *dQKV = scratch, *dY = scratch + (size_t)R * ld_qkv;
    multi_head_output_backward(dY, dw, dO, Y, s, w, R);               /* 4'. dY, dW_O, db_O */
    multi_head_attend_backward(scratch, A, keep, cache, s, causal, lens, B, N);   /* 3'.-2'. d[Q|K|V] */
    rope_attention_rotate(dQKV, s->H, s->D_H, B, N, 1);                 /*    d[Q|K] turned back */
    multi_head_qkv_backward(dX, dw ? dw->W_QKV : NULL, dQKV, X, s, w, R);   /* 1'. dW_QKV, dX */
}
