/* test_multi_head.c - chapter 05: multi-head attention and its digit model.
 *
 *  - the fused layer's backward against finite differences (dX, dW_QKV,
 *    dW_O, db_O) on odd shapes: H = 1, 2, 3, odd D_H and N, with and without
 *    the causal mask, with padding, and with dropout on the weights (fixed
 *    keep masks);
 *  - against the previous chapter, on the naive and on the AVX2 backend:
 *      H = 1 with W_O = I equals chapter 04's self-attention (same W_Q, W_K,
 *      W_V), forward and backward;
 *      the fused layer equals H separate chapter-04 heads, concatenated and
 *      projected by W_O, forward and backward;
 *  - masks: blocked weights exactly 0, rows sum to 1, a future input changes
 *    no earlier output (bit for bit);
 *  - 1 and 2 threads give the same bits (the sequences shared out);
 *  - the whole model: gradient check of every tensor, and with H = 1,
 *    W_O = I, b_O = 0 it gives chapter 04's DigitModel logits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "04_self_attention/digit_model.h"
#include "data/digit_tasks.h"
#include "04_self_attention/self_attention.h"
#include "05_multi_head_attention/multi_head.h"
#include "05_multi_head_attention/multi_head_model.h"
#include "nn/gradcheck.h"
#include "nn/layers.h"
#include "nn/transformer_layers.h"
#include "kernels/matmul.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "layer_checks.h"
#include "skip_threads.h"

#define EPS 5e-3f      /* see test_attention.c */
#define TOL 1e-2
#define MAX_CHECKS 120

/* The backends to compare on: naive always, avx2 when the CPU has it. */
static int n_backends(void) { return cpu_has_avx2_fma() ? 2 : 1; }
static const char *backend_at(int k) { return k == 0 ? "naive" : "avx2"; }

/* A multi-head layer and its buffers, for B sequences of N inputs. */
typedef struct {
    MultiHeadSpec s;
    int B, N, causal;
    const int *lens;
    float *X, *params, *O, *A, *cache, *wO;
    float *keep;          /* dropout on the weights [B, H, N, N], or NULL */
    MultiHeadWeights w;
} Layer;

static void layer_make(Layer *L, int B, int N, int D, int H, int D_H, int D_out, Rng *r) {
    memset(L, 0, sizeof *L);
    L->s = (MultiHeadSpec){D, H, D_H, D_out, MULTI_HEAD_PLAIN, 0};
    L->B = B; L->N = N;
    L->X = zeroed_floats((size_t)B * N * D);
    L->params = zeroed_floats(multi_head_param_count(&L->s));
    L->O = zeroed_floats((size_t)B * N * D_out);
    L->wO = zeroed_floats((size_t)B * N * D_out);
    L->A = zeroed_floats(multi_head_attention_floats(&L->s, B, N));
    L->cache = zeroed_floats(multi_head_cache_floats(&L->s, B, N));
    fill_uniform(L->X, (size_t)B * N * D, 1.0f, r);
    fill_uniform(L->params, multi_head_param_count(&L->s), 0.8f, r);
    fill_uniform(L->wO, (size_t)B * N * D_out, 1.0f, r);
    L->w = multi_head_weights_view(&L->s, L->params);
}

static void layer_free(Layer *L) {
    free(L->X); free(L->params); free(L->O); free(L->wO); free(L->A); free(L->cache); free(L->keep);
}

static void layer_forward(Layer *L) {
    multi_head_forward(L->O, L->A, L->keep, L->cache, L->X, &L->s, &L->w, L->causal, L->lens, L->B, L->N);
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

/* ------------------------------------------------------------------------ */

static void test_multi_head_gradients(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 1, 0);
    const int shapes[][6] = {            /* B N D H D_H D_out */
        {1, 1, 1, 1, 1, 1}, {2, 5, 4, 2, 3, 3}, {1, 7, 5, 3, 3, 4}, {2, 9, 6, 3, 1, 5}, {1, 6, 3, 1, 5, 2}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int mode = 0; mode < 4; mode++) {
            /* 0 plain, 1 causal, 2 causal + padding, 3 + dropout */
            const int *sh = shapes[k];
            Layer L;
            layer_make(&L, sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], &r);
            int lens[2] = {L.N > 2 ? L.N - 2 : 1, L.N};
            L.causal = mode >= 1 && mode <= 3;
            L.lens = mode >= 2 ? lens : NULL;
            if (mode == 3) {   /* the same keep masks for every forward: a fixed function */
                L.s.keep_masks = 1;
                free(L.cache);
                L.cache = zeroed_floats(multi_head_cache_floats(&L.s, L.B, L.N));
                size_t nA = multi_head_attention_floats(&L.s, L.B, L.N);
                L.keep = zeroed_floats(nA);
                dropout_mask(L.keep, (int)nA, 0.4f, &r);
            }
            size_t nX = (size_t)L.B * L.N * L.s.D, nP = multi_head_param_count(&L.s);
            float *dX = zeroed_floats(nX), *dP = zeroed_floats(nP);
            float *scratch = zeroed_floats(multi_head_scratch_floats(&L.s, L.B, L.N));
            float *dO = zeroed_floats((size_t)L.B * L.N * L.s.D_out);
            for (int b = 0; b < L.B; b++)          /* dL/dO = wO on real outputs, 0 on padding */
                for (int i = 0; i < (L.lens ? L.lens[b] : L.N); i++)
                    for (int d = 0; d < L.s.D_out; d++) {
                        size_t q = ((size_t)b * L.N + i) * L.s.D_out + d;
                        dO[q] = L.wO[q];
                    }
            MultiHeadWeights dw = multi_head_weights_view(&L.s, dP);
            layer_forward(&L);
            multi_head_backward(dX, &dw, scratch, dO, L.A, L.keep, L.cache, L.X, &L.s, &L.w, L.causal, L.lens,
                                L.B, L.N);
            char what[128];
            snprintf(what, sizeof what, "shape %zu mode %d: dX", k, mode);
            expect_gradient(gradcheck(layer_loss, &L, L.X, dX, nX, EPS, MAX_CHECKS), TOL, what);
            snprintf(what, sizeof what, "shape %zu mode %d: dW_QKV|dW_O|db_O", k, mode);
            expect_gradient(gradcheck(layer_loss, &L, L.params, dP, nP, EPS, MAX_CHECKS), TOL, what);
            /* backward accumulates: a second call doubles the gradients */
            float *dX2 = zeroed_floats(nX);
            memcpy(dX2, dX, sizeof(float) * nX);
            layer_forward(&L);   /* gradcheck's last forward had a parameter moved */
            multi_head_backward(dX2, NULL, scratch, dO, L.A, L.keep, L.cache, L.X, &L.s, &L.w, L.causal, L.lens,
                                L.B, L.N);
            for (size_t i = 0; i < nX; i++) assert_float_equal(dX2[i], 2.0f * dX[i], 1e-5f * (1 + fabsf(dX[i])));
            free(dX); free(dX2); free(dP); free(scratch); free(dO);
            layer_free(&L);
        }
}

/* Chapter 05 against chapter 04: H = 1, D_H = D, W_O = I, no bias is chapter
 * 04's self-attention with W_Q, W_K, W_V = the three blocks of W_QKV. */
static void test_one_head_equals_self_attention(void **state) {
    (void)state;
    enum { B = 2, N = 7, D_IN = 5, D = 3 };
    int lens[B] = {7, 4};
    for (int k = 0; k < n_backends(); k++) {
        assert_int_equal(backend_select(backend_at(k)), 0);
        for (int mode = 0; mode < 3; mode++) {      /* plain, causal, padding */
            Rng r;
            rng_seed(&r, 2, (uint64_t)mode);
            Layer L;
            layer_make(&L, B, N, D_IN, 1, D, D, &r);
            L.causal = mode == 1;
            L.lens = mode == 2 ? lens : NULL;
            memset(L.w.W_O, 0, sizeof(float) * D * D);
            for (int i = 0; i < D; i++) L.w.W_O[i * D + i] = 1.0f;     /* W_O = I */
            L.w.b_O = NULL;
            /* chapter 04's three matrices, copied out of W_QKV [D_IN, 3 D] */
            float W_Q[D_IN * D], W_K[D_IN * D], W_V[D_IN * D];
            for (int i = 0; i < D_IN; i++)
                for (int c = 0; c < D; c++) {
                    W_Q[i * D + c] = L.w.W_QKV[i * 3 * D + c];
                    W_K[i * D + c] = L.w.W_QKV[i * 3 * D + D + c];
                    W_V[i * D + c] = L.w.W_QKV[i * 3 * D + 2 * D + c];
                }
            SelfAttentionWeights sw = {W_Q, W_K, W_V};
            float Y[B * N * D], A[B * N * N];
            float *sa_cache = zeroed_floats(self_attention_cache_floats(B, N, D));
            self_attention_forward(Y, A, sa_cache, L.X, &sw, L.causal, L.lens, B, N, D_IN, D);
            layer_forward(&L);
            expect_close(L.O, Y, B * N * D, 1e-5f, "O vs chapter 04 Y");
            expect_close(L.A, A, B * N * N, 1e-6f, "A vs chapter 04 A");

            /* backward: the same upstream gradient gives the same dX and dW */
            float dY[B * N * D], dX4[B * N * D_IN] = {0}, dX5[B * N * D_IN] = {0};
            float dW4[3 * D_IN * D] = {0};
            fill_uniform(dY, B * N * D, 1.0f, &r);
            SelfAttentionWeights sdw = {dW4, dW4 + D_IN * D, dW4 + 2 * D_IN * D};
            float *sa_scratch = zeroed_floats(self_attention_scratch_floats(B, N, D));
            self_attention_backward(dX4, &sdw, sa_scratch, dY, A, sa_cache, L.X, &sw, B, N, D_IN, D);
            float *dP = zeroed_floats(multi_head_param_count(&L.s));
            MultiHeadWeights dw = multi_head_weights_view(&L.s, dP);
            float *scratch = zeroed_floats(multi_head_scratch_floats(&L.s, B, N));
            multi_head_backward(dX5, &dw, scratch, dY, L.A, NULL, L.cache, L.X, &L.s, &L.w, L.causal, L.lens,
                                B, N);
            expect_close(dX5, dX4, B * N * D_IN, 1e-5f, "dX vs chapter 04");
            for (int i = 0; i < D_IN; i++)
                for (int part = 0; part < 3; part++)
                    expect_close(dw.W_QKV + i * 3 * D + part * D, sdw.W_Q + part * D_IN * D + i * D, D,
                                 1e-5f, "dW_QKV vs chapter 04 dW_Q|dW_K|dW_V");
            free(sa_cache); free(sa_scratch); free(dP); free(scratch);
            layer_free(&L);
        }
    }
    backend_select("auto");
}

/* The fused layer equals a loop over H chapter-04 heads: head h uses the
 * columns h*D_H.. of W_Q, W_K, W_V; the outputs Y_h are concatenated into
 * Y [N, H D_H] and projected, O = Y W_O + b_O. */
static void test_fused_equals_separate_heads(void **state) {
    (void)state;
    enum { B = 2, N = 7, D = 5, H = 3, D_H = 3, D_OUT = 4, HD = H * D_H };
    int lens[B] = {5, 7};
    for (int k = 0; k < n_backends(); k++) {
        assert_int_equal(backend_select(backend_at(k)), 0);
        for (int mode = 0; mode < 3; mode++) {
            Rng r;
            rng_seed(&r, 3, (uint64_t)mode);
            Layer L;
            layer_make(&L, B, N, D, H, D_H, D_OUT, &r);
            L.causal = mode == 1;
            L.lens = mode == 2 ? lens : NULL;
            layer_forward(&L);

            float dO[B * N * D_OUT], dY[B * N * HD];
            fill_uniform(dO, B * N * D_OUT, 1.0f, &r);
            matmul_nt(dY, dO, L.w.W_O, B * N, HD, D_OUT, 0);          /* dY = dO W_O^T */
            float Ycat[B * N * HD], dX_loop[B * N * D] = {0}, dW_loop[D * 3 * HD] = {0};
            for (int h = 0; h < H; h++) {
                float W[3][D * D_H], dW[3][D * D_H], Y_h[B * N * D_H], A_h[B * N * N];
                float dY_h[B * N * D_H];
                memset(dW, 0, sizeof dW);
                for (int i = 0; i < D; i++)
                    for (int part = 0; part < 3; part++)
                        for (int c = 0; c < D_H; c++)
                            W[part][i * D_H + c] = L.w.W_QKV[i * 3 * HD + part * HD + h * D_H + c];
                SelfAttentionWeights sw = {W[0], W[1], W[2]}, sdw = {dW[0], dW[1], dW[2]};
                float *sa_cache = zeroed_floats(self_attention_cache_floats(B, N, D_H));
                float *sa_scratch = zeroed_floats(self_attention_scratch_floats(B, N, D_H));
                self_attention_forward(Y_h, A_h, sa_cache, L.X, &sw, L.causal, L.lens, B, N, D, D_H);
                for (int b = 0; b < B; b++)
                    expect_close(L.A + ((size_t)b * H + h) * N * N, A_h + b * N * N, N * N, 1e-6f,
                                 "A of head h vs chapter 04 head");
                for (int row = 0; row < B * N; row++)
                    for (int c = 0; c < D_H; c++) {
                        Ycat[row * HD + h * D_H + c] = Y_h[row * D_H + c];   /* concatenate */
                        dY_h[row * D_H + c] = dY[row * HD + h * D_H + c];
                    }
                self_attention_backward(dX_loop, &sdw, sa_scratch, dY_h, A_h, sa_cache, L.X, &sw, B, N, D,
                                        D_H);
                for (int i = 0; i < D; i++)
                    for (int part = 0; part < 3; part++)
                        for (int c = 0; c < D_H; c++)
                            dW_loop[i * 3 * HD + part * HD + h * D_H + c] = dW[part][i * D_H + c];
                free(sa_cache); free(sa_scratch);
            }
            float O_loop[B * N * D_OUT];
            linear_forward(O_loop, Ycat, L.w.W_O, L.w.b_O, B * N, HD, D_OUT);   /* O = Y W_O + b_O */
            expect_close(L.O, O_loop, B * N * D_OUT, 1e-5f, "fused O vs H chapter-04 heads");

            float *dP = zeroed_floats(multi_head_param_count(&L.s)), dX[B * N * D] = {0};
            MultiHeadWeights dw = multi_head_weights_view(&L.s, dP);
            float *scratch = zeroed_floats(multi_head_scratch_floats(&L.s, B, N));
            multi_head_backward(dX, &dw, scratch, dO, L.A, NULL, L.cache, L.X, &L.s, &L.w, L.causal, L.lens,
                                B, N);
            expect_close(dX, dX_loop, B * N * D, 1e-5f, "fused dX vs H chapter-04 heads");
            expect_close(dw.W_QKV, dW_loop, D * 3 * HD, 1e-5f, "fused dW_QKV vs H chapter-04 heads");
            float dW_O[HD * D_OUT] = {0};
            matmul_tn(dW_O, Ycat, dO, HD, D_OUT, B * N, 0);                /* dW_O = Y^T dO */
            expect_close(dw.W_O, dW_O, HD * D_OUT, 1e-5f, "fused dW_O vs Y^T dO");
            free(dP); free(scratch);
            layer_free(&L);
        }
    }
    backend_select("auto");
}

static void test_masks(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 4, 0);
    enum { B = 2, N = 8, D = 6, H = 2, D_H = 3 };
    int lens[B] = {8, 5};
    Layer L;
    layer_make(&L, B, N, D, H, D_H, D, &r);
    L.causal = 1;
    L.lens = lens;
    layer_forward(&L);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < N; i++) {
                const float *row = L.A + (((size_t)b * H + h) * N + i) * N;
                double sum = 0;
                for (int j = 0; j < N; j++) {
                    if (j > i || j >= lens[b]) assert_true(row[j] == 0.0f);
                    sum += row[j];
                }
                assert_float_equal(sum, 1.0, 1e-5);
            }
    /* causal: changing input t leaves outputs 0..t-1 unchanged, bit for bit */
    L.lens = NULL;
    layer_forward(&L);
    float O_before[B * N * D];
    memcpy(O_before, L.O, sizeof O_before);
    for (int t = N - 1; t >= 1; t--) {
        for (int d = 0; d < D; d++) L.X[t * D + d] = 50.0f * (d + 1) - 3.0f * t;
        layer_forward(&L);
        assert_memory_equal(L.O, O_before, sizeof(float) * t * D);
    }
    layer_free(&L);
}

/* ------------------------------------------------------------------------ */
/* The whole model                                                           */
/* ------------------------------------------------------------------------ */

typedef struct {
    DigitModel *m;
    const int *x, *y;
    int B;
} ModelCtx;

static double model_loss(void *p) {
    ModelCtx *c = p;
    return digit_model_forward(c->m, c->x, c->y, c->B);
}

static void test_model_gradients(void **state) {
    (void)state;
    enum { B = 2, N = 5 };
    const struct { PosType pos; int causal, layers, H, D_H; } configs[] = {
        {POS_LEARNED, 0, 2, 2, 3}, {POS_SINUSOIDAL, 1, 1, 3, 1}};
    for (int k = 0; k < 2; k++) {
        MultiHeadModel mh;
        const MultiHeadModelConfig cfg = {
            .digit = {.N = N, .D = 6, .F = 7, .L = configs[k].layers, .C = digit_task_classes(TASK_COUNT_NEXT, N),
                      .pos = configs[k].pos, .causal = configs[k].causal},
            .H = configs[k].H, .D_H = configs[k].D_H};
        assert_int_equal(mh_model_create(&mh, &cfg, MULTI_HEAD_PLAIN, B, 7 + k), 0);
        DigitModel *m = &mh.model;
        /* away from relu's kinks, as in test_self_attention.c */
        Rng r;
        rng_seed(&r, 8, 0);
        int x[B * N], y[B * N];
        for (int attempt = 0;; attempt++) {
            assert_true(attempt < 200);
            digit_task_batch(TASK_COUNT_NEXT, x, y, B, N, &r);
            fill_uniform(m->params.data, m->params.size, 0.5f, &r);
            digit_model_forward(m, x, y, B);
            float nearest = INFINITY;
            for (size_t i = 0; i < (size_t)m->L * B * N * m->F; i++) nearest = fminf(nearest, fabsf(m->pre[i]));
            if (nearest > 0.01f) break;
        }
        params_zero_grad(&m->params);
        digit_model_forward(m, x, y, B);
        digit_model_backward(m, x, y);
        float *analytic = malloc(sizeof(float) * m->params.size);
        memcpy(analytic, m->params.grad, sizeof(float) * m->params.size);
        ModelCtx c = {m, x, y, B};
        for (int t = 0; t < m->params.n_tensors; t++) {
            const ParamTensor *pt = &m->params.tensors[t];
            GradCheckResult res = gradcheck(model_loss, &c, m->params.data + pt->offset,
                                            analytic + pt->offset, pt->count, 1e-3f, 50);
            char what[96];
            snprintf(what, sizeof what, "model (H=%d) %s", configs[k].H, pt->name);
            expect_gradient(res, TOL, what);
        }
        free(analytic);
        mh_model_free(&mh);
    }
}

/* n floats of tensor src_offset of src into tensor dst_offset of dst */
static void copy_tensor(Params *dst, size_t dst_offset, Params *src, size_t src_offset, size_t n) {
    memcpy(params_data(dst, dst_offset), params_data(src, src_offset), sizeof(float) * n);
}

/* With H = 1, W_O = I and b_O = 0 the model is chapter 04's DigitModel:
 * everything but the attention is the same code, and the attention of one
 * head is chapter 03's core either way. */
static void test_model_one_head_equals_chapter04_model(void **state) {
    (void)state;
    enum { B = 3, N = 6, D = 8, F = 12, L = 2 };
    const MultiHeadModelConfig c = {.digit = {.N = N, .D = D, .F = F, .L = L, .C = 10, .pos = POS_LEARNED},
                                    .H = 1, .D_H = D};
    DigitModel old;
    MultiHeadModel mh;
    assert_int_equal(digit_model_create(&old, &DIGIT_SELF_ATTENTION, NULL, 1, &c.digit, B, 11), 0);
    assert_int_equal(mh_model_create(&mh, &c, MULTI_HEAD_PLAIN, B, 12), 0);
    DigitModel *m = &mh.model;
    Params *po = &old.params, *pm = &m->params;
    copy_tensor(pm, m->emb, po, old.emb, 10 * D);
    copy_tensor(pm, m->pos_table, po, old.pos_table, N * D);
    copy_tensor(pm, m->W_out, po, old.W_out, D * 10);
    copy_tensor(pm, m->b_out, po, old.b_out, 10);
    for (int l = 0; l < L; l++) {
        copy_tensor(pm, m->W_1[l], po, old.W_1[l], D * F);
        copy_tensor(pm, m->b_1[l], po, old.b_1[l], F);
        copy_tensor(pm, m->W_2[l], po, old.W_2[l], F * D);
        copy_tensor(pm, m->b_2[l], po, old.b_2[l], D);
        /* attn[l] = W_QKV, W_O, b_O here; W_Q, W_K, W_V in chapter 04's */
        float *W_QKV = params_data(pm, m->attn[l][0]), *W_O = params_data(pm, m->attn[l][1]);
        for (int i = 0; i < D; i++)
            for (int part = 0; part < 3; part++)
                memcpy(W_QKV + i * 3 * D + part * D, params_data(po, old.attn[l][part]) + i * D, sizeof(float) * D);
        memset(W_O, 0, sizeof(float) * D * D);
        for (int i = 0; i < D; i++) W_O[i * D + i] = 1.0f;
        memset(params_data(pm, m->attn[l][2]), 0, sizeof(float) * D);
    }
    Rng r;
    rng_seed(&r, 9, 0);
    int x[B * N], y[B * N];
    digit_task_batch(TASK_REVERSE, x, y, B, N, &r);
    double loss_old = digit_model_forward(&old, x, y, B);
    double loss_new = digit_model_forward(m, x, y, B);
    assert_float_equal(loss_new, loss_old, 1e-5);
    expect_close(m->logits, old.logits, B * N * 10, 1e-4f, "logits vs chapter 04 model");
    expect_close(digit_model_attention(m, 1, 0, 2), digit_model_attention(&old, 1, 0, 2), N * N, 1e-5f,
                 "layer 2 attention vs chapter 04 model");
    digit_model_free(&old);
    mh_model_free(&mh);
}

/* The threads share out the sequences of steps 2-3 and 3'-2', each with its
 * own scratch: 1 and 2 threads give the same bits, with and without dropout
 * (two threads writing one scratch would not). */
static void run_threads(Layer *L, int threads, float *O, float *dX, float *dP) {
    threads_set(threads);
    size_t nX = (size_t)L->B * L->N * L->s.D, nP = multi_head_param_count(&L->s);
    float *scratch = zeroed_floats(multi_head_scratch_floats(&L->s, L->B, L->N));
    memset(dX, 0, sizeof(float) * nX);
    memset(dP, 0, sizeof(float) * nP);
    MultiHeadWeights dw = multi_head_weights_view(&L->s, dP);
    layer_forward(L);
    memcpy(O, L->O, sizeof(float) * (size_t)L->B * L->N * L->s.D_out);
    multi_head_backward(dX, &dw, scratch, L->wO, L->A, L->keep, L->cache, L->X, &L->s, &L->w, L->causal,
                        L->lens, L->B, L->N);
    free(scratch);
    threads_set(0);
}

static void test_threads_same_bits(void **state) {
    (void)state;
    skip_without_threads();
    threads_model_set(0);   /* split even small work between the threads: their bits are compared */
    Rng r;
    rng_seed(&r, 9, 0);
    for (int dropout = 0; dropout <= 1; dropout++) {
        Layer L;
        layer_make(&L, 7, 33, 24, 3, 8, 24, &r);
        L.causal = 1;
        if (dropout) {
            L.s.keep_masks = 1;
            free(L.cache);
            L.cache = zeroed_floats(multi_head_cache_floats(&L.s, L.B, L.N));
            size_t nA = multi_head_attention_floats(&L.s, L.B, L.N);
            L.keep = zeroed_floats(nA);
            dropout_mask(L.keep, (int)nA, 0.3f, &r);
        }
        size_t nO = (size_t)L.B * L.N * L.s.D_out, nX = (size_t)L.B * L.N * L.s.D;
        size_t nP = multi_head_param_count(&L.s);
        float *O1 = zeroed_floats(nO), *O2 = zeroed_floats(nO), *dX1 = zeroed_floats(nX), *dX2 = zeroed_floats(nX);
        float *dP1 = zeroed_floats(nP), *dP2 = zeroed_floats(nP);
        run_threads(&L, 1, O1, dX1, dP1);
        run_threads(&L, 2, O2, dX2, dP2);
        assert_memory_equal(O1, O2, sizeof(float) * nO);
        assert_memory_equal(dX1, dX2, sizeof(float) * nX);
        assert_memory_equal(dP1, dP2, sizeof(float) * nP);
        free(O1); free(O2); free(dX1); free(dX2); free(dP1); free(dP2);
        layer_free(&L);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multi_head_gradients),
        cmocka_unit_test(test_threads_same_bits),
        cmocka_unit_test(test_one_head_equals_self_attention),
        cmocka_unit_test(test_fused_equals_separate_heads),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_model_gradients),
        cmocka_unit_test(test_model_one_head_equals_chapter04_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
