/* test_attention.c - chapter 03's attention layer (attention.h) and its
 * scaling experiment (scaling_experiment.h).
 *
 *  - every score function (dot, scaled dot, multiplicative, additive): the
 *    backward of the attention layer against central finite differences,
 *    w.r.t. Q, K, V and the score's parameters, on odd shapes, with and
 *    without a mask;
 *  - the cross-attention layer (K = X W_K, V = X W_V, optional Q = Q_in W_Q):
 *    w.r.t. Q_in, X, W_Q, W_K, W_V and the score's parameters;
 *  - masking: blocked weights are exactly 0, blocked keys and values get
 *    exactly 0 gradient and cannot change the output; a fully blocked row
 *    gives zeros, not NaN;
 *  - the matrix form equals the loop over single queries;
 *  - mask_key_limit: the causal and key_len rules; mask_allows agrees;
 *    no_self blocks exactly the diagonal, the same weights as an allowed
 *    matrix that does (chapter 05's locality self-attention);
 *  - dot_attention_forward/backward on strided blocks give the same bits as
 *    attention_forward/backward on the same blocks copied out dense, and
 *    touch nothing outside their blocks;
 *  - dropout on the weights (a keep mask): dQ, dK, dV against finite
 *    differences with a fixed mask; Y = (A o keep) V with A undropped; over
 *    many draws about p of the weights are zeroed and the kept ones are
 *    A / (1-p); a mask of ones gives the bits of none;
 *  - backward accumulates (+=);
 *  - the scaling experiment shows the saturation that 1/sqrt(D) prevents.
 *
 * Loss for gradient checks: L = sum_i w_i Y_i with fixed random w (in
 * double), so dL/dY = w. Tolerance as in test_layers.c (max relative error
 * < 1e-2, which a wrong formula exceeds by far), but with a step eps = 5e-3:
 * with masks many gradients are tiny (~1e-3), and at eps = 1e-3 the float
 * rounding noise of the additive score's tanh layer (~1e-4 absolute) alone
 * reached 1e-2 relative. At 5e-3 the worst honest error is about 3e-3. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "02_bahdanau_attention/bahdanau.h"
#include "03_dot_product_attention/attention.h"
#include "03_dot_product_attention/scaling_experiment.h"
#include "util/error.h"
#include "nn/gradcheck.h"
#include "nn/transformer_layers.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#define EPS 5e-3f
#define TOL 1e-2
#define MAX_CHECKS 150

static void fill(float *x, size_t n, float scale, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(r) - 1.0f);
}

static float *alloc_floats(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static double weighted_sum(const float *out, const float *w, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)w[i] * (double)out[i];
    return s;
}

static void expect_grad_ok(GradCheckResult res, const char *what, const char *score) {
    if (!(res.max_rel_err < TOL) || res.n_checked == 0)
        fail_msg("%s (%s): max_rel_err %.3g at index %zu (numeric %.6g, analytic %.6g), %zu checked",
                 what, score, res.max_rel_err, res.worst_index, res.worst_numeric,
                 res.worst_analytic, res.n_checked);
}

/* Odd shapes: N_Q, N_X, D_Q (= D_K for dot scores), D_V, D_A */
static const int shapes[][5] = {{1, 1, 1, 1, 1}, {3, 7, 5, 2, 4}, {7, 5, 3, 6, 9}, {4, 9, 8, 3, 5}};
#define N_SHAPES 4

/* ------------------------------------------------------------------------ */
/* The attention layer itself: gradients w.r.t. Q, K, V, score parameters     */
/* ------------------------------------------------------------------------ */

typedef struct {
    ScoreSpec s;
    int N_Q, N_X, D_V;
    const AttentionMask *mask;
    float *Q, *K, *V, *theta;      /* inputs and score parameters */
    ScoreWeights w;
    float *Y, *A, *cache, *wY;
} AttnCtx;

static double attn_loss(void *p) {
    AttnCtx *c = p;
    attention_forward(c->Y, c->A, c->cache, c->Q, c->K, c->V, &c->s, &c->w, c->mask, c->N_Q, c->N_X,
                      c->D_V);
    return weighted_sum(c->Y, c->wY, (size_t)c->N_Q * c->D_V);
}

static void check_attention_gradients(ScoreType type, const int *shape, const AttentionMask *mask,
                                      Rng *r) {
    AttnCtx c;
    memset(&c, 0, sizeof c);
    c.N_Q = shape[0];
    c.N_X = shape[1];
    c.D_V = shape[3];
    int D_K = (type == SCORE_DOT || type == SCORE_SCALED_DOT) ? shape[2] : shape[2] + 2;
    c.s = (ScoreSpec){type, shape[2], D_K, shape[4]};
    c.mask = mask;
    size_t nQ = (size_t)c.N_Q * c.s.D_Q, nK = (size_t)c.N_X * D_K, nV = (size_t)c.N_X * c.D_V;
    size_t nY = (size_t)c.N_Q * c.D_V, nP = score_param_count(&c.s);
    c.Q = alloc_floats(nQ); c.K = alloc_floats(nK); c.V = alloc_floats(nV);
    c.theta = alloc_floats(nP);
    c.Y = alloc_floats(nY); c.wY = alloc_floats(nY);
    c.A = alloc_floats((size_t)c.N_Q * c.N_X);
    c.cache = alloc_floats(attention_cache_floats(&c.s, c.N_Q, c.N_X));
    float *scratch = alloc_floats(attention_scratch_floats(&c.s, c.N_Q, c.N_X));
    float *dQ = alloc_floats(nQ), *dK = alloc_floats(nK), *dV = alloc_floats(nV);
    float *dtheta = alloc_floats(nP);
    fill(c.Q, nQ, 1.0f, r); fill(c.K, nK, 1.0f, r); fill(c.V, nV, 1.0f, r);
    fill(c.theta, nP, 0.7f, r); fill(c.wY, nY, 1.0f, r);
    c.w = score_weights_view(&c.s, c.theta);
    ScoreWeights dw = score_weights_view(&c.s, dtheta);

    attn_loss(&c);
    attention_backward(dQ, dK, dV, &dw, scratch, c.wY, c.A, c.cache, c.Q, c.K, c.V, &c.s, &c.w,
                       c.N_Q, c.N_X, c.D_V);
    const char *name = score_name(type);
    expect_grad_ok(gradcheck(attn_loss, &c, c.Q, dQ, nQ, EPS, MAX_CHECKS), "attention dQ", name);
    expect_grad_ok(gradcheck(attn_loss, &c, c.K, dK, nK, EPS, MAX_CHECKS), "attention dK", name);
    expect_grad_ok(gradcheck(attn_loss, &c, c.V, dV, nV, EPS, MAX_CHECKS), "attention dV", name);
    if (nP > 0)
        expect_grad_ok(gradcheck(attn_loss, &c, c.theta, dtheta, nP, EPS, MAX_CHECKS),
                       "attention d(score params)", name);
    free(c.Q); free(c.K); free(c.V); free(c.theta); free(c.Y); free(c.wY); free(c.A);
    free(c.cache); free(scratch); free(dQ); free(dK); free(dV); free(dtheta);
}

static void test_attention_gradients_every_score(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 3, 0);
    for (int t = 0; t < SCORE_N_TYPES; t++)
        for (int k = 0; k < N_SHAPES; k++) check_attention_gradients((ScoreType)t, shapes[k], NULL, &r);
}

static void test_attention_gradients_with_mask(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 4, 0);
    /* causal + padding (last key is padding) + one extra blocked pair */
    int allowed[7 * 5];
    for (int i = 0; i < 7 * 5; i++) allowed[i] = 1;
    allowed[3 * 5 + 1] = 0;
    AttentionMask mask = {allowed, 1, 4, 0};
    for (int t = 0; t < SCORE_N_TYPES; t++) check_attention_gradients((ScoreType)t, shapes[2], &mask, &r);
}

/* ------------------------------------------------------------------------ */
/* The cross-attention layer: gradients w.r.t. Q_in, X and every parameter    */
/* ------------------------------------------------------------------------ */

typedef struct {
    CrossAttentionSpec spec;
    int N_Q, N_X;
    const AttentionMask *mask;
    float *Q_in, *X, *theta;
    CrossAttentionWeights w;
    float *Y, *A, *cache, *wY;
} CrossCtx;

static double cross_loss(void *p) {
    CrossCtx *c = p;
    cross_attention_forward(c->Y, c->A, c->cache, c->Q_in, c->X, &c->spec, &c->w, c->mask, c->N_Q,
                            c->N_X);
    return weighted_sum(c->Y, c->wY, (size_t)c->N_Q * c->spec.D_V);
}

static void check_cross_attention(ScoreType type, int project_q, const int *shape,
                                  const AttentionMask *mask, Rng *r) {
    CrossCtx c;
    memset(&c, 0, sizeof c);
    c.N_Q = shape[0];
    c.N_X = shape[1];
    int D_Q = shape[2];
    int D_K = (type == SCORE_DOT || type == SCORE_SCALED_DOT) ? D_Q : D_Q + 1;
    c.spec = (CrossAttentionSpec){{type, D_Q, D_K, shape[4]}, project_q ? D_Q + 3 : D_Q, 6, shape[3],
                                  project_q};
    c.mask = mask;
    size_t nQ = (size_t)c.N_Q * c.spec.D_in_Q, nX = (size_t)c.N_X * c.spec.D_X;
    size_t nY = (size_t)c.N_Q * c.spec.D_V, nP = cross_attention_param_count(&c.spec);
    c.Q_in = alloc_floats(nQ); c.X = alloc_floats(nX); c.theta = alloc_floats(nP);
    c.Y = alloc_floats(nY); c.wY = alloc_floats(nY);
    c.A = alloc_floats((size_t)c.N_Q * c.N_X);
    c.cache = alloc_floats(cross_attention_cache_floats(&c.spec, c.N_Q, c.N_X));
    float *scratch = alloc_floats(cross_attention_scratch_floats(&c.spec, c.N_Q, c.N_X));
    float *dQ = alloc_floats(nQ), *dX = alloc_floats(nX), *dtheta = alloc_floats(nP);
    fill(c.Q_in, nQ, 1.0f, r); fill(c.X, nX, 1.0f, r); fill(c.wY, nY, 1.0f, r);
    cross_attention_init(&c.spec, c.theta, r);
    c.w = cross_attention_weights_view(&c.spec, c.theta);
    CrossAttentionWeights dw = cross_attention_weights_view(&c.spec, dtheta);

    cross_loss(&c);
    cross_attention_backward(dQ, dX, &dw, scratch, c.wY, c.A, c.cache, c.Q_in, c.X, &c.spec, &c.w,
                             c.N_Q, c.N_X);
    const char *name = score_name(type);
    expect_grad_ok(gradcheck(cross_loss, &c, c.Q_in, dQ, nQ, EPS, MAX_CHECKS), "cross dQ_in", name);
    expect_grad_ok(gradcheck(cross_loss, &c, c.X, dX, nX, EPS, MAX_CHECKS), "cross dX", name);
    /* the parameters one tensor at a time, so a failure names the tensor */
    struct { const char *what; float *x, *g; size_t n; } tensors[] = {
        {"cross dW_Q", c.w.W_Q, dw.W_Q, project_q ? (size_t)c.spec.D_in_Q * D_Q : 0},
        {"cross dW_K", c.w.W_K, dw.W_K, (size_t)c.spec.D_X * D_K},
        {"cross dW_V", c.w.W_V, dw.W_V, (size_t)c.spec.D_X * c.spec.D_V},
        {"cross d(score params)", c.w.score.W ? c.w.score.W : c.w.score.W_1,
         dw.score.W ? dw.score.W : dw.score.W_1, score_param_count(&c.spec.score)},
    };
    for (int k = 0; k < 4; k++)
        if (tensors[k].n > 0)
            expect_grad_ok(gradcheck(cross_loss, &c, tensors[k].x, tensors[k].g, tensors[k].n, EPS,
                                     MAX_CHECKS),
                           tensors[k].what, name);
    free(c.Q_in); free(c.X); free(c.theta); free(c.Y); free(c.wY); free(c.A); free(c.cache);
    free(scratch); free(dQ); free(dX); free(dtheta);
}

static void test_cross_attention_gradients(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 5, 0);
    AttentionMask padding = {NULL, 0, 3, 0};
    for (int t = 0; t < SCORE_N_TYPES; t++)
        for (int project_q = 0; project_q <= 1; project_q++) {
            for (int k = 0; k < N_SHAPES; k++)
                check_cross_attention((ScoreType)t, project_q, shapes[k], NULL, &r);
            check_cross_attention((ScoreType)t, project_q, shapes[1], &padding, &r);
        }
}

/* ------------------------------------------------------------------------ */
/* Masking                                                                   */
/* ------------------------------------------------------------------------ */

static void test_mask_exact_zeros_and_no_gradient(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 6, 0);
    enum { N_Q = 6, N_X = 7, D = 5, D_V = 3, D_A = 4, KEY_LEN = 5 };
    AttentionMask mask = {NULL, 1, KEY_LEN, 0};     /* causal, keys 5 and 6 are padding */
    for (int t = 0; t < SCORE_N_TYPES; t++) {
        ScoreSpec s = {(ScoreType)t, D, D, D_A};
        float Q[N_Q * D], K[N_X * D], V[N_X * D_V], Y[N_Q * D_V], Y2[N_Q * D_V], A[N_Q * N_X];
        float theta[256], dtheta[256] = {0}, dY[N_Q * D_V];
        float dQ[N_Q * D] = {0}, dK[N_X * D] = {0}, dV[N_X * D_V] = {0};
        assert_true(score_param_count(&s) <= 256);
        float *cache = alloc_floats(attention_cache_floats(&s, N_Q, N_X));
        float *scratch = alloc_floats(attention_scratch_floats(&s, N_Q, N_X));
        fill(Q, N_Q * D, 1, &r); fill(K, N_X * D, 1, &r); fill(V, N_X * D_V, 1, &r);
        fill(theta, 256, 0.5f, &r); fill(dY, N_Q * D_V, 1, &r);
        ScoreWeights w = score_weights_view(&s, theta), dw = score_weights_view(&s, dtheta);
        attention_forward(Y, A, cache, Q, K, V, &s, &w, &mask, N_Q, N_X, D_V);
        for (int i = 0; i < N_Q; i++) {
            double row = 0;
            for (int j = 0; j < N_X; j++) {
                float a = A[i * N_X + j];
                if (j > i || j >= KEY_LEN) assert_true(a == 0.0f);   /* exactly 0, not tiny */
                else assert_true(a > 0.0f);
                row += a;
            }
            assert_true(fabs(row - 1.0) < 1e-5);
        }
        attention_backward(dQ, dK, dV, &dw, scratch, dY, A, cache, Q, K, V, &s, &w, N_Q, N_X, D_V);
        /* padded keys: exactly no gradient */
        for (int j = KEY_LEN; j < N_X; j++) {
            for (int d = 0; d < D; d++) assert_true(dK[j * D + d] == 0.0f);
            for (int d = 0; d < D_V; d++) assert_true(dV[j * D_V + d] == 0.0f);
        }
        /* the last real key is seen only by queries >= KEY_LEN-1: it still gets gradient */
        assert_true(dV[(KEY_LEN - 1) * D_V] != 0.0f);
        /* changing a padded key or value (even to a huge value) changes nothing */
        for (int d = 0; d < D; d++) K[(N_X - 1) * D + d] = 1e4f;
        for (int d = 0; d < D_V; d++) V[(N_X - 1) * D_V + d] = -1e4f;
        attention_forward(Y2, A, cache, Q, K, V, &s, &w, &mask, N_Q, N_X, D_V);
        assert_memory_equal(Y, Y2, sizeof Y);
        free(cache);
        free(scratch);
    }
}

static void test_fully_masked_row_gives_zeros(void **state) {
    (void)state;
    enum { N_Q = 2, N_X = 3, D = 4 };
    ScoreSpec s = {SCORE_SCALED_DOT, D, D, 0};
    ScoreWeights none = {NULL, NULL, NULL, NULL};
    int allowed[N_Q * N_X] = {0, 0, 0, 1, 0, 1};   /* query 0 may look at nothing */
    AttentionMask mask = {allowed, 0, 0, 0};
    float Q[N_Q * D], K[N_X * D], V[N_X * D], Y[N_Q * D], A[N_Q * N_X], E[N_Q * N_X];
    float scratch[2 * N_Q * N_X], dY[N_Q * D], dQ[N_Q * D] = {0}, dK[N_X * D] = {0}, dV[N_X * D] = {0};
    Rng r;
    rng_seed(&r, 7, 0);
    fill(Q, N_Q * D, 1, &r); fill(K, N_X * D, 1, &r); fill(V, N_X * D, 1, &r); fill(dY, N_Q * D, 1, &r);
    attention_forward(Y, A, E, Q, K, V, &s, &none, &mask, N_Q, N_X, D);
    for (int j = 0; j < N_X; j++) assert_true(A[j] == 0.0f);
    for (int d = 0; d < D; d++) assert_true(Y[d] == 0.0f);
    attention_backward(dQ, dK, dV, NULL, scratch, dY, A, E, Q, K, V, &s, &none, N_Q, N_X, D);
    for (int d = 0; d < D; d++) assert_true(dQ[d] == 0.0f);
    for (int n = 0; n < N_X * D; n++) assert_false(isnan(dK[n]) || isnan(dV[n]));
}

/* ------------------------------------------------------------------------ */
/* Matrix form == loop over single queries                                   */
/* ------------------------------------------------------------------------ */

static void test_matrix_form_equals_single_queries(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 8, 0);
    enum { N_Q = 7, N_X = 9, D_Q = 6, D_V = 5, D_A = 7 };
    int allowed[N_Q * N_X];
    for (int i = 0; i < N_Q * N_X; i++) allowed[i] = rng_below(&r, 5) != 0;
    /* none; causal; allowed and padding; causal, padding and the diagonal (no_self) */
    AttentionMask masks[4] = {{NULL, 0, 0, 0}, {NULL, 1, 0, 0}, {allowed, 0, 8, 0}, {NULL, 1, 6, 1}};
    for (int t = 0; t < SCORE_N_TYPES; t++)
        for (int m = 0; m < 4; m++) {
            int D_K = (t == SCORE_DOT || t == SCORE_SCALED_DOT) ? D_Q : 4;
            ScoreSpec s = {(ScoreType)t, D_Q, D_K, D_A};
            float Q[N_Q * D_Q], K[N_X * D_Q], V[N_X * D_V], Y[N_Q * D_V], A[N_Q * N_X];
            float theta[256], y[D_V], a[N_X], e[N_X];
            float *cache = alloc_floats(attention_cache_floats(&s, N_Q, N_X));
            fill(Q, N_Q * D_Q, 1.5f, &r); fill(K, N_X * D_Q, 1.5f, &r); fill(V, N_X * D_V, 1, &r);
            fill(theta, 256, 0.5f, &r);
            ScoreWeights w = score_weights_view(&s, theta);
            attention_forward(Y, A, cache, Q, K, V, &s, &w, &masks[m], N_Q, N_X, D_V);
            for (int i = 0; i < N_Q; i++) {
                attention_single_query(y, a, e, Q + i * D_Q, K, V, &s, &w, &masks[m], i, N_X, D_V);
                for (int j = 0; j < N_X; j++) {
                    float E_ij = cache[i * N_X + j];
                    if (isinf(e[j])) assert_true(isinf(E_ij) && E_ij < 0 && A[i * N_X + j] == 0.0f);
                    else assert_float_equal(E_ij, e[j], 1e-4f * (1.0f + fabsf(e[j])));
                    assert_float_equal(A[i * N_X + j], a[j], 1e-5f);
                }
                for (int d = 0; d < D_V; d++) assert_float_equal(Y[i * D_V + d], y[d], 1e-5f);
            }
            free(cache);
        }
}

/* ------------------------------------------------------------------------ */
/* Backward accumulates                                                      */
/* ------------------------------------------------------------------------ */

static void test_backward_accumulates(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 9, 0);
    enum { N_Q = 3, N_X = 4, D = 5 };
    CrossAttentionSpec spec = {{SCORE_ADDITIVE, D, D, 3}, D, D, D, 1};
    size_t nP = cross_attention_param_count(&spec);
    float *theta = alloc_floats(nP), *g1 = alloc_floats(nP), *g2 = alloc_floats(nP);
    float Qin[N_Q * D], X[N_X * D], Y[N_Q * D], A[N_Q * N_X], dY[N_Q * D];
    float dX1[N_X * D] = {0}, dX2[N_X * D] = {0};
    float *cache = alloc_floats(cross_attention_cache_floats(&spec, N_Q, N_X));
    float *scratch = alloc_floats(cross_attention_scratch_floats(&spec, N_Q, N_X));
    cross_attention_init(&spec, theta, &r);
    fill(Qin, N_Q * D, 1, &r); fill(X, N_X * D, 1, &r); fill(dY, N_Q * D, 1, &r);
    CrossAttentionWeights w = cross_attention_weights_view(&spec, theta);
    CrossAttentionWeights d1 = cross_attention_weights_view(&spec, g1);
    CrossAttentionWeights d2 = cross_attention_weights_view(&spec, g2);
    cross_attention_forward(Y, A, cache, Qin, X, &spec, &w, NULL, N_Q, N_X);
    cross_attention_backward(NULL, dX1, &d1, scratch, dY, A, cache, Qin, X, &spec, &w, N_Q, N_X);
    cross_attention_backward(NULL, dX2, &d2, scratch, dY, A, cache, Qin, X, &spec, &w, N_Q, N_X);
    cross_attention_backward(NULL, dX2, &d2, scratch, dY, A, cache, Qin, X, &spec, &w, N_Q, N_X);
    for (size_t n = 0; n < nP; n++) assert_float_equal(g2[n], 2.0f * g1[n], 1e-5f);
    for (int n = 0; n < N_X * D; n++) assert_float_equal(dX2[n], 2.0f * dX1[n], 1e-5f);
    free(theta); free(g1); free(g2); free(cache); free(scratch);
}

/* ------------------------------------------------------------------------ */
/* Against the previous chapter: the additive score IS chapter 02's attention */
/* ------------------------------------------------------------------------ */

/* One decoder step of chapter 02 (query s, keys = values = encoder states h,
 * padding past len) equals this layer with the additive score, N_Q = 1,
 * K = V = h and mask.key_len = len. */
static void test_additive_equals_chapter_02(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 10, 0);
    enum { T = 7, HC = 6, H = 5, DA = 4, LEN = 5 };
    float h[T * HC], s_prev[H], W_1[HC * DA], W_2[H * DA], v[DA];
    fill(h, T * HC, 1, &r); fill(s_prev, H, 1, &r); fill(W_1, HC * DA, 0.7f, &r);
    fill(W_2, H * DA, 0.7f, &r); fill(v, DA, 1, &r);
    /* chapter 02: keys = h W_1, query = s W_2, weights, context */
    float keys[T * DA], query[DA], feat[T * DA], weights_02[T], context_02[HC];
    int lens[1] = {LEN};
    for (int t = 0; t < T; t++)
        for (int a = 0; a < DA; a++) {
            double acc = 0;
            for (int k = 0; k < HC; k++) acc += (double)h[t * HC + k] * W_1[k * DA + a];
            keys[t * DA + a] = (float)acc;
        }
    for (int a = 0; a < DA; a++) {
        double acc = 0;
        for (int k = 0; k < H; k++) acc += (double)s_prev[k] * W_2[k * DA + a];
        query[a] = (float)acc;
    }
    additive_attention_forward(weights_02, feat, keys, query, v, lens, 1, T, DA);
    attention_context_forward(context_02, weights_02, h, 1, T, HC);
    /* chapter 03 */
    ScoreSpec s = {SCORE_ADDITIVE, H, HC, DA};
    ScoreWeights w = {NULL, W_1, W_2, v};
    AttentionMask padding = {NULL, 0, LEN, 0};
    float Y[HC], A[T];
    float *cache = alloc_floats(attention_cache_floats(&s, 1, T));
    attention_forward(Y, A, cache, s_prev, h, h, &s, &w, &padding, 1, T, HC);
    for (int t = 0; t < T; t++) assert_float_equal(A[t], weights_02[t], 1e-5f);
    for (int d = 0; d < HC; d++) assert_float_equal(Y[d], context_02[d], 1e-5f);
    free(cache);
}

static void test_mask_key_limit(void **state) {
    (void)state;
    assert_int_equal(mask_key_limit(NULL, 3, 7), 7);
    AttentionMask none = {NULL, 0, 0, 0}, causal = {NULL, 1, 0, 0}, pad = {NULL, 0, 4, 0}, both = {NULL, 1, 4, 0};
    AttentionMask long_pad = {NULL, 0, 10, 0};
    assert_int_equal(mask_key_limit(&none, 3, 7), 7);
    assert_int_equal(mask_key_limit(&causal, 0, 7), 1);     /* query 0 sees key 0 */
    assert_int_equal(mask_key_limit(&causal, 2, 7), 3);
    assert_int_equal(mask_key_limit(&causal, 9, 7), 7);     /* more queries than keys */
    assert_int_equal(mask_key_limit(&pad, 1, 7), 4);
    assert_int_equal(mask_key_limit(&long_pad, 1, 7), 7);   /* key_len >= N_X: no padding */
    assert_int_equal(mask_key_limit(&both, 1, 7), 2);
    assert_int_equal(mask_key_limit(&both, 6, 7), 4);
    /* mask_allows = below the limit and allowed */
    int allowed[3 * 5];
    for (int n = 0; n < 3 * 5; n++) allowed[n] = n % 3 != 0;
    AttentionMask with_allowed = {allowed, 1, 4, 0};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 5; j++)
            assert_int_equal(mask_allows(&with_allowed, i, j, 5),
                             j < mask_key_limit(&with_allowed, i, 5) && allowed[i * 5 + j] != 0);
    /* no_self blocks the diagonal only (it leaves the limit alone), on top of the other rules */
    AttentionMask diagonal = {NULL, 0, 0, 1}, all_rules = {allowed, 1, 4, 1};
    assert_int_equal(mask_key_limit(&diagonal, 2, 5), 5);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 5; j++) {
            assert_int_equal(mask_allows(&diagonal, i, j, 5), i != j);
            assert_int_equal(mask_allows(&all_rules, i, j, 5), mask_allows(&with_allowed, i, j, 5) && i != j);
        }
}

/* The diagonal rule on the matrix form: the same weights as the allowed
 * matrix that zeroes the diagonal, A's diagonal exactly 0, each row still
 * summing to 1; and a single key that is the query's own leaves nothing. */
static void test_no_self_mask(void **state) {
    (void)state;
    enum { N = 6, D = 4 };
    const ScoreSpec s = {SCORE_SCALED_DOT, D, D, 0};
    const ScoreWeights none = {NULL, NULL, NULL, NULL};
    int off_diagonal[N * N];
    for (int n = 0; n < N * N; n++) off_diagonal[n] = n / N != n % N;
    const AttentionMask no_self = {NULL, 0, 0, 1}, as_allowed = {off_diagonal, 0, 0, 0};
    float Q[N * D], K[N * D], V[N * D], Y[N * D], Y2[N * D], A[N * N], A2[N * N], E[N * N], E2[N * N];
    Rng r;
    rng_seed(&r, 43, 0);
    fill(Q, N * D, 1, &r); fill(K, N * D, 1, &r); fill(V, N * D, 1, &r);
    attention_forward(Y, A, E, Q, K, V, &s, &none, &no_self, N, N, D);
    attention_forward(Y2, A2, E2, Q, K, V, &s, &none, &as_allowed, N, N, D);
    assert_memory_equal(A, A2, sizeof A);
    assert_memory_equal(Y, Y2, sizeof Y);
    for (int i = 0; i < N; i++) {
        double sum = 0.0;
        for (int j = 0; j < N; j++) sum += A[i * N + j];
        assert_true(A[i * N + i] == 0.0f && isinf(E[i * N + i]) && E[i * N + i] < 0);
        assert_float_equal(sum, 1.0, 1e-6);
    }
    /* N = 1: the only key is the query's own, so the row is empty: A = 0, Y = 0 */
    attention_forward(Y, A, E, Q, K, V, &s, &none, &no_self, 1, 1, D);
    assert_true(A[0] == 0.0f);
    for (int d = 0; d < D; d++) assert_true(Y[d] == 0.0f);
}

/* dot_attention_* on blocks inside wider matrices (as chapter 05 uses them)
 * against attention_* on the same blocks copied out dense: the same bits, and
 * the columns outside the blocks stay untouched. */
static void test_dot_attention_on_strided_blocks(void **state) {
    (void)state;
    enum { N_Q = 5, N_X = 7, D_K = 3, D_V = 4, LD = 11, OFF = 2 };   /* blocks at columns 2.. */
    Rng r;
    rng_seed(&r, 41, 0);
    for (int type = SCORE_DOT; type <= SCORE_SCALED_DOT; type++) {
        const ScoreSpec s = {(ScoreType)type, D_K, D_K, 0};
        const ScoreWeights no_w = {NULL, NULL, NULL, NULL};
        const float alpha = type == SCORE_SCALED_DOT ? 1.0f / sqrtf((float)D_K) : 1.0f;
        const AttentionMask mask = {NULL, 1, 6, 0};
        float Qw[N_Q * LD], Kw[N_X * LD], Vw[N_X * LD], dYw[N_Q * LD];
        fill(Qw, N_Q * LD, 1.0f, &r); fill(Kw, N_X * LD, 1.0f, &r);
        fill(Vw, N_X * LD, 1.0f, &r); fill(dYw, N_Q * LD, 1.0f, &r);
        float Q[N_Q * D_K], K[N_X * D_K], V[N_X * D_V], dY[N_Q * D_V];
        for (int i = 0; i < N_Q; i++) {
            memcpy(Q + i * D_K, Qw + i * LD + OFF, sizeof(float) * D_K);
            memcpy(dY + i * D_V, dYw + i * LD + OFF, sizeof(float) * D_V);
        }
        for (int j = 0; j < N_X; j++) {
            memcpy(K + j * D_K, Kw + j * LD + OFF, sizeof(float) * D_K);
            memcpy(V + j * D_V, Vw + j * LD + OFF, sizeof(float) * D_V);
        }
        /* dense, through the general layer */
        float Y[N_Q * D_V], A[N_Q * N_X], cache[N_Q * N_X], scratch[2 * N_Q * N_X];
        float dQ[N_Q * D_K] = {0}, dK[N_X * D_K] = {0}, dV[N_X * D_V] = {0};
        attention_forward(Y, A, cache, Q, K, V, &s, &no_w, &mask, N_Q, N_X, D_V);
        attention_backward(dQ, dK, dV, NULL, scratch, dY, A, cache, Q, K, V, &s, &no_w, N_Q, N_X, D_V);
        /* strided, E in A's place */
        float Yw[N_Q * LD] = {0}, A2[N_Q * N_X], scratch2[2 * N_Q * N_X];
        float dQw[N_Q * LD] = {0}, dKw[N_X * LD] = {0}, dVw[N_X * LD] = {0};
        dot_attention_forward(Yw + OFF, LD, A2, A2, &(DotHead){Qw + OFF, LD, Kw + OFF, LD, Vw + OFF, LD, N_Q, N_X,
                              D_K, D_V, alpha}, &mask, NULL);
        dot_attention_backward(&(DotHeadGrads){dQw + OFF, LD, dKw + OFF, LD, dVw + OFF, LD}, scratch2, dYw + OFF,
                               LD, A2, NULL, &(DotHead){Qw + OFF, LD, Kw + OFF, LD, Vw + OFF, LD, N_Q, N_X, D_K,
                               D_V, alpha});
        assert_memory_equal(A2, A, sizeof A);
        for (int i = 0; i < N_Q; i++)
            for (int c = 0; c < LD; c++) {
                const int in_v = c >= OFF && c < OFF + D_V, in_k = c >= OFF && c < OFF + D_K;
                float want_y = in_v ? Y[i * D_V + c - OFF] : 0.0f;
                float want_dq = in_k ? dQ[i * D_K + c - OFF] : 0.0f;
                assert_memory_equal(&Yw[i * LD + c], &want_y, sizeof(float));
                assert_memory_equal(&dQw[i * LD + c], &want_dq, sizeof(float));
            }
        for (int j = 0; j < N_X; j++)
            for (int c = 0; c < LD; c++) {
                const int in_v = c >= OFF && c < OFF + D_V, in_k = c >= OFF && c < OFF + D_K;
                float want_dk = in_k ? dK[j * D_K + c - OFF] : 0.0f;
                float want_dv = in_v ? dV[j * D_V + c - OFF] : 0.0f;
                assert_memory_equal(&dKw[j * LD + c], &want_dk, sizeof(float));
                assert_memory_equal(&dVw[j * LD + c], &want_dv, sizeof(float));
            }
    }
}

/* ------------------------------------------------------------------------ */
/* Dropout on the attention weights: Y = (A o keep) V                         */
/* ------------------------------------------------------------------------ */

typedef struct {
    int N_Q, N_X, D_K, D_V;
    float alpha;
    const AttentionMask *mask;
    const float *keep;             /* fixed multipliers, 0 or 1/(1-p) */
    float *Q, *K, *V, *Y, *A, *E, *wY;
} DotCtx;

static double dot_loss(void *p) {
    DotCtx *c = p;
    dot_attention_forward(c->Y, c->D_V, c->A, c->E, &(DotHead){c->Q, c->D_K, c->K, c->D_K, c->V, c->D_V, c->N_Q,
                          c->N_X, c->D_K, c->D_V, c->alpha}, c->mask, c->keep);
    return weighted_sum(c->Y, c->wY, (size_t)c->N_Q * c->D_V);
}

/* A fixed keep mask (p = 0.4) makes the layer a fixed function of Q, K, V:
 * dQ, dK, dV against finite differences on every odd shape, without and
 * with the causal + padding mask. Forward: Y = (A o keep) V (against a
 * double loop), E holds A o keep, and A is the undropped softmax, the bits
 * of a forward without keep. */
static void test_dot_attention_dropout_gradients(void **state) {
    (void)state;
    Rng r;
    rng_seed(&r, 43, 0);
    const AttentionMask causal_padded = {NULL, 1, 4, 0};
    int dropped = 0;
    for (int masked = 0; masked < 2; masked++)
        for (int k = 0; k < N_SHAPES; k++) {
            DotCtx c;
            memset(&c, 0, sizeof c);
            c.N_Q = shapes[k][0];
            c.N_X = shapes[k][1];
            c.D_K = shapes[k][2];
            c.D_V = shapes[k][3];
            c.alpha = 1.0f / sqrtf((float)c.D_K);
            c.mask = masked ? &causal_padded : NULL;
            const size_t NN = (size_t)c.N_Q * c.N_X, nQ = (size_t)c.N_Q * c.D_K, nK = (size_t)c.N_X * c.D_K;
            const size_t nV = (size_t)c.N_X * c.D_V, nY = (size_t)c.N_Q * c.D_V;
            float *keep = alloc_floats(NN), *A0 = alloc_floats(NN), *Y0 = alloc_floats(nY);
            float *scratch = alloc_floats(2 * NN);
            float *dQ = alloc_floats(nQ), *dK = alloc_floats(nK), *dV = alloc_floats(nV);
            c.Q = alloc_floats(nQ); c.K = alloc_floats(nK); c.V = alloc_floats(nV);
            c.Y = alloc_floats(nY); c.wY = alloc_floats(nY);
            c.A = alloc_floats(NN); c.E = alloc_floats(NN);
            fill(c.Q, nQ, 1.0f, &r); fill(c.K, nK, 1.0f, &r); fill(c.V, nV, 1.0f, &r); fill(c.wY, nY, 1.0f, &r);
            dropout_mask(keep, (int)NN, 0.4f, &r);
            c.keep = keep;
            for (size_t n = 0; n < NN; n++) dropped += keep[n] == 0.0f;

            /* forward: A undropped (the bits without keep), E = A o keep, Y = E V */
            dot_attention_forward(Y0, c.D_V, A0, A0, &(DotHead){c.Q, c.D_K, c.K, c.D_K, c.V, c.D_V, c.N_Q, c.N_X,
                                  c.D_K, c.D_V, c.alpha}, c.mask, NULL);
            dot_loss(&c);
            assert_memory_equal(c.A, A0, sizeof(float) * NN);
            for (size_t n = 0; n < NN; n++) assert_true(c.E[n] == c.A[n] * keep[n]);
            for (int i = 0; i < c.N_Q; i++)
                for (int d = 0; d < c.D_V; d++) {
                    double want = 0.0;
                    for (int j = 0; j < c.N_X; j++)
                        want += (double)c.A[i * c.N_X + j] * keep[i * c.N_X + j] * c.V[j * c.D_V + d];
                    assert_float_equal(c.Y[i * c.D_V + d], want, 1e-5);
                }

            dot_attention_backward(&(DotHeadGrads){dQ, c.D_K, dK, c.D_K, dV, c.D_V}, scratch, c.wY, c.D_V, c.A,
                                   keep, &(DotHead){c.Q, c.D_K, c.K, c.D_K, c.V, c.D_V, c.N_Q, c.N_X, c.D_K, c.D_V,
                                   c.alpha});
            const char *what = masked ? "dot attention, dropout, masked" : "dot attention, dropout";
            expect_grad_ok(gradcheck(dot_loss, &c, c.Q, dQ, nQ, EPS, MAX_CHECKS), "dQ", what);
            expect_grad_ok(gradcheck(dot_loss, &c, c.K, dK, nK, EPS, MAX_CHECKS), "dK", what);
            expect_grad_ok(gradcheck(dot_loss, &c, c.V, dV, nV, EPS, MAX_CHECKS), "dV", what);
            free(keep); free(A0); free(Y0); free(scratch); free(dQ); free(dK); free(dV);
            free(c.Q); free(c.K); free(c.V); free(c.Y); free(c.wY); free(c.A); free(c.E);
        }
    assert_true(dropped > 0);   /* the masks did drop weights */
}

/* Many draws of p = 0.3: about 30% of the weights are zeroed, and each kept
 * weight is A / (1-p). With V = I (N_X = D_V), Y = (A o keep) V is the
 * dropped weights themselves, so this looks at what the layer used. A mask
 * of ones (p = 0) gives the bits of no mask. */
static void test_dot_attention_dropout_statistics(void **state) {
    (void)state;
    enum { N = 16, D_K = 4, DRAWS = 50 };
    const float p = 0.3f;
    Rng r;
    rng_seed(&r, 44, 0);
    float Q[N * D_K], K[N * D_K], V[N * N] = {0}, keep[N * N], A[N * N], E[N * N], Y[N * N], Y0[N * N];
    fill(Q, N * D_K, 1.0f, &r);
    fill(K, N * D_K, 1.0f, &r);
    for (int j = 0; j < N; j++) V[j * N + j] = 1.0f;
    const float alpha = 0.5f;
    dot_attention_forward(Y0, N, A, A, &(DotHead){Q, D_K, K, D_K, V, N, N, N, D_K, N, alpha}, NULL, NULL);
    dropout_mask(keep, N * N, 0.0f, &r);   /* all ones */
    dot_attention_forward(Y, N, A, E, &(DotHead){Q, D_K, K, D_K, V, N, N, N, D_K, N, alpha}, NULL, keep);
    assert_memory_equal(Y, Y0, sizeof Y);

    int zeroed = 0;
    for (int draw = 0; draw < DRAWS; draw++) {
        dropout_mask(keep, N * N, p, &r);
        dot_attention_forward(Y, N, A, E, &(DotHead){Q, D_K, K, D_K, V, N, N, N, D_K, N, alpha}, NULL, keep);
        for (int n = 0; n < N * N; n++) {
            assert_true(A[n] > 0.0f);   /* no mask: every weight of the softmax is positive */
            if (Y[n] == 0.0f) {
                zeroed++;
            } else {
                double want = (double)A[n] / (1.0 - p);
                assert_true(Y[n] == A[n] * (1.0f / (1.0f - p)));
                assert_true(fabs(Y[n] - want) <= 1e-6 * want);
            }
        }
    }
    /* binomial(12800, 0.3): mean 3840, standard deviation 52; 5 of them */
    assert_in_range(zeroed, 3840 - 260, 3840 + 260);
}

static void test_score_names(void **state) {
    (void)state;
    for (int t = 0; t < SCORE_N_TYPES; t++) {
        ScoreType back;
        assert_int_equal(score_from_name(score_name((ScoreType)t), &back), 0);
        assert_int_equal(back, t);
    }
    ScoreType dummy;
    clear_error();
    assert_int_equal(score_from_name("cosine", &dummy), -1);
    assert_non_null(strstr(last_error(), "cosine"));
}

/* ------------------------------------------------------------------------ */
/* The scaling experiment                                                    */
/* ------------------------------------------------------------------------ */

static void test_scaling_experiment(void **state) {
    (void)state;
    const int dims[] = {4, 64, 1024};
    ScalingCurves c;
    assert_int_equal(scaling_experiment(&c, dims, 3, 64, 16, 1), 0);
    assert_int_equal(c.n_dims, 3);
    for (int d = 0; d < 3; d++) {
        /* unscaled scores spread like sqrt(D), scaled ones stay near 1 */
        assert_float_equal(c.score_std[0][d] / sqrtf((float)dims[d]), 1.0f, 0.2f);
        assert_float_equal(c.score_std[1][d], 1.0f, 0.2f);
        /* the scaled entropy does not depend on D */
        assert_float_equal(c.entropy[1][d], c.entropy[1][0], 0.25f);
    }
    /* without scaling, softmax saturates: near one-hot, far less gradient */
    assert_true(c.entropy[0][2] < 0.2f * c.entropy[1][2]);
    assert_true(c.max_weight[0][2] > 0.9f);
    assert_true(c.grad_norm[0][2] < 0.3f * c.grad_norm[1][2]);
    /* bad sizes are an error, not a crash */
    assert_int_equal(scaling_experiment(&c, dims, 0, 64, 16, 1), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_gradients_every_score),
        cmocka_unit_test(test_attention_gradients_with_mask),
        cmocka_unit_test(test_cross_attention_gradients),
        cmocka_unit_test(test_mask_exact_zeros_and_no_gradient),
        cmocka_unit_test(test_fully_masked_row_gives_zeros),
        cmocka_unit_test(test_matrix_form_equals_single_queries),
        cmocka_unit_test(test_backward_accumulates),
        cmocka_unit_test(test_additive_equals_chapter_02),
        cmocka_unit_test(test_mask_key_limit),
        cmocka_unit_test(test_no_self_mask),
        cmocka_unit_test(test_dot_attention_on_strided_blocks),
        cmocka_unit_test(test_dot_attention_dropout_gradients),
        cmocka_unit_test(test_dot_attention_dropout_statistics),
        cmocka_unit_test(test_score_names),
        cmocka_unit_test(test_scaling_experiment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
