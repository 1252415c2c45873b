/* test_self_attention.c - chapter 04: self-attention, positional encodings,
 * masks, the digit tasks and the digit model.
 *
 *  - self-attention backward against finite differences (dX, dW_Q, dW_K,
 *    dW_V), on odd shapes, with causal and padding masks;
 *  - against the previous chapter: self-attention equals chapter 03's
 *    cross-attention with queries Q = X W_Q and data X;
 *  - permutation equivariance: F(sigma X) = sigma F(X), for the layer and for
 *    the whole digit model without positional encodings;
 *  - causal mask: changing a future input leaves every earlier output
 *    unchanged (bit for bit), and masked weights are exactly 0;
 *  - padding: what sits in padded positions changes no real output;
 *  - sinusoidal encodings: the formula, and P_s . P_t depending on s - t only;
 *  - the whole digit model's gradient (the tasks: test_digit_tasks.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "03_dot_product_attention/attention.h"
#include "04_self_attention/digit_model.h"
#include "04_self_attention/self_attention.h"
#include "data/digit_tasks.h"
#include "nn/gradcheck.h"
#include "nn/layers.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "layer_checks.h"

#define EPS 5e-3f      /* see test_attention.c */
#define TOL 1e-2
#define MAX_CHECKS 150

/* A self-attention layer and its buffers, for B sequences of N inputs. */
typedef struct {
    int B, N, D_in, D, causal;
    const int *lens;
    float *X, *W, *Y, *A, *cache, *wY;   /* W = W_Q | W_K | W_V */
    SelfAttentionWeights w;
} Layer;

static void layer_make(Layer *L, int B, int N, int D_in, int D, Rng *r) {
    memset(L, 0, sizeof *L);
    L->B = B; L->N = N; L->D_in = D_in; L->D = D;
    L->X = zeroed_floats((size_t)B * N * D_in);
    L->W = zeroed_floats(3 * (size_t)D_in * D);
    L->Y = zeroed_floats((size_t)B * N * D);
    L->wY = zeroed_floats((size_t)B * N * D);
    L->A = zeroed_floats((size_t)B * N * N);
    L->cache = zeroed_floats(self_attention_cache_floats(B, N, D));
    fill_uniform(L->X, (size_t)B * N * D_in, 1.0f, r);
    fill_uniform(L->W, 3 * (size_t)D_in * D, 0.8f, r);
    fill_uniform(L->wY, (size_t)B * N * D, 1.0f, r);
    L->w = (SelfAttentionWeights){L->W, L->W + D_in * D, L->W + 2 * D_in * D};
}

static void layer_free(Layer *L) {
    free(L->X); free(L->W); free(L->Y); free(L->wY); free(L->A); free(L->cache);
}

static void layer_forward(Layer *L) {
    self_attention_forward(L->Y, L->A, L->cache, L->X, &L->w, L->causal, L->lens, L->B, L->N, L->D_in,
                           L->D);
}

static double layer_loss(void *p) {
    Layer *L = p;
    layer_forward(L);
    double s = 0.0;
    for (int b = 0; b < L->B; b++)
        for (int i = 0; i < L->N; i++) {
            if (L->lens && i >= L->lens[b]) continue;     /* padded outputs are not used */
            for (int d = 0; d < L->D; d++) {
                size_t k = ((size_t)b * L->N + i) * L->D + d;
                s += (double)L->wY[k] * L->Y[k];
            }
        }
    return s;
}

/* ------------------------------------------------------------------------ */

static void test_self_attention_gradients(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 1, 0);
    const int shapes[][4] = {{1, 1, 1, 1}, {2, 5, 3, 4}, {3, 7, 6, 5}, {1, 9, 4, 8}};  /* B N D_in D */
    for (int k = 0; k < 4; k++)
        for (int mode = 0; mode < 3; mode++) {   /* 0 plain, 1 causal, 2 padding */
            Layer L;
            layer_make(&L, shapes[k][0], shapes[k][1], shapes[k][2], shapes[k][3], &r);
            int lens[3] = {L.N, L.N > 1 ? L.N - 1 : 1, L.N > 2 ? 2 : 1};
            L.causal = mode == 1;
            L.lens = mode == 2 ? lens : NULL;
            size_t nX = (size_t)L.B * L.N * L.D_in, nW = 3 * (size_t)L.D_in * L.D;
            float *dX = zeroed_floats(nX), *dW = zeroed_floats(nW);
            float *scratch = zeroed_floats(self_attention_scratch_floats(L.B, L.N, L.D));
            /* dL/dY = wY on real outputs, 0 on padded ones */
            float *dY = zeroed_floats((size_t)L.B * L.N * L.D);
            for (int b = 0; b < L.B; b++)
                for (int i = 0; i < (L.lens ? L.lens[b] : L.N); i++)
                    for (int d = 0; d < L.D; d++) {
                        size_t q = ((size_t)b * L.N + i) * L.D + d;
                        dY[q] = L.wY[q];
                    }
            SelfAttentionWeights dw = {dW, dW + L.D_in * L.D, dW + 2 * L.D_in * L.D};
            layer_forward(&L);
            self_attention_backward(dX, &dw, scratch, dY, L.A, L.cache, L.X, &L.w, L.B, L.N, L.D_in, L.D);
            expect_gradient(gradcheck(layer_loss, &L, L.X, dX, nX, EPS, MAX_CHECKS), TOL, "self-attention dX");
            expect_gradient(gradcheck(layer_loss, &L, L.W, dW, nW, EPS, MAX_CHECKS), TOL,
                           "self-attention dW_Q|dW_K|dW_V");
            free(dX); free(dW); free(scratch); free(dY);
            layer_free(&L);
        }
}

/* Chapter 04 against chapter 03: self-attention(X) = cross-attention with
 * queries Q = X W_Q (given as they are) and data X (projected by W_K, W_V). */
static void test_self_attention_equals_cross_attention(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 2, 0);
    enum { N = 7, D_IN = 5, D = 6 };
    Layer L;
    layer_make(&L, 1, N, D_IN, D, &r);
    for (int causal = 0; causal <= 1; causal++) {
        L.causal = causal;
        layer_forward(&L);
        float Q[N * D], Y[N * D], A[N * N];
        linear_forward(Q, L.X, L.w.W_Q, NULL, N, D_IN, D);
        CrossAttentionSpec spec = {{SCORE_SCALED_DOT, D, D, 0}, D, D_IN, D, 0};
        CrossAttentionWeights cw = {NULL, L.w.W_K, L.w.W_V, {NULL, NULL, NULL, NULL}};
        AttentionMask mask = {NULL, causal, 0, 0};
        float *cache = zeroed_floats(cross_attention_cache_floats(&spec, N, N));
        cross_attention_forward(Y, A, cache, Q, L.X, &spec, &cw, &mask, N, N);
        for (int i = 0; i < N * D; i++) assert_float_equal(L.Y[i], Y[i], 1e-5f);
        for (int i = 0; i < N * N; i++) assert_float_equal(L.A[i], A[i], 1e-6f);
        free(cache);
    }
    layer_free(&L);
}

static void test_permutation_equivariance(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 3, 0);
    enum { N = 9, D_IN = 4, D = 5 };
    Layer L, P;
    layer_make(&L, 1, N, D_IN, D, &r);
    layer_make(&P, 1, N, D_IN, D, &r);
    memcpy(P.W, L.W, sizeof(float) * 3 * D_IN * D);
    int sigma[N];
    for (int i = 0; i < N; i++) sigma[i] = i;
    rng_shuffle(&r, sigma, N);
    for (int i = 0; i < N; i++) memcpy(P.X + i * D_IN, L.X + sigma[i] * D_IN, sizeof(float) * D_IN);
    layer_forward(&L);
    layer_forward(&P);
    for (int i = 0; i < N; i++) {
        for (int d = 0; d < D; d++) assert_float_equal(P.Y[i * D + d], L.Y[sigma[i] * D + d], 1e-5f);
        /* the attention weights are permuted on both axes */
        for (int j = 0; j < N; j++)
            assert_float_equal(P.A[i * N + j], L.A[sigma[i] * N + sigma[j]], 1e-6f);
    }
    /* with positional encodings added, it is no longer so */
    float pe[N * D_IN];
    positional_encoding_sinusoidal(pe, N, D_IN);
    add_positional_encoding(L.X, pe, 1, N, D_IN);
    add_positional_encoding(P.X, pe, 1, N, D_IN);
    layer_forward(&L);
    layer_forward(&P);
    double max_diff = 0;
    for (int i = 0; i < N; i++)
        for (int d = 0; d < D; d++) max_diff = fmax(max_diff, fabs(P.Y[i * D + d] - L.Y[sigma[i] * D + d]));
    assert_true(max_diff > 1e-2);
    layer_free(&L);
    layer_free(&P);
}

static void test_causal_mask(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 4, 0);
    enum { N = 8, D_IN = 6, D = 4 };
    Layer L;
    layer_make(&L, 1, N, D_IN, D, &r);
    L.causal = 1;
    layer_forward(&L);
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++) assert_true(L.A[i * N + j] == 0.0f);
    float Y_before[N * D];
    memcpy(Y_before, L.Y, sizeof Y_before);
    /* change the input at position t (even wildly): outputs 0..t-1 stay, bit for bit */
    for (int t = N - 1; t >= 1; t--) {
        for (int d = 0; d < D_IN; d++) L.X[t * D_IN + d] = 100.0f * (d + 1) - 7.0f * t;
        layer_forward(&L);
        assert_memory_equal(L.Y, Y_before, sizeof(float) * t * D);
        assert_true(memcmp(L.Y + t * D, Y_before + t * D, sizeof(float) * D) != 0);
    }
    layer_free(&L);
}

static void test_padding_mask(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 5, 0);
    enum { B = 3, N = 6, D_IN = 4, D = 5 };
    int lens[B] = {6, 4, 1};
    Layer L;
    layer_make(&L, B, N, D_IN, D, &r);
    L.lens = lens;
    layer_forward(&L);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++)
            for (int j = lens[b]; j < N; j++) assert_true(L.A[(b * N + i) * N + j] == 0.0f);
    float Y_before[B * N * D];
    memcpy(Y_before, L.Y, sizeof Y_before);
    for (int b = 0; b < B; b++)          /* garbage in every padded position */
        for (int i = lens[b]; i < N; i++)
            for (int d = 0; d < D_IN; d++) L.X[(b * N + i) * D_IN + d] = 1e3f;
    layer_forward(&L);
    for (int b = 0; b < B; b++)
        assert_memory_equal(L.Y + b * N * D, Y_before + b * N * D, sizeof(float) * lens[b] * D);
    layer_free(&L);
}

static void test_sinusoidal_encoding(void **state) {
    (void)state;
    enum { N = 40, D = 16 };
    float P[N * D];
    positional_encoding_sinusoidal(P, N, D);
    for (int t = 0; t < N; t++)
        for (int k = 0; k < D / 2; k++) {
            double omega = 1.0 / pow(10000.0, 2.0 * k / D);
            assert_float_equal(P[t * D + 2 * k], sin(omega * t), 1e-6f);
            assert_float_equal(P[t * D + 2 * k + 1], cos(omega * t), 1e-6f);
        }
    /* P_s . P_t = sum_k cos(omega_k (s - t)): a function of the offset only */
    for (int offset = 0; offset < 10; offset++) {
        double first = 0;
        for (int s = 0; s + offset < N; s++) {
            double dot = 0;
            for (int d = 0; d < D; d++) dot += (double)P[s * D + d] * P[(s + offset) * D + d];
            if (s == 0) first = dot;
            assert_float_equal(dot, first, 1e-4);
        }
        if (offset == 0) assert_float_equal(first, D / 2.0, 1e-4);   /* |P_t|^2 = D/2 */
    }
    /* odd D: the last dimension is a sine */
    float Podd[3 * 5];
    positional_encoding_sinusoidal(Podd, 3, 5);
    assert_float_equal(Podd[2 * 5 + 4], sin(2.0 / pow(10000.0, 4.0 / 5)), 1e-6f);
}

/* ------------------------------------------------------------------------ */
/* The whole digit model                                                     */
/* ------------------------------------------------------------------------ */

typedef struct {
    DigitModel *m;
    const int *x, *y;
    int B;
} ModelCtx;

/* Chapter 04's model, sized by hand. */
static int create_model(DigitModel *m, int N, int D, int F, int L, int C, PosType pos, int causal, int max_B,
                        uint64_t seed) {
    const DigitConfig c = {.N = N, .D = D, .F = F, .L = L, .C = C, .pos = pos, .causal = causal};
    return digit_model_create(m, &DIGIT_SELF_ATTENTION, NULL, 1, &c, max_B, seed);
}

static double model_loss(void *p) {
    ModelCtx *c = p;
    return digit_model_forward(c->m, c->x, c->y, c->B);
}

static void test_digit_model_gradients(void **state) {
    (void)state;
    enum { B = 3, N = 5 };
    const struct { PosType pos; int causal, layers; } configs[] = {
        {POS_LEARNED, 0, 2}, {POS_SINUSOIDAL, 1, 1}, {POS_NONE, 0, 2}};
    for (int k = 0; k < 3; k++) {
        DigitModel m;
        assert_int_equal(create_model(&m, N, 6, 7, configs[k].layers, 10, configs[k].pos,
                                            configs[k].causal, B, 7 + k), 0);
        /* Finite differences are only valid away from relu's kink at 0: draw
         * parameters and a batch until no MLP pre-activation is within 0.01
         * of 0 (a step of 1e-3 then cannot cross a kink). */
        Rng r;
        rng_seed(&r, 8, 0);
        int x[B * N], y[B * N];
        for (int attempt = 0;; attempt++) {
            assert_true(attempt < 100);
            digit_task_batch(TASK_REVERSE, x, y, B, N, &r);
            fill_uniform(m.params.data, m.params.size, 0.5f, &r);
            digit_model_forward(&m, x, y, B);
            float nearest = INFINITY;
            for (size_t i = 0; i < (size_t)m.L * B * N * m.F; i++) nearest = fminf(nearest, fabsf(m.pre[i]));
            if (nearest > 0.01f) break;
        }
        params_zero_grad(&m.params);
        digit_model_forward(&m, x, y, B);
        digit_model_backward(&m, x, y);
        float *analytic = malloc(sizeof(float) * m.params.size);
        memcpy(analytic, m.params.grad, sizeof(float) * m.params.size);
        ModelCtx c = {&m, x, y, B};
        /* every tensor on its own, so a failure names it */
        for (int t = 0; t < m.params.n_tensors; t++) {
            const ParamTensor *pt = &m.params.tensors[t];
            GradCheckResult res = gradcheck(model_loss, &c, m.params.data + pt->offset,
                                            analytic + pt->offset, pt->count, 1e-3f, 60);
            char what[96];
            snprintf(what, sizeof what, "digit model (%s) %s", pos_type_name(configs[k].pos), pt->name);
            expect_gradient(res, TOL, what);
        }
        free(analytic);
        digit_model_free(&m);
    }
}

/* Without positional encodings the WHOLE model is permutation equivariant:
 * its logits for a permuted input are its logits, permuted. */
static void test_digit_model_equivariant_without_positions(void **state) {
    (void)state;
    enum { N = 8 };
    DigitModel m;
    assert_int_equal(create_model(&m, N, 16, 32, 2, 10, POS_NONE, 0, 1, 3), 0);
    int x[N] = {3, 1, 4, 1, 5, 9, 2, 6}, sigma[N] = {7, 2, 5, 0, 3, 6, 1, 4}, x_perm[N];
    for (int i = 0; i < N; i++) x_perm[i] = x[sigma[i]];
    float logits[N * 10];
    digit_model_forward(&m, x, NULL, 1);
    memcpy(logits, m.logits, sizeof logits);
    digit_model_forward(&m, x_perm, NULL, 1);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < 10; c++) assert_float_equal(m.logits[i * 10 + c], logits[sigma[i] * 10 + c], 1e-4f);
    digit_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_attention_gradients),
        cmocka_unit_test(test_self_attention_equals_cross_attention),
        cmocka_unit_test(test_permutation_equivariance),
        cmocka_unit_test(test_causal_mask),
        cmocka_unit_test(test_padding_mask),
        cmocka_unit_test(test_sinusoidal_encoding),
        cmocka_unit_test(test_digit_model_gradients),
        cmocka_unit_test(test_digit_model_equivariant_without_positions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
