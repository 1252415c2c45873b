/* test_linformer.c - chapter 06, part 5: Linformer's attention (linformer.h).
 *
 *  - its start: E and F are mean pooling over k segments, so with k = N they
 *    are the identity and the hook is chapter 05's full attention;
 *  - forward against the formulas written out here in double, with padding
 *    (a padded position never enters a projected key) and with E, F made
 *    for a longer N than the sequence's;
 *  - padding: a padded sequence's real rows are those of the same sequence
 *    run alone at its own length;
 *  - in chapter 06's block: 2 k N parameters of its own, and the block's
 *    gradients (E and F among them) by finite differences;
 *  - its refusals: causal, cross-attention, k outside 1..N, a longer sequence. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "05_multi_head_attention/multi_head.h"
#include "06_transformer/block.h"
#include "06_transformer/linformer.h"
#include "nn/gradcheck.h"
#include "util/rng.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "block_checks.h"

#define EPS 1e-2f      /* test_attention.c's 5e-3 leaves E's and F's gradients (about 1e-3, each entry one
                        * position's share of a mixture) within the float forward's rounding */
#define TOL 1e-2
#define MAX_CHECKS 120

/* The hook's forward on X [B, N, D] with weights params (W_QKV | W_O | b_O) and extra (E | F). */
static void run_forward(float *O, const Linformer *l, const MultiHeadSpec *s, const float *params, const float *extra,
                        const float *X, const int *lens, int B, int N) {
    const BlockSelfAttention a = linformer_hook(l);
    float *params_copy = zeroed_floats(multi_head_param_count(s));
    memcpy(params_copy, params, sizeof(float) * multi_head_param_count(s));
    const MultiHeadWeights w = multi_head_weights_view(s, params_copy);
    float *cache = zeroed_floats(a.cache_floats(a.options, s, B, N));
    a.forward(a.options, O, NULL, NULL, cache, X, s, &w, extra, 0, lens, B, N);
    free(cache);
    free(params_copy);
}

static void test_linformer_start_is_pooling(void **state) {
    (void)state;
    const Linformer l = {3, 10};   /* segments 0-2, 3-5, 6-9 */
    const MultiHeadSpec s = {4, 1, 4, 4, MULTI_HEAD_PLAIN, 0};
    const BlockSelfAttention a = linformer_hook(&l);
    assert_int_equal(a.extra_params(a.options, &s), 2 * 3 * 10);
    float *extra = zeroed_floats(60);
    a.init_extra(a.options, extra, &s);
    const float want_row1[10] = {0, 0, 0, 1.0f / 3, 1.0f / 3, 1.0f / 3, 0, 0, 0, 0};
    for (int j = 0; j < 10; j++) {
        assert_float_equal(extra[10 + j], want_row1[j], 0.0f);
        assert_float_equal(extra[20 + j], j >= 6 ? 0.25f : 0.0f, 0.0f);
    }
    assert_memory_equal(extra, extra + 30, sizeof(float) * 30);   /* F = E */
    free(extra);
}

/* k = N at the start: E = F = I, so Linformer is chapter 05's attention. */
static void test_linformer_identity_is_full_attention(void **state) {
    (void)state;
    enum { B = 2, N = 7, D = 6, H = 2, D_H = 3 };
    Rng r;
    rng_seed(&r, 5, 0);
    const MultiHeadSpec s = {D, H, D_H, D, MULTI_HEAD_PLAIN, 0};
    const Linformer l = {N, N};
    const BlockSelfAttention a = linformer_hook(&l);
    const size_t nP = multi_head_param_count(&s), nX = (size_t)B * N * D;
    float *params = zeroed_floats(nP), *X = zeroed_floats(nX), *dO = zeroed_floats(nX);
    fill_uniform(params, nP, 0.5f, &r);
    fill_uniform(X, nX, 1.0f, &r);
    fill_uniform(dO, nX, 1.0f, &r);
    const MultiHeadWeights w = multi_head_weights_view(&s, params);
    float *extra = zeroed_floats(2 * N * N), *dextra = zeroed_floats(2 * N * N);
    a.init_extra(a.options, extra, &s);
    float *O = zeroed_floats(nX), *O_ref = zeroed_floats(nX), *dX = zeroed_floats(nX), *dX_ref = zeroed_floats(nX);
    float *cache = zeroed_floats(a.cache_floats(a.options, &s, B, N));
    float *scratch = zeroed_floats(a.scratch_floats(a.options, &s, B, N));
    float *cache_ref = zeroed_floats(multi_head_cache_floats(&s, B, N));
    float *scratch_ref = zeroed_floats(multi_head_scratch_floats(&s, B, N));
    float *A_ref = zeroed_floats(multi_head_attention_floats(&s, B, N));
    a.forward(a.options, O, NULL, NULL, cache, X, &s, &w, extra, 0, NULL, B, N);
    a.backward(a.options, dX, NULL, dextra, scratch, dO, NULL, NULL, cache, X, &s, &w, extra, 0, NULL, B, N);
    multi_head_forward(O_ref, A_ref, NULL, cache_ref, X, &s, &w, 0, NULL, B, N);
    multi_head_backward(dX_ref, NULL, scratch_ref, dO, A_ref, NULL, cache_ref, X, &s, &w, 0, NULL, B, N);
    expect_close(O, O_ref, nX, 1e-5f, "linformer at k = N: O");
    expect_close(dX, dX_ref, nX, 1e-5f, "linformer at k = N: dX");
    free(params); free(X); free(dO); free(extra); free(dextra); free(O); free(O_ref); free(dX); free(dX_ref);
    free(cache); free(scratch); free(cache_ref); free(scratch_ref); free(A_ref);
}

/* The formulas of linformer.h in double, one sequence b of n real positions. */
static void reference(double *O, const Linformer *l, const MultiHeadSpec *s, const float *params, const float *E,
                      const float *F, const float *X, int N, int n) {
    const int D = s->D, H = s->H, D_H = s->D_H, HD = H * D_H, k = l->k;
    const MultiHeadWeights w = multi_head_weights_view(s, (float *)params);
    double *QKV = calloc((size_t)N * 3 * HD, sizeof(double)), *Kt = calloc((size_t)k * 2 * HD, sizeof(double));
    double *Y = calloc((size_t)N * HD, sizeof(double)), *e = calloc((size_t)k, sizeof(double));
    for (int i = 0; i < N; i++)
        for (int c = 0; c < 3 * HD; c++)
            for (int d = 0; d < D; d++) QKV[(size_t)i * 3 * HD + c] += (double)X[i * D + d] * w.W_QKV[d * 3 * HD + c];
    for (int r = 0; r < k; r++)
        for (int c = 0; c < HD; c++)
            for (int j = 0; j < n; j++) {
                Kt[(size_t)r * 2 * HD + c] += (double)E[r * l->N + j] * QKV[(size_t)j * 3 * HD + HD + c];
                Kt[(size_t)r * 2 * HD + HD + c] += (double)F[r * l->N + j] * QKV[(size_t)j * 3 * HD + 2 * HD + c];
            }
    for (int i = 0; i < N; i++)
        for (int h = 0; h < H; h++) {
            double top = -INFINITY, sum = 0.0;
            for (int r = 0; r < k; r++) {
                e[r] = 0.0;
                for (int c = 0; c < D_H; c++) e[r] += QKV[(size_t)i * 3 * HD + h * D_H + c] * Kt[(size_t)r * 2 * HD + h * D_H + c];
                e[r] /= sqrt((double)D_H);
                if (e[r] > top) top = e[r];
            }
            for (int r = 0; r < k; r++) sum += (e[r] = exp(e[r] - top));
            for (int c = 0; c < D_H; c++)
                for (int r = 0; r < k; r++) Y[(size_t)i * HD + h * D_H + c] += e[r] / sum * Kt[(size_t)r * 2 * HD + HD + h * D_H + c];
        }
    for (int i = 0; i < N; i++)
        for (int o = 0; o < D; o++) {
            double v = w.b_O[o];
            for (int c = 0; c < HD; c++) v += Y[(size_t)i * HD + c] * w.W_O[c * D + o];
            O[(size_t)i * D + o] = v;
        }
    free(QKV); free(Kt); free(Y); free(e);
}

static void test_linformer_equals_formulas(void **state) {
    (void)state;
    enum { B = 3, N = 9, D = 6, H = 2, D_H = 3 };
    const Linformer l = {4, 12};   /* made for 12 positions, run on 9 */
    Rng r;
    rng_seed(&r, 9, 0);
    const MultiHeadSpec s = {D, H, D_H, D, MULTI_HEAD_PLAIN, 0};
    const size_t nP = multi_head_param_count(&s), nX = (size_t)B * N * D, kN = (size_t)l.k * l.N;
    float *params = zeroed_floats(nP), *X = zeroed_floats(nX), *extra = zeroed_floats(2 * kN), *O = zeroed_floats(nX);
    fill_uniform(params, nP, 0.5f, &r);
    fill_uniform(X, nX, 1.0f, &r);
    fill_uniform(extra, 2 * kN, 0.5f, &r);
    const int lens[B] = {9, 4, 1};
    run_forward(O, &l, &s, params, extra, X, lens, B, N);
    double *want = calloc((size_t)N * D, sizeof(double));
    for (int b = 0; b < B; b++) {
        reference(want, &l, &s, params, extra, extra + kN, X + (size_t)b * N * D, N, lens[b]);
        for (int i = 0; i < N * D; i++) {
            if (fabs(O[(size_t)b * N * D + i] - want[i]) > 1e-5 * (1.0 + fabs(want[i])))
                fail_msg("linformer: sequence %d, O[%d] = %.7g, the formulas give %.7g", b, i, O[(size_t)b * N * D + i], want[i]);
        }
    }
    free(want); free(params); free(X); free(extra); free(O);
}

/* A padded sequence's real rows are the sequence run alone at its own length. */
static void test_linformer_padding_is_left_out(void **state) {
    (void)state;
    enum { N = 8, n = 5, D = 4, H = 2, D_H = 2 };
    const Linformer l = {3, N};
    Rng r;
    rng_seed(&r, 13, 0);
    const MultiHeadSpec s = {D, H, D_H, D, MULTI_HEAD_PLAIN, 0};
    const size_t nP = multi_head_param_count(&s), kN = (size_t)l.k * l.N;
    float *params = zeroed_floats(nP), *X = zeroed_floats(N * D), *extra = zeroed_floats(2 * kN);
    float *O = zeroed_floats(N * D), *O_alone = zeroed_floats(n * D);
    fill_uniform(params, nP, 0.5f, &r);
    fill_uniform(X, N * D, 1.0f, &r);
    fill_uniform(extra, 2 * kN, 0.5f, &r);
    const int lens[1] = {n};
    run_forward(O, &l, &s, params, extra, X, lens, 1, N);
    for (int i = n * D; i < N * D; i++) X[i] = 1e3f;   /* what padding holds must not matter */
    run_forward(O_alone, &l, &s, params, extra, X, NULL, 1, n);
    expect_close(O, O_alone, n * D, 1e-6f, "linformer: padded rows");
    free(params); free(X); free(extra); free(O); free(O_alone);
}

static void test_linformer_in_the_block(void **state) {
    (void)state;
    enum { B = 2, N = 7, D = 6, H = 2, D_H = 3, F = 8, K = 3 };
    Rng r;
    rng_seed(&r, 17, 0);
    const Linformer l = {K, N};
    const BlockSelfAttention lin = linformer_hook(&l);
    const BlockSpec s = {.D = D, .H = H, .D_H = D_H, .F = F, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM,
                         .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN, .self_attention = &lin};
    BlockSpec plain = s;
    plain.self_attention = NULL;
    assert_int_equal(block_param_count(&s), block_param_count(&plain) + 2 * K * N);
    const int lens[B] = {N, 4};
    expect_block_gradients(&s, B, N, lens, 2 * K * N, &r, EPS, TOL, MAX_CHECKS, "linformer block");
}

static void test_linformer_refusals(void **state) {
    (void)state;
    const Linformer l = {4, 16};
    const BlockSelfAttention lin = linformer_hook(&l);
    BlockSpec s = {.D = 8, .H = 2, .D_H = 4, .F = 12, .norm_place = BLOCK_PRE_NORM, .norm = BLOCK_LAYERNORM,
                   .mlp = BLOCK_MLP_GELU, .attention = MULTI_HEAD_PLAIN, .self_attention = &lin};
    assert_int_equal(block_spec_check(&s), 0);
    s.causal = 1;
    assert_int_equal(block_spec_check(&s), -1);
    s.causal = 0;
    s.cross = 1;
    assert_int_equal(block_spec_check(&s), -1);
    s.cross = 0;
    s.attn_dropout = 0.1f;
    assert_int_equal(block_spec_check(&s), -1);
    assert_int_equal(linformer_check(&(Linformer){0, 16}), -1);
    assert_int_equal(linformer_check(&(Linformer){17, 16}), -1);
    assert_int_equal(linformer_check(&(Linformer){16, 16}), 0);
    assert_int_equal(linformer_check_length(&l, 16), 0);
    assert_int_equal(linformer_check_length(&l, 17), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linformer_start_is_pooling),
        cmocka_unit_test(test_linformer_identity_is_full_attention),
        cmocka_unit_test(test_linformer_equals_formulas),
        cmocka_unit_test(test_linformer_padding_is_left_out),
        cmocka_unit_test(test_linformer_in_the_block),
        cmocka_unit_test(test_linformer_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
