/* test_locality.c - chapter 07: locality self-attention, composed of
 * chapter 05's steps (locality_attention.h).
 *
 *  - its backward against finite differences (dX, dW_QKV, dW_O, db_O and
 *    the learned scales dt) on odd shapes, with padding and with dropout on
 *    the weights (fixed keep masks);
 *  - each (sequence, head) equals chapter 03's attention with the diagonal
 *    blocked by an allowed matrix and alpha = exp(t_h), then O = Y W_O + b_O;
 *    A's diagonal is exactly 0;
 *  - with t_h = log(1/sqrt(D_H)) and no diagonal rule it would be chapter 05's
 *    layer: the scales start there;
 *  - its refusals (the fused kernel, a causal mask, cross-attention, rope);
 *  - in chapter 06's block: H more parameters right after the attention's
 *    b_O (the ViT checkpoint's layout), and the block's gradients. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "05_multi_head_attention/multi_head.h"
#include "06_transformer/block.h"
#include "07_vision_transformer/locality_attention.h"
#include "kernels/matmul.h"
#include "nn/gradcheck.h"
#include "nn/layers.h"
#include "nn/transformer_layers.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "block_checks.h"

#define EPS 5e-3f      /* see test_attention.c */
#define TOL 1e-2
#define MAX_CHECKS 120

/* A locality layer and its buffers: params = W_QKV | W_O | b_O | t [H]. */
typedef struct {
    MultiHeadSpec s;
    int B, N;
    const int *lens;
    float *X, *params, *t, *O, *A, *cache, *wO;
    float *keep;          /* dropout on the weights [B, H, N, N], or NULL */
    MultiHeadWeights w;
} Layer;

static size_t layer_params(const Layer *L) {
    return multi_head_param_count(&L->s) + locality_attention_extra_params(NULL, &L->s);
}

static void layer_make(Layer *L, int B, int N, int D, int H, int D_H, int D_out, int keep_masks, Rng *r) {
    memset(L, 0, sizeof *L);
    L->s = (MultiHeadSpec){D, H, D_H, D_out, MULTI_HEAD_PLAIN, keep_masks};
    L->B = B; L->N = N;
    L->X = zeroed_floats((size_t)B * N * D);
    L->params = zeroed_floats(layer_params(L));
    L->O = zeroed_floats((size_t)B * N * D_out);
    L->wO = zeroed_floats((size_t)B * N * D_out);
    L->A = zeroed_floats(multi_head_attention_floats(&L->s, B, N));
    L->cache = zeroed_floats(locality_attention_cache_floats(NULL, &L->s, B, N));
    fill_uniform(L->X, (size_t)B * N * D, 1.0f, r);
    fill_uniform(L->params, layer_params(L), 0.8f, r);
    fill_uniform(L->wO, (size_t)B * N * D_out, 1.0f, r);
    L->w = multi_head_weights_view(&L->s, L->params);
    L->t = L->params + multi_head_param_count(&L->s);
    /* the scales around log(1/sqrt(D_H)), apart per head */
    for (int h = 0; h < H; h++) L->t[h] = -0.5f * logf((float)D_H) + 0.3f * (float)h - 0.2f;
    if (keep_masks) {   /* the same keep masks for every forward: a fixed function */
        const size_t nA = multi_head_attention_floats(&L->s, B, N);
        L->keep = zeroed_floats(nA);
        dropout_mask(L->keep, (int)nA, 0.4f, r);
    }
}

static void layer_free(Layer *L) {
    free(L->X); free(L->params); free(L->O); free(L->wO); free(L->A); free(L->cache); free(L->keep);
}

static void layer_forward(Layer *L) {
    locality_attention_forward(NULL, L->O, L->A, L->keep, L->cache, L->X, &L->s, &L->w, L->t, 0, L->lens, L->B,
                               L->N);
}

/* L = sum over real outputs of wO * O */
static double layer_loss(void *p) {
    Layer *L = p;
    layer_forward(L);
    double s = 0.0;
    for (int b = 0; b < L->B; b++)
        for (int i = 0; i < L->N; i++) {
            if (L->lens && i >= L->lens[b]) continue;
            for (int d = 0; d < L->s.D_out; d++) {
                size_t k = ((size_t)b * L->N + i) * L->s.D_out + d;
                s += (double)L->wO[k] * L->O[k];
            }
        }
    return s;
}

static void test_locality_gradients(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 1, 0);
    const int shapes[][6] = {            /* B N D H D_H D_out */
        {2, 5, 4, 2, 3, 3}, {1, 7, 5, 3, 3, 4}, {2, 9, 6, 3, 1, 5}, {1, 6, 3, 1, 5, 2}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int mode = 0; mode < 2; mode++) {   /* 0 padding, 1 padding + dropout */
            const int *sh = shapes[k];
            Layer L;
            layer_make(&L, sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], mode, &r);
            int lens[2] = {L.N > 2 ? L.N - 2 : 2, L.N};
            L.lens = lens;
            const size_t nX = (size_t)L.B * L.N * L.s.D, nP = layer_params(&L);
            float *dX = zeroed_floats(nX), *dP = zeroed_floats(nP);
            float *scratch = zeroed_floats(locality_attention_scratch_floats(NULL, &L.s, L.B, L.N));
            float *dO = zeroed_floats((size_t)L.B * L.N * L.s.D_out);
            for (int b = 0; b < L.B; b++)          /* dL/dO = wO on real outputs, 0 on padding */
                for (int i = 0; i < L.lens[b]; i++)
                    for (int d = 0; d < L.s.D_out; d++) {
                        size_t q = ((size_t)b * L.N + i) * L.s.D_out + d;
                        dO[q] = L.wO[q];
                    }
            MultiHeadWeights dw = multi_head_weights_view(&L.s, dP);
            float *dt = dP + multi_head_param_count(&L.s);
            layer_forward(&L);
            locality_attention_backward(NULL, dX, &dw, dt, scratch, dO, L.A, L.keep, L.cache, L.X, &L.s, &L.w, L.t, 0,
                                        L.lens, L.B, L.N);
            char what[128];
            snprintf(what, sizeof what, "shape %zu mode %d: dX", k, mode);
            expect_gradient(gradcheck(layer_loss, &L, L.X, dX, nX, EPS, MAX_CHECKS), TOL, what);
            snprintf(what, sizeof what, "shape %zu mode %d: dW_QKV|dW_O|db_O", k, mode);
            expect_gradient(gradcheck(layer_loss, &L, L.params, dP, nP - (size_t)L.s.H, EPS, MAX_CHECKS), TOL, what);
            snprintf(what, sizeof what, "shape %zu mode %d: dt", k, mode);
            expect_gradient(gradcheck(layer_loss, &L, L.t, dt, (size_t)L.s.H, EPS, MAX_CHECKS), TOL, what);
            free(dX); free(dP); free(scratch); free(dO);
            layer_free(&L);
        }
}

/* Each (sequence, head) is dot_attention_forward with the allowed matrix
 * that blocks the diagonal and alpha = exp(t_h), then O = Y W_O + b_O. */
static void test_locality_equals_chapter03(void **state) {
    (void)state;
    enum { B = 2, N = 6, D = 5, H = 3, D_H = 2, D_OUT = 4, HD = H * D_H };
    int lens[B] = {6, 4};
    Rng r;
    rng_seed(&r, 17, 0);
    Layer L;
    layer_make(&L, B, N, D, H, D_H, D_OUT, 0, &r);
    L.lens = lens;
    layer_forward(&L);
    int off_diagonal[N * N];
    for (int n = 0; n < N * N; n++) off_diagonal[n] = n / N != n % N;
    float QKV[N * 3 * HD], Y[N * HD], A[N * N], O[N * D_OUT];
    for (int b = 0; b < B; b++) {
        const float *X_b = L.X + (size_t)b * N * D;
        sgemm(0, 0, N, 3 * HD, D, 1.0f, X_b, D, L.w.W_QKV, 3 * HD, 0.0f, QKV, 3 * HD);
        const AttentionMask mask = {off_diagonal, 0, lens[b], 0};
        for (int h = 0; h < H; h++) {
            dot_attention_forward(Y + h * D_H, HD, A, A, &(DotHead){QKV + h * D_H, 3 * HD, QKV + HD + h * D_H,
                                  3 * HD, QKV + 2 * HD + h * D_H, 3 * HD, N, N, D_H, D_H, expf(L.t[h])}, &mask, NULL);
            const float *A_bh = L.A + ((size_t)b * H + h) * N * N;
            expect_close(A_bh, A, N * N, 1e-6f, "locality: A of one head");
            for (int i = 0; i < N; i++) assert_true(A_bh[i * N + i] == 0.0f);
        }
        sgemm(0, 0, N, D_OUT, HD, 1.0f, Y, HD, L.w.W_O, D_OUT, 0.0f, O, D_OUT);
        for (int n = 0; n < N; n++)
            for (int o = 0; o < D_OUT; o++) O[n * D_OUT + o] += L.w.b_O[o];
        expect_close(L.O + (size_t)b * N * D_OUT, O, N * D_OUT, 1e-5f, "locality: O");
    }
    /* the scales start at chapter 05's fixed one */
    float t[H];
    locality_attention_init(NULL, t, &L.s);
    for (int h = 0; h < H; h++) assert_float_equal(expf(t[h]), 1.0f / sqrtf((float)D_H), 1e-6f);
    layer_free(&L);
}

/* What it refuses, in its own check and through the block's. */
static void test_locality_refusals(void **state) {
    (void)state;
    const MultiHeadSpec plain = {8, 2, 4, 8, MULTI_HEAD_PLAIN, 0}, fused = {8, 2, 4, 8, MULTI_HEAD_FUSED, 0};
    assert_int_equal(locality_attention_check(NULL, &plain, 0, 0), 0);
    assert_int_equal(locality_attention_check(NULL, &fused, 0, 0), -1);
    assert_int_equal(locality_attention_check(NULL, &plain, 1, 0), -1);
    assert_int_equal(locality_attention_check(NULL, &plain, 1, 1), -1);
    BlockSpec s = {.D = 8, .H = 2, .D_H = 4, .F = 12, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM,
                   .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN, .self_attention = &locality_attention};
    assert_int_equal(block_spec_check(&s), 0);
    s.causal = 1;
    assert_int_equal(block_spec_check(&s), -1);
    s.causal = 0;
    s.attention = MULTI_HEAD_FUSED;
    assert_int_equal(block_spec_check(&s), -1);
    s.attention = MULTI_HEAD_PLAIN;
    s.rope = 1;
    assert_int_equal(block_spec_check(&s), -1);
}

/* In chapter 06's block: t [H] right after the attention's b_O, started at
 * log(1/sqrt(D_H)); the whole block's gradients by finite differences
 * (block_checks.h). */
static void test_locality_in_the_block(void **state) {
    (void)state;
    enum { B = 2, N = 5, D = 6, H = 2, D_H = 3, F = 8 };
    Rng r;
    rng_seed(&r, 23, 0);
    const BlockSpec s = {.D = D, .H = H, .D_H = D_H, .F = F, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM,
                         .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN, .self_attention = &locality_attention};
    BlockSpec plain = s;
    plain.self_attention = NULL;
    const size_t nP = block_param_count(&s);
    assert_int_equal(nP, block_param_count(&plain) + H);
    float *params = zeroed_floats(nP);
    const BlockWeights w = block_weights_view(&s, params);
    assert_ptr_equal(w.attn_extra, w.attn.b_O + D);
    block_init(&s, &w, &r);
    for (int h = 0; h < H; h++) assert_float_equal(w.attn_extra[h], -0.5f * logf((float)D_H), 0.0f);
    free(params);
    const int lens[B] = {5, 3};
    expect_block_gradients(&s, B, N, lens, H, &r, EPS, TOL, MAX_CHECKS, "locality block");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_locality_gradients),
        cmocka_unit_test(test_locality_equals_chapter03),
        cmocka_unit_test(test_locality_refusals),
        cmocka_unit_test(test_locality_in_the_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
